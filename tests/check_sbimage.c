/* check_sbimage.c: the Check suite of daemon/sbimage.c's user lookup (sbimage_user), the
 * ids a command of an image's sandbox runs as: a name of the image's /etc/passwd (and a
 * group of its /etc/group), UID or UID:GID, root always 0; read from the topmost layer
 * that has the file, beneath that layer, never from the host.
 *
 * Each test makes its layers (directories, as the store unpacks them) in the fixture's
 * temporary directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sbimage.h"
#include "sbx_limits.h"
#include "testutil.h"

static char tmpdir[64];
static char layer_path[3][128];
static char *layers[3];

static void tmpdir_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_sbimage");
        for (int i = 0; i < 3; i++) {
                char etc[160];
                snprintf(layer_path[i], sizeof(layer_path[i]), "%s/l%d", tmpdir, i);
                ck_assert_int_eq(mkdir(layer_path[i], 0755), 0);
                snprintf(etc, sizeof(etc), "%s/etc", layer_path[i]);
                ck_assert_int_eq(mkdir(etc, 0755), 0);
                layers[i] = layer_path[i];
        }
}

static void tmpdir_teardown(void) {
        test_dir_remove(tmpdir);
}

static void put(int layer, const char *name, const char *text) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/etc/%s", layer_path[layer], name);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

/* An image of the first n layers, root mode (a block) or rootless (subids). */
static struct sbimage image(size_t n, int rootless, uint32_t subids) {
        struct sbimage im;

        memset(&im, 0, sizeof(im));
        im.layers = layers;
        im.nlayers = n;
        im.block = rootless ? -1 : 0;
        im.uid_base = rootless ? 0 : SBX_IMAGE_UID_BASE;
        im.subids = subids;
        return im;
}

static int lookup(const struct sbimage *im, const char *user, uid_t *uid, gid_t *gid) {
        char err[512];

        *uid = *gid = 4242;
        return sbimage_user(im, user, uid, gid, err, sizeof(err));
}

#define EXPECT(im, user, u, g)                                                                     \
        do {                                                                                       \
                uid_t uid_;                                                                        \
                gid_t gid_;                                                                        \
                const char *u_ = (user);                                                           \
                ck_assert_msg(lookup(&(im), u_, &uid_, &gid_) == 0, "%s", u_ ? u_ : "(null)");     \
                ck_assert_uint_eq(uid_, (u));                                                      \
                ck_assert_uint_eq(gid_, (g));                                                      \
        } while (0)

START_TEST(names_numbers_and_groups) {
        struct sbimage im = image(1, 0, 0);
        uid_t uid;
        gid_t gid;

        put(0, "passwd", "root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1001::/home/node:/bin/sh\n"
                         "svc:x:70:71::/:/bin/false\n");
        put(0, "group", "root:x:0:\nstaff:x:50:\n");
        EXPECT(im, "node", 1000, 1001);
        EXPECT(im, "node:staff", 1000, 50);
        EXPECT(im, "node:7", 1000, 7);
        EXPECT(im, "1000", 1000, 1001); /* a uid alone: its passwd line's group */
        EXPECT(im, "1234", 1234, 0);    /* none: 0, as docker */
        EXPECT(im, "1234:1234", 1234, 1234);
        EXPECT(im, "root", 0, 0);
        EXPECT(im, NULL, 0, 0);
        EXPECT(im, "", 0, 0);
        EXPECT(im, "65535", 65535, 0);
        ck_assert_int_eq(lookup(&im, "nobody-here", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&im, "node:nogroup", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&im, "65536", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&im, "0:65536", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&im, "-1", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&im, "1e3", &uid, &gid), -EINVAL);
}
END_TEST

/* root is 0 even where the image has no /etc/passwd at all. */
START_TEST(root_without_passwd) {
        struct sbimage im = image(1, 0, 0);
        uid_t uid;
        gid_t gid;

        EXPECT(im, "root", 0, 0);
        EXPECT(im, "0", 0, 0);
        ck_assert_int_eq(lookup(&im, "node", &uid, &gid), -EINVAL);
}
END_TEST

/* The topmost layer with the file wins; a whiteout there (a 0/0 device) or a
 * directory in its place ends the search: the image has none. */
START_TEST(topmost_layer_wins) {
        struct sbimage im = image(3, 0, 0);
        char path[256];
        uid_t uid;
        gid_t gid;

        put(0, "passwd", "app:x:10:10::/:/bin/sh\n");
        put(1, "passwd", "app:x:20:20::/:/bin/sh\n");
        EXPECT(im, "app", 20, 20);
        snprintf(path, sizeof(path), "%s/etc/passwd", layer_path[2]);
        ck_assert_int_eq(mknod(path, S_IFCHR | 0, makedev(0, 0)), 0);
        ck_assert_int_eq(lookup(&im, "app", &uid, &gid), -EINVAL);
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        ck_assert_int_eq(lookup(&im, "app", &uid, &gid), -EINVAL);
}
END_TEST

/* A layer's /etc/passwd that is a symlink (absolute, or climbing out) resolves inside
 * that layer, never to the host's file. */
START_TEST(symlinks_stay_in_the_layer) {
        struct sbimage im = image(1, 0, 0);
        char path[256], target[256];
        uid_t uid;
        gid_t gid;

        snprintf(path, sizeof(path), "%s/etc/passwd", layer_path[0]);
        ck_assert_int_eq(symlink("/etc/passwd.real", path), 0);
        put(0, "passwd.real", "inlayer:x:30:30::/:/bin/sh\n");
        EXPECT(im, "inlayer", 30, 30);
        /* The host's /etc/passwd names root and more; none of it is read. */
        ck_assert_int_eq(unlink(path), 0);
        snprintf(target, sizeof(target), "../../../../../../../etc/passwd");
        ck_assert_int_eq(symlink(target, path), 0);
        ck_assert_int_eq(lookup(&im, "daemon", &uid, &gid), -EINVAL);
}
END_TEST

/* Rootless: only root without subordinate ids (UNIMPLEMENTED for others); with N of
 * them, ids up to N. */
START_TEST(rootless_ids) {
        struct sbimage none = image(1, 1, 0), some = image(1, 1, 2000);
        uid_t uid;
        gid_t gid;

        EXPECT(none, "root", 0, 0);
        ck_assert_int_eq(lookup(&none, "1000", &uid, &gid), -ENOSYS);
        EXPECT(some, "1000:2000", 1000, 2000);
        ck_assert_int_eq(lookup(&some, "2001", &uid, &gid), -EINVAL);
        ck_assert_int_eq(lookup(&some, "0:2001", &uid, &gid), -EINVAL);
}
END_TEST

/* The host ids a sandbox's files are touched as: its block's in root mode, the daemon's
 * own (0) rootless. */
START_TEST(host_ids) {
        struct sbimage root = image(1, 0, 0), rootless = image(1, 1, 100);

        ck_assert_uint_eq(sbimage_host_id(&root, 0), SBX_IMAGE_UID_BASE);
        ck_assert_uint_eq(sbimage_host_id(&root, 1000), SBX_IMAGE_UID_BASE + 1000);
        ck_assert_uint_eq(sbimage_host_id(&rootless, 1000), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("sbimage");

        SBX_ADD_TEST_CASE(s, names_numbers_and_groups, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, root_without_passwd, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, topmost_layer_wins, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, symlinks_stay_in_the_layer, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, rootless_ids, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, host_ids, 30, tmpdir_setup, tmpdir_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
