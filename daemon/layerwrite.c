/* layerwrite.c: directory trees written as one image layer; see layerwrite.h. */
#include "layerwrite.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer.h"

/* What OCI's whiteouts' names begin with (layer.h reads them so). */
#define WHITEOUT_PREFIX ".wh."

/* Where libarchive's output goes (on_write): out_fd; held in memory (a header whose
 * size decides the padding before it); or nowhere, the bytes being in out_fd already
 * (data taken with copy_file_range). */
enum out_mode { OUT_WRITE, OUT_HOLD, OUT_SKIP };

/* The largest block a clone aligns to: a pad ('g' header and its record) fits buf. */
#define CLONE_MAX_BLOCK 32768u
/* How far out_fd is extended (sparse) while clones go into it: a clone that lands past
 * a file's end makes XFS write back the file's last dirty page first (the header just
 * written), one wait per file; within its size it does not (1,000 clones of 100 KiB:
 * 230 ms against 60). Cut back to the tar's end when it ends. */
#define CLONE_SPAN (1ull << 40)
#define TAR_BLOCK 512u

/* A file with more than one link, by the first name it was written as. */
struct link {
        dev_t dev;
        ino_t ino;
        char *name;
};

struct layerwrite {
        struct archive *a;
        struct archive_entry *e;
        struct digest dg;
        int dg_ok;
        int out_fd;
        struct layerwrite_opts o;
        enum layerwrite_kind kind; /* of the tree being written */
        struct layerwrite_result res;
        struct link *links; /* an open-addressing table by (dev, ino), half full at most */
        size_t n_links, cap_links;
        char *err;
        size_t errlen;
        int write_errno; /* what the output's write said, for on_write's caller */
        /* With o.clone: where the tar starts in out_fd, its filesystem's block and
         * device (block 0: no clone), where output goes, and the header held. */
        off_t base;
        uint32_t block;
        dev_t out_dev;
        int extended; /* out_fd's size is base + CLONE_SPAN until the end */
        enum out_mode mode;
        size_t n_held;
        char held[16384];
        char buf[65536];
};

