/* it_ports.c: OpenPort end to end against a real sbxd, root and rootless: a client
 * connection turned into a byte pipe to a port of a sandbox's own network namespace.
 *
 * The client here is raw: it writes the OpenPort frame itself (proto/frame.c), reads the
 * one answer exactly (not a byte past it), then uses the socket as a pipe. The server in
 * the sandbox (a `network none` one) is a small Python program started in the
 * background, on 127.0.0.1 and ::1: a first line "GET /x" gets an HTTP answer, "ECHO"
 * echoes what follows until the client's end and then says "END n", "CLOSE" says "bye",
 * ends its own side and keeps what comes after in /tmp/after, and "FLOOD" writes
 * forever.
 *
 * What is proved: the answer comes first, then the stream, with bytes the client sent
 * before the answer; an HTTP exchange; a megabyte echoed; half-close both ways; ::1;
 * nothing listening answers UNAVAILABLE naming the port (and the connection takes
 * requests again); 100 streams at once; a client that does not read stalls only its
 * own stream; another user gets NOT_FOUND word for word as for an id nobody used, and
 * one the sandbox is shared with is served (and recorded as who he is); a NETWORK_FULL
 * sandbox is refused; terminate ends every stream; the bounds per user and per sandbox
 * refuse with RESOURCE_EXHAUSTED naming them; each stream is recorded with its bytes and
 * end (GetHistory HISTORY_FORWARDS); an open stream keeps its sandbox from idling; a
 * sandbox adopted by a new daemon opens ports, and
 * one whose init predates MakeSocket answers UNIMPLEMENTED (with SBX_OLD_INIT). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asbob.h"
#include "itutil.h"
#include "portserver.h"
#include "sbx.h"
#include "sbx_limits.h"
#include "testutil.h"

#define N_PARALLEL 100

/* The next response on fd, read exactly: not a byte of what follows it. */
static Sbx__V1__Response *read_response(int fd) {
        uint8_t hdr[4], *payload;
        Sbx__V1__Response *r;
        uint32_t len;

        ck_assert_int_eq(read_exact(fd, hdr, 4), 0);
        len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        ck_assert_uint_lt(len, 1u << 20);
        payload = malloc(len ? len : 1);
        ck_assert_int_eq(read_exact(fd, payload, len), 0);
        r = sbx__v1__response__unpack(NULL, len, payload);
        free(payload);
        ck_assert_ptr_nonnull(r);
        return r;
}

/* Writes OpenPort (address NULL: unset) on fd, with early (may be NULL) right behind
 * it in the same write, and reads the answer. */
static Sbx__V1__Response *open_port_on(int fd, const char *id, uint32_t port,
                                       const char *address, const char *early) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__OpenPort op = SBX__V1__OPEN_PORT__INIT;
        uint8_t *buf;
        size_t len, e = early ? strlen(early) : 0;

        req.has_request_id = 1;
        req.request_id = 7;
        op.sandbox_id = (char *)(uintptr_t)id;
        op.has_port = 1;
        op.port = port;
        op.address = (char *)(uintptr_t)address;
        req.body_case = SBX__V1__REQUEST__BODY_OPEN_PORT;
        req.open_port = &op;
        ck_assert_int_eq(frame_pack(&req.base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len), 0);
        buf = realloc(buf, len + e);
        memcpy(buf + len, early ? early : "", e);
        it_raw_write(fd, buf, len + e);
        free(buf);
        return read_response(fd);
}

/* A stream to port of id (the test fails unless it opens): the socket. */
static int stream_to(const char *sock, const char *id, uint32_t port, const char *address,
                     const char *early) {
        int fd = bob_raw_connect(sock);
        Sbx__V1__Response *r;

        ck_assert_int_ge(fd, 0);
        r = open_port_on(fd, id, port, address, early);
        ck_assert_msg(r->status && r->status->code == SBX__V1__CODE__OK, "OpenPort %s:%u: %s", id,
                      port, r->status && r->status->message ? r->status->message : "?");
        ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY_PORT_OPENED);
        ck_assert_uint_eq(r->port_opened->port, port);
        ck_assert_str_eq(r->port_opened->address, address ? address : "127.0.0.1");
        ck_assert_uint_gt(r->port_opened->seq, 0);
        sbx__v1__response__free_unpacked(r, NULL);
        return fd;
}

