/* check_config.c: unit tests of sbxd's configuration: path defaults for root and
 * non-root (sbxd(8), --socket and --state-dir), flags, their bad values, and the lookup of
 * --socket-group. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "disk.h"
#include "sbx_limits.h"
#include "testutil.h"

static void clear_env(void) {
        unsetenv("SBX_SOCKET");
        unsetenv("XDG_RUNTIME_DIR");
        unsetenv("XDG_STATE_HOME");
        setenv("HOME", "/home/alice", 1);
}

/* An init helper the daemon's user cannot reach is explained by the directory it may
 * not search, not by the "no such file" of a fallback (issue: a checkout in /root run
 * as another user). Runs as nobody in a child; needs root to set that up. */
START_TEST(init_out_of_reach_explained) {
        char dir[] = "/tmp/check-config-XXXXXX", helper[64], why[1024];
        struct config c;
        int p[2], st;
        pid_t pid;

        if (geteuid() != 0) {
                fprintf(stderr, "init_out_of_reach_explained: not root, skipped\n");
                return;
        }
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0700), 0);
        snprintf(helper, sizeof(helper), "%s/sbx-init", dir);
        ck_assert_int_ge(st = open(helper, O_CREAT | O_WRONLY | O_CLOEXEC, 0755), 0);
        close(st);
        clear_env();
        ck_assert_int_eq(config_init(&c, 65534), 0);
        free(c.init_path);
        c.init_path = strdup(helper);
        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                    setresuid(65534, 65534, 65534) < 0)
                        _exit(1);
                config_explain_init(&c, why, sizeof(why));
                _exit(write(p[1], why, strlen(why) + 1) > 0 ? 0 : 1);
        }
        close(p[1]);
        memset(why, 0, sizeof(why));
        ck_assert_int_gt(read(p[0], why, sizeof(why) - 1), 0);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        unlink(helper);
        rmdir(dir);
        ck_assert_msg(strstr(why, "may not search") && strstr(why, dir) && strstr(why, "uid 65534"),
                      "%s", why);
        /* Reachable but missing: the error itself. */
        free(c.init_path);
        c.init_path = strdup("/nonexistent-sbx/sbx-init");
        config_explain_init(&c, why, sizeof(why));
        ck_assert_ptr_nonnull(strstr(why, "No such file"));
        config_free(&c);
}
END_TEST

START_TEST(root_defaults) {
        struct config c;
        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_str_eq(c.socket_path, "/run/sbxd/sbxd.sock");
        ck_assert_str_eq(c.state_dir, "/var/lib/sbxd");
        ck_assert_uint_eq(c.max_sandboxes, 1000);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 24ull * 3600 * 1000);
        config_free(&c);
}
END_TEST

START_TEST(user_defaults) {
        struct config c;
        clear_env();
        setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
        ck_assert_int_eq(config_init(&c, 1000), 0);
        ck_assert_str_eq(c.socket_path, "/run/user/1000/sbxd/sbxd.sock");
        ck_assert_str_eq(c.state_dir, "/home/alice/.local/state/sbxd");
        config_free(&c);
        setenv("XDG_STATE_HOME", "/data/state", 1);
        unsetenv("XDG_RUNTIME_DIR");
        ck_assert_int_eq(config_init(&c, 1000), 0);
        ck_assert_str_eq(c.socket_path, "/run/user/1000/sbxd/sbxd.sock");
        ck_assert_str_eq(c.state_dir, "/data/state/sbxd");
        config_free(&c);
}
END_TEST

START_TEST(env_socket_wins_and_flag_wins_over_env) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--socket", "/tmp/x.sock", "--state-dir=/tmp/st", NULL};
        clear_env();
        setenv("SBX_SOCKET", "/tmp/env.sock", 1);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_str_eq(c.socket_path, "/tmp/env.sock");
        ck_assert_int_eq(config_parse_args(&c, 4, argv, err, sizeof(err)), 0);
        ck_assert_str_eq(c.socket_path, "/tmp/x.sock");
        ck_assert_str_eq(c.state_dir, "/tmp/st");
        config_free(&c);
}
END_TEST

START_TEST(flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--max-sandboxes", "7", "--log-level", "debug",
                        "--default-timeout", "1.5", "--max-lifetime", "3600",
                        "--max-command-timeout=10", "--max-frame-bytes", "1048576", NULL};
        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 12, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_sandboxes, 7);
        ck_assert_int_eq(c.log_level, LOG_LEVEL_DEBUG);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 1500);
        ck_assert_uint_eq(c.max_sandbox_lifetime_ms, 3600000);
        ck_assert_uint_eq(c.max_command_timeout_ms, 10000);
        ck_assert_uint_eq(c.max_frame_bytes, 1048576);
        config_free(&c);
}
END_TEST

static void expect_bad(char *flag, char *value) {
        struct config c;
        char err[256] = "";
        char *argv[] = {"sbxd", flag, value, NULL};
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_msg(config_parse_args(&c, value ? 3 : 2, argv, err, sizeof(err)) < 0,
                      "%s %s accepted", flag, value ? value : "");
        ck_assert_msg(strlen(err) > 10, "no reason given for %s", flag);
        config_free(&c);
}

