/* check_uidrange.c: the Check suite of daemon/uidrange.c, the host-wide reservation of
 * a root daemon's sandbox uids.
 *
 * Every test reserves in a directory of its own (the fixture's, removed afterwards
 * even when the test failed), never in UIDRANGE_DIR. A live daemon is this process (or
 * a child) holding a reservation; a dormant one a reservation given up without forget.
 * Needs root: the reservation directory and the records must be root's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx_limits.h"
#include "testutil.h"
#include "uidrange.h"

#define R0 SBX_UID_BASE
#define R1 (SBX_UID_BASE + SBX_UID_COUNT)
#define R2 (SBX_UID_BASE + 2 * SBX_UID_COUNT)

static char tmpdir[64], resdir[96];

static void tmpdir_setup(void) {
        test_dir_make(tmpdir, sizeof(tmpdir), "check_uidrange");
        snprintf(resdir, sizeof(resdir), "%s/uids", tmpdir);
}

static void tmpdir_teardown(void) {
        test_dir_remove(tmpdir);
}

/* The state directory NAME under the test's directory (created), in buf. */
static const char *state(char *buf, size_t len, const char *name) {
        snprintf(buf, len, "%s/%s", tmpdir, name);
        ck_assert(mkdir(buf, 0700) == 0 || errno == EEXIST);
        return buf;
}

/* Reserves for state_dir, with flag_base and the bound span lo..hi. Returns 0 with *ret
 * or -errno with the reason in err. */
static int reserve(const char *state_dir, uint32_t flag_base, uint32_t lo, uint32_t hi,
                   struct uidrange **ret, char *err, size_t errlen) {
        struct uidrange_want w = {.dir = resdir,
                                  .state_dir = state_dir,
                                  .flag_base = flag_base,
                                  .bound_lo = lo,
                                  .bound_hi = hi};
        err[0] = '\0';
        return uidrange_reserve(&w, ret, err, errlen);
}

/* reserve, which must succeed: the range. */
static struct uidrange *must_reserve(const char *state_dir, uint32_t flag_base) {
        struct uidrange *r = NULL;
        char err[1024];
        int k = reserve(state_dir, flag_base, 0, 0, &r, err, sizeof(err));

        ck_assert_msg(k == 0, "reserve for %s: %s (%s)", state_dir, strerror(-k), err);
        return r;
}

/* The content of path (NUL-terminated, in buf), or "" when it cannot be read. */
static const char *slurp(const char *path, char *buf, size_t len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

        buf[n > 0 ? n : 0] = '\0';
        if (fd >= 0)
                close(fd);
        return buf;
}

static void write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

/* The first free range is taken, reserved by a file 0600 in a 0700 directory that
 * names this process and the state directory, and recorded in the state directory; a
 * second daemon gets the next one. */
START_TEST(picks_the_first_free_range) {
        char s1[128], s2[128], path[256], buf[512], want[512];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0);
        struct uidrange *b = must_reserve(state(s2, sizeof(s2), "s2"), 0);
        struct stat st;

        ck_assert_uint_eq(a->base, R0);
        ck_assert_int_eq(a->origin, UIDRANGE_PICKED);
        ck_assert_uint_eq(b->base, R1);
        snprintf(path, sizeof(path), "%s/%u", resdir, R0);
        ck_assert_str_eq(a->path, path);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        ck_assert_int_eq(stat(resdir, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        snprintf(want, sizeof(want), "pid %d\nstate %s\n", (int)getpid(), s1);
        ck_assert_str_eq(slurp(path, buf, sizeof(buf)), want);
        snprintf(path, sizeof(path), "%s/uid-range", s1);
        snprintf(want, sizeof(want), "%u\n", R0);
        ck_assert_str_eq(slurp(path, buf, sizeof(buf)), want);
        uidrange_release(a, 0);
        uidrange_release(b, 0);
}
END_TEST

/* A daemon that stopped keeps its range (dormant): a fresh one skips it, and the
 * stopped one, started again, gets it back as its record. */
START_TEST(restart_gets_the_recorded_range) {
        char s1[128], s2[128];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0), *b;

        ck_assert_uint_eq(a->base, R0);
        uidrange_release(a, 0);
        b = must_reserve(state(s2, sizeof(s2), "s2"), 0);
        ck_assert_uint_eq(b->base, R1);
        a = must_reserve(s1, 0);
        ck_assert_uint_eq(a->base, R0);
        ck_assert_int_eq(a->origin, UIDRANGE_RECORDED);
        uidrange_release(a, 0);
        uidrange_release(b, 0);
}
END_TEST

