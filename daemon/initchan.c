/* initchan.c: the daemon's end of the channel to a sandbox's init; see initchan.h.
 *
 * Writes go straight to the socket while nothing is queued; when it is full the message
 * is packed into the queue (with duplicates of its descriptors) and the poll handle
 * waits for room as well as for input. Reads take a bounded number of packets per loop
 * turn so that one chatty init cannot starve the others. Whatever init sends is
 * untrusted: a packet that is cut, undecodable or empty fails the channel, and
 * descriptors sent by init are closed unread but for the one a Ready (proxy_listener) or
 * a SocketMade carries, which the owner checks. */
#include "initchan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "initmsg.h"
#include "sbx_limits.h"

/* Most messages queued for init before the channel fails: an init that does not read
 * its channel at all is not doing its job. */
#define INITCHAN_MAX_QUEUED 1024u
/* Messages taken per poll event, or per initchan_take_pending. */
#define INITCHAN_TAKE_BUDGET 64
/* Messages taken by initchan_drain: everything a dead init left, bounded. */
#define INITCHAN_DRAIN_BUDGET 4096

/* A message waiting for room on the channel, with duplicates of its descriptors. */
struct init_out {
        struct init_out *next;
        uint8_t *buf;
        size_t len;
        int fds[SBX_INIT_MAX_FDS];
        size_t nfds;
};

static void on_poll(uv_poll_t *h, int status, int events);

static void fail(struct initchan *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct initchan *ch, const char *fmt, ...) {
        char why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        ch->ops->failed(ch->ud, why);
}

void initchan_init(struct initchan *ch, const struct initchan_ops *ops, void *ud) {
        memset(ch, 0, sizeof(*ch));
        ch->fd = -1;
        ch->ops = ops;
        ch->ud = ud;
}

void initchan_open(struct initchan *ch, int fd) {
        ch->fd = fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---- sending ------------------------------------------------------------------------ */

static void out_free(struct init_out *o) {
        size_t i;
        for (i = 0; i < o->nfds; i++)
                close(o->fds[i]);
        free(o->buf);
        free(o);
}

static void outq_free(struct initchan *ch) {
        while (ch->outq) {
                struct init_out *o = ch->outq;
                ch->outq = o->next;
                out_free(o);
        }
        ch->outq_tail = NULL;
        ch->outq_n = 0;
}

/* Polls for input, and for room while something is queued. */
static void watch(struct initchan *ch) {
        if (ch->poll_active)
                uv_poll_start(&ch->poll, UV_READABLE | UV_DISCONNECT | (ch->outq ? UV_WRITABLE : 0),
                              on_poll);
}

/* Sends what the socket takes now, in order. 0, or -errno on a hard failure. */
static int outq_flush(struct initchan *ch) {
        while (ch->outq) {
                struct init_out *o = ch->outq;
                int r = initmsg_send_packed(ch->fd, o->buf, o->len, o->fds, o->nfds);
                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        return r;
                ch->outq = o->next;
                if (!ch->outq)
                        ch->outq_tail = NULL;
                ch->outq_n--;
                out_free(o);
        }
        watch(ch);
        return 0;
}

/* A packed copy of msg with duplicates of its descriptors, or NULL (out of memory or
 * descriptors). */
static struct init_out *out_new(const Sbx__Init__V1__ToInit *msg, const int *fds, size_t nfds) {
        struct init_out *o = calloc(1, sizeof(*o));
        size_t i;

        if (!o)
                return NULL;
        o->len = sbx__init__v1__to_init__get_packed_size(msg);
        o->buf = o->len <= SBX_INIT_MAX_MSG_BYTES ? malloc(o->len) : NULL;
        for (i = 0; o->buf && i < nfds; i++) {
                o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (o->fds[i] < 0)
                        break;
                o->nfds++;
        }
        if (!o->buf || o->nfds != nfds) {
                out_free(o);
                return NULL;
        }
        sbx__init__v1__to_init__pack(msg, o->buf);
        return o;
}

int initchan_send(struct initchan *ch, const Sbx__Init__V1__ToInit *msg, const int *fds,
                  size_t nfds) {
        struct init_out *o;
        int r;

        if (ch->fd < 0)
                return -EPIPE;
        if (!ch->outq) {
                r = initmsg_send(ch->fd, &msg->base, fds, nfds);
                if (r != -EAGAIN) {
                        if (r < 0 && !ch->stopped)
                                fail(ch, "cannot write to its init: %s", strerror(-r));
                        return r;
                }
        }
        /* The socket is full (init is busy, or throttled by cpu_percent): queue it. */
        r = -ENOMEM;
        if (ch->outq_n >= INITCHAN_MAX_QUEUED || !ch->poll_inited)
                r = -ENOBUFS;
        else if ((o = out_new(msg, fds, nfds))) {
                if (ch->outq_tail)
                        ch->outq_tail->next = o;
                else
                        ch->outq = o;
                ch->outq_tail = o;
                ch->outq_n++;
                watch(ch);
                return 0;
        }
        if (!ch->stopped)
                fail(ch, "cannot queue a message for its init: %s", strerror(-r));
        return r;
}

/* ---- receiving ---------------------------------------------------------------------- */

/* Hands one decoded message to the owner. */
static void dispatch(struct initchan *ch, const Sbx__Init__V1__FromInit *m, int *fd) {
        switch (m->body_case) {
        case SBX__INIT__V1__FROM_INIT__BODY_READY:
                if (!ch->stopped) {
                        int given = *fd;
                        *fd = -1;
                        ch->ops->ready(ch->ud, m->ready, given);
                }
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_STARTED:
                /* Asked for by a background command's Start; an older init sent it for
                 * every Start, which the command module ignores. */
                if (ch->ops->started)
                        ch->ops->started(ch->ud, m->started->command_id);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_START_FAILED:
                ch->ops->start_failed(ch->ud, m->start_failed->command_id,
                                      m->start_failed->error_errno, m->start_failed->error);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_EXITED:
                ch->ops->exited(ch->ud, m->exited);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_BUILT:
                if (!ch->stopped)
                        ch->ops->built(ch->ud);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_SOCKET_MADE:
                if (!ch->stopped) {
                        int given = *fd;
                        *fd = -1;
                        ch->ops->socket_made(ch->ud, m->socket_made, given);
                }
                break;
        case SBX__INIT__V1__FROM_INIT__BODY__NOT_SET:
        case _SBX__INIT__V1__FROM_INIT__BODY__CASE_IS_INT_SIZE:
                fail(ch, "empty message from its init");
                break;
        }
}

/* 1 when m is a message that carries one descriptor. */
static int passes_fd(const Sbx__Init__V1__FromInit *m) {
        if (m->body_case == SBX__INIT__V1__FROM_INIT__BODY_READY)
                return m->ready->has_proxy_listener && m->ready->proxy_listener;
        if (m->body_case == SBX__INIT__V1__FROM_INIT__BODY_SOCKET_MADE)
                return !m->socket_made->has_error_errno || m->socket_made->error_errno == 0;
        return 0;
}

/* Reads and handles one packet from init. Returns 1 after a message, 0 at end of
 * stream, -EAGAIN when there is none now, or -errno (the channel has failed). */
static int take_packet(struct initchan *ch) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        int fds[SBX_INIT_MAX_FDS];
        Sbx__Init__V1__FromInit *m;
        size_t len, nfds, i;
        int passed = -1;
        int r = initmsg_recv(ch->fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds);

        if (r <= 0) {
                if (r != -EAGAIN && r != 0 && !ch->stopped)
                        fail(ch, "bad packet from its init: %s", strerror(-r));
                return r;
        }
        m = sbx__init__v1__from_init__unpack(NULL, len, buf);
        /* Only Ready saying proxy_listener, and SocketMade saying no error, carry a
         * descriptor (one); any other is closed unseen. */
        if (m && nfds == 1 && passes_fd(m))
                passed = fds[--nfds];
        for (i = 0; i < nfds; i++)
                close(fds[i]);
        if (!m) {
                fail(ch, "undecodable message from its init");
                return -EBADMSG;
        }
        dispatch(ch, m, &passed);
        if (passed >= 0)
                close(passed);
        sbx__init__v1__from_init__free_unpacked(m, NULL);
        return 1;
}

