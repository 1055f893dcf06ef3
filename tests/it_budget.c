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
 *  - sandboxes: by default one uid owns at most a quarter of --max-sandboxes;
 *  - a create that runs out of descriptors at any step leaves nothing behind;
 *  - the daemon's own bounds are in a cgroup of its own.
 * The test of all the budgets at once (the bar) is it_egress_budget's, whose network
 * world the allowlist budgets need.
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
#include <sys/resource.h>
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
static void bob_background(struct it_daemon *d, const char *arg, struct report *r) {
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
                say(r, "result %s kept %zu of %llu named %d outcome %d\n", ids[i],
                       res->stdout_len, (unsigned long long)res->stdout_bytes, named,
                       (int)res->outcome);
                sbx_result_free(res);
                free(ids[i]);
        }
        sbx_close(c);
}

/* After his sandbox ended: one command of 8 MiB keeps all of it again. */
static void bob_after(struct it_daemon *d, const char *arg, struct report *r) {
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

/* Creates the sandbox arg. */
static void bob_create(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;

        if (!c)
                return;
        sbx_create_opts_init(&co);
        co.id = arg;
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
        rep = as_bob(bob_background, &d, NULL);
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
        rep = as_bob(bob_create, &d, "bob-2");
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        rep = as_bob(bob_after, &d, NULL);
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
static void bob_stdin(struct it_daemon *d, const char *arg, struct report *r) {
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

START_TEST(test_stdin) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *res = NULL;
        uint8_t *data = calloc(1, STDIN_BYTES);
        char *rep;
        sbx_client *c;

        it_daemon_start(&d, small_flags);
        rep = as_bob(bob_create, &d, "bob-in");
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        rep = as_bob(bob_stdin, &d, NULL);
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
static void bob_stall(struct it_daemon *d, const char *arg, struct report *r) {
        static uint8_t body[3 * MIB];
        int fds[STALLED], i;
        uint8_t hdr[4];

        frame_header_put(hdr, 4 * MIB - 8);
        for (i = 0; i < STALLED; i++) {
                size_t done = 0;
                fds[i] = bob_raw_connect(d->sock);
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
static void bob_stall_again(struct it_daemon *d, const char *arg, struct report *r) {
        static uint8_t body[3 * MIB];
        uint8_t hdr[4];
        int fds[3], i;

        frame_header_put(hdr, 4 * MIB - 8);
        for (i = 0; i < 3; i++) {
                fds[i] = bob_raw_connect(d->sock);
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
                text = as_bob(bob_stall, &d, NULL);
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
                        if (it_log_count(&d, "uid=3202: request 0 of") >= STALLED - 4)
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
        /* Every connection is still open: the ones past his share are read and dropped
         * (nothing of them is kept), the others held. */
        for (i = 0; i < STALLED; i++) {
                char key[32], *l;
                snprintf(key, sizeof(key), "conn %d ", i);
                l = strstr(rep, key);
                ck_assert_msg(l, "conn %d missing: %s", i, rep);
                /* Open, or (on a slow machine) timed out before it was looked at. */
                open_n += strncmp(l + strlen(key), "open", 4) == 0 ||
                          (strstr(l, "--frame-timeout") &&
                           strstr(l, "--frame-timeout") < strchr(l, '\n'));
        }
        ck_assert_msg(open_n == STALLED, "a connection was closed early: %s", rep);
        refused_n = it_log_count(&d, "uid=3202: request 0 of 4194296 bytes cannot be held");
        ck_assert_msg(refused_n >= STALLED - 4 && refused_n <= STALLED - 3,
                      "%d of his %d stalled requests were dropped unkept", refused_n, STALLED);
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
        rep = as_bob(bob_stall_again, &d, NULL);
        ck_assert_msg(count_lines(rep, "again") == 3 && !strstr(rep, "--max-buffered"),
                      "after the timeout: %s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- sandboxes -------------------------------------------------------------------------- */

static void bob_creates(struct it_daemon *d, const char *arg, struct report *r) {
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
        rep = as_bob(bob_creates, &d, NULL);
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

/* ---- a create that fails leaves nothing --------------------------------------------------- */

/* The names of what the daemon made under its cgroup bases and in its sandboxes
 * directory, one "where name" line each. */
static char *made(const struct it_daemon *d) {
        char cmd[2048], *out = calloc(1, 65536);
        size_t got = 0;
        FILE *p;

        snprintf(cmd, sizeof(cmd),
                 "for b in $(sed -n 's/.*sbxd: cgroups under //p' '%s' | sort -u); do "
                 "for e in \"$b\"/*; do [ -d \"$e\" ] && echo \"cgroup $(basename \"$e\")\"; "
                 "done; done; ls '%s/sandboxes' 2>/dev/null | sed 's/^/dir /'",
                 d->log, d->state);
        p = popen(cmd, "re");
        while (p && got < 65535 && fgets(out + got, (int)(65536 - got), p))
                got = strlen(out);
        if (p)
                pclose(p);
        return out;
}

/* The daemon runs out of descriptors at each step of a create and of a command in turn
 * (its soft limit lowered one descriptor at a time above what it has open): every
 * failure is a clear error, and once the limit is back nothing of a failed create is
 * left (no cgroup, no directory, no descriptor), and creating works again. */
static void out_of_descriptors(const char *const *flags, int must_fail) {
        struct rlimit rl, low;
        struct it_daemon d;
        struct sbx_sandbox *sb;
        int base, extra, failed = 0, n;
        char id[32], *left;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        free(it_create(c, "keep"));
        usleep(500000); /* the pool refills */
        ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &rl), 0);
        base = it_open_fds(d.pid);
        for (extra = 1; extra <= 48; extra++) {
                struct sbx_result *r = NULL;
                enum sbx_code code;
                snprintf(id, sizeof(id), "t-%d", extra);
                low = rl;
                low.rlim_cur = (rlim_t)(it_open_fds(d.pid) + extra);
                ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &low, NULL), 0);
                sb = NULL;
                {
                        struct sbx_create_opts o;
                        sbx_create_opts_init(&o);
                        o.id = id;
                        code = sbx_create(c, &o, &sb);
                }
                if (code != SBX_OK) {
                        failed++;
                        /* Out of a resource, to try again: not an internal failure, nor a
                         * hint to reinstall. */
                        ck_assert_msg((code == SBX_RESOURCE_EXHAUSTED || code == SBX_UNAVAILABLE) &&
                                              !strstr(sbx_error_message(c), "reinstall"),
                                      "create at +%d: %s: %s", extra, sbx_code_name(code),
                                      sbx_error_message(c));
                        sbx_close(c);
                        ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
                        c = it_connect(&d);
                        continue;
                }
                sbx_sandbox_free(sb);
                {
                        struct sbx_exec_opts o;
                        sbx_exec_opts_init(&o);
                        o.shell = "true";
                        o.timeout_ms = CMD_MS;
                        (void)sbx_exec(c, id, &o, &r);
                        sbx_result_free(r);
                }
                ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
                if (sbx_terminate(c, id, NULL) != SBX_OK) {
                        sbx_close(c);
                        c = it_connect(&d);
                        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
                }
        }
        ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
        ck_assert_msg(failed > 0 || !must_fail, "no create ran out of descriptors");
        /* What is left: "keep", and the pool's own (at most one warm and one spare). */
        for (n = 0; n < 100; n++) {
                left = made(&d);
                if (!strstr(left, " t-") && it_open_fds(d.pid) <= base + 2)
                        break;
                free(left);
                left = NULL;
                usleep(100000);
        }
        if (!left)
                left = made(&d);
        ck_assert_msg(!strstr(left, " t-"), "a failed create left: %s", left);
        ck_assert_msg(it_open_fds(d.pid) <= base + 2, "descriptors %d, %d before", it_open_fds(d.pid),
                      base);
        free(left);
        free(it_create(c, "after"));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

START_TEST(test_out_of_descriptors) {
        const char *cold[] = {"--warm", "0", "--spares", "0", NULL};
        const char *pool[] = {"--warm", "1", "--spares", "1", NULL};

        /* Every create the whole way (each step of it runs out in turn), then with a pool
         * (a claim needs few descriptors; the refills behind it run out). */
        out_of_descriptors(cold, 1);
        out_of_descriptors(pool, 0);
}
END_TEST

/* ---- the daemon's own bounds ------------------------------------------------------------- */

/* The path of the daemon's group in controller ctrl, from /proc/PID/cgroup (v1). */
static int own_group(pid_t pid, const char *ctrl, char *buf, size_t len) {
        char path[64], line[512];
        FILE *f;
        int found = 0;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = fopen(path, "re");
        while (f && !found && fgets(line, sizeof(line), f)) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!b || (size_t)(b - a - 1) != strlen(ctrl) || strncmp(a + 1, ctrl, strlen(ctrl)))
                        continue;
                b[strcspn(b, "\n")] = '\0';
                snprintf(buf, len, "/sys/fs/cgroup/%s%s", ctrl, b + 1);
                found = 1;
        }
        if (f)
                fclose(f);
        return found;
}

static unsigned long long read_ull(const char *dir, const char *name) {
        char path[1200];
        unsigned long long v = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "re");
        if (f && fscanf(f, "%llu", &v) != 1)
                v = 0;
        if (f)
                fclose(f);
        return v;
}

/* --daemon-memory-max and --daemon-tasks-max bound the daemon in a group of its own
 * (v1 here: "<base>.daemon" in memory and pids), not its sandboxes: one with a memory
 * limit above the daemon's uses more than the daemon may. The group goes at exit. */
START_TEST(test_daemon_bounds) {
        const char *flags[] = {"--daemon-memory-max", "128M", "--daemon-tasks-max", "200", NULL};
        char mem[700], pids[700];
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        struct it_daemon d;
        sbx_client *c;

        if (access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) != 0) {
                fprintf(stderr, "it_budget daemon_bounds: no v1 memory hierarchy; the v2 path is "
                                "tested in check_cgroup\n");
                return;
        }
        it_daemon_start(&d, flags);
        ck_assert(own_group(d.pid, "memory", mem, sizeof(mem)));
        ck_assert(own_group(d.pid, "pids", pids, sizeof(pids)));
        ck_assert_msg(strstr(mem, ".daemon") && strstr(pids, ".daemon"), "the daemon is in %s, %s",
                      mem, pids);
        ck_assert_uint_eq(read_ull(mem, "memory.limit_in_bytes"), 128ull * MIB);
        ck_assert_uint_eq(read_ull(pids, "pids.max"), 200);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.id = "big";
        o.policy.limits.set = SBX_LIMIT_MEMORY;
        o.policy.limits.memory_bytes = 512ull * MIB;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        r = it_sh(c, "big", CMD_MS,
                  "python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * (len(b) // 4096); "
                  "print(len(b))'");
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "256 MiB in the sandbox: %s",
                      r->stderr_data);
        sbx_result_free(r);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_msg(access(mem, F_OK) != 0 && access(pids, F_OK) != 0,
                      "the daemon's own groups are left: %s %s", mem, pids);
}
END_TEST

/* Writes v to dir/name. */
static void write_ull(const char *dir, const char *name, unsigned long long v) {
        char path[1200];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_gt(fprintf(f, "%llu\n", v), 0);
        ck_assert_int_eq(fclose(f), 0);
}

/* The daemon at its --daemon-tasks-max (its group's pids.max lowered here to what it
 * runs): its thread pool was started before the bound, so a listing (work off the loop)
 * is served (before, libuv aborted the daemon when it could not make the pool's
 * threads); a create, whose init cannot be forked, fails as out of a resource and
 * leaves nothing; once the bound is back, creating works. (Too low a bound is refused:
 * check_config.) */
START_TEST(test_out_of_tasks) {
        const char *flags[] = {"--daemon-tasks-max", "64", "--warm", "0", "--spares", "0", NULL};
        char pids[700], *left;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_dir_list *l = NULL;
        struct it_daemon d;
        enum sbx_code code;
        sbx_client *c;

        if (access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) != 0) {
                fprintf(stderr, "it_budget out_of_tasks: no v1 pids hierarchy\n");
                return;
        }
        it_daemon_start(&d, flags);
        ck_assert(own_group(d.pid, "pids", pids, sizeof(pids)));
        c = it_connect(&d);
        free(it_create(c, "keep"));
        write_ull(pids, "pids.max", read_ull(pids, "pids.current"));
        ck_assert_int_eq(sbx_list_dir(c, "keep", "/", 0, &l), SBX_OK);
        sbx_dir_list_free(l);
        sbx_create_opts_init(&o);
        o.id = "t-tasks";
        code = sbx_create(c, &o, &sb);
        ck_assert_msg(code == SBX_RESOURCE_EXHAUSTED && !strstr(sbx_error_message(c), "reinstall"),
                      "create at the daemon's tasks bound: %s: %s", sbx_code_name(code),
                      sbx_error_message(c));
        write_ull(pids, "pids.max", 64);
        left = made(&d);
        ck_assert_msg(!strstr(left, " t-"), "a failed create left: %s", left);
        free(left);
        free(it_create(c, "after"));
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
                {"out_of_descriptors", test_out_of_descriptors},
                {"daemon_bounds", test_daemon_bounds},
                {"out_of_tasks", test_out_of_tasks},
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
