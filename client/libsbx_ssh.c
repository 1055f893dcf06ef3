/* libsbx_ssh.c: the ssh:// transport of libsbx, which reaches a daemon on another
 * machine the way Docker reaches a remote dockerd: the client starts the system's OpenSSH
 * client running `sbx dial-stdio` on the remote side, and speaks its framed protocol over
 * ssh's stdin and stdout. No listener of our own, no authentication of our own: the
 * daemon sees the ssh user as its peer, and its own access control holds.
 *
 * Owns each link's ssh child (reaped here, signalled by its pid only) and the read end
 * of its stderr; the client's end of the connection is handed to libsbx_transport.c. ssh
 * runs in a process group of its own, so that a Ctrl-C meant for a sandboxed command (sbx
 * exec forwards it) does not kill the transport. Called by libsbx_transport.c only; never
 * logs. */
#include "libsbx_ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long ssh has to go after SIGTERM before SIGKILL. */
#define TERM_WAIT_MS 500
/* The most words SBX_SSH_OPTS may hold. */
#define MAX_USER_OPTS 64
#define URL_FORM      "ssh://[user@]host[:port][/path/to/socket]"

/* ---- time ------------------------------------------------------------------------------ */

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ms_left(int64_t deadline) {
        int64_t left = deadline - now_ms();
        return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* ---- the URL --------------------------------------------------------------------------- */

struct ssh_url {
        char *buf;        /* the copy of the authority the fields below point into */
        const char *user; /* NULL: ssh's default (~/.ssh/config, else the local user) */
        const char *host;
        const char *port; /* NULL: ssh's default */
        const char *path; /* into the URL itself; NULL: the remote sbx's default socket */
};

static bool plain_word(const char *s) {
        if (!*s || *s == '-')
                return false;
        for (; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 0x7F || *s == '/' || *s == '\\' ||
                    *s == '\'' || *s == '"')
                        return false;
        return true;
}

static int url_error(char **ret_msg, const char *url, const char *what) {
        if (asprintf(ret_msg, "bad ssh URL '%.200s': %s; the form is " URL_FORM, url, what) < 0)
                *ret_msg = NULL;
        return -EINVAL;
}

/* Parses ssh://[user@]host[:port][/path]: host may be an IPv6 address in brackets, the
 * path (when given) is the daemon's socket on the remote side. 0 or -EINVAL/-ENOMEM. */
static int parse_url(const char *url, struct ssh_url *u, char **ret_msg) {
        const char *auth = url + strlen(SSH_LINK_SCHEME), *slash = strchr(auth, '/');
        char *at, *host, *colon = NULL;
        unsigned long port;

        memset(u, 0, sizeof(*u));
        if (slash && slash[1]) {
                for (const char *p = slash; *p; p++)
                        if ((unsigned char)*p < ' ' || *p == 0x7F)
                                return url_error(ret_msg, url,
                                                 "the socket path holds a control character");
                u->path = slash;
        }
        u->buf = strndup(auth, slash ? (size_t)(slash - auth) : strlen(auth));
        if (!u->buf)
                return -ENOMEM;
        host = u->buf;
        if ((at = strrchr(u->buf, '@'))) {
                *at = 0;
                u->user = u->buf;
                host = at + 1;
                if (!plain_word(u->user))
                        return url_error(ret_msg, url, "the user name is empty or malformed");
        }
        if (*host == '[') {
                char *close = strchr(host, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return url_error(ret_msg, url, "an unclosed [ in the host");
                *close = 0;
                host++;
                colon = close[1] == ':' ? close + 1 : NULL;
        } else {
                colon = strchr(host, ':');
        }
        if (colon) {
                char *end;
                *colon = 0;
                u->port = colon + 1;
                errno = 0;
                port = strtoul(u->port, &end, 10);
                if (!*u->port || *end || *u->port == '-' || *u->port == '+' || errno || port < 1 ||
                    port > 65535)
                        return url_error(ret_msg, url, "the port is not a number from 1 to 65535");
        }
        if (!plain_word(host))
                return url_error(ret_msg, url, "no host, or a malformed one");
        u->host = host;
        return 0;
}

/* ---- the command line ------------------------------------------------------------------ */

struct argv {
        char **v;
        size_t n, cap;
        bool oom;
};

static void argv_add_owned(struct argv *a, char *s) {
        if (a->oom || !s) {
                a->oom = true;
                free(s);
                return;
        }
        if (a->n + 2 > a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 32;
                char **nv = realloc(a->v, cap * sizeof(*nv));
                if (!nv) {
                        a->oom = true;
                        free(s);
                        return;
                }
                a->v = nv;
                a->cap = cap;
        }
        a->v[a->n++] = s;
        a->v[a->n] = NULL;
}

static void argv_add(struct argv *a, const char *s) {
        argv_add_owned(a, strdup(s));
}

static void argv_free(struct argv *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        free(a->v);
        memset(a, 0, sizeof(*a));
}

static const char *env_or(const char *name, const char *dflt) {
        const char *v = getenv(name);
        return v && *v ? v : dflt;
}

/* s as one word of a POSIX shell command line (the remote side runs the command through
 * the user's shell): as it is when it is made of harmless characters, else single-quoted. */
static char *shell_word(const char *s) {
        size_t n = 3;
        char *out, *o;
        bool plain = *s != 0;

        for (const char *p = s; *p; p++) {
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,."
                            "/-",
                            *p))
                        plain = false;
                n += *p == '\'' ? 4 : 1;
        }
        if (plain)
                return strdup(s);
        out = o = malloc(n);
        if (!out)
                return NULL;
        *o++ = '\'';
        for (const char *p = s; *p; p++) {
                if (*p == '\'') {
                        memcpy(o, "'\\''", 4);
                        o += 4;
                } else {
                        *o++ = *p;
                }
        }
        *o++ = '\'';
        *o = 0;
        return out;
}

