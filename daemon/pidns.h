/* pidns.h: PID namespaces and the sandbox inits at their heads, as /proc and nsfs show
 * them to the daemon.
 *
 * Every sandbox of every sbxd on the host, root or rootless, is a PID namespace whose
 * PID 1 is sbx-init (its argv[0] is "sbx-init", whatever the binary's path, and its
 * sandboxed processes can neither change that nor leave the namespace: their filter
 * denies ptrace, setns and unshare). admit.c uses that to refuse every sandboxed
 * process, whichever daemon made its sandbox; recover.c to tell a recorded init from a
 * process that took its pid since. Owns nothing past each call; never logs. */
#ifndef SBX_PIDNS_H
#define SBX_PIDNS_H

#include <stdbool.h>
#include <sys/types.h>

/* 1 when the process pid (of the daemon's PID namespace) runs sbx-init as PID 1 of a
 * PID namespace of its own (the last field of its NSpid is 1); 0 when it is another
 * process; -ENOENT when there is no such process or /proc hides it (hidepid), -EACCES
 * when its command line may not be read, or another -errno. */
int pidns_is_sbx_init(pid_t pid);

/* What pidns_sandboxed() found. */
enum pidns_verdict {
        PIDNS_FREE,      /* the namespace and every one above it are no sandbox's */
        PIDNS_SANDBOXED, /* it or one above it is a sandbox's (of any sbxd) */
        PIDNS_OUTSIDE,   /* not below the daemon's own: nothing above it can be seen */
};

/* Tells whether the PID namespace nsfd (an nsfs descriptor, borrowed), or any between it
 * and the daemon's own, is a sandbox's: one is_ours() says is the daemon's own (given
 * its device and inode; may be NULL), or one whose PID 1 is sbx-init. The daemon's own
 * namespace and those above it are not looked at. Returns 0 with *ret; -ESRCH when a
 * namespace's PID 1 is gone (every process of it is being killed); -ENOENT or -EACCES
 * when one's PID 1 cannot be looked at; or another -errno. */
int pidns_sandboxed(int nsfd, bool (*is_ours)(const void *ctx, dev_t dev, ino_t ino),
                    const void *ctx, enum pidns_verdict *ret);

#endif
