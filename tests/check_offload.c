/* check_offload.c: unit tests of the work the daemon does off its loop (offload.c), on a
 * loop of the test's own with jobs whose work waits until the test lets it go.
 *
 * What is proved: the bounds (SBX_OFFLOAD_MAX_RUNNING over all uids,
 * SBX_OFFLOAD_MAX_RUNNING_PER_UID and SBX_OFFLOAD_MAX_QUEUED_PER_UID of one) hold at
 * every moment, and past the queue a submission is refused and nothing of it is called;
 * the uids with waiting jobs take turns; a cancelled job, waiting or running, has its
 * work called once (seeing itself cancelled) and its done callback afterwards, never
 * from inside the cancel; a job whose wanted callback says 0 is cancelled; a done
 * callback may submit again; and once every job is done nothing is left: the state is
 * freed and the loop closes cleanly. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "offload.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "testutil.h"

#define MAX_JOBS 64

struct tjob {
        struct offload_job job;
        uid_t uid;
        atomic_int release;    /* the work may return */
        atomic_int started;    /* the work was called */
        atomic_int saw_cancel; /* the work saw itself cancelled */
        int start_seq;         /* order of the work's start, from 1 */
        int done;              /* times done was called */
        int wanted;            /* what wanted answers */
        int resubmit;          /* done submits this job again, once */
};

static uv_loop_t L;
static struct sbxd D;
static struct tjob J[MAX_JOBS];
static atomic_int start_counter;
static int in_cancel;
static int done_inside_cancel;

static struct tjob *tjob_of(struct offload_job *job) {
        return (struct tjob *)((char *)job - offsetof(struct tjob, job));
}

static void work(struct offload_job *job) {
        struct tjob *t = tjob_of(job);

        t->start_seq = atomic_fetch_add(&start_counter, 1) + 1;
        atomic_store(&t->started, 1);
        while (!atomic_load(&t->release) && !offload_cancelled(job))
                usleep(500);
        if (offload_cancelled(job))
                atomic_store(&t->saw_cancel, 1);
}

static void done_cb(struct offload_job *job);

static int wanted(struct offload_job *job) {
        return tjob_of(job)->wanted;
}

static void done_cb(struct offload_job *job) {
        struct tjob *t = tjob_of(job);

        t->done++;
        if (in_cancel)
                done_inside_cancel = 1;
        if (t->resubmit) {
                t->resubmit = 0;
                atomic_store(&t->started, 0);
                ck_assert_int_eq(offload_submit(&D, job, t->uid, work, done_cb, wanted), 0);
        }
}

