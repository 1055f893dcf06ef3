/* cli.h: the pieces of the sbx command-line tool shared between its files.
 *
 * The tool is split by subject: cli.c (main, option parsing, number parsing, errors,
 * help), cli_json.c (JSON through jansson, bytes rendered as valid UTF-8),
 * cli_sandbox.c (create, info, list, terminate, set-timeout, history), cli_image.c
 * (image pull, ls, rm, inspect, prune), cli_exec.c
 * (exec, cancel) with cli_tty.c (the client's terminal for exec -t), cli_files.c (read,
 * write, ls, stat, mkdir, rm, cp), cli_watch.c (watch), cli_doctor.c (doctor,
 * version), cli_dial.c (dial-stdio, the remote end of ssh:// sockets) and cli_mcp.c with
 * cli_mcp_tools.c (mcp, the Model Context Protocol server). Each command is a function `int
 * cmd_NAME(struct cli *, int argc, char **argv)` that returns the process exit status; argv[0] is
 * the command's name. Everything talks to the daemon through libsbx only. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbx_limits.h"
#include "libsbx_cli.h"
#include "sbx.h"

/* The exit status of every failure of sbx itself or of the daemon (sbx(1), EXIT STATUS). */
#define CLI_EXIT_ERROR 125

/* The client name sbx announces in Hello; the daemon records it with each operation. */
#define CLI_CLIENT_NAME "sbx/" SBX_VERSION

/* The per-call timeout of the tool; sbx exec adds the command's own timeout. */
#define CLI_CALL_TIMEOUT_MS (120u * 1000u)

/* Page size of `sbx read` and of downloads by `sbx cp`. */
#define CLI_READ_PAGE_BYTES (4u * 1024u * 1024u)

/* Chunk size of writes that do not fit one frame (all but the first chunk append). */
#define CLI_WRITE_CHUNK_BYTES (16u * 1024u * 1024u)

/* State of one invocation. */
struct cli {
        const char *socket_path; /* --socket, or NULL for libsbx's default */
};

/* ---- errors and output (cli.c) --------------------------------------------------------- */

/* Prints "sbx: CODE: message" on stderr and returns CLI_EXIT_ERROR. With JSON errors
 * on (the command was given --json), the first error of the process is also printed on
 * stdout as {"error":{"code":"CODE","message":"message"}}. */
__attribute__((format(printf, 2, 3))) int cli_error(enum sbx_code code, const char *fmt, ...);

/* Prints "sbx: CODE: message" on stderr only, never as JSON: for a failure that a
 * command's own JSON document reports. */
__attribute__((format(printf, 2, 3))) void cli_error_line(enum sbx_code code, const char *fmt, ...);

/* A usage error: "sbx: INVALID_ARGUMENT: message (run `sbx help` for usage)", 125. */
__attribute__((format(printf, 1, 2))) int cli_usage_error(const char *fmt, ...);

/* Prints the last failure of c (code rc) as cli_error does and returns CLI_EXIT_ERROR.
 * The daemon's message is put in the CLI's words first (cli_cli_words). */
int cli_client_error(sbx_client *c, enum sbx_code rc);

/* Turns JSON errors on (see cli_error). */
void cli_json_errors(void);

/* A new copy of a message from the daemon or libsbx in the words of the command line:
 * request field names become the flags that set them (create_parents -> --parents, one
 * table in cli.c), and durations in milliseconds ("86400000 ms") become seconds, the
 * unit every SECS of sbx takes. NULL when memory runs out. */
char *cli_cli_words(const char *msg);

/* Prints "sbx: warning: message" on stderr. */
__attribute__((format(printf, 1, 2))) void cli_warn(const char *fmt, ...);

/* Connects to the daemon (--socket or the default), sets the tool's call timeout.
 * Returns 0 and *ret, or prints the error and returns CLI_EXIT_ERROR. The Hello is
 * pipelined (libsbx_connect_pipelined): a daemon that refuses the connection is
 * reported by the first call, as any failure of a call is. */
