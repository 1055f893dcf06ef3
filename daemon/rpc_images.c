/* rpc_images.c: the image requests; see rpc_images.h.
 *
 * Owns struct image_service (d->image_service): the pulls under way, each with the
 * clients waiting for it (struct waiter, an open call of its connection), and the one
 * collection job. A struct pull is shared by the loop and one worker thread: the worker
 * reads what the loop set before uv_queue_work (the source, the credentials, the fd),
 * writes its result before it returns, and hands progress over under p->mu; cancel is
 * the only field the loop writes while the worker runs. */
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
        struct image_service *svc;
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
        /* The result, written by the worker before it returns. */
        int r;
        char err[512];
        char manifest[DS];
        uint64_t downloaded;
        struct waiter *waiters;
};

struct image_service {
        struct sbxd *d;
        struct pull *pulls;
        unsigned running;
        uv_work_t collect;
        int collecting, collect_again;
};

/* ---- the service's life ------------------------------------------------------------ */

static struct image_service *service(struct sbxd *d) {
        if (!d->image_service) {
                d->image_service = calloc(1, sizeof(*d->image_service));
                if (d->image_service)
                        d->image_service->d = d;
        }
        return d->image_service;
}

/* Frees svc once nothing is under way. */
static void service_maybe_free(struct image_service *svc) {
        if (svc->pulls || svc->collecting)
                return;
        svc->d->image_service = NULL;
        free(svc);
}

static void collect_work(uv_work_t *w) {
        struct image_service *svc = w->data;
        (void)imagestore_collect(svc->d->images);
}

static void collect_start(struct image_service *svc);

static void collect_done(uv_work_t *w, int status) {
        struct image_service *svc = w->data;

        svc->collecting = 0;
        if (svc->collect_again)
                collect_start(svc);
        else
                service_maybe_free(svc);
}

/* Deletes what removals left in the store's trash, off the loop: one job at a time, one
 * more after it when asked meanwhile. */
static void collect_start(struct image_service *svc) {
        if (svc->collecting) {
                svc->collect_again = 1;
                return;
        }
        svc->collect_again = 0;
        svc->collect.data = svc;
        if (uv_queue_work(svc->d->loop, &svc->collect, collect_work, collect_done) == 0)
                svc->collecting = 1;
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

/* 1 when ref is one of uid's ("UID/..."). */
static int ref_of(const char *ref, uid_t uid) {
        char prefix[16];
        size_t n = (size_t)snprintf(prefix, sizeof(prefix), "%u/", (unsigned)uid);

        return strncmp(ref, prefix, n) == 0;
}

/* An ImageInfo of img for uid (names: uid's refs only), pointing into img and names. */
static void info_of(const struct imagestore_image *img, uid_t uid, char **names, char **layers,
                    Sbx__V1__ImageInfo *ret) {
        size_t i, n = 0;

        sbx__v1__image_info__init(ret);
        for (i = 0; i < img->nrefs; i++)
                if (ref_of(img->refs[i], uid))
                        names[n++] = (char *)(uintptr_t)images_ref_name(img, i);
        for (i = 0; i < img->nlayers; i++)
                layers[i] = (char *)(uintptr_t)img->layers[i];
        ret->names = names;
        ret->n_names = n;
        ret->digest = (char *)(uintptr_t)img->manifest;
        ret->has_size_bytes = ret->has_data_bytes = ret->has_sandboxes = 1;
        ret->size_bytes = img->size_bytes;
        ret->data_bytes = img->data_bytes;
        ret->sandboxes = img->holds;
        ret->has_created_unix_ms = ret->has_last_used_unix_ms = 1;
        ret->created_unix_ms = img->created_ms;
        ret->last_used_unix_ms = img->last_used_ms;
        ret->layers = layers;
        ret->n_layers = img->nlayers;
}

/* Sends info as the answer to rid of c (an ImageInfo body). */
static void send_info(struct conn *c, uint64_t rid, Sbx__V1__ImageInfo *info) {
        Sbx__V1__Response resp;

        rpc_response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_IMAGE;
        resp.image = info;
        conn_send(c, &resp);
}

/* Answers rid with the image img for uid, its config too when cfg is given. */
static void answer_image(struct conn *c, uint64_t rid, const struct imagestore_image *img,
                         uid_t uid, const struct imageconfig *cfg, uint64_t downloaded) {
        char **names = calloc(img->nrefs + 1, sizeof(char *));
        char **layers = calloc(img->nlayers + 1, sizeof(char *));
        Sbx__V1__ImageInfo info;
        Sbx__V1__ImageConfig ic = SBX__V1__IMAGE_CONFIG__INIT;

        if (!names || !layers) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                goto out;
        }
        info_of(img, uid, names, layers, &info);
        if (cfg) {
                ic.env = cfg->env;
                ic.n_env = cfg->nenv;
                ic.entrypoint = cfg->entrypoint;
                ic.n_entrypoint = cfg->nentrypoint;
                ic.cmd = cfg->cmd;
                ic.n_cmd = cfg->ncmd;
                ic.working_dir = cfg->working_dir;
                ic.user = cfg->user;
                ic.os = cfg->os;
                ic.architecture = cfg->arch;
                ic.variant = cfg->variant;
                info.config = &ic;
        }
        if (downloaded) {
                info.has_downloaded_bytes = 1;
                info.downloaded_bytes = downloaded;
        }
        send_info(c, rid, &info);
out:
        free(names);
        free(layers);
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
        struct image_service *svc = p->svc;

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
        service_maybe_free(svc);
}

