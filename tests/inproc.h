/* inproc.h: an sbxd core in the test's own process, for the unit suites of the layers
 * above the sandboxes (check_conn, check_server, check_turn, check_rpc), and the
 * client's end of a connection to it.
 *
 * The core is what sbxd's main() builds, minus the sandboxes: a configuration from
 * config_init(), a temporary state directory with a real store, a uv loop, and the
 * end-of-turn hooks that commit the records and then write the held replies (turn.h),
 * and a timer that keeps the loop alive as the daemon's listener does. No cgroups, and
 * no sandbox table unless core_add_sandboxes() gives it an empty one (the request layer
 * looks every sandbox id up there): nothing here starts a sandbox. core_free() proves
 * the loop closed cleanly (every handle, every connection gone, the table empty) and
 * removes the directory.
 * The fuzz harness (tests/fuzz/fuzz_dispatch.c) builds the same core by hand.
 *
 * A peer is the client's end of a socket, nonblocking, read frame by frame while the
 * test runs the loop. Everything here is static: the unit test rule links one test file
 * with the daemon's objects. Failures abort the test through Check's assertions. */
#ifndef SBX_TEST_INPROC_H
#define SBX_TEST_INPROC_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "frame.h"
#include "log.h"
#include "sbx.pb-c.h"
#include "sbxd.h"
#include "sbxtab.h"
#include "store.h"
#include "turn.h"

struct core {
        struct config cfg;
        struct sbxd d;
        struct turn turn;
        uv_timer_t listener;    /* stands in for the listening socket: keeps the loop alive */
        uv_loop_t loop;
        char dir[64];
};

static inline void on_listener(uv_timer_t *t) {
}

/* Each core's directory is named after the test program's own process, the runner,
 * which forks each test: the runner removes them all when it exits, also the ones a
 * failed test left (Check ends it with _exit, before its core_free). */
static pid_t inproc_runner;

__attribute__((constructor)) static void inproc_note_runner(void) {
        inproc_runner = getpid();
}

__attribute__((destructor)) static void inproc_remove_dirs(void) {
        char cmd[96];

        if (getpid() != inproc_runner)
                return;
        snprintf(cmd, sizeof(cmd), "rm -rf /tmp/sbx-inproc.%d.*", (int)inproc_runner);
        if (system(cmd) != 0)
                fprintf(stderr, "inproc: cannot remove /tmp/sbx-inproc.%d.*\n", (int)inproc_runner);
}

/* Builds the core. Quiet unless SBX_TEST_LOG=debug (or another level) is set. */
static inline void core_init(struct core *k) {
        const char *level = getenv("SBX_TEST_LOG");
        enum log_level lv = (enum log_level)0;
        char path[128];

        memset(k, 0, sizeof(*k));
        if (level)
                ck_assert_int_eq(log_parse_level(level, &lv), 0);
        log_set_level(lv);
        snprintf(k->dir, sizeof(k->dir), "/tmp/sbx-inproc.%d.XXXXXX", (int)inproc_runner);
        ck_assert_ptr_nonnull(mkdtemp(k->dir));
        ck_assert_int_eq(config_init(&k->cfg, geteuid()), 0);
        free(k->cfg.state_dir);
        k->cfg.state_dir = strdup(k->dir);
        ck_assert_ptr_nonnull(k->cfg.state_dir);
        k->cfg.warm = 0;
        snprintf(path, sizeof(path), "%s/sbxd.db", k->dir);
        ck_assert_int_eq(store_open(path, &k->d.store), 0);
        ck_assert_int_eq(uv_loop_init(&k->loop), 0);
        k->d.loop = &k->loop;
        k->d.cfg = &k->cfg;
        k->d.euid = geteuid();
        k->d.egid = getegid();
        turn_start(&k->turn, &k->d);
        /* The daemon's listener keeps its loop alive, so that the end of each turn runs
         * even when no connection reads (one that was refused, say). */
        ck_assert_int_eq(uv_timer_init(&k->loop, &k->listener), 0);
        ck_assert_int_eq(uv_timer_start(&k->listener, on_listener, 60000, 60000), 0);
}

