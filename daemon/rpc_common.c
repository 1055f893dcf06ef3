/* rpc_common.c: what the request handlers share; see rpc_common.h. */
#include "rpc_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "conn.h"
#include "log.h"
#include "names.h"
#include "offload.h"
#include "rpc.h"
#include "sandbox.h"
#include "sbxd.h"
#include "store.h"

static struct call *call_of(struct conn_call *cc) {
        return (struct call *)((char *)cc - offsetof(struct call, cc));
}

struct conn *rpc_call_conn(const struct call *k) {
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
                          (unsigned long long)conn_id(rpc_call_conn(k)), command_id(k->cmd));
                command_cancel(k->cmd);
        }
}

static void call_drained(struct conn_call *cc) {
        struct call *k = call_of(cc);
        if (k->cmd && k->stream)
                command_resume_output(k->cmd);
}

struct call *rpc_call_new(struct conn *c, uint64_t request_id) {
        struct call *k = calloc(1, sizeof(*k));
        if (!k)
                return NULL;
        k->request_id = request_id;
        conn_call_begin(c, &k->cc, call_closing, call_drained);
        return k;
}

void rpc_call_free(struct call *k) {
        conn_call_end(&k->cc);
        free(k);
}

void rpc_caller_of(const struct conn *c, struct caller *ret) {
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

void rpc_send_errno(struct conn *c, uint64_t rid, int err, const char *msg) {
        conn_send_status(c, rid, rpc_code_from_errno(err), "%s", msg);
}

/* ---- responses ----------------------------------------------------------------------- */

static Sbx__V1__Status ok_status = {PROTOBUF_C_MESSAGE_INIT(&sbx__v1__status__descriptor), 1,
                                    SBX__V1__CODE__OK, NULL};

void rpc_response_init(Sbx__V1__Response *resp, uint64_t rid) {
        sbx__v1__response__init(resp);
        resp->has_request_id = 1;
        resp->request_id = rid;
        resp->status = &ok_status;
}

void rpc_send_empty(struct conn *c, uint64_t rid) {
        Sbx__V1__Response resp;
        Sbx__V1__Empty e = SBX__V1__EMPTY__INIT;
        rpc_response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_EMPTY;
        resp.empty = &e;
        conn_send(c, &resp);
}

/* ---- records of ended sandboxes ------------------------------------------------------ */

int rpc_record_to_info(const struct store_sandbox *sb, void *ud) {
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
                ri->info.image = ri->spec->image && ri->spec->image[0] ? ri->spec->image : NULL;
                ri->info.image_digest = ri->spec->image_digest;
        }
        return 0;
}

void rpc_record_info_free(struct record_info *ri) {
        if (ri->spec)
                sbx__v1__create_sandbox__free_unpacked(ri->spec, NULL);
        free(ri->id);
        free(ri->end_reason);
        memset(ri, 0, sizeof(*ri));
}

int rpc_record_may_access(const struct record_info *ri, const struct caller *k) {
        return sandbox_access_allowed(ri->info.owner_uid, ri->spec, k);
}

void rpc_send_not_found(struct conn *c, uint64_t rid, const char *id) {
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

        rpc_caller_of(c, &k);
        memset(&ri, 0, sizeof(ri));
        r = store_sandbox_get(conn_daemon(c)->store, id, rpc_record_to_info, &ri);
        ok = r == 0 && rpc_record_may_access(&ri, &k);
        rpc_record_info_free(&ri);
        return ok;
}

int rpc_find_sandbox(struct conn *c, uint64_t rid, const char *id, struct sandbox **ret) {
        struct sandbox *sb;
        struct caller k;

        *ret = NULL;
        if (!id || !id[0]) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT, "sandbox_id is required");
                return -1;
        }
        rpc_caller_of(c, &k);
        sb = sbxtab_find(conn_daemon(c)->sandboxes, id);
        if (sb && sandbox_is_over(sb))
                sb = NULL; /* ended: its record answers */
        if (sb && sandbox_may_access(sb, &k)) {
                *ret = sb;
                return SEEN_LIVE;
        }
        if (!sb && record_visible(c, id))
                return SEEN_ENDED;
        rpc_send_not_found(c, rid, id);
        return -1;
}

struct sandbox *rpc_lookup(struct conn *c, uint64_t rid, const char *id) {
        struct sandbox *sb;
        int seen = rpc_find_sandbox(c, rid, id, &sb);

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
