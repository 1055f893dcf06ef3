/* it_ptys.c: the ptys sandboxes may open, from their owners' budgets and everyone's.
 *
 * Every devpts instance but the host's draws from one kernel pool (kernel.pty.max less
 * kernel.pty.reserve); each sandbox reserves the ptys of its own devpts (its max=) from
 * its owner's budget (--max-ptys-per-uid) and from sbxd's (--max-ptys), and gets what is
 * left when less, maybe none, saying which bound cut it. In each test a "holder" opens
 * /dev/ptmx in a sandbox until the kernel refuses and keeps what it opened:
 *  - pty_count_bounded_per_sandbox: one sandbox holds at most SBX_SANDBOX_PTYS, a
 *    terminal past them fails naming the cause, and another sandbox gets one meanwhile;
 *  - uid_budget: BOB (uid 3202, socket group 3100, acting in a child as in it_budget.c)
 *    fills four sandboxes with ptys: 16, 16, 8 and none, 40 in all, his budget, and a
 *    terminal in the last fails naming it; meanwhile root's sandbox has a terminal, a
 *    process on the host opens a pty, and root's next sandbox is cut by --max-ptys; once
 *    BOB's sandboxes end his ptys come back;
 *  - warm_claim_cut: a warm sandbox, set up before its owner was known, claimed by a
 *    user at his budget holds the cut number (its devpts remounted by its init), and one
 *    claimed with none left holds none;
 *  - spare_setup_cut: the same for a spare built ahead (its own Setup remounts it);
 *  - rootless_warm_claim_cut: the same remount by a rootless daemon's sandbox, in its
 *    user namespace;
 *  - adopted_sandbox_counts: a restarted daemon counts the ptys of the sandboxes it
 *    adopts (their devpts's max=) in their owners' budgets.
 * Each test stops its daemon, and its sandboxes end with it; the base directory (/var/tmp,
 * so that BOB can reach it) is removed by the fixture. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asbob.h"
#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

#define NOBODY   65534u
#define CMD_MS   60000u

/* Opens ptys in a sandbox until the kernel refuses (at most 100), writes how many to
 * /tmp/n, then keeps them until /tmp/go appears (or two minutes). */
static const char holder_sh[] =
        "exec python3 -c '\n"
        "import os, time\n"
        "fds = []\n"
        "try:\n"
        "    while len(fds) < 100:\n"
        "        fds.append(os.open(\"/dev/ptmx\", os.O_RDWR | os.O_NOCTTY))\n"
        "except OSError:\n"
        "    pass\n"
        "open(\"/tmp/n.new\", \"w\").write(str(len(fds)))\n"
        "os.rename(\"/tmp/n.new\", \"/tmp/n\")\n"
        "for i in range(1200):\n"
        "    if os.path.exists(\"/tmp/go\"):\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "'";

/* Starts the holder in sandbox id (a background command). 0, or -1 with c's error. */
static int start_holder(sbx_client *c, const char *id) {
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;
        enum sbx_code code;

        sbx_exec_opts_init(&o);
        o.shell = holder_sh;
        o.timeout_ms = 180000;
        code = sbx_exec_background(c, id, &o, &b);
        sbx_background_free(b);
        return code == SBX_OK ? 0 : -1;
}

/* How many ptys the holder of id opened, once it has said so (60 s at most); -1 when it
 * never did. */
static int holder_count(sbx_client *c, const char *id) {
        double t0 = it_now_ms();
        int n = -1;

        while (n < 0 && it_now_ms() - t0 < 60000) {
                struct sbx_exec_opts o;
                struct sbx_result *r = NULL;
                sbx_exec_opts_init(&o);
                o.shell = "cat /tmp/n 2>/dev/null";
                o.timeout_ms = CMD_MS;
                if (sbx_exec(c, id, &o, &r) == SBX_OK && r->stdout_data &&
                    sscanf((char *)r->stdout_data, "%d", &n) != 1)
                        n = -1;
                sbx_result_free(r);
                if (n < 0)
                        usleep(100000);
        }
        return n;
}

