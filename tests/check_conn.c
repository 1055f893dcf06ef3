/* check_conn.c: unit tests of sbxd's connections (conn.c), in this process, without a
 * daemon process: each test builds the core of tests/inproc.h and connections on
 * socketpairs, and drives the uv loop itself.
 *
 * Framing: a frame split at every byte is handed over once, whole; frames back to back
 * are handed over in order; an oversized length, a frame the handler refuses, and
 * undecodable protobuf (through the server's real handlers and rpc) each get one
 * status and close only their own connection. Backpressure: the cap on requests in
 * flight and a reader that does not read stop request intake, and intake resumes when
 * they end; frames are never handed over inside conn_call_end, so requests never nest.
 * Admission, the peer's credentials, and what the owner and the open calls hear when a
 * connection closes or drains. Most connections here have fake handlers (the owner's
 * part) that record what they saw. */
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <sys/types.h>

#include "inproc.h"
#include "server.h"
#include "testutil.h"

static struct core K;

/* What the fake owner saw, and how it answers. */
static struct {
        int frames;              /* frame handler calls, all connections */
        int depth, max_depth;    /* frame handler calls inside one another */
        char last[256];          /* the last payload, as a string */
        int admits, closing, drained, closed;
        int seq_closing, seq_call_closing, seq; /* order of the closing events */
        int refuse;              /* admit refuses every connection */
        int defer;               /* each frame opens a call and leaves it open */
        int chain;               /* each frame ends the previous frame's call, opens its own */
        size_t reply_bytes;      /* each frame is answered with this much data */
        int send_after_close;    /* what conn_send_status returned in the closing handler */
        int calls_closing, calls_drained;
        unsigned n_calls;
        struct conn_call calls[2048];
        struct conn *conn;       /* the last connection made */
        struct peer *conn_peer;  /* its peer */
        int upgrade;             /* "upgrade": 1 hands the connection over, 2 cancels */
        int begin_r;             /* what conn_hand_over_begin said */
        struct conn_call owner;  /* the new owner's call */
        int handed;              /* conn_handed_cb calls */
        int reply_unread_at_hand; /* bytes of replies the peer had not read by then */
        uv_stream_t *stream;
        uint8_t rest[256];
        size_t rest_len;
} F;

static int fake_admit(void *ud, struct conn *c) {
        F.admits++;
        if (!F.refuse)
                return 0;
        conn_send_status(c, 0, SBX__V1__CODE__PERMISSION_DENIED, "refused by the test");
        return -EPERM;
}

static void call_closing(struct conn_call *k) {
        F.calls_closing++;
        F.seq_call_closing = ++F.seq;
        conn_call_end(k);
}

static void call_drained(struct conn_call *k) {
        F.calls_drained++;
}

static void open_call(struct conn *c) {
        ck_assert_uint_lt(F.n_calls, sizeof(F.calls) / sizeof(F.calls[0]));
        conn_call_begin(c, &F.calls[F.n_calls++], call_closing, call_drained);
}

/* Answers with reply_bytes of data in a ReadFileReply: a big reply. */
/* A big reply to frame rid, its data a pattern of rid: every other one sent with
 * conn_send_taking (the data is written from where it is, in three pieces). */
static void send_big(struct conn *c, uint64_t rid) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status st = SBX__V1__STATUS__INIT;
        Sbx__V1__ReadFileReply rf = SBX__V1__READ_FILE_REPLY__INIT;
        uint8_t *data = malloc(F.reply_bytes);
        size_t i;

        ck_assert_ptr_nonnull(data);
        for (i = 0; i < F.reply_bytes; i++)
                data[i] = (uint8_t)(rid * 31 + i);
        resp.has_request_id = 1;
        resp.request_id = rid;
        st.has_code = 1;
        st.code = SBX__V1__CODE__OK;
        resp.status = &st;
        rf.has_data = 1;
        rf.data.data = data;
        rf.data.len = F.reply_bytes;
        rf.has_eof = rf.eof = 1; /* a field after the data: the frame has a tail */
        resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
        resp.read_file = &rf;
        if (rid % 2) {
                ck_assert_int_eq(conn_send_taking(c, &resp, data, F.reply_bytes), 0);
                return;
        }
        ck_assert_int_eq(conn_send(c, &resp), 0);
        free(data);
}

