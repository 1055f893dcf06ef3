/* rpc.c: the request layer of sbxd; see rpc.h.
 *
 * A frame is first walked against the schema (unknown fields and NUL bytes inside
 * strings are refused: protobuf-c would silently drop the first and truncate at the
 * second), then unpacked, then routed through the one dispatch table below. Handlers
 * check access and arguments and call the sandbox layer; asynchronous answers travel
 * back through struct call, which holds a reference to the connection. */
#include "rpc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "command.h"
#include "conn.h"
#include "files.h"
#include "names.h"
#include "offload.h"
#include "sbx_limits.h"
#include "log.h"
#include "sandbox.h"
#include "sbxd.h"
#include "store.h"
#include "uidrange.h"

/* A request answered later: its connection keeps it open (conn_call_begin) until it is
 * answered. A RunCommand's call holds its command until the result: the command is
 * cancelled when the connection closes, and resumes its streamed output when the
 * connection has room again. */
struct call {
        struct conn_call cc;
        uint64_t request_id;
        int stream;
        int background;          /* answered once (started, queued or a result), then let go */
        struct command *cmd;     /* a RunCommand's, until its result */
        struct offload_job *job; /* a file operation's work off the loop, until done */
};

static struct call *call_of(struct conn_call *cc) {
        return (struct call *)((char *)cc - offsetof(struct call, cc));
}

static struct conn *call_conn(const struct call *k) {
        return k->cc.conn;
}

static void call_closing(struct conn_call *cc) {
        struct call *k = call_of(cc);
        /* Nobody is left to receive a file operation's answer: its work stops. */
        if (k->job)
                offload_cancel(k->job);
        /* Nobody is left to receive the command's result: stop it (it ends as cancelled
         * and is recorded; processes that detached themselves live on). */
        if (k->cmd && !k->background) {
                log_debug("conn=%llu closed: cancelling cmd=%s",
                          (unsigned long long)conn_id(call_conn(k)), command_id(k->cmd));
                command_cancel(k->cmd);
        }
}

static void call_drained(struct conn_call *cc) {
        struct call *k = call_of(cc);
        if (k->cmd && k->stream)
                command_resume_output(k->cmd);
}

static struct call *call_new(struct conn *c, uint64_t request_id) {
        struct call *k = calloc(1, sizeof(*k));
        if (!k)
                return NULL;
        k->request_id = request_id;
        conn_call_begin(c, &k->cc, call_closing, call_drained);
        return k;
}

static void call_free(struct call *k) {
        conn_call_end(&k->cc);
        free(k);
}

static void caller_of(const struct conn *c, struct caller *ret) {
        struct conn_peer p;
        conn_peer(c, &p);
        ret->uid = p.uid;
        ret->gid = p.gid;
        ret->pid = p.pid;
        ret->client_name = conn_client_name(c);
        ret->groups = p.groups;
        ret->n_groups = p.n_groups;
        ret->conn_id = conn_id(c);
}

/* ---- errors -------------------------------------------------------------------------- */

Sbx__V1__Code rpc_code_from_errno(int err) {
        switch (err < 0 ? -err : err) {
        case 0:
                return SBX__V1__CODE__OK;
        case EINVAL:
        case ENAMETOOLONG:
        case EBADMSG:
        case ELOOP:
                return SBX__V1__CODE__INVALID_ARGUMENT;
        case ENOENT:
        case ESRCH:
        case ENOTDIR:
                return SBX__V1__CODE__NOT_FOUND;
        case EEXIST:
                return SBX__V1__CODE__ALREADY_EXISTS;
        case EPERM:
        case EACCES:
                return SBX__V1__CODE__PERMISSION_DENIED;
        case EAGAIN:
        case EBUSY:
        case ENOSPC:
        case EMFILE:
        case ENFILE:
        case ENOMEM:
        case EDQUOT:
                return SBX__V1__CODE__RESOURCE_EXHAUSTED;
        case ESHUTDOWN:
                return SBX__V1__CODE__FAILED_PRECONDITION;
        case EROFS:
                return SBX__V1__CODE__READ_ONLY;
        case EMSGSIZE:
        case EFBIG:
        case E2BIG:
                return SBX__V1__CODE__TOO_LARGE;
        case EPIPE:
        case ECONNRESET:
                return SBX__V1__CODE__UNAVAILABLE;
        case ENODEV: /* the sandbox has ended, or is ending */
                return SBX__V1__CODE__ENDED;
        case ENOSYS:
        case EOPNOTSUPP:
                return SBX__V1__CODE__UNIMPLEMENTED;
        default:
                return SBX__V1__CODE__INTERNAL;
        }
}

const char *rpc_code_name(Sbx__V1__Code code) {
        const ProtobufCEnumValue *v;
        /* The one name outside the schema (sbx.proto says why): as libsbx and sbx say it. */
        if (code == SBX__V1__CODE__ENDED)
                return "SANDBOX_ENDED";
        v = protobuf_c_enum_descriptor_get_value(&sbx__v1__code__descriptor, (int)code);
        return v ? v->name : "UNKNOWN";
}

static void send_errno(struct conn *c, uint64_t rid, int err, const char *msg) {
        conn_send_status(c, rid, rpc_code_from_errno(err), "%s", msg);
}

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

static Sbx__V1__Status ok_status = {PROTOBUF_C_MESSAGE_INIT(&sbx__v1__status__descriptor), 1,
                                    SBX__V1__CODE__OK, NULL};

static void response_init(Sbx__V1__Response *resp, uint64_t rid) {
        sbx__v1__response__init(resp);
        resp->has_request_id = 1;
        resp->request_id = rid;
        resp->status = &ok_status;
}

static void send_sandbox_info(struct conn *c, uint64_t rid, Sbx__V1__SandboxInfo *info) {
        Sbx__V1__Response resp;
        response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_SANDBOX;
        resp.sandbox = info;
        conn_send(c, &resp);
}

static void send_empty(struct conn *c, uint64_t rid) {
        Sbx__V1__Response resp;
        Sbx__V1__Empty e = SBX__V1__EMPTY__INIT;
        response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_EMPTY;
        resp.empty = &e;
        conn_send(c, &resp);
}

