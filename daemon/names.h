/* names.h: the one table of the names the records keep for a sandbox's state and a
 * command's outcome ("ready", "timed_out", ...), lowercase forms of the wire enums'
 * names (sbx.proto). The store keeps them as text; the sandbox layer and the request
 * layer turn them into enums and back only through here. No state; any thread. */
#ifndef SBX_NAMES_H
#define SBX_NAMES_H

#include "sbx.pb-c.h"

/* The record's name of s ("creating" ... "lost"), or "unknown" for a value that is not
 * a state (static storage). */
const char *names_state(Sbx__V1__SandboxState s);

/* The state named s by names_state, or SANDBOX_STATE_UNSPECIFIED for NULL or a name
 * that is not one. */
Sbx__V1__SandboxState names_state_parse(const char *s);

/* The record's name of o ("exited", "timed_out", ..., "queue_timeout"), or "unknown"
 * for a value that is not an outcome (static storage). */
const char *names_outcome(Sbx__V1__Outcome o);

/* The outcome named s by names_outcome, or OUTCOME_UNSPECIFIED for NULL or a name that
 * is not one. */
Sbx__V1__Outcome names_outcome_parse(const char *s);

#endif
