/* check_disk.c: the Check suite of the disk module (daemon/disk.c), without a daemon.
 *
 * The pure parts: sizes as sbxd's flags give them, the means chosen for each kind of
 * host and the Enforcement it reports. As root with loop devices also the image itself:
 * made, mounted with the asked size and inodes and owner, full when it is full, and
 * gone (unmounted, its loop device detached, its file removed) when released; kept as a
 * file with keep. Its name, the loop device's backing file, names nothing of the
 * sandbox's, and what records it is never followed elsewhere; the sweep at start-up
 * removes the images no record leads to. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
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
        snprintf(cmd, sizeof(cmd), "umount -l %s/sandboxes/*/workspace 2>/dev/null; rm -rf %s",
                 tmpdir, tmpdir);
        (void)!system(cmd);
}

/* Makes tmpdir/sandboxes/name/workspace, as the daemon lays out a sandbox's (its state
 * directory tmpdir), into ws; its record's path (next to it) into record. */
static void make_workspace(const char *name, char *ws, size_t len, char *record,
                           size_t record_len) {
        char path[100];

        snprintf(path, sizeof(path), "%s/sandboxes", tmpdir);
        ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
        snprintf(path, sizeof(path), "%s/sandboxes/%s", tmpdir, name);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(ws, len, "%s/workspace", path);
        ck_assert_int_eq(mkdir(ws, 0755), 0);
        snprintf(record, record_len, "%s/%s", path, DISK_IMAGE_NAME);
}

/* How many entries tmpdir/DISK_IMAGES_DIR has (0 when it does not exist). */
static int images(void) {
        char path[256];
        struct dirent *de;
        DIR *d;
        int n = 0;

        snprintf(path, sizeof(path), "%s/%s", tmpdir, DISK_IMAGES_DIR);
        d = opendir(path);
        while (d && (de = readdir(d)))
                n += de->d_name[0] != '.';
        if (d)
                closedir(d);
        return n;
}

/* The backing file of the loop device the filesystem of path is on, into buf. */
static void backing_file_of(const char *path, char *buf, size_t len) {
        char sys[128];
        struct stat st;
        FILE *f;

        ck_assert_int_eq(stat(path, &st), 0);
        snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_dev),
                 minor(st.st_dev));
        f = fopen(sys, "r");
        ck_assert_msg(f != NULL, "%s: %s", sys, strerror(errno));
        ck_assert_ptr_nonnull(fgets(buf, (int)len, f));
        buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
}

/* 1 when this process may make images (root with loop devices and mke2fs). */
/* Lines of this process's mount table that name s. */
static int mountinfo_naming(const char *s) {
        char line[8192];
        FILE *f = fopen("/proc/self/mountinfo", "re");
        int n = 0;

        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                if (strstr(line, s))
                        n++;
        fclose(f);
        return n;
}

/* disk_image_make, then what a sandbox's init does with the mount: attached at ws (here,
 * in the test's own mount table) so that the test can look at it through ws. Before,
 * no mount table lists it. Returns the daemon's hold (for disk_release). */
static int make_attached(const struct disk_image_spec *spec, char *err, size_t errlen) {
        int m = -1, r = disk_image_make(spec, &m, err, errlen);

        ck_assert_msg(r == 0, "%s", err);
        ck_assert_int_ge(m, 0);
        ck_assert_int_eq(mountinfo_naming(tmpdir), 0);
        ck_assert_int_eq(syscall(SYS_move_mount, m, "", AT_FDCWD, spec->workspace,
                                 0x4 /* MOVE_MOUNT_F_EMPTY_PATH */),
                         0);
        ck_assert_int_eq(mountinfo_naming(tmpdir), 1);
        return m;
}

/* The sandbox's namespace goes (its mount, here the test's, detached), then the daemon
 * releases the disk with its hold m. */
static void release_attached(const char *ws, int m, int keep) {
        ck_assert_int_eq(umount2(ws, MNT_DETACH), 0);
        disk_release(ws, m, keep);
}

static int can_make_images(void) {
        struct disk_host h;
        disk_detect(geteuid() != 0, NULL, &h);
        if (disk_choose(&h) == DISK_MECH_IMAGE)
                return 1;
        fprintf(stderr, "no loop devices, mke2fs or root here: the image test is skipped\n");
        return 0;
}

