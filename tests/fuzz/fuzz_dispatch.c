/* fuzz_dispatch.c: libFuzzer target for sbxd's request path: connection, framing, the
 * schema walk, decoding and every handler, against a daemon core without sandboxes.
 *
 * The core is built once, as main() builds it: a real store (SQLite) in a temporary
 * directory, a sandbox table, no cgroups, a configuration from config_init() whose init
 * helper is /nonexistent (so a CreateSandbox goes as far as spawning it, fails cleanly
 * and is recorded as failed: the fuzzer never creates a real sandbox), and a uv loop.
 * For each input one end of a socketpair becomes a struct conn, set up as the server's
 * on_connection does; the other end writes the input and reads (and decodes) every
 * response; the loop runs until the daemon has closed the connection and nothing is
 * left active. Afterwards no connection, sandbox or handle may remain.
 *
 * Input layout: byte 0 bit 0 set: the rest is written as it is (raw bytes, headers and
 * all); clear: the rest is a list of records [2-byte big-endian length][payload], each
 * sent as one well-formed frame, so that the fuzzer spends its time in the handlers.
 *
 * Seeds: SBX_FUZZ_WRITE_SEEDS=DIR build/fuzz/fuzz_dispatch writes the committed corpora,
 * its own into DIR/dispatch and fuzz_frame's into DIR/frame (e.g. DIR=tests/fuzz/corpus),
 * and exits: regenerate them when the schema changes. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "conn.h"
#include "frame.h"
#include "log.h"
#include "sandbox.h"
#include "sbxd.h"
#include "server.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- seeds: valid requests of every type ----------------------------------------------- */

#define SEED_KINDS 17

/* Packs request number kind (0 .. SEED_KINDS-1) into a new buffer (*ret, free()).
 * Returns its length, or 0 when kind is out of range or memory ran out. */