/* A state directory whose recorded range a live daemon holds (a copied state
 * directory) is refused, naming that daemon's pid and state directory. */
START_TEST(live_holder_is_named) {
        char s1[128], s3[128], path[256], err[1024], pid[32], rec[32];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0), *b = NULL;
        int k;

        snprintf(path, sizeof(path), "%s/uid-range", state(s3, sizeof(s3), "s3"));
        snprintf(rec, sizeof(rec), "%u\n", R0);
        write_file(path, rec);
        k = reserve(s3, 0, 0, 0, &b, err, sizeof(err));
        ck_assert_int_eq(k, -EADDRINUSE);
        snprintf(pid, sizeof(pid), "pid %d", (int)getpid());
        ck_assert_msg(strstr(err, pid) && strstr(err, s1), "%s", err);
        uidrange_release(a, 0);
}
END_TEST

/* --uid-base overlapping a live or a dormant range is refused, to the last uid; next
 * to it, it is taken. */
START_TEST(flag_overlap_is_refused) {
        char s1[128], s2[128], s3[128], err[1024];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0), *b = NULL;

        state(s2, sizeof(s2), "s2");
        ck_assert_int_eq(reserve(s2, R0 + SBX_UID_COUNT - 1, 0, 0, &b, err, sizeof(err)),
                         -EADDRINUSE);
        ck_assert_msg(strstr(err, "reserved by the sbxd of pid") && strstr(err, s1), "%s", err);
        ck_assert_int_eq(reserve(s2, R0 - SBX_UID_COUNT + 1, 0, 0, &b, err, sizeof(err)),
                         -EADDRINUSE);
        uidrange_release(a, 0); /* dormant now */
        ck_assert_int_eq(reserve(s2, R0 + 100, 0, 0, &b, err, sizeof(err)), -EADDRINUSE);
        ck_assert_msg(strstr(err, "no sbxd runs on it") && strstr(err, s1), "%s", err);
        b = must_reserve(s2, R0 + SBX_UID_COUNT);
        ck_assert_uint_eq(b->base, R1);
        ck_assert_int_eq(b->origin, UIDRANGE_FLAG);
        /* A fresh daemon skips both. */
        a = must_reserve(state(s3, sizeof(s3), "s3"), 0);
        ck_assert_uint_eq(a->base, R2);
        uidrange_release(a, 0);
        uidrange_release(b, 0);
}
END_TEST

/* A reservation whose state directory is gone, or records another range, is stale:
 * its range is free, and the file is removed by the next reservation. */
START_TEST(stale_reservations_are_reused_and_removed) {
        char s1[128], s2[128], path[256], cmd[300];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0), *b;

        uidrange_release(a, 0);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s1);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(path, sizeof(path), "%s/%u", resdir, R2);
        write_file(path, "pid 1\nstate /nonexistent/sbxd-state\n");
        b = must_reserve(state(s2, sizeof(s2), "s2"), 0);
        ck_assert_uint_eq(b->base, R0);
        ck_assert_int_eq(access(path, F_OK), -1);
        uidrange_release(b, 0);
}
END_TEST

/* The records' bound uids decide: their range (the first one for records from before
 * ranges, which have no record of it), whatever the flag says; uids over two ranges or
 * outside the recorded one are refused. */