static void on_handed(void *ud, struct conn *c, uv_stream_t *stream, const uint8_t *rest,
                      size_t rest_len) {
        struct peer *p = ud;
        int n = 0;

        F.handed++;
        F.stream = stream;
        ck_assert_uint_le(rest_len, sizeof(F.rest));
        if (rest_len)
                memcpy(F.rest, rest, rest_len);
        F.rest_len = rest_len;
        /* The reply is in the peer's socket already (or read): written whole. */
        ck_assert_int_eq(ioctl(p->fd, FIONREAD, &n), 0);
        F.reply_unread_at_hand = n;
}

static void owner_closing(struct conn_call *k) {
        F.calls_closing++;
        conn_call_end(k);
}

/* "upgrade": the request that turns the connection into a pipe (as OpenPort does). */
static void upgrade(struct conn *c) {
        F.begin_r = conn_hand_over_begin(c);
        if (F.begin_r < 0) {
                conn_send_status(c, (uint64_t)F.frames, SBX__V1__CODE__UNAVAILABLE, "busy");
                return;
        }
        if (F.upgrade == 2) {
                conn_send_status(c, (uint64_t)F.frames, SBX__V1__CODE__UNAVAILABLE, "failed");
                conn_hand_over_cancel(c);
                return;
        }
        if (F.reply_bytes)
                send_big(c, (uint64_t)F.frames);
        else
                conn_send_status(c, (uint64_t)F.frames, SBX__V1__CODE__OK, "upgraded");
        conn_call_begin(c, &F.owner, owner_closing, NULL);
        conn_hand_over(c, on_handed, F.conn_peer);
}

/* Payloads starting with "bad" are refused; the others are answered by mode: an echo
 * (a status whose request id is the frame's number and whose message is the payload),
 * a big reply, or a call left open. */
static int fake_frame(void *ud, struct conn *c, const uint8_t *payload, size_t len) {
        int r = 0;

        if (++F.depth > F.max_depth)
                F.max_depth = F.depth;
        F.frames++;
        snprintf(F.last, sizeof(F.last), "%.*s", (int)len, (const char *)payload);
        if (len >= 3 && memcmp(payload, "bad", 3) == 0) {
                conn_send_status(c, 0, SBX__V1__CODE__INVALID_ARGUMENT, "refused frame");
                r = -EINVAL;
        } else if (F.upgrade && len == 7 && memcmp(payload, "upgrade", 7) == 0) {
                upgrade(c);
        } else if (F.chain) {
                if (F.n_calls > 0 && F.calls[F.n_calls - 1].conn)
                        conn_call_end(&F.calls[F.n_calls - 1]);
                open_call(c);
        } else if (F.defer) {
                open_call(c);
        } else if (F.reply_bytes) {
                send_big(c, (uint64_t)F.frames);
        } else {
                conn_send_status(c, (uint64_t)F.frames, SBX__V1__CODE__OK, "%s", F.last);
        }
        F.depth--;
        return r;
}

static void fake_closing(void *ud, struct conn *c) {
        F.closing++;
        F.seq_closing = ++F.seq;
        F.send_after_close = conn_send_status(c, 1, SBX__V1__CODE__OK, "too late");
}

static void fake_drained(void *ud, struct conn *c) {
        F.drained++;
}

static void fake_closed(void *ud, struct conn *c) {
        F.closed++;
}

static const struct conn_handlers fake_handlers = {
        .admit = fake_admit,
        .frame = fake_frame,
        .closing = fake_closing,
        .drained = fake_drained,
        .closed = fake_closed,
};

static void begin(void) {
        memset(&F, 0, sizeof(F));
        core_init(&K);
}

/* A served connection with the fake handlers; the client's end in *p. */
static struct conn *fake_conn(struct peer *p) {
        static uint64_t id;
        struct conn *c;
        int fd = peer_pair(p);

        ck_assert_int_eq(conn_new(&K.d, ++id, &fake_handlers, &F, &c), 0);
        ck_assert_int_eq(conn_open(c, fd), 0);
        ck_assert_int_eq(conn_serve(c), 0);
        F.conn = c;
        F.conn_peer = p;
        return c;
}

static int want_closed;

static int all_closed(void *ud) {
        return F.closed >= want_closed;
}

/* Closes the peers, waits until the daemon has closed every connection made (n), and
 * takes the core down, which proves that no handle is left. */
