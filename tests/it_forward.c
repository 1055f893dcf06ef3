/* it_forward.c: port forwarding from the client side, against a real sbxd, root and
 * rootless: libsbx's sbx_open_port (a stream to a port of a sandbox over a connection of
 * its own, never read past its answer), `sbx dial-stdio` carrying such a stream with
 * half-close both ways (and ending when its daemon goes away), `sbx port-forward`
 * (several forwards, a free port, curl through it, 100 connections at once, an upload
 * after the server's end, a port nothing listens on, a Unix socket, the sandbox's end,
 * SIGTERM), another user's sandbox refused as NOT_FOUND, and all of it over ssh:// through
 * the real sshd of sshd.h.
 *
 * The sandbox (of `network none`) runs the server of portserver.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

/* The client's half-close on fd (a stream, or a connection through a forward) reaches
 * the server, and its answer comes back after it; fd is closed. */
static void echo_half_closed(int fd) {
        char *in;

        send_text(fd, "ECHO\nabc");
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        in = read_to_end(fd, NULL);
        ck_assert_str_eq(in, "abcEND 3\n");
        free(in);
        close(fd);
}

/* The stream is a plain blocking, close-on-exec descriptor: an HTTP exchange, ::1, a
 * half-close passed on both ways; the bytes a server writes as soon as it accepts come
 * out of the stream (libsbx never read past the answer); the client's own connection
 * goes on serving calls. */
START_TEST(open_port_gives_the_stream) {
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, NULL, "web");
        struct sbx_sandbox *s = NULL;
        char buf[8] = {0};
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

        echo_half_closed(open_ok(c, "web", PORT, NULL));

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
        {
                const char *args[] = {"port-forward", arg, "0:8080", NULL};
                char *err = NULL;
                int code = it_sbx(d, NULL, 0, NULL, &err, args);
                say(r, "cli %d %s", code, err ? err : "");
                free(err);
        }
}

/* Another user's sandbox is NOT_FOUND, as one nobody made, to sbx_open_port and to
 * `sbx port-forward` (125 before it listens). */
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
        ck_assert_msg(strstr(rep, "cli 125 sbx: NOT_FOUND: ") && strstr(rep, "mine"), "%s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Removes /tmp/after in sandbox web. */
static void rm_after(sbx_client *c) {
        sbx_result_free(it_sh(c, "web", 30000, "rm -f /tmp/after"));
}

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
 * it, and dial-stdio exits 0 once both sides ended; a daemon that goes away ends it. */
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

        /* A daemon that goes away altogether ends dial-stdio at once, stdin still open:
         * its client must see the pipe closed (and connect again). */
        pid = spawn_dial(d.sock, &fd, &efd);
        {
                Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
                struct frame_reader rd;
                Sbx__V1__Response *resp;
                req = (Sbx__V1__Request)SBX__V1__REQUEST__INIT;
                req.has_request_id = 1;
                req.request_id = 1;
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &hello;
                frame_reader_init(&rd, 1u << 20);
                it_raw_send(fd, &req);
                resp = it_raw_read(fd, &rd, IO_MS);
                ck_assert_ptr_nonnull(resp);
                sbx__v1__response__free_unpacked(resp, NULL);
                frame_reader_free(&rd);
        }
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        for (int i = 0; i < 400 && waitpid(pid, &st, WNOHANG) != pid; i++)
                usleep(50000);
        ck_assert_msg(kill(pid, 0) < 0, "dial-stdio still runs after its daemon ended");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
        close(fd);
        close(efd);
}
END_TEST

/* ---- sbx port-forward ------------------------------------------------------------------ */

#define FWD_MAX 4

/* A running `sbx port-forward`: its pid, stdout and stderr, and where each forward
 * listens (from its lines). */
struct fwd {
        pid_t pid;
        int out, err;
        char where[FWD_MAX][128];
        int port[FWD_MAX];
        char errtext[8192]; /* what it wrote on stderr, read so far */
        size_t errlen;
};

