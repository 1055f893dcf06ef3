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
 * a repository in a writable path; the placeholders' counting and removal of
 * placeholder.c, and the passwd lookup of etcpasswd.c, with them), and the Setup that
 * policy_setup() fills from it (and its one refusal, a view that hides too much). Each
 * test case gets a fresh temporary tree, made and removed from the runner's process;
 * $HOME points into it so that the credentials found are the tree's. Runs as root
 * (hostpath.c takes the caller's identity); as another user the tests that need root
 * say so and pass. */
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
#include "etcpasswd.h"
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
#define MAX_MEMORY_BYTES   (8ull << 30)
#define MAX_TMP_BYTES      (2ull << 30)
#define MAX_CPU_PERCENT    400u

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
        /* The ceilings of memory, /tmp and cpu_percent that depend on the host, fixed. */
        cfg.max_memory_bytes = MAX_MEMORY_BYTES;
        cfg.max_tmp_bytes = MAX_TMP_BYTES;
        cfg.max_cpu_percent = MAX_CPU_PERCENT;
        memset(&ctx, 0, sizeof(ctx));
        ctx.cfg = &cfg;
        ctx.cgroups = &cgroups;
        ctx.features.rootless = rootless;
        /* A host whose hard rlimits bound nothing (limit_bounds sets some). */
        ctx.features.limits = (struct bounds_host){.page_bytes = 4096,
                                                   .cpu_hard = UINT64_MAX,
                                                   .fsize_hard = UINT64_MAX,
                                                   .nofile_hard = UINT64_MAX,
                                                   .nproc_hard = UINT64_MAX};
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

/* The lifetime at the daemon's maximum, an idle timeout of 0 (none) and the limits a
 * request sets are kept as given; none above its ceiling is lowered: each is refused
 * (the process limit above --max-processes was clamped silently, the lifetime above
 * --max-sandbox-timeout lowered). */
START_TEST(given_values_kept_or_refused) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        const Sbx__V1__Limits *l;

        daemon_setup(0);
        req_init(&r);
        r.cs.has_timeout_ms = 1;
        r.cs.timeout_ms = MAX_LIFETIME_MS;
        r.cs.has_idle_timeout_ms = 1;
        r.cs.idle_timeout_ms = 0;
        r.pol.has_network = 1;
        r.pol.network = SBX__V1__NETWORK_MODE__NETWORK_FULL;
        r.pol.has_protect_defaults = 1;
        r.pol.protect_defaults = 0;
        r.lim.has_memory_bytes = 1;
        r.lim.memory_bytes = 64u << 20;
        r.lim.has_cpu_seconds = 1;
        r.lim.cpu_seconds = 3;
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
        ck_assert(l->cpu_seconds == 3);
        ck_assert_uint_eq(l->processes, 10);
        ck_assert_uint_eq(l->tmp_bytes, 1u << 20);
        ck_assert(l->core_dumps);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);

        r.cs.timeout_ms = MAX_LIFETIME_MS + 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "timeout_ms 3600001 ms is above the maximum of 3600000 ms (sbxd "
                              "--max-sandbox-timeout)");
        r.cs.timeout_ms = UINT64_MAX;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        r.cs.timeout_ms = 1;
        r.cs.idle_timeout_ms = MAX_LIFETIME_MS;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->timeout_ms, 1);
        ck_assert_uint_eq(e->idle_timeout_ms, MAX_LIFETIME_MS);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.cs.idle_timeout_ms = UINT64_MAX;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "idle_timeout_ms 18446744073709551615 ms is above the maximum of "
                              "3600000 ms (sbxd --max-sandbox-timeout)");
        r.cs.idle_timeout_ms = 0;
        /* Root mode with a pids cgroup: the ceiling is --max-processes's. */
        cgroups.version = CGROUP_V2;
        cgroups.v2_controllers = 1 << CG_PIDS;
        r.lim.processes = MAX_PROCESSES + 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "processes 4097 is above the maximum of 4096 (sbxd --max-processes)");
        r.lim.processes = MAX_PROCESSES;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->processes, MAX_PROCESSES);
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
        r->lim.cpu_seconds = 2e9;
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
        free(w[0]); /* a test may name a second one */
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
        {"memory", mk_memory, EINVAL,
         "memory 4194303 bytes is below the minimum of 4194304 bytes (4 MiB)", 0},
        {"cpu high", mk_cpu_high, EINVAL,
         "cpu_seconds 2000000000 is above the maximum of 1000000000", 0},
        {"cpu zero", mk_cpu_zero, EINVAL, "cpu_seconds 0 is below the minimum of 1", 0},
        {"cpu negative", mk_cpu_negative, EINVAL, "cpu_seconds -1.5 is below the minimum of 1", 0},
        {"cpu nan", mk_cpu_nan, EINVAL, "cpu_seconds nan is not a number", 0},
        {"cpu_percent low", mk_cpu_percent_low, EINVAL, "cpu_percent 0 is below the minimum of 1",
         0},
        {"cpu_percent high", mk_cpu_percent_high, EINVAL,
         "cpu_percent 102401 is above the maximum of 400 (sbxd --max-cpu-percent)", 0},
        {"processes", mk_processes, EINVAL, "processes 0 is below the minimum of 3", 0},
        {"file_size", mk_file_size, EINVAL, "file_size 0 bytes is below the minimum of 1 byte", 0},
        {"open_files low", mk_open_files_low, EINVAL, "open_files 7 is below the minimum of 8", 0},
        {"open_files high", mk_open_files_high, EINVAL,
         "open_files 1048577 is above the maximum of 1048576 (fs.nr_open's default)", 0},
        {"tmp", mk_tmp, EINVAL, "tmp 65535 bytes is below the minimum of 65536 bytes (64 KiB)", 0},
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