static void waiter_end(struct waiter *wt) {
        conn_call_end(&wt->cc);
        free(wt);
}

/* The pulled image held while the store is brought within its bound, so that it is
 * never what makes room. */
static void fit_cache(struct image_service *svc, const char *manifest) {
        struct sbxd *d = svc->d;
        int held = imagestore_hold(d->images, manifest) == 0;
        int n = imagestore_fit(d->images, d->cfg->image_cache_bytes);

        if (held)
                (void)imagestore_release(d->images, manifest);
        if (n > 0) {
                log_info("image store over --image-cache-size: %d least recently used images "
                         "removed",
                         n);
                collect_start(svc);
        }
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
        while ((wt = p->waiters)) {
                p->waiters = wt->next;
                if (wt->cc.conn) {
                        if (r == 0)
                                answer_image(wt->cc.conn, wt->rid, &img, p->uid, NULL,
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
        struct image_service *svc = p->svc;
        struct pull **pp;

        for (pp = &svc->pulls; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        svc->running--;
        if (status == UV_ECANCELED && p->r == 0) {
                p->r = -ECANCELED;
                snprintf(p->err, sizeof(p->err), "the pull of %s was cancelled", p->name);
        }
        if (p->r == 0)
                fit_cache(svc, p->manifest);
        if (p->r == 0)
                log_info("uid=%u image %s pulled: %s", (unsigned)p->uid, p->name, p->manifest);
        else
                log_info("uid=%u image %s not pulled: %s", (unsigned)p->uid, p->name, p->err);
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

static struct pull *pull_find(struct image_service *svc, const char *key) {
        struct pull *p;

        for (p = svc->pulls; p; p = p->next)
                if (strcmp(p->key, key) == 0)
                        return p;
        return NULL;
}

/* Refuses a new pull past the bounds (answering), -1; or 0. */
static int pull_admit(struct conn *c, uint64_t rid, struct image_service *svc, uid_t uid) {
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
static void pull_start(struct conn *c, uint64_t rid, struct image_service *svc, struct pull *p,
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
        struct image_service *svc;
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

/* ---- ListImages, InspectImage ------------------------------------------------------ */

void rpc_images_list(struct conn *c, const Sbx__V1__Request *req) {
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image *all = NULL;
        Sbx__V1__ImageInfo *infos = NULL, **ptrs = NULL;
        Sbx__V1__ListImagesReply reply = SBX__V1__LIST_IMAGES_REPLY__INIT;
        Sbx__V1__Response resp;
        char ***names = NULL, ***layers = NULL;
        struct conn_peer peer;
        int n = 0, i;
        size_t m = 0;

        conn_peer(c, &peer);
        if (d->images)
                n = imagestore_list(d->images, &all);
        if (n < 0) {
                rpc_send_errno(c, req->request_id, n, "cannot list the image store");
                return;
        }
        infos = calloc((size_t)n + 1, sizeof(*infos));
        ptrs = calloc((size_t)n + 1, sizeof(*ptrs));
        names = calloc((size_t)n + 1, sizeof(*names));
        layers = calloc((size_t)n + 1, sizeof(*layers));
        if (!infos || !ptrs || !names || !layers)
                goto oom;
        for (i = 0; i < n; i++) {
                if (!images_owns(&all[i], peer.uid))
                        continue;
                names[m] = calloc(all[i].nrefs + 1, sizeof(char *));
                layers[m] = calloc(all[i].nlayers + 1, sizeof(char *));
                if (!names[m] || !layers[m]) {
                        m++;
                        goto oom;
                }
                info_of(&all[i], peer.uid, names[m], layers[m], &infos[m]);
                ptrs[m] = &infos[m];
                m++;
        }
        reply.images = ptrs;
        reply.n_images = m;
        rpc_response_init(&resp, req->request_id);
        resp.body_case = SBX__V1__RESPONSE__BODY_LIST_IMAGES;
        resp.list_images = &reply;
        conn_send(c, &resp);
        goto out;
oom:
        rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
out:
        for (i = 0; names && layers && (size_t)i < m; i++) {
                free(names[i]);
                free(layers[i]);
        }
        free(names);
        free(layers);
        free(ptrs);
        free(infos);
        if (all)
                imagestore_list_free(all, (size_t)n);
}

/* Finds the image name names for the caller of c, answering (-1) when it cannot. */
static int find_for(struct conn *c, uint64_t rid, const char *name, const char *field,
                    struct imagestore_image *ret) {
        struct sbxd *d = conn_daemon(c);
        struct conn_peer peer;
        char err[512];
        int r;

        if (!name || !name[0] || strlen(name) >= SBX_PATH_MAX_BYTES) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "%s is required (an image name as `sbx image ls` shows it, or "
                                 "its digest), at most %u bytes",
                                 field, SBX_PATH_MAX_BYTES - 1);
                return -1;
        }
        conn_peer(c, &peer);
        r = images_find(d, peer.uid, name, ret, err, sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, rid, r, err);
                return -1;
        }
        return 0;
}

void rpc_images_inspect(struct conn *c, const Sbx__V1__Request *req) {
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image img;
        struct imageconfig cfg = {0};
        struct conn_peer peer;
        int r;

        if (find_for(c, req->request_id, req->inspect_image->name, "InspectImage.name", &img) < 0)
                return;
        conn_peer(c, &peer);
        r = imagestore_inspect(d->images, img.manifest, &cfg);
        if (r < 0)
                rpc_send_errno(c, req->request_id, r == -EINVAL ? -EIO : r,
                               "cannot read the image's config from the store");
        else
                answer_image(c, req->request_id, &img, peer.uid, &cfg, 0);
        imageconfig_free(&cfg);
        imagestore_image_free(&img);
}

/* ---- RemoveImage, PruneImages ------------------------------------------------------ */

/* Removes uid's refs of img (only the ref key when img has it and key is not NULL) into
 * names (img->nrefs entries, pointing into img): their count, or -EBUSY (err says
 * which image and why) when the image is in use and was uid's last name for it. */
static int remove_refs(struct sbxd *d, const struct imagestore_image *img, uid_t uid,
                       const char *key, const char **names, char *err, size_t errlen) {
        size_t i, n = 0;
        int only_key = 0, r;

        for (i = 0; key && i < img->nrefs; i++)
                only_key |= strcmp(img->refs[i], key) == 0;
        for (i = 0; i < img->nrefs; i++) {
                char e[256];
                if (only_key ? strcmp(img->refs[i], key) != 0 : !ref_of(img->refs[i], uid))
                        continue;
                r = imagestore_remove(d->images, img->refs[i], e, sizeof(e));
                if (r == -EBUSY) {
                        snprintf(err, errlen,
                                 "image %s (%s) is in use by %u sandbox%s; terminate %s first",
                                 images_ref_name(img, i), img->manifest, img->holds,
                                 img->holds == 1 ? "" : "es", img->holds == 1 ? "it" : "them");
                        return -EBUSY;
                }
                if (r == 0)
                        names[n++] = images_ref_name(img, i);
        }
        return (int)n;
}

/* Answers rid with the names removed and the bytes freed. */
static void send_removed(struct conn *c, uint64_t rid, const char **names, size_t n,
                         uint64_t freed) {
        Sbx__V1__RemovedImages ri = SBX__V1__REMOVED_IMAGES__INIT;
        Sbx__V1__Response resp;

        ri.names = (char **)(uintptr_t)names;
        ri.n_names = n;
        ri.has_freed_bytes = 1;
        ri.freed_bytes = freed;
        rpc_response_init(&resp, rid);
        resp.body_case = SBX__V1__RESPONSE__BODY_REMOVED_IMAGES;
        resp.removed_images = &ri;
        conn_send(c, &resp);
}

/* After removals: the trash is emptied off the loop. */
static void removed(struct sbxd *d) {
        struct image_service *svc = service(d);

        if (svc) {
                collect_start(svc);
                service_maybe_free(svc);
        }
}

void rpc_images_remove(struct conn *c, const Sbx__V1__Request *req) {
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image img;
        struct conn_peer peer;
        const char *name = req->remove_image->name, **names;
        char key[SBX_PATH_MAX_BYTES + 32], err[512];
        uint64_t before;
        int n;

        if (find_for(c, req->request_id, name, "RemoveImage.name", &img) < 0)
                return;
        conn_peer(c, &peer);
        names = calloc(img.nrefs + 1, sizeof(*names));
        if (!names) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                imagestore_image_free(&img);
                return;
        }
        before = imagestore_usage(d->images);
        if (images_ref(peer.uid, name, key, sizeof(key), err, sizeof(err)) < 0)
                key[0] = '\0'; /* a digest: every name of the caller's for it */
        n = remove_refs(d, &img, peer.uid, key[0] ? key : NULL, names, err, sizeof(err));
        if (n == -EBUSY)
                conn_send_status(c, req->request_id, SBX__V1__CODE__FAILED_PRECONDITION, "%s", err);
        else
                send_removed(c, req->request_id, names, (size_t)n,
                             before - imagestore_usage(d->images));
        if (n > 0)
                removed(d);
        free(names);
        imagestore_image_free(&img);
}

void rpc_images_prune(struct conn *c, const Sbx__V1__Request *req) {
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image *all = NULL;
        struct conn_peer peer;
        const char **names = NULL;
        char err[512];
        size_t total = 0, m = 0;
        uint64_t before;
        int n = 0, i, r;

        conn_peer(c, &peer);
        if (d->images)
                n = imagestore_list(d->images, &all);
        if (n < 0) {
                rpc_send_errno(c, req->request_id, n, "cannot list the image store");
                return;
        }
        for (i = 0; i < n; i++)
                total += all[i].nrefs;
        names = calloc(total + 1, sizeof(*names));
        if (!names) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        before = d->images ? imagestore_usage(d->images) : 0;
        for (i = 0; i < n; i++) {
                if (all[i].holds || !images_owns(&all[i], peer.uid))
                        continue;
                r = remove_refs(d, &all[i], peer.uid, NULL, names + m, err, sizeof(err));
                if (r > 0)
                        m += (size_t)r; /* -EBUSY: a sandbox took it meanwhile; kept */
        }
        send_removed(c, req->request_id, names, m,
                     d->images ? before - imagestore_usage(d->images) : 0);
        if (m > 0)
                removed(d);
out:
        free(names);
        if (all)
                imagestore_list_free(all, (size_t)n);
}
