/* rpc.c: the request layer of sbxd; see rpc.h.
 *
 * A frame is first walked against the schema (unknown fields and NUL bytes inside
 * strings are refused: protobuf-c would silently drop the first and truncate at the
 * second), then unpacked, then routed through the one dispatch table below. Handlers
 * check access and arguments and call the sandbox layer; asynchronous answers travel
 * back through struct call, which holds a reference to the connection. The handlers of
 * sandboxes and commands are here; those of files are in rpc_files.c, GetHistory in
 * rpc_history.c, the image requests in rpc_images.c and rpc_pull.c, and what they all
 * share (the call, the caller, the common answers, finding a sandbox) in rpc_common.c. */
#include "rpc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "chunk.h"
#include "command.h"
#include "conn.h"
#include "names.h"
#include "rpc_common.h"
#include "rpc_files.h"
#include "rpc_history.h"
#include "rpc_images.h"
#include "rpc_export.h"
#include "rpc_snapshot.h"
#include "rpc_port.h"
#include "rpc_watch.h"
#include "sbx_limits.h"
#include "log.h"
#include "sandbox.h"
#include "sbxd.h"
#include "store.h"
#include "uidrange.h"

/* ---- schema walk --------------------------------------------------------------------- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        int shift = 0;
        while (*p < end && shift < 64) {
                uint8_t b = *(*p)++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
                shift += 7;
        }
        return -EBADMSG;
}

/* Checks that data is a well-formed encoding of desc with no unknown fields and no NUL
 * byte inside any string, to a nesting depth of 16. */
static int wire_validate(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                         int depth, char *err, size_t errlen) {
        const uint8_t *p = data, *end = data + len;

        if (depth > 16) {
                snprintf(err, errlen, "message nested too deeply");
                return -EBADMSG;
        }
        while (p < end) {
                uint64_t tag, n;
                const ProtobufCFieldDescriptor *f;
                unsigned number;

                if (read_varint(&p, end, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > 536870911u) {
                        snprintf(err, errlen, "malformed protobuf in %s", desc->name);
                        return -EBADMSG;
                }
                number = (unsigned)(tag >> 3);
                f = protobuf_c_message_descriptor_get_field(desc, number);
                if (!f) {
                        snprintf(err, errlen, "unknown field %u in %s (client newer than daemon?)",
                                 number, desc->name);
                        return -EBADMSG;
                }
                switch (tag & 7) {
                case 0:
                        if (read_varint(&p, end, &n) < 0)
                                goto bad;
                        break;
                case 1:
                        if (end - p < 8)
                                goto bad;
                        p += 8;
                        break;
                case 5:
                        if (end - p < 4)
                                goto bad;
                        p += 4;
                        break;
                case 2:
                        if (read_varint(&p, end, &n) < 0 || n > (uint64_t)(end - p))
                                goto bad;
                        if (f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)n)) {
                                snprintf(err, errlen, "field %s of %s contains a NUL byte", f->name,
                                         desc->name);
                                return -EINVAL;
                        }
                        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                                int r = wire_validate(f->descriptor, p, (size_t)n, depth + 1, err,
                                                      errlen);
                                if (r < 0)
                                        return r;
                        }
                        p += n;
                        break;
                default:
                        goto bad;
                }
        }
        return 0;
bad:
        snprintf(err, errlen, "malformed protobuf in %s", desc->name);
        return -EBADMSG;
}

/* ---- responses ----------------------------------------------------------------------- */

static void send_sandbox_info(struct conn *c, uint64_t rid, Sbx__V1__SandboxInfo *info) {
        Sbx__V1__Response resp;
        rpc_response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
        resp.sandbox = info;
        conn_send(c, &resp);
}

/* ---- handlers ------------------------------------------------------------------------ */

