/* it_forward.c: port forwarding from the client side, against a real sbxd, root and
 * rootless: libsbx's sbx_open_port (a stream to a port of a sandbox over a connection of
 * its own), and another user's sandbox refused as NOT_FOUND.
 *
 * The sandbox (of `network none`) runs the server of portserver.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asbob.h"
#include "itutil.h"
#include "portserver.h"
#include "sshd.h"
#include "sbx.h"
#include "testutil.h"

/* The daemon: root (0) or rootless (1, as nobody), with flags; a sandbox id on it with
 * the server running, and a client of it. */
static sbx_client *serving(struct it_daemon *d, int rootless, const char *const *flags,
                           const char *id) {
        sbx_client *c;

        if (rootless)
                it_daemon_start_as(d, 65534, 65534, flags);
        else
                it_daemon_start(d, flags);
        c = it_connect(d);
        free(it_create(c, id));
        start_server(c, id);
        return c;
}

/* sbx_open_port that must succeed: the stream. */
static int open_ok(sbx_client *c, const char *id, uint32_t port, const char *address) {
        int fd = -1;
        enum sbx_code rc = sbx_open_port(c, id, port, address, &fd);

        ck_assert_msg(rc == SBX_OK, "sbx_open_port %s:%u: %s", id, port, sbx_error_message(c));
        ck_assert_int_ge(fd, 0);
        return fd;
}

static void send_text(int fd, const char *s) {
        ck_assert_int_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* The stream is a plain blocking, close-on-exec descriptor: an HTTP exchange, ::1, a
 * half-close passed on both ways; the bytes a server writes as soon as it accepts come
 * out of the stream (libsbx never read past the answer); the client's own connection
 * goes on serving calls. */
START_TEST(open_port_gives_the_stream) {
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, NULL, "web");
        struct sbx_sandbox *s = NULL;
        char buf[8] = {0}, *in;
        int fd;

        fd = open_ok(c, "web", PORT, NULL);
        ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
        send_text(fd, "GET /lib HTTP/1.0\n\n");
        expect_http(fd, "/lib");

        for (int i = 0; i < 20; i++) {
                fd = open_ok(c, "web", BANNER_PORT, NULL);
                ck_assert_int_eq(read_exact(fd, buf, 7), 0);
                ck_assert_str_eq(buf, "banner\n");
                close(fd);
        }

        fd = open_ok(c, "web", PORT, "::1");
        send_text(fd, "GET /six HTTP/1.0\n\n");
        expect_http(fd, "/six");

        fd = open_ok(c, "web", PORT, NULL);
        send_text(fd, "ECHO\nabc");
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        in = read_to_end(fd, NULL);
        ck_assert_str_eq(in, "abcEND 3\n");
        free(in);
        close(fd);

        ck_assert_int_eq(sbx_get(c, "web", &s), SBX_OK);
        sbx_sandbox_free(s);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Failures are typed, with the daemon's message, leave nothing open and leave the
 * client serving: nothing listening names the port, a bad port or id is refused before
 * it is sent, a sandbox nobody made is NOT_FOUND. */
START_TEST(open_port_errors_are_typed) {
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, NULL, "web");
        struct sbx_sandbox *s = NULL;
        int fd = 5;

        ck_assert_int_eq(sbx_open_port(c, "web", 9, NULL, &fd), SBX_UNAVAILABLE);
        ck_assert_msg(strstr(sbx_error_message(c), "port 9"), "%s", sbx_error_message(c));
        ck_assert_int_eq(fd, -1);
        ck_assert_int_eq(sbx_open_port(c, "web", 0, NULL, &fd), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "1 to 65535"), "%s", sbx_error_message(c));
        ck_assert_int_eq(sbx_open_port(c, "web", 70000, NULL, &fd), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_open_port(c, "we b", PORT, NULL, &fd), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_open_port(c, NULL, PORT, NULL, &fd), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_open_port(c, "web", PORT, NULL, NULL), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_open_port(c, "nosuch", PORT, NULL, &fd), SBX_NOT_FOUND);
        ck_assert_msg(strstr(sbx_error_message(c), "nosuch"), "%s", sbx_error_message(c));
        ck_assert_int_eq(sbx_open_port(c, "web", PORT, "10.0.0.1", &fd), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_get(c, "web", &s), SBX_OK);
        ck_assert_str_eq(sbx_error_message(c), "");
        sbx_sandbox_free(s);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* What BOB gets from sbx_open_port on sandbox arg: "CODE message". */
static void bob_opens(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        enum sbx_code rc;
        int fd = -1;

        if (!c)
                return;
        rc = sbx_open_port(c, arg, PORT, NULL, &fd);
        say(r, "%d %s\n", (int)rc, sbx_error_message(c));
        if (fd >= 0)
                close(fd);
        sbx_close(c);
}

/* Another user's sandbox is NOT_FOUND, as one nobody made. */
START_TEST(another_users_sandbox_is_not_found) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        struct it_daemon d;
        sbx_client *c;
        char *rep;

        if (geteuid() != 0)
                return;
        c = serving(&d, 0, flags, "mine");
        rep = as_bob(bob_opens, &d, "mine");
        ck_assert_msg(atoi(rep) == SBX_NOT_FOUND && strstr(rep, "mine"), "%s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The text of /tmp/after in sandbox id, once the server wrote it (within 10 s). */
static char *after_text(sbx_client *c, const char *id) {
        struct sbx_result *r = it_sh(c, id, 30000,
                                     "for i in $(seq 100); do test -e /tmp/after && break; "
                                     "sleep 0.1; done; cat /tmp/after");
        char *t = strndup((const char *)r->stdout_data, r->stdout_len);

        sbx_result_free(r);
        return t;
}

/* `sbx dial-stdio` carries a stream of OpenPort both ways with half-close: after the
 * server said "bye" and ended its side, what the client goes on uploading still reaches
 * it, and dial-stdio exits 0 once both sides ended. */
START_TEST(dial_stdio_uploads_after_the_server_closed) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__OpenPort op = SBX__V1__OPEN_PORT__INIT;
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, NULL, "web");
        size_t n;
        char *in;
        int fd, efd, st;
        pid_t pid = spawn_dial(d.sock, &fd, &efd);

        req.has_request_id = 1;
        req.request_id = 1;
        op.sandbox_id = (char *)"web";
        op.has_port = 1;
        op.port = PORT;
        req.body_case = SBX__V1__REQUEST__BODY_OPEN_PORT;
        req.open_port = &op;
        it_raw_send(fd, &req);
        send_text(fd, "CLOSE\n");
        in = read_to_end(fd, &n); /* PortOpened's frame, then the server's words */
        ck_assert_msg(n > 4 && strcmp(in + n - 4, "bye\n") == 0, "%s", in);
        free(in);
        send_text(fd, "uploaded after the end");
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
        in = after_text(c, "web");
        ck_assert_str_eq(in, "uploaded after the end");
        free(in);
        close(fd);
        close(efd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("forward");
        TCase *tc = tcase_create("forward");

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_loop_test(tc, open_port_gives_the_stream, 0, 2);
        tcase_add_loop_test(tc, open_port_errors_are_typed, 0, 2);
        tcase_add_test(tc, another_users_sandbox_is_not_found);
        tcase_add_loop_test(tc, dial_stdio_uploads_after_the_server_closed, 0, 2);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
