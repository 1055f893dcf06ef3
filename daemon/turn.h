/* turn.h: the end of every loop turn, where the daemon's "commit before reply" rule
 * lives: the records a reply may report are committed before the reply is written.
 *
 * The rule. A handler may write records into the store's open batch (a command that
 * started or ended: store_command_insert/finish) and answer in the same turn. A reply
 * the client has read must never report what a crash could still lose, so no reply is
 * written while the batch it may report is open: conn_send() only holds a reply (conn.c
 * keeps the held replies in send order, across connections, in the turn's struct
 * conn_held), and turn.c, at the end of each loop turn, first commits the open batch
 * (store_commit) and then writes every held reply (conn_release_held). These are the
 * only two places that decide when a reply goes out; nothing else calls
 * conn_release_held.
 *
 * The batch. When no reply waits, an open batch stays open up to SBX_RECORD_BATCH_MS,
 * so that a short command's start and end share one commit. A batch whose commit fails
 * is lost and logged (the replies still go out: they report what the daemon did). After
 * the replies, a WAL checkpoint is started on libuv's thread pool when the store wants
 * one.
 *
 * Owned by main(), which starts it before the loop runs and stops it at shutdown. Every
 * handle is unreferenced: the end of a turn never keeps the loop alive. */
#ifndef SBX_TURN_H
#define SBX_TURN_H

#include <uv.h>

#include "conn.h"

struct sbxd;

struct turn {
        struct sbxd *d;
        uv_prepare_t prepare; /* before the loop waits */
        uv_check_t check;     /* after it handled I/O */
        uv_timer_t batch;     /* SBX_RECORD_BATCH_MS for a batch no reply waits for */
        uv_work_t checkpoint; /* store_checkpoint_run on the thread pool */
        int checkpoint_result;
        int started;
        struct conn_held held; /* the replies held until the end of the turn (d->held) */
};

/* Starts committing and releasing at the end of every turn of d->loop, and holds the
 * replies of d's connections (d->held points to t's queue from now on: t must outlive
 * them). d->store must be open and stay open until turn_stop. */
void turn_start(struct turn *t, struct sbxd *d);

/* Commits the open batch and writes every held reply now, without waiting for the end
 * of the turn: the last replies at shutdown. */
void turn_flush(struct turn *t);

/* Closes the handles (their close callbacks run in the next loop iteration). The store
 * may be closed once the loop has run them; a checkpoint still running on the thread
 * pool keeps the loop alive until it ends. Idempotent. */
void turn_stop(struct turn *t);

#endif
