/* cli_mcp.c: `sbx mcp`, a Model Context Protocol server on stdin and stdout.
 *
 * JSON-RPC 2.0, one message a line: initialize (the protocol version negotiated down
 * to what the client speaks), notifications/initialized, ping, tools/list, tools/call
 * and notifications/cancelled. The tools are in cli_mcp_tools.c. Only JSON-RPC goes to
 * stdout; what the server has to say goes to stderr, one line "sbx mcp: ..." each.
 *
 * Modes. Attached (--sandbox ID): the sandbox belongs to somebody else; the server uses
 * it and leaves it running, and any number of servers may attach to one sandbox. Owned
 * (no --sandbox): the server creates a sandbox at start with the flags of `sbx create`
 * and terminates it when it stops (--keep leaves it). While an owned sandbox has no
 * --timeout of its own, the server holds a lease on it: its deadline is kept
 * MCP_LEASE_MS ahead while the server runs, so it outlives no crashed server by more.
 *
 * Threads. The main thread owns stdin, stdout, the server's libsbx client and every
 * job list; it runs the quick tools itself. run_command runs on a thread of its own with
 * a libsbx client of its own (a client is never used by two threads), so the main
 * thread goes on reading stdin: other calls, pings and cancellations are answered while
 * a command runs. A finished thread wakes the main thread through a pipe; the main
 * thread joins it and sends its answer.
 *
 * Cancellation. libsbx does not tell a caller the id of the command it is running, so
 * each command thread connects with a client name unique to its call; on
 * notifications/cancelled the main thread finds the running command of that name in
 * the sandbox's records (GetHistory) and cancels it (CancelCommand). A command not yet
 * recorded is looked for again every MCP_CANCEL_RETRY_MS until the thread ends; one
 * not yet started is not started. A cancelled call gets no answer, as MCP asks.
 *
 * Input. A line is at most 6 times --max-read-bytes and 64 KiB (the largest call a tool
 * takes, however it is escaped), nests at most MCP_MAX_DEPTH deep and holds at most
 * MCP_MAX_VALUES JSON values. A scan of the bytes as they arrive refuses a line past any
 * of these before jansson parses it, keeps no more of it, and answers it with -32600
 * naming the bound (and the request's id, when it finds it).
 *
 * Stopping. When stdin closes, the calls in flight are answered (their commands run at
 * most to their timeouts), then the server exits 0; SIGTERM, SIGINT, SIGHUP or a closed
 * stdout stop it at once, cancelling what runs. An owned sandbox is then terminated. */
#include "cli_mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The most --max-read-bytes may be: the longest line read follows from it. */
#define MCP_MAX_READ_BYTES_CEILING (16u * 1024u * 1024u)
/* The longest line read is the largest message a tool takes: a write_file of
 * --max-read-bytes of content, each byte of it escaped as the longest JSON escape of one
 * byte ("\u0001", 6 bytes), and the rest of the call (the path, at most
 * SBX_PATH_MAX_BYTES escaped the same way, the method, the id, _meta) in the envelope. */
#define MCP_ESCAPED_BYTES_PER_BYTE 6u
#define MCP_ENVELOPE_BYTES         (64u * 1024u)
/* A line nested deeper, or holding more JSON values, is refused before jansson parses
 * it (jansson takes 44-76 times the text for arrays of small values). A tool call nests
 * 4 deep (5 in a batch) and holds at most about 5,200 values (a run_command of
 * MCP_MAX_ARGV arguments and MCP_MAX_ENV variables). */
#define MCP_MAX_DEPTH  64u
#define MCP_MAX_VALUES 65536u
_Static_assert(MCP_MAX_DEPTH <= 64, "struct line_scan keeps a bit per depth in 64 bits");
/* The longest id (its JSON text) a refused line is answered with; a longer one is null. */
#define MCP_MAX_ID_BYTES     256u
#define MCP_READ_CHUNK_BYTES (64u * 1024u)
/* A line buffer grown past this is freed once its line is done. */
#define MCP_KEEP_BUFFER_BYTES (1024u * 1024u)
/* Commands one server runs at once; one more is refused with a tool error. */
#define MCP_MAX_RUNNING 8u
/* How often a cancelled command that is not recorded yet is looked for again. */
#define MCP_CANCEL_RETRY_MS 50
/* The lease on an owned sandbox without --timeout: its deadline, and how often the
 * server moves it on. */
#define MCP_LEASE_MS       (300u * 1000u)
#define MCP_LEASE_RENEW_MS (60u * 1000u)
/* After a signal, how long the server waits for cancelled commands to end. */
#define MCP_STOP_WAIT_MS (10u * 1000u)

/* The protocol revisions the server speaks, newest first. */
static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                "2024-11-05"};

/* Why a line is refused before it is parsed (LINE_OK: it is not). */
enum line_refusal { LINE_OK, LINE_TOO_LONG, LINE_TOO_DEEP, LINE_TOO_MANY_VALUES };

/* Where the scan is in finding the "id" of a line whose top level is an object. */
enum id_search { ID_LOOKING, ID_IN_KEY, ID_KEY_READ, ID_IN_VALUE, ID_FOUND, ID_LOST };

/* What the scan of the line read so far knows (scan_bytes): its bounds, and the id to
 * answer a refused line with. Zeroed for each line. */
struct line_scan {
        size_t bytes;
        size_t depth;     /* containers open */
        uint64_t objects; /* bit d: the container at depth d + 1 is an object */
        size_t values;
        enum line_refusal refused; /* the first bound the line passed */
        bool in_string, escaped;
        bool seen_value; /* the first value of the line has started */
        bool value_next; /* the next token starts a value (not a key) */
        enum id_search id;
        unsigned key_len; /* of the key at depth 1 being read */
        bool key_is_id;   /* so far */
        size_t id_len;
        char id_text[MCP_MAX_ID_BYTES];
};

/* One tools/call running on a thread of its own. */
struct job {
        struct job *next;
        json_t *id;   /* the request's id */
        json_t *args; /* a copy of its arguments: the thread's own */
        const struct mcp_tool *tool;
        struct mcp_call call;
        char client_name[128]; /* unique: finds its command in the records */
        pthread_t thread;
        /* Under server.lock: */
        bool cancelled;
        bool done;
        json_t *result;
        /* The main thread's own: */
        bool cancel_pending; /* cancelled, its command not found yet */
        uint64_t hist_after; /* records before this seq are not its command */
};

