/* cgroup.h: cgroups for sandboxes and commands, on cgroup v2 or v1, beneath the
 * daemon's own cgroup and nowhere else.
 *
 * Owns the detected hierarchy paths (struct cgroup_env) and each created group
 * (struct cgroup). Called by the sandbox layer. Every path is built from a root that
 * the caller gives (normally "/sys/fs/cgroup") and the daemon's own cgroup read from a
 * /proc/self/cgroup file, so the unit tests run the same code against a fake tree.
 * Nothing here logs; failures are -errno. */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_version { CGROUP_NONE = 0, CGROUP_V1 = 1, CGROUP_V2 = 2 };

/* v1 controllers sbxd uses (each its own hierarchy). */
enum cgroup_ctrl { CG_MEMORY = 0, CG_PIDS, CG_CPU, CG_FREEZER, CG_N };

struct cgroup_env {
        enum cgroup_version version;
        /* v2: the directory under which sbxd creates groups (a child of the daemon's own
         * cgroup) and the controllers enabled for it. v1: per controller, the directory
         * under which sbxd creates groups, or NULL when that hierarchy is unusable. */
        char *base[CG_N];
        char *v2_base;
        int v2_controllers; /* bit per enum cgroup_ctrl */
        /* The daemon's own group, where cgroup_env_limit_self bounds it: v2 its leaf
         * "<own>/daemon"; v1, per controller, "<own>/<base_name>.daemon" once made. */
        char *v2_self;
        char *self[CG_N];
        /* How group directories are made: mkdir(2), or in unit tests a function that
         * also lays out the control files the kernel would create. */
        int (*mkdir_fn)(const char *path, mode_t mode);
};

struct cgroup {
        struct cgroup_env *env;
        char *path[CG_N]; /* v1: per controller; NULL where absent */
        char *v2_path;
        /* The event counters read before and after every command (OOM kills, refused
         * forks): opened at the first read and kept, -1 until then. */
        int oom_fd, pids_fd;
};

/* Finds the hierarchies under root (e.g. "/sys/fs/cgroup") and the daemon's own cgroup
 * in self_cgroup_file (e.g. "/proc/self/cgroup"), and prepares a base directory named
 * base_name beneath the daemon's own cgroup. On v2 the daemon first moves itself into a
 * leaf ("<own>/daemon") so its own cgroup may enable controllers for children (the
 * no-internal-processes rule); self_pid is the pid to move (0: none, for tests).
 * Returns 0 with *ret set (version CGROUP_NONE when nothing is usable), or -errno. */
int cgroup_env_new(const char *root, const char *self_cgroup_file, const char *base_name,
                   pid_t self_pid, struct cgroup_env **ret);

/* As cgroup_env_new, making directories with mkdir_fn (for tests of a fake tree). */
int cgroup_env_new_with(const char *root, const char *self_cgroup_file, const char *base_name,
                        pid_t self_pid, int (*mkdir_fn)(const char *path, mode_t mode),
                        struct cgroup_env **ret);
void cgroup_env_free(struct cgroup_env *e);

/* Bounds the daemon itself, apart from its sandboxes (whose groups are not below it):
 * memory_max bytes (memory.max on v2, memory.limit_in_bytes on v1) and tasks_max tasks
 * (pids.max), 0 for none. On v2 in its leaf; on v1 in a group "<base>.daemon" beside
 * the base that self_pid (the daemon) is moved into. Returns 0; -ENOENT when the
 * controller a bound needs is not there; or -errno of the write that failed. */
int cgroup_env_limit_self(struct cgroup_env *e, pid_t self_pid, uint64_t memory_max,
                          uint64_t tasks_max);

/* Undoes cgroup_env_limit_self on v1 at exit: self_pid back to its own group, and the
 * groups made for it removed. */
void cgroup_env_unlimit_self(struct cgroup_env *e, pid_t self_pid);

/* 1 when groups made in e get controller ctrl (a v1 hierarchy, or enabled on v2). */
int cgroup_env_has(const struct cgroup_env *e, enum cgroup_ctrl ctrl);

/* Removes the (empty) base directories at shutdown; a busy one is left alone. */
void cgroup_env_remove_base(struct cgroup_env *e);
const char *cgroup_version_name(enum cgroup_version v);
/* The name of a v1 controller ("memory", ...), as the kernel knows it. */
const char *cgroup_v1_name(enum cgroup_ctrl c);

