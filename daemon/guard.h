/* guard.h: keeps a sandbox's hidden and read-only paths covered when the host changes
 * them.
 *
 * sbx-init covers each such path with a mount when it builds the view. A mount stays
 * with the file it covers: when the host renames a new file over the path (as editors,
 * passwd and credential tools write) the mount goes with the old file, and a path the
 * host creates later was never covered. The guard watches the paths' directories with
 * inotify; when a watched name is created or moved in and is not covered in the
 * sandbox's view, it runs `sbx-init --reapply` (executed first, so that everything it
 * loads comes from the host, then entering the sandbox's mount namespace itself: PID 1
 * cannot mount once its seccomp filter is loaded), which mounts over it again and kills
 * the sandbox's processes that opened what lay bare (a descriptor outlives a mount).
 * The window between the host's change and the new mount is a few milliseconds; a
 * process polling the path may read it in between. One helper runs in a sandbox at a
 * time (two at once race each other's mounts, and one fails): paths that change
 * together are covered one after the other.
 *
 * The credentials of protect_defaults are the same host paths for every sandbox whose
 * root is the host's /: they are watched once and each such sandbox subscribes to them.
 * A sandbox with a root_dir has its paths watched at root_dir + its view path. A path
 * whose directory does not exist yet is watched through its nearest existing ancestor
 * until the missing directories appear. A directory above a path that the host
 * replaces whole (renamed away, another put in its place) is not seen. */
#ifndef SBX_GUARD_H
#define SBX_GUARD_H

#include <stddef.h>

struct sbxd;
struct sandbox_view;
struct policy_view;

/* Starts the guard (an inotify descriptor on d's loop). init_path: the sbx-init binary
 * its helpers run. Returns 0 or -errno; the daemon runs without it on failure. */
int guard_start(struct sbxd *d, const char *init_path);

/* The host paths a sandbox's view shows where its root is no host tree (an image's:
 * its writable paths, bound at the same paths): the guard watches only the paths at or
 * below them. */
struct guard_only {
        char *const *v;
        size_t n;
};

/* Watches the view of the sandbox sv (policy.h; its hidden_shared set is kept
 * referenced) and its policy's denied_write_paths, which are paths of the view below
 * root (canonical; "/" for the host's); with only (NULL: every path), those of them at
 * or below its paths alone. The guard keeps sv (sandbox_view.h: it reads its state and
 * init, and bumps its generation when it mounts) until guard_forget. -ENOSPC when a path
 * could not be watched because the daemon user's fs.inotify.max_user_watches is reached
 * (the others are watched; such a path is hidden now, but not covered again if the host
 * makes or replaces it), -EMFILE when there is no guard (guard_start failed: no inotify
 * instance could be had), else 0. */
int guard_watch(struct sbxd *d, struct sandbox_view *sv, const struct policy_view *view,
                const char *root, char *const *denied_write, size_t n_denied_write,
                const struct guard_only *only);

/* Watches every path of set, the shared credential list (credcache.h), for the sandboxes
 * that keep it hidden: when the list is expanded anew (a new home, say), its new paths
 * are watched for the sandboxes made before too. */
struct pathset;
void guard_share(struct sbxd *d, struct pathset *set);

/* sv is ready, or re-adopted (adopted): the guard covers what lies bare. A change of one
 * of its paths that the guard saw while sv was set up (after init looked at the path,
 * maybe) could not be acted on then, and no later event tells of it: those paths are
 * looked at now. An adopted sandbox's own paths are all looked at (no daemon watched
 * meanwhile), but not the credentials it shares with others or those below its
 * root_dir, which its init hid only where it could read them. */
void guard_ready(struct sbxd *d, struct sandbox_view *sv, int adopted);

/* Forgets every path of the sandbox sv, and sv itself (at the sandbox's end). */
void guard_forget(struct sbxd *d, struct sandbox_view *sv);

/* Stops watching; helpers still running finish on their own. */
void guard_stop(struct sbxd *d);

#endif
