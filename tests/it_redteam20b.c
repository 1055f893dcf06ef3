/* it_redteam20b.c: routes found by the second red team of issue 20 (terminals and the
 * disk limit), each a test that failed before its fix.
 *
 * pty_count_bounded_per_sandbox: every devpts instance but the host's draws from one
 * kernel pool (kernel.pty.max less kernel.pty.reserve, 3072 by default); a sandbox's
 * devpts without max= let one sandbox open them all, after which no other sandbox (nor
 * container) of any user could get a terminal. Each sandbox's devpts now holds at most
 * SBX_SANDBOX_PTYS (a tty command past them fails to start, saying why), and another
 * sandbox still gets its terminal meanwhile.
 *
 * cli_exec_t_stdout_closed_restores_terminal: `sbx exec -t ID -- cmd | head -1` (stdin
 * the terminal, stdout a pipe whose reader ends): the next write of sbx raised SIGPIPE,
 * whose default action ended sbx with its terminal left raw (no echo, no line editing)
 * for the user's shell. sbx now restores the terminal first, then ends by SIGPIPE as a
 * pipeline's writer does.
 *
 * new_syscalls_refused: Linux 6.17's file_setattr(2) sets what FS_IOC_FSSETXATTR sets
 * (the project id, the project-inherit flag): with the ioctl refused and the syscall
 * allowed, a sandbox on a kernel that has it (this host's 6.18) could move a directory
 * of its workspace out of its project and escape the project-quota disk limit.
 * open_tree_attr(2) (6.15) is open_tree with attributes: of the new mount API, which
 * the filter refuses with ENOSYS. Both now fail with ENOSYS (chattr and xfs_io fall
 * back to the ioctl, refused); file_getattr stays allowed. */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdint.h>
#include <termios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

#define CMD_MS 60000u

/* How many ptys the holder tries to open: more than a sandbox may hold. */
#define PTY_TRIES 400

/* A tty command in id; returns its result (caller frees). */
static struct sbx_result *tty_sh(sbx_client *c, const char *id, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.tty = 1;
        o.timeout_ms = CMD_MS;
        code = sbx_exec(c, id, &o, &r);
        ck_assert_msg(code == SBX_OK, "tty exec: %s: %s", sbx_code_name(code),
                      sbx_error_message(c));
        return r;
}