/* Each limit of Limits with its floor and ceiling on a host with hard rlimits (as
 * sbx-init inherits them) and the daemon flags of daemon_setup, spelled out here rather
 * than read from bounds.h, so that a wrong bound there fails: the name, the unit, the
 * step and what the refusal says of the ceiling. */
static const struct bound_case {
        const char *field; /* in Limits */
        const char *name;  /* in messages */
        const char *unit;  /* after a value: " bytes", "" */
        uint64_t floor, ceiling;
        const char *floor_says;   /* after "is below the minimum of " */
        const char *ceiling_says; /* after "is above the maximum of " */
        uint64_t step;            /* 0: any */
        const char *step_says;    /* the refusal of floor + 1, after "NAME FLOOR+1UNIT " */
} bound_cases[] = {
        {"memory_bytes", "memory", " bytes", 4194304, MAX_MEMORY_BYTES, "4194304 bytes (4 MiB)",
         "8589934592 bytes (8 GiB, sbxd --max-memory)", 4096,
         "is not a whole number of pages of 4096 bytes, which a memory cgroup counts: it would "
         "be 4194304 bytes; ask for that"},
        {"cpu_percent", "cpu_percent", "", 1, MAX_CPU_PERCENT, "1", "400 (sbxd --max-cpu-percent)",
         0, NULL},
        {"processes", "processes", "", 3, 3000, "3", "3000 (sbxd's hard RLIMIT_NPROC)", 0, NULL},
        {"file_size_bytes", "file_size", " bytes", 1, 5000000, "1 byte",
         "5000000 bytes (sbxd's hard RLIMIT_FSIZE)", 0, NULL},
        {"open_files", "open_files", "", 8, 20000, "8", "20000 (sbxd's hard RLIMIT_NOFILE)", 0,
         NULL},
        {"tmp_bytes", "tmp", " bytes", 65536, MAX_TMP_BYTES, "65536 bytes (64 KiB)",
         "2147483648 bytes (2 GiB, sbxd --max-tmp)", 4096,
         "is not a whole number of pages of 4096 bytes, which a tmpfs counts: it would be 69632 "
         "bytes; ask for that"},
        {"commands", "commands", "", 1, 16, "1", "16 (sbxd --max-commands)", 0, NULL},
        {"queued_commands", "queued_commands", "", 0, 64, NULL, "64 (sbxd --max-queued)", 0, NULL},
        {"disk_bytes", "disk", " bytes", 1048576, 1ull << 40, "1048576 bytes (1 MiB)",
         "1099511627776 bytes (1 TiB, sbxd --max-disk)", 4096,
         "is not a whole number of blocks of 4096 bytes, which the filesystem that enforces it "
         "counts: ask for 1048576 bytes or 1052672 bytes"},
        /* With disk_bytes 64 MiB (set below). */
        {"disk_inodes", "disk_inodes", "", 16, 32768, "16", "32768 (one per 2048 bytes of disk)", 0,
         NULL},
};

