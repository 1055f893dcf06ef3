/* imageexport.c: an image of the store written as an OCI archive; see imageexport.h. */
#include "imageexport.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imagestore.h"
#include "layerns.h"

#define MT_OCI_INDEX    "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG   "application/vnd.oci.image.config.v1+json"
#define MT_OCI_TAR      "application/vnd.oci.image.layer.v1.tar"

/* One regenerated layer: its tar in the scratch directory. */
struct xlayer {
        int fd;
        struct layerwrite_result res;
};

struct xport {
        struct imagestore *s;
        struct imagestore_image img;
        struct xlayer *layers;
        size_t n;
        int scratch_fd;
        char scratch[NAME_MAX + 1];
        char *config, *manifest, *index;
        char config_digest[DIGEST_STR_BYTES], manifest_digest[DIGEST_STR_BYTES];
        char *err;
        size_t errlen;
};

static int fail(struct xport *x, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct xport *x, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
        return r;
}

/* Layer i of the image written again from its tree into the scratch directory. */
static int write_layer(struct xport *x, size_t i, const struct layerwrite_map *uids,
                       const struct layerwrite_map *gids, enum layerwrite_kind kind,
                       uint64_t *budget) {
        struct layerwrite_opts o = {.max_bytes = *budget, .max_entries = UINT64_MAX,
                                    .uids = *uids, .gids = *gids};
        char path[PATH_MAX], name[32], err[512] = "";
        int dfd, r;

        r = imagestore_layer_path(x->s, x->img.layers[i], path, sizeof(path));
        if (r < 0)
                return fail(x, r, "layer %s: %s", x->img.layers[i], strerror(-r));
        dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return fail(x, -errno, "layer %s: %s", x->img.layers[i], strerror(errno));
        snprintf(name, sizeof(name), "l%zu.tar", i);
        x->layers[i].fd = openat(x->scratch_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        /* A rootless store of subordinate ids is read in their namespace (layerns.h). */
        r = x->layers[i].fd < 0 ? -errno
                                : layerns_capture(&imagestore_opts(x->s)->ns, dfd, -1, kind,
                                                  x->layers[i].fd, &o, &x->layers[i].res, err,
                                                  sizeof(err));
        close(dfd);
        if (r < 0)
                return fail(x, r, "layer %s: %s", x->img.layers[i], err[0] ? err : strerror(-r));
        *budget -= x->layers[i].res.size < *budget ? x->layers[i].res.size : *budget;
        return 0;
}

/* The image's config with rootfs.diff_ids naming the regenerated layers. */
static int make_config(struct xport *x) {
        int fd = imagestore_open_blob(x->s, x->img.manifest, 1);
        json_t *c = fd >= 0 ? json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL) : NULL, *rootfs, *ids;
        size_t i;

        if (fd >= 0)
                close(fd);
        rootfs = json_is_object(c) ? json_object_get(c, "rootfs") : NULL;
        ids = json_array();
        for (i = 0; ids && i < x->n; i++)
                if (json_array_append_new(ids, json_string(x->layers[i].res.digest)) < 0)
                        break;
        if (!json_is_object(rootfs) || !ids || i < x->n ||
            json_object_set_new(rootfs, "diff_ids", ids) < 0 ||
            !(x->config = json_dumps(c, JSON_COMPACT))) {
                json_decref(c);
                return fail(x, -EINVAL, "the image's config cannot be read or written again");
        }
        json_decref(c);
        return digest_buf(x->config, strlen(x->config), x->config_digest);
}

/* An OCI manifest of the config and the regenerated layers, and the index naming it. */
static int make_manifest(struct xport *x, const char *tag) {
        json_t *layers = json_array(), *m, *idx, *desc;
        size_t i;

        for (i = 0; layers && i < x->n; i++)
                json_array_append_new(layers, json_pack("{s:s,s:s,s:I}", "mediaType", MT_OCI_TAR,
                                                        "digest", x->layers[i].res.digest, "size",
                                                        (json_int_t)x->layers[i].res.size));
        m = layers ? json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2, "mediaType",
                               MT_OCI_MANIFEST, "config", "mediaType", MT_OCI_CONFIG, "digest",
                               x->config_digest, "size", (json_int_t)strlen(x->config), "layers",
                               layers)
                   : NULL;
        x->manifest = m ? json_dumps(m, JSON_COMPACT) : NULL;
        json_decref(m);
        if (!x->manifest || digest_buf(x->manifest, strlen(x->manifest), x->manifest_digest) < 0)
                return fail(x, -ENOMEM, "daemon out of memory");
        desc = json_pack("{s:s,s:s,s:I}", "mediaType", MT_OCI_MANIFEST, "digest",
                         x->manifest_digest, "size", (json_int_t)strlen(x->manifest));
        if (desc && tag)
                json_object_set_new(desc, "annotations",
                                    json_pack("{s:s}", "org.opencontainers.image.ref.name", tag));
        idx = desc ? json_pack("{s:i,s:s,s:[o]}", "schemaVersion", 2, "mediaType", MT_OCI_INDEX,
                               "manifests", desc)
                   : NULL;
        x->index = idx ? json_dumps(idx, JSON_COMPACT) : NULL;
        json_decref(idx);
        return x->index ? 0 : fail(x, -ENOMEM, "daemon out of memory");
}

