/* egressshare.c: what the allowlist proxies of all sandboxes share: the descriptor
 * budgets, the turns of name lookups and the hosts file; see egressshare.h.
 *
 * The descriptors are counted in d->quota (QUOTA_PROXY_FDS). The lookups are counted
 * here, with the queue of each uid: a small array with one entry per uid whose proxies
 * ever looked up a name or were refused (a host has few), looked up by a linear scan
 * and never shrunk, like quota.c's. */
#include "egressshare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "hostsfile.h"
#include "log.h"
#include "quota.h"
#include "sbxd.h"

#define HOSTS_PATH "/etc/hosts"

/* One uid: its lookups under way, those waiting (oldest first), and its refusals since
 * the proxies last took a connection of it. */
struct uid_turns {
        uid_t uid;
        unsigned running;
        struct egressshare_lookup *head, *tail;
        unsigned refused;
};

struct egressshare {
        unsigned refs;
        struct quota *q;
        struct egressshare_bounds b;
        struct uid_turns *v;
        size_t n, cap;
        unsigned running; /* lookups under way, all uids */
        uint64_t next_order;
        int dispatching;
        struct hostsfile hosts;
        int hosts_warned;
};

/* ---- the bounds --------------------------------------------------------------------- */

void egressshare_derive(uint64_t nofile, unsigned threads, uint32_t fds_per_uid_flag,
                        uint32_t lookups_per_uid_flag, struct egressshare_bounds *ret) {
        uint64_t floor = nofile / 2 < EGRESS_FDS_RESERVE_MIN ? nofile / 2 : EGRESS_FDS_RESERVE_MIN;
        unsigned slow = (threads + 1) / 2; /* libuv's cap on slow work (threadpool.c) */

        memset(ret, 0, sizeof(*ret));
        ret->nofile = nofile;
        ret->fds_reserve = nofile / EGRESS_FDS_RESERVE_SHARE;
        if (ret->fds_reserve < floor)
                ret->fds_reserve = floor;
        ret->fds = nofile - ret->fds_reserve;
        ret->fds_per_uid = fds_per_uid_flag ? fds_per_uid_flag : ret->fds / EGRESS_PER_UID_SHARE;
        if (ret->fds_per_uid > ret->fds)
                ret->fds_per_uid = ret->fds;
        ret->lookups = slow ? slow : 1;
        ret->lookups_per_uid =
                lookups_per_uid_flag ? lookups_per_uid_flag : ret->lookups / EGRESS_PER_UID_SHARE;
        if (ret->lookups_per_uid == 0)
                ret->lookups_per_uid = 1;
        if (ret->lookups_per_uid > ret->lookups)
                ret->lookups_per_uid = ret->lookups;
}

unsigned egressshare_uv_threads(void) {
        /* As libuv reads it (threadpool.c, init_threads): atoi, 0 is 1, capped. */
        const char *v = getenv("UV_THREADPOOL_SIZE");
        unsigned n = v ? (unsigned)atoi(v) : EGRESS_UV_THREADS_DEFAULT;

        if (n == 0)
                n = 1;
        return n > EGRESS_UV_THREADS_MAX ? EGRESS_UV_THREADS_MAX : n;
}

int egressshare_new(struct quota *q, const struct egressshare_bounds *b, struct egressshare **ret) {
        struct egressshare *sh = calloc(1, sizeof(*sh));

        if (!sh)
                return -ENOMEM;
        sh->q = q;
        sh->b = *b;
        *ret = sh;
        return 0;
}

struct egressshare *egressshare_free(struct egressshare *sh) {
        if (sh) {
                hostsfile_clear(&sh->hosts);
                free(sh->v);
                free(sh);
        }
        return NULL;
}

struct egressshare *egressshare_ref(struct sbxd *d) {
        struct egressshare_bounds b;
        struct rlimit rl = {0};
        uint64_t nofile;

