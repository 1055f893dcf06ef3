/* sbx.h: libsbx, the C client library of sbxd.
 *
 * A blocking API with one call per request of the sbx.v1 protocol. Connect with
 * sbx_connect(), call, read results from plain structs, free each result with its own
 * free function, and close with sbx_close().
 *
 * Return values: every call that talks to the daemon returns an `enum sbx_code`: SBX_OK
 * (0) on success, or the typed code of the failure. The daemon's codes come through as
 * they are; a failure of the connection itself (cannot connect, the daemon went away,
 * the per-call timeout passed, a malformed reply) is SBX_UNAVAILABLE or SBX_INTERNAL and
 * sbx_errno() says the errno. SBX_UNAVAILABLE is transient (retry later);
 * SBX_SANDBOX_ENDED is terminal (the sandbox will never serve again: stop, do not
 * retry). sbx_error_message() gives a one-line human message for
 * the last failure on that client ("sandbox 'x' not found; list sandboxes with `sbx
 * list`"). A command that exits non-zero is SBX_OK: its result says how it ended.
 *
 * Threads: an sbx_client may be used by one thread at a time (calls on one client are
 * not synchronised); use one client per thread. Different clients share nothing. The
 * library never logs, never exits, and never installs signal handlers; it ignores
 * SIGPIPE on its socket by using MSG_NOSIGNAL.
 *
 * Memory: strings and arrays inside a result belong to the result and are freed by its
 * free function. Input structs are only read during the call. */

/* Additions to the contract above (libsbx 0.1.0):
 *
 * Strings in results: identifiers and names (ids, command ids, file names, label keys
 * and values, argv words, cwd, client names, daemon and cgroup versions) are never NULL
 * ("" when the daemon sent none). Fields that are optional on the wire (end_reason,
 * root_dir, peak_memory_source, start_error, symlink_target) are NULL when absent.
 * Byte buffers (stdout_data, stderr_data, read data) are never NULL and NUL-terminated.
 *
 * Reconnecting: after a transport failure (SBX_UNAVAILABLE with a non-zero sbx_errno)
 * or a protocol error (SBX_INTERNAL) the connection is closed, because what is still in
 * flight on it can no longer be matched to a request. The next call on the client
 * connects again to the same socket and says Hello again; sandboxes are addressed by ID,
 * so nothing is lost but the call that failed. A client whose sbx_connect failed
 * retries the same way at its next call.
 *
 * Timeouts: sbx_connect waits at most 30 s for the Hello reply while no call timeout is
 * set. With a call timeout set, sbx_exec waits for the call timeout plus the command's
 * timeout plus a 2 s grace (the daemon reports a timeout only once the command has
 * stopped), plus the wait for a slot: queue_timeout_ms when given, else 60 s (the
 * daemon's default --queue-timeout; a daemon set to wait longer needs queue_timeout_ms
 * given, or no call timeout). A call that times out fails with SBX_UNAVAILABLE and
 * sbx_errno() ETIMEDOUT. A request larger than the daemon's frame limit (from Hello)
 * fails with SBX_TOO_LARGE before anything is sent, and the connection stays usable. */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum sbx_code {
        SBX_OK = 0,
        SBX_INVALID_ARGUMENT = 1,
        SBX_NOT_FOUND = 2,
        SBX_ALREADY_EXISTS = 3,
        SBX_PERMISSION_DENIED = 4,
        SBX_RESOURCE_EXHAUSTED = 5,
        SBX_FAILED_PRECONDITION = 6,
        SBX_READ_ONLY = 7,
        SBX_TOO_LARGE = 8,
        /* The daemon cannot be reached (sbx_errno() says why) or cannot serve now:
         * transient, a later call may succeed. */
        SBX_UNAVAILABLE = 9,
        SBX_UNIMPLEMENTED = 10,
        SBX_INTERNAL = 11,
        /* The sandbox has ended (terminated, expired, idle, failed or lost) or is ending:
         * terminal, it will never serve again. Stop, do not retry; sbx_get() says how it
         * ended. (ENDED in sbx.proto.) */
        SBX_SANDBOX_ENDED = 12,
};

/* "OK", "INVALID_ARGUMENT", ..., "SANDBOX_ENDED"; "UNKNOWN" for values outside the enum. */
const char *sbx_code_name(int code);

typedef struct sbx_client sbx_client;

/* Writes the default socket path into buf: $SBX_SOCKET (a path, or an ssh:// URL: see
 * sbx_connect), else /run/sbxd/sbxd.sock for root, else $XDG_RUNTIME_DIR/sbxd/sbxd.sock
 * (or /run/user/UID/sbxd/sbxd.sock); when that does not exist but the caller may use
 * the system daemon's /run/sbxd/sbxd.sock (as a member of group sbxd), that one. Returns
 * 0, or -ENAMETOOLONG when it does not fit. */
int sbx_default_socket_path(char *buf, size_t len);

/* Connects to the daemon at socket_path (NULL: the default) and says Hello with
 * client_name (NULL: "libsbx"). On success *ret is a new client. On failure *ret is
 * still a client (closed to the daemon) so that sbx_error_message() can say why, or NULL
 * when memory ran out; free it with sbx_close().
 *
 * A daemon on another machine: socket_path (or $SBX_SOCKET) may be a URL
 * ssh://[user@]host[:port][/path/to/socket]. The client then starts the system's ssh
 * ($SBX_SSH, default "ssh" on PATH) as
 *     ssh [$SBX_SSH_OPTS] -o BatchMode=yes -T -x -a [-l user] [-p port] -- host \
 *         'sbx dial-stdio [--socket /path/to/socket]'
 * ($SBX_SSH_OPTS split at white space and first, so that its -o options win; the remote
 * program is $SBX_SSH_REMOTE_SBX, default "sbx"), with a socketpair as its stdin and
 * stdout and in a process group of its own, and speaks the protocol over the pipe;
 * every call works as over a Unix socket. The daemon sees the ssh user as the peer. A
 * URL that does not parse is SBX_INVALID_ARGUMENT; a failure of ssh (unreachable host,
 * host key, authentication, no sbx or no daemon on the remote side, text from the
 * remote shell) is SBX_UNAVAILABLE with ssh's exit status and last stderr line in the
 * message. The client owns that ssh process: it is reaped when the connection ends,
 * and sbx_close() gives it 1 s to end by itself before it terminates it (by its pid).
 * A SIGCHLD handler of the application that reaps every child loses only ssh's exit
 * status for the message. */
