/* libsbx.c: the calls of libsbx (sbx.h): each checks its arguments, builds its request
 * (libsbx_wire.c), exchanges it with the daemon (libsbx_transport.c), and turns the reply
 * into the result structs the caller frees with libsbx_types.c's functions.
 *
 * Owns nothing past one call but the output it collects for sbx_exec. What the daemon
 * cannot check for us (an ID's form, a NULL in a list, a missing result pointer) is
 * refused here with SBX_INVALID_ARGUMENT and a message, before anything is sent.
 * Called by applications and by the sbx tool; never logs, never exits. */
#include "libsbx_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_limits.h"

/* Extra wait for a RunCommand reply on top of the call timeout and the command's own
 * timeout: the daemon reports a timeout only after the command verifiably stopped. */
#define EXEC_GRACE_MS 2000u
/* The wait for a slot allowed for when RunCommand gives no queue_timeout_ms: the
 * daemon's default (sbxd --queue-timeout, RunCommand.queue_timeout_ms in sbx.proto). */
#define EXEC_DEFAULT_QUEUE_WAIT_MS 60000u

/* ---- errors ------------------------------------------------------------------------- */

const char *sbx_error_message(const sbx_client *c) {
        if (!c)
                return "no client (out of memory while connecting)";
        if (c->message_oom)
                return "out of memory while describing an error";
        return c->message ? c->message : "";
}

int sbx_errno(const sbx_client *c) {
        return c ? c->err : ENOMEM;
}

/* ---- checks of the arguments -------------------------------------------------------- */

static bool id_valid(const char *id) {
        size_t n = 0;
        for (const char *p = id; *p; p++, n++) {
                char ch = *p;
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
                        return false;
        }
        return n >= 1 && n <= SBX_ID_MAX_BYTES;
}

/* A call given NULL where it needs a pointer: SBX_INVALID_ARGUMENT, with its own message
 * on c when there is a c (the previous call's message must not stand for this one). */
static enum sbx_code null_arg(sbx_client *c, const char *fn, const char *what) {
        if (!c)
                return SBX_INVALID_ARGUMENT;
        return transport_fail(
                c, SBX_INVALID_ARGUMENT, EINVAL,
                "%s() was given NULL for %s; pass the address of a pointer for the result", fn,
                what);
}

/* Checks the sandbox ID argument of a call; fills the error on c when it is bad. */
static enum sbx_code check_id(sbx_client *c, const char *id) {
        if (!id)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no sandbox ID given");
        if (!id_valid(id))
                return transport_fail(
                        c, SBX_INVALID_ARGUMENT, EINVAL,
                        "invalid sandbox ID '%.80s': use 1 to %u of the characters A-Z a-z 0-9 "
                        ". _ -",
                        id, SBX_ID_MAX_BYTES);
        return SBX_OK;
}

enum sbx_code libsbx_check_id(sbx_client *c, const char *id) {
        return check_id(c, id);
}

static enum sbx_code check_path(sbx_client *c, const char *path) {
        if (!path)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no path given");
        return SBX_OK;
}

static bool strv_valid(const struct sbx_strv *s) {
        if (s->n > 0 && !s->v)
                return false;
        for (size_t i = 0; i < s->n; i++)
                if (!s->v[i])
                        return false;
        return true;
}

static bool strs_valid(const char *const *v, size_t n) {
        if (n > 0 && !v)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!v[i])
                        return false;
        return true;
}

/* ---- hello -------------------------------------------------------------------------- */

enum sbx_code sbx_hello(sbx_client *c, struct sbx_hello **ret) {
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        if (!c->hello && c->fd < 0) {
                rc = transport_connect(c);
                if (rc != SBX_OK)
                        return rc;
        }
        if (c->hello_id) {
                rc = transport_hello_finish(c);
                if (rc != SBX_OK)
                        return rc;
        }
        transport_clear_error(c);
        if (!c->hello)
                return transport_fail(c, SBX_UNIMPLEMENTED, 0, "sbxd at %s does not answer Hello",
                                      c->socket_path);
        *ret = wire_hello_copy(c->hello);
        return *ret ? SBX_OK : transport_fail_oom(c);
}

/* ---- sandboxes ---------------------------------------------------------------------- */

/* Finishes a call whose reply body is a SandboxInfo: converts it into *ret (when ret is
 * not NULL) and frees the reply. */
