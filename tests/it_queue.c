/* it_queue.c: integration tests of a shared sandbox taking bursts, against a
 * real sbxd: commands over the sandbox's running cap wait for a slot in a queue instead
 * of failing; only a full queue is refused, naming its bound; a command that waits past
 * its queue_timeout_ms never runs; cancel, a client that goes away and Terminate end
 * waiting commands without running them; and one client flooding the queue does not
 * starve another of the same sandbox. Streamed requests see CommandQueued first.
 *
 * The burst goes through libsbx as agents use it; the rest speaks the raw protocol, to
 * see each response in order. */
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdint.h>

#include "frame.h"
#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

/* ---- a raw connection ------------------------------------------------------------- */

struct raw {
        int fd;
        struct frame_reader fr;
        uint64_t next_id;
};

static void raw_open(struct raw *r, struct it_daemon *d) {
        r->fd = it_raw_connect(d);
        frame_reader_init(&r->fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        r->next_id = 1;
}

static void raw_close(struct raw *r) {
        if (r->fd >= 0)
                close(r->fd);
        r->fd = -1;
        frame_reader_free(&r->fr);
}

/* Sends a RunCommand of shell in sandbox sb; wait_ms < 0: no queue_timeout_ms. Returns
 * its request id. */
static uint64_t raw_run(struct raw *r, char *sb, char *shell, int stream, long wait_ms) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;

        rc.sandbox_id = sb;
        rc.shell = shell;
        rc.has_timeout_ms = 1;
        rc.timeout_ms = 60000;
        rc.has_stream = stream;
        rc.stream = stream;
        if (wait_ms >= 0) {
                rc.has_queue_timeout_ms = 1;
                rc.queue_timeout_ms = (uint64_t)wait_ms;
        }
        req.has_request_id = 1;
        req.request_id = r->next_id++;
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &rc;
        it_raw_send(r->fd, &req);
        return req.request_id;
}

static uint64_t raw_cancel(struct raw *r, char *sb, char *command_id) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;

        cc.sandbox_id = sb;
        cc.command_id = command_id;
        req.has_request_id = 1;
        req.request_id = r->next_id++;
        req.body_case = SBX__V1__REQUEST__BODY_CANCEL_COMMAND;
        req.cancel_command = &cc;
        it_raw_send(r->fd, &req);
        return req.request_id;
}

/* Sends a CommandInput of data to command_id in sandbox sb. Returns its request id. */
static uint64_t raw_input(struct raw *r, char *sb, char *command_id, const char *data) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;

        in.sandbox_id = sb;
        in.command_id = command_id;
        in.has_data = 1;
        in.data.data = (uint8_t *)(uintptr_t)data;
        in.data.len = strlen(data);
        req.has_request_id = 1;
        req.request_id = r->next_id++;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        it_raw_send(r->fd, &req);
        return req.request_id;
}

static uint64_t raw_simple(struct raw *r, Sbx__V1__Request__BodyCase body, char *sb) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Terminate t = SBX__V1__TERMINATE__INIT;
        Sbx__V1__GetSandbox g = SBX__V1__GET_SANDBOX__INIT;

        req.has_request_id = 1;
        req.request_id = r->next_id++;
        req.body_case = body;
        if (body == SBX__V1__REQUEST__BODY_TERMINATE) {
                t.sandbox_id = sb;
                req.terminate = &t;
        } else {
                g.sandbox_id = sb;
                req.get_sandbox = &g;
        }
        it_raw_send(r->fd, &req);
        return req.request_id;
}

/* The next response for request rid of the kind body (any kind: 0), skipping the
 * others (freed); fails the test after timeout_ms. */
static Sbx__V1__Response *raw_expect(struct raw *r, uint64_t rid, int body, int timeout_ms) {
        double until = it_now_ms() + timeout_ms;

        for (;;) {
                int left = (int)(until - it_now_ms());
                Sbx__V1__Response *resp;

                ck_assert_msg(left > 0, "no response %d to request %llu within %d ms", body,
                              (unsigned long long)rid, timeout_ms);
                resp = it_raw_read(r->fd, &r->fr, left);
                ck_assert_msg(resp, "the daemon closed the connection waiting for request %llu",
                              (unsigned long long)rid);
                if (resp->request_id == rid &&
                    (body == 0 || (int)resp->body_case == body || resp->status->code != 0))
                        return resp;
                sbx__v1__response__free_unpacked(resp, NULL);
        }
}

/* The CommandResult of request rid (its status OK). */
static Sbx__V1__Response *raw_result(struct raw *r, uint64_t rid, int timeout_ms) {
        Sbx__V1__Response *resp =
                raw_expect(r, rid, SBX__V1__RESPONSE__BODY_COMMAND_RESULT, timeout_ms);
        ck_assert_msg(resp->status->code == 0, "request %llu: %d %s", (unsigned long long)rid,
                      resp->status->code, resp->status->message);
        return resp;
}

