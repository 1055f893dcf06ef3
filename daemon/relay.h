/* relay.h: bytes piped both ways between two connected libuv streams, on the loop.
 *
 * What its owner gives: two streams (side 0 and side 1, each a TCP socket or a Unix stream
 * socket, connected, not reading), the water marks and the idle time. What the relay does:
 * what one side sends is written to the other as it comes; a direction whose writes queue
 * more memory than high_bytes (their bytes and what each write costs besides,
 * RELAY_WRITE_COST_BYTES) stops reading its source until they are down to half of it, so
 * that a peer that does not read holds back only the peer that sends to it, never the other
 * direction and never the daemon's memory; an end of stream from one side is passed on to
 * the other as a half-close (uv_shutdown, once what was queued before it is written) while
 * the other direction goes on; nothing either way for idle_ms ends it. It counts the bytes
 * read from each side.
 *
 * It ends, once, when both half-closes have been passed on, or at the first error of
 * either side, or when idle, or when a side whose end was passed on has gone away
 * altogether (RELAY_GONE: a peer that closed rather than shut down its writing, which
 * a server that never ends its own direction would otherwise hold for good): its ended callback says how, which side failed and the bytes
 * each way. It knows nothing of what the bytes mean nor of who asked for them: the owner
 * (the allowlist proxy, egress.c) keeps its records, rules and budgets, and closes the
 * streams, which stay its own.
 *
 * Loop thread only. Library-like: no logging. */
#ifndef SBX_RELAY_H
#define SBX_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct relay;

/* The most one read takes from a side (one buffer), unless the bounds say otherwise. A
 * direction's queue is therefore at most high_bytes plus one read and its
 * RELAY_WRITE_COST_BYTES. */
#define RELAY_READ_BYTES 65536u
/* What a queued write costs besides its data (its request, the allocator's headers),
 * counted in its direction's queue with the data, at most. */
#define RELAY_WRITE_COST_BYTES 512u

/* How a relay ended. */
enum relay_end {
        RELAY_ENDED,           /* both sides sent their end, and each was passed on */
        RELAY_IDLE,            /* nothing read either way for idle_ms */
        RELAY_READ_FAILED,     /* reading side failed (a reset; UV_ENOBUFS: out of memory) */
        RELAY_WRITE_FAILED,    /* writing to side failed */
        RELAY_SHUTDOWN_FAILED, /* passing an end on to side failed */
        RELAY_NO_MEMORY,       /* a read could not be queued: out of memory */
        RELAY_GONE,            /* side sent its end, it was passed on, and then side went
                                * away altogether (its peer closed, not only shut down its
                                * writing: POLLHUP): nothing can reach it any more */
};

/* How often a side that sent its end is looked at for having gone away altogether
 * (RELAY_GONE): a client that closes while the other side never ends its direction
 * frees the relay within this. */
#define RELAY_GONE_CHECK_MS 1000u

/* What the ended callback is told. */
struct relay_result {
        enum relay_end how;
        int side;          /* the side that failed (0 or 1), else -1 */
        int status;        /* its libuv error (-errno), else 0 */
        uint64_t bytes[2]; /* read from side 0 (written to side 1), from side 1 */
};

/* The owner's callbacks, with the ud it gave relay_start. */
struct relay_ops {
        /* The relay ended: it reads no more and will call nothing more. Called once, from
         * the loop, never from inside a relay_* call. The owner frees it (here or later),
         * then closes the streams. */
        void (*ended)(struct relay *r, const struct relay_result *res, void *ud);
        /* Optional (NULL): bytes were read from side from and queued to the other side;
         * bytes are the counts so far, both ways. Must not free the relay. */
        void (*progress)(struct relay *r, int from, const uint64_t bytes[2], void *ud);
};

/* The water marks and the idle time. */
struct relay_bounds {
        size_t high_bytes; /* a direction's queue above it: its source paused, until half */
        uint64_t idle_ms;  /* nothing read either way for this long ends it; 0: never */
        size_t read_bytes; /* the most one read takes; 0: RELAY_READ_BYTES. Larger reads
                            * cost fewer system calls a byte (a bulk stream: portfwd.c) */
};

/* Starts relaying between side 0 and side 1, both on the same loop, connected and not
 * reading: from this call until relay_free their data fields are the relay's (relay_free
 * gives back what was there), and the owner neither reads nor shuts them down. ops and
 * bounds are copied. Returns 0 with *ret, or -errno (-ENOMEM, or what uv_read_start said;
 * then nothing is read, the data fields are given back and what was made goes by itself). */
int relay_start(uv_stream_t *side0, uv_stream_t *side1, const struct relay_bounds *bounds,
                const struct relay_ops *ops, void *ud, struct relay **ret);

/* Queues len bytes of data (copied) to side to, in the queue of the direction that writes
 * to it, behind what that direction queued already: a reply or a request head the owner
 * writes before the bytes it relays. They are not counted in the bytes read. Returns 0, or
 * -errno (-ENOMEM, or what uv_write said); the relay is left as it was, the owner decides
 * whether it ends. Not after it ended. */
int relay_send(struct relay *r, int to, const void *data, size_t len);

/* The memory a direction's queued writes hold (the direction that reads from side from),
 * as counted against high_bytes. */
size_t relay_queued_bytes(const struct relay *r, int from);

/* Stops r, ended or not (its ended callback is not called if it had not ended), and gives
 * the streams back; their queued writes and a half-close under way are left to finish or
 * to be cancelled when the owner closes the streams. The memory goes once those requests
 * and its timer are done. r must not be used after. Accepts NULL; returns NULL. */
struct relay *relay_free(struct relay *r);

#endif
