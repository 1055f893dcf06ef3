/* check_policy.c: the Check suite of the policy module (daemon/policy.c), without a
 * daemon process.
 *
 * policy_effective() is called directly with a context that has what it reads: the
 * configuration (its state and socket directories in a temporary tree), no cgroups,
 * no guard, root or rootless mode. The tests check the effective request it packs (the
 * defaults filled in: lifetime, idle timeout, network, protect_defaults, the inherit
 * list, the default environment, the limits; host paths made canonical and their
 * objects kept), every refusal it can produce with its errno and its exact message
 * (each limit's bound, too many entries, malformed entries, paths inside what the
 * sandbox hides, the host's root, a root inside a credential), and the view that
 * policy_view_build() makes of an effective request (the daemon's directories, the
 * denied paths, the credentials under $HOME, the protected names and placeholders of
 * a repository in a writable path), and the Setup that policy_setup() fills from it
 * (and its one refusal, a view that hides too much). Each test case gets a fresh temporary tree,
 * made and removed from the runner's process; $HOME points into it so that the credentials found
 * are the tree's. Runs as root (hostpath.c takes the caller's identity); as another user the tests
 * that need root say so and pass. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "disk.h"
#include "policy.h"
#include "sandbox.h"
#include "sandbox_int.h" /* sandbox_request_key: the warm pool's key */
#include "sbx_limits.h"
#include "sbxd.h"
#include "testutil.h"

#define TEST_TIMEOUT_SECS 60

/* ---- fixture: a temporary tree and a daemon context ------------------------------------ */

static char tmpdir[64];

static void tmpdir_setup(void) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_policy.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
        /* Others may search it, so that what lies below can be "exposed" (policy.c). */
        ck_assert_int_eq(chmod(tmpdir, 0755), 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        remove(path);
        return 0;
}

static void tmpdir_teardown(void) {
        if (tmpdir[0])
                nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        tmpdir[0] = '\0';
}

/* tmpdir/name, in a rotating set of buffers (several may be alive in one expression). */
static const char *tmp(const char *fmt, ...) {
        static char bufs[8][PATH_MAX];
        static unsigned next;
        char *b = bufs[next++ % 8], name[PATH_MAX - sizeof(tmpdir)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(name, sizeof(name), fmt, ap);
        va_end(ap);
        snprintf(b, PATH_MAX, "%s/%s", tmpdir, name);
        return b;
}

/* The refusal cases share one tree (one fixture, many tests): what exists is fine. */
static void make_dir(const char *path, mode_t mode) {
        ck_assert_msg(mkdir(path, mode) == 0 || errno == EEXIST, "mkdir %s: %s", path,
                      strerror(errno));
        ck_assert_int_eq(chmod(path, mode), 0);
}

static void make_file(const char *path, const char *content) {
        FILE *f = fopen(path, "w");
        ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
        fputs(content, f);
        fclose(f);
}

static struct config cfg;
static struct cgroup_env cgroups;
static struct sbxd ctx;
static const struct caller root_caller = {.uid = 0, .gid = 0, .client_name = "check_policy"};

#define DEFAULT_TIMEOUT_MS 300000u
#define MAX_LIFETIME_MS    3600000u
#define DEFAULT_IDLE_MS    600000u
#define MAX_PROCESSES      4096u

/* The daemon context of one test, in tmpdir: state and socket directories, $HOME with
 * credentials (.ssh private to its owner, .aws readable by others), a work directory
 * and a repository. Called at the start of each test (in the test's process). */
static void daemon_setup(int rootless) {
        ck_assert_int_eq(config_init(&cfg, 0), 0);
        free(cfg.state_dir);
        free(cfg.socket_path);
        cfg.state_dir = strdup(tmp("state"));
        cfg.socket_path = strdup(tmp("run/sbxd.sock"));
        cfg.default_sandbox_timeout_ms = DEFAULT_TIMEOUT_MS;
        cfg.max_sandbox_lifetime_ms = MAX_LIFETIME_MS;
        cfg.default_idle_timeout_ms = DEFAULT_IDLE_MS;
        cfg.max_processes = MAX_PROCESSES;
        memset(&cgroups, 0, sizeof(cgroups));
        cgroups.version = CGROUP_NONE;
        memset(&ctx, 0, sizeof(ctx));
        ctx.cfg = &cfg;
        ctx.cgroups = &cgroups;
        ctx.features.rootless = rootless;
        ctx.euid = geteuid();
        ctx.egid = getegid();

        make_dir(tmp("state"), 0700);
        make_dir(tmp("run"), 0755);
        make_dir(tmp("home"), 0755);
        make_dir(tmp("home/.ssh"), 0700);
        make_dir(tmp("home/.ssh/tree"), 0755);
        make_dir(tmp("home/.aws"), 0755);
        make_dir(tmp("work"), 0755);
        make_dir(tmp("work/sub"), 0755);
        make_file(tmp("work/file"), "x");
        ck_assert(symlink(tmp("work"), tmp("link-to-work")) == 0 || errno == EEXIST);
        make_dir(tmp("repo"), 0755);
        make_dir(tmp("repo/.git"), 0755);
        make_file(tmp("repo/.git/config"), "[core]\n");
        make_file(tmp("repo/.bashrc"), "");
        make_dir(tmp("rootfs"), 0755);
        make_dir(tmp("rootfs/etc"), 0755);
        ck_assert_int_eq(setenv("HOME", tmp("home"), 1), 0);
}

/* ---- building requests and reading the effective one ---------------------------------- */

/* A request and everything it points to, in one place (static storage, per test). */
struct req {
        Sbx__V1__CreateSandbox cs;
        Sbx__V1__Policy pol;
        Sbx__V1__Limits lim;
};

static void req_init(struct req *r) {
        static const Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        static const Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        static const Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;

        r->cs = cs;
        r->pol = pol;
        r->lim = lim;
        r->cs.policy = &r->pol;
        r->pol.limits = &r->lim;
}

static char id[] = "sbx-check-policy";
static char err[1024];

/* policy_effective for caller k. On success the effective request is unpacked into
 * *ret (free with sbx__v1__create_sandbox__free_unpacked) and the objects into *objs
 * (may be NULL: cleared here). Returns what policy_effective returned. */
static int effective_as(const struct caller *k, const struct req *r, Sbx__V1__CreateSandbox **ret,
                        struct policy_objects *objs) {
        struct policy_objects o;
        uint8_t *packed = NULL;
        size_t len = 0;
        int rc;

        err[0] = '\0';
        memset(&o, 0, sizeof(o));
        rc = policy_effective(&ctx, &r->cs, id, k, &packed, &len, &o, err, sizeof(err));
        if (rc == 0) {
                ck_assert_str_eq(err, "");
                if (ret) {
                        *ret = sbx__v1__create_sandbox__unpack(NULL, len, packed);
                        ck_assert_ptr_nonnull(*ret);
                }
                free(packed);
                if (objs)
                        *objs = o;
                else
                        policy_objects_clear(&o);
        } else {
                ck_assert_ptr_null(packed);
                ck_assert_ptr_null(o.writable);
                ck_assert_ptr_null(o.root.path);
                ck_assert_msg(err[0] != '\0', "refusal %d without a message", rc);
        }
        return rc;
}

static int effective(const struct req *r, Sbx__V1__CreateSandbox **ret) {
        return effective_as(&root_caller, r, ret, NULL);
}

static int has_str(char *const *v, size_t n, const char *s) {
        size_t i;
        for (i = 0; i < n; i++)
                if (strcmp(v[i], s) == 0)
                        return 1;
        return 0;
}

static int set_has(const struct pathset *p, const char *s) {
        return p && has_str(p->v, p->n, s);
}

static int need_root(const char *test) {
        if (geteuid() == 0)
                return 1;
        fprintf(stderr, "%s: not root, skipped\n", test);
        return 0;
}

/* ---- the effective request: defaults --------------------------------------------------- */

/* An empty request gets every default: the lifetime and idle timeout of the daemon,
 * no network, protect_defaults, the secret-free inherit list, the sandbox user's
 * environment, /tmp's size, no core dumps and the daemon's process ceiling. */
START_TEST(defaults_filled) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        const Sbx__V1__Policy *p;
        const Sbx__V1__Limits *l;

        daemon_setup(0);
        req_init(&r);
        r.cs.policy = NULL;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_str_eq(e->id, id);
        ck_assert(e->has_timeout_ms && e->timeout_ms == DEFAULT_TIMEOUT_MS);
        ck_assert(e->has_idle_timeout_ms && e->idle_timeout_ms == DEFAULT_IDLE_MS);
        p = e->policy;
        ck_assert_ptr_nonnull(p);
        ck_assert(p->has_network && p->network == SBX__V1__NETWORK_MODE__NETWORK_NONE);
        ck_assert(p->has_protect_defaults && p->protect_defaults);
        ck_assert_str_eq(p->root_dir, "/");
        ck_assert(p->has_inherit_environment_set && p->inherit_environment_set);
        ck_assert_uint_eq(p->n_inherit_environment, 3);
        ck_assert_str_eq(p->inherit_environment[0], "LANG");
        ck_assert_str_eq(p->inherit_environment[1], "LC_*");
        ck_assert_str_eq(p->inherit_environment[2], "TZ");
        ck_assert_uint_eq(e->n_env, 3);
        ck_assert_str_eq(e->env[0], "USER=sandbox");
        ck_assert_str_eq(e->env[1], "LOGNAME=sandbox");
        ck_assert_str_eq(e->env[2], "EMAIL=sandbox@sbxd.invalid");
        l = p->limits;
        ck_assert_ptr_nonnull(l);
        ck_assert(l->has_tmp_bytes && l->tmp_bytes == SBX_DEFAULT_TMP_BYTES);
        ck_assert(l->has_core_dumps && !l->core_dumps);
        /* Root mode: RLIMIT_NPROC of the sandbox's own uid holds, so the ceiling is set. */
        ck_assert(l->has_processes && l->processes == MAX_PROCESSES);
        ck_assert(!l->has_memory_bytes && !l->has_cpu_seconds && !l->has_cpu_percent);
        ck_assert(!l->has_file_size_bytes && !l->has_open_files);
        /* The command caps: the daemon's --max-commands and --max-queued. */
        ck_assert(l->has_commands && l->commands == SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX);
        ck_assert(l->has_queued_commands &&
                  l->queued_commands == SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The lifetime is capped at the daemon's maximum; an idle timeout of 0 (none) and the
 * limits a request sets are kept as given. */
START_TEST(given_values_kept_or_capped) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        const Sbx__V1__Limits *l;

        daemon_setup(0);
        req_init(&r);
        r.cs.has_timeout_ms = 1;
        r.cs.timeout_ms = MAX_LIFETIME_MS + 1;
        r.cs.has_idle_timeout_ms = 1;
        r.cs.idle_timeout_ms = 0;
        r.pol.has_network = 1;
        r.pol.network = SBX__V1__NETWORK_MODE__NETWORK_FULL;
        r.pol.has_protect_defaults = 1;
        r.pol.protect_defaults = 0;
        r.lim.has_memory_bytes = 1;
        r.lim.memory_bytes = 64u << 20;
        r.lim.has_cpu_seconds = 1;
        r.lim.cpu_seconds = 2.5;
        r.lim.has_processes = 1;
        r.lim.processes = 10;
        r.lim.has_tmp_bytes = 1;
        r.lim.tmp_bytes = 1u << 20;
        r.lim.has_core_dumps = 1;
        r.lim.core_dumps = 1;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->timeout_ms, MAX_LIFETIME_MS);
        ck_assert(e->has_idle_timeout_ms && e->idle_timeout_ms == 0);
        ck_assert_int_eq(e->policy->network, SBX__V1__NETWORK_MODE__NETWORK_FULL);
        ck_assert(e->policy->has_protect_defaults && !e->policy->protect_defaults);
        l = e->policy->limits;
        ck_assert_uint_eq(l->memory_bytes, 64u << 20);
        ck_assert(l->cpu_seconds == 2.5);
        ck_assert_uint_eq(l->processes, 10);
        ck_assert_uint_eq(l->tmp_bytes, 1u << 20);
        ck_assert(l->core_dumps);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        r.cs.timeout_ms = 1000;
        r.lim.processes = MAX_PROCESSES + 1;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->timeout_ms, 1000);
        ck_assert_uint_eq(e->policy->limits->processes, MAX_PROCESSES); /* the ceiling */
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The process limit by default only where it holds: rootless, only with a pids
 * cgroup; never when the daemon has no ceiling. */