/* ---- records of ended sandboxes ------------------------------------------------------ */

/* A SandboxInfo built from a record; free with record_info_free. */
struct record_info {
        Sbx__V1__SandboxInfo info;
        Sbx__V1__CreateSandbox *spec;
        char *id;
        char *end_reason;
};

static int record_to_info(const struct store_sandbox *sb, void *ud) {
        struct record_info *ri = ud;

        sbx__v1__sandbox_info__init(&ri->info);
        ri->id = strdup(sb->id);
        ri->end_reason = sb->end_reason ? strdup(sb->end_reason) : NULL;
        ri->spec = sbx__v1__create_sandbox__unpack(NULL, sb->spec_len, sb->spec);
        if (!ri->id)
                return -ENOMEM;
        ri->info.id = ri->id;
        ri->info.has_state = 1;
        ri->info.state = names_state_parse(sb->state);
        ri->info.has_owner_uid = 1;
        ri->info.owner_uid = sb->owner_uid;
        ri->info.has_created_unix_ms = 1;
        ri->info.created_unix_ms = sb->created_ms;
        ri->info.has_deadline_unix_ms = 1;
        ri->info.deadline_unix_ms = sb->deadline_ms;
        ri->info.has_idle_timeout_ms = sb->idle_timeout_ms != 0;
        ri->info.idle_timeout_ms = sb->idle_timeout_ms;
        ri->info.has_ended_unix_ms = sb->ended_ms != 0;
        ri->info.ended_unix_ms = sb->ended_ms;
        ri->info.end_reason = ri->end_reason;
        if (ri->spec) {
                ri->info.policy = ri->spec->policy;
                ri->info.n_labels = ri->spec->n_labels;
                ri->info.labels = ri->spec->labels;
                ri->info.n_share_uids = ri->spec->n_share_uids;
                ri->info.share_uids = ri->spec->share_uids;
                ri->info.n_share_gids = ri->spec->n_share_gids;
                ri->info.share_gids = ri->spec->share_gids;
        }
        return 0;
}

static void record_info_free(struct record_info *ri) {
        if (ri->spec)
                sbx__v1__create_sandbox__free_unpacked(ri->spec, NULL);
        free(ri->id);
        free(ri->end_reason);
        memset(ri, 0, sizeof(*ri));
}

static int record_may_access(const struct record_info *ri, const struct caller *k) {
        return sandbox_access_allowed(ri->info.owner_uid, ri->spec, k);
}

/* The one answer for a sandbox the caller may not see, whether it exists (another
 * user's, not shared with them) or not: no reply tells one user which ids another has
 * used (SPEC "Trust model"). */
static void send_not_found(struct conn *c, uint64_t rid, const char *id) {
        conn_send_status(c, rid, SBX__V1__CODE__NOT_FOUND,
                         "sandbox '%s' not found among yours and those shared with you; list "
                         "them with `sbx list --all`",
                         id);
}

/* 1 when the ended sandbox id is on record and the caller may see it. */
static int record_visible(struct conn *c, const char *id) {
        struct record_info ri;
        struct caller k;
        int r, ok;

        caller_of(c, &k);
        memset(&ri, 0, sizeof(ri));
        r = store_sandbox_get(conn_daemon(c)->store, id, record_to_info, &ri);
        ok = r == 0 && record_may_access(&ri, &k);
        record_info_free(&ri);
        return ok;
}

/* Where a sandbox stands for a caller: live and theirs to use, ended and on record for
 * them to see, or neither: not found and another user's get the one same answer. */
enum seen {
        SEEN_NONE,
        SEEN_LIVE,
        SEEN_ENDED,
};

/* Finds sandbox id for the caller of c (*ret: the live sandbox), answering the request
 * itself when id is missing (INVALID_ARGUMENT) or SEEN_NONE (NOT_FOUND). Returns the
 * enum seen, or -1 when it answered. */
static int find_sandbox(struct conn *c, uint64_t rid, const char *id, struct sandbox **ret) {
        struct sandbox *sb;
        struct caller k;

        *ret = NULL;
        if (!id || !id[0]) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT, "sandbox_id is required");
                return -1;
        }
        caller_of(c, &k);
        sb = sbxtab_find(conn_daemon(c)->sandboxes, id);
        if (sb && sandbox_is_over(sb))
                sb = NULL; /* ended: its record answers */
        if (sb && sandbox_may_access(sb, &k)) {
                *ret = sb;
                return SEEN_LIVE;
        }
        if (!sb && record_visible(c, id))
                return SEEN_ENDED;
        send_not_found(c, rid, id);
        return -1;
}

/* find_sandbox for a request that needs it live (an ended one is answered ENDED); the
 * use counts as activity (idle timeout). NULL when it answered. */
static struct sandbox *lookup(struct conn *c, uint64_t rid, const char *id) {
        struct sandbox *sb;
        int seen = find_sandbox(c, rid, id, &sb);

        if (seen == SEEN_LIVE) {
                sandbox_touch(sb);
                return sb;
        }
        if (seen == SEEN_ENDED)
                conn_send_status(c, rid, SBX__V1__CODE__ENDED,
                                 "sandbox '%s' has ended; see `sbx info %s` and create a new one",
                                 id, id);
        return NULL;
}

/* ---- handlers ------------------------------------------------------------------------ */

static void on_hello(struct conn *c, const Sbx__V1__Request *req) {
        static char *implemented[] = {"hello",          "create_sandbox", "run_command",
                                      "command_input",  "cancel_command", "read_file",
                                      "write_file",     "list_directory", "stat",
                                      "make_directory", "remove",         "terminate",
                                      "list_sandboxes", "get_sandbox",    "set_timeout",
                                      "get_history",    "attach_command"};
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
        response_init(&resp, req->request_id);
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
                send_errno(call_conn(k), k->request_id, err, msg);
        } else {
                struct sandbox_info_store st;
                sandbox_fill_info(sb, &st);
                send_sandbox_info(call_conn(k), k->request_id, &st.info);
        }
        call_free(k);
}

