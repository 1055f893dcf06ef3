/* frame.c: the length-prefixed frame reader and writer used on the sbxd socket.
 *
 * Owns nothing beyond each reader's buffer. Called by the daemon's connection module,
 * by libsbx and by the tests; see frame.h for the contract. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_limits.h"

#define FRAME_MIN_BUFFER_BYTES FRAME_READER_MIN_BYTES

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

int frame_reader_partial(const struct frame_reader *r) {
        size_t have = r->end - r->start;

        return have > 0 && (have < SBX_FRAME_HEADER_BYTES ||
                            have - SBX_FRAME_HEADER_BYTES < header_get(r->buf + r->start));
}

size_t frame_reader_missing(const struct frame_reader *r) {
        size_t have = r->end - r->start, whole;

        if (have < SBX_FRAME_HEADER_BYTES)
                return SBX_FRAME_HEADER_BYTES - have;
        whole = (size_t)header_get(r->buf + r->start) + SBX_FRAME_HEADER_BYTES;
        return have >= whole ? 0 : whole - have;
}

size_t frame_reader_take_rest(struct frame_reader *r, const uint8_t **ret_bytes) {
        size_t have = r->end - r->start;

        *ret_bytes = have ? r->buf + r->start : NULL;
        r->start = r->end;
        return have;
}

void frame_reader_trim(struct frame_reader *r) {
        if (r->start == r->end && r->cap > FRAME_MIN_BUFFER_BYTES)
                frame_reader_free(r);
}

int frame_reader_head(const struct frame_reader *r, uint32_t *ret_len, const uint8_t **ret_payload,
                      size_t *ret_have) {
        size_t have = r->end - r->start;

        if (have < SBX_FRAME_HEADER_BYTES)
                return 0;
        *ret_len = header_get(r->buf + r->start);
        *ret_payload = r->buf + r->start + SBX_FRAME_HEADER_BYTES;
        *ret_have = have - SBX_FRAME_HEADER_BYTES;
        return 1;
}

uint64_t frame_request_id(const uint8_t *p, size_t n) {
        uint64_t v = 0;
        size_t i;

        /* Field 1, wire type 0 (varint): the tag byte 0x08, then at most 10 bytes. */
        if (n < 2 || p[0] != 0x08)
                return 0;
        for (i = 1; i < n && i <= 10; i++) {
                v |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 1));
                if (!(p[i] & 0x80))
                        return v;
        }
        return 0;
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

/* The packer's output for frame_pack_split: what comes before ext goes to part 0, what
 * comes after to part 1, and ext itself nowhere. */
struct split_buffer {
        ProtobufCBuffer base;
        const uint8_t *ext;
        size_t ext_len;
        uint8_t *out[2];
        size_t len[2], cap[2];
        int part;
        int failed;
};

static void split_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
        struct split_buffer *s = (struct split_buffer *)b;
        int p = s->part;

        if (p == 0 && data == s->ext && len == s->ext_len && len > 0) {
                s->part = 1;
                return;
        }
        if (s->failed || len == 0)
                return;
        if (s->len[p] + len > s->cap[p]) {
                size_t nc = (s->len[p] + len) * 2;
                uint8_t *nb = realloc(s->out[p], nc);
                if (!nb) {
                        s->failed = 1;
                        return;
                }
                s->out[p] = nb;
                s->cap[p] = nc;
        }
        memcpy(s->out[p] + s->len[p], data, len);
        s->len[p] += len;
}

int frame_pack_split(const ProtobufCMessage *msg, uint32_t max_frame_bytes, const uint8_t *ext,
                     size_t ext_len, struct frame_split *ret) {
        size_t len = protobuf_c_message_get_packed_size(msg);
        struct split_buffer s = {.base = {split_append}, .ext = ext, .ext_len = ext_len};
        uint8_t header[SBX_FRAME_HEADER_BYTES];

        memset(ret, 0, sizeof(*ret));
        if (len > max_frame_bytes)
                return -EMSGSIZE;
        frame_header_put(header, (uint32_t)len);
        split_append(&s.base, sizeof(header), header);
        protobuf_c_message_pack_to_buffer(msg, &s.base);
        if (s.failed) {
                free(s.out[0]);
                free(s.out[1]);
                return -ENOMEM;
        }
        ret->head = s.out[0];
        ret->head_len = s.len[0];
        ret->tail = s.out[1];
        ret->tail_len = s.len[1];
        if (s.part == 1) {
                ret->ext = ext;
                ret->ext_len = ext_len;
        }
        return 0;
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
