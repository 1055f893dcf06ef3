/* store.c: the durable records of sbxd, kept in one SQLite database in WAL mode.
 *
 * Owns the sqlite3 handle, every prepared statement (prepared once in store_open and
 * reused) and the text of the last failure. The schema is versioned with PRAGMA
 * user_version and built by the ordered migrations below, each one transaction. Every
 * write but a command record is a single autocommitted statement, so a write that
 * returned 0 is in the WAL and survives a SIGKILL of the daemon (synchronous=NORMAL:
 * only power loss may cost the last commits); command records join a batch that
 * store_commit commits (store.h). Rows handed to callbacks are first copied out of
 * SQLite in small batches and the statement is reset before any callback runs, so a
 * callback may call back into the store (to update the row it was given, say) and such
 * a write commits at once instead of waiting for the walk to end. Called from the rpc
 * and sandbox layers, and by main() and turn.c to open, commit and checkpoint, on the
 * event loop thread; see store.h for the contracts. Never logs.
 *
 * Checkpoints (copying the WAL into the database, with two fsyncs) do not run on the
 * loop's connection, where each one stalled every client for the length of the fsyncs
 * (10-20 ms a time on a VM disk, about every 250 commands: 13% of the CPUs idle under
 * load). A second connection, used only by store_checkpoint_run on another thread,
 * does them PASSIVE (never blocking the writer); the loop's connection checkpoints
 * itself only when the WAL passes STORE_WAL_MAX_FRAMES (see on_wal_commit). */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sbx_limits.h"

/* How long a statement waits for a lock held by another connection (an operator's
 * sqlite3 shell, say) before failing with -EBUSY. The daemon's loop waits meanwhile. */
#define STORE_BUSY_TIMEOUT_MS 2000

/* Rows copied out per statement run by the walking functions (foreach, history). */
#define STORE_BATCH_ROWS 32u

/* Room for the text of the last failure. */
#define STORE_ERROR_BYTES 512

/* WAL frames (pages) after which a checkpoint is wanted off the loop (SQLite's own
 * default for its automatic checkpoint), and after which the loop's connection
 * checkpoints itself (about 16 MiB of WAL). */
#define STORE_CHECKPOINT_FRAMES 1000
#define STORE_WAL_MAX_FRAMES 4000

/* The states in which a sandbox is live (see store_sandbox_foreach). */
#define LIVE_STATES "('creating', 'ready', 'terminating')"

/* The migrations, in order: migrations[v] takes user_version v to v + 1. A released
 * migration is never edited; a change to the schema is a new entry at the end and a
 * bump of STORE_SCHEMA_VERSION. Plain CREATE (not IF NOT EXISTS) so that a database that
 * already holds a different table of the same name fails loudly instead of being used. */
static const char *const migrations[] = {
        /* 0 -> 1: the first schema. */
        "CREATE TABLE sandboxes ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  owner_uid INTEGER NOT NULL,"
        "  state TEXT NOT NULL,"
        "  created_ms INTEGER NOT NULL,"
        "  deadline_ms INTEGER NOT NULL,"
        "  idle_timeout_ms INTEGER NOT NULL,"
        "  ended_ms INTEGER NOT NULL DEFAULT 0,"
        "  end_reason TEXT,"
        "  spec BLOB,"
        "  init_pid INTEGER NOT NULL DEFAULT 0,"
        "  workspace_dir TEXT,"
        "  cgroup_path TEXT,"
        "  run_uid INTEGER NOT NULL,"
        "  caller_pid INTEGER NOT NULL,"
        "  client_name TEXT"
        ");"
        "CREATE INDEX sandboxes_created ON sandboxes(created_ms);"
        "CREATE INDEX sandboxes_owner ON sandboxes(owner_uid, created_ms);"
        "CREATE INDEX sandboxes_state ON sandboxes(state, created_ms);"
        "CREATE INDEX sandboxes_ended ON sandboxes(ended_ms) WHERE ended_ms > 0;"
        "CREATE TABLE commands ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  command_id TEXT NOT NULL,"
        "  argv BLOB NOT NULL," /* each element followed by one NUL */
        "  cwd TEXT,"
        "  caller_uid INTEGER NOT NULL,"
        "  caller_pid INTEGER NOT NULL,"
        "  client_name TEXT,"
        "  started_ms INTEGER NOT NULL,"
        "  ended_ms INTEGER NOT NULL DEFAULT 0,"
        "  outcome TEXT,"
        "  exit_code INTEGER,"
        "  signal INTEGER,"
        "  duration REAL NOT NULL DEFAULT 0,"
        "  cpu_seconds REAL NOT NULL DEFAULT 0,"
        "  peak_memory_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stderr_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_truncated INTEGER NOT NULL DEFAULT 0,"
        "  stderr_truncated INTEGER NOT NULL DEFAULT 0,"
        "  limits_hit TEXT,"
        "  start_error TEXT,"
        "  UNIQUE (sandbox_id, command_id)"
        ");"
        "CREATE INDEX commands_history ON commands(sandbox_id, seq);"
        "CREATE INDEX commands_unfinished ON commands(sandbox_id) WHERE outcome IS NULL;"
        "CREATE TABLE fileops ("
        "  id INTEGER PRIMARY KEY,"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  op TEXT NOT NULL,"
        "  path TEXT NOT NULL,"
        "  bytes INTEGER NOT NULL,"
        "  result TEXT NOT NULL,"
        "  caller_uid INTEGER NOT NULL,"
        "  caller_pid INTEGER NOT NULL,"
        "  client_name TEXT,"
        "  time_ms INTEGER NOT NULL"
        ");"
        "CREATE INDEX fileops_sandbox ON fileops(sandbox_id, time_ms);",
        /* 1 -> 2: one page less written per command record: no index of unfinished
         * commands (only recovery looks for them, through the (sandbox_id, command_id)
         * index or a scan). */
        "DROP INDEX commands_unfinished;",
        /* 2 -> 3: a command record writes two pages instead of four. One index,
         * (sandbox, number within the sandbox), serves history, the end of a command and
         * recovery alike; rows are appended in the order they come (no AUTOINCREMENT
         * counter to update, no command_id index). seq becomes the number within the
         * sandbox (the N of c-N for the commands the daemon numbered); older records are
         * numbered in their old order. Rows of a sandbox no longer recorded (deleted with
         * foreign keys off, as the sqlite3 shell has them) are left behind: a cascade
         * would have removed them. (Keyed by that pair WITHOUT ROWID, a record wrote 1.7
         * pages but took longer: rows landing mid-tree rebalance full pages.) */
        "CREATE TABLE commands_v3 ("
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL,"
        "  command_id TEXT NOT NULL,"
        "  argv BLOB NOT NULL,"
        "  cwd TEXT,"
        "  caller_uid INTEGER NOT NULL,"
        "  caller_pid INTEGER NOT NULL,"
        "  client_name TEXT,"
        "  started_ms INTEGER NOT NULL,"
        "  ended_ms INTEGER NOT NULL DEFAULT 0,"
        "  outcome TEXT,"
        "  exit_code INTEGER,"
        "  signal INTEGER,"
        "  duration REAL NOT NULL DEFAULT 0,"
        "  cpu_seconds REAL NOT NULL DEFAULT 0,"
        "  peak_memory_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stderr_bytes INTEGER NOT NULL DEFAULT 0,"
        "  stdout_truncated INTEGER NOT NULL DEFAULT 0,"
        "  stderr_truncated INTEGER NOT NULL DEFAULT 0,"
        "  limits_hit TEXT,"
        "  start_error TEXT,"
        "  UNIQUE (sandbox_id, seq)"
        ");"
        "INSERT INTO commands_v3 SELECT sandbox_id, "
        "  row_number() OVER (PARTITION BY sandbox_id ORDER BY seq), command_id, argv, cwd, "
        "  caller_uid, caller_pid, client_name, started_ms, ended_ms, outcome, exit_code, "
        "  signal, duration, cpu_seconds, peak_memory_bytes, stdout_bytes, stderr_bytes, "
        "  stdout_truncated, stderr_truncated, limits_hit, start_error FROM commands "
        "  WHERE sandbox_id IN (SELECT id FROM sandboxes);"
        "DROP TABLE commands;"
        "ALTER TABLE commands_v3 RENAME TO commands;",
        /* 3 -> 4: the host uids given to sandboxes (root mode) belong to their first
         * owner for good: what a sandbox leaves on the host (a kept workspace, files in a
         * writable path the filesystem could not idmap) stays out of every other owner's
         * reach. Filled from the records: a uid that already served several owners is
         * retired (owner NULL), never handed out again. */
        "CREATE TABLE uid_owners ("
        "  run_uid INTEGER PRIMARY KEY,"
        "  owner_uid INTEGER"
        ");"
        "INSERT INTO uid_owners SELECT run_uid, "
        "  CASE WHEN count(DISTINCT owner_uid) = 1 THEN min(owner_uid) END "
        "  FROM sandboxes WHERE run_uid != 0 GROUP BY run_uid;",
        /* 4 -> 5: how long a command waited for a slot before it started (or until it
         * ended, when it never started): a command over its sandbox's running cap waits
         * in a queue. Records of before waited for nothing: 0. */
        "ALTER TABLE commands ADD COLUMN queued_ms INTEGER NOT NULL DEFAULT 0;",
        /* 5 -> 6: the connections NETWORK_ALLOWLIST's proxy allowed or refused. */
        "CREATE TABLE connections ("
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL,"
        "  started_ms INTEGER NOT NULL,"
        "  ended_ms INTEGER NOT NULL DEFAULT 0,"
        "  host TEXT,"
        "  port INTEGER NOT NULL DEFAULT 0,"
        "  address TEXT,"
        "  allowed INTEGER NOT NULL,"
        "  reason TEXT,"
        "  method TEXT,"
        "  bytes_sent INTEGER NOT NULL DEFAULT 0,"
        "  bytes_received INTEGER NOT NULL DEFAULT 0,"
        "  UNIQUE (sandbox_id, seq)"
        ");",
        /* 6 -> 7: whether the command ran in the background (RunCommand.background).
         * Records of before did not. */
        "ALTER TABLE commands ADD COLUMN background INTEGER NOT NULL DEFAULT 0;",
        /* 7 -> 8: whether a command ran on a terminal (RunCommand.tty). Records of before
         * did not. */
        "ALTER TABLE commands ADD COLUMN tty INTEGER NOT NULL DEFAULT 0;",
        /* 8 -> 9: the streams to the sandboxes' ports (OpenPort). */
        "CREATE TABLE forwards ("
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL,"
        "  caller_uid INTEGER NOT NULL,"
        "  caller_pid INTEGER NOT NULL DEFAULT 0,"
        "  client_name TEXT,"
        "  port INTEGER NOT NULL,"
        "  address TEXT NOT NULL,"
        "  opened_ms INTEGER NOT NULL,"
        "  closed_ms INTEGER NOT NULL DEFAULT 0,"
        "  bytes_in INTEGER NOT NULL DEFAULT 0,"
        "  bytes_out INTEGER NOT NULL DEFAULT 0,"
        "  reason TEXT,"
        "  UNIQUE (sandbox_id, seq)"
        ");",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == STORE_SCHEMA_VERSION,
               "one migration per schema version");

