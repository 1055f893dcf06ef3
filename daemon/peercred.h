/* peercred.h: who is on the other end of a connected Unix socket, beyond SO_PEERCRED:
 * its supplementary groups, which the daemon needs to act with the caller's rights (a
 * group can deny as well as grant: mode 0604).
 *
 * Called by conn.c when it serves a connection. Nothing here logs. */
#ifndef SBX_PEERCRED_H
#define SBX_PEERCRED_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The supplementary groups of the peer on fd (cred: its SO_PEERCRED) into a malloc'ed
 * array (NULL when it has none): SO_PEERGROUPS (Linux 4.13), the groups it had at
 * connect(), else those of /proc/PID/status, which are its groups now and count only
 * while that file shows cred's effective uid (a pid reused by another user's process
 * is not taken for the peer). Returns 0 with *ret and *ret_n; -E2BIG above
 * SBX_MAX_PEER_GROUPS; -ESRCH when the peer's process is gone or another one (the /proc
 * way only); or another -errno. */
int peercred_groups(int fd, const struct ucred *cred, gid_t **ret, size_t *ret_n);

/* "N(g1,g2,...)" for the log: the count and the first 16 groups, cut to len bytes. */
void peercred_format_groups(const gid_t *groups, size_t n_groups, char *buf, size_t len);

#endif
