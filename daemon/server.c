/* server.c: the listening socket of sbxd and its connection list; see server.h.
 *
 * Start-up refuses to steal the socket of a live daemon: it first connects to the
 * path, and only when nothing answers (ECONNREFUSED) removes the stale file. With
 * --socket-group the socket (and its directory, when it is the daemon's own) is given
 * to that group before the daemon listens.
 *
 * Connections: each accepted socket becomes a struct conn (conn_new) whose handlers
 * are the ones below: admission asks server_admit, each frame goes to rpc_dispatch,
 * and a closed handle leaves the list. (The request layer hears a connection close or
 * drain through the calls it keeps open on it, conn_call_begin.) The list is
 * linked through the connections' next/prev, which only this file touches.
 *
 * Admission: server_admit counts the connections open and the peer's uid's served
 * ones (a scan of the list, at most SBX_MAX_CONNECTIONS), lets admit.c decide, and logs
 * a refusal, which the connection's admit handler answers with one status (request id
 * 0) before any request is read. */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admit.h"
#include "log.h"
#include "rpc.h"
#include "sbxd.h"

/* How long a lock held by a dying daemon's child is waited for at start-up. */
#define SERVER_LOCK_WAIT_MS 2000


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

/* Connections of uid being served: admitted and not closed. */
static unsigned uid_connections(const struct server *s, uid_t uid) {
        const struct conn *c;
        struct conn_peer peer;
        unsigned n = 0;

        for (c = s->conns; c; c = c->next) {
                conn_peer(c, &peer);
                if (conn_is_served(c) && peer.uid == uid)
                        n++;
        }
        return n;
}

int server_admit(struct server *s, const struct conn *c, char *why, size_t whylen) {
        struct conn_peer peer;
        int r;

        conn_peer(c, &peer);
        r = admit_connection(s->d, c, s->n_conns, uid_connections(s, peer.uid), why, whylen);
        if (r < 0)
                log_warning("conn=%llu refused (uid=%u pid=%d): %s",
                            (unsigned long long)conn_id(c), (unsigned)peer.uid, (int)peer.pid,
                            why);
        return r;
}

/* ---- the connections' handlers ------------------------------------------------------- */

static int on_admit(void *ud, struct conn *c) {
        char why[512];
        int r = server_admit(ud, c, why, sizeof(why));

        if (r < 0)
                conn_send_status(c, 0, rpc_code_from_errno(r), "%s", why);
        return r;
}

static int on_frame(void *ud, struct conn *c, const uint8_t *payload, size_t len) {
        return rpc_dispatch(c, payload, len);
}

/* The connection's handle is closed: it leaves the list (its memory goes with its last
 * reference). */
static void on_closed(void *ud, struct conn *c) {
        struct server *s = ud;

        if (c->prev)
                c->prev->next = c->next;
        else if (s->conns == c)
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
        s->n_conns--;
}

static const struct conn_handlers handlers = {
        .admit = on_admit,
        .frame = on_frame,
        .closed = on_closed,
};

/* A new connection of s, in its list, without a socket yet. Returns 0 with *ret, or
 * -ENOMEM (logged) or a libuv error. */
static int add_conn(struct server *s, struct conn **ret) {
        struct conn *c;
        int r = conn_new(s->d, ++s->next_conn_id, &handlers, s, &c);

        if (r < 0) {
                if (r == -ENOMEM)
                        log_err("out of memory accepting a connection");
                return r;
        }
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        *ret = c;
        return 0;
}

/* Serves c, which has its socket: conn_serve asks server_admit, and answers a refusal
 * itself. */
static void serve(struct conn *c) {
        int r = conn_serve(c);

        if (r < 0) {
                log_warning("conn=%llu: cannot read the peer's credentials and groups (%s); "
                            "closing",
                            (unsigned long long)conn_id(c), strerror(-r));
                conn_close(c);
        }
}

static void on_connection(uv_stream_t *listener, int status) {
        struct server *s = listener->data;
        struct conn *c;

        if (status < 0) {
                log_warning("accept failed: %s", uv_strerror(status));
                return;
        }
        if (add_conn(s, &c) < 0)
                return;
        if (conn_accept(c, listener) < 0) {
                conn_close(c);
                return;
        }
        serve(c);
}

int server_serve_fd(struct server *s, int fd) {
        struct conn *c;
        int r = add_conn(s, &c);

        if (r < 0)
                return r;
        r = conn_open(c, fd);
        if (r < 0) {
                conn_close(c);
                return r;
        }
        serve(c);
        return 0;
}

