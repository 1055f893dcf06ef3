/* files.c: the file operations of a sandbox; see files.h.
 *
 * Every walk over path components is done by openat2(2) from the sandbox's own root
 * (its view's root_fd, an O_PATH of its "/" in its mount namespace) with RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS: "..", absolute symlinks and links planted by sandboxed code
 * (to /etc/shadow, to ../../.., to /proc/self/root/...) all resolve inside the
 * sandbox's root and can never reach the host's, and /proc magic links are refused.
 * Below a directory opened that way only single names are used, never followed
 * (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW, mkdirat, renameat, unlinkat, readlinkat).
 *
 * Each operation runs with the sandbox user's credentials. In root mode the daemon sets
 * its fsuid/fsgid to the sandbox's uid/gid, drops its supplementary groups and clears
 * its effective capabilities for the duration of the operation, then restores them:
 * permissions apply as they do to a command inside (no CAP_DAC_OVERRIDE, no
 * CAP_SYS_PTRACE over /proc) and new files belong to the sandbox user. These are
 * per-thread credentials, changed with raw system calls (creds.h): the work a huge tree
 * makes long (a recursive remove; reading and describing a directory) is opened on the
 * loop and then done on a worker thread of rpc_files.c's (offload.h), which takes the same
 * credentials for itself and is given nothing of the sandbox but descriptors opened on
 * the loop and copies (the hidden mounts, the user). In rootless mode the daemon's own
 * uid is the sandbox user.
 *
 * Nothing waits on the sandbox: an object is first opened O_PATH (which never blocks),
 * its type and identity checked, and only a regular file or a directory is reopened,
 * through /proc/self/fd with O_NONBLOCK (a lease held by sandboxed code fails with
 * EAGAIN instead of stalling the event loop). Writes replace files with a temporary
 * file and renameat(2), without fsync: the workspace does not outlive a daemon crash
 * (a lost sandbox's workspace is removed), and a reader racing the writer sees the old
 * or the new file, never a mix. A path hidden by the policy is "not found", detected
 * twice: lexically (the normalized path is at or below a denied_read path) and by
 * identity (what was opened lives on one of the mounts that hide those paths, by mount
 * id from statx(2), or by device and inode on kernels without it), which catches the
 * symlinks and ".." that lead there. A sandbox is seen through its struct sandbox_view
 * (sandbox_view.h), never the whole struct sandbox; what is kept between calls (the
 * hiding mounts, found once per view generation) lives in that view's files_cache and
 * goes with the sandbox. Called by rpc_files.c. */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"
#include "policy.h"
#include "sandbox.h"
#include "sandbox_view.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* An absolute path as walked: a requested path of SBX_PATH_MAX_BYTES below /workspace. */
#define ABS_MAX (SBX_PATH_MAX_BYTES + sizeof("/workspace/"))
/* As the kernel's own bound on nested symlinks (MAXSYMLINKS). */
#define MAX_SYMLINK_HOPS 40
/* openat2 with RESOLVE_IN_ROOT returns EAGAIN when a rename raced with "..". */
#define OPENAT2_RETRIES 16
/* A recursive remove holds one directory open per level. */
#define REMOVE_MAX_DEPTH 128
/* First read of a file whose size says nothing (procfs, sysfs). */
#define READ_PROBE_BYTES 4096u
/* Bytes of a repeated field's tag and length around each listed entry, at most. */
#define LIST_ENTRY_OVERHEAD_BYTES 8u
#define STATX_WANT                (STATX_BASIC_STATS | STATX_MNT_ID)

/* Identity of a mount that hides a denied_read path. */
struct hidden_mount {
        int has_mnt_id;
        uint64_t mnt_id;
        uint32_t dev_major, dev_minor;
        uint64_t ino;
};

/* The mounts that hide a sandbox's denied paths, as found at its view generation. */
struct files_cache {
        unsigned generation;
        size_t n;
        struct hidden_mount v[];
};

/* One operation in progress. */
struct fctx {
        struct sandbox_view *v; /* the sandbox's, for the length of the operation */
        const char *op;         /* verb for messages: "read", "write", ... */
        const char *path;       /* as requested */
        char *err;
        size_t errlen;
        char abs[ABS_MAX];  /* absolute, walked from the sandbox's root */
        char norm[ABS_MAX]; /* abs, lexically normalized (for the hidden-path check) */
        const struct files_cache *hidden;
        struct creds cr;
};

/* ---- messages -------------------------------------------------------------------------- */

