/* bounds.c: the bounds of every limit a sandbox or a command can ask for; see bounds.h.
 *
 * bounds_of() is the table: a case per limit (grouped by what sets their ceilings),
 * each with its floor, its ceiling and what sets it, and its step. The checks only compare and word
 * the refusal. Where a mechanism would change a value silently, the kernel's own rounding is the
 * reference: a cgroup's memory.max and memory.limit_in_bytes count whole pages, rounding down
 * (mm/page_counter.c, page_counter_memparse); a tmpfs's size= counts whole pages,
 * rounding up (mm/shmem.c, DIV_ROUND_UP), and a size whose rounding overflows is 0
 * pages, which tmpfs takes for "no limit"; RLIMIT_CPU counts whole seconds; a process
 * without CAP_SYS_RESOURCE over the host cannot raise a hard rlimit, and sbx-init, in
 * a user namespace, clamps what it cannot raise (init/spawn.c). */
#include "bounds.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "config.h"
#include "disk.h"
#include "sbx_limits.h"

/* The block /workspace's size is counted in by every means that enforces it: a page of
 * a tmpfs, 1 KiB quota blocks, the 1 or 4 KiB blocks of an ext4 image. */
#define DISK_STEP_BYTES 4096u

const char *const bounds_fields[LIMIT_N] = {"memory_bytes", "cpu_seconds",     "cpu_percent",
                                            "processes",    "file_size_bytes", "open_files",
                                            "tmp_bytes",    "commands",        "queued_commands",
                                            "disk_bytes",   "disk_inodes"};

static uint64_t hard_limit(int resource) {
        struct rlimit rl;

        if (getrlimit(resource, &rl) < 0)
                return 0;
        return rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
}

void bounds_host_probe(struct bounds_host *ret) {
        long page = sysconf(_SC_PAGESIZE);

        ret->page_bytes = page > 0 ? (uint64_t)page : 4096;
        ret->cpu_hard = hard_limit(RLIMIT_CPU);
        ret->fsize_hard = hard_limit(RLIMIT_FSIZE);
        ret->nofile_hard = hard_limit(RLIMIT_NOFILE);
        ret->nproc_hard = hard_limit(RLIMIT_NPROC);
}

uint64_t bounds_host_memory(void) {
        long page = sysconf(_SC_PAGESIZE);
        uint64_t p = page > 0 ? (uint64_t)page : 4096, total = 0;
        struct sysinfo si;

        if (sysinfo(&si) == 0)
                total = ((uint64_t)si.totalram + (uint64_t)si.totalswap) * si.mem_unit;
        total -= total % p;
        if (total < SBX_MIN_MEMORY_BYTES)
                return SBX_MIN_MEMORY_BYTES;
        return total > SBX_MAX_MEMORY_BYTES ? SBX_MAX_MEMORY_BYTES : total;
}

uint32_t bounds_host_cpu_percent(void) {
        cpu_set_t set;
        long n = 0;

        if (sched_getaffinity(0, sizeof(set), &set) == 0)
                n = CPU_COUNT(&set);
        if (n <= 0)
                n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n <= 0)
                n = 1;
        return n > (long)(SBX_MAX_CPU_PERCENT / 100) ? SBX_MAX_CPU_PERCENT : (uint32_t)n * 100u;
}

static uint64_t page_of(const struct bounds_host *h) {
        return h && h->page_bytes ? h->page_bytes : 4096;
}

/* Lowers b's ceiling to a hard rlimit of sbxd (0: unknown) less spare, saying so. */
static void cap_by_hard(struct limit_bound *b, uint64_t hard, uint64_t spare, const char *by) {
        if (hard && hard != UINT64_MAX && hard > spare && hard - spare < b->ceiling) {
                b->ceiling = hard - spare;
                b->ceiling_by = by;
        }
}

/* The bounds of the limits an rlimit holds, or may hold (the process limit, where no
 * pids cgroup does): never above what sbxd's own hard rlimits let sbx-init set. */