#define SANDBOX_COLS                                                                               \
        "id, owner_uid, state, created_ms, deadline_ms, idle_timeout_ms, ended_ms, "               \
        "end_reason, spec, init_pid, workspace_dir, cgroup_path, run_uid, caller_pid, "            \
        "client_name, rowid"

enum sandbox_col {
        SB_ID,
        SB_OWNER_UID,
        SB_STATE,
        SB_CREATED_MS,
        SB_DEADLINE_MS,
        SB_IDLE_TIMEOUT_MS,
        SB_ENDED_MS,
        SB_END_REASON,
        SB_SPEC,
        SB_INIT_PID,
        SB_WORKSPACE_DIR,
        SB_CGROUP_PATH,
        SB_RUN_UID,
        SB_CALLER_PID,
        SB_CLIENT_NAME,
        SB_ROWID,
};

#define COMMAND_COLS                                                                               \
        "sandbox_id, command_id, argv, cwd, caller_uid, caller_pid, client_name, "                 \
        "started_ms, ended_ms, outcome, exit_code, signal, duration, cpu_seconds, "                \
        "peak_memory_bytes, stdout_bytes, stderr_bytes, stdout_truncated, "                        \
        "stderr_truncated, limits_hit, start_error, seq, queued_ms, background, tty"

enum command_col {
        CMD_SANDBOX_ID,
        CMD_COMMAND_ID,
        CMD_ARGV,
        CMD_CWD,
        CMD_CALLER_UID,
        CMD_CALLER_PID,
        CMD_CLIENT_NAME,
        CMD_STARTED_MS,
        CMD_ENDED_MS,
        CMD_OUTCOME,
        CMD_EXIT_CODE,
        CMD_SIGNAL,
        CMD_DURATION,
        CMD_CPU_SECONDS,
        CMD_PEAK_MEMORY,
        CMD_STDOUT_BYTES,
        CMD_STDERR_BYTES,
        CMD_STDOUT_TRUNCATED,
        CMD_STDERR_TRUNCATED,
        CMD_LIMITS_HIT,
        CMD_START_ERROR,
        CMD_SEQ,
        CMD_QUEUED_MS,
        CMD_BACKGROUND,
        CMD_TTY,
};

/* The prepared statements, by purpose. The walking queries take the key of the last row
 * already delivered (keyset paging), so that each batch is a fresh statement run. */
enum stmt_id {
        ST_SB_INSERT,
        ST_SB_EXISTS,
        ST_SB_GET,
        ST_SB_SET_STATE,
        ST_SB_SET_INIT_PID,
        ST_SB_SET_DEADLINE,
        ST_SB_REPLACE,
        ST_SB_LIST_ALL, /* the four lists, indexed by live_only | has_owner << 1 */
        ST_SB_LIST_LIVE,
        ST_SB_LIST_OWNER,
        ST_SB_LIST_LIVE_OWNER,
        ST_CMD_INSERT,
        ST_CMD_INSERT_ENDED,
        ST_CMD_FINISH,
        ST_CMD_MARK_ONE,
        ST_CMD_MARK_ALL,
        ST_CMD_HISTORY,
        ST_CONN_INSERT,
        ST_CONN_FINISH,
        ST_CONN_RESET,
        ST_CONN_LAST,
        ST_CONN_HISTORY,
        ST_FWD_LAST,
        ST_FWD_INSERT,
        ST_FWD_FINISH,
        ST_FWD_CLOSE_OPEN,
        ST_FWD_HISTORY,
        ST_FOP_INSERT,
        ST_FOP_COUNT,
        ST_PRUNE,
        ST_UID_BIND,
        ST_UID_OWNERS,
        ST_INTEGRITY,
        ST_BEGIN,
        ST_COMMIT,
        ST_ROLLBACK,
        ST_COUNT,
};

#define SB_LIST_TAIL " (created_ms, rowid) < (?1, ?2) ORDER BY created_ms DESC, rowid DESC LIMIT ?3"

static const char *const stmt_sql[ST_COUNT] = {
        [ST_SB_INSERT] = "INSERT INTO sandboxes (id, owner_uid, state, created_ms, deadline_ms, "
                         "idle_timeout_ms, ended_ms, end_reason, spec, init_pid, workspace_dir, "
                         "cgroup_path, run_uid, caller_pid, client_name) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                         "?14, ?15)",
        [ST_SB_EXISTS] = "SELECT 1 FROM sandboxes WHERE id = ?1",
        [ST_SB_GET] = "SELECT " SANDBOX_COLS " FROM sandboxes WHERE id = ?1",
        [ST_SB_SET_STATE] = "UPDATE sandboxes SET state = ?2, "
                            "ended_ms = CASE WHEN ?3 != 0 THEN ?3 ELSE ended_ms END, "
                            "end_reason = CASE WHEN ?3 != 0 THEN ?4 ELSE end_reason END "
                            "WHERE id = ?1",
        [ST_SB_SET_INIT_PID] = "UPDATE sandboxes SET init_pid = ?2 WHERE id = ?1",
        [ST_SB_SET_DEADLINE] = "UPDATE sandboxes SET deadline_ms = ?2 WHERE id = ?1",
        [ST_SB_REPLACE] = "UPDATE sandboxes SET state = ?2, spec = ?3, init_pid = ?4, "
                          "workspace_dir = ?5, cgroup_path = ?6, run_uid = ?7 "
                          "WHERE id = ?1 AND ended_ms = 0",
        [ST_SB_LIST_ALL] = "SELECT " SANDBOX_COLS " FROM sandboxes WHERE" SB_LIST_TAIL,
        [ST_SB_LIST_LIVE] = "SELECT " SANDBOX_COLS " FROM sandboxes WHERE state IN " LIVE_STATES
                            " AND" SB_LIST_TAIL,
        [ST_SB_LIST_OWNER] =
                "SELECT " SANDBOX_COLS " FROM sandboxes WHERE owner_uid = ?4 AND" SB_LIST_TAIL,
        [ST_SB_LIST_LIVE_OWNER] = "SELECT " SANDBOX_COLS " FROM sandboxes WHERE owner_uid = ?4 "
                                  "AND state IN " LIVE_STATES " AND" SB_LIST_TAIL,
        [ST_CMD_INSERT] = "INSERT INTO commands (sandbox_id, command_id, argv, cwd, caller_uid, "
                          "caller_pid, client_name, started_ms, queued_ms, background, tty, seq) "
                          "VALUES (?1, ?2, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?3)",
        [ST_CMD_INSERT_ENDED] =
                "INSERT INTO commands (sandbox_id, command_id, argv, cwd, caller_uid, "
                "caller_pid, client_name, started_ms, ended_ms, outcome, exit_code, signal, "
                "duration, cpu_seconds, peak_memory_bytes, stdout_bytes, stderr_bytes, "
                "stdout_truncated, stderr_truncated, limits_hit, start_error, queued_ms, "
                "background, tty, seq) "
                "VALUES (?1, ?2, ?17, ?18, ?19, ?20, ?21, ?22, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                "?11, ?12, ?13, ?14, ?15, ?16, ?23, ?24, ?25, ?3)",
        [ST_CMD_FINISH] = "UPDATE commands SET ended_ms = ?4, outcome = ?5, exit_code = ?6, "
                          "signal = ?7, duration = ?8, cpu_seconds = ?9, peak_memory_bytes = ?10, "
                          "stdout_bytes = ?11, stderr_bytes = ?12, stdout_truncated = ?13, "
                          "stderr_truncated = ?14, limits_hit = ?15, start_error = ?16, "
                          "queued_ms = ?17 "
                          "WHERE sandbox_id = ?1 AND seq = ?3 AND command_id = ?2",
        [ST_CMD_MARK_ONE] = "UPDATE commands SET outcome = 'unknown', ended_ms = ?2 "
                            "WHERE sandbox_id = ?1 AND outcome IS NULL",
        [ST_CMD_MARK_ALL] = "UPDATE commands SET outcome = 'unknown', ended_ms = ?2 "
                            "WHERE outcome IS NULL",
        [ST_CMD_HISTORY] = "SELECT " COMMAND_COLS " FROM commands "
                           "WHERE sandbox_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        [ST_CONN_INSERT] = "INSERT INTO connections (sandbox_id, seq, started_ms, ended_ms, host, "
                           "port, address, allowed, reason, method, bytes_sent, bytes_received) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        [ST_CONN_FINISH] = "UPDATE connections SET ended_ms = ?3, reason = ?4, bytes_sent = ?5, "
                           "bytes_received = ?6 WHERE sandbox_id = ?1 AND seq = ?2",
        [ST_CONN_RESET] = "UPDATE connections SET ended_ms = ?2, reason = coalesce(reason, ?3) "
                          "WHERE sandbox_id = ?1 AND ended_ms = 0",
        [ST_CONN_LAST] = "SELECT coalesce(max(seq), 0) FROM connections WHERE sandbox_id = ?1",
        [ST_CONN_HISTORY] = "SELECT seq, started_ms, ended_ms, host, port, address, allowed, "
                            "reason, method, bytes_sent, bytes_received FROM connections "
                            "WHERE sandbox_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        [ST_FWD_LAST] = "SELECT coalesce(max(seq), 0) FROM forwards WHERE sandbox_id = ?1",
        [ST_FWD_INSERT] = "INSERT INTO forwards (sandbox_id, seq, caller_uid, caller_pid, "
                          "client_name, port, address, opened_ms) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        [ST_FWD_FINISH] = "UPDATE forwards SET closed_ms = ?3, bytes_in = ?4, bytes_out = ?5, "
                          "reason = ?6 WHERE sandbox_id = ?1 AND seq = ?2",
        [ST_FWD_CLOSE_OPEN] = "UPDATE forwards SET closed_ms = ?2, reason = ?3 "
                              "WHERE sandbox_id = ?1 AND closed_ms = 0",
        [ST_FWD_HISTORY] = "SELECT seq, caller_uid, caller_pid, client_name, port, address, "
                           "opened_ms, closed_ms, bytes_in, bytes_out, reason FROM forwards "
                           "WHERE sandbox_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        [ST_FOP_INSERT] = "INSERT INTO fileops (sandbox_id, op, path, bytes, result, caller_uid, "
                          "caller_pid, client_name, time_ms) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        [ST_FOP_COUNT] = "SELECT count(*) FROM fileops WHERE sandbox_id = ?1",
        /* Commands and file operations go with their sandbox (ON DELETE CASCADE). */
        [ST_PRUNE] = "DELETE FROM sandboxes WHERE ended_ms > 0 AND ended_ms < ?1 "
                     "AND state NOT IN " LIVE_STATES,
        [ST_UID_BIND] = "INSERT INTO uid_owners (run_uid, owner_uid) VALUES (?1, ?2)",
        [ST_UID_OWNERS] = "SELECT run_uid, owner_uid FROM uid_owners",
        [ST_INTEGRITY] = "PRAGMA integrity_check",
        [ST_BEGIN] = "BEGIN",
        [ST_COMMIT] = "COMMIT",
        [ST_ROLLBACK] = "ROLLBACK",
};

struct store {
        sqlite3 *db;
        sqlite3_stmt *stmt[ST_COUNT];
        char error[STORE_ERROR_BYTES];
        int batch_open; /* a transaction of deferred command records is open */
        unsigned lost;  /* batches lost since store_take_lost, and why the last one was */
        char lost_error[STORE_ERROR_BYTES];
        /* The checkpointing connection: NULL when SQLite is built without threads (the
         * loop's connection then checkpoints as SQLite does by default). While
         * ckpt_running, only store_checkpoint_run touches it and ckpt_error. */
        sqlite3 *ckpt_db;
        int ckpt_running;
        int wal_frames;  /* in the WAL after the last commit */
        int ckpt_frames; /* of them copied into the database by the last checkpoint */
        char ckpt_error[STORE_ERROR_BYTES];
};

/* The message of the last failed store_open, which has no store to keep it in. The
 * daemon is single-threaded; see store_last_error(NULL). */
static char open_error[STORE_ERROR_BYTES];

/* ---- errors ------------------------------------------------------------------------ */

static void error_clear(struct store *s) {
        s->error[0] = '\0';
}

/* Records a failure that did not come from SQLite and returns err (a -errno). */
static int fail(struct store *s, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct store *s, int err, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(s->error, sizeof(s->error), fmt, ap);
        va_end(ap);
        return err;
}

/* The one place where SQLite's result codes become -errno: rc is what a sqlite3 call on
 * db returned, what says which operation failed. Keeps "what: SQLite's message" in buf
 * for store_last_error(). A foreign key violation means the sandbox a row refers to
 * was never recorded, hence -ENOENT; any other constraint is a duplicate. */
static int sqlite_to_errno(sqlite3 *db, int rc, const char *what, char *buf, size_t size) {
        int sys = db ? sqlite3_system_errno(db) : 0;
        const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);

        if (rc == SQLITE_NOMEM || rc == SQLITE_IOERR_NOMEM)
                msg = sqlite3_errstr(rc); /* errmsg may be stale when memory ran out */
        snprintf(buf, size, "%s: %s", what, msg);
        if (rc == SQLITE_IOERR_NOMEM)
                return -ENOMEM;
        switch (rc & 0xff) {
        case SQLITE_CONSTRAINT:
                return rc == SQLITE_CONSTRAINT_FOREIGNKEY ? -ENOENT : -EEXIST;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_IOERR:
                /* Not every path that hits ENOSPC says SQLITE_FULL (the WAL index, say). */
                if (sys == ENOSPC || sys == EDQUOT)
                        return -ENOSPC;
                return -EIO;
        default:
                return -EIO;
        }
}

