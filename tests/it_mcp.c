/* it_mcp.c: integration tests of `sbx mcp`, the Model Context Protocol server, run as a
 * subprocess with pipes against a real sbxd: the handshake and version negotiation,
 * JSON-RPC errors that leave the server serving, every tool's success and error paths,
 * per-stream output caps, timeouts, cancellation that kills the command, two servers
 * sharing a sandbox, owned sandboxes that leave nothing behind, a sandbox or a daemon
 * gone, and the official TypeScript SDK's client (tests/mcp/client.mjs).
 *
 * The TypeScript SDK comes from the npm registry: `make mcp-node` installs it into
 * $(BUILD)/mcp-node (build/mcp-node is looked at too, for `make asan`). When it or node
 * is missing, that test prints SKIPPED on a line of its own and passes, unless
 * SBX_REQUIRE_NPM=1 says it must run, when it fails. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

/* ---- a server as a subprocess ------------------------------------------------------------ */

struct mcp {
        pid_t pid;
        int in;  /* the server's stdin */
        int out; /* the server's stdout */
        char *buf;
        size_t len, cap;
        char err_path[600];
        int next_id;
        bool eof;
};

/* Starts `sbx mcp ARGS...` against d (stderr to a file in the test's directory). */
static void mcp_start(struct mcp *m, struct it_daemon *d, const char *const *args) {
        static int serial;
        int in[2], out[2];
        char bin[600];

        memset(m, 0, sizeof(*m));
        snprintf(bin, sizeof(bin), "%s/sbx", it_build_dir());
        snprintf(m->err_path, sizeof(m->err_path), "%s/mcp-%d-%d.err", it_base_dir(), (int)getpid(),
                 ++serial);
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        m->pid = fork();
        ck_assert_int_ge(m->pid, 0);
        if (m->pid == 0) {
                char *argv[64];
                size_t n = 0;
                int fd = open(m->err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                argv[n++] = bin;
                argv[n++] = strdup("mcp"); /* copies in the child: it execs or exits */
                while (args && *args && n < 62)
                        argv[n++] = strdup(*args++);
                argv[n] = NULL;
                dup2(in[0], 0);
                dup2(out[1], 1);
                if (fd >= 0)
                        dup2(fd, 2);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                setenv("SBX_SOCKET", d->sock, 1);
                execv(bin, argv);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        m->in = in[1];
        m->out = out[0];
}

/* What the server wrote on stderr (a static buffer, for messages). */
static const char *mcp_stderr(const struct mcp *m) {
        static char text[16384];
        int fd = open(m->err_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : 0;
        if (fd >= 0)
                close(fd);
        text[n > 0 ? n : 0] = 0;
        return text;
}

/* Writes the len bytes at p to the server's stdin. */
static void mcp_write(struct mcp *m, const void *p, size_t len) {
        const char *b = p;
        while (len) {
                ssize_t n = write(m->in, b, len);
                ck_assert_msg(n > 0 || errno == EINTR, "write to sbx mcp: %s", strerror(errno));
                if (n > 0) {
                        b += n;
                        len -= (size_t)n;
                }
        }
}

static void mcp_send_raw(struct mcp *m, const char *line) {
        mcp_write(m, line, strlen(line));
        mcp_write(m, "\n", 1);
}

/* Sends message (taken) as one line. */
static void mcp_send(struct mcp *m, json_t *message) {
        char *s;
        ck_assert_ptr_nonnull(message);
        s = json_dumps(message, JSON_COMPACT);
        ck_assert_ptr_nonnull(s);
        mcp_send_raw(m, s);
        free(s);
        json_decref(message);
}

/* The next line the server writes, parsed (it must be JSON); NULL at end of stream or
 * when nothing comes within timeout_ms. */
static json_t *mcp_read(struct mcp *m, int timeout_ms) {
        double deadline = it_now_ms() + timeout_ms;

        for (;;) {
                char *nl = m->buf ? memchr(m->buf, '\n', m->len) : NULL;
                struct pollfd p = {m->out, POLLIN, 0};
                json_error_t e;
                ssize_t n;
                int left;

                if (nl) {
                        size_t line = (size_t)(nl - m->buf);
                        json_t *v = json_loadb(m->buf, line, 0, &e);
                        ck_assert_msg(v, "the server wrote a line that is not JSON: %.*s (%s)",
                                      (int)(line > 300 ? 300 : line), m->buf, e.text);
                        memmove(m->buf, nl + 1, m->len - line - 1);
                        m->len -= line + 1;
                        return v;
                }
                if (m->eof)
                        return NULL;
                left = (int)(deadline - it_now_ms());
                if (left <= 0)
                        return NULL;
                if (poll(&p, 1, left) <= 0)
                        continue;
                if (m->cap - m->len < 65536) {
                        m->cap = m->cap ? m->cap * 2 : 1 << 20;
                        m->buf = realloc(m->buf, m->cap);
                        ck_assert_ptr_nonnull(m->buf);
                }
                n = read(m->out, m->buf + m->len, m->cap - m->len);
                if (n <= 0)
                        m->eof = true;
                else
                        m->len += (size_t)n;
        }
}

static json_int_t id_of(json_t *msg) {
        json_t *id = json_object_get(msg, "id");
        return json_is_integer(id) ? json_integer_value(id) : -1;
}

/* Sends request method with params (taken, may be NULL) and returns the whole answer,
 * which must be the next message. */
static json_t *mcp_request(struct mcp *m, const char *method, json_t *params, int timeout_ms) {
        int id = ++m->next_id;
        json_t *req = json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", id, "method", method);
        json_t *ans;

        if (params)
                json_object_set_new(req, "params", params);
        mcp_send(m, req);
        ans = mcp_read(m, timeout_ms);
        ck_assert_msg(ans, "no answer to %s within %d ms; stderr: %s", method, timeout_ms,
                      mcp_stderr(m));
        ck_assert_int_eq(id_of(ans), id);
        ck_assert_str_eq(json_string_value(json_object_get(ans, "jsonrpc")), "2.0");
        return ans;
}

/* The result of a request that must succeed (a new reference). */
static json_t *mcp_ok(struct mcp *m, const char *method, json_t *params) {
        json_t *ans = mcp_request(m, method, params, 60000), *r;
        json_t *err = json_object_get(ans, "error");

        ck_assert_msg(!err, "%s failed: %s", method,
                      json_string_value(json_object_get(err, "message")));
        r = json_incref(json_object_get(ans, "result"));
        ck_assert_ptr_nonnull(r);
        json_decref(ans);
        return r;
}

/* The error code of a request that must fail; *ret_message gets a copy of its message. */
static int mcp_fails(struct mcp *m, const char *method, json_t *params, char **ret_message) {
        json_t *ans = mcp_request(m, method, params, 60000);
        json_t *err = json_object_get(ans, "error");
        int code;

        ck_assert_msg(err, "%s did not fail", method);
        ck_assert(!json_object_get(ans, "result"));
        code = (int)json_integer_value(json_object_get(err, "code"));
        ck_assert(json_is_string(json_object_get(err, "message")));
        if (ret_message)
                *ret_message = strdup(json_string_value(json_object_get(err, "message")));
        json_decref(ans);
        return code;
}

/* Calls a tool; args is taken (NULL: none). Returns the CallToolResult. */
static json_t *mcp_tool(struct mcp *m, const char *name, json_t *args) {
        json_t *p = json_pack("{s:s}", "name", name);
        if (args)
                json_object_set_new(p, "arguments", args);
        return mcp_ok(m, "tools/call", p);
}

static const char *text_of(json_t *result) {
        json_t *c = json_array_get(json_object_get(result, "content"), 0);
        ck_assert_str_eq(json_string_value(json_object_get(c, "type")), "text");
        ck_assert(json_is_string(json_object_get(c, "text")));
        return json_string_value(json_object_get(c, "text"));
}

static bool is_error(json_t *result) {
        return json_is_true(json_object_get(result, "isError"));
}

static json_t *structured_of(json_t *result) {
        json_t *s = json_object_get(result, "structuredContent");
        ck_assert_msg(json_is_object(s), "no structuredContent");
        return s;
}

#define ck_text_has(result, needle)                                                                \
        ck_assert_msg(strstr(text_of(result), needle), "'%.500s' is not in: %.3000s", needle,      \
                      text_of(result))

/* initialize + notifications/initialized; returns the initialize result. */
static json_t *mcp_handshake(struct mcp *m, const char *version) {
        json_t *r =
                mcp_ok(m, "initialize",
                       json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", version,
                                 "capabilities", "clientInfo", "name", "it_mcp", "version", "1"));
        mcp_send(m,
                 json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized"));
        return r;
}

/* Closes the server's stdin and returns its exit status (within timeout_ms). */
static int mcp_close(struct mcp *m, int timeout_ms) {
        double t0 = it_now_ms();
        json_t *late;
        int st;

        close(m->in);
        m->in = -1;
        for (;;) {
                pid_t r = waitpid(m->pid, &st, WNOHANG);
                if (r == m->pid)
                        break;
                ck_assert_msg(it_now_ms() - t0 < timeout_ms,
                              "sbx mcp did not exit within %d ms of stdin closing; stderr: %s",
                              timeout_ms, mcp_stderr(m));
                /* Keep its stdout drained so it can never block on a full pipe (what it
                 * writes now, answers to calls still in flight, is let go). */
                while ((late = mcp_read(m, 20)))
                        json_decref(late);
        }
        close(m->out);
        free(m->buf);
        m->buf = NULL;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

static struct mcp *attach(struct mcp *m, struct it_daemon *d, const char *id,
                          const char *const *extra) {
        const char *args[32] = {"--sandbox", id};
        size_t n = 2;
        while (extra && *extra && n < 31)
                args[n++] = *extra++;
        args[n] = NULL;
        mcp_start(m, d, args);
        json_decref(mcp_handshake(m, "2025-06-18"));
        return m;
}

static bool has_tool(json_t *list, const char *name, json_t **ret) {
        json_t *t;
        size_t i;
        json_array_foreach(json_object_get(list, "tools"), i, t) {
                if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0) {
                        if (ret)
                                *ret = t;
                        return true;
                }
        }
        return false;
}

static enum sbx_state state_of(sbx_client *c, const char *id) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_state s;
        ck_assert_int_eq(sbx_get(c, id, &sb), SBX_OK);
        s = sb->state;
        sbx_sandbox_free(sb);
        return s;
}

/* Waits until no process (want 0) or some process (want 1) has needle in its command
 * line (a shell and its child may both have it). */
static void wait_procs(const char *needle, int want, int timeout_ms) {
        double t0 = it_now_ms();
        int n;
        while ((n = it_count_procs(needle)) != want && !(want > 0 && n >= want)) {
                ck_assert_msg(it_now_ms() - t0 < timeout_ms,
                              "%d processes '%s' after %d ms, expected %d", n, needle, timeout_ms,
                              want);
                usleep(20000);
        }
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* initialize answers each supported revision with itself and anything else with the
 * newest; what tools/list and tools/call show follows the revision. */
START_TEST(handshake_and_version_negotiation) {
        static const char *const supported[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                "2024-11-05"};
        struct it_daemon d;
        sbx_client *c;
        char *id, *msg = NULL;
        size_t i;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        for (i = 0; i < 5; i++) {
                const char *asked = i < 4 ? supported[i] : "1999-01-01";
                const char *args[] = {"--sandbox", id, NULL};
                struct mcp m;
                json_t *r, *list, *t, *call;
                bool v0618 = i < 2 || i == 4, v0326 = i < 3 || i == 4;

                mcp_start(&m, &d, args);
                r = mcp_handshake(&m, asked);
                ck_assert_str_eq(json_string_value(json_object_get(r, "protocolVersion")),
                                 i < 4 ? asked : "2025-11-25");
                ck_assert_str_eq(json_string_value(
                                         json_object_get(json_object_get(r, "serverInfo"), "name")),
                                 "sbx");
                ck_assert(json_is_object(
                        json_object_get(json_object_get(r, "capabilities"), "tools")));
                ck_assert_ptr_nonnull(
                        strstr(json_string_value(json_object_get(r, "instructions")), id));
                json_decref(r);

                r = mcp_ok(&m, "ping", NULL);
                ck_assert(json_is_object(r) && json_object_size(r) == 0);
                json_decref(r);

                list = mcp_ok(&m, "tools/list", NULL);
                ck_assert_uint_eq(json_array_size(json_object_get(list, "tools")), 10);
                for (size_t k = 0; k < 10; k++) {
                        static const char *const names[] = {
                                "run_command",  "read_file",      "write_file", "list_directory",
                                "edit_file",    "sandbox_info",   "command_output",
                                "snapshot",     "restore",        "http_request"};
                        ck_assert_msg(has_tool(list, names[k], &t), "no tool %s", names[k]);
                        ck_assert_uint_gt(
                                strlen(json_string_value(json_object_get(t, "description"))), 80);
                        ck_assert_str_eq(json_string_value(json_object_get(
                                                 json_object_get(t, "inputSchema"), "type")),
                                         "object");
                        ck_assert(!!json_object_get(t, "annotations") == v0326);
                        ck_assert(!!json_object_get(t, "title") == v0618);
                }
                has_tool(list, "run_command", &t);
                ck_assert(!!json_object_get(t, "outputSchema") == v0618);
                has_tool(list, "write_file", &t);
                ck_assert(!json_object_get(t, "outputSchema"));
                json_decref(list);

                call = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "echo hi"));
                ck_assert(!!json_object_get(call, "structuredContent") == v0618);
                ck_text_has(call, "[stdout]\nhi\n");
                json_decref(call);
                ck_assert_int_eq(mcp_close(&m, 10000), 0);
        }
        /* protocolVersion is required. */
        {
                const char *args[] = {"--sandbox", id, NULL};
                struct mcp m;
                mcp_start(&m, &d, args);
                ck_assert_int_eq(
                        mcp_fails(&m, "initialize", json_pack("{s:{}}", "capabilities"), &msg),
                        -32602);
                ck_assert_ptr_nonnull(strstr(msg, "protocolVersion"));
                free(msg);
                ck_assert_int_eq(mcp_close(&m, 10000), 0);
        }
        ck_assert_int_eq(state_of(c, id), SBX_STATE_READY);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Malformed JSON, invalid requests, unknown methods and tools, bad params: each gets its
 * JSON-RPC error, and the server goes on serving. Notifications get no answer. */
START_TEST(jsonrpc_errors_keep_serving) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *a, *r;
        char *id;
        static const char bad_utf8[] = "{\"jsonrpc\":\"2.0\",\"id\":70,\"method\":\"ping\","
                                       "\"params\":{\"x\":\"\xff\"}}";

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        mcp_send_raw(&m, "this is not json");
        a = mcp_read(&m, 10000);
        ck_assert_ptr_nonnull(a);
        ck_assert(json_is_null(json_object_get(a, "id")));
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
                         -32700);
        json_decref(a);
        mcp_send_raw(&m, "{\"jsonrpc\":\"2.0\",\"id\":71,\"method\":\"ping\"");
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
                         -32700);
        json_decref(a);
        /* jansson validates UTF-8: invalid bytes are a parse error, never passed on. */
        mcp_send_raw(&m, bad_utf8);
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
                         -32700);
        json_decref(a);
        mcp_send_raw(&m, "42");
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
                         -32600);
        json_decref(a);
        mcp_send_raw(&m, "{\"jsonrpc\":\"1.0\",\"id\":72,\"method\":\"ping\"}");
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(id_of(a), 72);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
                         -32600);
        json_decref(a);

        ck_assert_int_eq(mcp_fails(&m, "no/such/method", NULL, NULL), -32601);
        ck_assert_int_eq(mcp_fails(&m, "resources/list", NULL, NULL), -32601);
        ck_assert_int_eq(
                mcp_fails(&m, "tools/call", json_pack("{s:s}", "name", "no_such_tool"), NULL),
                -32602);
        ck_assert_int_eq(mcp_fails(&m, "tools/call", json_pack("{}"), NULL), -32602);
        ck_assert_int_eq(mcp_fails(&m, "tools/call",
                                   json_pack("{s:s,s:[i]}", "name", "run_command", "arguments", 1),
                                   NULL),
                         -32602);
        ck_assert_int_eq(mcp_fails(&m, "tools/list", json_pack("[i]", 1), NULL), -32602);

        /* Notifications, known or not, are not answered: the next answer is the ping's. */
        mcp_send(&m, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/nonsense"));
        mcp_send(&m, json_pack("{s:s,s:s,s:{s:i}}", "jsonrpc", "2.0", "method",
                               "notifications/cancelled", "params", "requestId", 9999));
        r = mcp_ok(&m, "ping", NULL);
        json_decref(r);

        /* A batch: each member answered. */
        mcp_send_raw(&m, "[{\"jsonrpc\":\"2.0\",\"id\":80,\"method\":\"ping\"},"
                         "{\"jsonrpc\":\"2.0\",\"id\":81,\"method\":\"ping\"}]");
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(id_of(a), 80);
        json_decref(a);
        a = mcp_read(&m, 10000);
        ck_assert_int_eq(id_of(a), 81);
        json_decref(a);

        /* Arguments a tool cannot take are the model's to fix: a tool error. */
        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "argv", "ls"));
        ck_assert(is_error(r));
        ck_text_has(r, "invalid arguments for run_command");
        json_decref(r);
        r = mcp_tool(&m, "read_file", json_pack("{s:s,s:b}", "path", "x", "verbose", 1));
        ck_assert(is_error(r));
        ck_text_has(r, "unknown argument 'verbose'");
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* run_command: labelled streams, exit codes, argv, cwd, env, stdin, a program that does
 * not exist, a signal, invalid UTF-8; a non-zero exit is an error result. */
