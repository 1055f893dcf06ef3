/* portfwd.c: streams to ports of a sandbox (OpenPort); see portfwd.h.
 *
 * A stream's life: ASKING (a socket asked of the sandbox's init), CONNECTING (to the
 * sandbox's address:port), HANDING (PortOpened sent, waiting for the connection to be
 * handed over), RELAYING, then ENDING (handles closing) and freed. Before the hand-over
 * a failure answers the request with a status and gives the connection back to the
 * request layer; after it, the stream's end closes the connection. The stream holds a
 * conn_call on its connection throughout (so that a closing connection reaches it),
 * its sbsock_req while it uses the sandbox's socket (so that the sandbox's end reaches
 * it), and one count of QUOTA_FORWARDS for its caller. */
#include "portfwd.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "conn.h"
#include "log.h"
#include "quota.h"
#include "relay.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "store.h"

enum stream_state { ASKING, CONNECTING, HANDING, RELAYING, ENDING };

struct stream {
        struct sbxd *d;
        enum stream_state state;
        struct conn_call cc;     /* on the client's connection, until the end */
        struct conn *conn;       /* cc's connection (cc.conn is NULL once ended) */
        struct sbsock_req sock;  /* registered with the sandbox while sb is set */
        struct sandbox *sb;      /* NULL once the sandbox ended or was let go of */
        uv_tcp_t tcp;            /* the socket into the sandbox, once made */
        int tcp_open;            /* tcp is a live handle */
        uv_connect_t connect;
        struct relay *relay;
        uint64_t rid;
        uid_t uid;
        uint32_t port;
        bool ipv6;
        uint64_t rest_bytes;     /* sent by the client before the hand-over */
        struct store_forward rec; /* its record, once connected (rec.seq != 0) */
        char sandbox_id[SBX_ID_MAX_BYTES + 1];
        char client_name[SBX_CLIENT_NAME_MAX_BYTES + 1];
};

static const char *address_of(const struct stream *s) {
        return s->ipv6 ? "::1" : "127.0.0.1";
}

static void on_tcp_closed(uv_handle_t *h) {
        free(h->data);
}

/* Lets go of everything but the memory, which goes with the socket's handle (or now). */
static void release(struct stream *s) {
        s->state = ENDING;
        s->relay = relay_free(s->relay); /* the streams' data fields are given back */
        sbsock_release(&s->sock);
        s->sb = NULL;
        quota_drop(s->d->quota, QUOTA_FORWARDS, s->uid);
        if (s->cc.conn)
                conn_call_end(&s->cc);
        if (s->tcp_open)
                uv_close((uv_handle_t *)&s->tcp, on_tcp_closed);
        else
                free(s);
}