static enum sbx_code finish_sandbox(sbx_client *c, enum sbx_code rc, Sbx__V1__Response *resp,
                                    struct sbx_sandbox **ret) {
        if (rc != SBX_OK)
                return rc;
        if (ret) {
                if (resp->body_case != SBX__V1__RESPONSE__BODY_SANDBOX || !resp->sandbox) {
                        sbx__v1__response__free_unpacked(resp, NULL);
                        return transport_protocol_fail(
                                c, EPROTO, "a reply without the sandbox it was asked for");
                }
                *ret = wire_sandbox_from_proto(resp->sandbox);
                if (!*ret)
                        rc = transport_fail_oom(c);
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

/* Checks what the daemon cannot check for us: the id's form, no NULL in a list, the
 * network mode, the form of env entries. */
static enum sbx_code check_create_opts(sbx_client *c, const struct sbx_create_opts *o) {
        const struct sbx_policy *p = &o->policy;

        if (o->id && check_id(c, o->id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!strv_valid(&p->writable_paths) || !strv_valid(&p->denied_read_paths) ||
            !strv_valid(&p->denied_write_paths) || !strv_valid(&p->inherit_environment) ||
            !strv_valid(&p->allowed_hosts) || !strv_valid(&p->allowed_cidrs) ||
            !strs_valid(o->env, o->n_env) || (o->n_labels && !o->labels) ||
            (o->n_share_uids && !o->share_uids) || (o->n_share_gids && !o->share_gids))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "a NULL entry in the sandbox options");
        if (p->network != SBX_NETWORK_NONE && p->network != SBX_NETWORK_FULL &&
            p->network != SBX_NETWORK_ALLOWLIST)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "unknown network mode %d",
                                      (int)p->network);
        for (size_t i = 0; i < o->n_env; i++)
                if (!strchr(o->env[i], '='))
                        return transport_fail(
                                c, SBX_INVALID_ARGUMENT, EINVAL,
                                "environment entry '%.80s' is not of the form NAME=VALUE",
                                o->env[i]);
        return SBX_OK;
}

/* The labels of o into cs, allocated from pool (pool->oom on failure, reported by the
 * caller); each must have a key and a value. */
static enum sbx_code labels_to_proto(sbx_client *c, const struct sbx_create_opts *o,
                                     Sbx__V1__CreateSandbox *cs, struct pool *pool) {
        if (!o->n_labels)
                return SBX_OK;
        cs->labels = wire_labels(pool, o->labels, o->n_labels);
        if (pool->oom)
                return SBX_OK;
        for (size_t i = 0; i < o->n_labels; i++)
                if (!o->labels[i].key || !o->labels[i].value)
                        return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                              "label %zu has no key or no value", i);
        cs->n_labels = o->n_labels;
        return SBX_OK;
}

enum sbx_code sbx_create(sbx_client *c, const struct sbx_create_opts *o, struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_SANDBOX};
        struct sbx_create_opts defaults;
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (!o) {
                sbx_create_opts_init(&defaults);
                o = &defaults;
        }
        rc = check_create_opts(c, o);
        if (rc != SBX_OK)
                return rc;
        wire_policy_to_proto(&o->policy, &pol, &lim);
        cs.policy = &pol;
        rc = labels_to_proto(c, o, &cs, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = transport_fail_oom(c);
        if (rc != SBX_OK) {
                wire_pool_free(&pool);
                return rc;
        }
        wire_create_to_proto(o, &cs);
        req.body_case = SBX__V1__REQUEST__BODY_CREATE_SANDBOX;
        req.create_sandbox = &cs;
        rc = transport_call(c, &k, &resp);
        wire_pool_free(&pool);
        return finish_sandbox(c, rc, resp, ret);
}

/* Sends req (its body set), answered with a SandboxInfo into *ret (ret NULL: the body
 * may be absent). */
static enum sbx_code sandbox_request(sbx_client *c, Sbx__V1__Request *req,
                                     struct sbx_sandbox **ret) {
        struct exchange k = {
                .req = req, .want = SBX__V1__RESPONSE__BODY_SANDBOX, .body_optional = !ret};
        Sbx__V1__Response *resp;
        enum sbx_code rc = transport_call(c, &k, &resp);

        return finish_sandbox(c, rc, resp, ret);
}

/* The checks every request about sandbox id starts with. */
static enum sbx_code sandbox_request_begin(sbx_client *c, const char *id,
                                           struct sbx_sandbox **ret) {
        if (!c)
                return SBX_INVALID_ARGUMENT;
        if (ret)
                *ret = NULL;
        transport_clear_error(c);
        return check_id(c, id) == SBX_OK ? SBX_OK : SBX_INVALID_ARGUMENT;
}

/* GetSandbox and Terminate: a request with only a sandbox ID, answered with SandboxInfo. */
static enum sbx_code id_call(sbx_client *c, const char *id, bool terminate,
                             struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__GetSandbox get = SBX__V1__GET_SANDBOX__INIT;
        Sbx__V1__Terminate term = SBX__V1__TERMINATE__INIT;
        enum sbx_code rc = sandbox_request_begin(c, id, ret);

        if (rc != SBX_OK)
                return rc;
        if (terminate) {
                term.sandbox_id = unconst(id);
                req.body_case = SBX__V1__REQUEST__BODY_TERMINATE;
                req.terminate = &term;
        } else {
                get.sandbox_id = unconst(id);
                req.body_case = SBX__V1__REQUEST__BODY_GET_SANDBOX;
                req.get_sandbox = &get;
        }
        return sandbox_request(c, &req, ret);
}

