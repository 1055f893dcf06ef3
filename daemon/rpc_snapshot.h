/* rpc_snapshot.h: the handler of SnapshotSandbox (docs/snapshots.md).
 *
 * The caller must be one who may use the sandbox (its owner, or one it is shared with);
 * the snapshot is an image of the owner's (and of the caller's too, when another), named
 * as asked or localhost/ID:UNIXMS. The work (snapshot.h: freeze, capture, thaw, import)
 * runs off the loop as the caller's job (offload.h: bounded per user); a client that
 * goes away cancels it. The answer is the new image's ImageInfo; the store is then
 * brought within --image-cache-size as after a pull.
 *
 * Called by rpc_dispatch only, on the event loop. Logs one line per snapshot. */
#ifndef SBX_RPC_SNAPSHOT_H
#define SBX_RPC_SNAPSHOT_H

#include "sbx.pb-c.h"

struct conn;

void rpc_snapshot_sandbox(struct conn *c, const Sbx__V1__Request *req);

#endif