struct server {
        struct mcp_env env;
        char *sandbox_id; /* env.sandbox_id's storage */
        sbx_client *c;    /* the main thread's client */
        const char *version;
        pthread_mutex_t lock;
        int wake[2]; /* threads write a byte when done */
        struct job *jobs;
        unsigned n_jobs;
        unsigned long calls;
        /* stdin: the line being read, kept unless it is refused */
        size_t max_line_bytes;
        char *line;
        size_t line_len, line_cap;
        struct line_scan scan;
        bool eof;
        /* stopping */
        int stop_signal;
        bool out_broken;
        bool terminated;
        int64_t lease_due_ms;
        bool lease_warned;
};

/* The write end of the signal pipe; the handler's only state. */
static int signal_wfd = -1;

static void on_signal(int sig) {
        int saved = errno;
        unsigned char b = (unsigned char)sig;
        (void)!write(signal_wfd, &b, 1);
        errno = saved;
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        fputs("sbx mcp: ", stderr);
        cli_put_text(stderr, m ? m : "(out of memory)");
        fputc('\n', stderr);
        free(m);
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- options ------------------------------------------------------------------------------ */

struct mcp_opts {
        const char *sandbox;
        bool keep;
        bool timeout_given; /* --timeout among the create flags */
        char **create_argv; /* "mcp", the create flags, room for "--timeout N" */
        int create_argc;
};

enum {
        O_SANDBOX,
        O_KEEP,
        O_DEFAULT_TIMEOUT,
        O_MAX_TIMEOUT,
        O_MAX_OUTPUT_BYTES,
        O_MAX_OUTPUT_LINES,
        O_MAX_READ_BYTES,
        O_SOCKET,
};

static const struct cli_opt mcp_opts_spec[] = {
        [O_SANDBOX] = {"sandbox", true},
        [O_KEEP] = {"keep", false},
        [O_DEFAULT_TIMEOUT] = {"default-command-timeout", true},
        [O_MAX_TIMEOUT] = {"max-command-timeout", true},
        [O_MAX_OUTPUT_BYTES] = {"max-output-bytes", true},
        [O_MAX_OUTPUT_LINES] = {"max-output-lines", true},
        [O_MAX_READ_BYTES] = {"max-read-bytes", true},
        [O_SOCKET] = {"socket", true},
        {NULL, false},
};

static int apply_opt(struct cli *cli, struct mcp_env *env, struct mcp_opts *o, int k,
                     const char *a) {
        uint64_t v;

        switch (k) {
        case O_SANDBOX:
                if (!*a)
                        return cli_bad_value("mcp", "--sandbox", a, "expected a sandbox ID");
                o->sandbox = a;
                break;
        case O_KEEP:
                o->keep = true;
                break;
        case O_DEFAULT_TIMEOUT:
                if (cli_parse_secs_ms(a, &env->default_timeout_ms) < 0 || !env->default_timeout_ms)
                        return cli_bad_value("mcp", "--default-command-timeout", a,
                                             "expected seconds > 0, e.g. 60");
                break;
        case O_MAX_TIMEOUT:
                if (cli_parse_secs_ms(a, &env->max_timeout_ms) < 0 || !env->max_timeout_ms)
                        return cli_bad_value("mcp", "--max-command-timeout", a,
                                             "expected seconds > 0, e.g. 600");
                break;
        case O_MAX_OUTPUT_BYTES:
                if (cli_parse_bytes(a, &env->max_output_bytes) < 0 || !env->max_output_bytes)
                        return cli_bad_value("mcp", "--max-output-bytes", a,
                                             "expected bytes > 0, e.g. 50K");
                break;
        case O_MAX_OUTPUT_LINES:
                if (cli_parse_uint(a, UINT32_MAX, &v) < 0 || !v)
                        return cli_bad_value("mcp", "--max-output-lines", a,
                                             "expected a count > 0, e.g. 2000");
                env->max_output_lines = v;
                break;
        case O_MAX_READ_BYTES:
                if (cli_parse_bytes(a, &env->max_read_bytes) < 0 || !env->max_read_bytes ||
                    env->max_read_bytes > MCP_MAX_READ_BYTES_CEILING) {
                        char what[64];
                        snprintf(what, sizeof(what), "expected bytes > 0, at most %uM, e.g. 5M",
                                 MCP_MAX_READ_BYTES_CEILING >> 20);
                        return cli_bad_value("mcp", "--max-read-bytes", a, what);
                }
                break;
        case O_SOCKET:
                cli->socket_path = a;
                break;
        default:
                return cli_error(SBX_INTERNAL, "unhandled option %d", k);
        }
        return 0;
}

/* The index in mcp_opts_spec of the option named by the nlen bytes of name, or -1. */
static int mcp_opt_index(const char *name, size_t nlen) {
        for (int k = 0; mcp_opts_spec[k].name; k++)
                if (strlen(mcp_opts_spec[k].name) == nlen &&
                    strncmp(mcp_opts_spec[k].name, name, nlen) == 0)
                        return k;
        return -1;
}

/* The options that go together badly, once all are read. 0 or an exit status. */
static int check_combination(const struct mcp_env *env, const struct mcp_opts *o) {
        if (o->sandbox && o->create_argc > 1)
                return cli_usage_error("'%s' is a flag for the sandbox sbx mcp creates; with "
                                       "--sandbox the sandbox exists already",
                                       o->create_argv[1]);
        if (o->sandbox && o->keep)
                return cli_usage_error("--keep is for the sandbox sbx mcp creates; an attached "
                                       "sandbox (--sandbox) is always left running");
        if (env->default_timeout_ms > env->max_timeout_ms)
                return cli_usage_error("--default-command-timeout is longer than "
                                       "--max-command-timeout");
        return 0;
}

/* Splits argv into the server's own options and the flags of `sbx create`, which are
 * handed to create's own parser as they are (it reports what is wrong with them).
 * 0, -1 (help shown) or an exit status. */
static int parse_args(struct cli *cli, int argc, char **argv, struct mcp_env *env,
                      struct mcp_opts *o) {
        o->create_argv = calloc((size_t)argc + 5, sizeof(char *));
        if (!o->create_argv)
                return cli_error(SBX_INTERNAL, "out of memory");
        o->create_argv[o->create_argc++] = argv[0];
        for (int i = 1; i < argc; i++) {
                const char *w = argv[i], *name = w + 2, *eq;
                size_t nlen;
                int k, r;

                if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
                        cli_usage(stdout, "mcp");
                        return -1;
                }
                if (strncmp(w, "--", 2) != 0 || !w[2]) {
                        o->create_argv[o->create_argc++] = argv[i];
                        continue;
                }
                eq = strchr(name, '=');
                nlen = eq ? (size_t)(eq - name) : strlen(name);
                k = mcp_opt_index(name, nlen);
                if (k < 0) {
                        if (nlen == 4 && strncmp(name, "json", 4) == 0)
                                return cli_usage_error("sbx mcp takes no --json: it speaks "
                                                       "JSON-RPC on stdout");
                        if (nlen == 7 && strncmp(name, "timeout", 7) == 0)
                                o->timeout_given = true;
                        o->create_argv[o->create_argc++] = argv[i];
                        continue;
                }
                if (!mcp_opts_spec[k].has_arg && eq)
                        return cli_usage_error("option --%s of sbx mcp takes no value",
                                               mcp_opts_spec[k].name);
                if (mcp_opts_spec[k].has_arg && !eq && i + 1 >= argc)
                        return cli_usage_error("option --%s of sbx mcp needs a value",
                                               mcp_opts_spec[k].name);
                r = apply_opt(cli, env, o, k,
                              !mcp_opts_spec[k].has_arg ? NULL
                              : eq                      ? eq + 1
                                                        : argv[++i]);
                if (r)
                        return r;
        }
        return check_combination(env, o);
}

