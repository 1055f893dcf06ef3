/* store.h: the durable records of sbxd in SQLite (WAL) at STATE_DIR/sbxd.db.
 *
 * Owns the sqlite3 handle and its prepared statements. Every sandbox, command and file
 * operation is recorded here; a daemon killed at any moment leaves a database that
 * opens and passes integrity_check, and records every write that returned 0 (for the
 * batched command records: every one that was committed, see store_commit). The
 * schema is versioned with PRAGMA user_version and upgraded by ordered migrations.
 *
 * Records are read and written by the rpc and sandbox layers; main() opens and closes
 * the store, and turn.c commits batches and starts checkpoints. Everything runs on the
 * event loop thread but store_checkpoint_run (a thread-pool thread). Functions
 * return 0 (or a count) on success and -errno on failure: -ENOENT no such row (or no
 * such sandbox for a row that refers to one), -EEXIST a constraint was violated, -ENOSPC
 * the disk is full, -ENOMEM out of memory, -EBUSY another connection holds the database
 * locked, -EINVAL a required argument is NULL, -EIO any other SQLite failure
 * (store_last_error() has SQLite's message). The store never logs.
 *
 * The ids, a sandbox's state, a finished command's outcome and a file operation's op,
 * path and result are required (-EINVAL when NULL); any other string may be NULL, is
 * then stored as SQL NULL and read back as NULL. Callbacks run with no SQLite statement
 * active, so they may call any store function on the same store except store_close. */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* The schema version this build writes (PRAGMA user_version after migrations). */
#define STORE_SCHEMA_VERSION 9

/* Opens (creating when absent, mode 0600) the database file at path, sets WAL mode, busy
 * timeout and foreign keys, and migrates the schema to STORE_SCHEMA_VERSION. A database
 * whose user_version is newer than this build's is refused with -EPROTO. *ret is written
 * only on success; on failure store_last_error(NULL) says why. */
int store_open(const char *path, struct store **ret);

/* Closes the database (checkpointing the WAL). Accepts NULL; returns NULL. */
struct store *store_close(struct store *s);

/* SQLite's message for the last failure on s, or "" after success. With s == NULL: the
 * message of the last failed store_open (which has no store to keep it in). */
const char *store_last_error(const struct store *s);

/* Runs PRAGMA integrity_check. Returns 0 when it says "ok", -EIO otherwise. */
int store_integrity_check(struct store *s);

/* ---- sandboxes ---------------------------------------------------------------------- */

struct store_sandbox {
        const char *id;
        uint32_t owner_uid;
        const char *state;          /* "creating", "ready", ..., "lost" */
        int64_t created_ms;         /* Unix time, milliseconds */
        int64_t deadline_ms;
        uint64_t idle_timeout_ms;
        int64_t ended_ms;           /* 0 while live */
        const char *end_reason;     /* NULL while live */
        const void *spec;           /* packed sbx.v1.CreateSandbox with the effective policy */
        size_t spec_len;
        int32_t init_pid;           /* host pid of the sandbox's init (0: none) */
        const char *workspace_dir;  /* host path of /workspace */
        const char *cgroup_path;    /* relative cgroup path of the sandbox ("" if none) */
        uint32_t run_uid;           /* host uid its commands run as */
        uint32_t caller_pid;
        const char *client_name;
};

/* Records a new sandbox. -EEXIST when a sandbox with that id was ever recorded. */
int store_sandbox_insert(struct store *s, const struct store_sandbox *sb);

/* 1 when a sandbox with this id was ever recorded, 0 when not, -errno on failure. */
int store_sandbox_exists(struct store *s, const char *id);

/* Sets state (and, when ended_ms != 0, the end time and reason). -ENOENT: no such id. */
int store_sandbox_set_state(struct store *s, const char *id, const char *state, int64_t ended_ms,
                            const char *end_reason);

/* Sets the init pid recorded for a sandbox. -ENOENT: no such id. */
int store_sandbox_set_init_pid(struct store *s, const char *id, int32_t init_pid);

/* A live sandbox restored (sbxtab.h): its record's state, spec, init_pid, workspace_dir,
 * cgroup_path and run_uid become sb's; its owner, times, creator and commands stay.
 * -ENOENT: no live sandbox of that id. */
