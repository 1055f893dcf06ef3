/* placeholder.h: the parts of a repository's .git that a sandbox could create and git
 * would follow, made empty beforehand and kept read-only, and removed from the host
 * with the last sandbox that keeps them.
 *
 * Inside a writable repository, sandboxed code that created .git/hooks, .git/info,
 * .git/commondir or their kin would make the host's git run its code or read its
 * configuration. Those that are missing are made by init as placeholders (an empty
 * directory, or a file of fixed content) and mounted read-only like the rest of the
 * protected names (policy.h builds the list with placeholder_list). This module
 * counts, process-wide, the live sandboxes whose view keeps each placeholder
 * (placeholder_hold), and removes it from the host when the last has ended
 * (placeholder_release) if it still is one, with the rights it was made with.
 * Called on the event loop by the policy (policy.c) and the sandbox layer
 * (sandbox.c); owns the count of every placeholder held; no logging. */
#ifndef SBX_PLACEHOLDER_H
#define SBX_PLACEHOLDER_H

#include <sys/types.h>

struct pathset;
struct pathset_list;

/* The host ids a placeholder is made and removed with: those the sandbox acts as in
 * the writable path holding it (root mode: its idmapped bind shows them as the
 * sandbox user's; init.proto WritableBind). */
struct placeholder_ids {
        uid_t uid;
        gid_t gid;
};

/* Adds to dirs and files the placeholders that the repository w (canonical; its .git
 * is a directory) gets: each directory of .git that git would follow (hooks, info,
 * worktrees, modules, remotes, branches) that is missing or is held here already (a
 * live sandbox's), and each such file (commondir, config.worktree) that is missing or
 * holds exactly a placeholder's content (a live sandbox's, or one an earlier daemon
 * left): made, and removed, again rather than taken for the owner's. Strings
 * allocated; an allocation failure leaves one out. */
void placeholder_list(const char *w, struct pathset_list *dirs, struct pathset_list *files);

/* The content of the placeholder file for path, or NULL when path is none. */
const char *placeholder_content(const char *path);

/* A sandbox's view keeps the placeholders of made from now on, made with the ids as
 * (one per path of made; NULL: the owner's, owner_uid and owner_gid). Out of memory, one
 * is not counted: it stays on the host, harmless. */
void placeholder_hold(const struct pathset *made, const struct placeholder_ids *as, uid_t owner_uid,
                      gid_t owner_gid);

/* A sandbox whose view kept the placeholders of made (as placeholder_hold was told)
 * has ended: each that no live sandbox keeps any more is removed from the host, if it
 * still is one, with the rights it was made with. Accepts NULL. */
void placeholder_release(const struct pathset *made);

#endif