static size_t seed_request(int kind, uint64_t request_id, uint8_t **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
        Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        Sbx__V1__Label label = SBX__V1__LABEL__INIT, *labels[1] = {&label};
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        Sbx__V1__EnvVar ev = SBX__V1__ENV_VAR__INIT, *evs[1] = {&ev};
        Sbx__V1__CommandInput ci = SBX__V1__COMMAND_INPUT__INIT;
        Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        Sbx__V1__ListDirectory ld = SBX__V1__LIST_DIRECTORY__INIT;
        Sbx__V1__Stat st = SBX__V1__STAT__INIT;
        Sbx__V1__MakeDirectory md = SBX__V1__MAKE_DIRECTORY__INIT;
        Sbx__V1__Remove rm = SBX__V1__REMOVE__INIT;
        Sbx__V1__Terminate te = SBX__V1__TERMINATE__INIT;
        Sbx__V1__ListSandboxes ls = SBX__V1__LIST_SANDBOXES__INIT;
        Sbx__V1__GetSandbox gs = SBX__V1__GET_SANDBOX__INIT;
        Sbx__V1__SetTimeout sto = SBX__V1__SET_TIMEOUT__INIT;
        Sbx__V1__GetHistory gh = SBX__V1__GET_HISTORY__INIT;
        char *argv[] = {"sh", "-c", "echo hi"};
        char *writable[] = {"/tmp"};
        char *denied[] = {"/etc/hostname"};
        char *env[] = {"A=B"};
        uint32_t uids[] = {1000};
        Sbx__V1__SandboxState states[] = {SBX__V1__SANDBOX_STATE__READY,
                                          SBX__V1__SANDBOX_STATE__TERMINATED};
        uint8_t data[] = "hello\n";
        size_t len;

        req.has_request_id = 1;
        req.request_id = request_id;
        switch (kind) {
        case 0:
                hello.has_protocol_version = 1;
                hello.protocol_version = 1;
                hello.client_name = "fuzz";
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &hello;
                break;
        case 1:
        case 16:
                /* 16: a bare CreateSandbox, generated id and default policy. */
                if (kind == 1) {
                        cs.id = "fz";
                        lim.has_memory_bytes = 1;
                        lim.memory_bytes = 64 << 20;
                        lim.has_processes = 1;
                        lim.processes = 32;
                        lim.has_cpu_seconds = 1;
                        lim.cpu_seconds = 1.5;
                        pol.limits = &lim;
                        pol.n_writable_paths = 1;
                        pol.writable_paths = writable;
                        pol.n_denied_read_paths = 1;
                        pol.denied_read_paths = denied;
                        pol.has_network = 1;
                        pol.network = SBX__V1__NETWORK_MODE__NETWORK_FULL;
                        cs.policy = &pol;
                        cs.has_timeout_ms = 1;
                        cs.timeout_ms = 5000;
                        label.key = "k";
                        label.value = "v";
                        cs.n_labels = 1;
                        cs.labels = labels;
                        cs.n_env = 1;
                        cs.env = env;
                        cs.n_share_uids = 1;
                        cs.share_uids = uids;
                }
                req.body_case = SBX__V1__REQUEST__BODY_CREATE_SANDBOX;
                req.create_sandbox = &cs;
                break;
        case 2:
                rc.sandbox_id = "fz";
                rc.n_argv = 3;
                rc.argv = argv;
                rc.has_timeout_ms = 1;
                rc.timeout_ms = 1000;
                ev.name = "X";
                ev.value = "y";
                rc.n_env = 1;
                rc.env = evs;
                rc.has_stdin = 1;
                rc.stdin.data = data;
                rc.stdin.len = 6;
                rc.has_stream = 1;
                rc.stream = 1;
                req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
                req.run_command = &rc;
                break;
        case 3:
                ci.sandbox_id = "fz";
                ci.command_id = "c-1";
                ci.has_data = 1;
                ci.data.data = data;
                ci.data.len = 6;
                ci.has_eof = 1;
                ci.eof = 1;
                req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
                req.command_input = &ci;
                break;
        case 4:
                cc.sandbox_id = "fz";
                cc.command_id = "c-1";
                req.body_case = SBX__V1__REQUEST__BODY_CANCEL_COMMAND;
                req.cancel_command = &cc;
                break;
        case 5:
                rf.sandbox_id = "fz";
                rf.path = "/workspace/a.txt";
                rf.has_offset = rf.has_limit = 1;
                rf.offset = 1;
                rf.limit = 100;
                req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
                req.read_file = &rf;
                break;
        case 6:
                wf.sandbox_id = "fz";
                wf.path = "a/b.txt";
                wf.has_data = 1;
                wf.data.data = data;
                wf.data.len = 6;
                wf.has_mode = 1;
                wf.mode = 0600;
                wf.has_create_parents = 1;
                wf.create_parents = 1;
                req.body_case = SBX__V1__REQUEST__BODY_WRITE_FILE;
                req.write_file = &wf;
                break;
        case 7:
                ld.sandbox_id = "fz";
                ld.path = "/";
                ld.has_limit = 1;
                ld.limit = 10;
                req.body_case = SBX__V1__REQUEST__BODY_LIST_DIRECTORY;
                req.list_directory = &ld;
                break;
        case 8:
                st.sandbox_id = "fz";
                st.path = "../../etc/passwd";
                req.body_case = SBX__V1__REQUEST__BODY_STAT;
                req.stat = &st;
                break;
        case 9:
                md.sandbox_id = "fz";
                md.path = "d/e";
                md.has_parents = 1;
                md.parents = 1;
                req.body_case = SBX__V1__REQUEST__BODY_MAKE_DIRECTORY;
                req.make_directory = &md;
                break;
        case 10:
                rm.sandbox_id = "fz";
                rm.path = "d";
                rm.has_recursive = 1;
                rm.recursive = 1;
                req.body_case = SBX__V1__REQUEST__BODY_REMOVE;
                req.remove = &rm;
                break;
        case 11:
                te.sandbox_id = "fz";
                req.body_case = SBX__V1__REQUEST__BODY_TERMINATE;
                req.terminate = &te;
                break;
        case 12:
                label.key = "k";
                ls.n_labels = 1;
                ls.labels = labels;
                ls.n_states = 2;
                ls.states = states;
                ls.has_include_ended = 1;
                ls.include_ended = 1;
                ls.has_limit = 1;
                ls.limit = 5;
                req.body_case = SBX__V1__REQUEST__BODY_LIST_SANDBOXES;
                req.list_sandboxes = &ls;
                break;
        case 13:
                gs.sandbox_id = "fz";
                req.body_case = SBX__V1__REQUEST__BODY_GET_SANDBOX;
                req.get_sandbox = &gs;
                break;
        case 14:
                sto.sandbox_id = "fz";
                sto.has_timeout_ms = 1;
                sto.timeout_ms = 10000;
                req.body_case = SBX__V1__REQUEST__BODY_SET_TIMEOUT;
                req.set_timeout = &sto;
                break;
        case 15:
                gh.sandbox_id = "fz";
                gh.has_after_seq = 1;
                gh.after_seq = 0;
                gh.has_limit = 1;
                gh.limit = 3;
                req.body_case = SBX__V1__REQUEST__BODY_GET_HISTORY;
                req.get_history = &gh;
                break;
        default:
                return 0;
        }
        len = sbx__v1__request__get_packed_size(&req);
        *ret = malloc(len ? len : 1);
        if (!*ret)
                return 0;
        sbx__v1__request__pack(&req, *ret);
        return len;
}

