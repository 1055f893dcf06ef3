/* check_cmdsched.c: unit tests of the command scheduler (cmdsched.h) without a daemon:
 * sandboxes and commands are plain structs of the test, reached through the scheduler's
 * ops as command.c's are. What it proves: a freed slot starts the next waiting command
 * (and only when its sandbox may start one); a uid at its quota is passed over for
 * another uid's command behind it; the sandboxes of a uid take turns for its freed
 * slots in the order they began to wait; connections, not uids, take turns within a
 * queue; the three queue bounds (the sandbox's, the uid's share, the daemon's) refuse
 * naming the bound, and give room back as commands leave; a start that fails at once
 * makes the scheduler look again instead of nesting; every count is back to zero at
 * the end. */
#include <errno.h>
#include <string.h>

#include "cmdsched.h"
#include "config.h"
#include "quota.h"
#include "testutil.h"

#define SBS  3
#define CMDS 16

struct fake_sb {
        struct cmdsched_queue q;
        unsigned max_running, max_queued;
        int open; /* may start a waiting command */
};

struct fake_cmd {
        struct cmdsched_entry e;
        int started;
        int fail_at_start; /* ends as soon as it is started, giving its slot back */
};

static struct cmdsched S;
static struct config cfg;
static struct quota *Q;
static struct fake_sb sb[SBS];
static struct fake_cmd cmd[CMDS];
static int order[CMDS], n_started; /* the commands started, in order */
static int depth, max_depth;       /* how deep the start op is nested */

static const struct fake_sb *sb_of(const struct cmdsched_queue *q) {
        return (const struct fake_sb *)((const char *)q - offsetof(struct fake_sb, q));
}

static unsigned op_max_running(const struct cmdsched_queue *q) {
        return sb_of(q)->max_running;
}

static unsigned op_max_queued(const struct cmdsched_queue *q) {
        return sb_of(q)->max_queued;
}

static int op_may_start(const struct cmdsched_queue *q) {
        return sb_of(q)->open;
}

/* As command.c's start: the command runs in its sandbox (or fails at once, and its
 * end gives the slot back and asks for the next). */
static void op_start(struct cmdsched_entry *e) {
        struct fake_cmd *c = (struct fake_cmd *)((char *)e - offsetof(struct fake_cmd, e));

        ck_assert(S.dispatching);
        if (++depth > max_depth)
                max_depth = depth;
        c->started = 1;
        order[n_started++] = (int)(c - cmd);
        cmdsched_run(e->q, e);
        if (c->fail_at_start && cmdsched_leave(&S, e))
                cmdsched_slot_freed(&S);
        depth--;
}

static const struct cmdsched_ops ops = {
        .max_running = op_max_running,
        .max_queued = op_max_queued,
        .may_start = op_may_start,
        .start = op_start,
};

static void setup(void) {
        static const char *names[SBS] = {"s0", "s1", "s2"};
        int i;

        memset(&cfg, 0, sizeof(cfg));
        cfg.max_commands_per_uid = 100;
        cfg.max_queued_per_uid = 100;
        cfg.max_queued_total = 100;
        ck_assert_int_eq(quota_new(&Q), 0);
        cmdsched_init(&S, &ops, Q, &cfg);
        memset(sb, 0, sizeof(sb));
        memset(cmd, 0, sizeof(cmd));
        for (i = 0; i < SBS; i++) {
                cmdsched_queue_init(&sb[i].q, names[i]);
                sb[i].max_running = 1;
                sb[i].max_queued = 8;
                sb[i].open = 1;
        }
        n_started = depth = max_depth = 0;
}

static void teardown(void) {
        Q = quota_free(Q);
}

/* Command i of uid runs in sandbox s now, or fails the test. */
static void run_now(int i, int s, uid_t uid) {
        char err[256] = "";

        cmd[i].e.uid = uid;
        ck_assert_msg(cmdsched_take_slot(&S, &sb[s].q, uid, err, sizeof(err)) == 0, "%s", err);
        cmdsched_run(&sb[s].q, &cmd[i].e);
        cmd[i].started = 1;
}

/* Command i of uid, from connection owner, waits in sandbox s: returns
 * cmdsched_queue_room's answer (0: it waits), with its reason in err. */
static int wait_in(int i, int s, uid_t uid, uint64_t owner, char *err, size_t errlen) {
        int r = cmdsched_queue_room(&S, &sb[s].q, uid, err, errlen);

        if (r == 0) {
                cmd[i].e.uid = uid;
                cmdsched_enqueue(&S, &sb[s].q, &cmd[i].e, owner);
        }
        return r;
}

