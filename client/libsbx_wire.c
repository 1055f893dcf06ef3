/* libsbx_wire.c: the conversion between the sbx.v1 wire messages and the plain structs
 * of sbx.h, both ways.
 *
 * From the wire: results are deep copies into malloc'd structs (a command's output is
 * taken from the unpacked reply instead, see wire_take_bytes), freed by the functions in
 * libsbx_types.c. To the wire: requests point at the caller's data, copying only what
 * must be reshaped into a pool that lives as long as the request.
 *
 * Owns nothing; no connection, no error state: a function here says false or NULL when
 * memory ran out and the caller reports it. Called by libsbx.c and libsbx_transport.c. */
#include "libsbx_int.h"

#include <stdlib.h>
#include <string.h>

#include "libsbx_limit_table.h"
#include "sbx_limits.h"

/* ---- enums: libsbx's values are the wire's ------------------------------------------ */

/* The enums of sbx.h carry the numbers of sbx.proto's, so that a value crosses by a
 * range-checked cast (the *_from_wire functions below); these keep the two equal. The
 * names of the values are spelled once, in libsbx_types.c. */
#define SAME_VALUE(a, b) _Static_assert((int)(a) == (int)(b), #a " is not " #b)
SAME_VALUE(SBX_STATE_UNSPECIFIED, SBX__V1__SANDBOX_STATE__SANDBOX_STATE_UNSPECIFIED);
SAME_VALUE(SBX_STATE_CREATING, SBX__V1__SANDBOX_STATE__CREATING);
SAME_VALUE(SBX_STATE_READY, SBX__V1__SANDBOX_STATE__READY);
SAME_VALUE(SBX_STATE_TERMINATING, SBX__V1__SANDBOX_STATE__TERMINATING);
SAME_VALUE(SBX_STATE_TERMINATED, SBX__V1__SANDBOX_STATE__TERMINATED);
SAME_VALUE(SBX_STATE_EXPIRED, SBX__V1__SANDBOX_STATE__EXPIRED);
SAME_VALUE(SBX_STATE_FAILED, SBX__V1__SANDBOX_STATE__FAILED);
SAME_VALUE(SBX_STATE_LOST, SBX__V1__SANDBOX_STATE__LOST);
SAME_VALUE(SBX_OUTCOME_UNSPECIFIED, SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED);
SAME_VALUE(SBX_OUTCOME_EXITED, SBX__V1__OUTCOME__EXITED);
SAME_VALUE(SBX_OUTCOME_SIGNALED, SBX__V1__OUTCOME__SIGNALED);
SAME_VALUE(SBX_OUTCOME_TIMED_OUT, SBX__V1__OUTCOME__TIMED_OUT);
SAME_VALUE(SBX_OUTCOME_OUT_OF_MEMORY, SBX__V1__OUTCOME__OUT_OF_MEMORY);
SAME_VALUE(SBX_OUTCOME_CANCELLED, SBX__V1__OUTCOME__CANCELLED);
SAME_VALUE(SBX_OUTCOME_SANDBOX_ENDED, SBX__V1__OUTCOME__SANDBOX_ENDED);
SAME_VALUE(SBX_OUTCOME_START_FAILED, SBX__V1__OUTCOME__START_FAILED);
SAME_VALUE(SBX_OUTCOME_UNKNOWN, SBX__V1__OUTCOME__UNKNOWN);
SAME_VALUE(SBX_OUTCOME_RUNNING, SBX__V1__OUTCOME__RUNNING);
SAME_VALUE(SBX_OUTCOME_QUEUE_TIMEOUT, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
SAME_VALUE(SBX_FILE_UNKNOWN, SBX__V1__FILE_TYPE__FILE_TYPE_UNKNOWN);
SAME_VALUE(SBX_FILE_BLOCK_DEVICE, SBX__V1__FILE_TYPE__BLOCK_DEVICE);
SAME_VALUE(SBX_NETWORK_NONE, SBX__V1__NETWORK_MODE__NETWORK_NONE);
SAME_VALUE(SBX_NETWORK_FULL, SBX__V1__NETWORK_MODE__NETWORK_FULL);
SAME_VALUE(SBX_NETWORK_ALLOWLIST, SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST);
SAME_VALUE(SBX_OK, SBX__V1__CODE__OK);
SAME_VALUE(SBX_SANDBOX_ENDED, SBX__V1__CODE__ENDED);

static enum sbx_state state_from_wire(int v) {
        return v >= 0 && v <= SBX_STATE_LOST ? (enum sbx_state)v : SBX_STATE_UNSPECIFIED;
}

/* An outcome this library knows; RUNNING only in a history record (record true), never
 * in a result. */
static enum sbx_outcome outcome_from_wire(int v, bool record) {
        if (v < 0 || v > SBX_OUTCOME_QUEUE_TIMEOUT || (v == SBX_OUTCOME_RUNNING && !record))
                return SBX_OUTCOME_UNSPECIFIED;
        return (enum sbx_outcome)v;
}

static enum sbx_file_type file_type_from_wire(int v) {
        return v >= 0 && v <= SBX_FILE_BLOCK_DEVICE ? (enum sbx_file_type)v : SBX_FILE_UNKNOWN;
}

/* ---- requests built from a pool ----------------------------------------------------- */

void *wire_pool_take(struct pool *p, void *ptr) {
        if (!ptr) {
                p->oom = true;
                return NULL;
        }
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 8;
                void **nv = realloc(p->v, cap * sizeof(*nv));
                if (!nv) {
                        free(ptr);
                        p->oom = true;
                        return NULL;
                }
                p->v = nv;
                p->cap = cap;
        }
        p->v[p->n++] = ptr;
        return ptr;
}

