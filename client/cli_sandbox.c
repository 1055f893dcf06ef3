/* cli_sandbox.c: the sandbox commands of the sbx tool: create, info, list, terminate,
 * set-timeout and history, with the JSON and text renderings of sandboxes and command
 * records they print.
 *
 * Owns nothing past one command. The JSON sandbox object (create --json, info --json,
 * list --json) has the keys id, state, owner_uid, created, created_at, deadline,
 * deadline_at, idle_timeout, ended, ended_at, end_reason, isolated, warnings, labels,
 * policy, enforcement, running_commands, queued_commands, commands_run, share_uids,
 * share_gids; times are Unix seconds with fractions plus ISO-8601 UTC strings. A
 * history record's JSON has queued_ms, the milliseconds it waited for a slot, and tty,
 * whether it ran on a terminal (sbx exec -t). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libsbx_limit_table.h"

/* ---- rendering ----------------------------------------------------------------------- */

/* A timestamp as two keys: NAME (Unix seconds, or null when 0) and NAME_at (ISO). */
static void json_time(struct json *j, const char *name, int64_t ms) {
        char key[64], iso[64];

        json_key(j, name);
        if (ms)
                json_ms_as_secs(j, ms);
        else
                json_null(j);
        snprintf(key, sizeof(key), "%s_at", name);
        json_key(j, key);
        if (ms) {
                cli_format_iso(iso, sizeof(iso), ms, true);
                json_string(j, iso);
        } else {
                json_null(j);
        }
}

/* The "limits" object of a policy: each limit given, keyed by its field's name. */
static void json_limits(struct json *j, const struct sbx_limits *l) {
        json_begin_object(j);
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                if (!libsbx_limit_given(l, t))
                        continue;
                json_key(j, t->field);
                if (t->type == LIBSBX_LIMIT_DOUBLE)
                        json_double(j, libsbx_limit_double(l, t), 6);
                else if (t->type == LIBSBX_LIMIT_BOOL)
                        json_bool(j, libsbx_limit_uint(l, t) != 0);
                else
                        json_uint(j, libsbx_limit_uint(l, t));
        }
        json_end_object(j);
}

/* Whether the sandbox has an idle timeout (SBX_IDLE_TIMEOUT_NONE and 0 say it has none). */
static bool has_idle_timeout(const struct sbx_sandbox *s) {
        return s->idle_timeout_ms && s->idle_timeout_ms != SBX_IDLE_TIMEOUT_NONE &&
               s->idle_timeout_ms <= (uint64_t)INT64_MAX;
}

static const char *network_name(enum sbx_network n) {
        return n == SBX_NETWORK_FULL ? "full" : n == SBX_NETWORK_ALLOWLIST ? "allowlist" : "none";
}

/* The "policy" object of a sandbox's JSON. */
static void json_policy(struct json *j, const struct sbx_policy *p) {
        json_begin_object(j);
        json_key(j, "writable_paths");
        json_strv(j, &p->writable_paths);
        json_key(j, "denied_read_paths");
        json_strv(j, &p->denied_read_paths);
        json_key(j, "denied_write_paths");
        json_strv(j, &p->denied_write_paths);
        json_key(j, "network");
        json_string(j, network_name(p->network));
        json_key(j, "allowed_hosts");
        json_strv(j, &p->allowed_hosts);
        json_key(j, "allowed_cidrs");
        json_strv(j, &p->allowed_cidrs);
        json_key(j, "protect_defaults");
        json_bool(j, p->protect_defaults);
        json_key(j, "inherit_environment");
        json_strv(j, &p->inherit_environment);
        json_key(j, "root_dir");
        json_string(j, p->root_dir);
        json_key(j, "limits");
        json_limits(j, &p->limits);
        json_end_object(j);
}

/* key: an array of the n ids of v. */
static void json_ids(struct json *j, const char *key, const uint32_t *v, size_t n) {
        json_key(j, key);
        json_begin_array(j);
        for (size_t i = 0; i < n; i++)
                json_uint(j, v[i]);
        json_end_array(j);
}

static void json_sandbox(struct json *j, const struct sbx_sandbox *s) {
        json_begin_object(j);
        json_key(j, "id");
        json_string(j, s->id);
        json_key(j, "state");
        json_string(j, sbx_state_name(s->state));
        json_key(j, "owner_uid");
        json_uint(j, s->owner_uid);
        json_time(j, "created", s->created_unix_ms);
        json_time(j, "deadline", s->deadline_unix_ms);
        json_key(j, "idle_timeout");
        if (has_idle_timeout(s))
                json_ms_as_secs(j, (int64_t)s->idle_timeout_ms);
        else
                json_null(j);
        json_time(j, "ended", s->ended_unix_ms);
        json_key(j, "end_reason");
        json_string(j, s->end_reason);
        json_key(j, "isolated");
        json_bool(j, s->isolated);
        json_key(j, "warnings");
        json_strv(j, &s->warnings);
        json_key(j, "labels");
        json_begin_object(j);
        for (size_t i = 0; i < s->n_labels; i++) {
                json_key(j, s->labels[i].key);
                json_string(j, s->labels[i].value);
        }
        json_end_object(j);
        json_key(j, "image");
        json_string(j, s->image);
        json_key(j, "image_digest");
        json_string(j, s->image_digest);
        json_key(j, "policy");
        json_policy(j, &s->policy);
        json_key(j, "enforcement");
        json_enforcement(j, s->enforcement, s->n_enforcement);
        json_key(j, "running_commands");
        json_uint(j, s->running_commands);
        json_key(j, "queued_commands");
        json_uint(j, s->queued_commands);
        json_key(j, "commands_run");
        json_uint(j, s->commands_run);
        json_ids(j, "share_uids", s->share_uids, s->n_share_uids);
        json_ids(j, "share_gids", s->share_gids, s->n_share_gids);
        json_key(j, "commands");
        cli_json_commands(j, s->commands, s->n_commands);
        json_end_object(j);
}

static int finish_json(struct json *j) {
        if (json_finish(j) < 0)
                return cli_error(SBX_INTERNAL, "cannot write to stdout: %s", strerror(errno));
        return 0;
}

static bool sandbox_live(const struct sbx_sandbox *s) {
        return s->state == SBX_STATE_CREATING || s->state == SBX_STATE_READY ||
               s->state == SBX_STATE_TERMINATING;
}

/* "in 299 s" style remaining time of a live sandbox, or "-". */
static void format_left(char *buf, size_t len, const struct sbx_sandbox *s) {
        int64_t left;
        if (!sandbox_live(s) || !s->deadline_unix_ms) {
                snprintf(buf, len, "-");
                return;
        }
        left = (s->deadline_unix_ms - cli_now_unix_ms() + 999) / 1000;
        snprintf(buf, len, "%llds", (long long)(left > 0 ? left : 0));
}

static void print_strv_line(const struct sbx_strv *s) {
        if (s->n == 0) {
                fputs("-", stdout);
                return;
        }
        for (size_t i = 0; i < s->n; i++) {
                if (i)
                        fputs(", ", stdout);
                cli_put_text(stdout, s->v[i]);
        }
}

/* A duration for people: "45 s", "5 min", "1.5 h". */
static void format_duration(char *buf, size_t len, int64_t ms) {
        double secs = (double)ms / 1000.0;

        if (secs < 120)
                snprintf(buf, len, "%.3g s", secs);
        else if (ms % (3600 * 1000) == 0)
                snprintf(buf, len, "%lld h", (long long)(ms / (3600 * 1000)));
        else if (secs < 2 * 3600)
                snprintf(buf, len, "%.3g min", secs / 60);
        else
                snprintf(buf, len, "%.3g h", secs / 3600);
}

/* The key of a line of print_sandbox: "key:" padded to one column. */
static void key(const char *k) {
        char b[32];

        snprintf(b, sizeof(b), "%s:", k);
        printf("%-20s ", b);
}

/* key: the strings of s, comma-separated ("-" for none). */
static void print_strv_key(const char *k, const struct sbx_strv *s) {
        key(k);
        print_strv_line(s);
        putchar('\n');
}

/* The lines of a sandbox's life: id, state, owner, created, deadline, idle timeout,
 * and how it ended. */
