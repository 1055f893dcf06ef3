/* conn.c: one client connection of sbxd, its transport; see conn.h.
 *
 * Reading: bytes go straight into the connection's frame reader; each complete frame
 * goes to the frame handler (the server wires rpc_dispatch). Reading pauses while the
 * connection has SBX_MAX_INFLIGHT_PER_CONN requests in flight or more than
 * SBX_CONN_WRITE_HIGH_WATER_BYTES of unsent responses, so a client that pipelines
 * without reading cannot make the daemon buffer without bound. Frames that arrive while
 * requests finish are processed from the loop (the kick timer), never inside the
 * request that finished, so requests never nest. A frame that is too large gets one
 * error response, then the connection is shut down; so does one the frame handler
 * refuses.
 *
 * Writing: conn_send packs a response and holds it in the daemon's queue of replies
 * (struct conn_held, d->held); turn.c calls conn_release_held() once the records they
 * may report are committed, and a run of replies to one connection goes out in one
 * write. A connection shut down while replies are held shuts down after they are
 * written.
 *
 * Admission: conn_serve reads the peer's credentials (SO_PEERCRED) and supplementary
 * groups (peercred.h), then asks the admit handler.
 *
 * Hand-over: a request may turn the connection into a byte pipe (OpenPort): frames stop
 * at its frame, and once its reply and every one before it are written, the socket and
 * the bytes read past the frame go to the new owner (conn_hand_over); the connection
 * stays open and counted until that owner closes it.
 *
 * Lifetime: the handle holds the first reference until it is closed; each request
 * answered later holds one (struct conn_call), and so does each batch of replies being
 * written. The owner (the server) keeps the connection in its list until the closed
 * handler. The memory is freed when the handle is closed and the last reference is
 * gone. */
#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "peercred.h"
#include "sbxd.h"

struct write_req {
        uv_write_t req;
        struct conn *conn;
        uint8_t *buf; /* the frame, or its head when ext is set */
        size_t buf_len;
        uint8_t *ext, *tail; /* conn_send_taking: the data, then the rest of the frame */
        size_t ext_len, tail_len;
        size_t len;             /* the whole frame */
        struct write_req *next; /* the daemon's queue of held replies, then the batch */
};

/* Most replies written in one write (uv_write with that many buffers). */
#define CONN_WRITE_BATCH 64u

static void update_reading(struct conn *c);
static void process_frames(struct conn *c);
static void watch_reader(struct conn *c);
static void hand_over_when_written(struct conn *c);
static void on_kick(uv_timer_t *t);

int conn_congested(const struct conn *c) {
        return c->write_queued_bytes > SBX_CONN_WRITE_HIGH_WATER_BYTES;
}

struct conn *conn_ref(struct conn *c) {
        c->refs++;
        return c;
}

static void conn_free(struct conn *c) {
        frame_reader_free(&c->reader);
        (void)quota_hold_to(&c->rhold, 0);
        free(c->groups);
        free(c);
}

static void on_kick_closed(uv_handle_t *h) {
        conn_unref(h->data);
}

static void on_close(uv_handle_t *h) {
        struct conn *c = h->data;
        if (c->handlers && c->handlers->closed)
                c->handlers->closed(c->handlers_ud, c);
        /* The reader's memory goes back now: the connection may be kept a while by
         * calls still in flight. */
        frame_reader_free(&c->reader);
        (void)quota_hold_to(&c->rhold, 0);
        if (c->frame_timer_inited) {
                c->frame_timer_inited = 0;
                conn_ref(c);
                uv_close((uv_handle_t *)&c->frame_timer, on_kick_closed);
        }
        if (c->kick_inited)
                uv_close((uv_handle_t *)&c->kick, on_kick_closed);
        else
                conn_unref(c);
}

void conn_unref(struct conn *c) {
        if (!c)
                return;
        if (--c->refs == 0)
                conn_free(c);
}

/* Tells every open call of c that c is closing (closing != 0) or drained; each may end
 * itself (and only itself) meanwhile. */
