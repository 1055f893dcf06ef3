/* cli_forward.c: `sbx port-forward ID [ADDR:]LOCAL_PORT:SANDBOX_PORT ... [--unix
 * PATH:SANDBOX_PORT]...`, local listening sockets whose connections become streams to
 * ports of a sandbox.
 *
 * Each spec is a listener: TCP on ADDR (default 127.0.0.1; LOCAL_PORT 0 picks a free
 * port) or a Unix socket (mode 0600; an existing socket there is replaced, any other
 * file refused). One line per forward on stdout says where it listens. The main thread
 * polls the listeners and a signalfd; each accepted connection gets a thread of its own
 * that opens a stream (sbx_open_port) and relays bytes both ways (cli_relay.c), so a
 * slow reader stalls only its stream. The one sbx_client is shared under a lock (an
 * sbx_client is used by one thread at a time). A stream that cannot be opened closes
 * its connection and says why on stderr; the forward goes on. SIGINT and SIGTERM end the
 * forward (exit 0); the sandbox's end (looked at every second) ends it with 125. */
#include "cli.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* How many forwards one invocation takes, and how often the sandbox is looked at. */
#define FWD_MAX_SPECS 32
#define FWD_CHECK_MS  1000

struct forward;

/* One listener: where it listens, and the sandbox port its connections go to. */
struct listener {
        struct forward *fwd;
        int fd;
        uint32_t sandbox_port;
        const char *unix_path; /* a Unix socket's path (unlinked at the end), or NULL */
        char addr[64];         /* the TCP address to listen on */
        uint32_t local_port;
        char where[300]; /* "127.0.0.1:43211", "[::1]:8000" or the path, once listening */
};

/* The invocation: the sandbox, the shared client and its lock, the listeners. */
struct forward {
        const char *id;
        const char *sandbox_address; /* NULL: the daemon's default, 127.0.0.1 */
        sbx_client *c;
        pthread_mutex_t lock; /* held for each use of c */
        struct listener l[FWD_MAX_SPECS];
        size_t n;
};

/* One accepted connection, handed to its thread. */
struct stream {
        struct listener *l;
        int fd;
};

/* Parses a port (0 allowed when zero_ok). 0, or -EINVAL. */
static int parse_port(const char *s, bool zero_ok, uint32_t *ret) {
        uint64_t v;

        if (cli_parse_uint(s, 65535, &v) < 0 || (v == 0 && !zero_ok))
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

/* Parses "[ADDR:]LOCAL_PORT:SANDBOX_PORT" (ADDR an IPv6 address in brackets) into l. */
static int parse_tcp_spec(char *spec, struct listener *l) {
        char *sp = strrchr(spec, ':'), *lp;

        if (!sp)
                return cli_usage_error("'%s': expected [ADDR:]LOCAL_PORT:SANDBOX_PORT", spec);
        *sp = '\0';
        lp = strrchr(spec, ':');
        snprintf(l->addr, sizeof(l->addr), "127.0.0.1");
        if (lp) {
                char *a = spec;
                size_t n;
                *lp++ = '\0';
                n = strlen(a);
                if (n >= 2 && a[0] == '[' && a[n - 1] == ']')
                        a[n - 1] = '\0', a++;
                if (!*a || strlen(a) >= sizeof(l->addr))
                        return cli_usage_error("'%s': a bad listening address", spec);
                snprintf(l->addr, sizeof(l->addr), "%s", a);
        } else {
                lp = spec;
        }
        if (parse_port(lp, true, &l->local_port) < 0 || parse_port(sp + 1, false, &l->sandbox_port) < 0)
                return cli_usage_error("'%s:%s': ports are 0..65535 here and 1..65535 in the "
                                       "sandbox",
                                       lp, sp + 1);
        return 0;
}

/* Parses "PATH:SANDBOX_PORT" of --unix into l. */
static int parse_unix_spec(char *spec, struct listener *l) {
        char *sp = strrchr(spec, ':');

        if (!sp || sp == spec || parse_port(sp + 1, false, &l->sandbox_port) < 0)
                return cli_usage_error("--unix '%s': expected PATH:SANDBOX_PORT", spec);
        *sp = '\0';
        l->unix_path = spec;
        return 0;
}

/* Adds a listener to f; the spec is parsed by parse (it is modified in place). */
static int add_spec(struct forward *f, char *spec, int (*parse)(char *, struct listener *)) {
        struct listener *l;

        if (f->n == FWD_MAX_SPECS)
                return cli_usage_error("at most %d forwards at once", FWD_MAX_SPECS);
        l = &f->l[f->n];
        memset(l, 0, sizeof(*l));
        l->fwd = f;
        l->fd = -1;
        if (parse(spec, l))
                return CLI_EXIT_ERROR;
        f->n++;
        return 0;
}

static int parse_args(struct cli *cli, int argc, char **argv, struct forward *f) {
        static const struct cli_opt spec[] = {
                {"unix", true, 0}, {"sandbox-address", true, 0}, {NULL, false, 0}};
        struct cli_opts p;
        int k, status;

        cli_opts_init(&p, cli, argc, argv, spec);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "port-forward");
                        return -1;
                }
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_POS && !f->id)
                        f->id = p.arg;
                else if (k == 1)
                        f->sandbox_address = p.arg;
                else if ((status = add_spec(f, (char *)(uintptr_t)p.arg,
                                            k == 0 ? parse_unix_spec : parse_tcp_spec)))
                        return status;
        }
        if (!f->id || f->n == 0)
                return cli_usage_error("sbx port-forward needs a sandbox ID and at least one "
                                       "[ADDR:]LOCAL_PORT:SANDBOX_PORT or --unix PATH:PORT");
        return 0;
}