static void print_lifetime(sbx_client *c, const struct sbx_sandbox *s) {
        char t[64], left[32], d[32];

        key("id");
        cli_put_text(stdout, s->id);
        putchar('\n');
        key("state");
        printf("%s\n", sbx_state_name(s->state));
        key("owner_uid");
        printf("%u%s\n", s->owner_uid,
               s->owner_uid == cli_self_uid(c) ? " (you)" : " (not you: shared with you)");
        cli_format_iso(t, sizeof(t), s->created_unix_ms, true);
        key("created");
        printf("%s\n", s->created_unix_ms ? t : "-");
        cli_format_iso(t, sizeof(t), s->deadline_unix_ms, true);
        format_left(left, sizeof(left), s);
        key("deadline");
        if (s->deadline_unix_ms && sandbox_live(s))
                printf("%s (%s left)\n", t, left);
        else
                printf("%s\n", s->deadline_unix_ms ? t : "-");
        key("idle_timeout");
        if (has_idle_timeout(s)) {
                format_duration(d, sizeof(d), (int64_t)s->idle_timeout_ms);
                printf("%s\n", d);
        } else {
                printf("none\n");
        }
        if (s->ended_unix_ms || s->end_reason) {
                cli_format_iso(t, sizeof(t), s->ended_unix_ms, true);
                key("ended");
                printf("%s\n", s->ended_unix_ms ? t : "-");
                key("end_reason");
                cli_put_text(stdout, s->end_reason);
                putchar('\n');
        }
}

/* The limits line: each limit set, "none" without any. */
static void print_limits(const struct sbx_limits *l) {
        char text[LIBSBX_LIMIT_TEXT_BYTES];
        const char *sep = "";

        key("limits");
        if (!l->set)
                fputs("none", stdout);
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                if (!libsbx_limit_given(l, t))
                        continue;
                printf("%s%s=%s", sep, t->name, libsbx_limit_text(l, t, text));
                sep = " ";
        }
        putchar('\n');
}

/* The policy's lines: network, protect_defaults, the path lists, root_dir, limits. */
static void print_policy(const struct sbx_policy *p) {
        key("network");
        printf("%s\n", network_name(p->network));
        if (p->network == SBX_NETWORK_ALLOWLIST) {
                print_strv_key("allowed_hosts", &p->allowed_hosts);
                print_strv_key("allowed_cidrs", &p->allowed_cidrs);
        }
        key("protect_defaults");
        printf("%s\n", p->protect_defaults ? "yes" : "no");
        print_strv_key("writable_paths", &p->writable_paths);
        print_strv_key("denied_read_paths", &p->denied_read_paths);
        print_strv_key("denied_write_paths", &p->denied_write_paths);
        print_strv_key("inherit_environment", &p->inherit_environment);
        key("root_dir");
        cli_put_text(stdout, p->root_dir ? p->root_dir : "/ (the host's)");
        putchar('\n');
        print_limits(&p->limits);
}

/* key: the n "K=V" pairs of v (pair() reads the key or the value of the i-th),
 * comma-separated ("-" for none). */
static void print_pairs(const char *k, size_t n,
                        const char *(*pair)(const void *v, size_t i, bool value), const void *v) {
        key(k);
        if (!n)
                fputs("-", stdout);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        fputs(", ", stdout);
                cli_put_text(stdout, pair(v, i, false));
                putchar('=');
                cli_put_text(stdout, pair(v, i, true));
        }
        putchar('\n');
}

static const char *label_pair(const void *v, size_t i, bool value) {
        const struct sbx_label *l = &((const struct sbx_label *)v)[i];
        return value ? l->value : l->key;
}

static const char *enforcement_pair(const void *v, size_t i, bool value) {
        const struct sbx_enforcement *e = &((const struct sbx_enforcement *)v)[i];
        return value ? e->enforcement : e->limit;
}

/* key: the n ids of v, comma-separated. */
static void print_ids(const char *k, const uint32_t *v, size_t n) {
        key(k);
        for (size_t i = 0; i < n; i++)
                printf("%s%u", i ? ", " : "", v[i]);
        putchar('\n');
}

/* Human form of a sandbox: aligned "key: value" lines. */
static void print_sandbox(sbx_client *c, const struct sbx_sandbox *s) {
        print_lifetime(c, s);
        key("isolated");
        printf("%s\n", s->isolated ? "yes" : "no");
        key("running_commands");
        printf("%u\n", s->running_commands);
        key("queued_commands");
        printf("%u\n", s->queued_commands);
        key("commands_run");
        printf("%llu\n", (unsigned long long)s->commands_run);
        print_pairs("labels", s->n_labels, label_pair, s->labels);
        if (s->image) {
                key("image");
                cli_put_text(stdout, s->image);
                if (s->image_digest)
                        printf(" (%s)", s->image_digest);
                putchar('\n');
        }
        print_policy(&s->policy);
        print_pairs("enforcement", s->n_enforcement, enforcement_pair, s->enforcement);
        print_strv_key("warnings", &s->warnings);
        if (s->n_share_uids || s->n_share_gids) {
                print_ids("share_uids", s->share_uids, s->n_share_uids);
                print_ids("share_gids", s->share_gids, s->n_share_gids);
        }
        cli_print_commands(s->commands, s->n_commands);
}

/* "sbx: sandbox ID ends at ISO (in 5 min), or after 30 min without use; `sbx set-timeout
 * ID SECS` to change" on stderr (the idle part only when it can come first): what a
 * person at a terminal should know of a sandbox's lifetime (create and set-timeout
 * print it there). */
static void print_deadline(const struct sbx_sandbox *s) {
        char iso[64], left[32], idle[32];
        int64_t left_ms = s->deadline_unix_ms - cli_now_unix_ms();

        if (!s->deadline_unix_ms)
                return;
        cli_format_iso(iso, sizeof(iso), s->deadline_unix_ms, false);
        format_duration(left, sizeof(left), left_ms);
        fflush(stdout);
        fputs("sbx: sandbox ", stderr);
        cli_put_text(stderr, s->id);
        fprintf(stderr, " ends at %s (in %s)", iso, left);
        if (has_idle_timeout(s) && (int64_t)s->idle_timeout_ms < left_ms) {
                format_duration(idle, sizeof(idle), (int64_t)s->idle_timeout_ms);
                fprintf(stderr, ", or after %s without use", idle);
        }
        fputs("; `sbx set-timeout ", stderr);
        cli_put_text(stderr, s->id);
        fputs(" SECS` to change\n", stderr);
}

/* ---- tables ---------------------------------------------------------------------------- */

#define TABLE_MAX_COLS 8

/* Rows of text cells printed with aligned columns (the last column is not padded). */
struct table {
        size_t ncol;
        char **cells; /* row-major, sanitized copies */
        size_t nrows, cap;
        bool oom;
};

/* A copy of s with control characters shown as \xNN. */
static char *sanitize(const char *s) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        cli_put_text(f, s);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static void table_add(struct table *t, const char *const *row) {
        if (t->oom)
                return;
        if (t->nrows == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 16;
                char **nc = realloc(t->cells, cap * t->ncol * sizeof(*nc));
                if (!nc) {
                        t->oom = true;
                        return;
                }
                t->cells = nc;
                t->cap = cap;
        }
        for (size_t c = 0; c < t->ncol; c++) {
                char *s = sanitize(row[c]);
                t->cells[t->nrows * t->ncol + c] = s;
                if (!s)
                        t->oom = true;
        }
        t->nrows++;
}

static void table_print(const struct table *t) {
        size_t w[TABLE_MAX_COLS] = {0};

        for (size_t r = 0; r < t->nrows; r++)
                for (size_t c = 0; c < t->ncol; c++) {
                        const char *s = t->cells[r * t->ncol + c];
                        size_t n = s ? strlen(s) : 0;
                        if (n > w[c])
                                w[c] = n;
                }
        for (size_t r = 0; r < t->nrows; r++) {
                for (size_t c = 0; c < t->ncol; c++) {
                        const char *s = t->cells[r * t->ncol + c];
                        if (c + 1 < t->ncol)
                                printf("%-*s  ", (int)w[c], s ? s : "");
                        else
                                printf("%s\n", s ? s : "");
                }
        }
}

static void table_free(struct table *t) {
        for (size_t i = 0; i < t->nrows * t->ncol; i++)
                free(t->cells[i]);
        free(t->cells);
}

/* Prints t, unless memory ran out while it was filled, and frees it. 0 or an exit
 * status. */
static int table_finish(struct table *t) {
        int status = 0;

        if (t->oom)
                status = cli_error(SBX_INTERNAL, "out of memory");
        else
                table_print(t);
        table_free(t);
        return status;
}

/* ---- create ---------------------------------------------------------------------------- */

/* path made absolute against the current directory, without resolving symlinks (a
 * writable path is mounted at the same path inside). NULL when memory runs out. */
static char *absolute(const char *path) {
        char *cwd, *out = NULL;

        if (path[0] == '/')
                return strdup(path);
        cwd = getcwd(NULL, 0);
        if (!cwd)
                return NULL;
        while (path[0] == '.' && path[1] == '/')
                path += 2;
        if (strcmp(path, ".") == 0)
                path = "";
        if (asprintf(&out, "%s%s%s", cwd, *path && strcmp(cwd, "/") ? "/" : "", path) < 0)
                out = NULL;
        free(cwd);
        return out;
}

