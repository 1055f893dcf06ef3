/* uidslot.c: host uids for sandboxes, bound to their first owner for good; see
 * uidslot.h. A bit per slot says it is in use; a word per slot says whose it is. */
#include "uidslot.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sbx_limits.h"
#include "store.h"

/* A slot whose recorded owner is not a valid uid: never given again. */
#define SLOT_RETIRED UINT32_MAX

struct uidslots {
        uint32_t base;   /* the uid of slot 0 */
        uint8_t *live;   /* SBX_UID_COUNT bits: in use by a live sandbox */
        uint32_t *owner; /* per slot: 0 never given, owner uid + 1, or SLOT_RETIRED */
        unsigned seen;   /* every slot at or above is unused and never given */
};

int uidslot_new(uint32_t base, struct uidslots **ret) {
        struct uidslots *u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        u->base = base;
        u->live = calloc(SBX_UID_COUNT / 8, 1);
        u->owner = calloc(SBX_UID_COUNT, sizeof(*u->owner));
        if (!u->live || !u->owner) {
                uidslot_free(u);
                return -ENOMEM;
        }
        *ret = u;
        return 0;
}

struct uidslots *uidslot_free(struct uidslots *u) {
        if (u) {
                free(u->live);
                free(u->owner);
                free(u);
        }
        return NULL;
}

static int slot_live(const struct uidslots *u, unsigned i) {
        return u->live[i / 8] & (1u << (i % 8));
}

void uidslot_take(struct uidslots *u, unsigned i) {
        u->live[i / 8] |= (uint8_t)(1u << (i % 8));
        if (i >= u->seen)
                u->seen = i + 1;
}

void uidslot_release(struct uidslots *u, int slot) {
        if (slot >= 0)
                u->live[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
}

uid_t uidslot_uid(const struct uidslots *u, unsigned slot) {
        return (uid_t)(u->base + slot);
}

int uidslot_slot_of(const struct uidslots *u, uint32_t uid) {
        return uid >= u->base && uid - u->base < SBX_UID_COUNT ? (int)(uid - u->base) : -1;
}

int uidslot_any_given(const struct uidslots *u) {
        return u->seen > 0;
}

static int load_owner(uint32_t run_uid, int64_t owner, void *ud) {
        struct uidslots *u = ud;
        int i = uidslot_slot_of(u, run_uid);

        if (i < 0)
                return 0;
        u->owner[i] = owner < 0 || owner >= UINT32_MAX ? SLOT_RETIRED : (uint32_t)owner + 1;
        if ((unsigned)i >= u->seen)
                u->seen = (unsigned)i + 1;
        return 0;
}

struct span {
        uint32_t lo, hi;
};

static int widen_span(uint32_t run_uid, int64_t owner, void *ud) {
        struct span *s = ud;

        if (s->lo == 0 || run_uid < s->lo)
                s->lo = run_uid;
        if (run_uid > s->hi)
                s->hi = run_uid;
        return 0;
}

int uidslot_bound_span(struct store *st, uint32_t *ret_lo, uint32_t *ret_hi) {
        struct span s = {0, 0};
        int r = store_uid_owners(st, widen_span, &s);

        if (r < 0)
                return r;
        *ret_lo = s.lo;
        *ret_hi = s.hi;
        return 0;
}

int uidslot_load(struct uidslots *u, struct store *st) {
        return store_uid_owners(st, load_owner, u);
}

int uidslot_alloc(struct uidslots *u, struct store *st, uid_t owner, char *err, size_t errlen) {
        unsigned i, fresh = SBX_UID_COUNT;
        int r;

        for (i = 0; i < u->seen; i++)
                if (!slot_live(u, i)) {
                        if (u->owner[i] == (uint32_t)owner + 1) {
                                uidslot_take(u, i);
                                return (int)i;
                        }
                        if (u->owner[i] == 0 && fresh == SBX_UID_COUNT)
                                fresh = i;
                }
        if (fresh == SBX_UID_COUNT && u->seen < SBX_UID_COUNT)
                fresh = u->seen;
        if (fresh == SBX_UID_COUNT) {
                snprintf(err, errlen,
                         "no sandbox uid is left for uid %u (each of the %u uids "
                         "belongs to one owner for good); end some sandboxes",
                         (unsigned)owner, SBX_UID_COUNT);
                return -EAGAIN;
        }
        r = store_uid_bind(st, u->base + fresh, (uint32_t)owner);
        if (r < 0) {
                snprintf(err, errlen, "cannot record the owner of sandbox uid %u: %s",
                         u->base + fresh, store_last_error(st));
                return -EIO;
        }
        u->owner[fresh] = (uint32_t)owner + 1;
        uidslot_take(u, fresh);
        return (int)fresh;
}
