/* util.c: logging, setup error text, warnings and file helpers of the init helper.
 *
 * Owns only the sandbox id used as a log prefix (a copy). Called by every other module
 * of daemon/init, and (the descriptor and cgroup helpers only) by the command child;
 * see util.h for the contracts. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx_limits.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static char log_sandbox[SBX_ID_MAX_BYTES + 1];

void util_log_set_sandbox(const char *id) {
        if (!id)
                id = "";
        snprintf(log_sandbox, sizeof(log_sandbox), "%s", id);
}

void util_log(enum util_log_level level, const char *fmt, ...) {
        char line[1024];
        int saved = errno, n;
        va_list ap;

        if (log_sandbox[0])
                n = snprintf(line, sizeof(line), "<%d>sbx-init sbx=%s: ", (int)level, log_sandbox);
        else
                n = snprintf(line, sizeof(line), "<%d>sbx-init: ", (int)level);
        if (n < 0 || (size_t)n >= sizeof(line))
                n = 0;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        n = (int)strlen(line);
        line[n++] = '\n';
        /* One write so that lines of concurrent sandboxes do not interleave. */
        if (write(STDERR_FILENO, line, (size_t)n) < 0) {
                /* Nowhere left to report to. */
        }
        errno = saved;
}

int util_fail(struct util_err *e, int err, const char *hint, const char *fmt, ...) {
        size_t n;
        va_list ap;

        if (err < 0)
                err = -err;
        if (err == 0)
                err = EIO;
        e->err = err;
        va_start(ap, fmt);
        vsnprintf(e->text, sizeof(e->text), fmt, ap);
        va_end(ap);
        n = strlen(e->text);
        snprintf(e->text + n, sizeof(e->text) - n, ": %s%s%s%s", strerror(err), hint ? " (" : "",
                 hint ? hint : "", hint ? ")" : "");
        return -err;
}

void util_warn(struct util_warnings *w, const char *fmt, ...) {
        va_list ap;

        if (!w || w->n >= UTIL_MAX_WARNINGS)
                return;
        va_start(ap, fmt);
        vsnprintf(w->text[w->n], sizeof(w->text[w->n]), fmt, ap);
        va_end(ap);
        w->n++;
}

int util_write_file(const char *path, const char *data) {
        size_t len = strlen(data);
        ssize_t n;
        int fd, r = 0;

        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        do
                n = write(fd, data, len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                r = -errno;
        else if ((size_t)n != len)
                r = -EIO;
        close(fd);
        return r;
}

int util_mkdir_p(const char *path, mode_t mode) {
        char buf[SBX_PATH_MAX_BYTES + 1];
        struct stat st;
        size_t len = strlen(path), i;

        if (len == 0 || len >= sizeof(buf))
                return len == 0 ? -EINVAL : -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        /* Walk the components left to right; each existing one must be a directory. */
        for (i = 1; i <= len; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                if (buf[i - 1] == '/')
                        continue;
                buf[i] = '\0';
                if (mkdir(buf, mode) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (stat(buf, &st) < 0)
                                return -errno;
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                }
                if (i < len)
                        buf[i] = '/';
        }
        return 0;
}

int util_path_join(char *buf, size_t cap, const char *a, const char *b) {
        size_t la = strlen(a);
        int n;

        while (la > 0 && a[la - 1] == '/')
                la--;
        while (*b == '/')
                b++;
        n = snprintf(buf, cap, "%.*s/%s", (int)la, a, b);
        if (n < 0 || (size_t)n >= cap)
                return -ENAMETOOLONG;
        return 0;
}

int util_cloexec_walk(int from) {
        /* struct linux_dirent64 (getdents64(2)); no glibc DIR: this runs in a command
         * child that shares PID 1's memory and must not allocate. */
        struct dent {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
        };
        char buf[4096] __attribute__((aligned(8)));
        int d, r = 0;
        long n;

        d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
                return -errno;
        while (r == 0 && (n = syscall(SYS_getdents64, d, buf, sizeof(buf))) > 0) {
                long off = 0;
                while (off < n) {
                        const struct dent *e = (const struct dent *)(buf + off);
                        long fd = 0;
                        const char *p;
                        off += e->reclen;
                        for (p = e->name; *p >= '0' && *p <= '9' && fd < 1L << 30; p++)
                                fd = fd * 10 + (*p - '0');
                        if (*p != '\0' || p == e->name || fd < from || fd == d)
                                continue;
                        if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF) {
                                r = -errno;
                                break;
                        }
                }
        }
        if (r == 0 && n < 0)
                r = -errno;
        close(d);
        return r;
}

int util_cloexec_from(int from) {
#ifdef SYS_close_range
        if (syscall(SYS_close_range, (unsigned)from, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
                return 0;
        if (errno != ENOSYS && errno != EINVAL)
                return -errno;
#endif
        /* Before Linux 5.11 (CLOSE_RANGE_CLOEXEC): walk the open descriptors. */
        return util_cloexec_walk(from);
}

int util_path_ok(const char *path) {
        const char *p = path;
        size_t len = strlen(path);

        if (len == 0 || len > SBX_PATH_MAX_BYTES || path[0] != '/')
                return 0;
        while (*p) {
                const char *end;
                size_t n;
                while (*p == '/')
                        p++;
                end = strchrnul(p, '/');
                n = (size_t)(end - p);
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return 0;
                p = end;
        }
        return 1;
}

int util_join_cgroups(const int *fds, size_t n, bool v2) {
        size_t i;

        for (i = 0; i < n; i++) {
                int pfd = fds[i], r = 0;
                ssize_t w;

                if (v2) {
                        pfd = openat(fds[i], "cgroup.procs", O_WRONLY | O_CLOEXEC);
                        if (pfd < 0)
                                return -errno;
                }
                do
                        w = write(pfd, "0", 1);
                while (w < 0 && errno == EINTR);
                if (w != 1)
                        r = w < 0 ? -errno : -EIO;
                if (pfd != fds[i])
                        close(pfd);
                if (r < 0)
                        return r;
        }
        return 0;
}

int util_make_userns(const char *uid_map, const char *gid_map, bool setgroups) {
        char path[64], byte;
        int p[2], fd = -1, r = 0;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                close(p[0]);
                if (unshare(CLONE_NEWUSER) == 0 && write(p[1], "u", 1) == 1)
                        for (;;)
                                pause();
                _exit(1);
        }
        close(p[1]);
        if (read(p[0], &byte, 1) != 1)
                r = -ECHILD;
        close(p[0]);
        if (r == 0) {
                snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
                r = util_write_file(path, uid_map);
        }
        if (r == 0) {
                snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
                if (!setgroups)
                        (void)util_write_file(path, "deny");
                snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
                r = util_write_file(path, gid_map);
        }
        if (r == 0) {
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        r = -errno;
        }
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return r < 0 ? r : fd;
}
