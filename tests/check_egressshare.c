/* check_egressshare.c: what the allowlist proxies share (daemon/egressshare.c): the
 * bounds derived from the open-file limit, libuv's thread pool and the flags; the
 * descriptor budgets of a uid and of all, with their refusals naming the bound and
 * logged once per run; and the turns of name lookups: at most the slow threads in all,
 * a uid's share each, in order across a uid's sandboxes, the next turn to the uid with
 * the fewest under way, cancelled waits and starts that fail. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressshare.h"
#include "quota.h"
#include "testutil.h"

START_TEST(bounds_from_the_open_file_limit) {
        static const struct {
                uint64_t nofile, reserve, fds, per_uid;
        } want[] = {
                {1048576, 262144, 786432, 196608}, /* sbxd.service's LimitNOFILE */
                {20000, 5000, 15000, 3750},        /* a quarter, above 1024 */
                {4096, 1024, 3072, 768},           /* the quarter is 1024 */
                {2048, 1024, 1024, 256},           /* at least 1024 */
                {1024, 512, 512, 128},             /* a small limit: half */
                {256, 128, 128, 32},
        };
        struct egressshare_bounds b;

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                egressshare_derive(want[i].nofile, 16, 0, 0, &b);
                ck_assert_uint_eq(b.nofile, want[i].nofile);
                ck_assert_uint_eq(b.fds_reserve, want[i].reserve);
                ck_assert_uint_eq(b.fds, want[i].fds);
                ck_assert_uint_eq(b.fds_per_uid, want[i].per_uid);
        }
        /* The flag, cut to the total. */
        egressshare_derive(20000, 16, 100, 0, &b);
        ck_assert_uint_eq(b.fds_per_uid, 100);
        egressshare_derive(20000, 16, 1000000, 0, &b);
        ck_assert_uint_eq(b.fds_per_uid, 15000);
}
END_TEST

START_TEST(bounds_from_the_thread_pool) {
        struct egressshare_bounds b;

        egressshare_derive(20000, 16, 0, 0, &b); /* main() sets 16: 8 slow */
        ck_assert_uint_eq(b.lookups, 8);
        ck_assert_uint_eq(b.lookups_per_uid, 2);
        egressshare_derive(20000, 4, 0, 0, &b); /* libuv's default: 2 slow */
        ck_assert_uint_eq(b.lookups, 2);
        ck_assert_uint_eq(b.lookups_per_uid, 1);
        egressshare_derive(20000, 1, 0, 0, &b);
        ck_assert_uint_eq(b.lookups, 1);
        ck_assert_uint_eq(b.lookups_per_uid, 1);
        egressshare_derive(20000, 16, 5, 0, &b);
        ck_assert_uint_eq(b.lookups_per_uid, 2); /* the fds flag is not this one */
        egressshare_derive(20000, 16, 0, 5, &b);
        ck_assert_uint_eq(b.lookups_per_uid, 5);
        egressshare_derive(20000, 16, 0, 100, &b);
        ck_assert_uint_eq(b.lookups_per_uid, 8);
        /* UV_THREADPOOL_SIZE read as libuv reads it. */
        unsetenv("UV_THREADPOOL_SIZE");
        ck_assert_uint_eq(egressshare_uv_threads(), 4);
        setenv("UV_THREADPOOL_SIZE", "16", 1);
        ck_assert_uint_eq(egressshare_uv_threads(), 16);
        setenv("UV_THREADPOOL_SIZE", "0", 1);
        ck_assert_uint_eq(egressshare_uv_threads(), 1);
        setenv("UV_THREADPOOL_SIZE", "junk", 1);
        ck_assert_uint_eq(egressshare_uv_threads(), 1);
        setenv("UV_THREADPOOL_SIZE", "5000", 1);
        ck_assert_uint_eq(egressshare_uv_threads(), 1024);
}
END_TEST

