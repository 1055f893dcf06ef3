/* images.c: the image store as the daemon's users see it (images.h). */
#include "images.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "imageref.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* Tar entries of one layer: a full distribution's biggest layers have some 10^5. */
#define IMAGES_MAX_LAYER_ENTRIES 2000000u

int images_open(struct sbxd *d, const char *state_dir, char *err, size_t errlen) {
        struct imagestore_opts o = {
                .max_image_bytes = d->cfg->max_image_bytes,
                .max_layer_entries = IMAGES_MAX_LAYER_ENTRIES,
                .max_image_entries = d->cfg->max_image_entries,
                .whiteouts = d->euid == 0 ? LAYER_WHITEOUT_CHARDEV : LAYER_WHITEOUT_USERXATTR,
                .keep_owners = d->euid == 0,
        };
        char path[4096];

        /* Rootless with subordinate ids: the layers get the image's owners as those ids,
         * the ones its sandboxes map (sbimage.c), through sbx-init (layerns.h). */
        if (d->euid != 0 && hostfeat_image_subids(&d->features) && d->cfg->init_path) {
                o.ns.init_path = d->cfg->init_path;
                o.ns.subuid = d->features.subuid_start;
                o.ns.subgid = d->features.subgid;
                o.ns.n_ids = hostfeat_image_subids(&d->features);
        }

        if ((size_t)snprintf(path, sizeof(path), "%s/images", state_dir) >= sizeof(path)) {
                snprintf(err, errlen, "the state directory's name is too long");
                return -ENAMETOOLONG;
        }
        return imagestore_open(path, &o, &d->images, err, errlen);
}

void images_close(struct sbxd *d) {
        d->images = imagestore_close(d->images);
}

static int is_digest(const char *name) {
        const char *hex;

        return strncmp(name, "sha256:", 7) == 0 && digest_parse(name, &hex);
}

static const struct {
        const char *prefix;
        enum images_kind kind;
} local_kinds[] = {
        {"oci:", IMAGES_OCI},
        {"oci-archive:", IMAGES_OCI_ARCHIVE},
        {"docker-archive:", IMAGES_DOCKER_ARCHIVE},
};

/* The local kind name's prefix says, or IMAGES_REGISTRY; *ret_rest: what follows it. */
static enum images_kind local_kind(const char *name, const char **ret_rest) {
        size_t i, n;

        for (i = 0; i < sizeof(local_kinds) / sizeof(local_kinds[0]); i++) {
                n = strlen(local_kinds[i].prefix);
                if (strncmp(name, local_kinds[i].prefix, n) == 0) {
                        *ret_rest = name + n;
                        return local_kinds[i].kind;
                }
        }
        *ret_rest = name;
        return IMAGES_REGISTRY;
}

void images_source_clear(struct images_source *s) {
        free(s->path);
        free(s->tag);
        memset(s, 0, sizeof(*s));
}

