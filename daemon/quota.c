/* quota.c: per-uid counts of sandboxes and commands; see quota.h.
 *
 * A small array of counters, one per uid that ever created a sandbox or ran a command
 * (a host has few): looked up by a linear scan, never shrunk, so that dropping never
 * allocates and a counter once made is always there to drop from. */
#include "quota.h"

#include <errno.h>
#include <stdlib.h>

struct quota_uid {
        uid_t uid;
        unsigned n[QUOTA_N];
};

struct quota {
        struct quota_uid *v;
        size_t n, cap;
};

int quota_new(struct quota **ret) {
        struct quota *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *ret = q;
        return 0;
}

struct quota *quota_free(struct quota *q) {
        if (q) {
                free(q->v);
                free(q);
        }
        return NULL;
}

static struct quota_uid *find(const struct quota *q, uid_t uid) {
        size_t i;
        for (i = 0; i < q->n; i++)
                if (q->v[i].uid == uid)
                        return &q->v[i];
        return NULL;
}

/* uid's counter, made when missing; NULL when out of memory. */
static struct quota_uid *get(struct quota *q, uid_t uid) {
        struct quota_uid *u = find(q, uid);
        if (u)
                return u;
        if (q->n == q->cap) {
                size_t nc = q->cap ? q->cap * 2 : 8;
                struct quota_uid *nv = realloc(q->v, nc * sizeof(*nv));
                if (!nv)
                        return NULL;
                q->v = nv;
                q->cap = nc;
        }
        u = &q->v[q->n++];
        *u = (struct quota_uid){.uid = uid};
        return u;
}

int quota_take(struct quota *q, enum quota_kind kind, uid_t uid, unsigned max, unsigned *ret_have) {
        struct quota_uid *u = get(q, uid);
        if (!u)
                return -ENOMEM;
        if (ret_have)
                *ret_have = u->n[kind];
        if (u->n[kind] >= max)
                return -EAGAIN;
        u->n[kind]++;
        return 0;
}

void quota_drop(struct quota *q, enum quota_kind kind, uid_t uid) {
        struct quota_uid *u = find(q, uid);
        if (u && u->n[kind] > 0)
                u->n[kind]--;
}

unsigned quota_count(const struct quota *q, enum quota_kind kind, uid_t uid) {
        const struct quota_uid *u = find(q, uid);
        return u ? u->n[kind] : 0;
}
