/* check_client_lib.c: unit tests of libsbx against a scripted peer.
 *
 * Each test binds a Unix socket in a temporary directory and forks a child that plays
 * the daemon from a script: it accepts, decodes the client's Request frames, checks
 * them, and answers with hand-built Response frames (well-formed, split into single
 * bytes, for the wrong request, undecodable, cut off, or never). The child exits 0 when
 * everything it received was as expected; the test asserts that, and what the library
 * returned. This tests the library's framing, matching and decoding, and (test_tool_*)
 * what the sbx tool of this build ($BUILD/sbx) sends and prints for replies no real
 * daemon can be made to give on cue; tests against a real sbxd live in the integration
 * suite. The temporary directory is created and
 * removed by an unchecked fixture, so it goes away even when a test fails; each peer
 * also arms alarm() so that it never outlives a failed test. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "frame.h"
#include "libsbx_cli.h"
#include "sbx.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"

/* Generous bounds: these tests also run under valgrind. */
#define TEST_TIMEOUT_SECS 60
#define PEER_ALARM_SECS   50

/* ---- temporary directory ---------------------------------------------------------------- */

static char tmpdir[64];

static void tmpdir_setup(void) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/sbx-check-client-XXXXXX");
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                abort();
        }
}

static void tmpdir_teardown(void) {
        DIR *d = opendir(tmpdir);
        struct dirent *e;
        char p[sizeof(tmpdir) + sizeof(e->d_name) + 1];

        if (d) {
                while ((e = readdir(d))) {
                        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                                continue;
                        snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
                        unlink(p);
                }
                closedir(d);
        }
        rmdir(tmpdir);
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the scripted peer (runs in the child) ---------------------------------------------- */

struct pconn {
        int fd;
        struct frame_reader r;
};

/* Reports a failed expectation of the peer; the child then exits non-zero. */
#define PEER_EXPECT(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "peer: %s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
                        return 1;                                                                  \
                }                                                                                  \
        } while (0)

static bool pc_accept(int lfd, struct pconn *pc) {
        pc->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        frame_reader_init(&pc->r, SBX_DEFAULT_MAX_FRAME_BYTES);
        return pc->fd >= 0;
}

static void pc_close(struct pconn *pc) {
        if (pc->fd >= 0)
                close(pc->fd);
        pc->fd = -1;
        frame_reader_free(&pc->r);
}

/* The next Request from the client, or NULL at end of stream (or on garbage). */
static Sbx__V1__Request *pc_recv(struct pconn *pc) {
        for (;;) {
                const uint8_t *payload;
                size_t len, room;
                uint8_t *dst;
                ssize_t n;
                int r = frame_reader_next(&pc->r, &payload, &len);

                if (r < 0)
                        return NULL;
                if (r == 1)
                        return sbx__v1__request__unpack(NULL, len, payload);
                if (frame_reader_prepare(&pc->r, &dst, &room) < 0)
                        return NULL;
                n = read(pc->fd, dst, room);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return NULL;
                frame_reader_commit(&pc->r, (size_t)n);
        }
}

static bool pc_send_raw(struct pconn *pc, const void *buf, size_t len, size_t chunk) {
        const uint8_t *p = buf;
        while (len > 0) {
                size_t n = chunk && chunk < len ? chunk : len;
                ssize_t w = send(pc->fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                p += w;
                len -= (size_t)w;
        }
        return true;
}

/* Sends resp as one frame, chunk bytes per write (0: all at once). */
static bool pc_send(struct pconn *pc, const Sbx__V1__Response *resp, size_t chunk) {
        uint8_t *buf;
        size_t len;
        bool ok;

        if (frame_pack(&resp->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len) < 0)
                return false;
        ok = pc_send_raw(pc, buf, len, chunk);
        free(buf);
        return ok;
}

/* Sends a response with only a status (and an optional Empty body when ok). */
static bool pc_status(struct pconn *pc, uint64_t id, Sbx__V1__Code code, const char *msg) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status st = SBX__V1__STATUS__INIT;
        Sbx__V1__Empty empty = SBX__V1__EMPTY__INIT;

        resp.has_request_id = 1;
        resp.request_id = id;
        st.has_code = 1;
        st.code = code;
        st.message = (char *)(uintptr_t)msg;
        resp.status = &st;
        if (code == SBX__V1__CODE__OK) {
                resp.body_case = SBX__V1__RESPONSE__BODY_EMPTY;
                resp.empty = &empty;
        }
        return pc_send(pc, &resp, 0);
}

/* Sends resp (body already set) as the OK answer to request id. */
static bool pc_ok(struct pconn *pc, uint64_t id, Sbx__V1__Response *resp, size_t chunk) {
        static Sbx__V1__Status ok = SBX__V1__STATUS__INIT;
        ok.has_code = 1;
        ok.code = SBX__V1__CODE__OK;
        resp->has_request_id = 1;
        resp->request_id = id;
        resp->status = &ok;
        return pc_send(pc, resp, chunk);
}

/* Receives the client's first request, which must be a valid Hello: its id. */
static int pc_recv_hello(struct pconn *pc, uint64_t *ret_id) {
        Sbx__V1__Request *req = pc_recv(pc);
        bool ok;

        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_HELLO && req->hello->has_protocol_version &&
             req->hello->protocol_version == SBX_PROTOCOL_VERSION && req->has_request_id &&
             req->request_id != 0;
        *ret_id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok); /* a valid Hello first */
        return 0;
}

/* Sends the Hello reply to request id (announcing max_frame, 0: not at all). */
static bool pc_hello_reply(struct pconn *pc, uint64_t id, uint64_t max_frame) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__HelloReply hr = SBX__V1__HELLO_REPLY__INIT;
        Sbx__V1__Features f = SBX__V1__FEATURES__INIT;
        static char *impl[] = {(char *)"hello", (char *)"run_command"};

        hr.has_protocol_version = 1;
        hr.protocol_version = 1;
        hr.daemon_version = (char *)"9.9.9";
        hr.has_peer_uid = 1;
        hr.peer_uid = 1234;
        f.cgroup_version = (char *)"v2";
        f.has_user_namespaces = f.user_namespaces = 1;
        f.has_rootless = 1;
        f.rootless = 0;
        f.has_seccomp = f.seccomp = 1;
        f.has_landlock_abi = 1;
        f.landlock_abi = 3;
        f.has_openat2 = f.openat2 = 1;
        if (max_frame) {
                f.has_max_frame_bytes = 1;
                f.max_frame_bytes = max_frame;
        }
        f.n_implemented = 2;
        f.implemented = impl;
        hr.features = &f;
        resp.body_case = SBX__V1__RESPONSE__BODY_HELLO;
        resp.hello = &hr;
        return pc_ok(pc, id, &resp, 0);
}

/* Accepts a connection and answers its Hello (announcing max_frame, 0: not at all).
 * Returns 0 or a failure exit code. */
static int pc_hello(int lfd, struct pconn *pc, uint64_t max_frame) {
        uint64_t id;

        PEER_EXPECT(pc_accept(lfd, pc));
        PEER_EXPECT(pc_recv_hello(pc, &id) == 0);
        PEER_EXPECT(pc_hello_reply(pc, id, max_frame));
        return 0;
}

/* Waits until the client closes the connection. */
static void pc_wait_eof(struct pconn *pc) {
        Sbx__V1__Request *req;
        while ((req = pc_recv(pc)))
                sbx__v1__request__free_unpacked(req, NULL);
}

typedef int (*peer_script)(int lfd);

struct peer {
        pid_t pid;
        char path[108];
};

/* Binds a fresh socket, forks the peer running script, and returns in the parent. */
static void peer_start(struct peer *p, peer_script script) {
        static unsigned seq;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int lfd;

        snprintf(p->path, sizeof(p->path), "%s/p%d-%u.sock", tmpdir, (int)getpid(), seq++);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p->path);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(lfd, 8), 0);
        p->pid = fork();
        ck_assert_int_ge(p->pid, 0);
        if (p->pid == 0) {
                int rc;
                alarm(PEER_ALARM_SECS);
                rc = script(lfd);
                close(lfd);
                _exit(rc);
        }
        close(lfd);
}

