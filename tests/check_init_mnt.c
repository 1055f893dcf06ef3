/* check_init_mnt.c: read-only remounts of mnt.c, its refusal of a writable path that is
 * not the object the daemon checked, and the path helpers of util.c.
 *
 * The mount tests unshare a mount namespace in a child process they fork, so nothing
 * they mount is ever visible on the host and everything goes away with the child;
 * the host directory they mount on lives in an unchecked fixture that removes
 * it whatever happened. The "locked" tests reproduce what a rootless sandbox meets:
 * mounts copied into a mount namespace of a less privileged user namespace keep their
 * flags locked, and a remount that would drop one fails with EPERM. The devpts test sets
 * the ptys of a view's /dev/pts (mnt_set_ptys). Needs root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/mnt.h"
#include "init/util.h"
#include "testutil.h"

static char dir[128];
static char sub[160];

static void fixture_setup(void) {
        snprintf(dir, sizeof(dir), "/tmp/sbx-mnt-test.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(sub, sizeof(sub), "%s/sub", dir);
}

static void fixture_teardown(void) {
        rmdir(sub);
        rmdir(dir);
}

/* The mount tests run their body in a forked child with its own mount namespace, so
 * that they work the same when Check does not fork (CK_FORK=no, under valgrind). A
 * body reports its first failed check on stderr and returns non-zero. */
#define CHECK(cond)                                                                                \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: %s (errno %d: %s)\n", __FILE__, __LINE__, #cond,   \
                                errno, strerror(errno));                                           \
                        return 1;                                                                  \
                }                                                                                  \
        } while (0)

