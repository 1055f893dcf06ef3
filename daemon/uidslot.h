/* uidslot.h: the host uids that sandboxes run as (root mode): SBX_UID_COUNT slots from
 * SBX_UID_BASE, each in use by at most one live sandbox, and each belonging for good to
 * the first owner it was given to (recorded in the store), so that what a sandbox
 * leaves on the host owned by its uid (a kept workspace, files in a writable path whose
 * filesystem cannot idmap) stays out of every other owner's sandboxes.
 *
 * One struct uidslots belongs to the sandbox table. Loop thread only; nothing here
 * logs. */
#ifndef SBX_UIDSLOT_H
#define SBX_UIDSLOT_H

#include <stddef.h>
#include <sys/types.h>

struct store;
struct uidslots;

/* Every slot free and never given. Returns 0 or -ENOMEM. */
int uidslot_new(struct uidslots **ret);

/* Frees u. Accepts NULL; returns NULL. */
struct uidslots *uidslot_free(struct uidslots *u);

/* At start-up, before any allocation: which owner each uid was given to, from st.
 * Returns 0 or -errno from the store. */
int uidslot_load(struct uidslots *u, struct store *st);

/* A free slot for a sandbox of owner: one of owner's own first, else one never given
 * (bound to owner in st now). Returns the slot (the uid is SBX_UID_BASE + slot), or
 * -EAGAIN when none is left, -EIO when the binding cannot be recorded; err says which. */
int uidslot_alloc(struct uidslots *u, struct store *st, uid_t owner, char *err, size_t errlen);

/* Marks slot in use (a sandbox adopted after a restart keeps its uid). */
void uidslot_take(struct uidslots *u, unsigned slot);

/* Gives slot back (it stays its owner's). A negative slot is none. */
void uidslot_release(struct uidslots *u, int slot);

#endif