/* ---- the sandbox ---------------------------------------------------------------------------- */

/* Creates the owned sandbox with the create flags, through `sbx create`'s own parser (the
 * one definition of those flags, which reports what is wrong with them). 0 and *ret_id,
 * or an exit status (printed). */
static int create_owned(struct cli *cli, struct mcp_opts *o, char **ret_id) {
        struct sbx_sandbox *sb = NULL;
        int status = cli_create(cli, o->create_argc, o->create_argv, &sb, NULL);

        if (status)
                return status;
        if (!sb) /* create's --help, which parse_args answers first */
                return cli_error(SBX_INTERNAL, "no sandbox was created");
        for (size_t i = 0; i < sb->warnings.n; i++)
                note("warning: %s", sb->warnings.v[i]);
        *ret_id = strdup(sb->id);
        sbx_sandbox_free(sb);
        return *ret_id ? 0 : cli_error(SBX_INTERNAL, "out of memory");
}

/* Checks that the sandbox to attach to is there and live. 0 or an exit status. */
static int check_attached(struct server *s) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code rc = sbx_get(s->c, s->env.sandbox_id, &sb);
        int status = 0;

        if (rc != SBX_OK)
                return cli_client_error(s->c, rc);
        if (sb->state != SBX_STATE_READY && sb->state != SBX_STATE_CREATING)
                status = cli_error(SBX_FAILED_PRECONDITION,
                                   "sandbox '%s' is %s; attach to a live sandbox (sbx list)",
                                   s->env.sandbox_id, sbx_state_name(sb->state));
        else
                cli_warn_not_owner(s->c, s->env.sandbox_id, sb->owner_uid);
        sbx_sandbox_free(sb);
        return status;
}

static void terminate_owned(struct server *s) {
        enum sbx_code rc;

        if (!s->env.owned || s->env.keep || s->terminated)
                return;
        s->terminated = true;
        rc = sbx_terminate(s->c, s->env.sandbox_id, NULL);
        if (rc == SBX_OK || rc == SBX_NOT_FOUND)
                note("sandbox '%s' terminated", s->env.sandbox_id);
        else
                note("cannot terminate sandbox '%s': %s: %s", s->env.sandbox_id, sbx_code_name(rc),
                     sbx_error_message(s->c));
}

static void renew_lease(struct server *s) {
        enum sbx_code rc;

        if (!s->env.lease || now_ms() < s->lease_due_ms)
                return;
        s->lease_due_ms = now_ms() + MCP_LEASE_RENEW_MS;
        rc = sbx_set_timeout(s->c, s->env.sandbox_id, MCP_LEASE_MS, NULL);
        if (rc != SBX_OK && !s->lease_warned) {
                s->lease_warned = true;
                note("cannot move the deadline of sandbox '%s' on: %s: %s", s->env.sandbox_id,
                     sbx_code_name(rc), sbx_error_message(s->c));
        }
}

/* ---- JSON-RPC output ----------------------------------------------------------------------- */

/* Sends message m (taken) on stdout. A client that closed stdout stops the server. */
static void send_message(struct server *s, json_t *m) {
        if (!m) {
                note("out of memory building an answer");
                return;
        }
        if (!s->out_broken && cli_json_print(stdout, m) < 0) {
                s->out_broken = true;
                note("cannot write to stdout (%s): stopping", strerror(errno));
        }
        json_decref(m);
}

/* A result answer to request id; result is taken. */
static void reply(struct server *s, json_t *id, json_t *result) {
        send_message(
                s, result ? json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result)
                          : NULL);
}

/* An error answer to request id (NULL: an id that could not be read). data is taken. */
__attribute__((format(printf, 5, 6))) static void
reply_error(struct server *s, json_t *id, int code, json_t *data, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        json_t *err, *msg;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        msg = cli_json_text(m ? m : "error", m ? strlen(m) : 5);
        free(m);
        err = msg ? json_pack("{s:i,s:o}", "code", code, "message", msg) : NULL;
        if (err && data)
                json_object_set(err, "data", data);
        json_decref(data);
        send_message(s, err ? json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id",
                                        id ? id : json_null(), "error", err)
                            : NULL);
}

/* Answers a finished call: its result, or the JSON-RPC error it left in k. */
static void reply_call(struct server *s, json_t *id, json_t *result, struct mcp_call *k) {
        if (result) {
                reply(s, id, result);
        } else {
                json_t *data = k->err_data;
                k->err_data = NULL;
                reply_error(s, id, k->err_code ? k->err_code : MCP_INTERNAL_ERROR, data, "%s",
                            k->err_message ? k->err_message : "the tool failed");
        }
        mcp_call_clear(k);
}

