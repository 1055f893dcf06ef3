/* it_daemon.c: integration tests of the daemon core against a real sbxd: Hello through
 * libsbx and sbx, pipelining from many clients, hostile and vanishing clients, the
 * socket's life (stale, taken, removed), shutdown, and the records after a SIGKILL. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "itutil.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"
#include "testutil.h"

/* A Hello with request id id, through the raw client of itutil. */
static void send_hello(int fd, uint64_t id) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
        req.has_request_id = 1;
        req.request_id = id;
        h.client_name = "raw";
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        it_raw_send(fd, &req);
}

/* ---- tests ---------------------------------------------------------------------------- */

START_TEST(hello_through_libsbx_and_cli) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_hello *h = NULL;
        char *out = NULL;
        const char *args[] = {"version", NULL};
        const char *list[] = {"list", "--json", NULL};

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_uint_eq(h->protocol_version, 1);
        ck_assert_str_eq(h->daemon_version, SBX_VERSION);
        ck_assert_uint_eq(h->peer_uid, getuid());
        ck_assert(strcmp(h->cgroup_version, "v1") == 0 || strcmp(h->cgroup_version, "v2") == 0 ||
                  strcmp(h->cgroup_version, "none") == 0);
        ck_assert_int_eq(h->rootless, geteuid() != 0);
        sbx_hello_free(h);
        sbx_close(c);

        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, args), 0);
        ck_assert_ptr_nonnull(strstr(out, "sbx " SBX_VERSION));
        ck_assert_ptr_nonnull(strstr(out, "sbxd " SBX_VERSION));
        free(out);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, list), 0);
        ck_assert_str_eq(out, "[]\n");
        free(out);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* 64 clients, each pipelining 1000 requests before reading: every response arrives
 * exactly once, with its own request id. */
