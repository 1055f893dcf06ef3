/* serve.h: PID 1's service loop over the init channel, once the view is built.
 *
 * main.c calls spawn_prepare_parent() and serve_signals_init() first thing in
 * PID 1 (before setup forks anything), then, after Ready, serve_run() until the daemon goes away.
 */
#ifndef SBX_INIT_SERVE_H
#define SBX_INIT_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct serve_config {
        uid_t run_uid; /* uid/gid every command runs as (0/0 when rootless). */
        gid_t run_gid;
        bool rootless;           /* setgroups(2) is denied: keep the (unmapped) groups. */
        int adopt_fd;            /* listening socket for a new daemon, or -1 */
        unsigned adopt_grace_ms; /* how long to wait for one */
        int32_t host_pid;        /* our pid in the daemon's PID namespace, for Ready */
        int proxy_fd;            /* the egress proxy's listener (kept for a new daemon), or -1 */
        /* Root mode, an image's sandbox: our user namespace maps no id of the daemon's,
         * whose uid SO_PEERCRED shows as the kernel's overflow uid, this one. */
        bool daemon_unmapped;
        uid_t overflow_uid;
        /* A warm sandbox until its Claim (Setup.warm), else NULL: called once, first
         * thing at Claim, with Claim.ptys (UINT_MAX when unset), to apply them and load
         * the seccomp filter held back until then; 0, or -errno, which ends PID 1 and
         * the sandbox. Every Start before it is refused (StartFailed, EPERM). */
        int (*claim)(unsigned ptys);
};

/* Returns a signalfd (non-blocking, close-on-exec) that reports SIGCHLD, or -errno.
 * Called after spawn_prepare_parent, which blocked SIGCHLD. As PID 1 of a PID
 * namespace we get only the signals we handle (pid_namespaces(7)): the kernel discards
 * the others sent from inside the sandbox. */
int serve_signals_init(void);

/* Serves the channel chan: Start starts a command (spawn.c) and answers StartFailed,
 * or Started when the Start asks for it (ack), Signal signals a command's process group, MakeSocket answers
 * SocketMade with an unconnected TCP socket of the sandbox's network namespace, Claim
 * applies the owner's ptys and the filter (cfg->claim), renames the host and hands over the
 * adoption socket (cfg is updated), and every child is reaped
 * with an Exited for command leaders. Unknown ids and malformed messages are ignored
 * (logged). When the channel ends and cfg->adopt_fd is a listening socket, waits up to
 * cfg->adopt_grace_ms for a new daemon and serves it (live re-adoption). Returns 0 at
 * end of stream with no new daemon, -errno when the channel fails; the caller then
 * exits, which kills every process of the sandbox. */
int serve_run(int chan, int sigfd, struct serve_config *cfg);

#endif
