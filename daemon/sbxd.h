/* sbxd.h: the daemon's one context object, struct sbxd, which main() builds and hands to
 * every module that needs the loop, the configuration, the records or the sandbox
 * table; and the daemon's clock.
 *
 * main() owns the struct and everything it points to, and fills it before the loop
 * runs; it lives as long as the loop. Each field says which module writes it; the
 * others only read it. */
#ifndef SBX_SBXD_H
#define SBX_SBXD_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "config.h"
#include "hostfeat.h"
#include "quota.h"

struct store;
struct server;
struct sbxtab;
struct cgroup_env;
struct guard;
struct uidrange;
struct egressshare;
struct offload;
struct cmdsched;
struct conn_held;
struct imagestore;
struct rpc_pulls;
struct images_gc;

struct sbxd {
        uv_loop_t *loop;
        struct config *cfg;          /* the flags, read-only after start-up */
        struct store *store;         /* the records (store.h) */
        struct server *server;       /* the listening socket and its connections (server.h) */
        struct sbxtab *sandboxes;    /* the live sandboxes (sandbox.h) */
        struct quota *quota;         /* per-uid counts and budgets (quota.h; sbxtab.c makes it) */
        struct quota_bound buffered; /* --max-buffered(-per-uid) over d->quota (sbxtab.c) */
        struct egressshare *proxies; /* what the allowlist proxies share (egressshare.c) */
        struct quota_bound ptys;     /* --max-ptys(-per-uid) over d->quota (sbxtab.c) */
        struct cgroup_env *cgroups;  /* where this daemon's cgroups live (cgroup.h) */
        struct guard *guard;         /* hidden and read-only paths kept covered (guard.c) */
        const struct uidrange *uids; /* root: the sandbox uids, reserved host-wide (uidrange.h);
                                      * NULL: rootless (or a core without main, in tests) */
        struct features features;    /* what this host allows, probed at start-up */
        uid_t euid;
        gid_t egid;
        char *sandboxes_dir;         /* STATE/sandboxes, canonical (realpath); NULL: unknown */
        uint64_t nofile_soft;        /* RLIMIT_NOFILE soft limit at start: commands' default */
        int command_cgroups;         /* each command gets a cgroup of its own (see config) */
        int shutting_down;           /* set by main() on SIGTERM/SIGINT: no new work */
        struct cmdsched *sched;      /* the commands' slots and queues (cmdsched.h; sbxtab.c
                                      * makes it) */
        struct conn_held *held;      /* replies held for the end of the turn (conn.h; the
                                      * turn keeps it, turn.h) */
        struct imagestore *images;   /* the container images (images.h; main() opens it) */
        uint64_t image_blocks;       /* root: image sandboxes' id blocks in use (sbimage.c) */
        int image_blocks_taken;      /* one was taken this run: the blocks follow the uid
                                      * range, which stays the state directory's (main.c) */
        struct rpc_pulls *pulls;     /* image pulls under way (rpc_pull.c); NULL: none */
        struct images_gc *images_gc; /* the image store's collection job (images.c) */
        struct offload *offload;     /* work off the loop (offload.c): made at the first job,
                                      * freed after the last; NULL when there is none */
        struct rpc_watches *watches; /* file watches (rpc_watch.c); NULL: none yet */
};

/* Milliseconds since the Unix epoch (wall clock, for records and deadlines). */
int64_t sbxd_now_unix_ms(void);

#endif
