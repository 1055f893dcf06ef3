/* check_store.c: the Check suite of the store module (daemon/store.c).
 *
 * Each test runs in its own test case, so that the unchecked fixture gives it a fresh
 * temporary directory under /tmp and removes it afterwards, from the runner's process,
 * even when the test failed. Besides the plain contract tests it proves the durability
 * claims of store.h: a writer SIGKILLed mid-loop loses no write that returned 0, every
 * allocation SQLite makes may fail without a crash, a leak or a half-written row, and a
 * full disk is reported as -ENOSPC without losing what was written before. The raw
 * sqlite3 API is used only to inspect or prepare database files from outside. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "testutil.h"

/* ---- fixture: one temporary directory per test ---------------------------------------- */

static char tmpdir[64];

static size_t n_seen; /* seq_of's numbering starts anew with each test */

static void tmpdir_setup(void) {
        n_seen = 0;
        test_dir_make(tmpdir, sizeof(tmpdir), "check_store");
}

static void tmpdir_teardown(void) {
        test_dir_remove(tmpdir);
}

static const char *tmp_path(char *buf, size_t size, const char *name) {
        snprintf(buf, size, "%s/%s", tmpdir, name);
        return buf;
}

/* ---- raw access to a database file, bypassing the store ------------------------------- */

static void raw_exec(const char *path, const char *sql) {
        sqlite3 *db = NULL;

        ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
                      sqlite3_errmsg(db));
        sqlite3_close(db);
}

/* The first column of the first row of sql as an integer, or as text into buf. */
static int64_t raw_query(const char *path, const char *sql, char *buf, size_t size) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int64_t v;

        ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                      sqlite3_errmsg(db));
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        v = sqlite3_column_int64(st, 0);
        if (buf) {
                const unsigned char *t = sqlite3_column_text(st, 0);
                snprintf(buf, size, "%s", t ? (const char *)t : "(null)");
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

static int64_t raw_int(const char *path, const char *sql) {
        return raw_query(path, sql, NULL, 0);
}

/* ---- helpers -------------------------------------------------------------------------- */

static const char spec_bytes[] = {'\x0a', '\x00', '\x01', '\xff', 'p', '\x00', 'q'};

static struct store_sandbox sandbox_make(const char *id, uint32_t owner, const char *state,
                                         int64_t created_ms) {
        struct store_sandbox sb = {
                .id = id,
                .owner_uid = owner,
                .state = state,
                .created_ms = created_ms,
                .deadline_ms = created_ms + 300000,
                .idle_timeout_ms = 60000,
                .spec = spec_bytes,
                .spec_len = sizeof(spec_bytes),
                .init_pid = 4242,
                .workspace_dir = "/var/lib/sbxd/ws/x",
                .cgroup_path = "sbxd/x",
                .run_uid = 100000,
                .caller_pid = 777,
                .client_name = "check",
        };
        return sb;
}

static struct store *open_ok(const char *path) {
        struct store *s = NULL;
        int r = store_open(path, &s);

        ck_assert_msg(r == 0, "store_open(%s) = %d: %s", path, r, store_last_error(NULL));
        ck_assert_ptr_nonnull(s);
        return s;
}

static void insert_sandbox(struct store *s, const char *id, uint32_t owner, const char *state,
                           int64_t created_ms) {
        struct store_sandbox sb = sandbox_make(id, owner, state, created_ms);
        int r = store_sandbox_insert(s, &sb);

        ck_assert_msg(r == 0, "insert %s = %d: %s", id, r, store_last_error(s));
}

/* The seq the tests give (sandbox, command id): numbered in the order of first use
 * within each sandbox, from 1, as the daemon numbers a sandbox's commands. */
static struct {
        char sandbox_id[32], command_id[32];
} numbered[1024];

static uint64_t seq_of(const char *sandbox_id, const char *command_id) {
        size_t n = n_seen;
        uint64_t in_sandbox = 0;

        for (size_t i = 0; i < n; i++) {
                if (strcmp(numbered[i].sandbox_id, sandbox_id) != 0)
                        continue;
                in_sandbox++;
                if (strcmp(numbered[i].command_id, command_id) == 0)
                        return in_sandbox;
        }
        ck_assert_uint_lt(n, sizeof(numbered) / sizeof(numbered[0]));
        snprintf(numbered[n].sandbox_id, sizeof(numbered[n].sandbox_id), "%s", sandbox_id);
        snprintf(numbered[n].command_id, sizeof(numbered[n].command_id), "%s", command_id);
        n_seen++;
        return in_sandbox + 1;
}

static uint64_t insert_command(struct store *s, const char *sandbox_id, const char *command_id) {
        static const char *const argv[] = {"/bin/echo", "hello world"};
        struct store_command c = {
                .sandbox_id = sandbox_id,
                .command_id = command_id,
                .argv = argv,
                .argc = 2,
                .cwd = "/workspace",
                .caller_uid = 1000,
                .caller_pid = 4321,
                .client_name = "check",
                .started_ms = 5000,
                .seq = seq_of(sandbox_id, command_id),
        };
        int r = store_command_insert(s, &c);

        ck_assert_msg(r == 0, "insert command %s = %d: %s", command_id, r, store_last_error(s));
        return c.seq;
}

static struct store_command finished_at(const char *sandbox_id, const char *command_id,
                                        uint64_t seq, int exit_code) {
        struct store_command c = {
                .sandbox_id = sandbox_id,
                .command_id = command_id,
                .seq = seq,
                .ended_ms = 6000,
                .outcome = "exited",
                .has_exit_code = 1,
                .exit_code = exit_code,
                .duration = 1.0,
                .limits_hit = "",
        };
        return c;
}

static struct store_command finished(const char *sandbox_id, const char *command_id,
                                     int exit_code) {
        return finished_at(sandbox_id, command_id, seq_of(sandbox_id, command_id), exit_code);
}

/* A command record as the daemon writes one: into the batch, then committed. Returns
 * the first failure. */
static int insert_committed(struct store *s, const struct store_command *c) {
        int r = store_command_insert(s, c);

        return r < 0 ? r : store_commit(s);
}

static int finish_committed(struct store *s, const struct store_command *c) {
        int r = store_command_finish(s, c);

        return r < 0 ? r : store_commit(s);
}

/* A copy of the commands store_history passed to its callback. */
struct seen_command {
        uint64_t seq;
        char command_id[32];
        char outcome[32];
        int has_outcome;
        int64_t ended_ms;
        uint64_t queued_ms;
};

struct history {
        struct seen_command *v;
        size_t n, cap;
        int stop_after; /* 0: never */
};

static int history_cb(const struct store_command *c, void *userdata) {
        struct history *h = userdata;
        struct seen_command *e;

        if (h->n == h->cap) {
                h->cap = h->cap ? 2 * h->cap : 64;
                h->v = realloc(h->v, h->cap * sizeof(*h->v));
                ck_assert_ptr_nonnull(h->v);
        }
        e = &h->v[h->n++];
        memset(e, 0, sizeof(*e));
        e->seq = c->seq;
        snprintf(e->command_id, sizeof(e->command_id), "%s", c->command_id);
        e->has_outcome = c->outcome != NULL;
        snprintf(e->outcome, sizeof(e->outcome), "%s", c->outcome ? c->outcome : "");
        e->ended_ms = c->ended_ms;
        e->queued_ms = c->queued_ms;
        if (h->stop_after && (int)h->n == h->stop_after)
                return 99;
        return 0;
}

static void history_free(struct history *h) {
        free(h->v);
        memset(h, 0, sizeof(*h));
}

static struct history history_all(struct store *s, const char *sandbox_id) {
        struct history h = {0};
        int r = store_history(s, sandbox_id, 0, 0, history_cb, &h);

        ck_assert_msg(r >= 0, "store_history(%s) = %d: %s", sandbox_id, r, store_last_error(s));
        ck_assert_int_eq((size_t)r, h.n);
        return h;
}

static const struct seen_command *history_find(const struct history *h, uint64_t seq) {
        for (size_t i = 0; i < h->n; i++)
                if (h->v[i].seq == seq)
                        return &h->v[i];
        return NULL;
}

/* ---- opening, schema and migrations --------------------------------------------------- */

START_TEST(test_open_creates_schema) {
        char path[128], mode[32];
        struct store *s, *sentinel = (struct store *)&mode;
        struct stat st;

        tmp_path(path, sizeof(path), "state.db");
        ck_assert_int_ne(access(path, F_OK), 0);
        s = open_ok(path);
        ck_assert_str_eq(store_last_error(s), "");
        ck_assert_int_eq(store_integrity_check(s), 0);
        ck_assert_ptr_null(store_close(s));

        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        raw_query(path, "PRAGMA journal_mode", mode, sizeof(mode));
        ck_assert_str_eq(mode, "wal");
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                       "AND name IN ('sandboxes', 'commands', 'fileops')"),
                         3);
        /* It holds every caller's argv: private. */
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0600);

        /* A missing directory fails, leaves *ret alone and says why. */
        tmp_path(path, sizeof(path), "no/such/dir/state.db");
        s = sentinel;
        ck_assert_int_eq(store_open(path, &s), -ENOENT);
        ck_assert_ptr_eq(s, sentinel);
        ck_assert_ptr_nonnull(strstr(store_last_error(NULL), "no/such/dir"));
        ck_assert_int_eq(store_open(NULL, &s), -EINVAL);
        ck_assert_ptr_null(store_close(NULL));
}
END_TEST

START_TEST(test_reopen_idempotent) {
        char path[128];
        struct store *s, *s2;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        store_close(s);

        for (int i = 0; i < 3; i++) {
                s = open_ok(path);
                ck_assert_int_eq(store_sandbox_exists(s, "a"), 1);
                ck_assert_int_eq(store_integrity_check(s), 0);
                store_close(s);
                ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        }

        /* Two handles on one file at once (as when an operator inspects it). */
        s = open_ok(path);
        s2 = open_ok(path);
        insert_sandbox(s, "b", 1000, "ready", 2);
        ck_assert_int_eq(store_sandbox_exists(s2, "b"), 1);
        store_close(s2);
        store_close(s);
}
END_TEST

/* The commands table of schemas 1 and 2 (1 also had commands_unfinished), as released. */
static const char commands_before_3[] =
        "DROP TABLE forwards;"    /* schema 9 */
        "DROP TABLE connections;" /* schema 6 */
        "DROP TABLE uid_owners;"
        "DROP TABLE commands;"
        "CREATE TABLE commands ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  command_id TEXT NOT NULL, argv BLOB NOT NULL, cwd TEXT,"
        "  caller_uid INTEGER NOT NULL, caller_pid INTEGER NOT NULL, client_name TEXT,"
        "  started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL DEFAULT 0, outcome TEXT,"
        "  exit_code INTEGER, signal INTEGER, duration REAL NOT NULL DEFAULT 0,"
        "  cpu_seconds REAL NOT NULL DEFAULT 0, peak_memory_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_bytes INTEGER NOT NULL DEFAULT 0, stderr_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_truncated INTEGER NOT NULL DEFAULT 0,"
        "  stderr_truncated INTEGER NOT NULL DEFAULT 0, limits_hit TEXT, start_error TEXT,"
        "  UNIQUE (sandbox_id, command_id));"
        "CREATE INDEX commands_history ON commands(sandbox_id, seq);"
        /* Numbered over all sandboxes, with gaps: a's c-9, c-10, c-12 (c-11 was never
         * recorded; c-10 sorts before c-9 as text) and b's c-1, c-2 mixed, and a row of
         * a sandbox deleted behind the store's back. */
        "INSERT INTO commands (seq, sandbox_id, command_id, argv, caller_uid, caller_pid, "
        "  started_ms, ended_ms, outcome, exit_code) VALUES "
        "  (10, 'a', 'c-9', X'7400', 1, 2, 100, 101, 'exited', 0),"
        "  (20, 'b', 'c-1', X'7400', 1, 2, 100, 101, 'exited', 0),"
        "  (35, 'a', 'c-10', X'7400', 1, 2, 100, 101, 'exited', 3),"
        "  (36, 'b', 'c-2', X'7400', 1, 2, 100, 0, NULL, NULL),"
        "  (40, 'gone', 'c-1', X'7400', 1, 2, 100, 0, NULL, NULL),"
        "  (50, 'a', 'c-12', X'7400', 1, 2, 100, 0, NULL, NULL);";

