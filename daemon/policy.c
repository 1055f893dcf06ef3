/* policy.c: the effective policy of a request and the view of a sandbox; see policy.h.
 *
 * The effective policy is what the sandbox really gets: defaults filled in, the
 * lifetime capped, the host paths opened with the caller's rights and canonical (a
 * write is judged by where it lands), every bound checked. It is recorded with the
 * sandbox and reported back to clients. The view (what is hidden and read-only) is
 * built from it when the sandbox is set up, from the shared expansion of the
 * credentials of protect.h (credcache.h) and the placeholders of writable repositories
 * (placeholder.h). Called by the sandbox modules (sandbox.c, warm.c, sbxtab.c);
 * tests/check_policy.c calls it directly. */
#include "policy.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "cgroup.h"
#include "credcache.h"
#include "egress.h"
#include "egressrule.h"
#include "disk.h"
#include "etcpasswd.h"
#include "init/user.h"
#include "pathset.h"
#include "placeholder.h"
#include "protect.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* Environment variables passed in from the daemon's own environment by default:
 * secret-free, and only those that describe the host rather than whoever started the
 * daemon. The locale and the time zone are the host's settings. Not PATH: the daemon's
 * would carry its starter's directories (~/.pyenv/shims, ~/.cargo/bin: hidden inside,
 * or meaningless there); commands get the standard PATH of command.c instead, unless
 * the creator or the command passes one. Not TERM: commands have no terminal (a new
 * session, pipes), and the daemon's describes the terminal it was started from. */
static char *default_inherit[] = {"LANG", "LC_*", "TZ"};

/* Environment every command gets unless its sandbox's creator sets the name, in env or
 * by inheriting it (a command's own env overrides either): the sandbox user's name, as
 * in its passwd entry (init/user.h), and an address that git takes for the author's and
 * the committer's when none is configured (their name then comes from the entry's
 * GECOS field). Not GIT_AUTHOR_NAME and its kin: those would override a
 * `git config user.name` made inside. The .invalid domain reaches nobody (RFC 2606). */
#define PROXY_URL    "http://127.0.0.1:3128" /* SBX_EGRESS_PORT */
#define PROXY_BYPASS "localhost,127.0.0.1,::1"
_Static_assert(SBX_EGRESS_PORT == 3128, "PROXY_URL names SBX_EGRESS_PORT");

static const char *const default_env[] = {"USER=" USER_NAME, "LOGNAME=" USER_NAME,
                                          "EMAIL=" USER_NAME "@sbxd.invalid"};

/* The most uids, and the most gids, a sandbox may be shared with (check_lists). */
#define SHARE_MAX 64u

/* 1 when p is dir or lies below it (both canonical). */
static int at_or_below(const char *dir, const char *p) {
        size_t n = strlen(dir);
        if (strcmp(dir, "/") == 0)
                return 1;
        return strncmp(dir, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* The path inside the view of a sandbox whose root is the host directory root
 * (canonical) for the host path p: p itself for the host's /, p below root made
 * relative to it, NULL when p is not in the view. Allocated. */
static char *view_of(const char *root, const char *p) {
        size_t n = strlen(root);
        if (strcmp(root, "/") == 0)
                return strdup(p);
        if (strncmp(root, p, n) != 0 || (p[n] != '\0' && p[n] != '/'))
                return NULL;
        return strdup(p[n] ? p + n : "/");
}

/* ---- the view --------------------------------------------------------------------------- */

void policy_view_clear(struct policy_view *v) {
        pathset_unref(v->hidden);
        pathset_unref(v->hidden_shared);
        pathset_unref(v->watched_shared);
        pathset_unref(v->watched);
        pathset_unref(v->protected_paths);
        pathset_unref(v->made_dirs);
        pathset_unref(v->made_files);
        free(v->made_dirs_as);
        free(v->made_files_as);
        memset(v, 0, sizeof(*v));
}

/* Adds the view path of each host path of list that is in the view of root. */
static void add_translated(struct pathset_list *s, const char *root, char *const *list, size_t n) {
        size_t i;
        for (i = 0; i < n; i++) {
                char *v = view_of(root, list[i]);
                if (v && strcmp(v, "/") != 0 && !pathset_list_has(s, v))
                        pathset_list_add(s, v);
                else
                        free(v);
        }
}

/* The protected names of one writable path w (canonical): those that exist are kept
 * read-only; in a repository (.git a directory, whatever it holds: sandboxed code may
 * have emptied it), the parts git would follow are made when missing and kept
 * read-only too (placeholders, see placeholder.h). A placeholder that a live sandbox
 * made, or that an earlier daemon left, is made (and removed) again rather than taken
 * for the owner's. */
static void add_protected(const char *w, struct pathset_list *prot, struct pathset_list *dirs,
                          struct pathset_list *files) {
        char p[PATH_MAX];
        struct stat st;
        size_t i;

        snprintf(p, sizeof(p), "%s/.git", w);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                placeholder_list(w, dirs, files);
        } else if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                /* A worktree's or a submodule's "gitdir: PATH" file: where git goes. */
                pathset_list_add(prot, strdup(p));
        }
        for (i = 0; i < PROTECT_N(protect_writable_names); i++) {
                snprintf(p, sizeof(p), "%s/%s", w, protect_writable_names[i]);
                if (lstat(p, &st) == 0 && !S_ISLNK(st.st_mode) && !pathset_list_has(dirs, p) &&
                    !pathset_list_has(files, p))
                        pathset_list_add(prot, strdup(p));
        }
}

/* The daemon's directories (hostpath.h), hidden in every sandbox whatever its policy.
 * An image's sandbox sees the host's tree only in its writable paths (pol's): those of
 * them that lie in one. */
static void add_daemons(struct sbxd *d, struct pathset_list *s, const char *root, int image,
                        const Sbx__V1__Policy *pol) {
        char *dirs[2] = {NULL, NULL};
        size_t n = hostpath_daemons(d, dirs), i, j, k = 0;

        for (i = 0; i < n; i++) {
                for (j = 0; image && pol && j < pol->n_writable_paths; j++)
                        if (at_or_below(pol->writable_paths[j], dirs[i]))
                                break;
                if (!image || (pol && j < pol->n_writable_paths)) {
                        char *t = dirs[k];
                        dirs[k++] = dirs[i];
                        dirs[i] = t;
                }
        }
        add_translated(s, root, dirs, k);
        free(dirs[0]);
        free(dirs[1]);
}