int store_sandbox_replace(struct store *s, const struct store_sandbox *sb);

/* Moves the deadline of a sandbox. -ENOENT: no such id. */
int store_sandbox_set_deadline(struct store *s, const char *id, int64_t deadline_ms);

/* Calls cb for each recorded sandbox, newest first, matching: live_only (state
 * creating/ready/terminating) when non-zero, owner_uid when has_owner. At most limit rows
 * (0: no bound). The struct and its strings are valid only during the callback. cb
 * returns 0 to go on, non-zero to stop (that value is returned). */
typedef int (*store_sandbox_cb)(const struct store_sandbox *sb, void *userdata);
int store_sandbox_foreach(struct store *s, int live_only, int has_owner, uint32_t owner_uid,
                          uint32_t limit, store_sandbox_cb cb, void *userdata);

/* Reads one sandbox's record and passes it to cb, and returns what cb returned.
 * -ENOENT: no such id (cb is not called). */
int store_sandbox_get(struct store *s, const char *id, store_sandbox_cb cb, void *userdata);

/* ---- commands ----------------------------------------------------------------------- */

struct store_command {
        const char *sandbox_id;
        const char *command_id;
        const char *const *argv;
        size_t argc;
        const char *cwd;
        uint32_t caller_uid;
        int32_t caller_pid;
        const char *client_name;
        int64_t started_ms;
        /* Milliseconds it waited for a slot before it started (or until it ended, when it
         * never started); 0: it did not wait (and for the records of schemas before 5).
         * Known at the start, so written by store_command_insert and _insert_ended, and
         * by store_command_finish again (give it the same value, or the one known by
         * then); read back by store_history. */
        uint64_t queued_ms;
        /* RunCommand.background (0 for the records of schemas before 6). A start field:
         * written by store_command_insert and _insert_ended, read back by
         * store_history. */
        int background;
        /* It ran on a terminal (RunCommand.tty): a start field, 0 for older records. */
        int tty;
        /* End fields: written by store_command_finish, read back by store_history. */
        int64_t ended_ms;           /* 0 while running */
        const char *outcome;        /* "exited", "signaled", ..., "unknown"; NULL while running */
        int has_exit_code;
        int exit_code;
        int has_signal;
        int signal;
        double duration;
        double cpu_seconds;
        uint64_t peak_memory_bytes;
        uint64_t stdout_bytes;
        uint64_t stderr_bytes;
        int stdout_truncated;
        int stderr_truncated;
        const char *limits_hit;     /* comma-separated, "" for none */
        const char *start_error;    /* NULL unless start_failed */
        uint64_t seq;               /* Its number within the sandbox, from 1 (c-N: N;
                                       migrated records: 1, 2, ... in their order) */
};

/* Command records are batched: store_command_insert and store_command_finish write
 * into an open transaction (opening it when there is none) and return before it is
 * committed; store_commit commits it. Every other write commits the open batch first
 * (a failure of that commit is counted for store_take_lost) and then commits itself.
 * The daemon (turn.c) commits before it sends any reply (so a reply never reports what
 * a crash could still lose) and at most SBX_RECORD_BATCH_MS after a command record was
 * written: one commit serves a command's start and end when it ends quickly, and every
 * command that ends in the same loop iteration. */

/* Commits the open batch of command records, if any. Returns 0, or -errno when the
 * commit failed: the batch is then rolled back and lost (store_last_error says why). */
int store_commit(struct store *s);

/* 1 when a batch of command records is open, not yet committed. */
int store_pending(const struct store *s);

/* Checkpoints off the loop. store_checkpoint_wanted says 1 when the WAL has grown long
 * enough and none is running; the loop then calls store_checkpoint_begin, runs
 * store_checkpoint_run on another thread (it touches nothing else of s, and the loop
 * may go on using s meanwhile, but not close it; it returns how many of the WAL's
 * frames are in the database now, or -errno), and calls store_checkpoint_end with what
 * it returned: NULL, or the text of the failure. A failed checkpoint loses nothing:
 * the WAL keeps the records. store_wal_frames: the WAL's length after the last commit
 * (0 when the loop's connection checkpoints as SQLite does by default). */
