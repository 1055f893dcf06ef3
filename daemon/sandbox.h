/* sandbox.h: the sandbox table and the life of one sandbox: creation (workspace,
 * cgroup, the init helper and its channel), readiness, deadlines, commands, and the
 * end (kill init, clean up, record).
 *
 * The table owns every live sandbox. A sandbox owns its init helper's process handle
 * and channel, its timers, its cgroups, its workspace and its commands. Called by rpc
 * (requests) and main (shutdown); reaches rpc only through the callbacks it is given.
 * Ended sandboxes leave the table; their records stay in the store. */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "init.pb-c.h"
#include "sbx_limits.h"
#include "sbx.pb-c.h"

struct sbxd;
struct sbxtab;
struct sandbox;
struct command;
struct cgroup;

/* Who is asking: from SO_PEERCRED, SO_PEERGROUPS and Hello. The groups belong to the
 * connection and are valid during the call only. */
struct caller {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        const char *client_name;
        const gid_t *groups; /* supplementary groups */
        size_t n_groups;
};

/* ---- the table ---------------------------------------------------------------------- */

int sbxtab_new(struct sbxd *d, struct sbxtab **ret);
/* Frees the table; every sandbox must have ended. Accepts NULL. */
void sbxtab_free(struct sbxtab *t);
struct sandbox *sbxtab_find(struct sbxtab *t, const char *id);
unsigned sbxtab_count(const struct sbxtab *t);
/* 1 when dev:ino (of a /proc/PID/ns/pid) is the PID namespace of one of the live
 * sandboxes, warm ones included: that process runs inside a sandbox. */
int sbxtab_is_sandbox_pidns(const struct sbxtab *t, dev_t dev, ino_t ino);
/* Calls cb for each live sandbox; stops early when cb returns non-zero. */
int sbxtab_foreach(struct sbxtab *t, int (*cb)(struct sandbox *sb, void *ud), void *ud);
/* The periodic sweep behind the precise timers: ends sandboxes past their deadline or
 * idle limit (should a timer have been missed) and, at most hourly, prunes records of
 * sandboxes that ended more than the retention period ago. Called by main's timer. */
void sbxtab_sweep(struct sbxtab *t);

/* Leaves every ready sandbox running for the next daemon to adopt (the others end);
 * calls done once the table is empty. For --keep-sandboxes. */
void sbxtab_detach_all(struct sbxtab *t, void (*done)(void *ud), void *ud);

/* Ends every sandbox with reason "shutdown"; calls done once the last has ended. */
void sbxtab_shutdown(struct sbxtab *t, void (*done)(void *ud), void *ud);

/* Starts keeping the daemon's --warm sandboxes set up (after recovery, once listening). */
void sbxtab_warm_start(struct sbxtab *t);

/* At start-up, before serving: every sandbox the records call live belongs to a
 * previous daemon. Its commands are marked unknown. A ready one whose init still waits
 * on its adoption socket is adopted (same id, deadline re-armed from its absolute
 * time, background processes untouched); any other is marked lost and its init,
 * cgroups and workspace are removed. Returns the number adopted, or -errno. */
int sandbox_recover(struct sbxd *d);

/* At start-up: creates STATE/trash and deletes in the background what an earlier
 * daemon left there (workspaces moved aside to be deleted). */
void sandbox_empty_trash(struct sbxd *d);

/* ---- one sandbox -------------------------------------------------------------------- */

/* Called once when a creation finishes: err 0 and sb ready, or err < 0 with msg. */
typedef void (*sandbox_ready_cb)(void *ud, struct sandbox *sb, int err, const char *msg);

/* Starts creating a sandbox from req for caller. Returns 0 when cb will be called
 * later, or -errno with a one-line reason in err (cb is then never called):
 * -EINVAL bad request, -EEXIST the id was used, -EAGAIN the daemon's sandbox limit. */
int sandbox_create(struct sbxd *d, const Sbx__V1__CreateSandbox *req, const struct caller *caller,
                   sandbox_ready_cb cb, void *ud, char *err, size_t errlen);

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

/* Fills info (whose storage is *store, kept until the info is sent) for a live
 * sandbox. The strings point into sb and stay valid until sb changes. */
struct sandbox_info_store {
        Sbx__V1__SandboxInfo info;
        Sbx__V1__LimitEnforcement enf[8];
        Sbx__V1__LimitEnforcement *enf_ptrs[8];
};
void sandbox_fill_info(struct sandbox *sb, struct sandbox_info_store *store);

/* Called once a sandbox has fully ended (processes gone, cleanup done). */
typedef void (*sandbox_ended_cb)(void *ud, struct sandbox *sb);

/* Ends sb for reason ("terminated", "expired", "idle", "shutdown"). cb (may be NULL) is
 * called once the sandbox has ended; several callers may wait on the same end. */
int sandbox_terminate(struct sandbox *sb, const char *reason, sandbox_ended_cb cb, void *ud);

/* Moves the deadline to deadline_ms (Unix ms). -EINVAL when it lies further than the
 * daemon's maximum sandbox timeout (sbxd --max-sandbox-timeout) from now. */
int sandbox_set_deadline(struct sandbox *sb, int64_t deadline_ms);

/* Notes a request touching sb (for the idle timeout). */
void sandbox_touch(struct sandbox *sb);

/* ---- commands ----------------------------------------------------------------------- */

struct command_callbacks {
        /* Stream mode: the command has started. */
        void (*started)(void *ud, char *command_id);
        /* Stream mode: a chunk of output. */
        void (*output)(void *ud, char *command_id, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len);
        /* Stream mode: 1 while the receiver cannot take more (reading the pipes pauses). */
        int (*congested)(void *ud);
        /* Always, exactly once: the final result (valid during the call). */
        void (*done)(void *ud, Sbx__V1__CommandResult *result);
};

/* Starts req in sb. Returns 0 when cbs->done will be called later (the command's id is
 * then in ret_command_id, at least 32 bytes), or -errno with a reason in err: -EINVAL bad
 * request, -EBUSY too many commands running (the per-sandbox bound), -ESHUTDOWN the
 * sandbox is not ready. */
int sandbox_run(struct sandbox *sb, const Sbx__V1__RunCommand *req, const struct caller *caller,
                const struct command_callbacks *cbs, void *ud, char *ret_command_id, char *err,
                size_t errlen);

/* Kills the command's process group; its result becomes CANCELLED. -ENOENT: unknown. */
int sandbox_cancel(struct sandbox *sb, const char *command_id);

/* The client of a streamed command has room again: read its output now (without
 * waiting for the next look). -ENOENT: unknown or finished. */
int sandbox_resume_output(struct sandbox *sb, const char *command_id);

/* Called once input given to sandbox_command_input has reached the command's pipe
 * (err 0), or could not (-EPIPE: the command ended or closed its stdin). */
typedef void (*command_input_cb)(void *ud, int err);

/* Writes data to a running command's stdin (started with stdin_stream); closes it on eof.
 * Returns 1 when cb will be called once the data is in the pipe (the caller answers
 * then, which paces a client to what the command consumes), 0 when there was nothing
 * to wait for (cb is not called), -ENOENT unknown command, -EPIPE stdin already closed,
 * -EAGAIN too much input queued. */
int sandbox_command_input(struct sandbox *sb, const char *command_id, const uint8_t *data,
                          size_t len, int eof, command_input_cb cb, void *ud);

#endif