enum sbx_code sbx_get(sbx_client *c, const char *id, struct sbx_sandbox **ret) {
        if (!ret)
                return null_arg(c, __func__, "ret");
        return id_call(c, id, false, ret);
}

enum sbx_code sbx_terminate(sbx_client *c, const char *id, struct sbx_sandbox **ret) {
        return id_call(c, id, true, ret);
}

enum sbx_code sbx_set_timeout(sbx_client *c, const char *id, uint64_t timeout_ms,
                              struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__SetTimeout st = SBX__V1__SET_TIMEOUT__INIT;
        enum sbx_code rc = sandbox_request_begin(c, id, ret);

        if (rc != SBX_OK)
                return rc;
        st.sandbox_id = unconst(id);
        st.has_timeout_ms = 1;
        st.timeout_ms = timeout_ms;
        req.body_case = SBX__V1__REQUEST__BODY_SET_TIMEOUT;
        req.set_timeout = &st;
        return sandbox_request(c, &req, ret);
}

enum sbx_code sbx_restore(sbx_client *c, const char *id, const char *image,
                          struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RestoreSandbox rs = SBX__V1__RESTORE_SANDBOX__INIT;
        enum sbx_code rc = sandbox_request_begin(c, id, ret);

        if (rc != SBX_OK)
                return rc;
        if (!image || !image[0])
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "sbx_restore: image is required (a snapshot's name or "
                                      "digest)");
        rs.sandbox_id = unconst(id);
        rs.image = unconst(image);
        req.body_case = SBX__V1__REQUEST__BODY_RESTORE_SANDBOX;
        req.restore_sandbox = &rs;
        return sandbox_request(c, &req, ret);
}

enum sbx_code sbx_list(sbx_client *c, const struct sbx_list_opts *opts,
                       struct sbx_sandbox_list **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListSandboxes ls = SBX__V1__LIST_SANDBOXES__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_LIST_SANDBOXES};
        Sbx__V1__Response *resp;
        struct sbx_sandbox_list *out;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (opts && ((opts->n_labels && !opts->labels) || (opts->n_states && !opts->states)))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "a NULL array in the list options");
        if (opts)
                wire_list_opts_to_proto(opts, &ls, &pool);
        if (pool.oom) {
                wire_pool_free(&pool);
                return transport_fail_oom(c);
        }
        req.body_case = SBX__V1__REQUEST__BODY_LIST_SANDBOXES;
        req.list_sandboxes = &ls;
        rc = transport_call(c, &k, &resp);
        wire_pool_free(&pool);
        if (rc != SBX_OK)
                return rc;
        out = wire_list_from_proto(resp->list_sandboxes);
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return transport_fail_oom(c);
        *ret = out;
        return SBX_OK;
}

/* ---- commands ----------------------------------------------------------------------- */

/* Output collected by the library when it comes in chunks but the caller gave no
 * on_output callback (streamed for stdin_stream or on_started, or a result too large
 * for one frame): the tail of each stream, at most limit bytes, in a ring of that size
 * (allocated at the first chunk), so that keeping the tail of a long stream costs each
 * byte one copy. */
struct collected {
        uint8_t *b[3];
        size_t len[3], limit[3];
        size_t head[3]; /* where the next byte goes; once len == limit, the oldest byte */
        bool truncated[3];
        bool oom;
};

static void collect_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                           size_t len) {
        struct collected *k = ud;
        int i = stream == SBX_STDERR ? 2 : 1;
        const uint8_t *p = data;
        size_t keep = k->limit[i];

        if (len == 0 || keep == 0 || k->oom)
                return;
        if (!k->b[i]) {
                k->b[i] = malloc(keep + 1);
                if (!k->b[i]) {
                        k->oom = true;
                        return;
                }
        }
        if (len >= keep) {
                /* The chunk alone fills the ring: its end is the tail. */
                k->truncated[i] = k->truncated[i] || len > keep || k->len[i] > 0;
                memcpy(k->b[i], p + len - keep, keep);
                k->len[i] = keep;
                k->head[i] = 0;
                return;
        }
        if (k->len[i] + len > keep)
                k->truncated[i] = true;
        while (len > 0) {
                size_t room = keep - k->head[i], n = len < room ? len : room;
                memcpy(k->b[i] + k->head[i], p, n);
                k->head[i] = (k->head[i] + n) % keep;
                k->len[i] = k->len[i] + n > keep ? keep : k->len[i] + n;
                p += n;
                len -= n;
        }
}

/* Moves collected stream i into the result's buffer (its bytes in order, NUL-terminated).
 * 0, or -ENOMEM (the result keeps what it had). */
static int take_collected(struct collected *k, int i, uint8_t **data, size_t *len, int *truncated) {
        uint8_t *b = k->b[i];
        size_t n = k->len[i], h = k->head[i];

        if (!b)
                return 0;
        if (n == k->limit[i] && h > 0) {
                /* Wrapped: the oldest byte is at head. */
                uint8_t *lin = malloc(n + 1);
                if (!lin)
                        return -ENOMEM;
                memcpy(lin, b + h, n - h);
                memcpy(lin + n - h, b, h);
                free(b);
                b = lin;
        }
        b[n] = '\0';
        free(*data);
        *data = b;
        *len = n;
        *truncated = k->truncated[i];
        k->b[i] = NULL;
        return 0;
}

