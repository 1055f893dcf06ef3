/* cmdsched.c: the command scheduler, slots and queues across sandboxes and uids; see
 * cmdsched.h. The order within one sandbox's queue is cmdqueue.c's. */
#include "cmdsched.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "config.h"
#include "quota.h"

void cmdsched_init(struct cmdsched *s, const struct cmdsched_ops *ops, struct quota *quota,
                   const struct config *cfg) {
        *s = (struct cmdsched){.ops = ops, .quota = quota, .cfg = cfg};
}

void cmdsched_queue_init(struct cmdsched_queue *q, const char *name) {
        *q = (struct cmdsched_queue){.name = name};
        cmdq_init(&q->queue);
}

static struct cmdsched_entry *of_wait(struct cmdq_entry *w) {
        return (struct cmdsched_entry *)((char *)w - offsetof(struct cmdsched_entry, wait));
}

/* ---- slots -------------------------------------------------------------------------- */

int cmdsched_take_slot(struct cmdsched *s, struct cmdsched_queue *q, uid_t uid, char *err,
                       size_t errlen) {
        unsigned mine = 0;
        int r;

        if (q->n_running >= s->ops->max_running(q)) {
                snprintf(err, errlen,
                         "sandbox '%s' already runs %u commands, its maximum (Limits.commands); "
                         "wait for one to finish, or let the command wait for a slot "
                         "(queue_timeout_ms)",
                         q->name, q->n_running);
                return -EBUSY;
        }
        r = quota_take(s->quota, QUOTA_COMMANDS, uid, s->cfg->max_commands_per_uid, &mine);
        if (r == -ENOMEM)
                snprintf(err, errlen, "daemon out of memory");
        else if (r < 0)
                snprintf(err, errlen,
                         "uid %u already runs %u commands, its quota (sbxd "
                         "--max-commands-per-uid); wait for some to finish, or let the command "
                         "wait for a slot (queue_timeout_ms)",
                         (unsigned)uid, mine);
        return r;
}

void cmdsched_untake(struct cmdsched *s, uid_t uid) {
        quota_drop(s->quota, QUOTA_COMMANDS, uid);
}

void cmdsched_run(struct cmdsched_queue *q, struct cmdsched_entry *e) {
        e->q = q;
        e->holds_slot = 1;
        q->n_running++;
}

/* ---- the queues --------------------------------------------------------------------- */

int cmdsched_queue_room(const struct cmdsched *s, const struct cmdsched_queue *q, uid_t uid,
                        char *err, size_t errlen) {
        unsigned mine = quota_count(s->quota, QUOTA_QUEUED, uid);

        if (q->n_queued >= s->ops->max_queued(q)) {
                snprintf(err, errlen,
                         "sandbox '%s' already has %u commands waiting for a slot, its maximum "
                         "(Limits.queued_commands, sbxd --max-queued); try again once some "
                         "have started",
                         q->name, q->n_queued);
                return -EBUSY;
        }
        if (s->n_queued >= s->cfg->max_queued_total) {
                snprintf(err, errlen,
                         "the daemon already has %u commands waiting for a slot, its maximum "
                         "(sbxd --max-queued-total); try again once some have started",
                         s->n_queued);
                return -EBUSY;
        }
        if (mine >= s->cfg->max_queued_per_uid) {
                snprintf(err, errlen,
                         "uid %u already has %u commands waiting for a slot, its share of the "
                         "daemon's queue (sbxd --max-queued-per-uid); try again once some have "
                         "started",
                         (unsigned)uid, mine);
                return -EBUSY;
        }
        return 0;
}

/* The sandboxes with waiting commands (s->waiting) are kept in the order they began
 * to wait, and one that was just served goes to the back: when a slot of a uid's quota
 * frees, the sandboxes of that uid take turns in the order they have waited. */