/* ---- command threads ------------------------------------------------------------------------ */

static void job_free(struct job *j) {
        if (!j)
                return;
        json_decref(j->id);
        json_decref(j->args);
        json_decref(j->result);
        mcp_call_clear(&j->call);
        free(j);
}

/* Runs job j on a client of its own; leaves its result (or JSON-RPC error) in j. */
static void job_run(struct job *j) {
        pthread_mutex_t *lock = j->call.lock;
        sbx_client *c = NULL;
        enum sbx_code rc = sbx_connect(j->call.env->socket_path, j->client_name, &c);
        json_t *r = NULL;

        if (rc == SBX_OK) {
                sbx_set_call_timeout_ms(c, CLI_CALL_TIMEOUT_MS);
                j->call.c = c;
                r = mcp_tool_call(j->tool, &j->call, j->args);
                j->call.c = NULL;
        } else if (!c || (rc == SBX_UNAVAILABLE && sbx_errno(c) != 0)) {
                j->call.err_code = MCP_DAEMON_GONE;
                if (asprintf(&j->call.err_message,
                             "sbxd cannot be reached (%s): stop using this server until sbxd "
                             "runs again",
                             c ? sbx_error_message(c) : "out of memory") < 0)
                        j->call.err_message = NULL;
        } else {
                /* Refused, not gone (too many connections of this user, say): a tool error. */
                char m[600];
                snprintf(m, sizeof(m), "%s: cannot connect to sbxd for this command: %s",
                         sbx_code_name(rc), sbx_error_message(c));
                r = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", m,
                              "isError", 1);
        }
        sbx_close(c);
        pthread_mutex_lock(lock);
        j->result = r;
        j->done = true;
        pthread_mutex_unlock(lock);
}

/* What a command thread starts with: its job, and the pipe that wakes the main thread
 * when the job is done. */
struct job_start {
        struct job *job;
        int wake_fd;
};

static void *job_thread(void *arg) {
        struct job_start st = *(struct job_start *)arg;
        free(arg);
        job_run(st.job);
        (void)!write(st.wake_fd, "x", 1);
        return NULL;
}

static bool structured(const struct server *s) {
        return !s->version || strcmp(s->version, "2025-06-18") >= 0;
}

/* Starts tool t for request id on a thread of its own. */
static void start_job(struct server *s, json_t *id, const struct mcp_tool *t, json_t *args) {
        struct job *j;
        struct job_start *st;
        sigset_t block, old;
        int r;

        if (s->n_jobs >= MCP_MAX_RUNNING) {
                char m[160];
                snprintf(m, sizeof(m),
                         "%u commands are running already, as many as this server runs at once; "
                         "wait for one to end",
                         MCP_MAX_RUNNING);
                reply(s, id,
                      json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", m,
                                "isError", 1));
                return;
        }
        j = calloc(1, sizeof(*j));
        st = malloc(sizeof(*st));
        if (!j || !st || !(j->args = args ? json_deep_copy(args) : json_object())) {
                free(j);
                free(st);
                reply_error(s, id, MCP_INTERNAL_ERROR, NULL, "sbx mcp ran out of memory");
                return;
        }
        j->id = json_incref(id);
        j->tool = t;
        j->call = (struct mcp_call){.env = &s->env,
                                    .structured = structured(s),
                                    .lock = &s->lock,
                                    .cancelled = &j->cancelled};
        snprintf(j->client_name, sizeof(j->client_name), "sbx-mcp/%s pid=%d call=%lu", SBX_VERSION,
                 (int)getpid(), ++s->calls);
        st->job = j;
        st->wake_fd = s->wake[1];
        /* The thread runs with the stop signals blocked: they are the main thread's. */
        sigemptyset(&block);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        r = pthread_create(&j->thread, NULL, job_thread, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                free(st);
                reply_error(s, id, MCP_INTERNAL_ERROR, NULL, "cannot start a thread: %s",
                            strerror(r));
                job_free(j);
                return;
        }
        j->next = s->jobs;
        s->jobs = j;
        s->n_jobs++;
}

/* Joins the threads that are done and answers their calls (not the cancelled ones). */
static void reap_jobs(struct server *s) {
        struct job **pp = &s->jobs;

        while (*pp) {
                struct job *j = *pp;
                bool done, cancelled;
                json_t *r;

                pthread_mutex_lock(&s->lock);
                done = j->done;
                cancelled = j->cancelled;
                r = j->result;
                j->result = NULL;
                pthread_mutex_unlock(&s->lock);
                if (!done) {
                        pp = &j->next;
                        continue;
                }
                pthread_join(j->thread, NULL);
                *pp = j->next;
                s->n_jobs--;
                if (cancelled)
                        json_decref(r);
                else
                        reply_call(s, j->id, r, &j->call);
                job_free(j);
        }
}

/* Looks for the running command of job j in the sandbox's records and cancels it.
 * Returns true when nothing is left to do (cancelled, or ended); false to look again
 * later (not recorded yet, or the daemon did not answer). */
static bool try_cancel(struct server *s, struct job *j) {
        for (;;) {
                struct sbx_history *h = NULL;
                enum sbx_code rc = sbx_history(s->c, s->env.sandbox_id, j->hist_after,
                                               SBX_MAX_HISTORY_LIMIT, &h);
                size_t i;

                if (rc != SBX_OK)
                        return false;
                for (i = 0; i < h->n; i++) {
                        const struct sbx_command_record *rec = &h->v[i];
                        if (strcmp(rec->client_name, j->client_name) != 0)
                                continue;
                        if (!rec->ended_unix_ms) {
                                rc = sbx_cancel(s->c, s->env.sandbox_id, rec->command_id);
                                if (rc != SBX_OK && rc != SBX_NOT_FOUND)
                                        note("cannot cancel command %s: %s: %s", rec->command_id,
                                             sbx_code_name(rc), sbx_error_message(s->c));
                        }
                        sbx_history_free(h);
                        return true;
                }
                if (h->n)
                        j->hist_after = h->v[h->n - 1].seq;
                if (!h->truncated || !h->n) {
                        sbx_history_free(h);
                        return false;
                }
                sbx_history_free(h);
        }
}