static void collected_free(struct collected *k) {
        free(k->b[1]);
        free(k->b[2]);
        k->b[1] = k->b[2] = NULL;
}

/* Checks the command options: the sandbox id, exactly one of argv and shell, no NULL
 * in a list, a descriptor for streamed stdin. */
static enum sbx_code check_exec_opts(sbx_client *c, const char *id, const struct sbx_exec_opts *o) {
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!o)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command options given");
        if ((o->argc > 0) == (o->shell != NULL))
                return transport_fail(
                        c, SBX_INVALID_ARGUMENT, EINVAL,
                        o->shell ? "give either argv or a shell command, not both"
                                 : "no command given (argv is empty and no shell command)");
        if (!strs_valid(o->argv, o->argc) || !strs_valid(o->env, o->n_env) ||
            (o->stdin_len && !o->stdin_data))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "a NULL entry in the command options");
        if (o->stdin_stream && o->stdin_fd < 0)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EBADF,
                                      "stdin_stream is set but stdin_fd is %d, not a descriptor",
                                      o->stdin_fd);
        return SBX_OK;
}

/* The "NAME=VALUE" entries of o->env as EnvVars of run, from pool (pool->oom on
 * failure). */
static enum sbx_code env_to_proto(sbx_client *c, const struct sbx_exec_opts *o,
                                  Sbx__V1__RunCommand *run, struct pool *pool) {
        Sbx__V1__EnvVar *vars;

        if (!o->n_env)
                return SBX_OK;
        vars = wire_pool_calloc(pool, o->n_env, sizeof(*vars));
        run->env = wire_pool_calloc(pool, o->n_env, sizeof(*run->env));
        for (size_t i = 0; vars && run->env && i < o->n_env; i++) {
                const char *eq = strchr(o->env[i], '=');
                if (!eq || eq == o->env[i])
                        return transport_fail(
                                c, SBX_INVALID_ARGUMENT, EINVAL,
                                "environment entry '%.80s' is not of the form NAME=VALUE",
                                o->env[i]);
                sbx__v1__env_var__init(&vars[i]);
                vars[i].name = wire_pool_take(pool, strndup(o->env[i], (size_t)(eq - o->env[i])));
                vars[i].value = unconst(eq + 1);
                run->env[i] = &vars[i];
        }
        run->n_env = o->n_env;
        return SBX_OK;
}

/* How transport_call() runs it: the wait (the command's timeout and the wait for a slot on top of
 * the call timeout), streamed stdin, the callbacks. Without on_output the library collects the
 * output into col: streamed for stdin or on_started, or in chunks when it does not fit one frame
 * with the result (output_in_chunks). */
static void exec_exchange(const char *id, const struct sbx_exec_opts *o,
                          const Sbx__V1__RunCommand *run, struct exchange *k,
                          struct collected *col) {
        uint64_t queue_ms;

        memset(col, 0, sizeof(*col));
        col->limit[1] = o->max_stdout_bytes ? o->max_stdout_bytes : SBX_DEFAULT_MAX_OUTPUT_BYTES;
        col->limit[2] = o->max_stderr_bytes ? o->max_stderr_bytes : SBX_DEFAULT_MAX_OUTPUT_BYTES;
        if (o->stdin_stream) {
                k->feeding = true;
                k->stdin_fd = o->stdin_fd;
                k->sandbox_id = id;
        }
        queue_ms = run->has_queue_timeout_ms ? run->queue_timeout_ms : EXEC_DEFAULT_QUEUE_WAIT_MS;
        if (queue_ms > UINT64_MAX / 4)
                queue_ms = UINT64_MAX / 4; /* the sum below must not wrap */
        k->extra_ms = run->timeout_ms + EXEC_GRACE_MS + queue_ms;
        k->on_output = o->on_output;
        k->output_userdata = o->userdata;
        k->on_started = o->on_started;
        k->on_queued = o->on_queued;
        k->userdata = o->userdata;
        if (!o->on_output) {
                k->on_output = collect_output;
                k->output_userdata = col;
        }
}

/* The result of a RunCommand reply resp (freed here) into *ret, with the output col
 * collected. rc is SBX_OK, or the status of a command that never started whose result
 * came along; either way the result is the caller's. */
