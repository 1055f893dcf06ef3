/* rlimits.h: the resource limits each command of a sandbox starts with (init.proto
 * Start.rlimits, set by the command's child before execve): cpu_seconds, file_size,
 * open_files, core_dumps and, where no pids cgroup holds the process limit, processes.
 *
 * A bounded list that refuses what does not fit instead of overflowing. Pure; used by
 * command.c, tested by check_command. */
#ifndef SBX_RLIMITS_H
#define SBX_RLIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "init.pb-c.h"
#include "sbx.pb-c.h"

/* Room for every limit a command can get (one per resource above), and spare. */
#define RLIMITS_MAX 8

struct rlimits {
        Sbx__Init__V1__Rlimit v[RLIMITS_MAX];
        Sbx__Init__V1__Rlimit *ptrs[RLIMITS_MAX]; /* for Start.rlimits */
        size_t n;
};

/* An empty list. */
void rlimits_init(struct rlimits *l);

/* Appends resource (RLIMIT_*) with soft, and hard unless has_hard is 0 (the hard limit
 * then stays as it is). Returns 0, or -ENOSPC when the list is full (nothing added). */
int rlimits_add(struct rlimits *l, int resource, uint64_t soft, int has_hard, uint64_t hard);

/* The rlimits of a command of a sandbox with limits lim (may be NULL), whose process
 * limit is enforced as processes_how (an rlimit only when no pids cgroup holds it), in a
 * daemon that started with the soft RLIMIT_NOFILE nofile_soft (0: unknown). Returns 0 or
 * -ENOSPC. */
int rlimits_for_command(struct rlimits *l, const Sbx__V1__Limits *lim,
                        Sbx__V1__Enforcement processes_how, uint64_t nofile_soft);

#endif
