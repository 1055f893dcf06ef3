/* it_results.c: integration tests of what a caller learns about a command and a
 * sandbox, against a real sbxd: a command's ID as soon as it starts (on_started), a
 * signal forwarded to a running command (sbx_signal, Ctrl-C as a terminal sends it),
 * running commands in the history, results that always come back whatever the output
 * caps, the code of an ended sandbox, and the message of a call misused. Each test
 * asserts an outcome and a bound. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

/* A command run on a thread of its own, on a client of its own, that says its ID as it
 * starts and collects its output as it comes. */
struct bg {
        struct it_daemon *d;
        const char *id;
        const char *shell;
        uint64_t timeout_ms;
        uint64_t max_output;
        int stream; /* an on_output callback too (else libsbx collects the output) */
        pthread_mutex_t mu;
        pthread_cond_t cv;
        char command_id[64];
        int started_calls;
        int output_before_start; /* on_output ran before on_started */
        char out[4096];
        size_t out_len;
        enum sbx_code code;
        struct sbx_result *r;
        int done;
};

static void bg_started(void *ud, const char *command_id) {
        struct bg *b = ud;
        pthread_mutex_lock(&b->mu);
        snprintf(b->command_id, sizeof(b->command_id), "%s", command_id);
        b->started_calls++;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
}

static void bg_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                      size_t len) {
        struct bg *b = ud;
        pthread_mutex_lock(&b->mu);
        if (b->started_calls == 0)
                b->output_before_start = 1;
        if (stream == SBX_STDOUT && b->out_len + len < sizeof(b->out)) {
                memcpy(b->out + b->out_len, data, len);
                b->out_len += len;
                b->out[b->out_len] = 0;
        }
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
}

static void *bg_run(void *arg) {
        struct bg *b = arg;
        sbx_client *c = NULL;
        struct sbx_exec_opts o;
        enum sbx_code code = sbx_connect(b->d->sock, "bg", &c);

        if (code == SBX_OK) {
                sbx_exec_opts_init(&o);
                o.shell = b->shell;
                o.timeout_ms = b->timeout_ms ? b->timeout_ms : 60000;
                o.max_stdout_bytes = o.max_stderr_bytes = b->max_output;
                o.on_started = bg_started;
                o.on_output = b->stream ? bg_output : NULL;
                o.userdata = b;
                code = sbx_exec(c, b->id, &o, &b->r);
        }
        sbx_close(c);
        pthread_mutex_lock(&b->mu);
        b->code = code;
        b->done = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return NULL;
}

static void bg_start(struct bg *b, pthread_t *th, struct it_daemon *d, const char *id,
                     const char *shell, int stream) {
        memset(b, 0, sizeof(*b));
        b->d = d;
        b->id = id;
        b->shell = shell;
        b->stream = stream;
        pthread_mutex_init(&b->mu, NULL);
        pthread_cond_init(&b->cv, NULL);
        ck_assert_int_eq(pthread_create(th, NULL, bg_run, b), 0);
}

/* Waits (10 s at most) until the command has started and, when want is not NULL, its
 * stdout holds want. Returns 1 when it did. */
static int bg_wait(struct bg *b, const char *want) {
        struct timespec until;
        int ok;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_mutex_lock(&b->mu);
        while (!b->done && !(b->started_calls && (!want || strstr(b->out, want))))
                if (pthread_cond_timedwait(&b->cv, &b->mu, &until) != 0)
                        break;
        ok = b->started_calls && (!want || strstr(b->out, want));
        pthread_mutex_unlock(&b->mu);
        return ok;
}

/* ---- the command's ID at its start, and a signal forwarded to it ------------------- */

/* on_started gives the command's ID on the calling thread before any output; another
 * client sends SIGINT with it: the command's trap runs (it is not killed), and the
 * result says how the command chose to end, not "cancelled". */
