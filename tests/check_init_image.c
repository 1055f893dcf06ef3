/* check_init_image.c: the overlay root of an image's sandbox (daemon/init/image.c): the
 * layers stacked in order, the upper directory written, the two ways of giving the
 * layers (one lowerdir+ each, Linux 6.8; one lowerdir, what older kernels take, forced
 * here with legacy), and the layers idmapped through a sandbox's namespace.
 *
 * Each test forks a child that unshares a mount namespace, so nothing it mounts is seen
 * on the host and everything goes with it; the directories live in an unchecked fixture
 * that removes them whatever happened. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/image.h"
#include "init/util.h"
#include "sbx_limits.h"
#include "testutil.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

static char tmpdir[64];

static void tmpdir_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_init_image");
}

static void tmpdir_teardown(void) {
        test_dir_remove(tmpdir);
}

static void put(const char *dir, const char *name, const char *text) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        if (!f)
                _exit(10);
        fputs(text, f);
        fclose(f);
}

static int read_text(const char *path, char *buf, size_t len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

        if (fd >= 0)
                close(fd);
        if (n < 0)
                return -1;
        buf[n] = '\0';
        return 0;
}

/* In a child with a mount namespace of its own: two layers (l1 over l0), the overlay
 * mounted on mnt, its view checked, a write landing in upper/. Exit status 0 when all
 * held, else which step failed. */
static int child(bool legacy, uint32_t idmap_base) {
        char l0[128], l1[128], up[128], mnt[128], path[256], buf[64];
        char *layers[2] = {l0, l1};
        struct util_err err;
        struct stat st;
        int fd, userns = -1;

        memset(&err, 0, sizeof(err));
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return 2;
        snprintf(l0, sizeof(l0), "%s/l0", tmpdir);
        snprintf(l1, sizeof(l1), "%s/l1", tmpdir);
        snprintf(up, sizeof(up), "%s/root", tmpdir);
        snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
        snprintf(path, sizeof(path), "%s/upper", up);
        if (mkdir(l0, 0755) < 0 || mkdir(l1, 0755) < 0 || mkdir(up, 0700) < 0 ||
            mkdir(path, 0755) < 0 || mkdir(mnt, 0755) < 0)
                return 3;
        snprintf(path, sizeof(path), "%s/work", up);
        if (mkdir(path, 0700) < 0)
                return 3;
        put(l0, "a", "zero");
        put(l0, "only0", "0");
        put(l1, "a", "one");
        if (idmap_base) {
                snprintf(path, sizeof(path), "%s/upper", up);
                if (chown(path, idmap_base, idmap_base) < 0)
                        return 4;
                userns = image_userns(idmap_base, &err);
                if (userns < 0)
                        return 5;
        }
        fd = image_mount_root(layers, 2, up, userns, legacy, &err);
        if (fd < 0) {
                fprintf(stderr, "image_mount_root: %s\n", err.text);
                return 6;
        }
        if (syscall(SYS_move_mount, fd, "", AT_FDCWD, mnt, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return 7;
        snprintf(path, sizeof(path), "%s/a", mnt);
        if (read_text(path, buf, sizeof(buf)) < 0 || strcmp(buf, "one") != 0)
                return 8; /* the top layer wins */
        snprintf(path, sizeof(path), "%s/only0", mnt);
        if (read_text(path, buf, sizeof(buf)) < 0 || strcmp(buf, "0") != 0)
                return 9; /* the lower one shows through */
        if (stat(path, &st) < 0 || st.st_uid != idmap_base)
                return 10; /* root's file, shown as the block's 0 when idmapped */
        put(mnt, "new", "written");
        snprintf(path, sizeof(path), "%s/upper/new", up);
        if (read_text(path, buf, sizeof(buf)) < 0 || strcmp(buf, "written") != 0)
                return 11; /* in the upper directory */
        snprintf(path, sizeof(path), "%s/new", l1);
        if (access(path, F_OK) == 0)
                return 12; /* never in a layer */
        return 0;
}

static void run(bool legacy, uint32_t idmap_base) {
        pid_t pid = fork();
        int st;

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(child(legacy, idmap_base));
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "step %d failed",
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

START_TEST(layers_one_by_one) {
        run(false, 0);
}
END_TEST

START_TEST(layers_in_one_lowerdir) {
        run(true, 0);
}
END_TEST

START_TEST(layers_idmapped) {
        run(false, SBX_IMAGE_UID_BASE);
}
END_TEST

START_TEST(layers_idmapped_in_one_lowerdir) {
        run(true, SBX_IMAGE_UID_BASE);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("init_image");

        SBX_ADD_TEST_CASE(s, layers_one_by_one, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, layers_in_one_lowerdir, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, layers_idmapped, 30, tmpdir_setup, tmpdir_teardown);
        SBX_ADD_TEST_CASE(s, layers_idmapped_in_one_lowerdir, 30, tmpdir_setup, tmpdir_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