/* l's TCP address as a socket address, port included: a numeric IPv4 or IPv6 address,
 * or "localhost" (127.0.0.1). sbx is linked statically, where glibc's resolver is not
 * at hand, so names are not looked up. 0, or -EINVAL. */
static int tcp_address(const struct listener *l, struct sockaddr_storage *ss, socklen_t *ret_len) {
        struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        const char *a = strcmp(l->addr, "localhost") == 0 ? "127.0.0.1" : l->addr;

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, a, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t)l->local_port);
                *ret_len = sizeof(*in4);
                return 0;
        }
        if (inet_pton(AF_INET6, a, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)l->local_port);
                *ret_len = sizeof(*in6);
                return 0;
        }
        return -EINVAL;
}

/* Binds and listens on l's TCP address; l->where says where. */
static int listen_tcp(struct listener *l) {
        struct sockaddr_storage ss;
        socklen_t sl;
        char host[INET6_ADDRSTRLEN];
        int one = 1, r;
        uint16_t port;

        if (tcp_address(l, &ss, &sl) < 0)
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "cannot listen on '%s': give a numeric IPv4 or IPv6 address "
                                 "(or localhost)",
                                 l->addr);
        l->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l->fd >= 0)
                (void)setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        r = l->fd < 0 || bind(l->fd, (struct sockaddr *)&ss, sl) < 0 || listen(l->fd, 128) < 0 ||
            getsockname(l->fd, (struct sockaddr *)&ss, &sl) < 0;
        if (r)
                return cli_error(SBX_UNAVAILABLE, "cannot listen on %s port %u: %s", l->addr,
                                 l->local_port, strerror(errno));
        if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                port = ntohs(in6->sin6_port);
                snprintf(l->where, sizeof(l->where), "[%s]:%u", host, port);
        } else {
                struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
                port = ntohs(in4->sin_port);
                snprintf(l->where, sizeof(l->where), "%s:%u", host, port);
        }
        return 0;
}

/* Binds and listens on l's Unix socket (mode 0600), replacing a socket there. */
static int listen_unix(struct listener *l) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct stat st;
        mode_t old;
        int r;

        if (strlen(l->unix_path) >= sizeof(sa.sun_path))
                return cli_error(SBX_INVALID_ARGUMENT, "--unix '%s': the path is too long",
                                 l->unix_path);
        if (lstat(l->unix_path, &st) == 0 && !S_ISSOCK(st.st_mode))
                return cli_error(SBX_ALREADY_EXISTS,
                                 "--unix '%s': a file that is not a socket is there; not "
                                 "replacing it",
                                 l->unix_path);
        (void)unlink(l->unix_path);
        memcpy(sa.sun_path, l->unix_path, strlen(l->unix_path));
        l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        old = umask(0177); /* the socket is born 0600: threads start later */
        r = l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(l->fd, 128) < 0;
        umask(old);
        if (r)
                return cli_error(SBX_UNAVAILABLE, "cannot listen on %s: %s", l->unix_path,
                                 strerror(errno));
        snprintf(l->where, sizeof(l->where), "%s", l->unix_path);
        return 0;
}

/* Says why the stream of l could not be opened (the daemon's words), on stderr. */
static void open_failed(struct listener *l, enum sbx_code rc, const char *msg) {
        fprintf(stderr, "sbx: %s: port-forward %s -> %s:%u: %s\n", sbx_code_name(rc), l->where,
                l->fwd->id, l->sandbox_port, msg);
}

/* A connection's thread: opens its stream, relays, closes both. */
static void *stream_main(void *arg) {
        struct stream *s = arg;
        struct forward *f = s->l->fwd;
        enum sbx_code rc;
        int far = -1;

        pthread_mutex_lock(&f->lock);
        rc = sbx_open_port(f->c, f->id, s->l->sandbox_port, f->sandbox_address, &far);
        if (rc != SBX_OK)
                open_failed(s->l, rc, sbx_error_message(f->c));
        pthread_mutex_unlock(&f->lock);
        if (rc == SBX_OK) {
                (void)relay_copy(s->fd, s->fd, far, false);
                close(far);
        }
        close(s->fd);
        free(s);
        return NULL;
}

