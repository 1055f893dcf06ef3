/* server.h: the listening Unix socket of sbxd and the list of its connections.
 *
 * Owns the listening handle and every struct conn. Called by main() at start-up and
 * shutdown. */
#ifndef SBX_SERVER_H
#define SBX_SERVER_H

#include "conn.h"

struct server {
        uv_pipe_t listener;
        struct sbxd *d;
        struct conn *conns;          /* doubly linked list */
        unsigned n_conns;
        uint64_t next_conn_id;
        int listening;
        char *path;
};

/* Creates the socket at path (mode 0660, parent directories 0755), refusing with
 * -EADDRINUSE when a live daemon answers there and replacing a dead one's socket. */
int server_start(struct server *s, struct sbxd *d, const char *path);

/* Stops accepting and removes the socket file. Existing connections stay open. */
void server_stop_listening(struct server *s);

/* Closes every connection and the listener. */
void server_close_all(struct server *s);

/* Called by conn when a connection's handle is closed and freed. */
void server_forget(struct server *s, struct conn *c);

#endif