int policy_view_build(struct sbxd *d, const Sbx__V1__CreateSandbox *spec, struct policy_view *ret) {
        const Sbx__V1__Policy *pol = spec->policy;
        const char *root = pol && pol->root_dir && pol->root_dir[0] ? pol->root_dir : "/";
        struct pathset_list hidden = {0}, watched = {0}, prot = {0}, dirs = {0}, files = {0};
        struct pathset *all = NULL, *exposed = NULL;
        int image = spec->image && spec->image[0];
        size_t i, j;

        memset(ret, 0, sizeof(*ret));
        /* An image's root holds nothing of the host's: its daemons' paths and credentials
         * are hidden where the host's tree is seen (writable paths), not in the image. */
        add_daemons(d, &hidden, root, image, pol);
        for (i = 0; pol && i < pol->n_denied_read_paths; i++)
                if (!pathset_list_has(&hidden, pol->denied_read_paths[i]))
                        pathset_list_add(&hidden, strdup(pol->denied_read_paths[i]));
        if (pol && pol->protect_defaults) {
                if (credcache_get(d, &all, &exposed) < 0)
                        goto oom;
                if (image) {
                        /* Nothing of the host's but what writable paths bring (below). */
                } else if (strcmp(root, "/") == 0) {
                        ret->hidden_shared = pathset_ref(exposed);
                        ret->watched_shared = pathset_ref(all);
                } else {
                        /* Below a root_dir: the same paths in its view, watched there. */
                        add_translated(&hidden, root, exposed->v, exposed->n);
                        add_translated(&watched, root, all->v, all->n);
                }
                for (i = 0; i < pol->n_writable_paths; i++) {
                        const char *w = pol->writable_paths[i];
                        struct stat st;
                        /* Inside a writable path the sandbox acts as its owner (idmapped):
                         * every credential there is hidden, readable by others or not. */
                        for (j = 0; j < all->n; j++)
                                if (at_or_below(w, all->v[j]) && lstat(all->v[j], &st) == 0 &&
                                    !pathset_list_has(&hidden, all->v[j]))
                                        pathset_list_add(&hidden, strdup(all->v[j]));
                        add_protected(w, &prot, &dirs, &files);
                }
        }
        ret->hidden = pathset_freeze(&hidden);
        ret->watched = pathset_freeze(&watched);
        ret->protected_paths = pathset_freeze(&prot);
        ret->made_dirs = pathset_freeze(&dirs);
        ret->made_files = pathset_freeze(&files);
        if (ret->hidden && ret->watched && ret->protected_paths && ret->made_dirs &&
            ret->made_files)
                return 0;
oom:
        pathset_list_free(&hidden);
        pathset_list_free(&watched);
        pathset_list_free(&prot);
        pathset_list_free(&dirs);
        pathset_list_free(&files);
        policy_view_clear(ret);
        return -ENOMEM;
}

/* The hidden path that p (a view path) is at or below, or NULL. */
static const char *hidden_above(const struct policy_view *v, const char *p) {
        const struct pathset *sets[3] = {v->hidden, v->watched_shared, v->watched};
        size_t i, k;
        for (k = 0; k < 3; k++)
                for (i = 0; sets[k] && i < sets[k]->n; i++)
                        if (at_or_below(sets[k]->v[i], p))
                                return sets[k]->v[i];
        return NULL;
}

/* ---- the effective policy -------------------------------------------------------------- */

void policy_objects_clear(struct policy_objects *o) {
        size_t i;
        hostpath_clear(&o->root);
        for (i = 0; i < o->n_writable; i++)
                hostpath_clear(&o->writable[i]);
        free(o->writable);
        memset(o, 0, sizeof(*o));
}

static int check_count(const char *what, size_t n, char *err, size_t errlen) {
        if (n > SBX_MAX_POLICY_PATHS) {
                snprintf(err, errlen, "too many %s (%zu, at most %u)", what, n,
                         SBX_MAX_POLICY_PATHS);
                return -EINVAL;
        }
        return 0;
}

/* Resolves denied paths as the caller sees them (a path they cannot reach, or that
 * does not exist, is kept as given: nothing of it is revealed). With a root_dir they
 * name paths of the view and are kept as given. */
static int resolve_denied(struct sbxd *d, const struct caller *k, const char *what, int host_root,
                          char **in, size_t n, struct pathset_list *arena, char ***ret, char *err,
                          size_t errlen) {
        char **out;
        size_t i;
        int r = check_count(what, n, err, errlen);

        if (r < 0)
                return r;
        out = calloc(n ? n : 1, sizeof(*out));
        if (!out || !pathset_list_add(arena, (char *)out))
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                struct hostpath h;
                char e[256];
                if (!in[i] || in[i][0] != '/' || strlen(in[i]) >= SBX_PATH_MAX_BYTES) {
                        snprintf(err, errlen,
                                 "%s '%.200s' must be an absolute path shorter than %u "
                                 "bytes",
                                 what, in[i] ? in[i] : "", SBX_PATH_MAX_BYTES);
                        return -EINVAL;
                }
                out[i] = in[i];
                if (!host_root)
                        continue;
                r = hostpath_open(d, k, what, in[i], HOSTPATH_LOOKUP, &h, e, sizeof(e));
                if (r == 0) {
                        out[i] = pathset_list_add(arena, h.path);
                        h.path = NULL;
                        if (!out[i])
                                return -ENOMEM;
                } else if (r == -ENOMEM) {
                        return r;
                }
        }
        *ret = out;
        return 0;
}

/* Opens each writable path for the caller (write access) into objs. */
static int open_writable(struct sbxd *d, const struct caller *k, Sbx__V1__Policy *pol,
                         struct pathset_list *arena, struct policy_objects *objs, char *err,
                         size_t errlen) {
        char **out;
        size_t i;
        int r = check_count("writable paths", pol->n_writable_paths, err, errlen);

        if (r < 0)
                return r;
        out = calloc(pol->n_writable_paths + 1, sizeof(*out));
        objs->writable = calloc(pol->n_writable_paths + 1, sizeof(*objs->writable));
        if (!out || !pathset_list_add(arena, (char *)out) || !objs->writable)
                return -ENOMEM;
        for (i = 0; i < pol->n_writable_paths; i++) {
                struct hostpath *h = &objs->writable[objs->n_writable];
                r = hostpath_open(d, k, "writable path", pol->writable_paths[i], HOSTPATH_WRITE, h,
                                  err, errlen);
                if (r < 0)
                        return r;
                objs->n_writable++;
                if (strcmp(h->path, "/") == 0) {
                        snprintf(err, errlen,
                                 "writable path '%.200s' is the host's root: the whole "
                                 "host cannot be writable",
                                 pol->writable_paths[i]);
                        return -EINVAL;
                }
                if (!S_ISDIR(h->mode) && !S_ISREG(h->mode)) {
                        snprintf(err, errlen,
                                 "writable path '%.200s' is neither a directory nor a "
                                 "regular file",
                                 pol->writable_paths[i]);
                        return -EINVAL;
                }
                out[i] = h->path;
        }
        pol->writable_paths = out;
        return 0;
}

