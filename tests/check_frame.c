/* check_frame.c: unit tests of the wire framing (proto/frame.c) and of protobuf round
 * trips of sbx.v1 messages through it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"
#include "testutil.h"

/* Packs a Request with request_id id and a Hello naming name. */
static uint8_t *pack_hello(uint64_t id, char *name, size_t *ret_len) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
        uint8_t *buf;
        req.has_request_id = 1;
        req.request_id = id;
        h.client_name = name;
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        ck_assert_int_eq(frame_pack(&req.base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, ret_len), 0);
        return buf;
}

static void check_hello(const uint8_t *p, size_t len, uint64_t id, const char *name) {
        Sbx__V1__Request *r = sbx__v1__request__unpack(NULL, len, p);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->request_id, id);
        ck_assert_int_eq(r->body_case, SBX__V1__REQUEST__BODY_HELLO);
        ck_assert_str_eq(r->hello->client_name, name);
        sbx__v1__request__free_unpacked(r, NULL);
}

START_TEST(split_at_every_byte) {
        size_t len, cut;
        uint8_t *buf = pack_hello(7, "split-client", &len);
        for (cut = 0; cut <= len; cut++) {
                struct frame_reader r;
                const uint8_t *p;
                size_t plen;
                frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
                ck_assert_int_eq(frame_reader_feed(&r, buf, cut), 0);
                if (cut < len)
                        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 0);
                ck_assert_int_eq(frame_reader_feed(&r, buf + cut, len - cut), 0);
                ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
                check_hello(p, plen, 7, "split-client");
                ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 0);
                ck_assert_uint_eq(frame_reader_pending(&r), 0);
                frame_reader_free(&r);
        }
        free(buf);
}
END_TEST

START_TEST(one_byte_at_a_time) {
        size_t len, i;
        uint8_t *buf = pack_hello(9, "bytewise", &len);
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;
        int got = 0;
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        for (i = 0; i < len; i++) {
                ck_assert_int_eq(frame_reader_feed(&r, buf + i, 1), 0);
                if (frame_reader_next(&r, &p, &plen) == 1) {
                        ck_assert_uint_eq(i, len - 1);
                        check_hello(p, plen, 9, "bytewise");
                        got++;
                }
        }
        ck_assert_int_eq(got, 1);
        frame_reader_free(&r);
        free(buf);
}
END_TEST

START_TEST(many_frames_in_one_read) {
        size_t len, total = 0, i;
        uint8_t *one = pack_hello(1, "x", &len);
        uint8_t *all = malloc((len + 8) * 1000);
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;
        int n = 0;
        free(one);
        for (i = 0; i < 1000; i++) {
                uint8_t *b = pack_hello(i + 1, "x", &len);
                memcpy(all + total, b, len);
                total += len;
                free(b);
        }
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        ck_assert_int_eq(frame_reader_feed(&r, all, total), 0);
        while (frame_reader_next(&r, &p, &plen) == 1) {
                n++;
                check_hello(p, plen, (uint64_t)n, "x");
        }
        ck_assert_int_eq(n, 1000);
        frame_reader_free(&r);
        free(all);
}
END_TEST

START_TEST(zero_length_frame) {
        uint8_t z[4] = {0, 0, 0, 0};
        struct frame_reader r;
        const uint8_t *p;
        size_t plen = 99;
        Sbx__V1__Request *req;
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        ck_assert_int_eq(frame_reader_feed(&r, z, 4), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        ck_assert_uint_eq(plen, 0);
        /* An empty payload decodes to an empty Request: rpc refuses it (no request_id). */
        req = sbx__v1__request__unpack(NULL, 0, p);
        ck_assert_ptr_nonnull(req);
        ck_assert_int_eq(req->has_request_id, 0);
        sbx__v1__request__free_unpacked(req, NULL);
        frame_reader_free(&r);
}
END_TEST

START_TEST(oversize_refused_before_allocating) {
        /* A header announcing 4 GiB - 1: refused at once, and the buffer never grows. */
        uint8_t h[4] = {0xff, 0xff, 0xff, 0xff};
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;
        frame_reader_init(&r, 1024 * 1024);
        ck_assert_int_eq(frame_reader_feed(&r, h, 4), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), -EMSGSIZE);
        ck_assert_uint_le(r.cap, 64 * 1024);
        /* Feeding more after an oversize header keeps failing without growth. */
        ck_assert_int_eq(frame_reader_feed(&r, h, 4), -EMSGSIZE);
        ck_assert_uint_le(r.cap, 64 * 1024);
        frame_reader_free(&r);
}
END_TEST

