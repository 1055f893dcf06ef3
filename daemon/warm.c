/* warm.c: the warm pool (--warm, --warm-image); see warm.h.
 *
 * Creating a sandbox costs 5-15 ms, most of it waiting: the cgroup move of stage 0 waits
 * for an RCU grace period on cgroup v1, then the network namespace and the mounts. So
 * the daemon keeps --warm sandboxes of the default policy set up ahead. A create whose
 * Setup (what init builds the sandbox from) equals a warm one's but for its identity
 * claims it: the sandbox takes the client's id (its state directory is renamed; its
 * cgroup keeps its name, recorded as cgroup_path), limits, deadline and owner, its ptys
 * from the owner's budget, init takes the id as host name, the adoption socket and the
 * ptys (Claim: a remount of its devpts), and the record is written.
 * The pool is topped up SBX_WARM_REFILL_DELAY_MS later, off the client's way; after a
 * warm sandbox failed, not before SBX_WARM_RETRY_MS.
 *
 * The pool also keeps --spares spares: a sandbox of no request yet whose cgroup is made
 * and whose init's stage 0 has joined it (Join), waiting for a Setup. A create that no
 * warm sandbox matches takes one (warm_take_spare) and is set up from there: the cgroup
 * move, the longest wait of a cold setup on v1, was done ahead. Spares need cgroups:
 * without them there is nothing to do ahead.
 *
 * All spares but one (when there are two or more) are built ahead too: their init has
 * made the namespaces and the view's base (init.proto Setup.prebuild: the sandbox's
 * /proc, the read-only host root, /sys, /dev, /tmp) and answered Built. A create whose
 * policy fits that base (policy_fits_base: the host's /, no full network, the default
 * /tmp, no disk image) takes a built one, and its init only adds the policy's own part
 * (workspace, writable paths, denials, user): a cold policy in a third of the time.
 * The others (a root_dir, full network) take the plain one.
 *
 * A warm sandbox or a built spare keeps a copy of the host's mount table and of the
 * top-level entries of / from when it was made. Once either has changed (hostwatch.h),
 * it is no longer the sandbox a create makes now: a directory the host covered with a
 * mount would show its old content, a writable path on a new mount would not be there,
 * a filesystem the host unmounted would be kept alive. So it is ended: as soon as the
 * loop sees the change, or when a create would take it (the change may come in the
 * same loop turn), or when it becomes ready after any change while it was set up (a
 * mount and its unmount leave the table as it was, but its copy may hold the mount;
 * not told apart from the daemon's own image mounts, during which it is missed). For
 * SBX_SPARE_REBUILD_MS after that, no warm sandbox is made and spares are plain (then
 * replaced): a host that mounts all the time makes the pool rebuild at most once a
 * second. Without the watch (or openat2) no spare is built.
 *
 * A --warm-image REF=N keeps N warm sandboxes of the default policy made from REF, one
 * of the daemon's user's images (sbimage.h: its block of ids, its user). A create of an
 * image claims one when its Setup key equals the warm one's, image fields aside (the
 * writable root and the block are the sandbox's own), and the image the request names
 * among its caller's is the same content (the manifest digest): any user with that
 * content under any name. The claimed sandbox keeps its ids (no uid slot, no chown) and
 * takes the client's name for the image; its record gets the digest. Each top-up looks
 * REF up again: sandboxes of other content than REF names now (a newer pull), or of a
 * name the daemon's user no longer has, are ended; a missing REF is said once and
 * looked for again after the next pull (warm_images_changed). A create of an image no
 * warm sandbox matches takes a plain spare (never a built one: its base is the host's
 * root). */
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "hostwatch.h"
#include "images.h"
#include "log.h"
#include "names.h"
#include "policy.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbxd.h"
#include "sbxid.h"
#include "store.h"
#include "uidslot.h"

/* One --warm-image: its sandboxes are the pool's whose spec names ref. */
struct warm_image {
        const char *ref;   /* the config's */
        unsigned want;
        uint64_t retry_at; /* uv_now() before which none is made; UINT64_MAX: until a pull */
        int missing;       /* told once that sbxd's user has no image ref */
};

struct warm_pool {
        struct sbxd *d;
        struct warm_owner owner;
        struct sandbox *all; /* warm sandboxes (setting up or ready, unclaimed) and spares */
        unsigned n;
        unsigned n_spares; /* of them, spares */
        uv_timer_t refill; /* tops the pool up */
        int refill_inited; /* 0 not yet, 1 live, 2 closed for good */
        uint64_t retry_at; /* uv_now() before which no new warm one */
        struct hostwatch *watch; /* from the first spare on; NULL: none yet */
        int watch_failed;        /* the host cannot be watched: no spare is built */
        uint64_t build_after;    /* uv_now() before which new spares are plain */
        struct warm_image images[CONFIG_MAX_WARM_IMAGES];
        unsigned n_images;
};

