/* libsbx_transport.c: the connection of an sbx_client: connecting to a Unix socket or
 * through an ssh:// link (libsbx_ssh.c), Hello, framing, sending one request and
 * matching the replies to it, and the message of the last failure.
 *
 * Owns each sbx_client: its socket (or, for an ssh:// URL, its end of the pipe to an ssh
 * child), its frame reader, the copy of the daemon's Hello reply and the message of the
 * last failure. A call (transport_call) sends one Request as one frame, and reads frames
 * until the Response with its request_id arrives; streamed output of a RunCommand goes
 * to the caller's callback on the way, and streamed stdin is fed meanwhile.
 *
 * Failure policy: a daemon status that is not OK is returned as it is and the
 * connection stays usable. A transport failure (cannot send or receive, the daemon
 * closed the connection, the call timeout passed) is SBX_UNAVAILABLE; a reply that
 * breaks the protocol (undecodable, oversized, for another request) is SBX_INTERNAL.
 * After either the connection is closed, because what is still in flight on it can no
 * longer be matched to a request; the next call connects again and says Hello again.
 * Called by libsbx.c on the caller's thread; never logs, never exits. */
#include "libsbx_int.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sbx_limits.h"

/* How long sbx_connect waits for the Hello reply when no call timeout is set: a
 * daemon that accepts but never answers must not hang a client that has not had the
 * chance to set a timeout yet. */
#define CONNECT_HELLO_TIMEOUT_MS 30000u

/* A reader buffer larger than this is released before a call when the call before it
 * read no frame larger than this: calls in a row that need the room (files read in
 * pieces) keep it, instead of each growing a fresh one and faulting its pages in
 * (which cost two thirds of a 16 MiB ReadFile). */
#define READER_KEEP_BYTES (4u * 1024u * 1024u)
/* The highest status code this library knows (a higher one is reported as INTERNAL). */
#define LAST_CODE SBX_SANDBOX_ENDED
/* The largest frame we accept from a daemon that announces a larger maximum. */
#define MAX_ACCEPTED_FRAME_BYTES (1024u * 1024u * 1024u)
/* ssh:// links: how long ssh may take to exit once the connection ended (its exit
 * status and last stderr line make the error message), and once we closed our end (it
 * ends the remote `sbx dial-stdio` cleanly) before it is terminated. */
#define SSH_EXIT_WAIT_MS   2000
#define SSH_CLOSE_GRACE_MS 1000
/* How long ssh may take to exit after the remote side wrote text instead of a reply. */
#define SSH_GARBAGE_WAIT_MS 300

/* ---- errors ------------------------------------------------------------------------- */

void transport_clear_error(sbx_client *c) {
        free(c->message);
        c->message = NULL;
        c->message_oom = false;
        c->err = 0;
}

/* Records a failure on c and returns code, for `return transport_fail(...)`. */
__attribute__((format(printf, 4, 5))) enum sbx_code
transport_fail(sbx_client *c, enum sbx_code code, int err, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(c->message);
        c->message = m;
        c->message_oom = m == NULL;
        c->err = err;
        return code;
}

enum sbx_code transport_fail_oom(sbx_client *c) {
        return transport_fail(c, SBX_INTERNAL, ENOMEM, "out of memory in libsbx");
}

/* ---- time --------------------------------------------------------------------------- */

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The poll() timeout until deadline (-1: no deadline), 0 once it has passed. */
static int poll_timeout(int64_t deadline) {
        int64_t left;
        if (deadline < 0)
                return -1;
        left = deadline - now_ms();
        if (left <= 0)
                return 0;
        return left > INT_MAX ? INT_MAX : (int)left;
}

/* ---- transport ---------------------------------------------------------------------- */

/* Closes the connection; an ssh child sees its end and exits (else it is ended). */
static void disconnect(sbx_client *c) {
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->hello_id = 0;
        ssh_link_close(&c->ssh, SSH_CLOSE_GRACE_MS);
        frame_reader_free(&c->reader);
        frame_reader_init(&c->reader, c->reader.max_frame_bytes);
}

size_t libsbx_reply_room(const sbx_client *c) {
        return c ? c->reader.cap : 0;
}

/* poll() on p[0..n) (n <= 2) until one is ready or the deadline passes. Over ssh, ssh's
 * stderr is polled too and drained whenever it has something, so that ssh never blocks
 * on a full pipe and its last words are at hand for an error; the watched fd
 * (libsbx_set_watch) too, and its callback called whenever it is ready. Returns the
 * number of p ready, 0 at the deadline, or -errno; EINTR is retried. */