START_TEST(process_limit_where_it_holds) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;

        daemon_setup(1);
        req_init(&r);
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert(!e->policy->limits->has_processes);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        cgroups.version = CGROUP_V2;
        cgroups.v2_controllers = 1 << CG_PIDS;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert(e->policy->limits->has_processes);
        ck_assert_uint_eq(e->policy->limits->processes, MAX_PROCESSES);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        cfg.max_processes = 0;
        r.lim.has_processes = 1;
        r.lim.processes = MAX_PROCESSES * 10;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->processes, MAX_PROCESSES * 10);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.lim.has_processes = 0;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert(!e->policy->limits->has_processes);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The default environment yields to the creator: a name set in env, or inherited
 * through a pattern, is not added; an inherit list set empty stays empty. */
START_TEST(environment_defaults_yield) {
        static struct req r;
        static char *env[] = {"USER=alice", "FOO=bar"};
        static char *inherit[] = {"LOG*", "HOME"};
        Sbx__V1__CreateSandbox *e;

        daemon_setup(0);
        req_init(&r);
        r.cs.n_env = 2;
        r.cs.env = env;
        r.pol.n_inherit_environment = 2;
        r.pol.inherit_environment = inherit;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->n_env, 3);
        ck_assert_str_eq(e->env[0], "USER=alice");
        ck_assert_str_eq(e->env[1], "FOO=bar");
        ck_assert_str_eq(e->env[2], "EMAIL=sandbox@sbxd.invalid");
        ck_assert_uint_eq(e->policy->n_inherit_environment, 2);
        ck_assert_str_eq(e->policy->inherit_environment[0], "LOG*");
        ck_assert(e->policy->inherit_environment_set);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        req_init(&r);
        r.pol.has_inherit_environment_set = 1;
        r.pol.inherit_environment_set = 1;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->n_inherit_environment, 0);
        ck_assert_uint_eq(e->n_env, 3);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* NETWORK_ALLOWLIST: the lists normalised (names lowercased, host bits cleared), the
 * proxy's variables added unless the creator sets one, and Setup asks init for the
 * listener. */
