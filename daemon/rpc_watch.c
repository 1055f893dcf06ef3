/* rpc_watch.c: WatchFiles; see rpc_watch.h.
 *
 * Each watch is a conn_call (its connection stays open for it, and tells it when it
 * closes or drains), an end listener of its sandbox, and an fswatch. Whichever end
 * comes first (the connection closing, the sandbox ending, the watch failing) unlinks
 * all three and frees it; the other two are then never heard from. */
#include "rpc_watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "caller.h"
#include "conn.h"
#include "fswatch.h"
#include "log.h"
#include "rpc.h"
#include "rpc_common.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"

struct watch {
        struct conn_call cc;
        struct sandbox_end_listener end;
        struct fswatch *fw;
        struct sbxd *d;
        struct sandbox *sb;
        uint64_t rid;
        uid_t uid;
        char path[SBX_PATH_MAX_BYTES + 1];
        struct watch *next, *prev;
};

/* Every watch of a daemon, and their pool (the directories they follow, their walks). */
struct rpc_watches {
        struct watch *head;
        unsigned n;
        struct fswatch_pool *pool;
};

static struct watch *of_call(struct conn_call *cc) {
        return (struct watch *)((char *)cc - offsetof(struct watch, cc));
}

static struct watch *of_end(struct sandbox_end_listener *l) {
        return (struct watch *)((char *)l - offsetof(struct watch, end));
}

/* The daemon's watches, made when there are none yet; NULL out of memory. */
static struct rpc_watches *watches_of(struct sbxd *d) {
        struct rpc_watches *all = d->watches;
        size_t max_dirs, per_user;

        if (all)
                return all;
        all = calloc(1, sizeof(*all));
        fswatch_budget(d->features.inotify_watches, &max_dirs, &per_user);
        if (all)
                all->pool = fswatch_pool_new(d->loop, max_dirs, per_user);
        if (!all || !all->pool) {
                free(all);
                return NULL;
        }
        d->watches = all;
        return all;
}

/* Frees the daemon's watches once none is left. */
static void watches_release(struct sbxd *d) {
        struct rpc_watches *all = d->watches;

        if (!all || all->n || !fswatch_pool_empty(all->pool))
                return;
        fswatch_pool_free(all->pool);
        free(all);
        d->watches = NULL;
}

/* Unlinks w from everything and frees it. */
static void watch_free(struct watch *w) {
        struct rpc_watches *all = w->d->watches;
        struct sbxd *d = w->d;

        if (w->prev)
                w->prev->next = w->next;
        else
                all->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        all->n--;
        sandbox_unlisten_end(&w->end);
        fswatch_free(w->fw);
        if (w->cc.conn)
                conn_call_end(&w->cc);
        free(w);
        watches_release(d);
}

static void on_closing(struct conn_call *cc) {
        watch_free(of_call(cc));
}

static void on_drained(struct conn_call *cc) {
        fswatch_resume(of_call(cc)->fw);
}

/* The sandbox ends: ENDED, but for a restore (sbxtab.c's reason "restored"), after which
 * the sandbox serves on with other files: UNAVAILABLE, watch again. */
static void on_ending(struct sandbox_end_listener *l, struct sandbox *sb, const char *reason) {
        struct watch *w = of_end(l);

        if (strcmp(reason, "restored") == 0)
                conn_send_status(w->cc.conn, w->rid, SBX__V1__CODE__UNAVAILABLE,
                                 "sandbox '%s' was restored: its files were replaced and the "
                                 "watch of '%s' ended; list and watch again",
                                 sandbox_id(sb), w->path);
        else
                conn_send_status(w->cc.conn, w->rid, SBX__V1__CODE__ENDED,
                                 "sandbox '%s' ended (%s); the watch of '%s' ended with it",
                                 sandbox_id(sb), reason, w->path);
        watch_free(w);
}