static int sqlfail(struct store *s, int rc, const char *what) {
        return sqlite_to_errno(s->db, rc, what, s->error, sizeof(s->error));
}

/* ---- binding and running statements ------------------------------------------------- */

/* Collects the binds of one statement run; after the first failure the rest are no-ops
 * and rc keeps that failure. */
struct binder {
        sqlite3_stmt *st;
        int rc;
};

static void bind_text(struct binder *b, int col, const char *v) {
        if (b->rc != SQLITE_OK)
                return;
        if (v)
                b->rc = sqlite3_bind_text(b->st, col, v, -1, SQLITE_STATIC);
        else
                b->rc = sqlite3_bind_null(b->st, col);
}

static void bind_blob(struct binder *b, int col, const void *v, size_t len) {
        if (b->rc != SQLITE_OK)
                return;
        /* A zero-length blob, not NULL, when there is nothing: v may be NULL then. */
        if (len == 0)
                b->rc = sqlite3_bind_zeroblob(b->st, col, 0);
        else
                b->rc = sqlite3_bind_blob64(b->st, col, v, len, SQLITE_STATIC);
}

static void bind_int64(struct binder *b, int col, int64_t v) {
        if (b->rc == SQLITE_OK)
                b->rc = sqlite3_bind_int64(b->st, col, v);
}

/* Unsigned 64-bit values are stored as their two's complement bit pattern and read back
 * with the inverse cast, which round-trips every value. */
static void bind_uint64(struct binder *b, int col, uint64_t v) {
        bind_int64(b, col, (int64_t)v);
}

static void bind_double(struct binder *b, int col, double v) {
        if (b->rc == SQLITE_OK)
                b->rc = sqlite3_bind_double(b->st, col, v);
}

static void bind_null(struct binder *b, int col) {
        if (b->rc == SQLITE_OK)
                b->rc = sqlite3_bind_null(b->st, col);
}

static void stmt_done(sqlite3_stmt *st) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
}

/* Starts a run of statement id: returns a binder on it. */
static struct binder stmt_begin(struct store *s, enum stmt_id id) {
        struct binder b = {.st = s->stmt[id], .rc = SQLITE_OK};
        return b;
}

/* Runs a bound statement that returns no rows to completion (committing it) and resets
 * it. Returns the number of rows it changed, or -errno. */
static int stmt_exec(struct store *s, struct binder *b, const char *what) {
        int rc = b->rc;
        int r;

        if (rc == SQLITE_OK)
                rc = sqlite3_step(b->st);
        if (rc != SQLITE_DONE) {
                r = sqlfail(s, rc, what);
                stmt_done(b->st);
                return r;
        }
        stmt_done(b->st);
        r = sqlite3_changes(s->db);
        return r < 0 ? 0 : r;
}

/* ---- the batch of command records ------------------------------------------------ */

/* Runs one of the transaction statements. */
static int txn_exec(struct store *s, enum stmt_id id, const char *what) {
        struct binder b = stmt_begin(s, id);
        int r = stmt_exec(s, &b, what);

        return r < 0 ? r : 0;
}

/* A command record joins the open batch, opening one when there is none. */
/* A batch was lost: counted for store_take_lost, with the reason in s->error. */
static void batch_lost(struct store *s) {
        s->lost++;
        memcpy(s->lost_error, s->error, sizeof(s->lost_error));
}

static int batch_join(struct store *s) {
        int r;

        /* SQLite rolls a whole transaction back on some errors (a full disk, out of
         * memory): then the batch is gone and a new one starts. */
        if (s->batch_open && !sqlite3_get_autocommit(s->db))
                return 0;
        if (s->batch_open) {
                (void)fail(s, -EIO, "a batch of command records was rolled back by an "
                                    "earlier error");
                batch_lost(s);
                error_clear(s);
        }
        s->batch_open = 0;
        r = txn_exec(s, ST_BEGIN, "opening a batch of command records");
        if (r == 0)
                s->batch_open = 1;
        return r;
}

int store_commit(struct store *s) {
        int r;

        if (!s || !s->batch_open)
                return 0;
        s->batch_open = 0;
        if (sqlite3_get_autocommit(s->db))
                return fail(s, -EIO, "a batch of command records was rolled back by an "
                                     "earlier error");
        r = txn_exec(s, ST_COMMIT, "committing command records");
        /* A failed COMMIT (a full disk) may leave the transaction open: end it, so that
         * the next write starts clean. The batch is lost and the caller says so. */
        if (r < 0 && !sqlite3_get_autocommit(s->db)) {
                char keep[STORE_ERROR_BYTES];
                memcpy(keep, s->error, sizeof(keep));
                (void)txn_exec(s, ST_ROLLBACK, "rolling back command records");
                memcpy(s->error, keep, sizeof(keep));
        }
        return r;
}

int store_pending(const struct store *s) {
        return s && s->batch_open;
}

/* Every write other than a command record commits the open batch first and then
 * commits on its own, so that its failure is its own: a failed commit of the batch is
 * counted for store_take_lost, not charged to the write that came after it. */
static int settle(struct store *s) {
        if (store_commit(s) < 0) {
                batch_lost(s);
                error_clear(s);
        }
        return 0;
}

unsigned store_take_lost(struct store *s, char *why, size_t len) {
        unsigned n = s->lost;

        if (n && why && len)
                snprintf(why, len, "%s", s->lost_error);
        s->lost = 0;
        return n;
}

/* ---- copying rows out of SQLite ------------------------------------------------------ */

/* One text or blob column of the current row, located but not yet copied. */
struct colref {
        const void *p;
        size_t n;
        int null;
};

/* Locates column col of st's current row. -ENOMEM when SQLite could not produce the
 * value (it may need memory to NUL-terminate text). */
static int col_ref(sqlite3_stmt *st, int col, int blob, struct colref *r) {
        r->null = sqlite3_column_type(st, col) == SQLITE_NULL;
        r->p = NULL;
        r->n = 0;
        if (r->null)
                return 0;
        r->p = blob ? sqlite3_column_blob(st, col) : (const void *)sqlite3_column_text(st, col);
        r->n = (size_t)sqlite3_column_bytes(st, col);
        if (!r->p && (!blob || r->n > 0))
                return -ENOMEM;
        return 0;
}

