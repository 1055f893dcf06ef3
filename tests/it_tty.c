/* it_tty.c: integration tests of terminals (RunCommand.tty) against a real sbxd.
 *
 * A command on a tty sees a terminal of its sandbox's own devpts on stdin, stdout and
 * stderr, as its controlling terminal, with the size asked for; CommandInput resizes it
 * (SIGWINCH reaches a shell's trap); a Python REPL, an interactive shell, top and vi are
 * driven over streamed input; Ctrl-C typed (byte 0x03) interrupts the foreground
 * command through the line discipline; the output cap, the timeout and the draining
 * rules hold as for pipes, and every byte printed arrives; bad sizes are typed errors;
 * the records say tty. The `sbx exec -t` cases drive the real sbx binary on a pty the
 * test opens (forkpty): the size of the client's terminal reaches the command and
 * follows its changes, and the client terminal's settings are the same after sbx ends
 * (normally, at a remote timeout, by signals, with the daemon killed) as before.
 * Each test asserts an outcome and a bound. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

/* ---- a tty command run on a thread of its own, fed through a pipe --------------------- */

struct session {
        struct it_daemon *d;
        const char *id;
        struct sbx_exec_opts o;
        int in[2]; /* the test writes in[1]; libsbx feeds in[0] to the command */
        pthread_mutex_t mu;
        pthread_cond_t cv;
        char out[1 << 16];
        size_t len;
        char command_id[64];
        int done;
        enum sbx_code code;
        struct sbx_result *r;
};

static void s_started(void *ud, const char *command_id) {
        struct session *s = ud;
        pthread_mutex_lock(&s->mu);
        snprintf(s->command_id, sizeof(s->command_id), "%s", command_id);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
}

/* A command that waits for a slot has its ID too (it can be resized while it waits). */
static void s_queued(void *ud, const char *command_id, uint32_t ahead) {
        (void)ahead;
        s_started(ud, command_id);
}

static void s_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                     size_t len) {
        struct session *s = ud;
        (void)offset;
        ck_assert_int_eq(stream, SBX_STDOUT); /* a terminal has one stream */
        pthread_mutex_lock(&s->mu);
        if (len > sizeof(s->out) - 1 - s->len)
                len = sizeof(s->out) - 1 - s->len;
        memcpy(s->out + s->len, data, len);
        s->len += len;
        s->out[s->len] = '\0';
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
}

static void *s_run(void *arg) {
        struct session *s = arg;
        sbx_client *c = NULL;
        enum sbx_code code = sbx_connect(s->d->sock, "tty", &c);

        if (code == SBX_OK)
                code = sbx_exec(c, s->id, &s->o, &s->r);
        sbx_close(c);
        close(s->in[0]);
        pthread_mutex_lock(&s->mu);
        s->code = code;
        s->done = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return NULL;
}

/* Starts shell on a rows x cols terminal (0: the default), its stdin streamed. */
static void s_start(struct session *s, pthread_t *th, struct it_daemon *d, const char *id,
                    const char *shell, unsigned rows, unsigned cols, uint64_t timeout_ms) {
        memset(s, 0, sizeof(*s));
        s->d = d;
        s->id = id;
        ck_assert_int_eq(pipe2(s->in, O_CLOEXEC), 0);
        sbx_exec_opts_init(&s->o);
        s->o.shell = shell;
        s->o.timeout_ms = timeout_ms;
        s->o.tty = 1;
        s->o.rows = rows;
        s->o.cols = cols;
        s->o.stdin_stream = 1;
        s->o.stdin_fd = s->in[0];
        s->o.on_started = s_started;
        s->o.on_queued = s_queued;
        s->o.on_output = s_output;
        s->o.userdata = s;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
        ck_assert_int_eq(pthread_create(th, NULL, s_run, s), 0);
}

/* Waits (10 s at most) until the command started and its output holds want (NULL:
 * started). Returns 1 when it did. */
static int s_wait(struct session *s, const char *want) {
        struct timespec until;
        int ok;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_mutex_lock(&s->mu);
        while (!s->done && !(s->command_id[0] && (!want || strstr(s->out, want))))
                if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
                        break;
        ok = s->command_id[0] && (!want || strstr(s->out, want));
        pthread_mutex_unlock(&s->mu);
        return ok;
}

/* Types text on the command's terminal. */
static void s_type(struct session *s, const char *text) {
        ck_assert_int_eq(write(s->in[1], text, strlen(text)), (ssize_t)strlen(text));
}

/* Ends the input, waits for the result (which the caller frees). */
static struct sbx_result *s_end(struct session *s, pthread_t th) {
        close(s->in[1]);
        pthread_join(th, NULL);
        ck_assert_msg(s->code == SBX_OK, "sbx_exec: %s", sbx_code_name(s->code));
        return s->r;
}

/* Runs shell on a terminal without streaming: stdin as given (NULL: none). */
static struct sbx_result *tty_run(sbx_client *c, const char *id, const char *shell, unsigned rows,
                                  unsigned cols, const char *stdin_text, uint64_t max_out,
                                  uint64_t timeout_ms) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code rc;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.tty = 1;
        o.rows = rows;
        o.cols = cols;
        o.timeout_ms = timeout_ms;
        o.max_stdout_bytes = max_out;
        if (stdin_text) {
                o.stdin_data = stdin_text;
                o.stdin_len = strlen(stdin_text);
        }
        rc = sbx_exec(c, id, &o, &r);
        ck_assert_msg(rc == SBX_OK, "sbx_exec: %s: %s", sbx_code_name(rc), sbx_error_message(c));
        return r;
}

