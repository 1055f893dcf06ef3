/* egressshare.h: what the allowlist proxies of all sandboxes share (egress.c): the
 * budgets of the descriptors their connections hold, the turns of their name lookups on
 * libuv's threads, and the hosts file.
 *
 * Descriptors. Each proxy connection holds two (the sandbox's side and the host's). All
 * proxies together hold at most the daemon's open-file limit less a reserve for
 * everything else it opens (a quarter of the limit, at least 1024, or half of a limit
 * under 2048); the sandboxes of one uid at most a quarter of that, or
 * --max-proxy-fds-per-uid. Past either the proxy answers the connection 503 at once,
 * naming the bound; every other uid keeps its own share.
 *
 * Lookups. A lookup through getaddrinfo holds one of libuv's "slow" threads (half of
 * UV_THREADPOOL_SIZE) for as long as the nameserver keeps it waiting. The proxies never
 * have more lookups under way than there are such threads, so none waits in libuv's own
 * queue behind another's, and one uid at most a quarter of them (at least one), or
 * --max-lookups-per-uid; the others of that uid wait their turn in the order they came,
 * whichever of its sandboxes they are in. A turn that frees goes to the uid with the
 * fewest lookups under way, so a user's lookup is never stuck behind another user's.
 * Names the hosts file gives are answered at once, without a thread (hostsfile.h).
 *
 * One struct per daemon (d->proxies): the first proxy makes it, the last frees it
 * (egressshare_ref, egressshare_unref). The descriptors are counted in d->quota
 * (QUOTA_PROXY_FDS), the lookups here. Loop thread only. A uid's refusals are logged
 * when they begin and when they end, not per connection. */
#ifndef SBX_EGRESSSHARE_H
#define SBX_EGRESSSHARE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct sbxd;
struct quota;
struct egressshare;

/* The descriptors one proxy connection holds. */
#define EGRESS_FDS_PER_CONNECTION 2u
/* The reserve of the daemon's open-file limit no proxy connection takes: this share of
 * the limit, at least EGRESS_FDS_RESERVE_MIN (half of a limit under twice that). */
#define EGRESS_FDS_RESERVE_SHARE 4u
#define EGRESS_FDS_RESERVE_MIN   1024u
/* One uid's share of the proxies' descriptors, and of their lookups, unless the flags
 * say otherwise: a quarter. */
#define EGRESS_PER_UID_SHARE 4u
/* libuv's thread pool: its size without UV_THREADPOOL_SIZE, and its most. */
#define EGRESS_UV_THREADS_DEFAULT 4u
#define EGRESS_UV_THREADS_MAX     1024u

/* The bounds, derived at start from the daemon's limits and flags. */
struct egressshare_bounds {
        uint64_t nofile;          /* the daemon's open-file limit (RLIMIT_NOFILE) */
        uint64_t fds_reserve;     /* of it, kept for everything but the proxies */
        uint64_t fds;             /* the proxies' descriptors, all uids */
        uint64_t fds_per_uid;     /* one uid's */
        unsigned lookups;         /* lookups under way, all uids: libuv's slow threads */
        unsigned lookups_per_uid; /* one uid's */
};

/* The bounds for a daemon with the open-file limit nofile and a thread pool of threads,
 * and the flags --max-proxy-fds-per-uid and --max-lookups-per-uid (0: not given; a
 * value above the total is cut to the total). */
void egressshare_derive(uint64_t nofile, unsigned threads, uint32_t fds_per_uid_flag,
                        uint32_t lookups_per_uid_flag, struct egressshare_bounds *ret);

/* The size of libuv's thread pool as libuv reads it (UV_THREADPOOL_SIZE). */
unsigned egressshare_uv_threads(void);

/* A new share counting in q (not taken) with bounds b. Returns 0 or -ENOMEM. */
int egressshare_new(struct quota *q, const struct egressshare_bounds *b, struct egressshare **ret);

/* Frees sh. Nothing may wait in it. Accepts NULL; returns NULL. */
struct egressshare *egressshare_free(struct egressshare *sh);

/* d's share, made (with bounds from d's open-file limit, thread pool and flags, which
 * it logs) when no proxy has it yet, and counted. NULL when out of memory. Each non-NULL
 * is matched by one egressshare_unref(d). */
struct egressshare *egressshare_ref(struct sbxd *d);
void egressshare_unref(struct sbxd *d);

/* ---- descriptors ---- */

/* Counts the descriptors of one more proxy connection of a sandbox (id, for the log) of
 * uid. 0; or -EDQUOT (uid's bound), -ENOSPC (all proxies'), -ENOMEM, with one line
 * naming the bound and its value in why. Each 0 is matched by egressshare_drop_fds. */
int egressshare_take_fds(struct egressshare *sh, uid_t uid, const char *id, char *why, size_t len);
void egressshare_drop_fds(struct egressshare *sh, uid_t uid);

/* ---- lookups ---- */

/* A lookup that wants a turn: embedded in what looks up (a proxy connection), which
 * sets uid and start. */
struct egressshare_lookup {
        uid_t uid;
        /* Called with the turn: starts the lookup. 0 when it is under way (the turn is
         * held until egressshare_lookup_done), -errno when it is not (the turn is free). */
        int (*start)(struct egressshare_lookup *l);
        struct egressshare_lookup *next, *prev; /* in its uid's queue */
        uint64_t order;                         /* when it came: the queues' order */
        int waiting;
};

/* Starts l now (l->start is called before this returns) when a turn is free for its
 * uid, or queues it behind the uid's others. 0, or -ENOMEM (nothing was done). */
int egressshare_lookup(struct egressshare *sh, struct egressshare_lookup *l);

/* l waits no more (it timed out or its connection closed). Accepts one that is not
 * waiting. */
void egressshare_lookup_cancel(struct egressshare *sh, struct egressshare_lookup *l);

/* A lookup of uid that had a turn ended: the turn goes to the next waiting lookup. */
void egressshare_lookup_done(struct egressshare *sh, uid_t uid);

/* ---- the hosts file ---- */

/* The addresses /etc/hosts gives name, with port, into out (at most max): how many (0:
 * none, the resolver must be asked). Reads the file again when it changed. */
size_t egressshare_hosts(struct egressshare *sh, const char *name, unsigned port,
                         struct sockaddr_storage *out, size_t max);

#endif