START_TEST(started_id_and_sigint_runs_the_trap) {
        struct it_daemon d;
        struct bg b;
        pthread_t th;
        sbx_client *c;
        char *id;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        bg_start(&b, &th, &d, id,
                 "trap 'echo got INT; exit 3' INT; echo ready; "
                 "while :; do sleep 0.05; done",
                 1);
        ck_assert_msg(bg_wait(&b, "ready"), "the command did not start and print");
        ck_assert_str_eq(b.command_id, "c-1");
        ck_assert_int_eq(b.output_before_start, 0);
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_signal(c, id, b.command_id, SIGINT), SBX_OK);
        pthread_join(th, NULL);
        ck_assert_double_lt(it_now_ms() - t0, 20000); /* the loop never ends by itself */
        ck_assert_int_eq(b.code, SBX_OK);
        ck_assert_int_eq(b.started_calls, 1);
        ck_assert_str_eq(b.r->command_id, "c-1");
        ck_assert_msg(b.r->outcome == SBX_OUTCOME_EXITED && b.r->exit_code == 3,
                      "outcome %s exit %d", sbx_outcome_name(b.r->outcome), b.r->exit_code);
        ck_assert_ptr_nonnull(strstr(b.out, "got INT"));
        sbx_result_free(b.r);
        /* Finished: there is nothing to signal any more. */
        ck_assert_int_eq(sbx_signal(c, id, "c-1", SIGINT), SBX_NOT_FOUND);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A command that ignores SIGTERM lives on after it; SIGKILL through sbx_signal is the
 * cancel (outcome cancelled, stopped within a bound); signals that are not a request
 * to stop (a stop, a fault, 0, out of range) are refused before anything is sent. With
 * on_started and no on_output, the output still comes back in the result. */
START_TEST(signal_choices_and_kill_escalation) {
        static const int refused[] = {0, -1, SIGSTOP, SIGTSTP, SIGSEGV, SIGCONT, SIGCHLD, 65, 1000};
        struct it_daemon d;
        struct bg b;
        struct sbx_history *h = NULL;
        pthread_t th;
        sbx_client *c;
        char *id;
        size_t i;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        bg_start(&b, &th, &d, id,
                 "trap '' TERM; echo ready > /tmp/ready; echo out; "
                 "while :; do sleep 0.05; done",
                 0);
        ck_assert(bg_wait(&b, NULL));
        /* Its trap is set once /tmp/ready is there (however long that took). */
        for (i = 0;; i++) {
                struct sbx_read_result *rr = NULL;
                enum sbx_code rc = sbx_read(c, id, "/tmp/ready", 0, 0, &rr);
                sbx_read_result_free(rr);
                if (rc == SBX_OK)
                        break;
                ck_assert_msg(i < 1500, "no /tmp/ready after 30 s");
                usleep(20000);
        }
        for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                ck_assert_msg(sbx_signal(c, id, b.command_id, refused[i]) == SBX_INVALID_ARGUMENT,
                              "signal %d was not refused: %s", refused[i], sbx_error_message(c));
                ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "SIGINT"));
        }
        ck_assert_int_eq(sbx_signal(c, id, b.command_id, SIGTERM), SBX_OK);
        usleep(300000);
        /* Still running after SIGTERM, which it ignores; and shown so in the history. */
        pthread_mutex_lock(&b.mu);
        ck_assert_int_eq(b.done, 0);
        pthread_mutex_unlock(&b.mu);
        ck_assert_int_eq(sbx_history(c, id, 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 1);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_RUNNING);
        ck_assert_str_eq(sbx_outcome_name(h->v[0].outcome), "running");
        ck_assert_int_eq(h->v[0].ended_unix_ms, 0);
        sbx_history_free(h);
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_signal(c, id, b.command_id, SIGKILL), SBX_OK);
        pthread_join(th, NULL);
        ck_assert_double_lt(it_now_ms() - t0, 20000); /* it ignores the rest */
        ck_assert_int_eq(b.code, SBX_OK);
        ck_assert_int_eq(b.r->outcome, SBX_OUTCOME_CANCELLED);
        ck_assert_str_eq((const char *)b.r->stdout_data, "out\n");
        sbx_result_free(b.r);
        ck_assert_int_eq(sbx_history(c, id, 0, 0, &h), SBX_OK);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_CANCELLED);
        sbx_history_free(h);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A command is in the history as running at once, not only once its record is
 * written some milliseconds later. */