START_TEST(run_command_results) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r, *st;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "echo hello"));
        ck_assert(!is_error(r));
        ck_text_has(r, "[stdout]\nhello\n[stderr]\n(none)\n[exit code 0 after ");
        st = structured_of(r);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "exit_code")), 0);
        ck_assert_str_eq(json_string_value(json_object_get(st, "outcome")), "exited");
        ck_assert_str_eq(json_string_value(json_object_get(st, "stdout")), "hello\n");
        ck_assert(json_is_false(json_object_get(st, "timed_out")));
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s}", "command", "echo out; echo 'it failed' >&2; exit 3"));
        ck_assert(is_error(r));
        ck_text_has(r, "[stdout]\nout\n[stderr]\nit failed\n[exit code 3 after");
        ck_assert_int_eq(json_integer_value(json_object_get(structured_of(r), "exit_code")), 3);
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:[s,s,s,s]}", "argv", "printf", "%s|", "a b", "c"));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")), "a b|c|");
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:s,s:{s:s}}", "command", "pwd; echo \"$FOO\"", "cwd", "/tmp",
                               "env", "FOO", "bar baz"));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")),
                         "/tmp\nbar baz\n");
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:[s],s:s}", "argv", "cat", "stdin", "piped in\n"));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")),
                         "piped in\n");
        json_decref(r);

        r = mcp_tool(&m, "run_command", json_pack("{s:[s]}", "argv", "/no/such/program"));
        ck_assert(is_error(r));
        ck_text_has(r, "[could not start: ");
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "outcome")),
                         "start_failed");
        json_decref(r);

        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "echo before; kill -9 $$"));
        ck_assert(is_error(r));
        ck_text_has(r, "[killed by signal 9 (SIGKILL)");
        ck_text_has(r, "before");
        json_decref(r);

        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "printf 'a\\377b'"));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")),
                         "a\xEF\xBF\xBD"
                         "b");
        ck_text_has(r, "a\xEF\xBF\xBD"
                       "b\n[stderr]");
        json_decref(r);

        r = mcp_tool(&m, "run_command", json_pack("{s:s,s:[s]}", "command", "ls", "argv", "ls"));
        ck_assert(is_error(r));
        ck_text_has(r, "not both");
        json_decref(r);
        r = mcp_tool(&m, "run_command", json_pack("{}"));
        ck_assert(is_error(r));
        ck_text_has(r, "give 'command'");
        json_decref(r);
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:{s:i}}", "command", "true", "env", "X", 1));
        ck_assert(is_error(r));
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Each stream is cut on its own: 10 MB on stderr does not push stdout out, a flood on
 * stdout does not push stderr out, every cut is marked with what it dropped. */
