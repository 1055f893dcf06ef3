/* rpc_watch.h: WatchFiles, the file-change stream of a sandbox (docs/watch.md).
 *
 * A watch is a request answered many times: a FileEvents with ready=true once every
 * directory is watched, then one per batch of coalesced changes (fswatch.h), for as long
 * as the client keeps its connection. It ends, with a final status, when the sandbox
 * ends (ENDED, with the reason; UNAVAILABLE for a restore, after which it serves on
 * with other files), when the watched directory goes away (NOT_FOUND), or on a failure;
 * or silently when the client closes its connection (the way a client stops a stream,
 * as it stops an AttachCommand). Bounded: at most SBX_WATCH_MAX_PER_SANDBOX watches on
 * one sandbox, SBX_WATCH_MAX_PER_UID of one uid and SBX_WATCH_MAX_TOTAL over the daemon
 * (RESOURCE_EXHAUSTED naming the bound); the directories they follow within the pool's
 * budgets (fswatch.h), a share of the host's inotify limit (struct features). Who may
 * watch: whoever may use the sandbox (its owner, root, those it is shared with), as for
 * ReadFile.
 *
 * Called by rpc.c's dispatch table on the loop; uses fswatch.h, conn.h and the sandbox's
 * end listeners. The daemon's watches and their pool hang from struct sbxd (watches),
 * made at the first and freed with the last. */
#ifndef SBX_RPC_WATCH_H
#define SBX_RPC_WATCH_H

#include "sbx.pb-c.h"

struct conn;

/* The WatchFiles handler: answers req on c (an error at once, or the stream). */
void rpc_watch_files(struct conn *c, const Sbx__V1__Request *req);

#endif
