/* credcache.h: the credentials of every home on the host, expanded once and shared by
 * every sandbox until the host changes.
 *
 * protect_defaults hides the credentials of protect.h under every home (each directory
 * of /home, each home of /etc/passwd that is not a system directory, the daemon's $HOME)
 * and the host's own secrets (/root whole among them). Expanding those lists means a
 * stat of each name under each home; this module does it once and keeps the result, as
 * two immutable path sets: every credential path (the guard watches them, the file
 * operations refuse them) and those a sandbox's user could read now (hidden by a mount
 * in each view). It expands them anew when /etc/passwd, /home or the daemon's $HOME
 * changed, when the guard said a listed path or its directory changed
 * (credcache_changed), and at the latest a minute after the last expansion. The guard
 * hears each new expansion through the hook it gives (credcache_on_change), so that
 * sandboxes made before hide the new paths too.
 *
 * Called on the event loop only, by the policy (policy.c: the view of a sandbox) and
 * the guard (guard.c: changes on the host); owns the process-wide expansion (its two
 * sets, referenced by the views built from them); no logging. */
#ifndef SBX_CREDCACHE_H
#define SBX_CREDCACHE_H

struct sbxd;
struct pathset;

/* Brings the expansion up to date (expanded anew when one of the changes above
 * happened, else kept) and gives its sets: into *ret_all every credential path, into
 * *ret_exposed those a sandbox's user could read (either may be NULL: not wanted).
 * They are borrowed: valid until the next call into this module; pathset_ref keeps
 * one. Returns 0, or -ENOMEM (nothing written). */
int credcache_get(struct sbxd *d, struct pathset **ret_all, struct pathset **ret_exposed);

/* A path of the shared credential list, or a directory holding one, changed on the
 * host (created, replaced, its permissions changed): the list is expanded again before
 * the next sandbox is set up. Called by the guard. */
void credcache_changed(void);

/* Brings the expansion up to date now rather than at the next use: after
 * credcache_changed (a new home appeared, say), the list is expanded anew at once and
 * the hook credcache_on_change named hears it. */
void credcache_refresh(struct sbxd *d);

/* Who hears each new expansion of the shared credential list, all its paths (the
 * guard, which covers the new ones in the live sandboxes: guard_share): a hook, so that
 * this module does not call the guard that calls it. NULL: nobody. */
typedef void (*credcache_cb)(struct sbxd *d, struct pathset *all);
void credcache_on_change(credcache_cb cb);

#endif
