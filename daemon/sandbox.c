/* sandbox.c: the life of one sandbox, from its setup to its end; see sandbox.h and
 * sandbox_int.h.
 *
 * Setup (sandbox_start, for a sandbox its owner has just put in its list): reserve its
 * ptys from its owner's budget, make the workspace and the cgroup, spawn the init helper
 * (a plain fork+exec through uv_spawn: the child execs at once), send Setup with the
 * cgroup's descriptors (stage 0 joins the cgroup before anything else), and wait for
 * Ready on the channel. Stage 0 of the helper stays our child and exits only after PID 1
 * of the sandbox is gone, and PID 1's exit completes only after every other process of
 * its PID namespace has died, so stage 0's exit is our proof that nothing of the sandbox
 * runs any more.
 *
 * The end: SIGKILL to PID 1 (through a pidfd, so a recycled pid can never be hit),
 * wait for stage 0, end the commands still running, move the workspace to the trash,
 * record the end, answer everyone waiting and give its ptys back; one loop turn later
 * remove the cgroup, start the workspace's deletion, tell the owner (the table or the
 * warm pool) and free the sandbox once its libuv handles are closed and its commands
 * have let go.
 *
 * Everything init sends is untrusted: the channel (initchan.c) size-checks and decodes
 * it; Ready is checked here (the pid init names must be our stage 0's child), and the
 * command module checks that exits name commands it started. Called by the table, the
 * warm pool and recovery (creation, adoption, the end), by rpc (the verbs of
 * sandbox.h), and by its commands and channel only through the hooks and callbacks it
 * gives them. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "devpts.h"
#include "egress.h"
#include "disk.h"
#include "guard.h"
#include "log.h"
#include "names.h"
#include "placeholder.h"
#include "policy.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbxd.h"
#include "store.h"
#include "trash.h"

/* How long a sandbox's init may take to set up before the sandbox fails. */
#define SANDBOX_SETUP_TIMEOUT_MS 30000u
/* How often a sandbox still setting up is looked at. */
#define SANDBOX_SETUP_CHECK_MS 1000u
/* How long PID 1 may take to die after SIGKILL before we complain loudly. */
#define SANDBOX_KILL_GRACE_MS 10000u
/* Most warnings of Ready kept. */
#define SANDBOX_MAX_INIT_WARNINGS 64u

