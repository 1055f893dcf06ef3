/* images.h: the daemon's container images as its users see them (docs/images.md): the
 * image store (imagestore.h) under STATE/images, opened at start-up, and the names by
 * which each user finds an image.
 *
 * Images are per user. Content is shared (a layer is unpacked once, whoever pulled it),
 * but a user reaches only the images they pulled or imported themselves: each name a
 * user gives an image is kept in the store as the ref "UID/NAME" (NAME canonical, as
 * imageref_format writes it, or the text of a local source), and a digest names an
 * image only for a user who has a ref to it. Another user's image, by name or digest,
 * is NOT_FOUND, word for word as a name nobody used.
 *
 * Loop thread, except where said. Nothing here logs. The collection job's state is
 * d->images_gc (made per job, freed when it ends). */
#ifndef SBX_IMAGES_H
#define SBX_IMAGES_H

#include <stddef.h>
#include <sys/types.h>

#include "imageref.h"
#include "imagestore.h"

struct sbxd;

/* Opens (creating) the store STATE/images for d (d->images). A root daemon keeps the
 * layers' owners; a rootless one cannot and maps whiteouts to user.overlay xattrs.
 * 0, or -errno with a one-line reason in err. */
int images_open(struct sbxd *d, const char *state_dir, char *err, size_t errlen);

/* Closes d's store (imports must be over). */
void images_close(struct sbxd *d);

/* Where an image comes from, as PullImage.source names it: a registry reference, or a
 * local source "oci:DIR[:TAG]", "oci-archive:FILE[:TAG]", "docker-archive:FILE[:NAME]"
 * (the path is absolute and ends at the first ':' after the prefix; TAG is the entry of
 * the layout's index, NAME the "repo:tag" of the archive's RepoTags). */
enum images_kind {
        IMAGES_REGISTRY = 0,
        IMAGES_OCI,
        IMAGES_OCI_ARCHIVE,
        IMAGES_DOCKER_ARCHIVE,
};

struct images_source {
        enum images_kind kind;
        struct imageref ref; /* IMAGES_REGISTRY */
        char *path;          /* the others: the host path (absolute), owned */
        char *tag;           /* NULL, or the tag or name after the path, owned */
};

/* Parses text into *ret (free with images_source_clear). Pure, any thread. 0, -ENOMEM,
 * or -EINVAL with the reason in err. */
int images_source_parse(const char *text, struct images_source *ret, char *err, size_t errlen);
void images_source_clear(struct images_source *s);

/* The store ref of name for uid ("UID/CANONICAL") into buf. A registry reference is
 * made canonical (python:3.12 -> docker.io/library/python:3.12), a local source kept as
 * written; -EINVAL with the reason in err when name is neither. */
int images_ref(uid_t uid, const char *name, char *buf, size_t len, char *err, size_t errlen);

/* The image uid names name (a reference as the user wrote it, or the manifest digest
 * "sha256:HEX" of an image uid has a ref to): 0 and *ret (free with
 * imagestore_image_free), -ENOENT (err: what to do), -EINVAL a malformed name. */
int images_find(struct sbxd *d, uid_t uid, const char *name, struct imagestore_image *ret,
                char *err, size_t errlen);

/* Deletes what removals moved to the store's trash/ (imagestore_collect), on libuv's
 * thread pool, one job at a time (asked again meanwhile: once more after it). Loop
 * thread; nothing to wait for (the loop runs until the job is done). */
void images_collect(struct sbxd *d);

/* Brings the store within sbxd --image-cache-size, and within its bound in entries
 * (--max-image-entries times --image-cache-size over --max-image-size: as many images
 * at the entries bound as the cache holds at the size bound), (imagestore_fit: the
 * least recently used images no sandbox holds go), never removing keep (a manifest digest, may be
 * NULL), and collects what went. Returns how many images it removed. Loop thread. */
int images_fit(struct sbxd *d, const char *keep);

struct config;
/* The store's bound in entries: as many images at --max-image-entries as
 * --image-cache-size holds images at --max-image-size (the defaults: 2.5 images, 1.25
 * million entries), never less than one image's bound. Pure. */
uint64_t images_cache_entries(const struct config *cfg);

/* 1 when img has a ref of uid's (the image is then uid's to see). */
int images_owns(const struct imagestore_image *img, uid_t uid);

/* The name of img's ref i for its user: the ref without its "UID/" prefix. */
const char *images_ref_name(const struct imagestore_image *img, size_t i);

#endif