START_TEST(exact_maximum_accepted) {
        uint32_t max = 100 * 1024;
        uint8_t *buf = calloc(1, max + 4);
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;
        frame_header_put(buf, max);
        frame_reader_init(&r, max);
        ck_assert_int_eq(frame_reader_feed(&r, buf, max + 4), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        ck_assert_uint_eq(plen, max);
        frame_reader_free(&r);
        frame_header_put(buf, max + 1);
        frame_reader_init(&r, max);
        ck_assert_int_eq(frame_reader_feed(&r, buf, 4), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), -EMSGSIZE);
        frame_reader_free(&r);
        free(buf);
}
END_TEST

START_TEST(garbage_payload_does_not_decode_as_valid) {
        uint8_t garbage[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        Sbx__V1__Request *req = sbx__v1__request__unpack(NULL, sizeof(garbage), garbage);
        ck_assert_ptr_null(req);
}
END_TEST

/* A frame in progress is partial from its first byte to its last; the room a large
 * frame needed is given back once it is taken, and a small buffer is kept. */
START_TEST(partial_and_trim) {
        struct frame_reader r;
        const uint8_t *p;
        uint8_t hdr[4], *big;
        size_t len, n = 1u << 20;

        frame_reader_init(&r, 4u << 20);
        ck_assert(!frame_reader_partial(&r));
        frame_header_put(hdr, (uint32_t)n);
        ck_assert_int_eq(frame_reader_feed(&r, hdr, 2), 0);
        ck_assert(frame_reader_partial(&r));
        ck_assert_int_eq(frame_reader_feed(&r, hdr + 2, 2), 0);
        ck_assert(frame_reader_partial(&r));
        big = calloc(1, n);
        ck_assert_int_eq(frame_reader_feed(&r, big, n - 1), 0);
        ck_assert(frame_reader_partial(&r));
        ck_assert_uint_ge(r.cap, n);
        frame_reader_trim(&r); /* pending: kept */
        ck_assert_uint_ge(r.cap, n);
        ck_assert_int_eq(frame_reader_feed(&r, big, 1), 0);
        ck_assert(!frame_reader_partial(&r));
        ck_assert_int_eq(frame_reader_next(&r, &p, &len), 1);
        ck_assert_uint_eq(len, n);
        ck_assert(!frame_reader_partial(&r));
        frame_reader_trim(&r);
        ck_assert_uint_eq(r.cap, 0);
        ck_assert_ptr_null(r.buf);
        /* A small one's buffer stays. */
        frame_header_put(hdr, 3);
        ck_assert_int_eq(frame_reader_feed(&r, hdr, 4), 0);
        ck_assert_int_eq(frame_reader_feed(&r, "abc", 3), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &len), 1);
        frame_reader_trim(&r);
        ck_assert_uint_gt(r.cap, 0);
        free(big);
        frame_reader_free(&r);
}
END_TEST

/* The request_id of a frame not yet read whole, from its first bytes (what the daemon
 * answers a request it drops unread with). */
/* The bytes after a frame, whatever they are (a frame's beginning, raw bytes), come back
 * whole and in order once taken, and the reader has nothing pending after; with nothing
 * after the frame, nothing comes back. */