static void tell_calls(struct conn *c, int closing) {
        struct conn_call *k, *next;

        for (k = c->open_calls; k; k = next) {
                conn_call_cb cb = closing ? k->on_closing : k->on_drained;
                next = k->next;
                if (cb)
                        cb(k);
        }
}

void conn_close(struct conn *c) {
        if (c->closed)
                return;
        c->closed = 1;
        c->reading = 0;
        if (c->handlers && c->handlers->closing)
                c->handlers->closing(c->handlers_ud, c);
        tell_calls(c, 1);
        log_debug("conn=%llu closed (uid=%u pid=%d)", (unsigned long long)c->id, (unsigned)c->uid,
                  (int)c->pid);
        uv_close((uv_handle_t *)&c->pipe, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
        struct conn *c = req->data;
        free(req);
        conn_close(c);
        conn_unref(c);
}

static void start_shutdown(struct conn *c) {
        uv_shutdown_t *req;

        c->shutdown_wanted = 0;
        req = malloc(sizeof(*req));
        if (!req || uv_shutdown(req, (uv_stream_t *)&c->pipe, on_shutdown) < 0) {
                free(req);
                conn_close(c);
                return;
        }
        req->data = conn_ref(c);
}

/* Stops reading, lets queued responses drain, then closes. */
static void shutdown_after_writes(struct conn *c) {
        if (c->closed)
                return;
        c->read_eof = 1;
        if (c->frame_timer_inited)
                uv_timer_stop(&c->frame_timer);
        update_reading(c);
        if (c->held > 0)
                c->shutdown_wanted = 1; /* conn_release_held starts it */
        else
                start_shutdown(c);
}

/* The write queue drained after it went over the high-water mark: the owner, then
 * every open call, hear it (a paused stream reads its command's output again). */
static void drained(struct conn *c) {
        if (c->handlers && c->handlers->drained)
                c->handlers->drained(c->handlers_ud, c);
        tell_calls(c, 0);
}

/* A batch of replies (a chain through next, the first holding the uv_write_t) is
 * written: each held a reference to the connection. */
static void batch_written(struct write_req *w, int status) {
        struct conn *c = w->conn;
        unsigned refs = 0;

        while (w) {
                struct write_req *next = w->next;
                c->write_queued_bytes -= w->len;
                free(w->buf);
                free(w->ext);
                free(w->tail);
                free(w);
                refs++;
                w = next;
        }
        if (status < 0 && status != UV_ECANCELED) {
                log_debug("conn=%llu write failed: %s", (unsigned long long)c->id,
                          uv_strerror(status));
                conn_close(c);
        } else if (!c->closed) {
                update_reading(c);
                if (c->congested && c->write_queued_bytes <= SBX_CONN_WRITE_HIGH_WATER_BYTES / 2) {
                        c->congested = 0;
                        drained(c);
                }
                hand_over_when_written(c);
        }
        while (refs-- > 0)
                conn_unref(c);
}

static void on_write(uv_write_t *req, int status) {
        batch_written((struct write_req *)req, status);
}

/* Holds w (its frame packed) for the end of the turn. */
static void hold_reply(struct conn *c, struct write_req *w) {
        struct conn_held *h = c->d->held;

        w->conn = conn_ref(c);
        c->write_queued_bytes += w->len;
        c->held++;
        if (h->tail)
                h->tail->next = w;
        else
                h->head = w;
        h->tail = w;
        if (conn_congested(c)) {
                c->congested = 1;
                update_reading(c);
        }
}

int conn_send(struct conn *c, const Sbx__V1__Response *resp) {
        struct write_req *w;
        int r;

        if (c->closed || c->handed)
                return -EPIPE;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        r = frame_pack(&resp->base, c->d->cfg->max_frame_bytes, &w->buf, &w->len);
        if (r < 0) {
                free(w);
                return r;
        }
        w->buf_len = w->len;
        hold_reply(c, w);
        return 0;
}

int conn_send_taking(struct conn *c, const Sbx__V1__Response *resp, uint8_t *data, size_t len) {
        struct frame_split sp;
        struct write_req *w = c->closed || c->handed ? NULL : calloc(1, sizeof(*w));
        int r = c->closed || c->handed ? -EPIPE : -ENOMEM;

        if (w)
                r = frame_pack_split(&resp->base, c->d->cfg->max_frame_bytes, data, len, &sp);
        if (!w || r < 0) {
                free(w);
                free(data);
                return r;
        }
        w->buf = sp.head;
        w->buf_len = sp.head_len;
        w->tail = sp.tail;
        w->tail_len = sp.tail_len;
        if (sp.ext) {
                w->ext = data; /* taken: freed once written */
                w->ext_len = len;
        } else {
                free(data); /* an empty field: nothing of it is written */
        }
        w->len = w->buf_len + w->ext_len + w->tail_len;
        hold_reply(c, w);
        return 0;
}

/* Writes a batch of held replies to one connection (first and its chain, n of them)
 * in one write; the queue no longer has them. */
static void write_batch(struct write_req *first, unsigned n) {
        struct conn *c = first->conn;
        uv_buf_t bufs[3 * CONN_WRITE_BATCH];
        struct write_req *w;
        unsigned i = 0, nb = 0;
        int r = -EPIPE;

        /* A reply is one buffer, or three (head, the data it took, tail). */
        for (w = first; w; w = w->next) {
                bufs[nb++] = uv_buf_init((char *)w->buf, (unsigned)w->buf_len);
                if (w->ext)
                        bufs[nb++] = uv_buf_init((char *)w->ext, (unsigned)w->ext_len);
                if (w->tail_len)
                        bufs[nb++] = uv_buf_init((char *)w->tail, (unsigned)w->tail_len);
        }
        c->held -= n;
        if (!c->closed && uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0) {
                /* Nothing queued before: write now, and queue only what the socket did
                 * not take (a request queued first costs a poll registration). */
                int done = uv_try_write((uv_stream_t *)&c->pipe, bufs, nb);
                size_t left = done > 0 ? (size_t)done : 0;
                i = 0;
                while (i < nb && left >= bufs[i].len)
                        left -= bufs[i++].len;
                if (i == nb) {
                        int shutdown_now = c->shutdown_wanted && c->held == 0;
                        conn_ref(c);
                        batch_written(first, 0);
                        if (shutdown_now && !c->closed)
                                start_shutdown(c);
                        conn_unref(c);
                        return;
                }
                if (done < 0 && done != UV_EAGAIN) {
                        r = done;
                        goto failed;
                }
                bufs[i].base += left;
                bufs[i].len -= left;
                r = uv_write(&first->req, (uv_stream_t *)&c->pipe, bufs + i, nb - i, on_write);
        } else if (!c->closed) {
                r = uv_write(&first->req, (uv_stream_t *)&c->pipe, bufs, nb, on_write);
        }
failed:
        if (r < 0) {
                /* Closed meanwhile (the replies are dropped), or the write failed: the
                 * batch ends as a failed write does, closing the connection. */
                batch_written(first, r);
                return;
        }
        if (c->shutdown_wanted && c->held == 0)
                start_shutdown(c);
}

int conn_replies_held(const struct conn_held *h) {
        return h->head != NULL;
}

void conn_release_held(struct conn_held *h) {
        while (h->head) {
                struct write_req *first = h->head, *last = first;
                unsigned n = 1;
                /* A run of replies to one connection (a streamed command's output) goes
                 * out in one write: fewer system calls, fewer wakeups of the client. */
                while (last->next && last->next->conn == first->conn && n < CONN_WRITE_BATCH) {
                        last = last->next;
                        n++;
                }
                h->head = last->next;
                if (!h->head)
                        h->tail = NULL;
                last->next = NULL;
                write_batch(first, n);
        }
}

int conn_send_status(struct conn *c, uint64_t request_id, Sbx__V1__Code code, const char *fmt,
                     ...) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status st = SBX__V1__STATUS__INIT;
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        resp.has_request_id = 1;
        resp.request_id = request_id;
        st.has_code = 1;
        st.code = code;
        st.message = msg;
        resp.status = &st;
        return conn_send(c, &resp);
}

