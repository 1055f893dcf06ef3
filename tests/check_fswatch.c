/* check_fswatch.c: the Check suite of daemon/fswatch.c: the coalescing rules of
 * fswatch.h one by one, the bound on pending paths and its overflow, the batches split
 * for replies, and a real watch: a real inotify instance on a real directory tree opened
 * as a sandbox's root (as check_files.c makes one: the view files.c reads, its user
 * nobody), driven by a real libuv loop: changes arrive with the paths the sandbox sees,
 * new directories are watched and what is already in them reported, a path the policy
 * hides is not watched, a file is refused, and the watched directory's removal ends it;
 * and a pool of watches: the budget a host's inotify limit gives, each user's and the
 * daemon's bounds on directories (an overflow naming the bound, a new watch refused,
 * the budget given back), and the walk shared round robin by user. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "files.h"
#include "fswatch.h"
#include "pathset.h"
#include "sandbox_int.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "testutil.h"
#include "viewtest.h"

#define NOBODY   65534u
#define CREATED  SBX__V1__FILE_EVENT_KIND__CREATED
#define MODIFIED SBX__V1__FILE_EVENT_KIND__MODIFIED
#define DELETED  SBX__V1__FILE_EVENT_KIND__DELETED
#define RENAMED  SBX__V1__FILE_EVENT_KIND__RENAMED

/* ---- what a drain handed over, as "kind path[<old]" lines --------------------------- */

struct got {
        char text[1 << 16];
        char overflow[256];
        int calls, ready, failed_r;
        char failed_msg[512];
        size_t events;
};

static const char *kind_word(Sbx__V1__FileEventKind k) {
        switch (k) {
        case CREATED:
                return "C";
        case MODIFIED:
                return "M";
        case DELETED:
                return "D";
        case RENAMED:
                return "R";
        case SBX__V1__FILE_EVENT_KIND__FILE_EVENT_KIND_UNSPECIFIED:
        case _SBX__V1__FILE_EVENT_KIND_IS_INT_SIZE:
                break;
        }
        return "?";
}

static void take(void *ud, const struct fswatch_event *ev, size_t n, const char *of) {
        struct got *g = ud;
        size_t i, len;

        g->calls++;
        if (of)
                snprintf(g->overflow, sizeof(g->overflow), "%s", of);
        for (i = 0; i < n; i++) {
                len = strlen(g->text);
                snprintf(g->text + len, sizeof(g->text) - len, "%s %s%s%s%s;",
                         kind_word(ev[i].kind), ev[i].path, ev[i].old_path ? "<" : "",
                         ev[i].old_path ? ev[i].old_path : "", ev[i].is_dir ? "/" : "");
        }
        g->events += n;
}

static struct fswatch_pending pend(size_t max) {
        struct fswatch_pending p;
        memset(&p, 0, sizeof(p));
        p.max = max;
        return p;
}

static void add(struct fswatch_pending *p, Sbx__V1__FileEventKind k, const char *path,
                const char *old) {
        fswatch_pending_add(p, k, path, old, 0);
}

/* The batch of p as text, then p empty. */
static const char *drained(struct fswatch_pending *p, struct got *g) {
        memset(g, 0, sizeof(*g));
        ck_assert_int_eq(fswatch_pending_drain(p, 512, take, g), 0);
        ck_assert(fswatch_pending_empty(p));
        return g->text;
}

START_TEST(simple_rules) {
        struct fswatch_pending p = pend(64);
        struct got g;

        add(&p, CREATED, "/w/a", NULL);
        add(&p, MODIFIED, "/w/a", NULL); /* created, modified: created */
        add(&p, CREATED, "/w/b", NULL);
        add(&p, DELETED, "/w/b", NULL); /* created, deleted: nothing */
        add(&p, MODIFIED, "/w/c", NULL);
        add(&p, MODIFIED, "/w/c", NULL); /* modified twice: modified */
        add(&p, MODIFIED, "/w/d", NULL);
        add(&p, DELETED, "/w/d", NULL); /* modified, deleted: deleted */
        add(&p, DELETED, "/w/e", NULL);
        add(&p, CREATED, "/w/e", NULL); /* deleted, created: modified */
        ck_assert_str_eq(drained(&p, &g), "C /w/a;M /w/c;D /w/d;M /w/e;");
        ck_assert_int_eq(g.calls, 1);
        ck_assert_str_eq(g.overflow, "");
        /* Nothing pending: no call at all. */
        ck_assert_str_eq(drained(&p, &g), "");
        ck_assert_int_eq(g.calls, 0);
        fswatch_pending_clear(&p);
}
END_TEST

