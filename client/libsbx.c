/* libsbx.c: the connection and the calls of libsbx, and the conversion between the
 * sbx.v1 wire messages and the plain structs of sbx.h.
 *
 * Owns each sbx_client: its socket (or, for an ssh:// URL, its end of the pipe to an ssh
 * child, libsbx_ssh.c), its frame reader, the copy of the daemon's Hello reply and the
 * message of the last failure. A call builds one Request on the stack
 * (pointing at the caller's strings, copying only what must be reshaped), sends it as
 * one frame, and reads frames until the Response with its request_id arrives; streamed
 * output of a RunCommand goes to the caller's callback on the way. Results are deep
 * copies into malloc'd structs, freed by the functions in libsbx_types.c.
 *
 * Failure policy: a daemon status that is not OK is returned as it is and the
 * connection stays usable. A transport failure (cannot send or receive, the daemon
 * closed the connection, the call timeout passed) is SBX_UNAVAILABLE; a reply that
 * breaks the protocol (undecodable, oversized, for another request) is SBX_INTERNAL.
 * After either the connection is closed, because what is still in flight on it can no
 * longer be matched to a request; the next call connects again and says Hello again.
 * Called by applications and by the sbx tool; never logs, never exits. */
#include "sbx.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "libsbx_cli.h"
#include "libsbx_ssh.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"

/* How long sbx_connect waits for the Hello reply when no call timeout is set: a
 * daemon that accepts but never answers must not hang a client that has not had the
 * chance to set a timeout yet. */
#define CONNECT_HELLO_TIMEOUT_MS 30000u
/* Extra wait for a RunCommand reply on top of the call timeout and the command's own
 * timeout: the daemon reports a timeout only after the command verifiably stopped. */
#define EXEC_GRACE_MS 2000u
/* The wait for a slot allowed for when RunCommand gives no queue_timeout_ms: the
 * daemon's default (sbxd --queue-timeout, RunCommand.queue_timeout_ms in sbx.proto). */
#define EXEC_DEFAULT_QUEUE_WAIT_MS 60000u
/* A reader buffer larger than this is released before a call when the call before it
 * read no frame larger than this: calls in a row that need the room (files read in
 * pieces) keep it, instead of each growing a fresh one and faulting its pages in
 * (which cost two thirds of a 16 MiB ReadFile). */
#define READER_KEEP_BYTES (4u * 1024u * 1024u)
/* The highest status code this library knows (a higher one is reported as INTERNAL). */
#define LAST_CODE SBX_SANDBOX_ENDED
/* The largest frame we accept from a daemon that announces a larger maximum. */
#define MAX_ACCEPTED_FRAME_BYTES (1024u * 1024u * 1024u)
/* ssh:// links: how long ssh may take to exit once the connection ended (its exit
 * status and last stderr line make the error message), and once we closed our end (it
 * ends the remote `sbx dial-stdio` cleanly) before it is terminated. */
#define SSH_EXIT_WAIT_MS   2000
#define SSH_CLOSE_GRACE_MS 1000
/* How long ssh may take to exit after the remote side wrote text instead of a reply. */
#define SSH_GARBAGE_WAIT_MS 300

struct sbx_client {
        int fd;              /* -1 while not connected */
        char *socket_path;   /* a socket path, or an ssh:// URL */
        struct ssh_link ssh; /* the ssh child of an ssh:// connection */
        char *client_name;
        uint64_t last_request_id;
        uint64_t call_timeout_ms; /* 0: wait forever */
        uint32_t max_send_bytes;  /* the daemon's frame maximum, from Hello */
        struct frame_reader reader;
        size_t reader_used;      /* the largest frame read since the last call began */
        struct sbx_hello *hello; /* NULL until a Hello was answered */
        bool connecting;         /* inside do_connect: the Hello call must not recurse */
        bool defer_hello;        /* libsbx_connect_pipelined: a Hello's reply is read late */
        uint64_t hello_id;       /* a Hello sent whose reply is not read yet; 0: none */
        int64_t hello_deadline;  /* when that reply is overdue; -1: never */
        uint64_t hello_wait_ms;  /* and the wait it stands for, for the message */
        int watch_fd;            /* libsbx_set_watch: polled with the connection; -1: none */
        libsbx_watch_cb on_watch;
        void *watch_userdata;
        char *message;    /* last failure, NULL after success */
        bool message_oom; /* the last failure's message could not be allocated */
        int err;
};

/* ---- errors ------------------------------------------------------------------------- */

static void clear_error(sbx_client *c) {
        free(c->message);
        c->message = NULL;
        c->message_oom = false;
        c->err = 0;
}

/* Records a failure on c and returns code, for `return fail(...)`. */
__attribute__((format(printf, 4, 5))) static enum sbx_code fail(sbx_client *c, enum sbx_code code,
                                                                int err, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(c->message);
        c->message = m;
        c->message_oom = m == NULL;
        c->err = err;
        return code;
}

static enum sbx_code fail_oom(sbx_client *c) {
        return fail(c, SBX_INTERNAL, ENOMEM, "out of memory in libsbx");
}

const char *sbx_error_message(const sbx_client *c) {
        if (!c)
                return "no client (out of memory while connecting)";
        if (c->message_oom)
                return "out of memory while describing an error";
        return c->message ? c->message : "";
}

int sbx_errno(const sbx_client *c) {
        return c ? c->err : ENOMEM;
}

/* ---- enums: libsbx's values are the wire's ---------------------------------------------- */

/* The enums of sbx.h carry the numbers of sbx.proto's, so that a value crosses by a
 * range-checked cast (the *_from_wire functions below); these keep the two equal. The
 * names of the values are spelled once, in libsbx_types.c. */
#define SAME_VALUE(a, b) _Static_assert((int)(a) == (int)(b), #a " is not " #b)
SAME_VALUE(SBX_STATE_UNSPECIFIED, SBX__V1__SANDBOX_STATE__SANDBOX_STATE_UNSPECIFIED);
SAME_VALUE(SBX_STATE_CREATING, SBX__V1__SANDBOX_STATE__CREATING);
SAME_VALUE(SBX_STATE_READY, SBX__V1__SANDBOX_STATE__READY);
SAME_VALUE(SBX_STATE_TERMINATING, SBX__V1__SANDBOX_STATE__TERMINATING);
SAME_VALUE(SBX_STATE_TERMINATED, SBX__V1__SANDBOX_STATE__TERMINATED);
SAME_VALUE(SBX_STATE_EXPIRED, SBX__V1__SANDBOX_STATE__EXPIRED);
SAME_VALUE(SBX_STATE_FAILED, SBX__V1__SANDBOX_STATE__FAILED);
SAME_VALUE(SBX_STATE_LOST, SBX__V1__SANDBOX_STATE__LOST);
SAME_VALUE(SBX_OUTCOME_UNSPECIFIED, SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED);
SAME_VALUE(SBX_OUTCOME_EXITED, SBX__V1__OUTCOME__EXITED);
SAME_VALUE(SBX_OUTCOME_SIGNALED, SBX__V1__OUTCOME__SIGNALED);
SAME_VALUE(SBX_OUTCOME_TIMED_OUT, SBX__V1__OUTCOME__TIMED_OUT);
SAME_VALUE(SBX_OUTCOME_OUT_OF_MEMORY, SBX__V1__OUTCOME__OUT_OF_MEMORY);
SAME_VALUE(SBX_OUTCOME_CANCELLED, SBX__V1__OUTCOME__CANCELLED);
SAME_VALUE(SBX_OUTCOME_SANDBOX_ENDED, SBX__V1__OUTCOME__SANDBOX_ENDED);
SAME_VALUE(SBX_OUTCOME_START_FAILED, SBX__V1__OUTCOME__START_FAILED);
SAME_VALUE(SBX_OUTCOME_UNKNOWN, SBX__V1__OUTCOME__UNKNOWN);
SAME_VALUE(SBX_OUTCOME_RUNNING, SBX__V1__OUTCOME__RUNNING);
SAME_VALUE(SBX_OUTCOME_QUEUE_TIMEOUT, SBX__V1__OUTCOME__QUEUE_TIMEOUT);
SAME_VALUE(SBX_FILE_UNKNOWN, SBX__V1__FILE_TYPE__FILE_TYPE_UNKNOWN);
SAME_VALUE(SBX_FILE_BLOCK_DEVICE, SBX__V1__FILE_TYPE__BLOCK_DEVICE);
SAME_VALUE(SBX_NETWORK_NONE, SBX__V1__NETWORK_MODE__NETWORK_NONE);
SAME_VALUE(SBX_NETWORK_FULL, SBX__V1__NETWORK_MODE__NETWORK_FULL);
SAME_VALUE(SBX_NETWORK_ALLOWLIST, SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST);
SAME_VALUE(SBX_OK, SBX__V1__CODE__OK);
SAME_VALUE(SBX_SANDBOX_ENDED, SBX__V1__CODE__ENDED);

static enum sbx_state state_from_wire(int v) {
        return v >= 0 && v <= SBX_STATE_LOST ? (enum sbx_state)v : SBX_STATE_UNSPECIFIED;
}

/* An outcome this library knows; RUNNING only in a history record (record true), never
 * in a result. */
static enum sbx_outcome outcome_from_wire(int v, bool record) {
        if (v < 0 || v > SBX_OUTCOME_QUEUE_TIMEOUT || (v == SBX_OUTCOME_RUNNING && !record))
                return SBX_OUTCOME_UNSPECIFIED;
        return (enum sbx_outcome)v;
}

static enum sbx_file_type file_type_from_wire(int v) {
        return v >= 0 && v <= SBX_FILE_BLOCK_DEVICE ? (enum sbx_file_type)v : SBX_FILE_UNKNOWN;
}

/* ---- small helpers ------------------------------------------------------------------ */

/* protobuf-c's message structs hold `char *` and `uint8_t *` even in fields that packing
 * only reads; requests point them at the caller's const data instead of copying it.
 * The cast goes through uintptr_t to say so on purpose (it is not a -Wcast-qual slip). */
static char *unconst(const char *s) {
        return (char *)(uintptr_t)s;
}

static char **unconst_v(const char *const *v) {
        return (char **)(uintptr_t)v;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The poll() timeout until deadline (-1: no deadline), 0 once it has passed. */
static int poll_timeout(int64_t deadline) {
        int64_t left;
        if (deadline < 0)
                return -1;
        left = deadline - now_ms();
        if (left <= 0)
                return 0;
        return left > INT_MAX ? INT_MAX : (int)left;
}

static bool id_valid(const char *id) {
        size_t n = 0;
        for (const char *p = id; *p; p++, n++) {
                char ch = *p;
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
                        return false;
        }
        return n >= 1 && n <= SBX_ID_MAX_BYTES;
}

/* A call given NULL where it needs a pointer: SBX_INVALID_ARGUMENT, with its own message
 * on c when there is a c (the previous call's message must not stand for this one). */
static enum sbx_code null_arg(sbx_client *c, const char *fn, const char *what) {
        if (!c)
                return SBX_INVALID_ARGUMENT;
        return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                    "%s() was given NULL for %s; pass the address of a pointer for the result", fn,
                    what);
}

/* Checks the sandbox ID argument of a call; fills the error on c when it is bad. */
static enum sbx_code check_id(sbx_client *c, const char *id) {
        if (!id)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no sandbox ID given");
        if (!id_valid(id))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                            "invalid sandbox ID '%.80s': use 1 to %u of the characters A-Z a-z 0-9 "
                            ". _ -",
                            id, SBX_ID_MAX_BYTES);
        return SBX_OK;
}

static enum sbx_code check_path(sbx_client *c, const char *path) {
        if (!path)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no path given");
        return SBX_OK;
}

static bool strv_valid(const struct sbx_strv *s) {
        if (s->n > 0 && !s->v)
                return false;
        for (size_t i = 0; i < s->n; i++)
                if (!s->v[i])
                        return false;
        return true;
}

static bool strs_valid(const char *const *v, size_t n) {
        if (n > 0 && !v)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!v[i])
                        return false;
        return true;
}

/* A tiny list of allocations that live exactly as long as one request being built. */
struct pool {
        void **v;
        size_t n, cap;
        bool oom;
};

static void *pool_take(struct pool *p, void *ptr) {
        if (!ptr) {
                p->oom = true;
                return NULL;
        }
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 8;
                void **nv = realloc(p->v, cap * sizeof(*nv));
                if (!nv) {
                        free(ptr);
                        p->oom = true;
                        return NULL;
                }
                p->v = nv;
                p->cap = cap;
        }
        p->v[p->n++] = ptr;
        return ptr;
}

static void *pool_calloc(struct pool *p, size_t n, size_t size) {
        return pool_take(p, calloc(n ? n : 1, size));
}

static void pool_free(struct pool *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->v[i]);
        free(p->v);
        memset(p, 0, sizeof(*p));
}

/* ---- transport ---------------------------------------------------------------------- */

/* Closes the connection; an ssh child sees its end and exits (else it is ended). */
static void disconnect(sbx_client *c) {
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->hello_id = 0;
        ssh_link_close(&c->ssh, SSH_CLOSE_GRACE_MS);
        frame_reader_free(&c->reader);
        frame_reader_init(&c->reader, c->reader.max_frame_bytes);
}

size_t libsbx_reply_room(const sbx_client *c) {
        return c ? c->reader.cap : 0;
}

