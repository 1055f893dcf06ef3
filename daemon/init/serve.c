/* serve.c: PID 1's poll() loop: Start, Signal, MakeSocket, reaping, Started/StartFailed/
 * Exited/SocketMade.
 *
 * Owns the table of running commands, from their start (spawn_start returns once the
 * child has called execve) to their leader's reaping (Exited). A failed start,
 * answered with StartFailed at once, never produces an Exited: its child is not in the
 * table and is reaped silently, like every other child (orphans re-parented to us).
 * Called by main.c in PID 1 only. */
#include "serve.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init.pb-c.h"
#include "initmsg.h"
#include "sbx_limits.h"
#include "spawn.h"
#include "user.h"
#include "util.h"

/* Commands PID 1 tracks at once. The daemon allows 16 per sandbox by default; this
 * only bounds the table against a confused peer. */
#define SERVE_MAX_COMMANDS 1024u

struct cmd {
        uint64_t id;
        pid_t pid;
};

static struct cmd *cmds;
static size_t n_cmds, cap_cmds;
static int chan_fd = -1;
static int chan_err; /* First failed send, as -errno. */
static struct serve_config *config;

static void send_msg_fds(Sbx__Init__V1__FromInit *m, const int *fds, size_t nfds) {
        int r;

        if (chan_err)
                return;
        r = initmsg_send(chan_fd, &m->base, fds, nfds);
        if (r < 0) {
                util_log(UTIL_LOG_ERR, "send to daemon: %s", strerror(-r));
                chan_err = r;
        }
}

static void send_msg(Sbx__Init__V1__FromInit *m) {
        send_msg_fds(m, NULL, 0);
}

static void send_started(const struct cmd *c) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Started s = SBX__INIT__V1__STARTED__INIT;

        s.has_command_id = 1;
        s.command_id = c->id;
        s.has_pid = 1;
        s.pid = c->pid;
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_STARTED;
        m.started = &s;
        send_msg(&m);
}

static void send_start_failed(uint64_t id, int err, char *text) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__StartFailed f = SBX__INIT__V1__START_FAILED__INIT;

        f.has_command_id = 1;
        f.command_id = id;
        f.has_error_errno = 1;
        f.error_errno = err;
        f.error = text;
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_START_FAILED;
        m.start_failed = &f;
        send_msg(&m);
}

static int64_t tv_usec(const struct timeval *tv) {
        return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

static void send_exited(const struct cmd *c, int status, const struct rusage *ru) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Exited e = SBX__INIT__V1__EXITED__INIT;

        e.has_command_id = 1;
        e.command_id = c->id;
        e.has_wait_status = 1;
        e.wait_status = status;
        e.has_utime_usec = 1;
        e.utime_usec = tv_usec(&ru->ru_utime);
        e.has_stime_usec = 1;
        e.stime_usec = tv_usec(&ru->ru_stime);
        e.has_maxrss_kib = 1;
        e.maxrss_kib = ru->ru_maxrss; /* Already KiB on Linux (getrusage(2)). */
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_EXITED;
        m.exited = &e;
        send_msg(&m);
}

static struct cmd *find_id(uint64_t id) {
        size_t i;

        for (i = 0; i < n_cmds; i++)
                if (cmds[i].id == id)
                        return &cmds[i];
        return NULL;
}

static struct cmd *find_pid(pid_t pid) {
        size_t i;

        for (i = 0; i < n_cmds; i++)
                if (cmds[i].pid == pid)
                        return &cmds[i];
        return NULL;
}

static void remove_cmd(struct cmd *c) {
        *c = cmds[--n_cmds];
}

static void close_fds(const int *fds, size_t n) {
        size_t i;

        for (i = 0; i < n; i++)
                close(fds[i]);
}

/* Copies a bytes field into a new C string; NULL when it holds a NUL byte or on
 * ENOMEM (*ret_err says which). */
