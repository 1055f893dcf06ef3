/* check_turn.c: unit tests of the daemon's "commit before reply" rule (turn.c), in this
 * process, without a daemon process: the core of tests/inproc.h, a connection with fake
 * handlers that record commands and answer, and a second SQLite connection that sees
 * only what was committed.
 *
 * A reply is held while its handler runs; when it reaches the client, the command it
 * reports is committed. A batch no reply waits for stays open SBX_RECORD_BATCH_MS, then
 * is committed. turn_flush (shutdown) commits and writes at once. */
#include <sqlite3.h>
#include <stdint.h>

#include "inproc.h"
#include "testutil.h"

static struct core K;
static uint64_t next_seq;
static int held_in_handler = -1;
static struct peer P;

/* Commands recorded in the database as another connection sees it: committed ones. */
static int committed_commands(void) {
        char path[128];
        sqlite3 *db;
        sqlite3_stmt *st;
        int n;

        snprintf(path, sizeof(path), "%s/sbxd.db", K.dir);
        ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM commands", -1, &st, NULL),
                         SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return n;
}

static void record_sandbox(void) {
        static const uint8_t spec[] = {0x0a, 0x01, 0x78};
        struct store_sandbox sb = {
                .id = "turn",
                .state = "ready",
                .created_ms = 1000,
                .deadline_ms = 100000,
                .spec = spec,
                .spec_len = sizeof(spec),
                .workspace_dir = "/tmp/none",
                .cgroup_path = "",
        };

        ck_assert_int_eq(store_sandbox_insert(K.d.store, &sb), 0);
}

/* A command record into the open batch, as a command's start writes one. */
static void record_command(void) {
        static const char *const argv[] = {"true"};
        char id[32];
        struct store_command c = {
                .sandbox_id = "turn",
                .argv = argv,
                .argc = 1,
                .cwd = "/workspace",
                .started_ms = 2000,
        };

        c.seq = ++next_seq;
        snprintf(id, sizeof(id), "c-%llu", (unsigned long long)c.seq);
        c.command_id = id;
        ck_assert_int_eq(store_command_insert(K.d.store, &c), 0);
}

/* 1 when the client's end has something to read. */
static int peer_readable(void) {
        struct pollfd pfd = {.fd = P.fd, .events = POLLIN};
        return poll(&pfd, 1, 0) == 1;
}

/* Each frame records a command and answers that it started. */
static int frame(void *ud, struct conn *c, const uint8_t *payload, size_t len) {
        record_command();
        ck_assert_int_eq(conn_send_status(c, next_seq, SBX__V1__CODE__OK, "started"), 0);
        ck_assert(store_pending(K.d.store));
        held_in_handler = !peer_readable();
        return 0;
}

static int closed;

static void on_closed(void *ud, struct conn *c) {
        closed++;
}

static const struct conn_handlers handlers = {.frame = frame, .closed = on_closed};

static struct conn *begin(void) {
        struct conn *c;

        next_seq = 0;
        closed = 0;
        held_in_handler = -1;
        core_init(&K);
        record_sandbox();
        ck_assert_int_eq(conn_new(&K.d, 1, &handlers, NULL, &c), 0);
        ck_assert_int_eq(conn_open(c, peer_pair(&P)), 0);
        ck_assert_int_eq(conn_serve(c), 0);
        return c;
}

static int is_closed(void *ud) {
        return closed > 0;
}

static void end(void) {
        peer_close(&P);
        ck_assert(core_run_until(&K, is_closed, NULL, 5000));
        core_free(&K);
}

START_TEST(reply_reaches_client_after_commit) {
        int i;

        begin();
        for (i = 1; i <= 3; i++) {
                peer_send_frame(&K, &P, "run", 3);
                peer_expect_status(&K, &P, (uint64_t)i, SBX__V1__CODE__OK, "started");
                ck_assert_int_eq(held_in_handler, 1);
                /* What the reply reports is in the database for everyone. */
                ck_assert_int_eq(committed_commands(), i);
                ck_assert(!store_pending(K.d.store));
        }
        end();
}
END_TEST

/* The loop's time when the record was made: what the batch timer counts from. */
static uint64_t recorded_at;

static void on_record_timer(uv_timer_t *t) {
        recorded_at = uv_now(t->loop);
        record_command();
}

static int batch_committed(void *ud) {
        return !store_pending(K.d.store);
}

/* A command record that no reply reports waits for the batch timer: its start and an
 * end soon after share one commit. Timed by the loop's own clock, which the timer
 * follows: a turn that began before the batch was due cannot have committed it, however
 * slowly the turns ran (a wall clock read after the record made this flaky on a loaded
 * machine). */
START_TEST(batch_without_reply_waits_then_commits) {
        uv_timer_t t;

        begin();
        ck_assert_int_eq(uv_timer_init(&K.loop, &t), 0);
        ck_assert_int_eq(uv_timer_start(&t, on_record_timer, 0, 0), 0);
        while (next_seq == 0)
                core_turns(&K, 1);
        core_turns(&K, 3);
        if (uv_now(&K.loop) < recorded_at + SBX_RECORD_BATCH_MS) {
                ck_assert(store_pending(K.d.store));
                ck_assert_int_eq(committed_commands(), 0);
        }
        ck_assert(core_run_until(&K, batch_committed, NULL, 2000));
        ck_assert_uint_ge(uv_now(&K.loop) - recorded_at, SBX_RECORD_BATCH_MS);
        ck_assert_int_eq(committed_commands(), 1);
        uv_close((uv_handle_t *)&t, NULL);
        end();
}
END_TEST

/* At shutdown the last replies go out at once, after their records' commit. */
START_TEST(flush_commits_and_writes_now) {
        struct conn *c = begin();
        Sbx__V1__Response *r;

        record_command();
        ck_assert_int_eq(conn_send_status(c, 9, SBX__V1__CODE__OK, "last"), 0);
        ck_assert(!peer_readable());
        turn_flush(&K.turn);
        ck_assert_int_eq(committed_commands(), 1);
        ck_assert(peer_readable());
        ck_assert(peer_next(&P, &r));
        ck_assert_uint_eq(r->request_id, 9);
        sbx__v1__response__free_unpacked(r, NULL);
        end();
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("turn");
        TCase *tc = tcase_create("commit_before_reply");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, reply_reaches_client_after_commit);
        tcase_add_test(tc, batch_without_reply_waits_then_commits);
        tcase_add_test(tc, flush_commits_and_writes_now);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