START_TEST(bound_uids_decide_the_range) {
        char s1[128], s2[128], path[256], err[1024];
        struct uidrange *a = NULL;

        ck_assert_int_eq(
                reserve(state(s1, sizeof(s1), "s1"), 0, R0 + 3, R0 + 9, &a, err, sizeof(err)), 0);
        ck_assert_uint_eq(a->base, R0);
        ck_assert_int_eq(a->origin, UIDRANGE_RECORDED);
        uidrange_release(a, 0);
        ck_assert_int_eq(reserve(s1, R1, R0 + 3, R0 + 9, &a, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "--uid-base 2100000000"), "%s", err);
        ck_assert_int_eq(reserve(s1, 0, R0 + 3, R1 + 1, &a, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(
                reserve(state(s2, sizeof(s2), "s2"), 0, R0 + 1, R1 + 1, &a, err, sizeof(err)),
                -EINVAL);
        ck_assert_msg(strstr(err, "bind sandbox uids 2100000001-2100065537"), "%s", err);
        /* Records of a later range, without its record: that range. */
        snprintf(path, sizeof(path), "%s/uid-range", s2);
        ck_assert_int_eq(reserve(s2, 0, R1 + 1, R1 + 2, &a, err, sizeof(err)), 0);
        ck_assert_uint_eq(a->base, R1);
        uidrange_release(a, 0);
        ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

/* The default state directory owns its range even without a reservation file: with
 * records from before ranges (no record of its range), which may bind uids of the
 * first range, that one (another daemon picks past it, --uid-base may not overlap it,
 * it takes it itself); with a record, the recorded one. */
START_TEST(legacy_state_dir_keeps_the_first_range) {
        char legacy[128], s1[128], s2[128], path[256], err[1024];
        struct uidrange_want w = {.dir = resdir, .legacy_state_dir = legacy};
        struct uidrange *a = NULL, *b = NULL;

        state(legacy, sizeof(legacy), "legacy");
        snprintf(path, sizeof(path), "%s/sbxd.db", legacy);
        write_file(path, "");
        w.state_dir = state(s1, sizeof(s1), "s1");
        ck_assert_int_eq(uidrange_reserve(&w, &a, err, sizeof(err)), 0);
        ck_assert_uint_eq(a->base, R1);
        uidrange_release(a, 1);
        w.flag_base = R0 + 10;
        ck_assert_int_eq(uidrange_reserve(&w, &a, err, sizeof(err)), -EADDRINUSE);
        ck_assert_msg(strstr(err, legacy) && strstr(err, "no sbxd runs on it"), "%s", err);
        w.flag_base = 0;
        /* The legacy directory itself, its records binding uids of the first range. */
        w.state_dir = legacy;
        w.bound_lo = R0 + 4;
        w.bound_hi = R0 + 6;
        ck_assert_int_eq(uidrange_reserve(&w, &a, err, sizeof(err)), 0);
        ck_assert_uint_eq(a->base, R0);
        uidrange_release(a, 1); /* forgets the record too: legacy again */
        w.bound_lo = w.bound_hi = 0;
        ck_assert_int_eq(uidrange_reserve(&w, &a, err, sizeof(err)), 0);
        ck_assert_uint_eq(a->base, R0);
        uidrange_release(a, 0); /* recorded now, and dormant */
        w.state_dir = state(s2, sizeof(s2), "s2");
        ck_assert_int_eq(uidrange_reserve(&w, &b, err, sizeof(err)), 0);
        ck_assert_uint_eq(b->base, R1);
        uidrange_release(b, 1);
        snprintf(path, sizeof(path), "%s/%u", resdir, R0);
        ck_assert_int_eq(unlink(path), 0); /* its reservation lost: the record still counts */
        ck_assert_int_eq(uidrange_reserve(&w, &b, err, sizeof(err)), 0);
        ck_assert_uint_eq(b->base, R1);
        uidrange_release(b, 1);
}
END_TEST

/* forget removes the reservation and the record: the range is free again. */
START_TEST(forget_removes_both) {
        char s1[128], s2[128], path[256];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 0);

        snprintf(path, sizeof(path), "%s/uid-range", s1);
        ck_assert_int_eq(access(path, F_OK), 0);
        ck_assert_int_eq(access(a->path, F_OK), 0);
        snprintf(s2, sizeof(s2), "%s", a->path);
        uidrange_release(a, 1);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(access(s2, F_OK), -1);
        a = must_reserve(state(s2, sizeof(s2), "s2"), 0);
        ck_assert_uint_eq(a->base, R0);
        uidrange_release(a, 1);
}
END_TEST

enum { RACERS = 8 };

/* RACERS processes reserve at once, each for a state directory of its own, and hold
 * their ranges until all have answered: every one gets a range, and no two the same. */
START_TEST(concurrent_reservations_are_distinct) {
        int go[2], told[2], hold[2], i, j, st;
        uint32_t bases[RACERS];
        pid_t pids[RACERS];

        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(told), 0);
        ck_assert_int_eq(pipe(hold), 0);
        for (i = 0; i < RACERS; i++) {
                char s[128], name[16], c;
                snprintf(name, sizeof(name), "s%d", i);
                state(s, sizeof(s), name);
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        struct uidrange *r = NULL;
                        char err[1024];
                        uint32_t base = 0;
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        close(go[1]);
                        close(hold[1]);
                        if (read(go[0], &c, 1) != 0) /* all start when go closes */
                                _exit(2);
                        if (reserve(s, 0, 0, 0, &r, err, sizeof(err)) == 0)
                                base = r->base;
                        else
                                fprintf(stderr, "racer %d: %s\n", i, err);
                        if (write(told[1], &base, sizeof(base)) != sizeof(base))
                                _exit(3);
                        (void)!read(hold[0], &c, 1); /* held until hold closes */
                        _exit(0);
                }
        }
        close(go[0]);
        close(go[1]);
        close(told[1]);
        close(hold[0]);
        for (i = 0; i < RACERS; i++)
                ck_assert_int_eq(read(told[0], &bases[i], sizeof(bases[i])), sizeof(bases[i]));
        close(hold[1]);
        for (i = 0; i < RACERS; i++) {
                ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
                ck_assert_int_eq(st, 0);
        }
        for (i = 0; i < RACERS; i++) {
                ck_assert_msg(bases[i] >= R0 && (bases[i] - R0) % SBX_UID_COUNT == 0 &&
                                      bases[i] < R0 + RACERS * SBX_UID_COUNT,
                              "answer %d: %u, not a range of the first %d (0: the racer failed, "
                              "said above)",
                              i, bases[i], RACERS);
                for (j = 0; j < i; j++)
                        ck_assert_msg(bases[i] != bases[j], "racers %d and %d both got %u", j, i,
                                      bases[i]);
        }
        close(told[0]);
}
END_TEST

