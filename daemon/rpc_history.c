/* rpc_history.c: GetHistory, the records of a sandbox's commands, of its connections
 * through the proxy and of the streams to its ports; see rpc_history.h. */
#include "rpc_history.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "conn.h"
#include "names.h"
#include "rpc_common.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "store.h"

/* GetHistory */
struct history_ctx {
        Sbx__V1__CommandRecord *recs;
        Sbx__V1__CommandRecord **ptrs;
        Sbx__V1__ConnectionRecord *crecs; /* HISTORY_CONNECTIONS */
        Sbx__V1__ConnectionRecord **cptrs;
        Sbx__V1__ForwardRecord *frecs; /* HISTORY_FORWARDS */
        Sbx__V1__ForwardRecord **fptrs;
        char **strings; /* everything allocated, freed at the end */
        size_t n, n_strings, cap_strings;
        uint64_t last_seq;
};

/* Keeps p to be freed with the reply; returns p, or NULL (and frees p) when out of memory. */
static void *hist_track(struct history_ctx *h, void *p) {
        if (!p)
                return NULL;
        if (h->n_strings == h->cap_strings) {
                size_t nc = h->cap_strings ? h->cap_strings * 2 : 64;
                char **ns = realloc(h->strings, nc * sizeof(*ns));
                if (!ns) {
                        free(p);
                        return NULL;
                }
                h->strings = ns;
                h->cap_strings = nc;
        }
        h->strings[h->n_strings++] = p;
        return p;
}

static char *hist_strdup(struct history_ctx *h, const char *s) {
        return s ? hist_track(h, strdup(s)) : NULL;
}

static int history_row(const struct store_command *sc, void *ud) {
        struct history_ctx *h = ud;
        Sbx__V1__CommandRecord *r = &h->recs[h->n];
        size_t i;

        sbx__v1__command_record__init(r);
        r->has_seq = 1;
        r->seq = sc->seq;
        r->command_id = hist_strdup(h, sc->command_id);
        r->argv = hist_track(h, calloc(sc->argc ? sc->argc : 1, sizeof(char *)));
        if (!r->argv)
                return -ENOMEM;
        for (i = 0; i < sc->argc; i++)
                r->argv[i] = hist_strdup(h, sc->argv[i]);
        r->n_argv = sc->argc;
        r->cwd = hist_strdup(h, sc->cwd);
        r->has_caller_uid = r->has_caller_pid = 1;
        r->caller_uid = sc->caller_uid;
        r->caller_pid = sc->caller_pid;
        r->client_name = hist_strdup(h, sc->client_name);
        r->has_started_unix_ms = 1;
        r->started_unix_ms = sc->started_ms;
        r->has_ended_unix_ms = sc->ended_ms != 0;
        r->ended_unix_ms = sc->ended_ms;
        if (sc->outcome) {
                r->has_outcome = 1;
                r->outcome = names_outcome_parse(sc->outcome);
        } else if (sc->ended_ms == 0) {
                /* Not ended: a daemon that restarts marks what it lost as unknown. */
                r->has_outcome = 1;
                r->outcome = SBX__V1__OUTCOME__RUNNING;
        }
        r->has_exit_code = sc->has_exit_code;
        r->exit_code = sc->exit_code;
        r->has_signal = sc->has_signal;
        r->signal = sc->signal;
        r->has_duration = 1;
        r->duration = sc->duration;
        r->has_peak_memory_bytes = 1;
        r->peak_memory_bytes = sc->peak_memory_bytes;
        r->has_stdout_bytes = r->has_stderr_bytes = 1;
        r->stdout_bytes = sc->stdout_bytes;
        r->stderr_bytes = sc->stderr_bytes;
        r->has_stdout_truncated = r->has_stderr_truncated = 1;
        r->stdout_truncated = sc->stdout_truncated;
        r->stderr_truncated = sc->stderr_truncated;
        r->has_queued_ms = 1;
        r->queued_ms = sc->queued_ms;
        r->has_background = 1;
        r->background = sc->background;
        r->has_tty = 1;
        r->tty = sc->tty;
        h->ptrs[h->n++] = r;
        h->last_seq = sc->seq;
        return 0;
}