static int fail(struct layerwrite *w, int r, const char *name, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail(struct layerwrite *w, int r, const char *name, const char *fmt, ...) {
        char what[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        /* A long name by its end, so that the reason always fits. */
        if (w->errlen && name && strlen(name) > 200)
                snprintf(w->err, w->errlen, "...%s: %s", name + strlen(name) - 200, what);
        else if (w->errlen)
                snprintf(w->err, w->errlen, "%s%s%s", name ? name : "", name ? ": " : "", what);
        return r;
}

/* Bytes of the tar: digested, written whole, counted and told. 0 or -errno. */
static int emit(struct layerwrite *w, const void *buf, size_t n) {
        const char *p = buf;
        size_t done = 0;

        if (!w->o.no_digest && digest_update(&w->dg, buf, n) < 0)
                return -ENOMEM;
        while (done < n) {
                ssize_t k = write(w->out_fd, p + done, n - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                done += (size_t)k;
        }
        return 0;
}

/* n bytes more of the tar in out_fd: counted, and told to the reader. */
static int advance(struct layerwrite *w, size_t n) {
        w->res.size += n;
        if (w->o.written && w->o.written(w->o.written_ud, w->res.size) != 0)
                return -EPIPE;
        return 0;
}

/* libarchive's output, by w->mode. */
static la_ssize_t on_write(struct archive *a, void *ud, const void *buf, size_t n) {
        struct layerwrite *w = ud;
        int r;

        (void)a;
        if (w->mode == OUT_HOLD) {
                if (n > sizeof(w->held) - w->n_held) {
                        w->write_errno = ENAMETOOLONG;
                        return -1;
                }
                memcpy(w->held + w->n_held, buf, n);
                w->n_held += n;
                return (la_ssize_t)n;
        }
        if (w->mode == OUT_SKIP)
                r = lseek(w->out_fd, (off_t)n, SEEK_CUR) < 0 ? -errno : 0;
        else
                r = emit(w, buf, n);
        if (r == 0)
                r = advance(w, n);
        if (r < 0) {
                w->write_errno = -r;
                return -1;
        }
        return (la_ssize_t)n;
}

/* With o->clone: where and how out_fd takes clones (w->block stays 0 when it cannot). */
static void clone_setup(struct layerwrite *w) {
        struct statfs sf;
        struct stat st;

        if (!w->o.clone || !w->o.no_digest || fstat(w->out_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            fstatfs(w->out_fd, &sf) < 0 || sf.f_bsize < TAR_BLOCK ||
            (uint64_t)sf.f_bsize > CLONE_MAX_BLOCK || sf.f_bsize % TAR_BLOCK != 0 ||
            (w->base = lseek(w->out_fd, 0, SEEK_CUR)) < 0 || w->base % TAR_BLOCK != 0)
                return;
        w->block = (uint32_t)sf.f_bsize;
        w->out_dev = st.st_dev;
        w->extended = st.st_size <= w->base && ftruncate(w->out_fd, w->base + (off_t)CLONE_SPAN) == 0;
}

/* out_fd's size back to the tar's end (what clone_setup extended). */
static int cut_back(struct layerwrite *w) {
        if (!w->extended)
                return 0;
        w->extended = 0;
        return ftruncate(w->out_fd, w->base + (off_t)w->res.size) < 0 ? -errno : 0;
}

int layerwrite_open(int out_fd, const struct layerwrite_opts *o, char *err, size_t errlen,
                    struct layerwrite **ret) {
        struct layerwrite *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->out_fd = out_fd;
        w->o = *o;
        w->err = err;
        w->errlen = errlen;
        if (digest_init(&w->dg) < 0) {
                free(w);
                return -ENOMEM;
        }
        w->dg_ok = 1;
        clone_setup(w);
        w->a = archive_write_new();
        w->e = archive_entry_new();
        /* ustar where it fits, pax records only for what ustar cannot say (long names,
         * large ids or sizes): nothing that varies between two writes of one tree. */
        if (!w->a || !w->e || archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
            archive_write_add_filter_none(w->a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
            /* Unblocked: each header and data call reaches on_write at once, so that
             * a header can be held and data skipped (clones). */
            (w->block && archive_write_set_bytes_per_block(w->a, 0) != ARCHIVE_OK) ||
            archive_write_open(w->a, w, NULL, on_write, NULL) != ARCHIVE_OK) {
                layerwrite_free(w);
                return -ENOMEM;
        }
        *ret = w;
        return 0;
}

void layerwrite_free(struct layerwrite *w) {
        size_t i;

        if (!w)
                return;
        if (w->a)
                archive_write_free(w->a); /* closes it first: an unfinished tar stays so */
        (void)cut_back(w);
        if (w->e)
                archive_entry_free(w->e);
        if (w->dg_ok)
                digest_free(&w->dg);
        for (i = 0; i < w->cap_links; i++)
                free(w->links[i].name);
        free(w->links);
        free(w);
}

static uint32_t map_id(const struct layerwrite_map *m, uint32_t id) {
        unsigned i;

        for (i = 0; i < m->n; i++)
                if (id >= m->r[i].host && id - m->r[i].host < m->r[i].count)
                        return m->r[i].inside + (id - m->r[i].host);
        return LAYERWRITE_OVERFLOW_ID;
}

/* One more entry against the bound. */
static int count_entry(struct layerwrite *w, const char *name) {
        if (++w->res.entries > w->o.max_entries)
                return fail(w, -E2BIG, name, "more than %llu files and directories",
                            (unsigned long long)w->o.max_entries);
        return 0;
}

/* Writes the header of e (archive_entry_clear'ed and filled by the caller). */
static int put_header(struct layerwrite *w, const char *name) {
        if (archive_write_header(w->a, w->e) != ARCHIVE_OK)
                return fail(w, w->write_errno ? -w->write_errno : -EIO, name, "%s",
                            w->write_errno ? strerror(w->write_errno)
                                           : archive_error_string(w->a));
        return 0;
}

/* The entry name with the owner, mode and time of st (ids mapped). */
static void fill(struct layerwrite *w, const char *name, const struct stat *st) {
        archive_entry_clear(w->e);
        archive_entry_set_pathname(w->e, name);
        archive_entry_set_mode(w->e, st->st_mode);
        archive_entry_set_uid(w->e, map_id(&w->o.uids, st->st_uid));
        archive_entry_set_gid(w->e, map_id(&w->o.gids, st->st_gid));
        archive_entry_set_mtime(w->e, st->st_mtime, 0);
}

/* An empty regular file name (a whiteout or an opaque marker), root's, 0. */
static int put_marker(struct layerwrite *w, const char *name) {
        int r = count_entry(w, name);

        if (r < 0)
                return r;
        archive_entry_clear(w->e);
        archive_entry_set_pathname(w->e, name);
        archive_entry_set_filetype(w->e, AE_IFREG);
        archive_entry_set_perm(w->e, 0);
        archive_entry_set_size(w->e, 0);
        return put_header(w, name);
}

/* 1 when fd's (or, with fd -1, dfd's entry base's) xattr key is value. */
static int xattr_is(int fd, const char *key, const char *value) {
        char v[8];
        ssize_t n = fgetxattr(fd, key, v, sizeof(v));

        return n == (ssize_t)strlen(value) && memcmp(v, value, (size_t)n) == 0;
}

/* Whether directory fd is opaque, by the xattrs of w's kind of tree. */
static int opaque(const struct layerwrite *w, int fd) {
        if (w->kind == LAYERWRITE_UPPER)
                return xattr_is(fd, "trusted.overlay.opaque", "y");
        return w->kind == LAYERWRITE_UPPER_USERXATTR && xattr_is(fd, "user.overlay.opaque", "y");
}

/* Whether the empty regular file fd is a rootless whiteout (user.overlay.whiteout). */
static int user_whiteout(int fd) {
        return fgetxattr(fd, "user.overlay.whiteout", NULL, 0) >= 0;
}

static size_t link_slot(const struct link *t, size_t cap, dev_t dev, ino_t ino) {
        size_t i = (size_t)(((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev) & (cap - 1);

        while (t[i].name && !(t[i].dev == dev && t[i].ino == ino))
                i = (i + 1) & (cap - 1);
        return i;
}

/* Doubles the table (or makes its first 64 slots). */
static int links_grow(struct layerwrite *w) {
        size_t cap = w->cap_links ? 2 * w->cap_links : 64, i;
        struct link *t = calloc(cap, sizeof(*t));

        if (!t)
                return -ENOMEM;
        for (i = 0; i < w->cap_links; i++)
                if (w->links[i].name)
                        t[link_slot(t, cap, w->links[i].dev, w->links[i].ino)] = w->links[i];
        free(w->links);
        w->links = t;
        w->cap_links = cap;
        return 0;
}

/* The first name a file of several links was written as, or NULL (then remembered as
 * name). -ENOMEM through *r. A hash table: a sandbox may hold a million linked files,
 * and a list searched for each would keep its snapshot (and it frozen) for hours. */
static const char *link_target(struct layerwrite *w, const struct stat *st, const char *name,
                               int *r) {
        size_t i;

        *r = 0;
        if (2 * (w->n_links + 1) > w->cap_links && (*r = links_grow(w)) < 0)
                return NULL;
        i = link_slot(w->links, w->cap_links, st->st_dev, st->st_ino);
        if (w->links[i].name)
                return w->links[i].name;
        if (!(w->links[i].name = strdup(name))) {
                *r = -ENOMEM;
                return NULL;
        }
        w->links[i].dev = st->st_dev;
        w->links[i].ino = st->st_ino;
        w->n_links++;
        return NULL;
}

/* The data of the regular file fd (st: what was listed), exactly st_size bytes. */
static int put_data(struct layerwrite *w, int fd, const struct stat *st, const char *name) {
        uint64_t left = (uint64_t)st->st_size;

        while (left > 0) {
                ssize_t n = read(fd, w->buf, left < sizeof(w->buf) ? (size_t)left : sizeof(w->buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fail(w, -errno, name, "read: %s", strerror(errno));
                if (n == 0)
                        return fail(w, -ESTALE, name, "shrank while it was read");
                if (archive_write_data(w->a, w->buf, (size_t)n) != n)
                        return fail(w, w->write_errno ? -w->write_errno : -EIO, name, "%s",
                                    w->write_errno ? strerror(w->write_errno)
                                                   : archive_error_string(w->a));
                left -= (uint64_t)n;
        }
        return 0;
}

/* ---- clones: a file's data shared with out_fd (layerwrite.h) ------------------------------ */

/* n bytes (a multiple of TAR_BLOCK, at least one) of padding at the tar's end: a pax
 * global header whose one record is a comment (none when n is a single block). */
static int put_pad(struct layerwrite *w, size_t n) {
        char *h = w->buf, *rec = w->buf + TAR_BLOCK;
        size_t len = n - TAR_BLOCK, k;
        unsigned sum = 0;
        int d;

        memset(w->buf, 0, n);
        snprintf(h, 100, "sbxd.pad");
        memcpy(h + 100, "0000644", 8);
        memcpy(h + 108, "0000000", 8);
        memcpy(h + 116, "0000000", 8);
        snprintf(h + 124, 12, "%011o", (unsigned)len); /* len < 64 KiB */
        memcpy(h + 136, "00000000000", 12);
        h[156] = 'g';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        for (k = 0; k < TAR_BLOCK; k++)
                sum += (unsigned char)h[k];
        snprintf(h + 148, 7, "%06o", sum & 0777777u);
        if (len) { /* "LEN comment=xx...x\n", LEN counting the whole record */
                d = snprintf(rec, 16, "%zu comment=", len);
                memset(rec + d, 'x', len - (size_t)d - 1);
                rec[len - 1] = '\n';
        }
        d = emit(w, w->buf, n);
        return d < 0 ? d : advance(w, n);
}

/* Puts size bytes of fd (from 0) into out_fd at off. 0; -ESTALE when fd ends first;
 * another -errno when it cannot be so (the caller writes the data then). */
static int clone_data(struct layerwrite *w, int fd, uint64_t size, off_t off) {
        loff_t in = 0, out = off;

        while ((uint64_t)in < size) {
                ssize_t n = copy_file_range(fd, &in, w->out_fd, &out, (size_t)(size - (uint64_t)in), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ESTALE;
        }
        return 0;
}

/* The header of a regular file (filled) and its data from fd, cloned: the header is
 * held to learn its size, the data placed at the next block boundary after it, then
 * the padding and the header written, and libarchive's count of the data skipped.
 * Where the clone cannot be, the data is written as put_data writes it. */
static int put_cloned(struct layerwrite *w, int fd, const struct stat *st, const char *name) {
        uint64_t size = (uint64_t)st->st_size, left;
        off_t at, pad;
        int r, cloned;

        if (archive_write_finish_entry(w->a) != ARCHIVE_OK) /* the last one's padding */
                return fail(w, w->write_errno ? -w->write_errno : -EIO, name, "%s",
                            w->write_errno ? strerror(w->write_errno) : archive_error_string(w->a));
        w->mode = OUT_HOLD;
        w->n_held = 0;
        r = put_header(w, name);
        w->mode = OUT_WRITE;
        if (r < 0)
                return r;
        at = w->base + (off_t)w->res.size;
        pad = (off_t)((w->block - (uint64_t)(at + (off_t)w->n_held) % w->block) % w->block);
        if (pad == TAR_BLOCK)
                pad += w->block; /* a pad is a header and a record */
        cloned = clone_data(w, fd, size, at + pad + (off_t)w->n_held);
        if (cloned == -ESTALE)
                return fail(w, cloned, name, "shrank while it was read");
        r = pad ? put_pad(w, (size_t)pad) : 0;
        if (r == 0 && (r = emit(w, w->held, w->n_held)) == 0)
                r = advance(w, w->n_held);
        if (r < 0)
                return fail(w, r, name, "%s", strerror(-r));
        if (cloned < 0) /* written instead, over what came */
                return put_data(w, fd, st, name);
        w->mode = OUT_SKIP;
        for (left = size; left > 0 && r == 0;) {
                size_t n = left < sizeof(w->buf) ? (size_t)left : sizeof(w->buf);
                if (archive_write_data(w->a, w->buf, n) != (la_ssize_t)n)
                        r = fail(w, w->write_errno ? -w->write_errno : -EIO, name, "%s",
                                 w->write_errno ? strerror(w->write_errno)
                                                : archive_error_string(w->a));
                left -= n;
        }
        w->mode = OUT_WRITE;
        return r;
}

/* A regular file of the tree (dfd's base, listed as st). */
static int put_file(struct layerwrite *w, int dfd, const char *base, const char *name,
                    const struct stat *st) {
        struct stat now;
        const char *target;
        int fd, r;

        fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return fail(w, -errno, name, "open: %s", strerror(errno));
        if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
            now.st_dev != st->st_dev) {
                close(fd);
                return fail(w, -ESTALE, name, "changed while the snapshot was taken");
        }
        if (now.st_size == 0 && w->kind == LAYERWRITE_UPPER_USERXATTR && user_whiteout(fd)) {
                close(fd);
                return 1; /* a whiteout: the caller writes it */
        }
        r = 0;
        target = now.st_nlink > 1 ? link_target(w, &now, name, &r) : NULL;
        if (r == 0 && (r = count_entry(w, name)) == 0) {
                fill(w, name, &now);
                if (target) {
                        archive_entry_set_filetype(w->e, AE_IFREG);
                        archive_entry_set_hardlink(w->e, target);
                        archive_entry_set_size(w->e, 0);
                        r = put_header(w, name);
                } else if ((w->res.data_bytes += (uint64_t)now.st_size) > w->o.max_bytes) {
                        r = fail(w, -EFBIG, name, "its files hold more than %llu bytes",
                                 (unsigned long long)w->o.max_bytes);
                } else {
                        archive_entry_set_size(w->e, now.st_size);
                        if (w->block && now.st_dev == w->out_dev &&
                            (uint64_t)now.st_size >= w->block)
                                r = put_cloned(w, fd, &now, name);
                        else if ((r = put_header(w, name)) == 0)
                                r = put_data(w, fd, &now, name);
                }
        }
        close(fd);
        return r;
}

static int put_symlink(struct layerwrite *w, int dfd, const char *base, const char *name,
                       const struct stat *st) {
        char target[4096];
        ssize_t n = readlinkat(dfd, base, target, sizeof(target) - 1);
        int r;

        if (n < 0)
                return fail(w, errno == EINVAL ? -ESTALE : -errno, name, "readlink: %s",
                            strerror(errno));
        if ((size_t)n >= sizeof(target) - 1)
                return fail(w, -ENAMETOOLONG, name, "a symlink's target of 4096 bytes or more");
        target[n] = '\0';
        if ((r = count_entry(w, name)) < 0)
                return r;
        fill(w, name, st);
        archive_entry_set_symlink(w->e, target);
        return put_header(w, name);
}

static int walk(struct layerwrite *w, int dfd, char *path, size_t len, unsigned depth);

/* A directory of the tree: its entry, its opaque marker, then what it holds. */
static int put_dir(struct layerwrite *w, int dfd, const char *base, char *path, size_t len,
                   unsigned depth) {
        struct stat st;
        int fd, r;

        if (depth > LAYER_MAX_DEPTH)
                return fail(w, -ELOOP, path, "more than %u directories deep", LAYER_MAX_DEPTH);
        fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return fail(w, errno == ENOTDIR || errno == ELOOP ? -ESTALE : -errno, path,
                            "open: %s", strerror(errno));
        r = fstat(fd, &st) < 0 ? fail(w, -errno, path, "stat: %s", strerror(errno)) : 0;
        if (r == 0)
                r = count_entry(w, path);
        if (r == 0) {
                fill(w, path, &st);
                r = put_header(w, path);
        }
        if (r == 0 && opaque(w, fd)) {
                char marker[PATH_MAX];
                snprintf(marker, sizeof(marker), "%s/.wh..wh..opq", path);
                r = put_marker(w, marker);
        }
        if (r == 0)
                r = walk(w, fd, path, len, depth);
        close(fd);
        return r;
}

static int by_name(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory dfd but . and .., sorted: *ret (each and the array
 * malloc()ed), their count, or -errno. */
static int list_dir(int dfd, char ***ret) {
        int fd = dup(dfd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        char **names = NULL, **more;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r = 0;

        if (!d) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                return r;
        }
        rewinddir(d);
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n == cap) {
                        cap = cap ? 2 * cap : 16;
                        if (!(more = realloc(names, cap * sizeof(*names)))) {
                                r = -ENOMEM;
                                break;
                        }
                        names = more;
                }
                if (!(names[n] = strdup(de->d_name))) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        if (r == 0 && errno)
                r = -errno;
        closedir(d);
        if (r < 0) {
                while (n > 0)
                        free(names[--n]);
                free(names);
                return r;
        }
        if (n)
                qsort(names, n, sizeof(*names), by_name);
        *ret = names;
        return (int)n;
}

/* An entry left out: counted, the first named. */
static int skip(struct layerwrite *w, const char *path) {
        if (w->res.skipped++ == 0)
                snprintf(w->res.first_skipped, sizeof(w->res.first_skipped), "%s", path);
        return 0;
}

/* One entry base of directory dfd, named path (len bytes) in the layer. */
static int put_entry(struct layerwrite *w, int dfd, const char *base, char *path, size_t len,
                     unsigned depth) {
        struct stat st;
        int r;

        /* A name of OCI's whiteouts the sandbox gave a file: in a layer it would be a
         * deletion (of an image's file, or of a whole directory's). */
        if (strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
                return skip(w, path);
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return fail(w, -errno, path, "stat: %s", strerror(errno));
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) && w->kind != LAYERWRITE_PLAIN)
                r = 1; /* overlayfs's whiteout */
        else if (S_ISDIR(st.st_mode))
                return put_dir(w, dfd, base, path, len, depth + 1);
        else if (S_ISREG(st.st_mode))
                r = put_file(w, dfd, base, path, &st);
        else if (S_ISLNK(st.st_mode))
                return put_symlink(w, dfd, base, path, &st);
        else
                return skip(w, path);
        if (r == 1) { /* ".wh." + its name, beside it */
                char wh[PATH_MAX];
                size_t dir = len - strlen(base);
                snprintf(wh, sizeof(wh), "%.*s.wh.%s", (int)dir, path, base);
                r = put_marker(w, wh);
        }
        return r;
}

/* What directory dfd holds, named under path (len bytes, "" at the root). */
static int walk(struct layerwrite *w, int dfd, char *path, size_t len, unsigned depth) {
        char **names = NULL;
        int n = list_dir(dfd, &names), i, r = 0;

        if (n < 0)
                return fail(w, n, len ? path : "/", "cannot list it: %s", strerror(-n));
        for (i = 0; i < n && r == 0; i++) {
                size_t k = strlen(names[i]);
                if (len + 1 + k >= PATH_MAX) {
                        r = fail(w, -ENAMETOOLONG, path, "a name of %zu bytes or more",
                                 (size_t)PATH_MAX);
                        break;
                }
                if (len)
                        path[len] = '/';
                memcpy(path + len + (len ? 1 : 0), names[i], k + 1);
                r = put_entry(w, dfd, names[i], path, len + (len ? 1 : 0) + k, depth);
                path[len] = '\0';
        }
        for (i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

int layerwrite_tree(struct layerwrite *w, int dir_fd, const char *prefix,
                    enum layerwrite_kind kind) {
        char path[PATH_MAX];
        size_t len = strlen(prefix);

        w->kind = kind;
        if (len >= sizeof(path))
                return fail(w, -ENAMETOOLONG, prefix, "too long");
        memcpy(path, prefix, len + 1);
        if (len == 0)
                return walk(w, dir_fd, path, 0, 0);
        return put_dir(w, dir_fd, ".", path, len, 1);
}

int layerwrite_finish(struct layerwrite *w, struct layerwrite_result *res) {
        int r;

        if (archive_write_close(w->a) != ARCHIVE_OK)
                return fail(w, w->write_errno ? -w->write_errno : -EIO, NULL, "ending the tar: %s",
                            w->write_errno ? strerror(w->write_errno)
                                           : archive_error_string(w->a));
        r = cut_back(w);
        if (r < 0)
                return fail(w, r, NULL, "ending the tar: %s", strerror(-r));
        if (!w->o.no_digest && digest_final(&w->dg, w->res.digest) < 0)
                return -ENOMEM;
        *res = w->res;
        return 0;
}
