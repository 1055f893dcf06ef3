/* trash.h: deleting what ended sandboxes leave on the host (their state directories and
 * workspaces), in a child process so that a workspace of a million files never stalls
 * the event loop.
 *
 * Called on the loop by the sandbox modules (a sandbox's end, start-up recovery) and by
 * main at start-up. Nothing here fails the caller: what cannot be removed is logged
 * and left. */
#ifndef SBX_TRASH_H
#define SBX_TRASH_H

#include <stdint.h>

struct sbxd;

/* Deletes the tree at path (never following symlinks, never leaving its filesystem) in
 * a child process reaped by the loop; synchronously when no child can be started. The
 * tree must no longer be in use (its sandbox is gone). path is copied. */
void trash_remove_later(struct sbxd *d, const char *path);

/* Removes what sandbox id left in its state directory (STATE/sandboxes/ID, the parent
 * of workspace): its disk (disk_release, given mount_fd, the daemon's hold of the
 * workspace's image, taken over; -1: none), the adoption socket, the workspace unless
 * keep (renamed into STATE/trash at once, or deleted here when it cannot be), an
 * image's writable root (STATE/sandboxes/ID/root, never kept: to the trash, deleted
 * off the loop), and the directory itself when it is then empty. Returns the trash path still to delete with
 * trash_remove_later (the caller owns and frees it), or NULL when there is none. */
char *trash_sandbox_dir(struct sbxd *d, const char *id, const char *workspace, int mount_fd,
                        int keep);

/* trash_sandbox_dir, and the deletion of what it moved to the trash started at once. */
void trash_sandbox_dir_now(struct sbxd *d, const char *id, const char *workspace, int mount_fd,
                           int keep);

/* At start-up: creates STATE/trash and starts deleting what an earlier daemon left
 * there. */
void trash_empty(struct sbxd *d);

/* At shutdown, once every sandbox has ended: the deletions still running get grace_ms
 * to finish (the loop waits for them), then are stopped (their rm killed and reaped);
 * what they left stays in STATE/trash for trash_empty at the next start. A huge
 * workspace does not hold the daemon's exit for as long as rm takes. */
void trash_stop(struct sbxd *d, uint64_t grace_ms);

#endif