/* Sends reply (its records set) as a page of GetHistory req: n records were read, one
 * more than limit when the page is not the last; last_seq is the last one kept's. */
static void send_page(struct conn *c, const Sbx__V1__Request *req,
                      Sbx__V1__GetHistoryReply *reply, size_t n, uint32_t limit,
                      uint64_t last_seq) {
        const Sbx__V1__GetHistory *q = req->get_history;
        Sbx__V1__Response resp;

        rpc_response_init(&resp, req->request_id);
        reply->has_truncated = 1;
        reply->truncated = n > limit;
        reply->has_next_after_seq = 1;
        reply->next_after_seq = n ? last_seq : (q->has_after_seq ? q->after_seq : 0);
        resp.body_case = SBX__V1__RESPONSE__BODY_HISTORY;
        resp.history = reply;
        conn_send(c, &resp);
}

/* One ForwardRecord of the reply from a stored forward. */
static int forward_row(const struct store_forward *sf, void *ud) {
        struct history_ctx *h = ud;
        Sbx__V1__ForwardRecord *r = &h->frecs[h->n];

        sbx__v1__forward_record__init(r);
        r->has_seq = 1;
        r->seq = sf->seq;
        r->has_caller_uid = r->has_caller_pid = 1;
        r->caller_uid = sf->caller_uid;
        r->caller_pid = sf->caller_pid;
        r->client_name = hist_strdup(h, sf->client_name);
        r->has_port = 1;
        r->port = sf->port;
        r->address = hist_strdup(h, sf->address);
        r->has_opened_unix_ms = 1;
        r->opened_unix_ms = sf->opened_ms;
        r->has_closed_unix_ms = sf->closed_ms != 0;
        r->closed_unix_ms = sf->closed_ms;
        r->has_bytes_in = r->has_bytes_out = 1;
        r->bytes_in = sf->bytes_in;
        r->bytes_out = sf->bytes_out;
        r->reason = hist_strdup(h, sf->reason);
        h->fptrs[h->n++] = r;
        return 0;
}

/* GetHistory with kind HISTORY_FORWARDS: the streams to its ports, paged as commands. */
static void history_forwards(struct conn *c, const Sbx__V1__Request *req, uint32_t limit,
                             struct history_ctx *h) {
        const Sbx__V1__GetHistory *q = req->get_history;
        Sbx__V1__GetHistoryReply reply = SBX__V1__GET_HISTORY_REPLY__INIT;
        int r;

        h->frecs = calloc(limit + 1, sizeof(*h->frecs));
        h->fptrs = calloc(limit + 1, sizeof(*h->fptrs));
        if (!h->frecs || !h->fptrs) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = store_forwards(conn_daemon(c)->store, q->sandbox_id,
                           q->has_after_seq ? q->after_seq : 0, limit + 1, forward_row, h);
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, "cannot read the forward records");
                return;
        }
        reply.n_forwards = h->n > limit ? limit : h->n;
        reply.forwards = h->fptrs;
        send_page(c, req, &reply, h->n, limit,
                  reply.n_forwards ? h->fptrs[reply.n_forwards - 1]->seq : 0);
}

/* One ConnectionRecord of the reply from a stored connection. */
static int connection_row(const struct store_connection *sc, void *ud) {
        struct history_ctx *h = ud;
        Sbx__V1__ConnectionRecord *r = &h->crecs[h->n];

        sbx__v1__connection_record__init(r);
        r->has_seq = 1;
        r->seq = sc->seq;
        r->has_started_unix_ms = 1;
        r->started_unix_ms = sc->started_ms;
        r->has_ended_unix_ms = sc->ended_ms != 0;
        r->ended_unix_ms = sc->ended_ms;
        r->host = hist_strdup(h, sc->host);
        r->has_port = sc->port != 0;
        r->port = sc->port;
        r->address = hist_strdup(h, sc->address);
        r->has_allowed = 1;
        r->allowed = sc->allowed;
        r->reason = hist_strdup(h, sc->reason);
        r->method = hist_strdup(h, sc->method);
        r->has_bytes_sent = r->has_bytes_received = 1;
        r->bytes_sent = sc->bytes_sent;
        r->bytes_received = sc->bytes_received;
        h->cptrs[h->n++] = r;
        return 0;
}

