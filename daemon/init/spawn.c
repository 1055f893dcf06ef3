/* spawn.c: the command child, from fork to execve.
 *
 * The child is forked from PID 1, which is single-threaded, and does its setup in this
 * order: signal dispositions and mask reset, setsid, join the command's cgroups, stdio
 * onto 0/1/2, every other descriptor close-on-exec, rlimits (RLIMIT_CORE 0 unless
 * given), empty capability bounding set and locked securebits, supplementary groups
 * dropped, setresgid/setresuid, every remaining capability cleared, chdir (as the
 * command's user, so a directory it may not enter fails here), no_new_privs, the
 * seccomp filter last, then execve with a PATH search done by hand over the command's
 * own PATH. The first failure travels to PID 1 over a close-on-exec pipe (libuv's
 * way). Owns the pipe until spawn_start returns its read end. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "caps.h"
#include "filter.h"
#include "sbx_limits.h"
#include "util.h"

/* Used when the command's environment has no PATH (glibc's execvp default, widened to
 * the sbin directories and /usr/local). */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Appends src to dst (cap bytes) without overflowing; the child's formatting. */
static void append(char *dst, size_t cap, const char *src) {
        size_t n = strlen(dst);

        while (*src && n + 1 < cap)
                dst[n++] = *src++;
        dst[n] = '\0';
}

static void append_uint(char *dst, size_t cap, unsigned long v) {
        char tmp[24];
        size_t i = sizeof(tmp) - 1;

        tmp[i] = '\0';
        do {
                tmp[--i] = (char)('0' + v % 10);
                v /= 10;
        } while (v && i > 0);
        append(dst, cap, tmp + i);
}

/* Reports a failed step to PID 1 and ends the child. err is a positive errno. */
static void __attribute__((noreturn))
child_fail(int errfd, int err, const char *step, const char *object) {
        struct spawn_failure f;
        ssize_t n;

        memset(&f, 0, sizeof(f));
        f.err = err > 0 ? err : EIO;
        append(f.what, sizeof(f.what), step);
        if (object) {
                append(f.what, sizeof(f.what), " ");
                append(f.what, sizeof(f.what), object);
        }
        do
                n = write(errfd, &f, sizeof(f));
        while (n < 0 && errno == EINTR);
        _exit(127);
}

static void reset_signals(void) {
        struct sigaction sa;
        sigset_t none;
        int sig;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        /* Ignored dispositions survive execve (signal(7)): PID 1 ignores nearly
         * everything, the command must start with the defaults. */
        for (sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &sa, NULL);
        /* glibc's sigaction() refuses the two real-time signals it keeps for itself (32
         * and 33), so an ignored disposition inherited from whoever started sbxd would
         * reach the command: reset them with the raw system call. The kernel's struct
         * for x86-64 and most architectures: handler, flags, restorer, 64-bit mask. */
        {
                struct {
                        void (*handler)(int);
                        unsigned long flags;
                        void (*restorer)(void);
                        uint64_t mask;
                } ksa = {SIG_DFL, 0, NULL, 0};
                for (sig = 32; sig < SIGRTMIN; sig++)
                        (void)syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
        }
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}