static int fail(struct fctx *fx, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct fctx *fx, int r, const char *fmt, ...) {
        va_list ap;
        if (fx->err && fx->errlen) {
                va_start(ap, fmt);
                vsnprintf(fx->err, fx->errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

/* 1 when fx's path is in the sandbox's /workspace and that has a disk limit. */
static int in_limited_workspace(const struct fctx *fx) {
        const Sbx__V1__Policy *pol = fx->v->policy;
        return pol && pol->limits && pol->limits->has_disk_bytes &&
               strncmp(fx->norm, "/workspace/", 11) == 0;
}

/* A message for -errno r about what (a path in the sandbox). Returns r, or the errno the
 * rpc layer should see for it (-EINVAL for "is a directory", "is a mount point"). */
static int fail_errno(struct fctx *fx, int r, const char *what) {
        const char *id = fx->v->id;

        switch (-r) {
        case ENOENT:
                return fail(fx, r, "'%.1024s' not found in sandbox '%s'", what, id);
        case ENOTDIR:
                return fail(fx, r,
                            "'%.1024s' not found in sandbox '%s': a component of the path is not "
                            "a directory",
                            what, id);
        case EACCES:
        case EPERM:
                return fail(fx, r,
                            "permission denied: the user of sandbox '%s' may not %s '%.1024s' "
                            "(a command there could not either; its owner and mode decide)",
                            id, fx->op, what);
        case EROFS:
                return fail(fx, r,
                            "'%.1024s' is read-only in sandbox '%s'; write under /workspace, /tmp "
                            "or a writable path of its policy",
                            what, id);
        case ELOOP:
                return fail(fx, r,
                            "'%.1024s' in sandbox '%s': too many levels of symbolic links, or a "
                            "link through /proc (file operations do not follow /proc magic links)",
                            what, id);
        case ENAMETOOLONG:
                return fail(fx, r, "'%.1024s' in sandbox '%s': a name or the path is too long",
                            what, id);
        case ENOSPC:
        case EDQUOT:
                if (in_limited_workspace(fx))
                        return fail(fx, r,
                                    "no space left to %s '%.1024s' in sandbox '%s': its "
                                    "/workspace is at its disk limit (disk_bytes %llu%s); remove "
                                    "files there, or create the sandbox with a larger disk "
                                    "(sbx create --disk SIZE)",
                                    fx->op, what, id,
                                    (unsigned long long)fx->v->policy->limits->disk_bytes,
                                    fx->v->policy->limits->has_disk_inodes ? ", or disk_inodes"
                                                                           : "");
                return fail(fx, r,
                            "no space left to %s '%.1024s' in sandbox '%s' (disk, quota or the "
                            "size of /tmp)",
                            fx->op, what, id);
        case EAGAIN:
                return fail(fx, r,
                            "'%.1024s' in sandbox '%s' is busy (a file lease, or a concurrent "
                            "rename); retry",
                            what, id);
        case ETXTBSY:
                return fail(fx, -EAGAIN,
                            "'%.1024s' in sandbox '%s' is a program being executed; retry later",
                            what, id);
        case EBUSY:
                return fail(fx, -EINVAL,
                            "'%.1024s' in sandbox '%s' is a mount point; it cannot be removed or "
                            "replaced",
                            what, id);
        case EISDIR:
                return fail(fx, -EINVAL, "'%.1024s' in sandbox '%s' is a directory", what, id);
        case EEXIST:
                return fail(fx, r, "'%.1024s' already exists in sandbox '%s'", what, id);
        case ENOTEMPTY:
                return fail(fx, r,
                            "directory '%.1024s' in sandbox '%s' is not empty; remove it with "
                            "recursive",
                            what, id);
        case ENXIO:
        case ENODEV:
                return fail(fx, -EINVAL,
                            "'%.1024s' in sandbox '%s' is not a regular file or a directory", what,
                            id);
        case ENOMEM:
                return fail(fx, r, "daemon out of memory for '%.1024s' in sandbox '%s'", what, id);
        default:
                return fail(fx, r, "cannot %s '%.1024s' in sandbox '%s': %s", fx->op, what, id,
                            strerror(-r));
        }
}

static int fail_hidden(struct fctx *fx) {
        return fail(fx, -ENOENT,
                    "'%.1024s' not found in sandbox '%s': its policy hides that path "
                    "(denied_read_paths)",
                    fx->path, fx->v->id);
}

static const char *type_phrase(mode_t m) {
        if (S_ISDIR(m))
                return "a directory";
        if (S_ISFIFO(m))
                return "a FIFO";
        if (S_ISSOCK(m))
                return "a socket";
        if (S_ISCHR(m))
                return "a character device";
        if (S_ISBLK(m))
                return "a block device";
        if (S_ISLNK(m))
                return "a symbolic link";
        if (S_ISREG(m))
                return "a regular file";
        return "a file of an unknown type";
}

/* ---- paths ----------------------------------------------------------------------------- */

/* Writes the lexical normal form of the absolute path in (no ".", "..", or repeated
 * slashes; ".." at the root stays there, as RESOLVE_IN_ROOT does) into out (ABS_MAX). */
static void normalize(const char *in, char *out) {
        size_t o = 0;
        const char *p = in;

        while (*p) {
                const char *s;
                size_t n;
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                s = p;
                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - s);
                if (n == 1 && s[0] == '.')
                        continue;
                if (n == 2 && s[0] == '.' && s[1] == '.') {
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                        continue;
                }
                if (o + 1 + n >= ABS_MAX)
                        break;
                out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
}

/* 1 when the normalized path norm is one of the sandbox's hidden paths or below one. */
static int lexically_hidden(const struct sandbox_view *v, const char *norm) {
        const struct pathset *sets[2] = {v->hidden, v->hidden_shared};
        char h[ABS_MAX];
        size_t i, n, k;

        for (k = 0; k < 2; k++)
                for (i = 0; sets[k] && i < sets[k]->n; i++) {
                        const char *p = sets[k]->v[i];
                        if (p[0] != '/' || strlen(p) >= ABS_MAX)
                                continue;
                        normalize(p, h);
                        n = strlen(h);
                        if (n == 1 ||
                            (strncmp(norm, h, n) == 0 && (norm[n] == '\0' || norm[n] == '/')))
                                return 1;
                }
        return 0;
}

/* Splits the absolute path into its parent (with its trailing slash) and its last name.
 * -EINVAL when the path is "/" or ends in "." or "..", -ENAMETOOLONG for a long name. */
static int split(const char *path, char *parent, char *name) {
        size_t end = strlen(path), start;

        while (end > 0 && path[end - 1] == '/')
                end--;
        if (end == 0)
                return -EINVAL;
        start = end;
        while (start > 0 && path[start - 1] != '/')
                start--;
        if (end - start > NAME_MAX)
                return -ENAMETOOLONG;
        memcpy(name, path + start, end - start);
        name[end - start] = '\0';
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return -EINVAL;
        if (start == 0) {
                strcpy(parent, "/");
        } else {
                memcpy(parent, path, start);
                parent[start] = '\0';
        }
        return 0;
}

/* The last name of the normalized path norm, or "/" for the root. */
static const char *base_of(const char *norm) {
        const char *s = strrchr(norm, '/');
        return s && s[1] ? s + 1 : "/";
}

/* ---- opening inside the sandbox's root -------------------------------------------------- */

/* openat2(root_fd, path) resolved inside the root, magic links refused. fd or -errno. */
static int in_root_open(int root_fd, const char *path, uint64_t flags) {
        struct open_how how;
        int i;

        memset(&how, 0, sizeof(how));
        how.flags = flags | O_CLOEXEC;
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        for (i = 0; i < OPENAT2_RETRIES; i++) {
                long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
                if (fd >= 0)
                        return (int)fd;
                if (errno != EAGAIN)
                        return -errno;
        }
        return -EAGAIN;
}

/* Opens the object behind the O_PATH descriptor pfd for real, without waiting. */
static int reopen(int pfd, int flags) {
        char p[64];
        int fd;

        snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
        fd = open(p, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        return fd < 0 ? -errno : fd;
}

static int fd_statx(int fd, struct statx *ret) {
        return statx(fd, "", AT_EMPTY_PATH, STATX_WANT, ret) < 0 ? -errno : 0;
}

/* The entry name of directory dfd, not followed. */
static int entry_statx(int dfd, const char *name, struct statx *ret) {
        return statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_WANT, ret) < 0 ? -errno
                                                                                            : 0;
}

static int same_inode(const struct statx *a, const struct statx *b) {
        return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor &&
               a->stx_ino == b->stx_ino;
}

/* 1 when a and b lie on the same mount (by mount id; by device without one, which cannot
 * tell two bind mounts of one filesystem apart). */
static int same_mount(const struct statx *a, const struct statx *b) {
        if ((a->stx_mask & STATX_MNT_ID) && (b->stx_mask & STATX_MNT_ID))
                return a->stx_mnt_id == b->stx_mnt_id;
        return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor;
}

/* 1 when stx is the root of a mount (a mount point, seen from above). */
static int is_mount_root(const struct statx *stx) {
        return (stx->stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
               (stx->stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A write refused by permissions where the mount is read-only anyway is READ_ONLY: the
 * policy's denial beats the file's mode (the kernel checks the mode first). The mount is
 * the one of name in dfd, or of dfd itself when name is NULL or absent. */
static int ro_wins(int dfd, const char *name, int r) {
        struct statfs sf;
        int fd = -1, ok;

        if (r != -EACCES && r != -EPERM)
                return r;
        if (name)
                fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ok = fstatfs(fd >= 0 ? fd : dfd, &sf) == 0;
        if (fd >= 0)
                close(fd);
        return ok && (sf.f_flags & ST_RDONLY) ? -EROFS : r;
}

/* ---- hidden paths ---------------------------------------------------------------------- */

/* Appends to c the mount that hides path, if one does. A denied path that is not the
 * root of a mount was not hidden by one (it did not exist when the sandbox was made):
 * the lexical check covers it, and the mount it lies on must not count as hidden. */
static void find_hiding_mount(const struct sandbox_view *v, const char *path,
                              struct files_cache *c) {
        struct hidden_mount *h = &c->v[c->n];
        struct statx stx;
        int fd = in_root_open(v->root_fd, path, O_PATH), r;

        if (fd < 0)
                return;
        r = fd_statx(fd, &stx);
        close(fd);
        if (r < 0 || ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
                      !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)))
                return;
        h->has_mnt_id = !!(stx.stx_mask & STATX_MNT_ID);
        h->mnt_id = stx.stx_mnt_id;
        h->dev_major = stx.stx_dev_major;
        h->dev_minor = stx.stx_dev_minor;
        h->ino = stx.stx_ino;
        c->n++;
}

/* Finds the mounts that hide the sandbox's denied paths (as the daemon, before the
 * credentials change, so that every one is found), once per view generation: the
 * view changes only when the guard mounts in it (guard.h). */
static int hidden_mounts_load(struct fctx *fx) {
        struct sandbox_view *v = fx->v;
        const struct pathset *sets[2] = {v->hidden, v->hidden_shared};
        struct files_cache *c = v->files_cache;
        size_t n = 0, i, k;

        if (c && c->generation == v->generation) {
                fx->hidden = c;
                return 0;
        }
        for (k = 0; k < 2; k++)
                n += sets[k] ? sets[k]->n : 0;
        free(v->files_cache);
        v->files_cache = c = calloc(1, sizeof(*c) + (n ? n : 1) * sizeof(c->v[0]));
        if (!c)
                return -ENOMEM;
        c->generation = v->generation;
        for (k = 0; k < 2; k++)
                for (i = 0; sets[k] && i < sets[k]->n; i++)
                        find_hiding_mount(v, sets[k]->v[i], c);
        fx->hidden = c;
        return 0;
}

/* 1 when the object described by stx lies on one of the mounts c lists (may be NULL). */
static int on_hiding_mount(const struct files_cache *c, const struct statx *stx) {
        size_t i;

        for (i = 0; c && i < c->n; i++) {
                const struct hidden_mount *h = &c->v[i];
                if (h->has_mnt_id && (stx->stx_mask & STATX_MNT_ID)) {
                        if (h->mnt_id == stx->stx_mnt_id)
                                return 1;
                } else if (h->dev_major == stx->stx_dev_major &&
                           h->dev_minor == stx->stx_dev_minor && h->ino == stx->stx_ino) {
                        return 1;
                }
        }
        return 0;
}

/* 1 when the object described by stx lies on a mount that hides a denied path. */
static int is_hidden(const struct fctx *fx, const struct statx *stx) {
        return on_hiding_mount(fx->hidden, stx);
}

/* A copy of fx's hidden mounts, for work done away from the loop (where the view's own
 * may be replaced meanwhile). NULL when out of memory. */
static struct files_cache *hidden_copy(const struct fctx *fx) {
        size_t n = fx->hidden ? fx->hidden->n : 0,
               size = sizeof(struct files_cache) + (n ? n : 1) * sizeof(struct hidden_mount);
        struct files_cache *c = calloc(1, size);

        if (c && n)
                memcpy(c, fx->hidden, sizeof(*c) + n * sizeof(c->v[0]));
        return c;
}

/* ---- one operation --------------------------------------------------------------------- */

/* Checks the sandbox and the path, finds the hidden mounts and takes the sandbox user's
 * credentials. end() must follow, whatever this returns. */
static int begin(struct fctx *fx, struct sandbox *sb, const char *op, const char *path, char *err,
                 size_t errlen) {
        struct sandbox_view *v = sandbox_view(sb);
        size_t len;
        int r;

        memset(fx, 0, sizeof(*fx));
        fx->v = v;
        fx->op = op;
        fx->path = path ? path : "";
        fx->err = err;
        fx->errlen = errlen;
        if (err && errlen)
                err[0] = '\0';
        if (v->state == SBX__V1__SANDBOX_STATE__CREATING ||
            (v->state == SBX__V1__SANDBOX_STATE__READY && v->root_fd < 0))
                return fail(fx, -ESHUTDOWN,
                            "sandbox '%s' is not ready yet; wait until its creation has finished",
                            v->id);
        if (v->state != SBX__V1__SANDBOX_STATE__READY || v->root_fd < 0)
                return fail(fx, -ENODEV, "sandbox '%s' is ending; create a new one", v->id);
        if (!v->d->features.openat2)
                return fail(fx, -ENOSYS,
                            "this kernel has no openat2(2) (Linux 5.6 or later), which file "
                            "operations need to resolve paths safely; use a command (cat, ls) "
                            "in sandbox '%s' instead",
                            v->id);
        if (!path || !path[0])
                return fail(fx, -EINVAL, "path is required");
        len = strlen(path);
        if (len > SBX_PATH_MAX_BYTES)
                return fail(fx, -EINVAL, "path is %zu bytes long, more than the %u allowed", len,
                            SBX_PATH_MAX_BYTES);
        if (path[0] == '/')
                memcpy(fx->abs, path, len + 1);
        else
                snprintf(fx->abs, sizeof(fx->abs), "/workspace/%s", path);
        normalize(fx->abs, fx->norm);
        if (lexically_hidden(v, fx->norm))
                return fail_hidden(fx);
        r = hidden_mounts_load(fx);
        if (r < 0)
                return fail(fx, r, "daemon out of memory");
        r = creds_enter(&fx->cr, v->run_uid, v->run_gid, NULL, 0);
        if (r < 0)
                return fail(fx, r, "cannot take the credentials of the user of sandbox '%s': %s",
                            v->id, strerror(-r));
        return 0;
}

static void end(struct fctx *fx) {
        creds_leave(&fx->cr);
        fx->hidden = NULL;
}

/* Opens the requested path itself (a final symlink followed) as O_PATH. */
static int open_final(struct fctx *fx, int *ret_fd, struct statx *ret) {
        int fd = in_root_open(fx->v->root_fd, fx->abs, O_PATH), r;

        if (fd < 0)
                return fail_errno(fx, fd, fx->path);
        r = fd_statx(fd, ret);
        if (r < 0) {
                close(fd);
                return fail_errno(fx, r, fx->path);
        }
        if (is_hidden(fx, ret)) {
                close(fd);
                return fail_hidden(fx);
        }
        *ret_fd = fd;
        return 0;
}

/* Opens the directory dir (O_PATH), refusing a hidden one. hint ends the message when it
 * does not exist. */
static int open_dir(struct fctx *fx, const char *dir, const char *hint, int *ret_fd) {
        struct statx stx;
        int fd = in_root_open(fx->v->root_fd, dir, O_PATH | O_DIRECTORY), r;

        if (fd == -ENOENT || fd == -ENOTDIR)
                return fail(fx, fd, "directory '%.1024s' of '%.1024s' not found in sandbox '%s'%s",
                            dir, fx->path, fx->v->id, hint);
        if (fd < 0)
                return fail_errno(fx, fd, dir);
        r = fd_statx(fd, &stx);
        if (r < 0) {
                close(fd);
                return fail_errno(fx, r, dir);
        }
        if (is_hidden(fx, &stx)) {
                close(fd);
                return fail_hidden(fx);
        }
        *ret_fd = fd;
        return 0;
}

/* 0 when the directory fd (named what) is not on a mount that hides a denied path;
 * else closes fd and fails (-ENOENT, or statx's -errno). */
static int hidden_dir(struct fctx *fx, int fd, const char *what) {
        struct statx stx;
        int r = fd_statx(fd, &stx);

        if (r == 0 && is_hidden(fx, &stx))
                r = fail_hidden(fx);
        else if (r < 0)
                r = fail_errno(fx, r, what);
        if (r < 0)
                close(fd);
        return r;
}

/* Opens the directory dir (O_PATH), first making each missing component (0755) as
 * `mkdir -p` does, each as the sandbox user, never in a directory on a mount that hides
 * a denied path. *ret_created (may be NULL) says whether the last component was made. */
static int make_dirs(struct fctx *fx, const char *dir, int *ret_fd, int *ret_created) {
        char prefix[ABS_MAX];
        const char *p = dir;
        size_t plen = 0;
        int fd, created = 0, r;

        fd = in_root_open(fx->v->root_fd, "/", O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fail_errno(fx, fd, "/");
        r = hidden_dir(fx, fd, "/");
        if (r < 0)
                return r;
        while (*p) {
                char name[NAME_MAX + 1];
                const char *s;
                size_t n;
                int nfd;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                s = p;
                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - s);
                if (n > NAME_MAX || plen + 1 + n >= sizeof(prefix)) {
                        close(fd);
                        return fail_errno(fx, -ENAMETOOLONG, dir);
                }
                prefix[plen++] = '/';
                memcpy(prefix + plen, s, n);
                plen += n;
                prefix[plen] = '\0';
                memcpy(name, s, n);
                name[n] = '\0';
                created = 0;
                nfd = in_root_open(fx->v->root_fd, prefix, O_PATH | O_DIRECTORY);
                if (nfd == -ENOENT && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                        if (mkdirat(fd, name, 0755) == 0) {
                                created = 1;
                        } else if (errno != EEXIST) {
                                int e = ro_wins(fd, NULL, -errno);
                                close(fd);
                                return fail_errno(fx, e, prefix);
                        }
                        nfd = in_root_open(fx->v->root_fd, prefix, O_PATH | O_DIRECTORY);
                }
                close(fd);
                if (nfd < 0)
                        return fail_errno(fx, nfd, prefix);
                fd = nfd;
                /* Checked before anything is made in it: a symlink or ".." may have led
                 * onto a mount that hides a denied path. */
                r = hidden_dir(fx, fd, prefix);
                if (r < 0)
                        return r;
        }
        *ret_fd = fd;
        if (ret_created)
                *ret_created = created;
        return 0;
}

/* Resolves the requested path for an operation on its last name: opens its parent
 * directory (made first with mkparents) and stats the entry without following it. With
 * follow, a final symlink is followed inside the root, as open(2) would, at most
 * MAX_SYMLINK_HOPS times, each target checked again. On success *ret_dfd is the parent
 * (O_PATH, the caller closes it), name (NAME_MAX + 1 bytes) the entry's name,
 * *ret_exists whether it exists and *ret_stx its statx when it does. */
static int resolve_entry(struct fctx *fx, int follow, int mkparents, int *ret_dfd, char *name,
                         struct statx *ret_stx, int *ret_exists) {
        char cur[ABS_MAX], parent[ABS_MAX], norm[ABS_MAX], link[ABS_MAX];
        int hops, dfd, r;

        snprintf(cur, sizeof(cur), "%s", fx->abs);
        for (hops = 0;; hops++) {
                ssize_t n;

                r = split(cur, parent, name);
                if (r == -EINVAL)
                        return fail(fx, r,
                                    "'%.1024s' does not name an entry in sandbox '%s' (it is '/' "
                                    "or ends in '.' or '..'); give the entry's own path",
                                    cur, fx->v->id);
                if (r < 0)
                        return fail_errno(fx, r, cur);
                if (hops > 0) {
                        normalize(cur, norm);
                        if (lexically_hidden(fx->v, norm))
                                return fail_hidden(fx);
                }
                if (mkparents && hops == 0)
                        r = make_dirs(fx, parent, &dfd, NULL);
                else
                        r = open_dir(fx, parent,
                                     mkparents || strcmp(fx->op, "write") != 0
                                             ? ""
                                             : "; pass create_parents to make it",
                                     &dfd);
                if (r < 0)
                        return r;
                r = entry_statx(dfd, name, ret_stx);
                if (r == -ENOENT) {
                        *ret_exists = 0;
                        *ret_dfd = dfd;
                        return 0;
                }
                if (r < 0) {
                        close(dfd);
                        return fail_errno(fx, r, cur);
                }
                if (is_hidden(fx, ret_stx)) {
                        close(dfd);
                        return fail_hidden(fx);
                }
                if (!follow || !S_ISLNK(ret_stx->stx_mode)) {
                        *ret_exists = 1;
                        *ret_dfd = dfd;
                        return 0;
                }
                if (hops >= MAX_SYMLINK_HOPS) {
                        close(dfd);
                        return fail_errno(fx, -ELOOP, fx->path);
                }
                n = readlinkat(dfd, name, link, sizeof(link) - 1);
                r = n < 0 ? -errno : 0;
                close(dfd);
                if (r < 0)
                        return fail_errno(fx, r, cur);
                if (n == 0)
                        return fail_errno(fx, -ENOENT, cur);
                link[n] = '\0';
                if (link[0] == '/') {
                        memcpy(cur, link, (size_t)n + 1);
                } else {
                        size_t pl = strlen(parent);
                        if (pl + (size_t)n >= sizeof(cur))
                                return fail_errno(fx, -ENAMETOOLONG, fx->path);
                        memcpy(cur, parent, pl);
                        memcpy(cur + pl, link, (size_t)n + 1);
                }
        }
}

/* ---- read ------------------------------------------------------------------------------ */

void files_read_result_clear(struct files_read_result *r) {
        free(r->data);
        memset(r, 0, sizeof(*r));
}

/* Opens the requested path for reading: a regular file, still one once reopened. The
 * descriptor into *ret_fd and its size into *ret_size. 0 or -errno (message written). */
static int open_regular(struct fctx *fx, int *ret_fd, uint64_t *ret_size) {
        struct statx stx;
        struct stat st;
        int pfd, fd, r;

        r = open_final(fx, &pfd, &stx);
        if (r < 0)
                return r;
        if (!S_ISREG(stx.stx_mode)) {
                close(pfd);
                return fail(fx, -EINVAL, "'%.1024s' in sandbox '%s' is %s; %s", fx->path, fx->v->id,
                            type_phrase(stx.stx_mode),
                            S_ISDIR(stx.stx_mode) ? "list it with ListDirectory (sbx ls)"
                                                  : "only regular files can be read");
        }
        fd = reopen(pfd, O_RDONLY);
        close(pfd);
        if (fd < 0)
                return fail_errno(fx, fd, fx->path);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return fail(fx, -EINVAL, "'%.1024s' in sandbox '%s' changed while it was opened",
                            fx->path, fx->v->id);
        }
        *ret_fd = fd;
        *ret_size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
        return 0;
}

/* How many bytes one read returns at most: limit, or without one everything left
 * (refused past max_read_bytes), never more than max_reply_bytes. 0 or -EFBIG. */
static int read_amount(struct fctx *fx, uint64_t offset, uint64_t remaining, uint64_t limit,
                       uint64_t max_read_bytes, uint64_t max_reply_bytes, uint64_t *ret_want) {
        uint64_t want = limit;

        if (limit == 0) {
                if (remaining > max_read_bytes)
                        return fail(fx, -EFBIG,
                                    "'%.1024s' in sandbox '%s' has %llu bytes from offset %llu, "
                                    "more than the %llu a read without a limit returns; page "
                                    "through it with offset and limit (sbx read --offset N "
                                    "--limit N)",
                                    fx->path, fx->v->id, (unsigned long long)remaining,
                                    (unsigned long long)offset, (unsigned long long)max_read_bytes);
                want = max_read_bytes;
        }
        if (want > max_reply_bytes)
                want = max_reply_bytes;
        if (want > SIZE_MAX / 2)
                want = SIZE_MAX / 2;
        *ret_want = want;
        return 0;
}

/* Reads at most want bytes of fd from offset into a new buffer (*ret_buf, *ret_len; NULL
 * when none). A file whose size is known is read to that size; one that says 0 (procfs)
 * is read until pread says the end, growing the buffer up to want. *ret_eof: the end was
 * reached. 0 or -errno (nothing returned). */
static int read_at(int fd, uint64_t offset, uint64_t size, uint64_t want, uint8_t **ret_buf,
                   size_t *ret_len, int *ret_eof) {
        uint64_t remaining = size > offset ? size - offset : 0;
        size_t len = 0, alloc;
        uint8_t *buf = NULL;
        int eof = 0;

        alloc = (size_t)(remaining > 0 ? (remaining < want ? remaining : want)
                                       : (want < READ_PROBE_BYTES ? want : READ_PROBE_BYTES));
        if (alloc > 0 && !(buf = malloc(alloc)))
                return -ENOMEM;
        while (len < want) {
                ssize_t n;
                if (size > 0 && offset + len >= size) {
                        eof = 1;
                        break;
                }
                if (len == alloc) {
                        size_t na = alloc * 2 > want ? (size_t)want : alloc * 2;
                        uint8_t *nb = realloc(buf, na);
                        if (!nb) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = nb;
                        alloc = na;
                }
                n = pread(fd, buf + len, alloc - len, (off_t)(offset + len));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;
                        free(buf);
                        return r;
                }
                if (n == 0) {
                        eof = 1;
                        break;
                }
                len += (size_t)n;
        }
        if (len == 0) {
                free(buf);
                buf = NULL;
        }
        *ret_buf = buf;
        *ret_len = len;
        *ret_eof = eof || (size > 0 && offset + len >= size);
        return 0;
}

static int do_read(struct fctx *fx, uint64_t offset, uint64_t limit, uint64_t max_read_bytes,
                   uint64_t max_reply_bytes, struct files_read_result *ret) {
        uint64_t size = 0, want = 0;
        uint8_t *buf = NULL;
        size_t len = 0;
        int fd = -1, r, eof = 0;

        if (offset > INT64_MAX)
                return fail(fx, -EINVAL, "offset %llu is beyond any file",
                            (unsigned long long)offset);
        r = open_regular(fx, &fd, &size);
        if (r < 0)
                return r;
        r = read_amount(fx, offset, size > offset ? size - offset : 0, limit, max_read_bytes,
                        max_reply_bytes, &want);
        if (r == 0) {
                r = read_at(fd, offset, size, want, &buf, &len, &eof);
                if (r < 0)
                        r = fail_errno(fx, r, fx->path);
        }
        close(fd);
        if (r < 0)
                return r;
        ret->data = buf;
        ret->len = len;
        ret->next_offset = offset + len;
        ret->size = size > ret->next_offset ? size : ret->next_offset;
        ret->eof = eof;
        return 0;
}

int files_read(struct sandbox *sb, const char *path, uint64_t offset, uint64_t limit,
               uint64_t max_read_bytes, uint64_t max_reply_bytes, struct files_read_result *ret,
               char *err, size_t errlen) {
        struct fctx fx;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = begin(&fx, sb, "read", path, err, errlen);
        if (r == 0)
                r = do_read(&fx, offset, limit, max_read_bytes, max_reply_bytes, ret);
        end(&fx);
        return r;
}

/* ---- write ----------------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *data, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, data, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

/* ".NAME.sbx-XXXXXXXXXXXX", NAME cut to fit NAME_MAX. */
static void temp_name(char *out, const char *name) {
        static const char hex[] = "0123456789abcdef";
        uint8_t rnd[6];
        char suffix[2 * sizeof(rnd) + 1];
        size_t i;

        static uint64_t counter;

        if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
                /* Early at boot: unique is enough, O_EXCL does the rest. */
                uint64_t x = ((uint64_t)getpid() << 32) ^ ++counter;
                memcpy(rnd, &x, sizeof(rnd));
        }
        for (i = 0; i < sizeof(rnd); i++) {
                suffix[2 * i] = hex[rnd[i] >> 4];
                suffix[2 * i + 1] = hex[rnd[i] & 15];
        }
        suffix[2 * sizeof(rnd)] = '\0';
        snprintf(out, NAME_MAX + 1, ".%.*s.sbx-%s", NAME_MAX - 6 - (int)strlen(suffix), name,
                 suffix);
}

/* Appends to name (or, with trunc, rewrites it in place), creating it with mode. */
static int write_in_place(struct fctx *fx, int dfd, const char *name, int trunc,
                          const uint8_t *data, size_t len, uint32_t mode, uint64_t *ret_size) {
        struct stat st;
        int fd, r;

        fd = openat(dfd, name,
                    O_WRONLY | (trunc ? O_TRUNC : O_APPEND) | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                            O_NOCTTY | O_CLOEXEC,
                    (mode_t)mode);
        if (fd < 0)
                return fail_errno(fx, ro_wins(dfd, name, -errno), fx->path);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return fail(fx, -EINVAL, "'%.1024s' in sandbox '%s' is not a regular file",
                            fx->path, fx->v->id);
        }
        r = write_all(fd, data, len);
        if (r == 0 && fstat(fd, &st) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r < 0)
                return fail_errno(fx, r, fx->path);
        *ret_size = (uint64_t)st.st_size;
        return 0;
}

