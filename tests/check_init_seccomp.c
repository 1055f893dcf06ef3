/* check_init_seccomp.c: the default seccomp filter of sandboxed commands (filter.c).
 *
 * Each probe runs in a forked child that loads the filter exactly as PID 1 does before
 * it serves (no_new_privs, then filter_load; every command inherits it from there) and
 * then tries one thing. Every denied call is
 * chosen so that it would fail differently, or succeed harmlessly, without the filter
 * (the tests run as root): a mount on a missing path gives ENOENT, not EPERM. The
 * setuid and setgid probes work in a temporary directory (the "setid" fixture) and make
 * their calls through syscall(2), so that glibc cannot rewrite them (chmod into fchmodat,
 * open into openat, a dropped mode argument). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/bpf.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init/filter.h"
#include "testutil.h"

/* Loads the filter in the calling (child) process; exits 90+ on failure. */
static void load_filter(void) {
        struct sock_fprog prog = {0, NULL};

        if (filter_build(&prog, false) < 0)
                _exit(90);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(91);
        if (filter_load(&prog) < 0)
                _exit(92);
        filter_free(&prog);
}

/* Runs fn in a forked child under the filter and returns the child's wait status. */
static int run_filtered(int (*fn)(void)) {
        int status;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                load_filter();
                _exit(fn());
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return status;
}