/* OpenPort that must fail with code: its message (free()d by the caller). The socket is
 * closed unless ret_fd takes it. */
static char *refused(const char *sock, const char *id, uint32_t port, Sbx__V1__Code code,
                     int *ret_fd) {
        int fd = bob_raw_connect(sock);
        Sbx__V1__Response *r;
        char *msg;

        ck_assert_int_ge(fd, 0);
        r = open_port_on(fd, id, port, NULL, NULL);
        ck_assert_msg(r->status && r->status->code == code, "OpenPort %s:%u: code %d (%s), not %d",
                      id, port, r->status ? (int)r->status->code : -1,
                      r->status && r->status->message ? r->status->message : "", (int)code);
        ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY__NOT_SET);
        msg = strdup(r->status->message ? r->status->message : "");
        sbx__v1__response__free_unpacked(r, NULL);
        if (ret_fd)
                *ret_fd = fd;
        else
                close(fd);
        return msg;
}

/* Writes len bytes of a pattern to fd while reading what comes back, then ends its side
 * (a half-close): what came back, to the end of the stream. */
static char *pump(int fd, const char *head, size_t len, size_t *ret_len) {
        size_t hl = strlen(head), total = hl + len, sent = 0, cap = total + 4096, got = 0;
        char *in = malloc(cap + 1), *out = malloc(total);

        memcpy(out, head, hl);
        for (size_t i = 0; i < len; i++)
                out[hl + i] = (char)('a' + i % 23);
        while (sent < total) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLOUT};
                ck_assert_int_eq(poll(&pfd, 1, IO_MS), 1);
                if (pfd.revents & POLLIN) {
                        ssize_t k = read(fd, in + got, cap - got);
                        ck_assert_int_gt(k, 0);
                        got += (size_t)k;
                }
                if (pfd.revents & POLLOUT) {
                        ssize_t k = send(fd, out + sent, total - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                        ck_assert(k > 0 || errno == EAGAIN);
                        if (k > 0)
                                sent += (size_t)k;
                }
        }
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        {
                size_t n;
                char *rest = read_to_end(fd, &n);
                ck_assert_uint_le(got + n, cap);
                memcpy(in + got, rest, n);
                got += n;
                free(rest);
        }
        in[got] = '\0';
        free(out);
        *ret_len = got;
        return in;
}

/* The daemon: root (0) or rootless (1, as nobody), with flags. */
static void start(struct it_daemon *d, int rootless, const char *const *flags) {
        if (rootless)
                it_daemon_start_as(d, 65534, 65534, flags);
        else
                it_daemon_start(d, flags);
}

/* A daemon (root, or rootless: as nobody) with flags, a sandbox id on it with the server
 * running, and a client of it. */
static sbx_client *serving(struct it_daemon *d, int rootless, const char *const *flags,
                           const char *id) {
        sbx_client *c;

        start(d, rootless, flags);
        c = it_connect(d);
        free(it_create(c, id));
        start_server(c, id);
        return c;
}

/* The forward records of id, by GetHistory on a connection of the test's own. */
static Sbx__V1__Response *forward_records(struct it_daemon *d, const char *id) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__GetHistory gh = SBX__V1__GET_HISTORY__INIT;
        Sbx__V1__Response *r;
        int fd = it_raw_connect(d);

        req.has_request_id = 1;
        req.request_id = 1;
        gh.sandbox_id = (char *)(uintptr_t)id;
        gh.has_kind = 1;
        gh.kind = SBX__V1__HISTORY_KIND__HISTORY_FORWARDS;
        req.body_case = SBX__V1__REQUEST__BODY_GET_HISTORY;
        req.get_history = &gh;
        it_raw_send(fd, &req);
        r = read_response(fd);
        close(fd);
        ck_assert_int_eq(r->status->code, SBX__V1__CODE__OK);
        ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY_HISTORY);
        return r;
}

