/* check_files.c: the Check suite of daemon/files.c, the file operations of a sandbox,
 * and above all their path resolution: every path resolves inside the sandbox's root
 * as a command there would resolve it, whatever "..", symlinks, /proc magic links,
 * long names or hidden paths it holds, with the sandbox user's rights.
 *
 * The sandbox is a real directory tree (the fixture's ROOT) opened O_PATH as its view's
 * root, with the view files.c reads (sandbox_view.h) and nothing else of a sandbox: no
 * daemon, no init. Its user is nobody (65534), so the rights are a real unprivileged
 * user's (the tests run as root, and files.c takes that user's credentials). Tests that
 * need a mount (proc, a tmpfs) first move their own process into a private mount
 * namespace, so that every mount goes with the test's process. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "pathset.h"
#include "sandbox_int.h" /* the view inside struct sandbox, all files.c reads of it */
#include "sbx_limits.h"
#include "sbxd.h"
#include "testutil.h"
#include "viewtest.h"

#define NOBODY 65534u

static char tmpdir[64];
static char root[128];    /* the sandbox's "/" */
static char outside[128]; /* a host directory beside it, never reachable */

/* The sandbox under test: a zeroed struct sandbox whose view the tests fill. */
static struct sbxd core;
static struct sandbox sandbox;

static void put(const char *rel, const char *content, mode_t mode, uid_t uid) {
        char p[2 * PATH_MAX];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        fclose(f);
        ck_assert_int_eq(chmod(p, mode), 0);
        ck_assert_int_eq(chown(p, uid, uid), 0);
}