static int poll_conn(sbx_client *c, struct pollfd *p, nfds_t n, int64_t deadline) {
        struct pollfd all[4];

        for (;;) {
                nfds_t m = n, ssh_at = 0, watch_at = 0;
                int r;

                memcpy(all, p, n * sizeof(*p));
                if (c->ssh.err_fd >= 0) {
                        ssh_at = m;
                        all[m++] = (struct pollfd){.fd = c->ssh.err_fd, .events = POLLIN};
                }
                if (c->watch_fd >= 0) {
                        watch_at = m;
                        all[m++] = (struct pollfd){.fd = c->watch_fd, .events = POLLIN};
                }
                r = poll(all, m, poll_timeout(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : 0;
                if (ssh_at && all[ssh_at].revents) {
                        ssh_link_drain(&c->ssh);
                        r--;
                }
                if (watch_at && all[watch_at].revents) {
                        c->on_watch(c->watch_userdata);
                        r--;
                }
                if (r > 0) {
                        for (nfds_t i = 0; i < n; i++)
                                p[i].revents = all[i].revents;
                        return r;
                }
        }
}

/* Waits until c->fd is ready for events or the deadline passes. 0, -ETIMEDOUT or -errno. */
static int wait_fd(sbx_client *c, short events, int64_t deadline) {
        struct pollfd pfd = {.fd = c->fd, .events = events};
        int n = poll_conn(c, &pfd, 1, deadline);

        if (n > 0)
                return 0; /* ready, or an error the next send/recv reports */
        return n == 0 ? -ETIMEDOUT : n;
}

static int send_all(sbx_client *c, const uint8_t *buf, size_t len, int64_t deadline) {
        size_t off = 0;
        while (off < len) {
                ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        int r = wait_fd(c, POLLOUT, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                return n < 0 ? -errno : -EIO;
        }
        return 0;
}

/* Receives what is there into the frame reader, waiting for at least one byte.
 * 0, -ECONNRESET when the daemon closed the connection, -ETIMEDOUT, -ENOMEM or -errno. */
static int recv_some(sbx_client *c, int64_t deadline) {
        /* Replies that keep coming never make the wait below poll: the watched fd is
         * looked at here too, or a reader slower than the daemon never hears it. */
        if (c->watch_fd >= 0) {
                struct pollfd w = {.fd = c->watch_fd, .events = POLLIN};
                if (poll(&w, 1, 0) > 0)
                        c->on_watch(c->watch_userdata);
        }
        for (;;) {
                uint8_t *dst;
                size_t room;
                ssize_t n;
                int r = frame_reader_prepare(&c->reader, &dst, &room);
                if (r < 0)
                        return r;
                if (c->exact_reads) {
                        size_t missing = frame_reader_missing(&c->reader);
                        if (missing == 0)
                                return 0;
                        room = room < missing ? room : missing;
                }
                n = recv(c->fd, dst, room, MSG_DONTWAIT);
                if (n > 0) {
                        frame_reader_commit(&c->reader, (size_t)n);
                        return 0;
                }
                if (n == 0)
                        return -ECONNRESET;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return -errno;
                r = wait_fd(c, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

/* The failure of an ssh:// connection, in ssh's words (why, freed here): ssh could not
 * connect or log in, the remote side has no sbx, the remote sbx found no daemon. */
static enum sbx_code ssh_fail(sbx_client *c, int err, uint64_t waited_ms, char *why) {
        enum sbx_code code;

        if (err == ETIMEDOUT)
                code = transport_fail(
                        c, SBX_UNAVAILABLE, err,
                        "sbxd at %s did not answer within %llu ms (the call timeout); the "
                        "connection was closed; %s",
                        c->socket_path, (unsigned long long)waited_ms, why);
        else
                code = transport_fail(c, SBX_UNAVAILABLE, err, "%s sbxd at %s: %s",
                                      c->connecting ? "cannot reach" : "lost the connection to",
                                      c->socket_path, why);
        free(why);
        return code;
}

/* Text where the Hello reply should be, over ssh: something on the remote side wrote on
 * stdout before (or instead of) `sbx dial-stdio`: a login shell's message, a startup
 * file's echo, a forced command. Quotes the start of it; closes the connection. */
static enum sbx_code ssh_garbage_fail(sbx_client *c) {
        const uint8_t *b = c->reader.buf + c->reader.start;
        size_t n = frame_reader_pending(&c->reader);
        char text[81], *why;
        size_t k = 0;
        enum sbx_code code;

        for (size_t i = 0; i < n && k < sizeof(text) - 1; i++)
                text[k++] = b[i] >= ' ' && b[i] < 0x7F ? (char)b[i] : ' ';
        while (k > 0 && text[k - 1] == ' ')
                k--;
        text[k] = 0;
        why = ssh_link_explain(&c->ssh, SSH_GARBAGE_WAIT_MS);
        disconnect(c);
        code = transport_fail(
                c, SBX_UNAVAILABLE, EPROTO,
                "cannot reach sbxd at %s: the remote side wrote '%s' instead of sbxd's "
                "protocol (the login shell or its startup files write on stdout, or the "
                "account runs another command; the ssh session must run `sbx dial-stdio` "
                "and print nothing else)%s%s",
                c->socket_path, text, why ? "; " : "", why ? why : "");
        free(why);
        return code;
}

/* A failure of the connection itself: closes it and describes err. */
static enum sbx_code connection_lost(sbx_client *c, int err, uint64_t waited_ms) {
        enum sbx_code code = SBX_UNAVAILABLE;
        char *why = NULL;

        if (c->ssh.pid && err != ENOMEM)
                why = ssh_link_explain(&c->ssh, err == ETIMEDOUT ? 0 : SSH_EXIT_WAIT_MS);
        disconnect(c);
        if (why)
                return ssh_fail(c, err, waited_ms, why);
        if (err == ENOMEM)
                return transport_fail_oom(c);
        if (err == ETIMEDOUT)
                return transport_fail(
                        c, code, err,
                        "sbxd at %s did not answer within %llu ms (the call timeout); the "
                        "connection was closed",
                        c->socket_path, (unsigned long long)waited_ms);
        if (err == ECONNRESET || err == EPIPE)
                return transport_fail(
                        c, code, err,
                        "sbxd at %s closed the connection before it answered (did it stop "
                        "or restart? check `sbx doctor`)",
                        c->socket_path);
        return transport_fail(c, code, err, "lost the connection to sbxd at %s: %s", c->socket_path,
                              strerror(err));
}

/* A reply that breaks the protocol: closes the connection and describes it. */
__attribute__((format(printf, 3, 4))) enum sbx_code transport_protocol_fail(sbx_client *c, int err,
                                                                            const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        enum sbx_code code;

        disconnect(c);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        code = transport_fail(c, SBX_INTERNAL, err, "protocol error from sbxd at %s: %s",
                              c->socket_path, m ? m : "(out of memory)");
        free(m);
        return code;
}

/* Responses are unpacked with malloc, one byte more than asked for each block: a
 * bytes field's data can then be NUL-terminated in place (wire_take_bytes), and the message
 * is freed as any (free_unpacked with the default allocator, free()). */
static void *alloc_plus_one(void *ud, size_t size) {
        (void)ud;
        return malloc(size + 1);
}

static void free_block(void *ud, void *p) {
        (void)ud;
        free(p);
}

static ProtobufCAllocator unpack_allocator = {alloc_plus_one, free_block, NULL};

/* How many CommandInput requests may wait for their answers at once. */
#define INPUT_WINDOW      4u
#define INPUT_CHUNK_BYTES (64u * 1024u)

/* Sends one CommandInput for k's command: data (may be empty) and eof. */
static int send_input(sbx_client *c, struct exchange *k, const uint8_t *data, size_t len, bool eof,
                      int64_t deadline) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;
        uint8_t *buf;
        size_t blen;
        int r;

        in.sandbox_id = (char *)(uintptr_t)k->sandbox_id;
        in.command_id = k->command_id;
        in.has_data = 1;
        in.data.data = (uint8_t *)(uintptr_t)data;
        in.data.len = len;
        in.has_eof = 1;
        in.eof = eof;
        req.has_request_id = 1;
        req.request_id = ++c->last_request_id;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        r = frame_pack(&req.base, c->max_send_bytes, &buf, &blen);
        if (r < 0)
                return r;
        r = send_all(c, buf, blen, deadline);
        free(buf);
        if (r == 0)
                k->inputs_in_flight++;
        return r;
}

/* Waits for bytes from the daemon like recv_some, meanwhile feeding k->stdin_fd to the
 * command once it has started (at most INPUT_WINDOW inputs unanswered). */
static int recv_or_feed(sbx_client *c, struct exchange *k, int64_t deadline) {
        for (;;) {
                struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                                      {.fd = k->stdin_fd, .events = POLLIN}};
                nfds_t n = (k->command_id && !k->stdin_done && k->inputs_in_flight < INPUT_WINDOW)
                                   ? 2
                                   : 1;
                int r = poll_conn(c, p, n, deadline);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ETIMEDOUT;
                if (n == 2 && p[1].revents) {
                        uint8_t buf[INPUT_CHUNK_BYTES];
                        ssize_t got = read(k->stdin_fd, buf, sizeof(buf));
                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got <= 0)
                                k->stdin_done = true; /* end of file (or an error: the same) */
                        r = send_input(c, k, buf, got > 0 ? (size_t)got : 0, got <= 0, deadline);
                        if (r < 0)
                                return r;
                }
                if (p[0].revents)
                        return recv_some(c, deadline);
        }
}

/* Before a call: connects when there is no connection (*ret_fresh says it was made
 * now, or that its pipelined Hello is not answered yet), clears the last error, and gives back the
 * room a large reply took (nothing is in flight between calls). */
static enum sbx_code call_begin(sbx_client *c, bool *ret_fresh) {
        /* A connection whose Hello is not answered yet never sat idle. */
        *ret_fresh = c->hello_id != 0;
        if (c->streaming)
                return transport_fail(c, SBX_FAILED_PRECONDITION, EBUSY,
                                      "this client's connection is taken by a watch; close it "
                                      "(sbx_watch_close) or use another client");
        if (c->fd < 0 && !c->connecting) {
                enum sbx_code rc = transport_connect(c);
                if (rc != SBX_OK)
                        return rc;
                *ret_fresh = true;
        }
        transport_clear_error(c);
        if (frame_reader_pending(&c->reader) == 0 && c->reader.cap > READER_KEEP_BYTES &&
            c->reader_used <= READER_KEEP_BYTES) {
                uint32_t max = c->reader.max_frame_bytes;
                frame_reader_free(&c->reader);
                frame_reader_init(&c->reader, max);
        }
        c->reader_used = 0;
        return SBX_OK;
}

/* How long one call may wait: the call timeout plus the exchange's extra, from now. */
struct call_wait {
        uint64_t ms;      /* 0: forever */
        int64_t deadline; /* -1: none */
};

static struct call_wait call_wait_from_now(const sbx_client *c, const struct exchange *k) {
        struct call_wait w = {0, -1};

        w.ms = c->call_timeout_ms ? c->call_timeout_ms + k->extra_ms : 0;
        w.deadline = w.ms ? now_ms() + (int64_t)(w.ms > INT64_MAX / 4 ? INT64_MAX / 4 : w.ms) : -1;
        return w;
}

/* Numbers k's request (*ret_id), packs it and sends it within the wait w it sets. A
 * connection the daemon closed while it sat idle (it restarted, or let us go) is made again once,
 * unless it was made for this call (fresh): the daemon never saw a whole request, so
 * saying it again on a new connection cannot run it twice. */
/* A packed request: one buffer, or (a large ext) head, ext where it is, tail. */
struct packed_request {
        struct frame_split sp;
};

/* Below this a field is copied into the frame as any: one send beats three. */
#define SPLIT_MIN_BYTES (64u * 1024u)

static int pack_request(sbx_client *c, const struct exchange *k, struct packed_request *p) {
        const uint8_t *ext = k->ext && k->ext_len >= SPLIT_MIN_BYTES ? k->ext : NULL;

        memset(p, 0, sizeof(*p));
        if (ext)
                return frame_pack_split(&k->req->base, c->max_send_bytes, ext, k->ext_len, &p->sp);
        return frame_pack(&k->req->base, c->max_send_bytes, &p->sp.head, &p->sp.head_len);
}

/* From this size on a request's data is sent through a kernel send buffer of
 * GROW_SNDBUF_BYTES (the host's net.core.wmem_max caps it) instead of the default
 * 208 KiB, which woke the daemon and us every ~200 KiB of a large WriteFile. */
#define GROW_SNDBUF_AT_BYTES (1u << 20)
#define GROW_SNDBUF_BYTES    (4 << 20)

static int send_packed(sbx_client *c, const struct packed_request *p, int64_t deadline) {
        int r = send_all(c, p->sp.head, p->sp.head_len, deadline);
        if (p->sp.ext_len >= GROW_SNDBUF_AT_BYTES) {
                int want = GROW_SNDBUF_BYTES;
                (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
        }
        if (r == 0 && p->sp.ext)
                r = send_all(c, p->sp.ext, p->sp.ext_len, deadline);
        if (r == 0 && p->sp.tail_len)
                r = send_all(c, p->sp.tail, p->sp.tail_len, deadline);
        return r;
}

static void packed_request_free(struct packed_request *p) {
        free(p->sp.head);
        free(p->sp.tail);
}

static enum sbx_code send_request(sbx_client *c, struct exchange *k, bool fresh,
                                  struct call_wait *w, uint64_t *ret_id) {
        struct packed_request pk;
        int r;

        *ret_id = ++c->last_request_id;
        k->req->has_request_id = 1;
        k->req->request_id = *ret_id;
        r = pack_request(c, k, &pk);
        if (r == -EMSGSIZE && c->hello_id) {
                /* Larger than the default frame: the Hello's reply may allow it. */
                enum sbx_code rc = transport_hello_finish(c);
                if (rc != SBX_OK)
                        return rc;
                r = pack_request(c, k, &pk);
        }
        if (r == -EMSGSIZE)
                return transport_fail(
                        c, SBX_TOO_LARGE, EMSGSIZE,
                        "the request is %zu bytes, more than sbxd accepts in one frame (%u "
                        "bytes); send the data in smaller pieces",
                        protobuf_c_message_get_packed_size(&k->req->base), c->max_send_bytes);
        if (r < 0)
                return transport_fail_oom(c);
        *w = call_wait_from_now(c, k);
        r = send_packed(c, &pk, w->deadline);
        if ((r == -EPIPE || r == -ECONNRESET) && !fresh && !c->connecting) {
                enum sbx_code rc = transport_connect(c);
                if (rc != SBX_OK) {
                        packed_request_free(&pk);
                        return rc;
                }
                transport_clear_error(c);
                r = send_packed(c, &pk, w->deadline);
        }
        packed_request_free(&pk);
        /* A daemon that refuses a connection (a per-user cap, say) answers with one
         * status of request id 0 and closes, which the write may already see: read what
         * it said before calling the connection lost. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return connection_lost(c, -r, w->ms);
        return SBX_OK;
}

/* Unpacks the frame payload (plen bytes) into *ret. */
static enum sbx_code decode_reply(sbx_client *c, const uint8_t *payload, size_t plen,
                                  Sbx__V1__Response **ret) {
        if (plen > c->reader_used)
                c->reader_used = plen;
        *ret = sbx__v1__response__unpack(&unpack_allocator, plen, payload);
        if (!*ret)
                return transport_protocol_fail(c, EBADMSG,
                                               "a reply of %zu bytes that does not decode as "
                                               "sbx.v1.Response",
                                               plen);
        return SBX_OK;
}

/* Reads the next Response into *ret, receiving (and feeding stdin) as needed. *waited
 * says the first wait for the reply has been made. SBX_OK, or the failure (the
 * connection is closed then). */
static enum sbx_code read_reply(sbx_client *c, struct exchange *k, const struct call_wait *w,
                                bool *waited, Sbx__V1__Response **ret) {
        const uint8_t *payload;
        size_t plen;
        int r;

        while ((r = frame_reader_next(&c->reader, &payload, &plen)) == 0) {
                /* Right after the request the reply is not there yet: wait for it first
                 * instead of a recv that finds nothing. */
                r = k->feeding || *waited ? 0 : wait_fd(c, POLLIN, w->deadline);
                *waited = true;
                if (r == 0)
                        r = k->feeding ? recv_or_feed(c, k, w->deadline)
                                       : recv_some(c, w->deadline);
                if (r < 0)
                        return connection_lost(c, -r, w->ms);
        }
        if (r < 0 && c->ssh.pid && c->connecting)
                return ssh_garbage_fail(c);
        if (r < 0)
                return transport_protocol_fail(c, EMSGSIZE, "a frame larger than %u bytes",
                                               c->reader.max_frame_bytes);
        return decode_reply(c, payload, plen, ret);
}

/* take_reply's answer for a reply that does not end the call. */
#define REPLY_MORE (-1)

/* A reply's status code (SBX_OK when it has none) and message (NULL when empty). */
static int reply_code(const Sbx__V1__Response *resp, const char **ret_msg) {
        *ret_msg = resp->status && resp->status->message && *resp->status->message
                           ? resp->status->message
                           : NULL;
        return resp->status && resp->status->has_code ? (int)resp->status->code : SBX_OK;
}

/* The answer to one of our CommandInputs (fed while request id ran): handled and freed,
 * true. A refusal (the command has ended, say) stops the feeding; the result still
 * comes. */
static bool take_input_answer(sbx_client *c, struct exchange *k, uint64_t id,
                              Sbx__V1__Response *resp, int code) {
        if (!k->feeding || !resp->has_request_id || resp->request_id <= id ||
            resp->request_id > c->last_request_id)
                return false;
        if (k->inputs_in_flight > 0)
                k->inputs_in_flight--;
        if (code != SBX_OK)
                k->stdin_done = true;
        sbx__v1__response__free_unpacked(resp, NULL);
        return true;
}

/* A reply for another request than id (freed): a connection-level error (request id
 * 0), after which the daemon closes, or a protocol error. Returns the code. */
static enum sbx_code foreign_reply(sbx_client *c, uint64_t id, Sbx__V1__Response *resp, int code,
                                   const char *msg) {
        uint64_t other = resp->request_id;

        if (other == 0 && code != SBX_OK) {
                enum sbx_code lc = code > LAST_CODE ? SBX_INTERNAL : (enum sbx_code)code;
                transport_fail(c, lc, 0, "%s",
                               msg ? msg : "sbxd closed the connection with an error");
                sbx__v1__response__free_unpacked(resp, NULL);
                disconnect(c);
                return lc;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return transport_protocol_fail(
                c, EPROTO,
                "a reply for request %llu while request %llu was the only one in "
                "flight",
                (unsigned long long)other, (unsigned long long)id);
}

/* The final reply with a status that is not OK: recorded as the failure; the reply goes
 * to *ret when k keeps an error's body and it has the one wanted, else it is freed. */
static enum sbx_code status_reply(sbx_client *c, const struct exchange *k, Sbx__V1__Response *resp,
                                  int code, const char *msg, Sbx__V1__Response **ret) {
        if (code < SBX_OK || code > LAST_CODE) {
                transport_fail(c, SBX_INTERNAL, 0, "sbxd answered with unknown status code %d: %s",
                               code, msg ? msg : "(no message)");
                sbx__v1__response__free_unpacked(resp, NULL);
                return SBX_INTERNAL;
        }
        if (msg)
                transport_fail(c, (enum sbx_code)code, 0, "%s", msg);
        else
                transport_fail(c, (enum sbx_code)code, 0, "sbxd answered %s without a message",
                               sbx_code_name(code));
        if (k->keep_error_body && resp->body_case == k->want)
                *ret = resp;
        else
                sbx__v1__response__free_unpacked(resp, NULL);
        return (enum sbx_code)code;
}

/* The progress of a RunCommand before its result: an output chunk (to on_output),
 * CommandQueued (to on_queued) or CommandStarted (to on_started, and its id for feeding
 * stdin); of a PullImage before its image: an ImageProgress (to on_image_progress).
 * Handled and freed, true; false for any other reply. */
static bool take_progress(struct exchange *k, Sbx__V1__Response *resp) {
        const Sbx__V1__CommandQueued *q;
        const char *cid;

        if (k->want == SBX__V1__RESPONSE__BODY_IMAGE &&
            resp->body_case == SBX__V1__RESPONSE__BODY_IMAGE_PROGRESS) {
                const Sbx__V1__ImageProgress *ip = resp->image_progress;
                if (k->on_image_progress && ip) {
                        struct sbx_image_progress pr = {
                                .phase = ip->phase ? ip->phase : "download",
                                .digest = ip->digest ? ip->digest : "",
                                .index = ip->index,
                                .count = ip->count,
                                .done_bytes = ip->done_bytes,
                                .total_bytes = ip->total_bytes,
                                .reused = ip->reused,
                        };
                        k->on_image_progress(k->userdata, &pr);
                }
                sbx__v1__response__free_unpacked(resp, NULL);
                return true;
        }
        if (k->want == SBX__V1__RESPONSE__BODY_IMAGE &&
            resp->body_case == SBX__V1__RESPONSE__BODY_EXPORT_CHUNK) {
                const Sbx__V1__ExportChunk *ch = resp->export_chunk;
                if (k->on_export_chunk && ch && ch->has_data && !k->export_errno)
                        k->export_errno = k->on_export_chunk(k->userdata, ch->offset,
                                                             ch->data.data, ch->data.len);
                sbx__v1__response__free_unpacked(resp, NULL);
                return true;
        }
        if (k->want != SBX__V1__RESPONSE__BODY_COMMAND_RESULT)
                return false;
        if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED) {
                q = resp->command_queued;
                if (k->on_queued && !k->started_told && q && q->command_id)
                        k->on_queued(k->userdata, q->command_id, q->ahead);
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_OUTPUT) {
                const Sbx__V1__OutputChunk *o = resp->output;
                if (k->on_output && o && o->has_data && o->data.len > 0 &&
                    (o->stream == SBX__V1__STREAM__STDOUT || o->stream == SBX__V1__STREAM__STDERR))
                        k->on_output(k->output_userdata, (enum sbx_stream)o->stream, o->offset,
                                     o->data.data, o->data.len);
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_STARTED) {
                cid = resp->command_started ? resp->command_started->command_id : NULL;
                if (k->feeding && !k->command_id && cid) {
                        k->command_id = strdup(cid);
                        if (!k->command_id)
                                k->stdin_done = true;
                }
                if (k->on_started && !k->started_told && cid) {
                        k->started_told = true;
                        k->on_started(k->userdata, cid);
                }
        } else {
                return false;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return true;
}

/* Takes one reply to request id (owned from here): REPLY_MORE when the call goes on,
 * else its code, with *ret the final reply as transport_call() describes. */
static int take_reply(sbx_client *c, struct exchange *k, uint64_t id, Sbx__V1__Response *resp,
                      Sbx__V1__Response **ret) {
        const char *msg;
        int code = reply_code(resp, &msg), got;

        if (take_input_answer(c, k, id, resp, code))
                return REPLY_MORE;
        if (!resp->has_request_id || resp->request_id != id)
                return foreign_reply(c, id, resp, code, msg);
        if (code != SBX_OK)
                return status_reply(c, k, resp, code, msg, ret);
        if (take_progress(k, resp))
                return REPLY_MORE;
        if (resp->body_case != k->want &&
            !(k->background_answer &&
              (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED ||
               resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_RESULT)) &&
            !(k->body_optional && (resp->body_case == SBX__V1__RESPONSE__BODY__NOT_SET ||
                                   resp->body_case == SBX__V1__RESPONSE__BODY_EMPTY))) {
                got = (int)resp->body_case;
                sbx__v1__response__free_unpacked(resp, NULL);
                return transport_protocol_fail(
                        c, EPROTO, "a reply with body field %d where field %d was expected", got,
                        (int)k->want);
        }
        *ret = resp;
        return SBX_OK;
}

/* Reads the replies to request id, sent within the wait w, until its final one (as
 * transport_call() describes). */
static enum sbx_code await_reply(sbx_client *c, struct exchange *k, uint64_t id,
                                 const struct call_wait *w, Sbx__V1__Response **ret) {
        bool waited = false;
        enum sbx_code rc;
        int r;

        for (;;) {
                Sbx__V1__Response *resp;
                rc = read_reply(c, k, w, &waited, &resp);
                if (rc != SBX_OK)
                        return rc;
                r = take_reply(c, k, id, resp, ret);
                if (r != REPLY_MORE)
                        return (enum sbx_code)r;
        }
}

/* Sends k->req and waits for its final Response. On SBX_OK *ret is the reply (free with
 * sbx__v1__response__free_unpacked). On a non-OK status *ret is set only when
 * k->keep_error_body and the reply has the wanted body; otherwise it is NULL. The reply
 * of a Hello sent before (libsbx_connect_pipelined) is read first: the request went out
 * behind it without waiting for it, and the daemon answers in order. */
enum sbx_code transport_call(sbx_client *c, struct exchange *k, Sbx__V1__Response **ret) {
        struct call_wait w = {0, -1};
        bool fresh;
        enum sbx_code rc;
        uint64_t id;

        *ret = NULL;
        rc = call_begin(c, &fresh);
        if (rc != SBX_OK)
                return rc;
        rc = send_request(c, k, fresh, &w, &id);
        if (rc == SBX_OK && c->hello_id)
                rc = transport_hello_finish(c);
        if (rc != SBX_OK)
                return rc;
        return await_reply(c, k, id, &w, ret);
}

/* ---- streams ------------------------------------------------------------------------ */

/* Sends k->req as transport_call does, without waiting for a reply: *ret_id is its
 * request id, for transport_stream_next. */
enum sbx_code transport_stream_open(sbx_client *c, struct exchange *k, uint64_t *ret_id) {
        struct call_wait w = {0, -1};
        bool fresh;
        enum sbx_code rc = call_begin(c, &fresh);

        if (rc == SBX_OK)
                rc = send_request(c, k, fresh, &w, ret_id);
        if (rc == SBX_OK && c->hello_id)
                rc = transport_hello_finish(c);
        return rc;
}

/* The next reply of the stream id within timeout_ms (-1: as long as it takes): SBX_OK
 * with *ret the reply (k->want's body), or NULL when none came by then (the stream goes
 * on); a non-OK status ends the stream (its code, the failure set); a lost connection
 * is SBX_UNAVAILABLE (closed). */
enum sbx_code transport_stream_next(sbx_client *c, struct exchange *k, uint64_t id,
                                    int64_t timeout_ms, Sbx__V1__Response **ret) {
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        const uint8_t *payload;
        Sbx__V1__Response *resp;
        size_t plen;
        int r;

        *ret = NULL;
        if (c->fd < 0)
                return transport_fail(c, SBX_UNAVAILABLE, ENOTCONN, "the stream has ended");
        transport_clear_error(c);
        while ((r = frame_reader_next(&c->reader, &payload, &plen)) == 0) {
                r = wait_fd(c, POLLIN, deadline);
                if (r == 0)
                        r = recv_some(c, deadline);
                if (r == -ETIMEDOUT)
                        return SBX_OK;
                if (r < 0)
                        return connection_lost(c, -r, 0);
        }
        if (r < 0)
                return transport_protocol_fail(c, EMSGSIZE, "a frame larger than %u bytes",
                                               c->reader.max_frame_bytes);
        r = decode_reply(c, payload, plen, &resp);
        if (r != SBX_OK)
                return (enum sbx_code)r;
        r = take_reply(c, k, id, resp, ret);
        return r == REPLY_MORE ? SBX_OK : (enum sbx_code)r;
}

/* Ends a stream: closes the connection (the daemon then stops it); the next call makes a
 * new one. */
void transport_stream_close(sbx_client *c) {
        disconnect(c);
}

/* ---- connection --------------------------------------------------------------------- */

static enum sbx_code connect_fail(sbx_client *c, int err) {
        const char *hint = "";
        switch (err) {
        case ENOENT:
        case ECONNREFUSED:
                hint = " (is sbxd running? start it with `make run` in its source tree, "
                       "`sbxd`, or `systemctl start sbxd`)";
                break;
        case EACCES:
        case EPERM:
                hint = " (the socket is mode 0660: run as the daemon's user or a member of the "
                       "socket's group, or pass --socket / set SBX_SOCKET)";
                break;
        case EAGAIN:
                hint = " (sbxd is not accepting connections fast enough; try again)";
                break;
        default:
                break;
        }
        return transport_fail(c, SBX_UNAVAILABLE, err, "cannot connect to %s: %s%s", c->socket_path,
                              strerror(err), hint);
}

/* Starts ssh for the ssh:// URL c->socket_path (libsbx_ssh.c); its end of the pipe
 * becomes c->fd. */
static enum sbx_code open_ssh(sbx_client *c, int *ret_fd) {
        char *msg = NULL;
        int r = ssh_link_open(&c->ssh, c->socket_path, c->exact_reads, ret_fd, &msg);
        enum sbx_code code;

        if (r == 0)
                return SBX_OK;
        if (!msg)
                return transport_fail_oom(c);
        code = transport_fail(c, r == -EINVAL ? SBX_INVALID_ARGUMENT : SBX_UNAVAILABLE, -r, "%s",
                              msg);
        free(msg);
        return code;
}

/* Connects a new Unix socket to the path c->socket_path: *ret_fd. */
static enum sbx_code open_unix(sbx_client *c, int *ret_fd) {
        struct sockaddr_un sa;
        size_t plen = strlen(c->socket_path);
        int fd;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (plen == 0 || plen >= sizeof(sa.sun_path))
                return transport_fail(c, SBX_INVALID_ARGUMENT, ENAMETOOLONG,
                                      "socket path '%s' is empty or too long (at most %zu bytes)",
                                      c->socket_path, sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path, c->socket_path, plen);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return transport_fail(c, SBX_UNAVAILABLE, errno, "cannot create a Unix socket: %s",
                                      strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                close(fd);
                return connect_fail(c, err);
        }
        *ret_fd = fd;
        return SBX_OK;
}

/* Connects to c->socket_path, a Unix socket or an ssh:// URL, as c->fd with the default
 * frame limits. On failure nothing is left open and the error is set. */
static enum sbx_code open_socket(sbx_client *c) {
        int fd = -1;
        enum sbx_code rc = ssh_link_is_url(c->socket_path) ? open_ssh(c, &fd) : open_unix(c, &fd);

        if (rc != SBX_OK)
                return rc;
        c->fd = fd;
        c->max_send_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        c->reader.max_frame_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        return SBX_OK;
}

/* Keeps the Hello reply resp (freed here) and takes the daemon's frame limit. */
static enum sbx_code take_hello(sbx_client *c, Sbx__V1__Response *resp) {
        sbx_hello_free(c->hello);
        c->hello = resp->hello ? wire_hello_from_proto(resp->hello) : NULL;
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!c->hello) {
                disconnect(c);
                return transport_fail_oom(c);
        }
        if (c->hello->max_frame_bytes >= SBX_MIN_MAX_FRAME_BYTES) {
                uint64_t m = c->hello->max_frame_bytes;
                c->max_send_bytes = m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
                if (m > c->reader.max_frame_bytes)
                        c->reader.max_frame_bytes = m > MAX_ACCEPTED_FRAME_BYTES
                                                            ? MAX_ACCEPTED_FRAME_BYTES
                                                            : (uint32_t)m;
        }
        return SBX_OK;
}

/* Connects c->fd (a Unix socket, or a pipe to ssh) and sends Hello; its reply is
 * c->hello_id's, due by c->hello_deadline. On failure the connection is closed and the
 * error set. */
static enum sbx_code hello_send(sbx_client *c) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_HELLO};
        struct call_wait w;
        uint64_t saved_timeout, id;
        enum sbx_code rc;

        disconnect(c);
        rc = open_socket(c);
        if (rc != SBX_OK)
                return rc;
        hello.has_protocol_version = 1;
        hello.protocol_version = SBX_PROTOCOL_VERSION;
        hello.client_name = c->client_name;
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &hello;
        saved_timeout = c->call_timeout_ms;
        if (!saved_timeout)
                c->call_timeout_ms = CONNECT_HELLO_TIMEOUT_MS;
        c->connecting = true;
        rc = send_request(c, &k, true, &w, &id);
        c->connecting = false;
        c->call_timeout_ms = saved_timeout;
        if (rc != SBX_OK) {
                disconnect(c);
                return rc;
        }
        c->hello_id = id;
        c->hello_deadline = w.deadline;
        c->hello_wait_ms = w.ms;
        return SBX_OK;
}

/* Reads the reply to the Hello that hello_send sent. On failure the connection is
 * closed and the error set; a daemon without Hello is still a daemon (c->hello stays
 * NULL, and sbx_hello() says so). */
enum sbx_code transport_hello_finish(sbx_client *c) {
        struct exchange k = {.want = SBX__V1__RESPONSE__BODY_HELLO};
        struct call_wait w = {c->hello_wait_ms, c->hello_deadline};
        Sbx__V1__Response *resp = NULL;
        uint64_t id = c->hello_id;
        enum sbx_code rc;

        c->hello_id = 0;
        c->connecting = true;
        rc = await_reply(c, &k, id, &w, &resp);
        c->connecting = false;
        if (rc == SBX_UNIMPLEMENTED && c->fd >= 0) {
                sbx_hello_free(c->hello);
                c->hello = NULL;
                transport_clear_error(c);
                return SBX_OK;
        }
        if (rc != SBX_OK) {
                disconnect(c);
                return rc;
        }
        return take_hello(c, resp);
}

/* Connects and says Hello; unless the client pipelines it, waits for the reply. */
enum sbx_code transport_connect(sbx_client *c) {
        enum sbx_code rc = hello_send(c);

        if (rc == SBX_OK && !c->defer_hello)
                rc = transport_hello_finish(c);
        return rc;
}

/* sbx_connect, and with defer_hello the Hello's reply is read only when needed. */
static enum sbx_code connect_new(const char *socket_path, const char *client_name, bool defer_hello,
                                 sbx_client **ret) {
        sbx_client *c;
        char path[SBX_PATH_MAX_BYTES];

        if (!ret)
                return SBX_INVALID_ARGUMENT;
        *ret = NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return SBX_INTERNAL;
        c->fd = -1;
        c->watch_fd = -1;
        c->defer_hello = defer_hello;
        ssh_link_init(&c->ssh);
        frame_reader_init(&c->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        c->max_send_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        if (!socket_path) {
                if (sbx_default_socket_path(path, sizeof(path)) < 0)
                        path[0] = 0;
                socket_path = path;
        }
        c->socket_path = strdup(socket_path);
        c->client_name = strdup(client_name ? client_name : "libsbx");
        if (!c->socket_path || !c->client_name) {
                sbx_close(c);
                return SBX_INTERNAL;
        }
        *ret = c;
        if (strlen(c->client_name) > SBX_CLIENT_NAME_MAX_BYTES)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "client name is longer than %u bytes",
                                      SBX_CLIENT_NAME_MAX_BYTES);
        return transport_connect(c);
}

enum sbx_code sbx_connect(const char *socket_path, const char *client_name, sbx_client **ret) {
        return connect_new(socket_path, client_name, false, ret);
}

enum sbx_code libsbx_connect_pipelined(const char *socket_path, const char *client_name,
                                       sbx_client **ret) {
        return connect_new(socket_path, client_name, true, ret);
}

/* ---- streams (sbx_open_port) ---------------------------------------------------------- */

enum sbx_code transport_connect_exact(sbx_client *c, sbx_client **ret) {
        sbx_client *s = calloc(1, sizeof(*s));
        enum sbx_code rc;

        *ret = NULL;
        if (!s)
                return transport_fail_oom(c);
        s->fd = -1;
        s->watch_fd = -1;
        s->exact_reads = true;
        s->call_timeout_ms = c->call_timeout_ms;
        ssh_link_init(&s->ssh);
        frame_reader_init(&s->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        s->max_send_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        s->socket_path = strdup(c->socket_path);
        s->client_name = strdup(c->client_name);
        if (!s->socket_path || !s->client_name) {
                sbx_close(s);
                return transport_fail_oom(c);
        }
        rc = transport_connect(s);
        if (rc != SBX_OK) {
                transport_fail(c, rc, s->err, "%s", sbx_error_message(s));
                sbx_close(s);
                return rc;
        }
        *ret = s;
        return SBX_OK;
}

enum sbx_code transport_take_stream(sbx_client *c, sbx_client *s, int *ret_fd) {
        if (frame_reader_pending(&s->reader) > 0 || s->fd < 0)
                return transport_fail(c, SBX_INTERNAL, EPROTO,
                                      "libsbx read past the answer to OpenPort (a bug)");
        if (s->ssh.pid) {
                struct ssh_link *v = realloc(c->streams, (c->n_streams + 1) * sizeof(*v));
                if (!v)
                        return transport_fail_oom(c);
                c->streams = v;
                v[c->n_streams++] = s->ssh;
                ssh_link_init(&s->ssh);
        }
        *ret_fd = s->fd;
        s->fd = -1;
        return SBX_OK;
}

void transport_reap_streams(sbx_client *c) {
        size_t i = 0;

        while (i < c->n_streams) {
                if (ssh_link_reap(&c->streams[i]))
                        c->streams[i] = c->streams[--c->n_streams];
                else
                        i++;
        }
}

/* Ends the ssh children of c's streams: SSH_CLOSE_GRACE_MS for all of them together to
 * end by themselves (a stream its caller closed), then each is terminated. */
static void close_streams(sbx_client *c) {
        int64_t deadline = now_ms() + SSH_CLOSE_GRACE_MS;

        for (size_t i = 0; i < c->n_streams; i++) {
                int64_t left = deadline - now_ms();
                ssh_link_close(&c->streams[i], left > 0 ? (int)left : 0);
        }
        free(c->streams);
        c->streams = NULL;
        c->n_streams = 0;
}

void sbx_close(sbx_client *c) {
        if (!c)
                return;
        close_streams(c);
        if (c->fd >= 0)
                close(c->fd);
        ssh_link_close(&c->ssh, SSH_CLOSE_GRACE_MS);
        frame_reader_free(&c->reader);
        sbx_hello_free(c->hello);
        free(c->socket_path);
        free(c->client_name);
        free(c->message);
        free(c);
}

void libsbx_set_watch(sbx_client *c, int fd, libsbx_watch_cb on_ready, void *userdata) {
        c->watch_fd = on_ready ? fd : -1;
        c->on_watch = on_ready;
        c->watch_userdata = userdata;
}

void sbx_set_call_timeout_ms(sbx_client *c, uint64_t ms) {
        if (c)
                c->call_timeout_ms = ms;
}