static void must_wait(int i, int s, uid_t uid, uint64_t owner) {
        char err[256] = "";
        ck_assert_msg(wait_in(i, s, uid, owner, err, sizeof(err)) == 0, "%s", err);
        ck_assert(cmd[i].e.queued);
}

/* Command i ends: its slot (or place) is given back, and the next may start. */
static void end(int i) {
        if (cmdsched_leave(&S, &cmd[i].e))
                cmdsched_slot_freed(&S);
}

/* Nothing is counted any more: every queue, slot and quota is back to zero. */
static void all_clear(void) {
        int i;

        ck_assert_uint_eq(S.n_queued, 0);
        ck_assert_ptr_null(S.waiting);
        ck_assert(!S.dispatching);
        for (i = 0; i < SBS; i++) {
                ck_assert_uint_eq(sb[i].q.n_running, 0);
                ck_assert_uint_eq(sb[i].q.n_queued, 0);
                ck_assert_ptr_null(sb[i].q.queue.head);
        }
        for (uid_t u = 1000; u < 1004; u++) {
                ck_assert_uint_eq(quota_count(Q, QUOTA_COMMANDS, u), 0);
                ck_assert_uint_eq(quota_count(Q, QUOTA_QUEUED, u), 0);
        }
}

/* Sandbox 0 runs one command at once: the next two wait, each starting when the one
 * before it ends, in the order they came; counts follow. */
START_TEST(a_freed_slot_starts_the_next) {
        char err[256];

        run_now(0, 0, 1000);
        ck_assert_int_eq(cmdsched_take_slot(&S, &sb[0].q, 1000, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "sandbox 's0' already runs 1 commands"));
        must_wait(1, 0, 1000, 7);
        must_wait(2, 0, 1000, 7);
        ck_assert_uint_eq(cmdsched_ahead(&cmd[1].e), 0);
        ck_assert_uint_eq(cmdsched_ahead(&cmd[2].e), 1);
        ck_assert_uint_eq(sb[0].q.n_queued, 2);
        ck_assert_uint_eq(S.n_queued, 2);
        ck_assert_ptr_eq(S.waiting, &sb[0].q);
        ck_assert_uint_eq(quota_count(Q, QUOTA_QUEUED, 1000), 2);
        ck_assert_uint_eq(quota_count(Q, QUOTA_COMMANDS, 1000), 1);

        end(0);
        ck_assert_int_eq(n_started, 1);
        ck_assert_int_eq(order[0], 1);
        ck_assert(!cmd[1].e.queued && cmd[1].e.holds_slot);
        ck_assert_uint_eq(sb[0].q.n_running, 1);
        ck_assert_uint_eq(sb[0].q.n_queued, 1);
        ck_assert_uint_eq(quota_count(Q, QUOTA_COMMANDS, 1000), 1);
        ck_assert_uint_eq(quota_count(Q, QUOTA_QUEUED, 1000), 1);
        ck_assert(!cmd[2].started);

        end(1);
        ck_assert_int_eq(n_started, 2);
        ck_assert_int_eq(order[1], 2);
        ck_assert_ptr_null(S.waiting);
        end(2);
        ck_assert_int_eq(n_started, 2);
        ck_assert_int_eq(max_depth, 1);
        all_clear();
}
END_TEST

/* A slot freed in a sandbox that may not start a command (not ready, ending, the daemon
 * stopping) starts nothing there; another sandbox's waiting command still gets a freed
 * slot of its uid. */
START_TEST(a_closed_sandbox_is_passed_over) {
        cfg.max_commands_per_uid = 1;
        run_now(0, 2, 1000);
        sb[0].max_running = 4;
        sb[1].max_running = 4;
        must_wait(1, 0, 1000, 1); /* waits for uid 1000's quota */
        must_wait(2, 1, 1000, 1);
        sb[0].open = 0;
        end(0);
        ck_assert_int_eq(n_started, 1);
        ck_assert_int_eq(order[0], 2);
        ck_assert(cmd[1].e.queued);
        /* Opened, it starts at the next freed slot. */
        sb[0].open = 1;
        end(2);
        ck_assert_int_eq(n_started, 2);
        ck_assert_int_eq(order[1], 1);
        end(1);
        all_clear();
}
END_TEST

/* The uid quota (--max-commands-per-uid) over every sandbox: taking a slot past it is
 * -EAGAIN naming the flag; in a queue, a command of a uid at its quota is passed over
 * for another uid's behind it, and starts at the first slot of its sandbox that frees
 * once its uid has room again. */
