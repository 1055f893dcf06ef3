/* disk.h: the size limit of a sandbox's /workspace (Limits.disk_bytes, disk_inodes) and
 * the means that enforces it on this host, chosen once at start-up:
 *
 *   PROJECT_QUOTA     root, where the state directory's filesystem enforces project
 *                     quotas (ext4 with the project feature mounted prjquota, XFS with
 *                     pquota): a project id per workspace directory and a quota on it.
 *                     The cheapest: a few syscalls at create, nothing to unmount.
 *   FILESYSTEM_IMAGE  root, with loop devices and mke2fs: a sparse ext4 image of the
 *                     limit's size per sandbox, STATE/disks/NAME (NAME random, see
 *                     DISK_IMAGES_DIR), attached to a loop device (autoclear) and
 *                     mounted attached nowhere (fsmount(2)): the daemon holds the
 *                     mount's descriptor and hands it to the sandbox's init, which
 *                     attaches it at /workspace in the sandbox's own mount namespace.
 *                     No mount table of the host or of another sandbox lists it, so
 *                     none names the sandbox. Made in libuv's thread pool (mke2fs
 *                     takes 10-20 ms), never on the loop.
 *   TMPFS_SIZE        otherwise (rootless, or no loop devices): init mounts a tmpfs of
 *                     the limit's size and inodes as /workspace in the sandbox's own
 *                     mount namespace. Memory-backed; it ends with the sandbox.
 *
 * What the daemon leaves on the host is found by path, never by memory, so that a
 * restarted daemon cleans what a crashed one left: a mount on a workspace directory
 * under STATE/sandboxes, a loop device whose backing file is an image below the state
 * directory, an image no record leads to. Nothing else is touched. A leaf module: it
 * knows no sandbox; the sandbox and trash modules call it. */
#ifndef SBX_DISK_H
#define SBX_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "sbx.pb-c.h"

/* The bounds of Limits.disk_bytes and disk_inodes (policy.c checks them). */
#define DISK_MIN_BYTES (1024ull * 1024u)
#define DISK_MAX_BYTES (16ull << 40) /* 16 TiB: the most sbxd --max-disk may say */
/* The default of sbxd --max-disk: an image's metadata takes about 1/70000 of its size
 * on the host (15 MiB for 1 TiB) even when nothing is written. */
#define DISK_DEFAULT_MAX_BYTES (1ull << 40)
#define DISK_MIN_INODES        16ull
#define DISK_MAX_INODES        (1ull << 32) /* ext4's most */
/* At most one inode per this many bytes of disk_bytes (what ext4 of 1K blocks holds). */
#define DISK_BYTES_PER_INODE 2048u

/* Where images are, below the state directory: STATE/DISK_IMAGES_DIR/NAME, NAME 32
 * random hex digits and ".img". Every local user reads a loop device's backing file
 * (/sys/block/loopN/loop/backing_file), so its path names nothing of the sandbox's. */
#define DISK_IMAGES_DIR "disks"

/* A workspace's record of its image, next to it (STATE/sandboxes/ID/DISK_IMAGE_NAME): a
 * symlink to ../../DISK_IMAGES_DIR/NAME, which a restarted daemon reads to end what it
 * adopts, and which keep_workspace replaces by the image itself. An older daemon's image
 * is this file itself, and is read as such. */
#define DISK_IMAGE_NAME "workspace.img"

enum disk_mech {
        DISK_MECH_NONE = 0, /* no means: a disk limit is refused */
        DISK_MECH_QUOTA,
        DISK_MECH_IMAGE,
        DISK_MECH_TMPFS,
};

/* The project ids the daemon gives workspaces: a range of its own, so that an id of
 * another user of the filesystem is never taken or cleared. */
#define DISK_PROJID_BASE 0x53420000u
#define DISK_PROJIDS     65536u

/* What the host offers, probed by disk_detect. */
struct disk_host {
        int rootless;
        int loop;     /* /dev/loop-control can be opened read-write */
        int mkfs;     /* mke2fs is found */
        int prjquota; /* the state directory's filesystem enforces project quotas */
};

/* The strongest means h offers. Pure. */
enum disk_mech disk_choose(const struct disk_host *h);

/* 1 when h offers mech. Pure. */
int disk_allows(const struct disk_host *h, enum disk_mech mech);

/* The Enforcement the sandbox reports for mech (ENFORCEMENT_NONE for none). */
Sbx__V1__Enforcement disk_enforcement(enum disk_mech mech);

/* The bytes an unprivileged writer may still take on dir's filesystem (statvfs
 * f_bavail), into *ret. 0 or -errno. */
int disk_free_bytes(const char *dir, uint64_t *ret);

/* Parses a size: a whole number of bytes with an optional unit K, M, G or T (powers of
 * 1024, with or without "i"/"iB"/"B", any case). 0 or -EINVAL (empty, junk, overflow). */
int disk_parse_size(const char *s, uint64_t *ret);

/* Probes this host for a daemon (rootless or not) whose workspaces are below dir.
 * Never fails. */
void disk_detect(int rootless, const char *dir, struct disk_host *ret);

