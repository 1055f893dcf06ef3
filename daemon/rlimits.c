/* rlimits.c: the per-command resource limits; see rlimits.h. */
#include "rlimits.h"

#include <errno.h>
#include <math.h>
#include <sys/resource.h>

void rlimits_init(struct rlimits *l) {
        l->n = 0;
}

int rlimits_add(struct rlimits *l, int resource, uint64_t soft, int has_hard, uint64_t hard) {
        Sbx__Init__V1__Rlimit *r;

        if (l->n >= RLIMITS_MAX)
                return -ENOSPC;
        r = &l->v[l->n];
        sbx__init__v1__rlimit__init(r);
        r->has_resource = r->has_soft = 1;
        r->resource = resource;
        r->soft = soft;
        r->has_hard = has_hard != 0;
        r->hard = has_hard ? hard : 0;
        l->ptrs[l->n] = r;
        l->n++;
        return 0;
}

int rlimits_for_command(struct rlimits *l, const Sbx__V1__Limits *lim,
                        Sbx__V1__Enforcement processes_how, uint64_t nofile_soft) {
        static const Sbx__V1__Limits none = SBX__V1__LIMITS__INIT;
        int r = 0; /* any failure is -ENOSPC: the ORed errors stay negative */

        if (!lim)
                lim = &none;
        rlimits_init(l);
        if (lim->has_cpu_seconds) {
                /* The soft limit sends SIGXCPU, a second later the hard one SIGKILL. */
                uint64_t s = (uint64_t)ceil(lim->cpu_seconds);
                r |= rlimits_add(l, RLIMIT_CPU, s, 1, s + 1);
        }
        if (lim->has_file_size_bytes)
                r |= rlimits_add(l, RLIMIT_FSIZE, lim->file_size_bytes, 1, lim->file_size_bytes);
        if (lim->has_open_files)
                r |= rlimits_add(l, RLIMIT_NOFILE, lim->open_files, 1, lim->open_files);
        else if (nofile_soft)
                /* The soft limit sbxd started with, not the one it raised for itself; the
                 * hard limit stays, so a program may raise it as it could outside. */
                r |= rlimits_add(l, RLIMIT_NOFILE, nofile_soft, 0, 0);
        r |= rlimits_add(l, RLIMIT_CORE, lim->has_core_dumps && lim->core_dumps ? RLIM_INFINITY : 0,
                         1, lim->has_core_dumps && lim->core_dumps ? RLIM_INFINITY : 0);
        if (lim->has_processes && processes_how == SBX__V1__ENFORCEMENT__RLIMIT)
                r |= rlimits_add(l, RLIMIT_NPROC, lim->processes, 1, lim->processes);
        return r < 0 ? -ENOSPC : 0;
}
