/* check_disk.c: the Check suite of the disk module (daemon/disk.c), without a daemon.
 *
 * The pure parts: sizes as sbxd's flags give them, the means chosen for each kind of
 * host and the Enforcement it reports. As root with loop devices also the image itself:
 * made, mounted with the asked size and inodes and owner, full when it is full, and
 * gone (unmounted, its loop device detached, its file removed) when released; kept as a
 * file with keep. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "disk.h"
#include "testutil.h"

static uint64_t size_of(const char *s) {
        uint64_t v = 12345;
        ck_assert_msg(disk_parse_size(s, &v) == 0, "'%s' refused", s);
        return v;
}

static void size_bad(const char *s) {
        uint64_t v = 12345;
        ck_assert_msg(disk_parse_size(s, &v) == -EINVAL, "'%s' accepted", s);
        ck_assert_uint_eq(v, 12345);
}

START_TEST(sizes) {
        ck_assert_uint_eq(size_of("0"), 0);
        ck_assert_uint_eq(size_of("1048576"), 1048576);
        ck_assert_uint_eq(size_of("512b"), 512);
        ck_assert_uint_eq(size_of("4K"), 4096);
        ck_assert_uint_eq(size_of("4k"), 4096);
        ck_assert_uint_eq(size_of("2M"), 2u << 20);
        ck_assert_uint_eq(size_of("2MiB"), 2u << 20);
        ck_assert_uint_eq(size_of("2mb"), 2u << 20);
        ck_assert_uint_eq(size_of("2G"), 2ull << 30);
        ck_assert_uint_eq(size_of("16T"), 16ull << 40);
        ck_assert_uint_eq(size_of("16777215T"), 16777215ull << 40);
        size_bad(NULL);
        size_bad("");
        size_bad("G");
        size_bad("-1");
        size_bad(" 1G");
        size_bad("1G ");
        size_bad("1.5G");
        size_bad("2X");
        size_bad("2GG");
        size_bad("2Gi B");
        size_bad("16777216T"); /* 2^64 */
        size_bad("99999999999999999999");
}
END_TEST

START_TEST(mechanism) {
        struct disk_host h = {0};

        h.loop = h.mkfs = 1;
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_IMAGE);
        h.rootless = 1; /* no loop device or mount of its own on the host */
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_TMPFS);
        h.rootless = 0;
        h.loop = 0;
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_TMPFS);
        h.loop = 1;
        h.mkfs = 0;
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_TMPFS);
        /* What --disk-via may ask for. */
        h = (struct disk_host){.loop = 1, .mkfs = 1};
        ck_assert(disk_allows(&h, DISK_MECH_IMAGE) && disk_allows(&h, DISK_MECH_TMPFS));
        ck_assert(!disk_allows(&h, DISK_MECH_QUOTA) && !disk_allows(&h, DISK_MECH_NONE));
        h.rootless = 1;
        ck_assert(!disk_allows(&h, DISK_MECH_IMAGE) && disk_allows(&h, DISK_MECH_TMPFS));
        h = (struct disk_host){.loop = 1, .mkfs = 1};
        /* Project quotas, where the filesystem enforces them, come first (as root). */
        h.prjquota = 1;
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_QUOTA);
        h.rootless = 1;
        ck_assert_int_eq(disk_choose(&h), DISK_MECH_TMPFS);
        ck_assert_int_eq(disk_enforcement(DISK_MECH_QUOTA), SBX__V1__ENFORCEMENT__PROJECT_QUOTA);
        ck_assert_int_eq(disk_enforcement(DISK_MECH_IMAGE), SBX__V1__ENFORCEMENT__FILESYSTEM_IMAGE);
        ck_assert_int_eq(disk_enforcement(DISK_MECH_TMPFS), SBX__V1__ENFORCEMENT__TMPFS_SIZE);
        ck_assert_int_eq(disk_enforcement(DISK_MECH_NONE), SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE);
}
END_TEST

static char tmpdir[64];

