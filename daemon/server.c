/* server.c: the listening socket of sbxd and its connection list; see server.h.
 *
 * Start-up refuses to steal the socket of a live daemon: it first connects to the
 * path, and only when nothing answers (ECONNREFUSED) removes the stale file. */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "sbxd.h"

int server_mkdir_p(const char *path, mode_t mode) {
        char buf[SBX_PATH_MAX_BYTES];
        char *p;

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);
        for (p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* 1 when something accepts connections at path, 0 when not (stale or absent). */
static int socket_is_live(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (r == 0)
                return 1;
        if (errno == ECONNREFUSED || errno == ENOENT)
                return 0;
        /* EACCES and friends: something is there that we cannot judge; do not touch it. */
        return -errno;
}

static void on_connection(uv_stream_t *listener, int status) {
        struct server *s = listener->data;
        struct conn *c;

        if (status < 0) {
                log_warning("accept failed: %s", uv_strerror(status));
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                log_err("out of memory accepting a connection");
                return;
        }
        c->d = s->d;
        c->server = s;
        c->refs = 1; /* the server's */
        c->id = ++s->next_conn_id;
        if (uv_pipe_init(s->d->loop, &c->pipe, 0) < 0) {
                free(c);
                return;
        }
        c->pipe.data = c;
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        if (uv_accept(listener, (uv_stream_t *)&c->pipe) < 0) {
                conn_close(c);
                return;
        }
        if (s->n_conns > SBX_MAX_CONNECTIONS) {
                log_warning("conn=%llu refused: %u connections open (maximum %u)",
                            (unsigned long long)c->id, s->n_conns - 1, SBX_MAX_CONNECTIONS);
                frame_reader_init(&c->reader, s->d->cfg->max_frame_bytes);
                conn_send_status(c, 0, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "sbxd has %u connections open, its maximum; close idle clients",
                                 SBX_MAX_CONNECTIONS);
                conn_close(c);
                return;
        }
        if (conn_start(c) < 0) {
                log_warning("conn=%llu: cannot read peer credentials; closing",
                            (unsigned long long)c->id);
                conn_close(c);
        }
}

void server_forget(struct server *s, struct conn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else if (s->conns == c)
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
        s->n_conns--;
}

int server_lock_file(const char *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
                close(fd);
                return r;
        }
        return fd;
}

int server_bind(struct server *s, struct sbxd *d, const char *path) {
        char dir[SBX_PATH_MAX_BYTES];
        char *slash;
        mode_t old_umask;
        int r;

        memset(s, 0, sizeof(*s));
        s->d = d;
        s->lock_fd = -1;
        if (strlen(path) + 6 >= sizeof(dir) ||
            strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return -ENAMETOOLONG;
        strcpy(dir, path);
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                r = server_mkdir_p(dir, 0755);
                if (r < 0)
                        return r;
        }
        /* The lock is the daemon's claim on the socket for its whole life: a second
         * daemon fails here, before it touches anything. */
        snprintf(dir, sizeof(dir), "%s.lock", path);
        r = server_lock_file(dir);
        if (r < 0)
                return r;
        s->lock_fd = r;
        /* Belt and braces for a daemon that predates the lock. */
        r = socket_is_live(path);
        if (r != 0) {
                close(s->lock_fd);
                s->lock_fd = -1;
                return r < 0 ? r : -EADDRINUSE;
        }
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;

        r = uv_pipe_init(d->loop, &s->listener, 0);
        if (r < 0)
                return r;
        s->listener.data = s;
        /* The socket is created 0660 at once: no window where others could connect. */
        old_umask = umask(0117);
        r = uv_pipe_bind(&s->listener, path);
        umask(old_umask);
        if (r < 0) {
                uv_close((uv_handle_t *)&s->listener, NULL);
                return r;
        }
        s->path = strdup(path);
        return s->path ? 0 : -ENOMEM;
}

int server_adopt(struct server *s, struct sbxd *d, int fd, const char **ret_path) {
        struct sockaddr_un sa;
        socklen_t len = sizeof(sa);
        char lock[SBX_PATH_MAX_BYTES];
        int r;

        memset(s, 0, sizeof(*s));
        s->d = d;
        s->lock_fd = -1;
        s->activated = 1;
        memset(&sa, 0, sizeof(sa));
        if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                return -errno;
        if (sa.sun_path[0] != '/')
                return -EINVAL; /* abstract or unnamed: no path to protect or report */
        s->path = strndup(sa.sun_path, sizeof(sa.sun_path));
        if (!s->path)
                return -ENOMEM;
        snprintf(lock, sizeof(lock), "%s.lock", s->path);
        r = server_lock_file(lock);
        if (r < 0)
                return r;
        s->lock_fd = r;
        r = uv_pipe_init(d->loop, &s->listener, 0);
        if (r < 0)
                return r;
        s->listener.data = s;
        r = uv_pipe_open(&s->listener, fd);
        if (r < 0)
                return r;
        *ret_path = s->path;
        return 0;
}

int server_listen(struct server *s) {
        int r = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
        if (r < 0)
                return r;
        s->listening = 1;
        return 0;
}

void server_stop_listening(struct server *s) {
        if (!s->listening)
                return;
        s->listening = 0;
        uv_close((uv_handle_t *)&s->listener, NULL);
        if (s->path && !s->activated)
                unlink(s->path);
}

void server_release(struct server *s) {
        char lock[SBX_PATH_MAX_BYTES];
        if (s->lock_fd < 0)
                return;
        if (s->path) {
                snprintf(lock, sizeof(lock), "%s.lock", s->path);
                unlink(lock);
        }
        close(s->lock_fd);
        s->lock_fd = -1;
}

void server_close_all(struct server *s) {
        struct conn *c, *next;

        server_stop_listening(s);
        for (c = s->conns; c; c = next) {
                next = c->next;
                conn_close(c);
        }
}
