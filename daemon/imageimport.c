/* imageimport.c: an image read from an OCI layout, an oci-archive or a docker-archive
 * and put into the image store; see imageimport.h. Each source is turned into one plan
 * (a manifest, a config and the layers' blobs as files beneath a directory), checked
 * whole, then carried out by import_plan through the store's step functions. */
#include "imageimport.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "creds.h"

#define DS              DIGEST_STR_BYTES
#define REF_NAME        "org.opencontainers.image.ref.name"
#define MT_OCI_INDEX    "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST  "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"

/* Where an image's files are: a user's layout (no symlink followed) or an archive the
 * store unpacked (in_root: see open_file). */
struct srcdir {
        int fd;
        int in_root;
        const struct imageimport_reader *as; /* NULL: the daemon's rights */
};

/* A layer to import: its blob (a file beneath the plan's directory), what the blob's
 * digest and size must be, and its diff_id (from the config). */
struct plan_layer {
        char path[80]; /* "blobs/sha256/HEX", or a docker-archive's own name */
        char blob[DS];
        int64_t size;
        char diff_id[DS];
};

struct plan {
        struct srcdir dir;
        char manifest[DS], config[DS];
        char *manifest_buf, *config_buf;
        size_t manifest_len, config_len;
        struct plan_layer *layers;
        size_t nlayers;
};

static void plan_clear(struct plan *p) {
        free(p->manifest_buf);
        free(p->config_buf);
        free(p->layers);
}

/* ---- files beneath the source ------------------------------------------------------- */

/* Opens the regular file path beneath d (a FIFO or a device is refused without
 * blocking). In a user's layout no symlink is followed; in an archive the store unpacked
 * (in_root), symlinks are followed but never out of it (docker save links layers it
 * holds twice). fd or -errno (err set). */
static int open_file(const struct srcdir *d, const char *path, char *err, size_t errlen) {
        struct creds cr = {0};
        struct stat st;
        int fd = d->as ? creds_enter(&cr, d->as->uid, d->as->gid, d->as->groups, d->as->n_groups)
                       : 0;

        if (fd == 0)
                fd = layer_open_beneath(d->fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, d->in_root);
        creds_leave(&cr);

        if (fd < 0) {
                snprintf(err, errlen, "%.200s: %s", path,
                         fd == -ELOOP ? "a symlink (never followed in an image source)"
                                      : strerror(-fd));
                return fd == -ELOOP ? -EINVAL : fd;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
                snprintf(err, errlen, "%.200s: not a regular file", path);
                close(fd);
                return -EINVAL;
        }
        return fd;
}

