/* it_limits.c: integration tests of the bounds of a sandbox's limits and of a
 * command's timeouts against a real sbxd (daemon/bounds.h).
 *
 * Each limit has a floor and a ceiling, and a value outside them is refused with a
 * message naming the limit, its value and the bound with what sets it; none is lowered
 * or rounded silently, so what GetSandbox shows is what holds inside: the size of /tmp
 * and /dev/shm as statfs reads it (the largest accepted, and UINT64_MAX refused, which
 * became a tmpfs without a limit), the rlimits a command gets (open_files above sbxd's
 * own hard limit, which sbx-init lowered to it; cpu_seconds in whole seconds), the
 * sandbox's pids.max (a process limit above --max-processes was lowered to it), and the
 * timeouts of a sandbox and of a command above their flags (lowered). Each test starts
 * its own daemon in the fixture's directory; the fixture ends it and removes what it
 * made even when the test fails. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

/* The page a tmpfs and a cgroup count in. */
static uint64_t page_bytes(void) {
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (uint64_t)p : 4096;
}

/* sbxd's default --max-memory and --max-tmp: the host's memory and swap, whole pages. */
static uint64_t host_memory(void) {
        struct sysinfo si;
        uint64_t m;

        ck_assert_int_eq(sysinfo(&si), 0);
        m = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
        return m - m % page_bytes();
}

/* Creates a sandbox with limits l (and the lifetime timeout_ms, 0: the default); returns
 * the code, and on success the sandbox in *ret (the caller frees it). */
static enum sbx_code create_limited(sbx_client *c, const struct sbx_limits *l, uint64_t timeout_ms,
                                    uint64_t idle_ms, struct sbx_sandbox **ret) {
        struct sbx_create_opts o;

        sbx_create_opts_init(&o);
        o.policy.limits = *l;
        o.timeout_ms = timeout_ms;
        o.idle_timeout_ms = idle_ms;
        *ret = NULL;
        return sbx_create(c, &o, ret);
}

/* A sandbox with limits l, which must be accepted. */
static struct sbx_sandbox *create_ok(sbx_client *c, const struct sbx_limits *l) {
        struct sbx_sandbox *sb = NULL;

        ck_assert_msg(create_limited(c, l, 0, 0, &sb) == SBX_OK, "%s", sbx_error_message(c));
        return sb;
}

/* Ends sb and frees it. */
static void end(sbx_client *c, struct sbx_sandbox *sb) {
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
}

/* The refusal of l: INVALID_ARGUMENT whose message holds want. */
static void expect_refused(sbx_client *c, const struct sbx_limits *l, const char *want) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code = create_limited(c, l, 0, 0, &sb);

        ck_assert_msg(code == SBX_INVALID_ARGUMENT, "accepted (%s), want \"%s\"",
                      sbx_code_name(code), want);
        ck_assert_msg(strstr(sbx_error_message(c), want), "\"%s\" does not hold \"%s\"",
                      sbx_error_message(c), want);
        ck_assert_ptr_null(sb);
}

/* The enforcement sb reports for limit. */
static const char *enforced_by(const struct sbx_sandbox *sb, const char *limit) {
        size_t i;
        for (i = 0; i < sb->n_enforcement; i++)
                if (strcmp(sb->enforcement[i].limit, limit) == 0)
                        return sb->enforcement[i].enforcement;
        return "(absent)";
}

/* The bytes statfs says the tmpfs on path of sandbox id holds. */
static uint64_t tmpfs_bytes(sbx_client *c, const char *id, const char *path) {
        char cmd[128];
        unsigned long long blocks = 0, bsize = 0;
        struct sbx_result *r;

        snprintf(cmd, sizeof(cmd), "stat -f -c '%%b %%S' %s", path);
        r = it_sh(c, id, 20000, cmd);
        ck_assert_msg(r->has_exit_code && r->exit_code == 0, "stat -f %s: %s", path,
                      (char *)r->stderr_data);
        ck_assert_int_eq(sscanf((char *)r->stdout_data, "%llu %llu", &blocks, &bsize), 2);
        sbx_result_free(r);
        return (uint64_t)blocks * bsize;
}

/* The largest tmp_bytes, max: one above it refused (the message says ceiling_says of
 * it, and by), max itself accepted, shown by GetSandbox, and the size statfs reads of
 * /tmp and /dev/shm. */