START_TEST(pty_count_bounded_per_sandbox) {
        struct it_daemon d;
        struct sbx_result *r, *t;
        char *a, *b, shell[1024];
        int opened = -1;
        sbx_client *c, *c2;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        a = it_create(c, NULL);
        b = it_create(c2, NULL);
        /* Opens ptmx until it fails (or PTY_TRIES), says how many, then holds them until
         * /tmp/go appears so that another sandbox asks for a terminal meanwhile. */
        snprintf(shell, sizeof(shell),
                 "exec python3 -c '\n"
                 "import os, resource, time\n"
                 "h = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
                 "resource.setrlimit(resource.RLIMIT_NOFILE, (min(h, 4096), h))\n"
                 "fds = []\n"
                 "try:\n"
                 "    while len(fds) < %d:\n"
                 "        fds.append(os.open(\"/dev/ptmx\", os.O_RDWR | os.O_NOCTTY))\n"
                 "except OSError as e:\n"
                 "    print(e)\n"
                 "open(\"/tmp/n\", \"w\").write(str(len(fds)))\n"
                 "for i in range(300):\n"
                 "    if os.path.exists(\"/tmp/go\"):\n"
                 "        break\n"
                 "    time.sleep(0.1)\n"
                 "'",
                 PTY_TRIES);
        /* The holder runs in a child process, on a client of its own. */
        {
                pid_t pid = fork();
                ck_assert_int_ge(pid, 0);
                if (pid == 0) {
                        sbx_client *hc = it_connect(&d);
                        struct sbx_result *hr = it_sh(hc, a, CMD_MS, shell);
                        _exit(hr->outcome == SBX_OUTCOME_EXITED ? 0 : 1);
                }
                /* Wait for the holder to have opened what it could. */
                for (int i = 0; i < 300; i++) {
                        struct sbx_result *p = it_sh(c, a, CMD_MS, "cat /tmp/n 2>/dev/null");
                        int done = sscanf((char *)p->stdout_data, "%d", &opened) == 1;
                        sbx_result_free(p);
                        if (done)
                                break;
                        usleep(100000);
                }
                ck_assert_msg(opened >= 0, "the holder never said how many ptys it opened");

                /* Meanwhile another sandbox (another client) still gets a terminal. */
                t = tty_sh(c2, b, "tty");
                ck_assert_msg(t->outcome == SBX_OUTCOME_EXITED && t->exit_code == 0,
                              "a tty in the other sandbox: %s (%s)", sbx_outcome_name(t->outcome),
                              t->start_error ? t->start_error : (char *)t->stdout_data);
                ck_assert_msg(strstr((char *)t->stdout_data, "/dev/pts/"), "tty: %s",
                              (char *)t->stdout_data);
                sbx_result_free(t);

                /* In the full sandbox itself a terminal is a clear, typed error. */
                {
                        struct sbx_exec_opts o;
                        struct sbx_result *fr = NULL;
                        enum sbx_code code;
                        sbx_exec_opts_init(&o);
                        o.shell = "tty";
                        o.tty = 1;
                        o.timeout_ms = CMD_MS;
                        code = sbx_exec(c, a, &o, &fr);
                        ck_assert_msg(code == SBX_OK && fr->outcome == SBX_OUTCOME_START_FAILED &&
                                              fr->start_error &&
                                              strstr(fr->start_error, "No space left"),
                                      "a tty past the sandbox's ptys: %s, %s", sbx_code_name(code),
                                      fr && fr->start_error ? fr->start_error : "-");
                        sbx_result_free(fr);
                }
                r = it_sh(c, a, CMD_MS, "touch /tmp/go");
                sbx_result_free(r);
                int st = 0;
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "holder status %x", st);
        }
        ck_assert_msg(opened <= (int)SBX_SANDBOX_PTYS,
                      "one sandbox held %d ptys (at most %u allowed)", opened, SBX_SANDBOX_PTYS);
        ck_assert_msg(opened >= (int)SBX_SANDBOX_PTYS - 1, "only %d ptys could be opened", opened);

        /* Its ptys closed, the sandbox gets a terminal again. */
        t = tty_sh(c, a, "tty");
        ck_assert_msg(t->outcome == SBX_OUTCOME_EXITED && t->exit_code == 0, "tty again: %s",
                      sbx_outcome_name(t->outcome));
        sbx_result_free(t);
        free(a);
        free(b);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx exec -t on a new pty, its stdout a pipe nobody reads: sbx must end on its own and
 * leave the pty's settings as they were. */
