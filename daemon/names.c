/* names.c: see names.h. Each table is indexed by the enum's value (designated
 * initialisers: the order of the declarations does not matter), and a value the table
 * does not name is "unknown". */
#include "names.h"

#include <stddef.h>
#include <string.h>

static const char *const state_names[] = {
        [SBX__V1__SANDBOX_STATE__CREATING] = "creating",
        [SBX__V1__SANDBOX_STATE__READY] = "ready",
        [SBX__V1__SANDBOX_STATE__TERMINATING] = "terminating",
        [SBX__V1__SANDBOX_STATE__TERMINATED] = "terminated",
        [SBX__V1__SANDBOX_STATE__EXPIRED] = "expired",
        [SBX__V1__SANDBOX_STATE__FAILED] = "failed",
        [SBX__V1__SANDBOX_STATE__LOST] = "lost",
};

static const char *const outcome_names[] = {
        [SBX__V1__OUTCOME__EXITED] = "exited",
        [SBX__V1__OUTCOME__SIGNALED] = "signaled",
        [SBX__V1__OUTCOME__TIMED_OUT] = "timed_out",
        [SBX__V1__OUTCOME__OUT_OF_MEMORY] = "out_of_memory",
        [SBX__V1__OUTCOME__CANCELLED] = "cancelled",
        [SBX__V1__OUTCOME__SANDBOX_ENDED] = "sandbox_ended",
        [SBX__V1__OUTCOME__START_FAILED] = "start_failed",
        [SBX__V1__OUTCOME__UNKNOWN] = "unknown",
        [SBX__V1__OUTCOME__RUNNING] = "running",
        [SBX__V1__OUTCOME__QUEUE_TIMEOUT] = "queue_timeout",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const char *const *names, size_t n, int v) {
        return v >= 0 && (size_t)v < n && names[v] ? names[v] : "unknown";
}

static int value_of(const char *const *names, size_t n, const char *s) {
        size_t i;
        for (i = 0; s && i < n; i++)
                if (names[i] && strcmp(names[i], s) == 0)
                        return (int)i;
        return 0;
}

const char *names_state(Sbx__V1__SandboxState s) {
        return name_of(state_names, COUNT(state_names), (int)s);
}

Sbx__V1__SandboxState names_state_parse(const char *s) {
        return (Sbx__V1__SandboxState)value_of(state_names, COUNT(state_names), s);
}

const char *names_outcome(Sbx__V1__Outcome o) {
        return name_of(outcome_names, COUNT(outcome_names), (int)o);
}

Sbx__V1__Outcome names_outcome_parse(const char *s) {
        return (Sbx__V1__Outcome)value_of(outcome_names, COUNT(outcome_names), s);
}
