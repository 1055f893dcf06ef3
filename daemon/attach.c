/* attach.c: AttachCommand; see attach.h.
 *
 * An attacher of a live command is a conn_call (its connection stays open for it and
 * tells it when it closes or drains) and a command_watch (the command tells it each
 * chunk and its result). next[] is, per stream, the offset of the first byte it has not
 * sent: chunks are trimmed to it, so that the kept output sent first and the live
 * output after never overlap. */
#include "attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bgkept.h"
#include "chunk.h"
#include "command.h"
#include "conn.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "sbxtab.h"

struct attach {
        struct conn_call cc;
        struct command_watch w;
        struct command *cmd; /* while it follows a live command */
        uint64_t rid;
        uint64_t next[2]; /* per stream: the offset of the first byte not sent yet */
        int lagging;      /* skipped output while congested: catch up from the kept */
        int follow;
        int deferred; /* asked while its connection was congested: starts once it drains */
        char command_id[32];
        char sandbox_id[SBX_ID_MAX_BYTES + 1];
        int64_t sandbox_created_ms; /* which sandbox of that id (an id may come again) */
};

/* The sandbox a attaches to, found again by id: NULL when it ended (or the id now names
 * another sandbox, made after that one's record was pruned, which the caller may not
 * be allowed to see). */
static struct sandbox *find_again(struct attach *a, struct conn *c) {
        struct sandbox *sb = sbxtab_find(conn_daemon(c)->sandboxes, a->sandbox_id);

        return sb && !sandbox_is_over(sb) && sandbox_created_ms(sb) == a->sandbox_created_ms
                       ? sb
                       : NULL;
}

static void send_chunk(struct conn *c, uint64_t rid, char *command_id, int idx, uint64_t offset,
                       uint8_t *data, size_t len) {
        chunk_send(c, rid, command_id, idx == 0 ? SBX__V1__STREAM__STDOUT : SBX__V1__STREAM__STDERR,
                   offset, data, len, 0);
}

/* Sends data (bytes of stream idx from offset first) as chunks, from *next on; *next
 * moves past them. */
static void send_from(struct conn *c, uint64_t rid, char *command_id, int idx, uint64_t first,
                      uint8_t *data, size_t len, uint64_t *next) {
        size_t piece = chunk_piece_bytes(c), off;

        if (first + len <= *next)
                return;
        if (first < *next) {
                data += *next - first;
                len -= (size_t)(*next - first);
                first = *next;
        }
        for (off = 0; off < len; off += piece)
                send_chunk(c, rid, command_id, idx, first + off, data + off,
                           len - off < piece ? len - off : piece);
        *next = first + len;
}

/* The final CommandResult; its output came as chunks. */
static void send_result(struct conn *c, uint64_t rid, Sbx__V1__CommandResult *res) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status ok = SBX__V1__STATUS__INIT;
        ProtobufCBinaryData out = res->stdout, err = res->stderr;
        protobuf_c_boolean had = res->has_output_in_chunks, in_chunks = res->output_in_chunks;

        ok.has_code = 1;
        ok.code = SBX__V1__CODE__OK;
        resp.has_request_id = 1;
        resp.request_id = rid;
        resp.status = &ok;
        res->stdout.len = res->stderr.len = 0;
        res->has_output_in_chunks = res->output_in_chunks = 1;
        resp.body_case = SBX__V1__RESPONSE__BODY_COMMAND_RESULT;
        resp.command_result = res;
        (void)conn_send(c, &resp);
        /* res is the command's, also given to its other attachers: as it was. */
        res->stdout = out;
        res->stderr = err;
        res->has_output_in_chunks = had;
        res->output_in_chunks = in_chunks;
}

/* Sends what cmd kept of each stream from a->next[] on, while the connection has room
 * (all: whatever its room, for an answer that ends at once). Returns 1 while some is
 * left to send. */
