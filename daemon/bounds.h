/* bounds.h: the bounds of every limit a sandbox or a command can ask for (sbx.proto
 * Limits, CreateSandbox's timeouts, RunCommand's timeouts and output caps), in one
 * table, and the check of a requested value against them.
 *
 * Each limit has a floor, a ceiling and a step. The ceiling is a flag of sbxd where an
 * operator may want another (--max-memory, --max-tmp, --max-cpu-percent,
 * --max-processes, --max-disk, --max-commands, --max-queued, --max-sandbox-timeout,
 * --max-command-timeout), and never more than the mechanism that enforces the limit
 * holds on this host (struct bounds_host). The step is what that mechanism counts in
 * (pages, whole seconds): a value between two steps is refused with the value it would
 * have become, so that what a sandbox reports (SandboxInfo.policy.limits) is what holds.
 * A refusal names the limit, its value and the one bound it crosses, with what sets
 * that bound; nothing is ever clamped.
 *
 * Pure: nothing here logs or allocates, and bounds_host_probe is the one reader of the
 * host. Called by policy.c (a sandbox's limits and lifetime), command.c (a command's
 * timeouts and output caps) and hostfeat.c (the probe); the tests walk the table. */
#ifndef SBX_BOUNDS_H
#define SBX_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

struct config;

/* What bounds the limits on this host besides the flags, probed once at start-up. The
 * hard rlimits are sbxd's own: sbx-init and its commands inherit them and cannot raise
 * them (they run in a user namespace, without CAP_SYS_RESOURCE over the host), so a
 * larger limit would silently be that one. UINT64_MAX: unlimited; 0: not known (no
 * bound). */
struct bounds_host {
        uint64_t page_bytes;  /* what a cgroup and a tmpfs count in; 0: 4096 */
        uint64_t cpu_hard;    /* RLIMIT_CPU, seconds */
        uint64_t fsize_hard;  /* RLIMIT_FSIZE, bytes */
        uint64_t nofile_hard; /* RLIMIT_NOFILE */
        uint64_t nproc_hard;  /* RLIMIT_NPROC */
};

/* Fills *ret from this process (the page size and its hard rlimits). */
void bounds_host_probe(struct bounds_host *ret);

/* The largest value a sandbox's host memory allows as a default ceiling of memory and
 * /tmp: its RAM and swap (sysinfo), in whole pages, within SBX_MIN_MEMORY_BYTES and
 * SBX_MAX_MEMORY_BYTES. */
uint64_t bounds_host_memory(void);

/* 100 for each CPU this process may run on (sched_getaffinity), at most
 * SBX_MAX_CPU_PERCENT: the default ceiling of cpu_percent. */
uint32_t bounds_host_cpu_percent(void);

/* The unit a limit counts in, as messages print it. */
enum limit_unit { LIMIT_UNIT_COUNT = 0, LIMIT_UNIT_BYTES, LIMIT_UNIT_MS };

/* What the mechanism makes of a value between two steps. */
enum limit_round { LIMIT_ROUND_DOWN = 0, LIMIT_ROUND_UP, LIMIT_ROUND_VARIES };

/* The bounds of one limit. */
struct limit_bound {
        const char *name; /* as the request names it: "memory", "timeout_ms" */
        enum limit_unit unit;
        uint64_t floor;
        uint64_t ceiling;
        const char
                *ceiling_by; /* what sets the ceiling: "sbxd --max-memory"; NULL: nothing to say */
        uint64_t step;       /* what the mechanism counts in; 0 or 1: any whole number */
        enum limit_round round;
        const char *step_name; /* "pages", "seconds" */
        const char *step_by;   /* what counts in steps: "a memory cgroup" */
};

/* Where the bounds come from: the flags, the host, and how the sandbox's process limit
 * is enforced. */
struct bounds_ctx {
        const struct config *cfg;
        const struct bounds_host *host;
        int processes_by_rlimit; /* RLIMIT_NPROC holds the process limit (no pids cgroup) */
};

/* The limits of sbx.proto's Limits that have bounds, in the order a request's are
 * checked (core_dumps, a switch, has none). */
enum limit_id {
        LIMIT_MEMORY = 0,
        LIMIT_CPU_SECONDS,
        LIMIT_CPU_PERCENT,
        LIMIT_PROCESSES,
        LIMIT_FILE_SIZE,
        LIMIT_OPEN_FILES,
        LIMIT_TMP,
        LIMIT_COMMANDS,
        LIMIT_QUEUED_COMMANDS,
        LIMIT_DISK,
        LIMIT_DISK_INODES,
        LIMIT_N
};

/* The Limits field of each (its name in sbx.proto). */
extern const char *const bounds_fields[LIMIT_N];

/* The bounds of limit id for c; lim (may be NULL) is the request, whose disk_bytes
 * bounds disk_inodes. */
void bounds_of(const struct bounds_ctx *c, enum limit_id id, const Sbx__V1__Limits *lim,
               struct limit_bound *ret);

/* Checks v against b: 0, or -EINVAL with a one-line reason in err that opens with b's
 * name and v ("memory 5 bytes is below the minimum of 4194304 bytes (4 MiB)"). */
int bounds_check(const struct limit_bound *b, uint64_t v, char *err, size_t errlen);

/* The same for a value that may not be whole, or a number at all (cpu_seconds). */
int bounds_check_double(const struct limit_bound *b, double v, char *err, size_t errlen);

/* Checks every limit lim (a request's, before any default) sets, in enum limit_id's
 * order: 0, or -EINVAL with err for the first out of its bounds. */
int bounds_check_sandbox(const struct bounds_ctx *c, const Sbx__V1__Limits *lim, char *err,
                         size_t errlen);

/* The bounds of a sandbox's lifetime (CreateSandbox.timeout_ms, 1 ms to
 * --max-sandbox-timeout) and of its idle timeout (idle_timeout_ms when not 0, which is
 * none: 1 ms to the same). */
void bounds_lifetime(const struct config *cfg, struct limit_bound *ret);
void bounds_idle(const struct config *cfg, struct limit_bound *ret);

/* Checks a RunCommand's timeout_ms (a given one: 1 ms to --max-command-timeout; 0, for
 * a background command, is none), queue_timeout_ms (0 to --max-command-timeout),
 * max_stdout_bytes and max_stderr_bytes (0 to SBX_MAX_OUTPUT_BYTES). 0, or -EINVAL
 * with err (ending "; nothing was run"). An absent timeout_ms is the caller's to refuse. */
int bounds_check_command(const struct config *cfg, const Sbx__V1__RunCommand *req, char *err,
                         size_t errlen);

#endif