/* Copies a located column to *cursor, NUL-terminated, and advances the cursor. Returns
 * the copy, or NULL for an SQL NULL. */
static const char *col_put(const struct colref *r, char **cursor) {
        char *out = *cursor;

        if (r->null)
                return NULL;
        if (r->n > 0)
                memcpy(out, r->p, r->n);
        out[r->n] = '\0';
        *cursor += r->n + 1;
        return out;
}

static size_t col_need(const struct colref *r) {
        return r->null ? 0 : r->n + 1;
}

/* A sandbox row copied out of SQLite: the struct and, after it, its strings. */
struct sandbox_row {
        struct store_sandbox sb;
        int64_t rowid;
        char data[];
};

enum {
        SB_TEXT_ID,
        SB_TEXT_STATE,
        SB_TEXT_END_REASON,
        SB_TEXT_SPEC,
        SB_TEXT_WORKSPACE,
        SB_TEXT_CGROUP,
        SB_TEXT_CLIENT,
        SB_TEXT_COUNT
};

static int sandbox_row_load(struct store *s, sqlite3_stmt *st, struct sandbox_row **ret) {
        static const int cols[SB_TEXT_COUNT] = {
                [SB_TEXT_ID] = SB_ID,
                [SB_TEXT_STATE] = SB_STATE,
                [SB_TEXT_END_REASON] = SB_END_REASON,
                [SB_TEXT_SPEC] = SB_SPEC,
                [SB_TEXT_WORKSPACE] = SB_WORKSPACE_DIR,
                [SB_TEXT_CGROUP] = SB_CGROUP_PATH,
                [SB_TEXT_CLIENT] = SB_CLIENT_NAME,
        };
        struct colref refs[SB_TEXT_COUNT] = {{0}};
        struct sandbox_row *row;
        size_t need = 0;
        char *cur;

        for (int i = 0; i < SB_TEXT_COUNT; i++) {
                if (col_ref(st, cols[i], i == SB_TEXT_SPEC, &refs[i]) < 0)
                        return fail(s, -ENOMEM, "reading a sandbox: out of memory");
                need += col_need(&refs[i]);
        }
        row = calloc(1, sizeof(*row) + need);
        if (!row)
                return fail(s, -ENOMEM, "reading a sandbox: out of memory");
        cur = row->data;
        row->sb.id = col_put(&refs[SB_TEXT_ID], &cur);
        row->sb.state = col_put(&refs[SB_TEXT_STATE], &cur);
        row->sb.end_reason = col_put(&refs[SB_TEXT_END_REASON], &cur);
        if (refs[SB_TEXT_SPEC].n > 0) {
                row->sb.spec = col_put(&refs[SB_TEXT_SPEC], &cur);
                row->sb.spec_len = refs[SB_TEXT_SPEC].n;
        }
        row->sb.workspace_dir = col_put(&refs[SB_TEXT_WORKSPACE], &cur);
        row->sb.cgroup_path = col_put(&refs[SB_TEXT_CGROUP], &cur);
        row->sb.client_name = col_put(&refs[SB_TEXT_CLIENT], &cur);
        row->sb.owner_uid = (uint32_t)sqlite3_column_int64(st, SB_OWNER_UID);
        row->sb.created_ms = sqlite3_column_int64(st, SB_CREATED_MS);
        row->sb.deadline_ms = sqlite3_column_int64(st, SB_DEADLINE_MS);
        row->sb.idle_timeout_ms = (uint64_t)sqlite3_column_int64(st, SB_IDLE_TIMEOUT_MS);
        row->sb.ended_ms = sqlite3_column_int64(st, SB_ENDED_MS);
        row->sb.init_pid = (int32_t)sqlite3_column_int64(st, SB_INIT_PID);
        row->sb.run_uid = (uint32_t)sqlite3_column_int64(st, SB_RUN_UID);
        row->sb.caller_pid = (uint32_t)sqlite3_column_int64(st, SB_CALLER_PID);
        row->rowid = sqlite3_column_int64(st, SB_ROWID);
        *ret = row;
        return 0;
}

/* A command row copied out of SQLite: the struct, the argv pointers (NULL-terminated),
 * then the strings. */
struct command_row {
        struct store_command c;
        const char *argv[];
};

enum {
        CMD_TEXT_SANDBOX,
        CMD_TEXT_COMMAND,
        CMD_TEXT_ARGV,
        CMD_TEXT_CWD,
        CMD_TEXT_CLIENT,
        CMD_TEXT_OUTCOME,
        CMD_TEXT_LIMITS,
        CMD_TEXT_START_ERROR,
        CMD_TEXT_COUNT
};

static int command_row_load(struct store *s, sqlite3_stmt *st, struct command_row **ret) {
        static const int cols[CMD_TEXT_COUNT] = {
                [CMD_TEXT_SANDBOX] = CMD_SANDBOX_ID, [CMD_TEXT_COMMAND] = CMD_COMMAND_ID,
                [CMD_TEXT_ARGV] = CMD_ARGV,          [CMD_TEXT_CWD] = CMD_CWD,
                [CMD_TEXT_CLIENT] = CMD_CLIENT_NAME, [CMD_TEXT_OUTCOME] = CMD_OUTCOME,
                [CMD_TEXT_LIMITS] = CMD_LIMITS_HIT,  [CMD_TEXT_START_ERROR] = CMD_START_ERROR,
        };
        struct colref refs[CMD_TEXT_COUNT] = {{0}};
        const struct colref *av = &refs[CMD_TEXT_ARGV];
        struct command_row *row;
        size_t need = 0, argc = 0;
        const char *p;
        char *cur, *args;

        for (int i = 0; i < CMD_TEXT_COUNT; i++) {
                if (col_ref(st, cols[i], i == CMD_TEXT_ARGV, &refs[i]) < 0)
                        return fail(s, -ENOMEM, "reading a command: out of memory");
                need += col_need(&refs[i]);
        }
        /* Each element ends with a NUL; a last one without (a row not written by this
         * module) still counts, since col_put terminates the copy. */
        for (size_t i = 0; i < av->n; i++)
                if (((const char *)av->p)[i] == '\0')
                        argc++;
        if (av->n > 0 && ((const char *)av->p)[av->n - 1] != '\0')
                argc++;
        if (argc > (SIZE_MAX - sizeof(*row) - need) / sizeof(row->argv[0]) - 1)
                return fail(s, -ENOMEM, "reading a command: argv too large");
        row = calloc(1, sizeof(*row) + (argc + 1) * sizeof(row->argv[0]) + need);
        if (!row)
                return fail(s, -ENOMEM, "reading a command: out of memory");
        cur = (char *)(row->argv + argc + 1);
        row->c.sandbox_id = col_put(&refs[CMD_TEXT_SANDBOX], &cur);
        row->c.command_id = col_put(&refs[CMD_TEXT_COMMAND], &cur);
        args = cur;
        col_put(av, &cur);
        p = args;
        for (size_t i = 0; i < argc; i++) {
                row->argv[i] = p;
                p += strlen(p) + 1;
        }
        row->argv[argc] = NULL;
        row->c.argv = row->argv;
        row->c.argc = argc;
        row->c.cwd = col_put(&refs[CMD_TEXT_CWD], &cur);
        row->c.client_name = col_put(&refs[CMD_TEXT_CLIENT], &cur);
        row->c.outcome = col_put(&refs[CMD_TEXT_OUTCOME], &cur);
        row->c.limits_hit = col_put(&refs[CMD_TEXT_LIMITS], &cur);
        row->c.start_error = col_put(&refs[CMD_TEXT_START_ERROR], &cur);
        row->c.caller_uid = (uint32_t)sqlite3_column_int64(st, CMD_CALLER_UID);
        row->c.caller_pid = (int32_t)sqlite3_column_int64(st, CMD_CALLER_PID);
        row->c.started_ms = sqlite3_column_int64(st, CMD_STARTED_MS);
        row->c.ended_ms = sqlite3_column_int64(st, CMD_ENDED_MS);
        row->c.has_exit_code = sqlite3_column_type(st, CMD_EXIT_CODE) != SQLITE_NULL;
        row->c.exit_code = row->c.has_exit_code ? sqlite3_column_int(st, CMD_EXIT_CODE) : 0;
        row->c.has_signal = sqlite3_column_type(st, CMD_SIGNAL) != SQLITE_NULL;
        row->c.signal = row->c.has_signal ? sqlite3_column_int(st, CMD_SIGNAL) : 0;
        row->c.duration = sqlite3_column_double(st, CMD_DURATION);
        row->c.cpu_seconds = sqlite3_column_double(st, CMD_CPU_SECONDS);
        row->c.peak_memory_bytes = (uint64_t)sqlite3_column_int64(st, CMD_PEAK_MEMORY);
        row->c.stdout_bytes = (uint64_t)sqlite3_column_int64(st, CMD_STDOUT_BYTES);
        row->c.stderr_bytes = (uint64_t)sqlite3_column_int64(st, CMD_STDERR_BYTES);
        row->c.stdout_truncated = sqlite3_column_int(st, CMD_STDOUT_TRUNCATED) != 0;
        row->c.stderr_truncated = sqlite3_column_int(st, CMD_STDERR_TRUNCATED) != 0;
        row->c.seq = (uint64_t)sqlite3_column_int64(st, CMD_SEQ);
        row->c.queued_ms = (uint64_t)sqlite3_column_int64(st, CMD_QUEUED_MS);
        row->c.background = sqlite3_column_int(st, CMD_BACKGROUND) != 0;
        row->c.tty = sqlite3_column_int(st, CMD_TTY) != 0;
        *ret = row;
        return 0;
}

/* ---- opening and closing ------------------------------------------------------------ */

/* Runs one SQL text of any number of statements that return nothing worth keeping. */
static int exec_sql(struct store *s, const char *sql, const char *what) {
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

        return rc == SQLITE_OK ? 0 : sqlfail(s, rc, what);
}