int cli_connect(const struct cli *cli, sbx_client **ret);
/* cli_connect for a client kept for long (sbx mcp): the Hello is answered before it
 * returns, so that a daemon restarted before the first call is met by the one
 * reconnect a call makes on a connection that sat idle. */
int cli_connect_kept(const struct cli *cli, sbx_client **ret);

/* The uid the daemon knows this process by: the peer_uid of the first Hello answered
 * (over an ssh:// socket, the remote ssh user's uid), read on c now when it was not yet;
 * else geteuid(). What "you" means wherever sbx compares a sandbox's owner with the
 * caller. */
uint32_t cli_self_uid(sbx_client *c);

/* Warns on stderr when the sandbox id belongs to another uid than the caller's (as
 * cli_self_uid(c) says; it was shared with them: its owner sees and can change what they
 * do there). */
void cli_warn_not_owner(sbx_client *c, const char *id, uint32_t owner_uid);
/* Looks sandbox id up and warns as cli_warn_not_owner; a failed lookup is left to the
 * request that follows, which reports it. */
void cli_check_owner(sbx_client *c, const char *id);

/* Writes all of buf to fd. 0 or -errno. */
int cli_write_all(int fd, const void *buf, size_t len);

/* Reads fd to its end into a new buffer (NUL-terminated; *ret_len excludes the NUL).
 * At most max bytes (0: no bound): -EFBIG past it. 0 or -errno. */
int cli_read_all(int fd, size_t max, uint8_t **ret, size_t *ret_len);

/* Prints s to f with control characters and DEL shown as \xNN, so that names from a
 * sandbox cannot drive the terminal. NULL prints "-". */
void cli_put_text(FILE *f, const char *s);

/* "file", "directory", "symlink", ... as --json and sbx mcp name an entry's type. */
const char *cli_file_type_name(enum sbx_file_type t);

/* "2025-01-02T03:04:05.678Z" (UTC); with_ms false drops the milliseconds. */
void cli_format_iso(char *buf, size_t len, int64_t unix_ms, bool with_ms);

/* Milliseconds since the Unix epoch, now. */
int64_t cli_now_unix_ms(void);

/* cli_mcp_tools.c: the names of sbx mcp's tools in its table's order, "run_command,
 * command_output, ... and sandbox_info", into buf (cut at len): what sbx help and the
 * server's errors list, so that they name what tools/list does. */
void cli_mcp_tool_names(char *buf, size_t len);

/* ---- option parsing (cli.c) ------------------------------------------------------------ */

struct cli_opt {
        const char *name; /* long name without "--" */
        bool has_arg;
        char short_name; /* 0, or the letter of a short form ("-p"); short forms without a
                            value may be clustered ("-rf") */
};

enum {
        CLI_OPT_END = -1,  /* no more words */
        CLI_OPT_ERR = -2,  /* a usage error was printed */
        CLI_OPT_POS = -3,  /* a positional word, in p->arg */
        CLI_OPT_HELP = -4, /* --help or -h */
};

struct cli_opts {
        struct cli *cli;
        const char *cmd;
        int argc;
        char **argv;
        int i;
        const struct cli_opt *spec; /* ended by an entry with name NULL */
        bool only_positional;       /* after "--" */
        bool saw_dashdash;          /* the last positional came after "--" */
        const char *shorts;         /* the rest of a cluster of short options ("-rf") */
        const char *arg;
};

/* Starts parsing argv[1..] of command cmd against spec. */
void cli_opts_init(struct cli_opts *p, struct cli *cli, int argc, char **argv,
                   const struct cli_opt *spec);

/* The index in spec of the next option (its value in p->arg), or a CLI_OPT_* value.
 * --socket PATH is accepted by every command and handled here. An option named "json"
 * also turns on JSON errors (cli_json_errors), and so does a usage error in a command
 * line that holds --json for a command that takes it. */
int cli_opts_next(struct cli_opts *p);

/* ---- value parsing (cli.c); each returns 0 or -EINVAL ---------------------------------- */

