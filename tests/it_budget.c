/* it_budget.c: one user at a budget of the daemon leaves the others their service.
 *
 * A root daemon shared by the socket group 3100; BOB (uid 3202, no passwd entry) is a
 * member and acts in a child the test forks, which takes his uid and groups for good
 * and reports what it saw as text on a pipe; root is the other user (its own budget).
 * Small bounds make each budget reachable in moments: --max-frame-bytes 4 MiB,
 * --max-buffered 64 MiB of which one uid 16 MiB, --max-sandboxes 8 (2 per uid).
 *  - kept output: BOB's background commands keep at most his share, a result cut by it
 *    says so, root's command keeps all it asked for, and the share comes back when
 *    BOB's sandbox ends;
 *  - stdin: RunCommand.stdin not yet taken by BOB's commands is held for him, and the
 *    one past his share is refused naming the bound; root's is not;
 *  - partly received requests: BOB's connections that stall in the middle of a large
 *    frame hold at most his share (the next are refused naming the bound), the daemon's
 *    memory grows by no more, root creates and runs meanwhile, and --frame-timeout
 *    closes the stalled ones, after which BOB has his share again;
 *  - sandboxes: by default one uid owns at most a quarter of --max-sandboxes.
 * Each test stops its daemon; the base directory (/var/tmp, so that BOB can reach it)
 * is removed by the fixture. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asbob.h"
#include "frame.h"
#include "itutil.h"
#include "sbx.pb-c.h"
#include "testutil.h"

#define MIB      (1024u * 1024u)
#define CMD_MS   60000u

static const char *const small_flags[] = {"--socket-group",
                                          "3100",
                                          "--max-frame-bytes",
                                          "4194304",
                                          "--max-buffered",
                                          "64M",
                                          "--max-buffered-per-uid",
                                          "16M",
                                          "--max-sandboxes",
                                          "8",
                                          "--warm",
                                          "0",
                                          "--spares",
                                          "0",
                                          "--frame-timeout",
                                          "3",
                                          NULL};

/* ---- kept output ------------------------------------------------------------------------ */

#define BG_N 6

/* Six background commands printing 8 MiB each, kept up to 8 MiB each: more than his
 * 16 MiB share. Waits until all have ended, then reports each one's kept bytes, its
 * count, and whether its warnings name the bound. */
static void bob_background(struct it_daemon *d, struct report *r) {
        char *ids[BG_N] = {0};
        sbx_client *c = bob_connect(d, r);
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        int i, ended = 0;
        double t0;

        if (!c)
                return;
        sbx_create_opts_init(&co);
        co.id = "bob-out";
        if (sbx_create(c, &co, &sb) != SBX_OK) {
                say(r, "create-failed %s\n", sbx_error_message(c));
                return;
        }
        sbx_sandbox_free(sb);
        for (i = 0; i < BG_N; i++) {
                struct sbx_exec_opts o;
                struct sbx_background *b = NULL;
                sbx_exec_opts_init(&o);
                o.shell = "head -c 8388608 /dev/zero";
                o.max_stdout_bytes = 8 * MIB;
                o.timeout_ms = CMD_MS;
                if (sbx_exec_background(c, "bob-out", &o, &b) != SBX_OK) {
                        say(r, "bg-failed %s\n", sbx_error_message(c));
                        return;
                }
                ids[i] = strdup(b->command_id);
                sbx_background_free(b);
        }
        t0 = it_now_ms();
        while (ended < BG_N && it_now_ms() - t0 < 60000) {
                ended = 0;
                for (i = 0; i < BG_N; i++) {
                        struct sbx_attach_opts a = {.command_id = ids[i],
                                                    .max_output_bytes = 8 * MIB};
                        struct sbx_result *res = NULL;
                        if (sbx_attach(c, "bob-out", &a, &res) == SBX_OK &&
                            res->outcome != SBX_OUTCOME_RUNNING)
                                ended++;
                        sbx_result_free(res);
                }
                usleep(50000);
        }
        for (i = 0; i < BG_N; i++) {
                struct sbx_attach_opts a = {.command_id = ids[i], .max_output_bytes = 8 * MIB};
                struct sbx_result *res = NULL;
                int named = 0;
                if (sbx_attach(c, "bob-out", &a, &res) != SBX_OK) {
                        say(r, "attach-failed %s\n", sbx_error_message(c));
                        continue;
                }
                for (size_t w = 0; w < res->warnings.n; w++)
                        named |= strstr(res->warnings.v[w], "--max-buffered-per-uid") != NULL;
                say(r, "result %s kept %zu of %llu named %d outcome %d\n", ids[i], res->stdout_len,
                    (unsigned long long)res->stdout_bytes, named, (int)res->outcome);
                sbx_result_free(res);
                free(ids[i]);
        }
        sbx_close(c);
}