/* Accepts one connection on l and starts its thread. */
static void accept_one(struct listener *l) {
        struct stream *s;
        pthread_attr_t at;
        pthread_t t;
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC), started = -1;

        if (fd < 0)
                return; /* gone before it was taken, or out of descriptors: try the next */
        s = malloc(sizeof(*s));
        if (s && pthread_attr_init(&at) == 0) {
                *s = (struct stream){.l = l, .fd = fd};
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                started = pthread_create(&t, &at, stream_main, s);
                pthread_attr_destroy(&at);
        }
        if (started != 0) {
                fprintf(stderr, "sbx: port-forward %s: cannot start a stream's thread\n",
                        l->where);
                free(s);
                close(fd);
        }
}

/* Whether the sandbox still serves: 0, or 125 after saying it ended (or cannot be
 * looked at). A daemon that does not answer now is not an end. */
static int sandbox_check(struct forward *f) {
        struct sbx_sandbox *s = NULL;
        enum sbx_code rc;
        int status = 0;

        pthread_mutex_lock(&f->lock);
        rc = sbx_get(f->c, f->id, &s);
        if (rc == SBX_OK && s->state >= SBX_STATE_TERMINATING)
                status = cli_error(SBX_SANDBOX_ENDED, "sandbox %s ended (%s); the forward stops",
                                   f->id, sbx_state_name(s->state));
        else if (rc != SBX_OK && rc != SBX_UNAVAILABLE)
                status = cli_client_error(f->c, rc);
        pthread_mutex_unlock(&f->lock);
        sbx_sandbox_free(s);
        return status;
}

/* Serves the listeners until a signal (0) or the sandbox's end (125). */
static int serve(struct forward *f, int sigfd) {
        struct pollfd p[FWD_MAX_SPECS + 1];
        int64_t next_check = cli_now_unix_ms() + FWD_CHECK_MS;

        for (;;) {
                int64_t now = cli_now_unix_ms();
                int n, status;
                if (now >= next_check) {
                        if ((status = sandbox_check(f)))
                                return status;
                        next_check = now + FWD_CHECK_MS;
                }
                p[0] = (struct pollfd){.fd = sigfd, .events = POLLIN};
                for (size_t i = 0; i < f->n; i++)
                        p[i + 1] = (struct pollfd){.fd = f->l[i].fd, .events = POLLIN};
                n = poll(p, f->n + 1, (int)(next_check - now));
                if (n < 0 && errno != EINTR)
                        return cli_error(SBX_INTERNAL, "poll: %s", strerror(errno));
                if (n > 0 && p[0].revents)
                        return 0;
                for (size_t i = 0; n > 0 && i < f->n; i++)
                        if (p[i + 1].revents)
                                accept_one(&f->l[i]);
        }
}

/* Listens on every spec and prints one line per forward. */
static int listen_all(struct forward *f) {
        int status;

        for (size_t i = 0; i < f->n; i++) {
                struct listener *l = &f->l[i];
                if ((status = l->unix_path ? listen_unix(l) : listen_tcp(l)))
                        return status;
                printf("%s -> %s:%u\n", l->where, f->id, l->sandbox_port);
        }
        fflush(stdout);
        return 0;
}

/* SIGINT and SIGTERM blocked in every thread (the ones started later inherit the mask)
 * and read from a signalfd by serve(); SIGPIPE ignored. The signalfd, or -errno. */
static int take_signals(void) {
        sigset_t set;
        int fd;

        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
                return -EINVAL;
        fd = signalfd(-1, &set, SFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int cmd_port_forward(struct cli *cli, int argc, char **argv) {
        struct forward f = {.lock = PTHREAD_MUTEX_INITIALIZER};
        int status = parse_args(cli, argc, argv, &f), sigfd = -1;

        if (status)
                return status < 0 ? 0 : status;
        /* Signals are taken before the lines are printed: whoever reads them may stop
         * the forward at once, and it must end cleanly. */
        sigfd = take_signals();
        if (sigfd < 0)
                status = cli_error(SBX_INTERNAL, "cannot take signals: %s", strerror(-sigfd));
        else if ((status = cli_connect_kept(cli, &f.c)) == 0 &&
                 (status = sandbox_check(&f)) == 0 && (status = listen_all(&f)) == 0)
                status = serve(&f, sigfd);
        for (size_t i = 0; i < f.n; i++) {
                if (f.l[i].fd >= 0)
                        close(f.l[i].fd);
                if (f.l[i].unix_path && f.l[i].where[0])
                        (void)unlink(f.l[i].unix_path);
        }
        if (sigfd >= 0)
                close(sigfd);
        /* Streams still running end with the process; their ssh children (ssh://) with
         * the client, once no thread opens one. */
        pthread_mutex_lock(&f.lock);
        sbx_close(f.c);
        return status;
}
