/* image.c: the overlay root of a sandbox made from an image (image.h).
 *
 * The layers are the daemon's image store's trees, shared by every sandbox of the image
 * and never written: overlayfs copies a file up into the sandbox's own upper directory
 * before it changes. In root mode the store's files keep the image's owners (uid 0 is
 * the host's root there), so each layer is mounted idmapped through the sandbox's user
 * namespace (Linux 5.19: overlayfs accepts idmapped layers): inside, a file of the
 * image's root is root's of the sandbox, and a copy-up lands in the upper directory as
 * the sandbox's block of host ids, never as the host's root. The upper directory itself
 * is not idmapped: overlayfs creates its work files with the mounter's credentials
 * (the host's root), which an idmapped upper layer could not represent. */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mnt.h"
#include "sbx_limits.h"

int image_userns(uint32_t base, struct util_err *err) {
        char map[64];
        int fd;

        snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, SBX_IMAGE_IDS);
        fd = util_make_userns(map, map, true);
        return fd < 0 ? util_fail(err, -fd, NULL, "make the user namespace of ids %u-%u",
                                  (unsigned)base, (unsigned)(base + SBX_IMAGE_IDS - 1))
                      : fd;
}

int image_enter_userns(int userns_fd, struct util_err *err) {
        if (setns(userns_fd, CLONE_NEWUSER) < 0)
                return util_fail(err, errno, NULL, "enter the sandbox's user namespace");
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
                return util_fail(err, errno, NULL, "become root of the sandbox's namespace");
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return util_fail(err, errno, NULL, "drop the supplementary groups");
        return 0;
}

/* The host ids disk_dirs gives its directories (root mode). */
struct disk_owners {
        uid_t root; /* the sandbox's root's: upper/ */
        uid_t uid;  /* the commands': workspace/ */
        gid_t gid;
};

/* Makes upper/, work/ and workspace/ in the directory dfd (dir names it in errors):
 * owned as own says (root mode), or workspace/ everyone's (01777) when open_workspace
 * (rootless: the image's user is not the daemon's). */
static int disk_dirs(int dfd, const char *dir, bool open_workspace, const struct disk_owners *own,
                     struct util_err *err) {
        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {{"upper", 0755}, {"work", 0700}, {"workspace", 0755}};
        size_t i;

        for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                mode_t mode = i == 2 && open_workspace ? 01777 : dirs[i].mode;
                int r = mkdirat(dfd, dirs[i].name, mode) < 0 ||
                        fchmodat(dfd, dirs[i].name, mode, 0) < 0;
                if (!r && own && i != 1)
                        r = fchownat(dfd, dirs[i].name, i ? own->uid : own->root,
                                     i ? own->gid : own->root, AT_SYMLINK_NOFOLLOW) < 0;
                if (r)
                        return util_fail(err, errno, NULL, "mkdir %s/%s", dir, dirs[i].name);
        }
        return 0;
}

int image_disk_tmpfs(const char *dir, uint64_t bytes, uint64_t inodes, bool open_workspace,
                     struct util_err *err) {
        char opts[128];
        int dfd, r;

        mnt_tmpfs_opts(bytes, inodes, opts, sizeof(opts));
        if (mount("sbx-disk", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return util_fail(err, errno, NULL, "mount the disk's tmpfs on %s (%s)", dir, opts);
        dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return util_fail(err, errno, NULL, "open %s", dir);
        r = disk_dirs(dfd, dir, open_workspace, NULL, err);
        close(dfd);
        return r;
}

/* A new tmpfs of mnt_tmpfs_opts's options for bytes and inodes, as a mount attached
 * nowhere, nosuid and nodev. Returns its descriptor. */
static int detached_tmpfs(uint64_t bytes, uint64_t inodes, struct util_err *err) {
        char opts[128], *key, *save = NULL;
        int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC), mnt = -1, r = 0;

        if (fs < 0)
                return util_fail(err, errno, NULL, "open a tmpfs");
        mnt_tmpfs_opts(bytes, inodes, opts, sizeof(opts));
        for (key = strtok_r(opts, ",", &save); r == 0 && key; key = strtok_r(NULL, ",", &save)) {
                char *value = strchr(key, '=');
                if (value)
                        *value++ = '\0';
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0) < 0)
                        r = util_fail(err, errno, NULL, "tmpfs option %s=%s", key,
                                      value ? value : "");
        }
        if (r == 0 && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                r = util_fail(err, errno, NULL, "make the disk's tmpfs");
        if (r == 0) {
                mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (mnt < 0)
                        r = util_fail(err, errno, NULL, "mount the disk's tmpfs");
        }
        close(fs);
        return r < 0 ? r : mnt;
}

int image_disk_tmpfs_detached(uint64_t bytes, uint64_t inodes, uint32_t base, uid_t uid,
                              gid_t gid, int *ret_ws_fd, struct util_err *err) {
        const struct disk_owners own = {.root = base, .uid = uid, .gid = gid};
        int mnt = detached_tmpfs(bytes, inodes, err), ws = -1, r;

        if (mnt < 0)
                return mnt;
        r = disk_dirs(mnt, "the disk's tmpfs", false, &own, err);
        if (r == 0) {
                ws = (int)syscall(SYS_open_tree, mnt, "workspace",
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
                if (ws < 0)
                        r = util_fail(err, errno, NULL, "clone the disk's workspace");
        }
        if (r < 0) {
                close(mnt);
                return r;
        }
        *ret_ws_fd = ws;
        return mnt;
}

/* Layer path cloned (open_tree) and idmapped through userns_fd: a mount attached
 * nowhere. */
static int idmapped_layer(const char *path, int userns_fd, struct util_err *err) {
        struct mount_attr a;
        int fd = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);

        if (fd < 0)
                return util_fail(err, errno, NULL, "open the layer %s", path);
        memset(&a, 0, sizeof(a));
        a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY;
        a.userns_fd = (uint64_t)userns_fd;
        if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0) {
                int e = errno;
                close(fd);
                return util_fail(err, e, "idmapped mounts need Linux 5.12 and a filesystem "
                                         "that supports them under the state directory",
                                 "idmap the layer %s", path);
        }
        return fd;
}