/* The lifetimes of sandboxes fit sessions kept by ID: a day, an hour idle, a week at
 * most at a time; each a flag, the old names still understood; only the idle timeout
 * may be 0 (none). */
START_TEST(lifetime_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--default-sandbox-timeout=7200", "--default-idle-timeout=0",
                        "--max-sandbox-timeout=1209600", NULL};
        char *old[] = {"sbxd", "--default-timeout", "60", "--max-lifetime", "120", NULL};
        char *lowered[] = {"sbxd", "--default-sandbox-timeout", "90", "--max-sandbox-timeout", "30",
                           NULL};

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 24ull * 3600 * 1000);
        ck_assert_uint_eq(c.default_idle_timeout_ms, 3600ull * 1000);
        ck_assert_uint_eq(c.max_sandbox_lifetime_ms, 7ull * 24 * 3600 * 1000);
        ck_assert_int_eq(config_parse_args(&c, 4, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 7200000);
        ck_assert_uint_eq(c.default_idle_timeout_ms, 0);
        ck_assert_uint_eq(c.max_sandbox_lifetime_ms, 1209600000);
        config_free(&c);

        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 5, old, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 60000);
        ck_assert_uint_eq(c.max_sandbox_lifetime_ms, 120000);
        config_free(&c);

        /* A default above the maximum is lowered to it. */
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 5, lowered, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.default_sandbox_timeout_ms, 30000);
        config_free(&c);

        expect_bad("--default-sandbox-timeout", "0");
        expect_bad("--max-sandbox-timeout", "0");
        expect_bad("--default-idle-timeout", "-1");
        expect_bad("--default-idle-timeout", "soon");
        ck_assert_ptr_nonnull(strstr(config_usage(), "--default-idle-timeout"));
}
END_TEST

START_TEST(bad_flags) {
        clear_env();
        expect_bad("--max-sandboxes", "0");
        expect_bad("--max-sandboxes", "-3");
        expect_bad("--max-sandboxes", "12abc");
        expect_bad("--max-sandboxes", "99999999999999999999");
        expect_bad("--log-level", "loud");
        expect_bad("--socket", "relative.sock");
        expect_bad("--state-dir", "relative");
        expect_bad("--default-timeout", "-1");
        expect_bad("--default-timeout", "0");
        expect_bad("--default-timeout", "nan");
        expect_bad("--max-frame-bytes", "10");
        expect_bad("--bogus", "1");
        expect_bad("--command-cgroups", "sometimes");
        expect_bad("--max-sandboxes-per-uid", "0");
        expect_bad("--max-commands-per-uid", "x");
        expect_bad("--max-commands", "5000");
        expect_bad("--retention-days", "-1");
        expect_bad("--max-lifetime", "0");
        expect_bad("--max-command-timeout", "abc");
        expect_bad("--adopt-grace", "-2");
        expect_bad("--warm", "-1");
        expect_bad("--warm", "65");
        expect_bad("--warm", "two");
        expect_bad("--spares", "-1");
        expect_bad("--spares", "65");
        expect_bad("--spares", "some");
        expect_bad("--max-processes", "-1");
        expect_bad("--max-processes", "4194305");
        expect_bad("--max-processes", "many");
        expect_bad("--max-connections-per-uid", "0");
        expect_bad("--max-connections-per-uid", "-1");
        expect_bad("--max-connections-per-uid", "2000");
        expect_bad("--max-connections-per-uid", "1025");
        expect_bad("--max-connections-per-uid", "x");
        expect_bad("--max-connections-per-uid", "");
        expect_bad("--max-forwards-per-uid", "0");
        expect_bad("--max-forwards-per-uid", "1025");
        expect_bad("--max-forwards-per-uid", "-1");
        expect_bad("--max-forwards-per-uid", "x");
        expect_bad("--socket-group", "");
        expect_bad("--socket-group", "-1");
        expect_bad("--socket-group", "4294967295");
        expect_bad("--socket-group", "99999999999");
        expect_bad("--socket-group", "a:b");
        expect_bad("--socket-group", "two words");
        expect_bad("--socket-group", "a/b");
        expect_bad("--socket-group", NULL);
        expect_bad("--max-sandboxes", NULL);
        expect_bad("stray", NULL);
}
END_TEST

/* The command queue (sbxd(8), COMMANDS THAT WAIT): a sandbox's commands over the running
 * cap wait, at most --max-queued in a sandbox (0: none) and --max-queued-total over the
 * daemon, each --queue-timeout by default (0: never wait; never past
 * --max-command-timeout). */