START_TEST(allowlist_effective) {
        static struct req r;
        static char *hosts[] = {"PyPI.org", "*.NPMjs.org:0443"};
        static char *cidrs[] = {"10.1.2.3/8", "2001:db8::1"};
        static char *env[] = {"https_proxy=http://mine:1"};
        Sbx__V1__CreateSandbox *e;
        int http = 0, https_mine = 0, https_ours = 0;

        daemon_setup(0);
        req_init(&r);
        r.pol.has_network = 1;
        r.pol.network = SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST;
        r.pol.n_allowed_hosts = 2;
        r.pol.allowed_hosts = hosts;
        r.pol.n_allowed_cidrs = 2;
        r.pol.allowed_cidrs = cidrs;
        r.cs.n_env = 1;
        r.cs.env = env;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_int_eq(e->policy->network, SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST);
        ck_assert_uint_eq(e->policy->n_allowed_hosts, 2);
        ck_assert_str_eq(e->policy->allowed_hosts[0], "pypi.org");
        ck_assert_str_eq(e->policy->allowed_hosts[1], "*.npmjs.org:443");
        ck_assert_str_eq(e->policy->allowed_cidrs[0], "10.0.0.0/8");
        ck_assert_str_eq(e->policy->allowed_cidrs[1], "2001:db8::1/128");
        for (size_t i = 0; i < e->n_env; i++) {
                http += strcmp(e->env[i], "HTTP_PROXY=http://127.0.0.1:3128") == 0;
                https_mine += strcmp(e->env[i], "https_proxy=http://mine:1") == 0;
                https_ours += strncmp(e->env[i], "https_proxy=", 12) == 0;
        }
        ck_assert_int_eq(http, 1);
        ck_assert_int_eq(https_mine, 1);
        ck_assert_int_eq(https_ours, 1); /* the creator's, not ours too */
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        /* Network none: no proxy variables. */
        req_init(&r);
        ck_assert_int_eq(effective(&r, &e), 0);
        for (size_t i = 0; i < e->n_env; i++)
                ck_assert_msg(!strstr(e->env[i], "PROXY"), "%s", e->env[i]);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* ---- the effective request: host paths -------------------------------------------------- */

/* Writable paths and root_dir are opened for the caller and replaced by their
 * canonical paths, their identities kept for init; denied paths are resolved as the
 * caller sees them on the host's root (kept as given when missing), and kept as given
 * below a root_dir, where they name paths of the view. */
START_TEST(host_paths_canonical) {
        static struct req r;
        static char *writable[2], *denied[2], *denied_w[1];
        Sbx__V1__CreateSandbox *e;
        struct policy_objects o;
        struct stat st;

        if (!need_root("host_paths_canonical"))
                return;
        daemon_setup(0);
        req_init(&r);
        writable[0] = strdup(tmp("link-to-work"));
        writable[1] = strdup(tmp("repo/.bashrc"));
        denied[0] = strdup(tmp("link-to-work/sub"));
        denied[1] = strdup(tmp("missing/x"));
        denied_w[0] = strdup(tmp("link-to-work/file"));
        r.pol.n_writable_paths = 2;
        r.pol.writable_paths = writable;
        r.pol.n_denied_read_paths = 2;
        r.pol.denied_read_paths = denied;
        r.pol.n_denied_write_paths = 1;
        r.pol.denied_write_paths = denied_w;
        ck_assert_int_eq(effective_as(&root_caller, &r, &e, &o), 0);
        ck_assert_uint_eq(e->policy->n_writable_paths, 2);
        ck_assert_str_eq(e->policy->writable_paths[0], tmp("work"));
        ck_assert_str_eq(e->policy->writable_paths[1], tmp("repo/.bashrc"));
        ck_assert_str_eq(e->policy->denied_read_paths[0], tmp("work/sub"));
        ck_assert_str_eq(e->policy->denied_read_paths[1], tmp("missing/x"));
        ck_assert_str_eq(e->policy->denied_write_paths[0], tmp("work/file"));
        ck_assert_uint_eq(o.n_writable, 2);
        ck_assert_int_eq(stat(tmp("work"), &st), 0);
        ck_assert(o.writable[0].dev == st.st_dev && o.writable[0].ino == st.st_ino);
        ck_assert(S_ISDIR(o.writable[0].mode));
        ck_assert(S_ISREG(o.writable[1].mode));
        ck_assert_ptr_null(o.root.path);
        policy_objects_clear(&o);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        /* Below a root_dir: the root canonical with its object, denied paths as given. */
        req_init(&r);
        r.pol.root_dir = strdup(tmp("./rootfs/"));
        r.pol.n_denied_read_paths = 1;
        r.pol.denied_read_paths = denied;
        ck_assert_int_eq(effective_as(&root_caller, &r, &e, &o), 0);
        ck_assert_str_eq(e->policy->root_dir, tmp("rootfs"));
        ck_assert_str_eq(o.root.path, tmp("rootfs"));
        ck_assert_int_eq(stat(tmp("rootfs"), &st), 0);
        ck_assert(o.root.dev == st.st_dev && o.root.ino == st.st_ino);
        ck_assert_str_eq(e->policy->denied_read_paths[0], denied[0]);
        policy_objects_clear(&o);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        /* root_dir "/" is the host's root: no object. */
        free(r.pol.root_dir);
        r.pol.root_dir = (char *)"/";
        ck_assert_int_eq(effective_as(&root_caller, &r, &e, &o), 0);
        ck_assert_str_eq(e->policy->root_dir, "/");
        ck_assert_ptr_null(o.root.path);
        policy_objects_clear(&o);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* ---- refusals --------------------------------------------------------------------------- */

/* One refused request: how to make it from a valid one, and what the refusal is. The
 * message is compared whole unless prefix is set (then it must start with it). */
struct refusal {
        const char *name;
        void (*make)(struct req *r);
        int err;
        const char *message; /* %s is tmpdir, at most twice */
        int prefix;
};

static char *many[SBX_MAX_ENV + 1];
static Sbx__V1__Label labels[SBX_MAX_LABELS + 1], *label_ptrs[SBX_MAX_LABELS + 1];
static uint32_t ids[65];

/* n strings "/nonexistent/dN" (absolute, missing: only their count matters). */
static char **many_paths(size_t n) {
        static char store[SBX_MAX_ENV + 1][48];
        size_t i;
        for (i = 0; i < n; i++) {
                snprintf(store[i], sizeof(store[i]), "/nonexistent/d%u", (unsigned)i);
                many[i] = store[i];
        }
        return many;
}

static void mk_timeout_zero(struct req *r) {
        r->cs.has_timeout_ms = 1;
        r->cs.timeout_ms = 0;
}

static void set_labels(struct req *r, size_t n) {
        static char key[] = "k", value[] = "v";
        size_t i;
        for (i = 0; i < n; i++) {
                sbx__v1__label__init(&labels[i]);
                labels[i].key = key;
                labels[i].value = value;
                label_ptrs[i] = &labels[i];
        }
        r->cs.n_labels = n;
        r->cs.labels = label_ptrs;
}

static void mk_too_many_labels(struct req *r) {
        set_labels(r, SBX_MAX_LABELS + 1);
}

static void mk_label_empty_key(struct req *r) {
        static char empty[] = "";
        set_labels(r, 2);
        labels[0].key = empty;
}

static void mk_label_long_value(struct req *r) {
        static char value[SBX_LABEL_MAX_BYTES + 2];
        memset(value, 'v', SBX_LABEL_MAX_BYTES + 1);
        set_labels(r, 2);
        labels[1].value = value;
}

static void mk_label_long_key(struct req *r) {
        static char key[SBX_LABEL_MAX_BYTES + 2];
        memset(key, 'k', SBX_LABEL_MAX_BYTES + 1);
        set_labels(r, 1);
        labels[0].key = key;
}

static void mk_too_many_env(struct req *r) {
        size_t i;
        for (i = 0; i < SBX_MAX_ENV + 1; i++)
                many[i] = (char *)"A=1";
        r->cs.n_env = SBX_MAX_ENV + 1;
        r->cs.env = many;
}

static void mk_env_no_equals(struct req *r) {
        static char *env[] = {"A=1", "NOEQUALS"};
        r->cs.n_env = 2;
        r->cs.env = env;
}

static void mk_env_no_name(struct req *r) {
        static char *env[] = {"=value"};
        r->cs.n_env = 1;
        r->cs.env = env;
}

static void mk_share_uids(struct req *r) {
        r->cs.n_share_uids = 65;
        r->cs.share_uids = ids;
}

static void mk_share_gids(struct req *r) {
        r->cs.n_share_gids = 65;
        r->cs.share_gids = ids;
}

static void mk_network(struct req *r) {
        r->pol.has_network = 1;
        r->pol.network = (Sbx__V1__NetworkMode)7;
}

static char *allow_one[] = {"pypi.org"};
static char *allow_literal[] = {"10.0.0.1"};
static char *allow_bad_cidr[] = {"10.0.0.0/33"};
static char *allow_many[257];

static void mk_hosts_no_allowlist(struct req *r) {
        r->pol.n_allowed_hosts = 1;
        r->pol.allowed_hosts = allow_one;
}

static void mk_host_literal(struct req *r) {
        r->pol.has_network = 1;
        r->pol.network = SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST;
        r->pol.n_allowed_hosts = 1;
        r->pol.allowed_hosts = allow_literal;
}

static void mk_too_many_hosts(struct req *r) {
        for (size_t i = 0; i < 257; i++)
                allow_many[i] = allow_one[0];
        r->pol.has_network = 1;
        r->pol.network = SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST;
        r->pol.n_allowed_hosts = 257;
        r->pol.allowed_hosts = allow_many;
}

static void mk_bad_cidr(struct req *r) {
        r->pol.has_network = 1;
        r->pol.network = SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST;
        r->pol.n_allowed_cidrs = 1;
        r->pol.allowed_cidrs = allow_bad_cidr;
}

static void mk_inherit(struct req *r) {
        r->pol.n_inherit_environment = SBX_MAX_ENV + 1;
        r->pol.inherit_environment = many_paths(SBX_MAX_ENV + 1);
}

static void mk_memory(struct req *r) {
        r->lim.has_memory_bytes = 1;
        r->lim.memory_bytes = 4 * 1024 * 1024 - 1;
}

static void mk_cpu_high(struct req *r) {
        r->lim.has_cpu_seconds = 1;
        r->lim.cpu_seconds = 1e9;
}

static void mk_cpu_zero(struct req *r) {
        r->lim.has_cpu_seconds = 1;
        r->lim.cpu_seconds = 0;
}

static void mk_cpu_negative(struct req *r) {
        r->lim.has_cpu_seconds = 1;
        r->lim.cpu_seconds = -1.5;
}

static void mk_cpu_nan(struct req *r) {
        r->lim.has_cpu_seconds = 1;
        r->lim.cpu_seconds = NAN;
}

static void mk_cpu_percent_low(struct req *r) {
        r->lim.has_cpu_percent = 1;
        r->lim.cpu_percent = 0;
}

static void mk_cpu_percent_high(struct req *r) {
        r->lim.has_cpu_percent = 1;
        r->lim.cpu_percent = 100 * 1024 + 1;
}

static void mk_processes(struct req *r) {
        r->lim.has_processes = 1;
        r->lim.processes = 0;
}

static void mk_file_size(struct req *r) {
        r->lim.has_file_size_bytes = 1;
        r->lim.file_size_bytes = 0;
}

static void mk_open_files_low(struct req *r) {
        r->lim.has_open_files = 1;
        r->lim.open_files = 7;
}

static void mk_open_files_high(struct req *r) {
        r->lim.has_open_files = 1;
        r->lim.open_files = 1048577;
}

static void mk_tmp(struct req *r) {
        r->lim.has_tmp_bytes = 1;
        r->lim.tmp_bytes = 64 * 1024 - 1;
}

static void mk_commands_zero(struct req *r) {
        r->lim.has_commands = 1;
        r->lim.commands = 0;
}

static void mk_commands_high(struct req *r) {
        r->lim.has_commands = 1;
        r->lim.commands = SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX + 1;
}

static void mk_queued_high(struct req *r) {
        r->lim.has_queued_commands = 1;
        r->lim.queued_commands = SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX + 1;
}

static void mk_too_many_writable(struct req *r) {
        r->pol.n_writable_paths = SBX_MAX_POLICY_PATHS + 1;
        r->pol.writable_paths = many_paths(SBX_MAX_POLICY_PATHS + 1);
}

static void mk_too_many_denied_read(struct req *r) {
        r->pol.n_denied_read_paths = SBX_MAX_POLICY_PATHS + 1;
        r->pol.denied_read_paths = many_paths(SBX_MAX_POLICY_PATHS + 1);
}

static void mk_too_many_denied_write(struct req *r) {
        r->pol.n_denied_write_paths = SBX_MAX_POLICY_PATHS + 1;
        r->pol.denied_write_paths = many_paths(SBX_MAX_POLICY_PATHS + 1);
}

static void mk_denied_relative(struct req *r) {
        static char *d[] = {"relative/path"};
        r->pol.n_denied_read_paths = 1;
        r->pol.denied_read_paths = d;
}

static void mk_denied_write_long(struct req *r) {
        static char longp[SBX_PATH_MAX_BYTES + 1], *d[1];
        memset(longp, 'a', SBX_PATH_MAX_BYTES);
        longp[0] = '/';
        d[0] = longp;
        r->pol.n_denied_write_paths = 1;
        r->pol.denied_write_paths = d;
}

static void set_writable(struct req *r, const char *path) {
        static char *w[1];
        w[0] = strdup(path);
        r->pol.n_writable_paths = 1;
        r->pol.writable_paths = w;
}

static void mk_writable_host_root(struct req *r) {
        set_writable(r, "/");
}

static void mk_writable_device(struct req *r) {
        set_writable(r, "/dev/null");
}

static void mk_writable_missing(struct req *r) {
        set_writable(r, tmp("missing"));
}

static void mk_writable_state_dir(struct req *r) {
        set_writable(r, tmp("state"));
}

static void mk_writable_in_denied(struct req *r) {
        static char *d[1];
        d[0] = strdup(tmp("link-to-work"));
        set_writable(r, tmp("work/sub"));
        r->pol.n_denied_read_paths = 1;
        r->pol.denied_read_paths = d;
}

static void mk_writable_in_credential(struct req *r) {
        set_writable(r, tmp("home/.ssh/tree"));
}

static void mk_root_in_credential(struct req *r) {
        r->pol.root_dir = strdup(tmp("home/.ssh/tree"));
}

static void mk_root_missing(struct req *r) {
        r->pol.root_dir = strdup(tmp("missing"));
}

static void mk_root_file(struct req *r) {
        r->pol.root_dir = strdup(tmp("work/file"));
}

static const struct refusal refusals[] = {
        {"timeout 0", mk_timeout_zero, EINVAL,
         "timeout_ms must be greater than 0 (omit it for the default of 300000 ms)", 0},
        {"labels", mk_too_many_labels, EINVAL, "too many labels (65, at most 64)", 0},
        {"label key empty", mk_label_empty_key, EINVAL,
         "label 0: the key must be 1 to 256 bytes and the value at most 256", 0},
        {"label key long", mk_label_long_key, EINVAL,
         "label 0: the key must be 1 to 256 bytes and the value at most 256", 0},
        {"label value long", mk_label_long_value, EINVAL,
         "label 1: the key must be 1 to 256 bytes and the value at most 256", 0},
        {"env entries", mk_too_many_env, EINVAL, "too many env entries (at most 4096)", 0},
        {"env no =", mk_env_no_equals, EINVAL, "env entry 'NOEQUALS' is not NAME=VALUE", 0},
        {"env no name", mk_env_no_name, EINVAL, "env entry '=value' is not NAME=VALUE", 0},
        {"share_uids", mk_share_uids, EINVAL, "at most 64 share_uids and 64 share_gids", 0},
        {"share_gids", mk_share_gids, EINVAL, "at most 64 share_uids and 64 share_gids", 0},
        {"network", mk_network, EINVAL, "network must be none, full or allowlist", 0},
        {"hosts without allowlist", mk_hosts_no_allowlist, EINVAL,
         "allowed_hosts and allowed_cidrs need network allowlist", 0},
        {"host literal", mk_host_literal, EINVAL,
         "allowed host \"10.0.0.1\": an IP address (use allowed_cidrs)", 0},
        {"hosts count", mk_too_many_hosts, EINVAL,
         "at most 256 allowed hosts and 256 allowed CIDRs", 0},
        {"cidr prefix", mk_bad_cidr, EINVAL,
         "allowed CIDR \"10.0.0.0/33\": the prefix must be 0..32", 0},
        {"inherit", mk_inherit, EINVAL, "inherit_environment has too many names", 0},
        {"memory", mk_memory, EINVAL, "memory 4194303 bytes is below the minimum of 4 MiB", 0},
        {"cpu high", mk_cpu_high, EINVAL, "cpu_seconds 1e+09 is above the maximum of 1e9", 0},
        {"cpu zero", mk_cpu_zero, EINVAL, "cpu_seconds 0 is not above 0", 0},
        {"cpu negative", mk_cpu_negative, EINVAL, "cpu_seconds -1.5 is not above 0", 0},
        {"cpu nan", mk_cpu_nan, EINVAL, "cpu_seconds nan is not a number", 0},
        {"cpu_percent low", mk_cpu_percent_low, EINVAL, "cpu_percent 0 is below the minimum of 1",
         0},
        {"cpu_percent high", mk_cpu_percent_high, EINVAL,
         "cpu_percent 102401 is above the maximum of 102400 (1024 CPUs)", 0},
        {"processes", mk_processes, EINVAL, "processes 0 is below the minimum of 1", 0},
        {"file_size", mk_file_size, EINVAL, "file_size 0 bytes is below the minimum of 1 byte", 0},
        {"open_files low", mk_open_files_low, EINVAL, "open_files 7 is below the minimum of 8", 0},
        {"open_files high", mk_open_files_high, EINVAL,
         "open_files 1048577 is above the maximum of 1048576", 0},
        {"tmp", mk_tmp, EINVAL, "tmp 65535 bytes is below the minimum of 64 KiB", 0},
        {"commands zero", mk_commands_zero, EINVAL, "commands 0 is below the minimum of 1", 0},
        {"commands high", mk_commands_high, EINVAL,
         "commands 17 is above the maximum of 16 (sbxd --max-commands)", 0},
        {"queued_commands high", mk_queued_high, EINVAL,
         "queued_commands 65 is above the maximum of 64 (sbxd --max-queued)", 0},
        {"writable count", mk_too_many_writable, EINVAL,
         "too many writable paths (257, at most 256)", 0},
        {"denied read count", mk_too_many_denied_read, EINVAL,
         "too many denied read path (257, at most 256)", 0},
        {"denied write count", mk_too_many_denied_write, EINVAL,
         "too many denied write path (257, at most 256)", 0},
        {"denied relative", mk_denied_relative, EINVAL,
         "denied read path 'relative/path' must be an absolute path shorter than 4096 bytes", 0},
        {"denied write long", mk_denied_write_long, EINVAL, "denied write path '/aaaa", 1},
        /* hostpath.c refuses the host's root first (the daemon's directories lie
         * below it), before policy.c's own "the whole host cannot be writable". */
        {"writable host root", mk_writable_host_root, EPERM,
         "writable path '/' is the daemon's own directory", 1},
        {"writable device", mk_writable_device, EINVAL,
         "writable path '/dev/null' is neither a directory nor a regular file", 0},
        {"writable missing", mk_writable_missing, ENOENT,
         "writable path '%s/missing' does not exist on the host", 1},
        {"writable daemon dir", mk_writable_state_dir, EPERM, "writable path", 1},
        {"writable in denied", mk_writable_in_denied, EINVAL,
         "writable path '%s/work/sub' lies inside '%s/work', which this sandbox hides "
         "(denied_read_paths, the daemon's own directories, or a credential of "
         "protect_defaults); a denial beats a permission, so it would be hidden: drop one of "
         "them",
         0},
        {"writable in credential", mk_writable_in_credential, EINVAL,
         "writable path '%s/home/.ssh/tree' lies inside '%s/home/.ssh', which this sandbox "
         "hides",
         1},
        {"root in credential", mk_root_in_credential, EACCES,
         "root_dir '%s/home/.ssh/tree' lies inside '%s/home/.ssh', a credential "
         "protect_defaults hides; use another root or --no-protect-defaults",
         0},
        {"root missing", mk_root_missing, ENOENT, "root_dir '%s/missing' does not exist", 1},
        {"root a file", mk_root_file, ENOTDIR, "root_dir", 1},
};

/* fmt with each "%s" replaced by tmpdir, into buf. */
static void expand(char *buf, size_t size, const char *fmt) {
        size_t n = 0;

        while (*fmt && n + 1 < size) {
                if (fmt[0] == '%' && fmt[1] == 's') {
                        n += (size_t)snprintf(buf + n, size - n, "%s", tmpdir);
                        fmt += 2;
                } else {
                        buf[n++] = *fmt++;
                }
        }
        buf[n < size ? n : size - 1] = '\0';
}

START_TEST(refused) {
        const struct refusal *f = &refusals[_i];
        static struct req r;
        char want[2048];
        int rc;

        if (!need_root(f->name))
                return;
        daemon_setup(0);
        req_init(&r);
        f->make(&r);
        rc = effective(&r, NULL);
        expand(want, sizeof(want), f->message);
        ck_assert_msg(rc == -f->err, "%s: returned %d (%s), not -%s", f->name, rc, err,
                      strerror(f->err));
        if (f->prefix)
                ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
                              "%s: message \"%s\" does not start with \"%s\"", f->name, err, want);
        else
                ck_assert_msg(strcmp(err, want) == 0, "%s: message \"%s\", not \"%s\"", f->name,
                              err, want);
}
END_TEST

/* Each limit's bound itself is allowed: the refusals above are off by one. */
START_TEST(bounds_allowed) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;

        daemon_setup(0);
        req_init(&r);
        r.lim.has_memory_bytes = 1;
        r.lim.memory_bytes = 4 * 1024 * 1024;
        r.lim.has_cpu_seconds = 1;
        r.lim.cpu_seconds = 1e9 - 1;
        r.lim.has_cpu_percent = 1;
        r.lim.cpu_percent = 100 * 1024;
        r.lim.has_processes = 1;
        r.lim.processes = 1;
        r.lim.has_file_size_bytes = 1;
        r.lim.file_size_bytes = 1;
        r.lim.has_open_files = 1;
        r.lim.open_files = 8;
        r.lim.has_tmp_bytes = 1;
        r.lim.tmp_bytes = 64 * 1024;
        r.lim.has_commands = 1;
        r.lim.commands = 1;
        r.lim.has_queued_commands = 1;
        r.lim.queued_commands = 0;
        set_labels(&r, SBX_MAX_LABELS);
        r.cs.n_share_uids = 64;
        r.cs.share_uids = ids;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->n_labels, SBX_MAX_LABELS);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.lim.open_files = 1048576;
        r.lim.cpu_percent = 1;
        r.lim.commands = SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX;
        r.lim.queued_commands = SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX;
        ck_assert_int_eq(effective(&r, &e), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The command caps follow the daemon's flags: absent, its --max-commands and
 * --max-queued; given, kept up to them (--max-queued 0: no queue, and none asked for
 * is refused). */
START_TEST(command_caps) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;

        daemon_setup(0);
        cfg.max_commands_per_sandbox = 4;
        cfg.max_queued_per_sandbox = 0;
        req_init(&r);
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert(e->policy->limits->has_commands && e->policy->limits->commands == 4);
        ck_assert(e->policy->limits->has_queued_commands &&
                  e->policy->limits->queued_commands == 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        r.lim.has_commands = 1;
        r.lim.commands = 3;
        r.lim.has_queued_commands = 1;
        r.lim.queued_commands = 0;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->commands, 3);
        ck_assert(e->policy->limits->has_queued_commands &&
                  e->policy->limits->queued_commands == 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        r.lim.commands = 5;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "commands 5 is above the maximum of 4 (sbxd --max-commands)");
        r.lim.commands = 4;
        r.lim.queued_commands = 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "queued_commands 1 is above the maximum of 0 (sbxd --max-queued)");

        cfg.max_queued_per_sandbox = SBX_MAX_QUEUED_PER_SANDBOX;
        r.lim.queued_commands = SBX_MAX_QUEUED_PER_SANDBOX;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->queued_commands, SBX_MAX_QUEUED_PER_SANDBOX);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The command caps are the daemon's alone: init never sees them. Requests that differ
 * only in them have one warm pool key (sandbox_request_key, the Setup a warm sandbox is
 * matched by), that of the default policy the pool is made of: neither cap keeps a
 * warm sandbox from serving a request. */
