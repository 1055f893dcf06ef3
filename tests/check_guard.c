/* check_guard.c: the Check suite of daemon/guard.c, which keeps a sandbox's hidden and
 * read-only paths covered when the host changes them: its handling of inotify events
 * (a file renamed over a watched path, a path made later below directories that did
 * not exist, a change seen while the sandbox was being set up, a sandbox forgotten)
 * and the helper it runs to cover a path again.
 *
 * Nothing is mocked. The "sandbox" is a process of the test's own in new mount and PID
 * namespaces (its /proc its own), which covers its paths as init does (a read-only
 * bind of /dev/null over a hidden file, a read-only bind of a read-only file over
 * itself) and then waits; its view is the struct sandbox_view the guard reads. The
 * guard runs on a libuv loop of the test and covers paths with the real helper, this
 * build's sbx-init (--reapply), which enters that process's mount namespace. The host's
 * changes are made in the fixture's directory T. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "guard.h"
#include "pathset.h"
#include "policy.h"
#include "sandbox_view.h"
#include "sbxd.h"
#include "testutil.h"

static char T[64];

static void tree_setup(void) {
        test_dir_make(T, sizeof(T), "check_guard");
}

static void tree_teardown(void) {
        test_dir_remove(T);
}

/* Writes content to T/rel, replacing it by a rename (as editors and passwd do). */
static void replace(const char *rel, const char *content) {
        char p[PATH_MAX], tmp[PATH_MAX + 8];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%s", T, rel);
        snprintf(tmp, sizeof(tmp), "%s.new", p);
        f = fopen(tmp, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(rename(tmp, p), 0);
}

static void mk(const char *rel) {
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", T, rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
}

/* ---- the sandbox's process -------------------------------------------------------------- */

/* What the sandbox's process covers at its start, as init would: paths (absolute) to
 * hide (a file: /dev/null bound read-only over it) and to make read-only. */
struct cover {
        const char *hide[4];
        const char *read_only[4];
        int ready_fd;
};

static int sandbox_main(void *arg) {
        const struct cover *c = arg;
        size_t i;
        int ok = 1;

        /* Gone with the test, even when it fails: killed when the test's process ends
         * (had it ended already, the write below would kill this one: SIGPIPE). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(1);
        ok = ok && mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0;
        ok = ok && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0;
        for (i = 0; ok && c->hide[i]; i++)
                ok = mount("/dev/null", c->hide[i], "none", MS_BIND, NULL) == 0 &&
                     mount("none", c->hide[i], "none", MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == 0;
        for (i = 0; ok && c->read_only[i]; i++)
                ok = mount(c->read_only[i], c->read_only[i], "none", MS_BIND, NULL) == 0 &&
                     mount("none", c->read_only[i], "none", MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) ==
                             0;
        if (write(c->ready_fd, ok ? "1" : "0", 1) != 1)
                _exit(1);
        for (;;)
                pause();
        return 0;
}

/* The guard's daemon context, and one sandbox whose view it watches. */
struct rig {
        uv_loop_t loop;
        struct sbxd d;
        struct sandbox_view sv;
        struct policy_view view;
        struct pathset *denied_write;
        uv_timer_t keepalive; /* the daemon's other handles: see spin() */
        char *stack;
};

static struct pathset *set_of(const char *const *paths) {
        struct pathset_list l = {0};
        size_t i;

        for (i = 0; paths && paths[i]; i++)
                ck_assert_ptr_nonnull(pathset_list_add(&l, strdup(paths[i])));
        return pathset_freeze(&l);
}

/* Starts the sandbox's process (covering c's paths) and the guard, on a loop of its own.
 * The view hides hidden (NULL ended); the sandbox is ready, its root the host's. */
static void rig_up(struct rig *g, struct cover *c) {
        const char *build = getenv("BUILD");
        char init[PATH_MAX], ok = 0;
        int p[2];
        pid_t pid;

        memset(g, 0, sizeof(*g));
        snprintf(init, sizeof(init), "%s/sbx-init", build ? build : "build");
        ck_assert_msg(access(init, X_OK) == 0, "%s: build it first (make tests)", init);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        c->ready_fd = p[1];
        g->stack = malloc(256 * 1024);
        ck_assert_ptr_nonnull(g->stack);
        pid = clone(sandbox_main, g->stack + 256 * 1024, CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, c);
        ck_assert_int_gt(pid, 0);
        close(p[1]);
        ck_assert_int_eq(read(p[0], &ok, 1), 1);
        close(p[0]);
        g->sv.init_pid = pid;
        g->sv.init_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        ck_assert_int_ge(g->sv.init_pidfd, 0);
        ck_assert_msg(ok == '1', "the sandbox's process could not cover its paths");

        ck_assert_int_eq(uv_loop_init(&g->loop), 0);
        ck_assert_int_eq(uv_timer_init(&g->loop, &g->keepalive), 0);
        g->d.loop = &g->loop;
        g->sv.id = "sbx-guard";
        g->sv.d = &g->d;
        g->sv.state = SBX__V1__SANDBOX_STATE__READY;
        g->sv.root_fd = -1;
        ck_assert_int_eq(guard_start(&g->d, init), 0);
}

/* Watches the view: hidden paths, and denied_write ones (read-only); with only, those
 * at or below its paths alone (an image's view). */
static void rig_watch_only(struct rig *g, const char *const *hidden,
                           const char *const *denied_write, const struct guard_only *only) {
        g->view.hidden = set_of(hidden);
        g->view.watched = set_of(NULL);
        g->view.protected_paths = set_of(NULL);
        g->view.made_dirs = set_of(NULL);
        g->view.made_files = set_of(NULL);
        g->denied_write = set_of(denied_write);
        guard_watch(&g->d, &g->sv, &g->view, "/", g->denied_write->v, g->denied_write->n,
                    only);
}

static void rig_watch(struct rig *g, const char *const *hidden, const char *const *denied_write) {
        rig_watch_only(g, hidden, denied_write, NULL);
}

/* Stops the guard, ends the sandbox's process, and proves the loop closes. */
static void rig_down(struct rig *g) {
        guard_forget(&g->d, &g->sv);
        guard_stop(&g->d);
        uv_close((uv_handle_t *)&g->keepalive, NULL);
        uv_run(&g->loop, UV_RUN_DEFAULT); /* helpers still running, and the closes */
        ck_assert_int_eq(uv_loop_close(&g->loop), 0);
        syscall(SYS_pidfd_send_signal, g->sv.init_pidfd, SIGKILL, NULL, 0);
        while (waitpid(g->sv.init_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        close(g->sv.init_pidfd);
        pathset_unref(g->view.hidden);
        pathset_unref(g->view.watched);
        pathset_unref(g->view.protected_paths);
        pathset_unref(g->view.made_dirs);
        pathset_unref(g->view.made_files);
        pathset_unref(g->denied_write);
        free(g->stack);
}

/* What the sandbox reads at path (absolute), in *buf: "" when a hidden file is covered
 * (/dev/null), the host's content when it lies bare. -errno when it cannot be read. */
static int sandbox_reads(const struct rig *g, const char *path, char *buf, size_t len) {
        char p[PATH_MAX + 64];
        ssize_t n;
        int fd;

        snprintf(p, sizeof(p), "/proc/%d/root%s", (int)g->sv.init_pid, path);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n < 0)
                return -EIO;
        buf[n] = '\0';
        return 0;
}

/* 1 when the sandbox could open path (absolute) for writing. */
static int sandbox_may_write(const struct rig *g, const char *path) {
        char p[PATH_MAX + 64];
        int fd;

        snprintf(p, sizeof(p), "/proc/%d/root%s", (int)g->sv.init_pid, path);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
                close(fd);
        return fd >= 0;
}

static uint64_t now_ms(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void on_keepalive(uv_timer_t *t) {
        (void)t;
}

/* One turn of the loop, without waiting. The guard's own handle does not keep a loop
 * alive (in the daemon, the listening socket does), and libuv polls nothing in a loop
 * that is not: a timer stands for the daemon's handles during the turn. */
static void spin(struct rig *g) {
        uv_timer_start(&g->keepalive, on_keepalive, 3600 * 1000, 0);
        uv_run(&g->loop, UV_RUN_NOWAIT);
        uv_timer_stop(&g->keepalive);
}

/* Runs the loop until the sandbox reads want at path, at most 10 s. */
static void until_reads(struct rig *g, const char *path, const char *want) {
        uint64_t t0 = now_ms();
        char buf[256] = "";
        int r = -1;

        while (now_ms() - t0 < 10000) {
                spin(g);
                r = sandbox_reads(g, path, buf, sizeof(buf));
                if (r == 0 && strcmp(buf, want) == 0)
                        return;
                usleep(2000);
        }
        ck_assert_msg(0, "%s in the sandbox: %d '%s', not '%s' within 10 s", path, r, buf, want);
}

/* This process's inotify descriptor (the guard's), found in /proc/self/fd. */
static int inotify_fd(void) {
        char p[300], link[64];
        struct dirent *de;
        DIR *d = opendir("/proc/self/fd");
        int fd = -1;

        ck_assert_ptr_nonnull(d);
        while (fd < 0 && (de = readdir(d))) {
                ssize_t n;
                snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
                n = readlink(p, link, sizeof(link) - 1);
                if (n > 0) {
                        link[n] = '\0';
                        if (strcmp(link, "anon_inode:inotify") == 0)
                                fd = atoi(de->d_name);
                }
        }
        closedir(d);
        ck_assert_int_ge(fd, 0);
        return fd;
}

/* Runs the loop until the guard has read every event the host's changes made (its
 * inotify descriptor is no longer readable) and every helper it started has ended. */
static void until_quiet(struct rig *g) {
        struct pollfd pfd = {.fd = inotify_fd(), .events = POLLIN};
        uint64_t t0 = now_ms();

        for (;;) {
                spin(g);
                /* The timer stopped: only a helper still running keeps the loop. */
                if (poll(&pfd, 1, 0) == 0 && !uv_loop_alive(&g->loop))
                        return;
                ck_assert_msg(now_ms() - t0 < 10000, "the guard is still busy after 10 s");
                usleep(2000);
        }
}

/* The usual start: the host's T/etc/key, hidden in the sandbox from its start; its
 * path into key (PATH_MAX bytes). The caller watches it (watch_key). */
static void key_up(struct rig *g, struct cover *c, char *key) {
        mk("etc");
        replace("etc/key", "old secret\n");
        snprintf(key, PATH_MAX, "%s/etc/key", T);
        c->hide[0] = key;
        rig_up(g, c);
}

/* The guard watches the view that hides key alone. */
static void watch_key(struct rig *g, const char *key) {
        const char *hidden[] = {key, NULL};
        rig_watch(g, hidden, NULL);
}

/* The sandbox reads want at path now. */
static void reads_now(const struct rig *g, const char *path, const char *want) {
        char buf[256];

        ck_assert_int_eq(sandbox_reads(g, path, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, want);
}

/* ---- events ----------------------------------------------------------------------------- */

/* The host renames a new file over a hidden path (the cover stays with the old file)
 * and over a read-only one: the guard sees it and covers each again in the sandbox,
 * hidden and read-only as before, and tells the file operations (the generation). */
START_TEST(a_replaced_path_is_covered_again) {
        char key[PATH_MAX], conf[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;

        mk("etc");
        replace("etc/key", "old secret\n");
        replace("etc/conf", "old conf\n");
        snprintf(key, sizeof(key), "%s/etc/key", T);
        snprintf(conf, sizeof(conf), "%s/etc/conf", T);
        c.hide[0] = key;
        c.read_only[0] = conf;
        rig_up(&g, &c);
        {
                const char *hidden[] = {key, NULL}, *ro[] = {conf, NULL};
                rig_watch(&g, hidden, ro);
        }
        reads_now(&g, key, "");
        ck_assert(!sandbox_may_write(&g, conf));

        replace("etc/key", "new secret\n");
        replace("etc/conf", "new conf\n");
        until_reads(&g, key, "");
        until_reads(&g, conf, "new conf\n");
        until_quiet(&g);
        ck_assert(!sandbox_may_write(&g, conf));
        ck_assert_uint_ge(g.sv.generation, 2);
        rig_down(&g);
}
END_TEST

/* An image's sandbox shows host paths only in its writable paths: the guard watches
 * the paths there, and leaves those of the image alone (the host does not change them:
 * a host file of the same name is not the sandbox's). */
START_TEST(an_image_view_is_watched_in_its_writable_paths_alone) {
        char key[PATH_MAX], wkey[PATH_MAX], w[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        char *only_v[] = {w};
        const struct guard_only only = {only_v, 1};
        struct rig g;

        mk("etc");
        mk("w");
        replace("etc/key", "image secret\n");
        replace("w/key", "old secret\n");
        snprintf(key, sizeof(key), "%s/etc/key", T);
        snprintf(wkey, sizeof(wkey), "%s/w/key", T);
        snprintf(w, sizeof(w), "%s/w", T);
        c.hide[0] = key;
        c.hide[1] = wkey;
        rig_up(&g, &c);
        {
                const char *hidden[] = {key, wkey, NULL};
                rig_watch_only(&g, hidden, NULL, &only);
        }
        replace("etc/key", "not the image's\n");
        replace("w/key", "new secret\n");
        until_reads(&g, wkey, "");
        until_quiet(&g);
        reads_now(&g, key, "not the image's\n");
        ck_assert_uint_eq(g.sv.generation, 2);
        rig_down(&g);
}
END_TEST

/* The host replaces several covered paths of one directory at once (as usermod
 * rewrites /etc/shadow and /etc/gshadow): one helper runs in the sandbox at a time (two
 * at once race each other's mounts, and one of them fails, leaving its path bare), the
 * others wait their turn, and every path ends covered. The guard's turn that reads the
 * events starts the helpers it starts at once (each bumps the view's generation), and
 * none can have ended within that turn. */
START_TEST(paths_changed_together_are_covered_one_at_a_time) {
        char key[PATH_MAX], k2[PATH_MAX], k3[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;

        mk("etc");
        replace("etc/key", "1\n");
        replace("etc/key2", "2\n");
        replace("etc/key3", "3\n");
        snprintf(key, sizeof(key), "%s/etc/key", T);
        snprintf(k2, sizeof(k2), "%s/etc/key2", T);
        snprintf(k3, sizeof(k3), "%s/etc/key3", T);
        c.hide[0] = key;
        c.hide[1] = k2;
        c.hide[2] = k3;
        rig_up(&g, &c);
        {
                const char *hidden[] = {key, k2, k3, NULL};
                rig_watch(&g, hidden, NULL);
        }
        replace("etc/key", "new 1\n");
        replace("etc/key2", "new 2\n");
        replace("etc/key3", "new 3\n");
        spin(&g);
        ck_assert_uint_eq(g.sv.generation, 1);
        until_reads(&g, key, "");
        until_reads(&g, k2, "");
        until_reads(&g, k3, "");
        until_quiet(&g);
        ck_assert_uint_eq(g.sv.generation, 6);
        rig_down(&g);
}
END_TEST

/* A hidden path whose directories do not exist yet is watched through its nearest
 * ancestor: made later (directory by directory), it is covered as soon as it appears. */
START_TEST(a_path_made_later_is_covered) {
        char key[PATH_MAX], p[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;
        FILE *f;

        snprintf(key, sizeof(key), "%s/later/deeper/key", T);
        rig_up(&g, &c);
        watch_key(&g, key);
        mk("later");
        until_quiet(&g);
        mk("later/deeper");
        until_quiet(&g);
        snprintf(p, sizeof(p), "%s/later/deeper/key", T);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs("made later\n", f);
        ck_assert_int_eq(fclose(f), 0);
        until_reads(&g, key, "");
        until_quiet(&g);
        rig_down(&g);
}
END_TEST

/* A change seen while the sandbox is being set up cannot be acted on then (its init
 * may not have covered anything yet): it is remembered, and looked at when the sandbox
 * is ready. */
START_TEST(a_change_while_setting_up_is_looked_at_when_ready) {
        char key[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;

        key_up(&g, &c, key);
        g.sv.state = SBX__V1__SANDBOX_STATE__CREATING;
        watch_key(&g, key);
        replace("etc/key", "new secret\n");
        until_quiet(&g); /* the event was read, and nothing was done */
        ck_assert_uint_eq(g.sv.generation, 0);
        reads_now(&g, key, "new secret\n");

        g.sv.state = SBX__V1__SANDBOX_STATE__READY;
        guard_ready(&g.d, &g.sv, 0);
        until_reads(&g, key, "");
        until_quiet(&g);
        rig_down(&g);
}
END_TEST

/* An adopted sandbox (no daemon watched meanwhile) has each of its own paths looked at
 * when it is ready again, without any event. */
START_TEST(an_adopted_sandbox_is_looked_at_whole) {
        char key[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;

        key_up(&g, &c, key);
        replace("etc/key", "replaced while no daemon watched\n");
        watch_key(&g, key);
        until_quiet(&g);
        until_reads(&g, key, "replaced while no daemon watched\n");
        guard_ready(&g.d, &g.sv, 1);
        until_reads(&g, key, "");
        until_quiet(&g);
        rig_down(&g);
}
END_TEST

/* A sandbox the guard forgot (it ended) is left alone: no helper, whatever changes. */
START_TEST(a_forgotten_sandbox_is_left_alone) {
        char key[PATH_MAX];
        struct cover c = {{NULL}, {NULL}, -1};
        struct rig g;

        key_up(&g, &c, key);
        watch_key(&g, key);
        guard_forget(&g.d, &g.sv);
        replace("etc/key", "new secret\n");
        until_quiet(&g);
        ck_assert_uint_eq(g.sv.generation, 0);
        reads_now(&g, key, "new secret\n");
        rig_down(&g);
}
END_TEST

#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 60, tree_setup, tree_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("guard");
        int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);

        /* The guard reaches a sandbox's PID 1 and reaps its helpers through pidfds
         * (Linux 5.3); valgrind does not know pidfd_open. */
        if (probe < 0) {
                fprintf(stderr, "check_guard: SKIPPED: no pidfd_open(2) here (%s)\n",
                        strerror(errno));
                return s;
        }
        close(probe);
        ADD_TEST(s, a_replaced_path_is_covered_again);
        ADD_TEST(s, an_image_view_is_watched_in_its_writable_paths_alone);
        ADD_TEST(s, paths_changed_together_are_covered_one_at_a_time);
        ADD_TEST(s, a_path_made_later_is_covered);
        ADD_TEST(s, a_change_while_setting_up_is_looked_at_when_ready);
        ADD_TEST(s, an_adopted_sandbox_is_looked_at_whole);
        ADD_TEST(s, a_forgotten_sandbox_is_left_alone);
        return s;
}

SBX_TEST_MAIN(make_suite)