static void run_child(int (*body)(void)) {
        int status;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(body());
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

static int write_id_maps(void) {
        CHECK(util_write_file("/proc/self/setgroups", "deny") == 0);
        CHECK(util_write_file("/proc/self/uid_map", "0 0 1\n") == 0);
        CHECK(util_write_file("/proc/self/gid_map", "0 0 1\n") == 0);
        return 0;
}

/* A private mount namespace with a tmpfs on dir (flags) and another on dir/sub
 * (sub_flags). */
static int mount_pair(unsigned long flags, unsigned long sub_flags) {
        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", dir, "tmpfs", flags, "size=64k") == 0);
        CHECK(mkdir(sub, 0755) == 0);
        CHECK(mount("sbx-mnt-test", sub, "tmpfs", sub_flags, "size=64k") == 0);
        return 0;
}

static unsigned long vfs_flags(const char *path) {
        struct statvfs sv;

        if (statvfs(path, &sv) < 0)
                return ~0UL;
        return sv.f_flag & (ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_NOATIME);
}

static int can_create(const char *in) {
        char path[256];
        int fd;

        snprintf(path, sizeof(path), "%s/f", in);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        close(fd);
        unlink(path);
        return 0;
}

static int recursive_ro(int (*set)(const char *, unsigned, bool)) {
        CHECK(mount_pair(MS_NOSUID | MS_NOEXEC, MS_NODEV) == 0);
        CHECK(can_create(dir) == 0);
        CHECK(set(dir, MNT_RDONLY, true) == 0);
        CHECK(vfs_flags(dir) == (ST_RDONLY | ST_NOSUID | ST_NOEXEC));
        CHECK(vfs_flags(sub) == (ST_RDONLY | ST_NODEV));
        CHECK(can_create(dir) == -EROFS);
        CHECK(can_create(sub) == -EROFS);
        return 0;
}

static int body_setattr_recursive(void) {
        return recursive_ro(mnt_set_attr);
}

static int body_fallback_recursive(void) {
        return recursive_ro(mnt_set_attr_fallback);
}

static int body_non_recursive(void) {
        CHECK(mount_pair(0, 0) == 0);
        CHECK(mnt_set_attr_fallback(dir, MNT_RDONLY | MNT_NODEV, false) == 0);
        CHECK(vfs_flags(dir) == (ST_RDONLY | ST_NODEV));
        CHECK(vfs_flags(sub) == 0);
        CHECK(can_create(sub) == 0);
        CHECK(mnt_set_attr(sub, MNT_NOSUID | MNT_NOEXEC, false) == 0);
        CHECK(vfs_flags(sub) == (ST_NOSUID | ST_NOEXEC));
        CHECK(can_create(sub) == 0);
        return 0;
}

/* Mounts with flags, then moves into a new user and mount namespace where the copies
 * of those mounts have their flags locked. */
static int locked_pair(void) {
        CHECK(mount_pair(MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME, MS_NOSUID) == 0);
        CHECK(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0);
        CHECK(write_id_maps() == 0);
        /* A plain read-only remount drops the locked flags: refused. */
        CHECK(mount("none", dir, "none", MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == -1 &&
              errno == EPERM);
        return 0;
}

static int body_fallback_locked(void) {
        CHECK(locked_pair() == 0);
        CHECK(mnt_set_attr_fallback(dir, MNT_RDONLY, true) == 0);
        CHECK(vfs_flags(dir) == (ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_NOATIME));
        CHECK(vfs_flags(sub) == (ST_RDONLY | ST_NOSUID));
        CHECK(can_create(sub) == -EROFS);
        return 0;
}

static int body_setattr_locked(void) {
        CHECK(locked_pair() == 0);
        CHECK(mnt_set_attr(dir, MNT_RDONLY | MNT_NODEV, true) == 0);
        CHECK(vfs_flags(dir) == (ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_NOATIME));
        CHECK(vfs_flags(sub) == (ST_RDONLY | ST_NOSUID | ST_NODEV));
        return 0;
}

START_TEST(test_setattr_recursive) {
        run_child(body_setattr_recursive);
}
END_TEST

START_TEST(test_fallback_recursive) {
        run_child(body_fallback_recursive);
}
END_TEST

START_TEST(test_non_recursive_and_added_flags) {
        run_child(body_non_recursive);
}
END_TEST

START_TEST(test_fallback_keeps_locked_flags) {
        run_child(body_fallback_locked);
}
END_TEST

START_TEST(test_setattr_locked) {
        run_child(body_setattr_locked);
}
END_TEST

static int create_file(const char *path, const char *data) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        close(fd);
        return util_write_file(path, data);
}

/* sbx-init --reapply: a path that lies bare is covered (read-only with its directory
 * pinned, or hidden) and reported with what lay bare; a covered, missing or relative
 * one is left alone. */
static int body_reapply(void) {
        char a[200], f[220], secret[220], moved[220], buf[16];
        struct util_err err;
        struct stat bare, st;
        int fd;

        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", dir, "tmpfs", 0, "size=64k") == 0);
        snprintf(a, sizeof(a), "%s/a", dir);
        snprintf(f, sizeof(f), "%s/f", a);
        snprintf(secret, sizeof(secret), "%s/secret", a);
        snprintf(moved, sizeof(moved), "%s/moved", dir);
        CHECK(mkdir(a, 0755) == 0);
        CHECK(create_file(f, "f") == 0);
        CHECK(create_file(secret, "secret") == 0);
        memset(&err, 0, sizeof(err));
        CHECK(mnt_reapply(false, "relative/f", &bare, &err) == -EINVAL);
        CHECK(mnt_reapply(false, "/sbx/no/such/path", &bare, &err) == 0);
        CHECK(stat(f, &st) == 0);
        CHECK(mnt_reapply(false, f, &bare, &err) == 1);
        CHECK(bare.st_ino == st.st_ino && bare.st_dev == st.st_dev);
        CHECK(util_write_file(f, "x") == -EROFS);
        CHECK(rename(a, moved) < 0 && errno == EBUSY);
        CHECK(mnt_reapply(false, f, &bare, &err) == 0); /* covered now */
        CHECK(mnt_reapply(true, secret, &bare, &err) == 1);
        fd = open(secret, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 0);
        close(fd);
        return 0;
}

START_TEST(test_reapply) {
        run_child(body_reapply);
}
END_TEST

/* Opens /dev/pts/ptmx until the kernel refuses (at most 64): how many, all left open. */
static int open_ptys(void) {
        int n = 0;

        while (n < 64 && open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC) >= 0)
                n++;
        return n;
}

/* The super options of the mount at /dev/pts ("" when none), into buf. */
static void pts_options(char *buf, size_t len) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[1024];

        buf[0] = '\0';
        while (f && fgets(line, sizeof(line), f)) {
                char *sep = strstr(line, " - ");
                if (strstr(line, " /dev/pts ") && sep && sep > strstr(line, " /dev/pts "))
                        snprintf(buf, len, "%s", strrchr(sep, ' ') + 1);
        }
        if (f)
                fclose(f);
}