/* Opens root_dir for the caller (read and search) into objs; the host's / needs none. */
static int open_root(struct sbxd *d, const struct caller *k, Sbx__V1__Policy *pol,
                     struct policy_objects *objs, char *err, size_t errlen) {
        int r;

        if (!pol->root_dir || !pol->root_dir[0] || strcmp(pol->root_dir, "/") == 0) {
                pol->root_dir = (char *)"/";
                return 0;
        }
        r = hostpath_open(d, k, "root_dir", pol->root_dir, HOSTPATH_ROOT, &objs->root, err, errlen);
        if (r < 0)
                return r;
        if (strcmp(objs->root.path, "/") == 0)
                hostpath_clear(&objs->root);
        pol->root_dir = objs->root.path ? objs->root.path : (char *)"/";
        return 0;
}

/* A writable path inside a hidden one would be hidden with it, and a root inside a
 * hidden one would show what is hidden: both are refused, naming both paths. */
static int check_view(struct sbxd *d, const Sbx__V1__CreateSandbox *eff, const char *req_root,
                      char *err, size_t errlen) {
        const Sbx__V1__Policy *pol = eff->policy;
        struct policy_view v;
        const char *h;
        size_t i;
        int r = policy_view_build(d, eff, &v);

        if (r < 0)
                return r;
        for (i = 0; i < pol->n_writable_paths; i++) {
                h = hidden_above(&v, pol->writable_paths[i]);
                if (h) {
                        snprintf(err, errlen,
                                 "writable path '%.200s' lies inside '%.200s', which this sandbox "
                                 "hides (denied_read_paths, the daemon's own directories, or a "
                                 "credential of protect_defaults); a denial beats a permission, so "
                                 "it would be hidden: drop one of them",
                                 pol->writable_paths[i], h);
                        r = -EINVAL;
                        goto out;
                }
        }
        if (strcmp(pol->root_dir, "/") != 0 && pol->protect_defaults) {
                struct pathset *secrets = NULL;
                (void)credcache_get(d, &secrets, NULL);
                for (i = 0; secrets && i < secrets->n; i++)
                        if (at_or_below(secrets->v[i], pol->root_dir)) {
                                snprintf(err, errlen,
                                         "root_dir '%.200s' lies inside '%.200s', a credential "
                                         "protect_defaults hides; use another root or "
                                         "--no-protect-defaults",
                                         req_root, secrets->v[i]);
                                r = -EACCES;
                                goto out;
                        }
        }
out:
        policy_view_clear(&v);
        return r;
}

/* Where the bounds of d's sandboxes' limits come from (bounds.h): its flags, its host,
 * and whether RLIMIT_NPROC holds the process limit (no pids cgroup, root mode: each
 * sandbox has a uid of its own), as enforce_apply will decide. */
static void bound_sources(const struct sbxd *d, struct bounds_ctx *ret) {
        ret->cfg = d->cfg;
        ret->host = &d->features.limits;
        ret->processes_by_rlimit = !cgroup_env_has(d->cgroups, CG_PIDS) && !d->features.rootless;
}

/* The lifetime: timeout_ms (absent: the daemon's default; 0 is refused) at most the
 * daemon's maximum, and the idle timeout (absent: the daemon's default; 0: none) no
 * longer. A value above the maximum is refused, never lowered. */
static int check_lifetime(struct sbxd *d, const Sbx__V1__CreateSandbox *req,
                          Sbx__V1__CreateSandbox *eff, char *err, size_t errlen) {
        struct limit_bound b;
        int r;

        if (req->has_timeout_ms && req->timeout_ms == 0) {
                snprintf(err, errlen,
                         "timeout_ms must be greater than 0 (omit it for the default "
                         "of %llu ms)",
                         (unsigned long long)d->cfg->default_sandbox_timeout_ms);
                return -EINVAL;
        }
        bounds_lifetime(d->cfg, &b);
        if (req->has_timeout_ms && (r = bounds_check(&b, req->timeout_ms, err, errlen)) < 0)
                return r;
        bounds_idle(d->cfg, &b);
        if (req->has_idle_timeout_ms && req->idle_timeout_ms &&
            (r = bounds_check(&b, req->idle_timeout_ms, err, errlen)) < 0)
                return r;
        eff->has_timeout_ms = 1;
        eff->timeout_ms =
                req->has_timeout_ms ? req->timeout_ms : d->cfg->default_sandbox_timeout_ms;
        if (!req->has_idle_timeout_ms) {
                eff->has_idle_timeout_ms = 1;
                eff->idle_timeout_ms = d->cfg->default_idle_timeout_ms;
        }
        return 0;
}

/* The lists of the request itself: labels, env entries, the uids and gids shared. */
static int check_lists(const Sbx__V1__CreateSandbox *req, char *err, size_t errlen) {
        size_t i;

        if (req->n_labels > SBX_MAX_LABELS) {
                snprintf(err, errlen, "too many labels (%zu, at most %u)", req->n_labels,
                         SBX_MAX_LABELS);
                return -EINVAL;
        }
        for (i = 0; i < req->n_labels; i++) {
                const Sbx__V1__Label *l = req->labels[i];
                if (!l->key || !l->key[0] || strlen(l->key) > SBX_LABEL_MAX_BYTES ||
                    (l->value && strlen(l->value) > SBX_LABEL_MAX_BYTES)) {
                        snprintf(err, errlen,
                                 "label %zu: the key must be 1 to %u bytes and the value "
                                 "at most %u",
                                 i, SBX_LABEL_MAX_BYTES, SBX_LABEL_MAX_BYTES);
                        return -EINVAL;
                }
        }
        if (req->n_env > SBX_MAX_ENV) {
                snprintf(err, errlen, "too many env entries (at most %u)", SBX_MAX_ENV);
                return -EINVAL;
        }
        for (i = 0; i < req->n_env; i++) {
                const char *eq = strchr(req->env[i], '=');
                if (!eq || eq == req->env[i]) {
                        snprintf(err, errlen, "env entry '%.100s' is not NAME=VALUE", req->env[i]);
                        return -EINVAL;
                }
        }
        if (req->n_share_uids > SHARE_MAX || req->n_share_gids > SHARE_MAX) {
                snprintf(err, errlen, "at most %u share_uids and %u share_gids", SHARE_MAX,
                         SHARE_MAX);
                return -EINVAL;
        }
        return 0;
}

/* The policy's switches: network (none, full or allowlist, default none), protect_defaults
 * (default on) and inherit_environment (default default_inherit unless set, even to
 * nothing), checked and filled into pol. req_pol is the request's (may be NULL). */