static char *dup_bytes(const ProtobufCBinaryData *b, int *ret_err) {
        char *s;

        if (b->len > 0 && memchr(b->data, '\0', b->len)) {
                *ret_err = EINVAL;
                return NULL;
        }
        s = malloc(b->len + 1);
        if (!s) {
                *ret_err = ENOMEM;
                return NULL;
        }
        if (b->len)
                memcpy(s, b->data, b->len);
        s[b->len] = '\0';
        return s;
}

static void free_strv(char **v) {
        size_t i;

        for (i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static char **dup_strv(const ProtobufCBinaryData *items, size_t n, int *ret_err) {
        char **v = calloc(n + 1, sizeof(*v));
        size_t i;

        if (!v) {
                *ret_err = ENOMEM;
                return NULL;
        }
        for (i = 0; i < n; i++) {
                v[i] = dup_bytes(&items[i], ret_err);
                if (!v[i]) {
                        free_strv(v);
                        return NULL;
                }
        }
        return v;
}

/* PID 1's hard limit of resource (it never changes its own limits once serving), read
 * once: what an Rlimit without a hard limit keeps. UINT64_MAX for unlimited. */
static uint64_t own_hard_limit(int resource) {
        static uint64_t hard[RLIM_NLIMITS];
        static unsigned char known[RLIM_NLIMITS];
        struct rlimit cur;

        if (!known[resource]) {
                hard[resource] = getrlimit(resource, &cur) < 0 || cur.rlim_max == RLIM_INFINITY
                                         ? UINT64_MAX
                                         : (uint64_t)cur.rlim_max;
                known[resource] = 1;
        }
        return hard[resource];
}

/* The text of a refused Start (StartFailed.error). */
#define START_TEXT_BYTES (SPAWN_WHAT_BYTES + 128)

/* Checks a Start's counts against what came with it and against the table: 0, or a
 * positive errno with the reason in text. */
static int check_start(const Sbx__Init__V1__Start *s, size_t nfds, size_t n_cg, char *text) {
        /* Unclaimed, its seccomp filter is not loaded yet (Setup.warm). */
        if (config->claim) {
                snprintf(text, START_TEXT_BYTES,
                         "a warm sandbox starts nothing before it is claimed");
                return EPERM;
        }
        if (n_cg > SBX_INIT_MAX_FDS - 3 || nfds != 3 + n_cg) {
                snprintf(text, START_TEXT_BYTES, "invalid Start: %zu descriptors, expected %zu",
                         nfds, (size_t)3 + n_cg);
                return EINVAL;
        }
        if (find_id(s->command_id)) {
                snprintf(text, START_TEXT_BYTES, "invalid Start: command id %llu is in use",
                         (unsigned long long)s->command_id);
                return EEXIST;
        }
        if (n_cmds >= SERVE_MAX_COMMANDS) {
                snprintf(text, START_TEXT_BYTES, "too many commands in this sandbox (%u)",
                         SERVE_MAX_COMMANDS);
                return EAGAIN;
        }
        if (s->n_argv == 0 || s->n_argv > SBX_MAX_ARGV || s->n_envp > SBX_MAX_ENV ||
            s->n_rlimits > RLIM_NLIMITS) {
                snprintf(text, START_TEXT_BYTES, "invalid Start: %zu argv, %zu envp, %zu rlimits",
                         s->n_argv, s->n_envp, s->n_rlimits);
                return s->n_argv == 0 ? EINVAL : E2BIG;
        }
        return 0;
}

/* The strings of one Start as C strings (freed by start_strings_free). */
struct start_strings {
        char **argv, **envp, *cwd;
};

static void start_strings_free(struct start_strings *ss) {
        free_strv(ss->argv);
        free_strv(ss->envp);
        free(ss->cwd);
}

/* Copies argv, envp and cwd (default /workspace) out of s: 0, or a positive errno with
 * the reason in text. */
static int copy_strings(const Sbx__Init__V1__Start *s, struct start_strings *ss, char *text) {
        int err = 0;

        if (!(ss->argv = dup_strv(s->argv, s->n_argv, &err)) ||
            !(ss->envp = dup_strv(s->envp, s->n_envp, &err))) {
                snprintf(text, START_TEXT_BYTES, "invalid Start: argv or envp %s",
                         err == EINVAL ? "holds a NUL byte" : "out of memory");
                return err;
        }
        if (s->has_cwd && s->cwd.len > 0)
                ss->cwd = dup_bytes(&s->cwd, &err);
        else
                ss->cwd = strdup("/workspace");
        if (!ss->cwd) {
                err = err ? err : ENOMEM;
                snprintf(text, START_TEXT_BYTES, "invalid Start: cwd %s",
                         err == EINVAL ? "holds a NUL byte" : "out of memory");
                return err;
        }
        return 0;
}

/* The rlimits of s into rl (s->n_rlimits <= RLIM_NLIMITS of them): 0, or a positive
 * errno with the reason in text. */
static int copy_rlimits(const Sbx__Init__V1__Start *s, struct spawn_rlimit *rl, char *text) {
        size_t i;

        for (i = 0; i < s->n_rlimits; i++) {
                const Sbx__Init__V1__Rlimit *l = s->rlimits[i];
                if (!l->has_resource || l->resource < 0 || l->resource >= RLIM_NLIMITS) {
                        snprintf(text, START_TEXT_BYTES, "invalid Start: rlimit resource %d",
                                 l->has_resource ? l->resource : -1);
                        return EINVAL;
                }
                rl[i].resource = l->resource;
                rl[i].soft = l->has_soft ? l->soft : UINT64_MAX;
                rl[i].hard = l->has_hard ? l->hard : own_hard_limit(l->resource);
                if (!l->has_hard && rl[i].soft > rl[i].hard)
                        rl[i].soft = rl[i].hard; /* never above the limit it keeps */
        }
        return 0;
}

/* Room for one more command in the table: 0 or ENOMEM. */
static int reserve_cmd(void) {
        size_t ncap = cap_cmds ? cap_cmds * 2 : 16;
        struct cmd *n;

        if (n_cmds < cap_cmds)
                return 0;
        n = realloc(cmds, ncap * sizeof(*n));
        if (!n)
                return ENOMEM;
        cmds = n;
        cap_cmds = ncap;
        return 0;
}

/* Starts the command of s (validated) with the descriptors fds (stdio, then n_cg
 * cgroups) and tracks it; a failure is answered with StartFailed. */
static void start_one(const Sbx__Init__V1__Start *s, const struct start_strings *ss,
                      const struct spawn_rlimit *rl, const int *fds, size_t n_cg) {
        struct spawn_spec spec = {
                .argv = ss->argv,
                .envp = ss->envp,
                .cwd = ss->cwd,
                .rlimits = rl,
                .n_rlimits = s->n_rlimits,
                .stdio = {fds[0], fds[1], fds[2]},
                .cgroup_fds = fds + 3,
                .n_cgroup_fds = n_cg,
                .cgroup_v2 = s->has_cgroup_v2 && s->cgroup_v2,
                .uid = s->has_uid ? s->uid : config->run_uid,
                .gid = s->has_gid ? s->gid : config->run_gid,
                .keep_groups = config->rootless,
                .tty = s->has_tty && s->tty,
        };
        char text[START_TEXT_BYTES];
        struct spawn_failure fail;
        struct cmd *c;
        pid_t pid;
        int r;

        /* Room in the table first: a started child must be tracked. */
        if (reserve_cmd() != 0) {
                snprintf(text, sizeof(text), "start: out of memory");
                send_start_failed(s->command_id, ENOMEM, text);
                return;
        }
        r = spawn_start(&spec, &pid, &fail);
        if (r < 0) {
                snprintf(text, sizeof(text), "clone: %s", strerror(-r));
                send_start_failed(s->command_id, -r, text);
                return;
        }
        if (r > 0) {
                /* Its exit status (127), whenever reaped, belongs to nobody. */
                fail.what[sizeof(fail.what) - 1] = '\0';
                snprintf(text, sizeof(text), "%s: %s", fail.what, strerror(fail.err));
                send_start_failed(s->command_id, fail.err, text);
                return;
        }
        /* Started: a message only when asked for (init.proto). */
        c = &cmds[n_cmds++];
        c->id = s->command_id;
        c->pid = pid;
        if (s->has_ack && s->ack)
                send_started(c);
}

/* Start: checked and copied in steps, each of which may answer StartFailed; the
 * descriptors are closed here whatever happens (the command has its own copies). */
static void handle_start(const Sbx__Init__V1__Start *s, int *fds, size_t nfds) {
        struct spawn_rlimit rl[RLIM_NLIMITS];
        struct start_strings ss = {NULL, NULL, NULL};
        char text[START_TEXT_BYTES];
        size_t n_cg = s->has_n_cgroup_fds ? s->n_cgroup_fds : 0;
        int err;

        if (!s->has_command_id) {
                util_log(UTIL_LOG_WARNING, "ignoring a Start without command_id");
                close_fds(fds, nfds);
                return;
        }
        text[0] = '\0';
        err = check_start(s, nfds, n_cg, text);
        if (!err)
                err = copy_strings(s, &ss, text);
        if (!err)
                err = copy_rlimits(s, rl, text);
        if (err)
                send_start_failed(s->command_id, err, text);
        else
                start_one(s, &ss, rl, fds, n_cg);
        close_fds(fds, nfds);
        start_strings_free(&ss);
}

static void handle_signal(const Sbx__Init__V1__Signal *s) {
        struct cmd *c;
        int sig;

        if (!s->has_command_id || !s->has_signal)
                return;
        sig = s->signal;
        if (sig < 1 || sig >= NSIG)
                return;
        c = find_id(s->command_id);
        if (!c)
                return;
        /* The leader called setsid() before execve, and is not reaped yet: its process
         * group exists. */
        if (s->has_cont && s->cont)
                kill(-c->pid, SIGCONT);
        kill(-c->pid, sig);
}

/* MakeSocket: an unconnected TCP socket of our network namespace (the sandbox's) for
 * the daemon, which connects it to a port of the sandbox's loopback. Answered always:
 * SocketMade with the socket, or with socket(2)'s errno and none. Our copy is closed
 * once sent: PID 1 keeps nothing of it. */
static void handle_make_socket(const Sbx__Init__V1__MakeSocket *ms) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__SocketMade made = SBX__INIT__V1__SOCKET_MADE__INIT;
        int family = ms->has_ipv6 && ms->ipv6 ? AF_INET6 : AF_INET;
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP);

        made.has_socket_id = 1;
        made.socket_id = ms->socket_id;
        if (fd < 0) {
                made.has_error_errno = 1;
                made.error_errno = errno;
        }
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_SOCKET_MADE;
        m.socket_made = &made;
        send_msg_fds(&m, &fd, fd >= 0 ? 1 : 0);
        if (fd >= 0)
                close(fd);
}