/* mnt_set_ptys on a view's /dev (a tmpfs of this mount namespace): a devpts mounted
 * where there was none, remounted with another max= keeping its other options (ptys
 * open stay open), unmounted for 0 (leaving the empty directory), and 0 again is
 * nothing to do. */
static int body_set_ptys(void) {
        struct util_err err;
        struct statfs sfs;
        char opts[256];
        DIR *d;
        int n = 0;

        memset(&err, 0, sizeof(err));
        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", "/dev", "tmpfs", MS_NOSUID, "size=64k") == 0);
        CHECK(mkdir("/dev/pts", 0755) == 0);
        CHECK(mnt_set_ptys(2, &err) == 0);
        CHECK(open_ptys() == 2);
        CHECK(errno == ENOSPC);
        CHECK(mnt_set_ptys(5, &err) == 0);
        CHECK(open_ptys() == 3);
        pts_options(opts, sizeof(opts));
        CHECK(strstr(opts, "mode=620") && strstr(opts, "ptmxmode=666") && strstr(opts, "max=5"));
        CHECK(mnt_set_ptys(0, &err) == 0);
        CHECK(statfs("/dev/pts", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC);
        d = opendir("/dev/pts");
        CHECK(d);
        while (readdir(d))
                n++;
        closedir(d);
        CHECK(n == 2); /* . and .. */
        CHECK(open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC) < 0 && errno == ENOENT);
        CHECK(mnt_set_ptys(0, &err) == 0);
        return 0;
}

START_TEST(test_set_ptys) {
        run_child(body_set_ptys);
}
END_TEST

/* 1 when the mount table of this process has a mount on path (its mount point field is
 * path exactly, as in the view, where a writable path is mounted at its own name). */
static int mounted_at(const char *path) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char *line = NULL, mp[4096];
        size_t cap = 0;
        int hit = 0;

        while (f && !hit && getline(&line, &cap, f) > 0)
                hit = sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && strcmp(mp, path) == 0;
        free(line);
        if (f)
                fclose(f);
        return hit;
}

/* Runs body(arg) as PID 1 of a new PID namespace, in a child (a view goes away with its
 * PID 1); 0 when it returned 0. */
static int as_pid1(int (*body)(const void *arg), const void *arg) {
        int status;
        pid_t pid = fork();

        CHECK(pid >= 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWPID) < 0 || (pid = fork()) < 0)
                        _exit(6);
                if (pid > 0)
                        _exit(waitpid(pid, &status, 0) == pid && WIFEXITED(status)
                                      ? WEXITSTATUS(status)
                                      : 7);
                _exit(body(arg));
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return 0;
}

/* What build_in_child builds and expects. */
struct build {
        const struct mnt_config *cfg;
        const char *w;
        int want_ok;
};

static int build_view(const void *arg) {
        const struct build *b = arg;
        struct util_warnings warn;
        struct util_err err;
        struct stat in;

        memset(&err, 0, sizeof(err));
        memset(&warn, 0, sizeof(warn));
        if (unshare(CLONE_NEWNS) < 0)
                return 3;
        if (mnt_build_view(b->cfg, &err, &warn) < 0) {
                if (b->want_ok)
                        fprintf(stderr, "control: %s\n", err.text);
                return b->want_ok || !strstr(err.text, "changed") ? 1 : mounted_at(b->w) ? 4 : 0;
        }
        return !b->want_ok ? 5 : stat(b->w, &in) == 0 && S_ISDIR(in.st_mode) ? 0 : 2;
}

/* Builds the view of cfg in a child of its own mount and PID namespaces (PID 1 there, as
 * in a sandbox; the view goes away with it). want_ok: the build must succeed and w be a
 * directory in it; else it must fail saying the path changed, with nothing mounted at
 * w. 0 when it went as wanted. */
static int build_in_child(const struct mnt_config *cfg, const char *w, int want_ok) {
        const struct build b = {cfg, w, want_ok};

        return as_pid1(build_view, &b);
}

/* mnt_build_view mounts a writable path only when it is the object the daemon opened
 * for the caller: another object at that name (its device and inode differ), or the
 * same object reached through a symlink on the way, is refused with an error that says
 * it changed, before anything is mounted there or a placeholder is made for it. The
 * object itself is mounted. */