START_TEST(pipelining_64_clients) {
        enum { CLIENTS = 64, REQS = 1000 };
        struct it_daemon d;
        pid_t pids[CLIENTS];
        int i, st;

        it_daemon_start(&d, NULL);
        for (i = 0; i < CLIENTS; i++) {
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        static uint8_t seen[REQS + 1];
                        struct frame_reader r;
                        int fd = it_raw_connect(&d), k, got = 0;
                        uint8_t *all = malloc(REQS * 32);
                        size_t total = 0;
                        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
                        /* All requests in large writes, before reading anything. */
                        for (k = 1; k <= REQS; k++) {
                                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                                Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
                                uint8_t *buf;
                                size_t len;
                                req.has_request_id = 1;
                                req.request_id = (uint64_t)k;
                                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                                req.hello = &h;
                                if (frame_pack(&req.base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len) < 0)
                                        _exit(2);
                                memcpy(all + total, buf, len);
                                total += len;
                                free(buf);
                        }
                        it_raw_write(fd, all, total);
                        while (got < REQS) {
                                Sbx__V1__Response *resp = it_raw_read(fd, &r, 20000);
                                if (!resp)
                                        _exit(3);
                                if (resp->request_id < 1 || resp->request_id > REQS ||
                                    seen[resp->request_id] || resp->status->code != SBX__V1__CODE__OK ||
                                    resp->body_case != SBX__V1__RESPONSE__BODY_HELLO)
                                        _exit(4);
                                seen[resp->request_id] = 1;
                                got++;
                                sbx__v1__response__free_unpacked(resp, NULL);
                        }
                        _exit(0);
                }
        }
        for (i = 0; i < CLIENTS; i++) {
                ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d failed: status %d", i,
                              st);
        }
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(vanishing_and_hostile_clients) {
        struct it_daemon d;
        struct frame_reader r;
        Sbx__V1__Response *resp;
        uint8_t half[3] = {0, 0, 0};
        uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
        uint8_t garbage[12] = {0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        int fd, i;

        it_daemon_start(&d, NULL);
        /* Disconnect mid-header and mid-payload, many times. */
        for (i = 0; i < 50; i++) {
                fd = it_raw_connect(&d);
                it_raw_write(fd, half, (size_t)(i % 3) + 1);
                close(fd);
                fd = it_raw_connect(&d);
                it_raw_write(fd, garbage, 6);
                close(fd);
        }
        /* Garbage payload: one error response with request id 0, then the close. */
        fd = it_raw_connect(&d);
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        it_raw_write(fd, garbage, sizeof(garbage));
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(resp->request_id, 0);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        sbx__v1__response__free_unpacked(resp, NULL);
        ck_assert_ptr_null(it_raw_read(fd, &r, 5000));
        close(fd);
        frame_reader_free(&r);
        /* A 4 GiB frame header: TOO_LARGE, then the close, and nothing allocated. */
        fd = it_raw_connect(&d);
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        it_raw_write(fd, huge, sizeof(huge));
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__TOO_LARGE);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "maximum"));
        sbx__v1__response__free_unpacked(resp, NULL);
        ck_assert_ptr_null(it_raw_read(fd, &r, 5000));
        close(fd);
        frame_reader_free(&r);
        /* Others are still served. */
        fd = it_raw_connect(&d);
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        send_hello(fd, 5);
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(resp->request_id, 5);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__OK);
        sbx__v1__response__free_unpacked(resp, NULL);
        close(fd);
        frame_reader_free(&r);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(bad_requests_get_typed_errors) {
        struct it_daemon d;
        struct frame_reader r;
        Sbx__V1__Response *resp;
        int fd = -1;
        /* Request{request_id=3, run_command{sandbox_id="a\0b"}}: a NUL inside a string. */
        uint8_t nul_req[] = {0, 0, 0, 9, 0x08, 0x03, 0x62, 0x05, 0x0a, 0x03, 'a', 0, 'b'};
        /* Request{request_id=4, field 99 varint}: an unknown field. */
        uint8_t unknown[] = {0, 0, 0, 5, 0x08, 0x04, 0x98, 0x06, 0x01};
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        Sbx__V1__GetSandbox gs = SBX__V1__GET_SANDBOX__INIT;

        it_daemon_start(&d, NULL);
        fd = it_raw_connect(&d);
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        it_raw_write(fd, nul_req, sizeof(nul_req));
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(resp->request_id, 3);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "NUL"));
        sbx__v1__response__free_unpacked(resp, NULL);

        /* No request id. */
        req.body_case = SBX__V1__REQUEST__BODY_GET_SANDBOX;
        req.get_sandbox = &gs;
        gs.sandbox_id = "nope";
        it_raw_send(fd, &req);
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        sbx__v1__response__free_unpacked(resp, NULL);

        /* Unknown sandbox. */
        req.has_request_id = 1;
        req.request_id = 6;
        it_raw_send(fd, &req);
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_uint_eq(resp->request_id, 6);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__NOT_FOUND);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "nope"));
        sbx__v1__response__free_unpacked(resp, NULL);

        /* A file request for a sandbox that does not exist. */
        req.request_id = 7;
        req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
        req.read_file = &rf;
        rf.sandbox_id = "x";
        rf.path = "/etc/hostname";
        it_raw_send(fd, &req);
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_uint_eq(resp->request_id, 7);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__NOT_FOUND);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "'x'"));
        sbx__v1__response__free_unpacked(resp, NULL);

        /* An unknown field: refused, and the connection is closed. */
        it_raw_write(fd, unknown, sizeof(unknown));
        resp = it_raw_read(fd, &r, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "unknown field 99"));
        sbx__v1__response__free_unpacked(resp, NULL);
        close(fd);
        frame_reader_free(&r);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(socket_life) {
        struct it_daemon d, d2;
        struct stat st;
        const char *args[] = {"list", NULL};
        int status;

        it_daemon_start(&d, NULL);
        ck_assert_int_eq(stat(d.sock, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0660);
        /* A second daemon on the same socket refuses to start; the first keeps serving. */
        d2 = d;
        d2.pid = fork();
        ck_assert_int_ge(d2.pid, 0);
        if (d2.pid == 0) {
                char bin[512], state2[700];
                snprintf(bin, sizeof(bin), "%s/sbxd", it_build_dir());
                snprintf(state2, sizeof(state2), "%s/state2", d.dir);
                execl(bin, bin, "--socket", d.sock, "--state-dir", state2, (char *)NULL);
                _exit(127);
        }
        ck_assert_int_eq(waitpid(d2.pid, &status, 0), d2.pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 127);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, args), 0);
        /* SIGKILL leaves a stale socket; the next daemon replaces it. */
        it_daemon_kill(&d);
        ck_assert_int_eq(stat(d.sock, &st), 0);
        it_daemon_restart(&d, NULL);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, args), 0);
        /* SIGTERM removes the socket and exits 0. */
        status = it_daemon_stop(&d);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_int_eq(stat(d.sock, &st), -1);
        ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* The records survive a SIGKILL in the middle of writing them: many clients create
 * sandboxes and run commands while the daemon is killed; after a restart the database
 * passes integrity_check, every sandbox that was live is marked lost (none stays
 * "ready"), and every unfinished command is "unknown". */
