/* it_daemon.c: integration tests of the daemon core against a real sbxd: Hello through
 * libsbx and sbx, pipelining from many clients, hostile and vanishing clients, the
 * socket's life (stale, taken, removed), shutdown, the records after a SIGKILL, and who
 * may connect (peer groups, the per-uid cap, sandboxed peers, a rootless daemon's
 * users, --socket-group); the sandbox uid ranges of root daemons on one host (distinct
 * when started at once, kept across restarts, --uid-base). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
        /* Killed amid the writes: once some sandboxes are on record (however long the
         * first creates took), while the clients go on. */
        for (double t0 = it_now_ms(); it_db_int(&d, "SELECT count(*) FROM sandboxes") < CLIENTS;
             usleep(20000))
                ck_assert_msg(it_now_ms() - t0 < 30000, "%d sandboxes on record after 30 s",
                              it_db_int(&d, "SELECT count(*) FROM sandboxes"));
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

/* ---- who may connect ------------------------------------------------------------------ */

/* Identities for forked clients: no user or group of the host needs to have them. */
enum {
        UID_A = 61001,
        UID_B = 61002,
        GRP_1 = 61101,
        GRP_2 = 61102,
        GRP_SOCK = 61200,
        NOBODY = 65534,
};

/* In a forked child: takes uid (as gid too) and groups for good, and dies with the test
 * process (the death signal is cleared by a change of uid, so it is set after). Exits
 * 120 when it cannot. */
static void become(uid_t uid, const gid_t *groups, size_t n, pid_t parent) {
        if (setgroups(n, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
            setresuid(uid, uid, uid) < 0)
                _exit(120);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(121);
}

/* Connects to path: the fd, or -errno (no test failure: children use it). */
static int try_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

        if (fd < 0)
                return -errno;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                err = errno;
                close(fd);
                return -err;
        }
        return fd;
}

/* Sends a Hello on fd and reads the answer: 1 when it is an OK Hello for id. */
static int hello_ok(int fd, uint64_t id) {
        struct frame_reader r;
        Sbx__V1__Response *resp;
        int ok;

        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        send_hello(fd, id);
        resp = it_raw_read(fd, &r, 10000);
        ok = resp && resp->request_id == id && resp->status &&
             resp->status->code == SBX__V1__CODE__OK &&
             resp->body_case == SBX__V1__RESPONSE__BODY_HELLO;
        if (resp)
                sbx__v1__response__free_unpacked(resp, NULL);
        frame_reader_free(&r);
        return ok;
}

/* Reads what a refused connection gets: 1 when it is one status with request id 0,
 * code and a message containing text, then the end of the stream. The Hello sent first
 * must go unanswered. */
static int refused_with(int fd, Sbx__V1__Code code, const char *text) {
        struct frame_reader r;
        Sbx__V1__Response *resp;
        int ok;

        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        /* The daemon may already have shut the connection; the Hello may not get in. */
        {
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
                uint8_t *buf;
                size_t len;
                req.has_request_id = 1;
                req.request_id = 9;
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &h;
                if (frame_pack(&req.base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len) == 0) {
                        (void)!send(fd, buf, len, MSG_NOSIGNAL);
                        free(buf);
                }
        }
        resp = it_raw_read(fd, &r, 10000);
        ok = resp && resp->request_id == 0 && resp->status && resp->status->code == code &&
             resp->status->message && strstr(resp->status->message, text);
        if (resp && !ok)
                fprintf(stderr, "refusal: req %llu code %d '%s'\n",
                        (unsigned long long)resp->request_id,
                        resp->status ? (int)resp->status->code : -1,
                        resp->status && resp->status->message ? resp->status->message : "");
        if (resp)
                sbx__v1__response__free_unpacked(resp, NULL);
        if (ok && (resp = it_raw_read(fd, &r, 10000))) {
                sbx__v1__response__free_unpacked(resp, NULL);
                ok = 0; /* more than the refusal */
        }
        frame_reader_free(&r);
        return ok;
}

/* Waits for child pid (it has a bound of its own) and returns its exit code, or
 * 256 + signal. */