static int body_writable_changed(void) {
        char w[200], git[220], hooks[240], real[200], realw[220], link[200], viasym[220];
        struct mnt_object obj;
        struct mnt_config cfg;
        struct stat st;
        char *wp[1], *mk[1];

        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", dir, "tmpfs", 0, "size=64k") == 0);
        snprintf(w, sizeof(w), "%s/w", dir);
        snprintf(git, sizeof(git), "%s/.git", w);
        snprintf(hooks, sizeof(hooks), "%s/hooks", git);
        CHECK(mkdir(w, 0755) == 0);
        CHECK(mkdir(git, 0755) == 0);
        CHECK(stat(w, &st) == 0);
        memset(&cfg, 0, sizeof(cfg));
        wp[0] = w;
        mk[0] = hooks;
        cfg.writable_paths = wp;
        cfg.n_writable_paths = 1;
        cfg.protected_mkdirs = mk;
        cfg.n_protected_mkdirs = 1;
        cfg.writable_objects = &obj;

        /* Another object at that name. */
        obj.dev = st.st_dev;
        obj.ino = st.st_ino + 1000;
        CHECK(build_in_child(&cfg, w, 0) == 0);
        CHECK(access(hooks, F_OK) < 0 && errno == ENOENT);

        /* The object checked, but through a symlink. */
        snprintf(real, sizeof(real), "%s/real", dir);
        snprintf(realw, sizeof(realw), "%s/w", real);
        snprintf(link, sizeof(link), "%s/link", dir);
        snprintf(viasym, sizeof(viasym), "%s/w", link);
        CHECK(mkdir(real, 0755) == 0);
        CHECK(mkdir(realw, 0755) == 0);
        CHECK(symlink("real", link) == 0);
        CHECK(stat(realw, &st) == 0);
        obj.dev = st.st_dev;
        obj.ino = st.st_ino;
        wp[0] = viasym;
        cfg.n_protected_mkdirs = 0;
        CHECK(build_in_child(&cfg, viasym, 0) == 0);

        /* Control: the object by its own name is mounted. */
        wp[0] = realw;
        return build_in_child(&cfg, realw, 1);
}

START_TEST(test_writable_changed_is_refused) {
        run_child(body_writable_changed);
}
END_TEST

/* ---- the ids of writable paths (root mode) ------------------------------------------- */

#define W_OWNER 3101u       /* the sandbox's owner */
#define W_OTHER 3102u       /* another user */
#define W_GROUP 3105u       /* a group the owner is in */
#define W_RUN   2100000100u /* the sandbox's uid and gid */

/* Writable paths as the daemon binds them for W_OWNER: a sticky world-writable
 * directory of root's (as the owner's ids), a setgid project directory of root's group
 * W_GROUP (as the owner with that group), W_OTHER's 0700 directory (as W_OTHER: root's
 * sandbox), the last marked a system directory. */
struct wids {
        char sticky[200], team[200], other[200], git[220], hooks[240];
        char *paths[3];
        struct mnt_bind binds[3];
        char *mkdirs[1];
        struct mnt_config cfg;
};

/* In the view, as the sandbox's user: what its uid and gid may do there, which is
 * what the mode bits give W_OWNER (with W_GROUP in the project) and no more. */
static int as_run_user(const struct wids *w) {
        char p[300];
        struct stat st;
        int fd;

        CHECK(setgroups(0, NULL) == 0 && setresgid(W_RUN, W_RUN, W_RUN) == 0 &&
              setresuid(W_RUN, W_RUN, W_RUN) == 0);
        snprintf(p, sizeof(p), "%s/mine", w->sticky);
        CHECK((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) >= 0 && close(fd) == 0);
        CHECK(stat(p, &st) == 0 && st.st_uid == W_RUN && st.st_gid == W_RUN);
        snprintf(p, sizeof(p), "%s/others", w->sticky);
        CHECK(stat(p, &st) == 0 && st.st_uid == W_OTHER); /* shown as itself */
        CHECK(unlink(p) < 0 && errno == EPERM);           /* sticky */
        CHECK(open(p, O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES);
        snprintf(p, sizeof(p), "%s/tfile", w->team);
        CHECK((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) >= 0 && close(fd) == 0);
        CHECK(stat(p, &st) == 0 && st.st_uid == W_RUN && st.st_gid == W_RUN);
        snprintf(p, sizeof(p), "%s/teamf", w->team);
        CHECK((fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC)) >= 0 && close(fd) == 0);
        snprintf(p, sizeof(p), "%s/made", w->other);
        CHECK((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) >= 0 && close(fd) == 0);
        return 0;
}