/* Reads all of path (at most max bytes) into *ret (NUL-terminated, the caller frees). */
static int read_file(const struct srcdir *d, const char *path, size_t max, char **ret,
                     size_t *ret_len, char *err, size_t errlen) {
        struct stat st;
        char *buf;
        size_t len = 0;
        int fd = open_file(d, path, err, errlen);

        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > max) {
                snprintf(err, errlen, "%.200s: larger than %zu bytes", path, max);
                close(fd);
                return -EFBIG;
        }
        buf = malloc((size_t)st.st_size + 1);
        while (buf && len <= (size_t)st.st_size) {
                ssize_t n = read(fd, buf + len, (size_t)st.st_size + 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        if (!buf || len != (size_t)st.st_size) {
                free(buf);
                snprintf(err, errlen, "%.200s: %s", path,
                         buf ? "changed while read" : "out of memory");
                return buf ? -EIO : -ENOMEM;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* Reads the blob digest of the layout at d, checking its size and digest. */
static int read_blob(const struct srcdir *d, const char *digest, int64_t size, char **ret,
                     size_t *ret_len, char *err, size_t errlen) {
        char path[80], got[DS];
        const char *hex;
        int q;

        *ret = NULL;
        *ret_len = 0;
        if (!digest_parse(digest, &hex)) {
                snprintf(err, errlen, "\"%.100s\" is no sha256 digest", digest);
                return -EINVAL;
        }
        if (size < 0 || (uint64_t)size > IMAGESTORE_MAX_JSON_BYTES) {
                snprintf(err, errlen, "blob %s: a size of %" PRId64 " bytes", digest, size);
                return size < 0 ? -EINVAL : -EFBIG;
        }
        snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
        q = read_file(d, path, IMAGESTORE_MAX_JSON_BYTES, ret, ret_len, err, errlen);
        if (q == 0 && *ret_len != (size_t)size)
                q = -EINVAL,
                snprintf(err, errlen, "blob %s is %zu bytes, its descriptor says %" PRId64, digest,
                         *ret_len, size);
        if (q == 0 && (q = digest_buf(*ret, *ret_len, got)) == 0 && strcmp(got, digest) != 0)
                q = -EINVAL, snprintf(err, errlen, "blob %s has the digest %s", digest, got);
        if (q < 0) {
                free(*ret);
                *ret = NULL;
        }
        return q;
}

static json_t *parse_json(const char *buf, size_t len, const char *what, char *err, size_t errlen) {
        json_error_t je;
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);

        if (!j)
                snprintf(err, errlen, "%s: not JSON: %s", what, je.text);
        return j;
}

/* ---- descriptors, indexes, platforms -------------------------------------------------- */

/* The digest and size of descriptor j. */
static int desc_get(json_t *j, char digest[DS], int64_t *size, char *err, size_t errlen) {
        const char *d = json_string_value(json_object_get(j, "digest"));
        json_t *sz = json_object_get(j, "size");

        if (!d || !digest_parse(d, NULL) || !json_is_integer(sz) || json_integer_value(sz) < 0) {
                snprintf(err, errlen, "a descriptor without a sha256 digest and a size");
                return -EINVAL;
        }
        memcpy(digest, d, DS);
        *size = json_integer_value(sz);
        return 0;
}

static int is_index(json_t *desc, json_t *doc) {
        const char *mt = json_string_value(json_object_get(desc ? desc : doc, "mediaType"));

        if (mt)
                return !strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST);
        return doc && json_is_array(json_object_get(doc, "manifests"));
}

/* 1 when the descriptor's platform is the store's. */
static int platform_matches(struct imagestore *s, json_t *desc) {
        json_t *p = json_object_get(desc, "platform");
        const char *os = json_string_value(json_object_get(p, "os"));
        const char *arch = json_string_value(json_object_get(p, "architecture"));
        const char *var = json_string_value(json_object_get(p, "variant"));
        const char *want_arch, *want_var;

        imagestore_platform(s, &want_arch, &want_var);
        if (!os || !arch || strcmp(os, "linux") != 0 || strcmp(arch, want_arch) != 0)
                return 0;
        if (!want_var[0] || !var)
                return 1; /* arm64 images rarely say v8; arm ones always say their variant */
        return strcmp(var, want_var) == 0;
}

/* Chooses among the entries of the index doc: those named tag (every one when tag is
 * NULL; at depth > 0 tags are not looked at), then, when more than one is left, the
 * one for the store's platform. */
static int choose(struct imagestore *s, json_t *doc, const char *tag, json_t **ret, char *err,
                  size_t errlen) {
        json_t *m = json_object_get(doc, "manifests"), *e, *pick = NULL, *plat = NULL;
        size_t i, n = 0;
        const char *arch, *var;

        if (!json_is_array(m)) {
                snprintf(err, errlen, "an index without manifests");
                return -EINVAL;
        }
        json_array_foreach(m, i, e) {
                const char *name = json_string_value(
                        json_object_get(json_object_get(e, "annotations"), REF_NAME));
                if (tag && (!name || strcmp(name, tag) != 0))
                        continue;
                n++;
                pick = e;
                if (!plat && platform_matches(s, e))
                        plat = e;
        }
        imagestore_platform(s, &arch, &var);
        if (n == 0 && tag) {
                snprintf(err, errlen, "no image tagged \"%.100s\" in the layout", tag);
                return -ENOENT;
        }
        if (n == 1 && (!json_object_get(pick, "platform") || plat == pick)) {
                *ret = pick;
                return 0;
        }
        if (plat) {
                *ret = plat;
                return 0;
        }
        if (n > 1 && !json_object_get(pick, "platform")) {
                snprintf(err, errlen, "the layout holds %zu images: name one with its tag", n);
                return -EINVAL;
        }
        snprintf(err, errlen, "no image for linux/%s%s%s in the index", arch, var[0] ? "/" : "",
                 var);
        return -ENOEXEC;
}

/* From the layout's index.json down to one image manifest: *ret_buf (its bytes) and
 * its digest. */
static int find_manifest(struct imagestore *s, const struct srcdir *d, const char *tag,
                         char **ret_buf, size_t *ret_len, char digest[DS], char *err,
                         size_t errlen) {
        char *buf = NULL;
        size_t len = 0;
        json_t *doc, *desc = NULL;
        int depth,
                q = read_file(d, "index.json", IMAGESTORE_MAX_JSON_BYTES, &buf, &len, err, errlen);

        doc = q == 0 ? parse_json(buf, len, "index.json", err, errlen) : NULL;
        free(buf);
        if (!doc)
                return q < 0 ? q : -EINVAL;
        for (depth = 0; q == 0; depth++) {
                int64_t size;
                json_t *next;

                q = choose(s, doc, depth == 0 ? tag : NULL, &desc, err, errlen);
                if (q == 0)
                        q = desc_get(desc, digest, &size, err, errlen);
                if (q == 0)
                        q = read_blob(d, digest, size, ret_buf, ret_len, err, errlen);
                if (q < 0)
                        break;
                next = parse_json(*ret_buf, *ret_len, digest, err, errlen);
                if (next && !is_index(desc, next)) {
                        json_decref(next);
                        json_decref(doc);
                        return 0;
                }
                free(*ret_buf);
                *ret_buf = NULL;
                json_decref(doc);
                doc = next;
                if (!doc)
                        return -EINVAL;
                if (depth + 1 >= IMAGESTORE_MAX_INDEX_DEPTH) {
                        snprintf(err, errlen, "indexes nested deeper than %d",
                                 IMAGESTORE_MAX_INDEX_DEPTH);
                        q = -EINVAL;
                }
        }
        json_decref(doc);
        return q;
}

/* ---- manifests and configs ------------------------------------------------------------ */

static int layer_type_ok(const char *mt) {
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar",
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        };
        size_t i;

        for (i = 0; mt && i < sizeof(ok) / sizeof(ok[0]); i++)
                if (strcmp(mt, ok[i]) == 0)
                        return 1;
        return 0;
}