static int child_status(pid_t pid) {
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

/* The daemon's log (NUL-terminated, freed by the caller). */
static char *read_log(const struct it_daemon *d) {
        FILE *f = fopen(d->log, "re");
        char *buf = calloc(1, 4 << 20);
        size_t n;
        ck_assert_ptr_nonnull(f);
        n = fread(buf, 1, (4 << 20) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* A client as uid with groups: Hello answered, exit 0; else exit 1. */
static pid_t hello_client(const struct it_daemon *d, uid_t uid, const gid_t *groups, size_t n) {
        pid_t parent = getpid(), pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd;
                become(uid, groups, n, parent);
                fd = try_connect(d->sock);
                _exit(fd >= 0 && hello_ok(fd, 1) ? 0 : 1);
        }
        return pid;
}

/* A client as uid that expects to be refused with code and text: exit 0 when it is. */
static pid_t refused_client(const struct it_daemon *d, uid_t uid, Sbx__V1__Code code,
                            const char *text) {
        pid_t parent = getpid(), pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd;
                become(uid, NULL, 0, parent);
                fd = try_connect(d->sock);
                if (fd < 0)
                        _exit(2);
                _exit(refused_with(fd, code, text) ? 0 : 1);
        }
        return pid;
}

/* The daemon reads each peer's supplementary groups (SO_PEERGROUPS, at connect time),
 * past its first buffer too; they show in its debug log. */
START_TEST(peer_groups_are_read) {
        enum { MANY = 300 };
        struct it_daemon d;
        gid_t two[2] = {GRP_1, GRP_2}, many[MANY];
        char want[200], *log;
        pid_t a, b;
        int i;

        for (i = 0; i < MANY; i++)
                many[i] = (gid_t)(62000 + i);
        it_daemon_start(&d, NULL);
        ck_assert_int_eq(chmod(d.sock, 0666), 0);
        a = hello_client(&d, UID_A, two, 2);
        ck_assert_int_eq(child_status(a), 0);
        b = hello_client(&d, UID_B, many, MANY);
        ck_assert_int_eq(child_status(b), 0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        log = read_log(&d);
        snprintf(want, sizeof(want), "(uid=%d gid=%d pid=%d groups=2(%d,%d))", UID_A, UID_A, (int)a,
                 GRP_1, GRP_2);
        ck_assert_msg(strstr(log, want), "no '%s' in the log", want);
        snprintf(want, sizeof(want), "(uid=%d gid=%d pid=%d groups=%d(62000,62001,", UID_B, UID_B,
                 (int)b, MANY);
        ck_assert_msg(strstr(log, want), "no '%s' in the log", want);
        free(log);
}
END_TEST

/* One uid cannot take every connection: with --max-connections-per-uid 3, uid A's
 * fourth is refused (RESOURCE_EXHAUSTED, the cap named) while uid B is served; once A
 * closes one, A connects again. Root is held to the cap like anyone. */
START_TEST(connection_cap_per_uid) {
        const char *flags[] = {"--max-connections-per-uid", "3", NULL};
        struct it_daemon d;
        gid_t groups[2] = {GRP_1, GRP_2};
        int ctl[2], rep[2], fds[3], fd, i;
        struct pollfd p;
        char byte = 0, *log, want[200];
        pid_t a, b, parent = getpid();

        it_daemon_start(&d, flags);
        ck_assert_int_eq(chmod(d.sock, 0666), 0);
        ck_assert_int_eq(pipe2(ctl, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
        a = fork();
        ck_assert_int_ge(a, 0);
        if (a == 0) {
                char msg[200];
                close(ctl[1]);
                close(rep[0]);
                become(UID_A, groups, 2, parent);
                for (i = 0; i < 3; i++) {
                        fds[i] = try_connect(d.sock);
                        if (fds[i] < 0 || !hello_ok(fds[i], (uint64_t)i + 1))
                                _exit(10 + i);
                }
                snprintf(msg, sizeof(msg),
                         "uid %d has 3 connections open, the daemon's maximum per user "
                         "(--max-connections-per-uid 3); close idle clients",
                         UID_A);
                fd = try_connect(d.sock);
                if (fd < 0 || !refused_with(fd, SBX__V1__CODE__RESOURCE_EXHAUSTED, msg))
                        _exit(20);
                close(fd);
                /* The three are still served. */
                for (i = 0; i < 3; i++)
                        if (!hello_ok(fds[i], 10 + (uint64_t)i))
                                _exit(21);
                if (write(rep[1], "1", 1) != 1 || read(ctl[0], &byte, 1) != 1)
                        _exit(30);
                close(fds[0]);
                /* The daemon sees the close soon, not at once: try again for 10 s. */
                for (i = 0; i < 200; i++) {
                        fd = try_connect(d.sock);
                        if (fd >= 0 && hello_ok(fd, 40))
                                _exit(0);
                        if (fd >= 0)
                                close(fd);
                        usleep(50000);
                }
                _exit(31);
        }
        close(ctl[0]);
        close(rep[1]);
        p.fd = rep[0];
        p.events = POLLIN;
        if (poll(&p, 1, 30000) != 1 || read(rep[0], &byte, 1) != 1) {
                kill(a, SIGKILL);
                ck_abort_msg("uid A's clients failed: exit %d", child_status(a));
        }
        /* A holds its three: B is served, root is not held back by A's count. */
        b = hello_client(&d, UID_B, NULL, 0);
        ck_assert_int_eq(child_status(b), 0);
        ck_assert_int_eq(write(ctl[1], "g", 1), 1);
        ck_assert_int_eq(child_status(a), 0);
        close(ctl[1]);
        close(rep[0]);

        /* Root counts too. */
        for (i = 0; i < 3; i++) {
                fds[i] = it_raw_connect(&d);
                ck_assert(hello_ok(fds[i], 1));
        }
        fd = it_raw_connect(&d);
        ck_assert(refused_with(fd, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                               "uid 0 has 3 connections open"));
        close(fd);
        for (i = 0; i < 3; i++)
                close(fds[i]);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        log = read_log(&d);
        snprintf(want, sizeof(want), "(uid=%d gid=%d pid=%d groups=2(%d,%d))", UID_A, UID_A, (int)a,
                 GRP_1, GRP_2);
        ck_assert_msg(strstr(log, want), "no '%s' in the log", want);
        ck_assert_ptr_nonnull(strstr(log, "refused (uid=61001"));
        free(log);
}
END_TEST

/* A process of a sandbox is refused: by uid for a root daemon's commands (the sandbox
 * uid range), and by PID namespace for anything in a sandbox, even root. A client in
 * the daemon's own PID namespace is still served. */
/* A refused connection's reason reaches a libsbx caller whose request write already
 * failed (the daemon closes right after its one status): not 'connection closed'. */
START_TEST(refusal_reason_reaches_libsbx) {
        const char *flags[] = {"--max-connections-per-uid", "1", "--warm", "0", NULL};
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct it_daemon d;
        sbx_client *c = NULL;
        int held, i;

        it_daemon_start(&d, flags);
        /* The one connection allowed, once it is served (the start-up probe's may still
         * count for a moment). */
        for (i = 0;; i++) {
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
                struct frame_reader fr;
                Sbx__V1__Response *resp;
                int ok;

                held = it_raw_connect(&d);
                req.has_request_id = 1;
                req.request_id = 1;
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &h;
                it_raw_send(held, &req);
                frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
                resp = it_raw_read(held, &fr, 5000);
                ok = resp && resp->body_case == SBX__V1__RESPONSE__BODY_HELLO;
                if (resp)
                        sbx__v1__response__free_unpacked(resp, NULL);
                frame_reader_free(&fr);
                if (ok)
                        break;
                close(held);
                ck_assert_int_lt(i, 100);
                usleep(20000);
        }
        for (i = 0; i < 5; i++) {
                enum sbx_code rc = sbx_connect(d.sock, "refused", &c);
                if (rc == SBX_OK) {
                        sbx_create_opts_init(&o);
                        rc = sbx_create(c, &o, &sb);
                }
                ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED, "try %d: %s: %s", i, sbx_code_name(rc),
                              c ? sbx_error_message(c) : "");
                ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "--max-connections-per-uid 1"));
                sbx_close(c);
                c = NULL;
        }
        close(held);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(sandboxed_peers_are_refused) {
        struct it_daemon d;
        sbx_client *c;
        char *id, cmd[200], marker[64];
        pid_t k, holder = -1;
        struct sbx_result *res;
        int fd, i;

        it_daemon_start(&d, NULL);
        ck_assert_int_eq(chmod(d.sock, 0666), 0);
        k = refused_client(&d, it_sandbox_uid_first(&d) + 5, SBX__V1__CODE__PERMISSION_DENIED,
                           "connections from sandboxed processes are refused");
        ck_assert_int_eq(child_status(k), 0);
        /* Just below and above the ranges root daemons take: ordinary users. */
        k = hello_client(&d, SBX_UID_BASE - 1, NULL, 0);
        ck_assert_int_eq(child_status(k), 0);
        k = hello_client(&d, SBX_UID_BASE + SBX_UID_RANGES * SBX_UID_COUNT, NULL, 0);
        ck_assert_int_eq(child_status(k), 0);

        /* A root process that joined a sandbox's PID namespace. */
        c = it_connect(&d);
        id = it_create(c, NULL);
        snprintf(marker, sizeof(marker), "sleep 91.%d", (int)getpid() % 100000);
        snprintf(cmd, sizeof(cmd), "setsid %s </dev/null >/dev/null 2>&1 &", marker);
        res = it_sh(c, id, 10000, cmd);
        sbx_result_free(res);
        for (i = 0; i < 200 && (holder = it_find_proc("sleep ", marker)) < 0; i++)
                usleep(20000);
        ck_assert_int_gt(holder, 0);
        k = fork();
        ck_assert_int_ge(k, 0);
        if (k == 0) {
                char ns[64];
                pid_t inside;
                int nsfd, st;
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                snprintf(ns, sizeof(ns), "/proc/%d/ns/pid", (int)holder);
                nsfd = open(ns, O_RDONLY | O_CLOEXEC);
                if (nsfd < 0 || setns(nsfd, CLONE_NEWPID) < 0)
                        _exit(90);
                /* Its children are born in the sandbox's PID namespace. */
                inside = fork();
                if (inside < 0)
                        _exit(91);
                if (inside == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        fd = try_connect(d.sock);
                        if (fd < 0)
                                _exit(2);
                        _exit(refused_with(fd, SBX__V1__CODE__PERMISSION_DENIED,
                                           "connections from sandboxed processes are refused")
                                      ? 0
                                      : 1);
                }
                if (waitpid(inside, &st, 0) != inside)
                        _exit(92);
                _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 93);
        }
        ck_assert_int_eq(child_status(k), 0);
        /* Still served: the test itself, from the daemon's PID namespace. */
        fd = it_raw_connect(&d);
        ck_assert(hello_ok(fd, 3));
        close(fd);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless daemon serves its own uid and root, and refuses every other user: it could
 * act for them only with its own rights. */
START_TEST(rootless_serves_only_its_user) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_hello *h = NULL;
        char want[120];
        pid_t k;

        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        /* The socket is 0660 nobody:nogroup: open it up, so that only the daemon decides. */
        ck_assert_int_eq(chmod(d.sock, 0666), 0);
        snprintf(want, sizeof(want),
                 "this sbxd runs as uid %d without privileges and serves only that user", NOBODY);
        k = refused_client(&d, UID_A, SBX__V1__CODE__PERMISSION_DENIED, want);
        ck_assert_int_eq(child_status(k), 0);
        k = hello_client(&d, NOBODY, NULL, 0);
        ck_assert_int_eq(child_status(k), 0);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert(h->rootless);
        sbx_hello_free(h);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client as uid A with groups that expects connect() to fail with EACCES: exit 0. */
static pid_t denied_client(const struct it_daemon *d, const gid_t *groups, size_t n) {
        pid_t parent = getpid(), pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd;
                become(UID_A, groups, n, parent);
                fd = try_connect(d->sock);
                _exit(fd == -EACCES ? 0 : 1);
        }
        return pid;
}

/* The socket and its directory as a client of group gid sees them: members are served,
 * others cannot connect. */
static void expect_group_access(const struct it_daemon *d) {
        gid_t member[1] = {GRP_SOCK}, other[1] = {GRP_1};
        struct stat st;

        ck_assert_int_eq(lstat(d->sock, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(st.st_gid, GRP_SOCK);
        ck_assert_uint_eq(st.st_mode & 07777, 0660);
        ck_assert_int_eq(child_status(hello_client(d, UID_A, member, 1)), 0);
        ck_assert_int_eq(child_status(denied_client(d, other, 1)), 0);
        ck_assert_int_eq(child_status(denied_client(d, NULL, 0)), 0);
}

/* --socket-group: the socket is the group's (mode 0660), and so is its directory when
 * it is the daemon's own; a directory that is not is left as it is. */
START_TEST(socket_group) {
        const char *flags[] = {"--socket-group", "61200", NULL};
        struct it_daemon d;
        struct stat st;
        char run[560], *log;

        /* In the test's directory, which holds more than the socket: left as it is. */
        it_daemon_start(&d, flags);
        expect_group_access(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(stat(d.dir, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_uint_eq(st.st_gid, 0);

        /* In a directory the daemon creates: (root, group) 0750. */
        ck_assert_int_lt(snprintf(run, sizeof(run), "%s/run", d.dir), 500);
        snprintf(d.sock, sizeof(d.sock), "%s/sbxd.sock", run);
        it_daemon_restart(&d, flags);
        ck_assert_int_eq(stat(run, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0750);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(st.st_gid, GRP_SOCK);
        expect_group_access(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        /* The same directory from an earlier run (the daemon's, holding nothing else). */
        ck_assert_int_eq(chown(run, 0, 0), 0);
        ck_assert_int_eq(chmod(run, 0755), 0);
        it_daemon_restart(&d, flags);
        ck_assert_int_eq(stat(run, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0750);
        ck_assert_uint_eq(st.st_gid, GRP_SOCK);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        /* Another user's directory is never changed: a warning says why members cannot
         * reach the socket. */
        ck_assert_int_eq(chown(run, UID_B, UID_B), 0);
        ck_assert_int_eq(chmod(run, 0700), 0);
        it_daemon_restart(&d, flags);
        ck_assert_int_eq(stat(run, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_uint_eq(st.st_uid, UID_B);
        ck_assert_uint_eq(st.st_gid, UID_B);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        log = read_log(&d);
        ck_assert_ptr_nonnull(strstr(log, "members of group 61200 cannot reach the socket"));
        free(log);
}
END_TEST

/* ---- sandbox uids across root daemons ------------------------------------------------ */

enum { N_DAEMONS = 3, N_SANDBOXES = 2 };

static const char sandboxed_refusal[] = "connections from sandboxed processes are refused";

/* A new sandbox of c's daemon (left running; its id in *ret_id when asked, freed by the
 * caller): the uid its commands run as (`id -u`). */
static uint32_t new_sandbox_uid(sbx_client *c, char **ret_id) {
        char *id = it_create(c, NULL), *end;
        struct sbx_result *r = it_sh(c, id, 30000, "id -u");
        unsigned long u = strtoul((const char *)r->stdout_data, &end, 10);

        ck_assert_msg(r->exit_code == 0 && end != (const char *)r->stdout_data,
                      "id -u: exit %d, '%s'", r->exit_code, (const char *)r->stdout_data);
        sbx_result_free(r);
        if (ret_id)
                *ret_id = id;
        else
                free(id);
        return (uint32_t)u;
}

/* d's Hello (freed by the caller). */
static struct sbx_hello *hello_of(struct it_daemon *d) {
        sbx_client *c = it_connect(d);
        struct sbx_hello *h = NULL, *copy;

        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        copy = h;
        sbx_close(c);
        return copy;
}

static int ranges_overlap(uint32_t a, uint32_t b) {
        return a < b ? b - a < SBX_UID_COUNT : a - b < SBX_UID_COUNT;
}

/* Root daemons started at once on different state directories (as test suites do)
 * never give one uid to two sandboxes: each has a range of its own, which its Hello
 * names, and each refuses connections from the others' sandbox uids. */
START_TEST(root_daemons_started_at_once_get_distinct_uids) {
        const char *flags[] = {"--warm", "0", "--spares", "0", NULL};
        struct it_daemon d[N_DAEMONS];
        uint32_t uids[N_DAEMONS][N_SANDBOXES], first[N_DAEMONS];
        int i, j, k, l;

        for (i = 0; i < N_DAEMONS; i++)
                it_daemon_spawn_as(&d[i], 0, 0, flags);
        for (i = 0; i < N_DAEMONS; i++) {
                sbx_client *c;
                it_daemon_wait_up(&d[i]);
                ck_assert_int_eq(chmod(d[i].sock, 0666), 0);
                c = it_connect(&d[i]);
                for (j = 0; j < N_SANDBOXES; j++)
                        uids[i][j] = new_sandbox_uid(c, NULL);
                sbx_close(c);
        }
        for (i = 0; i < N_DAEMONS; i++)
                for (j = 0; j < N_SANDBOXES; j++)
                        for (k = 0; k < i; k++)
                                for (l = 0; l < N_SANDBOXES; l++)
                                        ck_assert_msg(uids[i][j] != uids[k][l],
                                                      "daemons %d and %d both run a sandbox "
                                                      "as uid %u",
                                                      k, i, uids[i][j]);
        for (i = 0; i < N_DAEMONS; i++) {
                struct sbx_hello *h = hello_of(&d[i]);
                ck_assert_uint_eq(h->sandbox_uid_count, SBX_UID_COUNT);
                first[i] = h->sandbox_uid_first;
                sbx_hello_free(h);
                for (j = 0; j < N_SANDBOXES; j++)
                        ck_assert(uids[i][j] - first[i] < SBX_UID_COUNT);
                for (k = 0; k < i; k++)
                        ck_assert_msg(!ranges_overlap(first[i], first[k]),
                                      "ranges from %u and %u overlap", first[k], first[i]);
        }
        for (i = 0; i < N_DAEMONS; i++)
                for (k = 0; k < N_DAEMONS; k++)
                        if (k != i)
                                ck_assert_int_eq(
                                        child_status(refused_client(
                                                &d[i], uids[k][1], SBX__V1__CODE__PERMISSION_DENIED,
                                                sandboxed_refusal)),
                                        0);
        for (i = 0; i < N_DAEMONS; i++)
                ck_assert_int_eq(it_daemon_stop(&d[i]), 0);
}
END_TEST

/* The line of `sbx doctor` (run against d) for the check name, kept; fails the test
 * when there is none. */
static char *doctor_line(struct it_daemon *d, const char *name) {
        const char *args[] = {"doctor", NULL};
        char *out = NULL, *line, want[64];
        size_t n;

        (void)it_sbx(d, NULL, 0, &out, NULL, args);
        snprintf(want, sizeof(want), "  %s ", name);
        line = strstr(out, want);
        ck_assert_msg(line, "no %s check in:\n%s", name, out);
        while (line > out && line[-1] != '\n')
                line--;
        n = strcspn(line, "\n");
        line = strndup(line, n);
        free(out);
        return line;
}

/* A daemon keeps its range: killed, its range stays its state directory's (a fresh
 * daemon takes another, and refuses the killed one's sandbox uids, whose sandbox still
 * runs), and started again it takes the same range, says so (Hello, sbx doctor), and
 * adopts its sandbox with its uid. A daemon that never gave a uid gives its range up
 * when it stops. */
START_TEST(restart_keeps_the_uid_range) {
        const char *flags[] = {"--warm", "1", "--spares", "0", NULL};
        struct it_daemon a, b, e;
        struct sbx_hello *h;
        struct sbx_result *r;
        sbx_client *c;
        uint32_t first, uid;
        char *id, *line, want[1024], reservation[300];

        it_daemon_start(&a, flags);
        h = hello_of(&a);
        first = h->sandbox_uid_first;
        ck_assert_str_eq(h->uid_origin, "picked");
        snprintf(want, sizeof(want), "sandbox uids: %u-%u, reserved in %s (the first free range",
                 first, first + SBX_UID_COUNT - 1, h->uid_reservation);
        sbx_hello_free(h);
        line = doctor_line(&a, "uids");
        ck_assert_msg(strncmp(line, "ok", 2) == 0 && strstr(line, want), "%s", line);
        snprintf(want, sizeof(want), "held by the sbxd of pid %d, state directory %s", (int)a.pid,
                 a.state);
        ck_assert_msg(strstr(line, want), "%s", line);
        free(line);
        c = it_connect(&a);
        uid = new_sandbox_uid(c, &id);
        sbx_close(c);
        ck_assert(uid - first < SBX_UID_COUNT);

        it_daemon_kill(&a);
        it_daemon_start(&b, flags);
        h = hello_of(&b);
        ck_assert_msg(!ranges_overlap(h->sandbox_uid_first, first),
                      "a fresh daemon took %u, the killed one's range", h->sandbox_uid_first);
        sbx_hello_free(h);
        ck_assert_int_eq(chmod(b.sock, 0666), 0);
        ck_assert_int_eq(child_status(refused_client(&b, uid, SBX__V1__CODE__PERMISSION_DENIED,
                                                     sandboxed_refusal)),
                         0);

        it_daemon_restart(&a, flags);
        h = hello_of(&a);
        ck_assert_uint_eq(h->sandbox_uid_first, first);
        ck_assert_str_eq(h->uid_origin, "recorded");
        sbx_hello_free(h);
        line = doctor_line(&a, "uids");
        ck_assert_msg(strstr(line, "(the state directory's own record, from an earlier start)"),
                      "%s", line);
        free(line);
        c = it_connect(&a);
        r = it_sh(c, id, 30000, "id -u");
        ck_assert_uint_eq(strtoul((const char *)r->stdout_data, NULL, 10), uid);
        sbx_result_free(r);
        sbx_close(c);
        free(id);
        ck_assert_int_eq(it_daemon_stop(&a), 0);
        ck_assert_int_eq(it_daemon_stop(&b), 0);

        /* No uid given: nothing is kept. */
        it_daemon_start(&e, flags);
        h = hello_of(&e);
        snprintf(reservation, sizeof(reservation), "%s", h->uid_reservation);
        sbx_hello_free(h);
        ck_assert_int_eq(access(reservation, F_OK), 0);
        ck_assert_int_eq(it_daemon_stop(&e), 0);
        ck_assert_int_eq(access(reservation, F_OK), -1);
        snprintf(want, sizeof(want), "%s/uid-range", e.state);
        ck_assert_int_eq(access(want, F_OK), -1);
}
END_TEST

/* --uid-base: the daemon's sandboxes run from that uid (outside the ranges daemons pick
 * from), every other root daemon refuses them too, and a daemon asking for a range that
 * overlaps it is refused at start-up, naming the daemon that holds it. A rootless
 * daemon has no range to set. */
/* Entries of the directory path (not . and ..), -1 when it cannot be read. */
static int entries_of(const char *path) {
        struct dirent *de;
        DIR *dir = opendir(path);
        int n = 0;

        if (!dir)
                return -1;
        while ((de = readdir(dir)))
                n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(dir);
        return n;
}

/* A shutdown waits a few seconds at most for the deletion of what its sandboxes left (a
 * workspace of a million files takes rm tens of seconds): here the rm is held stopped,
 * the daemon still exits within the grace (5 s) and some, says it stopped deleting, and
 * the next start deletes what was left in STATE/trash. */
START_TEST(shutdown_does_not_wait_for_a_slow_delete) {
        const char *flags[] = {"--warm", "0", "--spares", "0", NULL};
        struct it_daemon d;
        struct sbx_result *r;
        char trash[700], *id;
        double t0, took;
        pid_t rm = -1, watchdog;
        int rm_pidfd;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        id = it_create(c, "big");
        r = it_sh(c, id, 120000, "mkdir /workspace/d && cd /workspace/d && seq 60000 | xargs touch");
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        sbx_close(c);
        snprintf(trash, sizeof(trash), "%s/trash", d.state);
        ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
        t0 = it_now_ms();
        /* The sandbox ends, its workspace goes to the trash and an rm of it starts: held. */
        while (rm < 0 && it_now_ms() - t0 < 30000) {
                rm = it_find_proc("rm", trash);
                if (rm < 0)
                        usleep(500);
        }
        ck_assert_msg(rm > 0, "no rm of %s was seen", trash);
        rm_pidfd = (int)syscall(SYS_pidfd_open, rm, 0);
        ck_assert_int_ge(rm_pidfd, 0);
        ck_assert_int_eq(kill(rm, SIGSTOP), 0);
        /* Should the daemon not end it (this test failing), the held rm is not left
         * stopped for good: a watchdog of the test's ends it after 60 s. */
        watchdog = fork();
        ck_assert_int_ge(watchdog, 0);
        if (watchdog == 0) {
                sleep(60);
                (void)syscall(SYS_pidfd_send_signal, rm_pidfd, SIGKILL, NULL, 0);
                _exit(0);
        }
        /* One more SIGTERM meanwhile is no harm (not a death by signal). */
        usleep(300000);
        ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
        ck_assert_int_eq(it_daemon_exit_status(&d), 0);
        took = it_now_ms() - t0;
        fprintf(stderr, "shutdown_does_not_wait_for_a_slow_delete: the daemon exited %.0f ms after "
                        "SIGTERM\n", took);
        ck_assert_msg(took < 5000 + 10000, "the daemon took %.0f ms to exit", took);
        ck_assert_int_eq(it_log_count(&d, "stopped deleting"), 1);
        ck_assert_int_eq(kill(rm, 0), -1); /* killed and reaped by the daemon */
        ck_assert_int_eq(errno, ESRCH);
        ck_assert_int_gt(entries_of(trash), 0);
        kill(watchdog, SIGKILL);
        waitpid(watchdog, NULL, 0);
        close(rm_pidfd);
        it_daemon_restart(&d, flags);
        t0 = it_now_ms();
        while (entries_of(trash) != 0 && it_now_ms() - t0 < 60000)
                usleep(20000);
        ck_assert_int_eq(entries_of(trash), 0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(id);
}
END_TEST

START_TEST(uid_base_sets_the_range) {
        const char *fixed[] = {"--uid-base", "1900000000", "--warm", "0", "--spares", "0", NULL};
        const char *overlap[] = {"--uid-base", "1900065535", NULL};
        const char *in_images[] = {"--uid-base", "2147418113", NULL};
        const char *flags[] = {"--warm", "0", "--spares", "0", NULL};
        struct it_daemon a, b, x;
        struct sbx_hello *h;
        sbx_client *c;
        uint32_t ua, ub;
        char want[1024], *log;

        it_daemon_start(&a, fixed);
        it_daemon_start(&b, flags);
        h = hello_of(&a);
        ck_assert_uint_eq(h->sandbox_uid_first, 1900000000u);
        ck_assert_str_eq(h->uid_origin, "flag");
        sbx_hello_free(h);
        c = it_connect(&a);
        ua = new_sandbox_uid(c, NULL);
        sbx_close(c);
        ck_assert_uint_eq(ua, 1900000000u);
        c = it_connect(&b);
        ub = new_sandbox_uid(c, NULL);
        sbx_close(c);
        ck_assert_int_eq(chmod(a.sock, 0666), 0);
        ck_assert_int_eq(chmod(b.sock, 0666), 0);
        ck_assert_int_eq(child_status(refused_client(&b, ua + 7, SBX__V1__CODE__PERMISSION_DENIED,
                                                     sandboxed_refusal)),
                         0);
        ck_assert_int_eq(child_status(refused_client(&a, ub, SBX__V1__CODE__PERMISSION_DENIED,
                                                     sandboxed_refusal)),
                         0);
        /* Next to the range: an ordinary user, for both. */
        ck_assert_int_eq(child_status(hello_client(&b, 1900000000u + SBX_UID_COUNT, NULL, 0)), 0);
        ck_assert_int_eq(child_status(hello_client(&a, 1899999999u, NULL, 0)), 0);

        it_daemon_spawn_as(&x, 0, 0, overlap);
        ck_assert_int_eq(it_daemon_exit_status(&x), 1);
        log = read_log(&x);
        snprintf(want, sizeof(want),
                 "sandbox uids 1900065535-1900131070 overlap 1900000000-1900065535, reserved by "
                 "the sbxd of pid %d (state directory %s)",
                 (int)a.pid, a.state);
        ck_assert_msg(strstr(log, want), "no '%s' in:\n%s", want, log);
        free(log);
        ck_assert_int_eq(it_daemon_stop(&a), 0);
        ck_assert_int_eq(it_daemon_stop(&b), 0);

        it_daemon_spawn_as(&x, NOBODY, NOBODY, fixed);
        ck_assert_int_eq(it_daemon_exit_status(&x), 1);
        log = read_log(&x);
        ck_assert_ptr_nonnull(strstr(log, "--uid-base: a rootless sbxd runs sandboxes as its own "
                                          "user and has no uid range"));
        free(log);

        /* Not in the image sandboxes' ids. */
        it_daemon_spawn_as(&x, 0, 0, in_images);
        ck_assert_int_eq(it_daemon_exit_status(&x), 1);
        log = read_log(&x);
        ck_assert_msg(strstr(log, "--uid-base: 2147418113-2147483648 would overlap the ids of "
                                  "image sandboxes (from 2147483648)"),
                      "%s", log);
        free(log);
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
        tcase_add_test(tc, peer_groups_are_read);
        tcase_add_test(tc, connection_cap_per_uid);
        tcase_add_test(tc, refusal_reason_reaches_libsbx);
        tcase_add_test(tc, sandboxed_peers_are_refused);
        tcase_add_test(tc, rootless_serves_only_its_user);
        tcase_add_test(tc, socket_group);
        tcase_add_test(tc, root_daemons_started_at_once_get_distinct_uids);
        tcase_add_test(tc, restart_keeps_the_uid_range);
        tcase_add_test(tc, uid_base_sets_the_range);
        tcase_add_test(tc, shutdown_does_not_wait_for_a_slow_delete);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