/* A claim in progress: the names a warm sandbox takes, and what to undo. */
struct claim {
        Sbx__V1__CreateSandbox *spec; /* the request's effective spec, unpacked */
        char *old_dir, *new_dir, *new_ws;
        uint8_t *packed; /* an image's: the spec with its digest, as recorded */
        size_t packed_len;
};

int warm_new(struct sbxd *d, const struct warm_owner *owner, struct warm_pool **ret) {
        struct warm_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->d = d;
        p->owner = *owner;
        for (p->n_images = 0; p->n_images < d->cfg->n_warm_images; p->n_images++) {
                p->images[p->n_images].ref = d->cfg->warm_images[p->n_images].ref;
                p->images[p->n_images].want = d->cfg->warm_images[p->n_images].n;
        }
        *ret = p;
        return 0;
}

void warm_free(struct warm_pool *p) {
        free(p);
}

/* Ends a pool sandbox that is not the host as it is now; nothing is made ahead for
 * SBX_SPARE_REBUILD_MS (a host that changes all the time costs a rebuild a second). */
static void end_stale_one(struct warm_pool *p, struct sandbox *sb, const char *why) {
        sb->warm_given_up = 1; /* not a failure: no wait before the next */
        sandbox_end(sb, SBX__V1__SANDBOX_STATE__TERMINATED, why);
        p->build_after = uv_now(p->d->loop) + SBX_SPARE_REBUILD_MS;
}

/* Ends the warm sandboxes and built spares made before the host's generation gen (see
 * the top of this file). */
static void end_stale(struct warm_pool *p, uint64_t gen) {
        struct sandbox *sb;
        int n = 0;

        for (sb = p->all; sb; sb = sb->next) {
                if ((sb->spare && !sb->building) || sb->ending || sb->host_gen == gen)
                        continue;
                end_stale_one(p, sb, "the host changed since it was built");
                n++;
        }
        if (n > 0)
                log_debug("the host's mounts or / changed: %d warm sandbox(es) and built "
                          "spare(s) ended",
                          n);
}

/* A warm sandbox is ready or a spare built: it copied the host's mount table at some
 * moment since it was made, so any change seen since then, even one undone already (a
 * mount and its unmount), may be in its copy and not in the host's: it goes. */
static void on_pool_ready(void *ud, struct sandbox *sb) {
        struct warm_pool *p = ud;
        uint64_t events = 0;

        if (!p->watch)
                return;
        (void)hostwatch_gen(p->watch, &events);
        if (events != sb->host_events && !sb->ending) {
                log_debug("sbx=%s: the host changed while it was set up", sb->id);
                end_stale_one(p, sb, "the host changed while it was set up");
        }
}

/* The loop saw the host change (hostwatch.h). */
static void on_host_changed(void *ud) {
        struct warm_pool *p = ud;

        end_stale(p, hostwatch_gen(p->watch, NULL));
}

/* The host's generation now (and, events not NULL, the changes seen: hostwatch.h),
 * watching it from the first call on; 0 when it cannot be watched. */
static uint64_t host_gen(struct warm_pool *p, uint64_t *events) {
        if (!p->watch && !p->watch_failed &&
            hostwatch_start(p->d, on_host_changed, p, &p->watch) < 0)
                p->watch_failed = 1;
        return p->watch ? hostwatch_gen(p->watch, events) : 0;
}

unsigned warm_count(const struct warm_pool *p) {
        return p->n;
}

unsigned warm_image_holds(const struct warm_pool *p, const char *digest) {
        const struct sandbox *sb;
        unsigned n = 0;

        for (sb = p->all; sb; sb = sb->next)
                n += sb->image && sb->image->held && strcmp(sb->image->digest, digest) == 0;
        return n;
}

int warm_has_pidns(const struct warm_pool *p, dev_t dev, ino_t ino) {
        return sandbox_list_has_pidns(p->all, dev, ino);
}

/* ---- the pool's list ---------------------------------------------------------------- */

static void unlink_warm(struct warm_pool *p, struct sandbox *sb) {
        sandbox_list_del(&p->all, sb);
        p->n--;
        if (sb->spare)
                p->n_spares--;
}

/* A warm sandbox has ended: it failed (the pool then waits before it tries again), was
 * given up for room, or the daemon is stopping. */
static void pool_gone(void *ud, struct sandbox *sb) {
        struct warm_pool *p = ud;

        unlink_warm(p, sb);
        sb->image = sbimage_close(p->d, sb->image);
        if (!sb->warm_given_up)
                p->retry_at = uv_now(p->d->loop) + SBX_WARM_RETRY_MS;
        warm_schedule(p, SBX_WARM_REFILL_DELAY_MS);
        p->owner.gone(p->owner.ud);
}

static void link_warm(struct warm_pool *p, struct sandbox *sb) {
        sandbox_list_add(&p->all, sb);
        p->n++;
        if (sb->spare)
                p->n_spares++;
        sb->gone = pool_gone;
        sb->gone_ud = p;
        sb->pool_ready = on_pool_ready;
}

/* ---- topping up --------------------------------------------------------------------- */

