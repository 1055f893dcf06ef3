/* devpts.c: pseudo-terminals in a sandbox's own devpts; see devpts.h.
 *
 * The steps of devpts_open: find "/dev/pts/ptmx" beneath the sandbox's root with openat2
 * (RESOLVE_IN_ROOT, no symlink, no magic link) as O_PATH, which opens no device and never
 * blocks; check that it is devpts's ptmx node (a devpts filesystem, character device 5:2);
 * reopen it for real through /proc/self/fd (the same node, so nothing can be swapped in
 * between); check the result is a pty master (TIOCGPTN); unlock it, size it, and open
 * its slave with TIOCGPTPEER, which reaches the slave through the master's own devpts
 * instance, never through a path the sandbox could redirect. */
#include "devpts.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "mountinfo.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* devpts's ptmx node (Documentation/admin-guide/devices.txt: 5,2 /dev/ptmx). */
#define PTMX_MAJOR 5
#define PTMX_MINOR 2

/* The ptmx node beneath root_fd, O_PATH. fd or -errno. */
static int find_ptmx(int root_fd) {
        struct open_how how;
        long fd;

        memset(&how, 0, sizeof(how));
        how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        do
                fd = syscall(SYS_openat2, root_fd, "dev/pts/ptmx", &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN);
        return fd < 0 ? -errno : (int)fd;
}

static int is_ptmx_node(const struct stat *st) {
        return S_ISCHR(st->st_mode) && major(st->st_rdev) == PTMX_MAJOR &&
               minor(st->st_rdev) == PTMX_MINOR;
}

/* The devpts instance of the daemon's own /dev/pts (the host's, in root mode), which a
 * sandbox must never hand us: its ptys are the host's. 0 when there is none. */
static dev_t own_devpts(void) {
        struct stat st;

        return stat("/dev/pts/ptmx", &st) == 0 && is_ptmx_node(&st) ? st.st_dev : 0;
}

/* 0 when pfd is the ptmx node of a devpts that is not the daemon's, -ENOTTY when not. */
static int check_ptmx(int pfd) {
        struct statfs sfs;
        struct stat st;

        if (fstatfs(pfd, &sfs) < 0 || fstat(pfd, &st) < 0)
                return -errno;
        if (sfs.f_type != DEVPTS_SUPER_MAGIC || !is_ptmx_node(&st) || st.st_dev == own_devpts())
                return -ENOTTY;
        return 0;
}

int devpts_check_master(int fd) {
        struct stat st;
        unsigned n;

        if (fstat(fd, &st) < 0)
                return -errno;
        /* A master is an open ptmx; a slave (136+:N) answers TIOCGPTN too on some kernels. */
        if (!is_ptmx_node(&st) || ioctl(fd, TIOCGPTN, &n) < 0)
                return -ENOTTY;
        return 0;
}

/* Opens the checked ptmx node pfd: a new master. fd or -errno. */
static int open_master(int pfd) {
        char p[64];
        int fd, r;

        snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
        fd = open(p, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = devpts_check_master(fd);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int devpts_resize(int master, unsigned rows, unsigned cols) {
        struct winsize ws;

        if (rows == 0 || cols == 0 || rows > DEVPTS_MAX_DIM || cols > DEVPTS_MAX_DIM)
                return -EINVAL;
        memset(&ws, 0, sizeof(ws));
        ws.ws_row = (unsigned short)rows;
        ws.ws_col = (unsigned short)cols;
        return ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

unsigned char devpts_eof_char(int master) {
        struct termios t;

        /* A master's termios are its slave's (drivers/tty/pty.c shares them). */
        if (tcgetattr(master, &t) < 0 || t.c_cc[VEOF] == _POSIX_VDISABLE)
                return 4;
        return t.c_cc[VEOF];
}

/* Unlocks and sizes master, then opens its slave. fd or -errno. */
static int open_slave(int master, unsigned rows, unsigned cols) {
        int unlock = 0, r, fd;

        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return -errno;
        r = devpts_resize(master, rows, cols);
        if (r < 0)
                return r;
        fd = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == EINVAL ? -ENOSYS : -errno;
        return fd;
}

int devpts_open(int root_fd, unsigned rows, unsigned cols, int *ret_master, int *ret_slave) {
        int pfd, master, slave, r;

        pfd = find_ptmx(root_fd);
        if (pfd < 0)
                return pfd == -ELOOP ? -ENOTTY : pfd;
        r = check_ptmx(pfd);
        master = r < 0 ? r : open_master(pfd);
        close(pfd);
        if (master < 0)
                return master;
        slave = open_slave(master, rows, cols);
        if (slave < 0) {
                close(master);
                return slave;
        }
        *ret_master = master;
        *ret_slave = slave;
        return 0;
}

/* The max= among a devpts's options ("rw,mode=620,ptmxmode=666,max=16"). */
static int max_option(const char *opts) {
        const char *p = strstr(opts, ",max=");
        long v;

        if (!p && strncmp(opts, "max=", 4) == 0)
                p = opts - 1;
        if (!p)
                return DEVPTS_NO_MAX;
        v = strtol(p + 5, NULL, 10);
        return v >= 0 && v < DEVPTS_NO_MAX ? (int)v : DEVPTS_NO_MAX;
}

int devpts_max_of(pid_t pid) {
        char path[64], *line = NULL;
        size_t cap = 0;
        int max = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                struct mountinfo_line m;
                if (mountinfo_parse(line, &m) < 0 || strcmp(m.point, "/dev/pts") != 0)
                        continue;
                /* A later mount there covers the earlier ones. */
                max = strcmp(m.fstype, "devpts") == 0 ? max_option(m.super_options) : 0;
        }
        free(line);
        fclose(f);
        return max;
}