static void cancel_job(struct server *s, struct job *j) {
        bool done;

        pthread_mutex_lock(&s->lock);
        done = j->done;
        if (!done)
                j->cancelled = true;
        pthread_mutex_unlock(&s->lock);
        if (done || j->cancel_pending)
                return;
        j->cancel_pending = !try_cancel(s, j);
}

static void retry_cancels(struct server *s) {
        for (struct job *j = s->jobs; j; j = j->next) {
                bool done;
                if (!j->cancel_pending)
                        continue;
                pthread_mutex_lock(&s->lock);
                done = j->done;
                pthread_mutex_unlock(&s->lock);
                j->cancel_pending = !done && !try_cancel(s, j);
        }
}

static bool cancels_pending(const struct server *s) {
        for (const struct job *j = s->jobs; j; j = j->next)
                if (j->cancel_pending)
                        return true;
        return false;
}

/* ---- methods --------------------------------------------------------------------------------- */

static json_t *initialize_result(struct server *s, const char *version) {
        const struct mcp_env *e = &s->env;
        char *text = NULL, a[32], b[32];
        json_t *r;

        snprintf(a, sizeof(a), "%llu", (unsigned long long)(e->default_timeout_ms / 1000));
        snprintf(b, sizeof(b), "%llu", (unsigned long long)(e->max_timeout_ms / 1000));
        if (asprintf(&text,
                     "The tools work in sbxd sandbox '%s', a Linux sandbox on this machine: "
                     "commands run in /workspace, which is writable and kept between calls, as "
                     "is /tmp; the rest of the file system is the host's, read-only. %s "
                     "Commands time out after %s s unless timeout_seconds "
                     "says otherwise (at most %s s). Each output stream is cut to its last "
                     "%llu bytes and %llu lines. sandbox_info shows the network, writable paths "
                     "and limits.",
                     e->sandbox_id,
                     e->owned ? (e->keep ? "It was made for this session and is left running "
                                           "after it."
                                         : "It was made for this session and ends with it.")
                              : "It is shared: other agents may work in it at the same time, "
                                "and it stays after this session.",
                     a, b, (unsigned long long)e->max_output_bytes,
                     (unsigned long long)e->max_output_lines) < 0)
                return NULL;
        r = json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", version,
                      "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "sbx",
                      "version", SBX_VERSION, "instructions", text);
        if (r && strcmp(version, "2025-06-18") >= 0)
                json_object_set_new(json_object_get(r, "serverInfo"), "title",
                                    json_string("sbxd sandbox"));
        free(text);
        return r;
}

static void on_initialize(struct server *s, json_t *id, json_t *params) {
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
        json_t *info = json_object_get(params, "clientInfo");
        const char *version = protocol_versions[0];
        json_t *r;

        if (!asked) {
                reply_error(s, id, MCP_INVALID_PARAMS, NULL,
                            "initialize needs params.protocolVersion, a string such as \"%s\"",
                            protocol_versions[0]);
                return;
        }
        for (size_t i = 0; i < sizeof(protocol_versions) / sizeof(protocol_versions[0]); i++)
                if (strcmp(asked, protocol_versions[i]) == 0)
                        version = protocol_versions[i];
        s->version = version;
        note("client %s %s, protocol %s (asked %s)",
             json_string_value(json_object_get(info, "name")) ?: "(unnamed)",
             json_string_value(json_object_get(info, "version")) ?: "", version, asked);
        r = initialize_result(s, version);
        if (!r) {
                reply_error(s, id, MCP_INTERNAL_ERROR, NULL, "sbx mcp ran out of memory");
                return;
        }
        reply(s, id, r);
}

static void on_tools_call(struct server *s, json_t *id, json_t *params) {
        json_t *name = json_object_get(params, "name"),
               *args = json_object_get(params, "arguments");
        const struct mcp_tool *t;
        struct mcp_call k = {.env = &s->env, .c = s->c, .structured = structured(s)};

        if (!json_is_string(name)) {
                reply_error(s, id, MCP_INVALID_PARAMS, NULL,
                            "tools/call needs params.name, the name of a tool (see tools/list)");
                return;
        }
        if (args && !json_is_object(args) && !json_is_null(args)) {
                reply_error(s, id, MCP_INVALID_PARAMS, NULL,
                            "params.arguments of tools/call must be an object");
                return;
        }
        if (json_is_null(args))
                args = NULL;
        t = mcp_tool_find(json_string_value(name));
        if (!t) {
                char names[512];
                cli_mcp_tool_names(names, sizeof(names));
                reply_error(s, id, MCP_INVALID_PARAMS, NULL, "Unknown tool: %s (the tools are %s)",
                            json_string_value(name), names);
                return;
        }
        if (mcp_tool_threaded(t)) {
                start_job(s, id, t, args);
                return;
        }
        reply_call(s, id, mcp_tool_call(t, &k, args), &k);
}

static void on_cancelled(struct server *s, json_t *params) {
        json_t *rid = json_object_get(params, "requestId");

        if (!rid)
                return;
        for (struct job *j = s->jobs; j; j = j->next)
                if (json_equal(j->id, rid)) {
                        const char *reason = json_string_value(json_object_get(params, "reason"));
                        note("the client cancelled a run_command (%s)%s%s", j->client_name,
                             reason ? ": " : "", reason ? reason : "");
                        cancel_job(s, j);
                        return;
                }
}

static void on_request(struct server *s, const char *method, json_t *id, json_t *params) {
        if (strcmp(method, "initialize") == 0) {
                on_initialize(s, id, params);
        } else if (strcmp(method, "ping") == 0) {
                reply(s, id, json_object());
        } else if (strcmp(method, "tools/list") == 0) {
                json_t *r = mcp_tools_list(&s->env, s->version ? s->version : protocol_versions[0]);
                if (r)
                        reply(s, id, r);
                else
                        reply_error(s, id, MCP_INTERNAL_ERROR, NULL, "cannot describe the tools");
        } else if (strcmp(method, "tools/call") == 0) {
                on_tools_call(s, id, params);
        } else {
                reply_error(s, id, MCP_METHOD_NOT_FOUND, NULL,
                            "Method not found: %s (this server has tools only: tools/list and "
                            "tools/call)",
                            method);
        }
}