/* Waits for the peer; its exit status (0: it saw what it expected). */
static int peer_wait(struct peer *p) {
        int status;
        while (waitpid(p->pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        unlink(p->path);
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

/* Connects to the peer as "check-client", asserting success. */
static sbx_client *connect_ok(const struct peer *p) {
        sbx_client *c = NULL;
        enum sbx_code rc = sbx_connect(p->path, "check-client", &c);
        ck_assert_msg(rc == SBX_OK, "connect: %s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_ptr_nonnull(c);
        ck_assert_str_eq(sbx_error_message(c), "");
        return c;
}

/* ---- Hello ------------------------------------------------------------------------------ */

static int script_hello(int lfd) {
        struct pconn pc;
        int rc = pc_hello(lfd, &pc, 1024 * 1024);
        if (rc)
                return rc;
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_hello_roundtrip) {
        struct peer p;
        sbx_client *c;
        struct sbx_hello *h = NULL;

        peer_start(&p, script_hello);
        c = connect_ok(&p);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_uint_eq(h->protocol_version, 1);
        ck_assert_str_eq(h->daemon_version, "9.9.9");
        ck_assert_str_eq(h->cgroup_version, "v2");
        ck_assert_int_eq(h->user_namespaces, 1);
        ck_assert_int_eq(h->rootless, 0);
        ck_assert_int_eq(h->seccomp, 1);
        ck_assert_uint_eq(h->landlock_abi, 3);
        ck_assert_int_eq(h->openat2, 1);
        ck_assert_uint_eq(h->max_frame_bytes, 1024 * 1024);
        ck_assert_uint_eq(h->peer_uid, 1234);
        ck_assert_uint_eq(h->n_implemented, 2);
        ck_assert_str_eq(h->implemented[1], "run_command");
        sbx_hello_free(h);
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- a reply split into single bytes, and the SandboxInfo conversion --------------------- */

static int script_split(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        Sbx__V1__Label l1 = SBX__V1__LABEL__INIT, *labels[] = {&l1};
        Sbx__V1__LimitEnforcement e1 = SBX__V1__LIMIT_ENFORCEMENT__INIT, *enf[] = {&e1};
        static char *writable[] = {(char *)"/srv/a", (char *)"/srv/b"};
        static char *warnings[] = {(char *)"cpu_percent not enforced"};
        uint32_t share[] = {1001, 1002};
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_GET_SANDBOX &&
             strcmp(req->get_sandbox->sandbox_id, "box-1") == 0;
        l1.key = (char *)"team";
        l1.value = (char *)"blue";
        lim.has_memory_bytes = 1;
        lim.memory_bytes = 512u << 20;
        lim.has_cpu_seconds = 1;
        lim.cpu_seconds = 1.5;
        pol.n_writable_paths = 2;
        pol.writable_paths = writable;
        pol.has_network = 1;
        pol.network = SBX__V1__NETWORK_MODE__NETWORK_FULL;
        pol.limits = &lim;
        pol.root_dir = (char *)"/srv/root";
        e1.limit = (char *)"memory";
        e1.has_enforcement = 1;
        e1.enforcement = SBX__V1__ENFORCEMENT__CGROUP_V1;
        info.id = (char *)"box-1";
        info.has_state = 1;
        info.state = SBX__V1__SANDBOX_STATE__READY;
        info.has_owner_uid = 1;
        info.owner_uid = 1000;
        info.n_labels = 1;
        info.labels = labels;
        info.has_created_unix_ms = 1;
        info.created_unix_ms = 1700000000123;
        info.has_deadline_unix_ms = 1;
        info.deadline_unix_ms = 1700000300123;
        info.policy = &pol;
        info.has_isolated = info.isolated = 1;
        info.n_warnings = 1;
        info.warnings = warnings;
        info.n_enforcement = 1;
        info.enforcement = enf;
        info.n_share_uids = 2;
        info.share_uids = share;
        resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
        resp.sandbox = &info;
        ok = ok && pc_ok(&pc, req->request_id, &resp, 1);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_split_reply) {
        struct peer p;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;
        enum sbx_code rc;

        peer_start(&p, script_split);
        c = connect_ok(&p);
        rc = sbx_get(c, "box-1", &s);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_str_eq(s->id, "box-1");
        ck_assert_int_eq(s->state, SBX_STATE_READY);
        ck_assert_uint_eq(s->owner_uid, 1000);
        ck_assert_uint_eq(s->n_labels, 1);
        ck_assert_str_eq(s->labels[0].key, "team");
        ck_assert_str_eq(s->labels[0].value, "blue");
        ck_assert_int_eq(s->created_unix_ms, 1700000000123);
        ck_assert_int_eq(s->deadline_unix_ms, 1700000300123);
        ck_assert_ptr_null(s->end_reason);
        ck_assert_int_eq(s->isolated, 1);
        ck_assert_uint_eq(s->policy.writable_paths.n, 2);
        ck_assert_str_eq(s->policy.writable_paths.v[1], "/srv/b");
        ck_assert_int_eq(s->policy.network, SBX_NETWORK_FULL);
        ck_assert_int_eq(s->policy.protect_defaults, 1); /* the schema's default */
        ck_assert_str_eq(s->policy.root_dir, "/srv/root");
        ck_assert_uint_eq(s->policy.limits.set, SBX_LIMIT_MEMORY | SBX_LIMIT_CPU_SECONDS);
        ck_assert_uint_eq(s->policy.limits.memory_bytes, 512u << 20);
        ck_assert(s->policy.limits.cpu_seconds == 1.5);
        ck_assert_uint_eq(s->warnings.n, 1);
        ck_assert_str_eq(s->warnings.v[0], "cpu_percent not enforced");
        ck_assert_uint_eq(s->n_enforcement, 1);
        ck_assert_str_eq(s->enforcement[0].limit, "memory");
        ck_assert_str_eq(s->enforcement[0].enforcement, "cgroup_v1");
        ck_assert_uint_eq(s->n_share_uids, 2);
        ck_assert_uint_eq(s->share_uids[1], 1002);
        sbx_sandbox_free(s);
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- a daemon error status ---------------------------------------------------------------- */

static int script_error(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_GET_SANDBOX &&
             pc_status(&pc, req->request_id, SBX__V1__CODE__NOT_FOUND,
                       "sandbox 'nope' not found; list sandboxes with `sbx list`");
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        /* The connection stays usable after an error status. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_TERMINATE &&
             strcmp(req->terminate->sandbox_id, "nope2") == 0 &&
             pc_status(&pc, req->request_id, SBX__V1__CODE__OK, NULL);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_error_status) {
        struct peer p;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;

        peer_start(&p, script_error);
        c = connect_ok(&p);
        ck_assert_int_eq(sbx_get(c, "nope", &s), SBX_NOT_FOUND);
        ck_assert_ptr_null(s);
        ck_assert_str_eq(sbx_error_message(c),
                         "sandbox 'nope' not found; list sandboxes with `sbx list`");
        ck_assert_int_eq(sbx_errno(c), 0);
        ck_assert_int_eq(sbx_terminate(c, "nope2", NULL), SBX_OK);
        ck_assert_str_eq(sbx_error_message(c), "");
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- protocol violations: wrong request id, garbage, oversize frame ----------------------- */

static int script_violations(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        static const uint8_t garbage[] = {0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
        bool ok;
        int rc;

        /* Connection 1: a reply for another request. */
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        {
                /* A perfectly good answer, but to a request that was never made. */
                Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
                Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
                info.id = (char *)"box";
                resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
                resp.sandbox = &info;
                ok = pc_ok(&pc, req->request_id + 1000, &resp, 0);
        }
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        pc_wait_eof(&pc);
        pc_close(&pc);

        /* Connection 2 (the library reconnects): a frame that does not decode. */
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(pc_send_raw(&pc, garbage, sizeof(garbage), 0));
        pc_wait_eof(&pc);
        pc_close(&pc);

        /* Connection 3: a frame header announcing 4 GiB. */
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(pc_send_raw(&pc, huge, sizeof(huge), 0));
        pc_wait_eof(&pc);
        pc_close(&pc);

        /* Connection 4: all is well again. */
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_REMOVE && req->remove->recursive &&
             pc_status(&pc, req->request_id, SBX__V1__CODE__OK, NULL);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_protocol_violations) {
        struct peer p;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;

        peer_start(&p, script_violations);
        c = connect_ok(&p);
        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_INTERNAL);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(sbx_errno(c), EPROTO);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "protocol error"));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "was the only one in flight"));

        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_INTERNAL);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(sbx_errno(c), EBADMSG);

        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_INTERNAL);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(sbx_errno(c), EMSGSIZE);

        ck_assert_int_eq(sbx_remove(c, "box", "/workspace/x", 1), SBX_OK);
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- the peer closes in the middle of a reply; a connection-level error ------------------- */

static int script_close_mid_reply(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        static const uint8_t part[] = {0, 0, 0, 100, 8, 1, 18, 2, 8, 0};
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(pc_send_raw(&pc, part, sizeof(part), 0));
        pc_close(&pc);

        /* Second connection: an error for request 0, then the daemon hangs up. */
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(pc_status(&pc, 0, SBX__V1__CODE__RESOURCE_EXHAUSTED, "too many connections"));
        pc_close(&pc);
        return 0;
}

START_TEST(test_close_mid_reply) {
        struct peer p;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;

        peer_start(&p, script_close_mid_reply);
        c = connect_ok(&p);
        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_UNAVAILABLE);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(sbx_errno(c), ECONNRESET);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "closed the connection"));

        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_RESOURCE_EXHAUSTED);
        ck_assert_str_eq(sbx_error_message(c), "too many connections");
        ck_assert_int_eq(peer_wait(&p), 0);

        /* Nobody listens any more: the next call fails to reconnect, cleanly. */
        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_UNAVAILABLE);
        ck_assert_int_ne(sbx_errno(c), 0);
        sbx_close(c);
}
END_TEST

/* ---- a pipelined Hello (the sbx tool's connect) --------------------------------------------- */

/* Whether the client sent more than the Hello within ms, without an answer to it. */
static bool pc_more_within(struct pconn *pc, int ms) {
        struct pollfd p = {.fd = pc->fd, .events = POLLIN};
        return frame_reader_pending(&pc->r) > 0 || poll(&p, 1, ms) == 1;
}

/* Expects a CancelCommand for box/c-9 as request want_id: 0 or a failure exit code. */
static int pc_recv_cancel(struct pconn *pc, uint64_t want_id) {
        Sbx__V1__Request *req = pc_recv(pc);
        bool ok;

        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_CANCEL_COMMAND && req->has_request_id &&
             req->request_id == want_id && strcmp(req->cancel_command->command_id, "c-9") == 0;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        return 0;
}

/* Connection 1: the call comes before the Hello is answered; then the Hello's reply and
 * the call's. Connection 2: a daemon without Hello (UNIMPLEMENTED), which still serves.
 * Connection 3: a daemon that refuses the connection (request id 0) and hangs up. */
static int script_pipelined(int lfd) {
        struct pconn pc;
        uint64_t id;

        PEER_EXPECT(pc_accept(lfd, &pc));
        PEER_EXPECT(pc_recv_hello(&pc, &id) == 0);
        PEER_EXPECT(pc_more_within(&pc, 2000));
        PEER_EXPECT(pc_recv_cancel(&pc, id + 1) == 0);
        PEER_EXPECT(pc_hello_reply(&pc, id, 0));
        PEER_EXPECT(pc_status(&pc, id + 1, SBX__V1__CODE__OK, NULL));
        pc_wait_eof(&pc);
        pc_close(&pc);

        PEER_EXPECT(pc_accept(lfd, &pc));
        PEER_EXPECT(pc_recv_hello(&pc, &id) == 0);
        PEER_EXPECT(pc_recv_cancel(&pc, id + 1) == 0);
        PEER_EXPECT(pc_status(&pc, id, SBX__V1__CODE__UNIMPLEMENTED, "unknown request"));
        PEER_EXPECT(pc_status(&pc, id + 1, SBX__V1__CODE__OK, NULL));
        pc_wait_eof(&pc);
        pc_close(&pc);

        PEER_EXPECT(pc_accept(lfd, &pc));
        PEER_EXPECT(pc_recv_hello(&pc, &id) == 0);
        PEER_EXPECT(pc_status(&pc, 0, SBX__V1__CODE__RESOURCE_EXHAUSTED, "too many connections"));
        pc_close(&pc);
        return 0;
}

START_TEST(test_pipelined_hello) {
        struct peer p;
        sbx_client *c = NULL;
        struct sbx_hello *h = NULL;

        peer_start(&p, script_pipelined);
        ck_assert_int_eq(libsbx_connect_pipelined(p.path, "check-client", &c), SBX_OK);
        ck_assert_int_eq(sbx_cancel(c, "box", "c-9"), SBX_OK);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_uint_eq(h->peer_uid, 1234);
        sbx_hello_free(h);
        sbx_close(c);

        ck_assert_int_eq(libsbx_connect_pipelined(p.path, "check-client", &c), SBX_OK);
        ck_assert_int_eq(sbx_cancel(c, "box", "c-9"), SBX_OK);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_UNIMPLEMENTED);
        sbx_close(c);

        /* What sbx_connect would have said, the first call says. */
        ck_assert_int_eq(libsbx_connect_pipelined(p.path, "check-client", &c), SBX_OK);
        ck_assert_int_eq(sbx_cancel(c, "box", "c-9"), SBX_RESOURCE_EXHAUSTED);
        ck_assert_str_eq(sbx_error_message(c), "too many connections");
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* A pipe between the test and its peer (opened before peer_start, so both have it), for
 * a script and a test that wait for each other instead of sleeping: one writes a byte to
 * [1] once it got somewhere, the other reads it from [0]. */
static int peer_pipe[2] = {-1, -1};

static void peer_pipe_open(void) {
        ck_assert_int_eq(pipe2(peer_pipe, O_CLOEXEC), 0);
}

static void peer_pipe_close(void) {
        close(peer_pipe[0]);
        close(peer_pipe[1]);
        peer_pipe[0] = peer_pipe[1] = -1;
}

/* Reads the byte written to peer_pipe: 1, or 0 after 30 s. */
static int peer_pipe_read(void) {
        struct pollfd f = {.fd = peer_pipe[0], .events = POLLIN};
        char b;

        return poll(&f, 1, 30000) == 1 && read(peer_pipe[0], &b, 1) == 1;
}

/* A watched fd (libsbx_set_watch) is served while a call waits: the peer answers only
 * once the watch callback has run (it says so through peer_pipe), so the call ends only
 * if the callback ran while it waited, however slow the machine. */