static void assert_exited(const struct sbx_result *r, int code) {
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == code,
                      "outcome %s exit %d (want exit %d); stdout: %.300s",
                      sbx_outcome_name(r->outcome), r->exit_code, code,
                      (const char *)r->stdout_data);
}

/* ---- the terminal the command sees --------------------------------------------------- */

/* stdin, stdout and stderr are one terminal of the sandbox's own devpts (the only pty
 * there, /dev/pts/0, whatever the host has open), the controlling terminal of the
 * command's session, owned by the command's user; everything comes as stdout. */
START_TEST(tty_is_the_sandboxes_own_controlling_terminal) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = tty_run(c, id,
                    "tty; test -t 0 -a -t 1 -a -t 2 && echo ALL-TTY; ls /dev/pts | tr '\\n' ' '; "
                    "echo; test \"$(stat -c %u \"$(tty)\")\" = \"$(id -u)\" && echo MINE; "
                    "echo to-stderr >&2; ps -o tty= -p $$; exec </dev/tty && echo CTTY",
                    0, 0, NULL, 0, 10000);
        assert_exited(r, 0);
        ck_assert_msg(strstr((char *)r->stdout_data, "/dev/pts/0\r\n"), "tty said: %s",
                      r->stdout_data);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "ALL-TTY\r\n"));
        ck_assert_msg(strstr((char *)r->stdout_data, "0 ptmx \r\n"), "devpts holds: %s",
                      r->stdout_data);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "MINE"));
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "to-stderr"));
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "pts/0"));
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "CTTY"));
        ck_assert_uint_eq(r->stderr_len, 0);
        sbx_result_free(r);
        /* Without tty nothing changes: no terminal. */
        r = it_sh(c, id, 10000, "test -t 0 || test -t 1 || echo NO-TTY");
        ck_assert_str_eq((char *)r->stdout_data, "NO-TTY\n");
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* stty size shows the size asked for, and 24 x 80 without one. */
START_TEST(tty_size_as_asked) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = tty_run(c, id, "stty size", 33, 101, NULL, 0, 10000);
        assert_exited(r, 0);
        ck_assert_str_eq((char *)r->stdout_data, "33 101\r\n");
        sbx_result_free(r);
        r = tty_run(c, id, "stty size", 0, 0, NULL, 0, 10000);
        ck_assert_str_eq((char *)r->stdout_data, "24 80\r\n");
        sbx_result_free(r);
        r = tty_run(c, id, "stty size", 1000, 1, NULL, 0, 10000);
        ck_assert_str_eq((char *)r->stdout_data, "1000 1\r\n");
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Sizes out of range, rows/cols without tty, and a resize of a command without a
 * terminal are typed errors; nothing runs for a refused RunCommand. */
START_TEST(tty_bad_sizes_are_typed_errors) {
        static const unsigned bad[][2] = {{1001, 80}, {24, 5000}, {4000000000u, 80}};
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct session s;
        pthread_t th;
        sbx_client *c, *c2;
        char *id;
        size_t i;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        id = it_create(c, NULL);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                sbx_exec_opts_init(&o);
                o.shell = "echo ran";
                o.tty = 1;
                o.rows = bad[i][0];
                o.cols = bad[i][1];
                ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_INVALID_ARGUMENT);
                ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "rows and cols"));
                ck_assert_ptr_null(r);
        }
        /* rows/cols without tty: the request contradicts itself. */
        sbx_exec_opts_init(&o);
        o.shell = "echo ran";
        o.rows = 30;
        o.cols = 90;
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "tty"));
        /* A resize out of range, or of a command unknown. */
        s_start(&s, &th, &d, id, "echo ready; cat >/dev/null", 0, 0, 20000);
        ck_assert(s_wait(&s, "ready"));
        ck_assert_int_eq(sbx_resize(c2, id, s.command_id, 0, 80), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_resize(c2, id, s.command_id, 24, 1001), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_resize(c2, id, "c-999", 24, 80), SBX_NOT_FOUND);
        /* The end of the input is ^D on the terminal: cat ends. */
        r = s_end(&s, th);
        assert_exited(r, 0);
        sbx_result_free(r);
        /* Nothing ran for the refused requests: the session was the first command. */
        ck_assert_str_eq(s.command_id, "c-1");
        free(id);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A resize of a pipe command is FAILED_PRECONDITION. */
START_TEST(tty_resize_without_terminal_is_failed_precondition) {
        struct it_daemon d;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct session s;
        pthread_t th;
        sbx_client *c, *c2;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        id = it_create(c, NULL);
        memset(&s, 0, sizeof(s));
        s.d = &d;
        s.id = id;
        ck_assert_int_eq(pipe2(s.in, O_CLOEXEC), 0);
        pthread_mutex_init(&s.mu, NULL);
        pthread_cond_init(&s.cv, NULL);
        sbx_exec_opts_init(&s.o);
        s.o.shell = "echo ready; cat >/dev/null";
        s.o.timeout_ms = 20000;
        s.o.stdin_stream = 1;
        s.o.stdin_fd = s.in[0];
        s.o.on_started = s_started;
        s.o.on_output = s_output;
        s.o.userdata = &s;
        ck_assert_int_eq(pthread_create(&th, NULL, s_run, &s), 0);
        ck_assert(s_wait(&s, "ready"));
        ck_assert_int_eq(sbx_resize(c2, id, s.command_id, 30, 90), SBX_FAILED_PRECONDITION);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c2), "no terminal"));
        r = s_end(&s, th);
        assert_exited(r, 0);
        sbx_result_free(r);
        (void)o;
        free(id);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* CommandInput's rows/cols resize the terminal: the shell's WINCH trap runs and stty
 * sees the new size. */
