/* fswatch.h: one file watch (WatchFiles): the changes under a directory of a sandbox's
 * view, seen through inotify and coalesced per path.
 *
 * A watch owns an inotify instance (polled on the loop), one inotify watch per directory
 * it follows (the directory and, when recursive, every directory below it, new ones as
 * they appear), a table of those directories' paths as the sandbox sees them, and the
 * changes pending since its last batch. Every directory is opened through files.h
 * (files_watch_dir: openat2 inside the sandbox's root, as the sandbox user, hidden
 * paths not found) and watched through /proc/self/fd of that descriptor, so no path
 * outside the view is ever watched.
 *
 * Watches belong to a pool (one per daemon) that shares two things between them:
 *   - the budget of directories: the daemon user's fs.inotify.max_user_watches is the
 *     host's, and the guard needs it to keep hidden paths covered, so the pool's watches
 *     follow at most max_dirs directories together and one uid's at most
 *     max_dirs_per_user (fswatch_budget: a share of the host's limit); a directory
 *     past either is not watched and the batch says overflow, naming the bound;
 *   - the walk: directories still to be watched are taken one at a time, round robin
 *     over the uids with a walk to do, then over each uid's watches, from one idle
 *     handle (that of a watch of the pool, "the carrier"), at most SBX_WATCH_WALK_SLICE
 *     directories, SBX_WATCH_WALK_SLICE_ENTRIES entries and SBX_WATCH_WALK_SLICE_US a
 *     loop turn: a big tree never holds the loop, and one user's many walks do not
 *     starve another's. Handling events draws on the same budget of the turn: events
 *     that cost much (a rename below thousands of watched directories rewrites their
 *     paths) wait for the next turn rather than hold this one.
 *
 * Coalescing (fswatch_pending, below): changes are kept per path for coalesce_ms from
 * the first one, then handed over as one batch, in the order each path first changed:
 *   created, then modified         -> created
 *   created, then deleted          -> nothing
 *   modified, then modified        -> modified
 *   modified, then deleted         -> deleted
 *   deleted, then created          -> modified (the path exists again, its content new)
 *   renamed A->B, then modified B  -> renamed A->B, then modified B
 *   renamed A->B, then deleted B   -> deleted A (as if A had been deleted)
 *   created A, then renamed A->B   -> created B (with whatever was pending below A/)
 *   renamed A->B, then B->C        -> renamed A->C (C == A: modified A)
 *   anything at B, then renamed A->B -> renamed A->B (B was replaced)
 * A rename from outside the watched tree is "created", one out of it "deleted" (as is a
 * rename whose two halves inotify reports in different reads). New directories are listed
 * as they get their watch, and what is already in them reported created, so nothing made
 * in a new directory before its watch is missed. Past SBX_WATCH_MAX_PENDING paths in one
 * batch, or SBX_WATCH_MAX_DIRS directories, or when the kernel's queue overflows, the
 * batch says overflow with a reason, and its events are dropped: the client re-lists.
 *
 * Called by rpc_watch.c on the loop thread; calls files.h. No logging. */
#ifndef SBX_FSWATCH_H
#define SBX_FSWATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "sbx.pb-c.h"

struct sandbox;
struct fswatch;
struct fswatch_pool;

/* One change, as handed over: paths as the sandbox sees them. */
struct fswatch_event {
        Sbx__V1__FileEventKind kind;
        const char *path;
        const char *old_path; /* RENAMED: where it was; else NULL */
        int is_dir;
};

/* What a watch tells its owner (ud is fswatch_start's), on the loop. */
struct fswatch_ops {
        /* Every directory is watched (once, before any batch). */
        void (*ready)(void *ud);
        /* A batch: n events (n may be 0 with an overflow), overflow NULL or why changes
         * were lost. The events are valid during the call. */
        void (*batch)(void *ud, const struct fswatch_event *ev, size_t n, const char *overflow);
        /* 1 when the owner cannot take a batch now (its connection is congested): the
         * changes keep coalescing until fswatch_resume. */
        int (*congested)(void *ud);
        /* The watch cannot go on (r -errno, msg why: the watched directory went away,
         * -ENOENT): the owner frees it (fswatch_free), from this call or later. */
        void (*failed)(void *ud, int r, const char *msg);
};