/* Sets the Limits field f of lim to v (through its descriptor: uint32 fields get v's
 * low 32 bits, as a client's -1 arrives as 4294967295). */
static void set_limit(Sbx__V1__Limits *lim, const char *f, uint64_t v) {
        const ProtobufCFieldDescriptor *d =
                protobuf_c_message_descriptor_get_field_by_name(&sbx__v1__limits__descriptor, f);
        char *base = (char *)lim;
        uint32_t v32 = (uint32_t)v;

        ck_assert_ptr_nonnull(d);
        *(protobuf_c_boolean *)(void *)(base + d->quantifier_offset) = 1;
        if (d->type == PROTOBUF_C_TYPE_UINT64)
                memcpy(base + d->offset, &v, sizeof(v));
        else
                memcpy(base + d->offset, &v32, sizeof(v32));
}

static uint64_t get_limit(const Sbx__V1__Limits *lim, const char *f) {
        const ProtobufCFieldDescriptor *d =
                protobuf_c_message_descriptor_get_field_by_name(&sbx__v1__limits__descriptor, f);
        const char *base = (const char *)lim;
        uint64_t v = 0;
        uint32_t v32 = 0;

        ck_assert(*(const protobuf_c_boolean *)(const void *)(base + d->quantifier_offset));
        if (d->type == PROTOBUF_C_TYPE_UINT64) {
                memcpy(&v, base + d->offset, sizeof(v));
                return v;
        }
        memcpy(&v32, base + d->offset, sizeof(v32));
        return v32;
}

/* The bounds' host: hard rlimits that are lower than the built-in ceilings. */
static void bounding_host(void) {
        ctx.features.limits.nproc_hard = 3000;
        ctx.features.limits.fsize_hard = 5000000;
        ctx.features.limits.nofile_hard = 20000;
        ctx.features.disk_mech = DISK_MECH_TMPFS; /* no free space to compare */
}

/* v for the case's field alone is accepted, and the effective request (what GetSandbox
 * shows) holds exactly v. */
static void expect_kept(const struct bound_case *k, uint64_t v) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;

        req_init(&r);
        if (strcmp(k->field, "disk_inodes") == 0)
                set_limit(&r.lim, "disk_bytes", 64ull << 20);
        set_limit(&r.lim, k->field, v);
        ck_assert_msg(effective(&r, &e) == 0, "%s %llu refused: %s", k->field,
                      (unsigned long long)v, err);
        ck_assert_uint_eq(get_limit(e->policy->limits, k->field), v);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}

/* v for the case's field alone is refused, with want (a printf format of v). */
static void expect_refused(const struct bound_case *k, uint64_t v, const char *fmt, ...) {
        static struct req r;
        char want[512], rest[400];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(rest, sizeof(rest), fmt, ap);
        va_end(ap);
        snprintf(want, sizeof(want), "%s %llu%s %s", k->name, (unsigned long long)v, k->unit, rest);
        req_init(&r);
        if (strcmp(k->field, "disk_inodes") == 0)
                set_limit(&r.lim, "disk_bytes", 64ull << 20);
        set_limit(&r.lim, k->field, v);
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_msg(strcmp(err, want) == 0, "%s: \"%s\", not \"%s\"", k->field, err, want);
}

