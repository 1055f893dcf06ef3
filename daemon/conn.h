/* conn.h: one client connection of sbxd, the daemon's transport: its peer's
 * credentials, its frame reader, its write queue with backpressure, and the requests
 * it has in flight.
 *
 * A connection knows neither the server nor the request layer: it reaches them only
 * through the handlers its owner gave to conn_new() (admission, each frame read, its
 * closing, its drained write queue, its end). The server creates connections and
 * keeps them in its list; the request layer answers on them with conn_send() and keeps
 * a request it answers later as a struct conn_call, which holds a reference. Replies
 * are not written at once: they wait for the end of the loop turn (turn.h). */
#ifndef SBX_CONN_H
#define SBX_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "frame.h"
#include "quota.h"
#include "sbx_limits.h"
#include "sbx.pb-c.h"

struct sbxd;
struct server;
struct conn;
struct conn_call;

/* What the owner of a connection hears from it; ud is conn_new's. frame is required,
 * the others may be NULL. */
struct conn_handlers {
        /* The peer's credentials are read (conn_peer): return 0 to serve it, or a
         * negative value after answering the refusal (a status with request id 0):
         * the connection is then shut down once that answer is written, without a
         * request being read. NULL: every peer is served. */
        int (*admit)(void *ud, struct conn *c);
        /* One complete frame (its payload, valid during the call). Return 0 to go on
         * reading, or a negative value after answering why the frame is refused: the
         * connection is then shut down once the answers are written. Never called
         * inside another call of frame on the same connection, nor from conn_call_end. */
        int (*frame)(void *ud, struct conn *c, const uint8_t *payload, size_t len);
        /* The connection is closing (conn_close), before the open calls hear it. */
        void (*closing)(void *ud, struct conn *c);
        /* Its queue of unsent replies drained below half SBX_CONN_WRITE_HIGH_WATER_BYTES
         * after it went over, before the open calls hear it. */
        void (*drained)(void *ud, struct conn *c);
        /* Its handle is closed (the connection stays allocated while references are
         * held): the owner drops it from its list. */
        void (*closed)(void *ud, struct conn *c);
};

/* Who is on the other end, as the kernel said at accept (SO_PEERCRED, SO_PEERGROUPS).
 * groups belongs to the connection and lives as long as it does. */
struct conn_peer {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        const gid_t *groups;
        size_t n_groups;
};

/* A request answered later, as its connection keeps it: embed one in the object that
 * will answer (libuv style) and find that object again with its address. While open it
 * holds a reference to the connection and counts towards SBX_MAX_INFLIGHT_PER_CONN. */
typedef void (*conn_call_cb)(struct conn_call *call);
struct conn_call {
        struct conn *conn;             /* set by conn_call_begin, NULL after conn_call_end */
        conn_call_cb on_closing;       /* the connection closes while the call is open */
        conn_call_cb on_drained;       /* its replies drained: a paused stream may go on */
        struct conn_call *next, *prev; /* conn.c's */
};

/* A connection handed over (conn_hand_over): stream is its socket, rest (rest_len bytes,
 * valid during the call only) what the peer sent after the last request's frame. */
typedef void (*conn_handed_cb)(void *ud, struct conn *c, uv_stream_t *stream,
                               const uint8_t *rest, size_t rest_len);

/* The connection. Its fields are conn.c's (but next and prev, its owner's list links):
 * use the functions below. */