START_TEST(command_caps_warm_key) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        uint8_t *key[3] = {NULL};
        size_t len[3] = {0};

        daemon_setup(0);
        req_init(&r);
        r.cs.policy = NULL; /* as warm.c asks for the pool's sandboxes */
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_int_eq(sandbox_request_key(&ctx, e, &key[0], &len[0]), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        req_init(&r);
        r.lim.has_commands = 1;
        r.lim.commands = 1;
        r.lim.has_queued_commands = 1;
        r.lim.queued_commands = 0;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->commands, 1);
        ck_assert_int_eq(sandbox_request_key(&ctx, e, &key[1], &len[1]), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        r.lim.commands = SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX;
        r.lim.queued_commands = 7;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_int_eq(sandbox_request_key(&ctx, e, &key[2], &len[2]), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        for (int i = 1; i < 3; i++) {
                ck_assert_uint_eq(len[i], len[0]);
                ck_assert(memcmp(key[i], key[0], len[0]) == 0);
        }
        for (int i = 0; i < 3; i++)
                free(key[i]);
}
END_TEST

/* Host paths are judged with the caller's rights: a directory nobody may write is
 * refused to a caller who is not its owner. */
START_TEST(caller_rights) {
        static const struct caller nobody = {.uid = 65534, .gid = 65534};
        static struct req r;

        if (!need_root("caller_rights"))
                return;
        daemon_setup(0);
        req_init(&r);
        set_writable(&r, tmp("work"));
        ck_assert_int_eq(effective_as(&nobody, &r, NULL, NULL), -EACCES);
        ck_assert_msg(strstr(err, tmp("work")) != NULL, "message \"%s\" names no path", err);
        ck_assert_int_eq(effective_as(&root_caller, &r, NULL, NULL), 0);
}
END_TEST

/* ---- the view --------------------------------------------------------------------------- */

/* Builds the view of the effective form of r. */
static void view_of_request(const struct req *r, struct policy_view *v) {
        Sbx__V1__CreateSandbox *e;

        ck_assert_int_eq(effective(r, &e), 0);
        ck_assert_int_eq(policy_view_build(&ctx, e, v), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}

/* The daemon's own directories and the denied paths are hidden in every view; with
 * protect_defaults, the credentials under $HOME are watched, and hidden when a
 * sandbox's user could read them (.aws, not the private .ssh); without it, none. */
START_TEST(view_hides) {
        static struct req r;
        static char *denied[1];
        struct policy_view v;

        if (!need_root("view_hides"))
                return;
        daemon_setup(0);
        req_init(&r);
        denied[0] = strdup(tmp("work/sub"));
        r.pol.n_denied_read_paths = 1;
        r.pol.denied_read_paths = denied;
        view_of_request(&r, &v);
        ck_assert(set_has(v.hidden, tmp("state")));
        ck_assert(set_has(v.hidden, tmp("run")));
        ck_assert(set_has(v.hidden, tmp("work/sub")));
        ck_assert(set_has(v.watched_shared, tmp("home/.ssh")));
        ck_assert(set_has(v.watched_shared, tmp("home/.aws")));
        ck_assert(set_has(v.watched_shared, tmp("home/.netrc"))); /* missing: watched */
        ck_assert(set_has(v.hidden_shared, tmp("home/.aws")));
        ck_assert(!set_has(v.hidden_shared, tmp("home/.ssh")));
        ck_assert(!set_has(v.hidden_shared, tmp("home/.netrc")));
        ck_assert_uint_eq(v.protected_paths->n, 0);
        policy_view_clear(&v);

        r.pol.has_protect_defaults = 1;
        r.pol.protect_defaults = 0;
        view_of_request(&r, &v);
        ck_assert(set_has(v.hidden, tmp("state")));
        ck_assert(set_has(v.hidden, tmp("work/sub")));
        ck_assert_ptr_null(v.hidden_shared);
        ck_assert_ptr_null(v.watched_shared);
        policy_view_clear(&v);
}
END_TEST

/* Inside a writable path the sandbox acts as the owner: every credential there is
 * hidden, readable by others or not; in a repository, git's configuration and the
 * shell's start-up files are kept read-only, and the parts of .git that git would
 * follow are made (placeholders) when missing. */
START_TEST(view_of_writable_paths) {
        static struct req r;
        static char *w[2];
        struct policy_view v;

        if (!need_root("view_of_writable_paths"))
                return;
        daemon_setup(0);
        req_init(&r);
        w[0] = strdup(tmp("home"));
        w[1] = strdup(tmp("repo"));
        r.pol.n_writable_paths = 2;
        r.pol.writable_paths = w;
        view_of_request(&r, &v);
        ck_assert(set_has(v.hidden, tmp("home/.ssh")));
        ck_assert(set_has(v.hidden, tmp("home/.aws")));
        ck_assert(!set_has(v.hidden, tmp("home/.netrc"))); /* missing: the guard's */
        ck_assert(set_has(v.protected_paths, tmp("repo/.git/config")));
        ck_assert(set_has(v.protected_paths, tmp("repo/.bashrc")));
        ck_assert(!set_has(v.protected_paths, tmp("repo/.zshrc")));
        ck_assert(set_has(v.made_dirs, tmp("repo/.git/hooks")));
        ck_assert(set_has(v.made_dirs, tmp("repo/.git/info")));
        ck_assert(set_has(v.made_files, tmp("repo/.git/commondir")));
        ck_assert(set_has(v.made_files, tmp("repo/.git/config.worktree")));
        ck_assert(!set_has(v.made_dirs, tmp("home/.git/hooks"))); /* not a repository */
        policy_view_clear(&v);
}
END_TEST

/* Below a root_dir, what is hidden is named as the view sees it: a denied path as
 * given, the daemon's directories and the credentials when they lie below the root. */
START_TEST(view_below_root_dir) {
        static struct req r;
        static char *denied[] = {"/etc/secret"};
        struct policy_view v;

        if (!need_root("view_below_root_dir"))
                return;
        daemon_setup(0);
        req_init(&r);
        r.pol.root_dir = strdup(tmpdir);
        r.pol.n_denied_read_paths = 1;
        r.pol.denied_read_paths = denied;
        view_of_request(&r, &v);
        ck_assert(set_has(v.hidden, "/etc/secret"));
        ck_assert(set_has(v.hidden, "/state"));
        ck_assert(set_has(v.hidden, "/run"));
        ck_assert(set_has(v.hidden, "/home/.aws"));
        ck_assert(!set_has(v.hidden, "/home/.ssh"));
        ck_assert(set_has(v.watched, "/home/.ssh"));
        ck_assert_ptr_null(v.hidden_shared);
        policy_view_clear(&v);
}
END_TEST

/* Placeholders are removed with the last sandbox that holds them, and only while they
 * are still placeholders (an empty directory, a file with its content). */
START_TEST(placeholders_released) {
        struct pathset *made;
        char *v[4];

        if (!need_root("placeholders_released"))
                return;
        daemon_setup(0);
        make_dir(tmp("repo/.git/hooks"), 0755);
        make_dir(tmp("repo/.git/info"), 0755);
        make_file(tmp("repo/.git/info/exclude"), "*.o\n"); /* filled since: kept */
        make_file(tmp("repo/.git/commondir"), ".\n");
        make_file(tmp("repo/.git/config.worktree"), "[x]\n"); /* changed since: kept */
        v[0] = strdup(tmp("repo/.git/hooks"));
        v[1] = strdup(tmp("repo/.git/info"));
        v[2] = strdup(tmp("repo/.git/commondir"));
        v[3] = strdup(tmp("repo/.git/config.worktree"));
        made = calloc(1, sizeof(*made));
        ck_assert_ptr_nonnull(made);
        made->refs = 1;
        made->n = 4;
        made->v = calloc(4, sizeof(char *));
        memcpy(made->v, v, sizeof(v));
        policy_hold_made(made, 0, 0);
        policy_hold_made(made, 0, 0);
        policy_release_made(made);
        ck_assert_int_eq(access(tmp("repo/.git/hooks"), F_OK), 0); /* still held */
        policy_release_made(made);
        ck_assert_int_eq(access(tmp("repo/.git/hooks"), F_OK), -1);
        ck_assert_int_eq(access(tmp("repo/.git/commondir"), F_OK), -1);
        ck_assert_int_eq(access(tmp("repo/.git/info/exclude"), F_OK), 0);
        ck_assert_int_eq(access(tmp("repo/.git/config.worktree"), F_OK), 0);
        pathset_unref(made);
        ck_assert_int_eq(policy_passwd_gid(0), 0);
}
END_TEST

/* ---- Setup ------------------------------------------------------------------------------ */

/* The Setup of an effective request: the sandbox's own fields, the view's hidden,
 * read-only and placeholder paths, the objects' identities, the owner in root mode,
 * the cgroup v1 controllers. */
START_TEST(setup_filled) {
        static struct req r;
        static char *w[1], *dw[1];
        Sbx__V1__CreateSandbox *e;
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_objects o;
        struct policy_view v;
        struct cgroup cg;
        struct policy_sandbox ps;
        void *mem = NULL;
        struct stat st;

        if (!need_root("setup_filled"))
                return;
        daemon_setup(0);
        req_init(&r);
        w[0] = strdup(tmp("repo"));
        dw[0] = strdup(tmp("repo/.bashrc"));
        r.pol.n_writable_paths = 1;
        r.pol.writable_paths = w;
        r.pol.n_denied_write_paths = 1;
        r.pol.denied_write_paths = dw;
        r.lim.has_tmp_bytes = 1;
        r.lim.tmp_bytes = 1u << 20;
        ck_assert_int_eq(effective_as(&root_caller, &r, &e, &o), 0);
        ck_assert_int_eq(policy_view_build(&ctx, e, &v), 0);
        memset(&cg, 0, sizeof(cg));
        cg.path[CG_PIDS] = (char *)"/sys/fs/cgroup/pids/x";
        cgroups.version = CGROUP_V1;
        ps = (struct policy_sandbox){.id = id,
                                     .workspace = tmp("ws"),
                                     .spec = e,
                                     .run_uid = 2100000001,
                                     .run_gid = 2100000001,
                                     .owner_uid = 1000,
                                     .owner_gid = 1001,
                                     .cg = &cg};
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, &o, &setup, &mem), 0);
        ck_assert_str_eq(setup.sandbox_id, id);
        ck_assert_str_eq(setup.hostname, id);
        ck_assert_str_eq(setup.root_dir, "/");
        ck_assert_str_eq(setup.workspace_dir, tmp("ws"));
        ck_assert(setup.has_network_none && setup.network_none);
        ck_assert_uint_eq(setup.tmp_bytes, 1u << 20);
        ck_assert_uint_eq(setup.run_uid, 2100000001);
        ck_assert(setup.has_rootless && !setup.rootless);
        ck_assert(setup.has_owner_uid && setup.owner_uid == 1000 && setup.owner_gid == 1001);
        ck_assert_uint_eq(setup.n_writable_paths, 1);
        ck_assert_str_eq(setup.writable_paths[0], tmp("repo"));
        ck_assert_uint_eq(setup.n_writable_objects, 1);
        ck_assert_int_eq(stat(tmp("repo"), &st), 0);
        ck_assert(setup.writable_objects[0]->dev == st.st_dev &&
                  setup.writable_objects[0]->ino == st.st_ino);
        ck_assert_ptr_null(setup.root_object);
        ck_assert(has_str(setup.denied_read_paths, setup.n_denied_read_paths, tmp("state")));
        ck_assert(has_str(setup.denied_read_paths, setup.n_denied_read_paths, tmp("home/.aws")));
        ck_assert_uint_eq(setup.n_denied_read_paths, v.hidden->n + v.hidden_shared->n);
        ck_assert_uint_eq(setup.n_denied_write_paths, 1);
        ck_assert(has_str(setup.protected_paths, setup.n_protected_paths, tmp("repo/.git/config")));
        ck_assert(
                has_str(setup.protected_mkdirs, setup.n_protected_mkdirs, tmp("repo/.git/hooks")));
        ck_assert_uint_eq(setup.n_protected_files, 2);
        for (size_t i = 0; i < setup.n_protected_files; i++) {
                const Sbx__Init__V1__MadeFile *f = setup.protected_files[i];
                bool commondir = strcmp(f->path, tmp("repo/.git/commondir")) == 0;
                ck_assert(commondir || strcmp(f->path, tmp("repo/.git/config.worktree")) == 0);
                ck_assert_uint_eq(f->content.len, commondir ? 2 : 0);
        }
        ck_assert_uint_eq(setup.n_cgroup_v1_controllers, 1);
        ck_assert_str_eq(setup.cgroup_v1_controllers[0], "pids");
        policy_free_setup(&setup, mem);

        /* An owner unknown (an adopted sandbox), or rootless: no owner ids. */
        ps.owner_uid = (uid_t)-1;
        setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), 0);
        ck_assert(!setup.has_owner_uid && !setup.rootless);
        ck_assert_uint_eq(setup.n_writable_objects, 0);
        policy_free_setup(&setup, mem);
        ps.owner_uid = 1000;
        ctx.features.rootless = 1;
        setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), 0);
        ck_assert(!setup.has_owner_uid && setup.rootless);
        policy_free_setup(&setup, mem);
        policy_view_clear(&v);
        policy_objects_clear(&o);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* A view hiding more than SBX_MAX_HIDDEN_PATHS is refused (-E2BIG), and what was
 * allocated is freed by policy_free_setup all the same. */