/* The first warning of sb about its ptys, or "" (points into sb). */
static const char *pty_warning(const struct sbx_sandbox *sb) {
        for (size_t i = 0; i < sb->warnings.n; i++)
                if (strstr(sb->warnings.v[i], "ptys"))
                        return sb->warnings.v[i];
        return "";
}

/* Creates sandbox id with the default policy; returns its pty warning (malloc()ed, ""
 * when none). Fails the test when it cannot be created. */
static char *create_for_ptys(sbx_client *c, const char *id) {
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        char *w;

        sbx_create_opts_init(&co);
        co.id = id;
        ck_assert_msg(sbx_create(c, &co, &sb) == SBX_OK, "create %s: %s", id, sbx_error_message(c));
        w = strdup(pty_warning(sb));
        sbx_sandbox_free(sb);
        return w;
}

/* A terminal in id: a tty command's result (caller frees). */
static struct sbx_result *tty_run(sbx_client *c, const char *id) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;

        sbx_exec_opts_init(&o);
        o.shell = "tty";
        o.tty = 1;
        o.timeout_ms = CMD_MS;
        ck_assert_msg(sbx_exec(c, id, &o, &r) == SBX_OK, "tty in %s: %s", id, sbx_error_message(c));
        return r;
}

/* Checks that a terminal works in id. */
static void assert_tty_works(sbx_client *c, const char *id) {
        struct sbx_result *r = tty_run(c, id);

        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0 && r->stdout_data &&
                              strstr((char *)r->stdout_data, "/dev/pts/"),
                      "a terminal in %s: %s (%s)", id, sbx_outcome_name(r->outcome),
                      r->start_error ? r->start_error : (char *)r->stdout_data);
        sbx_result_free(r);
}

/* Checks that a terminal in id, a sandbox without ptys, fails naming the bound flag. */
static void assert_tty_refused(sbx_client *c, const char *id, const char *flag) {
        struct sbx_result *r = tty_run(c, id);

        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED && r->start_error &&
                              strstr(r->start_error, "has no ptys") && strstr(r->start_error, flag),
                      "a terminal in %s, which has no ptys: %s (%s)", id,
                      sbx_outcome_name(r->outcome), r->start_error ? r->start_error : "-");
        sbx_result_free(r);
}

/* ---- one sandbox against the kernel's pool ------------------------------------------------ */

/* Every devpts instance but the host's draws from one kernel pool (kernel.pty.max less
 * kernel.pty.reserve, 3072 by default); a sandbox's devpts without max= let one sandbox
 * open them all, after which no other sandbox (nor container) of any user could get a
 * terminal. A sandbox's devpts holds at most SBX_SANDBOX_PTYS (a tty command past them
 * fails to start, saying why), and another sandbox still gets its terminal meanwhile. */
START_TEST(pty_count_bounded_per_sandbox) {
        struct it_daemon d;
        struct sbx_result *r = NULL;
        sbx_client *c, *c2;
        char *a, *b;
        int opened;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        a = it_create(c, NULL);
        b = it_create(c2, NULL);
        ck_assert_int_eq(start_holder(c, a), 0);
        opened = holder_count(c, a);
        ck_assert_msg(opened >= 0, "the holder never said how many ptys it opened");
        ck_assert_msg(opened <= (int)SBX_SANDBOX_PTYS,
                      "one sandbox held %d ptys (at most %u allowed)", opened, SBX_SANDBOX_PTYS);
        ck_assert_msg(opened >= (int)SBX_SANDBOX_PTYS - 1, "only %d ptys could be opened", opened);
        /* Meanwhile another sandbox (another client) still gets a terminal. */
        assert_tty_works(c2, b);
        /* In the full sandbox itself a terminal is a clear, typed error. */
        r = tty_run(c, a);
        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED && r->start_error &&
                              strstr(r->start_error, "No space left"),
                      "a tty past the sandbox's ptys: %s, %s", sbx_outcome_name(r->outcome),
                      r->start_error ? r->start_error : "-");
        sbx_result_free(r);
        /* Its ptys closed (the holder ends once /tmp/go exists), it gets a terminal again. */
        sbx_result_free(it_sh(c, a, CMD_MS, "touch /tmp/go"));
        for (int i = 0; i < 100; i++) {
                r = tty_run(c, a);
                if (r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0)
                        break;
                sbx_result_free(r);
                r = NULL;
                usleep(100000);
        }
        ck_assert_msg(r, "no terminal in the sandbox once its holder let its ptys go");
        sbx_result_free(r);
        free(a);
        free(b);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- one user at his budget ------------------------------------------------------------- */