static enum sbx_code exec_result(sbx_client *c, enum sbx_code rc, Sbx__V1__Response *resp,
                                 struct collected *col, struct sbx_result **ret) {
        Sbx__V1__CommandResult *cr = resp->command_result;
        int t_out, t_err;

        if (!cr) {
                collected_free(col);
                sbx__v1__response__free_unpacked(resp, NULL);
                return transport_protocol_fail(c, EPROTO, "a RunCommand reply without its result");
        }
        *ret = wire_result_from_proto(cr);
        /* With output_in_chunks, the daemon's kept tails: its counts and truncation flags
         * stand. */
        if (*ret) {
                t_out = (*ret)->stdout_truncated;
                t_err = (*ret)->stderr_truncated;
        }
        if (!*ret || col->oom ||
            take_collected(col, 1, &(*ret)->stdout_data, &(*ret)->stdout_len,
                           cr->output_in_chunks ? &t_out : &(*ret)->stdout_truncated) < 0 ||
            take_collected(col, 2, &(*ret)->stderr_data, &(*ret)->stderr_len,
                           cr->output_in_chunks ? &t_err : &(*ret)->stderr_truncated) < 0) {
                sbx_result_free(*ret);
                *ret = NULL;
                rc = transport_fail_oom(c);
        }
        collected_free(col);
        sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

enum sbx_code sbx_exec(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                       struct sbx_result **ret) {
        struct collected col;
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
        struct exchange k = {.req = &req,
                             .want = SBX__V1__RESPONSE__BODY_COMMAND_RESULT,
                             .keep_error_body = true};
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        rc = check_exec_opts(c, id, o);
        if (rc == SBX_OK)
                rc = env_to_proto(c, o, &run, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = transport_fail_oom(c);
        if (rc != SBX_OK) {
                wire_pool_free(&pool);
                return rc;
        }
        wire_run_to_proto(id, o, &run);
        exec_exchange(id, o, &run, &k, &col);
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &run;
        rc = transport_call(c, &k, &resp);
        wire_pool_free(&pool);
        free(k.command_id);
        if (!resp) {
                collected_free(&col);
                return rc;
        }
        return exec_result(c, rc, resp, &col, ret);
}

/* Sends a request whose answer has no body of interest (Empty). */
static enum sbx_code empty_call(sbx_client *c, Sbx__V1__Request *req) {
        struct exchange k = {
                .req = req, .want = SBX__V1__RESPONSE__BODY_EMPTY, .body_optional = true};
        Sbx__V1__Response *resp;
        enum sbx_code rc = transport_call(c, &k, &resp);
        if (rc == SBX_OK)
                sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

/* CancelCommand: without a signal the kill, else that signal (the daemon judges which
 * signals it forwards). */
static enum sbx_code cancel_command(sbx_client *c, const char *id, const char *command_id,
                                    bool with_signal, int signo) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        cc.sandbox_id = unconst(id);
        cc.command_id = unconst(command_id);
        cc.has_signal = with_signal;
        cc.signal = signo;
        req.body_case = SBX__V1__REQUEST__BODY_CANCEL_COMMAND;
        req.cancel_command = &cc;
        return empty_call(c, &req);
}

enum sbx_code sbx_cancel(sbx_client *c, const char *id, const char *command_id) {
        return cancel_command(c, id, command_id, false, 0);
}

enum sbx_code sbx_signal(sbx_client *c, const char *id, const char *command_id, int signo) {
        return cancel_command(c, id, command_id, true, signo);
}

enum sbx_code sbx_resize(sbx_client *c, const char *id, const char *command_id, uint32_t rows,
                         uint32_t cols) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        in.sandbox_id = unconst(id);
        in.command_id = unconst(command_id);
        in.has_rows = in.has_cols = 1;
        in.rows = rows;
        in.cols = cols;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        return empty_call(c, &req);
}

/* ---- files -------------------------------------------------------------------------- */

enum sbx_code sbx_read(sbx_client *c, const char *id, const char *path, uint64_t offset,
                       uint64_t limit, struct sbx_read_result **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_READ_FILE};
        Sbx__V1__Response *resp;
        struct sbx_read_result *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        rf.sandbox_id = unconst(id);
        rf.path = unconst(path);
        rf.has_offset = offset > 0;
        rf.offset = offset;
        rf.has_limit = limit > 0;
        rf.limit = limit;
        req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
        req.read_file = &rf;
        rc = transport_call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        out = calloc(1, sizeof(*out));
        if (out) {
                Sbx__V1__ReadFileReply *r = resp->read_file;
                out->size = r->size;
                out->next_offset = r->has_next_offset ? r->next_offset : offset + r->data.len;
                out->eof = r->eof;
                /* The data is taken, not copied: a read of 16 MiB is one copy less. */
                if (!wire_take_bytes(&out->data, &out->len, &r->data)) {
                        free(out);
                        out = NULL;
                }
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return transport_fail_oom(c);
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_write(sbx_client *c, const char *id, const char *path, const void *data,
                        size_t len, uint32_t mode, unsigned flags) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        struct exchange k = {
                .req = &req, .want = SBX__V1__RESPONSE__BODY_WRITE_FILE, .body_optional = true};
        Sbx__V1__Response *resp;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (len && !data)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "no data given for %zu bytes", len);
        if (flags & ~(unsigned)(SBX_WRITE_CREATE_PARENTS | SBX_WRITE_APPEND))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "unknown write flags 0x%x",
                                      flags);
        if (mode > 07777)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "file mode %o has bits beyond 07777", mode);
        wf.sandbox_id = unconst(id);
        wf.path = unconst(path);
        wf.has_data = 1;
        wf.data.data = (uint8_t *)(uintptr_t)data;
        wf.data.len = len;
        wf.has_mode = 1;
        wf.mode = mode ? mode : 0644;
        wf.has_create_parents = !!(flags & SBX_WRITE_CREATE_PARENTS);
        wf.create_parents = !!(flags & SBX_WRITE_CREATE_PARENTS);
        wf.has_append = !!(flags & SBX_WRITE_APPEND);
        wf.append = !!(flags & SBX_WRITE_APPEND);
        req.body_case = SBX__V1__REQUEST__BODY_WRITE_FILE;
        req.write_file = &wf;
        k.ext = wf.data.data; /* sent from the caller's buffer, not copied */
        k.ext_len = len;
        rc = transport_call(c, &k, &resp);
        if (rc == SBX_OK)
                sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