/* Bytes: a plain number, or a number (fractions allowed) with K, M, G or T (powers of
 * 1024, optionally followed by B or iB): "4096", "1K", "64M", "1.5G". */
int cli_parse_bytes(const char *s, uint64_t *ret);
/* Seconds with an optional fraction, as milliseconds rounded up: "2", "0.25". */
int cli_parse_secs_ms(const char *s, uint64_t *ret_ms);
/* A non-negative number with an optional fraction: "1.5". */
int cli_parse_double(const char *s, double *ret);
/* An unsigned decimal integer at most max. */
int cli_parse_uint(const char *s, uint64_t max, uint64_t *ret);
/* An octal file mode up to 07777. */
int cli_parse_mode(const char *s, uint32_t *ret);

/* Reports a bad option value; returns CLI_EXIT_ERROR. */
int cli_bad_value(const char *cmd, const char *opt, const char *value, const char *what);

/* Prints the usage of cmd (or of every command when cmd is NULL) to f. */
void cli_usage(FILE *f, const char *cmd);

/* ---- JSON (cli_json.c) ------------------------------------------------------------------ */

/* The JSON of sbx goes through jansson (see cli_json.c for why that library). The
 * writer below keeps the walking interface every --json output of cli_*.c is written
 * against: it builds a jansson tree as the caller begins and ends objects and arrays,
 * and json_finish prints it compact, keys in the order they were given. Two of its
 * names (json_string, json_null) are also jansson's: they are macros for the writer's
 * own symbols, and a file that calls jansson's defines CLI_NO_JSON_WRITER before
 * including this header. */

#define JSON_MAX_DEPTH 32

struct json_t; /* jansson's value type (json_t) */

#ifndef CLI_NO_JSON_WRITER
/* Linked under other names than jansson's json_string() and json_null(). */
#define json_string cli_json_writer_string
#define json_null   cli_json_writer_null

struct json {
        FILE *f;
        struct json_t *root;                  /* the document, once its first value came */
        struct json_t *stack[JSON_MAX_DEPTH]; /* the open containers, innermost last */
        int depth;                            /* open containers (may pass JSON_MAX_DEPTH) */
        char *key;                            /* the key given for the next value */
        bool failed;                          /* memory ran out: json_finish fails */
};

void json_init(struct json *j, FILE *f);
void json_begin_object(struct json *j);
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);
void json_key(struct json *j, const char *key);
/* A string value; NULL writes null. Invalid UTF-8 becomes U+FFFD. */
void json_string(struct json *j, const char *s);
/* Bytes as a string value: valid UTF-8 as is, each maximal invalid subsequence as one
 * U+FFFD, control characters escaped. */
void json_bytes(struct json *j, const void *data, size_t len);
/* The bytes in base64 (RFC 4648, padded) when they are not valid UTF-8, else null: the
 * companion of a json_bytes text that could not carry them exactly. */
void json_base64_unless_utf8(struct json *j, const void *data, size_t len);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
/* A number with at most `decimals` decimals, trailing zeros dropped; NaN/inf: null. */
void json_double(struct json *j, double v, int decimals);
/* Milliseconds as seconds, exactly: 1700000000123 -> 1700000000.123. */
void json_ms_as_secs(struct json *j, int64_t ms);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* v when has, else null. */
void json_int_or_null(struct json *j, int has, int64_t v);
/* An array of the strings of s. */
void json_strv(struct json *j, const struct sbx_strv *s);
/* An object of each limit's enforcement: {"memory": "cgroup_v2", ...}. */
void json_enforcement(struct json *j, const struct sbx_enforcement *e, size_t n);
/* Prints the document and a newline, and frees it. Returns 0, or -EIO when writing
 * failed (-ENOMEM when memory ran out while it was built); errno says why. */