/* Writes len bytes to DIR/NAME. Returns 0 or -errno. */
static int seed_write(const char *dir, const char *name, const uint8_t *p, size_t len) {
        char path[4096];
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        if (len && fwrite(p, 1, len, f) != len) {
                fclose(f);
                return -EIO;
        }
        return fclose(f) == 0 ? 0 : -errno;
}

/* The seeds of fuzz_frame (see its input layout): valid requests as frames, each alone,
 * and all in one stream copied in small chunks or received with a small maximum. */
static void write_frame_seeds(const char *dir) {
        uint8_t stream[16384];
        size_t len = 0;
        int kind, n = 0;
        char name[64];

        for (kind = 0; kind < SEED_KINDS; kind++) {
                uint8_t *p = NULL, one[4096];
                size_t plen = seed_request(kind, (uint64_t)kind + 1, &p);
                if (!plen || plen + 8 > sizeof(one) || len + plen + 4 > sizeof(stream)) {
                        free(p);
                        continue;
                }
                /* max 64 MiB, prepare/commit, one chunk */
                one[0] = 6;
                one[1] = 0;
                one[2] = 0;
                frame_header_put(one + 3, (uint32_t)plen);
                memcpy(one + 7, p, plen);
                snprintf(name, sizeof(name), "seed-req-%02d", kind);
                if (seed_write(dir, name, one, plen + 7) == 0)
                        n++;
                frame_header_put(stream + len, (uint32_t)plen);
                memcpy(stream + len + 4, p, plen);
                len += plen + 4;
                free(p);
        }
        {
                /* Every request in one stream, copied in chunks of 1, 7 and 3 bytes. */
                uint8_t all[16384 + 8];
                all[0] = 4;
                all[1] = 1;
                all[2] = 3;
                all[3] = 0;
                all[4] = 6;
                all[5] = 2;
                memcpy(all + 6, stream, len);
                if (seed_write(dir, "seed-all-split", all, len + 6) == 0)
                        n++;
                /* The same stream received in place, with a 100-byte maximum. */
                all[0] = 3;
                all[1] = 0;
                if (seed_write(dir, "seed-all-small-max", all, len + 6) == 0)
                        n++;
        }
        fprintf(stderr, "fuzz_dispatch: wrote %d fuzz_frame seeds into %s\n", n, dir);
}

/* ---- the target --------------------------------------------------------------------- */

static struct sbxd D;
static struct server S;
static struct config cfg;
static uv_loop_t loop;
static char base[64];

/* The client side of one input. */
struct peer {
        uv_poll_t poll;
        int fd;
        const uint8_t *out;
        size_t out_len, out_off;
        int shut;
        struct frame_reader reader;
        unsigned responses;
};

static void peer_closed(uv_handle_t *h) {
        struct peer *p = h->data;
        close(p->fd);
        p->fd = -1;
}

static void peer_read(struct peer *p) {
        for (;;) {
                uint8_t *dst;
                size_t room;
                ssize_t n;
                const uint8_t *f;
                size_t flen;
                int k;

                assert(frame_reader_prepare(&p->reader, &dst, &room) == 0);
                n = read(p->fd, dst, room);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        /* The daemon closed the connection: this input is done. */
                        uv_poll_stop(&p->poll);
                        uv_close((uv_handle_t *)&p->poll, peer_closed);
                        return;
                }
                frame_reader_commit(&p->reader, (size_t)n);
                while ((k = frame_reader_next(&p->reader, &f, &flen)) == 1) {
                        /* Whatever the daemon says must be a well-formed Response with a
                         * status. */
                        Sbx__V1__Response *resp = sbx__v1__response__unpack(NULL, flen, f);
                        assert(resp);
                        assert(resp->status && resp->status->has_code);
                        assert(resp->status->code != SBX__V1__CODE__OK ||
                               resp->body_case != SBX__V1__RESPONSE__BODY__NOT_SET);
                        sbx__v1__response__free_unpacked(resp, NULL);
                        p->responses++;
                }
                assert(k == 0); /* the daemon never sends an oversized frame */
        }
}

