/* rpc_export.h: the handler of ExportImage (docs/snapshots.md, imageexport.h).
 *
 * The caller's image (images.h: their names, or a digest they have) is held in the store
 * while its archive is written off the loop (offload.h, the caller's job) into the
 * store's scratch space, then streamed as ExportChunk responses, no more at once than
 * the connection takes (conn_congested; on_drained goes on), and answered with its
 * ImageInfo. A client that goes away cancels it; the scratch file is removed at the end
 * either way. Called by rpc_dispatch only, on the event loop. Logs one line per export. */
#ifndef SBX_RPC_EXPORT_H
#define SBX_RPC_EXPORT_H

#include "sbx.pb-c.h"

struct conn;

void rpc_export_image(struct conn *c, const Sbx__V1__Request *req);

#endif
