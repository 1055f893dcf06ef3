/* guard.h: keeps a sandbox's hidden and read-only paths covered when the host changes
 * them.
 *
 * sbx-init covers each such path with a mount when it builds the view. A mount stays
 * with the file it covers: when the host renames a new file over the path (as editors,
 * passwd and credential tools write) the mount goes with the old file, and a path the
 * host creates later was never covered. The guard watches the paths' directories with
 * inotify; when a watched name is created or moved in and is not covered in the
 * sandbox's view, it runs `sbx-init --reapply` in the sandbox's mount namespace (a
 * forked helper enters it with setns, since PID 1 cannot mount once its seccomp filter
 * is loaded), which mounts over it again and kills the sandbox's processes that opened
 * what lay bare (a descriptor outlives a mount). The window between the host's change
 * and the new mount is a few milliseconds; a process polling the path may read it in
 * between.
 * Only sandboxes whose root is the host's / are guarded (their paths are host paths),
 * and only the path's own directory is watched: a directory above it that the host
 * replaces whole is not seen. */
#ifndef SBX_GUARD_H
#define SBX_GUARD_H

#include <stddef.h>

struct sbxd;
struct sandbox;

/* Starts the guard (an inotify descriptor on d's loop). init_path: the sbx-init binary
 * its helpers run. Returns 0 or -errno; the daemon runs without it on failure. */
int guard_start(struct sbxd *d, const char *init_path);

/* Watches the n paths of sb (hide: denied_read; else read-only). */
void guard_add(struct sbxd *d, struct sandbox *sb, char *const *paths, size_t n, int hide);

/* Forgets every path of sb. */
void guard_forget(struct sbxd *d, const struct sandbox *sb);

/* Stops watching; helpers still running finish on their own. */
void guard_stop(struct sbxd *d);

#endif