int json_finish(struct json *j);
/* Copies bytes both ways (cli_relay.c) between a client side (read from client_in,
 * written to client_out: the same socket, or stdin and stdout) and a far socket, until
 * both directions have ended, each end passed on as a half-close (shutdown SHUT_WR; an
 * output that is not a socket is closed instead); with end_with_far, until the far
 * side's direction has ended. When the client's output stops taking bytes (EPIPE,
 * ECONNRESET) the copy ends there; when the far side's does, the copy from the client
 * stops and the far side's last bytes are still delivered; when the far side closed
 * altogether (a hang-up, not a half-close) once its bytes are delivered, the copy ends.
 * The descriptors are made non-blocking meanwhile and left as they were (but one
 * closed). Blocks the calling thread. 0, or -errno of a failure (-ENOMEM, a poll or
 * write error). The caller ignores SIGPIPE. */
int relay_copy(int client_in, int client_out, int far, bool end_with_far);

#endif

/* Bytes as valid UTF-8: a new NUL-terminated copy of data[0..len) in which each maximal
 * invalid subsequence is one U+FFFD (the Unicode standard's recommendation, Python's
 * errors="replace"); NUL bytes are kept. *ret_len (may be NULL) excludes the final NUL.
 * NULL when memory runs out. */
char *cli_utf8_valid(const void *data, size_t len, size_t *ret_len);

/* How many bytes of data[0..len) are not part of valid UTF-8 (what cli_utf8_valid
 * replaces). */
size_t cli_utf8_invalid_bytes(const void *data, size_t len);

/* data[0..len) in base64 (RFC 4648, with padding), a new NUL-terminated string; NULL
 * when memory runs out. */
char *cli_base64(const void *data, size_t len);

/* A new jansson string of the bytes data[0..len) made valid UTF-8 as cli_utf8_valid
 * does (data NULL: an empty string). NULL when memory runs out. */
struct json_t *cli_json_text(const void *data, size_t len);

/* Prints a jansson value compact (keys in their order) followed by a newline, as every
 * JSON output of sbx is printed. 0, or -EIO / -ENOMEM. */
int cli_json_print(FILE *f, const struct json_t *v);

/* ---- commands ---------------------------------------------------------------------------- */

/* The options a command takes besides those of `sbx create` (sbx fork's). */
struct cli_create_extra {
        const struct cli_opt *opts; /* ended by a NULL name; at most 4 */
        /* Called for each of them given (k: its index in opts, arg: its value or NULL) and
         * for each positional word (k: CLI_OPT_POS): 0, or an exit status (printed). */
        int (*on_opt)(void *userdata, int k, const char *arg);
        void *userdata;
};

/* The options of `sbx create` parsed (cli_parse_create). */
struct cli_create_args {
        struct sbx_create_opts opts;
        bool json;                      /* --json */
        struct cli_create_state *state; /* what opts points to (but what it was filled with) */
};

/* Parses argv (argv[0] names the command for messages) as the options of `sbx create`
 * over a->opts as the caller filled it (sbx_create_opts_init, or a sandbox's settings
 * with sbx_create_opts_from_sandbox for sbx fork): an option of one value replaces
 * a->opts's; one that adds to a list (--writable, --deny-read, --deny-write, --env,
 * --share-uid, --allow-host, --allow-cidr) adds to a->opts's list; --label KEY=VALUE
 * replaces a->opts's label KEY, or adds one; a->opts's allowlist stays only while the
 * network stays allowlist. a->opts may point into what it was filled from afterwards.
 * extra (NULL: none) adds the command's own options and takes the positional words
 * (without it one is a usage error). 0; -1 after --help (the usage shown); or an exit
 * status (the error printed). cli_create_args_free in every case. */
int cli_parse_create(struct cli *cli, int argc, char **argv, const struct cli_create_extra *extra,
                     struct cli_create_args *a);
void cli_create_args_free(struct cli_create_args *a);

/* Parses the options of `sbx create` (argv[0] names the command for messages) and
 * creates the sandbox: 0 and *ret (sbx_sandbox_free), 0 and *ret NULL when --help was
 * shown, or an exit status (the error printed). ret_json (may be NULL) gets --json. */
