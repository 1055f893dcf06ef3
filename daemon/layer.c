/* layer.c: one layer tar unpacked into a directory of the image store, beneath it and
 * nowhere else; see layer.h for what is refused, what is neutralised and why.
 *
 * Two libarchive readers are chained: the outer one only decompresses (the "raw"
 * format behind the gzip and zstd filters) and reads the fd through outer_read, which
 * digests the blob; the inner one reads the tar from what the outer one yields, through
 * inner_read, which digests the diff_id (unless the blob is not compressed: then the
 * two are the same bytes, digested once) and bounds the stream. */
#include "layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/openat2.h>

#define IO_BYTES 65536

/* A directory whose mode is applied once every entry is written. */
struct dir_mode {
        char *path;
        mode_t mode;
};

struct unpack {
        const struct layer_opts *o;
        struct layer_result *res;
        int fd, dir_fd;
        struct archive *outer, *inner;
        struct digest blob, diff;
        uint64_t stream_bytes; /* uncompressed, so far */
        int too_big;           /* stream_bytes passed its bound */
        int plain;             /* not compressed: the tar is the blob, one digest for both */
        char *err;
        size_t errlen;
        struct dir_mode *dirs;
        size_t ndirs, capdirs;
        char rbuf[IO_BYTES]; /* read from fd */
        char dbuf[IO_BYTES]; /* decompressed */
        char cbuf[IO_BYTES]; /* read back from o->clone_fd, to compare */
        int64_t clone_block;  /* o->clone_fd's filesystem's block, once known */
};

/* Says why the entry named raw is refused; returns r. */
__attribute__((format(printf, 4, 5))) static int fail(struct unpack *u, int r, const char *raw,
                                                      const char *fmt, ...) {
        char why[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        if (raw)
                snprintf(u->err, u->errlen, "layer entry \"%.300s\": %s", raw, why);
        else
                snprintf(u->err, u->errlen, "layer: %s", why);
        return r;
}

/* ---- the two streams --------------------------------------------------------------- */

static la_ssize_t outer_read(struct archive *a, void *ud, const void **buf) {
        struct unpack *u = ud;
        ssize_t n;

        do
                n = read(u->fd, u->rbuf, sizeof(u->rbuf));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "reading the layer: %s", strerror(errno));
                return -1;
        }
        if (digest_update(&u->blob, u->rbuf, (size_t)n) < 0) {
                archive_set_error(a, EIO, "digesting the layer failed");
                return -1;
        }
        *buf = u->rbuf;
        return n;
}

/* The most uncompressed bytes a layer within the bounds can have. */
static uint64_t stream_bound(const struct layer_opts *o) {
        uint64_t hdr = (o->max_entries + 2) * (uint64_t)LAYER_HEADER_ALLOWANCE;

        if (o->max_entries > UINT64_MAX / 2 / LAYER_HEADER_ALLOWANCE ||
            o->max_bytes > UINT64_MAX / 2)
                return UINT64_MAX;
        return o->max_bytes + hdr;
}

/* Reads the next decompressed bytes into u->dbuf, digesting them. Bytes or -1 (the
 * error is set on a). */
static la_ssize_t pull(struct unpack *u, struct archive *a) {
        la_ssize_t n = archive_read_data(u->outer, u->dbuf, sizeof(u->dbuf));

        if (n < 0) {
                archive_set_error(a, EINVAL, "%s", archive_error_string(u->outer));
                return -1;
        }
        u->stream_bytes += (uint64_t)n;
        if (u->stream_bytes > stream_bound(u->o)) {
                char why[128]; /* archive_set_error's own printf knows no %llu */
                snprintf(why, sizeof(why), "the uncompressed layer is larger than %llu bytes",
                         (unsigned long long)stream_bound(u->o));
                archive_set_error(a, EFBIG, "%s", why);
                u->too_big = 1;
                return -1;
        }
        if (!u->plain && digest_update(&u->diff, u->dbuf, (size_t)n) < 0) {
                archive_set_error(a, EIO, "digesting the layer failed");
                return -1;
        }
        return n;
}

static la_ssize_t inner_read(struct archive *a, void *ud, const void **buf) {
        struct unpack *u = ud;

        *buf = u->dbuf;
        return pull(u, a);
}

