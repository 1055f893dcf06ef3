/* check_cgroup.c: unit tests of daemon/cgroup.c.
 *
 * The v2 and v1 code runs against fake cgroupfs trees in a temporary directory (a
 * mkdir function lays out the control files the kernel would create), so the v2 path is
 * tested on this cgroup-v1 machine too. One test uses the real hierarchy of this host
 * when it is usable (root, cgroup v1 or v2), creating groups only beneath the test's own
 * cgroup and removing them in a teardown that runs even when the test fails. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "testutil.h"

static char tmp[512];

static void put(const char *dir, const char *name, const char *content) {
        char p[1400];
        FILE *f;
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        fclose(f);
}

static void get(const char *dir, const char *name, char *buf, size_t len) {
        char p[1400];
        FILE *f;
        size_t n;
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        f = fopen(p, "r");
        ck_assert_msg(f != NULL, "missing %s", p);
        n = fread(buf, 1, len - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* What the kernel creates in a new group directory, for both versions. */
static int fake_mkdir(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0)
                return -1;
        put(path, "cgroup.procs", "");
        put(path, "cgroup.controllers", "cpuset cpu io memory pids\n");
        put(path, "cgroup.subtree_control", "");
        put(path, "cgroup.kill", "");
        put(path, "memory.max", "max\n");
        put(path, "memory.swap.max", "max\n");
        put(path, "memory.peak", "12345678\n");
        put(path, "memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n");
        put(path, "pids.max", "max\n");
        put(path, "pids.events", "max 3\n");
        put(path, "cpu.max", "max 100000\n");
        put(path, "memory.limit_in_bytes", "9223372036854771712\n");
        put(path, "memory.max_usage_in_bytes", "7654321\n");
        put(path, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
        put(path, "memory.swappiness", "60\n");
        put(path, "cpu.cfs_period_us", "100000\n");
        put(path, "cpu.cfs_quota_us", "-1\n");
        put(path, "freezer.state", "THAWED\n");
        return 0;
}

static void rm_tree(const char *dir) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* The base directory is made and removed by the runner process (an unchecked fixture),
 * so it goes even when a test fails; each test works in a subdirectory of its own. */
static char base_dir[256];

static void setup_base(void) {
        snprintf(base_dir, sizeof(base_dir), "/tmp/check_cgroup.XXXXXX");
        if (!mkdtemp(base_dir))
                abort();
}

static void teardown_base(void) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", base_dir);
}