static void on_peer(uv_poll_t *h, int status, int events) {
        struct peer *p = h->data;

        if (status < 0) {
                uv_poll_stop(&p->poll);
                uv_close((uv_handle_t *)&p->poll, peer_closed);
                return;
        }
        if (events & UV_WRITABLE) {
                while (p->out_off < p->out_len) {
                        ssize_t n = send(p->fd, p->out + p->out_off, p->out_len - p->out_off,
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                break;
                        if (n <= 0) {
                                /* The daemon closed its end first: stop writing. */
                                p->out_off = p->out_len;
                                break;
                        }
                        p->out_off += (size_t)n;
                }
                if (p->out_off == p->out_len && !p->shut) {
                        /* All sent: the daemon sees EOF after it. */
                        shutdown(p->fd, SHUT_WR);
                        p->shut = 1;
                        uv_poll_start(&p->poll, UV_READABLE | UV_DISCONNECT, on_peer);
                }
        }
        if (events & (UV_READABLE | UV_DISCONNECT))
                peer_read(p);
}

/* A connection on fd, served as the daemon serves an accepted one. */
static void conn_on(int fd) {
        assert(server_serve_fd(&S, fd) == 0);
}

/* Turns records [len16][payload] into frames. Returns the stream (free()) in *ret. */
static size_t framed(const uint8_t *p, size_t n, uint8_t **ret) {
        uint8_t *out = malloc(n / 2 * 6 + n + 8);
        size_t o = 0;
        assert(out);
        while (n >= 2) {
                size_t len = (size_t)p[0] << 8 | p[1];
                p += 2;
                n -= 2;
                if (len > n)
                        len = n;
                frame_header_put(out + o, (uint32_t)len);
                memcpy(out + o + 4, p, len);
                o += len + 4;
                p += len;
                n -= len;
        }
        *ret = out;
        return o;
}

static int count_live(struct sandbox *sb, void *ud) {
        (*(unsigned *)ud)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct peer p;
        uint8_t *stream = NULL;
        int sv[2];
        unsigned live = 0;

        if (size < 1)
                return 0;
        memset(&p, 0, sizeof(p));
        if (data[0] & 1) {
                p.out = data + 1;
                p.out_len = size - 1;
        } else {
                p.out_len = framed(data + 1, size - 1, &stream);
                p.out = stream;
        }
        assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        p.fd = sv[1];
        frame_reader_init(&p.reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        conn_on(sv[0]);
        assert(uv_poll_init(&loop, &p.poll, p.fd) == 0);
        p.poll.data = &p;
        uv_poll_start(&p.poll, UV_READABLE | UV_WRITABLE | UV_DISCONNECT, on_peer);

        uv_run(&loop, UV_RUN_DEFAULT);

        /* Everything of this input is gone: the connection, any failed sandbox, every
         * handle. */
        assert(p.fd == -1);
        assert(S.conns == NULL && S.n_conns == 0);
        sbxtab_foreach(D.sandboxes, count_live, &live);
        assert(live == 0 && sbxtab_count(D.sandboxes) == 0);
        assert(uv_loop_alive(&loop) == 0);
        frame_reader_free(&p.reader);
        free(stream);
        return 0;
}

static uv_prepare_t turn_prepare;
static uv_check_t turn_check;
static struct conn_held held; /* D.held: the replies held for the end of the turn */

static void end_turn(void) {
        (void)store_commit(D.store);
        conn_release_held(&held);
}

static void on_turn_prepare(uv_prepare_t *h) {
        end_turn();
}

static void on_turn_check(uv_check_t *h) {
        end_turn();
}

static void cleanup(void) {
        char cmd[128];
        uv_close((uv_handle_t *)&turn_prepare, NULL);
        uv_close((uv_handle_t *)&turn_check, NULL);
        sbxtab_free(D.sandboxes);
        D.sandboxes = NULL;
        D.store = store_close(D.store);
        cgroup_env_free(D.cgroups);
        D.cgroups = NULL;
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        config_free(&cfg);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        if (system(cmd) != 0)
                fprintf(stderr, "fuzz_dispatch: cannot remove %s\n", base);
}

static void write_dispatch_seeds(const char *dir) {
        int kind, n = 0;
        uint8_t all[65536];
        size_t all_len = 1;
        char name[64];

        all[0] = 0;
        for (kind = 0; kind < SEED_KINDS; kind++) {
                uint8_t *p = NULL, one[4096];
                size_t plen = seed_request(kind, (uint64_t)kind + 1, &p);
                if (!plen || plen + 3 > sizeof(one) || all_len + plen + 2 > sizeof(all)) {
                        free(p);
                        continue;
                }
                /* Framed mode: [0][len16][payload]. */
                one[0] = 0;
                one[1] = (uint8_t)(plen >> 8);
                one[2] = (uint8_t)plen;
                memcpy(one + 3, p, plen);
                snprintf(name, sizeof(name), "seed-req-%02d", kind);
                if (seed_write(dir, name, one, plen + 3) == 0)
                        n++;
                memcpy(all + all_len, one + 1, plen + 2);
                all_len += plen + 2;
                /* Raw mode: [1][header][payload]. */
                one[0] = 1;
                frame_header_put(one + 1, (uint32_t)plen);
                memcpy(one + 5, p, plen);
                snprintf(name, sizeof(name), "seed-raw-%02d", kind);
                if (seed_write(dir, name, one, plen + 5) == 0)
                        n++;
                free(p);
        }
        /* Every request, pipelined on one connection. */
        if (seed_write(dir, "seed-all", all, all_len) == 0)
                n++;
        fprintf(stderr, "fuzz_dispatch: wrote %d seeds into %s\n", n, dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        const char *seeds = getenv("SBX_FUZZ_WRITE_SEEDS");
        char path[256];
        int r;

        if (seeds && seeds[0]) {
                snprintf(path, sizeof(path), "%s/dispatch", seeds);
                (void)mkdir(path, 0755);
                write_dispatch_seeds(path);
                snprintf(path, sizeof(path), "%s/frame", seeds);
                (void)mkdir(path, 0755);
                write_frame_seeds(path);
                exit(0);
        }
        /* Quiet: the daemon's log would drown libFuzzer's own output. */
        log_set_level((enum log_level)0);
        snprintf(base, sizeof(base), "/tmp/sbx-fuzz.XXXXXX");
        if (!mkdtemp(base))
                abort();
        if (config_init(&cfg, geteuid()) < 0)
                abort();
        free(cfg.state_dir);
        free(cfg.init_path);
        cfg.state_dir = strdup(base);
        /* Never a real sandbox: spawning the init helper fails at once; no warm pool. */
        cfg.init_path = strdup("/nonexistent/sbx-init");
        cfg.warm = 0;
        assert(cfg.state_dir && cfg.init_path);

        memset(&D, 0, sizeof(D));
        memset(&S, 0, sizeof(S));
        S.lock_fd = -1;
        S.d = &D;
        D.cfg = &cfg;
        D.euid = geteuid();
        D.egid = getegid();
        D.server = &S;
        snprintf(path, sizeof(path), "%s/sandboxes", base);
        if (mkdir(path, 0711) < 0)
                abort();
        snprintf(path, sizeof(path), "%s/sbxd.db", base);
        r = store_open(path, &D.store);
        if (r < 0) {
                fprintf(stderr, "fuzz_dispatch: store_open: %s\n", store_last_error(NULL));
                abort();
        }
        if (uv_loop_init(&loop) < 0)
                abort();
        D.loop = &loop;
        D.held = &held;
        /* As sbxd's main.c does at the end of each loop turn: commit the records, then
         * write the replies held for them. Unreferenced: they keep no loop alive. */
        uv_prepare_init(&loop, &turn_prepare);
        uv_check_init(&loop, &turn_check);
        uv_unref((uv_handle_t *)&turn_prepare);
        uv_unref((uv_handle_t *)&turn_check);
        uv_prepare_start(&turn_prepare, on_turn_prepare);
        uv_check_start(&turn_check, on_turn_check);
        /* A cgroup file that does not exist: no cgroups at all. */
        if (cgroup_env_new("/nonexistent", "/nonexistent/cgroup", "sbxd-fuzz", 0, &D.cgroups) < 0)
                abort();
        snprintf(D.features.cgroup_version, sizeof(D.features.cgroup_version), "%s",
                 cgroup_version_name(D.cgroups->version));
        D.features.rootless = D.euid != 0;
        D.features.user_namespaces = 1;
        D.features.seccomp = 1;
        D.features.openat2 = 1;
        if (sbxtab_new(&D, &D.sandboxes) < 0)
                abort();
        atexit(cleanup);
        return 0;
}
