/* hostwatch.h: tells when what a sandbox's view is built from has changed on the host
 * since a moment: the daemon's mount table (but for the mounts below its sandboxes
 * directory, its own disk images) and the top-level entries of its /. A spare built
 * ahead (warm.c) copies both when it is built; once either has changed, the spare would
 * no longer be the sandbox a create makes now.
 *
 * Watches /proc/self/mountinfo (poll, POLLPRI on a change) and / (inotify) on the loop,
 * and looks again on demand (a create may come in the same loop turn as the change). A
 * change is a new generation; the owner hears of each one the loop sees. Loop thread
 * only. */
#ifndef SBX_HOSTWATCH_H
#define SBX_HOSTWATCH_H

#include <stdint.h>

struct sbxd;
struct hostwatch;

/* Starts watching; changed(ud) is called on the loop for each change it sees. Returns
 * 0, -ENOMEM, or -errno when the host cannot be watched (then nothing is; the caller
 * builds nothing ahead). */
int hostwatch_start(struct sbxd *d, void (*changed)(void *ud), void *ud, struct hostwatch **ret);

/* The generation now: looks for changes not yet seen first (reads the mount table and
 * what inotify has, without waiting, and without calling changed). *ret_events (may be
 * NULL): how many times the host was seen to change at all, also back to what it was
 * (a mount and its unmount between two looks leave the same table: no new generation,
 * but a sandbox that copied the table in between holds the mount). */
uint64_t hostwatch_gen(struct hostwatch *w, uint64_t *ret_events);

/* Stops watching and closes its handles (the memory goes once they are closed).
 * Accepts NULL. */
void hostwatch_stop(struct hostwatch *w);

#endif
