/* frame.c: the length-prefixed frame reader and writer used on the sbxd socket.
 *
 * Owns nothing beyond each reader's buffer. Called by the daemon's connection module,
 * by libsbx and by the tests; see frame.h for the contract. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_limits.h"

/* The buffer grows to hold one whole frame; this is the size it starts with. */
#define FRAME_MIN_BUFFER_BYTES (64u * 1024u)

void frame_reader_init(struct frame_reader *r, uint32_t max_frame_bytes) {
        memset(r, 0, sizeof(*r));
        r->max_frame_bytes = max_frame_bytes;
}

void frame_reader_free(struct frame_reader *r) {
        if (!r)
                return;
        free(r->buf);
        r->buf = NULL;
        r->start = r->end = r->cap = 0;
}

static uint32_t header_get(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void frame_header_put(uint8_t out[4], uint32_t len) {
        out[0] = (uint8_t)(len >> 24);
        out[1] = (uint8_t)(len >> 16);
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
}

size_t frame_reader_pending(const struct frame_reader *r) {
        return r->end - r->start;
}

int frame_reader_prepare(struct frame_reader *r, uint8_t **ret_ptr, size_t *ret_len) {
        size_t want = FRAME_MIN_BUFFER_BYTES;
        size_t have = r->end - r->start;

        /* Once the header of the frame in progress is known, make room for all of it
         * (its length was checked against the maximum by frame_reader_next). */
        if (have >= SBX_FRAME_HEADER_BYTES) {
                uint32_t len = header_get(r->buf + r->start);
                if (len <= r->max_frame_bytes && (size_t)len + SBX_FRAME_HEADER_BYTES > want)
                        want = (size_t)len + SBX_FRAME_HEADER_BYTES;
        }
        if (want < have + 1)
                want = have + 1;

        if (r->start > 0 && (r->cap - r->end == 0 || r->cap - r->start < want)) {
                memmove(r->buf, r->buf + r->start, have);
                r->start = 0;
                r->end = have;
        }
        if (r->cap - r->start < want) {
                uint8_t *nb = realloc(r->buf, r->start + want);
                if (!nb)
                        return -ENOMEM;
                r->buf = nb;
                r->cap = r->start + want;
        }
        *ret_ptr = r->buf + r->end;
        *ret_len = r->cap - r->end;
        return 0;
}

void frame_reader_commit(struct frame_reader *r, size_t n) {
        r->end += n;
}

int frame_reader_feed(struct frame_reader *r, const void *data, size_t n) {
        const uint8_t *p = data;
        while (n > 0) {
                uint8_t *dst;
                size_t room;
                int rc;
                /* Check the header early so a hostile length never makes us grow. */
                if (frame_reader_pending(r) >= SBX_FRAME_HEADER_BYTES &&
                    header_get(r->buf + r->start) > r->max_frame_bytes)
                        return -EMSGSIZE;
                rc = frame_reader_prepare(r, &dst, &room);
                if (rc < 0)
                        return rc;
                if (room > n)
                        room = n;
                memcpy(dst, p, room);
                frame_reader_commit(r, room);
                p += room;
                n -= room;
        }
        return 0;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **ret_payload, size_t *ret_len) {
        size_t have = r->end - r->start;
        uint32_t len;

        if (have < SBX_FRAME_HEADER_BYTES)
                return 0;
        len = header_get(r->buf + r->start);
        if (len > r->max_frame_bytes)
                return -EMSGSIZE;
        if (have - SBX_FRAME_HEADER_BYTES < len)
                return 0;
        *ret_payload = r->buf + r->start + SBX_FRAME_HEADER_BYTES;
        *ret_len = len;
        r->start += SBX_FRAME_HEADER_BYTES + len;
        if (r->start == r->end)
                r->start = r->end = 0;
        return 1;
}

int frame_pack(const ProtobufCMessage *msg, uint32_t max_frame_bytes, uint8_t **ret_buf,
               size_t *ret_len) {
        size_t len = protobuf_c_message_get_packed_size(msg);
        uint8_t *buf;

        if (len > max_frame_bytes)
                return -EMSGSIZE;
        buf = malloc(SBX_FRAME_HEADER_BYTES + len);
        if (!buf)
                return -ENOMEM;
        frame_header_put(buf, (uint32_t)len);
        protobuf_c_message_pack(msg, buf + SBX_FRAME_HEADER_BYTES);
        *ret_buf = buf;
        *ret_len = SBX_FRAME_HEADER_BYTES + len;
        return 0;
}
