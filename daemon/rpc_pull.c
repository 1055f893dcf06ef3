/* rpc_pull.c: PullImage; see rpc_images.h.
 *
 * Owns struct rpc_pulls (d->pulls): the pulls under way, each with the clients waiting
 * for it (struct waiter, an open call of its connection). A struct pull is shared by the
 * loop and one worker thread: the worker reads what the loop set before uv_queue_work
 * (the source, the credentials, the fd), writes its result before it returns, and hands
 * progress over under p->mu; cancel is the only field the loop writes while the worker
 * runs. */
#include "rpc_images.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caller.h"
#include "config.h"
#include "conn.h"
#include "hostpath.h"
#include "imageimport.h"
#include "images.h"
#include "log.h"
#include "registry.h"
#include "rpc.h"
#include "rpc_common.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "sbxtab.h"

#define DS DIGEST_STR_BYTES

struct pull;

/* One client waiting for a pull's result. */
struct waiter {
        struct conn_call cc;
        uint64_t rid;
        int progress; /* wants ImageProgress */
        struct pull *pull;
        struct waiter *next;
};

/* What the worker said last of one layer. */
struct layer_state {
        char digest[DS];
        uint64_t done, total;
        int reused;
        int dirty; /* not sent yet */
};

struct pull {
        uv_work_t work;
        uv_async_t async; /* the worker's progress, to the loop */
        struct rpc_pulls *svc;
        struct pull *next;
        uid_t uid;
        char *key; /* the store ref "UID/NAME": pulls of one key join */
        char *name;
        struct images_source src;
        int src_fd; /* a local source, opened with the caller's rights; -1 */
        struct imageimport_reader reader;
        gid_t *groups;
        char *username, *password, *token;
        volatile int cancel; /* nobody waits any more (registry.h polls it) */
        pthread_mutex_t mu;
        struct layer_state *layers; /* under mu */
        unsigned nlayers;
        int unpacking, phase_dirty; /* under mu */
        char (*pinned)[DS];         /* the worker's: layers the registry skipped, pinned */
        unsigned npinned;
        /* The result, written by the worker before it returns. */
        int r;
        char err[512];
        char manifest[DS];
        uint64_t downloaded;
        struct waiter *waiters;
};

struct rpc_pulls {
        struct sbxd *d;
        struct pull *pulls; /* under way: a new pull of the same key joins one */
        unsigned running;   /* of them */
        unsigned closing;   /* ended, their async handle not closed yet (still hold svc) */
};

/* ---- the pulls' life --------------------------------------------------------------- */

static struct rpc_pulls *service(struct sbxd *d) {
        if (!d->pulls) {
                d->pulls = calloc(1, sizeof(*d->pulls));
                if (d->pulls)
                        d->pulls->d = d;
        }
        return d->pulls;
}

/* Frees svc once no pull is under way or closing. */
static void service_maybe_free(struct rpc_pulls *svc) {
        if (svc->pulls || svc->closing)
                return;
        svc->d->pulls = NULL;
        free(svc);
}

/* ---- answers ----------------------------------------------------------------------- */

/* The wire code of a pull's or an import's failure (registry.h, imageimport.h). */
static Sbx__V1__Code pull_code(int r) {
        switch (-r) {
        case EHOSTUNREACH:
        case ETIMEDOUT:
        case ECONNREFUSED:
        case EPROTO:
        case ECANCELED:
                return SBX__V1__CODE__UNAVAILABLE;
        case EFBIG:
                return SBX__V1__CODE__RESOURCE_EXHAUSTED;
        case ENOEXEC:
        case EPROTONOSUPPORT:
        case EBADMSG:
                return SBX__V1__CODE__INVALID_ARGUMENT;
        default:
                return rpc_code_from_errno(r);
        }
}

/* ---- pulls: the worker's side ------------------------------------------------------ */

static void on_progress(void *opaque, const struct registry_progress *rp) {
        struct pull *p = opaque;
        struct layer_state *l;

        pthread_mutex_lock(&p->mu);
        if (!p->layers && rp->count > 0 && rp->count <= REGISTRY_MAX_LAYERS) {
                p->layers = calloc(rp->count, sizeof(*p->layers));
                p->nlayers = p->layers ? rp->count : 0;
        }
        if (rp->index < p->nlayers) {
                l = &p->layers[rp->index];
                snprintf(l->digest, sizeof(l->digest), "%s", rp->digest ? rp->digest : "");
                l->done = rp->done_bytes;
                l->total = rp->total_bytes;
                l->reused = rp->reused;
                l->dirty = 1;
        }
        pthread_mutex_unlock(&p->mu);
        uv_async_send(&p->async);
}

