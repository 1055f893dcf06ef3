/* it_cgroupv2.c: the daemon on cgroup v2, on a hybrid host.
 *
 * This host's controllers belong to cgroup v1; an empty cgroup2 is mounted at
 * /sys/fs/cgroup/unified. The daemon's v2 code (a group per sandbox with init in a leaf,
 * a group per command joined by the command itself, cgroup.kill, removal, adoption)
 * runs there for real when the daemon is pointed at that mount (SBXD_CGROUP_ROOT, and
 * SBXD_CGROUP_SELF naming a group the test makes under its own v2 group). No limit can
 * hold without controllers, and the sandbox says so. Skipped where there is no such
 * mount or no root. The fixture removes what the daemons leave (their own "daemon"
 * leaf: a daemon cannot remove the group it is in). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

static const char unified[] = "/sys/fs/cgroup/unified";
static char own_rel[64];    /* our test group, relative to the mount: "/sbxd-itv2-PID" */
static char own_dir[128];   /* its path */
static char self_file[128]; /* "0::<own_rel>", for SBXD_CGROUP_SELF */

static int usable(void) {
        char p[128];

        snprintf(p, sizeof(p), "%s/cgroup.controllers", unified);
        return geteuid() == 0 && access(p, F_OK) == 0;
}

/* Removes dir and every group below it, killing what is inside first. */
static void remove_groups(const char *dir) {
        DIR *d;
        struct dirent *de;
        char p[1024];
        int fd;

        snprintf(p, sizeof(p), "%s/cgroup.kill", dir);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
                (void)!write(fd, "1", 1);
                close(fd);
        }
        d = opendir(dir);
        if (!d)
                return;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                remove_groups(p);
        }
        closedir(d);
        /* Killed processes leave their group a moment later. */
        for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
                usleep(20000);
}

static void v2_setup(void) {
        FILE *f;

        it_fixture_setup();
        if (!usable())
                return;
        snprintf(own_rel, sizeof(own_rel), "/sbxd-itv2-%d", (int)getpid());
        snprintf(own_dir, sizeof(own_dir), "%s%s", unified, own_rel);
        snprintf(self_file, sizeof(self_file), "/tmp/sbxd-itv2-%d.cgroup", (int)getpid());
        if (mkdir(own_dir, 0755) < 0 && errno != EEXIST)
                return;
        f = fopen(self_file, "w");
        if (!f)
                return;
        fprintf(f, "0::%s\n", own_rel);
        fclose(f);
        setenv("SBXD_CGROUP_ROOT", unified, 1);
        setenv("SBXD_CGROUP_SELF", self_file, 1);
}

static void v2_teardown(void) {
        it_fixture_teardown(); /* the daemons are gone after this */
        unsetenv("SBXD_CGROUP_ROOT");
        unsetenv("SBXD_CGROUP_SELF");
        if (own_dir[0])
                remove_groups(own_dir);
        if (self_file[0])
                unlink(self_file);
}

/* Number of groups (directories) below dir, recursively. */
static int count_groups(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        char p[1024];
        int n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                n += 1 + count_groups(p);
        }
        closedir(d);
        return n;
}

/* 1 when a file cgroup.procs somewhere below dir lists pid. */
static int pid_in_groups(const char *dir, pid_t pid) {
        DIR *d = opendir(dir);
        struct dirent *de;
        char p[1024], line[64];
        int found = 0;
        FILE *f;

        if (!d)
                return 0;
        while (!found && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                found = pid_in_groups(p, pid);
                snprintf(p, sizeof(p), "%s/%s/cgroup.procs", dir, de->d_name);
                if (!found && (f = fopen(p, "re"))) {
                        while (fgets(line, sizeof(line), f))
                                if (atoi(line) == (int)pid)
                                        found = 1;
                        fclose(f);
                }
        }
        closedir(d);
        return found;
}

static void wait_gone(const char *needle) {
        for (int i = 0; i < 150 && it_count_procs(needle) > 0; i++)
                usleep(20000);
        ck_assert_int_eq(it_count_procs(needle), 0);
}

static sbx_client *start_v2(struct it_daemon *d) {
        struct sbx_hello *h = NULL;
        sbx_client *c;

        it_daemon_start(d, NULL);
        c = it_connect(d);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_str_eq(h->cgroup_version, "v2");
        sbx_hello_free(h);
        return c;
}

/* Terminates id (its background process marked by needle dies with it), stops the
 * daemon and checks what is left: the daemon's own leaf only (it cannot remove the
 * group it was in). Frees id and closes c. */
static void end_clean(struct it_daemon *d, sbx_client *c, char *id, const char *needle) {
        int st;

        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        wait_gone(needle);
        free(id);
        sbx_close(c);
        st = it_daemon_stop(d);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbxd stopped with status 0x%x", st);
        ck_assert_int_eq(count_groups(own_dir), 1);
}