static void fail_sandbox(struct sandbox *sb, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void finish_end(struct sandbox *sb);

/* ---- what others may ask of a sandbox ----------------------------------------------- */

int sandbox_warn(struct sandbox *sb, const char *fmt, ...) {
        char **nw;
        char *s;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        nw = realloc(sb->warnings, (sb->n_warnings + 1) * sizeof(*nw));
        if (!nw) {
                free(s);
                return -ENOMEM;
        }
        sb->warnings = nw;
        sb->warnings[sb->n_warnings++] = s;
        return 0;
}

const char *sandbox_id(const struct sandbox *sb) {
        return sb->id;
}

int64_t sandbox_created_ms(const struct sandbox *sb) {
        return sb->created_ms;
}

Sbx__V1__SandboxState sandbox_state(const struct sandbox *sb) {
        return sb->view.state;
}

int sandbox_is_over(const struct sandbox *sb) {
        return sb->answered;
}

struct sandbox_view *sandbox_view(struct sandbox *sb) {
        return &sb->view;
}

int sandbox_access_allowed(uid_t owner, const Sbx__V1__CreateSandbox *spec,
                           const struct caller *k) {
        size_t i, j;
        if (k->uid == 0 || k->uid == owner)
                return 1;
        if (!spec)
                return 0;
        for (i = 0; i < spec->n_share_uids; i++)
                if (spec->share_uids[i] == k->uid)
                        return 1;
        for (i = 0; i < spec->n_share_gids; i++) {
                if (spec->share_gids[i] == k->gid)
                        return 1;
                for (j = 0; j < k->n_groups; j++)
                        if (spec->share_gids[i] == k->groups[j])
                                return 1;
        }
        return 0;
}

int sandbox_may_access(const struct sandbox *sb, const struct caller *k) {
        return sandbox_access_allowed(sb->owner_uid, sb->spec, k);
}

void sandbox_touch(struct sandbox *sb) {
        sb->last_activity = uv_now(sb->d->loop);
}

void sandbox_fill_info(struct sandbox *sb, struct sandbox_info_store *st) {
        Sbx__V1__SandboxInfo *info = &st->info;

        sbx__v1__sandbox_info__init(info);
        info->id = sb->id;
        info->has_state = 1;
        info->state = sb->view.state;
        info->has_owner_uid = 1;
        info->owner_uid = sb->owner_uid;
        info->n_labels = sb->spec->n_labels;
        info->labels = sb->spec->labels;
        info->has_created_unix_ms = 1;
        info->created_unix_ms = sb->created_ms;
        info->has_deadline_unix_ms = 1;
        info->deadline_unix_ms = sb->deadline_ms;
        info->has_idle_timeout_ms = sb->idle_timeout_ms != 0;
        info->idle_timeout_ms = sb->idle_timeout_ms;
        info->policy = sb->spec->policy;
        info->has_isolated = 1;
        info->isolated = sb->isolated;
        info->n_warnings = sb->n_warnings;
        info->warnings = sb->warnings;
        info->has_running_commands = 1;
        info->running_commands = sb->sched.n_running;
        info->has_commands_run = 1;
        info->commands_run = sb->commands_run;
        info->has_queued_commands = 1;
        info->queued_commands = sb->sched.n_queued;
        info->n_share_uids = sb->spec->n_share_uids;
        info->share_uids = sb->spec->share_uids;
        info->n_share_gids = sb->spec->n_share_gids;
        info->share_gids = sb->spec->share_gids;
        info->end_reason = sb->end_reason;
        info->image = sb->spec->image && sb->spec->image[0] ? sb->spec->image : NULL;
        info->image_digest = sb->spec->image_digest;
        info->n_enforcement = enforce_report(sb->enforcement, st->enf, st->enf_ptrs);
        info->enforcement = st->enf_ptrs;
        if (sb->spec->policy &&
            sb->spec->policy->network == SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST) {
                /* The proxy, once running; before (or if it could not start) nothing
                 * leaves the sandbox at all. */
                Sbx__V1__LimitEnforcement *e = &st->enf[info->n_enforcement];
                sbx__v1__limit_enforcement__init(e);
                e->limit = (char *)"network";
                e->has_enforcement = 1;
                e->enforcement = sb->egress ? SBX__V1__ENFORCEMENT__PROXY
                                            : SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE;
                st->enf_ptrs[info->n_enforcement++] = e;
        }
}

/* ---- the object --------------------------------------------------------------------- */

void sandbox_list_add(struct sandbox **head, struct sandbox *sb) {
        sb->prev = NULL;
        sb->next = *head;
        if (*head)
                (*head)->prev = sb;
        *head = sb;
}

void sandbox_list_del(struct sandbox **head, struct sandbox *sb) {
        if (sb->prev)
                sb->prev->next = sb->next;
        else
                *head = sb->next;
        if (sb->next)
                sb->next->prev = sb->prev;
        sb->next = sb->prev = NULL;
}

int sandbox_list_has_pidns(const struct sandbox *sb, dev_t dev, ino_t ino) {
        for (; sb; sb = sb->next)
                if (sb->pidns_ino != 0 && sb->pidns_ino == ino && sb->pidns_dev == dev)
                        return 1;
        return 0;
}

static void sandbox_free(struct sandbox *sb) {
        size_t i;
        if (sb->disk_fd >= 0)
                close(sb->disk_fd); /* left running: its namespace holds the mount */
        free(sb->trash);
        free(sb->setup_key);
        if (sb->spec)
                sbx__v1__create_sandbox__free_unpacked(sb->spec, NULL);
        for (i = 0; i < sb->n_warnings; i++)
                free(sb->warnings[i]);
        free(sb->warnings);
        free(sb->waiters);
        free(sb->workspace);
        pathset_unref(sb->view.hidden);
        pathset_unref(sb->view.hidden_shared);
        /* Placeholders stay for a sandbox left to the next daemon: its view keeps them. */
        if (!sb->left_running) {
                placeholder_release(sb->made_dirs);
                placeholder_release(sb->made_files);
        }
        pathset_unref(sb->made_dirs);
        pathset_unref(sb->made_files);
        free(sb->view.files_cache);
        guard_forget(sb->d, &sb->view);
        free(sb->end_reason);
        free(sb->ptys_cut);
        free(sb);
}

/* A handle (or a command) that held sb has let go. */
static void release(struct sandbox *sb) {
        if (--sb->handles_open == 0 && sb->retired)
                sandbox_free(sb);
}

static void hold(struct sandbox *sb) {
        sb->handles_open++;
}

static void on_handle_closed(uv_handle_t *h) {
        release(h->data);
}

static void commands_idle(struct sandbox *sb) {
        if (sb->view.state == SBX__V1__SANDBOX_STATE__READY)
                sandbox_touch(sb);
}

static void command_failed(struct sandbox *sb, const char *reason) {
        sandbox_terminate(sb, reason, NULL, NULL);
}

static const struct sandbox_hooks hooks = {
        .hold = hold,
        .release = release,
        .idle = commands_idle,
        .fail = command_failed,
};

static const struct initchan_ops chan_ops;

char *sandbox_workspace_path(const struct sbxd *d, const char *id) {
        char *ws;
        return asprintf(&ws, "%s/sandboxes/%s/workspace", d->cfg->state_dir, id) < 0 ? NULL : ws;
}

struct sandbox *sandbox_alloc(struct sbxd *d, const char *id, const uint8_t *packed, size_t len,
                              uid_t owner, int64_t created_ms) {
        struct sandbox *sb = calloc(1, sizeof(*sb));
        Sbx__V1__CreateSandbox *spec;

        if (!sb)
                return NULL;
        spec = sbx__v1__create_sandbox__unpack(NULL, len, packed);
        if (!spec || !(sb->workspace = sandbox_workspace_path(d, id))) {
                if (spec)
                        sbx__v1__create_sandbox__free_unpacked(spec, NULL);
                free(sb);
                return NULL;
        }
        sb->d = d;
        sb->hooks = &hooks;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", id);
        sb->view.id = sb->id;
        cmdsched_queue_init(&sb->sched, sb->id);
        sb->view.d = d;
        sb->view.state = SBX__V1__SANDBOX_STATE__CREATING;
        sb->view.init_pidfd = -1;
        sb->view.root_fd = -1;
        sb->disk_fd = -1;
        sandbox_set_spec(sb, spec);
        initchan_init(&sb->chan, &chan_ops, sb);
        sb->uid_slot = -1;
        sb->isolated = 1;
        sb->ptys = SBX_SANDBOX_PTYS; /* reserved when its owner is known */
        sb->owner_uid = owner;
        sb->created_ms = created_ms;
        sb->idle_timeout_ms = spec->has_idle_timeout_ms ? spec->idle_timeout_ms : 0;
        uv_timer_init(d->loop, &sb->timer);
        uv_timer_init(d->loop, &sb->kill_timer);
        sb->timer.data = sb->kill_timer.data = sb;
        sb->handles_open = 2;
        return sb;
}

int sandbox_place(struct sandbox *sb, const char *name) {
        char *ws = sandbox_workspace_path(sb->d, name);

        if (!ws)
                return -ENOMEM;
        free(sb->workspace);
        sb->workspace = ws;
        snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", name);
        return 0;
}

int sandbox_move_dir(struct sandbox *sb, const char *name) {
        char *ws = sandbox_workspace_path(sb->d, name), *from = strdup(sb->workspace);
        char *to = ws ? strdup(ws) : NULL;
        int r = -ENOMEM;

        if (ws && from && to) {
                /* The state directories: the workspaces' parents. */
                *strrchr(from, '/') = '\0';
                *strrchr(to, '/') = '\0';
                r = rename(from, to) < 0 ? -errno : 0;
        }
        if (r == 0 && sb->image && sbimage_rename(sb->image, sb->image->name, to) < 0) {
                (void)rename(to, from);
                r = -ENOMEM;
        }
        if (r == 0) {
                free(sb->workspace);
                sb->workspace = ws;
                ws = NULL;
        }
        free(ws);
        free(from);
        free(to);
        return r;
}

void sandbox_discard(struct sandbox *sb) {
        sb->retired = 1;
        uv_close((uv_handle_t *)&sb->timer, on_handle_closed);
        uv_close((uv_handle_t *)&sb->kill_timer, on_handle_closed);
}

void sandbox_set_spec(struct sandbox *sb, Sbx__V1__CreateSandbox *spec) {
        if (sb->spec && sb->spec != spec)
                sbx__v1__create_sandbox__free_unpacked(sb->spec, NULL);
        sb->spec = spec;
        sb->view.policy = spec->policy;
        if (sb->egress && egress_set_policy(sb->egress, sb->id, sb->owner_uid, spec->policy) < 0) {
                /* Fail closed: never the rules (and records) of the policy it was made for. */
                egress_close(sb->egress, "the daemon ran out of memory");
                sb->egress = NULL;
                sandbox_warn(sb, "network allowlist: out of memory for the new rules; the proxy "
                                 "is closed (no network)");
        }
}

void sandbox_set_run_ids(struct sandbox *sb, uid_t uid, gid_t gid) {
        sb->run_uid = sb->view.run_uid = uid;
        sb->run_gid = sb->view.run_gid = gid;
}

void sandbox_set_creator(struct sandbox *sb, const struct caller *caller) {
        sb->creator = *caller;
        snprintf(sb->creator_name, sizeof(sb->creator_name), "%s",
                 caller->client_name ? caller->client_name : "");
        sb->creator.client_name = sb->creator_name;
        sb->creator.groups = NULL; /* the connection's */
        sb->creator.n_groups = 0;
}

/* What its disk limit means beyond ENOSPC, said once: a tmpfs is memory and ends with
 * the sandbox; a kept image is a file. */
static void warn_disk(struct sandbox *sb) {
        if (sb->disk_warned || sb->warm)
                return;
        sb->disk_warned = 1;
        if (sb->d->features.disk_mech == DISK_MECH_TMPFS)
                sandbox_warn(sb,
                             "disk limit: /workspace is a tmpfs of %llu bytes (%s): what it "
                             "holds is memory, and it ends with the sandbox",
                             (unsigned long long)sb->spec->policy->limits->disk_bytes,
                             sb->d->features.rootless ? "a rootless daemon"
                                                      : "no loop devices here, or --disk-via");
        else if (sb->d->features.disk_mech == DISK_MECH_IMAGE && sb->spec->has_keep_workspace &&
                 sb->spec->keep_workspace)
                sandbox_warn(sb,
                             "keep_workspace: /workspace is a filesystem image, kept as the "
                             "file %.*s/%s after the sandbox (mount -o loop or debugfs reads it)",
                             (int)(strrchr(sb->workspace, '/') - sb->workspace), sb->workspace,
                             DISK_IMAGE_NAME);
}

/* sb's ptys: given, counted already, and what its owner's budget has of the rest. */
static void reserve_ptys(struct sandbox *sb, unsigned given) {
        const struct quota_bound *b = &sb->d->ptys;
        uint64_t have_uid = b->q ? quota_amount(b->q, QUOTA_PTYS, sb->owner_uid) : 0,
                 have_all = b->q ? quota_total(b->q, QUOTA_PTYS) : 0, got = 0;
        char why[256];
        int r;

        r = given < SBX_SANDBOX_PTYS ? quota_add_upto(b, QUOTA_PTYS, sb->owner_uid,
                                                      SBX_SANDBOX_PTYS - given, &got)
                                     : 0;
        sb->ptys = given + (unsigned)got;
        sb->ptys_held = 1;
        if (r == 0)
                return;
        if (r == -ENOMEM)
                snprintf(why, sizeof(why), "the daemon is out of memory");
        else
                quota_explain_ptys(b, sb->owner_uid, r, have_uid, have_all, why, sizeof(why));
        free(sb->ptys_cut);
        sb->ptys_cut = strdup(why);
        if (sb->ptys == 0)
                sandbox_warn(sb,
                             "this sandbox has no ptys (a terminal, `sbx exec -t`, cannot be "
                             "opened in it): %s",
                             why);
        else
                sandbox_warn(sb, "this sandbox has %u ptys, not %u: %s", sb->ptys, SBX_SANDBOX_PTYS,
                             why);
        log_info("sbx=%s: %u ptys of %u for uid %u: %s", sb->id, sb->ptys, SBX_SANDBOX_PTYS,
                 (unsigned)sb->owner_uid, why);
}

void sandbox_reserve_ptys(struct sandbox *sb) {
        if (!sb->ptys_held)
                reserve_ptys(sb, 0);
}

void sandbox_reserve_ptys_of(struct sandbox *sb, const struct sandbox *old) {
        const struct quota_bound *b = &sb->d->ptys;
        unsigned given = old->ptys_held ? old->ptys : 0;

        if (sb->ptys_held)
                return;
        /* Whatever the bound says: old gives them back when it ends. */
        if (given && b->q &&
            quota_add(b->q, QUOTA_PTYS, sb->owner_uid, given, UINT64_MAX, UINT64_MAX) < 0)
                given = 0; /* out of memory: what the budget has */
        reserve_ptys(sb, given);
}

/* Its ptys go back to its owner's budget: nothing of it runs any more. */
static void give_back_ptys(struct sandbox *sb) {
        if (sb->ptys_held && sb->d->ptys.q)
                quota_sub(sb->d->ptys.q, QUOTA_PTYS, sb->owner_uid, sb->ptys);
        sb->ptys_held = 0;
}

void sandbox_apply_limits(struct sandbox *sb) {
        struct enforcement e;
        size_t i;

        enforce_apply(sb->spec->policy->limits, sb->cg, sb->d->cgroups->version,
                      sb->d->features.rootless, &e);
        memcpy(sb->enforcement, e.how, sizeof(sb->enforcement));
        if (sb->spec->policy->limits && sb->spec->policy->limits->has_disk_bytes) {
                sb->enforcement[LIM_DISK] = disk_enforcement(sb->d->features.disk_mech);
                warn_disk(sb);
        }
        sb->cg_enforced = e.cg_enforced;
        for (i = 0; i < e.n_warnings; i++)
                sandbox_warn(sb, "%s", e.warnings[i]);
}

/* ---- timers ------------------------------------------------------------------------- */

/* While a command runs or waits for a slot, a restore of it is set up, or a stream to one
 * of its ports is open (or being opened), the sandbox is not idle. */
static int busy(const struct sandbox *sb) {
        return sb->sched.n_running > 0 || sb->sched.n_queued > 0 || sb->restoring ||
               sb->socks.n_held > 0 || sb->socks.n_pending > 0;
}

static void on_timer(uv_timer_t *t) {
        struct sandbox *sb = t->data;
        int64_t now = sbxd_now_unix_ms();

        if (sb->view.state == SBX__V1__SANDBOX_STATE__CREATING) {
                /* A spare waits for a create as long as it takes, once built. */
                if (sb->spare && (!sb->building || sb->built))
                        return;
                /* Setup is bounded too: an init that hangs before Ready must not hold
                 * the creator, its quota and its uid forever. */
                if (now >= sb->deadline_ms ||
                    uv_now(sb->d->loop) - sb->last_activity >= SANDBOX_SETUP_TIMEOUT_MS)
                        fail_sandbox(sb, "its init did not finish setting up within %u ms",
                                     SANDBOX_SETUP_TIMEOUT_MS);
                else
                        uv_timer_start(&sb->timer, on_timer, SANDBOX_SETUP_CHECK_MS, 0);
                return;
        }
        if (sb->view.state != SBX__V1__SANDBOX_STATE__READY)
                return;
        if (now >= sb->deadline_ms) {
                log_info("sbx=%s: deadline reached; ending it", sb->id);
                sandbox_end(sb, SBX__V1__SANDBOX_STATE__EXPIRED, "expired");
                return;
        }
        if (sb->idle_timeout_ms && !busy(sb) &&
            uv_now(sb->d->loop) - sb->last_activity >= sb->idle_timeout_ms) {
                log_info("sbx=%s: idle for %llu ms; ending it", sb->id,
                         (unsigned long long)sb->idle_timeout_ms);
                sandbox_end(sb, SBX__V1__SANDBOX_STATE__EXPIRED, "idle");
                return;
        }
        sandbox_arm_timer(sb);
}

void sandbox_arm_timer(struct sandbox *sb) {
        int64_t now = sbxd_now_unix_ms();
        uint64_t due = sb->deadline_ms > now ? (uint64_t)(sb->deadline_ms - now) : 0;

        if (sb->idle_timeout_ms) {
                uint64_t idle_for = uv_now(sb->d->loop) - sb->last_activity;
                uint64_t idle_due =
                        idle_for >= sb->idle_timeout_ms ? 0 : sb->idle_timeout_ms - idle_for;
                if (busy(sb))
                        idle_due = sb->idle_timeout_ms;
                if (idle_due < due)
                        due = idle_due;
        }
        uv_timer_start(&sb->timer, on_timer, due, 0);
}

void sandbox_check_timer(struct sandbox *sb) {
        if (sb->view.state == SBX__V1__SANDBOX_STATE__READY ||
            sb->view.state == SBX__V1__SANDBOX_STATE__CREATING)
                on_timer(&sb->timer);
}

int sandbox_set_deadline(struct sandbox *sb, int64_t deadline_ms) {
        /* From now, not from creation: a session may go on as long as it asks, a week at
         * a time by default (config.h). */
        if (deadline_ms > sbxd_now_unix_ms() + (int64_t)sb->d->cfg->max_sandbox_lifetime_ms)
                return -EINVAL;
        sb->deadline_ms = deadline_ms;
        (void)store_sandbox_set_deadline(sb->d->store, sb->id, deadline_ms);
        if (sb->view.state == SBX__V1__SANDBOX_STATE__READY)
                sandbox_arm_timer(sb);
        return 0;
}

/* ---- the end ------------------------------------------------------------------------ */

/* Lets go of init: its channel, watchers and descriptors (what a sandbox's end and a
 * detach for the next daemon share). */
static void release_init(struct sandbox *sb) {
        if (sb->pidfd_poll_inited) {
                sb->pidfd_poll_inited = 0;
                uv_poll_stop(&sb->pidfd_poll);
                uv_close((uv_handle_t *)&sb->pidfd_poll, on_handle_closed);
        }
        initchan_close(&sb->chan);
        if (sb->view.init_pidfd >= 0)
                close(sb->view.init_pidfd);
        if (sb->view.root_fd >= 0)
                close(sb->view.root_fd);
        sb->view.init_pidfd = sb->view.root_fd = -1;
}

/* Tells the owner, once, that sb no longer counts as one of its sandboxes (over). */
static void tell_over(struct sandbox *sb) {
        if (sb->over_told)
                return;
        sb->over_told = 1;
        give_back_ptys(sb);
        if (sb->over)
                sb->over(sb->gone_ud, sb);
}

/* Closes the remaining handles, tells the owner (which takes sb out of its list) and
 * frees sb once every handle is closed. sb must not be used after this. */
static void retire(struct sandbox *sb) {
        uv_timer_stop(&sb->timer);
        uv_timer_stop(&sb->kill_timer);
        uv_close((uv_handle_t *)&sb->timer, on_handle_closed);
        uv_close((uv_handle_t *)&sb->kill_timer, on_handle_closed);
        if (sb->proc_spawned)
                uv_close((uv_handle_t *)&sb->proc, on_handle_closed);
        sb->retired = 1;
        tell_over(sb);
        sb->gone(sb->gone_ud, sb);
        if (sb->handles_open == 0)
                sandbox_free(sb);
}

/* The last part of the end, one loop turn after stage 0's exit, so that the replies
 * settle_end may have queued in that turn go out before it: the cgroup (kill anything
 * that escaped into it from outside the namespace, then remove it, commands' groups
 * first; about 0.8 ms on cgroup v1) and the start of the workspace's deletion. */
static void on_cleanup(uv_timer_t *t) {
        struct sandbox *sb = t->data;
        int r;

        if (sb->cg) {
                cgroup_kill(sb->cg);
                r = cgroup_remove_tree(sb->d->cgroups, sb->cg_name);
                if (r < 0)
                        log_warning("sbx=%s: cannot remove its cgroup: %s", sb->id, strerror(-r));
                cgroup_forget(sb->cg); /* the directories went with the tree */
                sb->cg = NULL;
        }
        if (sb->trash) {
                trash_remove_later(sb->d, sb->trash);
                free(sb->trash);
                sb->trash = NULL;
        }
        retire(sb);
}

/* Whether sb's id's record is its own: not a warm sandbox's (none), nor a restore's
 * (sbxtab.c: the new sandbox until it takes its place, the one it replaced). */
static int recorded(const struct sandbox *sb) {
        return !sb->warm && !sb->unrecorded;
}

/* Writes the end of sb into the records (a warm sandbox has none) and the log. */
static void record_end(struct sandbox *sb) {
        int r = !recorded(sb)
                        ? 0
                        : store_sandbox_set_state(sb->d->store, sb->id, names_state(sb->view.state),
                                                  sbxd_now_unix_ms(), sb->end_reason);
        if (r < 0)
                log_err("sbx=%s: cannot record its end: %s", sb->id,
                        store_last_error(sb->d->store));
        if (!recorded(sb))
                log_debug("sbx=%s: ended (%s)", sb->id, sb->end_reason);
        else
                log_info("sbx=%s: ended (%s)", sb->id, sb->end_reason);
}

/* Answers whoever waits on sb: its creator (the creation failed) and every terminate. */
static void answer_end(struct sandbox *sb) {
        size_t i;

        if (sb->create_cb) {
                sandbox_ready_cb cb = sb->create_cb;
                char msg[512];
                sb->create_cb = NULL;
                snprintf(msg, sizeof(msg), "sandbox '%s' could not be created: %s", sb->id,
                         sb->end_reason);
                cb(sb->create_ud, sb, sb->fail_errno ? sb->fail_errno : -EIO, msg);
        }
        for (i = 0; i < sb->n_waiters; i++)
                if (sb->waiters[i].cb)
                        sb->waiters[i].cb(sb->waiters[i].ud, sb);
        sb->n_waiters = 0;
}

/* Nothing of the sandbox runs any more: moves its workspace away (unmounting a disk
 * image first), records the end and answers everyone waiting. Called when PID 1 has
 * exited (on_pid1_exit), or from finish_end when that was not seen first. PID 1 of a
 * PID namespace exits only after every other process of it has been reaped, so this is
 * as final as stage 0's exit, which comes later: the last reference to the mount and
 * network namespaces goes with stage 0, and their teardown (most of a terminate's
 * millisecond) is then the kernel's business, not the client's wait. */
static void settle_end(struct sandbox *sb) {
        if (sb->answered)
                return;
        sb->answered = 1;
        initchan_drain(&sb->chan);
        command_end_all(sb, 0);
        /* Nothing runs from its image any more. */
        sbimage_release(sb->d, sb->image);
        if (sb->workspace && !sb->disk_busy && !sb->dir_holds) {
                sb->trash =
                        trash_sandbox_dir(sb->d, sb->id, sb->workspace, sb->disk_fd,
                                          sb->spec->has_keep_workspace && sb->spec->keep_workspace);
                sb->disk_fd = -1;
        }
        sb->view.state = sb->end_state;
        record_end(sb);
        answer_end(sb);
        tell_over(sb);
}

/* Stage 0 has exited: settles the end if PID 1's exit was not seen first, lets go of
 * init (only now: until stage 0 has exited, PID 1's pid is safe to signal) and leaves
 * the cgroup to on_cleanup. */
static void finish_end(struct sandbox *sb) {
        settle_end(sb);
        release_init(sb);
        sb->ended = 1;
        uv_timer_stop(&sb->kill_timer);
        uv_timer_start(&sb->timer, on_cleanup, 0, 0);
}

/* PID 1's pidfd turned readable: PID 1, and so every process of the sandbox, is gone. */
static void on_pid1_exit(uv_poll_t *h, int status, int events) {
        struct sandbox *sb = h->data;
        uv_poll_stop(h);
        if (status == 0)
                settle_end(sb);
}

/* 1 when sb's workspace is a disk image (disk.h) the daemon holds: made by this daemon,
 * or an older daemon's mounted on the host (its st_dev is not its directory's). */
static int workspace_mounted(const struct sandbox *sb) {
        char parent[SBX_PATH_MAX_BYTES + 8];
        struct stat a, b;

        if (sb->disk_fd >= 0)
                return 1;
        if (!sb->workspace)
                return 0;
        snprintf(parent, sizeof(parent), "%s/..", sb->workspace);
        return lstat(sb->workspace, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Watches PID 1's pidfd while the sandbox ends, to answer as soon as it has exited
 * rather than when stage 0 has (see settle_end). Without a pidfd (before Ready, an old
 * kernel) stage 0's exit settles the end. An adopted sandbox's pidfd is watched already.
 * So is a sandbox whose workspace is a mounted disk image: the sandbox's own mount of
 * the image goes with stage 0, and the host's release of it (disk_release) must come
 * after, as the last reference, whose writeback of what was left dirty (seconds for
 * gigabytes) then runs on a thread of the daemon; released earlier, stage 0's exit would
 * do that writeback, with the owner's quota already given back. */
static void watch_pid1_exit(struct sandbox *sb) {
        if (!sb->proc_spawned || sb->view.init_pidfd < 0 || sb->pidfd_poll_inited ||
            workspace_mounted(sb) ||
            uv_poll_init(sb->d->loop, &sb->pidfd_poll, sb->view.init_pidfd) < 0)
                return;
        sb->pidfd_poll.data = sb;
        hold(sb);
        sb->pidfd_poll_inited = 1;
        uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pid1_exit);
}

static void kill_init(struct sandbox *sb) {
        if ((!sb->proc_spawned && !sb->adopted) || sb->proc_exited)
                return;
        if (sb->view.init_pidfd >= 0) {
                if (syscall(SYS_pidfd_send_signal, sb->view.init_pidfd, SIGKILL, NULL, 0) < 0 &&
                    errno != ESRCH)
                        log_warning("sbx=%s: pidfd_send_signal: %s", sb->id, strerror(errno));
        } else if (sb->view.init_pid > 0 && sb->proc_spawned) {
                /* No pidfds (an old kernel, or valgrind): the pid is still safe to use,
                 * as stage 0, our child that has not exited, has not reaped it. */
                kill(sb->view.init_pid, SIGKILL);
        } else if (sb->proc_spawned) {
                /* Before Ready we do not know PID 1 yet: killing stage 0 takes PID 1 with
                 * it (its parent-death signal). */
                uv_process_kill(&sb->proc, SIGKILL);
        }
        /* With PID 1 killed, stage 0 exits only after reaping it, and PID 1 goes only
         * after every process of its namespace: stage 0's exit proves the sandbox is
         * empty. Stage 0 is not killed directly for that reason. */
}

static void on_kill_timer(uv_timer_t *t) {
        struct sandbox *sb = t->data;
        if (sb->answered)
                log_warning("sbx=%s: stage 0 has not exited %u ms after its PID 1; still waiting",
                            sb->id, SANDBOX_KILL_GRACE_MS);
        else
                log_err("sbx=%s: init did not exit %u ms after SIGKILL; still waiting", sb->id,
                        SANDBOX_KILL_GRACE_MS);
        kill_init(sb);
}

void sandbox_listen_end(struct sandbox *sb, struct sandbox_end_listener *l) {
        l->sb = sb;
        l->prev = NULL;
        l->next = sb->end_listeners;
        if (l->next)
                l->next->prev = l;
        sb->end_listeners = l;
}

void sandbox_unlisten_end(struct sandbox_end_listener *l) {
        if (!l->sb)
                return;
        if (l->prev)
                l->prev->next = l->next;
        else
                l->sb->end_listeners = l->next;
        if (l->next)
                l->next->prev = l->prev;
        l->sb = NULL;
        l->next = l->prev = NULL;
}

/* Tells every end listener of sb, each removed before it hears. */
static void tell_end_listeners(struct sandbox *sb, const char *reason) {
        while (sb->end_listeners) {
                struct sandbox_end_listener *l = sb->end_listeners;
                sandbox_unlisten_end(l);
                l->ending(l, sb, reason);
        }
}

void sandbox_end(struct sandbox *sb, Sbx__V1__SandboxState final_state, const char *reason) {
        if (sb->ending)
                return;
        sb->ending = 1;
        sb->end_state = final_state;
        free(sb->end_reason);
        sb->end_reason = strdup(reason);
        sb->view.state = SBX__V1__SANDBOX_STATE__TERMINATING;
        if (recorded(sb))
                (void)store_sandbox_set_state(sb->d->store, sb->id,
                                              names_state(SBX__V1__SANDBOX_STATE__TERMINATING), 0,
                                              NULL);
        uv_timer_stop(&sb->timer);
        initchan_stop(&sb->chan);
        egress_close(sb->egress, "the sandbox ended");
        sb->egress = NULL;
        sbsock_end(&sb->socks, "the sandbox ended");
        tell_end_listeners(sb, reason);
        if ((!sb->proc_spawned && !sb->adopted) || sb->proc_exited) {
                finish_end(sb);
                return;
        }
        kill_init(sb);
        watch_pid1_exit(sb);
        uv_timer_start(&sb->kill_timer, on_kill_timer, SANDBOX_KILL_GRACE_MS,
                       SANDBOX_KILL_GRACE_MS);
}

int sandbox_terminate(struct sandbox *sb, const char *reason, sandbox_ended_cb cb, void *ud) {
        if (sb->answered) {
                /* Over already, only its cleanup is left. */
                if (cb)
                        cb(ud, sb);
                return 0;
        }
        if (cb) {
                struct end_waiter *nw = realloc(sb->waiters, (sb->n_waiters + 1) * sizeof(*nw));
                if (!nw)
                        return -ENOMEM;
                sb->waiters = nw;
                sb->waiters[sb->n_waiters].cb = cb;
                sb->waiters[sb->n_waiters].ud = ud;
                sb->n_waiters++;
        }
        log_info("sbx=%s: ending (%s)", sb->id, reason);
        sandbox_end(sb,
                    strcmp(reason, "expired") == 0      ? SBX__V1__SANDBOX_STATE__EXPIRED
                    : strncmp(reason, "failed", 6) == 0 ? SBX__V1__SANDBOX_STATE__FAILED
                                                        : SBX__V1__SANDBOX_STATE__TERMINATED,
                    reason);
        return 0;
}

/* A step of the creation failed with err (-errno or a libuv error, which are the same
 * numbers): one that says the daemon is out of a resource answers the creator so
 * (RESOURCE_EXHAUSTED, try again), not as an internal failure. */
static void note_failure(struct sandbox *sb, int err) {
        if (err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EAGAIN ||
            err == -ENOSPC)
                sb->fail_errno = err;
}

static void fail_sandbox(struct sandbox *sb, const char *fmt, ...) {
        char msg[512];
        char reason[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_err("sbx=%s: failed: %s", sb->id, msg);
        snprintf(reason, sizeof(reason), "failed: %s", msg);
        sandbox_end(sb, SBX__V1__SANDBOX_STATE__FAILED, reason);
}

static void on_init_exit(uv_process_t *p, int64_t status, int term_signal) {
        struct sandbox *sb = p->data;
        sb->proc_exited = 1;
        if (!sb->ending) {
                /* Its last words first: a failed setup says why in Ready. */
                initchan_drain(&sb->chan);
        }
        if (!sb->ending)
                /* sandbox_end sees the exit and finishes at once. */
                fail_sandbox(sb, "its init exited unexpectedly (status %lld, signal %d)",
                             (long long)status, term_signal);
        else
                finish_end(sb);
}

/* An adopted sandbox's PID 1 is not our child: its pidfd turns readable when it has
 * exited, which (PID 1 of a PID namespace) is after every other process of it died. */
static void on_pidfd(uv_poll_t *h, int status, int events) {
        struct sandbox *sb = h->data;
        uv_poll_stop(h);
        sb->proc_exited = 1;
        if (!sb->ending)
                fail_sandbox(sb, "its init exited unexpectedly");
        else
                finish_end(sb);
}

void sandbox_leave(struct sandbox *sb) {
        sb->left_running = 1;
        command_end_all(sb, 1);
        egress_close(sb->egress, "the daemon stopped");
        sb->egress = NULL;
        sbsock_end(&sb->socks, "the daemon stopped");
        tell_end_listeners(sb, "the daemon stopped");
        release_init(sb);
        if (sb->cg) {
                cgroup_forget(sb->cg); /* it stays, for the next daemon */
                sb->cg = NULL;
        }
        log_notice("sbx=%s: left running for the next daemon", sb->id);
        retire(sb);
}

/* ---- what init says ----------------------------------------------------------------- */

/* 1 when pid is a child of parent (from /proc/PID/stat), 0 when not, -errno. PID 1 tells
 * its host pid in Ready, but init is untrusted: the pid must be our stage 0's child. */
static int is_child_of(pid_t pid, pid_t parent) {
        char path[64], buf[512];
        const char *p;
        ssize_t n;
        int fd;
        long ppid;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        /* "pid (comm) state ppid ...": comm may contain anything, so look after the last ')'. */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1)
                return -EIO;
        return ppid == (long)parent;
}

/* Notes the PID namespace of init (pid on the host), for sbxtab_is_sandbox_pidns. */
static void note_pidns(struct sandbox *sb, pid_t pid) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        if (stat(path, &st) == 0) {
                sb->pidns_dev = st.st_dev;
                sb->pidns_ino = st.st_ino;
        }
}

/* Opens the sandbox's own root, in its mount namespace: file operations resolve paths
 * beneath it with openat2(RESOLVE_IN_ROOT). Notes its PID namespace too. -errno. */
static int open_root(struct sandbox *sb, pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
        sb->view.root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        note_pidns(sb, pid);
        return sb->view.root_fd < 0 ? -errno : 0;
}

/* Pins the PID 1 that Ready names, then checks it: the pidfd first, as a pid verified
 * before being pinned could be reaped and reused in between. 0, or -1 (sb failed). */
static int pin_init(struct sandbox *sb, const Sbx__Init__V1__Ready *ready) {
        pid_t pid = ready->has_init_host_pid ? ready->init_host_pid : 0;
        int r;

        sb->view.init_pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
        if (pid > 0 && sb->view.init_pidfd < 0 && errno != ENOSYS) {
                note_failure(sb, -errno);
                fail_sandbox(sb, "pidfd_open(%d): %s", (int)pid, strerror(errno));
                return -1;
        }
        r = pid > 0 ? is_child_of(pid, sb->proc.pid) : 0;
        if (r != 1) {
                /* Not ours, or not known to be: never signalled or watched (the end waits
                 * for stage 0). */
                if (sb->view.init_pidfd >= 0)
                        close(sb->view.init_pidfd);
                sb->view.init_pidfd = -1;
                note_failure(sb, r);
                if (r < 0)
                        fail_sandbox(sb, "cannot check the pid its init reported (%d): %s",
                                     (int)pid, strerror(-r));
                else
                        fail_sandbox(sb, "its init reported a pid (%d) that is not its own",
                                     (int)pid);
                return -1;
        }
        sb->view.init_pid = pid;
        if (sb->view.init_pidfd >= 0)
                fcntl(sb->view.init_pidfd, F_SETFD, FD_CLOEXEC);
        r = open_root(sb, pid);
        if (r < 0) {
                note_failure(sb, r);
                fail_sandbox(sb, "cannot open its root /proc/%d/root: %s", (int)pid, strerror(-r));
                return -1;
        }
        return 0;
}

void sandbox_start_egress(struct sandbox *sb, int fd) {
        const Sbx__V1__Policy *pol = sb->spec ? sb->spec->policy : NULL;
        int r;

        if (fd < 0)
                return;
        if (sb->egress || !pol || pol->network != SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST) {
                close(fd);
                return;
        }
        r = egress_start(sb->d, sb->id, sb->owner_uid, pol, fd, &sb->egress);
        if (r < 0) {
                sb->egress = NULL;
                sandbox_warn(sb,
                             "network allowlist: the proxy could not start (%s): no "
                             "connection leaves the sandbox",
                             strerror(-r));
        }
}

static void on_ready(void *ud, const Sbx__Init__V1__Ready *ready, int fd) {
        struct sandbox *sb = ud;
        size_t i;

        if (sb->view.state != SBX__V1__SANDBOX_STATE__CREATING || !ready->has_ok || !ready->ok) {
                if (fd >= 0)
                        close(fd);
                fd = -1;
        }

        if (sb->view.state != SBX__V1__SANDBOX_STATE__CREATING) {
                fail_sandbox(sb, "its init sent Ready twice");
                return;
        }
        if (!ready->has_ok || !ready->ok) {
                fail_sandbox(sb, "%s", ready->error ? ready->error : "init setup failed");
                return;
        }
        if (pin_init(sb, ready) < 0) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        sandbox_start_egress(sb, fd);
        sb->init_sockets = ready->has_sockets && ready->sockets;
        for (i = 0; i < ready->n_warnings && i < SANDBOX_MAX_INIT_WARNINGS; i++)
                sandbox_warn(sb, "%s", ready->warnings[i]);
        sb->view.state = SBX__V1__SANDBOX_STATE__READY;
        guard_ready(sb->d, &sb->view, 0);
        if (sb->warm) {
                /* Waits in the pool, unrecorded and without a deadline, for a claim. */
                log_debug("sbx=%s: warm and ready (init pid %d)", sb->id, (int)sb->view.init_pid);
                if (sb->pool_ready)
                        sb->pool_ready(sb->gone_ud, sb);
                return;
        }
        if (recorded(sb)) {
                (void)store_sandbox_set_init_pid(sb->d->store, sb->id, sb->view.init_pid);
                (void)store_sandbox_set_state(sb->d->store, sb->id,
                                              names_state(SBX__V1__SANDBOX_STATE__READY), 0, NULL);
        }
        sandbox_touch(sb);
        sandbox_arm_timer(sb);
        log_info("sbx=%s: ready (init pid %d, uid %u)", sb->id, (int)sb->view.init_pid,
                 (unsigned)sb->run_uid);
        if (sb->create_cb) {
                sandbox_ready_cb cb = sb->create_cb;
                sb->create_cb = NULL;
                cb(sb->create_ud, sb, 0, NULL);
        }
}

/* A spare's base is built: a create whose policy fits it may take it now (warm.c). */
static void on_built(void *ud) {
        struct sandbox *sb = ud;

        if (!sb->spare || !sb->building || sb->built) {
                fail_sandbox(sb, "its init sent Built unasked");
                return;
        }
        sb->built = 1;
        log_debug("sbx=%s: spare built (init pid %d)", sb->id, (int)sb->proc.pid);
        if (sb->pool_ready)
                sb->pool_ready(sb->gone_ud, sb);
}

static void on_start_failed(void *ud, uint64_t command_id, int err, const char *msg) {
        command_on_start_failed(ud, command_id, err, msg);
}

static void on_started(void *ud, uint64_t command_id) {
        command_on_started(ud, command_id);
}

static void on_exited(void *ud, const Sbx__Init__V1__Exited *ex) {
        command_on_exited(ud, ex);
}

static void on_socket_made(void *ud, const Sbx__Init__V1__SocketMade *made, int fd) {
        struct sandbox *sb = ud;
        int err = made->has_error_errno ? made->error_errno : 0;

        if (!made->has_socket_id ||
            sbsock_made(&sb->socks, made->socket_id, err, fd) == -EPROTO) {
                if (!made->has_socket_id && fd >= 0)
                        close(fd);
                fail_sandbox(sb, "its init answered a socket never asked for");
        }
}

int sandbox_make_socket(struct sandbox *sb, struct sbsock_req *req, bool ipv6,
                        const struct sbsock_ops *ops, void *ud) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__MakeSocket ms = SBX__INIT__V1__MAKE_SOCKET__INIT;
        int r;

        if (sb->ending)
                return -ENODEV;
        if (sb->view.state != SBX__V1__SANDBOX_STATE__READY || sb->warm)
                return -ESHUTDOWN;
        if (!sb->init_sockets)
                return -EOPNOTSUPP;
        r = sbsock_pin_netns(&sb->socks, sb->view.init_pid, sb->view.init_pidfd);
        if (r < 0)
                return r;
        r = sbsock_reserve(&sb->socks, &ms.socket_id);
        if (r < 0)
                return r;
        ms.has_socket_id = 1;
        ms.has_ipv6 = 1;
        ms.ipv6 = ipv6;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_MAKE_SOCKET;
        m.make_socket = &ms;
        /* Sent before req is registered: a failed send ends the sandbox, which must not
         * reach req from within this call. */
        r = initchan_send(&sb->chan, &m, NULL, 0);
        if (r < 0)
                return r;
        sbsock_add(&sb->socks, req, ms.socket_id, ipv6, ops, ud);
        return 0;
}

