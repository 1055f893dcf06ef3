/* admit.c: who may connect to sbxd; see admit.h.
 *
 * The checks, in order: the total connection cap; a rootless daemon serves only its own
 * uid and root; no process of a sandbox is served (by uid for a root daemon: any root
 * sbxd's sandbox uids on the host, uidrange.h; and by PID namespace in every mode, from
 * a pidfd of the peer where the kernel gives one: a sandbox of this daemon's or of any
 * other sbxd's on the host, pidns.h); then the per-uid cap. Each refusal comes with a message for the
 * client. Owns nothing; called by server.c (server_admit) once a connection's peer
 * credentials are read. Never logs: the server logs refusals. */
#include "admit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "pidns.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "uidrange.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5: a pidfd of the process that connected */
#endif
#ifndef PIDFD_GET_PID_NAMESPACE
#define PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5) /* Linux 6.11, <linux/pidfd.h> */
#endif

/* 1 when the process behind pidfd has exited (a pidfd polls readable then). */
static int pidfd_exited(int pidfd) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        return poll(&p, 1, 0) > 0;
}

/* The PID namespace of the peer on sock (pid: from SO_PEERCRED, 0 when it is not
 * visible here), as an nsfs descriptor. Returns it; -ESRCH when the peer's process is
 * gone, before or while it was looked at; -EACCES when the daemon may not inspect it
 * (ptrace read access, as for /proc/PID/ns); -ENOENT when there is nothing to look at
 * (pid 0 and no pidfd); or another -errno. */
static int peer_pidns(int sock, pid_t pid) {
        socklen_t len = sizeof(int);
        char path[64];
        int pidfd = -1, nsfd;

        /* SO_PEERPIDFD names the very process that connected, whatever its pid now.
         * Where it is missing (ENOPROTOOPT), pidfd_open (Linux 5.3) names the process
         * that has the pid now: the peer, unless it exited and its pid was reused
         * between connect() and here. Either pins the pid, so that /proc/PID below is
         * that process as long as the pidfd does not report an exit. The kernel
         * answers ESRCH or EINVAL (pidfd_prepare) when the peer has been reaped. */
        if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
                if (errno == ESRCH || errno == EINVAL)
                        return -ESRCH;
                pidfd = -1;
                if (pid > 0) {
                        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
                        if (pidfd < 0 && errno == ESRCH)
                                return -ESRCH;
                }
        }
        if (pidfd >= 0) {
                /* Linux 6.11 tells the namespace from the pidfd itself: no /proc, no pid. */
                nsfd = ioctl(pidfd, PIDFD_GET_PID_NAMESPACE, 0);
                if (nsfd >= 0 || (errno != ENOTTY && errno != EINVAL)) {
                        nsfd = nsfd >= 0 ? nsfd : -errno;
                        close(pidfd);
                        return nsfd;
                }
                /* ENOTTY or EINVAL: an older kernel; /proc below. */
        }
        if (pid <= 0) {
                if (pidfd >= 0)
                        close(pidfd);
                return -ENOENT;
        }
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        nsfd = open(path, O_RDONLY | O_CLOEXEC);
        nsfd = nsfd >= 0 ? nsfd : errno == ENOENT ? -ESRCH : -errno;
        /* Exited after connect(): the pid may have been reused, and the open found
         * another process. */
        if (nsfd >= 0 && pidfd >= 0 && pidfd_exited(pidfd)) {
                close(nsfd);
                nsfd = -ESRCH;
        }
        if (pidfd >= 0)
                close(pidfd);
        return nsfd;
}

static bool is_our_sandbox(const void *ctx, dev_t dev, ino_t ino) {
        return ctx && sbxtab_is_sandbox_pidns(ctx, dev, ino);
}

static const char sandboxed[] = "connections from sandboxed processes are refused";

/* Admission by uid: a rootless daemon serves only its own uid and root, and a root
 * daemon none of its sandboxes' uids. Returns 0 or -EPERM with the reason in why. */
static int admit_uid(const struct sbxd *d, uid_t uid, char *why, size_t whylen) {
        /* A rootless daemon has no rights but its own user's: serving another user
         * would lend that user those rights. Root may use it, as it may use anything
         * of that user's anyway. */
        if (d->euid != 0 && uid != d->euid && uid != 0) {
                snprintf(why, whylen,
                         "this sbxd runs as uid %u without privileges and serves only that user",
                         (unsigned)d->euid);
                return -EPERM;
        }
        /* The commands of a root daemon's sandboxes run as uids of its range: this
         * daemon's, or another root sbxd's on this host (uidrange.h). */
        if (d->euid == 0 && uidrange_is_sandbox_uid(d->uids, uid)) {
                snprintf(why, whylen, "%s", sandboxed);
                return -EPERM;
        }
        return 0;
}