START_TEST(queue_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--max-queued", "0", "--max-queued-total=0", "--queue-timeout",
                        "0", NULL};
        char *top[] = {"sbxd", "--max-queued=65536", "--max-queued-total", "1000000",
                       "--queue-timeout", "2.5", "--max-queued-per-uid", "7", NULL};
        char *capped[] = {"sbxd", "--queue-timeout", "600", "--max-command-timeout", "30", NULL};

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.max_queued_per_sandbox, 64);
        ck_assert_uint_eq(c.max_queued_total, 1024);
        ck_assert_uint_eq(c.queue_timeout_ms, 60000);
        ck_assert_uint_eq(c.max_queued_per_uid, 256);
        ck_assert_uint_eq(SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX, 64);
        ck_assert_uint_eq(SBX_DEFAULT_MAX_QUEUED_TOTAL, 1024);
        ck_assert_uint_eq(SBX_DEFAULT_QUEUE_TIMEOUT_MS, 60000);
        ck_assert_uint_eq(c.max_commands_per_sandbox, SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX);
        ck_assert_int_eq(config_parse_args(&c, 6, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_queued_per_sandbox, 0);
        ck_assert_uint_eq(c.max_queued_total, 0);
        ck_assert_uint_eq(c.queue_timeout_ms, 0);
        ck_assert_int_eq(config_parse_args(&c, 8, top, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_queued_per_uid, 7);
        ck_assert_uint_eq(c.max_queued_per_sandbox, 65536);
        ck_assert_uint_eq(c.max_queued_total, 1000000);
        ck_assert_uint_eq(c.queue_timeout_ms, 2500);
        config_free(&c);

        /* A default wait above the longest a request may ask for is lowered to it. */
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 5, capped, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.queue_timeout_ms, 30000);
        config_free(&c);

        expect_bad("--max-queued", "65537");
        expect_bad("--max-queued", "-1");
        expect_bad("--max-queued", "many");
        expect_bad("--max-queued", "");
        expect_bad("--max-queued-total", "1000001");
        expect_bad("--max-queued-total", "-1");
        expect_bad("--max-queued-total", "1k");
        expect_bad("--max-queued-per-uid", "1000001");
        expect_bad("--max-queued-per-uid", "x");
        expect_bad("--queue-timeout", "-1");
        expect_bad("--queue-timeout", "soon");
        expect_bad("--queue-timeout", "inf");
        expect_bad("--queue-timeout", NULL);
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-queued N"));
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-queued-total N"));
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-queued-per-uid N"));
        ck_assert_ptr_nonnull(strstr(config_usage(), "--queue-timeout SECS"));
}
END_TEST

START_TEST(connection_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--max-connections-per-uid", "3", "--socket-group", "sbx-users",
                        NULL};
        char *argv2[] = {"sbxd", "--max-connections-per-uid=1024", "--socket-group=4242",
                         "--socket-group", "0", NULL};
        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.max_connections_per_uid, SBX_DEFAULT_MAX_CONNECTIONS_PER_UID);
        ck_assert_uint_eq(SBX_DEFAULT_MAX_CONNECTIONS_PER_UID, 128);
        ck_assert_ptr_null(c.socket_group);
        ck_assert_int_eq(config_parse_args(&c, 5, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_connections_per_uid, 3);
        ck_assert_str_eq(c.socket_group, "sbx-users");
        /* The limits themselves, and the last --socket-group wins. */
        ck_assert_int_eq(config_parse_args(&c, 5, argv2, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_connections_per_uid, SBX_MAX_CONNECTIONS);
        ck_assert_str_eq(c.socket_group, "0");
        config_free(&c);
        ck_assert_ptr_null(c.socket_group);
        ck_assert_int_eq(config_init(&c, 0), 0);
        argv[2] = "1";
        ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_connections_per_uid, 1);
        /* Streams to sandboxes' ports: 64 unless given, up to 1024. */
        ck_assert_uint_eq(c.max_forwards_per_uid, 64);
        argv[1] = "--max-forwards-per-uid";
        argv[2] = "1024";
        ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_forwards_per_uid, 1024);
        config_free(&c);
}
END_TEST

/* Per-uid shares: --max-sandboxes-per-uid and --max-buffered-per-uid default to a
 * quarter of their totals, given ones win, and the bad values are refused naming why. */