/* After his sandbox ended: one command of 8 MiB keeps all of it again. */
static void bob_after(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_exec_opts o;
        struct sbx_result *res = NULL;

        if (!c)
                return;
        if (sbx_terminate(c, "bob-out", NULL) != SBX_OK)
                say(r, "terminate-failed %s\n", sbx_error_message(c));
        sbx_exec_opts_init(&o);
        o.shell = "head -c 8388608 /dev/zero";
        o.max_stdout_bytes = 8 * MIB;
        o.timeout_ms = CMD_MS;
        if (sbx_exec(c, "bob-2", &o, &res) == SBX_OK)
                say(r, "again kept %zu truncated %d\n", res->stdout_len, res->stdout_truncated);
        else
                say(r, "again-failed %s\n", sbx_error_message(c));
        sbx_result_free(res);
        sbx_close(c);
}

static void bob_create_2(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;

        if (!c)
                return;
        sbx_create_opts_init(&co);
        co.id = "bob-2";
        if (sbx_create(c, &co, &sb) != SBX_OK)
                say(r, "create-failed %s\n", sbx_error_message(c));
        sbx_sandbox_free(sb);
        sbx_close(c);
}

START_TEST(test_kept_output) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *res = NULL;
        unsigned long long kept_sum = 0, kept, total;
        int named = 0, lines = 0;
        char *rep, *line, id[64];
        sbx_client *c;

        it_daemon_start(&d, small_flags);
        rep = as_bob(bob_background, &d);
        for (line = rep; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                int n;
                if (sscanf(line, "result %63s kept %llu of %llu named %d", id, &kept, &total, &n) !=
                    4)
                        continue;
                lines++;
                kept_sum += kept;
                named += n;
                ck_assert_msg(total == 8 * MIB, "every byte is counted: %s", rep);
                ck_assert_msg(kept == 8 * MIB || n, "a cut result says why: %s", rep);
        }
        ck_assert_msg(lines == BG_N, "BOB's commands: %s", rep);
        ck_assert_msg(kept_sum <= 16ull * MIB, "BOB's results keep %llu bytes, over his share: %s",
                      kept_sum, rep);
        ck_assert_msg(named >= 1, "no result says the bound cut it: %s", rep);
        free(rep);

        /* Root keeps what it asked for. */
        c = it_connect(&d);
        free(it_create(c, "root-out"));
        sbx_exec_opts_init(&o);
        o.shell = "head -c 4194304 /dev/zero";
        o.max_stdout_bytes = 8 * MIB;
        o.timeout_ms = CMD_MS;
        ck_assert_int_eq(sbx_exec(c, "root-out", &o, &res), SBX_OK);
        ck_assert_uint_eq(res->stdout_len, 4 * MIB);
        ck_assert(!res->stdout_truncated);
        for (size_t w = 0; w < res->warnings.n; w++)
                ck_assert_msg(!strstr(res->warnings.v[w], "buffered"), "root: %s",
                              res->warnings.v[w]);
        sbx_result_free(res);

        /* BOB's share comes back with his sandbox. */
        rep = as_bob(bob_create_2, &d);
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        rep = as_bob(bob_after, &d);
        ck_assert_msg(strstr(rep, "again kept 8388608 truncated 0"), "after the end: %s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- stdin ------------------------------------------------------------------------------ */

#define STDIN_BYTES (3u * MIB + MIB / 2)

/* Background commands that never read their stdin of 3.5 MiB, which stays held until it
 * is written whole: three fit his 16 MiB share with the 3.5 MiB of the request being
 * received (3 x 3.5 + 3.5 + 3.5), the fourth is refused. */
static void bob_stdin(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        uint8_t *data = calloc(1, STDIN_BYTES);
        int i;

        if (!c)
                return;
        for (i = 0; i < 6; i++) {
                struct sbx_exec_opts o;
                struct sbx_background *b = NULL;
                enum sbx_code code;
                sbx_exec_opts_init(&o);
                o.shell = "sleep 60";
                o.stdin_data = data;
                o.stdin_len = STDIN_BYTES;
                o.timeout_ms = CMD_MS;
                code = sbx_exec_background(c, "bob-in", &o, &b);
                if (code == SBX_OK)
                        say(r, "started %s\n", b->command_id);
                else
                        say(r, "refused %s %s\n", sbx_code_name(code), sbx_error_message(c));
                sbx_background_free(b);
        }
        free(data);
        sbx_close(c);
}

static void bob_create_in(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;

        if (!c)
                return;
        sbx_create_opts_init(&co);
        co.id = "bob-in";
        if (sbx_create(c, &co, &sb) != SBX_OK)
                say(r, "create-failed %s\n", sbx_error_message(c));
        sbx_sandbox_free(sb);
        sbx_close(c);
}

START_TEST(test_stdin) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *res = NULL;
        uint8_t *data = calloc(1, STDIN_BYTES);
        char *rep;
        sbx_client *c;

        it_daemon_start(&d, small_flags);
        rep = as_bob(bob_create_in, &d);
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        rep = as_bob(bob_stdin, &d);
        ck_assert_msg(count_lines(rep, "started") == 3, "three fit his share: %s", rep);
        ck_assert_msg(count_lines(rep, "refused RESOURCE_EXHAUSTED") == 3 &&
                              strstr(rep, "--max-buffered-per-uid 16 MiB"),
                      "the rest are refused naming the bound: %s", rep);
        free(rep);
        /* Root's stdin is its own. */
        c = it_connect(&d);
        free(it_create(c, "root-in"));
        sbx_exec_opts_init(&o);
        o.shell = "wc -c";
        o.stdin_data = data;
        o.stdin_len = STDIN_BYTES;
        o.timeout_ms = CMD_MS;
        ck_assert_int_eq(sbx_exec(c, "root-in", &o, &res), SBX_OK);
        ck_assert_int_eq(res->exit_code, 0);
        ck_assert_uint_eq(strtoull((char *)res->stdout_data, NULL, 10), STDIN_BYTES);
        sbx_result_free(res);
        sbx_close(c);
        free(data);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- partly received requests ----------------------------------------------------------- */

#define STALLED 12

static int raw_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Reads what came on fd within ms: "open" when nothing did, else the first status's
 * code and message, and "eof" when the daemon closed it. */
static void read_answer(int fd, int ms, struct report *r) {
        struct frame_reader fr;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint8_t buf[65536];
        const uint8_t *payload;
        size_t len;
        int said = 0;
        double t0 = it_now_ms();

        frame_reader_init(&fr, 4 * MIB);
        while (it_now_ms() - t0 < ms && poll(&p, 1, 100) >= 0) {
                ssize_t n;
                if (!(p.revents & (POLLIN | POLLHUP)))
                        continue;
                n = read(fd, buf, sizeof(buf));
                if (n <= 0) {
                        say(r, "%seof\n", said ? "" : "closed ");
                        frame_reader_free(&fr);
                        return;
                }
                (void)frame_reader_feed(&fr, buf, (size_t)n);
                while (!said && frame_reader_next(&fr, &payload, &len) == 1) {
                        Sbx__V1__Response *resp = sbx__v1__response__unpack(NULL, len, payload);
                        if (resp && resp->status) {
                                say(r, "status %d %s ", (int)resp->status->code,
                                    resp->status->message ? resp->status->message : "");
                                said = 1;
                        }
                        if (resp)
                                sbx__v1__response__free_unpacked(resp, NULL);
                }
        }
        say(r, "%sopen\n", said ? "still " : "");
        frame_reader_free(&fr);
}

/* Connections that each send the header of a frame of almost 4 MiB and 3 MiB of it,
 * then stall: their state within 1 s; then, past the frame timeout, each one's end. */
static void bob_stall(struct it_daemon *d, struct report *r) {
        static uint8_t body[3 * MIB];
        int fds[STALLED], i;
        uint8_t hdr[4];

        frame_header_put(hdr, 4 * MIB - 8);
        for (i = 0; i < STALLED; i++) {
                size_t done = 0;
                fds[i] = raw_connect(d->sock);
                if (fds[i] < 0) {
                        say(r, "conn %d connect-failed\n", i);
                        continue;
                }
                if (send(fds[i], hdr, 4, MSG_NOSIGNAL) != 4)
                        continue;
                while (done < sizeof(body)) {
                        ssize_t n = send(fds[i], body + done, sizeof(body) - done, MSG_NOSIGNAL);
                        if (n <= 0)
                                break;
                        done += (size_t)n;
                }
        }
        /* The test looks at the daemon and works meanwhile. A refusal comes at once;
         * the held ones are looked at well before the frame timeout (3 s). */
        say(r, "stalled\n");
        usleep(300000);
        for (i = 0; i < STALLED; i++) {
                say(r, "conn %d ", i);
                if (fds[i] >= 0)
                        read_answer(fds[i], 20, r);
                else
                        say(r, "none\n");
        }
        for (i = 0; i < STALLED; i++) {
                say(r, "end %d ", i);
                if (fds[i] >= 0) {
                        read_answer(fds[i], 8000, r);
                        close(fds[i]);
                } else {
                        say(r, "none\n");
                }
        }
}

/* A second round after the first timed out: his share is his again. */
static void bob_stall_again(struct it_daemon *d, struct report *r) {
        static uint8_t body[3 * MIB];
        uint8_t hdr[4];
        int fds[3], i;

        frame_header_put(hdr, 4 * MIB - 8);
        for (i = 0; i < 3; i++) {
                fds[i] = raw_connect(d->sock);
                if (fds[i] < 0 || send(fds[i], hdr, 4, MSG_NOSIGNAL) != 4 ||
                    send(fds[i], body, sizeof(body), MSG_NOSIGNAL) != (ssize_t)sizeof(body))
                        say(r, "again %d send-failed\n", i);
        }
        for (i = 0; i < 3; i++) {
                say(r, "again %d ", i);
                if (fds[i] >= 0) {
                        read_answer(fds[i], 500, r);
                        close(fds[i]);
                }
        }
}

START_TEST(test_partial_frames) {
        struct it_daemon d;
        struct sbx_result *res;
        long before, during = 0;
        char *rep;
        int open_n = 0, refused_n = 0, i;
        sbx_client *c;
        pid_t bob;
        int p[2];

        it_daemon_start(&d, small_flags);
        c = it_connect(&d);
        free(it_create(c, "root-warm"));
        before = it_proc_status(d.pid, "VmRSS");
        /* BOB stalls in a child of its own, so that the test can look meanwhile: the
         * child's "stalled" line comes first on the pipe. */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        bob = fork();
        ck_assert_int_ge(bob, 0);
        if (bob == 0) {
                char *text;
                close(p[0]);
                text = as_bob(bob_stall, &d);
                (void)!write(p[1], text, strlen(text));
                _exit(0);
        }
        close(p[1]);
        /* Wait for the stall (the child reports at the end; look at the daemon's memory
         * while its connections are open: 1 s of the report's first phase). */
        {
                double t0 = it_now_ms();
                while (it_now_ms() - t0 < 20000) {
                        long rss = it_proc_status(d.pid, "VmRSS");
                        if (rss > during)
                                during = rss;
                        if (it_log_count(&d, "uid=3202: a request's buffer") >= STALLED - 4)
                                break;
                        usleep(20000);
                }
        }
        /* Root is served meanwhile. */
        {
                double t0 = it_now_ms();
                free(it_create(c, "root-during"));
                res = it_sh(c, "root-during", CMD_MS, "true");
                ck_assert_int_eq(res->exit_code, 0);
                sbx_result_free(res);
                ck_assert_msg(it_now_ms() - t0 < 5000, "root waited %.0f ms", it_now_ms() - t0);
        }
        for (i = 0; i < 50; i++) {
                long rss = it_proc_status(d.pid, "VmRSS");
                if (rss > during)
                        during = rss;
                usleep(20000);
        }
        {
                char buf[32768];
                size_t got = 0;
                ssize_t n;
                while ((n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0)
                        got += (size_t)n;
                buf[got] = '\0';
                close(p[0]);
                ck_assert_int_eq(waitpid(bob, NULL, 0), bob);
                rep = strdup(buf);
        }
        for (i = 0; i < STALLED; i++) {
                char key[32], *l;
                snprintf(key, sizeof(key), "conn %d ", i);
                l = strstr(rep, key);
                ck_assert_msg(l, "conn %d missing: %s", i, rep);
                if (strncmp(l + strlen(key), "open", 4) == 0)
                        open_n++;
                else if (strstr(l, "--max-buffered-per-uid") &&
                         strstr(l, "--max-buffered-per-uid") < strchr(l, '\n'))
                        refused_n++;
        }
        ck_assert_msg(open_n >= 3 && open_n <= 4, "%d stalled connections held: %s", open_n, rep);
        ck_assert_msg(refused_n == STALLED - open_n, "the others are refused naming the bound: %s",
                      rep);
        /* 3 MiB was sent on each: the daemon's memory grew by the ones it held. */
        ck_assert_msg(during - before < 24 * 1024, "the daemon grew %ld KiB (from %ld KiB)",
                      during - before, before);
        /* Past --frame-timeout (3 s) each held one was closed, saying why. */
        for (i = 0; i < STALLED; i++) {
                char key[32], *l;
                snprintf(key, sizeof(key), "end %d ", i);
                l = strstr(rep, key);
                ck_assert_msg(l, "end %d missing: %s", i, rep);
                ck_assert_msg(strncmp(l + strlen(key), "closed eof", 10) == 0 ||
                                      (strstr(l, "eof") && strstr(l, "eof") < strchr(l, '\n')),
                              "end %d: still open past the frame timeout: %s", i, rep);
        }
        ck_assert_msg(strstr(rep, "--frame-timeout"), "no connection was told of the timeout: %s",
                      rep);
        free(rep);
        /* His share is his again. */
        rep = as_bob(bob_stall_again, &d);
        ck_assert_msg(count_lines(rep, "again") == 3 && !strstr(rep, "--max-buffered"),
                      "after the timeout: %s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- sandboxes -------------------------------------------------------------------------- */

static void bob_creates(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        int i;

        if (!c)
                return;
        for (i = 0; i < 4; i++) {
                struct sbx_sandbox *sb = NULL;
                struct sbx_create_opts co;
                enum sbx_code code;
                sbx_create_opts_init(&co);
                code = sbx_create(c, &co, &sb);
                if (code == SBX_OK)
                        say(r, "created %s\n", sb->id);
                else
                        say(r, "refused %s %s\n", sbx_code_name(code), sbx_error_message(c));
                sbx_sandbox_free(sb);
        }
        sbx_close(c);
}

START_TEST(test_sandboxes_share) {
        struct it_daemon d;
        char *rep;
        sbx_client *c;
        int i;

        it_daemon_start(&d, small_flags);
        rep = as_bob(bob_creates, &d);
        ck_assert_msg(count_lines(rep, "created") == 2, "a quarter of 8: %s", rep);
        ck_assert_msg(count_lines(rep, "refused RESOURCE_EXHAUSTED") == 2 &&
                              strstr(rep, "--max-sandboxes-per-uid"),
                      "%s", rep);
        free(rep);
        c = it_connect(&d);
        for (i = 0; i < 2; i++)
                free(it_create(c, NULL));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("budget");
        struct {
                const char *name;
                const TTest *test;
        } cases[] = {
                {"kept_output", test_kept_output},
                {"stdin", test_stdin},
                {"partial_frames", test_partial_frames},
                {"sandboxes_share", test_sandboxes_share},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *tc = tcase_create(cases[i].name);
                tcase_add_unchecked_fixture(tc, it_fixture_setup_var, it_fixture_teardown);
                tcase_set_timeout(tc, 180);
                tcase_add_test(tc, cases[i].test);
                suite_add_tcase(s, tc);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