void *wire_pool_calloc(struct pool *p, size_t n, size_t size) {
        return wire_pool_take(p, calloc(n ? n : 1, size));
}

void wire_pool_free(struct pool *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->v[i]);
        free(p->v);
        memset(p, 0, sizeof(*p));
}

/* ---- from the wire ------------------------------------------------------------------ */

static bool dup_str(char **dst, const char *src) {
        *dst = NULL;
        if (!src)
                return true;
        *dst = strdup(src);
        return *dst != NULL;
}

/* Like dup_str, but an absent string becomes "" (identifiers and names are never NULL). */
bool wire_dup_str_nn(char **dst, const char *src) {
        *dst = strdup(src ? src : "");
        return *dst != NULL;
}

static bool dup_strv(struct sbx_strv *dst, char *const *v, size_t n) {
        dst->v = NULL;
        dst->n = 0;
        if (n == 0)
                return true;
        dst->v = calloc(n, sizeof(*dst->v));
        if (!dst->v)
                return false;
        dst->n = n;
        for (size_t i = 0; i < n; i++)
                if (!wire_dup_str_nn(&dst->v[i], v[i]))
                        return false;
        return true;
}

bool wire_dup_strv(struct sbx_strv *dst, char *const *v, size_t n) {
        return dup_strv(dst, v, n);
}

/* A string that may be absent stays NULL. */
static bool dup_opt(char **dst, const char *src) {
        *dst = src ? strdup(src) : NULL;
        return !src || *dst;
}

/* Labels copied (n may be 0). */
static bool dup_labels(struct sbx_label **dst, size_t *dst_n, Sbx__V1__Label *const *in, size_t n) {
        bool ok = true;

        if (n == 0)
                return true;
        *dst = calloc(n, sizeof(**dst));
        if (!*dst)
                return false;
        *dst_n = n;
        for (size_t i = 0; ok && i < n; i++)
                ok = wire_dup_str_nn(&(*dst)[i].key, in[i]->key) &&
                     wire_dup_str_nn(&(*dst)[i].value, in[i]->value);
        return ok;
}

static bool image_config_from_proto(struct sbx_image_config *out, const Sbx__V1__ImageConfig *in) {
        return dup_labels(&out->labels, &out->n_labels, in->labels, in->n_labels) &&
               dup_strv(&out->env, in->env, in->n_env) &&
               dup_strv(&out->entrypoint, in->entrypoint, in->n_entrypoint) &&
               dup_strv(&out->cmd, in->cmd, in->n_cmd) &&
               dup_opt(&out->working_dir, in->working_dir) && dup_opt(&out->user, in->user) &&
               dup_opt(&out->os, in->os) && dup_opt(&out->architecture, in->architecture) &&
               dup_opt(&out->variant, in->variant);
}