START_TEST(share_flags) {
        struct config c;
        char err[256];
        char *none[] = {"sbxd", NULL};
        char *given[] = {"sbxd", "--max-sandboxes",
                         "8",    "--max-buffered",
                         "1G",   "--max-buffered-per-uid",
                         "300M", "--frame-timeout",
                         "2.5",  NULL};
        char *small[] = {"sbxd", "--max-sandboxes",   "3",       "--max-buffered",
                         "64M",  "--max-frame-bytes", "4194304", NULL};
        struct {
                char *argv[8];
                const char *says;
        } bad[] = {
                {{"sbxd", "--max-buffered", "1k", NULL}, "from 16M to 1T"},
                {{"sbxd", "--max-buffered", "2T", NULL}, "from 16M to 1T"},
                {{"sbxd", "--max-buffered-per-uid", "x", NULL}, "from 16M to 1T"},
                {{"sbxd", "--max-buffered", "100M", "--max-buffered-per-uid", "200M", NULL},
                 "above --max-buffered"},
                /* A quarter of 200M is below twice the 64M frame. */
                {{"sbxd", "--max-buffered", "200M", NULL}, "twice --max-frame-bytes"},
                {{"sbxd", "--frame-timeout", "0", NULL}, "--frame-timeout"},
                {{"sbxd", "--frame-timeout", "-1", NULL}, "--frame-timeout"},
                {{"sbxd", "--daemon-memory-max", "1M", NULL}, "at least 64M"},
                {{"sbxd", "--daemon-memory-max", "lots", NULL}, "at least 64M"},
                {{"sbxd", "--daemon-tasks-max", "-1", NULL}, "--daemon-tasks-max"},
                {{"sbxd", "--daemon-tasks-max", "99999999", NULL}, "--daemon-tasks-max"},
                {{"sbxd", "--daemon-tasks-max", "8", NULL}, "--daemon-tasks-max 8 is too low: at least 64"},
                {{"sbxd", "--daemon-tasks-max", "63", NULL}, "at least 64"},
        };
        size_t i, n;

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 1, none, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_sandboxes_per_uid, 250);
        ck_assert_uint_eq(c.max_buffered_bytes, 2ull << 30);
        ck_assert_uint_eq(c.max_buffered_per_uid, 512ull << 20);
        ck_assert_uint_eq(c.frame_timeout_ms, 60000);
        ck_assert_uint_eq(c.daemon_memory_max, 0);
        ck_assert_uint_eq(c.daemon_tasks_max, 0);
        config_free(&c);
        {
                char *bounds[] = {"sbxd", "--daemon-memory-max", "4G", "--daemon-tasks-max", "1024",
                                  NULL};
                ck_assert_int_eq(config_init(&c, 0), 0);
                ck_assert_int_eq(config_parse_args(&c, 5, bounds, err, sizeof(err)), 0);
                ck_assert_uint_eq(c.daemon_memory_max, 4ull << 30);
                ck_assert_uint_eq(c.daemon_tasks_max, 1024);
                config_free(&c);
        }
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 9, given, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_sandboxes_per_uid, 2);
        ck_assert_uint_eq(c.max_buffered_bytes, 1ull << 30);
        ck_assert_uint_eq(c.max_buffered_per_uid, 300ull << 20);
        ck_assert_uint_eq(c.frame_timeout_ms, 2500);
        config_free(&c);
        /* A share never rounds to nothing. */
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 7, small, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_sandboxes_per_uid, 1);
        ck_assert_uint_eq(c.max_buffered_per_uid, 16ull << 20);
        config_free(&c);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                for (n = 0; bad[i].argv[n]; n++)
                        ;
                ck_assert_int_eq(config_init(&c, 0), 0);
                err[0] = '\0';
                ck_assert_msg(config_parse_args(&c, (int)n, bad[i].argv, err, sizeof(err)) ==
                                      -EINVAL,
                              "case %zu accepted", i);
                ck_assert_msg(strstr(err, bad[i].says), "case %zu: '%s'", i, err);
                config_free(&c);
        }
}
END_TEST

/* --uid-base: none by default; a uid from SBX_UID_BASE_MIN whose range of
 * SBX_UID_COUNT ends below (uid_t)-1; anything else is refused, saying the flag. */
START_TEST(uid_base_flag) {
        static char bad[][16] = {"65535", "0", "-1", "4294901760", "4294967295",
                                 "4294967296", "2100000000x", "", "abc"};
        struct config c;
        char err[256], *argv[] = {"sbxd", "--uid-base", "65536", NULL};
        size_t i;

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.uid_base, 0);
        ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.uid_base, SBX_UID_BASE_MIN);
        argv[2] = "4294901759";
        ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.uid_base, 4294901759u);
        ck_assert_uint_eq(c.uid_base + SBX_UID_COUNT - 1, 4294967294u);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                argv[2] = bad[i];
                ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), -EINVAL);
                ck_assert_msg(strstr(err, "--uid-base"), "%s: %s", bad[i], err);
        }
        config_free(&c);
}
END_TEST

/* --max-snapshot-bytes-per-uid: a quarter of --image-cache-size unless given. */
START_TEST(snapshot_bound_flag) {
        struct config k;
        char e[256], *argv[] = {"sbxd", "--image-cache-size", "40G", NULL};

        clear_env();
        ck_assert_int_eq(config_init(&k, 0), 0);
        ck_assert_int_eq(config_parse_args(&k, 3, argv, e, sizeof(e)), 0);
        ck_assert_uint_eq(k.max_snapshot_bytes_per_uid, 10ull << 30);
        argv[1] = "--max-snapshot-bytes-per-uid";
        argv[2] = "3M";
        ck_assert_int_eq(config_parse_args(&k, 3, argv, e, sizeof(e)), 0);
        ck_assert_uint_eq(k.max_snapshot_bytes_per_uid, 3u << 20);
        config_free(&k);
}
END_TEST

/* --warm-image REF=N: repeatable, each REF once, N from 1 to SBX_MAX_WARM_SANDBOXES and
 * all of them at most that too; a name with a colon and an '=' in the count's place
 * parsed from the last '='; bad values refused naming the flag. */
