/* check_trash.c: the Check suite of daemon/trash.c, the deletion of what ended
 * sandboxes leave on the host: a sandbox's directory emptied and its workspace moved
 * into STATE/trash, the trash deleted by an rm(1) child the loop reaps (or here, when it
 * cannot be moved), never through a symlink and never into another mount, and what is
 * still being deleted at shutdown stopped after its grace.
 *
 * Each test has a state directory of its own (the fixture's) and a libuv loop; tests
 * that mount (a tmpfs inside a workspace) first move their own process into a private
 * mount namespace, so that the mount goes with it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "sbxd.h"
#include "testutil.h"
#include "trash.h"

static char state[64];

static void state_setup(void) {
        test_dir_make(state, sizeof(state), "check_trash");
}

/* The rm the shutdown test stopped, named in STATE/rm.pid while it is: killed here when
 * the test failed before the module killed it (it is the rm of this state directory). */
static void stopped_rm_kill(void) {
        char p[128], cmd[4096];
        long pid = 0;
        FILE *f;
        size_t n;

        snprintf(p, sizeof(p), "%s/rm.pid", state);
        f = fopen(p, "re");
        if (!f)
                return;
        if (fscanf(f, "%ld", &pid) != 1)
                pid = 0;
        fclose(f);
        snprintf(p, sizeof(p), "/proc/%ld/cmdline", pid);
        f = pid > 0 ? fopen(p, "re") : NULL;
        if (!f)
                return;
        n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        cmd[n] = '\0';
        for (size_t i = 0; i < n; i++)
                if (cmd[i] == '\0')
                        cmd[i] = ' ';
        if (strncmp(cmd, "rm ", 3) == 0 && strstr(cmd, state))
                kill((pid_t)pid, SIGKILL);
}

static void state_teardown(void) {
        stopped_rm_kill();
        test_dir_unmount(state);
        test_dir_remove(state);
}

/* A daemon context with nothing but a loop and the state directory. */
struct rig {
        uv_loop_t loop;
        struct config cfg;
        struct sbxd d;
};

static void rig_up(struct rig *g) {
        memset(g, 0, sizeof(*g));
        ck_assert_int_eq(uv_loop_init(&g->loop), 0);
        g->cfg.state_dir = state;
        g->d.loop = &g->loop;
        g->d.cfg = &g->cfg;
}

/* Runs the loop until every remover has been reaped, and closes it. */
static void rig_down(struct rig *g) {
        uv_run(&g->loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(&g->loop), 0);
}

/* STATE/ followed by fmt's path, into p (len bytes). */
static void __attribute__((format(printf, 3, 0)))
state_path(char *p, size_t len, const char *fmt, va_list ap) {
        size_t n = (size_t)snprintf(p, len, "%s/", state);

        ck_assert_uint_lt(n, len);
        vsnprintf(p + n, len - n, fmt, ap);
}

static void __attribute__((format(printf, 1, 2))) mkdirs(const char *fmt, ...) {
        char p[PATH_MAX];
        va_list ap;

        va_start(ap, fmt);
        state_path(p, sizeof(p), fmt, ap);
        va_end(ap);
        ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void __attribute__((format(printf, 1, 2))) put(const char *fmt, ...) {
        char p[PATH_MAX];
        va_list ap;
        int fd;

        va_start(ap, fmt);
        state_path(p, sizeof(p), fmt, ap);
        va_end(ap);
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "x\n", 2), 2);
        close(fd);
}

static int exists(const char *rel) {
        char p[2 * PATH_MAX];
        struct stat st;

        snprintf(p, sizeof(p), "%s/%s", state, rel);
        return lstat(p, &st) == 0;
}

/* How many entries the directory rel holds. */
static int entries(const char *rel) {
        char p[2 * PATH_MAX];
        struct dirent *de;
        DIR *d;
        int n = 0;

        snprintf(p, sizeof(p), "%s/%s", state, rel);
        d = opendir(p);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(d);
        return n;
}

/* STATE/sandboxes/ID with its workspace (a few files, a directory chmod'ed shut, a
 * symlink to STATE/outside, whose file must stay) and its adoption socket's name. */
static void sandbox_dir(const char *id, char *ws, size_t len) {
        char p[PATH_MAX], to[PATH_MAX];

        if (!exists("sandboxes"))
                mkdirs("sandboxes");
        if (!exists("outside")) {
                mkdirs("outside");
                put("outside/secret");
        }
        mkdirs("sandboxes/%s", id);
        put("sandboxes/%s/init.sock", id);
        mkdirs("sandboxes/%s/workspace", id);
        mkdirs("sandboxes/%s/workspace/a", id);
        put("sandboxes/%s/workspace/a/f", id);
        mkdirs("sandboxes/%s/workspace/shut", id);
        put("sandboxes/%s/workspace/shut/g", id);
        snprintf(ws, len, "%s/sandboxes/%s/workspace", state, id);
        snprintf(p, sizeof(p), "%s/shut", ws);
        ck_assert_int_eq(chmod(p, 0), 0);
        snprintf(p, sizeof(p), "%s/out", ws);
        ck_assert_int_eq(symlink("../../../outside", p), 0);
        snprintf(p, sizeof(p), "%s/abs", ws);
        snprintf(to, sizeof(to), "%s/outside/secret", state);
        ck_assert_int_eq(symlink(to, p), 0);
}