/* Checks "K=V" with a non-empty K. */
static bool kv_ok(const char *s) {
        const char *eq = strchr(s, '=');
        return eq && eq != s;
}

/* Everything create allocates, freed in one place. */
struct cli_create_state {
        char **writable, **deny_read, **deny_write, **env, **paths;
        size_t n_writable, n_deny_read, n_deny_write, n_env, n_paths;
        char **allow_host, **allow_cidr; /* --allow-host, --allow-cidr (argv's strings) */
        size_t n_allow_host, n_allow_cidr;
        bool network_set; /* --network given: --allow-* imply no mode */
        struct sbx_label *labels;
        size_t n_labels;
        size_t n_base_labels; /* labels[0..n_base_labels): those of the options parsed
                                 over, which are not owned here */
        uint32_t *share_uids;
        size_t n_share_uids;
        /* the option index k >= C_LIMIT of a limit's flag: its row, limit_rows[k - C_LIMIT] */
        const struct libsbx_limit *limit_rows[LIBSBX_N_LIMITS];
        size_t first_extra; /* the option index of the caller's first own option */
};

static void create_state_free(struct cli_create_state *st) {
        for (size_t i = 0; i < st->n_paths; i++)
                free(st->paths[i]);
        for (size_t i = st->n_base_labels; i < st->n_labels; i++)
                free(st->labels[i].key); /* value points into the same allocation */
        free(st->writable);
        free(st->deny_read);
        free(st->deny_write);
        free(st->env);
        free(st->paths);
        free(st->labels);
        free(st->share_uids);
        free(st->allow_host);
        free(st->allow_cidr);
}

/* Makes path absolute, remembers the copy for freeing, and appends it to v. */
static int add_path(struct cli_create_state *st, char **v, size_t *n, const char *path) {
        char *a = absolute(path);
        if (!a)
                return cli_error(SBX_INTERNAL, "cannot make '%s' absolute: %s", path,
                                 strerror(errno));
        st->paths[st->n_paths++] = a;
        v[(*n)++] = a;
        return 0;
}

/* Splits "K=V" into a label (one allocation: key, NUL, value). */
static int add_label(struct sbx_label *labels, size_t *n, const char *cmd, const char *kv) {
        char *k;
        char *eq;

        if (!kv_ok(kv))
                return cli_bad_value(cmd, "--label", kv, "expected KEY=VALUE");
        k = strdup(kv);
        if (!k)
                return cli_error(SBX_INTERNAL, "out of memory");
        eq = strchr(k, '=');
        *eq = 0;
        labels[*n].key = k;
        labels[*n].value = eq + 1;
        (*n)++;
        return 0;
}

enum {
        C_ID,
        C_TIMEOUT,
        C_IDLE,
        C_NETWORK,
        C_WRITABLE,
        C_DENY_READ,
        C_DENY_WRITE,
        C_NO_PROTECT,
        C_ENV,
        C_ROOT,
        C_LABEL,
        C_JSON,
        C_SHARE_UID,
        C_KEEP,
        C_ALLOW_HOST,
        C_ALLOW_CIDR,
        C_IMAGE,
        /* the flags of the limits (libsbx_limit_table.h) follow the options above */
        C_LIMIT,
};

/* The options of create but its limits' flags (create_spec adds those). */
static const struct cli_opt create_opts[C_LIMIT] = {
        [C_ID] = {"id", true, 0},
        [C_TIMEOUT] = {"timeout", true, 0},
        [C_IDLE] = {"idle-timeout", true, 0},
        [C_NETWORK] = {"network", true, 0},
        [C_WRITABLE] = {"writable", true, 0},
        [C_DENY_READ] = {"deny-read", true, 0},
        [C_DENY_WRITE] = {"deny-write", true, 0},
        [C_NO_PROTECT] = {"no-protect-defaults", false, 0},
        [C_ENV] = {"env", true, 0},
        [C_ROOT] = {"root", true, 0},
        [C_LABEL] = {"label", true, 0},
        [C_JSON] = {"json", false, 0},
        [C_SHARE_UID] = {"share-uid", true, 0},
        [C_KEEP] = {"keep-workspace", false, 0},
        [C_ALLOW_HOST] = {"allow-host", true, 0},
        [C_ALLOW_CIDR] = {"allow-cidr", true, 0},
        [C_IMAGE] = {"image", true, 0},
};

/* The most options a command adds to create's (cli_create_extra). */
#define CREATE_MAX_EXTRA 4

/* The options of create: create_opts, then the flag of each limit that has one (its
 * row in rows[k - C_LIMIT] for option k), then the end. Returns the index of the end. */
static size_t create_spec(struct cli_opt spec[C_LIMIT + LIBSBX_N_LIMITS + 1],
                          const struct libsbx_limit *rows[LIBSBX_N_LIMITS]) {
        size_t n = C_LIMIT;

        memcpy(spec, create_opts, sizeof(create_opts));
        for (size_t i = 0; i < LIBSBX_N_LIMITS; i++) {
                const struct libsbx_limit *t = &libsbx_limits[i];
                if (!t->flag)
                        continue;
                rows[n - C_LIMIT] = t;
                spec[n++] = (struct cli_opt){t->flag + 2, true, 0}; /* without the "--" */
        }
        spec[n] = (struct cli_opt){NULL, false, 0};
        return n;
}

/* Room in st for the lists of o and what argc arguments can add. 0 or an exit status. */
static int create_state_alloc(struct cli_create_state *st, int argc,
                              const struct sbx_create_opts *o) {
        const struct sbx_policy *p = &o->policy;
        size_t n = (size_t)argc;

        st->writable = calloc(n + p->writable_paths.n, sizeof(char *));
        st->deny_read = calloc(n + p->denied_read_paths.n, sizeof(char *));
        st->deny_write = calloc(n + p->denied_write_paths.n, sizeof(char *));
        st->env = calloc(n + o->n_env, sizeof(char *));
        st->paths = calloc(n, sizeof(char *));
        st->labels = calloc(n + o->n_labels, sizeof(*st->labels));
        st->share_uids = calloc(n + o->n_share_uids, sizeof(uint32_t));
        st->allow_host = calloc(n + p->allowed_hosts.n, sizeof(char *));
        st->allow_cidr = calloc(n + p->allowed_cidrs.n, sizeof(char *));
        if (!st->allow_host || !st->allow_cidr || !st->writable || !st->deny_read ||
            !st->deny_write || !st->env || !st->paths || !st->labels || !st->share_uids)
                return cli_error(SBX_INTERNAL, "out of memory");
        return 0;
}

/* --timeout and --idle-timeout (0 or none: no idle timeout at all; without the option
 * the daemon's default applies). 0, or an exit status. */
static int create_lifetime(int k, const char *cmd, const char *a, struct sbx_create_opts *o) {
        if (k == C_TIMEOUT) {
                if (cli_parse_secs_ms(a, &o->timeout_ms) < 0)
                        return cli_bad_value(cmd, "--timeout", a,
                                             "expected seconds, e.g. 300 or 0.5");
                return 0;
        }
        if (strcmp(a, "none") == 0)
                o->idle_timeout_ms = SBX_IDLE_TIMEOUT_NONE;
        else if (cli_parse_secs_ms(a, &o->idle_timeout_ms) < 0)
                return cli_bad_value(cmd, "--idle-timeout", a,
                                     "expected seconds, or 0 (none) for no idle timeout");
        else if (o->idle_timeout_ms == 0)
                o->idle_timeout_ms = SBX_IDLE_TIMEOUT_NONE;
        return 0;
}

/* The value a of the flag of limit t into l (its field and its bit of l->set), parsed as
 * the table says: its unit, its least value. 0, or an exit status. */
static int create_limit(const struct libsbx_limit *t, const char *cmd, const char *a,
                        struct sbx_limits *l) {
        uint64_t v;
        double d;

        switch (t->unit) {
        case LIBSBX_UNIT_BYTES:
                if (cli_parse_bytes(a, &v) < 0 || v < t->min)
                        return cli_bad_value(cmd, t->flag, a, t->hint);
                break;
        case LIBSBX_UNIT_SECONDS:
                if (cli_parse_double(a, &d) < 0 || (t->min ? d <= 0 : d < 0))
                        return cli_bad_value(cmd, t->flag, a, t->hint);
                libsbx_limit_set_double(l, t, d);
                return 0;
        case LIBSBX_UNIT_COUNT:
                if (cli_parse_uint(a, t->type == LIBSBX_LIMIT_U32 ? UINT32_MAX : UINT64_MAX, &v) <
                            0 ||
                    v < t->min)
                        return cli_bad_value(cmd, t->flag, a, t->hint);
                break;
        case LIBSBX_UNIT_SWITCH:
        default:
                return cli_error(SBX_INTERNAL, "no parser for the flag of limit %s", t->name);
        }
        libsbx_limit_set_uint(l, t, v);
        return 0;
}

