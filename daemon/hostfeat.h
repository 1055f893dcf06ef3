/* hostfeat.h: what this host allows sandboxes to use (user namespaces, seccomp,
 * Landlock, openat2, the cgroup version), probed once at start-up.
 *
 * main() fills d->features with hostfeat_detect() before the daemon serves; the request
 * layer reports it in the Hello reply. Nothing here logs. */
#ifndef SBX_HOSTFEAT_H
#define SBX_HOSTFEAT_H

#include <stdint.h>
#include <sys/types.h>

#include "bounds.h"

struct features {
        char cgroup_version[8]; /* "v2", "v1", "none" */
        int user_namespaces;
        int rootless;
        int seccomp;
        uint32_t landlock_abi;
        int openat2;
        /* fs.inotify.max_user_watches: the inotify watches all of the daemon user's
         * processes may hold (the guard's and the file watches' among them); 0: unknown. */
        uint64_t inotify_watches;
        int disk_mech; /* enum disk_mech (disk.h): what enforces disk limits here */
        uint32_t subgid; /* rootless: the user's first subordinate gid (/etc/subgid), or 0 */
        /* Rootless: the user's first range of subordinate uids and gids (/etc/subuid,
         * /etc/subgid; 0 and 0: none), which an image's sandbox maps to its ids 1 .. N
         * (sbimage.h) with newuidmap and newgidmap, when both are installed (1). */
        uint32_t subuid_start, subuid_count, subgid_count;
        int idmap_helpers;
        struct bounds_host limits; /* the page size and sbxd's hard rlimits (bounds.h) */
};

/* Probes the kernel for a daemon running as euid whose cgroups are of cgroup_version
 * (cgroup_version_name()), and fills *ret. Never fails: what cannot be probed is
 * reported as missing. */
void hostfeat_detect(uid_t euid, const char *cgroup_version, struct features *ret);

/* Rootless: how many of the user's subordinate ids an image's sandbox maps (its ids 1
 * .. N: the smaller of the two ranges, at most SBX_IMAGE_IDS - 1), when newuidmap and
 * newgidmap are there to map them; 0: none. */
uint32_t hostfeat_image_subids(const struct features *f);

/* The first range of subordinate ids of the user uid (whose login name is name, may be
 * NULL) in the subuid(5) or subgid(5) file path: the first line "NAME:START:COUNT" or
 * "UID:START:COUNT" with a COUNT of at least 1. Its START, and its COUNT in *ret_count
 * (may be NULL); 0 (and 0) when there is none (or no file). */
uint32_t hostfeat_subids(const char *path, uid_t uid, const char *name, uint32_t *ret_count);

#endif