/* Starts `sbx port-forward args...` with SBX_SOCKET=sock (a path or an ssh:// URL); it
 * dies with the test (PR_SET_PDEATHSIG). */
static void fwd_spawn(struct fwd *f, const char *sock, const char *const *args) {
        const char *argv[16] = {NULL};
        char bin[600];
        int o[2], e[2], n = 0;

        snprintf(bin, sizeof(bin), "%s/sbx", it_build_dir());
        argv[n++] = bin;
        argv[n++] = "port-forward";
        for (; *args && n < 15; args++)
                argv[n++] = *args;
        ck_assert_int_eq(pipe2(o, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(e, O_CLOEXEC), 0);
        memset(f, 0, sizeof(*f));
        f->pid = fork();
        ck_assert_int_ge(f->pid, 0);
        if (f->pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                dup2(o[1], 1);
                dup2(e[1], 2);
                setenv("SBX_SOCKET", sock, 1);
                execv(bin, (char *const *)(uintptr_t)argv);
                _exit(127);
        }
        close(o[1]);
        close(e[1]);
        f->out = o[0];
        f->err = e[0];
}

/* Reads one line from fd (within IO_MS) into buf. */
static void read_line(int fd, char *buf, size_t len) {
        size_t n = 0;

        while (n + 1 < len) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ck_assert_msg(poll(&p, 1, IO_MS) == 1, "no line within %d ms", IO_MS);
                ck_assert_int_eq(read(fd, buf + n, 1), 1);
                if (buf[n++] == '\n')
                        break;
        }
        buf[n] = '\0';
}

/* Starts the forward and reads its n lines "WHERE -> ID:PORT". */
static void fwd_start(struct fwd *f, const char *sock, int n, const char *const *args) {
        fwd_spawn(f, sock, args);
        for (int i = 0; i < n; i++) {
                char line[256], *colon;
                read_line(f->out, line, sizeof(line));
                ck_assert_msg(sscanf(line, "%127s -> ", f->where[i]) == 1, "line: %s", line);
                colon = strrchr(f->where[i], ':');
                f->port[i] = colon ? atoi(colon + 1) : 0;
        }
}

/* Everything the forward wrote on stderr until now (waiting up to ms for some). */
static char *fwd_stderr(struct fwd *f, int ms) {
        struct pollfd p = {.fd = f->err, .events = POLLIN};

        while (f->err >= 0 && f->errlen + 1 < sizeof(f->errtext) && poll(&p, 1, ms) == 1) {
                ssize_t k = read(f->err, f->errtext + f->errlen, sizeof(f->errtext) - 1 - f->errlen);
                if (k <= 0)
                        break;
                f->errlen += (size_t)k;
                ms = 100;
        }
        f->errtext[f->errlen] = '\0';
        return f->errtext;
}

/* Waits (up to 20 s) for the forward to exit; its exit status (256 + N: killed by N). */
static int fwd_wait(struct fwd *f) {
        int st = 0;

        for (int i = 0; i < 400; i++) {
                if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
                        f->pid = 0;
                        (void)fwd_stderr(f, 0);
                        close(f->out);
                        close(f->err);
                        f->err = -1;
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
                }
                usleep(50000);
        }
        ck_abort_msg("sbx port-forward did not exit within 20 s");
        return -1;
}

/* SIGTERM ends the forward cleanly: exit 0. */
static void fwd_stop(struct fwd *f) {
        ck_assert_int_eq(kill(f->pid, SIGTERM), 0);
        ck_assert_int_eq(fwd_wait(f), 0);
}

/* A TCP connection to 127.0.0.1:port. */
static int dial_local(int port) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect :%d: %s", port,
                      strerror(errno));
        return fd;
}