/* Creates the group rel (e.g. "sbx-ID" or "sbx-ID/cmd-3") under the base in every
 * usable hierarchy. On v2 a group that will hold processes must be a leaf (leaf != 0:
 * no controllers enabled for children; the kernel refuses processes in a group that
 * enables them, "no internal processes"); a group with children gets its controllers
 * enabled for them (leaf == 0). Returns 0 or -errno (nothing left behind on failure). */
int cgroup_create(struct cgroup_env *e, const char *rel, int leaf, struct cgroup **ret);

/* Takes hold of the existing group rel (made by an earlier daemon) in every hierarchy
 * where it exists. -ENOENT when it exists nowhere. */
int cgroup_attach(struct cgroup_env *e, const char *rel, struct cgroup **ret);

/* Limits; a zero field means "leave unset". Each enforced limit sets its bit in
 * *ret_enforced (bit per enum cgroup_ctrl); the caller names the others in warnings. */
struct cgroup_limits {
        uint64_t memory_bytes;
        uint32_t pids;
        uint32_t cpu_percent;
};
int cgroup_set_limits(struct cgroup *g, const struct cgroup_limits *l, int *ret_enforced);

/* Opens what a child needs to join the group before execve: v1 the cgroup.procs files
 * (O_WRONLY), v2 the group directory (O_DIRECTORY). Returns the number of fds put in
 * fds (at most max), or -errno. *ret_v2 says which kind. The caller closes them. */
int cgroup_join_fds(struct cgroup *g, int *fds, size_t max, int *ret_v2);

/* v2: the group's cgroup.procs becomes uid:gid's, so that a process of theirs may move
 * processes into it (and, for the group a sandbox's groups are below, between them: the
 * kernel asks for write access to the common ancestor's): the root of an image sandbox's
 * own user namespace, which is no root of the host's, joins its commands' groups. v1: 0,
 * nothing to do (commands stay in the sandbox's group there). 0 or -errno. */
int cgroup_delegate_procs(struct cgroup *g, uid_t uid, gid_t gid);

/* Thaws the group's processes (v2 cgroup.freeze 0, v1 freezer.state THAWED): a daemon
 * that died during a snapshot left them frozen. 0, or -errno (-ENOENT: no freezer). */
int cgroup_thaw(struct cgroup *g);

/* Kills every process in the group: v2 cgroup.kill (falls back to the v1 way when
 * absent), v1 freeze, SIGKILL each pid in cgroup.procs, thaw. Returns the number of
 * processes signalled (v1) or 0, or -errno. */
int cgroup_kill(struct cgroup *g);

/* Number of processes in the group (0 when empty), or -errno. */
int cgroup_count_procs(struct cgroup *g);

/* Peak memory use in bytes (v2 memory.peak, v1 memory.max_usage_in_bytes). -ENOENT
 * when not available. */
int cgroup_peak_memory(struct cgroup *g, uint64_t *ret);

/* Number of OOM kills in the group so far (v2 memory.events, v1 memory.oom_control). */
int cgroup_oom_kills(struct cgroup *g, uint64_t *ret);

/* Number of times a fork failed at pids.max (v2 pids.events "max", v1 pids.events). */
int cgroup_pids_max_events(struct cgroup *g, uint64_t *ret);

/* Frees g without touching its directories (they stay, or were removed by
 * cgroup_remove_tree). Accepts NULL. */
void cgroup_forget(struct cgroup *g);

/* Removes the group's directories (the group must be empty; children first) and frees
 * g. Returns 0 or the first -errno; g is freed either way. Accepts NULL. */
int cgroup_destroy(struct cgroup *g);

/* Removes rel under the base in every hierarchy, children first, killing what is left
 * (used to clean up after a crashed daemon). Missing directories are not an error. */
int cgroup_remove_tree(struct cgroup_env *e, const char *rel);

/* Calls cb with the name of each group directly under the base (v1: in any of the
 * hierarchies, each name once) until it returns non-zero, which is returned; -ENOMEM
 * before any call when out of memory. */
int cgroup_foreach_child(struct cgroup_env *e, int (*cb)(const char *name, void *ud), void *ud);

#endif
