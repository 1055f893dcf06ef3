/* check_client_ssh.c: unit tests of libsbx's ssh:// transport (libsbx_ssh.c) against a
 * fake ssh.
 *
 * SBX_SSH names a shell script that records its pid, its process group and its
 * arguments in the test's directory and then plays one way ssh can end, chosen by
 * FAKE_SSH_MODE: refused (exit 255 with ssh's words), no sbx on the remote side (127),
 * no daemon there (125), a login banner on stdout, or a hang. This tests the command
 * line libsbx builds (option order, the remote command's quoting, the URL forms and the
 * URLs refused before anything starts), the error messages, the bound on a hang, and
 * that every ssh it started is reaped. The real thing, against an OpenSSH server and a
 * daemon (and sbx_close of a live link), is tests/it_ssh.c. The directory is made and
 * removed by an unchecked fixture. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "sbx.h"

#define TEST_TIMEOUT_SECS 60

static char dir[256];

static void tmpdir_setup(void) {
        snprintf(dir, sizeof(dir), "/tmp/sbx-ssh-unit.XXXXXX");
        if (!mkdtemp(dir))
                abort();
}

static void tmpdir_teardown(void) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}

static const char fake_ssh[] =
        "#!/bin/sh\n"
        "d=\"$FAKE_SSH_DIR\"\n"
        "echo $$ > \"$d/pid\"\n"
        "cut -d' ' -f5 /proc/$$/stat > \"$d/pgrp\"\n"
        ": > \"$d/args\"\n"
        "for a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$d/args\"; done\n"
        "case \"$FAKE_SSH_MODE\" in\n"
        "refused) echo 'ssh: connect to host h port 2222: Connection refused' >&2; exit 255;;\n"
        "nosbx) echo 'some warning' >&2; echo 'sh: 1: sbx: not found' >&2; exit 127;;\n"
        "nodaemon) echo 'sbx: UNAVAILABLE: cannot connect to sbxd at /x on this host' >&2; "
        "exit 125;;\n"
        "banner) echo 'Welcome to the box!'; exec sleep 60;;\n"
        "hang) echo 'debug1: still connecting' >&2; exec sleep 60;;\n"
        "esac\n"
        "exit 1\n";

/* Installs the fake ssh for mode and returns nothing; SBX_SSH and friends point at it. */
static void use_fake(const char *mode) {
        char path[300];
        FILE *f;

        snprintf(path, sizeof(path), "%s/fake-ssh", dir);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(fake_ssh, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(path, 0755), 0);
        setenv("SBX_SSH", path, 1);
        setenv("FAKE_SSH_DIR", dir, 1);
        setenv("FAKE_SSH_MODE", mode, 1);
        unsetenv("SBX_SSH_OPTS");
        unsetenv("SBX_SSH_REMOTE_SBX");
        snprintf(path, sizeof(path), "%s/args", dir);
        unlink(path);
}