        if (d->proxies) {
                d->proxies->refs++;
                return d->proxies;
        }
        if (!d->quota)
                return NULL;
        /* main() raised the soft limit to the hard one at start. */
        nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 1024u;
        if (nofile > (1u << 30))
                nofile = 1u << 30;
        egressshare_derive(nofile, egressshare_uv_threads(), d->cfg->max_proxy_fds_per_uid,
                           d->cfg->max_lookups_per_uid, &b);
        if (egressshare_new(d->quota, &b, &d->proxies) < 0)
                return NULL;
        d->proxies->refs = 1;
        log_info("allowlist proxies: at most %llu descriptors (open-file limit %llu, %llu kept "
                 "for the rest), %llu per uid; %u name lookups under way, %u per uid",
                 (unsigned long long)b.fds, (unsigned long long)b.nofile,
                 (unsigned long long)b.fds_reserve, (unsigned long long)b.fds_per_uid, b.lookups,
                 b.lookups_per_uid);
        if (d->cfg->max_proxy_fds_per_uid > b.fds || d->cfg->max_lookups_per_uid > b.lookups)
                log_notice("--max-proxy-fds-per-uid or --max-lookups-per-uid is above what all "
                           "proxies have: cut to that");
        return d->proxies;
}

void egressshare_unref(struct sbxd *d) {
        struct egressshare *sh = d->proxies;

        if (!sh || --sh->refs > 0)
                return;
        d->proxies = egressshare_free(sh);
}

/* uid's entry, made when missing; NULL when out of memory. */
static struct uid_turns *turns(struct egressshare *sh, uid_t uid) {
        size_t i;

        for (i = 0; i < sh->n; i++)
                if (sh->v[i].uid == uid)
                        return &sh->v[i];
        if (sh->n == sh->cap) {
                size_t nc = sh->cap ? sh->cap * 2 : 8;
                struct uid_turns *nv = realloc(sh->v, nc * sizeof(*nv));
                if (!nv)
                        return NULL;
                sh->v = nv;
                sh->cap = nc;
        }
        sh->v[sh->n] = (struct uid_turns){.uid = uid};
        return &sh->v[sh->n++];
}

/* ---- descriptors -------------------------------------------------------------------- */

/* Why a connection of uid is refused (r: quota_add's), into why. */
static void explain(const struct egressshare *sh, uid_t uid, int r, char *why, size_t len) {
        if (r == -EDQUOT)
                snprintf(why, len,
                         "uid %u's sandboxes hold %llu descriptors in proxy connections (%u "
                         "each), its bound (--max-proxy-fds-per-uid %llu)",
                         (unsigned)uid,
                         (unsigned long long)quota_amount(sh->q, QUOTA_PROXY_FDS, uid),
                         EGRESS_FDS_PER_CONNECTION, (unsigned long long)sh->b.fds_per_uid);
        else if (r == -ENOSPC)
                snprintf(why, len,
                         "the allowlist proxies hold %llu descriptors, their bound (the "
                         "daemon's open-file limit %llu less %llu kept for the rest)",
                         (unsigned long long)quota_total(sh->q, QUOTA_PROXY_FDS),
                         (unsigned long long)sh->b.nofile, (unsigned long long)sh->b.fds_reserve);
        else
                snprintf(why, len, "the daemon is out of memory");
}

int egressshare_take_fds(struct egressshare *sh, uid_t uid, const char *id, char *why, size_t len) {
        struct uid_turns *u = turns(sh, uid);
        int r = u ? quota_add(sh->q, QUOTA_PROXY_FDS, uid, EGRESS_FDS_PER_CONNECTION,
                              sh->b.fds_per_uid, sh->b.fds)
                  : -ENOMEM;

        if (r == 0) {
                if (u->refused)
                        log_notice("sbx=%s: the allowlist proxies take connections of uid %u "
                                   "again (%u refused meanwhile)",
                                   id, (unsigned)uid, u->refused);
                u->refused = 0;
                return 0;
        }
        explain(sh, uid, r, why, len);
        /* Once per run of refusals, not once per connection: a sandbox that connects in a
         * loop must not fill the log. */
        if (u && u->refused++ == 0)
                log_warning("sbx=%s: the allowlist proxies refuse new connections of uid %u: %s "
                            "(logged again when they take one)",
                            id, (unsigned)uid, why);
        return r;
}