static void on_create(struct conn *c, const Sbx__V1__Request *req) {
        struct caller k;
        struct call *call;
        char err[512];
        int r;

        caller_of(c, &k);
        call = call_new(c, req->request_id);
        if (!call) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = sbxtab_create(conn_daemon(c), req->create_sandbox, &k, create_done, call, err,
                          sizeof(err));
        if (r < 0) {
                send_errno(c, req->request_id, r, err);
                call_free(call);
        }
}

/* A background command's one answer went out: the command lives on without its
 * request (command.h), which ends here. */
static void background_answered(struct call *k) {
        if (k->background) {
                k->cmd = NULL;
                call_free(k);
        }
}

/* RunCommand: the callbacks turn command events into responses. */
static void cmd_queued(void *ud, char *command_id, unsigned ahead) {
        struct call *k = ud;
        Sbx__V1__Response resp;
        Sbx__V1__CommandQueued cq = SBX__V1__COMMAND_QUEUED__INIT;

        response_init(&resp, k->request_id);
        cq.command_id = command_id;
        cq.has_ahead = 1;
        cq.ahead = ahead;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_QUEUED;
        resp.command_queued = &cq;
        conn_send(call_conn(k), &resp);
        background_answered(k);
}

static void cmd_started(void *ud, char *command_id) {
        struct call *k = ud;
        Sbx__V1__Response resp;
        Sbx__V1__CommandStarted cs = SBX__V1__COMMAND_STARTED__INIT;
        if (!k->stream && !k->background)
                return;
        response_init(&resp, k->request_id);
        cs.command_id = command_id;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_STARTED;
        resp.command_started = &cs;
        conn_send(call_conn(k), &resp);
        background_answered(k);
}

/* An OutputChunk of a streamed command: copied into its frame, or (taken) sent from
 * data itself, which the connection then owns. */
static void cmd_output(void *ud, char *command_id, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len, int taken) {
        struct call *k = ud;
        Sbx__V1__Response resp;
        Sbx__V1__OutputChunk oc = SBX__V1__OUTPUT_CHUNK__INIT;
        response_init(&resp, k->request_id);
        oc.command_id = command_id;
        oc.has_stream = 1;
        oc.stream = stream;
        oc.has_offset = 1;
        oc.offset = offset;
        oc.has_data = 1;
        oc.data.data = data;
        oc.data.len = len;
        resp.body_case = SBX__V1__RESPONSE__BODY_OUTPUT;
        resp.output = &oc;
        if (taken)
                conn_send_taking(call_conn(k), &resp, data, len);
        else
                conn_send(call_conn(k), &resp);
}

static int cmd_congested(void *ud) {
        struct call *k = ud;
        return !conn_is_closed(call_conn(k)) && conn_congested(call_conn(k));
}

/* Room an OutputChunk response takes in a frame besides its data (ids, offset, tags). */
#define CHUNK_HEADROOM_BYTES 1024u

/* Sends the kept output of a result that does not fit one frame with it as OutputChunk
 * responses before it (proto: CommandResult.output_in_chunks), and takes it out of the
 * result. */
static void send_output_in_chunks(struct call *k, Sbx__V1__CommandResult *res) {
        uint64_t frame = conn_daemon(call_conn(k))->cfg->max_frame_bytes;
        size_t piece = frame > (uint64_t)SBX_RESULT_PIECE_BYTES + CHUNK_HEADROOM_BYTES
                               ? SBX_RESULT_PIECE_BYTES
                               : (size_t)(frame - CHUNK_HEADROOM_BYTES);
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
        uint64_t frame = conn_daemon(call_conn(k))->cfg->max_frame_bytes;

        response_init(&resp, k->request_id);
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = result;
        /* The command ran: its result must come back whatever its output's size. The
         * exact size is worked out only for a result that may not fit. */
        if (result->stdout.len + result->stderr.len + 2 * CHUNK_HEADROOM_BYTES >= frame &&
            protobuf_c_message_get_packed_size(&resp.base) > frame)
                send_output_in_chunks(k, result);
        if (conn_send(call_conn(k), &resp) == -EMSGSIZE)
                conn_send_status(call_conn(k), k->request_id, SBX__V1__CODE__TOO_LARGE,
                                 "command %s: its result does not fit in one frame (%llu bytes) "
                                 "even without its output; raise sbxd --max-frame-bytes",
                                 result->command_id, (unsigned long long)frame);
        call_free(k);
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
        struct sandbox *sb = lookup(c, req->request_id, rc->sandbox_id);
        struct caller k;
        struct call *call;
        char err[512];
        int r;

        if (!sb)
                return;
        caller_of(c, &k);
        call = call_new(c, req->request_id);
        if (!call) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        call->background = rc->has_background && rc->background;
        call->stream = rc->has_stream && rc->stream && !call->background;
        r = command_run(sb, rc, &k, &cmd_callbacks, call, &call->cmd, err, sizeof(err));
        if (r < 0) {
                send_errno(c, req->request_id, r, err);
                call_free(call);
        }
}

static void input_done(void *ud, int err) {
        struct call *k = ud;
        if (err < 0)
                conn_send_status(call_conn(k), k->request_id, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "the command's stdin closed before it took this input (it "
                                 "ended, or closed its stdin)");
        else
                send_empty(call_conn(k), k->request_id);
        call_free(k);
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
                send_errno(c, rid, r, "cannot resize the command's terminal");
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
        struct sandbox *sb = lookup(c, req->request_id, in->sandbox_id);
        struct command *cmd = sb ? find_command(c, req->request_id, sb, in->command_id) : NULL;
        struct conn_peer peer;
        struct call *call;
        int r;
        if (!cmd || input_resize(c, req->request_id, in, cmd) < 0)
                return;
        /* A resize alone touches no stdin (it may be closed, or never streamed). */
        if ((in->has_rows || in->has_cols) && !(in->has_data && in->data.len > 0) &&
            !(in->has_eof && in->eof)) {
                send_empty(c, req->request_id);
                return;
        }
        call = call_new(c, req->request_id);
        if (!call) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
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
                send_errno(c, req->request_id, r, "cannot queue input for the command");
        else
                send_empty(c, req->request_id);
        call_free(call);
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
        sb = lookup(c, req->request_id, cc->sandbox_id);
        cmd = sb ? find_command(c, req->request_id, sb, cc->command_id) : NULL;
        if (!cmd)
                return;
        if (cc->has_signal && cc->signal != SIGKILL)
                (void)command_signal(cmd, cc->signal); /* allowed, and cmd not finished */
        else
                command_cancel(cmd);
        send_empty(c, req->request_id);
}