bool wire_image_from_proto(struct sbx_image *out, const Sbx__V1__ImageInfo *in) {
        memset(out, 0, sizeof(*out));
        out->size_bytes = in->size_bytes;
        out->data_bytes = in->data_bytes;
        out->sandboxes = in->sandboxes;
        out->created_unix_ms = in->created_unix_ms;
        out->last_used_unix_ms = in->last_used_unix_ms;
        out->downloaded_bytes = in->downloaded_bytes;
        if (!dup_strv(&out->names, in->names, in->n_names) ||
            !wire_dup_str_nn(&out->digest, in->digest) ||
            !dup_strv(&out->layers, in->layers, in->n_layers))
                return false;
        if (in->config) {
                out->config = calloc(1, sizeof(*out->config));
                if (!out->config || !image_config_from_proto(out->config, in->config))
                        return false;
        }
        return true;
}

/* Takes b's bytes (unpacked with libsbx_transport.c's unpack_allocator) into *dst,
 * NUL-terminated, without copying them; b is left empty, so that the message's free
 * leaves them alone. */
bool wire_take_bytes(uint8_t **dst, size_t *dst_len, ProtobufCBinaryData *b) {
        size_t n = b->data ? b->len : 0;
        uint8_t *p = n ? b->data : malloc(1);

        if (!p)
                return false;
        if (n) {
                b->data = NULL;
                b->len = 0;
        }
        p[n] = 0;
        *dst = p;
        *dst_len = n;
        return true;
}

static const char *enforcement_name(int e) {
        switch (e) {
        case SBX__V1__ENFORCEMENT__CGROUP_V2:
                return "cgroup_v2";
        case SBX__V1__ENFORCEMENT__CGROUP_V1:
                return "cgroup_v1";
        case SBX__V1__ENFORCEMENT__RLIMIT:
                return "rlimit";
        case SBX__V1__ENFORCEMENT__PROXY:
                return "proxy";
        case SBX__V1__ENFORCEMENT__PROJECT_QUOTA:
                return "project_quota";
        case SBX__V1__ENFORCEMENT__FILESYSTEM_IMAGE:
                return "filesystem_image";
        case SBX__V1__ENFORCEMENT__TMPFS_SIZE:
                return "tmpfs_size";
        default:
                return "none";
        }
}

static bool dup_enforcement(struct sbx_enforcement **dst, size_t *dst_n,
                            Sbx__V1__LimitEnforcement *const *v, size_t n) {
        *dst = NULL;
        *dst_n = 0;
        if (n == 0)
                return true;
        *dst = calloc(n, sizeof(**dst));
        if (!*dst)
                return false;
        *dst_n = n;
        for (size_t i = 0; i < n; i++) {
                if (!wire_dup_str_nn(&(*dst)[i].limit, v[i]->limit))
                        return false;
                if (!wire_dup_str_nn(&(*dst)[i].enforcement,
                                     enforcement_name((int)v[i]->enforcement)))
                        return false;
        }
        return true;
}

/* The sandbox uid range of u into h (nothing when u is NULL). false when out of memory. */
static bool hello_uids(struct sbx_hello *h, const Sbx__V1__SandboxUids *u) {
        if (!u || !u->count)
                return true;
        h->sandbox_uid_first = u->first;
        h->sandbox_uid_count = u->count;
        return wire_dup_str_nn(&h->uid_reservation, u->reservation) &&
               wire_dup_str_nn(&h->uid_origin, u->origin);
}

struct sbx_hello *wire_hello_from_proto(const Sbx__V1__HelloReply *in) {
        struct sbx_hello *h = calloc(1, sizeof(*h));
        const Sbx__V1__Features *f = in->features;
        bool ok;

        if (!h)
                return NULL;
        h->protocol_version = in->protocol_version;
        h->peer_uid = in->peer_uid;
        ok = wire_dup_str_nn(&h->daemon_version, in->daemon_version);
        ok = ok && wire_dup_str_nn(&h->cgroup_version,
                                   f && f->cgroup_version ? f->cgroup_version : "none");
        ok = ok && hello_uids(h, in->sandbox_uids);
        if (ok && f) {
                h->user_namespaces = f->user_namespaces;
                h->rootless = f->rootless;
                h->seccomp = f->seccomp;
                h->landlock_abi = f->landlock_abi;
                h->openat2 = f->openat2;
                h->max_frame_bytes = f->max_frame_bytes;
                if (f->n_implemented > 0) {
                        struct sbx_strv s;
                        ok = dup_strv(&s, f->implemented, f->n_implemented);
                        /* Handed over even when partial: sbx_hello_free frees it. */
                        h->implemented = s.v;
                        h->n_implemented = s.n;
                }
        }
        if (!ok) {
                sbx_hello_free(h);
                return NULL;
        }
        return h;
}

