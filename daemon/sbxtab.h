/* sbxtab.h: the sandbox table: every live sandbox by id, the checks a creation passes
 * before a sandbox exists (shutting down, the id, the per-uid quota, the daemon's
 * maximum), and what is done to all sandboxes at once (the periodic sweep, shutdown,
 * leaving them to the next daemon).
 *
 * Owns the sandboxes that clients can name (the warm pool owns the others, warm.h), the
 * uid slots (uidslot.h) and the per-uid quota counts (quota.h). Called by rpc, server
 * and main on the loop thread; reaches the sandboxes through the lifecycle's verbs
 * (sandbox_int.h) and learns of each one's end through the callback it gives it. */
#ifndef SBX_SBXTAB_H
#define SBX_SBXTAB_H

#include <stddef.h>
#include <sys/types.h>

#include "caller.h"
#include "sbx.pb-c.h"

struct sbxd;
struct sbxtab;
struct sandbox;

/* An empty table (and an empty warm pool) for d. Returns 0 or -ENOMEM. */
int sbxtab_new(struct sbxd *d, struct sbxtab **ret);

/* Frees the table; every sandbox must have ended. Accepts NULL. */
void sbxtab_free(struct sbxtab *t);

/* The live sandbox named id, or NULL. */
struct sandbox *sbxtab_find(struct sbxtab *t, const char *id);

/* How many live sandboxes clients own (warm ones not counted). */
unsigned sbxtab_count(const struct sbxtab *t);

/* 1 when dev:ino (of a /proc/PID/ns/pid) is the PID namespace of one of the live
 * sandboxes, warm ones included: that process runs inside a sandbox. */
int sbxtab_is_sandbox_pidns(const struct sbxtab *t, dev_t dev, ino_t ino);

/* Calls cb for each live sandbox (not the warm ones); stops early when cb returns
 * non-zero, and returns that. cb may end the sandbox it is given. */
int sbxtab_foreach(struct sbxtab *t, int (*cb)(struct sandbox *sb, void *ud), void *ud);

/* Starts creating a sandbox from req for caller: a warm one of the same setup is
 * claimed when there is one, else a new one is made. Returns 0 when cb will be called
 * later (sometimes before this returns, for a claim), or -errno with a one-line reason
 * in err (cb is then never called): -EINVAL bad request, -EEXIST the id was used,
 * -EAGAIN a quota or the daemon's sandbox limit, -ESHUTDOWN the daemon is stopping. */
int sbxtab_create(struct sbxd *d, const Sbx__V1__CreateSandbox *req, const struct caller *caller,
                   void (*cb)(void *ud, struct sandbox *sb, int err, const char *msg), void *ud,
                   char *err, size_t errlen);

/* Starts restoring sandbox old (ready, not being restored) from image, a name or digest
 * of caller's that old's owner has too: a new sandbox of old's effective policy (judged
 * again for caller) is set up from it under a directory of its own, unrecorded and not
 * findable; once ready it takes old's place (its state directory, record, deadline, idle
 * limit and id) and old ends, unrecorded (its commands end as killed). A failure leaves
 * old as it was. Returns 0 when cb will be called (perhaps before this returns; sb the
 * restored sandbox, or NULL with err and a message), or -errno with a one-line reason
 * in err: -EINVAL no image, -ENOENT no such image of caller's and the owner's, -EAGAIN
 * old is not ready yet or being restored, -ENODEV old is ending, -ESHUTDOWN. */
int sbxtab_restore(struct sbxd *d, struct sandbox *old, const char *image,
                   const struct caller *caller,
                   void (*cb)(void *ud, struct sandbox *sb, int err, const char *msg), void *ud,
                   char *err, size_t errlen);

/* Takes sb, adopted from a previous daemon (recover.c), into the table: findable by id
 * and counted against its owner's quota. */
void sbxtab_adopt(struct sbxtab *t, struct sandbox *sb);

/* The uid slots (recover.c marks those of adopted sandboxes, and loads the owners). */
struct uidslots *sbxtab_uidslots(struct sbxtab *t);

/* The periodic sweep behind the precise timers: ends sandboxes past their deadline or
 * idle limit (should a timer have been missed) and, at most hourly, prunes records of
 * sandboxes that ended more than the retention period ago. Called by main's timer. */
void sbxtab_sweep(struct sbxtab *t);

/* Leaves every ready sandbox running for the next daemon to adopt (the others end);
 * calls done once the table and the pool are empty. For --keep-sandboxes. */
void sbxtab_detach_all(struct sbxtab *t, void (*done)(void *ud), void *ud);

/* Ends every sandbox with reason "shutdown"; calls done once the last has ended. */
void sbxtab_shutdown(struct sbxtab *t, void (*done)(void *ud), void *ud);

/* How many of the warm pool's sandboxes, nobody's until claimed, hold the image of
 * manifest digest: its users are the others (ImageInfo.sandboxes, prune). 0 when t is
 * NULL. */
unsigned sbxtab_pool_holds(const struct sbxtab *t, const char *digest);

/* An image was pulled: the warm pool looks again for a --warm-image it had none of. */
void sbxtab_images_changed(struct sbxtab *t);

/* Starts keeping the daemon's --warm sandboxes set up (after recovery, once listening). */
void sbxtab_warm_start(struct sbxtab *t);

#endif