/* --network none|full|allowlist. 0, or an exit status. */
static int create_network(const char *cmd, const char *a, struct sbx_policy *pol) {
        if (strcmp(a, "none") == 0)
                pol->network = SBX_NETWORK_NONE;
        else if (strcmp(a, "full") == 0)
                pol->network = SBX_NETWORK_FULL;
        else if (strcmp(a, "allowlist") == 0)
                pol->network = SBX_NETWORK_ALLOWLIST;
        else
                return cli_bad_value(cmd, "--network", a, "expected none, full or allowlist");
        return 0;
}

/* --root DIR, made absolute. 0, or an exit status. */
static int create_root(const char *a, struct sbx_create_opts *o, struct cli_create_state *st) {
        char *r = absolute(a);

        if (!r)
                return cli_error(SBX_INTERNAL, "cannot make '%s' absolute: %s", a, strerror(errno));
        st->paths[st->n_paths++] = r;
        o->policy.root_dir = r;
        return 0;
}

/* One option k of create with its value a. 0, or an exit status. */
static int create_option(int k, const char *cmd, const char *a, struct sbx_create_opts *o,
                         struct cli_create_state *st, bool *json) {
        uint64_t v;

        switch (k) {
        case C_ID:
                o->id = a;
                return 0;
        case C_TIMEOUT:
        case C_IDLE:
                return create_lifetime(k, cmd, a, o);
        case C_NETWORK:
                st->network_set = true;
                return create_network(cmd, a, &o->policy);
        case C_ALLOW_HOST:
                st->allow_host[st->n_allow_host++] = (char *)(uintptr_t)a;
                return 0;
        case C_ALLOW_CIDR:
                st->allow_cidr[st->n_allow_cidr++] = (char *)(uintptr_t)a;
                return 0;
        case C_WRITABLE:
                return add_path(st, st->writable, &st->n_writable, a);
        case C_DENY_READ:
                return add_path(st, st->deny_read, &st->n_deny_read, a);
        case C_DENY_WRITE:
                return add_path(st, st->deny_write, &st->n_deny_write, a);
        case C_NO_PROTECT:
                o->policy.protect_defaults = 0;
                return 0;
        case C_ENV:
                if (!kv_ok(a))
                        return cli_bad_value(cmd, "--env", a, "expected NAME=VALUE");
                st->env[st->n_env++] = (char *)(uintptr_t)a;
                return 0;
        case C_ROOT:
                return create_root(a, o, st);
        case C_LABEL:
                return add_label(st->labels, &st->n_labels, cmd, a);
        case C_JSON:
                *json = true;
                return 0;
        case C_SHARE_UID:
                if (cli_parse_uint(a, UINT32_MAX - 1, &v) < 0)
                        return cli_bad_value(cmd, "--share-uid", a, "expected a numeric uid");
                st->share_uids[st->n_share_uids++] = (uint32_t)v;
                return 0;
        case C_KEEP:
                o->keep_workspace = 1;
                return 0;
        case C_IMAGE:
                o->image = a;
                return 0;
        default:
                if (k >= C_LIMIT && k < C_LIMIT + LIBSBX_N_LIMITS && st->limit_rows[k - C_LIMIT])
                        return create_limit(st->limit_rows[k - C_LIMIT], cmd, a, &o->policy.limits);
                return cli_error(SBX_INTERNAL, "unhandled option %d", k);
        }
}

/* Puts the n_base items of base (size bytes each) before the *n items of v, which has
 * room for them. */
static void after_base(void *v, size_t *n, const void *base, size_t n_base, size_t size) {
        if (!n_base)
                return;
        memmove((char *)v + n_base * size, v, *n * size);
        memcpy(v, base, n_base * size);
        *n += n_base;
}

static bool has_label(const struct sbx_label *v, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].key, key) == 0)
                        return true;
        return false;
}

/* o's labels but those whose key the command line gives again, before the command
 * line's. */
static void labels_after_base(const struct sbx_create_opts *o, struct cli_create_state *st) {
        size_t kept = 0, j = 0;

        for (size_t i = 0; i < o->n_labels; i++)
                kept += !has_label(st->labels, st->n_labels, o->labels[i].key);
        memmove(st->labels + kept, st->labels, st->n_labels * sizeof(*st->labels));
        for (size_t i = 0; i < o->n_labels; i++)
                if (!has_label(st->labels + kept, st->n_labels, o->labels[i].key))
                        st->labels[j++] = o->labels[i];
        st->n_labels += kept;
        st->n_base_labels = kept;
}

/* o's lists once every option is read: those o was filled with, then the command
 * line's; o's allowlist only while the network stays allowlist. --allow-host and
 * --allow-cidr without --network make it allowlist; with another --network the daemon
 * says they need it. */
static void create_lists(struct sbx_create_opts *o, struct cli_create_state *st) {
        struct sbx_policy *p = &o->policy;

        if (!st->network_set && (st->n_allow_host || st->n_allow_cidr))
                p->network = SBX_NETWORK_ALLOWLIST;
        if (p->network == SBX_NETWORK_ALLOWLIST) {
                after_base(st->allow_host, &st->n_allow_host, p->allowed_hosts.v,
                           p->allowed_hosts.n, sizeof(char *));
                after_base(st->allow_cidr, &st->n_allow_cidr, p->allowed_cidrs.v,
                           p->allowed_cidrs.n, sizeof(char *));
        }
        after_base(st->writable, &st->n_writable, p->writable_paths.v, p->writable_paths.n,
                   sizeof(char *));
        after_base(st->deny_read, &st->n_deny_read, p->denied_read_paths.v, p->denied_read_paths.n,
                   sizeof(char *));
        after_base(st->deny_write, &st->n_deny_write, p->denied_write_paths.v,
                   p->denied_write_paths.n, sizeof(char *));
        after_base(st->env, &st->n_env, o->env, o->n_env, sizeof(char *));
        after_base(st->share_uids, &st->n_share_uids, o->share_uids, o->n_share_uids,
                   sizeof(uint32_t));
        labels_after_base(o, st);
        p->writable_paths = (struct sbx_strv){st->writable, st->n_writable};
        p->denied_read_paths = (struct sbx_strv){st->deny_read, st->n_deny_read};
        p->denied_write_paths = (struct sbx_strv){st->deny_write, st->n_deny_write};
        p->allowed_hosts = (struct sbx_strv){st->allow_host, st->n_allow_host};
        p->allowed_cidrs = (struct sbx_strv){st->allow_cidr, st->n_allow_cidr};
        o->env = (const char *const *)st->env;
        o->n_env = st->n_env;
        o->labels = st->labels;
        o->n_labels = st->n_labels;
        o->share_uids = st->share_uids;
        o->n_share_uids = st->n_share_uids;
}

/* Parses the options of create, and extra's (may be NULL), over o (pointing into st
 * then). 0, or an exit status (-1 after --help). */
static int parse_create(struct cli *cli, int argc, char **argv,
                        const struct cli_create_extra *extra, struct sbx_create_opts *o,
                        struct cli_create_state *st, bool *json) {
        const char *cmd = argv[0];
        struct cli_opt spec[C_LIMIT + LIBSBX_N_LIMITS + CREATE_MAX_EXTRA + 1];
        struct cli_opts p;
        size_t n_extra = 0;
        int k, rc;

        rc = create_state_alloc(st, argc, o);
        if (rc)
                return rc;
        st->first_extra = create_spec(spec, st->limit_rows);
        while (extra && extra->opts[n_extra].name) {
                if (n_extra == CREATE_MAX_EXTRA)
                        return cli_error(SBX_INTERNAL, "sbx %s has too many options", cmd);
                spec[st->first_extra + n_extra] = extra->opts[n_extra];
                n_extra++;
        }
        spec[st->first_extra + n_extra] = (struct cli_opt){NULL, false, 0};
        cli_opts_init(&p, cli, argc, argv, spec);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, cmd);
                        return -1;
                }
                if (k == CLI_OPT_POS && !extra)
                        return cli_usage_error("unexpected argument '%s' for sbx create", p.arg);
                if (k == CLI_OPT_POS || (size_t)k >= st->first_extra)
                        rc = extra->on_opt(extra->userdata,
                                           k == CLI_OPT_POS ? k : k - (int)st->first_extra, p.arg);
                else
                        rc = create_option(k, cmd, p.arg, o, st, json);
                if (rc)
                        return rc;
        }
        create_lists(o, st);
        return 0;
}