int images_source_parse(const char *text, struct images_source *ret, char *err, size_t errlen) {
        const char *rest, *colon;
        enum images_kind kind = local_kind(text, &rest);

        memset(ret, 0, sizeof(*ret));
        ret->kind = kind;
        if (kind == IMAGES_REGISTRY)
                return imageref_parse(text, &ret->ref, err, errlen);
        if (rest[0] != '/') {
                snprintf(err, errlen,
                         "the path of image source \"%.200s\" must be absolute (the daemon "
                         "does not know your working directory)",
                         text);
                return -EINVAL;
        }
        colon = strchr(rest, ':');
        ret->path = colon ? strndup(rest, (size_t)(colon - rest)) : strdup(rest);
        ret->tag = colon ? strdup(colon + 1) : NULL;
        if (!ret->path || (colon && !ret->tag)) {
                images_source_clear(ret);
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        if (colon &&
            (!ret->tag[0] || strlen(ret->tag) > IMAGEREF_NAME_MAX + IMAGEREF_TAG_MAX + 1)) {
                snprintf(err, errlen, "image source \"%.200s\": the tag after ':' is %s", text,
                         ret->tag[0] ? "too long" : "empty");
                images_source_clear(ret);
                return -EINVAL;
        }
        return 0;
}

int images_ref(uid_t uid, const char *name, char *buf, size_t len, char *err, size_t errlen) {
        struct images_source src;
        char canon[IMAGEREF_NAME_MAX * 2 + IMAGEREF_TAG_MAX + DIGEST_STR_BYTES + 8];
        int r = images_source_parse(name, &src, err, errlen);

        if (r < 0)
                return r;
        if (src.kind != IMAGES_REGISTRY) {
                /* A local source is named as written: its path, not a registry's name. */
                images_source_clear(&src);
                if ((size_t)snprintf(buf, len, "%u/%s", (unsigned)uid, name) >= len) {
                        snprintf(err, errlen, "the image source's name is too long");
                        return -EINVAL;
                }
                return 0;
        }
        if ((size_t)imageref_format(&src.ref, canon, sizeof(canon)) >= sizeof(canon) ||
            (size_t)snprintf(buf, len, "%u/%s", (unsigned)uid, canon) >= len) {
                snprintf(err, errlen, "the image reference is too long");
                return -EINVAL;
        }
        return 0;
}

int images_owns(const struct imagestore_image *img, uid_t uid) {
        char prefix[16];
        size_t i, n = (size_t)snprintf(prefix, sizeof(prefix), "%u/", (unsigned)uid);

        for (i = 0; i < img->nrefs; i++)
                if (strncmp(img->refs[i], prefix, n) == 0)
                        return 1;
        return 0;
}

/* The image of manifest digest that uid has a ref to. */
static int find_digest(struct sbxd *d, uid_t uid, const char *digest,
                       struct imagestore_image *ret) {
        int r = imagestore_find(d->images, digest, ret);

        if (r == 0 && !images_owns(ret, uid)) {
                imagestore_image_free(ret);
                r = -ENOENT;
        }
        return r;
}

int images_find(struct sbxd *d, uid_t uid, const char *name, struct imagestore_image *ret,
                char *err, size_t errlen) {
        char key[SBX_PATH_MAX_BYTES + 32];
        const char *at;
        int r;

        if (!d->images) {
                snprintf(err, errlen, "this sbxd has no image store");
                return -ENOENT;
        }
        if (is_digest(name)) {
                r = find_digest(d, uid, name, ret);
        } else {
                r = images_ref(uid, name, key, sizeof(key), err, errlen);
                if (r < 0)
                        return r;
                r = imagestore_find(d->images, key, ret);
                /* name@sha256:...: that manifest, when uid has it under any name. */
                at = strchr(name, '@');
                if (r == -ENOENT && at && is_digest(at + 1))
                        r = find_digest(d, uid, at + 1, ret);
        }
        if (r == -ENOENT)
                snprintf(err, errlen, "no image %s: pull it first (sbx image pull %s)", name,
                         name);
        return r;
}

const char *images_ref_name(const struct imagestore_image *img, size_t i) {
        const char *slash = strchr(img->refs[i], '/');

        return slash ? slash + 1 : img->refs[i];
}

/* ---- deleting off the loop ------------------------------------------------------------ */

/* The collection job: one at a time, one more after it when asked meanwhile. */
struct images_gc {
        struct sbxd *d;
        uv_work_t work;
        int again;
};

static void gc_work(uv_work_t *w) {
        struct images_gc *gc = w->data;

        (void)imagestore_collect(gc->d->images);
}

static void gc_done(uv_work_t *w, int status) {
        struct images_gc *gc = w->data;
        struct sbxd *d = gc->d;

        d->images_gc = NULL;
        if (gc->again)
                images_collect(d);
        free(gc);
}

void images_collect(struct sbxd *d) {
        struct images_gc *gc = d->images_gc;

        if (gc) {
                gc->again = 1;
                return;
        }
        gc = calloc(1, sizeof(*gc));
        if (!gc)
                return; /* left in trash/ for the next removal or start */
        gc->d = d;
        gc->work.data = gc;
        if (uv_queue_work(d->loop, &gc->work, gc_work, gc_done) < 0) {
                free(gc);
                return;
        }
        d->images_gc = gc;
}

/* Derived rather than a flag of its own: both bounds say "this many large images", and
 * an operator who grows the cache in bytes grows it in inodes alike. */
uint64_t images_cache_entries(const struct config *cfg) {
        long double n = (long double)cfg->max_image_entries * (long double)cfg->image_cache_bytes /
                        (long double)cfg->max_image_bytes;

        return n < cfg->max_image_entries ? cfg->max_image_entries : (uint64_t)n;
}

int images_fit(struct sbxd *d, const char *keep) {
        int held = keep && imagestore_hold(d->images, keep) == 0;
        int n = imagestore_fit(d->images, d->cfg->image_cache_bytes, images_cache_entries(d->cfg));

        if (held)
                (void)imagestore_release(d->images, keep);
        if (n > 0)
                images_collect(d);
        return n;
}