static int view_with_ids(const void *arg) {
        const struct wids *w = arg;
        struct util_warnings warn;
        struct util_err err;
        int status;
        size_t i;
        pid_t pid;

        memset(&err, 0, sizeof(err));
        memset(&warn, 0, sizeof(warn));
        CHECK(unshare(CLONE_NEWNS) == 0);
        if (mnt_build_view(&w->cfg, &err, &warn) < 0) {
                fprintf(stderr, "view: %s\n", err.text);
                return 1;
        }
        for (i = 0; i < warn.n && !strstr(warn.text[i], "system directory"); i++)
                ;
        CHECK(i < warn.n && strstr(warn.text[i], w->other));
        CHECK((pid = fork()) >= 0);
        if (pid == 0)
                _exit(as_run_user(w));
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return 0;
}

/* The owner and group of path on disk are uid and gid. */
static int owned(const char *dir_path, const char *name, uid_t uid, gid_t gid) {
        char p[300];
        struct stat st;

        snprintf(p, sizeof(p), "%s/%s", dir_path, name);
        CHECK(stat(p, &st) == 0);
        if (st.st_uid != uid || st.st_gid != gid)
                fprintf(stderr, "%s is %u:%u, not %u:%u\n", p, (unsigned)st.st_uid,
                        (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
        return st.st_uid == uid && st.st_gid == gid ? 0 : 1;
}

static int make_owned(const char *p, mode_t mode, uid_t uid, gid_t gid, int is_dir) {
        int fd;

        if (is_dir)
                CHECK(mkdir(p, mode) == 0);
        else
                CHECK((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) >= 0 &&
                      close(fd) == 0);
        CHECK(chown(p, uid, gid) == 0 && chmod(p, mode) == 0);
        return 0;
}

/* Each writable path is bound with its own ids shown as the sandbox's and every other
 * id as itself: in the sticky directory the sandbox makes its files (the owner's on
 * disk) and cannot remove or overwrite another user's; in the project it writes as a
 * member of its group (files the owner's, of that group; the placeholder of the
 * repository there too, made with those ids); in another user's directory bound with
 * that user's ids it writes as them. A path marked a system directory is warned of. */
static int body_writable_ids(void) {
        static struct wids w;
        char p[300];

        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", dir, "tmpfs", 0, "size=256k,mode=0755") == 0);
        snprintf(w.sticky, sizeof(w.sticky), "%s/sticky", dir);
        snprintf(w.team, sizeof(w.team), "%s/team", dir);
        snprintf(w.other, sizeof(w.other), "%s/other", dir);
        snprintf(w.git, sizeof(w.git), "%s/.git", w.team);
        snprintf(w.hooks, sizeof(w.hooks), "%s/hooks", w.git);
        CHECK(make_owned(w.sticky, 01777, 0, 0, 1) == 0);
        snprintf(p, sizeof(p), "%s/others", w.sticky);
        CHECK(make_owned(p, 0644, W_OTHER, W_OTHER, 0) == 0);
        CHECK(make_owned(w.team, 02775, 0, W_GROUP, 1) == 0);
        CHECK(make_owned(w.git, 02775, W_OTHER, W_GROUP, 1) == 0);
        snprintf(p, sizeof(p), "%s/teamf", w.team);
        CHECK(make_owned(p, 0660, W_OTHER, W_GROUP, 0) == 0);
        CHECK(make_owned(w.other, 0700, W_OTHER, W_OTHER, 1) == 0);

        memset(&w.cfg, 0, sizeof(w.cfg));
        w.paths[0] = w.sticky;
        w.paths[1] = w.team;
        w.paths[2] = w.other;
        w.binds[0] = (struct mnt_bind){W_OWNER, W_OWNER, false};
        w.binds[1] = (struct mnt_bind){W_OWNER, W_GROUP, false};
        w.binds[2] = (struct mnt_bind){W_OTHER, W_OTHER, true};
        w.mkdirs[0] = w.hooks;
        w.cfg.writable_paths = w.paths;
        w.cfg.n_writable_paths = 3;
        w.cfg.writable_binds = w.binds;
        w.cfg.protected_mkdirs = w.mkdirs;
        w.cfg.n_protected_mkdirs = 1;
        w.cfg.idmap = true;
        w.cfg.owner_uid = W_OWNER;
        w.cfg.owner_gid = W_OWNER;
        w.cfg.run_uid = W_RUN;
        w.cfg.run_gid = W_RUN;
        CHECK(as_pid1(view_with_ids, &w) == 0);

        CHECK(owned(w.sticky, "mine", W_OWNER, W_OWNER) == 0);
        CHECK(owned(w.sticky, "others", W_OTHER, W_OTHER) == 0);
        CHECK(owned(w.team, "tfile", W_OWNER, W_GROUP) == 0);
        CHECK(owned(w.git, "hooks", W_OWNER, W_GROUP) == 0);
        CHECK(owned(w.other, "made", W_OTHER, W_OTHER) == 0);
        return 0;
}

START_TEST(test_writable_ids) {
        run_child(body_writable_ids);
}
END_TEST

/* The lists of block devices the view replaces (mnt.c's device_lists). */
static const char *const block_lists[] = {"/sys/devices/virtual/block",
                                          "/sys/block",
                                          "/sys/class/block",
                                          "/sys/dev/block",
                                          "/sys/fs/ext4",
                                          "/proc/fs/ext4",
                                          "/proc/fs/jbd2",
                                          NULL};

/* How many entries of the directory path are a loop device's (their name, or what a
 * symlink points to, has "loop" in it), and into *others how many are not. -1 when
 * path cannot be read. */
static int loop_entries(const char *path, int *others) {
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;

        *others = 0;
        if (!d)
                return -1;
        while ((de = readdir(d))) {
                char target[4096] = "";
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                (void)!readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
                if (strstr(de->d_name, "loop") || strstr(target, "loop"))
                        n++;
                else
                        (*others)++;
        }
        closedir(d);
        return n;
}

/* The loop device the test attached (loopN) and how many other entries each list
 * has on the host. */
static char test_loop[32];
static int host_others[8];

/* Checks the view built (as PID 1): no list has the loop device, each still has the
 * host's other entries and is read-only; /proc/partitions has no loop line,
 * /proc/diskstats nothing. */
static int view_without_loops(const void *unused) {
        struct util_warnings warn;
        struct util_err err;
        char path[128], line[256];
        FILE *f;
        size_t i;
        int others;

        (void)unused;
        memset(&err, 0, sizeof(err));
        memset(&warn, 0, sizeof(warn));
        CHECK(unshare(CLONE_NEWNS) == 0);
        if (mnt_build_view(&(struct mnt_config){0}, &err, &warn) < 0) {
                fprintf(stderr, "view: %s\n", err.text);
                return 1;
        }
        for (i = 0; block_lists[i]; i++) {
                int loops = loop_entries(block_lists[i], &others);
                CHECK(loops == 0 || (loops < 0 && host_others[i] < 0));
                CHECK(loops < 0 || others == host_others[i]);
                snprintf(path, sizeof(path), "%s/made-in-the-view", block_lists[i]);
                CHECK(loops < 0 || (mkdir(path, 0755) < 0 && errno == EROFS));
        }
        snprintf(path, sizeof(path), "/sys/block/%s", test_loop);
        CHECK(access(path, F_OK) < 0 && errno == ENOENT);
        snprintf(path, sizeof(path), "/sys/devices/virtual/block/%s/loop/backing_file", test_loop);
        CHECK(access(path, F_OK) < 0 && errno == ENOENT);
        CHECK(access("/.sbx-lists", F_OK) < 0 && errno == ENOENT); /* where they were made */
        f = fopen("/proc/partitions", "re");
        CHECK(f != NULL);
        while (fgets(line, sizeof(line), f))
                CHECK(strstr(line, "loop") == NULL);
        fclose(f);
        f = fopen("/proc/diskstats", "re");
        CHECK(f != NULL && fgets(line, sizeof(line), f) == NULL);
        fclose(f);
        return 0;
}

/* Runs body as PID 1 (as_pid1) in a new user namespace whose root is root (and whose
 * PID namespace is then its own, as a rootless sandbox's), in a child. */
static int in_userns(int (*body)(const void *arg)) {
        int status;
        pid_t pid = fork();

        CHECK(pid >= 0);
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) < 0 || write_id_maps() != 0 ? 8 : as_pid1(body, NULL));
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return 0;
}

