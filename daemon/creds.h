/* creds.h: taking another user's filesystem identity for a while, on this thread only.
 *
 * The daemon acts for two kinds of users: the caller of a request (whose host paths it
 * opens, judged with the caller's rights, never its own) and a sandbox's user (as whom
 * file operations run, so permissions apply as inside). creds_enter() sets this
 * thread's fsuid, fsgid and supplementary groups to theirs and clears every effective
 * capability (no CAP_DAC_OVERRIDE, no CAP_DAC_READ_SEARCH, no CAP_SYS_PTRACE over
 * /proc); creds_leave() puts the daemon's own back. Raw system calls: glibc's wrappers
 * would change every thread of the process. Only a daemon running as root switches; a
 * rootless daemon already has no more rights than the one user it serves, and enter
 * and leave do nothing there. No logging; called by files.c and hostpath.c. */
#ifndef SBX_CREDS_H
#define SBX_CREDS_H

#include <linux/capability.h>
#include <stddef.h>
#include <sys/types.h>

/* What creds_enter saved, for creds_leave. Zero-initialise before creds_enter. */
struct creds {
        int switched;
        struct __user_cap_header_struct hdr;
        struct __user_cap_data_struct caps[2];
        gid_t *groups;
        int n_groups;
};

/* Takes uid, gid and the n supplementary groups (may be 0) as this thread's
 * filesystem identity, without effective capabilities. Does nothing unless the
 * process runs as root. Returns 0 or -errno (nothing changed then). creds_leave must
 * follow, whatever this returns. */
int creds_enter(struct creds *c, uid_t uid, gid_t gid, const gid_t *groups, size_t n);

/* Restores what creds_enter changed and frees what it saved. A failure to restore
 * aborts the daemon: it would no longer know whose rights it holds. Idempotent. */
void creds_leave(struct creds *c);

#endif
