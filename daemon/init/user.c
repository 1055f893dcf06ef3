/* user.c: the sandbox user's entries in the view's /etc/passwd and /etc/group.
 *
 * The sequence (user_install): a child with the commands' credentials, started as a
 * command is (spawn_call: sharing PID 1's memory, no copy of it), reads the view's two
 * files into PID 1's buffers (so that PID 1, root of the view, copies nothing a command
 * could not read itself; the host's tree is detached by then, so no symlink can lead out
 * of the view); each is composed with the entry first, written to a private tmpfs
 * staged at STAGE_DIR and bound read-only over the view's file; the staging mount is
 * detached. PID 1 keeps a descriptor of each staged file: a warm
 * sandbox is claimed under another uid after its view was built, and user_rename()
 * then rewrites the entry through it (the read-only bind shows the new text at once;
 * nothing else can reach the staged files). Owns those two descriptors for the life of
 * PID 1. Called by mnt.c (setup) and serve.c (claim). */
#include "user.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"
#include "spawn.h"

/* Where the composed files are written, in the root tmpfs while it is still writable. */
#define STAGE_DIR "/.sbx-user"

/* The two files (the reader's buffers, the staged files and their descriptors are in
 * this order). */
static const char *const files[] = {"/etc/passwd", "/etc/group"};
#define N_FILES 2

/* PID 1's descriptors of the staged files (-1: none), for user_rename. */
static int staged_fd[N_FILES] = {-1, -1};

/* What the reader child fills in, in PID 1's memory (spawn_call): for each file a
 * positive errno (0: read) and the bytes, in buffers of USER_MAX_FILE_BYTES + 1 mapped
 * by PID 1 (pages are committed only where written). */
struct reader_arg {
        const struct user_config *cfg;
        char *buf[N_FILES];
        size_t len[N_FILES];
        int err[N_FILES];
};

char *user_compose(bool passwd, const char *host, size_t len, uid_t uid, gid_t gid,
                   const char *shell, size_t *ret_len) {
        char line[512];
        size_t n, total;
        int nl;
        char *out;

        if (passwd)
                nl = snprintf(line, sizeof(line), "%s:x:%u:%u:%s:%s:%s\n", USER_NAME, (unsigned)uid,
                              (unsigned)gid, USER_GECOS, USER_HOME, shell);
        else
                nl = snprintf(line, sizeof(line), "%s:x:%u:\n", USER_NAME, (unsigned)gid);
        if (nl < 0 || (size_t)nl >= sizeof(line))
                return NULL;
        n = (size_t)nl;
        total = n + len + (len > 0 && host[len - 1] != '\n');
        out = malloc(total + 1);
        if (!out)
                return NULL;
        memcpy(out, line, n);
        if (len)
                memcpy(out + n, host, len);
        if (total > n + len)
                out[total - 1] = '\n';
        out[total] = '\0';
        *ret_len = total;
        return out;
}

