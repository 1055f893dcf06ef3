/* hostpath.c: host paths of a request, opened with the caller's rights; see hostpath.h. */
#include "hostpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"
#include "mountinfo.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"

#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif

/* Directories above a path, at most (a bound on the walk up). */
#define HOSTPATH_MAX_DEPTH 4096

/* One of the daemon's own directories. */
struct own_dir {
        const char *path;
        dev_t dev;
        ino_t ino;
        int ok;
};

/* The directory of the socket, or the socket itself when that directory is a shared
 * sticky one such as /tmp (hiding or refusing all of /tmp would be wrong). Allocated. */
static char *socket_dir(const char *socket_path) {
        char *dir = strdup(socket_path), *slash;
        struct stat st;

        if (!dir)
                return NULL;
        slash = strrchr(dir, '/');
        if (slash && slash != dir)
                *slash = '\0';
        if (stat(dir, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH)) {
                free(dir);
                return strdup(socket_path);
        }
        return dir;
}

size_t hostpath_daemons(struct sbxd *d, char *ret[2]) {
        char *sock = socket_dir(d->cfg->socket_path);
        size_t n = 0;

        if ((ret[n] = realpath(d->cfg->state_dir, NULL)))
                n++;
        if (sock && (ret[n] = realpath(sock, NULL)))
                n++;
        free(sock);
        return n;
}

/* The daemon's directories as they are now, with their identities. */
static size_t own_dirs(struct sbxd *d, struct own_dir out[2], char *paths[2]) {
        struct stat st;
        size_t i, n = hostpath_daemons(d, paths), k = 0;

        for (i = 0; i < n; i++)
                if (stat(paths[i], &st) == 0) {
                        out[k].path = paths[i];
                        out[k].dev = st.st_dev;
                        out[k].ino = st.st_ino;
                        out[k].ok = 1;
                        k++;
                }
        for (i = k; i < 2; i++)
                out[i].ok = 0;
        return k;
}

/* Walks up from fd (as the daemon: the caller's rights do not matter here) and
 * returns the daemon's directory it meets, or NULL. Comparing each directory by device
 * and inode finds the state directory under any name: a bind mount of it, or of a
 * directory above it, has the same root inode. */
static const char *daemons_above(int fd, const struct own_dir own[2]) {
        int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3), depth;
        const char *hit = NULL;

        for (depth = 0; cur >= 0 && depth < HOSTPATH_MAX_DEPTH && !hit; depth++) {
                struct stat st, up_st;
                int up;
                size_t i;

                if (fstat(cur, &st) < 0)
                        break;
                for (i = 0; i < 2; i++)
                        if (own[i].ok && own[i].dev == st.st_dev && own[i].ino == st.st_ino)
                                hit = own[i].path;
                up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                close(cur);
                cur = up;
                /* At "/", ".." is "/" itself. */
                if (cur >= 0 && fstat(cur, &up_st) == 0 && up_st.st_dev == st.st_dev &&
                    up_st.st_ino == st.st_ino)
                        break;
        }
        if (cur >= 0)
                close(cur);
        return hit;
}