START_TEST(output_caps_per_stream) {
        const char *flags[] = {"--max-output-bytes", "4096", "--max-output-lines", "100", NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r, *st;
        const char *text, *err;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, flags);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s}", "command",
                               "echo STDOUT-SURVIVES; head -c 10000000 /dev/zero | tr '\\0' x >&2; "
                               "echo STDERR-TAIL >&2"));
        text = text_of(r);
        st = structured_of(r);
        ck_assert_ptr_nonnull(strstr(text, "[stdout]\nSTDOUT-SURVIVES\n[stderr]\n"));
        ck_text_has(r, "[... cut: the first 9995916 of 10000012 bytes of stderr are dropped; the "
                       "last 4096 bytes follow ...]\n");
        ck_text_has(r, "xxSTDERR-TAIL\n[exit code 0");
        ck_assert_uint_lt(strlen(text), 4096 + 1024);
        err = json_string_value(json_object_get(st, "stderr"));
        ck_assert_uint_eq(strlen(err), 4096);
        ck_assert_ptr_nonnull(strstr(err, "STDERR-TAIL\n"));
        ck_assert_int_eq(json_integer_value(json_object_get(st, "stderr_bytes")), 10000012);
        ck_assert(json_is_true(json_object_get(st, "stderr_truncated")));
        ck_assert(json_is_false(json_object_get(st, "stdout_truncated")));
        json_decref(r);

        /* Lines: the last 100 of 1000, the cut counted in lines. */
        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "seq 1 1000"));
        ck_text_has(r,
                    "[stdout]\n[... cut: the first 900 lines (3492 bytes) of stdout are dropped; "
                    "the last 100 lines follow ...]\n901\n902\n");
        ck_text_has(r, "\n1000\n[stderr]\n(none)\n");
        ck_assert_ptr_null(strstr(text_of(r), "\n900\n"));
        json_decref(r);

        /* A flood on stdout leaves stderr whole. */
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s}", "command", "echo ERR-SURVIVES >&2; seq 1 300000"));
        ck_text_has(r, "[stderr]\nERR-SURVIVES\n");
        ck_text_has(r, "\n300000\n[stderr]");
        ck_assert(json_is_true(json_object_get(structured_of(r), "stdout_truncated")));
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A command past its timeout is killed within a bound and reported as timed out; asking
 * for more than the server's maximum gets the maximum, and the result says so. */
START_TEST(timeouts) {
        const char *flags[] = {"--default-command-timeout", "1", "--max-command-timeout", "3",
                               NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r, *st;
        double t0;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, flags);

        /* Killed at the timeout, not when the sleep ends (room for a loaded machine). */
        t0 = it_now_ms();
        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "echo started; sleep 30"));
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_assert(is_error(r));
        ck_text_has(r, "[timed out: killed after 1 s (timeout_seconds)");
        ck_text_has(r, "started");
        st = structured_of(r);
        ck_assert(json_is_true(json_object_get(st, "timed_out")));
        json_decref(r);

        t0 = it_now_ms();
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:f}", "command", "sleep 30", "timeout_seconds", 0.5));
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_text_has(r, "killed after 0.5 s");
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:i}", "command", "echo quick", "timeout_seconds", 100));
        ck_assert(!is_error(r));
        ck_text_has(r, "[timeout_seconds 100 was lowered to this server's maximum, 3]");
        ck_assert(json_real_value(json_object_get(structured_of(r), "timeout_seconds")) == 3.0);
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:i}", "command", "true", "timeout_seconds", -1));
        ck_assert(is_error(r));
        ck_text_has(r, "timeout_seconds");
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* notifications/cancelled kills the running command in the sandbox (no process of it is
 * left, the records say cancelled) and its call gets no answer; while a command runs,
 * other requests are answered. */
START_TEST(cancellation_kills_the_command) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        struct sbx_history *h = NULL;
        json_t *a;
        char *id, s1[64], s2[64], cmd[128];
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        snprintf(cmd, sizeof(cmd), "%s; echo never", it_sleeper(s1, sizeof(s1), 301));
        mcp_send(&m, json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s}}}", "jsonrpc", "2.0", "id", 500,
                               "method", "tools/call", "params", "name", "run_command", "arguments",
                               "command", cmd));
        wait_procs(s1, 1, 30000);
        /* The server answers other requests meanwhile. */
        a = mcp_ok(&m, "ping", NULL);
        json_decref(a);
        t0 = it_now_ms();
        mcp_send(&m, json_pack("{s:s,s:s,s:{s:i,s:s}}", "jsonrpc", "2.0", "method",
                               "notifications/cancelled", "params", "requestId", 500, "reason",
                               "the user pressed stop"));
        /* At the cancel, not when the sleep ends (room for a loaded machine). */
        wait_procs(s1, 0, 30000);
        ck_assert_double_lt(it_now_ms() - t0, 30000);
        usleep(300000);
        /* No answer for the cancelled call: the next message is the ping's. */
        a = mcp_ok(&m, "ping", NULL);
        json_decref(a);
        ck_assert_int_eq(sbx_history(c, id, 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 1);
        ck_assert_int_eq(h->v[0].outcome, SBX_OUTCOME_CANCELLED);
        ck_assert_ptr_nonnull(strstr(h->v[0].client_name, "sbx-mcp/"));
        sbx_history_free(h);

        /* Cancelled at once, before the command could be recorded: still killed. */
        mcp_send(&m, json_pack("{s:s,s:s,s:s,s:{s:s,s:{s:s}}}", "jsonrpc", "2.0", "id", "early",
                               "method", "tools/call", "params", "name", "run_command", "arguments",
                               "command", it_sleeper(s2, sizeof(s2), 302)));
        mcp_send(&m, json_pack("{s:s,s:s,s:{s:s}}", "jsonrpc", "2.0", "method",
                               "notifications/cancelled", "params", "requestId", "early"));
        usleep(500000);
        wait_procs(s2, 0, 30000);
        a = mcp_ok(&m, "ping", NULL);
        json_decref(a);

        /* Commands run side by side, and each answer comes when its command ends: the
         * slow one ends once the fast one's answer came (the gate), whatever the speed. */
        mcp_send(&m,
                 json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s}}}", "jsonrpc", "2.0", "id", 600, "method",
                           "tools/call", "params", "name", "run_command", "arguments", "command",
                           "until [ -e /workspace/go ]; do sleep 0.05; done; echo slow"));
        mcp_send(&m, json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s}}}", "jsonrpc", "2.0", "id", 601,
                               "method", "tools/call", "params", "name", "run_command", "arguments",
                               "command", "echo fast"));
        a = mcp_read(&m, 30000);
        ck_assert_int_eq(id_of(a), 601);
        json_decref(a);
        ck_assert_int_eq(sbx_write(c, id, "/workspace/go", "", 0, 0, 0), SBX_OK);
        a = mcp_read(&m, 30000);
        ck_assert_int_eq(id_of(a), 600);
        json_decref(a);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* write_file, read_file (paging), edit_file and list_directory, their errors, and the
 * limits on reads, writes and listings. */
START_TEST(file_tools) {
        const char *small[] = {"--max-read-bytes",
                               "1000",
                               "--max-output-bytes",
                               "64",
                               "--max-output-lines",
                               "3",
                               NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m, s;
        json_t *r, *st;
        char *id, big[1001];

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        r = mcp_tool(
                &m, "write_file",
                json_pack(
                        "{s:s,s:s}", "path", "/workspace/a/b/c.txt", "content",
                        "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\nline9\nline10\n"));
        ck_assert(!is_error(r));
        ck_text_has(r, "Wrote 61 bytes (10 lines) to /workspace/a/b/c.txt (a new file)");
        json_decref(r);
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "a/b/c.txt"));
        ck_assert(!is_error(r));
        ck_assert_str_eq(text_of(r),
                         "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\nline9\nline10\n");
        st = structured_of(r);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "total_lines")), 10);
        ck_assert(json_is_null(json_object_get(st, "next_offset")));
        json_decref(r);
        r = mcp_tool(&m, "read_file",
                     json_pack("{s:s,s:i,s:i}", "path", "a/b/c.txt", "offset", 0, "limit", 3));
        ck_assert_str_eq(
                text_of(r),
                "line1\nline2\nline3\n[... lines 1-3 of 10 shown; read on with offset=3 ...]\n");
        ck_assert_int_eq(json_integer_value(json_object_get(structured_of(r), "next_offset")), 3);
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "content")),
                         "line1\nline2\nline3\n");
        json_decref(r);
        r = mcp_tool(&m, "read_file",
                     json_pack("{s:s,s:i,s:i}", "path", "a/b/c.txt", "offset", 9, "limit", 3));
        ck_assert_str_eq(text_of(r), "line10\n[lines 10-10 of 10: the end of the file]\n");
        json_decref(r);
        r = mcp_tool(&m, "read_file", json_pack("{s:s,s:i}", "path", "a/b/c.txt", "offset", 10));
        ck_assert(is_error(r));
        ck_text_has(r, "past the end");
        json_decref(r);

        /* Errors the model can act on. */
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "/workspace/missing.txt"));
        ck_assert(is_error(r));
        ck_text_has(r, "NOT_FOUND: ");
        json_decref(r);
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "/workspace/a"));
        ck_assert(is_error(r));
        ck_text_has(r, "is a directory; list it with list_directory");
        json_decref(r);
        json_decref(mcp_tool(&m, "run_command",
                             json_pack("{s:s}", "command", "printf 'a\\000b' > bin")));
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "bin"));
        ck_assert(is_error(r));
        ck_text_has(r, "looks binary");
        ck_text_has(r, "xxd");
        json_decref(r);
        r = mcp_tool(&m, "write_file",
                     json_pack("{s:s,s:s}", "path", "/usr/mcp-test.txt", "content", "x"));
        ck_assert(is_error(r));
        ck_assert_msg(strstr(text_of(r), "READ_ONLY") || strstr(text_of(r), "PERMISSION_DENIED"),
                      "%s", text_of(r));
        json_decref(r);
        r = mcp_tool(&m, "write_file",
                     json_pack("{s:s,s:s}", "path", "/workspace/a", "content", "x"));
        ck_assert(is_error(r));
        json_decref(r);

        /* edit_file: unique, missing, ambiguous, replace_all; permission bits kept. */
        json_decref(mcp_tool(&m, "run_command",
                             json_pack("{s:s}", "command",
                                       "printf '#!/bin/sh\\necho one\\n' > s.sh; chmod 755 s.sh")));
        r = mcp_tool(&m, "edit_file",
                     json_pack("{s:s,s:s,s:s}", "path", "s.sh", "old_string", "echo one",
                               "new_string", "echo two"));
        ck_assert(!is_error(r));
        ck_text_has(r, "Replaced 1 occurrence in s.sh");
        json_decref(r);
        r = mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "./s.sh"));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")), "two\n");
        json_decref(r);
        r = mcp_tool(&m, "edit_file",
                     json_pack("{s:s,s:s,s:s}", "path", "s.sh", "old_string", "echo three",
                               "new_string", "x"));
        ck_assert(is_error(r));
        ck_text_has(r, "was not found");
        json_decref(r);
        r = mcp_tool(&m, "write_file",
                     json_pack("{s:s,s:s}", "path", "dup.txt", "content", "x=1\nx=1\n"));
        json_decref(r);
        r = mcp_tool(&m, "edit_file",
                     json_pack("{s:s,s:s,s:s}", "path", "dup.txt", "old_string", "x=1",
                               "new_string", "y=2"));
        ck_assert(is_error(r));
        ck_text_has(r, "occurs 2 times");
        json_decref(r);
        r = mcp_tool(&m, "edit_file",
                     json_pack("{s:s,s:s,s:s,s:b}", "path", "dup.txt", "old_string", "x=1",
                               "new_string", "y=2", "replace_all", 1));
        ck_text_has(r, "Replaced 2 occurrences");
        json_decref(r);
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "dup.txt"));
        ck_assert_str_eq(text_of(r), "y=2\ny=2\n");
        json_decref(r);

        /* list_directory: sorted, directories marked, links shown. */
        json_decref(mcp_tool(&m, "run_command",
                             json_pack("{s:s}", "command",
                                       "mkdir -p ld/zdir ld/adir ld/empty && touch ld/b ld/a && "
                                       "ln -s a ld/link")));
        r = mcp_tool(&m, "list_directory", json_pack("{s:s}", "path", "ld"));
        ck_assert_str_eq(text_of(r), "a\nadir/\nb\nempty/\nlink -> a\nzdir/\n");
        st = structured_of(r);
        ck_assert_uint_eq(json_array_size(json_object_get(st, "entries")), 6);
        ck_assert(json_is_false(json_object_get(st, "truncated")));
        json_decref(r);
        r = mcp_tool(&m, "list_directory", json_pack("{s:s}", "path", "ld/empty"));
        ck_assert_str_eq(text_of(r), "[the directory is empty]\n");
        json_decref(r);
        r = mcp_tool(&m, "list_directory", json_pack("{s:s}", "path", "nowhere"));
        ck_assert(is_error(r));
        json_decref(r);
        r = mcp_tool(&m, "list_directory", NULL);
        ck_text_has(r, "ld/\n");
        json_decref(r);

        /* The limits: a file over --max-read-bytes, a line longer than a page, a listing
         * over --max-output-lines, a write over --max-read-bytes. */
        json_decref(mcp_tool(&m, "run_command",
                             json_pack("{s:s}", "command",
                                       "seq 1 1000 > big.txt; head -c 200 /dev/zero | tr '\\0' y "
                                       "> long.txt; echo >> long.txt; echo end >> long.txt")));
        attach(&s, &d, id, small);
        r = mcp_tool(&s, "read_file", json_pack("{s:s}", "path", "big.txt"));
        ck_assert(is_error(r));
        ck_text_has(r, "'big.txt' is 3893 bytes, more than read_file takes (1000 bytes)");
        ck_text_has(r, "sed -n '1,200p' 'big.txt'");
        ck_text_has(r, "head -c 65536 'big.txt'");
        json_decref(r);
        r = mcp_tool(&s, "read_file", json_pack("{s:s}", "path", "long.txt"));
        ck_text_has(r, "[... line 1 is 201 bytes long; only its first 64 bytes are shown.");
        ck_text_has(r, "read on with offset=1");
        ck_assert_int_eq(json_integer_value(json_object_get(structured_of(r), "next_offset")), 1);
        json_decref(r);
        r = mcp_tool(&s, "list_directory", json_pack("{s:s}", "path", "ld"));
        ck_assert_ptr_nonnull(strstr(text_of(r), "a\nadir/\nb\n[... cut at 3 entries"));
        ck_assert(json_is_true(json_object_get(structured_of(r), "truncated")));
        json_decref(r);
        /* write_file writes as much as read_file reads, and no more. */
        memset(big, 'w', sizeof(big));
        r = mcp_tool(&s, "write_file",
                     json_pack("{s:s,s:s%}", "path", "w.txt", "content", big, (size_t)1000));
        ck_assert(!is_error(r));
        ck_text_has(r, "Wrote 1000 bytes");
        json_decref(r);
        r = mcp_tool(&s, "write_file",
                     json_pack("{s:s,s:s%}", "path", "w.txt", "content", big, (size_t)1001));
        ck_assert(is_error(r));
        ck_text_has(r, "'content' is 1001 bytes, more than write_file takes (1000 bytes");
        json_decref(r);
        ck_assert_int_eq(mcp_close(&s, 10000), 0);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Two servers attached to one sandbox see each other's files, and leave it running. */
