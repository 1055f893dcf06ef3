/* cli_mcp_tools.c: the tools of `sbx mcp`: run_command (also in the background),
 * command_output, read_file, write_file, list_directory, edit_file, sandbox_info, snapshot,
 * restore and http_request.
 *
 * The names and semantics are the agent tool set's (the pydantic-ai-harness sandbox in
 * the seeds), with edit_file and sandbox_info added in the same style. Each tool has a
 * description a model can act on and a JSON Schema for its arguments; where a typed
 * result helps a program, an output schema and structuredContent too. The text a tool
 * returns is written for a model: labelled, bounded, every cut marked with what was
 * dropped and how to get it.
 *
 * Failures come back in two ways. What the model can act on (a command that exits
 * non-zero, a missing file, a read-only path, a refused permission, bad arguments) is a
 * result with isError true and the daemon's message. What no retry can fix (the sandbox
 * has ended, sbxd cannot be reached) is a JSON-RPC error (MCP_SANDBOX_ENDED,
 * MCP_DAEMON_GONE) telling the client to stop.
 *
 * Owns nothing between calls. Each call runs on the client it is given (the server's
 * own for the quick tools, a thread's own for run_command), so it never shares one. */
#include "cli_mcp.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libsbx_limit_table.h"

/* The most argv words and env entries run_command takes. */
#define MCP_MAX_ARGV 4096u
#define MCP_MAX_ENV  1024u
/* A result that starts with this many bytes of a file decides whether it is text. */
#define MCP_SNIFF_BYTES (64u * 1024u)

/* ---- tool definitions -------------------------------------------------------------------
 * Descriptions and schemas are text with {PLACEHOLDERS} for the server's limits, filled
 * in by expand() when a client lists the tools. */

enum { HINT_READ_ONLY = 1u << 0, HINT_DESTRUCTIVE = 1u << 1, HINT_IDEMPOTENT = 1u << 2 };

struct mcp_tool {
        const char *name;
        const char *title;
        const char *description;
        const char *input_schema;
        const char *output_schema; /* NULL: the tool returns text only */
        unsigned hints;
        bool threaded;
        json_t *(*call)(struct mcp_call *k, json_t *args);
};

static json_t *run_command(struct mcp_call *k, json_t *args);
static json_t *read_file(struct mcp_call *k, json_t *args);
static json_t *write_file(struct mcp_call *k, json_t *args);
static json_t *list_directory(struct mcp_call *k, json_t *args);
static json_t *edit_file(struct mcp_call *k, json_t *args);
static json_t *sandbox_info(struct mcp_call *k, json_t *args);
static json_t *command_output(struct mcp_call *k, json_t *args);
static json_t *snapshot(struct mcp_call *k, json_t *args);
static json_t *restore(struct mcp_call *k, json_t *args);
static json_t *http_request(struct mcp_call *k, json_t *args);

/* run_command's and command_output's structuredContent. */
#define RUN_OUTPUT_SCHEMA                                                                          \
        "{\"type\":\"object\",\"properties\":{"                                                    \
        "\"command_id\":{\"type\":\"string\"},"                                                    \
        "\"outcome\":{\"type\":\"string\",\"description\":\"{OUTCOMES}\"},"                        \
        "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"                                         \
        "\"signal\":{\"type\":[\"integer\",\"null\"]},"                                            \
        "\"timed_out\":{\"type\":\"boolean\"},"                                                    \
        "\"timeout_seconds\":{\"type\":[\"number\",\"null\"],\"description\":\"Its "               \
        "timeout; null: none (a background command that runs until it exits or "                   \
        "the sandbox ends)\"},"                                                                    \
        "\"duration_seconds\":{\"type\":\"number\"},"                                              \
        "\"queued_ms\":{\"type\":\"integer\",\"description\":\"Milliseconds "                      \
        "it waited for a slot\"},"                                                                 \
        "\"stdout\":{\"type\":\"string\",\"description\":\"The tail shown\"},"                     \
        "\"stderr\":{\"type\":\"string\",\"description\":\"The tail shown\"},"                     \
        "\"stdout_truncated\":{\"type\":\"boolean\"},"                                             \
        "\"stderr_truncated\":{\"type\":\"boolean\"},"                                             \
        "\"stdout_bytes\":{\"type\":\"integer\",\"description\":\"All the "                        \
        "command wrote\"},"                                                                        \
        "\"stderr_bytes\":{\"type\":\"integer\"},"                                                 \
        "\"limits_hit\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"                     \
        "\"warnings\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"                      \
        "\"required\":[\"outcome\",\"exit_code\",\"timed_out\",\"stdout\","                        \
        "\"stderr\"]}"