START_TEST(rename_rules) {
        struct fswatch_pending p = pend(64);
        struct got g;

        add(&p, RENAMED, "/w/b", "/w/a");
        add(&p, MODIFIED, "/w/b", NULL); /* renamed, then modified: both */
        ck_assert_str_eq(drained(&p, &g), "R /w/b</w/a;M /w/b;");
        add(&p, MODIFIED, "/w/a", NULL);
        add(&p, RENAMED, "/w/b", "/w/a");
        add(&p, DELETED, "/w/b", NULL); /* renamed, then deleted: the old path deleted */
        ck_assert_str_eq(drained(&p, &g), "D /w/a;");
        add(&p, CREATED, "/w/d", NULL);
        add(&p, CREATED, "/w/d/x", NULL);
        fswatch_pending_add(&p, RENAMED, "/w/e", "/w/d", 1);
        /* created, renamed: created at the new path, and what was made below it too */
        ck_assert_str_eq(drained(&p, &g), "C /w/e/x;C /w/e/;");
        add(&p, RENAMED, "/w/b", "/w/a");
        add(&p, RENAMED, "/w/c", "/w/b"); /* a->b->c: a->c */
        ck_assert_str_eq(drained(&p, &g), "R /w/c</w/a;");
        add(&p, RENAMED, "/w/b", "/w/a");
        add(&p, RENAMED, "/w/a", "/w/b"); /* there and back: modified */
        ck_assert_str_eq(drained(&p, &g), "M /w/a;");
        add(&p, MODIFIED, "/w/t", NULL);
        add(&p, RENAMED, "/w/t", "/w/s"); /* over t: t's own change is moot */
        ck_assert_str_eq(drained(&p, &g), "R /w/t</w/s;");
        fswatch_pending_clear(&p);
}
END_TEST

START_TEST(pending_bound_overflows) {
        struct fswatch_pending p = pend(4);
        struct got g;
        char path[32];
        int i;

        for (i = 0; i < 4; i++) {
                snprintf(path, sizeof(path), "/w/%d", i);
                add(&p, CREATED, path, NULL);
        }
        add(&p, MODIFIED, "/w/0", NULL); /* an entry that exists costs nothing */
        ck_assert(!p.overflow[0]);
        add(&p, CREATED, "/w/4", NULL); /* the fifth path */
        ck_assert(p.overflow[0]);
        add(&p, CREATED, "/w/5", NULL); /* lost anyway */
        ck_assert_str_eq(drained(&p, &g), "");
        ck_assert_int_eq(g.calls, 1);
        ck_assert_ptr_nonnull(strstr(g.overflow, "more than 4 paths"));
        /* The next batch starts afresh. */
        add(&p, CREATED, "/w/6", NULL);
        ck_assert_str_eq(drained(&p, &g), "C /w/6;");
        ck_assert_str_eq(g.overflow, "");
        fswatch_pending_clear(&p);
}
END_TEST

START_TEST(drain_splits_batches) {
        struct fswatch_pending p = pend(1000);
        struct got g;
        char path[32];
        int i;

        for (i = 0; i < 25; i++) {
                snprintf(path, sizeof(path), "/w/%d", i);
                add(&p, CREATED, path, NULL);
        }
        memset(&g, 0, sizeof(g));
        ck_assert_int_eq(fswatch_pending_drain(&p, 10, take, &g), 0);
        ck_assert_int_eq(g.calls, 3);
        ck_assert_uint_eq(g.events, 25);
        fswatch_pending_clear(&p);
}
END_TEST