START_TEST(two_servers_share_a_sandbox) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp a, b;
        json_t *r;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, "shared-box");
        attach(&a, &d, id, NULL);
        attach(&b, &d, id, NULL);
        json_decref(mcp_tool(&a, "write_file",
                             json_pack("{s:s,s:s}", "path", "shared.txt", "content", "from A\n")));
        r = mcp_tool(&b, "read_file", json_pack("{s:s}", "path", "/workspace/shared.txt"));
        ck_assert_str_eq(text_of(r), "from A\n");
        json_decref(r);
        json_decref(
                mcp_tool(&b, "run_command", json_pack("{s:s}", "command", "echo from B > b.txt")));
        r = mcp_tool(&a, "list_directory", NULL);
        ck_text_has(r, "b.txt\nshared.txt\n");
        json_decref(r);
        r = mcp_tool(&a, "read_file", json_pack("{s:s}", "path", "b.txt"));
        ck_assert_str_eq(text_of(r), "from B\n");
        json_decref(r);
        r = mcp_tool(&b, "sandbox_info", NULL);
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "mode")), "attached");
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "id")), "shared-box");
        ck_text_has(r, "attached: other clients may use it too");
        json_decref(r);
        ck_assert_int_eq(mcp_close(&a, 10000), 0);
        ck_assert_int_eq(mcp_close(&b, 10000), 0);
        ck_assert_int_eq(state_of(c, id), SBX_STATE_READY);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The number of seconds after the first after in text (-1 when it is not there). */
static double waited_s(const char *text, const char *after) {
        const char *p = strstr(text, after);

        return p ? strtod(p + strlen(after), NULL) : -1;
}

/* Holds a slot of sandbox id: a streamed `sleep 600` on a raw connection, once it has
 * started. Returns the connection (closing it cancels the sleep). */
static int hold_slot(struct it_daemon *d, const char *id) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        struct frame_reader fr;
        int fd = it_raw_connect(d);

        rc.sandbox_id = (char *)(uintptr_t)id;
        rc.shell = (char *)"sleep 600";
        rc.has_timeout_ms = rc.has_stream = 1;
        rc.timeout_ms = 600000;
        rc.stream = 1;
        req.has_request_id = 1;
        req.request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &rc;
        it_raw_send(fd, &req);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        for (;;) {
                Sbx__V1__Response *resp = it_raw_read(fd, &fr, 10000);
                int body;
                ck_assert_msg(resp, "the holder's sleep did not start");
                ck_assert_int_eq(resp->status->code, 0);
                body = resp->body_case;
                sbx__v1__response__free_unpacked(resp, NULL);
                if (body == SBX__V1__RESPONSE__BODY_COMMAND_STARTED)
                        break;
        }
        frame_reader_free(&fr);
        return fd;
}

/* run_command's queue_timeout_seconds against a real sbxd whose one slot is held: the
 * command never runs, its result says so (isError, outcome queue_timeout, queued_ms);
 * 0 is the refusal at once; once the slot frees it runs, and a wait is reported. */
START_TEST(run_command_queue_timeout) {
        const char *flags[] = {"--max-commands", "1", NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r, *st;
        double t0, took;
        char *id;
        int holder;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        id = it_create(c, "qbox");
        attach(&m, &d, id, NULL);
        holder = hold_slot(&d, id);

        t0 = it_now_ms();
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:f}", "command", "touch /workspace/late",
                               "queue_timeout_seconds", 0.3));
        took = it_now_ms() - t0;
        /* It gave up at its queue timeout (the slot is held until closed). */
        ck_assert_msg(took >= 280 && took < 20000, "took %.0f ms", took);
        ck_assert(is_error(r));
        /* The wait as measured: 0.3 s, or more on a busy machine. */
        ck_text_has(r, "[did not run: no slot within ");
        ck_assert_msg(waited_s(text_of(r), "no slot within ") >= 0.28, "%s", text_of(r));
        ck_text_has(r, " s (queue_timeout_seconds)");
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "outcome")), "queue_timeout");
        ck_assert_int_ge(json_integer_value(json_object_get(st, "queued_ms")), 280);
        ck_assert(json_is_null(json_object_get(st, "exit_code")));
        json_decref(r);

        /* 0: not at all; an error result naming the cap, at once. */
        t0 = it_now_ms();
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:i}", "command", "true", "queue_timeout_seconds", 0));
        /* At once: not after the daemon's default wait (60 s). */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_assert(is_error(r));
        ck_text_has(r, "RESOURCE_EXHAUSTED");
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:i}", "command", "true", "queue_timeout_seconds", -1));
        ck_assert(is_error(r));
        ck_text_has(r, "queue_timeout_seconds");
        json_decref(r);

        /* The slot frees: the next command runs, and the late one never did. */
        close(holder);
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:i}", "command", "test -e /workspace/late; echo $?",
                               "queue_timeout_seconds", 10));
        ck_assert(!is_error(r));
        ck_text_has(r, "1\n");
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Owned mode: a sandbox made with create's flags, terminated with everything in it when
 * stdin closes or on SIGTERM; --keep leaves it. Usage errors and help. */
