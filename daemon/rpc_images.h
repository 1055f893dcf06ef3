/* rpc_images.h: the handlers of the image requests (PullImage, ListImages, RemoveImage,
 * InspectImage, PruneImages; docs/images.md).
 *
 * Every image a user sees is one of their own (images.h): a name is the store ref
 * "UID/NAME", a digest names an image only for a user with a ref to it, and another
 * user's image is answered NOT_FOUND word for word as a name nobody used.
 *
 * A pull (a registry reference) or an import (a local source the handler opens with the
 * caller's own rights, hostpath.h) runs on libuv's thread pool: the registry client and
 * the store's import (registry.h, imageimport.h) block for as long as the network and
 * the disk take. Its progress (bytes per layer) travels back to the loop through a
 * uv_async and is streamed to every client waiting for it whose connection has room
 * (progress is dropped, never queued, for a congested one). A second PullImage of the
 * same name by the same user while one runs waits for that one's result instead of
 * downloading again; a client that goes away drops its interest, and a pull nobody waits
 * for any more is cancelled. Pulls of different users never join: one may hold
 * credentials the other has not. Bounds: SBX_IMAGE_MAX_PULLS over the daemon,
 * SBX_IMAGE_MAX_PULLS_PER_UID per user (sbx_limits.h); past them RESOURCE_EXHAUSTED.
 * After each pull the store is brought within sbxd --image-cache-size (imagestore_fit:
 * least recently used images no sandbox holds go, never the one just pulled), and what
 * removals left is deleted off the loop (imagestore_collect, one job at a time).
 *
 * Called by rpc_dispatch only, on the event loop. The state (struct image_service,
 * d->image_service) is made at the first pull or removal and freed once nothing is under
 * way, so an idle daemon holds nothing here. Logs one line per pull. */
#ifndef SBX_RPC_IMAGES_H
#define SBX_RPC_IMAGES_H

#include "sbx.pb-c.h"

struct conn;

void rpc_images_pull(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_list(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_remove(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_inspect(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_prune(struct conn *c, const Sbx__V1__Request *req);

#endif