static void on_hello(struct conn *c, const Sbx__V1__Request *req) {
        static char *implemented[] = {
                "hello",          "create_sandbox", "run_command", "command_input",
                "cancel_command", "read_file",      "write_file",  "list_directory",
                "stat",           "make_directory", "remove",      "terminate",
                "list_sandboxes", "get_sandbox",    "set_timeout", "get_history",
                "attach_command", "pull_image",     "list_images", "remove_image",
                "inspect_image",  "prune_images",   "snapshot_sandbox", "export_image",
                "restore_sandbox", "open_port", "watch_files"};
        struct features *f = &conn_daemon(c)->features;
        Sbx__V1__Response resp;
        Sbx__V1__HelloReply hr = SBX__V1__HELLO_REPLY__INIT;
        Sbx__V1__Features feat = SBX__V1__FEATURES__INIT;
        Sbx__V1__SandboxUids uids = SBX__V1__SANDBOX_UIDS__INIT;
        const struct uidrange *range = conn_daemon(c)->uids;
        char origin[16];
        const char *name = req->hello->client_name;
        struct conn_peer peer;

        if (name && conn_set_client_name(c, name) < 0) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "client_name is longer than %u bytes", SBX_CLIENT_NAME_MAX_BYTES);
                return;
        }
        conn_peer(c, &peer);
        rpc_response_init(&resp, req->request_id);
        hr.has_protocol_version = 1;
        hr.protocol_version = SBX_PROTOCOL_VERSION;
        hr.daemon_version = (char *)SBX_VERSION;
        hr.has_peer_uid = 1;
        hr.peer_uid = peer.uid;
        feat.cgroup_version = conn_daemon(c)->features.cgroup_version;
        feat.has_user_namespaces = feat.has_rootless = feat.has_seccomp = 1;
        feat.user_namespaces = f->user_namespaces;
        feat.rootless = f->rootless;
        feat.seccomp = f->seccomp;
        feat.has_landlock_abi = 1;
        feat.landlock_abi = f->landlock_abi;
        feat.has_openat2 = 1;
        feat.openat2 = f->openat2;
        feat.has_max_frame_bytes = 1;
        feat.max_frame_bytes = conn_daemon(c)->cfg->max_frame_bytes;
        feat.n_implemented = sizeof(implemented) / sizeof(implemented[0]);
        feat.implemented = implemented;
        hr.features = &feat;
        if (range) {
                uids.has_first = uids.has_count = 1;
                uids.first = range->base;
                uids.count = SBX_UID_COUNT;
                uids.reservation = range->path;
                snprintf(origin, sizeof(origin), "%s", uidrange_origin_name(range->origin));
                uids.origin = origin;
                hr.sandbox_uids = &uids;
        }
        resp.body_case = SBX__V1__RESPONSE__BODY_HELLO;
        resp.hello = &hr;
        conn_send(c, &resp);
}

static void create_done(void *ud, struct sandbox *sb, int err, const char *msg) {
        struct call *k = ud;
        if (err < 0) {
                rpc_send_errno(rpc_call_conn(k), k->request_id, err, msg);
        } else {
                struct sandbox_info_store st;
                sandbox_fill_info(sb, &st);
                send_sandbox_info(rpc_call_conn(k), k->request_id, &st.info);
        }
        rpc_call_free(k);
}

static void on_create(struct conn *c, const Sbx__V1__Request *req) {
        struct caller k;
        struct call *call;
        char err[512];
        int r;

        rpc_caller_of(c, &k);
        call = rpc_call_new(c, req->request_id);
        if (!call) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = sbxtab_create(conn_daemon(c), req->create_sandbox, &k, create_done, call, err,
                          sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, err);
                rpc_call_free(call);
        }
}

/* RestoreSandbox: answered as a create is, with the restored sandbox's info. */
static void on_restore(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__RestoreSandbox *q = req->restore_sandbox;
        struct sandbox *sb = rpc_lookup(c, req->request_id, q->sandbox_id);
        struct caller k;
        struct call *call;
        char err[768];
        int r;

        if (!sb)
                return;
        rpc_caller_of(c, &k);
        call = rpc_call_new(c, req->request_id);
        if (!call) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = sbxtab_restore(conn_daemon(c), sb, q->image, &k, create_done, call, err, sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, err);
                rpc_call_free(call);
        }
}

