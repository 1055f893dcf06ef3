/* libsbx_watch.c: the API's part for file-change events (sbx_watch_open, sbx_watch_next,
 * sbx_watch_close; WatchFiles in sbx.proto). A watch is a request answered without end:
 * it takes the client's connection (transport_stream_*), reads its FileEvents one by
 * one, and is stopped by closing that connection, as the daemon expects. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libsbx_int.h"
#include "sbx_limits.h"

struct sbx_watch {
        sbx_client *c;
        Sbx__V1__Request req;
        Sbx__V1__WatchFiles wf;
        struct exchange k;
        uint64_t id;
        bool ended; /* sbx_watch_next has nothing more to give */
        bool live;  /* the daemon may still run it: closing must close the connection */
};

const char *sbx_file_event_kind_name(enum sbx_file_event_kind k) {
        switch (k) {
        case SBX_FILE_CREATED:
                return "created";
        case SBX_FILE_MODIFIED:
                return "modified";
        case SBX_FILE_DELETED:
                return "deleted";
        case SBX_FILE_RENAMED:
                return "renamed";
        case SBX_FILE_EVENT_UNSPECIFIED:
                break;
        }
        return "unknown";
}

void sbx_file_events_free(struct sbx_file_events *e) {
        if (!e)
                return;
        for (size_t i = 0; i < e->n; i++) {
                free(e->v[i].path);
                free(e->v[i].old_path);
        }
        free(e->v);
        free(e->overflow_reason);
        free(e);
}

static enum sbx_file_event_kind kind_from_proto(Sbx__V1__FileEventKind k) {
        return k >= SBX__V1__FILE_EVENT_KIND__CREATED && k <= SBX__V1__FILE_EVENT_KIND__RENAMED
                       ? (enum sbx_file_event_kind)k
                       : SBX_FILE_EVENT_UNSPECIFIED;
}

/* A new batch from fe; NULL when out of memory. */
static struct sbx_file_events *events_from_proto(const Sbx__V1__FileEvents *fe) {
        struct sbx_file_events *e = calloc(1, sizeof(*e));
        bool ok = e != NULL;

        if (ok && fe->n_events) {
                e->v = calloc(fe->n_events, sizeof(*e->v));
                ok = e->v != NULL;
        }
        for (size_t i = 0; ok && i < fe->n_events; i++) {
                const Sbx__V1__FileEvent *in = fe->events[i];
                struct sbx_file_event *out = &e->v[e->n++];
                out->kind = kind_from_proto(in->kind);
                out->is_dir = in->is_dir;
                ok = wire_dup_str_nn(&out->path, in->path) &&
                     (!in->old_path || (out->old_path = strdup(in->old_path)));
        }
        if (ok && fe->overflow) {
                e->overflow = 1;
                ok = wire_dup_str_nn(&e->overflow_reason, fe->overflow_reason);
        }
        if (!ok) {
                sbx_file_events_free(e);
                return NULL;
        }
        return e;
}

/* Checks sbx_watch_open's arguments. */
static enum sbx_code check_open(sbx_client *c, const char *id, const char *path,
                                const struct sbx_watch_opts *o, sbx_watch **ret) {
        enum sbx_code rc;

        if (!c || !ret)
                return c ? transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                          "sbx_watch_open() was given NULL for ret")
                         : SBX_INVALID_ARGUMENT;
        *ret = NULL;
        rc = libsbx_check_id(c, id);
        if (rc != SBX_OK)
                return rc;
        if (!path || !*path)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "no path given: the directory to watch, e.g. /workspace");
        if (o && o->coalesce_ms &&
            (o->coalesce_ms < SBX_WATCH_MIN_COALESCE_MS ||
             o->coalesce_ms > SBX_WATCH_MAX_COALESCE_MS))
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "coalesce_ms is %u; it must be %u..%u (0: %u)",
                                      o->coalesce_ms, SBX_WATCH_MIN_COALESCE_MS,
                                      SBX_WATCH_MAX_COALESCE_MS, SBX_WATCH_DEFAULT_COALESCE_MS);
        return SBX_OK;
}

enum sbx_code sbx_watch_open(sbx_client *c, const char *id, const char *path,
                             const struct sbx_watch_opts *o, sbx_watch **ret) {
        enum sbx_code rc = check_open(c, id, path, o, ret);
        struct sbx_file_events *first = NULL;
        sbx_watch *w;

        if (rc != SBX_OK)
                return rc;
        w = calloc(1, sizeof(*w));
        if (!w)
                return transport_fail_oom(c);
        w->c = c;
        sbx__v1__request__init(&w->req);
        sbx__v1__watch_files__init(&w->wf);
        w->wf.sandbox_id = unconst(id);
        w->wf.path = unconst(path);
        w->wf.has_recursive = 1;
        w->wf.recursive = o && o->recursive;
        w->wf.has_coalesce_ms = o && o->coalesce_ms;
        w->wf.coalesce_ms = o ? o->coalesce_ms : 0;
        w->req.body_case = SBX__V1__REQUEST__BODY_WATCH_FILES;
        w->req.watch_files = &w->wf;
        w->k.req = &w->req;
        w->k.want = SBX__V1__RESPONSE__BODY_FILE_EVENTS;
        rc = transport_stream_open(c, &w->k, &w->id);
        c->streaming = w->live = rc == SBX_OK;
        /* The first answer says the watch is set up (ready), or why not; the call
         * timeout bounds the wait for it. */
        while (rc == SBX_OK && !first) {
                rc = sbx_watch_next(w, c->call_timeout_ms ? (int64_t)c->call_timeout_ms : -1,
                                    &first);
                if (rc == SBX_OK && !first)
                        rc = transport_fail(c, SBX_UNAVAILABLE, ETIMEDOUT,
                                            "sbxd did not set the watch up within %llu ms (the "
                                            "call timeout)",
                                            (unsigned long long)c->call_timeout_ms);
        }
        if (rc != SBX_OK) {
                sbx_watch_close(w);
                return rc;
        }
        sbx_file_events_free(first);
        w->wf.sandbox_id = w->wf.path = NULL; /* the caller's, needed no more */
        *ret = w;
        return SBX_OK;
}

enum sbx_code sbx_watch_next(sbx_watch *w, int64_t timeout_ms, struct sbx_file_events **ret) {
        Sbx__V1__Response *resp = NULL;
        enum sbx_code rc;

        if (!w || !ret)
                return SBX_INVALID_ARGUMENT;
        *ret = NULL;
        if (w->ended)
                return transport_fail(w->c, SBX_FAILED_PRECONDITION, EPIPE,
                                      "the watch has ended; close it (sbx_watch_close)");
        rc = transport_stream_next(w->c, &w->k, w->id, timeout_ms, &resp);
        if (rc != SBX_OK) {
                w->ended = true;
                w->live = false; /* ended by a status, or its connection is gone */
                w->c->streaming = false;
        }
        if (rc != SBX_OK || !resp)
                return rc;
        *ret = events_from_proto(resp->file_events);
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!*ret) {
                w->ended = true;
                return transport_fail_oom(w->c);
        }
        return SBX_OK;
}

void sbx_watch_close(sbx_watch *w) {
        if (!w)
                return;
        if (w->live) {
                w->c->streaming = false;
                transport_stream_close(w->c);
        }
        free(w);
}