/* The socket goes to its new owner (conn_hand_over), with what was read past the frame;
 * the reader's memory goes back. */
static void hand_over_now(struct conn *c) {
        conn_handed_cb cb = c->hand_cb;
        const uint8_t *rest;
        size_t n;

        c->hand_cb = NULL;
        c->handed = 1;
        if (c->frame_timer_inited)
                uv_timer_stop(&c->frame_timer);
        n = frame_reader_take_rest(&c->reader, &rest);
        cb(c->hand_ud, c, (uv_stream_t *)&c->pipe, rest, n);
        frame_reader_free(&c->reader);
        (void)quota_hold_to(&c->rhold, 0);
}

/* Every reply is written: a hand-over waiting for it goes on from the loop. */
static void hand_over_when_written(struct conn *c) {
        if (c->hand_cb && c->held == 0 && c->write_queued_bytes == 0 && c->kick_inited)
                uv_timer_start(&c->kick, on_kick, 0, 0);
}

int conn_hand_over_begin(struct conn *c) {
        if (c->closed || c->read_eof || c->handing)
                return -EPIPE;
        if (c->inflight > 0)
                return -EBUSY;
        c->handing = 1;
        if (c->frame_timer_inited)
                uv_timer_stop(&c->frame_timer);
        update_reading(c);
        return 0;
}

