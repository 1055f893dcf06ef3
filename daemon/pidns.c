/* pidns.c: PID namespaces and the sandbox inits at their heads; see pidns.h.
 *
 * A namespace's PID 1 is found with nsfs's NS_GET_PID_FROM_PIDNS (Linux 6.8), else by
 * a walk of /proc; either way the process is pinned by a pidfd while it is looked at,
 * so that a pid reused meanwhile is never taken for the namespace's init. */
#include "pidns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef NS_GET_PARENT
#define NS_GET_PARENT _IO(0xb7, 0x2)
#endif
#ifndef NS_GET_PID_FROM_PIDNS
#define NS_GET_PID_FROM_PIDNS _IOR(0xb7, 0x6, int) /* Linux 6.8, <linux/nsfs.h> */
#endif

/* The kernel nests PID namespaces at most 32 deep (MAX_PID_NS_LEVEL). */
#define PIDNS_MAX_DEPTH 33

/* Reads /proc/PID/NAME into buf (NUL-terminated). The byte count, or -errno. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len) {
        char path[64];
        ssize_t n;
        int fd, e;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        e = errno;
        close(fd);
        if (n < 0)
                return -e;
        buf[n] = '\0';
        return n;
}

/* The last field of the NSpid line of /proc/PID/status (the process's pid in its own
 * namespace), with the first (its pid here) in *outer. The pid, or -errno. */
static long nspid_inner(pid_t pid, long *outer) {
        char buf[4096], *p, *end;
        long v = -1;
        ssize_t n = read_proc(pid, "status", buf, sizeof(buf));

        if (n < 0)
                return n;
        p = strstr(buf, "\nNSpid:");
        if (!p)
                return -ENOENT;
        p += 7;
        *outer = strtol(p, &end, 10);
        if (end == p)
                return -ENOENT;
        /* The fields that follow, up to the end of the line. */
        for (v = *outer, p = end; *p && *p != '\n'; p = end) {
                long next = strtol(p, &end, 10);
                if (end == p)
                        break;
                v = next;
        }
        return v;
}

int pidns_is_sbx_init(pid_t pid) {
        char buf[16];
        long outer = 0, inner = nspid_inner(pid, &outer);
        ssize_t n;

        if (inner < 0)
                return (int)inner;
        if (outer != pid || inner != 1)
                return 0;
        /* argv[0], which the daemon sets whatever the binary's path: "sbx-init\0". */
        n = read_proc(pid, "cmdline", buf, sizeof(buf));
        if (n < 0)
                return (int)n;
        return n >= 9 && memcmp(buf, "sbx-init", 9) == 0;
}

static int same_file(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* 1 when /proc/PID/ns/pid is the namespace ns. */
static int in_ns(pid_t pid, const struct stat *ns) {
        char path[64];
        struct stat st;

        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        return stat(path, &st) == 0 && same_file(&st, ns);
}

/* PID 1 of the namespace nsfd (ns: its stat), as a pid of the daemon's namespace, by
 * a walk of /proc for kernels without NS_GET_PID_FROM_PIDNS. The pid or -ESRCH. */
static pid_t init_by_walk(const struct stat *ns) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = -ESRCH;

        if (!d)
                return -errno;
        while (found < 0 && (de = readdir(d))) {
                long outer = 0;
                pid_t pid = (pid_t)atoi(de->d_name);
                if (pid > 0 && in_ns(pid, ns) && nspid_inner(pid, &outer) == 1)
                        found = pid;
        }
        closedir(d);
        return found;
}

/* 1 when PID 1 of the namespace nsfd is sbx-init, 0 when it is another program;
 * -ESRCH when it is gone, or -errno (-ENOENT, -EACCES: it cannot be looked at). */
static int init_is_sbx(int nsfd, const struct stat *ns) {
        pid_t pid = (pid_t)ioctl(nsfd, NS_GET_PID_FROM_PIDNS, 1);
        struct pollfd p = {.events = POLLIN};
        int r;

        if (pid < 0 && (errno == ENOTTY || errno == EINVAL))
                pid = init_by_walk(ns);
        else if (pid < 0)
                pid = -errno;
        if (pid <= 0)
                return pid < 0 ? (int)pid : -ESRCH;
        /* Pinned: when the pidfd has not exited after the reads, they were of it. */
        p.fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (p.fd < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        r = in_ns(pid, ns) ? pidns_is_sbx_init(pid) : -ESRCH;
        if (r >= 0 && poll(&p, 1, 0) > 0)
                r = -ESRCH;
        close(p.fd);
        return r;
}

/* The daemon's own PID namespace, read once (a process never changes its own). */
static int own_pidns(struct stat *ret) {
        static struct stat own;
        static int known;

        if (!known) {
                if (stat("/proc/self/ns/pid", &own) < 0)
                        return -errno;
                known = 1;
        }
        *ret = own;
        return 0;
}

int pidns_sandboxed(int nsfd, bool (*is_ours)(const void *ctx, dev_t dev, ino_t ino),
                    const void *ctx, enum pidns_verdict *ret) {
        struct stat own = {0}, st[PIDNS_MAX_DEPTH];
        int fds[PIDNS_MAX_DEPTH], n = 0, i, r;

        r = own_pidns(&own);
        if (r < 0)
                return r;
        /* The chain from nsfd up to the daemon's own namespace, which ends it. */
        fds[0] = nsfd;
        *ret = PIDNS_OUTSIDE;
        for (;;) {
                if (fstat(fds[n], &st[n]) < 0) {
                        r = -errno;
                        break;
                }
                if (same_file(&st[n], &own)) {
                        *ret = PIDNS_FREE;
                        break;
                }
                if (++n == PIDNS_MAX_DEPTH) {
                        r = -ELOOP;
                        break;
                }
                fds[n] = ioctl(fds[n - 1], NS_GET_PARENT);
                if (fds[n] < 0) {
                        /* EPERM: the parent is not below the daemon's namespace. */
                        r = errno == EPERM ? 0 : -errno;
                        break;
                }
        }
        /* fds[0..n-1] are below the daemon's namespace when it was reached. */
        for (i = 0; r == 0 && *ret == PIDNS_FREE && i < n; i++) {
                if (is_ours && is_ours(ctx, st[i].st_dev, st[i].st_ino))
                        *ret = PIDNS_SANDBOXED;
                else if ((r = init_is_sbx(fds[i], &st[i])) > 0)
                        *ret = PIDNS_SANDBOXED;
                r = r > 0 ? 0 : r;
        }
        for (i = 1; i <= n && i < PIDNS_MAX_DEPTH; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        return r;
}