/* poll() on p[0..n) (n <= 2) until one is ready or the deadline passes. Over ssh, ssh's
 * stderr is polled too and drained whenever it has something, so that ssh never blocks
 * on a full pipe and its last words are at hand for an error; the watched fd
 * (libsbx_set_watch) too, and its callback called whenever it is ready. Returns the
 * number of p ready, 0 at the deadline, or -errno; EINTR is retried. */
static int poll_conn(sbx_client *c, struct pollfd *p, nfds_t n, int64_t deadline) {
        struct pollfd all[4];

        for (;;) {
                nfds_t m = n, ssh_at = 0, watch_at = 0;
                int r;

                memcpy(all, p, n * sizeof(*p));
                if (c->ssh.err_fd >= 0) {
                        ssh_at = m;
                        all[m++] = (struct pollfd){.fd = c->ssh.err_fd, .events = POLLIN};
                }
                if (c->watch_fd >= 0) {
                        watch_at = m;
                        all[m++] = (struct pollfd){.fd = c->watch_fd, .events = POLLIN};
                }
                r = poll(all, m, poll_timeout(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : 0;
                if (ssh_at && all[ssh_at].revents) {
                        ssh_link_drain(&c->ssh);
                        r--;
                }
                if (watch_at && all[watch_at].revents) {
                        c->on_watch(c->watch_userdata);
                        r--;
                }
                if (r > 0) {
                        for (nfds_t i = 0; i < n; i++)
                                p[i].revents = all[i].revents;
                        return r;
                }
        }
}

/* Waits until c->fd is ready for events or the deadline passes. 0, -ETIMEDOUT or -errno. */
static int wait_fd(sbx_client *c, short events, int64_t deadline) {
        struct pollfd pfd = {.fd = c->fd, .events = events};
        int n = poll_conn(c, &pfd, 1, deadline);

        if (n > 0)
                return 0; /* ready, or an error the next send/recv reports */
        return n == 0 ? -ETIMEDOUT : n;
}

static int send_all(sbx_client *c, const uint8_t *buf, size_t len, int64_t deadline) {
        size_t off = 0;
        while (off < len) {
                ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        int r = wait_fd(c, POLLOUT, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                return n < 0 ? -errno : -EIO;
        }
        return 0;
}

/* Receives what is there into the frame reader, waiting for at least one byte.
 * 0, -ECONNRESET when the daemon closed the connection, -ETIMEDOUT, -ENOMEM or -errno. */
static int recv_some(sbx_client *c, int64_t deadline) {
        /* Replies that keep coming never make the wait below poll: the watched fd is
         * looked at here too, or a reader slower than the daemon never hears it. */
        if (c->watch_fd >= 0) {
                struct pollfd w = {.fd = c->watch_fd, .events = POLLIN};
                if (poll(&w, 1, 0) > 0)
                        c->on_watch(c->watch_userdata);
        }
        for (;;) {
                uint8_t *dst;
                size_t room;
                ssize_t n;
                int r = frame_reader_prepare(&c->reader, &dst, &room);
                if (r < 0)
                        return r;
                n = recv(c->fd, dst, room, MSG_DONTWAIT);
                if (n > 0) {
                        frame_reader_commit(&c->reader, (size_t)n);
                        return 0;
                }
                if (n == 0)
                        return -ECONNRESET;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return -errno;
                r = wait_fd(c, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

/* The failure of an ssh:// connection, in ssh's words (why, freed here): ssh could not
 * connect or log in, the remote side has no sbx, the remote sbx found no daemon. */
static enum sbx_code ssh_fail(sbx_client *c, int err, uint64_t waited_ms, char *why) {
        enum sbx_code code;

        if (err == ETIMEDOUT)
                code = fail(c, SBX_UNAVAILABLE, err,
                            "sbxd at %s did not answer within %llu ms (the call timeout); the "
                            "connection was closed; %s",
                            c->socket_path, (unsigned long long)waited_ms, why);
        else
                code = fail(c, SBX_UNAVAILABLE, err, "%s sbxd at %s: %s",
                            c->connecting ? "cannot reach" : "lost the connection to",
                            c->socket_path, why);
        free(why);
        return code;
}

/* Text where the Hello reply should be, over ssh: something on the remote side wrote on
 * stdout before (or instead of) `sbx dial-stdio`: a login shell's message, a startup
 * file's echo, a forced command. Quotes the start of it; closes the connection. */
static enum sbx_code ssh_garbage_fail(sbx_client *c) {
        const uint8_t *b = c->reader.buf + c->reader.start;
        size_t n = frame_reader_pending(&c->reader);
        char text[81], *why;
        size_t k = 0;
        enum sbx_code code;

        for (size_t i = 0; i < n && k < sizeof(text) - 1; i++)
                text[k++] = b[i] >= ' ' && b[i] < 0x7F ? (char)b[i] : ' ';
        while (k > 0 && text[k - 1] == ' ')
                k--;
        text[k] = 0;
        why = ssh_link_explain(&c->ssh, SSH_GARBAGE_WAIT_MS);
        disconnect(c);
        code = fail(c, SBX_UNAVAILABLE, EPROTO,
                    "cannot reach sbxd at %s: the remote side wrote '%s' instead of sbxd's "
                    "protocol (the login shell or its startup files write on stdout, or the "
                    "account runs another command; the ssh session must run `sbx dial-stdio` "
                    "and print nothing else)%s%s",
                    c->socket_path, text, why ? "; " : "", why ? why : "");
        free(why);
        return code;
}

/* A failure of the connection itself: closes it and describes err. */
static enum sbx_code transport_fail(sbx_client *c, int err, uint64_t waited_ms) {
        enum sbx_code code = SBX_UNAVAILABLE;
        char *why = NULL;

        if (c->ssh.pid && err != ENOMEM)
                why = ssh_link_explain(&c->ssh, err == ETIMEDOUT ? 0 : SSH_EXIT_WAIT_MS);
        disconnect(c);
        if (why)
                return ssh_fail(c, err, waited_ms, why);
        if (err == ENOMEM)
                return fail_oom(c);
        if (err == ETIMEDOUT)
                return fail(c, code, err,
                            "sbxd at %s did not answer within %llu ms (the call timeout); the "
                            "connection was closed",
                            c->socket_path, (unsigned long long)waited_ms);
        if (err == ECONNRESET || err == EPIPE)
                return fail(c, code, err,
                            "sbxd at %s closed the connection before it answered (did it stop "
                            "or restart? check `sbx doctor`)",
                            c->socket_path);
        return fail(c, code, err, "lost the connection to sbxd at %s: %s", c->socket_path,
                    strerror(err));
}

/* A reply that breaks the protocol: closes the connection and describes it. */
__attribute__((format(printf, 3, 4))) static enum sbx_code protocol_fail(sbx_client *c, int err,
                                                                         const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        enum sbx_code code;

        disconnect(c);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        code = fail(c, SBX_INTERNAL, err, "protocol error from sbxd at %s: %s", c->socket_path,
                    m ? m : "(out of memory)");
        free(m);
        return code;
}

/* How responses are unpacked (see alloc_plus_one). */
static ProtobufCAllocator unpack_allocator;

/* One request and how to wait for its answer: what call() exchanges with the daemon. */
struct exchange {
        Sbx__V1__Request *req;            /* body set by the caller; request_id set by call() */
        Sbx__V1__Response__BodyCase want; /* body of the final reply */
        bool body_optional;               /* the final reply may carry no body (or Empty) */
        bool keep_error_body;             /* a non-OK status with a `want` body: hand it over */
        uint64_t extra_ms;                /* added to the call timeout (RunCommand) */
        /* The request's one large bytes field (WriteFile's data), sent from where it is
         * rather than copied into the frame; NULL: none. */
        const uint8_t *ext;
        size_t ext_len;
        sbx_output_cb on_output;
        sbx_started_cb on_started; /* called once, at CommandStarted */
        sbx_queued_cb on_queued;   /* called at each CommandQueued */
        void *userdata;            /* of on_started and on_queued (on_output may have its own) */
        void *output_userdata;
        bool started_told;
        /* RunCommand.background: the one reply is CommandStarted, CommandQueued or the
         * result (want is COMMAND_STARTED). */
        bool background_answer;
        /* Streamed stdin (RunCommand with stdin_stream): */
        bool feeding; /* stdin_fd is fed to the command */
        int stdin_fd;
        const char *sandbox_id;
        char *command_id; /* from CommandStarted */
        bool stdin_done;
        unsigned inputs_in_flight;
};

static enum sbx_code do_connect(sbx_client *c);
static enum sbx_code hello_finish(sbx_client *c);

/* How many CommandInput requests may wait for their answers at once. */
#define INPUT_WINDOW      4u
#define INPUT_CHUNK_BYTES (64u * 1024u)

/* Sends one CommandInput for k's command: data (may be empty) and eof. */
static int send_input(sbx_client *c, struct exchange *k, const uint8_t *data, size_t len, bool eof,
                      int64_t deadline) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;
        uint8_t *buf;
        size_t blen;
        int r;

        in.sandbox_id = (char *)(uintptr_t)k->sandbox_id;
        in.command_id = k->command_id;
        in.has_data = 1;
        in.data.data = (uint8_t *)(uintptr_t)data;
        in.data.len = len;
        in.has_eof = 1;
        in.eof = eof;
        req.has_request_id = 1;
        req.request_id = ++c->last_request_id;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        r = frame_pack(&req.base, c->max_send_bytes, &buf, &blen);
        if (r < 0)
                return r;
        r = send_all(c, buf, blen, deadline);
        free(buf);
        if (r == 0)
                k->inputs_in_flight++;
        return r;
}

/* Waits for bytes from the daemon like recv_some, meanwhile feeding k->stdin_fd to the
 * command once it has started (at most INPUT_WINDOW inputs unanswered). */
static int recv_or_feed(sbx_client *c, struct exchange *k, int64_t deadline) {
        for (;;) {
                struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                                      {.fd = k->stdin_fd, .events = POLLIN}};
                nfds_t n = (k->command_id && !k->stdin_done && k->inputs_in_flight < INPUT_WINDOW)
                                   ? 2
                                   : 1;
                int r = poll_conn(c, p, n, deadline);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ETIMEDOUT;
                if (n == 2 && p[1].revents) {
                        uint8_t buf[INPUT_CHUNK_BYTES];
                        ssize_t got = read(k->stdin_fd, buf, sizeof(buf));
                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got <= 0)
                                k->stdin_done = true; /* end of file (or an error: the same) */
                        r = send_input(c, k, buf, got > 0 ? (size_t)got : 0, got <= 0, deadline);
                        if (r < 0)
                                return r;
                }
                if (p[0].revents)
                        return recv_some(c, deadline);
        }
}

/* Before a call: connects when there is no connection (*ret_fresh says it was made
 * now, or that its pipelined Hello is not answered yet), clears the last error, and gives back the
 * room a large reply took (nothing is in flight between calls). */
static enum sbx_code call_begin(sbx_client *c, bool *ret_fresh) {
        /* A connection whose Hello is not answered yet never sat idle. */
        *ret_fresh = c->hello_id != 0;
        if (c->fd < 0 && !c->connecting) {
                enum sbx_code rc = do_connect(c);
                if (rc != SBX_OK)
                        return rc;
                *ret_fresh = true;
        }
        clear_error(c);
        if (frame_reader_pending(&c->reader) == 0 && c->reader.cap > READER_KEEP_BYTES &&
            c->reader_used <= READER_KEEP_BYTES) {
                uint32_t max = c->reader.max_frame_bytes;
                frame_reader_free(&c->reader);
                frame_reader_init(&c->reader, max);
        }
        c->reader_used = 0;
        return SBX_OK;
}

/* How long one call may wait: the call timeout plus the exchange's extra, from now. */
struct call_wait {
        uint64_t ms;      /* 0: forever */
        int64_t deadline; /* -1: none */
};

static struct call_wait call_wait_from_now(const sbx_client *c, const struct exchange *k) {
        struct call_wait w = {0, -1};

        w.ms = c->call_timeout_ms ? c->call_timeout_ms + k->extra_ms : 0;
        w.deadline = w.ms ? now_ms() + (int64_t)(w.ms > INT64_MAX / 4 ? INT64_MAX / 4 : w.ms) : -1;
        return w;
}

/* Numbers k's request (*ret_id), packs it and sends it within the wait w it sets. A
 * connection the daemon closed while it sat idle (it restarted, or let us go) is made again once,
 * unless it was made for this call (fresh): the daemon never saw a whole request, so
 * saying it again on a new connection cannot run it twice. */
/* A packed request: one buffer, or (a large ext) head, ext where it is, tail. */
struct packed_request {
        struct frame_split sp;
};

/* Below this a field is copied into the frame as any: one send beats three. */
#define SPLIT_MIN_BYTES (64u * 1024u)

static int pack_request(sbx_client *c, const struct exchange *k, struct packed_request *p) {
        const uint8_t *ext = k->ext && k->ext_len >= SPLIT_MIN_BYTES ? k->ext : NULL;

        memset(p, 0, sizeof(*p));
        if (ext)
                return frame_pack_split(&k->req->base, c->max_send_bytes, ext, k->ext_len, &p->sp);
        return frame_pack(&k->req->base, c->max_send_bytes, &p->sp.head, &p->sp.head_len);
}

/* From this size on a request's data is sent through a kernel send buffer of
 * GROW_SNDBUF_BYTES (the host's net.core.wmem_max caps it) instead of the default
 * 208 KiB, which woke the daemon and us every ~200 KiB of a large WriteFile. */
#define GROW_SNDBUF_AT_BYTES (1u << 20)
#define GROW_SNDBUF_BYTES    (4 << 20)

static int send_packed(sbx_client *c, const struct packed_request *p, int64_t deadline) {
        int r = send_all(c, p->sp.head, p->sp.head_len, deadline);
        if (p->sp.ext_len >= GROW_SNDBUF_AT_BYTES) {
                int want = GROW_SNDBUF_BYTES;
                (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
        }
        if (r == 0 && p->sp.ext)
                r = send_all(c, p->sp.ext, p->sp.ext_len, deadline);
        if (r == 0 && p->sp.tail_len)
                r = send_all(c, p->sp.tail, p->sp.tail_len, deadline);
        return r;
}

static void packed_request_free(struct packed_request *p) {
        free(p->sp.head);
        free(p->sp.tail);
}

static enum sbx_code send_request(sbx_client *c, struct exchange *k, bool fresh,
                                  struct call_wait *w, uint64_t *ret_id) {
        struct packed_request pk;
        int r;

        *ret_id = ++c->last_request_id;
        k->req->has_request_id = 1;
        k->req->request_id = *ret_id;
        r = pack_request(c, k, &pk);
        if (r == -EMSGSIZE && c->hello_id) {
                /* Larger than the default frame: the Hello's reply may allow it. */
                enum sbx_code rc = hello_finish(c);
                if (rc != SBX_OK)
                        return rc;
                r = pack_request(c, k, &pk);
        }
        if (r == -EMSGSIZE)
                return fail(c, SBX_TOO_LARGE, EMSGSIZE,
                            "the request is %zu bytes, more than sbxd accepts in one frame (%u "
                            "bytes); send the data in smaller pieces",
                            protobuf_c_message_get_packed_size(&k->req->base), c->max_send_bytes);
        if (r < 0)
                return fail_oom(c);
        *w = call_wait_from_now(c, k);
        r = send_packed(c, &pk, w->deadline);
        if ((r == -EPIPE || r == -ECONNRESET) && !fresh && !c->connecting) {
                enum sbx_code rc = do_connect(c);
                if (rc != SBX_OK) {
                        packed_request_free(&pk);
                        return rc;
                }
                clear_error(c);
                r = send_packed(c, &pk, w->deadline);
        }
        packed_request_free(&pk);
        /* A daemon that refuses a connection (a per-user cap, say) answers with one
         * status of request id 0 and closes, which the write may already see: read what
         * it said before calling the connection lost. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return transport_fail(c, -r, w->ms);
        return SBX_OK;
}

/* Reads the next Response into *ret, receiving (and feeding stdin) as needed. *waited
 * says the first wait for the reply has been made. SBX_OK, or the failure (the
 * connection is closed then). */
static enum sbx_code read_reply(sbx_client *c, struct exchange *k, const struct call_wait *w,
                                bool *waited, Sbx__V1__Response **ret) {
        const uint8_t *payload;
        size_t plen;
        int r;

        while ((r = frame_reader_next(&c->reader, &payload, &plen)) == 0) {
                /* Right after the request the reply is not there yet: wait for it first
                 * instead of a recv that finds nothing. */
                r = k->feeding || *waited ? 0 : wait_fd(c, POLLIN, w->deadline);
                *waited = true;
                if (r == 0)
                        r = k->feeding ? recv_or_feed(c, k, w->deadline)
                                       : recv_some(c, w->deadline);
                if (r < 0)
                        return transport_fail(c, -r, w->ms);
        }
        if (r < 0 && c->ssh.pid && c->connecting)
                return ssh_garbage_fail(c);
        if (r < 0)
                return protocol_fail(c, EMSGSIZE, "a frame larger than %u bytes",
                                     c->reader.max_frame_bytes);
        if (plen > c->reader_used)
                c->reader_used = plen;
        *ret = sbx__v1__response__unpack(&unpack_allocator, plen, payload);
        if (!*ret)
                return protocol_fail(c, EBADMSG,
                                     "a reply of %zu bytes that does not decode as "
                                     "sbx.v1.Response",
                                     plen);
        return SBX_OK;
}

/* take_reply's answer for a reply that does not end the call. */
#define REPLY_MORE (-1)

/* A reply's status code (SBX_OK when it has none) and message (NULL when empty). */
static int reply_code(const Sbx__V1__Response *resp, const char **ret_msg) {
        *ret_msg = resp->status && resp->status->message && *resp->status->message
                           ? resp->status->message
                           : NULL;
        return resp->status && resp->status->has_code ? (int)resp->status->code : SBX_OK;
}

/* The answer to one of our CommandInputs (fed while request id ran): handled and freed,
 * true. A refusal (the command has ended, say) stops the feeding; the result still
 * comes. */
static bool take_input_answer(sbx_client *c, struct exchange *k, uint64_t id,
                              Sbx__V1__Response *resp, int code) {
        if (!k->feeding || !resp->has_request_id || resp->request_id <= id ||
            resp->request_id > c->last_request_id)
                return false;
        if (k->inputs_in_flight > 0)
                k->inputs_in_flight--;
        if (code != SBX_OK)
                k->stdin_done = true;
        sbx__v1__response__free_unpacked(resp, NULL);
        return true;
}

/* A reply for another request than id (freed): a connection-level error (request id
 * 0), after which the daemon closes, or a protocol error. Returns the code. */
static enum sbx_code foreign_reply(sbx_client *c, uint64_t id, Sbx__V1__Response *resp, int code,
                                   const char *msg) {
        uint64_t other = resp->request_id;

        if (other == 0 && code != SBX_OK) {
                enum sbx_code lc = code > LAST_CODE ? SBX_INTERNAL : (enum sbx_code)code;
                fail(c, lc, 0, "%s", msg ? msg : "sbxd closed the connection with an error");
                sbx__v1__response__free_unpacked(resp, NULL);
                disconnect(c);
                return lc;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return protocol_fail(c, EPROTO,
                             "a reply for request %llu while request %llu was the only one in "
                             "flight",
                             (unsigned long long)other, (unsigned long long)id);
}

/* The final reply with a status that is not OK: recorded as the failure; the reply goes
 * to *ret when k keeps an error's body and it has the one wanted, else it is freed. */
static enum sbx_code status_reply(sbx_client *c, const struct exchange *k, Sbx__V1__Response *resp,
                                  int code, const char *msg, Sbx__V1__Response **ret) {
        if (code < SBX_OK || code > LAST_CODE) {
                fail(c, SBX_INTERNAL, 0, "sbxd answered with unknown status code %d: %s", code,
                     msg ? msg : "(no message)");
                sbx__v1__response__free_unpacked(resp, NULL);
                return SBX_INTERNAL;
        }
        if (msg)
                fail(c, (enum sbx_code)code, 0, "%s", msg);
        else
                fail(c, (enum sbx_code)code, 0, "sbxd answered %s without a message",
                     sbx_code_name(code));
        if (k->keep_error_body && resp->body_case == k->want)
                *ret = resp;
        else
                sbx__v1__response__free_unpacked(resp, NULL);
        return (enum sbx_code)code;
}

/* The progress of a RunCommand before its result: an output chunk (to on_output),
 * CommandQueued (to on_queued) or CommandStarted (to on_started, and its id for feeding
 * stdin). Handled and freed, true; false for any other reply. */
static bool take_progress(struct exchange *k, Sbx__V1__Response *resp) {
        const Sbx__V1__CommandQueued *q;
        const char *cid;

        if (k->want != SBX__V1__RESPONSE__BODY_COMMAND_RESULT)
                return false;
        if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED) {
                q = resp->command_queued;
                if (k->on_queued && !k->started_told && q && q->command_id)
                        k->on_queued(k->userdata, q->command_id, q->ahead);
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_OUTPUT) {
                const Sbx__V1__OutputChunk *o = resp->output;
                if (k->on_output && o && o->has_data && o->data.len > 0 &&
                    (o->stream == SBX__V1__STREAM__STDOUT || o->stream == SBX__V1__STREAM__STDERR))
                        k->on_output(k->output_userdata, (enum sbx_stream)o->stream, o->offset,
                                     o->data.data, o->data.len);
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_STARTED) {
                cid = resp->command_started ? resp->command_started->command_id : NULL;
                if (k->feeding && !k->command_id && cid) {
                        k->command_id = strdup(cid);
                        if (!k->command_id)
                                k->stdin_done = true;
                }
                if (k->on_started && !k->started_told && cid) {
                        k->started_told = true;
                        k->on_started(k->userdata, cid);
                }
        } else {
                return false;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return true;
}

/* Takes one reply to request id (owned from here): REPLY_MORE when the call goes on,
 * else its code, with *ret the final reply as call() describes. */
static int take_reply(sbx_client *c, struct exchange *k, uint64_t id, Sbx__V1__Response *resp,
                      Sbx__V1__Response **ret) {
        const char *msg;
        int code = reply_code(resp, &msg), got;

        if (take_input_answer(c, k, id, resp, code))
                return REPLY_MORE;
        if (!resp->has_request_id || resp->request_id != id)
                return foreign_reply(c, id, resp, code, msg);
        if (code != SBX_OK)
                return status_reply(c, k, resp, code, msg, ret);
        if (take_progress(k, resp))
                return REPLY_MORE;
        if (resp->body_case != k->want &&
            !(k->background_answer &&
              (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED ||
               resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_RESULT)) &&
            !(k->body_optional && (resp->body_case == SBX__V1__RESPONSE__BODY__NOT_SET ||
                                   resp->body_case == SBX__V1__RESPONSE__BODY_EMPTY))) {
                got = (int)resp->body_case;
                sbx__v1__response__free_unpacked(resp, NULL);
                return protocol_fail(c, EPROTO,
                                     "a reply with body field %d where field %d was expected", got,
                                     (int)k->want);
        }
        *ret = resp;
        return SBX_OK;
}

/* Reads the replies to request id, sent within the wait w, until its final one (as
 * call() describes). */
static enum sbx_code await_reply(sbx_client *c, struct exchange *k, uint64_t id,
                                 const struct call_wait *w, Sbx__V1__Response **ret) {
        bool waited = false;
        enum sbx_code rc;
        int r;

        for (;;) {
                Sbx__V1__Response *resp;
                rc = read_reply(c, k, w, &waited, &resp);
                if (rc != SBX_OK)
                        return rc;
                r = take_reply(c, k, id, resp, ret);
                if (r != REPLY_MORE)
                        return (enum sbx_code)r;
        }
}

/* Sends k->req and waits for its final Response. On SBX_OK *ret is the reply (free with
 * sbx__v1__response__free_unpacked). On a non-OK status *ret is set only when
 * k->keep_error_body and the reply has the wanted body; otherwise it is NULL. The reply
 * of a Hello sent before (libsbx_connect_pipelined) is read first: the request went out
 * behind it without waiting for it, and the daemon answers in order. */
static enum sbx_code call(sbx_client *c, struct exchange *k, Sbx__V1__Response **ret) {
        struct call_wait w = {0, -1};
        bool fresh;
        enum sbx_code rc;
        uint64_t id;

        *ret = NULL;
        rc = call_begin(c, &fresh);
        if (rc != SBX_OK)
                return rc;
        rc = send_request(c, k, fresh, &w, &id);
        if (rc == SBX_OK && c->hello_id)
                rc = hello_finish(c);
        if (rc != SBX_OK)
                return rc;
        return await_reply(c, k, id, &w, ret);
}

/* ---- conversions from the wire ------------------------------------------------------ */

static bool dup_str(char **dst, const char *src) {
        *dst = NULL;
        if (!src)
                return true;
        *dst = strdup(src);
        return *dst != NULL;
}

/* Like dup_str, but an absent string becomes "" (identifiers and names are never NULL). */
static bool dup_str_nn(char **dst, const char *src) {
        *dst = strdup(src ? src : "");
        return *dst != NULL;
}

static bool dup_strv(struct sbx_strv *dst, char *const *v, size_t n) {
        dst->v = NULL;
        dst->n = 0;
        if (n == 0)
                return true;
        dst->v = calloc(n, sizeof(*dst->v));
        if (!dst->v)
                return false;
        dst->n = n;
        for (size_t i = 0; i < n; i++)
                if (!dup_str_nn(&dst->v[i], v[i]))
                        return false;
        return true;
}

/* Responses are unpacked with malloc, one byte more than asked for each block: a
 * bytes field's data can then be NUL-terminated in place (take_bytes), and the message
 * is freed as any (free_unpacked with the default allocator, free()). */
static void *alloc_plus_one(void *ud, size_t size) {
        (void)ud;
        return malloc(size + 1);
}

static void free_block(void *ud, void *p) {
        (void)ud;
        free(p);
}

static ProtobufCAllocator unpack_allocator = {alloc_plus_one, free_block, NULL};

/* Takes b's bytes (unpacked with unpack_allocator) into *dst, NUL-terminated, without
 * copying them; b is left empty, so that the message's free leaves them alone. */
static bool take_bytes(uint8_t **dst, size_t *dst_len, ProtobufCBinaryData *b) {
        size_t n = b->data ? b->len : 0;
        uint8_t *p = n ? b->data : malloc(1);

        if (!p)
                return false;
        if (n) {
                b->data = NULL;
                b->len = 0;
        }
        p[n] = 0;
        *dst = p;
        *dst_len = n;
        return true;
}

static const char *enforcement_name(int e) {
        switch (e) {
        case SBX__V1__ENFORCEMENT__CGROUP_V2:
                return "cgroup_v2";
        case SBX__V1__ENFORCEMENT__CGROUP_V1:
                return "cgroup_v1";
        case SBX__V1__ENFORCEMENT__RLIMIT:
                return "rlimit";
        case SBX__V1__ENFORCEMENT__PROXY:
                return "proxy";
        case SBX__V1__ENFORCEMENT__PROJECT_QUOTA:
                return "project_quota";
        case SBX__V1__ENFORCEMENT__FILESYSTEM_IMAGE:
                return "filesystem_image";
        case SBX__V1__ENFORCEMENT__TMPFS_SIZE:
                return "tmpfs_size";
        default:
                return "none";
        }
}

static bool dup_enforcement(struct sbx_enforcement **dst, size_t *dst_n,
                            Sbx__V1__LimitEnforcement *const *v, size_t n) {
        *dst = NULL;
        *dst_n = 0;
        if (n == 0)
                return true;
        *dst = calloc(n, sizeof(**dst));
        if (!*dst)
                return false;
        *dst_n = n;
        for (size_t i = 0; i < n; i++) {
                if (!dup_str_nn(&(*dst)[i].limit, v[i]->limit))
                        return false;
                if (!dup_str_nn(&(*dst)[i].enforcement, enforcement_name((int)v[i]->enforcement)))
                        return false;
        }
        return true;
}

/* The sandbox uid range of u into h (nothing when u is NULL). false when out of memory. */
static bool hello_uids(struct sbx_hello *h, const Sbx__V1__SandboxUids *u) {
        if (!u || !u->count)
                return true;
        h->sandbox_uid_first = u->first;
        h->sandbox_uid_count = u->count;
        return dup_str_nn(&h->uid_reservation, u->reservation) &&
               dup_str_nn(&h->uid_origin, u->origin);
}

static struct sbx_hello *hello_from_proto(const Sbx__V1__HelloReply *in) {
        struct sbx_hello *h = calloc(1, sizeof(*h));
        const Sbx__V1__Features *f = in->features;
        bool ok;

        if (!h)
                return NULL;
        h->protocol_version = in->protocol_version;
        h->peer_uid = in->peer_uid;
        ok = dup_str_nn(&h->daemon_version, in->daemon_version);
        ok = ok &&
             dup_str_nn(&h->cgroup_version, f && f->cgroup_version ? f->cgroup_version : "none");
        ok = ok && hello_uids(h, in->sandbox_uids);
        if (ok && f) {
                h->user_namespaces = f->user_namespaces;
                h->rootless = f->rootless;
                h->seccomp = f->seccomp;
                h->landlock_abi = f->landlock_abi;
                h->openat2 = f->openat2;
                h->max_frame_bytes = f->max_frame_bytes;
                if (f->n_implemented > 0) {
                        struct sbx_strv s;
                        ok = dup_strv(&s, f->implemented, f->n_implemented);
                        /* Handed over even when partial: sbx_hello_free frees it. */
                        h->implemented = s.v;
                        h->n_implemented = s.n;
                }
        }
        if (!ok) {
                sbx_hello_free(h);
                return NULL;
        }
        return h;
}

static struct sbx_hello *hello_copy(const struct sbx_hello *in) {
        struct sbx_hello *h = calloc(1, sizeof(*h));
        struct sbx_strv s;
        bool ok;

        if (!h)
                return NULL;
        *h = *in;
        h->daemon_version = h->cgroup_version = h->uid_reservation = h->uid_origin = NULL;
        h->implemented = NULL;
        h->n_implemented = 0;
        ok = dup_str_nn(&h->daemon_version, in->daemon_version) &&
             dup_str_nn(&h->cgroup_version, in->cgroup_version) &&
             dup_str(&h->uid_reservation, in->uid_reservation) &&
             dup_str(&h->uid_origin, in->uid_origin);
        if (ok) {
                ok = dup_strv(&s, in->implemented, in->n_implemented);
                h->implemented = s.v; /* even when partial: sbx_hello_free frees it */
                h->n_implemented = s.n;
        }
        if (!ok) {
                sbx_hello_free(h);
                return NULL;
        }
        return h;
}

static bool policy_from_proto(struct sbx_policy *out, const Sbx__V1__Policy *in) {
        const Sbx__V1__Limits *l;

        sbx_policy_init(out);
        if (!in)
                return true;
        out->network = in->network == SBX__V1__NETWORK_MODE__NETWORK_FULL ? SBX_NETWORK_FULL
                       : in->network == SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST
                               ? SBX_NETWORK_ALLOWLIST
                               : SBX_NETWORK_NONE;
        out->protect_defaults = in->protect_defaults;
        out->inherit_environment_set = in->inherit_environment_set;
        l = in->limits;
        if (l) {
                struct sbx_limits *o = &out->limits;
                if (l->has_memory_bytes) {
                        o->set |= SBX_LIMIT_MEMORY;
                        o->memory_bytes = l->memory_bytes;
                }
                if (l->has_cpu_seconds) {
                        o->set |= SBX_LIMIT_CPU_SECONDS;
                        o->cpu_seconds = l->cpu_seconds;
                }
                if (l->has_cpu_percent) {
                        o->set |= SBX_LIMIT_CPU_PERCENT;
                        o->cpu_percent = l->cpu_percent;
                }
                if (l->has_processes) {
                        o->set |= SBX_LIMIT_PROCESSES;
                        o->processes = l->processes;
                }
                if (l->has_file_size_bytes) {
                        o->set |= SBX_LIMIT_FILE_SIZE;
                        o->file_size_bytes = l->file_size_bytes;
                }
                if (l->has_open_files) {
                        o->set |= SBX_LIMIT_OPEN_FILES;
                        o->open_files = l->open_files;
                }
                if (l->has_core_dumps) {
                        o->set |= SBX_LIMIT_CORE_DUMPS;
                        o->core_dumps = l->core_dumps;
                }
                if (l->has_tmp_bytes) {
                        o->set |= SBX_LIMIT_TMP;
                        o->tmp_bytes = l->tmp_bytes;
                }
                if (l->has_commands) {
                        o->set |= SBX_LIMIT_COMMANDS;
                        o->commands = l->commands;
                }
                if (l->has_queued_commands) {
                        o->set |= SBX_LIMIT_QUEUED_COMMANDS;
                        o->queued_commands = l->queued_commands;
                }
                if (l->has_disk_bytes) {
                        o->set |= SBX_LIMIT_DISK;
                        o->disk_bytes = l->disk_bytes;
                }
                if (l->has_disk_inodes) {
                        o->set |= SBX_LIMIT_DISK_INODES;
                        o->disk_inodes = l->disk_inodes;
                }
        }
        return dup_strv(&out->writable_paths, in->writable_paths, in->n_writable_paths) &&
               dup_strv(&out->denied_read_paths, in->denied_read_paths, in->n_denied_read_paths) &&
               dup_strv(&out->denied_write_paths, in->denied_write_paths,
                        in->n_denied_write_paths) &&
               dup_strv(&out->inherit_environment, in->inherit_environment,
                        in->n_inherit_environment) &&
               dup_strv(&out->allowed_hosts, in->allowed_hosts, in->n_allowed_hosts) &&
               dup_strv(&out->allowed_cidrs, in->allowed_cidrs, in->n_allowed_cidrs) &&
               dup_str(&out->root_dir, in->root_dir);
}

static bool dup_u32s(uint32_t **dst, size_t *dst_n, const uint32_t *v, size_t n) {
        *dst = NULL;
        *dst_n = 0;
        if (n == 0)
                return true;
        *dst = malloc(n * sizeof(**dst));
        if (!*dst)
                return false;
        memcpy(*dst, v, n * sizeof(**dst));
        *dst_n = n;
        return true;
}

/* SandboxInfo.commands into s. */
static bool commands_from_proto(struct sbx_sandbox *s, const Sbx__V1__SandboxInfo *in) {
        if (in->n_commands == 0)
                return true;
        s->commands = calloc(in->n_commands, sizeof(*s->commands));
        if (!s->commands)
                return false;
        s->n_commands = in->n_commands;
        for (size_t i = 0; i < in->n_commands; i++) {
                const Sbx__V1__CommandInfo *ci = in->commands[i];
                struct sbx_command_info *o = &s->commands[i];
                o->state = (enum sbx_command_state)ci->state;
                o->background = ci->background;
                o->tty = ci->tty;
                o->caller_uid = ci->caller_uid;
                o->started_unix_ms = ci->started_unix_ms;
                o->ended_unix_ms = ci->ended_unix_ms;
                o->outcome = ci->has_outcome ? (int)outcome_from_wire((int)ci->outcome, true) : 0;
                o->has_exit_code = ci->has_exit_code;
                o->exit_code = ci->exit_code;
                if (!dup_str_nn(&o->command_id, ci->command_id) ||
                    !dup_strv(&o->argv, ci->argv, ci->n_argv))
                        return false;
        }
        return true;
}

static struct sbx_sandbox *sandbox_from_proto(const Sbx__V1__SandboxInfo *in) {
        struct sbx_sandbox *s = calloc(1, sizeof(*s));
        bool ok;

        if (!s)
                return NULL;
        sbx_policy_init(&s->policy);
        s->state = state_from_wire((int)in->state);
        s->owner_uid = in->owner_uid;
        s->created_unix_ms = in->created_unix_ms;
        s->deadline_unix_ms = in->deadline_unix_ms;
        s->idle_timeout_ms = in->idle_timeout_ms;
        s->ended_unix_ms = in->ended_unix_ms;
        s->isolated = in->isolated;
        s->running_commands = in->running_commands;
        s->commands_run = in->commands_run;
        s->queued_commands = in->queued_commands;

        ok = dup_str_nn(&s->id, in->id) && dup_str(&s->end_reason, in->end_reason);
        if (ok && in->n_labels > 0) {
                s->labels = calloc(in->n_labels, sizeof(*s->labels));
                ok = s->labels != NULL;
                if (ok)
                        s->n_labels = in->n_labels;
                for (size_t i = 0; ok && i < in->n_labels; i++)
                        ok = dup_str_nn(&s->labels[i].key, in->labels[i]->key) &&
                             dup_str_nn(&s->labels[i].value, in->labels[i]->value);
        }
        ok = ok && policy_from_proto(&s->policy, in->policy);
        ok = ok && dup_strv(&s->warnings, in->warnings, in->n_warnings);
        ok = ok && dup_enforcement(&s->enforcement, &s->n_enforcement, in->enforcement,
                                   in->n_enforcement);
        ok = ok && dup_u32s(&s->share_uids, &s->n_share_uids, in->share_uids, in->n_share_uids);
        ok = ok && dup_u32s(&s->share_gids, &s->n_share_gids, in->share_gids, in->n_share_gids);
        ok = ok && commands_from_proto(s, in);
        if (!ok) {
                sbx_sandbox_free(s);
                return NULL;
        }
        return s;
}

/* The result in (its output taken, not copied: in is freed after this). */
static struct sbx_result *result_from_proto(Sbx__V1__CommandResult *in) {
        struct sbx_result *r = calloc(1, sizeof(*r));
        const Sbx__V1__ResourceReport *rr = in->resources;
        bool ok;

        if (!r)
                return NULL;
        r->outcome = outcome_from_wire((int)in->outcome, false);
        r->has_exit_code = in->has_exit_code;
        r->exit_code = in->exit_code;
        r->has_signal = in->has_signal;
        r->signal = in->signal;
        r->timed_out = in->timed_out;
        r->stdout_truncated = in->stdout_truncated;
        r->stderr_truncated = in->stderr_truncated;
        r->stdout_bytes = in->stdout_bytes;
        r->stderr_bytes = in->stderr_bytes;
        r->duration = in->duration;
        r->isolated = in->isolated;
        r->start_errno = in->start_errno;
        r->has_owner_uid = in->has_owner_uid;
        r->owner_uid = in->owner_uid;
        r->queued_ms = in->queued_ms;
        ok = dup_str_nn(&r->command_id, in->command_id) &&
             dup_str_nn(&r->sandbox_id, in->sandbox_id) &&
             take_bytes(&r->stdout_data, &r->stdout_len, &in->stdout) &&
             take_bytes(&r->stderr_data, &r->stderr_len, &in->stderr) &&
             dup_strv(&r->warnings, in->warnings, in->n_warnings) &&
             dup_str(&r->start_error, in->start_error);
        if (ok && rr) {
                r->cpu_seconds = rr->cpu_seconds;
                r->peak_memory_bytes = rr->peak_memory_bytes;
                ok = dup_str(&r->peak_memory_source, rr->peak_memory_source) &&
                     dup_strv(&r->limits_hit, rr->limits_hit, rr->n_limits_hit) &&
                     dup_enforcement(&r->enforcement, &r->n_enforcement, rr->enforcement,
                                     rr->n_enforcement);
        }
        if (!ok) {
                sbx_result_free(r);
                return NULL;
        }
        return r;
}

static bool file_info_from_proto(struct sbx_file_info *out, const Sbx__V1__FileInfo *in) {
        memset(out, 0, sizeof(*out));
        out->type = file_type_from_wire((int)in->type);
        out->size = in->size;
        out->mode = in->mode;
        out->mtime_unix_ms = in->mtime_unix_ms;
        out->is_dir = in->has_is_dir ? in->is_dir : out->type == SBX_FILE_DIRECTORY;
        return dup_str_nn(&out->name, in->name) &&
               dup_str(&out->symlink_target, in->symlink_target);
}

static bool record_from_proto(struct sbx_command_record *out, const Sbx__V1__CommandRecord *in) {
        memset(out, 0, sizeof(*out));
        out->seq = in->seq;
        out->caller_uid = in->caller_uid;
        out->caller_pid = in->caller_pid;
        out->started_unix_ms = in->started_unix_ms;
        out->ended_unix_ms = in->ended_unix_ms;
        out->outcome = outcome_from_wire((int)in->outcome, true);
        out->has_exit_code = in->has_exit_code;
        out->exit_code = in->exit_code;
        out->has_signal = in->has_signal;
        out->signal = in->signal;
        out->duration = in->duration;
        out->peak_memory_bytes = in->peak_memory_bytes;
        out->stdout_bytes = in->stdout_bytes;
        out->stderr_bytes = in->stderr_bytes;
        out->stdout_truncated = in->stdout_truncated;
        out->stderr_truncated = in->stderr_truncated;
        out->queued_ms = in->queued_ms;
        out->background = in->background;
        out->tty = in->tty;
        return dup_str_nn(&out->command_id, in->command_id) &&
               dup_strv(&out->argv, in->argv, in->n_argv) && dup_str_nn(&out->cwd, in->cwd) &&
               dup_str_nn(&out->client_name, in->client_name);
}

/* ---- connection ----------------------------------------------------------------------- */

static enum sbx_code connect_fail(sbx_client *c, int err) {
        const char *hint = "";
        switch (err) {
        case ENOENT:
        case ECONNREFUSED:
                hint = " (is sbxd running? start it with `make run` in its source tree, "
                       "`sbxd`, or `systemctl start sbxd`)";
                break;
        case EACCES:
        case EPERM:
                hint = " (the socket is mode 0660: run as the daemon's user or a member of the "
                       "socket's group, or pass --socket / set SBX_SOCKET)";
                break;
        case EAGAIN:
                hint = " (sbxd is not accepting connections fast enough; try again)";
                break;
        default:
                break;
        }
        return fail(c, SBX_UNAVAILABLE, err, "cannot connect to %s: %s%s", c->socket_path,
                    strerror(err), hint);
}

/* Starts ssh for the ssh:// URL c->socket_path (libsbx_ssh.c); its end of the pipe
 * becomes c->fd. */
static enum sbx_code open_ssh(sbx_client *c, int *ret_fd) {
        char *msg = NULL;
        int r = ssh_link_open(&c->ssh, c->socket_path, ret_fd, &msg);
        enum sbx_code code;

        if (r == 0)
                return SBX_OK;
        if (!msg)
                return fail_oom(c);
        code = fail(c, r == -EINVAL ? SBX_INVALID_ARGUMENT : SBX_UNAVAILABLE, -r, "%s", msg);
        free(msg);
        return code;
}

/* Connects a new Unix socket to the path c->socket_path: *ret_fd. */
static enum sbx_code open_unix(sbx_client *c, int *ret_fd) {
        struct sockaddr_un sa;
        size_t plen = strlen(c->socket_path);
        int fd;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (plen == 0 || plen >= sizeof(sa.sun_path))
                return fail(c, SBX_INVALID_ARGUMENT, ENAMETOOLONG,
                            "socket path '%s' is empty or too long (at most %zu bytes)",
                            c->socket_path, sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path, c->socket_path, plen);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return fail(c, SBX_UNAVAILABLE, errno, "cannot create a Unix socket: %s",
                            strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int err = errno;
                close(fd);
                return connect_fail(c, err);
        }
        *ret_fd = fd;
        return SBX_OK;
}

/* Connects to c->socket_path, a Unix socket or an ssh:// URL, as c->fd with the default
 * frame limits. On failure nothing is left open and the error is set. */
static enum sbx_code open_socket(sbx_client *c) {
        int fd = -1;
        enum sbx_code rc = ssh_link_is_url(c->socket_path) ? open_ssh(c, &fd) : open_unix(c, &fd);

        if (rc != SBX_OK)
                return rc;
        c->fd = fd;
        c->max_send_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        c->reader.max_frame_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        return SBX_OK;
}

/* Keeps the Hello reply resp (freed here) and takes the daemon's frame limit. */
static enum sbx_code take_hello(sbx_client *c, Sbx__V1__Response *resp) {
        sbx_hello_free(c->hello);
        c->hello = resp->hello ? hello_from_proto(resp->hello) : NULL;
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!c->hello) {
                disconnect(c);
                return fail_oom(c);
        }
        if (c->hello->max_frame_bytes >= SBX_MIN_MAX_FRAME_BYTES) {
                uint64_t m = c->hello->max_frame_bytes;
                c->max_send_bytes = m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
                if (m > c->reader.max_frame_bytes)
                        c->reader.max_frame_bytes = m > MAX_ACCEPTED_FRAME_BYTES
                                                            ? MAX_ACCEPTED_FRAME_BYTES
                                                            : (uint32_t)m;
        }
        return SBX_OK;
}

/* Connects c->fd (a Unix socket, or a pipe to ssh) and sends Hello; its reply is
 * c->hello_id's, due by c->hello_deadline. On failure the connection is closed and the
 * error set. */
static enum sbx_code hello_send(sbx_client *c) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_HELLO};
        struct call_wait w;
        uint64_t saved_timeout, id;
        enum sbx_code rc;

        disconnect(c);
        rc = open_socket(c);
        if (rc != SBX_OK)
                return rc;
        hello.has_protocol_version = 1;
        hello.protocol_version = SBX_PROTOCOL_VERSION;
        hello.client_name = c->client_name;
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &hello;
        saved_timeout = c->call_timeout_ms;
        if (!saved_timeout)
                c->call_timeout_ms = CONNECT_HELLO_TIMEOUT_MS;
        c->connecting = true;
        rc = send_request(c, &k, true, &w, &id);
        c->connecting = false;
        c->call_timeout_ms = saved_timeout;
        if (rc != SBX_OK) {
                disconnect(c);
                return rc;
        }
        c->hello_id = id;
        c->hello_deadline = w.deadline;
        c->hello_wait_ms = w.ms;
        return SBX_OK;
}

/* Reads the reply to the Hello that hello_send sent. On failure the connection is
 * closed and the error set; a daemon without Hello is still a daemon (c->hello stays
 * NULL, and sbx_hello() says so). */
static enum sbx_code hello_finish(sbx_client *c) {
        struct exchange k = {.want = SBX__V1__RESPONSE__BODY_HELLO};
        struct call_wait w = {c->hello_wait_ms, c->hello_deadline};
        Sbx__V1__Response *resp = NULL;
        uint64_t id = c->hello_id;
        enum sbx_code rc;

        c->hello_id = 0;
        c->connecting = true;
        rc = await_reply(c, &k, id, &w, &resp);
        c->connecting = false;
        if (rc == SBX_UNIMPLEMENTED && c->fd >= 0) {
                sbx_hello_free(c->hello);
                c->hello = NULL;
                clear_error(c);
                return SBX_OK;
        }
        if (rc != SBX_OK) {
                disconnect(c);
                return rc;
        }
        return take_hello(c, resp);
}

/* Connects and says Hello; unless the client pipelines it, waits for the reply. */
static enum sbx_code do_connect(sbx_client *c) {
        enum sbx_code rc = hello_send(c);

        if (rc == SBX_OK && !c->defer_hello)
                rc = hello_finish(c);
        return rc;
}

/* sbx_connect, and with defer_hello the Hello's reply is read only when needed. */
static enum sbx_code connect_new(const char *socket_path, const char *client_name, bool defer_hello,
                                 sbx_client **ret) {
        sbx_client *c;
        char path[SBX_PATH_MAX_BYTES];

        if (!ret)
                return SBX_INVALID_ARGUMENT;
        *ret = NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return SBX_INTERNAL;
        c->fd = -1;
        c->watch_fd = -1;
        c->defer_hello = defer_hello;
        ssh_link_init(&c->ssh);
        frame_reader_init(&c->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        c->max_send_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        if (!socket_path) {
                if (sbx_default_socket_path(path, sizeof(path)) < 0)
                        path[0] = 0;
                socket_path = path;
        }
        c->socket_path = strdup(socket_path);
        c->client_name = strdup(client_name ? client_name : "libsbx");
        if (!c->socket_path || !c->client_name) {
                sbx_close(c);
                return SBX_INTERNAL;
        }
        *ret = c;
        if (strlen(c->client_name) > SBX_CLIENT_NAME_MAX_BYTES)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "client name is longer than %u bytes",
                            SBX_CLIENT_NAME_MAX_BYTES);
        return do_connect(c);
}

enum sbx_code sbx_connect(const char *socket_path, const char *client_name, sbx_client **ret) {
        return connect_new(socket_path, client_name, false, ret);
}

enum sbx_code libsbx_connect_pipelined(const char *socket_path, const char *client_name,
                                       sbx_client **ret) {
        return connect_new(socket_path, client_name, true, ret);
}

void sbx_close(sbx_client *c) {
        if (!c)
                return;
        if (c->fd >= 0)
                close(c->fd);
        ssh_link_close(&c->ssh, SSH_CLOSE_GRACE_MS);
        frame_reader_free(&c->reader);
        sbx_hello_free(c->hello);
        free(c->socket_path);
        free(c->client_name);
        free(c->message);
        free(c);
}

void libsbx_set_watch(sbx_client *c, int fd, libsbx_watch_cb on_ready, void *userdata) {
        c->watch_fd = on_ready ? fd : -1;
        c->on_watch = on_ready;
        c->watch_userdata = userdata;
}

void sbx_set_call_timeout_ms(sbx_client *c, uint64_t ms) {
        if (c)
                c->call_timeout_ms = ms;
}

enum sbx_code sbx_hello(sbx_client *c, struct sbx_hello **ret) {
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        if (!c->hello && c->fd < 0) {
                rc = do_connect(c);
                if (rc != SBX_OK)
                        return rc;
        }
        if (c->hello_id) {
                rc = hello_finish(c);
                if (rc != SBX_OK)
                        return rc;
        }
        clear_error(c);
        if (!c->hello)
                return fail(c, SBX_UNIMPLEMENTED, 0, "sbxd at %s does not answer Hello",
                            c->socket_path);
        *ret = hello_copy(c->hello);
        return *ret ? SBX_OK : fail_oom(c);
}

/* ---- sandboxes ------------------------------------------------------------------------ */

/* Finishes a call whose reply body is a SandboxInfo: converts it into *ret (when ret is
 * not NULL) and frees the reply. */
static enum sbx_code finish_sandbox(sbx_client *c, enum sbx_code rc, Sbx__V1__Response *resp,
                                    struct sbx_sandbox **ret) {
        if (rc != SBX_OK)
                return rc;
        if (ret) {
                if (resp->body_case != SBX__V1__RESPONSE__BODY_SANDBOX || !resp->sandbox) {
                        sbx__v1__response__free_unpacked(resp, NULL);
                        return protocol_fail(c, EPROTO,
                                             "a reply without the sandbox it was asked for");
                }
                *ret = sandbox_from_proto(resp->sandbox);
                if (!*ret)
                        rc = fail_oom(c);
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

/* Checks what the daemon cannot check for us: the id's form, no NULL in a list, the
 * network mode, the form of env entries. */
static enum sbx_code check_create_opts(sbx_client *c, const struct sbx_create_opts *o) {
        const struct sbx_policy *p = &o->policy;

        if (o->id && check_id(c, o->id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!strv_valid(&p->writable_paths) || !strv_valid(&p->denied_read_paths) ||
            !strv_valid(&p->denied_write_paths) || !strv_valid(&p->inherit_environment) ||
            !strv_valid(&p->allowed_hosts) || !strv_valid(&p->allowed_cidrs) ||
            !strs_valid(o->env, o->n_env) || (o->n_labels && !o->labels) ||
            (o->n_share_uids && !o->share_uids) || (o->n_share_gids && !o->share_gids))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "a NULL entry in the sandbox options");
        if (p->network != SBX_NETWORK_NONE && p->network != SBX_NETWORK_FULL &&
            p->network != SBX_NETWORK_ALLOWLIST)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "unknown network mode %d",
                            (int)p->network);
        for (size_t i = 0; i < o->n_env; i++)
                if (!strchr(o->env[i], '='))
                        return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                    "environment entry '%.80s' is not of the form NAME=VALUE",
                                    o->env[i]);
        return SBX_OK;
}

/* The limits of l into lim, or nothing when none is set (pol->limits stays NULL). */
static void limits_to_proto(const struct sbx_limits *l, Sbx__V1__Limits *lim,
                            Sbx__V1__Policy *pol) {
        if (!l->set)
                return;
        lim->has_memory_bytes = !!(l->set & SBX_LIMIT_MEMORY);
        lim->memory_bytes = l->memory_bytes;
        lim->has_cpu_seconds = !!(l->set & SBX_LIMIT_CPU_SECONDS);
        lim->cpu_seconds = l->cpu_seconds;
        lim->has_cpu_percent = !!(l->set & SBX_LIMIT_CPU_PERCENT);
        lim->cpu_percent = l->cpu_percent;
        lim->has_processes = !!(l->set & SBX_LIMIT_PROCESSES);
        lim->processes = l->processes;
        lim->has_file_size_bytes = !!(l->set & SBX_LIMIT_FILE_SIZE);
        lim->file_size_bytes = l->file_size_bytes;
        lim->has_open_files = !!(l->set & SBX_LIMIT_OPEN_FILES);
        lim->open_files = l->open_files;
        lim->has_core_dumps = !!(l->set & SBX_LIMIT_CORE_DUMPS);
        lim->core_dumps = !!l->core_dumps;
        lim->has_tmp_bytes = !!(l->set & SBX_LIMIT_TMP);
        lim->tmp_bytes = l->tmp_bytes;
        lim->has_commands = !!(l->set & SBX_LIMIT_COMMANDS);
        lim->commands = l->commands;
        lim->has_queued_commands = !!(l->set & SBX_LIMIT_QUEUED_COMMANDS);
        lim->queued_commands = l->queued_commands;
        lim->has_disk_bytes = !!(l->set & SBX_LIMIT_DISK);
        lim->disk_bytes = l->disk_bytes;
        lim->has_disk_inodes = !!(l->set & SBX_LIMIT_DISK_INODES);
        lim->disk_inodes = l->disk_inodes;
        pol->limits = lim;
}

/* The policy p into pol and lim (pointing at p's strings). */
static void policy_to_proto(const struct sbx_policy *p, Sbx__V1__Policy *pol,
                            Sbx__V1__Limits *lim) {
        pol->n_writable_paths = p->writable_paths.n;
        pol->writable_paths = p->writable_paths.v;
        pol->n_denied_read_paths = p->denied_read_paths.n;
        pol->denied_read_paths = p->denied_read_paths.v;
        pol->n_denied_write_paths = p->denied_write_paths.n;
        pol->denied_write_paths = p->denied_write_paths.v;
        pol->has_network = 1;
        pol->network = (Sbx__V1__NetworkMode)p->network; /* the same values (SAME_VALUE) */
        pol->n_allowed_hosts = p->allowed_hosts.n;
        pol->allowed_hosts = p->allowed_hosts.v;
        pol->n_allowed_cidrs = p->allowed_cidrs.n;
        pol->allowed_cidrs = p->allowed_cidrs.v;
        pol->has_protect_defaults = 1;
        pol->protect_defaults = !!p->protect_defaults;
        pol->n_inherit_environment = p->inherit_environment.n;
        pol->inherit_environment = p->inherit_environment.v;
        if (p->inherit_environment_set) {
                pol->has_inherit_environment_set = 1;
                pol->inherit_environment_set = 1;
        }
        pol->root_dir = p->root_dir;
        limits_to_proto(&p->limits, lim, pol);
}

/* The n labels of v as wire Labels (pointing at v's strings), allocated from pool;
 * pool->oom when that failed. */
static Sbx__V1__Label **labels_to_wire(struct pool *pool, const struct sbx_label *v, size_t n) {
        Sbx__V1__Label *labels = pool_calloc(pool, n, sizeof(*labels));
        Sbx__V1__Label **ptrs = pool_calloc(pool, n, sizeof(*ptrs));

        for (size_t i = 0; labels && ptrs && i < n; i++) {
                sbx__v1__label__init(&labels[i]);
                labels[i].key = v[i].key;
                labels[i].value = v[i].value;
                ptrs[i] = &labels[i];
        }
        return ptrs;
}

/* The labels of o into cs, allocated from pool (pool->oom on failure, reported by the
 * caller); each must have a key and a value. */
static enum sbx_code labels_to_proto(sbx_client *c, const struct sbx_create_opts *o,
                                     Sbx__V1__CreateSandbox *cs, struct pool *pool) {
        if (!o->n_labels)
                return SBX_OK;
        cs->labels = labels_to_wire(pool, o->labels, o->n_labels);
        if (pool->oom)
                return SBX_OK;
        for (size_t i = 0; i < o->n_labels; i++)
                if (!o->labels[i].key || !o->labels[i].value)
                        return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                    "label %zu has no key or no value", i);
        cs->n_labels = o->n_labels;
        return SBX_OK;
}

/* The rest of o into cs: id, lifetime, idle timeout, env, sharing, keep_workspace. */
static void create_to_proto(const struct sbx_create_opts *o, Sbx__V1__CreateSandbox *cs) {
        cs->id = unconst(o->id);
        if (o->timeout_ms) {
                cs->has_timeout_ms = 1;
                cs->timeout_ms = o->timeout_ms;
        }
        if (o->idle_timeout_ms) {
                /* Absent on the wire: the daemon's default; 0: none. */
                cs->has_idle_timeout_ms = 1;
                cs->idle_timeout_ms =
                        o->idle_timeout_ms == SBX_IDLE_TIMEOUT_NONE ? 0 : o->idle_timeout_ms;
        }
        cs->n_env = o->n_env;
        cs->env = unconst_v(o->env);
        cs->n_share_uids = o->n_share_uids;
        cs->share_uids = (uint32_t *)(uintptr_t)o->share_uids;
        cs->n_share_gids = o->n_share_gids;
        cs->share_gids = (uint32_t *)(uintptr_t)o->share_gids;
        if (o->keep_workspace) {
                cs->has_keep_workspace = 1;
                cs->keep_workspace = 1;
        }
}

enum sbx_code sbx_create(sbx_client *c, const struct sbx_create_opts *o, struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Policy pol = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits lim = SBX__V1__LIMITS__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_SANDBOX};
        struct sbx_create_opts defaults;
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (!o) {
                sbx_create_opts_init(&defaults);
                o = &defaults;
        }
        rc = check_create_opts(c, o);
        if (rc != SBX_OK)
                return rc;
        policy_to_proto(&o->policy, &pol, &lim);
        cs.policy = &pol;
        rc = labels_to_proto(c, o, &cs, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = fail_oom(c);
        if (rc != SBX_OK) {
                pool_free(&pool);
                return rc;
        }
        create_to_proto(o, &cs);
        req.body_case = SBX__V1__REQUEST__BODY_CREATE_SANDBOX;
        req.create_sandbox = &cs;
        rc = call(c, &k, &resp);
        pool_free(&pool);
        return finish_sandbox(c, rc, resp, ret);
}

/* GetSandbox and Terminate: a request with only a sandbox ID, answered with SandboxInfo. */
static enum sbx_code id_call(sbx_client *c, const char *id, bool terminate,
                             struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__GetSandbox get = SBX__V1__GET_SANDBOX__INIT;
        Sbx__V1__Terminate term = SBX__V1__TERMINATE__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_SANDBOX};
        Sbx__V1__Response *resp;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        if (ret)
                *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (terminate) {
                term.sandbox_id = unconst(id);
                req.body_case = SBX__V1__REQUEST__BODY_TERMINATE;
                req.terminate = &term;
                k.body_optional = ret == NULL;
        } else {
                get.sandbox_id = unconst(id);
                req.body_case = SBX__V1__REQUEST__BODY_GET_SANDBOX;
                req.get_sandbox = &get;
        }
        rc = call(c, &k, &resp);
        return finish_sandbox(c, rc, resp, ret);
}

enum sbx_code sbx_get(sbx_client *c, const char *id, struct sbx_sandbox **ret) {
        if (!ret)
                return null_arg(c, __func__, "ret");
        return id_call(c, id, false, ret);
}

enum sbx_code sbx_terminate(sbx_client *c, const char *id, struct sbx_sandbox **ret) {
        return id_call(c, id, true, ret);
}

enum sbx_code sbx_set_timeout(sbx_client *c, const char *id, uint64_t timeout_ms,
                              struct sbx_sandbox **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__SetTimeout st = SBX__V1__SET_TIMEOUT__INIT;
        struct exchange k = {
                .req = &req, .want = SBX__V1__RESPONSE__BODY_SANDBOX, .body_optional = !ret};
        Sbx__V1__Response *resp;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        if (ret)
                *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        st.sandbox_id = unconst(id);
        st.has_timeout_ms = 1;
        st.timeout_ms = timeout_ms;
        req.body_case = SBX__V1__REQUEST__BODY_SET_TIMEOUT;
        req.set_timeout = &st;
        rc = call(c, &k, &resp);
        return finish_sandbox(c, rc, resp, ret);
}

/* The filters of opts into ls, allocated from pool (pool->oom on failure). */
static void list_opts_to_proto(const struct sbx_list_opts *opts, Sbx__V1__ListSandboxes *ls,
                               struct pool *pool) {
        if (opts->n_labels) {
                ls->labels = labels_to_wire(pool, opts->labels, opts->n_labels);
                ls->n_labels = opts->n_labels;
        }
        if (opts->n_states) {
                ls->states = pool_calloc(pool, opts->n_states, sizeof(*ls->states));
                for (size_t i = 0; ls->states && i < opts->n_states; i++)
                        ls->states[i] = (Sbx__V1__SandboxState)opts->states[i];
                ls->n_states = opts->n_states;
        }
        ls->has_owner_uid = !!opts->has_owner_uid;
        ls->owner_uid = opts->owner_uid;
        ls->has_include_ended = !!opts->include_ended;
        ls->include_ended = !!opts->include_ended;
        ls->has_limit = opts->limit > 0;
        ls->limit = opts->limit;
}

/* The list of a ListSandboxes reply (lr may be NULL: empty), or NULL when out of
 * memory. */
static struct sbx_sandbox_list *list_from_proto(const Sbx__V1__ListSandboxesReply *lr) {
        struct sbx_sandbox_list *out = calloc(1, sizeof(*out));

        if (!out)
                return NULL;
        if (lr && lr->n_sandboxes) {
                out->v = calloc(lr->n_sandboxes, sizeof(*out->v));
                if (!out->v) {
                        free(out);
                        return NULL;
                }
                out->n = lr->n_sandboxes;
                for (size_t i = 0; i < out->n; i++) {
                        out->v[i] = sandbox_from_proto(lr->sandboxes[i]);
                        if (!out->v[i]) {
                                sbx_sandbox_list_free(out);
                                return NULL;
                        }
                }
        }
        out->truncated = lr && lr->truncated;
        return out;
}

enum sbx_code sbx_list(sbx_client *c, const struct sbx_list_opts *opts,
                       struct sbx_sandbox_list **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListSandboxes ls = SBX__V1__LIST_SANDBOXES__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_LIST_SANDBOXES};
        Sbx__V1__Response *resp;
        struct sbx_sandbox_list *out;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (opts && ((opts->n_labels && !opts->labels) || (opts->n_states && !opts->states)))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "a NULL array in the list options");
        if (opts)
                list_opts_to_proto(opts, &ls, &pool);
        if (pool.oom) {
                pool_free(&pool);
                return fail_oom(c);
        }
        req.body_case = SBX__V1__REQUEST__BODY_LIST_SANDBOXES;
        req.list_sandboxes = &ls;
        rc = call(c, &k, &resp);
        pool_free(&pool);
        if (rc != SBX_OK)
                return rc;
        out = list_from_proto(resp->list_sandboxes);
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return fail_oom(c);
        *ret = out;
        return SBX_OK;
}