START_TEST(cli_exec_t_stdout_closed_restores_terminal) {
        struct winsize ws = {.ws_row = 24, .ws_col = 80};
        struct termios before, after;
        struct it_daemon d;
        sbx_client *c;
        char *id, sbx[600], buf[4096], go = 'g';
        int m, status = 0, done = 0, gate[2];
        double t0;
        pid_t pid;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        ck_assert_int_eq(pipe(gate), 0);
        pid = forkpty(&m, NULL, NULL, &ws);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int p[2];
                /* sbx runs once the test has read the pty's settings (gate): one that ran
                 * first would have made them raw already. */
                close(gate[1]);
                if (read(gate[0], &go, 1) != 1 || pipe(p) < 0)
                        _exit(126);
                close(p[0]); /* `| head -c0`: the reader is gone */
                dup2(p[1], STDOUT_FILENO);
                close(p[1]);
                signal(SIGPIPE, SIG_DFL);
                setenv("SBX_SOCKET", d.sock, 1);
                execl(sbx, "sbx", "exec", "-t", id, "--", "sh", "-c",
                      "sleep 0.5; while :; do echo y; sleep 0.01; done", (char *)NULL);
                _exit(127);
        }
        close(gate[0]);
        ck_assert_int_eq(tcgetattr(m, &before), 0);
        ck_assert_int_eq(write(gate[1], &go, 1), 1);
        close(gate[1]);
        t0 = it_now_ms();
        while (!done && it_now_ms() - t0 < 20000) {
                struct pollfd pf = {.fd = m, .events = POLLIN};
                if (poll(&pf, 1, 50) > 0 && read(m, buf, sizeof(buf)) < 0)
                        usleep(10000);
                if (waitpid(pid, &status, WNOHANG) == pid)
                        done = 1;
        }
        if (!done) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                close(m);
                ck_abort_msg("sbx did not end within 20 s with its stdout closed");
        }
        ck_assert_int_eq(tcgetattr(m, &after), 0);
        close(m);
        ck_assert_msg(before.c_lflag == after.c_lflag && before.c_iflag == after.c_iflag &&
                              before.c_oflag == after.c_oflag,
                      "terminal left changed (status %x): lflag %o -> %o, iflag %o -> %o, "
                      "oflag %o -> %o",
                      status, before.c_lflag, after.c_lflag, before.c_iflag, after.c_iflag,
                      before.c_oflag, after.c_oflag);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE, "status %x", status);
        /* The command was ended too: no y-printer left in the sandbox. */
        {
                struct sbx_result *r = NULL;
                for (int i = 0; i < 100; i++) {
                        r = it_sh(c, id, CMD_MS, "ps -eo args | grep -c '^sh -c sleep' || true");
                        if (strcmp((char *)r->stdout_data, "0\n") == 0)
                                break;
                        sbx_result_free(r);
                        r = NULL;
                        usleep(100000);
                }
                ck_assert_msg(r, "the command still runs after sbx ended");
                sbx_result_free(r);
        }
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(new_syscalls_refused) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        /* 467 open_tree_attr, 468 file_getattr, 469 file_setattr: one number on every
         * architecture since 5.1 (alpha and mips aside). */
        r = it_sh(c, id, CMD_MS,
                  "mkdir /workspace/d && python3 -c '\n"
                  "import ctypes, os, struct\n"
                  "libc = ctypes.CDLL(None, use_errno=True)\n"
                  "def call(nr, *a):\n"
                  "    ctypes.set_errno(0)\n"
                  "    r = libc.syscall(nr, *a)\n"
                  "    return \"ok\" if r >= 0 else os.strerror(ctypes.get_errno())\n"
                  "attr = ctypes.create_string_buffer(struct.pack(\"QIIII\", 0, 0, 0, 0, 0), 24)\n"
                  "print(\"file_setattr\", call(469, -100, b\"/workspace/d\", attr, 24, 0))\n"
                  "print(\"file_getattr\", call(468, -100, b\"/workspace/d\", attr, 24, 0))\n"
                  "print(\"open_tree_attr\", call(467, -100, b\"/tmp\", 1, None, 0))\n"
                  "'");
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "%s%s",
                      (char *)r->stdout_data, (char *)r->stderr_data);
        ck_assert_msg(strstr((char *)r->stdout_data, "file_setattr Function not implemented"), "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(strstr((char *)r->stdout_data, "open_tree_attr Function not implemented"),
                      "%s", (char *)r->stdout_data);
        /* Reading the attributes is harmless: only where the kernel has it. */
        ck_assert_msg(strstr((char *)r->stdout_data, "file_getattr ok") ||
                              strstr((char *)r->stdout_data, "file_getattr Function not implemented"),
                      "%s", (char *)r->stdout_data);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("redteam20b");
        TCase *tc = tcase_create("redteam20b");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, pty_count_bounded_per_sandbox);
        tcase_add_test(tc, cli_exec_t_stdout_closed_restores_terminal);
        tcase_add_test(tc, new_syscalls_refused);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