static void reap(int sigfd) {
        struct signalfd_siginfo si[8];
        struct rusage ru;
        int status;
        pid_t pid;

        /* Standard signals coalesce: one SIGCHLD may stand for many children. Drain
         * the signalfd (a read that fills the buffer may have left more), then reap
         * until nothing is left. */
        while (read(sigfd, si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
        for (;;) {
                struct cmd *c;

                pid = wait4(-1, &status, WNOHANG, &ru);
                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid <= 0)
                        return;
                c = find_pid(pid);
                if (!c)
                        continue; /* An orphan, or a failed start already answered. */
                send_exited(c, status, &ru);
                remove_cmd(c);
        }
}

/* A warm sandbox is claimed: first its owner's ptys and its filter (config->claim), then
 * the client's id as host name, the uid of its owner's its commands run as, and the
 * adoption socket it was created without. 0, or the -errno of config->claim, which ends
 * PID 1; the other failures are logged, and the daemon's later requests go on. */
static int handle_claim(const Sbx__Init__V1__Claim *cl, int *fds, size_t *nfds) {
        int (*claim)(unsigned) = config->claim;

        config->claim = NULL; /* once */
        if (claim) {
                int r = claim(cl->has_ptys ? cl->ptys : UINT_MAX);
                if (r < 0)
                        return r;
        } else if (cl->has_ptys) {
                util_log(UTIL_LOG_WARNING, "claim: ptys ignored: not a warm sandbox, or claimed");
        }
        if (cl->hostname && sethostname(cl->hostname, strlen(cl->hostname)) < 0)
                util_log(UTIL_LOG_ERR, "claim: sethostname \"%s\": %s", cl->hostname,
                         strerror(errno));
        /* The client's id is the sandbox's name from here on, in our log lines too. */
        if (cl->hostname)
                util_log_set_sandbox(cl->hostname);
        if (cl->has_run_uid && cl->has_run_gid && !config->rootless) {
                int r;
                config->run_uid = cl->run_uid;
                config->run_gid = cl->run_gid;
                /* The name in /etc/passwd and /etc/group goes with the ids. */
                r = user_rename(cl->run_uid, cl->run_gid);
                if (r < 0)
                        util_log(UTIL_LOG_ERR, "claim: name uid %u in /etc/passwd: %s",
                                 (unsigned)cl->run_uid, strerror(-r));
        }
        if (cl->has_adoptable && cl->adoptable && *nfds == 1 && config->adopt_fd < 0) {
                config->adopt_fd = fds[0];
                config->adopt_grace_ms = cl->has_adopt_grace_ms ? cl->adopt_grace_ms : 0;
                *nfds = 0; /* kept */
        }
        return 0;
}

/* Receives and dispatches one packet. Returns 1 to go on, 0 at end of stream, -errno
 * when the channel failed or a warm sandbox's claim could not be applied. */
static int handle_channel(void) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        int fds[SBX_INIT_MAX_FDS];
        size_t len = 0, nfds = 0;
        Sbx__Init__V1__ToInit *m;
        int r;

        r = initmsg_recv(chan_fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds);
        if (r == -EAGAIN || r == -EINTR)
                return 1;
        if (r == -EMSGSIZE) {
                util_log(UTIL_LOG_WARNING, "ignoring an oversized packet from the daemon");
                return 1;
        }
        if (r <= 0)
                return r;
        m = sbx__init__v1__to_init__unpack(NULL, len, buf);
        if (!m) {
                util_log(UTIL_LOG_WARNING, "ignoring a malformed message from the daemon");
                close_fds(fds, nfds);
                return 1;
        }
        /* An int switch: protobuf-c adds an INT_MAX enumerator to force the enum's size. */
        switch ((int)m->body_case) {
        case SBX__INIT__V1__TO_INIT__BODY_START:
                handle_start(m->start, fds, nfds);
                nfds = 0;
                break;
        case SBX__INIT__V1__TO_INIT__BODY_SIGNAL:
                handle_signal(m->signal);
                break;
        case SBX__INIT__V1__TO_INIT__BODY_CLAIM:
                r = handle_claim(m->claim, fds, &nfds);
                break;
        case SBX__INIT__V1__TO_INIT__BODY_MAKE_SOCKET:
                handle_make_socket(m->make_socket);
                break;
        default:
                util_log(UTIL_LOG_WARNING, "ignoring an unexpected message (case %d)",
                         (int)m->body_case);
                break;
        }
        close_fds(fds, nfds);
        sbx__init__v1__to_init__free_unpacked(m, NULL);
        return r < 0 ? r : 1;
}