/* PROJECT_QUOTA: gives the workspace directory a project id of its own (from
 * DISK_PROJID_BASE, starting at a hash of id; one with limits or usage is taken) with
 * the project-inherit flag, and that project a hard limit of bytes and of inodes (0:
 * none). Quick syscalls: called on the loop. 0 or -errno with err. */
int disk_quota_apply(const char *workspace, const char *id, uint64_t bytes, uint64_t inodes,
                     char *err, size_t errlen);

/* PROJECT_QUOTA: puts the directory dir (empty) in the project of workspace (after
 * disk_quota_apply), so that one limit holds both: an image sandbox's writable root
 * (sbimage.h) beside its workspace. 0 or -errno with err. */
int disk_quota_join(const char *dir, const char *workspace, char *err, size_t errlen);

/* What disk_image_start makes. The strings are copied. */
struct disk_image_spec {
        const char *workspace; /* the existing, empty directory to mount on */
        uint64_t bytes;
        uint64_t inodes; /* 0: mke2fs's default for that size */
        uid_t uid;       /* the owner of the new filesystem's root */
        gid_t gid;
        /* Where formatted images are kept by size and inodes (made 0700 when missing),
         * each copied (sparsely: its metadata, about 1 MiB) into every image of that
         * size instead of running mke2fs again; NULL: mke2fs every time. */
        const char *templates;
};

/* The directory of the templates, below the state directory; most kept at once. */
#define DISK_TEMPLATES_DIR "disk-templates"
#define DISK_MAX_TEMPLATES 8

/* Called on the loop when the image is made and mounted (r 0, mount_fd the mount's
 * descriptor, now the callee's) or not (r -errno, mount_fd -1, err a one-line reason). */
typedef void (*disk_image_cb)(void *ud, int r, int mount_fd, const char *err);

/* Makes spec's image (STATE/DISK_IMAGES_DIR/NAME, with its record DISK_IMAGE_NAME next to
 * spec->workspace, which must be STATE/sandboxes/ID/workspace), formats it, attaches it
 * to a loop device and mounts it attached nowhere, in libuv's thread pool; cb is called
 * on the loop afterwards, always (unless this returns an error). 0, -ENOMEM or
 * uv_queue_work's error. */
int disk_image_start(uv_loop_t *loop, const struct disk_image_spec *spec, disk_image_cb cb,
                     void *ud);

/* The same, synchronously (the thread pool's part; the unit and integration tests):
 * 0 with *ret_mount the mount's descriptor (O_CLOEXEC; its root owned as spec says,
 * empty), or -errno with err and *ret_mount -1 (-EEXIST: the workspace has a record
 * already). Leaves nothing behind on failure. */
int disk_image_make(const struct disk_image_spec *spec, int *ret_mount, char *err,
                    size_t errlen);

/* Ends what disk_image_make made for workspace: closes mount_fd (the daemon's hold of
 * the mount; -1: none, as after a restart), on a thread of its own since the last
 * reference writes back what was left dirty (the sandbox's namespace may still hold the
 * mount; the loop device detaches itself when the last holder goes), or unmounts an
 * older daemon's image mounted on the workspace itself; and removes the image and its
 * record, or with keep puts the image in its record's place
 * (STATE/sandboxes/ID/DISK_IMAGE_NAME; an older daemon's is there already); or clears
 * the limits of its project quota (its files keep their project id, which is not given
 * again while they take space). A record that is not one of ours is never followed.
 * Harmless for a workspace without either. */
void disk_release(const char *workspace, int mount_fd, int keep);

/* How many unmounts of images this daemon has begun and done so far (any thread; only an
 * older daemon's images are mounted in a mount table, on their workspace): hostwatch.c
 * tells its own changes of the mount table from the host's. */
void disk_mount_ops(uint64_t *begun, uint64_t *done);

/* At start-up, after recovery: detaches every loop device whose backing file is an
 * image below state_dir, of this daemon or an older one (one a crash left attached; one
 * still mounted, by an adopted sandbox's namespace, is only marked to detach when
 * unmounted, which the kernel does), removes the images of STATE/DISK_IMAGES_DIR that no
 * record leads to, and removes the templates (an upgraded mke2fs makes them anew). */
void disk_sweep(const char *state_dir);

/* How much free space on a filesystem of fs_type (statfs f_type) with blocks of
 * block_bytes, fs_bytes in all, on a host of cpus CPUs, counts as none: 64 KiB, and on
 * ext4 its write-time allocation watermark (4 x max(32, 2 x cpus) x cpus blocks, below
 * which it may refuse a write with that much still free), at most an eighth of the
 * filesystem. Pure. */
uint64_t disk_full_margin_bytes(long fs_type, uint64_t block_bytes, uint64_t fs_bytes, long cpus);

/* 1 when the /workspace of a sandbox whose root (its mount namespace's /) is open as
 * root_fd has no room left (its inodes used up, or less free than
 * disk_full_margin_bytes), 0 when it has, -errno. What a command's result names "disk"
 * by, for every means: an image and a project quota (statfs of a directory with the
 * project-inherit flag reports its quota) and a tmpfs alike. Called on the loop only
 * (it keeps the CPU count it reads the first time). */
int disk_full(int root_fd);

#endif
