/* libsbx_int.h: what the files of libsbx share, internal to the library (nothing here is
 * exported from libsbx.so: libsbx.map exports only sbx_ names).
 *
 * libsbx is three files along its seams, each calling only the ones below it:
 *   libsbx.c            the API of sbx.h: checks the arguments of a call, builds its
 *                       request, and turns the reply into the result structs;
 *   libsbx_transport.c  one sbx_client's connection: connecting (a Unix socket, or an
 *                       ssh:// link through libsbx_ssh.c), Hello, framing, sending a
 *                       request and matching the replies to it, the last failure's
 *                       message (transport_*);
 *   libsbx_wire.c       the conversion between the sbx.v1 messages and the plain structs
 *                       of sbx.h, with no connection and no error state (wire_*).
 * libsbx_images.c is the API's part for images (pull, list, inspect, remove, prune);
 * libsbx_port.c its part for port forwarding (sbx_open_port, on a connection of its own).
 * Beside them, libsbx_types.c (names, initialisers, free functions), libsbx_limit_table.c
 * (the table of limits) and libsbx_ssh.c (the ssh child) call none of the three.
 * Everything runs on the calling thread; an sbx_client is used by one thread at a time
 * (sbx.h). The sbx_client and what it holds are owned by libsbx_transport.c; the API file
 * reads its fields, and changes them only through transport_* functions (but for
 * sbx_attach, which sets call_timeout_ms for the length of its call). */
#ifndef SBX_LIBSBX_INT_H
#define SBX_LIBSBX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "libsbx_cli.h"
#include "libsbx_ssh.h"
#include "sbx.h"
#include "sbx.pb-c.h"

/* One client (the opaque sbx_client of sbx.h): its connection, the daemon's Hello, the
 * last failure. Made and freed by libsbx_transport.c (sbx_connect, sbx_close). */
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
        bool streaming;   /* a watch (sbx_watch_open) has the connection to itself */
        char *message;    /* last failure, NULL after success */
        bool message_oom; /* the last failure's message could not be allocated */
        int err;
        /* A connection that becomes a stream (OpenPort): reads never go past the frame
         * being read, and over ssh the remote dial-stdio ends with the daemon's side. */
        bool exact_reads;
        struct ssh_link *streams;  /* ssh children of the streams sbx_open_port gave out */
        size_t n_streams;
};