static void bound_rlimited(const struct bounds_ctx *c, enum limit_id id, struct limit_bound *b) {
        const struct bounds_host *h = c->host;

        if (id == LIMIT_CPU_SECONDS) {
                *b = (struct limit_bound){.name = "cpu_seconds",
                                          .floor = SBX_MIN_CPU_SECONDS,
                                          .ceiling = SBX_MAX_CPU_SECONDS,
                                          .step = 1,
                                          .round = LIMIT_ROUND_UP,
                                          .step_name = "seconds",
                                          .step_by = "RLIMIT_CPU"};
                /* A command is killed a second past its soft limit (rlimits.c). */
                cap_by_hard(b, h ? h->cpu_hard : 0, 1, "a second below sbxd's hard RLIMIT_CPU");
        } else if (id == LIMIT_PROCESSES) {
                *b = (struct limit_bound){.name = "processes",
                                          .floor = SBX_MIN_PROCESSES,
                                          .ceiling = c->cfg->max_processes,
                                          .ceiling_by = "sbxd --max-processes"};
                if (!c->cfg->max_processes || c->cfg->max_processes > SBX_MAX_PROCESSES) {
                        b->ceiling = SBX_MAX_PROCESSES;
                        b->ceiling_by = "PID_MAX_LIMIT, the most pids a pids cgroup holds";
                }
                if (c->processes_by_rlimit)
                        cap_by_hard(b, h ? h->nproc_hard : 0, 0, "sbxd's hard RLIMIT_NPROC");
        } else if (id == LIMIT_FILE_SIZE) {
                *b = (struct limit_bound){.name = "file_size",
                                          .unit = LIMIT_UNIT_BYTES,
                                          .floor = 1,
                                          .ceiling = SBX_MAX_FILE_SIZE_BYTES,
                                          .ceiling_by = "the largest file Linux holds"};
                cap_by_hard(b, h ? h->fsize_hard : 0, 0, "sbxd's hard RLIMIT_FSIZE");
        } else {
                *b = (struct limit_bound){.name = "open_files",
                                          .floor = SBX_MIN_OPEN_FILES,
                                          .ceiling = SBX_MAX_OPEN_FILES,
                                          .ceiling_by = "fs.nr_open's default"};
                cap_by_hard(b, h ? h->nofile_hard : 0, 0, "sbxd's hard RLIMIT_NOFILE");
        }
}

/* The bounds of the limits a cgroup or a tmpfs holds, whose ceilings are flags. */
static void bound_by_flag(const struct bounds_ctx *c, enum limit_id id, struct limit_bound *b) {
        const struct config *cfg = c->cfg;

        if (id == LIMIT_MEMORY)
                *b = (struct limit_bound){.name = "memory",
                                          .unit = LIMIT_UNIT_BYTES,
                                          .floor = SBX_MIN_MEMORY_BYTES,
                                          .ceiling = cfg->max_memory_bytes,
                                          .ceiling_by = "sbxd --max-memory",
                                          .step = page_of(c->host),
                                          .round = LIMIT_ROUND_DOWN,
                                          .step_name = "pages",
                                          .step_by = "a memory cgroup"};
        else if (id == LIMIT_TMP)
                *b = (struct limit_bound){.name = "tmp",
                                          .unit = LIMIT_UNIT_BYTES,
                                          .floor = SBX_MIN_TMP_BYTES,
                                          .ceiling = cfg->max_tmp_bytes,
                                          .ceiling_by = "sbxd --max-tmp",
                                          .step = page_of(c->host),
                                          .round = LIMIT_ROUND_UP,
                                          .step_name = "pages",
                                          .step_by = "a tmpfs"};
        else if (id == LIMIT_CPU_PERCENT)
                *b = (struct limit_bound){.name = "cpu_percent",
                                          .floor = 1,
                                          .ceiling = cfg->max_cpu_percent,
                                          .ceiling_by = "sbxd --max-cpu-percent"};
        else if (id == LIMIT_COMMANDS)
                *b = (struct limit_bound){.name = "commands",
                                          .floor = 1,
                                          .ceiling = cfg->max_commands_per_sandbox,
                                          .ceiling_by = "sbxd --max-commands"};
        else
                *b = (struct limit_bound){.name = "queued_commands",
                                          .floor = 0,
                                          .ceiling = cfg->max_queued_per_sandbox,
                                          .ceiling_by = "sbxd --max-queued"};
}

