/* recover.h: what a starting daemon does with what the previous one left: sandboxes
 * the records call live, their inits, cgroups and state directories.
 *
 * Called once by main at start-up, before serving and before the warm pool starts.
 * Sits above the table: it adopts sandboxes into it. */
#ifndef SBX_RECOVER_H
#define SBX_RECOVER_H

struct sbxd;

/* Every sandbox the records call live belongs to a previous daemon. Its commands are
 * marked unknown. A ready one whose init still waits on its adoption socket is adopted
 * (same id, deadline re-armed from its absolute time, background processes untouched);
 * any other is marked lost and its init, cgroups and workspace are removed, as are
 * state directories and cgroups no record owns. Returns the number adopted, or -errno. */
int recover_sandboxes(struct sbxd *d);

#endif
