/* check_relay.c: unit tests of the byte relay (daemon/relay.c) on a loop of the test's own.
 * The relay's two sides are one end of each of two socketpairs (or TCP loopback pairs,
 * where a reset is wanted); the test drives the other ends, its two peers, on the same
 * loop: each writes a pattern that tells every byte's offset, and checks what it reads
 * against the pattern the other peer wrote.
 *
 * What is proved: megabytes both ways arrive intact, counted; a half-close from either
 * side is passed on while the other direction goes on, and the relay ends once both are;
 * a peer that does not read stops only the direction that writes to it (the other goes
 * on), the relay's queue stays under the high water mark plus one read, and all arrives
 * once the peer reads again; bytes the owner sends go first and are not counted; a reset
 * ends the relay once, saying which side and the counts; nothing either way for idle_ms
 * ends it, never sooner after a byte; and a relay freed in the middle of a transfer (with
 * writes and a half-close under way) calls nothing more, lets what it queued finish, and
 * leaves nothing behind: the loop closes cleanly (the ASan build proves no leak). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "relay.h"
#include "testutil.h"

#define MIB         (1024u * 1024u)
#define HIGH_BYTES  (256u * 1024u)
#define CHUNK_BYTES (64u * 1024u)
#define TICK_MS     10u
/* The most a direction may queue: the high water mark, then one more read. */
#define QUEUE_BOUND (HIGH_BYTES + RELAY_READ_BYTES + RELAY_WRITE_COST_BYTES)

union handle {
        uv_handle_t h;
        uv_stream_t s;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
};

/* A peer: the test's end of the pair whose other end is the relay's side i. */
struct peer {
        union handle h;
        unsigned seed;        /* of the pattern it writes */
        unsigned expect_seed; /* of the pattern it reads (the other peer's) */
        const char *prefix;   /* what it reads first (the owner's relay_send), or NULL */
        size_t chunk;         /* the most one of its writes carries; 0: CHUNK_BYTES */
        int paced;            /* one write a tick (each arrives as a read of its own) */
        uint64_t to_write;    /* bytes it writes in all */
        uint64_t written;     /* of them, handed to uv_write */
        uint64_t write_done;  /* of them, written */
        int in_flight;        /* writes under way */
        int shut_after;       /* shuts its side down once all is written */
        int shut_started;
        uint64_t got;           /* bytes read */
        int eof, read_err, bad; /* its end of stream; a read's error; a byte not expected */
};

struct chunk {
        uv_write_t req;
        struct peer *p;
        size_t len;
        char data[];
};

static uv_loop_t L;
static uv_timer_t tick;
static union handle side[2]; /* the relay's */
static struct peer P[2];
static uv_shutdown_t peer_shut[2];
static struct relay *R;
static struct relay_bounds bounds;
static int n_ended, free_in_ended;
static struct relay_result ended_res;
static uint64_t ended_ms, progress_ms; /* uv_now at the end, at the last progress */
static uint64_t progress_bytes[2];
static uint64_t max_step[2];   /* the most one progress call added, each way */
static size_t world_read_bytes; /* the bounds' read_bytes of the next world_begin */
static size_t max_queued[2];

static uint8_t pattern(uint64_t off, unsigned seed) {
        return (uint8_t)(off ^ (off >> 8) ^ (off >> 16) ^ (seed * 0x5bu));
}

/* ---- the peers ------------------------------------------------------------------------ */

static void peer_pump(struct peer *p);

static void on_peer_shut(uv_shutdown_t *req, int status) {
}

static void on_peer_written(uv_write_t *req, int status) {
        struct chunk *c = (struct chunk *)req;
        struct peer *p = c->p;

        p->in_flight--;
        if (status == 0)
                p->write_done += c->len;
        free(c);
        if (status == 0 && !p->paced)
                peer_pump(p);
}