/* stderr into a file of its own, to count what was logged. Returns the file's fd. */
static int capture_stderr(void) {
        char path[] = "/tmp/check-egressshare-XXXXXX";
        int fd = mkstemp(path);

        ck_assert_int_ge(fd, 0);
        unlink(path);
        fflush(stderr);
        ck_assert_int_eq(dup2(fd, 2), 2);
        return fd;
}

/* Lines of the file fd that hold needle. */
static int count_logged(int fd, const char *needle) {
        static char buf[65536];
        ssize_t n;
        int k = 0;

        fflush(stderr);
        n = pread(fd, buf, sizeof(buf) - 1, 0);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        for (const char *p = buf; (p = strstr(p, needle)); p++)
                k++;
        return k;
}

START_TEST(descriptor_budgets) {
        struct egressshare_bounds b;
        struct egressshare *sh = NULL;
        struct quota *q = NULL;
        char why[512];
        int logfd = capture_stderr();

        ck_assert_int_eq(quota_new(&q), 0);
        egressshare_derive(16, 16, 4, 0, &b); /* 8 in all (16 less 8), 4 per uid */
        ck_assert_uint_eq(b.fds, 8);
        ck_assert_int_eq(egressshare_new(q, &b, &sh), 0);
        ck_assert_int_eq(egressshare_take_fds(sh, 1, "a", why, sizeof(why)), 0);
        ck_assert_int_eq(egressshare_take_fds(sh, 1, "a", why, sizeof(why)), 0);
        ck_assert_uint_eq(quota_amount(q, QUOTA_PROXY_FDS, 1), 4);
        for (int i = 0; i < 5; i++) {
                ck_assert_int_eq(egressshare_take_fds(sh, 1, "b", why, sizeof(why)), -EDQUOT);
                ck_assert_msg(strstr(why, "uid 1's sandboxes hold 4 descriptors") &&
                                      strstr(why, "--max-proxy-fds-per-uid 4"),
                              "%s", why);
        }
        /* Another uid has its own share, up to the total. */
        ck_assert_int_eq(egressshare_take_fds(sh, 2, "c", why, sizeof(why)), 0);
        ck_assert_int_eq(egressshare_take_fds(sh, 2, "c", why, sizeof(why)), 0);
        ck_assert_int_eq(egressshare_take_fds(sh, 3, "d", why, sizeof(why)), -ENOSPC);
        ck_assert_msg(strstr(why, "hold 8 descriptors") && strstr(why, "open-file limit 16") &&
                              strstr(why, "less 8"),
                      "%s", why);
        ck_assert_uint_eq(quota_total(q, QUOTA_PROXY_FDS), 8);
        /* A connection of uid 1 closes: uid 1 is below its bound and under the total. */
        egressshare_drop_fds(sh, 1);
        ck_assert_int_eq(egressshare_take_fds(sh, 1, "b", why, sizeof(why)), 0);
        ck_assert_int_eq(egressshare_take_fds(sh, 1, "b", why, sizeof(why)), -EDQUOT);
        /* Logged once per run of refusals (uid 1: two runs, uid 3: one), and its end. */
        ck_assert_int_eq(count_logged(logfd, "refuse new connections of uid 1"), 2);
        ck_assert_int_eq(count_logged(logfd, "refuse new connections of uid 3"), 1);
        ck_assert_int_eq(count_logged(logfd, "connections of uid 1 again (5 refused"), 1);
        for (uid_t u = 1; u <= 2; u++) {
                egressshare_drop_fds(sh, u);
                egressshare_drop_fds(sh, u);
        }
        ck_assert_uint_eq(quota_total(q, QUOTA_PROXY_FDS), 0);
        egressshare_free(sh);
        quota_free(q);
        close(logfd);
}
END_TEST

/* A lookup of the tests: started (in which order), or refusing to start. */
struct fake {
        struct egressshare_lookup l;
        int started; /* 1 + its place among the starts; 0: not started */
        int fail;
};

static int n_started;

static int fake_start(struct egressshare_lookup *l) {
        struct fake *f = (struct fake *)l;

        if (f->fail)
                return -EIO;
        f->started = ++n_started;
        return 0;
}