static const struct mcp_tool tools[] = {
        {
                .name = "run_command",
                .title = "Run a command in the sandbox",
                .description =
                        "Run a command in the sandbox and return its output and how it "
                        "ended. Give `command`, a shell command line run by /bin/sh -c "
                        "(pipes, redirections, `&&` and `cd DIR && ...` work), or `argv`, a "
                        "program and its arguments run without a shell. Commands run in "
                        "/workspace unless `cwd` says otherwise; files written there stay for "
                        "later calls. A command is killed after timeout_seconds "
                        "({DEFAULT_TIMEOUT} s unless given, at most {MAX_TIMEOUT} s): start "
                        "longer work with `background: true` and look at it later. The result "
                        "has a [stdout] and a [stderr] section, each cut to its last "
                        "{MAX_OUTPUT_BYTES} bytes and {MAX_OUTPUT_LINES} lines (a cut is "
                        "marked), and a status line: the exit code, a "
                        "timeout or a signal. A non-zero exit comes back as an error result "
                        "with the output, to read what failed and try again. Nothing is "
                        "interactive: stdin is empty unless `stdin` gives text. When the "
                        "sandbox already runs its maximum of commands at once (other agents "
                        "may share it), the command waits for a slot, up to "
                        "queue_timeout_seconds; one that gets none never runs (outcome "
                        "queue_timeout). With `background: true` (a dev server, a watcher, a "
                        "long build) the call returns at once with the command's "
                        "`command_id` (outcome running, or queued while it waits for a slot); "
                        "the command runs on with no timeout unless timeout_seconds gives one "
                        "(of any length; 0 is none too): until it exits, is stopped, or the "
                        "sandbox ends. command_output reads what it printed, says how it "
                        "ended, waits for it or stops it.",
                .input_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"command\":{\"type\":\"string\",\"description\":\"A shell command "
                        "line, run as /bin/sh -c COMMAND. Give this or argv.\"},"
                        "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
                        "\"minItems\":1,\"description\":\"A program and its arguments, run "
                        "without a shell. Give this or command.\"},"
                        "\"timeout_seconds\":{\"type\":\"number\",\"minimum\":0,"
                        "\"description\":\"Kill the command after this many seconds. Default "
                        "{DEFAULT_TIMEOUT}, at most {MAX_TIMEOUT}, more than 0. With "
                        "background: none unless given, 0 for none, any length.\"},"
                        "\"cwd\":{\"type\":\"string\",\"description\":\"The working directory "
                        "in the sandbox. Default /workspace.\"},"
                        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":"
                        "\"string\"},\"description\":\"Environment variables for this command "
                        "only, e.g. {\\\"DEBUG\\\": \\\"1\\\"}.\"},"
                        "\"stdin\":{\"type\":\"string\",\"description\":\"Text given to the "
                        "command on its standard input. Default: none.\"},"
                        "\"queue_timeout_seconds\":{\"type\":\"number\",\"minimum\":0,"
                        "\"description\":\"How long the command may wait for a slot when the "
                        "sandbox already runs its maximum of commands at once. Default: the "
                        "daemon's (60 s); 0: do not wait.\"},"
                        "\"background\":{\"type\":\"boolean\",\"description\":\"Start it "
                        "and return its command_id at once; read it later with "
                        "command_output. It has no timeout unless timeout_seconds gives "
                        "one: it runs until it exits, is stopped, or the sandbox ends. "
                        "Default false.\"}},"
                        "\"additionalProperties\":false}",
                .output_schema = RUN_OUTPUT_SCHEMA,
                .hints = HINT_DESTRUCTIVE,
                .threaded = true,
                .call = run_command,
        },
        {
                .name = "command_output",
                .title = "Read a background command's output and status",
                .description =
                        "Read what a command started with run_command `background: true` "
                        "printed and how it stands: running (or queued), or how it ended "
                        "(exit code, timeout, signal). Give its `command_id`. The result has a "
                        "[stdout] and a [stderr] section, the tail of everything it printed "
                        "so far (its last {MAX_OUTPUT_BYTES} bytes and {MAX_OUTPUT_LINES} "
                        "lines), and a status line. `wait_seconds` waits up to that long for "
                        "it to end first (at most {MAX_TIMEOUT}); `stop: true` kills it first "
                        "and reports how it ended. The sandbox keeps the last 16 ended "
                        "background commands; an older or unknown id is an error.",
                .input_schema = "{\"type\":\"object\",\"properties\":{"
                                "\"command_id\":{\"type\":\"string\",\"description\":\"The "
                                "command_id run_command returned, e.g. c-3.\"},"
                                "\"wait_seconds\":{\"type\":\"number\",\"minimum\":0,"
                                "\"description\":\"Wait up to this many seconds for it to end. "
                                "Default 0: answer at once.\"},"
                                "\"stop\":{\"type\":\"boolean\",\"description\":\"Kill it first "
                                "(SIGKILL to its process group). Default false.\"}},"
                                "\"required\":[\"command_id\"],\"additionalProperties\":false}",
                .output_schema = RUN_OUTPUT_SCHEMA,
                .hints = 0,
                .threaded = true,
                .call = command_output,
        },
        {
                .name = "read_file",
                .title = "Read a text file",
                .description =
                        "Read a UTF-8 text file in the sandbox, a page of lines at a time. "
                        "`offset` is how many lines to skip (0: from the start), `limit` how "
                        "many lines to return (at most {MAX_OUTPUT_LINES}); a page also stops "
                        "before {MAX_OUTPUT_BYTES} bytes. A page that stops before the end of "
                        "the file ends with a note giving the offset to read on from. "
                        "Relative paths are relative to /workspace. Files over "
                        "{MAX_READ_BYTES} bytes and binary files are refused with a hint; "
                        "look at those with run_command (`sed -n '100,200p' FILE`, "
                        "`head -c 4096 FILE`, `xxd FILE | head`).",
                .input_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"path\":{\"type\":\"string\",\"description\":\"The file, absolute "
                        "or relative to /workspace.\"},"
                        "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Lines "
                        "to skip. Default 0.\"},"
                        "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Lines "
                        "to return. Default and at most {MAX_OUTPUT_LINES}.\"}},"
                        "\"required\":[\"path\"],\"additionalProperties\":false}",
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"path\":{\"type\":\"string\"},"
                        "\"content\":{\"type\":\"string\",\"description\":\"The lines of the "
                        "page, with their line ends\"},"
                        "\"offset\":{\"type\":\"integer\"},"
                        "\"lines\":{\"type\":\"integer\",\"description\":\"Lines in the "
                        "page\"},"
                        "\"total_lines\":{\"type\":\"integer\"},"
                        "\"next_offset\":{\"type\":[\"integer\",\"null\"],\"description\":"
                        "\"The offset of the next page; null at the end of the file\"},"
                        "\"size_bytes\":{\"type\":\"integer\"}},"
                        "\"required\":[\"content\",\"offset\",\"lines\",\"total_lines\","
                        "\"next_offset\"]}",
                .hints = HINT_READ_ONLY | HINT_IDEMPOTENT,
                .call = read_file,
        },
        {
                .name = "write_file",
                .title = "Write a text file",
                .description = "Write a UTF-8 text file in the sandbox with the given content, "
                               "replacing the file if it exists (its permission bits are kept) and "
                               "creating missing parent directories. The file is replaced "
                               "atomically: a reader sees the old content or the new, never a mix. "
                               "The content is at most {MAX_READ_BYTES} bytes. "
                               "Relative paths are relative to /workspace. To change part of a "
                               "file, edit_file is shorter and safer.",
                .input_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"path\":{\"type\":\"string\",\"description\":\"The file, absolute "
                        "or relative to /workspace.\"},"
                        "\"content\":{\"type\":\"string\",\"description\":\"The whole new "
                        "content of the file.\"}},"
                        "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
                .hints = HINT_DESTRUCTIVE | HINT_IDEMPOTENT,
                .call = write_file,
        },
        {
                .name = "list_directory",
                .title = "List a directory",
                .description = "List a directory in the sandbox (default /workspace), sorted by "
                               "name, one entry a line: directories end with '/', symbolic links "
                               "show their target ('name -> target'). At most {MAX_OUTPUT_LINES} "
                               "entries, the first by name; a cut listing says so. For recursive "
                               "listings or filters use run_command (`find DIR -name '*.py'`).",
                .input_schema = "{\"type\":\"object\",\"properties\":{"
                                "\"path\":{\"type\":\"string\",\"description\":\"The directory, "
                                "absolute or relative to /workspace. Default /workspace.\"}},"
                                "\"additionalProperties\":false}",
                .output_schema = "{\"type\":\"object\",\"properties\":{"
                                 "\"path\":{\"type\":\"string\"},"
                                 "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
                                 "\"properties\":{\"name\":{\"type\":\"string\"},"
                                 "\"type\":{\"type\":\"string\",\"description\":\"file, directory, "
                                 "symlink, fifo, socket, char_device, block_device or unknown\"},"
                                 "\"size\":{\"type\":\"integer\"},"
                                 "\"is_dir\":{\"type\":\"boolean\"},"
                                 "\"symlink_target\":{\"type\":[\"string\",\"null\"]}},"
                                 "\"required\":[\"name\",\"type\",\"is_dir\"]}},"
                                 "\"truncated\":{\"type\":\"boolean\"}},"
                                 "\"required\":[\"path\",\"entries\",\"truncated\"]}",
                .hints = HINT_READ_ONLY | HINT_IDEMPOTENT,
                .call = list_directory,
        },
        {
                .name = "edit_file",
                .title = "Edit a text file",
                .description = "Edit a text file in the sandbox by exact string replacement: "
                               "old_string must occur in the file exactly once (take in enough of "
                               "the lines around it to make it unique) and is replaced by "
                               "new_string; with replace_all true, every occurrence is replaced. "
                               "Whitespace and indentation must match the file exactly; read_file "
                               "shows the current text. The file is rewritten atomically and keeps "
                               "its permission bits. When old_string is missing, or occurs more "
                               "than once without replace_all, nothing is changed and the error "
                               "says how many times it occurs.",
                .input_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"path\":{\"type\":\"string\",\"description\":\"The file, absolute "
                        "or relative to /workspace.\"},"
                        "\"old_string\":{\"type\":\"string\",\"description\":\"The exact text "
                        "to replace.\"},"
                        "\"new_string\":{\"type\":\"string\",\"description\":\"The text to put "
                        "in its place.\"},"
                        "\"replace_all\":{\"type\":\"boolean\",\"description\":\"Replace every "
                        "occurrence. Default false.\"}},"
                        "\"required\":[\"path\",\"old_string\",\"new_string\"],"
                        "\"additionalProperties\":false}",
                .hints = HINT_DESTRUCTIVE,
                .call = edit_file,
        },
        {
                .name = "sandbox_info",
                .title = "Show the sandbox",
                .description =
                        "Show the sandbox these tools work in: its id, state and deadline, "
                        "whether this server owns it, its owner, its policy (writable paths, "
                        "network, resource limits), warnings about what could not be "
                        "isolated, and the limits this server puts on commands and reads. "
                        "Look here before running something that needs the network or "
                        "writes outside /workspace. With network \"allowlist\" only the "
                        "allowed_hosts (and allowed_cidrs) are reachable, through the HTTP "
                        "proxy that HTTP_PROXY/HTTPS_PROXY name; anything else is refused "
                        "with 403.",
                .input_schema = "{\"type\":\"object\",\"properties\":{},"
                                "\"additionalProperties\":false}",
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"id\":{\"type\":\"string\"},"
                        "\"state\":{\"type\":\"string\"},"
                        "\"mode\":{\"type\":\"string\",\"description\":\"owned (ended with "
                        "this server) or attached (left running)\"},"
                        "\"owner_uid\":{\"type\":\"integer\"},"
                        "\"deadline\":{\"type\":[\"string\",\"null\"]},"
                        "\"seconds_left\":{\"type\":[\"number\",\"null\"]},"
                        "\"network\":{\"type\":\"string\",\"description\":\"none, full "
                        "or allowlist\"},"
                        "\"allowed_hosts\":{\"type\":\"array\",\"items\":{\"type\":"
                        "\"string\"}},"
                        "\"allowed_cidrs\":{\"type\":\"array\",\"items\":{\"type\":"
                        "\"string\"}},"
                        "\"protect_defaults\":{\"type\":\"boolean\"},"
                        "\"writable_paths\":{\"type\":\"array\",\"items\":{\"type\":"
                        "\"string\"}},"
                        "\"limits\":{\"type\":\"object\"},"
                        "\"isolated\":{\"type\":\"boolean\"},"
                        "\"warnings\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                        "\"server\":{\"type\":\"object\"}},"
                        "\"required\":[\"id\",\"state\",\"mode\"]}",
                .hints = HINT_READ_ONLY | HINT_IDEMPOTENT,
                .call = sandbox_info,
        },
        {
                .name = "snapshot",
                .title = "Snapshot the sandbox's files",
                .description =
                        "Save the sandbox's files as they are now, its whole root (installed "
                        "packages, /etc) and /workspace, as a named image, before a risky "
                        "step. Running processes keep running (they pause for the instant of "
                        "the capture) and are not saved. A new sandbox made from the image "
                        "(`sbx create --image NAME`, or `sbx fork`) starts with exactly these "
                        "files. Only a sandbox made from an image can be snapshotted. "
                        "`name`: the image's name (NAME[:TAG]); default localhost/ID:TIME.",
                .input_schema = "{\"type\":\"object\",\"properties\":{"
                                "\"name\":{\"type\":\"string\",\"description\":\"The "
                                "snapshot's name, NAME[:TAG]\"}},"
                                "\"additionalProperties\":false}",
                .output_schema = "{\"type\":\"object\",\"properties\":{"
                                 "\"name\":{\"type\":\"string\"},"
                                 "\"digest\":{\"type\":\"string\"},"
                                 "\"size_bytes\":{\"type\":\"integer\"}},"
                                 "\"required\":[\"name\",\"digest\"]}",
                .call = snapshot,
        },
        {
                .name = "restore",
                .title = "Restore the sandbox's files from a snapshot",
                .description =
                        "Put the sandbox's files back as a snapshot (the snapshot tool) saved "
                        "them, its whole root and /workspace, when a step went wrong. Every "
                        "process running in it is ended first (background servers must be "
                        "started again); files written since the snapshot are gone. The "
                        "sandbox keeps its ID, policy and time left. `snapshot`: the name "
                        "the snapshot tool returned (or its digest).",
                .input_schema = "{\"type\":\"object\",\"properties\":{"
                                "\"snapshot\":{\"type\":\"string\",\"description\":\"The "
                                "snapshot's name or digest\"}},"
                                "\"required\":[\"snapshot\"],"
                                "\"additionalProperties\":false}",
                .output_schema = "{\"type\":\"object\",\"properties\":{"
                                 "\"id\":{\"type\":\"string\"},"
                                 "\"snapshot\":{\"type\":\"string\"},"
                                 "\"digest\":{\"type\":\"string\"}},"
                                 "\"required\":[\"id\",\"snapshot\",\"digest\"]}",
                .hints = HINT_DESTRUCTIVE | HINT_IDEMPOTENT,
                .call = restore,
        },
        {
                .name = "http_request",
                .title = "Send an HTTP request to a server in the sandbox",
                .description =
                        "Send one HTTP/1.1 request (Connection: close) to a server running "
                        "in the sandbox, on `port` of its own loopback (default 8000, where "
                        "`python3 -m http.server` listens; give the port your server "
                        "uses), and return the status, the headers and the body, the body "
                        "cut to its first {MAX_OUTPUT_BYTES} bytes (a cut is marked). Start "
                        "the server first with run_command and background: true; when "
                        "nothing listens on the port the error says so. The server must "
                        "listen on 127.0.0.1 (or 0.0.0.0) in the sandbox. The request goes "
                        "through sbxd, not the network, so it works in a sandbox without "
                        "network. A chunked body is decoded. Gives up after timeout_seconds "
                        "(default 30, at most {MAX_TIMEOUT}).",
                .input_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"method\":{\"type\":\"string\",\"description\":\"GET (default), "
                        "POST, PUT, DELETE, HEAD, ...\"},"
                        "\"path\":{\"type\":\"string\",\"description\":\"The request target, "
                        "starting with / (default /), query string included\"},"
                        "\"headers\":{\"type\":\"object\",\"additionalProperties\":{"
                        "\"type\":\"string\"},\"description\":\"Request headers (Host, "
                        "Connection and Content-Length are set by the tool)\"},"
                        "\"body\":{\"type\":\"string\",\"description\":\"The request body, "
                        "as text\"},"
                        "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,"
                        "\"description\":\"The port in the sandbox. Default 8000.\"},"
                        "\"timeout_seconds\":{\"type\":\"number\",\"minimum\":0,"
                        "\"description\":\"Give up after this many seconds. Default 30, at "
                        "most {MAX_TIMEOUT}.\"}},"
                        "\"additionalProperties\":false}",
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{"
                        "\"status\":{\"type\":\"integer\"},"
                        "\"reason\":{\"type\":\"string\"},"
                        "\"headers\":{\"type\":\"object\"},"
                        "\"body\":{\"type\":\"string\",\"description\":\"Its start\"},"
                        "\"body_bytes\":{\"type\":\"integer\",\"description\":\"All the "
                        "server sent as the body\"},"
                        "\"body_truncated\":{\"type\":\"boolean\"},"
                        "\"timed_out\":{\"type\":\"boolean\"}},"
                        "\"required\":[\"status\",\"headers\",\"body\",\"body_truncated\"]}",
                .threaded = true,
                .call = http_request,
        },
};

#define N_TOOLS (sizeof(tools) / sizeof(tools[0]))

/* ---- small helpers ----------------------------------------------------------------------- */

/* Milliseconds as seconds, short: 60000 -> "60", 1500 -> "1.5". */
static void fmt_secs(char *buf, size_t len, uint64_t ms) {
        size_t n = (size_t)snprintf(buf, len, "%llu", (unsigned long long)(ms / 1000));
        if (ms % 1000 && n < len) {
                snprintf(buf + n, len - n, ".%03u", (unsigned)(ms % 1000));
                n = strlen(buf);
                while (n > 0 && buf[n - 1] == '0')
                        buf[--n] = 0;
        }
}

/* Appends name, item i of n, to the list in buf (len bytes, *o of them used): "a, b, c"
 * with `last` (" and ", " or ") before the last item. Stops at len. */
static void list_append(char *buf, size_t len, size_t *o, size_t i, size_t n, const char *last,
                        const char *name) {
        if (*o < len)
                *o += (size_t)snprintf(buf + *o, len - *o, "%s%s",
                                       i == 0      ? ""
                                       : i + 1 < n ? ", "
                                                   : last,
                                       name);
}

/* The outcomes a run_command result can have, by their libsbx names: "exited, ...,
 * queue_timeout or unknown" (a sandbox that ended under the command is an error of the
 * call, not a result). */
static void result_outcomes(char *buf, size_t len) {
        static const enum sbx_outcome v[] = {
                SBX_OUTCOME_EXITED,        SBX_OUTCOME_SIGNALED,  SBX_OUTCOME_TIMED_OUT,
                SBX_OUTCOME_OUT_OF_MEMORY, SBX_OUTCOME_CANCELLED, SBX_OUTCOME_START_FAILED,
                SBX_OUTCOME_QUEUE_TIMEOUT, SBX_OUTCOME_UNKNOWN,   SBX_OUTCOME_RUNNING,
        };
        size_t n = sizeof(v) / sizeof(v[0]), o = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n; i++)
                list_append(buf, len, &o, i, n, " or ", sbx_outcome_name(v[i]));
}

/* template with {DEFAULT_TIMEOUT}, {MAX_TIMEOUT}, {MAX_OUTPUT_BYTES},
 * {MAX_OUTPUT_LINES}, {MAX_READ_BYTES} and {OUTCOMES} filled in. A new string, NULL
 * when memory runs out. */
static char *expand(const char *tmpl, const struct mcp_env *env) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return NULL;
        for (const char *p = tmpl; *p; p++) {
                char v[256];
                const char *end = *p == '{' ? strchr(p, '}') : NULL;
                size_t n = end ? (size_t)(end - p - 1) : 0;
                v[0] = 0;
                if (end && n == 15 && strncmp(p + 1, "DEFAULT_TIMEOUT", n) == 0)
                        fmt_secs(v, sizeof(v), env->default_timeout_ms);
                else if (end && n == 11 && strncmp(p + 1, "MAX_TIMEOUT", n) == 0)
                        fmt_secs(v, sizeof(v), env->max_timeout_ms);
                else if (end && n == 16 && strncmp(p + 1, "MAX_OUTPUT_BYTES", n) == 0)
                        snprintf(v, sizeof(v), "%llu", (unsigned long long)env->max_output_bytes);
                else if (end && n == 16 && strncmp(p + 1, "MAX_OUTPUT_LINES", n) == 0)
                        snprintf(v, sizeof(v), "%llu", (unsigned long long)env->max_output_lines);
                else if (end && n == 14 && strncmp(p + 1, "MAX_READ_BYTES", n) == 0)
                        snprintf(v, sizeof(v), "%llu", (unsigned long long)env->max_read_bytes);
                else if (end && n == 8 && strncmp(p + 1, "OUTCOMES", n) == 0)
                        result_outcomes(v, sizeof(v));
                if (v[0]) {
                        fputs(v, f);
                        p = end;
                } else {
                        fputc(*p, f);
                }
        }
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

/* s quoted for a POSIX shell, into buf (cut when it does not fit). For hints only. */
static const char *sh_quote(char *buf, size_t len, const char *s) {
        size_t o = 0;

        if (len < 8)
                return "FILE";
        buf[o++] = '\'';
        for (; *s && o + 6 < len; s++) {
                if (*s == '\'') {
                        memcpy(buf + o, "'\\''", 4);
                        o += 4;
                } else if ((unsigned char)*s >= 0x20) {
                        buf[o++] = *s;
                }
        }
        buf[o++] = '\'';
        buf[o] = 0;
        return buf;
}

/* ---- results ----------------------------------------------------------------------------- */

static json_t *text_block(const char *text, size_t len) {
        json_t *t = cli_json_text(text, len);
        return t ? json_pack("{s:s,s:o}", "type", "text", "text", t) : NULL;
}

/* A CallToolResult: text (bytes, made valid UTF-8), structured (taken, may be NULL; left
 * out for a client before 2025-06-18), isError when is_error. NULL when memory runs
 * out. */
static json_t *make_result(struct mcp_call *k, const char *text, size_t len, json_t *structured,
                           bool is_error) {
        json_t *block = text_block(text, len);
        json_t *r = block ? json_pack("{s:[o]}", "content", block) : NULL;

        if (r && structured && k->structured)
                json_object_set_new(r, "structuredContent", json_incref(structured));
        if (r && is_error)
                json_object_set_new(r, "isError", json_true());
        json_decref(structured);
        return r;
}