/* Admission by PID namespace: no process of any sandbox, this daemon's or another
 * sbxd's on the host, root or rootless (a rootless sandbox's processes have their
 * user's uid and may have the socket's group). The peer's namespace and each between
 * it and the daemon's own are looked at (pidns.h): one of this daemon's sandboxes, or
 * one whose PID 1 is sbx-init, refuses. Returns 0, -EPERM or -EAGAIN with the reason
 * in why. Decisions where the namespace cannot be read:
 * - -EACCES/-EPERM for the peer itself, a process the daemon may not inspect, is
 *   served: the daemon may always inspect its sandboxes' processes (root with
 *   CAP_SYS_PTRACE; a rootless daemon owns its sandboxes' user namespace), and those
 *   of another daemon's sandboxes it may not inspect run under other uids, which
 *   admit_uid refuses for a rootless daemon; refusing would lock out every user of a
 *   root daemon that runs without CAP_SYS_PTRACE (a container) and root from a
 *   rootless one.
 * - -ENOENT, pid 0 without a pidfd (a kernel before 5.3), and a namespace not below
 *   the daemon's own (PIDNS_OUTSIDE: the daemon runs in a container, the client
 *   outside it) are served: nothing above such a peer can be seen from here.
 * - -ESRCH, a peer (or its namespace's PID 1) that is gone, is refused in every mode:
 *   the connection is then used by a process the daemon cannot tell anything of (one
 *   that inherited or was passed the socket, possibly inside a sandbox), while a real
 *   client stays until it is answered.
 * - A namespace between the peer and the daemon whose PID 1 cannot be looked at
 *   (hidepid, or no right to read its command line) is refused: it may be a sandbox.
 * - Anything else (out of fds or memory) is refused: the check could not run. */
static int admit_pidns(const struct sbxd *d, const struct conn *c, pid_t pid, char *why,
                       size_t whylen) {
        enum pidns_verdict v = PIDNS_FREE;
        int fd = conn_fd(c), nsfd, r;

        nsfd = fd < 0 ? -EBADF : peer_pidns(fd, pid);
        r = nsfd < 0 ? nsfd : pidns_sandboxed(nsfd, is_our_sandbox, d->sandboxes, &v);
        if (nsfd >= 0)
                close(nsfd);
        if (r == 0 && v == PIDNS_SANDBOXED) {
                snprintf(why, whylen, "%s", sandboxed);
                return -EPERM;
        }
        if (r == -ESRCH) {
                snprintf(why, whylen,
                         "the connecting process (pid %d) is gone: sbxd cannot tell where the "
                         "connection is used from; connect from the process that sends the "
                         "requests",
                         (int)pid);
                return -EPERM;
        }
        if (nsfd >= 0 && (r == -ENOENT || r == -EACCES)) {
                snprintf(why, whylen,
                         "sbxd cannot tell whether the connecting process (pid %d) runs in a "
                         "sandbox: the first process of a PID namespace it is in is hidden "
                         "from the daemon (%s)",
                         (int)pid, strerror(-r));
                return -EPERM;
        }
        if (r < 0 && r != -EACCES && r != -EPERM && r != -ENOENT) {
                snprintf(why, whylen,
                         "sbxd cannot check where the connection comes from (%s); try again",
                         strerror(-r));
                return -EAGAIN;
        }
        return 0;
}

int admit_connection(const struct sbxd *d, const struct conn *c, unsigned n_open,
                     unsigned n_of_uid, char *why, size_t whylen) {
        struct conn_peer peer;
        int r;

        conn_peer(c, &peer);
        if (n_open > SBX_MAX_CONNECTIONS) {
                snprintf(why, whylen,
                         "sbxd has %u connections open, its maximum; close idle clients",
                         SBX_MAX_CONNECTIONS);
                return -EAGAIN;
        }
        r = admit_uid(d, peer.uid, why, whylen);
        if (r == 0)
                r = admit_pidns(d, c, peer.pid, why, whylen);
        if (r == 0 && n_of_uid >= d->cfg->max_connections_per_uid) {
                snprintf(why, whylen,
                         "uid %u has %u connections open, the daemon's maximum per user "
                         "(--max-connections-per-uid %u); close idle clients",
                         (unsigned)peer.uid, n_of_uid, d->cfg->max_connections_per_uid);
                r = -EAGAIN;
        }
        return r;
}