static int script_watch(int lfd) {
        struct pconn pc;
        uint64_t id = 2; /* the Hello was 1 */
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        PEER_EXPECT(pc_recv_cancel(&pc, id) == 0);
        PEER_EXPECT(peer_pipe_read());
        PEER_EXPECT(pc_status(&pc, id, SBX__V1__CODE__OK, NULL));
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

struct watch_seen {
        int fd;
        int calls;
};

static void on_watch_ready(void *userdata) {
        struct watch_seen *w = userdata;
        char b;

        ck_assert_int_eq(read(w->fd, &b, 1), 1);
        w->calls++;
        ck_assert_int_eq(write(peer_pipe[1], "w", 1), 1); /* the peer may answer now */
}

START_TEST(test_watch_during_call) {
        struct peer p;
        struct watch_seen w = {0};
        sbx_client *c;
        int fds[2];

        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        w.fd = fds[0];
        peer_pipe_open(); /* the callback writes, the peer reads */
        peer_start(&p, script_watch);
        c = connect_ok(&p);
        libsbx_set_watch(c, fds[0], on_watch_ready, &w);
        ck_assert_int_eq(write(fds[1], "x", 1), 1);
        /* It ends only once the callback ran: before the reply, while the call waited. */
        ck_assert_int_eq(sbx_cancel(c, "box", "c-9"), SBX_OK);
        ck_assert_int_eq(w.calls, 1);
        peer_pipe_close();
        sbx_close(c);
        close(fds[0]);
        close(fds[1]);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- the daemon drops an idle connection: the next call reconnects by itself --------------- */

static int script_idle_close(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        pc_close(&pc); /* hang up on the idle client */
        PEER_EXPECT(write(peer_pipe[1], "c", 1) == 1);
        if ((rc = pc_hello(lfd, &pc, 0)))
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_CANCEL_COMMAND &&
             strcmp(req->cancel_command->command_id, "c-9") == 0 &&
             pc_status(&pc, req->request_id, SBX__V1__CODE__OK, NULL);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_reconnect_after_idle_close) {
        struct peer p;
        sbx_client *c;
        enum sbx_code rc;

        peer_pipe_open(); /* the peer writes, the test reads */
        peer_start(&p, script_idle_close);
        c = connect_ok(&p);
        ck_assert_msg(peer_pipe_read(), "the peer did not hang up"); /* it did, first */
        peer_pipe_close();
        rc = sbx_cancel(c, "box", "c-9");
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- the call timeout ---------------------------------------------------------------------- */

static int script_silent(int lfd) {
        struct pconn pc;
        int rc = pc_hello(lfd, &pc, 0);
        if (rc)
                return rc;
        pc_wait_eof(&pc); /* reads the request, never answers */
        pc_close(&pc);
        return 0;
}

START_TEST(test_call_timeout) {
        struct peer p;
        sbx_client *c;
        struct sbx_sandbox *s = NULL;
        int64_t t0, elapsed;

        peer_start(&p, script_silent);
        c = connect_ok(&p);
        sbx_set_call_timeout_ms(c, 300);
        t0 = mono_ms();
        ck_assert_int_eq(sbx_get(c, "box", &s), SBX_UNAVAILABLE);
        elapsed = mono_ms() - t0;
        ck_assert_int_eq(sbx_errno(c), ETIMEDOUT);
        ck_assert_msg(elapsed >= 250 && elapsed < 10000, "timed out after %lld ms",
                      (long long)elapsed);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "did not answer within 300 ms"));
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- streamed exec -------------------------------------------------------------------------- */

static int send_chunk(struct pconn *pc, uint64_t id, Sbx__V1__Stream stream, uint64_t off,
                      const char *s) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__OutputChunk ch = SBX__V1__OUTPUT_CHUNK__INIT;
        ch.command_id = (char *)"cmd-1";
        ch.has_stream = 1;
        ch.stream = stream;
        ch.has_offset = 1;
        ch.offset = off;
        ch.has_data = 1;
        ch.data.data = (uint8_t *)(uintptr_t)s;
        ch.data.len = strlen(s);
        resp.body_case = SBX__V1__RESPONSE__BODY_OUTPUT;
        resp.output = &ch;
        return pc_ok(pc, id, &resp, 0) ? 0 : 1;
}

static int script_exec_stream(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__CommandStarted cs = SBX__V1__COMMAND_STARTED__INIT;
        Sbx__V1__CommandResult res = SBX__V1__COMMAND_RESULT__INIT;
        Sbx__V1__ResourceReport rr = SBX__V1__RESOURCE_REPORT__INIT;
        static char *hit[] = {(char *)"output"};
        const Sbx__V1__RunCommand *rc_msg;
        uint64_t id;
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        rc_msg = req->run_command;
        ok = req->body_case == SBX__V1__REQUEST__BODY_RUN_COMMAND &&
             strcmp(rc_msg->sandbox_id, "box") == 0 && rc_msg->has_stream && rc_msg->stream &&
             rc_msg->has_timeout_ms && rc_msg->timeout_ms == SBX_DEFAULT_COMMAND_TIMEOUT_MS &&
             rc_msg->n_argv == 2 && strcmp(rc_msg->argv[0], "echo") == 0 &&
             strcmp(rc_msg->argv[1], "hi") == 0 && !rc_msg->shell && rc_msg->n_env == 1 &&
             strcmp(rc_msg->env[0]->name, "A") == 0 && strcmp(rc_msg->env[0]->value, "1=2") == 0 &&
             rc_msg->has_stdin && rc_msg->stdin.len == 3 &&
             memcmp(rc_msg->stdin.data, "in\n", 3) == 0 && rc_msg->cwd &&
             strcmp(rc_msg->cwd, "/tmp") == 0;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);

        cs.command_id = (char *)"cmd-1";
        cs.sandbox_id = (char *)"box";
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_STARTED;
        resp.command_started = &cs;
        PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        PEER_EXPECT(send_chunk(&pc, id, SBX__V1__STREAM__STDOUT, 0, "one") == 0);
        PEER_EXPECT(send_chunk(&pc, id, SBX__V1__STREAM__STDERR, 0, "two") == 0);
        PEER_EXPECT(send_chunk(&pc, id, SBX__V1__STREAM__STDOUT, 3, "three") == 0);

        res.command_id = (char *)"cmd-1";
        res.sandbox_id = (char *)"box";
        res.has_outcome = 1;
        res.outcome = SBX__V1__OUTCOME__EXITED;
        res.has_exit_code = 1;
        res.exit_code = 3;
        res.has_stdout_bytes = 1;
        res.stdout_bytes = 8;
        res.has_stderr_bytes = 1;
        res.stderr_bytes = 3;
        res.has_duration = 1;
        res.duration = 0.25;
        rr.has_cpu_seconds = 1;
        rr.cpu_seconds = 0.125;
        rr.has_peak_memory_bytes = 1;
        rr.peak_memory_bytes = 4096;
        rr.peak_memory_source = (char *)"cgroup_v1";
        rr.n_limits_hit = 1;
        rr.limits_hit = hit;
        res.resources = &rr;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = &res;
        PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

struct seen {
        char log[256];
        size_t n;
};

static void record_output(void *userdata, enum sbx_stream stream, uint64_t offset, const void *data,
                          size_t len) {
        struct seen *s = userdata;
        size_t used = strlen(s->log);
        snprintf(s->log + used, sizeof(s->log) - used, "%d@%llu:%.*s;", (int)stream,
                 (unsigned long long)offset, (int)len, (const char *)data);
        s->n++;
}

START_TEST(test_exec_stream) {
        static const char *const argv[] = {"echo", "hi"};
        static const char *const env[] = {"A=1=2"};
        struct peer p;
        sbx_client *c;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct seen seen = {.n = 0};
        enum sbx_code rc;

        peer_start(&p, script_exec_stream);
        c = connect_ok(&p);
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 2;
        o.env = env;
        o.n_env = 1;
        o.cwd = "/tmp";
        o.stdin_data = "in\n";
        o.stdin_len = 3;
        o.on_output = record_output;
        o.userdata = &seen;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_uint_eq(seen.n, 3);
        ck_assert_str_eq(seen.log, "1@0:one;2@0:two;1@3:three;");
        ck_assert_str_eq(r->command_id, "cmd-1");
        ck_assert_str_eq(r->sandbox_id, "box");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->has_exit_code, 1);
        ck_assert_int_eq(r->exit_code, 3);
        ck_assert_int_eq(r->has_signal, 0);
        ck_assert_uint_eq(r->stdout_len, 0);
        ck_assert_ptr_nonnull(r->stdout_data);
        ck_assert_uint_eq(r->stdout_bytes, 8);
        ck_assert(r->duration == 0.25);
        ck_assert(r->cpu_seconds == 0.125);
        ck_assert_uint_eq(r->peak_memory_bytes, 4096);
        ck_assert_str_eq(r->peak_memory_source, "cgroup_v1");
        ck_assert_uint_eq(r->limits_hit.n, 1);
        ck_assert_str_eq(r->limits_hit.v[0], "output");
        ck_assert_ptr_null(r->start_error);
        sbx_result_free(r);
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- exec waits for the command's own timeout on top of the call timeout ------------------ */

static int script_exec_slow(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__CommandResult res = SBX__V1__COMMAND_RESULT__INIT;
        uint64_t id;
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_RUN_COMMAND &&
             req->run_command->timeout_ms == 2000 && !req->run_command->stream &&
             req->run_command->shell &&
             strcmp(req->run_command->shell, "sleep 1; echo done") == 0 &&
             req->run_command->n_argv == 0 && req->run_command->max_stdout_bytes == 100 &&
             !req->run_command->has_max_stderr_bytes;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        usleep(800 * 1000); /* longer than the call timeout, shorter than call + command */
        res.has_outcome = 1;
        res.outcome = SBX__V1__OUTCOME__SIGNALED;
        res.has_signal = 1;
        res.signal = 9;
        res.has_stdout = 1;
        res.stdout.data = (uint8_t *)"done\n";
        res.stdout.len = 5;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = &res;
        PEER_EXPECT(pc_ok(&pc, id, &resp, 0));

        /* Then a command that never started, reported with a failure status. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        {
                Sbx__V1__Status st = SBX__V1__STATUS__INIT;
                Sbx__V1__Response r2 = SBX__V1__RESPONSE__INIT;
                Sbx__V1__CommandResult res2 = SBX__V1__COMMAND_RESULT__INIT;
                st.has_code = 1;
                st.code = SBX__V1__CODE__NOT_FOUND;
                st.message = (char *)"execve /nope: No such file or directory";
                res2.has_outcome = 1;
                res2.outcome = SBX__V1__OUTCOME__START_FAILED;
                res2.start_error = (char *)"execve /nope: No such file or directory";
                res2.has_start_errno = 1;
                res2.start_errno = ENOENT;
                r2.has_request_id = 1;
                r2.request_id = id;
                r2.status = &st;
                r2.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
                r2.command_result = &res2;
                PEER_EXPECT(pc_send(&pc, &r2, 0));
        }
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_exec_waits_for_command_timeout) {
        static const char *const argv[] = {"/nope"};
        struct peer p;
        sbx_client *c;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code rc;

        peer_start(&p, script_exec_slow);
        c = connect_ok(&p);
        sbx_set_call_timeout_ms(c, 200);
        sbx_exec_opts_init(&o);
        o.shell = "sleep 1; echo done";
        o.timeout_ms = 2000;
        o.max_stdout_bytes = 100;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_SIGNALED);
        ck_assert_int_eq(r->has_signal, 1);
        ck_assert_int_eq(r->signal, 9);
        ck_assert_int_eq(r->has_exit_code, 0);
        ck_assert_uint_eq(r->stdout_len, 5);
        ck_assert_str_eq((const char *)r->stdout_data, "done\n");
        sbx_result_free(r);

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 1;
        r = NULL;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_int_eq(rc, SBX_NOT_FOUND);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_START_FAILED);
        ck_assert_int_eq(r->start_errno, ENOENT);
        ck_assert_str_eq(r->start_error, "execve /nope: No such file or directory");
        ck_assert_str_eq(sbx_error_message(c), "execve /nope: No such file or directory");
        sbx_result_free(r);
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- files, lists and history: requests and conversions ----------------------------------- */

static int script_files(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        bool ok;
        uint64_t id;
        int rc = pc_hello(lfd, &pc, SBX_MIN_MAX_FRAME_BYTES);

        if (rc)
                return rc;
        /* WriteFile: defaults filled in, flags passed. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_WRITE_FILE && req->write_file->mode == 0644 &&
             req->write_file->append && !req->write_file->create_parents &&
             req->write_file->data.len == 5 &&
             memcmp(req->write_file->data.data, "hello", 5) == 0 &&
             strcmp(req->write_file->path, "a.txt") == 0;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__WriteFileReply wr = SBX__V1__WRITE_FILE_REPLY__INIT;
                wr.has_bytes_written = 1;
                wr.bytes_written = 5;
                resp.body_case = SBX__V1__RESPONSE__BODY_WRITE_FILE;
                resp.write_file = &wr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        /* (A write larger than the announced frame never reaches us.) ReadFile: */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_READ_FILE && req->read_file->offset == 7 &&
             req->read_file->limit == 3;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__ReadFileReply rr = SBX__V1__READ_FILE_REPLY__INIT;
                rr.has_data = 1;
                rr.data.data = (uint8_t *)"a\0b";
                rr.data.len = 3;
                rr.has_size = 1;
                rr.size = 10;
                rr.has_next_offset = 1;
                rr.next_offset = 10;
                rr.has_eof = rr.eof = 1;
                resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
                resp.read_file = &rr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        /* ListDirectory. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_LIST_DIRECTORY &&
             !req->list_directory->has_limit;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__ListDirectoryReply lr = SBX__V1__LIST_DIRECTORY_REPLY__INIT;
                Sbx__V1__FileInfo f1 = SBX__V1__FILE_INFO__INIT, f2 = SBX__V1__FILE_INFO__INIT;
                Sbx__V1__FileInfo *fs[] = {&f1, &f2};
                f1.name = (char *)"dir";
                f1.has_type = 1;
                f1.type = SBX__V1__FILE_TYPE__DIRECTORY;
                f1.has_mode = 1;
                f1.mode = 0755;
                f2.name = (char *)"link";
                f2.has_type = 1;
                f2.type = SBX__V1__FILE_TYPE__SYMLINK;
                f2.symlink_target = (char *)"dir";
                f2.has_mtime_unix_ms = 1;
                f2.mtime_unix_ms = 42;
                lr.n_entries = 2;
                lr.entries = fs;
                lr.has_truncated = lr.truncated = 1;
                resp.body_case = SBX__V1__RESPONSE__BODY_LIST_DIRECTORY;
                resp.list_directory = &lr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        /* MakeDirectory: default mode. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_MAKE_DIRECTORY &&
             req->make_directory->mode == 0755 && req->make_directory->parents &&
             pc_status(&pc, req->request_id, SBX__V1__CODE__OK, NULL);
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        /* GetHistory. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_GET_HISTORY &&
             req->get_history->after_seq == 5 && req->get_history->limit == 2;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__GetHistoryReply hr = SBX__V1__GET_HISTORY_REPLY__INIT;
                Sbx__V1__CommandRecord r1 = SBX__V1__COMMAND_RECORD__INIT, *rs[] = {&r1};
                static char *argv[] = {(char *)"make", (char *)"-j2"};
                r1.has_seq = 1;
                r1.seq = 6;
                r1.command_id = (char *)"cmd-6";
                r1.n_argv = 2;
                r1.argv = argv;
                r1.has_outcome = 1;
                r1.outcome = SBX__V1__OUTCOME__TIMED_OUT;
                r1.has_signal = 1;
                r1.signal = 9;
                hr.n_commands = 1;
                hr.commands = rs;
                hr.has_next_after_seq = 1;
                hr.next_after_seq = 6;
                resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
                resp.history = &hr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        /* ListSandboxes with filters. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_LIST_SANDBOXES &&
             req->list_sandboxes->include_ended && req->list_sandboxes->n_labels == 1 &&
             strcmp(req->list_sandboxes->labels[0]->key, "k") == 0 &&
             !req->list_sandboxes->has_limit;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__ListSandboxesReply lr = SBX__V1__LIST_SANDBOXES_REPLY__INIT;
                Sbx__V1__SandboxInfo a = SBX__V1__SANDBOX_INFO__INIT,
                                     b = SBX__V1__SANDBOX_INFO__INIT;
                Sbx__V1__SandboxInfo *v[] = {&a, &b};
                a.id = (char *)"a";
                b.id = (char *)"b";
                b.has_state = 1;
                b.state = SBX__V1__SANDBOX_STATE__EXPIRED;
                b.end_reason = (char *)"expired";
                lr.n_sandboxes = 2;
                lr.sandboxes = v;
                resp.body_case = SBX__V1__RESPONSE__BODY_LIST_SANDBOXES;
                resp.list_sandboxes = &lr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        /* CreateSandbox: the policy and options as given. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        {
                const Sbx__V1__CreateSandbox *cs = req->create_sandbox;
                ok = req->body_case == SBX__V1__REQUEST__BODY_CREATE_SANDBOX && cs->id &&
                     strcmp(cs->id, "new") == 0 && cs->has_timeout_ms && cs->timeout_ms == 5000 &&
                     !cs->has_idle_timeout_ms && cs->policy &&
                     cs->policy->network == SBX__V1__NETWORK_MODE__NETWORK_NONE &&
                     cs->policy->has_protect_defaults && !cs->policy->protect_defaults &&
                     cs->policy->n_writable_paths == 1 &&
                     strcmp(cs->policy->writable_paths[0], "/srv") == 0 && cs->policy->limits &&
                     cs->policy->limits->has_processes && cs->policy->limits->processes == 64 &&
                     !cs->policy->limits->has_memory_bytes && cs->n_labels == 1 &&
                     strcmp(cs->labels[0]->value, "v") == 0 && cs->n_env == 1 &&
                     strcmp(cs->env[0], "X=y") == 0 && cs->has_keep_workspace &&
                     cs->keep_workspace && cs->n_share_uids == 1 && cs->share_uids[0] == 7;
        }
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
                info.id = (char *)"new";
                info.has_state = 1;
                info.state = SBX__V1__SANDBOX_STATE__READY;
                resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
                resp.sandbox = &info;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

START_TEST(test_files_and_lists) {
        static char big[SBX_MIN_MAX_FRAME_BYTES];
        struct peer p;
        sbx_client *c;
        struct sbx_read_result *rd = NULL;
        struct sbx_dir_list *dl = NULL;
        struct sbx_history *h = NULL;
        struct sbx_sandbox_list *sl = NULL;
        struct sbx_sandbox *s = NULL;
        struct sbx_label filter = {(char *)"k", (char *)"v"};
        struct sbx_list_opts lo = {.labels = &filter, .n_labels = 1, .include_ended = 1};
        struct sbx_create_opts co;
        char *writable[] = {(char *)"/srv"};
        const char *env[] = {"X=y"};
        uint32_t share[] = {7};

        peer_start(&p, script_files);
        c = connect_ok(&p);
        ck_assert_int_eq(sbx_write(c, "box", "a.txt", "hello", 5, 0, SBX_WRITE_APPEND), SBX_OK);
        /* Larger than the 64 KiB frame the peer announced: refused here, nothing sent. */
        ck_assert_int_eq(sbx_write(c, "box", "big", big, sizeof(big), 0, 0), SBX_TOO_LARGE);
        ck_assert_int_eq(sbx_errno(c), EMSGSIZE);

        ck_assert_int_eq(sbx_read(c, "box", "a.txt", 7, 3, &rd), SBX_OK);
        ck_assert_uint_eq(rd->len, 3);
        ck_assert_mem_eq(rd->data, "a\0b", 3);
        ck_assert_uint_eq(rd->size, 10);
        ck_assert_uint_eq(rd->next_offset, 10);
        ck_assert_int_eq(rd->eof, 1);
        sbx_read_result_free(rd);

        ck_assert_int_eq(sbx_list_dir(c, "box", "/workspace", 0, &dl), SBX_OK);
        ck_assert_uint_eq(dl->n, 2);
        ck_assert_int_eq(dl->truncated, 1);
        ck_assert_str_eq(dl->v[0].name, "dir");
        ck_assert_int_eq(dl->v[0].is_dir, 1);
        ck_assert_uint_eq(dl->v[0].mode, 0755);
        ck_assert_int_eq(dl->v[1].type, SBX_FILE_SYMLINK);
        ck_assert_int_eq(dl->v[1].is_dir, 0);
        ck_assert_str_eq(dl->v[1].symlink_target, "dir");
        ck_assert_int_eq(dl->v[1].mtime_unix_ms, 42);
        sbx_dir_list_free(dl);

        ck_assert_int_eq(sbx_mkdir(c, "box", "/workspace/d/e", 0, 1), SBX_OK);

        ck_assert_int_eq(sbx_history(c, "box", 5, 2, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 1);
        ck_assert_uint_eq(h->next_after_seq, 6);
        ck_assert_str_eq(h->v[0].command_id, "cmd-6");
        ck_assert_uint_eq(h->v[0].argv.n, 2);
        ck_assert_str_eq(h->v[0].argv.v[1], "-j2");
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_TIMED_OUT);
        ck_assert_int_eq(h->v[0].has_signal, 1);
        ck_assert_str_eq(h->v[0].cwd, "");
        sbx_history_free(h);

        ck_assert_int_eq(sbx_list(c, &lo, &sl), SBX_OK);
        ck_assert_uint_eq(sl->n, 2);
        ck_assert_str_eq(sl->v[1]->id, "b");
        ck_assert_int_eq(sl->v[1]->state, SBX_STATE_EXPIRED);
        ck_assert_str_eq(sl->v[1]->end_reason, "expired");
        ck_assert_int_eq(sl->truncated, 0);
        sbx_sandbox_list_free(sl);

        sbx_create_opts_init(&co);
        co.id = "new";
        co.timeout_ms = 5000;
        co.policy.protect_defaults = 0;
        co.policy.writable_paths.v = writable;
        co.policy.writable_paths.n = 1;
        co.policy.limits.set = SBX_LIMIT_PROCESSES;
        co.policy.limits.processes = 64;
        co.labels = &filter;
        co.n_labels = 1;
        co.env = env;
        co.n_env = 1;
        co.share_uids = share;
        co.n_share_uids = 1;
        co.keep_workspace = 1;
        ck_assert_int_eq(sbx_create(c, &co, &s), SBX_OK);
        ck_assert_str_eq(s->id, "new");
        ck_assert_int_eq(s->state, SBX_STATE_READY);
        sbx_sandbox_free(s);

        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- the reply buffer: kept while the calls need it ------------------------------------------ */

#define ROOM_BIG_BYTES (6u * 1024u * 1024u)

/* Answers four ReadFiles: two of ROOM_BIG_BYTES, then two of 3 bytes. */
static int script_reply_room(int lfd) {
        static uint8_t big[ROOM_BIG_BYTES];
        struct pconn pc;
        int rc = pc_hello(lfd, &pc, 16u * 1024u * 1024u), i;
        if (rc)
                return rc;
        for (i = 0; i < 4; i++) {
                Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
                Sbx__V1__ReadFileReply rr = SBX__V1__READ_FILE_REPLY__INIT;
                Sbx__V1__Request *req = pc_recv(&pc);
                uint64_t id;
                PEER_EXPECT(req && req->body_case == SBX__V1__REQUEST__BODY_READ_FILE);
                id = req->request_id;
                sbx__v1__request__free_unpacked(req, NULL);
                rr.has_data = 1;
                rr.data.data = i < 2 ? big : (uint8_t *)"abc";
                rr.data.len = i < 2 ? sizeof(big) : 3;
                resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
                resp.read_file = &rr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

/* A large reply's buffer is kept while the calls need it (a file read in pieces grows
 * no fresh one per piece: faulting its pages in was two thirds of a 16 MiB ReadFile),
 * and given back before the call after one that did not need it. */
START_TEST(test_reply_room) {
        /* After each call: kept, kept, kept (the call before it needed the room), given
         * back (the call before it did not). */
        static const int kept[] = {1, 1, 1, 0};
        struct peer p;
        sbx_client *c;
        int i;

        peer_start(&p, script_reply_room);
        c = connect_ok(&p);
        for (i = 0; i < 4; i++) {
                struct sbx_read_result *rd = NULL;
                ck_assert_int_eq(sbx_read(c, "box", "f", 0, 0, &rd), SBX_OK);
                ck_assert_uint_eq(rd->len, i < 2 ? ROOM_BIG_BYTES : 3);
                sbx_read_result_free(rd);
                if (kept[i])
                        ck_assert_uint_ge(libsbx_reply_room(c), ROOM_BIG_BYTES);
                else
                        ck_assert_uint_lt(libsbx_reply_room(c), 4u * 1024u * 1024u);
        }
        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- a command that waits for a slot: CommandQueued, queue_timeout_ms, queued_ms ------------ */

static int send_queued(struct pconn *pc, uint64_t id, const char *cid, uint32_t ahead) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__CommandQueued q = SBX__V1__COMMAND_QUEUED__INIT;
        q.command_id = (char *)(uintptr_t)cid;
        q.sandbox_id = (char *)"box";
        q.has_ahead = 1;
        q.ahead = ahead;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_QUEUED;
        resp.command_queued = &q;
        return pc_ok(pc, id, &resp, 0) ? 0 : 1;
}

/* The result of command cid: outcome, and the milliseconds it waited. */
static int send_waited(struct pconn *pc, uint64_t id, const char *cid, Sbx__V1__Outcome outcome,
                       uint64_t queued_ms) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__CommandResult res = SBX__V1__COMMAND_RESULT__INIT;
        res.command_id = (char *)(uintptr_t)cid;
        res.sandbox_id = (char *)"box";
        res.has_outcome = 1;
        res.outcome = outcome;
        if (outcome == SBX__V1__OUTCOME__EXITED) {
                res.has_exit_code = 1;
                res.exit_code = 0;
        }
        res.has_queued_ms = 1;
        res.queued_ms = queued_ms;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = &res;
        return pc_ok(pc, id, &resp, 0) ? 0 : 1;
}

static int script_exec_queued(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__CommandStarted cs = SBX__V1__COMMAND_STARTED__INIT;
        const Sbx__V1__RunCommand *run;
        uint64_t id;
        bool ok;
        int rc = pc_hello(lfd, &pc, 0);

        if (rc)
                return rc;
        /* 1: on_queued asks for a stream; queue_timeout_ms as given. Two positions, a
         * wait longer than the call timeout, the command's and the grace together (but
         * not than those and the queue timeout: 20 s, far off however slow the machine),
         * the start, the result. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        run = req->run_command;
        ok = req->body_case == SBX__V1__REQUEST__BODY_RUN_COMMAND && run->has_stream &&
             run->stream && run->has_queue_timeout_ms && run->queue_timeout_ms == 20000 &&
             run->timeout_ms == 100;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        PEER_EXPECT(send_queued(&pc, id, "c-3", 2) == 0);
        PEER_EXPECT(send_queued(&pc, id, "c-3", 0) == 0);
        usleep(2500 * 1000);
        cs.command_id = (char *)"c-3";
        cs.sandbox_id = (char *)"box";
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_STARTED;
        resp.command_started = &cs;
        PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        PEER_EXPECT(send_waited(&pc, id, "c-3", SBX__V1__OUTCOME__EXITED, 420) == 0);

        /* 2: queue_timeout_ms 0 (never wait) is sent as given, not as absent; no
         * callback, no stream; it never ran. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        run = req->run_command;
        ok = req->body_case == SBX__V1__REQUEST__BODY_RUN_COMMAND && !run->stream &&
             run->has_queue_timeout_ms && run->queue_timeout_ms == 0;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        PEER_EXPECT(send_waited(&pc, id, "c-4", SBX__V1__OUTCOME__QUEUE_TIMEOUT, 0) == 0);

        /* 3: without has_queue_timeout the field is absent (the daemon's default). A
         * CommandQueued without on_queued is taken and dropped. RUNNING is no result
         * outcome: it reads as unspecified. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        run = req->run_command;
        ok = req->body_case == SBX__V1__REQUEST__BODY_RUN_COMMAND && run->stream &&
             !run->has_queue_timeout_ms;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        PEER_EXPECT(send_queued(&pc, id, "c-5", 7) == 0);
        PEER_EXPECT(send_waited(&pc, id, "c-5", SBX__V1__OUTCOME__RUNNING, 9) == 0);

        /* 4: GetHistory: a record that timed out waiting. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        ok = req->body_case == SBX__V1__REQUEST__BODY_GET_HISTORY;
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__GetHistoryReply hr = SBX__V1__GET_HISTORY_REPLY__INIT;
                Sbx__V1__CommandRecord r1 = SBX__V1__COMMAND_RECORD__INIT, *rs[] = {&r1};
                r1.has_seq = 1;
                r1.seq = 4;
                r1.command_id = (char *)"c-4";
                r1.has_outcome = 1;
                r1.outcome = SBX__V1__OUTCOME__QUEUE_TIMEOUT;
                r1.has_queued_ms = 1;
                r1.queued_ms = 60000;
                hr.n_commands = 1;
                hr.commands = rs;
                resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
                resp.history = &hr;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }

        /* 5: CreateSandbox with the command caps; the reply echoes them and a queue. */
        req = pc_recv(&pc);
        PEER_EXPECT(req);
        {
                const Sbx__V1__Limits *l =
                        req->body_case == SBX__V1__REQUEST__BODY_CREATE_SANDBOX &&
                                        req->create_sandbox->policy
                                ? req->create_sandbox->policy->limits
                                : NULL;
                ok = l && l->has_commands && l->commands == 2 && l->has_queued_commands &&
                     l->queued_commands == 5 && !l->has_memory_bytes;
        }
        id = req->request_id;
        sbx__v1__request__free_unpacked(req, NULL);
        PEER_EXPECT(ok);
        {
                Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
                Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
                Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
                lim.has_commands = 1;
                lim.commands = 2;
                lim.has_queued_commands = 1;
                lim.queued_commands = 5;
                pol.limits = &lim;
                info.id = (char *)"q";
                info.policy = &pol;
                info.has_running_commands = 1;
                info.running_commands = 2;
                info.has_queued_commands = 1;
                info.queued_commands = 3;
                resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
                resp.sandbox = &info;
                PEER_EXPECT(pc_ok(&pc, id, &resp, 0));
        }
        pc_wait_eof(&pc);
        pc_close(&pc);
        return 0;
}

/* What the callbacks of a queued command saw, in order. */
struct queue_seen {
        char log[128];
};

static void log_queued(void *userdata, const char *command_id, uint32_t ahead) {
        struct queue_seen *q = userdata;
        size_t used = strlen(q->log);
        snprintf(q->log + used, sizeof(q->log) - used, "queued %s %u;", command_id, ahead);
}

static void log_started(void *userdata, const char *command_id) {
        struct queue_seen *q = userdata;
        size_t used = strlen(q->log);
        snprintf(q->log + used, sizeof(q->log) - used, "started %s;", command_id);
}

START_TEST(test_exec_queued) {
        struct peer p;
        sbx_client *c;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct sbx_history *h = NULL;
        struct sbx_sandbox *s = NULL;
        struct sbx_create_opts co;
        struct queue_seen seen = {{0}};
        enum sbx_code rc;

        peer_start(&p, script_exec_queued);
        c = connect_ok(&p);
        /* 100 ms + 100 ms + the 2 s grace: the peer's 2.5 s in the queue is within the
         * call's wait only with the queue timeout (20 s) added. */
        sbx_set_call_timeout_ms(c, 100);
        sbx_exec_opts_init(&o);
        ck_assert_int_eq(o.has_queue_timeout, 0);
        ck_assert_ptr_null(o.on_queued);
        o.shell = "true";
        o.timeout_ms = 100;
        o.has_queue_timeout = 1;
        o.queue_timeout_ms = 20000;
        o.on_queued = log_queued;
        o.on_started = log_started;
        o.userdata = &seen;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_str_eq(seen.log, "queued c-3 2;queued c-3 0;started c-3;");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_eq(r->queued_ms, 420);
        sbx_result_free(r);

        sbx_exec_opts_init(&o);
        o.shell = "true";
        o.has_queue_timeout = 1;
        o.queue_timeout_ms = 0;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_int_eq(rc, SBX_OK);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_QUEUE_TIMEOUT);
        ck_assert_str_eq(sbx_outcome_name(r->outcome), "queue_timeout");
        ck_assert_int_eq(r->has_exit_code, 0);
        ck_assert_uint_eq(r->queued_ms, 0);
        sbx_result_free(r);

        sbx_exec_opts_init(&o);
        o.shell = "true";
        o.on_started = log_started;
        o.userdata = &seen;
        seen.log[0] = 0;
        rc = sbx_exec(c, "box", &o, &r);
        ck_assert_int_eq(rc, SBX_OK);
        ck_assert_str_eq(seen.log, "");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_UNSPECIFIED);
        ck_assert_uint_eq(r->queued_ms, 9);
        sbx_result_free(r);

        ck_assert_int_eq(sbx_history(c, "box", 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 1);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_QUEUE_TIMEOUT);
        ck_assert_uint_eq(h->v[0].queued_ms, 60000);
        sbx_history_free(h);

        sbx_create_opts_init(&co);
        co.policy.limits.set = SBX_LIMIT_COMMANDS | SBX_LIMIT_QUEUED_COMMANDS;
        co.policy.limits.commands = 2;
        co.policy.limits.queued_commands = 5;
        ck_assert_int_eq(sbx_create(c, &co, &s), SBX_OK);
        ck_assert_uint_eq(s->policy.limits.set, SBX_LIMIT_COMMANDS | SBX_LIMIT_QUEUED_COMMANDS);
        ck_assert_uint_eq(s->policy.limits.commands, 2);
        ck_assert_uint_eq(s->policy.limits.queued_commands, 5);
        ck_assert_uint_eq(s->running_commands, 2);
        ck_assert_uint_eq(s->queued_commands, 3);
        sbx_sandbox_free(s);

        sbx_close(c);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- the sbx tool against the scripted peer: a command that waits for a slot ------------- */

/* The sbx tool of this build ($BUILD/sbx, as tests/run.sh sets BUILD). */
static void sbx_path(char *buf, size_t len) {
        const char *b = getenv("BUILD");
        snprintf(buf, len, "%s/sbx", b && *b ? b : "build");
}

/* Reads fd to its end into a new NUL-terminated string (EIO, a pty whose other side
 * closed, is the end too). */
static char *read_to_end(int fd) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        char b[4096];
        ssize_t n;

        ck_assert_ptr_nonnull(f);
        while ((n = read(fd, b, sizeof(b))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break;
                fwrite(b, 1, (size_t)n, f);
        }
        fclose(f);
        return buf;
}

/* Runs `sbx --socket SOCK ARGS...` (args ends with NULL) with stdin the text in (NULL:
 * /dev/null; at most a pipe's buffer), its stderr a pseudo-terminal when err_tty, and
 * returns its exit status with *out and *err (free them) what it printed. */
static int run_sbx_in(const char *sock, const char *in, bool err_tty, char **out, char **err,
                      const char *const *args) {
        char path[256], *argv[32];
        int ip[2] = {-1, -1}, op[2], ep[2] = {-1, -1}, status;
        size_t n = 0;
        pid_t pid;

        sbx_path(path, sizeof(path));
        ck_assert_msg(access(path, X_OK) == 0, "no sbx tool at %s (set BUILD)", path);
        argv[n++] = path;
        argv[n++] = (char *)"--socket";
        argv[n++] = (char *)(uintptr_t)sock;
        for (; *args && n < sizeof(argv) / sizeof(argv[0]) - 1; args++)
                argv[n++] = (char *)(uintptr_t)*args;
        argv[n] = NULL;
        ck_assert_int_eq(pipe2(op, O_CLOEXEC), 0);
        if (in)
                ck_assert_int_eq(pipe2(ip, O_CLOEXEC), 0);
        if (err_tty) {
                ep[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                ck_assert_int_ge(ep[0], 0);
                ck_assert_int_eq(grantpt(ep[0]), 0);
                ck_assert_int_eq(unlockpt(ep[0]), 0);
                ep[1] = open(ptsname(ep[0]), O_RDWR | O_NOCTTY | O_CLOEXEC);
        } else {
                ck_assert_int_eq(pipe2(ep, O_CLOEXEC), 0);
        }
        ck_assert_int_ge(ep[1], 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int nul = in ? ip[0] : open("/dev/null", O_RDONLY);
                if (nul < 0 || dup2(nul, 0) < 0 || dup2(op[1], 1) < 0 || dup2(ep[1], 2) < 0)
                        _exit(99);
                execv(path, argv);
                _exit(98);
        }
        close(op[1]);
        close(ep[1]);
        if (in) {
                close(ip[0]);
                ck_assert_int_eq(write(ip[1], in, strlen(in)), (ssize_t)strlen(in));
                close(ip[1]);
        }
        *out = read_to_end(op[0]);
        *err = read_to_end(ep[0]);
        close(op[0]);
        close(ep[0]);
        while (waitpid(pid, &status, 0) < 0)
                ck_assert_int_eq(errno, EINTR);
        ck_assert_msg(WIFEXITED(status), "sbx ended by signal %d", WTERMSIG(status));
        return WEXITSTATUS(status);
}

static int run_sbx(const char *sock, bool err_tty, char **out, char **err,
                   const char *const *args) {
        return run_sbx_in(sock, NULL, err_tty, out, err, args);
}

/* The next request on a fresh connection of the tool (after its Hello): *ret (free it),
 * or a failure exit code. */
static int tool_request(int lfd, struct pconn *pc, Sbx__V1__Request__BodyCase want,
                        Sbx__V1__Request **ret) {
        int rc = pc_hello(lfd, pc, 0);

        if (rc)
                return rc;
        *ret = pc_recv(pc);
        PEER_EXPECT(*ret);
        PEER_EXPECT((*ret)->body_case == want);
        return 0;
}

/* Ends one connection of the tool. */
static void tool_done(struct pconn *pc, Sbx__V1__Request *req) {
        sbx__v1__request__free_unpacked(req, NULL);
        pc_wait_eof(pc);
        pc_close(pc);
}

static int script_tool_queue(int lfd) {
        struct pconn pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        const Sbx__V1__RunCommand *run;
        int rc;

        /* 1: exec --queue-timeout 2.5: queued, then timed out in the queue. */
        if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_RUN_COMMAND, &req)))
                return rc;
        run = req->run_command;
        PEER_EXPECT(run->stream && run->has_queue_timeout_ms && run->queue_timeout_ms == 2500);
        PEER_EXPECT(send_queued(&pc, req->request_id, "c-8", 3) == 0);
        PEER_EXPECT(send_waited(&pc, req->request_id, "c-8", SBX__V1__OUTCOME__QUEUE_TIMEOUT,
                                2500) == 0);
        tool_done(&pc, req);

        /* 2: exec --json --queue-timeout 0 (never wait): sent as given. */
        if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_RUN_COMMAND, &req)))
                return rc;
        run = req->run_command;
        PEER_EXPECT(run->has_queue_timeout_ms && run->queue_timeout_ms == 0);
        PEER_EXPECT(send_waited(&pc, req->request_id, "c-9", SBX__V1__OUTCOME__QUEUE_TIMEOUT, 0) ==
                    0);
        tool_done(&pc, req);

        /* 3: exec without --queue-timeout (absent), a stderr that is no terminal: it
         * waited 1.5 s, ran, and exited 0. */
        if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_RUN_COMMAND, &req)))
                return rc;
        PEER_EXPECT(!req->run_command->has_queue_timeout_ms);
        PEER_EXPECT(send_queued(&pc, req->request_id, "c-10", 0) == 0);
        {
                Sbx__V1__CommandStarted cs = SBX__V1__COMMAND_STARTED__INIT;
                cs.command_id = (char *)"c-10";
                cs.sandbox_id = (char *)"box";
                resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_STARTED;
                resp.command_started = &cs;
                PEER_EXPECT(pc_ok(&pc, req->request_id, &resp, 0));
        }
        PEER_EXPECT(send_waited(&pc, req->request_id, "c-10", SBX__V1__OUTCOME__EXITED, 1500) == 0);
        tool_done(&pc, req);

        /* 4 and 5: history, as a table and as JSON. */
        for (int i = 0; i < 2; i++) {
                Sbx__V1__GetHistoryReply hr = SBX__V1__GET_HISTORY_REPLY__INIT;
                Sbx__V1__CommandRecord r1 = SBX__V1__COMMAND_RECORD__INIT, *rs[] = {&r1};
                static char *argv[] = {(char *)"true"};
                if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_GET_HISTORY, &req)))
                        return rc;
                r1.has_seq = 1;
                r1.seq = 8;
                r1.command_id = (char *)"c-8";
                r1.n_argv = 1;
                r1.argv = argv;
                r1.has_outcome = 1;
                r1.outcome = SBX__V1__OUTCOME__QUEUE_TIMEOUT;
                r1.has_queued_ms = 1;
                r1.queued_ms = 1234;
                hr.n_commands = 1;
                hr.commands = rs;
                resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
                resp.history = &hr;
                PEER_EXPECT(pc_ok(&pc, req->request_id, &resp, 0));
                tool_done(&pc, req);
        }

        /* 6 and 7: create --max-commands 2 --max-queued 0 --json, then info: the caps and
         * the queue. */
        for (int i = 0; i < 2; i++) {
                Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
                Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
                Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
                if ((rc = tool_request(lfd, &pc,
                                       i == 0 ? SBX__V1__REQUEST__BODY_CREATE_SANDBOX
                                              : SBX__V1__REQUEST__BODY_GET_SANDBOX,
                                       &req)))
                        return rc;
                if (i == 0) {
                        const Sbx__V1__Limits *l = req->create_sandbox->policy
                                                           ? req->create_sandbox->policy->limits
                                                           : NULL;
                        PEER_EXPECT(l && l->has_commands && l->commands == 2 &&
                                    l->has_queued_commands && l->queued_commands == 0);
                }
                lim.has_commands = 1;
                lim.commands = 2;
                lim.has_queued_commands = 1;
                lim.queued_commands = 0;
                pol.limits = &lim;
                info.id = (char *)"box";
                info.has_state = 1;
                info.state = SBX__V1__SANDBOX_STATE__READY;
                info.policy = &pol;
                info.has_queued_commands = 1;
                info.queued_commands = 4;
                resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
                resp.sandbox = &info;
                PEER_EXPECT(pc_ok(&pc, req->request_id, &resp, 0));
                tool_done(&pc, req);
        }
        return 0;
}