/* ---- commands ------------------------------------------------------------------------- */

/* Output collected by the library when it comes in chunks but the caller gave no
 * on_output callback (streamed for stdin_stream or on_started, or a result too large
 * for one frame): the tail of each stream, at most limit bytes, in a ring of that size
 * (allocated at the first chunk), so that keeping the tail of a long stream costs each
 * byte one copy. */
struct collected {
        uint8_t *b[3];
        size_t len[3], limit[3];
        size_t head[3]; /* where the next byte goes; once len == limit, the oldest byte */
        bool truncated[3];
        bool oom;
};

static void collect_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                           size_t len) {
        struct collected *k = ud;
        int i = stream == SBX_STDERR ? 2 : 1;
        const uint8_t *p = data;
        size_t keep = k->limit[i];

        if (len == 0 || keep == 0 || k->oom)
                return;
        if (!k->b[i]) {
                k->b[i] = malloc(keep + 1);
                if (!k->b[i]) {
                        k->oom = true;
                        return;
                }
        }
        if (len >= keep) {
                /* The chunk alone fills the ring: its end is the tail. */
                k->truncated[i] = k->truncated[i] || len > keep || k->len[i] > 0;
                memcpy(k->b[i], p + len - keep, keep);
                k->len[i] = keep;
                k->head[i] = 0;
                return;
        }
        if (k->len[i] + len > keep)
                k->truncated[i] = true;
        while (len > 0) {
                size_t room = keep - k->head[i], n = len < room ? len : room;
                memcpy(k->b[i] + k->head[i], p, n);
                k->head[i] = (k->head[i] + n) % keep;
                k->len[i] = k->len[i] + n > keep ? keep : k->len[i] + n;
                p += n;
                len -= n;
        }
}