int server_lock_file(const char *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600), tries;
        if (fd < 0)
                return -errno;
        /* A daemon killed a moment ago may leave the lock held for a little while by a
         * child of its that had not reached execve yet (a fork shares the lock): wait
         * SERVER_LOCK_WAIT_MS for it before calling it another daemon's. */
        for (tries = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; tries++) {
                int r = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
                if (r != -EADDRINUSE || tries * 20 >= SERVER_LOCK_WAIT_MS) {
                        close(fd);
                        return r;
                }
                usleep(20 * 1000);
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
                struct stat st;
                *slash = '\0';
                s->created_dir = lstat(dir, &st) < 0 && errno == ENOENT;
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

/* 1 when a member of group gid (not the owner) may search the directory st: the group
 * bits when it is the directory's group, else the bits for others. */
static int group_may_search(const struct stat *st, gid_t gid) {
        return (st->st_mode & (st->st_gid == gid ? S_IXGRP : S_IXOTH)) != 0;
}

/* 1 when the directory dfd holds nothing but name and name.lock (the socket and its
 * lock): a directory of the daemon's own, such as /run/sbxd from an earlier run. */
static int holds_only_socket(int dfd, const char *name) {
        size_t len = strlen(name);
        struct dirent *de;
        int only = 1, fd = dup(dfd);
        DIR *dir;

        if (fd < 0)
                return 0;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return 0;
        }
        while (only && (de = readdir(dir))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    strcmp(de->d_name, name) == 0)
                        continue;
                only = strncmp(de->d_name, name, len) == 0 &&
                       strcmp(de->d_name + len, ".lock") == 0;
        }
        closedir(dir);
        return only;
}

/* Warns when a directory above dir (a copy, cut in place) keeps group gid's members
 * from reaching the socket. */
static void check_parents(char *dir, gid_t gid) {
        struct stat st;
        char *slash;

        while ((slash = strrchr(dir, '/')) && slash != dir) {
                *slash = '\0';
                if (stat(dir, &st) == 0 && !group_may_search(&st, gid)) {
                        log_warning("members of group %u cannot reach the socket: %s is not "
                                    "searchable for them (mode %04o, group %u); sbxd leaves it "
                                    "as it is",
                                    (unsigned)gid, dir, (unsigned)(st.st_mode & 07777),
                                    (unsigned)st.st_gid);
                        return;
                }
        }
}

int server_set_group(struct server *s, gid_t gid) {
        char dir[SBX_PATH_MAX_BYTES];
        uid_t euid = geteuid();
        const char *name;
        struct stat st;
        char *slash;
        int dfd, r = 0;

        if (s->activated || !s->path || strlen(s->path) >= sizeof(dir))
                return -EINVAL;
        strcpy(dir, s->path);
        slash = strrchr(dir, '/');
        if (!slash)
                return -EINVAL;
        name = s->path + (slash - dir) + 1;
        if (slash == dir)
                slash[1] = '\0'; /* the socket is in / */
        else
                *slash = '\0';
        /* Through the directory held open, never following a link: whatever is at the
         * socket's name is changed, nothing it may point to. */
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (fchownat(dfd, name, euid, gid, AT_SYMLINK_NOFOLLOW) < 0 || fstat(dfd, &st) < 0) {
                r = -errno;
                goto out;
        }
        /* The directory is only made the group's when it is the daemon's own: a shared
         * one (/run, a home directory) would be opened to the group, or closed to
         * others who need it. */
        if (st.st_uid == euid && (s->created_dir || holds_only_socket(dfd, name))) {
                if (fchown(dfd, euid, gid) < 0 || fchmod(dfd, 0750) < 0) {
                        r = -errno;
                        goto out;
                }
                log_info("socket directory %s: group %u, mode 0750", dir, (unsigned)gid);
        } else if (!group_may_search(&st, gid)) {
                log_warning("members of group %u cannot reach the socket: its directory %s "
                            "(owner %u, mode %04o) is not sbxd's own, so sbxd leaves it as it "
                            "is; make it searchable for the group",
                            (unsigned)gid, dir, (unsigned)st.st_uid,
                            (unsigned)(st.st_mode & 07777));
        } else {
                log_info("socket directory %s is not sbxd's own: left as it is (searchable for "
                         "group %u)",
                         dir, (unsigned)gid);
        }
        check_parents(dir, gid);
out:
        close(dfd);
        return r;
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