void egressshare_drop_fds(struct egressshare *sh, uid_t uid) {
        quota_sub(sh->q, QUOTA_PROXY_FDS, uid, EGRESS_FDS_PER_CONNECTION);
}

/* ---- lookups ------------------------------------------------------------------------ */

/* The uid whose oldest waiting lookup goes next: of those under their bound, the one
 * with the fewest under way, then the one that has waited longest. NULL: none may. */
static struct uid_turns *next_turn(struct egressshare *sh) {
        struct uid_turns *best = NULL;

        for (size_t i = 0; i < sh->n; i++) {
                struct uid_turns *u = &sh->v[i];
                if (!u->head || u->running >= sh->b.lookups_per_uid)
                        continue;
                if (!best || u->running < best->running ||
                    (u->running == best->running && u->head->order < best->head->order))
                        best = u;
        }
        return best;
}

static void unlink_waiting(struct uid_turns *u, struct egressshare_lookup *l) {
        if (l->prev)
                l->prev->next = l->next;
        else
                u->head = l->next;
        if (l->next)
                l->next->prev = l->prev;
        else
                u->tail = l->prev;
        l->next = l->prev = NULL;
        l->waiting = 0;
}

/* Gives the free turns to waiting lookups, in next_turn's order. */
static void dispatch(struct egressshare *sh) {
        struct uid_turns *u;

        /* A start whose answer led to another lookup or its end: the loop below goes on. */
        if (sh->dispatching)
                return;
        sh->dispatching = 1;
        while (sh->running < sh->b.lookups && (u = next_turn(sh))) {
                struct egressshare_lookup *l = u->head;
                uid_t uid = u->uid;
                unlink_waiting(u, l);
                u->running++;
                sh->running++;
                if (l->start(l) < 0) {
                        /* start may have made entries (u may have moved): found again. */
                        struct uid_turns *again = turns(sh, uid);
                        if (again)
                                again->running--;
                        sh->running--;
                }
        }
        sh->dispatching = 0;
}

int egressshare_lookup(struct egressshare *sh, struct egressshare_lookup *l) {
        struct uid_turns *u = turns(sh, l->uid);

        if (!u)
                return -ENOMEM;
        l->order = sh->next_order++;
        l->next = NULL;
        l->prev = u->tail;
        l->waiting = 1;
        if (u->tail)
                u->tail->next = l;
        else
                u->head = l;
        u->tail = l;
        dispatch(sh);
        return 0;
}

void egressshare_lookup_cancel(struct egressshare *sh, struct egressshare_lookup *l) {
        for (size_t i = 0; l->waiting && i < sh->n; i++)
                if (sh->v[i].uid == l->uid)
                        unlink_waiting(&sh->v[i], l);
}

void egressshare_lookup_done(struct egressshare *sh, uid_t uid) {
        for (size_t i = 0; i < sh->n; i++)
                if (sh->v[i].uid == uid && sh->v[i].running > 0) {
                        sh->v[i].running--;
                        break;
                }
        if (sh->running > 0)
                sh->running--;
        dispatch(sh);
}

/* ---- the hosts file ----------------------------------------------------------------- */

size_t egressshare_hosts(struct egressshare *sh, const char *name, unsigned port,
                         struct sockaddr_storage *out, size_t max) {
        int r = hostsfile_refresh(&sh->hosts, HOSTS_PATH);

        if (r < 0 && r != -ENOENT && !sh->hosts_warned) {
                sh->hosts_warned = 1;
                log_warning("%s: %s; the allowlist proxies ask the resolver for every name",
                            HOSTS_PATH, r == -EFBIG ? "larger than 1 MiB, not read" : strerror(-r));
        }
        return hostsfile_find(&sh->hosts, name, port, out, max);
}
