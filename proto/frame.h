/* frame.h: length-prefixed framing of sbx.v1 messages, shared by sbxd and libsbx.
 *
 * A frame is a 4-byte big-endian payload length followed by the payload. The reader
 * checks the length against its maximum before it allocates anything for the payload,
 * so a hostile length costs nothing. The reader owns one growing buffer; callers read
 * straight into it (frame_reader_prepare/commit) or copy into it (frame_reader_feed).
 * No function here logs or exits; errors are -errno. */
#ifndef SBX_FRAME_H
#define SBX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* The buffer grows to hold one whole frame; this is the size it starts with. */
#define FRAME_READER_MIN_BYTES (64u * 1024u)

struct frame_reader {
        uint8_t *buf;
        size_t start; /* first unconsumed byte */
        size_t end;   /* one past the last received byte */
        size_t cap;
        uint32_t max_frame_bytes;
};

/* Initialises an empty reader that accepts payloads of at most max_frame_bytes. */
void frame_reader_init(struct frame_reader *r, uint32_t max_frame_bytes);

/* Frees the reader's buffer; the reader may be initialised again. Accepts a zeroed reader. */
void frame_reader_free(struct frame_reader *r);

/* Gives a place to receive at least one byte into: *ret_ptr, *ret_len bytes long.
 * Invalidates frames returned earlier by frame_reader_next. Returns 0 or -ENOMEM. */
int frame_reader_prepare(struct frame_reader *r, uint8_t **ret_ptr, size_t *ret_len);

/* Records that n bytes were written into the space frame_reader_prepare gave. */
void frame_reader_commit(struct frame_reader *r, size_t n);

/* Copies n bytes into the reader. Returns 0 or -ENOMEM. */
int frame_reader_feed(struct frame_reader *r, const void *data, size_t n);

/* Takes the next complete frame. Returns 1 and sets *ret_payload and *ret_len (valid until
 * the next prepare or feed), 0 when more bytes are needed, -EMSGSIZE when the next
 * frame announces a payload larger than the maximum (the stream cannot be resynced). */
int frame_reader_next(struct frame_reader *r, const uint8_t **ret_payload, size_t *ret_len);

/* Bytes received but not yet returned as frames. */
size_t frame_reader_pending(const struct frame_reader *r);

/* Takes every byte received and not yet returned as a frame, framed or not: the stream
 * goes on as something else after the last frame (a connection handed over). Returns
 * their count with *ret_bytes (NULL when none), valid until the next prepare, feed or
 * free; the reader has nothing pending after. */
size_t frame_reader_take_rest(struct frame_reader *r, const uint8_t **ret_bytes);

/* 1 when the bytes pending begin a frame not yet received whole. */
int frame_reader_partial(const struct frame_reader *r);

/* How many bytes must still arrive for the next frame to be whole: 0 when it is, the
 * rest of the header when fewer than its 4 bytes are there (the payload's length is not
 * known yet), else the rest of the header and payload. A reader that receives no more
 * than this never takes a byte past the frame (a connection that becomes a byte pipe
 * after its answer: OpenPort). */
size_t frame_reader_missing(const struct frame_reader *r);

/* Gives the buffer back when nothing is pending and it grew past its starting size
 * (a large frame's room is not kept for an idle peer). */
void frame_reader_trim(struct frame_reader *r);

/* The frame at the head of what is pending, when its header is there: 1 with its
 * payload's length in *ret_len and the bytes of it received so far (*ret_payload,
 * *ret_have); else 0. */
int frame_reader_head(const struct frame_reader *r, uint32_t *ret_len, const uint8_t **ret_payload,
                      size_t *ret_have);

/* The request_id of a Request whose payload begins with p (n bytes of it): protobuf-c
 * writes field 1 first. 0 when those bytes do not begin with it. */
uint64_t frame_request_id(const uint8_t *p, size_t n);

/* Encodes msg as one frame into a new buffer (*ret_buf, freed by the caller with free()).
 * Returns 0, -EMSGSIZE when the payload exceeds max_frame_bytes, or -ENOMEM. */
int frame_pack(const ProtobufCMessage *msg, uint32_t max_frame_bytes, uint8_t **ret_buf,
               size_t *ret_len);

/* A frame packed around one large bytes field of its message that is not copied: the
 * frame is head, then ext (ext_len bytes, where the field's data is), then tail. When
 * the packer did not meet ext as one piece (an empty field), ext is NULL and head holds
 * the whole frame. head and tail are the caller's to free(). */
struct frame_split {
        uint8_t *head, *tail;
        size_t head_len, tail_len;
        const uint8_t *ext;
        size_t ext_len;
};

/* Encodes msg as one frame as frame_pack does, but for the bytes of the field whose data
 * is ext (ext_len bytes), which are left where they are (a ReadFile reply's data, a
 * WriteFile request's): the frame goes out as three pieces and ext is never copied.
 * Returns 0, -EMSGSIZE or -ENOMEM (nothing to free then). */
int frame_pack_split(const ProtobufCMessage *msg, uint32_t max_frame_bytes, const uint8_t *ext,
                     size_t ext_len, struct frame_split *ret);

/* Writes the 4-byte header for a payload of len bytes. */
void frame_header_put(uint8_t out[4], uint32_t len);

#endif
