/* filter.c: the default seccomp filter, built with libseccomp and exported as BPF.
 *
 * Policy (docs/sandboxes.md, "What a sandbox is"): everything is allowed except what lets
 * a process reach the kernel's more dangerous or namespace-changing interfaces, and any
 * mode with S_ISUID or S_ISGID given to chmod, to open with O_CREAT or O_TMPFILE, or to
 * mknod (a setuid file left in a writable path runs as the sandbox's uid for whoever on
 * the host executes it); these fail with EPERM. clone3, openat2, fchmodat2, file_setattr,
 * io_uring and the new mount API fail with ENOSYS so that libc and runtimes fall back to
 * calls the filter can inspect (clone3 and openat2 take their flags and mode in memory,
 * out of a filter's reach). Syscalls of a non-native architecture (i386 through int 0x80,
 * x32) kill the process. Owns nothing once filter_build returns: the program belongs to
 * the caller (PID 1, see main.c), which loads it on itself once before it serves; every
 * command inherits it. Compare nsjail's seccomp policy, bubblewrap's --seccomp and Nix's
 * build sandbox. */
#include "filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The tables are laid out by group, one line each: not reflowed by clang-format. */
/* clang-format off */

/* Denied with EPERM whatever their arguments. */
static const char *const eperm_syscalls[] = {
        "keyctl", "add_key", "request_key",                      /* kernel keyring */
        "ptrace", "process_vm_readv", "process_vm_writev",        /* other processes */
        "kexec_load", "kexec_file_load", "reboot",                /* the machine */
        "init_module", "finit_module", "delete_module",           /* kernel modules */
        "bpf", "perf_event_open", "userfaultfd",                  /* kernel attack surface */
        "mount", "umount", "umount2", "pivot_root", "chroot",     /* the view */
        "unshare", "setns",                                       /* namespaces */
        "open_by_handle_at",                                      /* escapes a bind mount */
        "swapon", "swapoff",                                      /* the machine */
        "settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex", /* clock */
        NULL,
};

/* Fail with ENOSYS, as on a kernel that predates them, so callers fall back. */
static const char *const enosys_syscalls[] = {
        "clone3",
        "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
        "open_tree_attr",
        "io_uring_setup", "io_uring_enter", "io_uring_register",
        "openat2",   /* mode in memory: openat carries it in a register */
        "fchmodat2", /* fchmodat plus flags: glibc falls back to fchmodat */
        "file_setattr", /* chattr's FS_IOC_FSSETXATTR by path: tools fall back to the ioctl */
        NULL,
};

/* Any of these in clone(2)'s flags means a new namespace. */
static const uint64_t clone_ns_flags[] = {
        CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
        CLONE_NEWCGROUP,
};

/* Socket families a command may create: AF_UNIX (1), AF_INET (2), AF_INET6 (10) and
 * AF_NETLINK (16). Every other value of socket(2)'s first argument is denied by the
 * blocks below, each "value & mask == base" (an aligned power-of-two range), which
 * together cover 0..63 minus the allowed four, plus one comparison for 64 and above.
 * Fewer rules than one per family: a smaller filter, built faster. */
static const struct {
        uint64_t mask, base;
} denied_family_blocks[] = {
        {~0x0ull, 0},  /* AF_UNSPEC */
        {~0x0ull, 3},  /* 3 */
        {~0x3ull, 4},  /* 4..7 */
        {~0x1ull, 8},  /* 8..9 */
        {~0x0ull, 11}, /* 11 */
        {~0x3ull, 12}, /* 12..15 */
        {~0x0ull, 17}, /* AF_PACKET */
        {~0x1ull, 18}, /* 18..19 */
        {~0x3ull, 20}, /* 20..23 */
        {~0x7ull, 24}, /* 24..31 */
        {~0x1full, 32}, /* 32..63 */
};
#define FAMILY_LIMIT 64 /* Above AF_MAX (46 in Linux 6.x). */

