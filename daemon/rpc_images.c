/* rpc_images.c: the image requests but PullImage (rpc_pull.c): ListImages,
 * InspectImage, RemoveImage, PruneImages; and the ImageInfo answer both send. See
 * rpc_images.h. */
#include "rpc_images.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caller.h"
#include "conn.h"
#include "images.h"
#include "rpc.h"
#include "rpc_common.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "sbxtab.h"

/* ---- answers ----------------------------------------------------------------------- */

/* 1 when ref is one of uid's ("UID/..."). */
int rpc_images_ref_of(const char *ref, uid_t uid) {
        char prefix[16];
        size_t n = (size_t)snprintf(prefix, sizeof(prefix), "%u/", (unsigned)uid);

        return strncmp(ref, prefix, n) == 0;
}

struct seen_count {
        const struct caller *k;
        const char *digest;
        unsigned n;
};

static int count_one(struct sandbox *sb, void *ud) {
        struct seen_count *sc = ud;
        struct sandbox_info_store st;

        if (sandbox_is_over(sb) || !sandbox_may_access(sb, sc->k))
                return 0;
        sandbox_fill_info(sb, &st);
        sc->n += st.info.image_digest && strcmp(st.info.image_digest, sc->digest) == 0;
        return 0;
}

/* How many live sandboxes made from the image digest the caller k may use (their own,
 * or shared with them): the count an ImageInfo shows. Content is shared between users
 * (images.h), so the store's holds count every user's sandboxes; this one tells no user
 * that another runs the image. */
static unsigned sandboxes_seen(struct sbxd *d, const struct caller *k, const char *digest) {
        struct seen_count sc = {k, digest, 0};

        if (d->sandboxes)
                sbxtab_foreach(d->sandboxes, count_one, &sc);
        return sc.n;
}

/* The sandboxes that use img: the warm pool's hold it too, but are nobody's (not even a
 * sign to another user that the daemon keeps some of that content: warm.c). */
static uint32_t users_of(struct sbxd *d, const struct imagestore_image *img) {
        uint32_t pool = sbxtab_pool_holds(d->sandboxes, img->manifest);

        return img->holds > pool ? img->holds - pool : 0;
}

/* An ImageInfo of img for uid (names: uid's refs only; sandboxes: those uid may use),
 * pointing into img and names. */