/* Ends the call with a JSON-RPC error; returns NULL. data is taken. */
__attribute__((format(printf, 4, 5))) static json_t *fail(struct mcp_call *k, int code,
                                                          json_t *data, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        mcp_call_clear(k);
        k->err_code = code;
        k->err_message = m;
        k->err_data = data;
        return NULL;
}

static json_t *out_of_memory(struct mcp_call *k) {
        return fail(k, MCP_INTERNAL_ERROR, NULL, "sbx mcp ran out of memory");
}

/* A result with isError true whose text is the message. */
__attribute__((format(printf, 2, 3))) static json_t *tool_error(struct mcp_call *k, const char *fmt,
                                                                ...) {
        va_list ap;
        char *m = NULL;
        json_t *r;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (!m)
                return out_of_memory(k);
        r = make_result(k, m, strlen(m), NULL, true);
        free(m);
        return r ? r : out_of_memory(k);
}

/* The result of a call whose text was written to a memstream f (closed here). */
static json_t *stream_result(struct mcp_call *k, FILE *f, char **buf, size_t *len,
                             json_t *structured, bool is_error) {
        json_t *r;

        if (fclose(f) != 0) {
                json_decref(structured);
                free(*buf);
                return out_of_memory(k);
        }
        r = make_result(k, *buf, *len, structured, is_error);
        free(*buf);
        *buf = NULL;
        return r ? r : out_of_memory(k);
}

/* ---- failures of the daemon --------------------------------------------------------------- */

static bool transport_failed(const sbx_client *c, enum sbx_code rc) {
        return rc == SBX_UNAVAILABLE && sbx_errno(c) != 0;
}

static json_t *daemon_gone(struct mcp_call *k, const char *why) {
        return fail(k, MCP_DAEMON_GONE,
                    json_pack("{s:s,s:b}", "sandbox_id", k->env->sandbox_id, "retryable", 0),
                    "sbxd cannot be reached (%s): stop using this server until sbxd runs again",
                    why);
}

/* Asks the daemon whether the sandbox is still there and live. Returns true when it
 * is; false after failing the call with a JSON-RPC error saying it has ended, or that
 * sbxd is gone. */
static bool sandbox_live(struct mcp_call *k) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code rc = sbx_get(k->c, k->env->sandbox_id, &sb);
        const char *id = k->env->sandbox_id;
        bool live;

        if (transport_failed(k->c, rc)) {
                daemon_gone(k, sbx_error_message(k->c));
                return false;
        }
        if (rc == SBX_NOT_FOUND) {
                fail(k, MCP_SANDBOX_ENDED,
                     json_pack("{s:s,s:s,s:b}", "sandbox_id", id, "state", "gone", "retryable", 0),
                     "sandbox '%s' no longer exists: stop using this server (%s)", id,
                     k->env->owned ? "start it again for a new sandbox"
                                   : "attach it to a live sandbox");
                return false;
        }
        if (rc != SBX_OK)
                return true; /* cannot tell: let the failure speak for itself */
        live = sb->state == SBX_STATE_READY || sb->state == SBX_STATE_CREATING;
        if (!live)
                fail(k, MCP_SANDBOX_ENDED,
                     json_pack("{s:s,s:s,s:s?,s:b}", "sandbox_id", id, "state",
                               sbx_state_name(sb->state), "end_reason", sb->end_reason, "retryable",
                               0),
                     "sandbox '%s' has ended (%s%s%s): stop using this server (%s)", id,
                     sbx_state_name(sb->state), sb->end_reason ? ": " : "",
                     sb->end_reason ? sb->end_reason : "",
                     k->env->owned ? "start it again for a new sandbox"
                                   : "attach it to a live sandbox");
        sbx_sandbox_free(sb);
        return live;
}

/* A libsbx call failed with rc: an isError result with the daemon's message ("CODE:
 * message"), or NULL and a JSON-RPC error when the sandbox has ended or the daemon
 * cannot be reached. */
static json_t *call_failed(struct mcp_call *k, enum sbx_code rc) {
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", sbx_error_message(k->c));
        if (!msg[0])
                snprintf(msg, sizeof(msg), "the call failed without a message");
        if (transport_failed(k->c, rc))
                return daemon_gone(k, msg);
        if ((rc == SBX_NOT_FOUND || rc == SBX_FAILED_PRECONDITION || rc == SBX_SANDBOX_ENDED ||
             rc == SBX_UNAVAILABLE) &&
            !sandbox_live(k))
                return NULL;
        return tool_error(k, "%s: %s", sbx_code_name(rc), msg);
}

/* ---- arguments ------------------------------------------------------------------------------
 * Each reader returns 0 when the argument is absent, 1 when it was read, -1 after
 * writing why it is wrong into msg. */

struct argmsg {
        char text[512];
};

__attribute__((format(printf, 2, 3))) static int bad_arg(struct argmsg *m, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->text, sizeof(m->text), fmt, ap);
        va_end(ap);
        return -1;
}

/* Refuses keys of args not in known (NULL-terminated), naming the ones there are. */
static int check_keys(json_t *args, const char *const *known, struct argmsg *m) {
        const char *key;
        json_t *v;

        json_object_foreach(args, key, v) {
                size_t i;
                char list[256] = "";
                for (i = 0; known[i]; i++)
                        if (strcmp(known[i], key) == 0)
                                break;
                if (known[i])
                        continue;
                for (i = 0; known[i]; i++) {
                        size_t n = strlen(list);
                        snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "", known[i]);
                }
                return bad_arg(m, "unknown argument '%.64s'; the arguments are: %s", key,
                               known[0] ? list : "none");
        }
        return 0;
}

/* A string; with text false it must hold no NUL (a path, a name). */
static int arg_str(json_t *args, const char *name, bool text, const char **ret, size_t *ret_len,
                   struct argmsg *m) {
        json_t *v = json_object_get(args, name);

        if (!v)
                return 0;
        if (!json_is_string(v))
                return bad_arg(m, "'%s' must be a string", name);
        if (!text && strlen(json_string_value(v)) != json_string_length(v))
                return bad_arg(m, "'%s' must not contain a NUL character", name);
        *ret = json_string_value(v);
        if (ret_len)
                *ret_len = json_string_length(v);
        return 1;
}

/* A path: a non-empty string. */
static int arg_path(json_t *args, const char *name, const char **ret, struct argmsg *m) {
        int r = arg_str(args, name, false, ret, NULL, m);
        if (r > 0 && !**ret)
                return bad_arg(m, "'%s' is empty; give a path such as /workspace/notes.txt", name);
        return r;
}

static int arg_uint(json_t *args, const char *name, uint64_t min, uint64_t *ret, struct argmsg *m) {
        json_t *v = json_object_get(args, name);
        double d;

        if (!v)
                return 0;
        /* 3.0 is as good as 3 (some clients send every number as a float). */
        d = json_is_integer(v) ? (double)json_integer_value(v)
            : json_is_real(v)  ? json_real_value(v)
                               : NAN;
        if (!json_is_number(v) || d != floor(d) || d < (double)min || d > 9.0e15)
                return bad_arg(m, "'%s' must be an integer >= %llu", name, (unsigned long long)min);
        *ret = (uint64_t)d;
        return 1;
}

static int arg_bool(json_t *args, const char *name, bool *ret, struct argmsg *m) {
        json_t *v = json_object_get(args, name);

        if (!v)
                return 0;
        if (!json_is_boolean(v))
                return bad_arg(m, "'%s' must be true or false", name);
        *ret = json_is_true(v);
        return 1;
}

static json_t *bad_args(struct mcp_call *k, const char *tool, const struct argmsg *m) {
        return tool_error(k, "invalid arguments for %s: %s", tool, m->text);
}

/* ---- run_command ------------------------------------------------------------------------- */

/* The part of a stream's kept tail to show, and what that drops. */
struct tail {
        const uint8_t *p;
        size_t len;
        uint64_t total;       /* bytes the command wrote */
        uint64_t dropped;     /* bytes not shown */
        size_t lines_dropped; /* exact when exact_lines */
        size_t lines_shown;
        bool exact_lines;
};

/* Cuts data (the tail the daemon kept of total bytes) to its last max_bytes bytes and
 * max_lines lines, starting on a character boundary. */
static void cut_tail(const uint8_t *d, size_t len, uint64_t total, uint64_t max_bytes,
                     uint64_t max_lines, struct tail *t) {
        size_t start = 0, end = len, i, lines = 0;

        if (len > max_bytes)
                start = len - (size_t)max_bytes;
        /* A last line without its newline counts as a line; a final newline ends one. */
        if (end > 0 && d[end - 1] == '\n')
                end--;
        for (i = end; i > start; i--) {
                if (d[i - 1] == '\n' && ++lines == max_lines) {
                        start = i;
                        break;
                }
        }
        /* A cut inside a UTF-8 sequence would show as U+FFFD: skip its tail bytes. */
        if (start > 0 || total > len)
                for (int k = 0; k < 3 && start < len && (d[start] & 0xC0) == 0x80; k++)
                        start++;
        memset(t, 0, sizeof(*t));
        t->p = d + start;
        t->len = len - start;
        t->total = total > len ? total : len;
        t->dropped = t->total - t->len;
        t->exact_lines = total <= len && (start == 0 || d[start - 1] == '\n');
        for (i = 0; i < start; i++)
                t->lines_dropped += d[i] == '\n';
        for (i = start; i < len; i++)
                t->lines_shown += d[i] == '\n';
        if (t->len && d[len - 1] != '\n')
                t->lines_shown++;
}

/* Writes "[label]", the cut marker, and the tail; returns the tail as a JSON string. */
static json_t *put_stream(FILE *f, const char *label, const struct tail *t) {
        fprintf(f, "[%s]\n", label);
        if (t->dropped) {
                if (t->exact_lines)
                        fprintf(f,
                                "[... cut: the first %zu lines (%llu bytes) of %s are dropped; "
                                "the last %zu lines follow ...]\n",
                                t->lines_dropped, (unsigned long long)t->dropped, label,
                                t->lines_shown);
                else
                        fprintf(f,
                                "[... cut: the first %llu of %llu bytes of %s are dropped; the "
                                "last %zu bytes follow ...]\n",
                                (unsigned long long)t->dropped, (unsigned long long)t->total, label,
                                t->len);
        }
        if (!t->len) {
                fputs(t->dropped ? "" : "(none)\n", f);
        } else {
                size_t n;
                char *s = cli_utf8_valid(t->p, t->len, &n);
                if (s) {
                        fwrite(s, 1, n, f);
                        if (s[n - 1] != '\n')
                                fputc('\n', f);
                        free(s);
                }
        }
        return cli_json_text(t->p, t->len);
}

static bool call_cancelled(struct mcp_call *k) {
        bool c;
        if (!k->lock)
                return false;
        pthread_mutex_lock(k->lock);
        c = *k->cancelled;
        pthread_mutex_unlock(k->lock);
        return c;
}

/* The arguments of run_command, read and checked. */
struct run_args {
        struct sbx_exec_opts o;
        const char **argv;
        char **env; /* "K=V", owned */
        size_t n_env;
        uint64_t asked_ms; /* 0: not given */
        bool background;   /* run_command's `background` */
        bool attached;     /* command_output: its timeout is not known here */
};

static void run_args_free(struct run_args *a) {
        for (size_t i = 0; i < a->n_env; i++)
                free(a->env[i]);
        free(a->env);
        free(a->argv);
}

/* 'argv': 1 to MCP_MAX_ARGV strings without NUL, the program first, into a->o. */
static int read_argv(json_t *argv, struct run_args *a, struct argmsg *m) {
        size_t n = json_is_array(argv) ? json_array_size(argv) : 0;

        if (!json_is_array(argv) || n == 0 || n > MCP_MAX_ARGV)
                return bad_arg(m, "'argv' must be a list of 1 to %u strings, the program first",
                               MCP_MAX_ARGV);
        a->argv = calloc(n, sizeof(*a->argv));
        if (!a->argv)
                return bad_arg(m, "out of memory");
        for (size_t i = 0; i < n; i++) {
                json_t *w = json_array_get(argv, i);
                if (!json_is_string(w) || strlen(json_string_value(w)) != json_string_length(w))
                        return bad_arg(m,
                                       "'argv' must hold strings without NUL characters; item "
                                       "%zu does not",
                                       i);
                a->argv[i] = json_string_value(w);
        }
        if (!a->argv[0][0])
                return bad_arg(m, "'argv' starts with an empty program name");
        a->o.argv = a->argv;
        a->o.argc = n;
        return 0;
}

/* 'env': an object of names to string values, as "NAME=VALUE" entries of a->o. */
static int read_env(json_t *envo, struct run_args *a, struct argmsg *m) {
        const char *key;
        json_t *v;

        if (!json_is_object(envo) || json_object_size(envo) > MCP_MAX_ENV)
                return bad_arg(m, "'env' must be an object of names to string values");
        a->env = calloc(json_object_size(envo) + 1, sizeof(*a->env));
        if (!a->env)
                return bad_arg(m, "out of memory");
        json_object_foreach(envo, key, v) {
                if (!json_is_string(v) || !*key || strchr(key, '=') ||
                    strlen(json_string_value(v)) != json_string_length(v))
                        return bad_arg(m,
                                       "'env' entry '%.64s' must have a name without '=' and a "
                                       "string value without NUL",
                                       key);
                if (asprintf(&a->env[a->n_env], "%s=%s", key, json_string_value(v)) < 0)
                        return bad_arg(m, "out of memory");
                a->n_env++;
        }
        a->o.env = (const char *const *)a->env;
        a->o.n_env = a->n_env;
        return 0;
}

/* 'timeout_seconds' (to may be NULL; a->background read first). A command the call
 * waits for: the server's default, or what is asked (kept in a->asked_ms) up to the
 * server's maximum, more than 0. A background one, which no call waits for: none
 * unless given (0: none too), and what is given as it is (sbxd --max-command-timeout
 * bounds it, naming itself); none runs until it exits or the sandbox ends. */