/* The commands table of schemas 3 and 4, as released (schema 5 added queued_ms). */
static const char commands_schema_4[] =
        "DROP TABLE forwards;"    /* schema 9 */
        "DROP TABLE connections;" /* schema 6 */
        "DROP TABLE commands;"
        "CREATE TABLE commands ("
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL, command_id TEXT NOT NULL, argv BLOB NOT NULL, cwd TEXT,"
        "  caller_uid INTEGER NOT NULL, caller_pid INTEGER NOT NULL, client_name TEXT,"
        "  started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL DEFAULT 0, outcome TEXT,"
        "  exit_code INTEGER, signal INTEGER, duration REAL NOT NULL DEFAULT 0,"
        "  cpu_seconds REAL NOT NULL DEFAULT 0, peak_memory_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_bytes INTEGER NOT NULL DEFAULT 0, stderr_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_truncated INTEGER NOT NULL DEFAULT 0,"
        "  stderr_truncated INTEGER NOT NULL DEFAULT 0, limits_hit TEXT, start_error TEXT,"
        "  UNIQUE (sandbox_id, seq));";

/* A database of schema 1 (the first release) or 2 is upgraded in place: every record
 * kept, numbered within its sandbox in its old order, and served by the new key. */
START_TEST(test_upgrade_from_1_and_2) {
        for (int from = 1; from <= 2; from++) {
                char path[128], sql[4096], name[32];
                struct store *s;
                struct history h;
                struct store_command f;

                snprintf(name, sizeof(name), "state-%d.db", from);
                tmp_path(path, sizeof(path), name);
                s = open_ok(path);
                insert_sandbox(s, "a", 1000, "ready", 1);
                insert_sandbox(s, "b", 1000, "ready", 2);
                store_close(s);
                snprintf(sql, sizeof(sql), "%s%s PRAGMA user_version = %d;", commands_before_3,
                         from == 1 ? "CREATE INDEX commands_unfinished ON commands(sandbox_id) "
                                     "WHERE outcome IS NULL;"
                                   : "",
                         from);
                raw_exec(path, sql);

                s = open_ok(path);
                ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
                ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN "
                                               "('commands_unfinished', 'commands_history', "
                                               "'commands_v3')"),
                                 0);
                ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE "
                                               "tbl_name = 'commands' AND type = 'index'"),
                                 1);
                ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_sequence WHERE "
                                               "name LIKE 'commands%'"),
                                 0);
                h = history_all(s, "a");
                ck_assert_uint_eq(h.n, 3);
                for (size_t i = 0; i < h.n; i++) {
                        static const char *const ids[] = {"c-9", "c-10", "c-12"};

                        ck_assert_uint_eq(h.v[i].seq, i + 1);
                        ck_assert_str_eq(h.v[i].command_id, ids[i]);
                }
                ck_assert_int_eq(h.v[0].has_outcome && !h.v[2].has_outcome, 1);
                history_free(&h);
                ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands WHERE "
                                               "sandbox_id = 'gone'"),
                                 0);
                h = history_all(s, "b");
                ck_assert_uint_eq(h.n, 2);
                ck_assert_uint_eq(h.v[1].seq, 2);
                ck_assert_str_eq(h.v[1].command_id, "c-2");
                history_free(&h);

                /* The records go on: an end found by its new seq, a next command, a
                 * duplicate refused, recovery's query. */
                f = finished_at("a", "c-12", 3, 7);
                ck_assert_int_eq(finish_committed(s, &f), 0);
                ck_assert_int_eq(raw_int(path, "SELECT exit_code FROM commands WHERE "
                                               "sandbox_id = 'a' AND command_id = 'c-12'"),
                                 7);
                f = finished_at("a", "c-13", 13, 0);
                ck_assert_int_eq(insert_committed(s, &f), 0);
                f = finished_at("a", "c-10", 2, 0);
                ck_assert_int_eq(insert_committed(s, &f), -EEXIST);
                ck_assert_int_eq(store_commands_mark_unknown(s, "b", 7), 1);
                ck_assert_int_eq(store_commands_mark_unknown(s, NULL, 7), 1);
                ck_assert_int_eq(store_integrity_check(s), 0);
                store_close(s);
        }
}
END_TEST

static int collect_uid(uint32_t run_uid, int64_t owner, void *ud) {
        int64_t *v = ud; /* pairs, ended by run_uid 0 */
        size_t i = 0;
        while (v[i])
                i += 2;
        v[i] = run_uid;
        v[i + 1] = owner;
        return 0;
}

/* Schema 3 -> 4: the uids of the records become their owners' for good; a uid that
 * served two owners is retired (owner -1). Then uids are bound one owner each. */
START_TEST(test_uid_owners) {
        char path[128], sql[2048];
        int64_t got[16] = {0};
        struct store *s;
        struct store_sandbox sb;

        tmp_path(path, sizeof(path), "uids.db");
        s = open_ok(path);
        sb = sandbox_make("a", 1000, "terminated", 1);
        sb.run_uid = 2100000000;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        sb = sandbox_make("b", 1000, "terminated", 2);
        sb.run_uid = 2100000000;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        sb = sandbox_make("c", 1001, "terminated", 3);
        sb.run_uid = 2100000001;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        sb = sandbox_make("d", 1002, "terminated", 4);
        sb.run_uid = 2100000001;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        sb = sandbox_make("e", 1002, "terminated", 5);
        sb.run_uid = 0; /* rootless: no uid of its own */
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        store_close(s);
        snprintf(sql, sizeof(sql), "%s DROP TABLE uid_owners; PRAGMA user_version = 3;",
                 commands_schema_4);
        raw_exec(path, sql);

        s = open_ok(path);
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ck_assert_int_eq(store_uid_owners(s, collect_uid, got), 0);
        ck_assert_int_eq(got[0], 2100000000);
        ck_assert_int_eq(got[1], 1000);
        ck_assert_int_eq(got[2], 2100000001);
        ck_assert_int_eq(got[3], -1);
        ck_assert_int_eq(got[4], 0);
        ck_assert_int_eq(store_uid_bind(s, 2100000002, 1002), 0);
        ck_assert_int_eq(store_uid_bind(s, 2100000002, 1003), -EEXIST);
        memset(got, 0, sizeof(got));
        ck_assert_int_eq(store_uid_owners(s, collect_uid, got), 0);
        ck_assert_int_eq(got[4], 2100000002);
        ck_assert_int_eq(got[5], 1002);
        ck_assert_int_eq(store_integrity_check(s), 0);
        store_close(s);
}
END_TEST

START_TEST(test_newer_version_refused) {
        char path[128], mode[32];
        struct store *s = NULL;

        tmp_path(path, sizeof(path), "state.db");
        raw_exec(path, "CREATE TABLE future (x); PRAGMA user_version = 999;");
        ck_assert_int_eq(store_open(path, &s), -EPROTO);
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(strstr(store_last_error(NULL), "999"));
        /* Refused before anything was written: not even the journal mode changed. */
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), 999);
        raw_query(path, "PRAGMA journal_mode", mode, sizeof(mode));
        ck_assert_str_eq(mode, "delete");
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_master"), 1);
}
END_TEST

START_TEST(test_migrate_from_zero_with_unrelated_table) {
        char path[128], text[64];
        struct store *s;

        tmp_path(path, sizeof(path), "state.db");
        raw_exec(path, "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('keep me');");
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), 0);
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        ck_assert_int_eq(store_sandbox_exists(s, "a"), 1);
        store_close(s);
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        raw_query(path, "SELECT t FROM notes", text, sizeof(text));
        ck_assert_str_eq(text, "keep me");
}
END_TEST

START_TEST(test_migration_is_atomic) {
        char path[128];
        struct store *s = NULL;
        int r;

        /* A table in the way of the migration: it fails as a whole, nothing half-built. */
        tmp_path(path, sizeof(path), "state.db");
        raw_exec(path, "CREATE TABLE commands (something_else TEXT);");
        r = store_open(path, &s);
        ck_assert_int_eq(r, -EIO);
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(strstr(store_last_error(NULL), "commands"));
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), 0);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sqlite_master "
                                       "WHERE name IN ('sandboxes', 'fileops')"),
                         0);
}
END_TEST

START_TEST(test_integrity_detects_corruption) {
        char path[128], spec[2048];
        struct store *s;
        int fd, r;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        memset(spec, 'x', sizeof(spec));
        for (int i = 0; i < 200; i++) {
                char id[16];
                struct store_sandbox sb;

                snprintf(id, sizeof(id), "sb-%03d", i);
                sb = sandbox_make(id, 1000, "ready", i);
                sb.spec = spec;
                sb.spec_len = sizeof(spec);
                ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        }
        store_close(s);

        /* Garbage over pages 2 to 5 (page 1 is the schema): b-tree pages of the tables. */
        fd = open(path, O_WRONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        memset(spec, 0xa5, sizeof(spec));
        for (off_t off = 4096; off < 5 * 4096; off += (off_t)sizeof(spec))
                ck_assert_int_eq(pwrite(fd, spec, sizeof(spec), off), (ssize_t)sizeof(spec));
        close(fd);

        s = NULL;
        r = store_open(path, &s);
        if (r == 0) {
                ck_assert_int_eq(store_integrity_check(s), -EIO);
                ck_assert_str_ne(store_last_error(s), "");
                store_close(s);
        } else {
                ck_assert_int_eq(r, -EIO);
        }
}
END_TEST

/* ---- sandboxes ------------------------------------------------------------------------ */

struct sandbox_copy {
        char id[64], state[32], end_reason[64], workspace_dir[64], cgroup_path[64], client_name[64];
        int has_end_reason;
        struct store_sandbox sb; /* the numbers; its pointers are not kept */
        unsigned char spec[64];
        int calls;
};

static int sandbox_copy_cb(const struct store_sandbox *sb, void *userdata) {
        struct sandbox_copy *c = userdata;

        c->calls++;
        c->sb = *sb;
        snprintf(c->id, sizeof(c->id), "%s", sb->id);
        snprintf(c->state, sizeof(c->state), "%s", sb->state);
        c->has_end_reason = sb->end_reason != NULL;
        snprintf(c->end_reason, sizeof(c->end_reason), "%s", sb->end_reason ? sb->end_reason : "");
        snprintf(c->workspace_dir, sizeof(c->workspace_dir), "%s", sb->workspace_dir);
        snprintf(c->cgroup_path, sizeof(c->cgroup_path), "%s", sb->cgroup_path);
        snprintf(c->client_name, sizeof(c->client_name), "%s", sb->client_name);
        ck_assert_uint_le(sb->spec_len, sizeof(c->spec));
        if (sb->spec_len)
                memcpy(c->spec, sb->spec, sb->spec_len);
        return 0;
}

static struct sandbox_copy sandbox_read(struct store *s, const char *id) {
        struct sandbox_copy c;
        int r;

        memset(&c, 0, sizeof(c));
        r = store_sandbox_get(s, id, sandbox_copy_cb, &c);
        ck_assert_msg(r == 0, "get %s = %d: %s", id, r, store_last_error(s));
        ck_assert_int_eq(c.calls, 1);
        return c;
}

START_TEST(test_sandbox_roundtrip) {
        char path[128];
        struct store *s;
        struct store_sandbox sb;
        struct sandbox_copy c;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        sb = sandbox_make("sb-1", 4000000000u, "creating", 1700000000123);
        sb.idle_timeout_ms = UINT64_MAX; /* the full unsigned range round-trips */
        sb.init_pid = -1;
        ck_assert_int_eq(store_sandbox_exists(s, "sb-1"), 0);
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        ck_assert_str_eq(store_last_error(s), "");
        ck_assert_int_eq(store_sandbox_exists(s, "sb-1"), 1);
        ck_assert_int_eq(store_sandbox_exists(s, "sb-2"), 0);

        c = sandbox_read(s, "sb-1");
        ck_assert_str_eq(c.id, "sb-1");
        ck_assert_uint_eq(c.sb.owner_uid, 4000000000u);
        ck_assert_str_eq(c.state, "creating");
        ck_assert_int_eq(c.sb.created_ms, 1700000000123);
        ck_assert_int_eq(c.sb.deadline_ms, 1700000000123 + 300000);
        ck_assert_uint_eq(c.sb.idle_timeout_ms, UINT64_MAX);
        ck_assert_int_eq(c.sb.ended_ms, 0);
        ck_assert_int_eq(c.has_end_reason, 0);
        ck_assert_uint_eq(c.sb.spec_len, sizeof(spec_bytes));
        ck_assert_mem_eq(c.spec, spec_bytes, sizeof(spec_bytes));
        ck_assert_int_eq(c.sb.init_pid, -1);
        ck_assert_str_eq(c.workspace_dir, "/var/lib/sbxd/ws/x");
        ck_assert_str_eq(c.cgroup_path, "sbxd/x");
        ck_assert_uint_eq(c.sb.run_uid, 100000);
        ck_assert_uint_eq(c.sb.caller_pid, 777);
        ck_assert_str_eq(c.client_name, "check");

        /* A duplicate id: -EEXIST with SQLite's message, which the next success clears. */
        sb.state = "ready";
        ck_assert_int_eq(store_sandbox_insert(s, &sb), -EEXIST);
        ck_assert_ptr_nonnull(strstr(store_last_error(s), "UNIQUE"));
        ck_assert_str_eq(sandbox_read(s, "sb-1").state, "creating");
        ck_assert_str_eq(store_last_error(s), "");

        /* No spec and NULL optional strings. */
        sb = sandbox_make("sb-2", 1, "ready", 2);
        sb.spec = NULL;
        sb.spec_len = 0;
        sb.client_name = NULL;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), 0);
        memset(&c, 0, sizeof(c));
        ck_assert_int_eq(store_sandbox_get(s, "sb-2", sandbox_copy_cb, &c), 0);
        ck_assert_uint_eq(c.sb.spec_len, 0);
        ck_assert_str_eq(c.client_name, "(null)");

        /* Required fields and a missing id. */
        sb.id = NULL;
        ck_assert_int_eq(store_sandbox_insert(s, &sb), -EINVAL);
        memset(&c, 0, sizeof(c));
        ck_assert_int_eq(store_sandbox_get(s, "nope", sandbox_copy_cb, &c), -ENOENT);
        ck_assert_int_eq(c.calls, 0);
        ck_assert_str_ne(store_last_error(s), "");
        store_close(s);
}
END_TEST

