/* spawn.h: starting one command inside the sandbox (clone, per-command setup, execve).
 *
 * PID 1 (main.c) calls spawn_prepare_parent() once, then serve.c calls spawn_start()
 * for each Start message. The child runs the per-command setup in a fixed order in
 * PID 1's memory while PID 1 waits, and leaves the first failure in a struct
 * spawn_failure: when spawn_start returns, PID 1 knows StartFailed from Started. */
#ifndef SBX_INIT_SPAWN_H
#define SBX_INIT_SPAWN_H

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
        bool tty; /* stdio is a terminal's slave: made the controlling terminal, owned by uid. */
};

/* What a failed child reports: a positive errno and the step with its object
 * ("chdir /x", "execve python4"). err is 0 when nothing failed. */
struct spawn_failure {
        int32_t err;
        char what[SPAWN_WHAT_BYTES];
};

/* Prepares PID 1 to start commands, once, before its seccomp filter: every signal
 * disposition back to the default and SIGCHLD blocked (PID 1 reads it from a
 * signalfd), the capability bounding set emptied and the securebits locked (see
 * caps.h; every command inherits both, so none repeats the ~40 calls), and the
 * children's stack mapped. Returns 0 or -errno. */
int spawn_prepare_parent(void);

/* Starts the command and returns once it has called execve or exited. Returns 0 with
 * the child's pid in *ret_pid when execve succeeded; 1 with the pid and *fail filled
 * in when a step failed (the child exits with 127, to be reaped like any child);
 * -errno when clone failed (nothing was started). Must be called from PID 1 after
 * spawn_prepare_parent, single-threaded. */
int spawn_start(const struct spawn_spec *spec, pid_t *ret_pid, struct spawn_failure *fail);

/* Runs fn(arg) in a child the way spawn_start runs a command (sharing PID 1's memory, on
 * the same stack, PID 1 asleep meanwhile), waits for it and reaps it: work that must be
 * done with a command's credentials, which fn takes on itself with raw system calls and,
 * like the command child, without anything that allocates or takes a lock. Returns fn's
 * return value (the child's exit status; 128 + N when killed by signal N), or -errno
 * when the child could not be started. Same conditions as spawn_start. */
int spawn_call(int (*fn)(void *), void *arg);

#endif