/* The budget of a daemon's pool from host_watches, the host's fs.inotify.max_user_watches
 * (0, unknown: 8192, the kernel's least): 1/SBX_WATCH_HOST_SHARE of it, at most
 * SBX_WATCH_MAX_DIRS_TOTAL, and 1/SBX_WATCH_UID_SHARE of that for one uid. */
void fswatch_budget(uint64_t host_watches, size_t *ret_max_dirs, size_t *ret_max_dirs_per_user);

/* A pool of watches on loop (see above); NULL out of memory. */
struct fswatch_pool *fswatch_pool_new(uv_loop_t *loop, size_t max_dirs, size_t max_dirs_per_user);
/* Frees a pool none of whose watches is left (fswatch_free lets go of it at once).
 * Accepts NULL. */
void fswatch_pool_free(struct fswatch_pool *pool);
/* 1 when the pool has no watch. */
int fswatch_pool_empty(const struct fswatch_pool *pool);

/* Starts watching, for uid, the directory path (as ReadFile resolves it) of sb, every
 * directory below it with recursive, coalescing over coalesce_ms. ops (static storage)
 * and ud are the owner's. On success *ret is the watch; ready is called once the walk is
 * done (from a later loop turn). On failure -errno and a message in err (errlen bytes):
 * files_watch_dir's errors, -EMFILE when no inotify instance can be had, -ENOSPC when
 * uid's or the pool's budget of directories is spent. */
int fswatch_start(struct fswatch_pool *pool, uid_t uid, struct sandbox *sb, const char *path,
                  int recursive, uint32_t coalesce_ms, const struct fswatch_ops *ops, void *ud,
                  struct fswatch **ret, char *err, size_t errlen);

/* The owner's connection has room again: a batch held back goes now. */
void fswatch_resume(struct fswatch *w);

/* Stops the watch and frees it (its handles close on the loop; nothing is called after
 * this; its directories leave the pool's budget at once). Accepts NULL. The owner frees a sandbox's watches before the sandbox goes
 * (rpc_watch.c does it when the sandbox begins to end). */
void fswatch_free(struct fswatch *w);

/* ---- the coalescer (the rules above), on its own for tests ---------------------------- */

struct fswatch_entry;

/* The changes pending for one batch. Zero it, then set max (the most paths). */
struct fswatch_pending {
        size_t max;
        size_t n;
        struct fswatch_entry **buckets; /* n_buckets, made at the first change */
        size_t n_buckets;
        struct fswatch_entry *head, *tail; /* in the order each path first changed */
        char overflow[256];                /* non-empty: changes were lost */
};

/* Records one change (old_path: RENAMED's source, else NULL). Past max paths, or out of
 * memory, the batch overflows instead (fswatch_pending_overflow). */
void fswatch_pending_add(struct fswatch_pending *p, Sbx__V1__FileEventKind kind, const char *path,
                         const char *old_path, int is_dir);
/* Marks the batch overflowed (reason, printf style), dropping what it held. */
void fswatch_pending_overflow(struct fswatch_pending *p, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* Hands the batch to fn in at most `per` events a call (fn is called at least once when
 * the batch overflowed or holds anything, with the overflow reason on its first call),
 * then empties it. -ENOMEM when the array could not be made (the batch is emptied,
 * marked overflowed). */
int fswatch_pending_drain(struct fswatch_pending *p, size_t per,
                          void (*fn)(void *ud, const struct fswatch_event *ev, size_t n,
                                     const char *overflow),
                          void *ud);
/* 1 when there is nothing to hand over. */
int fswatch_pending_empty(const struct fswatch_pending *p);
/* Frees what p holds and zeroes it but for max. */
void fswatch_pending_clear(struct fswatch_pending *p);

#endif
