/* check_uidslot.c: the Check suite of daemon/uidslot.c, the sandbox uids of a root
 * daemon's range: slots from the range's base, each its first owner's for good
 * (recorded in the store), and the span of uids the records bind (which decides the
 * range at start-up, uidrange.h).
 *
 * Each test has a store of its own in the fixture's temporary directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_limits.h"
#include "store.h"
#include "testutil.h"
#include "uidslot.h"

#define BASE 3000000000u

static char tmpdir[64];

static void tmpdir_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_uidslot");
}

static void tmpdir_teardown(void) {
        test_dir_remove(tmpdir);
}

static struct store *open_store(void) {
        char path[128];
        struct store *st = NULL;

        snprintf(path, sizeof(path), "%s/sbxd.db", tmpdir);
        ck_assert_int_eq(store_open(path, &st), 0);
        return st;
}

struct binding {
        uint32_t run_uid;
        int64_t owner;
};

struct bindings {
        struct binding v[16];
        int n;
};

static int collect(uint32_t run_uid, int64_t owner, void *ud) {
        struct bindings *b = ud;

        if (b->n < 16)
                b->v[b->n++] = (struct binding){run_uid, owner};
        return 0;
}

static int alloc(struct uidslots *u, struct store *st, uid_t owner) {
        char err[256];
        int slot = uidslot_alloc(u, st, owner, err, sizeof(err));

        ck_assert_msg(slot >= 0, "alloc for %u: %s", (unsigned)owner, err);
        return slot;
}

/* Slots are uids from the base, and the store records the uid itself. */
START_TEST(slots_are_uids_from_the_base) {
        struct store *st = open_store();
        struct uidslots *u = NULL;
        struct bindings b = {.n = 0};
        int slot;

        ck_assert_int_eq(uidslot_new(BASE, &u), 0);
        ck_assert_int_eq(uidslot_any_given(u), 0);
        slot = alloc(u, st, 1000);
        ck_assert_int_eq(slot, 0);
        ck_assert_uint_eq(uidslot_uid(u, (unsigned)slot), BASE);
        ck_assert_int_eq(uidslot_any_given(u), 1);
        ck_assert_int_eq(store_uid_owners(st, collect, &b), 0);
        ck_assert_int_eq(b.n, 1);
        ck_assert_uint_eq(b.v[0].run_uid, BASE);
        ck_assert_int_eq(b.v[0].owner, 1000);
        ck_assert_int_eq(uidslot_slot_of(u, BASE), 0);
        ck_assert_int_eq(uidslot_slot_of(u, BASE + SBX_UID_COUNT - 1), SBX_UID_COUNT - 1);
        ck_assert_int_eq(uidslot_slot_of(u, BASE - 1), -1);
        ck_assert_int_eq(uidslot_slot_of(u, BASE + SBX_UID_COUNT), -1);
        ck_assert_int_eq(uidslot_slot_of(u, SBX_UID_BASE), -1);
        uidslot_free(u);
        store_close(st);
}
END_TEST

/* A uid stays its first owner's: another owner gets another, the first gets it back. */
START_TEST(a_uid_serves_one_owner) {
        struct store *st = open_store();
        struct uidslots *u = NULL;
        int a, b;

        ck_assert_int_eq(uidslot_new(BASE, &u), 0);
        a = alloc(u, st, 1000);
        uidslot_release(u, a);
        b = alloc(u, st, 1001);
        ck_assert_int_ne(a, b);
        uidslot_release(u, b);
        ck_assert_int_eq(alloc(u, st, 1000), a);
        ck_assert_int_eq(alloc(u, st, 1001), b);
        /* Both in use: a third sandbox of 1000's takes a fresh one. */
        ck_assert_int_eq(alloc(u, st, 1000), 2);
        uidslot_free(u);
        store_close(st);
}
END_TEST

/* The owners loaded at start-up are those of the range's uids only; the span counts
 * every binding, whatever its range. */
