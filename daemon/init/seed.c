/* seed.c: a snapshot's workspace copied into a new sandbox's; see seed.h. */
#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* As the image store's layers (layer.h: LAYER_MAX_DEPTH). */
#define SEED_MAX_DEPTH 256

/* The owner, mode and times of st on the entry name of dfd (fd >= 0: that file). An
 * owner the namespace does not map stays PID 1's. Never a setuid or setgid bit: PID 1
 * writes before the filter that refuses them where a workspace outlives its sandbox,
 * and a workspace may (keep_workspace): no set-id file of an image is ever left where a
 * host user reaches it (docs/security.md). */
static int set_meta(int dfd, const char *name, int fd, const struct stat *st) {
        struct timespec times[2] = {st->st_atim, st->st_mtim};

        if (fd >= 0) {
                if (fchown(fd, st->st_uid, st->st_gid) < 0 && errno != EINVAL)
                        return -errno;
                if (fchmod(fd, st->st_mode & 01777) < 0)
                        return -errno;
                return futimens(fd, times) < 0 ? -errno : 0;
        }
        if (fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 &&
            errno != EINVAL)
                return -errno;
        return utimensat(dfd, name, times, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st) {
        int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out, r = 0;
        off_t left = st->st_size;

        if (in < 0)
                return -errno;
        out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) {
                r = -errno;
                close(in);
                return r;
        }
        while (r == 0 && left > 0) {
                ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP))
                        n = sendfile(out, in, NULL, (size_t)left);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = n < 0 ? -errno : -EIO;
                else
                        left -= n;
        }
        if (r == 0)
                r = set_meta(ddir, name, out, st);
        close(in);
        close(out);
        return r;
}

static int copy_dir(int sdir, int ddir, unsigned depth, struct util_err *err);

static int copy_entry(int sdir, int ddir, const char *name, unsigned depth,
                      struct util_err *err) {
        char target[4096];
        struct stat st;
        ssize_t n;
        int s, d, r;

        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                /* Listed but not there: overlayfs lists the whiteouts of a directory only
                 * one layer holds (an image's /workspace may hold some). */
                return errno == ENOENT ? 0
                                       : util_fail(err, errno, NULL, "seed the workspace: stat %s",
                                                   name);
        if (S_ISREG(st.st_mode))
                r = copy_file(sdir, ddir, name, &st);
        else if (S_ISLNK(st.st_mode)) {
                n = readlinkat(sdir, name, target, sizeof(target) - 1);
                r = n < 0 ? -errno : 0;
                if (r == 0) {
                        target[n] = '\0';
                        r = symlinkat(target, ddir, name) < 0 ? -errno
                                                               : set_meta(ddir, name, -1, &st);
                }
        } else if (S_ISDIR(st.st_mode)) {
                if (depth >= SEED_MAX_DEPTH)
                        return util_fail(err, ELOOP, NULL,
                                         "seed the workspace: more than %u directories deep",
                                         SEED_MAX_DEPTH);
                if (mkdirat(ddir, name, 0700) < 0)
                        return util_fail(err, errno, NULL, "seed the workspace: mkdir %s", name);
                s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = s < 0 || d < 0 ? -errno : copy_dir(s, d, depth + 1, err);
                if (r == 0)
                        r = set_meta(ddir, name, d, &st);
                if (s >= 0)
                        close(s);
                if (d >= 0)
                        close(d);
                if (err->err)
                        return r;
        } else {
                return 0; /* the store's layers hold no other kind (layer.h) */
        }
        return r < 0 ? util_fail(err, -r, NULL, "seed the workspace: %s", name) : 0;
}

static int copy_dir(int sdir, int ddir, unsigned depth, struct util_err *err) {
        int fd = dup(sdir);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int r = 0;

        if (!dir) {
                if (fd >= 0)
                        close(fd);
                return util_fail(err, errno, NULL, "seed the workspace: list a directory");
        }
        while (r == 0 && (errno = 0, de = readdir(dir)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        r = copy_entry(sdir, ddir, de->d_name, depth, err);
        if (r == 0 && errno)
                r = util_fail(err, errno, NULL, "seed the workspace: list a directory");
        closedir(dir);
        return r;
}

int seed_copy_tree(int src_fd, int dst_fd, struct util_err *err) {
        return copy_dir(src_fd, dst_fd, 0, err);
}