/* Checks the config (already read, digest checked) against the platform and takes its
 * diff_ids into the plan's layers, whose count it must match. */
static int use_config(struct imagestore *s, struct plan *p, char *err, size_t errlen) {
        json_t *c = parse_json(p->config_buf, p->config_len, "the config", err, errlen);
        json_t *ids = json_object_get(json_object_get(c, "rootfs"), "diff_ids"), *v;
        const char *os = json_string_value(json_object_get(c, "os"));
        const char *arch = json_string_value(json_object_get(c, "architecture"));
        const char *want_arch, *want_var;
        size_t i;
        int q = 0;

        imagestore_platform(s, &want_arch, &want_var);
        if (!c)
                return -EINVAL;
        if (!os || !arch || strcmp(os, "linux") || strcmp(arch, want_arch)) {
                snprintf(err, errlen, "the image is for %.50s/%.50s; this store runs linux/%s",
                         os ? os : "?", arch ? arch : "?", want_arch);
                q = -ENOEXEC;
        } else if (!json_is_array(ids) || json_array_size(ids) != p->nlayers) {
                snprintf(err, errlen, "the config names %zu diff_ids for %zu layers",
                         json_array_size(ids), p->nlayers);
                q = -EINVAL;
        }
        json_array_foreach(ids, i, v) {
                const char *d = json_string_value(v);
                if (q < 0)
                        break;
                if (!d || !digest_parse(d, NULL)) {
                        snprintf(err, errlen, "the config's diff_id %zu is no sha256 digest", i);
                        q = -EINVAL;
                } else {
                        memcpy(p->layers[i].diff_id, d, DS);
                }
        }
        json_decref(c);
        if (q == 0) {
                struct imageconfig parsed;
                q = imageconfig_parse(p->config_buf, p->config_len, &parsed);
                if (q == -EINVAL)
                        snprintf(err, errlen,
                                 "the config: a field of the wrong type (Env, "
                                 "Entrypoint, Cmd: lists of strings; WorkingDir, "
                                 "User: strings)");
                imageconfig_free(&parsed);
        }
        return q;
}

