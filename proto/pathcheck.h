/* pathcheck.h: which directory on a path keeps this user out.
 *
 * Shared by sbxd (why its init helper cannot be run) and sbx doctor (whether a sbxd of
 * this user could run it). No allocation, no logging. */
#ifndef SBX_PATHCHECK_H
#define SBX_PATHCHECK_H

#include <stddef.h>

/* The first directory above the absolute path's last component that this process may
 * not search (access(2) X_OK fails with EACCES), copied into dir (len bytes). Returns 1
 * when there is one, 0 when none. */
int pathcheck_unsearchable(const char *path, char *dir, size_t len);

#endif