/* "sbx dial-stdio [--end-with-daemon] [--socket PATH]" with the remote program of
 * SBX_SSH_REMOTE_SBX; a leading "~/" there is left to the remote shell (the remote
 * home). */
static char *remote_command(const struct ssh_url *u, bool stream) {
        const char *remote = env_or("SBX_SSH_REMOTE_SBX", "sbx");
        bool home = strncmp(remote, "~/", 2) == 0 && remote[2];
        char *prog = shell_word(home ? remote + 2 : remote);
        char *path = u->path ? shell_word(u->path) : NULL;
        char *cmd = NULL;

        if (prog && (path || !u->path) &&
            asprintf(&cmd, "%s%s dial-stdio%s%s%s", home ? "~/" : "", prog,
                     stream ? " --end-with-daemon" : "", path ? " --socket " : "",
                     path ? path : "") < 0)
                cmd = NULL;
        free(prog);
        free(path);
        return cmd;
}

/* The words of SBX_SSH_OPTS (split at white space; no quoting) into a. */
static int add_user_opts(struct argv *a, char **ret_msg) {
        const char *s = env_or("SBX_SSH_OPTS", "");
        size_t words = 0;

        while (*s) {
                size_t n;
                while (*s == ' ' || *s == '\t' || *s == '\n')
                        s++;
                n = strcspn(s, " \t\n");
                if (n == 0)
                        break;
                if (++words > MAX_USER_OPTS) {
                        if (asprintf(ret_msg, "SBX_SSH_OPTS holds more than %d words",
                                     MAX_USER_OPTS) < 0)
                                *ret_msg = NULL;
                        return -EINVAL;
                }
                argv_add_owned(a, strndup(s, n));
                s += n;
        }
        return 0;
}

/* ssh [SBX_SSH_OPTS] -o BatchMode=yes -T -x -a [-l USER] [-p PORT] -- HOST 'sbx dial-stdio ...'.
 * The user's options come first: for ssh the first value of an option wins, so that an
 * -o there overrides ours ("-o BatchMode=no" lets an SSH_ASKPASS program ask for a
 * passphrase; ssh cannot read the terminal from its own process group). No agent or X11
 * forwarding and no terminal: the remote side is a byte pipe to sbxd. */