/* Fills the plan from an OCI (or docker v2) manifest of the layout at p->dir. */
static int plan_manifest(struct imagestore *s, struct plan *p, char *err, size_t errlen) {
        json_t *m = parse_json(p->manifest_buf, p->manifest_len, "the manifest", err, errlen);
        json_t *layers = json_object_get(m, "layers"), *l;
        int64_t csize;
        size_t i;
        int q;

        if (!m)
                return -EINVAL;
        q = desc_get(json_object_get(m, "config"), p->config, &csize, err, errlen);
        if (q == 0 && (!json_is_array(layers) || json_array_size(layers) > IMAGESTORE_MAX_LAYERS)) {
                snprintf(err, errlen, "a manifest without layers, or more than %d",
                         IMAGESTORE_MAX_LAYERS);
                q = -EINVAL;
        }
        if (q == 0 && !(p->layers = calloc(json_array_size(layers) + 1, sizeof(*p->layers))))
                q = -ENOMEM;
        json_array_foreach(layers, i, l) {
                const char *mt = json_string_value(json_object_get(l, "mediaType"));
                struct plan_layer *pl = &p->layers[i];
                if (q < 0)
                        break;
                if (!layer_type_ok(mt)) {
                        snprintf(err, errlen, "layer %zu: a media type not supported: %.100s", i,
                                 mt ? mt : "none");
                        q = -EINVAL;
                        break;
                }
                q = desc_get(l, pl->blob, &pl->size, err, errlen);
                if (q == 0 &&
                    (uint64_t)pl->size > 2 * imagestore_opts(s)->max_image_bytes + (1u << 20)) {
                        snprintf(err, errlen, "layer %s: %" PRId64 " bytes, past the image's bound",
                                 pl->blob, pl->size);
                        q = -EFBIG;
                }
                snprintf(pl->path, sizeof(pl->path), "blobs/sha256/%s", pl->blob + 7);
                p->nlayers++;
        }
        json_decref(m);
        if (q == 0)
                q = read_blob(&p->dir, p->config, csize, &p->config_buf, &p->config_len, err,
                              errlen);
        return q == 0 ? use_config(s, p, err, errlen) : q;
}

/* ---- carrying out a plan ---------------------------------------------------------------- */

struct source {
        const struct srcdir *dir;
        const char *path;
};

static int open_source(void *ud, char *err, size_t errlen) {
        struct source *src = ud;
        return open_file(src->dir, src->path, err, errlen);
}

/* Refuses a layer whose blob the store unpacked before to another diff_id than the
 * config's: a blob unpacks to one diff_id only, so the image lies. */
static int check_known_blob(struct imagestore *s, const struct plan_layer *l, char *err,
                            size_t errlen) {
        char known[DS];

        if (imagestore_blob_layer(s, l->blob, 0, known) != 1 || strcmp(known, l->diff_id) == 0)
                return 0;
        snprintf(err, errlen, "layer blob %s unpacks to the diff_id %s, the config says %s",
                 l->blob, known, l->diff_id);
        return -EINVAL;
}

/* Pins what the image names, makes sure each layer is in the store, stores the
 * manifest and config, records the image, and unpins. A layer the store has already is
 * not read again (a registry pull did not even download its blob: registry.h). */
