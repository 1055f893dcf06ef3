/* mnt.c: building the sandbox's filesystem view in PID 1's new mount namespace.
 *
 * The sequence follows bubblewrap's setup_newroot(), with one pivot instead of two:
 * every mount is made private; a tmpfs mounted over the host's /tmp becomes the new
 * root with pivot_root(2), the host's tree hanging below it at /.sbx-oldroot while the
 * view is built; each top-level entry of root_dir is bound from there read-only; the
 * sandbox's own /proc, /sys, /dev, /tmp, /run and /workspace are added; the policy's
 * writable, read-only and hidden paths are applied in that order (a denial beats a
 * permission), resolved by the kernel in the new view exactly as a command would
 * resolve them; the old root is detached and the new root made read-only. A spare built
 * ahead does it in two halves (mnt_view_base, mnt_view_finish), holding the host's tree
 * in between. Called by main.c (PID 1). */
#include "mnt.h"
#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mountinfo.h"
#include "sbx_limits.h"

/* Where the host's tree hangs while the view is built (inside the new root). */
#define OLDROOT_NAME ".sbx-oldroot"
#define OLDROOT      "/" OLDROOT_NAME
/* Where the empty tmpfs hidden directories share is mounted while they are bound from it
 * (inside the new root, which only this namespace reaches). */
#define HIDDEN_NAME ".sbx-hidden"
#define HIDDEN      "/" HIDDEN_NAME
/* Where the copies of the lists of block devices are made while the view is built
 * (inside the new root too). */
#define LISTS_NAME ".sbx-lists"
#define LISTS      "/" LISTS_NAME

/* The mount_setattr(2) interface (Linux 5.12), spelt out for older headers. */
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
struct mnt_attr_arg {
        uint64_t attr_set;
        uint64_t attr_clr;
        uint64_t propagation;
        uint64_t userns_fd;
};
#define ATTR_RDONLY 0x1u      /* MOUNT_ATTR_RDONLY */
#define ATTR_NOSUID 0x2u      /* MOUNT_ATTR_NOSUID */
#define ATTR_NODEV  0x4u      /* MOUNT_ATTR_NODEV */
#define ATTR_NOEXEC 0x8u      /* MOUNT_ATTR_NOEXEC */
#define ATTR_IDMAP  0x100000u /* MOUNT_ATTR_IDMAP */

/* open_tree(2) and move_mount(2) (Linux 5.2), for idmapped mounts. */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#endif

#define RO_ATTRS (MNT_RDONLY | MNT_NOSUID | MNT_NODEV)

/* Top-level entries of root_dir that the sandbox replaces with its own. */
static const char *const own_entries[] = {"proc",      "dev",        "sys",       "tmp",      "run",
                                          "workspace", OLDROOT_NAME, HIDDEN_NAME, LISTS_NAME, NULL};

/* Device nodes bound from the host into /dev. */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};

/* Parts of /proc a process could use to reach the host, made read-only (as in
 * bubblewrap: the kernel does not namespace them). */
static const char *const proc_ro[] = {"sys", "sysrq-trigger", "irq", "bus", NULL};

static int setattr_missing; /* mount_setattr answered ENOSYS once. */

int mnt_set_attr(const char *path, unsigned attrs, bool recursive) {
        if (!setattr_missing) {
                struct mnt_attr_arg a;

                memset(&a, 0, sizeof(a));
                if (attrs & MNT_RDONLY)
                        a.attr_set |= ATTR_RDONLY;
                if (attrs & MNT_NOSUID)
                        a.attr_set |= ATTR_NOSUID;
                if (attrs & MNT_NODEV)
                        a.attr_set |= ATTR_NODEV;
                if (attrs & MNT_NOEXEC)
                        a.attr_set |= ATTR_NOEXEC;
                if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a,
                            sizeof(a)) == 0)
                        return 0;
                if (errno != ENOSYS)
                        return -errno;
                setattr_missing = 1;
        }
        return mnt_set_attr_fallback(path, attrs, recursive);
}

/* Remounts the mount at mp with its current flags plus add (MS_* bits). */
static int remount_keep(const char *mp, unsigned long add) {
        struct statvfs sv;
        unsigned long flags = 0;

        if (statvfs(mp, &sv) < 0)
                return -errno;
        if (sv.f_flag & ST_RDONLY)
                flags |= MS_RDONLY;
        if (sv.f_flag & ST_NOSUID)
                flags |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV)
                flags |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC)
                flags |= MS_NOEXEC;
        if (sv.f_flag & ST_NOATIME)
                flags |= MS_NOATIME;
        if (sv.f_flag & ST_NODIRATIME)
                flags |= MS_NODIRATIME;
#ifdef ST_RELATIME
        if (sv.f_flag & ST_RELATIME)
                flags |= MS_RELATIME;
#endif
        if (mount("none", mp, "none", MS_REMOUNT | MS_BIND | flags | add, NULL) < 0)
                return -errno;
        return 0;
}

/* 1 when mp is strictly below dir (both canonical). */
static int below(const char *dir, const char *mp) {
        size_t n = strlen(dir);

        if (strcmp(dir, "/") == 0)
                return mp[0] == '/' && mp[1] != '\0';
        return strncmp(dir, mp, n) == 0 && mp[n] == '/';
}

int mnt_set_attr_fallback(const char *path, unsigned attrs, bool recursive) {
        unsigned long add = 0;
        char real[PATH_MAX];
        char *line = NULL;
        size_t cap = 0;
        FILE *f;
        int r;

        if (attrs & MNT_RDONLY)
                add |= MS_RDONLY;
        if (attrs & MNT_NOSUID)
                add |= MS_NOSUID;
        if (attrs & MNT_NODEV)
                add |= MS_NODEV;
        if (attrs & MNT_NOEXEC)
                add |= MS_NOEXEC;
        if (!realpath(path, real))
                return -errno;
        r = remount_keep(real, add);
        if (r < 0 || !recursive)
                return r;
        f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -errno;
        /* Parents come before their children, so a submount is remounted after the
         * mount it sits on. */
        while (getline(&line, &cap, f) > 0) {
                struct mountinfo_line m;

                if (mountinfo_parse(line, &m) < 0)
                        continue;
                if (!below(real, m.point))
                        continue;
                r = remount_keep(m.point, add);
                /* A mount hidden under a later one, or one we cannot reach, is not
                 * reachable by the sandbox either. */
                if (r == -ENOENT || r == -EACCES || r == -ENOTDIR)
                        r = 0;
                if (r < 0)
                        break;
        }
        free(line);
        fclose(f);
        return r;
}

/* The kernel ignores the type of a bind, remount or propagation change; we pass "none"
 * rather than NULL, which valgrind (3.19) reports as an unaddressable argument. */

/* Bind-mounts src on dst, recursively (a non-recursive bind of a tree with locked
 * submounts fails in a user namespace, and would drop the submounts anyway), then adds
 * attrs to the new mounts. */
static int bind_mount(const char *src, const char *dst, unsigned attrs) {
        if (mount(src, dst, "none", MS_BIND | MS_REC, NULL) < 0)
                return -errno;
        if (attrs)
                return mnt_set_attr(dst, attrs, true);
        return 0;
}

/* Creates an empty file at path to mount a non-directory on. */
static int make_file(const char *path, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, mode);

        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

/* Makes sure something of the right kind exists at dst to mount on, creating dst and
 * its parents when missing (possible only where the view is writable at this point:
 * the root tmpfs, /tmp, /workspace). */
static int ensure_mountpoint(const char *dst, bool dir) {
        char parent[SBX_PATH_MAX_BYTES + 1];
        struct stat st;
        char *slash;
        int r;

        if (stat(dst, &st) == 0) {
                if (dir && !S_ISDIR(st.st_mode))
                        return -ENOTDIR;
                if (!dir && S_ISDIR(st.st_mode))
                        return -EISDIR;
                return 0;
        }
        if (errno != ENOENT)
                return -errno;
        snprintf(parent, sizeof(parent), "%s", dst);
        slash = strrchr(parent, '/');
        if (slash && slash != parent) {
                *slash = '\0';
                r = util_mkdir_p(parent, 0755);
                if (r < 0)
                        return r;
        }
        if (dir)
                return mkdir(dst, 0755) < 0 && errno != EEXIST ? -errno : 0;
        return make_file(dst, 0644);
}

/* Makes the directory path of the new root, a mount point: an image's entry that is
 * there already may stay when it is a directory, and is replaced when it is anything
 * else (a symlink would lead the mount elsewhere). */
static int mkdir_mp(const char *path, mode_t mode) {
        struct stat st;

        if (mkdir(path, mode) == 0)
                return 0;
        if (errno != EEXIST || lstat(path, &st) < 0)
                return -1;
        if (S_ISDIR(st.st_mode))
                return 0;
        if (unlink(path) < 0 || mkdir(path, mode) < 0)
                return -1;
        return 0;
}

/* Attaches the new root on the first usable host directory (an image's overlay, else a
 * tmpfs) and pivots into it. */
static int pivot_to_tmpfs(int root_mount_fd, struct util_err *err) {
        static const char *const bases[] = {"/tmp", "/mnt", "/dev", NULL};
        const char *base = NULL;
        char path[64];
        size_t i;

        /* Any host directory will do: pivot_root moves the tmpfs away from it, and the
         * host's content there stays reachable under /.sbx-oldroot. Our mount namespace
         * is private, so the host never sees this tmpfs. */
        for (i = 0; bases[i] && !base; i++) {
                if (root_mount_fd >= 0
                            ? syscall(SYS_move_mount, root_mount_fd, "", AT_FDCWD, bases[i],
                                      MOVE_MOUNT_F_EMPTY_PATH) == 0
                            : mount("sbx-root", bases[i], "tmpfs", MS_NOSUID | MS_NODEV,
                                    "mode=0755,size=1m") == 0)
                        base = bases[i];
        }
        if (!base)
                return util_fail(err, errno, NULL, "mount %s for the new root on /tmp",
                                 root_mount_fd >= 0 ? "the image" : "a tmpfs");
        snprintf(path, sizeof(path), "%s/%s", base, OLDROOT_NAME);
        if (mkdir_mp(path, 0700) < 0)
                return util_fail(err, errno, NULL, "mkdir %s", path);
        if (chdir(base) < 0)
                return util_fail(err, errno, NULL, "chdir %s", base);
        /* pivot_root(".", put_old) with the new root as current directory; it fails
         * with EINVAL when the current root is shared (hence MS_PRIVATE first) or is
         * the initramfs rootfs (pivot_root(2)). */
        if (syscall(SYS_pivot_root, ".", OLDROOT_NAME) < 0)
                return util_fail(err, errno, "the host's / must not be the initramfs rootfs",
                                 "pivot_root into the new root");
        if (chdir("/") < 0)
                return util_fail(err, errno, NULL, "chdir /");
        return 0;
}

