/* it_background.c: integration tests of background commands and AttachCommand (issue
 * 20, part 3) against a real sbxd: a background RunCommand answers once and outlives its
 * connection; any client that may use the sandbox attaches to it (the kept output, then
 * what it prints, then its result), writes its stdin and cancels it; its timeout holds
 * (or none, until the sandbox ends); ended ones stay attachable, the last 16; they are
 * listed in GetSandbox and flagged in history; attachers that are many, slow or gone
 * never hold the command; and sbx exec --background / sbx attach as a user runs them. */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

#define COUNTER "i=0; while :; do echo $i; i=$((i+1)); sleep 0.1; done"

/* Starts shell in the background in sandbox sb (timeout_ms 0: none); fails the test
 * unless it started. Returns its command id (freed by the caller). */
static char *bg_start(sbx_client *c, const char *sb, const char *shell, uint64_t timeout_ms,
                      int stdin_stream) {
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;
        char *id;
        enum sbx_code rc;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = timeout_ms;
        o.no_timeout = timeout_ms == 0;
        o.stdin_stream = stdin_stream;
        rc = sbx_exec_background(c, sb, &o, &b);
        ck_assert_msg(rc == SBX_OK, "exec_background: %s", sbx_error_message(c));
        ck_assert_ptr_nonnull(b->command_id);
        ck_assert_msg(!b->result, "it did not start: %s",
                      b->result->start_error ? b->result->start_error : "");
        ck_assert_int_eq(b->queued, 0);
        id = strdup(b->command_id);
        sbx_background_free(b);
        return id;
}

/* Attaches to cmd of sb; follow or not. Returns the result (fails on error). */
static struct sbx_result *attach(sbx_client *c, const char *sb, const char *cmd, int follow) {
        struct sbx_attach_opts ao;
        struct sbx_result *r = NULL;
        enum sbx_code rc;

        memset(&ao, 0, sizeof(ao));
        ao.command_id = cmd;
        ao.follow = follow;
        rc = sbx_attach(c, sb, &ao, &r);
        ck_assert_msg(rc == SBX_OK, "attach %s: %s", cmd, sbx_error_message(c));
        return r;
}

/* Attaches to cmd of sb (no follow) until it has kept at least min_bytes of output (30 s
 * at most: fails the test then); returns that result. */
static struct sbx_result *wait_stdout(sbx_client *c, const char *sb, const char *cmd,
                                      uint64_t min_bytes) {
        double t0 = it_now_ms();
        struct sbx_result *r;

        while ((r = attach(c, sb, cmd, 0))->stdout_len < min_bytes) {
                ck_assert_msg(it_now_ms() - t0 < 30000, "%s printed %zu bytes in 30 s, not %llu",
                              cmd, r->stdout_len, (unsigned long long)min_bytes);
                sbx_result_free(r);
                usleep(20 * 1000);
        }
        return r;
}

/* A sandbox made on its own connection, which is closed. */
static void make_sandbox(struct it_daemon *d, const char *id) {
        sbx_client *c = it_connect(d);
        free(it_create(c, id));
        sbx_close(c);
}

struct later {
        struct it_daemon *d;
        const char *sb, *cmd;
        int attaches;       /* once the daemon has taken this many AttachCommand in all, */
        uint64_t min_bytes; /* and cmd has printed this much, */
        int terminate;      /* cancels cmd, or terminates sb */
};

/* Cancels cmd (or terminates sb) on a client of its own, once the attachers are attached
 * and the output is there: whatever the machine's speed, they see it end. */
static void *do_later(void *arg) {
        struct later *l = arg;
        sbx_client *c = it_connect(l->d);
        it_wait_requests(l->d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND, l->attaches);
        if (l->min_bytes)
                sbx_result_free(wait_stdout(c, l->sb, l->cmd, l->min_bytes));
        if (l->terminate)
                ck_assert_int_eq(sbx_terminate(c, l->sb, NULL), SBX_OK);
        else
                ck_assert_int_eq(sbx_cancel(c, l->sb, l->cmd), SBX_OK);
        sbx_close(c);
        return NULL;
}

/* The request returns at once with an id, the client goes away, the command lives on; a
 * second client sees the kept output (RUNNING), then follows it until a third cancels it. */
