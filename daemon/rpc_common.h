/* rpc_common.h: what the request handlers share, inside the request layer only.
 *
 * The request layer is these modules over this one: rpc.c (the schema walk, the one
 * dispatch table, and the handlers of sandboxes and commands), rpc_files.c (the file
 * handlers), rpc_history.c (GetHistory), rpc_images.c and rpc_pull.c (the image
 * requests; a pull's waiting clients are conn_calls of their own). Each handler answers
 * at once through conn_send(), or later through a struct call it holds (the call keeps its connection's
 * request open, and is told when the connection closes or drains). Here: the call, who
 * the caller is, the answers every handler gives (a status from -errno, an empty
 * reply, "not found" for what the caller may not see), and how a handler finds the
 * sandbox a request names, live or on record. Nothing outside the request layer
 * includes this header (conn and server know rpc.h only). On the event loop; owns
 * nothing but the calls it hands out (each freed by rpc_call_free). */
#ifndef SBX_RPC_COMMON_H
#define SBX_RPC_COMMON_H

#include <stdint.h>

#include "conn.h"
#include "sbx.pb-c.h"

struct caller;
struct command;
struct offload_job;
struct sandbox;
struct store_sandbox;

/* A request answered later: its connection keeps it open (conn_call_begin) until it is
 * answered. A RunCommand's call holds its command until the result: the command is
 * cancelled when the connection closes, and resumes its streamed output when the
 * connection has room again. A file operation's call holds its work off the loop,
 * which is cancelled when the connection closes. */
struct call {
        struct conn_call cc;
        uint64_t request_id;
        int stream;
        int background;          /* answered once (started, queued or a result), then let go */
        struct command *cmd;     /* a RunCommand's, until its result */
        struct offload_job *job; /* a file operation's work off the loop, until done */
};

/* A new call for request request_id of c, begun on c (conn_call_begin); NULL when out
 * of memory. The handler sets cmd or job when it has one; rpc_call_free ends it. */
struct call *rpc_call_new(struct conn *c, uint64_t request_id);
/* Ends the call on its connection and frees it. */
void rpc_call_free(struct call *k);
/* The connection of the call k (still open, or closed: its answers are dropped). */
struct conn *rpc_call_conn(const struct call *k);

/* Who sent the requests of c (SO_PEERCRED, its groups, the name it gave in Hello),
 * into *ret: pointing into c, valid while c is. */
void rpc_caller_of(const struct conn *c, struct caller *ret);

/* Answers request rid of c with the status of -errno err (rpc_code_from_errno) and msg. */
void rpc_send_errno(struct conn *c, uint64_t rid, int err, const char *msg);
/* A Response to request rid with an OK status and no body yet. */
void rpc_response_init(Sbx__V1__Response *resp, uint64_t rid);
/* Answers request rid of c with OK and an Empty body. */
void rpc_send_empty(struct conn *c, uint64_t rid);

/* A SandboxInfo built from a record; free with rpc_record_info_free. */
struct record_info {
        Sbx__V1__SandboxInfo info;
        Sbx__V1__CreateSandbox *spec;
        char *id;
        char *end_reason;
};
/* A store_sandbox_get or store_sandbox_foreach callback: fills the struct record_info
 * ud (zeroed before) from the record sb. 0, or -ENOMEM (free ud all the same). */
int rpc_record_to_info(const struct store_sandbox *sb, void *ud);
/* Frees what ri holds and zeroes it. */
void rpc_record_info_free(struct record_info *ri);
/* 1 when the caller k may see the ended sandbox of ri (its owner, root, or one it was
 * shared with). */
int rpc_record_may_access(const struct record_info *ri, const struct caller *k);

/* The one answer for a sandbox the caller may not see, whether it exists (another
 * user's, not shared with them) or not: no reply tells one user which ids another has
 * used. */
void rpc_send_not_found(struct conn *c, uint64_t rid, const char *id);

/* Where a sandbox stands for a caller: live and theirs to use, ended and on record for
 * them to see, or neither: not found and another user's get the one same answer. */
enum rpc_seen {
        SEEN_NONE,
        SEEN_LIVE,
        SEEN_ENDED,
};

/* Finds sandbox id for the caller of c (*ret: the live sandbox), answering the request
 * itself when id is missing (INVALID_ARGUMENT) or SEEN_NONE (NOT_FOUND). Returns the
 * enum rpc_seen, or -1 when it answered. */
int rpc_find_sandbox(struct conn *c, uint64_t rid, const char *id, struct sandbox **ret);

/* rpc_find_sandbox for a request that needs it live (an ended one is answered ENDED);
 * the use counts as activity (idle timeout). NULL when it answered. */
struct sandbox *rpc_lookup(struct conn *c, uint64_t rid, const char *id);

#endif