static void free_resp(Sbx__V1__Response *resp) {
        sbx__v1__response__free_unpacked(resp, NULL);
}

/* The shell's output of `shell` in sandbox sb (libsbx). */
static char *sh_out(struct it_daemon *d, const char *sb, const char *shell) {
        sbx_client *c = it_connect(d);
        struct sbx_result *res = it_sh(c, sb, 20000, shell);
        char *out = strndup((const char *)res->stdout_data, res->stdout_len);
        sbx_result_free(res);
        sbx_close(c);
        return out;
}

/* it_wait_commands on a connection of its own. */
static void wait_commands(struct it_daemon *d, const char *sb, uint32_t running, uint32_t queued) {
        sbx_client *c = it_connect(d);

        it_wait_commands(c, sb, running, queued);
        sbx_close(c);
}

/* Waits (30 s at most) until the records of d hold count rows for sql's condition. */
static void wait_records(struct it_daemon *d, const char *sql, int count) {
        double t0 = it_now_ms();

        while (it_db_int(d, sql) != count) {
                ck_assert_msg(it_now_ms() - t0 < 30000, "%d, not %d, after 30 s: %s",
                              it_db_int(d, sql), count, sql);
                usleep(20000);
        }
}

/* Makes /workspace/go in sandbox sb: the gated commands (GATED) go on. */
static void open_gate(struct it_daemon *d, const char *sb) {
        sbx_client *c = it_connect(d);

        ck_assert_int_eq(sbx_write(c, sb, "/workspace/go", "", 0, 0, 0), SBX_OK);
        sbx_close(c);
}

/* A shell prefix that waits until open_gate. */
#define GATED "until [ -e /workspace/go ]; do sleep 0.05; done; "

static char *make_sandbox(struct it_daemon *d, const char *id) {
        sbx_client *c = it_connect(d);
        char *got = it_create(c, id);
        sbx_close(c);
        return got;
}

/* ---- a burst of many agents ------------------------------------------------------- */

#define CLIENTS    32
#define PER_CLIENT 10
#define BURST_CAP  4

struct agent {
        struct it_daemon *d;
        int ok, failed, max_seen;
        char why[256];
};

/* Each command counts the commands running beside it (markers in the workspace) while
 * it runs, and says the count. */
static const char *count_neighbours =
        "t=/workspace/run.$$; : > $t; n=$(ls /workspace | grep -c '^run\\.'); sleep 0.05; "
        "rm -f $t; echo $n";

static void *agent_run(void *arg) {
        struct agent *a = arg;
        sbx_client *c = NULL;
        enum sbx_code code = sbx_connect(a->d->sock, "agent", &c);
        int i;

        for (i = 0; i < PER_CLIENT && code == SBX_OK; i++) {
                struct sbx_exec_opts o;
                struct sbx_result *res = NULL;

                sbx_exec_opts_init(&o);
                o.shell = count_neighbours;
                o.timeout_ms = 60000;
                code = sbx_exec(c, "burst", &o, &res);
                if (code != SBX_OK) {
                        snprintf(a->why, sizeof(a->why), "%s: %s", sbx_code_name(code),
                                 sbx_error_message(c));
                } else if (res->outcome != SBX_OUTCOME_EXITED || res->exit_code != 0) {
                        snprintf(a->why, sizeof(a->why), "outcome %s exit %d",
                                 sbx_outcome_name(res->outcome), res->exit_code);
                        a->failed++;
                } else {
                        int n = atoi((const char *)res->stdout_data);
                        a->ok++;
                        if (n > a->max_seen)
                                a->max_seen = n;
                }
                sbx_result_free(res);
        }
        if (code != SBX_OK)
                a->failed++;
        sbx_close(c);
        return NULL;
}

/* 32 clients x 10 short commands in one sandbox of cap 4: every one served, none
 * turned away, never more than 4 running at once, and the waits on record. */