/* A background command's one answer went out: the command lives on without its
 * request (command.h), which ends here. */
static void background_answered(struct call *k) {
        if (k->background) {
                k->cmd = NULL;
                rpc_call_free(k);
        }
}

/* RunCommand: the callbacks turn command events into responses. */
static void cmd_queued(void *ud, char *command_id, unsigned ahead) {
        struct call *k = ud;
        Sbx__V1__Response resp;
        Sbx__V1__CommandQueued cq = SBX__V1__COMMAND_QUEUED__INIT;

        rpc_response_init(&resp, k->request_id);
        cq.command_id = command_id;
        cq.has_ahead = 1;
        cq.ahead = ahead;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_QUEUED;
        resp.command_queued = &cq;
        conn_send(rpc_call_conn(k), &resp);
        background_answered(k);
}

static void cmd_started(void *ud, char *command_id) {
        struct call *k = ud;
        Sbx__V1__Response resp;
        Sbx__V1__CommandStarted cs = SBX__V1__COMMAND_STARTED__INIT;
        if (!k->stream && !k->background)
                return;
        rpc_response_init(&resp, k->request_id);
        cs.command_id = command_id;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_STARTED;
        resp.command_started = &cs;
        conn_send(rpc_call_conn(k), &resp);
        background_answered(k);
}

/* An OutputChunk of a streamed command: copied into its frame, or (taken) sent from
 * data itself, which the connection then owns. */
static void cmd_output(void *ud, char *command_id, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len, int taken) {
        struct call *k = ud;

        chunk_send(rpc_call_conn(k), k->request_id, command_id, stream, offset, data, len, taken);
}

static int cmd_congested(void *ud) {
        struct call *k = ud;
        return !conn_is_closed(rpc_call_conn(k)) && conn_congested(rpc_call_conn(k));
}

/* Sends the kept output of a result that does not fit one frame with it as OutputChunk
 * responses before it (proto: CommandResult.output_in_chunks), and takes it out of the
 * result. */
static void send_output_in_chunks(struct call *k, Sbx__V1__CommandResult *res) {
        size_t piece = chunk_piece_bytes(rpc_call_conn(k));
        struct {
                Sbx__V1__Stream stream;
                ProtobufCBinaryData *data;
                uint64_t total;
        } s[2] = {{SBX__V1__STREAM__STDOUT, &res->stdout, res->stdout_bytes},
                  {SBX__V1__STREAM__STDERR, &res->stderr, res->stderr_bytes}};

        for (int i = 0; i < 2; i++) {
                size_t len = s[i].data->data ? s[i].data->len : 0;
                uint64_t first = s[i].total >= len ? s[i].total - len : 0;
                for (size_t off = 0; off < len; off += piece)
                        cmd_output(k, res->command_id, s[i].stream, first + off,
                                   s[i].data->data + off, len - off < piece ? len - off : piece, 0);
                s[i].data->len = 0;
        }
        res->has_output_in_chunks = 1;
        res->output_in_chunks = 1;
}

static void cmd_done(void *ud, Sbx__V1__CommandResult *result) {
        struct call *k = ud;
        k->cmd = NULL; /* it is finished: nothing of it may be used after this call */
        Sbx__V1__Response resp;
        uint64_t frame = conn_daemon(rpc_call_conn(k))->cfg->max_frame_bytes;

        rpc_response_init(&resp, k->request_id);
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = result;
        /* The command ran: its result must come back whatever its output's size. The
         * exact size is worked out only for a result that may not fit. */
        if (result->stdout.len + result->stderr.len + 2 * CHUNK_HEADROOM_BYTES >= frame &&
            protobuf_c_message_get_packed_size(&resp.base) > frame)
                send_output_in_chunks(k, result);
        if (conn_send(rpc_call_conn(k), &resp) == -EMSGSIZE)
                conn_send_status(rpc_call_conn(k), k->request_id, SBX__V1__CODE__TOO_LARGE,
                                 "command %s: its result does not fit in one frame (%llu bytes) "
                                 "even without its output; raise sbxd --max-frame-bytes",
                                 result->command_id, (unsigned long long)frame);
        rpc_call_free(k);
}

