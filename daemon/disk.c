/* disk.c: the workspace's size limit; see disk.h.
 *
 * Why an ext4 image: e2fsprogs is on every distribution, mke2fs formats a sparse file
 * of any size in 10-20 ms (no journal: a workspace does not outlive its sandbox, so
 * there is nothing to replay; lazy inode tables; no discard), and ext4 counts blocks and
 * inodes exactly as a quota would, with ENOSPC at the limit. The image is sparse: it
 * takes on the host only what the sandbox wrote. */
#include "disk.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

/* Where mke2fs is looked for (the daemon's PATH is not trusted for it). */
static const char *const mkfs_paths[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs", "/usr/bin/mke2fs",
                                         NULL};

/* Inodes ext4 keeps for itself (1-10, and lost+found's, which is removed). */
#define EXT4_OWN_INODES 16u

/* Free space below this counts as full on any filesystem (tmpfs and a project quota
 * refuse a write only when less than a page or a block is left). */
#define FULL_MARGIN_BYTES (64u * 1024u)

/* How often a free loop device is asked for when another process takes it first. */
#define LOOP_TRIES 8

enum disk_mech disk_choose(const struct disk_host *h) {
        if (!h->rootless && h->prjquota)
                return DISK_MECH_QUOTA;
        if (!h->rootless && h->loop && h->mkfs)
                return DISK_MECH_IMAGE;
        return DISK_MECH_TMPFS;
}

int disk_allows(const struct disk_host *h, enum disk_mech mech) {
        switch (mech) {
        case DISK_MECH_QUOTA:
                return !h->rootless && h->prjquota;
        case DISK_MECH_IMAGE:
                return !h->rootless && h->loop && h->mkfs;
        case DISK_MECH_TMPFS:
                return 1;
        case DISK_MECH_NONE:
        default:
                return 0;
        }
}

Sbx__V1__Enforcement disk_enforcement(enum disk_mech mech) {
        switch (mech) {
        case DISK_MECH_QUOTA:
                return SBX__V1__ENFORCEMENT__PROJECT_QUOTA;
        case DISK_MECH_IMAGE:
                return SBX__V1__ENFORCEMENT__FILESYSTEM_IMAGE;
        case DISK_MECH_TMPFS:
                return SBX__V1__ENFORCEMENT__TMPFS_SIZE;
        case DISK_MECH_NONE:
        default:
                return SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE;
        }
}

/* The power of 1024 of unit u (its first letter), or -1. */
static int unit_shift(char u) {
        switch (tolower((unsigned char)u)) {
        case 'k':
                return 10;
        case 'm':
                return 20;
        case 'g':
                return 30;
        case 't':
                return 40;
        default:
                return -1;
        }
}

int disk_free_bytes(const char *dir, uint64_t *ret) {
        struct statvfs v;

        if (statvfs(dir, &v) < 0)
                return -errno;
        *ret = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
        return 0;
}

int disk_parse_size(const char *s, uint64_t *ret) {
        unsigned long long v;
        const char *u;
        char *end;
        int shift = 0;

        if (!s || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno)
                return -EINVAL;
        u = end;
        if (*u && *u != 'b' && *u != 'B') {
                shift = unit_shift(*u);
                if (shift < 0)
                        return -EINVAL;
                u++;
                if (*u == 'i' || *u == 'I')
                        u++;
        }
        if (*u == 'b' || *u == 'B')
                u++;
        if (*u)
                return -EINVAL;
        if (shift && v > (UINT64_MAX >> shift))
                return -EINVAL;
        *ret = (uint64_t)v << shift;
        return 0;
}

static const char *find_mkfs(void) {
        size_t i;
        for (i = 0; mkfs_paths[i]; i++)
                if (access(mkfs_paths[i], X_OK) == 0)
                        return mkfs_paths[i];
        return NULL;
}

static int quotactl_on(int fd, int cmd, uint32_t id, void *addr) {
        return (int)syscall(SYS_quotactl_fd, fd, QCMD(cmd, PRJQUOTA), id, addr);
}

/* 1 when the filesystem of dir enforces project quota limits. */
static int enforces_prjquota(const char *dir) {
        struct fs_quota_statv st;
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

        if (fd < 0)
                return 0;
        memset(&st, 0, sizeof(st));
        st.qs_version = FS_QSTATV_VERSION1;
        r = quotactl_on(fd, Q_XGETQSTATV, 0, &st);
        close(fd);
        return r == 0 && (st.qs_flags & FS_QUOTA_PDQ_ENFD);
}

void disk_detect(int rootless, const char *dir, struct disk_host *ret) {
        int fd;

        memset(ret, 0, sizeof(*ret));
        ret->rootless = rootless;
        ret->mkfs = find_mkfs() != NULL;
        if (!rootless) {
                fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
                ret->loop = fd >= 0;
                if (fd >= 0)
                        close(fd);
                ret->prjquota = dir && enforces_prjquota(dir);
        }
}