void conn_hand_over_cancel(struct conn *c) {
        const uint8_t *rest;

        if (!c->handing || c->handed)
                return;
        c->handing = 0;
        c->hand_cb = NULL;
        /* What the peer sent after the request was the stream's, never frames: let it go,
         * read nothing more, and close once the refusal is written. */
        (void)frame_reader_take_rest(&c->reader, &rest);
        shutdown_after_writes(c);
}

void conn_hand_over(struct conn *c, conn_handed_cb cb, void *ud) {
        c->hand_cb = cb;
        c->hand_ud = ud;
        hand_over_when_written(c);
}

static void inflight_begin(struct conn *c) {
        c->inflight++;
}

static void on_kick(uv_timer_t *t) {
        struct conn *c = t->data;
        conn_ref(c);
        if (c->hand_cb && !c->closed && c->held == 0 && c->write_queued_bytes == 0) {
                hand_over_now(c);
                conn_unref(c);
                return;
        }
        process_frames(c);
        if (!c->closed) {
                watch_reader(c);
                update_reading(c);
        }
        conn_unref(c);
}

static void inflight_done(struct conn *c) {
        if (c->inflight > 0)
                c->inflight--;
        if (c->closed)
                return;
        update_reading(c);
        /* Frames already received wait for the next loop iteration: processing them here
         * would run new requests inside whatever just finished one (a command's end, a
         * sandbox's), and a client pipelining many requests that finish at once would
         * nest without bound. */
        if (c->kick_inited && frame_reader_pending(&c->reader) > 0)
                uv_timer_start(&c->kick, on_kick, 0, 0);
}

/* What of the reader's buffer is held for the peer: beyond its first
 * FRAME_READER_MIN_BYTES, which every connection has (bounded by the connection caps),
 * so that a user at the bound can still send small requests. */
static uint64_t held_part(const struct conn *c) {
        return c->reader.cap > FRAME_READER_MIN_BYTES ? c->reader.cap - FRAME_READER_MIN_BYTES : 0;
}

/* Where a skipped frame's bytes are read to and dropped (loop thread only). */
static uint8_t skip_scratch[64u * 1024u];

/* The frame at the head needs more room than the budget r gives: once its request_id is
 * in (the first bytes of its payload), it is skipped, not kept: what the reader has of
 * it is dropped, and the rest is read and dropped as it comes (skip_left); its answer
 * goes out then. 1 when skipping starts; 0 when more of its first bytes must come in
 * first (*ret_more: how many, at most). */