struct conn {
        uv_pipe_t pipe;
        struct sbxd *d;
        const struct conn_handlers *handlers;
        void *handlers_ud;
        struct conn *next, *prev; /* the owner's list (server.c's links) */
        struct frame_reader reader;
        uint64_t id; /* for log lines: conn=N */
        uid_t uid;   /* SO_PEERCRED at accept */
        gid_t gid;
        pid_t pid;
        gid_t *groups; /* supplementary groups at accept (SO_PEERGROUPS), owned */
        size_t n_groups;
        char client_name[SBX_CLIENT_NAME_MAX_BYTES + 1];
        size_t write_queued_bytes;
        unsigned inflight;            /* requests answered later */
        struct conn_call *open_calls; /* those kept with conn_call_begin */
        unsigned refs;
        int reading;
        int closed;      /* uv_close called; sends are dropped */
        int admitted;    /* the admit handler said yes */
        uv_timer_t kick; /* resumes frame processing from the loop */
        int kick_inited;
        int read_eof;
        unsigned held;           /* replies in the daemon's held queue */
        int shutdown_wanted;     /* shut down once those are written */
        int congested;           /* went over the high-water mark; hears when it drains */
        struct quota_hold rhold; /* the reader's buffer, held for the peer (QUOTA_BUFFERED) */
        int refused;             /* the budget refused the reader more room: quota_hold_to's */
        uint64_t skip_left;      /* bytes of a refused frame still to read and drop */
        uint64_t skip_id, skip_len; /* its request_id and length, for its answer */
        uv_timer_t frame_timer;  /* a frame begun must arrive whole (--frame-timeout) */
        int frame_timer_inited;
        uint64_t frames; /* frames taken; the timer runs for the one after frame_timed */
        uint64_t frame_timed;
        int handing;            /* conn_hand_over_begin: no more frames taken */
        int handed;             /* the socket is its new owner's: nothing sent or read */
        conn_handed_cb hand_cb; /* conn_hand_over's, until it is called */
        void *hand_ud;
};

/* ---- life --------------------------------------------------------------------------- */

/* Creates a connection of daemon d, numbered id (conn=N in the log), whose handle is
 * initialised on d->loop but holds no socket yet: give it one with conn_accept or
 * conn_open, then conn_serve. handlers (static storage) and ud are its owner's. The
 * connection holds its first reference itself and drops it once its handle is closed
 * (conn_close, or the peer going away), after the closed handler: the owner keeps it
 * in a list until then and takes no reference of its own. Returns 0 with *ret, or
 * -ENOMEM, or a libuv error. */
int conn_new(struct sbxd *d, uint64_t id, const struct conn_handlers *handlers, void *ud,
             struct conn **ret);

/* Accepts the next connection of listener into c. Returns 0 or a libuv error. */
int conn_accept(struct conn *c, uv_stream_t *listener);

/* Takes over fd, a connected Unix stream socket (tests and the fuzz harness). Returns 0
 * or a libuv error; fd stays the caller's on failure. */
int conn_open(struct conn *c, int fd);

/* Reads the peer's credentials and supplementary groups, asks the admit handler, then
 * reads requests; or, refused, shuts the connection down once the refusal is written.
 * Call once, after conn_accept or conn_open. Returns 0 (served or refused), or -errno
 * when the peer's credentials cannot be read (the caller closes it). */
int conn_serve(struct conn *c);

/* Closes the connection (idempotent): the closing handler, then every open call, hear
 * it; sends are dropped from now on. In-flight work keeps its references; the memory
 * goes with the last one. */
void conn_close(struct conn *c);

struct conn *conn_ref(struct conn *c);
/* Drops a reference; frees the connection when the last one goes after close. Accepts
 * NULL. */
void conn_unref(struct conn *c);

/* ---- who it is ---------------------------------------------------------------------- */

uint64_t conn_id(const struct conn *c);
struct sbxd *conn_daemon(const struct conn *c);
/* Fills *ret with the peer's credentials (read by conn_serve). */
void conn_peer(const struct conn *c, struct conn_peer *ret);
/* The fd of the connection's socket, or -EBADF before it has one. */
int conn_fd(const struct conn *c);
/* 1 once closed (conn_close): sends are dropped. */
int conn_is_closed(const struct conn *c);
/* 1 while it counts towards its uid's cap: admitted and not closed. */
int conn_is_served(const struct conn *c);
/* The name the client gave in Hello, or NULL. */
const char *conn_client_name(const struct conn *c);
/* Keeps name (at most SBX_CLIENT_NAME_MAX_BYTES) as the client's name. Returns 0, or
 * -ENAMETOOLONG (the old name stays). */
