/* ociwrite.h: writes an OCI image layout directory (oci-layout, index.json,
 * blobs/sha256/HEX) as blobs arrive: each blob goes to a file without a name (O_TMPFILE,
 * or a temporary name where the file system has none) through its digest, and gets its
 * name only when its size and digest are those it was announced with; index.json is
 * replaced atomically under flock(2) of the directory.
 *
 * Called by the registry client (registry.c) on the thread that pulls; no state beyond
 * each struct ociwrite. Functions that fail write a sentence into the err buffer given
 * to ociwrite_open (it names the blob) and return -errno: -EBADMSG for content that is
 * not what was announced, the file system's -errno otherwise. */
#ifndef SBX_OCIWRITE_H
#define SBX_OCIWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

struct ociwrite;
struct ociwrite_blob;

/* Opens dir (which must exist), creating blobs/sha256 and oci-layout when missing. 0 with
 * *ret, or -errno. err (errlen bytes) is where every later failure is said; it must
 * outlive *ret. */
int ociwrite_open(const char *dir, char *err, size_t errlen, struct ociwrite **ret);

/* Frees o (NULL is fine). */
void ociwrite_close(struct ociwrite *o);

/* 1 when the layout holds digest already, with this size and these bytes (read through
 * the digest again); 0 when not (a wrong file there is left to be replaced); -errno. */
int ociwrite_has(struct ociwrite *o, const char *digest, uint64_t size);

/* Copies digest from blobs_dir/sha256/HEX (another layout's blobs, the image store's)
 * into the layout, checked like a download. 1 when copied, 0 when blobs_dir has no such
 * file or its content differs (then nothing is written), or -errno. */
int ociwrite_copy_from(struct ociwrite *o, const char *blobs_dir, const char *digest,
                       uint64_t size);

/* Starts a blob expected to be size bytes with this digest (checked by digest_parse).
 * 0 with *ret, or -errno. */
int ociwrite_blob_start(struct ociwrite *o, const char *digest, uint64_t size,
                        struct ociwrite_blob **ret);

/* Appends n bytes. -EBADMSG (and the message) when they go past the announced size. */
int ociwrite_blob_write(struct ociwrite_blob *b, const void *buf, size_t n);

/* Bytes written so far (0 for NULL). */
uint64_t ociwrite_blob_bytes(const struct ociwrite_blob *b);

/* Ends b: when its size and digest are those announced, fsyncs it and names it
 * blobs/sha256/HEX (replacing any file there). Frees b in every case; on failure nothing
 * of it stays. 0, -EBADMSG (size or digest differ), or -errno. */
int ociwrite_blob_commit(struct ociwrite_blob *b);

/* Frees b, leaving nothing of it on disk. NULL is fine. */
void ociwrite_blob_abort(struct ociwrite_blob *b);

/* Writes n bytes of buf as the blob digest (a manifest): start, write, commit. */
int ociwrite_put(struct ociwrite *o, const char *digest, const void *buf, size_t n);

/* Names the manifest (media_type, digest, size) in index.json, annotated
 * org.opencontainers.image.ref.name = tag when tag is not empty; an entry of the same
 * tag (or, without a tag, of the same digest and no tag) is replaced, others kept. */
int ociwrite_tag(struct ociwrite *o, const char *media_type, const char *digest, uint64_t size,
                 const char *tag);

#endif