/* Below the floor, at it, at the ceiling, above it, the largest value the wire carries
 * (UINT64_MAX, or a uint32's -1) and a value between two steps. */
START_TEST(limit_bounds) {
        const struct bound_case *k = &bound_cases[_i];
        uint64_t wire_max = strcmp(k->unit, " bytes") == 0 || strcmp(k->field, "disk_inodes") == 0
                                    ? UINT64_MAX
                                    : UINT32_MAX;

        daemon_setup(0);
        bounding_host();
        if (k->floor > 0)
                expect_refused(k, k->floor - 1, "is below the minimum of %s", k->floor_says);
        expect_kept(k, k->floor);
        expect_kept(k, k->ceiling);
        expect_refused(k, k->ceiling + 1, "is above the maximum of %s", k->ceiling_says);
        expect_refused(k, wire_max, "is above the maximum of %s", k->ceiling_says);
        if (k->step)
                expect_refused(k, k->floor + 1, "%s", k->step_says);
}
END_TEST

/* cpu_seconds, the one limit that is not a whole number on the wire: RLIMIT_CPU counts
 * whole seconds, from 1 to 1e9 (less on a host whose hard RLIMIT_CPU is lower); NaN,
 * infinities, negatives, zero and 1e-300 are refused (1e-300 was accepted, and became a
 * limit of 1 s while GetSandbox said 1e-300). */
START_TEST(cpu_seconds_bounds) {
        static const struct {
                double v;
                const char *err; /* NULL: kept as it is */
        } cases[] = {
                {1, NULL},
                {1e9, NULL},
                {0, "cpu_seconds 0 is below the minimum of 1"},
                {-0.0, "cpu_seconds -0 is below the minimum of 1"},
                {-1.5, "cpu_seconds -1.5 is below the minimum of 1"},
                {1e-300, "cpu_seconds 1e-300 is below the minimum of 1"},
                {0.999, "cpu_seconds 0.999 is below the minimum of 1"},
                {1e9 + 1, "cpu_seconds 1000000001 is above the maximum of 1000000000"},
                {1e300, "cpu_seconds 1e+300 is above the maximum of 1000000000"},
                {INFINITY, "cpu_seconds inf is above the maximum of 1000000000"},
                {-INFINITY, "cpu_seconds -inf is below the minimum of 1"},
                {NAN, "cpu_seconds nan is not a number"},
                {1.5, "cpu_seconds 1.5 is not a whole number of seconds, which RLIMIT_CPU counts: "
                      "it would be 2; ask for that"},
                {2.0000000000000004, "cpu_seconds 2.0000000000000004 is not a whole number of "
                                     "seconds, which RLIMIT_CPU counts: it would be 3; ask for "
                                     "that"},
        };
        static struct req r;
        Sbx__V1__CreateSandbox *e;
        size_t i;

        daemon_setup(0);
        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                req_init(&r);
                r.lim.has_cpu_seconds = 1;
                r.lim.cpu_seconds = cases[i].v;
                if (!cases[i].err) {
                        ck_assert_msg(effective(&r, &e) == 0, "%g: %s", cases[i].v, err);
                        ck_assert(e->policy->limits->cpu_seconds == cases[i].v);
                        sbx__v1__create_sandbox__free_unpacked(e, NULL);
                        continue;
                }
                ck_assert_int_eq(effective(&r, NULL), -EINVAL);
                ck_assert_msg(strcmp(err, cases[i].err) == 0, "%g: \"%s\"", cases[i].v, err);
        }
        /* A hard RLIMIT_CPU of sbxd: a command is killed a second past its soft limit,
         * which must stay below it. */
        ctx.features.limits.cpu_hard = 100;
        req_init(&r);
        r.lim.has_cpu_seconds = 1;
        r.lim.cpu_seconds = 99;
        ck_assert_int_eq(effective(&r, &e), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.lim.cpu_seconds = 100;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "cpu_seconds 100 is above the maximum of 99 (a second below sbxd's "
                              "hard RLIMIT_CPU)");
}
END_TEST