/* curl's output for url (within 20 s). */
static char *curl(const char *url) {
        char cmd[512], *out = malloc(4096);
        FILE *p;
        size_t n;

        snprintf(cmd, sizeof(cmd), "curl -s --max-time 20 '%s'", url);
        p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        n = fread(out, 1, 4095, p);
        out[n] = '\0';
        pclose(p);
        return out;
}

/* curl through the forward's first listener gets the server's answer. */
static void curl_through(const struct fwd *f, const char *path) {
        char url[256], want[128], *out;

        snprintf(url, sizeof(url), "http://%s%s", f->where[0], path);
        snprintf(want, sizeof(want), "hello %s\n", path);
        out = curl(url);
        ck_assert_msg(strcmp(out, want) == 0, "curl %s: '%s'", url, out);
        free(out);
}

/* 100 connections through the forward at once, each held open until all are: each
 * echoes its own bytes and the count after its half-close. */
static void many_at_once(int port) {
        int fds[100];

        for (int i = 0; i < 100; i++) {
                char text[32];
                fds[i] = dial_local(port);
                snprintf(text, sizeof(text), "ECHO\n%d.", i);
                send_text(fds[i], text);
        }
        for (int i = 0; i < 100; i++) {
                char want[64], *in;
                int n;
                ck_assert_int_eq(shutdown(fds[i], SHUT_WR), 0);
                in = read_to_end(fds[i], NULL);
                n = snprintf(want, sizeof(want), "%d.", i);
                snprintf(want + n, sizeof(want) - (size_t)n, "END %d\n", n);
                ck_assert_str_eq(in, want);
                free(in);
                close(fds[i]);
        }
}

/* After the server said "bye" and ended its side, the client's upload still reaches it. */
static void upload_after_close(sbx_client *c, int port) {
        int fd = dial_local(port);
        char *in;

        rm_after(c);
        send_text(fd, "CLOSE\n");
        in = read_to_end(fd, NULL);
        ck_assert_str_eq(in, "bye\n");
        free(in);
        send_text(fd, "late upload");
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        close(fd);
        in = after_text(c, "web");
        ck_assert_str_eq(in, "late upload");
        free(in);
}

/* Two forwards at once, one on a free port; curl through; 100 connections at once;
 * an upload after the server's end; SIGTERM ends it with 0. */
START_TEST(port_forward_serves) {
        const char *flags[] = {"--max-forwards-per-uid", "256", "--max-connections-per-uid",
                               "512", NULL};
        const char *args[] = {"web", "0:8080", "127.0.0.1:0:8081", NULL};
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, flags, "web");
        struct fwd f;
        char want[64];

        fwd_start(&f, d.sock, 2, args);
        ck_assert_msg(strncmp(f.where[0], "127.0.0.1:", 10) == 0 && f.port[0] > 0, "%s",
                      f.where[0]);
        ck_assert_msg(f.port[1] > 0 && f.port[1] != f.port[0], "%s", f.where[1]);
        curl_through(&f, "/curl");
        many_at_once(f.port[0]);
        upload_after_close(c, f.port[0]);
        {
                int fd = dial_local(f.port[1]);
                char buf[8] = {0};
                ck_assert_int_eq(read_exact(fd, buf, 7), 0);
                snprintf(want, sizeof(want), "banner\n");
                ck_assert_str_eq(buf, want);
                close(fd);
        }
        fwd_stop(&f);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A connection to the Unix socket at path. */
static int dial_unix(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path));
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
                      strerror(errno));
        return fd;
}

/* A port nothing listens on: the connection is closed and stderr names the port, and
 * the forward goes on serving; a Unix socket (mode 0600) forwards; a file that is not a
 * socket is never replaced; the sandbox's end ends the forward with 125, saying so. */