static int fill_switches(const Sbx__V1__Policy *req_pol, Sbx__V1__Policy *pol, char *err,
                         size_t errlen) {
        if (pol->has_network && pol->network != SBX__V1__NETWORK_MODE__NETWORK_NONE &&
            pol->network != SBX__V1__NETWORK_MODE__NETWORK_FULL &&
            pol->network != SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST) {
                snprintf(err, errlen, "network must be none, full or allowlist");
                return -EINVAL;
        }
        pol->has_network = 1;
        pol->has_protect_defaults = 1;
        if (!req_pol || !req_pol->has_protect_defaults)
                pol->protect_defaults = 1;
        if ((!pol->has_inherit_environment_set || !pol->inherit_environment_set) &&
            pol->n_inherit_environment == 0) {
                pol->n_inherit_environment = PROTECT_N(default_inherit);
                pol->inherit_environment = default_inherit;
        }
        pol->has_inherit_environment_set = 1;
        pol->inherit_environment_set = 1;
        if (pol->n_inherit_environment > SBX_MAX_ENV) {
                snprintf(err, errlen, "inherit_environment has too many names");
                return -EINVAL;
        }
        return 0;
}

/* The limits every sandbox gets unless its policy sets them: /tmp's size (at most the
 * daemon's --max-tmp), no core dumps, a process limit, and the command caps (the
 * daemon's --max-commands and --max-queued; command.c enforces those, init never sees
 * them). No sandbox without a process limit (a fork bomb would take every pid of the
 * host): its ceiling, as a default only where it holds (a pids cgroup, or RLIMIT_NPROC
 * of a uid of the sandbox's own), not to warn of a limit nobody asked for. The
 * request's own values were checked against their bounds (bounds.h): none is changed. */
static void fill_limits(struct sbxd *d, Sbx__V1__Limits *lim) {
        struct bounds_ctx c;
        struct limit_bound b;

        bound_sources(d, &c);
        if (!lim->has_tmp_bytes) {
                lim->has_tmp_bytes = 1;
                lim->tmp_bytes = SBX_DEFAULT_TMP_BYTES < d->cfg->max_tmp_bytes
                                         ? SBX_DEFAULT_TMP_BYTES
                                         : d->cfg->max_tmp_bytes;
        }
        bounds_of(&c, LIMIT_PROCESSES, lim, &b);
        if (d->cfg->max_processes && !lim->has_processes &&
            (cgroup_env_has(d->cgroups, CG_PIDS) || !d->features.rootless)) {
                lim->has_processes = 1;
                lim->processes = (uint32_t)b.ceiling;
        }
        if (!lim->has_core_dumps) {
                lim->has_core_dumps = 1;
                lim->core_dumps = 0;
        }
        if (!lim->has_commands) {
                lim->has_commands = 1;
                lim->commands = d->cfg->max_commands_per_sandbox;
        }
        if (!lim->has_queued_commands) {
                lim->has_queued_commands = 1;
                lim->queued_commands = d->cfg->max_queued_per_sandbox;
        }
}

/* NETWORK_ALLOWLIST's lists, only with network allowlist: each allowed_hosts entry is
 * validated and replaced by its normal form (egressrule.h: lowercase, no IP literals),
 * each allowed_cidrs entry by its normal form "ADDRESS/PREFIX" (host bits below the
 * prefix are cleared, not refused: "10.1.2.3/8" becomes "10.0.0.0/8"); at most
 * EGRESS_MAX_HOSTS and EGRESS_MAX_CIDRS entries. The arrays go into arena. */
static int check_allowlist(Sbx__V1__Policy *pol, struct pathset_list *arena, char *err,
                           size_t errlen) {
        char **hosts, **cidrs;
        size_t i;

        if (pol->network != SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST) {
                if (pol->n_allowed_hosts == 0 && pol->n_allowed_cidrs == 0)
                        return 0;
                snprintf(err, errlen, "allowed_hosts and allowed_cidrs need network allowlist");
                return -EINVAL;
        }
        if (pol->n_allowed_hosts > EGRESS_MAX_HOSTS || pol->n_allowed_cidrs > EGRESS_MAX_CIDRS) {
                snprintf(err, errlen, "at most %u allowed hosts and %u allowed CIDRs",
                         EGRESS_MAX_HOSTS, EGRESS_MAX_CIDRS);
                return -EINVAL;
        }
        hosts = calloc(pol->n_allowed_hosts + 1, sizeof(*hosts));
        cidrs = calloc(pol->n_allowed_cidrs + 1, sizeof(*cidrs));
        if (!pathset_list_add(arena, (char *)hosts) || !pathset_list_add(arena, (char *)cidrs))
                return -ENOMEM;
        for (i = 0; i < pol->n_allowed_hosts; i++) {
                char buf[EGRESS_PATTERN_MAX_BYTES];
                int r = egressrule_host_normalize(pol->allowed_hosts[i], buf, sizeof(buf), err,
                                                  errlen);
                if (r < 0)
                        return r;
                if (!(hosts[i] = pathset_list_add(arena, strdup(buf))))
                        return -ENOMEM;
        }
        for (i = 0; i < pol->n_allowed_cidrs; i++) {
                struct egressrule_cidr c;
                char buf[EGRESS_CIDR_MAX_BYTES];
                int r = egressrule_cidr_parse(pol->allowed_cidrs[i], &c, err, errlen);
                if (r < 0)
                        return r;
                egressrule_cidr_format(&c, buf, sizeof(buf));
                if (!(cidrs[i] = pathset_list_add(arena, strdup(buf))))
                        return -ENOMEM;
        }
        pol->allowed_hosts = hosts;
        pol->allowed_cidrs = cidrs;
        return 0;
}

/* The proxy's address for the commands of an allowlist sandbox, unless the creator sets
 * the name (a command's own env overrides it too). Loopback itself goes around it. */
static const char *const proxy_env[] = {"HTTP_PROXY=" PROXY_URL,  "HTTPS_PROXY=" PROXY_URL,
                                        "ALL_PROXY=" PROXY_URL,   "http_proxy=" PROXY_URL,
                                        "https_proxy=" PROXY_URL, "all_proxy=" PROXY_URL,
                                        "NO_PROXY=" PROXY_BYPASS, "no_proxy=" PROXY_BYPASS};

/* The default disk limit of the daemon (--default-disk, --default-disk-inodes) where
 * the policy sets none. */
static void fill_disk_defaults(struct sbxd *d, Sbx__V1__Limits *lim) {
        if (!lim->has_disk_bytes && d->cfg->default_disk_bytes) {
                lim->has_disk_bytes = 1;
                lim->disk_bytes = d->cfg->default_disk_bytes;
        }
        if (lim->has_disk_bytes && !lim->has_disk_inodes && d->cfg->default_disk_inodes &&
            d->cfg->default_disk_inodes <= lim->disk_bytes / DISK_BYTES_PER_INODE) {
                lim->has_disk_inodes = 1;
                lim->disk_inodes = d->cfg->default_disk_inodes;
        }
}

/* What the size limit of /workspace (disk.h) needs besides its bounds (bounds.h): no
 * more than is free where images and quotas take it from, and on a host where only a
 * tmpfs enforces it (which ends with the sandbox) no keep_workspace. 0, -ENOSPC or
 * -EINVAL. */