int cli_create(struct cli *cli, int argc, char **argv, struct sbx_sandbox **ret, bool *ret_json);
int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_info(struct cli *cli, int argc, char **argv);
int cmd_list(struct cli *cli, int argc, char **argv);
int cmd_terminate(struct cli *cli, int argc, char **argv);
int cmd_set_timeout(struct cli *cli, int argc, char **argv);
int cmd_history(struct cli *cli, int argc, char **argv);
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_attach(struct cli *cli, int argc, char **argv);
struct json;
/* cli_exec.c: the exit status sbx exec gives result r (printing why when it has none). */
int cli_result_status(const struct sbx_result *r);
/* cli_exec.c: result r as the JSON object sbx exec --json prints. */
void cli_json_result(struct json *j, const struct sbx_result *r);
/* cli_bg.c: sbx exec --background: starts o in sandbox id, prints its command ID (json: an
 * object with command_id). Returns the exit status. */
int cli_exec_background(struct cli *cli, const char *id, const struct sbx_exec_opts *o, bool json);
/* cli_bg.c: SandboxInfo.commands, as JSON (an array) and as lines of sbx info. */
void cli_json_commands(struct json *j, const struct sbx_command_info *v, size_t n);
void cli_print_commands(const struct sbx_command_info *v, size_t n);

/* The client's terminal for sbx exec -t (cli_tty.c). cli_tty_raw saves fd's settings and
 * switches it to raw mode (0 or -errno); cli_tty_restore puts them back, once, and is
 * async-signal-safe (it also runs at exit). cli_tty_size reads fd's size, each at most
 * SBX_MAX_TTY_DIM: 0, or -errno (-EINVAL when the terminal does not know it). */
int cli_tty_raw(int fd);
void cli_tty_restore(void);
int cli_tty_size(int fd, uint32_t *ret_rows, uint32_t *ret_cols);
int cmd_read(struct cli *cli, int argc, char **argv);
int cmd_write(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_stat(struct cli *cli, int argc, char **argv);
int cmd_mkdir(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_watch(struct cli *cli, int argc, char **argv);
int cmd_cancel(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);
int cmd_image(struct cli *cli, int argc, char **argv);
int cmd_snapshot(struct cli *cli, int argc, char **argv);
int cmd_fork(struct cli *cli, int argc, char **argv);
int cmd_restore(struct cli *cli, int argc, char **argv);

/* Pulls the registry reference ref for `sbx create --image` (with the user's own
 * registry credentials, progress on stderr as `sbx image pull` shows it). The code of
 * the pull; c's call timeout is left lifted (0). */
int cli_image_fetch(sbx_client *c, const char *ref);
int cmd_version(struct cli *cli, int argc, char **argv);
int cmd_dial_stdio(struct cli *cli, int argc, char **argv);
int cmd_mcp(struct cli *cli, int argc, char **argv);
int cmd_port_forward(struct cli *cli, int argc, char **argv);

/* Writes data to a sandbox file: in one atomic WriteFile when it fits a frame, else the
 * first CLI_WRITE_CHUNK_BYTES atomically and the rest appended in chunks (only the
 * first chunk is atomic). Returns an sbx_code (the failure is left on c). */
enum sbx_code cli_write_file(sbx_client *c, const char *id, const char *path, const uint8_t *data,
                             size_t len, uint32_t mode, unsigned flags);

/* Copies bytes both ways (cli_relay.c) between a client side (read from client_in,
 * written to client_out: the same socket, or stdin and stdout) and a far socket, until
 * both directions have ended, each end passed on as a half-close (shutdown SHUT_WR; an
 * output that is not a socket is closed instead); with end_with_far, until the far
 * side's direction has ended. When the client's output stops taking bytes (EPIPE,
 * ECONNRESET) the copy ends there; when the far side's does, the copy from the client
 * stops and the far side's last bytes are still delivered; when the far side closed
 * altogether (a hang-up, not a half-close) once its bytes are delivered, the copy ends.
 * The descriptors are made non-blocking meanwhile and left as they were (but one
 * closed). Blocks the calling thread. 0, or -errno of a failure (-ENOMEM, a poll or
 * write error). The caller ignores SIGPIPE. */
int relay_copy(int client_in, int client_out, int far, bool end_with_far);

#endif
