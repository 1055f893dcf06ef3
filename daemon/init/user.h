/* user.h: the sandbox user's name and home in the view's /etc/passwd and /etc/group.
 *
 * Commands run under an id that no host file names: in root mode one of the daemon's
 * reserved range, rootless uid 0 of the sandbox's user namespace (the daemon's user,
 * whose host entry, if any, says "root" there). Without an entry, whoami fails, bash
 * says "I have no name!" and git finds no committer name. mnt_build_view() calls
 * user_install() once, after the host's tree is detached and before the root is made
 * read-only: the view's two files, read with the commands' credentials (what a command
 * could read of them, nothing more: a hidden one reads as empty), are put on a private
 * tmpfs behind an entry of their own (USER_NAME, home USER_HOME) and bound read-only
 * over the originals. The host's files are never changed. user_compose() is exported
 * for the unit tests. */
#ifndef SBX_INIT_USER_H
#define SBX_INIT_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/* The name of the sandbox user and of its group, its home, and the name in its GECOS
 * field (git's committer name when none is configured). The daemon gives commands
 * USER and LOGNAME of this name and HOME of this home (policy.c, command.c). */
#define USER_NAME  "sandbox"
#define USER_HOME  "/workspace"
#define USER_GECOS "sandbox"

/* The largest /etc/passwd or /etc/group taken over; a larger one is left as it is (with
 * a warning): a truncated copy would lose names silently. */
#define USER_MAX_FILE_BYTES (8u * 1024u * 1024u)

/* Who the commands are, as the view sees them. */
struct user_config {
        uid_t uid;
        gid_t gid;
        bool keep_groups; /* rootless: setgroups(2) is denied, commands keep what they have */
};

/* Composes the file of the view: the entry first (so that it names its id even where the
 * host has another name for it, as rootless uid 0), then host (len bytes, kept as they
 * are, with a newline added at the end when missing). passwd: 1 for /etc/passwd
 * ("NAME:x:UID:GID:GECOS:HOME:shell"), 0 for /etc/group ("NAME:x:GID:"). Returns the
 * allocated text (free()) with its length in *ret_len, or NULL when out of memory. */
char *user_compose(bool passwd, const char *host, size_t len, uid_t uid, gid_t gid,
                   const char *shell, size_t *ret_len);

/* Installs the entries in the view (see above). The root must still be writable (its
 * tmpfs holds the staging directory and, when the view has no /etc, an /etc of its
 * own) and the host's tree detached, so that nothing read can lead out of the view.
 * Returns 0, also when a file could not be given an entry (a warning says why); -errno
 * with err set when a mount failed half-way. */
int user_install(const struct user_config *cfg, struct util_err *err, struct util_warnings *warn);

/* Names uid and gid instead in the installed entries: a warm sandbox claimed for an
 * owner, whose commands run under another uid from then on. Called by PID 1 under its
 * seccomp filter (it only writes through the descriptors user_install kept). Returns 0
 * (also when nothing was installed) or -errno. */
int user_rename(uid_t uid, gid_t gid);

#endif