int store_checkpoint_wanted(const struct store *s);
void store_checkpoint_begin(struct store *s);
int store_checkpoint_run(struct store *s);
const char *store_checkpoint_end(struct store *s, int r);
int store_wal_frames(const struct store *s);

/* How many batches were lost since the last call without their loss being returned by
 * store_commit (their commit failed inside another write, or an earlier error rolled
 * them back); why gets the last reason. The daemon logs them. */
unsigned store_take_lost(struct store *s, char *why, size_t len);

/* Records a command that is starting (the start fields of c). A command is identified
 * by sandbox_id and seq, which the caller numbers (history is in seq order); command_id
 * is stored beside. -EEXIST: that seq is recorded already; -ENOENT: no sandbox
 * sandbox_id was recorded; -EINVAL: a field is missing or seq is 0. */
int store_command_insert(struct store *s, const struct store_command *c);

/* Records how a command ended (the end fields of c and its queued_ms, found by
 * sandbox_id + seq, with that command_id). -ENOENT: no such command. */
int store_command_finish(struct store *s, const struct store_command *c);

/* Records a command that has already ended, start and end fields in one row: what
 * store_command_insert and store_command_finish together write, with one statement
 * instead of two (the daemon records a command that ends within
 * SBX_RECORD_START_DELAY_MS so). Errors as store_command_insert's. */
int store_command_insert_ended(struct store *s, const struct store_command *c);

/* Marks every command of sandbox_id (NULL: of every sandbox) that has no outcome yet as
 * "unknown", ended at ended_ms. Returns the number of commands marked. */
int store_commands_mark_unknown(struct store *s, const char *sandbox_id, int64_t ended_ms);

/* Calls cb for the commands of sandbox_id with seq > after_seq, oldest first, at most
 * limit of them (0: no bound). Returns the number passed to cb, or -errno. The struct
 * and its strings are valid only during the callback. cb returns 0 to go on, non-zero to
 * stop (that value is returned instead of the count). */
typedef int (*store_command_cb)(const struct store_command *c, void *userdata);
int store_history(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                  store_command_cb cb, void *userdata);

/* ---- connections (NETWORK_ALLOWLIST's proxy, schema 6) ------------------------------ */

/* One connection the proxy allowed or refused (sbx.proto ConnectionRecord). */
struct store_connection {
        const char *sandbox_id;
        uint64_t seq; /* number within the sandbox, from 1, the proxy's */
        int64_t started_ms;
        int64_t ended_ms; /* 0 while open */
        const char *host; /* as asked; may be NULL (a request that named none) */
        uint32_t port;
        const char *address; /* the address connected to or refused; may be NULL */
        int allowed;
        const char *reason;  /* why refused or why it failed; may be NULL */
        const char *method;  /* "CONNECT", "GET", ...; may be NULL */
        uint64_t bytes_sent; /* sandbox -> host */
        uint64_t bytes_received;
};

/* Records a connection (every field of c; ended_ms 0 while it is open). Joins the
 * open batch of records as command records do (store_commit), so that the loop pays no
 * commit per connection. -EEXIST: that seq is recorded already; -ENOENT: no sandbox
 * sandbox_id; -EINVAL: seq 0 or no sandbox_id. */
int store_connection_insert(struct store *s, const struct store_connection *c);

/* Records how an open connection ended: ended_ms, reason, bytes (found by sandbox_id and
 * seq); with ended_ms 0 (and no reason) only its bytes so far, the connection still
 * open. Joins the batch. -ENOENT: no such record. */
int store_connection_finish(struct store *s, const struct store_connection *c);

/* The highest seq recorded for sandbox_id (0: none), after marking every record of it
 * still open as ended at ended_ms with reason (the proxy that had them is gone: a
 * restarted daemon). Returns 0 with *ret_seq, or -errno. */
int store_connections_reset(struct store *s, const char *sandbox_id, int64_t ended_ms,
                            const char *reason, uint64_t *ret_seq);