int cli_parse_create(struct cli *cli, int argc, char **argv, const struct cli_create_extra *extra,
                     struct cli_create_args *a) {
        a->json = false;
        a->state = calloc(1, sizeof(*a->state));
        if (!a->state)
                return cli_error(SBX_INTERNAL, "out of memory");
        return parse_create(cli, argc, argv, extra, &a->opts, a->state, &a->json);
}

void cli_create_args_free(struct cli_create_args *a) {
        if (a->state)
                create_state_free(a->state);
        free(a->state);
        a->state = NULL;
}

/* 1 when create's NOT_FOUND says its image (a registry reference, not a local source
 * nor a digest) has not been pulled. */
static bool pull_first(sbx_client *c, const char *image) {
        static const char *const local[] = {"oci:", "oci-archive:", "docker-archive:", "dir:",
                                            "sha256:", "/"};
        const char *msg = sbx_error_message(c);

        if (!image || !msg || !strstr(msg, "no image "))
                return false;
        for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
                if (strncmp(image, local[i], strlen(local[i])) == 0)
                        return false;
        return true;
}

int cli_create(struct cli *cli, int argc, char **argv, struct sbx_sandbox **ret, bool *ret_json) {
        struct cli_create_args a;
        sbx_client *c = NULL;
        enum sbx_code rc;
        int status;

        *ret = NULL;
        sbx_create_opts_init(&a.opts);
        status = cli_parse_create(cli, argc, argv, NULL, &a);
        if (status == 0)
                status = cli_connect(cli, &c);
        rc = status == 0 ? sbx_create(c, &a.opts, ret) : SBX_OK;
        /* An image not pulled yet is pulled first, as `docker run` does. */
        if (rc == SBX_NOT_FOUND && pull_first(c, a.opts.image)) {
                rc = cli_image_fetch(c, a.opts.image);
                sbx_set_call_timeout_ms(c, CLI_CALL_TIMEOUT_MS);
                if (rc == SBX_OK)
                        rc = sbx_create(c, &a.opts, ret);
        }
        if (rc != SBX_OK)
                status = cli_client_error(c, rc);
        if (ret_json)
                *ret_json = a.json;
        sbx_close(c);
        cli_create_args_free(&a);
        return status < 0 ? 0 : status;
}

int cmd_create(struct cli *cli, int argc, char **argv) {
        struct sbx_sandbox *s = NULL;
        bool json = false;
        int status = cli_create(cli, argc, argv, &s, &json);

        if (s && json) {
                struct json j;
                json_init(&j, stdout);
                json_sandbox(&j, s);
                status = finish_json(&j);
        } else if (s) {
                cli_put_text(stdout, s->id);
                putchar('\n');
                for (size_t i = 0; i < s->warnings.n; i++)
                        cli_warn("%s", s->warnings.v[i]);
        }
        if (s && isatty(STDERR_FILENO))
                print_deadline(s);
        sbx_sandbox_free(s);
        return status;
}

/* ---- info, terminate, set-timeout --------------------------------------------------------- */

static const struct cli_opt json_only_opts[] = {{"json", false, 0}, {NULL, false, 0}};

/* Parses flags (spec: options without a value) and exactly npos positionals into pos;
 * flags[k] is set for spec[k] given. 0, -1 (help shown) or an exit status. */
static int parse_simple(struct cli *cli, int argc, char **argv, const struct cli_opt *spec,
                        size_t npos, const char **pos, bool *flags) {
        struct cli_opts p;
        size_t got = 0;
        int k;

        cli_opts_init(&p, cli, argc, argv, spec);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, argv[0]);
                        return -1;
                }
                if (k == CLI_OPT_POS) {
                        if (got == npos)
                                return cli_usage_error("unexpected argument '%s' for sbx %s", p.arg,
                                                       argv[0]);
                        pos[got++] = p.arg;
                        continue;
                }
                flags[k] = true;
        }
        if (got < npos)
                return cli_usage_error("sbx %s needs %zu argument%s", argv[0], npos,
                                       npos > 1 ? "s" : "");
        return 0;
}

int cmd_info(struct cli *cli, int argc, char **argv) {
        const char *id;
        bool json = false;
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_simple(cli, argc, argv, json_only_opts, 1, &id, &json);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        rc = sbx_get(c, id, &s);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json) {
                struct json j;
                json_init(&j, stdout);
                json_sandbox(&j, s);
                status = finish_json(&j);
                cli_warn_not_owner(c, id, s->owner_uid);
        } else {
                print_sandbox(c, s);
        }
        sbx_sandbox_free(s);
        sbx_close(c);
        return status;
}

/* A sandbox a bulk terminate could not end. */
struct bulk_failure {
        char *id;
        enum sbx_code code;
        char *message;
};

/* The result of a bulk terminate. */
struct bulk {
        char **done;
        size_t n_done;
        struct bulk_failure *failed;
        size_t n_failed, cap_done, cap_failed;
        bool oom;
};

static bool bulk_has(const struct bulk *b, const char *id) {
        for (size_t i = 0; i < b->n_done; i++)
                if (strcmp(b->done[i], id) == 0)
                        return true;
        for (size_t i = 0; i < b->n_failed; i++)
                if (strcmp(b->failed[i].id, id) == 0)
                        return true;
        return false;
}

/* Terminates sandbox id and notes how it went in b (a failure is printed on stderr). */
static void bulk_one(sbx_client *c, struct bulk *b, const char *id, bool print) {
        enum sbx_code rc = sbx_terminate(c, id, NULL);

        if (rc == SBX_OK) {
                if (b->n_done == b->cap_done) {
                        size_t cap = b->cap_done ? b->cap_done * 2 : 16;
                        char **nv = realloc(b->done, cap * sizeof(*nv));
                        if (!nv) {
                                b->oom = true;
                                return;
                        }
                        b->done = nv;
                        b->cap_done = cap;
                }
                if (!(b->done[b->n_done] = strdup(id))) {
                        b->oom = true;
                        return;
                }
                b->n_done++;
                if (print) {
                        fputs("terminated ", stdout);
                        cli_put_text(stdout, id);
                        putchar('\n');
                }
                return;
        }
        {
                const char *m = sbx_error_message(c);
                char *w = cli_cli_words(m && *m ? m : "the call failed without a message");
                if (b->n_failed == b->cap_failed) {
                        size_t cap = b->cap_failed ? b->cap_failed * 2 : 4;
                        struct bulk_failure *nv = realloc(b->failed, cap * sizeof(*nv));
                        if (!nv) {
                                free(w);
                                b->oom = true;
                                return;
                        }
                        b->failed = nv;
                        b->cap_failed = cap;
                }
                cli_error_line(rc, "%s", w ? w : "the call failed (out of memory)");
                b->failed[b->n_failed].id = strdup(id);
                b->failed[b->n_failed].code = rc;
                b->failed[b->n_failed].message = w;
                if (!b->failed[b->n_failed].id) {
                        free(w);
                        b->oom = true;
                        return;
                }
                b->n_failed++;
        }
}

static void bulk_free(struct bulk *b) {
        for (size_t i = 0; i < b->n_done; i++)
                free(b->done[i]);
        for (size_t i = 0; i < b->n_failed; i++) {
                free(b->failed[i].id);
                free(b->failed[i].message);
        }
        free(b->done);
        free(b->failed);
}

/* Terminates the caller's own live sandboxes that carry every label of lo, page by
 * page, until a listing shows none left that was not tried. 0 or an exit status. */
static int bulk_select(sbx_client *c, struct sbx_list_opts *lo, struct bulk *b, bool print) {
        struct sbx_hello *h = NULL;
        enum sbx_code hrc = sbx_hello(c, &h);

        /* Who "you" are is the daemon's word (over ssh://, the remote user), never a
         * guess: without it nothing is selected. */
        sbx_hello_free(h);
        if (hrc != SBX_OK)
                return cli_client_error(c, hrc);
        lo->has_owner_uid = 1;
        lo->owner_uid = cli_self_uid(c);
        lo->limit = SBX_MAX_LIST_LIMIT;
        for (;;) {
                struct sbx_sandbox_list *l = NULL;
                enum sbx_code rc = sbx_list(c, lo, &l);
                size_t tried = 0;

                if (rc != SBX_OK)
                        return cli_client_error(c, rc);
                for (size_t i = 0; i < l->n && !b->oom; i++) {
                        const struct sbx_sandbox *s = l->v[i];
                        /* The daemon filters by owner; a daemon that did not is kept to
                         * the rule here too: only the caller's own. */
                        if (s->owner_uid != lo->owner_uid || !sandbox_live(s) || bulk_has(b, s->id))
                                continue;
                        bulk_one(c, b, s->id, print);
                        tried++;
                }
                sbx_sandbox_list_free(l);
                if (b->oom)
                        return cli_error(SBX_INTERNAL, "out of memory");
                if (tried == 0)
                        return 0;
        }
}

