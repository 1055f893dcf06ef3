/* cmdqueue.c: the waiting commands of a sandbox and their turns; see cmdqueue.h. Every
 * operation walks the queue, which a daemon setting bounds (--max-queued). */
#include "cmdqueue.h"

#include <stddef.h>

void cmdq_init(struct cmdq *q) {
        q->head = q->tail = NULL;
        q->n = 0;
        q->turn = 0;
        q->seq = 0;
}

void cmdq_push(struct cmdq *q, struct cmdq_entry *e, uint64_t owner) {
        const struct cmdq_entry *o;
        uint64_t base = q->turn;

        for (o = q->head; o; o = o->next)
                if (o->owner == owner && o->turn > base)
                        base = o->turn;
        e->owner = owner;
        e->turn = base + 1;
        e->seq = ++q->seq;
        e->next = NULL;
        e->prev = q->tail;
        if (q->tail)
                q->tail->next = e;
        else
                q->head = e;
        q->tail = e;
        q->n++;
}

/* 1 when a starts before b. */
static int before(const struct cmdq_entry *a, const struct cmdq_entry *b) {
        return a->turn < b->turn || (a->turn == b->turn && a->seq < b->seq);
}

struct cmdq_entry *cmdq_first(const struct cmdq *q, cmdq_ready_fn ready, void *ud) {
        struct cmdq_entry *e, *best = NULL;

        for (e = q->head; e; e = e->next)
                if ((!best || before(e, best)) && (!ready || ready(e, ud)))
                        best = e;
        return best;
}

void cmdq_remove(struct cmdq *q, struct cmdq_entry *e) {
        if (e->prev)
                e->prev->next = e->next;
        else
                q->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                q->tail = e->prev;
        e->next = e->prev = NULL;
        q->n--;
}

void cmdq_take(struct cmdq *q, struct cmdq_entry *e) {
        if (e->turn > q->turn)
                q->turn = e->turn;
        cmdq_remove(q, e);
}

unsigned cmdq_ahead(const struct cmdq *q, const struct cmdq_entry *e) {
        const struct cmdq_entry *o;
        unsigned n = 0;

        for (o = q->head; o; o = o->next)
                if (o != e && before(o, e))
                        n++;
        return n;
}