static void join_cgroups(const struct spawn_spec *spec, int errfd) {
        size_t i;

        for (i = 0; i < spec->n_cgroup_fds; i++) {
                int fd = spec->cgroup_fds[i], pfd = fd;
                ssize_t n;

                /* Writing "0" to cgroup.procs moves the writer itself (cgroups(7)). v2
                 * passes the cgroup directory, so open its cgroup.procs first. */
                if (spec->cgroup_v2) {
                        pfd = openat(fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                        if (pfd < 0)
                                child_fail(errfd, errno, "open cgroup.procs", "of a v2 cgroup");
                }
                do
                        n = write(pfd, "0", 1);
                while (n < 0 && errno == EINTR);
                if (n != 1)
                        child_fail(errfd, n < 0 ? errno : EIO, "join cgroup",
                                   spec->cgroup_v2 ? "(v2)" : "(v1)");
                if (pfd != fd)
                        close(pfd);
        }
}

static void apply_rlimits(const struct spawn_spec *spec, int errfd) {
        struct rlimit rl = {0, 0};
        size_t i;
        int core_given = 0;

        for (i = 0; i < spec->n_rlimits; i++) {
                const struct spawn_rlimit *l = &spec->rlimits[i];
                struct rlimit cur;
                char what[32] = "";

                rl.rlim_cur = l->soft == UINT64_MAX ? RLIM_INFINITY : (rlim_t)l->soft;
                rl.rlim_max = l->hard == UINT64_MAX ? RLIM_INFINITY : (rlim_t)l->hard;
                if (l->resource == RLIMIT_CORE)
                        core_given = 1;
                if (setrlimit(l->resource, &rl) == 0)
                        continue;
                append_uint(what, sizeof(what), (unsigned long)l->resource);
                /* Raising a hard limit needs CAP_SYS_RESOURCE, which the daemon may lack
                 * (and then so do we). The current hard limit is stricter than the one
                 * asked for, so clamp to it: the command ends up at least as limited. */
                if (errno != EPERM || getrlimit(l->resource, &cur) < 0)
                        child_fail(errfd, errno, "setrlimit", what);
                if (rl.rlim_max > cur.rlim_max)
                        rl.rlim_max = cur.rlim_max;
                if (rl.rlim_cur > rl.rlim_max)
                        rl.rlim_cur = rl.rlim_max;
                if (setrlimit(l->resource, &rl) < 0)
                        child_fail(errfd, errno, "setrlimit", what);
        }
        if (!core_given) {
                rl.rlim_cur = rl.rlim_max = 0;
                if (setrlimit(RLIMIT_CORE, &rl) < 0)
                        child_fail(errfd, errno, "setrlimit", "RLIMIT_CORE");
        }
}

static void drop_privileges(const struct spawn_spec *spec, int errfd) {
        char id[24] = "";
        int r;

        r = caps_drop_bounding();
        if (r < 0)
                child_fail(errfd, -r, "drop capability bounding set", NULL);
        r = caps_lock_securebits();
        if (r < 0)
                child_fail(errfd, -r, "set securebits", NULL);
        if (!spec->keep_groups && setgroups(0, NULL) < 0)
                child_fail(errfd, errno, "setgroups", "[]");
        append_uint(id, sizeof(id), (unsigned long)spec->gid);
        if (setresgid(spec->gid, spec->gid, spec->gid) < 0)
                child_fail(errfd, errno, "setresgid", id);
        id[0] = '\0';
        append_uint(id, sizeof(id), (unsigned long)spec->uid);
        if (setresuid(spec->uid, spec->uid, spec->uid) < 0)
                child_fail(errfd, errno, "setresuid", id);
}

static const char *env_path(char *const *envp) {
        size_t i;

        for (i = 0; envp[i]; i++)
                if (strncmp(envp[i], "PATH=", 5) == 0)
                        return envp[i] + 5;
        return DEFAULT_PATH;
}

/* execvpe(3) without its allocation and its /bin/sh fallback for ENOEXEC: try each
 * PATH entry, skip the ones where the file is missing or not searchable, remember an
 * EACCES, stop at any other error. */
static void __attribute__((noreturn)) exec_search(const struct spawn_spec *spec, int errfd) {
        const char *file = spec->argv[0], *p;
        char buf[SBX_PATH_MAX_BYTES + 1];
        size_t flen = strlen(file);
        int seen_eacces = 0;

        if (flen == 0)
                child_fail(errfd, ENOENT, "execve", "\"\"");
        if (strchr(file, '/')) {
                execve(file, spec->argv, spec->envp);
                child_fail(errfd, errno, "execve", file);
        }
        p = env_path(spec->envp);
        for (;;) {
                const char *end = strchrnul(p, ':');
                size_t dlen = (size_t)(end - p);

                if (dlen + 1 + flen < sizeof(buf)) {
                        /* An empty entry means the current directory. */
                        if (dlen == 0) {
                                memcpy(buf, file, flen + 1);
                        } else {
                                memcpy(buf, p, dlen);
                                buf[dlen] = '/';
                                memcpy(buf + dlen + 1, file, flen + 1);
                        }
                        execve(buf, spec->argv, spec->envp);
                        switch (errno) {
                        case EACCES:
                                seen_eacces = 1;
                                break;
                        case ENOENT:
                        case ENOTDIR:
                        case ESTALE:
                        case ENODEV:
                        case ETIMEDOUT:
                        case ELOOP:
                        case ENAMETOOLONG:
                                break;
                        default:
                                child_fail(errfd, errno, "execve", buf);
                        }
                }
                if (*end == '\0')
                        break;
                p = end + 1;
        }
        child_fail(errfd, seen_eacces ? EACCES : ENOENT, "execve", file);
}

static void __attribute__((noreturn)) child(const struct spawn_spec *spec, int errfd) {
        int r, i;

        reset_signals();
        if (setsid() < 0)
                child_fail(errfd, errno, "setsid", NULL);
        join_cgroups(spec, errfd);
        /* PID 1 keeps 0, 1 and 2 open, so the received descriptors are all >= 3 and
         * none is overwritten by an earlier dup2. dup2 clears FD_CLOEXEC. */
        for (i = 0; i < 3; i++)
                if (dup2(spec->stdio[i], i) < 0)
                        child_fail(errfd, errno, "dup2",
                                   i == 0   ? "stdin"
                                   : i == 1 ? "stdout"
                                            : "stderr");
        r = util_cloexec_from(3);
        if (r < 0)
                child_fail(errfd, -r, "close-on-exec", "descriptors >= 3");
        apply_rlimits(spec, errfd);
        drop_privileges(spec, errfd);
        r = caps_clear();
        if (r < 0)
                child_fail(errfd, -r, "capset", "(clear all)");
        /* As the command's user without capabilities: a directory it may not enter
         * fails here, not later in its first relative open. */
        if (chdir(spec->cwd) < 0)
                child_fail(errfd, errno, "chdir", spec->cwd);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(errfd, errno, "prctl", "PR_SET_NO_NEW_PRIVS");
        if (spec->filter) {
                r = filter_load(spec->filter);
                if (r < 0)
                        child_fail(errfd, -r, "seccomp", "(load filter)");
        }
        exec_search(spec, errfd);
}

int spawn_start(const struct spawn_spec *spec, pid_t *ret_pid, int *ret_errfd) {
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                close(p[0]);
                child(spec, p[1]);
        }
        close(p[1]);
        if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                /* Cannot happen on a pipe; the caller would block on a slow child. */
        }
        *ret_pid = pid;
        *ret_errfd = p[0];
        return 0;
}
