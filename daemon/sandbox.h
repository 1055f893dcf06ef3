/* sandbox.h: the sandbox layer as the layers above it see it (rpc, main, server): one
 * sandbox's verbs, implemented by the lifecycle (sandbox.c), and, included from here
 * for those callers, the table (sbxtab.h: lookup, creation, shutdown), start-up
 * recovery (recover.h), the trash (trash.h) and the commands (command.h).
 *
 * The table owns every live sandbox. A sandbox owns its init helper's process handle
 * and channel, its timers, its cgroups, its workspace and its commands. The layer
 * reaches rpc only through the callbacks it is given. Ended sandboxes leave the table;
 * their records stay in the store. */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "caller.h"
#include "enforce.h"
#include "init.pb-c.h"
#include "sbsock.h"
#include "sbx_limits.h"
#include "sbx.pb-c.h"

struct sbxd;
struct sandbox;
struct sandbox_view;

/* Called once when a creation finishes: err 0 and sb ready, or err < 0 with msg. */
typedef void (*sandbox_ready_cb)(void *ud, struct sandbox *sb, int err, const char *msg);

/* Called once a sandbox has fully ended (processes gone, cleanup done). */
typedef void (*sandbox_ended_cb)(void *ud, struct sandbox *sb);

/* 1 when caller may use sb: its owner, root, or a uid or group (primary or
 * supplementary) it is shared with. */
int sandbox_may_access(const struct sandbox *sb, const struct caller *caller);
/* The same rule for a sandbox of owner with the effective spec (may be NULL: not
 * shared), live or on record. */
int sandbox_access_allowed(uid_t owner, const Sbx__V1__CreateSandbox *spec,
                           const struct caller *caller);

const char *sandbox_id(const struct sandbox *sb);
/* When it was created (Unix ms): with its address, tells it from a later one of its id. */
int64_t sandbox_created_ms(const struct sandbox *sb);
Sbx__V1__SandboxState sandbox_state(const struct sandbox *sb);
/* 1 once nothing of sb runs and its end is recorded (Terminate answered): it stays in
 * the table until its cleanup is done, but requests see it as the ended one on record. */
int sandbox_is_over(const struct sandbox *sb);

/* What the file operations may know of sb (sandbox_view.h), valid while sb lives. */
struct sandbox_view *sandbox_view(struct sandbox *sb);

/* Fills info (whose storage is *store, kept until the info is sent) for a live
 * sandbox. The strings point into sb and stay valid until sb changes. */
struct sandbox_info_store {
        Sbx__V1__SandboxInfo info;
        Sbx__V1__LimitEnforcement enf[LIM_N + 1]; /* + "network" of an allowlist */
        Sbx__V1__LimitEnforcement *enf_ptrs[LIM_N + 1];
};
void sandbox_fill_info(struct sandbox *sb, struct sandbox_info_store *store);

/* Ends sb for reason ("terminated", "expired", "idle", "shutdown", "failed: ..."). cb
 * (may be NULL) is called once the sandbox has ended; several callers may wait on the
 * same end. Returns 0, or -ENOMEM (nothing done). */
int sandbox_terminate(struct sandbox *sb, const char *reason, sandbox_ended_cb cb, void *ud);

/* Someone to tell when sb begins to end (sandbox_end, or left running at shutdown), so
 * that what lives only as long as it (a file watch) goes first: embed one in that
 * object, set `ending`, and add it with sandbox_listen_end. ending is called once, on the
 * loop, with the listener already removed; it may free the object. The fields but
 * `ending` are sandbox.c's. */
struct sandbox_end_listener {
        void (*ending)(struct sandbox_end_listener *l, struct sandbox *sb, const char *reason);
        struct sandbox_end_listener *next, *prev;
        struct sandbox *sb;
};
/* Adds l to sb's listeners. sb must not be ending (sandbox_view(sb)->state READY). */
void sandbox_listen_end(struct sandbox *sb, struct sandbox_end_listener *l);
/* Removes l (added, and not yet told); accepts one never added or already told. */
void sandbox_unlisten_end(struct sandbox_end_listener *l);

/* Moves the deadline to deadline_ms (Unix ms). -EINVAL when it lies further than the
 * daemon's maximum sandbox timeout (sbxd --max-sandbox-timeout) from now. */
int sandbox_set_deadline(struct sandbox *sb, int64_t deadline_ms);

/* Notes a request touching sb (for the idle timeout). */
void sandbox_touch(struct sandbox *sb);

/* Asks sb's init for an unconnected TCP socket of the sandbox's network namespace
 * (AF_INET6 when ipv6, else AF_INET), for a stream to one of its ports (sbsock.h). req
 * is the caller's, registered with sb from now on: ops->made follows on a later loop
 * turn, and ops->ended when sb ends while the caller holds the socket; the caller lets
 * go with sbsock_release(req) (which cancels a pending request) before it frees req.
 * Returns 0, or (nothing registered, no callback) -ENODEV when sb is ending,
 * -ESHUTDOWN when it is not ready (creating, or warm), -EOPNOTSUPP when its init is an
 * older one that cannot (adopted after an upgrade), -EAGAIN when 64 requests are
 * pending, or another -errno (its init is gone). */
int sandbox_make_socket(struct sandbox *sb, struct sbsock_req *req, bool ipv6,
                        const struct sbsock_ops *ops, void *ud);

/* 1 when sb shares the host's network namespace (NETWORK_FULL): its loopback is the
 * host's. */
int sandbox_network_is_host(const struct sandbox *sb);

/* 1 when sb's network is an allowlist (NETWORK_ALLOWLIST): its loopback's port
 * SBX_EGRESS_PORT (egress.h) is the daemon's proxy for it. */
int sandbox_network_is_allowlist(const struct sandbox *sb);

/* The sockets of sb's init its users hold or wait for (for a bound per sandbox). */
unsigned sandbox_sockets_held(const struct sandbox *sb);

/* For the callers above: the table, recovery, the trash and the commands. */
#include "command.h"
#include "recover.h"
#include "sbxtab.h"
#include "trash.h"

#endif