#define SKIP_UNLESS_USABLE()                                                                       \
        do {                                                                                       \
                if (!usable()) {                                                                   \
                        fprintf(stderr, "%s: skipped, needs root and a cgroup2 mount at %s\n",     \
                                __func__, unified);                                                \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

/* A sandbox and its commands in groups of their own; a timeout kills what a command
 * started even outside its process group; terminate and stop leave no group. */
START_TEST(v2_groups_kill_and_cleanup) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;
        pid_t pid;

        SKIP_UNLESS_USABLE();
        c = start_v2(&d);
        id = it_create(c, NULL);

        /* The command runs in a group of its own, named after it. */
        r = it_sh(c, id, 20000, "cat /proc/self/cgroup");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_msg(strstr((char *)r->stdout_data, r->command_id), "%s ran in %s", r->command_id,
                      (char *)r->stdout_data);
        sbx_result_free(r);

        /* A timeout kills a process that left the command's process group and session:
         * it is still in the command's cgroup. */
        r = it_sh(c, id, 1000, "setsid sleep 97.1234 </dev/null >/dev/null 2>&1 & sleep 96.1234");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_TIMED_OUT);
        sbx_result_free(r);
        wait_gone("sleep 97.1234");

        /* A background process of a command that ended runs on, in the sandbox's
         * groups, until terminate. */
        r = it_sh(c, id, 10000, "setsid sleep 95.1234 </dev/null >/dev/null 2>&1 &");
        sbx_result_free(r);
        for (int i = 0; i < 100 && (pid = it_find_proc("sleep ", "sleep 95.1234")) < 0; i++)
                usleep(20000);
        ck_assert_int_gt(pid, 0);
        ck_assert_msg(pid_in_groups(own_dir, pid),
                      "the background process is not in a group under %s", own_dir);
        end_clean(&d, c, id, "sleep 95.1234");
}
END_TEST

/* A daemon killed with a sandbox running: the next one adopts it with its groups, and
 * its terminate removes them. */
START_TEST(v2_adoption) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        SKIP_UNLESS_USABLE();
        c = start_v2(&d);
        id = it_create(c, NULL);
        r = it_sh(c, id, 10000, "setsid sleep 94.1234 </dev/null >/dev/null 2>&1 &");
        sbx_result_free(r);
        sbx_close(c);
        it_daemon_kill(&d);
        ck_assert_int_eq(it_count_procs("sleep 94.1234"), 1);
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        r = it_sh(c, id, 10000, "echo adopted");
        ck_assert_str_eq((char *)r->stdout_data, "adopted\n");
        sbx_result_free(r);
        end_clean(&d, c, id, "sleep 94.1234");
}
END_TEST

/* A sandbox made from an image (root of its own user namespace, no root of the host's)
 * runs commands in groups of their own: its groups' cgroup.procs are its root's (they
 * failed to start before: "join cgroup (v2): Permission denied"). A snapshot freezes
 * its v2 group (cgroup.freeze, which needs no controller) and thaws it after: the
 * snapshot is taken, a process of the sandbox runs on, and no group under ours is left
 * frozen. */
START_TEST(v2_snapshot_freezes_and_thaws) {
        struct it_daemon d;
        struct sbx_image *img = NULL;
        struct sbx_result *r;
        char dir[700], cmd[2000], source[800];
        char *id = NULL;
        sbx_client *c;

        SKIP_UNLESS_USABLE();
        snprintf(dir, sizeof(dir), "%s/img", it_base_dir());
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        snprintf(cmd, sizeof(cmd), "bash tests/mkimage.sh %s >%s/mkimage.log 2>&1", dir, dir);
        ck_assert_msg(system(cmd) == 0, "mkimage.sh failed: see %s/mkimage.log", dir);
        c = start_v2(&d);
        snprintf(source, sizeof(source), "oci:%s/oci:img", dir);
        ck_assert_msg(sbx_image_pull(c, source, NULL, &img) == SBX_OK, "%s", sbx_error_message(c));
        sbx_image_free(img);
        img = NULL;
        {
                struct sbx_create_opts o;
                struct sbx_sandbox *sb = NULL;
                sbx_create_opts_init(&o);
                o.image = source;
                ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
                id = strdup(sb->id);
                sbx_sandbox_free(sb);
        }
        r = it_sh(c, id, 10000,
                  "echo v2 > /workspace/f; busybox setsid busybox sleep 93.1234 </dev/null "
                  ">/dev/null 2>&1 &");
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "%s %d: %s",
                      sbx_outcome_name(r->outcome), r->exit_code,
                      r->start_error ? r->start_error : (char *)r->stderr_data);
        sbx_result_free(r);
        ck_assert_msg(sbx_snapshot(c, id, "v2snap", &img) == SBX_OK, "%s", sbx_error_message(c));
        sbx_image_free(img);
        ck_assert_int_eq(it_log_count(&d, "frozen "), 1);
        snprintf(cmd, sizeof(cmd), "grep -l '^1' $(find %s -name cgroup.freeze) 2>/dev/null | wc -l",
                 own_dir);
        {
                FILE *f = popen(cmd, "r");
                int frozen = -1;
                ck_assert_ptr_nonnull(f);
                ck_assert_int_eq(fscanf(f, "%d", &frozen), 1);
                pclose(f);
                ck_assert_int_eq(frozen, 0);
        }
        r = it_sh(c, id, 10000, "busybox cat /workspace/f");
        ck_assert_msg(strcmp((char *)r->stdout_data, "v2\n") == 0, "out '%s' err '%s'",
                      (char *)r->stdout_data, (char *)r->stderr_data);
        sbx_result_free(r);
        ck_assert_int_eq(it_count_procs("sleep 93.1234"), 1);
        end_clean(&d, c, id, "sleep 93.1234");
}
END_TEST

static void add(Suite *s, const char *name, const TTest *test) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, v2_setup, v2_teardown);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, test);
        suite_add_tcase(s, tc);
}

static Suite *make_suite(void) {
        Suite *s = suite_create("cgroupv2");

        add(s, "groups_kill_and_cleanup", v2_groups_kill_and_cleanup);
        add(s, "adoption", v2_adoption);
        add(s, "snapshot_freezes_and_thaws", v2_snapshot_freezes_and_thaws);
        return s;
}

SBX_TEST_MAIN(make_suite)