/* What counts as full: 64 KiB anywhere; on ext4 its write-time allocation watermark
 * (4 x max(32, 2 x CPUs) x CPUs blocks), at most an eighth of the filesystem. */
START_TEST(full_margin) {
        const long ext4 = 0xEF53, tmpfs = 0x01021994;

        ck_assert_uint_eq(disk_full_margin_bytes(tmpfs, 4096, 20u << 20, 2), 64u << 10);
        /* 2 CPUs, 1 KiB blocks: 256 blocks (it refused a write with 92 KiB free). */
        ck_assert_uint_eq(disk_full_margin_bytes(ext4, 1024, 20u << 20, 2), 256u << 10);
        /* 64 CPUs, 4 KiB blocks: 4 x 128 x 64 blocks, 128 MiB; of 1 TiB, that. */
        ck_assert_uint_eq(disk_full_margin_bytes(ext4, 4096, 1ull << 40, 64), 128ull << 20);
        /* ... of 64 MiB, an eighth. */
        ck_assert_uint_eq(disk_full_margin_bytes(ext4, 4096, 64u << 20, 64), 8u << 20);
        /* Never below 64 KiB, nor with a CPU count that is not one. */
        ck_assert_uint_eq(disk_full_margin_bytes(ext4, 1024, 256u << 10, 2), 64u << 10);
        ck_assert_uint_eq(disk_full_margin_bytes(ext4, 1024, 20u << 20, -1), 128u << 10);
}
END_TEST