static const char *const budget_flags[] = {"--socket-group",     "3100", "--max-ptys", "60",
                                           "--max-ptys-per-uid", "40",   "--warm",     "0",
                                           "--spares",           "0",    NULL};

#define BOB_SANDBOXES 4

/* BOB's four sandboxes, a holder in each: reports each one's pty warning and count, and
 * what a terminal in the last says. */
static void bob_fill(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = NULL;
        char id[32];
        int i;

        if (sbx_connect(d->sock, "bob", &c) != SBX_OK) {
                say(r, "connect-failed %s\n", c ? sbx_error_message(c) : "");
                return;
        }
        for (i = 0; i < BOB_SANDBOXES; i++) {
                struct sbx_create_opts co;
                struct sbx_sandbox *sb = NULL;
                snprintf(id, sizeof(id), "bob-%d", i);
                sbx_create_opts_init(&co);
                co.id = id;
                if (sbx_create(c, &co, &sb) != SBX_OK) {
                        say(r, "create-failed %s %s\n", id, sbx_error_message(c));
                        continue;
                }
                say(r, "warning %s %s\n", id, pty_warning(sb));
                sbx_sandbox_free(sb);
                if (start_holder(c, id) < 0)
                        say(r, "holder-failed %s %s\n", id, sbx_error_message(c));
        }
        for (i = 0; i < BOB_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-%d", i);
                say(r, "opened %s %d\n", id, holder_count(c, id));
        }
        {
                struct sbx_result *t = tty_run(c, "bob-3");
                say(r, "tty bob-3 %s %s\n", sbx_outcome_name(t->outcome),
                       t->start_error ? t->start_error : "-");
                sbx_result_free(t);
        }
        sbx_close(c);
}

/* BOB's sandboxes end; his next one has all its ptys again. */
static void bob_again(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = NULL;
        char id[32];

        if (sbx_connect(d->sock, "bob", &c) != SBX_OK) {
                say(r, "connect-failed %s\n", c ? sbx_error_message(c) : "");
                return;
        }
        for (int i = 0; i < BOB_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-%d", i);
                if (sbx_terminate(c, id, NULL) != SBX_OK)
                        say(r, "terminate-failed %s %s\n", id, sbx_error_message(c));
        }
        {
                char *w = create_for_ptys(c, "bob-again");
                say(r, "warning bob-again %s\n", w);
                free(w);
        }
        if (start_holder(c, "bob-again") < 0)
                say(r, "holder-failed bob-again %s\n", sbx_error_message(c));
        say(r, "opened bob-again %d\n", holder_count(c, "bob-again"));
        sbx_close(c);
}

/* The number after "opened ID " in a report, or -2 when it is not there. */
static int opened_in(const char *rep, const char *id) {
        char key[64];
        const char *p;
        int n;

        snprintf(key, sizeof(key), "opened %s ", id);
        p = strstr(rep, key);
        return p && sscanf(p + strlen(key), "%d", &n) == 1 ? n : -2;
}

/* The rest of the line after "warning ID " in a report ("" when none), into buf. */
static const char *warning_in(const char *rep, const char *id, char *buf, size_t len) {
        char key[64];
        const char *p;
        size_t n;

        snprintf(key, sizeof(key), "warning %s ", id);
        p = strstr(rep, key);
        buf[0] = '\0';
        if (!p)
                return buf;
        p += strlen(key);
        n = strcspn(p, "\n");
        snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
        return buf;
}