static void end(struct peer *peers, int n_peers, int n) {
        int i;

        for (i = 0; i < n_peers; i++)
                peer_close(&peers[i]);
        want_closed = n;
        ck_assert_msg(core_run_until(&K, all_closed, NULL, 5000), "closed %d of %d", F.closed, n);
        core_free(&K);
}

/* Waits for the echo of frame number rid, whose message is msg. */
static void expect_echo_text(struct peer *p, uint64_t rid, const char *msg) {
        Sbx__V1__Response *r = peer_wait(&K, p);

        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->request_id, rid);
        ck_assert_ptr_nonnull(r->status);
        ck_assert_int_eq(r->status->code, SBX__V1__CODE__OK);
        ck_assert_str_eq(r->status->message, msg);
        sbx__v1__response__free_unpacked(r, NULL);
}

/* ---- framing ---------------------------------------------------------------------- */

START_TEST(frame_split_at_every_byte) {
        static const char payload[] = "a frame split at every byte";
        uint8_t frame[4 + sizeof(payload) - 1];
        uint8_t two[2 * (4 + 3)];
        struct peer p;
        size_t i;

        begin();
        fake_conn(&p);
        frame_header_put(frame, sizeof(payload) - 1);
        memcpy(frame + 4, payload, sizeof(payload) - 1);
        for (i = 0; i < sizeof(frame); i++) {
                ck_assert_int_eq(F.frames, 0);
                peer_write(&K, &p, frame + i, 1);
                core_turns(&K, 2);
        }
        ck_assert_int_eq(F.frames, 1);
        ck_assert_str_eq(F.last, payload);
        expect_echo_text(&p, 1, payload);
        /* Two frames in one write: both, in order. */
        frame_header_put(two, 3);
        memcpy(two + 4, "one", 3);
        frame_header_put(two + 7, 3);
        memcpy(two + 11, "two", 3);
        peer_write(&K, &p, two, sizeof(two));
        expect_echo_text(&p, 2, "one");
        expect_echo_text(&p, 3, "two");
        ck_assert_int_eq(F.frames, 3);
        ck_assert_int_eq(F.max_depth, 1);
        end(&p, 1, 1);
}
END_TEST

START_TEST(oversized_length_closes_only_that_connection) {
        uint32_t lens[2] = {0, UINT32_MAX};
        struct peer p[3];
        int i;

        begin();
        lens[0] = K.cfg.max_frame_bytes + 1;
        for (i = 0; i < 3; i++)
                fake_conn(&p[i]);
        for (i = 0; i < 2; i++) {
                uint8_t hdr[4];
                frame_header_put(hdr, lens[i]);
                peer_write(&K, &p[i], hdr, 4);
                /* Nothing is allocated for the payload: the length alone closes it. */
                peer_expect_status(&K, &p[i], 0, SBX__V1__CODE__TOO_LARGE,
                                   "exceeds the daemon's maximum");
                peer_wait_eof(&K, &p[i]);
        }
        ck_assert_int_eq(F.frames, 0);
        /* The third connection is served as before. */
        peer_send_frame(&K, &p[2], "still here", 10);
        expect_echo_text(&p[2], 1, "still here");
        ck_assert_int_eq(F.closed, 2);
        end(p, 3, 3);
}
END_TEST

START_TEST(refused_frame_closes_only_that_connection) {
        uint8_t both[4 + 3 + 4 + 4];
        struct peer p[2];

        begin();
        fake_conn(&p[0]);
        fake_conn(&p[1]);
        /* A refused frame and one behind it, in one write: the second is never read. */
        frame_header_put(both, 3);
        memcpy(both + 4, "bad", 3);
        frame_header_put(both + 7, 4);
        memcpy(both + 11, "good", 4);
        peer_write(&K, &p[0], both, sizeof(both));
        peer_expect_status(&K, &p[0], 0, SBX__V1__CODE__INVALID_ARGUMENT, "refused frame");
        peer_wait_eof(&K, &p[0]);
        ck_assert_int_eq(F.frames, 1);
        ck_assert_str_eq(F.last, "bad");
        peer_send_frame(&K, &p[1], "good", 4);
        expect_echo_text(&p[1], 2, "good");
        end(p, 2, 2);
}
END_TEST

/* Through the server's handlers: undecodable protobuf is answered by rpc with
 * INVALID_ARGUMENT (request id 0) and closes that connection; the other one goes on. */