static int fill_disk(struct sbxd *d, const Sbx__V1__CreateSandbox *req, Sbx__V1__Limits *lim,
                     char *err, size_t errlen) {
        if (!lim->has_disk_bytes)
                return 0;
        if ((d->features.disk_mech == DISK_MECH_IMAGE || d->features.disk_mech == DISK_MECH_QUOTA) &&
            !d->cfg->disk_overcommit) {
                /* Images are sparse and quotas promise what the filesystem may not have:
                 * a limit larger than what is free there would let the sandbox fill the
                 * host's disk instead of its own. (Several limits together may still
                 * promise more than is free: docs/sandboxes.md, "Disk limit".) */
                uint64_t free_bytes;
                if (disk_free_bytes(d->cfg->state_dir, &free_bytes) == 0 &&
                    lim->disk_bytes > free_bytes) {
                        snprintf(err, errlen,
                                 "disk %llu bytes is more than the %llu bytes free on the "
                                 "filesystem of sbxd's state directory (%s): ask for less, or "
                                 "free space there (or start sbxd with --disk-overcommit)",
                                 (unsigned long long)lim->disk_bytes,
                                 (unsigned long long)free_bytes, d->cfg->state_dir);
                        return -ENOSPC;
                }
        }
        if (d->features.disk_mech == DISK_MECH_TMPFS && req->has_keep_workspace &&
            req->keep_workspace) {
                int asked =
                        req->policy && req->policy->limits && req->policy->limits->has_disk_bytes;
                snprintf(err, errlen,
                         "keep_workspace cannot be combined with a disk limit%s on this host: "
                         "its /workspace is a tmpfs (rootless or no loop devices), which ends "
                         "with the sandbox",
                         asked ? "" : " (sbxd --default-disk gives every sandbox one)");
                return -EINVAL;
        }
        return 0;
}

/* CreateSandbox.image: a name (the image itself is looked for at creation, sbimage.h),
 * not with a root_dir. */
static int check_image(const Sbx__V1__CreateSandbox *req, char *err, size_t errlen) {
        const Sbx__V1__Policy *asked = req->policy;

        if (!req->image || !req->image[0])
                return 0;
        if (strlen(req->image) > SBX_IMAGE_NAME_MAX_BYTES) {
                snprintf(err, errlen, "image: a name of at most %u bytes",
                         SBX_IMAGE_NAME_MAX_BYTES);
                return -EINVAL;
        }
        if (strncmp(req->image, "dir:", 4) == 0 && req->image[4] != '/') {
                snprintf(err, errlen, "image '%.200s': dir: needs an absolute path (the daemon "
                                      "does not know your working directory)",
                         req->image);
                return -EINVAL;
        }
        if (asked && asked->root_dir && asked->root_dir[0] && strcmp(asked->root_dir, "/") != 0) {
                snprintf(err, errlen, "image and root_dir: give one or the other (the image "
                                      "is the sandbox's root)");
                return -EINVAL;
        }
        return 0;
}

/* The checks that need no host path, in the order their refusals are reported:
 * lifetime, labels, environment, sharing, network, inherit_environment, the limits
 * (with the daemon's default disk: bounds.h), the disk's room, the image's name and
 * what it allows beside it; fills their defaults into eff, pol and lim. */
static int check_plain(struct sbxd *d, const Sbx__V1__CreateSandbox *req,
                       Sbx__V1__CreateSandbox *eff, Sbx__V1__Policy *pol, Sbx__V1__Limits *lim,
                       struct pathset_list *arena, char *err, size_t errlen) {
        int r = check_lifetime(d, req, eff, err, errlen);

        if (r == 0)
                r = check_lists(req, err, errlen);
        if (r == 0)
                r = fill_switches(req->policy, pol, err, errlen);
        if (r == 0)
                r = check_allowlist(pol, arena, err, errlen);
        if (r == 0) {
                struct bounds_ctx c;
                bound_sources(d, &c);
                fill_disk_defaults(d, lim);
                r = bounds_check_sandbox(&c, lim, err, errlen);
        }
        if (r == 0)
                r = fill_disk(d, req, lim, err, errlen);
        if (r == 0)
                fill_limits(d, lim);
        if (r == 0)
                r = check_image(req, err, errlen);
        return r;
}

/* 1 when the inherit_environment pattern pat ("NAME", or "PREFIX*") takes the variable
 * of the "NAME=VALUE" entry kv (as command.c matches them). */
static int inherits(const char *pat, const char *kv) {
        size_t n = strlen(pat), name = strcspn(kv, "=");

        if (n > 0 && pat[n - 1] == '*')
                return strncmp(kv, pat, n - 1) == 0;
        return n == name && strncmp(kv, pat, n) == 0;
}

/* Adds to eff's env each entry of default_env (n_def of them) whose name the creator
 * neither sets in env nor inherits from the daemon. The array is allocated into arena.
 * Returns 0 or -ENOMEM. */
static int add_default_env(Sbx__V1__CreateSandbox *eff, const Sbx__V1__Policy *pol,
                           struct pathset_list *arena, const char *const *defs, size_t n_def) {
        size_t i, j, n = eff->n_env;
        char **env = calloc(n + n_def + 1, sizeof(*env));

        if (!env || !pathset_list_add(arena, (char *)env))
                return -ENOMEM;
        for (i = 0; i < n; i++)
                env[i] = eff->env[i];
        for (i = 0; i < n_def; i++) {
                size_t name = strcspn(defs[i], "=") + 1;
                int given = 0;
                for (j = 0; j < eff->n_env && !given; j++)
                        given = strncmp(eff->env[j], defs[i], name) == 0;
                for (j = 0; j < pol->n_inherit_environment && !given; j++)
                        given = inherits(pol->inherit_environment[j], defs[i]);
                if (!given)
                        env[n++] = (char *)(uintptr_t)defs[i];
        }
        eff->env = env;
        eff->n_env = n;
        return 0;
}

/* The effective request while it is built: copies of the request's messages whose
 * fields are replaced (defaults, canonical paths; eff.policy points to pol, pol.limits
 * to lim), what was allocated for them (arena), and the host objects opened. */
struct effective {
        Sbx__V1__CreateSandbox eff;
        Sbx__V1__Policy pol;
        Sbx__V1__Limits lim;
        struct policy_objects objs;
        struct pathset_list arena;
        const char *req_root; /* root_dir as requested, for messages */
};

static void effective_init(struct effective *e, const Sbx__V1__CreateSandbox *req, char *id) {
        static const Sbx__V1__Policy pol_init = SBX__V1__POLICY__INIT;
        static const Sbx__V1__Limits lim_init = SBX__V1__LIMITS__INIT;

        memset(e, 0, sizeof(*e));
        e->eff = *req;
        e->pol = req->policy ? *req->policy : pol_init;
        e->lim = e->pol.limits ? *e->pol.limits : lim_init;
        e->eff.id = id;
        e->eff.image_digest = NULL; /* the daemon's to say (sbxtab.c) */
        e->eff.policy = &e->pol;
        e->pol.limits = &e->lim;
        e->req_root = e->pol.root_dir && e->pol.root_dir[0] ? e->pol.root_dir : "/";
}

