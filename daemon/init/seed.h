/* seed.h: a snapshot's workspace copied into a new sandbox's (init.proto
 * Setup.seed_workspace; docs/snapshots.md).
 *
 * A snapshot's image holds the workspace it was taken with at /workspace, which the
 * sandbox's own workspace covers once mounted: PID 1 copies that tree into the
 * workspace first, as root of the sandbox's user namespace, keeping modes (less the
 * setuid and setgid bits), owners (where the namespace maps them; else its own),
 * symlinks as text and times. The
 * source is the image (whose layers the store unpacked with every check), the target
 * the sandbox's own workspace; neither follows a symlink (openat with O_NOFOLLOW from
 * directory descriptors); the depth is bounded. Called by mnt.c (step 8). */
#ifndef SBX_INIT_SEED_H
#define SBX_INIT_SEED_H

#include "util.h"

/* Copies what directory src_fd holds into directory dst_fd (both kept open). 0, or
 * -errno with err (ENOSPC: the workspace's disk limit is smaller than what it held). */
int seed_copy_tree(int src_fd, int dst_fd, struct util_err *err);

#endif