/* ---- the project quota ------------------------------------------------------------------ */

/* 1 when project id is free on fd's filesystem (no limits, no usage), 0 when taken,
 * -errno. */
static int projid_free(int fd, uint32_t projid) {
        struct if_dqblk q;

        memset(&q, 0, sizeof(q));
        if (quotactl_on(fd, Q_GETQUOTA, projid, &q) < 0)
                return errno == ENOENT ? 1 : -errno; /* XFS: no such id yet */
        return !q.dqb_bhardlimit && !q.dqb_bsoftlimit && !q.dqb_ihardlimit && !q.dqb_isoftlimit &&
               !q.dqb_curspace && !q.dqb_curinodes;
}

/* A free project id of ours for the sandbox id, starting at its hash. -errno. */
static int64_t find_projid(int fd, const char *id) {
        uint32_t h = 2166136261u, i;
        const char *c;

        for (c = id; *c; c++)
                h = (h ^ (unsigned char)*c) * 16777619u;
        for (i = 0; i < DISK_PROJIDS; i++) {
                uint32_t projid = DISK_PROJID_BASE + (h + i) % DISK_PROJIDS;
                int r = projid_free(fd, projid);
                if (r < 0)
                        return r;
                if (r)
                        return projid;
        }
        return -ENOSPC;
}

/* Sets the hard limits of projid (0 and 0: none, the project freed). 0 or -errno. */
static int set_limits(int fd, uint32_t projid, uint64_t bytes, uint64_t inodes) {
        struct if_dqblk q;

        memset(&q, 0, sizeof(q));
        q.dqb_bhardlimit = (bytes + 1023) / 1024; /* in quota blocks of 1 KiB */
        q.dqb_ihardlimit = inodes;
        q.dqb_valid = QIF_LIMITS;
        return quotactl_on(fd, Q_SETQUOTA, projid, &q) < 0 ? -errno : 0;
}

/* Gives fd (a directory) project id projid, inherited by what is made below it. */
static int set_project(int fd, uint32_t projid) {
        struct fsxattr fa;

        if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
                return -errno;
        fa.fsx_projid = projid;
        fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        return ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0 ? -errno : 0;
}

int disk_quota_apply(const char *workspace, const char *id, uint64_t bytes, uint64_t inodes,
                     char *err, size_t errlen) {
        int fd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;
        int64_t projid;

        if (fd < 0) {
                snprintf(err, errlen, "cannot open %s: %s", workspace, strerror(errno));
                return -errno;
        }
        projid = find_projid(fd, id);
        if (projid < 0) {
                r = (int)projid;
                snprintf(err, errlen, "no free project id for its quota: %s", strerror(-r));
        } else if ((r = set_limits(fd, (uint32_t)projid, bytes, inodes ? inodes + 1 : 0)) < 0) {
                /* +1: the workspace directory itself is one of the project's inodes */
                snprintf(err, errlen, "cannot set the quota of project %lld: %s", (long long)projid,
                         strerror(-r));
        } else if ((r = set_project(fd, (uint32_t)projid)) < 0) {
                snprintf(err, errlen, "cannot give %s project id %lld: %s", workspace,
                         (long long)projid, strerror(-r));
                (void)set_limits(fd, (uint32_t)projid, 0, 0);
        }
        close(fd);
        return r;
}

int disk_quota_join(const char *dir, const char *workspace, char *err, size_t errlen) {
        int wfd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 0;
        struct fsxattr fa;

        if (wfd < 0 || dfd < 0 || ioctl(wfd, FS_IOC_FSGETXATTR, &fa) < 0)
                r = -errno;
        if (r == 0)
                r = set_project(dfd, fa.fsx_projid);
        if (r < 0)
                snprintf(err, errlen, "cannot give %s the project of %s: %s", dir, workspace,
                         strerror(-r));
        if (wfd >= 0)
                close(wfd);
        if (dfd >= 0)
                close(dfd);
        return r;
}

/* Clears the limits of the project of workspace when it is one of ours. */
static void quota_release(const char *workspace) {
        int fd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;
        struct fsxattr fa;

        if (fd < 0)
                return;
        if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) == 0 && fa.fsx_projid >= DISK_PROJID_BASE &&
            fa.fsx_projid - DISK_PROJID_BASE < DISK_PROJIDS) {
                r = set_limits(fd, fa.fsx_projid, 0, 0);
                if (r < 0)
                        log_warning("cannot clear the quota of project %u (%s): %s", fa.fsx_projid,
                                    workspace, strerror(-r));
        }
        close(fd);
}

/* ---- the image ------------------------------------------------------------------------ */

