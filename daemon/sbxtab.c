/* sbxtab.c: the sandbox table; see sbxtab.h.
 *
 * A hash of the live sandboxes by id over a list of all of them; the warm pool keeps
 * its sandboxes apart until one is claimed. A creation passes its checks here (in the
 * order a client would want to hear them: shutting down, the id, the owner's quota, the
 * daemon's maximum, the policy), then either claims a warm sandbox or records a new one
 * and hands it to the lifecycle to set up. Every sandbox the table takes is given
 * table_over and table_gone as its owner's callbacks: that is how its end comes back
 * here, in two steps (its quota and place as soon as nothing of it runs; its uid slot and
 * entry once its init helper has exited and its cgroup is removed). */
#include "sbxtab.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "cmdsched.h"
#include "images.h"
#include "imagestore.h"
#include "command.h"
#include "log.h"
#include "names.h"
#include "policy.h"
#include "quota.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbxd.h"
#include "sbxid.h"
#include "store.h"
#include "uidrange.h"
#include "uidslot.h"
#include "warm.h"

#define SBXTAB_BUCKETS 4096u
/* How often old records are pruned (--retention-days), at most. */
#define SBXTAB_PRUNE_INTERVAL_MS (3600 * 1000)

struct sbxtab {
        struct sbxd *d;
        struct sandbox *buckets[SBXTAB_BUCKETS]; /* by id */
        struct sandbox *all;
        struct sandbox *pending; /* restores' new sandboxes being set up (not findable) */
        unsigned count; /* in the table: until gone */
        unsigned live;  /* of them, not yet over: what --max-sandboxes counts */
        struct warm_pool *warm;
        struct uidslots *slots;
        struct quota *quota;
        struct cmdsched sched; /* the commands' slots and queues, over the table's quota */
        void (*shutdown_done)(void *ud);
        void *shutdown_ud;
        int64_t last_prune_ms;
};

static unsigned hash_id(const char *s) {
        unsigned h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h % SBXTAB_BUCKETS;
}

/* ---- the table ---------------------------------------------------------------------- */

/* Calls the shutdown's done once nothing is left, warm sandboxes included. */
static void maybe_done(struct sbxtab *t) {
        if (t->count == 0 && warm_count(t->warm) == 0 && t->shutdown_done) {
                void (*done)(void *) = t->shutdown_done;
                t->shutdown_done = NULL;
                done(t->shutdown_ud);
        }
}

static int pool_has_room(void *ud) {
        struct sbxtab *t = ud;
        return t->live + warm_count(t->warm) < t->d->cfg->max_sandboxes;
}

static void pool_gone(void *ud) {
        maybe_done(ud);
}

int sbxtab_new(struct sbxd *d, struct sbxtab **ret) {
        struct sbxtab *t = calloc(1, sizeof(*t));
        struct warm_owner owner = {.has_room = pool_has_room, .gone = pool_gone, .ud = t};

        if (!t)
                return -ENOMEM;
        t->d = d;
        if (uidslot_new(uidrange_base(d->uids), &t->slots) < 0 || quota_new(&t->quota) < 0 ||
            warm_new(d, &owner, &t->warm) < 0) {
                sbxtab_free(t);
                return -ENOMEM;
        }
        d->quota = t->quota;
        cmdsched_init(&t->sched, &command_sched_ops, t->quota, d->cfg);
        d->sched = &t->sched;
        d->buffered = (struct quota_bound){.q = t->quota,
                                           .max = d->cfg->max_buffered_per_uid,
                                           .max_total = d->cfg->max_buffered_bytes};
        d->ptys = (struct quota_bound){
                .q = t->quota, .max = d->cfg->max_ptys_per_uid, .max_total = d->cfg->max_ptys};
        *ret = t;
        return 0;
}

void sbxtab_free(struct sbxtab *t) {
        if (!t)
                return;
        warm_free(t->warm);
        uidslot_free(t->slots);
        if (t->d && t->d->quota == t->quota) {
                t->d->quota = NULL;
                t->d->sched = NULL;
                t->d->buffered.q = NULL;
                t->d->ptys.q = NULL;
        }
        quota_free(t->quota);
        free(t);
}