static void ask(struct egressshare *sh, struct fake *f, uid_t uid) {
        memset(f, 0, sizeof(*f));
        f->l.uid = uid;
        f->l.start = fake_start;
        ck_assert_int_eq(egressshare_lookup(sh, &f->l), 0);
}

START_TEST(lookup_turns) {
        struct egressshare_bounds b;
        struct egressshare *sh = NULL;
        struct quota *q = NULL;
        struct fake a[4], bb[2], c, d;

        ck_assert_int_eq(quota_new(&q), 0);
        egressshare_derive(4096, 6, 0, 2, &b); /* 3 slow threads, 2 per uid */
        ck_assert_uint_eq(b.lookups, 3);
        ck_assert_int_eq(egressshare_new(q, &b, &sh), 0);
        /* Uid 1, from any of its sandboxes: two under way, the others wait in order. */
        for (int i = 0; i < 4; i++)
                ask(sh, &a[i], 1);
        ck_assert_int_eq(a[0].started, 1);
        ck_assert_int_eq(a[1].started, 2);
        ck_assert(!a[2].started && !a[3].started && a[2].l.waiting && a[3].l.waiting);
        /* Uid 2 takes the last turn; its second and uid 3's wait for one. */
        ask(sh, &bb[0], 2);
        ck_assert_int_eq(bb[0].started, 3);
        ask(sh, &bb[1], 2);
        ask(sh, &c, 3);
        ck_assert(!bb[1].started && !c.started);
        /* A turn frees: to uid 3, which has none under way (though uid 1 waited longer). */
        egressshare_lookup_done(sh, 1);
        ck_assert_int_eq(c.started, 4);
        ck_assert(!a[2].started && !bb[1].started);
        /* Uid 2's ends: uid 2 (none under way now) before uid 1 (one). */
        egressshare_lookup_done(sh, 2);
        ck_assert_int_eq(bb[1].started, 5);
        /* Uid 3's ends: each of uids 1 and 2 has one under way; uid 1's waited longer. */
        egressshare_lookup_done(sh, 3);
        ck_assert_int_eq(a[2].started, 6);
        /* A wait cancelled (it timed out) is passed over. */
        egressshare_lookup_cancel(sh, &a[3].l);
        ck_assert(!a[3].l.waiting);
        egressshare_lookup_cancel(sh, &a[3].l); /* twice: nothing */
        egressshare_lookup_done(sh, 1);
        ck_assert(!a[3].started);
        /* A start that fails gives its turn to the next at once. */
        ask(sh, &d, 4);
        ck_assert_int_eq(d.started, 7); /* a free turn: at once */
        ask(sh, &a[3], 1);              /* uid 1: one under way, below 2, but no turn */
        ck_assert(!a[3].started && a[3].l.waiting);
        {
                struct fake e;
                memset(&e, 0, sizeof(e));
                e.l.uid = 5;
                e.l.start = fake_start;
                e.fail = 1;
                ck_assert_int_eq(egressshare_lookup(sh, &e.l), 0); /* waits: no turn */
                egressshare_lookup_done(sh, 4);
                /* Uid 5 (none under way) had the turn, failed, and uid 1's took it. */
                ck_assert(!e.started && !e.l.waiting);
                ck_assert_int_eq(a[3].started, 8);
        }
        egressshare_lookup_done(sh, 2);
        egressshare_lookup_done(sh, 1);
        egressshare_lookup_done(sh, 1);
        /* Everything ended: three at once again. */
        for (int i = 0; i < 3; i++)
                ask(sh, &a[i], (uid_t)(10 + i));
        ck_assert(a[0].started && a[1].started && a[2].started);
        egressshare_free(sh);
        quota_free(q);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("egressshare");
        TCase *tc = tcase_create("egressshare");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, bounds_from_the_open_file_limit);
        tcase_add_test(tc, bounds_from_the_thread_pool);
        tcase_add_test(tc, descriptor_budgets);
        tcase_add_test(tc, lookup_turns);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