/* 1 when a is b or lies below it (canonical paths). */
static int at_or_below(const char *b, const char *a) {
        size_t n = strlen(b);
        if (strcmp(b, "/") == 0)
                return 1;
        return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* Where each daemon directory lies in its filesystem: the device and the path from the
 * filesystem's root, from the mount holding it (the longest mount point above it). */
struct own_fs {
        unsigned major, minor;
        char rel[PATH_MAX];
        int ok;
};

/* The daemon's directory that a mount at or below p (canonical) exposes, or NULL: a
 * bind mount of it, of something inside it, or of a directory above it, made by an
 * operator anywhere below a path a caller names, shows the daemon's files there under
 * another name; the walk up from the path cannot see it, the mount table does. */
static const char *daemons_mounted_below(const char *p, struct own_dir own[2], size_t n_own) {
        struct own_fs fs[2];
        size_t best[2] = {0, 0}, i;
        const char *hit = NULL;
        char *line = NULL;
        size_t cap = 0;
        FILE *f;
        int pass;

        memset(fs, 0, sizeof(fs));
        /* Two passes: find where the daemon's directories live, then look below p. */
        for (pass = 0; pass < 2 && !hit; pass++) {
                f = fopen("/proc/self/mountinfo", "re");
                if (!f)
                        break;
                while (!hit && getline(&line, &cap, f) > 0) {
                        struct mountinfo_line m;
                        if (mountinfo_parse(line, &m) < 0)
                                continue;
                        for (i = 0; i < n_own; i++) {
                                size_t plen = strlen(m.point);
                                if (pass == 0 && at_or_below(m.point, own[i].path) &&
                                    plen + 1 > best[i]) {
                                        const char *rest = own[i].path + (plen > 1 ? plen : 0);
                                        best[i] = plen + 1;
                                        fs[i].major = m.major;
                                        fs[i].minor = m.minor;
                                        snprintf(fs[i].rel, sizeof(fs[i].rel), "%s%s",
                                                 strcmp(m.root, "/") == 0 && rest[0] ? "" : m.root,
                                                 rest);
                                        fs[i].ok = 1;
                                } else if (pass == 1 && fs[i].ok && at_or_below(p, m.point) &&
                                           m.major == fs[i].major && m.minor == fs[i].minor &&
                                           (at_or_below(fs[i].rel, m.root) ||
                                            at_or_below(m.root, fs[i].rel))) {
                                        hit = own[i].path;
                                }
                        }
                }
                fclose(f);
        }
        free(line);
        return hit;
}

/* The permission class of st that the kernel judges the caller k in (hostpath.h). */
static enum hostpath_class class_of(const struct stat *st, const struct caller *k) {
        size_t i;

        if (k->uid == 0)
                return HOSTPATH_CLASS_ROOT;
        if (st->st_uid == k->uid)
                return HOSTPATH_CLASS_OWNER;
        if (st->st_gid == k->gid)
                return HOSTPATH_CLASS_GROUP;
        for (i = 0; i < k->n_groups; i++)
                if (k->groups[i] == st->st_gid)
                        return HOSTPATH_CLASS_GROUP;
        return HOSTPATH_CLASS_OTHER;
}

/* Whether the caller (whose identity this thread holds now) may use fd for mode
 * (R_OK, W_OK, X_OK), judged by the kernel with ACLs (faccessat2, Linux 5.8), else by
 * the mode bits. 0, or -EACCES / -EROFS. */
static int may(int fd, const struct stat *st, const struct caller *k, int mode) {
        int r = (int)syscall(SYS_faccessat2, fd, "", mode, AT_EACCESS | AT_EMPTY_PATH);
        mode_t bits;

        if (r == 0)
                return 0;
        if (errno != ENOSYS && errno != EINVAL)
                return errno == EROFS ? -EROFS : -EACCES;
        /* An old kernel: the permission bits alone (root may do anything). */
        switch (class_of(st, k)) {
        case HOSTPATH_CLASS_ROOT:
                return 0;
        case HOSTPATH_CLASS_OWNER:
                bits = (st->st_mode >> 6) & 7;
                break;
        case HOSTPATH_CLASS_GROUP:
                bits = (st->st_mode >> 3) & 7;
                break;
        case HOSTPATH_CLASS_OTHER:
        default:
                bits = st->st_mode & 7;
                break;
        }
        return ((mode & R_OK) && !(bits & 4)) || ((mode & W_OK) && !(bits & 2)) ||
                               ((mode & X_OK) && !(bits & 1))
                       ? -EACCES
                       : 0;
}

/* The access want needs on an object of type m. */
static int wanted_mode(enum hostpath_access want, mode_t m) {
        switch (want) {
        case HOSTPATH_ROOT:
                return R_OK | X_OK;
        case HOSTPATH_WRITE:
                return S_ISDIR(m) ? W_OK | X_OK : W_OK;
        case HOSTPATH_READ:
                return S_ISDIR(m) ? R_OK | X_OK : R_OK;
        case HOSTPATH_LOOKUP:
                break;
        }
        return 0;
}

static const char *access_words(enum hostpath_access want) {
        return want == HOSTPATH_ROOT    ? "read and search"
               : want == HOSTPATH_WRITE ? "write"
               : want == HOSTPATH_READ  ? "read"
                                        : "reach";
}

void hostpath_clear(struct hostpath *h) {
        free(h->path);
        memset(h, 0, sizeof(*h));
}

/* Opens path as the caller k (every directory on the way must be searchable by them,
 * and a symlink leads only where they could follow it) and checks they may use it as
 * want says. Root keeps the daemon's identity: root's rights are root's. The O_PATH
 * descriptor into *ret_fd (also on failure, when opened: the caller closes it) and its
 * stat into *st. 0 or -errno. */
static int open_as_caller(const struct caller *k, const char *path, enum hostpath_access want,
                          int *ret_fd, struct stat *st) {
        struct creds cr = {0};
        int r = k->uid == 0 ? 0 : creds_enter(&cr, k->uid, k->gid, k->groups, k->n_groups), mode;

        *ret_fd = -1;
        if (r == 0) {
                *ret_fd = open(path, O_PATH | O_CLOEXEC);
                r = *ret_fd < 0 ? -errno : fstat(*ret_fd, st) < 0 ? -errno : 0;
                mode = r == 0 ? wanted_mode(want, st->st_mode) : 0;
                if (r == 0 && want == HOSTPATH_ROOT && !S_ISDIR(st->st_mode))
                        r = -ENOTDIR;
                if (r == 0 && mode)
                        r = may(*ret_fd, st, k, mode);
        }
        creds_leave(&cr);
        return r;
}

/* The message for open_as_caller's failure r. Returns r (-EACCES for -EPERM too). */
static int open_error(int r, const char *what, const char *path, const struct caller *k,
                      enum hostpath_access want, char *err, size_t errlen) {
        switch (-r) {
        case ENOENT:
                snprintf(err, errlen, "%s '%.200s' does not exist on the host; create it first",
                         what, path);
                return r;
        case EACCES:
        case EPERM:
                snprintf(err, errlen,
                         "%s '%.200s': permission denied: you (uid %u) may not %s it on the "
                         "host, and the daemon does not lend you its rights",
                         what, path, (unsigned)k->uid, access_words(want));
                return -EACCES;
        case EROFS:
                snprintf(err, errlen, "%s '%.200s' is on a read-only filesystem", what, path);
                return r;
        case ENOTDIR:
                snprintf(err, errlen, "%s '%.200s' is not a directory", what, path);
                return r;
        default:
                snprintf(err, errlen, "%s '%.200s': %s", what, path, strerror(-r));
                return r;
        }
}

int hostpath_open(struct sbxd *d, const struct caller *k, const char *what, const char *path,
                  enum hostpath_access want, struct hostpath *ret, char *err, size_t errlen) {
        struct own_dir own[2];
        char link[64], canon[PATH_MAX], *paths[2] = {NULL, NULL};
        const char *hit;
        struct stat st;
        size_t n_own;
        ssize_t n;
        int fd, r;

        memset(ret, 0, sizeof(*ret));
        if (!path || path[0] != '/') {
                snprintf(err, errlen, "%s '%.200s' must be an absolute path", what,
                         path ? path : "");
                return -EINVAL;
        }
        if (strlen(path) >= SBX_PATH_MAX_BYTES) {
                snprintf(err, errlen, "%s is longer than %u bytes", what, SBX_PATH_MAX_BYTES);
                return -EINVAL;
        }
        r = open_as_caller(k, path, want, &fd, &st);
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                return open_error(r, what, path, k, want, err, errlen);
        }
        n_own = own_dirs(d, own, paths);
        hit = daemons_above(fd, own);
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, canon, sizeof(canon) - 1);
        close(fd);
        if (n > 0)
                canon[n] = '\0';
        if (n <= 0 || canon[0] != '/' || (n > 10 && strcmp(canon + n - 10, " (deleted)") == 0)) {
                snprintf(err, errlen, "%s '%.200s' cannot be named on the host (%s)", what, path,
                         n < 0 ? strerror(errno) : "outside the daemon's mount namespace");
                r = -EINVAL;
        } else {
                if (!hit && want != HOSTPATH_LOOKUP)
                        hit = daemons_mounted_below(canon, own, n_own);
                if (hit) {
                        snprintf(err, errlen,
                                 "%s '%.200s' is the daemon's own directory %.200s, lies below "
                                 "it or holds a mount of it: refused to every caller (sandboxes "
                                 "never reach sbxd's state, records or socket)",
                                 what, path, hit);
                        r = -EPERM;
                }
        }
        free(paths[0]);
        free(paths[1]);
        if (r < 0)
                return r;
        ret->path = strdup(canon);
        if (!ret->path) {
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        ret->dev = st.st_dev;
        ret->ino = st.st_ino;
        ret->mode = st.st_mode;
        ret->uid = st.st_uid;
        ret->gid = st.st_gid;
        ret->class = class_of(&st, k);
        return 0;
}

