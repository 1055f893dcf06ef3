/* libsbx_types.c: the plain-data half of libsbx: enum names, option initialisers, the
 * free functions of every result struct, and the default socket path.
 *
 * The names of the status codes, sandbox states and command outcomes are spelled here
 * only, one table per enum keyed by value: the sbx tool, `sbx mcp` and the Python
 * binding print what sbx_code_name, sbx_state_name and sbx_outcome_name return.
 *
 * Nothing here talks to the daemon or touches protobuf; everything is declared in
 * sbx.h. The result structs freed here are built by libsbx_wire.c and libsbx.c, which
 * allocate every string and array with malloc so that free() is the one way to release
 * them. Free functions accept NULL and partially filled structs (libsbx_wire.c relies on
 * that to clean up after a failed conversion). */
#include "sbx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* ---- the names of the enums: the one table of each ------------------------------------- */

/* Each value's name, keyed by the value itself (never by position), as the daemon, the
 * sbx tool, the MCP server and the Python binding print it; those all take it from
 * here (the binding checks its enums against these at load time). */
static const char *const code_names[] = {
        [SBX_OK] = "OK",
        [SBX_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
        [SBX_NOT_FOUND] = "NOT_FOUND",
        [SBX_ALREADY_EXISTS] = "ALREADY_EXISTS",
        [SBX_PERMISSION_DENIED] = "PERMISSION_DENIED",
        [SBX_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
        [SBX_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
        [SBX_READ_ONLY] = "READ_ONLY",
        [SBX_TOO_LARGE] = "TOO_LARGE",
        [SBX_UNAVAILABLE] = "UNAVAILABLE",
        [SBX_UNIMPLEMENTED] = "UNIMPLEMENTED",
        [SBX_INTERNAL] = "INTERNAL",
        [SBX_SANDBOX_ENDED] = "SANDBOX_ENDED",
};

static const char *const state_names[] = {
        [SBX_STATE_UNSPECIFIED] = "unspecified",
        [SBX_STATE_CREATING] = "creating",
        [SBX_STATE_READY] = "ready",
        [SBX_STATE_TERMINATING] = "terminating",
        [SBX_STATE_TERMINATED] = "terminated",
        [SBX_STATE_EXPIRED] = "expired",
        [SBX_STATE_FAILED] = "failed",
        [SBX_STATE_LOST] = "lost",
};

static const char *const outcome_names[] = {
        [SBX_OUTCOME_UNSPECIFIED] = "unspecified",
        [SBX_OUTCOME_EXITED] = "exited",
        [SBX_OUTCOME_SIGNALED] = "signaled",
        [SBX_OUTCOME_TIMED_OUT] = "timed_out",
        [SBX_OUTCOME_OUT_OF_MEMORY] = "out_of_memory",
        [SBX_OUTCOME_CANCELLED] = "cancelled",
        [SBX_OUTCOME_SANDBOX_ENDED] = "sandbox_ended",
        [SBX_OUTCOME_START_FAILED] = "start_failed",
        [SBX_OUTCOME_UNKNOWN] = "unknown",
        [SBX_OUTCOME_RUNNING] = "running",
        [SBX_OUTCOME_QUEUE_TIMEOUT] = "queue_timeout",
};

#define NAMES_N(a) (sizeof(a) / sizeof((a)[0]))

/* names[value], or fallback for a value without a name. */
static const char *name_of(const char *const *names, size_t n, int value, const char *fallback) {
        if (value < 0 || (size_t)value >= n || !names[value])
                return fallback;
        return names[value];
}

const char *sbx_code_name(int code) {
        return name_of(code_names, NAMES_N(code_names), code, "UNKNOWN");
}

const char *sbx_state_name(int state) {
        return name_of(state_names, NAMES_N(state_names), state, "unknown");
}

const char *sbx_outcome_name(int outcome) {
        return name_of(outcome_names, NAMES_N(outcome_names), outcome, "unknown");
}

/* An environment variable, or NULL when it is unset or empty (an empty SBX_SOCKET or
 * XDG_RUNTIME_DIR is as good as none, and must not turn into a relative path). */
static const char *env_nonempty(const char *name) {
        const char *v = getenv(name);
        return v && *v ? v : NULL;
}

int sbx_default_socket_path(char *buf, size_t len) {
        const char *v;
        int n;

        if (!buf || len == 0)
                return -EINVAL;
        if ((v = env_nonempty("SBX_SOCKET")))
                n = snprintf(buf, len, "%s", v);
        else if (geteuid() == 0)
                n = snprintf(buf, len, "/run/sbxd/sbxd.sock");
        else if ((v = env_nonempty("XDG_RUNTIME_DIR")))
                n = snprintf(buf, len, "%s/sbxd/sbxd.sock", v);
        else
                n = snprintf(buf, len, "/run/user/%u/sbxd/sbxd.sock", (unsigned)geteuid());
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        /* A user without a daemon of their own, but allowed on the system daemon's socket
         * (a member of group sbxd), reaches the system daemon. */
        if (geteuid() != 0 && !env_nonempty("SBX_SOCKET") && access(buf, F_OK) < 0 &&
            access("/run/sbxd/sbxd.sock", W_OK) == 0 && len > strlen("/run/sbxd/sbxd.sock"))
                snprintf(buf, len, "/run/sbxd/sbxd.sock");
        return 0;
}

void sbx_policy_init(struct sbx_policy *p) {
        if (!p)
                return;
        memset(p, 0, sizeof(*p));
        p->network = SBX_NETWORK_NONE;
        p->protect_defaults = 1;
}

void sbx_policy_read_only(struct sbx_policy *p, enum sbx_network network) {
        if (!p)
                return;
        sbx_policy_init(p);
        p->network = network;
}

void sbx_policy_workspace_write(struct sbx_policy *p, const char *const *roots, size_t n,
                                enum sbx_network network) {
        if (!p)
                return;
        sbx_policy_read_only(p, network);
        p->writable_paths.v = (char **)(uintptr_t)roots;
        p->writable_paths.n = roots ? n : 0;
}

void sbx_create_opts_init(struct sbx_create_opts *o) {
        if (!o)
                return;
        memset(o, 0, sizeof(*o));
        sbx_policy_init(&o->policy);
}

void sbx_exec_opts_init(struct sbx_exec_opts *o) {
        if (!o)
                return;
        memset(o, 0, sizeof(*o));
}

/* ---- free functions ----------------------------------------------------------------- */

static void strv_clear(struct sbx_strv *s) {
        for (size_t i = 0; s->v && i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        s->v = NULL;
        s->n = 0;
}

static void enforcement_free(struct sbx_enforcement *e, size_t n) {
        for (size_t i = 0; e && i < n; i++) {
                free(e[i].limit);
                free(e[i].enforcement);
        }
        free(e);
}

void sbx_hello_free(struct sbx_hello *h) {
        if (!h)
                return;
        free(h->daemon_version);
        free(h->cgroup_version);
        free(h->uid_reservation);
        free(h->uid_origin);
        for (size_t i = 0; h->implemented && i < h->n_implemented; i++)
                free(h->implemented[i]);
        free(h->implemented);
        free(h);
}

/* Frees what a policy returned by the library owns (not the struct itself). */
static void policy_clear(struct sbx_policy *p) {
        strv_clear(&p->writable_paths);
        strv_clear(&p->denied_read_paths);
        strv_clear(&p->denied_write_paths);
        strv_clear(&p->inherit_environment);
        strv_clear(&p->allowed_hosts);
        strv_clear(&p->allowed_cidrs);
        free(p->root_dir);
        p->root_dir = NULL;
}

void sbx_sandbox_free(struct sbx_sandbox *s) {
        if (!s)
                return;
        free(s->id);
        for (size_t i = 0; s->labels && i < s->n_labels; i++) {
                free(s->labels[i].key);
                free(s->labels[i].value);
        }
        free(s->labels);
        free(s->end_reason);
        free(s->image);
        free(s->image_digest);
        policy_clear(&s->policy);
        strv_clear(&s->warnings);
        enforcement_free(s->enforcement, s->n_enforcement);
        free(s->share_uids);
        free(s->share_gids);
        for (size_t i = 0; s->commands && i < s->n_commands; i++) {
                free(s->commands[i].command_id);
                strv_clear(&s->commands[i].argv);
        }
        free(s->commands);
        free(s);
}

void sbx_background_free(struct sbx_background *b) {
        if (!b)
                return;
        free(b->command_id);
        sbx_result_free(b->result);
        free(b);
}

const char *sbx_command_state_name(int state) {
        switch (state) {
        case SBX_COMMAND_QUEUED:
                return "queued";
        case SBX_COMMAND_RUNNING:
                return "running";
        case SBX_COMMAND_ENDED:
                return "ended";
        default:
                return "unknown";
        }
}

void sbx_sandbox_list_free(struct sbx_sandbox_list *l) {
        if (!l)
                return;
        for (size_t i = 0; l->v && i < l->n; i++)
                sbx_sandbox_free(l->v[i]);
        free(l->v);
        free(l);
}

void sbx_result_free(struct sbx_result *r) {
        if (!r)
                return;
        free(r->command_id);
        free(r->sandbox_id);
        free(r->stdout_data);
        free(r->stderr_data);
        strv_clear(&r->warnings);
        free(r->peak_memory_source);
        strv_clear(&r->limits_hit);
        enforcement_free(r->enforcement, r->n_enforcement);
        free(r->start_error);
        free(r);
}

void sbx_read_result_free(struct sbx_read_result *r) {
        if (!r)
                return;
        free(r->data);
        free(r);
}

static void file_info_clear(struct sbx_file_info *f) {
        free(f->name);
        free(f->symlink_target);
        f->name = f->symlink_target = NULL;
}

void sbx_file_info_free(struct sbx_file_info *f) {
        if (!f)
                return;
        file_info_clear(f);
        free(f);
}

void sbx_dir_list_free(struct sbx_dir_list *l) {
        if (!l)
                return;
        for (size_t i = 0; l->v && i < l->n; i++)
                file_info_clear(&l->v[i]);
        free(l->v);
        free(l);
}

void sbx_history_free(struct sbx_history *h) {
        if (!h)
                return;
        for (size_t i = 0; h->v && i < h->n; i++) {
                free(h->v[i].command_id);
                strv_clear(&h->v[i].argv);
                free(h->v[i].cwd);
                free(h->v[i].client_name);
        }
        free(h->v);
        free(h);
}

static void image_config_free(struct sbx_image_config *c) {
        if (!c)
                return;
        strv_clear(&c->env);
        strv_clear(&c->entrypoint);
        strv_clear(&c->cmd);
        free(c->working_dir);
        free(c->user);
        free(c->os);
        free(c->architecture);
        free(c->variant);
        for (size_t i = 0; c->labels && i < c->n_labels; i++) {
                free(c->labels[i].key);
                free(c->labels[i].value);
        }
        free(c->labels);
        free(c);
}

static void image_clear(struct sbx_image *img) {
        strv_clear(&img->names);
        free(img->digest);
        strv_clear(&img->layers);
        image_config_free(img->config);
        memset(img, 0, sizeof(*img));
}

void sbx_image_free(struct sbx_image *img) {
        if (!img)
                return;
        image_clear(img);
        free(img);
}

void sbx_image_list_free(struct sbx_image_list *l) {
        if (!l)
                return;
        for (size_t i = 0; l->v && i < l->n; i++)
                image_clear(&l->v[i]);
        free(l->v);
        free(l);
}

void sbx_removed_images_free(struct sbx_removed_images *r) {
        if (!r)
                return;
        strv_clear(&r->names);
        free(r);
}