/* The defaults stay within the bounds: /tmp's is --max-tmp where that is less than
 * 256 MiB, the process limit the ceiling of its mechanism (RLIMIT_NPROC's when that is
 * less than --max-processes). */
START_TEST(defaults_within_bounds) {
        static struct req r;
        Sbx__V1__CreateSandbox *e;

        daemon_setup(0);
        cfg.max_tmp_bytes = 1ull << 20;
        ctx.features.limits.nproc_hard = 1000;
        req_init(&r);
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->tmp_bytes, 1ull << 20);
        ck_assert_uint_eq(e->policy->limits->processes, 1000);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        /* With a pids cgroup, RLIMIT_NPROC is no bound. */
        cgroups.version = CGROUP_V2;
        cgroups.v2_controllers = 1 << CG_PIDS;
        cfg.max_tmp_bytes = MAX_TMP_BYTES;
        ck_assert_int_eq(effective(&r, &e), 0);
        ck_assert_uint_eq(e->policy->limits->tmp_bytes, SBX_DEFAULT_TMP_BYTES);
        ck_assert_uint_eq(e->policy->limits->processes, MAX_PROCESSES);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        /* --max-processes 0: the kernel's most, PID_MAX_LIMIT. */
        cfg.max_processes = 0;
        req_init(&r);
        r.lim.has_processes = 1;
        r.lim.processes = SBX_MAX_PROCESSES;
        ck_assert_int_eq(effective(&r, &e), 0);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
        r.lim.processes = SBX_MAX_PROCESSES + 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "processes 4194305 is above the maximum of 4194304 (PID_MAX_LIMIT, "
                              "the most pids a pids cgroup holds)");
}
END_TEST

/* Every field of Limits with a number has a case above, and bounds.h a bound: a field
 * added to sbx.proto without one fails here. */
START_TEST(every_limit_bounded) {
        const ProtobufCMessageDescriptor *m = &sbx__v1__limits__descriptor;
        unsigned i, k;

        for (i = 0; i < m->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &m->fields[i];
                int found = 0;
                if (f->type == PROTOBUF_C_TYPE_BOOL)
                        continue;
                for (k = 0; k < sizeof(bound_cases) / sizeof(bound_cases[0]); k++)
                        found |= strcmp(bound_cases[k].field, f->name) == 0;
                found |= strcmp(f->name, "cpu_seconds") == 0; /* cpu_seconds_bounds */
                ck_assert_msg(found, "Limits.%s has no bound case", f->name);
                for (k = 0, found = 0; k < LIMIT_N; k++)
                        found |= strcmp(bounds_fields[k], f->name) == 0;
                ck_assert_msg(found, "Limits.%s has no bound in bounds.h", f->name);
        }
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
 * refused to a caller who is not its owner; root is judged as root, and may name
 * another user's private directory. */
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
        /* Root is judged as root: another user's private directory is root's to name. */
        make_dir(tmp("private"), 0700);
        ck_assert_int_eq(chown(tmp("private"), 65534, 65534), 0);
        set_writable(&r, tmp("private"));
        ck_assert_int_eq(effective_as(&nobody, &r, NULL, NULL), 0);
        ck_assert_msg(effective_as(&root_caller, &r, NULL, NULL) == 0, "root: %s", err);
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
        struct policy_view view = {0};
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
        view.made_dirs = made;
        placeholder_hold(view.made_dirs, view.made_dirs_as, 0, 0);
        placeholder_hold(view.made_dirs, view.made_dirs_as, 0, 0);
        placeholder_release(made);
        ck_assert_int_eq(access(tmp("repo/.git/hooks"), F_OK), 0); /* still held */
        placeholder_release(made);
        ck_assert_int_eq(access(tmp("repo/.git/hooks"), F_OK), -1);
        ck_assert_int_eq(access(tmp("repo/.git/commondir"), F_OK), -1);
        ck_assert_int_eq(access(tmp("repo/.git/info/exclude"), F_OK), 0);
        ck_assert_int_eq(access(tmp("repo/.git/config.worktree"), F_OK), 0);
        pathset_unref(made);
        ck_assert_int_eq(etcpasswd_gid(0), 0);
}
END_TEST

