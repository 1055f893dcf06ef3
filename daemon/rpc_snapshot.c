/* rpc_snapshot.c: SnapshotSandbox; see rpc_snapshot.h. */
#include "rpc_snapshot.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caller.h"
#include "config.h"
#include "conn.h"
#include "images.h"
#include "imagestore.h"
#include "log.h"
#include "offload.h"
#include "rpc.h"
#include "rpc_common.h"
#include "rpc_images.h"
#include "sandbox.h"
#include "sbsnap.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "sbxtab.h"

struct snap_work {
        struct offload_job job;
        struct call *call;
        struct sbxd *d;
        struct sandbox *sb; /* held (sbsnap_begin) until done */
        uid_t caller;
        struct snapshot_job sj;
};

static struct snap_work *work_of(struct offload_job *job) {
        return (struct snap_work *)((char *)job - offsetof(struct snap_work, job));
}

static int stop(void *ud) {
        return offload_cancelled(ud);
}

static void snap_work(struct offload_job *job) {
        struct snap_work *w = work_of(job);

        snapshot_run(&w->sj, stop, job);
}

static void work_free(struct snap_work *w) {
        snapshot_job_clear(&w->sj);
        if (w->call)
                rpc_call_free(w->call);
        free(w);
}

/* The code of a failure r: a freeze that did not come, a file that changed while it was
 * read: transient (retry). */
static Sbx__V1__Code code_of(int r) {
        if (r == -EBUSY || r == -ESTALE)
                return SBX__V1__CODE__UNAVAILABLE;
        return rpc_code_from_errno(r);
}

static void snap_done(struct offload_job *job) {
        struct snap_work *w = work_of(job);
        struct conn *c = rpc_call_conn(w->call);
        uint64_t rid = w->call->request_id;
        struct imagestore_image img;
        char how[80] = "";

        if (!w->sj.freezer.control)
                snprintf(how, sizeof(how), ", %zu processes stopped by signals", w->sj.signalled);
        if (imagestore_shares_blocks(w->d->images))
                snprintf(how + strlen(how), sizeof(how) - strlen(how), ", blocks shared");
        sbsnap_end(w->sb);
        w->sb = NULL;
        if (w->sj.r == 0 && imagestore_find(w->d->images, w->sj.manifest, &img) == 0) {
                log_info("sbx=%s uid=%u: snapshot %s taken (%llu bytes of layer, frozen %llu ms%s)",
                         w->sj.sandbox_id, (unsigned)w->caller, w->sj.manifest,
                         (unsigned long long)w->sj.layer_bytes,
                         (unsigned long long)w->sj.frozen_ms, how);
                if (!conn_is_closed(c))
                        rpc_images_answer(c, rid, &img, w->caller, NULL, 0);
                imagestore_image_free(&img);
                (void)images_fit(w->d, w->sj.manifest);
                sbxtab_images_changed(w->d->sandboxes);
        } else {
                if (w->sj.r == 0) {
                        w->sj.r = -ENOENT;
                        snprintf(w->sj.err, sizeof(w->sj.err), "the snapshot went from the store "
                                                               "at once (the cache bound?)");
                }
                log_info("sbx=%s uid=%u: no snapshot: %s", w->sj.sandbox_id, (unsigned)w->caller,
                         w->sj.err);
                if (!conn_is_closed(c))
                        conn_send_status(c, rid, code_of(w->sj.r), "snapshot of sandbox '%s': %s",
                                         w->sj.sandbox_id, w->sj.err);
        }
        work_free(w);
}

void rpc_snapshot_sandbox(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__SnapshotSandbox *q = req->snapshot_sandbox;
        struct sbxd *d = conn_daemon(c);
        struct sandbox *sb = rpc_lookup(c, req->request_id, q->sandbox_id);
        struct snap_work *w;
        struct conn_peer p;
        char err[512] = "";
        int r;

        if (!sb)
                return;
        if (!d->images) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__UNIMPLEMENTED,
                                 "this sbxd has no image store");
                return;
        }
        if (q->name && strlen(q->name) > SBX_IMAGE_NAME_MAX_BYTES) {
                conn_send_status(c, req->request_id, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "SnapshotSandbox.name: at most %u bytes",
                                 SBX_IMAGE_NAME_MAX_BYTES);
                return;
        }
        conn_peer(c, &p);
        w = calloc(1, sizeof(*w));
        if (!w) {
                rpc_send_errno(c, req->request_id, -ENOMEM, "daemon out of memory");
                return;
        }
        w->d = d;
        w->caller = p.uid;
        w->sj.upper_fd = w->sj.ws_fd = -1;
        w->sj.store = d->images;
        w->sj.max_image_bytes = d->cfg->max_image_bytes;
        w->sj.max_snapshot_bytes = d->cfg->max_snapshot_bytes_per_uid;
        w->sj.now_ms = sbxd_now_unix_ms();
        r = sbsnap_begin(sb, p.uid, q->name, &w->sj, err, sizeof(err));
        if (r < 0) {
                rpc_send_errno(c, req->request_id, r, err);
                work_free(w);
                return;
        }
        w->sb = sb;
        w->call = rpc_call_new(c, req->request_id);
        if (w->call) {
                w->call->job = &w->job;
                r = offload_submit(d, &w->job, p.uid, snap_work, snap_done, NULL);
        } else {
                r = -ENOMEM;
        }
        if (r < 0) {
                sbsnap_end(sb);
                w->sb = NULL;
                rpc_send_errno(c, req->request_id, r,
                               r == -EAGAIN ? "too many operations of this user's run off the "
                                              "loop now; retry when one has finished"
                                            : "daemon out of memory");
                work_free(w);
        }
}