/* In a probe: the call must fail with errno e, else report and return 1. */
#define EXPECT_ERRNO(call, e)                                                                      \
        do {                                                                                       \
                long r_;                                                                           \
                errno = 0;                                                                         \
                r_ = (long)(call);                                                                 \
                if (r_ != -1 || errno != (e)) {                                                    \
                        fprintf(stderr, "%s: returned %ld errno %d (%s), expected %s\n", #call,    \
                                r_, errno, strerror(errno), #e);                                   \
                        return 1;                                                                  \
                }                                                                                  \
        } while (0)

#define EXPECT_OK(call)                                                                            \
        do {                                                                                       \
                long r_;                                                                           \
                errno = 0;                                                                         \
                r_ = (long)(call);                                                                 \
                if (r_ < 0) {                                                                      \
                        fprintf(stderr, "%s: failed: %s\n", #call, strerror(errno));               \
                        return 1;                                                                  \
                }                                                                                  \
        } while (0)

#define ASSERT_PROBE_OK(fn)                                                                        \
        do {                                                                                       \
                int st_ = run_filtered(fn);                                                        \
                ck_assert_msg(WIFEXITED(st_) && WEXITSTATUS(st_) == 0,                             \
                              #fn " failed: wait status 0x%x", st_);                               \
        } while (0)

START_TEST(test_build) {
        struct sock_fprog prog = {0, NULL};

        ck_assert_int_eq(filter_build(&prog, false), 0);
        ck_assert_ptr_nonnull(prog.filter);
        ck_assert_uint_gt(prog.len, 10);
        ck_assert_uint_le(prog.len, BPF_MAXINSNS);
        ck_assert_int_eq(filter_supported(), 0);
        filter_free(&prog);
        ck_assert_ptr_null(prog.filter);
        filter_free(&prog);
}
END_TEST

static int probe_eperm_process(void) {
        char buf[8];
        struct iovec local = {buf, sizeof(buf)}, remote = {buf, sizeof(buf)};

        EXPECT_ERRNO(ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
        EXPECT_ERRNO(syscall(SYS_process_vm_readv, getppid(), &local, 1, &remote, 1, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_process_vm_writev, getppid(), &local, 1, &remote, 1, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_userfaultfd, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_bpf, BPF_PROG_LOAD, NULL, 0), EPERM);
        return 0;
}

static int probe_eperm_kernel(void) {
        struct timespec ts = {0, 0};

        EXPECT_ERRNO(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_add_key, "user", "sbx", "x", 1, -3), EPERM);
        EXPECT_ERRNO(syscall(SYS_request_key, "user", "sbx", NULL, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_init_module, NULL, 0, ""), EPERM);
        EXPECT_ERRNO(syscall(SYS_finit_module, -1, "", 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_delete_module, "sbx_no_such_module", 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0), EPERM);
        /* Bad magic numbers: without the filter this is EINVAL, never a reboot. */
        EXPECT_ERRNO(syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
        EXPECT_ERRNO(syscall(SYS_swapon, "/sbx-no-such-file", 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_swapoff, "/sbx-no-such-file"), EPERM);
        EXPECT_ERRNO(clock_settime(CLOCK_MONOTONIC, &ts), EPERM);
        EXPECT_ERRNO(syscall(SYS_settimeofday, NULL, NULL), EPERM);
        EXPECT_ERRNO(syscall(SYS_adjtimex, NULL), EPERM);
        EXPECT_ERRNO(syscall(SYS_clock_adjtime, CLOCK_MONOTONIC, NULL), EPERM);
        return 0;
}

static int probe_eperm_mounts_and_namespaces(void) {
        EXPECT_ERRNO(mount("none", "/sbx-no-such-dir", "tmpfs", 0, NULL), EPERM);
        EXPECT_ERRNO(umount2("/sbx-no-such-dir", 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_pivot_root, "/sbx-no-such-dir", "/sbx-no-such-dir"), EPERM);
        EXPECT_ERRNO(chroot("/sbx-no-such-dir"), EPERM);
        EXPECT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
        EXPECT_ERRNO(unshare(CLONE_NEWNS), EPERM);
        EXPECT_ERRNO(setns(-1, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
        return 0;
}

static int probe_clone_namespaces(void) {
        static const unsigned long flags[] = {CLONE_NEWNS,    CLONE_NEWUSER, CLONE_NEWPID,
                                              CLONE_NEWNET,   CLONE_NEWUTS,  CLONE_NEWIPC,
                                              CLONE_NEWCGROUP};
        size_t i;

        for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
                long r;
                errno = 0;
                r = syscall(SYS_clone, flags[i] | SIGCHLD, NULL, NULL, NULL, NULL);
                if (r == 0)
                        _exit(0); /* The filter let it through: we are the new child. */
                if (r != -1 || errno != EPERM) {
                        fprintf(stderr, "clone(0x%lx): %ld errno %d\n", flags[i], r, errno);
                        return 1;
                }
        }
        return 0;
}

static int probe_sockets_and_ioctls(void) {
        char c = 'x';

        EXPECT_ERRNO(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
        EXPECT_ERRNO(socket(AF_BLUETOOTH, SOCK_STREAM, 0), EPERM);
        EXPECT_ERRNO(socket(AF_VSOCK, SOCK_STREAM, 0), EPERM);
        EXPECT_ERRNO(socket(AF_UNSPEC, SOCK_STREAM, 0), EPERM);
        EXPECT_ERRNO(syscall(SYS_socket, 200, SOCK_STREAM, 0), EPERM);
        /* Upper garbage bits that the kernel would drop must not get a family through. */
        EXPECT_ERRNO(syscall(SYS_socket, (1UL << 32) | AF_PACKET, SOCK_RAW, 0), EPERM);
        EXPECT_ERRNO(ioctl(0, TIOCSTI, &c), EPERM);
        EXPECT_ERRNO(ioctl(0, TIOCLINUX, &c), EPERM);
        EXPECT_ERRNO(syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c), EPERM);
        /* chattr and the project id: out of the workspace's project quota (disk.h).
         * <linux/fs.h> clashes with <sys/mount.h>: FS_IOC_SETFLAGS, its 32-bit form and
         * FS_IOC_FSSETXATTR by value. */
        EXPECT_ERRNO(ioctl(0, _IOW('f', 2, long), &c), EPERM);
        EXPECT_ERRNO(ioctl(0, _IOW('f', 2, int), &c), EPERM);
        EXPECT_ERRNO(ioctl(0, 0x401c5820ul, &c), EPERM);
        return 0;
}

/* Every family below 70: the four allowed ones are not refused by the filter (the
 * kernel may still say EAFNOSUPPORT or EINVAL), every other one is EPERM. */
static int probe_all_families(void) {
        int family;

        for (family = 0; family < 70; family++) {
                int allowed = family == AF_UNIX || family == AF_INET || family == AF_INET6 ||
                              family == AF_NETLINK;
                int fd, type = family == AF_NETLINK ? SOCK_RAW : SOCK_DGRAM;

                errno = 0;
                fd = socket(family, type, 0);
                if (fd >= 0)
                        close(fd);
                if (allowed ? (fd < 0 && errno == EPERM) : (fd >= 0 || errno != EPERM)) {
                        fprintf(stderr, "socket(%d): fd %d errno %d\n", family, fd, errno);
                        return 1;
                }
        }
        return 0;
}

static int probe_enosys(void) {
        EXPECT_ERRNO(syscall(SYS_clone3, NULL, 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_io_uring_setup, 1, NULL), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_io_uring_register, -1, 0, NULL, 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fsopen, "tmpfs", 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fsmount, -1, 0, 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fspick, -1, "", 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_move_mount, -1, "", -1, "", 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_open_tree, -1, "", 0), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_mount_setattr, -1, "", 0, NULL, 0), ENOSYS);
        return 0;
}

static void *thread_main(void *arg) {
        *(int *)arg = 42;
        return arg;
}

static int probe_allowed(void) {
        pthread_t th;
        void *ret = NULL;
        int v = 0, status, fd;
        pid_t pid;

        /* fork + exec. */
        pid = fork();
        if (pid == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(126);
        }
        EXPECT_OK(pid);
        EXPECT_OK(waitpid(pid, &status, 0));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "/bin/true: status 0x%x\n", status);
                return 1;
        }
        /* Threads: glibc tries clone3, gets ENOSYS, falls back to clone. */
        if (pthread_create(&th, NULL, thread_main, &v) != 0 || pthread_join(th, &ret) != 0 ||
            v != 42 || ret != &v) {
                fprintf(stderr, "pthread_create/join failed\n");
                return 1;
        }
        /* The allowed socket families. */
        EXPECT_OK(fd = socket(AF_INET, SOCK_STREAM, 0));
        close(fd);
        EXPECT_OK(fd = socket(AF_UNIX, SOCK_STREAM, 0));
        close(fd);
        EXPECT_OK(fd = socket(AF_NETLINK, SOCK_RAW, 0));
        close(fd);
        errno = 0;
        fd = socket(AF_INET6, SOCK_DGRAM, 0);
        if (fd < 0 && errno != EAFNOSUPPORT) {
                fprintf(stderr, "socket(AF_INET6): %s\n", strerror(errno));
                return 1;
        }
        if (fd >= 0)
                close(fd);
        /* Other ioctls pass (ENOTTY on a non-terminal is the kernel's answer). */
        fd = open("/dev/null", O_RDONLY);
        EXPECT_OK(fd);
        EXPECT_ERRNO(ioctl(fd, TIOCGWINSZ, NULL), ENOTTY);
        close(fd);
        return 0;
}

START_TEST(test_eperm) {
        ASSERT_PROBE_OK(probe_eperm_process);
        ASSERT_PROBE_OK(probe_eperm_kernel);
        ASSERT_PROBE_OK(probe_eperm_mounts_and_namespaces);
        ASSERT_PROBE_OK(probe_clone_namespaces);
        ASSERT_PROBE_OK(probe_sockets_and_ioctls);
        ASSERT_PROBE_OK(probe_all_families);
}
END_TEST

START_TEST(test_enosys) {
        ASSERT_PROBE_OK(probe_enosys);
}
END_TEST

START_TEST(test_allowed) {
        ASSERT_PROBE_OK(probe_allowed);
}
END_TEST

/* ---- setuid and setgid modes ---------------------------------------------------------- */

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6; older kernel headers (Debian 12's) lack it. */
#endif
#ifndef SYS_openat2
#define SYS_openat2 437 /* Linux 5.6. */
#endif

#define SETID_BITS (S_ISUID | S_ISGID)

/* Each setid test works in its own directory under one root. A failing test never runs
 * its checked teardown (the forked test process exits at the failed assertion), so the
 * root is an unchecked fixture: the runner removes it, setuid files and all, after the
 * test case whatever the outcome. */
static char setid_root[64];
static char setid_dir[96];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void setid_root_setup(void) {
        snprintf(setid_root, sizeof(setid_root), "/tmp/check_init_seccomp.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(setid_root));
}

static void setid_root_teardown(void) {
        if (chdir("/") == 0 && setid_root[0])
                nftw(setid_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        setid_root[0] = '\0';
}

static void setid_setup(void) {
        snprintf(setid_dir, sizeof(setid_dir), "%s/test.XXXXXX", setid_root);
        ck_assert_ptr_nonnull(mkdtemp(setid_dir));
        ck_assert_int_eq(chdir(setid_dir), 0);
}

/* Creates a file or a directory in the working directory with exactly mode, whatever
 * the umask; unfiltered, so the setup never depends on the filter under test. */
static void make_file(const char *name, mode_t mode) {
        int fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void make_dir(const char *name, mode_t mode) {
        ck_assert_int_eq(mkdir(name, 0700), 0);
        ck_assert_int_eq(chmod(name, mode), 0);
}

/* Asserts that name either does not exist or carries neither S_ISUID nor S_ISGID. */
static void assert_no_setid(const char *name) {
        struct stat st;

        if (lstat(name, &st) < 0) {
                ck_assert_int_eq(errno, ENOENT);
                return;
        }
        ck_assert_msg((st.st_mode & SETID_BITS) == 0, "%s has mode 0%o", name,
                      (unsigned)(st.st_mode & 07777));
}

static void assert_mode(const char *name, mode_t type, mode_t mode) {
        struct stat st;

        ck_assert_int_eq(lstat(name, &st), 0);
        ck_assert_msg((st.st_mode & S_IFMT) == type && (st.st_mode & 07777) == mode,
                      "%s has mode 0%o, expected 0%o", name, (unsigned)st.st_mode,
                      (unsigned)(type | mode));
}

/* The mode arguments below are unsigned long, as wide as the register the kernel
 * reads: an int passed to syscall()'s varargs would leave its upper half undefined. */

#ifdef SYS_chmod
static int probe_chmod_setid(void) {
        EXPECT_ERRNO(syscall(SYS_chmod, "f", 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_chmod, "f", 02755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_chmod, "f", 06777UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_chmod, "f", (unsigned long)S_ISGID), EPERM);
        /* The filter cannot tell a directory from a file. */
        EXPECT_ERRNO(syscall(SYS_chmod, "d", 02775UL), EPERM);
        return 0;
}

START_TEST(test_chmod_setid) {
        make_file("f", 0755);
        make_dir("d", 0775);
        ASSERT_PROBE_OK(probe_chmod_setid);
        assert_no_setid("f");
        assert_no_setid("d");
}
END_TEST
#endif

static int probe_fchmod_setid(void) {
        int fd = open("f", O_RDONLY | O_CLOEXEC);

        EXPECT_OK(fd);
        EXPECT_ERRNO(syscall(SYS_fchmod, fd, 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_fchmod, fd, 02755UL), EPERM);
        close(fd);
        return 0;
}

START_TEST(test_fchmod_setid) {
        make_file("f", 0755);
        ASSERT_PROBE_OK(probe_fchmod_setid);
        assert_no_setid("f");
}
END_TEST

static int probe_fchmodat_setid(void) {
        EXPECT_ERRNO(syscall(SYS_fchmodat, AT_FDCWD, "f", 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_fchmodat, AT_FDCWD, "f", 02755UL), EPERM);
        return 0;
}

START_TEST(test_fchmodat_setid) {
        make_file("f", 0755);
        ASSERT_PROBE_OK(probe_fchmodat_setid);
        assert_no_setid("f");
}
END_TEST

/* fchmodat2 fails outright, whatever the mode: glibc then falls back to fchmodat. */
static int probe_fchmodat2_enosys(void) {
        EXPECT_ERRNO(syscall(SYS_fchmodat2, AT_FDCWD, "f", 04755UL, 0UL), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fchmodat2, AT_FDCWD, "f", 02755UL, 0UL), ENOSYS);
        EXPECT_ERRNO(syscall(SYS_fchmodat2, AT_FDCWD, "f", 0644UL, 0UL), ENOSYS);
        return 0;
}

START_TEST(test_fchmodat2_enosys) {
        make_file("f", 0755);
        ASSERT_PROBE_OK(probe_fchmodat2_enosys);
        assert_no_setid("f");
        assert_mode("f", S_IFREG, 0755);
}
END_TEST

/* The kernel reads only the low bits of a mode (umode_t): upper garbage in the 64-bit
 * register must not get a setuid mode through. */
static int probe_chmod_upper_bits(void) {
        EXPECT_ERRNO(syscall(SYS_fchmodat, AT_FDCWD, "f", (1UL << 32) | 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_fchmodat, AT_FDCWD, "f", (~0UL << 32) | 02755UL), EPERM);
#ifdef SYS_chmod
        EXPECT_ERRNO(syscall(SYS_chmod, "f", (1UL << 32) | 04755UL), EPERM);
#endif
        /* Nor refuse an ordinary mode that carries them. */
        EXPECT_OK(syscall(SYS_fchmodat, AT_FDCWD, "f", (1UL << 32) | 0700UL));
        return 0;
}

START_TEST(test_chmod_upper_bits) {
        make_file("f", 0755);
        ASSERT_PROBE_OK(probe_chmod_upper_bits);
        assert_no_setid("f");
        assert_mode("f", S_IFREG, 0700);
}
END_TEST

#ifdef SYS_open
static int probe_open_setid(void) {
        EXPECT_ERRNO(syscall(SYS_open, "o-suid", O_CREAT | O_WRONLY | O_CLOEXEC, 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_open, "o-sgid", O_CREAT | O_EXCL | O_RDWR, 02755UL), EPERM);
        return 0;
}

START_TEST(test_open_setid) {
        ASSERT_PROBE_OK(probe_open_setid);
        assert_no_setid("o-suid");
        assert_no_setid("o-sgid");
}
END_TEST
#endif

static int probe_openat_setid(void) {
        EXPECT_ERRNO(
                syscall(SYS_openat, AT_FDCWD, "o-suid", O_CREAT | O_WRONLY | O_CLOEXEC, 04755UL),
                EPERM);
        EXPECT_ERRNO(syscall(SYS_openat, AT_FDCWD, "o-sgid", O_CREAT | O_EXCL | O_RDWR, 02755UL),
                     EPERM);
        /* Upper garbage in flags and mode: the kernel sees O_CREAT and 04755. */
        EXPECT_ERRNO(syscall(SYS_openat, AT_FDCWD, "o-wide", (1UL << 32) | O_CREAT | O_WRONLY,
                             (0xdeadUL << 32) | 04755UL),
                     EPERM);
        return 0;
}

START_TEST(test_openat_setid) {
        ASSERT_PROBE_OK(probe_openat_setid);
        assert_no_setid("o-suid");
        assert_no_setid("o-sgid");
        assert_no_setid("o-wide");
}
END_TEST

#ifdef SYS_creat
static int probe_creat_setid(void) {
        EXPECT_ERRNO(syscall(SYS_creat, "c-suid", 04755UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_creat, "c-sgid", 02755UL), EPERM);
        return 0;
}

START_TEST(test_creat_setid) {
        ASSERT_PROBE_OK(probe_creat_setid);
        assert_no_setid("c-suid");
        assert_no_setid("c-sgid");
}
END_TEST
#endif

/* An O_TMPFILE file has no name until linkat(2) gives it one: on success the probe
 * reports the mode it got, and fails. */
static int expect_tmpfile_refused(long fd) {
        struct stat st;

        if (fd >= 0) {
                if (fstat((int)fd, &st) == 0)
                        fprintf(stderr, "O_TMPFILE: got a file of mode 0%o\n",
                                (unsigned)(st.st_mode & 07777));
                close((int)fd);
                return 1;
        }
        if (errno != EPERM) {
                fprintf(stderr, "O_TMPFILE: errno %d (%s), expected EPERM\n", errno,
                        strerror(errno));
                return 1;
        }
        return 0;
}

static int probe_tmpfile_setid(void) {
        errno = 0;
        if (expect_tmpfile_refused(
                    syscall(SYS_openat, AT_FDCWD, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 04755UL)))
                return 1;
        errno = 0;
        if (expect_tmpfile_refused(
                    syscall(SYS_openat, AT_FDCWD, ".", O_TMPFILE | O_WRONLY, 02755UL)))
                return 1;
#ifdef SYS_open
        errno = 0;
        if (expect_tmpfile_refused(syscall(SYS_open, ".", O_TMPFILE | O_RDWR, 04755UL)))
                return 1;
#endif
        return 0;
}

START_TEST(test_tmpfile_setid) {
        ASSERT_PROBE_OK(probe_tmpfile_setid);
}
END_TEST

/* openat2 fails outright: its mode is in memory, out of the filter's reach. */
static int probe_openat2_enosys(void) {
        struct open_how how;

        memset(&how, 0, sizeof(how));
        how.flags = O_CREAT | O_WRONLY | O_CLOEXEC;
        how.mode = 04755;
        EXPECT_ERRNO(syscall(SYS_openat2, AT_FDCWD, "o2-suid", &how, sizeof(how)), ENOSYS);
        memset(&how, 0, sizeof(how));
        how.flags = O_RDONLY | O_CLOEXEC;
        EXPECT_ERRNO(syscall(SYS_openat2, AT_FDCWD, "f", &how, sizeof(how)), ENOSYS);
        return 0;
}

START_TEST(test_openat2_enosys) {
        make_file("f", 0644);
        ASSERT_PROBE_OK(probe_openat2_enosys);
        assert_no_setid("o2-suid");
}
END_TEST

#ifdef SYS_mknod
static int probe_mknod_setid(void) {
        EXPECT_ERRNO(syscall(SYS_mknod, "n-suid", S_IFREG | 04755UL, 0UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_mknod, "n-sgid", S_IFREG | 02755UL, 0UL), EPERM);
        return 0;
}

START_TEST(test_mknod_setid) {
        ASSERT_PROBE_OK(probe_mknod_setid);
        assert_no_setid("n-suid");
        assert_no_setid("n-sgid");
}
END_TEST
#endif

static int probe_mknodat_setid(void) {
        EXPECT_ERRNO(syscall(SYS_mknodat, AT_FDCWD, "n-suid", S_IFREG | 04755UL, 0UL), EPERM);
        EXPECT_ERRNO(syscall(SYS_mknodat, AT_FDCWD, "n-sgid", S_IFREG | 02755UL, 0UL), EPERM);
        return 0;
}

START_TEST(test_mknodat_setid) {
        ASSERT_PROBE_OK(probe_mknodat_setid);
        assert_no_setid("n-suid");
        assert_no_setid("n-sgid");
}
END_TEST

/* What must keep working: other modes, sticky bits, opening without O_CREAT whatever
 * the (unused) mode register holds, and mkdir with a setgid mode. */
static int probe_setid_allowed(void) {
        long fd;

        EXPECT_OK(syscall(SYS_fchmodat, AT_FDCWD, "f", 0755UL));
        EXPECT_OK(syscall(SYS_fchmodat, AT_FDCWD, "sticky", 01777UL));
        EXPECT_OK(syscall(SYS_fchmodat, AT_FDCWD, "d", 01777UL));
        EXPECT_OK(fd = syscall(SYS_openat, AT_FDCWD, "new", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
                               0644UL));
        EXPECT_OK(syscall(SYS_fchmod, (int)fd, 0640UL));
        close((int)fd);
        /* Without O_CREAT or O_TMPFILE the mode is not used: garbage with S_ISUID set. */
        EXPECT_OK(fd = syscall(SYS_openat, AT_FDCWD, "f", O_RDONLY | O_CLOEXEC, ~0UL));
        close((int)fd);
        /* O_DIRECTORY is part of O_TMPFILE's value, but alone creates nothing. */
        EXPECT_OK(fd = syscall(SYS_openat, AT_FDCWD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                               06777UL));
        close((int)fd);
        EXPECT_OK(syscall(SYS_mkdirat, AT_FDCWD, "sgid-dir", 02775UL));
        EXPECT_OK(syscall(SYS_mknodat, AT_FDCWD, "node", S_IFREG | 0644UL, 0UL));
#ifdef SYS_chmod
        EXPECT_OK(syscall(SYS_chmod, "f", 0750UL));
#endif
#ifdef SYS_open
        EXPECT_OK(fd = syscall(SYS_open, "f", O_RDONLY | O_CLOEXEC, 04755UL | (1UL << 40)));
        close((int)fd);
#endif
#ifdef SYS_mkdir
        EXPECT_OK(syscall(SYS_mkdir, "sgid-dir2", 02775UL));
#endif
        return 0;
}

START_TEST(test_setid_allowed) {
        make_file("f", 0600);
        make_file("sticky", 0600);
        make_dir("d", 0755);
        ASSERT_PROBE_OK(probe_setid_allowed);
#ifdef SYS_chmod
        assert_mode("f", S_IFREG, 0750);
#else
        assert_mode("f", S_IFREG, 0755);
#endif
        assert_mode("sticky", S_IFREG, 01777);
        assert_mode("d", S_IFDIR, 01777);
        assert_mode("new", S_IFREG, 0640);
        assert_no_setid("node");
        assert_no_setid("sgid-dir");
}
END_TEST

#if defined(__x86_64__)
static int probe_i386(void) {
        long ret;

        /* getpid through the i386 entry point (20 is __NR_getpid there). */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
        return 3; /* Still alive: the filter let a non-native syscall through. */
}

static int probe_x32(void) {
        /* 0x40000000 is __X32_SYSCALL_BIT, 39 is getpid. */
        syscall(0x40000000L | 39);
        return 3;
}

START_TEST(test_foreign_arch_killed) {
        int st = run_filtered(probe_i386);

        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "i386 syscall: status 0x%x", st);
        st = run_filtered(probe_x32);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "x32 syscall: status 0x%x", st);
}
END_TEST
#endif

/* Valgrind implements neither seccomp(2) nor the i386 entry point on amd64: under it
 * the filter can be neither built nor loaded, and there is nothing here to check. */
static int under_valgrind(void) {
        const char *preload = getenv("LD_PRELOAD");

        return preload && strstr(preload, "vgpreload") != NULL;
}

static Suite *make_suite(void) {
        Suite *s = suite_create("init_seccomp");
        TCase *tc;

        if (under_valgrind()) {
                fprintf(stderr, "check_init_seccomp: skipped under valgrind (no seccomp)\n");
                return s;
        }
        tc = tcase_create("filter");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_build);
        tcase_add_test(tc, test_eperm);
        tcase_add_test(tc, test_enosys);
        tcase_add_test(tc, test_allowed);
#if defined(__x86_64__)
        tcase_add_test(tc, test_foreign_arch_killed);
#endif
        suite_add_tcase(s, tc);

        tc = tcase_create("setid");
        tcase_set_timeout(tc, 30);
        tcase_add_unchecked_fixture(tc, setid_root_setup, setid_root_teardown);
        tcase_add_checked_fixture(tc, setid_setup, NULL);
#ifdef SYS_chmod
        tcase_add_test(tc, test_chmod_setid);
#endif
        tcase_add_test(tc, test_fchmod_setid);
        tcase_add_test(tc, test_fchmodat_setid);
        tcase_add_test(tc, test_fchmodat2_enosys);
        tcase_add_test(tc, test_chmod_upper_bits);
#ifdef SYS_open
        tcase_add_test(tc, test_open_setid);
#endif
        tcase_add_test(tc, test_openat_setid);
#ifdef SYS_creat
        tcase_add_test(tc, test_creat_setid);
#endif
        tcase_add_test(tc, test_tmpfile_setid);
        tcase_add_test(tc, test_openat2_enosys);
#ifdef SYS_mknod
        tcase_add_test(tc, test_mknod_setid);
#endif
        tcase_add_test(tc, test_mknodat_setid);
        tcase_add_test(tc, test_setid_allowed);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