/* Before the hand-over: answers the request (code, msg) and gives the connection back. */
static void refuse(struct stream *s, Sbx__V1__Code code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void refuse(struct stream *s, Sbx__V1__Code code, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (s->cc.conn) {
                conn_send_status(s->conn, s->rid, code, "%s", msg);
                conn_hand_over_cancel(s->conn);
        }
        release(s);
}

/* The stream ends after its hand-over (or while handing): its record gets its end, and
 * the client's connection closes. */
static void finish(struct stream *s, const char *why) {
        struct conn *c = s->conn;

        if (s->state == ENDING)
                return;
        if (s->rec.seq) {
                s->rec.closed_ms = sbxd_now_unix_ms();
                s->rec.reason = why;
                if (store_forward_finish(s->d->store, &s->rec) < 0)
                        log_warning("sbx=%s: cannot record the end of forward %llu: %s",
                                    s->sandbox_id, (unsigned long long)s->rec.seq,
                                    store_last_error(s->d->store));
        }
        log_info("sbx=%s: forward %llu to port %u (uid %u) ended: %s; %llu bytes in, %llu out",
                 s->sandbox_id, (unsigned long long)s->rec.seq, s->port, (unsigned)s->uid, why,
                 (unsigned long long)s->rec.bytes_in, (unsigned long long)s->rec.bytes_out);
        conn_ref(c);
        release(s);
        conn_close(c);
        conn_unref(c);
}

/* What went wrong with a side, for a record's reason. */
static const char *failure_of(enum relay_end how) {
        switch (how) {
        case RELAY_READ_FAILED:
                return "failed reading";
        case RELAY_WRITE_FAILED:
                return "failed writing";
        case RELAY_SHUTDOWN_FAILED:
                return "could not be told the other's end";
        case RELAY_NO_MEMORY:
                return "ran the daemon out of memory";
        case RELAY_GONE:
                return "closed (the other's end never came)";
        case RELAY_ENDED:
        case RELAY_IDLE:
                break;
        }
        return "ended";
}

static void on_relay_ended(struct relay *r, const struct relay_result *res, void *ud) {
        struct stream *s = ud;
        char why[128];

        (void)r;
        s->rec.bytes_in = res->bytes[0] + s->rest_bytes;
        s->rec.bytes_out = res->bytes[1];
        if (res->how == RELAY_ENDED || res->how == RELAY_IDLE) /* no idle bound is set */
                snprintf(why, sizeof(why), "closed");
        else
                snprintf(why, sizeof(why), "%s %s%s%s",
                         res->side == 0 ? "the client's side" : "the sandbox's side",
                         failure_of(res->how), res->status ? ": " : "",
                         res->status ? uv_strerror(res->status) : "");
        finish(s, why);
}

static void on_relay_progress(struct relay *r, int from, const uint64_t bytes[2], void *ud) {
        struct stream *s = ud;

        (void)r;
        (void)from;
        s->rec.bytes_in = bytes[0] + s->rest_bytes;
        s->rec.bytes_out = bytes[1];
        if (s->sb)
                sandbox_touch(s->sb); /* a stream in use keeps its sandbox from idling */
}

static const struct relay_ops relay_ops = {.ended = on_relay_ended,
                                           .progress = on_relay_progress};
static const struct relay_bounds relay_bounds = {.high_bytes = PORTFWD_QUEUE_HIGH_BYTES,
                                                 .idle_ms = 0,
                                                 .read_bytes = PORTFWD_READ_BYTES};

/* The connection is the stream's now: relay it to the sandbox's socket, the bytes the
 * client sent early first. */
static void on_handed(void *ud, struct conn *c, uv_stream_t *stream, const uint8_t *rest,
                      size_t rest_len) {
        struct stream *s = ud;
        int r;

        (void)c;
        s->state = RELAYING;
        r = relay_start(stream, (uv_stream_t *)&s->tcp, &relay_bounds, &relay_ops, s, &s->relay);
        if (r == 0 && rest_len > 0)
                r = relay_send(s->relay, 1, rest, rest_len);
        s->rest_bytes = rest_len;
        if (r < 0)
                finish(s, "the daemon could not start relaying (out of memory)");
}

/* Connected: recorded, answered (after the record is committed, turn.h), handed over. */
static void connected(struct stream *s) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status st = SBX__V1__STATUS__INIT;
        Sbx__V1__PortOpened po = SBX__V1__PORT_OPENED__INIT;
        struct conn_peer peer;
        int r;

        conn_peer(s->conn, &peer);
        s->rec = (struct store_forward){.sandbox_id = s->sandbox_id, .caller_uid = peer.uid,
                                        .caller_pid = peer.pid, .port = s->port,
                                        .address = address_of(s),
                                        .opened_ms = sbxd_now_unix_ms()};
        s->rec.client_name = s->client_name[0] ? s->client_name : NULL;
        r = store_forward_insert(s->d->store, &s->rec);
        if (r < 0) {
                s->rec.seq = 0;
                refuse(s, SBX__V1__CODE__INTERNAL, "cannot record the forward: %s",
                       store_last_error(s->d->store));
                return;
        }
        resp.has_request_id = 1;
        resp.request_id = s->rid;
        st.has_code = 1;
        st.code = SBX__V1__CODE__OK;
        resp.status = &st;
        po.has_port = 1;
        po.port = s->port;
        po.address = (char *)(uintptr_t)address_of(s);
        po.has_seq = 1;
        po.seq = s->rec.seq;
        resp.body_case = SBX__V1__RESPONSE__BODY_PORT_OPENED;
        resp.port_opened = &po;
        s->state = HANDING;
        if (conn_send(s->conn, &resp) < 0) {
                finish(s, "the client went away");
                return;
        }
        log_info("sbx=%s: forward %llu to port %u opened (uid %u)", s->sandbox_id,
                 (unsigned long long)s->rec.seq, s->port, (unsigned)s->uid);
        conn_hand_over(s->conn, on_handed, s);
}

static void on_connect(uv_connect_t *req, int status) {
        struct stream *s = req->data;

        if (s->state != CONNECTING)
                return; /* ended meanwhile: the handle is closing */
        if (status == UV_ECONNREFUSED)
                refuse(s, SBX__V1__CODE__UNAVAILABLE,
                       "nothing listens on port %u in sandbox %s (at %s); start the server "
                       "there first, listening on %s",
                       s->port, s->sandbox_id, address_of(s), address_of(s));
        else if (status < 0)
                refuse(s, SBX__V1__CODE__UNAVAILABLE, "cannot connect to port %u in sandbox %s: %s",
                       s->port, s->sandbox_id, uv_strerror(status));
        else
                connected(s);
}

/* init answered: connect its socket to the sandbox's address:port. */
static void on_socket(void *ud, int fd, int err) {
        struct stream *s = ud;
        struct sockaddr_storage ss;
        int r;

        if (err < 0) {
                if (err == -ENODEV)
                        s->sb = NULL;
                refuse(s, err == -ENODEV ? SBX__V1__CODE__ENDED : SBX__V1__CODE__UNAVAILABLE,
                       "sandbox %s %s", s->sandbox_id,
                       err == -ENODEV ? "has ended" : "could not make a socket for the port");
                return;
        }
        memset(&ss, 0, sizeof(ss));
        if (s->ipv6)
                r = uv_ip6_addr("::1", (int)s->port, (struct sockaddr_in6 *)&ss);
        else
                r = uv_ip4_addr("127.0.0.1", (int)s->port, (struct sockaddr_in *)&ss);
        if (r == 0)
                r = uv_tcp_init(s->d->loop, &s->tcp);
        if (r < 0) {
                close(fd);
                refuse(s, SBX__V1__CODE__INTERNAL, "cannot set a socket up: %s", uv_strerror(r));
                return;
        }
        s->tcp.data = s;
        s->tcp_open = 1;
        s->state = CONNECTING;
        s->connect.data = s;
        r = uv_tcp_open(&s->tcp, fd);
        if (r < 0)
                close(fd);
        else
                r = uv_tcp_connect(&s->connect, &s->tcp, (const struct sockaddr *)&ss, on_connect);
        if (r < 0)
                refuse(s, SBX__V1__CODE__INTERNAL, "cannot connect a socket: %s", uv_strerror(r));
}