enum sbx_code sbx_connect(const char *socket_path, const char *client_name, sbx_client **ret);

/* Closes the connection and frees the client. Accepts NULL. */
void sbx_close(sbx_client *c);

/* Per-call timeout for waiting on the daemon, in milliseconds (0: wait forever).
 * Default 0. RunCommand waits additionally for the command's own timeout. */
void sbx_set_call_timeout_ms(sbx_client *c, uint64_t ms);

/* The message and errno of the last failed call on c (empty string / 0 after success). */
const char *sbx_error_message(const sbx_client *c);
int sbx_errno(const sbx_client *c);

/* ---- Hello ------------------------------------------------------------------------ */

struct sbx_hello {
        uint32_t protocol_version;
        char *daemon_version;
        char *cgroup_version; /* "v2", "v1", "none" */
        int user_namespaces;
        int rootless;
        int seccomp;
        uint32_t landlock_abi;
        int openat2;
        uint64_t max_frame_bytes;
        uint32_t peer_uid;
        char **implemented;
        size_t n_implemented;
        /* A root daemon's sandbox uids (count 0: a rootless daemon, or one from before
         * ranges): first .. first + count - 1, reserved host-wide by the file
         * uid_reservation; uid_origin "recorded" (the state directory's range from an
         * earlier start), "picked" (the first free one, at this start) or "flag"
         * (--uid-base). Both strings NULL when count is 0. */
        uint32_t sandbox_uid_first;
        uint32_t sandbox_uid_count;
        char *uid_reservation;
        char *uid_origin;
};
/* The daemon's reply to the Hello sent at connect time (a copy owned by the caller). */
enum sbx_code sbx_hello(sbx_client *c, struct sbx_hello **ret);
void sbx_hello_free(struct sbx_hello *h);

/* ---- Sandboxes -------------------------------------------------------------------- */

/* ALLOWLIST: no network but the daemon's filtering proxy (HTTP_PROXY and friends in
 * every command's environment), which connects only to allowed_hosts and allowed_cidrs
 * and records every connection (sbx_connections). */
enum sbx_network { SBX_NETWORK_NONE = 0, SBX_NETWORK_FULL = 1, SBX_NETWORK_ALLOWLIST = 2 };

enum sbx_state {
        SBX_STATE_UNSPECIFIED = 0,
        SBX_STATE_CREATING = 1,
        SBX_STATE_READY = 2,
        SBX_STATE_TERMINATING = 3,
        SBX_STATE_TERMINATED = 4,
        SBX_STATE_EXPIRED = 5,
        SBX_STATE_FAILED = 6,
        SBX_STATE_LOST = 7,
};
/* "creating", "ready", ... */
const char *sbx_state_name(int state);

/* Bits of sbx_limits.set: which limits are given. */
enum {
        SBX_LIMIT_MEMORY = 1u << 0,
        SBX_LIMIT_CPU_SECONDS = 1u << 1,
        SBX_LIMIT_CPU_PERCENT = 1u << 2,
        SBX_LIMIT_PROCESSES = 1u << 3,
        SBX_LIMIT_FILE_SIZE = 1u << 4,
        SBX_LIMIT_OPEN_FILES = 1u << 5,
        SBX_LIMIT_CORE_DUMPS = 1u << 6,
        SBX_LIMIT_TMP = 1u << 7,
        SBX_LIMIT_COMMANDS = 1u << 8,
        SBX_LIMIT_QUEUED_COMMANDS = 1u << 9,
        SBX_LIMIT_DISK = 1u << 10,
        SBX_LIMIT_DISK_INODES = 1u << 11,
};

struct sbx_limits {
        unsigned set; /* SBX_LIMIT_* bits of the fields that are given */
        uint64_t memory_bytes;
        double cpu_seconds;
        uint32_t cpu_percent;
        uint32_t processes;
        uint64_t file_size_bytes;
        uint32_t open_files;
        int core_dumps;
        uint64_t tmp_bytes;
        /* Commands running at once in the sandbox; more wait for a slot (see
         * sbx_exec_opts.queue_timeout_ms). Default and maximum: sbxd --max-commands. */
        uint32_t commands;
        /* Commands waiting for a slot at once; past it sbx_exec is SBX_RESOURCE_EXHAUSTED.
         * Default and maximum: sbxd --max-queued. */
        uint32_t queued_commands;
        /* Size of /workspace in bytes, and its files (inodes): past them a write there
         * fails with ENOSPC inside (limits_hit "disk"). Default: sbxd --default-disk. */
        uint64_t disk_bytes;
        uint64_t disk_inodes;
};

struct sbx_strv {
        char **v;
        size_t n;
};

struct sbx_policy {
        struct sbx_strv writable_paths;
        struct sbx_strv denied_read_paths;
        struct sbx_strv denied_write_paths;
        enum sbx_network network;
        int protect_defaults;
        struct sbx_strv inherit_environment;
        int inherit_environment_set; /* use inherit_environment even when empty */
        struct sbx_limits limits;
        char *root_dir; /* NULL: the host's / */
        /* SBX_NETWORK_ALLOWLIST: "pypi.org", "*.npmjs.org", optionally ":PORT" (default
         * 80 and 443), and address ranges ("203.0.113.0/24", "2001:db8::1"). */
        struct sbx_strv allowed_hosts;
        struct sbx_strv allowed_cidrs;
};

/* Fills p with the defaults: network none, protect_defaults on, nothing writable. */
void sbx_policy_init(struct sbx_policy *p);

/* The two ready-made policies of the agent frameworks. read_only: nothing writable but
 * the sandbox's /workspace and /tmp (the defaults; network none unless full). */
void sbx_policy_read_only(struct sbx_policy *p, enum sbx_network network);

/* workspace_write: the defaults plus the n host directories in roots, writable at the
 * same paths. The strings are referenced, not copied: they must outlive the sbx_create
 * call that uses p. */
