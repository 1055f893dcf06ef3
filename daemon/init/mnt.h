/* mnt.h: the filesystem a command sees (docs/sandboxes.md, "What a sandbox is").
 *
 * PID 1 calls mnt_build_view() once, in the sandbox's fresh mount and PID namespaces,
 * before it forks anything. mnt_set_attr() and mnt_set_attr_fallback() are exported
 * for the unit tests. */
#ifndef SBX_INIT_MNT_H
#define SBX_INIT_MNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "user.h"
#include "util.h"

/* A host object by identity, as the daemon opened it for the caller (init.proto). */
struct mnt_object {
        uint64_t dev;
        uint64_t ino;
};

/* How a writable path is bound (Setup's WritableBind): with idmap, the host ids shown
 * as run_uid and run_gid there, every other id shown as itself. */
struct mnt_bind {
        uid_t uid;
        gid_t gid;
        bool system_dir; /* root made a system directory writable: warned */
};

/* A file made when missing (Setup's MadeFile). */
struct mnt_file {
        const char *path;
        const void *content;
        size_t len;
};

/* The part of Setup that shapes the view. Paths are host paths, absolute; the lists
 * are arrays of n strings. Nothing is taken over. */
struct mnt_config {
        const char *root_dir;      /* Tree used read-only as /; NULL or "" means "/". */
        /* With image_root, root_mount_fd is an image's overlay (image.h) attached
         * nowhere: the view's root instead, and writable (root_dir is then not used).
         * Not closed here. */
        bool image_root;
        int root_mount_fd;
        /* An image's sandbox with a tmpfs disk (workspace_tmpfs_bytes): the host
         * directory on which stage 0 mounted that tmpfs (image.h), whose "workspace" is
         * bound at /workspace. NULL: none. */
        const char *image_disk_dir;
        const char *workspace_dir; /* Bound read-write at /workspace; NULL: empty dir. */
        /* With workspace_mount, workspace_fd is a mount attached nowhere (the daemon's
         * disk image, from fsmount; an image's workspace, or its tmpfs disk's in root
         * mode), attached at /workspace itself instead of a bind of workspace_dir or a
         * tmpfs of workspace_tmpfs_bytes. Not closed here. */
        bool workspace_mount;
        int workspace_fd;
        /* A snapshot's image: its /workspace is copied into the workspace (seed.h). */
        bool seed_workspace;
        char *const *writable_paths;
        size_t n_writable_paths;
        char *const *denied_read_paths;
        size_t n_denied_read_paths;
        char *const *denied_write_paths;
        size_t n_denied_write_paths;
        char *const *protected_paths;
        size_t n_protected_paths;
        uint64_t tmp_bytes; /* Size of /tmp and /dev/shm; 0: SBX_DEFAULT_TMP_BYTES. */
        unsigned ptys;      /* The devpts's max= (see mnt_set_ptys); 0: no devpts. */
        /* /workspace is a tmpfs of this size and inode count (0: none), instead of a
         * bind of workspace_dir (the disk limit's TMPFS_SIZE), then owned by these ids
         * ((uid_t)-1: the mounter's, as rootless). */
        uint64_t workspace_tmpfs_bytes;
        uint64_t workspace_tmpfs_inodes;
        uid_t workspace_uid;
        gid_t workspace_gid;
        /* What root_dir and each writable path must be (NULL: not checked). */
        const struct mnt_object *root_object;
        const struct mnt_object *writable_objects; /* n_writable_paths of them */
        /* Root mode: writable paths mounted idmapped, each path's ids (writable_binds,
         * n_writable_paths of them; NULL: the owner's, each) shown as run ids and every
         * other id as itself. */
        bool idmap;
        uid_t owner_uid, run_uid;
        gid_t owner_gid, run_gid;
        const struct mnt_bind *writable_binds;
        /* Prepared by mnt_prepare_writable (an image's sandbox, root mode): writable path
         * i is the mount writable_mounts[i] (attached nowhere; a directory when
         * writable_dirs[i]), attached at its path instead of a bind made here, and its
         * placeholders are made. NULL: none. Not closed here. */
        const int *writable_mounts;
        const bool *writable_dirs;
        /* An image's sandbox, root mode: the first host id of its block (else 0): in its
         * writable paths only run ids act (as the owner there); what any other id of the
         * block would create is refused (EOVERFLOW), never left on the host as its. */
        uint32_t image_block;
        /* cgroup v1 controllers mounted below /sys/fs/cgroup (the rest is hidden). */
        char *const *cgroup_v1_controllers;
        size_t n_cgroup_v1_controllers;
        /* Made (0755, with the ids of the writable path they lie in) when missing, then kept
         * read-only as protected. */
        char *const *protected_mkdirs;
        size_t n_protected_mkdirs;
        /* The same for files (0644, with their content). */
        const struct mnt_file *protected_files;
        size_t n_protected_files;
        /* The commands' user, given a name in the view (user.h); NULL: none. */
        const struct user_config *user;
        /* The daemon's sandboxes directory (canonical; NULL: none): the mounts below it
         * (other sandboxes' disk images) are detached from the view and the host's tree. */
        const char *sandboxes_dir;
};