enum { T_JSON, T_ALL, T_LABEL };

/* The command line of terminate: IDs, or --all and --label filters. */
struct terminate_args {
        struct sbx_label *labels;
        const char **ids;
        size_t n_labels, n_ids;
        bool json, all;
};

static void terminate_args_free(struct terminate_args *a) {
        for (size_t i = 0; i < a->n_labels; i++)
                free(a->labels[i].key);
        free(a->labels);
        free(a->ids);
}

/* Parses terminate's command line into a (allocated here). 0, -1 (help shown) or an
 * exit status. */
static int parse_terminate(struct cli *cli, int argc, char **argv, struct terminate_args *a) {
        static const struct cli_opt opts[] = {[T_JSON] = {"json", false, 0},
                                              [T_ALL] = {"all", false, 0},
                                              [T_LABEL] = {"label", true, 0},
                                              {NULL, false, 0}};
        struct cli_opts p;
        int k, status = 0;

        a->labels = calloc((size_t)argc, sizeof(*a->labels));
        a->ids = calloc((size_t)argc, sizeof(*a->ids));
        if (!a->labels || !a->ids)
                return cli_error(SBX_INTERNAL, "out of memory");
        cli_opts_init(&p, cli, argc, argv, opts);
        while (!status && (k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        status = CLI_EXIT_ERROR;
                else if (k == CLI_OPT_HELP)
                        status = -1;
                else if (k == CLI_OPT_POS)
                        a->ids[a->n_ids++] = p.arg;
                else if (k == T_JSON)
                        a->json = true;
                else if (k == T_ALL)
                        a->all = true;
                else
                        status = add_label(a->labels, &a->n_labels, argv[0], p.arg);
        }
        if (status == -1)
                cli_usage(stdout, argv[0]);
        else if (!status && a->n_ids && (a->all || a->n_labels))
                status = cli_usage_error("sbx terminate takes sandbox IDs or --all / --label, "
                                         "not both");
        else if (!status && !a->n_ids && !a->all && !a->n_labels)
                status = cli_usage_error("sbx terminate needs a sandbox ID, --label K=V or --all");
        return status;
}

/* terminate --json: {"terminated": [IDS], "failed": [{"id", "error": {code, message}}]}. */
static int json_bulk(const struct bulk *b) {
        struct json j;

        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "terminated");
        json_begin_array(&j);
        for (size_t i = 0; i < b->n_done; i++)
                json_string(&j, b->done[i]);
        json_end_array(&j);
        json_key(&j, "failed");
        json_begin_array(&j);
        for (size_t i = 0; i < b->n_failed; i++) {
                json_begin_object(&j);
                json_key(&j, "id");
                json_string(&j, b->failed[i].id);
                json_key(&j, "error");
                json_begin_object(&j);
                json_key(&j, "code");
                json_string(&j, sbx_code_name(b->failed[i].code));
                json_key(&j, "message");
                json_string(&j, b->failed[i].message);
                json_end_object(&j);
                json_end_object(&j);
        }
        json_end_array(&j);
        json_end_object(&j);
        return finish_json(&j);
}

/* Terminates the sandboxes a names (each ID once, or those --all and --label select)
 * into b, printing each when print. 0 or an exit status. */
static int terminate_many(sbx_client *c, const struct terminate_args *a, struct bulk *b,
                          bool print) {
        struct sbx_list_opts lo = {0};

        if (!a->n_ids) {
                lo.labels = a->labels;
                lo.n_labels = a->n_labels;
                return bulk_select(c, &lo, b, print);
        }
        for (size_t i = 0; i < a->n_ids && !b->oom; i++)
                if (!bulk_has(b, a->ids[i]))
                        bulk_one(c, b, a->ids[i], print);
        return b->oom ? cli_error(SBX_INTERNAL, "out of memory") : 0;
}

int cmd_terminate(struct cli *cli, int argc, char **argv) {
        struct terminate_args a = {0};
        struct bulk b = {0};
        sbx_client *c = NULL;
        enum sbx_code rc;
        int status;

        status = parse_terminate(cli, argc, argv, &a);
        if (!status)
                status = cli_connect(cli, &c);
        if (!status && a.n_ids == 1 && !a.json) {
                /* One ID without --json: the classic form, silent on success. */
                rc = sbx_terminate(c, a.ids[0], NULL);
                if (rc != SBX_OK)
                        status = cli_client_error(c, rc);
        } else if (!status) {
                status = terminate_many(c, &a, &b, !a.json);
                if (!status && a.json) {
                        status = json_bulk(&b);
                } else if (!status) {
                        printf("terminated %zu sandbox%s", b.n_done, b.n_done == 1 ? "" : "es");
                        if (b.n_failed)
                                printf(", %zu failed", b.n_failed);
                        putchar('\n');
                }
                if (!status && b.n_failed)
                        status = CLI_EXIT_ERROR;
        }
        terminate_args_free(&a);
        bulk_free(&b);
        sbx_close(c);
        return status < 0 ? 0 : status;
}

int cmd_set_timeout(struct cli *cli, int argc, char **argv) {
        const char *pos[2];
        bool json = false;
        uint64_t ms;
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_simple(cli, argc, argv, json_only_opts, 2, pos, &json);

        if (status)
                return status < 0 ? 0 : status;
        if (cli_parse_secs_ms(pos[1], &ms) < 0)
                return cli_bad_value(argv[0], "SECS", pos[1], "expected seconds, e.g. 600 or 0.5");
        if (ms == 0)
                return cli_bad_value(argv[0], "SECS", pos[1],
                                     "expected seconds > 0; `sbx terminate` ends a sandbox now");
        if ((status = cli_connect(cli, &c)))
                return status;
        rc = sbx_set_timeout(c, pos[0], ms, &s);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json && s) {
                struct json j;
                json_init(&j, stdout);
                json_sandbox(&j, s);
                status = finish_json(&j);
        }
        if (!status && s && isatty(STDERR_FILENO))
                print_deadline(s);
        sbx_sandbox_free(s);
        sbx_close(c);
        return status;
}

int cmd_restore(struct cli *cli, int argc, char **argv) {
        const char *pos[2];
        bool json = false;
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_simple(cli, argc, argv, json_only_opts, 2, pos, &json);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        rc = sbx_restore(c, pos[0], pos[1], &s);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json && s) {
                struct json j;
                json_init(&j, stdout);
                json_sandbox(&j, s);
                status = finish_json(&j);
        } else if (s) {
                for (size_t i = 0; i < s->warnings.n; i++)
                        cli_warn("%s", s->warnings.v[i]);
        }
        sbx_sandbox_free(s);
        sbx_close(c);
        return status;
}

/* ---- list -------------------------------------------------------------------------------- */

/* One row of list's table for s: ID, STATE, OWNER, CREATED, DEADLINE (time left),
 * LABELS. */
static void list_row(struct table *t, const struct sbx_sandbox *s) {
        char owner[16], created[64], left[32], *lab = NULL;
        size_t lab_len = 0;
        FILE *f = open_memstream(&lab, &lab_len);
        const char *row[6];

        snprintf(owner, sizeof(owner), "%u", s->owner_uid);
        cli_format_iso(created, sizeof(created), s->created_unix_ms, false);
        format_left(left, sizeof(left), s);
        for (size_t m = 0; f && m < s->n_labels; m++)
                fprintf(f, "%s%s=%s", m ? "," : "", s->labels[m].key, s->labels[m].value);
        if (f)
                fclose(f);
        row[0] = s->id;
        row[1] = sbx_state_name(s->state);
        row[2] = owner;
        row[3] = s->created_unix_ms ? created : "-";
        row[4] = left;
        row[5] = lab && *lab ? lab : "-";
        table_add(t, row);
        free(lab);
}

/* list --json: an array of sandboxes. 0 or an exit status. */
static int json_list(const struct sbx_sandbox_list *l) {
        struct json j;

        json_init(&j, stdout);
        json_begin_array(&j);
        for (size_t i = 0; i < l->n; i++)
                json_sandbox(&j, l->v[i]);
        json_end_array(&j);
        return finish_json(&j);
}

/* list's output: a JSON array of sandboxes, or a table. 0 or an exit status. */
static int print_list(const struct sbx_sandbox_list *l, bool json) {
        static const char *const head[] = {"ID", "STATE", "OWNER", "CREATED", "DEADLINE", "LABELS"};
        struct table t = {.ncol = 6};
        int status;

        if (json)
                return json_list(l);
        table_add(&t, head);
        for (size_t i = 0; i < l->n; i++)
                list_row(&t, l->v[i]);
        status = table_finish(&t);
        if (l->truncated)
                cli_warn("the list was cut at %zu sandboxes", l->n);
        return status;
}