/* A placeholder is removed with the ids it was made with (policy_setup's made_dirs_as):
 * in a repository whose .git only a group lets the owner write, with that group; as
 * the owner alone, it could not be. */
START_TEST(placeholders_released_with_their_ids) {
        struct placeholder_ids as[1] = {{3101, 3105}};
        struct policy_view view = {0};
        struct pathset *made;

        if (!need_root("placeholders_released_with_their_ids"))
                return;
        daemon_setup(0);
        make_dir(tmp("team"), 0755);
        make_dir(tmp("team/.git"), 02775);
        ck_assert_int_eq(chown(tmp("team/.git"), 0, 3105), 0);
        ck_assert_int_eq(chmod(tmp("team/.git"), 02775), 0);
        make_dir(tmp("team/.git/hooks"), 0755);
        ck_assert_int_eq(chown(tmp("team/.git/hooks"), 3101, 3105), 0);
        made = calloc(1, sizeof(*made));
        ck_assert_ptr_nonnull(made);
        made->refs = 1;
        made->n = 1;
        made->v = calloc(1, sizeof(char *));
        made->v[0] = strdup(tmp("team/.git/hooks"));
        view.made_dirs = made;

        /* As the owner's ids (3101:3101, no group): out of reach, kept. */
        placeholder_hold(view.made_dirs, view.made_dirs_as, 3101, 3101);
        placeholder_release(made);
        ck_assert_int_eq(access(tmp("team/.git/hooks"), F_OK), 0);

        view.made_dirs_as = as;
        placeholder_hold(view.made_dirs, view.made_dirs_as, 3101, 3101);
        placeholder_release(made);
        ck_assert_int_eq(access(tmp("team/.git/hooks"), F_OK), -1);
        pathset_unref(made);
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
        /* Opened by root: bound as the path's owner and group, a directory in /tmp. */
        ck_assert_uint_eq(setup.n_writable_binds, 1);
        ck_assert(setup.writable_binds[0]->uid == st.st_uid &&
                  setup.writable_binds[0]->gid == st.st_gid &&
                  !setup.writable_binds[0]->system_dir);
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
        /* Rootless writable paths are plain binds: no ids for them. */
        setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &v, &o, &setup, &mem), 0);
        ck_assert_uint_eq(setup.n_writable_objects, 1);
        ck_assert_uint_eq(setup.n_writable_binds, 0);
        ck_assert_ptr_null(v.made_dirs_as);
        policy_free_setup(&setup, mem);
        policy_view_clear(&v);
        policy_objects_clear(&o);
        sbx__v1__create_sandbox__free_unpacked(e, NULL);
}
END_TEST

/* The Setup of caller k's request for the writable paths w (n of them), for a sandbox
 * owned by owner (run ids of the sandbox range), with the view and objects it was made
 * from: cleared by setup_done. */
struct bound {
        Sbx__V1__CreateSandbox *e;
        Sbx__Init__V1__Setup setup;
        struct policy_objects o;
        struct policy_view v;
        void *mem;
};