START_TEST(burst_all_served) {
        const char *flags[] = {"--max-commands", "4", NULL};
        struct agent a[CLIENTS];
        pthread_t t[CLIENTS];
        struct it_daemon d;
        int i, ok = 0, max_seen = 0;
        double t0;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "burst"));
        t0 = it_now_ms();
        for (i = 0; i < CLIENTS; i++) {
                memset(&a[i], 0, sizeof(a[i]));
                a[i].d = &d;
                ck_assert_int_eq(pthread_create(&t[i], NULL, agent_run, &a[i]), 0);
        }
        for (i = 0; i < CLIENTS; i++) {
                pthread_join(t[i], NULL);
                ck_assert_msg(a[i].failed == 0, "client %d: %s", i, a[i].why);
                ok += a[i].ok;
                if (a[i].max_seen > max_seen)
                        max_seen = a[i].max_seen;
        }
        ck_assert_int_eq(ok, CLIENTS * PER_CLIENT);
        ck_assert_int_ge(max_seen, 1);
        ck_assert_int_le(max_seen, BURST_CAP);
        /* 320 commands of 50 ms, 4 at a time, take at least 4 s; far less than a minute. */
        ck_assert_double_lt(it_now_ms() - t0, 60000);
        ck_assert_int_ge(it_db_int(&d, "SELECT count(*) FROM commands WHERE queued_ms > 0"), 1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE outcome = 'exited'"),
                         CLIENTS * PER_CLIENT);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Cap 1, queue of 2: two requests wait (told 0 and 1 ahead), the third is refused
 * naming the bound; GetSandbox counts them; one cancelled while it waits never starts;
 * Terminate ends the one still waiting with the sandbox. */
START_TEST(full_queue_cancel_and_terminate) {
        const char *flags[] = {"--max-commands", "1", "--max-queued", "2", NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        uint64_t busy, b, c, full, rid;
        char b_id[64];
        struct raw r;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "q"));
        raw_open(&r, &d);
        busy = raw_run(&r, "q", "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));

        b = raw_run(&r, "q", "touch /workspace/b-ran", 1, -1);
        resp = raw_expect(&r, b, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000);
        ck_assert_int_eq(resp->status->code, 0);
        ck_assert_uint_eq(resp->command_queued->ahead, 0);
        snprintf(b_id, sizeof(b_id), "%s", resp->command_queued->command_id);
        free_resp(resp);
        c = raw_run(&r, "q", "touch /workspace/c-ran", 1, -1);
        resp = raw_expect(&r, c, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000);
        ck_assert_uint_eq(resp->command_queued->ahead, 1);
        free_resp(resp);

        /* Input for a command that waits is refused, saying when to send it. */
        rid = raw_input(&r, "q", b_id, "early");
        resp = raw_expect(&r, rid, 0, 10000);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__FAILED_PRECONDITION);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "is waiting for a slot"));
        free_resp(resp);

        full = raw_run(&r, "q", "true", 0, -1);
        resp = raw_expect(&r, full, 0, 10000);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__RESOURCE_EXHAUSTED);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "already has 2 commands waiting"));
        ck_assert_ptr_nonnull(strstr(resp->status->message, "--max-queued"));
        free_resp(resp);

        rid = raw_simple(&r, SBX__V1__REQUEST__BODY_GET_SANDBOX, "q");
        resp = raw_expect(&r, rid, SBX__V1__RESPONSE__BODY_SANDBOX, 10000);
        ck_assert_uint_eq(resp->sandbox->queued_commands, 2);
        ck_assert_uint_eq(resp->sandbox->running_commands, 1);
        free_resp(resp);

        /* Cancelled while waiting: its result at once, CANCELLED, never started. */
        rid = raw_cancel(&r, "q", b_id);
        resp = raw_expect(&r, b, 0, 10000);
        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_COMMAND_RESULT);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__CANCELLED);
        ck_assert(resp->command_result->duration == 0);
        free_resp(resp);
        free_resp(raw_expect(&r, rid, SBX__V1__RESPONSE__BODY_EMPTY, 10000));

        /* Terminate: the running one and the waiting one end with the sandbox. */
        rid = raw_simple(&r, SBX__V1__REQUEST__BODY_TERMINATE, "q");
        resp = raw_result(&r, c, 20000);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        ck_assert(resp->command_result->duration == 0);
        free_resp(resp);
        resp = raw_result(&r, busy, 20000);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        free_resp(resp);
        free_resp(raw_expect(&r, rid, SBX__V1__RESPONSE__BODY_SANDBOX, 20000));
        raw_close(&r);
        /* Neither ever ran (their records say so). */
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE sandbox_id = 'q' "
                                       "AND command_id IN ('c-2', 'c-3') AND duration = 0"),
                         2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A command that waits longer than its queue_timeout_ms ends QUEUE_TIMEOUT after about
 * that long and never runs, while the command in its way goes on. */
