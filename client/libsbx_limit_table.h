/* libsbx_limit_table.h: the one table of a sandbox's resource limits, internal to libsbx
 * and the sbx tool (libsbx.map exports only sbx_ names; this header is not installed).
 *
 * Each limit is one row of SBX_LIMIT_TABLE below; what walks the limits derives from it:
 * libsbx's conversion to and from the wire's Limits (libsbx_wire.c), the sbx tool's
 * `sbx create` flags and its text and JSON renderings of a policy (cli_sandbox.c), and
 * `sbx mcp`'s sandbox_info (cli_mcp_tools.c). The Python binding keeps its own list
 * (client/python/sbx/_lib.py, LIMITS), which tests/python/test_sbx.py compares with this
 * table, so that it cannot drift.
 *
 * Adding a limit: a field in sbx.proto's Limits and in struct sbx_limits of sbx.h (the
 * same name in both), a bit SBX_LIMIT_*, a row here, a row in the Python binding's LIMITS
 * and a field of its ResourceLimits, then the daemon's side (validation in
 * daemon/bounds.c, the mechanism that holds it).
 *
 * Plain data, read only; any thread. */
#ifndef SBX_LIBSBX_LIMIT_TABLE_H
#define SBX_LIBSBX_LIMIT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx.h"

/* The C type of a limit's field, in struct sbx_limits and in the wire's Limits (where a
 * BOOL is a protobuf_c_boolean). */
enum libsbx_limit_type {
        LIBSBX_LIMIT_U64,
        LIBSBX_LIMIT_U32,
        LIBSBX_LIMIT_DOUBLE,
        LIBSBX_LIMIT_BOOL,
};

/* What a value counts, which says how `sbx create` parses its flag: BYTES with K/M/G/T
 * suffixes (cli_parse_bytes), SECONDS with a fraction (cli_parse_double), COUNT a whole
 * number up to the field's maximum (cli_parse_uint), SWITCH a yes/no (no flag today). */
enum libsbx_limit_unit {
        LIBSBX_UNIT_BYTES,
        LIBSBX_UNIT_SECONDS,
        LIBSBX_UNIT_COUNT,
        LIBSBX_UNIT_SWITCH,
};

/* X(bit, name, field, type, unit, min, flag, hint, mcp_name, mcp_unit), one per limit, in
 * the order every rendering lists them:
 *   bit       its SBX_LIMIT_* bit of sbx_limits.set;
 *   name      its word in `sbx info`'s limits line, and in SandboxInfo.enforcement and
 *             limits_hit where the daemon reports it;
 *   field     its field in struct sbx_limits and in the wire's Limits, and its JSON key
 *             (`sbx info --json`, `sbx mcp`'s sandbox_info);
 *   type      LIBSBX_LIMIT_* without the prefix; unit: LIBSBX_UNIT_* without the prefix;
 *   min       the least value `sbx create` takes (1: it refuses 0; for SECONDS, > 0);
 *   flag      its `sbx create` flag, NULL when there is none; hint: what the flag's
 *             error message says it expected;
 *   mcp_name  its word in `sbx mcp`'s sandbox_info text, NULL when sbx mcp does not show
 *             it (core_dumps: it never has; kept so that its output stays the same),
 *             and mcp_unit what follows the value there.
 * The comment above each row says the mechanism that holds the limit on the host. */