int serve_signals_init(void) {
        sigset_t set;
        int fd;

        /* spawn_prepare_parent has blocked SIGCHLD; it is read from here. */
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd;
}

/* Greets a new daemon: Ready with our host pid, which it checks against its records. */
static void send_adopted(void) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Ready rd = SBX__INIT__V1__READY__INIT;

        rd.has_ok = 1;
        rd.ok = 1;
        rd.has_init_host_pid = 1;
        rd.init_host_pid = config->host_pid;
        /* The egress proxy's listener again: the new daemon's proxy takes over. */
        rd.has_proxy_listener = rd.proxy_listener = config->proxy_fd >= 0;
        rd.has_sockets = rd.sockets = 1;
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_READY;
        m.ready = &rd;
        send_msg_fds(&m, &config->proxy_fd, config->proxy_fd >= 0 ? 1 : 0);
}

/* 1 when the peer cr of the adoption socket may be a daemon of ours: our own uid, or
 * where our namespace maps none of the daemon's (an image's sandbox, root mode) an
 * unmapped uid from outside our PID namespace (pid 0 here): none of the sandbox's own
 * processes, and the socket lies in the daemon's state directory, which only the host's
 * root may enter. */
static bool daemon_peer(const struct ucred *cr) {
        if (cr->uid == geteuid())
                return true;
        return config->daemon_unmapped && cr->uid == config->overflow_uid && cr->pid == 0;
}