START_TEST(queue_timeout_never_runs) {
        const char *flags[] = {"--max-commands", "1", NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        uint64_t busy, late;
        struct raw r;
        double t0, took;
        char *out;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qt"));
        raw_open(&r, &d);
        busy = raw_run(&r, "qt", "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        t0 = it_now_ms();
        late = raw_run(&r, "qt", "touch /workspace/late-ran", 0, 300);
        resp = raw_result(&r, late, 10000);
        took = it_now_ms() - t0;
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
        ck_assert_uint_ge(resp->command_result->queued_ms, 280);
        ck_assert_double_ge(took, 280);
        ck_assert_double_lt(took, 5000);
        free_resp(resp);
        /* 0: never wait, the old refusal at once. */
        late = raw_run(&r, "qt", "true", 0, 0);
        resp = raw_expect(&r, late, 0, 10000);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__RESOURCE_EXHAUSTED);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "its maximum (Limits.commands)"));
        free_resp(resp);
        raw_close(&r); /* cancels the sleep */
        out = sh_out(&d, "qt", "test -e /workspace/late-ran; echo $?");
        ck_assert_str_eq(out, "1\n");
        free(out);
        ck_assert_int_eq(it_db_int(&d,
                                   "SELECT count(*) FROM commands WHERE outcome = 'queue_timeout' "
                                   "AND queued_ms >= 280"),
                         1);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client that goes away while its command waits: the command never runs, and is
 * recorded cancelled. */