static const struct command_callbacks cmd_callbacks = {
        .queued = cmd_queued,
        .started = cmd_started,
        .output = cmd_output,
        .congested = cmd_congested,
        .done = cmd_done,
};

static void on_run(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__RunCommand *rc = req->run_command;
        struct sandbox *sb = rpc_lookup(c, req->request_id, rc->sandbox_id);
        struct caller k;
        struct call *call;
        char err[512];
        int r;

        if (!sb)
                return;
        rpc_caller_of(c, &k);
        call = rpc_call_new(c, req->request_id);
        if (!call) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        call->background = rc->has_background && rc->background;
        call->stream = rc->has_stream && rc->stream && !call->background;
        r = command_run(sb, rc, &k, &cmd_callbacks, call, &call->cmd, err, sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, err);
                rpc_call_free(call);
        }
}

static void input_done(void *ud, int err) {
        struct call *k = ud;
        if (err < 0)
                conn_send_status(rpc_call_conn(k), k->request_id,
                                 SBX__V1__CODE__FAILED_PRECONDITION,
                                 "the command's stdin closed before it took this input (it "
                                 "ended, or closed its stdin)");
        else
                rpc_send_empty(rpc_call_conn(k), k->request_id);
        rpc_call_free(k);
}

/* The running command id of sb, or NULL after answering NOT_FOUND. */
static struct command *find_command(struct conn *c, uint64_t rid, struct sandbox *sb,
                                    const char *id) {
        struct command *cmd = command_find(sb, id);
        if (!cmd)
                conn_send_status(c, rid, SBX__V1__CODE__NOT_FOUND,
                                 "command '%s' is not running in sandbox '%s'", id ? id : "",
                                 sandbox_id(sb));
        return cmd;
}

/* CommandInput's rows/cols: resizes a tty command's terminal. 0, or -1 after answering
 * (INVALID_ARGUMENT for a bad size, FAILED_PRECONDITION for a command without one). */
static int input_resize(struct conn *c, uint64_t rid, const Sbx__V1__CommandInput *in,
                        struct command *cmd) {
        int r;

        if (!in->has_rows && !in->has_cols)
                return 0;
        r = in->has_rows && in->has_cols ? command_resize(cmd, in->rows, in->cols) : -EINVAL;
        if (r == -EINVAL)
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "rows and cols must be given together, each 1 to %u",
                                 SBX_MAX_TTY_DIM);
        else if (r == -ENOTTY)
                conn_send_status(c, rid, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "command '%s' has no terminal to resize (start it with tty)",
                                 in->command_id);
        else if (r < 0)
                rpc_send_errno(c, rid, r, "cannot resize the command's terminal");
        return r < 0 ? -1 : 0;
}

/* CommandInput over the sender's budget or everyone's (quota.h): which, and what to do. */
static void input_refused(struct conn *c, uint64_t id, const char *command_id, uid_t uid, int r) {
        char why[200];

        quota_explain_buffered(&c->d->buffered, uid, r, why, sizeof(why));
        conn_send_status(c, id, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                         "input for command '%s' not queued: %s; send it again once the "
                         "command has read what it has",
                         command_id, why);
}