/* Moves collected stream i into the result's buffer (its bytes in order, NUL-terminated).
 * 0, or -ENOMEM (the result keeps what it had). */
static int take_collected(struct collected *k, int i, uint8_t **data, size_t *len, int *truncated) {
        uint8_t *b = k->b[i];
        size_t n = k->len[i], h = k->head[i];

        if (!b)
                return 0;
        if (n == k->limit[i] && h > 0) {
                /* Wrapped: the oldest byte is at head. */
                uint8_t *lin = malloc(n + 1);
                if (!lin)
                        return -ENOMEM;
                memcpy(lin, b + h, n - h);
                memcpy(lin + n - h, b, h);
                free(b);
                b = lin;
        }
        b[n] = '\0';
        free(*data);
        *data = b;
        *len = n;
        *truncated = k->truncated[i];
        k->b[i] = NULL;
        return 0;
}

static void collected_free(struct collected *k) {
        free(k->b[1]);
        free(k->b[2]);
        k->b[1] = k->b[2] = NULL;
}

/* Checks the command options: the sandbox id, exactly one of argv and shell, no NULL
 * in a list, a descriptor for streamed stdin. */
static enum sbx_code check_exec_opts(sbx_client *c, const char *id, const struct sbx_exec_opts *o) {
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!o)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command options given");
        if ((o->argc > 0) == (o->shell != NULL))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                            o->shell ? "give either argv or a shell command, not both"
                                     : "no command given (argv is empty and no shell command)");
        if (!strs_valid(o->argv, o->argc) || !strs_valid(o->env, o->n_env) ||
            (o->stdin_len && !o->stdin_data))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "a NULL entry in the command options");
        if (o->stdin_stream && o->stdin_fd < 0)
                return fail(c, SBX_INVALID_ARGUMENT, EBADF,
                            "stdin_stream is set but stdin_fd is %d, not a descriptor",
                            o->stdin_fd);
        return SBX_OK;
}