static int import_plan(struct imagestore *s, struct plan *p, const char *ref, char *err,
                       size_t errlen) {
        struct imagestore_layer_ref *refs = calloc(p->nlayers + 1, sizeof(*refs));
        const struct imagestore_opts *o = imagestore_opts(s);
        struct imagestore_budget budget = {
                o->max_image_bytes, o->max_image_entries ? o->max_image_entries : UINT64_MAX};
        size_t i, pinned = 0;
        int q = refs ? 0 : -ENOMEM, blobs_pinned = 0;

        if (q == 0 && (q = imagestore_pin(s, p->manifest)) == 0) {
                if ((q = imagestore_pin(s, p->config)) < 0)
                        imagestore_unpin(s, p->manifest);
                blobs_pinned = q == 0;
        }
        for (i = 0; q == 0 && i < p->nlayers; i++) {
                struct source src = {&p->dir, p->layers[i].path};
                struct imagestore_blob_source bs = {open_source, &src, p->layers[i].blob,
                                                    p->layers[i].size, NULL};
                q = imagestore_pin(s, p->layers[i].diff_id);
                if (q < 0)
                        break;
                pinned++;
                q = check_known_blob(s, &p->layers[i], err, errlen);
                if (q == 0)
                        q = imagestore_get_layer(s, p->layers[i].diff_id, &bs, &budget, &refs[i],
                                                 err, errlen);
        }
        if (q == 0)
                q = imagestore_put_blob(s, p->config, p->config_buf, p->config_len, err, errlen);
        if (q == 0)
                q = imagestore_put_blob(s, p->manifest, p->manifest_buf, p->manifest_len, err,
                                        errlen);
        if (q == 0)
                q = imagestore_commit(s, p->manifest, p->config, refs, p->nlayers,
                                      p->manifest_len + p->config_len, ref, err, errlen);
        for (i = 0; i < pinned; i++)
                imagestore_unpin(s, p->layers[i].diff_id);
        if (blobs_pinned) {
                imagestore_unpin(s, p->config);
                imagestore_unpin(s, p->manifest);
        }
        if (q < 0) /* the layers unpacked before the one that failed */
                imagestore_sweep(s);
        if (q == -ENOMEM && !err[0])
                snprintf(err, errlen, "out of memory");
        free(refs);
        return q;
}

/* An OCI layout at d (a user's, or an oci-archive the store unpacked). */
static int import_oci(struct imagestore *s, const struct srcdir *d, const char *tag,
                      const char *ref, char ret_manifest[DIGEST_STR_BYTES], char *err,
                      size_t errlen) {
        struct plan p = {.dir = *d};
        char *layout = NULL;
        size_t len;
        json_t *j;
        int q;

        err[0] = '\0';
        q = read_file(d, "oci-layout", 4096, &layout, &len, err, errlen);
        j = q == 0 ? parse_json(layout, len, "oci-layout", err, errlen) : NULL;
        free(layout);
        if (q == 0 && !json_is_string(json_object_get(j, "imageLayoutVersion"))) {
                if (j)
                        snprintf(err, errlen, "oci-layout names no imageLayoutVersion");
                q = -EINVAL;
        }
        json_decref(j);
        if (q == 0)
                q = find_manifest(s, d, tag, &p.manifest_buf, &p.manifest_len, p.manifest, err,
                                  errlen);
        if (q == 0)
                q = plan_manifest(s, &p, err, errlen);
        if (q == 0)
                q = import_plan(s, &p, ref, err, errlen);
        if (q == 0 && ret_manifest)
                memcpy(ret_manifest, p.manifest, DS);
        plan_clear(&p);
        return q;
}

int imageimport_oci_as(struct imagestore *s, int layout_fd, const struct imageimport_reader *as,
                       const char *tag, const char *ref, char ret_manifest[DIGEST_STR_BYTES],
                       char *err, size_t errlen) {
        struct srcdir d = {layout_fd, 0, as};

        return import_oci(s, &d, tag, ref, ret_manifest, err, errlen);
}

