/* sbsnap.h: what a snapshot (snapshot.h) takes from its sandbox, on the loop: its image's
 * digest, its writable root's upper directory and its workspace opened (on the host, or
 * in its disk image's filesystem), the map of its files' host ids to the image's, and
 * its cgroup's freezer; and the hold on its directory, so that an end meanwhile leaves
 * the files in place until the snapshot has read them (sandbox_dir_hold).
 *
 * Called by rpc_snapshot.c. Loop thread. Never logs. */
#ifndef SBX_SBSNAP_H
#define SBX_SBSNAP_H

#include <stddef.h>
#include <sys/types.h>

#include "snapshot.h"

struct sandbox;

/* Fills job's sandbox part from sb and holds sb's directory; its refs: name (NULL:
 * "localhost/ID:UNIXMS") as sb's owner's, and as caller's too when that is another user
 * (one a sandbox is shared with). 0, or -errno with err: -EINVAL a malformed name,
 * -ENOSYS (UNIMPLEMENTED) a sandbox of the host's root, a tmpfs disk, no cgroup and no
 * known PID namespace. On
 * failure what was filled is the caller's to clear (snapshot_job_clear). */
int sbsnap_begin(struct sandbox *sb, uid_t caller, const char *name, struct snapshot_job *job,
                 char *err, size_t errlen);

/* The snapshot has read sb's files: its directory is let go. */
void sbsnap_end(struct sandbox *sb);

#endif