/* Opens both readers. 0 or -errno (err set). */
static int open_streams(struct unpack *u) {
        struct archive_entry *e;

        u->outer = archive_read_new();
        u->inner = archive_read_new();
        if (!u->outer || !u->inner)
                return fail(u, -ENOMEM, NULL, "out of memory");
        /* ARCHIVE_WARN would mean an external program: never. */
        if (archive_read_support_filter_gzip(u->outer) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(u->outer) != ARCHIVE_OK ||
            archive_read_support_format_raw(u->outer) != ARCHIVE_OK ||
            archive_read_support_format_tar(u->inner) != ARCHIVE_OK)
                return fail(u, -ENOTSUP, NULL,
                            "this libarchive cannot read gzip, zstd and tar itself");
        if (archive_read_open(u->outer, u, NULL, outer_read, NULL) != ARCHIVE_OK ||
            archive_read_next_header(u->outer, &e) != ARCHIVE_OK)
                return fail(u, -EINVAL, NULL, "not a layer: %s", archive_error_string(u->outer));
        /* No filter but the reader's own: the same bytes reach both digests. */
        u->plain = archive_filter_count(u->outer) == 1;
        if (archive_read_open(u->inner, u, NULL, inner_read, NULL) != ARCHIVE_OK)
                return fail(u, -EINVAL, NULL, "not a tar: %s", archive_error_string(u->inner));
        return 0;
}

/* After the tar's end: digests what follows it (padding) and what follows the
 * compressed stream in the fd, so that both digests cover everything. */
static int drain(struct unpack *u) {
        la_ssize_t n;

        while ((n = pull(u, u->inner)) > 0)
                ;
        if (n < 0)
                return fail(u, u->too_big ? -EFBIG : -EINVAL, NULL, "after the tar's end: %s",
                            archive_error_string(u->inner));
        while ((n = outer_read(u->outer, u, &(const void *){NULL})) > 0)
                ;
        if (n < 0)
                return fail(u, -EIO, NULL, "%s", archive_error_string(u->outer));
        return 0;
}

/* ---- names ----------------------------------------------------------------------------- */

/* Writes raw made relative to the layer into out ("" for the layer's root). */
static int clean_name(struct unpack *u, const char *raw, char out[PATH_MAX]) {
        const char *p = raw;
        size_t len = 0;
        unsigned depth = 0;

        if (raw[0] == '/')
                return fail(u, -EINVAL, raw, "an absolute name");
        while (*p) {
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);

                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return fail(u, -EINVAL, raw, "a \"..\" component");
                if (n > 0 && !(n == 1 && p[0] == '.')) {
                        if (++depth > LAYER_MAX_DEPTH)
                                return fail(u, -EINVAL, raw, "deeper than %d directories",
                                            LAYER_MAX_DEPTH);
                        if (len + n + 2 > PATH_MAX)
                                return fail(u, -EINVAL, raw, "a name longer than %d bytes",
                                            PATH_MAX);
                        if (len)
                                out[len++] = '/';
                        memcpy(out + len, p, n);
                        len += n;
                }
                p = *end ? end + 1 : end;
        }
        out[len] = '\0';
        return 0;
}

/* Splits path at its last '/': path becomes the parent ("" for the root) and the name
 * is returned. */
static char *split(char *path) {
        char *slash = strrchr(path, '/');

        if (!slash) {
                memmove(path + 1, path, strlen(path) + 1);
                path[0] = '\0';
                return path + 1;
        }
        *slash = '\0';
        return slash + 1;
}

int layer_open_beneath(int dir_fd, const char *path, int flags, int in_root) {
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .resolve = (in_root ? RESOLVE_IN_ROOT : RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) |
                           RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        long fd;

        do
                fd = syscall(SYS_openat2, dir_fd, path[0] ? path : ".", &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN);
        return fd < 0 ? -errno : (int)fd;
}

static int open_beneath(int dir_fd, const char *path) {
        return layer_open_beneath(dir_fd, path, O_RDONLY | O_DIRECTORY, 0);
}

/* Opens the directory parent (relative to the layer) of the entry raw, creating what is
 * missing (0755) when create. fd or -errno (err set). */
