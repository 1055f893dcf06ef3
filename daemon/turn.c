/* turn.c: commit before reply, at the end of every loop turn; see turn.h.
 *
 * Owns the prepare and check handles that end each turn, the timer that keeps a batch
 * of command records open for SBX_RECORD_BATCH_MS, the thread-pool request that runs
 * WAL checkpoints, and the queue of replies held for the end of the turn (struct
 * conn_held: conn.c fills and writes it; d->held points to it). Calls the store
 * (commit, lost batches, checkpoints) and conn_release_held(); started and stopped by
 * main(). */
#include "turn.h"

#include "conn.h"
#include "log.h"
#include "sbxd.h"
#include "store.h"

/* Commits the open batch of command records; a failure loses the batch, says so. */
static void commit_records(struct turn *t) {
        struct store *s = t->d->store;

        uv_timer_stop(&t->batch);
        if (store_commit(s) < 0)
                log_err("cannot commit command records (they are lost): %s", store_last_error(s));
}

/* Batches whose commit failed inside another write (store_take_lost). */
static void report_lost_records(struct turn *t) {
        char why[512];
        unsigned lost = store_take_lost(t->d->store, why, sizeof(why));
        if (lost)
                log_err("%u batches of command records were lost: %s", lost, why);
}

static void on_batch_timer(uv_timer_t *h) {
        turn_flush(h->data);
}

/* Checkpoints run on libuv's thread pool: their fsyncs never stall the loop. */
static void run_checkpoint(uv_work_t *w) {
        struct turn *t = w->data;
        t->checkpoint_result = store_checkpoint_run(t->d->store);
}

static void on_checkpoint_done(uv_work_t *w, int status) {
        struct turn *t = w->data;
        /* status < 0: cancelled before it ran, which is no failure. */
        const char *err = store_checkpoint_end(t->d->store, status < 0 ? 0 : t->checkpoint_result);
        if (err)
                log_warning("records: %s (the WAL keeps them; retried later)", err);
}

static void maybe_checkpoint(struct turn *t) {
        struct store *s = t->d->store;

        if (!store_checkpoint_wanted(s))
                return;
        store_checkpoint_begin(s);
        t->checkpoint.data = t;
        if (uv_queue_work(t->d->loop, &t->checkpoint, run_checkpoint, on_checkpoint_done) < 0)
                (void)store_checkpoint_end(s, 0);
}

/* The end of a loop turn: replies go out once the records they may report are
 * committed. A batch that no reply waits for stays open up to SBX_RECORD_BATCH_MS. */
static void end_of_turn(struct turn *t) {
        struct sbxd *d = t->d;

        report_lost_records(t);
        if (store_pending(d->store)) {
                if (!conn_replies_held(&t->held) && !d->shutting_down) {
                        if (!uv_is_active((uv_handle_t *)&t->batch))
                                uv_timer_start(&t->batch, on_batch_timer, SBX_RECORD_BATCH_MS, 0);
                        return;
                }
                commit_records(t);
        }
        conn_release_held(&t->held);
        maybe_checkpoint(t);
}

static void on_prepare(uv_prepare_t *h) {
        end_of_turn(h->data);
}

static void on_check(uv_check_t *h) {
        end_of_turn(h->data);
}

void turn_start(struct turn *t, struct sbxd *d) {
        t->d = d;
        t->held = (struct conn_held){0};
        d->held = &t->held;
        /* These initialisations cannot fail: libuv's return 0 for prepare, check and
         * timer handles. */
        uv_prepare_init(d->loop, &t->prepare);
        uv_check_init(d->loop, &t->check);
        uv_timer_init(d->loop, &t->batch);
        t->prepare.data = t->check.data = t->batch.data = t;
        uv_unref((uv_handle_t *)&t->prepare);
        uv_unref((uv_handle_t *)&t->check);
        uv_unref((uv_handle_t *)&t->batch);
        uv_prepare_start(&t->prepare, on_prepare);
        uv_check_start(&t->check, on_check);
        t->started = 1;
}

void turn_flush(struct turn *t) {
        commit_records(t);
        conn_release_held(&t->held);
}

void turn_stop(struct turn *t) {
        if (!t->started)
                return;
        t->started = 0;
        uv_close((uv_handle_t *)&t->prepare, NULL);
        uv_close((uv_handle_t *)&t->check, NULL);
        uv_close((uv_handle_t *)&t->batch, NULL);
}
