/* policy.c: from a CreateSandbox request to the effective policy, and from the
 * effective policy to the init helper's Setup.
 *
 * The effective policy is what the sandbox really gets: defaults filled in, the
 * lifetime capped, writable paths and the root resolved through symlinks (a write is
 * judged by where it lands), every bound checked. It is recorded with the sandbox and
 * reported back to clients. protect_defaults is expanded only when building Setup, from
 * what exists on the host at that moment. Called by sandbox.c. */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "sandbox_int.h"
#include "sbxd.h"

/* Environment variables passed in by default: secret-free (SPEC "Policy"). */
static char *default_inherit[] = {"PATH", "LANG", "LC_*", "TERM", "TZ"};

/* Credentials hidden under every home directory with protect_defaults. */
static const char *const home_secrets[] = {".ssh",   ".aws",  ".gnupg", ".config/gcloud",
                                           ".docker", ".kube", ".netrc"};

/* Kept read-only inside writable paths with protect_defaults. */
static const char *const protected_names[] = {".git/hooks", ".git/config", ".bashrc",
                                              ".bash_profile", ".bash_login", ".profile",
                                              ".zshrc", ".zprofile", ".zshenv", ".vimrc",
                                              ".vim", ".emacs", ".emacs.d", ".vscode", ".idea",
                                              ".editorconfig", ".envrc"};

struct strs {
        char **v;
        size_t n, cap;
};

static char *strs_add(struct strs *s, char *str) {
        if (!str)
                return NULL;
        if (s->n == s->cap) {
                size_t nc = s->cap ? s->cap * 2 : 16;
                char **nv = realloc(s->v, nc * sizeof(*nv));
                if (!nv) {
                        free(str);
                        return NULL;
                }
                s->v = nv;
                s->cap = nc;
        }
        s->v[s->n++] = str;
        return str;
}