START_TEST(warm_image_flags) {
        static char bad[][24] = {"python", "python=", "=2", "python=0", "python=65",
                                 "python=two", "dir:/srv/tree=2", "python=-1"};
        struct config c;
        char err[256], *argv[] = {"sbxd", "--warm-image", "localhost:5000/py:3.12=2",
                                  "--warm-image=oci:/srv/lay:img=1", NULL};
        char many[12][32], *argv_many[2 * 12 + 1];
        size_t i;

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.n_warm_images, 0);
        ck_assert_int_eq(config_parse_args(&c, 4, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.n_warm_images, 2);
        ck_assert_str_eq(c.warm_images[0].ref, "localhost:5000/py:3.12");
        ck_assert_uint_eq(c.warm_images[0].n, 2);
        ck_assert_str_eq(c.warm_images[1].ref, "oci:/srv/lay:img");
        ck_assert_uint_eq(c.warm_images[1].n, 1);
        /* The same name again. */
        argv[3] = "--warm-image=localhost:5000/py:3.12=1";
        ck_assert_int_eq(config_parse_args(&c, 4, argv, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "given twice"), "%s", err);
        config_free(&c);
        ck_assert_uint_eq(c.n_warm_images, 0);

        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(config_init(&c, 0), 0);
                argv[2] = bad[i];
                ck_assert_int_eq(config_parse_args(&c, 3, argv, err, sizeof(err)), -EINVAL);
                ck_assert_msg(strstr(err, "--warm-image"), "%s: %s", bad[i], err);
                config_free(&c);
        }
        /* More than CONFIG_MAX_WARM_IMAGES names, or SBX_MAX_WARM_SANDBOXES in all. */
        argv_many[0] = "sbxd";
        for (i = 0; i < 12; i++) {
                snprintf(many[i], sizeof(many[i]), "img%zu=1", i);
                argv_many[1 + 2 * i] = "--warm-image";
                argv_many[2 + 2 * i] = many[i];
        }
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 1 + 2 * (CONFIG_MAX_WARM_IMAGES + 1), argv_many,
                                           err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "at most"), "%s", err);
        config_free(&c);
        snprintf(many[0], sizeof(many[0]), "img0=%u", SBX_MAX_WARM_SANDBOXES);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 3, argv_many, err, sizeof(err)), 0);
        config_free(&c);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 5, argv_many, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "at most"), "%s", err);
        config_free(&c);
}
END_TEST

/* --max-proxy-fds-per-uid and --max-lookups-per-uid: not given, 0 (the proxies derive a
 * share at start, egressshare.h); given, their value; bad values refused naming the flag. */
START_TEST(proxy_flags) {
        struct config c;
        char err[256];
        char *none[] = {"sbxd", NULL};
        char *given[] = {"sbxd", "--max-proxy-fds-per-uid", "64", "--max-lookups-per-uid=3", NULL};
        static char *bad[][2] = {
                {"--max-proxy-fds-per-uid", "0"},
                {"--max-proxy-fds-per-uid", "1"},
                {"--max-proxy-fds-per-uid", "x"},
                {"--max-proxy-fds-per-uid", "-2"},
                {"--max-proxy-fds-per-uid", "1073741825"},
                {"--max-proxy-fds-per-uid", ""},
                {"--max-lookups-per-uid", "0"},
                {"--max-lookups-per-uid", "1025"},
                {"--max-lookups-per-uid", "2x"},
        };

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 1, none, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_proxy_fds_per_uid, 0);
        ck_assert_uint_eq(c.max_lookups_per_uid, 0);
        config_free(&c);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 4, given, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_proxy_fds_per_uid, 64);
        ck_assert_uint_eq(c.max_lookups_per_uid, 3);
        config_free(&c);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *argv[] = {"sbxd", bad[i][0], bad[i][1], NULL};
                ck_assert_int_eq(config_init(&c, 0), 0);
                err[0] = '\0';
                ck_assert_msg(config_parse_args(&c, 3, argv, err, sizeof(err)) == -EINVAL,
                              "%s %s accepted", bad[i][0], bad[i][1]);
                ck_assert_msg(strstr(err, bad[i][0]), "%s %s: '%s'", bad[i][0], bad[i][1], err);
                config_free(&c);
        }
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-proxy-fds-per-uid"));
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-lookups-per-uid"));
}
END_TEST

/* --max-image-entries: the default, a value given, and bad values refused naming the
 * flag (below 1000, above 100000000, not a number). */