struct sbx_hello *wire_hello_copy(const struct sbx_hello *in) {
        struct sbx_hello *h = calloc(1, sizeof(*h));
        struct sbx_strv s;
        bool ok;

        if (!h)
                return NULL;
        *h = *in;
        h->daemon_version = h->cgroup_version = h->uid_reservation = h->uid_origin = NULL;
        h->implemented = NULL;
        h->n_implemented = 0;
        ok = wire_dup_str_nn(&h->daemon_version, in->daemon_version) &&
             wire_dup_str_nn(&h->cgroup_version, in->cgroup_version) &&
             dup_str(&h->uid_reservation, in->uid_reservation) &&
             dup_str(&h->uid_origin, in->uid_origin);
        if (ok) {
                ok = dup_strv(&s, in->implemented, in->n_implemented);
                h->implemented = s.v; /* even when partial: sbx_hello_free frees it */
                h->n_implemented = s.n;
        }
        if (!ok) {
                sbx_hello_free(h);
                return NULL;
        }
        return h;
}

/* The limits the wire's l gives into o, each with its bit of o->set (the table of
 * libsbx_limit_table.h says where each lies in both). */
static void limits_from_proto(struct sbx_limits *o, const Sbx__V1__Limits *l) {
        const char *w = (const char *)l;

        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                protobuf_c_boolean has, b;
                uint64_t u64;
                uint32_t u32;
                double d;

                memcpy(&has, w + t->wire_has_offset, sizeof(has));
                if (!has)
                        continue;
                switch (t->type) {
                case LIBSBX_LIMIT_U64:
                        memcpy(&u64, w + t->wire_offset, sizeof(u64));
                        libsbx_limit_set_uint(o, t, u64);
                        break;
                case LIBSBX_LIMIT_U32:
                        memcpy(&u32, w + t->wire_offset, sizeof(u32));
                        libsbx_limit_set_uint(o, t, u32);
                        break;
                case LIBSBX_LIMIT_BOOL:
                        memcpy(&b, w + t->wire_offset, sizeof(b));
                        libsbx_limit_set_uint(o, t, b != 0);
                        break;
                case LIBSBX_LIMIT_DOUBLE:
                        memcpy(&d, w + t->wire_offset, sizeof(d));
                        libsbx_limit_set_double(o, t, d);
                        break;
                }
        }
}

static bool policy_from_proto(struct sbx_policy *out, const Sbx__V1__Policy *in) {
        sbx_policy_init(out);
        if (!in)
                return true;
        out->network = in->network == SBX__V1__NETWORK_MODE__NETWORK_FULL ? SBX_NETWORK_FULL
                       : in->network == SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST
                               ? SBX_NETWORK_ALLOWLIST
                               : SBX_NETWORK_NONE;
        out->protect_defaults = in->protect_defaults;
        out->inherit_environment_set = in->inherit_environment_set;
        if (in->limits)
                limits_from_proto(&out->limits, in->limits);
        return dup_strv(&out->writable_paths, in->writable_paths, in->n_writable_paths) &&
               dup_strv(&out->denied_read_paths, in->denied_read_paths, in->n_denied_read_paths) &&
               dup_strv(&out->denied_write_paths, in->denied_write_paths,
                        in->n_denied_write_paths) &&
               dup_strv(&out->inherit_environment, in->inherit_environment,
                        in->n_inherit_environment) &&
               dup_strv(&out->allowed_hosts, in->allowed_hosts, in->n_allowed_hosts) &&
               dup_strv(&out->allowed_cidrs, in->allowed_cidrs, in->n_allowed_cidrs) &&
               dup_str(&out->root_dir, in->root_dir);
}

static bool dup_u32s(uint32_t **dst, size_t *dst_n, const uint32_t *v, size_t n) {
        *dst = NULL;
        *dst_n = 0;
        if (n == 0)
                return true;
        *dst = malloc(n * sizeof(**dst));
        if (!*dst)
                return false;
        memcpy(*dst, v, n * sizeof(**dst));
        *dst_n = n;
        return true;
}