START_TEST(image_made_and_released) {
        char ws[128], img[128], path[PATH_MAX + 200], other[128], real[PATH_MAX],
                back[PATH_MAX + 32], target[128];
        struct disk_image_spec spec;
        struct statvfs sv;
        struct stat st;
        char err[512] = "";
        ssize_t n;
        int fd, m;

        if (!can_make_images())
                return;
        /* The workspace is "workspace" below a root, as disk_full looks for it. */
        make_workspace("a", ws, sizeof(ws), img, sizeof(img));
        spec = (struct disk_image_spec){
                .workspace = ws, .bytes = 4u << 20, .inodes = 100, .uid = 4242, .gid = 4343};
        m = make_attached(&spec, err, sizeof(err));
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
        /* The image is STATE/disks/NAME, NAME random; the sandbox's record leads there;
         * the loop device's backing file names nothing of the sandbox's. */
        ck_assert_int_eq(images(), 1);
        n = readlink(img, target, sizeof(target) - 1);
        ck_assert_int_gt(n, 0);
        target[n] = '\0';
        ck_assert_msg(strncmp(target, "../../disks/", 12) == 0 && strlen(target) == 12 + 36 &&
                              strcmp(target + 12 + 32, ".img") == 0,
                      "%s", target);
        backing_file_of(ws, back, sizeof(back));
        ck_assert_ptr_nonnull(realpath(tmpdir, real));
        snprintf(path, sizeof(path), "%s/%s", real, target + 6);
        ck_assert_str_eq(back, path);

        /* Full only when it is. */
        snprintf(path, sizeof(path), "%s/sandboxes/a", tmpdir);
        fd = open(path, O_PATH | O_DIRECTORY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(disk_full(fd), 0);
        snprintf(path, sizeof(path), "head -c 8M /dev/zero > %s/big 2>/dev/null", ws);
        ck_assert_int_ne(system(path), 0);
        ck_assert_int_eq(disk_full(fd), 1);
        close(fd);
        /* A "workspace" that is a symlink is not followed. */
        snprintf(other, sizeof(other), "%s/sandboxes/b", tmpdir);
        ck_assert_int_eq(mkdir(other, 0755), 0);
        snprintf(path, sizeof(path), "%s/sandboxes/b/workspace", tmpdir);
        ck_assert_int_eq(symlink(ws, path), 0);
        fd = open(other, O_PATH | O_DIRECTORY);
        ck_assert_int_lt(disk_full(fd), 0);
        close(fd);

        /* Released: nothing mounted there any more, the image gone. */
        release_attached(ws, m, 0);
        snprintf(path, sizeof(path), "%s/big", ws);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(lstat(img, &st), -1);
        ck_assert_int_eq(images(), 0);
        /* Harmless for a workspace without an image. */
        disk_release(ws, -1, 0);
}
END_TEST

START_TEST(image_kept) {
        char ws[128], img[128], path[64], back[PATH_MAX + 32];
        struct disk_image_spec spec;
        struct stat st;
        char err[512] = "";
        int hold, m, m2;

        if (!can_make_images())
                return;
        make_workspace("c", ws, sizeof(ws), img, sizeof(img));
        spec = (struct disk_image_spec){.workspace = ws, .bytes = 2u << 20};
        m = make_attached(&spec, err, sizeof(err));
        /* A workspace with an image (its record) is never given a second one. */
        ck_assert_int_eq(disk_image_make(&spec, &m2, err, sizeof(err)), -EEXIST);
        ck_assert_int_eq(m2, -1);
        ck_assert_int_eq(images(), 1);
        /* Kept: the image itself in the record's place, nothing left in STATE/disks;
         * its loop device, held attached here past the unmount (as a sandbox's namespace
         * may), names the image's first name, removed, never the record's. */
        hold = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(hold, 0);
        release_attached(ws, m, 1);
        ck_assert_int_eq(lstat(img, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq(images(), 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", hold);
        backing_file_of(path, back, sizeof(back));
        ck_assert_msg(strstr(back, "/disks/") && strstr(back, ".img (deleted)") &&
                              !strstr(back, "sandboxes"),
                      "%s", back);
        close(hold);
        /* A size mke2fs cannot format fails cleanly, with its reason. */
        unlink(img);
        spec.bytes = 4096;
        ck_assert_int_lt(disk_image_make(&spec, &m2, err, sizeof(err)), 0);
        ck_assert_int_eq(m2, -1);
        ck_assert_msg(strstr(err, "mke2fs failed"), "%s", err);
        ck_assert_int_eq(lstat(img, &st), -1);
        ck_assert_int_eq(images(), 0);
}

/* An older daemon's image is the file STATE/sandboxes/ID/workspace.img itself: released,
 * it is removed; kept, it stays. A record that leads anywhere but to an image of
 * STATE/disks (a name of another form, a way out) is never followed: removed on release,
 * what it points to left alone. */
START_TEST(image_records_read) {
        char ws[128], img[128], victim[128], path[256];
        struct stat st;
        static const char *const bad[] = {"../../victim", "../../disks/../victim",
                                          "../../disks/0123456789abcdef0123456789ABCDEF.img",
                                          "../../disks/0123456789abcdef0123456789abcdef.img.x",
                                          "/etc/passwd"};
        size_t i;

        make_workspace("old", ws, sizeof(ws), img, sizeof(img));
        ck_assert_int_eq(close(open(img, O_CREAT | O_WRONLY, 0600)), 0);
        disk_release(ws, -1, 1);
        ck_assert_int_eq(access(img, F_OK), 0);
        disk_release(ws, -1, 0);
        ck_assert_int_eq(access(img, F_OK), -1);

        snprintf(victim, sizeof(victim), "%s/victim", tmpdir);
        ck_assert_int_eq(close(open(victim, O_CREAT | O_WRONLY, 0600)), 0);
        snprintf(path, sizeof(path), "%s/disks", tmpdir);
        ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
        snprintf(path, sizeof(path), "%s/disks/0123456789abcdef0123456789ABCDEF.img", tmpdir);
        ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0600)), 0);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(symlink(bad[i], img), 0);
                disk_release(ws, -1, 1);
                ck_assert_int_eq(lstat(img, &st), 0); /* kept as it is */
                ck_assert(S_ISLNK(st.st_mode));
                disk_release(ws, -1, 0);
                ck_assert_msg(lstat(img, &st) == -1, "%s", bad[i]);
                ck_assert_int_eq(access(victim, F_OK), 0);
                ck_assert_int_eq(access(path, F_OK), 0);
        }
        unlink(path);
        unlink(victim);
}
END_TEST

/* The sweep at start-up removes the images of STATE/disks no record leads to, and
 * nothing else there. */