START_TEST(server_outlives_its_client) {
        struct it_daemon d;
        struct later l = {&d, "bg1", NULL, 0, 23, 0};
        struct sbx_result *r;
        pthread_t t;
        sbx_client *c;
        double t0;
        char *cmd;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bg1");
        c = it_connect(&d);
        t0 = it_now_ms();
        cmd = bg_start(c, "bg1", COUNTER, 60000, 0);
        /* At once: not when the command ends (it never does by itself). */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        sbx_close(c);

        c = it_connect(&d);
        r = wait_stdout(c, "bg1", cmd, 6);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_RUNNING);
        ck_assert_msg(strncmp((char *)r->stdout_data, "0\n1\n2\n", 6) == 0, "kept: %s",
                      r->stdout_data);
        ck_assert_uint_ge(r->stdout_bytes, 6);
        sbx_result_free(r);

        /* Cancelled once this attacher follows it and line 10 is out. */
        l.cmd = cmd;
        l.attaches = it_requests_taken(&d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND) + 1;
        pthread_create(&t, NULL, do_later, &l);
        r = attach(c, "bg1", cmd, 1);
        pthread_join(t, NULL);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_CANCELLED);
        /* Kept output first, then the live lines: no gap, no repeat. */
        ck_assert_msg(strncmp((char *)r->stdout_data, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", 23) ==
                              0,
                      "followed: %s", r->stdout_data);
        ck_assert_uint_eq(r->stdout_len, r->stdout_bytes);
        sbx_result_free(r);
        /* Ended: still attachable, with its result. */
        r = attach(c, "bg1", cmd, 0);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_CANCELLED);
        ck_assert_uint_ge(r->stdout_len, 20);
        sbx_result_free(r);
        free(cmd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* timeout_ms holds for a background command; 0 only with background, and then it runs
 * until the sandbox ends. */
START_TEST(timeouts) {
        struct it_daemon d;
        struct later l = {&d, "bg2", NULL, 0, 0, 1};
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
        Sbx__V1__Response *resp;
        struct frame_reader fr;
        struct sbx_result *r;
        pthread_t t;
        sbx_client *c;
        double t0;
        char *cmd;
        int fd;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bg2");
        c = it_connect(&d);
        cmd = bg_start(c, "bg2", "sleep 30", 400, 0);
        t0 = it_now_ms();
        r = attach(c, "bg2", cmd, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_TIMED_OUT);
        ck_assert_double_lt(it_now_ms() - t0, 5000);
        sbx_result_free(r);
        free(cmd);

        /* timeout_ms 0 without background. */
        fd = it_raw_connect(&d);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        req.has_request_id = 1;
        req.request_id = 7;
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &run;
        run.sandbox_id = "bg2";
        run.shell = "true";
        run.has_timeout_ms = 1;
        run.timeout_ms = 0;
        it_raw_send(fd, &req);
        resp = it_raw_read(fd, &fr, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "background"));
        sbx__v1__response__free_unpacked(resp, NULL);
        close(fd);
        frame_reader_free(&fr);

        /* timeout_ms 0 with background: until the sandbox ends. */
        cmd = bg_start(c, "bg2", "sleep 1000", 0, 0);
        /* Terminated once this attacher follows it. */
        l.cmd = cmd;
        l.attaches = it_requests_taken(&d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND) + 1;
        pthread_create(&t, NULL, do_later, &l);
        r = attach(c, "bg2", cmd, 1);
        pthread_join(t, NULL);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_SANDBOX_ENDED);
        sbx_result_free(r);
        free(cmd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* stdin from another connection; a second background command waits for the one slot
 * (queued); START_FAILED for a missing program comes as the one answer. */
START_TEST(stdin_queued_and_start_failed) {
        const char *flags[] = {"--max-commands", "1", NULL};
        const char *argv[] = {"/no/such/program", NULL};
        struct sbx_background *b = NULL;
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r;
        sbx_client *c, *c2;
        char *cmd;

        it_daemon_start(&d, flags);
        make_sandbox(&d, "bg3");
        c = it_connect(&d);
        cmd = bg_start(c, "bg3", "cat; echo end", 60000, 1);
        sbx_close(c);

        c2 = it_connect(&d);
        sbx_exec_opts_init(&o);
        o.shell = "echo second";
        ck_assert_int_eq(sbx_exec_background(c2, "bg3", &o, &b), SBX_OK);
        ck_assert_int_eq(b->queued, 1);
        ck_assert_ptr_null(b->result);
        ck_assert_str_ne(b->command_id, cmd);
        ck_assert_int_eq(sbx_send_input(c2, "bg3", cmd, "hello\n", 6, 1), SBX_OK);
        r = attach(c2, "bg3", cmd, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_str_eq((char *)r->stdout_data, "hello\nend\n");
        sbx_result_free(r);
        /* Its slot freed: the queued one ran. */
        r = attach(c2, "bg3", b->command_id, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_str_eq((char *)r->stdout_data, "second\n");
        sbx_result_free(r);
        sbx_background_free(b);
        b = NULL;

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 1;
        ck_assert_int_eq(sbx_exec_background(c2, "bg3", &o, &b), SBX_OK);
        ck_assert_ptr_nonnull(b->result);
        ck_assert_int_eq(b->result->outcome, SBX_OUTCOME_START_FAILED);
        ck_assert_ptr_nonnull(b->result->start_error);
        sbx_background_free(b);
        /* stdin of an ended command: not found. */
        ck_assert_int_eq(sbx_send_input(c2, "bg3", cmd, "x", 1, 0), SBX_NOT_FOUND);
        free(cmd);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Listed in GetSandbox with their states, flagged in history; ended ones bounded to the
 * last 16 (older ones NOT_FOUND to attach, their records kept); an unknown id NOT_FOUND. */
START_TEST(listed_bounded_and_recorded) {
        struct it_daemon d;
        struct sbx_attach_opts ao;
        struct sbx_sandbox *s = NULL;
        struct sbx_history *h = NULL;
        struct sbx_result *r = NULL;
        char *first = NULL, *last = NULL, *running;
        size_t i, ended = 0, nrun = 0;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bg4");
        c = it_connect(&d);
        running = bg_start(c, "bg4", "sleep 30", 60000, 0);
        sbx_result_free(it_sh(c, "bg4", 10000, "true")); /* a normal command, for history */
        for (i = 0; i < 18; i++) {
                char *id = bg_start(c, "bg4", "echo $$", 60000, 0);
                if (i == 0)
                        first = id;
                else {
                        free(last);
                        last = id;
                }
        }
        /* Let them end: the last, then every other but the one running. */
        r = attach(c, "bg4", last, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        sbx_result_free(r);
        it_wait_commands(c, "bg4", 1, 0);
        ck_assert_int_eq(sbx_get(c, "bg4", &s), SBX_OK);
        for (i = 0; i < s->n_commands; i++) {
                if (s->commands[i].state == SBX_COMMAND_ENDED) {
                        ended++;
                        ck_assert(s->commands[i].background);
                        ck_assert_int_eq(s->commands[i].outcome, SBX_OUTCOME_EXITED);
                }
                if (s->commands[i].state == SBX_COMMAND_RUNNING) {
                        nrun++;
                        ck_assert_str_eq(s->commands[i].command_id, running);
                        ck_assert(s->commands[i].background);
                }
        }
        ck_assert_uint_eq(ended, 16);
        ck_assert_uint_eq(nrun, 1);
        sbx_sandbox_free(s);

        memset(&ao, 0, sizeof(ao));
        ao.command_id = first;
        r = NULL;
        ck_assert_int_eq(sbx_attach(c, "bg4", &ao, &r), SBX_NOT_FOUND);
        ck_assert_ptr_null(r);
        ao.command_id = "c-999";
        ck_assert_int_eq(sbx_attach(c, "bg4", &ao, &r), SBX_NOT_FOUND);
        ao.command_id = last;
        ck_assert_int_eq(sbx_attach(c, "bg4", &ao, &r), SBX_OK);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_gt(r->stdout_len, 1);
        sbx_result_free(r);

        ck_assert_int_eq(sbx_history(c, "bg4", 0, 100, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 20);
        ck_assert(h->v[0].background);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_RUNNING);
        ck_assert(!h->v[1].background);
        ck_assert(h->v[2].background);
        ck_assert_str_eq(h->v[2].command_id, first);
        ck_assert_int_eq(h->v[2].outcome, SBX_OUTCOME_EXITED);
        sbx_history_free(h);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE background = 1"), 19);
        free(first);
        free(last);
        free(running);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A running background command keeps its sandbox from its idle timeout. */
START_TEST(idle_timeout_spares_a_background_command) {
        struct sbx_create_opts co;
        struct sbx_sandbox *s = NULL;
        struct it_daemon d;
        sbx_client *c;
        char *cmd;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&co);
        co.id = "bg5";
        co.idle_timeout_ms = 1000;
        ck_assert_int_eq(sbx_create(c, &co, &s), SBX_OK);
        sbx_sandbox_free(s);
        /* It outlives the 3 s below by far, however slow the machine. */
        cmd = bg_start(c, "bg5", "sleep 30", 60000, 0);
        sbx_close(c);
        sleep(3);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, "bg5", &s), SBX_OK);
        ck_assert_int_eq(s->state, SBX_STATE_READY);
        ck_assert_uint_eq(s->running_commands, 1);
        sbx_sandbox_free(s);
        free(cmd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

struct follower {
        struct it_daemon *d;
        const char *cmd;
        struct sbx_result *r;
};

static void *follow(void *arg) {
        struct follower *f = arg;
        sbx_client *c = it_connect(f->d);
        f->r = attach(c, "bg6", f->cmd, 1);
        sbx_close(c);
        return NULL;
}

/* The daemon's peak resident memory (VmHWM), in KiB. */
static long daemon_peak_kib(const struct it_daemon *d) {
        char path[64], line[256];
        long kib = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
                        break;
        if (f)
                fclose(f);
        return kib;
}

/* Starts d with ASan's quarantine off (when it is sanitized, as in `make asan`): freed
 * memory would stay resident there (up to 256 MiB), and whatever passed through the
 * daemon would count as held. Without it the peak says what the daemon holds. */
static void daemon_start_unquarantined(struct it_daemon *d) {
        const char *was = getenv("ASAN_OPTIONS");
        char *saved = was ? strdup(was) : NULL, opts[1024];

        snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", was ? was : "", was ? ":" : "");
        ck_assert_int_eq(setenv("ASAN_OPTIONS", opts, 1), 0);
        it_daemon_start(d, NULL);
        if (saved)
                setenv("ASAN_OPTIONS", saved, 1);
        else
                unsetenv("ASAN_OPTIONS");
        free(saved);
}

/* Two attachers follow the same output; one that vanishes and one that never reads
 * (its connection congested) do not hold the command: it runs to its end, and prints
 * 64 MiB meanwhile. */
START_TEST(many_slow_and_vanished_attachers) {
        struct it_daemon d;
        struct follower f1 = {&d, NULL, NULL}, f2 = {&d, NULL, NULL};
        struct later l = {&d, "bg6", NULL, 0, 20, 0};
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__AttachCommand ac = SBX__V1__ATTACH_COMMAND__INIT;
        struct sbx_result *r;
        pthread_t t1, t2, t3;
        sbx_client *c;
        char *cmd;
        double t0;
        int fd, fd2;

        daemon_start_unquarantined(&d);
        make_sandbox(&d, "bg6");
        c = it_connect(&d);
        cmd = bg_start(c, "bg6", COUNTER, 60000, 0);
        f1.cmd = f2.cmd = l.cmd = cmd;
        /* One that attaches and goes away at once. */
        l.attaches = it_requests_taken(&d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND) + 1;
        fd = it_raw_connect(&d);
        req.has_request_id = 1;
        req.request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_ATTACH_COMMAND;
        req.attach_command = &ac;
        ac.sandbox_id = "bg6";
        ac.command_id = cmd;
        ac.has_follow = ac.follow = 1;
        it_raw_send(fd, &req);
        close(fd);
        it_wait_requests(&d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND, l.attaches);
        /* Two that follow it, until it is cancelled once both do and 20 bytes are out. */
        l.attaches += 2;
        pthread_create(&t1, NULL, follow, &f1);
        pthread_create(&t2, NULL, follow, &f2);
        pthread_create(&t3, NULL, do_later, &l);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        pthread_join(t3, NULL);
        ck_assert_int_eq(f1.r->outcome, SBX_OUTCOME_CANCELLED);
        ck_assert_int_eq(f2.r->outcome, SBX_OUTCOME_CANCELLED);
        ck_assert_msg(strncmp((char *)f1.r->stdout_data, (char *)f2.r->stdout_data, 20) == 0,
                      "f1 %s f2 %s", f1.r->stdout_data, f2.r->stdout_data);
        ck_assert_uint_ge(f1.r->stdout_len, 20);
        ck_assert_uint_eq(f1.r->stdout_len, f2.r->stdout_len);
        sbx_result_free(f1.r);
        sbx_result_free(f2.r);
        free(cmd);

        /* A slow attacher: attaches with follow, never reads. */
        cmd = bg_start(c, "bg6", "head -c 67108864 /dev/zero; echo done >&2", 60000, 0);
        fd2 = it_raw_connect(&d);
        ac.command_id = cmd;
        it_raw_send(fd2, &req);
        t0 = it_now_ms();
        for (;;) {
                r = attach(c, "bg6", cmd, 0);
                if (r->outcome != SBX_OUTCOME_RUNNING)
                        break;
                sbx_result_free(r);
                ck_assert_double_lt(it_now_ms() - t0, 30000);
                usleep(100 * 1000);
        }
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_eq(r->stdout_bytes, 67108864u);
        ck_assert_uint_eq(r->stdout_len, SBX_DEFAULT_MAX_OUTPUT_BYTES); /* the kept tail */
        ck_assert_str_eq((char *)r->stderr_data, "done\n");
        /* Bounded: the attacher's connection holds about SBX_CONN_WRITE_HIGH_WATER_BYTES,
         * the command its 1 MiB tail; never the 64 MiB. */
        fprintf(stderr, "64 MiB with a stalled attacher ended in %.0f ms; daemon peak %ld KiB\n",
                it_now_ms() - t0, daemon_peak_kib(&d));
        ck_assert_int_lt(daemon_peak_kib(&d), 48 * 1024);
        sbx_result_free(r);
        close(fd2);
        free(cmd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* As another user: NOT_FOUND (the same as for a sandbox that does not exist); shared
 * with that user: attach, stdin and cancel work. */
#define BG_SOCK_GRP 3100u
#define BG_OTHER    3102u

/* In a child as BG_OTHER: attaches (no follow) to cmd of sb; exits with the code. */
static int other_user_attach(struct it_daemon *d, const char *sb, const char *cmd) {
        pid_t pid = fork();
        int st;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                gid_t g = BG_SOCK_GRP;
                struct sbx_attach_opts ao;
                struct sbx_result *r = NULL;
                sbx_client *c = NULL;
                if (setgroups(1, &g) < 0 || setresgid(BG_OTHER, BG_OTHER, BG_OTHER) < 0 ||
                    setresuid(BG_OTHER, BG_OTHER, BG_OTHER) < 0)
                        _exit(120);
                if (sbx_connect(d->sock, "bg-test", &c) != SBX_OK)
                        _exit(121);
                memset(&ao, 0, sizeof(ao));
                ao.command_id = cmd;
                _exit((int)sbx_attach(c, sb, &ao, &r));
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st));
        return WEXITSTATUS(st);
}

START_TEST(other_users) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        const uint32_t share[] = {BG_OTHER};
        struct sbx_create_opts co;
        struct sbx_sandbox *s = NULL;
        struct it_daemon d;
        sbx_client *c;
        char *cmd, *cmd2;

        if (geteuid() != 0)
                return;
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        free(it_create(c, "bg7"));
        sbx_create_opts_init(&co);
        co.id = "bg8";
        co.share_uids = share;
        co.n_share_uids = 1;
        ck_assert_int_eq(sbx_create(c, &co, &s), SBX_OK);
        sbx_sandbox_free(s);
        cmd = bg_start(c, "bg7", "sleep 30", 60000, 0);
        cmd2 = bg_start(c, "bg8", "sleep 30", 60000, 0);
        ck_assert_int_eq(other_user_attach(&d, "bg7", cmd), SBX_NOT_FOUND);
        ck_assert_int_eq(other_user_attach(&d, "nosuch", cmd), SBX_NOT_FOUND);
        ck_assert_int_eq(other_user_attach(&d, "bg8", cmd2), SBX_OK);
        free(cmd);
        free(cmd2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx exec --background prints the id at once (--json: command_id); sbx attach
 * --follow writes the output and exits with the command's status. */
START_TEST(cli) {
        struct it_daemon d;
        char *out = NULL, *err = NULL, id[64];
        sbx_client *c;
        int st;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bg9");
        {
                const char *a[] = {"exec",
                                   "--background",
                                   "bg9",
                                   "--",
                                   "sh",
                                   "-c",
                                   "sleep 0.5; echo out; echo err >&2; exit 3",
                                   NULL};
                st = it_sbx(&d, NULL, 0, &out, &err, a);
        }
        ck_assert_msg(st == 0, "exec --background: %d %s", st, err);
        ck_assert_msg(strncmp(out, "c-", 2) == 0, "out: %s", out);
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(out, "\n"), out);
        free(out);
        free(err);
        {
                const char *a[] = {"attach", "--follow", "bg9", id, NULL};
                st = it_sbx(&d, NULL, 0, &out, &err, a);
        }
        ck_assert_int_eq(st, 3);
        ck_assert_str_eq(out, "out\n");
        ck_assert_ptr_nonnull(strstr(err, "err\n"));
        free(out);
        free(err);
        {
                const char *a[] = {"exec", "--background", "--json", "--timeout", "0",
                                   "bg9",  "--",           "sleep",  "100",       NULL};
                st = it_sbx(&d, NULL, 0, &out, &err, a);
        }
        ck_assert_int_eq(st, 0);
        ck_assert_ptr_nonnull(strstr(out, "\"command_id\":\"c-2\""));
        free(out);
        free(err);
        {
                const char *a[] = {"info", "--json", "bg9", NULL};
                st = it_sbx(&d, NULL, 0, &out, &err, a);
        }
        ck_assert_int_eq(st, 0);
        ck_assert_ptr_nonnull(strstr(out, "\"state\":\"running\""));
        ck_assert_ptr_nonnull(strstr(out, "\"state\":\"ended\""));
        free(out);
        free(err);
        {
                const char *a[] = {"history", "--json", "bg9", NULL};
                st = it_sbx(&d, NULL, 0, &out, &err, a);
        }
        ck_assert_int_eq(st, 0);
        ck_assert_ptr_nonnull(strstr(out, "\"background\":true"));
        free(out);
        free(err);
        {
                const char *a[] = {"exec", "--background", "--stdin", "-",
                                   "bg9",  "--",           "cat",     NULL};
                st = it_sbx(&d, "x", 1, &out, &err, a);
        }
        ck_assert_int_ne(st, 0);
        ck_assert_ptr_nonnull(strstr(err, "takes no --stdin"));
        free(out);
        free(err);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_cancel(c, "bg9", "c-2"), SBX_OK);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A forwarded signal reaches a background command from another client (its trap runs);
 * a daemon killed and restarted (live re-adoption) treats a background command as any
 * other: it is killed, its record says unknown, it is no longer attachable. */
START_TEST(signal_and_restart) {
        struct it_daemon d;
        struct sbx_attach_opts ao;
        struct sbx_history *h = NULL;
        struct sbx_sandbox *s = NULL;
        struct sbx_result *r = NULL;
        sbx_client *c;
        char *cmd, sleeper[64], shell[80];

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds, which valgrind does not emulate */
        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bga");
        c = it_connect(&d);
        cmd = bg_start(c, "bga",
                       "trap 'echo got TERM; exit 7' TERM; echo ready; "
                       "while :; do sleep 0.05; done",
                       60000, 0);
        /* Its trap is set once it said so. */
        sbx_result_free(wait_stdout(c, "bga", cmd, 6));
        sbx_close(c);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_signal(c, "bga", cmd, SIGTERM), SBX_OK);
        r = attach(c, "bga", cmd, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->exit_code, 7);
        ck_assert_str_eq((char *)r->stdout_data, "ready\ngot TERM\n");
        sbx_result_free(r);
        free(cmd);

        snprintf(sleeper, sizeof(sleeper), "sleep 4242.%d", (int)getpid());
        snprintf(shell, sizeof(shell), "exec %s", sleeper);
        cmd = bg_start(c, "bga", shell, 0, 0);
        sbx_close(c);
        it_daemon_kill(&d);
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, "bga", &s), SBX_OK);
        ck_assert_int_eq(s->state, SBX_STATE_READY);
        ck_assert_uint_eq(s->n_commands, 0);
        sbx_sandbox_free(s);
        memset(&ao, 0, sizeof(ao));
        ao.command_id = cmd;
        ck_assert_int_eq(sbx_attach(c, "bga", &ao, &r), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_history(c, "bga", 0, 100, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 2);
        ck_assert(h->v[1].background);
        ck_assert_int_eq(h->v[1].outcome, SBX_OUTCOME_UNKNOWN);
        sbx_history_free(h);
        /* Killed as init saw the daemon go, as any command in flight (docs/sandboxes.md,
         * Restarts): nobody would keep its output nor enforce its timeout. */
        for (int i = 0; i < 600 && it_count_procs(sleeper) > 0; i++)
                usleep(50 * 1000);
        ck_assert_int_eq(it_count_procs(sleeper), 0);
        free(cmd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A flood of background commands is bounded by the caps every command has: the running
 * ones by Limits.commands, the waiting ones by --max-queued; past both the request is
 * RESOURCE_EXHAUSTED and nothing runs. Offsets beyond what was produced give no
 * chunks. */
START_TEST(flood_bounded_and_offsets) {
        const char *flags[] = {"--max-commands", "2", "--max-queued", "2", NULL};
        struct sbx_background *b = NULL;
        struct sbx_attach_opts ao;
        struct sbx_exec_opts o;
        struct sbx_sandbox *s = NULL;
        struct sbx_result *r = NULL;
        struct it_daemon d;
        size_t queued = 0, running = 0;
        sbx_client *c;
        char *first;
        int i;

        it_daemon_start(&d, flags);
        make_sandbox(&d, "bgb");
        c = it_connect(&d);
        first = bg_start(c, "bgb", "echo 12345; sleep 30", 60000, 0);
        sbx_exec_opts_init(&o);
        o.shell = "sleep 30";
        for (i = 0; i < 3; i++) {
                ck_assert_int_eq(sbx_exec_background(c, "bgb", &o, &b), SBX_OK);
                ck_assert_int_eq(b->queued, i > 0);
                sbx_background_free(b);
                b = NULL;
        }
        ck_assert_int_eq(sbx_exec_background(c, "bgb", &o, &b), SBX_RESOURCE_EXHAUSTED);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "max-queued"));
        ck_assert_ptr_null(b);
        ck_assert_int_eq(sbx_get(c, "bgb", &s), SBX_OK);
        for (size_t k = 0; k < s->n_commands; k++) {
                queued += s->commands[k].state == SBX_COMMAND_QUEUED;
                running += s->commands[k].state == SBX_COMMAND_RUNNING;
        }
        ck_assert_uint_eq(running, 2);
        ck_assert_uint_eq(queued, 2);
        sbx_sandbox_free(s);

        sbx_result_free(wait_stdout(c, "bgb", first, 6));
        memset(&ao, 0, sizeof(ao));
        ao.command_id = first;
        ao.stdout_offset = 1ull << 40;
        ck_assert_int_eq(sbx_attach(c, "bgb", &ao, &r), SBX_OK);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_RUNNING);
        ck_assert_uint_eq(r->stdout_len, 0);
        ck_assert_uint_eq(r->stdout_bytes, 6);
        sbx_result_free(r);
        ao.stdout_offset = 3;
        ck_assert_int_eq(sbx_attach(c, "bgb", &ao, &r), SBX_OK);
        ck_assert_str_eq((char *)r->stdout_data, "45\n");
        sbx_result_free(r);
        free(first);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client that pipelines many attaches to a command that kept 16 MiB, and reads none
 * of the answers, holds the daemon's memory to about one answer: the next attach waits
 * until its connection drains. */
START_TEST(pipelined_attaches_bounded) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__AttachCommand ac = SBX__V1__ATTACH_COMMAND__INIT;
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;
        struct sbx_result *r;
        struct it_daemon d;
        sbx_client *c;
        long before, after;
        int fd, i;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bgc");
        c = it_connect(&d);
        sbx_exec_opts_init(&o);
        o.shell = "head -c 16777216 /dev/zero";
        o.max_stdout_bytes = 16u << 20;
        ck_assert_int_eq(sbx_exec_background(c, "bgc", &o, &b), SBX_OK);
        r = attach(c, "bgc", b->command_id, 1);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_eq(r->stdout_len, 16u << 20);
        sbx_result_free(r);
        before = daemon_peak_kib(&d);

        fd = it_raw_connect(&d);
        req.has_request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_ATTACH_COMMAND;
        req.attach_command = &ac;
        ac.sandbox_id = "bgc";
        ac.command_id = b->command_id;
        for (i = 0; i < 100; i++) {
                req.request_id = (uint64_t)i + 1;
                it_raw_send(fd, &req);
        }
        sleep(2);
        after = daemon_peak_kib(&d);
        fprintf(stderr, "100 pipelined attaches of 16 MiB, unread: daemon peak %ld -> %ld KiB\n",
                before, after);
        ck_assert_int_lt(after - before, 96 * 1024);
        close(fd);
        /* The daemon serves on. */
        r = attach(c, "bgc", b->command_id, 0);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        sbx_result_free(r);
        sbx_background_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

struct runner {
        struct it_daemon *d;
        struct sbx_result *r;
};

/* An ordinary command (not streamed) on a client of its own: c-1 of sandbox bgd, which
 * prints "two" and ends once /workspace/go is there. */
static void *run_plain(void *arg) {
        struct runner *w = arg;
        sbx_client *c = it_connect(w->d);
        w->r = it_sh(c, "bgd", 60000,
                     "echo one; until [ -e /workspace/go ]; do sleep 0.05; done; echo two; exit 2");
        sbx_close(c);
        return NULL;
}

/* 1 when sandbox sb lists cmd as running. */
static int running_as(sbx_client *c, const char *sb, const char *cmd) {
        struct sbx_sandbox *s = NULL;
        int yes = 0;

        ck_assert_int_eq(sbx_get(c, sb, &s), SBX_OK);
        for (size_t i = 0; i < s->n_commands; i++)
                yes |= strcmp(s->commands[i].command_id, cmd) == 0 &&
                       s->commands[i].state == SBX_COMMAND_RUNNING;
        sbx_sandbox_free(s);
        return yes;
}

struct opener {
        struct it_daemon *d;
        int attaches;
};

/* Once the daemon has taken that many AttachCommand in all, makes /workspace/go in bgd. */
static void *open_gate(void *arg) {
        struct opener *g = arg;
        sbx_client *c = it_connect(g->d);

        it_wait_requests(g->d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND, g->attaches);
        ck_assert_int_eq(sbx_write(c, "bgd", "/workspace/go", "", 0, 0, 0), SBX_OK);
        sbx_close(c);
        return NULL;
}

/* Attach works on any running command: another client follows an ordinary one (its
 * kept output, then the rest) and gets the same result as its requester; once ended it
 * is not kept (only background ones are). */
START_TEST(attach_to_an_ordinary_command) {
        struct it_daemon d;
        struct runner w = {&d, NULL};
        struct opener g = {&d, 0};
        struct sbx_result *r;
        pthread_t t, tg;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        make_sandbox(&d, "bgd");
        pthread_create(&t, NULL, run_plain, &w);
        c = it_connect(&d);
        /* It runs, and waits for the gate. */
        for (double t0 = it_now_ms(); !running_as(c, "bgd", "c-1"); usleep(20 * 1000))
                ck_assert_msg(it_now_ms() - t0 < 30000, "c-1 did not start in 30 s");
        /* Follows it; the gate opens once this attacher is attached. */
        g.attaches = it_requests_taken(&d, SBX__V1__REQUEST__BODY_ATTACH_COMMAND) + 1;
        pthread_create(&tg, NULL, open_gate, &g);
        r = attach(c, "bgd", "c-1", 1);
        pthread_join(tg, NULL);
        pthread_join(t, NULL);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->exit_code, 2);
        ck_assert_str_eq((char *)r->stdout_data, "one\ntwo\n");
        ck_assert_int_eq(w.r->exit_code, 2);
        ck_assert_str_eq((char *)w.r->stdout_data, "one\ntwo\n");
        sbx_result_free(r);
        sbx_result_free(w.r);
        /* Ended and not in the background: nothing is kept for it. */
        {
                struct sbx_attach_opts ao;
                memset(&ao, 0, sizeof(ao));
                ao.command_id = "c-1";
                r = NULL;
                ck_assert_int_eq(sbx_attach(c, "bgd", &ao, &r), SBX_NOT_FOUND);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Many attachers on one connection that does not read, attached before the command
 * printed: each lags once the connection is congested, and at the command's end each
 * queued its whole missed tail at once (two caps each, whatever the congestion): 100
 * attachers of a command that printed 1 MiB on each stream made the daemon hold 200
 * MiB for one connection (a user has 128 connections; the caps go up to 64 MiB). Every
 * attacher must still get all of it once the client reads. */
#define N_ATTACH 100
START_TEST(lagging_attachers_at_the_end) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_create_opts co;
        struct sbx_sandbox *s = NULL;
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__AttachCommand ac = SBX__V1__ATTACH_COMMAND__INIT;
        struct frame_reader fr;
        uint64_t got[N_ATTACH + 1][2];
        int results = 0, fd;
        long before, after;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&co);
        co.id = "at";
        ck_assert_int_eq(sbx_create(c, &co, &s), SBX_OK);
        sbx_sandbox_free(s);
        sbx_exec_opts_init(&o);
        o.shell = "sleep 2; head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2; sleep 1";
        o.timeout_ms = 60000;
        ck_assert_int_eq(sbx_exec_background(c, "at", &o, &b), SBX_OK);
        before = it_proc_status(d.pid, "VmRSS");
        fd = it_raw_connect(&d);
        req.has_request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_ATTACH_COMMAND;
        req.attach_command = &ac;
        ac.sandbox_id = "at";
        ac.command_id = b->command_id;
        ac.has_follow = ac.follow = 1;
        for (int i = 1; i <= N_ATTACH; i++) {
                req.request_id = (uint64_t)i;
                it_raw_send(fd, &req);
        }
        /* The command prints and ends; nothing is read meanwhile. */
        usleep(5000 * 1000);
        after = it_proc_status(d.pid, "VmRSS");
        fprintf(stderr, "lagging_attachers: daemon RSS %ld -> %ld KiB\n", before, after);
        if (!getenv("ASAN_OPTIONS") && !getenv("SBX_VALGRIND"))
                ck_assert_msg(after - before < 48 * 1024,
                              "the daemon's memory grew from %ld to %ld KiB", before, after);
        /* Every attacher gets all of the output and the result. */
        memset(got, 0, sizeof(got));
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        while (results < N_ATTACH) {
                Sbx__V1__Response *r = it_raw_read(fd, &fr, 20000);
                ck_assert_ptr_nonnull(r);
                ck_assert_uint_le(r->request_id, N_ATTACH);
                if (r->body_case == SBX__V1__RESPONSE__BODY_OUTPUT)
                        got[r->request_id][r->output->stream == SBX__V1__STREAM__STDERR] +=
                                r->output->data.len;
                else if (r->body_case == SBX__V1__RESPONSE__BODY_COMMAND_RESULT)
                        results++;
                else
                        ck_abort_msg("attacher %llu: status %d %s",
                                     (unsigned long long)r->request_id,
                                     r->status ? (int)r->status->code : -1,
                                     r->status && r->status->message ? r->status->message : "");
                sbx__v1__response__free_unpacked(r, NULL);
        }
        for (int i = 1; i <= N_ATTACH; i++)
                ck_assert_msg(got[i][0] == 1048576 && got[i][1] == 1048576,
                              "attacher %d got %llu and %llu bytes", i,
                              (unsigned long long)got[i][0], (unsigned long long)got[i][1]);
        frame_reader_free(&fr);
        close(fd);
        sbx_background_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("background");
        struct {
                const char *name;
                const TTest *t;
        } cases[] = {
                {"server_outlives_its_client", server_outlives_its_client},
                {"timeouts", timeouts},
                {"stdin_queued_and_start_failed", stdin_queued_and_start_failed},
                {"listed_bounded_and_recorded", listed_bounded_and_recorded},
                {"idle_timeout_spares_a_background_command",
                 idle_timeout_spares_a_background_command},
                {"many_slow_and_vanished_attachers", many_slow_and_vanished_attachers},
                {"other_users", other_users},
                {"cli", cli},
                {"signal_and_restart", signal_and_restart},
                {"flood_bounded_and_offsets", flood_bounded_and_offsets},
                {"pipelined_attaches_bounded", pipelined_attaches_bounded},
                {"attach_to_an_ordinary_command", attach_to_an_ordinary_command},
                {"lagging_attachers_at_the_end", lagging_attachers_at_the_end},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *t = tcase_create(cases[i].name);
                tcase_add_unchecked_fixture(t, it_fixture_setup, it_fixture_teardown);
                tcase_set_timeout(t, 120);
                tcase_add_test(t, cases[i].t);
                suite_add_tcase(s, t);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
