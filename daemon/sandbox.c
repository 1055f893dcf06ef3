/* sandbox.c: the sandbox table and each sandbox's life; see sandbox.h.
 *
 * Creation: validate the request into an effective policy (policy.c); claim a warm
 * sandbox of the same setup when there is one (the warm pool, below); else record it,
 * make the workspace and the cgroup, spawn the init helper (a plain fork+exec through
 * uv_spawn: the child execs at once), send Setup with the cgroup's descriptors (stage 0
 * joins the cgroup before anything else), and wait for Ready on the channel. Stage 0 of
 * the helper stays our child and exits only after PID 1 of the sandbox is gone, and PID
 * 1's exit completes only after every other process of its PID namespace has died, so
 * stage 0's exit is our proof that nothing of the sandbox runs any more.
 *
 * The end: SIGKILL to PID 1 (through a pidfd, so a recycled pid can never be hit),
 * wait for stage 0, end the commands still running, move the workspace to the trash,
 * record the end and answer everyone waiting; one loop turn later remove the cgroup,
 * start the workspace's deletion and free the sandbox once its libuv handles are
 * closed.
 *
 * Everything init sends is untrusted: messages are size-checked by the channel,
 * decoded, and must name commands we started; anything else fails the sandbox. */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <poll.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "initmsg.h"
#include "guard.h"
#include "files.h"
#include "log.h"
#include "policy.h"
#include "sandbox_int.h"
#include "sbxd.h"
#include "store.h"
#include "trash.h"

#define SBXTAB_BUCKETS 4096u
/* How long a sandbox's init may take to set up before the sandbox fails. */
#define SANDBOX_SETUP_TIMEOUT_MS 30000u
/* How long PID 1 may take to die after SIGKILL before we complain loudly. */
#define SANDBOX_KILL_GRACE_MS 10000u

char *const limit_names[LIM_N] = {"memory",     "cpu_seconds", "cpu_percent",
                                        "processes",  "file_size",   "open_files",
                                        "core_dumps", "tmp"};

struct sbxtab {
        struct sbxd *d;
        struct sandbox *buckets[SBXTAB_BUCKETS]; /* by id; warm sandboxes are not there */
        struct sandbox *all;
        unsigned count;                          /* all, warm ones included */
        unsigned n_warm;                         /* warm: setting up or ready, unclaimed */
        uv_timer_t refill;                       /* tops the warm pool up (--warm) */
        int refill_inited;
        uint64_t warm_retry_at;                  /* uv_now() before which no new warm one */
        uint8_t *uid_slots; /* SBX_UID_COUNT bits: in use by a live sandbox */
        /* Per slot, whose its uid is for good (root mode, see alloc_uid_slot): 0 never
         * given, owner uid + 1, or SLOT_RETIRED. */
        uint32_t *slot_owner;
        unsigned slots_seen; /* every slot at or above is unused and never given */
        void (*shutdown_done)(void *ud);
        void *shutdown_ud;
        int64_t last_prune_ms;
};

static void end_sandbox(struct sandbox *sb, Sbx__V1__SandboxState final_state, const char *reason);
static void warm_schedule(struct sbxtab *t, uint64_t delay_ms);
static void warm_stop(struct sbxtab *t);
static void warm_give_up_one(struct sbxtab *t);
static int setup_key(const Sbx__Init__V1__Setup *setup, uint8_t **ret, size_t *ret_len);
static void outq_free(struct sandbox *sb);
static void drain_init_channel(struct sandbox *sb);

int64_t sbxd_now_unix_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- table -------------------------------------------------------------------------- */

static unsigned hash_id(const char *s) {
        unsigned h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h % SBXTAB_BUCKETS;
}

int sbxtab_new(struct sbxd *d, struct sbxtab **ret) {
        struct sbxtab *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->uid_slots = calloc(SBX_UID_COUNT / 8, 1);
        t->slot_owner = calloc(SBX_UID_COUNT, sizeof(*t->slot_owner));
        if (!t->uid_slots || !t->slot_owner) {
                free(t->slot_owner);
                free(t);
                return -ENOMEM;
        }
        t->d = d;
        *ret = t;
        return 0;
}

void sbxtab_free(struct sbxtab *t) {
        if (!t)
                return;
        free(t->uid_slots);
        free(t->slot_owner);
        free(t);
}

struct sandbox *sbxtab_find(struct sbxtab *t, const char *id) {
        struct sandbox *sb;
        for (sb = t->buckets[hash_id(id)]; sb; sb = sb->hnext)
                if (strcmp(sb->id, id) == 0)
                        return sb;
        return NULL;
}

unsigned sbxtab_count(const struct sbxtab *t) {
        return t->count - t->n_warm;
}

