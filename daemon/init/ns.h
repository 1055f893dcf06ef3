/* ns.h: the namespaces of a sandbox (user, mount, pid, ipc, uts, cgroup, net).
 *
 * Stage 0 calls ns_enter_user() (rootless only) then ns_unshare_sandbox(), and forks
 * PID 1, which calls ns_set_hostname() and, with its own network namespace,
 * ns_loopback_up() and, for NETWORK_ALLOWLIST, ns_proxy_listen(). Each verb returns 0 or -errno and
 * describes a failure in err. */
#ifndef SBX_INIT_NS_H
#define SBX_INIT_NS_H

#include <stdbool.h>
#include <sys/types.h>

#include "util.h"

/* Who the caller maps into its user namespace (Setup's outer and subordinate ids). */
struct ns_ids {
        uid_t outer_uid; /* the caller's own ids, mapped to 0 */
        gid_t outer_gid;
        gid_t subgid;    /* a subordinate gid of the user's (/etc/subgid), 0 for none */
        uid_t subuid;    /* with n_ids: a subordinate uid of the user's (/etc/subuid) */
        unsigned n_ids;  /* an image's sandbox: ids 1 .. n_ids are subuid.. and subgid..;
                          * 0: none */
};

/* Moves the caller into a new user namespace where ids->outer_uid/outer_gid (the
 * caller's own ids) are mapped to 0. With n_ids (an image's sandbox), ids 1 .. n_ids
 * are the user's subordinate ids from subuid and subgid, mapped by newuidmap(1) and
 * newgidmap(1), setgroups(2) stays allowed and the groups are set to none; a helper
 * that cannot map them fails the call. Otherwise the caller's supplementary groups (a
 * group's rights reach as far as the sandbox: a daemon's socket group, a group-readable
 * file) are dropped where the host lets them be: with subgid and newgidmap(1)
 * installed, gid 1 is mapped to subgid by the helper, which leaves setgroups(2)
 * allowed, and the groups are set to none. Otherwise nothing else is mapped and
 * setgroups(2) is denied, and the groups stay: *groups_kept says so (false when there
 * were none). The caller must be single-threaded. */
int ns_enter_user(const struct ns_ids *ids, bool *groups_kept, struct util_err *err);

/* Bounds the inotify watches and instances the processes of the caller's user namespace
 * (one it made or entered, with its capabilities there) may make, which the kernel
 * charges to the namespace's owner on the host as well (its ucounts): a share of the
 * host's (SBX_SANDBOX_INOTIFY_SHARE), written to /proc/sys/user/max_inotify_watches and
 * max_inotify_instances, which only CAP_SYS_RESOURCE in this namespace may change
 * (commands never have it). Where /proc/sys cannot be written (a container's), a warning
 * in warn instead. 0, or -errno with err. */
int ns_bound_inotify(struct util_warnings *warn, struct util_err *err);

/* Unshares the mount, PID, IPC, UTS and cgroup namespaces, and the network namespace
 * when network_none. The next fork() creates PID 1 of the new PID namespace. */
int ns_unshare_sandbox(bool network_none, struct util_err *err);

/* Sets the hostname of the (new) UTS namespace; an empty name becomes "sandbox". */
int ns_set_hostname(const char *name, struct util_err *err);

/* Brings the loopback interface of the current network namespace up. */
int ns_loopback_up(struct util_err *err);

/* A listening TCP socket on 127.0.0.1:port of the current network namespace, for the
 * daemon's egress proxy (init.proto Setup.proxy_port): close-on-exec, so that no
 * command inherits it. Returns the fd or -errno. */
int ns_proxy_listen(unsigned port, struct util_err *err);

#endif