START_TEST(image_entries_flag) {
        struct config c;
        char err[256];
        char *none[] = {"sbxd", NULL};
        char *given[] = {"sbxd", "--max-image-entries", "2000", NULL};
        static char *bad[] = {"999", "100000001", "0", "-1", "1e6", "", "20000x"};

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 1, none, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_image_entries, CONFIG_DEFAULT_MAX_IMAGE_ENTRIES);
        config_free(&c);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 3, given, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_image_entries, 2000);
        config_free(&c);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *argv[] = {"sbxd", "--max-image-entries", bad[i], NULL};
                ck_assert_int_eq(config_init(&c, 0), 0);
                err[0] = '\0';
                ck_assert_msg(config_parse_args(&c, 3, argv, err, sizeof(err)) == -EINVAL,
                              "--max-image-entries %s accepted", bad[i]);
                ck_assert_msg(strstr(err, "--max-image-entries"), "%s: '%s'", bad[i], err);
                config_free(&c);
        }
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-image-entries"));
}
END_TEST

/* The number in a sysctl file. */
static unsigned long sysctl_value(const char *path) {
        unsigned long v = 0;
        FILE *f = fopen(path, "re");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fscanf(f, "%lu", &v), 1);
        fclose(f);
        return v;
}

/* --max-ptys defaults to half of what the kernel leaves the devpts instances but the
 * host's (kernel.pty.max less kernel.pty.reserve, read at start), --max-ptys-per-uid to a
 * quarter of --max-ptys; both may be 0 (no sandbox gets a pty), the per-uid one no more
 * than the other, neither more than the kernel's most (1048576). */
START_TEST(pty_flags) {
        unsigned long kmax = sysctl_value("/proc/sys/kernel/pty/max"),
                      kres = sysctl_value("/proc/sys/kernel/pty/reserve");
        struct config c;
        char err[256];
        struct {
                char *argv[6];
                uint32_t max, per_uid;
        } good[] = {
                {{"sbxd", "--max-ptys", "100", NULL}, 100, 25},
                {{"sbxd", "--max-ptys", "3", NULL}, 3, 0},
                {{"sbxd", "--max-ptys", "0", NULL}, 0, 0},
                {{"sbxd", "--max-ptys", "100", "--max-ptys-per-uid", "0", NULL}, 100, 0},
                {{"sbxd", "--max-ptys", "100", "--max-ptys-per-uid", "100", NULL}, 100, 100},
                {{"sbxd", "--max-ptys=1048576", NULL}, 1048576, 262144},
        };
        size_t i, n;

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 1, (char *[]){"sbxd", NULL}, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_ptys, kmax > kres ? (kmax - kres) / 2 : 0);
        ck_assert_uint_eq(c.max_ptys_per_uid, c.max_ptys / 4);
        config_free(&c);
        for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                for (n = 0; good[i].argv[n]; n++)
                        ;
                ck_assert_int_eq(config_init(&c, 0), 0);
                ck_assert_msg(config_parse_args(&c, (int)n, good[i].argv, err, sizeof(err)) == 0,
                              "case %zu: %s", i, err);
                ck_assert_uint_eq(c.max_ptys, good[i].max);
                ck_assert_uint_eq(c.max_ptys_per_uid, good[i].per_uid);
                config_free(&c);
        }
        expect_bad("--max-ptys", "-1");
        expect_bad("--max-ptys", "1048577");
        expect_bad("--max-ptys", "many");
        expect_bad("--max-ptys", "");
        expect_bad("--max-ptys", NULL);
        expect_bad("--max-ptys-per-uid", "-1");
        expect_bad("--max-ptys-per-uid", "1048577");
        expect_bad("--max-ptys-per-uid", "4294967295");
        expect_bad("--max-ptys-per-uid", "1x");
        ck_assert_int_eq(config_init(&c, 0), 0);
        err[0] = '\0';
        ck_assert_int_eq(config_parse_args(&c, 5,
                                           (char *[]){"sbxd", "--max-ptys", "10",
                                                      "--max-ptys-per-uid", "11", NULL},
                                           err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "--max-ptys-per-uid (11) is above --max-ptys (10)"), "%s", err);
        config_free(&c);
}
END_TEST

START_TEST(socket_group_lookup) {
        gid_t gid = 7;
        /* Numbers are gids, whether a group has them or not. */
        ck_assert_int_eq(config_resolve_group("0", &gid), 0);
        ck_assert_uint_eq(gid, 0);
        ck_assert_int_eq(config_resolve_group("61234", &gid), 0);
        ck_assert_uint_eq(gid, 61234);
        ck_assert_int_eq(config_resolve_group("4294967294", &gid), 0);
        ck_assert_uint_eq(gid, 4294967294u);
        /* Names through NSS: every system has root (gid 0). */
        gid = 7;
        ck_assert_int_eq(config_resolve_group("root", &gid), 0);
        ck_assert_uint_eq(gid, 0);
        gid = 7;
        ck_assert_int_eq(config_resolve_group("sbxd-no-such-group-4711", &gid), -ENOENT);
        ck_assert_uint_eq(gid, 7);
        ck_assert_int_eq(config_resolve_group("", &gid), -EINVAL);
        ck_assert_int_eq(config_resolve_group("4294967295", &gid), -EINVAL);
        ck_assert_int_eq(config_resolve_group("-5", &gid), -EINVAL);
        ck_assert_int_eq(config_resolve_group("x:y", &gid), -EINVAL);
        ck_assert_uint_eq(gid, 7);
}
END_TEST