static int read_timeout(const struct mcp_env *env, json_t *to, struct run_args *a,
                        struct argmsg *m) {
        char most[32];
        double s;

        a->o.no_timeout = a->background;
        a->o.timeout_ms = a->background ? 0 : env->default_timeout_ms;
        if (!to)
                return 0;
        s = json_number_value(to);
        if (!json_is_number(to) || !(s >= 0) || !isfinite(s))
                return bad_arg(m, "'timeout_seconds' must be a number of seconds > 0 (0: none, "
                                  "with background: true only)");
        fmt_secs(most, sizeof(most), env->max_timeout_ms);
        if (s == 0 && !a->background)
                return bad_arg(m,
                               "'timeout_seconds' 0 (no timeout) is for background: true only: "
                               "a command this call waits for needs one above 0 (at most %s); "
                               "start longer work with background: true",
                               most);
        a->asked_ms = s * 1000.0 > 9.0e15 ? (uint64_t)9e15 : (uint64_t)ceil(s * 1000.0);
        if (a->background) {
                a->o.timeout_ms = a->asked_ms;
                a->o.no_timeout = a->asked_ms == 0;
                return 0;
        }
        a->o.timeout_ms = a->asked_ms < env->max_timeout_ms ? a->asked_ms : env->max_timeout_ms;
        return 0;
}

/* 'queue_timeout_seconds' (q may be NULL: the daemon's default): how long the command
 * may wait for a slot, 0 for not at all. */
static int read_queue_timeout(json_t *q, struct run_args *a, struct argmsg *m) {
        double s;

        if (!q)
                return 0;
        s = json_number_value(q);
        if (!json_is_number(q) || !(s >= 0) || !isfinite(s))
                return bad_arg(m, "'queue_timeout_seconds' must be a number of seconds >= 0 "
                                  "(0: do not wait for a slot)");
        a->o.has_queue_timeout = 1;
        a->o.queue_timeout_ms = s * 1000.0 > 9.0e15 ? (uint64_t)9e15 : (uint64_t)ceil(s * 1000.0);
        return 0;
}

static int read_run_args(struct mcp_call *k, json_t *args, struct run_args *a, struct argmsg *m) {
        static const char *const known[] = {"command",    "argv",  "timeout_seconds",
                                            "cwd",        "env",   "queue_timeout_seconds",
                                            "background", "stdin", NULL};
        json_t *argv = json_object_get(args, "argv"), *envo = json_object_get(args, "env");
        const char *in = NULL;
        size_t stdin_len = 0;

        sbx_exec_opts_init(&a->o);
        if (check_keys(args, known, m) < 0 ||
            arg_str(args, "command", false, &a->o.shell, NULL, m) < 0 ||
            arg_path(args, "cwd", &a->o.cwd, m) < 0 ||
            arg_str(args, "stdin", true, &in, &stdin_len, m) < 0 ||
            arg_bool(args, "background", &a->background, m) < 0)
                return -1;
        a->o.stdin_data = in;
        a->o.stdin_len = stdin_len;
        if (a->o.shell && argv)
                return bad_arg(m, "give either 'command' (a shell line) or 'argv' (a program and "
                                  "its arguments), not both");
        if (!a->o.shell && !argv)
                return bad_arg(m, "give 'command', a shell command line such as \"ls -la\", or "
                                  "'argv', such as [\"ls\", \"-la\"]");
        if (a->o.shell && !a->o.shell[0])
                return bad_arg(m, "'command' is empty");
        if (argv && read_argv(argv, a, m) < 0)
                return -1;
        if (envo && read_env(envo, a, m) < 0)
                return -1;
        if (read_timeout(k->env, json_object_get(args, "timeout_seconds"), a, m) < 0 ||
            read_queue_timeout(json_object_get(args, "queue_timeout_seconds"), a, m) < 0)
                return -1;
        a->o.max_stdout_bytes = a->o.max_stderr_bytes = k->env->max_output_bytes;
        return 0;
}

/* The line that says how the command ended (dur: how long it ran; lim: its timeout; bg:
 * it ran in the background). */
static void put_ending(FILE *f, const struct mcp_call *k, const struct sbx_result *r,
                       const char *dur, const char *lim, bool bg) {
        const char *sig = r->has_signal ? sigabbrev_np(r->signal) : NULL;
        char most[32];

        switch (r->outcome) {
        case SBX_OUTCOME_EXITED:
                fprintf(f, "[exit code %d after %s]\n", r->has_exit_code ? r->exit_code : -1, dur);
                break;
        case SBX_OUTCOME_SIGNALED:
        case SBX_OUTCOME_TIMED_OUT:
                if (r->outcome == SBX_OUTCOME_SIGNALED && !r->timed_out) {
                        fprintf(f, "[killed by signal %d%s%s%s after %s]\n", r->signal,
                                sig ? " (SIG" : "", sig ? sig : "", sig ? ")" : "", dur);
                        break;
                }
                if (bg) {
                        fprintf(f,
                                "[timed out: killed after %s (its timeout_seconds); start it "
                                "again with background: true and a larger timeout_seconds, or "
                                "without one to let it run until it exits or the sandbox "
                                "ends]\n",
                                lim);
                        break;
                }
                fmt_secs(most, sizeof(most), k->env->max_timeout_ms);
                fprintf(f,
                        "[timed out: killed after %s (timeout_seconds); give a larger "
                        "timeout_seconds (at most %s), or start it with background: true "
                        "and read it later with command_output]\n",
                        lim, most);
                break;
        case SBX_OUTCOME_OUT_OF_MEMORY:
                fprintf(f, "[killed: out of memory (the sandbox's memory limit) after %s]\n", dur);
                break;
        case SBX_OUTCOME_CANCELLED:
                fputs("[cancelled: the command was killed at the client's request]\n", f);
                break;
        case SBX_OUTCOME_START_FAILED:
                fputs("[could not start: ", f);
                cli_put_text(f, r->start_error ? r->start_error : "no reason given");
                fputs("]\n", f);
                break;
        case SBX_OUTCOME_UNKNOWN:
                fputs("[the outcome is unknown: sbxd restarted while the command ran]\n", f);
                break;
        case SBX_OUTCOME_QUEUE_TIMEOUT:
                fprintf(f,
                        "[did not run: no slot within %.3g s (queue_timeout_seconds); the "
                        "sandbox runs its maximum of commands at once. Try again later, or give "
                        "a larger queue_timeout_seconds]\n",
                        (double)r->queued_ms / 1000.0);
                break;
        case SBX_OUTCOME_RUNNING: /* a background command (command_output) */
                fprintf(f,
                        "[still running after %s: command %s runs in the background; call "
                        "command_output again to read more, with wait_seconds to wait for its "
                        "end, or stop: true to kill it]\n",
                        dur, r->command_id);
                break;
        case SBX_OUTCOME_SANDBOX_ENDED:
        case SBX_OUTCOME_UNSPECIFIED:
                fprintf(f, "[ended: %s]\n", sbx_outcome_name(r->outcome));
                break;
        }
}

/* The status lines after the output: how the command ended, and why it was cut short. */
static void put_status(FILE *f, const struct mcp_call *k, const struct sbx_result *r,
                       const struct run_args *a) {
        char dur[32], lim[32], asked[32], until[48];

        if (r->duration < 0.0005)
                snprintf(dur, sizeof(dur), "less than 1 ms");
        else if (r->duration < 1)
                snprintf(dur, sizeof(dur), "%.0f ms", r->duration * 1000.0);
        else
                snprintf(dur, sizeof(dur), "%.2f s", r->duration);
        fmt_secs(lim, sizeof(lim), a->o.timeout_ms);
        /* command_output knows the timeout from the daemon (an older one does not say). */
        if (a->attached && r->has_timeout_ms && r->timeout_ms) {
                fmt_secs(until, sizeof(until) - 2, r->timeout_ms);
                strcat(until, " s");
        } else if (a->attached) {
                snprintf(until, sizeof(until), "its timeout_seconds");
        } else {
                snprintf(until, sizeof(until), "%s s", lim);
        }
        put_ending(f, k, r, dur, until, a->background || a->attached);
        if (r->queued_ms && r->outcome != SBX_OUTCOME_QUEUE_TIMEOUT)
                fprintf(f, "[waited %.3g s for a slot first: other commands ran in the sandbox]\n",
                        (double)r->queued_ms / 1000.0);
        if (r->limits_hit.n) {
                fputs("[limits hit:", f);
                for (size_t i = 0; i < r->limits_hit.n; i++) {
                        fputs(i ? ", " : " ", f);
                        cli_put_text(f, r->limits_hit.v[i]);
                }
                fputs("]\n", f);
        }
        if (a->asked_ms > a->o.timeout_ms) {
                fmt_secs(asked, sizeof(asked), a->asked_ms);
                fprintf(f, "[timeout_seconds %s was lowered to this server's maximum, %s]\n", asked,
                        lim);
        }
        for (size_t i = 0; i < r->warnings.n; i++) {
                fputs("[warning: ", f);
                cli_put_text(f, r->warnings.v[i]);
                fputs("]\n", f);
        }
}

static json_t *strv_json(const struct sbx_strv *s) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < s->n; i++)
                json_array_append_new(a, cli_json_text(s->v[i], strlen(s->v[i])));
        return a;
}

/* structuredContent's timeout_seconds: the command's own timeout (command_output: as
 * the daemon reports it), null for none or, from an older daemon, unknown. */
static json_t *timeout_json(const struct run_args *a, const struct sbx_result *r) {
        uint64_t ms = a->attached ? (r && r->has_timeout_ms ? r->timeout_ms : 0) : a->o.timeout_ms;

        return ms ? json_real((double)ms / 1000.0) : json_null();
}

/* run_command's structuredContent for r (jout and jerr, the shown tails, are taken
 * over). NULL when out of memory. */
static json_t *run_structured(const struct sbx_result *r, const struct run_args *a,
                              const struct tail *out, const struct tail *err, json_t *jout,
                              json_t *jerr) {
        bool timed_out = r->timed_out || r->outcome == SBX_OUTCOME_TIMED_OUT;

        return json_pack(
                "{s:s,s:s,s:o,s:o,s:b,s:o,s:f,s:I,s:o*,s:o*,s:b,s:b,s:I,s:I,s:o*,s:o*}",
                "command_id", r->command_id, "outcome", sbx_outcome_name(r->outcome), "exit_code",
                r->has_exit_code ? json_integer(r->exit_code) : json_null(), "signal",
                r->has_signal ? json_integer(r->signal) : json_null(), "timed_out", timed_out,
                "timeout_seconds", timeout_json(a, r), "duration_seconds", r->duration, "queued_ms",
                (json_int_t)r->queued_ms, "stdout", jout, "stderr", jerr, "stdout_truncated",
                out->dropped > 0, "stderr_truncated", err->dropped > 0, "stdout_bytes",
                (json_int_t)out->total, "stderr_bytes", (json_int_t)err->total, "limits_hit",
                strv_json(&r->limits_hit), "warnings", strv_json(&r->warnings));
}

/* The result of a command that ran (or could not start): the tails of its output and
 * the status lines as text, and run_structured; an error result unless it exited 0. */
static json_t *run_result(struct mcp_call *k, const struct sbx_result *r,
                          const struct run_args *a) {
        struct tail out, err;
        char *text = NULL;
        size_t text_len = 0;
        json_t *st, *jout, *jerr;
        bool is_error;
        FILE *f;

        cut_tail(r->stdout_data, r->stdout_len, r->stdout_bytes, k->env->max_output_bytes,
                 k->env->max_output_lines, &out);
        cut_tail(r->stderr_data, r->stderr_len, r->stderr_bytes, k->env->max_output_bytes,
                 k->env->max_output_lines, &err);
        f = open_memstream(&text, &text_len);
        if (!f)
                return out_of_memory(k);
        jout = put_stream(f, "stdout", &out);
        jerr = put_stream(f, "stderr", &err);
        put_status(f, k, r, a);
        is_error = !(r->outcome == SBX_OUTCOME_EXITED && r->has_exit_code && r->exit_code == 0) &&
                   r->outcome != SBX_OUTCOME_RUNNING;
        st = run_structured(r, a, &out, &err, jout, jerr);
        if (!st) {
                fclose(f);
                free(text);
                return out_of_memory(k);
        }
        return stream_result(k, f, &text, &text_len, st, is_error);
}

/* run_command with `background`: started, its id at once; or, when it never started,
 * its result as for any command. */
static json_t *run_background(struct mcp_call *k, struct run_args *a) {
        struct sbx_background *b = NULL;
        enum sbx_code rc = sbx_exec_background(k->c, k->env->sandbox_id, &a->o, &b);
        char *text = NULL, lim[32];
        json_t *res;

        if (rc != SBX_OK)
                return call_failed(k, rc);
        if (b->result) {
                res = run_result(k, b->result, a);
                sbx_background_free(b);
                return res;
        }
        fmt_secs(lim, sizeof(lim), a->o.timeout_ms);
        if (asprintf(&text,
                     "[started in the background as command %s%s; it runs until it exits, is "
                     "stopped, or %s%s%s. Read its output and status with command_output "
                     "{\"command_id\": \"%s\"}, wait for it with wait_seconds, stop it with "
                     "stop: true]\n",
                     b->command_id, b->queued ? " (it waits for a slot first)" : "",
                     a->o.timeout_ms ? "its timeout_seconds (" : "the sandbox ends (no timeout)",
                     a->o.timeout_ms ? lim : "", a->o.timeout_ms ? " s) kill it" : "",
                     b->command_id) < 0)
                text = NULL;
        res = text ? make_result(k, text, strlen(text),
                                 json_pack("{s:s,s:s,s:n,s:n,s:b,s:o,s:s,s:s,s:I,s:I}",
                                           "command_id", b->command_id, "outcome",
                                           b->queued ? "queued" : "running", "exit_code", "signal",
                                           "timed_out", 0, "timeout_seconds", timeout_json(a, NULL),
                                           "stdout", "", "stderr", "", "stdout_bytes",
                                           (json_int_t)0, "stderr_bytes", (json_int_t)0),
                                 false)
                   : out_of_memory(k);
        free(text);
        sbx_background_free(b);
        return res;
}

