/* spawn.c: the command child, from clone to execve.
 *
 * The child is cloned from PID 1, which is single-threaded, the way posix_spawn does
 * it: CLONE_VM | CLONE_VFORK on a stack of its own, so no page table is copied and no
 * page faulted in for copy-on-write, and PID 1 sleeps until the child has called
 * execve or exited. (A fork copied PID 1's address space and then faulted in the pages
 * both sides touched: 40% of PID 1's time per command, measured with perf.) While it
 * shares PID 1's memory the child calls nothing that allocates or takes a lock and
 * changes its credentials with raw system calls (glibc's wrappers would broadcast the
 * change to the threads of the process whose memory it shares).
 *
 * Its setup, in order: signal mask emptied (PID 1 keeps every disposition at its
 * default, which inside its namespace means ignored: one call here instead of one per
 * signal),
 * setsid, join the command's cgroups, stdio onto 0/1/2 (a terminal's slave, with
 * RunCommand.tty, becomes the controlling terminal and the user's), every other descriptor
 * close-on-exec, rlimits (RLIMIT_CORE 0 unless given), supplementary groups dropped,
 * setresgid/setresuid, every remaining capability cleared, chdir (as the command's
 * user, so a directory it may not enter fails here), no_new_privs, then execve with a
 * PATH search done by hand over the command's own PATH. The empty bounding set and the
 * locked securebits it inherits from PID 1 (spawn_prepare_parent), and the seccomp
 * filter too: PID 1 loaded it on itself before it served (main.c), and the child loads
 * nothing. The first failure is written into the caller's struct spawn_failure, which
 * the child shares, before it exits with 127. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
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

/* What the child works from: the spec and the caller's failure report, both in the
 * memory it shares with PID 1. */
struct child_arg {
        const struct spawn_spec *spec;
        struct spawn_failure *fail;
};

/* Reports a failed step to PID 1 and ends the child. err is a positive errno. */
static void __attribute__((noreturn))
child_fail(struct spawn_failure *f, int err, const char *step, const char *object) {
        f->what[0] = '\0';
        append(f->what, sizeof(f->what), step);
        if (object) {
                append(f->what, sizeof(f->what), " ");
                append(f->what, sizeof(f->what), object);
        }
        /* Last: a non-zero err is what tells PID 1 the report is there. */
        f->err = err > 0 ? err : EIO;
        _exit(127);
}

/* PID 1's dispositions are all the default ones and it blocks only SIGCHLD
 * (spawn_prepare_parent), so emptying the mask is the whole reset. */
static void reset_signals(void) {
        sigset_t none;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}

static void join_cgroups(const struct spawn_spec *spec, struct spawn_failure *fail) {
        int r = util_join_cgroups(spec->cgroup_fds, spec->n_cgroup_fds, spec->cgroup_v2);

        if (r < 0)
                child_fail(fail, -r, "join cgroup", spec->cgroup_v2 ? "(v2)" : "(v1)");
}

/* stdin is the slave of a pty the daemon opened in the sandbox's devpts: it becomes
 * the controlling terminal of the session setsid() just made (its foreground process
 * group is then the command's, so Ctrl-C typed reaches it), and it goes to the
 * command's user, who may then reopen it by name (/dev/pts/N) as on a login. */
static void take_terminal(const struct spawn_spec *spec, struct spawn_failure *fail) {
        if (ioctl(0, TIOCSCTTY, 0) < 0)
                child_fail(fail, errno, "ioctl TIOCSCTTY", "stdin");
        if (fchown(0, spec->uid, spec->gid) < 0)
                child_fail(fail, errno, "fchown", "the terminal");
}

static void apply_rlimits(const struct spawn_spec *spec, struct spawn_failure *fail) {
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
                        child_fail(fail, errno, "setrlimit", what);
                if (rl.rlim_max > cur.rlim_max)
                        rl.rlim_max = cur.rlim_max;
                if (rl.rlim_cur > rl.rlim_max)
                        rl.rlim_cur = rl.rlim_max;
                if (setrlimit(l->resource, &rl) < 0)
                        child_fail(fail, errno, "setrlimit", what);
        }
        if (!core_given) {
                rl.rlim_cur = rl.rlim_max = 0;
                if (setrlimit(RLIMIT_CORE, &rl) < 0)
                        child_fail(fail, errno, "setrlimit", "RLIMIT_CORE");
        }
}

static void drop_privileges(const struct spawn_spec *spec, struct spawn_failure *fail) {
        char id[24] = "";

        if (!spec->keep_groups && syscall(SYS_setgroups, 0, NULL) < 0)
                child_fail(fail, errno, "setgroups", "[]");
        append_uint(id, sizeof(id), (unsigned long)spec->gid);
        if (syscall(SYS_setresgid, spec->gid, spec->gid, spec->gid) < 0)
                child_fail(fail, errno, "setresgid", id);
        id[0] = '\0';
        append_uint(id, sizeof(id), (unsigned long)spec->uid);
        if (syscall(SYS_setresuid, spec->uid, spec->uid, spec->uid) < 0)
                child_fail(fail, errno, "setresuid", id);
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
static void __attribute__((noreturn))
exec_search(const struct spawn_spec *spec, struct spawn_failure *fail) {
        const char *file = spec->argv[0], *p;
        char buf[SBX_PATH_MAX_BYTES + 1];
        size_t flen = strlen(file);
        int seen_eacces = 0;

        if (flen == 0)
                child_fail(fail, ENOENT, "execve", "\"\"");
        if (strchr(file, '/')) {
                execve(file, spec->argv, spec->envp);
                child_fail(fail, errno, "execve", file);
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
                                child_fail(fail, errno, "execve", buf);
                        }
                }
                if (*end == '\0')
                        break;
                p = end + 1;
        }
        child_fail(fail, seen_eacces ? EACCES : ENOENT, "execve", file);
}