void sbx_policy_workspace_write(struct sbx_policy *p, const char *const *roots, size_t n,
                                enum sbx_network network);

struct sbx_label {
        char *key;
        char *value;
};

struct sbx_create_opts {
        const char *id;             /* NULL: the daemon generates one */
        struct sbx_policy policy;   /* start from sbx_policy_init() */
        uint64_t timeout_ms;        /* 0: the daemon's default lifetime (a day) */
        /* End the sandbox after this long with no request and no running command. 0: the
         * daemon's default (an hour, sbxd --default-idle-timeout); SBX_IDLE_TIMEOUT_NONE:
         * no idle timeout. */
        uint64_t idle_timeout_ms;
        const struct sbx_label *labels;
        size_t n_labels;
        const char *const *env;     /* "K=V" */
        size_t n_env;
        const uint32_t *share_uids;
        size_t n_share_uids;
        const uint32_t *share_gids;
        size_t n_share_gids;
        int keep_workspace;
        /* Start from this container image of the caller's (docs/images.md):
         * "python:3.12-slim", "host:5000/app:v1", "name@sha256:...". NULL: the host's root
         * (or policy.root_dir). */
        const char *image;
};

/* sbx_create_opts.idle_timeout_ms: no idle timeout at all (the sandbox lives to its
 * deadline however long it sits unused). */
#define SBX_IDLE_TIMEOUT_NONE UINT64_MAX

/* Fills o with the defaults (sbx_policy_init for the policy, everything else zero). */
void sbx_create_opts_init(struct sbx_create_opts *o);

struct sbx_enforcement {
        char *limit;       /* "memory", "cpu_seconds", ... */
        char *enforcement; /* "cgroup_v2", "cgroup_v1", "rlimit", "project_quota",
                            * "filesystem_image", "tmpfs_size", "none" */
};

enum sbx_command_state {
        SBX_COMMAND_STATE_UNSPECIFIED = 0,
        SBX_COMMAND_QUEUED = 1, /* waiting for a slot */
        SBX_COMMAND_RUNNING = 2,
        SBX_COMMAND_ENDED = 3, /* a background command that ended; outcome says how */
};
/* "queued", "running", "ended"; "unknown" for other values. */
const char *sbx_command_state_name(int state);

struct sbx_command_info {
        char *command_id;
        struct sbx_strv argv;
        enum sbx_command_state state;
        int background;
        uint32_t caller_uid;
        int64_t started_unix_ms; /* 0 while queued */
        int64_t ended_unix_ms;   /* SBX_COMMAND_ENDED only */
        int outcome;             /* enum sbx_outcome, SBX_COMMAND_ENDED only */
        int has_exit_code;
        int exit_code;
        int tty; /* it runs (ran) on a terminal (sbx_exec_opts.tty) */
};

struct sbx_sandbox {
        char *id;
        enum sbx_state state;
        uint32_t owner_uid;
        struct sbx_label *labels;
        size_t n_labels;
        int64_t created_unix_ms;
        int64_t deadline_unix_ms;
        uint64_t idle_timeout_ms;
        int64_t ended_unix_ms;
        char *end_reason; /* NULL while live */
        struct sbx_policy policy;
        int isolated;
        struct sbx_strv warnings;
        struct sbx_enforcement *enforcement;
        size_t n_enforcement;
        uint32_t running_commands;
        uint64_t commands_run;
        uint32_t *share_uids;
        size_t n_share_uids;
        uint32_t *share_gids;
        size_t n_share_gids;
        uint32_t queued_commands; /* commands waiting for a slot */
        /* Its commands running or waiting, and its background commands that ended and
         * can still be attached to (sbx_attach), oldest first (live sandboxes only). */
        struct sbx_command_info *commands;
        size_t n_commands;
        char *image;        /* sbx_create_opts.image as given; NULL: none */
        char *image_digest; /* the manifest it resolved to (live sandboxes); NULL: none */
};

enum sbx_code sbx_create(sbx_client *c, const struct sbx_create_opts *o, struct sbx_sandbox **ret);
enum sbx_code sbx_get(sbx_client *c, const char *id, struct sbx_sandbox **ret);
/* Ends the sandbox; *ret (may be NULL to skip) is its final state. */
enum sbx_code sbx_terminate(sbx_client *c, const char *id, struct sbx_sandbox **ret);
enum sbx_code sbx_set_timeout(sbx_client *c, const char *id, uint64_t timeout_ms,
                              struct sbx_sandbox **ret);
void sbx_sandbox_free(struct sbx_sandbox *s);

struct sbx_list_opts {
        const struct sbx_label *labels;
        size_t n_labels;
        const enum sbx_state *states;
        size_t n_states;
        int has_owner_uid;
        uint32_t owner_uid;
        int include_ended;
        uint32_t limit; /* 0: the daemon's default */
};

struct sbx_sandbox_list {
        struct sbx_sandbox **v;
        size_t n;
        int truncated;
};

/* opts may be NULL: live sandboxes visible to the caller. */
enum sbx_code sbx_list(sbx_client *c, const struct sbx_list_opts *opts, struct sbx_sandbox_list **ret);
void sbx_sandbox_list_free(struct sbx_sandbox_list *l);

/* ---- Commands --------------------------------------------------------------------- */

enum sbx_outcome {
        SBX_OUTCOME_UNSPECIFIED = 0,
        SBX_OUTCOME_EXITED = 1,
        SBX_OUTCOME_SIGNALED = 2,
        SBX_OUTCOME_TIMED_OUT = 3,
        SBX_OUTCOME_OUT_OF_MEMORY = 4,
        SBX_OUTCOME_CANCELLED = 5,
        SBX_OUTCOME_SANDBOX_ENDED = 6,
        SBX_OUTCOME_START_FAILED = 7,
        SBX_OUTCOME_UNKNOWN = 8,
        /* Only in history records (sbx_history) and in the result of sbx_attach without
         * follow: the command has not ended yet (its ended_unix_ms is 0). */
        SBX_OUTCOME_RUNNING = 9,
        /* It waited for a slot longer than its queue timeout and never ran (queued_ms
         * says how long; duration is 0). A command cancelled while it waits is CANCELLED,
         * one whose sandbox ends while it waits SANDBOX_ENDED. */
        SBX_OUTCOME_QUEUE_TIMEOUT = 10,
};
/* "exited", "signaled", "timed_out", ..., "running", "queue_timeout"; "unknown" for
 * other values. */