/* Opens root_dir and the writable paths for caller k, and resolves the denied paths
 * as k sees them; each list is replaced by its canonical paths. */
static int resolve_paths(struct sbxd *d, const struct caller *k, struct effective *e, char *err,
                         size_t errlen) {
        Sbx__V1__Policy *pol = &e->pol;
        int r = open_root(d, k, pol, &e->objs, err, errlen);

        if (r == 0)
                r = open_writable(d, k, pol, &e->arena, &e->objs, err, errlen);
        if (r == 0)
                r = resolve_denied(d, k, "denied read path", strcmp(pol->root_dir, "/") == 0,
                                   pol->denied_read_paths, pol->n_denied_read_paths, &e->arena,
                                   &pol->denied_read_paths, err, errlen);
        if (r == 0)
                r = resolve_denied(d, k, "denied write path", strcmp(pol->root_dir, "/") == 0,
                                   pol->denied_write_paths, pol->n_denied_write_paths, &e->arena,
                                   &pol->denied_write_paths, err, errlen);
        return r;
}

/* Packs eff into *ret_packed (malloc'd) and *ret_len. Returns 0 or -ENOMEM. */
static int pack_effective(const Sbx__V1__CreateSandbox *eff, uint8_t **ret_packed,
                          size_t *ret_len) {
        size_t len = sbx__v1__create_sandbox__get_packed_size(eff);
        uint8_t *buf = malloc(len ? len : 1);

        if (!buf)
                return -ENOMEM;
        sbx__v1__create_sandbox__pack(eff, buf);
        *ret_packed = buf;
        *ret_len = len;
        return 0;
}

int policy_effective(struct sbxd *d, const Sbx__V1__CreateSandbox *req, char *id,
                     const struct caller *k, uint8_t **ret_packed, size_t *ret_len,
                     struct policy_objects *ret_objs, char *err, size_t errlen) {
        struct effective e;
        int r;

        effective_init(&e, req, id);
        r = check_plain(d, req, &e.eff, &e.pol, &e.lim, &e.arena, err, errlen);
        /* image "dir:PATH" is a directory tree of the host's used as the root, read-only:
         * root_dir PATH (check_image refused both at once). */
        if (r == 0 && req->image && strncmp(req->image, "dir:", 4) == 0) {
                e.pol.root_dir = req->image + 4;
                e.req_root = e.pol.root_dir;
                e.eff.image = NULL;
        }
        if (r == 0)
                r = add_default_env(&e.eff, &e.pol, &e.arena, default_env,
                                    sizeof(default_env) / sizeof(default_env[0]));
        if (r == 0 && e.pol.network == SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST)
                r = add_default_env(&e.eff, &e.pol, &e.arena, proxy_env,
                                    sizeof(proxy_env) / sizeof(proxy_env[0]));
        if (r == 0)
                r = resolve_paths(d, k, &e, err, errlen);
        if (r == 0)
                r = check_view(d, &e.eff, e.req_root, err, errlen);
        if (r == 0)
                r = pack_effective(&e.eff, ret_packed, ret_len);
        if (r == 0) {
                *ret_objs = e.objs;
                memset(&e.objs, 0, sizeof(e.objs));
        }
        if (r == -ENOMEM)
                snprintf(err, errlen, "daemon out of memory");
        policy_objects_clear(&e.objs);
        pathset_list_free(&e.arena);
        return r;
}

/* ---- Setup ----------------------------------------------------------------------------- */

/* What policy_setup allocated. */
struct setup_mem {
        char **denied;
        Sbx__Init__V1__HostObject root_obj;
        Sbx__Init__V1__HostObject *objs;
        Sbx__Init__V1__HostObject **obj_ptrs;
        Sbx__Init__V1__WritableBind *binds;
        Sbx__Init__V1__WritableBind **bind_ptrs;
        char *cg_names[CG_N];
        Sbx__Init__V1__MadeFile *files;
        Sbx__Init__V1__MadeFile **file_ptrs;
};

static void host_object(Sbx__Init__V1__HostObject *o, const struct hostpath *h) {
        sbx__init__v1__host_object__init(o);
        o->has_dev = o->has_ino = 1;
        o->dev = (uint64_t)h->dev;
        o->ino = (uint64_t)h->ino;
}

/* The fields of Setup a spare's base is built from (init.proto Setup.prebuild): the
 * root, the network namespace, the size of /tmp, rootless and the daemon's ids. */
static void setup_base(const struct sbxd *d, const Sbx__V1__Policy *pol,
                       Sbx__Init__V1__Setup *setup) {
        /* Setup's strings are only read when it is packed. */
        setup->root_dir = pol->root_dir && pol->root_dir[0] ? pol->root_dir : (char *)"/";
        setup->has_network_none = 1;
        setup->network_none = pol->network != SBX__V1__NETWORK_MODE__NETWORK_FULL;
        setup->has_tmp_bytes = 1;
        setup->tmp_bytes = pol->limits && pol->limits->has_tmp_bytes ? pol->limits->tmp_bytes
                                                                     : SBX_DEFAULT_TMP_BYTES;
        setup->has_rootless = 1;
        setup->rootless = d->features.rootless;
        setup->has_outer_uid = setup->has_outer_gid = 1;
        setup->outer_uid = d->euid;
        setup->outer_gid = d->egid;
        setup->has_outer_subgid = d->features.subgid != 0;
        setup->outer_subgid = d->features.subgid;
        /* Disk images are mounted there: no sandbox holds another's (init.proto). */
        if (d->features.disk_mech == DISK_MECH_IMAGE)
                setup->sandboxes_dir = d->sandboxes_dir;
}

/* The sandbox's own fields of Setup: names, directories, network, ids. */
static void setup_basics(struct sbxd *d, const struct policy_sandbox *sb,
                         Sbx__Init__V1__Setup *setup) {
        const Sbx__V1__Policy *pol = sb->spec->policy;

        setup_base(d, pol, setup);
        setup->sandbox_id = (char *)(uintptr_t)sb->id;
        setup->workspace_dir = (char *)(uintptr_t)sb->workspace;
        setup->n_writable_paths = pol->n_writable_paths;
        setup->writable_paths = pol->writable_paths;
        if (pol->network == SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST) {
                /* init makes the proxy's listener in the sandbox's namespace (egress.h). */
                setup->has_proxy_port = 1;
                setup->proxy_port = SBX_EGRESS_PORT;
        }
        if (pol->limits && pol->limits->has_disk_bytes) {
                setup->has_workspace_bytes = setup->has_workspace_inodes = 1;
                setup->workspace_bytes = pol->limits->disk_bytes;
                setup->workspace_inodes =
                        pol->limits->has_disk_inodes ? pol->limits->disk_inodes : 0;
                setup->has_workspace_tmpfs = 1;
                setup->workspace_tmpfs = d->features.disk_mech == DISK_MECH_TMPFS;
        }
        setup->has_run_uid = setup->has_run_gid = 1;
        setup->run_uid = sb->run_uid;
        setup->run_gid = sb->run_gid;
        setup->hostname = (char *)(uintptr_t)sb->id;
        /* Root mode: the owner's files in writable paths are the sandbox user's inside. */
        if (!d->features.rootless && pol->n_writable_paths > 0 && sb->owner_uid != (uid_t)-1) {
                setup->has_owner_uid = setup->has_owner_gid = 1;
                setup->owner_uid = sb->owner_uid;
                setup->owner_gid = sb->owner_gid;
        }
}