START_TEST(a_uid_at_its_quota_is_passed_over) {
        char err[256];

        cfg.max_commands_per_uid = 1;
        sb[0].max_running = 2;
        run_now(0, 1, 1000); /* uid 1000's one command, elsewhere */
        ck_assert_int_eq(cmdsched_take_slot(&S, &sb[0].q, 1000, err, sizeof(err)), -EAGAIN);
        ck_assert_ptr_nonnull(strstr(err, "uid 1000 already runs 1 commands"));
        ck_assert_ptr_nonnull(strstr(err, "--max-commands-per-uid"));
        run_now(1, 0, 1001);
        run_now(5, 0, 1003);      /* sandbox 0 is full */
        must_wait(2, 0, 1000, 1); /* first in line, its uid at its quota */
        must_wait(3, 0, 1001, 2);
        must_wait(4, 0, 1002, 3);
        /* A slot of sandbox 0 freed: uid 1000 is at its quota, uid 1001's goes first. */
        end(1);
        ck_assert_int_eq(n_started, 1);
        ck_assert_int_eq(order[0], 3);
        ck_assert(cmd[2].e.queued);
        /* Uid 1000's slot freed, but sandbox 0 is full: nothing starts. */
        end(0);
        ck_assert_int_eq(n_started, 1);
        /* Sandbox 0's next slot: uid 1000's command, first in line, before uid 1002's. */
        end(5);
        ck_assert_int_eq(n_started, 2);
        ck_assert_int_eq(order[1], 2);
        ck_assert_uint_eq(sb[0].q.n_running, 2);
        end(3);
        ck_assert_int_eq(order[2], 4);
        end(2);
        end(4);
        all_clear();
}
END_TEST

/* Uid 1000 may run one command; its commands wait in sandboxes 0 (two, waiting first)
 * and 1 (one). Each of its freed slots goes to the sandbox that has waited longest, a
 * sandbox just served going to the back: 0, then 1, then 0, not 0, 0, 1. */
START_TEST(a_uids_sandboxes_take_turns) {
        cfg.max_commands_per_uid = 1;
        sb[0].max_running = sb[1].max_running = 4;
        run_now(0, 2, 1000);
        must_wait(1, 0, 1000, 1);
        must_wait(2, 0, 1000, 1);
        must_wait(3, 1, 1000, 2);
        end(0);
        ck_assert_int_eq(n_started, 1);
        ck_assert_int_eq(order[0], 1);
        end(1);
        ck_assert_int_eq(n_started, 2);
        ck_assert_int_eq(order[1], 3);
        end(3);
        ck_assert_int_eq(n_started, 3);
        ck_assert_int_eq(order[2], 2);
        end(2);
        all_clear();
}
END_TEST

/* Within one queue the connections that queued take turns (cmdqueue.h): connection 1
 * queues three, connection 2 one after them; connection 2's is the second to start. */
START_TEST(connections_take_turns_in_a_queue) {
        int i;

        run_now(0, 0, 1000);
        for (i = 1; i <= 3; i++)
                must_wait(i, 0, 1000, 1);
        must_wait(4, 0, 1001, 2);
        ck_assert_uint_eq(cmdsched_ahead(&cmd[4].e), 1);
        for (i = 0; i <= 4; i++)
                end(i == 0 ? 0 : order[i - 1]);
        ck_assert_int_eq(n_started, 4);
        ck_assert_int_eq(order[0], 1);
        ck_assert_int_eq(order[1], 4);
        ck_assert_int_eq(order[2], 2);
        ck_assert_int_eq(order[3], 3);
        all_clear();
}
END_TEST

/* Turns in a queue are the connections', not the uids': uid 1000 queues from two
 * connections, uid 1001 from one, all after a flood of connection 1; each connection
 * gets its turn, so uid 1000 gets two of the first three starts after the flood's
 * first. (Uids are bounded by their quota and their share of the queue instead.) */
START_TEST(turns_are_per_connection_not_per_uid) {
        int i;

        run_now(0, 0, 1000);
        for (i = 1; i <= 3; i++)
                must_wait(i, 0, 1000, 1);
        must_wait(4, 0, 1000, 2);
        must_wait(5, 0, 1001, 3);
        ck_assert_uint_eq(cmdsched_ahead(&cmd[5].e), 2);
        end(0);
        for (i = 1; i < 6; i++)
                end(order[i - 1]);
        ck_assert_int_eq(n_started, 5);
        ck_assert_int_eq(order[0], 1);
        ck_assert_int_eq(order[1], 4);
        ck_assert_int_eq(order[2], 5);
        ck_assert_int_eq(order[3], 2);
        ck_assert_int_eq(order[4], 3);
        all_clear();
}
END_TEST

