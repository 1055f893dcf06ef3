/* outcome.h: the one terminal result of a command, decided from what is known when it
 * ends: how its leader ended (init's Exited), why the daemon killed it, and what the
 * cgroup counters and the output caps saw. The rules of a command's outcome and of
 * limits_hit (docs/sandboxes.md, "Command results"; sbx.proto Outcome) live here and
 * nowhere else.
 *
 * Pure functions; used by command.c, tested by check_command. */
#ifndef SBX_OUTCOME_H
#define SBX_OUTCOME_H

#include <stddef.h>

#include "sbx.pb-c.h"

/* Why the daemon killed a command, if it did. */
enum command_kill {
        KILL_NONE = 0,
        KILL_TIMEOUT,       /* its timeout */
        KILL_CANCEL,        /* a client's CancelCommand */
        KILL_SANDBOX_ENDED, /* the sandbox ended while it ran */
        KILL_DAEMON_LEFT,   /* the daemon left the sandbox to the next one (--keep-sandboxes) */
        KILL_QUEUE_TIMEOUT, /* it waited for a slot past its queue_timeout_ms */
};

/* What is known of a command when it ends. */
struct outcome_facts {
        int never_started; /* it waited for a slot and left the queue without starting */
        int start_failed;  /* init (or the daemon) could not start it */
        int exited;       /* init reported its leader reaped */
        int wait_status;  /* the leader's, as waitpid(2) gives it (when exited) */
        enum command_kill kill;
        int oom_killed;       /* the OOM killer struck in its group while it ran */
        int forks_refused;    /* its group refused a fork while it ran (and the count
                               * is its own: its own group, or nothing else ran) */
        int output_truncated; /* a stream went past its cap */
        double cpu_seconds;   /* user + system of the leader and its reaped children */
        int has_cpu_limit;    /* the policy's cpu_seconds, when it has one */
        double cpu_limit;
        int has_file_size_limit; /* the policy has file_size_bytes */
        int disk_full;           /* the policy has disk_bytes and /workspace is full at the end */
};

/* Most limits one result can name: memory or timeout, cpu, file_size, processes, output,
 * disk. */
#define OUTCOME_MAX_HITS 7

struct outcome {
        Sbx__V1__Outcome outcome;
        int has_exit_code;
        int exit_code;
        int has_signal;
        int signal;
        char *hits[OUTCOME_MAX_HITS]; /* static names, in the order above */
        size_t n_hits;
};

/* Decides the outcome of a command from f. */
void outcome_classify(const struct outcome_facts *f, struct outcome *ret);

/* The limits hit, comma-separated ("timeout,output"), into buf (len bytes); cut at len. */
void outcome_hits_text(const struct outcome *oc, char *buf, size_t len);

#endif