/* The "NAME=VALUE" entries of o->env as EnvVars of run, from pool (pool->oom on
 * failure). */
static enum sbx_code env_to_proto(sbx_client *c, const struct sbx_exec_opts *o,
                                  Sbx__V1__RunCommand *run, struct pool *pool) {
        Sbx__V1__EnvVar *vars;

        if (!o->n_env)
                return SBX_OK;
        vars = pool_calloc(pool, o->n_env, sizeof(*vars));
        run->env = pool_calloc(pool, o->n_env, sizeof(*run->env));
        for (size_t i = 0; vars && run->env && i < o->n_env; i++) {
                const char *eq = strchr(o->env[i], '=');
                if (!eq || eq == o->env[i])
                        return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                    "environment entry '%.80s' is not of the form NAME=VALUE",
                                    o->env[i]);
                sbx__v1__env_var__init(&vars[i]);
                vars[i].name = pool_take(pool, strndup(o->env[i], (size_t)(eq - o->env[i])));
                vars[i].value = unconst(eq + 1);
                run->env[i] = &vars[i];
        }
        run->n_env = o->n_env;
        return SBX_OK;
}

/* The rest of o into run: the command, stdin, the timeout (the default when none), the
 * wait for a slot (absent when not given) and the output caps. Streaming is asked for
 * with on_output, and for streamed stdin, on_started and on_queued, which need the
 * command's id before the result. */
