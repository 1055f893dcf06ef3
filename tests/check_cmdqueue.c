/* check_cmdqueue.c: unit tests of the waiting commands' order (cmdqueue.h): first come
 * first served for one owner, turns between owners so that a flood does not starve a
 * second client, entries skipped while another bound holds them, and the counts a
 * client is told (ahead). */
#include <stdio.h>
#include <string.h>

#include "cmdqueue.h"
#include "testutil.h"

#define N 64

static struct cmdq_entry e[N];

static int idx(const struct cmdq_entry *x) {
        return x ? (int)(x - e) : -1;
}

/* Takes the next entry (all ready) and returns its index, or -1. */
static int take(struct cmdq *q) {
        struct cmdq_entry *x = cmdq_first(q, NULL, NULL);
        if (x)
                cmdq_take(q, x);
        return idx(x);
}

START_TEST(one_owner_is_fifo) {
        struct cmdq q;
        int i;

        cmdq_init(&q);
        ck_assert_ptr_null(cmdq_first(&q, NULL, NULL));
        for (i = 0; i < 10; i++)
                cmdq_push(&q, &e[i], 7);
        ck_assert_uint_eq(q.n, 10);
        for (i = 0; i < 10; i++)
                ck_assert_uint_eq(cmdq_ahead(&q, &e[i]), (unsigned)i);
        for (i = 0; i < 10; i++)
                ck_assert_int_eq(take(&q), i);
        ck_assert_uint_eq(q.n, 0);
        ck_assert_ptr_null(q.head);
        ck_assert_ptr_null(q.tail);
        ck_assert_int_eq(take(&q), -1);
}
END_TEST

/* A floods 50; B then queues one: B's starts second (after A's first, which was due
 * first), not 51st; its client was told 1 ahead. */
START_TEST(flood_does_not_starve_a_second_owner) {
        struct cmdq q;
        int i;

        cmdq_init(&q);
        for (i = 0; i < 50; i++)
                cmdq_push(&q, &e[i], 1);
        cmdq_push(&q, &e[50], 2);
        ck_assert_uint_eq(cmdq_ahead(&q, &e[50]), 1);
        ck_assert_int_eq(take(&q), 0);
        ck_assert_int_eq(take(&q), 50);
        for (i = 1; i < 50; i++)
                ck_assert_int_eq(take(&q), i);
}
END_TEST

/* Two owners with many each alternate; a third arriving late joins the rotation at
 * once; arrival order breaks ties. */
START_TEST(owners_take_turns) {
        struct cmdq q;
        int order[12], i;
        const int want[12] = {0, 4, 1, 5, 8, 2, 6, 9, 3, 7, 10, 11};

        cmdq_init(&q);
        for (i = 0; i < 4; i++)
                cmdq_push(&q, &e[i], 1); /* A: 0..3 */
        for (i = 4; i < 8; i++)
                cmdq_push(&q, &e[i], 2); /* B: 4..7 */
        order[0] = take(&q);
        order[1] = take(&q);
        for (i = 8; i < 12; i++)
                cmdq_push(&q, &e[i], 3); /* C arrives after two starts: 8..11 */
        for (i = 2; i < 12; i++)
                order[i] = take(&q);
        for (i = 0; i < 12; i++)
                ck_assert_msg(order[i] == want[i], "position %d: entry %d, want %d", i, order[i],
                              want[i]);
}
END_TEST

/* An owner whose entries all started queues again: it is not penalised for the turns
 * it already had, nor does it jump ahead of entries due before. */
START_TEST(turns_follow_the_queue) {
        struct cmdq q;

        cmdq_init(&q);
        cmdq_push(&q, &e[0], 1);
        cmdq_push(&q, &e[1], 2);
        ck_assert_int_eq(take(&q), 0);
        cmdq_push(&q, &e[2], 1); /* turn 2, as B's */
        ck_assert_uint_eq(cmdq_ahead(&q, &e[2]), 1);
        ck_assert_int_eq(take(&q), 1);
        ck_assert_int_eq(take(&q), 2);
}
END_TEST

static int not_owner_1(const struct cmdq_entry *x, void *ud) {
        (void)ud;
        return x->owner != 1;
}

/* Entries another bound holds (their caller's quota) are passed over without losing
 * their place; removal (cancel, timeout) keeps the rest in order. */
START_TEST(ready_and_remove) {
        struct cmdq q;

        cmdq_init(&q);
        cmdq_push(&q, &e[0], 1);
        cmdq_push(&q, &e[1], 1);
        cmdq_push(&q, &e[2], 2);
        cmdq_push(&q, &e[3], 2);
        ck_assert_int_eq(idx(cmdq_first(&q, not_owner_1, NULL)), 2);
        cmdq_remove(&q, &e[2]);
        ck_assert_uint_eq(q.n, 3);
        ck_assert_int_eq(idx(cmdq_first(&q, not_owner_1, NULL)), 3);
        cmdq_remove(&q, &e[0]); /* the head */
        cmdq_remove(&q, &e[3]); /* the tail */
        ck_assert_ptr_eq(q.head, &e[1]);
        ck_assert_ptr_eq(q.tail, &e[1]);
        ck_assert_ptr_null(cmdq_first(&q, not_owner_1, NULL));
        ck_assert_int_eq(take(&q), 1);
        ck_assert_uint_eq(q.n, 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("cmdqueue");
        TCase *tc = tcase_create("order");

        tcase_add_test(tc, one_owner_is_fifo);
        tcase_add_test(tc, flood_does_not_starve_a_second_owner);
        tcase_add_test(tc, owners_take_turns);
        tcase_add_test(tc, turns_follow_the_queue);
        tcase_add_test(tc, ready_and_remove);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