START_TEST(setup_too_many_hidden) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_view v;
        struct policy_sandbox ps;
        struct pathset *many_hidden;
        void *mem = NULL;

        daemon_setup(0);
        req_init(&r);
        r.pol.has_protect_defaults = 1;
        r.pol.protect_defaults = 0;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_int_eq(policy_view_build(&ctx, e, &v), 0);
        many_hidden = calloc(1, sizeof(*many_hidden));
        ck_assert_ptr_nonnull(many_hidden);
        many_hidden->refs = 1;
        many_hidden->n = SBX_MAX_HIDDEN_PATHS + 1;
        many_hidden->v = calloc(many_hidden->n, sizeof(char *));
        for (size_t i = 0; i < many_hidden->n; i++)
                many_hidden->v[i] = strdup("/hidden");
        pathset_unref(v.hidden);
        v.hidden = many_hidden;
        ps = (struct policy_sandbox){
                .id = id, .workspace = "/ws", .spec = e, .owner_uid = (uid_t)-1};
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), -E2BIG);
        policy_free_setup(&setup, mem);
        many_hidden->n = SBX_MAX_HIDDEN_PATHS;
        setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), 0);
        ck_assert_uint_eq(setup.n_denied_read_paths, SBX_MAX_HIDDEN_PATHS);
        policy_free_setup(&setup, mem);
        many_hidden->n = SBX_MAX_HIDDEN_PATHS + 1; /* all of them freed */
        policy_view_clear(&v);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The disk limit (issue 20): its bounds, named in the refusal; the daemon's defaults
 * where the policy sets none (a policy's own wins); keep_workspace refused where only a
 * tmpfs enforces it; and Setup carries it (in the warm pool's key, and as init's tmpfs
 * where that is the means). */
START_TEST(disk_limit) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_sandbox ps;
        struct policy_view v;
        void *mem = NULL;

        daemon_setup(0);
        ctx.features.disk_mech = DISK_MECH_IMAGE;
        req_init(&r);
        r.lim.has_disk_bytes = 1;
        r.lim.disk_bytes = DISK_MIN_BYTES - 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk 1048575 bytes is below the minimum of 1 MiB");
        r.lim.disk_bytes = cfg.max_disk_bytes + 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk 1099511627777 bytes is above the maximum of "
                              "1099511627776 bytes (sbxd --max-disk)");
        r.lim.disk_bytes = 4 * DISK_MIN_BYTES;
        r.lim.has_disk_inodes = 1;
        r.lim.disk_inodes = 15;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk_inodes 15 is below the minimum of 16");
        r.lim.disk_inodes = 2049;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk_inodes 2049 is above the maximum of 2048 (one per 2048 bytes "
                              "of disk)");
        r.lim.has_disk_bytes = 0;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk_inodes needs disk_bytes (sbx create --disk SIZE)");

        /* The daemon's defaults, where the policy sets none. */
        r.lim.has_disk_inodes = 0;
        cfg.default_disk_bytes = 2 * DISK_MIN_BYTES;
        cfg.default_disk_inodes = 100;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert(e->policy->limits->has_disk_bytes &&
                  e->policy->limits->disk_bytes == 2 * DISK_MIN_BYTES);
        ck_assert(e->policy->limits->has_disk_inodes && e->policy->limits->disk_inodes == 100);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.lim.has_disk_bytes = 1;
        r.lim.disk_bytes = 8 * DISK_MIN_BYTES;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->disk_bytes, 8 * DISK_MIN_BYTES);

        /* Setup: an image is the daemon's; init is told of the limit (the warm key). */
        ck_assert_int_eq(policy_view_build(&ctx, e, &v), 0);
        ps = (struct policy_sandbox){
                .id = id, .workspace = "/ws", .spec = e, .owner_uid = (uid_t)-1};
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), 0);
        ck_assert(setup.has_workspace_bytes && setup.workspace_bytes == 8 * DISK_MIN_BYTES);
        ck_assert(setup.has_workspace_tmpfs && !setup.workspace_tmpfs);
        policy_free_setup(&setup, mem);
        /* Where only a tmpfs can hold it, init makes that tmpfs. */
        ctx.features.disk_mech = DISK_MECH_TMPFS;
        setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, NULL, &setup, &mem), 0);
        ck_assert(setup.has_workspace_tmpfs && setup.workspace_tmpfs);
        ck_assert_uint_eq(setup.workspace_inodes, 100);
        policy_free_setup(&setup, mem);
        policy_view_clear(&v);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        /* A tmpfs ends with its sandbox: keep_workspace is refused with a limit. */
        r.cs.has_keep_workspace = r.cs.keep_workspace = 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_msg(strstr(err, "keep_workspace cannot be combined with a disk limit"), "%s",
                      err);
        ctx.features.disk_mech = DISK_MECH_IMAGE;
        ck_assert_int_eq(effective(&r, NULL), 0);
}
END_TEST

