/* cli_mcp.h: what the two halves of `sbx mcp` share.
 *
 * cli_mcp.c is the server: its modes (attach, owned), the JSON-RPC loop on stdin and
 * stdout, the threads that run commands and their cancellation. cli_mcp_tools.c is the
 * tool set: each tool's description and schemas, how its arguments are read, and how a
 * result is shaped for a model. The server calls the tools only through the four
 * functions below; a tool reaches the daemon only through the client it is given. */
#ifndef SBX_CLI_MCP_H
#define SBX_CLI_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#define CLI_NO_JSON_WRITER /* jansson's own json_string() and json_null() here */
#include "cli.h"

/* Defaults of the server's flags: the agent tool set's (see the seeds). */
#define MCP_DEFAULT_COMMAND_TIMEOUT_MS     (60u * 1000u)
#define MCP_DEFAULT_MAX_COMMAND_TIMEOUT_MS (600u * 1000u)
#define MCP_DEFAULT_MAX_OUTPUT_BYTES       (50u * 1024u)
#define MCP_DEFAULT_MAX_OUTPUT_LINES       2000u
#define MCP_DEFAULT_MAX_READ_BYTES         (5u * 1024u * 1024u)

/* JSON-RPC error codes: the standard ones, and the server's own (from the range
 * JSON-RPC leaves to servers) for the two failures no retry can fix. */
#define MCP_PARSE_ERROR      (-32700)
#define MCP_INVALID_REQUEST  (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS   (-32602)
#define MCP_INTERNAL_ERROR   (-32603)
#define MCP_SANDBOX_ENDED    (-32001) /* the sandbox is gone: stop using this server */
#define MCP_DAEMON_GONE      (-32002) /* sbxd cannot be reached: stop using this server */

/* What the server was started with; set before the loop starts, read-only after. */
struct mcp_env {
        const char *socket_path; /* --socket, or NULL for libsbx's default */
        const char *sandbox_id;
        bool owned; /* created by this server, ended when it stops */
        bool keep;  /* --keep: an owned sandbox is left running */
        bool lease; /* the server keeps moving the deadline on */
        uint64_t default_timeout_ms;
        uint64_t max_timeout_ms;
        uint64_t max_output_bytes; /* per stream, and per read_file page */
        uint64_t max_output_lines;
        uint64_t max_read_bytes;
};

/* One tool call. The server fills the first part; a tool that fails with a JSON-RPC
 * error rather than a result fills err_*. */
struct mcp_call {
        const struct mcp_env *env;
        sbx_client *c;   /* the calling thread's own client */
        bool structured; /* the client reads structuredContent (protocol 2025-06-18 on) */
        /* For threaded tools: *cancelled, read under *lock, says the client cancelled. */
        pthread_mutex_t *lock;
        const bool *cancelled;

        int err_code;      /* 0, or a JSON-RPC error code */
        char *err_message; /* owned */
        json_t *err_data;  /* owned, may be NULL */
};

struct mcp_tool;

/* The tools/list result for a client speaking protocol version `version` (outputSchema
 * and titles from 2025-06-18, annotations from 2025-03-26). A new reference; NULL when
 * memory runs out. */
json_t *mcp_tools_list(const struct mcp_env *env, const char *version);

/* The tool called name, or NULL. */
const struct mcp_tool *mcp_tool_find(const char *name);

/* Whether tool t runs on a thread of its own (it may run long and be cancelled). */
bool mcp_tool_threaded(const struct mcp_tool *t);

/* Runs tool t with args (a JSON object, borrowed) on k->c. Returns a CallToolResult (a
 * new reference): its isError says whether the tool failed in a way the model can act
 * on. NULL when the call must fail with a JSON-RPC error instead: k->err_* say which.
 * May be called from any thread that owns k->c. */
json_t *mcp_tool_call(const struct mcp_tool *t, struct mcp_call *k, json_t *args);

/* Frees what a call left in k->err_*. */
void mcp_call_clear(struct mcp_call *k);

#endif