START_TEST(test_sandbox_updates) {
        char path[128];
        struct store *s;
        struct sandbox_copy c;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "creating", 100);

        ck_assert_int_eq(store_sandbox_set_state(s, "sb", "ready", 0, "ignored"), 0);
        c = sandbox_read(s, "sb");
        ck_assert_str_eq(c.state, "ready");
        ck_assert_int_eq(c.sb.ended_ms, 0);
        ck_assert_int_eq(c.has_end_reason, 0);

        ck_assert_int_eq(store_sandbox_set_deadline(s, "sb", 987654321), 0);
        ck_assert_int_eq(store_sandbox_set_init_pid(s, "sb", 31337), 0);
        c = sandbox_read(s, "sb");
        ck_assert_int_eq(c.sb.deadline_ms, 987654321);
        ck_assert_int_eq(c.sb.init_pid, 31337);

        ck_assert_int_eq(store_sandbox_set_state(s, "sb", "ended", 5000, "timeout"), 0);
        c = sandbox_read(s, "sb");
        ck_assert_str_eq(c.state, "ended");
        ck_assert_int_eq(c.sb.ended_ms, 5000);
        ck_assert_str_eq(c.end_reason, "timeout");
        /* A later state change without an end time keeps the end. */
        ck_assert_int_eq(store_sandbox_set_state(s, "sb", "lost", 0, NULL), 0);
        c = sandbox_read(s, "sb");
        ck_assert_str_eq(c.state, "lost");
        ck_assert_int_eq(c.sb.ended_ms, 5000);
        ck_assert_str_eq(c.end_reason, "timeout");

        ck_assert_int_eq(store_sandbox_set_state(s, "nope", "ready", 0, NULL), -ENOENT);
        ck_assert_ptr_nonnull(strstr(store_last_error(s), "nope"));
        ck_assert_int_eq(store_sandbox_set_deadline(s, "nope", 1), -ENOENT);
        ck_assert_int_eq(store_sandbox_set_init_pid(s, "nope", 1), -ENOENT);
        ck_assert_int_eq(store_sandbox_set_state(s, "sb", NULL, 0, NULL), -EINVAL);
        store_close(s);
}
END_TEST

#define FOREACH_SANDBOXES 70

struct listing {
        int idx[FOREACH_SANDBOXES + 1];
        int n;
        int stop_after;
};

static int listing_cb(const struct store_sandbox *sb, void *userdata) {
        struct listing *l = userdata;
        int i;

        ck_assert_int_eq(sscanf(sb->id, "sb-%d", &i), 1);
        ck_assert_int_lt(l->n, FOREACH_SANDBOXES);
        l->idx[l->n++] = i;
        return l->stop_after && l->n == l->stop_after ? 7 : 0;
}

static const char *const test_states[] = {"ended", "ready", "creating", "lost"};

static int is_live(int i) {
        return i % 4 == 1 || i % 4 == 2;
}

/* Lists with the given filters and checks the result against the model: every
 * matching sandbox, newest first, at most limit. */
static void check_listing(struct store *s, int live_only, int has_owner, uint32_t owner,
                          uint32_t limit) {
        struct listing l = {.n = 0};
        int want = 0, r;

        r = store_sandbox_foreach(s, live_only, has_owner, owner, limit, listing_cb, &l);
        ck_assert_msg(r == 0, "foreach = %d: %s", r, store_last_error(s));
        for (int i = FOREACH_SANDBOXES - 1; i >= 0; i--) {
                if (live_only && !is_live(i))
                        continue;
                if (has_owner && (uint32_t)(1000 + i % 3) != owner)
                        continue;
                if (limit && (uint32_t)want == limit)
                        break;
                ck_assert_msg(want < l.n && l.idx[want] == i,
                              "live=%d owner=%d/%u limit=%u: row %d is not sb-%03d", live_only,
                              has_owner, owner, limit, want, i);
                want++;
        }
        ck_assert_int_eq(l.n, want);
}

START_TEST(test_sandbox_foreach) {
        char path[128];
        struct store *s;
        struct listing l = {.n = 0};

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        for (int i = 0; i < FOREACH_SANDBOXES; i++) {
                char id[16];

                snprintf(id, sizeof(id), "sb-%03d", i);
                /* Pairs share a creation time: the later insert counts as newer. */
                insert_sandbox(s, id, 1000 + (uint32_t)(i % 3), test_states[i % 4],
                               1000 + (i / 2) * 10);
        }
        check_listing(s, 0, 0, 0, 0);
        check_listing(s, 1, 0, 0, 0);
        check_listing(s, 0, 1, 1001, 0);
        check_listing(s, 1, 1, 1002, 0);
        check_listing(s, 0, 1, 5, 0);
        check_listing(s, 0, 0, 0, 5);
        check_listing(s, 0, 0, 0, 33); /* across a batch boundary */
        check_listing(s, 0, 0, 0, 64);
        check_listing(s, 1, 0, 0, 20);
        check_listing(s, 0, 1, 1000, 1);

        /* A callback that stops the walk: its value comes back. */
        l.stop_after = 3;
        ck_assert_int_eq(store_sandbox_foreach(s, 0, 0, 0, 0, listing_cb, &l), 7);
        ck_assert_int_eq(l.n, 3);
        ck_assert_int_eq(l.idx[2], FOREACH_SANDBOXES - 3);
        ck_assert_int_eq(store_sandbox_foreach(s, 0, 0, 0, 0, NULL, NULL), -EINVAL);
        store_close(s);
}
END_TEST

/* A reconciler's callback: marks each live sandbox lost while the walk goes on, and
 * reads the store from inside the callback. */
static int mark_lost_cb(const struct store_sandbox *sb, void *userdata) {
        struct store *s = userdata;
        struct sandbox_copy c;
        int r;

        memset(&c, 0, sizeof(c));
        r = store_sandbox_get(s, sb->id, sandbox_copy_cb, &c);
        if (r < 0)
                return r;
        r = store_sandbox_set_state(s, sb->id, "lost", 9000, "daemon restarted");
        if (r < 0)
                return r;
        return store_commands_mark_unknown(s, sb->id, 9000) < 0 ? -1 : 0;
}

struct die_ctx {
        struct store *s;
        int fd;
};

/* Marks the sandbox lost, tells the parent, and waits inside the walk to be killed. */
static int write_then_wait_cb(const struct store_sandbox *sb, void *userdata) {
        struct die_ctx *ctx = userdata;

        if (store_sandbox_set_state(ctx->s, sb->id, "lost", 9000, "daemon restarted") < 0)
                _exit(4);
        if (write(ctx->fd, "k", 1) != 1)
                _exit(5);
        for (;;)
                pause();
}