static void dir(const char *rel, mode_t mode, uid_t uid) {
        char p[2 * PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
        ck_assert_int_eq(mkdir(p, mode), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
        ck_assert_int_eq(chown(p, uid, uid), 0);
}

/* A symlink at rel (below the fixture's directory) to target. */
static void link_to(const char *target, const char *rel) {
        char p[2 * PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
        ck_assert_int_eq(symlink(target, p), 0);
}

/* 1 when rel (below the fixture's directory) exists, not followed. */
static int exists(const char *rel) {
        char p[2 * PATH_MAX];
        struct stat st;

        snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
        return lstat(p, &st) == 0;
}

static void tree_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_files");
        snprintf(root, sizeof(root), "%s/root", tmpdir);
        snprintf(outside, sizeof(outside), "%s/outside", tmpdir);
        dir("root", 0755, 0);
        dir("root/workspace", 0755, NOBODY);
        dir("root/etc", 0755, 0);
        dir("root/tmp", 01777, 0);
        dir("root/srv", 0755, 0);
        dir("root/proc", 0555, 0);
        put("root/etc/passwd", "sandbox passwd\n", 0644, 0);
        put("root/etc/shadow", "sandbox shadow\n", 0600, 0);
        dir("outside", 0755, 0);
        put("outside/secret", "host secret\n", 0644, 0);
}

static void tree_teardown(void) {
        test_dir_unmount(tmpdir);
        test_dir_remove(tmpdir);
}

/* The sandbox: ready, its root ROOT, its user nobody, hiding the paths given (NULL
 * ended). */
static struct sandbox *sandbox_up(const char *const *hidden) {
        return viewtest_up(&sandbox, &core, root, hidden);
}

static void sandbox_down(struct sandbox *sb) {
        viewtest_down(sb);
}


static char err[2048];
static char got[4096];

/* files_read of path with no limit; what was read, as a string, into got. */
static int rd(struct sandbox *sb, const char *path) {
        struct files_read_result r;
        int rc = files_read(sb, path, 0, 0, 1 << 20, 1 << 20, &r, err, sizeof(err));

        got[0] = '\0';
        if (rc == 0) {
                ck_assert_uint_lt(r.len, sizeof(got));
                memcpy(got, r.data, r.len);
                got[r.len] = '\0';
        }
        files_read_result_clear(&r);
        return rc;
}

static int wr(struct sandbox *sb, const char *path, const char *data, unsigned flags) {
        return files_write(sb, path, (const uint8_t *)data, strlen(data), 0644, flags, NULL, err,
                           sizeof(err));
}

/* files_remove_open, run and finish, on this thread. */
static int rm(struct sandbox *sb, const char *path, int recursive) {
        struct files_remove_job *job = NULL;
        int r = files_remove_open(sb, path, recursive, &job, err, sizeof(err));

        if (r < 0 || !job)
                return r;
        files_remove_run(job, NULL, NULL);
        return files_remove_finish(job, sb, path, err, sizeof(err));
}

/* ---- ".." ----------------------------------------------------------------------------- */

/* ".." stops at the sandbox's root, as it does for a command there: the sandbox's
 * /etc/passwd is read, never the host's, and a host file that the root lacks is not
 * found. A relative path is relative to /workspace. */
START_TEST(dotdot_stops_at_the_root) {
        struct sandbox *sb = sandbox_up(NULL);

        ck_assert_int_eq(rd(sb, "../../../../../../etc/passwd"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(rd(sb, "/../../etc/../../etc/passwd"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(rd(sb, "/etc/hostname"), -ENOENT);
        ck_assert_int_eq(rd(sb, "/../../../../../../../../etc/hostname"), -ENOENT);
        ck_assert_msg(strstr(err, "not found in sandbox 'sbx-test'"), "%s", err);
        /* Relative: below /workspace. */
        ck_assert_int_eq(wr(sb, "note", "hello\n", 0), 0);
        ck_assert(exists("root/workspace/note"));
        ck_assert_int_eq(rd(sb, "/workspace/note"), 0);
        ck_assert_str_eq(got, "hello\n");
        /* A write through ".." lands inside the root too. */
        ck_assert_int_eq(wr(sb, "../../../../tmp/x", "in the root\n", 0), 0);
        ck_assert(exists("root/tmp/x"));
        sandbox_down(sb);
}
END_TEST

/* ---- symlinks ------------------------------------------------------------------------- */

/* Symlinks planted in the sandbox resolve inside its root: an absolute one to
 * /etc/passwd reads the sandbox's, one to a host path outside the root is not found,
 * a relative one climbing past the root stops there; a write through a link to a host
 * path creates nothing on the host; stat describes a link it cannot follow itself. */
START_TEST(symlinks_resolve_inside_the_root) {
        struct sandbox *sb = sandbox_up(NULL);
        char host_secret[PATH_MAX], host_new[PATH_MAX];
        Sbx__V1__FileInfo fi;

        snprintf(host_secret, sizeof(host_secret), "%s/secret", outside);
        snprintf(host_new, sizeof(host_new), "%s/new", outside);
        link_to("/etc/passwd", "root/workspace/abs");
        link_to("../../../../../../../../etc/passwd", "root/workspace/rel");
        link_to(host_secret, "root/workspace/host");
        link_to(host_new, "root/workspace/hostnew");
        link_to("/", "root/workspace/up");

        ck_assert_int_eq(rd(sb, "abs"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(rd(sb, "rel"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(rd(sb, "up/etc/../../../etc/passwd"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(rd(sb, "host"), -ENOENT);
        ck_assert_int_eq(rd(sb, "up/../../../outside/secret"), -ENOENT);

        ck_assert_int_eq(wr(sb, "hostnew", "escaped\n", 0), -ENOENT);
        ck_assert_int_eq(wr(sb, "hostnew", "escaped\n", FILES_WRITE_APPEND), -ENOENT);
        ck_assert(!exists("outside/new"));

        ck_assert_int_eq(files_stat(sb, "host", &fi, err, sizeof(err)), 0);
        ck_assert_int_eq(fi.type, SBX__V1__FILE_TYPE__SYMLINK);
        ck_assert_str_eq(fi.symlink_target, host_secret);
        files_info_clear(&fi);
        ck_assert_int_eq(files_stat(sb, "abs", &fi, err, sizeof(err)), 0);
        ck_assert_int_eq(fi.type, SBX__V1__FILE_TYPE__REGULAR);
        ck_assert_uint_eq(fi.size, strlen("sandbox passwd\n"));
        files_info_clear(&fi);
        sandbox_down(sb);
}
END_TEST

/* A link through /proc (the sandbox's own procfs, mounted at its /proc) is a magic link
 * to the daemon's root: refused with ELOOP, asked directly or through a planted
 * symlink, and stat describes the planted link itself. */
START_TEST(proc_magic_links_are_refused) {
        struct sandbox *sb;
        Sbx__V1__FileInfo fi;
        char p[PATH_MAX];

        test_private_mounts();
        snprintf(p, sizeof(p), "%s/proc", root);
        ck_assert_int_eq(mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), 0);
        sb = sandbox_up(NULL);
        link_to("/proc/self/root/etc/hostname", "root/workspace/magic");
        link_to("/proc/self/cwd", "root/workspace/cwd");

        ck_assert_int_eq(rd(sb, "/proc/self/root/etc/hostname"), -ELOOP);
        ck_assert_msg(strstr(err, "/proc"), "%s", err);
        ck_assert_int_eq(rd(sb, "magic"), -ELOOP);
        ck_assert_int_eq(wr(sb, "/proc/self/root/tmp/x", "x", 0), -ELOOP);
        ck_assert_int_eq(wr(sb, "cwd/x", "x", 0), -ELOOP);
        ck_assert_int_eq(files_stat(sb, "magic", &fi, err, sizeof(err)), 0);
        ck_assert_int_eq(fi.type, SBX__V1__FILE_TYPE__SYMLINK);
        files_info_clear(&fi);
        sandbox_down(sb);
}
END_TEST

/* A symlink loop, and a chain longer than the kernel's 40 hops, end with ELOOP; so does
 * a write through them (files.c follows a final link itself). */
START_TEST(symlink_loops_end) {
        struct sandbox *sb = sandbox_up(NULL);
        char name[64], target[64];
        int i;

        link_to("self", "root/workspace/self");
        link_to("b", "root/workspace/a");
        link_to("a", "root/workspace/b");
        /* chain0 -> chain1 -> ... -> chain41 -> file */
        for (i = 0; i <= 41; i++) {
                snprintf(name, sizeof(name), "root/workspace/chain%d", i);
                snprintf(target, sizeof(target), i == 41 ? "file" : "chain%d", i + 1);
                link_to(target, name);
        }
        put("root/workspace/file", "end\n", 0644, NOBODY);

        ck_assert_int_eq(rd(sb, "self"), -ELOOP);
        ck_assert_int_eq(rd(sb, "a"), -ELOOP);
        ck_assert_int_eq(wr(sb, "a", "x", 0), -ELOOP);
        ck_assert_int_eq(wr(sb, "self", "x", FILES_WRITE_APPEND), -ELOOP);
        ck_assert_int_eq(rd(sb, "chain0"), -ELOOP);
        ck_assert_int_eq(wr(sb, "chain0", "x", 0), -ELOOP);
        /* 30 hops are fine. */
        ck_assert_int_eq(rd(sb, "chain12"), 0);
        ck_assert_str_eq(got, "end\n");
        ck_assert_int_eq(wr(sb, "chain12", "new\n", 0), 0);
        ck_assert_int_eq(rd(sb, "file"), 0);
        ck_assert_str_eq(got, "new\n");
        sandbox_down(sb);
}
END_TEST

/* ---- limits --------------------------------------------------------------------------- */

/* A name past NAME_MAX, a path past SBX_PATH_MAX_BYTES, and a symlink whose target makes
 * the path walked too long are refused with their own errors, and create nothing. */
START_TEST(names_and_paths_past_the_limits) {
        struct sandbox *sb = sandbox_up(NULL);
        char longname[NAME_MAX + 2], path[SBX_PATH_MAX_BYTES + 64], target[4000], p[PATH_MAX];
        size_t i;

        memset(longname, 'n', NAME_MAX + 1);
        longname[NAME_MAX + 1] = '\0';
        ck_assert_int_eq(wr(sb, longname, "x", 0), -ENAMETOOLONG);
        ck_assert_int_eq(rd(sb, longname), -ENAMETOOLONG);
        snprintf(path, sizeof(path), "d/%s/f", longname);
        ck_assert_int_eq(wr(sb, path, "x", FILES_WRITE_CREATE_PARENTS), -ENAMETOOLONG);
        ck_assert_int_eq(files_mkdir(sb, path, 0755, 1, err, sizeof(err)), -ENAMETOOLONG);
        ck_assert_msg(strstr(err, "too long"), "%s", err);
        /* As mkdir -p: what lies before the long name was made, nothing after it. */
        snprintf(p, sizeof(p), "root/workspace/d/%.*s", NAME_MAX, longname);
        ck_assert(!exists(p));
        /* NAME_MAX itself is a name. */
        longname[NAME_MAX] = '\0';
        ck_assert_int_eq(wr(sb, longname, "x", 0), 0);

        /* The path: SBX_PATH_MAX_BYTES is the bound, one more is refused up front. */
        for (i = 0; i < SBX_PATH_MAX_BYTES + 1; i++)
                path[i] = (i % 2) ? '/' : 'a';
        path[SBX_PATH_MAX_BYTES + 1] = '\0';
        ck_assert_int_eq(rd(sb, path), -EINVAL);
        ck_assert_msg(strstr(err, "more than the 4096 allowed"), "%s", err);
        /* At the bound it goes to the kernel, whose PATH_MAX counts the NUL (and the
         * relative path walked is below /workspace/): too long there. */
        path[SBX_PATH_MAX_BYTES] = '\0';
        ck_assert_int_eq(rd(sb, path), -ENAMETOOLONG);
        ck_assert_msg(strstr(err, "a name or the path is too long"), "%s", err);
        path[4000] = '\0';
        ck_assert_int_eq(rd(sb, path), -ENOENT);

        /* A relative target of 3999 bytes, below a directory whose name is 250: the path
         * walked would pass ABS_MAX. */
        memset(longname, 'd', 250);
        longname[250] = '\0';
        snprintf(p, sizeof(p), "root/workspace/%s", longname);
        dir(p, 0755, NOBODY);
        memset(target, 'x', sizeof(target) - 1);
        for (i = 200; i < sizeof(target) - 1; i += 200)
                target[i] = '/';
        target[sizeof(target) - 1] = '\0';
        snprintf(p, sizeof(p), "root/workspace/%s/l", longname);
        link_to(target, p);
        snprintf(path, sizeof(path), "%s/l", longname);
        ck_assert_int_eq(wr(sb, path, "x", 0), -ENAMETOOLONG);
        sandbox_down(sb);
}
END_TEST

/* ---- hidden paths --------------------------------------------------------------------- */

/* A hidden path that is no mount (it did not exist when the sandbox was made) is not
 * found however it is spelled, and nothing is created there, not even with
 * create_parents. */
START_TEST(hidden_paths_are_not_found_by_name) {
        static const char *const hidden[] = {"/workspace/secret", NULL};
        struct sandbox *sb = sandbox_up(hidden);
        struct files_list_job *job = NULL;

        ck_assert_int_eq(wr(sb, "secret/x", "x", FILES_WRITE_CREATE_PARENTS), -ENOENT);
        ck_assert_msg(strstr(err, "its policy hides that path"), "%s", err);
        ck_assert_int_eq(wr(sb, "./secret", "x", 0), -ENOENT);
        ck_assert_int_eq(wr(sb, "/workspace//secret/../secret/y", "x", FILES_WRITE_CREATE_PARENTS),
                         -ENOENT);
        ck_assert_int_eq(wr(sb, "/tmp/../workspace/secret", "x", 0), -ENOENT);
        ck_assert_int_eq(files_mkdir(sb, "secret/a/b", 0755, 1, err, sizeof(err)), -ENOENT);
        ck_assert(!exists("root/workspace/secret"));
        /* Made by the host after all: still not found. */
        put("root/workspace/secret", "s\n", 0644, NOBODY);
        ck_assert_int_eq(rd(sb, "secret"), -ENOENT);
        ck_assert_int_eq(rd(sb, "/workspace/./secret"), -ENOENT);
        ck_assert_int_eq(files_list_open(sb, "secret", 0, 1 << 20, &job, err, sizeof(err)),
                         -ENOENT);
        ck_assert_ptr_null(job);
        ck_assert_int_eq(rm(sb, "secret", 0), -ENOENT);
        ck_assert(exists("root/workspace/secret"));
        /* Its neighbours are not hidden. */
        ck_assert_int_eq(wr(sb, "secretive", "x", 0), 0);
        sandbox_down(sb);
}
END_TEST

/* A hidden path covered by a mount (as init hides one) is not found through a symlink
 * or ".." that leads there either: what was opened is recognised by its mount. A
 * listing of its directory leaves it out; a write below it creates nothing. */
START_TEST(hidden_mounts_are_not_found_by_any_way) {
        static const char *const hidden[] = {"/srv/hidden", NULL};
        struct sandbox *sb;
        struct files_list_job *job = NULL;
        struct files_list l;
        char p[PATH_MAX];
        size_t i;

        test_private_mounts();
        dir("root/srv/hidden", 0755, 0);
        dir("root/srv/open", 0755, 0);
        snprintf(p, sizeof(p), "%s/srv/hidden", root);
        ck_assert_int_eq(mount("sbx-hidden", p, "tmpfs", 0, "mode=0777"), 0);
        put("root/srv/hidden/f", "under the mount\n", 0644, 0);
        ck_assert_int_eq(mount("none", p, "none", MS_REMOUNT | MS_RDONLY, NULL), 0);
        sb = sandbox_up(hidden);
        link_to("/srv/hidden", "root/workspace/s");
        link_to("../srv/./hidden/f", "root/workspace/sf");

        ck_assert_int_eq(rd(sb, "s/f"), -ENOENT);
        ck_assert_msg(strstr(err, "its policy hides that path"), "%s", err);
        ck_assert_int_eq(rd(sb, "sf"), -ENOENT);
        ck_assert_int_eq(rd(sb, "/workspace/../workspace/s/f"), -ENOENT);
        ck_assert_int_eq(wr(sb, "sf", "x", 0), -ENOENT);
        ck_assert_int_eq(wr(sb, "s/new/x", "x", FILES_WRITE_CREATE_PARENTS), -ENOENT);
        ck_assert_msg(strstr(err, "its policy hides that path"), "%s", err);
        ck_assert_int_eq(files_mkdir(sb, "s/new", 0755, 1, err, sizeof(err)), -ENOENT);
        ck_assert_int_eq(files_list_open(sb, "s", 0, 1 << 20, &job, err, sizeof(err)), -ENOENT);
        ck_assert_int_eq(rm(sb, "s/f", 0), -ENOENT);

        /* /srv lists "open" but not "hidden". */
        ck_assert_int_eq(files_list_open(sb, "/srv", 0, 1 << 20, &job, err, sizeof(err)), 0);
        files_list_run(job, NULL, NULL);
        ck_assert_int_eq(files_list_finish(job, sb, "/srv", &l, err, sizeof(err)), 0);
        ck_assert_uint_eq(l.n, 1);
        for (i = 0; i < l.n; i++)
                ck_assert_str_eq(l.entries[i]->name, "open");
        files_list_clear(&l);
        sandbox_down(sb);
}
END_TEST

/* ---- remove --------------------------------------------------------------------------- */

/* The root and /workspace cannot be removed, however they are named: "..", ".", a
 * symlinked parent. */
START_TEST(remove_refuses_the_root_and_workspace) {
        struct sandbox *sb = sandbox_up(NULL);

        link_to("/", "root/workspace/up");
        dir("root/workspace/sub", 0755, NOBODY);
        ck_assert_int_eq(rm(sb, "/", 1), -EINVAL);
        ck_assert_int_eq(rm(sb, "/workspace", 1), -EINVAL);
        ck_assert_int_eq(rm(sb, "/workspace/.", 1), -EINVAL);
        ck_assert_int_eq(rm(sb, "sub/..", 1), -EINVAL);
        ck_assert_int_eq(rm(sb, "..", 1), -EINVAL);
        ck_assert_int_eq(rm(sb, "up/workspace", 1), -EINVAL);
        ck_assert_msg(strstr(err, "it is the root or /workspace"), "%s", err);
        ck_assert_int_eq(rm(sb, "up/workspace/", 1), -EINVAL);
        ck_assert(exists("root/workspace/sub"));
        /* The symlink itself goes, not what it points at. */
        ck_assert_int_eq(rm(sb, "up", 1), 0);
        ck_assert(!exists("root/workspace/up"));
        ck_assert(exists("root/etc/passwd"));
        sandbox_down(sb);
}
END_TEST

/* A recursive remove never follows a symlink out of the tree (the host's files it
 * points at stay) and never crosses into another mount (one inside the tree stops it:
 * a mount point, and what is on that mount stays). */
START_TEST(recursive_remove_stays_in_its_tree) {
        struct sandbox *sb;
        char p[PATH_MAX];

        test_private_mounts();
        sb = sandbox_up(NULL);
        dir("root/workspace/t", 0755, NOBODY);
        dir("root/workspace/t/a", 0755, NOBODY);
        dir("root/workspace/t/a/b", 0755, NOBODY);
        put("root/workspace/t/a/b/f", "f\n", 0644, NOBODY);
        snprintf(p, sizeof(p), "%s", outside);
        link_to(p, "root/workspace/t/a/out");
        link_to("/etc", "root/workspace/t/etc");
        ck_assert_int_eq(rm(sb, "t", 1), 0);
        ck_assert(!exists("root/workspace/t"));
        ck_assert(exists("outside/secret"));
        ck_assert(exists("root/etc/passwd"));

        dir("root/workspace/m", 0755, NOBODY);
        dir("root/workspace/m/mnt", 0755, NOBODY);
        snprintf(p, sizeof(p), "%s/workspace/m/mnt", root);
        ck_assert_int_eq(mount("tmpfs", p, "tmpfs", 0, "mode=0777"), 0);
        put("root/workspace/m/mnt/kept", "k\n", 0644, NOBODY);
        ck_assert_int_eq(rm(sb, "m", 1), -EINVAL);
        ck_assert_msg(strstr(err, "mount point"), "%s", err);
        ck_assert(exists("root/workspace/m/mnt/kept"));
        /* The mount itself cannot be removed either. */
        ck_assert_int_eq(rm(sb, "m/mnt", 1), -EINVAL);
        ck_assert(exists("root/workspace/m/mnt/kept"));
        sandbox_down(sb);
}
END_TEST

/* A tree nested deeper than the walk holds directories open for stops with E2BIG. */
START_TEST(recursive_remove_depth_is_bounded) {
        struct sandbox *sb = sandbox_up(NULL);
        char p[PATH_MAX];
        size_t len;
        int i;

        len = (size_t)snprintf(p, sizeof(p), "root/workspace/deep");
        dir(p, 0755, NOBODY);
        for (i = 0; i < 140; i++) {
                len += (size_t)snprintf(p + len, sizeof(p) - len, "/d");
                dir(p, 0755, NOBODY);
        }
        ck_assert_int_eq(rm(sb, "deep", 1), -E2BIG);
        ck_assert_msg(strstr(err, "nested more than"), "%s", err);
        ck_assert(exists("root/workspace/deep"));
        sandbox_down(sb);
}
END_TEST

/* ---- the sandbox user's rights ------------------------------------------------------ */

/* Files are touched with the sandbox user's rights: root's 0600 file cannot be read,
 * root's directory cannot be written, a write makes a file the user owns; a FIFO is
 * refused without waiting for a writer. */
START_TEST(the_sandbox_users_rights_apply) {
        struct sandbox *sb = sandbox_up(NULL);
        char p[PATH_MAX];
        struct stat st;

        ck_assert_int_eq(rd(sb, "/etc/shadow"), -EACCES);
        ck_assert_msg(strstr(err, "permission denied"), "%s", err);
        ck_assert_int_eq(wr(sb, "/etc/new", "x", 0), -EACCES);
        ck_assert_int_eq(wr(sb, "/etc/passwd", "x", 0), -EACCES);
        ck_assert_int_eq(rd(sb, "/etc/passwd"), 0);
        ck_assert_str_eq(got, "sandbox passwd\n");
        ck_assert_int_eq(wr(sb, "mine", "x", 0), 0);
        snprintf(p, sizeof(p), "%s/workspace/mine", root);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_uid, NOBODY);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);

        snprintf(p, sizeof(p), "%s/workspace/fifo", root);
        ck_assert_int_eq(mkfifo(p, 0666), 0);
        ck_assert_int_eq(rd(sb, "fifo"), -EINVAL);
        ck_assert_msg(strstr(err, "a FIFO"), "%s", err);
        ck_assert_int_eq(wr(sb, "fifo", "x", 0), -EINVAL);
        ck_assert_int_eq(wr(sb, "fifo", "x", FILES_WRITE_APPEND), -EINVAL);
        /* setuid is never set. */
        ck_assert_int_eq(files_write(sb, "suid", (const uint8_t *)"x", 1, 04755, 0, NULL, err,
                                     sizeof(err)),
                         -EINVAL);
        ck_assert(!exists("root/workspace/suid"));
        sandbox_down(sb);
}
END_TEST

/* A sandbox that is not ready, is ending, or runs on a kernel without openat2 gets no
 * file operation; an empty path is refused. */
START_TEST(only_a_ready_sandbox_is_served) {
        struct sandbox *sb = sandbox_up(NULL);

        ck_assert_int_eq(rd(sb, ""), -EINVAL);
        sb->view.state = SBX__V1__SANDBOX_STATE__CREATING;
        ck_assert_int_eq(rd(sb, "/etc/passwd"), -ESHUTDOWN);
        sb->view.state = SBX__V1__SANDBOX_STATE__TERMINATED;
        ck_assert_int_eq(rd(sb, "/etc/passwd"), -ENODEV);
        sb->view.state = SBX__V1__SANDBOX_STATE__READY;
        core.features.openat2 = 0;
        ck_assert_int_eq(rd(sb, "/etc/passwd"), -ENOSYS);
        core.features.openat2 = 1;
        ck_assert_int_eq(rd(sb, "/etc/passwd"), 0);
        sandbox_down(sb);
}
END_TEST

/* A listing holds at most limit entries, the first by name, and says it was cut. */
START_TEST(listing_is_bounded_by_its_limit) {
        struct sandbox *sb = sandbox_up(NULL);
        struct files_list_job *job = NULL;
        struct files_list l;
        char rel[64];
        int i;

        for (i = 9; i >= 0; i--) {
                snprintf(rel, sizeof(rel), "root/workspace/f%d", i);
                put(rel, "x", 0644, NOBODY);
        }
        ck_assert_int_eq(files_list_open(sb, ".", 3, 1 << 20, &job, err, sizeof(err)), 0);
        files_list_run(job, NULL, NULL);
        ck_assert_int_eq(files_list_finish(job, sb, ".", &l, err, sizeof(err)), 0);
        ck_assert_uint_eq(l.n, 3);
        ck_assert_int_eq(l.truncated, 1);
        ck_assert_str_eq(l.entries[0]->name, "f0");
        ck_assert_str_eq(l.entries[1]->name, "f1");
        ck_assert_str_eq(l.entries[2]->name, "f2");
        files_list_clear(&l);
        ck_assert_int_eq(files_list_open(sb, ".", 0, 1 << 20, &job, err, sizeof(err)), 0);
        files_list_run(job, NULL, NULL);
        ck_assert_int_eq(files_list_finish(job, sb, ".", &l, err, sizeof(err)), 0);
        ck_assert_uint_eq(l.n, 10);
        ck_assert_int_eq(l.truncated, 0);
        files_list_clear(&l);
        sandbox_down(sb);
}
END_TEST

/* Where the kernel has no openat2(2) (before Linux 5.6; under valgrind, which does not
 * know it) every file operation is refused with ENOSYS and says why, as hostfeat tells
 * the daemon. */
START_TEST(without_openat2_nothing_is_served) {
        struct sandbox *sb = sandbox_up(NULL);
        struct files_list_job *job = NULL;
        Sbx__V1__FileInfo fi;

        core.features.openat2 = 0;
        ck_assert_int_eq(rd(sb, "/etc/passwd"), -ENOSYS);
        ck_assert_msg(strstr(err, "no openat2(2)"), "%s", err);
        ck_assert_int_eq(wr(sb, "x", "x", 0), -ENOSYS);
        ck_assert_int_eq(files_stat(sb, "/etc", &fi, err, sizeof(err)), -ENOSYS);
        ck_assert_int_eq(files_mkdir(sb, "d", 0755, 0, err, sizeof(err)), -ENOSYS);
        ck_assert_int_eq(files_list_open(sb, "/", 0, 1 << 20, &job, err, sizeof(err)), -ENOSYS);
        ck_assert_int_eq(rm(sb, "x", 0), -ENOSYS);
        ck_assert(!exists("root/workspace/x"));
        sandbox_down(sb);
}
END_TEST

/* 1 when this kernel (or what runs the test: valgrind) has openat2(2). */
static int have_openat2(void) {
        struct open_how how = {.flags = O_PATH | O_CLOEXEC};
        long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

        if (fd >= 0)
                close((int)fd);
        return fd >= 0 || errno != ENOSYS;
}

#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 30, tree_setup, tree_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("files");

        ADD_TEST(s, without_openat2_nothing_is_served);
        if (!have_openat2()) {
                fprintf(stderr, "check_files: SKIPPED every test but "
                                "without_openat2_nothing_is_served: no openat2(2) here\n");
                return s;
        }
        ADD_TEST(s, dotdot_stops_at_the_root);
        ADD_TEST(s, symlinks_resolve_inside_the_root);
        ADD_TEST(s, proc_magic_links_are_refused);
        ADD_TEST(s, symlink_loops_end);
        ADD_TEST(s, names_and_paths_past_the_limits);
        ADD_TEST(s, hidden_paths_are_not_found_by_name);
        ADD_TEST(s, hidden_mounts_are_not_found_by_any_way);
        ADD_TEST(s, remove_refuses_the_root_and_workspace);
        ADD_TEST(s, recursive_remove_stays_in_its_tree);
        ADD_TEST(s, recursive_remove_depth_is_bounded);
        ADD_TEST(s, the_sandbox_users_rights_apply);
        ADD_TEST(s, only_a_ready_sandbox_is_served);
        ADD_TEST(s, listing_is_bounded_by_its_limit);
        return s;
}

SBX_TEST_MAIN(make_suite)