START_TEST(undecodable_protobuf_closes_only_that_connection) {
        static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
        struct server s;
        struct peer p[2];
        Sbx__V1__Response *r;
        int i;

        begin();
        memset(&s, 0, sizeof(s));
        s.d = &K.d;
        s.lock_fd = -1;
        K.d.server = &s;
        for (i = 0; i < 2; i++)
                ck_assert_int_eq(server_serve_fd(&s, peer_pair(&p[i])), 0);
        ck_assert_uint_eq(s.n_conns, 2);
        peer_send_frame(&K, &p[0], garbage, sizeof(garbage));
        peer_expect_status(&K, &p[0], 0, SBX__V1__CODE__INVALID_ARGUMENT, NULL);
        peer_wait_eof(&K, &p[0]);
        for (i = 1; i <= 2; i++) {
                peer_send_hello(&K, &p[1], (uint64_t)i);
                r = peer_wait(&K, &p[1]);
                ck_assert_ptr_nonnull(r);
                ck_assert_uint_eq(r->request_id, (uint64_t)i);
                ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY_HELLO);
                ck_assert_uint_eq(r->hello->peer_uid, geteuid());
                sbx__v1__response__free_unpacked(r, NULL);
        }
        ck_assert_uint_eq(s.n_conns, 1);
        peer_close(&p[0]);
        peer_close(&p[1]);
        for (i = 0; i < 200 && s.n_conns > 0; i++) {
                core_turns(&K, 1);
                usleep(1000);
        }
        ck_assert_uint_eq(s.n_conns, 0);
        core_free(&K);
}
END_TEST

/* ---- backpressure ----------------------------------------------------------------- */

static void send_small_frames(struct peer *p, unsigned n) {
        uint8_t *all = malloc(n * 5);
        unsigned i;

        ck_assert_ptr_nonnull(all);
        for (i = 0; i < n; i++) {
                frame_header_put(all + i * 5, 1);
                all[i * 5 + 4] = 'x';
        }
        peer_write(&K, p, all, n * 5);
        free(all);
}

START_TEST(inflight_cap_stops_intake) {
        const int cap = (int)SBX_MAX_INFLIGHT_PER_CONN;
        struct peer p;
        unsigned i;

        begin();
        F.defer = 1;
        fake_conn(&p);
        send_small_frames(&p, (unsigned)cap + 10);
        core_turns(&K, 20);
        ck_assert_int_eq(F.frames, cap);
        /* Ending a call lets one more in, from the loop: never inside conn_call_end. */
        conn_call_end(&F.calls[0]);
        ck_assert_int_eq(F.frames, cap);
        core_turns(&K, 5);
        ck_assert_int_eq(F.frames, cap + 1);
        for (i = 1; i < F.n_calls; i++)
                if (F.calls[i].conn)
                        conn_call_end(&F.calls[i]);
        ck_assert_int_eq(F.frames, cap + 1);
        core_turns(&K, 5);
        ck_assert_int_eq(F.frames, cap + 10);
        ck_assert_int_eq(F.max_depth, 1);
        /* The last 9 calls are open when the client goes: each hears it. */
        end(&p, 1, 1);
        ck_assert_int_eq(F.calls_closing, 9);
}
END_TEST

static int chain_done(void *ud) {
        return F.frames >= *(int *)ud;
}

/* Each request ends the one before it: were frames handed over from conn_call_end, the
 * next request would run inside this one, and a pipelining client would nest them
 * without bound (and overflow the stack). */
START_TEST(requests_never_nest) {
        int n = 2000;
        struct peer p;

        begin();
        F.chain = 1;
        fake_conn(&p);
        send_small_frames(&p, (unsigned)n);
        ck_assert(core_run_until(&K, chain_done, &n, 5000));
        ck_assert_int_eq(F.frames, n);
        ck_assert_int_eq(F.max_depth, 1);
        end(&p, 1, 1);
        ck_assert_int_eq(F.calls_closing, 1);
}
END_TEST

struct reader_state {
        struct peer *p;
        int responses;
        int want;
};

static int read_responses(void *ud) {
        struct reader_state *s = ud;
        Sbx__V1__Response *r;

        while (peer_next(s->p, &r)) {
                size_t i;
                ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY_READ_FILE);
                ck_assert_uint_eq(r->read_file->data.len, F.reply_bytes);
                ck_assert(r->read_file->eof);
                for (i = 0; i < F.reply_bytes; i++)
                        if (r->read_file->data.data[i] != (uint8_t)(r->request_id * 31 + i))
                                break;
                ck_assert_msg(i == F.reply_bytes, "reply %llu differs at byte %zu",
                              (unsigned long long)r->request_id, i);
                sbx__v1__response__free_unpacked(r, NULL);
                s->responses++;
        }
        return s->responses >= s->want;
}