static int start_skip(struct conn *c, int r, size_t *ret_more) {
        const uint8_t *payload;
        uint32_t len;
        size_t have, need;

        if (!frame_reader_head(&c->reader, &len, &payload, &have))
                return 0; /* cannot be: only a known header makes the reader grow */
        need = len < 16 ? len : 16;
        if (have < need) {
                *ret_more = need - have;
                return 0;
        }
        c->skip_id = frame_request_id(payload, have);
        c->skip_len = len;
        c->skip_left = (uint64_t)len - have;
        c->refused = r;
        log_info("conn=%llu uid=%u: request %llu of %u bytes cannot be held; dropping it as it "
                 "comes",
                 (unsigned long long)c->id, (unsigned)c->uid, (unsigned long long)c->skip_id, len);
        frame_reader_free(&c->reader);
        (void)quota_hold_to(&c->rhold, 0);
        return 1;
}

/* Room for the next read: the reader's, which grows to hold the frame in progress,
 * held for the peer (--max-buffered-per-uid); or, when the budget refuses that, a
 * place to drop the frame's bytes (start_skip). */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct conn *c = h->data;
        size_t len, more = 0;
        uint8_t *p;
        int r;

        buf->base = NULL;
        buf->len = 0;
        if (!c->skip_left) {
                if (frame_reader_prepare(&c->reader, &p, &len) < 0)
                        return;
                r = quota_hold_to(&c->rhold, held_part(c));
                if (r == 0) {
                        buf->base = (char *)p;
                        buf->len = len;
                        return;
                }
                if (!start_skip(c, r, &more)) {
                        /* Only the few bytes that name the request, in the room there is. */
                        buf->base = (char *)p;
                        buf->len = more < len ? more : len;
                        return;
                }
        }
        buf->base = (char *)skip_scratch;
        buf->len = c->skip_left < sizeof(skip_scratch) ? (size_t)c->skip_left : sizeof(skip_scratch);
}

/* The last byte of a skipped frame came: its request is answered. */
static void end_skip(struct conn *c) {
        char why[200];

        quota_explain_buffered(c->rhold.b, c->uid, c->refused, why, sizeof(why));
        log_info("conn=%llu uid=%u: request %llu of %llu bytes refused unread: %s",
                 (unsigned long long)c->id, (unsigned)c->uid, (unsigned long long)c->skip_id,
                 (unsigned long long)c->skip_len, why);
        c->frames++;
        c->refused = 0;
        conn_send_status(c, c->skip_id, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                         "the request (%llu bytes) cannot be held: %s; it was not read; send "
                         "smaller pieces, or wait for your other requests and commands to end",
                         (unsigned long long)c->skip_len, why);
}

/* A frame begun did not arrive whole in time: its connection goes. */
static void on_frame_timeout(uv_timer_t *t) {
        struct conn *c = t->data;
        double secs = (double)c->d->cfg->frame_timeout_ms / 1000.0;

        if (c->closed || c->read_eof)
                return;
        log_info("conn=%llu uid=%u: a request not received whole within %g s; closing",
                 (unsigned long long)c->id, (unsigned)c->uid, secs);
        conn_send_status(c, 0, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                         "a request was not received whole within %g s of its first byte "
                         "(the daemon's --frame-timeout); send each request at once",
                         secs);
        shutdown_after_writes(c);
}

/* After frames were taken: a partial frame at the head must arrive whole within
 * --frame-timeout of when it began (the timer restarts for each new one); the buffer
 * a large frame needed is given back once nothing is pending. */
static void watch_reader(struct conn *c) {
        if (frame_reader_partial(&c->reader) || c->skip_left) {
                if (c->frame_timer_inited && (!uv_is_active((uv_handle_t *)&c->frame_timer) ||
                                              c->frame_timed != c->frames)) {
                        c->frame_timed = c->frames;
                        uv_timer_start(&c->frame_timer, on_frame_timeout,
                                       c->d->cfg->frame_timeout_ms, 0);
                }
                return;
        }
        if (c->frame_timer_inited)
                uv_timer_stop(&c->frame_timer);
        frame_reader_trim(&c->reader);
        (void)quota_hold_to(&c->rhold, held_part(c));
}