START_TEST(load_reads_the_range_span_reads_all) {
        struct store *st = open_store();
        struct uidslots *u = NULL;
        uint32_t lo = 1, hi = 1;

        ck_assert_int_eq(uidslot_bound_span(st, &lo, &hi), 0);
        ck_assert_uint_eq(lo, 0);
        ck_assert_uint_eq(hi, 0);
        ck_assert_int_eq(store_uid_bind(st, BASE + 5, 1000), 0);
        ck_assert_int_eq(store_uid_bind(st, SBX_UID_BASE + 7, 1001), 0);
        ck_assert_int_eq(store_uid_bind(st, BASE + 9, 1002), 0);
        ck_assert_int_eq(uidslot_bound_span(st, &lo, &hi), 0);
        ck_assert_uint_eq(lo, SBX_UID_BASE + 7);
        ck_assert_uint_eq(hi, BASE + 9);
        ck_assert_int_eq(uidslot_new(BASE, &u), 0);
        ck_assert_int_eq(uidslot_load(u, st), 0);
        ck_assert_int_eq(uidslot_any_given(u), 1);
        ck_assert_int_eq(alloc(u, st, 1000), 5);
        ck_assert_int_eq(alloc(u, st, 1002), 9);
        /* 1001's uid is another range's: here it gets a fresh one. */
        ck_assert_int_eq(alloc(u, st, 1001), 0);
        uidslot_free(u);
        store_close(st);
}
END_TEST

/* An adopted sandbox's slot is taken: allocations pass it by; releasing no slot (-1)
 * changes nothing. */
START_TEST(taken_slots_are_skipped) {
        struct store *st = open_store();
        struct uidslots *u = NULL;

        ck_assert_int_eq(uidslot_new(BASE, &u), 0);
        uidslot_take(u, 0);
        ck_assert_int_eq(uidslot_any_given(u), 1);
        ck_assert_int_eq(alloc(u, st, 1000), 1);
        uidslot_release(u, -1); /* none: no effect */
        ck_assert_int_eq(alloc(u, st, 1000), 2);
        uidslot_free(u);
        ck_assert_ptr_null(uidslot_free(NULL));
        store_close(st);
}
END_TEST

/* When every slot is in use, or belongs to other owners, an allocation fails with
 * -EAGAIN and says why; a slot given back serves its owner again, and nobody else. */
START_TEST(no_slot_left_is_eagain) {
        struct store *st = open_store();
        struct uidslots *u = NULL;
        char err[256] = "";
        unsigned i;
        int mine;

        ck_assert_int_eq(uidslot_new(BASE, &u), 0);
        for (i = 0; i < SBX_UID_COUNT; i++)
                uidslot_take(u, i);
        ck_assert_int_eq(uidslot_alloc(u, st, 1000, err, sizeof(err)), -EAGAIN);
        ck_assert_msg(strstr(err, "no sandbox uid is left for uid 1000"), "%s", err);
        uidslot_release(u, 77);
        mine = alloc(u, st, 1000);
        ck_assert_int_eq(mine, 77);
        uidslot_release(u, mine);
        ck_assert_int_eq(uidslot_alloc(u, st, 1001, err, sizeof(err)), -EAGAIN);
        ck_assert_int_eq(alloc(u, st, 1000), 77);
        uidslot_free(u);
        store_close(st);
}
END_TEST

/* A binding the store refuses (here: the uid is recorded already, for an owner this
 * table was never told of) fails the allocation with -EIO, and gives nothing away: the
 * slot stays free and unowned. */
START_TEST(a_binding_not_recorded_is_eio) {
        struct store *st = open_store();
        struct uidslots *u = NULL;
        char err[256] = "";

        ck_assert_int_eq(store_uid_bind(st, BASE, 2000), 0);
        ck_assert_int_eq(uidslot_new(BASE, &u), 0); /* not loaded */
        ck_assert_int_eq(uidslot_alloc(u, st, 1000, err, sizeof(err)), -EIO);
        ck_assert_msg(strstr(err, "cannot record the owner of sandbox uid 3000000000"), "%s",
                      err);
        ck_assert_int_eq(uidslot_any_given(u), 0);
        ck_assert_int_eq(uidslot_alloc(u, st, 1000, err, sizeof(err)), -EIO);
        uidslot_free(u);
        store_close(st);
}
END_TEST

/* Each test in a test case of its own: its own temporary directory. */
#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 30, tmpdir_setup, tmpdir_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("uidslot");

        ADD_TEST(s, slots_are_uids_from_the_base);
        ADD_TEST(s, a_uid_serves_one_owner);
        ADD_TEST(s, load_reads_the_range_span_reads_all);
        ADD_TEST(s, taken_slots_are_skipped);
        ADD_TEST(s, no_slot_left_is_eagain);
        ADD_TEST(s, a_binding_not_recorded_is_eio);
        return s;
}

SBX_TEST_MAIN(make_suite)