START_TEST(service_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd", "--keep-sandboxes", "--adopt-grace", "2.5", "--command-cgroups",
                        "on", "--max-sandboxes-per-uid", "3", "--retention-days", "0",
                        "--warm", "0", "--max-processes", "0", "--spares", "5", NULL};
        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.adopt_grace_ms, 60000);
        ck_assert_int_eq(c.command_cgroups, CONFIG_CGROUPS_AUTO);
        ck_assert_uint_eq(c.warm, SBX_DEFAULT_WARM_SANDBOXES);
        ck_assert_uint_eq(c.spares, SBX_DEFAULT_SPARES);
        ck_assert_uint_eq(SBX_DEFAULT_SPARES, 2);
        ck_assert_uint_eq(c.max_processes, SBX_DEFAULT_MAX_PROCESSES);
        ck_assert_int_eq(config_parse_args(&c, 16, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.warm, 0);
        ck_assert_uint_eq(c.spares, 5);
        ck_assert_uint_eq(c.max_processes, 0);
        ck_assert(c.keep_sandboxes);
        ck_assert_uint_eq(c.adopt_grace_ms, 2500);
        ck_assert_int_eq(c.command_cgroups, CONFIG_CGROUPS_ON);
        ck_assert_uint_eq(c.max_sandboxes_per_uid, 3);
        ck_assert_uint_eq(c.retention_days, 0);
        config_free(&c);
}
END_TEST

/* The disk limit's flags (docs/sandboxes.md, "Disk limit"): sizes with units, their bounds, and
 * --default-disk not above --max-disk. */
