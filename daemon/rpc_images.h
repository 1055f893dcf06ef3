/* rpc_images.h: the handlers of the image requests: PullImage in rpc_pull.c, the others
 * in rpc_images.c (PullImage, ListImages, RemoveImage,
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
 * After each pull the store is brought within sbxd --image-cache-size and its bound in
 * entries (images_fit: least recently used images no sandbox holds go, never the one
 * just pulled), and what removals (or a failed import) left is deleted off the loop
 * (imagestore_collect, one job at a time). A registry pull does not download a layer
 * the store holds (imagestore_blob_layer). An image's count of sandboxes is of the
 * caller's (own or shared with them), never another user's: content is shared.
 *
 * Called by rpc_dispatch only, on the event loop. The pulls' state (struct rpc_pulls,
 * d->pulls) is made at the first pull and freed once none is under way, so an idle
 * daemon holds nothing here. Logs one line per pull. */
#ifndef SBX_RPC_IMAGES_H
#define SBX_RPC_IMAGES_H

#include <stdint.h>
#include <sys/types.h>

#include "sbx.pb-c.h"

struct conn;
struct imageconfig;
struct imagestore_image;

void rpc_images_pull(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_list(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_remove(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_inspect(struct conn *c, const Sbx__V1__Request *req);
void rpc_images_prune(struct conn *c, const Sbx__V1__Request *req);

/* For the handlers of both files: 1 when ref is one of uid's ("UID/..."); answers rid of
 * c with an ImageInfo of img for uid (its names: uid's only; its sandboxes: those the
 * caller of c may use; its config when cfg is given; downloaded_bytes when not 0). */
int rpc_images_ref_of(const char *ref, uid_t uid);
void rpc_images_answer(struct conn *c, uint64_t rid, const struct imagestore_image *img, uid_t uid,
                       const struct imageconfig *cfg, uint64_t downloaded);

#endif