START_TEST(test_sandbox_foreach_callback_writes) {
        char path[128];
        struct store *s;
        struct listing l = {.n = 0};
        int r;
        pid_t pid;
        int status, fds[2];
        char byte;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        for (int i = 0; i < FOREACH_SANDBOXES; i++) {
                char id[16];

                snprintf(id, sizeof(id), "sb-%03d", i);
                insert_sandbox(s, id, 1000, test_states[i % 4], i);
        }
        r = store_sandbox_foreach(s, 1, 0, 0, 0, mark_lost_cb, s);
        ck_assert_msg(r == 0, "foreach = %d: %s", r, store_last_error(s));
        ck_assert_int_eq(store_sandbox_foreach(s, 1, 0, 0, 0, listing_cb, &l), 0);
        ck_assert_int_eq(l.n, 0);
        ck_assert_str_eq(sandbox_read(s, "sb-001").state, "lost");
        ck_assert_str_eq(sandbox_read(s, "sb-000").state, "ended");
        insert_sandbox(s, "live", 1000, "ready", 99999);
        store_close(s);

        /* A write made from inside a callback is durable as soon as it returned 0, even
         * though the walk has not finished: the writer is killed inside the callback. */
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct die_ctx ctx = {.fd = fds[1]};

                close(fds[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (store_open(path, &ctx.s) < 0)
                        _exit(2);
                store_sandbox_foreach(ctx.s, 1, 0, 0, 0, write_then_wait_cb, &ctx);
                _exit(3);
        }
        close(fds[1]);
        ck_assert_int_eq(read(fds[0], &byte, 1), 1);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        close(fds[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "child exited with %d", WEXITSTATUS(status));
        s = open_ok(path);
        ck_assert_str_eq(sandbox_read(s, "live").state, "lost");
        store_close(s);
}
END_TEST

/* ---- commands ------------------------------------------------------------------------- */

/* Compares the one command store_history passes with what was inserted. */
struct argv_check {
        const struct store_command *want;
        int calls;
        int ok;
        uint64_t seq;
        char why[128];
};

static int argv_check_cb(const struct store_command *c, void *userdata) {
        struct argv_check *k = userdata;
        const struct store_command *w = k->want;

        k->calls++;
        k->seq = c->seq;
        k->ok = 0;
        if (c->argc != w->argc) {
                snprintf(k->why, sizeof(k->why), "argc %zu, want %zu", c->argc, w->argc);
                return 0;
        }
        for (size_t i = 0; i < w->argc; i++) {
                if (strlen(c->argv[i]) != strlen(w->argv[i]) ||
                    memcmp(c->argv[i], w->argv[i], strlen(w->argv[i])) != 0) {
                        snprintf(k->why, sizeof(k->why), "argv[%zu] differs", i);
                        return 0;
                }
        }
        if (c->argv[w->argc] != NULL) {
                snprintf(k->why, sizeof(k->why), "argv not NULL-terminated");
                return 0;
        }
        if (strcmp(c->cwd, w->cwd) != 0 || strcmp(c->client_name, w->client_name) != 0 ||
            strcmp(c->sandbox_id, w->sandbox_id) != 0 || strcmp(c->command_id, w->command_id) ||
            c->caller_uid != w->caller_uid || c->caller_pid != w->caller_pid ||
            c->started_ms != w->started_ms) {
                snprintf(k->why, sizeof(k->why), "a start field differs");
                return 0;
        }
        /* Not finished: every end field is absent. */
        if (c->ended_ms != 0 || c->outcome || c->has_exit_code || c->has_signal || c->start_error ||
            c->limits_hit) {
                snprintf(k->why, sizeof(k->why), "a running command has end fields");
                return 0;
        }
        k->ok = 1;
        return 0;
}

START_TEST(test_command_argv_roundtrip) {
        char path[128];
        struct store *s;
        char *longarg;
        const size_t long_len = 1u << 20;
        const char *argv[16];
        size_t argc = 0;
        struct store_command c = {.sandbox_id = "sb", .command_id = "c-1", .seq = 1};
        struct argv_check k = {.want = &c};

        longarg = malloc(long_len + 1);
        ck_assert_ptr_nonnull(longarg);
        for (size_t i = 0; i < long_len; i++)
                longarg[i] = (char)(1 + i % 255); /* every byte value except NUL */
        longarg[long_len] = '\0';
        argv[argc++] = "/usr/bin/prog with spaces";
        argv[argc++] = "\"double\" 'single' `back` $(subst) \\backslash\\";
        argv[argc++] = "ünïcødé ✓ 日本語 🚀";
        argv[argc++] = "line1\nline2\r\nline3";
        argv[argc++] = "";
        argv[argc++] = "\t\x01\x7f\xff\xfe invalid utf-8 \xc3";
        argv[argc++] = "%s%n%d";
        argv[argc++] = "{\"json\": [1, \"two\"]}";
        argv[argc++] = longarg;
        argv[argc++] = "";
        argv[argc++] = "x";
        argv[argc++] = "last";
        c.argv = argv;
        c.argc = argc;
        c.cwd = "/workspace/dir with space";
        c.caller_uid = 4000000001u;
        c.caller_pid = 12345;
        c.client_name = "tool \"x\"";
        c.started_ms = 1700000000000;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        ck_assert_int_eq(store_command_insert(s, &c), 0);
        store_close(s);

        /* Read back after a reopen, so that nothing can come from a cache. */
        s = open_ok(path);
        ck_assert_int_eq(store_history(s, "sb", 0, 0, argv_check_cb, &k), 1);
        ck_assert_int_eq(k.calls, 1);
        ck_assert_msg(k.ok, "%s", k.why);
        ck_assert_uint_eq(k.seq, 1);

        /* No argv at all round-trips too. */
        c.command_id = "c-2";
        c.seq = 2;
        c.argv = NULL;
        c.argc = 0;
        ck_assert_int_eq(store_command_insert(s, &c), 0);
        k.calls = 0;
        ck_assert_int_eq(store_history(s, "sb", 1, 0, argv_check_cb, &k), 1);
        ck_assert_msg(k.ok, "%s", k.why);
        ck_assert_uint_eq(k.seq, 2);
        c.command_id = "c-3";
        c.seq = 3;
        c.argc = 1;
        ck_assert_int_eq(store_command_insert(s, &c), -EINVAL);
        store_close(s);
        free(longarg);
}
END_TEST

/* A copy of one command's end fields, found by command id. */
struct command_copy {
        const char *command_id;
        struct store_command c; /* numbers only */
        char outcome[32], limits_hit[64], start_error[64];
        int has_outcome, has_start_error;
        int found;
};

static int command_copy_cb(const struct store_command *c, void *userdata) {
        struct command_copy *k = userdata;

        if (strcmp(c->command_id, k->command_id) != 0)
                return 0;
        k->found++;
        k->c = *c;
        k->has_outcome = c->outcome != NULL;
        snprintf(k->outcome, sizeof(k->outcome), "%s", c->outcome ? c->outcome : "");
        snprintf(k->limits_hit, sizeof(k->limits_hit), "%s", c->limits_hit ? c->limits_hit : "");
        k->has_start_error = c->start_error != NULL;
        snprintf(k->start_error, sizeof(k->start_error), "%s",
                 c->start_error ? c->start_error : "");
        return 0;
}

static struct command_copy command_read(struct store *s, const char *sandbox_id,
                                        const char *command_id) {
        struct command_copy k;
        int r;

        memset(&k, 0, sizeof(k));
        k.command_id = command_id;
        r = store_history(s, sandbox_id, 0, 0, command_copy_cb, &k);
        ck_assert_msg(r >= 0, "history = %d: %s", r, store_last_error(s));
        ck_assert_int_eq(k.found, 1);
        return k;
}

START_TEST(test_command_finish) {
        char path[128];
        struct store *s;
        struct store_command c;
        struct command_copy k;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        insert_command(s, "sb", "exit0");
        insert_command(s, "sb", "killed");
        insert_command(s, "sb", "nostart");
        insert_command(s, "sb", "running");

        /* Exit code 0 is a value, not an absence. */
        c = finished("sb", "exit0", 0);
        c.cpu_seconds = 0.25;
        c.duration = 1.5;
        c.peak_memory_bytes = UINT64_MAX;
        c.stdout_bytes = 1ull << 40;
        c.stderr_bytes = 3;
        c.stdout_truncated = 1;
        c.limits_hit = "memory,pids";
        ck_assert_int_eq(store_command_finish(s, &c), 0);

        c = finished("sb", "killed", 123);
        c.outcome = "signaled";
        c.has_exit_code = 0; /* exit_code must then read back as absent */
        c.has_signal = 1;
        c.signal = 9;
        c.stderr_truncated = 5; /* any non-zero is true */
        ck_assert_int_eq(store_command_finish(s, &c), 0);

        c = finished("sb", "nostart", 0);
        c.outcome = "start_failed";
        c.has_exit_code = 0;
        c.start_error = "execve: No such file or directory";
        ck_assert_int_eq(store_command_finish(s, &c), 0);
        store_close(s);

        s = open_ok(path);
        k = command_read(s, "sb", "exit0");
        ck_assert_str_eq(k.outcome, "exited");
        ck_assert_int_eq(k.c.ended_ms, 6000);
        ck_assert_int_eq(k.c.has_exit_code, 1);
        ck_assert_int_eq(k.c.exit_code, 0);
        ck_assert_int_eq(k.c.has_signal, 0);
        ck_assert_double_eq(k.c.duration, 1.5);
        ck_assert_double_eq(k.c.cpu_seconds, 0.25);
        ck_assert_uint_eq(k.c.peak_memory_bytes, UINT64_MAX);
        ck_assert_uint_eq(k.c.stdout_bytes, 1ull << 40);
        ck_assert_uint_eq(k.c.stderr_bytes, 3);
        ck_assert_int_eq(k.c.stdout_truncated, 1);
        ck_assert_int_eq(k.c.stderr_truncated, 0);
        ck_assert_str_eq(k.limits_hit, "memory,pids");
        ck_assert_int_eq(k.has_start_error, 0);

        k = command_read(s, "sb", "killed");
        ck_assert_str_eq(k.outcome, "signaled");
        ck_assert_int_eq(k.c.has_exit_code, 0);
        ck_assert_int_eq(k.c.exit_code, 0);
        ck_assert_int_eq(k.c.has_signal, 1);
        ck_assert_int_eq(k.c.signal, 9);
        ck_assert_int_eq(k.c.stderr_truncated, 1);

        k = command_read(s, "sb", "nostart");
        ck_assert_str_eq(k.outcome, "start_failed");
        ck_assert_int_eq(k.c.has_exit_code, 0);
        ck_assert_int_eq(k.c.has_signal, 0);
        ck_assert_str_eq(k.start_error, "execve: No such file or directory");

        k = command_read(s, "sb", "running");
        ck_assert_int_eq(k.has_outcome, 0);
        ck_assert_int_eq(k.c.ended_ms, 0);
        ck_assert_int_eq(k.c.has_exit_code, 0);
        ck_assert_int_eq(k.c.has_signal, 0);

        /* Errors: duplicate, unknown command, unknown sandbox, missing fields. */
        {
                static const char *const argv[] = {"x"};
                struct store_command dup = {.sandbox_id = "sb",
                                            .command_id = "exit0",
                                            .seq = seq_of("sb", "exit0"),
                                            .argv = argv,
                                            .argc = 1};

                ck_assert_int_eq(store_command_insert(s, &dup), -EEXIST);
                ck_assert_str_ne(store_last_error(s), "");
                dup.sandbox_id = "nope";
                ck_assert_int_eq(store_command_insert(s, &dup), -ENOENT);
                dup.sandbox_id = "sb";
                dup.seq = 99;
                dup.command_id = NULL;
                ck_assert_int_eq(store_command_insert(s, &dup), -EINVAL);
                dup.command_id = "c-0";
                dup.seq = 0;
                ck_assert_int_eq(store_command_insert(s, &dup), -EINVAL);
                dup.seq = (uint64_t)INT64_MAX + 1;
                ck_assert_int_eq(store_command_insert(s, &dup), -EINVAL);
        }
        /* The end is found by seq, and only with the command id it was recorded with. */
        c = finished("sb", "exit0", 0);
        c.command_id = "killed";
        ck_assert_int_eq(store_command_finish(s, &c), -ENOENT);
        c = finished("sb", "ghost", 0);
        ck_assert_int_eq(store_command_finish(s, &c), -ENOENT);
        ck_assert_ptr_nonnull(strstr(store_last_error(s), "ghost"));
        c = finished("nope", "exit0", 0);
        ck_assert_int_eq(store_command_finish(s, &c), -ENOENT);
        c = finished("sb", "running", 0);
        c.outcome = NULL;
        ck_assert_int_eq(store_command_finish(s, &c), -EINVAL);
        ck_assert_int_eq(command_read(s, "sb", "running").has_outcome, 0);
        store_close(s);
}
END_TEST

/* A command that ended before its start was written is recorded in one statement:
 * the row is the one that insert + finish write, column for column. */
START_TEST(test_command_insert_ended) {
        static const char *const argv[] = {"/bin/echo", "a b", ""};
        static const char cols[] = "sandbox_id, argv, cwd, caller_uid, caller_pid, client_name, "
                                   "started_ms, ended_ms, outcome, exit_code, signal, duration, "
                                   "cpu_seconds, peak_memory_bytes, stdout_bytes, stderr_bytes, "
                                   "stdout_truncated, stderr_truncated, limits_hit, start_error, "
                                   "queued_ms";
        char path[128], sql[1024];
        struct store *s;
        struct store_command c;
        int variant;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        for (variant = 0; variant < 2; variant++) {
                char one[16], two[16];

                snprintf(one, sizeof(one), "one-%d", variant);
                snprintf(two, sizeof(two), "two-%d", variant);
                c = finished("sb", two, 3);
                c.argv = argv;
                c.argc = 3;
                c.cwd = "/workspace/sub";
                c.caller_uid = 1234;
                c.caller_pid = 99;
                c.client_name = variant ? NULL : "agent";
                c.started_ms = 5000;
                c.cpu_seconds = 0.5;
                c.peak_memory_bytes = 1u << 20;
                c.stdout_bytes = 7;
                c.stderr_truncated = 1;
                c.limits_hit = variant ? "" : "output";
                c.queued_ms = variant ? 0 : 2500;
                if (variant) {
                        c.outcome = "start_failed";
                        c.has_exit_code = 0;
                        c.has_signal = 1;
                        c.signal = 9;
                        c.start_error = "execve /bin/echo: Permission denied";
                }
                ck_assert_int_eq(insert_committed(s, &c), 0);
                ck_assert_int_eq(finish_committed(s, &c), 0);
                c.command_id = one;
                c.seq = seq_of("sb", one);
                ck_assert_int_eq(store_command_insert_ended(s, &c), 0);
                ck_assert_int_eq(store_commit(s), 0);
                snprintf(sql, sizeof(sql),
                         "SELECT count(*) FROM (SELECT %s FROM commands WHERE command_id = '%s' "
                         "EXCEPT SELECT %s FROM commands WHERE command_id = '%s')",
                         cols, one, cols, two);
                ck_assert_int_eq(raw_int(path, sql), 0);
                snprintf(sql, sizeof(sql),
                         "SELECT count(*) FROM commands WHERE command_id IN ('%s', '%s') AND "
                         "outcome IS NOT NULL AND argv = X'2F62696E2F6563686F006120620000'",
                         one, two);
                ck_assert_int_eq(raw_int(path, sql), 2);
                snprintf(sql, sizeof(sql),
                         "SELECT count(*) FROM commands WHERE command_id IN ('%s', '%s') AND "
                         "queued_ms = %d",
                         one, two, variant ? 0 : 2500);
                ck_assert_int_eq(raw_int(path, sql), 2);
        }
        /* The errors of store_command_insert. */
        c.command_id = "one-0";
        c.seq = seq_of("sb", "one-0");
        ck_assert_int_eq(store_command_insert_ended(s, &c), -EEXIST);
        c.command_id = "fresh";
        c.seq = seq_of("sb", "fresh");
        c.sandbox_id = "nope";
        ck_assert_int_eq(store_command_insert_ended(s, &c), -ENOENT);
        c.sandbox_id = "sb";
        c.outcome = NULL;
        ck_assert_int_eq(store_command_insert_ended(s, &c), -EINVAL);
        ck_assert_int_eq(store_commit(s), 0);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands"), 4);
        store_close(s);
}
END_TEST

/* How long a command waited for a slot (CommandRecord.queued_ms): written with its start,
 * again with its end, in one row with both, and read back; a command that never started
 * (its wait ended it) has its wait too. */
START_TEST(test_command_queued_ms) {
        static const char *const argv[] = {"true"};
        char path[128];
        struct store *s;
        struct store_command c;
        struct command_copy k;
        struct history h;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        /* No wait: 0. */
        insert_command(s, "sb", "plain");
        /* A wait known at the start, kept by an end that says the same. */
        c = finished("sb", "waited", 0);
        c.argv = argv;
        c.argc = 1;
        c.started_ms = 5000;
        c.queued_ms = 1234;
        ck_assert_int_eq(store_command_insert(s, &c), 0);
        ck_assert_int_eq(store_commit(s), 0);
        ck_assert_uint_eq(command_read(s, "sb", "waited").c.queued_ms, 1234);
        ck_assert_int_eq(command_read(s, "sb", "waited").has_outcome, 0);
        ck_assert_int_eq(finish_committed(s, &c), 0);
        /* The end writes what it is given. */
        c = finished("sb", "plain", 0);
        c.queued_ms = 7;
        ck_assert_int_eq(finish_committed(s, &c), 0);
        /* Waited, never ran: one row, start and end. */
        c = finished("sb", "timed-out", 0);
        c.argv = argv;
        c.argc = 1;
        c.outcome = "queue_timeout";
        c.has_exit_code = 0;
        c.duration = 0;
        c.queued_ms = 60000;
        ck_assert_int_eq(store_command_insert_ended(s, &c), 0);
        /* A large value goes through the signed column unchanged. */
        c = finished("sb", "huge", 0);
        c.argv = argv;
        c.argc = 1;
        c.queued_ms = (1ull << 62) + 5;
        ck_assert_int_eq(store_command_insert_ended(s, &c), 0);
        ck_assert_int_eq(store_commit(s), 0);
        store_close(s);

        s = open_ok(path);
        k = command_read(s, "sb", "plain");
        ck_assert_uint_eq(k.c.queued_ms, 7);
        k = command_read(s, "sb", "waited");
        ck_assert_uint_eq(k.c.queued_ms, 1234);
        ck_assert_str_eq(k.outcome, "exited");
        k = command_read(s, "sb", "timed-out");
        ck_assert_uint_eq(k.c.queued_ms, 60000);
        ck_assert_str_eq(k.outcome, "queue_timeout");
        ck_assert_double_eq(k.c.duration, 0);
        k = command_read(s, "sb", "huge");
        ck_assert_uint_eq(k.c.queued_ms, (1ull << 62) + 5);
        h = history_all(s, "sb");
        ck_assert_uint_eq(h.n, 4);
        ck_assert_uint_eq(h.v[0].queued_ms, 7);
        ck_assert_uint_eq(h.v[1].queued_ms, 1234);
        history_free(&h);
        ck_assert_int_eq(raw_int(path, "SELECT sum(queued_ms = 0) FROM commands"), 0);
        store_close(s);
}
END_TEST

/* RunCommand.background (schema 7) and tty (schema 8): written with the start, or with a whole row, kept by
 * the end, read back; a database of schema 6 gains the column in place and its records
 * read 0 (they did not run in the background). */
START_TEST(test_command_background) {
        static const char *const argv[] = {"true"};
        char path[128];
        struct store *s;
        struct store_command c;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        insert_command(s, "sb", "plain");
        c = finished_at("sb", "bg", 2, 0);
        c.argv = argv;
        c.argc = 1;
        c.background = 1;
        ck_assert_int_eq(insert_committed(s, &c), 0);
        ck_assert_int_eq(command_read(s, "sb", "bg").c.background, 1);
        ck_assert_int_eq(finish_committed(s, &c), 0);
        c = finished_at("sb", "bg-whole", 3, 0);
        c.argv = argv;
        c.argc = 1;
        c.background = 1;
        c.tty = 1; /* schema 8 */
        ck_assert_int_eq(store_command_insert_ended(s, &c), 0);
        ck_assert_int_eq(store_commit(s), 0);
        store_close(s);

        s = open_ok(path);
        ck_assert_int_eq(command_read(s, "sb", "plain").c.background, 0);
        ck_assert_int_eq(command_read(s, "sb", "bg").c.background, 1);
        ck_assert_str_eq(command_read(s, "sb", "bg").outcome, "exited");
        ck_assert_int_eq(command_read(s, "sb", "bg-whole").c.background, 1);
        ck_assert_int_eq(command_read(s, "sb", "bg-whole").c.tty, 1);
        ck_assert_int_eq(command_read(s, "sb", "bg").c.tty, 0);
        store_close(s);

        /* Back to schema 6 as released (no column), then opened again. */
        raw_exec(path, "DROP TABLE forwards; ALTER TABLE commands DROP COLUMN tty; ALTER TABLE "
                       "commands DROP COLUMN background; PRAGMA user_version = 6;");
        s = open_ok(path);
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM pragma_table_info('commands') "
                                       "WHERE name = 'background' AND \"notnull\" = 1 AND "
                                       "dflt_value = '0'"),
                         1);
        ck_assert_int_eq(command_read(s, "sb", "bg").c.background, 0);
        ck_assert_str_eq(command_read(s, "sb", "bg").outcome, "exited");
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands"), 3);
        store_close(s);
}
END_TEST