enum sbx_code sbx_list_dir(sbx_client *c, const char *id, const char *path, uint32_t limit,
                           struct sbx_dir_list **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListDirectory ld = SBX__V1__LIST_DIRECTORY__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_LIST_DIRECTORY};
        Sbx__V1__Response *resp;
        const Sbx__V1__ListDirectoryReply *lr;
        struct sbx_dir_list *out;
        bool ok;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        ld.sandbox_id = unconst(id);
        ld.path = unconst(path);
        ld.has_limit = limit > 0;
        ld.limit = limit;
        req.body_case = SBX__V1__REQUEST__BODY_LIST_DIRECTORY;
        req.list_directory = &ld;
        rc = transport_call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        lr = resp->list_directory;
        out = calloc(1, sizeof(*out));
        ok = out != NULL;
        if (ok && lr->n_entries) {
                out->v = calloc(lr->n_entries, sizeof(*out->v));
                ok = out->v != NULL;
                for (size_t i = 0; ok && i < lr->n_entries; i++) {
                        out->n = i + 1;
                        ok = wire_file_info_from_proto(&out->v[i], lr->entries[i]);
                }
        }
        if (ok)
                out->truncated = lr->truncated;
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_dir_list_free(out);
                return transport_fail_oom(c);
        }
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_stat(sbx_client *c, const char *id, const char *path,
                       struct sbx_file_info **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Stat st = SBX__V1__STAT__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_STAT};
        Sbx__V1__Response *resp;
        struct sbx_file_info *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        st.sandbox_id = unconst(id);
        st.path = unconst(path);
        req.body_case = SBX__V1__REQUEST__BODY_STAT;
        req.stat = &st;
        rc = transport_call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        out = calloc(1, sizeof(*out));
        if (out && !wire_file_info_from_proto(out, resp->stat)) {
                sbx_file_info_free(out);
                out = NULL;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return transport_fail_oom(c);
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_mkdir(sbx_client *c, const char *id, const char *path, uint32_t mode,
                        int parents) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__MakeDirectory md = SBX__V1__MAKE_DIRECTORY__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (mode > 07777)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "directory mode %o has bits beyond 07777", mode);
        md.sandbox_id = unconst(id);
        md.path = unconst(path);
        md.has_mode = 1;
        md.mode = mode ? mode : 0755;
        md.has_parents = !!parents;
        md.parents = !!parents;
        req.body_case = SBX__V1__REQUEST__BODY_MAKE_DIRECTORY;
        req.make_directory = &md;
        return empty_call(c, &req);
}

enum sbx_code sbx_remove(sbx_client *c, const char *id, const char *path, int recursive) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Remove rm = SBX__V1__REMOVE__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        rm.sandbox_id = unconst(id);
        rm.path = unconst(path);
        rm.has_recursive = !!recursive;
        rm.recursive = !!recursive;
        req.body_case = SBX__V1__REQUEST__BODY_REMOVE;
        req.remove = &rm;
        return empty_call(c, &req);
}

/* ---- history ------------------------------------------------------------------------ */

void sbx_connections_free(struct sbx_connections *h) {
        if (!h)
                return;
        for (size_t i = 0; i < h->n; i++) {
                free(h->v[i].host);
                free(h->v[i].address);
                free(h->v[i].reason);
                free(h->v[i].method);
        }
        free(h->v);
        free(h);
}

/* Asks for a page of sandbox id's records of this kind: *resp has the history body. */
static enum sbx_code history_page(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                                  Sbx__V1__HistoryKind kind, Sbx__V1__Response **resp) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__GetHistory gh = SBX__V1__GET_HISTORY__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_HISTORY};

        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        gh.sandbox_id = unconst(id);
        gh.has_after_seq = after_seq > 0;
        gh.after_seq = after_seq;
        gh.has_limit = limit > 0;
        gh.limit = limit;
        gh.has_kind = kind != SBX__V1__HISTORY_KIND__HISTORY_COMMANDS;
        gh.kind = kind;
        req.body_case = SBX__V1__REQUEST__BODY_GET_HISTORY;
        req.get_history = &gh;
        return transport_call(c, &k, resp);
}