/* An image's name: this many random bytes in hex, then ".img". */
#define IMAGE_RANDOM_BYTES ((size_t)16)
#define IMAGE_NAME_BYTES   (2 * IMAGE_RANDOM_BYTES + 4)

/* What a record of a workspace's image points to: the image's name after this. */
#define RECORD_TARGET "../../" DISK_IMAGES_DIR "/"

/* 1 when s begins with an image's name (as image_name makes it) followed by end or
 * (a loop device's backing file whose name was removed) " (deleted)". */
static int image_name_at(const char *s) {
        size_t i;

        for (i = 0; i < 2 * IMAGE_RANDOM_BYTES; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return 0;
        return strncmp(s + i, ".img", 4) == 0 && (s[i + 4] == '\0' || s[i + 4] == ' ');
}

/* A new image's name into buf (IMAGE_NAME_BYTES + 1 bytes): random, nothing of the
 * sandbox's. 0 or -errno. */
static int image_name(char *buf) {
        unsigned char rnd[IMAGE_RANDOM_BYTES];
        ssize_t n = getrandom(rnd, sizeof(rnd), 0);
        size_t i;

        buf[0] = '\0';
        if (n != (ssize_t)sizeof(rnd))
                return n < 0 && errno > 0 ? -errno : -EIO;
        for (i = 0; i < sizeof(rnd); i++)
                snprintf(buf + 2 * i, 3, "%02x", rnd[i]);
        memcpy(buf + 2 * i, ".img", 5);
        return 0;
}

/* The length of path without its last n components ("/a/b/c", 2: 2, "/a"), or -EINVAL
 * when it has fewer. */
static int parent_len(const char *path, int n) {
        size_t len = strlen(path);

        while (n-- > 0) {
                while (len > 0 && path[len - 1] != '/')
                        len--;
                if (len <= 1)
                        return -EINVAL;
                len--; /* the slash */
        }
        return (int)len;
}

/* The record of workspace's image (workspace's directory/DISK_IMAGE_NAME) into buf. 0,
 * -EINVAL or -ENAMETOOLONG. */
static int record_path(const char *workspace, char *buf, size_t len) {
        int dir = parent_len(workspace, 1), n;

        if (dir < 0)
                return dir;
        n = snprintf(buf, len, "%.*s/%s", dir, workspace, DISK_IMAGE_NAME);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The image named name of workspace (STATE/sandboxes/ID/workspace: STATE/DISK_IMAGES_DIR/
 * name, where its record's RECORD_TARGET leads) into buf; name "": the directory. 0,
 * -EINVAL or -ENAMETOOLONG. */
static int image_path(const char *workspace, const char *name, char *buf, size_t len) {
        int state = parent_len(workspace, 3), n;

        if (state < 0)
                return state;
        n = snprintf(buf, len, "%.*s/%s%s%s", state, workspace, DISK_IMAGES_DIR, name[0] ? "/" : "",
                     name);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Names a new image for workspace: its record (a symlink, record) made first, so that
 * an image never exists without one, and its path into img. 0 or -errno with err. */
static int new_image(const char *workspace, char *record, size_t record_len, char *img,
                     size_t img_len, char *err, size_t errlen) {
        char name[IMAGE_NAME_BYTES + 1], target[sizeof(RECORD_TARGET) + IMAGE_NAME_BYTES];
        int r = record_path(workspace, record, record_len);

        if (r == 0)
                r = image_path(workspace, "", img, img_len);
        if (r < 0) {
                snprintf(err, errlen, "workspace path %s: %s", workspace, strerror(-r));
                return r;
        }
        if (mkdir(img, 0700) < 0 && errno != EEXIST) {
                r = -errno;
                snprintf(err, errlen, "cannot create %s: %s", img, strerror(errno));
                return r;
        }
        r = image_name(name);
        if (r == 0)
                r = image_path(workspace, name, img, img_len);
        if (r < 0) {
                snprintf(err, errlen, "cannot name an image: %s", strerror(-r));
                return r;
        }
        snprintf(target, sizeof(target), RECORD_TARGET "%s", name);
        if (symlink(target, record) < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot create %s: %s", record, strerror(errno));
                return r;
        }
        return 0;
}

/* The image whose record is record (of workspace) into img: 1, an image named by
 * new_image; 0, an older daemon's, the file record itself; -ENOENT, no record; -EINVAL,
 * the record is no record of ours (never followed); -errno. */
static int image_of(const char *workspace, const char *record, char *img, size_t img_len) {
        char target[sizeof(RECORD_TARGET) + IMAGE_NAME_BYTES + 1];
        struct stat st;
        ssize_t n;
        int r;

        if (lstat(record, &st) < 0)
                return -errno;
        if (S_ISREG(st.st_mode)) {
                snprintf(img, img_len, "%s", record);
                return 0;
        }
        if (!S_ISLNK(st.st_mode))
                return -EINVAL;
        n = readlink(record, target, sizeof(target) - 1);
        if (n < 0)
                return -errno;
        target[n] = '\0';
        if (strncmp(target, RECORD_TARGET, strlen(RECORD_TARGET)) != 0 ||
            !image_name_at(target + strlen(RECORD_TARGET)) ||
            strlen(target + strlen(RECORD_TARGET)) != IMAGE_NAME_BYTES)
                return -EINVAL;
        r = image_path(workspace, target + strlen(RECORD_TARGET), img, img_len);
        return r < 0 ? r : 1;
}

/* Runs mke2fs on path for spec. 0 or -errno with err. */
static int run_mkfs(const struct disk_image_spec *spec, const char *path, char *err,
                    size_t errlen) {
        const char *mkfs = find_mkfs();
        char ext[96], inodes[32], img_arg[4200];
        char *argv[16];
        char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int n = 0, st, r;

        if (!mkfs) {
                snprintf(err, errlen, "mke2fs not found (install e2fsprogs)");
                return -ENOENT;
        }
        snprintf(img_arg, sizeof(img_arg), "%s", path);
        snprintf(ext, sizeof(ext), "lazy_itable_init=1,nodiscard,root_owner=%u:%u",
                 (unsigned)spec->uid, (unsigned)spec->gid);
        argv[n++] = (char *)"mke2fs";
        argv[n++] = (char *)"-q";
        argv[n++] = (char *)"-F";
        argv[n++] = (char *)"-t";
        argv[n++] = (char *)"ext4";
        argv[n++] = (char *)"-m";
        argv[n++] = (char *)"0";
        argv[n++] = (char *)"-O";
        argv[n++] = (char *)"^has_journal,^resize_inode";
        argv[n++] = (char *)"-E";
        argv[n++] = ext;
        if (spec->inodes) {
                snprintf(inodes, sizeof(inodes), "%llu",
                         (unsigned long long)spec->inodes + EXT4_OWN_INODES);
                argv[n++] = (char *)"-N";
                argv[n++] = inodes;
        }
        argv[n++] = img_arg;
        argv[n] = NULL;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        r = posix_spawn(&pid, mkfs, &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                snprintf(err, errlen, "cannot run %s: %s", mkfs, strerror(r));
                return -r;
        }
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR) {
                        snprintf(err, errlen, "waitpid mke2fs: %s", strerror(errno));
                        return -errno;
                }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                snprintf(err, errlen, "mke2fs failed for %llu bytes, %llu inodes (status %d)",
                         (unsigned long long)spec->bytes, (unsigned long long)spec->inodes, st);
                return -EIO;
        }
        return 0;
}

/* A loop device of its own for the image open as img_fd, detached by the kernel when
 * its last user goes. Returns the device's open descriptor, its path in dev, or -errno. */
static int attach_loop(int img_fd, const char *img, char *dev, size_t devlen) {
        struct loop_config lc;
        int ctl, i, r = -EBUSY;

        ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return -errno;
        for (i = 0; i < LOOP_TRIES && r == -EBUSY; i++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                snprintf(dev, devlen, "/dev/loop%d", n);
                fd = open(dev, O_RDWR | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        break;
                }
                memset(&lc, 0, sizeof(lc));
                lc.fd = (uint32_t)img_fd;
                lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
                snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "%.*s",
                         (int)sizeof(lc.info.lo_file_name) - 1, img);
                if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
                        r = fd;
                        break;
                }
                r = -errno; /* EBUSY: another process took it first */
                close(fd);
        }
        close(ctl);
        return r;
}

