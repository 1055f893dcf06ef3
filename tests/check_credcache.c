/* check_credcache.c: the Check suite of the credential cache (daemon/credcache.c),
 * without a daemon process.
 *
 * The cache expands the credentials of protect.h under every home once and keeps the
 * expansion until the host changes: the tests give it a home of their own ($HOME, a
 * temporary directory), change a credential there (a symlink put in its place, which
 * moves the path a mount must cover to its target) and check when the cache sees it:
 * not while nothing says so, at once after credcache_changed (what the guard calls
 * when a watched path changes), and that the hook the guard gives hears each new
 * expansion, and only new ones. Each test case gets a fresh temporary tree, made and
 * removed from the runner's process; each test runs in a process of its own (fork
 * mode), so the cache starts empty in each. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "credcache.h"
#include "pathset.h"
#include "sbxd.h"
#include "testutil.h"

static char dir[256];

static void tmpdir_setup(void) {
        test_dir_make(dir, sizeof(dir), "check_credcache");
}

static void tmpdir_teardown(void) {
        test_dir_remove(dir);
}

/* The path of name in the test's directory, in one buffer: a test that needs two paths
 * at once copies one. */
static const char *tmp(const char *name) {
        static char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return p;
}

static int has(const struct pathset *s, const char *path) {
        size_t i;
        for (i = 0; s && i < s->n; i++)
                if (strcmp(s->v[i], path) == 0)
                        return 1;
        return 0;
}

/* What the hook heard: how many expansions, and the last one. */
static unsigned heard;
static struct pathset *heard_set;

static void on_change(struct sbxd *d, struct pathset *all) {
        (void)d;
        heard++;
        heard_set = all;
}

/* The test's home is the daemon's $HOME: its credentials are listed, a missing one as
 * itself (the guard hides it when it appears). */
static void home_is_tmp(void) {
        char real[PATH_MAX];
        ck_assert_ptr_nonnull(realpath(dir, real));
        ck_assert_uint_lt(strlen(real), sizeof(dir));
        memcpy(dir, real, strlen(real) + 1);
        ck_assert_int_eq(setenv("HOME", dir, 1), 0);
}

/* What the cache itself looks at on every use: /home and /etc/passwd. Another test on
 * the machine may add a home meanwhile (it_isolation does), which rightly makes the
 * cache expand anew; a test whose point is that nothing did retries instead. */
struct host_stamp {
        struct stat home, passwd;
};

static void stamp(struct host_stamp *ret) {
        memset(ret, 0, sizeof(*ret));
        (void)stat("/home", &ret->home);
        (void)stat("/etc/passwd", &ret->passwd);
}

static int same_stat(const struct stat *a, const struct stat *b) {
        return a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static int unchanged(const struct host_stamp *before) {
        struct host_stamp now;
        stamp(&now);
        return same_stat(&before->home, &now.home) && same_stat(&before->passwd, &now.passwd);
}

static void make_file(const char *path) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
}

/* The start of a test that replaces a credential by a symlink: $HOME is the test's,
 * the symlink's target (name) exists, its path into target (PATH_MAX), and the hook
 * listens. */
static void start(const char *name, char *target) {
        home_is_tmp();
        memcpy(target, tmp(name), strlen(tmp(name)) + 1);
        make_file(target);
        credcache_on_change(on_change);
}

/* A change on the host is not seen until the guard says so (or a minute has passed):
 * the same set comes back; after credcache_changed the next use expands anew. */