/* Asserts that hay holds needle. */
#define HAS(hay, needle)                                                                           \
        ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not in '%s'", (needle), (hay))

START_TEST(test_tool_queue) {
        static const char *const bad_q[] = {"exec", "--queue-timeout", "-1", "box", "--", "true",
                                            NULL};
        static const char *const bad_max[] = {"create", "--max-commands", "0", NULL};
        static const char *const timed_out[] = {
                "exec", "--queue-timeout", "2.5", "box", "--", "true", NULL};
        static const char *const never[] = {"exec", "--json", "--queue-timeout", "0", "box", "--",
                                            "true", NULL};
        static const char *const waited[] = {"exec", "box", "--", "true", NULL};
        static const char *const hist[] = {"history", "box", NULL};
        static const char *const hist_json[] = {"history", "--json", "box", NULL};
        static const char *const create[] = {"create", "--max-commands", "2", "--max-queued",
                                             "0",      "--json",         NULL};
        static const char *const info[] = {"info", "box", NULL};
        struct peer p;
        char *out, *err;

        peer_start(&p, script_tool_queue);
        /* Bad values are refused before anything is sent. */
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, bad_q), 125);
        HAS(err, "--queue-timeout");
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, bad_max), 125);
        HAS(err, "--max-commands");
        free(out);
        free(err);

        /* A terminal on stderr is told of the wait; a command that never got a slot is an
         * error of sbx, 125, like one whose sandbox ended. */
        ck_assert_int_eq(run_sbx(p.path, true, &out, &err, timed_out), 125);
        HAS(err, "sbx: waiting for a slot in sandbox box (3 ahead)");
        HAS(err, "RESOURCE_EXHAUSTED: command c-8 waited 2.5 s for a slot in sandbox 'box' and "
                 "never ran");
        ck_assert_str_eq(out, "");
        free(out);
        free(err);

        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, never), 0);
        HAS(out, "\"outcome\":\"queue_timeout\"");
        HAS(out, "\"queued_ms\":0,");
        free(out);
        free(err);

        /* No terminal: no word of the wait. */
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, waited), 0);
        ck_assert_str_eq(err, "");
        free(out);
        free(err);

        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, hist), 0);
        HAS(out, "WAITED");
        HAS(out, "1.234s");
        HAS(out, "queue_timeout");
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, hist_json), 0);
        HAS(out, "\"outcome\":\"queue_timeout\"");
        HAS(out, "\"queued_ms\":1234,");
        free(out);
        free(err);

        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, create), 0);
        HAS(out, "\"commands\":2,\"queued_commands\":0}");
        HAS(out, "\"queued_commands\":4,");
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, info), 0);
        HAS(out, "commands=2 queued_commands=0");
        HAS(out, "queued_commands:");
        free(out);
        free(err);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* sbx mcp attached to "box": its GetSandbox on the main connection, then run_command's
 * RunCommand on a connection of its own, which never gets a slot. */