/* ---- a real watch ---------------------------------------------------------------------- */

static char tmpdir[64];
static char root[128];
static struct sbxd core;
static struct sandbox sandbox;

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void host_path(char *out, size_t len, const char *rel) {
        snprintf(out, len, "%s/%s", root, rel);
}

static void mk(const char *rel) {
        char p[PATH_MAX];
        host_path(p, sizeof(p), rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        ck_assert_int_eq(chown(p, NOBODY, NOBODY), 0);
}

static void put(const char *rel) {
        char p[PATH_MAX];
        int fd;

        host_path(p, sizeof(p), rel);
        fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "x", 1), 1);
        close(fd);
}

static void tree_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_fswatch");
        snprintf(root, sizeof(root), "%s/root", tmpdir);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        mk("workspace");
        mk("workspace/old");
        put("workspace/old/o1");
        mk("workspace/secret");
}

static void tree_teardown(void) {
        test_dir_remove(tmpdir);
}

/* The sandbox: its root ROOT, hiding /workspace/secret. */
static struct sandbox *sandbox_up(void) {
        static const char *const hidden[] = {"/workspace/secret", NULL};

        return viewtest_up(&sandbox, &core, root, hidden);
}

static void sandbox_down(struct sandbox *sb) {
        viewtest_down(sb);
}

static void on_ready(void *ud) {
        ((struct got *)ud)->ready = 1;
}

static int never_congested(void *ud) {
        (void)ud;
        return 0;
}

static void on_failed(void *ud, int r, const char *msg) {
        struct got *g = ud;
        g->failed_r = r;
        snprintf(g->failed_msg, sizeof(g->failed_msg), "%s", msg);
}

static const struct fswatch_ops ops = {on_ready, take, never_congested, on_failed};

/* Runs the loop until cond(g) holds (10 s at most). */
static void run_until(uv_loop_t *loop, struct got *g, int (*cond)(const struct got *)) {
        double t0 = now_ms();
        while (!cond(g) && now_ms() - t0 < 10000)
                uv_run(loop, UV_RUN_ONCE);
        ck_assert_msg(cond(g), "not within 10 s; got: %s", g->text);
}

static int is_ready(const struct got *g) {
        return g->ready;
}

static int has_last(const struct got *g) {
        return strstr(g->text, "/workspace/last") != NULL;
}

static int has_failed(const struct got *g) {
        return g->failed_r != 0;
}

START_TEST(real_watch_events) {
        struct fswatch_pool *pool;
        struct sandbox *sb;
        struct fswatch *w = NULL;
        uv_loop_t loop;
        struct got g;
        char err[1024], a[PATH_MAX], b[PATH_MAX];

        sb = sandbox_up();
        memset(&g, 0, sizeof(g));
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        pool = fswatch_pool_new(&loop, 1000, 1000);
        ck_assert_ptr_nonnull(pool);
        /* A file, a hidden path, and ".." past the root are what they are in the view. */
        ck_assert_int_eq(fswatch_start(pool, 1000, sb, "old/o1", 1, 10, &ops, &g, &w, err, sizeof(err)),
                         -EINVAL);
        ck_assert_int_eq(fswatch_start(pool, 1000, sb, "secret", 1, 10, &ops, &g, &w, err, sizeof(err)),
                         -ENOENT);
        ck_assert_int_eq(fswatch_start(pool, 1000, sb, "../../../workspace/../..", 0, 10, &ops, &g, &w,
                                       err, sizeof(err)),
                         0);
        fswatch_free(w);
        ck_assert_int_eq(
                fswatch_start(pool, 1000, sb, "/workspace", 1, 10, &ops, &g, &w, err, sizeof(err)), 0);
        run_until(&loop, &g, is_ready);
        put("workspace/old/o2");   /* below a directory there at the start */
        put("workspace/secret/s"); /* hidden: never watched */
        mk("workspace/new");
        put("workspace/new/n1"); /* perhaps before new/ is watched: listed then */
        host_path(a, sizeof(a), "workspace/old/o1");
        host_path(b, sizeof(b), "workspace/moved");
        ck_assert_int_eq(rename(a, b), 0);
        put("workspace/last");
        run_until(&loop, &g, has_last);
        ck_assert_ptr_nonnull(strstr(g.text, "C /workspace/old/o2;"));
        ck_assert_ptr_nonnull(strstr(g.text, "C /workspace/new/;"));
        ck_assert_ptr_nonnull(strstr(g.text, "C /workspace/new/n1;"));
        ck_assert_ptr_nonnull(strstr(g.text, "R /workspace/moved</workspace/old/o1;"));
        ck_assert_ptr_null(strstr(g.text, "secret/s"));
        ck_assert_str_eq(g.overflow, "");
        /* The watched directory goes: the watch fails with -ENOENT. */
        host_path(a, sizeof(a), "workspace");
        test_dir_remove(a);
        run_until(&loop, &g, has_failed);
        ck_assert_int_eq(g.failed_r, -ENOENT);
        ck_assert_ptr_nonnull(strstr(g.failed_msg, "'/workspace' was removed"));
        fswatch_free(w);
        ck_assert(fswatch_pool_empty(pool));
        fswatch_pool_free(pool);
        ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        sandbox_down(sb);
}
END_TEST

