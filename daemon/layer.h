/* layer.h: unpacking one image layer (a tar, gzip- or zstd-compressed or not) into a
 * directory of the image store, so that layers stack as overlayfs lower directories.
 *
 * The tar is read with libarchive (Debian's libarchive-dev): it is the well-kept reader
 * of every tar dialect images are made with (ustar, pax with its long names and sparse
 * files, GNU), of gzip and of zstd, and it reads from a callback, so that the blob's
 * digest and the diff_id (the digest of the uncompressed tar) are computed in the same
 * single pass that writes the files. Only what OCI allows is enabled: the tar formats,
 * and gzip, zstd or no compression; no external filter program ever runs.
 *
 * What a layer may do, and what it may not:
 * - Every name is made relative to the layer's directory: a leading "./" is dropped,
 *   "." and empty components are ignored; an absolute name or one with a ".."
 *   component is refused. Every directory of a name is opened with openat2
 *   (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
 *   from the layer's directory, so that no symlink of the tree is ever followed: a
 *   file "through" a symlink of the layer is refused. Names deeper than
 *   LAYER_MAX_DEPTH directories are refused.
 * - Symlinks are stored as they are (their targets are text; they are resolved only
 *   later, inside the sandbox's own root).
 * - A hard link may only name a regular file or a symlink already written by this same
 *   layer (the layer's directory starts empty, so anything found beneath it is this
 *   layer's); a link to another layer's file, to a host file or out of the layer is
 *   refused.
 * - Device nodes, FIFOs and sockets are neutralised: skipped, counted and the first one
 *   named in the result (the caller warns). Some real images do ship /dev entries; a
 *   sandbox has a /dev of its own, and a device node in a lower layer of an overlay
 *   mounted without nodev would open the host's device to whoever reaches it.
 * - Extended attributes of the tar are dropped, all of them: a layer could otherwise
 *   forge overlayfs's own (trusted.overlay.* or user.overlay.*: redirects, metacopy,
 *   whiteouts of other layers' files). File capabilities (security.capability) are
 *   lost with them.
 * - Setuid and setgid bits are kept: the files exist only inside the store, which is a
 *   root-owned 0700 directory (see imagestore.h), and are reached only through a
 *   sandbox's own root.
 * - Whiteouts (".wh.NAME") and opaque directories (".wh..wh..opq") are converted to
 *   overlayfs's form. LAYER_WHITEOUT_CHARDEV (a root daemon): NAME becomes a 0/0
 *   character device, an opaque directory gets trusted.overlay.opaque="y".
 *   LAYER_WHITEOUT_USERXATTR (a rootless daemon, which cannot mknod a device): for
 *   overlayfs mounted with the `userxattr` option, NAME becomes an empty regular file
 *   with the user.overlay.whiteout xattr and its directory gets user.overlay.opaque="x"
 *   (Linux 6.7 and later: "xwhiteouts", honoured in lower layers only, which is what a
 *   layer is); an opaque directory gets user.overlay.opaque="y". Other ".wh..wh."
 *   names (aufs's bookkeeping) are skipped.
 * - Owners: with keep_owners (a root daemon, or a rootless one's helper in a user
 *   namespace that maps its subordinate ids, layerns.h) every entry keeps the tar's
 *   numeric uid and gid (never names); with max_id too, an id above it (which that
 *   namespace does not map) stays the unpacking user's (root inside), as the uid or gid
 *   of every entry does without keep_owners (a rootless daemon without subordinate ids:
 *   no CAP_CHOWN), as podman's ignore_chown_errors does; the sandbox maps that user to
 *   root inside.
 * - Bounds: the sum of the regular files' sizes (as their headers say, checked before
 *   a byte is written) against max_bytes, the number of entries against max_entries,
 *   the uncompressed stream against max_bytes plus LAYER_HEADER_ALLOWANCE per entry. A
 *   header whose size the data does not fill (a truncated or lying tar) is refused.
 *   Directory modes are applied at the end, so that a read-only directory of the tar
 *   never blocks its own entries; directories' times are not restored.
 * - Any refusal names the entry in err, and everything written into the directory is
 *   removed again before layer_unpack returns.
 *
 * No state beyond a call: any thread, one call per directory at a time. Never logs. */
