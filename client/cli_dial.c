/* cli_dial.c: `sbx dial-stdio`, the remote half of libsbx's ssh:// transport.
 *
 * A client with SBX_SOCKET=ssh://host runs `ssh host sbx dial-stdio`; this command
 * connects to the local daemon's socket (found as every other command finds it) and
 * copies bytes both ways between the socket and stdin/stdout, unchanged, until the
 * daemon closes or both directions have ended: the end of stdin is passed on as a
 * half-close (shutdown SHUT_WR), which sbxd takes as the client going away. The daemon
 * sees this process, so the ssh user, as its peer. It never writes anything but the
 * daemon's bytes on stdout; failures are one line on stderr and exit status 125, as
 * everywhere in sbx. Unlike the other commands it does not go through libsbx, which
 * would speak the protocol rather than pass it on. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DIAL_BUF_BYTES (64u * 1024u)

/* One direction of the copy: bytes read from `from` wait in buf until `to` takes them. */
struct pump {
        int from, to;
        bool to_is_socket; /* the end is a shutdown(SHUT_WR) rather than a close */
        uint8_t buf[DIAL_BUF_BYTES];
        size_t off, len;
        bool eof;  /* from has ended: nothing more to read */
        bool done; /* eof and everything written, the end passed on */
};

/* Connects to the Unix socket at path. The fd, or an exit status after the error. */
static int dial(const char *path, int *ret_fd) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return cli_error(SBX_INVALID_ARGUMENT, "socket path '%s' is too long", path);
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return cli_error(SBX_UNAVAILABLE, "cannot create a Unix socket: %s",
                                 strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                close(fd);
                return cli_error(SBX_UNAVAILABLE, "cannot connect to sbxd at %s on this host: %s%s",
                                 path, strerror(err),
                                 err == ENOENT || err == ECONNREFUSED
                                         ? " (is sbxd running here? `systemctl start sbxd`, "
                                           "or name its socket in the ssh:// URL's path)"
                                 : err == EACCES ? " (the ssh user may not use this socket: "
                                                   "log in as the daemon's user or a member "
                                                   "of the socket's group)"
                                                 : "");
        }
        *ret_fd = fd;
        return 0;
}

/* Passes the end of p's input on to its output. */
static void pump_finish(struct pump *p) {
        p->done = true;
        if (p->to_is_socket)
                (void)shutdown(p->to, SHUT_WR);
        else
                (void)close(p->to); /* the other side of ssh sees the end of its stdout */
}

/* Does what poll said p may do. 0, or -errno of a real failure (a peer that went away
 * is an end, not a failure). */
static int pump_step(struct pump *p, short rev_from, short rev_to) {
        if (p->len > p->off && (rev_to & (POLLOUT | POLLERR | POLLHUP))) {
                ssize_t n = write(p->to, p->buf + p->off, p->len - p->off);
                if (n < 0 && errno != EINTR && errno != EAGAIN)
                        return errno == EPIPE || errno == ECONNRESET ? -EPIPE : -errno;
                if (n > 0)
                        p->off += (size_t)n;
                if (p->off == p->len)
                        p->off = p->len = 0;
        }
        if (!p->eof && p->len == 0 && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t n = read(p->from, p->buf, sizeof(p->buf));
                if (n > 0)
                        p->len = (size_t)n;
                else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                        p->eof = true; /* an error reading is an end as well */
        }
        if (p->eof && p->len == 0 && !p->done)
                pump_finish(p);
        return 0;
}

static void set_nonblock(int fd, int *saved) {
        *saved = fcntl(fd, F_GETFL);
        if (*saved >= 0)
                (void)fcntl(fd, F_SETFL, *saved | O_NONBLOCK);
}

/* Copies both ways until the daemon's side has ended (nothing more can come from it) or
 * both have. 0 or -errno. */
static int copy_both_ways(int sock) {
        static struct pump up, down; /* stdin -> daemon, daemon -> stdout */
        int saved_in, saved_out, r = 0;

        up = (struct pump){.from = STDIN_FILENO, .to = sock, .to_is_socket = true};
        down = (struct pump){.from = sock, .to = STDOUT_FILENO};
        set_nonblock(STDIN_FILENO, &saved_in);
        set_nonblock(STDOUT_FILENO, &saved_out);
        while (!down.done && r == 0) {
                struct pollfd p[3] = {{.fd = -1}, {.fd = -1}, {.fd = -1}};
                /* p[0]: stdin, p[1]: the socket, p[2]: stdout. */
                if (!up.eof && up.len == 0)
                        p[0] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
                p[1].events = (short)((!down.eof && down.len == 0 ? POLLIN : 0) |
                                      (up.len > up.off ? POLLOUT : 0));
                p[1].fd = p[1].events ? sock : -1; /* else its hang-up would spin the loop */
                if (down.len > down.off)
                        p[2] = (struct pollfd){.fd = STDOUT_FILENO, .events = POLLOUT};
                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                r = pump_step(&up, p[0].revents, p[1].revents);
                if (r == -EPIPE) /* the daemon stopped reading: it closed */
                        r = 0, up.eof = up.done = true, up.len = up.off = 0;
                if (r == 0)
                        r = pump_step(&down, p[1].revents, p[2].revents);
                if (r == -EPIPE) /* the client went away: nothing more to deliver */
                        r = 0, down.done = true;
        }
        if (saved_in >= 0)
                (void)fcntl(STDIN_FILENO, F_SETFL, saved_in);
        if (saved_out >= 0 && !down.done)
                (void)fcntl(STDOUT_FILENO, F_SETFL, saved_out);
        return r;
}

int cmd_dial_stdio(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt none[] = {{NULL, false, 0}};
        char path[SBX_PATH_MAX_BYTES];
        struct cli_opts p;
        int k, fd = -1, status, r;

        cli_opts_init(&p, cli, argc, argv, none);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "dial-stdio");
                        return 0;
                }
                return k == CLI_OPT_ERR ? CLI_EXIT_ERROR
                                        : cli_usage_error("unexpected argument '%s' for sbx "
                                                          "dial-stdio",
                                                          p.arg);
        }
        if (cli->socket_path)
                snprintf(path, sizeof(path), "%s", cli->socket_path);
        else if (sbx_default_socket_path(path, sizeof(path)) < 0)
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "the default socket path is too long; pass --socket");
        if (strncmp(path, "ssh://", 6) == 0)
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "sbx dial-stdio connects to the daemon on this host, not to "
                                 "'%s' (for a hop through another host use ssh's ProxyJump)",
                                 path);
        if ((status = dial(path, &fd)))
                return status;
        /* A write to a peer that went away must be an error to handle, not a signal. */
        signal(SIGPIPE, SIG_IGN);
        r = copy_both_ways(fd);
        close(fd);
        if (r < 0)
                return cli_error(SBX_UNAVAILABLE,
                                 "sbx dial-stdio: copying between %s and stdio: %s", path,
                                 strerror(-r));
        return 0;
}