/* Runs a pragma or query that yields one integer (or one text, into text/size). */
static int query_one(struct store *s, const char *sql, int64_t *ret_int, char *text, size_t size,
                     const char *what) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlfail(s, rc, what);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                if (ret_int)
                        *ret_int = sqlite3_column_int64(st, 0);
                if (text) {
                        const unsigned char *t = sqlite3_column_text(st, 0);
                        snprintf(text, size, "%s", t ? (const char *)t : "");
                }
        } else if (rc == SQLITE_DONE) {
                r = fail(s, -EIO, "%s: no result", what);
        } else {
                r = sqlfail(s, rc, what);
        }
        sqlite3_finalize(st);
        return r;
}

static int read_user_version(struct store *s, int64_t *ret) {
        return query_one(s, "PRAGMA user_version", ret, NULL, 0, "reading user_version");
}

static int refuse_newer(struct store *s, int64_t version) {
        return fail(s, -EPROTO,
                    "database schema version %lld is newer than this sbxd's %d; "
                    "run a newer sbxd or move the database aside",
                    (long long)version, STORE_SCHEMA_VERSION);
}

static void rollback(struct store *s) {
        if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Brings the schema to STORE_SCHEMA_VERSION, one migration per transaction. The version
 * is read again inside each transaction, so two processes opening the same new file at
 * once migrate it once. */
static int migrate(struct store *s) {
        for (;;) {
                char sql[64];
                int64_t v;
                int r;

                r = exec_sql(s, "BEGIN IMMEDIATE", "starting a migration");
                if (r < 0)
                        return r;
                r = read_user_version(s, &v);
                if (r < 0)
                        goto fail;
                if (v > STORE_SCHEMA_VERSION) {
                        r = refuse_newer(s, v);
                        goto fail;
                }
                if (v == STORE_SCHEMA_VERSION) {
                        r = exec_sql(s, "COMMIT", "ending a migration");
                        if (r < 0)
                                goto fail;
                        return 0;
                }
                if (v < 0) {
                        r = fail(s, -EIO, "database has a negative schema version %lld",
                                 (long long)v);
                        goto fail;
                }
                r = exec_sql(s, migrations[v], "migrating the schema");
                if (r < 0)
                        goto fail;
                snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long)v + 1);
                r = exec_sql(s, sql, "setting user_version");
                if (r < 0)
                        goto fail;
                r = exec_sql(s, "COMMIT", "committing a migration");
                if (r < 0)
                        goto fail;
                continue;
        fail:
                rollback(s);
                return r;
        }
}

static int prepare_all(struct store *s) {
        for (int i = 0; i < ST_COUNT; i++) {
                int rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmt[i], NULL);
                if (rc != SQLITE_OK)
                        return sqlfail(s, rc, "preparing statements");
        }
        return 0;
}

/* Sets the connection up; everything after the file exists. */
static int setup(struct store *s) {
        char mode[16];
        int64_t v;
        int r;

        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
        /* Refuse a newer schema before writing anything, WAL mode included. */
        r = read_user_version(s, &v);
        if (r < 0)
                return r;
        if (v > STORE_SCHEMA_VERSION)
                return refuse_newer(s, v);
        r = exec_sql(s, "PRAGMA foreign_keys = ON", "enabling foreign keys");
        if (r < 0)
                return r;
        r = query_one(s, "PRAGMA journal_mode = WAL", NULL, mode, sizeof(mode),
                      "enabling WAL mode");
        if (r < 0)
                return r;
        if (strcmp(mode, "wal") != 0)
                return fail(s, -EIO, "enabling WAL mode: the database stays in %s mode", mode);
        /* In WAL mode NORMAL syncs only at checkpoints: a process crash loses nothing
         * committed, a power loss may lose the last commits. */
        r = exec_sql(s, "PRAGMA synchronous = NORMAL", "setting synchronous");
        if (r < 0)
                return r;
        r = migrate(s);
        if (r < 0)
                return r;
        return prepare_all(s);
}

/* After every commit on the loop's connection (sqlite3_wal_hook): frames is the WAL's
 * length. Replaces SQLite's automatic checkpoint but for one case: the WAL starts over
 * only when a write begins after a checkpoint that caught up with it, which under
 * sustained writes one on another thread never does (commits land during its
 * fsyncs). So past STORE_WAL_MAX_FRAMES, between two writes, the loop checkpoints
 * itself (the pages left to copy are few; the fsyncs stall the loop once per that
 * many frames) and the next write starts the WAL over. */
static int on_wal_commit(void *ud, sqlite3 *db, const char *name, int frames) {
        struct store *s = ud;

        if (frames < s->wal_frames)
                s->ckpt_frames = 0; /* the WAL started over */
        s->wal_frames = frames;
        if (frames >= STORE_WAL_MAX_FRAMES && !s->ckpt_running)
                (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL,
                                                &s->ckpt_frames);
        return SQLITE_OK;
}

/* Opens the checkpointing connection. Without it (no thread support, or it cannot be
 * opened) the loop's connection keeps SQLite's automatic checkpoints. */
static void open_checkpointer(struct store *s, const char *path) {
        if (!sqlite3_threadsafe())
                return;
        if (sqlite3_open_v2(path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                            NULL) != SQLITE_OK ||
            sqlite3_exec(s->ckpt_db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) !=
                    SQLITE_OK) {
                sqlite3_close_v2(s->ckpt_db);
                s->ckpt_db = NULL;
                return;
        }
        sqlite3_wal_hook(s->db, on_wal_commit, s);
}

int store_checkpoint_wanted(const struct store *s) {
        /* Frames not yet copied: a checkpoint that finds only those written during the
         * last one would cost its two fsyncs for little. */
        return s->ckpt_db && !s->ckpt_running &&
               s->wal_frames - s->ckpt_frames >= STORE_CHECKPOINT_FRAMES &&
               s->wal_frames < STORE_WAL_MAX_FRAMES;
}

void store_checkpoint_begin(struct store *s) {
        s->ckpt_running = 1;
        s->ckpt_error[0] = '\0';
}

/* On the checkpointing thread: touches ckpt_db and ckpt_error alone. */
int store_checkpoint_run(struct store *s) {
        int copied = 0;
        int rc = sqlite3_wal_checkpoint_v2(s->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
                                           &copied);
        if (rc == SQLITE_OK)
                return copied > 0 ? copied : 0;
        if (rc == SQLITE_BUSY) /* the loop's own was running */
                return 0;
        return sqlite_to_errno(s->ckpt_db, rc, "checkpoint", s->ckpt_error,
                               sizeof(s->ckpt_error));
}

int store_wal_frames(const struct store *s) {
        return s->wal_frames;
}

const char *store_checkpoint_end(struct store *s, int r) {
        s->ckpt_running = 0;
        if (r < 0) {
                /* Tried again once as many frames more were written, not every turn. */
                s->ckpt_frames = s->wal_frames;
                return s->ckpt_error;
        }
        if (r > s->ckpt_frames)
                s->ckpt_frames = r;
        return NULL;
}

static void open_fail_message(const char *path, const char *msg) {
        int n = snprintf(open_error, sizeof(open_error), "%s: %s", path, msg);

        /* A very long path cuts the message short; the path is what matters most. */
        if (n >= (int)sizeof(open_error))
                open_error[sizeof(open_error) - 1] = '\0';
}

int store_open(const char *path, struct store **ret) {
        struct store *s;
        int fd, rc, r;

        open_error[0] = '\0';
        if (!path || !*path || !ret) {
                open_fail_message(path ? path : "(null)", "no database path");
                return -EINVAL;
        }
        /* Create the file ourselves so that it (and, as SQLite copies the database's
         * mode, its -wal and -shm files) is private: it holds every caller's argv. */
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0) {
                r = -errno;
                open_fail_message(path, strerror(-r));
                return r;
        }
        close(fd);

        s = calloc(1, sizeof(*s));
        if (!s) {
                open_fail_message(path, "out of memory");
                return -ENOMEM;
        }
        rc = sqlite3_open_v2(path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
#ifdef SQLITE_OPEN_EXRESCODE
                                     | SQLITE_OPEN_EXRESCODE
#endif
                             ,
                             NULL);
        if (rc != SQLITE_OK) {
                r = sqlite_to_errno(s->db, rc, "opening", s->error, sizeof(s->error));
                if (!s->db)
                        r = -ENOMEM;
        } else {
                r = setup(s);
        }
        if (r < 0) {
                open_fail_message(path, s->error);
                store_close(s);
                return r;
        }
        open_checkpointer(s, path);
        error_clear(s);
        *ret = s;
        return 0;
}

struct store *store_close(struct store *s) {
        if (!s)
                return NULL;
        (void)store_commit(s);
        for (int i = 0; i < ST_COUNT; i++)
                sqlite3_finalize(s->stmt[i]);
        sqlite3_close_v2(s->ckpt_db);
        /* The last connection to close checkpoints the WAL into the database and removes
         * it; when that cannot be done (a full disk) the WAL stays and is replayed by the
         * next open, so nothing is lost either way. */
        sqlite3_close_v2(s->db);
        free(s);
        return NULL;
}

const char *store_last_error(const struct store *s) {
        return s ? s->error : open_error;
}

int store_integrity_check(struct store *s) {
        sqlite3_stmt *st = s->stmt[ST_INTEGRITY];
        int rc, r = 0, rows = 0;

        error_clear(s);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const unsigned char *t = sqlite3_column_text(st, 0);

                if (rows++ == 0 && t && strcmp((const char *)t, "ok") == 0)
                        continue;
                if (r == 0)
                        r = fail(s, -EIO, "integrity_check: %s", t ? (const char *)t : "?");
        }
        if (rc != SQLITE_DONE && r == 0)
                r = sqlfail(s, rc, "integrity_check");
        if (rc == SQLITE_DONE && rows == 0 && r == 0)
                r = fail(s, -EIO, "integrity_check: no result");
        stmt_done(st);
        return r;
}

/* ---- sandboxes ---------------------------------------------------------------------- */

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb) {
        struct binder b = stmt_begin(s, ST_SB_INSERT);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!sb || !sb->id || !sb->state || (!sb->spec && sb->spec_len > 0))
                return fail(s, -EINVAL, "store_sandbox_insert: id and state are required");
        bind_text(&b, 1, sb->id);
        bind_int64(&b, 2, sb->owner_uid);
        bind_text(&b, 3, sb->state);
        bind_int64(&b, 4, sb->created_ms);
        bind_int64(&b, 5, sb->deadline_ms);
        bind_uint64(&b, 6, sb->idle_timeout_ms);
        bind_int64(&b, 7, sb->ended_ms);
        bind_text(&b, 8, sb->end_reason);
        bind_blob(&b, 9, sb->spec, sb->spec_len);
        bind_int64(&b, 10, sb->init_pid);
        bind_text(&b, 11, sb->workspace_dir);
        bind_text(&b, 12, sb->cgroup_path);
        bind_int64(&b, 13, sb->run_uid);
        bind_int64(&b, 14, sb->caller_pid);
        bind_text(&b, 15, sb->client_name);
        r = stmt_exec(s, &b, "recording a sandbox");
        return r < 0 ? r : 0;
}