static int is_own_entry(const char *name) {
        size_t i;

        for (i = 0; own_entries[i]; i++)
                if (strcmp(own_entries[i], name) == 0)
                        return 1;
        return 0;
}

/* Bind-mounts what fd (an O_PATH descriptor of this mount namespace) refers to on
 * dst, recursively, then adds attrs: the object that was opened and checked, never a
 * name looked up again. Needs our /proc. */
static int bind_fd(int fd, const char *dst, unsigned attrs) {
        char src[64];

        snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
        return bind_mount(src, dst, attrs);
}

/* Copies the symlink efd (an O_PATH descriptor of it, closed here) to dst. */
static int copy_symlink(int efd, const char *dst, struct util_err *err) {
        char target[SBX_PATH_MAX_BYTES + 1];
        ssize_t n = readlinkat(efd, "", target, sizeof(target) - 1);

        close(efd);
        if (n < 0)
                return util_fail(err, errno, NULL, "readlink %s", dst);
        target[n] = '\0';
        if (symlink(target, dst) < 0)
                return util_fail(err, errno, NULL, "symlink %s", dst);
        return 0;
}

/* Puts the entry name of the directory dfd (from, for errors: root_dir, or a list of
 * block devices) at dst: opened without following a symlink, a symlink is copied, a
 * directory or a regular file is bound read-only from that descriptor, anything else is
 * left out. */
static int bind_root_entry(int dfd, const char *name, const char *dst, const char *from,
                           struct util_err *err) {
        struct stat st;
        int efd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), r;

        if (efd < 0 || fstat(efd, &st) < 0) {
                r = util_fail(err, errno, NULL, "stat %s of %s", dst, from);
                if (efd >= 0)
                        close(efd);
                return r;
        }
        if (S_ISLNK(st.st_mode))
                return copy_symlink(efd, dst, err);
        if (S_ISDIR(st.st_mode)) {
                r = mkdir(dst, 0755) < 0 ? -errno : 0;
        } else if (S_ISREG(st.st_mode)) {
                r = make_file(dst, 0644);
        } else {
                close(efd);
                return 0; /* Sockets, fifos, devices at the top: left out. */
        }
        if (r < 0) {
                close(efd);
                return util_fail(err, r, NULL, "create mount point %s", dst);
        }
        r = bind_fd(efd, dst, RO_ATTRS);
        close(efd);
        return r < 0 ? util_fail(err, r, NULL, "bind %s read-only", dst) : 0;
}

/* Binds each top-level entry of the host directory root_fd (O_PATH) read-only into
 * the new root, and copies the top-level symlinks (/bin -> usr/bin and the like). Each
 * entry is opened without following a symlink and mounted from that descriptor, so
 * that an entry swapped for a symlink in between is copied as a symlink, never
 * followed as root. */
static int bind_root_entries(int root_fd, const char *root, struct util_err *err) {
        char dst[300], from[SBX_PATH_MAX_BYTES + 16];
        struct dirent *de;
        DIR *d;
        int r = 0, dfd;

        snprintf(from, sizeof(from), "root_dir %s", root);
        dfd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d) {
                r = util_fail(err, errno, NULL, "open root_dir %s", root);
                if (dfd >= 0)
                        close(dfd);
                return r;
        }
        while (r == 0 && (de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    is_own_entry(de->d_name) || strlen(de->d_name) >= sizeof(dst) - 2)
                        continue;
                snprintf(dst, sizeof(dst), "/%s", de->d_name);
                r = bind_root_entry(dirfd(d), de->d_name, dst, from, err);
        }
        closedir(d);
        return r;
}

static int setup_proc(struct util_err *err) {
        char path[64];
        size_t i;
        int r;

        if (mkdir_mp("/proc", 0555) < 0)
                return util_fail(err, errno, NULL, "mkdir /proc");
        /* In a user namespace the kernel mounts a new procfs only if a fully visible
         * one already exists in the mount namespace (mount_too_revealing() in
         * fs/namespace.c): the host's, still attached under /.sbx-oldroot now. */
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return util_fail(err, errno,
                                 "a rootless sandbox needs the host's /proc with nothing "
                                 "mounted over its entries",
                                 "mount proc on /proc");
        for (i = 0; proc_ro[i]; i++) {
                snprintf(path, sizeof(path), "/proc/%s", proc_ro[i]);
                if (access(path, F_OK) < 0)
                        continue;
                r = bind_mount(path, path, RO_ATTRS | MNT_NOEXEC);
                if (r < 0)
                        return util_fail(err, r, NULL, "bind %s read-only", path);
        }
        return 0;
}

/* A private devpts instance on /dev/pts (flags: 0, or MS_REMOUNT for the one there):
 * ptys of other sandboxes and of the host stay invisible. uid=0,gid=0: a new pty is
 * root's of the sandbox's user namespace, whoever opens it; the daemon does, outside,
 * as a host id a sandbox of an image does not map, and its command's chown of the
 * terminal (spawn.c) was then refused (EPERM). Not gid 5: it may be unmapped in a user
 * namespace. max=: every instance but the host's draws from one kernel pool
 * (sbx_limits.h). A remount sets every option it does not name back to its default
 * (parse_mount_options(PARSE_REMOUNT) in fs/devpts/inode.c), so each is named. */
static int mount_devpts(unsigned ptys, unsigned long flags, struct util_err *err) {
        char opts[96];

        snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=620,uid=0,gid=0,max=%u",
                 ptys);
        if (mount("devpts", "/dev/pts", "devpts", flags | MS_NOSUID | MS_NOEXEC, opts) < 0)
                return util_fail(err, errno, "needs CONFIG_DEVPTS_MULTIPLE_INSTANCES before 4.7",
                                 "%s devpts on /dev/pts (%s)", flags ? "remount" : "mount", opts);
        return 0;
}

int mnt_set_ptys(unsigned ptys, struct util_err *err) {
        struct statfs sfs;
        int mounted = statfs("/dev/pts", &sfs) == 0 && sfs.f_type == DEVPTS_SUPER_MAGIC;

        if (ptys > 0)
                return mount_devpts(ptys, mounted ? MS_REMOUNT : 0, err);
        if (mounted && umount2("/dev/pts", MNT_DETACH) < 0)
                return util_fail(err, errno, NULL, "unmount /dev/pts");
        return 0;
}