/* Builds the view and makes it the root of the calling process (and of every process
 * of its mount namespace), with the current directory "/":
 *   /            a read-only tmpfs holding a recursive read-only bind of each
 *                top-level entry of root_dir (symlinks copied), except the entries
 *                below, which are the sandbox's own;
 *   /proc        a new procfs of the caller's PID namespace (sys, sysrq-trigger, irq
 *                and bus read-only);
 *   /sys         the host's /sys, read-only, with an empty read-only /sys/fs/cgroup
 *                holding only the cgroup v1 hierarchies of cgroup_v1_controllers,
 *                each rooted at the sandbox's own group by its cgroup namespace;
 *                no loop device, in /sys or /proc: the lists of block devices
 *                (/sys/block, /sys/class/block, /sys/dev/block,
 *                /sys/devices/virtual/block, /sys/fs/ext4, /proc/fs/ext4,
 *                /proc/fs/jbd2) are read-only copies without them (the other entries
 *                the host's, live; the devices the host adds later missing),
 *                /proc/partitions a copy without their lines, /proc/diskstats empty;
 *   /dev         a read-only tmpfs with null, zero, full, random, urandom and tty bound
 *                from the host, a new devpts of ptys at /dev/pts (none for 0),
 *                /dev/ptmx -> pts/ptmx, a tmpfs /dev/shm, and the fd, stdin, stdout and
 *                stderr symlinks;
 *   /tmp         a tmpfs of tmp_bytes (nosuid, nodev);
 *   /run         an empty directory;
 *   /workspace   workspace_dir, read-write (nosuid, nodev);
 * then writable_paths bound read-write at the same path (idmapped when idmap is set
 * and the filesystem allows it: each path's ids of writable_binds shown as run_uid and
 * run_gid, every other id as itself; a warning when not, and for a system_dir one;
 * its placeholders made with those ids; a directory above one that others
 * may not search is replaced by an empty skeleton leading to it, since nothing else
 * there was reachable), denied_write_paths, protected_paths, protected_mkdirs and
 * protected_files re-bound read-only, denied_read_paths hidden (an
 * empty read-only tmpfs over a directory, /dev/null over anything else). root_dir and
 * the writable paths are opened on the host without following symlinks and must be the
 * objects given (an error names the one that changed); what is mounted is what was
 * opened (through /proc/self/fd), never a name looked up again; the entries of root_dir
 * are opened without following symlinks too. The other policy paths are resolved in
 * the view, as a command would resolve them; a denied or protected path that does not
 * exist there, or that no command could reach (a directory on the way PID 1 may not
 * search), is skipped; a writable path that does not exist on the host is an error.
 * Last, with user set, the view's /etc/passwd and /etc/group get the commands' user
 * (user_install).
 * Every mount is private: nothing mounted on the host later shows up inside.
 *
 * Call from PID 1 of a new PID namespace, after unshare(CLONE_NEWNS), single-threaded.
 * Returns 0, or -errno with err describing the failed step; on failure the mount
 * namespace is left half-built and the caller must give up (exit). */
int mnt_build_view(const struct mnt_config *cfg, struct util_err *err, struct util_warnings *warn);

/* The host's tree, held between the two halves of mnt_build_view: a descriptor of the
 * host's / (after the pivot, of what is attached at /.sbx-oldroot), beneath which the
 * host paths of the second half are resolved (RESOLVE_IN_ROOT). */
struct mnt_host {
        int fd;
        bool pivoted;
};