/* SandboxInfo.commands into s. */
static bool commands_from_proto(struct sbx_sandbox *s, const Sbx__V1__SandboxInfo *in) {
        if (in->n_commands == 0)
                return true;
        s->commands = calloc(in->n_commands, sizeof(*s->commands));
        if (!s->commands)
                return false;
        s->n_commands = in->n_commands;
        for (size_t i = 0; i < in->n_commands; i++) {
                const Sbx__V1__CommandInfo *ci = in->commands[i];
                struct sbx_command_info *o = &s->commands[i];
                o->state = (enum sbx_command_state)ci->state;
                o->background = ci->background;
                o->tty = ci->tty;
                o->caller_uid = ci->caller_uid;
                o->started_unix_ms = ci->started_unix_ms;
                o->ended_unix_ms = ci->ended_unix_ms;
                o->outcome = ci->has_outcome ? (int)outcome_from_wire((int)ci->outcome, true) : 0;
                o->has_exit_code = ci->has_exit_code;
                o->exit_code = ci->exit_code;
                if (!wire_dup_str_nn(&o->command_id, ci->command_id) ||
                    !dup_strv(&o->argv, ci->argv, ci->n_argv))
                        return false;
        }
        return true;
}

struct sbx_sandbox *wire_sandbox_from_proto(const Sbx__V1__SandboxInfo *in) {
        struct sbx_sandbox *s = calloc(1, sizeof(*s));
        bool ok;

        if (!s)
                return NULL;
        sbx_policy_init(&s->policy);
        s->state = state_from_wire((int)in->state);
        s->owner_uid = in->owner_uid;
        s->created_unix_ms = in->created_unix_ms;
        s->deadline_unix_ms = in->deadline_unix_ms;
        s->idle_timeout_ms = in->idle_timeout_ms;
        s->ended_unix_ms = in->ended_unix_ms;
        s->isolated = in->isolated;
        s->running_commands = in->running_commands;
        s->commands_run = in->commands_run;
        s->queued_commands = in->queued_commands;

        ok = wire_dup_str_nn(&s->id, in->id) && dup_str(&s->end_reason, in->end_reason) &&
             dup_str(&s->image, in->image) && dup_str(&s->image_digest, in->image_digest);
        ok = ok && dup_labels(&s->labels, &s->n_labels, in->labels, in->n_labels);
        ok = ok && policy_from_proto(&s->policy, in->policy);
        ok = ok && dup_strv(&s->warnings, in->warnings, in->n_warnings);
        ok = ok && dup_enforcement(&s->enforcement, &s->n_enforcement, in->enforcement,
                                   in->n_enforcement);
        ok = ok && dup_u32s(&s->share_uids, &s->n_share_uids, in->share_uids, in->n_share_uids);
        ok = ok && dup_u32s(&s->share_gids, &s->n_share_gids, in->share_gids, in->n_share_gids);
        ok = ok && commands_from_proto(s, in);
        if (!ok) {
                sbx_sandbox_free(s);
                return NULL;
        }
        return s;
}

/* The result in (its output taken, not copied: in is freed after this). */
struct sbx_result *wire_result_from_proto(Sbx__V1__CommandResult *in) {
        struct sbx_result *r = calloc(1, sizeof(*r));
        const Sbx__V1__ResourceReport *rr = in->resources;
        bool ok;

        if (!r)
                return NULL;
        r->outcome = outcome_from_wire((int)in->outcome, false);
        r->has_exit_code = in->has_exit_code;
        r->exit_code = in->exit_code;
        r->has_signal = in->has_signal;
        r->signal = in->signal;
        r->timed_out = in->timed_out;
        r->stdout_truncated = in->stdout_truncated;
        r->stderr_truncated = in->stderr_truncated;
        r->stdout_bytes = in->stdout_bytes;
        r->stderr_bytes = in->stderr_bytes;
        r->duration = in->duration;
        r->isolated = in->isolated;
        r->start_errno = in->start_errno;
        r->has_owner_uid = in->has_owner_uid;
        r->owner_uid = in->owner_uid;
        r->queued_ms = in->queued_ms;
        r->has_timeout_ms = in->has_timeout_ms;
        r->timeout_ms = in->timeout_ms;
        ok = wire_dup_str_nn(&r->command_id, in->command_id) &&
             wire_dup_str_nn(&r->sandbox_id, in->sandbox_id) &&
             wire_take_bytes(&r->stdout_data, &r->stdout_len, &in->stdout) &&
             wire_take_bytes(&r->stderr_data, &r->stderr_len, &in->stderr) &&
             dup_strv(&r->warnings, in->warnings, in->n_warnings) &&
             dup_str(&r->start_error, in->start_error);
        if (ok && rr) {
                r->cpu_seconds = rr->cpu_seconds;
                r->peak_memory_bytes = rr->peak_memory_bytes;
                ok = dup_str(&r->peak_memory_source, rr->peak_memory_source) &&
                     dup_strv(&r->limits_hit, rr->limits_hit, rr->n_limits_hit) &&
                     dup_enforcement(&r->enforcement, &r->n_enforcement, rr->enforcement,
                                     rr->n_enforcement);
        }
        if (!ok) {
                sbx_result_free(r);
                return NULL;
        }
        return r;
}