/* One request and how to wait for its answer: what transport_call() exchanges with the daemon. */
struct exchange {
        Sbx__V1__Request *req; /* body set by the caller; request_id set by transport_call() */
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
        sbx_image_progress_cb on_image_progress; /* PullImage: each ImageProgress */
        /* ExportImage: each ExportChunk (its data at offset); nonzero stops taking them
         * (the call fails with that errno). */
        int (*on_export_chunk)(void *ud, uint64_t offset, const void *data, size_t len);
        int export_errno;
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

/* A tiny list of allocations that live exactly as long as one request being built. */
struct pool {
        void **v;
        size_t n, cap;
        bool oom;
};

/* protobuf-c's message structs hold `char *` and `uint8_t *` even in fields that packing
 * only reads; requests point them at the caller's const data instead of copying it.
 * The cast goes through uintptr_t to say so on purpose (it is not a -Wcast-qual slip). */
static inline char *unconst(const char *s) {
        return (char *)(uintptr_t)s;
}

static inline char **unconst_v(const char *const *v) {
        return (char **)(uintptr_t)v;
}

/* ---- libsbx.c: checks the other API files share -------------------------------------- */

/* Checks a sandbox ID argument; fills the error on c when it is bad. */
enum sbx_code libsbx_check_id(sbx_client *c, const char *id);

/* ---- libsbx_transport.c: the connection ------------------------------------------------ */

/* Clears the last failure of c (a call that succeeds leaves no message behind). */
void transport_clear_error(sbx_client *c);

/* Records a failure on c and returns code, for `return transport_fail(...)`. */
__attribute__((format(printf, 4, 5))) enum sbx_code
transport_fail(sbx_client *c, enum sbx_code code, int err, const char *fmt, ...);

/* transport_fail for memory that ran out: SBX_INTERNAL, ENOMEM. */
enum sbx_code transport_fail_oom(sbx_client *c);

/* A reply that breaks the protocol: closes the connection and describes it (SBX_INTERNAL). */
__attribute__((format(printf, 3, 4))) enum sbx_code transport_protocol_fail(sbx_client *c, int err,
                                                                            const char *fmt, ...);

/* Connects c and says Hello; unless the client pipelines it, waits for the reply. */
enum sbx_code transport_connect(sbx_client *c);

/* Reads the reply to the Hello sent before (c->hello_id): c->hello is the daemon's, or
 * NULL for a daemon without Hello. On failure the connection is closed and the error set. */
enum sbx_code transport_hello_finish(sbx_client *c);

/* Sends k->req and waits for its final Response. On SBX_OK *ret is the reply (free with
 * sbx__v1__response__free_unpacked). On a non-OK status *ret is set only when
 * k->keep_error_body and the reply has the wanted body; otherwise it is NULL. */
enum sbx_code transport_call(sbx_client *c, struct exchange *k, Sbx__V1__Response **ret);

/* Sends k->req as transport_call does, without waiting for a reply: *ret_id is its
 * request id, for transport_stream_next (WatchFiles, an answer without an end). */
enum sbx_code transport_stream_open(sbx_client *c, struct exchange *k, uint64_t *ret_id);

/* The next reply of the stream id within timeout_ms (-1: as long as it takes): SBX_OK
 * with *ret the reply (k->want's body), or NULL when none came by then (the stream goes
 * on); a non-OK status ends the stream (its code, the failure set); a lost connection
 * is SBX_UNAVAILABLE (closed). */
enum sbx_code transport_stream_next(sbx_client *c, struct exchange *k, uint64_t id,
                                    int64_t timeout_ms, Sbx__V1__Response **ret);

/* Ends a stream: closes the connection (the daemon then stops it); the next call makes a
 * new one. */
void transport_stream_close(sbx_client *c);

/* A new client *ret connected to c's daemon (its socket path or ssh:// URL, client name
 * and call timeout) whose reads never go past the frame they read: its Hello answered,
 * the bytes after its next reply stay in the socket. On failure c carries the error
 * (nothing is left open). */
enum sbx_code transport_connect_exact(sbx_client *c, sbx_client **ret);

/* Hands s's connection over as a plain stream: *ret_fd (blocking, close-on-exec, the
 * caller's); s's ssh child, if any, is kept by c (reaped by transport_reap_streams,
 * ended by sbx_close(c)). s is left without a connection; free it with sbx_close. Fails
 * (SBX_INTERNAL, on c) when s received bytes past its last frame or memory ran out. */
enum sbx_code transport_take_stream(sbx_client *c, sbx_client *s, int *ret_fd);

/* Reaps, without waiting, the ssh children of c's streams that have exited. */
void transport_reap_streams(sbx_client *c);

/* ---- libsbx_wire.c: wire messages <-> the structs of sbx.h ---------------------------- */

/* Keeps ptr (a new allocation, freed with the pool) and returns it; NULL and p->oom
 * when ptr is NULL or cannot be kept (then it is freed). */
void *wire_pool_take(struct pool *p, void *ptr);
/* calloc from the pool (at least one element). */
void *wire_pool_calloc(struct pool *p, size_t n, size_t size);
/* Frees every allocation of the pool and empties it. */
void wire_pool_free(struct pool *p);

/* Takes b's bytes (of a reply libsbx_transport.c unpacked) into *dst, NUL-terminated,
 * without copying them; b is left empty. false when out of memory. */
bool wire_take_bytes(uint8_t **dst, size_t *dst_len, ProtobufCBinaryData *b);

/* *dst = a copy of src, "" when src is NULL. false when out of memory. */
bool wire_dup_str_nn(char **dst, const char *src);
/* *dst = a copy of the n strings v (empty for n 0). false when out of memory (what was
 * copied stays in *dst, for its free). */
bool wire_dup_strv(struct sbx_strv *dst, char *const *v, size_t n);
/* Fills *out (zeroed first) from in; on false, what was filled is freed by
 * sbx_image_free (or sbx_image_list_free) all the same. */
bool wire_image_from_proto(struct sbx_image *out, const Sbx__V1__ImageInfo *in);

/* The results below are new structs of sbx.h (free them with their sbx_*_free), or NULL
 * (false) when memory ran out, with nothing left allocated. */
struct sbx_hello *wire_hello_from_proto(const Sbx__V1__HelloReply *in);
struct sbx_hello *wire_hello_copy(const struct sbx_hello *in);
struct sbx_sandbox *wire_sandbox_from_proto(const Sbx__V1__SandboxInfo *in);
/* Takes in's output instead of copying it (in is freed after this). */
struct sbx_result *wire_result_from_proto(Sbx__V1__CommandResult *in);
/* Fills *out; on false, sbx_file_info_free's half of it frees what was filled. */
bool wire_file_info_from_proto(struct sbx_file_info *out, const Sbx__V1__FileInfo *in);
/* lr may be NULL: an empty list. */
struct sbx_sandbox_list *wire_list_from_proto(const Sbx__V1__ListSandboxesReply *lr);
/* A history page's n records (in) converted by conv into a new array of elem-byte
 * entries (*ret_v); *ret_n counts the entries begun, so that the page's free undoes a
 * failure half way. */
bool wire_page_from_proto(void **ret_v, size_t *ret_n, size_t elem, void *const *in, size_t n,
                          bool (*conv)(void *out, const void *in));
/* The conv of wire_page_from_proto for CommandRecords, ConnectionRecords and
 * ForwardRecords. */
bool wire_record_conv(void *out, const void *in);
bool wire_connection_conv(void *out, const void *in);
bool wire_forward_conv(void *out, const void *in);

/* The requests below point at the caller's strings and arrays, which must outlive the
 * request; what must be reshaped is allocated from a pool (pool->oom on failure). */
void wire_policy_to_proto(const struct sbx_policy *p, Sbx__V1__Policy *pol, Sbx__V1__Limits *lim);
Sbx__V1__Label **wire_labels(struct pool *pool, const struct sbx_label *v, size_t n);
void wire_create_to_proto(const struct sbx_create_opts *o, Sbx__V1__CreateSandbox *cs);
void wire_list_opts_to_proto(const struct sbx_list_opts *opts, Sbx__V1__ListSandboxes *ls,
                             struct pool *pool);
void wire_run_to_proto(const char *id, const struct sbx_exec_opts *o, Sbx__V1__RunCommand *run);

#endif