/* The bounds of /workspace's size and files; lim's disk_bytes bounds the files. */
static void bound_disk(const struct bounds_ctx *c, enum limit_id id, const Sbx__V1__Limits *lim,
                       struct limit_bound *b) {
        uint64_t page = page_of(c->host), bytes = lim && lim->has_disk_bytes ? lim->disk_bytes : 0;

        if (id == LIMIT_DISK) {
                /* A tmpfs rounds up to a page, a quota to 1 KiB, an image down to its block
                 * (1 or 4 KiB, as mke2fs chooses for the size). */
                *b = (struct limit_bound){.name = "disk",
                                          .unit = LIMIT_UNIT_BYTES,
                                          .floor = DISK_MIN_BYTES,
                                          .ceiling = c->cfg->max_disk_bytes,
                                          .ceiling_by = "sbxd --max-disk",
                                          .step = page > DISK_STEP_BYTES ? page : DISK_STEP_BYTES,
                                          .round = LIMIT_ROUND_VARIES,
                                          .step_name = "blocks",
                                          .step_by = "the filesystem that enforces it"};
                return;
        }
        *b = (struct limit_bound){.name = "disk_inodes",
                                  .floor = DISK_MIN_INODES,
                                  .ceiling = DISK_MAX_INODES,
                                  .ceiling_by = "ext4's most"};
        if (bytes / DISK_BYTES_PER_INODE < b->ceiling) {
                b->ceiling = bytes / DISK_BYTES_PER_INODE;
                b->ceiling_by = "one per 2048 bytes of disk";
        }
}

void bounds_of(const struct bounds_ctx *c, enum limit_id id, const Sbx__V1__Limits *lim,
               struct limit_bound *b) {
        switch (id) {
        case LIMIT_CPU_SECONDS:
        case LIMIT_PROCESSES:
        case LIMIT_FILE_SIZE:
        case LIMIT_OPEN_FILES:
                bound_rlimited(c, id, b);
                return;
        case LIMIT_MEMORY:
        case LIMIT_TMP:
        case LIMIT_CPU_PERCENT:
        case LIMIT_COMMANDS:
        case LIMIT_QUEUED_COMMANDS:
                bound_by_flag(c, id, b);
                return;
        case LIMIT_DISK:
        case LIMIT_DISK_INODES:
                bound_disk(c, id, lim, b);
                return;
        case LIMIT_N:
        default:
                /* No such limit: nothing fits (floor above ceiling). */
                *b = (struct limit_bound){.name = "(unknown limit)", .floor = 1, .ceiling = 0};
                return;
        }
}

void bounds_lifetime(const struct config *cfg, struct limit_bound *b) {
        *b = (struct limit_bound){.name = "timeout_ms",
                                  .unit = LIMIT_UNIT_MS,
                                  .floor = 1,
                                  .ceiling = cfg->max_sandbox_lifetime_ms,
                                  .ceiling_by = "sbxd --max-sandbox-timeout"};
}

void bounds_idle(const struct config *cfg, struct limit_bound *b) {
        bounds_lifetime(cfg, b);
        b->name = "idle_timeout_ms";
}

/* ---- the checks and their words ---------------------------------------------------- */

static const char *const unit_names[] = {
        [LIMIT_UNIT_COUNT] = "", [LIMIT_UNIT_BYTES] = " bytes", [LIMIT_UNIT_MS] = " ms"};

