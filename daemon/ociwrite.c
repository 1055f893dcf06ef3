/* ociwrite.c: an OCI image layout written blob by blob; see ociwrite.h. */
#include "ociwrite.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define INDEX_MAX_BYTES (4u << 20)
#define REF_NAME        "org.opencontainers.image.ref.name"

struct ociwrite {
        int dir_fd;   /* the layout */
        int blobs_fd; /* its blobs/sha256 */
        char *err;
        size_t errlen;
};

struct ociwrite_blob {
        struct ociwrite *o;
        int fd;
        char tmp_name[96]; /* "" for an O_TMPFILE */
        char digest[DIGEST_STR_BYTES];
        uint64_t size;
        struct digest d;
};

static int failf(struct ociwrite *o, int rc, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int failf(struct ociwrite *o, int rc, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(o->err, o->errlen, fmt, ap);
        va_end(ap);
        return rc;
}

static int write_all(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Opens (making it when missing) the directory name under dir_fd, never through a link. */
static int open_subdir(int dir_fd, const char *name) {
        int fd;

        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Writes n bytes of buf as dir_fd/name, atomically (a temporary name, then rename). */
static int replace_file(int dir_fd, const char *name, const void *buf, size_t n) {
        static unsigned long seq;
        char tmp[128];
        int fd, r;

        snprintf(tmp, sizeof(tmp), ".%s.%d-%lu.tmp", name, (int)getpid(),
                 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        r = write_all(fd, buf, n);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0)
                unlinkat(dir_fd, tmp, 0);
        return r;
}

int ociwrite_open(const char *dir, char *err, size_t errlen, struct ociwrite **ret) {
        static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        struct ociwrite *o = calloc(1, sizeof(*o));
        int blobs = -1, r = 0;

        if (!o)
                return -ENOMEM;
        o->err = err;
        o->errlen = errlen;
        o->blobs_fd = -1;
        o->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (o->dir_fd < 0)
                r = failf(o, -errno, "%s: %s", dir, strerror(errno));
        if (r == 0 && (blobs = open_subdir(o->dir_fd, "blobs")) < 0)
                r = failf(o, blobs, "%s/blobs: %s", dir, strerror(-blobs));
        if (r == 0 && (o->blobs_fd = open_subdir(blobs, "sha256")) < 0)
                r = failf(o, o->blobs_fd, "%s/blobs/sha256: %s", dir, strerror(-o->blobs_fd));
        if (blobs >= 0)
                close(blobs);
        if (r == 0 && faccessat(o->dir_fd, "oci-layout", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
            (r = replace_file(o->dir_fd, "oci-layout", layout, sizeof(layout) - 1)) < 0)
                failf(o, r, "%s/oci-layout: %s", dir, strerror(-r));
        if (r < 0) {
                ociwrite_close(o);
                return r;
        }
        *ret = o;
        return 0;
}

void ociwrite_close(struct ociwrite *o) {
        if (!o)
                return;
        if (o->dir_fd >= 0)
                close(o->dir_fd);
        if (o->blobs_fd >= 0)
                close(o->blobs_fd);
        free(o);
}

/* Opens dir_fd/HEX of digest for reading when it is a regular file of size bytes. */
static int open_blob(int dir_fd, const char *digest, uint64_t size) {
        const char *hex;
        struct stat st;
        int fd;

        if (!digest_parse(digest, &hex))
                return -EINVAL;
        fd = openat(dir_fd, hex, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
                close(fd);
                return -ENOENT;
        }
        return fd;
}

int ociwrite_has(struct ociwrite *o, const char *digest, uint64_t size) {
        char got[DIGEST_STR_BYTES];
        int fd = open_blob(o->blobs_fd, digest, size), r;

        if (fd == -ENOENT || fd == -ELOOP)
                return 0;
        if (fd < 0)
                return failf(o, fd, "blob %s: %s", digest, strerror(-fd));
        r = digest_fd(fd, got, NULL);
        close(fd);
        if (r < 0)
                return failf(o, r, "blob %s: %s", digest, strerror(-r));
        return strcmp(got, digest) == 0;
}

int ociwrite_blob_start(struct ociwrite *o, const char *digest, uint64_t size,
                        struct ociwrite_blob **ret) {
        static unsigned long seq;
        struct ociwrite_blob *b;
        int r;

        if (!digest_parse(digest, NULL))
                return failf(o, -EBADMSG, "bad digest \"%.80s\"", digest);
        if (!(b = calloc(1, sizeof(*b))))
                return -ENOMEM;
        b->o = o;
        b->size = size;
        memcpy(b->digest, digest, DIGEST_STR_BYTES);
        b->fd = openat(o->blobs_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
        if (b->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
                snprintf(b->tmp_name, sizeof(b->tmp_name), ".partial-%d-%lu", (int)getpid(),
                         __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
                b->fd = openat(o->blobs_fd, b->tmp_name,
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        }
        if (b->fd < 0) {
                r = failf(o, -errno, "blob %s: %s", digest, strerror(errno));
                free(b);
                return r;
        }
        if ((r = digest_init(&b->d)) < 0) {
                ociwrite_blob_abort(b);
                return r;
        }
        *ret = b;
        return 0;
}

int ociwrite_blob_write(struct ociwrite_blob *b, const void *buf, size_t n) {
        int r;

        if (n > b->size - b->d.bytes)
                return failf(b->o, -EBADMSG, "blob %s: more bytes than its size, %llu", b->digest,
                             (unsigned long long)b->size);
        if ((r = write_all(b->fd, buf, n)) < 0)
                return failf(b->o, r, "blob %s: %s", b->digest, strerror(-r));
        return digest_update(&b->d, buf, n);
}

uint64_t ociwrite_blob_bytes(const struct ociwrite_blob *b) {
        return b ? b->d.bytes : 0;
}

void ociwrite_blob_abort(struct ociwrite_blob *b) {
        if (!b)
                return;
        digest_free(&b->d);
        if (b->fd >= 0)
                close(b->fd);
        if (b->tmp_name[0])
                unlinkat(b->o->blobs_fd, b->tmp_name, 0);
        free(b);
}

/* Gives b's file its name: a named temporary is renamed; an O_TMPFILE is linked to a
 * temporary name first (linkat cannot replace), then renamed. */
static int name_blob(struct ociwrite_blob *b, const char *hex) {
        static unsigned long seq;
        char proc[64];

        if (!b->tmp_name[0]) {
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", b->fd);
                snprintf(b->tmp_name, sizeof(b->tmp_name), ".linked-%d-%lu", (int)getpid(),
                         __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
                if (linkat(AT_FDCWD, proc, b->o->blobs_fd, b->tmp_name, AT_SYMLINK_FOLLOW) < 0) {
                        b->tmp_name[0] = '\0';
                        return -errno;
                }
        }
        if (renameat(b->o->blobs_fd, b->tmp_name, b->o->blobs_fd, hex) < 0)
                return -errno;
        b->tmp_name[0] = '\0';
        return 0;
}

int ociwrite_blob_commit(struct ociwrite_blob *b) {
        char got[DIGEST_STR_BYTES];
        const char *hex = b->digest + 7;
        uint64_t n = b->d.bytes;
        int r = 0;

        if (n != b->size)
                r = failf(b->o, -EBADMSG, "blob %s: %llu bytes, not its size %llu", b->digest,
                          (unsigned long long)n, (unsigned long long)b->size);
        else if ((r = digest_final(&b->d, got)) < 0)
                failf(b->o, r, "blob %s: %s", b->digest, strerror(-r));
        else if (strcmp(got, b->digest) != 0)
                r = failf(b->o, -EBADMSG, "blob %s: its content has digest %s", b->digest, got);
        else if (fsync(b->fd) < 0 || (r = name_blob(b, hex)) < 0)
                r = failf(b->o, r < 0 ? r : -errno, "blob %s: %s", b->digest,
                          strerror(r < 0 ? -r : errno));
        ociwrite_blob_abort(b);
        return r;
}

int ociwrite_put(struct ociwrite *o, const char *digest, const void *buf, size_t n) {
        struct ociwrite_blob *b;
        int r = ociwrite_blob_start(o, digest, n, &b);

        if (r == 0 && (r = ociwrite_blob_write(b, buf, n)) < 0)
                ociwrite_blob_abort(b);
        else if (r == 0)
                r = ociwrite_blob_commit(b);
        return r;
}

int ociwrite_copy_from(struct ociwrite *o, const char *blobs_dir, const char *digest,
                       uint64_t size) {
        char buf[65536];
        struct ociwrite_blob *b;
        int dir = open(blobs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), sub, fd, r;

        if (dir < 0)
                return 0;
        sub = openat(dir, "sha256", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        fd = sub < 0 ? -ENOENT : open_blob(sub, digest, size);
        if (sub >= 0)
                close(sub);
        if (fd < 0)
                return 0;
        if ((r = ociwrite_blob_start(o, digest, size, &b)) < 0) {
                close(fd);
                return r;
        }
        for (;;) {
                ssize_t k = read(fd, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0 || (r = ociwrite_blob_write(b, buf, (size_t)k)) < 0) {
                        r = k < 0 ? -errno : r;
                        break;
                }
        }
        close(fd);
        if (r < 0) {
                ociwrite_blob_abort(b);
                return r == -EBADMSG ? 0 : r;
        }
        r = ociwrite_blob_commit(b);
        return r == 0 ? 1 : r == -EBADMSG ? 0 : r;
}

/* index.json as it is (or a new one when there is none). */
static json_t *read_index(struct ociwrite *o) {
        json_t *j = NULL;
        int fd = openat(o->dir_fd, "index.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;

        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size <= INDEX_MAX_BYTES)
                j = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
        if (fd >= 0)
                close(fd);
        if (!json_is_object(j) || !json_is_array(json_object_get(j, "manifests"))) {
                json_decref(j);
                j = json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType",
                              "application/vnd.oci.image.index.v1+json", "manifests");
        }
        return j;
}

/* 1 when entry e is the one a new entry (tag, digest) replaces. */
static int replaced(json_t *e, const char *digest, const char *tag) {
        const char *name =
                json_string_value(json_object_get(json_object_get(e, "annotations"), REF_NAME));
        if (tag[0])
                return name && strcmp(name, tag) == 0;
        return !name && json_is_string(json_object_get(e, "digest")) &&
               strcmp(json_string_value(json_object_get(e, "digest")), digest) == 0;
}

int ociwrite_tag(struct ociwrite *o, const char *media_type, const char *digest, uint64_t size,
                 const char *tag) {
        json_t *index, *list, *entry;
        char *text = NULL;
        size_t i;
        int r = -ENOMEM;

        if (flock(o->dir_fd, LOCK_EX) < 0)
                return failf(o, -errno, "index.json: flock: %s", strerror(errno));
        index = read_index(o);
        list = json_object_get(index, "manifests");
        for (i = json_array_size(list); i-- > 0;)
                if (replaced(json_array_get(list, i), digest, tag))
                        json_array_remove(list, i);
        entry = json_pack("{s:s, s:s, s:I}", "mediaType", media_type, "digest", digest, "size",
                          (json_int_t)size);
        if (entry && tag[0])
                json_object_set_new(entry, "annotations", json_pack("{s:s}", REF_NAME, tag));
        if (list && entry && json_array_append_new(list, entry) == 0 &&
            (text = json_dumps(index, JSON_COMPACT)))
                r = replace_file(o->dir_fd, "index.json", text, strlen(text));
        else
                json_decref(entry);
        if (r < 0)
                failf(o, r, "index.json: %s", strerror(-r));
        free(text);
        json_decref(index);
        flock(o->dir_fd, LOCK_UN);
        return r;
}
