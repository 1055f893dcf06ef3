/* testutil.h: the common main() of every Check test program, and a temporary
 * directory per test case.
 *
 * Each test file defines `static Suite *make_suite(void)` and then says
 * SBX_TEST_MAIN(make_suite). Tests run in fork mode (each in its own process) with the
 * timeout Check is given per test case; the program exits non-zero on any failure. */
#ifndef SBX_TESTUTIL_H
#define SBX_TESTUTIL_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* A string made as printf would (the caller frees it); the test fails out of memory. */
static inline char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *xasprintf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        return s;
}

/* Makes a directory of its own for a test case, /tmp/NAME.XXXXXX, into dir (len
 * bytes). Called from an unchecked fixture, in the runner's process: test_dir_remove,
 * from the fixture's teardown, removes it even when the test failed. */
static inline void test_dir_make(char *dir, size_t len, const char *name) {
        snprintf(dir, len, "/tmp/%s.XXXXXX", name);
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline int test_dir_remove_entry(const char *path, const struct stat *st, int flag,
                                        struct FTW *ftw) {
        (void)st, (void)flag, (void)ftw;
        remove(path);
        return 0;
}

/* Removes dir and everything in it (not across mounts); then dir is "". Accepts "". */
static inline void test_dir_remove(char *dir) {
        if (dir[0])
                nftw(dir, test_dir_remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        dir[0] = '\0';
}

/* Moves this test's process into a mount namespace of its own whose mounts do not
 * propagate: what the test mounts goes with its process, even when it fails. Call it
 * from the test itself (fork mode), never from a fixture. */
static inline void test_private_mounts(void) {
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL), 0);
}

/* An XFS filesystem that shares blocks (mkfs.xfs -m reflink=1, from xfsprogs) in the
 * sparse file img, mounted on mnt (a directory) in this test's own mount namespace
 * (test_private_mounts: call it first): the loop device mount(8) sets up is released
 * with the mount, which goes with the test's process (img may be beneath mnt: hidden,
 * held by the loop device, removed with the test's directory). 1 when mounted; 0 when
 * this machine cannot (not root, or no loop devices), said on stderr so that the caller
 * skips. Without mkfs.xfs the test fails: `make test-pkgs` installs it. */
static inline int test_xfs_mount(const char *img, const char *mnt) {
        char cmd[4096];

        if (geteuid() != 0 || access("/dev/loop-control", F_OK) != 0) {
                fprintf(stderr, "skipped: an XFS loop filesystem needs root and loop devices\n");
                return 0;
        }
        ck_assert_msg(system("command -v mkfs.xfs >/dev/null") == 0,
                      "mkfs.xfs is missing: make test-pkgs installs xfsprogs");
        ck_assert(strlen(img) < 1000 && strlen(mnt) < 1000);
        snprintf(cmd, sizeof(cmd),
                 "truncate -s 320M %s && mkfs.xfs -q -m reflink=1 %s && mount -o loop %s %s", img,
                 img, img, mnt);
        ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
        return 1;
}

/* Bytes of the file at path in extents its filesystem says are shared (FIEMAP). */
static inline uint64_t test_shared_bytes(const char *path) {
        size_t sz = sizeof(struct fiemap) + 512 * sizeof(struct fiemap_extent);
        struct fiemap *fm = calloc(1, sz);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t shared = 0;

        ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
        fm->fm_length = FIEMAP_MAX_OFFSET;
        fm->fm_flags = FIEMAP_FLAG_SYNC;
        fm->fm_extent_count = 512;
        ck_assert_int_eq(ioctl(fd, FS_IOC_FIEMAP, fm), 0);
        for (unsigned i = 0; i < fm->fm_mapped_extents; i++)
                if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_SHARED)
                        shared += fm->fm_extents[i].fe_length;
        close(fd);
        free(fm);
        return shared;
}

/* Bytes in use on the filesystem of path. */
static inline uint64_t test_used_bytes(const char *path) {
        struct statfs sf;

        ck_assert_int_eq(statfs(path, &sf), 0);
        return (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
}

/* Detaches every mount at or below dir (absolute, canonical) in this process's mount
 * namespace, deepest first. A fixture's teardown calls it before test_dir_remove: when
 * Check does not fork (CK_FORK=no, under valgrind) the test's private mount namespace
 * is the runner's own, and what the test mounted would outlive it. */
static inline void test_dir_unmount(const char *dir) {
        size_t len = strlen(dir);
        int pass;

        for (pass = 0; pass < 64; pass++) {
                char line[4096], point[4096], deepest[4096] = "";
                FILE *f = fopen("/proc/self/mountinfo", "re");

                if (!f)
                        return;
                while (fgets(line, sizeof(line), f))
                        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 &&
                            strncmp(point, dir, len) == 0 &&
                            (point[len] == '/' || point[len] == '\0') &&
                            strlen(point) >= strlen(deepest))
                                snprintf(deepest, sizeof(deepest), "%s", point);
                fclose(f);
                if (!deepest[0] || umount2(deepest, MNT_DETACH) < 0)
                        return;
        }
}

/* Adds the test fn to suite in a test case of its own, named after it, with the
 * unchecked fixture setup/teardown (a directory of its own) and timeout_s. */
#define SBX_ADD_TEST_CASE(suite, fn, timeout_s, setup, teardown)                                   \
        do {                                                                                       \
                TCase *tc_ = tcase_create(#fn);                                                    \
                tcase_add_unchecked_fixture(tc_, (setup), (teardown));                             \
                tcase_set_timeout(tc_, (timeout_s));                                               \
                tcase_add_test(tc_, fn);                                                           \
                suite_add_tcase((suite), tc_);                                                     \
        } while (0)

#define SBX_TEST_MAIN(make)                                                                \
        int main(void) {                                                                   \
                SRunner *sr = srunner_create(make());                                      \
                int nf;                                                                    \
                srunner_run_all(sr, CK_NORMAL);                                            \
                nf = srunner_ntests_failed(sr);                                            \
                srunner_free(sr);                                                          \
                return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                              \
        }

#endif
