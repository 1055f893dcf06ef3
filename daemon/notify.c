/* notify.c: sd_notify and sd_listen_fds without libsystemd; see notify.h.
 *
 * The notify protocol is one datagram of "KEY=VALUE" lines to the AF_UNIX socket named
 * by $NOTIFY_SOCKET (a leading '@' means the abstract namespace); socket activation
 * passes listening sockets from fd 3 on with $LISTEN_PID and $LISTEN_FDS
 * (https://www.freedesktop.org/software/systemd/man/sd_notify.html,
 * https://www.freedesktop.org/software/systemd/man/sd_listen_fds.html). */
#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *state) {
        const char *path = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t len;
        socklen_t salen;
        ssize_t n;
        int fd;

        if (!path || !path[0])
                return 0;
        len = strlen(path);
        if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
                return -EINVAL;
        memcpy(sa.sun_path, path, len);
        if (sa.sun_path[0] == '@')
                sa.sun_path[0] = '\0';
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
        close(fd);
        return n < 0 ? -errno : 1;
}

int notify_listen_fd(void) {
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        int type = 0, listening = 0;
        socklen_t len = sizeof(int);
        struct sockaddr_un sa;
        socklen_t salen = sizeof(sa);

        if (!pid || !fds || strtol(pid, NULL, 10) != (long)getpid())
                return 0;
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        if (strtol(fds, NULL, 10) != 1)
                return -EINVAL;
        if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
                return -errno;
        len = sizeof(int);
        if (getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
                return -errno;
        if (getsockname(3, (struct sockaddr *)&sa, &salen) < 0)
                return -errno;
        if (type != SOCK_STREAM || !listening || sa.sun_family != AF_UNIX)
                return -EINVAL;
        if (fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        return 3;
}
