/* creds.c: per-thread filesystem credentials; see creds.h. */
#include "creds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

void creds_leave(struct creds *c) {
        if (c->switched) {
                /* Capabilities first: setfsuid and setgroups need CAP_SETUID and CAP_SETGID
                 * back. None of this can fail for a process that keeps them in its
                 * permitted set; if it ever did, the daemon would no longer know whose
                 * rights it holds, and stopping is the only safe answer. */
                if (syscall(SYS_capset, &c->hdr, c->caps) < 0)
                        abort();
                setfsuid(geteuid());
                setfsgid(getegid());
                if ((uid_t)setfsuid((uid_t)-1) != geteuid() ||
                    (gid_t)setfsgid((gid_t)-1) != getegid())
                        abort();
                if (syscall(SYS_setgroups, (size_t)c->n_groups, c->groups) < 0)
                        abort();
                c->switched = 0;
        }
        free(c->groups);
        c->groups = NULL;
}

int creds_enter(struct creds *c, uid_t uid, gid_t gid, const gid_t *groups, size_t n) {
        struct __user_cap_data_struct none[2];
        int k;

        if (geteuid() != 0)
                return 0;
        k = getgroups(0, NULL);
        if (k < 0)
                return -errno;
        c->groups = calloc((size_t)k + 1, sizeof(*c->groups));
        if (!c->groups)
                return -ENOMEM;
        k = getgroups(k, c->groups);
        if (k < 0)
                return -errno;
        c->n_groups = k;
        c->hdr.version = _LINUX_CAPABILITY_VERSION_3;
        c->hdr.pid = 0;
        if (syscall(SYS_capget, &c->hdr, c->caps) < 0)
                return -errno;
        /* Raw system calls: this thread only (glibc's wrappers change every thread). */
        if (syscall(SYS_setgroups, n, n ? groups : NULL) < 0)
                return -errno;
        c->switched = 1;
        setfsgid(gid);
        setfsuid(uid);
        if ((gid_t)setfsgid((gid_t)-1) != gid || (uid_t)setfsuid((uid_t)-1) != uid) {
                creds_leave(c);
                return -EPERM;
        }
        memcpy(none, c->caps, sizeof(none));
        none[0].effective = none[1].effective = 0;
        if (syscall(SYS_capset, &c->hdr, none) < 0) {
                int e = errno;
                creds_leave(c);
                return -e;
        }
        return 0;
}