START_TEST(tty_resize_sends_sigwinch) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c, *c2;
        char *id;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        id = it_create(c, NULL);
        s_start(&s, &th, &d, id,
                "trap 'echo WINCH $(stty size)' WINCH; echo ready $(stty size); "
                "while :; do sleep 0.05; done",
                20, 70, 20000);
        ck_assert_msg(s_wait(&s, "ready 20 70"), "output: %s", s.out);
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_resize(c2, id, s.command_id, 50, 132), SBX_OK);
        ck_assert_msg(s_wait(&s, "WINCH 50 132"), "output: %s", s.out);
        ck_assert_double_lt(it_now_ms() - t0, 15000); /* room for a loaded machine */
        ck_assert_int_eq(sbx_resize(c2, id, s.command_id, 7, 9), SBX_OK);
        ck_assert_msg(s_wait(&s, "WINCH 7 9"), "output: %s", s.out);
        ck_assert_int_eq(sbx_cancel(c2, id, s.command_id), SBX_OK);
        r = s_end(&s, th);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_CANCELLED);
        sbx_result_free(r);
        free(id);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A command that waits for a slot is resized before it starts: it starts with that
 * size. */
START_TEST(tty_resize_while_queued) {
        struct it_daemon d;
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        struct session a, b;
        pthread_t ta, tb;
        sbx_client *c, *c2;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        sbx_create_opts_init(&co);
        co.policy.limits.set |= SBX_LIMIT_COMMANDS;
        co.policy.limits.commands = 1;
        ck_assert_int_eq(sbx_create(c, &co, &sb), SBX_OK);
        s_start(&a, &ta, &d, sb->id, "echo ready; exec sleep 30", 0, 0, 30000);
        ck_assert(s_wait(&a, "ready"));
        s_start(&b, &tb, &d, sb->id, "stty size", 0, 0, 30000);
        ck_assert(s_wait(&b, NULL)); /* its ID, from CommandQueued */
        ck_assert_int_eq(sbx_resize(c2, sb->id, b.command_id, 11, 22), SBX_OK);
        usleep(20 * 1000); /* so that its wait lasts whole milliseconds (queued_ms) */
        ck_assert_int_eq(sbx_cancel(c2, sb->id, a.command_id), SBX_OK);
        r = s_end(&a, ta);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_CANCELLED);
        sbx_result_free(r);
        ck_assert_msg(s_wait(&b, "11 22"), "output: %s", b.out);
        r = s_end(&b, tb);
        assert_exited(r, 0);
        ck_assert_uint_gt(r->queued_ms, 0);
        sbx_result_free(r);
        sbx_sandbox_free(sb);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- interactive programs ------------------------------------------------------------ */

/* A Python REPL on the terminal: a line typed is evaluated, exit() ends it. */
START_TEST(tty_python_repl) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        s_start(&s, &th, &d, id, "exec python3 -q", 0, 0, 30000);
        ck_assert_msg(s_wait(&s, ">>> "), "no prompt: %s", s.out);
        s_type(&s, "print(6*7)\n");
        ck_assert_msg(s_wait(&s, "\r\n42\r\n"), "output: %s", s.out);
        s_type(&s, "import sys; sys.exit(4)\n");
        r = s_end(&s, th);
        assert_exited(r, 4);
        sbx_result_free(r);
        /* The same with the input given whole (typed ahead: a ^D typed ahead is lost
         * when readline switches the terminal to raw mode, so the input says exit). */
        r = tty_run(c, id, "python3 -q", 0, 0, "print(6*7)\nexit()\n", 0, 30000);
        assert_exited(r, 0);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "\r\n42\r\n"));
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* An interactive shell runs what is typed and exits with the status asked for. */
START_TEST(tty_interactive_shell) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        s_start(&s, &th, &d, id, "exec bash --norc -i", 0, 0, 30000);
        ck_assert_msg(s_wait(&s, "$ "), "no prompt: %s", s.out);
        s_type(&s, "echo $((6*7))x; case $- in *i*) echo INTERACTIVE;; esac\n");
        ck_assert_msg(s_wait(&s, "42x\r\nINTERACTIVE"), "output: %s", s.out);
        /* Job control works: the shell owns the terminal. */
        s_type(&s, "sleep 30\n");
        usleep(300 * 1000);
        s_type(&s, "\x03");
        s_type(&s, "echo after-$?\n");
        ck_assert_msg(s_wait(&s, "after-130"), "output: %s", s.out);
        s_type(&s, "exit 5\n");
        r = s_end(&s, th);
        assert_exited(r, 5);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Full-screen programs: top draws and quits on q; vi writes a file typed into it. */
START_TEST(tty_full_screen_programs) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        s_start(&s, &th, &d, id, "TERM=xterm exec top -d 0.2", 30, 100, 30000);
        ck_assert_msg(s_wait(&s, "load average"), "top drew: %.300s", s.out);
        s_type(&s, "q");
        r = s_end(&s, th);
        assert_exited(r, 0);
        sbx_result_free(r);
        s_start(&s, &th, &d, id, "TERM=xterm exec vi -u NONE /workspace/v.txt", 30, 100, 30000);
        ck_assert(s_wait(&s, NULL));
        usleep(500 * 1000);
        s_type(&s, "ihello from vi\x1b:wq\r");
        r = s_end(&s, th);
        assert_exited(r, 0);
        sbx_result_free(r);
        r = it_sh(c, id, 10000, "cat /workspace/v.txt");
        ck_assert_str_eq((char *)r->stdout_data, "hello from vi\n");
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Ctrl-C typed (byte 0x03) interrupts the foreground command through the line
 * discipline: SIGINT, not a kill by the daemon. */