/* Schema 4 -> 5: the commands table gains queued_ms in place; the records of before
 * keep every field and read 0 (they never waited); new ones record their wait. */
START_TEST(test_upgrade_from_4) {
        char path[128], sql[4096];
        struct store *s;
        struct store_command c;
        struct command_copy k;
        struct history h;

        tmp_path(path, sizeof(path), "state-4.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        store_close(s);
        snprintf(sql, sizeof(sql),
                 "%s"
                 "INSERT INTO commands (sandbox_id, seq, command_id, argv, cwd, caller_uid, "
                 "  caller_pid, client_name, started_ms, ended_ms, outcome, exit_code, duration, "
                 "  stdout_bytes, limits_hit) VALUES "
                 "  ('a', 1, 'c-1', X'7400', '/workspace', 1000, 2, 'old', 100, 150, 'exited', "
                 "   3, 0.05, 12, ''),"
                 "  ('a', 2, 'c-2', X'7400', NULL, 1000, 2, NULL, 200, 0, NULL, NULL, 0, 0, "
                 "   NULL);"
                 "PRAGMA user_version = 4;",
                 commands_schema_4);
        raw_exec(path, sql);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM pragma_table_info('commands') "
                                       "WHERE name = 'queued_ms'"),
                         0);

        s = open_ok(path);
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM pragma_table_info('commands') "
                                       "WHERE name = 'queued_ms' AND \"notnull\" = 1 AND "
                                       "dflt_value = '0'"),
                         1);
        k = command_read(s, "a", "c-1");
        ck_assert_uint_eq(k.c.queued_ms, 0);
        ck_assert_uint_eq(k.c.seq, 1);
        ck_assert_str_eq(k.outcome, "exited");
        ck_assert_int_eq(k.c.exit_code, 3);
        ck_assert_int_eq(k.c.started_ms, 100);
        ck_assert_int_eq(k.c.ended_ms, 150);
        ck_assert_uint_eq(k.c.stdout_bytes, 12);
        k = command_read(s, "a", "c-2");
        ck_assert_uint_eq(k.c.queued_ms, 0);
        ck_assert_int_eq(k.has_outcome, 0);

        /* The records go on: the running one ends with its wait, a new one starts. */
        c = finished_at("a", "c-2", 2, 0);
        c.queued_ms = 40;
        ck_assert_int_eq(finish_committed(s, &c), 0);
        c = finished_at("a", "c-3", 3, 0);
        c.queued_ms = 90;
        ck_assert_int_eq(insert_committed(s, &c), 0);
        h = history_all(s, "a");
        ck_assert_uint_eq(h.n, 3);
        ck_assert_uint_eq(h.v[0].queued_ms, 0);
        ck_assert_uint_eq(h.v[1].queued_ms, 40);
        ck_assert_uint_eq(h.v[2].queued_ms, 90);
        history_free(&h);
        ck_assert_int_eq(store_integrity_check(s), 0);
        store_close(s);

        /* Opened again: nothing left to migrate. */
        s = open_ok(path);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands"), 3);
        store_close(s);
}
END_TEST

START_TEST(test_history_paging) {
        char path[128];
        struct store *s;
        uint64_t seq_a[150], after = 0;
        struct history h = {0};
        size_t total = 0;
        int r;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        insert_sandbox(s, "b", 1000, "ready", 2);
        for (int i = 0; i < 150; i++) {
                char id[32];
                uint64_t seq_b;

                snprintf(id, sizeof(id), "c-%03d", i);
                seq_a[i] = insert_command(s, "a", id);
                seq_b = insert_command(s, "b", id);
                /* Each sandbox numbers its own: b's history is not a's. */
                ck_assert_uint_eq(seq_a[i], (uint64_t)i + 1);
                ck_assert_uint_eq(seq_b, seq_a[i]);
        }

        /* Pages of 64 after the last seq seen: 64, 64, 22, then nothing. */
        for (int page = 0; page < 4; page++) {
                static const int want[] = {64, 64, 22, 0};

                memset(&h, 0, sizeof(h));
                r = store_history(s, "a", after, 64, history_cb, &h);
                ck_assert_int_eq(r, want[page]);
                ck_assert_int_eq((int)h.n, want[page]);
                for (size_t i = 0; i < h.n; i++) {
                        char id[32];

                        snprintf(id, sizeof(id), "c-%03zu", total);
                        ck_assert_uint_eq(h.v[i].seq, seq_a[total]);
                        ck_assert_str_eq(h.v[i].command_id, id);
                        total++;
                }
                if (h.n)
                        after = h.v[h.n - 1].seq;
                history_free(&h);
        }
        ck_assert_uint_eq(total, 150);

        h = history_all(s, "a");
        ck_assert_uint_eq(h.n, 150);
        history_free(&h);
        memset(&h, 0, sizeof(h));
        ck_assert_int_eq(store_history(s, "a", seq_a[148], 1, history_cb, &h), 1);
        ck_assert_uint_eq(h.v[0].seq, seq_a[149]);
        history_free(&h);
        ck_assert_int_eq(store_history(s, "a", UINT64_MAX, 0, history_cb, &h), 0);
        ck_assert_int_eq(store_history(s, "nope", 0, 0, history_cb, &h), 0);
        ck_assert_uint_eq(h.n, 0);

        /* A callback that stops the walk: its value comes back. */
        h.stop_after = 40;
        ck_assert_int_eq(store_history(s, "a", 0, 0, history_cb, &h), 99);
        ck_assert_uint_eq(h.n, 40);
        history_free(&h);
        store_close(s);
}
END_TEST

START_TEST(test_mark_unknown) {
        char path[128];
        struct store *s;
        struct store_command c;
        struct command_copy k;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        insert_sandbox(s, "b", 1000, "ready", 2);
        insert_command(s, "a", "a1");
        insert_command(s, "a", "a2");
        insert_command(s, "a", "a3");
        insert_command(s, "b", "b1");
        insert_command(s, "b", "b2");
        c = finished("a", "a2", 3);
        ck_assert_int_eq(store_command_finish(s, &c), 0);

        ck_assert_int_eq(store_commands_mark_unknown(s, "a", 7777), 2);
        k = command_read(s, "a", "a1");
        ck_assert_str_eq(k.outcome, "unknown");
        ck_assert_int_eq(k.c.ended_ms, 7777);
        k = command_read(s, "a", "a2"); /* finished before: untouched */
        ck_assert_str_eq(k.outcome, "exited");
        ck_assert_int_eq(k.c.ended_ms, 6000);
        ck_assert_int_eq(k.c.exit_code, 3);
        ck_assert_int_eq(command_read(s, "b", "b1").has_outcome, 0);

        ck_assert_int_eq(store_commands_mark_unknown(s, "a", 8888), 0);
        ck_assert_int_eq(command_read(s, "a", "a1").c.ended_ms, 7777);
        ck_assert_int_eq(store_commands_mark_unknown(s, NULL, 9999), 2);
        k = command_read(s, "b", "b2");
        ck_assert_str_eq(k.outcome, "unknown");
        ck_assert_int_eq(k.c.ended_ms, 9999);
        ck_assert_int_eq(store_commands_mark_unknown(s, NULL, 9999), 0);
        ck_assert_int_eq(store_commands_mark_unknown(s, "nope", 9999), 0);
        store_close(s);
}
END_TEST

/* ---- file operations and retention ---------------------------------------------------- */

static void insert_fileop(struct store *s, const char *sandbox_id, const char *op, int64_t t) {
        struct store_fileop f = {
                .sandbox_id = sandbox_id,
                .op = op,
                .path = "/workspace/a file\nwith newline",
                .bytes = 4096,
                .result = "OK",
                .caller_uid = 1000,
                .caller_pid = 99,
                .client_name = "check",
                .time_ms = t,
        };
        int r = store_fileop_insert(s, &f);

        ck_assert_msg(r == 0, "fileop = %d: %s", r, store_last_error(s));
}

