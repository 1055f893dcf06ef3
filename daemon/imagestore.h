/* imagestore.h: the content-addressed store of container images, under one directory the
 * daemon gives at open (STATE/images).
 *
 * Layout (every path made from a digest digest_parse accepted, never from a name):
 *   ROOT/                      root's (the daemon's user's), 0700, enforced at open:
 *                              images hold setuid files and trees owned by arbitrary
 *                              ids, so no host user may reach any file beneath it
 *   ROOT/blobs/sha256/HEX      manifests and configs, each written to ROOT/tmp and
 *                              renamed here only after its digest and size matched
 *   ROOT/layers/HEX/tree       a layer unpacked (HEX: its diff_id), shared by every
 *                              image that has it: an overlayfs lower directory
 *   ROOT/layers/HEX/size       "DATA DISK ENTRIES": its file bytes, its bytes on disk
 *                              and its tar's entries (files, directories, links: what
 *                              it costs in inodes)
 *   ROOT/images/HEX.json       an image (HEX: its manifest digest): config digest,
 *                              ordered layers (each with the compressed blob it was
 *                              unpacked from, when that blob was checked), references,
 *                              sizes, times
 *   ROOT/locks/HEX.lock        flock(2)ed while layer HEX is looked for and unpacked
 *   ROOT/tmp/, ROOT/trash/     work in progress, and what removals left to delete
 *   ROOT/owners                how the layers' owners were given (layerns.h)
 * A layer is unpacked in ROOT/tmp and renamed into ROOT/layers only once complete and
 * both its digests (blob, diff_id) matched, after syncfs; an image's record is written
 * (tmp, fsync, rename) only after all its layers and blobs are in place. A crash or a
 * kill at any moment therefore leaves only whole layers and blobs, and records whose
 * content is all there; imagestore_open empties tmp/, trash/ and locks/, drops records
 * that name a missing layer or blob, and deletes layers and blobs no record names.
 *
 * Why files, not a table of store.c: an image's record lives beside the content it
 * describes and is committed by the same rename discipline, so the two cannot disagree
 * after a crash (a row in sbxd.db could name a layer a crash lost, or the reverse); the
 * import runs on worker threads, and store.c's SQLite handle belongs to the loop; and
 * records are few (one per image) and read once at open.
 *
 * Layers are kept unpacked only: a layer's compressed blob is read from where it was
 * imported from (an OCI layout, an archive) and not kept, which would double the disk
 * an image costs. What is kept is which blob each layer was unpacked from: a record's
 * layer names its blob digest only when this store unpacked that blob and found that
 * diff_id (or found the pair recorded already), never from a manifest's word alone, so
 * imagestore_blob_layer may answer "blob B is layer L" and a pull skips downloading B
 * (a blob unpacks to one diff_id only: the digest of its decompressed bytes).
 *
 * Refs (the names that find an image) are strings the caller chooses; the store does
 * not interpret them, and one ref names at most one image (importing under a ref moves
 * it). Holds (a sandbox using an image) are counted in memory: the
 * daemon re-holds what its re-adopted sandboxes use after a restart.
 *
 * Threads: every function may be called from any thread; metadata is guarded by one
 * mutex, held only for memory and small file operations (never during an unpack or a
 * tree deletion), so the event loop may list, inspect, hold, release and remove while
 * worker threads import and collect. Two imports of one layer at once unpack it once
 * (the second waits on the layer's lock, then finds it). Functions return 0 (or a
 * count) or -errno, with a message in err (errlen bytes) when they take one. The store
 * never logs. */
#ifndef SBX_IMAGESTORE_H
#define SBX_IMAGESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "imageconfig.h"
#include "layer.h"
#include "layerns.h"

struct imagestore;

/* The most layers an image may have, and the largest JSON document (index, manifest,
 * config) the store reads. */
#define IMAGESTORE_MAX_LAYERS     256
#define IMAGESTORE_MAX_JSON_BYTES (4u << 20)
/* An index inside an index is followed this deep. */
#define IMAGESTORE_MAX_INDEX_DEPTH 2

struct imagestore_opts {
        uint64_t max_image_bytes;   /* file data of all the layers of one image */
        uint64_t max_layer_entries; /* tar entries of one layer */
        uint64_t max_image_entries; /* tar entries of all the layers of one image; 0: only
                                     * max_layer_entries bounds them */
        enum layer_whiteouts whiteouts;
        int keep_owners;
        /* A rootless daemon's subordinate ids (layerns.h): its layers are unpacked and
         * deleted in a namespace that maps them; zero: none, in this process. The store
         * records how its layers were unpacked and refuses to open the other way
         * (-ESTALE, layerns_check_store). */
        struct layerns ns;
        /* The platform imported from a multi-architecture index, in OCI's words
         * ("amd64", "arm64", "arm" and variant "v7"); NULL: this machine's. */
        const char *arch;
        const char *variant;
};