/* What the view hides and keeps read-only: the hidden paths (the sandbox's own, then
 * the shared credentials) into one array of m, the denied write paths, the protected
 * names, the placeholder directories. Returns 0, -E2BIG or -ENOMEM. */
static int setup_view_paths(const Sbx__V1__Policy *pol, const struct policy_view *view,
                            struct setup_mem *m, Sbx__Init__V1__Setup *setup) {
        size_t n_shared = view->hidden_shared ? view->hidden_shared->n : 0, i;

        if (view->hidden->n + n_shared > SBX_MAX_HIDDEN_PATHS)
                return -E2BIG;
        m->denied = calloc(view->hidden->n + n_shared + 1, sizeof(*m->denied));
        if (!m->denied)
                return -ENOMEM;
        for (i = 0; i < view->hidden->n; i++)
                m->denied[i] = view->hidden->v[i];
        for (i = 0; i < n_shared; i++)
                m->denied[view->hidden->n + i] = view->hidden_shared->v[i];
        setup->n_denied_read_paths = view->hidden->n + n_shared;
        setup->denied_read_paths = m->denied;
        setup->n_denied_write_paths = pol->n_denied_write_paths;
        setup->denied_write_paths = pol->denied_write_paths;
        setup->n_protected_paths = view->protected_paths->n;
        setup->protected_paths = view->protected_paths->v;
        setup->n_protected_mkdirs = view->made_dirs->n;
        setup->protected_mkdirs = view->made_dirs->v;
        return 0;
}

/* The placeholder files of the view, each with its content. Returns 0 or -ENOMEM. */
static int setup_made_files(const struct pathset *made, struct setup_mem *m,
                            Sbx__Init__V1__Setup *setup) {
        size_t i;

        if (!made->n)
                return 0;
        m->files = calloc(made->n, sizeof(*m->files));
        m->file_ptrs = calloc(made->n, sizeof(*m->file_ptrs));
        if (!m->files || !m->file_ptrs)
                return -ENOMEM;
        for (i = 0; i < made->n; i++) {
                const char *content = placeholder_content(made->v[i]);
                sbx__init__v1__made_file__init(&m->files[i]);
                m->files[i].path = made->v[i];
                m->files[i].has_content = 1;
                m->files[i].content.data = (uint8_t *)(uintptr_t)(content ? content : "");
                m->files[i].content.len = content ? strlen(content) : 0;
                m->file_ptrs[i] = &m->files[i];
        }
        setup->n_protected_files = made->n;
        setup->protected_files = m->file_ptrs;
        return 0;
}

/* ---- writable paths in root mode ---------------------------------------------------- */

/* The first uid of a person (Debian's adduser.conf FIRST_UID, login.defs UID_MIN):
 * lower uids are system accounts, whose homes are system directories (/var/www,
 * /var/mail, /var/backups); nobody's is none. */
#define PERSON_UID_MIN 1000u
#define NOBODY_UID     65534u

/* The system's top-level directories (and every "/lib*"): what the host runs and
 * serves, made writable only by root and then with a warning. */
static const char *const system_tops[] = {"/bin",  "/boot", "/etc", "/opt", "/root",
                                          "/sbin", "/srv",  "/usr", "/var"};

/* 1 when the home of a person (not a system account) is p (canonical) or lies above it. */
static int in_persons_home(const char *p) {
        FILE *f = fopen("/etc/passwd", "re");
        struct passwd_entry e;
        char *line = NULL, *home;
        size_t cap = 0;
        int in = 0;

        while (!in && etcpasswd_next(f, &line, &cap, &e)) {
                if (e.uid < PERSON_UID_MIN || e.uid == NOBODY_UID || e.home[0] != '/')
                        continue;
                home = realpath(e.home, NULL);
                in = home && strcmp(home, "/") != 0 && at_or_below(home, p);
                free(home);
        }
        free(line);
        if (f)
                fclose(f);
        return in;
}

/* 1 when p (canonical) is a system directory or lies in one: at or below a system
 * top-level directory, but not at or below /var/tmp or a person's home there. */
static int system_path(const char *p) {
        int sys = strncmp(p, "/lib", 4) == 0; /* /lib, /lib32, /lib64, /libx32 */
        size_t i;

        for (i = 0; !sys && i < PROTECT_N(system_tops); i++)
                sys = at_or_below(system_tops[i], p);
        return sys && !at_or_below("/var/tmp", p) && !in_persons_home(p);
}

/* The host ids a sandbox acts as in a writable path (root mode: its idmapped bind shows
 * them as the sandbox user's; init.proto WritableBind), with which the placeholders
 * made there are made and removed (struct placeholder_ids). */
struct policy_ids {
        uid_t uid;
        gid_t gid;
};

/* The ids the sandbox acts as in the writable path h (init.proto WritableBind): those
 * the kernel judged its owner by there (hostpath.h): the owner's, with the path's
 * group instead of the owner's when the owner may write it as a member of that group;
 * for root, whose rights are no class of the mode bits, the path's own owner and group
 * (only its owner may write a directory of mode 0700). */
static struct policy_ids writable_ids(const struct policy_sandbox *sb, const struct hostpath *h) {
        struct policy_ids ids = {sb->owner_uid, sb->owner_gid};

        switch (h->class) {
        case HOSTPATH_CLASS_ROOT:
                ids.uid = h->uid;
                ids.gid = h->gid;
                break;
        case HOSTPATH_CLASS_GROUP:
                ids.gid = h->gid;
                break;
        case HOSTPATH_CLASS_OWNER:
        case HOSTPATH_CLASS_OTHER:
                break;
        }
        return ids;
}

/* How each writable path of objs is bound (root mode, the owner known): the ids of
 * writable_ids, and a system directory root made writable marked for init's warning.
 * Returns 0 or -ENOMEM. */