int imageimport_oci(struct imagestore *s, int layout_fd, const char *tag, const char *ref,
                    char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen) {
        return imageimport_oci_as(s, layout_fd, NULL, tag, ref, ret_manifest, err, errlen);
}

/* ---- archives ----------------------------------------------------------------------------- */

/* Unpacks the archive read from fd into a scratch directory of the store. */
static int unpack_archive(struct imagestore *s, int fd, int *ret_fd, char *ret_name, char *err,
                          size_t errlen) {
        const struct imagestore_opts *o = imagestore_opts(s);
        /* Blobs may be compressed or not: twice the image's data, plus tar headers. */
        struct layer_opts lo = {2 * o->max_image_bytes + (16u << 20),
                                4 * IMAGESTORE_MAX_LAYERS + 64, LAYER_WHITEOUT_USERXATTR, 0, 0,
                                NULL};
        struct layer_result res;
        int q = imagestore_scratch(s, ret_fd, ret_name);

        if (q < 0) {
                snprintf(err, errlen, "image store: %s", strerror(-q));
                return q;
        }
        q = layer_unpack(fd, *ret_fd, &lo, &res, err, errlen);
        if (q < 0) {
                close(*ret_fd);
                imagestore_scratch_remove(s, ret_name);
        }
        return q;
}

int imageimport_oci_archive(struct imagestore *s, int fd, const char *tag, const char *ref,
                            char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen) {
        char name[NAME_MAX + 1];
        int dfd, q;

        err[0] = '\0';
        q = unpack_archive(s, fd, &dfd, name, err, errlen);
        if (q < 0)
                return q;
        q = import_oci(s, &(struct srcdir){dfd, 1, NULL}, tag, ref, ret_manifest, err, errlen);
        close(dfd);
        imagestore_scratch_remove(s, name);
        return q;
}

/* The media type of the layer file fd, from its first bytes. */
static const char *sniff_layer(int fd) {
        unsigned char m[4] = {0};

        if (pread(fd, m, sizeof(m), 0) < 2)
                return "application/vnd.oci.image.layer.v1.tar";
        if (m[0] == 0x1f && m[1] == 0x8b)
                return "application/vnd.oci.image.layer.v1.tar+gzip";
        if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
                return "application/vnd.oci.image.layer.v1.tar+zstd";
        return "application/vnd.oci.image.layer.v1.tar";
}

/* The entry of docker's manifest.json for tag (NULL: the only one). */
static int docker_entry(json_t *list, const char *tag, json_t **ret, char *err, size_t errlen) {
        json_t *e, *t;
        size_t i, k;

        if (!json_is_array(list) || json_array_size(list) == 0) {
                snprintf(err, errlen, "manifest.json lists no image");
                return -EINVAL;
        }
        if (!tag && json_array_size(list) > 1) {
                snprintf(err, errlen, "the archive holds %zu images: name one with its tag",
                         json_array_size(list));
                return -EINVAL;
        }
        json_array_foreach(list, i, e) {
                if (!tag) {
                        *ret = e;
                        return 0;
                }
                json_array_foreach(json_object_get(e, "RepoTags"), k,
                                   t) if (json_is_string(t) &&
                                          strcmp(json_string_value(t), tag) == 0) {
                        *ret = e;
                        return 0;
                }
        }
        snprintf(err, errlen, "no image tagged \"%.100s\" in the archive", tag);
        return -ENOENT;
}

/* Fills the plan's layers from an entry's Layers (digesting each file) and makes the
 * OCI manifest of the image. */
