/* enforce.h: how each limit of a sandbox's policy is enforced (cgroup v2, cgroup v1,
 * rlimit, or not at all), decided once when the sandbox is set up, and the report of it
 * that SandboxInfo and every CommandResult carry.
 *
 * Pure functions over the policy and what the host offers; called by the sandbox and
 * command modules. Nothing here logs or allocates. */
#ifndef SBX_ENFORCE_H
#define SBX_ENFORCE_H

#include <stddef.h>

#include "sbx.pb-c.h"

struct cgroup;

/* Indexes of the limits in enforcement reports. */
enum limit_kind {
        LIM_MEMORY = 0,
        LIM_CPU_SECONDS,
        LIM_CPU_PERCENT,
        LIM_PROCESSES,
        LIM_FILE_SIZE,
        LIM_OPEN_FILES,
        LIM_CORE_DUMPS,
        LIM_TMP,
        LIM_DISK, /* set by the sandbox (disk.h decides), NONE here */
        LIM_N
};

/* Their names on the wire (LimitEnforcement.limit). */
extern char *const limit_names[LIM_N];

/* Most warnings enforce_apply gives (one per limit a sandbox may ask for). */
#define ENFORCE_MAX_WARNINGS 3

/* What enforce_apply decided. */
struct enforcement {
        Sbx__V1__Enforcement how[LIM_N];
        int cg_enforced;                            /* bit per enum cgroup_ctrl that holds */
        const char *warnings[ENFORCE_MAX_WARNINGS]; /* static strings: what is not enforced */
        size_t n_warnings;
};

/* Sets the limits l (NULL: none) on the sandbox's cgroup cg (NULL: it has none) and
 * says how each is enforced: by cg (of cgroup version cg_version) where it took, by
 * rlimit where commands get one (the process limit only in root mode, where each
 * sandbox has a uid of its own: rootless says whether not), else not at all (with a
 * warning). Core dumps are always an rlimit, /tmp's size always the size of its tmpfs. */
void enforce_apply(const Sbx__V1__Limits *l, struct cgroup *cg, int cg_version, int rootless,
                   struct enforcement *ret);

/* Fills the LIM_N entries of a report from how (enf and ptrs: LIM_N each, owned by the
 * caller, pointing at static names). Returns LIM_N. */
size_t enforce_report(const Sbx__V1__Enforcement how[LIM_N], Sbx__V1__LimitEnforcement *enf,
                      Sbx__V1__LimitEnforcement **ptrs);

#endif
