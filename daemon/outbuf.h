/* outbuf.h: what is kept of one output stream of a command: at most a cap of bytes, and
 * past the cap the tail (the end of a log is where the error is), while every byte is
 * counted.
 *
 * A plain buffer until the cap is reached, then a ring of exactly cap bytes. The memory
 * it takes may be counted against a uid's budget (quota.h): when the budget refuses
 * more, the cap becomes what it has, and the tail is kept in that. Pure memory: used by
 * command.c, tested by check_command. Nothing here logs. */
#ifndef SBX_OUTBUF_H
#define SBX_OUTBUF_H

#include <stddef.h>
#include <stdint.h>

#include "quota.h"

struct outbuf {
        uint8_t *buf;
        size_t cap;             /* allocated */
        size_t limit;           /* the most kept (the cap); 0 keeps nothing */
        size_t len;             /* kept */
        size_t head;            /* ring mode: next write position */
        uint64_t total;         /* every byte taken or counted */
        int truncated;          /* some bytes taken were not kept */
        struct quota_hold hold; /* the budget buf's memory is counted against */
        int refused;            /* the budget's refusal (-EDQUOT, -ENOSPC) that cut limit, or 0 */
};

/* An empty buffer keeping at most limit bytes (nothing is allocated yet), its memory
 * counted against nothing. */
void outbuf_init(struct outbuf *o, size_t limit);

/* Counts the memory o takes from now on against uid's share of b (may be NULL). */
void outbuf_charge(struct outbuf *o, const struct quota_bound *b, uid_t uid);

/* Takes n bytes of p: counted, and kept as far as the cap allows (the oldest go first).
 * When memory runs out the bytes are counted but not kept. */
void outbuf_take(struct outbuf *o, const uint8_t *p, size_t n);

/* Counts n bytes passed on elsewhere (streamed), without keeping them. Returns the
 * count before them: the offset of the first of them in the stream. */
uint64_t outbuf_count(struct outbuf *o, size_t n);

/* The kept bytes in order, in a new malloc()ed buffer (*ret_len bytes; the caller frees
 * it), or NULL with *ret_len 0 when out of memory. */
uint8_t *outbuf_bytes(const struct outbuf *o, size_t *ret_len);

/* Copies at most max kept bytes from offset from (counted over everything taken) into
 * dst, and sets *ret_first to the offset of the first byte copied: from, or the oldest
 * byte still kept when from is older (the bytes between were not kept). Returns the
 * number copied: 0 when nothing kept lies at or after from. */
size_t outbuf_copy(const struct outbuf *o, uint64_t from, uint8_t *dst, size_t max,
                   uint64_t *ret_first);

/* Frees what o keeps, and gives its memory back to the budget; o may be taken again
 * after outbuf_init. */
void outbuf_free(struct outbuf *o);

#endif