static void setup_tmp(void) {
        snprintf(tmp, sizeof(tmp), "%s/t.XXXXXX", base_dir);
        ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown_tmp(void) {
        rm_tree(tmp);
}

/* Empties a fake group directory (the kernel's files vanish with the group). */
static void fake_empty(const char *dir) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "find '%s' -maxdepth 1 -type f -delete", dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* Collects the names cgroup_foreach_child gives, comma-separated. */
static int collect_name(const char *name, void *ud) {
        char *acc = ud;
        if (acc[0])
                strcat(acc, ",");
        strcat(acc, name);
        return 0;
}

START_TEST(v2_fake_tree) {
        char root[1100], own[1200], self[1100], buf[256], p[1400];
        struct cgroup_env *e;
        struct cgroup *g;
        struct cgroup_limits l = {64u << 20, 64, 50};
        int enforced = 0, fds[8], v2 = 0, n;
        uint64_t v;

        snprintf(root, sizeof(root), "%s/v2", tmp);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        put(root, "cgroup.controllers", "cpuset cpu io memory pids\n");
        snprintf(own, sizeof(own), "%s/svc.slice", root);
        ck_assert_int_eq(fake_mkdir(own, 0755), 0);
        snprintf(self, sizeof(self), "%s/self_cgroup", tmp);
        {
                FILE *f = fopen(self, "w");
                fputs("0::/svc.slice\n", f);
                fclose(f);
        }
        ck_assert_int_eq(cgroup_env_new_with(root, self, "sbxd-t", 4242, fake_mkdir, &e), 0);
        ck_assert_int_eq(e->version, CGROUP_V2);
        ck_assert_str_eq(cgroup_version_name(e->version), "v2");
        /* The daemon moved itself into a leaf before enabling controllers. */
        snprintf(p, sizeof(p), "%s/daemon", own);
        get(p, "cgroup.procs", buf, sizeof(buf));
        ck_assert_str_eq(buf, "4242");
        ck_assert_int_eq(e->v2_controllers, (1 << CG_MEMORY) | (1 << CG_PIDS) | (1 << CG_CPU));
        /* The daemon's own bounds go on that leaf, never on its own group (whose
         * subtree, the sandboxes' too, a bound there would cap). */
        ck_assert_int_eq(cgroup_env_limit_self(e, 4242, 256u << 20, 500), 0);
        get(p, "memory.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "268435456");
        get(p, "pids.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "500");
        get(own, "memory.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "max\n");
        get(own, "pids.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "max\n");

        ck_assert_int_eq(cgroup_create(e, "sbx-a", 0, &g), 0);
        snprintf(p, sizeof(p), "%s/sbxd-t/sbx-a", own);
        ck_assert_str_eq(g->v2_path, p);
        /* A group with children enables controllers for them; a leaf that will hold
         * processes must not (the no-internal-processes rule). */
        get(p, "cgroup.subtree_control", buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(buf, "+"));
        {
                struct cgroup *leaf;
                char lp[1500];
                ck_assert_int_eq(cgroup_create(e, "sbx-a/init", 1, &leaf), 0);
                snprintf(lp, sizeof(lp), "%s/init", p);
                get(lp, "cgroup.subtree_control", buf, sizeof(buf));
                ck_assert_str_eq(buf, "");
                fake_empty(lp);
                ck_assert_int_eq(cgroup_destroy(leaf), 0);
        }
        ck_assert_int_eq(cgroup_set_limits(g, &l, &enforced), 0);
        ck_assert_int_eq(enforced, (1 << CG_MEMORY) | (1 << CG_PIDS) | (1 << CG_CPU));
        get(p, "memory.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "67108864");
        get(p, "memory.swap.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "0");
        get(p, "pids.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "64");
        get(p, "cpu.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "50000 100000");
        ck_assert_int_eq(cgroup_peak_memory(g, &v), 0);
        ck_assert_uint_eq(v, 12345678);
        ck_assert_int_eq(cgroup_oom_kills(g, &v), 0);
        ck_assert_uint_eq(v, 2);
        ck_assert_int_eq(cgroup_pids_max_events(g, &v), 0);
        ck_assert_uint_eq(v, 3);
        n = cgroup_join_fds(g, fds, 8, &v2);
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(v2, 1);
        close(fds[0]);
        put(p, "cgroup.procs", "777");
        ck_assert_int_eq(cgroup_kill(g), 0);
        get(p, "cgroup.kill", buf, sizeof(buf));
        ck_assert_str_eq(buf, "1");
        fake_empty(p);
        ck_assert_int_eq(cgroup_destroy(g), 0);
        ck_assert_int_eq(access(p, F_OK), -1);
        cgroup_env_free(e);
}
END_TEST

START_TEST(v2_without_delegation_is_none) {
        char root[1100], own[1200], self[1100];
        struct cgroup_env *e;
        struct cgroup *g;

        if (geteuid() == 0)
                return; /* root may write anywhere; the access check cannot fail */
        snprintf(root, sizeof(root), "%s/v2", tmp);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        put(root, "cgroup.controllers", "memory pids\n");
        snprintf(own, sizeof(own), "%s/locked", root);
        ck_assert_int_eq(fake_mkdir(own, 0555), 0);
        chmod(own, 0555);
        snprintf(self, sizeof(self), "%s/self_cgroup", tmp);
        put(tmp, "self_cgroup", "0::/locked\n");
        ck_assert_int_eq(cgroup_env_new_with(root, self, "sbxd-t", 1, fake_mkdir, &e), 0);
        ck_assert_int_eq(e->version, CGROUP_NONE);
        ck_assert_int_eq(cgroup_create(e, "x", 0, &g), -EOPNOTSUPP);
        cgroup_env_free(e);
        chmod(own, 0755);
}
END_TEST

START_TEST(v1_fake_tree) {
        static const char *ctrls[] = {"memory", "pids", "cpu", "freezer", "cpuacct"};
        char root[1100], p[1400], buf[256], self[1100];
        struct cgroup_env *e;
        struct cgroup *g;
        struct cgroup_limits l = {64u << 20, 32, 150};
        int enforced = 0, fds[8], v2 = 1, n, i, status;
        uint64_t v;
        pid_t child;

        snprintf(root, sizeof(root), "%s/v1", tmp);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        for (i = 0; i < 5; i++) {
                snprintf(p, sizeof(p), "%s/%s", root, ctrls[i]);
                ck_assert_int_eq(fake_mkdir(p, 0755), 0);
        }
        snprintf(p, sizeof(p), "%s/memory/process_api", root);
        ck_assert_int_eq(fake_mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/memory/process_api/abc", root);
        ck_assert_int_eq(fake_mkdir(p, 0755), 0);
        put(tmp, "self_cgroup",
            "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/process_api/abc\n2:cpuacct:/\n"
            "1:cpu:/\n0::/\n");
        snprintf(self, sizeof(self), "%s/self_cgroup", tmp);
        ck_assert_int_eq(cgroup_env_new_with(root, self, "sbxd-t", 0, fake_mkdir, &e), 0);
        ck_assert_int_eq(e->version, CGROUP_V1);
        snprintf(p, sizeof(p), "%s/memory/process_api/abc/sbxd-t", root);
        ck_assert_str_eq(e->base[CG_MEMORY], p);
        snprintf(p, sizeof(p), "%s/pids/sbxd-t", root);
        ck_assert_str_eq(e->base[CG_PIDS], p);

        ck_assert_int_eq(cgroup_create(e, "sbx-b", 0, &g), 0);
        {
                /* The groups under the base, as the start-up sweep of stale ones sees them:
                 * one left in a single hierarchy too (a removal cut short), each once. */
                char names[256] = "";
                snprintf(p, sizeof(p), "%s/pids/sbxd-t/sbx-left", root);
                ck_assert_int_eq(fake_mkdir(p, 0755), 0);
                ck_assert_int_eq(cgroup_foreach_child(e, collect_name, names), 0);
                ck_assert_str_eq(names, "sbx-b,sbx-left");
        }
        ck_assert_int_eq(cgroup_set_limits(g, &l, &enforced), 0);
        ck_assert_int_eq(enforced, (1 << CG_MEMORY) | (1 << CG_PIDS) | (1 << CG_CPU));
        get(g->path[CG_MEMORY], "memory.limit_in_bytes", buf, sizeof(buf));
        ck_assert_str_eq(buf, "67108864");
        get(g->path[CG_PIDS], "pids.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "32");
        get(g->path[CG_CPU], "cpu.cfs_quota_us", buf, sizeof(buf));
        ck_assert_str_eq(buf, "150000");
        ck_assert_int_eq(cgroup_peak_memory(g, &v), 0);
        ck_assert_uint_eq(v, 7654321);
        ck_assert_int_eq(cgroup_oom_kills(g, &v), 0);
        ck_assert_uint_eq(v, 1);
        n = cgroup_join_fds(g, fds, 8, &v2);
        ck_assert_int_eq(n, 4);
        ck_assert_int_eq(v2, 0);
        for (i = 0; i < n; i++)
                close(fds[i]);
        /* Too small an fd array: nothing leaks, a clear error. */
        ck_assert_int_eq(cgroup_join_fds(g, fds, 2, &v2), -ENOBUFS);

        /* The v1 kill reads cgroup.procs and kills each pid: prove it on our own child. */
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        snprintf(buf, sizeof(buf), "%d\n", (int)child);
        put(g->path[CG_PIDS], "cgroup.procs", buf);
        ck_assert_int_eq(cgroup_count_procs(g), 0); /* memory's list (first) is empty */
        ck_assert_int_ge(cgroup_kill(g), 1);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        get(g->path[CG_FREEZER], "freezer.state", buf, sizeof(buf));
        ck_assert_str_eq(buf, "THAWED");
        for (i = 0; i < CG_N; i++)
                if (g->path[i])
                        fake_empty(g->path[i]);
        ck_assert_int_eq(cgroup_destroy(g), 0);

        /* The daemon's own bounds: a group "<base>.daemon" beside the base in the memory
         * and pids hierarchies, which it joins; its own group and the base keep theirs.
         * At exit it goes back to its own group and the groups go. */
        ck_assert_int_eq(cgroup_env_limit_self(e, 4343, 128u << 20, 300), 0);
        snprintf(p, sizeof(p), "%s/memory/process_api/abc/sbxd-t.daemon", root);
        ck_assert_str_eq(e->self[CG_MEMORY], p);
        get(p, "memory.limit_in_bytes", buf, sizeof(buf));
        ck_assert_str_eq(buf, "134217728");
        get(p, "cgroup.procs", buf, sizeof(buf));
        ck_assert_str_eq(buf, "4343");
        snprintf(p, sizeof(p), "%s/pids/sbxd-t.daemon", root);
        get(p, "pids.max", buf, sizeof(buf));
        ck_assert_str_eq(buf, "300");
        get(e->base[CG_MEMORY], "memory.limit_in_bytes", buf, sizeof(buf));
        ck_assert_str_eq(buf, "9223372036854771712\n");
        ck_assert_ptr_null(e->self[CG_CPU]);
        for (i = 0; i < CG_N; i++)
                if (e->self[i])
                        fake_empty(e->self[i]);
        cgroup_env_unlimit_self(e, 4343);
        snprintf(p, sizeof(p), "%s/memory/process_api/abc", root);
        get(p, "cgroup.procs", buf, sizeof(buf));
        ck_assert_str_eq(buf, "4343");
        snprintf(p, sizeof(p), "%s/pids/sbxd-t.daemon", root);
        ck_assert_int_eq(access(p, F_OK), -1);
        ck_assert_ptr_null(e->self[CG_PIDS]);
        cgroup_env_free(e);
}
END_TEST

START_TEST(none_when_nothing_mounted) {
        struct cgroup_env *e;
        struct cgroup *g;
        char self[1100];
        snprintf(self, sizeof(self), "%s/does-not-exist", tmp);
        ck_assert_int_eq(cgroup_env_new_with(tmp, self, "sbxd-t", 0, fake_mkdir, &e), 0);
        ck_assert_int_eq(e->version, CGROUP_NONE);
        ck_assert_str_eq(cgroup_version_name(e->version), "none");
        ck_assert_int_eq(cgroup_create(e, "x", 0, &g), -EOPNOTSUPP);
        /* Nothing to bound the daemon with: said, not pretended. */
        ck_assert_int_eq(cgroup_env_limit_self(e, 1, 1u << 30, 0), -ENOENT);
        ck_assert_int_eq(cgroup_env_limit_self(e, 1, 0, 100), -ENOENT);
        cgroup_env_unlimit_self(e, 1);
        cgroup_env_free(e);
}
END_TEST

/* ---- the host's real hierarchies ----------------------------------------------------- */

static char real_base[64];
/* The cgroup2 mount of a hybrid host (no controllers: v1 holds them), and a copy of
 * our /proc/self/cgroup with only its v2 line, so that the v2 code runs there. */
static const char unified_root[] = "/sys/fs/cgroup/unified";
static char v2_only_file[64];

static void remove_base(const char *root, const char *self_file) {
        struct cgroup_env *e;
        if (cgroup_env_new(root, self_file, real_base, 0, &e) == 0) {
                cgroup_remove_tree(e, "grp");
                cgroup_env_remove_base(e);
                cgroup_env_free(e);
        }
}

/* In the parent, before the tests fork (so that the teardown knows the file too). */
static void real_setup(void) {
        char line[4096], own[4096] = "";
        FILE *in, *out;
        int fd;

        if (access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) < 0)
                return;
        in = fopen("/proc/self/cgroup", "re");
        if (!in)
                return;
        while (fgets(line, sizeof(line), in))
                if (strncmp(line, "0::", 3) == 0)
                        snprintf(own, sizeof(own), "%s", line);
        fclose(in);
        snprintf(v2_only_file, sizeof(v2_only_file), "/tmp/check_cgroup.v2.XXXXXX");
        fd = mkstemp(v2_only_file);
        if (fd < 0 || !(out = fdopen(fd, "w"))) {
                v2_only_file[0] = '\0';
                return;
        }
        fputs(own, out);
        fclose(out);
}

static void real_teardown(void) {
        if (real_base[0] == '\0')
                snprintf(real_base, sizeof(real_base), "sbxd-unittest-%d", (int)getpid());
        remove_base("/sys/fs/cgroup", "/proc/self/cgroup");
        if (v2_only_file[0]) {
                remove_base(unified_root, v2_only_file);
                unlink(v2_only_file);
        }
}

/* A group made in e: limits where its controllers allow them (want: those that must
 * hold), a process that joins it as sbx-init does and forks, both killed through the
 * group, the group gone. */
static void real_group_life(struct cgroup_env *e, int want) {
        struct cgroup *g;
        struct cgroup_limits l = {32u << 20, 16, 0};
        int enforced = 0, status, i, p[2], join[8], n_join, v2 = 0;
        pid_t child;
        char c;

        ck_assert_int_eq(cgroup_create(e, "grp", 0, &g), 0);
        ck_assert_int_eq(cgroup_set_limits(g, &l, &enforced), 0);
        ck_assert_int_eq(enforced & want, want);
        ck_assert_int_eq(pipe(p), 0);
        n_join = cgroup_join_fds(g, join, 8, &v2);
        ck_assert_int_gt(n_join, 0);
        ck_assert_int_eq(v2, e->version == CGROUP_V2);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                /* Wait, join the group as sbx-init does (writing "0" moves the writer),
                 * then fork a grandchild that would outlive us. */
                close(p[1]);
                if (read(p[0], &c, 1) != 1)
                        _exit(1);
                for (i = 0; i < n_join; i++) {
                        int pfd = v2 ? openat(join[i], "cgroup.procs", O_WRONLY) : join[i];
                        if (pfd < 0 || write(pfd, "0", 1) != 1)
                                _exit(1);
                }
                if (fork() == 0) {
                        pause();
                        _exit(0);
                }
                pause();
                _exit(0);
        }
        close(p[0]);
        for (i = 0; i < n_join; i++)
                close(join[i]);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        close(p[1]);
        /* The grandchild forked after the move, so it is in the group too. */
        for (i = 0; i < 100 && cgroup_count_procs(g) < 2; i++)
                usleep(10000);
        ck_assert_int_eq(cgroup_count_procs(g), 2);
        ck_assert_int_ge(cgroup_kill(g), 0);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        for (i = 0; i < 200 && cgroup_count_procs(g) > 0; i++)
                usleep(10000);
        ck_assert_int_eq(cgroup_count_procs(g), 0);
        ck_assert_int_eq(cgroup_destroy(g), 0);
        cgroup_env_remove_base(e);
}

START_TEST(real_hierarchy_limits_and_kill) {
        struct cgroup_env *e;

        if (geteuid() != 0) {
                fprintf(stderr, "real_hierarchy_limits_and_kill: skipped, needs root\n");
                return;
        }
        ck_assert_int_eq(cgroup_env_new("/sys/fs/cgroup", "/proc/self/cgroup", real_base, 0, &e), 0);
        if (e->version == CGROUP_NONE) {
                fprintf(stderr, "real_hierarchy_limits_and_kill: skipped, no usable cgroups\n");
                cgroup_env_free(e);
                return;
        }
        real_group_life(e, 1 << CG_MEMORY | 1 << CG_PIDS);
        cgroup_env_free(e);
}
END_TEST

/* The v2 code on the real kernel where the host is hybrid (v1 holds the controllers, an
 * empty cgroup2 is mounted): no limit can hold there, but groups, joining, cgroup.kill
 * and removal are v2's own. On a v2-only host the test above covers all of it. */
START_TEST(real_v2_without_controllers) {
        struct cgroup_env *e;

        if (geteuid() != 0 || !v2_only_file[0]) {
                fprintf(stderr, "real_v2_without_controllers: skipped, needs root and a hybrid "
                                "host's cgroup2 mount\n");
                return;
        }
        ck_assert_int_eq(cgroup_env_new(unified_root, v2_only_file, real_base, 0, &e), 0);
        ck_assert_int_eq(e->version, CGROUP_V2);
        real_group_life(e, 0);
        cgroup_env_free(e);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("cgroup");
        TCase *tc = tcase_create("fake");
        TCase *real = tcase_create("real");
        tcase_set_timeout(tc, 30);
        tcase_add_unchecked_fixture(tc, setup_base, teardown_base);
        tcase_add_checked_fixture(tc, setup_tmp, teardown_tmp);
        tcase_add_test(tc, v2_fake_tree);
        tcase_add_test(tc, v2_without_delegation_is_none);
        tcase_add_test(tc, v1_fake_tree);
        tcase_add_test(tc, none_when_nothing_mounted);
        suite_add_tcase(s, tc);
        snprintf(real_base, sizeof(real_base), "sbxd-unittest-%d", (int)getpid());
        tcase_set_timeout(real, 30);
        tcase_add_unchecked_fixture(real, real_setup, real_teardown);
        tcase_add_test(real, real_hierarchy_limits_and_kill);
        tcase_add_test(real, real_v2_without_controllers);
        suite_add_tcase(s, real);
        return s;
}

SBX_TEST_MAIN(make_suite)