/* tmpfs's options for a size limit of bytes and inodes (0: tmpfs's default) into buf.
 * Returns what snprintf returns. */
int mnt_tmpfs_opts(uint64_t bytes, uint64_t inodes, char *buf, size_t len);

/* Root mode, an image's sandbox (image.h): what PID 1, root of the sandbox's own user
 * namespace from the start, cannot do for its writable paths, done first by stage 0 as
 * the host's root: each opened in the host's tree and checked as the view's own
 * opening does, its placeholders made, then cloned (open_tree) and idmapped as a bind of
 * the view would be (the owner's ids shown as cfg's run ids: host ids of the sandbox's
 * block), nosuid and nodev. ret_fds and ret_dirs: cfg->n_writable_paths of them, the
 * mounts attached nowhere (close them) and whether each is a directory. 0, or -errno
 * with err (nothing left open). */
int mnt_prepare_writable(const struct mnt_config *cfg, int *ret_fds, bool *ret_dirs,
                         struct util_err *err, struct util_warnings *warn);

/* mnt_build_view in two halves, for a spare built ahead (init.proto Setup.prebuild):
 * mnt_view_base makes the new root with /proc, the read-only root, /sys, /dev, /tmp and
 * /run, and keeps the host's tree in *host (it uses root_dir, root_object, tmp_bytes,
 * cgroup_v1_controllers and sandboxes_dir of cfg); mnt_view_finish, maybe much later and with a cfg whose
 * fields the base used are the same, does the rest: /workspace, the writable paths
 * (opened in the host's tree kept, by identity as ever), the denials, lets go of the
 * host's tree (closing *host), the user and the freeze. A mount the host made after
 * the base is not in the tree kept: a writable path there is refused by its identity
 * (the daemon does not give such a spare a request, see its warm.c). Both return 0 or
 * -errno with err as mnt_build_view does. */
int mnt_view_base(const struct mnt_config *cfg, struct mnt_host *host, struct util_err *err,
                  struct util_warnings *warn);
int mnt_view_finish(const struct mnt_config *cfg, struct mnt_host *host, struct util_err *err,
                    struct util_warnings *warn);

/* Makes the view's devpts hold at most ptys at once: /dev/pts remounted with max=ptys
 * (or mounted, when it had none), or for 0 unmounted, leaving /dev/pts an empty
 * directory: devpts reads max=0 as no bound at all. Ptys open already stay open. Called
 * by PID 1 in the view (a spare's own Setup, a warm sandbox's Claim) before its seccomp
 * filter, which refuses mount(2), is loaded. Returns 0 or -errno with err set. */
int mnt_set_ptys(unsigned ptys, struct util_err *err);

/* Closes what *host holds (may be called twice). */
void mnt_host_close(struct mnt_host *host);

/* Mounts over path again as mnt_build_view did (hide: hidden, else read-only with its
 * parents pinned) when path exists and is no longer covered: the host replaced it (a
 * rename over it takes the mount with the old file) or created it after the view was
 * built. Run by `sbx-init --reapply` in the sandbox's mount namespace (the daemon's
 * helper enters it). 1 when it mounted (*ret_bare: what lay bare), 0 when the path was
 * covered or gone, else -errno with err set. */
int mnt_reapply(bool hide, const char *path, struct stat *ret_bare, struct util_err *err);

/* Attribute bits for mnt_set_attr. */
#define MNT_RDONLY 0x1u
#define MNT_NOSUID 0x2u
#define MNT_NODEV  0x4u
#define MNT_NOEXEC 0x8u

/* Adds the attributes (MNT_* bits; never clears one) to the mount at path, and with
 * recursive to every mount below it. Uses mount_setattr(2) (Linux >= 5.12) and falls
 * back to mnt_set_attr_fallback on older kernels. Returns 0 or -errno. */
int mnt_set_attr(const char *path, unsigned attrs, bool recursive);

/* The same with MS_REMOUNT|MS_BIND of each mount (path first, then those found below
 * it in /proc/self/mountinfo), keeping every flag the mount already has: in a user
 * namespace the flags of mounts inherited from the host are locked and a remount that
 * would drop one fails with EPERM (bubblewrap's bind_mount()). Needs /proc mounted. */
int mnt_set_attr_fallback(const char *path, unsigned attrs, bool recursive);

#endif