START_TEST(tty_ctrl_c_interrupts) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c;
        char *id;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        s_start(&s, &th, &d, id, "echo ready; exec sleep 100", 0, 0, 30000);
        ck_assert(s_wait(&s, "ready"));
        usleep(200 * 1000);
        t0 = it_now_ms();
        s_type(&s, "\x03");
        r = s_end(&s, th);
        /* At the interrupt, not at the sleep's end (room for a loaded machine). */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_assert_msg(r->outcome == SBX_OUTCOME_SIGNALED && r->signal == SIGINT, "outcome %s %d",
                      sbx_outcome_name(r->outcome), r->signal);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* stdin given whole: typed (and echoed by the terminal), then ^D ends it; a line left
 * without a newline is ended too. */
START_TEST(tty_stdin_bytes_then_eof) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = tty_run(c, id, "stty -echo; echo go; cat; echo END", 0, 0, "hello\n", 0, 10000);
        assert_exited(r, 0);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "hello\r\nEND"));
        sbx_result_free(r);
        r = tty_run(c, id, "n=$(wc -c); echo n=$n", 0, 0, "abc", 0, 10000);
        assert_exited(r, 0);
        ck_assert_msg(strstr((char *)r->stdout_data, "n=3"), "out: %s", r->stdout_data);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- limits -------------------------------------------------------------------------- */

/* `yes` on a terminal with a 4 KiB cap: the tail is kept, every byte counted, and the
 * timeout kills it; a cancel kills another. */
START_TEST(tty_output_cap_and_timeout_hold) {
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c, *c2;
        char *id;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        id = it_create(c, NULL);
        t0 = it_now_ms();
        r = tty_run(c, id, "yes", 0, 0, NULL, 4096, 1000);
        /* At its 1 s timeout, yes never ends (room for a loaded machine). */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_TIMED_OUT);
        ck_assert_int_eq(r->stdout_truncated, 1);
        ck_assert_uint_eq(r->stdout_len, 4096);
        ck_assert_msg(r->stdout_bytes > 100000, "only %llu bytes in 1 s",
                      (unsigned long long)r->stdout_bytes);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "y\r\ny\r\n"));
        fprintf(stderr, "it_tty: yes on a tty for 1 s: %llu bytes\n",
                (unsigned long long)r->stdout_bytes);
        sbx_result_free(r);
        s_start(&s, &th, &d, id, "echo ready; yes >/dev/tty", 0, 0, 30000);
        ck_assert(s_wait(&s, "ready"));
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_cancel(c2, id, s.command_id), SBX_OK);
        r = s_end(&s, th);
        ck_assert_double_lt(it_now_ms() - t0, 20000); /* yes never ends by itself */
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_CANCELLED);
        sbx_result_free(r);
        free(id);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Every byte printed arrives, with or without streaming, also the last ones: a pty
 * master reads 0 for a moment after the last slave closed, before its last bytes (Linux
 * 6.18), which is not its end. */