/* Says (to the loop) that the layers are being unpacked now. */
static void set_unpacking(struct pull *p) {
        pthread_mutex_lock(&p->mu);
        p->unpacking = p->phase_dirty = 1;
        pthread_mutex_unlock(&p->mu);
        uv_async_send(&p->async);
}

/* registry.h's have_layer: a layer blob the store unpacked before is not downloaded; its
 * layer is pinned until the import has named it (pull_registry unpins). Worker thread. */
static int have_layer(void *opaque, const char *digest) {
        struct pull *p = opaque;
        char diff_id[DS];
        int r;

        if (!p->pinned && !(p->pinned = calloc(REGISTRY_MAX_LAYERS, DS)))
                return -ENOMEM;
        if (p->npinned >= REGISTRY_MAX_LAYERS)
                return 0;
        r = imagestore_blob_layer(p->svc->d->images, digest, 1, diff_id);
        if (r == 1)
                memcpy(p->pinned[p->npinned++], diff_id, DS);
        return r;
}

/* A registry pull into a scratch directory of the store, then its import from there. */
static int pull_registry(struct pull *p, struct imagestore *s, uint64_t max_bytes) {
        struct registry_pull rq = {
                .ref = &p->src.ref,
                .username = p->username,
                .password = p->password,
                .token = p->token,
                .max_total_bytes = max_bytes,
                .cancel = &p->cancel,
                .progress = on_progress,
                .progress_opaque = p,
                .have_layer = have_layer,
                .have_layer_opaque = p,
        };
        struct registry_result res;
        char name[NAME_MAX + 1], dest[64];
        int fd, r = imagestore_scratch(s, &fd, name);

        if (r < 0) {
                snprintf(p->err, sizeof(p->err), "image store: %s", strerror(-r));
                return r;
        }
        snprintf(dest, sizeof(dest), "/proc/self/fd/%d", fd);
        rq.dest_dir = dest;
        r = registry_pull(&rq, &res, p->err, sizeof(p->err));
        if (r == 0) {
                p->downloaded = res.downloaded_bytes;
                set_unpacking(p);
                r = imageimport_oci(s, fd, p->src.ref.tag[0] ? p->src.ref.tag : NULL, p->key,
                                    p->manifest, p->err, sizeof(p->err));
        }
        close(fd);
        imagestore_scratch_remove(s, name);
        while (p->npinned > 0)
                imagestore_unpin(s, p->pinned[--p->npinned]);
        free(p->pinned);
        p->pinned = NULL;
        return r;
}

static void pull_work(uv_work_t *w) {
        struct pull *p = w->data;
        struct sbxd *d = p->svc->d;
        struct imagestore *s = d->images;
        const char *tag = p->src.tag;

        p->err[0] = '\0';
        switch (p->src.kind) {
        case IMAGES_REGISTRY:
                p->r = pull_registry(p, s, d->cfg->max_image_bytes);
                break;
        case IMAGES_OCI:
                set_unpacking(p);
                p->r = imageimport_oci_as(s, p->src_fd, &p->reader, tag, p->key, p->manifest,
                                          p->err, sizeof(p->err));
                break;
        case IMAGES_OCI_ARCHIVE:
                set_unpacking(p);
                p->r = imageimport_oci_archive(s, p->src_fd, tag, p->key, p->manifest, p->err,
                                               sizeof(p->err));
                break;
        case IMAGES_DOCKER_ARCHIVE:
                set_unpacking(p);
                p->r = imageimport_docker_archive(s, p->src_fd, tag, p->key, p->manifest, p->err,
                                                  sizeof(p->err));
                break;
        }
        if (p->src_fd >= 0)
                close(p->src_fd);
        p->src_fd = -1;
}

/* ---- pulls: the loop's side -------------------------------------------------------- */