int sbxtab_is_sandbox_pidns(const struct sbxtab *t, dev_t dev, ino_t ino) {
        const struct sandbox *sb;
        for (sb = t->all; sb; sb = sb->next)
                if (sb->pidns_ino != 0 && sb->pidns_ino == ino && sb->pidns_dev == dev)
                        return 1;
        return 0;
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

/* Every sandbox, warm ones included when warm_too. */
static int foreach_sandbox(struct sbxtab *t, int warm_too, int (*cb)(struct sandbox *sb, void *ud),
                           void *ud) {
        struct sandbox *sb, *next;
        for (sb = t->all; sb; sb = next) {
                int r;
                next = sb->next;
                if (sb->warm && !warm_too)
                        continue;
                r = cb(sb, ud);
                if (r)
                        return r;
        }
        return 0;
}

int sbxtab_foreach(struct sbxtab *t, int (*cb)(struct sandbox *sb, void *ud), void *ud) {
        return foreach_sandbox(t, 0, cb, ud);
}

/* Into the list of all sandboxes (and the count). */
static void table_link(struct sbxtab *t, struct sandbox *sb) {
        sb->next = t->all;
        if (t->all)
                t->all->prev = sb;
        t->all = sb;
        t->count++;
}

/* Findable by id. */
static void table_hash(struct sbxtab *t, struct sandbox *sb) {
        unsigned h = hash_id(sb->id);
        sb->hnext = t->buckets[h];
        t->buckets[h] = sb;
}

/* Gives sb's uid slot back (it stays its owner's), and a warm sandbox its placeholder. */
static void release_slot(struct sbxtab *t, struct sandbox *sb) {
        if (sb->uid_slot < 0)
                return;
        t->uid_slots[sb->uid_slot / 8] &= (uint8_t) ~(1u << (sb->uid_slot % 8));
        sb->uid_slot = -1;
        if (sb->warm) {
                sb->run_uid = sb->run_gid = SBX_WARM_RUN_ID;
                if (chown(sb->workspace, t->d->euid, t->d->egid) < 0)
                        log_warning("sbx=%s: chown %s: %s", sb->id, sb->workspace, strerror(errno));
        }
}

static void table_remove(struct sbxtab *t, struct sandbox *sb) {
        struct sandbox **pp;
        for (pp = &t->buckets[hash_id(sb->id)]; *pp; pp = &(*pp)->hnext)
                if (*pp == sb) {
                        *pp = sb->hnext;
                        break;
                }
        if (sb->prev)
                sb->prev->next = sb->next;
        else
                t->all = sb->next;
        if (sb->next)
                sb->next->prev = sb->prev;
        t->count--;
        release_slot(t, sb);
        if (t->count == 0 && t->shutdown_done) {
                void (*done)(void *) = t->shutdown_done;
                t->shutdown_done = NULL;
                done(t->shutdown_ud);
        }
}

#define SLOT_RETIRED UINT32_MAX

static int slot_live(const struct sbxtab *t, unsigned i) {
        return t->uid_slots[i / 8] & (1u << (i % 8));
}

static void slot_take(struct sbxtab *t, unsigned i) {
        t->uid_slots[i / 8] |= (uint8_t)(1u << (i % 8));
        if (i >= t->slots_seen)
                t->slots_seen = i + 1;
}

/* A host uid for a sandbox of owner (root mode). A uid belongs for good to the first
 * owner it was given to (recorded in the store): what a sandbox leaves on the host
 * owned by it (a kept workspace, files in a writable path whose filesystem cannot
 * idmap) stays out of every other owner's sandboxes. So a free slot of owner's own is
 * taken first, then a slot never given; -EAGAIN when none is left, -EIO (err filled)
 * when the record cannot be written. */
static int alloc_uid_slot(struct sbxtab *t, uid_t owner, char *err, size_t errlen) {
        unsigned i, fresh = SBX_UID_COUNT;
        int r;

        for (i = 0; i < t->slots_seen; i++)
                if (!slot_live(t, i)) {
                        if (t->slot_owner[i] == (uint32_t)owner + 1) {
                                slot_take(t, i);
                                return (int)i;
                        }
                        if (t->slot_owner[i] == 0 && fresh == SBX_UID_COUNT)
                                fresh = i;
                }
        if (fresh == SBX_UID_COUNT && t->slots_seen < SBX_UID_COUNT)
                fresh = t->slots_seen;
        if (fresh == SBX_UID_COUNT) {
                snprintf(err, errlen, "no sandbox uid is left for uid %u (each of the %u uids "
                                      "belongs to one owner for good); end some sandboxes",
                         (unsigned)owner, SBX_UID_COUNT);
                return -EAGAIN;
        }
        r = store_uid_bind(t->d->store, SBX_UID_BASE + fresh, (uint32_t)owner);
        if (r < 0) {
                snprintf(err, errlen, "cannot record the owner of sandbox uid %u: %s",
                         SBX_UID_BASE + fresh, store_last_error(t->d->store));
                return -EIO;
        }
        t->slot_owner[fresh] = (uint32_t)owner + 1;
        slot_take(t, fresh);
        return (int)fresh;
}

static int load_uid_owner(uint32_t run_uid, int64_t owner, void *ud) {
        struct sbxtab *t = ud;
        unsigned i;

        if (run_uid < SBX_UID_BASE || run_uid - SBX_UID_BASE >= SBX_UID_COUNT)
                return 0;
        i = run_uid - SBX_UID_BASE;
        t->slot_owner[i] = owner < 0 || owner >= UINT32_MAX ? SLOT_RETIRED : (uint32_t)owner + 1;
        if (i >= t->slots_seen)
                t->slots_seen = i + 1;
        return 0;
}

static void on_timer(uv_timer_t *t);
static void fail_sandbox(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int sweep_one(struct sandbox *sb, void *ud) {
        if (sb->state == SBX__V1__SANDBOX_STATE__READY || sb->state == SBX__V1__SANDBOX_STATE__CREATING)
                on_timer(&sb->timer); /* the same checks as the precise timer */
        return 0;
}

void sbxtab_sweep(struct sbxtab *t) {
        int64_t now = sbxd_now_unix_ms();
        sbxtab_foreach(t, sweep_one, NULL);
        if (t->d->cfg->retention_days > 0 && now - t->last_prune_ms >= 3600 * 1000) {
                int n = store_prune(t->d->store,
                                    now - (int64_t)t->d->cfg->retention_days * 24 * 3600 * 1000);
                t->last_prune_ms = now;
                if (n > 0)
                        log_info("pruned the records of %d sandboxes ended more than %u days ago", n,
                                 t->d->cfg->retention_days);
                else if (n < 0)
                        log_warning("cannot prune old records: %s", store_last_error(t->d->store));
        }
}

static int shutdown_one(struct sandbox *sb, void *ud) {
        sandbox_terminate(sb, "shutdown", NULL, NULL);
        return 0;
}

void sbxtab_shutdown(struct sbxtab *t, void (*done)(void *ud), void *ud) {
        warm_stop(t);
        if (t->count == 0) {
                done(ud);
                return;
        }
        t->shutdown_done = done;
        t->shutdown_ud = ud;
        foreach_sandbox(t, 1, shutdown_one, NULL);
}

/* ---- small helpers ------------------------------------------------------------------ */

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
        return sb->state;
}

static const char *state_name(Sbx__V1__SandboxState s) {
        switch (s) {
        case SBX__V1__SANDBOX_STATE__CREATING:
                return "creating";
        case SBX__V1__SANDBOX_STATE__READY:
                return "ready";
        case SBX__V1__SANDBOX_STATE__TERMINATING:
                return "terminating";
        case SBX__V1__SANDBOX_STATE__TERMINATED:
                return "terminated";
        case SBX__V1__SANDBOX_STATE__EXPIRED:
                return "expired";
        case SBX__V1__SANDBOX_STATE__FAILED:
                return "failed";
        case SBX__V1__SANDBOX_STATE__LOST:
                return "lost";
        case SBX__V1__SANDBOX_STATE__SANDBOX_STATE_UNSPECIFIED:
        case _SBX__V1__SANDBOX_STATE_IS_INT_SIZE:
                break;
        }
        return "unknown";
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
        size_t i;

        sbx__v1__sandbox_info__init(info);
        info->id = sb->id;
        info->has_state = 1;
        info->state = sb->state;
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
        info->running_commands = sb->n_running;
        info->has_commands_run = 1;
        info->commands_run = sb->commands_run;
        info->n_share_uids = sb->spec->n_share_uids;
        info->share_uids = sb->spec->share_uids;
        info->n_share_gids = sb->spec->n_share_gids;
        info->share_gids = sb->spec->share_gids;
        info->end_reason = sb->end_reason;
        for (i = 0; i < LIM_N; i++) {
                sbx__v1__limit_enforcement__init(&st->enf[i]);
                st->enf[i].limit = limit_names[i];
                st->enf[i].has_enforcement = 1;
                st->enf[i].enforcement = sb->enforcement[i];
                st->enf_ptrs[i] = &st->enf[i];
        }
        info->n_enforcement = LIM_N;
        info->enforcement = st->enf_ptrs;
}

/* ---- freeing ------------------------------------------------------------------------ */

static void sandbox_free(struct sandbox *sb) {
        size_t i;
        free(sb->trash);
        free(sb->setup_key);
        if (sb->spec)
                sbx__v1__create_sandbox__free_unpacked(sb->spec, NULL);
        for (i = 0; i < sb->n_warnings; i++)
                free(sb->warnings[i]);
        free(sb->warnings);
        free(sb->waiters);
        free(sb->workspace);
        pathset_unref(sb->hidden);
        pathset_unref(sb->hidden_shared);
        /* Placeholders stay for a sandbox left to the next daemon: its view keeps them. */
        if (!sb->left_running) {
                policy_release_made(sb->made_dirs);
                policy_release_made(sb->made_files);
        }
        pathset_unref(sb->made_dirs);
        pathset_unref(sb->made_files);
        files_forget(sb);
        guard_forget(sb->d, sb);
        free(sb->end_reason);
        free(sb);
}

void sandbox_handle_closed(struct sandbox *sb) {
        if (--sb->handles_open == 0 && sb->freed_from_table)
                sandbox_free(sb);
}

static void on_handle_closed(uv_handle_t *h) {
        sandbox_handle_closed(h->data);
}

/* ---- timers ------------------------------------------------------------------------- */

static void arm_timer(struct sandbox *sb);

static void on_timer(uv_timer_t *t) {
        struct sandbox *sb = t->data;
        int64_t now = sbxd_now_unix_ms();

        if (sb->state == SBX__V1__SANDBOX_STATE__CREATING) {
                /* Setup is bounded too: an init that hangs before Ready must not hold
                 * the creator, its quota and its uid forever. */
                if (now >= sb->deadline_ms || uv_now(sb->d->loop) - sb->last_activity >= SANDBOX_SETUP_TIMEOUT_MS)
                        fail_sandbox(sb, "its init did not finish setting up within %u ms",
                                     SANDBOX_SETUP_TIMEOUT_MS);
                else
                        uv_timer_start(&sb->timer, on_timer, 1000, 0);
                return;
        }
        if (sb->state != SBX__V1__SANDBOX_STATE__READY)
                return;
        if (now >= sb->deadline_ms) {
                log_info("sbx=%s: deadline reached; ending it", sb->id);
                end_sandbox(sb, SBX__V1__SANDBOX_STATE__EXPIRED, "expired");
                return;
        }
        if (sb->idle_timeout_ms && sb->n_running == 0 &&
            uv_now(sb->d->loop) - sb->last_activity >= sb->idle_timeout_ms) {
                log_info("sbx=%s: idle for %llu ms; ending it", sb->id,
                         (unsigned long long)sb->idle_timeout_ms);
                end_sandbox(sb, SBX__V1__SANDBOX_STATE__EXPIRED, "idle");
                return;
        }
        arm_timer(sb);
}

/* Arms the one timer to the nearest of the deadline and the idle limit. */
static void arm_timer(struct sandbox *sb) {
        int64_t now = sbxd_now_unix_ms();
        uint64_t due = sb->deadline_ms > now ? (uint64_t)(sb->deadline_ms - now) : 0;

        if (sb->idle_timeout_ms) {
                uint64_t idle_for = uv_now(sb->d->loop) - sb->last_activity;
                uint64_t idle_due = idle_for >= sb->idle_timeout_ms ? 0 : sb->idle_timeout_ms - idle_for;
                /* While a command runs the sandbox is not idle: look again later. */
                if (sb->n_running > 0)
                        idle_due = sb->idle_timeout_ms;
                if (idle_due < due)
                        due = idle_due;
        }
        uv_timer_start(&sb->timer, on_timer, due, 0);
}

int sandbox_set_deadline(struct sandbox *sb, int64_t deadline_ms) {
        /* From now, not from creation: a session may go on as long as it asks, a week at
         * a time by default (config.h). */
        if (deadline_ms > sbxd_now_unix_ms() + (int64_t)sb->d->cfg->max_sandbox_lifetime_ms)
                return -EINVAL;
        sb->deadline_ms = deadline_ms;
        (void)store_sandbox_set_deadline(sb->d->store, sb->id, deadline_ms);
        if (sb->state == SBX__V1__SANDBOX_STATE__READY)
                arm_timer(sb);
        return 0;
}

/* ---- the end ------------------------------------------------------------------------ */

/* Lets go of init: its watchers and descriptors (what a sandbox's end and a detach for
 * the next daemon share). */
static void release_init(struct sandbox *sb) {
        outq_free(sb);
        if (sb->pidfd_poll_inited) {
                sb->pidfd_poll_inited = 0;
                uv_poll_stop(&sb->pidfd_poll);
                uv_close((uv_handle_t *)&sb->pidfd_poll, on_handle_closed);
        }
        if (sb->chan_poll_inited) {
                uv_poll_stop(&sb->chan_poll);
                sb->chan_poll_active = 0;
                sb->chan_poll_inited = 0;
                uv_close((uv_handle_t *)&sb->chan_poll, on_handle_closed);
        }
        if (sb->chan_fd >= 0)
                close(sb->chan_fd);
        if (sb->init_pidfd >= 0)
                close(sb->init_pidfd);
        if (sb->root_fd >= 0)
                close(sb->root_fd);
        sb->chan_fd = sb->init_pidfd = sb->root_fd = -1;
}

/* Closes the remaining handles, takes sb out of the table and frees it once every
 * handle is closed. sb must not be used after this. */
static void retire(struct sandbox *sb) {
        struct sbxtab *t = sb->tab;

        if (sb->warm) {
                t->n_warm--;
                /* A warm sandbox ends when it failed (the pool then waits before it
                 * tries again), was given up for room, or at shutdown. */
                if (!sb->warm_given_up)
                        t->warm_retry_at = uv_now(t->d->loop) + SBX_WARM_RETRY_MS;
        }
        /* Room for the pool again (it stops at --max-sandboxes). */
        warm_schedule(t, SBX_WARM_REFILL_DELAY_MS);
        uv_timer_stop(&sb->timer);
        uv_timer_stop(&sb->kill_timer);
        uv_close((uv_handle_t *)&sb->timer, on_handle_closed);
        uv_close((uv_handle_t *)&sb->kill_timer, on_handle_closed);
        if (sb->proc_spawned)
                uv_close((uv_handle_t *)&sb->proc, on_handle_closed);
        sb->freed_from_table = 1;
        table_remove(t, sb);
        if (sb->handles_open == 0)
                sandbox_free(sb);
}

/* The second half of the end, one loop turn after the first, so that the replies the
 * first half queued go out before it: the cgroup (kill anything that escaped into it
 * from outside the namespace, then remove it, commands' groups first; about 0.8 ms on
 * cgroup v1) and the start of the workspace's deletion. */
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

/* Stage 0 has exited: nothing of the sandbox runs any more. Moves its workspace away,
 * records the end and answers everyone waiting, then leaves the cgroup to on_cleanup. */
static void finish_end(struct sandbox *sb) {
        size_t i;
        int r;

        drain_init_channel(sb);
        command_end_all(sb, 0);
        release_init(sb);
        if (sb->workspace)
                sb->trash = trash_sandbox_dir(sb->d, sb->id, sb->workspace,
                                               sb->spec->has_keep_workspace &&
                                                       sb->spec->keep_workspace);
        sb->state = sb->end_state;
        r = sb->warm ? 0
                     : store_sandbox_set_state(sb->d->store, sb->id, state_name(sb->state),
                                               sbxd_now_unix_ms(), sb->end_reason);
        if (r < 0)
                log_err("sbx=%s: cannot record its end: %s", sb->id, store_last_error(sb->d->store));
        if (sb->warm)
                log_debug("sbx=%s: ended (%s)", sb->id, sb->end_reason);
        else
                log_info("sbx=%s: ended (%s)", sb->id, sb->end_reason);

        if (sb->create_cb) {
                sandbox_ready_cb cb = sb->create_cb;
                char msg[512];
                sb->create_cb = NULL;
                snprintf(msg, sizeof(msg), "sandbox '%s' could not be created: %s", sb->id,
                         sb->end_reason);
                cb(sb->create_ud, sb, -EIO, msg);
        }
        for (i = 0; i < sb->n_waiters; i++)
                if (sb->waiters[i].cb)
                        sb->waiters[i].cb(sb->waiters[i].ud, sb);
        sb->n_waiters = 0;
        sb->ended = 1;
        uv_timer_stop(&sb->kill_timer);
        uv_timer_start(&sb->timer, on_cleanup, 0, 0);
}

static void kill_init(struct sandbox *sb) {
        if ((!sb->proc_spawned && !sb->adopted) || sb->proc_exited)
                return;
        if (sb->init_pidfd >= 0) {
                if (syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0) < 0 &&
                    errno != ESRCH)
                        log_warning("sbx=%s: pidfd_send_signal: %s", sb->id, strerror(errno));
        } else if (sb->init_pid > 0 && sb->proc_spawned) {
                /* No pidfds (an old kernel, or valgrind): the pid is still safe to use,
                 * as stage 0, our child that has not exited, has not reaped it. */
                kill(sb->init_pid, SIGKILL);
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
        log_err("sbx=%s: init did not exit %u ms after SIGKILL; still waiting", sb->id,
                SANDBOX_KILL_GRACE_MS);
        kill_init(sb);
}

/* Starts ending sb; finish_end runs once stage 0 has exited. */
static void end_sandbox(struct sandbox *sb, Sbx__V1__SandboxState final_state, const char *reason) {
        if (sb->ending)
                return;
        sb->ending = 1;
        sb->end_state = final_state;
        free(sb->end_reason);
        sb->end_reason = strdup(reason);
        sb->state = SBX__V1__SANDBOX_STATE__TERMINATING;
        if (!sb->warm)
                (void)store_sandbox_set_state(sb->d->store, sb->id, "terminating", 0, NULL);
        uv_timer_stop(&sb->timer);
        if (sb->chan_poll_active) {
                uv_poll_stop(&sb->chan_poll);
                sb->chan_poll_active = 0;
        }
        if ((!sb->proc_spawned && !sb->adopted) || sb->proc_exited) {
                finish_end(sb);
                return;
        }
        kill_init(sb);
        uv_timer_start(&sb->kill_timer, on_kill_timer, SANDBOX_KILL_GRACE_MS, SANDBOX_KILL_GRACE_MS);
}

int sandbox_terminate(struct sandbox *sb, const char *reason, sandbox_ended_cb cb, void *ud) {
        if (sb->ended) {
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
        end_sandbox(sb,
                    strcmp(reason, "expired") == 0            ? SBX__V1__SANDBOX_STATE__EXPIRED
                    : strncmp(reason, "failed", 6) == 0 ? SBX__V1__SANDBOX_STATE__FAILED
                                                        : SBX__V1__SANDBOX_STATE__TERMINATED,
                    reason);
        return 0;
}

static void fail_sandbox(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_sandbox(struct sandbox *sb, const char *fmt, ...) {
        char msg[512];
        char reason[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_err("sbx=%s: failed: %s", sb->id, msg);
        snprintf(reason, sizeof(reason), "failed: %s", msg);
        end_sandbox(sb, SBX__V1__SANDBOX_STATE__FAILED, reason);
}

static void on_init_exit(uv_process_t *p, int64_t status, int term_signal) {
        struct sandbox *sb = p->data;
        sb->proc_exited = 1;
        sb->proc_exit_status = status;
        sb->proc_term_signal = term_signal;
        if (!sb->ending) {
                /* Its last words first: a failed setup says why in Ready. */
                drain_init_channel(sb);
        }
        if (!sb->ending)
                /* end_sandbox sees the exit and finishes at once. */
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

/* ---- the init channel --------------------------------------------------------------- */

static void on_chan(uv_poll_t *h, int status, int events);

/* A message waiting for room on init's channel, with duplicates of its descriptors. */
struct init_out {
        struct init_out *next;
        uint8_t *buf;
        size_t len;
        int fds[SBX_INIT_MAX_FDS];
        size_t nfds;
};

/* Most messages queued for init before the sandbox is declared failed: an init that
 * does not read its channel at all is not doing its job. */
#define SANDBOX_MAX_QUEUED_TO_INIT 1024u

static void outq_free(struct sandbox *sb) {
        while (sb->outq) {
                struct init_out *o = sb->outq;
                size_t i;
                sb->outq = o->next;
                for (i = 0; i < o->nfds; i++)
                        close(o->fds[i]);
                free(o->buf);
                free(o);
        }
        sb->outq_tail = NULL;
        sb->outq_n = 0;
}

static void watch_chan(struct sandbox *sb) {
        if (sb->chan_poll_active)
                uv_poll_start(&sb->chan_poll,
                              UV_READABLE | UV_DISCONNECT | (sb->outq ? UV_WRITABLE : 0), on_chan);
}

/* Sends what the channel takes now, in order. 0, or -errno on a hard failure. */
static int outq_flush(struct sandbox *sb) {
        while (sb->outq) {
                struct init_out *o = sb->outq;
                size_t i;
                int r = initmsg_send_packed(sb->chan_fd, o->buf, o->len, o->fds, o->nfds);
                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        return r;
                sb->outq = o->next;
                if (!sb->outq)
                        sb->outq_tail = NULL;
                sb->outq_n--;
                for (i = 0; i < o->nfds; i++)
                        close(o->fds[i]);
                free(o->buf);
                free(o);
        }
        watch_chan(sb);
        return 0;
}

int sandbox_send_init(struct sandbox *sb, const Sbx__Init__V1__ToInit *msg, const int *fds,
                      size_t nfds) {
        struct init_out *o;
        size_t i;
        int r;

        if (sb->chan_fd < 0)
                return -EPIPE;
        if (!sb->outq) {
                r = initmsg_send(sb->chan_fd, &msg->base, fds, nfds);
                if (r != -EAGAIN) {
                        if (r < 0 && !sb->ending)
                                fail_sandbox(sb, "cannot write to its init: %s", strerror(-r));
                        return r;
                }
        }
        /* The channel is full (init is busy, or throttled by cpu_percent): queue it. */
        r = -ENOMEM;
        if (sb->outq_n >= SANDBOX_MAX_QUEUED_TO_INIT || !sb->chan_poll_inited)
                r = -ENOBUFS;
        else if ((o = calloc(1, sizeof(*o)))) {
                o->len = sbx__init__v1__to_init__get_packed_size(msg);
                o->buf = o->len <= SBX_INIT_MAX_MSG_BYTES ? malloc(o->len) : NULL;
                for (i = 0; o->buf && i < nfds; i++) {
                        o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                        if (o->fds[i] < 0)
                                break;
                        o->nfds++;
                }
                if (o->buf && o->nfds == nfds) {
                        sbx__init__v1__to_init__pack(msg, o->buf);
                        if (sb->outq_tail)
                                sb->outq_tail->next = o;
                        else
                                sb->outq = o;
                        sb->outq_tail = o;
                        sb->outq_n++;
                        log_debug("sbx=%s: init's channel is full; %u messages queued", sb->id,
                                  sb->outq_n);
                        watch_chan(sb);
                        return 0;
                }
                while (o->nfds > 0)
                        close(o->fds[--o->nfds]);
                free(o->buf);
                free(o);
        }
        if (!sb->ending)
                fail_sandbox(sb, "cannot queue a message for its init: %s", strerror(-r));
        return r;
}

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

static void on_ready(struct sandbox *sb, const Sbx__Init__V1__Ready *ready) {
        size_t i;
        pid_t pid;

        if (sb->state != SBX__V1__SANDBOX_STATE__CREATING) {
                fail_sandbox(sb, "its init sent Ready twice");
                return;
        }
        if (!ready->has_ok || !ready->ok) {
                fail_sandbox(sb, "%s", ready->error ? ready->error : "init setup failed");
                return;
        }
        /* The pidfd first, then the checks: a pid verified before being pinned could be
         * reaped and reused in between. */
        pid = ready->has_init_host_pid ? ready->init_host_pid : 0;
        sb->init_pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
        if (pid > 0 && sb->init_pidfd < 0 && errno != ENOSYS) {
                fail_sandbox(sb, "pidfd_open(%d): %s", (int)pid, strerror(errno));
                return;
        }
        if (pid <= 0 || is_child_of(pid, sb->proc.pid) != 1) {
                fail_sandbox(sb, "its init reported a pid (%d) that is not its own", (int)pid);
                return;
        }
        sb->init_pid = pid;
        if (sb->init_pidfd >= 0)
                fcntl(sb->init_pidfd, F_SETFD, FD_CLOEXEC);
        {
                /* The sandbox's own root, in its mount namespace: file operations resolve
                 * paths beneath it with openat2(RESOLVE_IN_ROOT). */
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
                sb->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                note_pidns(sb, pid);
                if (sb->root_fd < 0) {
                        fail_sandbox(sb, "cannot open its root %s: %s", path, strerror(errno));
                        return;
                }
        }
        for (i = 0; i < ready->n_warnings && i < 64; i++)
                sandbox_warn(sb, "%s", ready->warnings[i]);
        sb->state = SBX__V1__SANDBOX_STATE__READY;
        if (sb->warm) {
                /* Waits in the pool, unrecorded and without a deadline, for a claim. */
                log_debug("sbx=%s: warm and ready (init pid %d)", sb->id, (int)pid);
                return;
        }
        (void)store_sandbox_set_init_pid(sb->d->store, sb->id, pid);
        (void)store_sandbox_set_state(sb->d->store, sb->id, "ready", 0, NULL);
        sandbox_touch(sb);
        arm_timer(sb);
        log_info("sbx=%s: ready (init pid %d, uid %u)", sb->id, (int)pid, (unsigned)sb->run_uid);
        if (sb->create_cb) {
                sandbox_ready_cb cb = sb->create_cb;
                sb->create_cb = NULL;
                cb(sb->create_ud, sb, 0, NULL);
        }
}

/* Reads and handles one packet from init. Returns 1 after a message, 0 at end of
 * stream, -EAGAIN when there is none now, or -errno (the sandbox is then failing). */
static int take_init_packet(struct sandbox *sb) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        int fds[SBX_INIT_MAX_FDS];
        Sbx__Init__V1__FromInit *m;
        size_t len, nfds, i;
        int r = initmsg_recv(sb->chan_fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds);

        if (r <= 0) {
                if (r != -EAGAIN && r != 0 && !sb->ending)
                        fail_sandbox(sb, "bad packet from its init: %s", strerror(-r));
                return r;
        }
        for (i = 0; i < nfds; i++)
                close(fds[i]); /* init never sends descriptors */
        m = sbx__init__v1__from_init__unpack(NULL, len, buf);
        if (!m) {
                fail_sandbox(sb, "undecodable message from its init");
                return -EBADMSG;
        }
        switch (m->body_case) {
        case SBX__INIT__V1__FROM_INIT__BODY_READY:
                if (!sb->ending)
                        on_ready(sb, m->ready);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_STARTED:
                break; /* obsolete (init.proto): an older init adopted after an upgrade */
        case SBX__INIT__V1__FROM_INIT__BODY_START_FAILED:
                command_on_start_failed(sb, m->start_failed->command_id,
                                        m->start_failed->error_errno, m->start_failed->error);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY_EXITED:
                command_on_exited(sb, m->exited);
                break;
        case SBX__INIT__V1__FROM_INIT__BODY__NOT_SET:
        case _SBX__INIT__V1__FROM_INIT__BODY__CASE_IS_INT_SIZE:
                fail_sandbox(sb, "empty message from its init");
                break;
        }
        sbx__init__v1__from_init__free_unpacked(m, NULL);
        return 1;
}

/* Takes up to budget messages init has sent, without waiting; at the end of the stream
 * it stops (on_chan, which polls the channel, handles that). */
static void take_sent(struct sandbox *sb, int budget) {
        while (sb->chan_fd >= 0 && budget-- > 0 && take_init_packet(sb) > 0)
                ;
}

void sandbox_take_init_messages(struct sandbox *sb) {
        if (!sb->ending)
                take_sent(sb, 64);
}

/* Takes every message init sent before it went away (exits of commands that ended
 * just before the sandbox, Ready with the reason of a failed setup), without waiting. */
static void drain_init_channel(struct sandbox *sb) {
        take_sent(sb, 4096);
}

static void on_chan(uv_poll_t *h, int status, int events) {
        struct sandbox *sb = h->data;
        int budget = 64;

        if ((events & UV_WRITABLE) && sb->outq && !sb->ending) {
                int r = outq_flush(sb);
                if (r < 0) {
                        fail_sandbox(sb, "cannot write to its init: %s", strerror(-r));
                        return;
                }
        }
        if (!(events & (UV_READABLE | UV_DISCONNECT)) && status == 0)
                return;

        while (budget-- > 0 && sb->chan_fd >= 0 && !sb->ending) {
                int r = take_init_packet(sb);
                if (r == 0) {
                        /* The channel closed: init is exiting; its exit callback ends the
                         * sandbox. Stop polling. */
                        uv_poll_stop(&sb->chan_poll);
                        sb->chan_poll_active = 0;
                        if (!sb->ending)
                                fail_sandbox(sb, "its init closed the channel");
                        return;
                }
                if (r < 0)
                        return;
        }
}

/* ---- creation ----------------------------------------------------------------------- */

/* A new sandbox object (not yet in the table) for id, owning a copy of the packed
 * effective spec. Its two timers are initialised. NULL when out of memory. */
static struct sandbox *sandbox_alloc(struct sbxd *d, const char *id, const uint8_t *packed,
                                     size_t len, uid_t owner, int64_t created_ms) {
        struct sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return NULL;
        sb->spec = sbx__v1__create_sandbox__unpack(NULL, len, packed);
        if (!sb->spec) {
                free(sb);
                return NULL;
        }
        sb->d = d;
        sb->tab = d->sandboxes;
        sb->chan_fd = -1;
        sb->init_pidfd = -1;
        sb->root_fd = -1;
        sb->uid_slot = -1;
        sb->isolated = 1;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", id);
        sb->owner_uid = owner;
        sb->created_ms = created_ms;
        sb->idle_timeout_ms = sb->spec->has_idle_timeout_ms ? sb->spec->idle_timeout_ms : 0;
        uv_timer_init(d->loop, &sb->timer);
        uv_timer_init(d->loop, &sb->kill_timer);
        sb->timer.data = sb->kill_timer.data = sb;
        sb->handles_open = 2;
        return sb;
}

static int valid_id(const char *id) {
        size_t n = strlen(id), i;
        if (n == 0 || n > SBX_ID_MAX_BYTES || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
                return 0;
        for (i = 0; i < n; i++) {
                char c = id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return 0;
        }
        return 1;
}

/* "sbx-" + 10 base32 characters of milliseconds + 8 random: unique and time-sortable. */
static void generate_id(char *out, size_t len) {
        static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
        uint64_t ms = (uint64_t)sbxd_now_unix_ms();
        uint8_t rnd[8];
        char t[11];
        int i;
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                memset(rnd, 0, sizeof(rnd));
        for (i = 9; i >= 0; i--) {
                t[i] = alphabet[ms & 31];
                ms >>= 5;
        }
        t[10] = '\0';
        snprintf(out, len, "sbx-%s%c%c%c%c%c%c%c%c", t, alphabet[rnd[0] & 31],
                 alphabet[rnd[1] & 31], alphabet[rnd[2] & 31], alphabet[rnd[3] & 31],
                 alphabet[rnd[4] & 31], alphabet[rnd[5] & 31], alphabet[rnd[6] & 31],
                 alphabet[rnd[7] & 31]);
}

/* Keeps the hidden paths of view for the file operations (a hidden path is "not
 * found"), and has the guard keep every hidden and read-only path covered when the
 * host changes it (guard.h). */
static void keep_view(struct sandbox *sb, const struct policy_view *view) {
        const Sbx__V1__Policy *pol = sb->spec->policy;

        sb->hidden = pathset_ref(view->hidden);
        sb->hidden_shared = pathset_ref(view->watched_shared ? view->watched_shared : view->watched);
        /* Placeholders are removed with their owner's rights; an adopted sandbox's
         * owner without a passwd entry has no known gid, and its are left in place. */
        if (sb->owner_gid != (gid_t)-1) {
                sb->made_dirs = pathset_ref(view->made_dirs);
                sb->made_files = pathset_ref(view->made_files);
                policy_hold_made(sb->made_dirs, sb->owner_uid, sb->owner_gid);
                policy_hold_made(sb->made_files, sb->owner_uid, sb->owner_gid);
        }
        guard_watch(sb->d, sb, view, pol->root_dir ? pol->root_dir : "/", pol->denied_write_paths,
                    pol->n_denied_write_paths);
}

/* Opens the sandbox's state directory (the workspace's parent) as an O_PATH fd and
 * writes "/proc/self/fd/N/init.sock" into buf: a path of bounded length whatever the
 * state directory's, for bind(2) and connect(2). Returns the fd or -errno. */
static int adopt_path(const char *workspace, char *buf, size_t len) {
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

/* The adoption socket: a listening SOCK_SEQPACKET socket in the sandbox's state
 * directory (0600, and the directory is hidden inside every sandbox) that init keeps,
 * so that a restarted daemon can reconnect to it. Returns the fd or -1. */
static int adopt_listen(struct sandbox *sb) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        mode_t old;
        int dfd, fd, r;

        dfd = adopt_path(sb->workspace, sa.sun_path, sizeof(sa.sun_path));
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

static void apply_limits(struct sandbox *sb) {
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        struct cgroup_limits cl = {0};
        Sbx__V1__Enforcement cg_kind = sb->d->cgroups->version == CGROUP_V2 ? SBX__V1__ENFORCEMENT__CGROUP_V2
                                                                             : SBX__V1__ENFORCEMENT__CGROUP_V1;
        int enforced = 0, i;

        for (i = 0; i < LIM_N; i++)
                sb->enforcement[i] = SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE;
        if (!l)
                l = &(Sbx__V1__Limits)SBX__V1__LIMITS__INIT;
        if (l->has_memory_bytes)
                cl.memory_bytes = l->memory_bytes;
        if (l->has_processes)
                cl.pids = l->processes;
        if (l->has_cpu_percent)
                cl.cpu_percent = l->cpu_percent;
        if (sb->cg)
                cgroup_set_limits(sb->cg, &cl, &enforced);
        sb->cg_enforced = enforced;
        if (l->has_memory_bytes) {
                if (enforced & (1 << CG_MEMORY))
                        sb->enforcement[LIM_MEMORY] = cg_kind;
                else
                        sandbox_warn(sb, "memory limit not enforced: no usable memory cgroup on "
                                         "this host (see `sbx doctor`)");
        }
        if (l->has_processes) {
                if (enforced & (1 << CG_PIDS))
                        sb->enforcement[LIM_PROCESSES] = cg_kind;
                else if (!sb->d->features.rootless)
                        sb->enforcement[LIM_PROCESSES] = SBX__V1__ENFORCEMENT__RLIMIT; /* RLIMIT_NPROC of the sandbox's own uid */
                else
                        sandbox_warn(sb, "process limit not enforced: no usable pids cgroup and "
                                         "no per-sandbox uid in rootless mode");
        }
        if (l->has_cpu_percent) {
                if (enforced & (1 << CG_CPU))
                        sb->enforcement[LIM_CPU_PERCENT] = cg_kind;
                else
                        sandbox_warn(sb, "cpu_percent not enforced: no usable cpu cgroup on this host");
        }
        if (l->has_cpu_seconds)
                sb->enforcement[LIM_CPU_SECONDS] = SBX__V1__ENFORCEMENT__RLIMIT;
        if (l->has_file_size_bytes)
                sb->enforcement[LIM_FILE_SIZE] = SBX__V1__ENFORCEMENT__RLIMIT;
        if (l->has_open_files)
                sb->enforcement[LIM_OPEN_FILES] = SBX__V1__ENFORCEMENT__RLIMIT;
        sb->enforcement[LIM_CORE_DUMPS] = SBX__V1__ENFORCEMENT__RLIMIT;
        sb->enforcement[LIM_TMP] = SBX__V1__ENFORCEMENT__ENFORCEMENT_NONE;
}

static int spawn_init(struct sandbox *sb, int child_fd, char *err, size_t errlen) {
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
        if (r < 0) {
                snprintf(err, errlen, "cannot start the init helper %s: %s (reinstall sbxd or pass --init)",
                         sb->d->cfg->init_path, uv_strerror(r));
                /* uv_spawn initialised the handle; it must still be closed. */
                sb->handles_open++;
                uv_close((uv_handle_t *)&sb->proc, on_handle_closed);
                return r;
        }
        sb->proc_spawned = 1;
        sb->handles_open++;
        return 0;
}

static int create_new(struct sbxd *d, const char *id, uint8_t *packed, size_t packed_len,
                      struct policy_objects *objs, const struct caller *caller, int warm,
                      sandbox_ready_cb cb, void *ud, char *err, size_t errlen);
static int claim_warm(struct sbxtab *t, const char *id, const uint8_t *packed, size_t packed_len,
                      const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                      size_t errlen);

int sandbox_create(struct sbxd *d, const Sbx__V1__CreateSandbox *req, const struct caller *caller,
                   sandbox_ready_cb cb, void *ud, char *err, size_t errlen) {
        struct sbxtab *t = d->sandboxes;
        char id[SBX_ID_MAX_BYTES + 1];
        struct policy_objects objs;
        uint8_t *packed = NULL;
        size_t packed_len = 0;
        int r;

        memset(&objs, 0, sizeof(objs));
        if (d->shutting_down) {
                snprintf(err, errlen, "sbxd is shutting down; try again when it is back");
                return -ESHUTDOWN;
        }
        if (req->id && req->id[0]) {
                if (!valid_id(req->id)) {
                        snprintf(err, errlen, "invalid sandbox id '%.80s': use 1 to %u of "
                                              "[A-Za-z0-9._-]",
                                 req->id, SBX_ID_MAX_BYTES);
                        return -EINVAL;
                }
                snprintf(id, sizeof(id), "%s", req->id);
        } else {
                generate_id(id, sizeof(id));
        }
        if (sbxtab_find(t, id) || store_sandbox_exists(d->store, id) > 0) {
                snprintf(err, errlen, "sandbox id '%s' is already used (ids are never reused; pick "
                                      "another or omit it)", id);
                return -EEXIST;
        }
        {
                struct sandbox *o;
                unsigned owned = 0;
                for (o = t->all; o; o = o->next)
                        owned += !o->warm && o->owner_uid == caller->uid;
                if (owned >= d->cfg->max_sandboxes_per_uid) {
                        snprintf(err, errlen, "uid %u already owns %u sandboxes, its quota "
                                              "(--max-sandboxes-per-uid); terminate some first",
                                 (unsigned)caller->uid, owned);
                        return -EAGAIN;
                }
        }
        if (sbxtab_count(t) >= d->cfg->max_sandboxes) {
                snprintf(err, errlen, "sbxd already runs %u sandboxes, its maximum "
                                      "(--max-sandboxes); terminate some first",
                         sbxtab_count(t));
                return -EAGAIN;
        }
        r = policy_effective(d, req, id, caller, &packed, &packed_len, &objs, err, errlen);
        if (r < 0)
                return r;
        r = claim_warm(t, id, packed, packed_len, caller, cb, ud, err, errlen);
        if (r != 0) {
                free(packed);
                policy_objects_clear(&objs);
                return r < 0 ? r : 0;
        }
        /* A warm sandbox that is not used counts against --max-sandboxes: give one up
         * when this one would not fit otherwise. */
        if (t->count >= d->cfg->max_sandboxes)
                warm_give_up_one(t);
        return create_new(d, id, packed, packed_len, &objs, caller, 0, cb, ud, err, errlen);
}

/* Creates a sandbox from an effective request (packed, and the host objects it names,
 * both taken over): cold, for a client (cb answers it), or warm (cb NULL) for the pool. */
static int create_new(struct sbxd *d, const char *id, uint8_t *packed, size_t packed_len,
                      struct policy_objects *objs, const struct caller *caller, int warm,
                      sandbox_ready_cb cb, void *ud, char *err, size_t errlen) {
        struct sbxtab *t = d->sandboxes;
        struct sandbox *sb;
        int sv[2] = {-1, -1};
        struct store_sandbox rec;
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_view view;
        void *setup_mem = NULL;
        char *sbdir = NULL;
        int r, sndbuf = 2 * SBX_INIT_MAX_MSG_BYTES, adopt_fd = -1, cg_v2 = 0;
        int setup_fds[SBX_INIT_MAX_FDS]; /* what Setup carries (init.proto) */
        size_t n_setup_fds = 0, n_cg_fds = 0;

        memset(&view, 0, sizeof(view));
        sb = sandbox_alloc(d, id, packed, packed_len, warm ? (uid_t)-1 : caller->uid,
                           sbxd_now_unix_ms());
        if (!sb) {
                free(packed);
                policy_objects_clear(objs);
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        sb->owner_gid = warm ? (gid_t)-1 : caller->gid;
        sb->warm = warm;
        sb->state = SBX__V1__SANDBOX_STATE__CREATING;
        /* A warm sandbox has no deadline until it is claimed. */
        sb->deadline_ms = warm ? INT64_MAX : sb->created_ms + (int64_t)sb->spec->timeout_ms;
        sb->creator = *caller;
        snprintf(sb->creator_name, sizeof(sb->creator_name), "%s",
                 caller->client_name ? caller->client_name : "");
        sb->creator.client_name = sb->creator_name;
        sb->creator.groups = NULL; /* the connection's */
        sb->creator.n_groups = 0;

        /* Commands run as a uid of their own per sandbox (root) or as the mapped user.
         * A warm sandbox gets its uid when it is claimed, from its owner's (Claim). */
        if (d->features.rootless) {
                sb->run_uid = 0;
                sb->run_gid = 0;
        } else if (warm) {
                sb->run_uid = sb->run_gid = SBX_WARM_RUN_ID;
        } else {
                r = alloc_uid_slot(t, caller->uid, err, errlen);
                if (r < 0)
                        goto fail_early;
                sb->uid_slot = r;
                sb->run_uid = SBX_UID_BASE + (unsigned)sb->uid_slot;
                sb->run_gid = SBX_UID_BASE + (unsigned)sb->uid_slot;
        }

        memset(&rec, 0, sizeof(rec));
        rec.id = sb->id;
        rec.owner_uid = sb->owner_uid;
        rec.state = "creating";
        rec.created_ms = sb->created_ms;
        rec.deadline_ms = sb->deadline_ms;
        rec.idle_timeout_ms = sb->idle_timeout_ms;
        rec.spec = packed;
        rec.spec_len = packed_len;
        rec.run_uid = sb->run_uid;
        rec.caller_pid = (uint32_t)caller->pid;
        rec.client_name = caller->client_name;
        if (asprintf(&sbdir, "%s/sandboxes/%s", d->cfg->state_dir, sb->id) < 0 ||
            asprintf(&sb->workspace, "%s/workspace", sbdir) < 0) {
                sbdir = NULL;
                snprintf(err, errlen, "daemon out of memory");
                r = -ENOMEM;
                goto fail_early;
        }
        rec.workspace_dir = sb->workspace;
        rec.cgroup_path = d->cgroups->version != CGROUP_NONE ? sb->cg_name : "";
        /* A warm sandbox is recorded when it is claimed. */
        r = warm ? 0 : store_sandbox_insert(d->store, &rec);
        free(packed);
        packed = NULL;
        if (r < 0) {
                snprintf(err, errlen, "cannot record sandbox '%s': %s", sb->id,
                         r == -EEXIST ? "id already used" : store_last_error(d->store));
                goto fail_early;
        }
        table_link(t, sb);
        if (warm)
                t->n_warm++;
        else
                table_hash(t, sb);
        sb->create_cb = cb;
        sb->create_ud = ud;

        /* From here on every failure goes through fail_sandbox, which records it. */
        if (mkdir(sbdir, 0711) < 0 && errno != EEXIST) {
                fail_sandbox(sb, "cannot create %s: %s", sbdir, strerror(errno));
                goto done;
        }
        r = mkdir_owned(sb->workspace, 0755, d->features.rootless || warm ? d->euid : sb->run_uid,
                        d->features.rootless || warm ? d->egid : sb->run_gid);
        if (r < 0) {
                fail_sandbox(sb, "cannot create workspace %s: %s", sb->workspace, strerror(-r));
                goto done;
        }
        if (d->cgroups->version != CGROUP_NONE) {
                /* v1: init and commands live in the sandbox's group itself. v2: the group
                 * has children (init's leaf, commands' leaves), never processes. */
                r = cgroup_create(d->cgroups, sb->cg_name, d->cgroups->version != CGROUP_V2,
                                  &sb->cg);
                if (r < 0)
                        sandbox_warn(sb, "no cgroup for this sandbox (%s): limits fall back to "
                                         "rlimits",
                                     strerror(-r));
        } else {
                sandbox_warn(sb, "no usable cgroups on this host: memory, cpu_percent and "
                                 "processes limits are not enforced (see `sbx doctor`)");
        }
        apply_limits(sb);

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                fail_sandbox(sb, "socketpair: %s", strerror(errno));
                goto done;
        }
        (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        sb->chan_fd = sv[0];
        r = spawn_init(sb, sv[1], err, errlen);
        close(sv[1]);
        if (r < 0) {
                fail_sandbox(sb, "%s", err);
                goto done;
        }
        /* Stage 0 joins the group itself, first thing, through these (init.proto). */
        if (sb->cg) {
                struct cgroup *target = sb->cg, *leaf = NULL;
                int v2 = 0;
                if (d->cgroups->version == CGROUP_V2) {
                        char rel[SBX_ID_MAX_BYTES + 8];
                        snprintf(rel, sizeof(rel), "%s/init", sb->cg_name);
                        r = cgroup_create(d->cgroups, rel, 1, &leaf);
                        target = leaf;
                }
                if (target) {
                        r = cgroup_join_fds(target, setup_fds + n_setup_fds,
                                            SBX_INIT_MAX_FDS - 1, &v2);
                        if (r >= 0) {
                                n_cg_fds = (size_t)r;
                                n_setup_fds += n_cg_fds;
                        }
                }
                /* The leaf's directory goes with the sandbox's tree; only free it here. */
                if (leaf)
                        cgroup_forget(leaf);
                if (r < 0) {
                        fail_sandbox(sb, "cannot open its cgroup for its init: %s",
                                     strerror(-r));
                        goto done;
                }
                cg_v2 = v2;
        }
        fcntl(sb->chan_fd, F_SETFL, fcntl(sb->chan_fd, F_GETFL) | O_NONBLOCK);
        r = policy_view_build(d, sb->spec, &view);
        if (r == 0)
                r = policy_fill_setup(d, sb, &view, objs, &setup, &setup_mem);
        if (r < 0) {
                fail_sandbox(sb, "cannot build its setup: %s", strerror(-r));
                goto done;
        }
        keep_view(sb, &view);
        if (warm && setup_key(&setup, &sb->setup_key, &sb->setup_key_len) < 0) {
                fail_sandbox(sb, "daemon out of memory");
                goto done;
        }
        /* A warm sandbox gets its adoption socket when it is claimed (Claim). */
        adopt_fd = !warm && d->cfg->adopt_grace_ms ? adopt_listen(sb) : -1;
        if (adopt_fd >= 0) {
                setup.has_adoptable = setup.has_adopt_grace_ms = 1;
                setup.adoptable = 1;
                setup.adopt_grace_ms = (uint32_t)d->cfg->adopt_grace_ms;
                /* The adoption socket comes first (init.proto). */
                memmove(setup_fds + 1, setup_fds, n_setup_fds * sizeof(*setup_fds));
                setup_fds[0] = adopt_fd;
                n_setup_fds++;
        } else if (!warm && d->cfg->adopt_grace_ms) {
                sandbox_warn(sb, "this sandbox cannot be re-adopted by a restarted daemon");
        }
        if (n_cg_fds > 0) {
                setup.has_n_cgroup_fds = setup.has_cgroup_v2 = 1;
                setup.n_cgroup_fds = (uint32_t)n_cg_fds;
                setup.cgroup_v2 = cg_v2;
        }
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_SETUP;
        msg.setup = &setup;
        r = sandbox_send_init(sb, &msg, setup_fds, n_setup_fds);
        /* init holds them now. */
        while (n_setup_fds > 0)
                close(setup_fds[--n_setup_fds]);
        if (r < 0)
                goto done;
        if (uv_poll_init(d->loop, &sb->chan_poll, sb->chan_fd) < 0) {
                fail_sandbox(sb, "cannot watch its init channel");
                goto done;
        }
        sb->chan_poll.data = sb;
        sb->handles_open++;
        sb->chan_poll_inited = 1;
        sb->chan_poll_active = 1;
        uv_poll_start(&sb->chan_poll, UV_READABLE | UV_DISCONNECT, on_chan);
        sandbox_touch(sb); /* setup is timed from here */
        uv_timer_start(&sb->timer, on_timer, 1000, 0);
        if (warm)
                log_debug("sbx=%s: creating a warm sandbox (init pid %d)", sb->id,
                          (int)sb->proc.pid);
        else
                log_info("sbx=%s: creating for uid %u (init pid %d)", sb->id,
                         (unsigned)caller->uid, (int)sb->proc.pid);
done:
        while (n_setup_fds > 0)
                close(setup_fds[--n_setup_fds]);
        policy_free_setup(&setup, setup_mem);
        policy_view_clear(&view);
        policy_objects_clear(objs);
        free(sbdir);
        return 0;

fail_early:
        free(packed);
        policy_objects_clear(objs);
        free(sbdir);
        release_slot(t, sb);
        sb->freed_from_table = 1;
        uv_close((uv_handle_t *)&sb->timer, on_handle_closed);
        uv_close((uv_handle_t *)&sb->kill_timer, on_handle_closed);
        return r;
}

/* ---- the warm pool (--warm) ----------------------------------------------------------

 * Creating a sandbox costs 5-15 ms, most of it waiting: the cgroup move of stage 0 waits
 * for an RCU grace period on cgroup v1, then the network namespace and the mounts. So
 * the daemon keeps --warm sandboxes of the default policy set up ahead: unrecorded, not
 * findable by id, without deadline or adoption socket, owned by nobody. A create whose
 * Setup (what init builds the sandbox from) equals a warm one's but for its identity
 * claims it: the sandbox takes the client's id (its state directory is renamed; its
 * cgroup keeps its name, recorded as cgroup_path), limits, deadline and owner, init
 * takes the id as host name and the adoption socket (Claim), and the record is written.
 * The pool is topped up SBX_WARM_REFILL_DELAY_MS later, off the client's way. */

/* Its Setup without what differs between sandboxes of one policy (init.proto). */
static int setup_key(const Sbx__Init__V1__Setup *setup, uint8_t **ret, size_t *ret_len) {
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
        n = sbx__init__v1__setup__get_packed_size(&k);
        *ret = malloc(n ? n : 1);
        if (!*ret)
                return -ENOMEM;
        *ret_len = sbx__init__v1__setup__pack(&k, *ret);
        return 0;
}

/* The key a request would have: its Setup built as for a new sandbox. */
static int request_key(struct sbxd *d, Sbx__V1__CreateSandbox *spec, uint8_t **ret,
                       size_t *ret_len) {
        Sbx__Init__V1__Setup setup = SBX__INIT__V1__SETUP__INIT;
        struct policy_view view;
        struct sandbox tmp;
        void *mem = NULL;
        int r;

        memset(&tmp, 0, sizeof(tmp));
        tmp.d = d;
        tmp.spec = spec;
        tmp.owner_uid = (uid_t)-1;
        r = policy_view_build(d, spec, &view);
        if (r < 0)
                return r;
        r = policy_fill_setup(d, &tmp, &view, NULL, &setup, &mem);
        if (r == 0)
                r = setup_key(&setup, ret, ret_len);
        policy_free_setup(&setup, mem);
        policy_view_clear(&view);
        return r;
}

static void on_refill(uv_timer_t *h);

static void warm_schedule(struct sbxtab *t, uint64_t delay_ms) {
        if (t->d->cfg->warm == 0 || t->d->shutting_down || t->refill_inited == 2)
                return;
        if (!t->refill_inited) {
                if (uv_timer_init(t->d->loop, &t->refill) < 0)
                        return;
                t->refill.data = t;
                uv_unref((uv_handle_t *)&t->refill); /* never keeps the loop alive */
                t->refill_inited = 1;
        }
        if (!uv_is_active((uv_handle_t *)&t->refill))
                uv_timer_start(&t->refill, on_refill, delay_ms, 0);
}

static void warm_stop(struct sbxtab *t) {
        if (t->refill_inited == 1) {
                uv_timer_stop(&t->refill);
                uv_close((uv_handle_t *)&t->refill, NULL);
                t->refill_inited = 2; /* closed: never again */
        }
}

static int warm_create(struct sbxtab *t) {
        Sbx__V1__CreateSandbox req = SBX__V1__CREATE_SANDBOX__INIT;
        struct sbxd *d = t->d;
        struct caller k = {.uid = d->euid, .gid = d->egid, .pid = getpid(), .client_name = "sbxd"};
        char id[SBX_ID_MAX_BYTES + 1], gen[SBX_ID_MAX_BYTES + 1], err[512];
        struct policy_objects objs;
        uint8_t *packed = NULL;
        size_t packed_len = 0;
        int r;

        memset(&objs, 0, sizeof(objs));
        /* '~' is not allowed in client ids: no request can name a warm sandbox. A
         * generated id (time and randomness) keeps the pools of two daemons apart: a
         * claimed sandbox keeps its cgroup's name across restarts. */
        generate_id(gen, sizeof(gen));
        snprintf(id, sizeof(id), "~warm-%.40s", gen);
        r = policy_effective(d, &req, id, &k, &packed, &packed_len, &objs, err, sizeof(err));
        if (r == 0)
                r = create_new(d, id, packed, packed_len, &objs, &k, 1, NULL, NULL, err,
                               sizeof(err));
        if (r < 0)
                log_warning("cannot set up a warm sandbox: %s", err);
        return r;
}

static void on_refill(uv_timer_t *h) {
        struct sbxtab *t = h->data;
        struct sbxd *d = t->d;
        uint64_t now = uv_now(d->loop);

        if (d->shutting_down)
                return;
        if (now < t->warm_retry_at) {
                uv_timer_start(&t->refill, on_refill, t->warm_retry_at - now, 0);
                return;
        }
        while (t->n_warm < d->cfg->warm && t->count < d->cfg->max_sandboxes)
                if (warm_create(t) < 0) {
                        t->warm_retry_at = now + SBX_WARM_RETRY_MS;
                        uv_timer_start(&t->refill, on_refill, SBX_WARM_RETRY_MS, 0);
                        return;
                }
}

void sbxtab_warm_start(struct sbxtab *t) {
        warm_schedule(t, 0);
}

static void warm_give_up_one(struct sbxtab *t) {
        struct sandbox *sb;
        for (sb = t->all; sb; sb = sb->next)
                if (sb->warm && !sb->ending) {
                        sb->warm_given_up = 1;
                        end_sandbox(sb, SBX__V1__SANDBOX_STATE__TERMINATED, "room for a client");
                        return;
                }
}

/* Returns 1 when a warm sandbox was claimed for the request (cb answers it), 0 when none
 * matches, -errno (with err) when the claim failed and the request should fail. */
/* Whether a warm sandbox's init has gone in a way the loop has not handled yet (its
 * pidfd or channel says so): a claim passes over it. */
static int init_gone(const struct sandbox *sb) {
        struct pollfd p[2] = {{.fd = sb->chan_fd, .events = 0},
                              {.fd = sb->init_pidfd, .events = POLLIN}};
        nfds_t n = sb->init_pidfd >= 0 ? 2 : 1;

        if (sb->chan_fd < 0)
                return 1;
        if (poll(p, n, 0) <= 0)
                return 0;
        return (p[0].revents & (POLLHUP | POLLERR)) || (n == 2 && (p[1].revents & POLLIN));
}

static int claim_warm(struct sbxtab *t, const char *id, const uint8_t *packed, size_t packed_len,
                      const struct caller *caller, sandbox_ready_cb cb, void *ud, char *err,
                      size_t errlen) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Claim claim = SBX__INIT__V1__CLAIM__INIT;
        struct sbxd *d = t->d;
        Sbx__V1__CreateSandbox *spec;
        struct store_sandbox rec;
        struct sandbox *sb;
        uint8_t *key = NULL;
        size_t key_len = 0;
        char *old_dir = NULL, *new_dir = NULL, *new_ws = NULL;
        int r, adopt_fd;

        for (sb = t->all; sb; sb = sb->next)
                if (sb->warm && sb->state == SBX__V1__SANDBOX_STATE__READY && !sb->ending)
                        break;
        if (!sb)
                return 0;
        spec = sbx__v1__create_sandbox__unpack(NULL, packed_len, packed);
        if (!spec)
                return 0;
        r = request_key(d, spec, &key, &key_len);
        for (sb = r == 0 ? t->all : NULL; sb; sb = sb->next)
                if (sb->warm && sb->state == SBX__V1__SANDBOX_STATE__READY && !sb->ending &&
                    sb->setup_key_len == key_len && memcmp(sb->setup_key, key, key_len) == 0 &&
                    !init_gone(sb))
                        break;
        free(key);
        if (!sb)
                goto no;
        /* Its state directory takes the client's id: STATE/sandboxes/ID as for any. */
        old_dir = strdup(sb->workspace);
        if (!old_dir || !strrchr(old_dir, '/') ||
            asprintf(&new_dir, "%s/sandboxes/%s", d->cfg->state_dir, id) < 0)
                goto no;
        *strrchr(old_dir, '/') = '\0';
        if (asprintf(&new_ws, "%s/workspace", new_dir) < 0) {
                new_ws = NULL;
                goto no;
        }
        /* Its uid, from the owner's (root mode); its workspace is theirs. */
        if (!d->features.rootless) {
                char uerr[256];
                int slot = alloc_uid_slot(t, caller->uid, uerr, sizeof(uerr));
                if (slot < 0) {
                        log_warning("sbx=%s: cannot claim: %s", sb->id, uerr);
                        goto no;
                }
                if (chown(sb->workspace, SBX_UID_BASE + (unsigned)slot,
                          SBX_UID_BASE + (unsigned)slot) < 0) {
                        log_warning("sbx=%s: cannot claim: chown %s: %s", sb->id, sb->workspace,
                                    strerror(errno));
                        t->uid_slots[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
                        goto no;
                }
                sb->uid_slot = slot;
                sb->run_uid = sb->run_gid = SBX_UID_BASE + (unsigned)slot;
                claim.has_run_uid = claim.has_run_gid = 1;
                claim.run_uid = sb->run_uid;
                claim.run_gid = sb->run_gid;
        }
        if (rename(old_dir, new_dir) < 0) {
                log_warning("sbx=%s: cannot claim: rename %s: %s", sb->id, old_dir,
                            strerror(errno));
                goto no_slot;
        }
        memset(&rec, 0, sizeof(rec));
        rec.id = id;
        rec.owner_uid = caller->uid;
        rec.state = "ready";
        rec.created_ms = sbxd_now_unix_ms();
        rec.deadline_ms = rec.created_ms + (int64_t)spec->timeout_ms;
        rec.idle_timeout_ms = spec->has_idle_timeout_ms ? spec->idle_timeout_ms : 0;
        rec.spec = packed;
        rec.spec_len = packed_len;
        rec.init_pid = sb->init_pid;
        rec.workspace_dir = new_ws;
        rec.cgroup_path = sb->cg ? sb->cg_name : "";
        rec.run_uid = sb->run_uid;
        rec.caller_pid = (uint32_t)caller->pid;
        rec.client_name = caller->client_name;
        r = store_sandbox_insert(d->store, &rec);
        if (r < 0) {
                (void)rename(new_dir, old_dir);
                release_slot(t, sb);
                snprintf(err, errlen, "cannot record sandbox '%s': %s", id,
                         r == -EEXIST ? "id already used" : store_last_error(d->store));
                sbx__v1__create_sandbox__free_unpacked(spec, NULL);
                free(old_dir);
                free(new_dir);
                free(new_ws);
                return r;
        }

        /* It is the client's sandbox from here on. */
        log_info("sbx=%s: claimed %s for uid %u (init pid %d, uid %u)", id, sb->id,
                 (unsigned)caller->uid, (int)sb->init_pid, (unsigned)sb->run_uid);
        sb->warm = 0;
        t->n_warm--;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        table_hash(t, sb);
        free(sb->workspace);
        sb->workspace = new_ws;
        new_ws = NULL;
        sbx__v1__create_sandbox__free_unpacked(sb->spec, NULL);
        sb->spec = spec;
        spec = NULL;
        free(sb->setup_key);
        sb->setup_key = NULL;
        sb->setup_key_len = 0;
        sb->owner_uid = caller->uid;
        sb->owner_gid = caller->gid;
        sb->created_ms = rec.created_ms;
        sb->deadline_ms = rec.deadline_ms;
        sb->idle_timeout_ms = rec.idle_timeout_ms;
        sb->creator = *caller;
        snprintf(sb->creator_name, sizeof(sb->creator_name), "%s",
                 caller->client_name ? caller->client_name : "");
        sb->creator.client_name = sb->creator_name;
        sb->creator.groups = NULL; /* the connection's */
        sb->creator.n_groups = 0;
        apply_limits(sb);

        claim.hostname = sb->id;
        adopt_fd = d->cfg->adopt_grace_ms ? adopt_listen(sb) : -1;
        if (adopt_fd >= 0) {
                claim.has_adoptable = claim.has_adopt_grace_ms = 1;
                claim.adoptable = 1;
                claim.adopt_grace_ms = (uint32_t)d->cfg->adopt_grace_ms;
        } else if (d->cfg->adopt_grace_ms) {
                sandbox_warn(sb, "this sandbox cannot be re-adopted by a restarted daemon");
        }
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_CLAIM;
        msg.claim = &claim;
        sb->create_cb = cb;
        sb->create_ud = ud;
        r = sandbox_send_init(sb, &msg, adopt_fd >= 0 ? &adopt_fd : NULL, adopt_fd >= 0 ? 1 : 0);
        if (adopt_fd >= 0)
                close(adopt_fd); /* init holds it now */
        free(old_dir);
        free(new_dir);
        warm_schedule(t, SBX_WARM_REFILL_DELAY_MS);
        if (r < 0)
                return 1; /* the sandbox fails, and answers the client when it has ended */
        sandbox_touch(sb);
        arm_timer(sb);
        /* Answered at once (the reply goes out after the record's commit). */
        sb->create_cb = NULL;
        cb(ud, sb, 0, NULL);
        return 1;
no_slot:
        release_slot(t, sb);
no:
        sbx__v1__create_sandbox__free_unpacked(spec, NULL);
        free(old_dir);
        free(new_dir);
        free(new_ws);
        return 0;
}

/* At start-up, removes the state directories no sandbox record owns: those of warm
 * sandboxes of a daemon that died (they went with it: no adoption socket), and any
 * other a crash left between making or renaming a directory and recording it (a claim
 * renames first). Their cgroups go with every other unused group (remove_if_stale). */
static void remove_unrecorded_dirs(struct sbxd *d) {
        char path[SBX_PATH_MAX_BYTES + 16];
        DIR *dir;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/sandboxes", d->cfg->state_dir);
        dir = opendir(path);
        while (dir && (de = readdir(dir))) {
                char ws[SBX_PATH_MAX_BYTES + 300];
                if (de->d_name[0] == '.')
                        continue;
                if (strncmp(de->d_name, "~warm-", 6) != 0) {
                        if (store_sandbox_exists(d->store, de->d_name) != 0)
                                continue; /* recorded (or the store cannot say: kept) */
                        log_notice("sbx=%s: removing its state directory, which has no record "
                                   "(a create cut short by a crash)",
                                   de->d_name);
                }
                snprintf(ws, sizeof(ws), "%s/%s/workspace", path, de->d_name);
                trash_sandbox_dir_now(d, de->d_name, ws, 0);
        }
        if (dir)
                closedir(dir);
}

/* ---- recovery and re-adoption ------------------------------------------------------- */

/* A live record found at start-up, copied out of the store. */
struct orphan {
        char *id;
        char *state;
        char *workspace;
        char *cgroup_path; /* its cgroup's name (a claimed warm sandbox's is not its id) */
        uint8_t *spec;
        size_t spec_len;
        uid_t owner;
        int64_t created_ms, deadline_ms;
        pid_t init_pid;
        uid_t run_uid;
        int keep;
};

struct orphan_list {
        struct orphan *v;
        size_t n, cap;
};

static int collect_orphan(const struct store_sandbox *rec, void *ud) {
        struct orphan_list *l = ud;
        struct orphan *o;
        Sbx__V1__CreateSandbox *spec;
        if (l->n == l->cap) {
                size_t nc = l->cap ? l->cap * 2 : 16;
                struct orphan *nv = realloc(l->v, nc * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                l->v = nv;
                l->cap = nc;
        }
        o = &l->v[l->n];
        memset(o, 0, sizeof(*o));
        spec = sbx__v1__create_sandbox__unpack(NULL, rec->spec_len, rec->spec);
        o->keep = spec && spec->has_keep_workspace && spec->keep_workspace;
        if (spec)
                sbx__v1__create_sandbox__free_unpacked(spec, NULL);
        o->id = strdup(rec->id);
        o->state = strdup(rec->state);
        o->workspace = rec->workspace_dir ? strdup(rec->workspace_dir) : NULL;
        o->cgroup_path = strdup(rec->cgroup_path && rec->cgroup_path[0] ? rec->cgroup_path
                                                                        : rec->id);
        o->spec = malloc(rec->spec_len ? rec->spec_len : 1);
        if (o->spec)
                memcpy(o->spec, rec->spec, rec->spec_len);
        o->spec_len = rec->spec_len;
        o->owner = rec->owner_uid;
        o->created_ms = rec->created_ms;
        o->deadline_ms = rec->deadline_ms;
        o->init_pid = rec->init_pid;
        o->run_uid = rec->run_uid;
        l->n++;
        if (!o->id || !o->state || !o->spec)
                return -ENOMEM;
        return 0;
}

/* 1 when pid is a sandbox init: PID 1 of a PID namespace of its own (NSpid "pid 1")
 * running sbx-init. The record's pid may have been reused by anything since. */
static int is_sbx_init(pid_t pid) {
        char path[64], buf[4096];
        const char *p;
        ssize_t n;
        long outer = 0, inner = 0, extra = 0;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        p = strstr(buf, "\nNSpid:");
        if (!p || sscanf(p + 8, "%ld %ld %ld", &outer, &inner, &extra) != 2 || outer != pid ||
            inner != 1)
                return 0;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        return n >= 8 && strncmp(buf, "sbx-init", 8) == 0;
}

/* The highest command number of a sandbox's records: its seq, or the N of its c-N
 * (records from before schema 3 were numbered anew, in their order). */
static int count_commands(const struct store_command *c, void *ud) {
        uint64_t *max = ud;
        uint64_t n;
        if (c->seq > *max)
                *max = c->seq;
        if (c->command_id && sscanf(c->command_id, "c-%" SCNu64, &n) == 1 && n > *max)
                *max = n;
        return 0;
}

/* Connects to the adoption socket of o's init and takes the sandbox over. Returns 0
 * when adopted, -errno when it cannot be (the caller then declares it lost). */
static int adopt_one(struct sbxd *d, struct orphan *o) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        Sbx__Init__V1__FromInit *m = NULL;
        struct policy_view view;
        struct pollfd pfd;
        struct sandbox *sb;
        char path[64];
        size_t len = 0, nfds = 0;
        int dfd, fd, pidfd = -1, r, fds[SBX_INIT_MAX_FDS];
        pid_t pid = 0;

        if (!d->cfg->adopt_grace_ms || !o->workspace || o->init_pid <= 0 ||
            strcmp(o->state, "ready") != 0)
                return -ENOTSUP;
        dfd = adopt_path(o->workspace, sa.sun_path, sizeof(sa.sun_path));
        if (dfd < 0)
                return dfd;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        r = fd < 0 ? -errno : connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(dfd);
        if (r < 0)
                goto fail;
        /* init greets a new daemon with Ready naming its host pid. */
        pfd = (struct pollfd){.fd = fd, .events = POLLIN};
        r = poll(&pfd, 1, 5000) == 1 ? initmsg_recv(fd, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds)
                                     : -ETIMEDOUT;
        if (r > 0) {
                while (nfds > 0)
                        close(fds[--nfds]);
                m = sbx__init__v1__from_init__unpack(NULL, len, buf);
        }
        if (!m || m->body_case != SBX__INIT__V1__FROM_INIT__BODY_READY || !m->ready->ok ||
            !m->ready->has_init_host_pid) {
                r = r < 0 ? r : -EPROTO;
                goto fail;
        }
        pid = m->ready->init_host_pid;
        if (pid != o->init_pid || !is_sbx_init(pid)) {
                r = -ESRCH;
                goto fail;
        }
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 || !is_sbx_init(pid)) {
                r = -ESRCH;
                goto fail;
        }
        sb = sandbox_alloc(d, o->id, o->spec, o->spec_len, o->owner, o->created_ms);
        if (!sb) {
                r = -ENOMEM;
                goto fail;
        }
        sb->owner_gid = policy_passwd_gid(o->owner);
        fcntl(pidfd, F_SETFD, FD_CLOEXEC);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        sb->adopted = 1;
        sb->state = SBX__V1__SANDBOX_STATE__READY;
        sb->deadline_ms = o->deadline_ms;
        sb->chan_fd = fd;
        sb->init_pid = pid;
        sb->init_pidfd = pidfd;
        sb->workspace = o->workspace;
        o->workspace = NULL;
        if (d->features.rootless) {
                sb->run_uid = sb->run_gid = 0;
        } else if (o->run_uid >= SBX_UID_BASE && o->run_uid < SBX_UID_BASE + SBX_UID_COUNT) {
                sb->uid_slot = (int)(o->run_uid - SBX_UID_BASE);
                slot_take(d->sandboxes, (unsigned)sb->uid_slot);
                sb->run_uid = sb->run_gid = o->run_uid;
        }
        if (o->cgroup_path)
                snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", o->cgroup_path);
        if (d->cgroups->version != CGROUP_NONE && cgroup_attach(d->cgroups, sb->cg_name, &sb->cg) < 0)
                sandbox_warn(sb, "its cgroup was not found after the daemon restarted");
        apply_limits(sb);
        if (policy_view_build(d, sb->spec, &view) == 0) {
                keep_view(sb, &view);
                policy_view_clear(&view);
        }
        snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
        sb->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        note_pidns(sb, pid);
        /* Its commands go on numbering after the recorded ones; should the records not
         * be readable now, a command whose number is taken loses its record (logged). */
        if (store_history(d->store, sb->id, 0, 0, count_commands, &sb->next_command) < 0)
                log_err("sbx=%s: cannot read its command records (%s); numbering goes on "
                        "from c-%llu",
                        sb->id, store_last_error(d->store),
                        (unsigned long long)sb->next_command + 1);
        sb->commands_run = sb->next_command;
        table_link(d->sandboxes, sb);
        table_hash(d->sandboxes, sb);
        if (uv_poll_init(d->loop, &sb->chan_poll, sb->chan_fd) == 0) {
                sb->chan_poll.data = sb;
                sb->handles_open++;
                sb->chan_poll_inited = sb->chan_poll_active = 1;
                uv_poll_start(&sb->chan_poll, UV_READABLE | UV_DISCONNECT, on_chan);
        }
        if (uv_poll_init(d->loop, &sb->pidfd_poll, sb->init_pidfd) == 0) {
                sb->pidfd_poll.data = sb;
                sb->handles_open++;
                sb->pidfd_poll_inited = 1;
                uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
        }
        sandbox_touch(sb);
        arm_timer(sb);
        sbx__init__v1__from_init__free_unpacked(m, NULL);
        return 0;
fail:
        if (m)
                sbx__init__v1__from_init__free_unpacked(m, NULL);
        if (pidfd >= 0)
                close(pidfd);
        if (fd >= 0)
                close(fd);
        return r;
}

/* Kills the init of a record that could not be adopted, if it still runs (verified). */
static void kill_orphan_init(pid_t pid) {
        int pidfd;
        if (pid <= 0 || !is_sbx_init(pid))
                return;
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return;
        if (is_sbx_init(pid))
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        close(pidfd);
}

/* A group under the base that no sandbox of ours uses: a crash left it (between a
 * sandbox's recorded end and its cgroup's removal one loop turn later, say). */
static int remove_if_stale(const char *name, void *ud) {
        struct sbxd *d = ud;
        struct sandbox *sb;
        int r;

        for (sb = d->sandboxes->all; sb; sb = sb->next)
                if (strcmp(sb->cg_name, name) == 0)
                        return 0;
        r = cgroup_remove_tree(d->cgroups, name);
        if (r < 0)
                log_warning("cannot remove the stale cgroup %s: %s", name, strerror(-r));
        else
                log_notice("removed the stale cgroup %s", name);
        return 0;
}

int sandbox_recover(struct sbxd *d) {
        struct orphan_list l = {0};
        int64_t now = sbxd_now_unix_ms();
        size_t i;
        int r, adopted = 0;

        remove_unrecorded_dirs(d);
        r = store_uid_owners(d->store, load_uid_owner, d->sandboxes);
        if (r < 0)
                return r;
        r = store_sandbox_foreach(d->store, 1, 0, 0, 0, collect_orphan, &l);
        for (i = 0; i < l.n; i++) {
                struct orphan *x = &l.v[i];
                int n, a;
                if (!x->id || !x->state || !x->spec)
                        continue;
                /* Commands of the previous daemon are unknown either way: their output
                 * pipes ended with it. */
                n = store_commands_mark_unknown(d->store, x->id, now);
                a = adopt_one(d, x);
                if (a == 0) {
                        adopted++;
                        log_notice("sbx=%s: adopted after a daemon restart (init pid %d); %d "
                                   "commands of the previous daemon marked unknown",
                                   x->id, (int)x->init_pid, n < 0 ? 0 : n);
                        continue;
                }
                kill_orphan_init(x->init_pid);
                if (d->cgroups->version != CGROUP_NONE)
                        cgroup_remove_tree(d->cgroups, x->cgroup_path ? x->cgroup_path : x->id);
                if (x->workspace && strstr(x->workspace, "/sandboxes/"))
                        trash_sandbox_dir_now(d, x->id, x->workspace, x->keep);
                store_sandbox_set_state(d->store, x->id, "lost", now,
                                        "lost: the daemon stopped while it ran");
                log_notice("sbx=%s: lost in a daemon restart (%s); %d running commands marked "
                           "unknown, leftovers removed",
                           x->id, strerror(-a), n < 0 ? 0 : n);
        }
        for (i = 0; i < l.n; i++) {
                free(l.v[i].id);
                free(l.v[i].state);
                free(l.v[i].workspace);
                free(l.v[i].cgroup_path);
                free(l.v[i].spec);
        }
        free(l.v);
        /* Only the adopted sandboxes' groups are in use now. */
        if (d->cgroups->version != CGROUP_NONE)
                (void)cgroup_foreach_child(d->cgroups, remove_if_stale, d);
        return r < 0 ? r : adopted;
}

/* ---- leaving sandboxes to the next daemon -------------------------------------------- */

/* Lets go of sb without ending it: its init waits for the next daemon (adoption), its
 * record stays "ready", its running commands end as "unknown". */
static int detach_one(struct sandbox *sb, void *ud) {
        sb->left_running = 1;
        command_end_all(sb, 1);
        release_init(sb);
        if (sb->cg) {
                cgroup_forget(sb->cg); /* it stays, for the next daemon */
                sb->cg = NULL;
        }
        log_notice("sbx=%s: left running for the next daemon", sb->id);
        retire(sb);
        return 0;
}

void sbxtab_detach_all(struct sbxtab *t, void (*done)(void *ud), void *ud) {
        struct sandbox *sb, *next;
        warm_stop(t);
        for (sb = t->all; sb; sb = next) {
                next = sb->next;
                /* Warm ones are nobody's: they end (the next daemon makes its own). */
                if (sb->state == SBX__V1__SANDBOX_STATE__READY && !sb->warm)
                        detach_one(sb, NULL);
                else
                        sandbox_terminate(sb, "shutdown", NULL, NULL);
        }
        if (t->count == 0)
                done(ud);
        else {
                t->shutdown_done = done;
                t->shutdown_ud = ud;
        }
}