/* 1 when the next spare is to be built ahead: all but one plain spare when the pool
 * keeps two or more (see the top of this file). */
static int spare_to_build(const struct warm_pool *p) {
        const struct sandbox *sb;

        /* A built spare's init opens host paths in the tree it kept (openat2), and must
         * be ended when the host changes. */
        if (uv_now(p->d->loop) < p->build_after || p->watch_failed || !p->d->features.openat2)
                return 0;
        if (p->d->cfg->spares < 2)
                return 1;
        for (sb = p->all; sb; sb = sb->next)
                if (sb->spare && !sb->building && !sb->ending)
                        return 1;
        return 0;
}

/* One more warm sandbox of the default policy (from image: of that image of the
 * daemon's user's; or, spare, a spare: set up later for whatever request takes it),
 * owned by the daemon. 0 or -errno (-ENOENT: no such image). */
static int warm_create(struct warm_pool *p, int spare, const char *image) {
        Sbx__V1__CreateSandbox req = SBX__V1__CREATE_SANDBOX__INIT;
        struct sbxd *d = p->d;
        struct caller k = {.uid = d->euid, .gid = d->egid, .pid = getpid(), .client_name = "sbxd"};
        char id[SBX_ID_MAX_BYTES + 1], gen[SBX_ID_MAX_BYTES + 1], err[512];
        struct policy_objects objs;
        struct sandbox *sb = NULL;
        uint8_t *packed = NULL;
        size_t packed_len = 0;
        int r, build;

        memset(&objs, 0, sizeof(objs));
        /* '~' is not allowed in client ids: no request can name a warm sandbox. A
         * generated id (time and randomness) keeps the pools of two daemons apart: a
         * claimed sandbox keeps its cgroup's name across restarts. */
        sbxid_generate(gen, sizeof(gen));
        snprintf(id, sizeof(id), "%s%.40s", spare ? "~spare-" : "~warm-", gen);
        req.image = (char *)(uintptr_t)image;
        r = policy_effective(d, &req, id, &k, &packed, &packed_len, &objs, err, sizeof(err));
        if (r == 0 &&
            !(sb = sandbox_alloc(d, id, packed, packed_len, (uid_t)-1, sbxd_now_unix_ms()))) {
                snprintf(err, sizeof(err), "daemon out of memory");
                policy_objects_clear(&objs);
                r = -ENOMEM;
        }
        free(packed);
        /* An image's: its block of ids and user are its own, kept when it is claimed. */
        if (r == 0 && image && (r = sandbox_open_image(sb, d->euid, err, sizeof(err))) < 0) {
                sb->image = sbimage_close(d, sb->image);
                policy_objects_clear(&objs);
                sandbox_discard(sb);
        }
        if (r < 0) {
                if (r != -ENOENT || !image)
                        log_warning("cannot set up a warm sandbox%s%s: %s%s", image ? " of " : "",
                                    image ? image : "", r == -ENOSYS ? "UNIMPLEMENTED: " : "",
                                    err);
                return r;
        }
        sb->owner_gid = (gid_t)-1;
        sb->warm = 1;
        sb->spare = spare;
        sb->deadline_ms = INT64_MAX; /* none until it is claimed */
        sandbox_set_creator(sb, &k);
        /* It gets its uid when it is claimed, from its owner's (Claim). */
        if (!image && d->features.rootless)
                sandbox_set_run_ids(sb, 0, 0);
        else if (!image)
                sandbox_set_run_ids(sb, SBX_WARM_RUN_ID, SBX_WARM_RUN_ID);
        sb->host_gen = host_gen(p, &sb->host_events); /* the watch, before spare_to_build */
        build = spare && spare_to_build(p); /* before sb is in the list */
        link_warm(p, sb);
        if (spare) {
                policy_objects_clear(&objs); /* the default policy names no host path */
                (void)sandbox_prepare(sb, build); /* a failure ends it, which tells the pool */
        } else {
                sandbox_start(sb, &objs);
        }
        return 0;
}

/* How many spares the pool keeps: none without cgroups (nothing to do ahead). */
static unsigned spares_wanted(const struct warm_pool *p) {
        return p->d->cgroups->version == CGROUP_NONE ? 0 : p->d->cfg->spares;
}

static int give_up(struct warm_pool *p, int spares_only);

/* Ends the plain spares beyond the one the pool wants (spare_to_build): they were made
 * while built ones could not be, and built ones replace them. */
static void trim_plain(struct warm_pool *p) {
        unsigned keep = p->d->cfg->spares >= 2 ? 1 : 0, n = 0;
        struct sandbox *sb;

        for (sb = p->all; sb; sb = sb->next) {
                if (!sb->spare || sb->building || sb->ending || n++ < keep)
                        continue;
                sb->warm_given_up = 1;
                sandbox_end(sb, SBX__V1__SANDBOX_STATE__TERMINATED, "a built spare replaces it");
        }
}

/* Whether warm sandbox sb is of image ref (NULL: of the host's root). */
static int of_image(const struct sandbox *sb, const char *ref) {
        if (!ref)
                return !sb->image;
        return sb->image && sb->spec->image && strcmp(sb->spec->image, ref) == 0;
}