static void send_progress(struct waiter *wt, const struct layer_state *l, unsigned index,
                          unsigned count, const char *phase) {
        Sbx__V1__Response resp;
        Sbx__V1__ImageProgress ip = SBX__V1__IMAGE_PROGRESS__INIT;
        struct conn *c = wt->cc.conn;

        if (!c || conn_congested(c))
                return; /* progress is dropped, never queued */
        if (l) {
                ip.digest = (char *)(uintptr_t)l->digest;
                ip.has_index = ip.has_count = ip.has_done_bytes = ip.has_total_bytes = 1;
                ip.index = index;
                ip.count = count;
                ip.done_bytes = l->done;
                ip.total_bytes = l->total;
                ip.has_reused = 1;
                ip.reused = l->reused;
        }
        ip.phase = (char *)(uintptr_t)phase;
        rpc_response_init(&resp, wt->rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_IMAGE_PROGRESS;
        resp.image_progress = &ip;
        conn_send(c, &resp);
}

/* Sends the layers of p that changed (all of them: every one known, to a new waiter
 * only) to the waiters that asked for progress. */
static void flush_progress(struct pull *p, struct waiter *only) {
        struct layer_state *snap = NULL;
        unsigned i, n;
        int unpacking, phase;
        struct waiter *wt;

        pthread_mutex_lock(&p->mu);
        n = p->nlayers;
        if (n)
                snap = malloc(n * sizeof(*snap));
        for (i = 0; snap && i < n; i++) {
                snap[i] = p->layers[i];
                if (only)
                        snap[i].dirty = snap[i].digest[0] != '\0';
                else
                        p->layers[i].dirty = 0;
        }
        unpacking = p->unpacking;
        phase = only ? unpacking : p->phase_dirty;
        if (!only)
                p->phase_dirty = 0;
        pthread_mutex_unlock(&p->mu);
        for (wt = only ? only : p->waiters; wt; wt = only ? NULL : wt->next) {
                if (!wt->progress)
                        continue;
                for (i = 0; snap && i < n; i++)
                        if (snap[i].dirty)
                                send_progress(wt, &snap[i], i, n, "download");
                if (phase)
                        send_progress(wt, NULL, 0, 0, "unpack");
        }
        free(snap);
}

static void on_async(uv_async_t *a) {
        flush_progress(a->data, NULL);
}

static void pull_free(uv_handle_t *h) {
        struct pull *p = h->data;
        struct rpc_pulls *svc = p->svc;

        images_source_clear(&p->src);
        if (p->password)
                explicit_bzero(p->password, strlen(p->password));
        if (p->token)
                explicit_bzero(p->token, strlen(p->token));
        free(p->username);
        free(p->password);
        free(p->token);
        free(p->groups);
        free(p->layers);
        free(p->key);
        free(p->name);
        pthread_mutex_destroy(&p->mu);
        free(p);
        svc->closing--;
        service_maybe_free(svc);
}

static void waiter_end(struct waiter *wt) {
        conn_call_end(&wt->cc);
        free(wt);
}

/* The store brought within its bound, never removing the image just pulled. */
static void fit_cache(struct rpc_pulls *svc, const char *manifest) {
        int n = images_fit(svc->d, manifest);

        if (n > 0)
                log_info("image store over --image-cache-size or its bound of %" PRIu64
                         " entries: %d least recently used images removed",
                         images_cache_entries(svc->d->cfg), n);
}

/* Answers every waiter of p with its result. */
static void answer_waiters(struct pull *p) {
        struct sbxd *d = p->svc->d;
        struct imagestore_image img;
        int r = p->r;
        struct waiter *wt;

        if (r == 0)
                r = imagestore_find(d->images, p->manifest, &img);
        if (r == -EFBIG)
                snprintf(p->err + strlen(p->err), sizeof(p->err) - strlen(p->err),
                         " (sbxd --max-image-size is %" PRIu64 " bytes)", d->cfg->max_image_bytes);
        if (r == -EDQUOT)
                snprintf(p->err + strlen(p->err), sizeof(p->err) - strlen(p->err),
                         " (sbxd --max-image-entries is %u)", (unsigned)d->cfg->max_image_entries);
        while ((wt = p->waiters)) {
                p->waiters = wt->next;
                if (wt->cc.conn) {
                        if (r == 0)
                                rpc_images_answer(wt->cc.conn, wt->rid, &img, p->uid, NULL,
                                                  p->downloaded);
                        else
                                conn_send_status(wt->cc.conn, wt->rid, pull_code(r), "%s",
                                                 p->err[0] ? p->err : strerror(-r));
                }
                waiter_end(wt);
        }
        if (r == 0)
                imagestore_image_free(&img);
}

static void pull_done(uv_work_t *w, int status) {
        struct pull *p = w->data;
        struct rpc_pulls *svc = p->svc;
        struct pull **pp;

        for (pp = &svc->pulls; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        svc->running--;
        svc->closing++;
        if (status == UV_ECANCELED && p->r == 0) {
                p->r = -ECANCELED;
                snprintf(p->err, sizeof(p->err), "the pull of %s was cancelled", p->name);
        }
        if (p->r == 0)
                fit_cache(svc, p->manifest);
        else
                images_collect(svc->d); /* what the failed import left (imageimport.c) */
        if (p->r == 0) {
                log_info("uid=%u image %s pulled: %s", (unsigned)p->uid, p->name, p->manifest);
                sbxtab_images_changed(svc->d->sandboxes); /* a --warm-image's, perhaps */
        } else {
                log_info("uid=%u image %s not pulled: %s", (unsigned)p->uid, p->name, p->err);
        }
        flush_progress(p, NULL);
        answer_waiters(p);
        uv_close((uv_handle_t *)&p->async, pull_free);
}

/* The waiter's connection closes: it drops its interest; a pull nobody waits for any
 * more is cancelled (a registry pull stops within its next transfer step; an import
 * from a local source goes on to its end, its result kept). */
static void waiter_closing(struct conn_call *cc) {
        struct waiter *wt = (struct waiter *)((char *)cc - offsetof(struct waiter, cc));
        struct pull *p = wt->pull;
        struct waiter **pp;

        for (pp = &p->waiters; *pp; pp = &(*pp)->next)
                if (*pp == wt) {
                        *pp = wt->next;
                        break;
                }
        waiter_end(wt);
        if (!p->waiters)
                p->cancel = 1;
}

/* Adds a waiter for rid of c to p. 0 or -ENOMEM. */
static int waiter_add(struct pull *p, struct conn *c, uint64_t rid, int progress) {
        struct waiter *wt = calloc(1, sizeof(*wt));

        if (!wt)
                return -ENOMEM;
        wt->rid = rid;
        wt->progress = progress;
        wt->pull = p;
        wt->next = p->waiters;
        p->waiters = wt;
        conn_call_begin(c, &wt->cc, waiter_closing, NULL);
        return 0;
}

/* ---- PullImage --------------------------------------------------------------------- */

/* Checks the request's fields; answers and returns -1 when they are bad. */
static int pull_check(struct conn *c, uint64_t rid, const Sbx__V1__PullImage *q) {
        const Sbx__V1__RegistryAuth *a = q->auth;
        const char *why = NULL;

        if (!q->source || !q->source[0])
                why = "PullImage.source is required (a reference such as python:3.12-slim, or "
                      "oci:DIR, oci-archive:FILE, docker-archive:FILE)";
        else if (strlen(q->source) >= SBX_PATH_MAX_BYTES)
                why = "PullImage.source is longer than the most a path may be";
        else if (a && ((a->username && strlen(a->username) > SBX_IMAGE_CREDENTIAL_MAX_BYTES) ||
                       (a->password && strlen(a->password) > SBX_IMAGE_CREDENTIAL_MAX_BYTES) ||
                       (a->token && strlen(a->token) > SBX_IMAGE_CREDENTIAL_MAX_BYTES)))
                why = "a credential of PullImage.auth is longer than 8192 bytes";
        else if (a && (!a->username != !a->password))
                why = "PullImage.auth needs both a username and a password";
        else if (a && a->token && a->username)
                why = "PullImage.auth has a token and a username: give one or the other";
        else if (a && a->token && !a->token[0])
                why = "PullImage.auth.token is empty";
        if (!why)
                return 0;
        conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT, "%s", why);
        return -1;
}

static struct pull *pull_find(struct rpc_pulls *svc, const char *key) {
        struct pull *p;

        for (p = svc->pulls; p; p = p->next)
                if (strcmp(p->key, key) == 0)
                        return p;
        return NULL;
}

/* Refuses a new pull past the bounds (answering), -1; or 0. */
static int pull_admit(struct conn *c, uint64_t rid, struct rpc_pulls *svc, uid_t uid) {
        unsigned mine = 0;
        struct pull *p;

        for (p = svc->pulls; p; p = p->next)
                mine += p->uid == uid;
        if (mine >= SBX_IMAGE_MAX_PULLS_PER_UID) {
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "uid %u already has %u image pulls under way, the most one user "
                                 "may run at once (%u); retry when one has finished",
                                 (unsigned)uid, mine, SBX_IMAGE_MAX_PULLS_PER_UID);
                return -1;
        }
        if (svc->running >= SBX_IMAGE_MAX_PULLS) {
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "sbxd already runs %u image pulls, the most it runs at once "
                                 "(%u); retry when one has finished",
                                 svc->running, SBX_IMAGE_MAX_PULLS);
                return -1;
        }
        return 0;
}

