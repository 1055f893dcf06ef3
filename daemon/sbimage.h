/* sbimage.h: the image a sandbox is made from (CreateSandbox.image; docs/images.md):
 * found among its creator's images, held in the store while the sandbox lives, its
 * layers and its writable upper directory handed to init, its config's Env, WorkingDir
 * and User the commands' defaults.
 *
 * Root mode: the sandbox's ids 0 .. SBX_IMAGE_IDS - 1 are a block of host ids no other
 * live sandbox has (SBX_IMAGE_BLOCKS per daemon, from its uid range: sbx_limits.h);
 * its commands run as the host ids of the image's user there. Rootless: the daemon's
 * user is the sandbox's root, as for every rootless sandbox.
 *
 * Called by sbxtab.c (open at creation, before the record), sandbox.c (the directories,
 * Setup, the end) and command.c (the defaults). Loop thread; nothing here logs. */
#ifndef SBX_SBIMAGE_H
#define SBX_SBIMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "digest.h"
#include "imageconfig.h"
#include "init.pb-c.h"

struct sbxd;

struct sbimage {
        char *name;                      /* CreateSandbox.image, as given */
        char digest[DIGEST_STR_BYTES];   /* its manifest: held in the store while held */
        int held;
        char **layers;                   /* host paths of its layer trees, lowest first */
        size_t nlayers;
        struct imageconfig config;       /* Env, WorkingDir, User */
        int block;                       /* root mode: its block of host ids; -1: none */
        uint32_t uid_base;               /* root mode: the host id of its 0; rootless: 0 */
        uid_t uid;                       /* the commands' default user, in its namespace */
        gid_t gid;
        char *root_dir;                  /* SANDBOX_DIR/root once made (Setup.image_upper) */
        int user_dropped;                /* rootless: the image's User was not 0 */
        int setid_modes;                 /* init.proto Setup.setid_modes (sandbox.c sets it) */
        /* Rootless: its ids 1 .. subids are the daemon user's subordinate ids from
         * subuid and subgid (hostfeat.h); 0: root alone. */
        uint32_t subids, subuid, subgid;
};

/* The image name as caller_uid's (images_find), held for a new sandbox, with a block of
 * ids in root mode and its default user found. 0 and *ret, or -errno with err:
 * -ENOENT no such image of the caller's, -EINVAL a malformed name or User, -EAGAIN no
 * block is free. */
int sbimage_open(struct sbxd *d, const char *name, uid_t caller_uid, struct sbimage **ret,
                 char *err, size_t errlen);

/* A sandbox a restarted daemon adopts (recover.c): its recorded image digest held
 * again (whatever its name names now), the block its commands' ids run_uid lies in
 * taken (root mode), its default user found again, which must be the recorded one, and
 * its directory sandbox_dir's root. 0 and *ret, or -errno with err: -ENOENT the image
 * is gone, -EINVAL the ids do not fit, -EBUSY the block is another's. */
int sbimage_adopt(struct sbxd *d, const char *name, const char *digest, uid_t run_uid,
                  const char *sandbox_dir, struct sbimage **ret, char *err, size_t errlen);

/* Lets the image go (once nothing of the sandbox runs: its answer to a terminate must
 * find the image free to remove); its block stays until sbimage_close. */
void sbimage_release(struct sbxd *d, struct sbimage *im);

/* Lets the image (if still held) and the block go, frees im. Accepts NULL; returns
 * NULL. */
struct sbimage *sbimage_close(struct sbxd *d, struct sbimage *im);

/* The host id its files are touched as for id inside (root mode: the block's; rootless:
 * 0, the daemon's user acts as itself). */
uid_t sbimage_host_id(const struct sbimage *im, uint32_t id);

/* Root mode: how many of the daemon's SBX_IMAGE_BLOCKS blocks of ids no sandbox holds
 * (the warm pool leaves one to clients: warm.c). Rootless: UINT32_MAX (no blocks). */
uint32_t sbimage_free_blocks(const struct sbxd *d);

/* A warm sandbox of im is claimed (warm.c): the client's name for the image, and the
 * sandbox's directory sandbox_dir now. 0 or -ENOMEM (im unchanged). */
int sbimage_rename(struct sbimage *im, const char *name, const char *sandbox_dir);

/* Makes SANDBOX_DIR/root (im->root_dir) with its upper and work directories (the upper
 * one the sandbox root's, the work one the daemon's). 0 or -errno. */
int sbimage_make_dirs(struct sbimage *im, struct sbxd *d, const char *sandbox_dir);

/* With a disk image (disk.h), one filesystem holds the workspace and the writable root,
 * so that one limit holds both: these directories of it. */
#define SBIMAGE_DISK_WORKSPACE "workspace"
#define SBIMAGE_DISK_ROOT      "root"

/* Makes them on the disk image's mount mount_fd (root mode): the workspace the
 * commands' host ids' (uid, gid), the root the daemon's with its upper directory the
 * sandbox root's and its work directory. 0 or -errno. */
int sbimage_disk_dirs(const struct sbimage *im, int mount_fd, uid_t uid, gid_t gid);

/* Fills Setup's image fields (pointing into im, which outlives the message). */
void sbimage_fill_setup(const struct sbimage *im, Sbx__Init__V1__Setup *setup);

/* user ("NAME", "UID" or "UID:GID") as ids of the image's namespace, reading a name in
 * the /etc/passwd (and a group in /etc/group) of its topmost layer that has one. 0, or
 * -ENOENT (no such user: err says so), -EINVAL. */
int sbimage_user(const struct sbimage *im, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                 char *err, size_t errlen);

#endif