/* AttachCommand: any client that may use the sandbox follows any of its commands. */
static void on_attach(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__AttachCommand *ac = req->attach_command;
        struct sandbox *sb = lookup(c, req->request_id, ac->sandbox_id);

        if (sb)
                attach_command(c, req->request_id, sb, ac);
}

/* Answers with the record of an ended sandbox (or NOT_FOUND). */
static void send_record(struct conn *c, uint64_t rid, const char *id) {
        struct record_info ri;
        struct caller k;
        int r;

        memset(&ri, 0, sizeof(ri));
        caller_of(c, &k);
        r = store_sandbox_get(conn_daemon(c)->store, id, record_to_info, &ri);
        if (r == -ENOENT || (r == 0 && !record_may_access(&ri, &k)))
                send_not_found(c, rid, id);
        else if (r < 0)
                send_errno(c, rid, r, "cannot read the sandbox records");
        else
                send_sandbox_info(c, rid, &ri.info);
        record_info_free(&ri);
}

static void terminate_done(void *ud, struct sandbox *sb) {
        struct call *k = ud;
        send_record(call_conn(k), k->request_id, sandbox_id(sb));
        call_free(k);
}

static void on_terminate(struct conn *c, const Sbx__V1__Request *req) {
        const char *id = req->terminate->sandbox_id;
        struct sandbox *sb;
        struct call *call;
        int seen = find_sandbox(c, req->request_id, id, &sb);

        if (seen == SEEN_ENDED) {
                /* Terminating an ended sandbox is not an error: report its final state. */
                send_record(c, req->request_id, id);
                return;
        }
        if (seen != SEEN_LIVE)
                return;
        call = call_new(c, req->request_id);
        if (!call) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        sandbox_terminate(sb, "terminated", terminate_done, call);
}