const char *sbx_outcome_name(int outcome);

enum sbx_stream { SBX_STDOUT = 1, SBX_STDERR = 2 };

/* Called for each chunk of output in streaming mode, in order per stream. */
typedef void (*sbx_output_cb)(void *userdata, enum sbx_stream stream, uint64_t offset,
                              const void *data, size_t len);

/* Called once when the command has started, with its ID ("c-N"; valid during the call:
 * copy it), before any output: from then on another thread or process can cancel it or
 * send it a signal (sbx_cancel, sbx_signal) on a client of its own. */
typedef void (*sbx_started_cb)(void *userdata, const char *command_id);

/* Called when the command waits for a slot (the sandbox runs its maximum of commands at
 * once, or the caller's uid does), with its ID (valid during the call: copy it) and how
 * many commands of the sandbox wait before it; before on_started. From then on
 * sbx_cancel on a client of its own ends the wait (the command never runs; its result
 * says CANCELLED). May be called again when the daemon tells a new position. */
typedef void (*sbx_queued_cb)(void *userdata, const char *command_id, uint32_t ahead);

struct sbx_exec_opts {
        const char *const *argv;  /* program and arguments; exclusive with shell */
        size_t argc;
        const char *shell;        /* run as /bin/sh -c SHELL */
        const char *cwd;          /* NULL: /workspace */
        const char *const *env;   /* "K=V" overlaid on the sandbox's environment */
        size_t n_env;
        const void *stdin_data;
        size_t stdin_len;
        uint64_t timeout_ms;      /* 0: 60000 (the library's default) */
        /* The most of each stream kept (past it, the tail). 0: the daemon's default
         * (1 MiB); at most 64 MiB (SBX_INVALID_ARGUMENT above, before anything runs). */
        uint64_t max_stdout_bytes;
        uint64_t max_stderr_bytes;
        sbx_output_cb on_output;  /* non-NULL: stream output to this callback */
        void *userdata;
        /* Non-zero: after stdin_data, feed the command what is read from stdin_fd (a
         * pipe, file or terminal; read while the call waits) until end of file, then
         * close its stdin. Without on_output the output is still collected into the
         * result (the tail past max_stdout_bytes / max_stderr_bytes). */
        int stdin_stream;
        int stdin_fd;
        /* Non-NULL: called with the command's ID as soon as it has started, on the thread
         * that called sbx_exec and before any on_output (with userdata). The command is
         * then run in streaming mode; without on_output its output is still collected
         * into the result (the tail past max_stdout_bytes / max_stderr_bytes). Not called
         * for a command that never started (the result says START_FAILED) nor when the
         * call fails before the daemon took the command. */
        sbx_started_cb on_started;
        /* How long the command may wait for a slot when the sandbox (or the caller's uid)
         * runs its maximum of commands at once, in milliseconds; used only when
         * has_queue_timeout is non-zero. Without it, the daemon's default (sbxd
         * --queue-timeout, 60 s); 0: never wait (over the cap sbx_exec is
         * SBX_RESOURCE_EXHAUSTED at once). A command still waiting at this bound never runs: its
         * result says SBX_OUTCOME_QUEUE_TIMEOUT. The command's own timeout_ms counts from
         * its start, not from the request. Otherwise only a full queue is
         * SBX_RESOURCE_EXHAUSTED. */
        int has_queue_timeout;
        uint64_t queue_timeout_ms;
        /* Non-NULL: called (with userdata) when the command waits for a slot, on the
         * thread that called sbx_exec. The command is then run in streaming mode, as for
         * on_started. Not called for a command that starts at once. */
        sbx_queued_cb on_queued;
        /* sbx_exec_background only: timeout_ms 0 means no timeout at all (the command runs
         * until it exits or the sandbox ends) instead of the library's default. */
        int no_timeout;
        /* Non-zero: run the command on a pseudo-terminal of the sandbox's own devpts: its
         * stdin, stdout and stderr are the terminal, everything it prints comes as stdout
         * (with the terminal's \r\n), and the end of stdin_data or of stdin_fd is the
         * terminal's end-of-file character (^D). rows x cols its size (0: 24 x 80; at most
         * 1000 each, else SBX_INVALID_ARGUMENT; given without tty, SBX_INVALID_ARGUMENT
         * too); sbx_resize changes it. */
        int tty;
        uint32_t rows;
        uint32_t cols;
        /* A sandbox made from an image: run as this user of the image ("NAME", "UID" or
         * "UID:GID"; "root" or "0" is root of the sandbox's own namespace). NULL: the
         * image's default user. */
        const char *user;
};

void sbx_exec_opts_init(struct sbx_exec_opts *o);

struct sbx_result {
        char *command_id;
        char *sandbox_id;
        enum sbx_outcome outcome;
        int has_exit_code;
        int exit_code;
        int has_signal;
        int signal;
        int timed_out;
        uint8_t *stdout_data; /* NUL-terminated for convenience; stdout_len excludes the NUL */
        size_t stdout_len;
        uint8_t *stderr_data;
        size_t stderr_len;
        int stdout_truncated;
        int stderr_truncated;
        uint64_t stdout_bytes;
        uint64_t stderr_bytes;
        double duration;
        int isolated;
        struct sbx_strv warnings;
        double cpu_seconds;
        uint64_t peak_memory_bytes;
        char *peak_memory_source;
        struct sbx_strv limits_hit;
        struct sbx_enforcement *enforcement;
        size_t n_enforcement;
        char *start_error;
        int start_errno;
        /* The sandbox's owner: not the caller's uid when it was shared with the caller
         * (its owner sees and can change what is run and written there). */
        int has_owner_uid;
        uint32_t owner_uid;
        /* Milliseconds it waited for a slot before it started (or until it ended, when it
         * never started: QUEUE_TIMEOUT, or CANCELLED or SANDBOX_ENDED while it waited); 0
         * when it did not wait. */
        uint64_t queued_ms;
        /* The command's own timeout in milliseconds, as it ran (has_timeout_ms: the
         * daemon said; an older one does not); 0: none (a background command started
         * with no_timeout). What sbx_attach tells of a command another client started. */
        int has_timeout_ms;
        uint64_t timeout_ms;
};