START_TEST(expansion_kept_until_changed) {
        static struct sbxd d;
        struct pathset *all = NULL, *exposed = NULL, *first = NULL;
        struct host_stamp before;
        char target[PATH_MAX];
        unsigned tries, heard_first = 0;

        start("netrc-target", target);
        for (tries = 0;; tries++) {
                ck_assert_uint_lt(tries, 50);
                (void)unlink(tmp(".netrc"));
                credcache_changed();
                stamp(&before);
                ck_assert_int_eq(credcache_get(&d, &all, &exposed), 0);
                ck_assert_ptr_nonnull(all);
                ck_assert_ptr_nonnull(exposed);
                ck_assert_ptr_eq(heard_set, all);
                ck_assert(has(all, tmp(".netrc"))); /* missing: listed as itself */
                first = all;
                heard_first = heard;
                /* The host puts a symlink in its place: a mount now has to cover the
                 * target. */
                ck_assert_int_eq(symlink(target, tmp(".netrc")), 0);
                ck_assert_int_eq(credcache_get(&d, &all, NULL), 0);
                if (unchanged(&before))
                        break;
        }
        ck_assert_ptr_eq(all, first);
        ck_assert(!has(all, target));
        ck_assert_uint_eq(heard, heard_first);

        credcache_changed();
        ck_assert_int_eq(credcache_get(&d, &all, NULL), 0);
        ck_assert(has(all, target));
        ck_assert(!has(all, tmp(".netrc")));
        ck_assert_uint_eq(heard, heard_first + 1);
        ck_assert_ptr_eq(heard_set, all);
}
END_TEST

/* What the guard does on a new home: credcache_changed, then credcache_refresh, which
 * expands at once and tells the hook (no sandbox needs to be set up first). */
START_TEST(refresh_tells_the_hook) {
        static struct sbxd d;
        struct pathset *all = NULL;
        struct host_stamp before;
        unsigned tries, heard_first = 0;
        char target[PATH_MAX];

        start("git-credentials-target", target);
        for (tries = 0;; tries++) {
                ck_assert_uint_lt(tries, 50);
                (void)unlink(tmp(".git-credentials"));
                credcache_changed();
                stamp(&before);
                credcache_refresh(&d);
                heard_first = heard;
                ck_assert(has(heard_set, tmp(".git-credentials")));
                ck_assert_int_eq(symlink(target, tmp(".git-credentials")), 0);
                credcache_refresh(&d); /* nothing said it changed: kept */
                if (unchanged(&before))
                        break;
        }
        ck_assert_uint_eq(heard, heard_first);
        ck_assert(!has(heard_set, target));
        credcache_changed();
        credcache_refresh(&d);
        ck_assert_uint_eq(heard, heard_first + 1);
        ck_assert(has(heard_set, target));
        ck_assert_int_eq(credcache_get(&d, &all, NULL), 0);
        ck_assert_ptr_eq(all, heard_set);

        /* Without a hook, nobody is told, and the cache works all the same. */
        credcache_on_change(NULL);
        credcache_changed();
        ck_assert_int_eq(credcache_get(&d, &all, NULL), 0);
        ck_assert(has(all, target));
        ck_assert_uint_eq(heard, heard_first + 1);
}
END_TEST

/* Expanded anew to the same paths, the sets stay the ones sandboxes already hold (they
 * share its guard watches and its warm pool key). */
START_TEST(same_paths_same_set) {
        static struct sbxd d;
        struct pathset *all = NULL, *exposed = NULL, *first_all = NULL, *first_exposed = NULL;
        struct host_stamp before;
        unsigned tries;

        home_is_tmp();
        for (tries = 0;; tries++) {
                ck_assert_uint_lt(tries, 50);
                pathset_unref(first_all);
                credcache_changed();
                stamp(&before);
                ck_assert_int_eq(credcache_get(&d, &all, &exposed), 0);
                first_all = pathset_ref(all);
                first_exposed = exposed;
                credcache_changed();
                ck_assert_int_eq(credcache_get(&d, &all, &exposed), 0);
                if (unchanged(&before))
                        break;
        }
        ck_assert_ptr_eq(all, first_all);
        ck_assert_ptr_eq(exposed, first_exposed);
        ck_assert_uint_eq(first_all->refs, 2); /* the cache's and ours: not replaced */
        pathset_unref(first_all);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("credcache");

        SBX_ADD_TEST_CASE(s, expansion_kept_until_changed, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, refresh_tells_the_hook, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, same_paths_same_set, 30, tmpdir_setup, tmpdir_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