static void on_get(struct conn *c, const Sbx__V1__Request *req) {
        const char *id = req->get_sandbox->sandbox_id;
        struct sandbox *sb;
        int seen = find_sandbox(c, req->request_id, id, &sb);

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
        sb = lookup(c, req->request_id, st->sandbox_id);
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
        if (record_to_info(sb, ri) < 0 || !record_may_access(ri, &lc->k) ||
            !info_matches(lc, &ri->info, 0)) {
                record_info_free(ri);
                return 0;
        }
        if (lc->n >= lc->limit) {
                record_info_free(ri);
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
        caller_of(c, &lc.k);
        lc.limit = q->has_limit && q->limit > 0 && q->limit < 10000 ? q->limit : 1000;
        for (i = 0; i < q->n_states; i++)
                if (q->states[i] >= SBX__V1__SANDBOX_STATE__TERMINATED)
                        want_records = 1;
        /* One more of each than the limit: the one that tells the list is cut. */
        lc.infos = calloc(lc.limit, sizeof(*lc.infos));
        lc.live = calloc(lc.limit + 1, sizeof(*lc.live));
        lc.recs = want_records ? calloc(lc.limit + 1, sizeof(*lc.recs)) : NULL;
        if (!lc.infos || !lc.live || (want_records && !lc.recs)) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        sbxtab_foreach(conn_daemon(c)->sandboxes, list_live, &lc);
        if (want_records && !lc.truncated) {
                int r = store_sandbox_foreach(conn_daemon(c)->store, 0, q->has_owner_uid,
                                              q->owner_uid, 0, list_record, &lc);
                if (r < 0) {
                        send_errno(c, req->request_id, r, "cannot read the sandbox records");
                        goto out;
                }
        }
        response_init(&resp, req->request_id);
        reply.n_sandboxes = lc.n;
        reply.sandboxes = lc.infos;
        reply.has_truncated = 1;
        reply.truncated = lc.truncated;
        resp.body_case = SBX__V1__RESPONSE__BODY_LIST_SANDBOXES;
        resp.list_sandboxes = &reply;
        conn_send(c, &resp);
out:
        for (i = 0; i < lc.n_recs; i++)
                record_info_free(&lc.recs[i]);
        free(lc.recs);
        free(lc.live);
        free(lc.infos);
}

/* GetHistory */
struct history_ctx {
        Sbx__V1__CommandRecord *recs;
        Sbx__V1__CommandRecord **ptrs;
        Sbx__V1__ConnectionRecord *crecs; /* HISTORY_CONNECTIONS */
        Sbx__V1__ConnectionRecord **cptrs;
        char **strings; /* everything allocated, freed at the end */
        size_t n, n_strings, cap_strings;
        uint64_t last_seq;
};

/* Keeps p to be freed with the reply; returns p, or NULL (and frees p) when out of memory. */
static void *hist_track(struct history_ctx *h, void *p) {
        if (!p)
                return NULL;
        if (h->n_strings == h->cap_strings) {
                size_t nc = h->cap_strings ? h->cap_strings * 2 : 64;
                char **ns = realloc(h->strings, nc * sizeof(*ns));
                if (!ns) {
                        free(p);
                        return NULL;
                }
                h->strings = ns;
                h->cap_strings = nc;
        }
        h->strings[h->n_strings++] = p;
        return p;
}

static char *hist_strdup(struct history_ctx *h, const char *s) {
        return s ? hist_track(h, strdup(s)) : NULL;
}

static int history_row(const struct store_command *sc, void *ud) {
        struct history_ctx *h = ud;
        Sbx__V1__CommandRecord *r = &h->recs[h->n];
        size_t i;

        sbx__v1__command_record__init(r);
        r->has_seq = 1;
        r->seq = sc->seq;
        r->command_id = hist_strdup(h, sc->command_id);
        r->argv = hist_track(h, calloc(sc->argc ? sc->argc : 1, sizeof(char *)));
        if (!r->argv)
                return -ENOMEM;
        for (i = 0; i < sc->argc; i++)
                r->argv[i] = hist_strdup(h, sc->argv[i]);
        r->n_argv = sc->argc;
        r->cwd = hist_strdup(h, sc->cwd);
        r->has_caller_uid = r->has_caller_pid = 1;
        r->caller_uid = sc->caller_uid;
        r->caller_pid = sc->caller_pid;
        r->client_name = hist_strdup(h, sc->client_name);
        r->has_started_unix_ms = 1;
        r->started_unix_ms = sc->started_ms;
        r->has_ended_unix_ms = sc->ended_ms != 0;
        r->ended_unix_ms = sc->ended_ms;
        if (sc->outcome) {
                r->has_outcome = 1;
                r->outcome = names_outcome_parse(sc->outcome);
        } else if (sc->ended_ms == 0) {
                /* Not ended: a daemon that restarts marks what it lost as unknown. */
                r->has_outcome = 1;
                r->outcome = SBX__V1__OUTCOME__RUNNING;
        }
        r->has_exit_code = sc->has_exit_code;
        r->exit_code = sc->exit_code;
        r->has_signal = sc->has_signal;
        r->signal = sc->signal;
        r->has_duration = 1;
        r->duration = sc->duration;
        r->has_peak_memory_bytes = 1;
        r->peak_memory_bytes = sc->peak_memory_bytes;
        r->has_stdout_bytes = r->has_stderr_bytes = 1;
        r->stdout_bytes = sc->stdout_bytes;
        r->stderr_bytes = sc->stderr_bytes;
        r->has_stdout_truncated = r->has_stderr_truncated = 1;
        r->stdout_truncated = sc->stdout_truncated;
        r->stderr_truncated = sc->stderr_truncated;
        r->has_queued_ms = 1;
        r->queued_ms = sc->queued_ms;
        r->has_background = 1;
        r->background = sc->background;
        r->has_tty = 1;
        r->tty = sc->tty;
        h->ptrs[h->n++] = r;
        h->last_seq = sc->seq;
        return 0;
}

/* One ConnectionRecord of the reply from a stored connection. */
static int connection_row(const struct store_connection *sc, void *ud) {
        struct history_ctx *h = ud;
        Sbx__V1__ConnectionRecord *r = &h->crecs[h->n];

        sbx__v1__connection_record__init(r);
        r->has_seq = 1;
        r->seq = sc->seq;
        r->has_started_unix_ms = 1;
        r->started_unix_ms = sc->started_ms;
        r->has_ended_unix_ms = sc->ended_ms != 0;
        r->ended_unix_ms = sc->ended_ms;
        r->host = hist_strdup(h, sc->host);
        r->has_port = sc->port != 0;
        r->port = sc->port;
        r->address = hist_strdup(h, sc->address);
        r->has_allowed = 1;
        r->allowed = sc->allowed;
        r->reason = hist_strdup(h, sc->reason);
        r->method = hist_strdup(h, sc->method);
        r->has_bytes_sent = r->has_bytes_received = 1;
        r->bytes_sent = sc->bytes_sent;
        r->bytes_received = sc->bytes_received;
        h->cptrs[h->n++] = r;
        return 0;
}

/* GetHistory with kind HISTORY_CONNECTIONS: the proxy's records, paged as commands. */
static void history_connections(struct conn *c, const Sbx__V1__Request *req, uint32_t limit,
                                struct history_ctx *h) {
        const Sbx__V1__GetHistory *q = req->get_history;
        Sbx__V1__Response resp;
        Sbx__V1__GetHistoryReply reply = SBX__V1__GET_HISTORY_REPLY__INIT;
        int r;

        h->crecs = calloc(limit + 1, sizeof(*h->crecs));
        h->cptrs = calloc(limit + 1, sizeof(*h->cptrs));
        if (!h->crecs || !h->cptrs) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = store_connections(conn_daemon(c)->store, q->sandbox_id,
                              q->has_after_seq ? q->after_seq : 0, limit + 1, connection_row, h);
        if (r < 0) {
                send_errno(c, req->request_id, r, "cannot read the connection records");
                return;
        }
        response_init(&resp, req->request_id);
        reply.has_truncated = 1;
        reply.truncated = h->n > limit;
        reply.n_connections = h->n > limit ? limit : h->n;
        reply.connections = h->cptrs;
        reply.has_next_after_seq = 1;
        reply.next_after_seq = reply.n_connections ? h->cptrs[reply.n_connections - 1]->seq
                                                   : (q->has_after_seq ? q->after_seq : 0);
        resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
        resp.history = &reply;
        conn_send(c, &resp);
}

static void on_history(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__GetHistory *q = req->get_history;
        struct history_ctx h;
        struct sandbox *live;
        int seen;
        Sbx__V1__Response resp;
        Sbx__V1__GetHistoryReply reply = SBX__V1__GET_HISTORY_REPLY__INIT;
        uint32_t limit = q->has_limit && q->limit > 0 ? q->limit : SBX_DEFAULT_HISTORY_LIMIT;
        size_t i;
        int r;

        if (limit > SBX_MAX_HISTORY_LIMIT)
                limit = SBX_MAX_HISTORY_LIMIT;
        seen = find_sandbox(c, req->request_id, q->sandbox_id, &live);
        if (seen < 0)
                return;
        /* Its commands started a moment ago are not in the records yet. */
        if (live)
                command_record_running(live);
        memset(&h, 0, sizeof(h));
        if (q->has_kind && q->kind == SBX__V1__HISTORY_KIND__HISTORY_CONNECTIONS) {
                history_connections(c, req, limit, &h);
                goto out;
        }
        if (q->has_kind && q->kind != SBX__V1__HISTORY_KIND__HISTORY_COMMANDS) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "unknown history kind %d", (int)q->kind);
                goto out;
        }
        /* One more than asked, to know whether the page is the last. */
        h.recs = calloc(limit + 1, sizeof(*h.recs));
        h.ptrs = calloc(limit + 1, sizeof(*h.ptrs));
        if (!h.recs || !h.ptrs) {
                send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        r = store_history(conn_daemon(c)->store, q->sandbox_id, q->has_after_seq ? q->after_seq : 0,
                          limit + 1, history_row, &h);
        if (r < 0) {
                send_errno(c, req->request_id, r, "cannot read the command records");
                goto out;
        }
        response_init(&resp, req->request_id);
        reply.has_truncated = 1;
        reply.truncated = h.n > limit;
        reply.n_commands = h.n > limit ? limit : h.n;
        reply.commands = h.ptrs;
        reply.has_next_after_seq = 1;
        reply.next_after_seq = reply.n_commands ? h.ptrs[reply.n_commands - 1]->seq
                                                : (q->has_after_seq ? q->after_seq : 0);
        resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
        resp.history = &reply;
        conn_send(c, &resp);
out:
        for (i = 0; i < h.n_strings; i++)
                free(h.strings[i]);
        free(h.strings);
        free(h.recs);
        free(h.ptrs);
        free(h.crecs);
        free(h.cptrs);
}