static int write_replace(struct fctx *fx, int dfd, const char *name, int exists,
                         const uint8_t *data, size_t len, uint32_t mode, uint64_t *ret_size) {
        char tmp[NAME_MAX + 1];
        int fd = -1, r, tries;

        /* The rename needs only the directory; a command would need the file itself. */
        if (exists && faccessat(dfd, name, W_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) < 0)
                return fail_errno(fx, ro_wins(dfd, name, -errno), fx->path);
        for (tries = 0; tries < 8; tries++) {
                temp_name(tmp, name);
                fd = openat(dfd, tmp,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
                if (fd >= 0 || errno != EEXIST)
                        break;
        }
        if (fd < 0)
                return fail_errno(fx, ro_wins(dfd, NULL, -errno), fx->path);
        r = write_all(fd, data, len);
        if (r == 0 && fchmod(fd, (mode_t)mode) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return fail_errno(fx, r, fx->path);
        }
        *ret_size = len;
        return 0;
}

/* A mode the API may set: permission bits and the sticky bit. Never setuid or setgid:
 * such a file, left in a writable path, would run on the host as the sandbox's user or
 * its owner (the seccomp filter refuses the same to commands). */
static int check_mode(struct fctx *fx, uint32_t mode) {
        if (mode > 07777)
                return fail(fx, -EINVAL, "mode %o has bits beyond 07777", mode);
        if (mode & (S_ISUID | S_ISGID))
                return fail(fx, -EINVAL,
                            "mode %o sets the setuid or setgid bit, which nothing in a sandbox may "
                            "set; drop it (for example %o)",
                            mode, mode & 01777);
        return 0;
}

static int do_write(struct fctx *fx, const uint8_t *data, size_t len, uint32_t mode, unsigned flags,
                    uint64_t *ret_size) {
        char name[NAME_MAX + 1];
        struct statx stx;
        int dfd, exists, r;

        r = check_mode(fx, mode);
        if (r < 0)
                return r;
        if (fx->abs[strlen(fx->abs) - 1] == '/')
                return fail(fx, -EINVAL,
                            "'%.1024s' ends in '/', which names a directory; give a file's path",
                            fx->path);
        r = resolve_entry(fx, 1, !!(flags & FILES_WRITE_CREATE_PARENTS), &dfd, name, &stx, &exists);
        if (r < 0)
                return r;
        if (exists && !S_ISREG(stx.stx_mode))
                r = fail(fx, -EINVAL,
                         "'%.1024s' in sandbox '%s' is %s; only regular files can be "
                         "written",
                         fx->path, fx->v->id, type_phrase(stx.stx_mode));
        else if (flags & FILES_WRITE_APPEND)
                r = write_in_place(fx, dfd, name, 0, data, len, mode, ret_size);
        else if (exists && is_mount_root(&stx))
                /* A file that is itself a mount (a writable path that is a file) cannot be
                 * renamed over: it is rewritten in place, not atomically. */
                r = write_in_place(fx, dfd, name, 1, data, len, mode, ret_size);
        else
                r = write_replace(fx, dfd, name, exists, data, len, mode, ret_size);
        close(dfd);
        return r;
}

int files_write(struct sandbox *sb, const char *path, const uint8_t *data, size_t len,
                uint32_t mode, unsigned flags, uint64_t *ret_size, char *err, size_t errlen) {
        struct fctx fx;
        uint64_t size = 0;
        int r;

        r = begin(&fx, sb, "write", path, err, errlen);
        if (r == 0)
                r = do_write(&fx, data, len, mode, flags, &size);
        end(&fx);
        if (r == 0 && ret_size)
                *ret_size = size;
        return r;
}

/* ---- file information ------------------------------------------------------------------ */

static Sbx__V1__FileType file_type(mode_t m) {
        if (S_ISREG(m))
                return SBX__V1__FILE_TYPE__REGULAR;
        if (S_ISDIR(m))
                return SBX__V1__FILE_TYPE__DIRECTORY;
        if (S_ISLNK(m))
                return SBX__V1__FILE_TYPE__SYMLINK;
        if (S_ISFIFO(m))
                return SBX__V1__FILE_TYPE__FIFO;
        if (S_ISSOCK(m))
                return SBX__V1__FILE_TYPE__SOCKET;
        if (S_ISCHR(m))
                return SBX__V1__FILE_TYPE__CHAR_DEVICE;
        if (S_ISBLK(m))
                return SBX__V1__FILE_TYPE__BLOCK_DEVICE;
        return SBX__V1__FILE_TYPE__FILE_TYPE_UNKNOWN;
}

void files_info_clear(Sbx__V1__FileInfo *fi) {
        free(fi->name);
        free(fi->symlink_target);
        sbx__v1__file_info__init(fi);
}

/* Fills fi (its strings allocated) from stx; stx NULL: only the name is known. */
static int info_fill(Sbx__V1__FileInfo *fi, const char *name, const struct statx *stx,
                     const char *target) {
        sbx__v1__file_info__init(fi);
        fi->name = strdup(name);
        if (target)
                fi->symlink_target = strdup(target);
        if (!fi->name || (target && !fi->symlink_target)) {
                files_info_clear(fi);
                return -ENOMEM;
        }
        fi->has_type = 1;
        if (!stx) {
                fi->type = SBX__V1__FILE_TYPE__FILE_TYPE_UNKNOWN;
                return 0;
        }
        fi->type = file_type(stx->stx_mode);
        fi->has_size = fi->has_mode = fi->has_mtime_unix_ms = fi->has_is_dir = 1;
        fi->size = stx->stx_size;
        fi->mode = stx->stx_mode & 07777;
        fi->mtime_unix_ms = stx->stx_mtime.tv_sec * 1000 + stx->stx_mtime.tv_nsec / 1000000;
        fi->is_dir = S_ISDIR(stx->stx_mode);
        return 0;
}

/* ---- list ------------------------------------------------------------------------------ */

/* The `cap` smallest names seen, as a max-heap (the largest on top). */
struct name_heap {
        char **v;
        size_t n, alloc, cap;
};

static void heap_down(struct name_heap *h, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                char *t;
                if (l < h->n && strcmp(h->v[l], h->v[m]) > 0)
                        m = l;
                if (r < h->n && strcmp(h->v[r], h->v[m]) > 0)
                        m = r;
                if (m == i)
                        return;
                t = h->v[i];
                h->v[i] = h->v[m];
                h->v[m] = t;
                i = m;
        }
}

