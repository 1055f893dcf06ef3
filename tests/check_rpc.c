/* check_rpc.c: unit tests of sbxd's request layer (rpc.c), in this process, without a
 * daemon process: the core of tests/inproc.h with an empty sandbox table and a store
 * holding the records each test writes, and connections on socketpairs served by the
 * server's real handlers (server_serve_fd), as the fuzz harness feeds its frames.
 * Everything goes in as frames and comes back as responses; nothing here starts a
 * sandbox, so every sandbox a test names is on record only (ended, or another user's).
 *
 * Schema validation: malformed protobuf and unknown fields (at any depth) are answered
 * with INVALID_ARGUMENT and request id 0 and close the connection; a NUL byte inside a
 * string answers that request only; the deepest nesting the schema allows; request_id
 * missing or 0; a request without a body. Hello. For every request naming a sandbox: a
 * missing sandbox_id, an unknown id and another user's id (NOT_FOUND, one text for
 * both), an ended sandbox on record (ENDED, or its record for GetSandbox and
 * Terminate). ListSandboxes and its filters over the records, GetHistory's paging,
 * CancelCommand's signals, SetTimeout without timeout_ms, and the code tables.
 *
 * As root, "the caller" is a connection made by a child that became CALLER_UID_AS_ROOT
 * (root may see every sandbox, which would hide the checks); otherwise it is this
 * process's own uid. "Another user" is the caller's uid + 1. */
#include <grp.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "inproc.h"
#include "rpc.h"
#include "server.h"
#include "testutil.h"

static struct core K;
static struct server S;

/* The uid of the caller's connections as root, and the owner of "other" records. */
#define CALLER_UID_AS_ROOT 4242u

static uid_t me, other;

static void begin(void) {
        core_init(&K);
        core_add_sandboxes(&K);
        memset(&S, 0, sizeof(S));
        S.d = &K.d;
        S.lock_fd = -1;
        K.d.server = &S;
        me = geteuid() == 0 ? CALLER_UID_AS_ROOT : geteuid();
        other = me + 1;
}

static int no_conns(void *ud) {
        return S.n_conns == 0;
}

/* Closes the peers, waits until the server has closed every connection, and takes the
 * core down (which proves that no handle is left). */
static void end(struct peer *peers, int n) {
        int i;

        for (i = 0; i < n; i++)
                peer_close(&peers[i]);
        ck_assert_msg(core_run_until(&K, no_conns, NULL, 5000), "%u connections left",
                      S.n_conns);
        core_free(&K);
}

/* A connection of this process (root's, when the test runs as root). */
static void open_own(struct peer *p) {
        ck_assert_int_eq(server_serve_fd(&S, peer_pair(p)), 0);
}

static void send_fds(int sock, const int fds[2]) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } u;
        char byte = 'f';
        struct iovec iov = {&byte, 1};
        struct msghdr m;
        struct cmsghdr *h;

        memset(&m, 0, sizeof(m));
        memset(&u, 0, sizeof(u));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = u.buf;
        m.msg_controllen = sizeof(u.buf);
        h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(2 * sizeof(int));
        memcpy(CMSG_DATA(h), fds, 2 * sizeof(int));
        if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1)
                _exit(3);
}

static void recv_fds(int sock, int fds[2]) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } u;
        char byte;
        struct iovec iov = {&byte, 1};
        struct msghdr m;
        struct cmsghdr *h;

        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = u.buf;
        m.msg_controllen = sizeof(u.buf);
        ck_assert_int_eq(recvmsg(sock, &m, MSG_CMSG_CLOEXEC), 1);
        h = CMSG_FIRSTHDR(&m);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(h->cmsg_type, SCM_RIGHTS);
        ck_assert_uint_eq(h->cmsg_len, CMSG_LEN(2 * sizeof(int)));
        memcpy(fds, CMSG_DATA(h), 2 * sizeof(int));
}

/* A connection of the caller, uid me. As root: a child becomes me and makes the
 * socketpair (whose peer credentials are its maker's), hands both ends over, and stays
 * alive until the connection is admitted (admission looks at the peer's process). */