/* ---- a pool of watches ------------------------------------------------------------------ */

#define BIG_DIRS  60
#define WIDE_DIRS 3000

/* ROOT/big with BIG_DIRS directories (and a file in each), ROOT/small with one, ROOT/wide
 * with WIDE_DIRS and r/a. */
static void pool_setup(void) {
        char rel[64];
        int i;

        test_dir_make(tmpdir, sizeof(tmpdir), "check_fswatch");
        snprintf(root, sizeof(root), "%s/root", tmpdir);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        mk("big");
        for (i = 0; i < BIG_DIRS; i++) {
                snprintf(rel, sizeof(rel), "big/d%d", i);
                mk(rel);
                snprintf(rel, sizeof(rel), "big/d%d/f", i);
                put(rel);
        }
        mk("small");
        mk("small/s");
        mk("wide");
        for (i = 0; i < WIDE_DIRS; i++) {
                snprintf(rel, sizeof(rel), "wide/%d", i);
                mk(rel);
        }
        mk("wide/r");
        mk("wide/r/a");
}

START_TEST(budget_from_host) {
        size_t all, per;

        fswatch_budget(192540, &all, &per);
        ck_assert_uint_eq(all, 192540 / SBX_WATCH_HOST_SHARE);
        ck_assert_uint_eq(per, all / SBX_WATCH_UID_SHARE);
        fswatch_budget(0, &all, &per); /* unknown: the kernel's least */
        ck_assert_uint_eq(all, 8192 / SBX_WATCH_HOST_SHARE);
        fswatch_budget(1u << 30, &all, &per);
        ck_assert_uint_eq(all, SBX_WATCH_MAX_DIRS_TOTAL);
        ck_assert_uint_eq(per, SBX_WATCH_MAX_DIRS_TOTAL / SBX_WATCH_UID_SHARE);
}
END_TEST

static int is_ready_overflowed(const struct got *g) {
        return g->ready && g->overflow[0];
}

/* A recursive watch of ROOT/big for uid in pool, run until ready and overflowed. */
static struct fswatch *big_watch(uv_loop_t *loop, struct fswatch_pool *pool, uid_t uid,
                                 struct sandbox *sb, struct got *g) {
        struct fswatch *w = NULL;
        char err[1024];

        memset(g, 0, sizeof(*g));
        ck_assert_msg(fswatch_start(pool, uid, sb, "/big", 1, 10, &ops, g, &w, err, sizeof(err)) ==
                              0,
                      "%s", err);
        run_until(loop, g, is_ready_overflowed);
        return w;
}

/* 40 directories a user, 100 the daemon: a user's walk stops at 40 and a new watch of
 * theirs is refused, naming the bound; a third user's stops at what the daemon has left,
 * naming the daemon's bound; a watch's end gives its directories back. */
