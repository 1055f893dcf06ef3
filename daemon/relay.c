/* relay.c: bytes piped both ways between two libuv streams (relay.h), with a high and a
 * low water mark per direction, half-closes passed on, byte counts and an idle timeout.
 * Owns its struct, its idle timer, the buffers it reads into and its write and shutdown
 * requests; the streams stay its owner's. Called by the allowlist proxy (egress.c).
 *
 * Lifetime: the struct goes when its owner has freed it, its timer has closed and every
 * request it made has come back (a write or a shutdown the owner's uv_close cancels comes
 * back with UV_ECANCELED before the stream's close callback). */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* Counted for each queued write besides its data and its struct: the allocator's
 * headers, and the data's copy's. */
#define WRITE_EXTRA_BYTES 256u

struct relay {
        uv_stream_t *s[2]; /* side 0, side 1 */
        void *data[2];     /* what their data fields held before */
        struct relay_ops ops;
        void *ud;
        struct relay_bounds bounds;
        uv_timer_t idle;
        uv_timer_t gone;   /* RELAY_GONE_CHECK_MS while a side's end was passed on */
        uint64_t last_ms;  /* uv_now of the last byte read either way */
        uint64_t bytes[2]; /* read from side 0, from side 1 */
        size_t queued[2];  /* memory of the writes of the direction reading from side i */
        int eof[2], paused[2];
        uv_shutdown_t shut[2]; /* [i]: side i's end passed on to the other side */
        int shut_done;         /* half-closes passed on */
        int shut_ok[2];        /* [i]: side i's end was passed on */
        int reqs;              /* writes and shutdowns under way */
        int over;              /* ended or freed: reads no more, calls nothing */
        int freed;             /* relay_free was called */
        int timers_open;       /* until the timers' close callbacks */
};

struct wreq {
        uv_write_t req;
        struct relay *r;
        int from; /* its direction: the side its bytes were read from */
        char *base;
        size_t cost; /* counted in r->queued[from] until written */
};

_Static_assert(sizeof(struct wreq) + WRITE_EXTRA_BYTES <= RELAY_WRITE_COST_BYTES,
               "RELAY_WRITE_COST_BYTES is what relay.h promises a write costs at most");

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void maybe_free(struct relay *r) {
        if (r->freed && !r->timers_open && r->reqs == 0)
                free(r);
}

static void on_timer_closed(uv_handle_t *h) {
        struct relay *r = h->data;

        r->timers_open--;
        maybe_free(r);
}

/* Stops reading both sides and the timer (both may be called again). */
static void stop(struct relay *r) {
        uv_read_stop(r->s[0]);
        uv_read_stop(r->s[1]);
        uv_timer_stop(&r->idle);
        uv_timer_stop(&r->gone);
}

/* The relay ends (how; side and status when a side failed): the owner is told, once.
 * The caller returns at once after: the owner may free r in its callback. */
static void finish(struct relay *r, enum relay_end how, int side, int status) {
        struct relay_result res = {.how = how, .side = side, .status = status};

        if (r->over)
                return;
        r->over = 1;
        stop(r);
        res.bytes[0] = r->bytes[0];
        res.bytes[1] = r->bytes[1];
        r->ops.ended(r, &res, r->ud);
}

static void read_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct relay *r = h->data;
        size_t n = r->bounds.read_bytes ? r->bounds.read_bytes : RELAY_READ_BYTES;
        char *b = malloc(n);

        *buf = uv_buf_init(b, b ? (unsigned)n : 0);
}

/* Side which may read again (its direction's queue drained to the low water mark). */
static void resume(struct relay *r, int which) {
        if (!r->paused[which] || r->over || r->eof[which])
                return;
        r->paused[which] = 0;
        uv_read_start(r->s[which], read_alloc, on_read);
}