/* The three bounds of waiting commands, each refused with the bound named, and each
 * giving room back as a command leaves: the sandbox's queue (--max-queued), a uid's
 * share over every sandbox (--max-queued-per-uid), the daemon's (--max-queued-total). */
START_TEST(queue_bounds) {
        char err[256];
        int i;

        for (i = 0; i < SBS; i++)
                run_now(i, i, 1000); /* every sandbox full: the rest waits */
        /* The sandbox's: 2 in sandbox 0. */
        sb[0].max_queued = 2;
        must_wait(3, 0, 1001, 1);
        must_wait(4, 0, 1001, 1);
        ck_assert_int_eq(wait_in(5, 0, 1002, 2, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "sandbox 's0' already has 2 commands waiting"));
        ck_assert_ptr_nonnull(strstr(err, "--max-queued)"));
        ck_assert(!cmd[5].e.queued);

        /* A uid's share: 3, over sandboxes 0 and 1; another uid still waits. */
        cfg.max_queued_per_uid = 3;
        must_wait(5, 1, 1001, 1);
        ck_assert_int_eq(wait_in(6, 1, 1001, 1, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "uid 1001 already has 3 commands waiting"));
        ck_assert_ptr_nonnull(strstr(err, "--max-queued-per-uid"));
        must_wait(6, 1, 1002, 2);

        /* The daemon's: 5 in all (4 wait now), whoever asks. */
        cfg.max_queued_total = 5;
        must_wait(7, 2, 1003, 3);
        ck_assert_uint_eq(S.n_queued, 5);
        ck_assert_int_eq(wait_in(8, 2, 1002, 2, err, sizeof(err)), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "the daemon already has 5 commands waiting"));
        ck_assert_ptr_nonnull(strstr(err, "--max-queued-total"));

        /* One that leaves without starting (cancelled, timed out) gives its place back:
         * uid 1001 may wait again, and so may the daemon. */
        ck_assert_int_eq(cmdsched_leave(&S, &cmd[4].e), 0);
        ck_assert(!cmd[4].e.queued);
        ck_assert_uint_eq(S.n_queued, 4);
        ck_assert_uint_eq(quota_count(Q, QUOTA_QUEUED, 1001), 2);
        ck_assert_int_eq(n_started, 0);
        must_wait(8, 2, 1001, 1);

        for (i = 0; i < SBS; i++)
                end(i);
        for (i = 3; i <= 8; i++)
                end(i);
        all_clear();
}
END_TEST

/* A command that fails as soon as it is started gives its slot back from within the
 * start: the scheduler does not nest, it looks again, and the next waiting command
 * starts in the same call. */
START_TEST(a_start_that_fails_looks_again) {
        run_now(0, 0, 1000);
        must_wait(1, 0, 1000, 1);
        must_wait(2, 0, 1000, 1);
        must_wait(3, 0, 1000, 1);
        cmd[1].fail_at_start = cmd[2].fail_at_start = 1;
        end(0);
        ck_assert_int_eq(n_started, 3);
        ck_assert_int_eq(order[0], 1);
        ck_assert_int_eq(order[1], 2);
        ck_assert_int_eq(order[2], 3);
        ck_assert_int_eq(max_depth, 1);
        ck_assert(cmd[3].e.holds_slot);
        ck_assert_uint_eq(sb[0].q.n_running, 1);
        end(3);
        all_clear();
}
END_TEST

/* A slot taken for a command that never came to be is given back. */
START_TEST(an_unused_slot_is_given_back) {
        char err[256];

        cfg.max_commands_per_uid = 1;
        ck_assert_int_eq(cmdsched_take_slot(&S, &sb[0].q, 1000, err, sizeof(err)), 0);
        ck_assert_int_eq(cmdsched_take_slot(&S, &sb[1].q, 1000, err, sizeof(err)), -EAGAIN);
        cmdsched_untake(&S, 1000);
        ck_assert_uint_eq(sb[0].q.n_running, 0);
        run_now(0, 1, 1000);
        end(0);
        all_clear();
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("cmdsched");
        TCase *tc = tcase_create("cmdsched");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, a_freed_slot_starts_the_next);
        tcase_add_test(tc, a_closed_sandbox_is_passed_over);
        tcase_add_test(tc, a_uid_at_its_quota_is_passed_over);
        tcase_add_test(tc, a_uids_sandboxes_take_turns);
        tcase_add_test(tc, connections_take_turns_in_a_queue);
        tcase_add_test(tc, turns_are_per_connection_not_per_uid);
        tcase_add_test(tc, queue_bounds);
        tcase_add_test(tc, a_start_that_fails_looks_again);
        tcase_add_test(tc, an_unused_slot_is_given_back);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