static json_t *run_command(struct mcp_call *k, json_t *args) {
        struct run_args a = {0};
        struct argmsg m = {""};
        struct sbx_result *r = NULL;
        json_t *res = NULL;
        enum sbx_code rc;

        if (read_run_args(k, args, &a, &m) < 0) {
                res = bad_args(k, "run_command", &m);
                goto out;
        }
        /* Cancelled before it started: nothing to run (the server sends no answer). */
        if (call_cancelled(k)) {
                res = tool_error(k, "cancelled before it started");
                goto out;
        }
        if (a.background) {
                res = run_background(k, &a);
                goto out;
        }
        rc = sbx_exec(k->c, k->env->sandbox_id, &a.o, &r);
        if (!r || (rc != SBX_OK && r->outcome != SBX_OUTCOME_START_FAILED)) {
                res = call_failed(k, rc);
                goto out;
        }
        if (r->outcome == SBX_OUTCOME_SANDBOX_ENDED) {
                if (sandbox_live(k)) /* it says it ended: believe the command */
                        fail(k, MCP_SANDBOX_ENDED,
                             json_pack("{s:s,s:b}", "sandbox_id", k->env->sandbox_id, "retryable",
                                       0),
                             "sandbox '%s' ended while the command ran: stop using this server",
                             k->env->sandbox_id);
                goto out;
        }
        res = run_result(k, r, &a);
out:
        sbx_result_free(r);
        run_args_free(&a);
        return res;
}

/* ---- command_output ---------------------------------------------------------------------------
 */

/* command_output: a background command's kept output and status, after waiting (up to
 * wait_seconds) for its end, or killing it (stop). */
static json_t *command_output(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"command_id", "wait_seconds", "stop", NULL};
        struct run_args a = {0};
        struct sbx_attach_opts ao;
        struct argmsg m = {""};
        struct sbx_result *r = NULL;
        json_t *w = json_object_get(args, "wait_seconds");
        bool stop = false;
        double secs = 0;
        enum sbx_code rc;
        json_t *res;

        memset(&ao, 0, sizeof(ao));
        if (check_keys(args, known, &m) < 0 ||
            arg_str(args, "command_id", false, &ao.command_id, NULL, &m) < 0 ||
            arg_bool(args, "stop", &stop, &m) < 0)
                return bad_args(k, "command_output", &m);
        if (!ao.command_id || !ao.command_id[0]) {
                bad_arg(&m, "give 'command_id', as run_command returned it (e.g. \"c-3\")");
                return bad_args(k, "command_output", &m);
        }
        if (w) {
                secs = json_number_value(w);
                if (!json_is_number(w) || !(secs >= 0) || !isfinite(secs)) {
                        bad_arg(&m, "'wait_seconds' must be a number of seconds >= 0");
                        return bad_args(k, "command_output", &m);
                }
        }
        if (stop && (rc = sbx_cancel(k->c, k->env->sandbox_id, ao.command_id)) != SBX_OK &&
            rc != SBX_NOT_FOUND) /* an ended one reports how it ended */
                return call_failed(k, rc);
        ao.wait_ms = secs * 1000.0 > (double)k->env->max_timeout_ms ? k->env->max_timeout_ms
                                                                    : (uint64_t)ceil(secs * 1000.0);
        /* A killed one ends as soon as init reaps it: wait for that. */
        if (stop && ao.wait_ms < 10000)
                ao.wait_ms = 10000;
        ao.follow = ao.wait_ms > 0;
        ao.max_output_bytes = k->env->max_output_bytes;
        rc = sbx_attach(k->c, k->env->sandbox_id, &ao, &r);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        a.attached = true;
        res = run_result(k, r, &a);
        sbx_result_free(r);
        return res;
}

/* ---- reading whole files ------------------------------------------------------------------- */

/* A file read whole for read_file and edit_file. */
struct whole {
        uint8_t *data;
        size_t len;
        uint32_t mode;
};

static bool looks_binary(const uint8_t *d, size_t len) {
        size_t n = len < MCP_SNIFF_BYTES ? len : MCP_SNIFF_BYTES;

        if (memchr(d, 0, len))
                return true;
        /* Latin-1 or a stray byte is text with a few U+FFFD; a tenth is not text. */
        return cli_utf8_invalid_bytes(d, n) * 10 > n;
}

/* Checks that path is a file read_file or edit_file (tool) can take whole: a regular
 * file (or a link to one) of at most env->max_read_bytes. Sets w->mode, the mode to keep
 * when it is written back (a link's own is not the file's). Returns 0 when it can, else
 * -1 with *ret the result or error that says why not (NULL for an error of the call
 * itself, in k->err_code). */
static int check_whole(struct mcp_call *k, const char *tool, const char *path, struct whole *w,
                       json_t **ret) {
        const uint64_t max = k->env->max_read_bytes;
        struct sbx_file_info *fi = NULL;
        enum sbx_code rc;
        uint64_t size;
        char q[512];

        rc = sbx_stat(k->c, k->env->sandbox_id, path, &fi);
        if (rc != SBX_OK)
                return *ret = call_failed(k, rc), -1;
        w->mode = fi->type == SBX_FILE_REGULAR ? fi->mode & 01777 : 0;
        size = fi->type == SBX_FILE_REGULAR ? fi->size : 0;
        if (fi->is_dir) {
                sbx_file_info_free(fi);
                return *ret = tool_error(k, "'%s' is a directory; list it with list_directory",
                                         path),
                       -1;
        }
        if (fi->type != SBX_FILE_REGULAR && fi->type != SBX_FILE_SYMLINK) {
                sbx_file_info_free(fi);
                return *ret = tool_error(k, "'%s' is not a regular file; %s reads regular files",
                                         path, tool),
                       -1;
        }
        sbx_file_info_free(fi);
        if (size <= max)
                return 0;
        sh_quote(q, sizeof(q), path);
        *ret = tool_error(k,
                          "'%s' is %llu bytes, more than %s takes (%llu bytes); look at parts "
                          "of it with run_command: `sed -n '1,200p' %s` for lines, `head -c "
                          "65536 %s` or `tail -c 65536 %s` for bytes, `grep -n PATTERN %s` to "
                          "find a place, `wc -l %s` to count its lines",
                          path, (unsigned long long)size, tool, (unsigned long long)max, q, q, q, q,
                          q);
        return -1;
}

/* Appends r's bytes to w (NUL-terminated; *cap is w->data's room). 0 or -ENOMEM. */
static int whole_append(struct whole *w, size_t *cap, const struct sbx_read_result *r) {
        if (w->len + r->len + 1 > *cap) {
                size_t ncap = (w->len + r->len + 1) * 2;
                uint8_t *nd = realloc(w->data, ncap);
                if (!nd)
                        return -ENOMEM;
                w->data = nd;
                *cap = ncap;
        }
        memcpy(w->data + w->len, r->data, r->len);
        w->len += r->len;
        w->data[w->len] = 0;
        return 0;
}

/* Reads path page by page into w->data (NUL-terminated, at most env->max_read_bytes).
 * Returns 0, or -1 with *ret as check_whole's (w->data freed then). */
static int read_pages(struct mcp_call *k, const char *path, struct whole *w, json_t **ret) {
        const uint64_t max = k->env->max_read_bytes;
        uint64_t off = 0;
        size_t cap = 0;
        bool done;

        for (;;) {
                struct sbx_read_result *r = NULL;
                uint64_t want = max + 1 - w->len;
                enum sbx_code rc =
                        sbx_read(k->c, k->env->sandbox_id, path, off,
                                 want > CLI_READ_PAGE_BYTES ? CLI_READ_PAGE_BYTES : want, &r);
                if (rc != SBX_OK) {
                        *ret = call_failed(k, rc);
                        goto failed;
                }
                if (whole_append(w, &cap, r) < 0) {
                        sbx_read_result_free(r);
                        *ret = out_of_memory(k);
                        goto failed;
                }
                off = r->next_offset > off ? r->next_offset : off + r->len;
                done = r->eof || r->len == 0;
                sbx_read_result_free(r);
                if (done)
                        break;
                if (w->len > max) {
                        *ret = tool_error(k,
                                          "'%s' grew past %llu bytes while it was read; look at "
                                          "parts of it with run_command",
                                          path, (unsigned long long)max);
                        goto failed;
                }
        }
        if (!w->data && !(w->data = calloc(1, 1)))
                return *ret = out_of_memory(k), -1;
        return 0;
failed:
        free(w->data);
        w->data = NULL;
        return -1;
}

/* Reads the text file path whole into w (at most env->max_read_bytes). NULL when it did
 * (free w->data); else the result or error that says why not. */
static json_t *read_whole(struct mcp_call *k, const char *tool, const char *path, struct whole *w) {
        json_t *why = NULL;
        char q[512];
        bool nul;

        memset(w, 0, sizeof(*w));
        if (check_whole(k, tool, path, w, &why) < 0 || read_pages(k, path, w, &why) < 0)
                return why;
        if (!looks_binary(w->data, w->len))
                return NULL;
        nul = memchr(w->data, 0, w->len) != NULL;
        free(w->data);
        w->data = NULL;
        sh_quote(q, sizeof(q), path);
        return tool_error(k,
                          "'%s' looks binary (%s), and %s handles text; look at it with "
                          "run_command: `file %s`, `xxd %s | head -n 32`, or `base64 %s` for its "
                          "bytes",
                          path, nul ? "it holds NUL bytes" : "much of it is not UTF-8", tool, q, q,
                          q);
}

/* ---- read_file ------------------------------------------------------------------------------ */

/* Lines of s: its newlines, and one more for a last line without one. */
static size_t count_lines(const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                n += s[i] == '\n';
        return n + (len && s[len - 1] != '\n');
}

/* A page of a text file: lines [offset, offset + n) of its total, bytes [pos, end) of
 * its data. A first line longer than a page is cut on a character boundary (long_line,
 * line_len its whole length). */
struct page {
        uint64_t offset;
        size_t total, pos, end, n, line_len;
        bool long_line;
};

/* Finds the page of w from line p->offset (before the end) of at most limit lines and
 * max_bytes bytes. */
static void find_page(const struct whole *w, uint64_t limit, uint64_t max_bytes, struct page *p) {
        for (uint64_t i = 0; i < p->offset; i++) {
                const uint8_t *nl = memchr(w->data + p->pos, '\n', w->len - p->pos);
                p->pos = nl ? (size_t)(nl - w->data) + 1 : w->len;
        }
        p->end = p->pos;
        while (p->n < limit && p->end < w->len) {
                const uint8_t *nl = memchr(w->data + p->end, '\n', w->len - p->end);
                size_t line_end = nl ? (size_t)(nl - w->data) + 1 : w->len;
                if (line_end - p->pos > max_bytes) {
                        if (p->n == 0) {
                                /* One line longer than a page: its head, on a character
                                 * boundary. */
                                p->line_len = line_end - p->pos;
                                p->end = p->pos + (size_t)max_bytes;
                                while (p->end > p->pos && (w->data[p->end] & 0xC0) == 0x80)
                                        p->end--;
                                p->long_line = true;
                                p->n = 1;
                        }
                        break;
                }
                p->end = line_end;
                p->n++;
        }
}

/* The note after a page: a cut line, where the page is and how to read on, or the end. */
static void put_page_note(FILE *f, const char *path, const struct page *p) {
        unsigned long long first = (unsigned long long)p->offset + 1;
        size_t shown = p->end - p->pos;
        char q[512];

        sh_quote(q, sizeof(q), path);
        if (p->long_line)
                fprintf(f,
                        "[... line %llu is %zu bytes long; only its first %zu bytes are shown. "
                        "See the rest with run_command, e.g. `sed -n '%llup' %s | cut -b "
                        "%zu-%zu`; read on with offset=%llu ...]\n",
                        first, p->line_len, shown, first, q, shown + 1, 2 * shown, first);
        else if (p->offset + p->n < p->total)
                fprintf(f, "[... lines %llu-%llu of %zu shown; read on with offset=%llu ...]\n",
                        first, (unsigned long long)(p->offset + p->n), p->total,
                        (unsigned long long)(p->offset + p->n));
        else if (p->offset > 0)
                fprintf(f, "[lines %llu-%zu of %zu: the end of the file]\n", first, p->total,
                        p->total);
}

/* read_file's structuredContent (content taken over). NULL when out of memory. */
static json_t *page_structured(const char *path, json_t *content, const struct page *p,
                               size_t size) {
        bool more = p->offset + p->n < p->total;

        return json_pack("{s:s,s:o,s:I,s:I,s:I,s:o,s:I}", "path", path, "content", content,
                         "offset", (json_int_t)p->offset, "lines", (json_int_t)p->n, "total_lines",
                         (json_int_t)p->total, "next_offset",
                         more ? json_integer((json_int_t)(p->offset + p->n)) : json_null(),
                         "size_bytes", (json_int_t)size);
}