static int open_parent(struct unpack *u, const char *parent, int create, const char *raw) {
        char walk[PATH_MAX];
        char *p = walk;
        int fd = open_beneath(u->dir_fd, parent);

        if (fd == -ENOENT && create) {
                size_t n = strlen(parent);

                if (n >= sizeof(walk))
                        return fail(u, -ENAMETOOLONG, raw, "its directory's name is too long");
                memcpy(walk, parent, n + 1);
                fd = open_beneath(u->dir_fd, "");
                while (fd >= 0 && *p) {
                        char *end = strchrnul(p, '/');
                        int last = !*end, nfd;

                        *end = '\0';
                        nfd = open_beneath(fd, p);
                        if (nfd == -ENOENT && mkdirat(fd, p, 0755) == 0)
                                nfd = open_beneath(fd, p);
                        else if (nfd == -ENOENT)
                                nfd = -errno;
                        close(fd);
                        fd = nfd;
                        p = last ? end : end + 1;
                }
        }
        if (fd == -ELOOP)
                return fail(u, -EINVAL, raw, "a directory of its name is a symlink");
        if (fd == -ENOTDIR)
                return fail(u, -EINVAL, raw, "a directory of its name is not a directory");
        if (fd == -ENOENT)
                return fail(u, -ENOENT, raw, "no such directory in this layer");
        if (fd < 0)
                return fail(u, fd, raw, "opening its directory: %s", strerror(-fd));
        return fd;
}

/* ---- removal ------------------------------------------------------------------------- */

int layer_remove_tree(int parent_fd, const char *name) {
        struct stat st, pst;
        int fd, r;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (fstat(parent_fd, &pst) < 0)
                return -errno;
        if (st.st_dev != pst.st_dev)
                return -EXDEV; /* a mount point: never descend */
        /* A read-only directory of a rootless store: make it ours to empty. */
        if ((st.st_mode & 0700) != 0700 && fchmodat(parent_fd, name, 0700, 0) < 0)
                return -errno;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = layer_empty_dir(fd);
        close(fd);
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int layer_empty_dir(int dir_fd) {
        int fd = dup(dir_fd), r = 0, removed;
        DIR *dir;

        if (fd < 0)
                return -errno;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return -ENOMEM;
        }
        do {
                struct dirent *de;

                removed = 0;
                rewinddir(dir);
                while ((de = readdir(dir))) {
                        int q;
                        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                                continue;
                        q = layer_remove_tree(dir_fd, de->d_name);
                        if (q == 0)
                                removed++;
                        else if (r == 0)
                                r = q;
                }
        } while (removed > 0 && r == 0);
        closedir(dir);
        return r;
}

uint64_t layer_disk_usage(int dir_fd) {
        int fd = dup(dir_fd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        uint64_t total = 0;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        rewinddir(d); /* the dup shares dir_fd's offset */
        while ((de = readdir(d))) {
                struct stat st;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                    fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                total += (uint64_t)st.st_blocks * 512;
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dir_fd, de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                total += layer_disk_usage(sub);
                                close(sub);
                        }
                }
        }
        closedir(d);
        return total;
}

/* ---- entries ------------------------------------------------------------------------- */

/* The tar's uid and gid, or -EINVAL (err set) for ids no file can have. */
static int entry_ids(struct unpack *u, struct archive_entry *e, const char *raw, uid_t *uid,
                     gid_t *gid) {
        la_int64_t a = archive_entry_uid(e), b = archive_entry_gid(e);

        if (a < 0 || b < 0 || a >= (la_int64_t)UINT32_MAX || b >= (la_int64_t)UINT32_MAX)
                return fail(u, -EINVAL, raw, "an owner id out of range (%lld:%lld)", (long long)a,
                            (long long)b);
        *uid = (uid_t)a;
        *gid = (gid_t)b;
        return 0;
}