START_TEST(disconnect_while_queued) {
        const char *flags[] = {"--max-commands", "1", NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        uint64_t busy, gone;
        struct raw r1, r2;
        char *out;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qd"));
        raw_open(&r1, &d);
        /* The slot frees only once the daemon saw the waiting one's client go. */
        busy = raw_run(&r1, "qd", GATED "true", 1, -1);
        free_resp(raw_expect(&r1, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 30000));
        raw_open(&r2, &d);
        gone = raw_run(&r2, "qd", "touch /workspace/gone-ran", 1, -1);
        free_resp(raw_expect(&r2, gone, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 30000));
        raw_close(&r2);
        wait_commands(&d, "qd", 1, 0);
        open_gate(&d, "qd");
        resp = raw_result(&r1, busy, 30000);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__EXITED);
        free_resp(resp);
        raw_close(&r1);
        out = sh_out(&d, "qd", "sleep 0.2; test -e /workspace/gone-ran; echo $?");
        ck_assert_str_eq(out, "1\n");
        free(out);
        wait_records(&d,
                     "SELECT count(*) FROM commands WHERE command_id = 'c-2' AND "
                     "outcome = 'cancelled'",
                     1);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Cap 1: client A queues 20 commands at once, then client B one. B's starts after at
 * most one of A's waiting commands (the bound cmdqueue.h states), not after all of
 * them. The order is read from a log the commands append to. */
START_TEST(flood_does_not_starve) {
        const char *flags[] = {"--max-commands", "1", NULL};
        uint64_t a[20], b;
        struct it_daemon d;
        struct raw ra, rb;
        char *log, *line;
        int i, pos = -1, n = 0;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qf"));
        raw_open(&ra, &d);
        raw_open(&rb, &d);
        /* A's requests are read and queued before B's arrives, and none of A's ends
         * until B waits too (they wait for the gate). */
        for (i = 0; i < 20; i++)
                a[i] = raw_run(&ra, "qf", GATED "echo A >> /workspace/log", 0, -1);
        wait_commands(&d, "qf", 1, 19);
        b = raw_run(&rb, "qf", "echo B >> /workspace/log", 0, -1);
        wait_commands(&d, "qf", 1, 20);
        open_gate(&d, "qf");
        free_resp(raw_result(&rb, b, 20000));
        for (i = 0; i < 20; i++)
                free_resp(raw_result(&ra, a[i], 20000));
        raw_close(&ra);
        raw_close(&rb);
        log = sh_out(&d, "qf", "cat /workspace/log");
        for (line = strtok(log, "\n"); line; line = strtok(NULL, "\n"), n++)
                if (strcmp(line, "B") == 0)
                        pos = n;
        free(log);
        ck_assert_int_eq(n, 21);
        /* A's first (running when B came), at most one more of A's, then B. */
        ck_assert_msg(pos >= 0 && pos <= 2, "B ran in position %d of 21", pos);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- robustness of the queue -------------------------------------------------------------- */

/* A client that pipelines 200 RunCommands into a sandbox of one slot and goes away: 64
 * wait (--max-queued), the rest are refused naming the bound; once it is gone none of
 * them runs, each is recorded cancelled, nothing is counted as waiting any more, and the
 * sandbox serves the next client at once. */
START_TEST(pipelined_flood_then_disconnect) {
        const char *flags[] = {"--max-commands", "1", NULL};
        struct it_daemon d;
        Sbx__V1__Response *resp;
        uint64_t busy, rid;
        struct raw r;
        int i, refused = 0, queued = 0;
        char *out;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qp"));
        raw_open(&r, &d);
        busy = raw_run(&r, "qp", "sleep 600", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        for (i = 0; i < 200; i++)
                raw_run(&r, "qp", "touch /workspace/flood-ran", 1, 60000);
        /* Each is answered: queued, or refused. */
        for (rid = busy + 1; rid <= busy + 200; rid++) {
                resp = raw_expect(&r, rid, 0, 10000);
                if (resp->status->code == SBX__V1__CODE__RESOURCE_EXHAUSTED) {
                        refused++;
                        ck_assert_ptr_nonnull(strstr(resp->status->message, "--max-queued"));
                } else {
                        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED);
                        queued++;
                }
                free_resp(resp);
        }
        ck_assert_int_eq(queued, 64);
        ck_assert_int_eq(refused, 136);
        raw_close(&r);
        wait_commands(&d, "qp", 0, 0);
        out = sh_out(&d, "qp", "test -e /workspace/flood-ran; echo $?");
        ck_assert_str_eq(out, "1\n");
        free(out);
        wait_records(&d,
                     "SELECT count(*) FROM commands WHERE sandbox_id = 'qp' AND "
                     "outcome = 'cancelled' AND duration = 0 AND command_id != 'c-1'",
                     64);
        ck_assert(it_db_ok(&d));
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The deadline reached with a full queue: every waiting command ends SANDBOX_ENDED
 * without running, the running one too, and the records say so. */
START_TEST(deadline_with_a_full_queue) {
        const char *flags[] = {"--max-commands", "1", "--max-queued", "3", NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        uint64_t busy, w[3];
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        struct raw r;
        int i;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qe"));
        raw_open(&r, &d);
        busy = raw_run(&r, "qe", "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        for (i = 0; i < 3; i++) {
                w[i] = raw_run(&r, "qe", "touch /workspace/e-ran", 1, 60000);
                free_resp(raw_expect(&r, w[i], SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        }
        c = it_connect(&d);
        ck_assert_int_eq(sbx_set_timeout(c, "qe", 500, &s), SBX_OK);
        sbx_sandbox_free(s);
        for (i = 0; i < 3; i++) {
                resp = raw_result(&r, w[i], 10000);
                ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
                ck_assert(resp->command_result->duration == 0);
                ck_assert_uint_ge(resp->command_result->queued_ms, 300);
                free_resp(resp);
        }
        resp = raw_result(&r, busy, 10000);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        free_resp(resp);
        raw_close(&r);
        ck_assert_int_eq(sbx_get(c, "qe", &s), SBX_OK);
        ck_assert_int_eq(s->state, SBX_STATE_EXPIRED);
        ck_assert_uint_eq(s->queued_commands, 0);
        sbx_sandbox_free(s);
        sbx_close(c);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE sandbox_id = 'qe' "
                                       "AND outcome = 'sandbox_ended' AND duration = 0 AND "
                                       "queued_ms >= 300"),
                         3);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The daemon killed (SIGKILL) with commands waiting: the sandbox is re-adopted by the
 * next daemon, the waiting commands never run there, the new daemon's commands get ids
 * of their own (none reused from a recorded command), and the queue works again. */
START_TEST(restart_with_commands_waiting) {
        const char *flags[] = {"--max-commands", "1", NULL};
        struct it_daemon d;
        uint64_t busy, w;
        struct sbx_history *h = NULL;
        sbx_client *c;
        struct raw r;
        char *out;
        size_t i, j;

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds */
        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qr"));
        raw_open(&r, &d);
        busy = raw_run(&r, "qr", "sleep 600", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        w = raw_run(&r, "qr", "touch /workspace/r-ran", 1, 60000);
        free_resp(raw_expect(&r, w, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        /* Killed once the sleep's start is in the records. */
        wait_records(&d,
                     "SELECT count(*) FROM commands WHERE sandbox_id = 'qr' AND "
                     "command_id = 'c-1' AND outcome IS NULL",
                     1);
        it_daemon_kill(&d);
        raw_close(&r);
        it_daemon_restart(&d, flags);
        out = sh_out(&d, "qr", "sleep 0.3; test -e /workspace/r-ran; echo $?");
        ck_assert_str_eq(out, "1\n");
        free(out);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_history(c, "qr", 0, 100, &h), SBX_OK);
        for (i = 0; i < h->n; i++)
                for (j = i + 1; j < h->n; j++)
                        ck_assert_msg(strcmp(h->v[i].command_id, h->v[j].command_id) != 0,
                                      "two records of %s", h->v[i].command_id);
        for (i = 0; i < h->n; i++)
                ck_assert_int_ne(h->v[i].outcome, SBX_OUTCOME_RUNNING);
        sbx_history_free(h);
        sbx_close(c);
        /* The queue of the new daemon. */
        raw_open(&r, &d);
        busy = raw_run(&r, "qr", "sleep 600", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        w = raw_run(&r, "qr", "true", 1, 60000);
        free_resp(raw_expect(&r, w, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        raw_close(&r);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- attacks on the queue that were found to work, now fixed; each names what it shows -- */

/* A sandbox of our own with idle_timeout_ms (0: none). */
static void make_idle_sandbox(struct it_daemon *d, const char *id, uint64_t idle_ms) {
        sbx_client *c = it_connect(d);
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;

        sbx_create_opts_init(&o);
        o.id = id;
        o.idle_timeout_ms = idle_ms;
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        sbx_close(c);
}

/* GetHistory's records carry queued_ms (the WAITED column of `sbx history`, queued_ms
 * of `sbx history --json` and of Python's CommandRecord), as the records hold it. */
START_TEST(history_records_carry_queued_ms) {
        const char *flags[] = {"--max-commands", "1", NULL};
        Sbx__V1__Response *resp;
        struct sbx_history *h = NULL;
        struct it_daemon d;
        uint64_t busy, late;
        sbx_client *c;
        struct raw r;
        size_t i;
        int seen = 0;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qh"));
        raw_open(&r, &d);
        busy = raw_run(&r, "qh", "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        late = raw_run(&r, "qh", "true", 0, 300);
        resp = raw_result(&r, late, 10000);
        ck_assert_int_eq(resp->command_result->outcome, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
        ck_assert_uint_ge(resp->command_result->queued_ms, 280);
        free_resp(resp);
        raw_close(&r);
        /* In the records... */
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE command_id = 'c-2' "
                                       "AND queued_ms >= 280"),
                         1);
        /* ... and in the history read through the daemon. */
        c = it_connect(&d);
        ck_assert_int_eq(sbx_history(c, "qh", 0, 100, &h), SBX_OK);
        for (i = 0; i < h->n; i++)
                if (strcmp(h->v[i].command_id, "c-2") == 0) {
                        seen = 1;
                        ck_assert_int_eq(h->v[i].outcome, SBX_OUTCOME_QUEUE_TIMEOUT);
                        ck_assert_msg(h->v[i].queued_ms >= 280,
                                      "history says c-2 waited %llu ms; its record says >= 280",
                                      (unsigned long long)h->v[i].queued_ms);
                }
        ck_assert(seen);
        sbx_history_free(h);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox whose command waits for a slot of its uid's quota is not idle: its idle
 * timeout (1 s here) does not end it while the command waits (2.5 s). */
START_TEST(idle_timeout_spares_a_waiting_command) {
        const char *flags[] = {"--max-commands-per-uid", "1", NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        uint64_t busy, waiting;
        struct raw r;

        it_daemon_start(&d, flags);
        make_idle_sandbox(&d, "qx", 0);
        make_idle_sandbox(&d, "qi", 1000);
        raw_open(&r, &d);
        busy = raw_run(&r, "qx", "sleep 2.5", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        waiting = raw_run(&r, "qi", "echo ran", 1, 20000);
        resp = raw_expect(&r, waiting, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000);
        ck_assert_int_eq(resp->status->code, 0);
        free_resp(resp);
        free_resp(raw_result(&r, busy, 20000)); /* it ends first */
        resp = raw_result(&r, waiting, 20000);
        ck_assert_msg(resp->command_result->outcome == SBX__V1__OUTCOME__EXITED,
                      "the waiting command ended %d (SANDBOX_ENDED is %d): its sandbox's idle "
                      "timeout ended it while it waited",
                      resp->command_result->outcome, SBX__V1__OUTCOME__SANDBOX_ENDED);
        ck_assert_uint_ge(resp->command_result->queued_ms, 1500);
        free_resp(resp);
        raw_close(&r);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* First come, first served across the sandboxes of one uid: with --max-commands-per-uid
 * 1, a command of sandbox qa that waited first starts first when the uid's slot frees,
 * before the three of qb queued after it. */
START_TEST(uid_quota_serves_sandboxes_in_order) {
        const char *flags[] = {"--max-commands-per-uid", "1", NULL};
        uint64_t busy, a, b[3];
        struct it_daemon d;
        struct raw r1, r2;
        int i;

        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qx"));
        free(make_sandbox(&d, "qa"));
        free(make_sandbox(&d, "qb"));
        raw_open(&r1, &d);
        raw_open(&r2, &d);
        busy = raw_run(&r1, "qx", "sleep 0.5", 1, -1);
        free_resp(raw_expect(&r1, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        a = raw_run(&r1, "qa", "true", 1, 30000);
        free_resp(raw_expect(&r1, a, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        for (i = 0; i < 3; i++) {
                b[i] = raw_run(&r2, "qb", "sleep 0.3", 1, 30000);
                free_resp(raw_expect(&r2, b[i], SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        }
        free_resp(raw_result(&r1, busy, 20000));
        free_resp(raw_result(&r1, a, 20000));
        for (i = 0; i < 3; i++)
                free_resp(raw_result(&r2, b[i], 20000));
        raw_close(&r1);
        raw_close(&r2);
        /* qa's command waited first: it starts before any of qb's. */
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE sandbox_id = 'qb' "
                                       "AND started_ms < (SELECT started_ms FROM commands WHERE "
                                       "sandbox_id = 'qa')"),
                         0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

#define OTHER_UID 3291u
#define SOCK_GID  3290u

/* In a child running as OTHER_UID (a member of the socket's group): creates sandbox id,
 * holds its one slot with a sleep and queues n commands, then writes a byte to ready
 * and waits for done to close (its connection closing then ends all of them). */
static pid_t flood_as_other(struct it_daemon *d, const char *id, int n, int ready, int done,
                            int done_w) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                gid_t g = SOCK_GID;
                struct sbx_create_opts o;
                struct sbx_sandbox *s = NULL;
                sbx_client *c = NULL;
                Sbx__V1__Response *resp;
                struct raw r;
                char ch;
                int i;

                close(done_w);
                if (setgroups(1, &g) < 0 || setresgid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 ||
                    setresuid(OTHER_UID, OTHER_UID, OTHER_UID) < 0)
                        _exit(2);
                if (sbx_connect(d->sock, "flood", &c) != SBX_OK)
                        _exit(3);
                sbx_create_opts_init(&o);
                o.id = id;
                if (sbx_create(c, &o, &s) != SBX_OK) {
                        fprintf(stderr, "flood: create: %s\n", sbx_error_message(c));
                        _exit(4);
                }
                raw_open(&r, d);
                resp = raw_expect(&r, raw_run(&r, (char *)(uintptr_t)id, "sleep 30", 1, -1),
                                  SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000);
                if (resp->status->code != 0)
                        _exit(5);
                free_resp(resp);
                for (i = 0; i < n; i++) {
                        resp = raw_expect(&r, raw_run(&r, (char *)(uintptr_t)id, "true", 1, 60000),
                                          0, 10000);
                        if (resp->status->code != 0) {
                                fprintf(stderr, "flood: %s\n", resp->status->message);
                                _exit(6);
                        }
                        free_resp(resp);
                }
                if (write(ready, "x", 1) != 1)
                        _exit(7);
                (void)!read(done, &ch, 1);
                _exit(0);
        }
        return pid;
}

/* One user cannot fill the daemon's queue: with --max-queued-total 4 and
 * --max-queued-per-uid 3, uid 3291 queues its 3 commands in a sandbox of its own, and
 * root's command in another sandbox still waits instead of being refused. */
START_TEST(queued_share_per_uid) {
        const char *flags[] = {"--max-commands",
                               "1",
                               "--max-queued-total",
                               "4",
                               "--max-queued-per-uid",
                               "3",
                               "--socket-group",
                               "3290",
                               NULL};
        Sbx__V1__Response *resp;
        struct it_daemon d;
        int ready[2], done[2], st;
        uint64_t busy, mine;
        struct raw r;
        pid_t pid;
        char ch;

        it_daemon_start(&d, flags);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(done, O_CLOEXEC), 0);
        pid = flood_as_other(&d, "theirs", 3, ready[1], done[0], done[1]);
        close(ready[1]);
        close(done[0]);
        if (read(ready[0], &ch, 1) != 1) {
                waitpid(pid, &st, 0);
                ck_abort_msg("uid %u could not queue its commands (status %d)", OTHER_UID, st);
        }
        free(make_sandbox(&d, "mine"));
        raw_open(&r, &d);
        busy = raw_run(&r, "mine", "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        mine = raw_run(&r, "mine", "true", 1, 60000);
        resp = raw_expect(&r, mine, 0, 10000);
        close(done[1]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(resp->status->code == 0 &&
                              resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED,
                      "root's command in its own sandbox: %d %s", resp->status->code,
                      resp->status->message ? resp->status->message : "");
        free_resp(resp);
        raw_close(&r);
        close(ready[0]);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Stops a --keep-sandboxes daemon d (flags) with SIGTERM while shell waits for a slot in
 * sandbox waiting, which a `sleep 30` in holder keeps from it; then restarts d. Returns
 * the waiting command's outcome, as its client was told. */
static int stop_with_one_waiting(struct it_daemon *d, const char *const *flags, char *holder,
                                 char *waiting, char *shell) {
        Sbx__V1__Response *resp;
        uint64_t busy, w;
        struct raw r;
        int outcome;

        raw_open(&r, d);
        busy = raw_run(&r, holder, "sleep 30", 1, -1);
        free_resp(raw_expect(&r, busy, SBX__V1__RESPONSE__BODY_COMMAND_STARTED, 10000));
        w = raw_run(&r, waiting, shell, 1, 60000);
        free_resp(raw_expect(&r, w, SBX__V1__RESPONSE__BODY_COMMAND_QUEUED, 10000));
        kill(d->pid, SIGTERM);
        resp = raw_result(&r, w, 20000);
        outcome = resp->command_result->outcome;
        free_resp(resp);
        raw_close(&r);
        ck_assert_int_eq(it_daemon_stop(d), 0);
        it_daemon_restart(d, flags);
        return outcome;
}

/* sbxd --keep-sandboxes stopped (SIGTERM) with a command waiting: the sandbox lives on
 * for the next daemon, so the waiting command, which never ran, ends CANCELLED (not
 * SANDBOX_ENDED, which a client takes for the end of the sandbox); the running command
 * beside it is UNKNOWN ("sbxd restarted"). */
START_TEST(keep_sandboxes_stop_cancels_waiting_commands) {
        const char *flags[] = {"--max-commands", "1", "--keep-sandboxes", NULL};
        struct it_daemon d;
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        int outcome;

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds */
        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "qk"));
        outcome = stop_with_one_waiting(&d, flags, "qk", "qk", "touch /workspace/k-ran");
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, "qk", &s), SBX_OK);
        ck_assert_int_eq(s->state, SBX_STATE_READY); /* it did not end */
        sbx_sandbox_free(s);
        sbx_close(c);
        ck_assert_msg(outcome == SBX__V1__OUTCOME__CANCELLED,
                      "the waiting command ended %d, not CANCELLED; its sandbox lives on", outcome);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE sandbox_id = 'qk' "
                                       "AND outcome = 'sandbox_ended'"),
                         0);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE sandbox_id = 'qk' "
                                       "AND command_id = 'c-2' AND outcome = 'cancelled' AND "
                                       "duration = 0"),
                         1);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbxd --keep-sandboxes stopped (SIGTERM) with a command of sandbox kqa waiting for its
 * uid's slot (--max-commands-per-uid 1), held by a command of kqx: leaving kqx ends its
 * running command and frees the uid's slot, which must not start kqa's waiting command
 * in the middle of the detach (it would run unwatched in a sandbox left to the next
 * daemon, its client told UNKNOWN): it ends CANCELLED, never run. kqa is created first
 * so that the table (newest first) leaves kqx before it. */
START_TEST(keep_sandboxes_stop_starts_no_waiting_command) {
        const char *flags[] = {"--max-commands-per-uid", "1", "--keep-sandboxes", NULL};
        struct it_daemon d;
        int outcome;
        char *out;

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds */
        it_daemon_start(&d, flags);
        free(make_sandbox(&d, "kqa"));
        free(make_sandbox(&d, "kqx"));
        outcome = stop_with_one_waiting(&d, flags, "kqx", "kqa", "touch /workspace/kq-ran");
        out = sh_out(&d, "kqa", "sleep 0.3; test -e /workspace/kq-ran; echo $?");
        ck_assert_msg(strcmp(out, "1\n") == 0,
                      "the command that waited for a slot ran during the daemon's stop");
        free(out);
        ck_assert_msg(outcome == SBX__V1__OUTCOME__CANCELLED,
                      "the waiting command ended %d, not CANCELLED", outcome);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("queue");
        TCase *tc = tcase_create("queue");
        struct {
                const char *name;
                const TTest *t;
        } more[] = {
                {"pipelined_flood_then_disconnect", pipelined_flood_then_disconnect},
                {"deadline_with_a_full_queue", deadline_with_a_full_queue},
                {"restart_with_commands_waiting", restart_with_commands_waiting},
                {"history_records_carry_queued_ms", history_records_carry_queued_ms},
                {"idle_timeout_spares_a_waiting_command", idle_timeout_spares_a_waiting_command},
                {"uid_quota_serves_sandboxes_in_order", uid_quota_serves_sandboxes_in_order},
                {"queued_share_per_uid", queued_share_per_uid},
                {"keep_sandboxes_stop_cancels_waiting_commands",
                 keep_sandboxes_stop_cancels_waiting_commands},
                {"keep_sandboxes_stop_starts_no_waiting_command",
                 keep_sandboxes_stop_starts_no_waiting_command},
        };

        tcase_add_checked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, burst_all_served);
        tcase_add_test(tc, full_queue_cancel_and_terminate);
        tcase_add_test(tc, queue_timeout_never_runs);
        tcase_add_test(tc, disconnect_while_queued);
        tcase_add_test(tc, flood_does_not_starve);
        suite_add_tcase(s, tc);
        /* One TCase each, with an unchecked fixture: a failed test's daemon and directory
         * are cleaned up too. */
        for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
                TCase *t = tcase_create(more[i].name);
                tcase_add_unchecked_fixture(t, it_fixture_setup, it_fixture_teardown);
                tcase_set_timeout(t, 120);
                tcase_add_test(t, more[i].t);
                suite_add_tcase(s, t);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