START_TEST(rest_after_a_frame_taken_whole) {
        static const char raw[] = "\x00\x00\x00\x10GET / HTTP/1.0\r\n";
        size_t len, n;
        uint8_t *buf = pack_hello(3, "upgrade", &len);
        struct frame_reader r;
        const uint8_t *p, *rest;
        size_t plen;

        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        ck_assert_int_eq(frame_reader_feed(&r, buf, len), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        ck_assert_uint_eq(frame_reader_take_rest(&r, &rest), 0);
        ck_assert_ptr_null(rest);
        ck_assert_int_eq(frame_reader_feed(&r, buf, len), 0);
        ck_assert_int_eq(frame_reader_feed(&r, raw, sizeof(raw) - 1), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        check_hello(p, plen, 3, "upgrade");
        n = frame_reader_take_rest(&r, &rest);
        ck_assert_uint_eq(n, sizeof(raw) - 1);
        ck_assert_mem_eq(rest, raw, n);
        ck_assert_uint_eq(frame_reader_pending(&r), 0);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 0);
        frame_reader_free(&r);
        free(buf);
}
END_TEST

/* A reader that receives exactly what frame_reader_missing asks for, one piece at a
 * time, ends with the frame whole and not one byte of what follows it: 4 for an empty
 * reader, the header's rest, then the payload's rest, then 0; after the frame is taken,
 * the next frame's header again. */
START_TEST(missing_reads_stop_at_the_frame) {
        size_t len, at = 0, n;
        uint8_t *buf = pack_hello(5, "exact", &len);
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;

        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        ck_assert_uint_eq(frame_reader_missing(&r), 4);
        ck_assert_int_eq(frame_reader_feed(&r, buf, 1), 0);
        ck_assert_uint_eq(frame_reader_missing(&r), 3);
        at = 1;
        while ((n = frame_reader_missing(&r)) > 0) {
                n = n > 2 ? n - 2 : n; /* short reads too */
                ck_assert_uint_le(at + n, len);
                ck_assert_int_eq(frame_reader_feed(&r, buf + at, n), 0);
                at += n;
                if (at == 4)
                        ck_assert_uint_eq(frame_reader_missing(&r), len - 4);
        }
        ck_assert_uint_eq(at, len);
        ck_assert_uint_eq(frame_reader_pending(&r), len);
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        check_hello(p, plen, 5, "exact");
        ck_assert_uint_eq(frame_reader_missing(&r), 4);
        frame_reader_free(&r);
        free(buf);
}
END_TEST

START_TEST(request_id_from_the_head) {
        struct frame_reader r;
        const uint8_t *p;
        uint8_t *buf;
        uint32_t len;
        size_t n, have;

        buf = pack_hello(300, "x", &n);
        frame_reader_init(&r, 4u << 20);
        ck_assert(!frame_reader_head(&r, &len, &p, &have));
        ck_assert_int_eq(frame_reader_feed(&r, buf, 6), 0);
        ck_assert(frame_reader_head(&r, &len, &p, &have));
        ck_assert_uint_eq(len, n - 4);
        ck_assert_uint_eq(have, 2);
        ck_assert_uint_eq(frame_request_id(p, have), 0); /* 300 takes two bytes after the tag */
        ck_assert_int_eq(frame_reader_feed(&r, buf + 6, 1), 0);
        ck_assert(frame_reader_head(&r, &len, &p, &have));
        ck_assert_uint_eq(frame_request_id(p, have), 300);
        ck_assert_uint_eq(frame_request_id((const uint8_t *)"\x10\x01", 2), 0); /* field 2 */
        ck_assert_uint_eq(frame_request_id((const uint8_t *)"\x08\x7f", 2), 127);
        ck_assert_uint_eq(frame_request_id((const uint8_t *)"\x08\xff\xff\xff\xff\xff\xff\xff\xff"
                                                            "\xff\xff\xff",
                                           12),
                          0); /* no end within 10 bytes */
        free(buf);
        frame_reader_free(&r);
}
END_TEST

START_TEST(pack_refuses_oversize) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__ReadFileReply rf = SBX__V1__READ_FILE_REPLY__INIT;
        uint8_t *data = calloc(1, 200000), *buf = NULL;
        size_t len = 0;
        rf.has_data = 1;
        rf.data.data = data;
        rf.data.len = 200000;
        resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
        resp.read_file = &rf;
        ck_assert_int_eq(frame_pack(&resp.base, 100000, &buf, &len), -EMSGSIZE);
        ck_assert_ptr_null(buf);
        ck_assert_int_eq(frame_pack(&resp.base, 300000, &buf, &len), 0);
        ck_assert_uint_gt(len, 200004);
        free(buf);
        free(data);
}
END_TEST

START_TEST(prepare_commit_reads_in_place) {
        size_t len, off = 0;
        uint8_t *buf = pack_hello(42, "in-place", &len);
        struct frame_reader r;
        const uint8_t *p;
        size_t plen;
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        while (off < len) {
                uint8_t *dst;
                size_t room, k;
                ck_assert_int_eq(frame_reader_prepare(&r, &dst, &room), 0);
                ck_assert_uint_gt(room, 0);
                k = room < 3 ? room : 3;
                if (k > len - off)
                        k = len - off;
                memcpy(dst, buf + off, k);
                frame_reader_commit(&r, k);
                off += k;
        }
        ck_assert_int_eq(frame_reader_next(&r, &p, &plen), 1);
        check_hello(p, plen, 42, "in-place");
        frame_reader_free(&r);
        free(buf);
}
END_TEST