START_TEST(owned_mode_leaves_nothing_behind) {
        const char *owned[] = {"--memory", "256M", "--label", "who=it_mcp", NULL};
        const char *keep[] = {"--keep", "--id", "kept-box", NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r, *st;
        char *id, *out = NULL, *err = NULL, s1[64], s2[64], cmd[128];
        int status;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);

        mcp_start(&m, &d, owned);
        json_decref(mcp_handshake(&m, "2025-06-18"));
        r = mcp_tool(&m, "sandbox_info", NULL);
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "mode")), "owned");
        ck_assert_int_eq(
                json_integer_value(json_object_get(json_object_get(st, "limits"), "memory_bytes")),
                256 * 1024 * 1024);
        ck_text_has(r, "this server moves it on while it runs");
        id = strdup(json_string_value(json_object_get(st, "id")));
        json_decref(r);
        snprintf(cmd, sizeof(cmd), "(%s &) ; echo started", it_sleeper(s1, sizeof(s1), 303));
        json_decref(mcp_tool(&m, "run_command", json_pack("{s:s}", "command", cmd)));
        wait_procs(s1, 1, 30000);
        ck_assert_int_eq(mcp_close(&m, 15000), 0);
        ck_assert_int_eq(state_of(c, id), SBX_STATE_TERMINATED);
        wait_procs(s1, 0, 30000);
        ck_assert_ptr_nonnull(strstr(mcp_stderr(&m), "terminated"));
        free(id);

        /* --keep: left running. */
        mcp_start(&m, &d, keep);
        json_decref(mcp_handshake(&m, "2025-06-18"));
        json_decref(mcp_tool(&m, "write_file",
                             json_pack("{s:s,s:s}", "path", "kept", "content", "yes")));
        ck_assert_int_eq(mcp_close(&m, 15000), 0);
        ck_assert_int_eq(state_of(c, "kept-box"), SBX_STATE_READY);
        ck_assert_int_eq(sbx_terminate(c, "kept-box", NULL), SBX_OK);

        /* SIGTERM with a command running: the sandbox and the command end, exit 0. */
        mcp_start(&m, &d, NULL);
        json_decref(mcp_handshake(&m, "2025-06-18"));
        r = mcp_tool(&m, "sandbox_info", NULL);
        id = strdup(json_string_value(json_object_get(structured_of(r), "id")));
        json_decref(r);
        mcp_send(&m, json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s}}}", "jsonrpc", "2.0", "id", 900,
                               "method", "tools/call", "params", "name", "run_command", "arguments",
                               "command", it_sleeper(s2, sizeof(s2), 304)));
        wait_procs(s2, 1, 30000);
        kill(m.pid, SIGTERM);
        /* The call in flight is cancelled, so never answered (not even when the sandbox's
         * end finishes it first): the server's output just ends. */
        r = mcp_read(&m, 15000);
        ck_assert_msg(!r, "answered after SIGTERM: %s", r ? json_dumps(r, JSON_COMPACT) : "");
        ck_assert_int_eq(mcp_close(&m, 15000), 0);
        ck_assert_int_eq(state_of(c, id), SBX_STATE_TERMINATED);
        wait_procs(s2, 0, 30000);
        free(id);

        /* Usage. */
        {
                const char *a1[] = {"mcp", "--sandbox", "x", "--memory", "1G", NULL};
                const char *a2[] = {"mcp", "--sandbox", "x", "--keep", NULL};
                const char *a3[] = {"mcp", "--bogus", NULL};
                const char *a4[] = {"mcp", "--sandbox", "no-such-box", NULL};
                const char *a5[] = {"mcp", "--json", NULL};
                const char *h1[] = {"mcp", "--help", NULL};
                const char *h2[] = {"help", "mcp", NULL};
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, a1), 125);
                ck_assert_ptr_nonnull(
                        strstr(err, "'--memory' is a flag for the sandbox sbx mcp creates"));
                free(err);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, a2), 125);
                free(err);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, a3), 125);
                ck_assert_ptr_nonnull(strstr(err, "unknown option '--bogus' for sbx mcp"));
                free(err);
                status = it_sbx(&d, NULL, 0, &out, &err, a4);
                ck_assert_int_eq(status, 125);
                ck_assert_ptr_nonnull(strstr(err, "NOT_FOUND"));
                ck_assert_str_eq(out, "");
                free(out);
                free(err);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, a5), 125);
                free(err);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, h1), 0);
                ck_assert_ptr_nonnull(strstr(out, "mcp [--sandbox ID"));
                ck_assert_ptr_nonnull(strstr(out, "--max-output-lines"));
                free(out);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, h2), 0);
                ck_assert_ptr_nonnull(strstr(out, "Model Context Protocol"));
                free(out);
        }
        /* Nothing left: no live sandbox. */
        {
                struct sbx_sandbox_list *l = NULL;
                ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_OK);
                ck_assert_uint_eq(l->n, 0);
                sbx_sandbox_list_free(l);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* `sbx mcp --allow-host` creates an allowlist sandbox: sandbox_info says so, and a
 * command reaches the proxy, which refuses another host (no name is resolved). */
START_TEST(owned_allowlist_sandbox) {
        const char *owned[] = {"--allow-host", "Registry.test", "--allow-cidr", "192.0.2.0/24",
                               NULL};
        struct it_daemon d;
        struct mcp m;
        json_t *r, *st;

        it_daemon_start(&d, NULL);
        mcp_start(&m, &d, owned);
        json_decref(mcp_handshake(&m, "2025-06-18"));
        r = mcp_tool(&m, "sandbox_info", NULL);
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "network")), "allowlist");
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "allowed_hosts"), 0)),
                         "registry.test");
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "allowed_cidrs"), 0)),
                         "192.0.2.0/24");
        ck_text_has(r,
                    "allowed hosts (through the proxy in HTTP_PROXY/HTTPS_PROXY): registry.test");
        json_decref(r);
        r = mcp_tool(
                &m, "run_command",
                json_pack("{s:s}", "command", "curl -s -w ' %{http_code}' http://other.test/"));
        ck_text_has(r, "other.test port 80 is not in allowed_hosts");
        ck_text_has(r, " 403");
        json_decref(r);
        ck_assert_int_eq(mcp_close(&m, 15000), 0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox that has ended, or a daemon that is gone, is a JSON-RPC error telling the
 * client to stop (not a tool error to retry); the server still answers. */
START_TEST(ended_sandbox_and_gone_daemon_are_protocol_errors) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        json_t *r;
        char *id, *msg = NULL;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);
        r = mcp_tool(&m, "read_file", json_pack("{s:s}", "path", "nope"));
        ck_assert(is_error(r)); /* a missing file in a live sandbox: the model's to fix */
        json_decref(r);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        ck_assert_int_eq(mcp_fails(&m, "tools/call",
                                   json_pack("{s:s,s:{s:s}}", "name", "read_file", "arguments",
                                             "path", "nope"),
                                   &msg),
                         -32001);
        ck_assert_msg(strstr(msg, "has ended") && strstr(msg, "stop using this server"), "%s", msg);
        free(msg);
        ck_assert_int_eq(mcp_fails(&m, "tools/call",
                                   json_pack("{s:s,s:{s:s}}", "name", "run_command", "arguments",
                                             "command", "true"),
                                   NULL),
                         -32001);
        ck_assert_int_eq(
                mcp_fails(&m, "tools/call", json_pack("{s:s}", "name", "sandbox_info"), NULL),
                -32001);
        json_decref(mcp_ok(&m, "ping", NULL));
        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);

        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(mcp_fails(&m, "tools/call",
                                   json_pack("{s:s,s:{s:s}}", "name", "list_directory", "arguments",
                                             "path", "/"),
                                   &msg),
                         -32002);
        ck_assert_msg(strstr(msg, "sbxd cannot be reached"), "%s", msg);
        free(msg);
        ck_assert_int_eq(mcp_fails(&m, "tools/call",
                                   json_pack("{s:s,s:{s:s}}", "name", "run_command", "arguments",
                                             "command", "true"),
                                   NULL),
                         -32002);
        json_decref(mcp_ok(&m, "ping", NULL));
        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
}
END_TEST

/* ---- lines the server refuses before parsing them ------------------------------------------ */

/* The longest line read with --max-read-bytes N: 6 N (each byte of a write_file's content
 * escaped as "\u0001") and 64 KiB for the rest of the call. */
#define LINE_BOUND(n) (6u * (n) + 65536u)

/* Sends one line: head, fill_len bytes of fill, tail (without its newline), written a
 * piece at a time, so that a line of any length costs the test no more than a piece. */
static void mcp_send_long(struct mcp *m, const char *head, char fill, size_t fill_len,
                          const char *tail) {
        static char piece[1 << 20];
        memset(piece, fill, sizeof(piece));
        mcp_write(m, head, strlen(head));
        for (size_t left = fill_len; left;) {
                size_t n = left < sizeof(piece) ? left : sizeof(piece);
                mcp_write(m, piece, n);
                left -= n;
        }
        mcp_send_raw(m, tail);
}

/* Reads the next answer, which must be the error code for request id (-1: a null id)
 * with needle in its message. */
static void expect_error(struct mcp *m, int id, int code, const char *needle) {
        json_t *a = mcp_read(m, 120000), *err;
        const char *msg;

        ck_assert_msg(a, "no answer; stderr: %s", mcp_stderr(m));
        err = json_object_get(a, "error");
        msg = json_string_value(json_object_get(err, "message"));
        ck_assert_msg(err && msg, "not an error: %s", json_dumps(a, JSON_COMPACT));
        ck_assert_msg(strstr(msg, needle), "'%s' is not in: %s", needle, msg);
        ck_assert_int_eq(json_integer_value(json_object_get(err, "code")), code);
        if (id < 0)
                ck_assert(json_is_null(json_object_get(a, "id")));
        else
                ck_assert_int_eq(id_of(a), id);
        json_decref(a);
}

/* Reads the next answer, which must be the result for request id with needle in its
 * text. */
static void expect_result(struct mcp *m, int id, const char *needle) {
        json_t *a = mcp_read(m, 120000);

        ck_assert_msg(a, "no answer; stderr: %s", mcp_stderr(m));
        ck_assert_int_eq(id_of(a), id);
        ck_assert_msg(json_object_get(a, "result"), "not a result: %s",
                      json_dumps(a, JSON_COMPACT));
        ck_text_has(json_object_get(a, "result"), needle);
        json_decref(a);
}

/* A tools/call answers as it should: the server went on serving. */
static void still_serving(struct mcp *m) {
        json_t *r = mcp_tool(m, "run_command", json_pack("{s:s}", "command", "echo serving"));
        ck_assert(!is_error(r));
        ck_text_has(r, "[stdout]\nserving\n");
        json_decref(r);
}

/* The largest call a tool takes fits a line however it is escaped: a write_file of
 * --max-read-bytes of content, every byte of it and of a long path escaped as \uXXXX.
 * A line past the bound is skipped to its newline and answered with an error naming
 * the bound and the request's id (found after the content), and the server goes on.
 * --max-read-bytes is at most 16M. */