bool wire_file_info_from_proto(struct sbx_file_info *out, const Sbx__V1__FileInfo *in) {
        memset(out, 0, sizeof(*out));
        out->type = file_type_from_wire((int)in->type);
        out->size = in->size;
        out->mode = in->mode;
        out->mtime_unix_ms = in->mtime_unix_ms;
        out->is_dir = in->has_is_dir ? in->is_dir : out->type == SBX_FILE_DIRECTORY;
        return wire_dup_str_nn(&out->name, in->name) &&
               dup_str(&out->symlink_target, in->symlink_target);
}

static bool record_from_proto(struct sbx_command_record *out, const Sbx__V1__CommandRecord *in) {
        memset(out, 0, sizeof(*out));
        out->seq = in->seq;
        out->caller_uid = in->caller_uid;
        out->caller_pid = in->caller_pid;
        out->started_unix_ms = in->started_unix_ms;
        out->ended_unix_ms = in->ended_unix_ms;
        out->outcome = outcome_from_wire((int)in->outcome, true);
        out->has_exit_code = in->has_exit_code;
        out->exit_code = in->exit_code;
        out->has_signal = in->has_signal;
        out->signal = in->signal;
        out->duration = in->duration;
        out->peak_memory_bytes = in->peak_memory_bytes;
        out->stdout_bytes = in->stdout_bytes;
        out->stderr_bytes = in->stderr_bytes;
        out->stdout_truncated = in->stdout_truncated;
        out->stderr_truncated = in->stderr_truncated;
        out->queued_ms = in->queued_ms;
        out->background = in->background;
        out->tty = in->tty;
        return wire_dup_str_nn(&out->command_id, in->command_id) &&
               dup_strv(&out->argv, in->argv, in->n_argv) && wire_dup_str_nn(&out->cwd, in->cwd) &&
               wire_dup_str_nn(&out->client_name, in->client_name);
}

/* The list of a ListSandboxes reply (lr may be NULL: empty), or NULL when out of
 * memory. */
struct sbx_sandbox_list *wire_list_from_proto(const Sbx__V1__ListSandboxesReply *lr) {
        struct sbx_sandbox_list *out = calloc(1, sizeof(*out));

        if (!out)
                return NULL;
        if (lr && lr->n_sandboxes) {
                out->v = calloc(lr->n_sandboxes, sizeof(*out->v));
                if (!out->v) {
                        free(out);
                        return NULL;
                }
                out->n = lr->n_sandboxes;
                for (size_t i = 0; i < out->n; i++) {
                        out->v[i] = wire_sandbox_from_proto(lr->sandboxes[i]);
                        if (!out->v[i]) {
                                sbx_sandbox_list_free(out);
                                return NULL;
                        }
                }
        }
        out->truncated = lr && lr->truncated;
        return out;
}

static bool connection_from_proto(struct sbx_connection_record *o,
                                  const Sbx__V1__ConnectionRecord *r) {
        o->seq = r->seq;
        o->started_unix_ms = r->started_unix_ms;
        o->ended_unix_ms = r->has_ended_unix_ms ? r->ended_unix_ms : 0;
        o->port = r->port;
        o->allowed = r->allowed;
        o->bytes_sent = r->bytes_sent;
        o->bytes_received = r->bytes_received;
        return dup_str(&o->host, r->host) && dup_str(&o->address, r->address) &&
               dup_str(&o->reason, r->reason) && dup_str(&o->method, r->method);
}

static bool forward_from_proto(struct sbx_forward_record *o, const Sbx__V1__ForwardRecord *r) {
        o->seq = r->seq;
        o->caller_uid = r->caller_uid;
        o->caller_pid = r->caller_pid;
        o->port = r->port;
        o->opened_unix_ms = r->opened_unix_ms;
        o->closed_unix_ms = r->has_closed_unix_ms ? r->closed_unix_ms : 0;
        o->bytes_in = r->bytes_in;
        o->bytes_out = r->bytes_out;
        return dup_str(&o->client_name, r->client_name) && dup_str(&o->address, r->address) &&
               dup_str(&o->reason, r->reason);
}