/* Formats the image at img (made, of spec->bytes) and mounts it on spec->workspace. 0 or
 * -errno with err. */
/* Copies the data of src (of size bytes) into dst at the same offsets, skipping its
 * holes. 0 or -errno. */
static int copy_sparse(int src, int dst, uint64_t size) {
        off_t off = 0;

        while ((uint64_t)off < size) {
                off_t data = lseek(src, off, SEEK_DATA), hole, in, out;
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno; /* only a hole is left */
                hole = lseek(src, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                in = out = data;
                while (in < hole) {
                        ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EIO;
                }
                off = hole;
        }
        return 0;
}

/* How many templates dir holds. */
static int count_templates(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        while (d && (de = readdir(d)))
                n += de->d_name[0] != '.';
        if (d)
                closedir(d);
        return n;
}

/* Formats a template for spec at tpl (through a temporary name: a concurrent maker's
 * rename wins, both are the same). 0 or -errno with err. */
static int make_template(const struct disk_image_spec *spec, const char *tpl, char *err,
                         size_t errlen) {
        struct disk_image_spec root_owned = *spec;
        char tmp[4300];
        int fd, r;

        root_owned.uid = 0;
        root_owned.gid = 0;
        snprintf(tmp, sizeof(tmp), "%s.%d.%p", tpl, (int)getpid(), (void *)&root_owned);
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = ftruncate(fd, (off_t)spec->bytes) < 0 ? -errno : 0;
        close(fd);
        if (r == 0)
                r = run_mkfs(&root_owned, tmp, err, errlen);
        if (r == 0 && rename(tmp, tpl) < 0)
                r = -errno;
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

/* Fills img_fd with the template of spec's size and inodes, made first when missing.
 * 0; -ENOSPC when there are DISK_MAX_TEMPLATES of others; or -errno. */
static int from_template(const struct disk_image_spec *spec, int img_fd, char *err, size_t errlen) {
        char tpl[4200];
        int fd, r;

        if (mkdir(spec->templates, 0700) < 0 && errno != EEXIST)
                return -errno;
        snprintf(tpl, sizeof(tpl), "%s/%llu-%llu.img", spec->templates,
                 (unsigned long long)spec->bytes, (unsigned long long)spec->inodes);
        fd = open(tpl, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT) {
                if (count_templates(spec->templates) >= DISK_MAX_TEMPLATES)
                        return -ENOSPC;
                r = make_template(spec, tpl, err, errlen);
                if (r < 0)
                        return r;
                fd = open(tpl, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        }
        if (fd < 0)
                return -errno;
        r = copy_sparse(fd, img_fd, spec->bytes);
        close(fd);
        return r;
}

/* The filesystem of spec in img: a template's copy, else mke2fs. 0 or -errno. */
static int format(const struct disk_image_spec *spec, const char *img, int img_fd, char *err,
                  size_t errlen) {
        if (spec->templates && from_template(spec, img_fd, err, errlen) == 0)
                return 0;
        err[0] = '\0';
        return run_mkfs(spec, img, err, errlen);
}

/* The new mount API (Linux 5.2), called by number: glibc 2.36's wrappers are not on
 * every build host. */
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#define DISK_FSOPEN_CLOEXEC 0x1u
#define DISK_FSCONFIG_SET_STRING 1u
#define DISK_FSCONFIG_CMD_CREATE 6u
#define DISK_FSMOUNT_CLOEXEC 0x1u
#define DISK_MOUNT_ATTR_NOSUID 0x2u
#define DISK_MOUNT_ATTR_NODEV 0x4u
#define DISK_MOUNT_ATTR_NOATIME 0x10u

/* The ext4 filesystem of the block device dev as a mount attached nowhere (fsmount):
 * nosuid, nodev, noatime. Its descriptor, or -errno with err. */
static int mount_detached(const char *dev, char *err, size_t errlen) {
        int fs = (int)syscall(SYS_fsopen, "ext4", DISK_FSOPEN_CLOEXEC), m = -1, r = 0;

        if (fs < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot open an ext4 filesystem context: %s",
                         strerror(errno));
                return r;
        }
        if (syscall(SYS_fsconfig, fs, DISK_FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
            syscall(SYS_fsconfig, fs, DISK_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
            (m = (int)syscall(SYS_fsmount, fs, DISK_FSMOUNT_CLOEXEC,
                              DISK_MOUNT_ATTR_NOSUID | DISK_MOUNT_ATTR_NODEV |
                                      DISK_MOUNT_ATTR_NOATIME)) < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot mount %s: %s", dev, strerror(errno));
        }
        close(fs);
        return r < 0 ? r : m;
}

/* Formats img (open as img_fd), attaches it to a loop device and mounts that, attached
 * nowhere, its root owned as spec says. The mount's descriptor, or -errno with err. */
static int format_and_mount(const struct disk_image_spec *spec, const char *img, int img_fd,
                            char *err, size_t errlen) {
        char dev[32];
        int r = format(spec, img, img_fd, err, errlen), loop_fd, m;

        if (r < 0)
                return r;
        loop_fd = attach_loop(img_fd, img, dev, sizeof(dev));
        if (loop_fd < 0) {
                snprintf(err, errlen, "cannot attach %s to a loop device: %s", img,
                         strerror(-loop_fd));
                return loop_fd;
        }
        m = mount_detached(dev, err, errlen);
        if (m >= 0 && fchownat(m, "", spec->uid, spec->gid, AT_EMPTY_PATH) < 0) {
                r = -errno; /* a template's root is root's */
                snprintf(err, errlen, "cannot chown the root of %s: %s", img, strerror(errno));
                close(m);
                m = r;
        } else if (m >= 0) {
                (void)unlinkat(m, "lost+found", AT_REMOVEDIR); /* empty, as without a limit */
        }
        /* Mounted, the filesystem holds the device; else this last close detaches it. */
        close(loop_fd);
        return m;
}

int disk_image_make(const struct disk_image_spec *spec, int *ret_mount, char *err,
                    size_t errlen) {
        char img[4200], record[4200];
        int fd, r = new_image(spec->workspace, record, sizeof(record), img, sizeof(img), err,
                              errlen);

        *ret_mount = -1;
        if (r < 0)
                return r;
        fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot create %s: %s", img, strerror(errno));
                (void)unlink(record);
                return r;
        }
        if (ftruncate(fd, (off_t)spec->bytes) < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot size %s to %llu bytes: %s", img,
                         (unsigned long long)spec->bytes, strerror(errno));
        } else {
                r = format_and_mount(spec, img, fd, err, errlen);
        }
        close(fd);
        if (r < 0) {
                (void)unlink(img);
                (void)unlink(record);
                return r;
        }
        *ret_mount = r;
        return 0;
}

/* ---- made in the thread pool ---------------------------------------------------------- */

struct disk_job {
        uv_work_t work;
        struct disk_image_spec spec;
        char *workspace;
        char *templates;
        disk_image_cb cb;
        void *ud;
        int r;
        int mount_fd; /* the image's mount, for cb; -1: none */
        char err[512];
};

/* The daemon's own mounts and unmounts of images, begun and done (any thread). */
static _Atomic uint64_t mounts_begun, mounts_done;

void disk_mount_ops(uint64_t *begun, uint64_t *done) {
        *done = mounts_done; /* first: a job between the two reads shows as in flight */
        *begun = mounts_begun;
}

static void job_work(uv_work_t *w) {
        struct disk_job *j = w->data;
        j->r = disk_image_make(&j->spec, &j->mount_fd, j->err, sizeof(j->err));
}

static void job_done(uv_work_t *w, int status) {
        struct disk_job *j = w->data;

        if (status < 0 && j->r == 0) {
                j->r = status == UV_ECANCELED ? -ECANCELED : -EIO;
                snprintf(j->err, sizeof(j->err), "the disk image was not made: %s",
                         uv_strerror(status));
        }
        if (j->r < 0 && j->mount_fd >= 0) {
                close(j->mount_fd);
                j->mount_fd = -1;
        }
        j->cb(j->ud, j->r, j->mount_fd, j->err);
        free(j->workspace);
        free(j->templates);
        free(j);
}

int disk_image_start(uv_loop_t *loop, const struct disk_image_spec *spec, disk_image_cb cb,
                     void *ud) {
        struct disk_job *j = calloc(1, sizeof(*j));
        int r;

        if (!j || !(j->workspace = strdup(spec->workspace)) ||
            (spec->templates && !(j->templates = strdup(spec->templates)))) {
                if (j)
                        free(j->workspace);
                free(j);
                return -ENOMEM;
        }
        j->spec = *spec;
        j->spec.workspace = j->workspace;
        j->spec.templates = j->templates;
        j->cb = cb;
        j->ud = ud;
        j->mount_fd = -1;
        j->work.data = j;
        r = uv_queue_work(loop, &j->work, job_work, job_done);
        if (r < 0) {
                free(j->workspace);
                free(j->templates);
                free(j);
        }
        return r;
}

/* ---- the end ------------------------------------------------------------------------- */

/* 1 when path is a mount point (its device is not its parent's). */
static int is_mount_point(const char *path) {
        char parent[4200];
        struct stat a, b;

        if (snprintf(parent, sizeof(parent), "%s/..", path) >= (int)sizeof(parent))
                return 0;
        if (lstat(path, &a) < 0 || !S_ISDIR(a.st_mode) || stat(parent, &b) < 0)
                return 0;
        return a.st_dev != b.st_dev;
}

static void *close_on_thread(void *arg) {
        close((int)(intptr_t)arg);
        return NULL;
}

/* Closes fd on a thread of its own (or here when none can be made). */
static void close_elsewhere(int fd) {
        pthread_attr_t a;
        pthread_t t;
        int r;

        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &a, close_on_thread, (void *)(intptr_t)fd);
        pthread_attr_destroy(&a);
        if (r != 0)
                close(fd);
}

/* Puts the image img in the place of its record: a second name, then the first
 * removed, so that its loop device (attached until the sandbox's last mount of it goes)
 * goes on showing the image's own name, "(deleted)", never the record's, which names the
 * sandbox. 0 or -errno (the record then still leads to the image). */
static int keep_image(const char *img, const char *record) {
        char tmp[4300];
        int r = 0;

        snprintf(tmp, sizeof(tmp), "%s.new", record);
        (void)unlink(tmp); /* a crash's */
        if (link(img, tmp) < 0)
                return -errno;
        if (rename(tmp, record) < 0) {
                r = -errno;
                (void)unlink(tmp);
                return r;
        }
        if (unlink(img) < 0)
                log_warning("cannot remove %s (kept as %s): %s", img, record, strerror(errno));
        return 0;
}

/* The image end of disk_release: the image recorded at record removed with its record,
 * or (keep) put in the record's place. */
static void release_image(const char *workspace, const char *record, int keep) {
        char img[4200];
        int r = image_of(workspace, record, img, sizeof(img));

        if (r == -ENOENT)
                return;
        if (r < 0) {
                log_warning("%s is no record of an image of the daemon's (%s): %s", record,
                            strerror(-r), keep ? "left" : "removed, and not followed");
                if (!keep)
                        (void)unlink(record);
                return;
        }
        if (keep) {
                if (r == 1 && (r = keep_image(img, record)) < 0)
                        log_warning("cannot put %s in the place of %s: %s", img, record,
                                    strerror(-r));
                log_info("the workspace %s is kept as the ext4 image %s (mount -o loop "
                         "to read it)",
                         workspace, record);
                return;
        }
        if (r == 1 && unlink(img) < 0 && errno != ENOENT)
                log_warning("cannot remove %s: %s", img, strerror(errno));
        if (unlink(record) < 0 && errno != ENOENT)
                log_warning("cannot remove %s: %s", record, strerror(errno));
}

void disk_release(const char *workspace, int mount_fd, int keep) {
        char record[4200];

        if (mount_fd >= 0) {
                /* The last reference to the image's filesystem shuts it down, writing back
                 * what the sandbox left dirty through the loop device (2.5 GB written:
                 * 2.7 s) on the thread that drops it: not the event loop. The sandbox's
                 * namespace has gone, or goes: this descriptor is the daemon's hold, and
                 * a thread of its own closes it. */
                close_elsewhere(mount_fd);
        } else if (is_mount_point(workspace)) {
                /* An older daemon's image, mounted on the workspace itself: the same, the
                 * hold an O_PATH descriptor taken before the unmount. */
                int hold = open(workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                mounts_begun++;
                if (umount2(workspace, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        log_warning("cannot unmount %s: %s", workspace, strerror(errno));
                if (hold >= 0)
                        close_elsewhere(hold);
                mounts_done++;
        } else {
                quota_release(workspace);
        }
        if (record_path(workspace, record, sizeof(record)) < 0)
                return;
        release_image(workspace, record, keep);
}

/* Reads /sys/block/NAME/loop/backing_file into buf (its trailing newline cut). 0 or
 * -errno. */
static int backing_file(const char *name, char *buf, size_t len) {
        char path[300];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        if (n > 0 && buf[n - 1] == '\n')
                buf[n - 1] = '\0';
        return 0;
}

/* 1 when the backing file f is an image of ours: STATE/DISK_IMAGES_DIR/NAME, or an older
 * daemon's DISK_IMAGE_NAME below state_dir (either maybe removed: " (deleted)"). */
static int ours(const char *state_dir, const char *f) {
        size_t n = strlen(state_dir), d = strlen(DISK_IMAGES_DIR);
        const char *base = strrchr(f, '/');

        if (strncmp(f, state_dir, n) != 0 || f[n] != '/' || !base)
                return 0;
        if (strncmp(f + n + 1, DISK_IMAGES_DIR, d) == 0 && f + n + 1 + d == base)
                return image_name_at(base + 1);
        return strncmp(base + 1, DISK_IMAGE_NAME, strlen(DISK_IMAGE_NAME)) == 0;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Frees the n names of v, and v. */
static void free_names(char **v, size_t n) {
        while (n)
                free(v[--n]);
        free(v);
}

/* The names of the images the records below STATE/sandboxes lead to, sorted, into
 * *ret (the caller frees them with free_names). Their count, or -errno. */
static int recorded_images(const char *state_dir, char ***ret) {
        char path[4200], target[sizeof(RECORD_TARGET) + IMAGE_NAME_BYTES + 1], **v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r = 0;
        DIR *d;

        snprintf(path, sizeof(path), "%s/sandboxes", state_dir);
        d = opendir(path);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                char *name;
                ssize_t len;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", de->d_name, DISK_IMAGE_NAME);
                len = readlinkat(dirfd(d), path, target, sizeof(target) - 1);
                if (len < (ssize_t)strlen(RECORD_TARGET))
                        continue; /* none, or an older daemon's image */
                target[len] = '\0';
                if (n == cap) {
                        char **w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
                        if (!w) {
                                r = -ENOMEM;
                                break;
                        }
                        v = w;
                }
                if (!(name = strdup(target + strlen(RECORD_TARGET)))) {
                        r = -ENOMEM;
                        break;
                }
                v[n++] = name;
        }
        closedir(d);
        if (r < 0) { /* nothing may be taken for an orphan then */
                free_names(v, n);
                return r;
        }
        if (n)
                qsort(v, n, sizeof(*v), cmp_names);
        *ret = v;
        return (int)n;
}

/* Removes the images of STATE/DISK_IMAGES_DIR that no record leads to (a record a crash
 * or a hand removed; an image is made after its record, removed before it). */
static void remove_orphans(const char *state_dir) {
        char path[4200], **names = NULL;
        struct dirent *de;
        int n = recorded_images(state_dir, &names);
        DIR *d;

        snprintf(path, sizeof(path), "%s/%s", state_dir, DISK_IMAGES_DIR);
        d = n >= 0 ? opendir(path) : NULL;
        while (d && (de = readdir(d))) {
                const char *name = de->d_name;
                if (strlen(name) != IMAGE_NAME_BYTES || !image_name_at(name) ||
                    (n && bsearch(&name, names, (size_t)n, sizeof(*names), cmp_names)))
                        continue;
                if (unlinkat(dirfd(d), name, 0) == 0)
                        log_info("removed %s/%s, an image no sandbox records", path, name);
        }
        if (d)
                closedir(d);
        if (n > 0)
                free_names(names, (size_t)n);
}

/* Removes the files of STATE/DISK_TEMPLATES_DIR. */
static void remove_templates(const char *state_dir) {
        char path[4200];
        DIR *d;
        struct dirent *de;
        int dfd;

        snprintf(path, sizeof(path), "%s/%s", state_dir, DISK_TEMPLATES_DIR);
        d = opendir(path);
        dfd = d ? dirfd(d) : -1;
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        (void)unlinkat(dfd, de->d_name, 0);
        if (d)
                closedir(d);
}

void disk_sweep(const char *state_dir_given) {
        char *state_dir = realpath(state_dir_given, NULL); /* as the kernel names files */
        DIR *dir = state_dir ? opendir("/sys/block") : NULL;
        struct dirent *de;
        char f[4200], dev[300];

        while (dir && (de = readdir(dir))) {
                int fd;
                if (strncmp(de->d_name, "loop", 4) != 0 ||
                    backing_file(de->d_name, f, sizeof(f)) < 0 || !ours(state_dir, f))
                        continue;
                snprintf(dev, sizeof(dev), "/dev/%s", de->d_name);
                fd = open(dev, O_RDONLY | O_CLOEXEC);
                /* Still mounted (an adopted sandbox's namespace): the kernel only marks it
                 * to detach when unmounted. */
                if (fd >= 0 && ioctl(fd, LOOP_CLR_FD, 0) == 0)
                        log_info("detached %s (%s), left by an earlier daemon", dev, f);
                if (fd >= 0)
                        close(fd);
        }
        if (dir)
                closedir(dir);
        remove_orphans(state_dir_given);
        remove_templates(state_dir_given);
        free(state_dir);
}

uint64_t disk_full_margin_bytes(long fs_type, uint64_t block_bytes, uint64_t fs_bytes, long cpus) {
        uint64_t batch, margin;

        if (fs_type != EXT4_SUPER_MAGIC)
                return FULL_MARGIN_BYTES;
        /* ext4 allocates at write time once fewer than EXT4_FREECLUSTERS_WATERMARK blocks
         * are free (4 x percpu_counter_batch x CPUs, the batch max(32, 2 x CPUs):
         * fs/ext4/ext4.h, lib/percpu_counter.c), and its per-CPU count of free blocks
         * lags by up to that much: a write fails with ENOSPC while statfs still shows
         * tens of KiB free (16 to 92 KiB of a 1 KiB-block image on 2 CPUs, measured). */
        if (cpus < 1)
                cpus = 1;
        batch = (uint64_t)(cpus * 2 > 32 ? cpus * 2 : 32);
        margin = 4 * batch * (uint64_t)cpus * block_bytes;
        /* A small workspace is not "full" at 7/8 used. */
        if (margin > fs_bytes / 8)
                margin = fs_bytes / 8;
        return margin > FULL_MARGIN_BYTES ? margin : FULL_MARGIN_BYTES;
}

int disk_full(int root_fd) {
        static long cpus;
        struct statfs s;
        int fd = openat(root_fd, "workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;
        uint64_t margin, unit;

        if (fd < 0)
                return -errno;
        r = fstatfs(fd, &s);
        close(fd);
        if (r < 0)
                return -errno;
        /* The counts are in fragments where the filesystem has them (as statvfs). */
        unit = (uint64_t)(s.f_frsize ? s.f_frsize : s.f_bsize);
        /* The CPUs the kernel counts (glibc reads sysfs for it): read once. */
        if (cpus == 0)
                cpus = sysconf(_SC_NPROCESSORS_CONF);
        margin = disk_full_margin_bytes((long)s.f_type, unit, (uint64_t)s.f_blocks * unit, cpus);
        if ((uint64_t)s.f_bavail * unit < margin)
                return 1;
        return s.f_files > 0 && s.f_ffree == 0;
}
