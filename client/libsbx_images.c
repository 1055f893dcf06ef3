/* libsbx_images.c: the image calls of libsbx (sbx.h, "Images"): each checks its
 * arguments, builds its request, exchanges it with the daemon (libsbx_transport.c) and
 * turns the reply into the result structs (libsbx_wire.c), as libsbx.c does for the
 * others. Never logs. */
#include "libsbx_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum sbx_code need(sbx_client *c, const void *ptr, const char *fn, const char *what) {
        if (ptr)
                return SBX_OK;
        if (!c)
                return SBX_INVALID_ARGUMENT;
        return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL, "%s() was given NULL for %s", fn,
                              what);
}

/* Sends k's request, which is answered with an ImageInfo, into *ret. */
static enum sbx_code image_call(sbx_client *c, struct exchange *k, struct sbx_image **ret) {
        Sbx__V1__Response *resp;
        struct sbx_image *img;
        enum sbx_code rc;
        bool ok;

        k->want = SBX__V1__RESPONSE__BODY_IMAGE;
        rc = transport_call(c, k, &resp);
        if (rc != SBX_OK)
                return rc;
        img = calloc(1, sizeof(*img));
        ok = img && resp->image && wire_image_from_proto(img, resp->image);

        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_image_free(img);
                return transport_fail_oom(c);
        }
        *ret = img;
        return SBX_OK;
}

enum sbx_code sbx_image_pull(sbx_client *c, const char *source, const struct sbx_pull_opts *o,
                             struct sbx_image **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__PullImage pi = SBX__V1__PULL_IMAGE__INIT;
        Sbx__V1__RegistryAuth ra = SBX__V1__REGISTRY_AUTH__INIT;
        struct exchange k = {0};
        enum sbx_code rc;

        if ((rc = need(c, ret, __func__, "ret")) != SBX_OK ||
            (rc = need(c, source, __func__, "source")) != SBX_OK)
                return rc;
        *ret = NULL;
        pi.source = unconst(source);
        if (o && o->auth) {
                ra.username = unconst(o->auth->username);
                ra.password = unconst(o->auth->password);
                ra.token = unconst(o->auth->token);
                pi.auth = &ra;
        }
        if (o && o->on_progress) {
                pi.has_progress = 1;
                pi.progress = 1;
                k.on_image_progress = o->on_progress;
                k.userdata = o->userdata;
        }
        req.body_case = SBX__V1__REQUEST__BODY_PULL_IMAGE;
        req.pull_image = &pi;
        k.req = &req;
        return image_call(c, &k, ret);
}

enum sbx_code sbx_image_inspect(sbx_client *c, const char *name, struct sbx_image **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__InspectImage ii = SBX__V1__INSPECT_IMAGE__INIT;
        struct exchange k = {0};
        enum sbx_code rc;

        if ((rc = need(c, ret, __func__, "ret")) != SBX_OK ||
            (rc = need(c, name, __func__, "name")) != SBX_OK)
                return rc;
        *ret = NULL;
        ii.name = unconst(name);
        req.body_case = SBX__V1__REQUEST__BODY_INSPECT_IMAGE;
        req.inspect_image = &ii;
        k.req = &req;
        return image_call(c, &k, ret);
}

enum sbx_code sbx_snapshot(sbx_client *c, const char *id, const char *name,
                           struct sbx_image **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__SnapshotSandbox ss = SBX__V1__SNAPSHOT_SANDBOX__INIT;
        struct exchange k = {0};
        enum sbx_code rc;

        if ((rc = need(c, ret, __func__, "ret")) != SBX_OK ||
            (rc = need(c, id, __func__, "id")) != SBX_OK)
                return rc;
        *ret = NULL;
        ss.sandbox_id = unconst(id);
        ss.name = unconst(name);
        req.body_case = SBX__V1__REQUEST__BODY_SNAPSHOT_SANDBOX;
        req.snapshot_sandbox = &ss;
        k.req = &req;
        return image_call(c, &k, ret);
}

void sbx_fork_free(struct sbx_fork *f) {
        if (!f)
                return;
        for (size_t i = 0; i < f->n; i++)
                free(f->ids[i]);
        free(f->ids);
        free(f->snapshot);
        free(f);
}