static int build_argv(const struct ssh_url *u, bool stream, struct argv *a, char **ret_msg) {
        int r;

        argv_add(a, env_or("SBX_SSH", "ssh"));
        if ((r = add_user_opts(a, ret_msg)) < 0)
                return r;
        argv_add(a, "-o");
        argv_add(a, "BatchMode=yes");
        argv_add(a, "-T");
        argv_add(a, "-x");
        argv_add(a, "-a");
        if (u->user) {
                argv_add(a, "-l");
                argv_add(a, u->user);
        }
        if (u->port) {
                argv_add(a, "-p");
                argv_add(a, u->port);
        }
        argv_add(a, "--");
        argv_add(a, u->host);
        argv_add_owned(a, remote_command(u, stream));
        return a->oom ? -ENOMEM : 0;
}

/* ---- the child ------------------------------------------------------------------------- */

/* fd moved above the standard descriptors (close-on-exec), so that the child's dup2()
 * onto 0, 1 and 2 never meets its own source. The fd, or -1 (fd is closed then). */
static int above_stdio(int fd) {
        int nfd;
        if (fd > STDERR_FILENO)
                return fd;
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        close(fd);
        return nfd;
}

/* 0 when prog can be run (a path with a '/', else found on PATH as posix_spawnp looks),
 * else -errno. posix_spawnp says the same, but only when its child could report the
 * failed exec (under valgrind, say, it cannot, and the child exits 127 as if the remote
 * side had no sbx). */
static int find_program(const char *prog) {
        const char *path = getenv("PATH"), *p;

        if (strchr(prog, '/'))
                return access(prog, X_OK) == 0 ? 0 : -errno;
        if (!path || !*path)
                path = "/bin:/usr/bin"; /* glibc's default for execvp */
        for (p = path;;) {
                size_t n = strcspn(p, ":");
                char buf[PATH_MAX];
                int k = n ? snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog)
                          : snprintf(buf, sizeof(buf), "%s", prog); /* "": the cwd */
                if (k > 0 && (size_t)k < sizeof(buf) && access(buf, X_OK) == 0)
                        return 0;
                if (!p[n])
                        return -ENOENT;
                p += n + 1;
        }
}

static int spawn_ssh(struct ssh_link *l, char **argv, int *ret_fd) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        sigset_t none, dflt;
        int sv[2] = {-1, -1}, ep[2] = {-1, -1}, r = 0;
        pid_t pid;

        if ((r = find_program(argv[0])) < 0)
                return r;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        if (pipe2(ep, O_CLOEXEC) < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        sv[1] = above_stdio(sv[1]);
        ep[1] = above_stdio(ep[1]);
        if (sv[1] < 0 || ep[1] < 0)
                r = -EMFILE;
        if (r == 0 && (r = -posix_spawn_file_actions_init(&fa)) == 0) {
                if ((r = -posix_spawnattr_init(&at)) == 0) {
                        sigemptyset(&none);
                        sigemptyset(&dflt);
                        /* The caller may ignore or block these (Python ignores SIGPIPE). */
                        sigaddset(&dflt, SIGPIPE);
                        sigaddset(&dflt, SIGINT);
                        sigaddset(&dflt, SIGTERM);
                        sigaddset(&dflt, SIGHUP);
                        sigaddset(&dflt, SIGQUIT);
                        sigaddset(&dflt, SIGCHLD);
                        r = -posix_spawn_file_actions_adddup2(&fa, sv[1], STDIN_FILENO);
                        r = r ? r : -posix_spawn_file_actions_adddup2(&fa, sv[1], STDOUT_FILENO);
                        r = r ? r : -posix_spawn_file_actions_adddup2(&fa, ep[1], STDERR_FILENO);
                        r = r ? r
                              : -posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
                                                                       POSIX_SPAWN_SETSIGDEF |
                                                                       POSIX_SPAWN_SETPGROUP);
                        r = r ? r : -posix_spawnattr_setsigmask(&at, &none);
                        r = r ? r : -posix_spawnattr_setsigdefault(&at, &dflt);
                        r = r ? r : -posix_spawnattr_setpgroup(&at, 0);
                        r = r ? r : -posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
                        posix_spawnattr_destroy(&at);
                }
                posix_spawn_file_actions_destroy(&fa);
        }
        if (sv[1] >= 0)
                close(sv[1]);
        if (ep[1] >= 0)
                close(ep[1]);
        if (r < 0) {
                close(sv[0]);
                close(ep[0]);
                return r;
        }
        (void)fcntl(ep[0], F_SETFL, fcntl(ep[0], F_GETFL) | O_NONBLOCK);
        l->pid = pid;
        l->err_fd = ep[0];
        *ret_fd = sv[0];
        return 0;
}