/* frame_pack_split: head + ext + tail is exactly frame_pack's frame, ext is the caller's
 * own memory (not copied), and an empty field leaves the whole frame in head. */
START_TEST(pack_split_leaves_the_data_in_place) {
        static uint8_t data[300000];
        Sbx__V1__Response r = SBX__V1__RESPONSE__INIT;
        Sbx__V1__ReadFileReply f = SBX__V1__READ_FILE_REPLY__INIT;
        Sbx__V1__Status st = SBX__V1__STATUS__INIT;
        struct frame_split sp;
        uint8_t *whole, *joined;
        size_t whole_len, i;

        for (i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 7);
        st.has_code = 1;
        r.has_request_id = 1;
        r.request_id = 99;
        r.status = &st;
        f.has_data = f.has_size = f.has_next_offset = f.has_eof = 1;
        f.data.data = data;
        f.data.len = sizeof(data);
        f.size = 1u << 30;
        f.next_offset = sizeof(data);
        r.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
        r.read_file = &f;

        ck_assert_int_eq(frame_pack(&r.base, SBX_DEFAULT_MAX_FRAME_BYTES, &whole, &whole_len), 0);
        ck_assert_int_eq(frame_pack_split(&r.base, SBX_DEFAULT_MAX_FRAME_BYTES, data,
                                          sizeof(data), &sp),
                         0);
        ck_assert_ptr_eq(sp.ext, data);
        ck_assert_uint_eq(sp.ext_len, sizeof(data));
        ck_assert_uint_lt(sp.head_len, 64);
        ck_assert_uint_gt(sp.tail_len, 0); /* size, next_offset, eof come after the data */
        ck_assert_uint_eq(sp.head_len + sp.ext_len + sp.tail_len, whole_len);
        joined = malloc(whole_len);
        memcpy(joined, sp.head, sp.head_len);
        memcpy(joined + sp.head_len, sp.ext, sp.ext_len);
        memcpy(joined + sp.head_len + sp.ext_len, sp.tail, sp.tail_len);
        ck_assert(memcmp(joined, whole, whole_len) == 0);
        free(joined);
        free(whole);
        free(sp.head);
        free(sp.tail);

        /* Too large: refused, nothing to free. */
        ck_assert_int_eq(frame_pack_split(&r.base, 1000, data, sizeof(data), &sp), -EMSGSIZE);
        ck_assert_ptr_null(sp.head);

        /* An empty field (no buffer at all): the whole frame in head. */
        f.data.len = 0;
        f.data.data = NULL;
        ck_assert_int_eq(frame_pack(&r.base, SBX_DEFAULT_MAX_FRAME_BYTES, &whole, &whole_len), 0);
        ck_assert_int_eq(frame_pack_split(&r.base, SBX_DEFAULT_MAX_FRAME_BYTES, data, 0, &sp), 0);
        ck_assert_ptr_null(sp.ext);
        ck_assert_uint_eq(sp.head_len + sp.tail_len, whole_len);
        ck_assert_uint_eq(sp.tail_len, 0);
        ck_assert(memcmp(sp.head, whole, whole_len) == 0);
        free(whole);
        free(sp.head);
        free(sp.tail);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("frame");
        TCase *tc = tcase_create("frame");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, split_at_every_byte);
        tcase_add_test(tc, one_byte_at_a_time);
        tcase_add_test(tc, many_frames_in_one_read);
        tcase_add_test(tc, zero_length_frame);
        tcase_add_test(tc, oversize_refused_before_allocating);
        tcase_add_test(tc, exact_maximum_accepted);
        tcase_add_test(tc, garbage_payload_does_not_decode_as_valid);
        tcase_add_test(tc, pack_refuses_oversize);
        tcase_add_test(tc, prepare_commit_reads_in_place);
        tcase_add_test(tc, pack_split_leaves_the_data_in_place);
        tcase_add_test(tc, partial_and_trim);
        tcase_add_test(tc, request_id_from_the_head);
        tcase_add_test(tc, rest_after_a_frame_taken_whole);
        tcase_add_test(tc, missing_reads_stop_at_the_frame);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