/* ---- files ------------------------------------------------------------------------- */

/* Room a file reply leaves in a frame for everything but its data or entries. */
#define FILE_REPLY_HEADROOM_BYTES 1024u
/* Messages of the files module name a path of up to 1 KiB, twice. */
#define FILE_ERR_BYTES 4096u

static uint64_t file_reply_budget(const struct conn *c) {
        uint64_t frame = conn_daemon(c)->cfg->max_frame_bytes;
        return frame > FILE_REPLY_HEADROOM_BYTES ? frame - FILE_REPLY_HEADROOM_BYTES : 0;
}

/* The wire code of a file operation's -errno ("directory not empty" is a precondition,
 * as rmdir is in gRPC's own definition of FAILED_PRECONDITION). */
static Sbx__V1__Code file_code(int err) {
        if (err == -ENOTEMPTY)
                return SBX__V1__CODE__FAILED_PRECONDITION;
        return rpc_code_from_errno(err);
}

/* Records one file operation in the store. */
static void file_record(struct conn *c, const char *sandbox_id, const char *op, const char *path,
                        uint64_t bytes, Sbx__V1__Code code) {
        struct store_fileop rec;
        struct caller k;
        int r;

        caller_of(c, &k);
        memset(&rec, 0, sizeof(rec));
        rec.sandbox_id = sandbox_id;
        rec.op = op;
        rec.path = path ? path : "";
        rec.bytes = bytes;
        rec.result = rpc_code_name(code);
        rec.caller_uid = (uint32_t)k.uid;
        rec.caller_pid = (int32_t)k.pid;
        rec.client_name = k.client_name;
        rec.time_ms = sbxd_now_unix_ms();
        r = store_fileop_insert(conn_daemon(c)->store, &rec);
        if (r < 0)
                log_warning("sbx=%s conn=%llu: cannot record the file operation %s: %s", sandbox_id,
                            (unsigned long long)conn_id(c), op,
                            r == -EIO ? store_last_error(conn_daemon(c)->store) : strerror(-r));
}

/* lookup() for a file request; a refusal of a sandbox that exists (or existed) is recorded
 * too (for its owner and the operator to see; the caller was told "not found"). NULL when
 * it answered. */
static struct sandbox *file_lookup(struct conn *c, uint64_t rid, const char *id, const char *op,
                                   const char *path) {
        struct sandbox *sb = lookup(c, rid, id);

        if (!sb && id && id[0]) {
                struct sandbox *other = sbxtab_find(conn_daemon(c)->sandboxes, id);
                if (other && !sandbox_is_over(other))
                        file_record(c, id, op, path, 0, SBX__V1__CODE__PERMISSION_DENIED);
                else if (store_sandbox_exists(conn_daemon(c)->store, id) > 0)
                        file_record(c, id, op, path, 0, SBX__V1__CODE__ENDED);
        }
        return sb;
}

/* Answers a failed file operation and records it. */
static void file_fail(struct conn *c, uint64_t rid, struct sandbox *sb, const char *op,
                      const char *path, int err, const char *msg) {
        Sbx__V1__Code code = file_code(err);
        conn_send_status(c, rid, code, "%s", msg[0] ? msg : strerror(-err));
        file_record(c, sandbox_id(sb), op, path, 0, code);
}

static void on_read_file(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__ReadFile *q = req->read_file;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "read", q->path);
        struct files_read_result res;
        Sbx__V1__Response resp;
        Sbx__V1__ReadFileReply reply = SBX__V1__READ_FILE_REPLY__INIT;
        Sbx__V1__Code code = SBX__V1__CODE__OK;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_read(sb, q->path, q->has_offset ? q->offset : 0, q->has_limit ? q->limit : 0,
                       SBX_DEFAULT_MAX_READ_BYTES, file_reply_budget(c), &res, err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "read", q->path, r, err);
                return;
        }
        response_init(&resp, req->request_id);
        reply.has_data = 1;
        reply.data.data = res.data;
        reply.data.len = res.len;
        reply.has_size = reply.has_next_offset = reply.has_eof = 1;
        reply.size = res.size;
        reply.next_offset = res.next_offset;
        reply.eof = res.eof;
        resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
        resp.read_file = &reply;
        /* The data goes out from the buffer it was read into (conn takes it). */
        res.data = NULL;
        if (conn_send_taking(c, &resp, reply.data.data, reply.data.len) == -EMSGSIZE) {
                code = SBX__V1__CODE__TOO_LARGE;
                conn_send_status(c, req->request_id, code,
                                 "'%s' in sandbox '%s': the data does not fit in one frame; read "
                                 "less at a time (limit)",
                                 q->path, q->sandbox_id);
        }
        file_record(c, q->sandbox_id, "read", q->path, code == SBX__V1__CODE__OK ? res.len : 0,
                    code);
        files_read_result_clear(&res);
}