/* No loop device in the view's /sys and /proc (one attached to a file of this test's is
 * there to be seen on the host), the host's other block devices still listed, the
 * lists read-only; the same in a user namespace, where the host's mounts are locked (a
 * rootless sandbox). */
static int body_no_loop_device(void) {
        char img[200], path[64];
        struct loop_config lc;
        int ctl, fd, n, img_fd, others, r;
        size_t i;

        snprintf(img, sizeof(img), "%s/img", dir);
        img_fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        CHECK(img_fd >= 0 && ftruncate(img_fd, 1 << 20) == 0);
        ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0) {
                fprintf(stderr, "no loop devices here: no_loop_device checks nothing\n");
                unlink(img);
                return 0;
        }
        n = ioctl(ctl, LOOP_CTL_GET_FREE);
        close(ctl);
        CHECK(n >= 0);
        snprintf(test_loop, sizeof(test_loop), "loop%d", n);
        snprintf(path, sizeof(path), "/dev/loop%d", n);
        fd = open(path, O_RDWR | O_CLOEXEC);
        CHECK(fd >= 0);
        memset(&lc, 0, sizeof(lc));
        lc.fd = (uint32_t)img_fd;
        lc.info.lo_flags = LO_FLAGS_AUTOCLEAR; /* detached at the last close */
        CHECK(ioctl(fd, LOOP_CONFIGURE, &lc) == 0);
        for (i = 0; block_lists[i]; i++)
                host_others[i] = loop_entries(block_lists[i], &others) < 0 ? -1 : others;
        snprintf(path, sizeof(path), "/sys/block/%s", test_loop);
        r = access(path, F_OK) == 0 ? 0 : 1; /* the host shows it */
        if (r == 0)
                r = as_pid1(view_without_loops, NULL);
        if (r == 0)
                r = in_userns(view_without_loops);
        close(fd);
        close(img_fd);
        unlink(img);
        return r;
}