static void on_notification(struct server *s, const char *method, json_t *params) {
        if (strcmp(method, "notifications/cancelled") == 0)
                on_cancelled(s, params);
        /* notifications/initialized and any other notification need nothing. */
}

/* One JSON-RPC message (a member of a batch, or a line). */
static void on_message(struct server *s, json_t *m) {
        json_t *id, *method, *params;

        if (!json_is_object(m)) {
                reply_error(s, NULL, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: a message is a JSON object");
                return;
        }
        id = json_object_get(m, "id");
        method = json_object_get(m, "method");
        params = json_object_get(m, "params");
        if (id && !json_is_string(id) && !json_is_integer(id))
                id = NULL; /* answered with a null id, as JSON-RPC says */
        if (!json_is_string(json_object_get(m, "jsonrpc")) ||
            strcmp(json_string_value(json_object_get(m, "jsonrpc")), "2.0") != 0) {
                reply_error(s, id, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: \"jsonrpc\" must be \"2.0\"");
                return;
        }
        if (!method && (json_object_get(m, "result") || json_object_get(m, "error")))
                return; /* an answer: this server sends no requests */
        if (!json_is_string(method) || (json_object_get(m, "id") && !id)) {
                reply_error(s, id, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: needs a string \"method\", and an \"id\" that is a "
                            "string or an integer");
                return;
        }
        if (params && !json_is_object(params)) {
                if (id)
                        reply_error(s, id, MCP_INVALID_PARAMS, NULL, "params must be an object");
                return;
        }
        if (id)
                on_request(s, json_string_value(method), id, params);
        else
                on_notification(s, json_string_value(method), params);
}

static void on_line(struct server *s, char *line, size_t len) {
        json_error_t e;
        json_t *m;
        size_t i;

        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t'); i++)
                ;
        if (i == len)
                return;
        m = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
        if (!m) {
                reply_error(s, NULL, MCP_PARSE_ERROR, NULL, "Parse error: %s (at byte %d)", e.text,
                            e.position);
                return;
        }
        if (json_is_array(m)) {
                /* A batch (2025-03-26): each member is handled, and answered, on its own. */
                if (!json_array_size(m))
                        reply_error(s, NULL, MCP_INVALID_REQUEST, NULL,
                                    "Invalid Request: an empty batch");
                for (i = 0; i < json_array_size(m); i++)
                        on_message(s, json_array_get(m, i));
        } else {
                on_message(s, m);
        }
        json_decref(m);
}

/* ---- the line scan ---------------------------------------------------------------------------
 *
 * Before jansson parses a line, one pass over its bytes, as they arrive, measures what
 * parsing it would cost: its length, its nesting and its count of JSON values (each
 * object, array, string that is not a key, number, true, false and null). A line past a
 * bound is not kept, only scanned on to its newline for the "id" of its top-level object,
 * so that its answer names the request. The scan follows strings and their escapes but
 * does not check the grammar: jansson does that, on a line the scan found within the
 * bounds (the scan's counts are exact for a valid line, and for the valid part of one
 * that is not, where jansson stops). */

static void refuse(struct line_scan *l, enum line_refusal why) {
        if (l->refused == LINE_OK)
                l->refused = why;
}

static bool in_object(const struct line_scan *l) {
        return l->depth && l->depth <= MCP_MAX_DEPTH && ((l->objects >> (l->depth - 1)) & 1u);
}

static void keep_id_byte(struct line_scan *l, char c) {
        if (l->id_len < sizeof(l->id_text))
                l->id_text[l->id_len++] = c;
        else
                l->id = ID_LOST;
}

/* Takes byte c of a string (its opening quote was a token). */
static void scan_in_string(struct line_scan *l, char c) {
        bool closes = !l->escaped && c == '"';

        if (l->id == ID_IN_VALUE)
                keep_id_byte(l, c);
        else if (l->id == ID_IN_KEY && !closes)
                l->key_is_id = l->key_is_id && l->key_len < 2 && c == "id"[l->key_len++];
        l->escaped = !l->escaped && c == '\\';
        if (!closes)
                return;
        l->in_string = false;
        if (l->id == ID_IN_VALUE)
                l->id = ID_FOUND;
        else if (l->id == ID_IN_KEY)
                l->id = l->key_is_id && l->key_len == 2 ? ID_KEY_READ : ID_LOOKING;
}

/* A value starts with c (its first byte, not a space): it is counted, and it may be the
 * id. */
static void start_value(struct line_scan *l, char c) {
        if (++l->values > MCP_MAX_VALUES)
                refuse(l, LINE_TOO_MANY_VALUES);
        if (l->id != ID_KEY_READ || l->depth != 1)
                return;
        l->id = c == '{' || c == '[' ? ID_LOST : ID_IN_VALUE;
        if (l->id == ID_IN_VALUE)
                keep_id_byte(l, c);
}

static void open_container(struct line_scan *l, bool object) {
        uint64_t bit;

        if (l->depth >= MCP_MAX_DEPTH) {
                l->depth++; /* counted on, for the id at depth 1 */
                refuse(l, LINE_TOO_DEEP);
                return;
        }
        bit = 1ull << l->depth++;
        l->objects = object ? l->objects | bit : l->objects & ~bit;
        l->value_next = !object;
}

/* Takes byte c outside strings. */
static void scan_token(struct line_scan *l, char c) {
        bool value = l->value_next || !l->seen_value;

        if (l->id == ID_IN_VALUE) { /* a number (or a word) as the id: up to its end */
                if (!strchr(" \t\r,:[]{}\"", c)) {
                        keep_id_byte(l, c);
                        return;
                }
                l->id = ID_FOUND;
        }
        if (c == ' ' || c == '\t' || c == '\r')
                return;
        l->value_next = false;
        if (value && c != ']' && c != '}') { /* not the end of an empty array */
                l->seen_value = true;
                start_value(l, c);
        }
        switch (c) {
        case '{':
        case '[':
                open_container(l, c == '{');
                break;
        case '}':
        case ']':
                if (l->depth)
                        l->depth--;
                break;
        case ':':
                l->value_next = true;
                break;
        case ',':
                l->value_next = l->depth && !in_object(l);
                break;
        case '"':
                l->in_string = true;
                if (!value && l->depth == 1 && in_object(l) && l->id == ID_LOOKING) {
                        l->id = ID_IN_KEY;
                        l->key_len = 0;
                        l->key_is_id = true;
                }
                break;
        default:
                break;
        }
}

/* Scans the next len bytes of a line (no newline among them). */
static void scan_bytes(struct line_scan *l, const char *p, size_t len, size_t max_line_bytes) {
        size_t i = 0;

        l->bytes += len;
        if (l->bytes > max_line_bytes)
                refuse(l, LINE_TOO_LONG);
        while (i < len) {
                if (!l->in_string) {
                        scan_token(l, p[i++]);
                        continue;
                }
                /* Most of a long line is string: skip to its next quote or backslash. */
                if (!l->escaped && l->id != ID_IN_KEY && l->id != ID_IN_VALUE)
                        while (i < len && p[i] != '"' && p[i] != '\\')
                                i++;
                if (i < len)
                        scan_in_string(l, p[i++]);
        }
}

/* The id a refused line's answer names: that of its top-level object when the scan
 * found a string or an integer, else NULL. A new reference. */
static json_t *scanned_id(const struct line_scan *l) {
        json_t *id;

        if (l->id != ID_FOUND && !(l->id == ID_IN_VALUE && !l->in_string))
                return NULL;
        id = json_loadb(l->id_text, l->id_len, JSON_DECODE_ANY, NULL);
        if (json_is_string(id) || json_is_integer(id))
                return id;
        json_decref(id);
        return NULL;
}

/* Answers a line the scan refused. */
static void refuse_line(struct server *s) {
        json_t *id = scanned_id(&s->scan);

        switch (s->scan.refused) {
        case LINE_TOO_LONG:
                reply_error(s, id, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: a line longer than %zu bytes, the most this "
                            "server reads (a write_file of %llu bytes of content, the most it "
                            "writes, escaped); the line was skipped",
                            s->max_line_bytes, (unsigned long long)s->env.max_read_bytes);
                break;
        case LINE_TOO_DEEP:
                reply_error(s, id, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: JSON nested more than %u deep, the most this "
                            "server reads (a tool call nests 4 deep)",
                            MCP_MAX_DEPTH);
                break;
        case LINE_TOO_MANY_VALUES:
                reply_error(s, id, MCP_INVALID_REQUEST, NULL,
                            "Invalid Request: more than %u JSON values in a line, the most this "
                            "server reads",
                            MCP_MAX_VALUES);
                break;
        case LINE_OK:
                break;
        }
        json_decref(id);
}

/* Forgets the line read: its bytes (the buffer too, when it grew large) and its scan. */
static void drop_line(struct server *s) {
        s->line_len = 0;
        if (s->line_cap > MCP_KEEP_BUFFER_BYTES) {
                free(s->line);
                s->line = NULL;
                s->line_cap = 0;
        }
}

/* Scans the next len bytes of the line and keeps them, unless the line is refused. */
static void add_to_line(struct server *s, const char *p, size_t len) {
        size_t need;

        scan_bytes(&s->scan, p, len, s->max_line_bytes);
        if (s->scan.refused != LINE_OK) {
                drop_line(s);
                return;
        }
        need = s->line_len + len; /* at most max_line_bytes: the scan refused more */
        if (need > s->line_cap) {
                size_t ncap = s->line_cap ? s->line_cap : 2 * MCP_READ_CHUNK_BYTES;
                char *nb;
                while (ncap < need)
                        ncap *= 2;
                if (ncap > s->max_line_bytes)
                        ncap = s->max_line_bytes;
                nb = realloc(s->line, ncap);
                if (!nb) {
                        note("out of memory reading stdin");
                        s->eof = true;
                        return;
                }
                s->line = nb;
                s->line_cap = ncap;
        }
        memcpy(s->line + s->line_len, p, len);
        s->line_len = need;
}

/* The line is complete: handles it, or answers its refusal. */
static void end_line(struct server *s) {
        if (s->scan.refused != LINE_OK)
                refuse_line(s);
        else
                on_line(s, s->line, s->line_len);
        drop_line(s);
        memset(&s->scan, 0, sizeof(s->scan));
}

/* Takes len bytes read from stdin: lines and parts of lines. */
static void take_input(struct server *s, const char *p, size_t len) {
        while (len && !s->eof) {
                const char *nl = memchr(p, '\n', len);
                size_t part = nl ? (size_t)(nl - p) : len;

                add_to_line(s, p, part);
                if (!nl || s->eof)
                        break;
                end_line(s);
                p += part + 1;
                len -= part + 1;
        }
}

/* ---- the loop ----------------------------------------------------------------------------------
 */

/* Reads what stdin has: each complete line is handled, or refused. */
static void read_input(struct server *s) {
        char chunk[MCP_READ_CHUNK_BYTES];
        ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));

        if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                note("cannot read stdin: %s", strerror(errno));
                s->eof = true;
                return;
        }
        if (n == 0) {
                s->eof = true;
                if (s->scan.bytes) /* a last message without its newline */
                        end_line(s);
                return;
        }
        take_input(s, chunk, (size_t)n);
}