static json_t *read_file(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"path", "offset", "limit", NULL};
        struct argmsg m = {""};
        struct page pg = {0};
        struct whole w;
        const char *path = NULL;
        uint64_t limit = k->env->max_output_lines;
        char *text = NULL;
        size_t text_len = 0;
        json_t *res, *st, *content;
        FILE *f;

        if (check_keys(args, known, &m) < 0 || arg_path(args, "path", &path, &m) < 0 ||
            arg_uint(args, "offset", 0, &pg.offset, &m) < 0 ||
            arg_uint(args, "limit", 1, &limit, &m) < 0)
                return bad_args(k, "read_file", &m);
        if (!path) {
                snprintf(m.text, sizeof(m.text), "'path' is required");
                return bad_args(k, "read_file", &m);
        }
        if (limit > k->env->max_output_lines)
                limit = k->env->max_output_lines;
        if ((res = read_whole(k, "read_file", path, &w)) || k->err_code)
                return res;
        pg.total = count_lines((const char *)w.data, w.len);
        if (pg.offset > 0 && pg.offset >= pg.total) {
                free(w.data);
                return tool_error(k, "offset %llu is past the end of '%s', which has %zu line%s",
                                  (unsigned long long)pg.offset, path, pg.total,
                                  pg.total == 1 ? "" : "s");
        }
        find_page(&w, limit, k->env->max_output_bytes, &pg);
        f = open_memstream(&text, &text_len);
        content = cli_json_text(w.data + pg.pos, pg.end - pg.pos);
        if (!f || !content) {
                if (f)
                        fclose(f);
                free(text);
                json_decref(content);
                free(w.data);
                return out_of_memory(k);
        }
        if (w.len == 0) {
                fputs("[the file is empty]\n", f);
        } else {
                fputs(json_string_value(content), f);
                if (pg.end > pg.pos && w.data[pg.end - 1] != '\n')
                        fputc('\n', f);
        }
        put_page_note(f, path, &pg);
        st = page_structured(path, content, &pg, w.len);
        free(w.data);
        if (!st) {
                fclose(f);
                free(text);
                return out_of_memory(k);
        }
        return stream_result(k, f, &text, &text_len, st, false);
}

/* ---- write_file and edit_file -------------------------------------------------------------- */

/* Writes data to path atomically, parents created, keeping mode (0: the default). */
static enum sbx_code put_file(struct mcp_call *k, const char *path, const void *data, size_t len,
                              uint32_t mode) {
        return sbx_write(k->c, k->env->sandbox_id, path, data, len, mode & 01777,
                         SBX_WRITE_CREATE_PARENTS);
}

static json_t *write_file(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"path", "content", NULL};
        struct argmsg m = {""};
        const char *path = NULL, *content = NULL;
        size_t len = 0;
        struct sbx_file_info *fi = NULL;
        uint32_t mode = 0;
        bool existed = false;
        enum sbx_code rc;

        if (check_keys(args, known, &m) < 0 || arg_path(args, "path", &path, &m) < 0 ||
            arg_str(args, "content", true, &content, &len, &m) < 0)
                return bad_args(k, "write_file", &m);
        if (!path || !content) {
                snprintf(m.text, sizeof(m.text), "'path' and 'content' are required");
                return bad_args(k, "write_file", &m);
        }
        if (len > k->env->max_read_bytes)
                return tool_error(k,
                                  "'content' is %zu bytes, more than write_file takes (%llu "
                                  "bytes, as much as read_file reads); write the first part with "
                                  "write_file and append the rest in parts with run_command "
                                  "(command \"cat >> FILE\", the text as stdin)",
                                  len, (unsigned long long)k->env->max_read_bytes);
        rc = sbx_stat(k->c, k->env->sandbox_id, path, &fi);
        if (rc == SBX_OK) {
                existed = true;
                if (fi->is_dir) {
                        sbx_file_info_free(fi);
                        return tool_error(k, "'%s' is a directory; give the path of a file in it",
                                          path);
                }
                if (fi->type == SBX_FILE_REGULAR)
                        mode = fi->mode;
        } else if (rc != SBX_NOT_FOUND) {
                return call_failed(k, rc);
        }
        sbx_file_info_free(fi);
        rc = put_file(k, path, content, len, mode);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        {
                char msg[1200];
                json_t *res;
                snprintf(msg, sizeof(msg), "Wrote %zu bytes (%zu lines) to %s (%s).", len,
                         count_lines(content, len), path,
                         existed ? "replaced the file; its permission bits are kept"
                                 : "a new file");
                res = make_result(k, msg, strlen(msg), NULL, false);
                return res ? res : out_of_memory(k);
        }
}

/* Occurrences of needle in hay, not overlapping. */
static size_t count_occurrences(const uint8_t *hay, size_t len, const char *needle, size_t nlen) {
        size_t n = 0;
        const uint8_t *p = hay, *end = hay + len;

        while ((size_t)(end - p) >= nlen) {
                const uint8_t *hit = memmem(p, (size_t)(end - p), needle, nlen);
                if (!hit)
                        break;
                n++;
                p = hit + nlen;
        }
        return n;
}

/* What edit_file replaces: old (old_len bytes, not empty) by new (new_len), once, or
 * every time with all. */
struct edit {
        const char *path, *old_s, *new_s;
        size_t old_len, new_len;
        bool all;
};

/* Reads edit_file's arguments into e. 0, or a bad-arguments result or error in *ret. */
static int edit_args(struct mcp_call *k, json_t *args, struct edit *e, json_t **ret) {
        static const char *const known[] = {"path", "old_string", "new_string", "replace_all",
                                            NULL};
        struct argmsg m = {""};

        if (check_keys(args, known, &m) < 0 || arg_path(args, "path", &e->path, &m) < 0 ||
            arg_str(args, "old_string", true, &e->old_s, &e->old_len, &m) < 0 ||
            arg_str(args, "new_string", true, &e->new_s, &e->new_len, &m) < 0 ||
            arg_bool(args, "replace_all", &e->all, &m) < 0)
                return *ret = bad_args(k, "edit_file", &m), -1;
        if (!e->path || !e->old_s || !e->new_s) {
                snprintf(m.text, sizeof(m.text),
                         "'path', 'old_string' and 'new_string' are required");
                return *ret = bad_args(k, "edit_file", &m), -1;
        }
        if (!e->old_len)
                return *ret = tool_error(k, "old_string is empty; to write a whole file use "
                                            "write_file"),
                       -1;
        if (e->old_len == e->new_len && memcmp(e->old_s, e->new_s, e->old_len) == 0)
                return *ret = tool_error(k, "old_string and new_string are the same; nothing to "
                                            "change"),
                       -1;
        return 0;
}

/* w's text with each of the count occurrences of e's old string replaced (malloc'd,
 * NUL-terminated, *ret_len bytes), or NULL when out of memory. */
static uint8_t *replace_text(const struct whole *w, const struct edit *e, size_t count,
                             size_t *ret_len) {
        const uint8_t *p = w->data, *end = w->data + w->len;
        uint8_t *out, *o;

        if (e->new_len > e->old_len && (e->new_len - e->old_len) > (SIZE_MAX - w->len) / count)
                return NULL;
        *ret_len = w->len - count * e->old_len + count * e->new_len;
        out = malloc(*ret_len + 1);
        for (o = out; out && p < end;) {
                const uint8_t *hit = (size_t)(end - p) >= e->old_len
                                             ? memmem(p, (size_t)(end - p), e->old_s, e->old_len)
                                             : NULL;
                size_t keep = hit ? (size_t)(hit - p) : (size_t)(end - p);
                memcpy(o, p, keep);
                o += keep;
                if (!hit)
                        break;
                memcpy(o, e->new_s, e->new_len);
                o += e->new_len;
                p = hit + e->old_len;
        }
        return out;
}

static json_t *edit_file(struct mcp_call *k, json_t *args) {
        struct edit e = {0};
        struct whole w;
        size_t count, out_len = 0;
        uint8_t *out;
        enum sbx_code rc;
        json_t *res = NULL;
        char msg[1200];

        if (edit_args(k, args, &e, &res) < 0)
                return res;
        if ((res = read_whole(k, "edit_file", e.path, &w)) || k->err_code)
                return res;
        count = count_occurrences(w.data, w.len, e.old_s, e.old_len);
        if (count == 0) {
                free(w.data);
                return tool_error(k,
                                  "old_string was not found in '%s'; it must match the file "
                                  "exactly, whitespace and indentation included (read_file "
                                  "shows the current text)",
                                  e.path);
        }
        if (count > 1 && !e.all) {
                free(w.data);
                return tool_error(k,
                                  "old_string occurs %zu times in '%s'; take in more of the "
                                  "lines around it to make it unique, or set replace_all to "
                                  "true to replace all %zu",
                                  count, e.path, count);
        }
        out = replace_text(&w, &e, count, &out_len);
        free(w.data);
        if (!out)
                return out_of_memory(k);
        rc = put_file(k, e.path, out, out_len, w.mode);
        free(out);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        snprintf(msg, sizeof(msg), "Replaced %zu occurrence%s in %s (now %zu bytes).", count,
                 count == 1 ? "" : "s", e.path, out_len);
        res = make_result(k, msg, strlen(msg), NULL, false);
        return res ? res : out_of_memory(k);
}

/* ---- list_directory ------------------------------------------------------------------------ */

static int cmp_entries(const void *a, const void *b) {
        return strcmp(((const struct sbx_file_info *)a)->name,
                      ((const struct sbx_file_info *)b)->name);
}

/* One entry of a listing: a line of text ("name/" for a directory, "-> target" for a
 * link) and an object of entries. */
static void put_entry(FILE *f, json_t *entries, const struct sbx_file_info *e) {
        json_t *target = e->symlink_target
                                 ? cli_json_text(e->symlink_target, strlen(e->symlink_target))
                                 : json_null();

        cli_put_text(f, e->name);
        if (e->is_dir)
                fputc('/', f);
        if (e->type == SBX_FILE_SYMLINK && e->symlink_target) {
                fputs(" -> ", f);
                cli_put_text(f, e->symlink_target);
        }
        fputc('\n', f);
        json_array_append_new(entries,
                              json_pack("{s:o,s:s,s:I,s:b,s:o}", "name",
                                        cli_json_text(e->name, strlen(e->name)), "type",
                                        cli_file_type_name(e->type), "size", (json_int_t)e->size,
                                        "is_dir", e->is_dir, "symlink_target", target));
}

/* The note after a listing: empty, or cut and how to see the rest. */
static void put_list_note(FILE *f, const char *path, const struct sbx_dir_list *l) {
        char q[512];

        if (!l->n)
                fputs("[the directory is empty]\n", f);
        if (!l->truncated)
                return;
        sh_quote(q, sizeof(q), path);
        fprintf(f,
                "[... cut at %zu entries (the first by name); list a narrower part with "
                "run_command, e.g. `ls -A %s | tail -n +%zu | head -n 100` or `find %s "
                "-maxdepth 1 -name 'PATTERN'` ...]\n",
                l->n, q, l->n + 1, q);
}

static json_t *list_directory(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"path", NULL};
        struct argmsg m = {""};
        const char *path = "/workspace";
        struct sbx_dir_list *l = NULL;
        uint64_t limit = k->env->max_output_lines;
        enum sbx_code rc;
        char *text = NULL;
        size_t text_len = 0;
        json_t *entries, *st;
        FILE *f;

        if (check_keys(args, known, &m) < 0 || arg_path(args, "path", &path, &m) < 0)
                return bad_args(k, "list_directory", &m);
        if (limit > SBX_MAX_LIST_LIMIT)
                limit = SBX_MAX_LIST_LIMIT;
        rc = sbx_list_dir(k->c, k->env->sandbox_id, path, (uint32_t)limit, &l);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        if (l->n > 1)
                qsort(l->v, l->n, sizeof(*l->v), cmp_entries);
        f = open_memstream(&text, &text_len);
        entries = json_array();
        if (!f || !entries) {
                if (f)
                        fclose(f);
                free(text);
                json_decref(entries);
                sbx_dir_list_free(l);
                return out_of_memory(k);
        }
        for (size_t i = 0; i < l->n; i++)
                put_entry(f, entries, &l->v[i]);
        put_list_note(f, path, l);
        st = json_pack("{s:s,s:o,s:b}", "path", path, "entries", entries, "truncated",
                       l->truncated);
        sbx_dir_list_free(l);
        if (!st) {
                fclose(f);
                free(text);
                return out_of_memory(k);
        }
        return stream_result(k, f, &text, &text_len, st, false);
}

/* ---- sandbox_info ------------------------------------------------------------------------- */

/* The limits object of sandbox_info: each limit given that sbx mcp shows, keyed by its
 * field's name. NULL when out of memory. */
static json_t *limits_json(const struct sbx_limits *l) {
        json_t *o = json_object();

        if (!o)
                return NULL;
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                if (!t->mcp_name || !libsbx_limit_given(l, t))
                        continue;
                if (t->type == LIBSBX_LIMIT_DOUBLE)
                        json_object_set_new(o, t->field, json_real(libsbx_limit_double(l, t)));
                else if (t->type == LIBSBX_LIMIT_BOOL)
                        json_object_set_new(o, t->field, json_boolean(libsbx_limit_uint(l, t)));
                else
                        json_object_set_new(o, t->field,
                                            json_integer((json_int_t)libsbx_limit_uint(l, t)));
        }
        return o;
}

static void put_strv_line(FILE *f, const char *key, const struct sbx_strv *s, const char *none) {
        fprintf(f, "%s: ", key);
        if (!s->n)
                fputs(none, f);
        for (size_t i = 0; i < s->n; i++) {
                fputs(i ? ", " : "", f);
                cli_put_text(f, s->v[i]);
        }
        fputc('\n', f);
}

/* The lines about the sandbox itself: its id and mode, state, deadline (*left_ms, and
 * iso its time), idle timeout, owner. */