/* Frees p, which never reached the thread pool (its mutex and async not made). */
static void pull_discard(struct pull *p) {
        if (p->src_fd >= 0)
                close(p->src_fd);
        images_source_clear(&p->src);
        free(p->username);
        free(p->password);
        free(p->token);
        free(p->groups);
        free(p->key);
        free(p->name);
        free(p);
}

/* A new pull of q for the caller k, its source parsed into src (taken), a local source
 * opened with k's rights. NULL after answering why not. */
static struct pull *pull_new(struct conn *c, uint64_t rid, const Sbx__V1__PullImage *q,
                             const struct caller *k, const char *key, struct images_source *src) {
        const Sbx__V1__RegistryAuth *a = q->auth;
        struct pull *p = calloc(1, sizeof(*p));
        char err[512];
        int r;

        if (!p) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                return NULL;
        }
        p->src = *src;
        memset(src, 0, sizeof(*src));
        p->src_fd = -1;
        p->uid = k->uid;
        p->key = strdup(key);
        p->name = strdup(q->source);
        p->groups = k->n_groups ? malloc(k->n_groups * sizeof(gid_t)) : NULL;
        if (p->groups)
                memcpy(p->groups, k->groups, k->n_groups * sizeof(gid_t));
        p->reader = (struct imageimport_reader){k->uid, k->gid, p->groups, k->n_groups};
        if (a && a->username) {
                p->username = strdup(a->username);
                p->password = strdup(a->password);
        }
        if (a && a->token)
                p->token = strdup(a->token);
        if (!p->key || !p->name || (k->n_groups && !p->groups) ||
            (a && a->username && (!p->username || !p->password)) || (a && a->token && !p->token)) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                pull_discard(p);
                return NULL;
        }
        if (p->src.kind != IMAGES_REGISTRY) {
                r = hostpath_open_read(conn_daemon(c), k, "image source", p->src.path,
                                       p->src.kind == IMAGES_OCI, &p->src_fd, err, sizeof(err));
                if (r < 0) {
                        rpc_send_errno(c, rid, r, err);
                        pull_discard(p);
                        return NULL;
                }
        }
        if (pthread_mutex_init(&p->mu, NULL) != 0) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                pull_discard(p);
                return NULL;
        }
        return p;
}