/* ---- the link -------------------------------------------------------------------------- */

void ssh_link_init(struct ssh_link *l) {
        memset(l, 0, sizeof(*l));
        l->err_fd = -1;
}

bool ssh_link_is_url(const char *s) {
        return s && strncmp(s, SSH_LINK_SCHEME, strlen(SSH_LINK_SCHEME)) == 0;
}

int ssh_link_open(struct ssh_link *l, const char *url, bool stream, int *ret_fd, char **ret_msg) {
        struct ssh_url u;
        struct argv a = {0};
        int r;

        *ret_msg = NULL;
        ssh_link_init(l);
        r = parse_url(url, &u, ret_msg);
        if (r == 0)
                r = build_argv(&u, stream, &a, ret_msg);
        if (r == 0) {
                r = spawn_ssh(l, a.v, ret_fd);
                if (r < 0 && asprintf(ret_msg, "cannot reach sbxd at %s: cannot start %s: %s%s",
                                      url, a.v[0], strerror(-r),
                                      r == -ENOENT ? " (install OpenSSH's client: apt-get install "
                                                     "openssh-client; or set SBX_SSH to the "
                                                     "ssh program)"
                                                   : "") < 0)
                        *ret_msg = NULL;
        }
        free(u.buf);
        argv_free(&a);
        return r;
}

void ssh_link_drain(struct ssh_link *l) {
        char buf[4096];

        while (l->err_fd >= 0) {
                ssize_t n = read(l->err_fd, buf, sizeof(buf));
                if (n > 0) {
                        size_t k = (size_t)n;
                        if (k >= sizeof(l->tail)) {
                                memcpy(l->tail, buf + k - sizeof(l->tail), sizeof(l->tail));
                                l->tail_len = sizeof(l->tail);
                        } else {
                                size_t keep = l->tail_len + k > sizeof(l->tail)
                                                      ? sizeof(l->tail) - k
                                                      : l->tail_len;
                                memmove(l->tail, l->tail + l->tail_len - keep, keep);
                                memcpy(l->tail + keep, buf, k);
                                l->tail_len = keep + k;
                        }
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                close(l->err_fd); /* its end (or an error: the same) */
                l->err_fd = -1;
        }
}

/* Reaps the child when it has exited (or, with block, when it exits). True once reaped. */
static bool reap(struct ssh_link *l, bool block) {
        if (!l->pid || l->reaped)
                return true;
        for (;;) {
                int st;
                pid_t r = waitpid(l->pid, &st, block ? 0 : WNOHANG);
                if (r == l->pid) {
                        l->status = st;
                        l->reaped = true;
                        return true;
                }
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        /* ECHILD: the application reaped it (a SIGCHLD handler that waits
                         * for any child, or SIGCHLD ignored). Its status is lost. */
                        l->status = -1;
                        l->reaped = true;
                        return true;
                }
                return false;
        }
}

/* Waits until the deadline for ssh to close its stderr (read to its end) and exit. True
 * once it is reaped. */
static bool wait_exit(struct ssh_link *l, int64_t deadline) {
        while (l->err_fd >= 0) {
                struct pollfd p = {.fd = l->err_fd, .events = POLLIN};
                int n = poll(&p, 1, ms_left(deadline));
                if (n < 0 && errno != EINTR)
                        break;
                if (n == 0)
                        break;
                ssh_link_drain(l);
        }
        while (!reap(l, false)) {
                struct timespec ms = {0, 1000000};
                if (ms_left(deadline) == 0)
                        return false;
                nanosleep(&ms, NULL);
        }
        return true;
}