/* An image, as imagestore_list and imagestore_inspect return it (a copy: the caller
 * frees it with imagestore_image_free). */
struct imagestore_image {
        char manifest[DIGEST_STR_BYTES]; /* its id */
        char config[DIGEST_STR_BYTES];
        char **refs;
        size_t nrefs;
        char (*layers)[DIGEST_STR_BYTES]; /* diff_ids, lowest first */
        size_t nlayers;
        uint64_t size_bytes;  /* on disk: its layers (shared ones too) and blobs */
        uint64_t data_bytes;  /* file data of its layers */
        uint64_t entries;     /* tar entries of its layers */
        int64_t created_ms;   /* Unix time of its import */
        int64_t last_used_ms; /* of its import or its last hold */
        unsigned holds;
};

/* Opens the store at root, creating it (its last component only) when absent, 0700.
 * Refuses a root not owned by this process's user or reachable by others (group or
 * other bits) with -EPERM, and a symlink with -ELOOP. Then repairs what a crash left (see
 * above). *ret is written only on success. */
int imagestore_open(const char *root, const struct imagestore_opts *o, struct imagestore **ret,
                    char *err, size_t errlen);

/* Closes the store. Imports and collections must be over. Accepts NULL; returns NULL. */
struct imagestore *imagestore_close(struct imagestore *s);

/* What imagestore_open repaired: records dropped, and layers and blobs no record named. */
unsigned imagestore_repaired(const struct imagestore *s);

/* Finds the image named name: a ref, or a manifest digest ("sha256:" and 64 hex
 * digits). 0 and *ret (a copy), or -ENOENT. */
int imagestore_find(struct imagestore *s, const char *name, struct imagestore_image *ret);

/* Every image, oldest import first: *ret (an array the caller frees with
 * imagestore_list_free) and the count, or -ENOMEM. */
int imagestore_list(struct imagestore *s, struct imagestore_image **ret);
void imagestore_list_free(struct imagestore_image *list, size_t n);
void imagestore_image_free(struct imagestore_image *img);

/* The image's config (see imageconfig.h); the caller frees it with imageconfig_free.
 * -ENOENT no such image, -EINVAL its config is malformed. */
int imagestore_inspect(struct imagestore *s, const char *name, struct imageconfig *ret);

/* The manifest (config 0) or config (1) blob of the image name, opened read-only: its
 * fd (the caller's) or -errno. */
int imagestore_open_blob(struct imagestore *s, const char *name, int config);

/* The path of layer diff_id's tree (an overlayfs lower directory) into buf (len
 * bytes). -EINVAL not a digest, -ENAMETOOLONG. Does not check that the layer exists. */
int imagestore_layer_path(struct imagestore *s, const char *diff_id, char *buf, size_t len);

/* A sandbox uses the image name (hold) or no longer does (release): a held image is
 * never removed, pruned or evicted. Hold updates last_used_ms. -ENOENT no such image;
 * release of an image not held: -EINVAL. */
int imagestore_hold(struct imagestore *s, const char *name);
int imagestore_release(struct imagestore *s, const char *name);

/* Removes the image name: with a ref that is not its only one, only the ref is removed
 * (returns 0); otherwise the image, and its layers and blobs no other image uses. Fast
 * (renames into trash/): imagestore_collect deletes the trees. -ENOENT, -EBUSY held. */
int imagestore_remove(struct imagestore *s, const char *name, char *err, size_t errlen);

/* Removes the images no ref names (all: every image not held). Returns how many. */
int imagestore_prune(struct imagestore *s, int all);

/* Bytes on disk of all the store's layers and blobs (each counted once). */
uint64_t imagestore_usage(struct imagestore *s);

/* Tar entries of all the store's layers (each layer counted once): its inodes, about. */
uint64_t imagestore_entries(struct imagestore *s);

/* The cache bound: removes the least recently used images not held until the store
 * uses at most max_bytes and holds at most max_entries entries (or nothing more can be
 * removed). Returns how many it removed. */
int imagestore_fit(struct imagestore *s, uint64_t max_bytes, uint64_t max_entries);

/* Moves to trash/ every layer and blob that no record names and no pin holds: what a
 * failed import left (the layers it unpacked before the one refused). Returns how
 * many. */
unsigned imagestore_sweep(struct imagestore *s);

/* Deletes what removals moved to trash/ (slow: a worker thread's). 0 or -errno. */
int imagestore_collect(struct imagestore *s);

/* ---- for imageimport.c: the steps of an import -------------------------------------- */

/* The options the store was opened with, and its platform (arch and variant, never
 * NULL; variant may be ""). */
const struct imagestore_opts *imagestore_opts(const struct imagestore *s);
void imagestore_platform(const struct imagestore *s, const char **ret_arch,
                         const char **ret_variant);

/* Pins digest (a layer's diff_id or a blob's digest) so that no removal deletes it
 * while an import that will name it is under way; unpin when its record is committed
 * (or the import failed). Pins nest. -ENOMEM. */
