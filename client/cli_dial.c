/* cli_dial.c: `sbx dial-stdio`, the remote half of libsbx's ssh:// transport.
 *
 * A client with SBX_SOCKET=ssh://host runs `ssh host sbx dial-stdio`; this command
 * connects to the local daemon's socket (found as every other command finds it) and
 * copies bytes both ways between the socket and stdin/stdout, unchanged (cli_relay.c),
 * until both directions have ended: the end of stdin is passed on as a half-close
 * (shutdown SHUT_WR), which sbxd takes as the client going away from a framed
 * connection, and which a stream of OpenPort passes on to the sandbox's server; the end
 * of the daemon's side ends stdout, while stdin goes on being copied (a stream may go on
 * uploading after the server half-closed). It ends early when the daemon closed its
 * socket altogether (it restarted: the client must see the pipe closed to reconnect),
 * when the daemon's socket stops taking bytes (then its last bytes are still delivered)
 * or stdout's reader went away. With --end-with-daemon it ends with the daemon's side:
 * what libsbx asks for a stream of sbx_open_port over ssh://, because ssh cannot pass a
 * half-close of the remote stdout on to a client whose stdin and stdout are one socket
 * (it closes its copy of stdout, and the socket stays open through stdin). The daemon
 * sees this process, so the ssh user, as its peer. It never writes anything but the
 * daemon's bytes on stdout; failures are one line on stderr and exit status 125, as
 * everywhere in sbx. Unlike the other commands it does not go through libsbx, which
 * would speak the protocol rather than pass it on. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

int cmd_dial_stdio(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt spec[] = {{"end-with-daemon", false, 0}, {NULL, false, 0}};
        bool end_with_daemon = false;
        char path[SBX_PATH_MAX_BYTES];
        struct cli_opts p;
        int k, fd = -1, status, r;

        cli_opts_init(&p, cli, argc, argv, spec);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == 0) {
                        end_with_daemon = true;
                        continue;
                }
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
        r = relay_copy(STDIN_FILENO, STDOUT_FILENO, fd, end_with_daemon);
        close(fd);
        if (r < 0)
                return cli_error(SBX_UNAVAILABLE,
                                 "sbx dial-stdio: copying between %s and stdio: %s", path,
                                 strerror(-r));
        return 0;
}