static void run_to_proto(const char *id, const struct sbx_exec_opts *o, Sbx__V1__RunCommand *run) {
        run->sandbox_id = unconst(id);
        run->n_argv = o->argc;
        run->argv = unconst_v(o->argv);
        run->shell = unconst(o->shell);
        run->cwd = unconst(o->cwd);
        if (o->stdin_data) {
                run->has_stdin = 1;
                run->stdin.data = (uint8_t *)(uintptr_t)o->stdin_data;
                run->stdin.len = o->stdin_len;
        }
        run->has_timeout_ms = 1;
        run->timeout_ms = o->timeout_ms ? o->timeout_ms : SBX_DEFAULT_COMMAND_TIMEOUT_MS;
        if (o->max_stdout_bytes) {
                run->has_max_stdout_bytes = 1;
                run->max_stdout_bytes = o->max_stdout_bytes;
        }
        if (o->max_stderr_bytes) {
                run->has_max_stderr_bytes = 1;
                run->max_stderr_bytes = o->max_stderr_bytes;
        }
        if (o->has_queue_timeout) {
                run->has_queue_timeout_ms = 1;
                run->queue_timeout_ms = o->queue_timeout_ms;
        }
        if (o->stdin_stream) {
                run->has_stdin_stream = 1;
                run->stdin_stream = 1;
        }
        /* rows/cols go as given, with tty or not: the daemon judges them. */
        if (o->tty)
                run->has_tty = run->tty = 1;
        run->has_rows = o->rows != 0;
        run->rows = o->rows;
        run->has_cols = o->cols != 0;
        run->cols = o->cols;
        if (o->on_output || o->stdin_stream || o->on_started || o->on_queued) {
                run->has_stream = 1;
                run->stream = 1;
        }
}