/* Runs a command in sandbox id and waits for its result. */
/* On SBX_OK *ret is the result; with on_output set, every streamed chunk has been
 * delivered to it, in order, before sbx_exec returns. A result comes back whatever its
 * output's size (one larger than the daemon's frame limit arrives in pieces, which the
 * library puts together). A command that never started
 * usually comes back as SBX_OK with outcome SBX_OUTCOME_START_FAILED; when the daemon
 * instead answers with a failure status *and* a result (the schema allows it for
 * RunCommand), that status is returned and *ret is set as well: free it. In every other
 * failure *ret is NULL. */
enum sbx_code sbx_exec(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                       struct sbx_result **ret);
void sbx_result_free(struct sbx_result *r);

/* What sbx_exec_background answers: the command's ID, and whether it waits for a slot
 * (queued, with ahead commands before it), or, when it never started (a missing
 * program: START_FAILED, or the sandbox ended while it started), its result. */
struct sbx_background {
        char *command_id;
        int queued;
        uint32_t ahead;
        struct sbx_result *result; /* non-NULL: it never ran, or ended at once */
};

/* Starts a command in the background (RunCommand.background): it outlives this call and
 * this client, and answers as soon as it has started (or waits for a slot). Its output is
 * kept (the tail within max_stdout_bytes / max_stderr_bytes) for sbx_attach from any
 * client that may use the sandbox; sbx_send_input (with stdin_stream), sbx_cancel and
 * sbx_signal work on it from any such client. Its timeout_ms still applies (o->no_timeout:
 * none, it runs until it exits or the sandbox ends). on_output, on_started, on_queued and
 * stdin_fd are not used (stdin_stream only keeps its stdin open for sbx_send_input). The
 * sandbox keeps the last 16 ended background commands for sbx_attach. */
enum sbx_code sbx_exec_background(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                                  struct sbx_background **ret);
void sbx_background_free(struct sbx_background *b);

struct sbx_attach_opts {
        const char *command_id;
        /* 0: the output kept so far, then the result at once (outcome SBX_OUTCOME_RUNNING
         * while the command has not ended). Non-zero: then what it prints, until it ends,
         * and its final result. */
        int follow;
        uint64_t stdout_offset; /* send only output from these offsets on */
        uint64_t stderr_offset;
        /* Non-NULL: each chunk, in order per stream (offsets count everything the stream
         * produced: a gap means bytes no longer kept). NULL: the output is collected into
         * the result (at most max_output_bytes per stream, the tail; 0: 64 MiB). */
        sbx_output_cb on_output;
        void *userdata;
        uint64_t max_output_bytes;
        /* With follow: how long to wait for the end, in milliseconds (0: as long as it
         * takes). Past it the command goes on, and sbx_attach answers as without follow
         * (its kept output and SBX_OUTCOME_RUNNING) when the output is collected, or with
         * on_output SBX_UNAVAILABLE with sbx_errno() ETIMEDOUT (the connection is closed;
         * the next call makes a new one). */
        uint64_t wait_ms;
};

/* Attaches to a command of sandbox id (a background one, running or ended and still
 * kept, or any running one), from any client that may use the sandbox. On SBX_OK *ret
 * is its result (outcome SBX_OUTCOME_RUNNING when it has not ended), with the output
 * collected when o->on_output is NULL. SBX_NOT_FOUND for a command it does not know
 * (or a sandbox the caller may not use). An attach that ends never stops the command. */
enum sbx_code sbx_attach(sbx_client *c, const char *id, const struct sbx_attach_opts *o,
                         struct sbx_result **ret);

/* Writes data to the stdin of a running command started with stdin_stream (eof: then
 * close it), from any client that may use the sandbox. SBX_FAILED_PRECONDITION when
 * its stdin is closed, SBX_NOT_FOUND when it is not running. */
enum sbx_code sbx_send_input(sbx_client *c, const char *id, const char *command_id,
                             const void *data, size_t len, int eof);

/* Asks the daemon to kill a running command (its process group gets SIGCONT and
 * SIGKILL, and every process still in its cgroup); its result, reported once it has
 * verifiably stopped, becomes "cancelled". SBX_NOT_FOUND when it is not running. */
enum sbx_code sbx_cancel(sbx_client *c, const char *id, const char *command_id);

/* Sends signo to the process group of a running command, as a terminal's Ctrl-C does
 * (SIGINT): the command may catch it, and its result says how it then ended (signaled,
 * or exited with the code its handler chose). Allowed: SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGUSR2, and SIGKILL, which is sbx_cancel (result "cancelled");
 * anything else is SBX_INVALID_ARGUMENT. SBX_OK too when the command has just exited;
 * SBX_NOT_FOUND when it is unknown or finished.
 *
 * The command ID comes from on_started (struct sbx_exec_opts). An sbx_client serves one
 * thread at a time: while sbx_exec waits on one client, signal through another one
 * (sbx_connect again, from another thread or a signal-handling loop). */
enum sbx_code sbx_signal(sbx_client *c, const char *id, const char *command_id, int signo);

/* Resizes the terminal of a running command started with tty (struct sbx_exec_opts) to
 * rows x cols (1 to 1000 each, else SBX_INVALID_ARGUMENT); its foreground process group
 * gets SIGWINCH. SBX_FAILED_PRECONDITION for a command without a terminal, SBX_NOT_FOUND
 * when it is unknown or finished. As for sbx_signal, the command ID comes from on_started,
 * and the call goes through another client than the one sbx_exec waits on. */
enum sbx_code sbx_resize(sbx_client *c, const char *id, const char *command_id, uint32_t rows,
                         uint32_t cols);

/* ---- Files ------------------------------------------------------------------------ */

