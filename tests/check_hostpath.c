/* check_hostpath.c: the Check suite of daemon/hostpath.c, the host paths a request
 * names, opened with the caller's own rights: what a caller may not reach, search,
 * read or write is refused (no confused deputy), symlinks lead only where the caller
 * could follow them, the class the caller was judged in is reported, and the daemon's
 * own directories are refused to everyone under any name (a symlink, a bind mount of
 * them or of a directory above them, a mount below a path that shows them).
 *
 * Real directories with real owners and modes in the fixture's directory T; callers are
 * raw uids that exist nowhere (ALICE, BOB in a supplementary group). Tests that mount
 * first move their own process into a private mount namespace. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caller.h"
#include "config.h"
#include "hostpath.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "testutil.h"

#define ALICE 4000u
#define BOB   4001u
#define CREW  4100u /* BOB's supplementary group */

static char T[64];

static const gid_t bob_groups[] = {CREW};
static const struct caller alice = {.uid = ALICE, .gid = ALICE};
static const struct caller bob = {.uid = BOB, .gid = BOB, .groups = bob_groups, .n_groups = 1};
static const struct caller root = {.uid = 0, .gid = 0};

static void mk(const char *rel, mode_t mode, uid_t uid, gid_t gid) {
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", T, rel);
        ck_assert_int_eq(mkdir(p, mode), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
        ck_assert_int_eq(chown(p, uid, gid), 0);
}

static void put(const char *rel, mode_t mode) {
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", T, rel);
        ck_assert_int_eq(close(open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
}

/* T with: state/ (the daemon's state directory), run/ (its socket's), pub/ (0755) and
 * pub/f (0644), priv/ (0700) and priv/g, alice/ (ALICE's), crew/ (0770, group CREW). */
static void tree_setup(void) {
        test_dir_make(T, sizeof(T), "check_hostpath");
        ck_assert_int_eq(chmod(T, 0755), 0);
        mk("state", 0700, 0, 0);
        mk("state/sub", 0755, 0, 0);
        mk("run", 0755, 0, 0);
        mk("pub", 0755, 0, 0);
        put("pub/f", 0644);
        mk("priv", 0700, 0, 0);
        put("priv/g", 0644);
        mk("alice", 0755, ALICE, ALICE);
        mk("crew", 0770, 0, CREW);
}

static void tree_teardown(void) {
        test_dir_unmount(T);
        test_dir_remove(T);
}

static struct config cfg;
static struct sbxd core;
static char state_dir[128], socket_path[128];

static struct sbxd *daemon_up(void) {
        memset(&cfg, 0, sizeof(cfg));
        memset(&core, 0, sizeof(core));
        snprintf(state_dir, sizeof(state_dir), "%s/state", T);
        snprintf(socket_path, sizeof(socket_path), "%s/run/sbxd.sock", T);
        cfg.state_dir = state_dir;
        cfg.socket_path = socket_path;
        core.cfg = &cfg;
        return &core;
}

static char err[1024];

/* hostpath_open of T/rel for k; the result into *h (cleared by the caller). */
static int op(const struct caller *k, const char *rel, enum hostpath_access want,
              struct hostpath *h) {
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", T, rel);
        err[0] = '\0';
        return hostpath_open(&core, k, "writable path", p, want, h, err, sizeof(err));
}

/* op, expecting r; the result is dropped. */
static void expect(const struct caller *k, const char *rel, enum hostpath_access want, int r) {
        struct hostpath h;
        int got = op(k, rel, want, &h);

        ck_assert_msg(got == r, "%s for uid %u (access %d): %d, not %d (%s)", rel,
                      (unsigned)k->uid, (int)want, got, r, err);
        hostpath_clear(&h);
}


static void bind_at(const char *from_rel, const char *to_rel, int ro) {
        char a[PATH_MAX], b[PATH_MAX];

        snprintf(a, sizeof(a), "%s/%s", T, from_rel);
        snprintf(b, sizeof(b), "%s/%s", T, to_rel);
        ck_assert_int_eq(mount(a, b, "none", MS_BIND, NULL), 0);
        if (ro)
                ck_assert_int_eq(mount("none", b, "none", MS_BIND | MS_REMOUNT | MS_RDONLY, NULL), 0);
}

/* ---- the request's own checks ----------------------------------------------------------- */

/* A path that is not absolute, one too long, and one that does not exist are refused
 * with their own errors. */
START_TEST(bad_paths_are_refused) {
        struct hostpath h;
        char *long_path = malloc(SBX_PATH_MAX_BYTES + 2);

        daemon_up();
        ck_assert_int_eq(hostpath_open(&core, &root, "root_dir", "pub", HOSTPATH_ROOT, &h, err,
                                       sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "must be an absolute path"), "%s", err);
        ck_assert_int_eq(hostpath_open(&core, &root, "root_dir", NULL, HOSTPATH_ROOT, &h, err,
                                       sizeof(err)),
                         -EINVAL);
        memset(long_path, 'a', SBX_PATH_MAX_BYTES + 1);
        long_path[0] = '/';
        long_path[SBX_PATH_MAX_BYTES] = '\0';
        ck_assert_int_eq(hostpath_open(&core, &root, "root_dir", long_path, HOSTPATH_ROOT, &h, err,
                                       sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "longer than 4096 bytes"), "%s", err);
        free(long_path);
        expect(&root, "nothing", HOSTPATH_LOOKUP, -ENOENT);
        ck_assert_msg(strstr(err, "does not exist on the host"), "%s", err);
}
END_TEST

/* ---- the caller's rights ---------------------------------------------------------------- */

/* Each caller is judged with its own rights, never the daemon's: a directory it cannot
 * search hides what is below, a directory it cannot write is refused for writing, a
 * file is no root; the class it was judged in (owner, group by a supplementary group,
 * other; root as root) comes back with what was opened. */
START_TEST(callers_are_judged_with_their_own_rights) {
        struct hostpath h;
        struct stat st;
        char p[PATH_MAX];

        daemon_up();
        expect(&alice, "priv/g", HOSTPATH_LOOKUP, -EACCES);
        ck_assert_msg(strstr(err, "you (uid 4000) may not reach it"), "%s", err);
        expect(&alice, "priv", HOSTPATH_ROOT, -EACCES);
        expect(&alice, "pub", HOSTPATH_WRITE, -EACCES);
        ck_assert_msg(strstr(err, "may not write it"), "%s", err);
        expect(&alice, "pub/f", HOSTPATH_WRITE, -EACCES);
        expect(&alice, "crew", HOSTPATH_WRITE, -EACCES);
        expect(&root, "pub/f", HOSTPATH_ROOT, -ENOTDIR);

        ck_assert_int_eq(op(&root, "priv/g", HOSTPATH_WRITE, &h), 0);
        ck_assert_int_eq(h.class, HOSTPATH_CLASS_ROOT);
        hostpath_clear(&h);
        ck_assert_int_eq(op(&alice, "alice", HOSTPATH_WRITE, &h), 0);
        ck_assert_int_eq(h.class, HOSTPATH_CLASS_OWNER);
        snprintf(p, sizeof(p), "%s/alice", T);
        ck_assert_str_eq(h.path, p);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(h.dev, st.st_dev);
        ck_assert_uint_eq(h.ino, st.st_ino);
        ck_assert_uint_eq(h.uid, ALICE);
        ck_assert(S_ISDIR(h.mode));
        hostpath_clear(&h);
        ck_assert_int_eq(op(&bob, "crew", HOSTPATH_WRITE, &h), 0);
        ck_assert_int_eq(h.class, HOSTPATH_CLASS_GROUP);
        hostpath_clear(&h);
        ck_assert_int_eq(op(&alice, "pub", HOSTPATH_ROOT, &h), 0);
        ck_assert_int_eq(h.class, HOSTPATH_CLASS_OTHER);
        hostpath_clear(&h);
}
END_TEST

/* Symlinks are followed as the caller would follow them: into a directory it cannot
 * search, not at all; elsewhere to their canonical target, which is what comes back. */
START_TEST(symlinks_lead_only_where_the_caller_could_go) {
        struct hostpath h;
        char target[PATH_MAX], l[PATH_MAX];

        daemon_up();
        snprintf(target, sizeof(target), "%s/priv/g", T);
        snprintf(l, sizeof(l), "%s/alice/secret", T);
        ck_assert_int_eq(symlink(target, l), 0);
        snprintf(l, sizeof(l), "%s/alice/pub", T);
        ck_assert_int_eq(symlink("../pub", l), 0);

        expect(&alice, "alice/secret", HOSTPATH_LOOKUP, -EACCES);
        ck_assert_int_eq(op(&root, "alice/secret", HOSTPATH_LOOKUP, &h), 0);
        ck_assert_str_eq(h.path, target);
        hostpath_clear(&h);
        ck_assert_int_eq(op(&alice, "alice/pub/./f", HOSTPATH_LOOKUP, &h), 0);
        snprintf(target, sizeof(target), "%s/pub/f", T);
        ck_assert_str_eq(h.path, target);
        hostpath_clear(&h);
        expect(&alice, "alice/pub", HOSTPATH_WRITE, -EACCES);
}
END_TEST

/* A read-only filesystem refuses a write for what it is. */
START_TEST(a_read_only_mount_is_not_writable) {
        daemon_up();
        test_private_mounts();
        mk("ro", 0755, 0, 0);
        bind_at("alice", "ro", 1);
        expect(&alice, "ro", HOSTPATH_WRITE, -EROFS);
        ck_assert_msg(strstr(err, "read-only filesystem"), "%s", err);
        expect(&alice, "ro", HOSTPATH_ROOT, 0);
}
END_TEST

/* ---- the daemon's own directories ------------------------------------------------------- */

/* The state directory, what lies below it, and the socket's directory are refused to
 * every caller, root included, under their own names and through a symlink. */
START_TEST(the_daemons_directories_are_refused) {
        char l[PATH_MAX], target[PATH_MAX];

        daemon_up();
        snprintf(target, sizeof(target), "%s/state", T);
        snprintf(l, sizeof(l), "%s/alice/st", T);
        ck_assert_int_eq(symlink(target, l), 0);

        expect(&root, "state", HOSTPATH_ROOT, -EPERM);
        ck_assert_msg(strstr(err, "the daemon's own directory"), "%s", err);
        expect(&root, "state/sub", HOSTPATH_WRITE, -EPERM);
        expect(&root, "state/sub", HOSTPATH_LOOKUP, -EPERM);
        expect(&root, "run", HOSTPATH_WRITE, -EPERM);
        expect(&root, "alice/st/sub", HOSTPATH_ROOT, -EPERM);
        expect(&root, "alice/st", HOSTPATH_LOOKUP, -EPERM);
        /* Above them is not them. */
        expect(&root, "pub", HOSTPATH_WRITE, 0);
        expect(&root, "", HOSTPATH_ROOT, 0);
}
END_TEST

/* Under another name: a bind mount of the state directory, of a directory above it,
 * and a path below which such a mount shows it. Only a lookup (which exposes nothing
 * below) passes the last. */
START_TEST(the_daemons_directories_are_refused_under_any_mount) {
        daemon_up();
        test_private_mounts();
        mk("pub/b", 0755, 0, 0);
        bind_at("state", "pub/b", 0);
        expect(&root, "pub/b", HOSTPATH_ROOT, -EPERM);
        expect(&root, "pub/b/sub", HOSTPATH_WRITE, -EPERM);
        /* A path holding the mount. */
        expect(&root, "pub", HOSTPATH_WRITE, -EPERM);
        ck_assert_msg(strstr(err, "holds a mount of it"), "%s", err);
        expect(&root, "pub", HOSTPATH_LOOKUP, 0);

        /* A bind of T (above the state directory) below alice/. */
        mk("alice/up", 0755, ALICE, ALICE);
        bind_at("", "alice/up", 0);
        expect(&root, "alice/up/state", HOSTPATH_ROOT, -EPERM);
        expect(&root, "alice/up", HOSTPATH_ROOT, -EPERM);
        expect(&alice, "alice", HOSTPATH_WRITE, -EPERM);
        expect(&alice, "alice", HOSTPATH_LOOKUP, 0);
        /* What the bind shows beside the state directory is fine. */
        expect(&root, "alice/up/priv", HOSTPATH_ROOT, 0);
}
END_TEST

/* The daemon's directories as named to the rest of the daemon: the state directory and
 * the socket's, or the socket itself when that directory is a shared sticky one. */
START_TEST(the_daemons_directories_are_named) {
        char *v[2] = {NULL, NULL}, want[PATH_MAX];
        size_t n;

        daemon_up();
        n = hostpath_daemons(&core, v);
        ck_assert_uint_eq(n, 2);
        snprintf(want, sizeof(want), "%s/state", T);
        ck_assert_str_eq(v[0], want);
        snprintf(want, sizeof(want), "%s/run", T);
        ck_assert_str_eq(v[1], want);
        free(v[0]);
        free(v[1]);

        mk("shared", 01777, 0, 0);
        snprintf(socket_path, sizeof(socket_path), "%s/shared/sbxd.sock", T);
        put("shared/sbxd.sock", 0600);
        n = hostpath_daemons(&core, v);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(v[1], socket_path);
        free(v[0]);
        free(v[1]);
        expect(&root, "shared", HOSTPATH_WRITE, 0);
        expect(&root, "shared/sbxd.sock", HOSTPATH_WRITE, -EPERM);
}
END_TEST

#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 30, tree_setup, tree_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("hostpath");

        ADD_TEST(s, bad_paths_are_refused);
        ADD_TEST(s, callers_are_judged_with_their_own_rights);
        ADD_TEST(s, symlinks_lead_only_where_the_caller_could_go);
        ADD_TEST(s, a_read_only_mount_is_not_writable);
        ADD_TEST(s, the_daemons_directories_are_refused);
        ADD_TEST(s, the_daemons_directories_are_refused_under_any_mount);
        ADD_TEST(s, the_daemons_directories_are_named);
        return s;
}

SBX_TEST_MAIN(make_suite)