static void on_write_file(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__WriteFile *q = req->write_file;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "write", q->path);
        Sbx__V1__Response resp;
        Sbx__V1__WriteFileReply reply = SBX__V1__WRITE_FILE_REPLY__INIT;
        unsigned flags = 0;
        uint64_t size = 0;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        if (q->has_create_parents && q->create_parents)
                flags |= FILES_WRITE_CREATE_PARENTS;
        if (q->has_append && q->append)
                flags |= FILES_WRITE_APPEND;
        r = files_write(sb, q->path, q->has_data ? q->data.data : NULL,
                        q->has_data ? q->data.len : 0, q->has_mode ? q->mode : 0644, flags, &size,
                        err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "write", q->path, r, err);
                return;
        }
        response_init(&resp, req->request_id);
        reply.has_bytes_written = reply.has_size = 1;
        reply.bytes_written = q->has_data ? q->data.len : 0;
        reply.size = size;
        resp.body_case = SBX__V1__RESPONSE__BODY_WRITE_FILE;
        resp.write_file = &reply;
        conn_send(c, &resp);
        file_record(c, q->sandbox_id, "write", q->path, reply.bytes_written, SBX__V1__CODE__OK);
}

/* A file operation whose slow part runs off the loop (offload.h): a listing, or a
 * recursive remove. It holds its call (its connection stays until it answers: a closed
 * one drops the answer) and finds its sandbox again, by id, when the work is done. */
struct file_work {
        struct offload_job job;
        struct call *call;
        struct sbxd *d;
        const struct sandbox *sb; /* compared with the sandbox found again, never used */
        int64_t sb_created_ms;
        const char *op; /* "list" or "remove" (static) */
        char *sandbox_id, *path;
        struct files_list_job *list;     /* a listing's */
        struct files_remove_job *remove; /* a remove's */
};

static struct file_work *file_work_of(struct offload_job *job) {
        return (struct file_work *)((char *)job - offsetof(struct file_work, job));
}

static void file_work_free(struct file_work *w) {
        files_list_job_free(w->list);
        files_remove_job_free(w->remove);
        if (w->call)
                call_free(w->call);
        free(w->sandbox_id);
        free(w->path);
        free(w);
}

/* The work's reason to run: its sandbox is still the one it began in, and ready. While
 * it is, the work counts as activity there (the idle timeout), as a running command does. */
static int file_work_wanted(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct sandbox *sb = sbxtab_find(w->d->sandboxes, w->sandbox_id);

        if (!sb || sb != w->sb || sandbox_created_ms(sb) != w->sb_created_ms ||
            sandbox_state(sb) != SBX__V1__SANDBOX_STATE__READY || sandbox_is_over(sb))
                return 0;
        sandbox_touch(sb);
        return 1;
}

/* For files_*_run: stop once the job is cancelled. */
static int file_work_stop(void *ud) {
        return offload_cancelled(ud);
}

/* Hands the work w of request rid (its files job set) to the thread pool, or answers why
 * not and frees w. */
static void file_work_submit(struct conn *c, uint64_t rid, struct sandbox *sb, struct file_work *w,
                             offload_work_cb work, offload_done_cb done) {
        struct conn_peer p;
        unsigned run = 0, wait = 0;
        int r = -ENOMEM;

        conn_peer(c, &p);
        w->call = call_new(c, rid);
        if (w->call) {
                w->call->job = &w->job;
                r = offload_submit(w->d, &w->job, p.uid, work, done, file_work_wanted);
        }
        if (r == 0)
                return;
        if (r == -EAGAIN) {
                offload_counts(w->d, p.uid, NULL, NULL, &run, &wait);
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "uid %u has %u file operations running and %u waiting, the most "
                                 "one user may queue (%u); retry when one has finished",
                                 (unsigned)p.uid, run, wait, SBX_OFFLOAD_MAX_QUEUED_PER_UID);
                file_record(c, sandbox_id(sb), w->op, w->path, 0,
                            SBX__V1__CODE__RESOURCE_EXHAUSTED);
        } else {
                file_fail(c, rid, sb, w->op, w->path, r, "");
        }
        file_work_free(w);
}

/* A new work for request rid on path of sb, or NULL (answered) when out of memory. */
static struct file_work *file_work_new(struct conn *c, uint64_t rid, struct sandbox *sb,
                                       const char *op, const char *path) {
        struct file_work *w = calloc(1, sizeof(*w));

        if (w) {
                w->d = conn_daemon(c);
                w->sb = sb;
                w->sb_created_ms = sandbox_created_ms(sb);
                w->op = op;
                w->sandbox_id = strdup(sandbox_id(sb));
                w->path = strdup(path ? path : "");
        }
        if (!w || !w->sandbox_id || !w->path) {
                if (w)
                        file_work_free(w);
                file_fail(c, rid, sb, op, path, -ENOMEM, "");
                return NULL;
        }
        return w;
}

/* When w is done: its sandbox, still the one it began in, or NULL after answering (and
 * recording) that it ended meanwhile. */
static struct sandbox *file_work_sandbox(struct file_work *w) {
        struct conn *c = call_conn(w->call);
        uint64_t rid = w->call->request_id;
        struct sandbox *sb = file_lookup(c, rid, w->sandbox_id, w->op, w->path);

        /* Another may have taken its id. */
        if (sb && (sb != w->sb || sandbox_created_ms(sb) != w->sb_created_ms)) {
                conn_send_status(c, rid, SBX__V1__CODE__ENDED,
                                 "sandbox '%s' ended during the %s of '%s'", w->sandbox_id, w->op,
                                 w->path);
                file_record(c, w->sandbox_id, w->op, w->path, 0, SBX__V1__CODE__ENDED);
                sb = NULL;
        }
        return sb;
}

/* Answers and records w's failure r (message err). Work stopped because its client went
 * away (-ECANCELED on a closed connection) is recorded as UNAVAILABLE. */
static void file_work_fail(struct file_work *w, struct sandbox *sb, int r, const char *err) {
        struct conn *c = call_conn(w->call);

        if (r == -ECANCELED && conn_is_closed(c)) {
                log_info("sbx=%s conn=%llu: the %s of '%s' stopped: its client went away",
                         w->sandbox_id, (unsigned long long)conn_id(c), w->op, w->path);
                file_record(c, w->sandbox_id, w->op, w->path, 0, SBX__V1__CODE__UNAVAILABLE);
                return;
        }
        file_fail(c, w->call->request_id, sb, w->op, w->path, r, err);
}

