/* hostpath.h: the host paths a request names, opened with the caller's rights.
 *
 * A CreateSandbox names host paths (root_dir, writable_paths, the denied paths), which
 * the sandbox's init later mounts as root. The daemon must never open for a caller what
 * the caller could not open itself (a confused deputy), so each path is resolved here
 * with the caller's own filesystem identity (uid, gid and supplementary groups, from
 * SO_PEERCRED and SO_PEERGROUPS; creds.h), symlinks followed as the caller's own open
 * would follow them, and checked for the access the sandbox will get. What was opened
 * is then identified (device, inode, canonical path), and init mounts a path only when
 * it finds that same object there again (init/mnt.c), so a symlink or a directory
 * swapped in between is refused rather than mounted.
 *
 * Root (uid 0) is the operator and is judged as root, with the daemon's capabilities,
 * whatever the calling process holds: it may reach, read and write any path.
 *
 * The daemon's own directories (its state directory, the directory of its socket, and
 * everything below them) are refused to every caller, root included, whatever name
 * leads there: a symlink, or a bind mount of them or of a directory above them (each
 * directory on the way up from what was opened is compared with them by device and
 * inode), and a path under which a mount shows them (a bind of them, of something in
 * them or of a directory above them, found in the mount table). Called by policy.c on
 * the event loop; owns nothing between calls. */
#ifndef SBX_HOSTPATH_H
#define SBX_HOSTPATH_H

#include <stddef.h>
#include <sys/types.h>

struct sbxd;
struct caller;

/* What the sandbox will do with a path, and so what the caller must be allowed. */
enum hostpath_access {
        HOSTPATH_LOOKUP = 0, /* only reach it (search permission on the way) */
        HOSTPATH_ROOT,       /* a directory used read-only as the sandbox's root: read and search */
        HOSTPATH_WRITE,      /* bound read-write: write (and search, for a directory) */
        HOSTPATH_READ,       /* a file read by the daemon for the caller (hostpath_open_read) */
};

/* Which of an object's permission classes the kernel judged the caller in (the first
 * that applies): its owner, a member of its group (primary or supplementary), anyone
 * else; root is judged as root (its capabilities), whose rights are not a class. What a
 * sandbox may do in a writable path follows from it (policy.c). */
enum hostpath_class {
        HOSTPATH_CLASS_OWNER = 0,
        HOSTPATH_CLASS_GROUP,
        HOSTPATH_CLASS_OTHER,
        HOSTPATH_CLASS_ROOT,
};

/* A path opened for a caller. */
struct hostpath {
        char *path; /* canonical (symlinks resolved), in the daemon's mount namespace; owned */
        dev_t dev;  /* the object's identity, for init to find it again */
        ino_t ino;
        mode_t mode; /* its type and permission bits */
        uid_t uid;   /* its owner and group */
        gid_t gid;
        enum hostpath_class class; /* how the caller was judged */
};

/* Resolves path (absolute) as the caller k would and checks access want. Returns 0
 * with *ret filled (free ret->path; ret->class is the class k was judged in, by the
 * mode bits of what was opened), or -errno with a one-line reason naming the path
 * in err: -EINVAL not absolute or too long; -ENOENT it does not exist (for the caller);
 * -EACCES the caller may not reach it or may not use it as asked; -EPERM it is, or
 * lies below, one of the daemon's own directories; -EROFS write asked on a read-only
 * filesystem; -ENOTDIR a root that is not a directory. what names the field in
 * messages ("writable path"). */
int hostpath_open(struct sbxd *d, const struct caller *k, const char *what, const char *path,
                  enum hostpath_access want, struct hostpath *ret, char *err, size_t errlen);

/* Opens path (absolute) for reading as the caller k would open it, symlinks followed as
 * theirs: a directory (directory 1: read and search) or a regular file (0; a FIFO or a
 * device is refused without blocking). *ret_fd (O_CLOEXEC, blocking) is written only on
 * success. Errors as hostpath_open's (-EACCES: the caller may not read it), and -EINVAL
 * for a file that is not a regular one, -EPERM a directory that is, or lies below, one
 * of the daemon's own. For the local sources of images (rpc_images.c). */
int hostpath_open_read(struct sbxd *d, const struct caller *k, const char *what, const char *path,
                       int directory, int *ret_fd, char *err, size_t errlen);

/* The daemon's own directories, canonical, into ret (allocated, the caller frees
 * each): its state directory, and its socket's directory (the socket itself when that
 * directory is a shared sticky one such as /tmp). Returns how many. */
size_t hostpath_daemons(struct sbxd *d, char *ret[2]);

void hostpath_clear(struct hostpath *h);

#endif
