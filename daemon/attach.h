/* attach.h: AttachCommand (RunCommand.background's other half): a connection follows a
 * command of a sandbox it may use, whoever started it: first the output the command
 * kept, from the offsets asked, as OutputChunk responses; then, with `follow`, what it
 * prints and its result; without, at once a result (outcome RUNNING for a command that
 * has not ended).
 *
 * An attacher never slows the command down nor holds unbounded memory: while its
 * connection is congested (SBX_CONN_WRITE_HIGH_WATER_BYTES queued) it lags, and once the
 * connection drains it catches up from the output the command keeps (the tail within
 * max_stdout_bytes / max_stderr_bytes); what scrolled out of the tail meanwhile is
 * skipped, which the offsets of the chunks show. An attacher that goes away is just
 * forgotten.
 *
 * Called by rpc.c for a sandbox the caller may use (its access already checked); uses
 * command.h and conn.h. */
#ifndef SBX_ATTACH_H
#define SBX_ATTACH_H

#include <stdint.h>

#include "sbx.pb-c.h"

struct conn;
struct sandbox;

/* Answers req (request rid on c) for sb: NOT_FOUND when sb has no such running, waiting
 * or kept ended command. */
void attach_command(struct conn *c, uint64_t rid, struct sandbox *sb,
                    const Sbx__V1__AttachCommand *req);

#endif
