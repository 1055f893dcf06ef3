/* enforce.c: which mechanism enforces each limit of a sandbox; see enforce.h. */
#include "enforce.h"

#include "cgroup.h"

char *const limit_names[LIM_N] = {"memory",     "cpu_seconds", "cpu_percent",
                                  "processes",  "file_size",   "open_files",
                                  "core_dumps", "tmp",         "disk"};

static void warn(struct enforcement *e, const char *msg) {
        if (e->n_warnings < ENFORCE_MAX_WARNINGS)
                e->warnings[e->n_warnings++] = msg;
}

void enforce_apply(const Sbx__V1__Limits *l, struct cgroup *cg, int cg_version, int rootless,
                   struct enforcement *e) {
        static const Sbx__V1__Limits none = SBX__V1__LIMITS__INIT;
        struct cgroup_limits cl = {0};
        Sbx__V1__Enforcement cg_kind = cg_version == CGROUP_V2 ? SBX__V1__ENFORCEMENT__CGROUP_V2
                                                               : SBX__V1__ENFORCEMENT__CGROUP_V1;
        int enforced = 0, i;

        for (i = 0; i < LIM_N; i++)
                e->how[i] = SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE;
        e->n_warnings = 0;
        if (!l)
                l = &none;
        if (l->has_memory_bytes)
                cl.memory_bytes = l->memory_bytes;
        if (l->has_processes)
                cl.pids = l->processes;
        if (l->has_cpu_percent)
                cl.cpu_percent = l->cpu_percent;
        if (cg)
                cgroup_set_limits(cg, &cl, &enforced);
        e->cg_enforced = enforced;
        if (l->has_memory_bytes) {
                if (enforced & (1 << CG_MEMORY))
                        e->how[LIM_MEMORY] = cg_kind;
                else
                        warn(e, "memory limit not enforced: no usable memory cgroup on this host "
                                "(see `sbx doctor`)");
        }
        if (l->has_processes) {
                if (enforced & (1 << CG_PIDS))
                        e->how[LIM_PROCESSES] = cg_kind;
                else if (!rootless)
                        e->how[LIM_PROCESSES] =
                                SBX__V1__ENFORCEMENT__RLIMIT; /* RLIMIT_NPROC of the sandbox's own
                                                                 uid */
                else
                        warn(e, "process limit not enforced: no usable pids cgroup and no "
                                "per-sandbox uid in rootless mode");
        }
        if (l->has_cpu_percent) {
                if (enforced & (1 << CG_CPU))
                        e->how[LIM_CPU_PERCENT] = cg_kind;
                else
                        warn(e, "cpu_percent not enforced: no usable cpu cgroup on this host");
        }
        if (l->has_cpu_seconds)
                e->how[LIM_CPU_SECONDS] = SBX__V1__ENFORCEMENT__RLIMIT;
        if (l->has_file_size_bytes)
                e->how[LIM_FILE_SIZE] = SBX__V1__ENFORCEMENT__RLIMIT;
        if (l->has_open_files)
                e->how[LIM_OPEN_FILES] = SBX__V1__ENFORCEMENT__RLIMIT;
        e->how[LIM_CORE_DUMPS] = SBX__V1__ENFORCEMENT__RLIMIT;
        /* sbx-init mounts /tmp (and /dev/shm) as a tmpfs of exactly tmp_bytes, which
         * bounds.h keeps a whole number of pages; without tmp_bytes, of its default. */
        e->how[LIM_TMP] = SBX__V1__ENFORCEMENT__TMPFS_SIZE;
}

size_t enforce_report(const Sbx__V1__Enforcement how[LIM_N], Sbx__V1__LimitEnforcement *enf,
                      Sbx__V1__LimitEnforcement **ptrs) {
        size_t i;
        for (i = 0; i < LIM_N; i++) {
                sbx__v1__limit_enforcement__init(&enf[i]);
                enf[i].limit = limit_names[i];
                enf[i].has_enforcement = 1;
                enf[i].enforcement = how[i];
                ptrs[i] = &enf[i];
        }
        return LIM_N;
}