int store_sandbox_exists(struct store *s, const char *id) {
        struct binder b = stmt_begin(s, ST_SB_EXISTS);
        int rc, r;

        error_clear(s);
        if (!id)
                return fail(s, -EINVAL, "store_sandbox_exists: no id");
        bind_text(&b, 1, id);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        if (rc == SQLITE_ROW)
                r = 1;
        else if (rc == SQLITE_DONE)
                r = 0;
        else
                r = sqlfail(s, rc, "looking up a sandbox");
        stmt_done(b.st);
        return r;
}

/* Runs an UPDATE of one sandbox; -ENOENT when no row has that id. */
static int sandbox_update(struct store *s, struct binder *b, const char *id, const char *what) {
        int r = stmt_exec(s, b, what);

        if (r == 0)
                return fail(s, -ENOENT, "%s: no sandbox %s", what, id);
        return r < 0 ? r : 0;
}

int store_sandbox_set_state(struct store *s, const char *id, const char *state, int64_t ended_ms,
                            const char *end_reason) {
        struct binder b = stmt_begin(s, ST_SB_SET_STATE);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!id || !state)
                return fail(s, -EINVAL, "store_sandbox_set_state: id and state are required");
        bind_text(&b, 1, id);
        bind_text(&b, 2, state);
        bind_int64(&b, 3, ended_ms);
        bind_text(&b, 4, end_reason);
        return sandbox_update(s, &b, id, "setting a sandbox's state");
}

int store_sandbox_set_init_pid(struct store *s, const char *id, int32_t init_pid) {
        struct binder b = stmt_begin(s, ST_SB_SET_INIT_PID);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!id)
                return fail(s, -EINVAL, "store_sandbox_set_init_pid: no id");
        bind_text(&b, 1, id);
        bind_int64(&b, 2, init_pid);
        return sandbox_update(s, &b, id, "setting a sandbox's init pid");
}

int store_sandbox_set_deadline(struct store *s, const char *id, int64_t deadline_ms) {
        struct binder b = stmt_begin(s, ST_SB_SET_DEADLINE);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!id)
                return fail(s, -EINVAL, "store_sandbox_set_deadline: no id");
        bind_text(&b, 1, id);
        bind_int64(&b, 2, deadline_ms);
        return sandbox_update(s, &b, id, "setting a sandbox's deadline");
}

int store_sandbox_replace(struct store *s, const struct store_sandbox *sb) {
        struct binder b = stmt_begin(s, ST_SB_REPLACE);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!sb || !sb->id || !sb->state || (!sb->spec && sb->spec_len > 0))
                return fail(s, -EINVAL, "store_sandbox_replace: id and state are required");
        bind_text(&b, 1, sb->id);
        bind_text(&b, 2, sb->state);
        bind_blob(&b, 3, sb->spec, sb->spec_len);
        bind_int64(&b, 4, sb->init_pid);
        bind_text(&b, 5, sb->workspace_dir);
        bind_text(&b, 6, sb->cgroup_path);
        bind_int64(&b, 7, sb->run_uid);
        return sandbox_update(s, &b, sb->id, "recording a restored sandbox");
}

static void free_sandbox_rows(struct sandbox_row **rows, size_t from, size_t n) {
        for (size_t i = from; i < n; i++)
                free(rows[i]);
}

int store_sandbox_foreach(struct store *s, int live_only, int has_owner, uint32_t owner_uid,
                          uint32_t limit, store_sandbox_cb cb, void *userdata) {
        enum stmt_id id = ST_SB_LIST_ALL + (live_only ? 1 : 0) + (has_owner ? 2 : 0);
        struct sandbox_row *rows[STORE_BATCH_ROWS];
        int64_t key_created = INT64_MAX, key_rowid = INT64_MAX;
        uint32_t delivered = 0;

        error_clear(s);
        if (!cb)
                return fail(s, -EINVAL, "store_sandbox_foreach: no callback");
        for (;;) {
                struct binder b = stmt_begin(s, id);
                uint32_t want = STORE_BATCH_ROWS;
                size_t n = 0;
                int rc, r = 0;

                if (limit && limit - delivered < want)
                        want = limit - delivered;
                bind_int64(&b, 1, key_created);
                bind_int64(&b, 2, key_rowid);
                bind_int64(&b, 3, want);
                if (has_owner)
                        bind_int64(&b, 4, owner_uid);
                rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
                while (rc == SQLITE_ROW && n < want) {
                        r = sandbox_row_load(s, b.st, &rows[n]);
                        if (r < 0)
                                break;
                        key_created = rows[n]->sb.created_ms;
                        key_rowid = rows[n]->rowid;
                        n++;
                        rc = sqlite3_step(b.st);
                }
                if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                        r = sqlfail(s, rc, "listing sandboxes");
                stmt_done(b.st);
                if (r < 0) {
                        free_sandbox_rows(rows, 0, n);
                        return r;
                }
                /* No statement is active from here on: cb may use the store. */
                for (size_t i = 0; i < n; i++) {
                        r = cb(&rows[i]->sb, userdata);
                        free(rows[i]);
                        if (r != 0) {
                                free_sandbox_rows(rows, i + 1, n);
                                return r;
                        }
                }
                delivered += (uint32_t)n;
                if (n < want || (limit && delivered >= limit))
                        return 0;
        }
}

int store_sandbox_get(struct store *s, const char *id, store_sandbox_cb cb, void *userdata) {
        struct binder b = stmt_begin(s, ST_SB_GET);
        struct sandbox_row *row = NULL;
        int rc, r = 0;

        error_clear(s);
        if (!id || !cb)
                return fail(s, -EINVAL, "store_sandbox_get: id and callback are required");
        bind_text(&b, 1, id);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        if (rc == SQLITE_ROW)
                r = sandbox_row_load(s, b.st, &row);
        else if (rc == SQLITE_DONE)
                r = fail(s, -ENOENT, "no sandbox %s", id);
        else
                r = sqlfail(s, rc, "reading a sandbox");
        stmt_done(b.st);
        if (r < 0)
                return r;
        r = cb(&row->sb, userdata);
        free(row);
        return r;
}

/* ---- commands ----------------------------------------------------------------------- */

/* Packs argv as its elements each followed by one NUL (elements cannot hold a NUL, so
 * this is unambiguous for any other bytes). *ret is malloc'ed, NULL when argc is 0. */