static void setup_for(const struct caller *k, char **w, size_t n, struct bound *b) {
        static struct req r;
        struct policy_sandbox ps;

        req_init(&r);
        r.pol.n_writable_paths = n;
        r.pol.writable_paths = w;
        memset(b, 0, sizeof(*b));
        ck_assert_msg(effective_as(k, &r, &b->e, &b->o) == 0, "uid %u: %s", (unsigned)k->uid, err);
        ck_assert_int_eq(policy_view_build(&ctx, b->e, &b->v), 0);
        ps = (struct policy_sandbox){.id = id,
                                     .workspace = tmp("ws"),
                                     .spec = b->e,
                                     .run_uid = 2100000001,
                                     .run_gid = 2100000001,
                                     .owner_uid = k->uid,
                                     .owner_gid = k->gid};
        b->setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ck_assert_int_eq(policy_setup(&ctx, &ps, &b->v, &b->o, &b->setup, &b->mem), 0);
        ck_assert_uint_eq(b->setup.n_writable_binds, n);
}

static void setup_done(struct bound *b) {
        policy_free_setup(&b->setup, b->mem);
        policy_view_clear(&b->v);
        policy_objects_clear(&b->o);
        sbx__v1__create_sandbox__free_unpacked(b->e, NULL);
}

static void assert_bind(const struct bound *b, size_t i, uid_t uid, gid_t gid, int system_dir) {
        const Sbx__Init__V1__WritableBind *wb = b->setup.writable_binds[i];

        ck_assert_msg(wb->has_uid && wb->has_gid && wb->uid == uid && wb->gid == gid &&
                              (wb->has_system_dir && wb->system_dir) == system_dir,
                      "%s bound as %u:%u%s, not %u:%u%s", b->setup.writable_paths[i],
                      (unsigned)wb->uid, (unsigned)wb->gid, wb->system_dir ? " (system)" : "",
                      (unsigned)uid, (unsigned)gid, system_dir ? " (system)" : "");
}

/* How each writable path is bound in root mode: as the ids the kernel judged the
 * caller by. The owner's own directory and a sticky world-writable one of root's (others'
 * bits) as the owner's ids; a setgid project of root's group that the owner may write as
 * a member of that group with that group instead of the owner's (its placeholders too),
 * and refused to a caller not in it; for root, as each path's owner and group, a system
 * directory marked (not /var/tmp, not a directory of the test's in /tmp). */