static int poll_timeout(const struct server *s) {
        int64_t t = -1;

        if (cancels_pending(s))
                t = MCP_CANCEL_RETRY_MS;
        if (s->env.lease) {
                int64_t left = s->lease_due_ms - now_ms();
                if (left < 0)
                        left = 0;
                if (t < 0 || left < t)
                        t = left;
        }
        return (int)t;
}

/* Waits for stdin, finished threads and signals; returns when the server is to stop:
 * stdin closed, stdout closed, or a signal. */
static void serve(struct server *s, int sig_rfd) {
        while (!s->eof && !s->out_broken && !s->stop_signal) {
                struct pollfd p[3] = {
                        {sig_rfd, POLLIN, 0}, {s->wake[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
                int r = poll(p, 3, poll_timeout(s));

                if (r < 0 && errno != EINTR) {
                        note("poll: %s", strerror(errno));
                        break;
                }
                if (r > 0 && p[0].revents) {
                        unsigned char b = 0;
                        if (read(sig_rfd, &b, 1) == 1)
                                s->stop_signal = b;
                }
                if (r > 0 && p[1].revents) {
                        char drain[64];
                        (void)!read(s->wake[0], drain, sizeof(drain));
                        reap_jobs(s);
                }
                if (r > 0 && !s->stop_signal && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
                        read_input(s);
                retry_cancels(s);
                renew_lease(s);
        }
}

/* Stops: answers (after stdin closed) or cancels (after a signal) what runs, waits for
 * the threads, and ends an owned sandbox. */
static void stop(struct server *s, int sig_rfd) {
        bool hurry = s->stop_signal || s->out_broken;
        int64_t give_up = 0;

        if (s->stop_signal)
                note("stopping on signal %d", s->stop_signal);
        for (;;) {
                if (hurry && !give_up) {
                        give_up = now_ms() + MCP_STOP_WAIT_MS;
                        /* Cancelled before an owned sandbox is terminated (which ends its
                         * commands with it), so that no call the termination ends is
                         * answered: after a signal, no call in flight is. */
                        for (struct job *j = s->jobs; j; j = j->next)
                                cancel_job(s, j);
                        terminate_owned(s);
                }
                reap_jobs(s);
                if (!s->jobs)
                        break;
                if (give_up && now_ms() > give_up) {
                        note("%u command threads did not end; leaving them", s->n_jobs);
                        break;
                }
                {
                        struct pollfd p[2] = {{sig_rfd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
                        int r = poll(p, 2, cancels_pending(s) ? MCP_CANCEL_RETRY_MS : 1000);
                        if (r > 0 && p[0].revents) {
                                unsigned char b = 0;
                                if (read(sig_rfd, &b, 1) == 1 && !s->stop_signal)
                                        s->stop_signal = b;
                                hurry = true;
                        }
                        if (r > 0 && p[1].revents) {
                                char drain[64];
                                (void)!read(s->wake[0], drain, sizeof(drain));
                        }
                }
                retry_cancels(s);
                if (s->out_broken)
                        hurry = true;
        }
        terminate_owned(s);
}

/* ---- the command ---------------------------------------------------------------------------- */

static int setup_signals(int sig[2]) {
        struct sigaction sa;

        if (pipe2(sig, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        signal_wfd = sig[1];
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        /* A client that closed stdout: EPIPE, not death, so the sandbox can be ended. */
        signal(SIGPIPE, SIG_IGN);
        return 0;
}

/* The server before its options: this server's default limits, no descriptors. */
static void server_init(struct server *s) {
        memset(s, 0, sizeof(*s));
        s->wake[0] = s->wake[1] = -1;
        s->env.default_timeout_ms = MCP_DEFAULT_COMMAND_TIMEOUT_MS;
        s->env.max_timeout_ms = MCP_DEFAULT_MAX_COMMAND_TIMEOUT_MS;
        s->env.max_output_bytes = MCP_DEFAULT_MAX_OUTPUT_BYTES;
        s->env.max_output_lines = MCP_DEFAULT_MAX_OUTPUT_LINES;
        s->env.max_read_bytes = MCP_DEFAULT_MAX_READ_BYTES;
}

/* The sandbox served: the one created now (owned; with a lease unless --timeout was
 * given: a deadline the server keeps moving on), or the one named by --sandbox. 0 or an
 * exit status. */
static int take_sandbox(struct cli *cli, struct server *s, struct mcp_opts *o) {
        char timeout[32];

        if (!s->env.owned) {
                s->sandbox_id = strdup(o->sandbox);
                return s->sandbox_id ? 0 : cli_error(SBX_INTERNAL, "out of memory");
        }
        if (!o->timeout_given) {
                snprintf(timeout, sizeof(timeout), "%u", MCP_LEASE_MS / 1000u);
                o->create_argv[o->create_argc++] = (char *)"--timeout";
                o->create_argv[o->create_argc++] = timeout;
                s->env.lease = true;
                s->lease_due_ms = now_ms() + MCP_LEASE_RENEW_MS;
        }
        return create_owned(cli, o, &s->sandbox_id);
}

/* Releases what the server holds, and the stop signals' handlers and pipe sig. */
static void server_free(struct server *s, int sig[2]) {
        sbx_close(s->c);
        free(s->sandbox_id);
        free(s->line);
        for (int i = 0; i < 2; i++) {
                if (s->wake[i] >= 0)
                        close(s->wake[i]);
        }
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal_wfd = -1;
        for (int i = 0; i < 2; i++)
                if (sig[i] >= 0)
                        close(sig[i]);
        pthread_mutex_destroy(&s->lock);
}

int cmd_mcp(struct cli *cli, int argc, char **argv) {
        struct server s;
        struct mcp_opts o = {0};
        int sig[2] = {-1, -1}, status;

        server_init(&s);
        status = parse_args(cli, argc, argv, &s.env, &o);
        if (status) {
                free(o.create_argv);
                return status < 0 ? 0 : status;
        }
        s.env.socket_path = cli->socket_path;
        s.max_line_bytes =
                MCP_ESCAPED_BYTES_PER_BYTE * (size_t)s.env.max_read_bytes + MCP_ENVELOPE_BYTES;
        s.env.keep = o.keep;
        s.env.owned = !o.sandbox;
        json_object_seed(0);
        if (pthread_mutex_init(&s.lock, NULL) != 0 || setup_signals(sig) < 0 ||
            pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) < 0) {
                status = cli_error(SBX_INTERNAL, "cannot set up: %s", strerror(errno));
                goto out;
        }
        status = take_sandbox(cli, &s, &o);
        if (status)
                goto out;
        s.env.sandbox_id = s.sandbox_id;
        status = cli_connect_kept(cli, &s.c);
        if (status) {
                if (s.env.owned)
                        note("sandbox '%s' was created but cannot be ended from here: end it "
                             "with `sbx terminate %s`",
                             s.sandbox_id, s.sandbox_id);
                goto out;
        }
        if (!s.env.owned && (status = check_attached(&s)))
                goto out;
        note("serving sandbox '%s' (%s) on stdin and stdout", s.env.sandbox_id,
             s.env.owned ? (s.env.keep ? "created; left running at exit"
                                       : "created; terminated at exit")
                         : "attached; left running at exit");
        serve(&s, sig[0]);
        stop(&s, sig[0]);
        status = 0;
out:
        if (s.jobs)
                _exit(status); /* threads that would not end still use what is below */
        server_free(&s, sig);
        free(o.create_argv);
        return status;
}