/* The last non-empty line of what ssh wrote on stderr, into buf (empty when none). */
static void last_line(const struct ssh_link *l, char *buf, size_t len) {
        size_t end = l->tail_len, start;

        while (end > 0 && (l->tail[end - 1] == '\n' || l->tail[end - 1] == '\r' ||
                           l->tail[end - 1] == ' ' || l->tail[end - 1] == '\t'))
                end--;
        start = end;
        while (start > 0 && l->tail[start - 1] != '\n')
                start--;
        while (start < end && (l->tail[start] == '\r' || l->tail[start] == ' '))
                start++;
        if (end - start >= len)
                start = end - (len - 1);
        memcpy(buf, l->tail + start, end - start);
        buf[end - start] = 0;
        for (char *p = buf; *p; p++)
                if ((unsigned char)*p < ' ' || *p == 0x7F)
                        *p = ' ';
}

/* What to do about a failure ssh reported with exit status 255 (its own). */
static const char *ssh_hint(const char *line) {
        if (strstr(line, "Host key verification failed") || strstr(line, "HOST IDENTIFICATION"))
                return " (the host's key is not in known_hosts, or it changed: check the key, "
                       "then record it, e.g. by running ssh to the host once by hand)";
        if (strstr(line, "Permission denied"))
                return " (ssh could not log in without asking: sbx runs ssh with BatchMode=yes, "
                       "so use a key from ssh-agent, or one without a passphrase named by "
                       "IdentityFile in ~/.ssh/config)";
        if (strstr(line, "Could not resolve hostname"))
                return " (check the host name of the ssh:// URL)";
        return "";
}

char *ssh_link_explain(struct ssh_link *l, int wait_ms) {
        char line[512];
        char *m = NULL;
        int r, code;

        if (!l->pid)
                return NULL;
        (void)wait_exit(l, now_ms() + (wait_ms > 0 ? wait_ms : 0));
        last_line(l, line, sizeof(line));
        if (!l->reaped || l->status == -1)
                r = *line ? asprintf(&m, "ssh said: %s", line) : 0;
        else if (WIFSIGNALED(l->status))
                r = asprintf(&m, "ssh was killed by signal %d%s%s", WTERMSIG(l->status),
                             *line ? ": " : "", line);
        else if ((code = WEXITSTATUS(l->status)) == 0)
                r = 0;
        else if (code == 255)
                r = asprintf(&m, "ssh failed (exit status 255): %s%s",
                             *line ? line : "(it said nothing)", ssh_hint(line));
        else if (code == 127)
                r = asprintf(&m,
                             "no sbx on the remote side (exit status 127: %s); install sbx there "
                             "(it must be on the PATH of a non-interactive ssh session), or set "
                             "SBX_SSH_REMOTE_SBX to its path",
                             *line ? line : "command not found");
        else if (code == 126)
                r = asprintf(&m, "the remote sbx cannot be run (exit status 126): %s", line);
        else
                r = asprintf(&m, "`sbx dial-stdio` on the remote side failed (exit status %d): %s",
                             code, *line ? line : "(it said nothing)");
        return r < 0 ? NULL : m;
}

bool ssh_link_reap(struct ssh_link *l) {
        if (l->err_fd >= 0)
                ssh_link_drain(l);
        if (!reap(l, false))
                return false;
        ssh_link_close(l, 0);
        return true;
}

void ssh_link_close(struct ssh_link *l, int grace_ms) {
        if (l->pid && !l->reaped && !wait_exit(l, now_ms() + grace_ms)) {
                (void)kill(l->pid, SIGTERM);
                if (!wait_exit(l, now_ms() + TERM_WAIT_MS)) {
                        (void)kill(l->pid, SIGKILL);
                        (void)reap(l, true);
                }
        }
        if (l->err_fd >= 0)
                close(l->err_fd);
        ssh_link_init(l);
}
