/* sbxd.h: the daemon's one context object, created by main() and handed to every
 * module that needs the loop, the configuration, the records or the sandbox table.
 *
 * Everything in it is owned by main() and lives as long as the loop runs. */
#ifndef SBX_SBXD_H
#define SBX_SBXD_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "config.h"

struct store;
struct write_req;
struct server;
struct sbxtab;
struct cgroup_env;

/* What this host allows, detected once at start-up (reported by Hello). */
struct features {
        char cgroup_version[8]; /* "v2", "v1", "none" */
        int user_namespaces;
        int rootless;
        int seccomp;
        uint32_t landlock_abi;
        int openat2;
};

struct guard;

struct sbxd {
        uv_loop_t *loop;
        struct config *cfg;
        struct store *store;
        struct server *server;
        struct sbxtab *sandboxes;
        struct cgroup_env *cgroups;
        struct guard *guard;        /* hidden and read-only paths kept covered (guard.h) */
        struct features features;
        uid_t euid;
        gid_t egid;
        uint64_t nofile_soft;       /* RLIMIT_NOFILE soft limit sbxd started with: commands' default */
        int command_cgroups;        /* each command gets a cgroup of its own (see config) */
        int shutting_down;
        struct write_req *held_head; /* replies held for the end of the turn (conn.c, turn.h) */
        struct write_req *held_tail;
};

/* Milliseconds since the Unix epoch (wall clock, for records and deadlines). */
int64_t sbxd_now_unix_ms(void);

#endif