/* A history page's n records (in: its messages) converted by conv into a new array of
 * elem-byte entries (*ret_v); *ret_n counts the entries begun, so that the page's free
 * undoes a failure half way. false when out of memory. */
bool wire_page_from_proto(void **ret_v, size_t *ret_n, size_t elem, void *const *in, size_t n,
                          bool (*conv)(void *out, const void *in)) {
        uint8_t *v;

        if (n == 0)
                return true;
        v = calloc(n, elem);
        if (!v)
                return false;
        *ret_v = v;
        for (size_t i = 0; i < n; i++) {
                *ret_n = i + 1;
                if (!conv(v + i * elem, in[i]))
                        return false;
        }
        return true;
}

bool wire_record_conv(void *out, const void *in) {
        return record_from_proto(out, in);
}

bool wire_connection_conv(void *out, const void *in) {
        return connection_from_proto(out, in);
}

bool wire_forward_conv(void *out, const void *in) {
        return forward_from_proto(out, in);
}

/* ---- to the wire -------------------------------------------------------------------- */

/* The limits of l into lim, or nothing when none is set (pol->limits stays NULL). */
static void limits_to_proto(const struct sbx_limits *l, Sbx__V1__Limits *lim,
                            Sbx__V1__Policy *pol) {
        char *w = (char *)lim;

        if (!l->set)
                return;
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                protobuf_c_boolean has = libsbx_limit_given(l, t), b;
                uint64_t u64 = libsbx_limit_uint(l, t);
                uint32_t u32 = (uint32_t)u64;
                double d = libsbx_limit_double(l, t);

                memcpy(w + t->wire_has_offset, &has, sizeof(has));
                switch (t->type) {
                case LIBSBX_LIMIT_U64:
                        memcpy(w + t->wire_offset, &u64, sizeof(u64));
                        break;
                case LIBSBX_LIMIT_U32:
                        memcpy(w + t->wire_offset, &u32, sizeof(u32));
                        break;
                case LIBSBX_LIMIT_BOOL:
                        b = u64 != 0;
                        memcpy(w + t->wire_offset, &b, sizeof(b));
                        break;
                case LIBSBX_LIMIT_DOUBLE:
                        memcpy(w + t->wire_offset, &d, sizeof(d));
                        break;
                }
        }
        pol->limits = lim;
}

/* The policy p into pol and lim (pointing at p's strings). */
void wire_policy_to_proto(const struct sbx_policy *p, Sbx__V1__Policy *pol, Sbx__V1__Limits *lim) {
        pol->n_writable_paths = p->writable_paths.n;
        pol->writable_paths = p->writable_paths.v;
        pol->n_denied_read_paths = p->denied_read_paths.n;
        pol->denied_read_paths = p->denied_read_paths.v;
        pol->n_denied_write_paths = p->denied_write_paths.n;
        pol->denied_write_paths = p->denied_write_paths.v;
        pol->has_network = 1;
        pol->network = (Sbx__V1__NetworkMode)p->network; /* the same values (SAME_VALUE) */
        pol->n_allowed_hosts = p->allowed_hosts.n;
        pol->allowed_hosts = p->allowed_hosts.v;
        pol->n_allowed_cidrs = p->allowed_cidrs.n;
        pol->allowed_cidrs = p->allowed_cidrs.v;
        pol->has_protect_defaults = 1;
        pol->protect_defaults = !!p->protect_defaults;
        pol->n_inherit_environment = p->inherit_environment.n;
        pol->inherit_environment = p->inherit_environment.v;
        if (p->inherit_environment_set) {
                pol->has_inherit_environment_set = 1;
                pol->inherit_environment_set = 1;
        }
        pol->root_dir = p->root_dir;
        limits_to_proto(&p->limits, lim, pol);
}

/* The n labels of v as wire Labels (pointing at v's strings), allocated from pool;
 * pool->oom when that failed. */
Sbx__V1__Label **wire_labels(struct pool *pool, const struct sbx_label *v, size_t n) {
        Sbx__V1__Label *labels = wire_pool_calloc(pool, n, sizeof(*labels));
        Sbx__V1__Label **ptrs = wire_pool_calloc(pool, n, sizeof(*ptrs));

        for (size_t i = 0; labels && ptrs && i < n; i++) {
                sbx__v1__label__init(&labels[i]);
                labels[i].key = v[i].key;
                labels[i].value = v[i].value;
                ptrs[i] = &labels[i];
        }
        return ptrs;
}