/* Keeps two chunks of p's pattern under way until all is written, then shuts down. */
static void peer_pump(struct peer *p) {
        size_t most = p->chunk ? p->chunk : CHUNK_BYTES;

        while (p->in_flight < (p->paced ? 1 : 2) && p->written < p->to_write) {
                size_t len = p->to_write - p->written < most ? (size_t)(p->to_write - p->written)
                                                             : most;
                struct chunk *c = malloc(sizeof(*c) + len);
                uv_buf_t b;

                ck_assert_ptr_nonnull(c);
                for (size_t i = 0; i < len; i++)
                        c->data[i] = (char)pattern(p->written + i, p->seed);
                c->p = p;
                c->len = len;
                b = uv_buf_init(c->data, (unsigned)len);
                ck_assert_int_eq(uv_write(&c->req, &p->h.s, &b, 1, on_peer_written), 0);
                p->written += len;
                p->in_flight++;
                if (p->paced)
                        break;
        }
        if (p->shut_after && !p->shut_started && p->in_flight == 0 && p->written == p->to_write) {
                p->shut_started = 1;
                ck_assert_int_eq(uv_shutdown(&peer_shut[p - P], &p->h.s, on_peer_shut), 0);
        }
}

/* p writes n more bytes of its pattern (then shuts down if shut). */
static void peer_write(struct peer *p, uint64_t n, int shut) {
        p->to_write += n;
        p->shut_after = shut;
        peer_pump(p);
}

static void peer_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        char *b = malloc(CHUNK_BYTES);

        ck_assert_ptr_nonnull(b);
        *buf = uv_buf_init(b, CHUNK_BYTES);
}

static void on_peer_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct peer *p = s->data;
        size_t plen = p->prefix ? strlen(p->prefix) : 0;

        for (ssize_t i = 0; i < nread; i++, p->got++) {
                uint8_t want = p->got < plen ? (uint8_t)p->prefix[p->got]
                                             : pattern(p->got - plen, p->expect_seed);
                if ((uint8_t)buf->base[i] != want)
                        p->bad = 1;
        }
        free(buf->base);
        if (nread == UV_EOF)
                p->eof = 1;
        else if (nread < 0)
                p->read_err = (int)nread;
        if (nread < 0)
                uv_read_stop(s);
}

static void peer_read(struct peer *p) {
        ck_assert_int_eq(uv_read_start(&p->h.s, peer_alloc, on_peer_read), 0);
}

/* ---- the relay's owner ------------------------------------------------------------------ */

static void sample_queues(void) {
        for (int i = 0; R && i < 2; i++)
                if (relay_queued_bytes(R, i) > max_queued[i])
                        max_queued[i] = relay_queued_bytes(R, i);
}

static void on_ended(struct relay *r, const struct relay_result *res, void *ud) {
        ck_assert_ptr_eq(r, R);
        ck_assert_ptr_eq(ud, &side);
        n_ended++;
        ended_res = *res;
        ended_ms = uv_now(&L);
        if (free_in_ended)
                R = relay_free(R);
}

static void on_progress(struct relay *r, int from, const uint64_t bytes[2], void *ud) {
        ck_assert_ptr_eq(r, R);
        ck_assert(from == 0 || from == 1);
        ck_assert_uint_gt(bytes[from], progress_bytes[from]);
        if (bytes[from] - progress_bytes[from] > max_step[from])
                max_step[from] = bytes[from] - progress_bytes[from];
        progress_bytes[0] = bytes[0];
        progress_bytes[1] = bytes[1];
        progress_ms = uv_now(&L);
        sample_queues();
}

static const struct relay_ops ops = {.ended = on_ended, .progress = on_progress};

/* ---- the world --------------------------------------------------------------------------- */

static void on_tick(uv_timer_t *t) {
        sample_queues();
        for (int i = 0; i < 2; i++)
                if (P[i].paced)
                        peer_pump(&P[i]);
}