START_TEST(tty_output_is_complete) {
        static const char *cmds[] = {"exec head -c 3000000 /dev/zero", "head -c 100000 /dev/zero",
                                     "head -c 2000000 /dev/zero | tr '\\0' y"};
        static const uint64_t sizes[] = {3000000, 100000, 2000000};
        struct it_daemon d;
        struct sbx_result *r;
        struct session s;
        pthread_t th;
        sbx_client *c;
        char *id;
        int round, i;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        for (round = 0; round < 4; round++)
                for (i = 0; i < 3; i++) {
                        r = tty_run(c, id, cmds[i], 0, 0, NULL, 4096, 30000);
                        assert_exited(r, 0);
                        ck_assert_msg(r->stdout_bytes == sizes[i], "`%s`: %llu bytes of %llu",
                                      cmds[i], (unsigned long long)r->stdout_bytes,
                                      (unsigned long long)sizes[i]);
                        sbx_result_free(r);
                        /* Streamed (and paced by this client, which reads slower). */
                        s_start(&s, &th, &d, id, cmds[i], 0, 0, 30000);
                        r = s_end(&s, th);
                        assert_exited(r, 0);
                        ck_assert_msg(r->stdout_bytes == sizes[i],
                                      "streamed `%s`: %llu bytes of %llu", cmds[i],
                                      (unsigned long long)r->stdout_bytes,
                                      (unsigned long long)sizes[i]);
                        sbx_result_free(r);
                }
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A child left holding the terminal does not hold the result: the draining rules of
 * pipes (the result comes once the leader exited, after a short drain). */
START_TEST(tty_children_left_holding_the_terminal) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        t0 = it_now_ms();
        r = tty_run(c, id, "(trap '' HUP; exec sleep 300) & echo bye", 0, 0, NULL, 0, 60000);
        /* Not held by the child (300 s), nor ended by the timeout (60 s). */
        ck_assert_double_lt(it_now_ms() - t0, 20000);
        assert_exited(r, 0);
        ck_assert_ptr_nonnull(strstr((char *)r->stdout_data, "bye"));
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static int found_text(const struct sbx_result *r, const char *text) {
        return r && r->stdout_data && strstr((const char *)r->stdout_data, text);
}

/* A background command on a terminal (RunCommand.background with tty): another client
 * resizes it, types into it and attaches to it; GetSandbox lists it as a tty command. */
START_TEST(tty_background_attach) {
        struct it_daemon d;
        struct sbx_sandbox *sb = NULL, *info = NULL;
        struct sbx_exec_opts o;
        struct sbx_attach_opts ao;
        struct sbx_background *b = NULL;
        struct sbx_result *r = NULL;
        sbx_client *c, *c2;
        int found = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_create(c, NULL, &sb), SBX_OK);
        sbx_exec_opts_init(&o);
        o.shell = "stty size; read line; stty size; echo got:$line";
        o.tty = 1;
        o.rows = 30;
        o.cols = 100;
        o.stdin_stream = 1;
        o.timeout_ms = 30000;
        ck_assert_int_eq(sbx_exec_background(c, sb->id, &o, &b), SBX_OK);
        ck_assert_ptr_null(b->result);
        sbx_close(c);

        c2 = it_connect(&d);
        ck_assert_int_eq(sbx_get(c2, sb->id, &info), SBX_OK);
        for (size_t i = 0; i < info->n_commands; i++)
                if (strcmp(info->commands[i].command_id, b->command_id) == 0)
                        found = info->commands[i].tty && info->commands[i].background;
        ck_assert_msg(found, "GetSandbox does not list %s as a background tty command",
                      b->command_id);
        sbx_sandbox_free(info);
        /* Its first size is printed before it is resized. */
        memset(&ao, 0, sizeof(ao));
        ao.command_id = b->command_id;
        for (int i = 0; i < 1000 && !found_text(r, "30 100\r\n"); i++) {
                sbx_result_free(r);
                r = NULL;
                ck_assert_int_eq(sbx_attach(c2, sb->id, &ao, &r), SBX_OK);
                if (!found_text(r, "30 100\r\n"))
                        usleep(10 * 1000);
        }
        ck_assert_msg(found_text(r, "30 100\r\n"), "no first size within 10 s");
        sbx_result_free(r);
        r = NULL;
        ck_assert_int_eq(sbx_resize(c2, sb->id, b->command_id, 12, 34), SBX_OK);
        ck_assert_int_eq(sbx_send_input(c2, sb->id, b->command_id, "hello\r", 6, 0), SBX_OK);
        memset(&ao, 0, sizeof(ao));
        ao.command_id = b->command_id;
        ao.follow = 1;
        ck_assert_int_eq(sbx_attach(c2, sb->id, &ao, &r), SBX_OK);
        assert_exited(r, 0);
        ck_assert_msg(strstr((char *)r->stdout_data, "30 100\r\n") &&
                              strstr((char *)r->stdout_data, "\n12 34\r\n") &&
                              strstr((char *)r->stdout_data, "got:hello\r\n"),
                      "output: %s", (char *)r->stdout_data);
        sbx_result_free(r);
        sbx_background_free(b);
        sbx_sandbox_free(sb);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The records say which commands ran on a terminal. */
START_TEST(tty_in_history) {
        struct it_daemon d;
        struct sbx_history *h = NULL;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = tty_run(c, id, "true", 0, 0, NULL, 0, 10000);
        sbx_result_free(r);
        r = it_sh(c, id, 10000, "true");
        sbx_result_free(r);
        ck_assert_int_eq(sbx_history(c, id, 0, 10, &h), SBX_OK);
        ck_assert_uint_eq(h->n, 2);
        ck_assert_int_eq(h->v[0].tty, 1);
        ck_assert_int_eq(h->v[1].tty, 0);
        sbx_history_free(h);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE tty = 1"), 1);
        ck_assert_int_ge(it_db_int(&d, "PRAGMA user_version"), 8);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- sbx exec -t on a real terminal ------------------------------------------------- */

/* Runs sbx with args on a new pty of rows x cols, in raw-free canonical mode; writes
 * input (may be NULL) after delay_ms, and sends sig to sbx after sig_ms (0: none).
 * Returns sbx's wait status; *out gets what it printed; *before and *after the pty's
 * settings before sbx and after it ended. */
struct pty_run {
        const char *const *args;
        unsigned short rows, cols;
        const char *input;
        int input_ms;
        int sig, sig_ms, sig_count; /* sig_count: how many times (0: once) */
        int kill_daemon_ms;         /* SIGKILL the daemon then (0: never) */
        int stdout_closed;          /* sbx's stdout a pipe whose reader is gone (`| head -c0`) */
        /* Not NULL: the times above count from when a process whose command line starts
         * with this (the remote command, made unique with the test's pid) runs, not from
         * sbx's start: a loaded machine may take longer than them to get there. */
        const char *running;
        char out[8192];
        size_t len;
        struct termios before, after;
        int status;
};

static void read_some(int m, struct pty_run *p, int ms) {
        struct pollfd pf = {.fd = m, .events = POLLIN};
        if (poll(&pf, 1, ms) > 0) {
                ssize_t n = read(m, p->out + p->len, sizeof(p->out) - 1 - p->len);
                if (n > 0) {
                        p->len += (size_t)n;
                        p->out[p->len] = '\0';
                }
        }
}

static void pty_sbx(struct it_daemon *d, struct pty_run *p) {
        struct winsize ws = {.ws_row = p->rows, .ws_col = p->cols};
        char sbx[600], go = 'g';
        double t0, start;
        pid_t pid;
        int m, gate[2], done = 0, typed = 0, signalled = 0, daemon_killed = 0, seen = 0;

        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        ck_assert_int_eq(pipe(gate), 0);
        pid = forkpty(&m, NULL, NULL, &ws);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* sbx runs once the test has read the pty's settings (gate): one that ran
                 * first would have made them raw already. */
                close(gate[1]);
                if (read(gate[0], &go, 1) != 1)
                        _exit(126);
                if (p->stdout_closed) {
                        int q[2];
                        if (pipe(q) < 0)
                                _exit(126);
                        close(q[0]);
                        dup2(q[1], STDOUT_FILENO);
                        close(q[1]);
                        signal(SIGPIPE, SIG_DFL);
                }
                setenv("SBX_SOCKET", d->sock, 1);
                execv(sbx, (char *const *)(uintptr_t)p->args);
                _exit(127);
        }
        close(gate[0]);
        ck_assert_int_eq(tcgetattr(m, &p->before), 0);
        ck_assert_int_eq(write(gate[1], &go, 1), 1);
        close(gate[1]);
        start = t0 = it_now_ms();
        while (!done && it_now_ms() - start < 60000) {
                read_some(m, p, 50);
                if (p->running && !seen && (seen = it_find_proc(p->running, p->running) > 0))
                        t0 = it_now_ms();
                if (!p->running || seen) {
                        if (p->input && !typed && it_now_ms() - t0 >= p->input_ms) {
                                ck_assert_int_gt(write(m, p->input, strlen(p->input)), 0);
                                typed = 1;
                        }
                        if (p->sig && !signalled && it_now_ms() - t0 >= p->sig_ms) {
                                for (int i = 0; i < (p->sig_count ? p->sig_count : 1); i++) {
                                        kill(pid, p->sig);
                                        usleep(20 * 1000);
                                }
                                signalled = 1;
                        }
                        if (p->kill_daemon_ms && !daemon_killed &&
                            it_now_ms() - t0 >= p->kill_daemon_ms) {
                                it_daemon_kill(d);
                                daemon_killed = 1;
                        }
                }
                if (waitpid(pid, &p->status, WNOHANG) == pid)
                        done = 1;
        }
        if (!done) {
                kill(pid, SIGKILL);
                waitpid(pid, &p->status, 0);
                ck_abort_msg("sbx did not end within 60 s; output: %s", p->out);
        }
        read_some(m, p, 100);
        ck_assert_int_eq(tcgetattr(m, &p->after), 0);
        close(m);
}

static void assert_same_termios(const struct pty_run *p) {
        ck_assert_msg(p->before.c_lflag == p->after.c_lflag &&
                              p->before.c_iflag == p->after.c_iflag &&
                              p->before.c_oflag == p->after.c_oflag &&
                              p->before.c_cflag == p->after.c_cflag &&
                              memcmp(p->before.c_cc, p->after.c_cc, sizeof(p->before.c_cc)) == 0,
                      "terminal settings changed: lflag %o -> %o, iflag %o -> %o, oflag %o -> %o",
                      p->before.c_lflag, p->after.c_lflag, p->before.c_iflag, p->after.c_iflag,
                      p->before.c_oflag, p->after.c_oflag);
}

/* sbx exec -t with its stdout a pipe whose reader ended (`sbx exec -t ID -- cmd | head
 * -1`): the next write of sbx raises SIGPIPE, whose default action ended sbx with its
 * terminal left raw (no echo, no line editing) for the user's shell. sbx restores the
 * terminal first, then ends by SIGPIPE as a pipeline's writer does, and the command ends
 * too. */
START_TEST(cli_exec_t_stdout_closed_restores_terminal) {
        struct it_daemon d;
        struct pty_run p;
        struct sbx_result *r = NULL;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        {
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sh", "-c",
                                      "sleep 0.5; while :; do echo y; sleep 0.01; done", NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.stdout_closed = 1;
                pty_sbx(&d, &p);
        }
        assert_same_termios(&p);
        ck_assert_msg(WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGPIPE, "status %x",
                      p.status);
        /* The command was ended too: no y-printer left in the sandbox. */
        for (int i = 0; i < 100; i++) {
                r = it_sh(c, id, 60000, "ps -eo args | grep -c '^sh -c sleep' || true");
                if (strcmp((char *)r->stdout_data, "0\n") == 0)
                        break;
                sbx_result_free(r);
                r = NULL;
                usleep(100000);
        }
        ck_assert_msg(r, "the command still runs after sbx ended");
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx exec -t: the client terminal's size reaches the command, its settings are the
 * same after sbx ends (normally, at a remote timeout, killed by SIGTERM), Ctrl-C typed
 * interrupts the remote command, and -t without a terminal is a clear error. */
START_TEST(cli_exec_t_on_a_real_terminal) {
        struct it_daemon d;
        struct pty_run p;
        sbx_client *c;
        char *id, *err = NULL, termed[64], ignorer[64], interrupted[64], trapped[96], reader[96],
                  reader_line[112];
        int st;

        /* The remote commands signalled or typed at, each with a command line of its own
         * ("sleep N.PID": +6 is its argument). */
        it_sleeper(termed, sizeof(termed), 30);
        it_sleeper(ignorer, sizeof(ignorer), 31);
        it_sleeper(interrupted, sizeof(interrupted), 32);
        snprintf(trapped, sizeof(trapped), "trap '' TERM; %s", ignorer);
        snprintf(reader, sizeof(reader), "read x; echo got-$x; exit 3 # %d", (int)getpid());
        snprintf(reader_line, sizeof(reader_line), "sh -c %s", reader);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        {
                const char *args[] = {"sbx", "exec", "-t", id, "--", "stty", "size", NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 37;
                p.cols = 111;
                pty_sbx(&d, &p);
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0, "status %x: %s",
                              p.status, p.out);
                ck_assert_msg(strstr(p.out, "37 111"), "output: %s", p.out);
                assert_same_termios(&p);
        }
        {
                const char *args[] = {"sbx", "exec", "-t",    "--timeout", "1",
                                      id,    "--",   "sleep", "30",        NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                pty_sbx(&d, &p);
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 124, "status %x: %s",
                              p.status, p.out);
                assert_same_termios(&p);
        }
        {
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sleep", termed + 6, NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.sig = SIGTERM;
                p.running = termed; /* then at once */
                pty_sbx(&d, &p);
                /* SIGTERM went to the remote command, which died of it. */
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 128 + SIGTERM,
                              "status %x: %s", p.status, p.out);
                assert_same_termios(&p);
        }
        {
                /* Three SIGTERMs to a command that ignores them: forwarded, then a cancel,
                 * then sbx gives up (dies of SIGTERM) unless the result came first. */
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sh", "-c", trapped, NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.sig = SIGTERM;
                p.running = ignorer; /* its trap is set */
                p.sig_count = 3;
                pty_sbx(&d, &p);
                ck_assert_msg((WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGTERM) ||
                                      (WIFEXITED(p.status) && WEXITSTATUS(p.status) == 137),
                              "status %x: %s", p.status, p.out);
                assert_same_termios(&p);
        }
        {
                const char *args[] = {"sbx",   "exec",          "-t", id, "--",
                                      "sleep", interrupted + 6, NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.input = "\x03";
                p.running = interrupted;
                pty_sbx(&d, &p);
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 128 + SIGINT,
                              "status %x: %s", p.status, p.out);
                assert_same_termios(&p);
        }
        {
                /* Typed input reaches a remote shell, raw (its own terminal echoes). */
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sh", "-c", reader, NULL};
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.input = "abc\r";
                p.running = reader_line;
                pty_sbx(&d, &p);
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 3, "status %x: %s",
                              p.status, p.out);
                ck_assert_msg(strstr(p.out, "got-abc"), "output: %s", p.out);
                assert_same_termios(&p);
        }
        {
                const char *args[] = {"exec", "-t", id, "--", "true", NULL};
                st = it_sbx(&d, NULL, 0, NULL, &err, args);
                ck_assert_int_eq(st, 125);
                ck_assert_msg(strstr(err, "terminal") && strstr(err, "-tt"), "stderr: %s", err);
                free(err);
        }
        {
                /* -tt forces a terminal without one here: the command still gets its own. */
                const char *args[] = {"exec", "-tt", id, "--", "sh", "-c", "test -t 0 && echo TTY",
                                      NULL};
                char *out = NULL;
                st = it_sbx(&d, NULL, 0, &out, NULL, args);
                ck_assert_int_eq(st, 0);
                ck_assert_msg(strstr(out, "TTY"), "stdout: %s", out);
                free(out);
        }
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The daemon killed under sbx exec -t: sbx fails (125) and the terminal is as before. */
START_TEST(cli_exec_t_daemon_gone) {
        struct it_daemon d;
        struct pty_run p;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        sbx_close(c);
        {
                char sleeper[64];
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sleep", NULL, NULL};
                args[6] = it_sleeper(sleeper, sizeof(sleeper), 30) + strlen("sleep ");
                memset(&p, 0, sizeof(p));
                p.args = args;
                p.rows = 24;
                p.cols = 80;
                p.kill_daemon_ms = 1; /* once the command runs */
                p.running = sleeper;
                pty_sbx(&d, &p);
                ck_assert_msg(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 125, "status %x: %s",
                              p.status, p.out);
                assert_same_termios(&p);
        }
        free(id);
}
END_TEST


/* The state letter of pid in /proc (R, S, T, ...), or 0. */
static char proc_state(pid_t pid) {
        char path[64], buf[512], *p;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : 0;
}

/* sbx exec -t stopped from outside (SIGTSTP; in raw mode Ctrl-Z is only a byte): the
 * terminal has its settings back while sbx is stopped, raw again once it goes on
 * (SIGCONT), and the same as before at the end. sbx runs as a job of its own in the
 * foreground of the pty, as a shell with job control runs it (a stop signal to a
 * process group without such a parent is dropped by the kernel). */
START_TEST(cli_exec_t_stopped_and_continued) {
        struct winsize ws = {.ws_row = 24, .ws_col = 80};
        struct termios before, stopped, resumed, after;
        struct it_daemon d;
        struct pty_run p;
        sbx_client *c;
        char *id, sbx[600], go = 'g';
        int m, pids[2], gate[2], status;
        pid_t shell, job = 0;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        ck_assert_int_eq(pipe(pids), 0);
        ck_assert_int_eq(pipe(gate), 0);
        shell = forkpty(&m, NULL, NULL, &ws);
        ck_assert_int_ge(shell, 0);
        if (shell == 0) {
                /* The "shell": sbx in a process group of its own, in the foreground, once
                 * the test has read the terminal's settings (gate). */
                const char *args[] = {"sbx", "exec", "-t", id, "--", "sh", "-c",
                                      "sleep 2; echo done", NULL};
                pid_t j = fork();
                if (j == 0) {
                        setpgid(0, 0);
                        setenv("SBX_SOCKET", d.sock, 1);
                        close(gate[1]);
                        if (read(gate[0], &go, 1) != 1)
                                _exit(126);
                        execv(sbx, (char *const *)(uintptr_t)args);
                        _exit(127);
                }
                close(gate[0]); /* the test's end alone opens (or, gone, closes) the gate */
                close(gate[1]);
                setpgid(j, j);
                signal(SIGTTOU, SIG_IGN);
                tcsetpgrp(0, j);
                (void)!write(pids[1], &j, sizeof(j));
                while (waitpid(j, &status, 0) < 0 && errno == EINTR)
                        ;
                _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        close(pids[1]);
        close(gate[0]);
        ck_assert_int_eq(read(pids[0], &job, sizeof(job)), (ssize_t)sizeof(job));
        close(pids[0]);
        /* The settings sbx finds (read before it runs: a fast sbx had made them raw when
         * they were read after its start). */
        ck_assert_int_eq(tcgetattr(m, &before), 0);
        ck_assert_int_eq(write(gate[1], &go, 1), 1);
        close(gate[1]);
        memset(&p, 0, sizeof(p));
        /* Raw once it runs (its SIGTSTP handler is set before). */
        t0 = it_now_ms();
        do {
                read_some(m, &p, 50);
                ck_assert_int_eq(tcgetattr(m, &resumed), 0);
        } while ((resumed.c_lflag & ICANON) && it_now_ms() - t0 < 10000);
        ck_assert_msg(!(resumed.c_lflag & ICANON), "sbx exec -t did not make the terminal raw");
        ck_assert_int_eq(kill(job, SIGTSTP), 0);
        t0 = it_now_ms();
        while (proc_state(job) != 'T' && it_now_ms() - t0 < 5000)
                read_some(m, &p, 20);
        ck_assert_msg(proc_state(job) == 'T', "sbx did not stop (state %c)", proc_state(job));
        ck_assert_int_eq(tcgetattr(m, &stopped), 0);
        ck_assert_msg(stopped.c_lflag == before.c_lflag && stopped.c_iflag == before.c_iflag &&
                              stopped.c_oflag == before.c_oflag,
                      "stopped sbx left the terminal raw: lflag %o (before %o)", stopped.c_lflag,
                      before.c_lflag);
        ck_assert_int_eq(kill(job, SIGCONT), 0);
        t0 = it_now_ms();
        do {
                read_some(m, &p, 20);
                ck_assert_int_eq(tcgetattr(m, &resumed), 0);
        } while ((resumed.c_lflag & ICANON) && it_now_ms() - t0 < 5000);
        ck_assert_msg(!(resumed.c_lflag & ICANON), "sbx went on without raw mode");
        t0 = it_now_ms();
        while (waitpid(shell, &status, WNOHANG) != shell && it_now_ms() - t0 < 20000)
                read_some(m, &p, 50);
        read_some(m, &p, 100);
        ck_assert_int_eq(tcgetattr(m, &after), 0);
        close(m);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %x: %s", status,
                      p.out);
        ck_assert_msg(strstr(p.out, "done"), "output: %s", p.out);
        ck_assert_msg(after.c_lflag == before.c_lflag && after.c_iflag == before.c_iflag &&
                              after.c_oflag == before.c_oflag,
                      "terminal settings changed: lflag %o -> %o", before.c_lflag,
                      after.c_lflag);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The size of the client's terminal follows its changes (SIGWINCH of sbx). */
START_TEST(cli_exec_t_forwards_resizes) {
        struct it_daemon d;
        struct winsize ws = {.ws_row = 24, .ws_col = 80};
        struct pty_run p;
        sbx_client *c;
        char *id, sbx[600];
        double t0;
        pid_t pid;
        int m, status = 0, done = 0, resized = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        memset(&p, 0, sizeof(p));
        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        pid = forkpty(&m, NULL, NULL, &ws);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                setenv("SBX_SOCKET", d.sock, 1);
                execl(sbx, "sbx", "exec", "-t", id, "--", "sh", "-c",
                      "trap 'echo WINCH $(stty size); exit 0' WINCH; echo ready; "
                      "while :; do sleep 0.05; done",
                      (char *)NULL);
                _exit(127);
        }
        t0 = it_now_ms();
        while (!done && it_now_ms() - t0 < 20000) {
                read_some(m, &p, 50);
                if (!resized && strstr(p.out, "ready")) {
                        struct winsize nws = {.ws_row = 41, .ws_col = 97};
                        /* The kernel sends the pty's foreground group (sbx) SIGWINCH. */
                        ck_assert_int_eq(ioctl(m, TIOCSWINSZ, &nws), 0);
                        resized = 1;
                }
                if (waitpid(pid, &status, WNOHANG) == pid)
                        done = 1;
        }
        if (!done) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
        }
        read_some(m, &p, 100);
        close(m);
        ck_assert_msg(done && WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %x: %s",
                      status, p.out);
        ck_assert_msg(strstr(p.out, "WINCH 41 97"), "output: %s", p.out);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("tty");
        TCase *tc = tcase_create("tty");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, tty_is_the_sandboxes_own_controlling_terminal);
        tcase_add_test(tc, tty_size_as_asked);
        tcase_add_test(tc, tty_bad_sizes_are_typed_errors);
        tcase_add_test(tc, tty_resize_without_terminal_is_failed_precondition);
        tcase_add_test(tc, tty_resize_sends_sigwinch);
        tcase_add_test(tc, tty_resize_while_queued);
        tcase_add_test(tc, tty_python_repl);
        tcase_add_test(tc, tty_interactive_shell);
        tcase_add_test(tc, tty_full_screen_programs);
        tcase_add_test(tc, tty_ctrl_c_interrupts);
        tcase_add_test(tc, tty_stdin_bytes_then_eof);
        tcase_add_test(tc, tty_output_cap_and_timeout_hold);
        tcase_add_test(tc, tty_output_is_complete);
        tcase_add_test(tc, tty_children_left_holding_the_terminal);
        tcase_add_test(tc, tty_in_history);
        tcase_add_test(tc, tty_background_attach);
        tcase_add_test(tc, cli_exec_t_on_a_real_terminal);
        tcase_add_test(tc, cli_exec_t_forwards_resizes);
        tcase_add_test(tc, cli_exec_t_daemon_gone);
        tcase_add_test(tc, cli_exec_t_stopped_and_continued);
        tcase_add_test(tc, cli_exec_t_stdout_closed_restores_terminal);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