/* One page of sandbox id's records of kind into the caller's page: its entries (elem
 * bytes each, made by conv) in *ret_v and *ret_n, its paging fields in *ret_next and
 * *ret_truncated. On SBX_NO_MEMORY the caller frees what the page holds. */
static enum sbx_code records_page(sbx_client *c, const char *id, uint64_t after_seq,
                                  uint32_t limit, Sbx__V1__HistoryKind kind, size_t elem,
                                  bool (*conv)(void *out, const void *in), void **ret_v,
                                  size_t *ret_n, uint64_t *ret_next, int *ret_truncated) {
        Sbx__V1__Response *resp;
        const Sbx__V1__GetHistoryReply *hr;
        void *const *in;
        size_t n;
        bool ok;
        enum sbx_code rc = history_page(c, id, after_seq, limit, kind, &resp);

        if (rc != SBX_OK)
                return rc;
        hr = resp->history;
        switch (kind) {
        case SBX__V1__HISTORY_KIND__HISTORY_CONNECTIONS:
                in = (void *const *)hr->connections;
                n = hr->n_connections;
                break;
        case SBX__V1__HISTORY_KIND__HISTORY_FORWARDS:
                in = (void *const *)hr->forwards;
                n = hr->n_forwards;
                break;
        case SBX__V1__HISTORY_KIND__HISTORY_COMMANDS:
        case _SBX__V1__HISTORY_KIND_IS_INT_SIZE:
        default:
                in = (void *const *)hr->commands;
                n = hr->n_commands;
        }
        ok = wire_page_from_proto(ret_v, ret_n, elem, in, n, conv);
        *ret_next = hr->next_after_seq;
        *ret_truncated = hr->truncated;
        sbx__v1__response__free_unpacked(resp, NULL);
        return ok ? SBX_OK : transport_fail_oom(c);
}

enum sbx_code sbx_connections(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                              struct sbx_connections **ret) {
        struct sbx_connections *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        if (!(out = calloc(1, sizeof(*out))))
                return transport_fail_oom(c);
        rc = records_page(c, id, after_seq, limit, SBX__V1__HISTORY_KIND__HISTORY_CONNECTIONS,
                          sizeof(*out->v), wire_connection_conv, (void **)&out->v, &out->n,
                          &out->next_after_seq, &out->truncated);
        if (rc != SBX_OK)
                sbx_connections_free(out);
        else
                *ret = out;
        return rc;
}

void sbx_forwards_free(struct sbx_forwards *h) {
        if (!h)
                return;
        for (size_t i = 0; i < h->n; i++) {
                free(h->v[i].client_name);
                free(h->v[i].address);
                free(h->v[i].reason);
        }
        free(h->v);
        free(h);
}

enum sbx_code sbx_forwards(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                           struct sbx_forwards **ret) {
        struct sbx_forwards *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        if (!(out = calloc(1, sizeof(*out))))
                return transport_fail_oom(c);
        rc = records_page(c, id, after_seq, limit, SBX__V1__HISTORY_KIND__HISTORY_FORWARDS,
                          sizeof(*out->v), wire_forward_conv, (void **)&out->v, &out->n,
                          &out->next_after_seq, &out->truncated);
        if (rc != SBX_OK)
                sbx_forwards_free(out);
        else
                *ret = out;
        return rc;
}

enum sbx_code sbx_history(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                          struct sbx_history **ret) {
        struct sbx_history *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        if (!(out = calloc(1, sizeof(*out))))
                return transport_fail_oom(c);
        rc = records_page(c, id, after_seq, limit, SBX__V1__HISTORY_KIND__HISTORY_COMMANDS,
                          sizeof(*out->v), wire_record_conv, (void **)&out->v, &out->n,
                          &out->next_after_seq, &out->truncated);
        if (rc != SBX_OK)
                sbx_history_free(out);
        else
                *ret = out;
        return rc;
}

/* ---- background commands (RunCommand.background, AttachCommand) --------------------- */

/* The one answer to a background RunCommand into *ret. */
static enum sbx_code background_answer(sbx_client *c, Sbx__V1__Response *resp,
                                       struct sbx_background **ret) {
        struct sbx_background *b = calloc(1, sizeof(*b));
        const char *cid = NULL;

        if (!b) {
                sbx__v1__response__free_unpacked(resp, NULL);
                return transport_fail_oom(c);
        }
        if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_STARTED && resp->command_started) {
                cid = resp->command_started->command_id;
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED &&
                   resp->command_queued) {
                cid = resp->command_queued->command_id;
                b->queued = 1;
                b->ahead = resp->command_queued->ahead;
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_RESULT &&
                   resp->command_result) {
                cid = resp->command_result->command_id;
                b->result = wire_result_from_proto(resp->command_result);
                if (!b->result) {
                        free(b);
                        sbx__v1__response__free_unpacked(resp, NULL);
                        return transport_fail_oom(c);
                }
        }
        if (!cid || !wire_dup_str_nn(&b->command_id, cid)) {
                sbx_background_free(b);
                sbx__v1__response__free_unpacked(resp, NULL);
                return cid ? transport_fail_oom(c)
                           : transport_protocol_fail(c, EPROTO,
                                                     "a background RunCommand reply without "
                                                     "its command ID");
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        *ret = b;
        return SBX_OK;
}

