/* warm.h: the warm pool (sbxd --warm N): sandboxes of the default policy set up ahead
 * of any request, so that a create whose setup matches one takes it in about a
 * millisecond instead of setting one up; the same of images (sbxd --warm-image REF=N);
 * and its spares (sbxd --spares N), init helpers
 * already in a cgroup of their own, most with the namespaces and the view's base built,
 * for the creates no warm sandbox matches.
 *
 * The pool owns its warm sandboxes (unrecorded, not findable by id, without deadline or
 * adoption socket, owned by nobody) until one is claimed: then the table owns it. Sits
 * between the table (which calls it) and the lifecycle; it reaches the table only
 * through the callbacks given to warm_new. Loop thread only. */
#ifndef SBX_WARM_H
#define SBX_WARM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "caller.h"

struct sbxd;
struct sandbox;
struct uidslots;
struct warm_pool;

/* What the pool asks of the table that owns it. */
struct warm_owner {
        /* 1 while another sandbox fits under --max-sandboxes (warm ones count). */
        int (*has_room)(void *ud);
        /* A warm sandbox has ended and left the pool. */
        void (*gone)(void *ud);
        void *ud;
};

/* An empty pool; nothing is set up before warm_schedule. Returns 0 or -ENOMEM. */
int warm_new(struct sbxd *d, const struct warm_owner *owner, struct warm_pool **ret);

/* Frees the pool, which must be empty and stopped. Accepts NULL. */
void warm_free(struct warm_pool *p);

/* How many warm sandboxes and spares there are (setting up or ready, unclaimed). */
unsigned warm_count(const struct warm_pool *p);

/* Tops the pool up delay_ms from now (unless a top-up is due sooner, or the daemon has
 * no --warm, or the pool was stopped). */
void warm_schedule(struct warm_pool *p, uint64_t delay_ms);

/* Stops topping the pool up, for good (shutdown). */
void warm_stop(struct warm_pool *p);

/* Ends every warm sandbox (shutdown, detach). */
void warm_end_all(struct warm_pool *p);

/* Ends one sandbox of the pool (a spare first) to make room for a client's, if there is
 * one. */
void warm_give_up_one(struct warm_pool *p);

/* A client's image create found no free block of ids (root mode, sbimage.h): ends a
 * warm sandbox of an image, whose block a retry can take once it has gone. 1 when one
 * was ended or is ending already, 0 when the pool holds no block. */
int warm_give_up_block(struct warm_pool *p);

/* An image was pulled: a --warm-image whose name sbxd's user had no image of is looked
 * for again. */
void warm_images_changed(struct warm_pool *p);

/* How many of the pool's sandboxes (unclaimed: nobody's) hold the image whose manifest
 * digest is digest in the store. */
unsigned warm_image_holds(const struct warm_pool *p, const char *digest);

/* 1 when dev:ino is the PID namespace of a warm sandbox (sbxtab_is_sandbox_pidns). */
int warm_has_pidns(const struct warm_pool *p, dev_t dev, ino_t ino);

/* Looks for a ready warm sandbox whose setup equals the one of the effective request
 * packed (packed_len bytes, copied): found, it becomes the client's sandbox id (its
 * state directory renamed, a uid from slots in root mode, its record written, its
 * limits, deadline and owner the request's) and leaves the pool; the caller takes it
 * into the table and then calls warm_finish_claim. Returns 1 with *ret set, 0 when
 * none matches or the claim could not be made (the request goes on cold), or -errno
 * with err when the record cannot be written (the request fails). */
int warm_claim(struct warm_pool *p, struct uidslots *slots, const char *id, const uint8_t *packed,
               size_t packed_len, const struct caller *caller, struct sandbox **ret, char *err,
               size_t errlen);

/* A spare for the request packed (the effective one, packed_len bytes, copied) for
 * owner: one built ahead whose base the request fits, else a plain one (warm.c). It
 * leaves the pool with the client's id, workspace path and spec, and the caller goes
 * on as with a sandbox it allocated (sandbox_alloc: the record, the table,
 * sandbox_start), or gives it back to warm_drop_spare when that fails before
 * sandbox_start. NULL when there is none to take (or no memory): the create goes on
 * cold. */
struct sandbox *warm_take_spare(struct warm_pool *p, const char *id, const uint8_t *packed,
                                size_t packed_len, uid_t owner);

/* Ends a spare warm_take_spare gave, whose create failed before sandbox_start. */
void warm_drop_spare(struct warm_pool *p, struct sandbox *sb);

/* The second half of a claim, once sb is in the table: init takes the id as host name
 * and the adoption socket (Claim), the deadline is armed and cb answers at once. When
 * the Claim cannot be sent the sandbox fails and cb answers once it has ended. */
void warm_finish_claim(struct warm_pool *p, struct sandbox *sb,
                       void (*cb)(void *ud, struct sandbox *sb, int err, const char *msg),
                       void *ud);

#endif