/* GetHistory with kind HISTORY_CONNECTIONS: the proxy's records, paged as commands. */
static void history_connections(struct conn *c, const Sbx__V1__Request *req, uint32_t limit,
                                struct history_ctx *h) {
        const Sbx__V1__GetHistory *q = req->get_history;
        Sbx__V1__GetHistoryReply reply = SBX__V1__GET_HISTORY_REPLY__INIT;
        int r;

        h->crecs = calloc(limit + 1, sizeof(*h->crecs));
        h->cptrs = calloc(limit + 1, sizeof(*h->cptrs));
        if (!h->crecs || !h->cptrs) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        r = store_connections(conn_daemon(c)->store, q->sandbox_id,
                              q->has_after_seq ? q->after_seq : 0, limit + 1, connection_row, h);
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, "cannot read the connection records");
                return;
        }
        reply.n_connections = h->n > limit ? limit : h->n;
        reply.connections = h->cptrs;
        send_page(c, req, &reply, h->n, limit,
                  reply.n_connections ? h->cptrs[reply.n_connections - 1]->seq : 0);
}

void rpc_history_get(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__GetHistory *q = req->get_history;
        struct history_ctx h;
        struct sandbox *live;
        int seen;
        Sbx__V1__GetHistoryReply reply = SBX__V1__GET_HISTORY_REPLY__INIT;
        uint32_t limit = q->has_limit && q->limit > 0 ? q->limit : SBX_DEFAULT_HISTORY_LIMIT;
        size_t i;
        int r;

        if (limit > SBX_MAX_HISTORY_LIMIT)
                limit = SBX_MAX_HISTORY_LIMIT;
        seen = rpc_find_sandbox(c, req->request_id, q->sandbox_id, &live);
        if (seen < 0)
                return;
        /* Its commands started a moment ago are not in the records yet. */
        if (live)
                command_record_running(live);
        memset(&h, 0, sizeof(h));
        if (q->has_kind && q->kind == SBX__V1__HISTORY_KIND__HISTORY_CONNECTIONS) {
                history_connections(c, req, limit, &h);
                goto out;
        }
        if (q->has_kind && q->kind == SBX__V1__HISTORY_KIND__HISTORY_FORWARDS) {
                history_forwards(c, req, limit, &h);
                goto out;
        }
        if (q->has_kind && q->kind != SBX__V1__HISTORY_KIND__HISTORY_COMMANDS) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "unknown history kind %d", (int)q->kind);
                goto out;
        }
        /* One more than asked, to know whether the page is the last. */
        h.recs = calloc(limit + 1, sizeof(*h.recs));
        h.ptrs = calloc(limit + 1, sizeof(*h.ptrs));
        if (!h.recs || !h.ptrs) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        r = store_history(conn_daemon(c)->store, q->sandbox_id, q->has_after_seq ? q->after_seq : 0,
                          limit + 1, history_row, &h);
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, "cannot read the command records");
                goto out;
        }
        reply.n_commands = h.n > limit ? limit : h.n;
        reply.commands = h.ptrs;
        send_page(c, req, &reply, h.n, limit,
                  reply.n_commands ? h.ptrs[reply.n_commands - 1]->seq : 0);
out:
        for (i = 0; i < h.n_strings; i++)
                free(h.strings[i]);
        free(h.strings);
        free(h.recs);
        free(h.ptrs);
        free(h.crecs);
        free(h.cptrs);
        free(h.frecs);
        free(h.fptrs);
}