static void process_frames(struct conn *c) {
        while (!c->closed && !c->read_eof && !c->handing &&
               c->inflight < SBX_MAX_INFLIGHT_PER_CONN) {
                const uint8_t *payload;
                size_t len;
                int r = frame_reader_next(&c->reader, &payload, &len);
                if (r == 0)
                        return;
                if (r < 0) {
                        log_info("conn=%llu uid=%u: frame larger than %u bytes; closing",
                                 (unsigned long long)c->id, (unsigned)c->uid,
                                 c->d->cfg->max_frame_bytes);
                        conn_send_status(c, 0, SBX__V1__CODE__TOO_LARGE,
                                         "frame exceeds the daemon's maximum of %u bytes; "
                                         "send large files in pieces with offset/append",
                                         c->d->cfg->max_frame_bytes);
                        shutdown_after_writes(c);
                        return;
                }
                c->frames++;
                if (c->handlers->frame(c->handlers_ud, c, payload, len) < 0) {
                        /* The handler already answered with the reason. */
                        shutdown_after_writes(c);
                        return;
                }
        }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct conn *c = s->data;

        if (nread == UV_ENOBUFS) {
                conn_send_status(c, 0, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "daemon out of memory reading a request");
                frame_reader_free(&c->reader);
                (void)quota_hold_to(&c->rhold, 0);
                shutdown_after_writes(c);
                return;
        }
        if (nread > 0 && buf->base == (char *)skip_scratch) {
                c->skip_left -= (uint64_t)nread;
                if (c->skip_left == 0)
                        end_skip(c);
                watch_reader(c);
                return;
        }
        if (nread < 0) {
                /* EOF or error: the client is gone. In-flight work finishes and is
                 * recorded; its responses are dropped. */
                conn_close(c);
                return;
        }
        frame_reader_commit(&c->reader, (size_t)nread);
        conn_ref(c);
        process_frames(c);
        if (!c->closed) {
                watch_reader(c);
                update_reading(c);
        }
        conn_unref(c);
}

static void update_reading(struct conn *c) {
        int want = !c->closed && !c->read_eof && !c->handing && !c->d->shutting_down &&
                   c->inflight < SBX_MAX_INFLIGHT_PER_CONN && !conn_congested(c);
        if (want && !c->reading) {
                if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0)
                        c->reading = 1;
        } else if (!want && c->reading) {
                uv_read_stop((uv_stream_t *)&c->pipe);
                c->reading = 0;
        }
}

/* Reads the peer's credentials and supplementary groups into c. Returns 0 or -errno. */
static int read_peer(struct conn *c) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        char groups[200];
        int fd = conn_fd(c), r;

        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return fd < 0 ? fd : -errno;
        c->uid = cred.uid;
        c->gid = cred.gid;
        c->pid = cred.pid;
        /* Without its groups the daemon cannot act with the caller's rights (a group can
         * deny as well as grant: mode 0604), so a peer whose groups cannot be read is not
         * served. */
        r = peercred_groups(fd, &cred, &c->groups, &c->n_groups);
        if (r < 0)
                return r;
        if (log_enabled(LOG_LEVEL_DEBUG)) {
                peercred_format_groups(c->groups, c->n_groups, groups, sizeof(groups));
                log_debug("conn=%llu accepted (uid=%u gid=%u pid=%d groups=%s)",
                          (unsigned long long)c->id, (unsigned)c->uid, (unsigned)c->gid,
                          (int)c->pid, groups);
        }
        return 0;
}

/* Asks for SBX_CONN_SNDBUF_BYTES of kernel send buffer (never shrinks one set larger;
 * a failure leaves the default: slower, not wrong). */