/* Owner and times of the entry name of pfd (a symlink's own). */
static int entry_meta(struct unpack *u, int pfd, const char *name, struct archive_entry *e,
                      const char *raw) {
        struct timespec ts[2];
        uid_t uid = 0;
        gid_t gid = 0;
        int r = entry_ids(u, e, raw, &uid, &gid);

        if (r < 0)
                return r;
        if (u->o->max_id && uid > u->o->max_id)
                uid = (uid_t)-1; /* left as it is: the unpacking user's */
        if (u->o->max_id && gid > u->o->max_id)
                gid = (gid_t)-1;
        if (u->o->keep_owners && fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return fail(u, -errno, raw, "chown: %s", strerror(errno));
        ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
        ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
        if (utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                return fail(u, -errno, raw, "setting its times: %s", strerror(errno));
        return 0;
}

/* Removes what an earlier entry of the layer left at name, unless both are
 * directories (then *ret_dir is 1). */
static int clear_name(struct unpack *u, int pfd, const char *name, int want_dir, int *ret_dir,
                      const char *raw) {
        struct stat st;
        int r;

        *ret_dir = 0;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : fail(u, -errno, raw, "%s", strerror(errno));
        if (want_dir && S_ISDIR(st.st_mode)) {
                *ret_dir = 1;
                return 0;
        }
        r = layer_remove_tree(pfd, name);
        return r < 0 ? fail(u, r, raw, "replacing an earlier entry: %s", strerror(-r)) : 0;
}

static int write_all(int fd, const void *buf, size_t n, int64_t off) {
        const char *p = buf;

        while (n > 0) {
                ssize_t w = pwrite(fd, p, n, off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                p += w, n -= (size_t)w, off += w;
        }
        return 0;
}

/* The block of o->clone_fd's filesystem (what a clone shares whole), once. */
static int64_t clone_block(struct unpack *u) {
        struct statfs sf;

        if (!u->clone_block)
                u->clone_block = fstatfs(*u->o->clone_fd, &sf) == 0 && sf.f_bsize >= 512 &&
                                                 sf.f_bsize <= 65536
                                         ? (int64_t)sf.f_bsize
                                         : 4096;
        return u->clone_block;
}

/* Takes the whole blocks of size bytes of o->clone_fd from pos into fd at 0
 * (copy_file_range: shared blocks where the filesystem can). Their bytes, or 0 (none,
 * or not all of them came: fd is written from the tar then, over what came). The tail
 * comes from the tar: a partial block of the source is one a writer just dirtied, which
 * a clone from it would first wait to see written back. */
static int64_t clone_in(struct unpack *u, int fd, int64_t pos, int64_t size) {
        loff_t in = pos, out = 0;
        int64_t whole;

        if (!u->o->clone_fd || *u->o->clone_fd < 0 || !u->plain || pos < 0 || size <= 0)
                return 0;
        whole = size - size % clone_block(u);
        while (out < whole) {
                ssize_t n = copy_file_range(*u->o->clone_fd, &in, fd, &out, (size_t)(whole - out), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 0;
        }
        return whole;
}

/* Whether len bytes of buf are what o->clone_fd holds at pos (then fd, cloned from
 * there, holds them too). */
static int cloned_same(struct unpack *u, const void *buf, size_t len, int64_t pos) {
        size_t done = 0;

        while (done < len) {
                size_t want = len - done < sizeof(u->cbuf) ? len - done : sizeof(u->cbuf);
                ssize_t n = pread(*u->o->clone_fd, u->cbuf, want, pos + (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != (ssize_t)want || memcmp(u->cbuf, (const char *)buf + done, want) != 0)
                        return 0;
                done += want;
        }
        return 1;
}

/* Puts the data block buf (len bytes at off of the entry) into fd: what lies below
 * cloned (taken from the clone source at pos) is only compared, and written only where
 * it differs; the rest is written. 0 or -errno. */
static int put_block(struct unpack *u, int fd, const char *buf, size_t len, int64_t off,
                     int64_t cloned, int64_t pos) {
        size_t below = off >= cloned ? 0 : (size_t)(cloned - off) < len ? (size_t)(cloned - off) : len;

        if (below && !cloned_same(u, buf, below, pos + off)) {
                int r = write_all(fd, buf, below, off);
                if (r < 0)
                        return r;
        }
        return below < len ? write_all(fd, buf + below, len - below, off + (int64_t)below) : 0;
}

/* fd's size made size (a sparse entry's last hole). Only when it is not: truncating a
 * file to its own size still waits for its tail's write-back on XFS (about 0.3 ms a
 * file). */
static int set_size(struct unpack *u, int fd, int64_t size, const char *raw) {
        struct stat st;

        if (fstat(fd, &st) == 0 && st.st_size == size)
                return 0;
        if (ftruncate(fd, size) < 0)
                return fail(u, -errno, raw, "writing: %s", strerror(errno));
        return 0;
}

/* Copies the entry's data into fd, every byte within its declared size. With a clone
 * source (layer.h), the data is taken from it where the tar's data lies (the stream's
 * position once the header is read: the tar is the source's bytes from 0), and each
 * block the tar yields is only compared with it. */
static int copy_data(struct unpack *u, int fd, struct archive_entry *e, int64_t size,
                     const char *raw) {
        int64_t pos = archive_filter_bytes(u->inner, 0);
        /* A sparse entry's data is not where its offsets say: never taken so. */
        int64_t cloned = archive_entry_sparse_count(e) == 0 ? clone_in(u, fd, pos, size) : 0;

        for (;;) {
                const void *buf;
                size_t len;
                la_int64_t off;
                int r = archive_read_data_block(u->inner, &buf, &len, &off);

                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK)
                        return fail(u, u->too_big ? -EFBIG : -EINVAL, raw,
                                    "its data is truncated or corrupt: %s",
                                    archive_error_string(u->inner));
                if (off < 0 || (uint64_t)off + len > (uint64_t)size)
                        return fail(u, -EINVAL, raw, "data past its declared size of %lld bytes",
                                    (long long)size);
                r = put_block(u, fd, buf, len, off, cloned, pos);
                if (r < 0)
                        return fail(u, r, raw, "writing: %s", strerror(-r));
        }
        return set_size(u, fd, size, raw);
}

static int put_file(struct unpack *u, int pfd, const char *name, struct archive_entry *e,
                    const char *raw) {
        int64_t size = archive_entry_size(e);
        int fd, r, isdir;

        if (!archive_entry_size_is_set(e) || size < 0)
                return fail(u, -EINVAL, raw, "no valid size");
        if ((uint64_t)size > u->o->max_bytes - u->res->bytes)
                return fail(u, -EFBIG, raw,
                            "its %lld bytes take the layer past its bound of %llu bytes",
                            (long long)size, (unsigned long long)u->o->max_bytes);
        u->res->bytes += (uint64_t)size;
        r = clear_name(u, pfd, name, 0, &isdir, raw);
        if (r < 0)
                return r;
        fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return fail(u, -errno, raw, "creating: %s", strerror(errno));
        r = copy_data(u, fd, e, size, raw);
        if (r == 0)
                r = entry_meta(u, pfd, name, e, raw);
        /* After the chown, which clears setuid and setgid. */
        if (r == 0 && fchmod(fd, archive_entry_perm(e) & 07777) < 0)
                r = fail(u, -errno, raw, "chmod: %s", strerror(errno));
        close(fd);
        return r;
}

static int put_dir(struct unpack *u, int pfd, const char *name, const char *path,
                   struct archive_entry *e, const char *raw) {
        int r, isdir;
        struct dir_mode *dm;

        r = clear_name(u, pfd, name, 1, &isdir, raw);
        if (r == 0 && !isdir && mkdirat(pfd, name, 0700) < 0)
                r = fail(u, -errno, raw, "mkdir: %s", strerror(errno));
        if (r == 0)
                r = entry_meta(u, pfd, name, e, raw);
        if (r < 0)
                return r;
        if (u->ndirs == u->capdirs) {
                size_t cap = u->capdirs ? 2 * u->capdirs : 64;
                dm = realloc(u->dirs, cap * sizeof(*dm));
                if (!dm)
                        return fail(u, -ENOMEM, raw, "out of memory");
                u->dirs = dm;
                u->capdirs = cap;
        }
        dm = &u->dirs[u->ndirs];
        dm->path = strdup(path);
        if (!dm->path)
                return fail(u, -ENOMEM, raw, "out of memory");
        dm->mode = archive_entry_perm(e) & 07777;
        u->ndirs++;
        return 0;
}

static int put_symlink(struct unpack *u, int pfd, const char *name, struct archive_entry *e,
                       const char *raw) {
        const char *target = archive_entry_symlink(e);
        int r, isdir;

        if (!target || !target[0])
                return fail(u, -EINVAL, raw, "a symlink without a target");
        r = clear_name(u, pfd, name, 0, &isdir, raw);
        if (r < 0)
                return r;
        if (symlinkat(target, pfd, name) < 0)
                return fail(u, -errno, raw, "symlink: %s", strerror(errno));
        return entry_meta(u, pfd, name, e, raw);
}

/* A hard link to a regular file or symlink this layer wrote before. */
static int put_hardlink(struct unpack *u, int pfd, const char *name, const char *path,
                        const char *hl, const char *raw) {
        char target[PATH_MAX];
        const char *tname;
        struct stat st;
        int tfd, r, isdir;

        if (clean_name(u, hl, target) < 0)
                return fail(u, -EINVAL, raw, "a hard link to \"%.300s\": %s", hl,
                            hl[0] == '/' ? "an absolute name" : "a name out of the layer");
        if (strcmp(target, path) == 0 || !target[0])
                return fail(u, -EINVAL, raw, "a hard link to itself or to the layer's root");
        tname = split(target);
        tfd = open_beneath(u->dir_fd, target);
        if (tfd >= 0 && fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        else
                r = tfd < 0 ? tfd : 0;
        if (r < 0 || (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))) {
                if (tfd >= 0)
                        close(tfd);
                return fail(u, -EINVAL, raw,
                            "a hard link to \"%.300s\", which is no file of this layer", hl);
        }
        r = clear_name(u, pfd, name, 0, &isdir, raw);
        if (r == 0 && linkat(tfd, tname, pfd, name, 0) < 0)
                r = fail(u, -errno, raw, "link: %s", strerror(errno));
        close(tfd);
        return r;
}

/* ".wh.NAME" and ".wh..wh..opq" in the directory pfd, converted for overlayfs. */
static int put_whiteout(struct unpack *u, int pfd, const char *wh, const char *raw) {
        const char *name = wh + 4;
        int user = u->o->whiteouts == LAYER_WHITEOUT_USERXATTR, fd, r;

        if (strcmp(wh, ".wh..wh..opq") == 0) {
                if (fsetxattr(pfd, user ? "user.overlay.opaque" : "trusted.overlay.opaque", "y", 1,
                              0) < 0)
                        return fail(u, -errno, raw, "marking its directory opaque: %s",
                                    strerror(errno));
                return 0;
        }
        if (strncmp(wh, ".wh..wh.", 8) == 0)
                return 0; /* aufs's own bookkeeping, meaningless to overlayfs */
        if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
                return fail(u, -EINVAL, raw, "a whiteout of no name");
        r = layer_remove_tree(pfd, name);
        if (r < 0)
                return fail(u, r, raw, "replacing an earlier entry: %s", strerror(-r));
        if (!user) {
                if (mknodat(pfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
                        return fail(u, -errno, raw, "mknod of the whiteout: %s", strerror(errno));
                return 0;
        }
        fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return fail(u, -errno, raw, "creating the whiteout: %s", strerror(errno));
        r = fsetxattr(fd, "user.overlay.whiteout", "", 0, 0) < 0 ? -errno : 0;
        close(fd);
        /* Its directory says it holds xwhiteouts ("x"), unless it is opaque already. */
        if (r == 0 && fgetxattr(pfd, "user.overlay.opaque", NULL, 0) < 0 &&
            fsetxattr(pfd, "user.overlay.opaque", "x", 1, 0) < 0)
                r = -errno;
        return r < 0 ? fail(u, r, raw, "setting the whiteout's xattrs: %s", strerror(-r)) : 0;
}

static int put_entry(struct unpack *u, struct archive_entry *e) {
        const char *raw = archive_entry_pathname(e), *hl = archive_entry_hardlink(e);
        char path[PATH_MAX], parent[PATH_MAX + 1];
        mode_t type = archive_entry_filetype(e);
        char *name;
        int pfd, r;

        if (!raw || !raw[0])
                return fail(u, -EINVAL, "", "an entry without a name");
        r = clean_name(u, raw, path);
        if (r < 0 || !path[0])
                return r; /* the layer's root itself: its directory is the store's */
        memcpy(parent, path, strlen(path) + 1);
        name = split(parent);
        if (!hl &&
            (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK) &&
            strncmp(name, ".wh.", 4) != 0) {
                if (u->res->skipped++ == 0)
                        snprintf(u->res->first_skipped, sizeof(u->res->first_skipped), "%.255s",
                                 path); /* for messages: a longer name is cut */
                return 0;
        }
        pfd = open_parent(u, parent, 1, raw);
        if (pfd < 0)
                return pfd;
        if (strncmp(name, ".wh.", 4) == 0)
                r = put_whiteout(u, pfd, name, raw);
        else if (hl)
                r = put_hardlink(u, pfd, name, path, hl, raw);
        else if (type == AE_IFREG)
                r = put_file(u, pfd, name, e, raw);
        else if (type == AE_IFDIR)
                r = put_dir(u, pfd, name, path, e, raw);
        else if (type == AE_IFLNK)
                r = put_symlink(u, pfd, name, e, raw);
        else
                r = fail(u, -EINVAL, raw, "an entry of unknown type 0%o", (unsigned)type);
        close(pfd);
        return r;
}

/* The directories' modes, once nothing more is written into them. */
static int apply_dir_modes(struct unpack *u) {
        size_t i;

        for (i = 0; i < u->ndirs; i++) {
                int fd = open_beneath(u->dir_fd, u->dirs[i].path);
                if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
                        continue; /* replaced by a later entry */
                if (fd < 0 || fchmod(fd, u->dirs[i].mode) < 0) {
                        int r = fd < 0 ? fd : -errno;
                        if (fd >= 0)
                                close(fd);
                        return fail(u, r, u->dirs[i].path, "chmod: %s", strerror(-r));
                }
                close(fd);
        }
        return 0;
}

static int unpack_all(struct unpack *u) {
        struct archive_entry *e;
        int r = open_streams(u);

        while (r == 0) {
                int a = archive_read_next_header(u->inner, &e);
                if (a == ARCHIVE_EOF)
                        break;
                if (a < ARCHIVE_WARN)
                        return fail(u, u->too_big ? -EFBIG : -EINVAL, NULL,
                                    "after %llu entries: %s", (unsigned long long)u->res->entries,
                                    archive_error_string(u->inner));
                if (++u->res->entries > u->o->max_entries)
                        return fail(u, -EDQUOT, archive_entry_pathname(e),
                                    "more than the bound of %llu entries",
                                    (unsigned long long)u->o->max_entries);
                r = put_entry(u, e);
        }
        if (r == 0)
                r = drain(u);
        if (r == 0)
                r = apply_dir_modes(u);
        if (r == 0 && digest_final(&u->blob, u->res->blob_digest) < 0)
                r = fail(u, -EIO, NULL, "digesting the layer failed");
        if (r == 0 && u->plain)
                memcpy(u->res->diff_id, u->res->blob_digest, sizeof(u->res->diff_id));
        else if (r == 0 && digest_final(&u->diff, u->res->diff_id) < 0)
                r = fail(u, -EIO, NULL, "digesting the layer failed");
        u->res->blob_bytes = u->blob.bytes;
        return r;
}

int layer_unpack(int fd, int dir_fd, const struct layer_opts *o, struct layer_result *ret,
                 char *err, size_t errlen) {
        struct unpack *u = calloc(1, sizeof(*u));
        struct layer_result res = {0};
        size_t i;
        int r;

        if (!u) {
                snprintf(err, errlen, "layer: out of memory");
                return -ENOMEM;
        }
        u->o = o, u->res = &res, u->fd = fd, u->dir_fd = dir_fd, u->err = err, u->errlen = errlen;
        r = digest_init(&u->blob);
        if (r == 0)
                r = digest_init(&u->diff);
        if (r < 0)
                fail(u, r, NULL, "out of memory");
        else
                r = unpack_all(u);
        digest_free(&u->blob);
        digest_free(&u->diff);
        if (u->inner)
                archive_read_free(u->inner);
        if (u->outer)
                archive_read_free(u->outer);
        for (i = 0; i < u->ndirs; i++)
                free(u->dirs[i].path);
        free(u->dirs);
        free(u);
        if (r < 0) {
                layer_empty_dir(dir_fd);
                return r;
        }
        *ret = res;
        return 0;
}