struct sandbox *sbxtab_find(struct sbxtab *t, const char *id) {
        struct sandbox *sb;
        for (sb = t->buckets[hash_id(id)]; sb; sb = sb->hnext)
                if (strcmp(sb->id, id) == 0)
                        return sb;
        return NULL;
}

unsigned sbxtab_count(const struct sbxtab *t) {
        return t->count;
}

struct uidslots *sbxtab_uidslots(struct sbxtab *t) {
        return t->slots;
}

int sbxtab_is_sandbox_pidns(const struct sbxtab *t, dev_t dev, ino_t ino) {
        return sandbox_list_has_pidns(t->all, dev, ino) || warm_has_pidns(t->warm, dev, ino);
}

int sbxtab_foreach(struct sbxtab *t, int (*cb)(struct sandbox *sb, void *ud), void *ud) {
        struct sandbox *sb, *next;
        for (sb = t->all; sb; sb = next) {
                int r;
                next = sb->next;
                r = cb(sb, ud);
                if (r)
                        return r;
        }
        return 0;
}

/* Nothing of sb runs any more: its owner's quota and its place under --max-sandboxes are
 * given back (a client that terminates one at its quota may create the next at once). */
static void table_over(void *ud, struct sandbox *sb) {
        struct sbxtab *t = ud;

        t->live--;
        quota_drop(t->quota, QUOTA_SANDBOXES, sb->owner_uid);
        /* Room for the pool again (it stops at --max-sandboxes). */
        warm_schedule(t->warm, SBX_WARM_REFILL_DELAY_MS);
}

/* sb has ended and is cleaned up: out of the table, its uid slot given back (only now:
 * the next sandbox to run as that uid must not meet anything of this one). */
static void table_gone(void *ud, struct sandbox *sb) {
        struct sbxtab *t = ud;
        struct sandbox **pp;

        for (pp = &t->buckets[hash_id(sb->id)]; *pp; pp = &(*pp)->hnext)
                if (*pp == sb) {
                        *pp = sb->hnext;
                        break;
                }
        sandbox_list_del(sb->pending ? &t->pending : &t->all, sb);
        t->count--;
        uidslot_release(t->slots, sb->uid_slot);
        sb->uid_slot = -1;
        sb->image = sbimage_close(t->d, sb->image);
        maybe_done(t);
}

/* Takes sb into the table: listed, findable by id, and told to report its end here.
 * Its owner's quota was taken by the caller. */
static void table_take(struct sbxtab *t, struct sandbox *sb) {
        unsigned h = hash_id(sb->id);

        sandbox_list_add(&t->all, sb);
        t->count++;
        t->live++;
        sb->hnext = t->buckets[h];
        t->buckets[h] = sb;
        sb->over = table_over;
        sb->gone = table_gone;
        sb->gone_ud = t;
}

void sbxtab_adopt(struct sbxtab *t, struct sandbox *sb) {
        /* Counted whatever the quota says now: it was counted when it was created. */
        (void)quota_take(t->quota, QUOTA_SANDBOXES, sb->owner_uid, UINT_MAX, NULL);
        table_take(t, sb);
}

/* ---- creation ----------------------------------------------------------------------- */

/* The id the request asks for (checked), or a generated one, into id. 0 or -EINVAL. */
static int pick_id(const Sbx__V1__CreateSandbox *req, char *id, size_t len, char *err,
                   size_t errlen) {
        if (!req->id || !req->id[0]) {
                sbxid_generate(id, len);
                return 0;
        }
        if (!sbxid_valid(req->id)) {
                snprintf(err, errlen, "invalid sandbox id '%.80s': use 1 to %u of [A-Za-z0-9._-]",
                         req->id, SBX_ID_MAX_BYTES);
                return -EINVAL;
        }
        snprintf(id, len, "%s", req->id);
        return 0;
}

/* The checks before anything is made: the daemon is serving, id was never used, and
 * neither the caller's quota nor the daemon's maximum is reached. On 0, one sandbox of
 * the caller's quota is taken. -errno with err. */