/* A tmpfs mounted at rel (in this test's own mount namespace) holding the file kept. */
static void tmpfs_at(const char *rel) {
        char p[2 * PATH_MAX], k[2 * PATH_MAX + 8];

        test_private_mounts();
        snprintf(p, sizeof(p), "%s/%s", state, rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        ck_assert_int_eq(mount("tmpfs", p, "tmpfs", 0, "mode=0755"), 0);
        snprintf(k, sizeof(k), "%s/kept", p);
        ck_assert_int_eq(close(open(k, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
}

/* ---- a sandbox's directory -------------------------------------------------------------- */

/* The workspace is moved into STATE/trash at once (out of the sandbox's directory,
 * which goes with its adoption socket) and deleted by a child the loop reaps; nothing a
 * symlink in it points at is touched. */
START_TEST(an_ended_sandbox_goes_to_the_trash) {
        struct rig g;
        char ws[PATH_MAX], *later;

        rig_up(&g);
        trash_empty(&g.d); /* makes STATE/trash */
        ck_assert(exists("trash"));
        sandbox_dir("sbx-a", ws, sizeof(ws));
        later = trash_sandbox_dir(&g.d, "sbx-a", ws, -1, 0);
        ck_assert_ptr_nonnull(later);
        ck_assert(!exists("sandboxes/sbx-a"));
        ck_assert_int_eq(strncmp(later, state, strlen(state)), 0);
        ck_assert_msg(strstr(later, "/trash/sbx-a."), "%s", later);
        ck_assert_int_eq(access(later, F_OK), 0);
        ck_assert_int_eq(entries("trash"), 1);
        trash_remove_later(&g.d, later);
        free(later);
        rig_down(&g);
        ck_assert_int_eq(entries("trash"), 0);
        ck_assert(exists("outside/secret"));
}
END_TEST

/* keep: the workspace stays where it is; only the adoption socket goes, and the
 * directory (not empty) stays. */
START_TEST(a_kept_workspace_stays) {
        struct rig g;
        char ws[PATH_MAX];

        rig_up(&g);
        trash_empty(&g.d);
        sandbox_dir("sbx-k", ws, sizeof(ws));
        ck_assert_ptr_null(trash_sandbox_dir(&g.d, "sbx-k", ws, -1, 1));
        ck_assert(exists("sandboxes/sbx-k/workspace/a/f"));
        ck_assert(!exists("sandboxes/sbx-k/init.sock"));
        ck_assert_int_eq(entries("trash"), 0);
        rig_down(&g);
}
END_TEST

/* ---- never through a symlink, never into another mount ---------------------------------- */

/* The rm child stays on the tree's filesystem: a mount inside a trashed workspace is
 * left with what it holds, and symlinks are removed, not followed. */
START_TEST(the_remover_stays_on_its_filesystem) {
        struct rig g;
        char ws[PATH_MAX];

        sandbox_dir("sbx-m", ws, sizeof(ws));
        tmpfs_at("sandboxes/sbx-m/workspace/a/mnt");
        rig_up(&g);
        trash_empty(&g.d);
        trash_sandbox_dir_now(&g.d, "sbx-m", ws, -1, 0);
        rig_down(&g);
        ck_assert(exists("outside/secret"));
        ck_assert_int_eq(entries("trash"), 1);
        ck_assert_int_eq(entries("outside"), 1);
        {
                char p[PATH_MAX], kept[PATH_MAX] = "";
                struct dirent *de;
                DIR *d;
                snprintf(p, sizeof(p), "%s/trash", state);
                d = opendir(p);
                ck_assert_ptr_nonnull(d);
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                snprintf(kept, sizeof(kept), "trash/%.200s/a/mnt/kept",
                                         de->d_name);
                closedir(d);
                ck_assert_msg(exists(kept), "'%s' is gone: rm left its filesystem", kept);
        }
}
END_TEST

/* When the workspace cannot be moved into the trash (there is none), it is deleted at
 * once, here, with the same care: symlinks not followed, a mount inside not entered
 * (what it holds stays), the rest gone. */
START_TEST(deleting_here_stays_on_its_filesystem) {
        struct rig g;
        char ws[PATH_MAX];

        sandbox_dir("sbx-s", ws, sizeof(ws));
        tmpfs_at("sandboxes/sbx-s/workspace/a/mnt");
        rig_up(&g);
        ck_assert(!exists("trash"));
        ck_assert_ptr_null(trash_sandbox_dir(&g.d, "sbx-s", ws, -1, 0));
        ck_assert(exists("outside/secret"));
        ck_assert(exists("sandboxes/sbx-s/workspace/a/mnt/kept"));
        ck_assert(!exists("sandboxes/sbx-s/workspace/a/f"));
        ck_assert(!exists("sandboxes/sbx-s/workspace/shut"));
        ck_assert(!exists("sandboxes/sbx-s/workspace/out"));
        ck_assert(!exists("sandboxes/sbx-s/init.sock"));
        rig_down(&g);
}
END_TEST

/* ---- start-up and shutdown -------------------------------------------------------------- */

/* At start-up what an earlier daemon left in STATE/trash is deleted. */
START_TEST(start_up_empties_the_trash) {
        struct rig g;

        mkdirs("trash");
        mkdirs("trash/sbx-old.1");
        mkdirs("trash/sbx-old.1/d");
        put("trash/sbx-old.1/d/f");
        put("trash/stray");
        rig_up(&g);
        trash_empty(&g.d);
        rig_down(&g);
        ck_assert(exists("trash"));
        ck_assert_int_eq(entries("trash"), 0);
}
END_TEST

/* The pid of this process's only child, or 0 when it has none (or several). */
static pid_t only_child(void) {
        char p[64], buf[256];
        long pid = 0;
        FILE *f;
        int n;

        snprintf(p, sizeof(p), "/proc/self/task/%d/children", (int)getpid());
        f = fopen(p, "re");
        ck_assert_ptr_nonnull(f);
        n = fgets(buf, sizeof(buf), f) ? sscanf(buf, "%ld %*d", &pid) : 0;
        fclose(f);
        return n == 1 ? (pid_t)pid : 0;
}

/* 1 when the process pid is stopped (state T in its stat). */
static int is_stopped(pid_t pid) {
        char p[64], buf[512], *rp;
        FILE *f;
        int stopped = 0;

        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        f = fopen(p, "re");
        if (!f)
                return 0;
        if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')))
                stopped = rp[1] == ' ' && rp[2] == 'T';
        fclose(f);
        return stopped;
}

static uint64_t now_ms(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* At shutdown a deletion still running gets its grace, then its rm is killed and
 * reaped (the loop ends), and what it left stays in the trash for the next start. The
 * rm is caught in the middle of its work by stopping it (SIGSTOP) before the grace:
 * a tree of 3000 files, made again until the rm is caught before it is done. */
START_TEST(shutdown_stops_what_outlives_its_grace) {
        struct rig g;
        char rel[128];
        pid_t rm = 0;
        uint64_t t0;
        int attempt, i;

        rig_up(&g);
        trash_empty(&g.d);
        for (attempt = 0; attempt < 20 && !rm; attempt++) {
                char path[2 * PATH_MAX];
                snprintf(rel, sizeof(rel), "trash/big.%d", attempt);
                mkdirs("%s", rel);
                for (i = 0; i < 3000; i++)
                        put("%s/f%d", rel, i);
                snprintf(path, sizeof(path), "%s/%s", state, rel);
                trash_remove_later(&g.d, path);
                rm = only_child();
                if (rm > 0 && kill(rm, SIGSTOP) == 0) {
                        for (i = 0; i < 1000 && !is_stopped(rm); i++)
                                usleep(1000);
                        if (is_stopped(rm) && exists(rel)) {
                                char p[128];
                                FILE *f;
                                snprintf(p, sizeof(p), "%s/rm.pid", state);
                                f = fopen(p, "w");
                                ck_assert_ptr_nonnull(f);
                                fprintf(f, "%d\n", (int)rm);
                                fclose(f);
                                break; /* caught in the middle */
                        }
                        kill(rm, SIGCONT);
                }
                rm = 0;
                uv_run(&g.loop, UV_RUN_DEFAULT); /* that one finished: reap it */
        }
        ck_assert_msg(rm > 0, "never caught an rm before it was done");
        uv_update_time(&g.loop); /* as a callback of the loop would see it */
        t0 = now_ms();
        trash_stop(&g.d, 200);
        rig_down(&g); /* returns once the rm has been killed and reaped */
        ck_assert_uint_ge(now_ms() - t0, 150);
        ck_assert_uint_lt(now_ms() - t0, 10000);
        ck_assert_int_eq(kill(rm, 0), -1); /* reaped: no such process */
        ck_assert_int_eq(errno, ESRCH);
        ck_assert(exists(rel)); /* left for the next start */
}
END_TEST

#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 60, state_setup, state_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("trash");

        ADD_TEST(s, an_ended_sandbox_goes_to_the_trash);
        ADD_TEST(s, a_kept_workspace_stays);
        ADD_TEST(s, the_remover_stays_on_its_filesystem);
        ADD_TEST(s, deleting_here_stays_on_its_filesystem);
        ADD_TEST(s, start_up_empties_the_trash);
        ADD_TEST(s, shutdown_stops_what_outlives_its_grace);
        return s;
}

SBX_TEST_MAIN(make_suite)