static void info_of(const struct imagestore_image *img, uid_t uid, unsigned sandboxes, char **names,
                    char **layers, Sbx__V1__ImageInfo *ret) {
        size_t i, n = 0;

        sbx__v1__image_info__init(ret);
        for (i = 0; i < img->nrefs; i++)
                if (rpc_images_ref_of(img->refs[i], uid))
                        names[n++] = (char *)(uintptr_t)images_ref_name(img, i);
        for (i = 0; i < img->nlayers; i++)
                layers[i] = (char *)(uintptr_t)img->layers[i];
        ret->names = names;
        ret->n_names = n;
        ret->digest = (char *)(uintptr_t)img->manifest;
        ret->has_size_bytes = ret->has_data_bytes = ret->has_sandboxes = 1;
        ret->size_bytes = img->size_bytes;
        ret->data_bytes = img->data_bytes;
        ret->sandboxes = sandboxes;
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
void rpc_images_answer(struct conn *c, uint64_t rid, const struct imagestore_image *img, uid_t uid,
                       const struct imageconfig *cfg, uint64_t downloaded) {
        char **names = calloc(img->nrefs + 1, sizeof(char *));
        char **layers = calloc(img->nlayers + 1, sizeof(char *));
        Sbx__V1__ImageInfo info;
        Sbx__V1__ImageConfig ic = SBX__V1__IMAGE_CONFIG__INIT;
        Sbx__V1__Label *lv = NULL, **lp = NULL;
        struct caller k;

        if (!names || !layers) {
                rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                goto out;
        }
        rpc_caller_of(c, &k);
        info_of(img, uid, sandboxes_seen(conn_daemon(c), &k, img->manifest), names, layers, &info);
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
                if (cfg->nlabels && (!(lv = calloc(cfg->nlabels, sizeof(*lv))) ||
                                     !(lp = calloc(cfg->nlabels, sizeof(*lp))))) {
                        rpc_send_errno(c, rid, -ENOMEM, "daemon out of memory");
                        goto out;
                }
                for (size_t i = 0; i < cfg->nlabels; i++) {
                        lv[i] = (Sbx__V1__Label)SBX__V1__LABEL__INIT;
                        lv[i].key = cfg->label_keys[i];
                        lv[i].value = cfg->label_values[i];
                        lp[i] = &lv[i];
                }
                ic.n_labels = cfg->nlabels;
                ic.labels = lp;
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
        free(lv);
        free(lp);
}

/* Every image of the store (*ret, NULL when none) and the count, or -1 after answering
 * rid why not. */
static int list_store(struct conn *c, uint64_t rid, struct imagestore_image **ret) {
        struct sbxd *d = conn_daemon(c);
        int n = d->images ? imagestore_list(d->images, ret) : 0;

        if (n < 0) {
                rpc_send_errno(c, rid, n, "cannot list the image store");
                return -1;
        }
        return n;
}

/* ---- ListImages, InspectImage ------------------------------------------------------ */

void rpc_images_list(struct conn *c, const Sbx__V1__Request *req) {
        struct imagestore_image *all = NULL;
        Sbx__V1__ImageInfo *infos = NULL, **ptrs = NULL;
        Sbx__V1__ListImagesReply reply = SBX__V1__LIST_IMAGES_REPLY__INIT;
        Sbx__V1__Response resp;
        char ***names = NULL, ***layers = NULL;
        struct conn_peer peer;
        struct caller k;
        int n = 0, i;
        size_t m = 0;

        conn_peer(c, &peer);
        rpc_caller_of(c, &k);
        if ((n = list_store(c, req->request_id, &all)) < 0)
                return;
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
                info_of(&all[i], peer.uid, sandboxes_seen(conn_daemon(c), &k, all[i].manifest),
                        names[m], layers[m], &infos[m]);
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
                rpc_images_answer(c, req->request_id, &img, peer.uid, &cfg, 0);
        imageconfig_free(&cfg);
        imagestore_image_free(&img);
}

/* ---- RemoveImage, PruneImages ------------------------------------------------------ */

/* Removes uid's refs of img (only the ref key when img has it and key is not NULL) into
 * names (img->nrefs entries, pointing into img): their count, or -EBUSY (err says
 * which image and why) when the image is in use and was uid's last name for it. seen:
 * the sandboxes of it uid may use (sandboxes_seen), the only ones the answer counts. */
static int remove_refs(struct sbxd *d, const struct imagestore_image *img, uid_t uid, unsigned seen,
                       const char *key, const char **names, char *err, size_t errlen) {
        size_t i, n = 0;
        int only_key = 0, r;

        for (i = 0; key && i < img->nrefs; i++)
                only_key |= strcmp(img->refs[i], key) == 0;
        for (i = 0; i < img->nrefs; i++) {
                char e[256];
                if (only_key ? strcmp(img->refs[i], key) != 0
                             : !rpc_images_ref_of(img->refs[i], uid))
                        continue;
                r = imagestore_remove(d->images, img->refs[i], e, sizeof(e));
                if (r == -EBUSY && img->holds && users_of(d, img) == 0) {
                        snprintf(err, errlen,
                                 "image %s (%s) is kept warm by sbxd --warm-image (%u "
                                 "sandboxes set up ahead): its last name stays while sbxd "
                                 "runs with that flag",
                                 images_ref_name(img, i), img->manifest, img->holds);
                        return -EBUSY;
                }
                if (r == -EBUSY && seen) {
                        snprintf(err, errlen,
                                 "image %s (%s) is in use by %u sandbox%s; terminate %s first",
                                 images_ref_name(img, i), img->manifest, seen,
                                 seen == 1 ? "" : "es", seen == 1 ? "it" : "them");
                        return -EBUSY;
                }
                if (r == -EBUSY) {
                        snprintf(err, errlen,
                                 "image %s (%s) is in use by a sandbox that is not yours; it "
                                 "can be removed once that ends",
                                 images_ref_name(img, i), img->manifest);
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

void rpc_images_remove(struct conn *c, const Sbx__V1__Request *req) {
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image img;
        struct conn_peer peer;
        struct caller k;
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
        rpc_caller_of(c, &k);
        n = remove_refs(d, &img, peer.uid, sandboxes_seen(d, &k, img.manifest), key[0] ? key : NULL,
                        names, err, sizeof(err));
        if (n == -EBUSY)
                conn_send_status(c, req->request_id, SBX__V1__CODE__FAILED_PRECONDITION, "%s", err);
        else
                send_removed(c, req->request_id, names, (size_t)n,
                             before - imagestore_usage(d->images));
        if (n > 0) {
                images_collect(d);
                sbxtab_images_changed(d->sandboxes); /* a --warm-image's name, perhaps */
        }
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
        if ((n = list_store(c, req->request_id, &all)) < 0)
                return;
        for (i = 0; i < n; i++)
                total += all[i].nrefs;
        names = calloc(total + 1, sizeof(*names));
        if (!names) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                goto out;
        }
        before = d->images ? imagestore_usage(d->images) : 0;
        for (i = 0; i < n; i++) {
                if (users_of(d, &all[i]) || !images_owns(&all[i], peer.uid))
                        continue;
                r = remove_refs(d, &all[i], peer.uid, 0, NULL, names + m, err, sizeof(err));
                if (r > 0)
                        m += (size_t)r; /* -EBUSY: a sandbox took it meanwhile; kept */
        }
        send_removed(c, req->request_id, names, m,
                     d->images ? before - imagestore_usage(d->images) : 0);
        if (m > 0) {
                images_collect(d);
                sbxtab_images_changed(d->sandboxes); /* a --warm-image's name, perhaps */
        }
out:
        free(names);
        if (all)
                imagestore_list_free(all, (size_t)n);
}
