/* rpc_export.c: ExportImage; see rpc_export.h. */
#include "rpc_export.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
#include "conn.h"
#include "imageexport.h"
#include "images.h"
#include "imagestore.h"
#include "log.h"
#include "offload.h"
#include "rpc.h"
#include "rpc_common.h"
#include "rpc_images.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* The archive's chunks: at most this many bytes each. */
#define EXPORT_CHUNK_BYTES (1u << 20)

struct export {
        struct offload_job job;
        struct conn_call cc; /* the request's, until it is answered or its client goes */
        struct sbxd *d;
        uint64_t rid;
        uid_t uid;
        char manifest[DIGEST_STR_BYTES];
        char *tag;
        struct layerwrite_map uids, gids;
        int held;       /* the image, in the store, until the end */
        int fd;         /* the archive, in the store's scratch space; -1: none */
        char scratch[NAME_MAX + 1];
        int scratch_made;
        uint64_t offset, size;
        int working;    /* the offload job runs */
        uv_fs_t rd;     /* the read of the next chunk, off the loop (libuv's pool) */
        uint8_t *rbuf;  /* ... into this, while reading */
        int reading;
        int r;
        char err[512];
};

static struct export *of_job(struct offload_job *job) {
        return (struct export *)((char *)job - offsetof(struct export, job));
}

static struct export *of_call(struct conn_call *cc) {
        return (struct export *)((char *)cc - offsetof(struct export, cc));
}

static void export_free(struct export *x) {
        free(x->rbuf);
        if (x->fd >= 0)
                close(x->fd);
        if (x->scratch_made)
                imagestore_scratch_remove(x->d->images, x->scratch);
        if (x->held)
                (void)imagestore_release(x->d->images, x->manifest);
        if (x->cc.conn)
                conn_call_end(&x->cc);
        free(x->tag);
        free(x);
}

/* ---- the archive, on a worker ----------------------------------------------------------- */