static void tmp_setup(void) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_disk.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void) {
        char cmd[200];
        /* Whatever a failed test left: its mount first. */
        snprintf(cmd, sizeof(cmd), "umount -l %s/*/workspace 2>/dev/null; rm -rf %s", tmpdir,
                 tmpdir);
        (void)!system(cmd);
}

/* 1 when this process may make images (root with loop devices and mke2fs). */
static int can_make_images(void) {
        struct disk_host h;
        disk_detect(geteuid() != 0, NULL, &h);
        if (disk_choose(&h) == DISK_MECH_IMAGE)
                return 1;
        fprintf(stderr, "no loop devices, mke2fs or root here: the image test is skipped\n");
        return 0;
}

START_TEST(image_made_and_released) {
        char ws[128], img[128], path[320], other[128];
        struct disk_image_spec spec;
        struct statvfs sv;
        struct stat st;
        char err[512] = "";
        int fd;

        if (!can_make_images())
                return;
        /* The workspace is "workspace" below a root, as disk_full looks for it. */
        snprintf(ws, sizeof(ws), "%s/a/workspace", tmpdir);
        snprintf(img, sizeof(img), "%s/a/%s", tmpdir, DISK_IMAGE_NAME);
        snprintf(path, sizeof(path), "%s/a", tmpdir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        ck_assert_int_eq(mkdir(ws, 0755), 0);
        spec = (struct disk_image_spec){
                .workspace = ws, .bytes = 4u << 20, .inodes = 100, .uid = 4242, .gid = 4343};
        ck_assert_msg(disk_image_make(&spec, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(statvfs(ws, &sv), 0);
        ck_assert_msg((uint64_t)sv.f_blocks * sv.f_frsize <= 4u << 20 &&
                              (uint64_t)sv.f_blocks * sv.f_frsize > 3u << 20,
                      "%llu bytes", (unsigned long long)sv.f_blocks * sv.f_frsize);
        ck_assert_msg(sv.f_favail >= 100 && sv.f_favail < 200, "%llu inodes free",
                      (unsigned long long)sv.f_favail);
        ck_assert_int_eq(stat(ws, &st), 0);
        ck_assert_uint_eq(st.st_uid, 4242);
        ck_assert_uint_eq(st.st_gid, 4343);
        /* Empty, as a workspace without a limit: no lost+found. */
        snprintf(path, sizeof(path), "%s/lost+found", ws);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(access(img, F_OK), 0);

        /* Full only when it is. */
        snprintf(path, sizeof(path), "%s/a", tmpdir);
        fd = open(path, O_PATH | O_DIRECTORY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(disk_full(fd), 0);
        snprintf(path, sizeof(path), "head -c 8M /dev/zero > %s/big 2>/dev/null", ws);
        ck_assert_int_ne(system(path), 0);
        ck_assert_int_eq(disk_full(fd), 1);
        close(fd);
        /* A "workspace" that is a symlink is not followed. */
        snprintf(other, sizeof(other), "%s/b", tmpdir);
        ck_assert_int_eq(mkdir(other, 0755), 0);
        snprintf(path, sizeof(path), "%s/b/workspace", tmpdir);
        ck_assert_int_eq(symlink(ws, path), 0);
        fd = open(other, O_PATH | O_DIRECTORY);
        ck_assert_int_lt(disk_full(fd), 0);
        close(fd);

        /* Released: nothing mounted there any more, the image gone. */
        disk_release(ws, 0);
        snprintf(path, sizeof(path), "%s/big", ws);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(access(img, F_OK), -1);
        /* Harmless for a workspace without an image. */
        disk_release(ws, 0);
}
END_TEST

START_TEST(image_kept) {
        char ws[128], img[128];
        struct disk_image_spec spec;
        char err[512] = "";

        if (!can_make_images())
                return;
        snprintf(ws, sizeof(ws), "%s/c/workspace", tmpdir);
        snprintf(img, sizeof(img), "%s/c/%s", tmpdir, DISK_IMAGE_NAME);
        snprintf(err, sizeof(err), "%s/c", tmpdir);
        ck_assert_int_eq(mkdir(err, 0755), 0);
        ck_assert_int_eq(mkdir(ws, 0755), 0);
        spec = (struct disk_image_spec){.workspace = ws, .bytes = 2u << 20};
        ck_assert_msg(disk_image_make(&spec, err, sizeof(err)) == 0, "%s", err);
        /* An image of that name is never made twice. */
        ck_assert_int_eq(disk_image_make(&spec, err, sizeof(err)), -EEXIST);
        disk_release(ws, 1);
        ck_assert_int_eq(access(img, F_OK), 0);
        /* A size mke2fs cannot format fails cleanly, with its reason. */
        unlink(img);
        spec.bytes = 4096;
        ck_assert_int_lt(disk_image_make(&spec, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, "mke2fs failed"), "%s", err);
        ck_assert_int_eq(access(img, F_OK), -1);
}
END_TEST

/* Images of a size made before are copies of a template: each is its own (what one
 * sandbox wrote is not in the next), owned as asked; past DISK_MAX_TEMPLATES other
 * sizes are formatted directly, still right. */
START_TEST(image_from_template) {
        char ws[128], tpl[128], path[320], err[512] = "";
        struct disk_image_spec spec;
        struct stat st;
        int i;

        if (!can_make_images())
                return;
        snprintf(tpl, sizeof(tpl), "%s/templates", tmpdir);
        for (i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/t%d", tmpdir, i);
                ck_assert_int_eq(mkdir(path, 0755), 0);
                snprintf(ws, sizeof(ws), "%s/t%d/workspace", tmpdir, i);
                ck_assert_int_eq(mkdir(ws, 0755), 0);
                spec = (struct disk_image_spec){.workspace = ws,
                                                .bytes = 3u << 20,
                                                .uid = 1000u + (unsigned)i,
                                                .gid = 2000,
                                                .templates = tpl};
                ck_assert_msg(disk_image_make(&spec, err, sizeof(err)) == 0, "%s", err);
                ck_assert_int_eq(stat(ws, &st), 0);
                ck_assert_uint_eq(st.st_uid, 1000u + (unsigned)i);
                snprintf(path, sizeof(path), "%s/mine", ws);
                ck_assert_int_eq(access(path, F_OK), -1); /* the first one's file */
                ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
                disk_release(ws, 0);
        }
        snprintf(path, sizeof(path), "%s/3145728-0.img", tpl);
        ck_assert_int_eq(access(path, F_OK), 0);
        for (i = 0; i < DISK_MAX_TEMPLATES; i++) {
                snprintf(path, sizeof(path), "%s/filler%d", tpl, i);
                ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0600)), 0);
        }
        snprintf(path, sizeof(path), "%s/t2", tmpdir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(ws, sizeof(ws), "%s/t2/workspace", tmpdir);
        ck_assert_int_eq(mkdir(ws, 0755), 0);
        spec = (struct disk_image_spec){
                .workspace = ws, .bytes = 5u << 20, .uid = 7, .gid = 7, .templates = tpl};
        ck_assert_msg(disk_image_make(&spec, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(stat(ws, &st), 0);
        ck_assert_uint_eq(st.st_uid, 7);
        snprintf(path, sizeof(path), "%s/5242880-0.img", tpl);
        ck_assert_int_eq(access(path, F_OK), -1);
        disk_release(ws, 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("disk");
        TCase *tc = tcase_create("pure");
        tcase_add_test(tc, sizes);
        tcase_add_test(tc, mechanism);
        suite_add_tcase(s, tc);
        tc = tcase_create("image");
        tcase_set_timeout(tc, 30);
        tcase_add_unchecked_fixture(tc, tmp_setup, tmp_teardown);
        tcase_add_test(tc, image_made_and_released);
        tcase_add_test(tc, image_kept);
        tcase_add_test(tc, image_from_template);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