/* How many warm sandboxes (not spares) of image ref (NULL: of the host's root) the pool
 * has, setting up, ready or ending. */
static unsigned count_warm(const struct warm_pool *p, const char *ref) {
        const struct sandbox *sb;
        unsigned n = 0;

        for (sb = p->all; sb; sb = sb->next)
                n += !sb->spare && of_image(sb, ref);
        return n;
}

/* Ends the warm sandboxes of wi made from another image than its name gives now (a
 * newer pull of it), or all of them when sbxd's user has no image of that name any more
 * (said once). */
static void check_image(struct warm_pool *p, struct warm_image *wi) {
        struct imagestore_image img;
        struct sandbox *sb;
        char err[256];
        int found;

        memset(&img, 0, sizeof(img));
        found = images_find(p->d, p->d->euid, wi->ref, &img, err, sizeof(err)) == 0;
        if (!found && !wi->missing)
                log_warning("--warm-image %s: %s, as uid %u (sbxd's own user); no sandbox of "
                            "it is kept warm until then",
                            wi->ref, err, (unsigned)p->d->euid);
        wi->missing = !found;
        if (!found)
                wi->retry_at = UINT64_MAX; /* until a pull (warm_images_changed) */
        for (sb = p->all; sb; sb = sb->next)
                if (!sb->spare && !sb->ending && of_image(sb, wi->ref) &&
                    (!found || strcmp(sb->image->digest, img.manifest) != 0)) {
                        sb->warm_given_up = 1;
                        sandbox_end(sb, SBX__V1__SANDBOX_STATE__TERMINATED,
                                    found ? "its image's name names another image now"
                                          : "its image's name names no image now");
                }
        imagestore_image_free(&img);
}

/* The --warm-image that wants another sandbox now, or NULL. */
static struct warm_image *image_short(struct warm_pool *p, uint64_t now) {
        unsigned i;

        for (i = 0; i < p->n_images; i++)
                if (now >= p->images[i].retry_at &&
                    count_warm(p, p->images[i].ref) < p->images[i].want)
                        return &p->images[i];
        return NULL;
}

/* One more warm sandbox of wi (check_image found its image). 0, or -errno: it waits,
 * and the others go on; until the next pull or removal when it cannot be made here at
 * all (the daemon has no blocks of ids, the image's User is none of the image's). */
static int image_create(struct warm_pool *p, struct warm_image *wi, uint64_t now) {
        int r;

        /* Root mode: the pool never takes the last free block of ids (sbimage.h), a
         * client's create of another image or policy needs one; looked at again later
         * (a block frees when a sandbox has gone). */
        if (sbimage_free_blocks(p->d) <= SBX_WARM_BLOCKS_LEFT) {
                log_debug("--warm-image %s: no block of ids to spare", wi->ref);
                wi->retry_at = now + SBX_WARM_RETRY_MS;
                return -EAGAIN;
        }
        r = warm_create(p, 0, wi->ref);

        if (r == -ENOENT)
                check_image(p, wi); /* gone meanwhile: said once */
        else if (r == -ENOSYS || r == -EINVAL)
                wi->retry_at = UINT64_MAX; /* no blocks of ids here, or the image's User
                                            * is none of its: said; until a pull */
        else if (r < 0)
                wi->retry_at = now + SBX_WARM_RETRY_MS;
        return r;
}

void warm_images_changed(struct warm_pool *p) {
        unsigned i;

        for (i = 0; i < p->n_images; i++)
                if (p->images[i].retry_at == UINT64_MAX)
                        p->images[i].retry_at = 0;
        warm_schedule(p, SBX_WARM_REFILL_DELAY_MS);
}

static void on_refill(uv_timer_t *h) {
        struct warm_pool *p = h->data;
        struct sbxd *d = p->d;
        uint64_t now = uv_now(d->loop);
        unsigned warm = d->cfg->warm, i;
        struct warm_image *wi;

        if (d->shutting_down)
                return;
        if (now < p->retry_at) {
                uv_timer_start(&p->refill, on_refill, p->retry_at - now, 0);
                return;
        }
        /* While the host changes (see the top of this file) no warm sandbox is made,
         * and spares are plain; after that, plain spares beyond the one wanted make
         * room for built ones. */
        if (now < p->build_after)
                warm = 0;
        else
                trim_plain(p);
        for (i = 0; i < p->n_images && now >= p->build_after; i++)
                check_image(p, &p->images[i]);
        /* Warm sandboxes first (a create they match takes about a millisecond), then
         * spares: a warm one wanted and no room ends a spare, and is made once the
         * spare has gone (pool_gone schedules the next top-up). */
        wi = now < p->build_after ? NULL : image_short(p, now);
        if ((count_warm(p, NULL) < warm || wi) && p->n_spares > 0 &&
            !p->owner.has_room(p->owner.ud))
                give_up(p, 1);
        while (p->owner.has_room(p->owner.ud)) {
                int r = 0;
                if (count_warm(p, NULL) < warm)
                        r = warm_create(p, 0, NULL);
                else if (now >= p->build_after && (wi = image_short(p, now)))
                        (void)image_create(p, wi, now); /* a failure waits alone */
                else if (p->n_spares < spares_wanted(p))
                        r = warm_create(p, 1, NULL);
                else
                        break;
                if (r < 0) {
                        p->retry_at = now + SBX_WARM_RETRY_MS;
                        uv_timer_start(&p->refill, on_refill, SBX_WARM_RETRY_MS, 0);
                        return;
                }
        }
        wi = NULL;
        for (i = 0; i < p->n_images; i++)
                if (p->images[i].retry_at > now && p->images[i].retry_at != UINT64_MAX &&
                    (!wi || p->images[i].retry_at < wi->retry_at))
                        wi = &p->images[i];
        if (now < p->build_after)
                uv_timer_start(&p->refill, on_refill, p->build_after - now, 0);
        else if (wi)
                uv_timer_start(&p->refill, on_refill, wi->retry_at - now, 0);
}