START_TEST(test_no_loop_device) {
        run_child(body_no_loop_device);
}
END_TEST

/* In the view: /sys/dev/block is there, empty and read-only. */
static int view_list_emptied(const void *unused) {
        struct util_warnings warn;
        struct util_err err;
        int others;

        (void)unused;
        memset(&err, 0, sizeof(err));
        memset(&warn, 0, sizeof(warn));
        CHECK(unshare(CLONE_NEWNS) == 0);
        if (mnt_build_view(&(struct mnt_config){0}, &err, &warn) < 0) {
                fprintf(stderr, "view: %s\n", err.text);
                return 1;
        }
        CHECK(access("/sys/dev/block/loop9", F_OK) < 0 && errno == ENOENT);
        CHECK(loop_entries("/sys/dev/block", &others) == 0 && others == 0);
        CHECK(mkdir("/sys/dev/block/made-in-the-view", 0755) < 0 && errno == EROFS);
        return 0;
}

/* A list PID 1 may not read but a command may search (here /sys/dev/block covered by a
 * tmpfs of a uid the user namespace does not map, mode 0311, holding loop9) is not
 * left as it is, where its entries could still be reached by name: the view has an
 * empty copy. */
static int body_unreadable_list(void) {
        CHECK(unshare(CLONE_NEWNS) == 0);
        CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0);
        CHECK(mount("sbx-mnt-test", "/sys/dev/block", "tmpfs", 0, "size=64k,mode=0311") == 0);
        CHECK(mkdir("/sys/dev/block/loop9", 0755) == 0);
        CHECK(chown("/sys/dev/block", 12345, 12345) == 0);
        return in_userns(view_list_emptied);
}

START_TEST(test_unreadable_list_emptied) {
        run_child(body_unreadable_list);
}
END_TEST

START_TEST(test_fallback_missing_path) {
        ck_assert_int_eq(mnt_set_attr_fallback("/sbx/no/such/path", MNT_RDONLY, true), -ENOENT);
}
END_TEST