START_TEST(port_forward_failures_and_end) {
        struct it_daemon d;
        sbx_client *c = serving(&d, _i, NULL, "web");
        char path[700], file[700], *in, *err;
        const char *args[] = {"web", "0:9", "--unix", path, NULL};
        const char *bad[] = {"web", "--unix", file, NULL};
        struct stat st;
        struct fwd f, g;
        int fd;

        snprintf(path, sizeof(path), "%s/fwd.sock:8080", it_base_dir());
        snprintf(file, sizeof(file), "%s/plain:8080", it_base_dir());
        fwd_start(&f, d.sock, 2, args);
        for (int i = 0; i < 2; i++) {
                fd = dial_local(f.port[0]);
                in = read_to_end(fd, NULL);
                ck_assert_str_eq(in, "");
                free(in);
                close(fd);
        }
        err = fwd_stderr(&f, IO_MS);
        ck_assert_msg(strstr(err, "UNAVAILABLE") && strstr(err, "port 9"), "%s", err);

        *strrchr(path, ':') = '\0';
        ck_assert_str_eq(f.where[1], path);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        fd = dial_unix(path);
        send_text(fd, "GET /unix HTTP/1.0\n\n");
        expect_http(fd, "/unix");

        *strrchr(file, ':') = '\0';
        close(open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        strcat(file, ":8080");
        fwd_spawn(&g, d.sock, bad);
        ck_assert_int_eq(fwd_wait(&g), 125);
        *strrchr(file, ':') = '\0';
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert(S_ISREG(st.st_mode));

        ck_assert_int_eq(sbx_terminate(c, "web", NULL), SBX_OK);
        ck_assert_int_eq(fwd_wait(&f), 125);
        err = fwd_stderr(&f, 0);
        ck_assert_msg(strstr(err, "SANDBOX_ENDED") && strstr(err, "web"), "%s", err);
        ck_assert_int_ne(access(path, F_OK), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Over ssh:// (a real sshd, `sbx dial-stdio` on the far side): sbx_open_port's streams
 * are socketpairs to ssh children that the client reaps and ends; `sbx port-forward`
 * serves curl (the server's end reaches it) and passes the client's half-close on;
 * every ssh and dial-stdio ends with its client. (An upload after the server's end
 * cannot go over ssh: see sbx_open_port in sbx.h.) */
START_TEST(forward_over_ssh) {
        const char *args[] = {"web", "0:8080", NULL};
        struct it_daemon d;
        struct sshd sd;
        sbx_client *c = serving(&d, 0, NULL, "web"), *r;
        struct fwd f;
        char buf[8] = {0};
        int fds[3];

        sshd_start(&sd, &d);
        r = connect_url(sd.url);
        for (int i = 0; i < 3; i++) {
                fds[i] = open_ok(r, "web", BANNER_PORT, NULL);
                ck_assert_int_eq(read_exact(fds[i], buf, 7), 0);
                ck_assert_str_eq(buf, "banner\n");
        }
        for (int i = 0; i < 3; i++)
                close(fds[i]);
        fds[0] = open_ok(r, "web", PORT, NULL); /* and the three ended are reaped */
        send_text(fds[0], "GET /ssh HTTP/1.0\n\n");
        expect_http(fds[0], "/ssh");
        ck_assert_int_eq(sbx_open_port(r, "web", 9, NULL, &fds[1]), SBX_UNAVAILABLE);
        ck_assert_msg(strstr(sbx_error_message(r), "port 9"), "%s", sbx_error_message(r));
        sbx_close(r);

        fwd_start(&f, sd.url, 1, args);
        curl_through(&f, "/curl-ssh");
        echo_half_closed(dial_local(f.port[0]));
        fwd_stop(&f);
        dial_procs_end(&d);
        sbx_close(c);
        sshd_stop(&sd);
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
        tcase_add_loop_test(tc, port_forward_serves, 0, 2);
        tcase_add_loop_test(tc, port_forward_failures_and_end, 0, 2);
        suite_add_tcase(s, tc);
        tc = tcase_create("ssh");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, ssh_fixture_teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, forward_over_ssh);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