/* Sends one FileEvents answer. */
static void send_events(struct watch *w, Sbx__V1__FileEvents *fe) {
        Sbx__V1__Response resp;

        rpc_response_init(&resp, w->rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_FILE_EVENTS;
        resp.file_events = fe;
        (void)conn_send(w->cc.conn, &resp);
}

static void on_ready(void *ud) {
        Sbx__V1__FileEvents fe = SBX__V1__FILE_EVENTS__INIT;

        fe.has_ready = fe.ready = 1;
        send_events(ud, &fe);
}

static void on_batch(void *ud, const struct fswatch_event *ev, size_t n, const char *of) {
        Sbx__V1__FileEvents fe = SBX__V1__FILE_EVENTS__INIT;
        Sbx__V1__FileEvent *v = calloc(n ? n : 1, sizeof(*v));
        Sbx__V1__FileEvent **pv = calloc(n ? n : 1, sizeof(*pv));
        size_t i;

        if (!v || !pv) {
                n = 0;
                of = "the daemon ran out of memory for changes";
        }
        for (i = 0; i < n; i++) {
                sbx__v1__file_event__init(&v[i]);
                v[i].has_kind = 1;
                v[i].kind = ev[i].kind;
                v[i].path = (char *)(uintptr_t)ev[i].path;
                v[i].old_path = (char *)(uintptr_t)ev[i].old_path;
                v[i].has_is_dir = 1;
                v[i].is_dir = !!ev[i].is_dir;
                pv[i] = &v[i];
        }
        fe.n_events = n;
        fe.events = pv;
        if (of) {
                fe.has_overflow = fe.overflow = 1;
                fe.overflow_reason = (char *)(uintptr_t)of;
        }
        send_events(ud, &fe);
        free(v);
        free(pv);
}

static int on_congested(void *ud) {
        struct watch *w = ud;
        return conn_congested(w->cc.conn);
}

static void on_failed(void *ud, int r, const char *msg) {
        struct watch *w = ud;

        rpc_send_errno(w->cc.conn, w->rid, r, msg);
        watch_free(w);
}

static const struct fswatch_ops watch_ops = {
        .ready = on_ready,
        .batch = on_batch,
        .congested = on_congested,
        .failed = on_failed,
};

/* 0 when one more watch of uid on sb is within the bounds; else answers and -1. */
static int check_bounds(struct conn *c, uint64_t rid, struct sandbox *sb, uid_t uid) {
        const struct rpc_watches *all = conn_daemon(c)->watches;
        unsigned on_sb = 0, of_uid = 0;
        const struct watch *w;

        for (w = all ? all->head : NULL; w; w = w->next) {
                on_sb += w->sb == sb;
                of_uid += w->uid == uid;
        }
        if (on_sb >= SBX_WATCH_MAX_PER_SANDBOX)
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "sandbox '%s' has %u file watches, the most one sandbox may "
                                 "have; stop one first",
                                 sandbox_id(sb), SBX_WATCH_MAX_PER_SANDBOX);
        else if (of_uid >= SBX_WATCH_MAX_PER_UID)
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "uid %u has %u file watches, the most one user may have; stop "
                                 "one first",
                                 (unsigned)uid, SBX_WATCH_MAX_PER_UID);
        else if (all && all->n >= SBX_WATCH_MAX_TOTAL)
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "the daemon has %u file watches, the most it keeps; try later",
                                 SBX_WATCH_MAX_TOTAL);
        else
                return 0;
        return -1;
}

/* 0 when the request's own fields are well-formed (*ret_ms the coalescing); else
 * answers and -1. The path itself is checked where it is resolved (files.c). */
static int check_request(struct conn *c, uint64_t rid, const Sbx__V1__WatchFiles *wf,
                         uint32_t *ret_ms) {
        uint32_t ms = wf->has_coalesce_ms ? wf->coalesce_ms : SBX_WATCH_DEFAULT_COALESCE_MS;

        if (!wf->path || !wf->path[0]) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "path is required: the directory to watch, e.g. /workspace");
                return -1;
        }
        if (ms < SBX_WATCH_MIN_COALESCE_MS || ms > SBX_WATCH_MAX_COALESCE_MS) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "coalesce_ms is %u; it must be %u..%u (default %u)", ms,
                                 SBX_WATCH_MIN_COALESCE_MS, SBX_WATCH_MAX_COALESCE_MS,
                                 SBX_WATCH_DEFAULT_COALESCE_MS);
                return -1;
        }
        *ret_ms = ms;
        return 0;
}

/* Links the new watch w into its daemon's list. */
static void watch_link(struct watch *w) {
        struct rpc_watches *all = w->d->watches;

        w->next = all->head;
        if (all->head)
                all->head->prev = w;
        all->head = w;
        all->n++;
}

void rpc_watch_files(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__WatchFiles *wf = req->watch_files;
        uint64_t rid = req->request_id;
        char err[4096];
        struct caller k;
        struct sandbox *sb;
        struct watch *w;
        uint32_t ms;
        int r;

        if (check_request(c, rid, wf, &ms) < 0 || !(sb = rpc_lookup(c, rid, wf->sandbox_id)))
                return;
        rpc_caller_of(c, &k);
        if (check_bounds(c, rid, sb, k.uid) < 0)
                return;
        w = calloc(1, sizeof(*w));
        if (!w || !watches_of(conn_daemon(c))) {
                free(w);
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory for a watch");
                return;
        }
        w->d = conn_daemon(c);
        w->sb = sb;
        w->rid = rid;
        w->uid = k.uid;
        snprintf(w->path, sizeof(w->path), "%s", wf->path);
        r = fswatch_start(w->d->watches->pool, k.uid, sb, wf->path,
                          wf->has_recursive && wf->recursive, ms, &watch_ops, w, &w->fw, err,
                          sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, rid, r, err);
                free(w);
                watches_release(conn_daemon(c));
                return;
        }
        watch_link(w);
        w->end.ending = on_ending;
        sandbox_listen_end(sb, &w->end);
        conn_call_begin(c, &w->cc, on_closing, on_drained);
        log_info("sbx=%s conn=%llu: watching '%s'%s", sandbox_id(sb),
                 (unsigned long long)conn_id(c), w->path,
                 wf->has_recursive && wf->recursive ? " recursively" : "");
}