/* No setuid or setgid file may come out of a sandbox: a mode with S_ISUID or S_ISGID
 * fails with EPERM wherever a syscall takes one, as in Nix's build sandbox
 * (setupSeccomp, "Prevent builders from creating setuid/setgid binaries"), which refuses
 * them in chmod, fchmod, fchmodat and fchmodat2. The filter cannot tell a directory from
 * a file, so chmod g+s on a directory is refused too; mkdir and mkdirat are left alone,
 * as the kernel keeps neither bit from their mode (a new directory only inherits its
 * parent's setgid bit). Each bit is one masked comparison of the mode argument, whose
 * mask leaves the register's upper 32 bits out: the kernel truncates the mode to
 * umode_t, so garbage there neither hides a setuid mode nor gets an ordinary one
 * refused. */
static const struct {
        const char *name;
        unsigned mode_arg;
} setid_mode_syscalls[] = {
        {"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2},  /* change a mode */
        {"mknod", 1}, {"mknodat", 2},                   /* mknod(S_IFREG) makes a file */
        {"creat", 1},                                   /* open(O_CREAT | O_WRONLY | O_TRUNC) */
};

/* open and openat read their mode only when their flags create a file, so each rule
 * ANDs a flag with a mode bit (see WILL_CREATE in the kernel's fs/open.c). */
static const struct {
        const char *name;
        unsigned flags_arg, mode_arg;
} setid_open_syscalls[] = {
        {"open", 1, 2}, {"openat", 2, 3},
};

static const uint64_t setid_mode_bits[] = {S_ISUID, S_ISGID};

/* O_TMPFILE is the kernel's __O_TMPFILE bit plus O_DIRECTORY (glibc folds both into its
 * __O_TMPFILE); O_DIRECTORY alone creates nothing, so only the first bit is tested. */
static const uint64_t open_create_flags[] = {O_CREAT, O_TMPFILE & ~O_DIRECTORY};

/* clang-format on */

/* Syscalls newer than the oldest libseccomp we build with (2.5.4, Debian 12), by the
 * kernel's number: used only when libseccomp does not know the name. Since Linux 5.1 a
 * new syscall gets one number on every architecture, 452 for fchmodat2 (Linux 6.6,
 * libseccomp 2.5.5), except that alpha and mips offset theirs: there the kernel headers
 * must name it, or filter_build fails with -EINVAL rather than filter the wrong call. */
#if defined(__NR_fchmodat2)
#define FCHMODAT2_NR __NR_fchmodat2
#elif !defined(__alpha__) && !defined(__mips__)
#define FCHMODAT2_NR 452
#endif
/* open_tree_attr (Linux 6.15) and file_setattr (6.17, which sets what FS_IOC_FSSETXATTR
 * sets: a project id, the inherit flag), likewise. */
#if defined(__NR_open_tree_attr)
#define OPEN_TREE_ATTR_NR __NR_open_tree_attr
#elif !defined(__alpha__) && !defined(__mips__)
#define OPEN_TREE_ATTR_NR 467
#endif
#if defined(__NR_file_setattr)
#define FILE_SETATTR_NR __NR_file_setattr
#elif !defined(__alpha__) && !defined(__mips__)
#define FILE_SETATTR_NR 469
#endif
static const struct {
        const char *name;
        int nr;
} newer_syscalls[] = {
#ifdef FCHMODAT2_NR
        {"fchmodat2", FCHMODAT2_NR},
#endif
#ifdef OPEN_TREE_ATTR_NR
        {"open_tree_attr", OPEN_TREE_ATTR_NR},
#endif
#ifdef FILE_SETATTR_NR
        {"file_setattr", FILE_SETATTR_NR},
#endif
        {NULL, 0},
};

/* clone(2)'s flags argument is the first on most architectures and the second on
 * s390 and CRIS (see the CLONE_BACKWARDS2/3 variants in the kernel's kernel/fork.c). */
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* Resolves name for the native architecture. Returns 1 and the number, 0 when the
 * syscall does not exist there (libseccomp gives a negative pseudo-number, e.g. umount
 * on x86_64), or -EINVAL when neither libseccomp nor newer_syscalls has heard of it (a
 * typo here). */
static int resolve(const char *name, int *ret_nr) {
        int nr = seccomp_syscall_resolve_name(name);
        size_t i;

        if (nr == __NR_SCMP_ERROR) {
                for (i = 0; newer_syscalls[i].name; i++)
                        if (strcmp(name, newer_syscalls[i].name) == 0) {
                                *ret_nr = newer_syscalls[i].nr;
                                return 1;
                        }
                return -EINVAL;
        }
        if (nr < 0)
                return 0;
        *ret_nr = nr;
        return 1;
}

static int add_plain(scmp_filter_ctx ctx, const char *const *names, uint32_t action) {
        size_t i;
        int r, nr;

        for (i = 0; names[i]; i++) {
                r = resolve(names[i], &nr);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                r = seccomp_rule_add(ctx, action, nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_clone_rules(scmp_filter_ctx ctx) {
        size_t i;
        int r;

        /* libseccomp allows one comparison per argument in a rule, and the rules of one
         * syscall are OR-ed: one rule per flag bit gives "any bit set". */
        for (i = 0; i < sizeof(clone_ns_flags) / sizeof(clone_ns_flags[0]); i++) {
                struct scmp_arg_cmp cmp = {.arg = CLONE_FLAGS_ARG,
                                           .op = SCMP_CMP_MASKED_EQ,
                                           .datum_a = clone_ns_flags[i],
                                           .datum_b = clone_ns_flags[i]};
                r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, &cmp);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_socket_rules(scmp_filter_ctx ctx) {
        size_t i;
        int r, nr;

        /* socketcall(2) multiplexes socket() on some 32-bit ABIs; those are not native on
         * the 64-bit architectures we build for, and libseccomp rewrites socket rules for
         * them when they are. */
        r = resolve("socket", &nr);
        if (r <= 0)
                return r;
        for (i = 0; i < sizeof(denied_family_blocks) / sizeof(denied_family_blocks[0]); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, denied_family_blocks[i].mask,
                                             denied_family_blocks[i].base));
                if (r < 0)
                        return r;
        }
        /* The kernel reads the family as an int, but the register is 64 bits wide: a
         * full-width unsigned comparison also denies any value with upper bits set
         * (e.g. (1 << 32) | AF_PACKET), so they cannot smuggle a denied family past the
         * 64-bit masked tests above, and cannot pass for an allowed one either. */
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                SCMP_A0(SCMP_CMP_GE, (scmp_datum_t)FAMILY_LIMIT));
}

static int add_ioctl_rules(scmp_filter_ctx ctx) {
        /* And the inode flags and project id (chattr): a file given another project id,
         * or a directory without the project-inherit flag, would leave the workspace's
         * project quota (the disk limit, disk.h). */
        static const unsigned long cmds[] = {TIOCSTI, TIOCLINUX, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS,
                                             FS_IOC_FSSETXATTR};
        size_t i;
        int r;

        /* The kernel truncates ioctl's request to 32 bits, so compare only those:
         * otherwise a request with upper garbage bits passes the filter and still means
         * TIOCSTI (CVE-2019-10063, Flatpak). */
        for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, cmds[i]));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Refuses syscall nr when the mode in argument mode_arg has S_ISUID or S_ISGID and,
 * when flags is not NULL, flags matches too: one rule per bit, as the rules of a
 * syscall are OR-ed and the comparisons within one rule AND-ed. */
static int add_setid_rule(scmp_filter_ctx ctx, int nr, const struct scmp_arg_cmp *flags,
                          unsigned mode_arg) {
        size_t i;
        int r;

        for (i = 0; i < sizeof(setid_mode_bits) / sizeof(setid_mode_bits[0]); i++) {
                struct scmp_arg_cmp cmps[2] = {{.arg = mode_arg,
                                                .op = SCMP_CMP_MASKED_EQ,
                                                .datum_a = setid_mode_bits[i],
                                                .datum_b = setid_mode_bits[i]}};
                unsigned n = 1;

                if (flags)
                        cmps[n++] = *flags;
                r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, n, cmps);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_setid_rules(scmp_filter_ctx ctx) {
        size_t i, j;
        int r, nr;

        for (i = 0; i < sizeof(setid_mode_syscalls) / sizeof(setid_mode_syscalls[0]); i++) {
                r = resolve(setid_mode_syscalls[i].name, &nr);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                r = add_setid_rule(ctx, nr, NULL, setid_mode_syscalls[i].mode_arg);
                if (r < 0)
                        return r;
        }
        for (i = 0; i < sizeof(setid_open_syscalls) / sizeof(setid_open_syscalls[0]); i++) {
                r = resolve(setid_open_syscalls[i].name, &nr);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                for (j = 0; j < sizeof(open_create_flags) / sizeof(open_create_flags[0]); j++) {
                        struct scmp_arg_cmp flags = {.arg = setid_open_syscalls[i].flags_arg,
                                                     .op = SCMP_CMP_MASKED_EQ,
                                                     .datum_a = open_create_flags[j],
                                                     .datum_b = open_create_flags[j]};
                        r = add_setid_rule(ctx, nr, &flags, setid_open_syscalls[i].mode_arg);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Exports ctx's BPF into a malloc'd program. libseccomp 2.5 only exports to a file
 * descriptor: a non-blocking pipe is enough, a filter is at most BPF_MAXINSNS (4096)
 * instructions of 8 bytes, 32 KiB, less than a pipe's 64 KiB. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *ret_prog) {
        size_t cap = 4096 * sizeof(struct sock_filter), len = 0;
        uint8_t *buf;
        int p[2], r = 0;

        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        buf = malloc(cap);
        if (!buf) {
                r = -ENOMEM;
                goto out;
        }
        r = seccomp_export_bpf(ctx, p[1]);
        if (r < 0)
                goto out;
        close(p[1]);
        p[1] = -1;
        for (;;) {
                ssize_t n = read(p[0], buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        goto out;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len == cap) {
                        r = -E2BIG;
                        goto out;
                }
        }
        if (len == 0 || len % sizeof(struct sock_filter) != 0) {
                r = -EIO;
                goto out;
        }
        ret_prog->len = (unsigned short)(len / sizeof(struct sock_filter));
        ret_prog->filter = (struct sock_filter *)buf;
        buf = NULL;
out:
        free(buf);
        close(p[0]);
        if (p[1] >= 0)
                close(p[1]);
        return r;
}

int filter_build(struct sock_fprog *ret_prog, bool setid_modes) {
        scmp_filter_ctx ctx;
        int r;

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                goto out;
        /* PID 1 sets no_new_privs itself, right before it loads the program. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                goto out;
        r = add_plain(ctx, eperm_syscalls, SCMP_ACT_ERRNO(EPERM));
        if (r < 0)
                goto out;
        r = add_plain(ctx, enosys_syscalls, SCMP_ACT_ERRNO(ENOSYS));
        if (r < 0)
                goto out;
        r = add_clone_rules(ctx);
        if (r < 0)
                goto out;
        r = add_socket_rules(ctx);
        if (r < 0)
                goto out;
        r = add_ioctl_rules(ctx);
        if (r < 0)
                goto out;
        /* An image's sandbox that writes nothing another host user may reach installs
         * setuid programs of its packages (init.proto Setup.setid_modes). */
        r = setid_modes ? 0 : add_setid_rules(ctx);
        if (r < 0)
                goto out;
        r = export_bpf(ctx, ret_prog);
out:
        seccomp_release(ctx);
        return r;
}

void filter_free(struct sock_fprog *prog) {
        if (!prog)
                return;
        free(prog->filter);
        prog->filter = NULL;
        prog->len = 0;
}

int filter_load(const struct sock_fprog *prog) {
#ifdef SYS_seccomp
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) == 0)
                return 0;
        if (errno != ENOSYS)
                return -errno;
#endif
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) == 0)
                return 0;
        return -errno;
}

int filter_supported(void) {
#if defined(SYS_seccomp) && defined(SECCOMP_GET_ACTION_AVAIL)
        uint32_t action = SECCOMP_RET_KILL_PROCESS;

        if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0)
                return 0;
        /* EOPNOTSUPP: a kernel before 4.14 without SECCOMP_RET_KILL_PROCESS, where
         * libseccomp falls back to killing the thread; filters still work. */
        if (errno != ENOSYS && errno != EOPNOTSUPP)
                return -errno;
#endif
        if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
                return -errno;
        return 0;
}