/* v with b's unit: "4194304 bytes", "1 byte", "60000 ms", "8". */
static void format_value(const struct limit_bound *b, uint64_t v, char *buf, size_t len) {
        snprintf(buf, len, "%llu%s", (unsigned long long)v,
                 b->unit == LIMIT_UNIT_BYTES && v == 1 ? " byte" : unit_names[b->unit]);
}

/* A bound of b: its value, then in parentheses the size in the largest binary unit that
 * holds it exactly, when that reads better ("4 MiB", not "24683772 KiB"), and what sets
 * it, when there is either. */
static void format_bound(const struct limit_bound *b, uint64_t v, const char *by, char *buf,
                         size_t len) {
        static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        char human[32] = "";
        int n, u = -1;
        uint64_t x = v;

        while (b->unit == LIMIT_UNIT_BYTES && x >= 1024 && x % 1024 == 0 && u < 5) {
                x /= 1024;
                u++;
        }
        if (u >= 0 && x < 1024)
                snprintf(human, sizeof(human), "%llu %s", (unsigned long long)x, units[u]);
        format_value(b, v, buf, len);
        n = (int)strlen(buf);
        if (human[0] || by)
                snprintf(buf + n, len - (size_t)n, " (%s%s%s)", human, human[0] && by ? ", " : "",
                         by ? by : "");
}

static int refuse(char *err, size_t errlen, const struct limit_bound *b, const char *value,
                  int below) {
        char bound[160];

        format_bound(b, below ? b->floor : b->ceiling, below ? NULL : b->ceiling_by, bound,
                     sizeof(bound));
        snprintf(err, errlen, "%s %s is %s of %s", b->name, value,
                 below ? "below the minimum" : "above the maximum", bound);
        return -EINVAL;
}

/* The refusal of a value between two steps: what the mechanism would make of it, or
 * (where that depends on the means) the two whole numbers of steps around it. */
static int refuse_step(char *err, size_t errlen, const struct limit_bound *b, const char *value,
                       uint64_t down) {
        char step[64] = "", lo[48], hi[48];
        int n;

        if (b->unit == LIMIT_UNIT_BYTES)
                snprintf(step, sizeof(step), " of %llu bytes", (unsigned long long)b->step);
        n = snprintf(err, errlen, "%s %s is not a whole number of %s%s, which %s counts: ", b->name,
                     value, b->step_name, step, b->step_by);
        if (n < 0 || (size_t)n >= errlen)
                return -EINVAL;
        format_value(b, down, lo, sizeof(lo));
        format_value(b, down + b->step, hi, sizeof(hi));
        if (b->round == LIMIT_ROUND_VARIES)
                snprintf(err + n, errlen - (size_t)n, "ask for %s or %s", lo, hi);
        else
                snprintf(err + n, errlen - (size_t)n, "it would be %s; ask for that",
                         b->round == LIMIT_ROUND_UP ? hi : lo);
        return -EINVAL;
}

int bounds_check(const struct limit_bound *b, uint64_t v, char *err, size_t errlen) {
        char value[48];

        format_value(b, v, value, sizeof(value));
        if (v < b->floor)
                return refuse(err, errlen, b, value, 1);
        if (v > b->ceiling)
                return refuse(err, errlen, b, value, 0);
        if (b->step > 1 && v % b->step)
                return refuse_step(err, errlen, b, value, v - v % b->step);
        return 0;
}

int bounds_check_double(const struct limit_bound *b, double v, char *err, size_t errlen) {
        struct limit_bound whole = *b;
        char value[48];

        /* The shortest form that reads back as v: 1.5, 1e-300, not 1.5000000000000000. */
        snprintf(value, sizeof(value), "%.15g", v);
        if (!isnan(v) && strtod(value, NULL) != v)
                snprintf(value, sizeof(value), "%.17g", v);
        if (isnan(v)) {
                snprintf(err, errlen, "%s %s is not a number", b->name, value);
                return -EINVAL;
        }
        if (v < (double)b->floor)
                return refuse(err, errlen, b, value, 1);
        if (v > (double)b->ceiling)
                return refuse(err, errlen, b, value, 0);
        /* Whole numbers only (the one such limit, cpu_seconds, has a step of 1). */
        whole.step = 1;
        if (v != floor(v))
                return refuse_step(err, errlen, &whole, value, (uint64_t)floor(v));
        return 0;
}