struct sbx_read_result {
        uint8_t *data;
        size_t len;
        uint64_t size;
        uint64_t next_offset;
        int eof;
};
/* limit 0: the whole rest of the file (the daemon refuses files over max_read_bytes). */
enum sbx_code sbx_read(sbx_client *c, const char *id, const char *path, uint64_t offset,
                       uint64_t limit, struct sbx_read_result **ret);
void sbx_read_result_free(struct sbx_read_result *r);

enum { SBX_WRITE_CREATE_PARENTS = 1u << 0, SBX_WRITE_APPEND = 1u << 1 };
/* mode 0: 0644. */
enum sbx_code sbx_write(sbx_client *c, const char *id, const char *path, const void *data,
                        size_t len, uint32_t mode, unsigned flags);

enum sbx_file_type {
        SBX_FILE_UNKNOWN = 0,
        SBX_FILE_REGULAR = 1,
        SBX_FILE_DIRECTORY = 2,
        SBX_FILE_SYMLINK = 3,
        SBX_FILE_FIFO = 4,
        SBX_FILE_SOCKET = 5,
        SBX_FILE_CHAR_DEVICE = 6,
        SBX_FILE_BLOCK_DEVICE = 7,
};

struct sbx_file_info {
        char *name;
        enum sbx_file_type type;
        uint64_t size;
        uint32_t mode;
        int64_t mtime_unix_ms;
        int is_dir;
        char *symlink_target;
};

struct sbx_dir_list {
        struct sbx_file_info *v;
        size_t n;
        int truncated;
};
/* limit 0: the daemon's default. */
enum sbx_code sbx_list_dir(sbx_client *c, const char *id, const char *path, uint32_t limit,
                           struct sbx_dir_list **ret);
void sbx_dir_list_free(struct sbx_dir_list *l);

enum sbx_code sbx_stat(sbx_client *c, const char *id, const char *path, struct sbx_file_info **ret);
void sbx_file_info_free(struct sbx_file_info *f);

enum sbx_code sbx_mkdir(sbx_client *c, const char *id, const char *path, uint32_t mode, int parents);
enum sbx_code sbx_remove(sbx_client *c, const char *id, const char *path, int recursive);

/* ---- History ---------------------------------------------------------------------- */

struct sbx_command_record {
        uint64_t seq;           /* its number within the sandbox, in order: c-N has seq N
                                   (older records were renumbered 1, 2, ... at an upgrade) */
        char *command_id;
        struct sbx_strv argv;
        char *cwd;
        uint32_t caller_uid;
        int32_t caller_pid;
        char *client_name;
        int64_t started_unix_ms;
        int64_t ended_unix_ms; /* 0 while running */
        enum sbx_outcome outcome;
        int has_exit_code;
        int exit_code;
        int has_signal;
        int signal;
        double duration;
        uint64_t peak_memory_bytes;
        uint64_t stdout_bytes;
        uint64_t stderr_bytes;
        int stdout_truncated;
        int stderr_truncated;
        uint64_t queued_ms; /* as sbx_result.queued_ms */
        int background;     /* started with sbx_exec_background */
        int tty;            /* it ran on a terminal (sbx_exec_opts.tty) */
};

struct sbx_history {
        struct sbx_command_record *v;
        size_t n;
        uint64_t next_after_seq;
        int truncated;
};

/* Commands of sandbox id from the records, oldest first, after seq after_seq. */
enum sbx_code sbx_history(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                          struct sbx_history **ret);
void sbx_history_free(struct sbx_history *h);

/* One connection an allowlist sandbox's proxy allowed or refused (its records). */
struct sbx_connection_record {
        uint64_t seq;
        int64_t started_unix_ms;
        int64_t ended_unix_ms; /* 0 while open */
        char *host;            /* as the sandbox asked; NULL when it named none */
        uint32_t port;
        char *address; /* the address connected to or refused; may be NULL */
        int allowed;
        char *reason;        /* why refused or why it failed; may be NULL */
        char *method;        /* "CONNECT", "GET", ...; may be NULL */
        uint64_t bytes_sent; /* sandbox -> host */
        uint64_t bytes_received;
};

struct sbx_connections {
        struct sbx_connection_record *v;
        size_t n;
        uint64_t next_after_seq;
        int truncated;
};

/* Connections of sandbox id's proxy from the records (GetHistory kind
 * HISTORY_CONNECTIONS), oldest first, after seq after_seq; limit 0: the daemon's
 * default page (100). */
enum sbx_code sbx_connections(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                              struct sbx_connections **ret);
void sbx_connections_free(struct sbx_connections *h);

/* One stream to a sandbox's port (sbx_open_port, `sbx port-forward`; its records). */
struct sbx_forward_record {
        uint64_t seq;
        uint32_t caller_uid; /* who opened it */
        int32_t caller_pid;
        char *client_name;     /* may be NULL */
        uint32_t port;         /* the sandbox's port */
        char *address;         /* "127.0.0.1" or "::1"; may be NULL */
        int64_t opened_unix_ms;
        int64_t closed_unix_ms; /* 0 while open */
        uint64_t bytes_in;      /* client -> the sandbox's port */
        uint64_t bytes_out;     /* the sandbox's port -> client */
        char *reason;           /* how it ended; may be NULL */
};

struct sbx_forwards {
        struct sbx_forward_record *v;
        size_t n;
        uint64_t next_after_seq;
        int truncated;
};

/* Streams to sandbox id's ports from the records (GetHistory kind HISTORY_FORWARDS),
 * oldest first, after seq after_seq; limit 0: the daemon's default page (100). */
enum sbx_code sbx_forwards(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                           struct sbx_forwards **ret);
void sbx_forwards_free(struct sbx_forwards *h);

/* ---- Images (docs/images.md) -------------------------------------------------------- */

/* An image's defaults for processes and its platform (sbx_image_inspect). Strings may
 * be NULL when the image sets none. */
struct sbx_image_config {
        struct sbx_strv env;
        struct sbx_strv entrypoint;
        struct sbx_strv cmd;
        char *working_dir;
        char *user;
        char *os;
        char *architecture;
        char *variant;
        struct sbx_label *labels; /* config.Labels by key (a snapshot's: docs/snapshots.md) */
        size_t n_labels;
};