static void on_input(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__CommandInput *in = req->command_input;
        struct sandbox *sb = rpc_lookup(c, req->request_id, in->sandbox_id);
        struct command *cmd = sb ? find_command(c, req->request_id, sb, in->command_id) : NULL;
        struct conn_peer peer;
        struct call *call;
        int r;
        if (!cmd || input_resize(c, req->request_id, in, cmd) < 0)
                return;
        /* A resize alone touches no stdin (it may be closed, or never streamed). */
        if ((in->has_rows || in->has_cols) && !(in->has_data && in->data.len > 0) &&
            !(in->has_eof && in->eof)) {
                rpc_send_empty(c, req->request_id);
                return;
        }
        call = rpc_call_new(c, req->request_id);
        if (!call) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        /* Answered once the data is in the command's pipe: a client that waits for the
         * answer (libsbx keeps a few in flight) is paced by what the command reads. */
        conn_peer(c, &peer);
        r = command_input(cmd, peer.uid, in->data.data, in->has_data ? in->data.len : 0,
                          in->has_eof && in->eof, input_done, call);
        if (r > 0)
                return;
        if (r == -EPIPE)
                conn_send_status(c, req->request_id, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "stdin of command '%s' is closed (start it with stdin_stream)",
                                 in->command_id);
        else if (r == -ESHUTDOWN)
                conn_send_status(c, req->request_id, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "command '%s' is waiting for a slot; send its input once it "
                                 "has started (CommandStarted)",
                                 in->command_id);
        else if (r == -EDQUOT || r == -ENOSPC)
                input_refused(c, req->request_id, in->command_id, peer.uid, r);
        else if (r < 0)
                rpc_send_errno(c, req->request_id, r, "cannot queue input for the command");
        else
                rpc_send_empty(c, req->request_id);
        rpc_call_free(call);
}

/* CancelCommand: without a signal (or with SIGKILL) the command is killed and ends as
 * cancelled; with another allowed signal only that signal is forwarded (proto). */
static void on_cancel(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__CancelCommand *cc = req->cancel_command;
        struct command *cmd;
        struct sandbox *sb;

        if (cc->has_signal && !command_signal_allowed(cc->signal)) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "signal %d cannot be sent to a command; send SIGINT (2), "
                                 "SIGTERM (15), SIGHUP (1), SIGQUIT (3), SIGUSR1 (10), SIGUSR2 "
                                 "(12), or SIGKILL (9, or no signal) to kill it",
                                 (int)cc->signal);
                return;
        }
        sb = rpc_lookup(c, req->request_id, cc->sandbox_id);
        cmd = sb ? find_command(c, req->request_id, sb, cc->command_id) : NULL;
        if (!cmd)
                return;
        if (cc->has_signal && cc->signal != SIGKILL)
                (void)command_signal(cmd, cc->signal); /* allowed, and cmd not finished */
        else
                command_cancel(cmd);
        rpc_send_empty(c, req->request_id);
}

/* AttachCommand: any client that may use the sandbox follows any of its commands. */
static void on_attach(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__AttachCommand *ac = req->attach_command;
        struct sandbox *sb = rpc_lookup(c, req->request_id, ac->sandbox_id);

        if (sb)
                attach_command(c, req->request_id, sb, ac);
}

/* Answers with the record of an ended sandbox (or NOT_FOUND). */
static void send_record(struct conn *c, uint64_t rid, const char *id) {
        struct record_info ri;
        struct caller k;
        int r;

        memset(&ri, 0, sizeof(ri));
        rpc_caller_of(c, &k);
        r = store_sandbox_get(conn_daemon(c)->store, id, rpc_record_to_info, &ri);
        if (r == -ENOENT || (r == 0 && !rpc_record_may_access(&ri, &k)))
                rpc_send_not_found(c, rid, id);
        else if (r < 0)
                rpc_send_errno(c, rid, r, "cannot read the sandbox records");
        else
                send_sandbox_info(c, rid, &ri.info);
        rpc_record_info_free(&ri);
}

static void terminate_done(void *ud, struct sandbox *sb) {
        struct call *k = ud;
        send_record(rpc_call_conn(k), k->request_id, sandbox_id(sb));
        rpc_call_free(k);
}

static void on_terminate(struct conn *c, const Sbx__V1__Request *req) {
        const char *id = req->terminate->sandbox_id;
        struct sandbox *sb;
        struct call *call;
        int seen = rpc_find_sandbox(c, req->request_id, id, &sb);

        if (seen == SEEN_ENDED) {
                /* Terminating an ended sandbox is not an error: report its final state. */
                send_record(c, req->request_id, id);
                return;
        }
        if (seen != SEEN_LIVE)
                return;
        call = rpc_call_new(c, req->request_id);
        if (!call) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        sandbox_terminate(sb, "terminated", terminate_done, call);
}