/* 1 when sb's policy's network is mode. */
static int network_is(const struct sandbox *sb, Sbx__V1__NetworkMode mode) {
        const Sbx__V1__Policy *pol = sb->spec ? sb->spec->policy : NULL;
        return pol && pol->network == mode;
}

int sandbox_network_is_host(const struct sandbox *sb) {
        return network_is(sb, SBX__V1__NETWORK_MODE__NETWORK_FULL);
}

int sandbox_network_is_allowlist(const struct sandbox *sb) {
        return network_is(sb, SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST);
}

unsigned sandbox_sockets_held(const struct sandbox *sb) {
        return sb->socks.n_held + sb->socks.n_pending;
}

static void on_chan_failed(void *ud, const char *why) {
        fail_sandbox(ud, "%s", why);
}

static void on_chan_closed(void *ud) {
        release(ud);
}

static const struct initchan_ops chan_ops = {
        .ready = on_ready,
        .built = on_built,
        .start_failed = on_start_failed,
        .started = on_started,
        .exited = on_exited,
        .socket_made = on_socket_made,
        .failed = on_chan_failed,
        .handle_closed = on_chan_closed,
};

/* Puts sb's channel on the loop (it holds sb until closed). 0 or -errno. */
static int watch_chan(struct sandbox *sb) {
        int r = initchan_watch(&sb->chan, sb->d->loop);
        if (r == 0)
                hold(sb);
        return r;
}