static int write_all(int fd, const void *p, size_t n) {
        const char *c = p;

        while (n > 0) {
                ssize_t w = write(fd, c, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                c += w;
                n -= (size_t)w;
        }
        return 0;
}

/* The reader child (spawn_call: it shares PID 1's memory, so raw system calls only):
 * becomes the commands' user (no supplementary groups unless rootless, no
 * capabilities), then reads each file into its buffer. A file that is not regular (a
 * hidden one is /dev/null) reads as empty, as it would for a command. Returns 0, or 1
 * before reading anything when it could not drop what PID 1 holds. */
static int reader(void *p) {
        struct reader_arg *a = p;
        const struct user_config *cfg = a->cfg;
        size_t i;

        if ((!cfg->keep_groups && syscall(SYS_setgroups, 0, NULL) < 0) ||
            syscall(SYS_setresgid, cfg->gid, cfg->gid, cfg->gid) < 0 ||
            syscall(SYS_setresuid, cfg->uid, cfg->uid, cfg->uid) < 0 || caps_clear() < 0)
                return 1;
        for (i = 0; i < N_FILES; i++) {
                struct stat st;
                ssize_t n = 0;
                size_t got = 0;
                int fd = open(files[i], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

                if (fd < 0 || fstat(fd, &st) < 0) {
                        a->err[i] = errno;
                } else if (S_ISDIR(st.st_mode)) {
                        a->err[i] = EISDIR;
                } else if (S_ISREG(st.st_mode)) {
                        size_t room = USER_MAX_FILE_BYTES + 1;
                        while (got < room && ((n = read(fd, a->buf[i] + got, room - got)) > 0 ||
                                              (n < 0 && errno == EINTR)))
                                got += n > 0 ? (size_t)n : 0;
                        if (n < 0)
                                a->err[i] = errno;
                        else if (got > USER_MAX_FILE_BYTES)
                                a->err[i] = EFBIG;
                        else
                                a->len[i] = got;
                }
                if (fd >= 0)
                        close(fd);
        }
        return 0;
}

/* Reads the files with the commands' credentials into a (buffers mapped here, unmapped
 * by unmap_buffers). Returns 0, or -errno when the child could not be run or gave up. */
static int read_as_user(struct reader_arg *a) {
        size_t i;
        int r;

        for (i = 0; i < N_FILES; i++) {
                a->buf[i] = mmap(NULL, USER_MAX_FILE_BYTES + 1, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (a->buf[i] == MAP_FAILED) {
                        a->buf[i] = NULL;
                        return -errno;
                }
        }
        r = spawn_call(reader, a);
        return r < 0 ? r : r > 0 ? -EPERM : 0;
}

static void unmap_buffers(struct reader_arg *a) {
        size_t i;

        for (i = 0; i < N_FILES; i++)
                if (a->buf[i])
                        munmap(a->buf[i], USER_MAX_FILE_BYTES + 1);
}

/* Writes the composed text of file i into the staging directory and keeps a descriptor
 * of it. Returns 0 or -errno. */
static int stage(size_t i, const char *text, size_t len) {
        char path[64];
        int fd;

        snprintf(path, sizeof(path), STAGE_DIR "/%zu", i);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOCTTY | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, 0644) < 0 || write_all(fd, text, len) < 0) {
                int e = errno ? errno : EIO;
                close(fd);
                return -e;
        }
        staged_fd[i] = fd;
        return 0;
}

/* Binds the staged file i read-only over files[i] (created first in an /etc of our
 * own). What files[i] leads to in the view may refuse a mount (a root_dir's symlink to
 * somewhere odd): a warning, and the file stays as it is. */
static int bind_over(size_t i, bool own_etc, struct util_err *err, struct util_warnings *warn) {
        char src[64];
        int fd;

        snprintf(src, sizeof(src), STAGE_DIR "/%zu", i);
        if (own_etc) {
                fd = open(files[i], O_WRONLY | O_CREAT | O_NOCTTY | O_CLOEXEC, 0644);
                if (fd < 0)
                        return util_fail(err, errno, NULL, "create %s", files[i]);
                close(fd);
        }
        if (mount(src, files[i], "none", MS_BIND, NULL) < 0) {
                util_warn(warn, "%s: cannot mount over it (%s); the sandbox user has no name there",
                          files[i], strerror(errno));
                return 0;
        }
        /* A mount of our own tmpfs: no flag of it is locked, a plain remount works. */
        if (mount("none", files[i], "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0) {
                int e = errno;
                if (umount2(files[i], MNT_DETACH) < 0)
                        return util_fail(err, e, NULL, "make the sandbox user's %s read-only",
                                         files[i]);
                util_warn(warn,
                          "%s: cannot make it read-only (%s); the sandbox user has no name "
                          "there",
                          files[i], strerror(e));
        }
        return 0;
}

/* Composes each file from what the sandbox user could read of it (a) into out[i]
 * (out_len[i] bytes; *total of all). One it may not read shows it nothing: only the
 * entry is left (so is a missing one in an /etc of our own); another failure leaves
 * that file out with a warning. Returns 0 or -errno with err set. */
static int compose_all(const struct user_config *cfg, struct reader_arg *a, bool own_etc,
                       char *out[N_FILES], size_t out_len[N_FILES], size_t *total,
                       struct util_err *err, struct util_warnings *warn) {
        const char *shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
        size_t i;

        for (i = 0; i < N_FILES; i++) {
                if (a->err[i] == EACCES || a->err[i] == EPERM || (own_etc && a->err[i] == ENOENT))
                        a->err[i] = 0, a->len[i] = 0;
                if (a->err[i]) {
                        util_warn(warn, "%s: %s; the sandbox user has no name there", files[i],
                                  strerror(a->err[i]));
                        continue;
                }
                out[i] = user_compose(i == 0, a->buf[i], a->len[i], cfg->uid, cfg->gid, shell,
                                      &out_len[i]);
                if (!out[i])
                        return util_fail(err, ENOMEM, NULL, "compose %s", files[i]);
                *total += out_len[i];
        }
        return 0;
}

/* Writes the composed files into a staging tmpfs of their own (with room for a rename
 * to the longest ids, user_rename), binds each over its file (bind_over), then lets go
 * of the staging directory. Returns 0 or -errno with err set. */
static int install_composed(char *const out[N_FILES], const size_t out_len[N_FILES], size_t total,
                            bool own_etc, struct util_err *err, struct util_warnings *warn) {
        bool staged = false;
        char opts[64];
        size_t i;
        int r = 0;

        snprintf(opts, sizeof(opts), "mode=0755,size=%zu,nr_inodes=16", total + 64 * 1024);
        if (mkdir(STAGE_DIR, 0700) < 0)
                return util_fail(err, errno, NULL, "mkdir " STAGE_DIR);
        if (mount("sbx-user", STAGE_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                r = util_fail(err, errno, NULL, "mount a tmpfs on " STAGE_DIR);
        else
                staged = true;
        for (i = 0; staged && i < N_FILES && r == 0; i++) {
                if (!out[i])
                        continue;
                r = stage(i, out[i], out_len[i]);
                if (r < 0)
                        r = util_fail(err, r, NULL, "write the sandbox user's %s", files[i]);
                else
                        r = bind_over(i, own_etc, err, warn);
        }
        if (staged && umount2(STAGE_DIR, MNT_DETACH) < 0 && r == 0)
                r = util_fail(err, errno, NULL, "detach " STAGE_DIR);
        if (rmdir(STAGE_DIR) < 0 && r == 0)
                r = util_fail(err, errno, NULL, "rmdir " STAGE_DIR);
        return r;
}

int user_install(const struct user_config *cfg, struct util_err *err, struct util_warnings *warn) {
        struct reader_arg a = {.cfg = cfg};
        char *out[N_FILES] = {NULL, NULL};
        size_t out_len[N_FILES] = {0, 0}, i, total = 0;
        bool own_etc = false;
        struct stat st;
        int r;

        /* A tree without /etc (a static binary and little else) gets one of its own. */
        if (stat("/etc", &st) < 0 && errno == ENOENT) {
                if (mkdir("/etc", 0755) < 0)
                        return util_fail(err, errno, NULL, "mkdir /etc");
                own_etc = true;
        }
        r = read_as_user(&a);
        if (r < 0) {
                util_warn(warn,
                          "cannot read /etc/passwd as the sandbox user (%s): it has no "
                          "name (whoami fails)",
                          strerror(-r));
                r = 0;
        } else {
                r = compose_all(cfg, &a, own_etc, out, out_len, &total, err, warn);
        }
        if (r == 0 && (out[0] || out[1]))
                r = install_composed(out, out_len, total, own_etc, err, warn);
        for (i = 0; i < N_FILES; i++)
                free(out[i]);
        unmap_buffers(&a);
        return r;
}

/* Rewrites the entry of staged file i (its first line) for uid and gid, keeping its
 * shell and every host line. Returns 0 or -errno. */
static int rename_one(size_t i, uid_t uid, gid_t gid) {
        char shell[64], *old, *eol, *colon, *text = NULL;
        struct stat st;
        size_t len;
        ssize_t n;
        int r = 0;

        if (fstat(staged_fd[i], &st) < 0)
                return -errno;
        old = malloc((size_t)st.st_size + 1);
        if (!old)
                return -ENOMEM;
        n = pread(staged_fd[i], old, (size_t)st.st_size, 0);
        eol = n == st.st_size ? memchr(old, '\n', (size_t)n) : NULL;
        colon = eol ? memrchr(old, ':', (size_t)(eol - old)) : NULL;
        if (!colon || (size_t)(eol - colon - 1) >= sizeof(shell)) {
                r = -EIO;
        } else {
                memcpy(shell, colon + 1, (size_t)(eol - colon - 1));
                shell[eol - colon - 1] = '\0';
                text = user_compose(i == 0, eol + 1, (size_t)(old + n - (eol + 1)), uid, gid, shell,
                                    &len);
                if (!text)
                        r = -ENOMEM;
                else if (ftruncate(staged_fd[i], 0) < 0 ||
                         pwrite(staged_fd[i], text, len, 0) != (ssize_t)len)
                        r = -errno;
        }
        free(text);
        free(old);
        return r;
}

int user_rename(uid_t uid, gid_t gid) {
        size_t i;
        int r = 0;

        for (i = 0; i < N_FILES && r == 0; i++)
                if (staged_fd[i] >= 0)
                        r = rename_one(i, uid, gid);
        return r;
}