/* Waits until id's forward seq is recorded as closed; returns the records. */
static Sbx__V1__Response *closed_record(struct it_daemon *d, const char *id, uint64_t seq,
                                        const Sbx__V1__ForwardRecord **ret) {
        for (int i = 0; i < 200; i++) {
                Sbx__V1__Response *r = forward_records(d, id);
                for (size_t k = 0; k < r->history->n_forwards; k++) {
                        const Sbx__V1__ForwardRecord *f = r->history->forwards[k];
                        if (f->seq == seq && f->has_closed_unix_ms) {
                                *ret = f;
                                return r;
                        }
                }
                sbx__v1__response__free_unpacked(r, NULL);
                usleep(50 * 1000);
        }
        ck_abort_msg("forward %llu of %s never recorded as closed", (unsigned long long)seq, id);
        return NULL;
}

/* The same records through libsbx (sbx_forwards: four streams, the second the megabyte,
 * its bytes out out_bytes) and `sbx history --forwards` (a table, and JSON). */
static void assert_forwards_listed(struct it_daemon *d, sbx_client *c, uint64_t out_bytes) {
        struct sbx_forwards *fw = NULL;
        char *out = NULL, *err = NULL, port[32];

        ck_assert_int_eq(sbx_forwards(c, "web", 0, 0, &fw), SBX_OK);
        ck_assert_uint_eq(fw->n, 4);
        ck_assert_uint_eq(fw->v[1].seq, 2);
        ck_assert_uint_eq(fw->v[1].port, PORT);
        ck_assert_uint_eq(fw->v[1].caller_uid, 0);
        ck_assert_uint_eq(fw->v[1].bytes_out, out_bytes);
        ck_assert_str_eq(fw->v[1].reason, "closed");
        ck_assert_str_eq(fw->v[3].address, "::1");
        ck_assert_int_ge(fw->v[1].closed_unix_ms, fw->v[1].opened_unix_ms);
        sbx_forwards_free(fw);
        ck_assert_int_eq(sbx_forwards(c, "web", 3, 0, &fw), SBX_OK); /* after seq 3 */
        ck_assert_uint_eq(fw->n, 1);
        sbx_forwards_free(fw);
        ck_assert_int_eq(it_sbx(d, NULL, 0, &out, &err,
                                (const char *const[]){"history", "--forwards", "web", NULL}),
                         0);
        ck_assert_msg(strstr(out, "PORT") && strstr(out, "closed"), "%s", out);
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(d, NULL, 0, &out, &err,
                                (const char *const[]){"history", "--forwards", "--json", "web",
                                                      NULL}),
                         0);
        snprintf(port, sizeof(port), "\"port\":%u", PORT);
        ck_assert_msg(strstr(out, port) && strstr(out, "\"bytes_out\":") &&
                              strstr(out, "\"caller_uid\":0"),
                      "%s", out);
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(d, NULL, 0, &out, &err,
                                (const char *const[]){"history", "--forwards", "--connections",
                                                      "web", NULL}),
                         125);
        ck_assert_msg(strstr(err, "ask for one"), "%s", err);
        free(out);
        free(err);
        /* An error, and nothing else: no header, no empty array after the error's JSON. */
        ck_assert_int_eq(it_sbx(d, NULL, 0, &out, &err,
                                (const char *const[]){"history", "--forwards", "nosuch", NULL}),
                         125);
        ck_assert_msg(!strstr(out, "PORT"), "%s", out);
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(d, NULL, 0, &out, &err,
                                (const char *const[]){"history", "--forwards", "--json", "nosuch",
                                                      NULL}),
                         125);
        ck_assert_msg(!strstr(out, "[]") && !strstr(err, "[]"), "%s%s", out, err);
        free(out);
        free(err);
}

/* The answer comes first, then the stream, with the bytes sent before the answer; HTTP;
 * a megabyte echoed; half-close from the client (ECHO's END after it) and from the
 * server (CLOSE: the client still writes after the server's end); ::1; the records. */