/* ---- the archive ------------------------------------------------------------------------ */

static int put_header(struct archive *a, struct archive_entry *e, const char *name, mode_t type,
                      mode_t perm, uint64_t size) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, type);
        archive_entry_set_perm(e, perm);
        archive_entry_set_size(e, (la_int64_t)size);
        return archive_write_header(a, e) == ARCHIVE_OK ? 0 : -EIO;
}

static int put_text(struct archive *a, struct archive_entry *e, const char *name,
                    const char *text) {
        size_t len = strlen(text);

        if (put_header(a, e, name, AE_IFREG, 0644, len) < 0 ||
            archive_write_data(a, text, len) != (la_ssize_t)len)
                return -EIO;
        return 0;
}

static int put_blob_text(struct archive *a, struct archive_entry *e, const char *digest,
                         const char *text) {
        char name[DIGEST_STR_BYTES + 16];

        snprintf(name, sizeof(name), "blobs/sha256/%.64s", digest + 7);
        return put_text(a, e, name, text);
}

static int put_blob_fd(struct archive *a, struct archive_entry *e, const struct xlayer *l) {
        char name[DIGEST_STR_BYTES + 16], buf[65536];
        uint64_t left = l->res.size;
        ssize_t n;

        snprintf(name, sizeof(name), "blobs/sha256/%.64s", l->res.digest + 7);
        if (put_header(a, e, name, AE_IFREG, 0644, l->res.size) < 0 ||
            lseek(l->fd, 0, SEEK_SET) < 0)
                return -EIO;
        while (left > 0) {
                n = read(l->fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
                if (n <= 0 || archive_write_data(a, buf, (size_t)n) != n)
                        return -EIO;
                left -= (uint64_t)n;
        }
        return 0;
}

/* 1 when layer i's digest was written already (two layers of one content). */
static int written_before(const struct xport *x, size_t i) {
        for (size_t k = 0; k < i; k++)
                if (strcmp(x->layers[k].res.digest, x->layers[i].res.digest) == 0)
                        return 1;
        return 0;
}

static int write_archive(struct xport *x, int out_fd) {
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        int r = a && e ? 0 : -ENOMEM;
        size_t i;

        if (r == 0 && (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
                       archive_write_open_fd(a, out_fd) != ARCHIVE_OK))
                r = -EIO;
        if (r == 0)
                r = put_text(a, e, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
        if (r == 0)
                r = put_text(a, e, "index.json", x->index);
        if (r == 0)
                r = put_header(a, e, "blobs/", AE_IFDIR, 0755, 0);
        if (r == 0)
                r = put_header(a, e, "blobs/sha256/", AE_IFDIR, 0755, 0);
        if (r == 0)
                r = put_blob_text(a, e, x->manifest_digest, x->manifest);
        if (r == 0)
                r = put_blob_text(a, e, x->config_digest, x->config);
        for (i = 0; r == 0 && i < x->n; i++)
                if (!written_before(x, i))
                        r = put_blob_fd(a, e, &x->layers[i]);
        if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
                r = -EIO;
        if (r < 0)
                fail(x, r, "writing the archive: %s",
                     a && archive_error_string(a) ? archive_error_string(a) : strerror(-r));
        if (e)
                archive_entry_free(e);
        if (a)
                archive_write_free(a);
        return r;
}

int imageexport_write(struct imagestore *s, const char *manifest, const char *tag,
                      const struct layerwrite_map *uids, const struct layerwrite_map *gids,
                      enum layerwrite_kind kind, int out_fd, uint64_t max_bytes, char *err,
                      size_t errlen) {
        struct xport x = {.s = s, .scratch_fd = -1, .err = err, .errlen = errlen};
        uint64_t budget = max_bytes;
        size_t i;
        int r = imagestore_find(s, manifest, &x.img);

        if (r < 0)
                return fail(&x, r, "no image %s", manifest);
        x.layers = calloc(x.img.nlayers + 1, sizeof(*x.layers));
        for (i = 0; x.layers && i < x.img.nlayers; i++)
                x.layers[i].fd = -1;
        r = !x.layers ? -ENOMEM : imagestore_scratch(s, &x.scratch_fd, x.scratch);
        if (r < 0)
                fail(&x, r, "image store: %s", strerror(-r));
        for (i = 0; r == 0 && i < x.img.nlayers; i++, x.n++)
                r = write_layer(&x, i, uids, gids, kind, &budget);
        if (r == 0)
                r = make_config(&x);
        if (r == 0)
                r = make_manifest(&x, tag);
        if (r == 0)
                r = write_archive(&x, out_fd);
        for (i = 0; x.layers && i < x.img.nlayers; i++)
                if (x.layers[i].fd >= 0)
                        close(x.layers[i].fd);
        if (x.scratch_fd >= 0) {
                close(x.scratch_fd);
                imagestore_scratch_remove(s, x.scratch);
        }
        free(x.layers);
        free(x.config);
        free(x.manifest);
        free(x.index);
        imagestore_image_free(&x.img);
        return r;
}