/* Starts p on the thread pool with its first waiter (rid of c), or answers why not. */
static void pull_start(struct conn *c, uint64_t rid, struct rpc_pulls *svc, struct pull *p,
                       int progress) {
        struct sbxd *d = svc->d;

        p->svc = svc;
        p->async.data = p;
        p->work.data = p;
        if (uv_async_init(d->loop, &p->async, on_async) < 0) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                pthread_mutex_destroy(&p->mu);
                pull_discard(p);
                return;
        }
        p->next = svc->pulls;
        svc->pulls = p;
        svc->running++;
        if (waiter_add(p, c, rid, progress) < 0) {
                p->r = -ENOMEM;
                snprintf(p->err, sizeof(p->err), "daemon out of memory");
                rpc_send_errno(c, rid, -ENOMEM, p->err);
                pull_done(&p->work, 0);
        } else if (uv_queue_work(d->loop, &p->work, pull_work, pull_done) < 0) {
                p->r = -ENOMEM;
                snprintf(p->err, sizeof(p->err), "cannot start the pull on the thread pool");
                pull_done(&p->work, 0);
        }
}

void rpc_images_pull(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__PullImage *q = req->pull_image;
        struct sbxd *d = conn_daemon(c);
        struct rpc_pulls *svc;
        struct images_source src;
        struct caller k;
        struct pull *p;
        char key[SBX_PATH_MAX_BYTES + 32], err[512];
        uint64_t rid = req->request_id;
        int progress = q->has_progress && q->progress;

        if (pull_check(c, rid, q) < 0)
                return;
        rpc_caller_of(c, &k);
        if (!d->images || d->shutting_down) {
                conn_send_status(c, rid, SBX__V1__CODE__UNAVAILABLE, "%s",
                                 d->images ? "sbxd is shutting down"
                                           : "this sbxd has no image store");
                return;
        }
        if (images_source_parse(q->source, &src, err, sizeof(err)) < 0 ||
            images_ref(k.uid, q->source, key, sizeof(key), err, sizeof(err)) < 0) {
                images_source_clear(&src);
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT, "%s", err);
                return;
        }
        svc = service(d);
        if (!svc) {
                images_source_clear(&src);
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                return;
        }
        p = pull_find(svc, key);
        if (p) { /* the same image for the same user: wait for that one's result */
                images_source_clear(&src);
                if (waiter_add(p, c, rid, progress) < 0)
                        rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                else
                        flush_progress(p, p->waiters);
                return;
        }
        if (pull_admit(c, rid, svc, k.uid) < 0 || !(p = pull_new(c, rid, q, &k, key, &src))) {
                images_source_clear(&src);
                service_maybe_free(svc);
                return;
        }
        pull_start(c, rid, svc, p, progress);
        service_maybe_free(svc);
}