static int set_string(int fs, const char *key, const char *value, struct util_err *err) {
        if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0) < 0)
                return util_fail(err, errno, NULL, "overlay option %s=%.200s", key, value);
        return 0;
}

/* The lower layers on fs (the top one first), each lfd[i] a descriptor of layer i (an
 * idmapped mount, or an O_PATH of the directory): one lowerdir+ each (Linux 6.8), or,
 * with legacy or where the kernel has no lowerdir+, one lowerdir of them all, colon
 * separated (fd paths keep it short: a page holds some 250). */
static int set_lowers(int fs, size_t n, const int *lfd, bool legacy, struct util_err *err) {
        char one[32], all[4096];
        size_t i, len = 0;

        for (i = n; !legacy && i-- > 0;) {
                snprintf(one, sizeof(one), "/proc/self/fd/%d", lfd[i]);
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir+", one, 0) == 0)
                        continue;
                if (errno != EINVAL || i != n - 1)
                        return util_fail(err, errno, NULL, "overlay option lowerdir+=%s", one);
                legacy = true; /* before Linux 6.8: none was set */
        }
        if (!legacy)
                return 0;
        for (i = n; i-- > 0;) {
                int k = snprintf(all + len, sizeof(all) - len, "%s/proc/self/fd/%d",
                                 len ? ":" : "", lfd[i]);
                if (k < 0 || (size_t)k >= sizeof(all) - len)
                        return util_fail(err, E2BIG, "an image of fewer layers, or Linux 6.8",
                                         "overlay option lowerdir: %zu layers", n);
                len += (size_t)k;
        }
        return set_string(fs, "lowerdir", all, err);
}

/* The overlay's options on fs: its layers (set_lowers), the upper and work
 * directories. */
static int configure(int fs, size_t n, const int *lfd, const char *upper_dir, bool userxattr,
                     bool legacy, struct util_err *err) {
        char buf[SBX_PATH_MAX_BYTES + 64];
        int r = set_lowers(fs, n, lfd, legacy, err);

        snprintf(buf, sizeof(buf), "%s/upper", upper_dir);
        if (r == 0)
                r = set_string(fs, "upperdir", buf, err);
        snprintf(buf, sizeof(buf), "%s/work", upper_dir);
        if (r == 0)
                r = set_string(fs, "workdir", buf, err);
        /* No metadata-only copy-up nor redirects: features that trust xattrs of the
         * upper directory to point into the layers. */
        if (r == 0)
                r = set_string(fs, "metacopy", "off", err);
        if (r == 0)
                r = set_string(fs, "redirect_dir", "nofollow", err);
        if (r == 0 && userxattr &&
            syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
                r = util_fail(err, errno, "needs Linux 5.11", "overlay option userxattr");
        /* The upper directory goes with the sandbox: its writes need not survive a crash
         * of the host, so sync and fsync in the sandbox (dpkg's, for one) cost nothing. */
        if (r == 0 && syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0)
                r = util_fail(err, errno, "needs Linux 5.10", "overlay option volatile");
        return r;
}

/* The kernel's own words about a refused overlay, read from the fs context. */
static void kernel_words(int fs, struct util_err *err) {
        char msg[512];
        ssize_t k = read(fs, msg, sizeof(msg) - 1);
        size_t len = strlen(err->text);

        if (k > 0 && len + 8 < sizeof(err->text)) {
                msg[k] = '\0';
                msg[strcspn(msg, "\n")] = '\0';
                snprintf(err->text + len, sizeof(err->text) - len, " [%s]", msg);
        }
}

int image_mount_root(char *const *layers, size_t n, const char *upper_dir, int userns_fd,
                     bool legacy, struct util_err *err) {
        int lfd[SBX_MAX_IMAGE_LAYERS];
        size_t i;
        int fs = -1, mnt = -1, r = 0;

        if (n == 0 || n > SBX_MAX_IMAGE_LAYERS)
                return util_fail(err, EINVAL, NULL, "an image of %zu layers", n);
        for (i = 0; i < n; i++)
                lfd[i] = -1;
        for (i = 0; r == 0 && i < n; i++) {
                if (userns_fd >= 0) {
                        lfd[i] = idmapped_layer(layers[i], userns_fd, err);
                } else {
                        lfd[i] = open(layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (lfd[i] < 0)
                                lfd[i] = util_fail(err, errno, NULL, "open the layer %s",
                                                   layers[i]);
                }
                r = lfd[i] < 0 ? lfd[i] : 0;
        }
        if (r == 0) {
                fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
                if (fs < 0)
                        r = util_fail(err, errno, "needs overlayfs (modprobe overlay)",
                                      "open an overlay");
        }
        if (r == 0)
                r = configure(fs, n, lfd, upper_dir, userns_fd < 0, legacy, err);
        if (r == 0 && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
                r = util_fail(err, errno, NULL, "make the image's overlay");
                kernel_words(fs, err);
        }
        if (r == 0) {
                mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
                if (mnt < 0)
                        r = util_fail(err, errno, NULL, "mount the image's overlay");
        }
        if (fs >= 0)
                close(fs);
        for (i = 0; i < n; i++)
                if (lfd[i] >= 0)
                        close(lfd[i]);
        return r < 0 ? r : mnt;
}