START_TEST(history_shows_a_command_just_started) {
        struct it_daemon d;
        struct bg b;
        struct sbx_history *h = NULL;
        pthread_t th;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        bg_start(&b, &th, &d, id, "sleep 30", 0);
        ck_assert(bg_wait(&b, NULL));
        ck_assert_int_eq(sbx_history(c, id, 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 1);
        ck_assert_str_eq(h->v[0].command_id, b.command_id);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_RUNNING);
        sbx_history_free(h);
        ck_assert_int_eq(sbx_cancel(c, id, b.command_id), SBX_OK);
        pthread_join(th, NULL);
        ck_assert_int_eq(b.r->outcome, SBX_OUTCOME_CANCELLED);
        sbx_result_free(b.r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- results that always come back ------------------------------------------------ */

/* Runs shell with both caps at max_output and returns the result; asserts SBX_OK. */
static struct sbx_result *run_capped(sbx_client *c, const char *id, const char *shell,
                                     uint64_t max_output) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code rc;
        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = 120000;
        o.max_stdout_bytes = o.max_stderr_bytes = max_output;
        rc = sbx_exec(c, id, &o, &r);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        return r;
}

/* Whether the n bytes at p are all ch. */
static int all_of(const uint8_t *p, size_t n, uint8_t ch) {
        for (size_t i = 0; i < n; i++)
                if (p[i] != ch)
                        return 0;
        return 1;
}

/* The largest caps with both streams full: the result comes back (the kept tails in
 * chunks before it), with the right counts and flags, and its tail is the end of what
 * the command wrote. */
START_TEST(result_at_the_maximum_caps_comes_back) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        /* One stream over the cap: 200 MB of 'a' and a last line. */
        r = run_capped(c, id, "head -c 200000000 /dev/zero | tr '\\0' a; echo; echo the-end",
                       SBX_MAX_OUTPUT_BYTES);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->exit_code, 0);
        ck_assert_uint_eq(r->stdout_len, SBX_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stdout_bytes, 200000000 + 9);
        ck_assert(r->stdout_truncated);
        ck_assert(all_of(r->stdout_data, SBX_MAX_OUTPUT_BYTES - 9, 'a'));
        ck_assert_str_eq((const char *)r->stdout_data + SBX_MAX_OUTPUT_BYTES - 9, "\nthe-end\n");
        ck_assert_uint_eq(r->stderr_len, 0);
        ck_assert(!r->stderr_truncated);
        sbx_result_free(r);
        /* Both streams full at the maximum: 128 MiB kept, twice a frame. */
        r = run_capped(c, id,
                       "head -c 80000000 /dev/zero | tr '\\0' o; "
                       "head -c 70000000 /dev/zero | tr '\\0' e >&2",
                       SBX_MAX_OUTPUT_BYTES);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_eq(r->stdout_len, SBX_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stderr_len, SBX_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stdout_bytes, 80000000);
        ck_assert_uint_eq(r->stderr_bytes, 70000000);
        ck_assert(r->stdout_truncated && r->stderr_truncated);
        ck_assert(all_of(r->stdout_data, r->stdout_len, 'o'));
        ck_assert(all_of(r->stderr_data, r->stderr_len, 'e'));
        sbx_result_free(r);
        /* Both full at 40 MiB, kept whole (not truncated). */
        r = run_capped(c, id,
                       "head -c 41943040 /dev/zero | tr '\\0' o; "
                       "head -c 41943040 /dev/zero | tr '\\0' e >&2",
                       40u << 20);
        ck_assert_uint_eq(r->stdout_len, 40u << 20);
        ck_assert_uint_eq(r->stderr_len, 40u << 20);
        ck_assert(!r->stdout_truncated && !r->stderr_truncated);
        ck_assert(all_of(r->stdout_data, r->stdout_len, 'o'));
        ck_assert(all_of(r->stderr_data, r->stderr_len, 'e'));
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A daemon with the smallest frame limit (1 MiB) still returns a result whose default
 * caps (1 MiB a stream) are full; and the next command on the connection is fine. */