/* How call() runs it: the wait (the command's timeout and the wait for a slot on top of
 * the call timeout), streamed stdin, the callbacks. Without on_output the library collects the
 * output into col: streamed for stdin or on_started, or in chunks when it does not fit one frame
 * with the result (output_in_chunks). */
static void exec_exchange(const char *id, const struct sbx_exec_opts *o,
                          const Sbx__V1__RunCommand *run, struct exchange *k,
                          struct collected *col) {
        uint64_t queue_ms;

        memset(col, 0, sizeof(*col));
        col->limit[1] = o->max_stdout_bytes ? o->max_stdout_bytes : SBX_DEFAULT_MAX_OUTPUT_BYTES;
        col->limit[2] = o->max_stderr_bytes ? o->max_stderr_bytes : SBX_DEFAULT_MAX_OUTPUT_BYTES;
        if (o->stdin_stream) {
                k->feeding = true;
                k->stdin_fd = o->stdin_fd;
                k->sandbox_id = id;
        }
        queue_ms = run->has_queue_timeout_ms ? run->queue_timeout_ms : EXEC_DEFAULT_QUEUE_WAIT_MS;
        if (queue_ms > UINT64_MAX / 4)
                queue_ms = UINT64_MAX / 4; /* the sum below must not wrap */
        k->extra_ms = run->timeout_ms + EXEC_GRACE_MS + queue_ms;
        k->on_output = o->on_output;
        k->output_userdata = o->userdata;
        k->on_started = o->on_started;
        k->on_queued = o->on_queued;
        k->userdata = o->userdata;
        if (!o->on_output) {
                k->on_output = collect_output;
                k->output_userdata = col;
        }
}

/* The result of a RunCommand reply resp (freed here) into *ret, with the output col
 * collected. rc is SBX_OK, or the status of a command that never started whose result
 * came along; either way the result is the caller's. */
static enum sbx_code exec_result(sbx_client *c, enum sbx_code rc, Sbx__V1__Response *resp,
                                 struct collected *col, struct sbx_result **ret) {
        Sbx__V1__CommandResult *cr = resp->command_result;
        int t_out, t_err;

        if (!cr) {
                collected_free(col);
                sbx__v1__response__free_unpacked(resp, NULL);
                return protocol_fail(c, EPROTO, "a RunCommand reply without its result");
        }
        *ret = result_from_proto(cr);
        /* With output_in_chunks, the daemon's kept tails: its counts and truncation flags
         * stand. */
        if (*ret) {
                t_out = (*ret)->stdout_truncated;
                t_err = (*ret)->stderr_truncated;
        }
        if (!*ret || col->oom ||
            take_collected(col, 1, &(*ret)->stdout_data, &(*ret)->stdout_len,
                           cr->output_in_chunks ? &t_out : &(*ret)->stdout_truncated) < 0 ||
            take_collected(col, 2, &(*ret)->stderr_data, &(*ret)->stderr_len,
                           cr->output_in_chunks ? &t_err : &(*ret)->stderr_truncated) < 0) {
                sbx_result_free(*ret);
                *ret = NULL;
                rc = fail_oom(c);
        }
        collected_free(col);
        sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

enum sbx_code sbx_exec(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                       struct sbx_result **ret) {
        struct collected col;
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
        struct exchange k = {.req = &req,
                             .want = SBX__V1__RESPONSE__BODY_COMMAND_RESULT,
                             .keep_error_body = true};
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        rc = check_exec_opts(c, id, o);
        if (rc == SBX_OK)
                rc = env_to_proto(c, o, &run, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = fail_oom(c);
        if (rc != SBX_OK) {
                pool_free(&pool);
                return rc;
        }
        run_to_proto(id, o, &run);
        exec_exchange(id, o, &run, &k, &col);
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &run;
        rc = call(c, &k, &resp);
        pool_free(&pool);
        free(k.command_id);
        if (!resp) {
                collected_free(&col);
                return rc;
        }
        return exec_result(c, rc, resp, &col, ret);
}

/* Sends a request whose answer has no body of interest (Empty). */
static enum sbx_code empty_call(sbx_client *c, Sbx__V1__Request *req) {
        struct exchange k = {
                .req = req, .want = SBX__V1__RESPONSE__BODY_EMPTY, .body_optional = true};
        Sbx__V1__Response *resp;
        enum sbx_code rc = call(c, &k, &resp);
        if (rc == SBX_OK)
                sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

/* CancelCommand: without a signal the kill, else that signal (the daemon judges which
 * signals it forwards). */
static enum sbx_code cancel_command(sbx_client *c, const char *id, const char *command_id,
                                    bool with_signal, int signo) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        cc.sandbox_id = unconst(id);
        cc.command_id = unconst(command_id);
        cc.has_signal = with_signal;
        cc.signal = signo;
        req.body_case = SBX__V1__REQUEST__BODY_CANCEL_COMMAND;
        req.cancel_command = &cc;
        return empty_call(c, &req);
}

enum sbx_code sbx_cancel(sbx_client *c, const char *id, const char *command_id) {
        return cancel_command(c, id, command_id, false, 0);
}

enum sbx_code sbx_signal(sbx_client *c, const char *id, const char *command_id, int signo) {
        return cancel_command(c, id, command_id, true, signo);
}

enum sbx_code sbx_resize(sbx_client *c, const char *id, const char *command_id, uint32_t rows,
                         uint32_t cols) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        in.sandbox_id = unconst(id);
        in.command_id = unconst(command_id);
        in.has_rows = in.has_cols = 1;
        in.rows = rows;
        in.cols = cols;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        return empty_call(c, &req);
}

/* ---- files ---------------------------------------------------------------------------- */

enum sbx_code sbx_read(sbx_client *c, const char *id, const char *path, uint64_t offset,
                       uint64_t limit, struct sbx_read_result **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_READ_FILE};
        Sbx__V1__Response *resp;
        struct sbx_read_result *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        rf.sandbox_id = unconst(id);
        rf.path = unconst(path);
        rf.has_offset = offset > 0;
        rf.offset = offset;
        rf.has_limit = limit > 0;
        rf.limit = limit;
        req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
        req.read_file = &rf;
        rc = call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        out = calloc(1, sizeof(*out));
        if (out) {
                Sbx__V1__ReadFileReply *r = resp->read_file;
                out->size = r->size;
                out->next_offset = r->has_next_offset ? r->next_offset : offset + r->data.len;
                out->eof = r->eof;
                /* The data is taken, not copied: a read of 16 MiB is one copy less. */
                if (!take_bytes(&out->data, &out->len, &r->data)) {
                        free(out);
                        out = NULL;
                }
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return fail_oom(c);
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_write(sbx_client *c, const char *id, const char *path, const void *data,
                        size_t len, uint32_t mode, unsigned flags) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        struct exchange k = {
                .req = &req, .want = SBX__V1__RESPONSE__BODY_WRITE_FILE, .body_optional = true};
        Sbx__V1__Response *resp;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (len && !data)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no data given for %zu bytes", len);
        if (flags & ~(unsigned)(SBX_WRITE_CREATE_PARENTS | SBX_WRITE_APPEND))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "unknown write flags 0x%x", flags);
        if (mode > 07777)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "file mode %o has bits beyond 07777",
                            mode);
        wf.sandbox_id = unconst(id);
        wf.path = unconst(path);
        wf.has_data = 1;
        wf.data.data = (uint8_t *)(uintptr_t)data;
        wf.data.len = len;
        wf.has_mode = 1;
        wf.mode = mode ? mode : 0644;
        wf.has_create_parents = !!(flags & SBX_WRITE_CREATE_PARENTS);
        wf.create_parents = !!(flags & SBX_WRITE_CREATE_PARENTS);
        wf.has_append = !!(flags & SBX_WRITE_APPEND);
        wf.append = !!(flags & SBX_WRITE_APPEND);
        req.body_case = SBX__V1__REQUEST__BODY_WRITE_FILE;
        req.write_file = &wf;
        k.ext = wf.data.data; /* sent from the caller's buffer, not copied */
        k.ext_len = len;
        rc = call(c, &k, &resp);
        if (rc == SBX_OK)
                sbx__v1__response__free_unpacked(resp, NULL);
        return rc;
}