static void heap_up(struct name_heap *h, size_t i) {
        while (i > 0) {
                size_t p = (i - 1) / 2;
                char *t;
                if (strcmp(h->v[i], h->v[p]) <= 0)
                        return;
                t = h->v[i];
                h->v[i] = h->v[p];
                h->v[p] = t;
                i = p;
        }
}

/* Offers name; sets *truncated when a name had to be left out. */
static int heap_offer(struct name_heap *h, const char *name, int *truncated) {
        char *d;

        if (h->n == h->cap) {
                *truncated = 1;
                if (strcmp(name, h->v[0]) >= 0)
                        return 0;
                d = strdup(name);
                if (!d)
                        return -ENOMEM;
                free(h->v[0]);
                h->v[0] = d;
                heap_down(h, 0);
                return 0;
        }
        if (h->n == h->alloc) {
                size_t na = h->alloc ? h->alloc * 2 : 256;
                char **nv;
                if (na > h->cap)
                        na = h->cap;
                nv = realloc(h->v, na * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                h->v = nv;
                h->alloc = na;
        }
        d = strdup(name);
        if (!d)
                return -ENOMEM;
        h->v[h->n++] = d;
        heap_up(h, h->n - 1);
        return 0;
}

static void heap_free(struct name_heap *h) {
        size_t i;
        for (i = 0; i < h->n; i++)
                free(h->v[i]);
        free(h->v);
        memset(h, 0, sizeof(*h));
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t varint_bytes(uint64_t v) {
        size_t n = 1;
        while (v >= 0x80) {
                v >>= 7;
                n++;
        }
        return n;
}

void files_list_clear(struct files_list *l) {
        size_t i;
        for (i = 0; i < l->n; i++)
                files_info_clear(l->entries[i]);
        if (l->n)
                free(l->entries[0]); /* the array of the entries themselves */
        free(l->entries);
        memset(l, 0, sizeof(*l));
}

/* A listing in three steps: the directory is opened on the loop as the sandbox user; its
 * names are read and sorted, and the first ones described, on a worker thread as the
 * sandbox user (a directory of a million entries takes seconds, and this needs nothing
 * but the open directory and a copy of the view's hidden mounts); the reply is made on
 * the loop again. */
struct files_list_job {
        DIR *dir;
        struct name_heap names;     /* the first names by name, sorted once scanned */
        struct files_cache *hidden; /* the view's hidden mounts, copied at open */
        uid_t uid;                  /* the sandbox user */
        gid_t gid;
        uint64_t max_reply_bytes;
        struct files_list list; /* the entries described */
        int truncated;          /* the directory had more names than the limit */
        int err;                /* -errno of the scan or the descriptions, else 0 */
        int creds_failed;       /* err is creds_enter's */
};

static void list_job_close(struct files_list_job *job) {
        heap_free(&job->names);
        if (job->dir)
                closedir(job->dir);
        job->dir = NULL;
}

void files_list_job_free(struct files_list_job *job) {
        if (!job)
                return;
        list_job_close(job);
        files_list_clear(&job->list);
        free(job->hidden);
        free(job);
}

int files_list_open(struct sandbox *sb, const char *path, uint32_t limit, uint64_t max_reply_bytes,
                    struct files_list_job **ret, char *err, size_t errlen) {
        struct files_list_job *job = NULL;
        struct statx stx;
        struct fctx fx;
        int pfd, fd = -1, r;

        *ret = NULL;
        r = begin(&fx, sb, "list", path, err, errlen);
        if (r == 0)
                r = open_final(&fx, &pfd, &stx);
        if (r == 0 && !S_ISDIR(stx.stx_mode)) {
                close(pfd);
                r = fail(&fx, -EINVAL, "'%.1024s' in sandbox '%s' is %s, not a directory", fx.path,
                         fx.v->id,
                         type_phrase(stx.stx_mode));
        } else if (r == 0) {
                fd = reopen(pfd, O_RDONLY | O_DIRECTORY);
                close(pfd);
                if (fd < 0)
                        r = fail_errno(&fx, fd, fx.path);
        }
        if (r == 0 && (!(job = calloc(1, sizeof(*job))) || !(job->hidden = hidden_copy(&fx))))
                r = fail_errno(&fx, -ENOMEM, fx.path);
        if (r == 0 && !(job->dir = fdopendir(fd)))
                r = fail_errno(&fx, -errno, fx.path);
        if (r == 0) {
                job->names.cap =
                        limit == 0 ? SBX_DEFAULT_LIST_LIMIT
                                   : (limit > SBX_MAX_LIST_LIMIT ? SBX_MAX_LIST_LIMIT : limit);
                job->uid = fx.v->run_uid;
                job->gid = fx.v->run_gid;
                job->max_reply_bytes = max_reply_bytes;
                *ret = job;
        } else {
                if (fd >= 0 && !(job && job->dir))
                        close(fd);
                files_list_job_free(job);
        }
        end(&fx);
        return r;
}

/* Reads the names, keeping only the first `cap` by name: memory is bounded by the limit
 * however large the directory is. 0, -errno, or -ECANCELED when told to stop. */
static int list_scan(struct files_list_job *job, int (*stop)(void *ud), void *ud) {
        unsigned seen = 0;
        int r;

        for (;;) {
                struct dirent *e;

                if ((++seen & 255) == 0 && stop && stop(ud))
                        return -ECANCELED;
                errno = 0;
                e = readdir(job->dir);
                if (!e)
                        break;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                r = heap_offer(&job->names, e->d_name, &job->truncated);
                if (r < 0)
                        return r;
        }
        if (errno)
                return -errno;
        if (job->names.n > 1)
                qsort(job->names.v, job->names.n, sizeof(*job->names.v), cmp_names);
        return 0;
}

/* Describes the scanned names, leaving out the hidden ones, until the reply would
 * outgrow max_reply_bytes. 0, -errno, or -ECANCELED when told to stop. */
static int list_describe(struct files_list_job *job, int (*stop)(void *ud), void *ud) {
        const struct name_heap *h = &job->names;
        struct files_list *ret = &job->list;
        Sbx__V1__FileInfo *infos;
        struct statx stx;
        uint64_t used = 0;
        int dfd = dirfd(job->dir), r = 0, truncated = job->truncated;
        size_t i, n = 0;

        ret->entries = calloc(h->n ? h->n : 1, sizeof(*ret->entries));
        infos = calloc(h->n ? h->n : 1, sizeof(*infos));
        if (!ret->entries || !infos) {
                r = -ENOMEM;
                goto out;
        }
        for (i = 0; i < h->n; i++) {
                char target[PATH_MAX + 1];
                const char *tp = NULL;
                Sbx__V1__FileInfo *fi = &infos[n];
                size_t sz;

                if ((i & 255) == 255 && stop && stop(ud)) {
                        r = -ECANCELED;
                        goto out;
                }
                r = entry_statx(dfd, h->v[i], &stx);
                if (r == -ENOENT)
                        continue; /* removed meanwhile */
                if (r == 0 && on_hiding_mount(job->hidden, &stx))
                        continue;
                if (r == 0 && S_ISLNK(stx.stx_mode)) {
                        ssize_t k = readlinkat(dfd, h->v[i], target, sizeof(target) - 1);
                        if (k >= 0) {
                                target[k] = '\0';
                                tp = target;
                        }
                }
                r = info_fill(fi, h->v[i], r == 0 ? &stx : NULL, tp);
                if (r < 0)
                        goto out;
                /* Stop before the reply outgrows one frame. */
                sz = sbx__v1__file_info__get_packed_size(fi);
                if (used + sz + LIST_ENTRY_OVERHEAD_BYTES > job->max_reply_bytes) {
                        files_info_clear(fi);
                        truncated = 1;
                        break;
                }
                used += sz + 1 + varint_bytes(sz);
                ret->entries[n++] = fi;
        }
        r = 0;
        ret->n = n;
        ret->truncated = truncated;
        if (n == 0)
                free(infos);
        infos = NULL; /* owned by ret now (entries[0] points at it) */
out:
        if (r < 0) {
                for (i = 0; i < n; i++)
                        files_info_clear(&infos[i]);
                free(infos);
                free(ret->entries);
                memset(ret, 0, sizeof(*ret));
        }
        return r;
}

void files_list_run(struct files_list_job *job, int (*stop)(void *ud), void *ud) {
        struct creds cr;
        int r;

        memset(&cr, 0, sizeof(cr));
        r = stop && stop(ud) ? -ECANCELED : creds_enter(&cr, job->uid, job->gid, NULL, 0);
        if (r < 0 && r != -ECANCELED)
                job->creds_failed = 1;
        if (r == 0)
                r = list_scan(job, stop, ud);
        if (r == 0)
                r = list_describe(job, stop, ud);
        creds_leave(&cr);
        /* Closed here, not on the loop: see files_remove_run. */
        list_job_close(job);
        job->err = r;
}

int files_list_finish(struct files_list_job *job, struct sandbox *sb, const char *path,
                      struct files_list *ret, char *err, size_t errlen) {
        struct fctx fx;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = begin(&fx, sb, "list", path, err, errlen);
        if (r == 0 && job->creds_failed)
                r = fail(&fx, job->err,
                         "cannot take the credentials of the user of sandbox '%s': %s", fx.v->id,
                         strerror(-job->err));
        else if (r == 0 && job->err == -ECANCELED)
                r = fail(&fx, job->err, "the listing of '%.1024s' in sandbox '%s' was stopped",
                         fx.path, fx.v->id);
        else if (r == 0 && job->err < 0)
                r = fail_errno(&fx, job->err, fx.path);
        if (r == 0) {
                *ret = job->list;
                memset(&job->list, 0, sizeof(job->list));
        }
        end(&fx);
        files_list_job_free(job);
        return r;
}

/* ---- stat ------------------------------------------------------------------------------ */

static int do_stat(struct fctx *fx, Sbx__V1__FileInfo *ret) {
        char name[NAME_MAX + 1], target[PATH_MAX + 1], scratch[256];
        struct statx stx, lstx;
        const char *tp = NULL;
        char *saved_err = fx->err;
        size_t saved_len = fx->errlen;
        int pfd, dfd = -1, exists = 0, r, lr = -EINVAL;

        r = open_final(fx, &pfd, &stx);
        if (r == 0)
                close(pfd);
        if (r == 0 || r == -ENOENT || r == -ELOOP) {
                /* The entry itself: a symlink says where it points, and is described itself
                 * when it cannot be followed inside the sandbox. Its failures do not replace
                 * the message of the first attempt. */
                fx->err = scratch;
                fx->errlen = sizeof(scratch);
                lr = resolve_entry(fx, 0, 0, &dfd, name, &lstx, &exists);
                fx->err = saved_err;
                fx->errlen = saved_len;
                if (lr == 0 && exists && S_ISLNK(lstx.stx_mode)) {
                        ssize_t k = readlinkat(dfd, name, target, sizeof(target) - 1);
                        if (k >= 0) {
                                target[k] = '\0';
                                tp = target;
                        }
                }
                if (lr == 0)
                        close(dfd);
        }
        if (r < 0) {
                if (!(lr == 0 && exists && S_ISLNK(lstx.stx_mode)))
                        return r;
                stx = lstx;
                if (fx->err && fx->errlen)
                        fx->err[0] = '\0';
        }
        r = info_fill(ret, base_of(fx->norm), &stx, tp);
        return r < 0 ? fail_errno(fx, r, fx->path) : 0;
}

int files_stat(struct sandbox *sb, const char *path, Sbx__V1__FileInfo *ret, char *err,
               size_t errlen) {
        struct fctx fx;
        int r;

        sbx__v1__file_info__init(ret);
        r = begin(&fx, sb, "stat", path, err, errlen);
        if (r == 0)
                r = do_stat(&fx, ret);
        end(&fx);
        return r;
}

/* ---- mkdir ----------------------------------------------------------------------------- */

/* chmod of exactly the object behind the O_PATH descriptor fd. */
static int chmod_fd(int fd, uint32_t mode) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        return chmod(p, (mode_t)mode) < 0 ? -errno : 0;
}

static int do_mkdir(struct fctx *fx, uint32_t mode, int parents) {
        char name[NAME_MAX + 1];
        struct statx stx;
        int fd, dfd, exists, created = 0, r;

        r = check_mode(fx, mode);
        if (r < 0)
                return r;
        if (parents) {
                r = make_dirs(fx, fx->abs, &fd, &created);
                if (r == -ENOTDIR || r == -EEXIST) {
                        /* mkdir -p onto a file says "exists", not "not found". */
                        char scratch[256], *saved = fx->err;
                        size_t saved_len = fx->errlen;
                        int lr;
                        fx->err = scratch;
                        fx->errlen = sizeof(scratch);
                        lr = resolve_entry(fx, 1, 0, &dfd, name, &stx, &exists);
                        fx->err = saved;
                        fx->errlen = saved_len;
                        if (lr == 0) {
                                close(dfd);
                                if (exists && !S_ISDIR(stx.stx_mode))
                                        return fail(fx, -EEXIST,
                                                    "'%.1024s' exists in sandbox '%s' and is %s, "
                                                    "not a directory",
                                                    fx->path, fx->v->id,
                                                    type_phrase(stx.stx_mode));
                        }
                }
                if (r < 0)
                        return r;
                r = created ? chmod_fd(fd, mode) : 0;
                close(fd);
                return r < 0 ? fail_errno(fx, r, fx->path) : 0;
        }
        r = resolve_entry(fx, 0, 0, &dfd, name, &stx, &exists);
        if (r < 0)
                return r;
        if (exists) {
                close(dfd);
                return fail(fx, -EEXIST, "'%.1024s' already exists in sandbox '%s'%s", fx->path,
                            fx->v->id,
                            S_ISDIR(stx.stx_mode)
                                    ? " (pass parents to accept an existing directory)"
                                    : "");
        }
        /* Made private, then given its mode exactly (mkdir's mode passes the umask). */
        if (mkdirat(dfd, name, 0700) < 0) {
                r = ro_wins(dfd, NULL, -errno);
                close(dfd);
                return fail_errno(fx, r, fx->path);
        }
        fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = fd < 0 ? -errno : chmod_fd(fd, mode);
        if (fd >= 0)
                close(fd);
        close(dfd);
        return r < 0 ? fail_errno(fx, r, fx->path) : 0;
}

int files_mkdir(struct sandbox *sb, const char *path, uint32_t mode, int parents, char *err,
                size_t errlen) {
        struct fctx fx;
        int r;

        r = begin(&fx, sb, "create the directory", path, err, errlen);
        if (r == 0)
                r = do_mkdir(&fx, mode, parents);
        end(&fx);
        return r;
}

/* ---- remove ---------------------------------------------------------------------------- */

/* A recursive remove as it walks, on whatever thread: nothing of the sandbox but the
 * descriptors it was given. */
struct rm_walk {
        char failed[NAME_MAX + 1]; /* the entry it stopped at */
        int (*stop)(void *ud);     /* non-zero: stop now (-ECANCELED) */
        void *stop_ud;
};

static void note_failed(struct rm_walk *w, const char *name) {
        if (!w->failed[0])
                snprintf(w->failed, sizeof(w->failed), "%s", name);
}

static int stopped(const struct rm_walk *w) {
        return w->stop && w->stop(w->stop_ud);
}

/* Removes the directory name of dfd and everything in it, never following a symlink and
 * never entering another mount than top's (a mount point inside stops it with -EBUSY). */
static int rm_tree(struct rm_walk *w, int dfd, const char *name, const struct statx *top,
                   int depth);

/* Opens dfd/name to empty it: a directory on top's mount, not followed. The stream, or
 * NULL with *ret_r: 0 when there is nothing to empty (gone, or no longer a directory
 * and unlinked), else -errno. */
static DIR *open_subdir(struct rm_walk *w, int dfd, const char *name, const struct statx *top,
                        int *ret_r) {
        struct statx stx;
        DIR *d;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int r;

        if (fd < 0) {
                r = -errno;
                if (r == -ENOTDIR || r == -ELOOP) /* no longer a directory */
                        r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
                if (r == -ENOENT)
                        r = 0;
                if (r < 0)
                        note_failed(w, name);
                *ret_r = r;
                return NULL;
        }
        r = fd_statx(fd, &stx);
        if (r == 0 && !same_mount(&stx, top))
                r = -EBUSY;
        if (r < 0) {
                close(fd);
                note_failed(w, name);
                *ret_r = r;
                return NULL;
        }
        d = fdopendir(fd);
        if (!d) {
                *ret_r = -errno;
                close(fd);
        }
        return d;
}

/* Removes the entry e of the directory d (a tree, or anything else). 0 or -errno. */
static int rm_entry(struct rm_walk *w, DIR *d, const struct dirent *e, const struct statx *top,
                    int depth) {
        int isdir = e->d_type == DT_DIR, r;

        if (e->d_type == DT_UNKNOWN) {
                struct statx est;
                r = entry_statx(dirfd(d), e->d_name, &est);
                if (r == -ENOENT)
                        return 0;
                isdir = r == 0 && S_ISDIR(est.stx_mode);
        }
        if (isdir)
                return rm_tree(w, dirfd(d), e->d_name, top, depth + 1);
        r = unlinkat(dirfd(d), e->d_name, 0) < 0 ? -errno : 0;
        if (r == -EISDIR) /* became a directory meanwhile */
                r = rm_tree(w, dirfd(d), e->d_name, top, depth + 1);
        return r;
}

/* One pass over the entries of d, removing each. 0, or -errno at the first that failed
 * (noted), or -ECANCELED when told to stop. */
static int rm_entries(struct rm_walk *w, DIR *d, const struct statx *top, int depth) {
        for (;;) {
                struct dirent *e;
                int r;

                if (stopped(w))
                        return -ECANCELED;
                errno = 0;
                e = readdir(d);
                if (!e)
                        return errno ? -errno : 0;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                r = rm_entry(w, d, e, top, depth);
                if (r == -ECANCELED)
                        return r;
                if (r < 0 && r != -ENOENT) {
                        note_failed(w, e->d_name);
                        return r;
                }
        }
}

static int rm_tree(struct rm_walk *w, int dfd, const char *name, const struct statx *top,
                   int depth) {
        DIR *d;
        int r = 0, pass;

        if (depth > REMOVE_MAX_DEPTH) {
                note_failed(w, name);
                return -E2BIG;
        }
        d = open_subdir(w, dfd, name, top, &r);
        if (!d)
                return r;
        /* Entries removed while the directory is read may make readdir skip some: read it
         * again until rmdir succeeds, a few times at most (something may keep filling it). */
        for (pass = 0; pass < 4; pass++) {
                r = rm_entries(w, d, top, depth);
                if (r < 0)
                        break;
                if (unlinkat(dfd, name, AT_REMOVEDIR) == 0) {
                        r = 0;
                        break;
                }
                r = -errno;
                if (r == -ENOENT) {
                        r = 0;
                        break;
                }
                if (r != -ENOTEMPTY && r != -EEXIST) {
                        note_failed(w, name);
                        break;
                }
                r = -ENOTEMPTY;
                rewinddir(d);
        }
        closedir(d);
        return r;
}

/* A recursive remove of a directory, opened on the loop and walked on a worker. */
struct files_remove_job {
        int dfd;                 /* O_PATH of the directory holding the tree */
        char name[NAME_MAX + 1]; /* the tree's name there */
        struct statx top;        /* the tree as resolved: its mount bounds the walk */
        uid_t uid;               /* the sandbox user, as whom it is walked */
        gid_t gid;
        struct rm_walk walk;
        int err;          /* the result: 0 or -errno */
        int creds_failed; /* err is creds_enter's */
};

void files_remove_job_free(struct files_remove_job *job) {
        if (!job)
                return;
        if (job->dfd >= 0)
                close(job->dfd);
        free(job);
}

/* The message for the result r of removing fx's path (name its last component, failed
 * the entry a recursive remove stopped at, or ""). Returns r as the rpc layer should see
 * it. */
static int remove_result(struct fctx *fx, int r, const char *name, const char *failed) {
        if (r == -EEXIST)
                r = -ENOTEMPTY;
        if (r == -E2BIG)
                return fail(fx, r,
                            "'%.1024s' in sandbox '%s' is nested more than %d directories deep; "
                            "remove it with a command (rm -rf)",
                            fx->path, fx->v->id, REMOVE_MAX_DEPTH);
        if (r == -ECANCELED)
                return fail(fx, r, "the removal of '%.1024s' in sandbox '%s' was stopped", fx->path,
                            fx->v->id);
        if (r < 0 && failed[0] && strcmp(failed, name) != 0) {
                char what[ABS_MAX + NAME_MAX + 16];
                snprintf(what, sizeof(what), "%.1024s (at entry '%s')", fx->path, failed);
                return fail_errno(fx, r, what);
        }
        return r < 0 ? fail_errno(fx, r, fx->path) : 0;
}

/* Resolves fx's path for a remove, refusing the root and /workspace however they are
 * reached: *ret_dfd (the parent, O_PATH), name and *ret_stx as resolve_entry's. */
static int remove_target(struct fctx *fx, int *ret_dfd, char *name, struct statx *ret_stx) {
        struct statx root, ws;
        int dfd, exists, r, wfd;

        if (strcmp(fx->norm, "/") == 0 || strcmp(fx->norm, "/workspace") == 0)
                return fail(fx, -EINVAL,
                            "refusing to remove '%.1024s' of sandbox '%s': the root and "
                            "/workspace stay; remove what is inside them",
                            fx->path, fx->v->id);
        r = resolve_entry(fx, 0, 0, &dfd, name, ret_stx, &exists);
        if (r < 0)
                return r;
        if (!exists) {
                close(dfd);
                return fail_errno(fx, -ENOENT, fx->path);
        }
        /* The same two, reached another way (a symlinked parent, say). */
        r = fd_statx(fx->v->root_fd, &root);
        if (r == 0 && same_inode(ret_stx, &root))
                r = -EINVAL;
        wfd = in_root_open(fx->v->root_fd, "/workspace", O_PATH | O_DIRECTORY);
        if (r == 0 && wfd >= 0 && fd_statx(wfd, &ws) == 0 && same_inode(ret_stx, &ws))
                r = -EINVAL;
        if (wfd >= 0)
                close(wfd);
        if (r < 0) {
                close(dfd);
                return fail(fx, -EINVAL,
                            "refusing to remove '%.1024s' of sandbox '%s': it is the root or "
                            "/workspace, which stay",
                            fx->path, fx->v->id);
        }
        *ret_dfd = dfd;
        return 0;
}

/* Removes what costs the same however much the sandbox made (a file, a symlink, an empty
 * directory) at once; a tree to remove recursively becomes *ret. */
static int remove_open(struct fctx *fx, int recursive, struct files_remove_job **ret) {
        char name[NAME_MAX + 1];
        struct statx stx;
        int dfd = -1, r;

        r = remove_target(fx, &dfd, name, &stx);
        if (r < 0)
                return r;
        if (is_mount_root(&stx)) {
                r = -EBUSY; /* /proc, /tmp, a writable path: the kernel would refuse at the
                             * end, after a recursive remove had emptied it */
        } else if (!S_ISDIR(stx.stx_mode)) {
                r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
        } else if (!recursive) {
                r = unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
        } else {
                struct files_remove_job *job = calloc(1, sizeof(*job));
                if (!job) {
                        close(dfd);
                        return fail_errno(fx, -ENOMEM, fx->path);
                }
                job->dfd = dfd;
                memcpy(job->name, name, sizeof(job->name));
                job->top = stx;
                job->uid = fx->v->run_uid;
                job->gid = fx->v->run_gid;
                *ret = job;
                return 0;
        }
        r = ro_wins(dfd, NULL, r);
        close(dfd);
        return remove_result(fx, r, name, "");
}

int files_remove_open(struct sandbox *sb, const char *path, int recursive,
                      struct files_remove_job **ret, char *err, size_t errlen) {
        struct fctx fx;
        int r;

        *ret = NULL;
        r = begin(&fx, sb, "remove", path, err, errlen);
        if (r == 0)
                r = remove_open(&fx, recursive, ret);
        end(&fx);
        return r;
}

void files_remove_run(struct files_remove_job *job, int (*stop)(void *ud), void *ud) {
        struct creds cr;
        int r;

        memset(&cr, 0, sizeof(cr));
        job->walk.stop = stop;
        job->walk.stop_ud = ud;
        r = stopped(&job->walk) ? -ECANCELED : creds_enter(&cr, job->uid, job->gid, NULL, 0);
        if (r < 0 && r != -ECANCELED)
                job->creds_failed = 1;
        if (r == 0) {
                r = rm_tree(&job->walk, job->dfd, job->name, &job->top, 0);
                if (!job->walk.failed[0])
                        r = ro_wins(job->dfd, NULL, r);
        }
        creds_leave(&cr);
        /* Here, not on the loop: this may be the last reference to a file system
         * unmounted lazily since (a sandbox's disk image), whose writeback then runs. */
        close(job->dfd);
        job->dfd = -1;
        job->err = r;
}

int files_remove_finish(struct files_remove_job *job, struct sandbox *sb, const char *path,
                        char *err, size_t errlen) {
        struct fctx fx;
        int r;

        r = begin(&fx, sb, "remove", path, err, errlen);
        if (r == 0 && job->creds_failed)
                r = fail(&fx, job->err,
                         "cannot take the credentials of the user of sandbox '%s': %s", fx.v->id,
                         strerror(-job->err));
        else if (r == 0)
                r = remove_result(&fx, job->err, job->name, job->walk.failed);
        end(&fx);
        files_remove_job_free(job);
        return r;
}

/* ---- a watched directory (fswatch.c) --------------------------------------------------- */

/* Calls each(ud, name, is_dir) for the entries of the directory behind the O_PATH fd
 * pfd, at most max (-E2BIG past them). */
static int list_entries(int pfd, files_entry_cb each, void *ud, size_t max) {
        int fd = reopen(pfd, O_RDONLY | O_DIRECTORY), r = 0;
        struct dirent *e;
        size_t n = 0;
        DIR *d;

        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return r;
        }
        while (r == 0 && (errno = 0, e = readdir(d))) {
                int is_dir = e->d_type == DT_DIR;
                struct stat st;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (++n > max) {
                        r = -E2BIG;
                        break;
                }
                if (e->d_type == DT_UNKNOWN)
                        is_dir = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                 S_ISDIR(st.st_mode);
                if (each(ud, e->d_name, is_dir))
                        r = -ECANCELED;
        }
        closedir(d);
        return r;
}

