/* offload.h: work that runs off the event loop, on libuv's thread pool, bounded per user.
 *
 * A request whose cost grows with what a sandbox made (a recursive remove of a tree of a
 * million files, a listing of a huge directory) does its slow part here, so that the
 * loop goes on serving every other client meanwhile. Each job belongs to a uid (its
 * caller's). At most SBX_OFFLOAD_MAX_RUNNING jobs run at once, all users together (the
 * threads of libuv's pool they may take: the rest stay for name lookups, checkpoints and
 * disk images), and at most SBX_OFFLOAD_MAX_RUNNING_PER_UID of one uid's; up to
 * SBX_OFFLOAD_MAX_QUEUED_PER_UID more of a uid wait in that uid's queue, first in first
 * out, and the uids with waiting jobs take turns at each free thread. Past that queue a
 * submission is refused (-EAGAIN), and the caller answers RESOURCE_EXHAUSTED.
 *
 * A job may lose its reason to run: its client went away (the owner calls
 * offload_cancel), or what it works on ended (its wanted callback, asked on the loop
 * every SBX_OFFLOAD_CHECK_MS while the job waits or runs, says 0). A cancelled job's
 * work is still called, exactly once, on a worker thread: at once, beside the bounds,
 * when it was still waiting; its work sees offload_cancelled() and only lets go of what
 * it holds (descriptors are closed there, never on the loop: the last one of a file
 * system that was unmounted lazily writes back for seconds when it goes). Then its done
 * callback runs on the loop, always, and the job is its owner's again.
 *
 * Called by the request layer (rpc_files.c) on the loop thread; the state lives in struct
 * sbxd (offload), made at the first job and freed after the last one. No logging. */
#ifndef SBX_OFFLOAD_H
#define SBX_OFFLOAD_H

#include <stdatomic.h>
#include <sys/types.h>
#include <uv.h>

struct sbxd;
struct offload;
struct offload_job;

/* On a worker thread: the job's work. It reads and writes only the job's own memory and
 * what the owner gave it for the purpose, and polls offload_cancelled() often enough to
 * stop within milliseconds. */
typedef void (*offload_work_cb)(struct offload_job *job);
/* On the loop, after the work (or the cancelled work) has returned: the job is the
 * owner's again and may be freed here. */
typedef void (*offload_done_cb)(struct offload_job *job);
/* On the loop: 0 when the job's reason to run has gone (it is then cancelled), 1 when
 * it has not. Must not submit, cancel or free jobs. */
typedef int (*offload_wanted_cb)(struct offload_job *job);

/* One job: embed it in the owner's struct (libuv style) and find that again from its
 * address. The fields are offload.c's. */
struct offload_job {
        uv_work_t work;
        struct offload *o;
        struct offload_user *user;
        offload_work_cb work_cb;
        offload_done_cb done_cb;
        offload_wanted_cb wanted_cb;
        atomic_int cancelled;
        int running;                     /* handed to the thread pool */
        struct offload_job *next, *prev; /* its user's queue, or the running list */
};

/* Queues job as uid's, to run as soon as the bounds allow (perhaps before this returns;
 * its done callback never runs before this returns). wanted may be NULL. Returns 0, or
 * -EAGAIN when uid already has SBX_OFFLOAD_MAX_QUEUED_PER_UID jobs waiting, or -ENOMEM;
 * on failure nothing is called and the job stays the caller's. */
int offload_submit(struct sbxd *d, struct offload_job *job, uid_t uid, offload_work_cb work,
                   offload_done_cb done, offload_wanted_cb wanted);

/* Cancels job (submitted, done not yet called): a waiting job is handed to a thread at
 * once, a running one sees offload_cancelled(). Its done callback follows, later, from
 * the loop, never from inside this call. Idempotent. */
void offload_cancel(struct offload_job *job);

/* 1 once job was cancelled. Any thread. */
int offload_cancelled(struct offload_job *job);

/* How many of d's jobs run and wait (all uids), and how many of uid's, for tests and
 * messages. Any pointer may be NULL. */
void offload_counts(const struct sbxd *d, uid_t uid, unsigned *ret_running, unsigned *ret_waiting,
                    unsigned *ret_uid_running, unsigned *ret_uid_waiting);

#endif