static void strs_free(struct strs *s) {
        size_t i;
        for (i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        memset(s, 0, sizeof(*s));
}

static int check_path(const char *what, const char *p, char *err, size_t errlen) {
        if (!p || p[0] != '/') {
                snprintf(err, errlen, "%s '%.200s' must be an absolute path", what, p ? p : "");
                return -EINVAL;
        }
        if (strlen(p) >= SBX_PATH_MAX_BYTES) {
                snprintf(err, errlen, "%s is longer than %u bytes", what, SBX_PATH_MAX_BYTES);
                return -EINVAL;
        }
        return 0;
}

/* Resolves each path of in (must exist when must_exist) into out (strings kept in arena). */
static int resolve_paths(const char *what, char **in, size_t n, int must_exist, struct strs *arena,
                         char ***ret, char *err, size_t errlen) {
        char **out;
        size_t i;
        int r;

        if (n > SBX_MAX_POLICY_PATHS) {
                snprintf(err, errlen, "too many %s (%zu, at most %u)", what, n, SBX_MAX_POLICY_PATHS);
                return -EINVAL;
        }
        out = calloc(n ? n : 1, sizeof(*out));
        if (!out)
                return -ENOMEM;
        if (!strs_add(arena, (char *)out)) {
                return -ENOMEM;
        }
        for (i = 0; i < n; i++) {
                char buf[PATH_MAX];
                r = check_path(what, in[i], err, errlen);
                if (r < 0)
                        return r;
                if (realpath(in[i], buf)) {
                        out[i] = strs_add(arena, strdup(buf));
                        if (!out[i])
                                return -ENOMEM;
                } else if (must_exist) {
                        snprintf(err, errlen, "%s '%.200s' does not exist on the host (%s); create it "
                                              "first",
                                 what, in[i], strerror(errno));
                        return -EINVAL;
                } else {
                        out[i] = in[i];
                }
        }
        *ret = out;
        return 0;
}

int policy_effective(struct sbxd *d, const Sbx__V1__CreateSandbox *req, char *id,
                     uint8_t **ret_packed, size_t *ret_len, char *err, size_t errlen) {
        Sbx__V1__CreateSandbox eff = *req;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        struct strs arena = {0};
        uint64_t max = d->cfg->max_sandbox_lifetime_ms;
        size_t i, len;
        uint8_t *buf;
        int r;

        if (req->policy)
                pol = *req->policy;
        if (pol.limits)
                lim = *pol.limits;
        eff.id = id;
        eff.policy = &pol;
        pol.limits = &lim;

        if (req->has_timeout_ms && req->timeout_ms == 0) {
                snprintf(err, errlen, "timeout_ms must be greater than 0 (omit it for the default "
                                      "of %llu ms)",
                         (unsigned long long)d->cfg->default_sandbox_timeout_ms);
                return -EINVAL;
        }
        eff.has_timeout_ms = 1;
        eff.timeout_ms = req->has_timeout_ms ? req->timeout_ms : d->cfg->default_sandbox_timeout_ms;
        if (eff.timeout_ms > max)
                eff.timeout_ms = max;
        if (req->n_labels > SBX_MAX_LABELS) {
                snprintf(err, errlen, "too many labels (%zu, at most %u)", req->n_labels, SBX_MAX_LABELS);
                return -EINVAL;
        }
        for (i = 0; i < req->n_labels; i++) {
                const Sbx__V1__Label *l = req->labels[i];
                if (!l->key || !l->key[0] || strlen(l->key) > SBX_LABEL_MAX_BYTES ||
                    (l->value && strlen(l->value) > SBX_LABEL_MAX_BYTES)) {
                        snprintf(err, errlen, "label %zu: the key must be 1 to %u bytes and the value "
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
        if (req->n_share_uids > 64 || req->n_share_gids > 64) {
                snprintf(err, errlen, "at most 64 share_uids and 64 share_gids");
                return -EINVAL;
        }

        /* Paths. */
        r = resolve_paths("writable path", pol.writable_paths, pol.n_writable_paths, 1, &arena,
                          &pol.writable_paths, err, errlen);
        if (r == 0)
                r = resolve_paths("denied read path", pol.denied_read_paths, pol.n_denied_read_paths,
                                  0, &arena, &pol.denied_read_paths, err, errlen);
        if (r == 0)
                r = resolve_paths("denied write path", pol.denied_write_paths,
                                  pol.n_denied_write_paths, 0, &arena, &pol.denied_write_paths, err,
                                  errlen);
        if (r == 0 && pol.root_dir && pol.root_dir[0]) {
                char **root;
                struct stat st;
                r = resolve_paths("root_dir", &pol.root_dir, 1, 1, &arena, &root, err, errlen);
                if (r == 0 && (stat(root[0], &st) < 0 || !S_ISDIR(st.st_mode))) {
                        snprintf(err, errlen, "root_dir '%.200s' is not a directory", pol.root_dir);
                        r = -EINVAL;
                }
                if (r == 0)
                        pol.root_dir = root[0];
        } else if (r == 0) {
                pol.root_dir = (char *)"/";
        }
        if (r < 0)
                goto out;
        if (pol.has_network && pol.network != SBX__V1__NETWORK_MODE__NETWORK_NONE &&
            pol.network != SBX__V1__NETWORK_MODE__NETWORK_FULL) {
                snprintf(err, errlen, "network must be none or full");
                r = -EINVAL;
                goto out;
        }
        pol.has_network = 1;
        pol.has_protect_defaults = 1;
        if (!req->policy || !req->policy->has_protect_defaults)
                pol.protect_defaults = 1;
        if (!pol.has_inherit_environment_set || !pol.inherit_environment_set) {
                if (pol.n_inherit_environment == 0) {
                        pol.n_inherit_environment = sizeof(default_inherit) / sizeof(default_inherit[0]);
                        pol.inherit_environment = default_inherit;
                }
        }
        pol.has_inherit_environment_set = 1;
        pol.inherit_environment_set = 1;
        if (pol.n_inherit_environment > SBX_MAX_ENV) {
                snprintf(err, errlen, "inherit_environment has too many names");
                r = -EINVAL;
                goto out;
        }

        /* Limits. */
        if ((lim.has_memory_bytes && lim.memory_bytes < 4u * 1024 * 1024) ||
            (lim.has_cpu_seconds && !(lim.cpu_seconds > 0 && lim.cpu_seconds < 1e9)) ||
            (lim.has_cpu_percent && (lim.cpu_percent < 1 || lim.cpu_percent > 100u * 1024)) ||
            (lim.has_processes && lim.processes < 1) ||
            (lim.has_file_size_bytes && lim.file_size_bytes < 1) ||
            (lim.has_open_files && (lim.open_files < 8 || lim.open_files > 1048576)) ||
            (lim.has_tmp_bytes && lim.tmp_bytes < 64 * 1024)) {
                snprintf(err, errlen, "a limit is out of range (memory >= 4 MiB, cpu_seconds > 0, "
                                      "cpu_percent 1..102400, processes >= 1, file_size >= 1, "
                                      "open_files 8..1048576, tmp >= 64 KiB)");
                r = -EINVAL;
                goto out;
        }
        if (!lim.has_tmp_bytes) {
                lim.has_tmp_bytes = 1;
                lim.tmp_bytes = SBX_DEFAULT_TMP_BYTES;
        }
        /* No sandbox without a process limit (a fork bomb would take every pid of the
         * host), and none above the daemon's ceiling; as a default only where it holds (a
         * pids cgroup, or RLIMIT_NPROC of a uid of the sandbox's own), not to warn of a
         * limit nobody asked for. */
        if (d->cfg->max_processes &&
            ((!lim.has_processes &&
              (cgroup_env_has(d->cgroups, CG_PIDS) || !d->features.rootless)) ||
             (lim.has_processes && lim.processes > d->cfg->max_processes))) {
                lim.has_processes = 1;
                lim.processes = d->cfg->max_processes;
        }
        if (!lim.has_core_dumps) {
                lim.has_core_dumps = 1;
                lim.core_dumps = 0;
        }

        len = sbx__v1__create_sandbox__get_packed_size(&eff);
        buf = malloc(len ? len : 1);
        if (!buf) {
                r = -ENOMEM;
                goto out;
        }
        sbx__v1__create_sandbox__pack(&eff, buf);
        *ret_packed = buf;
        *ret_len = len;
        r = 0;
out:
        if (r == -ENOMEM)
                snprintf(err, errlen, "daemon out of memory");
        strs_free(&arena);
        return r;
}

/* Adds path when it exists and is not a symlink (its target, if listed, is covered). */
static void add_existing(struct strs *s, const char *path) {
        struct stat st;
        if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode))
                strs_add(s, strdup(path));
}

/* Missing ones too: the guard hides one the host creates later (guard.h); sbx-init
 * passes over a path that does not exist. */
static void add_home_secrets(struct strs *s, const char *home) {
        size_t i;
        char p[PATH_MAX];
        for (i = 0; i < sizeof(home_secrets) / sizeof(home_secrets[0]); i++) {
                struct stat st;
                snprintf(p, sizeof(p), "%s/%s", home, home_secrets[i]);
                if (lstat(p, &st) == 0 ? !S_ISLNK(st.st_mode) : errno == ENOENT)
                        strs_add(s, strdup(p));
        }
}

static void add_glob(struct strs *s, const char *pattern, void (*each)(struct strs *, const char *)) {
        glob_t g;
        size_t i;
        if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
                return;
        for (i = 0; i < g.gl_pathc; i++)
                each(s, g.gl_pathv[i]);
        globfree(&g);
}

static char *parent_dir(const char *path) {
        char *p = strdup(path), *slash;
        if (!p)
                return NULL;
        slash = strrchr(p, '/');
        if (slash && slash != p)
                *slash = '\0';
        return p;
}

int policy_fill_setup(struct sbxd *d, struct sandbox *sb, Sbx__Init__V1__Setup *setup,
                      char ***ret_strings, size_t *ret_n) {
        const Sbx__V1__Policy *pol = sb->spec->policy;
        struct strs all = {0}, denied = {0}, prot = {0};
        size_t i, j;
        const char *home = getenv("HOME");
        char *sockdir;

        setup->sandbox_id = sb->id;
        setup->root_dir = pol->root_dir ? pol->root_dir : (char *)"/";
        setup->workspace_dir = sb->workspace;
        setup->n_writable_paths = pol->n_writable_paths;
        setup->writable_paths = pol->writable_paths;
        setup->has_network_none = 1;
        setup->network_none = pol->network != SBX__V1__NETWORK_MODE__NETWORK_FULL;
        setup->has_tmp_bytes = 1;
        setup->tmp_bytes = pol->limits && pol->limits->has_tmp_bytes ? pol->limits->tmp_bytes
                                                                      : SBX_DEFAULT_TMP_BYTES;
        setup->has_run_uid = setup->has_run_gid = 1;
        setup->run_uid = sb->run_uid;
        setup->run_gid = sb->run_gid;
        setup->hostname = sb->id;
        setup->has_rootless = 1;
        setup->rootless = d->features.rootless;
        setup->has_outer_uid = setup->has_outer_gid = 1;
        setup->outer_uid = d->euid;
        setup->outer_gid = d->egid;

        for (i = 0; i < pol->n_denied_read_paths; i++)
                strs_add(&denied, strdup(pol->denied_read_paths[i]));
        if (pol->protect_defaults) {
                add_existing(&denied, "/root");
                add_glob(&denied, "/home/*", add_home_secrets);
                if (home && home[0] == '/')
                        add_home_secrets(&denied, home);
                add_existing(&denied, "/etc/shadow");
                add_existing(&denied, "/etc/gshadow");
                add_existing(&denied, "/etc/shadow-");
                add_existing(&denied, "/etc/gshadow-");
                add_glob(&denied, "/etc/ssh/*_key", add_existing);
                add_existing(&denied, d->cfg->state_dir);
                sockdir = parent_dir(d->cfg->socket_path);
                if (sockdir) {
                        add_existing(&denied, sockdir);
                        free(sockdir);
                }
                add_existing(&denied, "/run");
                add_existing(&denied, "/var/run");
                add_existing(&denied, "/var/lib/docker");
                add_existing(&denied, "/var/lib/containerd");
                for (i = 0; i < pol->n_writable_paths; i++)
                        for (j = 0; j < sizeof(protected_names) / sizeof(protected_names[0]); j++) {
                                char p[PATH_MAX];
                                snprintf(p, sizeof(p), "%s/%s", pol->writable_paths[i],
                                         protected_names[j]);
                                add_existing(&prot, p);
                        }
        }
        setup->n_denied_read_paths = denied.n;
        setup->denied_read_paths = denied.v;
        setup->n_denied_write_paths = pol->n_denied_write_paths;
        setup->denied_write_paths = pol->denied_write_paths;
        setup->n_protected_paths = prot.n;
        setup->protected_paths = prot.v;

        /* Hand every allocation to the caller in one array. */
        for (i = 0; i < denied.n; i++)
                strs_add(&all, denied.v[i]);
        for (i = 0; i < prot.n; i++)
                strs_add(&all, prot.v[i]);
        strs_add(&all, (char *)denied.v);
        strs_add(&all, (char *)prot.v);
        *ret_strings = all.v;
        *ret_n = all.n;
        return 0;
}

void policy_free_setup(Sbx__Init__V1__Setup *setup, char **strings, size_t n) {
        size_t i;
        for (i = 0; i < n; i++)
                free(strings[i]);
        free(strings);
}