static int argv_pack(const char *const *argv, size_t argc, char **ret, size_t *ret_len) {
        size_t len = 0;
        char *buf, *p;

        for (size_t i = 0; i < argc; i++) {
                size_t n;

                if (!argv[i])
                        return -EINVAL;
                n = strlen(argv[i]) + 1;
                if (n > SIZE_MAX - len)
                        return -E2BIG;
                len += n;
        }
        if (len == 0) {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        buf = malloc(len);
        if (!buf)
                return -ENOMEM;
        p = buf;
        for (size_t i = 0; i < argc; i++) {
                size_t n = strlen(argv[i]) + 1;

                memcpy(p, argv[i], n);
                p += n;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* The three command statements bind sandbox_id, command_id and seq at 1, 2, 3, the end
 * fields at 4..16 and the start fields after them (at 4 when there are no end fields);
 * ST_CMD_FINISH binds queued_ms, the one start field it writes again, at 17. */
#define CMD_END_FIRST 4
#define CMD_END_LAST 16

/* Binds the start fields of c at first, first + 1, ... in the order of ST_CMD_INSERT;
 * *packed gets the packed argv to free. */
static int bind_command_start(struct store *s, struct binder *b, int first,
                              const struct store_command *c, char **packed) {
        size_t packed_len = 0;
        int r = argv_pack(c->argv, c->argc, packed, &packed_len);

        if (r < 0)
                return fail(s, r, "recording a command: cannot pack argv: %s", strerror(-r));
        bind_blob(b, first, *packed, packed_len);
        bind_text(b, first + 1, c->cwd);
        bind_int64(b, first + 2, c->caller_uid);
        bind_int64(b, first + 3, c->caller_pid);
        bind_text(b, first + 4, c->client_name);
        bind_int64(b, first + 5, c->started_ms);
        bind_uint64(b, first + 6, c->queued_ms);
        bind_int64(b, first + 7, c->background != 0);
        bind_int64(b, first + 8, c->tty ? 1 : 0);
        return 0;
}

/* Binds the end fields of c at CMD_END_FIRST..CMD_END_LAST, in the order of
 * ST_CMD_FINISH. */
static void bind_command_end(struct binder *b, const struct store_command *c) {
        int i = CMD_END_FIRST;

        bind_int64(b, i++, c->ended_ms);
        bind_text(b, i++, c->outcome);
        if (c->has_exit_code)
                bind_int64(b, i++, c->exit_code);
        else
                bind_null(b, i++);
        if (c->has_signal)
                bind_int64(b, i++, c->signal);
        else
                bind_null(b, i++);
        bind_double(b, i++, c->duration);
        bind_double(b, i++, c->cpu_seconds);
        bind_uint64(b, i++, c->peak_memory_bytes);
        bind_uint64(b, i++, c->stdout_bytes);
        bind_uint64(b, i++, c->stderr_bytes);
        bind_int64(b, i++, c->stdout_truncated != 0);
        bind_int64(b, i++, c->stderr_truncated != 0);
        bind_text(b, i++, c->limits_hit);
        bind_text(b, i, c->start_error);
        _Static_assert(CMD_END_LAST - CMD_END_FIRST == 12, "thirteen end fields");
}

/* Binds what identifies c's record at 1, 2, 3. Fails when c lacks it. */
static int bind_command_key(struct store *s, struct binder *b, const struct store_command *c,
                            const char *what) {
        if (!c || !c->sandbox_id || !c->command_id || c->seq == 0 || c->seq > INT64_MAX)
                return fail(s, -EINVAL, "%s: sandbox_id, command_id and a seq from 1 are "
                                        "required",
                            what);
        bind_text(b, 1, c->sandbox_id);
        bind_text(b, 2, c->command_id);
        bind_int64(b, 3, (int64_t)c->seq);
        return 0;
}

/* One row for c: its start fields, and its end fields too when ended. */
static int insert_command(struct store *s, const struct store_command *c, int ended) {
        struct binder b = stmt_begin(s, ended ? ST_CMD_INSERT_ENDED : ST_CMD_INSERT);
        char *packed = NULL;
        int r;

        error_clear(s);
        r = batch_join(s);
        if (r < 0)
                return r;
        r = bind_command_key(s, &b, c, "recording a command");
        if (r == 0 && !c->argv && c->argc > 0)
                r = fail(s, -EINVAL, "recording a command: argv is missing");
        if (r == 0 && ended && !c->outcome)
                r = fail(s, -EINVAL, "recording a command: an outcome is required");
        if (r < 0) {
                stmt_done(b.st);
                return r;
        }
        if (ended)
                bind_command_end(&b, c);
        r = bind_command_start(s, &b, ended ? CMD_END_LAST + 1 : CMD_END_FIRST, c, &packed);
        if (r == 0)
                r = stmt_exec(s, &b, "recording a command");
        else
                stmt_done(b.st);
        free(packed);
        return r < 0 ? r : 0;
}

int store_command_insert(struct store *s, const struct store_command *c) {
        return insert_command(s, c, 0);
}

int store_command_insert_ended(struct store *s, const struct store_command *c) {
        return insert_command(s, c, 1);
}

int store_command_finish(struct store *s, const struct store_command *c) {
        struct binder b = stmt_begin(s, ST_CMD_FINISH);
        int r;

        error_clear(s);
        r = batch_join(s);
        if (r < 0)
                return r;
        r = bind_command_key(s, &b, c, "recording a command's end");
        if (r == 0 && !c->outcome)
                r = fail(s, -EINVAL, "recording a command's end: an outcome is required");
        if (r < 0) {
                stmt_done(b.st);
                return r;
        }
        bind_command_end(&b, c);
        bind_uint64(&b, CMD_END_LAST + 1, c->queued_ms);
        r = stmt_exec(s, &b, "recording a command's end");
        if (r == 0)
                return fail(s, -ENOENT, "no command %s (seq %llu) in sandbox %s",
                            c->command_id, (unsigned long long)c->seq, c->sandbox_id);
        return r < 0 ? r : 0;
}

int store_commands_mark_unknown(struct store *s, const char *sandbox_id, int64_t ended_ms) {
        struct binder b = stmt_begin(s, sandbox_id ? ST_CMD_MARK_ONE : ST_CMD_MARK_ALL);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (sandbox_id)
                bind_text(&b, 1, sandbox_id);
        bind_int64(&b, 2, ended_ms);
        return stmt_exec(s, &b, "marking commands unknown");
}

static void free_command_rows(struct command_row **rows, size_t from, size_t n) {
        for (size_t i = from; i < n; i++)
                free(rows[i]);
}

int store_history(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                  store_command_cb cb, void *userdata) {
        struct command_row *rows[STORE_BATCH_ROWS];
        uint32_t delivered = 0;

        error_clear(s);
        if (!sandbox_id || !cb)
                return fail(s, -EINVAL, "store_history: sandbox_id and callback are required");
        if (after_seq > INT64_MAX)
                return 0;
        for (;;) {
                struct binder b = stmt_begin(s, ST_CMD_HISTORY);
                uint32_t want = STORE_BATCH_ROWS;
                size_t n = 0;
                int rc, r = 0;

                if (limit && limit - delivered < want)
                        want = limit - delivered;
                bind_text(&b, 1, sandbox_id);
                bind_int64(&b, 2, (int64_t)after_seq);
                bind_int64(&b, 3, want);
                rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
                while (rc == SQLITE_ROW && n < want) {
                        r = command_row_load(s, b.st, &rows[n]);
                        if (r < 0)
                                break;
                        after_seq = rows[n]->c.seq;
                        n++;
                        rc = sqlite3_step(b.st);
                }
                if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                        r = sqlfail(s, rc, "reading command history");
                stmt_done(b.st);
                if (r < 0) {
                        free_command_rows(rows, 0, n);
                        return r;
                }
                /* No statement is active from here on: cb may use the store. */
                for (size_t i = 0; i < n; i++) {
                        r = cb(&rows[i]->c, userdata);
                        free(rows[i]);
                        if (r != 0) {
                                free_command_rows(rows, i + 1, n);
                                return r;
                        }
                        delivered++;
                }
                if (n < want || (limit && delivered >= limit))
                        return delivered > INT32_MAX ? INT32_MAX : (int)delivered;
        }
}

/* ---- connections ------------------------------------------------------------------- */

int store_connection_insert(struct store *s, const struct store_connection *c) {
        struct binder b = stmt_begin(s, ST_CONN_INSERT);
        int r;

        error_clear(s);
        if (!c || !c->sandbox_id || c->seq == 0 || c->seq > INT64_MAX)
                return fail(s, -EINVAL, "recording a connection: sandbox_id and seq are required");
        r = batch_join(s);
        if (r < 0)
                return r;
        bind_text(&b, 1, c->sandbox_id);
        bind_uint64(&b, 2, c->seq);
        bind_int64(&b, 3, c->started_ms);
        bind_int64(&b, 4, c->ended_ms);
        bind_text(&b, 5, c->host);
        bind_int64(&b, 6, c->port);
        bind_text(&b, 7, c->address);
        bind_int64(&b, 8, c->allowed ? 1 : 0);
        bind_text(&b, 9, c->reason);
        bind_text(&b, 10, c->method);
        bind_uint64(&b, 11, c->bytes_sent);
        bind_uint64(&b, 12, c->bytes_received);
        r = stmt_exec(s, &b, "recording a connection");
        return r < 0 ? r : 0;
}

int store_connection_finish(struct store *s, const struct store_connection *c) {
        struct binder b = stmt_begin(s, ST_CONN_FINISH);
        int r;

        error_clear(s);
        if (!c || !c->sandbox_id)
                return fail(s, -EINVAL, "recording a connection's end: no sandbox_id");
        r = batch_join(s);
        if (r < 0)
                return r;
        bind_text(&b, 1, c->sandbox_id);
        bind_uint64(&b, 2, c->seq);
        bind_int64(&b, 3, c->ended_ms);
        bind_text(&b, 4, c->reason);
        bind_uint64(&b, 5, c->bytes_sent);
        bind_uint64(&b, 6, c->bytes_received);
        r = stmt_exec(s, &b, "recording a connection's end");
        if (r == 0)
                return fail(s, -ENOENT, "no connection %llu in sandbox %s",
                            (unsigned long long)c->seq, c->sandbox_id);
        return r < 0 ? r : 0;
}

int store_connections_reset(struct store *s, const char *sandbox_id, int64_t ended_ms,
                            const char *reason, uint64_t *ret_seq) {
        struct binder b = stmt_begin(s, ST_CONN_RESET);
        int rc, r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        bind_text(&b, 1, sandbox_id);
        bind_int64(&b, 2, ended_ms);
        bind_text(&b, 3, reason);
        r = stmt_exec(s, &b, "ending the connections of a gone proxy");
        if (r < 0)
                return r;
        b = stmt_begin(s, ST_CONN_LAST);
        bind_text(&b, 1, sandbox_id);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        if (rc == SQLITE_ROW) {
                *ret_seq = (uint64_t)sqlite3_column_int64(b.st, 0);
                r = 0;
        } else {
                r = sqlfail(s, rc, "reading the last connection's number");
        }
        stmt_done(b.st);
        return r;
}

/* One connection row copied out of its statement (strings bounded by what the proxy
 * writes: a host of 253 bytes, an address, a method, a one-line reason). */
struct connection_row {
        struct store_connection c;
        char host[256], address[64], method[32], reason[256];
        int has_host, has_address, has_method, has_reason;
};

static void copy_col(sqlite3_stmt *st, int col, char *dst, size_t len, int *has) {
        const unsigned char *t = sqlite3_column_text(st, col);

        *has = t != NULL;
        snprintf(dst, len, "%s", t ? (const char *)t : "");
}

static void connection_row_load(sqlite3_stmt *st, struct connection_row *r) {
        memset(r, 0, sizeof(*r));
        r->c.seq = (uint64_t)sqlite3_column_int64(st, 0);
        r->c.started_ms = sqlite3_column_int64(st, 1);
        r->c.ended_ms = sqlite3_column_int64(st, 2);
        copy_col(st, 3, r->host, sizeof(r->host), &r->has_host);
        r->c.port = (uint32_t)sqlite3_column_int64(st, 4);
        copy_col(st, 5, r->address, sizeof(r->address), &r->has_address);
        r->c.allowed = sqlite3_column_int64(st, 6) != 0;
        copy_col(st, 7, r->reason, sizeof(r->reason), &r->has_reason);
        copy_col(st, 8, r->method, sizeof(r->method), &r->has_method);
        r->c.bytes_sent = (uint64_t)sqlite3_column_int64(st, 9);
        r->c.bytes_received = (uint64_t)sqlite3_column_int64(st, 10);
}

static void connection_row_point(struct connection_row *r, const char *sandbox_id) {
        r->c.sandbox_id = sandbox_id;
        r->c.host = r->has_host ? r->host : NULL;
        r->c.address = r->has_address ? r->address : NULL;
        r->c.reason = r->has_reason ? r->reason : NULL;
        r->c.method = r->has_method ? r->method : NULL;
}

int store_connections(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                      store_connection_cb cb, void *userdata) {
        enum { ROWS = 64 };
        struct connection_row *rows;
        uint32_t delivered = 0;
        int r = 0;

        error_clear(s);
        if (!sandbox_id || !cb)
                return fail(s, -EINVAL, "store_connections: sandbox_id and callback are required");
        if (after_seq > INT64_MAX)
                return 0;
        rows = malloc(ROWS * sizeof(*rows));
        if (!rows)
                return fail(s, -ENOMEM, "reading connections: out of memory");
        for (;;) {
                struct binder b = stmt_begin(s, ST_CONN_HISTORY);
                uint32_t want = ROWS;
                size_t n = 0;
                int rc;

                if (limit && limit - delivered < want)
                        want = limit - delivered;
                bind_text(&b, 1, sandbox_id);
                bind_int64(&b, 2, (int64_t)after_seq);
                bind_int64(&b, 3, want);
                rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
                while (rc == SQLITE_ROW && n < want) {
                        connection_row_load(b.st, &rows[n]);
                        after_seq = rows[n++].c.seq;
                        rc = sqlite3_step(b.st);
                }
                if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                        r = sqlfail(s, rc, "reading connections");
                stmt_done(b.st);
                /* No statement is active from here on: cb may use the store. */
                for (size_t i = 0; r == 0 && i < n; i++) {
                        connection_row_point(&rows[i], sandbox_id);
                        r = cb(&rows[i].c, userdata);
                        if (r == 0)
                                delivered++;
                }
                if (r != 0 || n < want || (limit && delivered >= limit))
                        break;
        }
        free(rows);
        if (r != 0)
                return r;
        return delivered > INT32_MAX ? INT32_MAX : (int)delivered;
}

/* ---- forwards (OpenPort) ------------------------------------------------------------ */

/* The highest seq of sandbox_id's forwards (0: none) into *ret. 0 or -errno. */
static int forward_last_seq(struct store *s, const char *sandbox_id, uint64_t *ret) {
        struct binder b = stmt_begin(s, ST_FWD_LAST);
        int rc, r;

        bind_text(&b, 1, sandbox_id);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        if (rc == SQLITE_ROW) {
                *ret = (uint64_t)sqlite3_column_int64(b.st, 0);
                r = 0;
        } else {
                r = sqlfail(s, rc, "reading the last forward's number");
        }
        stmt_done(b.st);
        return r;
}

int store_forward_insert(struct store *s, struct store_forward *f) {
        struct binder b = stmt_begin(s, ST_FWD_INSERT);
        uint64_t last = 0;
        int r;

        error_clear(s);
        if (!f || !f->sandbox_id || !f->address)
                return fail(s, -EINVAL, "recording a forward: sandbox_id and address are required");
        r = batch_join(s);
        if (r == 0)
                r = forward_last_seq(s, f->sandbox_id, &last);
        if (r < 0)
                return r;
        bind_text(&b, 1, f->sandbox_id);
        bind_uint64(&b, 2, last + 1);
        bind_int64(&b, 3, f->caller_uid);
        bind_int64(&b, 4, f->caller_pid);
        bind_text(&b, 5, f->client_name);
        bind_int64(&b, 6, f->port);
        bind_text(&b, 7, f->address);
        bind_int64(&b, 8, f->opened_ms);
        r = stmt_exec(s, &b, "recording a forward");
        if (r < 0)
                return r;
        f->seq = last + 1;
        return 0;
}

int store_forward_finish(struct store *s, const struct store_forward *f) {
        struct binder b = stmt_begin(s, ST_FWD_FINISH);
        int r;

        error_clear(s);
        if (!f || !f->sandbox_id)
                return fail(s, -EINVAL, "recording a forward's end: no sandbox_id");
        r = batch_join(s);
        if (r < 0)
                return r;
        bind_text(&b, 1, f->sandbox_id);
        bind_uint64(&b, 2, f->seq);
        bind_int64(&b, 3, f->closed_ms);
        bind_uint64(&b, 4, f->bytes_in);
        bind_uint64(&b, 5, f->bytes_out);
        bind_text(&b, 6, f->reason);
        r = stmt_exec(s, &b, "recording a forward's end");
        if (r == 0)
                return fail(s, -ENOENT, "no forward %llu in sandbox %s",
                            (unsigned long long)f->seq, f->sandbox_id);
        return r < 0 ? r : 0;
}

int store_forwards_close_open(struct store *s, const char *sandbox_id, int64_t closed_ms,
                              const char *reason) {
        struct binder b = stmt_begin(s, ST_FWD_CLOSE_OPEN);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        bind_text(&b, 1, sandbox_id);
        bind_int64(&b, 2, closed_ms);
        bind_text(&b, 3, reason);
        return stmt_exec(s, &b, "ending the forwards of a gone daemon");
}

/* One forward row copied out of its statement (a client name of at most
 * SBX_CLIENT_NAME_MAX_BYTES, an address literal, a one-line reason). */
struct forward_row {
        struct store_forward f;
        char client_name[SBX_CLIENT_NAME_MAX_BYTES + 1], address[64], reason[256];
        int has_client_name, has_address, has_reason;
};

static void forward_row_load(sqlite3_stmt *st, struct forward_row *r, const char *sandbox_id) {
        memset(r, 0, sizeof(*r));
        r->f.sandbox_id = sandbox_id;
        r->f.seq = (uint64_t)sqlite3_column_int64(st, 0);
        r->f.caller_uid = (uint32_t)sqlite3_column_int64(st, 1);
        r->f.caller_pid = (int32_t)sqlite3_column_int64(st, 2);
        copy_col(st, 3, r->client_name, sizeof(r->client_name), &r->has_client_name);
        r->f.port = (uint32_t)sqlite3_column_int64(st, 4);
        copy_col(st, 5, r->address, sizeof(r->address), &r->has_address);
        r->f.opened_ms = sqlite3_column_int64(st, 6);
        r->f.closed_ms = sqlite3_column_int64(st, 7);
        r->f.bytes_in = (uint64_t)sqlite3_column_int64(st, 8);
        r->f.bytes_out = (uint64_t)sqlite3_column_int64(st, 9);
        copy_col(st, 10, r->reason, sizeof(r->reason), &r->has_reason);
}

int store_forwards(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                   store_forward_cb cb, void *userdata) {
        struct binder b = stmt_begin(s, ST_FWD_HISTORY);
        struct forward_row *rows;
        size_t n = 0, i;
        int rc, r = 0;

        error_clear(s);
        if (!sandbox_id || !cb || limit == 0 || limit > SBX_MAX_HISTORY_LIMIT + 1)
                return fail(s, -EINVAL, "store_forwards: sandbox_id, callback and a limit of "
                                        "1..1001 are required");
        if (after_seq > INT64_MAX)
                return 0;
        rows = malloc(limit * sizeof(*rows));
        if (!rows)
                return fail(s, -ENOMEM, "reading forwards: out of memory");
        bind_text(&b, 1, sandbox_id);
        bind_int64(&b, 2, (int64_t)after_seq);
        bind_int64(&b, 3, limit);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        for (; rc == SQLITE_ROW && n < limit; rc = sqlite3_step(b.st))
                forward_row_load(b.st, &rows[n++], sandbox_id);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = sqlfail(s, rc, "reading forwards");
        stmt_done(b.st);
        /* No statement is active from here on: cb may use the store. */
        for (i = 0; r == 0 && i < n; i++) {
                struct forward_row *w = &rows[i];
                w->f.client_name = w->has_client_name ? w->client_name : NULL;
                w->f.address = w->has_address ? w->address : "";
                w->f.reason = w->has_reason ? w->reason : NULL;
                r = cb(&w->f, userdata);
        }
        free(rows);
        return r != 0 ? r : (int)i;
}

/* ---- file operations ---------------------------------------------------------------- */

int store_fileop_insert(struct store *s, const struct store_fileop *op) {
        struct binder b = stmt_begin(s, ST_FOP_INSERT);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        if (!op || !op->sandbox_id || !op->op || !op->path || !op->result)
                return fail(s, -EINVAL,
                            "store_fileop_insert: sandbox_id, op, path and result "
                            "are required");
        bind_text(&b, 1, op->sandbox_id);
        bind_text(&b, 2, op->op);
        bind_text(&b, 3, op->path);
        bind_uint64(&b, 4, op->bytes);
        bind_text(&b, 5, op->result);
        bind_int64(&b, 6, op->caller_uid);
        bind_int64(&b, 7, op->caller_pid);
        bind_text(&b, 8, op->client_name);
        bind_int64(&b, 9, op->time_ms);
        r = stmt_exec(s, &b, "recording a file operation");
        return r < 0 ? r : 0;
}

int store_fileop_count(struct store *s, const char *sandbox_id) {
        struct binder b = stmt_begin(s, ST_FOP_COUNT);
        int rc, r;

        error_clear(s);
        if (!sandbox_id)
                return fail(s, -EINVAL, "store_fileop_count: no sandbox_id");
        bind_text(&b, 1, sandbox_id);
        rc = b.rc == SQLITE_OK ? sqlite3_step(b.st) : b.rc;
        if (rc == SQLITE_ROW) {
                int64_t n = sqlite3_column_int64(b.st, 0);
                r = n > INT32_MAX ? INT32_MAX : (int)n;
        } else {
                r = sqlfail(s, rc, "counting file operations");
        }
        stmt_done(b.st);
        return r;
}

/* ---- retention ---------------------------------------------------------------------- */

int store_prune(struct store *s, int64_t older_than_ms) {
        struct binder b = stmt_begin(s, ST_PRUNE);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        bind_int64(&b, 1, older_than_ms);
        return stmt_exec(s, &b, "pruning old sandboxes");
}

int store_uid_bind(struct store *s, uint32_t run_uid, uint32_t owner_uid) {
        struct binder b = stmt_begin(s, ST_UID_BIND);
        int r;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        bind_int64(&b, 1, run_uid);
        bind_int64(&b, 2, owner_uid);
        r = stmt_exec(s, &b, "recording the owner of a sandbox uid");
        return r < 0 ? r : 0;
}

int store_uid_owners(struct store *s, store_uid_cb cb, void *userdata) {
        struct binder b = stmt_begin(s, ST_UID_OWNERS);
        int rc = SQLITE_DONE, r = 0;

        error_clear(s);
        r = settle(s);
        if (r < 0)
                return r;
        while (r == 0 && (rc = sqlite3_step(b.st)) == SQLITE_ROW) {
                int64_t uid = sqlite3_column_int64(b.st, 0);
                int64_t owner = sqlite3_column_type(b.st, 1) == SQLITE_NULL
                                        ? -1
                                        : sqlite3_column_int64(b.st, 1);
                if (uid >= 0 && uid <= UINT32_MAX)
                        r = cb((uint32_t)uid, owner, userdata);
        }
        if (r == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE)
                r = sqlfail(s, rc, "reading the owners of sandbox uids");
        stmt_done(b.st);
        return r;
}