START_TEST(test_fileops) {
        char path[128];
        struct store *s;
        struct store_fileop f = {.sandbox_id = "nope", .op = "read", .path = "/x", .result = "OK"};

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        insert_sandbox(s, "b", 1000, "ready", 2);
        ck_assert_int_eq(store_fileop_count(s, "a"), 0);
        insert_fileop(s, "a", "write", 10);
        insert_fileop(s, "a", "read", 11);
        insert_fileop(s, "a", "remove", 12);
        insert_fileop(s, "b", "list", 13);
        ck_assert_int_eq(store_fileop_count(s, "a"), 3);
        ck_assert_int_eq(store_fileop_count(s, "b"), 1);
        ck_assert_int_eq(store_fileop_count(s, "nope"), 0);
        ck_assert_int_eq(store_fileop_insert(s, &f), -ENOENT);
        f.sandbox_id = "a";
        f.path = NULL;
        ck_assert_int_eq(store_fileop_insert(s, &f), -EINVAL);
        ck_assert_int_eq(store_fileop_count(s, "a"), 3);
        store_close(s);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM fileops"), 4);
}
END_TEST

START_TEST(test_prune) {
        char path[128];
        struct store *s;
        struct history h;
        uint64_t seq;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "live", 1000, "ready", 10); /* created long ago, still running */
        insert_sandbox(s, "recent", 1000, "ready", 20);
        insert_sandbox(s, "old", 1000, "ready", 30);
        insert_sandbox(s, "lost-old", 1000, "creating", 40);
        ck_assert_int_eq(store_sandbox_set_state(s, "recent", "ended", 5000, "deleted"), 0);
        ck_assert_int_eq(store_sandbox_set_state(s, "old", "ended", 1000, "timeout"), 0);
        ck_assert_int_eq(store_sandbox_set_state(s, "lost-old", "lost", 500, "restart"), 0);
        insert_command(s, "live", "c1");
        insert_command(s, "recent", "c1");
        insert_fileop(s, "live", "read", 1);
        insert_fileop(s, "recent", "read", 1);
        for (int i = 0; i < 5; i++) {
                char id[16];

                snprintf(id, sizeof(id), "c%d", i);
                insert_command(s, "lost-old", id);
                insert_command(s, "old", id);
                insert_fileop(s, "old", "write", i);
                insert_fileop(s, "lost-old", "write", i);
        }

        ck_assert_int_eq(store_prune(s, 0), 0);
        ck_assert_int_eq(store_prune(s, 2000), 2);
        ck_assert_int_eq(store_sandbox_exists(s, "old"), 0);
        ck_assert_int_eq(store_sandbox_exists(s, "lost-old"), 0);
        ck_assert_int_eq(store_sandbox_exists(s, "recent"), 1);
        ck_assert_int_eq(store_sandbox_exists(s, "live"), 1);
        h = history_all(s, "old");
        ck_assert_uint_eq(h.n, 0);
        history_free(&h);
        ck_assert_int_eq(store_fileop_count(s, "old"), 0);
        ck_assert_int_eq(store_fileop_count(s, "lost-old"), 0);
        ck_assert_int_eq(store_fileop_count(s, "recent"), 1);
        ck_assert_int_eq(store_fileop_count(s, "live"), 1);
        h = history_all(s, "recent");
        ck_assert_uint_eq(h.n, 1);
        history_free(&h);
        ck_assert_int_eq(store_prune(s, 2000), 0);

        /* A live sandbox's numbering goes on. */
        seq = insert_command(s, "live", "c2");
        ck_assert_uint_eq(seq, 2);

        /* A live sandbox is never pruned, however old. */
        ck_assert_int_eq(store_prune(s, INT64_MAX), 1);
        ck_assert_int_eq(store_sandbox_exists(s, "live"), 1);
        ck_assert_int_eq(store_integrity_check(s), 0);
        store_close(s);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands"), 2);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM fileops"), 1);
}
END_TEST

/* ---- crash safety: SIGKILL in the middle of writing ----------------------------------- */

/* What the writer reports after each write that returned 0. */
struct crash_report {
        uint64_t seq;
        uint64_t finished; /* 0: the insert of seq, 1: its finish */
};

#define CRASH_MAX_WRITES 200000

static void crash_writer(const char *path, int round, int fd) {
        static const char *const argv[] = {"/bin/sh", "-c", "echo 'crash test' > out"};
        struct store *s = NULL;

        /* Never outlive the test, even if it fails before killing us. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                _exit(2);
        if (store_open(path, &s) < 0)
                _exit(3);
        for (int i = 0; i < CRASH_MAX_WRITES; i++) {
                char id[32];
                struct store_command c = {.sandbox_id = "sb",
                                          .command_id = id,
                                          .argv = argv,
                                          .argc = 3,
                                          .cwd = "/workspace",
                                          .started_ms = i,
                                          .seq = (uint64_t)round * CRASH_MAX_WRITES + i + 1};
                struct crash_report rep = {c.seq, 0};

                snprintf(id, sizeof(id), "r%d-c%d", round, i);
                if (insert_committed(s, &c) < 0)
                        _exit(4);
                if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
                        _exit(5);
                if (i % 2 == 0) {
                        struct store_command f = finished_at("sb", id, c.seq, i % 256);

                        if (finish_committed(s, &f) < 0)
                                _exit(6);
                        rep.finished = 1;
                        if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
                                _exit(7);
                }
                if (i % 3 == 0) {
                        struct store_fileop op = {
                                .sandbox_id = "sb", .op = "write", .path = id, .result = "OK"};

                        if (store_fileop_insert(s, &op) < 0)
                                _exit(8);
                }
        }
        _exit(9);
}

static int read_report(int fd, struct crash_report *rep) {
        size_t got = 0;

        while (got < sizeof(*rep)) {
                ssize_t n = read(fd, (char *)rep + got, sizeof(*rep) - got);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 0;
                got += (size_t)n;
        }
        return 1;
}

START_TEST(test_crash_sigkill) {
        char path[128];
        struct store *s;
        size_t prev_rows = 0;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        store_close(s);

        for (int round = 0; round < 4; round++) {
                struct crash_report rep, *reps = NULL;
                size_t nrep = 0, inserted = 0, cap = 0;
                int fds[2], status;
                struct history h;
                pid_t pid;

                ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
                pid = fork();
                ck_assert_int_ge(pid, 0);
                if (pid == 0) {
                        close(fds[0]);
                        crash_writer(path, round, fds[1]);
                }
                close(fds[1]);
                while (read_report(fds[0], &rep)) {
                        if (nrep == cap) {
                                cap = cap ? 2 * cap : 1024;
                                reps = realloc(reps, cap * sizeof(*reps));
                                ck_assert_ptr_nonnull(reps);
                        }
                        reps[nrep++] = rep;
                        inserted += !rep.finished;
                        /* Kill at a different point each round. */
                        if (nrep == (size_t)(40 + 97 * round))
                                ck_assert_int_eq(kill(pid, SIGKILL), 0);
                }
                close(fds[0]);
                ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                              "writer did not die by SIGKILL (exit %d)", WEXITSTATUS(status));

                s = open_ok(path);
                ck_assert_msg(store_integrity_check(s) == 0, "%s", store_last_error(s));
                h = history_all(s, "sb");
                for (size_t i = 0; i < nrep; i++) {
                        const struct seen_command *e = history_find(&h, reps[i].seq);

                        ck_assert_msg(e, "round %d: acknowledged seq %llu is lost", round,
                                      (unsigned long long)reps[i].seq);
                        if (reps[i].finished)
                                ck_assert_msg(e->has_outcome && !strcmp(e->outcome, "exited"),
                                              "round %d: finish of seq %llu is lost", round,
                                              (unsigned long long)reps[i].seq);
                }
                /* At most the one insert in flight when the kill came is extra. */
                ck_assert_uint_ge(h.n - prev_rows, inserted);
                ck_assert_uint_le(h.n - prev_rows, inserted + 1);
                prev_rows = h.n;
                /* What a restarting daemon does: running commands become unknown. */
                ck_assert_int_ge(store_commands_mark_unknown(s, "sb", 1), 0);
                history_free(&h);
                store_close(s);
                free(reps);
        }
}
END_TEST

/* ---- fault injection: the Nth allocation SQLite makes fails --------------------------- */

static sqlite3_mem_methods real_mem;
static long fault_at;     /* the allocation that fails (counted from 1); 0: none */
static long fault_count;  /* allocations since the fault was armed */
static int fault_persist; /* every allocation after fault_at fails as well */
static int fault_hit;

static int fault_now(void) {
        if (fault_at == 0)
                return 0;
        fault_count++;
        if (fault_count == fault_at || (fault_persist && fault_count > fault_at)) {
                fault_hit = 1;
                return 1;
        }
        return 0;
}

static void *fault_malloc(int n) {
        return fault_now() ? NULL : real_mem.xMalloc(n);
}

static void *fault_realloc(void *p, int n) {
        return fault_now() ? NULL : real_mem.xRealloc(p, n);
}

/* Installs the failing allocator. SQLite takes a new allocator only while shut down,
 * which also makes this work when Check does not fork (under valgrind). */
static void fault_install(void) {
        static sqlite3_mem_methods m;

        ck_assert_int_eq(sqlite3_shutdown(), SQLITE_OK);
        ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem), SQLITE_OK);
        m = real_mem;
        m.xMalloc = fault_malloc;
        m.xRealloc = fault_realloc;
        ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_MALLOC, &m), SQLITE_OK);
        ck_assert_int_eq(sqlite3_initialize(), SQLITE_OK);
}

static void fault_uninstall(void) {
        fault_at = 0;
        ck_assert_int_eq(sqlite3_shutdown(), SQLITE_OK);
        ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_MALLOC, &real_mem), SQLITE_OK);
        ck_assert_int_eq(sqlite3_initialize(), SQLITE_OK);
}

/* What one iteration's calls returned; 1: not run. */
struct fault_result {
        int open, sandbox, command, finish, history;
};

/* A failure under memory pressure must be a plain -errno that says what happened. */
static void check_fault_rc(struct store *s, int r, const char *what, long n) {
        if (r >= 0)
                return;
        ck_assert_msg(r == -ENOMEM || r == -EIO, "%s at allocation %ld: unexpected %d (%s)", what,
                      n, r, store_last_error(s));
        ck_assert_msg(store_last_error(s)[0] != '\0', "%s at allocation %ld: no message", what, n);
}

static void fault_iteration(const char *path, long n, struct fault_result *res) {
        static const char *const argv[] = {"/bin/true", "arg with space"};
        char sb_id[32], cmd_id[32];
        struct store *s = NULL;
        struct store_sandbox sb;
        struct store_command c = {.argv = argv, .argc = 2, .cwd = "/", .started_ms = 1, .seq = 1};
        struct history h = {0};

        res->open = res->sandbox = res->command = res->finish = res->history = 1;
        snprintf(sb_id, sizeof(sb_id), "sb-%ld", n);
        snprintf(cmd_id, sizeof(cmd_id), "cmd-%ld", n);
        res->open = store_open(path, &s);
        if (res->open < 0) {
                ck_assert_ptr_null(s);
                check_fault_rc(NULL, res->open, "open", n);
                return;
        }
        sb = sandbox_make(sb_id, 1000, "ready", n);
        res->sandbox = store_sandbox_insert(s, &sb);
        check_fault_rc(s, res->sandbox, "sandbox insert", n);
        c.sandbox_id = sb_id;
        c.command_id = cmd_id;
        res->command = insert_committed(s, &c);
        if (res->sandbox < 0 && res->command == -ENOENT)
                res->command = -ENOMEM; /* its sandbox is missing: expected */
        check_fault_rc(s, res->command, "command insert", n);
        c = finished_at(sb_id, cmd_id, 1, 0);
        res->finish = finish_committed(s, &c);
        if (res->command < 0 && res->finish == -ENOENT)
                res->finish = -ENOMEM;
        check_fault_rc(s, res->finish, "command finish", n);
        res->history = store_history(s, sb_id, 0, 0, history_cb, &h);
        check_fault_rc(s, res->history, "history", n);
        history_free(&h);
        ck_assert_ptr_null(store_close(s));
}