void warm_schedule(struct warm_pool *p, uint64_t delay_ms) {
        if ((p->d->cfg->warm == 0 && p->n_images == 0 && spares_wanted(p) == 0) ||
            p->d->shutting_down ||
            p->refill_inited == 2)
                return;
        if (!p->refill_inited) {
                if (uv_timer_init(p->d->loop, &p->refill) < 0)
                        return;
                p->refill.data = p;
                uv_unref((uv_handle_t *)&p->refill); /* never keeps the loop alive */
                p->refill_inited = 1;
        }
        /* A top-up due later (the end of a rebuild window) comes sooner. */
        if (!uv_is_active((uv_handle_t *)&p->refill) ||
            uv_timer_get_due_in(&p->refill) > delay_ms)
                uv_timer_start(&p->refill, on_refill, delay_ms, 0);
}

void warm_stop(struct warm_pool *p) {
        hostwatch_stop(p->watch);
        p->watch = NULL;
        p->watch_failed = 1; /* never again */
        if (p->refill_inited == 1) {
                uv_timer_stop(&p->refill);
                uv_close((uv_handle_t *)&p->refill, NULL);
                p->refill_inited = 2; /* closed: never again */
        }
}

void warm_end_all(struct warm_pool *p) {
        struct sandbox *sb, *next;
        for (sb = p->all; sb; sb = next) {
                next = sb->next;
                sandbox_terminate(sb, "shutdown", NULL, NULL);
        }
}

/* Ends one sandbox of the pool to make room, a spare first (spares_only: only a
 * spare). 1 when one was ended. */
static int give_up(struct warm_pool *p, int spares_only) {
        struct sandbox *sb, *pick = NULL;

        for (sb = p->all; sb; sb = sb->next)
                if (!sb->ending && (!pick || (sb->spare && !pick->spare)))
                        pick = sb;
        if (!pick || (spares_only && !pick->spare))
                return 0;
        pick->warm_given_up = 1;
        sandbox_end(pick, SBX__V1__SANDBOX_STATE__TERMINATED,
                    pick->spare ? "room for a warm sandbox or a client" : "room for a client");
        return 1;
}

int warm_give_up_block(struct warm_pool *p) {
        struct sandbox *sb, *pick = NULL;

        for (sb = p->all; sb; sb = sb->next) {
                if (!sb->image)
                        continue;
                if (sb->ending)
                        return 1; /* its block comes back when it has gone */
                pick = sb;
        }
        if (!pick)
                return 0;
        pick->warm_given_up = 1;
        sandbox_end(pick, SBX__V1__SANDBOX_STATE__TERMINATED, "its block of ids for a client");
        return 1;
}

void warm_give_up_one(struct warm_pool *p) {
        const struct sandbox *sb;

        /* One already ending makes the room. */
        for (sb = p->all; sb; sb = sb->next)
                if (sb->ending)
                        return;
        (void)give_up(p, 0);
}

/* ---- claiming ----------------------------------------------------------------------- */

/* Whether a warm sandbox's init has gone in a way the loop has not handled yet (its
 * pidfd or channel says so): a claim passes over it. */
static int init_gone(const struct sandbox *sb) {
        struct pollfd pf[2] = {{.fd = sb->chan.fd, .events = 0},
                               {.fd = sb->view.init_pidfd, .events = POLLIN}};
        nfds_t n = sb->view.init_pidfd >= 0 ? 2 : 1;

        if (sb->chan.fd < 0)
                return 1;
        if (poll(pf, n, 0) <= 0)
                return 0;
        return (pf[0].revents & (POLLHUP | POLLERR)) || (n == 2 && (pf[1].revents & POLLIN));
}

static int claimable(const struct sandbox *sb) {
        return sb->view.state == SBX__V1__SANDBOX_STATE__READY && !sb->ending;
}