static int script_tool_mcp(int lfd) {
        struct pconn main_pc, pc;
        Sbx__V1__Request *req;
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
        int rc;

        if ((rc = tool_request(lfd, &main_pc, SBX__V1__REQUEST__BODY_GET_SANDBOX, &req)))
                return rc;
        info.id = (char *)"box";
        info.has_state = 1;
        info.state = SBX__V1__SANDBOX_STATE__READY;
        info.has_owner_uid = 1;
        info.owner_uid = (uint32_t)geteuid();
        resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
        resp.sandbox = &info;
        PEER_EXPECT(pc_ok(&main_pc, req->request_id, &resp, 0));
        sbx__v1__request__free_unpacked(req, NULL);

        if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_RUN_COMMAND, &req)))
                return rc;
        PEER_EXPECT(req->run_command->has_queue_timeout_ms &&
                    req->run_command->queue_timeout_ms == 250);
        PEER_EXPECT(send_waited(&pc, req->request_id, "c-2", SBX__V1__OUTCOME__QUEUE_TIMEOUT,
                                250) == 0);
        tool_done(&pc, req);
        pc_wait_eof(&main_pc);
        pc_close(&main_pc);
        return 0;
}

/* What an MCP client says first: initialize, then initialized (one line each). */
#define MCP_HANDSHAKE                                                                              \
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"                     \
        "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"                  \
        "\"name\":\"check\",\"version\":\"1\"}}}\n"                                                \
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"