/* The daemon is gone. Kills the commands it started (each one's process group: their
 * results can reach nobody, and their timeouts were the daemon's to enforce; processes
 * that left the group, background servers, run on), forgets them (they are reaped
 * silently as orphans) and waits up to the grace period for a new daemon on the
 * adoption socket. Returns the new channel, or -1 when adoption is off or nobody came
 * in time. */
static int await_daemon(int sigfd) {
        struct timespec t0, now;
        long left;

        while (n_cmds > 0) {
                struct cmd *c = &cmds[n_cmds - 1];
                kill(-c->pid, SIGKILL);
                remove_cmd(c);
        }
        if (config->adopt_fd < 0)
                return -1;
        util_log(UTIL_LOG_NOTICE, "the daemon is gone; waiting %u ms for a new one",
                 config->adopt_grace_ms);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                struct pollfd pfd[2] = {{.fd = config->adopt_fd, .events = POLLIN},
                                        {.fd = sigfd, .events = POLLIN}};
                clock_gettime(CLOCK_MONOTONIC, &now);
                left = (long)config->adopt_grace_ms -
                       ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
                if (left <= 0) {
                        util_log(UTIL_LOG_NOTICE, "no daemon came back; ending the sandbox");
                        return -1;
                }
                if (poll(pfd, 2, (int)left) < 0 && errno != EINTR)
                        return -1;
                if (pfd[1].revents)
                        reap(sigfd);
                if (pfd[0].revents) {
                        struct ucred cr;
                        socklen_t len = sizeof(cr);
                        int fd = accept4(config->adopt_fd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                continue;
                        /* Only the daemon's own user (our uid here) may take over. */
                        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
                            !daemon_peer(&cr)) {
                                close(fd);
                                continue;
                        }
                        util_log(UTIL_LOG_NOTICE, "adopted by a new daemon");
                        return fd;
                }
        }
}

int serve_run(int chan, int sigfd, struct serve_config *cfg) {
        int r = 0;

        chan_fd = chan;
        config = cfg;
        for (;;) {
                struct pollfd pfds[2] = {{.fd = chan, .events = POLLIN},
                                         {.fd = sigfd, .events = POLLIN}};

                if (poll(pfds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (pfds[1].revents)
                        reap(sigfd);
                r = 1;
                if (pfds[0].revents)
                        r = handle_channel();
                if (r > 0 && chan_err)
                        r = chan_err;
                if (r <= 0) {
                        /* The channel is over: end, or wait for a new daemon. */
                        int next = await_daemon(sigfd);
                        if (next < 0)
                                break;
                        close(chan);
                        chan = chan_fd = next;
                        chan_err = 0;
                        r = 0;
                        send_adopted();
                }
        }
        return r;
}