static int send_kept(struct attach *a, struct conn *c, struct command *cmd, int all) {
        size_t piece = chunk_piece_bytes(c), n;
        uint8_t *buf = malloc(piece);
        uint64_t first;
        int idx;

        if (!buf)
                return 1; /* tried again when the connection drains */
        for (idx = 0; idx < 2; idx++) {
                while ((n = command_kept_output(cmd, idx, a->next[idx], buf, piece, &first)) > 0 ||
                       first > a->next[idx]) {
                        if (n > 0)
                                send_chunk(c, a->rid, a->command_id, idx, first, buf, n);
                        a->next[idx] = first + n;
                        if (n == 0)
                                break;
                        if (!all && conn_congested(c)) {
                                free(buf);
                                return 1;
                        }
                }
        }
        free(buf);
        return 0;
}

static void attach_free(struct attach *a) {
        if (a->cmd)
                command_watch_remove(a->cmd, &a->w);
        conn_call_end(&a->cc);
        free(a);
}

static struct attach *of_watch(struct command_watch *w) {
        return (struct attach *)((char *)w - offsetof(struct attach, w));
}

static struct attach *of_call(struct conn_call *cc) {
        return (struct attach *)((char *)cc - offsetof(struct attach, cc));
}

/* Live output of the command followed: sent unless the connection is congested (then
 * the attacher lags and later catches up from the kept output). */
static void on_output(struct command_watch *w, Sbx__V1__Stream stream, uint64_t offset,
                      uint8_t *data, size_t len) {
        struct attach *a = of_watch(w);
        struct conn *c = a->cc.conn;
        int idx = stream == SBX__V1__STREAM__STDERR;

        if (a->lagging || conn_is_closed(c))
                return;
        if (conn_congested(c)) {
                a->lagging = 1;
                return;
        }
        send_from(c, a->rid, a->command_id, idx, offset, data, len, &a->next[idx]);
}

/* The command ended: what is left of its kept output (the result's tails), then the
 * result. On a congested connection, the tails of a background command wait until it
 * drains (they are kept, and sent from there as for an ended command), and those of
 * another are skipped: each attacher queueing its whole tail at once would hold two
 * caps per attacher of the connection. */
static void on_done(struct command_watch *w, Sbx__V1__CommandResult *res) {
        struct attach *a = of_watch(w);
        struct conn *c = a->cc.conn;
        struct sandbox *sb;
        size_t len;

        a->cmd = NULL; /* unlinked by the command */
        if (conn_congested(c)) {
                sb = find_again(a, c);
                if (sb && command_ended_result(sb, a->command_id, &len)) {
                        a->deferred = 1;
                        return;
                }
                a->next[0] = res->stdout_bytes;
                a->next[1] = res->stderr_bytes;
        }
        if (res->stdout.len <= res->stdout_bytes)
                send_from(c, a->rid, a->command_id, 0, res->stdout_bytes - res->stdout.len,
                          res->stdout.data, res->stdout.len, &a->next[0]);
        if (res->stderr.len <= res->stderr_bytes)
                send_from(c, a->rid, a->command_id, 1, res->stderr_bytes - res->stderr.len,
                          res->stderr.data, res->stderr.len, &a->next[1]);
        send_result(c, a->rid, res);
        attach_free(a);
}

static const struct command_watch_ops watch_ops = {
        .output = on_output,
        .done = on_done,
};

/* The client went away: the command goes on without this attacher. */
static void on_closing(struct conn_call *cc) {
        attach_free(of_call(cc));
}

static void attach_start(struct attach *a, struct sandbox *sb);

/* The connection has room again: a deferred attach starts (its sandbox found again by
 * id: it may have ended meanwhile), a lagging one catches up from the kept output. */