static void check_largest_tmp(sbx_client *c, uint64_t max, const char *ceiling_says,
                              const char *by) {
        struct sbx_limits l = {.set = SBX_LIMIT_TMP};
        struct sbx_sandbox *sb = NULL, *again = NULL;
        char want[512];

        l.tmp_bytes = UINT64_MAX;
        snprintf(want, sizeof(want), "tmp 18446744073709551615 bytes is above the maximum of %s",
                 ceiling_says);
        expect_refused(c, &l, want);
        expect_refused(c, &l, by);
        l.tmp_bytes = max + page_bytes();
        snprintf(want, sizeof(want), "tmp %llu bytes is above the maximum of %s",
                 (unsigned long long)l.tmp_bytes, ceiling_says);
        expect_refused(c, &l, want);

        l.tmp_bytes = max;
        sb = create_ok(c, &l);
        ck_assert_int_eq(sbx_get(c, sb->id, &again), SBX_OK);
        ck_assert(again->policy.limits.set & SBX_LIMIT_TMP);
        ck_assert_uint_eq(again->policy.limits.tmp_bytes, max);
        ck_assert_str_eq(enforced_by(again, "tmp"), "tmpfs_size");
        ck_assert_uint_eq(tmpfs_bytes(c, sb->id, "/tmp"), max);
        ck_assert_uint_eq(tmpfs_bytes(c, sb->id, "/dev/shm"), max);
        sbx_sandbox_free(again);
        end(c, sb);
}

/* The largest /tmp a sandbox may ask for is the size its tmpfs really has; UINT64_MAX
 * is refused naming the ceiling (it was accepted, shown as 18446744073709551615, and
 * mounted size=0k: no limit at all); a size between pages is refused with the size a
 * tmpfs would have made of it. With the default ceiling (the host's memory and swap)
 * and with --max-tmp. */
START_TEST(largest_tmp_is_the_size_of_its_tmpfs) {
        const char *flags[] = {"--max-tmp", "1G", NULL};
        struct sbx_limits l = {.set = SBX_LIMIT_TMP};
        char says[256];
        struct it_daemon d;
        sbx_client *c;
        uint64_t max = host_memory();

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        snprintf(says, sizeof(says), "%llu bytes", (unsigned long long)max);
        check_largest_tmp(c, max, says, "sbxd --max-tmp)");
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        it_daemon_restart(&d, flags);
        c = it_connect(&d);
        check_largest_tmp(c, 1ull << 30, "1073741824 bytes (1 GiB, sbxd --max-tmp)",
                          "sbxd --max-tmp)");
        l.tmp_bytes = (1ull << 20) + 1;
        snprintf(says, sizeof(says),
                 "tmp 1048577 bytes is not a whole number of pages of %llu bytes, which a tmpfs "
                 "counts: it would be %llu bytes; ask for that",
                 (unsigned long long)page_bytes(),
                 (unsigned long long)((1ull << 20) + page_bytes()));
        expect_refused(c, &l, says);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The limits enforced by rlimits: open_files up to sbxd's own hard RLIMIT_NOFILE (which
 * sbx-init cannot raise: one above it was accepted and silently became it), cpu_seconds
 * in whole seconds from 1 (1e-300 was accepted, and became 1 s), file_size below
 * RLIM_INFINITY. What GetSandbox shows is what `ulimit` reads inside. */