static void export_work(struct offload_job *job) {
        struct export *x = of_job(job);
        int dfd = -1;
        struct stat st;

        if (offload_cancelled(job)) {
                x->r = -ECANCELED;
                return;
        }
        x->r = imagestore_scratch(x->d->images, &dfd, x->scratch);
        if (x->r < 0) {
                snprintf(x->err, sizeof(x->err), "image store: %s", strerror(-x->r));
                return;
        }
        x->scratch_made = 1;
        x->fd = openat(dfd, "image.tar", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        close(dfd);
        if (x->fd < 0) {
                x->r = -errno;
                snprintf(x->err, sizeof(x->err), "image store: %s", strerror(errno));
                return;
        }
        x->r = imageexport_write(x->d->images, x->manifest, x->tag, &x->uids, &x->gids,
                                 x->d->features.rootless ? LAYERWRITE_UPPER_USERXATTR
                                                         : LAYERWRITE_UPPER,
                                 x->fd,
                                 x->d->cfg->max_image_bytes * 2 + (64u << 20), x->err,
                                 sizeof(x->err));
        if (x->r == 0 && fstat(x->fd, &st) == 0)
                x->size = (uint64_t)st.st_size;
}

/* ---- streaming, on the loop ------------------------------------------------------------- */

/* The archive is sent: the image's ImageInfo ends the answer, and the export. */
static void finish(struct export *x) {
        struct imagestore_image img;

        if (imagestore_find(x->d->images, x->manifest, &img) == 0) {
                rpc_images_answer(x->cc.conn, x->rid, &img, x->uid, NULL, 0);
                imagestore_image_free(&img);
        } else {
                conn_send_status(x->cc.conn, x->rid, SBX__V1__CODE__NOT_FOUND,
                                 "image %s went from the store meanwhile", x->manifest);
        }
        log_info("uid=%u image %s exported (%llu bytes)", (unsigned)x->uid, x->manifest,
                 (unsigned long long)x->size);
        export_free(x);
}

static void on_read(uv_fs_t *req);

/* Reads the next chunk off the loop while the connection has room, or ends the answer
 * once all is sent. The export is over (freed) when this returns 1. */
static int pump(struct export *x) {
        struct conn *c = x->cc.conn;
        size_t len;

        if (!c || x->reading || conn_congested(c))
                return 0;
        if (x->offset >= x->size) {
                finish(x);
                return 1;
        }
        len = x->size - x->offset < EXPORT_CHUNK_BYTES ? (size_t)(x->size - x->offset)
                                                         : EXPORT_CHUNK_BYTES;
        x->rbuf = malloc(len);
        if (x->rbuf) {
                uv_buf_t b = uv_buf_init((char *)x->rbuf, (unsigned)len);
                x->reading = uv_fs_read(x->d->loop, &x->rd, x->fd, &b, 1, (int64_t)x->offset,
                                        on_read) == 0;
        }
        if (!x->reading) {
                conn_send_status(c, x->rid, SBX__V1__CODE__INTERNAL,
                                 "the exported archive cannot be read back: %s",
                                 x->rbuf ? "no read" : "out of memory");
                export_free(x);
                return 1;
        }
        return 0;
}

/* A chunk was read: sent (the connection takes it), and the next one asked for. */
static void on_read(uv_fs_t *req) {
        struct export *x = (struct export *)((char *)req - offsetof(struct export, rd));
        ssize_t n = req->result;
        size_t len = x->size - x->offset < EXPORT_CHUNK_BYTES ? (size_t)(x->size - x->offset)
                                                                : EXPORT_CHUNK_BYTES;
        uint8_t *buf = x->rbuf;
        Sbx__V1__Response resp;
        Sbx__V1__ExportChunk ch = SBX__V1__EXPORT_CHUNK__INIT;

        uv_fs_req_cleanup(req);
        x->reading = 0;
        x->rbuf = NULL;
        if (!x->cc.conn) { /* its client went meanwhile */
                free(buf);
                export_free(x);
                return;
        }
        if (n != (ssize_t)len) {
                free(buf);
                conn_send_status(x->cc.conn, x->rid, SBX__V1__CODE__INTERNAL,
                                 "the exported archive cannot be read back: %s",
                                 n < 0 ? uv_strerror((int)n) : "short read");
                export_free(x);
                return;
        }
        rpc_response_init(&resp, x->rid);
        ch.has_data = ch.has_offset = 1;
        ch.data.data = buf; /* sent from here (conn takes it) */
        ch.data.len = len;
        ch.offset = x->offset;
        resp.body_case = SBX__V1__RESPONSE__BODY_EXPORT_CHUNK;
        resp.export_chunk = &ch;
        x->offset += len;
        if (conn_send_taking(x->cc.conn, &resp, buf, len) < 0)
                return; /* closed: on_closing frees */
        (void)pump(x);
}

static void export_done(struct offload_job *job) {
        struct export *x = of_job(job);

        x->working = 0;
        if (!x->cc.conn) { /* its client went meanwhile */
                export_free(x);
                return;
        }
        if (x->r < 0) {
                rpc_send_errno(x->cc.conn, x->rid, x->r, x->err);
                export_free(x);
                return;
        }
        (void)pump(x);
}

static void on_closing(struct conn_call *cc) {
        struct export *x = of_call(cc);

        conn_call_end(cc);
        x->cc.conn = NULL;
        if (x->working)
                offload_cancel(&x->job); /* export_done frees */
        else if (!x->reading) /* else on_read frees */
                export_free(x);
}

static void on_drained(struct conn_call *cc) {
        (void)pump(of_call(cc));
}

/* The maps of the store's owners to the image's (imageexport.h): a root daemon's store
 * holds the image's ids; a rootless one's, its user's, which is 0. */
static void maps_of(const struct sbxd *d, struct export *x) {
        if (!d->features.rootless) {
                x->uids.r[0] = (struct layerwrite_range){0, 0, UINT32_MAX};
                x->uids.n = 1;
                x->gids = x->uids;
                return;
        }
        x->uids.r[0] = (struct layerwrite_range){(uint32_t)d->euid, 0, 1};
        x->gids.r[0] = (struct layerwrite_range){(uint32_t)d->egid, 0, 1};
        x->uids.n = x->gids.n = 1;
}

void rpc_export_image(struct conn *c, const Sbx__V1__Request *req) {
        const char *name = req->export_image->name;
        struct sbxd *d = conn_daemon(c);
        struct imagestore_image img;
        struct conn_peer p;
        struct export *x;
        char err[512];
        int r;

        if (!name || !name[0] || strlen(name) > SBX_IMAGE_NAME_MAX_BYTES) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "ExportImage.name is required (an image name as `sbx image ls` "
                                 "shows it, or its digest), at most %u bytes",
                                 SBX_IMAGE_NAME_MAX_BYTES);
                return;
        }
        conn_peer(c, &p);
        r = images_find(d, p.uid, name, &img, err, sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, err);
                return;
        }
        x = calloc(1, sizeof(*x));
        if (!x) {
                imagestore_image_free(&img);
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        x->d = d;
        x->rid = req->request_id;
        x->uid = p.uid;
        x->fd = -1;
        snprintf(x->manifest, sizeof(x->manifest), "%s", img.manifest);
        for (size_t i = 0; i < img.nrefs && !x->tag; i++)
                if (rpc_images_ref_of(img.refs[i], p.uid))
                        x->tag = strdup(images_ref_name(&img, i));
        imagestore_image_free(&img);
        maps_of(d, x);
        x->held = imagestore_hold(d->images, x->manifest) == 0;
        conn_call_begin(c, &x->cc, on_closing, on_drained);
        x->working = 1;
        r = offload_submit(d, &x->job, p.uid, export_work, export_done, NULL);
        if (r < 0) {
                x->working = 0;
                rpc_send_errno(c, req->request_id, r,
                               r == -EAGAIN ? "too many operations of this user's run off the "
                                              "loop now; retry when one has finished"
                                            : "daemon out of memory");
                export_free(x);
        }
}
