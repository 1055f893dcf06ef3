/* snapshot.h: a sandbox's files captured as an image of the store (SnapshotSandbox;
 * docs/snapshots.md), the work of one snapshot on a worker thread.
 *
 * The sandbox's processes are frozen (the cgroup freezer: v1 freezer.state, v2
 * cgroup.freeze) while its writable root (an overlayfs upper directory) and its
 * workspace are written as one layer (layerwrite.h) into the store's scratch space;
 * then they are thawed, and the layer is imported as any pulled layer is (layer.h reads
 * it back with every check a registry's layer gets), on top of the sandbox's image:
 * the new image's config is the parent's with the layer's diff_id, a history entry and
 * labels (imageconfig.h: the sandbox, the parent, "workspace inside"), its manifest an
 * OCI manifest of the parent's layers and the new one. It is committed under the refs
 * given (the owner's name, and the caller's when another user took it), as a pull
 * commits. A failure at any step leaves nothing in the store but what an interrupted
 * import leaves (imagestore.h), and the sandbox thawed.
 *
 * Called by rpc_snapshot.c (which fills the job on the loop, from sandbox.c's view of
 * the sandbox). No state beyond a job; any thread. Never logs. */
#ifndef SBX_SNAPSHOT_H
#define SBX_SNAPSHOT_H

#include <stdint.h>
#include <sys/types.h>

#include "digest.h"
#include "layerwrite.h"

struct imagestore;

/* How long the processes may take to freeze (one in uninterruptible sleep delays it):
 * past this the snapshot is refused and they are thawed. */
#define SNAPSHOT_FREEZE_WAIT_MS 2000u

/* The freezer of a sandbox's cgroup, by the paths of its files (the job may outlive
 * the struct cgroup): control is v1's freezer.state or v2's cgroup.freeze, events v2's
 * cgroup.events. control NULL: no cgroup freezer; then, with pidns_ino, the processes of
 * that PID namespace but init (init_pid) are stopped with SIGSTOP (a pidfd each) until
 * every one shows stopped, and continued after: a sandbox without cgroups (a rootless
 * sbxd without delegated ones). Its owner's daemon may signal them all (its user, or the
 * owner of their user namespace). A process stopped before (job control) is left as it
 * was. */
#define SNAPSHOT_MAX_STOPPED 65536u
struct snapshot_freezer {
        char *control;
        char *events;
        int v2;
        dev_t pidns_dev;
        ino_t pidns_ino;
        pid_t init_pid;
        struct snapshot_stopped {
                int pidfd;
                pid_t pid;
        } *stopped; /* the processes the signals stopped */
        size_t n_stopped;
};

struct snapshot_job {
        /* In, set on the loop; the fds and strings are the job's (snapshot_job_clear). */
        struct imagestore *store;
        char parent[DIGEST_STR_BYTES]; /* the sandbox's image (manifest digest), held */
        char *sandbox_id;
        char *policy; /* its effective policy as JSON (pbjson.h), for the config's label */
        /* "UID/NAME": the owner's (the layer's import's), then the caller's when another
         * user took it; both committed, the owner's only when it names no image yet. */
        char *refs[2];
        unsigned n_refs;
        int upper_fd, ws_fd; /* its writable root's upper directory, its workspace */
        enum layerwrite_kind upper_kind; /* which xattrs its overlayfs used */
        struct layerwrite_map uids, gids;
        struct snapshot_freezer freezer;
        uint64_t max_image_bytes; /* the whole image's file data (--max-image-size) */
        /* The owner's snapshots' own layers together (--max-snapshot-bytes-per-uid);
         * owner_prefix is "UID/", the owner's refs'. */
        uint64_t max_snapshot_bytes;
        char owner_prefix[16];
        int64_t now_ms;
        /* Out. */
        int r;
        char err[512];
        char manifest[DIGEST_STR_BYTES];
        uint64_t frozen_ms;  /* how long the processes were frozen */
        size_t signalled;    /* without a cgroup: the processes SIGSTOP stopped */
        uint64_t layer_bytes; /* the new layer's tar */
        unsigned skipped;    /* device nodes, FIFOs, sockets left out */
        char first_skipped[256];
};

/* Runs the snapshot (on a worker thread); stop(ud) is polled between steps (1: give up
 * with -ECANCELED). Sets job->r (0 or -errno: -EFBIG past a bound, -EDQUOT past the
 * owner's snapshot bound, -EEXIST a name of the owner's taken by another user, -EBUSY
 * the processes did not freeze in time, -ESTALE a file changed while it was read) and
 * job->err. */
void snapshot_run(struct snapshot_job *job, int (*stop)(void *ud), void *ud);

/* Closes and frees the job's fds and strings (not the job). */
void snapshot_job_clear(struct snapshot_job *job);

#endif