/* The sandbox ends while the stream uses its socket. */
static void on_sandbox_ended(void *ud, const char *why) {
        struct stream *s = ud;

        s->sb = NULL;
        if (s->state == CONNECTING)
                refuse(s, SBX__V1__CODE__ENDED, "sandbox %s has ended", s->sandbox_id);
        else
                finish(s, why);
}

static const struct sbsock_ops sock_ops = {.made = on_socket, .ended = on_sandbox_ended};

/* The client's connection closes (the client went away, the daemon stops). */
static void on_conn_closing(struct conn_call *cc) {
        struct stream *s = (struct stream *)((char *)cc - offsetof(struct stream, cc));

        if (s->state == ASKING || s->state == CONNECTING)
                release(s);
        else
                finish(s, "the client's connection closed");
}

/* RESOURCE_EXHAUSTED past a bound: the sandbox's, then the caller's. 0 when within. */
static int check_bounds(struct conn *c, uint64_t rid, struct sandbox *sb, uid_t uid) {
        unsigned have = 0, max = conn_daemon(c)->cfg->max_forwards_per_uid;

        if (sandbox_sockets_held(sb) >= SBX_SANDBOX_MAX_FORWARDS) {
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "sandbox %s has %u streams open to its ports, the most one "
                                 "sandbox may have; close some",
                                 sandbox_id(sb), SBX_SANDBOX_MAX_FORWARDS);
                return -EAGAIN;
        }
        if (quota_take(conn_daemon(c)->quota, QUOTA_FORWARDS, uid, max, &have) < 0) {
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "uid %u has %u streams open to sandboxes' ports, the daemon's "
                                 "maximum per user (--max-forwards-per-uid %u); close some",
                                 (unsigned)uid, have, max);
                return -EAGAIN;
        }
        return 0;
}

/* What sandbox_make_socket's refusal r means for the client. */
static void refuse_socket(struct stream *s, int r) {
        if (r == -EOPNOTSUPP)
                refuse(s, SBX__V1__CODE__UNIMPLEMENTED,
                       "sandbox %s cannot open ports: its init is older than this daemon (it "
                       "was adopted after an upgrade) and cannot make sockets; recreate it",
                       s->sandbox_id);
        else if (r == -ENODEV)
                refuse(s, SBX__V1__CODE__ENDED, "sandbox %s is ending", s->sandbox_id);
        else if (r == -ESHUTDOWN)
                refuse(s, SBX__V1__CODE__FAILED_PRECONDITION, "sandbox %s is not ready",
                       s->sandbox_id);
        else if (r == -EAGAIN)
                refuse(s, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                       "sandbox %s has %u sockets asked of its init and not yet made; try again",
                       s->sandbox_id, SBX_SANDBOX_MAX_PENDING_SOCKETS);
        else
                refuse(s, SBX__V1__CODE__UNAVAILABLE, "sandbox %s: cannot ask its init: %s",
                       s->sandbox_id, strerror(-r));
}

void portfwd_open(struct conn *c, uint64_t rid, struct sandbox *sb, uint32_t port, bool ipv6) {
        struct conn_peer peer;
        struct stream *s;
        int r = conn_hand_over_begin(c);

        if (r < 0) {
                conn_send_status(c, rid, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "OpenPort must be the only request in flight on its connection "
                                 "(it becomes the stream): open another connection");
                return;
        }
        conn_peer(c, &peer);
        if (check_bounds(c, rid, sb, peer.uid) < 0) {
                conn_hand_over_cancel(c);
                return;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                quota_drop(conn_daemon(c)->quota, QUOTA_FORWARDS, peer.uid);
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED, "daemon out of memory");
                conn_hand_over_cancel(c);
                return;
        }
        s->d = conn_daemon(c);
        s->conn = c;
        s->rid = rid;
        s->uid = peer.uid;
        s->port = port;
        s->ipv6 = ipv6;
        s->state = ASKING;
        snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sandbox_id(sb));
        snprintf(s->client_name, sizeof(s->client_name), "%s",
                 conn_client_name(c) ? conn_client_name(c) : "");
        conn_call_begin(c, &s->cc, on_conn_closing, NULL);
        r = sandbox_make_socket(sb, &s->sock, ipv6, &sock_ops, s);
        if (r < 0) {
                refuse_socket(s, r);
                return;
        }
        s->sb = sb;
}