void sbx_create_opts_from_sandbox(struct sbx_create_opts *o, const struct sbx_sandbox *s) {
        if (!o || !s)
                return;
        sbx_create_opts_init(o);
        o->policy = s->policy;
        o->labels = s->labels;
        o->n_labels = s->n_labels;
        o->share_uids = s->share_uids;
        o->n_share_uids = s->n_share_uids;
        o->share_gids = s->share_gids;
        o->n_share_gids = s->n_share_gids;
        o->idle_timeout_ms = s->idle_timeout_ms ? s->idle_timeout_ms : SBX_IDLE_TIMEOUT_NONE;
}

/* The create options of a fork of src from image: o's, else src's settings. */
static void fork_create_opts(const struct sbx_sandbox *src, const struct sbx_fork_opts *o,
                             const char *image, struct sbx_create_opts *ret) {
        if (o && o->create)
                *ret = *o->create;
        else
                sbx_create_opts_from_sandbox(ret, src);
        ret->id = NULL;
        ret->image = image;
}

enum sbx_code sbx_fork(sbx_client *c, const char *id, const struct sbx_fork_opts *o,
                       struct sbx_fork **ret) {
        unsigned n = o && o->count ? o->count : 1;
        struct sbx_sandbox *src = NULL, *made = NULL;
        struct sbx_image *img = NULL;
        struct sbx_create_opts co;
        struct sbx_fork *f;
        enum sbx_code rc;

        if ((rc = need(c, ret, __func__, "ret")) != SBX_OK ||
            (rc = need(c, id, __func__, "id")) != SBX_OK)
                return rc;
        *ret = NULL;
        if (!(f = calloc(1, sizeof(*f))) || !(f->ids = calloc(n, sizeof(char *)))) {
                free(f);
                return transport_fail(c, SBX_INTERNAL, ENOMEM, "out of memory");
        }
        rc = sbx_get(c, id, &src);
        if (rc == SBX_OK)
                rc = sbx_snapshot(c, id, o ? o->snapshot_name : NULL, &img);
        if (rc == SBX_OK && !(f->snapshot = strdup(img->digest)))
                rc = transport_fail(c, SBX_INTERNAL, ENOMEM, "out of memory");
        if (rc == SBX_OK)
                fork_create_opts(src, o, f->snapshot, &co);
        while (rc == SBX_OK && f->n < n) {
                rc = sbx_create(c, &co, &made);
                if (rc == SBX_OK && !(f->ids[f->n++] = strdup(made->id)))
                        rc = transport_fail(c, SBX_INTERNAL, ENOMEM, "out of memory");
                sbx_sandbox_free(made);
                made = NULL;
        }
        if (rc != SBX_OK) {
                /* All or nothing; the failure's message is kept (not the terminates'). */
                char *msg = strdup(sbx_error_message(c));
                int e = sbx_errno(c);
                for (size_t i = 0; i < f->n; i++)
                        if (f->ids[i])
                                (void)sbx_terminate(c, f->ids[i], NULL);
                (void)transport_fail(c, rc, e, "%s", msg ? msg : "out of memory");
                free(msg);
                sbx_fork_free(f);
                f = NULL;
        }
        sbx_image_free(img);
        sbx_sandbox_free(src);
        *ret = f;
        return rc;
}

/* Where an export's chunks go: fd, in order. */
struct export_sink {
        int fd;
        uint64_t next;
};

