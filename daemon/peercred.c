/* peercred.c: the supplementary groups of a Unix socket's peer; see peercred.h.
 *
 * SO_PEERGROUPS (Linux 4.13) gives the groups the peer had at connect(); older kernels
 * have only /proc/PID/status, read for the process that holds the pid now and accepted
 * only when it shows the peer's effective uid. Owns nothing between calls; called by
 * conn.c when it serves a connection. Never logs. */
#include "peercred.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_limits.h"

/* The supplementary groups of cred's process from the "Groups:" line of
 * /proc/PID/status, for kernels before 4.13 (no SO_PEERGROUPS). These are its groups
 * now, not at connect(); the file must show cred's effective uid, so that a pid reused
 * by another user's process is not taken for the peer. Returns 0 with a malloc'ed array
 * (NULL when empty), -ESRCH when the process is gone or another one, -E2BIG above
 * SBX_MAX_PEER_GROUPS, or another -errno. */
static int proc_groups(const struct ucred *cred, gid_t **ret, size_t *ret_n) {
        char path[64], *line = NULL;
        size_t cap = 0, n = 0, room = 0;
        gid_t *g = NULL;
        int uid_ok = 0, found = 0, r = 0;
        FILE *f;

        if (cred->pid <= 0)
                return -ESRCH; /* not visible in our PID namespace */
        snprintf(path, sizeof(path), "/proc/%d/status", (int)cred->pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        while (r == 0 && !found && getline(&line, &cap, f) > 0) {
                unsigned long real, eff;
                char *p, *end;

                if (sscanf(line, "Uid: %lu %lu", &real, &eff) == 2) {
                        uid_ok = eff == cred->uid;
                        continue;
                }
                if (strncmp(line, "Groups:", 7) != 0)
                        continue;
                found = 1;
                for (p = line + 7;; p = end) {
                        unsigned long v;
                        while (*p == ' ' || *p == '\t')
                                p++;
                        if (*p == '\n' || *p == '\0')
                                break;
                        errno = 0;
                        v = strtoul(p, &end, 10);
                        if (end == p || errno || v >= (gid_t)-1) {
                                r = -EBADMSG;
                                break;
                        }
                        if (n == room) {
                                gid_t *ng;
                                if (room >= SBX_MAX_PEER_GROUPS) {
                                        r = -E2BIG;
                                        break;
                                }
                                room = room ? room * 2 : 32;
                                ng = realloc(g, room * sizeof(*g));
                                if (!ng) {
                                        r = -ENOMEM;
                                        break;
                                }
                                g = ng;
                        }
                        g[n++] = (gid_t)v;
                }
        }
        free(line);
        fclose(f);
        if (r == 0 && (!found || !uid_ok))
                r = -ESRCH;
        if (r < 0) {
                free(g);
                return r;
        }
        *ret = g;
        *ret_n = n;
        return 0;
}

int peercred_groups(int fd, const struct ucred *cred, gid_t **ret, size_t *ret_n) {
        socklen_t len = 32 * sizeof(gid_t);
        gid_t *g = NULL;
        int tries, err;

        /* On ERANGE the kernel writes the size it needs into len. The groups of a
         * connection are fixed at connect(), so one retry suffices; a few are allowed. */
        for (tries = 0; tries < 4; tries++) {
                gid_t *n;
                if (len > SBX_MAX_PEER_GROUPS * sizeof(gid_t)) {
                        free(g);
                        return -E2BIG;
                }
                n = realloc(g, len ? len : sizeof(gid_t));
                if (!n) {
                        free(g);
                        return -ENOMEM;
                }
                g = n;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
                        *ret_n = len / sizeof(gid_t);
                        if (*ret_n == 0) {
                                free(g);
                                g = NULL;
                        }
                        *ret = g;
                        return 0;
                }
                if (errno != ERANGE)
                        break;
        }
        err = tries < 4 ? errno : EAGAIN;
        free(g);
        if (err == ENOPROTOOPT)
                return proc_groups(cred, ret, ret_n);
        return -err;
}

void peercred_format_groups(const gid_t *groups, size_t n_groups, char *buf, size_t len) {
        size_t i, used;
        int n = snprintf(buf, len, "%zu(", n_groups);

        used = n > 0 ? (size_t)n : 0;
        for (i = 0; i < n_groups && i < 16 && used < len; i++) {
                n = snprintf(buf + used, len - used, "%s%u", i ? "," : "", (unsigned)groups[i]);
                used += n > 0 ? (size_t)n : 0;
        }
        if (used < len)
                snprintf(buf + used, len - used, "%s)", n_groups > 16 ? ",..." : "");
}