int files_watch_dir(struct sandbox *sb, const char *path, int ifd, uint32_t mask, int *ret_wd,
                    char *ret_norm, files_entry_cb each, void *ud, size_t max_entries, char *err,
                    size_t errlen) {
        struct fctx fx;
        struct statx stx;
        char p[64];
        int fd = -1, wd = -1, r;

        r = begin(&fx, sb, "watch", path, err, errlen);
        if (r == 0 && ret_norm)
                snprintf(ret_norm, SBX_PATH_MAX_BYTES + 16, "%s", fx.norm);
        if (r == 0)
                r = open_final(&fx, &fd, &stx);
        if (r == 0 && !S_ISDIR(stx.stx_mode))
                r = fail(&fx, -EINVAL,
                         "'%.1024s' in sandbox '%s' is %s, not a directory; watch the directory "
                         "that holds it",
                         fx.path, fx.v->id, type_phrase(stx.stx_mode));
        if (r == 0) {
                snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                wd = inotify_add_watch(ifd, p, mask);
                if (wd < 0 && errno == ENOSPC)
                        r = fail(&fx, -ENOSPC,
                                 "cannot watch '%.1024s' in sandbox '%s': the host's "
                                 "fs.inotify.max_user_watches is reached",
                                 fx.path, fx.v->id);
                else if (wd < 0)
                        r = fail_errno(&fx, -errno, fx.path);
        }
        if (r == 0 && each)
                r = list_entries(fd, each, ud, max_entries);
        if (r == 0 || r == -E2BIG)
                *ret_wd = wd;
        if (fd >= 0)
                close(fd);
        end(&fx);
        return r;
}
