/* image.h: the root of a sandbox made from an image (proto/init.proto, Setup's
 * image_layers): an overlay of the image's layers, shared read-only by every sandbox of
 * the image, under the sandbox's own writable upper directory.
 *
 * Stage 0 calls image_enter_userns() then image_mount_root() (root mode), or
 * image_mount_root() after ns_unshare_sandbox() (rootless: only there may its user
 * namespace's root mount an overlay). The mount is attached nowhere; PID 1 makes it the
 * view's root (mnt_config.root_mount_fd). Each returns 0 (or a descriptor) or -errno and
 * describes a failure in err. */
#ifndef SBX_INIT_IMAGE_H
#define SBX_INIT_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/* Root mode: a user namespace whose ids 0 .. SBX_IMAGE_IDS - 1 are the host's base and
 * on, with setgroups(2) allowed (an image's programs drop to their users). Returns its
 * descriptor. */
int image_userns(uint32_t base, struct util_err *err);

/* Root mode: enters userns_fd as its root (uids, gids and groups 0), with every
 * capability there and none on the host. */
int image_enter_userns(int userns_fd, struct util_err *err);

/* An image's sandbox with a tmpfs disk limit (rootless): a tmpfs of bytes and inodes
 * (0: tmpfs's default) on dir (the host directory of the sandbox's writable root, in the
 * sandbox's own mount namespace: after ns_unshare_sandbox) with upper/, work/ and
 * workspace/ in it, so that one limit holds the root and the workspace. workspace/ is
 * everyone's (01777) when open_workspace (the image's user is not the daemon's). */
int image_disk_tmpfs(const char *dir, uint64_t bytes, uint64_t inodes, bool open_workspace,
                     struct util_err *err);

/* An image's sandbox with a tmpfs disk limit (root mode): the tmpfs of image_disk_tmpfs
 * as a mount attached nowhere, made by the host's root before it enters the sandbox's
 * user namespace (no mount table lists it, and it goes with the sandbox's last hold),
 * its upper/ the sandbox's root's (base, the host id of its 0), work/ the host's root's
 * (overlayfs works there with its mounter's rights), workspace/ the commands' host ids'
 * (uid, gid). Returns its descriptor (the overlay's upper_dir is /proc/self/fd/N), and
 * *ret_ws_fd, a copy of workspace/ attached nowhere, for /workspace. */
int image_disk_tmpfs_detached(uint64_t bytes, uint64_t inodes, uint32_t base, uid_t uid,
                              gid_t gid, int *ret_ws_fd, struct util_err *err);

/* The overlay of layers (n host paths, lowest first) under upper_dir/upper, with
 * upper_dir/work as its work directory: each layer mounted idmapped through userns_fd
 * (root mode), or as it is with overlayfs's userxattr option (userns_fd -1: rootless,
 * whose whiteouts are user.overlay.* xattrs). The layers are given one by one
 * (lowerdir+, Linux 6.8), or all in one lowerdir option with legacy or where the kernel
 * has no lowerdir+ (Linux 5.19 to 6.7; at most some 250 layers). Returns the mount's
 * descriptor, attached nowhere, O_CLOEXEC. */
int image_mount_root(char *const *layers, size_t n, const char *upper_dir, int userns_fd,
                     bool legacy, struct util_err *err);

#endif