static int admit(struct sbxtab *t, const char *id, const struct caller *caller, char *err,
                 size_t errlen) {
        struct sbxd *d = t->d;
        unsigned owned;

        if (sbxtab_find(t, id) || store_sandbox_exists(d->store, id) > 0) {
                snprintf(err, errlen,
                         "sandbox id '%s' is already used (ids are never reused; pick "
                         "another or omit it)",
                         id);
                return -EEXIST;
        }
        if (quota_take(t->quota, QUOTA_SANDBOXES, caller->uid, d->cfg->max_sandboxes_per_uid,
                       &owned) < 0) {
                snprintf(err, errlen,
                         "uid %u already owns %u sandboxes, its quota "
                         "(--max-sandboxes-per-uid %u); terminate some first",
                         (unsigned)caller->uid, owned, d->cfg->max_sandboxes_per_uid);
                return -EAGAIN;
        }
        if (t->live >= d->cfg->max_sandboxes) {
                quota_drop(t->quota, QUOTA_SANDBOXES, caller->uid);
                snprintf(err, errlen,
                         "sbxd already runs %u sandboxes, its maximum "
                         "(--max-sandboxes); terminate some first",
                         t->live);
                return -EAGAIN;
        }
        return 0;
}

/* The record of a new sandbox, written before anything is made. 0 or -errno with err. */
static int record_new(struct sandbox *sb, const uint8_t *packed, size_t packed_len,
                      const struct caller *caller, char *err, size_t errlen) {
        struct sbxd *d = sb->d;
        struct store_sandbox rec;
        int r;

        memset(&rec, 0, sizeof(rec));
        rec.id = sb->id;
        rec.owner_uid = sb->owner_uid;
        rec.state = names_state(SBX__V1__SANDBOX_STATE__CREATING);
        rec.created_ms = sb->created_ms;
        rec.deadline_ms = sb->deadline_ms;
        rec.idle_timeout_ms = sb->idle_timeout_ms;
        rec.spec = packed;
        rec.spec_len = packed_len;
        rec.run_uid = sb->run_uid;
        rec.caller_pid = (uint32_t)caller->pid;
        rec.client_name = caller->client_name;
        rec.workspace_dir = sb->workspace;
        rec.cgroup_path = d->cgroups->version != CGROUP_NONE ? sb->cg_name : "";
        r = store_sandbox_insert(d->store, &rec);
        if (r < 0)
                snprintf(err, errlen, "cannot record sandbox '%s': %s", sb->id,
                         r == -EEXIST ? "id already used" : store_last_error(d->store));
        return r;
}

/* Commands run as a uid of their own per sandbox (root mode: a slot of the owner's) or
 * as the mapped user (rootless). 0 or -errno with err. */
static int assign_uid(struct sbxtab *t, struct sandbox *sb, char *err, size_t errlen) {
        int slot;

        /* From an image: the ids of its user, in its own namespace (sbimage.h). No
         * block free while the pool holds some: one is given up for a retry. */
        if (sb->spec->image && sb->spec->image[0]) {
                slot = sandbox_open_image(sb, sb->owner_uid, err, errlen);
                if (slot == -EAGAIN && sbimage_free_blocks(t->d) == 0 &&
                    warm_give_up_block(t->warm))
                        snprintf(err, errlen,
                                 "sbxd runs %u sandboxes made from images, the most a root "
                                 "sbxd has ids for, some of them kept warm (--warm-image): "
                                 "one of those is given up for this create; try again in "
                                 "a moment",
                                 SBX_IMAGE_BLOCKS);
                return slot;
        }
        if (t->d->features.rootless) {
                sandbox_set_run_ids(sb, 0, 0);
                return 0;
        }
        slot = uidslot_alloc(t->slots, t->d->store, sb->owner_uid, err, errlen);
        if (slot < 0)
                return slot;
        sb->uid_slot = slot;
        sandbox_set_run_ids(sb, uidslot_uid(t->slots, (unsigned)slot),
                            uidslot_uid(t->slots, (unsigned)slot));
        return 0;
}

/* The request of sb packed again into *packed (freed and replaced): with what the
 * daemon added to it (an image's digest). 0 or -ENOMEM with err. */
