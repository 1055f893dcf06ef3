/* layerwrite.h: directory trees written as one image layer: an uncompressed tar (OCI's
 * application/vnd.oci.image.layer.v1.tar, whose digest is its own diff_id), digested as
 * it is written. The writing side of layer.h, for a snapshot of a sandbox (its writable
 * root, an overlayfs upper directory, and its workspace).
 *
 * The trees are a sandbox's, so hostile: every entry is opened from its directory's
 * descriptor with O_NOFOLLOW (no symlink is ever followed, a name that changes from a
 * directory into anything else between the listing and the open is refused), the walk
 * is bounded in depth (LAYER_MAX_DEPTH), entries and file data; a regular file must
 * still be the file listed (same inode) and yield exactly the size its header says.
 * The caller freezes the sandbox meanwhile; these checks hold without it.
 *
 * What goes in:
 * - Names sorted bytewise within each directory, relative, without "./"; a tree's
 *   entries under its prefix ("" for the root, "workspace" for the workspace, whose
 *   directory itself is an entry then). Modes with their setuid, setgid and sticky
 *   bits; mtimes in whole seconds; numeric owners mapped through the maps (a host id no
 *   range maps becomes 65534, the kernel's overflow id, as the sandbox saw it); no
 *   user or group names, no extended attributes (layer.h drops them when it reads).
 * - In an overlayfs upper directory, overlayfs's whiteouts become OCI's: a 0/0
 *   character device is ".wh.NAME", and so is an empty file with user.overlay.whiteout
 *   where overlayfs used user.* xattrs (userxattr); a directory whose
 *   trusted.overlay.opaque (or, with userxattr, user.overlay.opaque) is "y" gets
 *   ".wh..wh..opq" after its own entry. Only the namespace overlayfs itself used: the
 *   other is data the sandbox could set (root inside may set user.* in a root sbxd's
 *   overlay), and in a plain directory (the workspace) nothing is a marker (a 0/0
 *   device there is a device, skipped).
 * - Hard links within the trees stay hard links (the first name seen is the target).
 * - Symlinks as their text. Other device nodes, FIFOs and sockets are skipped, counted,
 *   and the first one is named in the result; so are entries the sandbox named as OCI's
 *   whiteouts (".wh.NAME", ".wh..wh..opq"), which a layer would read as deletions.
 *
 * No state beyond a struct layerwrite: any thread, one writer per output. Never logs;
 * failures return -errno with a sentence (naming the entry) in the caller's err. */
#ifndef SBX_LAYERWRITE_H
#define SBX_LAYERWRITE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "digest.h"

/* Host ids host .. host + count - 1 are ids inside .. inside + count - 1. */
struct layerwrite_range {
        uint32_t host, inside, count;
};

#define LAYERWRITE_MAX_RANGES 2
/* What a host id no range maps is written as. */
#define LAYERWRITE_OVERFLOW_ID 65534u

struct layerwrite_map {
        struct layerwrite_range r[LAYERWRITE_MAX_RANGES];
        unsigned n;
};

struct layerwrite_opts {
        uint64_t max_bytes;   /* file data of all the trees; past it -EFBIG */
        uint64_t max_entries; /* entries of all the trees; past it -EFBIG */
        struct layerwrite_map uids, gids;
        int no_digest; /* the reader digests the tar (a snapshot's: imagestore.h); the
                        * result's digest is then "" */
        /* With no_digest, out_fd a regular file: a regular file of at least a block of
         * out_fd's filesystem, on that filesystem, has its data taken with
         * copy_file_range(2) (shared blocks, a reflink, on XFS or Btrfs) instead of read
         * and written. Its data then starts at a multiple of the block in out_fd, after
         * a pax global header ('g') whose one record is a comment: padding, which tar
         * readers skip. The data is in out_fd before the header that announces it.
         * Meanwhile out_fd's size may be larger (sparse); layerwrite_finish (or _free)
         * cuts it back to the tar's end. */
        int clone;
        /* Called after each write with the tar's bytes so far (may be NULL): a reader
         * of out_fd's file may read that far (snapshot.c). Non-zero: the reader has
         * stopped, and the write fails with -EPIPE. */
        int (*written)(void *ud, uint64_t bytes);
        void *written_ud;
};

struct layerwrite_result {
        char digest[DIGEST_STR_BYTES]; /* of the tar: its blob digest and diff_id */
        uint64_t size;                 /* bytes of the tar */
        uint64_t data_bytes;           /* file data in it */
        uint64_t entries;
        unsigned skipped;              /* devices, FIFOs, sockets left out */
        char first_skipped[256];       /* the first of them, by name */
};

/* What a tree is: which of its entries are overlayfs's markers (see above). */
enum layerwrite_kind {
        LAYERWRITE_PLAIN,            /* a directory of files: no markers */
        LAYERWRITE_UPPER,            /* overlayfs's upper, trusted.overlay.* (root) */
        LAYERWRITE_UPPER_USERXATTR,  /* overlayfs's upper, user.overlay.* (userxattr) */
};

struct layerwrite;

/* A writer of the tar to out_fd (written from its current offset). 0 with *ret, or
 * -errno with err. err (errlen bytes) is where every later failure is said; it must
 * outlive *ret. */
int layerwrite_open(int out_fd, const struct layerwrite_opts *o, char *err, size_t errlen,
                    struct layerwrite **ret);

/* Adds the tree of directory dir_fd, of kind kind, under prefix ("": at the layer's
 * root; else a relative name without a slash at either end, whose own entry is
 * dir_fd's). Trees
 * whose names overlap are the caller's mistake. 0 or -errno: -EFBIG past max_bytes,
 * -E2BIG past max_entries, -ELOOP too deep, -ESTALE an entry that changed while it was
 * read. */
int layerwrite_tree(struct layerwrite *w, int dir_fd, const char *prefix,
                    enum layerwrite_kind kind);

/* Ends the tar and fills *res. 0 or -errno. */
int layerwrite_finish(struct layerwrite *w, struct layerwrite_result *res);

/* Frees w (NULL is fine); an unfinished tar is left as it is (the caller removes it). */
void layerwrite_free(struct layerwrite *w);

#endif