START_TEST(sigkill_during_writes) {
        enum { CLIENTS = 4 };
        struct it_daemon d;
        pid_t pids[CLIENTS];
        int i, st;
        sbx_client *c;
        struct sbx_sandbox_list *l = NULL;
        /* Without re-adoption, so that every live sandbox must be reconciled as lost. */
        const char *flags[] = {"--adopt-grace", "0", NULL};

        it_daemon_start(&d, flags);
        for (i = 0; i < CLIENTS; i++) {
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        sbx_client *cc = NULL;
                        if (sbx_connect(d.sock, "writer", &cc) != SBX_OK)
                                _exit(0);
                        for (;;) {
                                struct sbx_create_opts o;
                                struct sbx_sandbox *sb = NULL;
                                struct sbx_result *res = NULL;
                                struct sbx_exec_opts eo;
                                const char *argv[] = {"true", NULL};
                                sbx_create_opts_init(&o);
                                if (sbx_create(cc, &o, &sb) != SBX_OK)
                                        _exit(0);
                                sbx_exec_opts_init(&eo);
                                eo.argv = argv;
                                eo.argc = 1;
                                if (sbx_exec(cc, sb->id, &eo, &res) != SBX_OK)
                                        _exit(0);
                                sbx_result_free(res);
                                sbx_sandbox_free(sb);
                        }
                }
        }
        usleep(1500 * 1000);
        it_daemon_kill(&d);
        for (i = 0; i < CLIENTS; i++)
                waitpid(pids[i], &st, 0);
        ck_assert_int_gt(it_db_int(&d, "SELECT count(*) FROM sandboxes"), 0);
        it_daemon_restart(&d, flags);
        ck_assert(it_db_ok(&d));
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM sandboxes WHERE state IN "
                                             "('creating','ready','terminating')"),
                         0);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE outcome IS NULL"),
                         0);
        /* Served at once after the restart, with nothing live. */
        c = it_connect(&d);
        ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 0);
        sbx_sandbox_list_free(l);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert(it_db_ok(&d));
        /* Nothing of the killed daemon's sandboxes is left on disk. */
        {
                char cmd[800];
                snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s/sandboxes')\"", d.state);
                ck_assert_int_eq(system(cmd), 0);
        }
}
END_TEST


/* Many pipelined requests that each finish at once must not nest (a stack overflow
 * took the daemon down): 50,000 CommandInputs for a command that does not exist. */
START_TEST(pipelined_sync_answers_do_not_nest) {
        enum { N = 50000 };
        struct it_daemon d;
        struct frame_reader r;
        sbx_client *c;
        char *id;
        uint8_t *all;
        size_t total = 0, one;
        int fd, k, got = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        all = malloc((size_t)N * 64);
        for (k = 1; k <= N; k++) {
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;
                uint8_t *buf;
                req.has_request_id = 1;
                req.request_id = (uint64_t)k;
                in.sandbox_id = id;
                in.command_id = "c-999";
                req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
                req.command_input = &in;
                ck_assert_int_eq(frame_pack(&req.base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &one), 0);
                ck_assert_uint_le(one, 64);
                memcpy(all + total, buf, one);
                total += one;
                free(buf);
        }
        fd = it_raw_connect(&d);
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        {
                /* Write and read at once: the daemon pauses reading while its replies
                 * are not read. */
                pid_t w = fork();
                ck_assert_int_ge(w, 0);
                if (w == 0) {
                        it_raw_write(fd, all, total);
                        _exit(0);
                }
                while (got < N) {
                        Sbx__V1__Response *resp = it_raw_read(fd, &r, 20000);
                        ck_assert_ptr_nonnull(resp);
                        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__NOT_FOUND);
                        sbx__v1__response__free_unpacked(resp, NULL);
                        got++;
                }
                waitpid(w, NULL, 0);
        }
        close(fd);
        frame_reader_free(&r);
        free(all);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("daemon");
        TCase *tc = tcase_create("daemon");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, hello_through_libsbx_and_cli);
        tcase_add_test(tc, pipelining_64_clients);
        tcase_add_test(tc, vanishing_and_hostile_clients);
        tcase_add_test(tc, bad_requests_get_typed_errors);
        tcase_add_test(tc, socket_life);
        tcase_add_test(tc, sigkill_during_writes);
        tcase_add_test(tc, pipelined_sync_answers_do_not_nest);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