static void open_caller(struct peer *p) {
        int ctl[2], fds[2], st;
        pid_t pid;

        if (geteuid() != 0) {
                open_own(p);
                return;
        }
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int sv[2];
                char b;
                close(ctl[0]);
                if (setgroups(0, NULL) < 0 || setresgid(me, me, me) < 0 ||
                    setresuid(me, me, me) < 0)
                        _exit(1);
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                        _exit(2);
                send_fds(ctl[1], sv);
                (void)!read(ctl[1], &b, 1); /* until the parent is done with us */
                _exit(0);
        }
        close(ctl[1]);
        recv_fds(ctl[0], fds);
        peer_adopt(p, fds[0]);
        ck_assert_int_eq(server_serve_fd(&S, fds[1]), 0);
        close(ctl[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
}

/* ---- requests, encoded by hand ------------------------------------------------------ */

/* A protobuf encoding under construction: by hand, so that tests can say anything,
 * malformed or unknown included. */
struct wbuf {
        uint8_t b[4096];
        size_t n;
};

static void w_raw(struct wbuf *w, const void *p, size_t len) {
        ck_assert_uint_le(w->n + len, sizeof(w->b));
        memcpy(w->b + w->n, p, len);
        w->n += len;
}

static void w_varint(struct wbuf *w, uint64_t v) {
        uint8_t b;
        do {
                b = (uint8_t)(v & 0x7f);
                v >>= 7;
                if (v)
                        b |= 0x80;
                w_raw(w, &b, 1);
        } while (v);
}

static void w_uint(struct wbuf *w, unsigned field, uint64_t v) {
        w_varint(w, (uint64_t)field << 3 | 0);
        w_varint(w, v);
}

static void w_bytes(struct wbuf *w, unsigned field, const void *p, size_t len) {
        w_varint(w, (uint64_t)field << 3 | 2);
        w_varint(w, len);
        w_raw(w, p, len);
}

static void w_str(struct wbuf *w, unsigned field, const char *s) {
        w_bytes(w, field, s, strlen(s));
}

static void w_sub(struct wbuf *w, unsigned field, const struct wbuf *sub) {
        w_bytes(w, field, sub->b, sub->n);
}

/* Sends a Request with request id rid (none when 0) and body, field number field. */
static void send_body(struct peer *p, uint64_t rid, unsigned field, const struct wbuf *body) {
        struct wbuf w = {.n = 0};

        if (rid)
                w_uint(&w, 1, rid);
        w_sub(&w, field, body);
        peer_send_frame(&K, p, w.b, w.n);
}

/* The Request body field numbers (sbx.proto). */
enum {
        F_HELLO = 10,
        F_CREATE = 11,
        F_RUN = 12,
        F_INPUT = 13,
        F_CANCEL = 14,
        F_READ = 15,
        F_WRITE = 16,
        F_LIST_DIR = 17,
        F_STAT = 18,
        F_MKDIR = 19,
        F_REMOVE = 20,
        F_TERMINATE = 21,
        F_LIST = 22,
        F_GET = 23,
        F_SET_TIMEOUT = 24,
        F_HISTORY = 25,
        F_OPEN_PORT = 35,
        F_WATCH = 36,
};

/* Every request that names a sandbox (its sandbox_id is field 1 in each), with what it
 * needs besides to be well-formed, in field 2. */
enum extra { X_NONE, X_PATH, X_ARGV, X_COMMAND, X_TIMEOUT, X_PORT };
static const struct kind {
        const char *name;
        unsigned field;
        enum extra extra;
        int file_op;      /* refusals of a sandbox on record are recorded as file operations */
        int answers_record; /* an ended sandbox is answered with its record, not ENDED */
} kinds[] = {
        {"RunCommand", F_RUN, X_ARGV, 0, 0},
        {"CommandInput", F_INPUT, X_COMMAND, 0, 0},
        {"CancelCommand", F_CANCEL, X_COMMAND, 0, 0},
        {"ReadFile", F_READ, X_PATH, 1, 0},
        {"WriteFile", F_WRITE, X_PATH, 1, 0},
        {"ListDirectory", F_LIST_DIR, X_PATH, 1, 0},
        {"Stat", F_STAT, X_PATH, 1, 0},
        {"MakeDirectory", F_MKDIR, X_PATH, 1, 0},
        {"Remove", F_REMOVE, X_PATH, 1, 0},
        {"Terminate", F_TERMINATE, X_NONE, 0, 1},
        {"GetSandbox", F_GET, X_NONE, 0, 1},
        {"SetTimeout", F_SET_TIMEOUT, X_TIMEOUT, 0, 0},
        {"GetHistory", F_HISTORY, X_NONE, 0, 1},
        {"OpenPort", F_OPEN_PORT, X_PORT, 0, 0},
        {"WatchFiles", F_WATCH, X_PATH, 0, 0},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Sends request kind k naming sandbox id (no sandbox_id field when NULL). */
static void send_kind(struct peer *p, uint64_t rid, const struct kind *k, const char *id) {
        struct wbuf b = {.n = 0};

        if (id)
                w_str(&b, 1, id);
        switch (k->extra) {
        case X_NONE:
                break;
        case X_PATH:
                w_str(&b, 2, "/workspace/f");
                break;
        case X_ARGV:
                w_str(&b, 2, "true");
                break;
        case X_COMMAND:
                w_str(&b, 2, "c-1");
                break;
        case X_TIMEOUT:
                w_uint(&b, 2, 60000);
                break;
        case X_PORT:
                w_uint(&b, 2, 8080);
                break;
        }
        send_body(p, rid, k->field, &b);
}

static void send_hello_named(struct peer *p, uint64_t rid, const char *name, size_t len) {
        struct wbuf b = {.n = 0};

        w_uint(&b, 1, SBX_PROTOCOL_VERSION);
        if (name)
                w_bytes(&b, 2, name, len);
        send_body(p, rid, F_HELLO, &b);
}

/* ---- responses ---------------------------------------------------------------------- */

/* The next response, which must be a status-only answer to rid with code: its message
 * (free()). */
static char *status_text(struct peer *p, uint64_t rid, Sbx__V1__Code code) {
        Sbx__V1__Response *r = peer_wait(&K, p);
        char *msg;

        ck_assert_msg(r != NULL, "closed instead of answering request %llu",
                      (unsigned long long)rid);
        ck_assert_ptr_nonnull(r->status);
        ck_assert_msg(r->request_id == rid && r->status->code == code,
                      "request %llu: got request id %llu, code %s: '%s'; wanted code %s",
                      (unsigned long long)rid, (unsigned long long)r->request_id,
                      rpc_code_name(r->status->code), r->status->message,
                      rpc_code_name(code));
        ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY__NOT_SET);
        ck_assert_ptr_nonnull(r->status->message);
        msg = strdup(r->status->message);
        ck_assert_ptr_nonnull(msg);
        sbx__v1__response__free_unpacked(r, NULL);
        return msg;
}

/* As status_text, and the message contains w1 and w2 (each when not NULL). */
static void expect_status(struct peer *p, uint64_t rid, Sbx__V1__Code code, const char *w1,
                          const char *w2) {
        char *msg = status_text(p, rid, code);

        ck_assert_msg(!w1 || strstr(msg, w1), "request %llu: '%s' lacks '%s'",
                      (unsigned long long)rid, msg, w1);
        ck_assert_msg(!w2 || strstr(msg, w2), "request %llu: '%s' lacks '%s'",
                      (unsigned long long)rid, msg, w2);
        free(msg);
}

/* The next response, which must answer rid with OK and body. */
static Sbx__V1__Response *expect_ok(struct peer *p, uint64_t rid,
                                    Sbx__V1__Response__BodyCase body) {
        Sbx__V1__Response *r = peer_wait(&K, p);

        ck_assert_msg(r != NULL, "closed instead of answering request %llu",
                      (unsigned long long)rid);
        ck_assert_ptr_nonnull(r->status);
        ck_assert_msg(r->status->code == SBX__V1__CODE__OK, "request %llu: %s: %s",
                      (unsigned long long)rid, rpc_code_name(r->status->code),
                      r->status->message);
        ck_assert_uint_eq(r->request_id, rid);
        ck_assert_int_eq(r->body_case, body);
        return r;
}

struct eof_count {
        struct peer *p;
        int frames;
};

static int eof_counting(void *ud) {
        struct eof_count *e = ud;
        Sbx__V1__Response *r;

        while (peer_next(e->p, &r)) {
                sbx__v1__response__free_unpacked(r, NULL);
                e->frames++;
        }
        return e->p->eof;
}

/* The daemon closes the connection with nothing more said. */
static void expect_closed(struct peer *p) {
        struct eof_count e = {p, 0};

        ck_assert_msg(core_run_until(&K, eof_counting, &e, 5000), "the connection stays open");
        ck_assert_int_eq(e.frames, 0);
}

/* The connection is still served: a Hello is answered. */
static void expect_served(struct peer *p, uint64_t rid) {
        Sbx__V1__Response *r;

        send_hello_named(p, rid, NULL, 0);
        r = expect_ok(p, rid, SBX__V1__RESPONSE__BODY_HELLO);
        sbx__v1__response__free_unpacked(r, NULL);
}

/* msg with every occurrence of id replaced by "<ID>" (free()). */
static char *without_id(const char *msg, const char *id) {
        size_t n = strlen(id);
        char *out = malloc(strlen(msg) * 4 + 8), *o = out;

        ck_assert_ptr_nonnull(out);
        while (*msg) {
                if (strncmp(msg, id, n) == 0) {
                        o = stpcpy(o, "<ID>");
                        msg += n;
                } else {
                        *o++ = *msg++;
                }
        }
        *o = '\0';
        return out;
}

/* ---- records ------------------------------------------------------------------------ */

/* Records a sandbox: owner, state ("terminated"...: ended at created + 1 s), created
 * (ms), one label key=value (none when key is NULL), shared with share_uid (none when
 * 0). */
static void record(const char *id, uid_t owner, const char *state, int64_t created,
                   const char *key, const char *value, uid_t share_uid) {
        Sbx__V1__CreateSandbox spec = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Label label = SBX__V1__LABEL__INIT;
        Sbx__V1__Label *labels[1] = {&label};
        uint32_t shares[1] = {share_uid};
        struct store_sandbox sb;
        uint8_t packed[512];
        char idb[64], keyb[64], valueb[64];
        int ended = strcmp(state, "creating") && strcmp(state, "ready") &&
                    strcmp(state, "terminating");

        snprintf(idb, sizeof(idb), "%s", id);
        spec.id = idb;
        if (key) {
                snprintf(keyb, sizeof(keyb), "%s", key);
                snprintf(valueb, sizeof(valueb), "%s", value ? value : "");
                label.key = keyb;
                label.value = value ? valueb : NULL;
                spec.n_labels = 1;
                spec.labels = labels;
        }
        if (share_uid) {
                spec.n_share_uids = 1;
                spec.share_uids = shares;
        }
        ck_assert_uint_le(sbx__v1__create_sandbox__get_packed_size(&spec), sizeof(packed));
        memset(&sb, 0, sizeof(sb));
        sb.id = id;
        sb.owner_uid = owner;
        sb.state = state;
        sb.created_ms = created;
        sb.deadline_ms = created + 3600 * 1000;
        sb.ended_ms = ended ? created + 1000 : 0;
        sb.end_reason = ended ? state : NULL;
        sb.spec = packed;
        sb.spec_len = sbx__v1__create_sandbox__pack(&spec, packed);
        sb.workspace_dir = "/nonexistent/workspace";
        sb.cgroup_path = "";
        ck_assert_int_eq(store_sandbox_insert(K.d.store, &sb), 0);
}

/* ---- the code tables ---------------------------------------------------------------- */

START_TEST(code_from_errno_table) {
        static const struct {
                int err;
                Sbx__V1__Code code;
        } t[] = {
                {0, SBX__V1__CODE__OK},
                {EINVAL, SBX__V1__CODE__INVALID_ARGUMENT},
                {ENAMETOOLONG, SBX__V1__CODE__INVALID_ARGUMENT},
                {EBADMSG, SBX__V1__CODE__INVALID_ARGUMENT},
                {ELOOP, SBX__V1__CODE__INVALID_ARGUMENT},
                {ENOENT, SBX__V1__CODE__NOT_FOUND},
                {ESRCH, SBX__V1__CODE__NOT_FOUND},
                {ENOTDIR, SBX__V1__CODE__NOT_FOUND},
                {EEXIST, SBX__V1__CODE__ALREADY_EXISTS},
                {EPERM, SBX__V1__CODE__PERMISSION_DENIED},
                {EACCES, SBX__V1__CODE__PERMISSION_DENIED},
                {EAGAIN, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {EBUSY, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {ENOSPC, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {EMFILE, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {ENFILE, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {ENOMEM, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {EDQUOT, SBX__V1__CODE__RESOURCE_EXHAUSTED},
                {ESHUTDOWN, SBX__V1__CODE__FAILED_PRECONDITION},
                {EROFS, SBX__V1__CODE__READ_ONLY},
                {EMSGSIZE, SBX__V1__CODE__TOO_LARGE},
                {EFBIG, SBX__V1__CODE__TOO_LARGE},
                {E2BIG, SBX__V1__CODE__TOO_LARGE},
                {EPIPE, SBX__V1__CODE__UNAVAILABLE},
                {ECONNRESET, SBX__V1__CODE__UNAVAILABLE},
                {ENODEV, SBX__V1__CODE__ENDED},
                {ENOSYS, SBX__V1__CODE__UNIMPLEMENTED},
                {EOPNOTSUPP, SBX__V1__CODE__UNIMPLEMENTED},
                {EIO, SBX__V1__CODE__INTERNAL},
                {EXDEV, SBX__V1__CODE__INTERNAL},
                {9999, SBX__V1__CODE__INTERNAL},
        };
        size_t i;

        for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                /* The layers below return -errno; a positive errno means the same. */
                ck_assert_msg(rpc_code_from_errno(-t[i].err) == t[i].code,
                              "-%s: %s, wanted %s", strerror(t[i].err),
                              rpc_code_name(rpc_code_from_errno(-t[i].err)),
                              rpc_code_name(t[i].code));
                ck_assert_int_eq(rpc_code_from_errno(t[i].err), t[i].code);
        }
}
END_TEST

START_TEST(code_names) {
        static const struct {
                Sbx__V1__Code code;
                const char *name;
        } t[] = {
                {SBX__V1__CODE__OK, "OK"},
                {SBX__V1__CODE__INVALID_ARGUMENT, "INVALID_ARGUMENT"},
                {SBX__V1__CODE__NOT_FOUND, "NOT_FOUND"},
                {SBX__V1__CODE__ALREADY_EXISTS, "ALREADY_EXISTS"},
                {SBX__V1__CODE__PERMISSION_DENIED, "PERMISSION_DENIED"},
                {SBX__V1__CODE__RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
                {SBX__V1__CODE__FAILED_PRECONDITION, "FAILED_PRECONDITION"},
                {SBX__V1__CODE__READ_ONLY, "READ_ONLY"},
                {SBX__V1__CODE__TOO_LARGE, "TOO_LARGE"},
                {SBX__V1__CODE__UNAVAILABLE, "UNAVAILABLE"},
                {SBX__V1__CODE__UNIMPLEMENTED, "UNIMPLEMENTED"},
                {SBX__V1__CODE__INTERNAL, "INTERNAL"},
                /* The one name outside the schema: as libsbx and sbx say it. */
                {SBX__V1__CODE__ENDED, "SANDBOX_ENDED"},
        };
        size_t i;

        ck_assert_int_eq(SBX__V1__CODE__ENDED, 12);
        /* Every code of the schema is in the table above. */
        ck_assert_uint_eq(sbx__v1__code__descriptor.n_values, sizeof(t) / sizeof(t[0]));
        for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                ck_assert_str_eq(rpc_code_name(t[i].code), t[i].name);
        ck_assert_str_eq(rpc_code_name((Sbx__V1__Code)13), "UNKNOWN");
        ck_assert_str_eq(rpc_code_name((Sbx__V1__Code)-1), "UNKNOWN");
}
END_TEST

/* ---- schema validation -------------------------------------------------------------- */

/* Each payload alone on a connection of its own: one status, request id 0, saying why and
 * that the connection is closed, then the end; a Hello right behind it in the same write
 * is never read. Another connection is served meanwhile. */
START_TEST(malformed_protobuf_closes) {
        static const struct {
                const char *what;
                uint8_t bytes[8];
                size_t len;
                const char *why;
        } t[] = {
                {"a truncated varint", {0x08, 0x80}, 2, "malformed protobuf in sbx.v1.Request"},
                {"field number 0", {0x00, 0x01}, 2, "malformed protobuf in sbx.v1.Request"},
                {"a group (wire type 3)", {0x0b}, 1, "malformed protobuf in sbx.v1.Request"},
                {"wire type 7", {0x0f, 0x00}, 2, "malformed protobuf in sbx.v1.Request"},
                {"a length past the end", {0x08, 0x01, 0x52, 0x05, 0x08}, 5,
                 "malformed protobuf in sbx.v1.Request"},
                {"a fixed64 cut short", {0x09, 0x01, 0x02}, 3,
                 "malformed protobuf in sbx.v1.Request"},
                {"a truncated varint inside Hello", {0x08, 0x01, 0x52, 0x02, 0x08, 0x80}, 6,
                 "malformed protobuf in sbx.v1.Hello"},
                /* Well-formed, but request_id (a varint) sent length-delimited: the walk
                 * passes it, protobuf-c cannot decode it. */
                {"a field of the wrong wire type", {0x0a, 0x01, 0x41}, 3,
                 "undecodable request"},
        };
        struct peer p[sizeof(t) / sizeof(t[0]) + 1];
        size_t i, n = sizeof(t) / sizeof(t[0]);

        begin();
        open_own(&p[n]);
        for (i = 0; i < n; i++) {
                uint8_t frame[64];
                struct wbuf hello = {.n = 0};
                size_t len;

                open_own(&p[i]);
                frame_header_put(frame, (uint32_t)t[i].len);
                memcpy(frame + 4, t[i].bytes, t[i].len);
                len = 4 + t[i].len;
                /* A Hello behind it, in the same write. */
                w_uint(&hello, 1, 99);
                w_bytes(&hello, F_HELLO, "", 0);
                frame_header_put(frame + len, (uint32_t)hello.n);
                memcpy(frame + len + 4, hello.b, hello.n);
                len += 4 + hello.n;
                peer_write(&K, &p[i], frame, len);
                {
                        char *msg = status_text(&p[i], 0, SBX__V1__CODE__INVALID_ARGUMENT);
                        ck_assert_msg(strstr(msg, t[i].why) &&
                                              strstr(msg, "the connection is closed"),
                                      "%s: '%s'", t[i].what, msg);
                        free(msg);
                }
                expect_closed(&p[i]);
                expect_served(&p[n], i + 1);
        }
        ck_assert_uint_eq(S.n_conns, 1);
        end(p, (int)n + 1);
}
END_TEST

/* An unknown field closes the connection and is named, with its message: at the top, in
 * a body, and at the deepest level the schema has (Request > CreateSandbox > Policy >
 * Limits). */
START_TEST(unknown_field_closes) {
        struct peer p[6], *ok = &p[5];
        struct wbuf w, b, pol, lim;
        int i;

        begin();
        open_own(ok);
        for (i = 0; i < 5; i++)
                open_own(&p[i]);

        /* Field 1000 of Request, after a good request id. */
        memset(&w, 0, sizeof(w));
        w_uint(&w, 1, 5);
        w_uint(&w, 1000, 1);
        peer_send_frame(&K, &p[0], w.b, w.n);
        expect_status(&p[0], 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "unknown field 1000 in sbx.v1.Request", "the connection is closed");
        expect_closed(&p[0]);

        /* Field 37: a body number beyond those this daemon knows. */
        memset(&w, 0, sizeof(w));
        memset(&b, 0, sizeof(b));
        w_uint(&w, 1, 6);
        w_sub(&w, 37, &b);
        peer_send_frame(&K, &p[1], w.b, w.n);
        expect_status(&p[1], 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "unknown field 37 in sbx.v1.Request", NULL);
        expect_closed(&p[1]);

        /* Field 9 of Hello. */
        memset(&b, 0, sizeof(b));
        w_uint(&b, 1, SBX_PROTOCOL_VERSION);
        w_str(&b, 9, "x");
        send_body(&p[2], 7, F_HELLO, &b);
        expect_status(&p[2], 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "unknown field 9 in sbx.v1.Hello", NULL);
        expect_closed(&p[2]);

        /* Field 99 of Limits, three levels down. */
        memset(&lim, 0, sizeof(lim));
        memset(&pol, 0, sizeof(pol));
        memset(&b, 0, sizeof(b));
        w_uint(&lim, 1, 1 << 20);
        w_uint(&lim, 99, 1);
        w_sub(&pol, 8, &lim);
        w_str(&b, 1, "deep");
        w_sub(&b, 2, &pol);
        send_body(&p[3], 8, F_CREATE, &b);
        expect_status(&p[3], 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "unknown field 99 in sbx.v1.Limits", NULL);
        expect_closed(&p[3]);

        /* An unknown field in a request for an unknown sandbox: the schema speaks first,
         * and closes. */
        memset(&b, 0, sizeof(b));
        w_str(&b, 1, "nosuch");
        w_uint(&b, 15, 1);
        send_body(&p[4], 9, F_GET, &b);
        expect_status(&p[4], 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "unknown field 15 in sbx.v1.GetSandbox", NULL);
        expect_closed(&p[4]);

        expect_served(ok, 1);
        ck_assert_uint_eq(S.n_conns, 1);
        end(p, 6);
}
END_TEST

/* A NUL byte inside a string would be cut there by protobuf-c: that request is refused,
 * naming the field, and the connection goes on. Bytes fields may hold NULs. */
START_TEST(nul_in_string_answers_that_request_only) {
        struct wbuf b;
        struct peer p;

        begin();
        open_caller(&p);
        send_hello_named(&p, 7, "ab\0cd", 5);
        expect_status(&p, 7, SBX__V1__CODE__INVALID_ARGUMENT,
                      "field client_name of sbx.v1.Hello contains a NUL byte", NULL);
        expect_served(&p, 8);

        /* In a repeated string, after a good element. */
        memset(&b, 0, sizeof(b));
        w_str(&b, 1, "nosuch");
        w_str(&b, 2, "echo");
        w_bytes(&b, 2, "x\0y", 3);
        send_body(&p, 9, F_RUN, &b);
        expect_status(&p, 9, SBX__V1__CODE__INVALID_ARGUMENT,
                      "field argv of sbx.v1.RunCommand contains a NUL byte", NULL);

        /* In the sandbox id: refused before any lookup. */
        memset(&b, 0, sizeof(b));
        w_bytes(&b, 1, "no\0such", 7);
        send_body(&p, 10, F_GET, &b);
        expect_status(&p, 10, SBX__V1__CODE__INVALID_ARGUMENT,
                      "field sandbox_id of sbx.v1.GetSandbox contains a NUL byte", NULL);

        /* In bytes (WriteFile.data): nothing wrong with it; the sandbox is unknown. */
        memset(&b, 0, sizeof(b));
        w_str(&b, 1, "nosuch");
        w_str(&b, 2, "/workspace/f");
        w_bytes(&b, 3, "a\0b", 3);
        send_body(&p, 11, F_WRITE, &b);
        expect_status(&p, 11, SBX__V1__CODE__NOT_FOUND, "sandbox 'nosuch' not found", NULL);

        expect_served(&p, 12);
        ck_assert_uint_eq(S.n_conns, 1);
        end(&p, 1);
}
END_TEST

/* The schema nests messages at most three levels deep (Request > CreateSandbox > Policy >
 * Limits), so the walk's own limit (16) cannot be reached through it: the deepest legal
 * nesting is served, and 40 levels along that path put a nested message in
 * Limits.memory_bytes, a varint, which the walk passes over (no message there to walk)
 * and protobuf-c cannot decode: refused with request id 0, closed. */
START_TEST(deep_nesting_refused) {
        struct wbuf levels[2];
        struct peer p[2];
        /* The field numbers along the path, then scalar fields used as if messages. */
        static const unsigned path[] = {11, 2, 8, 1};
        int i;

        begin();
        /* The deepest legal nesting reaches its handler, which refuses the id: it is on
         * record already. */
        record("deep-ok", me, "terminated", 1000, NULL, NULL, 0);
        open_own(&p[0]);
        {
                struct wbuf lim = {.n = 0}, pol = {.n = 0}, b = {.n = 0};
                w_uint(&lim, 1, 64 << 20);
                w_sub(&pol, 8, &lim);
                w_str(&b, 1, "deep-ok");
                w_sub(&b, 2, &pol);
                w_uint(&b, 3, 1000);
                send_body(&p[0], 3, F_CREATE, &b);
                expect_status(&p[0], 3, SBX__V1__CODE__ALREADY_EXISTS,
                              "sandbox id 'deep-ok' is already used", NULL);
                expect_served(&p[0], 4);
        }

        /* 40 levels: the innermost first. */
        open_own(&p[1]);
        memset(levels, 0, sizeof(levels));
        w_uint(&levels[0], 1, 1);
        for (i = 39; i >= 0; i--) {
                struct wbuf *in = &levels[(39 - i) % 2], *out = &levels[(40 - i) % 2];
                memset(out, 0, sizeof(*out));
                if (i == 0)
                        w_uint(out, 1, 4);
                w_sub(out, i < 4 ? path[i] : 1, in);
        }
        peer_send_frame(&K, &p[1], levels[0].b, levels[0].n);
        expect_status(&p[1], 0, SBX__V1__CODE__INVALID_ARGUMENT, "undecodable request",
                      "the connection is closed");
        expect_closed(&p[1]);
        ck_assert_uint_eq(S.n_conns, 1);
        end(p, 2);
}
END_TEST

START_TEST(request_id_missing_or_zero) {
        struct wbuf w = {.n = 0}, b = {.n = 0};
        struct peer p;

        begin();
        open_own(&p);
        send_hello_named(&p, 0, NULL, 0); /* no request_id */
        expect_status(&p, 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "request_id is required and must not be 0", NULL);
        w_uint(&w, 1, 0); /* request_id 0, said */
        w_sub(&w, F_HELLO, &b);
        peer_send_frame(&K, &p, w.b, w.n);
        expect_status(&p, 0, SBX__V1__CODE__INVALID_ARGUMENT,
                      "request_id is required and must not be 0", NULL);
        /* An empty frame is a Request with nothing set. */
        peer_send_frame(&K, &p, "", 0);
        expect_status(&p, 0, SBX__V1__CODE__INVALID_ARGUMENT, "request_id is required", NULL);
        expect_served(&p, 1);
        ck_assert_uint_eq(S.n_conns, 1);
        end(&p, 1);
}
END_TEST

START_TEST(request_without_body) {
        struct wbuf w = {.n = 0};
        struct peer p;

        begin();
        open_own(&p);
        w_uint(&w, 1, 41);
        peer_send_frame(&K, &p, w.b, w.n);
        expect_status(&p, 41, SBX__V1__CODE__INVALID_ARGUMENT, "request has no body", NULL);
        expect_served(&p, 42);
        ck_assert_uint_eq(S.n_conns, 1);
        end(&p, 1);
}
END_TEST

/* ---- Hello -------------------------------------------------------------------------- */

static void check_hello(const Sbx__V1__Response *r, uid_t uid) {
        const ProtobufCMessageDescriptor *rd = &sbx__v1__request__descriptor;
        const Sbx__V1__HelloReply *h = r->hello;
        unsigned i, n_bodies = 0;
        size_t j;

        ck_assert_ptr_nonnull(h);
        ck_assert(h->has_protocol_version);
        ck_assert_uint_eq(h->protocol_version, SBX_PROTOCOL_VERSION);
        ck_assert_str_eq(h->daemon_version, SBX_VERSION);
        ck_assert(h->has_peer_uid);
        ck_assert_uint_eq(h->peer_uid, uid);
        ck_assert_ptr_nonnull(h->features);
        ck_assert(h->features->has_max_frame_bytes);
        ck_assert_uint_eq(h->features->max_frame_bytes, K.cfg.max_frame_bytes);
        /* implemented names every body of Request, and nothing else. */
        for (i = 0; i < rd->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &rd->fields[i];
                int found = 0;
                if (f->id == 1)
                        continue;
                n_bodies++;
                for (j = 0; j < h->features->n_implemented; j++)
                        found |= strcmp(h->features->implemented[j], f->name) == 0;
                ck_assert_msg(found, "implemented lacks %s", f->name);
        }
        ck_assert_uint_eq(h->features->n_implemented, n_bodies);
}

START_TEST(hello) {
        char name[SBX_CLIENT_NAME_MAX_BYTES + 2];
        Sbx__V1__Response *r;
        struct peer p[2];

        begin();
        open_own(&p[0]);
        peer_send_hello(&K, &p[0], 1);
        r = expect_ok(&p[0], 1, SBX__V1__RESPONSE__BODY_HELLO);
        check_hello(r, getuid());
        sbx__v1__response__free_unpacked(r, NULL);

        /* The longest name is taken, one byte more is refused, and the connection goes
         * on. */
        memset(name, 'n', sizeof(name));
        send_hello_named(&p[0], 2, name, SBX_CLIENT_NAME_MAX_BYTES);
        r = expect_ok(&p[0], 2, SBX__V1__RESPONSE__BODY_HELLO);
        sbx__v1__response__free_unpacked(r, NULL);
        send_hello_named(&p[0], 3, name, SBX_CLIENT_NAME_MAX_BYTES + 1);
        {
                char want[64];
                snprintf(want, sizeof(want), "client_name is longer than %u bytes",
                         SBX_CLIENT_NAME_MAX_BYTES);
                expect_status(&p[0], 3, SBX__V1__CODE__INVALID_ARGUMENT, want, NULL);
        }
        expect_served(&p[0], 4);

        /* The caller's uid as the kernel says it (another user's, as root). */
        open_caller(&p[1]);
        send_hello_named(&p[1], 5, "check_rpc", 9);
        r = expect_ok(&p[1], 5, SBX__V1__RESPONSE__BODY_HELLO);
        check_hello(r, me);
        sbx__v1__response__free_unpacked(r, NULL);
        ck_assert_uint_eq(S.n_conns, 2);
        end(p, 2);
}
END_TEST

/* ---- sandboxes by id ---------------------------------------------------------------- */

/* OpenPort out of its bounds: no port, port 0 and 70000, an address that is not the
 * sandbox's loopback; each answered INVALID_ARGUMENT naming the field and its bound,
 * before the sandbox is looked up, and the connection goes on. */
START_TEST(open_port_malformed) {
        static const struct {
                int has_port;
                uint32_t port;
                const char *address, *want;
        } bad[] = {
                {0, 0, NULL, "port 0 is out of its bounds (1 to 65535)"},
                {1, 0, NULL, "port 0 is out of its bounds (1 to 65535)"},
                {1, 70000, NULL, "port 70000 is out of its bounds (1 to 65535)"},
                {1, 8080, "10.0.0.1", "address '10.0.0.1' is not one of the sandbox's loopback"},
                {1, 8080, "localhost", "address 'localhost' is not one of"},
                {1, 8080, "::2", "(\"127.0.0.1\" or \"::1\")"},
        };
        struct peer p;
        size_t i;

        begin();
        open_caller(&p);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct wbuf b = {.n = 0};
                char *msg;
                w_str(&b, 1, "mine");
                if (bad[i].has_port)
                        w_uint(&b, 2, bad[i].port);
                if (bad[i].address)
                        w_str(&b, 3, bad[i].address);
                send_body(&p, i + 1, F_OPEN_PORT, &b);
                msg = status_text(&p, i + 1, SBX__V1__CODE__INVALID_ARGUMENT);
                ck_assert_msg(strstr(msg, bad[i].want), "case %zu: '%s'", i, msg);
                free(msg);
        }
        expect_served(&p, 100);
        end(&p, 1);
}
END_TEST

START_TEST(missing_sandbox_id) {
        struct peer p;
        size_t i;

        begin();
        open_caller(&p);
        for (i = 0; i < N_KINDS; i++) {
                char *msg;
                /* Not given, and given empty. */
                send_kind(&p, 2 * i + 1, &kinds[i], NULL);
                msg = status_text(&p, 2 * i + 1, SBX__V1__CODE__INVALID_ARGUMENT);
                ck_assert_msg(strstr(msg, "sandbox_id is required"), "%s: '%s'", kinds[i].name,
                              msg);
                free(msg);
                send_kind(&p, 2 * i + 2, &kinds[i], "");
                msg = status_text(&p, 2 * i + 2, SBX__V1__CODE__INVALID_ARGUMENT);
                ck_assert_msg(strstr(msg, "sandbox_id is required"), "%s: '%s'", kinds[i].name,
                              msg);
                free(msg);
        }
        expect_served(&p, 100);
        end(&p, 1);
}
END_TEST

/* An id nobody has, and one on record as another user's (ended, and one a crashed
 * daemon left "ready"): NOT_FOUND, in one text but for the id, whatever the request. A
 * file request for a sandbox on record is recorded as refused, for its owner to see. */
START_TEST(unknown_or_foreign_id_not_found) {
        static const char *const foreign[] = {"theirs", "theirs-ready"};
        struct peer p;
        uint64_t rid = 1;
        size_t i, f;
        int file_ops = 0;

        begin();
        record("theirs", other, "terminated", 1000, NULL, NULL, 0);
        record("theirs-ready", other, "ready", 2000, NULL, NULL, 0);
        open_caller(&p);
        for (i = 0; i < N_KINDS; i++) {
                char *unknown, *a;

                send_kind(&p, rid, &kinds[i], "nosuch");
                unknown = status_text(&p, rid++, SBX__V1__CODE__NOT_FOUND);
                ck_assert_msg(strstr(unknown, "sandbox 'nosuch' not found"), "%s: '%s'",
                              kinds[i].name, unknown);
                a = without_id(unknown, "nosuch");
                for (f = 0; f < 2; f++) {
                        char *theirs, *b;
                        send_kind(&p, rid, &kinds[i], foreign[f]);
                        theirs = status_text(&p, rid++, SBX__V1__CODE__NOT_FOUND);
                        b = without_id(theirs, foreign[f]);
                        ck_assert_msg(strcmp(a, b) == 0, "%s: '%s' and '%s' tell them apart",
                                      kinds[i].name, unknown, theirs);
                        free(theirs);
                        free(b);
                }
                file_ops += kinds[i].file_op;
                free(unknown);
                free(a);
        }
        ck_assert_int_eq(store_fileop_count(K.d.store, "theirs"), file_ops);
        ck_assert_int_eq(store_fileop_count(K.d.store, "theirs-ready"), file_ops);
        ck_assert_int_eq(store_fileop_count(K.d.store, "nosuch"), 0);
        expect_served(&p, 1000);
        end(&p, 1);
}
END_TEST

static void check_record_info(const Sbx__V1__SandboxInfo *info, const char *id,
                              Sbx__V1__SandboxState state, uid_t owner, int64_t created) {
        ck_assert_str_eq(info->id, id);
        ck_assert(info->has_state);
        ck_assert_int_eq(info->state, state);
        ck_assert_uint_eq(info->owner_uid, owner);
        ck_assert_int_eq(info->created_unix_ms, created);
        ck_assert(info->has_ended_unix_ms);
        ck_assert_int_eq(info->ended_unix_ms, created + 1000);
}

/* An ended sandbox on record that the caller may see (its own, or shared with it):
 * ENDED (SANDBOX_ENDED, 12) for what would use it; its record for GetSandbox and
 * Terminate (ending an ended sandbox is no error); its history for GetHistory. */
START_TEST(ended_sandbox_on_record) {
        static const char *const ids[] = {"mine", "shared"};
        struct peer p;
        uint64_t rid = 1;
        size_t i, s;

        begin();
        record("mine", me, "terminated", 1000, "env", "prod", 0);
        record("shared", other, "expired", 2000, NULL, NULL, me);
        open_caller(&p);
        for (s = 0; s < 2; s++) {
                for (i = 0; i < N_KINDS; i++) {
                        Sbx__V1__Response *r;
                        char *msg, want[64];

                        send_kind(&p, rid, &kinds[i], ids[s]);
                        if (!kinds[i].answers_record) {
                                msg = status_text(&p, rid++, SBX__V1__CODE__ENDED);
                                snprintf(want, sizeof(want), "sandbox '%s' has ended", ids[s]);
                                ck_assert_msg(strstr(msg, want), "%s: '%s'", kinds[i].name, msg);
                                free(msg);
                                continue;
                        }
                        if (kinds[i].field == F_HISTORY) {
                                r = expect_ok(&p, rid++, SBX__V1__RESPONSE__BODY_HISTORY);
                                ck_assert_uint_eq(r->history->n_commands, 0);
                                ck_assert(r->history->has_truncated && !r->history->truncated);
                        } else {
                                r = expect_ok(&p, rid++, SBX__V1__RESPONSE__BODY_SANDBOX);
                                if (s == 0) {
                                        check_record_info(r->sandbox, "mine",
                                                          SBX__V1__SANDBOX_STATE__TERMINATED,
                                                          me, 1000);
                                        ck_assert_str_eq(r->sandbox->end_reason, "terminated");
                                        ck_assert_uint_eq(r->sandbox->n_labels, 1);
                                        ck_assert_str_eq(r->sandbox->labels[0]->key, "env");
                                        ck_assert_str_eq(r->sandbox->labels[0]->value, "prod");
                                } else {
                                        check_record_info(r->sandbox, "shared",
                                                          SBX__V1__SANDBOX_STATE__EXPIRED,
                                                          other, 2000);
                                        ck_assert_uint_eq(r->sandbox->n_share_uids, 1);
                                        ck_assert_uint_eq(r->sandbox->share_uids[0], me);
                                }
                        }
                        sbx__v1__response__free_unpacked(r, NULL);
                }
        }
        /* The code's name on the wire's other side. */
        ck_assert_str_eq(rpc_code_name(SBX__V1__CODE__ENDED), "SANDBOX_ENDED");
        /* Refused file requests of a sandbox on record are recorded as such. */
        ck_assert_int_eq(store_fileop_count(K.d.store, "mine"), 6);
        expect_served(&p, 1000);
        end(&p, 1);
}
END_TEST

/* CancelCommand: a signal that may not be sent is refused before the sandbox is looked
 * for; an allowed one is not (the sandbox is unknown). */
START_TEST(cancel_disallowed_signal) {
        static const int refused[] = {SIGSTOP, SIGCONT, SIGSEGV, 0, -1, 65};
        static const int allowed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
                                      SIGKILL};
        struct peer p;
        uint64_t rid = 1;
        size_t i;

        begin();
        open_caller(&p);
        for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                struct wbuf b = {.n = 0};
                char want[64];
                w_str(&b, 1, "nosuch");
                w_str(&b, 2, "c-1");
                w_uint(&b, 3, (uint64_t)(int64_t)refused[i]); /* int32: sign-extended */
                send_body(&p, rid, F_CANCEL, &b);
                snprintf(want, sizeof(want), "signal %d cannot be sent to a command", refused[i]);
                expect_status(&p, rid++, SBX__V1__CODE__INVALID_ARGUMENT, want, "SIGTERM (15)");
        }
        for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
                struct wbuf b = {.n = 0};
                w_str(&b, 1, "nosuch");
                w_str(&b, 2, "c-1");
                w_uint(&b, 3, (uint64_t)allowed[i]);
                send_body(&p, rid, F_CANCEL, &b);
                expect_status(&p, rid++, SBX__V1__CODE__NOT_FOUND, "sandbox 'nosuch' not found",
                              NULL);
        }
        expect_served(&p, rid);
        end(&p, 1);
}
END_TEST

/* WatchFiles without a path, or with coalesce_ms out of 10..5000:
 * INVALID_ARGUMENT naming the field and the bound, checked before the sandbox is looked
 * up; a well-formed one for an unknown sandbox: NOT_FOUND. */
START_TEST(watch_files_malformed) {
        static const uint32_t bad_ms[] = {0, 9, 5001, 4000000000u};
        struct peer p;
        uint64_t rid = 1;
        size_t i;

        begin();
        open_caller(&p);
        for (i = 0; i < 2; i++) {
                struct wbuf b = {.n = 0};
                w_str(&b, 1, "nosuch");
                if (i)
                        w_str(&b, 2, "");
                send_body(&p, rid, F_WATCH, &b);
                expect_status(&p, rid++, SBX__V1__CODE__INVALID_ARGUMENT, "path is required",
                              NULL);
        }
        for (i = 0; i < sizeof(bad_ms) / sizeof(bad_ms[0]); i++) {
                struct wbuf b = {.n = 0};
                char want[64];
                w_str(&b, 1, "nosuch");
                w_str(&b, 2, "/workspace");
                w_uint(&b, 4, bad_ms[i]);
                send_body(&p, rid, F_WATCH, &b);
                snprintf(want, sizeof(want), "coalesce_ms is %u; it must be 10..5000", bad_ms[i]);
                expect_status(&p, rid++, SBX__V1__CODE__INVALID_ARGUMENT, want, NULL);
        }
        {
                struct wbuf b = {.n = 0};
                w_str(&b, 1, "nosuch");
                w_str(&b, 2, "/workspace");
                w_uint(&b, 3, 1);
                w_uint(&b, 4, 10);
                send_body(&p, rid, F_WATCH, &b);
                expect_status(&p, rid++, SBX__V1__CODE__NOT_FOUND, "sandbox 'nosuch' not found",
                              NULL);
        }
        expect_served(&p, rid);
        end(&p, 1);
}
END_TEST

/* SetTimeout without timeout_ms. Its check comes after the sandbox's lookup, so without
 * a live sandbox the lookup answers: an unknown id, an ended one, no id. */
START_TEST(set_timeout_without_timeout) {
        struct wbuf b;
        struct peer p;
        const char *ids[] = {"nosuch", "mine", NULL};
        uint64_t rid = 1;
        size_t i;

        begin();
        record("mine", me, "terminated", 1000, NULL, NULL, 0);
        open_caller(&p);
        /* Without timeout_ms the request is refused for what it is, before any lookup. */
        for (i = 0; i < 3; i++, rid++) {
                memset(&b, 0, sizeof(b));
                if (ids[i])
                        w_str(&b, 1, ids[i]);
                send_body(&p, rid, F_SET_TIMEOUT, &b);
                expect_status(&p, rid, SBX__V1__CODE__INVALID_ARGUMENT, "timeout_ms is required",
                              NULL);
        }
        /* With it, the lookup answers. */
        memset(&b, 0, sizeof(b));
        w_str(&b, 1, "nosuch");
        w_uint(&b, 2, 60000);
        send_body(&p, rid, F_SET_TIMEOUT, &b);
        expect_status(&p, rid++, SBX__V1__CODE__NOT_FOUND, "sandbox 'nosuch' not found", NULL);
        memset(&b, 0, sizeof(b));
        w_str(&b, 1, "mine");
        w_uint(&b, 2, 60000);
        send_body(&p, rid, F_SET_TIMEOUT, &b);
        expect_status(&p, rid++, SBX__V1__CODE__ENDED, "sandbox 'mine' has ended", NULL);
        memset(&b, 0, sizeof(b));
        w_uint(&b, 2, 60000);
        send_body(&p, rid, F_SET_TIMEOUT, &b);
        expect_status(&p, rid++, SBX__V1__CODE__INVALID_ARGUMENT, "sandbox_id is required", NULL);
        expect_served(&p, rid);
        end(&p, 1);
}
END_TEST

/* ---- ListSandboxes ------------------------------------------------------------------ */

struct list_q {
        int include_ended;
        int has_owner;
        uid_t owner;
        const char *key, *value; /* one label; value NULL: the key alone */
        Sbx__V1__SandboxState states[2];
        size_t n_states;
        uint32_t limit;
};

/* Lists with q and checks the ids, in order (want: space-separated, "" for none), and
 * truncated. */
static void expect_list(struct peer *p, uint64_t rid, const struct list_q *q, const char *want,
                        int truncated) {
        struct wbuf b = {.n = 0};
        Sbx__V1__Response *r;
        char got[512] = "";
        size_t i;

        if (q->key) {
                struct wbuf l = {.n = 0};
                w_str(&l, 1, q->key);
                if (q->value)
                        w_str(&l, 2, q->value);
                w_sub(&b, 1, &l);
        }
        for (i = 0; i < q->n_states; i++)
                w_uint(&b, 2, (uint64_t)q->states[i]);
        if (q->has_owner)
                w_uint(&b, 3, q->owner);
        if (q->include_ended)
                w_uint(&b, 4, 1);
        if (q->limit)
                w_uint(&b, 5, q->limit);
        send_body(p, rid, F_LIST, &b);
        r = expect_ok(p, rid, SBX__V1__RESPONSE__BODY_LIST_SANDBOXES);
        for (i = 0; i < r->list_sandboxes->n_sandboxes; i++) {
                size_t n = strlen(got);
                snprintf(got + n, sizeof(got) - n, "%s%s", n ? " " : "",
                         r->list_sandboxes->sandboxes[i]->id);
        }
        ck_assert_msg(strcmp(got, want) == 0, "list %llu: got '%s', wanted '%s'",
                      (unsigned long long)rid, got, want);
        ck_assert(r->list_sandboxes->has_truncated);
        ck_assert_int_eq(r->list_sandboxes->truncated, truncated);
        sbx__v1__response__free_unpacked(r, NULL);
}

START_TEST(list_empty_daemon) {
        struct list_q q;
        struct peer p;

        begin();
        open_caller(&p);
        memset(&q, 0, sizeof(q));
        expect_list(&p, 1, &q, "", 0);
        q.include_ended = 1;
        expect_list(&p, 2, &q, "", 0);
        end(&p, 1);
}
END_TEST

/* Records of the caller's, another user's, and another user's shared with the caller:
 * listed newest first with include_ended (or an ended state asked for), never one the
 * caller may not see, filtered by owner, labels and states. */
START_TEST(list_records_filtered) {
        struct list_q q;
        struct peer p[2];

        begin();
        record("a", me, "terminated", 1000, "env", "prod", 0);
        record("b", me, "failed", 2000, "env", "dev", 0);
        record("c", other, "expired", 3000, "env", "prod", 0);
        record("d", other, "terminated", 4000, "env", "prod", me);
        record("e", me, "lost", 5000, NULL, NULL, 0);
        open_caller(&p[0]);

        memset(&q, 0, sizeof(q));
        expect_list(&p[0], 1, &q, "", 0); /* live ones only: none */
        q.include_ended = 1;
        expect_list(&p[0], 2, &q, "e d b a", 0);
        q.has_owner = 1;
        q.owner = me;
        expect_list(&p[0], 3, &q, "e b a", 0);
        q.owner = other;
        expect_list(&p[0], 4, &q, "d", 0);
        q.has_owner = 0;
        q.key = "env";
        q.value = "prod";
        expect_list(&p[0], 5, &q, "d a", 0);
        q.value = NULL; /* the key alone */
        expect_list(&p[0], 6, &q, "d b a", 0);
        q.key = "team";
        expect_list(&p[0], 7, &q, "", 0);
        q.key = NULL;
        /* An ended state asked for: the records, without include_ended. */
        q.include_ended = 0;
        q.states[0] = SBX__V1__SANDBOX_STATE__FAILED;
        q.n_states = 1;
        expect_list(&p[0], 8, &q, "b", 0);
        q.states[1] = SBX__V1__SANDBOX_STATE__TERMINATED;
        q.n_states = 2;
        expect_list(&p[0], 9, &q, "d b a", 0);
        q.states[0] = SBX__V1__SANDBOX_STATE__READY;
        q.n_states = 1;
        expect_list(&p[0], 10, &q, "", 0);
        /* A limit that cuts the list short says so. */
        memset(&q, 0, sizeof(q));
        q.include_ended = 1;
        q.limit = 2;
        expect_list(&p[0], 11, &q, "e d", 1);
        q.limit = 4;
        expect_list(&p[0], 12, &q, "e d b a", 0);
        /* Cut only by one that would have been listed: not by an older record that does
         * not match, nor by one the caller may not see. */
        q.key = "env";
        q.value = "dev";
        q.limit = 1;
        expect_list(&p[0], 15, &q, "b", 0);
        q.value = "prod";
        expect_list(&p[0], 16, &q, "d", 1);
        q.key = q.value = NULL;
        q.has_owner = 1;
        q.owner = other;
        expect_list(&p[0], 17, &q, "d", 0);
        q.has_owner = 0;

        /* Root sees every record. */
        if (geteuid() == 0) {
                open_own(&p[1]);
                memset(&q, 0, sizeof(q));
                q.include_ended = 1;
                expect_list(&p[1], 13, &q, "e d c b a", 0);
                q.has_owner = 1;
                q.owner = other;
                expect_list(&p[1], 14, &q, "d c", 0);
                end(p, 2);
        } else {
                end(p, 1);
        }
}
END_TEST

/* ---- GetHistory --------------------------------------------------------------------- */

static void insert_command(const char *sandbox, uint64_t seq, int ended) {
        char id[32], arg[32];
        const char *argv[2] = {"echo", arg};
        struct store_command c;

        snprintf(id, sizeof(id), "c-%llu", (unsigned long long)seq);
        snprintf(arg, sizeof(arg), "n%llu", (unsigned long long)seq);
        memset(&c, 0, sizeof(c));
        c.sandbox_id = sandbox;
        c.command_id = id;
        c.argv = argv;
        c.argc = 2;
        c.cwd = "/workspace";
        c.caller_uid = me;
        c.caller_pid = 77;
        c.client_name = "check_rpc";
        c.started_ms = 10000 + (int64_t)seq;
        c.seq = seq;
        if (ended) {
                c.ended_ms = c.started_ms + 5;
                c.outcome = "exited";
                c.has_exit_code = 1;
                c.exit_code = (int)seq;
                c.duration = 0.005;
                c.stdout_bytes = seq * 10;
                c.limits_hit = "";
                ck_assert_int_eq(store_command_insert_ended(K.d.store, &c), 0);
        } else {
                ck_assert_int_eq(store_command_insert(K.d.store, &c), 0);
        }
}

/* One page of the history of id: the seqs (space-separated), next_after_seq, truncated. */
static void expect_page(struct peer *p, uint64_t rid, const char *id, int has_after,
                        uint64_t after, uint32_t limit, const char *want, uint64_t next,
                        int truncated) {
        struct wbuf b = {.n = 0};
        Sbx__V1__Response *r;
        char got[256] = "";
        size_t i;

        w_str(&b, 1, id);
        if (has_after)
                w_uint(&b, 2, after);
        if (limit)
                w_uint(&b, 3, limit);
        send_body(p, rid, F_HISTORY, &b);
        r = expect_ok(p, rid, SBX__V1__RESPONSE__BODY_HISTORY);
        for (i = 0; i < r->history->n_commands; i++) {
                const Sbx__V1__CommandRecord *c = r->history->commands[i];
                char cid[32], arg[32];
                size_t n = strlen(got);

                snprintf(got + n, sizeof(got) - n, "%s%llu", n ? " " : "",
                         (unsigned long long)c->seq);
                snprintf(cid, sizeof(cid), "c-%llu", (unsigned long long)c->seq);
                snprintf(arg, sizeof(arg), "n%llu", (unsigned long long)c->seq);
                ck_assert_str_eq(c->command_id, cid);
                ck_assert_uint_eq(c->n_argv, 2);
                ck_assert_str_eq(c->argv[0], "echo");
                ck_assert_str_eq(c->argv[1], arg);
                ck_assert_str_eq(c->cwd, "/workspace");
                ck_assert_uint_eq(c->caller_uid, me);
                ck_assert_int_eq(c->caller_pid, 77);
                ck_assert_str_eq(c->client_name, "check_rpc");
                ck_assert_int_eq(c->started_unix_ms, 10000 + (int64_t)c->seq);
                ck_assert(c->has_outcome);
                if (c->seq == 5) { /* still running */
                        ck_assert_int_eq(c->outcome, SBX__V1__OUTCOME__RUNNING);
                        ck_assert(!c->has_ended_unix_ms);
                        ck_assert(!c->has_exit_code);
                } else {
                        ck_assert_int_eq(c->outcome, SBX__V1__OUTCOME__EXITED);
                        ck_assert(c->has_exit_code);
                        ck_assert_int_eq(c->exit_code, (int)c->seq);
                        ck_assert_int_eq(c->ended_unix_ms, c->started_unix_ms + 5);
                        ck_assert_uint_eq(c->stdout_bytes, c->seq * 10);
                }
        }
        ck_assert_msg(strcmp(got, want) == 0, "history %llu: got '%s', wanted '%s'",
                      (unsigned long long)rid, got, want);
        ck_assert(r->history->has_next_after_seq);
        ck_assert_uint_eq(r->history->next_after_seq, next);
        ck_assert(r->history->has_truncated);
        ck_assert_int_eq(r->history->truncated, truncated);
        sbx__v1__response__free_unpacked(r, NULL);
}

START_TEST(history_paging) {
        struct peer p;
        uint64_t seq;

        begin();
        record("h", me, "terminated", 1000, NULL, NULL, 0);
        record("h2", me, "terminated", 1500, NULL, NULL, 0);
        for (seq = 1; seq <= 4; seq++)
                insert_command("h", seq, 1);
        insert_command("h", 5, 0);
        insert_command("h2", 1, 1);
        open_caller(&p);
        /* Pages of two, each going on where the last stopped. */
        expect_page(&p, 1, "h", 0, 0, 2, "1 2", 2, 1);
        expect_page(&p, 2, "h", 1, 2, 2, "3 4", 4, 1);
        expect_page(&p, 3, "h", 1, 4, 2, "5", 5, 0);
        expect_page(&p, 4, "h", 1, 5, 2, "", 5, 0);
        /* A page exactly as long as what is left is the last. */
        expect_page(&p, 5, "h", 1, 3, 2, "4 5", 5, 0);
        /* The default limit, and a limit over the maximum, take everything here. */
        expect_page(&p, 6, "h", 0, 0, 0, "1 2 3 4 5", 5, 0);
        expect_page(&p, 7, "h", 0, 0, SBX_MAX_HISTORY_LIMIT + 1, "1 2 3 4 5", 5, 0);
        /* Past the end. */
        expect_page(&p, 8, "h", 1, 99, 2, "", 99, 0);
        /* Another sandbox's commands are its own. */
        expect_page(&p, 9, "h2", 0, 0, 0, "1", 1, 0);
        end(&p, 1);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("rpc");
        TCase *tc;

        tc = tcase_create("codes");
        tcase_add_test(tc, code_from_errno_table);
        tcase_add_test(tc, code_names);
        suite_add_tcase(s, tc);

        tc = tcase_create("schema");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, malformed_protobuf_closes);
        tcase_add_test(tc, unknown_field_closes);
        tcase_add_test(tc, nul_in_string_answers_that_request_only);
        tcase_add_test(tc, deep_nesting_refused);
        tcase_add_test(tc, request_id_missing_or_zero);
        tcase_add_test(tc, request_without_body);
        suite_add_tcase(s, tc);

        tc = tcase_create("requests");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, hello);
        tcase_add_test(tc, missing_sandbox_id);
        tcase_add_test(tc, open_port_malformed);
        tcase_add_test(tc, unknown_or_foreign_id_not_found);
        tcase_add_test(tc, ended_sandbox_on_record);
        tcase_add_test(tc, cancel_disallowed_signal);
        tcase_add_test(tc, watch_files_malformed);
        tcase_add_test(tc, set_timeout_without_timeout);
        tcase_add_test(tc, list_empty_daemon);
        tcase_add_test(tc, list_records_filtered);
        tcase_add_test(tc, history_paging);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