START_TEST(streams_both_ways_with_half_close) {
        struct it_daemon d;
        sbx_client *c;
        const Sbx__V1__ForwardRecord *f;
        Sbx__V1__Response *h;
        struct sbx_result *res;
        char *in, want[64];
        size_t n;
        int fd;

        c = serving(&d, _i, NULL, "web");

        expect_http(stream_to(d.sock, "web", PORT, NULL, "GET /x HTTP/1.0\n\n"), "/x");

        fd = stream_to(d.sock, "web", PORT, NULL, "ECHO\nearly|");
        in = pump(fd, "", 1u << 20, &n);
        snprintf(want, sizeof(want), "END %u\n", (1u << 20) + 6);
        ck_assert_uint_eq(n, 6 + (1u << 20) + strlen(want));
        ck_assert(memcmp(in, "early|abc", 9) == 0);
        ck_assert_str_eq(in + n - strlen(want), want);
        free(in);
        close(fd);

        fd = stream_to(d.sock, "web", PORT, NULL, "CLOSE\n");
        in = read_to_end(fd, NULL); /* the server's end, passed on */
        ck_assert_str_eq(in, "bye\n");
        free(in);
        it_raw_write(fd, "after the server's end\n", 23);
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        in = read_to_end(fd, NULL);
        free(in);
        close(fd);
        res = it_sh(c, "web", 30000,
                    "for i in $(seq 100); do test -s /tmp/after && break; sleep 0.1; done; "
                    "cat /tmp/after");
        ck_assert_str_eq((char *)res->stdout_data, "after the server's end\n");
        sbx_result_free(res);

        fd = stream_to(d.sock, "web", PORT, "::1", "ECHO\nsix\n");
        in = pump(fd, "", 10, &n);
        ck_assert_str_eq(in, "six\nabcdefghijEND 14\n");
        free(in);
        close(fd);

        /* Stream 2 (the megabyte): who, where, how many bytes each way, how it ended. */
        h = closed_record(&d, "web", 2, &f);
        ck_assert_uint_eq(f->caller_uid, 0);
        ck_assert_uint_eq(f->port, PORT);
        ck_assert_str_eq(f->address, "127.0.0.1");
        ck_assert_uint_eq(f->bytes_in, 5 + 6 + (1u << 20));
        ck_assert_uint_eq(f->bytes_out, 6 + (1u << 20) + strlen(want));
        ck_assert_str_eq(f->reason, "closed");
        ck_assert_int_ge(f->closed_unix_ms, f->opened_unix_ms);
        sbx__v1__response__free_unpacked(h, NULL);
        h = closed_record(&d, "web", 4, &f);
        ck_assert_str_eq(f->address, "::1");
        sbx__v1__response__free_unpacked(h, NULL);
        assert_forwards_listed(&d, c, (1u << 20) + 6 + strlen(want));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A frame of req, packed: *ret_len bytes (free() them). */
static uint8_t *packed(Sbx__V1__Request *req, size_t *ret_len) {
        uint8_t *buf;

        ck_assert_int_eq(frame_pack(&req->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, ret_len), 0);
        return buf;
}

/* Nothing listens: UNAVAILABLE naming the port and the sandbox, and the connection ends
 * there: a request sent right behind the OpenPort (in its stream's place) never runs. */
START_TEST(nothing_listening_names_the_port) {
        Sbx__V1__Request open = SBX__V1__REQUEST__INIT, list = SBX__V1__REQUEST__INIT;
        Sbx__V1__OpenPort op = SBX__V1__OPEN_PORT__INIT;
        Sbx__V1__ListSandboxes ls = SBX__V1__LIST_SANDBOXES__INIT;
        Sbx__V1__Response *r;
        struct it_daemon d;
        uint8_t *a, *b;
        size_t alen, blen;
        sbx_client *c;
        char *msg, buf[64];
        int fd;

        start(&d, _i, NULL);
        c = it_connect(&d);
        free(it_create(c, "quiet"));
        msg = refused(d.sock, "quiet", 9, SBX__V1__CODE__UNAVAILABLE, NULL);
        ck_assert_msg(strstr(msg, "nothing listens on port 9 in sandbox quiet"), "%s", msg);
        free(msg);
        open.has_request_id = list.has_request_id = 1;
        open.request_id = 7;
        list.request_id = 8;
        op.sandbox_id = (char *)"quiet";
        op.has_port = 1;
        op.port = 9;
        open.body_case = SBX__V1__REQUEST__BODY_OPEN_PORT;
        open.open_port = &op;
        list.body_case = SBX__V1__REQUEST__BODY_LIST_SANDBOXES;
        list.list_sandboxes = &ls;
        a = packed(&open, &alen);
        b = packed(&list, &blen);
        a = realloc(a, alen + blen);
        memcpy(a + alen, b, blen);
        fd = bob_raw_connect(d.sock);
        it_raw_write(fd, a, alen + blen);
        r = read_response(fd);
        ck_assert_int_eq(r->status->code, SBX__V1__CODE__UNAVAILABLE);
        ck_assert_uint_eq(r->request_id, 7);
        sbx__v1__response__free_unpacked(r, NULL);
        ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0); /* closed, the list never answered */
        close(fd);
        free(a);
        free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* 100 streams open at once, each echoing its own bytes; and a client that never reads a
 * server that floods it stalls only its own stream: another stream of the same sandbox
 * goes on meanwhile. */
START_TEST(many_streams_and_a_stalled_one) {
        const char *flags[] = {"--max-forwards-per-uid", "128", NULL};
        static int fds[N_PARALLEL];
        struct it_daemon d;
        sbx_client *c;
        char head[64], *in;
        size_t n;
        int stalled;

        c = serving(&d, _i, flags, "many");
        for (int i = 0; i < N_PARALLEL; i++)
                fds[i] = stream_to(d.sock, "many", PORT, NULL, NULL);
        for (int i = 0; i < N_PARALLEL; i++) {
                snprintf(head, sizeof(head), "ECHO\nstream %d|", i);
                it_raw_write(fds[i], head, strlen(head));
                it_raw_write(fds[i], "0123456789", 10);
                ck_assert_int_eq(shutdown(fds[i], SHUT_WR), 0);
        }
        for (int i = 0; i < N_PARALLEL; i++) {
                char want[64];
                in = read_to_end(fds[i], &n);
                snprintf(head, sizeof(head), "stream %d|0123456789", i);
                ck_assert_msg(strncmp(in, head, strlen(head)) == 0, "stream %d: %s", i, in);
                snprintf(want, sizeof(want), "END %zu\n", strlen(head));
                ck_assert_str_eq(in + strlen(head), want);
                free(in);
                close(fds[i]);
        }

        stalled = stream_to(d.sock, "many", PORT, NULL, "FLOOD\n");
        usleep(2000 * 1000); /* the flood fills every buffer on its way */
        {
                int fd = stream_to(d.sock, "many", PORT, NULL, "ECHO\n");
                in = pump(fd, "", 100000, &n);
                ck_assert_uint_eq(n, 100000 + strlen("END 100000\n"));
                ck_assert_str_eq(in + 100000, "END 100000\n");
                free(in);
                close(fd);
        }
        close(stalled);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* What BOB sees: OpenPort on sandbox arg (and on "nosuch"), as lines "CODE message". */
static void bob_opens(struct it_daemon *d, const char *arg, struct report *r) {
        const char *ids[] = {arg, "nosuch"};

        for (int i = 0; i < 2; i++) {
                int fd = bob_raw_connect(d->sock);
                Sbx__V1__Response *resp;
                if (fd < 0) {
                        say(r, "connect-failed\n");
                        continue;
                }
                resp = open_port_on(fd, ids[i], PORT, NULL, "GET /bob HTTP/1.0\n\n");
                say(r, "%d %s\n", resp->status ? (int)resp->status->code : -1,
                    resp->status && resp->status->message ? resp->status->message : "");
                if (resp->status && resp->status->code == SBX__V1__CODE__OK) {
                        char *in = read_to_end(fd, NULL);
                        say(r, "got %s\n", strstr(in, "hello /bob") ? "hello" : in);
                        free(in);
                }
                sbx__v1__response__free_unpacked(resp, NULL);
                close(fd);
        }
}

/* Another user: NOT_FOUND, word for word as for an id nobody used; a user the sandbox is
 * shared with is served, and recorded as who he is. A NETWORK_FULL sandbox is refused:
 * its port is the host's. */
START_TEST(who_may_open_ports) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        const uint32_t share[] = {BOB};
        char *allowed[] = {(char *)"example.com"};
        const Sbx__V1__ForwardRecord *f;
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        struct it_daemon d;
        Sbx__V1__Response *h;
        sbx_client *c;
        char *rep, *msg, want[512];

        if (geteuid() != 0)
                return;
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        free(it_create(c, "mine"));
        start_server(c, "mine");
        sbx_create_opts_init(&o);
        o.id = "ours";
        o.share_uids = share;
        o.n_share_uids = 1;
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        start_server(c, "ours");

        rep = as_bob(bob_opens, &d, "mine");
        {
                char mine[256], nosuch[256], *p;
                ck_assert_msg(sscanf(rep, "2 %255[^\n]\n2 %255[^\n]", mine, nosuch) == 2, "%s", rep);
                /* The same text but for the id. */
                p = strstr(nosuch, "nosuch");
                ck_assert_ptr_nonnull(p);
                snprintf(want, sizeof(want), "%.*smine%s", (int)(p - nosuch), nosuch, p + 6);
                ck_assert_str_eq(mine, want);
        }
        free(rep);
        rep = as_bob(bob_opens, &d, "ours");
        ck_assert_msg(strncmp(rep, "0 ", 2) == 0 && strstr(rep, "got hello\n"), "%s", rep);
        free(rep);
        h = closed_record(&d, "ours", 1, &f);
        ck_assert_uint_eq(f->caller_uid, BOB);
        sbx__v1__response__free_unpacked(h, NULL);

        sbx_create_opts_init(&o);
        o.id = "full";
        o.policy.network = SBX_NETWORK_FULL;
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        msg = refused(d.sock, "full", PORT, SBX__V1__CODE__FAILED_PRECONDITION, NULL);
        ck_assert_msg(strstr(msg, "host's network"), "%s", msg);
        free(msg);
        /* An allowlist sandbox's port 3128 is the daemon's proxy for it, not a server of
         * the sandbox: a stream there would send the client's requests out as the
         * sandbox's. */
        sbx_create_opts_init(&o);
        o.id = "allow";
        o.policy.network = SBX_NETWORK_ALLOWLIST;
        o.policy.allowed_hosts.v = allowed;
        o.policy.allowed_hosts.n = 1;
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "%s", sbx_error_message(c));
        sbx_sandbox_free(s);
        msg = refused(d.sock, "allow", 3128, SBX__V1__CODE__FAILED_PRECONDITION, NULL);
        ck_assert_msg(strstr(msg, "allowlist proxy"), "%s", msg);
        free(msg);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Terminate ends every stream of the sandbox (each client sees its end), and each record
 * says so. */
START_TEST(terminate_closes_every_stream) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;
        const Sbx__V1__ForwardRecord *f;
        Sbx__V1__Response *h;
        int fds[5];

        c = serving(&d, _i, NULL, "doomed");
        for (int i = 0; i < 5; i++) {
                char buf[8];
                fds[i] = stream_to(d.sock, "doomed", PORT, NULL, "ECHO\nping");
                ck_assert_int_eq(read_exact(fds[i], buf, 4), 0);
                ck_assert(memcmp(buf, "ping", 4) == 0);
        }
        ck_assert_int_eq(sbx_terminate(c, "doomed", &s), SBX_OK);
        sbx_sandbox_free(s);
        for (int i = 0; i < 5; i++) {
                free(read_to_end(fds[i], NULL));
                close(fds[i]);
        }
        h = closed_record(&d, "doomed", 5, &f);
        ck_assert_str_eq(f->reason, "the sandbox ended");
        ck_assert_uint_eq(f->bytes_in, 9);
        sbx__v1__response__free_unpacked(h, NULL);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The bounds: --max-forwards-per-uid (2 here), then a stream closed makes room; and 256
 * streams per sandbox, whoever opened them. */
START_TEST(bounds_refused_naming_them) {
        const char *flags[] = {"--max-forwards-per-uid", "2", NULL};
        const char *wide[] = {"--max-forwards-per-uid", "1024", "--max-connections-per-uid",
                              "1024", NULL};
        static int fds[SBX_SANDBOX_MAX_FORWARDS];
        struct it_daemon d;
        sbx_client *c;
        char *msg;
        int a, b, k;

        c = serving(&d, _i, flags, "tight");
        a = stream_to(d.sock, "tight", PORT, NULL, NULL);
        b = stream_to(d.sock, "tight", PORT, NULL, NULL);
        msg = refused(d.sock, "tight", PORT, SBX__V1__CODE__RESOURCE_EXHAUSTED, NULL);
        ck_assert_msg(strstr(msg, "--max-forwards-per-uid 2"), "%s", msg);
        free(msg);
        close(a);
        for (k = 0; k < 100; k++) { /* its end reaches the daemon */
                int fd = bob_raw_connect(d.sock);
                Sbx__V1__Response *r = open_port_on(fd, "tight", PORT, NULL, NULL);
                int ok = r->status->code == SBX__V1__CODE__OK;
                sbx__v1__response__free_unpacked(r, NULL);
                close(fd);
                if (ok)
                        break;
                usleep(50 * 1000);
        }
        ck_assert_int_lt(k, 100);
        close(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        c = serving(&d, _i, wide, "wide");
        for (k = 0; k < (int)SBX_SANDBOX_MAX_FORWARDS; k++)
                fds[k] = stream_to(d.sock, "wide", PORT, NULL, NULL);
        msg = refused(d.sock, "wide", PORT, SBX__V1__CODE__RESOURCE_EXHAUSTED, NULL);
        ck_assert_msg(strstr(msg, "256 streams open to its ports"), "%s", msg);
        free(msg);
        for (k = 0; k < (int)SBX_SANDBOX_MAX_FORWARDS; k++)
                close(fds[k]);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Streams whose clients closed while the sandbox's server never ends its side (HOLD)
 * are freed: the user's bound has room again within seconds, not at the sandbox's end
 * (a server in someone else's sandbox must not hold a user's streams). */
START_TEST(closed_clients_free_their_streams) {
        const char *flags[] = {"--max-forwards-per-uid", "2", NULL};
        struct it_daemon d;
        sbx_client *c;
        int k, ok = 0;

        c = serving(&d, _i, flags, "held");
        for (k = 0; k < 2; k++)
                close(stream_to(d.sock, "held", PORT, NULL, "HOLD\n"));
        for (k = 0; k < 100 && !ok; k++) { /* RELAY_GONE_CHECK_MS and a turn or two */
                int fd = bob_raw_connect(d.sock);
                Sbx__V1__Response *r = open_port_on(fd, "held", PORT, NULL, NULL);
                ok = r->status->code == SBX__V1__CODE__OK;
                sbx__v1__response__free_unpacked(r, NULL);
                close(fd);
                if (!ok)
                        usleep(100 * 1000);
        }
        ck_assert_msg(ok, "the closed streams still count against the bound");
        ck_assert_int_ge(it_log_count(&d, "the client's side closed (the other's end never came)"),
                         2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A daemon killed with streams open, and a new one adopting the sandbox: its init says
 * again that it makes sockets (its greeting), so ports open as before; the stream the
 * old daemon had is recorded as closed by the restart. */
START_TEST(adopted_sandbox_opens_ports) {
        struct it_daemon d;
        sbx_client *c;
        const Sbx__V1__ForwardRecord *f;
        Sbx__V1__Response *h;
        int fd;

        if (getenv("SBX_VALGRIND")) /* adoption needs pidfds */
                return;
        c = serving(&d, _i, NULL, "kept");
        fd = stream_to(d.sock, "kept", PORT, NULL, "ECHO\nx");
        sbx_close(c);
        it_daemon_kill(&d);
        free(read_to_end(fd, NULL));
        close(fd);
        it_daemon_restart(&d, NULL);
        /* The server was one of the old daemon's commands: init ended it with them. */
        c = it_connect(&d);
        start_server(c, "kept");
        sbx_close(c);
        expect_http(stream_to(d.sock, "kept", PORT, NULL, "GET /adopted HTTP/1.0\n\n"),
                    "/adopted");
        h = closed_record(&d, "kept", 1, &f);
        ck_assert_str_eq(f->reason, "the daemon restarted");
        sbx__v1__response__free_unpacked(h, NULL);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* An init older than MakeSocket (SBX_OLD_INIT: the path of an sbx-init built before
 * it; this case says it is skipped without one): OpenPort on its sandbox is
 * UNIMPLEMENTED, saying why, and so it stays once a new daemon has adopted it; a
 * sandbox the new daemon makes opens ports. */
START_TEST(older_init_cannot_open_ports) {
        const char *old = getenv("SBX_OLD_INIT");
        const char *flags[] = {"--init", old, NULL};
        struct it_daemon d;
        sbx_client *c;
        char *msg;

        if (!old || !old[0]) {
                fprintf(stderr, "older_init_cannot_open_ports: skipped (no SBX_OLD_INIT)\n");
                return;
        }
        c = serving(&d, _i, flags, "old");
        msg = refused(d.sock, "old", PORT, SBX__V1__CODE__UNIMPLEMENTED, NULL);
        ck_assert_msg(strstr(msg, "its init is older than this daemon"), "%s", msg);
        free(msg);
        sbx_close(c);
        it_daemon_kill(&d);
        it_daemon_restart(&d, NULL);
        msg = refused(d.sock, "old", PORT, SBX__V1__CODE__UNIMPLEMENTED, NULL);
        free(msg);
        c = it_connect(&d);
        free(it_create(c, "new"));
        start_server(c, "new");
        expect_http(stream_to(d.sock, "new", PORT, NULL, "GET /new HTTP/1.0\n\n"), "/new");
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The sandbox's state now. */
static enum sbx_state state_of(sbx_client *c, const char *id) {
        struct sbx_sandbox *s = NULL;
        enum sbx_state st;

        ck_assert_int_eq(sbx_get(c, id, &s), SBX_OK);
        st = s->state;
        sbx_sandbox_free(s);
        return st;
}

/* An open stream keeps its sandbox from idling (as a running command does), however
 * quiet: a sandbox of a 1 s idle timeout whose server runs detached (no command holds
 * it) lives on while a stream to it is open and silent for 3 s, and idles away once the
 * stream is closed. */
START_TEST(open_stream_keeps_sandbox_from_idling) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        struct sbx_result *r;
        sbx_client *c;
        char script[sizeof(server_py) + 256], *in;
        size_t n;
        int fd, i;

        start(&d, _i, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.id = "quietly";
        o.idle_timeout_ms = 1000;
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        snprintf(script, sizeof(script),
                 "cat > /tmp/s.py <<'EOF'\n%sEOF\nsetsid /usr/bin/python3 /tmp/s.py </dev/null "
                 ">/dev/null 2>&1 &\nfor i in $(seq 300); do test -e /tmp/ready && exit 0; "
                 "sleep 0.1; done; exit 1",
                 server_py);
        r = it_sh(c, "quietly", 30000, script);
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        fd = stream_to(d.sock, "quietly", PORT, NULL, "ECHO\n");
        usleep(3000 * 1000);
        ck_assert_int_eq(state_of(c, "quietly"), SBX_STATE_READY);
        in = pump(fd, "", 5, &n);
        ck_assert_str_eq(in, "abcdeEND 5\n");
        free(in);
        close(fd);
        for (i = 0; i < 100 && state_of(c, "quietly") == SBX_STATE_READY; i++)
                usleep(100 * 1000);
        ck_assert_int_lt(i, 100);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("ports");
        TCase *tc = tcase_create("ports");

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 240);
        /* Each loop test twice: a root daemon (0), a rootless one (1). */
        tcase_add_loop_test(tc, streams_both_ways_with_half_close, 0, 2);
        tcase_add_loop_test(tc, nothing_listening_names_the_port, 0, 2);
        tcase_add_loop_test(tc, many_streams_and_a_stalled_one, 0, 2);
        tcase_add_test(tc, who_may_open_ports);
        tcase_add_loop_test(tc, terminate_closes_every_stream, 0, 2);
        tcase_add_loop_test(tc, bounds_refused_naming_them, 0, 2);
        tcase_add_loop_test(tc, closed_clients_free_their_streams, 0, 2);
        tcase_add_loop_test(tc, adopted_sandbox_opens_ports, 0, 2);
        tcase_add_loop_test(tc, open_stream_keeps_sandbox_from_idling, 0, 2);
        tcase_add_loop_test(tc, older_init_cannot_open_ports, 0, 2);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