START_TEST(budgets_bound_directories) {
        struct fswatch *wa, *wb, *wc, *w2 = NULL;
        struct fswatch_pool *pool;
        struct sandbox *sb;
        uv_loop_t loop;
        static struct got ga, gb, gc, g2;
        char err[1024];

        sb = viewtest_up(&sandbox, &core, root, NULL);
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        pool = fswatch_pool_new(&loop, 100, 40);
        ck_assert_ptr_nonnull(pool);
        wa = big_watch(&loop, pool, 1000, sb, &ga);
        ck_assert_msg(strstr(ga.overflow, "uid 1000's watches follow 40 directories"), "%s",
                      ga.overflow);
        memset(&g2, 0, sizeof(g2));
        ck_assert_int_eq(
                fswatch_start(pool, 1000, sb, "/small", 0, 10, &ops, &g2, &w2, err, sizeof(err)),
                -ENOSPC);
        ck_assert_msg(strstr(err, "uid 1000's file watches follow 40 directories"), "%s", err);
        wb = big_watch(&loop, pool, 1001, sb, &gb);
        ck_assert_msg(strstr(gb.overflow, "uid 1001's watches"), "%s", gb.overflow);
        wc = big_watch(&loop, pool, 1002, sb, &gc);
        ck_assert_msg(strstr(gc.overflow, "the daemon's watches follow 100 directories"), "%s",
                      gc.overflow);
        ck_assert_int_eq(
                fswatch_start(pool, 1003, sb, "/small", 0, 10, &ops, &g2, &w2, err, sizeof(err)),
                -ENOSPC);
        ck_assert_msg(strstr(err, "the daemon's file watches follow 100"), "%s", err);
        /* The first user's watch ends: its 40 are free again, for them or anyone. */
        fswatch_free(wa);
        ck_assert_int_eq(
                fswatch_start(pool, 1000, sb, "/small", 1, 10, &ops, &g2, &w2, err, sizeof(err)),
                0);
        run_until(&loop, &g2, is_ready);
        fswatch_free(w2);
        fswatch_free(wb);
        fswatch_free(wc);
        ck_assert(fswatch_pool_empty(pool));
        fswatch_pool_free(pool);
        ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        viewtest_down(sb);
}
END_TEST

struct storm {
        atomic_int stop;
        long renames;
};

/* A batch counted, not kept (the storm's are many). */
static void count_batch(void *ud, const struct fswatch_event *ev, size_t n, const char *of) {
        struct got *g = ud;

        (void)ev;
        (void)of;
        g->calls++;
        g->events += n;
}

static const struct fswatch_ops count_ops = {on_ready, count_batch, never_congested, on_failed};

/* This thread's CPU time (a turn's cost, whatever the renaming thread takes of the
 * machine's cores). */
static double cpu_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Renames ROOT/wide/r/a to b and back until told to stop. */
static void *storm_run(void *arg) {
        struct storm *st = arg;
        char a[PATH_MAX], b[PATH_MAX];

        host_path(a, sizeof(a), "wide/r/a");
        host_path(b, sizeof(b), "wide/r/b");
        while (!atomic_load(&st->stop)) {
                if (rename(a, b) == 0 && rename(b, a) == 0)
                        st->renames += 2;
        }
        return NULL;
}

/* A watch of WIDE_DIRS directories while a directory in it is renamed back and forth
 * (each rename rewrites the paths of the directories below the one renamed, looked for
 * among all): no loop turn takes long, in CPU time (every event of up to 16 reads was
 * handled in one turn). */