static int child(void *p) {
        const struct child_arg *arg = p;
        const struct spawn_spec *spec = arg->spec;
        struct spawn_failure *fail = arg->fail;
        int r, i;

        reset_signals();
        if (setsid() < 0)
                child_fail(fail, errno, "setsid", NULL);
        join_cgroups(spec, fail);
        /* PID 1 keeps 0, 1 and 2 open, so the received descriptors are all >= 3 and
         * none is overwritten by an earlier dup2. dup2 clears FD_CLOEXEC. */
        for (i = 0; i < 3; i++)
                if (dup2(spec->stdio[i], i) < 0)
                        child_fail(fail, errno, "dup2",
                                   i == 0   ? "stdin"
                                   : i == 1 ? "stdout"
                                            : "stderr");
        if (spec->tty)
                take_terminal(spec, fail);
        r = util_cloexec_from(3);
        if (r < 0)
                child_fail(fail, -r, "close-on-exec", "descriptors >= 3");
        apply_rlimits(spec, fail);
        drop_privileges(spec, fail);
        r = caps_clear();
        if (r < 0)
                child_fail(fail, -r, "capset", "(clear all)");
        /* As the command's user without capabilities: a directory it may not enter
         * fails here, not later in its first relative open. */
        if (chdir(spec->cwd) < 0)
                child_fail(fail, errno, "chdir", spec->cwd);
        /* PID 1 set it already when it loaded the filter; not when this kernel has no
         * seccomp, and the command needs it either way. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(fail, errno, "prctl", "PR_SET_NO_NEW_PRIVS");
        exec_search(spec, fail);
}

/* The child's stack: PID 1 starts one child at a time and sleeps until it has called
 * execve or exited, so one stack serves every command. A guard page below it turns an
 * overflow into a crash of the child, never a write into PID 1's memory. */
#define CHILD_STACK_BYTES (256u * 1024u)
static char *child_stack;
static size_t child_stack_map; /* The mapping's size: the stack and its guard page. */

int spawn_prepare_parent(void) {
        long page = sysconf(_SC_PAGESIZE);
        sigset_t chld;
        int sig, r;

        /* Every disposition back to the default, including the two real-time
         * signals glibc's sigaction() refuses (32 and 33) with the raw call: an
         * ignored disposition inherited from whoever started sbxd would otherwise
         * reach every command across execve (signal(7)). The kernel's struct for
         * x86-64 and most architectures: handler, flags, restorer, 64-bit mask. */
        for (sig = 1; sig < NSIG; sig++) {
                struct {
                        void (*handler)(int);
                        unsigned long flags;
                        void (*restorer)(void);
                        uint64_t mask;
                } ksa = {SIG_DFL, 0, NULL, 0};
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
        }
        /* Only SIGCHLD blocked (serve.c reads it from a signalfd). Every other signal
         * keeps its default disposition: sent from inside the namespace to PID 1, the
         * kernel discards it (pid_namespaces(7)); a blocked one would stay queued
         * instead. Children start with an empty mask (reset_signals). */
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        if (sigprocmask(SIG_SETMASK, &chld, NULL) < 0)
                return -errno;
        r = caps_drop_bounding();
        if (r < 0)
                return r;
        r = caps_lock_securebits();
        if (r < 0)
                return r;
        if (page <= 0)
                page = 4096;
        child_stack_map = CHILD_STACK_BYTES + (size_t)page;
        child_stack = mmap(NULL, child_stack_map, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (child_stack == MAP_FAILED) {
                child_stack = NULL;
                return -errno;
        }
        if (mprotect(child_stack, (size_t)page, PROT_NONE) < 0)
                return -errno;
        return 0;
}

int spawn_start(const struct spawn_spec *spec, pid_t *ret_pid, struct spawn_failure *fail) {
        struct child_arg arg = {spec, fail};
        pid_t pid;

        if (!child_stack)
                return -EINVAL;
        memset(fail, 0, sizeof(*fail));
        /* The stack grows down on every architecture Linux runs sbxd on. */
        pid = clone(child, child_stack + child_stack_map, CLONE_VM | CLONE_VFORK | SIGCHLD, &arg);
        if (pid < 0)
                return -errno;
        *ret_pid = pid;
        /* The child has called execve or exited: a failure is written by now. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return fail->err != 0 ? 1 : 0;
}

int spawn_call(int (*fn)(void *), void *arg) {
        pid_t pid;
        int st;

        if (!child_stack)
                return -EINVAL;
        pid = clone(fn, child_stack + child_stack_map, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
        if (pid < 0)
                return -errno;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