/* A client that sends requests but does not read their (big) replies: once the
 * connection's unsent replies pass SBX_CONN_WRITE_HIGH_WATER_BYTES, the daemon stops
 * reading its requests; when the client reads again, the queue drains and the requests
 * that waited are handled. */
START_TEST(slow_reader_stops_intake) {
        struct reader_state rs;
        struct conn_call watcher;
        struct peer p;
        struct conn *c;
        int sent = 0, at_congestion;

        begin();
        F.reply_bytes = 1024 * 1024;
        c = fake_conn(&p);
        conn_call_begin(c, &watcher, NULL, call_drained);
        while (!conn_congested(c)) {
                ck_assert_int_lt(sent, 64);
                peer_send_frame(&K, &p, "x", 1);
                sent++;
                core_turns(&K, 3);
                ck_assert_int_eq(F.frames, sent);
        }
        at_congestion = F.frames;
        ck_assert_int_ge((long long)at_congestion * (long long)F.reply_bytes,
                         SBX_CONN_WRITE_HIGH_WATER_BYTES);
        /* Requests sent now wait in the socket. */
        send_small_frames(&p, 5);
        sent += 5;
        core_turns(&K, 20);
        ck_assert_int_eq(F.frames, at_congestion);
        ck_assert_int_eq(F.drained, 0);
        /* The client reads: everything is answered. */
        memset(&rs, 0, sizeof(rs));
        rs.p = &p;
        rs.want = sent;
        ck_assert_msg(core_run_until(&K, read_responses, &rs, 10000), "%d of %d responses",
                      rs.responses, sent);
        ck_assert_int_eq(F.frames, sent);
        ck_assert_int_ge(F.drained, 1);
        ck_assert_int_ge(F.calls_drained, 1);
        conn_call_end(&watcher);
        end(&p, 1, 1);
}
END_TEST

/* ---- admission, identity, closing ------------------------------------------------- */

START_TEST(refused_peer_gets_one_status_and_no_request_is_read) {
        struct peer p;
        struct conn *c;
        int fd;

        begin();
        fd = peer_pair(&p);
        F.refuse = 1;
        /* A request already waiting is not read. */
        peer_send_frame(&K, &p, "early", 5);
        ck_assert_int_eq(conn_new(&K.d, 1, &fake_handlers, &F, &c), 0);
        ck_assert_int_eq(conn_open(c, fd), 0);
        ck_assert_int_eq(conn_serve(c), 0);
        ck_assert_int_eq(F.admits, 1);
        ck_assert(!conn_is_served(c));
        peer_expect_status(&K, &p, 0, SBX__V1__CODE__PERMISSION_DENIED, "refused by the test");
        peer_wait_eof(&K, &p);
        ck_assert_int_eq(F.frames, 0);
        end(&p, 1, 1);
}
END_TEST