static void on_written(uv_write_t *req, int status) {
        struct wreq *w = (struct wreq *)req;
        struct relay *r = w->r;
        int from = w->from;

        r->queued[from] -= w->cost;
        r->reqs--;
        free(w->base);
        free(w);
        if (r->over) {
                maybe_free(r);
                return;
        }
        if (status < 0) {
                finish(r, RELAY_WRITE_FAILED, !from, status);
                return;
        }
        /* The writer's side drained: its source may send again. */
        if (r->queued[from] <= r->bounds.high_bytes / 2)
                resume(r, from);
}

/* Writes base (len bytes of the held it holds, taken: freed after) to the side that is
 * not from, counted in from's direction. 0 or -errno (base freed). */
static int queue_write(struct relay *r, int from, char *base, size_t len, size_t held) {
        struct wreq *w = malloc(sizeof(*w));
        uv_buf_t b = uv_buf_init(base, (unsigned)len);
        int rc;

        if (!w) {
                free(base);
                return -ENOMEM;
        }
        w->r = r;
        w->from = from;
        w->base = base;
        w->cost = held + sizeof(*w) + WRITE_EXTRA_BYTES;
        rc = uv_write(&w->req, r->s[!from], &b, 1, on_written);
        if (rc < 0) {
                free(base);
                free(w);
                return rc;
        }
        r->queued[from] += w->cost;
        r->reqs++;
        return 0;
}

static char *copy_of(const void *data, size_t len) {
        char *b = malloc(len ? len : 1);

        if (b)
                memcpy(b, data, len);
        return b;
}

/* Whether side i is gone altogether: its peer closed (a Unix socket's peer's close
 * shuts both ways: POLLHUP), or it failed. A peer that only shut down its writing is
 * not: its reading goes on. */
