/* imageexport.h: an image of the store written as an OCI archive (ExportImage;
 * docs/snapshots.md): a tar of an OCI image layout (oci-layout, index.json,
 * blobs/sha256/...), which `skopeo copy oci-archive:FILE`, `podman load` and `sbx image
 * pull oci-archive:FILE` read.
 *
 * The store keeps layers unpacked only (imagestore.h), so each is written again from
 * its tree (layerwrite.h: overlayfs's whiteouts back to OCI's, owners as the store holds
 * them: the image's ids for a root daemon, the daemon's user as 0 for a rootless one);
 * the tars are uncompressed, so each one's digest is its diff_id, and the config is the
 * image's with rootfs.diff_ids naming them (its history and labels kept), the manifest
 * an OCI manifest of them. The layers' digests are not the image's original ones
 * (those were of the registry's tars, which the store does not keep).
 *
 * Any thread (a worker's). No state beyond a call. Never logs. */
#ifndef SBX_IMAGEEXPORT_H
#define SBX_IMAGEEXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "layerwrite.h"

struct imagestore;

/* Writes the image manifest (a digest of the store's) as an OCI archive to out_fd, its
 * index naming it tag (NULL: none); uids and gids map the store's owners to the image's,
 * kind says the form of the store's whiteouts (LAYERWRITE_UPPER a root daemon's,
 * LAYERWRITE_UPPER_USERXATTR a rootless one's). Scratch files go to the store's tmp/.
 * 0, or -errno with err: -ENOENT no such image, -EFBIG past max_bytes of archive. */
int imageexport_write(struct imagestore *s, const char *manifest, const char *tag,
                      const struct layerwrite_map *uids, const struct layerwrite_map *gids,
                      enum layerwrite_kind kind, int out_fd, uint64_t max_bytes, char *err,
                      size_t errlen);

#endif