static int export_chunk(void *ud, uint64_t offset, const void *data, size_t len) {
        struct export_sink *s = ud;
        const char *p = data;

        if (offset != s->next)
                return EPROTO;
        while (len > 0) {
                ssize_t n = write(s->fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? errno : EIO;
                p += n;
                len -= (size_t)n;
                s->next += (uint64_t)n;
        }
        return 0;
}

enum sbx_code sbx_image_export(sbx_client *c, const char *name, int fd, struct sbx_image **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ExportImage ei = SBX__V1__EXPORT_IMAGE__INIT;
        struct export_sink sink = {.fd = fd};
        struct exchange k = {0};
        struct sbx_image *img = NULL;
        enum sbx_code rc;

        if ((rc = need(c, name, __func__, "name")) != SBX_OK)
                return rc;
        if (ret)
                *ret = NULL;
        ei.name = unconst(name);
        req.body_case = SBX__V1__REQUEST__BODY_EXPORT_IMAGE;
        req.export_image = &ei;
        k.req = &req;
        k.on_export_chunk = export_chunk;
        k.userdata = &sink;
        rc = image_call(c, &k, &img);
        if (rc == SBX_OK && k.export_errno) {
                rc = transport_fail(c, SBX_UNAVAILABLE, k.export_errno,
                                    "writing the exported image: %s", strerror(k.export_errno));
                sbx_image_free(img);
                img = NULL;
        }
        if (ret)
                *ret = img;
        else
                sbx_image_free(img);
        return rc;
}

enum sbx_code sbx_image_list(sbx_client *c, struct sbx_image_list **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListImages li = SBX__V1__LIST_IMAGES__INIT;
        struct exchange k = {0};
        Sbx__V1__Response *resp;
        struct sbx_image_list *l;
        const Sbx__V1__ListImagesReply *lr;
        bool ok;
        enum sbx_code rc;

        if ((rc = need(c, ret, __func__, "ret")) != SBX_OK)
                return rc;
        *ret = NULL;
        req.body_case = SBX__V1__REQUEST__BODY_LIST_IMAGES;
        req.list_images = &li;
        k.req = &req;
        k.want = SBX__V1__RESPONSE__BODY_LIST_IMAGES;
        rc = transport_call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        lr = resp->list_images;
        l = calloc(1, sizeof(*l));
        ok = l && lr;
        if (ok && lr->n_images) {
                l->v = calloc(lr->n_images, sizeof(*l->v));
                ok = l->v != NULL;
        }
        for (size_t i = 0; ok && i < lr->n_images; i++) {
                l->n = i + 1;
                ok = wire_image_from_proto(&l->v[i], lr->images[i]);
        }
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_image_list_free(l);
                return transport_fail_oom(c);
        }
        *ret = l;
        return SBX_OK;
}

/* The RemovedImages reply of req into *ret (may be NULL). */
static enum sbx_code removed_call(sbx_client *c, Sbx__V1__Request *req,
                                  struct sbx_removed_images **ret) {
        struct exchange k = {0};
        Sbx__V1__Response *resp;
        struct sbx_removed_images *r;
        bool ok;
        enum sbx_code rc;

        if (ret)
                *ret = NULL;
        k.req = req;
        k.want = SBX__V1__RESPONSE__BODY_REMOVED_IMAGES;
        rc = transport_call(c, &k, &resp);
        if (rc != SBX_OK)
                return rc;
        r = ret ? calloc(1, sizeof(*r)) : NULL;
        ok = !ret ||
             (r && resp->removed_images &&
              wire_dup_strv(&r->names, resp->removed_images->names, resp->removed_images->n_names));
        if (ok && r)
                r->freed_bytes = resp->removed_images->freed_bytes;
        sbx__v1__response__free_unpacked(resp, NULL);
        if (!ok) {
                sbx_removed_images_free(r);
                return transport_fail_oom(c);
        }
        if (ret)
                *ret = r;
        return SBX_OK;
}

enum sbx_code sbx_image_remove(sbx_client *c, const char *name, struct sbx_removed_images **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__RemoveImage ri = SBX__V1__REMOVE_IMAGE__INIT;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        if ((rc = need(c, name, __func__, "name")) != SBX_OK)
                return rc;
        ri.name = unconst(name);
        req.body_case = SBX__V1__REQUEST__BODY_REMOVE_IMAGE;
        req.remove_image = &ri;
        return removed_call(c, &req, ret);
}

enum sbx_code sbx_image_prune(sbx_client *c, struct sbx_removed_images **ret) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__PruneImages pr = SBX__V1__PRUNE_IMAGES__INIT;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        req.body_case = SBX__V1__REQUEST__BODY_PRUNE_IMAGES;
        req.prune_images = &pr;
        return removed_call(c, &req, ret);
}
