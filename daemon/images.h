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
 * Loop thread, except where said. Nothing here logs. */
#ifndef SBX_IMAGES_H
#define SBX_IMAGES_H

#include <stddef.h>
#include <sys/types.h>

#include "imagestore.h"

struct sbxd;

/* Opens (creating) the store STATE/images for d (d->images). A root daemon keeps the
 * layers' owners; a rootless one cannot and maps whiteouts to user.overlay xattrs.
 * 0, or -errno with a one-line reason in err. */
int images_open(struct sbxd *d, const char *state_dir, char *err, size_t errlen);

/* Closes d's store (imports must be over). */
void images_close(struct sbxd *d);

/* The store ref of name for uid ("UID/CANONICAL") into buf. A registry reference is
 * made canonical (python:3.12 -> docker.io/library/python:3.12); -EINVAL with the
 * reason in err when name is not one. */
int images_ref(uid_t uid, const char *name, char *buf, size_t len, char *err, size_t errlen);

/* The image uid names name (a reference as the user wrote it, or the manifest digest
 * "sha256:HEX" of an image uid has a ref to): 0 and *ret (free with
 * imagestore_image_free), -ENOENT (err: what to do), -EINVAL a malformed name. */
int images_find(struct sbxd *d, uid_t uid, const char *name, struct imagestore_image *ret,
                char *err, size_t errlen);

#endif