START_TEST(peer_credentials_and_names) {
        char name[SBX_CLIENT_NAME_MAX_BYTES + 2];
        gid_t groups[256];
        struct conn_peer peer;
        struct peer p;
        struct conn *c;
        int n, i;

        begin();
        c = fake_conn(&p);
        conn_peer(c, &peer);
        ck_assert_uint_eq(peer.uid, geteuid());
        ck_assert_uint_eq(peer.gid, getegid());
        ck_assert_int_eq(peer.pid, getpid());
        n = getgroups(256, groups);
        ck_assert_int_ge(n, 0);
        ck_assert_uint_eq(peer.n_groups, (size_t)n);
        for (i = 0; i < n; i++)
                ck_assert_uint_eq(peer.groups[i], groups[i]);
        ck_assert_ptr_eq(conn_daemon(c), &K.d);
        ck_assert_int_ge(conn_fd(c), 0);
        ck_assert(conn_is_served(c));
        ck_assert(!conn_is_closed(c));
        ck_assert_ptr_null(conn_client_name(c));
        ck_assert_int_eq(conn_set_client_name(c, "agent"), 0);
        ck_assert_str_eq(conn_client_name(c), "agent");
        memset(name, 'n', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        ck_assert_int_eq(conn_set_client_name(c, name), -ENAMETOOLONG);
        ck_assert_str_eq(conn_client_name(c), "agent");
        name[SBX_CLIENT_NAME_MAX_BYTES] = '\0';
        ck_assert_int_eq(conn_set_client_name(c, name), 0);
        ck_assert_str_eq(conn_client_name(c), name);
        end(&p, 1, 1);
}
END_TEST

/* A client that goes away: the owner hears the connection close first, then every open
 * call (which ends itself); sends are dropped from then on; the handle goes last. */
START_TEST(closing_reaches_owner_then_calls) {
        struct peer p;
        struct conn *c;
        int i;

        begin();
        c = fake_conn(&p);
        for (i = 0; i < 3; i++)
                open_call(c);
        ck_assert_ptr_eq(F.calls[0].conn, c);
        end(&p, 1, 1);
        ck_assert_int_eq(F.closing, 1);
        ck_assert_int_eq(F.calls_closing, 3);
        ck_assert_int_lt(F.seq_closing, F.seq_call_closing);
        ck_assert_int_eq(F.send_after_close, -EPIPE);
        for (i = 0; i < 3; i++)
                ck_assert_ptr_null(F.calls[i].conn);
}
END_TEST

/* ---- hand-over -------------------------------------------------------------------- */

static int was_handed(void *ud) {
        return F.handed > 0;
}

/* "upgrade" answered with a 16 MiB reply the peer p does not read: after 50 turns, the
 * hand-over still waits. */
static void upgrade_unread(struct peer *p) {
        begin();
        F.upgrade = 1;
        F.reply_bytes = 16u * 1024 * 1024;
        fake_conn(p);
        peer_send_frame(&K, p, "upgrade", 7);
        core_turns(&K, 50);
        ck_assert_int_eq(F.frames, 1);
        ck_assert_int_eq(F.handed, 0);
}

/* The new owner is done with the connection: it closes it, and the test ends. */
static void owner_done(struct peer *p) {
        conn_call_end(&F.owner);
        conn_close(F.conn);
        end(p, 1, 1);
}

/* Frames taken and the owner's stream and rest, after the peer wrote "upgrade", a frame
 * and raw bytes in one write. */
static const char raw_after[] = "GET / HTTP/1.0\r\n\r\n";

static void send_upgrade_then_more(struct peer *p) {
        uint8_t buf[2 * 4 + 7 + 4 + sizeof(raw_after)];
        size_t n = 0;

        frame_header_put(buf, 7);
        memcpy(buf + 4, "upgrade", 7);
        frame_header_put(buf + 11, 4);
        memcpy(buf + 15, "next", 4);
        n = 19;
        memcpy(buf + n, raw_after, sizeof(raw_after) - 1);
        n += sizeof(raw_after) - 1;
        peer_write(&K, p, buf, n);
}

/* The request's reply goes out first, whole; then the socket is the new owner's, with
 * every byte read past the request's frame (a frame and raw bytes: none of it taken as
 * a request); what the owner writes reaches the peer raw after the reply; the
 * connection stays open until the owner closes it. */
START_TEST(hand_over_after_the_reply_with_the_rest) {
        Sbx__V1__Response *r;
        const uint8_t *after;
        uv_buf_t b = uv_buf_init((char *)"pong", 4);
        struct peer p;
        size_t n;

        begin();
        F.upgrade = 1;
        fake_conn(&p);
        send_upgrade_then_more(&p);
        ck_assert_msg(core_run_until(&K, was_handed, NULL, 5000), "not handed over");
        ck_assert_int_eq(F.begin_r, 0);
        ck_assert_int_eq(F.frames, 1);
        ck_assert_int_gt(F.reply_unread_at_hand, 0);
        ck_assert_uint_eq(F.rest_len, 8 + sizeof(raw_after) - 1);
        ck_assert_mem_eq(F.rest + 4, "next", 4);
        ck_assert_mem_eq(F.rest + 8, raw_after, sizeof(raw_after) - 1);
        ck_assert_int_eq(conn_send_status(F.conn, 9, SBX__V1__CODE__OK, "no more"), -EPIPE);
        ck_assert_int_eq(uv_try_write(F.stream, &b, 1), 4);
        r = peer_wait(&K, &p);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(r->status->message, "upgraded");
        sbx__v1__response__free_unpacked(r, NULL);
        for (n = 0; n < 500 && frame_reader_pending(&p.reader) < 4; n++) {
                (void)peer_read_once(&p);
                usleep(10 * 1000);
        }
        n = frame_reader_take_rest(&p.reader, &after);
        ck_assert_uint_eq(n, 4);
        ck_assert_mem_eq(after, "pong", 4);
        core_turns(&K, 5);
        ck_assert_int_eq(F.closed, 0);
        ck_assert_int_eq(F.frames, 1);
        owner_done(&p);
}
END_TEST

/* A peer that does not read holds the hand-over back: the reply (16 MiB here) must be
 * written whole first; once the peer reads it, the hand-over happens. */
START_TEST(hand_over_waits_for_the_reply_to_be_read) {
        struct reader_state rs;
        struct peer p;

        upgrade_unread(&p);
        memset(&rs, 0, sizeof(rs));
        rs.p = &p;
        rs.want = 1;
        ck_assert(core_run_until(&K, read_responses, &rs, 10000));
        ck_assert_msg(core_run_until(&K, was_handed, NULL, 5000), "not handed over");
        owner_done(&p);
}
END_TEST

/* Another request answered later would land its reply in the pipe: the hand-over is
 * refused (-EBUSY) and frames go on. A hand-over cancelled (the request failed) ends
 * the connection once its refusal is written: what came after the request (a frame
 * here) was the stream's, and never runs as a request. */
START_TEST(hand_over_refused_keeps_frames_cancelled_ends) {
        struct peer p;
        struct conn *c;

        begin();
        F.upgrade = 2;
        c = fake_conn(&p);
        send_upgrade_then_more(&p);
        peer_expect_status(&K, &p, 1, SBX__V1__CODE__UNAVAILABLE, "failed");
        peer_wait_eof(&K, &p);
        ck_assert_int_eq(F.frames, 1);
        end(&p, 1, 1);

        begin();
        F.upgrade = 1;
        c = fake_conn(&p);
        open_call(c);
        peer_send_frame(&K, &p, "upgrade", 7);
        peer_expect_status(&K, &p, 1, SBX__V1__CODE__UNAVAILABLE, "busy");
        ck_assert_int_eq(F.begin_r, -EBUSY);
        peer_send_frame(&K, &p, "after", 5);
        expect_echo_text(&p, 2, "after");
        ck_assert_int_eq(F.handed, 0);
        end(&p, 1, 1);
}
END_TEST

/* The peer goes away before the reply is written: the owner hears it through its call,
 * and the hand-over never happens. */
START_TEST(peer_gone_before_hand_over_reaches_the_owner) {
        struct peer p;

        /* As the daemon (main.c): a write to a closed connection fails, no signal. */
        signal(SIGPIPE, SIG_IGN);
        upgrade_unread(&p);
        end(&p, 1, 1);
        ck_assert_int_eq(F.calls_closing, 1);
        ck_assert_int_eq(F.handed, 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("conn");
        TCase *framing = tcase_create("framing");
        TCase *backpressure = tcase_create("backpressure");
        TCase *life = tcase_create("life");

        tcase_set_timeout(framing, 30);
        tcase_add_test(framing, frame_split_at_every_byte);
        tcase_add_test(framing, oversized_length_closes_only_that_connection);
        tcase_add_test(framing, refused_frame_closes_only_that_connection);
        tcase_add_test(framing, undecodable_protobuf_closes_only_that_connection);
        suite_add_tcase(s, framing);
        tcase_set_timeout(backpressure, 60);
        tcase_add_test(backpressure, inflight_cap_stops_intake);
        tcase_add_test(backpressure, requests_never_nest);
        tcase_add_test(backpressure, slow_reader_stops_intake);
        suite_add_tcase(s, backpressure);
        tcase_set_timeout(life, 30);
        tcase_add_test(life, refused_peer_gets_one_status_and_no_request_is_read);
        tcase_add_test(life, peer_credentials_and_names);
        tcase_add_test(life, closing_reaches_owner_then_calls);
        suite_add_tcase(s, life);
        {
                TCase *hand = tcase_create("hand_over");
                tcase_set_timeout(hand, 60);
                tcase_add_test(hand, hand_over_after_the_reply_with_the_rest);
                tcase_add_test(hand, hand_over_waits_for_the_reply_to_be_read);
                tcase_add_test(hand, hand_over_refused_keeps_frames_cancelled_ends);
                tcase_add_test(hand, peer_gone_before_hand_over_reaches_the_owner);
                suite_add_tcase(s, hand);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
