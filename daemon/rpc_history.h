/* rpc_history.h: the handler of GetHistory: a page of a sandbox's records, of its
 * commands (HISTORY_COMMANDS, the default), of its connections through the egress
 * proxy (HISTORY_CONNECTIONS) or of the streams to its ports (HISTORY_FORWARDS), read
 * from the store.
 *
 * The sandbox may be live or ended (on record), and the caller must be allowed to see
 * it (rpc_common.h: rpc_find_sandbox); a live sandbox's running commands are recorded
 * first, so that the page includes them. A page holds at most the limit asked
 * (SBX_DEFAULT_HISTORY_LIMIT when none, never more than SBX_MAX_HISTORY_LIMIT) and says
 * whether more follow and where the next starts. Called by rpc_dispatch only, on the
 * event loop; the reply is built and sent within the call, and nothing is kept. */
#ifndef SBX_RPC_HISTORY_H
#define SBX_RPC_HISTORY_H

#include "sbx.pb-c.h"

struct conn;

void rpc_history_get(struct conn *c, const Sbx__V1__Request *req);

#endif