enum sbx_code sbx_exec_background(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                                  struct sbx_background **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
        struct exchange k = {.req = &req,
                             .want = SBX__V1__RESPONSE__BODY_COMMAND_STARTED,
                             .background_answer = true};
        struct sbx_exec_opts bo;
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (o) {
                /* Nothing of this call reads stdin or streams: the command outlives it. */
                bo = *o;
                bo.stdin_fd = 0;
                bo.on_output = NULL;
                bo.on_started = NULL;
                bo.on_queued = NULL;
        }
        rc = check_exec_opts(c, id, o ? &bo : NULL);
        if (rc == SBX_OK)
                rc = env_to_proto(c, &bo, &run, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = transport_fail_oom(c);
        if (rc != SBX_OK) {
                wire_pool_free(&pool);
                return rc;
        }
        wire_run_to_proto(id, &bo, &run);
        run.has_background = run.background = 1;
        run.has_stream = run.stream = 0;
        if (bo.no_timeout && bo.timeout_ms == 0)
                run.timeout_ms = 0;
        /* It answers once started, or at once when it waits: the wait for a slot is not
         * part of this call. */
        k.extra_ms = EXEC_GRACE_MS;
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &run;
        rc = transport_call(c, &k, &resp);
        wire_pool_free(&pool);
        if (rc != SBX_OK) {
                if (resp)
                        sbx__v1__response__free_unpacked(resp, NULL);
                return rc;
        }
        return background_answer(c, resp, ret);
}

/* How sbx_attach waits: forever, or o->wait_ms with follow, or the call timeout. */
static void attach_exchange(const struct sbx_attach_opts *o, struct exchange *k,
                            struct collected *col) {
        memset(col, 0, sizeof(*col));
        col->limit[1] = col->limit[2] =
                o->max_output_bytes ? o->max_output_bytes : SBX_MAX_OUTPUT_BYTES;
        k->on_output = o->on_output;
        k->output_userdata = o->userdata;
        if (!o->on_output) {
                k->on_output = collect_output;
                k->output_userdata = col;
        }
}

enum sbx_code sbx_attach(sbx_client *c, const char *id, const struct sbx_attach_opts *o,
                         struct sbx_result **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__AttachCommand ac = SBX__V1__ATTACH_COMMAND__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_COMMAND_RESULT};
        struct collected col;
        Sbx__V1__Response *resp;
        uint64_t saved;
        enum sbx_code rc;
        bool running;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!o || !o->command_id || !*o->command_id)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        ac.sandbox_id = unconst(id);
        ac.command_id = unconst(o->command_id);
        ac.has_follow = ac.follow = o->follow != 0;
        ac.has_stdout_offset = o->stdout_offset != 0;
        ac.stdout_offset = o->stdout_offset;
        ac.has_stderr_offset = o->stderr_offset != 0;
        ac.stderr_offset = o->stderr_offset;
        req.body_case = SBX__V1__REQUEST__BODY_ATTACH_COMMAND;
        req.attach_command = &ac;
        attach_exchange(o, &k, &col);
        /* Following waits for the command's end: as long as asked. */
        saved = c->call_timeout_ms;
        if (o->follow)
                c->call_timeout_ms = o->wait_ms;
        rc = transport_call(c, &k, &resp);
        c->call_timeout_ms = saved;
        if (!resp) {
                collected_free(&col);
                /* The wait ran out (the connection is closed; the command goes on): what
                 * it has kept, and RUNNING, when the output is collected. */
                if (o->follow && o->wait_ms && !o->on_output && rc == SBX_UNAVAILABLE &&
                    sbx_errno(c) == ETIMEDOUT) {
                        struct sbx_attach_opts now = *o;
                        now.follow = 0;
                        return sbx_attach(c, id, &now, ret);
                }
                return rc;
        }
        /* The one result that may say RUNNING: an attach without follow. */
        running =
                resp->command_result && resp->command_result->outcome == SBX__V1__OUTCOME__RUNNING;
        rc = exec_result(c, rc, resp, &col, ret);
        if (*ret && running)
                (*ret)->outcome = SBX_OUTCOME_RUNNING;
        return rc;
}

enum sbx_code sbx_send_input(sbx_client *c, const char *id, const char *command_id,
                             const void *data, size_t len, int eof) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id || (len && !data))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "no command ID or no data given");
        in.sandbox_id = unconst(id);
        in.command_id = unconst(command_id);
        in.has_data = len > 0;
        in.data.data = (uint8_t *)(uintptr_t)data;
        in.data.len = len;
        in.has_eof = in.eof = eof != 0;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        return empty_call(c, &req);
}
