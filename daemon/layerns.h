/* layerns.h: a rootless daemon's image layers, unpacked and deleted in a user namespace
 * that maps its user's subordinate ids, so that the layers' files keep the image's
 * owners (as subordinate ids on disk) and a sandbox of the image, which maps the same
 * ids (sbimage.h), sees them as the image gives them; podman's `podman unshare`.
 *
 * The work runs in a helper process: the daemon's own binary, in the layer helper mode
 * (`sbxd --layer-helper`, layerns_helper_main), started through
 * `sbx-init --subids-exec SUBUID SUBGID N PROGRAM ...`, which enters the namespace as
 * the sandboxes' stage 0 does (daemon/init/ns.c: newuidmap and newgidmap map ids 1 .. N
 * to the ranges, 0 to the daemon's user) and executes the daemon's binary there. Why a
 * process of its own: unshare(CLONE_NEWUSER) is refused to a threaded process (the
 * daemon, whose worker threads unpack), and a child forked from one may run no library
 * code (docs STYLE); layer_unpack runs in the helper unchanged, every check of a hostile
 * layer with it, on the descriptors the daemon opened (the layer's blob, the empty
 * directory), so the helper opens no path of its own. Whoever runs the helper gains
 * nothing: its rights are the daemon's user's and its subordinate ids', which are that
 * user's own.
 *
 * The store records how its layers were unpacked (layerns_check_store): a store made
 * one way is refused the other way, since a sandbox would see wrong owners.
 *
 * Called by imagestore.c (its import on worker threads, its removals), by images.c
 * (the ids), and by main() (the helper's mode). Every function may be called from any
 * thread; nothing here logs but the helper. */
#ifndef SBX_LAYERNS_H
#define SBX_LAYERNS_H

#include <stddef.h>
#include <stdint.h>

#include "layer.h"
#include "layerwrite.h"

/* The namespace's ids: n_ids 0 (or no init_path) for none, and then every function
 * below does its work in this process, as layer.h's do. */
struct layerns {
        const char *init_path; /* sbx-init, which enters the namespace */
        uint32_t subuid, subgid, n_ids;
};

/* layer_unpack (layer.h) of fd into dir_fd with o, in the namespace: every id from 1 to
 * ns->n_ids of the tar is given as the subordinate id, an id above it stays the
 * daemon's user's (root inside; o->keep_owners and o->max_id are set here). Also
 * *ret_disk, the tree's bytes on disk (layer_disk_usage, read in the namespace, where
 * every directory opens). Errors as layer_unpack's; -EIO (err says so) when the helper
 * could not run or did not answer. */
int layerns_unpack(const struct layerns *ns, int fd, int dir_fd, const struct layer_opts *o,
                   struct layer_result *ret, uint64_t *ret_disk, char *err, size_t errlen);

/* A snapshot's capture (snapshot.h) or a layer's export (imageexport.h) in the
 * namespace: the trees of upper_fd (of kind) and ws_fd (under "workspace"; -1: none)
 * written by layerwrite.h into out_fd with o (its bounds and no_digest), where the
 * daemon's user may read what the subordinate ids own; inside, the files have the
 * image's ids (o's maps are not used there: the identity up to ns->n_ids). Without a
 * namespace, in this process with o. o->written is told once, at the end, when the
 * helper wrote it. 0 or -errno as layerwrite's (err set); -EIO when the helper could not
 * run. */
int layerns_capture(const struct layerns *ns, int upper_fd, int ws_fd, enum layerwrite_kind kind,
                    int out_fd, const struct layerwrite_opts *o, struct layerwrite_result *res,
                    char *err, size_t errlen);

/* layer_empty_dir and layer_remove_tree, in the namespace. */
int layerns_empty_dir(const struct layerns *ns, int dir_fd);
int layerns_remove_tree(const struct layerns *ns, int parent_fd, const char *name);

/* At the store's open (root_fd, its directory; root, its path for messages): compares
 * how the store's layers were unpacked (the file ROOT/owners: "tar" with the tar's
 * owners, a root daemon's; "own" as the daemon's user's; "subids SUBUID SUBGID N") with
 * how this daemon unpacks them (keep_owners, ns), and writes it when the store has no
 * layers yet. A store of layers without the file is one of an sbxd before it ("tar"
 * for a root daemon, "own" for a rootless one). 0, or -ESTALE when they differ (err
 * says how, and how to remove the store), or -errno. */
int layerns_check_store(int root_fd, const char *root, const struct layerns *ns, int keep_owners,
                        char *err, size_t errlen);

/* The helper's mode (sbxd's main, argv[1] "--layer-helper"), in the namespace:
 *   --layer-helper unpack MAX_BYTES MAX_ENTRIES MAX_ID   fd 0 the blob, fd 3 the dir
 *   --layer-helper empty                                 fd 3 the dir
 *   --layer-helper remove NAME                           fd 3 the parent
 * Answers on fd 1 (a pipe of the daemon's) with one reply and returns 0; 2 for bad
 * arguments or descriptors (nothing done). */
int layerns_helper_main(int argc, char **argv);

#endif