/* The lock of this state directory's own range, held a moment longer by what a killed
 * daemon left (a child before its execve), is waited for. */
START_TEST(own_range_held_a_moment_is_waited_for) {
        char s1[128];
        struct uidrange *a;
        int p[2], st;
        pid_t pid;
        char c;

        state(s1, sizeof(s1), "s1");
        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct uidrange *r = NULL;
                char err[1024];
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (reserve(s1, 0, 0, 0, &r, err, sizeof(err)) < 0)
                        _exit(1);
                c = 'x';
                if (write(p[1], &c, 1) != 1)
                        _exit(2);
                usleep(500 * 1000);
                _exit(0); /* the lock goes with it */
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        a = must_reserve(s1, 0);
        ck_assert_uint_eq(a->base, R0);
        ck_assert_int_eq(a->origin, UIDRANGE_RECORDED);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_int_eq(st, 0);
        uidrange_release(a, 0);
}
END_TEST

/* The directory must be root's (another user could lock a file in it and pass for a
 * live daemon); one that others may enter is made root's alone. A record that is not
 * root's, or holds no base, is refused. */
START_TEST(directory_and_records_must_be_roots) {
        char s1[128], path[256], err[1024];
        struct uidrange *a = NULL;
        struct stat st;

        state(s1, sizeof(s1), "s1");
        ck_assert_int_eq(mkdir(resdir, 0755), 0);
        ck_assert_int_eq(chown(resdir, 65534, 65534), 0);
        ck_assert_int_eq(reserve(s1, 0, 0, 0, &a, err, sizeof(err)), -EPERM);
        ck_assert_msg(strstr(err, "not root"), "%s", err);
        ck_assert_int_eq(chown(resdir, 0, 0), 0);
        a = must_reserve(s1, 0);
        ck_assert_int_eq(stat(resdir, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        uidrange_release(a, 1);
        snprintf(path, sizeof(path), "%s/uid-range", s1);
        write_file(path, "banana\n");
        ck_assert_int_eq(reserve(s1, 0, 0, 0, &a, err, sizeof(err)), -EINVAL);
        write_file(path, "2100000000\n");
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        ck_assert_int_eq(reserve(s1, 0, 0, 0, &a, err, sizeof(err)), -EPERM);
        ck_assert_msg(strstr(err, "not a file of root's"), "%s", err);
}
END_TEST

/* Which uids are some root sbxd's sandbox uids: the daemon's range, the ranges daemons
 * pick from, every range reserved in the directory, to their last uid, and the image
 * sandboxes' blocks. */
START_TEST(sandbox_uids_of_every_daemon) {
        char s1[128], path[256];
        struct uidrange *a = must_reserve(state(s1, sizeof(s1), "s1"), 1600000000u);

        snprintf(path, sizeof(path), "%s/1500000000", resdir);
        write_file(path, "pid 1\nstate /nonexistent\n");
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1600000000u), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1600000000u + SBX_UID_COUNT - 1), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, R0), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, R0 + SBX_UID_RANGES * SBX_UID_COUNT - 1), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1500000000u + SBX_UID_COUNT - 1), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1500000000u + SBX_UID_COUNT), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1499999999u), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, R0 - 1), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, R0 + SBX_UID_RANGES * SBX_UID_COUNT), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 0), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, 1000), 0);
        /* The blocks of image sandboxes, of every range. */
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, SBX_IMAGE_UID_BASE - 1), 0);
        ck_assert_int_eq(uidrange_is_sandbox_uid(a, SBX_IMAGE_UID_BASE), 1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(
                                 a, SBX_IMAGE_UID_BASE +
                                            SBX_UID_RANGES * SBX_IMAGE_BLOCKS * SBX_IMAGE_IDS - 1),
                         1);
        ck_assert_int_eq(uidrange_is_sandbox_uid(
                                 a, SBX_IMAGE_UID_BASE +
                                            SBX_UID_RANGES * SBX_IMAGE_BLOCKS * SBX_IMAGE_IDS),
                         0);
        ck_assert_str_eq(uidrange_origin_name(a->origin), "flag");
        uidrange_release(a, 1);
}
END_TEST

/* Each test in a test case of its own: its own temporary directory. */
#define ADD_TEST(suite, fn) SBX_ADD_TEST_CASE(suite, fn, 30, tmpdir_setup, tmpdir_teardown)

static Suite *make_suite(void) {
        Suite *s = suite_create("uidrange");

        ADD_TEST(s, picks_the_first_free_range);
        ADD_TEST(s, restart_gets_the_recorded_range);
        ADD_TEST(s, live_holder_is_named);
        ADD_TEST(s, flag_overlap_is_refused);
        ADD_TEST(s, stale_reservations_are_reused_and_removed);
        ADD_TEST(s, bound_uids_decide_the_range);
        ADD_TEST(s, forget_removes_both);
        ADD_TEST(s, legacy_state_dir_keeps_the_first_range);
        ADD_TEST(s, concurrent_reservations_are_distinct);
        ADD_TEST(s, own_range_held_a_moment_is_waited_for);
        ADD_TEST(s, directory_and_records_must_be_roots);
        ADD_TEST(s, sandbox_uids_of_every_daemon);
        return s;
}

SBX_TEST_MAIN(make_suite)