START_TEST(writable_binds) {
        static const gid_t team_groups[] = {3105};
        static const struct caller member = {
                .uid = 3101, .gid = 3101, .groups = team_groups, .n_groups = 1};
        static const struct caller stranger = {.uid = 3103, .gid = 3103};
        static char *w[4];
        const struct placeholder_ids *as = NULL;
        struct bound b;
        size_t i;

        if (!need_root("writable_binds"))
                return;
        daemon_setup(0);
        make_dir(tmp("mine"), 0755);
        ck_assert_int_eq(chown(tmp("mine"), 3101, 3101), 0);
        make_dir(tmp("sticky"), 01777);
        make_dir(tmp("team"), 0775);
        make_dir(tmp("team/.git"), 0775);
        ck_assert_int_eq(chown(tmp("team"), 0, 3105), 0);
        ck_assert_int_eq(chown(tmp("team/.git"), 3102, 3105), 0);
        ck_assert_int_eq(chmod(tmp("team"), 02775), 0);
        ck_assert_int_eq(chmod(tmp("team/.git"), 02775), 0);

        w[0] = strdup(tmp("mine"));
        w[1] = strdup(tmp("sticky"));
        w[2] = strdup(tmp("team"));
        setup_for(&member, w, 3, &b);
        assert_bind(&b, 0, 3101, 3101, 0);
        assert_bind(&b, 1, 3101, 3101, 0);
        assert_bind(&b, 2, 3101, 3105, 0);
        ck_assert_ptr_nonnull(b.v.made_dirs_as);
        ck_assert_ptr_nonnull(b.v.made_files_as);
        for (i = 0; i < b.v.made_dirs->n; i++)
                if (strcmp(b.v.made_dirs->v[i], tmp("team/.git/hooks")) == 0)
                        as = &b.v.made_dirs_as[i];
        ck_assert_msg(as && as->uid == 3101 && as->gid == 3105, "the placeholder's ids");
        ck_assert_uint_gt(b.v.made_files->n, 0);
        ck_assert(b.v.made_files_as[0].uid == 3101 && b.v.made_files_as[0].gid == 3105);
        setup_done(&b);

        {
                static struct req r;
                req_init(&r);
                set_writable(&r, tmp("team"));
                ck_assert_int_eq(effective_as(&stranger, &r, NULL, NULL), -EACCES);
                ck_assert_msg(strstr(err, tmp("team")) != NULL, "%s", err);
        }

        for (i = 0; i < 3; i++)
                free(w[i]);
        w[0] = strdup(tmp("mine"));
        w[1] = strdup(tmp("team"));
        w[2] = strdup("/etc/opt");
        w[3] = strdup("/var/tmp");
        setup_for(&root_caller, w, 4, &b);
        assert_bind(&b, 0, 3101, 3101, 0);
        assert_bind(&b, 1, 0, 3105, 0);
        assert_bind(&b, 2, 0, 0, 1);
        assert_bind(&b, 3, 0, 0, 0);
        setup_done(&b);
        for (i = 0; i < 4; i++)
                free(w[i]);
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

/* The disk limit (docs/sandboxes.md, "Disk limit"): its bounds, named in the refusal; the
 * daemon's defaults where the policy sets none (a policy's own wins); keep_workspace
 * refused where only a tmpfs enforces it; and Setup carries it (in the warm pool's key, and
 * as init's tmpfs where that is the means). */
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
        ck_assert_str_eq(err, "disk 1048575 bytes is below the minimum of 1048576 bytes (1 MiB)");
        r.lim.disk_bytes = cfg.max_disk_bytes + 1;
        ck_assert_int_eq(effective(&r, NULL), -EINVAL);
        ck_assert_str_eq(err, "disk 1099511627777 bytes is above the maximum of "
                              "1099511627776 bytes (1 TiB, sbxd --max-disk)");
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
        add_case(s, "given", given_values_kept_or_refused);
        add_case(s, "processes", process_limit_where_it_holds);
        add_case(s, "environment", environment_defaults_yield);
        add_case(s, "allowlist", allowlist_effective);
        add_case(s, "host_paths", host_paths_canonical);
        add_case(s, "cpu_seconds_bounds", cpu_seconds_bounds);
        add_case(s, "defaults_within_bounds", defaults_within_bounds);
        add_case(s, "every_limit_bounded", every_limit_bounded);
        add_case(s, "command_caps", command_caps);
        add_case(s, "command_caps_warm_key", command_caps_warm_key);
        add_case(s, "caller", caller_rights);
        add_case(s, "view_hides", view_hides);
        add_case(s, "view_writable", view_of_writable_paths);
        add_case(s, "view_root_dir", view_below_root_dir);
        add_case(s, "placeholders", placeholders_released);
        add_case(s, "setup", setup_filled);
        add_case(s, "writable_binds", writable_binds);
        add_case(s, "placeholders_released_with_their_ids", placeholders_released_with_their_ids);
        add_case(s, "setup_too_many_hidden", setup_too_many_hidden);
        add_case(s, "disk_limit", disk_limit);
        tc = tcase_create("limit_bounds");
        tcase_set_timeout(tc, TEST_TIMEOUT_SECS);
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, limit_bounds, 0,
                            (int)(sizeof(bound_cases) / sizeof(bound_cases[0])));
        suite_add_tcase(s, tc);
        tc = tcase_create("refusals");
        tcase_set_timeout(tc, TEST_TIMEOUT_SECS);
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, refused, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