START_TEST(rlimits_are_as_shown) {
        struct it_daemon d;
        struct sbx_limits l;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        struct rlimit nofile;
        uint64_t hard;
        char want[512];
        sbx_client *c;

        /* The daemon inherits this process's limits. */
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
        hard = nofile.rlim_max == RLIM_INFINITY || nofile.rlim_max > 1048576 ? 1048576
                                                                             : nofile.rlim_max;
        it_daemon_start(&d, NULL);
        c = it_connect(&d);

        l = (struct sbx_limits){.set = SBX_LIMIT_OPEN_FILES, .open_files = (uint32_t)hard + 1};
        snprintf(want, sizeof(want), "open_files %llu is above the maximum of %llu (%s)",
                 (unsigned long long)hard + 1, (unsigned long long)hard,
                 hard == 1048576 ? "fs.nr_open's default" : "sbxd's hard RLIMIT_NOFILE");
        expect_refused(c, &l, want);
        l.open_files = UINT32_MAX;
        expect_refused(c, &l, "open_files 4294967295 is above the maximum of");

        l = (struct sbx_limits){.set = SBX_LIMIT_CPU_SECONDS, .cpu_seconds = 1e-300};
        expect_refused(c, &l, "cpu_seconds 1e-300 is below the minimum of 1");
        l.cpu_seconds = 1.5;
        expect_refused(c, &l,
                       "cpu_seconds 1.5 is not a whole number of seconds, which RLIMIT_CPU "
                       "counts: it would be 2; ask for that");
        l = (struct sbx_limits){.set = SBX_LIMIT_FILE_SIZE, .file_size_bytes = UINT64_MAX};
        expect_refused(c, &l,
                       "file_size 18446744073709551615 bytes is above the maximum of "
                       "9223372036854775807 bytes");

        l = (struct sbx_limits){.set = SBX_LIMIT_OPEN_FILES | SBX_LIMIT_CPU_SECONDS |
                                       SBX_LIMIT_FILE_SIZE,
                                .open_files = (uint32_t)hard,
                                .cpu_seconds = 2,
                                .file_size_bytes = 9223372036854775807ull};
        sb = create_ok(c, &l);
        ck_assert_uint_eq(sb->policy.limits.open_files, hard);
        ck_assert(sb->policy.limits.cpu_seconds == 2);
        r = it_sh(c, sb->id, 20000, "ulimit -n; ulimit -Hn; ulimit -t; ulimit -f");
        /* ulimit -f counts blocks of 512 bytes. */
        snprintf(want, sizeof(want), "%llu\n%llu\n2\n%llu\n", (unsigned long long)hard,
                 (unsigned long long)hard, 9223372036854775807ull / 512);
        ck_assert_str_eq((char *)r->stdout_data, want);
        sbx_result_free(r);
        end(c, sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A process limit above --max-processes is refused naming it (it was lowered to it
 * silently); at it, GetSandbox and the sandbox's pids.max agree; the floor, 3, is
 * enough for a command (sbx-init's two processes and it), 2 is refused. */
START_TEST(process_ceiling_refused_not_lowered) {
        const char *flags[] = {"--max-processes", "100", NULL};
        struct it_daemon d;
        struct sbx_limits l = {.set = SBX_LIMIT_PROCESSES};
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        l.processes = 101;
        expect_refused(c, &l, "processes 101 is above the maximum of 100 (sbxd --max-processes)");
        l.processes = UINT32_MAX;
        expect_refused(c, &l, "processes 4294967295 is above the maximum of 100");
        l.processes = 2;
        expect_refused(c, &l, "processes 2 is below the minimum of 3");

        l.processes = 100;
        sb = create_ok(c, &l);
        ck_assert_uint_eq(sb->policy.limits.processes, 100);
        if (strncmp(enforced_by(sb, "processes"), "cgroup", 6) == 0) {
                r = it_sh(c, sb->id, 20000,
                          "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || "
                          "cat /sys/fs/cgroup/pids.max");
                ck_assert_str_eq((char *)r->stdout_data, "100\n");
                sbx_result_free(r);
        } else {
                fprintf(stderr,
                        "process_ceiling_refused_not_lowered: no pids cgroup (%s), "
                        "pids.max not read\n",
                        enforced_by(sb, "processes"));
        }
        end(c, sb);

        l.processes = 3;
        sb = create_ok(c, &l);
        r = it_sh(c, sb->id, 20000, "echo at-the-floor");
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_str_eq((char *)r->stdout_data, "at-the-floor\n");
        sbx_result_free(r);
        end(c, sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Memory in whole pages (a cgroup rounds down: a value between pages is refused with
 * the one it would enforce), at most the host's memory and swap; cpu_percent at most
 * 100 per CPU. Where a memory cgroup of v1 holds it, its limit is the one shown. */
START_TEST(memory_and_cpu_share_bounds) {
        struct it_daemon d;
        struct sbx_limits l = {.set = SBX_LIMIT_MEMORY};
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        uint64_t max = host_memory();
        long ncpu = 0;
        char want[512];
        sbx_client *c;
        cpu_set_t cpus;

        ck_assert_int_eq(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
        ncpu = CPU_COUNT(&cpus);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        l.memory_bytes = (4ull << 20) + 1;
        expect_refused(c, &l, "memory 4194305 bytes is not a whole number of pages");
        expect_refused(c, &l, "it would be 4194304 bytes; ask for that");
        l.memory_bytes = UINT64_MAX;
        snprintf(want, sizeof(want),
                 "memory 18446744073709551615 bytes is above the maximum of %llu bytes",
                 (unsigned long long)max);
        expect_refused(c, &l, want);
        expect_refused(c, &l, "sbxd --max-memory)");
        l = (struct sbx_limits){.set = SBX_LIMIT_CPU_PERCENT,
                                .cpu_percent = (uint32_t)(100 * ncpu + 1)};
        snprintf(want, sizeof(want),
                 "cpu_percent %ld is above the maximum of %ld (sbxd --max-cpu-percent)",
                 100 * ncpu + 1, 100 * ncpu);
        expect_refused(c, &l, want);

        l = (struct sbx_limits){.set = SBX_LIMIT_MEMORY | SBX_LIMIT_CPU_PERCENT,
                                .memory_bytes = 64ull << 20,
                                .cpu_percent = (uint32_t)(100 * ncpu)};
        sb = create_ok(c, &l);
        ck_assert_uint_eq(sb->policy.limits.memory_bytes, 64ull << 20);
        if (strcmp(enforced_by(sb, "memory"), "cgroup_v1") == 0) {
                r = it_sh(c, sb->id, 20000, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes");
                ck_assert_str_eq((char *)r->stdout_data, "67108864\n");
                sbx_result_free(r);
        }
        end(c, sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox's lifetime and idle timeout above --max-sandbox-timeout, and a command's
 * timeout and wait for a slot above --max-command-timeout, are refused naming the flag
 * and its value (they were lowered to it silently); nothing runs or is recorded. At the
 * flags' values they are accepted. Through libsbx and through `sbx`, whose words are
 * its own flags' in seconds. */
START_TEST(timeouts_above_their_flags_are_refused) {
        const char *flags[] = {"--max-sandbox-timeout", "60", "--max-command-timeout", "5", NULL};
        const char *cli_exec[] = {"exec", "--timeout", "6", NULL, "--", "true", NULL};
        const char *cli_create[] = {"create", "--timeout", "61", NULL};
        struct it_daemon d;
        struct sbx_limits none = {0};
        struct sbx_sandbox *sb = NULL;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct sbx_history *h = NULL;
        char *err = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        ck_assert_int_eq(create_limited(c, &none, 60001, 0, &sb), SBX_INVALID_ARGUMENT);
        ck_assert_str_eq(sbx_error_message(c), "timeout_ms 60001 ms is above the maximum of "
                                               "60000 ms (sbxd --max-sandbox-timeout)");
        ck_assert_int_eq(create_limited(c, &none, 0, 60001, &sb), SBX_INVALID_ARGUMENT);
        ck_assert_str_eq(sbx_error_message(c), "idle_timeout_ms 60001 ms is above the maximum of "
                                               "60000 ms (sbxd --max-sandbox-timeout)");
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, cli_create), 125);
        ck_assert_msg(strstr(err, "--timeout 61 s is above the maximum of 60 s (sbxd "
                                  "--max-sandbox-timeout)"),
                      "%s", err);
        free(err);
        ck_assert_msg(create_limited(c, &none, 60000, 60000, &sb) == SBX_OK, "%s",
                      sbx_error_message(c));

        sbx_exec_opts_init(&o);
        o.shell = "echo ran";
        o.timeout_ms = 5001;
        ck_assert_int_eq(sbx_exec(c, sb->id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_str_eq(sbx_error_message(c), "timeout_ms 5001 ms is above the maximum of "
                                               "5000 ms (sbxd --max-command-timeout); nothing "
                                               "was run");
        ck_assert_ptr_null(r);
        o.timeout_ms = 5000;
        o.has_queue_timeout = 1;
        o.queue_timeout_ms = UINT64_MAX;
        ck_assert_int_eq(sbx_exec(c, sb->id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_str_eq(sbx_error_message(c),
                         "queue_timeout_ms 18446744073709551615 ms is above the maximum of 5000 "
                         "ms (sbxd --max-command-timeout); nothing was run");
        cli_exec[3] = sb->id;
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, cli_exec), 125);
        ck_assert_msg(strstr(err, "--timeout 6 s is above the maximum of 5 s (sbxd "
                                  "--max-command-timeout)"),
                      "%s", err);
        free(err);
        ck_assert_int_eq(sbx_history(c, sb->id, 0, 0, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 0); /* nothing ran */
        sbx_history_free(h);

        o.queue_timeout_ms = 5000;
        ck_assert_int_eq(sbx_exec(c, sb->id, &o, &r), SBX_OK);
        ck_assert_str_eq((char *)r->stdout_data, "ran\n");
        sbx_result_free(r);
        end(c, sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("limits");
        TCase *tc = tcase_create("limits");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, largest_tmp_is_the_size_of_its_tmpfs);
        tcase_add_test(tc, rlimits_are_as_shown);
        tcase_add_test(tc, process_ceiling_refused_not_lowered);
        tcase_add_test(tc, memory_and_cpu_share_bounds);
        tcase_add_test(tc, timeouts_above_their_flags_are_refused);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