/* The rest of o into cs: id, lifetime, idle timeout, env, sharing, keep_workspace. */
void wire_create_to_proto(const struct sbx_create_opts *o, Sbx__V1__CreateSandbox *cs) {
        cs->id = unconst(o->id);
        if (o->timeout_ms) {
                cs->has_timeout_ms = 1;
                cs->timeout_ms = o->timeout_ms;
        }
        if (o->idle_timeout_ms) {
                /* Absent on the wire: the daemon's default; 0: none. */
                cs->has_idle_timeout_ms = 1;
                cs->idle_timeout_ms =
                        o->idle_timeout_ms == SBX_IDLE_TIMEOUT_NONE ? 0 : o->idle_timeout_ms;
        }
        cs->n_env = o->n_env;
        cs->env = unconst_v(o->env);
        cs->n_share_uids = o->n_share_uids;
        cs->share_uids = (uint32_t *)(uintptr_t)o->share_uids;
        cs->n_share_gids = o->n_share_gids;
        cs->share_gids = (uint32_t *)(uintptr_t)o->share_gids;
        if (o->keep_workspace) {
                cs->has_keep_workspace = 1;
                cs->keep_workspace = 1;
        }
        cs->image = unconst(o->image);
}

/* The filters of opts into ls, allocated from pool (pool->oom on failure). */
void wire_list_opts_to_proto(const struct sbx_list_opts *opts, Sbx__V1__ListSandboxes *ls,
                             struct pool *pool) {
        if (opts->n_labels) {
                ls->labels = wire_labels(pool, opts->labels, opts->n_labels);
                ls->n_labels = opts->n_labels;
        }
        if (opts->n_states) {
                ls->states = wire_pool_calloc(pool, opts->n_states, sizeof(*ls->states));
                for (size_t i = 0; ls->states && i < opts->n_states; i++)
                        ls->states[i] = (Sbx__V1__SandboxState)opts->states[i];
                ls->n_states = opts->n_states;
        }
        ls->has_owner_uid = !!opts->has_owner_uid;
        ls->owner_uid = opts->owner_uid;
        ls->has_include_ended = !!opts->include_ended;
        ls->include_ended = !!opts->include_ended;
        ls->has_limit = opts->limit > 0;
        ls->limit = opts->limit;
}

/* The rest of o into run: the command, stdin, the timeout (the default when none), the
 * wait for a slot (absent when not given) and the output caps. Streaming is asked for
 * with on_output, and for streamed stdin, on_started and on_queued, which need the
 * command's id before the result. */
void wire_run_to_proto(const char *id, const struct sbx_exec_opts *o, Sbx__V1__RunCommand *run) {
        run->sandbox_id = unconst(id);
        run->n_argv = o->argc;
        run->argv = unconst_v(o->argv);
        run->shell = unconst(o->shell);
        run->cwd = unconst(o->cwd);
        if (o->stdin_data) {
                run->has_stdin = 1;
                run->stdin.data = (uint8_t *)(uintptr_t)o->stdin_data;
                run->stdin.len = o->stdin_len;
        }
        run->has_timeout_ms = 1;
        run->timeout_ms = o->timeout_ms ? o->timeout_ms : SBX_DEFAULT_COMMAND_TIMEOUT_MS;
        if (o->max_stdout_bytes) {
                run->has_max_stdout_bytes = 1;
                run->max_stdout_bytes = o->max_stdout_bytes;
        }
        if (o->max_stderr_bytes) {
                run->has_max_stderr_bytes = 1;
                run->max_stderr_bytes = o->max_stderr_bytes;
        }
        if (o->has_queue_timeout) {
                run->has_queue_timeout_ms = 1;
                run->queue_timeout_ms = o->queue_timeout_ms;
        }
        if (o->stdin_stream) {
                run->has_stdin_stream = 1;
                run->stdin_stream = 1;
        }
        /* rows/cols go as given, with tty or not: the daemon judges them. */
        if (o->tty)
                run->has_tty = run->tty = 1;
        run->has_rows = o->rows != 0;
        run->rows = o->rows;
        run->has_cols = o->cols != 0;
        run->cols = o->cols;
        run->user = unconst(o->user);
        if (o->on_output || o->stdin_stream || o->on_started || o->on_queued) {
                run->has_stream = 1;
                run->stream = 1;
        }
}