static int plan_docker_layers(struct plan *p, json_t *entry, char *err, size_t errlen) {
        json_t *layers = json_object_get(entry, "Layers"), *l, *m, *descs = json_array();
        size_t i;
        int q = 0;

        if (!json_is_array(layers) || json_array_size(layers) > IMAGESTORE_MAX_LAYERS ||
            !(p->layers = calloc(json_array_size(layers) + 1, sizeof(*p->layers)))) {
                snprintf(err, errlen, "manifest.json: no Layers, or more than %d",
                         IMAGESTORE_MAX_LAYERS);
                json_decref(descs);
                return -EINVAL;
        }
        json_array_foreach(layers, i, l) {
                struct plan_layer *pl = &p->layers[i];
                const char *path = json_string_value(l);
                uint64_t n = 0;
                int fd;

                if (!path || strlen(path) >= sizeof(pl->path)) {
                        snprintf(err, errlen, "manifest.json: layer %zu has no usable name", i);
                        q = -EINVAL;
                        break;
                }
                snprintf(pl->path, sizeof(pl->path), "%s", path);
                fd = open_file(&p->dir, path, err, errlen);
                q = fd < 0 ? fd : digest_fd(fd, pl->blob, &n);
                pl->size = (int64_t)n;
                if (q == 0)
                        json_array_append_new(descs, json_pack("{s:s,s:s,s:I}", "mediaType",
                                                               sniff_layer(fd), "digest", pl->blob,
                                                               "size", (json_int_t)n));
                if (fd >= 0)
                        close(fd);
                if (q < 0)
                        break;
                p->nlayers++;
        }
        m = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2, "mediaType",
                      MT_OCI_MANIFEST, "config", "mediaType",
                      "application/vnd.oci.image.config.v1+json", "digest", p->config, "size",
                      (json_int_t)p->config_len, "layers", descs);
        p->manifest_buf = q == 0 && m ? json_dumps(m, JSON_COMPACT) : NULL;
        json_decref(m);
        if (q == 0 && !p->manifest_buf)
                q = -ENOMEM;
        if (q == 0) {
                p->manifest_len = strlen(p->manifest_buf);
                q = digest_buf(p->manifest_buf, p->manifest_len, p->manifest);
        }
        return q;
}

static int plan_docker(struct imagestore *s, struct plan *p, const char *tag, char *err,
                       size_t errlen) {
        char *buf = NULL;
        size_t len = 0;
        json_t *list, *entry = NULL;
        const char *cfg;
        int q = read_file(&p->dir, "manifest.json", IMAGESTORE_MAX_JSON_BYTES, &buf, &len, err,
                          errlen);

        list = q == 0 ? parse_json(buf, len, "manifest.json", err, errlen) : NULL;
        free(buf);
        if (!list)
                return q < 0 ? q : -EINVAL;
        q = docker_entry(list, tag, &entry, err, errlen);
        cfg = q == 0 ? json_string_value(json_object_get(entry, "Config")) : NULL;
        if (q == 0 && !cfg) {
                snprintf(err, errlen, "manifest.json: an image without a Config");
                q = -EINVAL;
        }
        if (q == 0)
                q = read_file(&p->dir, cfg, IMAGESTORE_MAX_JSON_BYTES, &p->config_buf,
                              &p->config_len, err, errlen);
        if (q == 0)
                q = digest_buf(p->config_buf, p->config_len, p->config);
        if (q == 0)
                q = plan_docker_layers(p, entry, err, errlen);
        json_decref(list);
        return q == 0 ? use_config(s, p, err, errlen) : q;
}

int imageimport_docker_archive(struct imagestore *s, int fd, const char *tag, const char *ref,
                               char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen) {
        struct plan p = {.dir = {-1, 1}};
        char name[NAME_MAX + 1];
        int q;

        err[0] = '\0';
        q = unpack_archive(s, fd, &p.dir.fd, name, err, errlen);
        if (q < 0)
                return q;
        q = plan_docker(s, &p, tag, err, errlen);
        if (q == 0)
                q = import_plan(s, &p, ref, err, errlen);
        if (q == 0 && ret_manifest)
                memcpy(ret_manifest, p.manifest, DS);
        close(p.dir.fd);
        imagestore_scratch_remove(s, name);
        plan_clear(&p);
        return q;
}