static void on_get(struct conn *c, const Sbx__V1__Request *req) {
        const char *id = req->get_sandbox->sandbox_id;
        struct sandbox *sb;
        int seen = rpc_find_sandbox(c, req->request_id, id, &sb);

        if (seen == SEEN_LIVE) {
                struct sandbox_info_store st;
                struct command_infos ci;
                sandbox_fill_info(sb, &st);
                /* Its commands (SandboxInfo.commands); without memory for them, none. */
                if (command_infos(sb, &ci) == 0) {
                        st.info.n_commands = ci.n;
                        st.info.commands = ci.ptrs;
                }
                send_sandbox_info(c, req->request_id, &st.info);
                command_infos_free(&ci);
        } else if (seen == SEEN_ENDED) {
                send_record(c, req->request_id, id);
        }
}

static void on_set_timeout(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__SetTimeout *st = req->set_timeout;
        struct sandbox_info_store is;
        struct sandbox *sb;
        int r;

        if (!st->has_timeout_ms) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "timeout_ms is required");
                return;
        }
        sb = rpc_lookup(c, req->request_id, st->sandbox_id);
        if (!sb)
                return;
        r = sandbox_set_deadline(sb,
                                 sbxd_now_unix_ms() + (int64_t)(st->timeout_ms > INT32_MAX * 1000ull
                                                                        ? INT32_MAX * 1000ull
                                                                        : st->timeout_ms));
        if (r < 0) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "timeout %llu ms is more than the longest a sandbox may be given "
                                 "at once, %llu ms from now (sbxd --max-sandbox-timeout)",
                                 (unsigned long long)st->timeout_ms,
                                 (unsigned long long)conn_daemon(c)->cfg->max_sandbox_lifetime_ms);
                return;
        }
        sandbox_fill_info(sb, &is);
        send_sandbox_info(c, req->request_id, &is.info);
}

/* ListSandboxes: collects pointers to infos; live ones first, then records. */
struct list_ctx {
        const Sbx__V1__ListSandboxes *q;
        struct caller k;
        Sbx__V1__SandboxInfo **infos;
        struct sandbox_info_store *live;
        struct record_info *recs;
        size_t n, cap, n_live, n_recs;
        uint32_t limit;
        int truncated;
        struct sbxtab *tab;
};

static int labels_match(const Sbx__V1__ListSandboxes *q, Sbx__V1__Label **labels, size_t n) {
        size_t i, j;
        for (i = 0; i < q->n_labels; i++) {
                int found = 0;
                for (j = 0; j < n && !found; j++)
                        found = q->labels[i]->key && labels[j]->key &&
                                strcmp(q->labels[i]->key, labels[j]->key) == 0 &&
                                (!q->labels[i]->value ||
                                 (labels[j]->value &&
                                  strcmp(q->labels[i]->value, labels[j]->value) == 0));
                if (!found)
                        return 0;
        }
        return 1;
}

static int info_matches(struct list_ctx *lc, const Sbx__V1__SandboxInfo *info, int live) {
        const Sbx__V1__ListSandboxes *q = lc->q;
        size_t i;
        if (q->has_owner_uid && info->owner_uid != q->owner_uid)
                return 0;
        if (!labels_match(q, info->labels, info->n_labels))
                return 0;
        if (q->n_states > 0) {
                for (i = 0; i < q->n_states; i++)
                        if (q->states[i] == info->state)
                                return 1;
                return 0;
        }
        return live || (q->has_include_ended && q->include_ended);
}

/* Visibility and the filters first: only a sandbox that would be listed makes the
 * reply truncated (and says nothing of the others). */