#ifndef SBX_LAYER_H
#define SBX_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

/* Names deeper than this are refused (the tree must stay removable with one fd per
 * level). */
#define LAYER_MAX_DEPTH 256
/* Bytes of tar headers (and pax records) allowed per entry beyond the data. */
#define LAYER_HEADER_ALLOWANCE 65536

enum layer_whiteouts {
        LAYER_WHITEOUT_CHARDEV,   /* 0/0 devices, trusted.overlay.opaque: needs CAP_MKNOD */
        LAYER_WHITEOUT_USERXATTR, /* user.overlay.* xattrs: overlayfs's userxattr option */
};

struct layer_opts {
        uint64_t max_bytes;   /* file data of this layer; 0: refuse any data */
        uint64_t max_entries; /* entries of this layer */
        enum layer_whiteouts whiteouts;
        int keep_owners; /* chown to the tar's numeric ids (needs CAP_CHOWN) */
        uint32_t max_id; /* with keep_owners: ids above it are not given; 0: all are */
        /* NULL, or a file whose bytes from offset 0 are the uncompressed tar (a snapshot's
         * spool: snapshot.h): the whole blocks of a regular file's data are then taken
         * from it with copy_file_range(2), which shares them where the filesystem can
         * (XFS, Btrfs: a reflink) and copies in the kernel elsewhere; a last partial
         * block is written from the tar. Every byte of the tar is still read and
         * digested, and each byte so taken is compared with what the tar yields there;
         * what differs is written from the tar. Borrowed. */
        const int *clone_fd;
};

struct layer_result {
        char blob_digest[DIGEST_STR_BYTES]; /* of every byte read from the fd */
        char diff_id[DIGEST_STR_BYTES];     /* of the uncompressed tar */
        uint64_t blob_bytes;                /* read from the fd */
        uint64_t bytes;                     /* of file data written */
        uint64_t entries;                   /* of the tar */
        uint64_t skipped;                   /* device nodes, FIFOs, sockets */
        char first_skipped[256];            /* the name of the first one ("" if none) */
};

/* Reads the layer from fd (from its offset to its end) and writes its tree into dir_fd,
 * an empty directory the caller opened (O_DIRECTORY) and keeps owning. On success
 * returns 0 and fills *ret; the caller compares ret->blob_digest and ret->diff_id with
 * what the manifest and the config say (this function cannot know them until the end
 * of the stream). On failure returns -errno (-EINVAL a refused entry or a corrupt or
 * truncated stream, -EFBIG past max_bytes, -EDQUOT past max_entries (what it costs is
 * inodes), -ENOSPC, -EIO, -ENOMEM), says
 * why in err (errlen bytes, naming the entry) and leaves dir_fd empty. */
int layer_unpack(int fd, int dir_fd, const struct layer_opts *o, struct layer_result *ret,
                 char *err, size_t errlen);

/* Opens path beneath dir_fd ("" or "." for dir_fd itself) with flags (O_CLOEXEC added)
 * as layer_unpack opens a layer's directories: openat2 with RESOLVE_BENEATH,
 * RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV. With in_root, for a
 * tree layer_unpack wrote (whose symlinks are the archive's), symlinks are followed as
 * if dir_fd were "/" (RESOLVE_IN_ROOT): never out of it. fd or -errno (-ELOOP: a
 * symlink on the way, without in_root). */
int layer_open_beneath(int dir_fd, const char *path, int flags, int in_root);

/* Removes everything beneath dir_fd (not dir_fd itself), never following a symlink and
 * never leaving its filesystem. 0, or the first -errno met (it goes on past it). */
int layer_empty_dir(int dir_fd);

/* Removes the entry name of parent_fd, a whole tree when it is a directory. 0 (also
 * when there is no such entry) or -errno. */
int layer_remove_tree(int parent_fd, const char *name);

/* Bytes on disk beneath dir_fd (each inode once per directory walk; hard links of one
 * layer count once per link, a small overestimate). What cannot be read counts 0. */
uint64_t layer_disk_usage(int dir_fd);

#endif