static void list_work(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        files_list_run(w->list, file_work_stop, job);
}

static void list_done(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct conn *c = call_conn(w->call);
        uint64_t rid = w->call->request_id;
        Sbx__V1__ListDirectoryReply reply = SBX__V1__LIST_DIRECTORY_REPLY__INIT;
        Sbx__V1__Code code = SBX__V1__CODE__OK;
        char err[FILE_ERR_BYTES];
        Sbx__V1__Response resp;
        struct files_list l;
        struct sandbox *sb = file_work_sandbox(w);
        int r;

        if (!sb) {
                file_work_free(w);
                return;
        }
        r = files_list_finish(w->list, sb, w->path, &l, err, sizeof(err));
        w->list = NULL;
        if (r < 0) {
                file_work_fail(w, sb, r, err);
                file_work_free(w);
                return;
        }
        response_init(&resp, rid);
        reply.n_entries = l.n;
        reply.entries = l.entries;
        reply.has_truncated = 1;
        reply.truncated = l.truncated;
        resp.body_case = SBX__V1__RESPONSE__BODY_LIST_DIRECTORY;
        resp.list_directory = &reply;
        if (conn_send(c, &resp) == -EMSGSIZE) {
                code = SBX__V1__CODE__TOO_LARGE;
                conn_send_status(c, rid, code,
                                 "the listing of '%s' in sandbox '%s' does not fit in one frame; "
                                 "ask for fewer entries (limit)",
                                 w->path, w->sandbox_id);
        }
        file_record(c, w->sandbox_id, "list", w->path, 0, code);
        files_list_clear(&l);
        file_work_free(w);
}

/* The directory is opened here, then read and described off the loop: a directory of a
 * million entries takes seconds to read, which would stall every client. */
static void on_list_directory(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__ListDirectory *q = req->list_directory;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "list", q->path);
        struct files_list_job *job = NULL;
        char err[FILE_ERR_BYTES];
        struct file_work *w;
        int r;

        if (!sb)
                return;
        r = files_list_open(sb, q->path, q->has_limit ? q->limit : 0, file_reply_budget(c), &job,
                            err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "list", q->path, r, err);
                return;
        }
        w = file_work_new(c, req->request_id, sb, "list", q->path);
        if (!w) {
                files_list_job_free(job);
                return;
        }
        w->list = job;
        file_work_submit(c, req->request_id, sb, w, list_work, list_done);
}

static void on_stat(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__Stat *q = req->stat;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "stat", q->path);
        Sbx__V1__FileInfo fi;
        Sbx__V1__Response resp;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_stat(sb, q->path, &fi, err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "stat", q->path, r, err);
                return;
        }
        response_init(&resp, req->request_id);
        resp.body_case = SBX__V1__RESPONSE__BODY_STAT;
        resp.stat = &fi;
        conn_send(c, &resp);
        file_record(c, q->sandbox_id, "stat", q->path, 0, SBX__V1__CODE__OK);
        files_info_clear(&fi);
}

static void on_make_directory(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__MakeDirectory *q = req->make_directory;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "mkdir", q->path);
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_mkdir(sb, q->path, q->has_mode ? q->mode : 0755, q->has_parents && q->parents,
                        err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "mkdir", q->path, r, err);
                return;
        }
        send_empty(c, req->request_id);
        file_record(c, q->sandbox_id, "mkdir", q->path, 0, SBX__V1__CODE__OK);
}

static void remove_work(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        files_remove_run(w->remove, file_work_stop, job);
}

static void remove_done(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct conn *c = call_conn(w->call);
        uint64_t rid = w->call->request_id;
        char err[FILE_ERR_BYTES];
        struct sandbox *sb = file_work_sandbox(w);
        int r;

        if (!sb) {
                file_work_free(w);
                return;
        }
        r = files_remove_finish(w->remove, sb, w->path, err, sizeof(err));
        w->remove = NULL;
        if (r < 0) {
                file_work_fail(w, sb, r, err);
        } else {
                send_empty(c, rid);
                file_record(c, w->sandbox_id, "remove", w->path, 0, SBX__V1__CODE__OK);
        }
        file_work_free(w);
}

/* A file, a link or an empty directory is removed here; a tree off the loop (400,000
 * files took 2.8 s, every client waiting). */
static void on_remove(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__Remove *q = req->remove;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "remove", q->path);
        struct files_remove_job *job = NULL;
        char err[FILE_ERR_BYTES];
        struct file_work *w;
        int r;

        if (!sb)
                return;
        r = files_remove_open(sb, q->path, q->has_recursive && q->recursive, &job, err,
                              sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "remove", q->path, r, err);
                return;
        }
        if (!job) {
                send_empty(c, req->request_id);
                file_record(c, q->sandbox_id, "remove", q->path, 0, SBX__V1__CODE__OK);
                return;
        }
        w = file_work_new(c, req->request_id, sb, "remove", q->path);
        if (!w) {
                files_remove_job_free(job);
                return;
        }
        w->remove = job;
        file_work_submit(c, req->request_id, sb, w, remove_work, remove_done);
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
        {SBX__V1__REQUEST__BODY_READ_FILE, on_read_file},
        {SBX__V1__REQUEST__BODY_WRITE_FILE, on_write_file},
        {SBX__V1__REQUEST__BODY_LIST_DIRECTORY, on_list_directory},
        {SBX__V1__REQUEST__BODY_STAT, on_stat},
        {SBX__V1__REQUEST__BODY_MAKE_DIRECTORY, on_make_directory},
        {SBX__V1__REQUEST__BODY_REMOVE, on_remove},
        {SBX__V1__REQUEST__BODY_TERMINATE, on_terminate},
        {SBX__V1__REQUEST__BODY_LIST_SANDBOXES, on_list},
        {SBX__V1__REQUEST__BODY_GET_SANDBOX, on_get},
        {SBX__V1__REQUEST__BODY_SET_TIMEOUT, on_set_timeout},
        {SBX__V1__REQUEST__BODY_GET_HISTORY, on_history},
        {SBX__V1__REQUEST__BODY_ATTACH_COMMAND, on_attach},
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