/* Calls cb for the connections of sandbox_id with seq > after_seq, oldest first, at
 * most limit (0: no bound), as store_history does for commands (the struct is valid
 * during the call only; cb may use the store; non-zero from cb stops and is returned).
 * Returns the number passed to cb, or -errno. */
typedef int (*store_connection_cb)(const struct store_connection *c, void *userdata);
int store_connections(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                      store_connection_cb cb, void *userdata);

/* ---- forwards (OpenPort streams, schema 9) ----------------------------------------- */

/* One stream to a port of a sandbox (sbx.proto ForwardRecord). */
struct store_forward {
        const char *sandbox_id;
        uint64_t seq; /* number within the sandbox, from 1: the store's */
        uint32_t caller_uid;
        int32_t caller_pid;
        const char *client_name; /* may be NULL */
        uint32_t port;
        const char *address; /* "127.0.0.1" or "::1" */
        int64_t opened_ms;
        int64_t closed_ms; /* 0 while open */
        uint64_t bytes_in; /* client -> the sandbox's port */
        uint64_t bytes_out;
        const char *reason; /* how it ended; NULL while open */
};

/* Records a stream just opened (f's sandbox_id, caller, port, address, opened_ms), numbered
 * after the sandbox's last one: f->seq is set. Joins the open batch (store_commit) as
 * command records do. -EINVAL: no sandbox_id or address; -ENOENT: no sandbox. */
int store_forward_insert(struct store *s, struct store_forward *f);

/* Records how a stream ended: closed_ms, bytes each way, reason (found by sandbox_id and
 * seq). Joins the batch. -ENOENT: no such record. */
int store_forward_finish(struct store *s, const struct store_forward *f);

/* Marks every stream of sandbox_id still open as closed at closed_ms with reason (a
 * restarted daemon: the streams went with the previous one). The count, or -errno. */
int store_forwards_close_open(struct store *s, const char *sandbox_id, int64_t closed_ms,
                              const char *reason);

/* Calls cb for the forwards of sandbox_id with seq > after_seq, oldest first, at most
 * limit (1..SBX_MAX_HISTORY_LIMIT + 1: a page and one more, else -EINVAL); the struct is valid during the call
 * only, cb may use the store, and non-zero from cb stops and is returned. Returns the
 * number passed to cb, or -errno. */
typedef int (*store_forward_cb)(const struct store_forward *f, void *userdata);
int store_forwards(struct store *s, const char *sandbox_id, uint64_t after_seq, uint32_t limit,
                   store_forward_cb cb, void *userdata);

/* ---- file operations ---------------------------------------------------------------- */

struct store_fileop {
        const char *sandbox_id;
        const char *op;      /* "read", "write", "list", "stat", "mkdir", "remove" */
        const char *path;
        uint64_t bytes;
        const char *result;  /* "OK" or the status code name */
        uint32_t caller_uid;
        int32_t caller_pid;
        const char *client_name;
        int64_t time_ms;
};

/* Records a file operation. -ENOENT: no sandbox op->sandbox_id was recorded. */
int store_fileop_insert(struct store *s, const struct store_fileop *op);

/* Counts the file operations recorded for sandbox_id. */
int store_fileop_count(struct store *s, const char *sandbox_id);

/* ---- retention ---------------------------------------------------------------------- */

/* Deletes ended sandboxes (and their commands and file operations) that ended before
 * older_than_ms. Returns the number of sandboxes deleted. */
int store_prune(struct store *s, int64_t older_than_ms);

/* ---- the owners of sandbox uids (root mode) ----------------------------------------- */

/* Records that the host uid run_uid is owner_uid's for good (schema 4). -EEXIST when it
 * is recorded already. */
int store_uid_bind(struct store *s, uint32_t run_uid, uint32_t owner_uid);

/* Calls cb for each recorded uid with its owner, or -1 for a uid retired (it served
 * several owners before schema 4). Stops at, and returns, cb's first non-zero result.
 * cb runs with a statement active: it must not call the store. */
typedef int (*store_uid_cb)(uint32_t run_uid, int64_t owner_uid, void *userdata);
int store_uid_owners(struct store *s, store_uid_cb cb, void *userdata);

#endif
