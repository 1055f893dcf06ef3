/* outcome.c: a command's terminal result from what is known when it ends; see
 * outcome.h. */
#include "outcome.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* name: a string literal (the report's strings are not const in protobuf-c). */
static void hit(struct outcome *oc, char *name) {
        if (oc->n_hits < OUTCOME_MAX_HITS)
                oc->hits[oc->n_hits++] = name;
}

/* The outcome of a leader that init reported reaped. */
static void classify_exit(const struct outcome_facts *f, struct outcome *oc) {
        int st = f->wait_status, sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0, child_sig;
        int killed = f->kill == KILL_TIMEOUT || f->kill == KILL_CANCEL;

        /* The OOM killer chose the leader, or a child whose death the leader (a shell)
         * passed on as 128+SIGKILL. */
        if (f->oom_killed && !killed &&
            (sig == SIGKILL || (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL))) {
                oc->outcome = SBX__V1__OUTCOME__OUT_OF_MEMORY;
                hit(oc, "memory");
        } else if (f->kill == KILL_TIMEOUT) {
                oc->outcome = SBX__V1__OUTCOME__TIMED_OUT;
                hit(oc, "timeout");
        } else if (f->kill == KILL_CANCEL) {
                oc->outcome = SBX__V1__OUTCOME__CANCELLED;
        } else if (sig) {
                oc->outcome = SBX__V1__OUTCOME__SIGNALED;
        } else {
                oc->outcome = SBX__V1__OUTCOME__EXITED;
                oc->has_exit_code = 1;
                oc->exit_code = WEXITSTATUS(st);
        }
        if (sig) {
                oc->has_signal = 1;
                oc->signal = sig;
        }
        /* A shell reports a child killed by signal N as exit code 128+N: count the limit
         * signals of its children too. */
        child_sig = oc->has_exit_code && oc->exit_code > 128 && oc->exit_code < 128 + 65
                            ? oc->exit_code - 128
                            : 0;
        if ((sig == SIGXCPU || child_sig == SIGXCPU ||
             (sig == SIGKILL && f->cpu_limit > 0 && f->cpu_seconds >= f->cpu_limit)) &&
            f->has_cpu_limit)
                hit(oc, "cpu");
        if ((sig == SIGXFSZ || child_sig == SIGXFSZ) && f->has_file_size_limit)
                hit(oc, "file_size");
}

/* The outcome of a command that left the queue without starting: why it left. Nothing
 * ran, so no limit was hit. */
static void classify_never_started(const struct outcome_facts *f, struct outcome *oc) {
        if (f->kill == KILL_QUEUE_TIMEOUT)
                oc->outcome = SBX__V1__OUTCOME__QUEUE_TIMEOUT;
        else if (f->kill == KILL_CANCEL)
                oc->outcome = SBX__V1__OUTCOME__CANCELLED;
        else /* its sandbox ended, or the daemon left it */
                oc->outcome = SBX__V1__OUTCOME__SANDBOX_ENDED;
}

void outcome_classify(const struct outcome_facts *f, struct outcome *oc) {
        memset(oc, 0, sizeof(*oc));
        if (f->never_started) {
                classify_never_started(f, oc);
                return;
        }
        if (f->start_failed)
                oc->outcome = SBX__V1__OUTCOME__START_FAILED;
        else if (f->kill == KILL_DAEMON_LEFT)
                oc->outcome = SBX__V1__OUTCOME__UNKNOWN;
        else if (!f->exited || f->kill == KILL_SANDBOX_ENDED)
                oc->outcome = SBX__V1__OUTCOME__SANDBOX_ENDED;
        else
                classify_exit(f, oc);
        if (f->forks_refused)
                hit(oc, "processes");
        if (f->output_truncated)
                hit(oc, "output");
        if (f->disk_full)
                hit(oc, "disk");
}

void outcome_hits_text(const struct outcome *oc, char *buf, size_t len) {
        size_t i, o = 0;

        if (len == 0)
                return;
        buf[0] = '\0';
        for (i = 0; i < oc->n_hits && o < len; i++)
                o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", oc->hits[i]);
}