START_TEST(largest_call_fits_and_longer_lines_are_skipped) {
        const char *small[] = {"--max-read-bytes", "1000", NULL};
        const char *too_big[] = {"mcp", "--sandbox", "x", "--max-read-bytes", "17M", NULL};
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        char *id, *line, *err, bound[32];
        size_t o = 0, cap = LINE_BOUND(1000u);
        const char *path = "/workspace/";

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, small);

        line = malloc(cap + 1);
        ck_assert_ptr_nonnull(line);
        o += (size_t)snprintf(line + o, cap - o,
                              "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\","
                              "\"params\":{\"name\":\"write_file\","
                              "\"arguments\":{\"path\":\"");
        for (size_t i = 0; i < strlen(path); i++)
                o += (size_t)snprintf(line + o, cap - o, "\\u%04x", path[i]);
        for (int dir = 0; dir < 15; dir++) /* 15 directories of 250 bytes: 3,776 bytes */
                for (int i = 0; i < 251; i++)
                        o += (size_t)snprintf(line + o, cap - o, "\\u%04x", i < 250 ? 'a' : '/');
        o += (size_t)snprintf(line + o, cap - o, "\\u0066\",\"content\":\"");
        for (int i = 0; i < 1000; i++)
                o += (size_t)snprintf(line + o, cap - o, "\\u0001");
        o += (size_t)snprintf(line + o, cap - o, "\"}},\"id\":500}");
        ck_assert_uint_lt(o, cap - 1);
        mcp_send_raw(&m, line);
        expect_result(&m, 500, "Wrote 1000 bytes");

        /* A line of exactly the bound is read (its content is too long for write_file); a
         * line one byte longer is not. */
        snprintf(bound, sizeof(bound), "%u bytes", LINE_BOUND(1000u));
        for (int extra = 0; extra < 2; extra++) {
                const char *head = "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{"
                                   "\"name\":\"write_file\",\"arguments\":{\"path\":\"f\","
                                   "\"content\":\"";
                const char *tail = "\"}},\"id\":501}";
                mcp_send_long(&m, head, 'y',
                              LINE_BOUND(1000u) + (size_t)extra - strlen(head) - strlen(tail),
                              tail);
                if (extra) {
                        expect_error(&m, 501, -32600, bound);
                } else {
                        expect_result(&m, 501, "more than write_file takes");
                }
                still_serving(&m);
        }
        /* Not JSON at all, and ten times the bound, without a newline until the end. */
        mcp_send_long(&m, "", 'x', 10 * (size_t)LINE_BOUND(1000u), "");
        expect_error(&m, -1, -32600, bound);
        still_serving(&m);
        ck_assert_int_eq(mcp_close(&m, 10000), 0);

        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, too_big), 125);
        ck_assert_msg(strstr(err, "--max-read-bytes") && strstr(err, "at most 16M"), "%s", err);
        free(err);
        {
                const char *most[] = {"mcp", "--sandbox", id, "--max-read-bytes", "16M", NULL};
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, most), 0);
        }
        free(line);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Writes into buf the start of a run_command call with id and an argument "x" whose value
 * is to follow; returns its length. */
static size_t run_call_head(char *buf, int id) {
        return (size_t)snprintf(buf, 4096,
                                "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
                                "\"params\":{\"name\":\"run_command\",\"arguments\":{"
                                "\"command\":\"true\",\"x\":",
                                id);
}

/* A line nested deeper than 64, or holding more than 65536 JSON values, is refused with
 * an error naming the bound and the request's id, before jansson parses it; the server
 * goes on. At the bounds a line is parsed as any other. */
START_TEST(deep_and_wide_lines_are_refused) {
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        char *id, *line = malloc(1u << 20);
        size_t o;

        ck_assert_ptr_nonnull(line);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        /* The call is 3 deep where "x" is; 61 arrays make 64, 62 make 65. */
        for (int arrays = 61; arrays <= 62; arrays++) {
                o = run_call_head(line, 600 + arrays);
                for (int i = 0; i < arrays; i++)
                        line[o++] = '[';
                for (int i = 0; i < arrays; i++)
                        line[o++] = ']';
                snprintf(line + o, 16, "}}}");
                mcp_send_raw(&m, line);
                if (arrays == 62) {
                        expect_error(&m, 662, -32600, "nested more than 64 deep");
                } else {
                        expect_result(&m, 661, "unknown argument 'x'");
                }
                still_serving(&m);
        }
        /* Deeper than jansson's own limit, and never closed. */
        o = run_call_head(line, 603);
        memset(line + o, '[', 100000);
        line[o + 100000] = 0;
        mcp_send_raw(&m, line);
        expect_error(&m, 603, -32600, "nested more than 64 deep");
        still_serving(&m);

        /* Values: the message, its "2.0", id, method, params, the tool's name, arguments,
         * "true" and x's array are 9; then x's items. 65527 items make 65536 values; one
         * more is refused. */
        for (int items = 65527; items <= 65528; items++) {
                o = run_call_head(line, items);
                line[o++] = '[';
                for (int i = 0; i < items; i++)
                        o += (size_t)snprintf(line + o, 8, i ? ",1" : "1");
                snprintf(line + o, 16, "]}}}");
                mcp_send_raw(&m, line);
                if (items == 65528) {
                        expect_error(&m, items, -32600, "more than 65536 JSON values");
                } else {
                        expect_result(&m, items, "unknown argument 'x'");
                }
                still_serving(&m);
        }
        /* A batch of 70,000 empty objects: no id to answer with. */
        o = 0;
        line[o++] = '[';
        for (int i = 0; i < 70000; i++)
                o += (size_t)snprintf(line + o, 8, i ? ",{}" : "{}");
        snprintf(line + o, 8, "]");
        mcp_send_raw(&m, line);
        expect_error(&m, -1, -32600, "more than 65536 JSON values");
        still_serving(&m);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(line);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* What refused lines cost: a 30 MB line [{},{},...] (10 million values; parsed whole it
 * took 2.3 GB) is refused at its 65,537th value and leaves the server's peak memory
 * (VmHWM) under 64 MiB; a 100 MB line (kept whole it would take 100 MB) is kept only up
 * to the line bound, so the peak stays under 64 MiB and the bound. */
START_TEST(refused_lines_cost_little_memory) {
        const size_t n_objects = 10u * 1000u * 1000u;
        const long bound_kib = (64l << 10) + (long)(LINE_BOUND(5u << 20) >> 10);
        struct it_daemon d;
        sbx_client *c;
        struct mcp m;
        char *id, *objects, *o;
        long hwm_kib;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        objects = malloc(3 * n_objects + 2);
        ck_assert_ptr_nonnull(objects);
        o = objects;
        *o++ = '[';
        for (size_t i = 0; i < n_objects; i++) {
                if (i)
                        *o++ = ',';
                *o++ = '{';
                *o++ = '}';
        }
        *o++ = ']';
        *o = 0;
        ck_assert_uint_eq(strlen(objects), 30000001u);
        mcp_send_raw(&m, objects);
        free(objects);
        expect_error(&m, -1, -32600, "more than 65536 JSON values");
        still_serving(&m);
        /* Refused at its 65,537th value: what came after was not kept. */
        hwm_kib = it_proc_status(m.pid, "VmHWM");
        printf("sbx mcp peak memory after the 30 MB array: VmHWM %ld KiB\n", hwm_kib);
        ck_assert_msg(hwm_kib > 0 && hwm_kib < (64l << 10), "VmHWM %ld KiB", hwm_kib);

        mcp_send_long(&m,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":"
                      "\"write_file\",\"arguments\":{\"path\":\"big\",\"content\":\"",
                      'x', 100u * 1000u * 1000u, "\"}},\"id\":700}");
        expect_error(&m, 700, -32600, "a line longer than");
        still_serving(&m);

        hwm_kib = it_proc_status(m.pid, "VmHWM");
        printf("sbx mcp peak memory after the refused lines: VmHWM %ld KiB (bound %ld KiB)\n",
               hwm_kib, bound_kib);
        ck_assert_int_gt(hwm_kib, 0);
        ck_assert_msg(hwm_kib < bound_kib, "VmHWM %ld KiB, over %ld KiB", hwm_kib, bound_kib);
        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- the official TypeScript SDK ------------------------------------------------------------ */

/* The node_modules holding @modelcontextprotocol/sdk: $BUILD/mcp-node, else build/mcp-node. */
static bool find_sdk(char *buf, size_t len) {
        const char *dirs[] = {it_build_dir(), "build"};
        for (size_t i = 0; i < 2; i++) {
                char p[800];
                struct stat st;
                snprintf(p, sizeof(p),
                         "%s/mcp-node/node_modules/@modelcontextprotocol/sdk/package.json",
                         dirs[i]);
                if (stat(p, &st) == 0) {
                        char *real = NULL;
                        snprintf(p, sizeof(p), "%s/mcp-node/node_modules", dirs[i]);
                        real = realpath(p, NULL);
                        if (!real)
                                continue;
                        snprintf(buf, len, "%s", real);
                        free(real);
                        return true;
                }
        }
        return false;
}

static void skip_or_fail(const char *why) {
        const char *req = getenv("SBX_REQUIRE_NPM");
        printf("\n*** SKIPPED: typescript_sdk_client: %s ***\n"
               "*** run `make mcp-node` (needs the npm registry); SBX_REQUIRE_NPM=1 makes this a "
               "failure ***\n\n",
               why);
        fflush(stdout);
        ck_assert_msg(!(req && strcmp(req, "1") == 0), "SBX_REQUIRE_NPM=1 and %s", why);
}

/* tests/mcp/client.mjs drives `sbx mcp` with the SDK's Client and StdioClientTransport. */
/* `sbx mcp --disk 4M --disk-inodes 64`: the sandbox it creates has the disk limit,
 * sandbox_info says it and what enforces it, a command writing past it names "disk" in
 * limits_hit, and write_file past it is a tool error naming the limit. */
START_TEST(owned_sandbox_with_a_disk_limit) {
        const char *owned[] = {"--disk", "4M", "--disk-inodes", "64", NULL};
        struct it_daemon d;
        struct mcp m;
        json_t *r, *st, *hits;
        char *big;
        bool disk = false;

        it_daemon_start(&d, NULL);
        mcp_start(&m, &d, owned);
        json_decref(mcp_handshake(&m, "2025-06-18"));
        r = mcp_tool(&m, "sandbox_info", NULL);
        st = structured_of(r);
        ck_assert_int_eq(
                json_integer_value(json_object_get(json_object_get(st, "limits"), "disk_bytes")),
                4 * 1024 * 1024);
        ck_assert_int_eq(
                json_integer_value(json_object_get(json_object_get(st, "limits"), "disk_inodes")),
                64);
        ck_text_has(r, "disk=4194304 bytes (/workspace)");
        ck_text_has(r, "disk=filesystem_image");
        json_decref(r);

        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s}", "command", "head -c 10M /dev/zero > /workspace/big"));
        hits = json_object_get(structured_of(r), "limits_hit");
        for (size_t i = 0; i < json_array_size(hits); i++)
                disk |= strcmp(json_string_value(json_array_get(hits, i)), "disk") == 0;
        ck_assert_msg(disk, "no \"disk\" in limits_hit: %s", text_of(r));
        ck_text_has(r, "No space left on device");
        json_decref(r);
        json_decref(
                mcp_tool(&m, "run_command", json_pack("{s:s}", "command", "rm /workspace/big")));

        big = malloc(5u << 20);
        memset(big, 'x', 5u << 20);
        big[(5u << 20) - 1] = '\0';
        r = mcp_tool(&m, "write_file", json_pack("{s:s,s:s}", "path", "huge", "content", big));
        free(big);
        ck_assert(is_error(r));
        ck_text_has(r, "disk limit");
        json_decref(r);
        ck_assert_int_eq(mcp_close(&m, 15000), 0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(typescript_sdk_client) {
        struct it_daemon d;
        sbx_client *c;
        char modules[800], sbx[800], cmd[4096], log[700], *id, *real;
        int rc;

        if (!find_sdk(modules, sizeof(modules))) {
                skip_or_fail("@modelcontextprotocol/sdk is not installed in $BUILD/mcp-node");
                return;
        }
        if (system("node --version > /dev/null 2>&1") != 0) {
                skip_or_fail("node is not installed");
                return;
        }
        ck_assert_msg(access("tests/mcp/client.mjs", R_OK) == 0,
                      "tests/mcp/client.mjs not found: run from the top of the tree");
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, "sdk-box");
        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        real = realpath(sbx, NULL);
        ck_assert_ptr_nonnull(real);
        snprintf(log, sizeof(log), "%s/node.log", it_base_dir());
        snprintf(cmd, sizeof(cmd),
                 "NODE_PATH='%s' SBX_BIN='%s' SBX_SOCKET='%s' SBX_MCP_SANDBOX='%s' "
                 "timeout 120 node tests/mcp/client.mjs > '%s' 2>&1",
                 modules, real, d.sock, id, log);
        free(real);
        rc = system(cmd);
        snprintf(cmd, sizeof(cmd), "cat '%s'", log);
        (void)!system(cmd);
        ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
                      "node tests/mcp/client.mjs failed (%d)", rc);
        /* The SDK's client wrote this file through write_file. */
        {
                struct sbx_read_result *rr = NULL;
                ck_assert_int_eq(sbx_read(c, id, "/workspace/sdk/hello.txt", 0, 0, &rr), SBX_OK);
                ck_assert_str_eq((const char *)rr->data, "written by the TypeScript SDK\n");
                sbx_read_result_free(rr);
        }
        ck_assert_int_eq(state_of(c, id), SBX_STATE_READY);
        /* The owned server's sandbox ended when the SDK closed its client. */
        {
                FILE *f = fopen(log, "r");
                char line[512], owned[128] = "";
                double t0 = it_now_ms();
                ck_assert_ptr_nonnull(f);
                while (fgets(line, sizeof(line), f))
                        if (sscanf(line, "owned sandbox: %127s", owned) == 1)
                                break;
                fclose(f);
                ck_assert_msg(*owned, "client.mjs printed no owned sandbox");
                while (state_of(c, owned) != SBX_STATE_TERMINATED && it_now_ms() - t0 < 10000)
                        usleep(20000);
                ck_assert_int_eq(state_of(c, owned), SBX_STATE_TERMINATED);
        }
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* run_command with background returns the command id at once; command_output reads the
 * kept output and status (running), waits for the end with wait_seconds (and answers
 * running when the wait runs out), and stops it; a second server (another client) reads
 * the same command; an unknown id is an error result. */
START_TEST(background_command_and_output) {
        struct it_daemon d;
        struct mcp m, m2;
        json_t *r, *st;
        char *id, cmd[32];
        double t0;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        attach(&m, &d, id, NULL);

        t0 = it_now_ms();
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:s,s:b}", "command", "echo serving; while :; do sleep 0.1; done",
                               "background", 1));
        /* At once: the command never ends by itself. */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_assert(!is_error(r));
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "outcome")), "running");
        snprintf(cmd, sizeof(cmd), "%s", json_string_value(json_object_get(st, "command_id")));
        ck_assert_msg(strncmp(cmd, "c-", 2) == 0, "command_id %s", cmd);
        ck_text_has(r, "command_output");
        json_decref(r);

        attach(&m2, &d, id, NULL);
        /* Once it has said so (however long it took to start). */
        for (t0 = it_now_ms();; usleep(20 * 1000)) {
                r = mcp_tool(&m2, "command_output", json_pack("{s:s}", "command_id", cmd));
                if (strstr(text_of(r), "serving") || it_now_ms() - t0 > 30000)
                        break;
                json_decref(r);
        }
        ck_assert(!is_error(r));
        ck_text_has(r, "[stdout]\nserving\n");
        ck_text_has(r, "[still running after ");
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "outcome")),
                         "running");
        json_decref(r);

        t0 = it_now_ms();
        r = mcp_tool(&m2, "command_output",
                     json_pack("{s:s,s:f}", "command_id", cmd, "wait_seconds", 0.5));
        ck_assert_double_ge(it_now_ms() - t0, 450);
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "outcome")),
                         "running");
        json_decref(r);

        r = mcp_tool(&m, "command_output", json_pack("{s:s,s:b}", "command_id", cmd, "stop", 1));
        ck_assert(is_error(r));
        ck_text_has(r, "[cancelled");
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "outcome")),
                         "cancelled");
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "stdout")),
                         "serving\n");
        json_decref(r);

        r = mcp_tool(
                &m, "run_command",
                json_pack("{s:s,s:b}", "command", "sleep 0.3; echo done; exit 5", "background", 1));
        snprintf(cmd, sizeof(cmd), "%s",
                 json_string_value(json_object_get(structured_of(r), "command_id")));
        json_decref(r);
        r = mcp_tool(&m, "command_output",
                     json_pack("{s:s,s:i}", "command_id", cmd, "wait_seconds", 20));
        ck_assert(is_error(r));
        ck_text_has(r, "[stdout]\ndone\n");
        ck_text_has(r, "[exit code 5");
        json_decref(r);

        r = mcp_tool(&m, "command_output", json_pack("{s:s}", "command_id", "c-999"));
        ck_assert(is_error(r));
        ck_text_has(r, "NOT_FOUND");
        json_decref(r);
        r = mcp_tool(&m, "command_output", json_pack("{}"));
        ck_assert(is_error(r));
        json_decref(r);
        r = mcp_tool(&m, "run_command",
                     json_pack("{s:[s],s:b}", "argv", "/no/such/program", "background", 1));
        ck_assert(is_error(r));
        ck_text_has(r, "[could not start: ");
        json_decref(r);

        ck_assert_int_eq(mcp_close(&m, 10000), 0);
        ck_assert_int_eq(mcp_close(&m2, 10000), 0);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A daemon, a client of it, a sandbox and a server attached to it (with extra flags):
 * what a test of one server needs; attached_stop ends them. */