/* The has_ flag and the value of the Limits field of id in lim, through its descriptor:
 * one walk over the table, whatever the field's type. 0 when it is not set. */
static int field_value(const Sbx__V1__Limits *lim, enum limit_id id, uint64_t *ret_u, double *ret_d,
                       int *ret_is_double) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
                &sbx__v1__limits__descriptor, bounds_fields[id]);
        const char *base = (const char *)lim;

        if (!f || !*(const protobuf_c_boolean *)(const void *)(base + f->quantifier_offset))
                return 0;
        *ret_is_double = f->type == PROTOBUF_C_TYPE_DOUBLE;
        if (f->type == PROTOBUF_C_TYPE_DOUBLE)
                memcpy(ret_d, base + f->offset, sizeof(*ret_d));
        else if (f->type == PROTOBUF_C_TYPE_UINT64)
                memcpy(ret_u, base + f->offset, sizeof(*ret_u));
        else {
                uint32_t v32;
                memcpy(&v32, base + f->offset, sizeof(v32));
                *ret_u = v32;
        }
        return 1;
}

int bounds_check_sandbox(const struct bounds_ctx *c, const Sbx__V1__Limits *lim, char *err,
                         size_t errlen) {
        int id;

        if (lim->has_disk_inodes && !lim->has_disk_bytes) {
                snprintf(err, errlen, "disk_inodes needs disk_bytes (sbx create --disk SIZE)");
                return -EINVAL;
        }
        for (id = 0; id < LIMIT_N; id++) {
                struct limit_bound b;
                uint64_t u = 0;
                double d = 0;
                int is_double = 0, r;

                if (!field_value(lim, (enum limit_id)id, &u, &d, &is_double))
                        continue;
                bounds_of(c, (enum limit_id)id, lim, &b);
                r = is_double ? bounds_check_double(&b, d, err, errlen)
                              : bounds_check(&b, u, err, errlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

int bounds_check_command(const struct config *cfg, const Sbx__V1__RunCommand *req, char *err,
                         size_t errlen) {
        struct limit_bound b = {.name = "timeout_ms",
                                .unit = LIMIT_UNIT_MS,
                                .floor = 1,
                                .ceiling = cfg->max_command_timeout_ms,
                                .ceiling_by = "sbxd --max-command-timeout"};
        struct limit_bound out = {.name = "max_stdout_bytes",
                                  .unit = LIMIT_UNIT_BYTES,
                                  .ceiling = SBX_MAX_OUTPUT_BYTES,
                                  .ceiling_by = "the most output kept per stream"};
        int background = req->has_background && req->background, r = 0;

        /* 0 is no timeout at all, for a background command only (command.c says so). */
        if (req->has_timeout_ms && !(background && req->timeout_ms == 0))
                r = bounds_check(&b, req->timeout_ms, err, errlen);
        b.name = "queue_timeout_ms";
        b.floor = 0;
        if (r == 0 && req->has_queue_timeout_ms)
                r = bounds_check(&b, req->queue_timeout_ms, err, errlen);
        if (r == 0 && req->has_max_stdout_bytes)
                r = bounds_check(&out, req->max_stdout_bytes, err, errlen);
        out.name = "max_stderr_bytes";
        if (r == 0 && req->has_max_stderr_bytes)
                r = bounds_check(&out, req->max_stderr_bytes, err, errlen);
        if (r < 0) {
                size_t n = strnlen(err, errlen);
                snprintf(err + n, errlen - n, "; nothing was run");
        }
        return r;
}