/* ---- the view and the adoption socket ----------------------------------------------- */

int sandbox_keep_view(struct sandbox *sb, const struct policy_view *view) {
        const Sbx__V1__Policy *pol = sb->spec->policy;

        sb->view.hidden = pathset_ref(view->hidden);
        sb->view.hidden_shared =
                pathset_ref(view->watched_shared ? view->watched_shared : view->watched);
        /* Placeholders are removed with the rights they were made with (placeholder.h); an
         * adopted sandbox's owner without a passwd entry has no known gid, and its are
         * left in place. */
        if (sb->owner_gid != (gid_t)-1) {
                sb->made_dirs = pathset_ref(view->made_dirs);
                sb->made_files = pathset_ref(view->made_files);
                placeholder_hold(view->made_dirs, view->made_dirs_as, sb->owner_uid, sb->owner_gid);
                placeholder_hold(view->made_files, view->made_files_as, sb->owner_uid,
                                 sb->owner_gid);
        }
        /* The guard keeps host paths covered: of an image's sandbox, those in its
         * writable paths (its root is no host tree). */
        {
                const struct guard_only w = {pol->writable_paths, pol->n_writable_paths};
                return guard_watch(sb->d, &sb->view, view, pol->root_dir ? pol->root_dir : "/",
                                   pol->denied_write_paths, pol->n_denied_write_paths,
                                   sb->image ? &w : NULL);
        }
}