static void on_drained(struct conn_call *cc) {
        struct attach *a = of_call(cc);
        struct conn *c = a->cc.conn;
        struct sandbox *sb;

        if (a->deferred) {
                if (conn_congested(c))
                        return;
                a->deferred = 0;
                sb = find_again(a, c);
                if (sb) {
                        attach_start(a, sb);
                        return;
                }
                conn_send_status(c, a->rid, SBX__V1__CODE__ENDED,
                                 "sandbox '%s' has ended; see `sbx info %s`", a->sandbox_id,
                                 a->sandbox_id);
                attach_free(a);
                return;
        }
        if (a->lagging && a->cmd && !send_kept(a, c, a->cmd, 0))
                a->lagging = 0;
}

/* An ended background command: its kept output from the offsets, then its result. */
static void attach_ended(struct attach *a, struct conn *c, const uint8_t *packed, size_t len) {
        Sbx__V1__CommandResult *res = sbx__v1__command_result__unpack(NULL, len, packed);

        if (!res) {
                conn_send_status(c, a->rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "daemon out of memory");
                return;
        }
        if (res->stdout.len <= res->stdout_bytes)
                send_from(c, a->rid, res->command_id, 0, res->stdout_bytes - res->stdout.len,
                          res->stdout.data, res->stdout.len, &a->next[0]);
        if (res->stderr.len <= res->stderr_bytes)
                send_from(c, a->rid, res->command_id, 1, res->stderr_bytes - res->stderr.len,
                          res->stderr.data, res->stderr.len, &a->next[1]);
        send_result(c, a->rid, res);
        sbx__v1__command_result__free_unpacked(res, NULL);
}

/* A command running or waiting: its kept output, then the RUNNING result (no follow),
 * or from then on its output and result (follow: a stays). */
static void attach_live(struct attach *a, struct conn *c, struct command *cmd) {
        if (!a->follow) {
                Sbx__V1__CommandResult res;
                (void)send_kept(a, c, cmd, 1);
                command_running_result(cmd, &res);
                send_result(c, a->rid, &res);
                attach_free(a);
                return;
        }
        a->lagging = send_kept(a, c, cmd, 0);
        a->w.ops = &watch_ops;
        a->cmd = cmd;
        command_watch_add(cmd, &a->w);
}

/* Answers a (its connection has room) for sb. */
static void attach_start(struct attach *a, struct sandbox *sb) {
        struct conn *c = a->cc.conn;
        struct command *cmd = command_find(sb, a->command_id);
        const uint8_t *packed;
        size_t len;

        if (cmd) {
                attach_live(a, c, cmd);
                return;
        }
        packed = command_ended_result(sb, a->command_id, &len);
        if (packed)
                attach_ended(a, c, packed, len);
        else
                conn_send_status(c, a->rid, SBX__V1__CODE__NOT_FOUND,
                                 "command '%s' not found in sandbox '%s': it is not running, and "
                                 "is not one of the last %u background commands that ended "
                                 "there (see `sbx history %s`)",
                                 a->command_id, a->sandbox_id, SBX_KEPT_BACKGROUND_RESULTS,
                                 a->sandbox_id);
        attach_free(a);
}

void attach_command(struct conn *c, uint64_t rid, struct sandbox *sb,
                    const Sbx__V1__AttachCommand *req) {
        struct attach *a = calloc(1, sizeof(*a));

        if (!a) {
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED, "daemon out of memory");
                return;
        }
        a->rid = rid;
        a->follow = req->has_follow && req->follow;
        a->next[0] = req->stdout_offset;
        a->next[1] = req->stderr_offset;
        snprintf(a->command_id, sizeof(a->command_id), "%s",
                 req->command_id ? req->command_id : "");
        snprintf(a->sandbox_id, sizeof(a->sandbox_id), "%s", sandbox_id(sb));
        a->sandbox_created_ms = sandbox_created_ms(sb);
        conn_call_begin(c, &a->cc, on_closing, on_drained);
        /* Each answer may queue a command's whole kept output (at most two caps): one
         * more waits until the connection has drained, so that a client that pipelines
         * attaches without reading holds the daemon's memory to one at a time. */
        if (conn_congested(c)) {
                a->deferred = 1;
                return;
        }
        attach_start(a, sb);
}