/* One of the caller's images. */
struct sbx_image {
        struct sbx_strv names; /* the caller's names of it, canonical (docker.io/library/...) */
        char *digest;          /* its manifest digest "sha256:...", its id */
        uint64_t size_bytes;   /* on disk: its layers (shared ones too) and blobs */
        uint64_t data_bytes;   /* file data of its layers */
        uint32_t sandboxes;    /* the caller's sandboxes (own or shared) using it now */
        int64_t created_unix_ms;
        int64_t last_used_unix_ms;
        struct sbx_strv layers;          /* diff ids, lowest first */
        struct sbx_image_config *config; /* sbx_image_inspect only; NULL otherwise */
        uint64_t downloaded_bytes;       /* sbx_image_pull: bytes this pull fetched */
};

struct sbx_image_list {
        struct sbx_image *v;
        size_t n;
};

/* What sbx_image_remove and sbx_image_prune removed. */
struct sbx_removed_images {
        struct sbx_strv names;
        uint64_t freed_bytes;
};

/* How far a pull is: one layer (phase "download"), or the unpacking into the store
 * (phase "unpack": the other fields are 0). Valid during the callback only. */
struct sbx_image_progress {
        const char *phase;
        const char *digest;
        uint32_t index, count;
        uint64_t done_bytes, total_bytes;
        int reused; /* found locally, not downloaded */
};
typedef void (*sbx_image_progress_cb)(void *userdata, const struct sbx_image_progress *p);

/* Credentials for a private registry, for one pull (the daemon never writes them to
 * disk): a username and password, or a bearer token. */
struct sbx_registry_auth {
        const char *username;
        const char *password;
        const char *token;
};

struct sbx_pull_opts {
        const struct sbx_registry_auth *auth; /* NULL: anonymous */
        sbx_image_progress_cb on_progress;    /* NULL: no progress asked for */
        void *userdata;
};

/* Pulls (or imports) source for the caller: a registry reference (python:3.12-slim,
 * host:5000/app:v1, name@sha256:...) or a local source read with the caller's rights
 * (oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE, absolute paths). o may be NULL.
 * The call waits for the pull (the call timeout applies: 0 waits as long as the daemon
 * pulls). *ret: the image (sbx_image_free). Codes as PullImage's in sbx.proto. */
enum sbx_code sbx_image_pull(sbx_client *c, const char *source, const struct sbx_pull_opts *o,
                             struct sbx_image **ret);
/* The caller's images, oldest first. */
enum sbx_code sbx_image_list(sbx_client *c, struct sbx_image_list **ret);
/* The image name (a name as sbx_image_list gives it, as pulled, or a digest) with its
 * config. SBX_NOT_FOUND for a name the caller has not pulled. */
enum sbx_code sbx_image_inspect(sbx_client *c, const char *name, struct sbx_image **ret);
/* Removes the caller's name for an image (a digest: all their names for it); the image
 * goes when no name is left. SBX_FAILED_PRECONDITION when a sandbox uses it. ret may be
 * NULL. */
enum sbx_code sbx_image_remove(sbx_client *c, const char *name, struct sbx_removed_images **ret);
/* Removes every image of the caller's that no sandbox uses. ret may be NULL. */
enum sbx_code sbx_image_prune(sbx_client *c, struct sbx_removed_images **ret);
/* Captures sandbox id's files (its writable root and /workspace) as an image of its
 * owner's named name (NULL: localhost/ID:UNIXMS), its processes frozen meanwhile; a
 * sandbox made from it starts with those files (docs/snapshots.md). Only a sandbox made
 * from an image. *ret: the snapshot (sbx_image_free). */
enum sbx_code sbx_snapshot(sbx_client *c, const char *id, const char *name,
                           struct sbx_image **ret);

/* Puts sandbox id's files back to image's (a snapshot's name or digest, one the caller
 * and the sandbox's owner both have; docs/snapshots.md): its processes are ended (its
 * commands end as killed) and its root and /workspace are the image's; its ID, owner,
 * policy, labels, shares, deadline and records stay. A new sandbox is set up from the
 * image first: a failure leaves the sandbox as it was. *ret (may be NULL): the restored
 * sandbox (sbx_sandbox_free). */
enum sbx_code sbx_restore(sbx_client *c, const char *id, const char *image,
                          struct sbx_sandbox **ret);

/* Writes the image name (a name of the caller's, or a digest) to fd as an OCI archive
 * (what `skopeo copy oci-archive:FILE` and `podman load` read; docs/snapshots.md), from
 * fd's offset. The call timeout applies to each chunk's wait. *ret (may be NULL): the
 * image (sbx_image_free). */
enum sbx_code sbx_image_export(sbx_client *c, const char *name, int fd, struct sbx_image **ret);

struct sbx_fork_opts {
        unsigned count;            /* new sandboxes; 0: 1 */
        const char *snapshot_name; /* NULL: the default (sbx_snapshot) */
        /* NULL: each new one has the source's settings (sbx_create_opts_from_sandbox of
         * the source); else these, whole (their image is the snapshot's and they have no
         * ID, whatever o->create says). For "the source's settings with these changes",
         * fill it with sbx_create_opts_from_sandbox from sbx_get's answer and change what
         * differs (as `sbx fork --memory ...` does). */
        const struct sbx_create_opts *create;
};

/* Fills o with the settings sandbox s was made with, as far as s tells them: its policy,
 * labels, shares and idle timeout (SBX_IDLE_TIMEOUT_NONE when it has none); the rest as
 * sbx_create_opts_init leaves it (no ID, no image, no lifetime, no environment: s does
 * not say which variables it was given). o points into s, which must outlive every use
 * of o. What sbx_fork gives each new sandbox when sbx_fork_opts.create is NULL. Does
 * nothing when o or s is NULL. */
void sbx_create_opts_from_sandbox(struct sbx_create_opts *o, const struct sbx_sandbox *s);

/* What sbx_fork made: the snapshot, and the new sandboxes' IDs in order. */
struct sbx_fork {
        char *snapshot; /* its digest */
        char **ids;
        size_t n;
};

