/* cmdqueue.h: the commands of one sandbox that wait for a slot, and the order they
 * start in (RunCommand.queue_timeout_ms; docs/sandboxes.md, "Many agents, one sandbox").
 *
 * First come, first served, with turns between owners (the connections that queued
 * them): an entry's turn is one past the later of the queue's current turn and the
 * last turn its owner already holds in the queue, and entries start in the order of
 * (turn, arrival). A client that queues fifty commands takes turns 1..50; one that
 * queues a command after it takes the next turn due, so it waits for at most one of
 * the first client's commands, not fifty.
 *
 * Pure bookkeeping on intrusive entries (embed a struct cmdq_entry in what waits): no
 * allocation, no clock, no libuv. Used by command.c, tested by check_cmdqueue. */
#ifndef SBX_CMDQUEUE_H
#define SBX_CMDQUEUE_H

#include <stdint.h>

struct cmdq_entry {
        struct cmdq_entry *next, *prev; /* arrival order (cmdqueue.c's) */
        uint64_t owner;                 /* who queued it: owners take turns */
        uint64_t turn;
        uint64_t seq; /* its arrival */
};

struct cmdq {
        struct cmdq_entry *head, *tail;
        unsigned n;
        uint64_t turn; /* the turn of the entry taken last */
        uint64_t seq;
};

/* An empty queue. */
void cmdq_init(struct cmdq *q);

/* Queues e for owner, behind its owner's other entries and in the next turn due. */
void cmdq_push(struct cmdq *q, struct cmdq_entry *e, uint64_t owner);

/* Decides whether an entry may start now (another bound than the queue's own, e.g. its
 * caller's quota). */
typedef int (*cmdq_ready_fn)(const struct cmdq_entry *e, void *ud);

/* The entry that starts next, among those ready says may (ready NULL: all), or NULL. */
struct cmdq_entry *cmdq_first(const struct cmdq *q, cmdq_ready_fn ready, void *ud);

/* e leaves the queue to start: the queue's turn moves to e's. */
void cmdq_take(struct cmdq *q, struct cmdq_entry *e);

/* e leaves the queue without starting (cancelled, timed out, its sandbox ended). */
void cmdq_remove(struct cmdq *q, struct cmdq_entry *e);

/* How many entries start before e as the queue stands (all of them ready). */
unsigned cmdq_ahead(const struct cmdq *q, const struct cmdq_entry *e);

#endif