START_TEST(orphans_swept) {
        static const char *const names[] = {"00000000000000000000000000000000.img",
                                            "11111111111111111111111111111111.img", "notes.txt"};
        char ws[128], record[128], path[256];
        size_t i;

        make_workspace("recorded", ws, sizeof(ws), record, sizeof(record));
        ck_assert_int_eq(symlink("../../disks/11111111111111111111111111111111.img", record), 0);
        snprintf(path, sizeof(path), "%s/disks", tmpdir);
        ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
        for (i = 0; i < 3; i++) {
                snprintf(path, sizeof(path), "%s/disks/%s", tmpdir, names[i]);
                ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0600)), 0);
        }
        disk_sweep(tmpdir);
        for (i = 0; i < 3; i++) {
                snprintf(path, sizeof(path), "%s/disks/%s", tmpdir, names[i]);
                ck_assert_msg(access(path, F_OK) == (i == 0 ? -1 : 0), "%s", names[i]);
        }
        disk_release(ws, -1, 0);
        ck_assert_int_eq(access(record, F_OK), -1);
        snprintf(path, sizeof(path), "%s/disks/%s", tmpdir, names[1]);
        ck_assert_int_eq(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/disks/%s", tmpdir, names[2]);
        unlink(path);
}
END_TEST
END_TEST

/* Images of a size made before are copies of a template: each is its own (what one
 * sandbox wrote is not in the next), owned as asked; past DISK_MAX_TEMPLATES other
 * sizes are formatted directly, still right. */
START_TEST(image_from_template) {
        char ws[128], tpl[128], path[320], rec[128], err[512] = "";
        struct disk_image_spec spec;
        struct stat st;
        int i, m;

        if (!can_make_images())
                return;
        snprintf(tpl, sizeof(tpl), "%s/templates", tmpdir);
        for (i = 0; i < 2; i++) {
                snprintf(rec, sizeof(rec), "t%d", i);
                make_workspace(rec, ws, sizeof(ws), rec, sizeof(rec));
                spec = (struct disk_image_spec){.workspace = ws,
                                                .bytes = 3u << 20,
                                                .uid = 1000u + (unsigned)i,
                                                .gid = 2000,
                                                .templates = tpl};
                m = make_attached(&spec, err, sizeof(err));
                ck_assert_int_eq(stat(ws, &st), 0);
                ck_assert_uint_eq(st.st_uid, 1000u + (unsigned)i);
                snprintf(path, sizeof(path), "%s/mine", ws);
                ck_assert_int_eq(access(path, F_OK), -1); /* the first one's file */
                ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
                release_attached(ws, m, 0);
        }
        snprintf(path, sizeof(path), "%s/3145728-0.img", tpl);
        ck_assert_int_eq(access(path, F_OK), 0);
        for (i = 0; i < DISK_MAX_TEMPLATES; i++) {
                snprintf(path, sizeof(path), "%s/filler%d", tpl, i);
                ck_assert_int_eq(close(open(path, O_CREAT | O_WRONLY, 0600)), 0);
        }
        make_workspace("t2", ws, sizeof(ws), rec, sizeof(rec));
        spec = (struct disk_image_spec){
                .workspace = ws, .bytes = 5u << 20, .uid = 7, .gid = 7, .templates = tpl};
        m = make_attached(&spec, err, sizeof(err));
        ck_assert_int_eq(stat(ws, &st), 0);
        ck_assert_uint_eq(st.st_uid, 7);
        snprintf(path, sizeof(path), "%s/5242880-0.img", tpl);
        ck_assert_int_eq(access(path, F_OK), -1);
        release_attached(ws, m, 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("disk");
        TCase *tc = tcase_create("pure");
        tcase_add_test(tc, sizes);
        tcase_add_test(tc, mechanism);
        tcase_add_test(tc, full_margin);
        suite_add_tcase(s, tc);
        tc = tcase_create("image");
        tcase_set_timeout(tc, 30);
        tcase_add_unchecked_fixture(tc, tmp_setup, tmp_teardown);
        tcase_add_test(tc, image_made_and_released);
        tcase_add_test(tc, image_kept);
        tcase_add_test(tc, image_from_template);
        tcase_add_test(tc, image_records_read);
        tcase_add_test(tc, orphans_swept);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