int cmd_list(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {
                {"json", false, 0}, {"all", false, 0}, {"label", true, 0}, {NULL, false, 0}};
        struct sbx_list_opts lo = {0};
        struct sbx_label *labels = calloc((size_t)argc, sizeof(*labels));
        size_t n_labels = 0;
        struct sbx_sandbox_list *l = NULL;
        struct cli_opts p;
        bool json = false;
        sbx_client *c = NULL;
        enum sbx_code rc;
        int k, status = 0;

        if (!labels)
                return cli_error(SBX_INTERNAL, "out of memory");
        cli_opts_init(&p, cli, argc, argv, opts);
        while (!status && (k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        status = CLI_EXIT_ERROR;
                else if (k == CLI_OPT_HELP)
                        status = -1;
                else if (k == CLI_OPT_POS)
                        status = cli_usage_error("unexpected argument '%s' for sbx list", p.arg);
                else if (k == 0)
                        json = true;
                else if (k == 1)
                        lo.include_ended = 1;
                else
                        status = add_label(labels, &n_labels, argv[0], p.arg);
        }
        if (status == -1)
                cli_usage(stdout, argv[0]);
        if (!status)
                status = cli_connect(cli, &c);
        if (!status) {
                lo.labels = labels;
                lo.n_labels = n_labels;
                rc = sbx_list(c, &lo, &l);
                status = rc != SBX_OK ? cli_client_error(c, rc) : print_list(l, json);
        }
        for (size_t i = 0; i < n_labels; i++)
                free(labels[i].key);
        free(labels);
        sbx_sandbox_list_free(l);
        sbx_close(c);
        return status < 0 ? 0 : status;
}

/* ---- history ----------------------------------------------------------------------------- */

/* The outcome of a record: "running" for a command that has not ended (a daemon before
 * SBX_OUTCOME_RUNNING sent no outcome for one). */
static const char *record_outcome(const struct sbx_command_record *r) {
        if (r->outcome == SBX_OUTCOME_UNSPECIFIED && !r->ended_unix_ms)
                return sbx_outcome_name(SBX_OUTCOME_RUNNING);
        return sbx_outcome_name(r->outcome);
}

static void json_record(struct json *j, const struct sbx_command_record *r) {
        json_begin_object(j);
        json_key(j, "seq");
        json_uint(j, r->seq);
        json_key(j, "command_id");
        json_string(j, r->command_id);
        json_key(j, "argv");
        json_strv(j, &r->argv);
        json_key(j, "cwd");
        json_string(j, r->cwd);
        json_key(j, "caller_uid");
        json_uint(j, r->caller_uid);
        json_key(j, "caller_pid");
        json_int(j, r->caller_pid);
        json_key(j, "client_name");
        json_string(j, r->client_name);
        json_time(j, "started", r->started_unix_ms);
        json_time(j, "ended", r->ended_unix_ms);
        json_key(j, "outcome");
        json_string(j, record_outcome(r));
        json_key(j, "exit_code");
        json_int_or_null(j, r->has_exit_code, r->exit_code);
        json_key(j, "signal");
        json_int_or_null(j, r->has_signal, r->signal);
        json_key(j, "duration");
        json_double(j, r->duration, 6);
        json_key(j, "queued_ms");
        json_uint(j, r->queued_ms);
        json_key(j, "background");
        json_bool(j, r->background);
        json_key(j, "tty");
        json_bool(j, r->tty);
        json_key(j, "peak_memory_bytes");
        json_uint(j, r->peak_memory_bytes);
        json_key(j, "stdout_bytes");
        json_uint(j, r->stdout_bytes);
        json_key(j, "stderr_bytes");
        json_uint(j, r->stderr_bytes);
        json_key(j, "stdout_truncated");
        json_bool(j, r->stdout_truncated);
        json_key(j, "stderr_truncated");
        json_bool(j, r->stderr_truncated);
        json_end_object(j);
}

/* Every page of sandbox id's history, following next_after_seq until a page says there
 * is no more, into *pages (n of them; each freed by the caller). 0 or an exit status. */
static int history_pages(sbx_client *c, const char *id, struct sbx_history ***pages, size_t *n) {
        uint64_t after = 0, next;

        for (;;) {
                struct sbx_history *h = NULL, **np;
                enum sbx_code rc = sbx_history(c, id, after, SBX_MAX_HISTORY_LIMIT, &h);
                if (rc != SBX_OK)
                        return cli_client_error(c, rc);
                np = realloc(*pages, (*n + 1) * sizeof(**pages));
                if (!np) {
                        sbx_history_free(h);
                        return cli_error(SBX_INTERNAL, "out of memory");
                }
                *pages = np;
                np[(*n)++] = h;
                next = h->next_after_seq ? h->next_after_seq : (h->n ? h->v[h->n - 1].seq : 0);
                /* A daemon that caps pages below what we ask may not say `truncated`;
                 * a full default-sized page is worth one more (possibly empty) call. */
                if (h->n == 0 || next <= after ||
                    (!h->truncated && h->n < SBX_DEFAULT_HISTORY_LIMIT))
                        return 0;
                after = next;
        }
}

/* One row of history's table for r: SEQ, STARTED, WAITED (for a slot), DURATION,
 * OUTCOME, EXIT, ARGV. */
static void history_row(struct table *t, const struct sbx_command_record *r) {
        char seq[24], started[64], waited[32], dur[32], ex[24], *av = NULL;
        size_t av_len = 0;
        FILE *f = open_memstream(&av, &av_len);
        const char *row[7];

        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)r->seq);
        cli_format_iso(started, sizeof(started), r->started_unix_ms, false);
        if (r->queued_ms)
                snprintf(waited, sizeof(waited), "%.3fs", (double)r->queued_ms / 1000.0);
        else
                snprintf(waited, sizeof(waited), "-");
        if (r->ended_unix_ms || r->duration > 0)
                snprintf(dur, sizeof(dur), "%.3fs", r->duration);
        else
                snprintf(dur, sizeof(dur), "-");
        if (r->has_exit_code)
                snprintf(ex, sizeof(ex), "%d", r->exit_code);
        else if (r->has_signal)
                snprintf(ex, sizeof(ex), "sig %d", r->signal);
        else
                snprintf(ex, sizeof(ex), "-");
        for (size_t m = 0; f && m < r->argv.n; m++)
                fprintf(f, "%s%s", m ? " " : "", r->argv.v[m]);
        if (f)
                fclose(f);
        row[0] = seq;
        row[1] = r->started_unix_ms ? started : "-";
        row[2] = waited;
        row[3] = dur;
        row[4] = record_outcome(r);
        row[5] = ex;
        row[6] = av ? av : "";
        table_add(t, row);
        free(av);
}

/* history --json: an array of the records of every page. 0 or an exit status. */
static int json_history(struct sbx_history *const *pages, size_t n_pages) {
        struct json j;

        json_init(&j, stdout);
        json_begin_array(&j);
        for (size_t pg = 0; pg < n_pages; pg++)
                for (size_t i = 0; i < pages[pg]->n; i++)
                        json_record(&j, &pages[pg]->v[i]);
        json_end_array(&j);
        return finish_json(&j);
}

/* history's output: a JSON array of records, or a table. 0 or an exit status. */
static int print_history(struct sbx_history *const *pages, size_t n_pages, bool json) {
        static const char *const head[] = {"SEQ",     "STARTED", "WAITED", "DURATION",
                                           "OUTCOME", "EXIT",    "ARGV"};
        struct table t = {.ncol = 7};

        if (json)
                return json_history(pages, n_pages);
        table_add(&t, head);
        for (size_t pg = 0; pg < n_pages; pg++)
                for (size_t i = 0; i < pages[pg]->n; i++)
                        history_row(&t, &pages[pg]->v[i]);
        return table_finish(&t);
}

static void json_connection(struct json *j, const struct sbx_connection_record *r) {
        json_begin_object(j);
        json_key(j, "seq");
        json_uint(j, r->seq);
        json_time(j, "started", r->started_unix_ms);
        json_time(j, "ended", r->ended_unix_ms);
        json_key(j, "host");
        json_string(j, r->host);
        json_key(j, "port");
        json_uint(j, r->port);
        json_key(j, "address");
        json_string(j, r->address);
        json_key(j, "allowed");
        json_bool(j, r->allowed);
        json_key(j, "reason");
        json_string(j, r->reason);
        json_key(j, "method");
        json_string(j, r->method);
        json_key(j, "bytes_sent");
        json_uint(j, r->bytes_sent);
        json_key(j, "bytes_received");
        json_uint(j, r->bytes_received);
        json_end_object(j);
}