/* Gives the core an empty sandbox table, as sbxd's main() does (without cgroups, and
 * with no warm pool: cfg.warm is 0), so that the request layer (rpc.c) can look ids up:
 * an id not in it is answered from the records in the store. core_free() frees it. */
static inline void core_add_sandboxes(struct core *k) {
        ck_assert_ptr_null(k->d.sandboxes);
        ck_assert_int_eq(sbxtab_new(&k->d, &k->d.sandboxes), 0);
}

/* Runs the loop without blocking, n times. */
static inline void core_turns(struct core *k, int n) {
        while (n-- > 0)
                uv_run(&k->loop, UV_RUN_NOWAIT);
}

static inline int64_t core_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until done(ud) says non-zero (asked once after each turn), for at most
 * timeout_ms. Returns 1 when done, 0 on timeout. */
static inline int core_run_until(struct core *k, int (*done)(void *ud), void *ud,
                                 int timeout_ms) {
        int64_t end = core_now_ms() + timeout_ms;

        for (;;) {
                uv_run(&k->loop, UV_RUN_NOWAIT);
                if (done(ud))
                        return 1;
                if (core_now_ms() > end)
                        return 0;
                usleep(200);
        }
}

/* Takes the core down. Every connection must be closed by now (their peers gone). */
static inline void core_free(struct core *k) {
        int i;

        turn_stop(&k->turn);
        uv_close((uv_handle_t *)&k->listener, NULL);
        for (i = 0; i < 100 && uv_loop_alive(&k->loop); i++)
                uv_run(&k->loop, UV_RUN_NOWAIT);
        ck_assert_int_eq(uv_loop_close(&k->loop), 0);
        if (k->d.sandboxes) {
                ck_assert_uint_eq(sbxtab_count(k->d.sandboxes), 0);
                sbxtab_free(k->d.sandboxes);
                k->d.sandboxes = NULL;
        }
        k->d.store = store_close(k->d.store);
        config_free(&k->cfg);
        {
                char cmd[128];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", k->dir);
                ck_assert_int_eq(system(cmd), 0);
        }
}

/* ---- the client's end -------------------------------------------------------------- */

struct peer {
        int fd;
        int eof;
        struct frame_reader reader;
};

/* A connected pair: the peer's end in *p (nonblocking), the daemon's end returned. */
static inline int peer_pair(struct peer *p) {
        int sv[2];

        memset(p, 0, sizeof(*p));
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        p->fd = sv[0];
        frame_reader_init(&p->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        return sv[1];
}

/* Takes over fd, a connected socket, as a peer (made nonblocking). */
static inline void peer_adopt(struct peer *p, int fd) {
        memset(p, 0, sizeof(*p));
        ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
        p->fd = fd;
        frame_reader_init(&p->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
}

static inline void peer_close(struct peer *p) {
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
        frame_reader_free(&p->reader);
}

/* Writes all of buf (the daemon's end may need loop turns to take it: k). */
static inline void peer_write(struct core *k, struct peer *p, const void *buf,
                              size_t len) {
        const uint8_t *b = buf;
        int64_t end = core_now_ms() + 5000;

        while (len > 0) {
                ssize_t n = send(p->fd, b, len, MSG_NOSIGNAL);
                if (n < 0) {
                        ck_assert_msg(errno == EAGAIN || errno == EINTR, "send: %s",
                                      strerror(errno));
                        ck_assert_msg(core_now_ms() < end, "the daemon does not read");
                        core_turns(k, 1);
                        continue;
                }
                b += n;
                len -= (size_t)n;
        }
}

/* Writes one frame around payload. */
static inline void peer_send_frame(struct core *k, struct peer *p, const void *payload,
                                   size_t len) {
        uint8_t hdr[4];

        frame_header_put(hdr, (uint32_t)len);
        peer_write(k, p, hdr, 4);
        if (len)
                peer_write(k, p, payload, len);
}

/* Packs req into a frame and sends it. */
static inline void peer_send_request(struct core *k, struct peer *p,
                                     const Sbx__V1__Request *req) {
        size_t len = sbx__v1__request__get_packed_size(req);
        uint8_t *buf = malloc(len ? len : 1);

        ck_assert_ptr_nonnull(buf);
        sbx__v1__request__pack(req, buf);
        peer_send_frame(k, p, buf, len);
        free(buf);
}

/* Sends Hello with request id rid. */
static inline void peer_send_hello(struct core *k, struct peer *p, uint64_t rid) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;

        hello.has_protocol_version = 1;
        hello.protocol_version = SBX_PROTOCOL_VERSION;
        req.has_request_id = 1;
        req.request_id = rid;
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &hello;
        peer_send_request(k, p, &req);
}

/* One read of what has arrived, without blocking, into the reader; sets eof at the
 * end. Returns 1 when bytes came. (One read at a time: the reader makes room for the
 * frame in progress, and only a byte more once a whole frame waits to be taken.) */
static inline int peer_read_once(struct peer *p) {
        uint8_t *dst;
        size_t room;
        ssize_t n;

        if (p->eof)
                return 0;
        ck_assert_int_eq(frame_reader_prepare(&p->reader, &dst, &room), 0);
        do
                n = read(p->fd, dst, room);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno == EAGAIN)
                return 0;
        if (n <= 0) {
                p->eof = 1;
                return 0;
        }
        frame_reader_commit(&p->reader, (size_t)n);
        return 1;
}