static void run_fault_injection(int persist) {
        char path[128];
        struct fault_result *res = NULL;
        long n, failures = 0;
        struct store *s;

        tmp_path(path, sizeof(path), "state.db");
        fault_install();
        fault_persist = persist;
        for (n = 1;; n++) {
                res = realloc(res, (size_t)n * sizeof(*res));
                ck_assert_ptr_nonnull(res);
                fault_count = 0;
                fault_hit = 0;
                fault_at = n;
                fault_iteration(path, n, &res[n - 1]);
                fault_at = 0;
                if (!fault_hit)
                        break; /* every allocation of a whole iteration succeeded */
                ck_assert_msg(n < 100000, "still failing after %ld allocations", n);
                failures += res[n - 1].open < 0 || res[n - 1].sandbox < 0 ||
                            res[n - 1].command < 0 || res[n - 1].finish < 0;
        }
        fault_uninstall();
        fprintf(stderr, "fault injection (%s): %ld allocations, %ld iterations failed\n",
                persist ? "persistent" : "transient", n - 1, failures);
        ck_assert_int_gt(failures, 0);
        /* The last iteration ran without a fault: it did everything. */
        ck_assert_int_eq(res[n - 1].open, 0);
        ck_assert_int_eq(res[n - 1].finish, 0);
        ck_assert_int_eq(res[n - 1].history, 1);

        /* Every write that returned 0 is there, and none that failed left anything. */
        s = open_ok(path);
        ck_assert_msg(store_integrity_check(s) == 0, "%s", store_last_error(s));
        for (long i = 1; i <= n; i++) {
                const struct fault_result *r = &res[i - 1];
                char sb_id[32];
                struct history h;

                snprintf(sb_id, sizeof(sb_id), "sb-%ld", i);
                if (r->sandbox <= 0)
                        ck_assert_int_eq(store_sandbox_exists(s, sb_id), r->sandbox == 0);
                h = history_all(s, sb_id);
                if (r->command <= 0)
                        ck_assert_msg(h.n == (r->command == 0), "iteration %ld: %zu commands", i,
                                      h.n);
                if (r->finish <= 0 && h.n == 1)
                        ck_assert_msg(h.v[0].has_outcome == (r->finish == 0),
                                      "iteration %ld: finish returned %d", i, r->finish);
                history_free(&h);
        }
        store_close(s);
        free(res);
}

START_TEST(test_fault_malloc_transient) {
        run_fault_injection(0);
}
END_TEST

START_TEST(test_fault_malloc_persistent) {
        run_fault_injection(1);
}
END_TEST

/* ---- a full disk ---------------------------------------------------------------------- */

static int child_report_fd = -1;

/* Ends a test's child process with a message for the parent. */
static void child_exit(int code, const char *fmt, ...)
        __attribute__((format(printf, 2, 3), noreturn));
static void child_exit(int code, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vdprintf(child_report_fd, fmt, ap);
        va_end(ap);
        _exit(code);
}

#define CHILD_CHECK(cond, ...)                                                                     \
        do {                                                                                       \
                if (!(cond))                                                                       \
                        child_exit(1, __VA_ARGS__);                                                \
        } while (0)

#define SKIP_EXIT 77

/* Runs in a child with its own mount namespace: a 1 MiB tmpfs holds the database. */
static void disk_full_child(void) {
        char mnt[128], path[160], ballast[160], big[3000], id[32];
        static char zeros[64 * 1024];
        const char *argv[] = {"/bin/cat", big};
        struct store *s = NULL;
        int fd, r = 0, full_rc, inserted = 0, done = 0;
        struct history h;

        if (unshare(CLONE_NEWNS) < 0)
                child_exit(SKIP_EXIT, "unshare(CLONE_NEWNS): %s", strerror(errno));
        /* Private first, so that the mount below never propagates to the host. */
        CHILD_CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0,
                    "making / private: %s", strerror(errno));
        tmp_path(mnt, sizeof(mnt), "small");
        CHILD_CHECK(mkdir(mnt, 0700) == 0, "mkdir: %s", strerror(errno));
        if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0700") < 0)
                child_exit(SKIP_EXIT, "mounting a tmpfs: %s", strerror(errno));
        snprintf(path, sizeof(path), "%s/state.db", mnt);
        snprintf(ballast, sizeof(ballast), "%s/ballast", mnt);

        /* Space an operator can free later. */
        fd = open(ballast, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        CHILD_CHECK(fd >= 0, "ballast: %s", strerror(errno));
        for (int i = 0; i < 2; i++)
                CHILD_CHECK(write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros),
                            "ballast: %s", strerror(errno));
        close(fd);

        r = store_open(path, &s);
        CHILD_CHECK(r == 0, "open = %d: %s", r, store_last_error(NULL));
        insert_sandbox(s, "sb", 1000, "ready", 1);
        memset(big, 'b', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        for (int i = 0; i < 10000; i++) {
                struct store_command c = {.sandbox_id = "sb",
                                          .command_id = id,
                                          .argv = argv,
                                          .argc = 2,
                                          .started_ms = i,
                                          .seq = (uint64_t)i + 1};
                struct store_command f = finished_at("sb", id, c.seq, 0);

                snprintf(id, sizeof(id), "c-%d", i);
                r = insert_committed(s, &c);
                if (r < 0)
                        break;
                inserted++;
                r = finish_committed(s, &f);
                if (r < 0)
                        break;
                done++;
        }
        CHILD_CHECK(r < 0, "1 MiB never filled up");
        CHILD_CHECK(r == -ENOSPC || (r == -EIO && store_last_error(s)[0]),
                    "a full disk gave %d: %s", r, store_last_error(s));
        full_rc = r;
        /* Still full: more writes fail the same way, and nothing breaks. */
        for (int i = 0; i < 3; i++) {
                struct store_command c = {.sandbox_id = "sb",
                                          .command_id = "more",
                                          .seq = 100000,
                                          .argv = argv,
                                          .argc = 2};

                r = insert_committed(s, &c);
                CHILD_CHECK(r == -ENOSPC || r == -EIO, "retry %d gave %d: %s", i, r,
                            store_last_error(s));
        }
        /* Reading still works. */
        memset(&h, 0, sizeof(h));
        r = store_history(s, "sb", 0, 0, history_cb, &h);
        CHILD_CHECK(r == inserted, "history while full = %d (want %d): %s", r, inserted,
                    store_last_error(s));
        history_free(&h);
        store_close(s);

        /* The operator frees space and the daemon restarts: nothing acknowledged is lost
         * and nothing that failed was half-written. */
        CHILD_CHECK(unlink(ballast) == 0, "unlink: %s", strerror(errno));
        s = NULL;
        r = store_open(path, &s);
        CHILD_CHECK(r == 0, "reopen = %d: %s", r, store_last_error(NULL));
        r = store_integrity_check(s);
        CHILD_CHECK(r == 0, "integrity_check = %d: %s", r, store_last_error(s));
        memset(&h, 0, sizeof(h));
        r = store_history(s, "sb", 0, 0, history_cb, &h);
        CHILD_CHECK(r == inserted, "history = %d, want %d", r, inserted);
        for (int i = 0; i < inserted; i++) {
                snprintf(id, sizeof(id), "c-%d", i);
                CHILD_CHECK(strcmp(h.v[i].command_id, id) == 0, "row %d is %s", i,
                            h.v[i].command_id);
                CHILD_CHECK(h.v[i].has_outcome == (i < done), "row %d: finished %d", i,
                            h.v[i].has_outcome);
        }
        history_free(&h);
        {
                struct store_command c = {.sandbox_id = "sb",
                                          .command_id = "after",
                                          .seq = 100001,
                                          .argv = argv,
                                          .argc = 2};

                r = insert_committed(s, &c);
                CHILD_CHECK(r == 0, "insert after freeing space = %d: %s", r, store_last_error(s));
        }
        store_close(s);
        child_exit(0, "%d commands inserted, %d finished, then %s", inserted, done,
                   strerror(-full_rc));
}