static char *slurp(const char *name) {
        char path[300], *buf = calloc(1, 8192);
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "r");
        if (!f) {
                free(buf);
                return NULL;
        }
        n = fread(buf, 1, 8191, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

static long read_number(const char *name) {
        char *t = slurp(name);
        long v;
        ck_assert_ptr_nonnull(t);
        v = strtol(t, NULL, 10);
        free(t);
        return v;
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Connects to url, which must fail with want and a message holding each needle. The
 * client is returned (still to be closed) when ret is not NULL. */
static void connect_fails(const char *url, enum sbx_code want, const char *const *needles,
                          sbx_client **ret) {
        sbx_client *c = NULL;
        enum sbx_code rc = sbx_connect(url, "check", &c);

        ck_assert_ptr_nonnull(c);
        ck_assert_msg(rc == want, "%s: %s: %s", url, sbx_code_name(rc), sbx_error_message(c));
        for (; needles && *needles; needles++)
                ck_assert_msg(strstr(sbx_error_message(c), *needles), "'%s' not in: %s", *needles,
                              sbx_error_message(c));
        if (ret)
                *ret = c;
        else
                sbx_close(c);
}

/* The ssh the test's fake recorded has been reaped: its pid is gone. */
static void assert_reaped(void) {
        long pid = read_number("pid");
        ck_assert_int_eq(kill((pid_t)pid, 0), -1);
        ck_assert_int_eq(errno, ESRCH);
}

START_TEST(test_command_line) {
        char *args;

        use_fake("refused");
        setenv("SBX_SSH_OPTS", " -F /x/cfg\t-o BatchMode=no ", 1);
        setenv("SBX_SSH_REMOTE_SBX", "/opt/my sbx/sbx", 1);
        connect_fails("ssh://al@h:2222/tmp/a b'c.sock", SBX_UNAVAILABLE,
                      (const char *[]){"cannot reach sbxd at ssh://al@h:2222/tmp/a b'c.sock: ",
                                       "ssh failed (exit status 255): ssh: connect to host h "
                                       "port 2222: Connection refused",
                                       NULL},
                      NULL);
        args = slurp("args");
        ck_assert_ptr_nonnull(args);
        /* The user's options first (the first value of an ssh option wins), the remote
         * command one word, quoted for the remote shell. */
        ck_assert_str_eq(args, "-F\n/x/cfg\n-o\nBatchMode=no\n-o\nBatchMode=yes\n-T\n-x\n-a\n"
                               "-l\nal\n-p\n2222\n--\nh\n"
                               "'/opt/my sbx/sbx' dial-stdio --socket '/tmp/a b'\\''c.sock'\n");
        free(args);
        /* ssh runs in a process group of its own: a Ctrl-C for sbx exec is not its. */
        ck_assert_int_eq(read_number("pgrp"), read_number("pid"));
        assert_reaped();

        /* The short forms: the remote default socket, ssh's default user and port. */
        use_fake("refused");
        connect_fails("ssh://host.example", SBX_UNAVAILABLE, NULL, NULL);
        args = slurp("args");
        ck_assert_str_eq(args, "-o\nBatchMode=yes\n-T\n-x\n-a\n--\nhost.example\nsbx dial-stdio\n");
        free(args);
        use_fake("refused");
        setenv("SBX_SSH_REMOTE_SBX", "~/bin/sbx", 1);
        connect_fails("ssh://u@h/run/sbxd/sbxd.sock", SBX_UNAVAILABLE, NULL, NULL);
        args = slurp("args");
        ck_assert_str_eq(args, "-o\nBatchMode=yes\n-T\n-x\n-a\n-l\nu\n--\nh\n"
                               "~/bin/sbx dial-stdio --socket /run/sbxd/sbxd.sock\n");
        free(args);
        use_fake("refused");
        connect_fails("ssh://[::1]:22/", SBX_UNAVAILABLE, NULL, NULL);
        args = slurp("args");
        ck_assert_str_eq(args, "-o\nBatchMode=yes\n-T\n-x\n-a\n-p\n22\n--\n::1\nsbx dial-stdio\n");
        free(args);
}
END_TEST

/* URLs that are refused before any ssh starts. */
START_TEST(test_bad_urls) {
        static const char *const bad[] = {
                "ssh://",        "ssh:///run/sbxd/sbxd.sock",
                "ssh://@h",      "ssh://u@",
                "ssh://h:",      "ssh://h:0",
                "ssh://h:65536", "ssh://h:22x",
                "ssh://h:-1",    "ssh://-oProxyCommand=x",
                "ssh://-u@h",    "ssh://[::1",
                "ssh://[::1]x",  "ssh://h\tx",
                "ssh://h/a\nb",  "ssh://h'x",
        };
        char *args;

        use_fake("refused");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                connect_fails(bad[i], SBX_INVALID_ARGUMENT,
                              (const char *[]){"bad ssh URL", "ssh://[user@]host[:port]", NULL},
                              NULL);
        args = slurp("args");
        ck_assert_ptr_null(args);
}
END_TEST

/* What ssh's exit says, in words with what to do. */
START_TEST(test_exit_statuses) {
        use_fake("nosbx");
        connect_fails("ssh://h", SBX_UNAVAILABLE,
                      (const char *[]){"no sbx on the remote side (exit status 127: sh: 1: sbx: "
                                       "not found)",
                                       "SBX_SSH_REMOTE_SBX", NULL},
                      NULL);
        assert_reaped();
        use_fake("nodaemon");
        connect_fails("ssh://h/x", SBX_UNAVAILABLE,
                      (const char *[]){"`sbx dial-stdio` on the remote side failed (exit status "
                                       "125): sbx: UNAVAILABLE: cannot connect to sbxd at /x",
                                       NULL},
                      NULL);
        assert_reaped();
        setenv("SBX_SSH", "/nonexistent/ssh", 1);
        connect_fails("ssh://h", SBX_UNAVAILABLE,
                      (const char *[]){"cannot start /nonexistent/ssh: No such file or directory",
                                       "openssh-client", NULL},
                      NULL);
}
END_TEST

/* Text where the protocol should be: said at once, with the text. */
START_TEST(test_banner) {
        double t0;

        use_fake("banner");
        t0 = now_ms();
        connect_fails("ssh://h", SBX_UNAVAILABLE,
                      (const char *[]){"the remote side wrote 'Welcome to the box!' instead of "
                                       "sbxd's protocol",
                                       NULL},
                      NULL);
        ck_assert_double_lt(now_ms() - t0, 15000); /* room for a loaded machine */
        assert_reaped(); /* it did not end by itself: terminated */
}
END_TEST

/* An ssh that never answers is bounded by the call timeout, says what ssh said, and is
 * ended and reaped. */
START_TEST(test_hang_is_bounded) {
        struct sbx_sandbox_list *l = NULL;
        sbx_client *c = NULL;
        double t0;

        use_fake("refused");
        connect_fails("ssh://h", SBX_UNAVAILABLE, NULL, &c);
        sbx_set_call_timeout_ms(c, 1000);
        setenv("FAKE_SSH_MODE", "hang", 1);
        t0 = now_ms();
        ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_UNAVAILABLE);
        ck_assert_double_lt(now_ms() - t0, 15000); /* room for a loaded machine */
        ck_assert_int_eq(sbx_errno(c), ETIMEDOUT);
        ck_assert_msg(strstr(sbx_error_message(c), "did not answer within 1000 ms") &&
                              strstr(sbx_error_message(c), "ssh said: debug1: still connecting"),
                      "%s", sbx_error_message(c));
        assert_reaped();
        sbx_close(c);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("client_ssh");
        TCase *tc = tcase_create("fake_ssh");

        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_set_timeout(tc, TEST_TIMEOUT_SECS);
        tcase_add_test(tc, test_command_line);
        tcase_add_test(tc, test_bad_urls);
        tcase_add_test(tc, test_exit_statuses);
        tcase_add_test(tc, test_banner);
        tcase_add_test(tc, test_hang_is_bounded);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
