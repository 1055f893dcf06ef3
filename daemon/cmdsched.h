/* cmdsched.h: the command scheduler, across the daemon's sandboxes and uids: the slots
 * commands run in, the queues they wait in, and which waiting command starts when a
 * slot frees.
 *
 * A command runs in a slot: one of its sandbox's (Limits.commands, at most sbxd
 * --max-commands) and one of its caller's quota over every sandbox
 * (--max-commands-per-uid). A command that finds none may wait in its sandbox's queue,
 * where the connections that queued take turns (cmdqueue.h); the waiting are bounded
 * three ways: the sandbox's queue (Limits.queued_commands, --max-queued), the caller's
 * share of the daemon's queue (--max-queued-per-uid) and the daemon's
 * (--max-queued-total). When a slot frees, every sandbox whose turn it is starts the
 * waiting command whose turn it is, one per sandbox per pass, the sandboxes taking turns
 * in the order they began to wait.
 *
 * Owns struct cmdsched (one per daemon: the sandbox table makes it, d->sched), the
 * scheduling part of each sandbox (struct cmdsched_queue, in struct sandbox) and of each
 * command (struct cmdsched_entry, in struct command); their fields are cmdsched.c's,
 * others read them only where a comment says so. Counts slots and waiting commands per
 * uid in the quota it is given (QUOTA_COMMANDS, QUOTA_QUEUED). It knows neither
 * sandboxes nor commands: it reaches them through the ops it was given (a sandbox's
 * caps, whether it may start a command now, the start of a waiting command). Called by
 * command.c on the loop thread; no clock, no libuv, no logging; tested alone by
 * check_cmdsched. A command's own life (its timers, its result) is command.c's. */
#ifndef SBX_CMDSCHED_H
#define SBX_CMDSCHED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cmdqueue.h"

struct config;
struct quota;

/* One sandbox's part. sandbox.c reads n_running and n_queued (SandboxInfo, the idle
 * timeout); command.c walks queue.head (the waiting commands, for listing). */
struct cmdsched_queue {
        const char *name;   /* the sandbox's id, for the reasons given (cmdsched_queue_init) */
        struct cmdq queue;  /* its waiting commands, in their turns */
        unsigned n_running; /* commands holding one of its slots */
        unsigned n_queued;  /* waiting commands: queue.n, as SandboxInfo.queued_commands says */
        struct cmdsched_queue *waiting_next, *waiting_prev; /* the scheduler's waiting list */
};

/* One command's part. command.c reads queued and holds_slot. */
struct cmdsched_entry {
        struct cmdq_entry wait;   /* its place in q->queue, while queued */
        struct cmdsched_queue *q; /* its sandbox's, once it ran or waited */
        uid_t uid;                /* its caller: whose quota it counts in (set by the caller) */
        int queued;               /* waits for a slot: holds none, not started */
        int holds_slot;           /* counted in q->n_running and its uid's quota */
};

/* What the scheduler asks of the sandboxes and commands it schedules. */
struct cmdsched_ops {
        /* The most commands q's sandbox runs at once (at least 1). */
        unsigned (*max_running)(const struct cmdsched_queue *q);
        /* The most commands that wait in q at once. */
        unsigned (*max_queued)(const struct cmdsched_queue *q);
        /* 1 when q's sandbox may start a waiting command now (its sandbox is ready and not
         * ending, the daemon is not stopping). */
        int (*may_start)(const struct cmdsched_queue *q);
        /* e has taken a slot and left its queue: start it. It may end at once and give
         * its slot back (cmdsched_leave, then cmdsched_slot_freed from within: the
         * scheduler looks again once this call has returned). */
        void (*start)(struct cmdsched_entry *e);
};

/* The daemon's scheduler. Its fields are cmdsched.c's. */
struct cmdsched {
        const struct cmdsched_ops *ops;
        struct quota *quota;            /* per-uid counts (the sandbox table's) */
        const struct config *cfg;       /* the flags, read when used */
        struct cmdsched_queue *waiting; /* sandboxes with waiting commands, in the order
                                         * they began to wait (see cmdsched_slot_freed) */
        unsigned n_queued;              /* waiting commands, all sandboxes (--max-queued-total) */
        int dispatching;                /* cmdsched_slot_freed is starting waiting commands */
        int dispatch_again;             /* a slot freed meanwhile: look at the queues again */
};

/* Makes s empty, scheduling with ops (static storage), counting in quota, bounded by
 * cfg's flags; both outlive s. */
void cmdsched_init(struct cmdsched *s, const struct cmdsched_ops *ops, struct quota *quota,
                   const struct config *cfg);

/* Makes q an empty queue of the sandbox named name (a string that outlives q; its
 * content may change, a sandbox's id when it is claimed warm). */
void cmdsched_queue_init(struct cmdsched_queue *q, const char *name);

/* A slot for a command of uid in q: room under q's maximum, and one of uid's quota
 * (--max-commands-per-uid, over every sandbox), taken (cmdsched_run counts the slot in
 * q, cmdsched_leave gives both back; cmdsched_untake gives back a slot never used).
 * 0, or -EBUSY (q is full) or -EAGAIN (uid's quota) or -ENOMEM, with err. */
int cmdsched_take_slot(struct cmdsched *s, struct cmdsched_queue *q, uid_t uid, char *err,
                       size_t errlen);

/* Gives back the slot cmdsched_take_slot took for uid, for a command that never came to
 * be. */
void cmdsched_untake(struct cmdsched *s, uid_t uid);

/* e (e->uid set), whose slot was taken, runs in q: counted in q->n_running until
 * cmdsched_leave. */
void cmdsched_run(struct cmdsched_queue *q, struct cmdsched_entry *e);

/* Room for one more waiting command of uid in q, or -EBUSY naming the bound that is
 * full, with err. */
int cmdsched_queue_room(const struct cmdsched *s, const struct cmdsched_queue *q, uid_t uid,
                        char *err, size_t errlen);

/* e (e->uid set) waits in q, where cmdsched_queue_room saw room for it, taking turns
 * with the other commands of owner (cmdqueue.h), until it is started (ops->start) or
 * leaves (cmdsched_leave). */
void cmdsched_enqueue(struct cmdsched *s, struct cmdsched_queue *q, struct cmdsched_entry *e,
                      uint64_t owner);

/* How many waiting commands start before e (waiting) as its queue stands. */
unsigned cmdsched_ahead(const struct cmdsched_entry *e);

/* e leaves the scheduler: out of its queue when waiting (it never starts), its slot and
 * its uid's given back when it holds one. Returns 1 when a slot was given back: call
 * cmdsched_slot_freed once the command is done with. Nothing to do for an entry that
 * neither waits nor holds a slot. */
int cmdsched_leave(struct cmdsched *s, struct cmdsched_entry *e);

/* A slot (and one of its caller's quota) freed: the waiting commands of every sandbox
 * that may start now start, one per sandbox per visit, a sandbox that was served going
 * to the back of the list (so two slots of a uid freed together go to two of its
 * sandboxes, in the order they have waited). Not reentrant: a slot freed while it runs
 * (a start that failed at once) makes it look again. */
void cmdsched_slot_freed(struct cmdsched *s);

#endif
