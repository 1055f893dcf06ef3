/* uidslot.h: the host uids that sandboxes run as (root mode): SBX_UID_COUNT slots from
 * the daemon's base (its range, reserved host-wide by uidrange.h), each in use by at
 * most one live sandbox, and each belonging for good to the first owner it was given to
 * (recorded in the store), so that what a sandbox leaves on the host owned by its uid (a
 * kept workspace, files in a writable path whose filesystem cannot idmap) stays out of
 * every other owner's sandboxes.
 *
 * One struct uidslots belongs to the sandbox table. Loop thread only; nothing here
 * logs. */
#ifndef SBX_UIDSLOT_H
#define SBX_UIDSLOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct store;
struct uidslots;

/* Slots for the uids base .. base + SBX_UID_COUNT - 1, every one free and never given.
 * Returns 0 or -ENOMEM. */
int uidslot_new(uint32_t base, struct uidslots **ret);

/* Frees u. Accepts NULL; returns NULL. */
struct uidslots *uidslot_free(struct uidslots *u);

/* At start-up, before any allocation: which owner each uid of the range was given to,
 * from st (a uid outside the range is not looked at). Returns 0 or -errno from the
 * store. */
int uidslot_load(struct uidslots *u, struct store *st);

/* A free slot for a sandbox of owner: one of owner's own first, else one never given
 * (bound to owner in st now). Returns the slot (its uid: uidslot_uid), or
 * -EAGAIN when none is left, -EIO when the binding cannot be recorded; err says which. */
int uidslot_alloc(struct uidslots *u, struct store *st, uid_t owner, char *err, size_t errlen);

/* Marks slot in use (a sandbox adopted after a restart keeps its uid). */
void uidslot_take(struct uidslots *u, unsigned slot);

/* Gives slot back (it stays its owner's). A negative slot is none. */
void uidslot_release(struct uidslots *u, int slot);

/* The host uid of slot (also the gid its sandbox runs as). */
uid_t uidslot_uid(const struct uidslots *u, unsigned slot);

/* The slot of the host uid uid, or -1 when uid is not in the range. */
int uidslot_slot_of(const struct uidslots *u, uint32_t uid);

/* 1 when some slot was ever given (loaded from the records, allocated or taken): the
 * records bind uids of the range to owners; 0 when none. */
int uidslot_any_given(const struct uidslots *u);

/* The lowest and highest uid st binds to an owner, whatever the range, in *ret_lo and
 * *ret_hi (both 0 when none): at start-up, before the range is known. Returns 0 or
 * -errno from the store. */
int uidslot_bound_span(struct store *st, uint32_t *ret_lo, uint32_t *ret_hi);

#endif