START_TEST(test_disk_full) {
        char msg[512];
        int fds[2], status;
        ssize_t n, got = 0;
        pid_t pid;

        if (geteuid() != 0) {
                fprintf(stderr, "test_disk_full: SKIPPED: mounting a small tmpfs needs root\n");
                return;
        }
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(fds[0]);
                child_report_fd = fds[1];
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                disk_full_child();
        }
        close(fds[1]);
        while ((n = read(fds[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
                got += n;
        msg[got] = '\0';
        close(fds[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "the child died by signal %d", WTERMSIG(status));
        if (WEXITSTATUS(status) == SKIP_EXIT) {
                fprintf(stderr, "test_disk_full: SKIPPED: %s\n", msg);
                return;
        }
        ck_assert_msg(WEXITSTATUS(status) == 0, "%s", msg);
        fprintf(stderr, "test_disk_full: %s\n", msg);
}
END_TEST

/* The batch of command records: nothing of it is durable before store_commit, all of
 * it after; any other write commits it first; reads see it at once. */
/* The WAL's length in frames, as another connection's checkpoint reports it. */
static int wal_length(const char *path) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int n;

        ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
        ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &st, NULL),
                         SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        n = sqlite3_column_int(st, 1);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return n;
}

static void *checkpoint_thread(void *arg) {
        struct store *s = arg;
        static int r;

        r = store_checkpoint_run(s);
        return &r;
}

static int record_command(struct store *s, int i) {
        static const char *const argv[] = {"true"};
        char id[32];
        struct store_command c = {
                .sandbox_id = "sb", .command_id = id, .seq = (uint64_t)i + 1, .argv = argv, .argc = 1};

        snprintf(id, sizeof(id), "c-%d", i);
        return insert_committed(s, &c);
}

/* Checkpoints run on another thread while the loop's connection goes on committing;
 * the loop's connection checkpoints itself only past the WAL's cap, and the WAL then
 * starts over. */
START_TEST(test_checkpoint_off_loop) {
        char path[128];
        struct store *s;
        pthread_t t;
        void *ret;
        int i, n, frames, copied, tries;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        ck_assert(!store_checkpoint_wanted(s));
        for (n = 0; !store_checkpoint_wanted(s); n++) {
                ck_assert_int_lt(n, 2000);
                ck_assert_int_eq(record_command(s, n), 0);
        }
        /* SQLite's own checkpoint would have started the WAL over by now. */
        frames = store_wal_frames(s);
        ck_assert_int_ge(frames, 1000);

        /* A passive checkpoint that meets the writer at the wrong moment says SQLITE_BUSY
         * and copies nothing (store_checkpoint_run returns 0; the daemon tries again
         * later): so does this test, a few times, each run beside 200 commits. */
        for (tries = 0, copied = 0; copied == 0 && tries < 5; tries++) {
                store_checkpoint_begin(s);
                ck_assert(!store_checkpoint_wanted(s)); /* one at a time */
                ck_assert_int_eq(pthread_create(&t, NULL, checkpoint_thread, s), 0);
                for (i = 0; i < 200; i++)
                        ck_assert_int_eq(record_command(s, n + i), 0);
                n += i;
                ck_assert_int_eq(pthread_join(t, &ret), 0);
                copied = *(int *)ret;
                if (copied == 0)
                        ck_assert_ptr_null(store_checkpoint_end(s, 0));
        }
        ck_assert_int_ge(copied, frames); /* at least what was there when it began */
        ck_assert_ptr_null(store_checkpoint_end(s, copied));
        /* Only the frames written meanwhile are new: not worth another. */
        ck_assert(!store_checkpoint_wanted(s));

        /* With no checkpoint run on the thread (store_checkpoint_wanted is ignored), the
         * loop's connection copies the WAL itself at the cap, and the next write starts
         * the WAL over. When the run on the thread came after the 200 commits beside it
         * (a busy machine) and copied the whole WAL, the next write starts it over
         * already: that is this one, and the cycle measured starts after it. */
        ck_assert_int_eq(record_command(s, n++), 0);
        frames = store_wal_frames(s);
        for (i = 0; store_wal_frames(s) >= frames; i++) {
                frames = store_wal_frames(s);
                ck_assert_int_lt(i, 20000);
                ck_assert_int_eq(record_command(s, n + i), 0);
        }
        n += i;
        ck_assert_int_ge(frames, 4000);
        ck_assert_int_lt(store_wal_frames(s), 100);
        ck_assert_int_lt(wal_length(path), 100);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM commands"), n);
        store_close(s);
}
END_TEST

START_TEST(test_command_batch) {
        const char *argv[] = {"true", NULL};
        char path[128];
        struct store *s;
        struct history h;
        int status;
        pid_t pid;

        tmp_path(path, sizeof(path), "state.db");
        s = open_ok(path);
        insert_sandbox(s, "sb", 1000, "ready", 1);
        store_close(s);

        /* A writer killed with one committed and one open batch. */
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct store_command a = {.sandbox_id = "sb", .command_id = "kept", .seq = 1,
                                          .argv = argv, .argc = 1};
                struct store_command b = {.sandbox_id = "sb", .command_id = "lost", .seq = 2,
                                          .argv = argv, .argc = 1};
                struct history seen;
                if (store_open(path, &s) < 0 || store_pending(s) ||
                    store_command_insert(s, &a) < 0 || !store_pending(s) ||
                    store_commit(s) < 0 || store_pending(s) ||
                    store_command_insert(s, &b) < 0 || !store_pending(s))
                        _exit(2);
                /* The open batch is visible to its own connection. */
                seen = history_all(s, "sb");
                if (seen.n != 2)
                        _exit(3);
                kill(getpid(), SIGKILL);
                _exit(4);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer exit %d",
                      WEXITSTATUS(status));
        s = open_ok(path);
        ck_assert_int_eq(store_integrity_check(s), 0);
        h = history_all(s, "sb");
        ck_assert_int_eq(h.n, 1);
        ck_assert_str_eq(h.v[0].command_id, "kept");
        history_free(&h);

        /* A sandbox write commits the open batch before its own. */
        {
                struct store_command c = {.sandbox_id = "sb", .command_id = "joined",
                                          .seq = 3, .argv = argv, .argc = 1};
                struct store_command f = finished_at("sb", "kept", 1, 3);
                ck_assert_int_eq(store_command_insert(s, &c), 0);
                ck_assert_int_eq(store_command_finish(s, &f), 0);
                ck_assert(store_pending(s));
                ck_assert_int_eq(store_sandbox_set_state(s, "sb", "ready", 0, NULL), 0);
                ck_assert(!store_pending(s));
                ck_assert_int_eq(store_commit(s), 0); /* nothing open: a no-op */
        }
        store_close(s);
        s = open_ok(path);
        h = history_all(s, "sb");
        ck_assert_int_eq(h.n, 2);
        ck_assert_str_eq(h.v[1].command_id, "joined");
        ck_assert(h.v[0].has_outcome);
        history_free(&h);

        /* A failed record in a batch fails alone; the batch goes on. */
        {
                struct store_command dup = {.sandbox_id = "sb", .command_id = "joined",
                                            .seq = 3, .argv = argv, .argc = 1};
                struct store_command ok = {.sandbox_id = "sb", .command_id = "after",
                                           .seq = 4, .argv = argv, .argc = 1};
                ck_assert_int_eq(store_command_insert(s, &ok), 0);
                ck_assert_int_eq(store_command_insert(s, &dup), -EEXIST);
                ck_assert_int_eq(store_commit(s), 0);
        }
        /* store_close commits what is open. */
        {
                struct store_command c = {.sandbox_id = "sb", .command_id = "at-close",
                                          .seq = 5, .argv = argv, .argc = 1};
                ck_assert_int_eq(store_command_insert(s, &c), 0);
        }
        store_close(s);
        s = open_ok(path);
        h = history_all(s, "sb");
        ck_assert_int_eq(h.n, 4);
        ck_assert_str_eq(h.v[2].command_id, "after");
        ck_assert_str_eq(h.v[3].command_id, "at-close");
        history_free(&h);
        store_close(s);
}
END_TEST

/* Connection records (schema 6): inserted open or ended, finished, paged in seq order,
 * reset after a restart (open ones ended), and gone with their sandbox. */
struct conn_seen {
        uint64_t seq[8];
        int n;
        char reason[64];
        uint64_t sent;
};

static int collect_conn(const struct store_connection *c, void *ud) {
        struct conn_seen *k = ud;

        ck_assert_int_lt(k->n, 8);
        k->seq[k->n++] = c->seq;
        snprintf(k->reason, sizeof(k->reason), "%s", c->reason ? c->reason : "(null)");
        k->sent = c->bytes_sent;
        return 0;
}

START_TEST(test_connections) {
        char path[128];
        struct store *s;
        struct store_connection c = {.sandbox_id = "a", .started_ms = 100, .host = "pypi.org",
                                     .port = 443, .address = "203.0.113.1", .allowed = 1,
                                     .method = "CONNECT"};
        struct conn_seen k = {.n = 0};
        uint64_t last = 99;

        tmp_path(path, sizeof(path), "conn.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        for (c.seq = 1; c.seq <= 3; c.seq++)
                ck_assert_int_eq(store_connection_insert(s, &c), 0);
        ck_assert_int_eq(store_connection_insert(s, &c), 0); /* seq 4 */
        c.seq = 4;
        ck_assert_int_lt(store_connection_insert(s, &c), 0);   /* seq taken */
        c.seq = 0;
        ck_assert_int_eq(store_connection_insert(s, &c), -EINVAL);
        c.seq = 2;
        c.ended_ms = 200;
        c.bytes_sent = 77;
        c.reason = NULL;
        ck_assert_int_eq(store_connection_finish(s, &c), 0);
        c.seq = 9;
        ck_assert_int_eq(store_connection_finish(s, &c), -ENOENT);
        ck_assert_int_eq(store_commit(s), 0);
        ck_assert_int_eq(store_connections(s, "a", 1, 2, collect_conn, &k), 2);
        ck_assert_uint_eq(k.seq[0], 2);
        ck_assert_uint_eq(k.seq[1], 3);
        ck_assert_int_eq(store_connections(s, "a", 0, 0, collect_conn, &k), 4);
        ck_assert_int_eq(store_connections_reset(s, "a", 300, "the daemon restarted", &last), 0);
        ck_assert_uint_eq(last, 4);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM connections WHERE ended_ms = 0"), 0);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM connections WHERE ended_ms = 200"), 1);
        ck_assert_int_eq(store_connections_reset(s, "b", 300, "x", &last), 0);
        ck_assert_uint_eq(last, 0);
        c.sandbox_id = "nobody";
        c.seq = 1;
        ck_assert_int_lt(store_connection_insert(s, &c), 0); /* no such sandbox */
        ck_assert_int_eq(store_prune(s, INT64_MAX), 0);    /* "a" is live: kept */
        store_close(s);
}
END_TEST

struct fwd_seen {
        int n;
        uint64_t seq[8];
        int64_t closed[8];
        uint64_t in[8], out[8];
        char reason[8][64], name[8][32];
};

static int collect_fwd(const struct store_forward *f, void *ud) {
        struct fwd_seen *k = ud;

        ck_assert_int_lt(k->n, 8);
        ck_assert_str_eq(f->sandbox_id, "a");
        k->seq[k->n] = f->seq;
        k->closed[k->n] = f->closed_ms;
        k->in[k->n] = f->bytes_in;
        k->out[k->n] = f->bytes_out;
        snprintf(k->reason[k->n], sizeof(k->reason[0]), "%s", f->reason ? f->reason : "-");
        snprintf(k->name[k->n], sizeof(k->name[0]), "%s", f->client_name ? f->client_name : "-");
        k->n++;
        return 0;
}

/* Schema 9: forwards are numbered per sandbox by the store, in the batch; their end and
 * bytes are recorded; a page reads from after_seq; the open ones of a restarted daemon
 * are closed with its reason; a database of schema 8 gains the table and keeps its
 * records. */
START_TEST(test_forwards) {
        char path[128];
        struct store *s;
        struct store_forward f = {.sandbox_id = "a", .caller_uid = 1000, .caller_pid = 7,
                                  .client_name = "sbx", .port = 8080, .address = "127.0.0.1",
                                  .opened_ms = 100};
        struct fwd_seen k;
        int i;

        tmp_path(path, sizeof(path), "fwd.db");
        s = open_ok(path);
        insert_sandbox(s, "a", 1000, "ready", 1);
        insert_sandbox(s, "b", 1000, "ready", 2);
        for (i = 1; i <= 3; i++) {
                ck_assert_int_eq(store_forward_insert(s, &f), 0);
                ck_assert_uint_eq(f.seq, (uint64_t)i);
        }
        f.sandbox_id = "b";
        ck_assert_int_eq(store_forward_insert(s, &f), 0);
        ck_assert_uint_eq(f.seq, 1); /* per sandbox */
        f.sandbox_id = "a";
        f.seq = 2;
        f.closed_ms = 200;
        f.bytes_in = 11;
        f.bytes_out = 22;
        f.reason = "closed";
        ck_assert_int_eq(store_forward_finish(s, &f), 0);
        f.seq = 9;
        ck_assert_int_eq(store_forward_finish(s, &f), -ENOENT);
        f.address = NULL;
        ck_assert_int_eq(store_forward_insert(s, &f), -EINVAL);
        f.address = "::1";
        f.sandbox_id = "nobody";
        ck_assert_int_lt(store_forward_insert(s, &f), 0);
        ck_assert_int_eq(store_commit(s), 0);
        memset(&k, 0, sizeof(k));
        ck_assert_int_eq(store_forwards(s, "a", 1, 2, collect_fwd, &k), 2);
        ck_assert_uint_eq(k.seq[0], 2);
        ck_assert_int_eq(k.closed[0], 200);
        ck_assert_uint_eq(k.in[0], 11);
        ck_assert_uint_eq(k.out[0], 22);
        ck_assert_str_eq(k.reason[0], "closed");
        ck_assert_str_eq(k.name[0], "sbx");
        ck_assert_uint_eq(k.seq[1], 3);
        ck_assert_int_eq(k.closed[1], 0);
        ck_assert_int_eq(store_forwards(s, "a", 0, 0, collect_fwd, &k), -EINVAL);
        ck_assert_int_eq(store_forwards_close_open(s, "a", 300, "the daemon restarted"), 2);
        memset(&k, 0, sizeof(k));
        ck_assert_int_eq(store_forwards(s, "a", 0, 10, collect_fwd, &k), 3);
        ck_assert_int_eq(k.closed[0], 300);
        ck_assert_str_eq(k.reason[0], "the daemon restarted");
        ck_assert_str_eq(k.reason[1], "closed");
        store_close(s);

        /* Back to schema 8 (no table), opened again: the table comes, nothing else goes. */
        raw_exec(path, "DROP TABLE forwards; PRAGMA user_version = 8;");
        s = open_ok(path);
        ck_assert_int_eq(raw_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM forwards"), 0);
        ck_assert_int_eq(raw_int(path, "SELECT count(*) FROM sandboxes"), 2);
        f.sandbox_id = "a";
        f.address = "::1";
        ck_assert_int_eq(store_forward_insert(s, &f), 0);
        ck_assert_uint_eq(f.seq, 1);
        ck_assert_int_eq(store_commit(s), 0);
        store_close(s);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------ */

/* Each test in its own test case: its own temporary directory, its own timeout. */
#define ADD_TEST(suite, fn, timeout_s)                                                             \
        SBX_ADD_TEST_CASE(suite, fn, timeout_s, tmpdir_setup, tmpdir_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("store");

        ADD_TEST(s, test_open_creates_schema, 30);
        ADD_TEST(s, test_reopen_idempotent, 30);
        ADD_TEST(s, test_upgrade_from_1_and_2, 30);
        ADD_TEST(s, test_uid_owners, 30);
        ADD_TEST(s, test_newer_version_refused, 30);
        ADD_TEST(s, test_migrate_from_zero_with_unrelated_table, 30);
        ADD_TEST(s, test_migration_is_atomic, 30);
        ADD_TEST(s, test_integrity_detects_corruption, 30);
        ADD_TEST(s, test_sandbox_roundtrip, 30);
        ADD_TEST(s, test_sandbox_updates, 30);
        ADD_TEST(s, test_sandbox_foreach, 30);
        ADD_TEST(s, test_sandbox_foreach_callback_writes, 30);
        ADD_TEST(s, test_command_argv_roundtrip, 30);
        ADD_TEST(s, test_command_finish, 30);
        ADD_TEST(s, test_history_paging, 30);
        ADD_TEST(s, test_mark_unknown, 30);
        ADD_TEST(s, test_fileops, 30);
        ADD_TEST(s, test_prune, 30);
        ADD_TEST(s, test_command_batch, 30);
        ADD_TEST(s, test_command_insert_ended, 30);
        ADD_TEST(s, test_command_queued_ms, 30);
        ADD_TEST(s, test_upgrade_from_4, 30);
        ADD_TEST(s, test_connections, 30);
        ADD_TEST(s, test_forwards, 30);
        ADD_TEST(s, test_command_background, 30);
        ADD_TEST(s, test_checkpoint_off_loop, 120);
        ADD_TEST(s, test_crash_sigkill, 120);
        ADD_TEST(s, test_fault_malloc_transient, 600);
        ADD_TEST(s, test_fault_malloc_persistent, 600);
        ADD_TEST(s, test_disk_full, 120);
        return s;
}

SBX_TEST_MAIN(make_suite)