/* The walk of /proc/self/fd used before Linux 5.11 marks every descriptor from the
 * given one on close-on-exec, and no lower one. */
START_TEST(test_cloexec_walk) {
        int fds[40], low, i;

        low = open("/dev/null", O_RDONLY); /* no O_CLOEXEC */
        ck_assert_int_ge(low, 0);
        for (i = 0; i < 40; i++) {
                fds[i] = open("/dev/null", O_RDONLY);
                ck_assert_int_ge(fds[i], 0);
        }
        ck_assert_int_eq(util_cloexec_walk(fds[0]), 0);
        ck_assert_int_eq(fcntl(low, F_GETFD) & FD_CLOEXEC, 0);
        for (i = 0; i < 40; i++) {
                ck_assert_int_eq(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
                close(fds[i]);
        }
        close(low);
}
END_TEST

START_TEST(test_path_ok) {
        ck_assert_int_eq(util_path_ok("/"), 1);
        ck_assert_int_eq(util_path_ok("/etc/shadow"), 1);
        ck_assert_int_eq(util_path_ok("/a//b/"), 1);
        ck_assert_int_eq(util_path_ok("/a/.hidden/..x"), 1);
        ck_assert_int_eq(util_path_ok(""), 0);
        ck_assert_int_eq(util_path_ok("etc"), 0);
        ck_assert_int_eq(util_path_ok("/a/../b"), 0);
        ck_assert_int_eq(util_path_ok("/a/./b"), 0);
        ck_assert_int_eq(util_path_ok("/a/.."), 0);
}
END_TEST

START_TEST(test_path_join_and_mkdir) {
        char buf[16], path[256];
        struct stat st;

        ck_assert_int_eq(util_path_join(buf, sizeof(buf), "/a/", "/b"), 0);
        ck_assert_str_eq(buf, "/a/b");
        ck_assert_int_eq(util_path_join(buf, sizeof(buf), "/", "etc"), 0);
        ck_assert_str_eq(buf, "/etc");
        ck_assert_int_eq(util_path_join(buf, sizeof(buf), "/0123456789", "abcdef"), -ENAMETOOLONG);
        snprintf(path, sizeof(path), "%s/x/y/z/", dir);
        ck_assert_int_eq(util_mkdir_p(path, 0755), 0);
        ck_assert_int_eq(util_mkdir_p(path, 0755), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        snprintf(path, sizeof(path), "%s/x/y/z/file", dir);
        ck_assert_int_eq(close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)), 0);
        snprintf(path, sizeof(path), "%s/x/y/z/file/deeper", dir);
        ck_assert_int_eq(util_mkdir_p(path, 0755), -ENOTDIR);
        snprintf(path, sizeof(path), "%s/x/y/z/file", dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/x/y/z", dir);
        rmdir(path);
        snprintf(path, sizeof(path), "%s/x/y", dir);
        rmdir(path);
        snprintf(path, sizeof(path), "%s/x", dir);
        ck_assert_int_eq(rmdir(path), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("init_mnt");
        TCase *tc = tcase_create("mounts");
        TCase *tp = tcase_create("paths");

        tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_setattr_recursive);
        tcase_add_test(tc, test_fallback_recursive);
        tcase_add_test(tc, test_non_recursive_and_added_flags);
        tcase_add_test(tc, test_fallback_keeps_locked_flags);
        tcase_add_test(tc, test_setattr_locked);
        tcase_add_test(tc, test_fallback_missing_path);
        tcase_add_test(tc, test_reapply);
        tcase_add_test(tc, test_set_ptys);
        tcase_add_test(tc, test_writable_changed_is_refused);
        tcase_add_test(tc, test_writable_ids);
        tcase_add_test(tc, test_no_loop_device);
        tcase_add_test(tc, test_unreadable_list_emptied);
        suite_add_tcase(s, tc);
        tcase_add_unchecked_fixture(tp, fixture_setup, fixture_teardown);
        tcase_set_timeout(tp, 30);
        tcase_add_test(tp, test_path_ok);
        tcase_add_test(tp, test_cloexec_walk);
        tcase_add_test(tp, test_path_join_and_mkdir);
        suite_add_tcase(s, tp);
        return s;
}

SBX_TEST_MAIN(make_suite)