START_TEST(result_larger_than_a_small_frame_comes_back) {
        const char *flags[] = {"--max-frame-bytes", "1048576", NULL};
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = run_capped(c, id,
                       "head -c 3000000 /dev/zero | tr '\\0' o; "
                       "head -c 1500000 /dev/zero | tr '\\0' e >&2; echo -n E >&2",
                       0);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_uint_eq(r->stdout_len, SBX_DEFAULT_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stderr_len, SBX_DEFAULT_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stdout_bytes, 3000000);
        ck_assert_uint_eq(r->stderr_bytes, 1500001);
        ck_assert(r->stdout_truncated && r->stderr_truncated);
        ck_assert(all_of(r->stdout_data, r->stdout_len, 'o'));
        ck_assert(all_of(r->stderr_data, r->stderr_len - 1, 'e'));
        ck_assert_int_eq(r->stderr_data[r->stderr_len - 1], 'E');
        sbx_result_free(r);
        r = it_sh(c, id, 10000, "echo next");
        ck_assert_str_eq((const char *)r->stdout_data, "next\n");
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A cap above the maximum is refused before anything runs, naming the field. */
START_TEST(cap_above_the_maximum_is_refused_before_running) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct sbx_read_result *rr = NULL;
        struct sbx_history *h = NULL;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        sbx_exec_opts_init(&o);
        o.shell = "echo ran > /workspace/ran";
        o.max_stdout_bytes = SBX_MAX_OUTPUT_BYTES + 1;
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_null(r);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "max_stdout_bytes 67108865"));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "nothing was run"));
        o.max_stdout_bytes = 0;
        o.max_stderr_bytes = 65ull << 20;
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "max_stderr_bytes"));
        ck_assert_int_eq(sbx_read(c, id, "/workspace/ran", 0, 0, &rr), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_history(c, id, 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 0);
        sbx_history_free(h);
        /* Exactly the maximum is accepted. */
        o.max_stdout_bytes = o.max_stderr_bytes = SBX_MAX_OUTPUT_BYTES;
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* on_started without on_output streams the command and libsbx keeps the tail itself:
 * the bytes of the tail in order (across its ring's wrap), the flags, and at a rate that
 * does not copy the kept tail per chunk (200 MB through a 64 MiB cap in seconds). */
START_TEST(started_only_keeps_the_tail_in_order) {
        enum { N = 400000 };
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct bg b;
        char *expected, *p;
        size_t elen = 0;
        sbx_client *c;
        char *id;
        double t0;

        expected = malloc((size_t)N * 8);
        ck_assert_ptr_nonnull(expected);
        for (int i = 1; i <= N; i++)
                elen += (size_t)sprintf(expected + elen, "%d\n", i);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        memset(&b, 0, sizeof(b));
        sbx_exec_opts_init(&o);
        o.shell = "seq 1 400000; echo err >&2";
        o.timeout_ms = 60000;
        o.max_stdout_bytes = 100000;
        o.on_started = bg_started;
        o.userdata = &b;
        pthread_mutex_init(&b.mu, NULL);
        pthread_cond_init(&b.cv, NULL);
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
        ck_assert_int_eq(b.started_calls, 1);
        ck_assert_uint_eq(r->stdout_bytes, elen);
        ck_assert_uint_eq(r->stdout_len, 100000);
        ck_assert(r->stdout_truncated);
        ck_assert_mem_eq(r->stdout_data, expected + elen - 100000, 100000);
        ck_assert_int_eq(r->stdout_data[r->stdout_len], 0);
        ck_assert_str_eq((const char *)r->stderr_data, "err\n");
        ck_assert(!r->stderr_truncated);
        sbx_result_free(r);
        /* 200 MB through the largest cap. */
        o.shell = "head -c 200000000 /dev/zero | tr '\\0' a; printf END";
        o.max_stdout_bytes = SBX_MAX_OUTPUT_BYTES;
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
        ck_assert_double_lt(it_now_ms() - t0, 15000);
        ck_assert_uint_eq(r->stdout_len, SBX_MAX_OUTPUT_BYTES);
        ck_assert_uint_eq(r->stdout_bytes, 200000003);
        ck_assert(r->stdout_truncated);
        p = (char *)r->stdout_data;
        ck_assert_str_eq(p + SBX_MAX_OUTPUT_BYTES - 3, "END");
        ck_assert(all_of(r->stdout_data, SBX_MAX_OUTPUT_BYTES - 3, 'a'));
        sbx_result_free(r);
        free(expected);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- an ended sandbox has a code of its own ------------------------------------------ */

/* Every request on an ended sandbox (terminated, or expired at its deadline) is
 * SANDBOX_ENDED, which callers must not retry; a daemon out of reach is UNAVAILABLE
 * with the errno of the failure. */
START_TEST(ended_sandbox_is_sandbox_ended_not_unavailable) {
        static const char *const ids[] = {"ends", "expires"};
        struct it_daemon d;
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r = NULL;
        struct sbx_exec_opts o;
        sbx_client *c;
        size_t i;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "ends"));
        sbx_create_opts_init(&co);
        co.id = "expires";
        co.timeout_ms = 300;
        ck_assert_int_eq(sbx_create(c, &co, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        ck_assert_int_eq(sbx_terminate(c, "ends", NULL), SBX_OK);
        t0 = it_now_ms();
        for (;;) {
                ck_assert_int_eq(sbx_get(c, "expires", &sb), SBX_OK);
                if (sb->state == SBX_STATE_EXPIRED)
                        break;
                sbx_sandbox_free(sb);
                ck_assert_double_lt(it_now_ms() - t0, 10000);
                usleep(50000);
        }
        sbx_sandbox_free(sb);
        sbx_exec_opts_init(&o);
        o.shell = "true";
        for (i = 0; i < 2; i++) {
                ck_assert_int_eq(sbx_exec(c, ids[i], &o, &r), SBX_SANDBOX_ENDED);
                ck_assert_ptr_null(r);
                ck_assert_msg(strstr(sbx_error_message(c), "has ended"), "%s",
                              sbx_error_message(c));
                ck_assert_int_eq(sbx_errno(c), 0);
                ck_assert_int_eq(sbx_cancel(c, ids[i], "c-1"), SBX_SANDBOX_ENDED);
                ck_assert_int_eq(sbx_signal(c, ids[i], "c-1", SIGINT), SBX_SANDBOX_ENDED);
                ck_assert_int_eq(sbx_set_timeout(c, ids[i], 60000, NULL), SBX_SANDBOX_ENDED);
                ck_assert_int_eq(sbx_mkdir(c, ids[i], "d", 0, 0), SBX_SANDBOX_ENDED);
                /* Reading its record and terminating it again are fine. */
                ck_assert_int_eq(sbx_get(c, ids[i], &sb), SBX_OK);
                sbx_sandbox_free(sb);
                ck_assert_int_eq(sbx_terminate(c, ids[i], NULL), SBX_OK);
        }
        ck_assert_int_eq(sbx_exec(c, "never-was", &o, &r), SBX_NOT_FOUND);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(sbx_get(c, "ends", &sb), SBX_UNAVAILABLE);
        ck_assert_int_ne(sbx_errno(c), 0);
        sbx_close(c);
}
END_TEST

/* ---- a misused call says what is wrong with it ------------------------------------ */

/* Sets a failure on c that the misused calls below must not repeat. */
static void fail_first(sbx_client *c) {
        struct sbx_sandbox *sb = NULL;
        ck_assert_int_eq(sbx_get(c, "no-such-box", &sb), SBX_NOT_FOUND);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "no-such-box"));
}

/* Asserts that the last call on c failed with its own message naming fn and what. */
static void assert_own_message(sbx_client *c, enum sbx_code rc, const char *fn, const char *what) {
        const char *m = sbx_error_message(c);
        ck_assert_int_eq(rc, SBX_INVALID_ARGUMENT);
        ck_assert_msg(!strstr(m, "no-such-box"), "%s repeats the previous message: %s", fn, m);
        ck_assert_msg(strstr(m, fn) || strstr(m, what), "%s: '%s' says neither %s nor %s", fn, m,
                      fn, what);
        ck_assert_int_ne(sbx_errno(c), 0);
}

/* sbx_exec(c, id, &o, NULL) and the like fail with their own message, not the previous
 * call's; so do bad options. The connection stays usable. */
START_TEST(misuse_reports_its_own_error) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        sbx_exec_opts_init(&o);
        o.shell = "true";
#define MISUSE(call, fn, what)                                                                     \
        do {                                                                                       \
                fail_first(c);                                                                     \
                assert_own_message(c, call, fn, what);                                             \
        } while (0)
        MISUSE(sbx_exec(c, id, &o, NULL), "sbx_exec", "ret");
        MISUSE(sbx_exec(c, NULL, &o, &r), "sbx_exec", "sandbox ID");
        MISUSE(sbx_exec(c, id, NULL, &r), "sbx_exec", "options");
        MISUSE(sbx_get(c, id, NULL), "sbx_get", "ret");
        MISUSE(sbx_hello(c, NULL), "sbx_hello", "ret");
        MISUSE(sbx_create(c, NULL, NULL), "sbx_create", "ret");
        MISUSE(sbx_list(c, NULL, NULL), "sbx_list", "ret");
        MISUSE(sbx_read(c, id, "f", 0, 0, NULL), "sbx_read", "ret");
        MISUSE(sbx_read(c, id, NULL, 0, 0, (struct sbx_read_result **)&r), "sbx_read", "path");
        MISUSE(sbx_list_dir(c, id, "/", 0, NULL), "sbx_list_dir", "ret");
        MISUSE(sbx_stat(c, id, "/", NULL), "sbx_stat", "ret");
        MISUSE(sbx_history(c, id, 0, 0, NULL), "sbx_history", "ret");
        MISUSE(sbx_cancel(c, id, NULL), "sbx_cancel", "command ID");
        MISUSE(sbx_signal(c, id, "", SIGINT), "sbx_signal", "command ID");
        o.stdin_stream = 1;
        o.stdin_fd = -1;
        MISUSE(sbx_exec(c, id, &o, &r), "sbx_exec", "stdin_fd");
        o.stdin_stream = 0;
        o.argv = NULL;
        o.argc = 2;
        MISUSE(sbx_exec(c, id, &o, &r), "sbx_exec", "argv");
#undef MISUSE
        ck_assert_ptr_null(r);
        /* NULL client: the code, and a message that says so. */
        ck_assert_int_eq(sbx_exec(NULL, id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_str_ne(sbx_error_message(NULL), "");
        /* Still usable, and a success clears the message. */
        o.argc = 0;
        r = it_sh(c, id, 10000, "echo fine");
        ck_assert_str_eq((const char *)r->stdout_data, "fine\n");
        sbx_result_free(r);
        ck_assert_str_eq(sbx_error_message(c), "");
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The messages a user acts on: where to start sbxd from (a source tree too), and the
 * field names of file errors exactly as sbx maps them to its flags. */
START_TEST(messages_name_what_to_do) {
        char path[700];
        struct it_daemon d;
        sbx_client *c = NULL;
        char *id;

        snprintf(path, sizeof(path), "%s/nothing.sock", it_base_dir());
        ck_assert_int_eq(sbx_connect(path, "t", &c), SBX_UNAVAILABLE);
        ck_assert_msg(strstr(sbx_error_message(c), "`make run` in its source tree") &&
                              strstr(sbx_error_message(c), "`systemctl start sbxd`"),
                      "%s", sbx_error_message(c));
        sbx_close(c);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        ck_assert_int_eq(sbx_write(c, id, "/workspace/no/dir/f", "x", 1, 0, 0), SBX_NOT_FOUND);
        ck_assert_msg(strstr(sbx_error_message(c), "pass create_parents to make it"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(sbx_mkdir(c, id, "/workspace", 0, 0), SBX_ALREADY_EXISTS);
        ck_assert_msg(strstr(sbx_error_message(c), "pass parents"), "%s", sbx_error_message(c));
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- lifetimes through libsbx -------------------------------------------------------- */

/* idle_timeout_ms 0 is the daemon's default idle timeout, SBX_IDLE_TIMEOUT_NONE none at
 * all (the wire's 0); set_timeout beyond the daemon's maximum says the bound from now. */
START_TEST(idle_timeout_default_and_none) {
        const char *flags[] = {"--default-idle-timeout", "77", NULL};
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        ck_assert_uint_eq(sb->idle_timeout_ms, 77000);
        sbx_sandbox_free(sb);
        o.idle_timeout_ms = SBX_IDLE_TIMEOUT_NONE;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        ck_assert_uint_eq(sb->idle_timeout_ms, 0);
        ck_assert_int_eq(sbx_set_timeout(c, sb->id, 8ull * 24 * 3600 * 1000, NULL),
                         SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "from now"), "%s", sbx_error_message(c));
        ck_assert_int_eq(sbx_set_timeout(c, sb->id, 6ull * 24 * 3600 * 1000, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        o.idle_timeout_ms = 5000;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        ck_assert_uint_eq(sb->idle_timeout_ms, 5000);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("results");
        TCase *tc = tcase_create("results");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, started_id_and_sigint_runs_the_trap);
        tcase_add_test(tc, signal_choices_and_kill_escalation);
        tcase_add_test(tc, history_shows_a_command_just_started);
        tcase_add_test(tc, result_at_the_maximum_caps_comes_back);
        tcase_add_test(tc, result_larger_than_a_small_frame_comes_back);
        tcase_add_test(tc, cap_above_the_maximum_is_refused_before_running);
        tcase_add_test(tc, started_only_keeps_the_tail_in_order);
        tcase_add_test(tc, ended_sandbox_is_sandbox_ended_not_unavailable);
        tcase_add_test(tc, misuse_reports_its_own_error);
        tcase_add_test(tc, messages_name_what_to_do);
        tcase_add_test(tc, idle_timeout_default_and_none);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