START_TEST(test_tool_mcp_queue) {
        static const char *const mcp[] = {"mcp", "--sandbox", "box", NULL};
        static const char *const in = MCP_HANDSHAKE
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"run_command\",\"arguments\":{\"command\":\"true\",\"queue_timeout_seconds\":"
                "0.25}}}\n";
        struct peer p;
        char *out, *err;

        peer_start(&p, script_tool_mcp);
        ck_assert_int_eq(run_sbx_in(p.path, in, false, &out, &err, mcp), 0);
        /* tools/list: the input, and the outcome from the one table of names. */
        HAS(out, "\"queue_timeout_seconds\":{\"type\":\"number\"");
        HAS(out, "start_failed, queue_timeout, unknown or running");
        HAS(out, "\"queued_ms\":{\"type\":\"integer\"");
        /* The result: an error result that says why, with queued_ms. */
        HAS(out, "[did not run: no slot within 0.25 s (queue_timeout_seconds)");
        HAS(out, "\"outcome\":\"queue_timeout\"");
        HAS(out, "\"queued_ms\":250");
        HAS(out, "\"isError\":true");
        free(out);
        free(err);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* Every limit at once, as the tests of the sbx tool below give and expect them: the flags
 * of `sbx create` (file_size 0 and queued_commands 0, the two that take 0; core_dumps has
 * no flag and comes only in the reply). */
static void all_limits(Sbx__V1__Limits *l, bool core_dumps) {
        l->has_memory_bytes = l->has_cpu_seconds = l->has_cpu_percent = l->has_processes = 1;
        l->has_file_size_bytes = l->has_open_files = l->has_tmp_bytes = l->has_commands = 1;
        l->has_queued_commands = l->has_disk_bytes = l->has_disk_inodes = 1;
        l->memory_bytes = 512u << 20;
        l->cpu_seconds = 2.5;
        l->cpu_percent = 50;
        l->processes = 64;
        l->file_size_bytes = 0;
        l->open_files = 128;
        l->tmp_bytes = 256u << 20;
        l->commands = 3;
        l->queued_commands = 0;
        l->disk_bytes = 2ull << 30;
        l->disk_inodes = 1000;
        l->has_core_dumps = core_dumps;
        l->core_dumps = core_dumps;
}

/* Whether the request's limits are those of all_limits, without core_dumps. */
static bool are_all_limits(const Sbx__V1__Limits *l) {
        Sbx__V1__Limits want = SBX__V1__LIMITS__INIT;

        all_limits(&want, false);
        return l && l->has_memory_bytes && l->memory_bytes == want.memory_bytes &&
               l->has_cpu_seconds && l->cpu_seconds == want.cpu_seconds && l->has_cpu_percent &&
               l->cpu_percent == want.cpu_percent && l->has_processes &&
               l->processes == want.processes && l->has_file_size_bytes &&
               l->file_size_bytes == 0 && l->has_open_files && l->open_files == want.open_files &&
               l->has_tmp_bytes && l->tmp_bytes == want.tmp_bytes && l->has_commands &&
               l->commands == want.commands && l->has_queued_commands && l->queued_commands == 0 &&
               l->has_disk_bytes && l->disk_bytes == want.disk_bytes && l->has_disk_inodes &&
               l->disk_inodes == want.disk_inodes && !l->has_core_dumps;
}

/* Answers req on pc with sandbox "box", ready, owned by us, with every limit. */
static int answer_all_limits(struct pconn *pc, const Sbx__V1__Request *req) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__SandboxInfo info = SBX__V1__SANDBOX_INFO__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;

        all_limits(&lim, true);
        pol.limits = &lim;
        info.id = (char *)"box";
        info.has_state = 1;
        info.state = SBX__V1__SANDBOX_STATE__READY;
        info.has_owner_uid = 1;
        info.owner_uid = (uint32_t)geteuid();
        info.policy = &pol;
        resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
        resp.sandbox = &info;
        PEER_EXPECT(pc_ok(pc, req->request_id, &resp, 0));
        return 0;
}