/* ---- the suite -------------------------------------------------------------------------- */

static void add_case(Suite *s, const char *name, const TTest *t) {
        TCase *tc = tcase_create(name);
        tcase_set_timeout(tc, TEST_TIMEOUT_SECS);
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_test(tc, t);
        suite_add_tcase(s, tc);
}

static Suite *make_suite(void) {
        Suite *s = suite_create("policy");
        TCase *tc;

        add_case(s, "defaults", defaults_filled);
        add_case(s, "given", given_values_kept_or_capped);
        add_case(s, "processes", process_limit_where_it_holds);
        add_case(s, "environment", environment_defaults_yield);
        add_case(s, "allowlist", allowlist_effective);
        add_case(s, "host_paths", host_paths_canonical);
        add_case(s, "bounds", bounds_allowed);
        add_case(s, "command_caps", command_caps);
        add_case(s, "command_caps_warm_key", command_caps_warm_key);
        add_case(s, "caller", caller_rights);
        add_case(s, "view_hides", view_hides);
        add_case(s, "view_writable", view_of_writable_paths);
        add_case(s, "view_root_dir", view_below_root_dir);
        add_case(s, "placeholders", placeholders_released);
        add_case(s, "setup", setup_filled);
        add_case(s, "setup_too_many_hidden", setup_too_many_hidden);
        add_case(s, "disk_limit", disk_limit);
        tc = tcase_create("refusals");
        tcase_set_timeout(tc, TEST_TIMEOUT_SECS);
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, refused, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