static void waiting_remove(struct cmdsched *s, struct cmdsched_queue *q) {
        if (q->waiting_prev)
                q->waiting_prev->waiting_next = q->waiting_next;
        else
                s->waiting = q->waiting_next;
        if (q->waiting_next)
                q->waiting_next->waiting_prev = q->waiting_prev;
        q->waiting_next = q->waiting_prev = NULL;
}

static void waiting_append(struct cmdsched *s, struct cmdsched_queue *q) {
        struct cmdsched_queue **at = &s->waiting, *last = NULL;

        while (*at) {
                last = *at;
                at = &(*at)->waiting_next;
        }
        q->waiting_prev = last;
        q->waiting_next = NULL;
        *at = q;
}

void cmdsched_enqueue(struct cmdsched *s, struct cmdsched_queue *q, struct cmdsched_entry *e,
                      uint64_t owner) {
        e->q = q;
        e->queued = 1;
        cmdq_push(&q->queue, &e->wait, owner);
        /* Counted in its uid's share; cmdsched_queue_room saw room for it. */
        (void)quota_take(s->quota, QUOTA_QUEUED, e->uid, UINT_MAX, NULL);
        if (q->n_queued++ == 0)
                waiting_append(s, q);
        s->n_queued++;
}

unsigned cmdsched_ahead(const struct cmdsched_entry *e) {
        return cmdq_ahead(&e->q->queue, &e->wait);
}

/* e leaves its sandbox's queue, to start (to_start) or not at all. */
static void unqueue(struct cmdsched *s, struct cmdsched_entry *e, int to_start) {
        struct cmdsched_queue *q = e->q;

        if (to_start)
                cmdq_take(&q->queue, &e->wait);
        else
                cmdq_remove(&q->queue, &e->wait);
        e->queued = 0;
        quota_drop(s->quota, QUOTA_QUEUED, e->uid);
        s->n_queued--;
        if (--q->n_queued == 0)
                waiting_remove(s, q);
}

int cmdsched_leave(struct cmdsched *s, struct cmdsched_entry *e) {
        if (e->queued)
                unqueue(s, e, 0);
        if (!e->holds_slot)
                return 0;
        e->holds_slot = 0;
        e->q->n_running--;
        quota_drop(s->quota, QUOTA_COMMANDS, e->uid);
        return 1;
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* A waiting command whose caller's quota has room (its sandbox's is checked apart). */
static int quota_allows(const struct cmdq_entry *w, void *ud) {
        const struct cmdsched_entry *e =
                (const struct cmdsched_entry *)((const char *)w -
                                                offsetof(struct cmdsched_entry, wait));
        const struct cmdsched *s = ud;

        return quota_count(s->quota, QUOTA_COMMANDS, e->uid) < s->cfg->max_commands_per_uid;
}

/* Starts the waiting command of q whose turn it is, if it may start now. Returns 1
 * when one started. */
static int dispatch_one(struct cmdsched *s, struct cmdsched_queue *q) {
        struct cmdq_entry *w;
        struct cmdsched_entry *e;
        char err[256];

        if (!s->ops->may_start(q) || q->n_running >= s->ops->max_running(q))
                return 0;
        w = cmdq_first(&q->queue, quota_allows, s);
        if (!w || cmdsched_take_slot(s, q, of_wait(w)->uid, err, sizeof(err)) < 0)
                return 0;
        e = of_wait(w);
        unqueue(s, e, 1);
        s->ops->start(e);
        return 1;
}

void cmdsched_slot_freed(struct cmdsched *s) {
        if (s->dispatching) {
                s->dispatch_again = 1;
                return;
        }
        s->dispatching = 1;
        do {
                struct cmdsched_queue *q, *next;

                s->dispatch_again = 0;
                for (q = s->waiting; q; q = next) {
                        next = q->waiting_next;
                        if (!dispatch_one(s, q))
                                continue;
                        /* Another pass: this one may have more to start. */
                        s->dispatch_again = 1;
                        if (q->n_queued > 0 && next) {
                                waiting_remove(s, q);
                                waiting_append(s, q);
                        }
                }
        } while (s->dispatch_again);
        s->dispatching = 0;
}