int conn_set_client_name(struct conn *c, const char *name);

/* ---- replies ------------------------------------------------------------------------ */

/* Packs resp and holds it until the end of the loop turn (turn.h). Returns 0, -EPIPE
 * when the connection is closed (the response is dropped), -EMSGSIZE/-ENOMEM when it
 * cannot be encoded. Never blocks. */
int conn_send(struct conn *c, const Sbx__V1__Response *resp);

/* conn_send for a response one bytes field of which is data (len bytes, malloc()ed):
 * conn takes data and writes it from where it is, without copying it into the frame
 * (a ReadFile reply of 16 MiB), and frees it once written, or at once on failure or
 * when the connection is closed. Returns as conn_send. */
int conn_send_taking(struct conn *c, const Sbx__V1__Response *resp, uint8_t *data, size_t len);

/* Sends a response with only a status (and the request id). */
int conn_send_status(struct conn *c, uint64_t request_id, Sbx__V1__Code code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* 1 when the write queue is over the high-water mark (streamers should pause). */
int conn_congested(const struct conn *c);

/* The replies of a daemon's connections held for the end of the loop turn (turn.h), in
 * the order they were sent, across connections: conn_send appends to it, and
 * conn_release_held writes them. Its fields are conn.c's. Whoever ends the daemon's loop
 * turns keeps it (struct turn: turn_start points d->held to it) for as long as the
 * connections live; zeroed, it is empty. */
struct write_req;
struct conn_held {
        struct write_req *head, *tail;
};

/* 1 when replies are held in h, waiting for the end of the turn. */
int conn_replies_held(const struct conn_held *h);

/* Writes every reply held in h, in the order they were sent. Called only by turn.c,
 * once the records they may report are committed. */
void conn_release_held(struct conn_held *h);

/* ---- requests answered later -------------------------------------------------------- */

/* Opens call on c: links it into c's open calls, takes a reference to c, and counts it
 * towards SBX_MAX_INFLIGHT_PER_CONN (reading pauses at the cap). on_closing and
 * on_drained may be NULL; each may end the call it is given, and no other. */
void conn_call_begin(struct conn *c, struct conn_call *call, conn_call_cb on_closing,
                     conn_call_cb on_drained);

/* Ends call: unlinks it, lets its connection read more (frames already received are
 * processed from the loop, never inside this call), and drops the reference. */
void conn_call_end(struct conn_call *call);

/* ---- leaving the protocol ----------------------------------------------------------- */

/* A request turns c into a byte pipe to something else (OpenPort): called from the
 * frame handler of that request, stops taking frames (and reading): what the peer sent
 * after that frame is kept as it came. Returns 0, -EBUSY when other requests of c are
 * still answered later (their replies would land in the pipe), or -EPIPE when c is
 * closed or shutting down. */
int conn_hand_over_begin(struct conn *c);

/* The request failed (answered with an error): what the peer sent after its frame was
 * meant for the stream, so it is let go, nothing more is read, and c closes once the
 * answer is written (were c to take frames again, stream bytes a client relays from
 * someone else would run as its requests). */
void conn_hand_over_cancel(struct conn *c);

/* After conn_hand_over_begin and the request's reply (conn_send): once every reply sent
 * on c is written (held to the end of the turn, then taken by the kernel: a peer that
 * does not read holds the hand-over back), cb(ud, ...) is called once, from the loop,
 * never inside a conn_* call. From then on c's socket is the callee's to read and write
 * as stream (its data field is c's: a relay borrows and gives it back), c sends and reads
 * nothing more, and it stays open, counted as a connection, until its new owner closes it
 * with conn_close. The owner keeps a struct conn_call open on c from before this call
 * until it is done with stream: its on_closing is how it hears that c closes (the daemon
 * shutting down, the peer gone before the hand-over), and it must stop using stream there;
 * cb is not called once c has closed. */
void conn_hand_over(struct conn *c, conn_handed_cb cb, void *ud);

#endif