static int setup_dev(uint64_t shm_bytes, unsigned ptys, struct util_err *err,
                     struct util_warnings *warn) {
        static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                               {"stdin", "/proc/self/fd/0"},
                                               {"stdout", "/proc/self/fd/1"},
                                               {"stderr", "/proc/self/fd/2"},
                                               {"ptmx", "pts/ptmx"}};
        char src[64], dst[64], opts[64];
        size_t i;
        int r;

        if (mkdir_mp("/dev", 0755) < 0)
                return util_fail(err, errno, NULL, "mkdir /dev");
        if (mount("sbx-dev", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
                return util_fail(err, errno, NULL, "mount tmpfs on /dev");
        for (i = 0; dev_nodes[i]; i++) {
                struct stat st;

                snprintf(src, sizeof(src), OLDROOT "/dev/%s", dev_nodes[i]);
                snprintf(dst, sizeof(dst), "/dev/%s", dev_nodes[i]);
                if (stat(src, &st) < 0 || !S_ISCHR(st.st_mode)) {
                        util_warn(warn, "/dev/%s is missing on the host; not in the sandbox",
                                  dev_nodes[i]);
                        continue;
                }
                r = make_file(dst, 0666);
                if (r < 0)
                        return util_fail(err, r, NULL, "create %s", dst);
                /* A bind keeps the host's device node; mknod would need CAP_MKNOD and does
                 * not work in a user namespace's mounts (SB_I_NODEV). */
                if (mount(src, dst, "none", MS_BIND, NULL) < 0)
                        return util_fail(err, errno, NULL, "bind %s", dst);
                r = mnt_set_attr(dst, MNT_NOSUID | MNT_NOEXEC, false);
                if (r < 0)
                        return util_fail(err, r, NULL, "set nosuid,noexec on %s", dst);
        }
        if (mkdir("/dev/pts", 0755) < 0)
                return util_fail(err, errno, NULL, "mkdir /dev/pts");
        /* None (max=0 would be no bound): /dev/pts stays an empty directory. */
        r = ptys > 0 ? mount_devpts(ptys, 0, err) : 0;
        if (r < 0)
                return r;
        if (mkdir("/dev/shm", 01777) < 0)
                return util_fail(err, errno, NULL, "mkdir /dev/shm");
        snprintf(opts, sizeof(opts), "mode=1777,size=%llu", (unsigned long long)shm_bytes);
        if (mount("sbx-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return util_fail(err, errno, NULL, "mount tmpfs on /dev/shm");
        for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                snprintf(dst, sizeof(dst), "/dev/%s", links[i][0]);
                if (symlink(links[i][1], dst) < 0)
                        return util_fail(err, errno, NULL, "symlink %s", dst);
        }
        return 0;
}

/* Opens path, a host path, in the host's tree host (resolved beneath host->fd, the
 * host's /, with RESOLVE_IN_ROOT, before the pivot and after it alike), with flags and
 * the extra resolve flags. On a kernel without openat2 (Linux < 5.6), fallback says
 * whether a plain open of the same name may do: there a one-shot view opens its host
 * paths before the pivot (mnt_build_view), and the daemon builds no spares ahead.
 * Returns the descriptor or -errno. */
static int host_open(const struct mnt_host *host, const char *path, int flags, uint64_t resolve,
                     bool fallback) {
        struct open_how how = {.flags = (uint64_t)flags, .resolve = RESOLVE_IN_ROOT | resolve};
        char old[SBX_PATH_MAX_BYTES + sizeof(OLDROOT) + 1];
        int fd, tries = 0;

        /* RESOLVE_IN_ROOT answers EAGAIN when a rename on the host raced a "..": again. */
        do
                fd = (int)syscall(SYS_openat2, host->fd, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN && ++tries < 16);
        if (fd >= 0 || errno != ENOSYS || !fallback)
                return fd < 0 ? -errno : fd;
        /* After the pivot the host's / is OLDROOT. */
        if ((size_t)snprintf(old, sizeof(old), "%s%s", host->pivoted ? OLDROOT : "", path) >=
            sizeof(old))
                return -ENAMETOOLONG;
        fd = open(old, flags);
        return fd < 0 ? -errno : fd;
}

/* Opens the host path as O_PATH into *ret_fd. With obj, the path is canonical (the
 * daemon's): it is opened without following any symlink and must be that very object,
 * else the host changed it between the daemon's check (with the caller's rights) and
 * now, and nothing is mounted. */
static int open_host(const struct mnt_host *host, const char *what, const char *path,
                     const struct mnt_object *obj, bool want_dir, int *ret_fd,
                     struct util_err *err) {
        struct stat st;
        int fd = host_open(host, path, O_PATH | O_CLOEXEC, obj ? RESOLVE_NO_SYMLINKS : 0, true);

        if (fd < 0)
                return util_fail(err, -fd,
                                 obj ? "it changed on the host while the sandbox was being created"
                                     : NULL,
                                 "%s %s", what, path);
        if (fstat(fd, &st) < 0) {
                close(fd);
                return util_fail(err, errno, NULL, "%s %s", what, path);
        }
        if (obj && (st.st_dev != (dev_t)obj->dev || st.st_ino != (ino_t)obj->ino)) {
                close(fd);
                return util_fail(err, ESTALE,
                                 "it changed on the host while the sandbox was being created; "
                                 "nothing was mounted",
                                 "%s %s is not what the daemon checked", what, path);
        }
        if (want_dir && !S_ISDIR(st.st_mode)) {
                close(fd);
                return util_fail(err, ENOTDIR, NULL, "%s %s", what, path);
        }
        *ret_fd = fd;
        return 0;
}

/* The lines of an id map (uid_map or gid_map) that shows host as run and every other
 * id as itself but those from xlo to xhi (none when xlo > xhi; run lies there when
 * given): identity ranges around host, run and that range, so that no id is mapped twice
 * either way (run itself, as an id on disk, is left unmapped, and host is no id of the
 * mapped side), and the range stays unmapped both ways. */
static void idmap_lines(unsigned host, unsigned run, unsigned xlo, unsigned xhi, char *buf,
                        size_t len) {
        /* The holes in the identity, in order: host, run, [xlo, xhi], merged. */
        unsigned lo[3], hi[3], next = 0;
        size_t n = 0, k = 0, i, j;

        if (host == run && xlo > xhi) {
                snprintf(buf, len, "0 0 %u\n", UINT32_MAX);
                return;
        }
        lo[k] = hi[k] = host, k++;
        if (run != host)
                lo[k] = hi[k] = run, k++;
        if (xlo <= xhi)
                lo[k] = xlo, hi[k] = xhi, k++;
        for (i = 0; i < k; i++) /* sort by lo (three at most) */
                for (j = i + 1; j < k; j++)
                        if (lo[j] < lo[i]) {
                                unsigned t = lo[i];
                                lo[i] = lo[j], lo[j] = t;
                                t = hi[i], hi[i] = hi[j], hi[j] = t;
                        }
        for (i = 0; i < k; i++) {
                if (lo[i] > next)
                        n += (size_t)snprintf(buf + n, len - n, "%u %u %u\n", next, next,
                                              lo[i] - next);
                if (hi[i] + 1 > next)
                        next = hi[i] + 1;
        }
        /* (u32)-1 is no id: the last range ends below it. */
        if (next < UINT32_MAX)
                n += (size_t)snprintf(buf + n, len - n, "%u %u %u\n", next, next,
                                      UINT32_MAX - next);
        if (host != run)
                snprintf(buf + n, len - n, "%u %u 1\n", host, run);
}

/* A user namespace that shows uid and gid as run_uid and run_gid and every other id as
 * itself (idmap_lines), for an idmapped mount: there a file of uid's is the sandbox
 * user's, what the sandbox user creates is uid's and gid's on disk, and a file of
 * anyone else's is theirs, so that its mode bits decide as for any user but its owner
 * (without that mapping, the kernel refuses every write to an inode whose owner the
 * mount does not map: HAS_UNMAPPED_ID in inode_permission(), fs/namei.c). Returns the
 * namespace's descriptor or -errno. */
static int make_idmap_userns(const struct mnt_config *cfg, uid_t uid, gid_t gid) {
        unsigned xlo = cfg->image_block ? cfg->image_block : 1, xhi = 0;
        char umap[256], gmap[256];

        /* An image's sandbox: none of its block's ids but run's (sbx_limits.h). */
        if (cfg->image_block)
                xhi = cfg->image_block + SBX_IMAGE_IDS - 1;
        idmap_lines(uid, cfg->run_uid, xlo, xhi, umap, sizeof(umap));
        idmap_lines(gid, cfg->run_gid, xlo, xhi, gmap, sizeof(gmap));
        return util_make_userns(umap, gmap, false);
}

/* A detached copy (open_tree) of what fd refers to, nosuid and nodev, idmapped through
 * userns_fd (Linux 5.12; -1: not idmapped). Its descriptor, or -EINVAL/-ENOSYS/-EPERM
 * when the kernel or a filesystem of the tree cannot. */
static int clone_tree(int fd, int userns_fd) {
        struct mnt_attr_arg a;
        int tree = (int)syscall(SYS_open_tree, fd, "",
                                OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);

        if (tree < 0)
                return -errno;
        memset(&a, 0, sizeof(a));
        a.attr_set = (userns_fd >= 0 ? ATTR_IDMAP : 0) | ATTR_NOSUID | ATTR_NODEV;
        a.userns_fd = userns_fd >= 0 ? (uint64_t)userns_fd : 0;
        if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
                int e = errno;
                close(tree);
                return -e;
        }
        return tree;
}

/* Mounts what fd refers to on dst, idmapped through userns_fd, nosuid and nodev: a
 * detached copy (clone_tree), then attached. Errors as clone_tree's. */
static int bind_idmapped(int fd, const char *dst, int userns_fd) {
        int tree = clone_tree(fd, userns_fd), r = 0;

        if (tree < 0)
                return tree;
        if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                r = -errno;
        close(tree);
        return r;
}

/* How writable path i is bound: Setup's WritableBind, else as the owner's ids. */
static struct mnt_bind bind_of(const struct mnt_config *cfg, size_t i) {
        struct mnt_bind b = {cfg->owner_uid, cfg->owner_gid, false};

        return cfg->writable_binds ? cfg->writable_binds[i] : b;
}

/* The ids the placeholder p (a host path) is made with: those of the innermost
 * writable path holding it (the bind a command reaches it through), else the owner's. */
static struct mnt_bind placeholder_ids(const struct mnt_config *cfg, const char *p) {
        struct mnt_bind b = {cfg->owner_uid, cfg->owner_gid, false};
        size_t i, n, best = 0;

        for (i = 0; i < cfg->n_writable_paths; i++) {
                n = strlen(cfg->writable_paths[i]);
                if (n > best && strncmp(p, cfg->writable_paths[i], n) == 0 &&
                    (p[n] == '/' || p[n] == '\0')) {
                        b = bind_of(cfg, i);
                        best = n;
                }
        }
        return b;
}

/* Takes uid and gid as this process's filesystem ids (away from 0, the filesystem
 * capabilities go; back to 0, they come back). 0 or -EPERM. */
static int take_fs_ids(uid_t uid, gid_t gid) {
        setfsgid(gid);
        setfsuid(uid);
        return (uid_t)setfsuid((uid_t)-1) == uid && (gid_t)setfsgid((gid_t)-1) == gid ? 0 : -EPERM;
}

/* Makes the placeholder path (a host path, in host) when it is missing: a
 * directory (content NULL, 0755) or a file with content (0644), in its parent opened
 * without following symlinks. The caller holds the filesystem identity the sandbox has
 * there, so the placeholder is made with those ids from its creation on (no chown by
 * name that a swap could redirect), and nothing is made where the sandbox may not
 * write. 0, or -errno with err. */
static int make_placeholder(const struct mnt_host *host, const char *p, const void *content,
                            size_t len, struct util_err *err) {
        char parent[SBX_PATH_MAX_BYTES + 1], *slash;
        const char *name;
        int pfd, fd, r = 0;

        if (strlen(p) > SBX_PATH_MAX_BYTES || !(slash = strrchr(strcpy(parent, p), '/')) ||
            slash == parent)
                return util_fail(err, EINVAL, NULL, "protected placeholder %s", p);
        *slash = '\0';
        name = slash + 1;
        pfd = host_open(host, parent, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS, false);
        if (pfd < 0)
                return util_fail(err, -pfd, "its repository changed while the sandbox was set up",
                                 "protected placeholder %s", p);
        if (!content) {
                r = mkdirat(pfd, name, 0755) < 0 ? -errno : 0;
        } else {
                fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                r = fd < 0 ? -errno : 0;
                if (fd >= 0 && len && write(fd, content, len) != (ssize_t)len)
                        r = -EIO;
                if (fd >= 0)
                        close(fd);
        }
        close(pfd);
        /* There already (another sandbox's), and covered as it is; or out of the owner's
         * (and so the sandbox's) reach. */
        if (r == -EEXIST || r == -EACCES || r == -EPERM)
                return 0;
        return r < 0 ? util_fail(err, r, NULL, "protected placeholder %s", p) : 0;
}

/* make_placeholder of p, in root mode with the ids of the writable path holding it
 * (placeholder_ids: the sandbox's rights there). */
static int make_placeholder_as(const struct mnt_config *cfg, const struct mnt_host *host,
                               const char *p, const void *content, size_t len,
                               struct util_err *err) {
        struct mnt_bind ids = placeholder_ids(cfg, p);

        if (cfg->idmap && take_fs_ids(ids.uid, ids.gid) < 0)
                return util_fail(err, EPERM, NULL, "take the ids %u:%u for the placeholder %s",
                                 (unsigned)ids.uid, (unsigned)ids.gid, p);
        return make_placeholder(host, p, content, len, err);
}

/* Makes the placeholders of a writable repository's .git (the parts git would follow
 * if sandboxed code created them), so that they can be kept read-only: in root mode
 * each with the filesystem ids the sandbox has in its writable path and no
 * supplementary group (the sandbox's rights there), rootless as the daemon's user,
 * which is the owner. */
static int make_placeholders(const struct mnt_config *cfg, const struct mnt_host *host,
                             struct util_err *err) {
        size_t i;
        int r = 0;

        if (!cfg->n_protected_mkdirs && !cfg->n_protected_files)
                return 0;
        if (cfg->idmap && syscall(SYS_setgroups, (size_t)0, NULL) < 0)
                return util_fail(err, errno, NULL, "drop groups for the placeholders");
        for (i = 0; r == 0 && i < cfg->n_protected_mkdirs; i++)
                r = make_placeholder_as(cfg, host, cfg->protected_mkdirs[i], NULL, 0, err);
        for (i = 0; r == 0 && i < cfg->n_protected_files; i++)
                r = make_placeholder_as(
                        cfg, host, cfg->protected_files[i].path,
                        cfg->protected_files[i].content ? cfg->protected_files[i].content : "",
                        cfg->protected_files[i].len, err);
        if (cfg->idmap && take_fs_ids(0, 0) < 0 && r == 0)
                r = util_fail(err, EPERM, NULL, "take root's identity back");
        return r;
}

/* The cgroup v1 controllers mounted together with controller in the hierarchy the
 * host mounts (e.g. "cpu,cpuacct"), and that mount's directory name, from
 * /proc/self/mountinfo. 0, or -ENOENT when no hierarchy has it. */
static int find_v1_hierarchy(const char *controller, char *opts, size_t opts_len, char *name,
                             size_t name_len) {
        static const char *const known[] = {
                "cpuset",  "cpu",      "cpuacct",    "blkio",   "memory", "devices", "freezer",
                "net_cls", "net_prio", "perf_event", "hugetlb", "pids",   "rdma",    "misc"};
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char *line = NULL;
        size_t cap = 0;
        int r = -ENOENT;

        while (f && r < 0 && getline(&line, &cap, f) > 0) {
                struct mountinfo_line m;
                char *save = NULL, *tok, *base;
                int has = 0;

                if (mountinfo_parse(line, &m) < 0 || strcmp(m.fstype, "cgroup") != 0)
                        continue;
                opts[0] = '\0';
                for (tok = strtok_r(m.super_options, ",", &save); tok;
                     tok = strtok_r(NULL, ",", &save)) {
                        size_t k;
                        for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
                                if (strcmp(tok, known[k]) == 0) {
                                        if (opts[0] && strlen(opts) + 1 < opts_len)
                                                strcat(opts, ",");
                                        if (strlen(opts) + strlen(tok) < opts_len)
                                                strcat(opts, tok);
                                }
                        has = has || strcmp(tok, controller) == 0;
                }
                base = strrchr(m.point, '/');
                if (has && base && base[1] && strlen(base + 1) < name_len) {
                        strcpy(name, base + 1);
                        r = 0;
                }
        }
        free(line);
        if (f)
                fclose(f);
        return r;
}

/* /sys/fs/cgroup shows nothing of other sandboxes: an empty read-only tmpfs over it,
 * and below it, read-only, the v1 hierarchies the sandbox was placed in, each rooted at
 * its own group by the cgroup namespace (so a sandbox reads its own usage and limits).
 * A hierarchy that cannot be mounted is left out. */
static int setup_cgroupfs(const struct mnt_config *cfg, struct util_err *err) {
        struct stat st;
        size_t i;
        int r;

        if (stat("/sys/fs/cgroup", &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        if (mount("sbx-cgroup", "/sys/fs/cgroup", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=4k") < 0)
                return util_fail(err, errno, NULL, "mount tmpfs on /sys/fs/cgroup");
        for (i = 0; i < cfg->n_cgroup_v1_controllers; i++) {
                char opts[128], name[64], dst[128];
                if (find_v1_hierarchy(cfg->cgroup_v1_controllers[i], opts, sizeof(opts), name,
                                      sizeof(name)) < 0)
                        continue;
                snprintf(dst, sizeof(dst), "/sys/fs/cgroup/%s", name);
                if (mkdir(dst, 0555) < 0)
                        continue; /* made already: cpu and cpuacct share one */
                if (mount("cgroup", dst, "cgroup", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          opts) < 0)
                        (void)rmdir(dst);
        }
        r = mnt_set_attr("/sys/fs/cgroup", MNT_RDONLY, false);
        if (r < 0)
                return util_fail(err, r, NULL, "make /sys/fs/cgroup read-only");
        return 0;
}

/* 1 when stat(2) of a policy path failed because the sandbox cannot reach it at all:
 * missing, or behind a directory it may not search. PID 1 is root in the sandbox's
 * user namespace (or on the host), so what it cannot search, no command can; the
 * path needs no mount. */
static int unreachable(int err) {
        return err == ENOENT || err == ENOTDIR || err == EACCES;
}

/* ---- the block devices ---------------------------------------------------------------- */

/* The directories of /sys and /proc that list block devices, each replaced in the view
 * by a read-only copy without the loop devices. A loop device shows the path of its
 * backing file (loop/backing_file: another sandbox's disk image, in the daemon's state
 * directory), its size and its I/O counters, and the ext4 filesystem on it how much was
 * written to it (lifetime_write_kbytes) and its groups' use (mb_groups); the host's
 * loop devices are no sandbox's business either. A copy is made when the view's base is:
 * a device the host adds later is not in it (one another sandbox's disk adds least of
 * all). */
static const char *const device_lists[] = {
        "/sys/devices/virtual/block", /* the loop devices themselves */
        "/sys/block",
        "/sys/class/block", /* symlinks to them */
        "/sys/dev/block",
        "/sys/fs/ext4", /* their filesystems */
        "/proc/fs/ext4",
        "/proc/fs/jbd2",
        NULL};

/* The tables of /proc that name block devices, replaced by a read-only copy: the lines
 * whose name_field (counted from 0) is a loop device's are left out; name_field -1: none
 * is copied (the table's counters are live, a copy would stand still; /sys/block/NAME/stat
 * has each disk's), so it reads as empty, as a hidden file does. */
static const struct device_table {
        const char *path;
        const char *copy; /* its name in LISTS */
        int name_field;
} device_tables[] = {
        {"/proc/partitions", "partitions", 3},
        {"/proc/diskstats", "diskstats", -1},
};

/* 1 when name begins as a loop device's does (loop3, its partition loop3p1, its ext4
 * filesystem loop3, its journal loop3-8). */
static int loop_name(const char *name) {
        return strncmp(name, "loop", 4) == 0;
}

/* 1 when the entry name of the directory dfd is a loop device's: its name, or for a
 * symlink the last part of what it points to (/sys/dev/block/7:3 ->
 * ../../devices/virtual/block/loop3), is a loop device's; also a symlink too long to tell. */
static int loop_entry(int dfd, const char *name) {
        char target[PATH_MAX];
        const char *last;
        ssize_t n;

        if (loop_name(name))
                return 1;
        n = readlinkat(dfd, name, target, sizeof(target));
        if (n < 0)
                return 0; /* no symlink */
        if ((size_t)n >= sizeof(target))
                return 1;
        target[n] = '\0';
        last = strrchr(target, '/');
        return loop_name(last ? last + 1 : target);
}

/* Makes LISTS/i a copy of the view's directory list without its loop devices' entries:
 * the other symlinks copied, the other directories bound read-only (what is in them is
 * the host's, live); then binds it over list. A list the host lacks is left out; one
 * PID 1 may not read gets an empty copy (a command could still reach an entry by its
 * name through a directory it may search). */
static int copy_device_list(const char *list, size_t i, struct util_err *err) {
        char copy[64], dst[64 + NAME_MAX + 2];
        struct dirent *de;
        int r = 0, dfd = open(list, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);

        if (!d && (dfd >= 0 || errno != EACCES)) {
                r = errno == ENOENT || errno == ENOTDIR
                            ? 0
                            : util_fail(err, errno, NULL, "open %s", list);
                if (dfd >= 0)
                        close(dfd);
                return r;
        }
        snprintf(copy, sizeof(copy), LISTS "/%zu", i);
        if (mkdir(copy, 0755) < 0)
                r = util_fail(err, errno, NULL, "mkdir %s", copy);
        while (r == 0 && d && (de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    loop_entry(dirfd(d), de->d_name) ||
                    snprintf(dst, sizeof(dst), "%s/%s", copy, de->d_name) >= (int)sizeof(dst))
                        continue;
                r = bind_root_entry(dirfd(d), de->d_name, dst, list, err);
                if (r == -ENOENT)
                        r = 0; /* the device went meanwhile */
        }
        if (d)
                closedir(d);
        if (r == 0 && (r = bind_mount(copy, list, RO_ATTRS | MNT_NOEXEC)) < 0)
                r = util_fail(err, r, NULL, "bind the copy of %s over it", list);
        return r;
}

/* 1 when field (from 0) of the whitespace-separated line is a loop device's name. */
static int loop_line(const char *line, int field) {
        const char *p = line;
        int i;

        for (i = 0; i <= field; i++) {
                p += strspn(p, " \t");
                if (i == field)
                        return loop_name(p);
                p += strcspn(p, " \t\n");
        }
        return 0;
}

/* Makes LISTS/t->copy a copy of the table t->path without its loop devices' lines (see
 * device_tables), and binds it over the table. A table the host lacks, or that no
 * command could read, is left out. */
static int copy_device_table(const struct device_table *t, struct util_err *err) {
        char copy[64], *line = NULL;
        size_t cap = 0;
        FILE *in = fopen(t->path, "re"), *out = NULL;
        int fd, r = 0;

        if (!in)
                return unreachable(errno) ? 0 : util_fail(err, errno, NULL, "open %s", t->path);
        snprintf(copy, sizeof(copy), LISTS "/%s", t->copy);
        fd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0 || !(out = fdopen(fd, "we"))) {
                r = util_fail(err, errno, NULL, "create %s", copy);
                if (fd >= 0)
                        close(fd);
        }
        while (r == 0 && t->name_field >= 0 && getline(&line, &cap, in) > 0)
                if (!loop_line(line, t->name_field))
                        fputs(line, out);
        free(line);
        fclose(in);
        if (out && fclose(out) != 0 && r == 0)
                r = util_fail(err, errno, NULL, "write %s", copy);
        if (r == 0 && (r = bind_mount(copy, t->path, RO_ATTRS | MNT_NOEXEC)) < 0)
                r = util_fail(err, r, NULL, "bind the copy of %s over it", t->path);
        return r;
}

/* Step 6's block devices: each of device_lists and device_tables replaced by its copy
 * without the loop devices, the copies on one tmpfs (one filesystem for all, read-only
 * once made), whose first mount point goes again. */
static int hide_loop_devices(struct util_err *err) {
        size_t i;
        int r = 0;

        if (mkdir(LISTS, 0700) < 0)
                return util_fail(err, errno, NULL, "mkdir " LISTS);
        if (mount("sbx-lists", LISTS, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=64k") < 0) {
                r = util_fail(err, errno, NULL, "mount tmpfs on " LISTS);
                (void)rmdir(LISTS);
                return r;
        }
        for (i = 0; r == 0 && device_lists[i]; i++)
                r = copy_device_list(device_lists[i], i, err);
        for (i = 0; r == 0 && i < sizeof(device_tables) / sizeof(device_tables[0]); i++)
                r = copy_device_table(&device_tables[i], err);
        /* Read-only as a filesystem: every bind of it. */
        if (r == 0 && mount("none", LISTS, "none",
                            MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                r = util_fail(err, errno, NULL, "make the copies of the device lists read-only");
        /* The binds keep the filesystem; its first mount point goes. */
        if ((umount2(LISTS, MNT_DETACH) < 0 || rmdir(LISTS) < 0) && r == 0)
                r = util_fail(err, errno, NULL, "remove " LISTS);
        return r;
}

/* 1 when a mount on a policy path failed (r) because the host removed or replaced the
 * path or a parent after it was looked at (as st): it is gone, another object or changed
 * now (a host's rmdir or unlink also detaches this namespace's mounts on it). The path
 * is then looked at again (apply_list). Anything else (no /dev/null to bind, say) is a
 * failure. */
static int host_raced(int r, const char *path, const struct stat *st) {
        struct stat now;

        /* EINVAL: made read-only after it was mounted on, the name was no mount's root
         * any more: the host's new object. */
        if (r != -ENOENT && r != -ENOTDIR && r != -EINVAL)
                return 0;
        /* The time of the last change too: a name removed and made again can get the
         * same inode number at once (ext4 does). */
        return stat(path, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino ||
               now.st_ctim.tv_sec != st->st_ctim.tv_sec ||
               now.st_ctim.tv_nsec != st->st_ctim.tv_nsec;
}

/* How many times a policy path is looked at again before the create fails. */
#define HOST_RACE_TRIES 8

/* The mount path lies on (its id), or 0 when the kernel cannot say. */
static uint64_t mount_of(const char *path) {
        struct statx stx;

        if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) < 0 ||
            !(stx.stx_mask & STATX_MNT_ID))
                return 0;
        return stx.stx_mnt_id;
}

/* 1 when the absolute path lies on the same mount as its directory (it is not a mount's
 * root: not covered by a mount of its own); 0 when it is one, or for / or when the
 * kernel cannot say. */
static int on_parent_mount(const char *path) {
        char parent[SBX_PATH_MAX_BYTES + 1];
        uint64_t here, above;
        char *slash;

        if (strlen(path) > SBX_PATH_MAX_BYTES || !(slash = strrchr(strcpy(parent, path), '/')) ||
            slash[1] == '\0')
                return 0;
        slash[slash == parent ? 1 : 0] = '\0';
        here = mount_of(path);
        above = mount_of(parent);
        return here != 0 && here == above;
}

/* Pins the directories between path and the root of the mount it lies on, each bound
 * onto itself (what is mounted below comes along): a mount point cannot be renamed or
 * removed, so sandboxed code cannot move a protected path's parent aside and put one of
 * its own in its place (a .git of its own with hooks and config for the host's git to
 * run, a conf/ with its own settings), which the read-only mount on the path alone did
 * not prevent. Outermost first, so that each bind carries the ones below it. Returns 0 or
 * a negative errno (err filled unless ENOENT or ENOTDIR). */
static int pin_ancestors(const char *path, const char *what, struct util_err *err) {
        char dir[SBX_PATH_MAX_BYTES + 1];
        size_t top = 0, len;
        char *slash;
        int r;

        if (strlen(path) > SBX_PATH_MAX_BYTES)
                return util_fail(err, ENAMETOOLONG, NULL, "%s %s", what, path);
        /* The outermost directory above path that is no mount's root: dir[0..top). */
        strcpy(dir, path);
        while ((slash = strrchr(dir, '/')) && slash != dir) {
                *slash = '\0';
                if (!on_parent_mount(dir))
                        break;
                top = (size_t)(slash - dir);
        }
        /* Then each directory from there down to path's own. */
        len = (size_t)(strrchr(path, '/') - path);
        while (top > 0 && top <= len) {
                memcpy(dir, path, top);
                dir[top] = '\0';
                r = bind_mount(dir, dir, 0);
                if (r < 0 && (r == -ENOENT || r == -ENOTDIR))
                        return r; /* the caller tells a race from a failure */
                if (r < 0)
                        return util_fail(err, r, NULL, "%s %s: pin %s", what, path, dir);
                slash = strchr(path + top + 1, '/');
                top = slash ? (size_t)(slash - path) : 0;
        }
        return 0;
}

/* One path of a policy list: 0 done (or nothing to do), -EAGAIN when the host removed or
 * replaced it meanwhile (look again), another negative errno with err filled. */
typedef int apply_one_fn(const char *p, const char *what, int *shared_fd, struct util_err *err,
                         struct util_warnings *warn);

/* Applies one to each path of list, each looked at again while the host races it (up to
 * HOST_RACE_TRIES times: then the create fails, saying so). *shared_fd is one's to keep
 * between paths. */
static int apply_list(char *const *list, size_t n, const char *what, apply_one_fn *one,
                      int *shared_fd, struct util_err *err, struct util_warnings *warn) {
        int r = 0, tries;
        size_t i;

        for (i = 0; r == 0 && i < n; i++) {
                tries = 0;
                do
                        r = one(list[i], what, shared_fd, err, warn);
                while (r == -EAGAIN && ++tries < HOST_RACE_TRIES);
                if (r == -EAGAIN)
                        r = util_fail(err, r, NULL,
                                      "%s %s: removed or replaced on the host %d times while the "
                                      "sandbox was made; try again",
                                      what, list[i], HOST_RACE_TRIES);
        }
        return r;
}

/* The start of each apply_one_fn: 1 when p is there to mount on (st filled, its parents
 * pinned), 0 when there is nothing to do, or a negative errno. Its parents are pinned
 * too: a parent moved aside in a writable path would take the mount along and leave the
 * name bare for the host's next version of the file. */
static int prepare_one(const char *p, const char *what, const char *not_done, struct stat *st,
                       struct util_err *err, struct util_warnings *warn) {
        int r;

        if (stat(p, st) < 0) {
                if (!unreachable(errno))
                        util_warn(warn, "%s %s: %s; %s", what, p, strerror(errno), not_done);
                return 0;
        }
        r = pin_ancestors(p, what, err);
        if (r == -ENOENT || r == -ENOTDIR)
                return host_raced(r, p, st) ? -EAGAIN
                                            : util_fail(err, r, NULL, "%s %s: pin", what, p);
        return r < 0 ? r : 1;
}

/* The end of each apply_one_fn: r of its mount on p (looked at as st), with the step
 * named for an error. */
static int finish_one(int r, const char *p, const struct stat *st, const char *what,
                      const char *step, struct util_err *err) {
        if (r >= 0)
                return 0;
        if (host_raced(r, p, st))
                return -EAGAIN;
        return util_fail(err, r, NULL, "%s %s: %s", what, p, step);
}

/* Re-binds an existing path read-only (denied_write_paths, protected_paths). */
static int read_only_one(const char *p, const char *what, int *shared_fd, struct util_err *err,
                         struct util_warnings *warn) {
        struct stat st;
        int r = prepare_one(p, what, "not made read-only", &st, err, warn);

        if (r <= 0)
                return r;
        return finish_one(bind_mount(p, p, RO_ATTRS), p, &st, what, "bind read-only", err);
}

/* Mounts the empty tmpfs hidden directories share at HIDDEN and opens it (*ret_fd). */
static int shared_empty_tmpfs(int *ret_fd) {
        if (mkdir(HIDDEN, 0700) < 0)
                return -errno;
        if (mount("sbx-hidden", HIDDEN, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=4k") < 0 ||
            (*ret_fd = open(HIDDEN, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                int r = -errno;
                (void)umount2(HIDDEN, MNT_DETACH);
                (void)rmdir(HIDDEN);
                return r;
        }
        return 0;
}

/* Hides a path: a directory under an empty read-only tmpfs, a file under /dev/null.
 * Unless *shared_fd is -2, the directories share one tmpfs (*shared_fd, made at the
 * first): a filesystem costs the host a superblock and its shrinker, whose share of
 * every memory cgroup's shrinker table grows with all the filesystems alive, so one per
 * hidden directory of each sandbox would add up. It is read-only as a filesystem, so no
 * bind of it can be written. */
static int hide_one(const char *p, const char *what, int *shared_fd, struct util_err *err,
                    struct util_warnings *warn) {
        struct stat st;
        int r = prepare_one(p, what, "not hidden", &st, err, warn);

        if (r <= 0)
                return r;
        if (!S_ISDIR(st.st_mode)) {
                /* Reads give nothing; writes vanish (a device ignores MS_RDONLY). */
                r = mount("/dev/null", p, "none", MS_BIND, NULL) < 0 ? -errno : 0;
                if (r == 0)
                        r = mnt_set_attr(p, MNT_RDONLY | MNT_NOSUID | MNT_NOEXEC, false);
                return finish_one(r, p, &st, what, "bind /dev/null", err);
        }
        if (*shared_fd == -1) {
                r = shared_empty_tmpfs(shared_fd);
                if (r < 0)
                        return util_fail(err, r, NULL, "%s %s: mount empty tmpfs at %s", what, p,
                                         HIDDEN);
        }
        if (*shared_fd >= 0)
                r = bind_fd(*shared_fd, p, MNT_RDONLY | MNT_NOSUID | MNT_NODEV | MNT_NOEXEC);
        else
                r = mount("sbx-hidden", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=0755,size=4k") < 0
                            ? -errno
                            : 0;
        return finish_one(r, p, &st, what, "mount empty tmpfs", err);
}

static int apply_read_only(char *const *list, size_t n, const char *what, struct util_err *err,
                           struct util_warnings *warn) {
        int none = -2;
        return apply_list(list, n, what, read_only_one, &none, err, warn);
}

/* Hides each path of list; share: the directories under one tmpfs (while the view is
 * built: its root is still writable). */
static int apply_hidden(char *const *list, size_t n, bool share, struct util_err *err,
                        struct util_warnings *warn) {
        int shared_fd = share ? -1 : -2;
        int r = apply_list(list, n, "denied_read_path", hide_one, &shared_fd, err, warn);

        if (shared_fd >= 0) {
                close(shared_fd);
                /* The binds keep the filesystem; its first mount point goes. */
                if (umount2(HIDDEN, MNT_DETACH) < 0 || rmdir(HIDDEN) < 0)
                        r = r < 0 ? r : util_fail(err, errno, NULL, "remove %s", HIDDEN);
        }
        return r;
}

int mnt_reapply(bool hide, const char *path, struct stat *ret_bare, struct util_err *err) {
        char own[SBX_PATH_MAX_BYTES + 1];
        char *const list[] = {own};
        struct util_warnings warn;
        int r;

        if (path[0] != '/' || strlen(path) > SBX_PATH_MAX_BYTES)
                return util_fail(err, EINVAL, NULL, "reapply %s: not an absolute path", path);
        /* Still covered (or gone): nothing to do. */
        if (!on_parent_mount(path) || stat(path, ret_bare) < 0)
                return 0;
        strcpy(own, path);
        memset(&warn, 0, sizeof(warn));
        r = hide ? apply_hidden(list, 1, false, err, &warn)
                 : apply_read_only(list, 1, "read-only path", err, &warn);
        return r < 0 ? r : 1;
}

/* The idmap user namespace of one pair of ids (writable paths bound with the same ids
 * share it). */
struct idmap {
        uid_t uid;
        gid_t gid;
        int fd; /* -errno: it could not be made */
};

/* The host objects the sandbox's own part of the view is made from, opened in the host's
 * tree (descriptors of this mount namespace, valid after the pivot). */
struct sources {
        int ws_fd; /* -1: no workspace_dir */
        int *w_fd; /* one per writable path */
        bool *w_dir;
        size_t n;
        struct idmap *maps; /* the idmap user namespaces made, n_maps of them */
        size_t n_maps;
};

static void sources_close(struct sources *src) {
        size_t i;

        if (src->ws_fd >= 0)
                close(src->ws_fd);
        for (i = 0; src->w_fd && i < src->n; i++)
                if (src->w_fd[i] >= 0)
                        close(src->w_fd[i]);
        for (i = 0; src->maps && i < src->n_maps; i++)
                if (src->maps[i].fd >= 0)
                        close(src->maps[i].fd);
        free(src->w_fd);
        free(src->w_dir);
        free(src->maps);
        memset(src, 0, sizeof(*src));
        src->ws_fd = -1;
}

/* Step 2: the host's / and root_dir, while the host's / is still our root (root_dir
 * checked against the object the daemon opened for the caller). */
static int open_root(const struct mnt_config *cfg, struct mnt_host *host, int *ret_root_fd,
                     struct util_err *err) {
        const char *root_dir = cfg->root_dir && cfg->root_dir[0] ? cfg->root_dir : "/";

        host->fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host->fd < 0)
                return util_fail(err, errno, NULL, "open the host's /");
        return open_host(host, "root_dir", root_dir, cfg->root_object, true, ret_root_fd, err);
}

/* Opens the workspace and each writable path in the host's tree, checking the objects
 * the daemon opened for the caller, and makes the placeholders. */
static int open_sources(const struct mnt_config *cfg, const struct mnt_host *host,
                        struct sources *src, struct util_err *err) {
        size_t i;
        int r = 0;

        src->n = cfg->n_writable_paths;
        src->w_fd = calloc(src->n + 1, sizeof(*src->w_fd));
        src->w_dir = calloc(src->n + 1, sizeof(*src->w_dir));
        src->maps = calloc(src->n + 1, sizeof(*src->maps));
        if (!src->w_fd || !src->w_dir || !src->maps)
                return util_fail(err, ENOMEM, NULL, "open writable paths");
        for (i = 0; i < src->n; i++)
                src->w_fd[i] = -1;
        if (cfg->workspace_dir && cfg->workspace_dir[0] && !cfg->workspace_tmpfs_bytes &&
            !cfg->workspace_mount)
                r = open_host(host, "workspace_dir", cfg->workspace_dir, NULL, true, &src->ws_fd,
                              err);
        for (i = 0; r == 0 && i < src->n; i++) {
                struct stat st;
                if (cfg->writable_mounts) {
                        src->w_dir[i] = cfg->writable_dirs[i]; /* stage 0 opened it */
                        continue;
                }
                r = open_host(host, "writable path", cfg->writable_paths[i],
                              cfg->writable_objects ? &cfg->writable_objects[i] : NULL, false,
                              &src->w_fd[i], err);
                if (r == 0 && fstat(src->w_fd[i], &st) < 0)
                        r = util_fail(err, errno, NULL, "writable path %s", cfg->writable_paths[i]);
                if (r == 0)
                        src->w_dir[i] = S_ISDIR(st.st_mode);
        }
        if (r == 0 && !cfg->writable_mounts)
                r = make_placeholders(cfg, host, err);
        return r;
}

/* /workspace as a tmpfs of the disk limit's size and inodes, the commands' user's: the
 * limit where the daemon can neither make a filesystem image nor set a project quota. */
int mnt_tmpfs_opts(uint64_t bytes, uint64_t inodes, char *buf, size_t len) {
        int n = snprintf(buf, len, "mode=0755,size=%llu", (unsigned long long)bytes);

        if (inodes && (size_t)n < len)
                n += snprintf(buf + n, len - (size_t)n, ",nr_inodes=%llu",
                              (unsigned long long)inodes);
        return n;
}

static int workspace_tmpfs(const struct mnt_config *cfg, struct util_err *err) {
        char opts[128], src[SBX_PATH_MAX_BYTES + sizeof(OLDROOT) + 16];

        /* An image's sandbox: the tmpfs stage 0 made for its writable root holds the
         * workspace too (image.h), so that one limit holds both. */
        if (cfg->image_disk_dir) {
                snprintf(src, sizeof(src), OLDROOT "%s/workspace", cfg->image_disk_dir);
                if (bind_mount(src, "/workspace", MNT_NOSUID | MNT_NODEV) < 0)
                        return util_fail(err, errno, NULL, "bind %s on /workspace", src);
        } else {
                mnt_tmpfs_opts(cfg->workspace_tmpfs_bytes, cfg->workspace_tmpfs_inodes, opts,
                               sizeof(opts));
                if (mount("sbx-workspace", "/workspace", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                        return util_fail(err, errno, NULL, "mount tmpfs on /workspace (%s)",
                                         opts);
        }
        if (chown("/workspace", cfg->workspace_uid, cfg->workspace_gid) < 0)
                return util_fail(err, errno, NULL, "chown /workspace");
        return 0;
}

/* Steps 4 to 7: the sandbox's own /proc, the read-only root (root_fd), /sys, /dev,
 * /tmp, /run and the mount point /workspace. */
static int build_base(const struct mnt_config *cfg, int root_fd, struct util_err *err,
                      struct util_warnings *warn) {
        uint64_t tmp_bytes = cfg->tmp_bytes ? cfg->tmp_bytes : SBX_DEFAULT_TMP_BYTES;
        const char *root_dir = cfg->root_dir && cfg->root_dir[0] ? cfg->root_dir : "/";
        char opts[64];
        int r;

        /* 4. /proc first: the fallback of mnt_set_attr reads /proc/self/mountinfo, and
         * mounts are made from /proc/self/fd. */
        r = setup_proc(err);
        if (r < 0)
                return r;

        /* 5. The read-only root (an image's overlay is the root already). */
        r = cfg->image_root ? 0 : bind_root_entries(root_fd, root_dir, err);
        if (r < 0)
                return r;

        /* 6. /sys, read-only: the host's (a new sysfs would need a network namespace
         * owned by our user namespace, and shows the same devices anyway), with only the
         * sandbox's own cgroups, and no loop device there or in /proc. */
        if (mkdir_mp("/sys", 0555) < 0)
                return util_fail(err, errno, NULL, "mkdir /sys");
        r = bind_mount(OLDROOT "/sys", "/sys", RO_ATTRS | MNT_NOEXEC);
        if (r < 0)
                return util_fail(err, r, NULL, "bind /sys read-only");
        r = setup_cgroupfs(cfg, err);
        if (r < 0)
                return r;
        r = hide_loop_devices(err);
        if (r < 0)
                return r;

        /* 7. /dev, /tmp, /run. */
        r = setup_dev(tmp_bytes, cfg->ptys, err, warn);
        if (r < 0)
                return r;
        if (mkdir_mp("/tmp", 01777) < 0)
                return util_fail(err, errno, NULL, "mkdir /tmp");
        snprintf(opts, sizeof(opts), "mode=1777,size=%llu", (unsigned long long)tmp_bytes);
        if (mount("sbx-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return util_fail(err, errno, NULL, "mount tmpfs on /tmp (%s)", opts);
        if (mkdir_mp("/run", 0755) < 0)
                return util_fail(err, errno, NULL, "mkdir /run");
        if (mkdir_mp("/workspace", 0755) < 0)
                return util_fail(err, errno, NULL, "mkdir /workspace");
        return 0;
}

/* Step 8's mount: /workspace, read-write. */
static int attach_workspace(const struct mnt_config *cfg, const struct sources *src,
                            struct util_err *err) {
        int r;

        if (cfg->workspace_mount) {
                /* The disk's own mount (a disk image's, or the tmpfs stage 0 made for an
                 * image's root and workspace), moved here out of no namespace: the host's
                 * and every other sandbox's mount tables never list it. */
                if (syscall(SYS_move_mount, cfg->workspace_fd, "", AT_FDCWD, "/workspace",
                            MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return util_fail(err, errno, NULL, "attach the workspace's mount");
                return 0;
        }
        if (cfg->workspace_tmpfs_bytes)
                return workspace_tmpfs(cfg, err);
        if (src->ws_fd >= 0) {
                r = bind_fd(src->ws_fd, "/workspace", MNT_NOSUID | MNT_NODEV);
                if (r < 0)
                        return util_fail(err, r, NULL, "bind workspace_dir %s on /workspace",
                                         cfg->workspace_dir);
        }
        return 0;
}

/* Step 8: /workspace, with a snapshot's workspace copied in first (seed.h): the image's
 * /workspace, opened before the workspace covers it. */
static int mount_workspace(const struct mnt_config *cfg, const struct sources *src,
                           struct util_err *err) {
        const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        int seed = -1, dst, r;

        if (cfg->seed_workspace && (seed = open("/workspace", flags)) < 0)
                return util_fail(err, errno, NULL, "open the image's /workspace to seed it");
        r = attach_workspace(cfg, src, err);
        if (r == 0 && seed >= 0) {
                dst = open("/workspace", flags);
                r = dst < 0 ? util_fail(err, errno, NULL, "open /workspace to seed it")
                            : seed_copy_tree(seed, dst, err);
                if (dst >= 0)
                        close(dst);
        }
        if (seed >= 0)
                close(seed);
        return r;
}

/* At most this many skeletons (see make_reachable) in one view. */
#define MAX_SKELETONS 32

/* Directories replaced by a skeleton, made read-only once the writable paths are in. */
struct skeletons {
        char path[MAX_SKELETONS][SBX_PATH_MAX_BYTES + 1];
        size_t n;
};

/* Root mode: a writable path below a directory that others may not search (a home of
 * mode 0700, say) would be out of the sandbox user's reach, whose rights there are
 * those of others. The topmost such directory on the way is replaced in the view by a
 * skeleton: an empty tmpfs in which the way to the writable path is made. Nothing
 * else below that directory was reachable, so nothing is lost; the writable path
 * itself is bound with the ids its owner was judged by (idmapped). */
static int make_reachable(const char *w, struct skeletons *sk, struct util_err *err) {
        char p[SBX_PATH_MAX_BYTES + 1];
        size_t len = strlen(w), i, k;
        struct stat st;

        if (len > SBX_PATH_MAX_BYTES)
                return 0;
        for (i = 1; i < len; i++) {
                if (w[i] != '/')
                        continue;
                memcpy(p, w, i);
                p[i] = '\0';
                if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
                        return 0; /* ensure_mountpoint makes the rest, or says why not */
                if (st.st_mode & S_IXOTH)
                        continue;
                for (k = 0; k < sk->n; k++)
                        if (strcmp(sk->path[k], p) == 0)
                                return 0;
                if (sk->n == MAX_SKELETONS)
                        return util_fail(err, E2BIG, NULL,
                                         "writable path %s: more than %u "
                                         "private directories above writable paths",
                                         w, MAX_SKELETONS);
                if (mount("sbx-skeleton", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=0755,size=64k") < 0)
                        return util_fail(err, errno, NULL, "writable path %s: skeleton over %s", w,
                                         p);
                strcpy(sk->path[sk->n++], p);
                return 0;
        }
        return 0;
}

/* The idmap user namespace writable path i is bound through (made for its ids when
 * no path before had them; a warning when it cannot be): its descriptor, or -errno. */
static int idmap_of(const struct mnt_config *cfg, struct sources *src, size_t i,
                    struct util_warnings *warn) {
        struct mnt_bind b = bind_of(cfg, i);
        struct idmap *m;
        size_t k;

        for (k = 0; k < src->n_maps; k++)
                if (src->maps[k].uid == b.uid && src->maps[k].gid == b.gid)
                        return src->maps[k].fd;
        m = &src->maps[src->n_maps++];
        m->uid = b.uid;
        m->gid = b.gid;
        m->fd = make_idmap_userns(cfg, b.uid, b.gid);
        if (m->fd < 0)
                util_warn(warn,
                          "writable paths: cannot make an id mapping (%s): files "
                          "the sandbox writes there belong to uid %u on the host",
                          strerror(-m->fd), (unsigned)cfg->run_uid);
        return m->fd;
}

/* An image's root: the writable path dst, followed component by component as the
 * mounts below will follow it, stays in the new root. The image's own symlinks could
 * otherwise lead it into OLDROOT (the host's tree, still there at step 9), where
 * ensure_mountpoint would create directories or a file as the sandbox's ids; a dangling
 * symlink on the way is refused too (an O_CREAT through it would make its target). */
static int image_keeps(const struct mnt_config *cfg, const char *dst, struct util_err *err) {
        char p[SBX_PATH_MAX_BYTES + 1], real[PATH_MAX];
        size_t len = strlen(dst), i;
        struct stat st;

        if (!cfg->image_root || len > SBX_PATH_MAX_BYTES)
                return 0;
        for (i = 1; i <= len; i++) {
                if (dst[i] != '/' && dst[i] != '\0')
                        continue;
                memcpy(p, dst, i);
                p[i] = '\0';
                if (lstat(p, &st) < 0)
                        return 0; /* ensure_mountpoint makes the rest, with mkdir */
                if (!realpath(p, real))
                        return util_fail(err, errno, "the image's symlinks must stay in it",
                                         "writable path %s: the image leads it out of the "
                                         "image at %s (%s)",
                                         dst, p, errno == ENOENT ? "a symlink to nowhere"
                                                                 : "cannot be resolved");
                if (strcmp(real, OLDROOT) == 0 || below(OLDROOT, real))
                        return util_fail(err, ELOOP, "the image's symlinks must stay in it",
                                         "writable path %s: the image leads it out of the "
                                         "image at %s",
                                         dst, p);
        }
        return 0;
}

/* Writable path i prepared by mnt_prepare_writable, attached at its path. */
static int attach_prepared(const struct mnt_config *cfg, size_t i, bool dir,
                           struct skeletons *sk, struct util_err *err) {
        const char *dst = cfg->writable_paths[i];
        int r = image_keeps(cfg, dst, err);

        if (r == 0)
                r = make_reachable(dst, sk, err);
        if (r < 0)
                return r;
        r = ensure_mountpoint(dst, dir);
        if (r < 0)
                return util_fail(err, r, NULL, "writable path %s: mount point", dst);
        if (syscall(SYS_move_mount, cfg->writable_mounts[i], "", AT_FDCWD, dst,
                    MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return util_fail(err, errno, NULL, "writable path %s: attach", dst);
        return 0;
}

int mnt_prepare_writable(const struct mnt_config *cfg, int *ret_fds, bool *ret_dirs,
                         struct util_err *err, struct util_warnings *warn) {
        struct mnt_config own = *cfg;
        struct mnt_host host = {.fd = -1};
        struct sources src = {.ws_fd = -1};
        size_t i, n = cfg->n_writable_paths;
        int r;

        for (i = 0; i < n; i++)
                ret_fds[i] = -1;
        own.writable_mounts = NULL;
        own.workspace_mount = true; /* the workspace is not ours to open here */
        host.fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = host.fd < 0 ? util_fail(err, errno, NULL, "open the host's /") : 0;
        if (r == 0)
                r = open_sources(&own, &host, &src, err);
        for (i = 0; r == 0 && i < n; i++) {
                int userns_fd = own.idmap ? idmap_of(&own, &src, i, warn) : -EINVAL;
                ret_dirs[i] = src.w_dir[i];
                ret_fds[i] = userns_fd >= 0 ? clone_tree(src.w_fd[i], userns_fd) : -EINVAL;
                if (ret_fds[i] < 0 && userns_fd >= 0)
                        util_warn(warn,
                                  "writable path %s: its filesystem cannot map ids (%s): "
                                  "files the sandbox writes there belong to uid %u on the "
                                  "host, and yours there are not its own",
                                  cfg->writable_paths[i], strerror(-ret_fds[i]),
                                  (unsigned)cfg->run_uid);
                if (ret_fds[i] < 0)
                        ret_fds[i] = clone_tree(src.w_fd[i], -1);
                if (ret_fds[i] < 0)
                        r = util_fail(err, -ret_fds[i], NULL, "writable path %s: clone",
                                      cfg->writable_paths[i]);
        }
        sources_close(&src);
        mnt_host_close(&host);
        for (i = 0; r < 0 && i < n; i++)
                if (ret_fds[i] >= 0) {
                        close(ret_fds[i]);
                        ret_fds[i] = -1;
                }
        return r;
}

/* Step 9, the writable paths: idmapped where asked and possible, else a plain bind. */
static int bind_writable(const struct mnt_config *cfg, struct sources *src, struct util_err *err,
                         struct util_warnings *warn) {
        static struct skeletons sk;
        size_t i;
        int r, userns_fd;

        sk.n = 0;
        for (i = 0; i < src->n; i++) {
                const char *dst = cfg->writable_paths[i];
                if (cfg->writable_mounts) {
                        r = attach_prepared(cfg, i, src->w_dir[i], &sk, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = image_keeps(cfg, dst, err);
                if (r < 0)
                        return r;
                userns_fd = cfg->idmap ? idmap_of(cfg, src, i, warn) : -EINVAL;
                r = cfg->idmap ? make_reachable(dst, &sk, err) : 0;
                if (r < 0)
                        return r;
                r = ensure_mountpoint(dst, src->w_dir[i]);
                if (r < 0)
                        return util_fail(err, r, "it must exist in root_dir",
                                         "writable path %s: mount point", dst);
                r = userns_fd >= 0 ? bind_idmapped(src->w_fd[i], dst, userns_fd) : -EINVAL;
                if (r < 0 && userns_fd >= 0)
                        util_warn(warn,
                                  "writable path %s: its filesystem cannot map ids (%s): "
                                  "files the sandbox writes there belong to uid %u on the "
                                  "host, and yours there are not its own",
                                  dst, strerror(-r), (unsigned)cfg->run_uid);
                if (r < 0)
                        r = bind_fd(src->w_fd[i], dst, MNT_NOSUID | MNT_NODEV);
                if (r < 0)
                        return util_fail(err, r, NULL, "writable path %s: bind", dst);
                if (bind_of(cfg, i).system_dir)
                        util_warn(warn,
                                  "writable path %s is a system directory, made writable by "
                                  "root: sandboxed code can change there what the host runs "
                                  "or serves",
                                  dst);
        }
        for (i = 0; i < sk.n; i++) {
                r = mnt_set_attr(sk.path[i], MNT_RDONLY, false);
                if (r < 0)
                        return util_fail(err, r, NULL, "make the skeleton %s read-only",
                                         sk.path[i]);
        }
        return 0;
}

/* Step 9's denials, over the permissions: denied_write_paths, the protected names and
 * the placeholders made for them read-only, then denied_read_paths hidden. */
static int apply_denials(const struct mnt_config *cfg, struct util_err *err,
                         struct util_warnings *warn) {
        size_t i;
        int r;

        r = apply_read_only(cfg->denied_write_paths, cfg->n_denied_write_paths, "denied_write_path",
                            err, warn);
        if (r == 0)
                r = apply_read_only(cfg->protected_paths, cfg->n_protected_paths, "protected_path",
                                    err, warn);
        if (r == 0)
                r = apply_read_only(cfg->protected_mkdirs, cfg->n_protected_mkdirs,
                                    "protected_path", err, warn);
        for (i = 0; r == 0 && i < cfg->n_protected_files; i++) {
                char *const one[] = {(char *)(uintptr_t)cfg->protected_files[i].path};
                r = apply_read_only(one, 1, "protected_path", err, warn);
        }
        if (r == 0)
                r = apply_hidden(cfg->denied_read_paths, cfg->n_denied_read_paths, true, err, warn);
        return r;
}

/* Step 10: lets go of the host's tree (src is closed and emptied first). */
static int drop_old_root(struct sources *src, struct mnt_host *host, struct util_err *err) {
        sources_close(src);
        mnt_host_close(host);
        if (umount2(OLDROOT, MNT_DETACH) < 0)
                return util_fail(err, errno, NULL, "detach the old root");
        if (rmdir(OLDROOT) < 0)
                return util_fail(err, errno, NULL, "rmdir " OLDROOT);
        return 0;
}

/* Step 12: the root (unless an image's, writable) and /dev read-only. */
static int freeze_view(const struct mnt_config *cfg, struct util_err *err) {
        int r = mnt_set_attr("/dev", MNT_RDONLY, false);

        if (r < 0)
                return util_fail(err, r, NULL, "make /dev read-only");
        if (cfg->image_root)
                return 0;
        r = mnt_set_attr("/", RO_ATTRS, false);
        if (r < 0)
                return util_fail(err, r, NULL, "make / read-only");
        return 0;
}

void mnt_host_close(struct mnt_host *host) {
        if (host->fd >= 0)
                close(host->fd);
        host->fd = -1;
}

/* The mounts strictly below dir (canonical, in this mount namespace's terms) and below
 * OLDROOT's copy of it, detached: other sandboxes' disk images on the daemon's
 * sandboxes directory, which neither the view (hidden there anyway) nor the host's
 * tree a spare keeps may hold alive once the daemon unmounts them. The host's tree
 * keeps the mount on own (the sandbox's own workspace, NULL: none), which /workspace
 * is bound from. */
static void detach_below(const char *dir, const char *own) {
        char old[SBX_PATH_MAX_BYTES + sizeof(OLDROOT) + 1],
                keep[SBX_PATH_MAX_BYTES + sizeof(OLDROOT) + 1], *line = NULL;
        size_t cap = 0;
        FILE *f;

        if ((size_t)snprintf(old, sizeof(old), OLDROOT "%s", dir) >= sizeof(old) ||
            (size_t)snprintf(keep, sizeof(keep), OLDROOT "%s", own ? own : "") >= sizeof(keep))
                return;
        f = fopen("/proc/self/mountinfo", "re");
        /* Parents come first: one detached takes its submounts with it, and the
         * umount2 of those then fails harmlessly. */
        while (f && getline(&line, &cap, f) > 0) {
                struct mountinfo_line m;
                if (mountinfo_parse(line, &m) == 0 && strcmp(m.point, keep) != 0 &&
                    (below(dir, m.point) || below(old, m.point)))
                        (void)umount2(m.point, MNT_DETACH);
        }
        free(line);
        if (f)
                fclose(f);
}

/* Steps 1 and 2: every mount private; the host's / and root_dir opened while the
 * host's / is still our root. */
static int open_host_tree(const struct mnt_config *cfg, struct mnt_host *host, int *ret_root_fd,
                          struct util_err *err) {
        host->fd = -1;
        host->pivoted = false;
        /* 1. Nothing we mount propagates to the host, nothing the host mounts later
         * propagates to us. */
        if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
                return util_fail(err, errno, NULL, "make every mount private");
        return open_root(cfg, host, ret_root_fd, err);
}

/* Steps 3 to 7: the new root with the host's tree at /.sbx-oldroot (what lies below
 * the daemon's sandboxes directory let go of), /proc, the read-only root, /sys, /dev,
 * /tmp, /run. Closes root_fd. */
static int pivot_and_base(const struct mnt_config *cfg, struct mnt_host *host, int root_fd,
                          struct util_err *err, struct util_warnings *warn) {
        int r = pivot_to_tmpfs(cfg->image_root ? cfg->root_mount_fd : -1, err);

        if (r == 0)
                host->pivoted = true;
        if (r == 0)
                r = build_base(cfg, root_fd, err, warn);
        if (r == 0 && cfg->sandboxes_dir && cfg->sandboxes_dir[0])
                detach_below(cfg->sandboxes_dir, cfg->workspace_dir);
        if (root_fd >= 0)
                close(root_fd);
        return r;
}

/* Steps 8 to 12, from the sources opened: /workspace, the writable paths, the denials,
 * the host's tree let go of, the user, the freeze. */
static int finish_view(const struct mnt_config *cfg, struct mnt_host *host, struct sources *src,
                       struct util_err *err, struct util_warnings *warn) {
        /* 8. /workspace, read-write. */
        int r = mount_workspace(cfg, src, err);

        /* 9. Permissions, then denials over them. */
        if (r == 0)
                r = bind_writable(cfg, src, err, warn);
        if (r == 0)
                r = apply_denials(cfg, err, warn);

        /* 10. Let go of the host's tree. */
        if (r == 0)
                r = drop_old_root(src, host, err);

        /* 11. The commands' user gets a name, from what the view holds now. */
        if (r == 0 && cfg->user)
                r = user_install(cfg->user, err, warn);

        /* 12. Freeze the root and /dev. */
        if (r == 0)
                r = freeze_view(cfg, err);
        return r;
}

int mnt_view_base(const struct mnt_config *cfg, struct mnt_host *host, struct util_err *err,
                  struct util_warnings *warn) {
        int root_fd = -1, r = open_host_tree(cfg, host, &root_fd, err);

        return r < 0 ? r : pivot_and_base(cfg, host, root_fd, err, warn);
}

int mnt_view_finish(const struct mnt_config *cfg, struct mnt_host *host, struct util_err *err,
                    struct util_warnings *warn) {
        struct sources src = {.ws_fd = -1};
        /* The workspace and the writable paths, opened in the host's tree kept. */
        int r = open_sources(cfg, host, &src, err);

        if (r == 0)
                r = finish_view(cfg, host, &src, err, warn);
        sources_close(&src);
        return r;
}

int mnt_build_view(const struct mnt_config *cfg, struct util_err *err, struct util_warnings *warn) {
        struct sources src = {.ws_fd = -1};
        struct mnt_host host;
        int root_fd = -1, r = open_host_tree(cfg, &host, &root_fd, err);

        /* In one go, the workspace and the writable paths are opened before the pivot,
         * by the names the host gives them now. */
        if (r == 0)
                r = open_sources(cfg, &host, &src, err);
        if (r == 0)
                r = pivot_and_base(cfg, &host, root_fd, err, warn);
        else if (root_fd >= 0)
                close(root_fd);
        if (r == 0)
                r = finish_view(cfg, &host, &src, err, warn);
        sources_close(&src);
        mnt_host_close(&host);
        return r;
}