/* One row: SEQ, STARTED, VERDICT, METHOD, HOST:PORT, ADDRESS, SENT, RECEIVED, REASON. */
static void connection_row(struct table *t, const struct sbx_connection_record *r) {
        char seq[24], started[64], hp[300], sent[24], recv[24];
        const char *row[9];

        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)r->seq);
        cli_format_iso(started, sizeof(started), r->started_unix_ms, false);
        snprintf(hp, sizeof(hp), "%s:%u", r->host ? r->host : "-", r->port);
        snprintf(sent, sizeof(sent), "%llu", (unsigned long long)r->bytes_sent);
        snprintf(recv, sizeof(recv), "%llu", (unsigned long long)r->bytes_received);
        row[0] = seq;
        row[1] = started;
        row[2] = r->allowed ? "allowed" : "refused";
        row[3] = r->method ? r->method : "-";
        row[4] = hp;
        row[5] = r->address ? r->address : "-";
        row[6] = sent;
        row[7] = recv;
        row[8] = r->reason ? r->reason : (r->ended_unix_ms ? "" : "(open)");
        table_add(t, row);
}

/* One page of a kind of records, as fetched (struct sbx_connections, struct sbx_forwards). */
struct records_page {
        void *page;
        size_t n;
        uint64_t next_after_seq;
        int truncated;
};

/* A kind of records history lists besides commands: its columns, how a page is fetched,
 * shown (a table row, a JSON object) and freed. */
struct records_kind {
        const char *const *head;
        size_t ncol;
        enum sbx_code (*fetch)(sbx_client *c, const char *id, uint64_t after,
                               struct records_page *p);
        void (*row)(struct table *t, const void *page, size_t i);
        void (*json)(struct json *j, const void *page, size_t i);
        void (*free)(void *page);
};

static enum sbx_code fetch_connections(sbx_client *c, const char *id, uint64_t after,
                                       struct records_page *p) {
        struct sbx_connections *h = NULL;
        enum sbx_code rc = sbx_connections(c, id, after, SBX_MAX_HISTORY_LIMIT, &h);

        if (h)
                *p = (struct records_page){h, h->n, h->next_after_seq, h->truncated};
        return rc;
}

static void connection_row_of(struct table *t, const void *page, size_t i) {
        connection_row(t, &((const struct sbx_connections *)page)->v[i]);
}

static void connection_json_of(struct json *j, const void *page, size_t i) {
        json_connection(j, &((const struct sbx_connections *)page)->v[i]);
}

static void connections_free(void *page) {
        sbx_connections_free(page);
}

static const char *const connection_head[] = {"SEQ",     "STARTED", "VERDICT",  "METHOD", "HOST",
                                              "ADDRESS", "SENT",    "RECEIVED", "REASON"};
static const struct records_kind connections_kind = {
        connection_head, 9, fetch_connections, connection_row_of, connection_json_of,
        connections_free};

static void json_forward(struct json *j, const struct sbx_forward_record *r) {
        json_begin_object(j);
        json_key(j, "seq");
        json_uint(j, r->seq);
        json_time(j, "opened", r->opened_unix_ms);
        json_time(j, "closed", r->closed_unix_ms);
        json_key(j, "port");
        json_uint(j, r->port);
        json_key(j, "address");
        json_string(j, r->address);
        json_key(j, "caller_uid");
        json_uint(j, r->caller_uid);
        json_key(j, "caller_pid");
        json_uint(j, (uint64_t)(r->caller_pid > 0 ? r->caller_pid : 0));
        json_key(j, "client");
        json_string(j, r->client_name);
        json_key(j, "bytes_in");
        json_uint(j, r->bytes_in);
        json_key(j, "bytes_out");
        json_uint(j, r->bytes_out);
        json_key(j, "reason");
        json_string(j, r->reason);
        json_end_object(j);
}

/* One row: SEQ, OPENED, PORT, UID, CLIENT, IN, OUT, REASON. */
static void forward_row(struct table *t, const struct sbx_forward_record *r) {
        char seq[24], opened[64], port[16], uid[16], in[24], out[24];
        const char *row[8];

        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)r->seq);
        cli_format_iso(opened, sizeof(opened), r->opened_unix_ms, false);
        snprintf(port, sizeof(port), "%u", r->port);
        snprintf(uid, sizeof(uid), "%u", r->caller_uid);
        snprintf(in, sizeof(in), "%llu", (unsigned long long)r->bytes_in);
        snprintf(out, sizeof(out), "%llu", (unsigned long long)r->bytes_out);
        row[0] = seq;
        row[1] = opened;
        row[2] = port;
        row[3] = uid;
        row[4] = r->client_name ? r->client_name : "-";
        row[5] = in;
        row[6] = out;
        row[7] = r->reason ? r->reason : (r->closed_unix_ms ? "" : "(open)");
        table_add(t, row);
}

static enum sbx_code fetch_forwards(sbx_client *c, const char *id, uint64_t after,
                                    struct records_page *p) {
        struct sbx_forwards *h = NULL;
        enum sbx_code rc = sbx_forwards(c, id, after, SBX_MAX_HISTORY_LIMIT, &h);

        if (h)
                *p = (struct records_page){h, h->n, h->next_after_seq, h->truncated};
        return rc;
}

static void forward_row_of(struct table *t, const void *page, size_t i) {
        forward_row(t, &((const struct sbx_forwards *)page)->v[i]);
}

static void forward_json_of(struct json *j, const void *page, size_t i) {
        json_forward(j, &((const struct sbx_forwards *)page)->v[i]);
}

static void forwards_free(void *page) {
        sbx_forwards_free(page);
}

static const char *const forward_head[] = {"SEQ", "OPENED", "PORT", "UID",
                                           "CLIENT", "IN", "OUT", "REASON"};
static const struct records_kind forwards_kind = {forward_head, 8, fetch_forwards,
                                                  forward_row_of, forward_json_of, forwards_free};

/* history --connections, --forwards: every page of a kind of records, as a table or a
 * JSON array. */
static int history_records(struct cli *cli, const char *id, bool json,
                           const struct records_kind *k) {
        struct table t = {.ncol = k->ncol};
        struct json j;
        uint64_t after = 0;
        sbx_client *c;
        int status;

        if ((status = cli_connect(cli, &c)))
                return status;
        for (;;) {
                struct records_page p = {NULL, 0, 0, 0};
                enum sbx_code rc = k->fetch(c, id, after, &p);
                if (rc != SBX_OK && after == 0) {
                        /* Nothing printed but the error: one JSON document, or none. */
                        status = cli_client_error(c, rc);
                        sbx_close(c);
                        return status;
                }
                if (rc != SBX_OK) {
                        status = cli_client_error(c, rc);
                        break;
                }
                if (after == 0 && json) {
                        json_init(&j, stdout);
                        json_begin_array(&j);
                } else if (after == 0) {
                        table_add(&t, k->head);
                }
                for (size_t i = 0; i < p.n; i++) {
                        if (json)
                                k->json(&j, p.page, i);
                        else
                                k->row(&t, p.page, i);
                }
                k->free(p.page);
                if (p.n == 0 || !p.truncated || p.next_after_seq <= after)
                        break;
                after = p.next_after_seq;
        }
        sbx_close(c);
        if (json) {
                json_end_array(&j);
                int js = finish_json(&j);
                return status ? status : js;
        }
        int ts = table_finish(&t);
        return status ? status : ts;
}

/* history's flags: --json; --connections for the proxy's records of an allowlist
 * sandbox, --forwards for the streams to its ports, instead of its commands. */
enum { HISTORY_JSON, HISTORY_CONNECTIONS, HISTORY_FORWARDS };
static const struct cli_opt history_opts[] = {{"json", false, 0},
                                              {"connections", false, 0},
                                              {"forwards", false, 0},
                                              {NULL, false, 0}};

int cmd_history(struct cli *cli, int argc, char **argv) {
        const char *id = NULL;
        bool flags[3] = {false, false, false};
        struct sbx_history **pages = NULL;
        size_t n_pages = 0;
        sbx_client *c;
        int status = parse_simple(cli, argc, argv, history_opts, 1, &id, flags);
        bool json = flags[HISTORY_JSON];

        if (status)
                return status < 0 ? 0 : status;
        if (flags[HISTORY_CONNECTIONS] && flags[HISTORY_FORWARDS])
                return cli_usage_error("history: --connections and --forwards are two "
                                       "lists; ask for one");
        if (flags[HISTORY_CONNECTIONS])
                return history_records(cli, id, json, &connections_kind);
        if (flags[HISTORY_FORWARDS])
                return history_records(cli, id, json, &forwards_kind);
        if ((status = cli_connect(cli, &c)))
                return status;
        status = history_pages(c, id, &pages, &n_pages);
        if (!status)
                status = print_history(pages, n_pages, json);
        for (size_t pg = 0; pg < n_pages; pg++)
                sbx_history_free(pages[pg]);
        free(pages);
        sbx_close(c);
        return status;
}