/* create with every limit's flag (checked on the wire), info, info --json, then sbx mcp's
 * sandbox_info (its attach and the tool's GetSandbox on one connection). */
static int script_tool_limits(int lfd) {
        static const Sbx__V1__Request__BodyCase want[] = {SBX__V1__REQUEST__BODY_CREATE_SANDBOX,
                                                          SBX__V1__REQUEST__BODY_GET_SANDBOX,
                                                          SBX__V1__REQUEST__BODY_GET_SANDBOX};
        struct pconn pc;
        Sbx__V1__Request *req;
        int rc;

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                if ((rc = tool_request(lfd, &pc, want[i], &req)))
                        return rc;
                if (i == 0) {
                        const Sbx__V1__Policy *pol = req->create_sandbox->policy;
                        PEER_EXPECT(pol && are_all_limits(pol->limits));
                }
                if ((rc = answer_all_limits(&pc, req)))
                        return rc;
                tool_done(&pc, req);
        }
        if ((rc = tool_request(lfd, &pc, SBX__V1__REQUEST__BODY_GET_SANDBOX, &req)))
                return rc;
        rc = answer_all_limits(&pc, req);
        sbx__v1__request__free_unpacked(req, NULL);
        if (rc)
                return rc;
        req = pc_recv(&pc);
        PEER_EXPECT(req && req->body_case == SBX__V1__REQUEST__BODY_GET_SANDBOX);
        if ((rc = answer_all_limits(&pc, req)))
                return rc;
        tool_done(&pc, req);
        return 0;
}

/* The limits in every rendering, byte for byte: the text of `sbx info`, the JSON of
 * `sbx create --json` and `sbx info --json`, sbx mcp's sandbox_info (text and
 * structuredContent); and each flag's refusal of a bad value, before anything is sent. */
START_TEST(test_tool_limits) {
        /* Every flag of a limit, with the value all_limits expects. */
        static const char *const flags[][2] = {
                {"--memory", "512M"},   {"--cpu-seconds", "2.5"},  {"--cpu-percent", "50"},
                {"--processes", "64"},  {"--file-size", "0"},      {"--open-files", "128"},
                {"--tmp-size", "256M"}, {"--max-commands", "3"},   {"--max-queued", "0"},
                {"--disk", "2G"},       {"--disk-inodes", "1000"},
        };
        const char *create[32] = {"create", "--json"};
        static const char *const info[] = {"info", "box", NULL};
        static const char *const info_json[] = {"info", "--json", "box", NULL};
        static const char *const mcp[] = {"mcp", "--sandbox", "box", NULL};
        static const char *const in = MCP_HANDSHAKE
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"sandbox_info\",\"arguments\":{}}}\n";
        static const char *const json_limits =
                "\"limits\":{\"memory_bytes\":536870912,\"cpu_seconds\":2.5,\"cpu_percent\":50,"
                "\"processes\":64,\"file_size_bytes\":0,\"open_files\":128,\"core_dumps\":true,"
                "\"tmp_bytes\":268435456,\"commands\":3,\"queued_commands\":0,"
                "\"disk_bytes\":2147483648,\"disk_inodes\":1000}";
        /* Each flag with a value it refuses, and the words of the refusal. */
        static const char *const bad[][3] = {
                {"--memory", "0", "expected bytes, e.g. 512M or 2G"},
                {"--cpu-seconds", "0", "expected seconds > 0"},
                {"--cpu-percent", "0", "expected a percentage of one CPU, e.g. 50 or 200"},
                {"--processes", "4294967296", "expected a count > 0"},
                {"--file-size", "-1", "expected bytes, e.g. 100M"},
                {"--open-files", "x", "expected a count > 0"},
                {"--tmp-size", "0", "expected bytes, e.g. 256M"},
                {"--max-commands", "0", "expected a count > 0 of commands running at once"},
                {"--max-queued", "-1", "expected a count of commands waiting at once"},
                {"--disk", "0", "expected the size of /workspace, e.g. 2G"},
                {"--disk-inodes", "0", "expected a count > 0 of files in /workspace"},
        };
        struct peer p;
        char *out, *err, want[256];

        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
                create[2 + 2 * i] = flags[i][0];
                create[3 + 2 * i] = flags[i][1];
        }
        peer_start(&p, script_tool_limits);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *argv[] = {"create", bad[i][0], bad[i][1], NULL};
                ck_assert_int_eq(run_sbx(p.path, false, &out, &err, argv), 125);
                snprintf(want, sizeof(want),
                         "sbx: INVALID_ARGUMENT: bad value '%s' for %s of sbx create: %s (run "
                         "`sbx help` for usage)\n",
                         bad[i][1], bad[i][0], bad[i][2]);
                ck_assert_str_eq(err, want);
                free(out);
                free(err);
        }
        {
                const char *argv[] = {"create", "--core-dumps", "1", NULL};
                ck_assert_int_eq(run_sbx(p.path, false, &out, &err, argv), 125);
                HAS(err, "unknown option '--core-dumps' for sbx create");
                free(out);
                free(err);
        }

        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, create), 0);
        HAS(out, json_limits);
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, info), 0);
        HAS(out, " memory=536870912 cpu_seconds=2.5 cpu_percent=50 processes=64 file_size=0 "
                 "open_files=128 core_dumps=yes tmp=268435456 commands=3 queued_commands=0 "
                 "disk=2147483648 disk_inodes=1000\n");
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx(p.path, false, &out, &err, info_json), 0);
        HAS(out, json_limits);
        free(out);
        free(err);
        ck_assert_int_eq(run_sbx_in(p.path, in, false, &out, &err, mcp), 0);
        /* core_dumps is not among sbx mcp's limits. */
        HAS(out, "limits: memory=536870912 bytes cpu=2.5 s cpu_percent=50 processes=64 "
                 "file_size=0 bytes open_files=128 tmp=268435456 bytes commands=3 at once "
                 "queued_commands=0 disk=2147483648 bytes (/workspace) disk_inodes=1000\\n");
        HAS(out, "\"limits\":{\"memory_bytes\":536870912,\"cpu_seconds\":2.5,\"cpu_percent\":50,"
                 "\"processes\":64,\"file_size_bytes\":0,\"open_files\":128,"
                 "\"tmp_bytes\":268435456,\"commands\":3,\"queued_commands\":0,"
                 "\"disk_bytes\":2147483648,\"disk_inodes\":1000}");
        free(out);
        free(err);
        ck_assert_int_eq(peer_wait(&p), 0);
}
END_TEST

