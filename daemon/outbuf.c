/* outbuf.c: the kept tail of an output stream; see outbuf.h. */
#include "outbuf.h"

#include <stdlib.h>
#include <string.h>

void outbuf_init(struct outbuf *o, size_t limit) {
        memset(o, 0, sizeof(*o));
        o->limit = limit;
}

void outbuf_charge(struct outbuf *o, const struct quota_bound *b, uid_t uid) {
        o->hold.b = b;
        o->hold.uid = uid;
}

/* Makes the buffer nc bytes. 0; -1 when out of memory; -2 when the budget refused:
 * the cap is then what the buffer has (limit lowered to cap), to be taken again. */
static int resize(struct outbuf *o, size_t nc) {
        uint8_t *nb;
        int r = quota_hold_to(&o->hold, nc);

        if (r < 0) {
                o->refused = r;
                o->limit = o->cap;
                o->head = o->cap ? o->len % o->cap : 0;
                o->truncated = 1;
                return -2;
        }
        nb = realloc(o->buf, nc);
        if (!nb) {
                (void)quota_hold_to(&o->hold, o->cap);
                return -1;
        }
        o->buf = nb;
        o->cap = nc;
        return 0;
}

/* Makes the buffer exactly limit bytes (ring mode). As resize. */
static int grow_to_limit(struct outbuf *o) {
        return o->cap >= o->limit ? 0 : resize(o, o->limit);
}

/* Appends n bytes that fit under the limit. As resize. */
static int append(struct outbuf *o, const uint8_t *p, size_t n) {
        if (o->len + n > o->cap) {
                size_t nc = o->cap ? o->cap : 4096;
                int r;
                while (nc < o->len + n)
                        nc *= 2;
                if (nc > o->limit)
                        nc = o->limit;
                if ((r = resize(o, nc)) < 0)
                        return r;
        }
        memcpy(o->buf + o->len, p, n);
        o->len += n;
        o->head = o->len % o->limit;
        return 0;
}

/* Writes n bytes into the ring, over the oldest. */
static void ring_write(struct outbuf *o, const uint8_t *p, size_t n) {
        while (n > 0) {
                size_t room = o->limit - o->head;
                size_t k = n < room ? n : room;
                memcpy(o->buf + o->head, p, k);
                o->head = (o->head + k) % o->limit;
                if (o->len < o->limit)
                        o->len = o->len + k > o->limit ? o->limit : o->len + k;
                p += k;
                n -= k;
        }
}

/* Keeps what it can of n bytes of p. 0; -1 when out of memory (nothing kept); -2 when
 * the budget cut the limit (take them again under the new one). */
static int keep(struct outbuf *o, const uint8_t *p, size_t n) {
        int r;

        if (o->limit == 0) {
                o->truncated = o->total > 0;
                return 0;
        }
        if (n >= o->limit) {
                /* The chunk alone fills the cap: keep its end. */
                if ((r = grow_to_limit(o)) < 0)
                        return r;
                memcpy(o->buf, p + n - o->limit, o->limit);
                o->len = o->limit;
                o->head = 0;
                o->truncated = 1;
                return 0;
        }
        if (n == 0)
                return 0; /* (an empty append would move a full ring's head to 0) */
        if (o->len + n <= o->limit)
                return append(o, p, n);
        if ((r = grow_to_limit(o)) < 0)
                return r;
        o->truncated = 1;
        ring_write(o, p, n);
        return 0;
}

void outbuf_take(struct outbuf *o, const uint8_t *p, size_t n) {
        o->total += n;
        /* A cut limit is never above the cap, so the second try allocates nothing. */
        if (keep(o, p, n) == -2)
                (void)keep(o, p, n);
}

uint64_t outbuf_count(struct outbuf *o, size_t n) {
        uint64_t off = o->total;
        o->total += (uint64_t)n;
        return off;
}

uint8_t *outbuf_bytes(const struct outbuf *o, size_t *ret_len) {
        uint8_t *r = malloc(o->len ? o->len : 1);
        if (!r) {
                *ret_len = 0;
                return NULL;
        }
        if (o->len == 0) {
                /* nothing kept (o->buf may be NULL) */
        } else if (o->len < o->limit || o->head == 0) {
                memcpy(r, o->buf, o->len);
        } else {
                memcpy(r, o->buf + o->head, o->limit - o->head);
                memcpy(r + o->limit - o->head, o->buf, o->head);
        }
        *ret_len = o->len;
        return r;
}

void outbuf_free(struct outbuf *o) {
        free(o->buf);
        o->buf = NULL;
        o->cap = o->len = o->head = 0;
        (void)quota_hold_to(&o->hold, 0);
}

size_t outbuf_copy(const struct outbuf *o, uint64_t from, uint8_t *dst, size_t max,
                   uint64_t *ret_first) {
        uint64_t first = o->total - o->len; /* the offset of the oldest byte kept */
        size_t skip, n, start, k;

        if (from < first)
                from = first;
        *ret_first = from;
        if (from >= o->total)
                return 0;
        skip = (size_t)(from - first);
        n = o->len - skip < max ? o->len - skip : max;
        /* A full buffer is a ring whose oldest byte is at head; else it starts at 0. */
        start = ((o->len == o->limit ? o->head : 0) + skip) % (o->limit ? o->limit : 1);
        k = o->limit - start < n ? o->limit - start : n;
        memcpy(dst, o->buf + start, k);
        memcpy(dst + k, o->buf, n - k);
        return n;
}