#define SBX_LIMIT_TABLE(X)                                                                         \
        /* the memory cgroup controller of the sandbox */                                          \
        X(SBX_LIMIT_MEMORY, "memory", memory_bytes, U64, BYTES, 1, "--memory",                     \
          "expected bytes, e.g. 512M or 2G", "memory", " bytes")                                   \
        /* RLIMIT_CPU of each command, whole seconds */                                            \
        X(SBX_LIMIT_CPU_SECONDS, "cpu_seconds", cpu_seconds, DOUBLE, SECONDS, 1, "--cpu-seconds",  \
          "expected seconds > 0", "cpu", " s")                                                     \
        /* the cpu cgroup controller's quota */                                                    \
        X(SBX_LIMIT_CPU_PERCENT, "cpu_percent", cpu_percent, U32, COUNT, 1, "--cpu-percent",       \
          "expected a percentage of one CPU, e.g. 50 or 200", "cpu_percent", "")                   \
        /* the pids cgroup controller, else RLIMIT_NPROC of the sandbox's own uid */               \
        X(SBX_LIMIT_PROCESSES, "processes", processes, U32, COUNT, 1, "--processes",               \
          "expected a count > 0", "processes", "")                                                 \
        /* RLIMIT_FSIZE */                                                                         \
        X(SBX_LIMIT_FILE_SIZE, "file_size", file_size_bytes, U64, BYTES, 0, "--file-size",         \
          "expected bytes, e.g. 100M", "file_size", " bytes")                                      \
        /* RLIMIT_NOFILE */                                                                        \
        X(SBX_LIMIT_OPEN_FILES, "open_files", open_files, U32, COUNT, 1, "--open-files",           \
          "expected a count > 0", "open_files", "")                                                \
        /* RLIMIT_CORE (0 unless allowed) */                                                       \
        X(SBX_LIMIT_CORE_DUMPS, "core_dumps", core_dumps, BOOL, SWITCH, 0, NULL, NULL, NULL, NULL) \
        /* the size of the private /tmp tmpfs (and /dev/shm) */                                    \
        X(SBX_LIMIT_TMP, "tmp", tmp_bytes, U64, BYTES, 1, "--tmp-size",                            \
          "expected bytes, e.g. 256M", "tmp", " bytes")                                            \
        /* sbxd's command slots of the sandbox */                                                  \
        X(SBX_LIMIT_COMMANDS, "commands", commands, U32, COUNT, 1, "--max-commands",               \
          "expected a count > 0 of commands running at once", "commands", " at once")              \
        /* sbxd's queue of commands waiting for a slot (0: none wait) */                           \
        X(SBX_LIMIT_QUEUED_COMMANDS, "queued_commands", queued_commands, U32, COUNT, 0,            \
          "--max-queued", "expected a count of commands waiting at once", "queued_commands", "")   \
        /* a project quota, a filesystem image or a tmpfs size for /workspace */                   \
        X(SBX_LIMIT_DISK, "disk", disk_bytes, U64, BYTES, 1, "--disk",                             \
          "expected the size of /workspace, e.g. 2G", "disk", " bytes (/workspace)")               \
        /* the inodes of the same quota, image or tmpfs */                                         \
        X(SBX_LIMIT_DISK_INODES, "disk_inodes", disk_inodes, U64, COUNT, 1, "--disk-inodes",       \
          "expected a count > 0 of files in /workspace", "disk_inodes", "")

/* One row of the table, as data. */
struct libsbx_limit {
        unsigned bit;
        const char *name;
        const char *field;
        enum libsbx_limit_type type;
        enum libsbx_limit_unit unit;
        unsigned min;
        const char *flag; /* "--memory", or NULL */
        const char *hint;
        const char *mcp_name; /* NULL: not shown by sbx mcp */
        const char *mcp_unit;
        size_t offset;      /* of field in struct sbx_limits */
        size_t wire_offset; /* of field, and of has_<field>, in Sbx__V1__Limits */
        size_t wire_has_offset;
};

#define LIBSBX_LIMIT_COUNT_ONE(...) +1
enum { LIBSBX_N_LIMITS = 0 SBX_LIMIT_TABLE(LIBSBX_LIMIT_COUNT_ONE) };

/* The rows of SBX_LIMIT_TABLE, in its order. */
extern const struct libsbx_limit libsbx_limits[LIBSBX_N_LIMITS];

/* Whether l gives limit t (its bit in l->set). */
bool libsbx_limit_given(const struct sbx_limits *l, const struct libsbx_limit *t);

/* t's value in l, of a U64, U32 or BOOL limit (a BOOL as 0 or 1). */
uint64_t libsbx_limit_uint(const struct sbx_limits *l, const struct libsbx_limit *t);

/* t's value in l, of a DOUBLE limit. */
double libsbx_limit_double(const struct sbx_limits *l, const struct libsbx_limit *t);

/* t's value in l as text, as `sbx info` and `sbx mcp` print it: a whole number, a
 * double as %g, a BOOL as yes or no. Returns buf. LIBSBX_LIMIT_TEXT_BYTES is room for any. */
#define LIBSBX_LIMIT_TEXT_BYTES 32
const char *libsbx_limit_text(const struct sbx_limits *l, const struct libsbx_limit *t,
                              char buf[LIBSBX_LIMIT_TEXT_BYTES]);

/* Gives limit t in l: v into its field (cut to the field's type; a BOOL as !!v), its bit
 * into l->set. libsbx_limit_set_double for a DOUBLE limit. */
void libsbx_limit_set_uint(struct sbx_limits *l, const struct libsbx_limit *t, uint64_t v);
void libsbx_limit_set_double(struct sbx_limits *l, const struct libsbx_limit *t, double v);

#endif
