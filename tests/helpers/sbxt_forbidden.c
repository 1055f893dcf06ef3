/* sbxt_forbidden.c: tries, inside a sandbox, each call the default seccomp filter and
 * the dropped capabilities must refuse, and a few that must keep working, and prints
 * one line per attempt: "name=ok" when the call succeeded, else "name=ERRNO" (the errno
 * name, e.g. EPERM). Arguments are chosen so that, without the filter, each call would
 * fail differently (EINVAL, EFAULT, ENOTTY, ...) or succeed, so the errno tells whether
 * the filter answered. Used by tests/it_isolation.c. Always exits 0 once it has
 * printed every line.
 *
 * It refuses to run (exit 2) unless no_new_privs is set: run as root on the host, the
 * calls that succeed would mount over /tmp and leave the process traced. Every sandbox
 * command runs with no_new_privs. */
#define _GNU_SOURCE /* the helpers are built without the project's CPPFLAGS */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif

static const char *errno_name(int e) {
        const char *n = strerrorname_np(e);
        return n ? n : "E?";
}

static void report(const char *name, long ret) {
        if (ret >= 0)
                printf("%s=ok\n", name);
        else
                printf("%s=%s\n", name, errno_name(errno));
        fflush(stdout);
}

/* Reports a raw syscall; a successful clone-like call (child side, ret 0) exits. */
#define TRY(name, expr)                                                                            \
        do {                                                                                       \
                long r_;                                                                           \
                errno = 0;                                                                         \
                r_ = (long)(expr);                                                                 \
                report(name, r_);                                                                  \
        } while (0)

static void try_clone_newuser(void) {
        long r;

        errno = 0;
        r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        report("clone_newuser", r);
}

static void try_fork(void) {
        pid_t p = fork();

        if (p == 0)
                _exit(0);
        if (p > 0)
                waitpid(p, NULL, 0);
        report("fork", p);
}

/* 1 when /proc/self/status says NoNewPrivs: 1. */
static int under_no_new_privs(void) {
        char line[256];
        int yes = 0;
        FILE *f = fopen("/proc/self/status", "re");

        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "NoNewPrivs:", 11) == 0)
                        yes = strtol(line + 11, NULL, 10) == 1;
        if (f)
                fclose(f);
        return yes;
}

int main(void) {
        char buf[16] = {0};
        struct iovec local = {buf, sizeof(buf)}, remote = {buf, sizeof(buf)};
        struct timespec now;
        int fd, nsfd;

        if (!under_no_new_privs()) {
                fprintf(stderr, "sbxt_forbidden: refusing to run without no_new_privs "
                                "(run it inside a sandbox)\n");
                return 2;
        }

        /* Denied with EPERM. */
        TRY("ptrace", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
        TRY("keyctl", syscall(SYS_keyctl, 0L /* KEYCTL_GET_KEYRING_ID */, -3L, 0L));
        TRY("add_key", syscall(SYS_add_key, "user", "sbxt", "x", 1L, -2L));
        TRY("request_key", syscall(SYS_request_key, "user", "sbxt", NULL, 0L));
        TRY("init_module", syscall(SYS_init_module, buf, 0L, ""));
        TRY("finit_module", syscall(SYS_finit_module, -1L, "", 0L));
        TRY("delete_module", syscall(SYS_delete_module, "sbxt_nonexistent", 0L));
        TRY("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
        TRY("umount2", umount2("/tmp", MNT_DETACH));
        TRY("chroot", chroot("/"));
        TRY("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
        TRY("unshare_user", unshare(CLONE_NEWUSER));
        TRY("unshare_mount", unshare(CLONE_NEWNS));
        nsfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        TRY("setns", setns(nsfd, 0));
        if (nsfd >= 0)
                close(nsfd);
        try_clone_newuser();
        TRY("bpf", syscall(SYS_bpf, 5L /* BPF_PROG_LOAD */, NULL, 0L));
        TRY("perf_event_open", syscall(SYS_perf_event_open, NULL, 0L, -1L, -1L, 0L));
        TRY("userfaultfd", syscall(SYS_userfaultfd, 0L));
        TRY("process_vm_readv",
            syscall(SYS_process_vm_readv, (long)getppid(), &local, 1L, &remote, 1L, 0L));
        TRY("kexec_load", syscall(SYS_kexec_load, 0L, 0L, NULL, 0L));
        TRY("reboot", syscall(SYS_reboot, 0L, 0L, 0L, NULL));
        clock_gettime(CLOCK_REALTIME, &now);
        TRY("clock_settime", clock_settime(CLOCK_REALTIME, &now));
        TRY("swapon", syscall(SYS_swapon, "/nonexistent-sbxt", 0L));
        TRY("open_by_handle_at", syscall(SYS_open_by_handle_at, -100L, NULL, 0L));
        TRY("socket_alg", socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        TRY("socket_packet", socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
        TRY("ioctl_tiocsti", ioctl(0, TIOCSTI, "x"));

        /* ENOSYS so that libc falls back. */
        TRY("clone3", syscall(SYS_clone3, NULL, 0L));
        TRY("io_uring_setup", syscall(SYS_io_uring_setup, 1L, NULL));
        TRY("open_tree", syscall(SYS_open_tree, -100L, "/", 0L));
        TRY("fsopen", syscall(SYS_fsopen, "tmpfs", 0L));

        /* Must keep working. */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        report("socket_inet", fd);
        if (fd >= 0)
                close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        report("socket_unix", fd);
        if (fd >= 0)
                close(fd);
        try_fork();
        printf("done\n");
        return 0;
}