static int side_gone(struct relay *r, int i) {
        struct pollfd p = {.events = 0};
        uv_os_fd_t fd;

        if (uv_fileno((uv_handle_t *)r->s[i], &fd) < 0)
                return 0;
        p.fd = fd;
        return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static void on_gone_timer(uv_timer_t *t);

/* Ends r when a side whose end was passed on (what it sent is all written) has gone;
 * else looks again in RELAY_GONE_CHECK_MS. 1 when it ended. */
static int check_gone(struct relay *r) {
        for (int i = 0; i < 2; i++)
                if (r->shut_ok[i] && side_gone(r, i)) {
                        finish(r, RELAY_GONE, i, 0);
                        return 1;
                }
        if (!uv_is_active((uv_handle_t *)&r->gone))
                uv_timer_start(&r->gone, on_gone_timer, RELAY_GONE_CHECK_MS, RELAY_GONE_CHECK_MS);
        return 0;
}

static void on_gone_timer(uv_timer_t *t) {
        (void)check_gone(t->data);
}

/* A half-close was passed on once what was queued before it was written; when both
 * sides have ended so, the relay has; when the side that ended has gone altogether, it
 * has too. */
static void on_shutdown(uv_shutdown_t *req, int status) {
        struct relay *r = req->data;
        int from = req == &r->shut[0] ? 0 : 1;

        r->reqs--;
        r->shut_done++;
        if (r->over) {
                maybe_free(r);
                return;
        }
        if (status < 0) {
                finish(r, RELAY_SHUTDOWN_FAILED, !from, status);
                return;
        }
        r->shut_ok[from] = 1;
        if (r->shut_done == 2)
                finish(r, RELAY_ENDED, -1, 0);
        else
                (void)check_gone(r);
}

/* Side from sent its end: it is read no more, and the end goes on to the other side
 * once what was read is written (closing at once would drop what is still queued). */
static void pass_end(struct relay *r, int from) {
        int rc;

        r->eof[from] = 1;
        uv_read_stop(r->s[from]);
        r->shut[from].data = r;
        rc = uv_shutdown(&r->shut[from], r->s[!from], on_shutdown);
        if (rc < 0) {
                finish(r, RELAY_SHUTDOWN_FAILED, !from, rc);
                return;
        }
        r->reqs++;
}

/* Queues what side from read (nread bytes in buf, taken) to the other side, and pauses
 * from above the high water mark. */
static void take(struct relay *r, int from, size_t nread, const uv_buf_t *buf) {
        char *base = buf->base;
        size_t held = buf->len;
        int rc;

        r->last_ms = uv_now(r->idle.loop);
        r->bytes[from] += nread;
        if (r->ops.progress)
                r->ops.progress(r, from, r->bytes, r->ud);
        if (nread < buf->len) {
                /* Cut to its bytes: in place (glibc gives the rest back), no copy. */
                char *b = realloc(buf->base, nread);
                if (b) {
                        base = b;
                        held = nread;
                }
        }
        rc = queue_write(r, from, base, nread, held);
        if (rc < 0) {
                finish(r, rc == -ENOMEM ? RELAY_NO_MEMORY : RELAY_WRITE_FAILED,
                       rc == -ENOMEM ? -1 : !from, rc);
                return;
        }
        /* Bounded by the memory the queued writes hold, not their bytes only. */
        if (r->queued[from] > r->bounds.high_bytes) {
                uv_read_stop(r->s[from]);
                r->paused[from] = 1;
        }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct relay *r = s->data;
        int from = s == r->s[0] ? 0 : 1;

        if (r->over || nread == 0) {
                free(buf->base);
                return;
        }
        if (nread > 0) {
                take(r, from, (size_t)nread, buf);
                return;
        }
        free(buf->base);
        if (nread != UV_EOF) {
                finish(r, RELAY_READ_FAILED, from, (int)nread);
                return;
        }
        pass_end(r, from);
}

static void on_idle(uv_timer_t *t) {
        struct relay *r = t->data;
        uint64_t now = uv_now(t->loop);

        if (now - r->last_ms >= r->bounds.idle_ms) {
                finish(r, RELAY_IDLE, -1, 0);
                return;
        }
        uv_timer_start(t, on_idle, r->bounds.idle_ms - (now - r->last_ms), 0);
}

int relay_start(uv_stream_t *side0, uv_stream_t *side1, const struct relay_bounds *bounds,
                const struct relay_ops *ops, void *ud, struct relay **ret) {
        struct relay *r = calloc(1, sizeof(*r));
        int rc;

        if (!r)
                return -ENOMEM;
        r->s[0] = side0;
        r->s[1] = side1;
        r->ops = *ops;
        r->ud = ud;
        r->bounds = *bounds;
        uv_timer_init(side0->loop, &r->idle);
        uv_timer_init(side0->loop, &r->gone);
        r->idle.data = r->gone.data = r;
        r->timers_open = 2;
        r->last_ms = uv_now(side0->loop);
        for (int i = 0; i < 2; i++) {
                r->data[i] = r->s[i]->data;
                r->s[i]->data = r;
        }
        rc = uv_read_start(side0, read_alloc, on_read);
        if (rc == 0)
                rc = uv_read_start(side1, read_alloc, on_read);
        if (rc < 0) {
                relay_free(r);
                return rc;
        }
        if (bounds->idle_ms)
                uv_timer_start(&r->idle, on_idle, bounds->idle_ms, 0);
        *ret = r;
        return 0;
}

int relay_send(struct relay *r, int to, const void *data, size_t len) {
        char *b;

        if (r->over)
                return -EPIPE;
        b = copy_of(data, len);
        if (!b)
                return -ENOMEM;
        return queue_write(r, !to, b, len, len);
}

size_t relay_queued_bytes(const struct relay *r, int from) {
        return r->queued[from];
}

struct relay *relay_free(struct relay *r) {
        if (!r)
                return NULL;
        r->over = 1;
        r->freed = 1;
        stop(r);
        for (int i = 0; i < 2; i++)
                r->s[i]->data = r->data[i];
        uv_close((uv_handle_t *)&r->idle, on_timer_closed);
        uv_close((uv_handle_t *)&r->gone, on_timer_closed);
        return NULL;
}