static void setup(void) {
        memset(&D, 0, sizeof(D));
        memset(J, 0, sizeof(J));
        atomic_store(&start_counter, 0);
        ck_assert_int_eq(uv_loop_init(&L), 0);
        D.loop = &L;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until pred() (checked after each turn) or 10 s. */
static int run_until(int (*pred)(void)) {
        int64_t end = now_ms() + 10000;

        while (now_ms() < end) {
                uv_run(&L, UV_RUN_NOWAIT);
                if (pred())
                        return 1;
                usleep(200);
        }
        return 0;
}

static int n_started(void) {
        int i, n = 0;
        for (i = 0; i < MAX_JOBS; i++)
                n += atomic_load(&J[i].started);
        return n;
}

static int want_started;
static int started_enough(void) {
        return n_started() >= want_started;
}

static int want_done;
static int done_enough(void) {
        int i, n = 0;
        for (i = 0; i < MAX_JOBS; i++)
                n += J[i].done;
        return n >= want_done;
}

static int nothing_left(void) {
        return D.offload == NULL && !uv_loop_alive(&L);
}

/* Lets every job go, waits for every done, and proves nothing is left. */
static void finish(int total_done) {
        int i;

        for (i = 0; i < MAX_JOBS; i++)
                atomic_store(&J[i].release, 1);
        want_done = total_done;
        ck_assert(run_until(done_enough));
        ck_assert(run_until(nothing_left));
        ck_assert_ptr_null(D.offload);
        ck_assert_int_eq(uv_loop_close(&L), 0);
}

static void submit(int i, uid_t uid) {
        J[i].uid = uid;
        J[i].wanted = 1;
        ck_assert_int_eq(offload_submit(&D, &J[i].job, uid, work, done_cb, wanted), 0);
}

static void counts(uid_t uid, unsigned *run, unsigned *wait, unsigned *urun, unsigned *uwait) {
        offload_counts(&D, uid, run, wait, urun, uwait);
}

/* Waits until n works have started, then a while more: exactly n have. */
static void expect_started(unsigned n) {
        want_started = (int)n;
        ck_assert(run_until(started_enough));
        usleep(20000);
        uv_run(&L, UV_RUN_NOWAIT);
        ck_assert_int_eq(n_started(), n);
}

/* The running bounds, per uid and over all, and the queue bound of one uid. */
START_TEST(bounds_hold) {
        unsigned run, wait, urun, uwait, i;
        struct tjob extra;

        setup();
        for (i = 0; i < 6; i++)
                submit((int)i, 1000);
        expect_started(SBX_OFFLOAD_MAX_RUNNING_PER_UID);
        counts(1000, &run, &wait, &urun, &uwait);
        ck_assert_uint_eq(urun, SBX_OFFLOAD_MAX_RUNNING_PER_UID);
        ck_assert_uint_eq(uwait, 6 - SBX_OFFLOAD_MAX_RUNNING_PER_UID);
        /* Other uids fill the rest of the global bound, and no more. */
        for (i = 6; i < 12; i++)
                submit((int)i, 1001 + (i - 6) % 3);
        expect_started(SBX_OFFLOAD_MAX_RUNNING);
        counts(1000, &run, &wait, &urun, &uwait);
        ck_assert_uint_eq(run, SBX_OFFLOAD_MAX_RUNNING);
        ck_assert_uint_eq(wait, 12 - SBX_OFFLOAD_MAX_RUNNING);
        /* Uid 1000's queue fills up to its bound; the next is refused, untouched. */
        for (i = 12;
             i < 12 + SBX_OFFLOAD_MAX_QUEUED_PER_UID - (6 - SBX_OFFLOAD_MAX_RUNNING_PER_UID); i++)
                submit((int)i, 1000);
        counts(1000, NULL, NULL, &urun, &uwait);
        ck_assert_uint_eq(uwait, SBX_OFFLOAD_MAX_QUEUED_PER_UID);
        memset(&extra, 0, sizeof(extra));
        ck_assert_int_eq(offload_submit(&D, &extra.job, 1000, work, done_cb, wanted), -EAGAIN);
        /* Another uid is not held back by it. */
        submit(MAX_JOBS - 1, 2000);
        counts(2000, NULL, NULL, &urun, &uwait);
        ck_assert_uint_eq(uwait, 1);
        /* As jobs end, the bounds hold at every step. */
        for (i = 0; i < 40; i++) {
                int k;
                for (k = 0; k < MAX_JOBS; k++)
                        if (atomic_load(&J[k].started) && !atomic_load(&J[k].release)) {
                                atomic_store(&J[k].release, 1);
                                break;
                        }
                uv_run(&L, UV_RUN_NOWAIT);
                usleep(2000);
                uv_run(&L, UV_RUN_NOWAIT);
                counts(1000, &run, &wait, &urun, &uwait);
                ck_assert_uint_le(run, SBX_OFFLOAD_MAX_RUNNING);
                ck_assert_uint_le(urun, SBX_OFFLOAD_MAX_RUNNING_PER_UID);
        }
        ck_assert(!atomic_load(&extra.started));
        ck_assert_int_eq(extra.done, 0);
        finish(12 + (int)SBX_OFFLOAD_MAX_QUEUED_PER_UID -
               (6 - (int)SBX_OFFLOAD_MAX_RUNNING_PER_UID) + 1);
}
END_TEST

/* Uids with waiting jobs take turns, the one served least recently first: a uid with
 * many jobs queued first does not keep one that came after it waiting behind them all. */
START_TEST(uids_take_turns) {
        int i;

        setup();
        /* Uid 1 takes every thread it may and queues 10 more; uid 2 fills the global
         * bound; then uid 4 queues 2 jobs, after all of uid 1's. */
        for (i = 0; i < 12; i++)
                submit(i, 1);
        submit(12, 2);
        submit(13, 2);
        want_started = (int)SBX_OFFLOAD_MAX_RUNNING;
        ck_assert(run_until(started_enough));
        submit(14, 4);
        submit(15, 4);
        /* One of uid 1's ends: uid 4, never served, takes the free thread. */
        atomic_store(&J[0].release, 1);
        want_started = (int)SBX_OFFLOAD_MAX_RUNNING + 1;
        ck_assert(run_until(started_enough));
        ck_assert(atomic_load(&J[14].started));
        ck_assert(!atomic_load(&J[2].started));
        /* Uid 1's other one ends: now it is uid 1's turn, though uid 4 may run one more. */
        atomic_store(&J[1].release, 1);
        want_started = (int)SBX_OFFLOAD_MAX_RUNNING + 2;
        ck_assert(run_until(started_enough));
        ck_assert(atomic_load(&J[2].started));
        ck_assert(!atomic_load(&J[15].started));
        /* One of uid 2's ends: uid 4's turn again, before uid 1's next. */
        atomic_store(&J[12].release, 1);
        want_started = (int)SBX_OFFLOAD_MAX_RUNNING + 3;
        ck_assert(run_until(started_enough));
        ck_assert(atomic_load(&J[15].started));
        ck_assert(!atomic_load(&J[3].started));
        finish(16);
}
END_TEST

/* A waiting job that is cancelled runs at once (its work sees the cancel) beside the
 * bounds; a running one stops; neither's done is called from inside offload_cancel. */
START_TEST(cancel_waiting_and_running) {
        int i;

        setup();
        for (i = 0; i < 4; i++)
                submit(i, 7);
        want_started = (int)SBX_OFFLOAD_MAX_RUNNING_PER_UID;
        ck_assert(run_until(started_enough));
        in_cancel = 1;
        offload_cancel(&J[3].job); /* waiting */
        offload_cancel(&J[0].job); /* running */
        offload_cancel(&J[0].job); /* idempotent */
        in_cancel = 0;
        ck_assert_int_eq(J[3].done + J[0].done, 0);
        want_done = 2;
        ck_assert(run_until(done_enough));
        ck_assert_int_eq(J[0].done, 1);
        ck_assert_int_eq(J[3].done, 1);
        ck_assert(atomic_load(&J[0].saw_cancel));
        ck_assert(atomic_load(&J[3].started));
        ck_assert(atomic_load(&J[3].saw_cancel));
        ck_assert(!done_inside_cancel);
        /* The freed place goes to the job that waited (J[2]), not the cancelled one. */
        want_started = 4;
        ck_assert(run_until(started_enough));
        ck_assert(atomic_load(&J[2].started));
        ck_assert(!atomic_load(&J[2].saw_cancel));
        finish(4);
        ck_assert_int_eq(J[1].done, 1);
        ck_assert_int_eq(J[2].done, 1);
}
END_TEST

/* A job whose wanted callback says 0 is cancelled within a few checks, waiting or
 * running; the others are left alone. */
START_TEST(unwanted_jobs_cancelled) {
        int64_t t0;
        int i;

        setup();
        for (i = 0; i < 3; i++)
                submit(i, 9);
        want_started = 2;
        ck_assert(run_until(started_enough));
        t0 = now_ms();
        J[0].wanted = 0; /* running */
        J[2].wanted = 0; /* waiting */
        want_done = 2;
        ck_assert(run_until(done_enough));
        ck_assert_int_lt(now_ms() - t0, 50 * SBX_OFFLOAD_CHECK_MS);
        ck_assert(atomic_load(&J[0].saw_cancel));
        ck_assert(atomic_load(&J[2].saw_cancel));
        ck_assert_int_eq(J[1].done, 0);
        ck_assert(!atomic_load(&J[1].saw_cancel));
        finish(3);
        ck_assert(!atomic_load(&J[1].saw_cancel));
}
END_TEST

/* A done callback may submit again; the state survives it, and goes after the last. */
START_TEST(done_may_submit) {
        setup();
        J[0].resubmit = 1;
        submit(0, 5);
        atomic_store(&J[0].release, 1);
        want_done = 2;
        ck_assert(run_until(done_enough));
        ck_assert(run_until(nothing_left));
        ck_assert_int_eq(J[0].done, 2);
        ck_assert_int_eq(uv_loop_close(&L), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("offload");
        TCase *tc = tcase_create("offload");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, bounds_hold);
        tcase_add_test(tc, uids_take_turns);
        tcase_add_test(tc, cancel_waiting_and_running);
        tcase_add_test(tc, unwanted_jobs_cancelled);
        tcase_add_test(tc, done_may_submit);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