static int list_live(struct sandbox *sb, void *ud) {
        struct list_ctx *lc = ud;
        struct sandbox_info_store *st;
        if (sandbox_is_over(sb) || !sandbox_may_access(sb, &lc->k))
                return 0; /* an ended one is listed from its record */
        if (sbxtab_find(lc->tab, sandbox_id(sb)) != sb)
                return 0; /* one a restore replaced, still ending: its id is the new one's */
        st = &lc->live[lc->n_live < lc->limit ? lc->n_live : lc->limit];
        sandbox_fill_info(sb, st);
        if (!info_matches(lc, &st->info, 1))
                return 0;
        if (lc->n >= lc->limit) {
                lc->truncated = 1;
                return 1;
        }
        lc->n_live++;
        lc->infos[lc->n++] = &st->info;
        return 0;
}

static int list_record(const struct store_sandbox *sb, void *ud) {
        struct list_ctx *lc = ud;
        struct record_info *ri;
        struct sandbox *live = sbxtab_find(lc->tab, sb->id);
        if (live && !sandbox_is_over(live))
                return 0; /* listed live */
        ri = &lc->recs[lc->n_recs < lc->limit ? lc->n_recs : lc->limit];
        memset(ri, 0, sizeof(*ri));
        if (rpc_record_to_info(sb, ri) < 0 || !rpc_record_may_access(ri, &lc->k) ||
            !info_matches(lc, &ri->info, 0)) {
                rpc_record_info_free(ri);
                return 0;
        }
        if (lc->n >= lc->limit) {
                rpc_record_info_free(ri);
                lc->truncated = 1;
                return 1;
        }
        lc->n_recs++;
        lc->infos[lc->n++] = &ri->info;
        return 0;
}

static void on_list(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__ListSandboxes *q = req->list_sandboxes;
        struct list_ctx lc;
        Sbx__V1__Response resp;
        Sbx__V1__ListSandboxesReply reply = SBX__V1__LIST_SANDBOXES_REPLY__INIT;
        int want_records = (q->has_include_ended && q->include_ended);
        size_t i;

        memset(&lc, 0, sizeof(lc));
        lc.q = q;
        lc.tab = conn_daemon(c)->sandboxes;
        rpc_caller_of(c, &lc.k);
        lc.limit = q->has_limit && q->limit > 0 && q->limit < 10000 ? q->limit : 1000;
        for (i = 0; i < q->n_states; i++)
                if (q->states[i] >= SBX__V1__SANDBOX_STATE__TERMINATED)
                        want_records = 1;
        /* One more of each than the limit: the one that tells the list is cut. */
        lc.infos = calloc(lc.limit, sizeof(*lc.infos));
        lc.live = calloc(lc.limit + 1, sizeof(*lc.live));
        lc.recs = want_records ? calloc(lc.limit + 1, sizeof(*lc.recs)) : NULL;
        if (!lc.infos || !lc.live || (want_records && !lc.recs)) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        sbxtab_foreach(conn_daemon(c)->sandboxes, list_live, &lc);
        if (want_records && !lc.truncated) {
                int r = store_sandbox_foreach(conn_daemon(c)->store, 0, q->has_owner_uid,
                                              q->owner_uid, 0, list_record, &lc);
                if (r < 0) {
                        rpc_send_errno(c, req->request_id, r, "cannot read the sandbox records");
                        goto out;
                }
        }
        rpc_response_init(&resp, req->request_id);
        reply.n_sandboxes = lc.n;
        reply.sandboxes = lc.infos;
        reply.has_truncated = 1;
        reply.truncated = lc.truncated;
        resp.body_case = SBX__V1__RESPONSE__BODY_LIST_SANDBOXES;
        resp.list_sandboxes = &reply;
        conn_send(c, &resp);
out:
        for (i = 0; i < lc.n_recs; i++)
                rpc_record_info_free(&lc.recs[i]);
        free(lc.recs);
        free(lc.live);
        free(lc.infos);
}

/* ---- dispatch ------------------------------------------------------------------------ */

typedef void (*handler_fn)(struct conn *c, const Sbx__V1__Request *req);

