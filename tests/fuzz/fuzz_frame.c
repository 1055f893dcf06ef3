/* fuzz_frame.c: libFuzzer target for the frame reader and request decoding.
 *
 * The input is a stream of bytes delivered to a frame_reader in chunks whose sizes the
 * fuzzer chooses, either copied in (frame_reader_feed) or received in place
 * (frame_reader_prepare/commit, as sbxd and libsbx do). Every complete frame is decoded
 * as an sbx.v1.Request; a request that decodes is packed again with frame_pack and must
 * decode again to the same bytes. Nothing may crash, leak, hand out a frame larger than
 * the maximum, or let the buffer grow beyond what one frame (plus one chunk, when
 * copying) needs.
 *
 * Input layout:
 *   byte 0      the maximum payload: one of 0, 1, 4, 100, 64 KiB, 1 MiB, 64 MiB
 *   byte 1      bit 0: copy with frame_reader_feed instead of prepare/commit
 *   byte 2      n: how many chunk-size bytes follow (0: the whole stream in one chunk)
 *   n bytes     chunk sizes, used in turn: size = byte + 1
 *   the rest    the stream
 *
 * Seeds (tests/fuzz/corpus/frame) are written by fuzz_dispatch, which holds the encoder
 * of valid requests: SBX_FUZZ_WRITE_SEEDS=DIR build/fuzz/fuzz_dispatch. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "sbx_limits.h"
#include "sbx.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t max_choices[] = {0, 1, 4, 100, 64u << 10, 1u << 20, 64u << 20};

/* What the reader may hold at most: one frame (or the 64 KiB it starts with), plus, when
 * copying, the chunk being copied (frames are taken out only between chunks). */
static size_t cap_bound(uint32_t max, size_t chunk) {
        size_t one = (size_t)max + SBX_FRAME_HEADER_BYTES;
        if (one < 64u << 10)
                one = 64u << 10;
        return one + chunk + 1;
}

/* 1 when msg or a message inside it kept unknown fields. protobuf-c keeps them and packs
 * them again, but not always faithfully: a field number 0 spelled as a non-minimal
 * varint ("82 00") is accepted by its decoder, re-encoded minimally ("02") and then
 * refused (kept as regress-tag0-noncanonical). sbxd never meets this: rpc.c refuses
 * every unknown field, field 0 included, before decoding. */
static int has_unknown(const ProtobufCMessage *msg) {
        const ProtobufCMessageDescriptor *d = msg->descriptor;
        unsigned i;
        if (msg->n_unknown_fields > 0)
                return 1;
        for (i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                const char *base = (const char *)msg;
                if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                        continue;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *)(base + f->quantifier_offset), k;
                        ProtobufCMessage *const *v =
                                *(ProtobufCMessage *const *const *)(base + f->offset);
                        for (k = 0; k < n; k++)
                                if (v[k] && has_unknown(v[k]))
                                        return 1;
                } else {
                        const ProtobufCMessage *sub =
                                *(ProtobufCMessage *const *)(base + f->offset);
                        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
                                continue; /* another member of the oneof is set */
                        if (sub && has_unknown(sub))
                                return 1;
                }
        }
        return 0;
}

/* Decodes one frame's payload; a request that decodes (with no unknown fields) must
 * survive a round trip. */
static void check_payload(const uint8_t *p, size_t len, uint32_t max) {
        Sbx__V1__Request *req, *again;
        uint8_t *buf = NULL, *buf2 = NULL;
        size_t blen = 0, blen2 = 0;
        int r;

        assert(len <= max);
        req = sbx__v1__request__unpack(NULL, len, p);
        if (!req)
                return;
        if (has_unknown(&req->base)) {
                sbx__v1__request__free_unpacked(req, NULL);
                return;
        }
        r = frame_pack(&req->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &blen);
        if (r == 0) {
                again = sbx__v1__request__unpack(NULL, blen - SBX_FRAME_HEADER_BYTES,
                                                 buf + SBX_FRAME_HEADER_BYTES);
                assert(again); /* what we packed must decode */
                r = frame_pack(&again->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf2, &blen2);
                assert(r == 0);
                /* Packing is deterministic: the same message, the same bytes. */
                assert(blen == blen2 && memcmp(buf, buf2, blen) == 0);
                sbx__v1__request__free_unpacked(again, NULL);
                free(buf2);
        } else {
                assert(r == -EMSGSIZE || r == -ENOMEM);
        }
        free(buf);
        sbx__v1__request__free_unpacked(req, NULL);
}

/* Takes every complete frame out of r. Returns 0, or -EMSGSIZE when the stream is dead. */
static int drain(struct frame_reader *r, uint32_t max) {
        for (;;) {
                const uint8_t *p;
                size_t len;
                int k = frame_reader_next(r, &p, &len);
                if (k == 0)
                        return 0;
                if (k < 0) {
                        assert(k == -EMSGSIZE);
                        return k;
                }
                assert(k == 1);
                assert(p >= r->buf && p + len <= r->buf + r->cap);
                check_payload(p, len, max);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct frame_reader r;
        const uint8_t *sizes, *stream;
        size_t n_sizes, stream_len, off = 0, turn = 0;
        uint32_t max;
        int copy;

        if (size < 3)
                return 0;
        max = max_choices[data[0] % (sizeof(max_choices) / sizeof(max_choices[0]))];
        copy = data[1] & 1;
        n_sizes = data[2];
        if (size < 3 + n_sizes)
                return 0;
        sizes = data + 3;
        stream = data + 3 + n_sizes;
        stream_len = size - 3 - n_sizes;

        frame_reader_init(&r, max);
        while (off < stream_len) {
                size_t chunk = n_sizes ? (size_t)sizes[turn++ % n_sizes] + 1 : stream_len;
                if (chunk > stream_len - off)
                        chunk = stream_len - off;
                if (copy) {
                        int k = frame_reader_feed(&r, stream + off, chunk);
                        if (k == -EMSGSIZE)
                                break;
                        assert(k == 0);
                        off += chunk;
                } else {
                        /* As a socket reader: receive at most what prepare offers. */
                        size_t left = chunk;
                        while (left > 0) {
                                uint8_t *dst;
                                size_t room;
                                int k = frame_reader_prepare(&r, &dst, &room);
                                assert(k == 0);
                                assert(room >= 1 && dst >= r.buf && dst + room <= r.buf + r.cap);
                                if (room > left)
                                        room = left;
                                memcpy(dst, stream + off, room);
                                frame_reader_commit(&r, room);
                                off += room;
                                left -= room;
                                if (drain(&r, max) < 0)
                                        goto out;
                        }
                }
                assert(r.cap <= cap_bound(max, copy ? chunk : 0));
                assert(frame_reader_pending(&r) <= r.cap);
                if (drain(&r, max) < 0)
                        break;
        }
out:
        frame_reader_free(&r);
        return 0;
}
