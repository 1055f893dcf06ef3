/* server.h: the listening Unix socket of sbxd and the list of its connections, each
 * admitted (admit.h) before it is served.
 *
 * Owns the listening handle, the locks next to the socket, and the first reference of
 * every connection (conn.h), whose handlers it wires to the request layer (rpc.h).
 * Called by main() at start-up and shutdown. */
#ifndef SBX_SERVER_H
#define SBX_SERVER_H

#include <sys/types.h>

#include "conn.h"

struct server {
        uv_pipe_t listener;
        struct sbxd *d;
        struct conn *conns;          /* doubly linked through conn->next/prev (ours) */
        unsigned n_conns;
        uint64_t next_conn_id;
        int listening;
        int lock_fd;                 /* flock on PATH.lock, held for the daemon's life */
        int activated;               /* the socket came from the service manager: never unlinked */
        int created_dir;             /* server_bind created the socket's directory */
        char *path;
};

/* Takes the lock PATH.lock and creates the socket at path (mode 0660, parent
 * directories 0755; s->created_dir says whether its directory was made here) without
 * listening yet. Refuses with -EADDRINUSE when another daemon
 * holds the lock or answers on the socket; replaces a dead one's stale socket. */
int server_bind(struct server *s, struct sbxd *d, const char *path);

/* Takes over fd, a listening Unix socket passed by socket activation, and the lock
 * next to its path. *ret_path receives the socket's path (owned by s). */
int server_adopt(struct server *s, struct sbxd *d, int fd, const char **ret_path);

/* Gives the bound socket to group gid (owner the daemon's euid, mode still 0660), so
 * that the group's members may connect; and makes its directory (euid, gid) 0750 when
 * that directory is the daemon's own: created by server_bind, or owned by the euid and
 * holding nothing but the socket and its lock. Any other directory is left as it is,
 * with a warning when the group cannot search it (or a directory above it). Call after
 * server_bind and before server_listen; not for an adopted socket. Returns 0, or -errno
 * when the socket's group cannot be set. */
int server_set_group(struct server *s, gid_t gid);

/* Decides whether the connection c of s, whose peer credentials conn_serve has read,
 * may be served: admit_connection() (admit.h) with the connections open and those its
 * uid is served on. Returns 0, or the -errno with a message for the client in why
 * (whylen bytes), and logs the refusal. Asked by every connection of s before it is
 * served (its admit handler answers the refusal). */
int server_admit(struct server *s, const struct conn *c, char *why, size_t whylen);

/* Starts accepting connections (clients block in connect() until then). */
int server_listen(struct server *s);

/* Serves fd, a connected Unix stream socket, as a connection accepted by s: admitted,
 * then read (tests and the fuzz harness, which have no listener). Returns 0 (served or
 * refused; a peer whose credentials cannot be read is closed), or -ENOMEM or a libuv
 * error: fd is then still the caller's. */
int server_serve_fd(struct server *s, int fd);

/* Creates path (mode) and its missing parents (0755), like mkdir -p. Returns 0 or
 * -errno. Used for the socket's and the state's directories. */
int server_mkdir_p(const char *path, mode_t mode);

/* Takes an exclusive flock on path (created 0600). Returns the fd, -EADDRINUSE when
 * another process holds it, or another -errno. */
int server_lock_file(const char *path);

/* Stops accepting and removes the socket file. Existing connections stay open. */
void server_stop_listening(struct server *s);

/* Drops the lock and removes the lock file and the path; the last step of shutdown. */
void server_release(struct server *s);

/* Closes every connection and the listener. */
void server_close_all(struct server *s);

#endif