/* Whether sb is of the image whose manifest digest is want (NULL: of the host's root). */
static int of_digest(const struct sandbox *sb, const char *want) {
        if (!want)
                return !sb->image;
        return sb->image && strcmp(sb->image->digest, want) == 0;
}

/* A ready warm sandbox whose Setup the request's (spec, of uid) would equal, or NULL;
 * of an image, of the one that spec's image names among uid's (its content: the name
 * the pool knows it by may be another). */
static struct sandbox *find_match(struct warm_pool *p, Sbx__V1__CreateSandbox *spec, uid_t uid) {
        struct imagestore_image img;
        const char *want = NULL;
        struct sandbox *sb;
        uint8_t *key = NULL;
        size_t key_len = 0;
        char err[256];

        memset(&img, 0, sizeof(img));
        for (sb = p->all; sb && !claimable(sb); sb = sb->next)
                ;
        if (!sb)
                return NULL;
        if (spec->image && spec->image[0]) {
                if (p->n_images == 0 || images_find(p->d, uid, spec->image, &img, err,
                                                    sizeof(err)) < 0)
                        return NULL; /* a create from it says why */
                want = img.manifest;
        }
        if (sandbox_request_key(p->d, spec, &key, &key_len) < 0)
                sb = NULL;
        for (; sb; sb = sb->next)
                if (claimable(sb) && of_digest(sb, want) && sb->setup_key_len == key_len &&
                    memcmp(sb->setup_key, key, key_len) == 0 && !init_gone(sb))
                        break;
        free(key);
        imagestore_image_free(&img);
        return sb;
}

static void claim_clear(struct claim *c) {
        if (c->spec)
                sbx__v1__create_sandbox__free_unpacked(c->spec, NULL);
        free(c->old_dir);
        free(c->new_dir);
        free(c->new_ws);
        free(c->packed);
        memset(c, 0, sizeof(*c));
}

/* The state directory sb has (old_dir) and the one it takes for id. 0 or -ENOMEM. */
static int claim_names(struct warm_pool *p, struct sandbox *sb, const char *id, struct claim *c) {
        c->old_dir = strdup(sb->workspace);
        c->new_ws = sandbox_workspace_path(p->d, id);
        c->new_dir = c->new_ws ? strdup(c->new_ws) : NULL;
        if (!c->old_dir || !c->new_dir)
                return -ENOMEM;
        /* The state directories: the workspaces' parents. */
        *strrchr(c->old_dir, '/') = '\0';
        *strrchr(c->new_dir, '/') = '\0';
        return 0;
}

/* The same chown of /workspace as the sandbox sees it, which is not the host directory
 * when it is a tmpfs of its own (a disk limit without loop devices, disk.h). 0 or -1. */
static int chown_inside(struct sandbox *sb, uid_t uid, gid_t gid) {
        if (sb->view.root_fd < 0)
                return 0;
        return fchownat(sb->view.root_fd, "workspace", uid, gid, AT_SYMLINK_NOFOLLOW);
}

/* Gives back the uid a claim took (root mode): sb is the daemon's again. */
static void unclaim_uid(struct warm_pool *p, struct uidslots *slots, struct sandbox *sb) {
        if (sb->uid_slot < 0)
                return;
        uidslot_release(slots, sb->uid_slot);
        sb->uid_slot = -1;
        sandbox_set_run_ids(sb, SBX_WARM_RUN_ID, SBX_WARM_RUN_ID);
        if (chown(sb->workspace, p->d->euid, p->d->egid) < 0 ||
            chown_inside(sb, p->d->euid, p->d->egid) < 0)
                log_warning("sbx=%s: chown %s: %s", sb->id, sb->workspace, strerror(errno));
}

/* Its uid from the owner's slots (root mode), and its workspace theirs. 0 or -1. An
 * image's keeps its ids (its block's). */
static int claim_uid(struct warm_pool *p, struct uidslots *slots, struct sandbox *sb, uid_t owner) {
        char err[256];
        uid_t uid;
        int slot;

        if (p->d->features.rootless || sb->image)
                return 0;
        slot = uidslot_alloc(slots, p->d->store, owner, err, sizeof(err));
        if (slot < 0) {
                log_warning("sbx=%s: cannot claim: %s", sb->id, err);
                return -1;
        }
        uid = uidslot_uid(slots, (unsigned)slot);
        if (chown(sb->workspace, uid, uid) < 0 || chown_inside(sb, uid, uid) < 0) {
                log_warning("sbx=%s: cannot claim: chown %s: %s", sb->id, sb->workspace,
                            strerror(errno));
                uidslot_release(slots, slot);
                return -1;
        }
        sb->uid_slot = slot;
        sandbox_set_run_ids(sb, uid, uid);
        return 0;
}

/* An image's: the request's spec with the image's digest, packed as recorded (a daemon
 * that adopts it holds that very image). 0 or -ENOMEM. */