START_TEST(rename_storm_holds_no_turn) {
        struct fswatch_pool *pool;
        struct fswatch *w = NULL;
        struct sandbox *sb;
        static struct got g;
        struct storm st;
        uv_loop_t loop;
        pthread_t th;
        char err[1024];
        double t0, worst = 0;
        long turns = 0;

        sb = viewtest_up(&sandbox, &core, root, NULL);
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        pool = fswatch_pool_new(&loop, 100000, 100000);
        memset(&g, 0, sizeof(g));
        ck_assert_int_eq(
                fswatch_start(pool, 1000, sb, "/wide", 1, 10, &count_ops, &g, &w, err, sizeof(err)),
                0);
        run_until(&loop, &g, is_ready);
        memset(&st, 0, sizeof(st));
        ck_assert_int_eq(pthread_create(&th, NULL, storm_run, &st), 0);
        t0 = now_ms();
        while (now_ms() - t0 < 1500) {
                double t1 = cpu_ms();
                uv_run(&loop, UV_RUN_NOWAIT);
                if (cpu_ms() - t1 > worst)
                        worst = cpu_ms() - t1;
                turns++;
                usleep(200);
        }
        atomic_store(&st.stop, 1);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        fprintf(stderr, "rename storm: %ld renames, %zu events in %d batches, %ld turns, the "
                        "longest %.1f ms\n",
                st.renames, g.events, g.calls, turns, worst);
        ck_assert_int_gt(st.renames, 100);
        ck_assert_msg(worst < 40, "a loop turn took %.1f ms of CPU during a rename storm", worst);
        fswatch_free(w);
        fswatch_pool_free(pool);
        ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        viewtest_down(sb);
}
END_TEST

#define MANY 8

/* One user's MANY recursive walks of ROOT/big, then another's one: the walk goes round
 * robin by user, so the other's is done before any of the first user's (each gets half
 * of every turn, the first user's MANY share their half). */
START_TEST(walks_shared_by_user) {
        static struct got ga[MANY], gb;
        struct fswatch *wa[MANY], *wb = NULL;
        struct fswatch_pool *pool;
        struct sandbox *sb;
        uv_loop_t loop;
        char err[1024];
        double t0;
        int i, ready_a;

        sb = viewtest_up(&sandbox, &core, root, NULL);
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        pool = fswatch_pool_new(&loop, 100000, 100000);
        ck_assert_ptr_nonnull(pool);
        for (i = 0; i < MANY; i++) {
                memset(&ga[i], 0, sizeof(ga[i]));
                ck_assert_int_eq(fswatch_start(pool, 1000, sb, "/big", 1, 10, &ops, &ga[i], &wa[i],
                                               err, sizeof(err)),
                                 0);
        }
        memset(&gb, 0, sizeof(gb));
        ck_assert_int_eq(
                fswatch_start(pool, 1001, sb, "/big", 1, 10, &ops, &gb, &wb, err, sizeof(err)), 0);
        t0 = now_ms();
        while (!gb.ready && now_ms() - t0 < 10000)
                uv_run(&loop, UV_RUN_ONCE);
        ck_assert(gb.ready);
        for (i = 0, ready_a = 0; i < MANY; i++)
                ready_a += ga[i].ready;
        ck_assert_msg(ready_a == 0, "%d of the first user's %d walks were done before the "
                                    "second user's one",
                      ready_a, MANY);
        for (i = 0; i < MANY; i++) {
                run_until(&loop, &ga[i], is_ready);
                fswatch_free(wa[i]);
        }
        fswatch_free(wb);
        ck_assert(fswatch_pool_empty(pool));
        fswatch_pool_free(pool);
        ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
        viewtest_down(sb);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("fswatch");
        TCase *tc = tcase_create("coalesce");
        tcase_add_test(tc, simple_rules);
        tcase_add_test(tc, rename_rules);
        tcase_add_test(tc, pending_bound_overflows);
        tcase_add_test(tc, drain_splits_batches);
        suite_add_tcase(s, tc);
        tc = tcase_create("inotify");
        tcase_add_unchecked_fixture(tc, tree_setup, tree_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, real_watch_events);
        suite_add_tcase(s, tc);
        tc = tcase_create("pool");
        tcase_add_unchecked_fixture(tc, pool_setup, tree_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, budget_from_host);
        tcase_add_test(tc, budgets_bound_directories);
        tcase_add_test(tc, walks_shared_by_user);
        tcase_add_test(tc, rename_storm_holds_no_turn);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