/* Forks sandbox id: one snapshot of it (sbx_snapshot), then o->count sandboxes made from
 * it, each with the source's files at that instant (and its policy unless o->create says
 * otherwise); its processes are not copied (start them again). All or nothing: when a
 * create fails, the ones made are terminated and the code is that create's (the
 * snapshot stays, as an image). *ret: sbx_fork_free. */
enum sbx_code sbx_fork(sbx_client *c, const char *id, const struct sbx_fork_opts *o,
                       struct sbx_fork **ret);
void sbx_fork_free(struct sbx_fork *f);
void sbx_image_free(struct sbx_image *img);
void sbx_image_list_free(struct sbx_image_list *l);
void sbx_removed_images_free(struct sbx_removed_images *r);

/* ---- file-change events (WatchFiles; docs/watch.md) ---------------------------------- */

enum sbx_file_event_kind {
        SBX_FILE_EVENT_UNSPECIFIED = 0, /* a kind this libsbx does not know */
        SBX_FILE_CREATED = 1,
        SBX_FILE_MODIFIED = 2, /* its content or attributes changed */
        SBX_FILE_DELETED = 3,
        SBX_FILE_RENAMED = 4, /* from old_path to path */
};

/* One change, paths as the sandbox sees them (/workspace/src/a.c). */
struct sbx_file_event {
        enum sbx_file_event_kind kind;
        char *path;
        char *old_path; /* SBX_FILE_RENAMED: where it was; else NULL */
        int is_dir;
};

/* A batch of changes (coalesced per path over coalesce_ms, in the order each path first
 * changed). overflow: changes were lost (reason says why): list the directory again. */
struct sbx_file_events {
        struct sbx_file_event *v;
        size_t n;
        int overflow;
        char *overflow_reason; /* NULL without overflow */
};
void sbx_file_events_free(struct sbx_file_events *e);

struct sbx_watch_opts {
        int recursive;        /* every directory below path too, new ones as they appear */
        uint32_t coalesce_ms; /* 10..5000; 0: 100 */
};

/* A watch under way: it has the client's connection to itself until sbx_watch_close. */
typedef struct sbx_watch sbx_watch;

/* Watches the directory path of sandbox id (resolved as sbx_read_file resolves it: a
 * relative path is below /workspace; nothing outside the sandbox's view). Returns once
 * the watch is set up (the call timeout bounds that wait): every change after it is seen. *ret: the watch, to read with
 * sbx_watch_next and end with sbx_watch_close; meanwhile c makes no other call (each one
 * fails with SBX_FAILED_PRECONDITION). SBX_NOT_FOUND for a path that does not exist or a
 * sandbox the caller may not use, SBX_INVALID_ARGUMENT for a path that is not a
 * directory or a coalesce_ms out of bounds, SBX_RESOURCE_EXHAUSTED past the watches one
 * sandbox, one user or the daemon may have (the message names the bound). */
enum sbx_code sbx_watch_open(sbx_client *c, const char *id, const char *path,
                             const struct sbx_watch_opts *o, sbx_watch **ret);

/* The next batch of w, waiting at most timeout_ms (-1: as long as it takes). SBX_OK with
 * *ret a batch (sbx_file_events_free), or *ret NULL when none came by then. Any other
 * code ends the watch, its message in sbx_error_message: SBX_SANDBOX_ENDED when the sandbox
 * ended, SBX_NOT_FOUND when the watched directory went away, SBX_UNAVAILABLE when the
 * sandbox was restored from a snapshot (watch again) or the connection was lost; then
 * only sbx_watch_close is left to call. */
enum sbx_code sbx_watch_next(sbx_watch *w, int64_t timeout_ms, struct sbx_file_events **ret);

/* Ends the watch and frees w: a watch still running is stopped by closing the client's
 * connection (the daemon drops it then; the client's next call makes a new connection).
 * Accepts NULL. */
void sbx_watch_close(sbx_watch *w);

/* "created", "modified", "deleted", "renamed", or "unknown". */
const char *sbx_file_event_kind_name(enum sbx_file_event_kind k);

/* ---- Port forwarding --------------------------------------------------------------- */

/* Opens a stream to port (1..65535) of sandbox id's own network namespace, at address
 * (NULL: "127.0.0.1"; or "::1"): what a server in the sandbox listens on. The stream goes
 * over a NEW connection to c's daemon (c's socket path or ssh:// URL, client name and
 * call timeout), which after the daemon's answer (OpenPort, PortOpened) is nothing but
 * the stream's bytes: *ret_fd is that connection, a plain descriptor (blocking,
 * close-on-exec), the caller's to read, write, shut down (a half-close reaches the
 * sandbox's server) and close. c's own connection is not used and stays as it was.
 *
 * Errors are the usual codes with the daemon's message: SBX_UNAVAILABLE when nothing
 * listens on the port (naming it), SBX_NOT_FOUND for a sandbox that is not there or not
 * the caller's, SBX_FAILED_PRECONDITION for a sandbox of NETWORK_FULL (its loopback is
 * the host's: connect there directly), SBX_RESOURCE_EXHAUSTED at a bound (streams per
 * sandbox or per user), SBX_INVALID_ARGUMENT for a bad id, port or address; nothing is
 * left open then.
 *
 * Over ssh:// *ret_fd is a socketpair to a new ssh child (`ssh host sbx dial-stdio
 * --end-with-daemon`; the remote sbx must know that option). ssh cannot pass a half-close
 * from the server on to one socket, so there the server's end of its side ends the whole
 * stream (the caller reads its end; what it writes after is refused), while the
 * caller's half-close reaches the server as on a Unix socket. c keeps the ssh child:
 * sbx_open_port reaps, without waiting, the ones that have exited (their stream was
 * closed at both ends), and sbx_close(c) ends the rest (a second for all of them to end
 * by themselves, then each is terminated), so close c only after the streams. Like every call on one client, sbx_open_port must not be called on c from
 * several threads at once (it updates c's error and its list of ssh children): take a
 * lock around it, or use a client per thread; the streams it returned are independent
 * of c and of each other and may be used from any thread. */
enum sbx_code sbx_open_port(sbx_client *c, const char *id, uint32_t port, const char *address,
                            int *ret_fd);

#ifdef __cplusplus
}
#endif

#endif