int sandbox_adopt_path(const char *workspace, char *buf, size_t len) {
        char *dir = strdup(workspace), *slash;
        int fd;
        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash)
                *slash = '\0';
        fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        free(dir);
        if (fd < 0)
                return -errno;
        snprintf(buf, len, "/proc/self/fd/%d/init.sock", fd);
        return fd;
}

int sandbox_adopt_listen(struct sandbox *sb) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        mode_t old;
        int dfd, fd, r;

        dfd = sandbox_adopt_path(sb->workspace, sa.sun_path, sizeof(sa.sun_path));
        if (dfd < 0)
                return -1;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        old = umask(0177);
        r = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r == 0)
                r = listen(fd, 4);
        close(dfd);
        if (r < 0) {
                log_warning("sbx=%s: no adoption socket: %s", sb->id, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

/* ---- setting up --------------------------------------------------------------------- */

/* The Setup message being built for a new sandbox, with what it refers to. */
struct setup_msg {
        Sbx__Init__V1__Setup setup;
        void *mem; /* policy_setup's */
        struct policy_view view;
        int fds[SBX_INIT_MAX_FDS]; /* what Setup carries (init.proto), owned */
        size_t n_fds;
        size_t n_cg_fds; /* of which the cgroup's (stage 0 joins through them) */
        int cg_v2;
};

static int mkdir_owned(const char *path, mode_t mode, uid_t uid, gid_t gid) {
        if (mkdir(path, mode) < 0)
                return -errno;
        if (chown(path, uid, gid) < 0 || chmod(path, mode) < 0) {
                int r = -errno;
                rmdir(path);
                return r;
        }
        return 0;
}

/* STATE/sandboxes/ID and its workspace (the daemon's own for a warm sandbox of the
 * host's root, whose claim gives it its uid, or in rootless mode, else the sandbox
 * user's: a warm one's of an image too, whose ids are its own from the start and kept
 * when it is claimed). 0, or -1 (sb failed). */
static int make_dirs(struct sandbox *sb) {
        struct sbxd *d = sb->d;
        int own = d->features.rootless || (sb->warm && !sb->image);
        char *sbdir = strdup(sb->workspace), *slash = sbdir ? strrchr(sbdir, '/') : NULL;
        int r = 0;

        if (!slash) {
                free(sbdir);
                note_failure(sb, -ENOMEM);
                fail_sandbox(sb, "daemon out of memory");
                return -1;
        }
        *slash = '\0';
        if (mkdir(sbdir, 0711) < 0 && errno != EEXIST) {
                fail_sandbox(sb, "cannot create %s: %s", sbdir, strerror(errno));
                r = -1;
        }
        if (r == 0 && sb->image && (r = sbimage_make_dirs(sb->image, d, sbdir)) < 0) {
                fail_sandbox(sb, "cannot create %s/root for its image: %s", sbdir, strerror(-r));
                r = -1;
        }
        free(sbdir);
        if (r < 0)
                return r;
        /* Rootless, an image's user other than root is one of the daemon user's
         * subordinate ids, which it cannot give the workspace: the workspace is then
         * everyone's in the sandbox, as /tmp is (and the daemon's on the host). */
        r = mkdir_owned(sb->workspace,
                        own && sb->image && (sb->image->uid || sb->image->gid) ? 01777 : 0755,
                        own ? d->euid : sb->run_uid, own ? d->egid : sb->run_gid);
        if (r < 0) {
                fail_sandbox(sb, "cannot create workspace %s: %s", sb->workspace, strerror(-r));
                return -1;
        }
        return 0;
}

/* PROJECT_QUOTA: its workspace's project and quota (disk.h). 0, or -1 (sb failed). */
static int apply_quota(struct sandbox *sb) {
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        char err[512];

        if (!l || !l->has_disk_bytes || sb->d->features.disk_mech != DISK_MECH_QUOTA)
                return 0;
        if (disk_quota_apply(sb->workspace, sb->id, l->disk_bytes,
                             l->has_disk_inodes ? l->disk_inodes : 0, err, sizeof(err)) < 0) {
                fail_sandbox(sb, "cannot limit its disk: %s", err);
                return -1;
        }
        /* An image's writable root counts too: its upper and work directories (one
         * project: overlayfs renames from one into the other). */
        for (int i = 0; sb->image && i < 2; i++) {
                char dir[SBX_PATH_MAX_BYTES];
                snprintf(dir, sizeof(dir), "%s/%s", sb->image->root_dir, i ? "work" : "upper");
                if (disk_quota_join(dir, sb->workspace, err, sizeof(err)) < 0) {
                        fail_sandbox(sb, "cannot limit its disk: %s", err);
                        return -1;
                }
        }
        return 0;
}

/* The sandbox's cgroup (a warning, not a failure, when there is none) and its limits. */
static void make_cgroup(struct sandbox *sb) {
        struct cgroup_env *cgs = sb->d->cgroups;
        int r;

        if (cgs->version != CGROUP_NONE) {
                /* v1: init and commands live in the sandbox's group itself. v2: the group
                 * has children (init's leaf, commands' leaves), never processes. */
                r = cgroup_create(cgs, sb->cg_name, cgs->version != CGROUP_V2, &sb->cg);
                if (r < 0)
                        sandbox_warn(sb,
                                     "no cgroup for this sandbox (%s): limits fall back to "
                                     "rlimits",
                                     strerror(-r));
        } else {
                sandbox_warn(sb, "no usable cgroups on this host: memory, cpu_percent and "
                                 "processes limits are not enforced (see `sbx doctor`)");
        }
        sandbox_apply_limits(sb);
}

/* Starts stage 0 of the init helper with child_fd as its descriptor 3. 0 or -errno. */
static int spawn_helper(struct sandbox *sb, int child_fd, char *err, size_t errlen) {
        uv_process_options_t o;
        uv_stdio_container_t stdio[4];
        char *args[] = {(char *)"sbx-init", (char *)"--fd", (char *)"3", NULL};
        char *env[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        int r;

        memset(&o, 0, sizeof(o));
        memset(stdio, 0, sizeof(stdio));
        stdio[0].flags = UV_IGNORE;
        stdio[1].flags = UV_IGNORE;
        stdio[2].flags = UV_INHERIT_FD;
        stdio[2].data.fd = 2;
        stdio[3].flags = UV_INHERIT_FD;
        stdio[3].data.fd = child_fd;
        o.file = sb->d->cfg->init_path;
        o.args = args;
        o.env = env;
        o.stdio = stdio;
        o.stdio_count = 4;
        o.exit_cb = on_init_exit;
        /* Its own session: a terminal's ^C reaches the daemon, which ends sandboxes in
         * order, and never the init helpers directly. */
        o.flags = UV_PROCESS_DETACHED;
        sb->proc.data = sb;
        r = uv_spawn(sb->d->loop, &sb->proc, &o);
        /* Even a handle that failed to spawn was initialised: it must be closed. */
        hold(sb);
        if (r < 0) {
                snprintf(err, errlen, "cannot start the init helper %s: %s (%s)",
                         sb->d->cfg->init_path, uv_strerror(r),
                         r == UV_EMFILE || r == UV_ENFILE || r == UV_ENOMEM || r == UV_EAGAIN
                                 ? "the daemon is short of descriptors or memory; try again"
                                 : "reinstall sbxd or pass --init");
                uv_close((uv_handle_t *)&sb->proc, on_handle_closed);
                return r;
        }
        sb->proc_spawned = 1;
        return 0;
}

/* The channel (a socketpair: ours, non-blocking, goes to sb's channel; the helper's is
 * its descriptor 3) and the helper itself. 0, or -1 (sb failed). */
static int spawn_init(struct sandbox *sb) {
        int sv[2], sndbuf = 2 * SBX_INIT_MAX_MSG_BYTES, r;
        char err[512];

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                note_failure(sb, -errno);
                fail_sandbox(sb, "socketpair: %s", strerror(errno));
                return -1;
        }
        (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        initchan_open(&sb->chan, sv[0]);
        r = spawn_helper(sb, sv[1], err, sizeof(err));
        close(sv[1]);
        if (r < 0) {
                note_failure(sb, r);
                fail_sandbox(sb, "%s", err);
                return -1;
        }
        return 0;
}

/* The descriptors stage 0 joins the sandbox's cgroup through, first thing (v2: a leaf
 * "init" of its own), added to m. 0, or -1 (sb failed). */
static int add_cgroup_fds(struct sandbox *sb, struct setup_msg *m) {
        struct cgroup *target = sb->cg, *leaf = NULL;
        int v2 = 0, r = 0;

        if (!sb->cg)
                return 0;
        if (sb->d->cgroups->version == CGROUP_V2) {
                char rel[SBX_ID_MAX_BYTES + 8];
                snprintf(rel, sizeof(rel), "%s/init", sb->cg_name);
                r = cgroup_create(sb->d->cgroups, rel, 1, &leaf);
                target = leaf;
        }
        if (target) {
                r = cgroup_join_fds(target, m->fds + m->n_fds, SBX_INIT_MAX_FDS - 1, &v2);
                if (r >= 0) {
                        m->n_cg_fds = (size_t)r;
                        m->n_fds += m->n_cg_fds;
                        m->cg_v2 = v2;
                }
        }
        /* The leaf's directory goes with the sandbox's tree; only free it here. */
        if (leaf)
                cgroup_forget(leaf);
        if (r < 0) {
                note_failure(sb, r);
                fail_sandbox(sb, "cannot open its cgroup for its init: %s", strerror(-r));
                return -1;
        }
        return 0;
}

/* The adoption socket, first of Setup's descriptors (init.proto); none for a warm
 * sandbox (it gets one when it is claimed) or without --adopt-grace. */
static void add_adoption(struct sandbox *sb, struct setup_msg *m) {
        int grace = sb->d->cfg->adopt_grace_ms != 0;
        int fd = !sb->warm && grace ? sandbox_adopt_listen(sb) : -1;

        if (fd >= 0) {
                m->setup.has_adoptable = m->setup.has_adopt_grace_ms = 1;
                m->setup.adoptable = 1;
                m->setup.adopt_grace_ms = (uint32_t)sb->d->cfg->adopt_grace_ms;
                memmove(m->fds + 1, m->fds, m->n_fds * sizeof(*m->fds));
                m->fds[0] = fd;
                m->n_fds++;
        } else if (!sb->warm && grace) {
                sandbox_warn(sb, "this sandbox cannot be re-adopted by a restarted daemon");
        }
}

/* A copy of the directory path below dirfd as a mount attached nowhere (open_tree, as
 * the daemon may), nosuid and nodev, as the next descriptor. 0, or -1 (sb failed). */
static int add_clone(struct sandbox *sb, struct setup_msg *m, int dirfd, const char *path) {
        struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
        int fd = m->n_fds < SBX_INIT_MAX_FDS
                         ? (int)syscall(SYS_open_tree, dirfd, path,
                                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW)
                         : -1;
        int r = fd < 0 ? (m->n_fds < SBX_INIT_MAX_FDS ? -errno : -EMFILE) : 0;

        if (r == 0 && syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                r = -errno;
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                note_failure(sb, r);
                fail_sandbox(sb, "cannot pass its %s to its init: %s",
                             strcmp(path, SBIMAGE_DISK_ROOT) == 0 ? "writable root" : "workspace",
                             strerror(-r));
                return -1;
        }
        m->fds[m->n_fds++] = fd;
        return 0;
}

/* An image's sandbox with a disk image: its workspace and its writable root are
 * directories of that filesystem (sbimage_disk_dirs), passed as two mounts. */
static int add_image_disk(struct sandbox *sb, struct setup_msg *m) {
        if (add_clone(sb, m, sb->disk_fd, SBIMAGE_DISK_WORKSPACE) < 0 ||
            add_clone(sb, m, sb->disk_fd, SBIMAGE_DISK_ROOT) < 0)
                return -1;
        m->setup.has_workspace_mount = m->setup.workspace_mount = 1;
        m->setup.has_image_upper_mount = m->setup.image_upper_mount = 1;
        return 0;
}

/* Its disk image's mount (init.proto Setup.workspace_mount), the last descriptor: a
 * copy, the daemon keeps its own hold. 0, or -1 (sb failed). */
static int add_workspace_mount(struct sandbox *sb, struct setup_msg *m) {
        int fd;

        /* An image's root mode sandbox is in a user namespace of its own from the start,
         * whose root may not enter the state directory: its workspace comes as a mount
         * too, a copy of the directory's (open_tree, as the daemon may); with a tmpfs
         * disk, stage 0 makes it. */
        if (sb->disk_fd < 0 && sb->image && !sb->d->features.rootless &&
            !(m->setup.has_workspace_tmpfs && m->setup.workspace_tmpfs)) {
                if (add_clone(sb, m, AT_FDCWD, sb->workspace) < 0)
                        return -1;
                m->setup.has_workspace_mount = m->setup.workspace_mount = 1;
                return 0;
        }
        if (sb->disk_fd >= 0 && sb->image)
                return add_image_disk(sb, m);
        if (sb->disk_fd < 0)
                return 0;
        fd = m->n_fds < SBX_INIT_MAX_FDS ? fcntl(sb->disk_fd, F_DUPFD_CLOEXEC, 3) : -EMFILE;
        if (fd < 0) {
                int r = m->n_fds < SBX_INIT_MAX_FDS ? -errno : -EMFILE;
                note_failure(sb, r);
                fail_sandbox(sb, "cannot pass its disk to its init: %s", strerror(-r));
                return -1;
        }
        m->fds[m->n_fds++] = fd;
        m->setup.has_workspace_mount = m->setup.workspace_mount = 1;
        return 0;
}

/* Its ptys (init.proto Setup.ptys), and for a warm sandbox that its owner's come with
 * Claim (Setup.warm): until then it is built with SBX_SANDBOX_PTYS. */
static void add_ptys(struct sandbox *sb, struct setup_msg *m) {
        m->setup.has_ptys = 1;
        m->setup.ptys = sb->ptys;
        m->setup.has_warm = m->setup.warm = sb->warm;
}

/* What an image's sandbox of spec writes reaches no other user of the host unless it
 * has a writable path or keeps its workspace: its packages may install setuid programs
 * then (init.proto Setup.setid_modes). */
static int image_setid_modes(const Sbx__V1__CreateSandbox *spec) {
        return spec->policy->n_writable_paths == 0 &&
               !(spec->has_keep_workspace && spec->keep_workspace);
}

/* What init builds the sandbox from: its view of the host, kept for the file operations
 * and the guard, and for a warm sandbox the key requests are matched by. 0, or -1. */
static int build_setup(struct sandbox *sb, struct policy_objects *objs, struct setup_msg *m) {
        /* An image's commands run as ids of its own namespace. */
        const struct policy_sandbox ps = {
                .id = sb->id,
                .workspace = sb->workspace,
                .spec = sb->spec,
                .run_uid = sb->image ? sb->image->uid : sb->run_uid,
                .owner_uid = sb->owner_uid,
                .run_gid = sb->image ? sb->image->gid : sb->run_gid,
                .owner_gid = sb->owner_gid,
                .cg = sb->cg,
        };
        int r = policy_view_build(sb->d, sb->spec, &m->view);

        if (r == 0)
                r = policy_setup(sb->d, &ps, &m->view, objs, &m->setup, &m->mem);
        if (r == 0 && sb->image) {
                sb->image->setid_modes = image_setid_modes(sb->spec);
                sbimage_fill_setup(sb->image, &m->setup);
        }
        if (r < 0) {
                note_failure(sb, r);
                fail_sandbox(sb, "cannot build its setup: %s", strerror(-r));
                return -1;
        }
        r = sandbox_keep_view(sb, &m->view);
        if (r < 0) {
                /* A hidden path the host made or replaced later would lie bare. */
                note_failure(sb, r);
                fail_sandbox(sb, "the daemon cannot keep the paths it hides covered: its "
                                 "user's inotify %s are all in use; end some file watches, "
                                 "or raise the limit",
                                 r == -ENOSPC ? "watches (fs.inotify.max_user_watches)"
                                              : "instances (fs.inotify.max_user_instances)");
                return -1;
        }
        if (sb->warm && sandbox_setup_key(&m->setup, &sb->setup_key, &sb->setup_key_len) < 0) {
                note_failure(sb, -ENOMEM);
                fail_sandbox(sb, "daemon out of memory");
                return -1;
        }
        return 0;
}

/* Sends Setup with its descriptors (init holds them then; ours are closed) and watches
 * the channel. 0, or -1 (sb failed). */
static int send_setup(struct sandbox *sb, struct setup_msg *m) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        int r;

        if (m->n_cg_fds > 0) {
                m->setup.has_n_cgroup_fds = m->setup.has_cgroup_v2 = 1;
                m->setup.n_cgroup_fds = (uint32_t)m->n_cg_fds;
                m->setup.cgroup_v2 = m->cg_v2;
        }
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_SETUP;
        msg.setup = &m->setup;
        r = initchan_send(&sb->chan, &msg, m->fds, m->n_fds);
        while (m->n_fds > 0)
                close(m->fds[--m->n_fds]);
        if (r < 0)
                return -1; /* the channel failed the sandbox */
        /* A spare's channel is watched from its Join on. */
        if (!sb->prepared && watch_chan(sb) < 0) {
                fail_sandbox(sb, "cannot watch its init channel");
                return -1;
        }
        return 0;
}

/* The first steps of sandbox_start: its directories (and quota), its cgroup and its
 * init. 0, or -1 at the first that failed the sandbox. */
/* An image's sandbox (root mode): its root, which is no root of the host's, may move
 * its commands into groups of their own (cgroup v2; cgroup.h). */
static void delegate_cgroup(struct sandbox *sb) {
        uid_t root;
        int r;

        if (!sb->cg || !sb->image || sb->image->block < 0)
                return;
        root = sbimage_host_id(sb->image, 0);
        r = cgroup_delegate_procs(sb->cg, root, root);
        sb->cg_delegated = r == 0;
        if (r < 0)
                log_warning("sbx=%s: its commands get no cgroups of their own: %s", sb->id,
                            strerror(-r));
}

static int start_spawn(struct sandbox *sb, struct setup_msg *m) {
        if (make_dirs(sb) < 0 || apply_quota(sb) < 0)
                return -1;
        if (sb->prepared) {
                /* A spare: its cgroup is made and joined; it takes the request's limits. */
                sandbox_apply_limits(sb);
                delegate_cgroup(sb);
                return 0;
        }
        make_cgroup(sb);
        delegate_cgroup(sb);
        return spawn_init(sb) < 0 || add_cgroup_fds(sb, m) < 0 ? -1 : 0;
}

/* The last: its Setup, sent. 0, or -1 (sb failed). */
static int start_setup(struct sandbox *sb, struct policy_objects *objs, struct setup_msg *m) {
        if (build_setup(sb, objs, m) < 0)
                return -1;
        add_adoption(sb, m);
        add_ptys(sb, m);
        if (add_workspace_mount(sb, m) < 0)
                return -1;
        return send_setup(sb, m);
}

/* Sends a spare's Join: the descriptors of its cgroup, which stage 0 joins at once. 0,
 * or -1 (sb failed). */
static int send_join(struct sandbox *sb, struct setup_msg *m) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Join join = SBX__INIT__V1__JOIN__INIT;
        int r;

        join.has_n_cgroup_fds = join.has_cgroup_v2 = 1;
        join.n_cgroup_fds = (uint32_t)m->n_cg_fds;
        join.cgroup_v2 = m->cg_v2;
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_JOIN;
        msg.join = &join;
        r = initchan_send(&sb->chan, &msg, m->fds, m->n_fds);
        while (m->n_fds > 0)
                close(m->fds[--m->n_fds]);
        if (r < 0)
                return -1;
        if (watch_chan(sb) < 0) {
                fail_sandbox(sb, "cannot watch its init channel");
                return -1;
        }
        return 0;
}

/* Sends a spare built ahead the base of its view (init.proto Setup.prebuild). 0, or -1
 * (sb failed). */
static int send_base(struct sandbox *sb) {
        const struct policy_sandbox ps = {.id = sb->id, .spec = sb->spec, .cg = sb->cg};
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        void *mem = NULL;
        int r = policy_setup_base(sb->d, &ps, &setup, &mem);

        if (r < 0) {
                policy_free_setup(&setup, mem);
                fail_sandbox(sb, "cannot build its base: %s", strerror(-r));
                return -1;
        }
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_SETUP;
        msg.setup = &setup;
        r = initchan_send(&sb->chan, &msg, NULL, 0);
        policy_free_setup(&setup, mem);
        return r < 0 ? -1 : 0; /* the channel failed the sandbox */
}

int sandbox_prepare(struct sandbox *sb, int build) {
        struct setup_msg m = {.setup = SBX__INIT__V1__SETUP__INIT};
        int r = -1;

        make_cgroup(sb);
        if (spawn_init(sb) == 0 && add_cgroup_fds(sb, &m) == 0 && send_join(sb, &m) == 0 &&
            (!build || send_base(sb) == 0)) {
                sb->prepared = 1;
                sb->building = build;
                /* Building is bounded as any setup (a hung mount on the host): it is
                 * timed until Built. */
                if (build) {
                        sandbox_touch(sb);
                        uv_timer_start(&sb->timer, on_timer, SANDBOX_SETUP_CHECK_MS, 0);
                }
                log_debug("sbx=%s: spare started%s (init pid %d)", sb->id,
                          build ? ", building its base" : "", (int)sb->proc.pid);
                r = 0;
        }
        while (m.n_fds > 0)
                close(m.fds[--m.n_fds]);
        return r;
}

/* After the steps (ok: all done): sb's setup is timed from here; what they used goes. */
static void start_done(struct sandbox *sb, struct policy_objects *objs, struct setup_msg *m,
                       int ok) {
        if (ok) {
                sandbox_touch(sb); /* setup is timed from here */
                uv_timer_start(&sb->timer, on_timer, SANDBOX_SETUP_CHECK_MS, 0);
                if (sb->warm)
                        log_debug("sbx=%s: creating a warm sandbox (init pid %d)", sb->id,
                                  (int)sb->proc.pid);
                else
                        log_info("sbx=%s: creating for uid %u (init pid %d)", sb->id,
                                 (unsigned)sb->owner_uid, (int)sb->proc.pid);
        }
        while (m->n_fds > 0)
                close(m->fds[--m->n_fds]);
        policy_free_setup(&m->setup, m->mem);
        policy_view_clear(&m->view);
        policy_objects_clear(objs);
}

/* A sandbox's start waiting for its disk image (disk.h): what the last step needs. */
struct disk_start {
        struct sandbox *sb;
        struct policy_objects objs;
        struct setup_msg m;
        uint64_t started; /* uv_now() when the image was asked for */
};

void sandbox_dir_hold(struct sandbox *sb) {
        hold(sb);
        sb->dir_holds++;
}

/* An ended sandbox's directory, once nothing holds it (its end was answered without it):
 * to the trash now. */
static void trash_left_dir(struct sandbox *sb) {
        if (!sb->answered || sb->disk_busy || sb->dir_holds)
                return;
        trash_sandbox_dir_now(sb->d, sb->id, sb->workspace, sb->disk_fd,
                              sb->spec->has_keep_workspace && sb->spec->keep_workspace);
        sb->disk_fd = -1;
}

void sandbox_dir_release(struct sandbox *sb) {
        sb->dir_holds--;
        if (sb->ending)
                trash_left_dir(sb);
        release(sb);
}

static void on_disk_made(void *ud, int r, int mount_fd, const char *err) {
        struct disk_start *ds = ud;
        struct sandbox *sb = ds->sb;
        int ok = 0;

        sb->disk_busy = 0;
        sb->disk_fd = mount_fd;
        log_debug("sbx=%s: disk image made in %llu ms", sb->id,
                  (unsigned long long)(uv_now(sb->d->loop) - ds->started));
        if (sb->ending) {
                /* Ending meanwhile: once answered, its end left the workspace to us. */
                trash_left_dir(sb);
        } else if (r < 0) {
                fail_sandbox(sb, "cannot make its disk (disk_bytes %llu): %s",
                             (unsigned long long)sb->spec->policy->limits->disk_bytes, err);
        } else if (sb->image && (r = sbimage_disk_dirs(sb->image, mount_fd, sb->run_uid,
                                                       sb->run_gid)) < 0) {
                fail_sandbox(sb, "cannot make its image's directories on its disk: %s",
                             strerror(-r));
        } else {
                ok = start_setup(sb, &ds->objs, &ds->m) == 0;
        }
        start_done(sb, &ds->objs, &ds->m, ok);
        free(ds);
        release(sb);
}

/* Starts its init and makes the workspace's image meanwhile, off the loop; its Setup
 * goes when the image is mounted (on_disk_made): init opens the workspace only then.
 * objs is taken over. */
static void start_with_image(struct sandbox *sb, struct policy_objects *objs) {
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        int own = sb->d->features.rootless || sb->warm;
        struct disk_image_spec spec = {
                .workspace = sb->workspace,
                .bytes = l->disk_bytes,
                .inodes = l->has_disk_inodes ? l->disk_inodes : 0,
                .uid = own ? sb->d->euid : sb->run_uid,
                .gid = own ? sb->d->egid : sb->run_gid,
        };
        struct disk_start *ds = calloc(1, sizeof(*ds));
        char templates[SBX_PATH_MAX_BYTES + 32];
        int r;

        snprintf(templates, sizeof(templates), "%s/%s", sb->d->cfg->state_dir, DISK_TEMPLATES_DIR);
        spec.templates = templates;
        if (!ds) {
                note_failure(sb, -ENOMEM);
                fail_sandbox(sb, "daemon out of memory");
                policy_objects_clear(objs);
                return;
        }
        ds->sb = sb;
        ds->objs = *objs;
        memset(objs, 0, sizeof(*objs));
        ds->m.setup = (Sbx__Init__V1__Setup)SBX__INIT__V1__SETUP__INIT;
        ds->started = uv_now(sb->d->loop);
        if (start_spawn(sb, &ds->m) < 0) {
                start_done(sb, &ds->objs, &ds->m, 0);
                free(ds);
                return;
        }
        r = disk_image_start(sb->d->loop, &spec, on_disk_made, ds);
        if (r < 0) {
                start_done(sb, &ds->objs, &ds->m, 0);
                free(ds);
                fail_sandbox(sb, "cannot start making its disk: %s", strerror(-r));
                return;
        }
        hold(sb);
        sb->disk_busy = 1;
        /* Setup is timed from here: a sweep meanwhile must see a fresh start, and an
         * image that never comes fails the sandbox in time. */
        sandbox_touch(sb);
}

void sandbox_start(struct sandbox *sb, struct policy_objects *objs) {
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        struct setup_msg m = {.setup = SBX__INIT__V1__SETUP__INIT};
        int ok;

        if (!sb->warm)
                sandbox_reserve_ptys(sb);
        if (l && l->has_disk_bytes && sb->d->features.disk_mech == DISK_MECH_IMAGE) {
                start_with_image(sb, objs);
                return;
        }
        /* Every failure goes through fail_sandbox, which records it and answers. */
        ok = start_spawn(sb, &m) == 0 && start_setup(sb, objs, &m) == 0;
        start_done(sb, objs, &m, ok);
}

int sandbox_open_image(struct sandbox *sb, uid_t uid, char *err, size_t errlen) {
        return sandbox_open_image_named(sb, sb->spec->image, uid, err, errlen);
}

int sandbox_open_image_named(struct sandbox *sb, const char *name, uid_t uid, char *err,
                             size_t errlen) {
        int r = sbimage_open(sb->d, name, uid, &sb->image, err, errlen);

        if (r == 0 && !(sb->spec->image_digest = strdup(sb->image->digest))) {
                snprintf(err, errlen, "daemon out of memory");
                r = -ENOMEM;
        }
        if (r < 0)
                return r;
        sandbox_set_run_ids(sb, sbimage_host_id(sb->image, sb->image->uid),
                            sbimage_host_id(sb->image, sb->image->gid));
        if (sb->image->user_dropped)
                sandbox_warn(sb, "the image's user '%s' cannot exist here: this rootless "
                                 "sbxd's image sandboxes have one user, root (0), its own, as "
                                 "whom commands run; others need ranges of its user's in "
                                 "/etc/subuid and /etc/subgid, and uidmap",
                             sb->image->config.user);
        return 0;
}

int sandbox_setup_key(const Sbx__Init__V1__Setup *setup, uint8_t **ret, size_t *ret_len) {
        Sbx__Init__V1__Setup k = *setup;
        size_t n;

        k.sandbox_id = NULL;
        k.hostname = NULL;
        k.workspace_dir = NULL;
        k.has_run_uid = k.has_run_gid = 0;
        k.has_adoptable = k.has_adopt_grace_ms = 0;
        k.has_n_cgroup_fds = k.has_cgroup_v2 = 0;
        k.n_cgroup_v1_controllers = 0;
        k.has_owner_uid = k.has_owner_gid = 0;
        k.has_ptys = k.has_warm = 0; /* the owner's ptys come with Claim */
        /* An image's: its layers and user come with its digest (compared apart), its
         * writable root and block of ids are its own. */
        k.n_image_layers = 0;
        k.image_layers = NULL;
        k.image_upper = NULL;
        k.has_image_uid_base = k.has_image_subids = 0;
        k.has_outer_subuid = k.has_outer_subgid = 0;
        k.has_seed_workspace = 0;
        n = sbx__init__v1__setup__get_packed_size(&k);
        *ret = malloc(n ? n : 1);
        if (!*ret)
                return -ENOMEM;
        *ret_len = sbx__init__v1__setup__pack(&k, *ret);
        return 0;
}

int sandbox_request_key(struct sbxd *d, Sbx__V1__CreateSandbox *spec, uint8_t **ret,
                        size_t *ret_len) {
        /* As for a warm sandbox: no owner, no identity (the key leaves it out). */
        const struct policy_sandbox ps = {.id = "", .spec = spec, .owner_uid = (uid_t)-1};
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_view view;
        void *mem = NULL;
        int r;

        r = policy_view_build(d, spec, &view);
        if (r < 0)
                return r;
        r = policy_setup(d, &ps, &view, NULL, &setup, &mem);
        if (r == 0 && spec->image && spec->image[0] && image_setid_modes(spec))
                setup.has_setid_modes = setup.setid_modes = 1; /* as sbimage_fill_setup */
        if (r == 0)
                r = sandbox_setup_key(&setup, ret, ret_len);
        policy_free_setup(&setup, mem);
        policy_view_clear(&view);
        return r;
}

/* ---- adoption ----------------------------------------------------------------------- */

/* The ptys of a sandbox a previous daemon left, counted in its owner's budget whatever
 * it holds (they were reserved when it was made): its devpts's max= as the kernel shows
 * it to PID 1 (pid), the one source the sandbox cannot have changed. */
static void adopt_ptys(struct sandbox *sb, pid_t pid) {
        int n = devpts_max_of(pid);

        if (n < 0) {
                log_warning("sbx=%s: cannot read its devpts's max= (%s); counted as %u ptys",
                            sb->id, strerror(-n), SBX_SANDBOX_PTYS);
                n = (int)SBX_SANDBOX_PTYS;
        }
        sb->ptys = (unsigned)n;
        sb->ptys_held = sb->d->ptys.q && quota_add(sb->d->ptys.q, QUOTA_PTYS, sb->owner_uid,
                                                   sb->ptys, UINT64_MAX, UINT64_MAX) == 0;
}

void sandbox_adopted(struct sandbox *sb, int chan_fd, pid_t pid, int pidfd, int proxy_fd,
                     int init_sockets) {
        struct sbxd *d = sb->d;
        struct policy_view view;

        fcntl(pidfd, F_SETFD, FD_CLOEXEC);
        initchan_open(&sb->chan, chan_fd);
        sb->adopted = 1;
        sb->view.state = SBX__V1__SANDBOX_STATE__READY;
        sb->view.init_pid = pid;
        sb->view.init_pidfd = pidfd;
        sb->init_sockets = init_sockets;
        if (d->cgroups->version != CGROUP_NONE &&
            cgroup_attach(d->cgroups, sb->cg_name, &sb->cg) == 0)
                delegate_cgroup(sb);
        if (d->cgroups->version != CGROUP_NONE && !sb->cg)
                sandbox_warn(sb, "its cgroup was not found after the daemon restarted");
        sandbox_apply_limits(sb);
        adopt_ptys(sb, pid);
        if (policy_view_build(d, sb->spec, &view) == 0) {
                if (sandbox_keep_view(sb, &view) < 0)
                        sandbox_warn(sb, "the daemon's user's inotify watches or instances "
                                         "(fs.inotify.max_user_watches, max_user_instances) "
                                         "are all in use: a path this sandbox hides that the "
                                         "host makes or replaces from now on is not covered");
                policy_view_clear(&view);
        }
        /* What the host changed while no daemon watched. */
        guard_ready(d, &sb->view, 1);
        (void)open_root(sb, pid);
        (void)watch_chan(sb);
        sandbox_start_egress(sb, proxy_fd);
        if (uv_poll_init(d->loop, &sb->pidfd_poll, pidfd) == 0) {
                sb->pidfd_poll.data = sb;
                hold(sb);
                sb->pidfd_poll_inited = 1;
                uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
        }
        sandbox_touch(sb);
        sandbox_arm_timer(sb);
}