enum sbx_code sbx_list_dir(sbx_client *c, const char *id, const char *path, uint32_t limit,
                           struct sbx_dir_list **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListDirectory ld = SBX__V1__LIST_DIRECTORY__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_LIST_DIRECTORY};
        Sbx__V1__Response *resp;
        const Sbx__V1__ListDirectoryReply *lr;
        struct sbx_dir_list *out;
        bool ok;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        ld.sandbox_id = unconst(id);
        ld.path = unconst(path);
        ld.has_limit = limit > 0;
        ld.limit = limit;
        req.body_case = SBX__V1__REQUEST__BODY_LIST_DIRECTORY;
        req.list_directory = &ld;
        rc = call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        lr = resp->list_directory;
        out = calloc(1, sizeof(*out));
        ok = out != NULL;
        if (ok && lr->n_entries) {
                out->v = calloc(lr->n_entries, sizeof(*out->v));
                ok = out->v != NULL;
                for (size_t i = 0; ok && i < lr->n_entries; i++) {
                        out->n = i + 1;
                        ok = file_info_from_proto(&out->v[i], lr->entries[i]);
                }
        }
        if (ok)
                out->truncated = lr->truncated;
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_dir_list_free(out);
                return fail_oom(c);
        }
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_stat(sbx_client *c, const char *id, const char *path,
                       struct sbx_file_info **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Stat st = SBX__V1__STAT__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_STAT};
        Sbx__V1__Response *resp;
        struct sbx_file_info *out;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        st.sandbox_id = unconst(id);
        st.path = unconst(path);
        req.body_case = SBX__V1__REQUEST__BODY_STAT;
        req.stat = &st;
        rc = call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        out = calloc(1, sizeof(*out));
        if (out && !file_info_from_proto(out, resp->stat)) {
                sbx_file_info_free(out);
                out = NULL;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!out)
                return fail_oom(c);
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_mkdir(sbx_client *c, const char *id, const char *path, uint32_t mode,
                        int parents) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__MakeDirectory md = SBX__V1__MAKE_DIRECTORY__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (mode > 07777)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                            "directory mode %o has bits beyond 07777", mode);
        md.sandbox_id = unconst(id);
        md.path = unconst(path);
        md.has_mode = 1;
        md.mode = mode ? mode : 0755;
        md.has_parents = !!parents;
        md.parents = !!parents;
        req.body_case = SBX__V1__REQUEST__BODY_MAKE_DIRECTORY;
        req.make_directory = &md;
        return empty_call(c, &req);
}

enum sbx_code sbx_remove(sbx_client *c, const char *id, const char *path, int recursive) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Remove rm = SBX__V1__REMOVE__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK || check_path(c, path) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        rm.sandbox_id = unconst(id);
        rm.path = unconst(path);
        rm.has_recursive = !!recursive;
        rm.recursive = !!recursive;
        req.body_case = SBX__V1__REQUEST__BODY_REMOVE;
        req.remove = &rm;
        return empty_call(c, &req);
}

/* ---- history -------------------------------------------------------------------------- */

static bool connection_from_proto(struct sbx_connection_record *o,
                                  const Sbx__V1__ConnectionRecord *r) {
        o->seq = r->seq;
        o->started_unix_ms = r->started_unix_ms;
        o->ended_unix_ms = r->has_ended_unix_ms ? r->ended_unix_ms : 0;
        o->port = r->port;
        o->allowed = r->allowed;
        o->bytes_sent = r->bytes_sent;
        o->bytes_received = r->bytes_received;
        return dup_str(&o->host, r->host) && dup_str(&o->address, r->address) &&
               dup_str(&o->reason, r->reason) && dup_str(&o->method, r->method);
}

void sbx_connections_free(struct sbx_connections *h) {
        if (!h)
                return;
        for (size_t i = 0; i < h->n; i++) {
                free(h->v[i].host);
                free(h->v[i].address);
                free(h->v[i].reason);
                free(h->v[i].method);
        }
        free(h->v);
        free(h);
}

/* Asks for a page of sandbox id's records of this kind: *resp has the history body. */
static enum sbx_code history_page(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                                  Sbx__V1__HistoryKind kind, Sbx__V1__Response **resp) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__GetHistory gh = SBX__V1__GET_HISTORY__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_HISTORY};

        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        gh.sandbox_id = unconst(id);
        gh.has_after_seq = after_seq > 0;
        gh.after_seq = after_seq;
        gh.has_limit = limit > 0;
        gh.limit = limit;
        gh.has_kind = kind != SBX__V1__HISTORY_KIND__HISTORY_COMMANDS;
        gh.kind = kind;
        req.body_case = SBX__V1__REQUEST__BODY_GET_HISTORY;
        req.get_history = &gh;
        return call(c, &k, resp);
}

/* A history page's n records (in: its messages) converted by conv into a new array of
 * elem-byte entries (*ret_v); *ret_n counts the entries begun, so that the page's free
 * undoes a failure half way. false when out of memory. */
static bool page_from_proto(void **ret_v, size_t *ret_n, size_t elem, void *const *in, size_t n,
                            bool (*conv)(void *out, const void *in)) {
        uint8_t *v;

        if (n == 0)
                return true;
        v = calloc(n, elem);
        if (!v)
                return false;
        *ret_v = v;
        for (size_t i = 0; i < n; i++) {
                *ret_n = i + 1;
                if (!conv(v + i * elem, in[i]))
                        return false;
        }
        return true;
}

static bool record_conv(void *out, const void *in) {
        return record_from_proto(out, in);
}

static bool connection_conv(void *out, const void *in) {
        return connection_from_proto(out, in);
}

enum sbx_code sbx_connections(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                              struct sbx_connections **ret) {
        Sbx__V1__Response *resp;
        const Sbx__V1__GetHistoryReply *hr;
        struct sbx_connections *out;
        bool ok;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        rc = history_page(c, id, after_seq, limit, SBX__V1__HISTORY_KIND__HISTORY_CONNECTIONS,
                          &resp);
        if (rc != SBX_OK)
                return rc;
        hr = resp->history;
        out = calloc(1, sizeof(*out));
        ok = out &&
             page_from_proto((void **)&out->v, &out->n, sizeof(*out->v),
                             (void *const *)hr->connections, hr->n_connections, connection_conv);
        if (ok) {
                out->next_after_seq = hr->next_after_seq;
                out->truncated = hr->truncated;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_connections_free(out);
                return fail_oom(c);
        }
        *ret = out;
        return SBX_OK;
}

enum sbx_code sbx_history(sbx_client *c, const char *id, uint64_t after_seq, uint32_t limit,
                          struct sbx_history **ret) {
        Sbx__V1__Response *resp;
        const Sbx__V1__GetHistoryReply *hr;
        struct sbx_history *out;
        bool ok;
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        rc = history_page(c, id, after_seq, limit, SBX__V1__HISTORY_KIND__HISTORY_COMMANDS, &resp);
        if (rc != SBX_OK)
                return rc;
        hr = resp->history;
        out = calloc(1, sizeof(*out));
        ok = out && page_from_proto((void **)&out->v, &out->n, sizeof(*out->v),
                                    (void *const *)hr->commands, hr->n_commands, record_conv);
        if (ok) {
                out->next_after_seq = hr->next_after_seq;
                out->truncated = hr->truncated;
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_history_free(out);
                return fail_oom(c);
        }
        *ret = out;
        return SBX_OK;
}

/* ---- background commands (RunCommand.background, AttachCommand) ---------------------- */

/* The one answer to a background RunCommand into *ret. */
static enum sbx_code background_answer(sbx_client *c, Sbx__V1__Response *resp,
                                       struct sbx_background **ret) {
        struct sbx_background *b = calloc(1, sizeof(*b));
        const char *cid = NULL;

        if (!b) {
                sbx__v1__response__free_unpacked(resp, NULL);
                return fail_oom(c);
        }
        if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_STARTED && resp->command_started) {
                cid = resp->command_started->command_id;
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_QUEUED &&
                   resp->command_queued) {
                cid = resp->command_queued->command_id;
                b->queued = 1;
                b->ahead = resp->command_queued->ahead;
        } else if (resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_RESULT &&
                   resp->command_result) {
                cid = resp->command_result->command_id;
                b->result = result_from_proto(resp->command_result);
                if (!b->result) {
                        free(b);
                        sbx__v1__response__free_unpacked(resp, NULL);
                        return fail_oom(c);
                }
        }
        if (!cid || !dup_str_nn(&b->command_id, cid)) {
                sbx_background_free(b);
                sbx__v1__response__free_unpacked(resp, NULL);
                return cid ? fail_oom(c)
                           : protocol_fail(c, EPROTO,
                                           "a background RunCommand reply without "
                                           "its command ID");
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        *ret = b;
        return SBX_OK;
}

enum sbx_code sbx_exec_background(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                                  struct sbx_background **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
        struct exchange k = {.req = &req,
                             .want = SBX__V1__RESPONSE__BODY_COMMAND_STARTED,
                             .background_answer = true};
        struct sbx_exec_opts bo;
        Sbx__V1__Response *resp;
        struct pool pool = {0};
        enum sbx_code rc;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (o) {
                /* Nothing of this call reads stdin or streams: the command outlives it. */
                bo = *o;
                bo.stdin_fd = 0;
                bo.on_output = NULL;
                bo.on_started = NULL;
                bo.on_queued = NULL;
        }
        rc = check_exec_opts(c, id, o ? &bo : NULL);
        if (rc == SBX_OK)
                rc = env_to_proto(c, &bo, &run, &pool);
        if (rc == SBX_OK && pool.oom)
                rc = fail_oom(c);
        if (rc != SBX_OK) {
                pool_free(&pool);
                return rc;
        }
        run_to_proto(id, &bo, &run);
        run.has_background = run.background = 1;
        run.has_stream = run.stream = 0;
        if (bo.no_timeout && bo.timeout_ms == 0)
                run.timeout_ms = 0;
        /* It answers once started, or at once when it waits: the wait for a slot is not
         * part of this call. */
        k.extra_ms = EXEC_GRACE_MS;
        req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
        req.run_command = &run;
        rc = call(c, &k, &resp);
        pool_free(&pool);
        if (rc != SBX_OK) {
                if (resp)
                        sbx__v1__response__free_unpacked(resp, NULL);
                return rc;
        }
        return background_answer(c, resp, ret);
}

/* How sbx_attach waits: forever, or o->wait_ms with follow, or the call timeout. */
static void attach_exchange(const struct sbx_attach_opts *o, struct exchange *k,
                            struct collected *col) {
        memset(col, 0, sizeof(*col));
        col->limit[1] = col->limit[2] =
                o->max_output_bytes ? o->max_output_bytes : SBX_MAX_OUTPUT_BYTES;
        k->on_output = o->on_output;
        k->output_userdata = o->userdata;
        if (!o->on_output) {
                k->on_output = collect_output;
                k->output_userdata = col;
        }
}

enum sbx_code sbx_attach(sbx_client *c, const char *id, const struct sbx_attach_opts *o,
                         struct sbx_result **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__AttachCommand ac = SBX__V1__ATTACH_COMMAND__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_COMMAND_RESULT};
        struct collected col;
        Sbx__V1__Response *resp;
        uint64_t saved;
        enum sbx_code rc;
        bool running;

        if (!c || !ret)
                return null_arg(c, __func__, "ret");
        *ret = NULL;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!o || !o->command_id || !*o->command_id)
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID given");
        ac.sandbox_id = unconst(id);
        ac.command_id = unconst(o->command_id);
        ac.has_follow = ac.follow = o->follow != 0;
        ac.has_stdout_offset = o->stdout_offset != 0;
        ac.stdout_offset = o->stdout_offset;
        ac.has_stderr_offset = o->stderr_offset != 0;
        ac.stderr_offset = o->stderr_offset;
        req.body_case = SBX__V1__REQUEST__BODY_ATTACH_COMMAND;
        req.attach_command = &ac;
        attach_exchange(o, &k, &col);
        /* Following waits for the command's end: as long as asked. */
        saved = c->call_timeout_ms;
        if (o->follow)
                c->call_timeout_ms = o->wait_ms;
        rc = call(c, &k, &resp);
        c->call_timeout_ms = saved;
        if (!resp) {
                collected_free(&col);
                /* The wait ran out (the connection is closed; the command goes on): what
                 * it has kept, and RUNNING, when the output is collected. */
                if (o->follow && o->wait_ms && !o->on_output && rc == SBX_UNAVAILABLE &&
                    sbx_errno(c) == ETIMEDOUT) {
                        struct sbx_attach_opts now = *o;
                        now.follow = 0;
                        return sbx_attach(c, id, &now, ret);
                }
                return rc;
        }
        /* The one result that may say RUNNING: an attach without follow. */
        running =
                resp->command_result && resp->command_result->outcome == SBX__V1__OUTCOME__RUNNING;
        rc = exec_result(c, rc, resp, &col, ret);
        if (*ret && running)
                (*ret)->outcome = SBX_OUTCOME_RUNNING;
        return rc;
}

enum sbx_code sbx_send_input(sbx_client *c, const char *id, const char *command_id,
                             const void *data, size_t len, int eof) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CommandInput in = SBX__V1__COMMAND_INPUT__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        clear_error(c);
        if (check_id(c, id) != SBX_OK)
                return SBX_INVALID_ARGUMENT;
        if (!command_id || !*command_id || (len && !data))
                return fail(c, SBX_INVALID_ARGUMENT, EINVAL, "no command ID or no data given");
        in.sandbox_id = unconst(id);
        in.command_id = unconst(command_id);
        in.has_data = len > 0;
        in.data.data = (uint8_t *)(uintptr_t)data;
        in.data.len = len;
        in.has_eof = in.eof = eof != 0;
        req.body_case = SBX__V1__REQUEST__BODY_COMMAND_INPUT;
        req.command_input = &in;
        return empty_call(c, &req);
}
