/* conn.h: one client connection: its peer credentials, its frame reader, its write
 * queue with backpressure, and its count of requests in flight.
 *
 * Owned by the server's connection list. Objects that answer a request later (a
 * running command, a sandbox being created) hold a reference (conn_ref) and send with
 * conn_send(), which silently drops responses once the connection is closed. Frames
 * read are handed to rpc_dispatch(). */
#ifndef SBX_CONN_H
#define SBX_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "frame.h"
#include "sbx_limits.h"
#include "sbx.pb-c.h"

struct sbxd;
struct server;
struct call;

struct conn {
        uv_pipe_t pipe;
        struct sbxd *d;
        struct server *server;
        struct conn *next, *prev;      /* the server's list */
        struct frame_reader reader;
        uint64_t id;                   /* for log lines: conn=N */
        uid_t uid;                     /* SO_PEERCRED at accept */
        gid_t gid;
        pid_t pid;
        gid_t *groups;                 /* supplementary groups at accept (SO_PEERGROUPS), owned */
        size_t n_groups;
        char client_name[SBX_CLIENT_NAME_MAX_BYTES + 1];
        size_t write_queued_bytes;
        unsigned inflight;             /* requests answered later */
        struct call *calls;            /* those requests (owned by rpc) */
        unsigned refs;
        int reading;
        int closed;                    /* uv_close called; sends are dropped */
        int admitted;                  /* passed server_admit: counts towards its uid's cap */
        uv_timer_t kick;               /* resumes frame processing from the loop */
        int kick_inited;
        int read_eof;
        unsigned held;                 /* replies in the daemon's held queue */
        int shutdown_wanted;           /* shut down once those are written */
        int congested;                 /* went over the high-water mark; rpc hears when it drains */
};

/* Starts an accepted connection (already in c->pipe): reads the peer's credentials and
 * supplementary groups, asks server_admit() whether it may be served, then serves it,
 * or answers the refusal with one status (request id 0) and closes it. Called by the
 * server. Returns 0 (served or refused), or -errno when the peer's credentials cannot
 * be read (the caller closes it). */
int conn_start(struct conn *c);

/* Packs resp and holds it until the end of the loop turn (turn.h). Returns 0, -EPIPE
 * when the connection is closed (the response is dropped), -EMSGSIZE/-ENOMEM when it
 * cannot be encoded. Never blocks. */
int conn_send(struct conn *c, const Sbx__V1__Response *resp);

/* 1 when replies of d's connections are held, waiting for the end of the turn. */
int conn_replies_held(const struct sbxd *d);

/* Writes every held reply of d's connections, in the order they were sent. Called only
 * by turn.c, once the records they may report are committed. */
void conn_release_held(struct sbxd *d);

/* Sends a response with only a status (and the request id). */
int conn_send_status(struct conn *c, uint64_t request_id, Sbx__V1__Code code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* A request that was answered later is complete: lets the connection read more. */
void conn_request_done(struct conn *c);

/* Marks a request as answered later (counts towards SBX_MAX_INFLIGHT_PER_CONN). */
void conn_request_begin(struct conn *c);

/* 1 when the write queue is over the high-water mark (streamers should pause). */
int conn_congested(const struct conn *c);

struct conn *conn_ref(struct conn *c);
/* Drops a reference; frees the connection when the last one goes after close. */
void conn_unref(struct conn *c);

/* Closes the connection (idempotent). In-flight work keeps its references. */
void conn_close(struct conn *c);

#endif