/* Opens path as the caller k for reading (their identity on this thread meanwhile). */
static int open_read_as_caller(const struct caller *k, const char *path, int directory,
                               int *ret_fd) {
        struct creds cr = {0};
        int r = k->uid == 0 ? 0 : creds_enter(&cr, k->uid, k->gid, k->groups, k->n_groups);

        *ret_fd = -1;
        if (r == 0) {
                *ret_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                                             (directory ? O_DIRECTORY : 0));
                r = *ret_fd < 0 ? -errno : 0;
        }
        creds_leave(&cr);
        return r;
}

int hostpath_open_read(struct sbxd *d, const struct caller *k, const char *what, const char *path,
                       int directory, int *ret_fd, char *err, size_t errlen) {
        struct own_dir own[2];
        char *paths[2] = {NULL, NULL};
        const char *hit = NULL;
        struct stat st;
        int fd, r;

        if (!path || path[0] != '/' || strlen(path) >= SBX_PATH_MAX_BYTES) {
                snprintf(err, errlen, "%s '%.200s' must be an absolute path of at most %u bytes",
                         what, path ? path : "", SBX_PATH_MAX_BYTES - 1);
                return -EINVAL;
        }
        r = open_read_as_caller(k, path, directory, &fd);
        if (r < 0)
                return open_error(r, what, path, k, directory ? HOSTPATH_ROOT : HOSTPATH_READ, err,
                                  errlen);
        if (fstat(fd, &st) < 0 || (!directory && !S_ISREG(st.st_mode)) ||
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
                snprintf(err, errlen, "%s '%.200s' is not a regular file", what, path);
                close(fd);
                return -EINVAL;
        }
        if (directory) {
                own_dirs(d, own, paths);
                hit = daemons_above(fd, own);
                if (hit)
                        snprintf(err, errlen,
                                 "%s '%.200s' is the daemon's own directory %.200s or lies "
                                 "below it: refused to every caller",
                                 what, path, hit);
                free(paths[0]);
                free(paths[1]);
        }
        if (hit) {
                close(fd);
                return -EPERM;
        }
        *ret_fd = fd;
        return 0;
}