static int setup_binds(const struct policy_sandbox *sb, const struct policy_objects *objs,
                       struct setup_mem *m, Sbx__Init__V1__Setup *setup) {
        size_t i;

        m->binds = calloc(objs->n_writable, sizeof(*m->binds));
        m->bind_ptrs = calloc(objs->n_writable, sizeof(*m->bind_ptrs));
        if (!m->binds || !m->bind_ptrs)
                return -ENOMEM;
        for (i = 0; i < objs->n_writable; i++) {
                Sbx__Init__V1__WritableBind *b = &m->binds[i];
                struct policy_ids ids = writable_ids(sb, &objs->writable[i]);
                sbx__init__v1__writable_bind__init(b);
                b->has_uid = b->has_gid = 1;
                b->uid = ids.uid;
                b->gid = ids.gid;
                if (sb->owner_uid == 0 && system_path(objs->writable[i].path))
                        b->has_system_dir = b->system_dir = 1;
                m->bind_ptrs[i] = b;
        }
        setup->n_writable_binds = objs->n_writable;
        setup->writable_binds = m->bind_ptrs;
        return 0;
}

/* The ids each placeholder of made is made with: those of the innermost writable path
 * holding it (its bind is the one it is reached through). NULL when out of memory. */
static struct placeholder_ids *made_as(const struct pathset *made,
                                       const struct policy_objects *objs,
                                       const Sbx__Init__V1__Setup *setup) {
        struct placeholder_ids *as = calloc(made->n + 1, sizeof(*as));
        size_t i, j, best;

        for (i = 0; as && i < made->n; i++) {
                for (j = 0, best = objs->n_writable; j < objs->n_writable; j++)
                        if (at_or_below(objs->writable[j].path, made->v[i]) &&
                            (best == objs->n_writable ||
                             strlen(objs->writable[j].path) > strlen(objs->writable[best].path)))
                                best = j;
                as[i].uid = best < objs->n_writable ? setup->writable_binds[best]->uid
                                                    : setup->owner_uid;
                as[i].gid = best < objs->n_writable ? setup->writable_binds[best]->gid
                                                    : setup->owner_gid;
        }
        return as;
}

/* The identities of the host objects opened for the request (objs may be NULL).
 * Returns 0 or -ENOMEM. */
static int setup_objects(const struct policy_objects *objs, struct setup_mem *m,
                         Sbx__Init__V1__Setup *setup) {
        size_t i;

        if (objs && objs->root.path) {
                host_object(&m->root_obj, &objs->root);
                setup->root_object = &m->root_obj;
        }
        if (!objs || !objs->n_writable)
                return 0;
        m->objs = calloc(objs->n_writable, sizeof(*m->objs));
        m->obj_ptrs = calloc(objs->n_writable, sizeof(*m->obj_ptrs));
        if (!m->objs || !m->obj_ptrs)
                return -ENOMEM;
        for (i = 0; i < objs->n_writable; i++) {
                host_object(&m->objs[i], &objs->writable[i]);
                m->obj_ptrs[i] = &m->objs[i];
        }
        setup->n_writable_objects = objs->n_writable;
        setup->writable_objects = m->obj_ptrs;
        return 0;
}

/* cgroup v1: the controllers the sandbox's group has, which init mounts in its view. */
static void setup_cgroup_names(struct sbxd *d, const struct policy_sandbox *sb, struct setup_mem *m,
                               Sbx__Init__V1__Setup *setup) {
        size_t i, n;

        for (i = 0, n = 0; sb->cg && d->cgroups->version == CGROUP_V1 && i < CG_N; i++)
                if (sb->cg->path[i])
                        if ((m->cg_names[n] = strdup(cgroup_v1_name((enum cgroup_ctrl)i))))
                                n++;
        setup->n_cgroup_v1_controllers = n;
        setup->cgroup_v1_controllers = m->cg_names;
}

int policy_setup(struct sbxd *d, const struct policy_sandbox *sb, struct policy_view *view,
                 const struct policy_objects *objs, Sbx__Init__V1__Setup *setup, void **ret_mem) {
        struct setup_mem *m = calloc(1, sizeof(*m));
        int r;

        *ret_mem = m;
        if (!m)
                return -ENOMEM;
        setup_basics(d, sb, setup);
        r = setup_view_paths(sb->spec->policy, view, m, setup);
        if (r == 0)
                r = setup_made_files(view->made_files, m, setup);
        if (r == 0)
                r = setup_objects(objs, m, setup);
        /* Root mode: how each writable path is bound, and the ids of its placeholders. */
        free(view->made_dirs_as);
        free(view->made_files_as);
        view->made_dirs_as = view->made_files_as = NULL;
        if (r == 0 && setup->has_owner_uid && objs &&
            objs->n_writable == sb->spec->policy->n_writable_paths) {
                r = setup_binds(sb, objs, m, setup);
                if (r == 0) {
                        view->made_dirs_as = made_as(view->made_dirs, objs, setup);
                        view->made_files_as = made_as(view->made_files, objs, setup);
                        if (!view->made_dirs_as || !view->made_files_as)
                                r = -ENOMEM;
                }
        }
        if (r == 0)
                setup_cgroup_names(d, sb, m, setup);
        return r;
}

int policy_setup_base(struct sbxd *d, const struct policy_sandbox *sb, Sbx__Init__V1__Setup *setup,
                      void **ret_mem) {
        struct setup_mem *m = calloc(1, sizeof(*m));

        *ret_mem = m;
        if (!m)
                return -ENOMEM;
        setup_base(d, sb->spec->policy, setup);
        setup->sandbox_id = (char *)(uintptr_t)sb->id;
        setup->has_prebuild = setup->prebuild = 1;
        setup_cgroup_names(d, sb, m, setup);
        return 0;
}

int policy_fits_base(const struct sbxd *d, const Sbx__V1__CreateSandbox *base,
                     const Sbx__V1__CreateSandbox *spec) {
        Sbx__Init__V1__Setup a = SBX__INIT__V1__SETUP__INIT, b = SBX__INIT__V1__SETUP__INIT;
        const Sbx__V1__Limits *lim = spec->policy ? spec->policy->limits : NULL;

        if (!base->policy || !spec->policy)
                return 0;
        setup_base(d, base->policy, &a);
        setup_base(d, spec->policy, &b);
        /* A disk image is mounted on the workspace on the host, after the base was
         * built: its mount is not in the host's tree the spare kept. */
        if (lim && lim->has_disk_bytes && d->features.disk_mech == DISK_MECH_IMAGE)
                return 0;
        return strcmp(a.root_dir, "/") == 0 && strcmp(b.root_dir, "/") == 0 &&
               a.network_none == b.network_none && a.tmp_bytes == b.tmp_bytes;
}

void policy_free_setup(Sbx__Init__V1__Setup *setup, void *mem) {
        struct setup_mem *m = mem;
        size_t i;

        if (!m)
                return;
        free(m->denied);
        for (i = 0; i < CG_N; i++)
                free(m->cg_names[i]);
        free(m->objs);
        free(m->obj_ptrs);
        free(m->binds);
        free(m->bind_ptrs);
        free(m->files);
        free(m->file_ptrs);
        free(m);
}