struct attached {
        struct it_daemon d;
        struct mcp m;
        sbx_client *c;
        char *id;
};

static void attached_start(struct attached *a, const char *const *flags) {
        it_daemon_start(&a->d, NULL);
        a->c = it_connect(&a->d);
        a->id = it_create(a->c, NULL);
        attach(&a->m, &a->d, a->id, flags);
}

static void attached_stop(struct attached *a) {
        ck_assert_int_eq(mcp_close(&a->m, 10000), 0);
        free(a->id);
        sbx_close(a->c);
        ck_assert_int_eq(it_daemon_stop(&a->d), 0);
}

/* The command_id in a run_command result (into buf). */
static const char *command_id_of(json_t *r, char *buf, size_t len) {
        snprintf(buf, len, "%s",
                 json_string_value(json_object_get(structured_of(r), "command_id")));
        ck_assert_msg(strncmp(buf, "c-", 2) == 0, "command_id %s", buf);
        return buf;
}

/* Starts `sleep 100` with run_command in the background, with timeout_seconds t (t < 0:
 * none given); it must start. Its command_id into buf; returns the result (the caller
 * frees it). */
static json_t *sleep_in_background(struct mcp *m, int t, char *buf, size_t len) {
        json_t *args = json_pack("{s:s,s:b}", "command", "sleep 100", "background", 1), *r;

        if (t >= 0)
                json_object_set_new(args, "timeout_seconds", json_integer(t));
        r = mcp_tool(m, "run_command", args);
        ck_assert_msg(!is_error(r), "%s", text_of(r));
        command_id_of(r, buf, len);
        return r;
}

/* A background command has no timeout unless timeout_seconds gives one (a dev server
 * outlives the server's --max-command-timeout, 2 s here); 0 is none too; one given is
 * kept as it is, not lowered to the server's maximum; run_command and command_output
 * report its real timeout (null: none) and a timed-out background command gets a hint
 * that fits it. A foreground timeout_seconds 0 is refused naming the rule, and the
 * tool's description and schema state the rules. */
START_TEST(background_timeouts) {
        const char *flags[] = {"--default-command-timeout", "1", "--max-command-timeout", "2",
                               NULL};
        struct attached at;
        struct mcp *m = &at.m;
        json_t *r, *st, *list, *t, *to;
        char none[32], zero[32], hour[32], one[32];

        attached_start(&at, flags);

        list = mcp_ok(m, "tools/list", NULL);
        ck_assert(has_tool(list, "run_command", &t));
        ck_assert_msg(strstr(json_string_value(json_object_get(t, "description")),
                             "no timeout unless timeout_seconds gives one"),
                      "%s", json_string_value(json_object_get(t, "description")));
        to = json_object_get(json_object_get(json_object_get(t, "inputSchema"), "properties"),
                             "timeout_seconds");
        ck_assert(json_integer_value(json_object_get(to, "minimum")) == 0);
        ck_assert_ptr_null(json_object_get(to, "exclusiveMinimum"));
        json_decref(list);

        r = sleep_in_background(m, -1, none, sizeof(none));
        ck_text_has(r, "the sandbox ends (no timeout)");
        ck_assert(json_is_null(json_object_get(structured_of(r), "timeout_seconds")));
        json_decref(r);
        json_decref(sleep_in_background(m, 0, zero, sizeof(zero)));
        r = sleep_in_background(m, 3600, hour, sizeof(hour));
        ck_assert(json_real_value(json_object_get(structured_of(r), "timeout_seconds")) == 3600.0);
        ck_assert_ptr_null(strstr(text_of(r), "lowered"));
        ck_text_has(r, "its timeout_seconds (3600 s) kill it");
        json_decref(r);

        /* Past the server's maximum, all three run; each reports its own timeout. */
        usleep(2500 * 1000);
        r = mcp_tool(m, "command_output", json_pack("{s:s}", "command_id", none));
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "outcome")), "running");
        ck_assert(json_is_null(json_object_get(st, "timeout_seconds")));
        json_decref(r);
        r = mcp_tool(m, "command_output", json_pack("{s:s}", "command_id", zero));
        ck_assert_str_eq(json_string_value(json_object_get(structured_of(r), "outcome")),
                         "running");
        json_decref(r);
        r = mcp_tool(m, "command_output", json_pack("{s:s}", "command_id", hour));
        st = structured_of(r);
        ck_assert_str_eq(json_string_value(json_object_get(st, "outcome")), "running");
        ck_assert(json_real_value(json_object_get(st, "timeout_seconds")) == 3600.0);
        json_decref(r);

        /* A background command killed at its timeout: the hint is for a background one. */
        json_decref(sleep_in_background(m, 1, one, sizeof(one)));
        r = mcp_tool(m, "command_output",
                     json_pack("{s:s,s:i}", "command_id", one, "wait_seconds", 30));
        ck_assert(is_error(r));
        ck_text_has(r, "[timed out: killed after 1 s (its timeout_seconds); start it again with "
                       "background: true and a larger timeout_seconds, or without one");
        ck_assert_ptr_null(strstr(text_of(r), "nohup"));
        st = structured_of(r);
        ck_assert(json_is_true(json_object_get(st, "timed_out")));
        ck_assert(json_real_value(json_object_get(st, "timeout_seconds")) == 1.0);
        json_decref(r);

        /* No timeout is for background only. */
        r = mcp_tool(m, "run_command",
                     json_pack("{s:s,s:i}", "command", "echo ran", "timeout_seconds", 0));
        ck_assert(is_error(r));
        ck_text_has(r, "'timeout_seconds' 0 (no timeout) is for background: true only");
        ck_assert_ptr_null(strstr(text_of(r), "ran\n"));
        json_decref(r);

        for (const char *const *k = (const char *const[]){none, zero, hour, NULL}; *k; k++) {
                r = mcp_tool(m, "command_output",
                             json_pack("{s:s,s:b}", "command_id", *k, "stop", 1));
                ck_text_has(r, "[cancelled");
                json_decref(r);
        }
        attached_stop(&at);
}
END_TEST