/* Takes up to budget messages without waiting; at the end of the stream it stops
 * (on_poll, which polls the channel, handles that). */
static void take_sent(struct initchan *ch, int budget) {
        while (ch->fd >= 0 && budget-- > 0 && take_packet(ch) > 0)
                ;
}

void initchan_take_pending(struct initchan *ch) {
        if (!ch->stopped)
                take_sent(ch, INITCHAN_TAKE_BUDGET);
}

void initchan_drain(struct initchan *ch) {
        take_sent(ch, INITCHAN_DRAIN_BUDGET);
}

static void on_poll(uv_poll_t *h, int status, int events) {
        struct initchan *ch = h->data;
        int budget = INITCHAN_TAKE_BUDGET;

        if ((events & UV_WRITABLE) && ch->outq && !ch->stopped) {
                int r = outq_flush(ch);
                if (r < 0) {
                        fail(ch, "cannot write to its init: %s", strerror(-r));
                        return;
                }
        }
        if (!(events & (UV_READABLE | UV_DISCONNECT)) && status == 0)
                return;

        while (budget-- > 0 && ch->fd >= 0 && !ch->stopped) {
                int r = take_packet(ch);
                if (r == 0) {
                        /* The channel closed: init is exiting (its exit ends the sandbox).
                         * Stop polling. */
                        uv_poll_stop(&ch->poll);
                        ch->poll_active = 0;
                        if (!ch->stopped)
                                fail(ch, "its init closed the channel");
                        return;
                }
                if (r < 0)
                        return;
        }
}

/* ---- watching and closing ----------------------------------------------------------- */

int initchan_watch(struct initchan *ch, uv_loop_t *loop) {
        int r = uv_poll_init(loop, &ch->poll, ch->fd);
        if (r < 0)
                return r;
        ch->poll.data = ch;
        ch->poll_inited = 1;
        ch->poll_active = 1;
        uv_poll_start(&ch->poll, UV_READABLE | UV_DISCONNECT, on_poll);
        return 0;
}

void initchan_stop(struct initchan *ch) {
        ch->stopped = 1;
        if (ch->poll_active) {
                uv_poll_stop(&ch->poll);
                ch->poll_active = 0;
        }
}

static void on_closed(uv_handle_t *h) {
        struct initchan *ch = h->data;
        ch->ops->handle_closed(ch->ud);
}

void initchan_close(struct initchan *ch) {
        outq_free(ch);
        if (ch->poll_inited) {
                uv_poll_stop(&ch->poll);
                ch->poll_active = 0;
                ch->poll_inited = 0;
                uv_close((uv_handle_t *)&ch->poll, on_closed);
        }
        if (ch->fd >= 0)
                close(ch->fd);
        ch->fd = -1;
}