static void put_identity(FILE *f, sbx_client *c, const struct mcp_env *env,
                         const struct sbx_sandbox *sb, int64_t *left_ms, char *iso,
                         size_t iso_size) {
        char a[32];

        fputs("sandbox: ", f);
        cli_put_text(f, sb->id);
        fprintf(f, " (%s)\n",
                env->owned ? (env->keep ? "created by this server; left running when it stops"
                                        : "created by this server; ended when it stops")
                           : "attached: other clients may use it too; left running when this "
                             "server stops");
        fprintf(f, "state: %s\n", sbx_state_name(sb->state));
        if (sb->deadline_unix_ms) {
                *left_ms = sb->deadline_unix_ms - cli_now_unix_ms();
                cli_format_iso(iso, iso_size, sb->deadline_unix_ms, false);
                fprintf(f, "deadline: %s (in %lld s)%s\n", iso,
                        (long long)(*left_ms > 0 ? (*left_ms + 999) / 1000 : 0),
                        env->lease ? "; this server moves it on while it runs" : "");
        }
        if (sb->idle_timeout_ms) {
                fmt_secs(a, sizeof(a), sb->idle_timeout_ms);
                fprintf(f, "idle timeout: %s s\n", a);
        }
        fprintf(f, "owner: uid %u%s\n", sb->owner_uid,
                sb->owner_uid == cli_self_uid(c) ? " (this server's user)"
                                                 : " (not this server's user: its owner sees "
                                                   "and can change what runs here)");
}

/* The line of the limits a policy sets that sbx mcp shows ("none" without any). */
static void put_limits_line(FILE *f, const struct sbx_limits *l) {
        char text[LIBSBX_LIMIT_TEXT_BYTES];

        fputs("limits:", f);
        if (!l->set)
                fputs(" none", f);
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                if (!t->mcp_name || !libsbx_limit_given(l, t))
                        continue;
                fprintf(f, " %s=%s%s", t->mcp_name, libsbx_limit_text(l, t, text), t->mcp_unit);
        }
        fputc('\n', f);
}

/* The lines of the policy: network, what is writable, what is hidden, the limits. */
static const char *network_word(enum sbx_network n) {
        return n == SBX_NETWORK_FULL ? "full" : n == SBX_NETWORK_ALLOWLIST ? "allowlist" : "none";
}

static void put_policy_lines(FILE *f, const struct sbx_policy *pol) {
        fprintf(f, "network: %s\n", network_word(pol->network));
        if (pol->network == SBX_NETWORK_ALLOWLIST) {
                fputs("allowed hosts (through the proxy in HTTP_PROXY/HTTPS_PROXY): ", f);
                for (size_t i = 0; i < pol->allowed_hosts.n; i++) {
                        fputs(i ? ", " : "", f);
                        cli_put_text(f, pol->allowed_hosts.v[i]);
                }
                for (size_t i = 0; i < pol->allowed_cidrs.n; i++) {
                        fputs(i || pol->allowed_hosts.n ? ", " : "", f);
                        cli_put_text(f, pol->allowed_cidrs.v[i]);
                }
                fputs(pol->allowed_hosts.n || pol->allowed_cidrs.n ? "\n" : "none\n", f);
        }
        fputs("writable: /workspace, /tmp", f);
        for (size_t i = 0; i < pol->writable_paths.n; i++) {
                fputs(", ", f);
                cli_put_text(f, pol->writable_paths.v[i]);
        }
        fputs(" (everything else is read-only)\n", f);
        fputs("hidden (cannot be read): ", f);
        if (pol->protect_defaults)
                fputs("the host's credentials and secrets (protect_defaults)", f);
        for (size_t i = 0; i < pol->denied_read_paths.n; i++) {
                fputs(i || pol->protect_defaults ? ", " : "", f);
                cli_put_text(f, pol->denied_read_paths.v[i]);
        }
        fputs(!pol->protect_defaults && !pol->denied_read_paths.n ? "nothing\n" : "\n", f);
        put_limits_line(f, &pol->limits);
}

/* The line of the workspace's disk limit and what enforces it, when it has one. */
static void put_disk_line(FILE *f, const struct sbx_sandbox *sb) {
        const char *how = "none";

        if (!(sb->policy.limits.set & SBX_LIMIT_DISK))
                return;
        for (size_t i = 0; i < sb->n_enforcement; i++)
                if (strcmp(sb->enforcement[i].limit, "disk") == 0)
                        how = sb->enforcement[i].enforcement;
        fprintf(f,
                "disk: /workspace holds at most %llu bytes (disk=%s); a write past it fails "
                "with \"No space left on device\"\n",
                (unsigned long long)sb->policy.limits.disk_bytes, how);
}

/* The line of this server's own limits. */
static void put_server_line(FILE *f, const struct mcp_env *env) {
        char a[32], b[32];

        fmt_secs(a, sizeof(a), env->default_timeout_ms);
        fmt_secs(b, sizeof(b), env->max_timeout_ms);
        fprintf(f,
                "this server: commands time out after %s s unless timeout_seconds says "
                "otherwise (at most %s s); each output stream is cut to its last %llu bytes and "
                "%llu lines; read_file reads, and write_file writes, files up to %llu bytes\n",
                a, b, (unsigned long long)env->max_output_bytes,
                (unsigned long long)env->max_output_lines, (unsigned long long)env->max_read_bytes);
}

/* sandbox_info's structuredContent (iso: the deadline's time). NULL when out of memory. */
static json_t *info_structured(const struct mcp_env *env, const struct sbx_sandbox *sb,
                               int64_t left_ms, const char *iso) {
        json_t *server = json_pack("{s:f,s:f,s:I,s:I,s:I}", "default_timeout_seconds",
                                   (double)env->default_timeout_ms / 1000.0, "max_timeout_seconds",
                                   (double)env->max_timeout_ms / 1000.0, "max_output_bytes",
                                   (json_int_t)env->max_output_bytes, "max_output_lines",
                                   (json_int_t)env->max_output_lines, "max_read_bytes",
                                   (json_int_t)env->max_read_bytes);

        return json_pack(
                "{s:s,s:s,s:s,s:I,s:o,s:o,s:s,s:o,s:o,s:b,s:o,s:o,s:b,s:o,s:I,s:I,s:I,s:o}", "id",
                sb->id, "state", sbx_state_name(sb->state), "mode",
                env->owned ? "owned" : "attached", "owner_uid", (json_int_t)sb->owner_uid,
                "deadline", sb->deadline_unix_ms ? json_string(iso) : json_null(), "seconds_left",
                sb->deadline_unix_ms ? json_real((double)(left_ms > 0 ? left_ms : 0) / 1000.0)
                                     : json_null(),
                "network", network_word(sb->policy.network), "allowed_hosts",
                strv_json(&sb->policy.allowed_hosts), "allowed_cidrs",
                strv_json(&sb->policy.allowed_cidrs), "protect_defaults",
                sb->policy.protect_defaults, "writable_paths",
                strv_json(&sb->policy.writable_paths), "limits", limits_json(&sb->policy.limits),
                "isolated", sb->isolated, "warnings", strv_json(&sb->warnings), "commands_run",
                (json_int_t)sb->commands_run, "running_commands", (json_int_t)sb->running_commands,
                "queued_commands", (json_int_t)sb->queued_commands, "server", server);
}

static json_t *sandbox_info(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {NULL};
        const struct mcp_env *env = k->env;
        struct argmsg m = {""};
        struct sbx_sandbox *sb = NULL;
        enum sbx_code rc;
        char *text = NULL, iso[64] = "";
        size_t text_len = 0;
        int64_t left_ms = 0;
        json_t *st;
        FILE *f;

        if (check_keys(args, known, &m) < 0)
                return bad_args(k, "sandbox_info", &m);
        rc = sbx_get(k->c, env->sandbox_id, &sb);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        if (sb->state != SBX_STATE_READY && sb->state != SBX_STATE_CREATING) {
                sbx_sandbox_free(sb);
                sandbox_live(k);
                return k->err_code ? NULL : tool_error(k, "the sandbox is not live");
        }
        f = open_memstream(&text, &text_len);
        if (!f) {
                sbx_sandbox_free(sb);
                return out_of_memory(k);
        }
        put_identity(f, k->c, env, sb, &left_ms, iso, sizeof(iso));
        put_policy_lines(f, &sb->policy);
        put_disk_line(f, sb);
        fprintf(f, "isolated: %s\n", sb->isolated ? "yes" : "no (see the warnings)");
        put_strv_line(f, "warnings", &sb->warnings, "none");
        fprintf(f, "commands: %llu run, %u running, %u waiting for a slot\n",
                (unsigned long long)sb->commands_run, sb->running_commands, sb->queued_commands);
        put_server_line(f, env);
        st = info_structured(env, sb, left_ms, iso);
        sbx_sandbox_free(sb);
        if (!st) {
                fclose(f);
                free(text);
                return out_of_memory(k);
        }
        return stream_result(k, f, &text, &text_len, st, false);
}

/* ---- snapshot -------------------------------------------------------------------------------- */

static json_t *snapshot(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"name", NULL};
        struct argmsg m = {""};
        struct sbx_image *img = NULL;
        const char *name = NULL, *shown;
        enum sbx_code rc;
        json_t *st, *r;
        char *text = NULL;

        if (check_keys(args, known, &m) < 0 || arg_str(args, "name", false, &name, NULL, &m) < 0)
                return bad_args(k, "snapshot", &m);
        rc = sbx_snapshot(k->c, k->env->sandbox_id, name, &img);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        shown = img->names.n ? img->names.v[0] : img->digest;
        st = json_pack("{s:s,s:s,s:I}", "name", shown, "digest", img->digest, "size_bytes",
                       (json_int_t)img->size_bytes);
        if (asprintf(&text,
                     "snapshot %s (%s): a sandbox made from it (sbx create --image %s) starts "
                     "with these files\n",
                     shown, img->digest, shown) < 0)
                text = NULL;
        sbx_image_free(img);
        if (!st || !text) {
                json_decref(st);
                free(text);
                return out_of_memory(k);
        }
        r = make_result(k, text, strlen(text), st, false);
        free(text);
        return r ? r : out_of_memory(k);
}

static json_t *restore(struct mcp_call *k, json_t *args) {
        static const char *const known[] = {"snapshot", NULL};
        struct argmsg m = {""};
        struct sbx_sandbox *sb = NULL;
        const char *name = NULL;
        enum sbx_code rc;
        json_t *st, *r;
        char *text = NULL;

        if (check_keys(args, known, &m) < 0 ||
            arg_str(args, "snapshot", false, &name, NULL, &m) < 0)
                return bad_args(k, "restore", &m);
        if (!name || !name[0]) {
                snprintf(m.text, sizeof(m.text),
                         "'snapshot' is required: the name the snapshot tool returned");
                return bad_args(k, "restore", &m);
        }
        rc = sbx_restore(k->c, k->env->sandbox_id, name, &sb);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        st = json_pack("{s:s,s:s,s:s}", "id", sb->id, "snapshot", name, "digest",
                       sb->image_digest ? sb->image_digest : "");
        if (asprintf(&text,
                     "restored sandbox %s from %s: its files are the snapshot's; the processes "
                     "that ran in it were ended\n",
                     sb->id, name) < 0)
                text = NULL;
        sbx_sandbox_free(sb);
        if (!st || !text) {
                json_decref(st);
                free(text);
                return out_of_memory(k);
        }
        r = make_result(k, text, strlen(text), st, false);
        free(text);
        return r ? r : out_of_memory(k);
}

/* ---- http_request ------------------------------------------------------------------------- */

#define HTTP_DEFAULT_PORT       8000u
#define HTTP_DEFAULT_TIMEOUT_MS 30000u
/* The status line and headers kept: a server that sends more is cut there. */
#define HTTP_MAX_HEAD_BYTES (64u * 1024u)

/* The arguments of http_request, read and checked. */
struct http_args {
        const char *method, *path, *body;
        size_t body_len;
        json_t *headers; /* borrowed from args; NULL: none */
        uint64_t port, timeout_ms;
};

/* What came back: the head (status line and headers), the body's start, and counts. */
struct http_reply {
        char head[HTTP_MAX_HEAD_BYTES + 1];
        size_t head_len;
        bool head_done; /* the blank line after the headers was met */
        uint8_t *body;
        size_t body_len, body_cap;
        uint64_t body_bytes; /* all of it, kept or not */
        bool timed_out;
};

/* A token of RFC 9110 (a method, a header's name). */
static bool http_token(const char *s) {
        if (!*s || strlen(s) > 64)
                return false;
        for (; *s; s++)
                if (!(isalnum((unsigned char)*s) || strchr("!#$%&'*+-.^_`|~", *s)))
                        return false;
        return true;
}

/* Text that may go in a request line or a header value: no CR, LF or NUL. */
static bool http_clean(const char *s, bool spaces) {
        for (; *s; s++)
                if (*s == '\r' || *s == '\n' || (!spaces && *s == ' '))
                        return false;
        return true;
}

static int http_read_headers(json_t *args, struct http_args *a, struct argmsg *m) {
        const char *key;
        json_t *v;

        a->headers = json_object_get(args, "headers");
        if (!a->headers)
                return 0;
        if (!json_is_object(a->headers))
                return bad_arg(m, "'headers' must be an object of names and string values");
        json_object_foreach(a->headers, key, v) {
                if (!http_token(key))
                        return bad_arg(m, "header name '%.64s' is not a valid token", key);
                if (!json_is_string(v) || !http_clean(json_string_value(v), true) ||
                    strlen(json_string_value(v)) != json_string_length(v))
                        return bad_arg(m, "header '%.64s' must be a string without CR, LF or "
                                          "NUL", key);
        }
        return 0;
}

