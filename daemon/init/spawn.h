/* spawn.h: starting one command inside the sandbox (fork, per-command setup, execve).
 *
 * PID 1 (serve.c) calls spawn_start() for each Start message. The child runs the
 * per-command setup in a fixed order and reports the first failure over a
 * close-on-exec pipe; PID 1 reads that pipe to tell StartFailed from Started. */
#ifndef SBX_INIT_SPAWN_H
#define SBX_INIT_SPAWN_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPAWN_WHAT_BYTES 400u

struct spawn_rlimit {
        int resource; /* RLIMIT_* */
        uint64_t soft;
        uint64_t hard; /* UINT64_MAX is RLIM_INFINITY. */
};

/* Everything one command needs. Nothing is taken over: the caller keeps (and after
 * spawn_start closes) the descriptors and frees the arrays. */
struct spawn_spec {
        char *const *argv; /* NULL-terminated, argv[0] names the program. */
        char *const *envp; /* NULL-terminated "K=V"; its PATH drives the search. */
        const char *cwd;   /* Changed to after the uid change. */
        const struct spawn_rlimit *rlimits;
        size_t n_rlimits;
        int stdio[3]; /* Become the child's 0, 1 and 2. */
        const int *cgroup_fds;
        size_t n_cgroup_fds;
        bool cgroup_v2; /* cgroup_fds are v2 directories, else v1 cgroup.procs files. */
        uid_t uid;
        gid_t gid;
        bool keep_groups; /* Rootless: setgroups(2) is denied in our user namespace. */
        const struct sock_fprog *filter; /* NULL: no seccomp filter (kernel lacks it). */
};

/* What a failed child wrote on its error pipe: a positive errno and the step with its
 * object ("chdir /x", "execve python4"). Sent in one write, smaller than PIPE_BUF. */
struct spawn_failure {
        int32_t err;
        char what[SPAWN_WHAT_BYTES];
};

/* Forks the command. Returns 0 with the child's pid in *ret_pid and the read end of
 * its error pipe (O_NONBLOCK, O_CLOEXEC, owned by the caller) in *ret_errfd: reading
 * it gives end of stream once execve succeeded, or one struct spawn_failure first when
 * a step failed (the child then exits 127). Returns -errno when the pipe or the fork
 * failed (nothing was started). Must be called from a single-threaded process whose
 * signals are blocked or ignored: the child resets them. */
int spawn_start(const struct spawn_spec *spec, pid_t *ret_pid, int *ret_errfd);

#endif