static int claim_digest(struct sandbox *sb, struct claim *c) {
        if (!sb->image)
                return 0;
        free(c->spec->image_digest);
        c->spec->image_digest = strdup(sb->image->digest);
        c->packed_len = sbx__v1__create_sandbox__get_packed_size(c->spec);
        c->packed = malloc(c->packed_len ? c->packed_len : 1);
        if (!c->spec->image_digest || !c->packed)
                return -ENOMEM;
        sbx__v1__create_sandbox__pack(c->spec, c->packed);
        return 0;
}

/* The record of the claimed sandbox, as the client's; its times become the record's.
 * 0 or -errno with err (nothing changed). */
static int record_claim(struct warm_pool *p, struct sandbox *sb, const char *id,
                        const uint8_t *packed, size_t packed_len, const struct caller *caller,
                        const struct claim *c, char *err, size_t errlen) {
        struct store_sandbox rec;
        int r;

        memset(&rec, 0, sizeof(rec));
        rec.id = id;
        rec.owner_uid = caller->uid;
        rec.state = names_state(SBX__V1__SANDBOX_STATE__READY);
        rec.created_ms = sbxd_now_unix_ms();
        rec.deadline_ms = rec.created_ms + (int64_t)c->spec->timeout_ms;
        rec.idle_timeout_ms = c->spec->has_idle_timeout_ms ? c->spec->idle_timeout_ms : 0;
        rec.spec = packed;
        rec.spec_len = packed_len;
        rec.init_pid = sb->view.init_pid;
        rec.workspace_dir = c->new_ws;
        rec.cgroup_path = sb->cg ? sb->cg_name : "";
        rec.run_uid = sb->run_uid;
        rec.caller_pid = (uint32_t)caller->pid;
        rec.client_name = caller->client_name;
        r = store_sandbox_insert(p->d->store, &rec);
        if (r < 0) {
                snprintf(err, errlen, "cannot record sandbox '%s': %s", id,
                         r == -EEXIST ? "id already used" : store_last_error(p->d->store));
                return r;
        }
        sb->created_ms = rec.created_ms;
        sb->deadline_ms = rec.deadline_ms;
        sb->idle_timeout_ms = rec.idle_timeout_ms;
        return 0;
}

/* sb (warm or a spare) leaves the pool as sandbox id of owner: its id, workspace path
 * ws and spec (both taken) are the client's from here on. */
static void take_identity(struct warm_pool *p, struct sandbox *sb, const char *id, char *ws,
                          Sbx__V1__CreateSandbox *spec, uid_t owner) {
        unlink_warm(p, sb);
        sb->warm = sb->spare = 0;
        sb->pool_ready = NULL;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        free(sb->workspace);
        sb->workspace = ws;
        sb->owner_uid = owner; /* before the spec: its proxy takes the owner with the rules */
        sandbox_set_spec(sb, spec);
}

/* It is the client's sandbox from here on: out of the pool, with the client's id,
 * workspace path, spec, owner and limits. */
static void become_clients(struct warm_pool *p, struct sandbox *sb, const char *id,
                           const struct caller *caller, struct claim *c) {
        log_info("sbx=%s: claimed %s for uid %u (init pid %d, uid %u)", id, sb->id,
                 (unsigned)caller->uid, (int)sb->view.init_pid, (unsigned)sb->run_uid);
        take_identity(p, sb, id, c->new_ws, c->spec, caller->uid);
        c->new_ws = NULL;
        c->spec = NULL;
        if (sb->image && sbimage_rename(sb->image, sb->spec->image, c->new_dir) < 0)
                log_warning("sbx=%s: out of memory: its image is still named %s", id,
                            sb->image->name);
        free(sb->setup_key);
        sb->setup_key = NULL;
        sb->setup_key_len = 0;
        sb->owner_gid = caller->gid;
        sandbox_set_creator(sb, caller);
        sandbox_apply_limits(sb);
}

int warm_claim(struct warm_pool *p, struct uidslots *slots, const char *id, const uint8_t *packed,
               size_t packed_len, const struct caller *caller, struct sandbox **ret, char *err,
               size_t errlen) {
        struct claim c = {0};
        struct sandbox *sb;
        int r = 0;

        if (!p->all || !(c.spec = sbx__v1__create_sandbox__unpack(NULL, packed_len, packed)))
                return 0;
        end_stale(p, host_gen(p, NULL)); /* none made before the host changed */
        sb = find_match(p, c.spec, caller->uid);
        if (!sb || claim_names(p, sb, id, &c) < 0 || claim_digest(sb, &c) < 0 ||
            claim_uid(p, slots, sb, caller->uid) < 0)
                goto out;
        if (rename(c.old_dir, c.new_dir) < 0) {
                log_warning("sbx=%s: cannot claim: rename %s: %s", sb->id, c.old_dir,
                            strerror(errno));
                unclaim_uid(p, slots, sb);
                goto out;
        }
        r = record_claim(p, sb, id, c.packed ? c.packed : packed,
                         c.packed ? c.packed_len : packed_len, caller, &c, err, errlen);
        if (r < 0) {
                (void)rename(c.new_dir, c.old_dir);
                unclaim_uid(p, slots, sb);
                goto out;
        }
        become_clients(p, sb, id, caller, &c);
        *ret = sb;
        r = 1;
out:
        claim_clear(&c);
        return r;
}