static int http_read_args(const struct mcp_env *env, json_t *args, struct http_args *a,
                          struct argmsg *m) {
        static const char *const known[] = {"method", "path", "headers", "body",
                                            "port", "timeout_seconds", NULL};
        json_t *to = json_object_get(args, "timeout_seconds");
        double s;

        *a = (struct http_args){.method = "GET", .path = "/", .port = HTTP_DEFAULT_PORT};
        a->timeout_ms = HTTP_DEFAULT_TIMEOUT_MS < env->max_timeout_ms ? HTTP_DEFAULT_TIMEOUT_MS
                                                                      : env->max_timeout_ms;
        if (check_keys(args, known, m) < 0 || arg_str(args, "method", false, &a->method, NULL, m) < 0 ||
            arg_str(args, "path", false, &a->path, NULL, m) < 0 ||
            arg_str(args, "body", true, &a->body, &a->body_len, m) < 0 ||
            arg_uint(args, "port", 1, &a->port, m) < 0 || http_read_headers(args, a, m) < 0)
                return -1;
        if (!http_token(a->method))
                return bad_arg(m, "'method' '%.64s' is not an HTTP method (GET, POST, ...)",
                               a->method);
        if (a->path[0] != '/' || !http_clean(a->path, false))
                return bad_arg(m, "'path' must start with / and hold no space, CR or LF "
                                  "(percent-encode them)");
        if (a->port > 65535)
                return bad_arg(m, "'port' must be 1 to 65535");
        if (!to)
                return 0;
        s = json_number_value(to);
        if (!json_is_number(to) || !(s > 0) || !isfinite(s))
                return bad_arg(m, "'timeout_seconds' must be a number of seconds > 0");
        a->timeout_ms = s * 1000.0 >= (double)env->max_timeout_ms ? env->max_timeout_ms
                                                                  : (uint64_t)ceil(s * 1000.0);
        return 0;
}

/* The request's bytes (a new buffer, *ret_len long), or NULL when memory runs out. */
static char *http_build(const struct http_args *a, size_t *ret_len) {
        char *buf = NULL;
        const char *key;
        bool host = false;
        json_t *v;
        FILE *f = open_memstream(&buf, ret_len);

        if (!f)
                return NULL;
        fprintf(f, "%s %s HTTP/1.1\r\n", a->method, a->path);
        json_object_foreach(a->headers, key, v) {
                if (!strcasecmp(key, "connection") || !strcasecmp(key, "content-length"))
                        continue;
                host |= !strcasecmp(key, "host");
                fprintf(f, "%s: %s\r\n", key, json_string_value(v));
        }
        if (!host)
                fprintf(f, "Host: localhost:%llu\r\n", (unsigned long long)a->port);
        if (a->body || strcmp(a->method, "POST") == 0 || strcmp(a->method, "PUT") == 0)
                fprintf(f, "Content-Length: %zu\r\n", a->body_len);
        fputs("Connection: close\r\n\r\n", f);
        if (a->body_len)
                fwrite(a->body, 1, a->body_len, f);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Takes n bytes the server sent into r: the head until its blank line, then the body,
 * kept up to max bytes. -ENOMEM or 0. */
static int http_take(struct http_reply *r, const uint8_t *p, size_t n, uint64_t max) {
        while (n > 0 && !r->head_done) {
                char *end;
                if (r->head_len < HTTP_MAX_HEAD_BYTES)
                        r->head[r->head_len++] = (char)*p;
                p++, n--;
                r->head[r->head_len] = '\0';
                end = r->head_len >= 4 ? r->head + r->head_len - 4 : NULL;
                /* A head longer than is kept ends there: the rest counts as the body. */
                r->head_done = (end && memcmp(end, "\r\n\r\n", 4) == 0) ||
                               r->head_len == HTTP_MAX_HEAD_BYTES;
        }
        r->body_bytes += n;
        if (n > 0 && r->body_len < max) {
                size_t keep = n < max - r->body_len ? n : (size_t)(max - r->body_len);
                if (r->body_len + keep > r->body_cap) {
                        size_t cap = r->body_cap ? r->body_cap * 2 : 65536;
                        uint8_t *nb;
                        while (cap < r->body_len + keep)
                                cap *= 2;
                        if (!(nb = realloc(r->body, cap)))
                                return -ENOMEM;
                        r->body = nb;
                        r->body_cap = cap;
                }
                memcpy(r->body + r->body_len, p, keep);
                r->body_len += keep;
        }
        return 0;
}

/* Sends req on fd and reads the answer to its end, until the deadline (then
 * r->timed_out) or a cancel. 0 or -errno. */
static int http_exchange(struct mcp_call *k, int fd, const char *req, size_t len,
                         int64_t deadline, struct http_reply *r) {
        size_t off = 0;
        uint8_t buf[65536];

        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN | (off < len ? POLLOUT : 0)};
                int64_t left = deadline - cli_now_unix_ms();
                ssize_t n;
                if (left <= 0 || call_cancelled(k)) {
                        r->timed_out = true;
                        return 0;
                }
                if (poll(&p, 1, left < 200 ? (int)left : 200) <= 0)
                        continue;
                if (off < len && (p.revents & POLLOUT)) {
                        n = send(fd, req + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n > 0)
                                off += (size_t)n;
                }
                if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n == 0)
                        return 0;
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return errno == ECONNRESET && r->head_done ? 0 : -errno;
                if (n > 0 && http_take(r, buf, (size_t)n, k->env->max_output_bytes) < 0)
                        return -ENOMEM;
        }
}

/* Decodes a chunked body in place when it is whole and well formed; else leaves it. */
/* The size of a chunk from its line (len bytes, without its CRLF: hex digits, then
 * maybe ";extensions"), read within the line only. false when it is none. */
static bool chunk_size(const uint8_t *p, size_t len, unsigned long long *ret) {
        unsigned long long n = 0;
        size_t i;

        for (i = 0; i < len && p[i] != ';'; i++) {
                int d = isdigit(p[i]) ? p[i] - '0'
                        : isxdigit(p[i]) ? (tolower(p[i]) - 'a' + 10)
                                         : -1;
                if (d < 0 || i >= 15) /* not hex, or past any size a reply could have */
                        return false;
                n = n * 16 + (unsigned)d;
        }
        *ret = n;
        return i > 0;
}

static void http_dechunk(struct http_reply *r) {
        size_t in = 0, out = 0;

        while (in < r->body_len) {
                const uint8_t *crlf = memmem(r->body + in, r->body_len - in, "\r\n", 2);
                unsigned long long n;
                if (!crlf || !chunk_size(r->body + in, (size_t)(crlf - (r->body + in)), &n))
                        return;
                in = (size_t)(crlf - r->body) + 2;
                if (n == 0) {
                        r->body_len = out;
                        r->body_bytes = out;
                        return;
                }
                if (n > r->body_len - in)
                        return;
                memmove(r->body + out, r->body + in, n);
                out += n;
                in += n + 2;
        }
}

/* The reply's headers as an object (a repeated name's values joined with ", "); the
 * status code and reason from its first line. */
static json_t *http_headers(struct http_reply *r, int *ret_status, const char **ret_reason,
                            bool *ret_chunked) {
        json_t *h = json_object();
        char *line = r->head, *next;

        *ret_status = 0;
        *ret_reason = "";
        *ret_chunked = false;
        for (int i = 0; h && line && *line; i++, line = next) {
                char *colon;
                next = strstr(line, "\r\n");
                if (next)
                        *next = '\0', next += 2;
                if (i == 0) {
                        char *sp = strchr(line, ' ');
                        *ret_status = sp ? atoi(sp + 1) : 0;
                        *ret_reason = sp && strchr(sp + 1, ' ') ? strchr(sp + 1, ' ') + 1 : "";
                        continue;
                }
                if (!(colon = strchr(line, ':')))
                        continue;
                *colon++ = '\0';
                colon += strspn(colon, " \t");
                if (!strcasecmp(line, "transfer-encoding") && strstr(colon, "chunked"))
                        *ret_chunked = true;
                if (json_object_get(h, line)) {
                        char *both = NULL;
                        if (asprintf(&both, "%s, %s", json_string_value(json_object_get(h, line)),
                                     colon) >= 0)
                                json_object_set_new(h, line, cli_json_text(both, strlen(both)));
                        free(both);
                } else {
                        json_object_set_new(h, line, cli_json_text(colon, strlen(colon)));
                }
        }
        return h;
}

/* The result: the status line, the headers and the body's start as text, and the same
 * as structuredContent. */
static json_t *http_result(struct mcp_call *k, struct http_reply *r) {
        int status;
        const char *reason, *key;
        bool chunked, cut;
        json_t *h, *v, *st;
        char *text = NULL;
        size_t text_len = 0;
        FILE *f;

        h = http_headers(r, &status, &reason, &chunked);
        if (chunked && !r->timed_out && r->body_len == r->body_bytes)
                http_dechunk(r);
        cut = r->body_bytes > r->body_len;
        st = h ? json_pack("{s:i,s:s,s:O,s:o,s:I,s:b,s:b}", "status", status, "reason", reason,
                           "headers", h, "body", cli_json_text(r->body, r->body_len),
                           "body_bytes", (json_int_t)r->body_bytes, "body_truncated", cut,
                           "timed_out", r->timed_out)
               : NULL;
        f = st ? open_memstream(&text, &text_len) : NULL;
        if (!f) {
                json_decref(h);
                json_decref(st);
                return out_of_memory(k);
        }
        fprintf(f, "HTTP %d %s\n[headers]\n", status, reason);
        json_object_foreach(h, key, v)
                fprintf(f, "%s: %s\n", key, json_string_value(v));
        fprintf(f, "[body] %llu bytes\n", (unsigned long long)r->body_bytes);
        if (cut)
                fprintf(f, "(showing the first %zu bytes; the rest was dropped)\n", r->body_len);
        fwrite(r->body, 1, r->body_len, f);
        if (r->timed_out)
                fputs("\n(the server had not finished when the time ran out)\n", f);
        json_decref(h);
        return stream_result(k, f, &text, &text_len, st, r->timed_out);
}

static json_t *http_request(struct mcp_call *k, json_t *args) {
        struct http_args a;
        struct http_reply *r;
        struct argmsg m = {""};
        enum sbx_code rc;
        size_t len = 0;
        char *req;
        int fd = -1, e;
        json_t *res;

        if (http_read_args(k->env, args, &a, &m) < 0)
                return bad_args(k, "http_request", &m);
        rc = sbx_open_port(k->c, k->env->sandbox_id, (uint32_t)a.port, NULL, &fd);
        if (rc != SBX_OK)
                return call_failed(k, rc);
        req = http_build(&a, &len);
        r = calloc(1, sizeof(*r));
        e = req && r ? http_exchange(k, fd, req, len, cli_now_unix_ms() + (int64_t)a.timeout_ms, r)
                     : -ENOMEM;
        close(fd);
        free(req);
        if (e == -ENOMEM)
                res = out_of_memory(k);
        else if (e < 0 || !r->head_len)
                res = tool_error(k, "the server on port %llu %s before it answered",
                                 (unsigned long long)a.port,
                                 e < 0 ? strerror(-e) : r->timed_out ? "took too long" : "closed the connection");
        else
                res = http_result(k, r);
        if (r)
                free(r->body);
        free(r);
        return res;
}

/* ---- the interface -------------------------------------------------------------------------- */

static json_t *describe(const struct mcp_tool *t, const struct mcp_env *env, const char *version) {
        bool v2025_06 = strcmp(version, "2025-06-18") >= 0;
        bool v2025_03 = strcmp(version, "2025-03-26") >= 0;
        char *desc = expand(t->description, env), *in = expand(t->input_schema, env);
        char *out_schema = t->output_schema ? expand(t->output_schema, env) : NULL;
        json_error_t e;
        json_t *o = NULL, *schema = in ? json_loads(in, 0, &e) : NULL;

        if (desc && schema)
                o = json_pack("{s:s,s:s,s:O}", "name", t->name, "description", desc, "inputSchema",
                              schema);
        if (o && v2025_06) {
                json_object_set_new(o, "title", json_string(t->title));
                if (t->output_schema) {
                        json_t *out = out_schema ? json_loads(out_schema, 0, &e) : NULL;
                        if (!out) {
                                json_decref(o);
                                o = NULL;
                        } else {
                                json_object_set_new(o, "outputSchema", out);
                        }
                }
        }
        if (o && v2025_03)
                json_object_set_new(o, "annotations",
                                    json_pack("{s:s,s:b,s:b,s:b,s:b}", "title", t->title,
                                              "readOnlyHint", (t->hints & HINT_READ_ONLY) != 0,
                                              "destructiveHint", (t->hints & HINT_DESTRUCTIVE) != 0,
                                              "idempotentHint", (t->hints & HINT_IDEMPOTENT) != 0,
                                              "openWorldHint", 0));
        json_decref(schema);
        free(desc);
        free(in);
        free(out_schema);
        return o;
}

json_t *mcp_tools_list(const struct mcp_env *env, const char *version) {
        json_t *list = json_array();

        for (size_t i = 0; list && i < N_TOOLS; i++) {
                json_t *t = describe(&tools[i], env, version);
                if (!t || json_array_append_new(list, t) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        return list ? json_pack("{s:o}", "tools", list) : NULL;
}

void cli_mcp_tool_names(char *buf, size_t len) {
        size_t o = 0;

        if (len == 0)
                return;
        buf[0] = '\0';
        for (size_t i = 0; i < N_TOOLS; i++)
                list_append(buf, len, &o, i, N_TOOLS, " and ", tools[i].name);
}

const struct mcp_tool *mcp_tool_find(const char *name) {
        for (size_t i = 0; i < N_TOOLS; i++)
                if (strcmp(tools[i].name, name) == 0)
                        return &tools[i];
        return NULL;
}

bool mcp_tool_threaded(const struct mcp_tool *t) {
        return t->threaded;
}

json_t *mcp_tool_call(const struct mcp_tool *t, struct mcp_call *k, json_t *args) {
        json_t *empty = NULL, *r;

        if (!args)
                args = empty = json_object();
        if (!args)
                return out_of_memory(k);
        r = t->call(k, args);
        json_decref(empty);
        if (!r && !k->err_code)
                return out_of_memory(k);
        return r;
}

void mcp_call_clear(struct mcp_call *k) {
        free(k->err_message);
        json_decref(k->err_data);
        k->err_code = 0;
        k->err_message = NULL;
        k->err_data = NULL;
}
