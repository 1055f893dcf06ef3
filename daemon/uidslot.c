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
        uint8_t *live;   /* SBX_UID_COUNT bits: in use by a live sandbox */
        uint32_t *owner; /* per slot: 0 never given, owner uid + 1, or SLOT_RETIRED */
        unsigned seen;   /* every slot at or above is unused and never given */
};

int uidslot_new(struct uidslots **ret) {
        struct uidslots *u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
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

static int load_owner(uint32_t run_uid, int64_t owner, void *ud) {
        struct uidslots *u = ud;
        unsigned i;

        if (run_uid < SBX_UID_BASE || run_uid - SBX_UID_BASE >= SBX_UID_COUNT)
                return 0;
        i = run_uid - SBX_UID_BASE;
        u->owner[i] = owner < 0 || owner >= UINT32_MAX ? SLOT_RETIRED : (uint32_t)owner + 1;
        if (i >= u->seen)
                u->seen = i + 1;
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
        r = store_uid_bind(st, SBX_UID_BASE + fresh, (uint32_t)owner);
        if (r < 0) {
                snprintf(err, errlen, "cannot record the owner of sandbox uid %u: %s",
                         SBX_UID_BASE + fresh, store_last_error(st));
                return -EIO;
        }
        u->owner[fresh] = (uint32_t)owner + 1;
        uidslot_take(u, fresh);
        return (int)fresh;
}
