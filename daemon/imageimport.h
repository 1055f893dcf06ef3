/* imageimport.h: images brought into the image store (imagestore.h) from an OCI image
 * layout, an oci-archive or a docker-archive, each read from descriptors the caller
 * opened (the daemon opens host paths with the caller's rights; nothing here opens a
 * host path by name).
 *
 * JSON (index, manifests, configs, docker's manifest.json) is read with jansson (see
 * client/cli_json.c for why jansson), each document at most IMAGESTORE_MAX_JSON_BYTES.
 * Every blob is checked against its descriptor (digest and size) before it is used;
 * every layer's diff_id against the config; the config's os and architecture against
 * the store's platform. A multi-architecture index (OCI's, or docker's manifest list)
 * selects the store's platform: the os "linux", the architecture, and the variant when
 * the platform has one (arm: "v7"; arm64: "v8" or none). Beneath a layout, files are
 * opened with openat2 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and must be regular: a
 * symlink in a user's layout can make the daemon read nothing of the host. An archive
 * is unpacked with layer_unpack (its bounds, its refusals) into a scratch directory of
 * the store first, then imported from there (its symlinks followed as if the scratch
 * directory were "/": docker save links a layer it holds twice), then deleted.
 *
 * Any thread (a worker thread's: an import reads and writes whole images). Never logs. */
#ifndef SBX_IMAGEIMPORT_H
#define SBX_IMAGEIMPORT_H

#include <sys/types.h>

#include "imagestore.h"

/* Imports an image from an OCI image layout (oci-layout, index.json, blobs/sha256/...)
 * open at layout_fd (a directory the caller opened with the user's rights; the store
 * reads beneath it and never follows a symlink there). tag: the index entry whose
 * org.opencontainers.image.ref.name it is; NULL: the index must hold exactly one entry.
 * A multi-architecture index selects the store's platform. ref (may be NULL) is added
 * to the image's refs. Every blob is checked against its descriptor's digest and size;
 * the layers' diff_ids against the config. ret_manifest (may be NULL) gets the image's
 * id. -ENOENT no such tag, -EINVAL a malformed or lying layout or layer (or a config
 * that gives a blob the store unpacked another diff_id), -EFBIG past max_image_bytes,
 * -EDQUOT past max_image_entries, -ENOEXEC no image for this platform, -ENOSPC, -EIO.
 * A failure leaves nothing: the layers unpacked before it are swept (imagestore_sweep). */
int imageimport_oci(struct imagestore *s, int layout_fd, const char *tag, const char *ref,
                    char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen);

/* Whose rights the files beneath a user's layout are opened with (creds.h): the caller
 * of the request that names it, so that the daemon reads there only what they could. */
struct imageimport_reader {
        uid_t uid;
        gid_t gid;
        const gid_t *groups;
        size_t n_groups;
};

/* imageimport_oci, each file beneath layout_fd opened with as's rights (NULL: the
 * daemon's). -EACCES (err names the file) for one they may not read. */
int imageimport_oci_as(struct imagestore *s, int layout_fd, const struct imageimport_reader *as,
                       const char *tag, const char *ref, char ret_manifest[DIGEST_STR_BYTES],
                       char *err, size_t errlen);

/* The same from an oci-archive (a tar of a layout) read from fd. */
int imageimport_oci_archive(struct imagestore *s, int fd, const char *tag, const char *ref,
                            char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen);

/* From a docker-archive (what `docker save` writes: manifest.json, a config and layer
 * tars) read from fd. tag: an entry of an image's RepoTags ("name:tag"); NULL: the
 * archive must hold one image. The image's manifest is made here (an OCI manifest of
 * the config and layers as they are in the archive), so its id is that manifest's
 * digest. Errors as imageimport_oci's. */
int imageimport_docker_archive(struct imagestore *s, int fd, const char *tag, const char *ref,
                               char ret_manifest[DIGEST_STR_BYTES], char *err, size_t errlen);

#endif
