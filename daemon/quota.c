/* quota.c: per-uid counts of sandboxes, commands, held bytes and ptys; see quota.h.
 *
 * A small array of counters, one per uid that ever created a sandbox or ran a command
 * (a host has few): looked up by a linear scan, never shrunk, so that dropping never
 * allocates and a counter once made is always there to drop from. */
#include "quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct quota_uid {
        uid_t uid;
        uint64_t n[QUOTA_N];
};

struct quota {
        struct quota_uid *v;
        size_t n, cap;
        uint64_t total[QUOTA_N];
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
                *ret_have = (unsigned)u->n[kind];
        if (u->n[kind] >= max)
                return -EAGAIN;
        u->n[kind]++;
        q->total[kind]++;
        return 0;
}

void quota_drop(struct quota *q, enum quota_kind kind, uid_t uid) {
        quota_sub(q, kind, uid, 1);
}

unsigned quota_count(const struct quota *q, enum quota_kind kind, uid_t uid) {
        return (unsigned)quota_amount(q, kind, uid);
}

int quota_add(struct quota *q, enum quota_kind kind, uid_t uid, uint64_t n, uint64_t max,
              uint64_t max_total) {
        struct quota_uid *u = get(q, uid);
        if (!u)
                return -ENOMEM;
        if (n > max || u->n[kind] > max - n)
                return -EDQUOT;
        if (n > max_total || q->total[kind] > max_total - n)
                return -ENOSPC;
        u->n[kind] += n;
        q->total[kind] += n;
        return 0;
}

void quota_sub(struct quota *q, enum quota_kind kind, uid_t uid, uint64_t n) {
        struct quota_uid *u = find(q, uid);
        if (!u)
                return;
        if (n > u->n[kind])
                n = u->n[kind];
        u->n[kind] -= n;
        q->total[kind] -= n;
}

uint64_t quota_amount(const struct quota *q, enum quota_kind kind, uid_t uid) {
        const struct quota_uid *u = find(q, uid);
        return u ? u->n[kind] : 0;
}

uint64_t quota_total(const struct quota *q, enum quota_kind kind) {
        return q->total[kind];
}

int quota_hold_to(struct quota_hold *h, uint64_t want) {
        const struct quota_bound *b = h->b;
        int r;

        if (!b || !b->q || want == h->held) {
                h->held = want;
                return 0;
        }
        if (want < h->held) {
                quota_sub(b->q, QUOTA_BUFFERED, h->uid, h->held - want);
        } else {
                r = quota_add(b->q, QUOTA_BUFFERED, h->uid, want - h->held, b->max, b->max_total);
                if (r < 0)
                        return r;
        }
        h->held = want;
        return 0;
}

void quota_explain_buffered(const struct quota_bound *b, uid_t uid, int r, char *buf, size_t len) {
        uint64_t mib = 1024u * 1024u;

        if (r == -ENOSPC)
                snprintf(buf, len,
                         "the daemon holds %llu MiB for its clients, its bound "
                         "(--max-buffered %llu MiB)",
                         (unsigned long long)(b && b->q ? quota_total(b->q, QUOTA_BUFFERED) / mib
                                                        : 0),
                         (unsigned long long)(b ? b->max_total / mib : 0));
        else
                snprintf(buf, len,
                         "uid %u has %llu MiB held by the daemon, its bound "
                         "(--max-buffered-per-uid %llu MiB)",
                         (unsigned)uid,
                         (unsigned long long)(b && b->q ? quota_amount(b->q, QUOTA_BUFFERED, uid) /
                                                                  mib
                                                        : 0),
                         (unsigned long long)(b ? b->max / mib : 0));
}

int quota_add_upto(const struct quota_bound *b, enum quota_kind kind, uid_t uid, uint64_t want,
                   uint64_t *ret_got) {
        uint64_t have, left_uid, left_all, got;
        int r;

        *ret_got = 0;
        if (!b || !b->q) {
                *ret_got = want;
                return 0;
        }
        have = quota_amount(b->q, kind, uid);
        left_uid = have < b->max ? b->max - have : 0;
        left_all =
                quota_total(b->q, kind) < b->max_total ? b->max_total - quota_total(b->q, kind) : 0;
        got = want < left_uid ? want : left_uid;
        got = got < left_all ? got : left_all;
        r = quota_add(b->q, kind, uid, got, b->max, b->max_total);
        if (r < 0)
                return r; /* -ENOMEM: 0 of it fits every bound */
        *ret_got = got;
        if (got == want)
                return 0;
        return left_uid <= left_all ? -EDQUOT : -ENOSPC;
}

void quota_explain_ptys(const struct quota_bound *b, uid_t uid, int r, uint64_t have_uid,
                        uint64_t have_all, char *buf, size_t len) {
        if (r == -ENOSPC)
                snprintf(buf, len, "sbxd's sandboxes held %llu ptys, its bound (--max-ptys %llu)",
                         (unsigned long long)have_all, (unsigned long long)(b ? b->max_total : 0));
        else
                snprintf(buf, len,
                         "uid %u's sandboxes held %llu ptys, its bound (--max-ptys-per-uid %llu)",
                         (unsigned)uid, (unsigned long long)have_uid,
                         (unsigned long long)(b ? b->max : 0));
}