static int repack(struct sandbox *sb, uint8_t **packed, size_t *packed_len, char *err,
                  size_t errlen) {
        size_t len = sbx__v1__create_sandbox__get_packed_size(sb->spec);
        uint8_t *buf = malloc(len ? len : 1);

        if (!buf) {
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        sbx__v1__create_sandbox__pack(sb->spec, buf);
        free(*packed);
        *packed = buf;
        *packed_len = len;
        return 0;
}

/* A new sandbox for the effective request packed (taken over, as objs is): sb, a spare
 * of the pool taken for it, or else a new one; recorded, in the table, and being set
 * up; cb answers once it is ready or has failed. 0, or -errno with err when nothing was
 * made. */
static int create_cold(struct sbxtab *t, struct sandbox *sb, const char *id, uint8_t *packed,
                       size_t packed_len, struct policy_objects *objs,
                       const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                       size_t errlen) {
        int r = -ENOMEM;

        if (!sb)
                sb = sandbox_alloc(t->d, id, packed, packed_len, caller->uid, sbxd_now_unix_ms());

        if (sb) {
                sb->owner_gid = caller->gid;
                sb->deadline_ms = sb->created_ms + (int64_t)sb->spec->timeout_ms;
                sandbox_set_creator(sb, caller);
                r = assign_uid(t, sb, err, errlen);
                if (r == 0 && sb->image)
                        r = repack(sb, &packed, &packed_len, err, errlen);
                if (r == 0)
                        r = record_new(sb, packed, packed_len, caller, err, errlen);
        } else {
                snprintf(err, errlen, "daemon out of memory");
        }
        free(packed);
        if (r < 0) {
                policy_objects_clear(objs);
                if (sb) {
                        uidslot_release(t->slots, sb->uid_slot);
                        sb->uid_slot = -1;
                        sb->image = sbimage_close(t->d, sb->image);
                        if (sb->prepared)
                                warm_drop_spare(t->warm, sb);
                        else
                                sandbox_discard(sb);
                }
                return r;
        }
        table_take(t, sb);
        sb->create_cb = cb;
        sb->create_ud = ud;
        sandbox_start(sb, objs);
        return 0;
}

/* Claims a warm sandbox for the request when one matches. 1 (cb answers), 0 (none), or
 * -errno with err. */
static int create_warm(struct sbxtab *t, const char *id, const uint8_t *packed, size_t packed_len,
                       const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                       size_t errlen) {
        struct sandbox *sb;
        int r = warm_claim(t->warm, t->slots, id, packed, packed_len, caller, &sb, err, errlen);
        if (r <= 0)
                return r;
        table_take(t, sb);
        warm_finish_claim(t->warm, sb, cb, ud);
        return 1;
}

/* After admit: the effective policy, then a warm sandbox or a cold one. */
static int create_admitted(struct sbxtab *t, const Sbx__V1__CreateSandbox *req, char *id,
                           const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                           size_t errlen) {
        struct policy_objects objs;
        uint8_t *packed = NULL;
        size_t packed_len = 0;
        struct sandbox *spare;
        int r;

        memset(&objs, 0, sizeof(objs));
        r = policy_effective(t->d, req, id, caller, &packed, &packed_len, &objs, err, errlen);
        if (r < 0)
                return r;
        r = create_warm(t, id, packed, packed_len, caller, cb, ud, err, errlen);
        if (r != 0) {
                free(packed);
                policy_objects_clear(&objs);
                return r < 0 ? r : 0;
        }
        /* A warm sandbox that is not used counts against --max-sandboxes: give one up
         * when this one would not fit otherwise (a spare it takes makes no new one). */
        spare = warm_take_spare(t->warm, id, packed, packed_len, caller->uid);
        if (!spare && !pool_has_room(t))
                warm_give_up_one(t->warm);
        return create_cold(t, spare, id, packed, packed_len, &objs, caller, cb, ud, err, errlen);
}

int sbxtab_create(struct sbxd *d, const Sbx__V1__CreateSandbox *req, const struct caller *caller,
                  sandbox_ready_cb cb, void *ud, char *err, size_t errlen) {
        struct sbxtab *t = d->sandboxes;
        char id[SBX_ID_MAX_BYTES + 1];
        int r;

        if (d->shutting_down) {
                snprintf(err, errlen, "sbxd is shutting down; try again when it is back");
                return -ESHUTDOWN;
        }
        r = pick_id(req, id, sizeof(id), err, errlen);
        if (r == 0)
                r = admit(t, id, caller, err, errlen);
        if (r < 0)
                return r;
        r = create_admitted(t, req, id, caller, cb, ud, err, errlen);
        if (r < 0)
                quota_drop(t->quota, QUOTA_SANDBOXES, caller->uid);
        return r;
}

/* ---- restore ------------------------------------------------------------------------ */

struct restore {
        struct sbxtab *t;
        char id[SBX_ID_MAX_BYTES + 1];
        char *image; /* as the caller named it */
        sandbox_ready_cb cb;
        void *ud;
};

static void restore_free(struct restore *rs) {
        free(rs->image);
        free(rs);
}

/* What a failed restore of rs says (why: msg) into buf. */
static void restore_says(const struct restore *rs, int err, const char *msg, char *buf,
                         size_t len) {
        snprintf(buf, len, "cannot restore sandbox '%s' from %s: %s%s", rs->id, rs->image, msg,
                 err == -ENODEV ? "" : "; the sandbox is as it was");
}

/* The restore of rs failed (msg says why): the sandbox is as it was. */
static void restore_failed(struct restore *rs, int err, const char *msg) {
        struct sandbox *old = sbxtab_find(rs->t, rs->id);
        char full[768];

        if (old) {
                old->restoring = 0;
                sandbox_touch(old); /* idle from now on: the restore was a use of it */
        }
        restore_says(rs, err, msg, full, sizeof(full));
        rs->cb(rs->ud, NULL, err, full);
        restore_free(rs);
}

/* Both state directories swap places: old's to a name of its own, nb's to the id's. 0,
 * or -errno with nothing changed. */
static int swap_dirs(struct sandbox *old, struct sandbox *nb) {
        char gen[SBX_ID_MAX_BYTES + 1], away[SBX_ID_MAX_BYTES + 1];
        int r;

        sbxid_generate(gen, sizeof(gen));
        snprintf(away, sizeof(away), "~replaced-%.40s", gen);
        r = sandbox_move_dir(old, away);
        if (r == 0 && (r = sandbox_move_dir(nb, old->id)) < 0)
                (void)sandbox_move_dir(old, old->id);
        return r;
}

/* nb's record is the id's from here on: its spec, init, workspace, cgroup and ids. 0 or
 * -errno. */
static int record_restored(struct sandbox *nb) {
        struct sbxd *d = nb->d;
        struct store_sandbox rec;
        size_t len = sbx__v1__create_sandbox__get_packed_size(nb->spec);
        uint8_t *packed = malloc(len ? len : 1);
        int r;

        if (!packed)
                return -ENOMEM;
        sbx__v1__create_sandbox__pack(nb->spec, packed);
        memset(&rec, 0, sizeof(rec));
        rec.id = nb->id;
        rec.state = names_state(SBX__V1__SANDBOX_STATE__READY);
        rec.spec = packed;
        rec.spec_len = len;
        rec.init_pid = nb->view.init_pid;
        rec.workspace_dir = nb->workspace;
        rec.cgroup_path = d->cgroups->version != CGROUP_NONE ? nb->cg_name : "";
        rec.run_uid = nb->run_uid;
        r = store_sandbox_replace(d->store, &rec);
        free(packed);
        return r;
}

/* nb takes old's place: findable by its id, its deadline and idle limit old's (a
 * SetTimeout meanwhile counts); old ends, its end and its directory unrecorded. */
static void take_place(struct sbxtab *t, struct sandbox *old, struct sandbox *nb) {
        struct sandbox **pp;
        unsigned h = hash_id(old->id);

        for (pp = &t->buckets[h]; *pp; pp = &(*pp)->hnext)
                if (*pp == old) {
                        *pp = old->hnext;
                        break;
                }
        sandbox_list_del(&t->pending, nb);
        nb->pending = nb->unrecorded = 0;
        sandbox_list_add(&t->all, nb);
        nb->hnext = t->buckets[h];
        t->buckets[h] = nb;
        nb->deadline_ms = old->deadline_ms;
        nb->idle_timeout_ms = old->idle_timeout_ms;
        /* Its commands' ids go on from old's (c-N: the records keep old's). */
        nb->next_command = old->next_command;
        nb->commands_run = old->commands_run;
        sandbox_touch(nb);
        sandbox_arm_timer(nb);
        old->restoring = 0;
        old->unrecorded = 1;
        old->spec->has_keep_workspace = old->spec->keep_workspace = 0; /* it is replaced */
        sandbox_end(old, SBX__V1__SANDBOX_STATE__TERMINATED, "restored");
}

/* The new sandbox is ready (or failed): it takes the old one's place if that one is
 * still there and ready. */
static void restore_ready(void *ud, struct sandbox *nb, int err, const char *msg) {
        struct restore *rs = ud;
        struct sandbox *old;
        char why[256];
        int r;

        if (err < 0) {
                /* "sandbox 'ID' could not be created: REASON" (sandbox.c): the reason. */
                const char *colon = msg ? strstr(msg, ": ") : NULL;
                restore_failed(rs, err, colon ? colon + 2 : "its setup failed");
                return;
        }
        old = sbxtab_find(rs->t, rs->id);
        if (!old || old->ending || old->view.state != SBX__V1__SANDBOX_STATE__READY) {
                sandbox_end(nb, SBX__V1__SANDBOX_STATE__TERMINATED, "its sandbox ended");
                restore_failed(rs, -ENODEV, "the sandbox ended meanwhile");
                return;
        }
        r = swap_dirs(old, nb);
        if (r == 0 && (r = record_restored(nb)) < 0)
                (void)swap_dirs(nb, old); /* back: nb's to a name, old's to the id's */
        if (r < 0) {
                snprintf(why, sizeof(why), "%s: %s",
                         r == -ENOMEM ? "daemon out of memory" : "cannot take its place",
                         r == -ENOMEM ? "" : strerror(-r));
                sandbox_end(nb, SBX__V1__SANDBOX_STATE__TERMINATED, "its restore failed");
                restore_failed(rs, r, why);
                return;
        }
        log_info("sbx=%s: restored from %s (image %s; init pid %d, uid %u)", nb->id, rs->image,
                 nb->image ? nb->image->digest : "-", (int)nb->view.init_pid,
                 (unsigned)nb->run_uid);
        take_place(rs->t, old, nb);
        rs->cb(rs->ud, nb, 0, NULL);
        restore_free(rs);
}

/* The image the caller names, which the owner must have too (a snapshot of a shared
 * sandbox is both's): its digest into digest. 0 or -errno with err. */
static int restore_image(struct sbxd *d, const struct sandbox *old, const char *image,
                         const struct caller *caller, char *digest, size_t len, char *err,
                         size_t errlen) {
        struct imagestore_image img, own;
        int r;

        memset(&img, 0, sizeof(img));
        memset(&own, 0, sizeof(own));
        r = images_find(d, caller->uid, image, &img, err, errlen);
        if (r == 0 && caller->uid != old->owner_uid &&
            images_find(d, old->owner_uid, img.manifest, &own, err, errlen) < 0) {
                /* In the words of a name the caller has not. */
                snprintf(err, errlen,
                         "image %s is not one the sandbox's owner has: restore from a "
                         "snapshot of the sandbox (sbx snapshot), which is both yours and "
                         "theirs",
                         image);
                r = -ENOENT;
        }
        if (r == 0)
                snprintf(digest, len, "%s", img.manifest);
        imagestore_image_free(&img);
        imagestore_image_free(&own);
        return r;
}

/* The effective policy of req (old's) into *packed and *objs, for old's owner: a sandbox
 * of the owner's opens only what the owner may (a share user's rights never widen it:
 * the owner controls what its paths' names lead to). A share user who asks must be able
 * to open them too (no deputy: judged for caller first, what that opens let go). 0 or
 * -errno with err. */
static int judge_restore(struct sbxd *d, const Sbx__V1__CreateSandbox *req, struct sandbox *old,
                         const struct caller *caller, uint8_t **packed, size_t *packed_len,
                         struct policy_objects *objs, char *err, size_t errlen) {
        /* Its groups are not kept (sandbox_set_creator): judged without them. */
        struct caller owner = {.uid = old->owner_uid,
                               .gid = old->owner_gid,
                               .pid = caller->pid,
                               .client_name = caller->client_name,
                               .conn_id = caller->conn_id};
        int r;

        if (caller->uid == old->owner_uid)
                return policy_effective(d, req, old->id, caller, packed, packed_len, objs, err,
                                        errlen);
        r = policy_effective(d, req, old->id, caller, packed, packed_len, objs, err, errlen);
        free(*packed);
        *packed = NULL;
        policy_objects_clear(objs);
        if (r == 0)
                r = policy_effective(d, req, old->id, &owner, packed, packed_len, objs, err,
                                     errlen);
        return r;
}

/* The new sandbox of restore rs: old's effective spec with rs's image (of digest) judged
 * again (judge_restore), set up under a directory name of its own, unrecorded, not findable;
 * restore_ready answers (perhaps before this returns). 0, or -errno with err when
 * nothing was made. */
static int restore_new(struct restore *rs, struct sandbox *old, const char *digest,
                       const struct caller *caller, char *err, size_t errlen) {
        struct sbxtab *t = rs->t;
        size_t len = sbx__v1__create_sandbox__get_packed_size(old->spec);
        uint8_t *buf = malloc(len ? len : 1), *packed = NULL;
        Sbx__V1__CreateSandbox *req = NULL;
        char gen[SBX_ID_MAX_BYTES + 1], place[SBX_ID_MAX_BYTES + 1];
        struct policy_objects objs;
        struct sandbox *nb = NULL;
        size_t packed_len = 0;
        int r = -ENOMEM;

        memset(&objs, 0, sizeof(objs));
        snprintf(err, errlen, "daemon out of memory");
        if (buf) {
                sbx__v1__create_sandbox__pack(old->spec, buf);
                req = sbx__v1__create_sandbox__unpack(NULL, len, buf);
        }
        if (req) {
                free(req->image);
                free(req->image_digest);
                /* A share user's name for it may name another image of the owner's, or
                 * none: recorded by its digest then, which means the same to both. */
                req->image = strdup(caller->uid == old->owner_uid ? rs->image : digest);
                req->image_digest = NULL;
                /* The image is its root now, as for a sandbox of the host's root: a host
                 * directory's (image "dir:PATH") is no longer. */
                if (req->policy && req->policy->root_dir) {
                        free(req->policy->root_dir);
                        req->policy->root_dir = NULL;
                }
                if (req->image)
                        r = judge_restore(t->d, req, old, caller, &packed, &packed_len, &objs,
                                          err, errlen);
        }
        if (r == 0 && !(nb = sandbox_alloc(t->d, old->id, packed, packed_len, old->owner_uid,
                                           old->created_ms))) {
                snprintf(err, errlen, "daemon out of memory");
                r = -ENOMEM;
        }
        sbxid_generate(gen, sizeof(gen));
        snprintf(place, sizeof(place), "~restore-%.40s", gen);
        if (r == 0 && (r = sandbox_place(nb, place)) < 0)
                snprintf(err, errlen, "daemon out of memory");
        if (r == 0)
                r = sandbox_open_image_named(nb, digest, old->owner_uid, err, errlen);
        if (req)
                sbx__v1__create_sandbox__free_unpacked(req, NULL);
        free(buf);
        free(packed);
        if (r < 0) {
                policy_objects_clear(&objs);
                if (nb) {
                        nb->image = sbimage_close(t->d, nb->image);
                        sandbox_discard(nb);
                }
                return r;
        }
        nb->owner_gid = old->owner_gid;
        nb->deadline_ms = old->deadline_ms;
        nb->idle_timeout_ms = old->idle_timeout_ms;
        nb->unrecorded = nb->pending = 1;
        sandbox_set_creator(nb, &old->creator);
        /* Counted as the owner's while it is set up, whatever the quota says: the one it
         * replaces gives its count back when it ends. */
        (void)quota_take(t->quota, QUOTA_SANDBOXES, nb->owner_uid, UINT_MAX, NULL);
        sandbox_list_add(&t->pending, nb);
        t->count++;
        t->live++;
        nb->over = table_over;
        nb->gone = table_gone;
        nb->gone_ud = t;
        nb->create_cb = restore_ready;
        nb->create_ud = rs;
        old->restoring = 1;
        sandbox_reserve_ptys_of(nb, old);
        sandbox_start(nb, &objs);
        return 0;
}

int sbxtab_restore(struct sbxd *d, struct sandbox *old, const char *image,
                   const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                   size_t errlen) {
        struct sbxtab *t = d->sandboxes;
        char digest[DIGEST_STR_BYTES];
        struct restore *rs;
        int r;

        if (d->shutting_down) {
                snprintf(err, errlen, "sbxd is shutting down; try again when it is back");
                return -ESHUTDOWN;
        }
        if (!image || !image[0]) {
                snprintf(err, errlen, "restore needs an image: a snapshot's name or digest");
                return -EINVAL;
        }
        if (old->view.state != SBX__V1__SANDBOX_STATE__READY || old->ending) {
                snprintf(err, errlen, "sandbox '%s' is %s; only a ready sandbox is restored",
                         old->id, names_state(old->view.state));
                return old->ending ? -ENODEV : -EAGAIN;
        }
        if (old->restoring) {
                snprintf(err, errlen,
                         "a restore of sandbox '%s' is under way; wait for its answer", old->id);
                return -EAGAIN;
        }
        r = restore_image(d, old, image, caller, digest, sizeof(digest), err, errlen);
        if (r < 0)
                return r;
        rs = calloc(1, sizeof(*rs));
        if (!rs || !(rs->image = strdup(image))) {
                free(rs);
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        rs->t = t;
        snprintf(rs->id, sizeof(rs->id), "%s", old->id);
        rs->cb = cb;
        rs->ud = ud;
        r = restore_new(rs, old, digest, caller, err, errlen);
        if (r < 0) {
                char why[512];
                snprintf(why, sizeof(why), "%s", err);
                restore_says(rs, r, why, err, errlen);
                restore_free(rs);
        }
        return r;
}

unsigned sbxtab_pool_holds(const struct sbxtab *t, const char *digest) {
        return t ? warm_image_holds(t->warm, digest) : 0;
}

void sbxtab_images_changed(struct sbxtab *t) {
        warm_images_changed(t->warm);
}

/* ---- all sandboxes at once ---------------------------------------------------------- */

static int sweep_one(struct sandbox *sb, void *ud) {
        sandbox_check_timer(sb);
        return 0;
}

/* Prunes the records of sandboxes ended more than --retention-days ago, at most hourly. */
static void prune_records(struct sbxtab *t) {
        struct sbxd *d = t->d;
        int64_t now = sbxd_now_unix_ms();
        int n;

        if (d->cfg->retention_days == 0 || now - t->last_prune_ms < SBXTAB_PRUNE_INTERVAL_MS)
                return;
        n = store_prune(d->store, now - (int64_t)d->cfg->retention_days * 24 * 3600 * 1000);
        t->last_prune_ms = now;
        if (n > 0)
                log_info("pruned the records of %d sandboxes ended more than %u days ago", n,
                         d->cfg->retention_days);
        else if (n < 0)
                log_warning("cannot prune old records: %s", store_last_error(d->store));
}

void sbxtab_sweep(struct sbxtab *t) {
        sbxtab_foreach(t, sweep_one, NULL);
        prune_records(t);
}

/* Restores' new sandboxes end (their restores fail: the sandboxes stay as they were). */
static void end_pending(struct sbxtab *t) {
        struct sandbox *sb, *next;

        for (sb = t->pending; sb; sb = next) {
                next = sb->next;
                sandbox_terminate(sb, "shutdown", NULL, NULL);
        }
}

static int shutdown_one(struct sandbox *sb, void *ud) {
        sandbox_terminate(sb, "shutdown", NULL, NULL);
        return 0;
}

void sbxtab_shutdown(struct sbxtab *t, void (*done)(void *ud), void *ud) {
        warm_stop(t->warm);
        if (t->count == 0 && warm_count(t->warm) == 0) {
                done(ud);
                return;
        }
        t->shutdown_done = done;
        t->shutdown_ud = ud;
        sbxtab_foreach(t, shutdown_one, NULL);
        end_pending(t);
        warm_end_all(t->warm);
}

/* A ready sandbox is left to the next daemon; any other ends. */
static int detach_one(struct sandbox *sb, void *ud) {
        if (sb->view.state == SBX__V1__SANDBOX_STATE__READY)
                sandbox_leave(sb);
        else
                sandbox_terminate(sb, "shutdown", NULL, NULL);
        return 0;
}

void sbxtab_detach_all(struct sbxtab *t, void (*done)(void *ud), void *ud) {
        warm_stop(t->warm);
        sbxtab_foreach(t, detach_one, NULL);
        end_pending(t);
        /* Warm ones are nobody's: they end (the next daemon makes its own). */
        warm_end_all(t->warm);
        if (t->count == 0 && warm_count(t->warm) == 0) {
                done(ud);
        } else {
                t->shutdown_done = done;
                t->shutdown_ud = ud;
        }
}

void sbxtab_warm_start(struct sbxtab *t) {
        warm_schedule(t->warm, 0);
}
