/* images.c: the image store as the daemon's users see it (images.h). */
#include "images.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "imageref.h"
#include "sbxd.h"

/* Tar entries of one layer: a full distribution's biggest layers have some 10^5. */
#define IMAGES_MAX_LAYER_ENTRIES 2000000u

int images_open(struct sbxd *d, const char *state_dir, char *err, size_t errlen) {
        struct imagestore_opts o = {
                .max_image_bytes = d->cfg->max_image_bytes,
                .max_layer_entries = IMAGES_MAX_LAYER_ENTRIES,
                .whiteouts = d->euid == 0 ? LAYER_WHITEOUT_CHARDEV : LAYER_WHITEOUT_USERXATTR,
                .keep_owners = d->euid == 0,
        };
        char path[4096];

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

        return strncmp(name, "sha256:", 7) == 0 && digest_parse(name, &hex) == 0;
}

int images_ref(uid_t uid, const char *name, char *buf, size_t len, char *err, size_t errlen) {
        struct imageref ref;
        char canon[IMAGEREF_NAME_MAX * 2 + IMAGEREF_TAG_MAX + DIGEST_STR_BYTES + 8];
        int r = imageref_parse(name, &ref, err, errlen);

        if (r < 0)
                return r;
        if ((size_t)imageref_format(&ref, canon, sizeof(canon)) >= sizeof(canon) ||
            (size_t)snprintf(buf, len, "%u/%s", (unsigned)uid, canon) >= len) {
                snprintf(err, errlen, "the image reference is too long");
                return -EINVAL;
        }
        return 0;
}

/* 1 when img has a ref of uid's. */
static int owns(const struct imagestore_image *img, uid_t uid) {
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

        if (r == 0 && !owns(ret, uid)) {
                imagestore_image_free(ret);
                r = -ENOENT;
        }
        return r;
}

int images_find(struct sbxd *d, uid_t uid, const char *name, struct imagestore_image *ret,
                char *err, size_t errlen) {
        char key[1024];
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