/* The next response, when a whole one has arrived: 1 with *ret (free with
 * sbx__v1__response__free_unpacked), else 0. */
static inline int peer_next(struct peer *p, Sbx__V1__Response **ret) {
        const uint8_t *f;
        size_t len;
        int r;

        for (;;) {
                r = frame_reader_next(&p->reader, &f, &len);
                ck_assert_int_ge(r, 0);
                if (r == 1)
                        break;
                if (!peer_read_once(p))
                        return 0;
        }
        *ret = sbx__v1__response__unpack(NULL, len, f);
        ck_assert_ptr_nonnull(*ret);
        return 1;
}

struct peer_wait {
        struct peer *p;
        Sbx__V1__Response *resp;
};

static inline int peer_wait_done(void *ud) {
        struct peer_wait *w = ud;
        return peer_next(w->p, &w->resp) || w->p->eof;
}

/* Runs the loop until a response arrives (returned) or the daemon closes the
 * connection (NULL), for at most 5 s. */
static inline Sbx__V1__Response *peer_wait(struct core *k, struct peer *p) {
        struct peer_wait w = {p, NULL};

        ck_assert_msg(core_run_until(k, peer_wait_done, &w, 5000), "no response in 5 s");
        if (!w.resp)
                peer_next(p, &w.resp);
        return w.resp;
}

/* Drops every response that has arrived; 1 once the daemon has closed its end. */
static inline int peer_eof_done(void *ud) {
        struct peer *p = ud;
        Sbx__V1__Response *r;

        while (peer_next(p, &r))
                sbx__v1__response__free_unpacked(r, NULL);
        return p->eof;
}

/* Runs the loop until the daemon has closed the connection, for at most 5 s; every
 * frame left unread is dropped. */
static inline void peer_wait_eof(struct core *k, struct peer *p) {
        ck_assert_msg(core_run_until(k, peer_eof_done, p, 5000), "the connection stays open");
}

/* Waits for a status-only response and checks its request id and code, and that its
 * message contains what (when not NULL). */
static inline void peer_expect_status(struct core *k, struct peer *p, uint64_t rid,
                                      Sbx__V1__Code code, const char *what) {
        Sbx__V1__Response *r = peer_wait(k, p);

        ck_assert_msg(r != NULL, "closed without a status");
        ck_assert_ptr_nonnull(r->status);
        ck_assert_uint_eq(r->request_id, rid);
        ck_assert_int_eq(r->status->code, code);
        if (what)
                ck_assert_msg(r->status->message && strstr(r->status->message, what),
                              "status '%s' lacks '%s'", r->status->message, what);
        sbx__v1__response__free_unpacked(r, NULL);
}

#endif