START_TEST(disk_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd",  "--default-disk",    "2G", "--default-disk-inodes",
                        "10000", "--max-disk=100GiB", NULL};
        char *over[] = {"sbxd", "--default-disk", "2G", "--max-disk", "1G", NULL};
        char *thin[] = {"sbxd", "--disk-overcommit", NULL};

        clear_env();
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(c.disk_overcommit, 0);
        ck_assert_int_eq(config_parse_args(&c, 2, thin, err, sizeof(err)), 0);
        ck_assert_int_eq(c.disk_overcommit, 1);
        config_free(&c);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.default_disk_bytes, 0);
        ck_assert_uint_eq(c.default_disk_inodes, 0);
        ck_assert_uint_eq(c.max_disk_bytes, 1ull << 40);
        ck_assert_int_eq(config_parse_args(&c, 6, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.default_disk_bytes, 2ull << 30);
        ck_assert_uint_eq(c.default_disk_inodes, 10000);
        ck_assert_uint_eq(c.max_disk_bytes, 100ull << 30);
        config_free(&c);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_int_eq(config_parse_args(&c, 5, over, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "--default-disk is above --max-disk");
        config_free(&c);
        ck_assert_ptr_nonnull(strstr(config_usage(), "--default-disk SIZE"));

        expect_bad("--default-disk", "0");
        expect_bad("--default-disk", "1023K");
        expect_bad("--default-disk", "17T");
        expect_bad("--default-disk", "2X");
        expect_bad("--default-disk", "-1G");
        expect_bad("--default-disk", "");
        expect_bad("--max-disk", "huge");
        expect_bad("--default-disk-inodes", "15");
        expect_bad("--default-disk-inodes", "4294967297");
        expect_bad("--default-disk-inodes", "-5");
        expect_bad("--default-disk-inodes", "1e6");
        expect_bad("--disk-via", "loop");
        expect_bad("--disk-via", "");

        {
                char *via[] = {"sbxd", "--disk-via", "tmpfs", NULL};
                ck_assert_int_eq(config_init(&c, 0), 0);
                ck_assert_int_eq(c.disk_via, DISK_MECH_NONE);
                ck_assert_int_eq(config_parse_args(&c, 3, via, err, sizeof(err)), 0);
                ck_assert_int_eq(c.disk_via, DISK_MECH_TMPFS);
                via[2] = "image";
                ck_assert_int_eq(config_parse_args(&c, 3, via, err, sizeof(err)), 0);
                ck_assert_int_eq(c.disk_via, DISK_MECH_IMAGE);
                via[2] = "quota";
                ck_assert_int_eq(config_parse_args(&c, 3, via, err, sizeof(err)), 0);
                ck_assert_int_eq(c.disk_via, DISK_MECH_QUOTA);
                via[2] = "auto";
                ck_assert_int_eq(config_parse_args(&c, 3, via, err, sizeof(err)), 0);
                ck_assert_int_eq(c.disk_via, DISK_MECH_NONE);
                config_free(&c);
        }
}
END_TEST

/* The ceilings of a policy's memory, /tmp and cpu_percent: by default the host's memory
 * and swap (whole pages) and 100 per CPU sbxd may run on; as flags, sizes of whole
 * pages within the bounds (1 and 2 processes are too few for --max-processes). */
START_TEST(limit_ceiling_flags) {
        struct config c;
        char err[256];
        char *argv[] = {"sbxd",
                        "--max-memory",
                        "8G",
                        "--max-tmp=64K",
                        "--max-cpu-percent",
                        "150",
                        "--max-processes",
                        "3",
                        NULL};
        char *few[] = {"sbxd", "--max-processes", "2", NULL};
        struct sysinfo si;
        cpu_set_t cpus;
        uint64_t mem;
        long page = sysconf(_SC_PAGESIZE);

        clear_env();
        ck_assert_int_eq(sysinfo(&si), 0);
        mem = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
        mem -= mem % (uint64_t)page;
        ck_assert_int_eq(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
        ck_assert_int_eq(config_init(&c, 0), 0);
        ck_assert_uint_eq(c.max_memory_bytes, mem);
        ck_assert_uint_eq(c.max_tmp_bytes, mem);
        ck_assert_uint_eq(c.max_cpu_percent, 100u * (unsigned)CPU_COUNT(&cpus));
        ck_assert_int_eq(config_parse_args(&c, 8, argv, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.max_memory_bytes, 8ull << 30);
        ck_assert_uint_eq(c.max_tmp_bytes, 64ull << 10);
        ck_assert_uint_eq(c.max_cpu_percent, 150);
        ck_assert_uint_eq(c.max_processes, 3);
        ck_assert_int_eq(config_parse_args(&c, 3, few, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "--max-processes must be 0 (no ceiling) or at least 3: sbx-init's "
                              "two processes and one command");
        config_free(&c);
        ck_assert_ptr_nonnull(strstr(config_usage(), "--max-memory SIZE"));

        expect_bad("--max-memory", "4095K");   /* below the floor */
        expect_bad("--max-memory", "1025T");   /* above 1 PiB */
        expect_bad("--max-memory", "4194305"); /* not whole pages */
        expect_bad("--max-memory", "18446744073709551615");
        expect_bad("--max-memory", "-1");
        expect_bad("--max-memory", "lots");
        expect_bad("--max-memory", "");
        expect_bad("--max-tmp", "63K");
        expect_bad("--max-tmp", "65537");
        expect_bad("--max-tmp", "2000T");
        expect_bad("--max-snapshot-bytes-per-uid", "0");
        expect_bad("--max-snapshot-bytes-per-uid", "1K");
        expect_bad("--max-snapshot-bytes-per-uid", "big");
        expect_bad("--max-tmp", "0");
        expect_bad("--max-cpu-percent", "0");
        expect_bad("--max-cpu-percent", "102401");
        expect_bad("--max-cpu-percent", "-100");
        expect_bad("--max-cpu-percent", "1.5");
        expect_bad("--max-processes", "1");
        expect_bad("--max-disk", "1048577"); /* not whole 4 KiB blocks */
        expect_bad("--default-disk", "1000001");
}
END_TEST

START_TEST(seconds) {
        uint64_t ms;
        ck_assert_int_eq(config_parse_seconds("0.2", &ms), 0);
        ck_assert_uint_eq(ms, 200);
        ck_assert_int_eq(config_parse_seconds("60", &ms), 0);
        ck_assert_uint_eq(ms, 60000);
        ck_assert_int_lt(config_parse_seconds("", &ms), 0);
        ck_assert_int_lt(config_parse_seconds("1s", &ms), 0);
        ck_assert_int_lt(config_parse_seconds("inf", &ms), 0);
        ck_assert_int_lt(config_parse_seconds("1e20", &ms), 0);
}
END_TEST

START_TEST(log_levels) {
        enum log_level l;
        ck_assert_int_eq(log_parse_level("warning", &l), 0);
        ck_assert_int_eq(l, LOG_LEVEL_WARNING);
        ck_assert_int_eq(log_parse_level("7", &l), 0);
        ck_assert_int_eq(l, LOG_LEVEL_DEBUG);
        ck_assert_int_lt(log_parse_level("8", &l), 0);
        ck_assert_int_lt(log_parse_level("", &l), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("config");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, root_defaults);
        tcase_add_test(tc, user_defaults);
        tcase_add_test(tc, env_socket_wins_and_flag_wins_over_env);
        tcase_add_test(tc, flags);
        tcase_add_test(tc, bad_flags);
        tcase_add_test(tc, lifetime_flags);
        tcase_add_test(tc, service_flags);
        tcase_add_test(tc, connection_flags);
        tcase_add_test(tc, queue_flags);
        tcase_add_test(tc, socket_group_lookup);
        tcase_add_test(tc, share_flags);
        tcase_add_test(tc, uid_base_flag);
        tcase_add_test(tc, proxy_flags);
        tcase_add_test(tc, image_entries_flag);
        tcase_add_test(tc, pty_flags);
        tcase_add_test(tc, seconds);
        tcase_add_test(tc, disk_flags);
        tcase_add_test(tc, limit_ceiling_flags);
        tcase_add_test(tc, log_levels);
        tcase_add_test(tc, warm_image_flags);
        tcase_add_test(tc, snapshot_bound_flag);
        tcase_add_test(tc, init_out_of_reach_explained);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