int imagestore_pin(struct imagestore *s, const char *digest);
void imagestore_unpin(struct imagestore *s, const char *digest);

/* Stores the blob buf (len bytes) as digest, after checking that it is. -EINVAL it is
 * not (err says so), -ENOSPC, -EIO. */
int imagestore_put_blob(struct imagestore *s, const char *digest, const void *buf, size_t len,
                        char *err, size_t errlen);

/* What imagestore_get_layer asks for when the layer is not in the store yet: open the
 * layer's blob (-errno with err set, or an fd the store closes), and what its digest and
 * size must be (blob_digest NULL: not known, as in a docker-archive). */
struct imagestore_blob_source {
        int (*open)(void *userdata, char *err, size_t errlen);
        void *userdata;
        const char *blob_digest;
        int64_t blob_size; /* -1: not known */
        /* NULL, or a file whose bytes are the blob's, an uncompressed tar (a snapshot's
         * spool): its blocks are shared where the filesystem can (layer.h clone_fd).
         * The store closes it (and sets it to -1) once the layer is unpacked, before
         * it syncs the layer. */
        int *clone_fd;
};

/* One layer of a committed image: blob is the digest of the blob it was unpacked from
 * ("" when not known: see above). */
struct imagestore_layer_ref {
        char diff_id[DIGEST_STR_BYTES];
        char blob[DIGEST_STR_BYTES];
        uint64_t data_bytes, disk_bytes, entries;
};

/* What one image may still take: file bytes and tar entries. */
struct imagestore_budget {
        uint64_t bytes, entries;
};

/* Makes sure layer diff_id (pinned by the caller) is in the store: when it is not,
 * under the layer's lock, unpacks src's blob into ROOT/tmp, checks both its digests and
 * renames it into place; budget bounds its file data and entries, and loses what the
 * layer takes. *ret gets the layer (its blob: src's digest when it was checked here or
 * recorded with diff_id before). Errors as layer_unpack's (-EFBIG past the bytes,
 * -EDQUOT past the entries, err naming which), and -EINVAL for a digest or size that
 * does not match. */
int imagestore_get_layer(struct imagestore *s, const char *diff_id,
                         const struct imagestore_blob_source *src, struct imagestore_budget *budget,
                         struct imagestore_layer_ref *ret, char *err, size_t errlen);

/* Unpacks src's blob (a tar whose digest nobody knows ahead: a snapshot's, streamed from
 * a pipe) into the store as layer_unpack checks any layer, under the digest it turns out
 * to have (ret->diff_id), which is pinned (the caller unpins it); a layer of that digest
 * in the store already stays and the new one goes. budget bounds its file data and
 * entries (not lost: imagestore_get_layer of ret->diff_id counts it). 0 or -errno with
 * err, as imagestore_get_layer's. */
int imagestore_import_layer(struct imagestore *s, const struct imagestore_blob_source *src,
                            const struct imagestore_budget *budget,
                            struct imagestore_layer_ref *ret, char *err, size_t errlen);

/* The layer the blob digest was unpacked to, when a record says so (see above): 1 and
 * ret_diff_id, or 0. With pin, that layer is also pinned (imagestore_pin: the caller
 * unpins it), so that it is still there when the import that skipped the blob names
 * it. -ENOMEM (pinning). */
int imagestore_blob_layer(struct imagestore *s, const char *blob, int pin,
                          char ret_diff_id[DIGEST_STR_BYTES]);

/* Records the image manifest (its blobs and layers in place and pinned) under ref (may
 * be NULL), taking ref from any other image. blob_bytes: its manifest's and config's
 * sizes. An image recorded already gains the ref. -ENOSPC, -EIO, -ENOMEM. */
int imagestore_commit(struct imagestore *s, const char *manifest, const char *config,
                      const struct imagestore_layer_ref *layers, size_t nlayers,
                      uint64_t blob_bytes, const char *ref, char *err, size_t errlen);

/* A new empty directory in ROOT/tmp for an import's scratch work: its fd, and its name
 * there (ret_name, NAME_MAX + 1 bytes) for imagestore_scratch_remove. */
int imagestore_scratch(struct imagestore *s, int *ret_fd, char *ret_name);
void imagestore_scratch_remove(struct imagestore *s, const char *name);

/* An unnamed file of ROOT/tmp (O_TMPFILE, or a name unlinked at once), read and
 * written: gone with its last fd, its pages never written back if that comes soon
 * enough. The fd, or -errno. */
int imagestore_spool(struct imagestore *s);

/* Whether the store's filesystem shares blocks between files (a reflink: XFS made with
 * reflink, Btrfs), as tried when it was opened: a snapshot then clones what changed
 * into its spool and from there into its layer (snapshot.h) instead of copying it. */
int imagestore_shares_blocks(const struct imagestore *s);

#endif