/* ---- local failures: no daemon, bad arguments, NULLs ---------------------------------------- */

START_TEST(test_connect_fails) {
        char path[128];
        sbx_client *c = NULL;
        struct sbx_hello *h = NULL;
        enum sbx_code rc;

        snprintf(path, sizeof(path), "%s/nobody-%d.sock", tmpdir, (int)getpid());
        rc = sbx_connect(path, NULL, &c);
        ck_assert_int_eq(rc, SBX_UNAVAILABLE);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sbx_errno(c), ENOENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "cannot connect to "));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), path));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "No such file or directory"));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "is sbxd running?"));
        ck_assert_int_eq(sbx_hello(c, &h), SBX_UNAVAILABLE);
        ck_assert_ptr_null(h);
        sbx_close(c);
}
END_TEST

START_TEST(test_invalid_arguments) {
        char path[128];
        sbx_client *c = NULL;
        struct sbx_sandbox *s = NULL;
        struct sbx_result *r = NULL;
        struct sbx_exec_opts o;
        static const char *const argv[] = {"true"};
        static const char *const bad_env[] = {"NOEQUALS"};
        char long_id[80];

        /* A client that never connected: local validation comes before any I/O. */
        snprintf(path, sizeof(path), "%s/none-%d.sock", tmpdir, (int)getpid());
        ck_assert_int_eq(sbx_connect(path, "x", &c), SBX_UNAVAILABLE);
        ck_assert_int_eq(sbx_get(c, NULL, &s), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_get(c, "a/b", &s), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "invalid sandbox ID"));
        memset(long_id, 'a', sizeof(long_id) - 1);
        long_id[sizeof(long_id) - 1] = 0;
        ck_assert_int_eq(sbx_terminate(c, long_id, NULL), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_get(c, "ok", NULL), SBX_INVALID_ARGUMENT);

        sbx_exec_opts_init(&o);
        ck_assert_int_eq(sbx_exec(c, "box", &o, &r), SBX_INVALID_ARGUMENT); /* no command */
        o.argv = argv;
        o.argc = 1;
        o.shell = "true";
        ck_assert_int_eq(sbx_exec(c, "box", &o, &r), SBX_INVALID_ARGUMENT); /* both */
        o.shell = NULL;
        o.env = bad_env;
        o.n_env = 1;
        ck_assert_int_eq(sbx_exec(c, "box", &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "NAME=VALUE"));
        ck_assert_int_eq(sbx_exec(c, "box", NULL, &r), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_null(r);

        ck_assert_int_eq(sbx_write(c, "box", NULL, "x", 1, 0, 0), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_write(c, "box", "p", NULL, 1, 0, 0), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_write(c, "box", "p", "x", 1, 0, 0x100), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_write(c, "box", "p", "x", 1, 010000, 0), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_cancel(c, "box", NULL), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_mkdir(c, NULL, "/x", 0, 0), SBX_INVALID_ARGUMENT);
        sbx_close(c);

        ck_assert_int_eq(sbx_get(NULL, "box", &s), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_connect(path, "x", NULL), SBX_INVALID_ARGUMENT);
        ck_assert_str_eq(sbx_error_message(NULL), "no client (out of memory while connecting)");

        /* Free functions and setters accept NULL. */
        sbx_close(NULL);
        sbx_set_call_timeout_ms(NULL, 5);
        sbx_hello_free(NULL);
        sbx_sandbox_free(NULL);
        sbx_sandbox_list_free(NULL);
        sbx_result_free(NULL);
        sbx_read_result_free(NULL);
        sbx_dir_list_free(NULL);
        sbx_file_info_free(NULL);
        sbx_history_free(NULL);
}
END_TEST

START_TEST(test_names) {
        ck_assert_str_eq(sbx_code_name(SBX_OK), "OK");
        ck_assert_str_eq(sbx_code_name(SBX_READ_ONLY), "READ_ONLY");
        ck_assert_str_eq(sbx_code_name(SBX_INTERNAL), "INTERNAL");
        ck_assert_str_eq(sbx_code_name(SBX_SANDBOX_ENDED), "SANDBOX_ENDED");
        ck_assert_int_eq(SBX_SANDBOX_ENDED, 12);
        ck_assert_str_eq(sbx_code_name(13), "UNKNOWN");
        ck_assert_str_eq(sbx_code_name(-1), "UNKNOWN");
        ck_assert_str_eq(sbx_state_name(SBX_STATE_LOST), "lost");
        ck_assert_str_eq(sbx_state_name(99), "unknown");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_TIMED_OUT), "timed_out");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_START_FAILED), "start_failed");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_RUNNING), "running");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_QUEUE_TIMEOUT), "queue_timeout");
        ck_assert_int_eq(SBX_OUTCOME_QUEUE_TIMEOUT, 10);
        ck_assert_str_eq(sbx_outcome_name(11), "unknown");
        ck_assert_str_eq(sbx_outcome_name(42), "unknown");
}
END_TEST

/* Each value of each enum has a name of its own (one table per enum, keyed by value):
 * a value added to sbx.h without a name, or two values sharing one, fails here. */
static void assert_named(const char *(*name)(int), int first, int last, const char *fallback,
                         int fallback_value) {
        for (int v = first; v <= last; v++) {
                const char *n = name(v);
                ck_assert_ptr_nonnull(n);
                ck_assert_msg(v == fallback_value || strcmp(n, fallback) != 0,
                              "value %d has no name", v);
                for (int w = first; w < v; w++)
                        ck_assert_msg(strcmp(n, name(w)) != 0, "values %d and %d are both '%s'", w,
                                      v, n);
        }
        ck_assert_str_eq(name(last + 1), fallback);
}

START_TEST(test_names_complete) {
        assert_named(sbx_code_name, SBX_OK, SBX_SANDBOX_ENDED, "UNKNOWN", -1);
        assert_named(sbx_state_name, SBX_STATE_UNSPECIFIED, SBX_STATE_LOST, "unknown", -1);
        assert_named(sbx_outcome_name, SBX_OUTCOME_UNSPECIFIED, SBX_OUTCOME_QUEUE_TIMEOUT,
                     "unknown", SBX_OUTCOME_UNKNOWN);
        ck_assert_str_eq(sbx_state_name(SBX_STATE_CREATING), "creating");
        ck_assert_str_eq(sbx_state_name(SBX_STATE_TERMINATING), "terminating");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_SANDBOX_ENDED), "sandbox_ended");
        ck_assert_str_eq(sbx_outcome_name(SBX_OUTCOME_OUT_OF_MEMORY), "out_of_memory");
}
END_TEST

/* ---- the default socket path ----------------------------------------------------------------- */

/* Restores an environment variable on scope exit of the test body. */
struct saved_env {
        const char *name;
        char *value;
};

static void env_save(struct saved_env *s, const char *name) {
        const char *v = getenv(name);
        s->name = name;
        s->value = v ? strdup(v) : NULL;
}

static void env_restore(struct saved_env *s) {
        if (s->value)
                setenv(s->name, s->value, 1);
        else
                unsetenv(s->name);
        free(s->value);
}

START_TEST(test_default_socket_path) {
        struct saved_env sock, xdg;
        char buf[256], want[64];
        bool root = geteuid() == 0;

        env_save(&sock, "SBX_SOCKET");
        env_save(&xdg, "XDG_RUNTIME_DIR");

        setenv("SBX_SOCKET", "/tmp/elsewhere/s.sock", 1);
        ck_assert_int_eq(sbx_default_socket_path(buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/tmp/elsewhere/s.sock");
        ck_assert_int_eq(sbx_default_socket_path(buf, 5), -ENAMETOOLONG);

        setenv("SBX_SOCKET", "", 1); /* empty is as good as unset */
        setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
        if (root) {
                ck_assert_int_eq(sbx_default_socket_path(buf, sizeof(buf)), 0);
                ck_assert_str_eq(buf, "/run/sbxd/sbxd.sock");
                /* Become someone else for the rest (restored below). */
                ck_assert_int_eq(seteuid(65534), 0);
        }
        ck_assert_int_eq(sbx_default_socket_path(buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/run/user/77/sbxd/sbxd.sock");
        unsetenv("XDG_RUNTIME_DIR");
        ck_assert_int_eq(sbx_default_socket_path(buf, sizeof(buf)), 0);
        snprintf(want, sizeof(want), "/run/user/%u/sbxd/sbxd.sock", (unsigned)geteuid());
        ck_assert_str_eq(buf, want);
        if (root)
                ck_assert_int_eq(seteuid(0), 0);

        env_restore(&sock);
        env_restore(&xdg);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("client");
        TCase *peer = tcase_create("peer");
        TCase *local = tcase_create("local");

        tcase_add_unchecked_fixture(peer, tmpdir_setup, tmpdir_teardown);
        tcase_set_timeout(peer, TEST_TIMEOUT_SECS);
        tcase_add_test(peer, test_hello_roundtrip);
        tcase_add_test(peer, test_split_reply);
        tcase_add_test(peer, test_error_status);
        tcase_add_test(peer, test_protocol_violations);
        tcase_add_test(peer, test_close_mid_reply);
        tcase_add_test(peer, test_pipelined_hello);
        tcase_add_test(peer, test_watch_during_call);
        tcase_add_test(peer, test_reconnect_after_idle_close);
        tcase_add_test(peer, test_call_timeout);
        tcase_add_test(peer, test_exec_stream);
        tcase_add_test(peer, test_exec_waits_for_command_timeout);
        tcase_add_test(peer, test_files_and_lists);
        tcase_add_test(peer, test_reply_room);
        tcase_add_test(peer, test_exec_queued);
        tcase_add_test(peer, test_tool_queue);
        tcase_add_test(peer, test_tool_mcp_queue);
        tcase_add_test(peer, test_tool_limits);
        suite_add_tcase(s, peer);

        tcase_add_unchecked_fixture(local, tmpdir_setup, tmpdir_teardown);
        tcase_set_timeout(local, TEST_TIMEOUT_SECS);
        tcase_add_test(local, test_connect_fails);
        tcase_add_test(local, test_invalid_arguments);
        tcase_add_test(local, test_names);
        tcase_add_test(local, test_names_complete);
        tcase_add_test(local, test_default_socket_path);
        suite_add_tcase(s, local);
        return s;
}

SBX_TEST_MAIN(make_suite)