/* A process on the host (outside any sandbox) opens a pty of the host's devpts. */
static void assert_host_pty(void) {
        int fd = posix_openpt(O_RDWR | O_NOCTTY);

        ck_assert_msg(fd >= 0, "a pty on the host: %s", strerror(errno));
        ck_assert_int_eq(grantpt(fd), 0);
        ck_assert_int_eq(unlockpt(fd), 0);
        ck_assert_ptr_nonnull(ptsname(fd));
        close(fd);
}

START_TEST(uid_budget) {
        static const int want[BOB_SANDBOXES] = {16, 16, 8, 0};
        struct it_daemon d;
        char *rep, *w, id[32], line[512];
        int i, sum = 0;
        sbx_client *c;

        it_daemon_start(&d, budget_flags);
        rep = as_bob(bob_fill, &d, NULL);
        for (i = 0; i < BOB_SANDBOXES; i++) {
                int n;
                snprintf(id, sizeof(id), "bob-%d", i);
                n = opened_in(rep, id);
                ck_assert_msg(n >= 0, "%s's holder: %s", id, rep);
                sum += n;
                ck_assert_msg(n == want[i], "%s opened %d ptys, not %d: %s", id, n, want[i], rep);
                warning_in(rep, id, line, sizeof(line));
                if (want[i] == SBX_SANDBOX_PTYS)
                        ck_assert_msg(line[0] == '\0', "%s: %s", id, line);
                else
                        ck_assert_msg(strstr(line, "--max-ptys-per-uid 40") &&
                                              strstr(line, want[i] ? "has 8 ptys" : "no ptys"),
                                      "%s's warning: '%s'", id, line);
        }
        ck_assert_msg(sum <= 40, "BOB's sandboxes opened %d ptys, over his 40", sum);
        ck_assert_msg(strstr(rep, "tty bob-3 start_failed") && strstr(rep, "has no ptys") &&
                              strstr(rep, "--max-ptys-per-uid 40"),
                      "a terminal in BOB's sandbox without ptys: %s", rep);
        free(rep);

        /* Root, the other user, still has a terminal; the host still has ptys. */
        c = it_connect(&d);
        w = create_for_ptys(c, "root-a");
        ck_assert_msg(w[0] == '\0', "root-a: %s", w);
        free(w);
        assert_tty_works(c, "root-a");
        assert_host_pty();
        /* sbxd's bound: 40 + 16 of 60 are taken, root's next sandbox gets 4. */
        w = create_for_ptys(c, "root-b");
        ck_assert_msg(strstr(w, "has 4 ptys") && strstr(w, "--max-ptys 60"), "root-b: %s", w);
        free(w);
        ck_assert_int_eq(start_holder(c, "root-b"), 0);
        ck_assert_int_eq(holder_count(c, "root-b"), 4);

        /* BOB's sandboxes end: his ptys come back. */
        rep = as_bob(bob_again, &d, NULL);
        ck_assert_msg(strstr(rep, "warning bob-again \n") && opened_in(rep, "bob-again") == 16,
                      "after BOB's sandboxes ended: %s", rep);
        free(rep);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- sandboxes made before their owner was known ------------------------------------------ */

/* Creates id, which must take what the daemon made ahead (the log's line for it holds
 * taken, e.g. "claimed"), and checks that it holds want ptys, with a warning naming
 * flag when fewer than SBX_SANDBOX_PTYS. */
static void create_ahead(struct it_daemon *d, sbx_client *c, const char *id, const char *taken,
                         int want, const char *flag) {
        char needle[128], *w = create_for_ptys(c, id);

        snprintf(needle, sizeof(needle), "sbx=%s: %s", id, taken);
        ck_assert_msg(it_log_count(d, needle) == 1, "%s was not made ahead (no '%s' in the log)",
                      id, needle);
        if (want == (int)SBX_SANDBOX_PTYS)
                ck_assert_msg(w[0] == '\0', "%s: %s", id, w);
        else
                ck_assert_msg(strstr(w, flag) && strstr(w, want ? "ptys, not" : "no ptys"),
                              "%s: '%s'", id, w);
        free(w);
        ck_assert_int_eq(start_holder(c, id), 0);
        ck_assert_int_eq(holder_count(c, id), want);
}

/* Three warm sandboxes claimed in turn by one user with a budget of 20: 16, 4, none. */
static void claim_three(struct it_daemon *d) {
        sbx_client *c = it_connect(d);

        ck_assert_int_eq(it_wait_log(d, ": warm and ready", 1), 1);
        create_ahead(d, c, "pty-a", "claimed", 16, NULL);
        ck_assert_int_eq(it_wait_log(d, ": warm and ready", 2), 2);
        create_ahead(d, c, "pty-b", "claimed", 4, "--max-ptys-per-uid 20");
        ck_assert_int_eq(it_wait_log(d, ": warm and ready", 3), 3);
        create_ahead(d, c, "pty-c", "claimed", 0, "--max-ptys-per-uid 20");
        assert_tty_refused(c, "pty-c", "--max-ptys-per-uid 20");
        sbx_close(c);
}

static const char *const warm_flags[] = {"--max-ptys-per-uid", "20", "--warm", "1",
                                         "--spares",           "0",  NULL};

START_TEST(warm_claim_cut) {
        struct it_daemon d;

        it_daemon_start(&d, warm_flags);
        claim_three(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(rootless_warm_claim_cut) {
        struct it_daemon d;

        it_daemon_start_as(&d, NOBODY, NOBODY, warm_flags);
        claim_three(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(spare_setup_cut) {
        static const char *const flags[] = {"--max-ptys-per-uid", "20", "--warm", "0",
                                            "--spares",           "2",  NULL};
        struct it_daemon d;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        ck_assert_int_eq(it_wait_log(&d, ": spare built", 1), 1);
        create_ahead(&d, c, "pty-a", "takes the built spare", 16, NULL);
        ck_assert_int_eq(it_wait_log(&d, ": spare built", 2), 2);
        create_ahead(&d, c, "pty-b", "takes the built spare", 4, "--max-ptys-per-uid 20");
        ck_assert_int_eq(it_wait_log(&d, ": spare built", 3), 3);
        create_ahead(&d, c, "pty-c", "takes the built spare", 0, "--max-ptys-per-uid 20");
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- a restarted daemon ------------------------------------------------------------------- */

START_TEST(adopted_sandbox_counts) {
        static const char *const flags[] = {"--max-ptys-per-uid", "20", "--warm", "0",
                                            "--spares",           "0",  NULL};
        struct it_daemon d;
        sbx_client *c;
        char *w;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        w = create_for_ptys(c, "pty-a");
        ck_assert_msg(w[0] == '\0', "pty-a: %s", w);
        free(w);
        sbx_close(c);
        it_daemon_kill(&d);
        it_daemon_restart(&d, flags);
        ck_assert_int_ge(it_wait_log(&d, "sbx=pty-a: adopted", 1), 1);
        c = it_connect(&d);
        w = create_for_ptys(c, "pty-b");
        ck_assert_msg(strstr(w, "has 4 ptys") && strstr(w, "held 16 ptys") &&
                              strstr(w, "--max-ptys-per-uid 20"),
                      "pty-b, after pty-a was adopted: '%s'", w);
        free(w);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("ptys");
        struct {
                const char *name;
                const TTest *test;
        } cases[] = {
                {"pty_count_bounded_per_sandbox", pty_count_bounded_per_sandbox},
                {"uid_budget", uid_budget},
                {"warm_claim_cut", warm_claim_cut},
                {"rootless_warm_claim_cut", rootless_warm_claim_cut},
                {"spare_setup_cut", spare_setup_cut},
                {"adopted_sandbox_counts", adopted_sandbox_counts},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                TCase *tc = tcase_create(cases[i].name);
                tcase_add_unchecked_fixture(tc, it_fixture_setup_var, it_fixture_teardown);
                tcase_set_timeout(tc, 300);
                tcase_add_test(tc, cases[i].test);
                suite_add_tcase(s, tc);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