/* A connected TCP loopback pair into fds. */
static void tcp_pair(int fds[2]) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(l, 0);
        ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(l, 1), 0);
        ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &alen), 0);
        fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fds[0], 0);
        ck_assert_int_eq(connect(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
        fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(fds[1], 0);
        close(l);
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(fcntl(fds[i], F_SETFL, O_NONBLOCK), 0);
}

static void open_end(union handle *h, int fd, int tcp) {
        if (tcp) {
                ck_assert_int_eq(uv_tcp_init(&L, &h->tcp), 0);
                ck_assert_int_eq(uv_tcp_open(&h->tcp, fd), 0);
        } else {
                ck_assert_int_eq(uv_pipe_init(&L, &h->pipe, 0), 0);
                ck_assert_int_eq(uv_pipe_open(&h->pipe, fd), 0);
        }
}

/* A fresh loop, two pairs (TCP when tcp, else Unix socketpairs), and a relay over one end
 * of each, with the bounds high and idle_ms. */
static void world_begin(int tcp, size_t high, uint64_t idle_ms) {
        memset(P, 0, sizeof(P));
        memset(max_queued, 0, sizeof(max_queued));
        memset(progress_bytes, 0, sizeof(progress_bytes));
        memset(max_step, 0, sizeof(max_step));
        n_ended = free_in_ended = 0;
        /* As the daemon (main.c): a write to a reset connection fails, no signal. */
        signal(SIGPIPE, SIG_IGN);
        ck_assert_int_eq(uv_loop_init(&L), 0);
        ck_assert_int_eq(uv_timer_init(&L, &tick), 0);
        ck_assert_int_eq(uv_timer_start(&tick, on_tick, TICK_MS, TICK_MS), 0);
        for (int i = 0; i < 2; i++) {
                int fds[2];

                if (tcp)
                        tcp_pair(fds);
                else
                        ck_assert_int_eq(socketpair(AF_UNIX,
                                                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                                                    fds),
                                         0);
                open_end(&side[i], fds[0], tcp);
                open_end(&P[i].h, fds[1], tcp);
                P[i].h.h.data = &P[i];
                P[i].seed = i + 1;
                P[i].expect_seed = 2 - i;
        }
        side[0].h.data = side[1].h.data = &side;
        bounds = (struct relay_bounds){.high_bytes = high, .idle_ms = idle_ms,
                                       .read_bytes = world_read_bytes};
        ck_assert_int_eq(relay_start(&side[0].s, &side[1].s, &bounds, &ops, &side, &R), 0);
        ck_assert_ptr_nonnull(R);
}

static void close_handle(uv_handle_t *h) {
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

/* Frees the relay (if the test has not), closes every handle, and proves the loop has
 * nothing left: the relay's timer and every request it made came back. */
static void world_end(void) {
        R = relay_free(R);
        /* The streams are the owner's again, their data fields what it set. */
        ck_assert_ptr_eq(side[0].h.data, &side);
        ck_assert_ptr_eq(side[1].h.data, &side);
        close_handle((uv_handle_t *)&tick);
        for (int i = 0; i < 2; i++) {
                close_handle(&side[i].h);
                close_handle(&P[i].h.h);
        }
        ck_assert_int_eq(uv_run(&L, UV_RUN_DEFAULT), 0);
        ck_assert_int_eq(uv_loop_close(&L), 0);
}

static int64_t mono_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until pred() (checked after each turn), at most timeout_ms: 1 when it
 * came true. */
static int run_until(int (*pred)(void), int64_t timeout_ms) {
        int64_t end = mono_ms() + timeout_ms;

        while (mono_ms() < end) {
                uv_run(&L, UV_RUN_ONCE);
                sample_queues();
                if (pred())
                        return 1;
        }
        return 0;
}

static int never(void) {
        return 0;
}

/* Runs the loop for ms. */
static void run_for(int64_t ms) {
        (void)run_until(never, ms);
}

static int ended(void) {
        return n_ended > 0;
}

static uint64_t want_got[2];
static int got_all(void) {
        return P[0].got >= want_got[0] && P[1].got >= want_got[1];
}

static int both_eof(void) {
        return P[0].eof && P[1].eof && n_ended > 0;
}

static void assert_intact(const struct peer *p, uint64_t n) {
        ck_assert_msg(!p->bad, "peer %d read a byte the other did not write", (int)(p - P));
        ck_assert_uint_eq(p->got, n);
        ck_assert_int_eq(p->read_err, 0);
}

/* ---- the tests --------------------------------------------------------------------------- */

/* 4 MiB each way at once, over socketpairs and over TCP: intact, counted, and the relay
 * ends once both sides' ends were passed on, after the last byte. */
START_TEST(bytes_both_ways_intact) {
        for (int tcp = 0; tcp < 2; tcp++) {
                world_begin(tcp, HIGH_BYTES, 0);
                peer_read(&P[0]);
                peer_read(&P[1]);
                peer_write(&P[0], 4 * MIB, 1);
                peer_write(&P[1], 4 * MIB, 1);
                ck_assert(run_until(both_eof, 60000));
                run_for(50);
                ck_assert_int_eq(n_ended, 1);
                ck_assert_int_eq(ended_res.how, RELAY_ENDED);
                ck_assert_int_eq(ended_res.side, -1);
                ck_assert_uint_eq(ended_res.bytes[0], 4 * MIB);
                ck_assert_uint_eq(ended_res.bytes[1], 4 * MIB);
                ck_assert_uint_eq(progress_bytes[0], 4 * MIB);
                ck_assert_uint_eq(progress_bytes[1], 4 * MIB);
                assert_intact(&P[0], 4 * MIB);
                assert_intact(&P[1], 4 * MIB);
                ck_assert_uint_le(max_queued[0], QUEUE_BOUND);
                ck_assert_uint_le(max_queued[1], QUEUE_BOUND);
                world_end();
        }
}
END_TEST

/* A read takes at most the bounds' read_bytes (RELAY_READ_BYTES when 0): what one
 * progress call adds never passes it, and the bytes stay intact. */
START_TEST(read_bytes_bound_each_read) {
        static const size_t sizes[] = {4096, 0};

        for (size_t k = 0; k < 2; k++) {
                size_t want = sizes[k] ? sizes[k] : RELAY_READ_BYTES;

                world_read_bytes = sizes[k];
                world_begin(0, HIGH_BYTES, 0);
                peer_read(&P[0]);
                peer_read(&P[1]);
                peer_write(&P[0], 2 * MIB, 1);
                peer_write(&P[1], 2 * MIB, 1);
                ck_assert(run_until(both_eof, 60000));
                assert_intact(&P[0], 2 * MIB);
                assert_intact(&P[1], 2 * MIB);
                ck_assert_uint_le(max_step[0], want);
                ck_assert_uint_le(max_step[1], want);
                ck_assert_uint_gt(max_step[0], 0);
                world_end();
        }
        world_read_bytes = 0;
}
END_TEST

/* A client that closes (not only shuts down its writing) while the other side never
 * ends its own direction: what it sent is delivered whole, and the relay ends
 * RELAY_GONE naming its side, at once when the close came with its end, within
 * RELAY_GONE_CHECK_MS or so when it came after a half-close (which alone ends
 * nothing: the other direction may still have to flow). */
START_TEST(a_side_gone_after_its_end_ends_it) {
        for (int half_first = 0; half_first < 2; half_first++) {
                world_begin(0, HIGH_BYTES, 0);
                peer_read(&P[1]);
                peer_write(&P[0], MIB, half_first);
                want_got[0] = 0;
                want_got[1] = MIB;
                ck_assert(run_until(got_all, 30000));
                if (half_first) {
                        ck_assert(run_until(ended, 2500) == 0); /* the half-close alone */
                        ck_assert(P[1].eof);
                }
                close_handle(&P[0].h.h);
                ck_assert(run_until(ended, 3 * RELAY_GONE_CHECK_MS + 2000));
                ck_assert_int_eq(ended_res.how, RELAY_GONE);
                ck_assert_int_eq(ended_res.side, 0);
                ck_assert_uint_eq(ended_res.bytes[0], MIB);
                assert_intact(&P[1], MIB);
                world_end();
        }
}
END_TEST

static int other_eof;
static int other_saw_eof(void) {
        return P[other_eof].eof;
}

/* Side first ends after 1 MiB: its peer's end reaches the other peer after that MiB, and
 * the other direction then carries 4 MiB more; the relay ends only when the other side
 * ends too. Both ways round. */
START_TEST(half_close_passed_on_while_other_direction_flows) {
        for (int first = 0; first < 2; first++) {
                int other = !first;

                world_begin(0, HIGH_BYTES, 0);
                peer_read(&P[0]);
                peer_read(&P[1]);
                peer_write(&P[first], 1 * MIB, 1);
                other_eof = other;
                ck_assert(run_until(other_saw_eof, 30000));
                assert_intact(&P[other], 1 * MIB);
                ck_assert_int_eq(n_ended, 0);

                peer_write(&P[other], 4 * MIB, 0);
                want_got[first] = 4 * MIB;
                want_got[other] = 0;
                ck_assert(run_until(got_all, 30000));
                assert_intact(&P[first], 4 * MIB);
                ck_assert(!P[first].eof);
                ck_assert_int_eq(n_ended, 0);

                peer_write(&P[other], 0, 1);
                ck_assert(run_until(both_eof, 30000));
                ck_assert_int_eq(n_ended, 1);
                ck_assert_int_eq(ended_res.how, RELAY_ENDED);
                ck_assert_uint_eq(ended_res.bytes[first], 1 * MIB);
                ck_assert_uint_eq(ended_res.bytes[other], 4 * MIB);
                world_end();
        }
}
END_TEST

static int paused0(void) {
        return relay_queued_bytes(R, 0) > HIGH_BYTES;
}

/* Peer 1 does not read: the direction from side 0 queues past the high water mark and
 * stops reading side 0 (peer 0's writes wait), while 2 MiB go from side 1 to peer 0; the
 * queue stays under the mark plus one read. Once peer 1 reads, all 8 MiB arrive. */
START_TEST(stalled_reader_pauses_only_its_direction) {
        uint64_t held;

        world_begin(0, HIGH_BYTES, 0);
        peer_read(&P[0]);
        peer_write(&P[0], 8 * MIB, 1);
        ck_assert(run_until(paused0, 30000));
        held = progress_bytes[0];

        peer_write(&P[1], 2 * MIB, 0);
        want_got[0] = 2 * MIB;
        want_got[1] = 0;
        ck_assert(run_until(got_all, 30000));
        run_for(100);
        assert_intact(&P[0], 2 * MIB);
        ck_assert_uint_eq(progress_bytes[0], held); /* side 0 was read no more */
        ck_assert_uint_lt(P[0].write_done, 8 * MIB);
        ck_assert_uint_eq(P[1].got, 0);
        ck_assert_uint_gt(max_queued[0], HIGH_BYTES);
        ck_assert_uint_le(max_queued[0], QUEUE_BOUND);

        peer_read(&P[1]);
        want_got[1] = 8 * MIB;
        ck_assert(run_until(got_all, 60000));
        assert_intact(&P[1], 8 * MIB);
        ck_assert_uint_le(max_queued[0], QUEUE_BOUND);
        ck_assert_uint_le(max_queued[1], QUEUE_BOUND);
        peer_write(&P[1], 0, 1);
        ck_assert(run_until(both_eof, 30000));
        ck_assert_int_eq(n_ended, 1);
        ck_assert_int_eq(ended_res.how, RELAY_ENDED);
        ck_assert_uint_eq(ended_res.bytes[0], 8 * MIB);
        ck_assert_uint_eq(ended_res.bytes[1], 2 * MIB);
        world_end();
}
END_TEST

/* The heap in use (mallinfo2: the arena's and mmap's), or 0 where the allocator is not
 * glibc's (an ASan build's). */
static size_t heap_in_use(void) {
#if defined(__SANITIZE_ADDRESS__)
        return 0;
#else
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
#endif
}

/* Reads of 256 KiB buffers that carry 20,000 bytes each (a peer that writes smaller
 * pieces, one a tick) while the other peer does not read: the memory the relay's queue
 * holds stays near the high water mark, not a read buffer per piece (each was counted as
 * its bytes only, and the queue held 13 times the mark). */
START_TEST(small_reads_hold_no_big_buffers) {
        size_t before;

        world_read_bytes = 256u * 1024u;
        world_begin(0, HIGH_BYTES, 0);
        before = heap_in_use();
        P[0].chunk = 20000;
        P[0].paced = 1;
        peer_write(&P[0], 2 * MIB, 1);
        ck_assert(run_until(paused0, 30000));
        if (before)
                ck_assert_msg(heap_in_use() - before < 4 * HIGH_BYTES,
                              "a queue counted as %zu bytes holds %zu bytes of heap",
                              relay_queued_bytes(R, 0), heap_in_use() - before);
        ck_assert_uint_le(max_step[0], 20000);
        peer_read(&P[1]);
        want_got[0] = 0;
        want_got[1] = 2 * MIB;
        ck_assert(run_until(got_all, 60000));
        assert_intact(&P[1], 2 * MIB);
        world_end();
        world_read_bytes = 0;
}
END_TEST

/* What the owner sends before relaying (a reply, a request head) goes first, each way,
 * and is not counted in the bytes read. */
START_TEST(owner_bytes_go_first_uncounted) {
        world_begin(0, HIGH_BYTES, 0);
        P[0].prefix = "HTTP/1.1 200 Connection established\r\n\r\n";
        P[1].prefix = "GET / HTTP/1.1\r\n\r\n";
        ck_assert_int_eq(relay_send(R, 0, P[0].prefix, strlen(P[0].prefix)), 0);
        ck_assert_int_eq(relay_send(R, 1, P[1].prefix, strlen(P[1].prefix)), 0);
        ck_assert_uint_gt(relay_queued_bytes(R, 0) + relay_queued_bytes(R, 1), 0);
        peer_read(&P[0]);
        peer_read(&P[1]);
        peer_write(&P[0], 100000, 1);
        peer_write(&P[1], 70000, 1);
        ck_assert(run_until(both_eof, 30000));
        assert_intact(&P[0], strlen(P[0].prefix) + 70000);
        assert_intact(&P[1], strlen(P[1].prefix) + 100000);
        ck_assert_int_eq(ended_res.how, RELAY_ENDED);
        ck_assert_uint_eq(ended_res.bytes[0], 100000);
        ck_assert_uint_eq(ended_res.bytes[1], 70000);
        world_end();
}
END_TEST

/* Resets peer i's end of its TCP pair (an RST, not a FIN). */
static void reset_peer(int i) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        uv_os_fd_t fd;

        ck_assert_int_eq(uv_fileno(&P[i].h.h, &fd), 0);
        ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
        uv_close(&P[i].h.h, NULL);
}

/* A reset of side 0 once everything read was written: the relay ends once, a read that
 * failed on side 0, with the counts; what peer 1 sends afterwards is not read. */
START_TEST(reset_ends_once_with_counts) {
        world_begin(1, HIGH_BYTES, 0);
        peer_read(&P[0]);
        peer_read(&P[1]);
        peer_write(&P[0], 100000, 0);
        peer_write(&P[1], 50000, 0);
        want_got[0] = 50000;
        want_got[1] = 100000;
        ck_assert(run_until(got_all, 30000));
        ck_assert_int_eq(n_ended, 0);
        reset_peer(0);
        ck_assert(run_until(ended, 30000));
        peer_write(&P[1], 1 * MIB, 0);
        run_for(200);
        ck_assert_int_eq(n_ended, 1);
        ck_assert_int_eq(ended_res.how, RELAY_READ_FAILED);
        ck_assert_int_eq(ended_res.side, 0);
        ck_assert_int_eq(ended_res.status, UV_ECONNRESET);
        ck_assert_uint_eq(ended_res.bytes[0], 100000);
        ck_assert_uint_eq(ended_res.bytes[1], 50000);
        ck_assert_uint_eq(progress_bytes[1], 50000);
        world_end();
}
END_TEST

static int got_a_mib(void) {
        return P[1].got > 1 * MIB;
}

/* A reset of side 1 while 8 MiB flow to it: the relay ends once (a read or a write on
 * side 1 failed, whichever came first), freed in its own ended callback, with at least
 * what peer 1 read counted; nothing is called after. */
START_TEST(reset_mid_transfer_ends_once) {
        world_begin(1, HIGH_BYTES, 0);
        free_in_ended = 1;
        peer_read(&P[0]);
        peer_read(&P[1]);
        peer_write(&P[0], 8 * MIB, 0);
        ck_assert(run_until(got_a_mib, 30000));
        reset_peer(1);
        ck_assert(run_until(ended, 30000));
        run_for(200);
        ck_assert_int_eq(n_ended, 1);
        ck_assert_ptr_null(R);
        ck_assert_msg(ended_res.how == RELAY_READ_FAILED || ended_res.how == RELAY_WRITE_FAILED,
                      "ended %d", (int)ended_res.how);
        ck_assert_int_eq(ended_res.side, 1);
        ck_assert_int_lt(ended_res.status, 0);
        ck_assert_uint_ge(ended_res.bytes[0], P[1].got);
        ck_assert_uint_eq(ended_res.bytes[1], 0);
        ck_assert(!P[1].bad);
        world_end();
}
END_TEST

static int relay_read_all_of_1(void) {
        return progress_bytes[1] == 4 * MIB && progress_bytes[0] >= 1 * MIB;
}

static int peer0_done(void) {
        return P[0].eof;
}

/* Freed with megabytes queued each way and side 1's end waiting behind them, first with
 * the streams kept (what was queued still arrives, then the end), then at once with the
 * streams closed under it: nothing is called, and nothing is left. */
START_TEST(free_mid_transfer_leaks_nothing) {
        for (int keep = 1; keep >= 0; keep--) {
                uint64_t queued_to_0;

                /* A high mark no queue reaches: everything read is queued. */
                world_begin(0, 64 * MIB, 0);
                peer_write(&P[0], 4 * MIB, 0);
                peer_write(&P[1], 4 * MIB, 1);
                ck_assert(run_until(relay_read_all_of_1, 30000));
                run_for(50); /* peer 1's end, behind its last byte */
                ck_assert_uint_gt(relay_queued_bytes(R, 0), 0);
                ck_assert_uint_gt(relay_queued_bytes(R, 1), 0);
                queued_to_0 = progress_bytes[1];
                R = relay_free(R);
                if (keep) {
                        /* The writes queued to side 0 and the end behind them finish. */
                        peer_read(&P[0]);
                        peer_read(&P[1]);
                        ck_assert(run_until(peer0_done, 30000));
                        assert_intact(&P[0], queued_to_0);
                }
                ck_assert_int_eq(n_ended, 0);
                world_end();
                ck_assert_int_eq(n_ended, 0);
        }
}
END_TEST

static struct peer *pinger;
static void on_ping(uv_timer_t *t) {
        peer_write(pinger, 1, 0);
}

/* idle_ms 200: a byte every 20 ms for 1 s keeps the relay; then it ends as idle, never
 * sooner than 200 ms after the last byte read (however slow the machine). */
START_TEST(idle_ends_only_after_idle_ms) {
        uv_timer_t ping;

        world_begin(0, HIGH_BYTES, 200);
        peer_read(&P[1]);
        pinger = &P[0];
        ck_assert_int_eq(uv_timer_init(&L, &ping), 0);
        ck_assert_int_eq(uv_timer_start(&ping, on_ping, 20, 20), 0);
        run_for(1000);
        uv_close((uv_handle_t *)&ping, NULL);
        ck_assert(run_until(ended, 10000));
        ck_assert_int_eq(ended_res.how, RELAY_IDLE);
        ck_assert_uint_gt(progress_bytes[0], 0);
        ck_assert_uint_ge(ended_ms - progress_ms, 200);
        assert_intact(&P[1], progress_bytes[0]);
        world_end();
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("relay");
        TCase *tc = tcase_create("relay");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, bytes_both_ways_intact);
        tcase_add_test(tc, read_bytes_bound_each_read);
        tcase_add_test(tc, a_side_gone_after_its_end_ends_it);
        tcase_add_test(tc, half_close_passed_on_while_other_direction_flows);
        tcase_add_test(tc, stalled_reader_pauses_only_its_direction);
        tcase_add_test(tc, small_reads_hold_no_big_buffers);
        tcase_add_test(tc, owner_bytes_go_first_uncounted);
        tcase_add_test(tc, reset_ends_once_with_counts);
        tcase_add_test(tc, reset_mid_transfer_ends_once);
        tcase_add_test(tc, free_mid_transfer_leaks_nothing);
        tcase_add_test(tc, idle_ends_only_after_idle_ms);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