void warm_finish_claim(struct warm_pool *p, struct sandbox *sb,
                       void (*cb)(void *ud, struct sandbox *sb, int err, const char *msg),
                       void *ud) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Claim claim = SBX__INIT__V1__CLAIM__INIT;
        int grace = p->d->cfg->adopt_grace_ms != 0;
        int adopt_fd = grace ? sandbox_adopt_listen(sb) : -1, r;

        claim.hostname = sb->id;
        /* Built with SBX_SANDBOX_PTYS before its owner was known: init remounts its
         * devpts with what the owner's budget gives before it starts anything. */
        sandbox_reserve_ptys(sb);
        claim.has_ptys = 1;
        claim.ptys = sb->ptys;
        if (!p->d->features.rootless && !sb->image) { /* an image's keeps its ids */
                claim.has_run_uid = claim.has_run_gid = 1;
                claim.run_uid = sb->run_uid;
                claim.run_gid = sb->run_gid;
        }
        if (adopt_fd >= 0) {
                claim.has_adoptable = claim.has_adopt_grace_ms = 1;
                claim.adoptable = 1;
                claim.adopt_grace_ms = (uint32_t)p->d->cfg->adopt_grace_ms;
        } else if (grace) {
                sandbox_warn(sb, "this sandbox cannot be re-adopted by a restarted daemon");
        }
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_CLAIM;
        msg.claim = &claim;
        sb->create_cb = cb;
        sb->create_ud = ud;
        r = initchan_send(&sb->chan, &msg, adopt_fd >= 0 ? &adopt_fd : NULL, adopt_fd >= 0 ? 1 : 0);
        if (adopt_fd >= 0)
                close(adopt_fd); /* init holds it now */
        warm_schedule(p, SBX_WARM_REFILL_DELAY_MS);
        if (r < 0)
                return; /* the sandbox fails, and answers the client when it has ended */
        sandbox_touch(sb);
        sandbox_arm_timer(sb);
        /* Answered at once (the reply goes out after the record's commit). */
        sb->create_cb = NULL;
        cb(ud, sb, 0, NULL);
}

/* ---- spares ------------------------------------------------------------------------- */

/* A spare stage 0 passes over: ending, not prepared (its Join was not sent), or gone. */
static int spare_usable(const struct sandbox *sb) {
        return sb->spare && sb->prepared && !sb->ending && !init_gone(sb);
}

/* The spare for a request of effective spec: the oldest built one whose base it fits
 * (the list is newest first; never for an image, whose root is no base of the host's),
 * else the oldest plain one, else NULL. Built spares made before the daemon's mount
 * table changed are ended first (pool_gone tops the pool up). */
static struct sandbox *pick_spare(struct warm_pool *p, const Sbx__V1__CreateSandbox *spec) {
        struct sandbox *built = NULL, *plain = NULL, *o;
        int image = spec->image && spec->image[0];

        end_stale(p, host_gen(p, NULL));
        for (o = p->all; o; o = o->next) {
                if (!spare_usable(o))
                        continue;
                if (!o->building)
                        plain = o;
                else if (o->built && !image && policy_fits_base(p->d, o->spec, spec))
                        built = o;
        }
        return built ? built : plain;
}

struct sandbox *warm_take_spare(struct warm_pool *p, const char *id, const uint8_t *packed,
                                size_t packed_len, uid_t owner) {
        Sbx__V1__CreateSandbox *spec;
        struct sandbox *sb;
        char *ws;

        if (!p->all)
                return NULL;
        spec = sbx__v1__create_sandbox__unpack(NULL, packed_len, packed);
        sb = spec ? pick_spare(p, spec) : NULL;
        ws = sb ? sandbox_workspace_path(p->d, id) : NULL;
        if (!sb || !ws) {
                if (spec)
                        sbx__v1__create_sandbox__free_unpacked(spec, NULL);
                free(ws);
                return NULL;
        }
        log_debug("sbx=%s: takes the %s spare %s (init pid %d)", id,
                  sb->building ? "built" : "plain", sb->id, (int)sb->proc.pid);
        take_identity(p, sb, id, ws, spec, owner);
        sb->gone = NULL;
        sb->created_ms = sbxd_now_unix_ms();
        sb->idle_timeout_ms = spec->has_idle_timeout_ms ? spec->idle_timeout_ms : 0;
        warm_schedule(p, SBX_WARM_REFILL_DELAY_MS);
        return sb;
}

static void dropped_gone(void *ud, struct sandbox *sb) {
}

void warm_drop_spare(struct warm_pool *p, struct sandbox *sb) {
        sb->warm = 1; /* unrecorded: its end writes nothing */
        sb->over = NULL;
        sb->gone = dropped_gone;
        sb->gone_ud = p;
        sandbox_end(sb, SBX__V1__SANDBOX_STATE__TERMINATED, "its create failed");
}