/* The text of file path (NUL-terminated; the caller frees it). */
static char *slurp(const char *path) {
        FILE *f = fopen(path, "r");
        char *buf = NULL;
        size_t len = 0, n;
        char chunk[8192];

        ck_assert_msg(f, "cannot open %s", path);
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
                buf = realloc(buf, len + n + 1);
                ck_assert_ptr_nonnull(buf);
                memcpy(buf + len, chunk, n);
                len += n;
        }
        fclose(f);
        ck_assert_ptr_nonnull(buf);
        buf[len] = '\0';
        return buf;
}

/* Every tool tools/list gives is where a user looks, and no other: sbx help, sbx mcp
 * --help, the "Unknown tool" error, and sbx(1)'s MCP SERVER list (an entry per tool,
 * in the server's order, naming every argument of its input schema). A tool added to
 * the server's table, or an argument added to a schema, fails here until documented. */
START_TEST(tools_documented_where_users_look) {
        struct attached at;
        json_t *list, *t, *props, *v;
        char path[1200], *man, *sec, *end, *msg, *help, *mhelp, *entry;
        const char *key;
        size_t i, entries = 0;

        attached_start(&at, NULL);
        list = mcp_ok(&at.m, "tools/list", NULL);
        ck_assert_int_eq(mcp_fails(&at.m, "tools/call", json_pack("{s:s}", "name", "nosuch"), &msg),
                         -32602);
        {
                const char *a[] = {"help", NULL}, *b[] = {"mcp", "--help", NULL};
                ck_assert_int_eq(it_sbx(&at.d, NULL, 0, &help, NULL, a), 0);
                ck_assert_int_eq(it_sbx(&at.d, NULL, 0, &mhelp, NULL, b), 0);
        }
        snprintf(path, sizeof(path), "%s/man/man1/sbx.1", it_build_dir());
        man = slurp(path);
        sec = strstr(man, "\n.SH MCP SERVER\n");
        ck_assert_ptr_nonnull(sec);
        sec = strstr(sec, "The tools, in the order");
        ck_assert_ptr_nonnull(sec);
        end = strstr(sec, "\n.PP\n");
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        for (char *e = strstr(sec, "\n.TP\n.B "); e; e = strstr(e + 1, "\n.TP\n.B "))
                entries++;
        ck_assert_uint_eq(entries, json_array_size(json_object_get(list, "tools")));
        entry = sec;
        json_array_foreach(json_object_get(list, "tools"), i, t) {
                const char *name = json_string_value(json_object_get(t, "name"));
                char head[128], *next;

                ck_assert_msg(strstr(msg, name), "the Unknown tool error lacks %s: %s", name, msg);
                ck_assert_msg(strstr(help, name), "sbx help lacks %s", name);
                ck_assert_msg(strstr(mhelp, name), "sbx mcp --help lacks %s", name);
                /* The next entry is this tool's. */
                snprintf(head, sizeof(head), "\n.TP\n.B %s\n", name);
                entry = strstr(entry, "\n.TP\n.B ");
                ck_assert_msg(entry && strncmp(entry, head, strlen(head)) == 0,
                              "sbx(1) MCP SERVER: tool %zu is not %s", i, name);
                entry += strlen(head);
                next = strstr(entry, "\n.TP\n.B ");
                if (next)
                        *next = '\0';
                props = json_object_get(json_object_get(t, "inputSchema"), "properties");
                json_object_foreach(props, key, v) {
                        ck_assert_msg(strstr(entry, key),
                                      "sbx(1) MCP SERVER: %s does not name its argument %s", name,
                                      key);
                }
                if (next) {
                        *next = '\n';
                        entry = next;
                }
        }
        free(man);
        free(msg);
        free(help);
        free(mhelp);
        json_decref(list);
        attached_stop(&at);
}
END_TEST

/* http_request reaches a server in the sandbox (started with run_command in the
 * background): status, headers, the body, a POST's body delivered, a chunked body
 * decoded, the body cut at --max-output-bytes and said so; nothing listening is an
 * error result naming the port; bad arguments are refused. */
START_TEST(http_request_reaches_a_server) {
        const char *flags[] = {"--max-output-bytes", "1000", NULL};
        static const char server[] =
                "cd /workspace && printf 'hi there\\n' > hello.txt && head -c 5000 /dev/zero | "
                "tr '\\0' x > big.txt && exec python3 -c \"\n"
                "import http.server as h\n"
                "class H(h.SimpleHTTPRequestHandler):\n"
                "  def do_POST(self):\n"
                "    n=int(self.headers['Content-Length']);b=self.rfile.read(n)\n"
                "    self.protocol_version='HTTP/1.1'\n"
                "    self.send_response(201);self.send_header('Transfer-Encoding','chunked')\n"
                "    self.send_header('X-Got',self.headers.get('X-Test',''));self.end_headers()\n"
                "    for p in (b'got ',b,b'!'): self.wfile.write(b'%x\\r\\n%s\\r\\n'%(len(p),p))\n"
                "    self.wfile.write(b'0\\r\\n\\r\\n')\n"
                "h.ThreadingHTTPServer(('127.0.0.1',8000),H).serve_forever()\"\n";
        struct attached at;
        json_t *r, *st;

        attached_start(&at, flags);
        r = mcp_tool(&at.m, "run_command",
                     json_pack("{s:s,s:b}", "command", server, "background", 1));
        ck_assert_msg(!is_error(r), "%s", text_of(r));
        json_decref(r);
        for (int i = 0; i < 100; i++) {
                r = mcp_tool(&at.m, "http_request", json_pack("{s:s}", "path", "/hello.txt"));
                if (!is_error(r))
                        break;
                ck_text_has(r, "port 8000");
                json_decref(r);
                r = NULL;
                usleep(100 * 1000);
        }
        ck_assert_ptr_nonnull(r);
        st = structured_of(r);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "status")), 200);
        ck_assert_str_eq(json_string_value(json_object_get(st, "body")), "hi there\n");
        ck_assert(json_is_false(json_object_get(st, "body_truncated")));
        ck_assert(json_is_string(json_object_get(json_object_get(st, "headers"), "Content-Length")));
        ck_text_has(r, "HTTP 200");
        json_decref(r);

        r = mcp_tool(&at.m, "http_request", json_pack("{s:s}", "path", "/big.txt"));
        st = structured_of(r);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "body_bytes")), 5000);
        ck_assert_uint_eq(strlen(json_string_value(json_object_get(st, "body"))), 1000);
        ck_assert(json_is_true(json_object_get(st, "body_truncated")));
        ck_text_has(r, "the rest was dropped");
        json_decref(r);

        r = mcp_tool(&at.m, "http_request",
                     json_pack("{s:s,s:s,s:s,s:{s:s}}", "method", "POST", "path", "/x", "body",
                               "payload", "headers", "X-Test", "yes"));
        st = structured_of(r);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "status")), 201);
        ck_assert_str_eq(json_string_value(json_object_get(st, "body")), "got payload!");
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "headers"), "X-Got")),
                         "yes");
        json_decref(r);

        r = mcp_tool(&at.m, "http_request", json_pack("{s:i}", "port", 9));
        ck_assert(is_error(r));
        ck_text_has(r, "port 9");
        json_decref(r);
        r = mcp_tool(&at.m, "http_request", json_pack("{s:s}", "path", "no-slash"));
        ck_assert(is_error(r));
        ck_text_has(r, "'path' must start with /");
        json_decref(r);
        r = mcp_tool(&at.m, "http_request", json_pack("{s:s}", "method", "GET /x"));
        ck_assert(is_error(r));
        json_decref(r);
        attached_stop(&at);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("mcp");
        TCase *tc = tcase_create("mcp");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 180);
        tcase_add_test(tc, handshake_and_version_negotiation);
        tcase_add_test(tc, jsonrpc_errors_keep_serving);
        tcase_add_test(tc, run_command_results);
        tcase_add_test(tc, output_caps_per_stream);
        tcase_add_test(tc, timeouts);
        tcase_add_test(tc, cancellation_kills_the_command);
        tcase_add_test(tc, file_tools);
        tcase_add_test(tc, two_servers_share_a_sandbox);
        tcase_add_test(tc, run_command_queue_timeout);
        tcase_add_test(tc, owned_mode_leaves_nothing_behind);
        tcase_add_test(tc, owned_allowlist_sandbox);
        tcase_add_test(tc, ended_sandbox_and_gone_daemon_are_protocol_errors);
        tcase_add_test(tc, typescript_sdk_client);
        tcase_add_test(tc, background_command_and_output);
        tcase_add_test(tc, background_timeouts);
        tcase_add_test(tc, tools_documented_where_users_look);
        tcase_add_test(tc, owned_sandbox_with_a_disk_limit);
        tcase_add_test(tc, largest_call_fits_and_longer_lines_are_skipped);
        tcase_add_test(tc, deep_and_wide_lines_are_refused);
        tcase_add_test(tc, refused_lines_cost_little_memory);
        tcase_add_test(tc, http_request_reaches_a_server);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