static const struct {
        Sbx__V1__Request__BodyCase body;
        handler_fn fn;
} handlers[] = {
        {SBX__V1__REQUEST__BODY_HELLO, on_hello},
        {SBX__V1__REQUEST__BODY_CREATE_SANDBOX, on_create},
        {SBX__V1__REQUEST__BODY_RUN_COMMAND, on_run},
        {SBX__V1__REQUEST__BODY_COMMAND_INPUT, on_input},
        {SBX__V1__REQUEST__BODY_CANCEL_COMMAND, on_cancel},
        {SBX__V1__REQUEST__BODY_READ_FILE, rpc_files_read_file},
        {SBX__V1__REQUEST__BODY_WRITE_FILE, rpc_files_write_file},
        {SBX__V1__REQUEST__BODY_LIST_DIRECTORY, rpc_files_list_directory},
        {SBX__V1__REQUEST__BODY_STAT, rpc_files_stat},
        {SBX__V1__REQUEST__BODY_MAKE_DIRECTORY, rpc_files_make_directory},
        {SBX__V1__REQUEST__BODY_REMOVE, rpc_files_remove},
        {SBX__V1__REQUEST__BODY_TERMINATE, on_terminate},
        {SBX__V1__REQUEST__BODY_LIST_SANDBOXES, on_list},
        {SBX__V1__REQUEST__BODY_GET_SANDBOX, on_get},
        {SBX__V1__REQUEST__BODY_SET_TIMEOUT, on_set_timeout},
        {SBX__V1__REQUEST__BODY_GET_HISTORY, rpc_history_get},
        {SBX__V1__REQUEST__BODY_ATTACH_COMMAND, on_attach},
        {SBX__V1__REQUEST__BODY_PULL_IMAGE, rpc_images_pull},
        {SBX__V1__REQUEST__BODY_LIST_IMAGES, rpc_images_list},
        {SBX__V1__REQUEST__BODY_REMOVE_IMAGE, rpc_images_remove},
        {SBX__V1__REQUEST__BODY_INSPECT_IMAGE, rpc_images_inspect},
        {SBX__V1__REQUEST__BODY_PRUNE_IMAGES, rpc_images_prune},
        {SBX__V1__REQUEST__BODY_SNAPSHOT_SANDBOX, rpc_snapshot_sandbox},
        {SBX__V1__REQUEST__BODY_EXPORT_IMAGE, rpc_export_image},
        {SBX__V1__REQUEST__BODY_RESTORE_SANDBOX, on_restore},
        {SBX__V1__REQUEST__BODY_OPEN_PORT, rpc_port_open},
        {SBX__V1__REQUEST__BODY_WATCH_FILES, rpc_watch_files},
};

int rpc_dispatch(struct conn *c, const uint8_t *payload, size_t len) {
        Sbx__V1__Request *req;
        char err[256];
        size_t i;
        int r;

        r = wire_validate(&sbx__v1__request__descriptor, payload, len, 0, err, sizeof(err));
        if (r == -EBADMSG) {
                struct conn_peer peer;
                conn_peer(c, &peer);
                log_info("conn=%llu uid=%u: %s; closing", (unsigned long long)conn_id(c),
                         (unsigned)peer.uid, err);
                conn_send_status(c, 0, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "%s; the connection is closed", err);
                return -EBADMSG;
        }
        req = sbx__v1__request__unpack(NULL, len, payload);
        if (!req) {
                conn_send_status(c, 0, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "undecodable request; the connection is closed");
                return -EBADMSG;
        }
        if (!req->has_request_id || req->request_id == 0) {
                conn_send_status(c, 0, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "request_id is required and must not be 0");
                goto out;
        }
        if (r < 0) {
                /* Well-formed but with a bad string: answer this request only. */
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT, "%s", err);
                goto out;
        }
        for (i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
                if (handlers[i].body == req->body_case) {
                        if (log_enabled(LOG_LEVEL_DEBUG))
                                log_debug("conn=%llu req=%llu body=%d",
                                          (unsigned long long)conn_id(c),
                                          (unsigned long long)req->request_id, (int)req->body_case);
                        handlers[i].fn(c, req);
                        goto out;
                }
        conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                         "request has no body (expected one of create_sandbox, run_command, ...)");
out:
        sbx__v1__request__free_unpacked(req, NULL);
        return 0;
}