static void grow_send_buffer(struct conn *c) {
        int want = (int)SBX_CONN_SNDBUF_BYTES, have = 0, fd = conn_fd(c);
        socklen_t len = sizeof(have);

        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &have, &len) < 0 || have >= want)
                return;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) < 0)
                log_debug("conn=%llu: cannot grow its send buffer: %s", (unsigned long long)c->id,
                          strerror(errno));
}

int conn_serve(struct conn *c) {
        int r;

        c->pipe.data = c;
        frame_reader_init(&c->reader, c->d->cfg->max_frame_bytes);
        r = read_peer(c);
        if (r < 0)
                return r;
        c->rhold = (struct quota_hold){.b = &c->d->buffered, .uid = c->uid};
        grow_send_buffer(c);
        if (uv_timer_init(c->d->loop, &c->kick) == 0) {
                c->kick.data = c;
                c->kick_inited = 1;
        }
        if (uv_timer_init(c->d->loop, &c->frame_timer) == 0) {
                c->frame_timer.data = c;
                c->frame_timer_inited = 1;
        }
        if (c->handlers->admit && c->handlers->admit(c->handlers_ud, c) < 0) {
                /* The handler answered the refusal. */
                shutdown_after_writes(c);
                return 0;
        }
        c->admitted = 1;
        update_reading(c);
        return 0;
}

int conn_new(struct sbxd *d, uint64_t id, const struct conn_handlers *handlers, void *ud,
             struct conn **ret) {
        struct conn *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->d = d;
        c->id = id;
        c->handlers = handlers;
        c->handlers_ud = ud;
        c->refs = 1; /* the handle's: dropped once it is closed (on_close) */
        r = uv_pipe_init(d->loop, &c->pipe, 0);
        if (r < 0) {
                free(c);
                return r;
        }
        c->pipe.data = c;
        *ret = c;
        return 0;
}

int conn_accept(struct conn *c, uv_stream_t *listener) {
        return uv_accept(listener, (uv_stream_t *)&c->pipe);
}

int conn_open(struct conn *c, int fd) {
        return uv_pipe_open(&c->pipe, fd);
}

/* ---- who it is --------------------------------------------------------------------- */

uint64_t conn_id(const struct conn *c) {
        return c->id;
}

struct sbxd *conn_daemon(const struct conn *c) {
        return c->d;
}

void conn_peer(const struct conn *c, struct conn_peer *ret) {
        ret->uid = c->uid;
        ret->gid = c->gid;
        ret->pid = c->pid;
        ret->groups = c->groups;
        ret->n_groups = c->n_groups;
}

int conn_fd(const struct conn *c) {
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)&c->pipe, &fd) < 0)
                return -EBADF;
        return fd;
}

int conn_is_closed(const struct conn *c) {
        return c->closed;
}

int conn_is_served(const struct conn *c) {
        return c->admitted && !c->closed;
}

const char *conn_client_name(const struct conn *c) {
        return c->client_name[0] ? c->client_name : NULL;
}

int conn_set_client_name(struct conn *c, const char *name) {
        if (strlen(name) > SBX_CLIENT_NAME_MAX_BYTES)
                return -ENAMETOOLONG;
        snprintf(c->client_name, sizeof(c->client_name), "%s", name);
        return 0;
}

/* ---- requests answered later ------------------------------------------------------- */

void conn_call_begin(struct conn *c, struct conn_call *call, conn_call_cb on_closing,
                     conn_call_cb on_drained) {
        call->conn = conn_ref(c);
        call->on_closing = on_closing;
        call->on_drained = on_drained;
        call->prev = NULL;
        call->next = c->open_calls;
        if (c->open_calls)
                c->open_calls->prev = call;
        c->open_calls = call;
        inflight_begin(c);
}

void conn_call_end(struct conn_call *call) {
        struct conn *c = call->conn;

        if (call->prev)
                call->prev->next = call->next;
        else
                c->open_calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        call->next = call->prev = NULL;
        call->conn = NULL;
        inflight_done(c);
        conn_unref(c);
}
