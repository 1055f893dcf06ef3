/* cli_exec.c: `sbx exec`, which runs one command in a sandbox, and `sbx cancel`.
 *
 * Without --json the command's output streams to our stdout and stderr as it arrives
 * and sbx exits with the command's status: its exit code, 128+N for signal N, 124 timed
 * out, 126 cannot execute, 127 not found, 137 out of memory or cancelled, and 125 when
 * sbx, the daemon or the sandbox failed or the command never ran (a missing --cwd,
 * sandbox_ended, queue_timeout, unknown). An ending that is not an exit (a timeout, a
 * signal, out of memory, a cancel) is also said in one line on stderr, "sbx: command c-4
 * timed out after 60 s (killed)", and a command that could not start or never got a
 * slot in the "sbx: CODE: message" form. A command that waits for a slot (the sandbox
 * runs its maximum of commands at once) says so on stderr when that is a terminal,
 * "sbx: waiting for a slot in sandbox ID (N ahead)". With --json the result is printed
 * as one JSON object (keys: sandbox_id, command_id, outcome, exit_code, signal,
 * timed_out, stdout, stderr, stdout_truncated, stderr_truncated, stdout_bytes,
 * stderr_bytes, duration, queued_ms, isolated, warnings, resources, start_error,
 * owner_uid, stdout_base64, stderr_base64) and sbx exits 0 unless sbx itself failed.
 *
 * Standard input is forwarded when it is neither a terminal (as ssh does; -n turns it
 * off) nor /dev/null (the command gets the daemon's /dev/null).
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT of sbx are forwarded to the command's process
 * group; a second one, or SIGNAL_GRACE_MS without an ending, kills the command (a
 * cancel), and a third one ends sbx itself. While the command waits for a slot the
 * first one cancels it (it never runs). Their handler only queues them on a pipe that
 * libsbx polls with the connection while the call waits; they are sent to the daemon on
 * a client of their own, since the client of the call is busy until the result comes.
 * A signal also interrupts a write of the command's output to a reader that does not
 * read (`| less` on a screen), and is forwarded then. No thread: making one cost about
 * 0.5 ms of a 2.5 ms `sbx exec true` on a busy two-core machine.
 *
 * With -t the command runs on a terminal of its sandbox (RunCommand.tty) sized as ours,
 * our stdin (which must be a terminal; -tt forces a terminal for the command without
 * one) is streamed to it raw, our terminal is in raw mode until the call ends (Ctrl-C
 * typed is the byte 0x03 there, interpreted by the command's terminal), the forwarder
 * also takes SIGWINCH and sends our new size (CommandInput rows/cols), and the
 * terminal's settings come back on every way out: the end of the call, exit(), and
 * die_by (cli_tty.c). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* How long a command may take to end after a forwarded signal before it is killed. */
#define SIGNAL_GRACE_MS 10000
/* The call timeout of the forwarder's own client. */
#define SIGNAL_CALL_TIMEOUT_MS 10000

enum {
        E_TIMEOUT,
        E_CWD,
        E_ENV,
        E_STDIN,
        E_MAX_OUTPUT,
        E_SHELL,
        E_JSON,
        E_NO_STDIN,
        E_PRINT_ID,
        E_QUEUE_TIMEOUT,
        E_BACKGROUND,
        E_TTY,
        E_USER,
};

static const struct cli_opt exec_opts[] = {
        [E_TIMEOUT] = {"timeout", true, 0},
        [E_CWD] = {"cwd", true, 0},
        [E_ENV] = {"env", true, 0},
        [E_STDIN] = {"stdin", true, 0},
        [E_MAX_OUTPUT] = {"max-output", true, 0},
        [E_SHELL] = {"shell", false, 0},
        [E_JSON] = {"json", false, 0},
        [E_NO_STDIN] = {"no-stdin", false, 'n'},
        [E_PRINT_ID] = {"print-id", false, 0},
        [E_QUEUE_TIMEOUT] = {"queue-timeout", true, 0},
        [E_BACKGROUND] = {"background", false, 0},
        [E_TTY] = {"tty", false, 't'},
        [E_USER] = {"user", true, 0},
        {NULL, false, 0},
};

struct exec_state {
        struct sbx_exec_opts o;
        const char **env;
        size_t n_env;
        const char *stdin_path;
        bool shell, json, no_stdin, print_id;
        bool background, timeout_given; /* --background; --timeout was given */
        char *shell_text;               /* --shell: the words joined, owned */
        int in_fd;                      /* --stdin's file, owned when > STDIN_FILENO; -1: none */
        int tty; /* -t given this many times (-tt: a terminal without ours) */
};

/* Applies one option. 0 or an exit status. */
static int apply_opt(struct exec_state *st, int k, const char *a) {
        uint64_t v;

        switch (k) {
        case E_TIMEOUT:
                if (cli_parse_secs_ms(a, &st->o.timeout_ms) < 0)
                        return cli_bad_value("exec", "--timeout", a,
                                             "expected seconds, e.g. 10 or 0.5");
                st->timeout_given = true;
                break;
        case E_QUEUE_TIMEOUT:
                if (cli_parse_secs_ms(a, &st->o.queue_timeout_ms) < 0)
                        return cli_bad_value("exec", "--queue-timeout", a,
                                             "expected seconds, e.g. 30 or 0.5, or 0 (never wait)");
                st->o.has_queue_timeout = 1;
                break;
        case E_CWD:
                st->o.cwd = a;
                break;
        case E_ENV: {
                const char *eq = strchr(a, '=');
                if (!eq || eq == a)
                        return cli_bad_value("exec", "--env", a, "expected NAME=VALUE");
                st->env[st->n_env++] = a;
                break;
        }
        case E_STDIN:
                st->stdin_path = a;
                break;
        case E_MAX_OUTPUT:
                if (cli_parse_bytes(a, &v) < 0 || v == 0)
                        return cli_bad_value("exec", "--max-output", a, "expected bytes, e.g. 1M");
                st->o.max_stdout_bytes = st->o.max_stderr_bytes = v;
                break;
        case E_SHELL:
                st->shell = true;
                break;
        case E_JSON:
                st->json = true;
                break;
        case E_NO_STDIN:
                st->no_stdin = true;
                break;
        case E_PRINT_ID:
                st->print_id = true;
                break;
        case E_BACKGROUND:
                st->background = true;
                break;
        case E_TTY:
                st->tty++;
                break;
        case E_USER:
                st->o.user = a;
                break;
        default:
                return cli_error(SBX_INTERNAL, "unhandled option %d", k);
        }
        return 0;
}

/* Runs the option parser over argv[0..argc) (argv[0] is the command name) until the
 * first positional, which goes to *ret_pos (NULL when none). 0, -1 (help shown) or an
 * exit status; *ret_next is the index after the positional. */
static int parse_opts(struct cli *cli, struct exec_state *st, int argc, char **argv,
                      const char **ret_pos, int *ret_next, bool *ret_dashdash) {
        struct cli_opts p;
        int k;

        *ret_pos = NULL;
        cli_opts_init(&p, cli, argc, argv, exec_opts);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                int rc;
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "exec");
                        return -1;
                }
                if (k == CLI_OPT_POS) {
                        *ret_pos = p.arg;
                        *ret_dashdash = p.saw_dashdash;
                        break;
                }
                if ((rc = apply_opt(st, k, p.arg)))
                        return rc;
        }
        *ret_next = p.i;
        return 0;
}

struct stream_state {
        uint64_t chunks[3]; /* per enum sbx_stream */
        int write_err;
};

/* What the callbacks of one sbx_exec share (its userdata). */
struct forwarder;
struct run {
        struct stream_state ss;
        struct forwarder *fw;
        const char *sandbox_id;
        bool said_waiting; /* "waiting for a slot" was printed */
};

struct forwarder;
static void forward_ready(void *userdata);
static void forward_if_caught(struct forwarder *f);

/* Writes the command's output; a signal that interrupts the write (our reader does not
 * read) is forwarded before the write goes on. */
static void on_output(void *userdata, enum sbx_stream stream, uint64_t offset, const void *data,
                      size_t len) {
        struct run *run = userdata;
        struct stream_state *ss = &run->ss;
        int fd = stream == SBX_STDERR ? STDERR_FILENO : STDOUT_FILENO;
        const uint8_t *p = data;

        (void)offset;
        ss->chunks[stream == SBX_STDERR ? SBX_STDERR : SBX_STDOUT]++;
        forward_if_caught(run->fw); /* output that never pauses must not hold a signal */
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno != EINTR) {
                        if (!ss->write_err)
                                ss->write_err = errno;
                        return;
                }
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                }
                if (len > 0)
                        forward_ready(run->fw);
        }
}

/* ---- signals ------------------------------------------------------------------------------ */

/* "INT" for SIGINT, "15" for an unnamed signal. */
static const char *sig_name(int sig, char *buf, size_t len) {
        const char *n = sig > 0 ? sigabbrev_np(sig) : NULL;
        if (n)
                return n;
        snprintf(buf, len, "%d", sig);
        return buf;
}

/* The forwarder: SIGINT, SIGTERM, SIGHUP and SIGQUIT of sbx are caught by a handler
 * that only queues them on a pipe, which libsbx polls while sbx_exec waits
 * (libsbx_set_watch), so they are taken on this one thread, between frames (or when
 * they interrupt a write of output), and sent to the running command through a client
 * of its own (the call's client is busy until the result comes). on_started and
 * on_queued tell it the command's ID; SIGALRM from the grace timer (setitimer) turns a
 * signal sent into a kill. */
struct forwarder {
        const struct cli *cli;
        const char *sandbox_id;
        int sfd;      /* the read end of the signals' pipe; -1: default actions */
        sigset_t set; /* the signals caught */
        char command_id[SBX_ID_MAX_BYTES + 1];
        bool started;        /* command_id runs; else it waits for a slot (or is not known yet) */
        bool print_id, json; /* on_started prints the ID (--print-id) */
        int want;            /* the signal the command should have had; SIGKILL: cancel */
        int sent;            /* what was sent (0: nothing) */
        int first;           /* the first signal sbx got */
        unsigned count;      /* signals sbx got */
        bool cancelled_by_us;
        /* -t: SIGWINCH is taken too, and our terminal's new size sent (winch_fd's). */
        int winch_fd; /* -1: not forwarded */
        bool winch_pending;
};

/* Ends sbx as signal sig would have, had it not been caught. */
static void die_by(int sig) {
        sigset_t one;

        cli_tty_restore();
        fflush(stdout);
        signal(sig, SIG_DFL);
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);
}

/* Sends f->want to command id on a client of its own. */
static void forward_send(struct forwarder *f, const char *id) {
        char nb[16];
        sbx_client *c = NULL;
        enum sbx_code rc = sbx_connect(f->cli->socket_path, CLI_CLIENT_NAME, &c);

        if (rc == SBX_OK) {
                sbx_set_call_timeout_ms(c, SIGNAL_CALL_TIMEOUT_MS);
                if (f->want == SIGKILL)
                        rc = sbx_cancel(c, f->sandbox_id, id);
                else
                        rc = sbx_signal(c, f->sandbox_id, id, f->want);
        }
        f->sent = f->want;
        if (f->want == SIGKILL && rc == SBX_OK)
                f->cancelled_by_us = true;
        /* NOT_FOUND: it ended meanwhile, and its result says how. */
        if (rc != SBX_OK && rc != SBX_NOT_FOUND)
                cli_warn("could not send SIG%s to command %s: %s",
                         sig_name(f->want, nb, sizeof(nb)), id,
                         c && sbx_error_message(c)[0] ? sbx_error_message(c) : sbx_code_name(rc));
        else if (rc == SBX_OK && f->want != SIGKILL && isatty(STDERR_FILENO))
                cli_warn("sent SIG%s to command %s; interrupt again to kill it",
                         sig_name(f->want, nb, sizeof(nb)), id);
        sbx_close(c);
}

/* Sends our terminal's size to the running command id (sbx exec -t), on a client of its
 * own. A failure is no reason to stop: the next change tries again. */
static void forward_size(struct forwarder *f, const char *id) {
        uint32_t rows, cols;
        sbx_client *c = NULL;

        f->winch_pending = false;
        if (cli_tty_size(f->winch_fd, &rows, &cols) < 0)
                return;
        if (sbx_connect(f->cli->socket_path, CLI_CLIENT_NAME, &c) == SBX_OK) {
                sbx_set_call_timeout_ms(c, SIGNAL_CALL_TIMEOUT_MS);
                (void)sbx_resize(c, f->sandbox_id, id, rows, cols);
        }
        sbx_close(c);
}

/* Arms the grace timer for ms (0: disarms it); SIGALRM when it runs out. */
static void grace_timer(unsigned ms) {
        struct itimerval t = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
        (void)setitimer(ITIMER_REAL, &t, NULL);
}

/* Sends what is due once the command's ID is known: our terminal's new size, and the
 * signal wanted. A command that waits for a slot has nothing running to take a signal,
 * so the wait ends instead (a cancel; it never runs). */
static void forward_pending(struct forwarder *f) {
        const char *id = f->command_id;

        if (f->winch_pending && id[0] && f->started)
                forward_size(f, id);
        if (id[0] && !f->started && f->want && f->want != SIGKILL) {
                f->want = SIGKILL;
                grace_timer(0);
        }
        if (id[0] && f->want && f->want != f->sent)
                forward_send(f, id);
}

/* One signal sbx got (code: its si_code). The first is forwarded and starts the
 * grace; a second, or the grace run out, kills the command; a third one, or a kill
 * while the command has not started (the daemon may be stuck), ends sbx. */
static void forward_take(struct forwarder *f, int sig, int code) {
        if (sig == SIGWINCH) {
                f->winch_pending = true;
        } else if (sig == SIGALRM) {
                if (code != SI_KERNEL)
                        die_by(sig); /* not our timer: what SIGALRM would have done */
                if (f->count != 1)
                        return; /* disarmed meanwhile */
                if (!f->command_id[0])
                        die_by(f->first); /* the grace ran out before it started */
                f->want = SIGKILL;
        } else {
                f->count++;
                if (f->count == 1) {
                        f->first = sig;
                        f->want = sig;
                        grace_timer(SIGNAL_GRACE_MS);
                } else if (f->count == 2) {
                        f->want = SIGKILL;
                        grace_timer(0);
                }
                if (f->count >= 3 || (f->count == 2 && !f->command_id[0]))
                        die_by(f->first);
        }
        forward_pending(f);
}

/* A signal as the handler queues it. */
struct caught {
        int sig, code;
};

/* The write end of the signals' pipe (non-blocking); -1 once the call is over. */
static volatile sig_atomic_t caught_fd = -1;
/* Set by the handler: the pipe has something (a cheap look before each output chunk). */
static volatile sig_atomic_t caught_pending;

/* The forwarded signals' handler: queues the signal (async-signal-safe: one write). A
 * signal after the call is dropped: it must not end sbx with another status than the
 * command's. Installed without SA_RESTART, so that it interrupts a blocked write. */
static void on_signal(int sig, siginfo_t *si, void *uc) {
        struct caught k = {sig, si ? si->si_code : 0};
        int saved = errno;

        (void)uc;
        if (caught_fd >= 0) {
                (void)!write(caught_fd, &k, sizeof(k));
                caught_pending = 1;
        }
        errno = saved;
}

/* libsbx's watch callback (and on_output's after an interrupted write): takes every
 * signal queued. */
static void forward_ready(void *userdata) {
        struct forwarder *f = userdata;
        struct caught k;

        if (f->sfd < 0)
                return;
        caught_pending = 0; /* before reading: one caught meanwhile sets it again */
        while (read(f->sfd, &k, sizeof(k)) == (ssize_t)sizeof(k))
                forward_take(f, k.sig, k.code);
}

static void forward_if_caught(struct forwarder *f) {
        if (caught_pending)
                forward_ready(f);
}

/* Blocks (hold) or unblocks the forwarded signals around stdio output during the call:
 * a caught signal would interrupt it (the handlers do not restart system calls) and
 * stdio would lose what it was writing. Held ones are taken when unblocked. */
static void forward_hold(struct forwarder *f, bool hold) {
        if (f->sfd >= 0)
                sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &f->set, NULL);
}

/* Catches the forwarded signals and has libsbx watch them on c. Without a pipe the
 * signals keep their default action: sbx dies and the command runs to its end. */
static void forwarder_start(struct forwarder *f, const struct cli *cli, const char *sandbox_id,
                            sbx_client *c) {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGWINCH};
        struct sigaction sa;
        int p[2];

        f->cli = cli;
        f->sandbox_id = sandbox_id;
        if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
                return;
        f->sfd = p[0];
        caught_fd = p[1];
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO;
        sigfillset(&sa.sa_mask);
        sigemptyset(&f->set);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                if (sigs[i] != SIGWINCH || f->winch_fd >= 0) {
                        sigaction(sigs[i], &sa, NULL);
                        sigaddset(&f->set, sigs[i]);
                }
        libsbx_set_watch(c, f->sfd, forward_ready, f);
}

/* The call is over: nothing is forwarded any more. The signals stay blocked until sbx
 * exits: one that comes after the result must neither end sbx with another status
 * than the command's nor interrupt the writing of the result. */
static void forwarder_stop(struct forwarder *f, sbx_client *c) {
        int w = caught_fd;

        if (f->sfd < 0)
                return;
        sigprocmask(SIG_BLOCK, &f->set, NULL);
        libsbx_set_watch(c, -1, NULL, NULL);
        grace_timer(0);
        caught_fd = -1;
        close(w);
        close(f->sfd);
        f->sfd = -1;
}

/* Tells the forwarder the command's ID, and whether it runs (else it waits for a slot),
 * and sends what waited for it. */
static void forwarder_tell(struct forwarder *f, const char *command_id, bool started) {
        snprintf(f->command_id, sizeof(f->command_id), "%s", command_id);
        f->started = started;
        forward_pending(f);
}

/* on_queued: the command waits for a slot. Its ID goes to the forwarder (a signal then
 * cancels it), and a person at a terminal is told once why nothing happens yet. */
static void on_queued(void *userdata, const char *command_id, uint32_t ahead) {
        struct run *run = userdata;

        forwarder_tell(run->fw, command_id, false);
        if (!run->said_waiting && isatty(STDERR_FILENO)) {
                run->said_waiting = true;
                forward_hold(run->fw, true);
                fflush(stdout);
                fprintf(stderr, "sbx: waiting for a slot in sandbox %s (%u ahead)\n",
                        run->sandbox_id, ahead);
                forward_hold(run->fw, false);
        }
}

/* on_started: the command runs. Its ID goes to the forwarder, and with --print-id to
 * stderr (with --json: a first JSON line on stdout). */
static void on_started(void *userdata, const char *command_id) {
        struct forwarder *f = ((struct run *)userdata)->fw;

        forwarder_tell(f, command_id, true);
        forward_hold(f, true);
        if (f->print_id && f->json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, f->sandbox_id);
                json_key(&j, "command_id");
                json_string(&j, command_id);
                json_key(&j, "outcome");
                json_string(&j, sbx_outcome_name(SBX_OUTCOME_RUNNING));
                json_end_object(&j);
                (void)json_finish(&j);
        } else if (f->print_id) {
                fflush(stdout);
                cli_put_text(stderr, command_id);
                fputc('\n', stderr);
        }
        forward_hold(f, false);
}

/* ---- results ------------------------------------------------------------------------------ */

/* The exit status that stands for a result, or -1 when the command has none (the
 * sandbox ended under it, or the daemon lost it), which is an error of sbx. A command
 * that could not start is handled by start_failed. */
static int result_status(const struct sbx_result *r) {
        switch (r->outcome) {
        case SBX_OUTCOME_EXITED:
                return r->has_exit_code ? (r->exit_code & 0xff) : CLI_EXIT_ERROR;
        case SBX_OUTCOME_SIGNALED:
                if (r->timed_out)
                        return 124;
                if (!r->has_signal || r->signal <= 0)
                        return CLI_EXIT_ERROR;
                return r->signal < 128 ? 128 + r->signal : 255;
        case SBX_OUTCOME_TIMED_OUT:
                return 124;
        case SBX_OUTCOME_OUT_OF_MEMORY:
        case SBX_OUTCOME_CANCELLED:
                return 137; /* 128 + SIGKILL, as a shell reports a killed command */
        case SBX_OUTCOME_START_FAILED:
        case SBX_OUTCOME_SANDBOX_ENDED:
        case SBX_OUTCOME_QUEUE_TIMEOUT:
        case SBX_OUTCOME_UNKNOWN:
        case SBX_OUTCOME_RUNNING:
        case SBX_OUTCOME_UNSPECIFIED:
                break;
        }
        return -1;
}

/* The "resources" object of a result: peak memory, CPU time, limits hit and how each
 * limit was enforced. */
static void json_resources(struct json *j, const struct sbx_result *r) {
        json_begin_object(j);
        json_key(j, "peak_memory_bytes");
        json_uint(j, r->peak_memory_bytes);
        json_key(j, "peak_memory_source");
        json_string(j, r->peak_memory_source);
        json_key(j, "cpu_seconds");
        json_double(j, r->cpu_seconds, 6);
        json_key(j, "limits_hit");
        json_strv(j, &r->limits_hit);
        json_key(j, "enforcement");
        json_enforcement(j, r->enforcement, r->n_enforcement);
        json_end_object(j);
}

static void json_result(struct json *j, const struct sbx_result *r) {
        json_begin_object(j);
        json_key(j, "sandbox_id");
        json_string(j, r->sandbox_id);
        json_key(j, "command_id");
        json_string(j, r->command_id);
        json_key(j, "outcome");
        json_string(j, sbx_outcome_name(r->outcome));
        json_key(j, "exit_code");
        json_int_or_null(j, r->has_exit_code, r->exit_code);
        json_key(j, "signal");
        json_int_or_null(j, r->has_signal, r->signal);
        json_key(j, "timed_out");
        json_bool(j, r->timed_out || r->outcome == SBX_OUTCOME_TIMED_OUT);
        json_key(j, "stdout");
        json_bytes(j, r->stdout_data, r->stdout_len);
        json_key(j, "stderr");
        json_bytes(j, r->stderr_data, r->stderr_len);
        json_key(j, "stdout_truncated");
        json_bool(j, r->stdout_truncated);
        json_key(j, "stderr_truncated");
        json_bool(j, r->stderr_truncated);
        json_key(j, "stdout_bytes");
        json_uint(j, r->stdout_bytes);
        json_key(j, "stderr_bytes");
        json_uint(j, r->stderr_bytes);
        json_key(j, "duration");
        json_double(j, r->duration, 6);
        json_key(j, "queued_ms");
        json_uint(j, r->queued_ms);
        json_key(j, "isolated");
        json_bool(j, r->isolated);
        json_key(j, "warnings");
        json_strv(j, &r->warnings);
        json_key(j, "resources");
        json_resources(j, r);
        json_key(j, "start_error");
        json_string(j, r->start_error);
        json_key(j, "owner_uid");
        json_int_or_null(j, r->has_owner_uid, r->owner_uid);
        /* The exact bytes of a stream that is not valid UTF-8 (the text above has U+FFFD
         * in their place); null when the text is exact. */
        json_key(j, "stdout_base64");
        json_base64_unless_utf8(j, r->stdout_data, r->stdout_len);
        json_key(j, "stderr_base64");
        json_base64_unless_utf8(j, r->stderr_data, r->stderr_len);
        json_end_object(j);
}

/* Prints why a command has no exit status of its own; returns CLI_EXIT_ERROR. */
static int no_status_error(const struct sbx_result *r) {
        switch (r->outcome) {
        case SBX_OUTCOME_SANDBOX_ENDED:
                /* A command that never started has a duration of exactly 0 (sbx.proto). */
                return cli_error(SBX_SANDBOX_ENDED,
                                 "sandbox '%s' ended (terminated or expired) while command %s %s; "
                                 "see `sbx info %s`",
                                 r->sandbox_id, r->command_id,
                                 r->duration == 0 ? "waited for a slot (it never ran)" : "ran",
                                 r->sandbox_id);
        case SBX_OUTCOME_UNKNOWN:
                return cli_error(
                        SBX_UNAVAILABLE,
                        "sbxd restarted while command %s ran in sandbox '%s'; its outcome is "
                        "unknown (see `sbx history %s`)",
                        r->command_id, r->sandbox_id, r->sandbox_id);
        case SBX_OUTCOME_QUEUE_TIMEOUT:
                return cli_error(SBX_RESOURCE_EXHAUSTED,
                                 "command %s waited %.3g s for a slot in sandbox '%s' and never "
                                 "ran (the sandbox runs its maximum of commands at once; see "
                                 "`sbx info %s`); try again, or wait longer with --queue-timeout",
                                 r->command_id, (double)r->queued_ms / 1000.0, r->sandbox_id,
                                 r->sandbox_id);
        case SBX_OUTCOME_EXITED:
        case SBX_OUTCOME_SIGNALED:
        case SBX_OUTCOME_TIMED_OUT:
        case SBX_OUTCOME_OUT_OF_MEMORY:
        case SBX_OUTCOME_CANCELLED:
        case SBX_OUTCOME_START_FAILED:
        case SBX_OUTCOME_RUNNING:
        case SBX_OUTCOME_UNSPECIFIED:
                break;
        }
        return cli_error(SBX_INTERNAL, "command %s ended with outcome '%s' and no exit status",
                         r->command_id, sbx_outcome_name(r->outcome));
}

/* The errno of a failed start: start_errno, else read from the text's end. */
static int start_errno_of(const struct sbx_result *r, const char *why) {
        if (r->start_errno > 0)
                return r->start_errno;
        if (strstr(why, "No such file"))
                return ENOENT;
        if (strstr(why, "Permission denied"))
                return EACCES;
        return 0;
}

static enum sbx_code errno_code(int err) {
        switch (err) {
        case ENOENT:
        case ENOTDIR:
                return SBX_NOT_FOUND;
        case EACCES:
        case EPERM:
                return SBX_PERMISSION_DENIED;
        case ENOMEM:
        case EAGAIN:
        case EMFILE:
        case ENFILE:
                return SBX_RESOURCE_EXHAUSTED;
        default:
                return SBX_INVALID_ARGUMENT;
        }
}

/* A command that never started: "sbx: CODE: message" and the status. The daemon's
 * start_error reads "STEP OBJECT: REASON", STEP chdir (--cwd) or execve (the program).
 * A missing program is 127 and a program that cannot run 126, as in a shell; a working
 * directory that cannot be entered is an error of the request, 125, as `env -C` has it. */
static int start_failed(const struct sbx_result *r, const char *id, const char *cwd) {
        const char *text = r->start_error ? r->start_error : "";
        const char *sep = strrchr(text, ':');
        const char *why = sep ? sep + 1 : text;
        int err;
        enum sbx_code code;

        while (*why == ' ')
                why++;
        err = start_errno_of(r, why);
        code = errno_code(err);
        if (strncmp(text, "chdir ", 6) == 0) {
                cli_error(code,
                          "cannot enter working directory '%s' in sandbox '%s': %s; pass an "
                          "existing directory to --cwd (default /workspace)",
                          cwd ? cwd : "/workspace", id, why);
                return CLI_EXIT_ERROR;
        }
        if (strncmp(text, "execve ", 7) == 0 && sep) {
                int n = (int)(sep - text - 7);
                if (err == ENOENT) {
                        cli_error(code,
                                  "program '%.*s' not found in sandbox '%s' (not on its PATH, or "
                                  "no such file)",
                                  n, text + 7, id);
                        return 127;
                }
                cli_error(code, "cannot execute '%.*s' in sandbox '%s': %s", n, text + 7, id, why);
                return 126;
        }
        cli_error(code, "command could not start in sandbox '%s': %s", id,
                  *text ? text : "no reason given");
        return err == ENOENT ? 127 : 126;
}

/* "; limits hit: cpu, memory" for the ending line, or "". */
static void limits_text(char *buf, size_t len, const struct sbx_result *r) {
        size_t o = 0;

        buf[0] = 0;
        for (size_t i = 0; i < r->limits_hit.n && o < len; i++) {
                if (strcmp(r->limits_hit.v[i], "timeout") == 0)
                        continue; /* the line says so already */
                o += (size_t)snprintf(buf + o, len - o, "%s%s",
                                      o ? ", " : "; limits hit: ", r->limits_hit.v[i]);
        }
}

/* The one line on stderr for an ending that is not an exit (plain sbx exec). */
static void say_ending(const struct sbx_result *r, uint64_t timeout_ms, bool never_ran,
                       bool cancelled_by_us, int first_signal) {
        char lim[256], nb[16], secs[32];
        const char *cid = r->command_id && *r->command_id ? r->command_id : "?";

        limits_text(lim, sizeof(lim), r);
        fflush(stdout);
        switch (r->outcome) {
        case SBX_OUTCOME_TIMED_OUT:
                snprintf(secs, sizeof(secs), "%.3g", (double)timeout_ms / 1000.0);
                fprintf(stderr, "sbx: command %s timed out after %s s (killed)%s\n", cid, secs,
                        lim);
                break;
        case SBX_OUTCOME_SIGNALED:
                if (r->timed_out) {
                        snprintf(secs, sizeof(secs), "%.3g", (double)timeout_ms / 1000.0);
                        fprintf(stderr, "sbx: command %s timed out after %s s (killed)%s\n", cid,
                                secs, lim);
                } else {
                        fprintf(stderr, "sbx: command %s was killed by signal %d (SIG%s)%s\n", cid,
                                r->signal, sig_name(r->signal, nb, sizeof(nb)), lim);
                }
                break;
        case SBX_OUTCOME_OUT_OF_MEMORY:
                fprintf(stderr,
                        "sbx: command %s ran out of memory and was killed (peak %.1f MiB; the "
                        "sandbox's --memory)%s\n",
                        cid, (double)r->peak_memory_bytes / (1024.0 * 1024.0), lim);
                break;
        case SBX_OUTCOME_CANCELLED:
                if (never_ran)
                        fprintf(stderr,
                                "sbx: command %s was cancelled while it waited for a slot (it "
                                "never ran)\n",
                                cid);
                else if (cancelled_by_us)
                        fprintf(stderr, "sbx: command %s was killed after SIG%s (cancelled)\n", cid,
                                sig_name(first_signal, nb, sizeof(nb)));
                else
                        fprintf(stderr, "sbx: command %s was cancelled (killed)\n", cid);
                break;
        case SBX_OUTCOME_EXITED:
        case SBX_OUTCOME_START_FAILED:
        case SBX_OUTCOME_SANDBOX_ENDED:
        case SBX_OUTCOME_QUEUE_TIMEOUT:
        case SBX_OUTCOME_UNKNOWN:
        case SBX_OUTCOME_RUNNING:
        case SBX_OUTCOME_UNSPECIFIED:
                break;
        }
}

/* ---- sbx exec ----------------------------------------------------------------------------- */

/* Opens --stdin ("-" is our own stdin) to be streamed to the command as it is read, so
 * any size works and an interactive or slow producer is fed as it writes. Returns the
 * fd (>= 0) or, negated, an exit status. */
static int open_stdin_opt(const char *path) {
        int fd;
        if (strcmp(path, "-") == 0)
                return STDIN_FILENO;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -cli_error(errno == ENOENT ? SBX_NOT_FOUND : SBX_INVALID_ARGUMENT,
                                  "cannot open --stdin file '%s': %s", path, strerror(errno));
        return fd;
}

/* Whether fd is /dev/null (on Linux always the character device 1:3). */
static bool is_dev_null(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

/* Whether our own stdin is forwarded without --stdin: when it is open and not a
 * terminal (a pipe, a file), as ssh does. /dev/null is not forwarded: the command gets
 * the daemon's own /dev/null instead of a pipe that streams nothing, which spares a
 * CommandInput with the end of file and the daemon a pipe. */
static bool stdin_forwarded_by_default(void) {
        return fcntl(STDIN_FILENO, F_GETFD) >= 0 && !isatty(STDIN_FILENO) &&
               !is_dev_null(STDIN_FILENO);
}

/* Joins words with single spaces (for --shell). NULL when memory runs out. */
static char *join_words(char **w, int n) {
        size_t len = 1;
        char *s, *p;

        for (int i = 0; i < n; i++)
                len += strlen(w[i]) + 1;
        s = malloc(len);
        if (!s)
                return NULL;
        p = s;
        for (int i = 0; i < n; i++) {
                size_t l = strlen(w[i]);
                if (i)
                        *p++ = ' ';
                memcpy(p, w[i], l);
                p += l;
        }
        *p = 0;
        return s;
}

/* Options may also sit between the ID and "--" (`exec ID --json -- ls`): parses those
 * of *words (up to the "--", with the ID standing in as argv[0]) and moves *words past
 * the "--". 0 or an exit status. */
static int options_before_dashdash(struct cli *cli, struct exec_state *st, char *cmd, char ***words,
                                   int *nwords) {
        char **w = *words, *saved;
        const char *pos = NULL;
        int m = -1, sub_next, status;
        bool sub_dd;

        for (int i = 0; i < *nwords; i++)
                if (strcmp(w[i], "--") == 0) {
                        m = i;
                        break;
                }
        if (m == 0) {
                *words = w + 1;
                *nwords -= 1;
                return 0;
        }
        if (m < 0 || w[0][0] != '-')
                return 0;
        saved = w[-1];
        w[-1] = cmd;
        status = parse_opts(cli, st, m + 1, w - 1, &pos, &sub_next, &sub_dd);
        w[-1] = saved;
        if (!status && pos)
                status = cli_usage_error("unexpected argument '%s' before '--' for sbx exec", pos);
        if (status)
                return status;
        *words = w + m + 1;
        *nwords -= m + 1;
        return 0;
}

/* The command: argv as given, or with --shell the words joined into one string. */
static int exec_set_command(struct exec_state *st, char **words, int nwords) {
        if (st->shell) {
                st->shell_text = join_words(words, nwords);
                if (!st->shell_text)
                        return cli_error(SBX_INTERNAL, "out of memory");
                st->o.shell = st->shell_text;
        } else {
                st->o.argv = (const char *const *)words;
                st->o.argc = (size_t)nwords;
        }
        st->o.env = st->env;
        st->o.n_env = st->n_env;
        return 0;
}

/* The command's stdin: --stdin's file (or our stdin for "-"), else our own stdin when
 * it is forwarded by default, streamed either way. 0 or an exit status. */
static int exec_set_stdin(struct exec_state *st) {
        int fd;

        if (st->stdin_path) {
                fd = open_stdin_opt(st->stdin_path);
                if (fd < 0)
                        return -fd;
                st->in_fd = fd;
                st->o.stdin_stream = 1;
                st->o.stdin_fd = fd;
        } else if (!st->no_stdin && stdin_forwarded_by_default()) {
                st->o.stdin_stream = 1;
                st->o.stdin_fd = STDIN_FILENO;
        }
        return 0;
}

/* -t: the command's terminal, sized as ours (or as our stdout, or the default), fed
 * from our stdin (unless -n or --stdin say otherwise). -t without a terminal on stdin is
 * an error (raw input needs one; ssh only warns), -tt goes on without. 0 or an exit
 * status. */
static int exec_set_tty(struct exec_state *st) {
        bool term;

        if (!st->tty)
                return 0;
        term = isatty(STDIN_FILENO);
        if (!term && st->tty < 2)
                return cli_usage_error("sbx exec -t needs a terminal on stdin (it is not one); "
                                       "give -tt to run the command on a terminal anyway");
        st->o.tty = 1;
        if (cli_tty_size(STDIN_FILENO, &st->o.rows, &st->o.cols) < 0 &&
            cli_tty_size(STDOUT_FILENO, &st->o.rows, &st->o.cols) < 0)
                st->o.rows = st->o.cols = 0; /* the daemon's 24 x 80 */
        if (!st->stdin_path && !st->no_stdin && fcntl(STDIN_FILENO, F_GETFD) >= 0) {
                st->o.stdin_stream = 1;
                st->o.stdin_fd = STDIN_FILENO;
        }
        return 0;
}

/* The whole command line of exec into st: its options, the sandbox ID (*ret_id), the
 * command and its stdin. 0, -1 (help shown) or an exit status. */
static int parse_exec_line(struct cli *cli, struct exec_state *st, int argc, char **argv,
                           const char **ret_id) {
        char **words;
        int nwords, next = 0, status;
        bool dashdash = false;

        status = parse_opts(cli, st, argc, argv, ret_id, &next, &dashdash);
        if (status)
                return status;
        if (!*ret_id)
                return cli_usage_error(
                        "sbx exec needs a sandbox ID and a command: sbx exec ID -- ARGV...");
        words = argv + next;
        nwords = argc - next;
        if (!dashdash && nwords > 0) {
                status = options_before_dashdash(cli, st, argv[0], &words, &nwords);
                if (status)
                        return status;
        }
        if (nwords == 0)
                return cli_usage_error(
                        "sbx exec needs a command after the sandbox ID: sbx exec %s -- ARGV...",
                        *ret_id);
        if (st->stdin_path && st->no_stdin)
                return cli_usage_error("sbx exec takes --stdin or -n (--no-stdin), not both");
        status = exec_set_command(st, words, nwords);
        if (!status)
                status = exec_set_stdin(st);
        return status ? status : exec_set_tty(st);
}

/* What sbx exec prints and the status it exits with, for the reply (rc, r) to the
 * command of st in sandbox id. */
static int exec_report(sbx_client *c, enum sbx_code rc, const struct sbx_result *r,
                       const struct exec_state *st, const struct run *run, const char *id) {
        struct json j;
        int status;

        if (!r)
                return cli_client_error(c, rc);
        /* A result may come with a failure status when the command never started. */
        if (rc != SBX_OK && r->outcome != SBX_OUTCOME_START_FAILED)
                return cli_client_error(c, rc);
        if (r->has_owner_uid)
                cli_warn_not_owner(c, id, r->owner_uid);
        if (st->json) {
                json_init(&j, stdout);
                json_result(&j, r);
                return json_finish(&j) < 0 ? cli_error(SBX_INTERNAL, "cannot write to stdout: %s",
                                                       strerror(errno))
                                           : 0;
        }
        /* A daemon that does not stream puts the output into the result instead. */
        if (!run->ss.chunks[SBX_STDOUT] && r->stdout_len)
                cli_write_all(STDOUT_FILENO, r->stdout_data, r->stdout_len);
        if (!run->ss.chunks[SBX_STDERR] && r->stderr_len)
                cli_write_all(STDERR_FILENO, r->stderr_data, r->stderr_len);
        if (r->outcome == SBX_OUTCOME_START_FAILED)
                return start_failed(r, id, st->o.cwd);
        say_ending(r, st->o.timeout_ms ? st->o.timeout_ms : SBX_DEFAULT_COMMAND_TIMEOUT_MS,
                   !run->fw->started, run->fw->cancelled_by_us, run->fw->first);
        status = result_status(r);
        return status < 0 ? no_status_error(r) : status;
}

int cli_result_status(const struct sbx_result *r) {
        int status;

        if (r->outcome == SBX_OUTCOME_START_FAILED)
                return start_failed(r, r->sandbox_id, NULL);
        status = result_status(r);
        return status < 0 ? no_status_error(r) : status;
}

void cli_json_result(struct json *j, const struct sbx_result *r) {
        json_result(j, r);
}

int cmd_exec(struct cli *cli, int argc, char **argv) {
        struct exec_state st;
        struct forwarder fw;
        struct run run = {.fw = &fw};
        struct sbx_result *r = NULL;
        const char *id = NULL;
        sbx_client *c = NULL;
        enum sbx_code rc;
        int status;

        memset(&st, 0, sizeof(st));
        memset(&fw, 0, sizeof(fw));
        fw.sfd = -1;
        sbx_exec_opts_init(&st.o);
        st.in_fd = -1;
        st.env = calloc((size_t)argc, sizeof(*st.env));
        if (!st.env)
                return cli_error(SBX_INTERNAL, "out of memory");
        status = parse_exec_line(cli, &st, argc, argv, &id);
        if (!status && st.background && st.stdin_path)
                status = cli_usage_error("sbx exec --background takes no --stdin: nothing "
                                         "forwards it once sbx has left");
        if (!status && st.background && st.tty)
                status = cli_usage_error("sbx exec --background takes no -t: our terminal is "
                                         "not there once sbx has left (sbx attach follows its "
                                         "output)");
        /* No timeout is for a background command only (the daemon refuses timeout_ms 0
         * otherwise, naming the same rule); libsbx would read 0 as its default, 60 s. */
        if (!status && !st.background && st.timeout_given && st.o.timeout_ms == 0)
                status = cli_usage_error(
                        "sbx exec --timeout 0 (no timeout) is refused: only a background "
                        "command may have none (sbx exec --background, which runs until it "
                        "exits or the sandbox ends); give --timeout SECS above 0 (default 60)");
        if (!status && st.background) {
                /* No timeout of its own unless --timeout gives one (other than 0): it runs
                 * until it exits or the sandbox ends, bounded by the sandbox's lifetime. */
                st.o.no_timeout = !st.timeout_given || st.o.timeout_ms == 0;
                if (st.o.no_timeout)
                        st.o.timeout_ms = 0;
                /* Nobody forwards our stdin to it: it reads /dev/null (or what
                 * sbx_send_input gives a client that keeps it open). */
                st.o.stdin_stream = 0;
                status = cli_exec_background(cli, id, &st.o, st.json);
                free(st.shell_text);
                if (st.in_fd > STDIN_FILENO)
                        close(st.in_fd);
                free(st.env);
                return status;
        }
        if (!st.json)
                st.o.on_output = on_output;
        st.o.on_started = on_started;
        st.o.on_queued = on_queued;
        st.o.userdata = &run;
        run.sandbox_id = id;
        if (!status)
                status = cli_connect(cli, &c);
        if (!status) {
                fw.print_id = st.print_id;
                fw.json = st.json;
                fw.winch_fd = st.o.tty && isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
                fflush(stdout);
                forwarder_start(&fw, cli, id, c);
                if (fw.winch_fd >= 0 && (status = cli_tty_raw(STDIN_FILENO)) < 0)
                        cli_warn("cannot put the terminal in raw mode: %s", strerror(-status));
                status = 0;
                rc = sbx_exec(c, id, &st.o, &r);
                cli_tty_restore();
                forwarder_stop(&fw, c);
                status = exec_report(c, rc, r, &st, &run, id);
        }
        sbx_result_free(r);
        sbx_close(c);
        free(st.shell_text);
        if (st.in_fd > STDIN_FILENO)
                close(st.in_fd);
        free(st.env);
        return status < 0 ? 0 : status;
}

/* ---- sbx cancel ---------------------------------------------------------------------------- */

/* The signals sbx cancel --signal takes (those sbx_signal allows). */
static const struct {
        const char *name;
        int sig;
} cancel_signals[] = {
        {"INT", SIGINT},   {"TERM", SIGTERM}, {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"KILL", SIGKILL},
};

/* "INT", "SIGINT", "sigint" or "2": the signal, or 0. */
static int parse_signal(const char *s) {
        uint64_t v;

        if (cli_parse_uint(s, 64, &v) == 0) {
                for (size_t i = 0; i < sizeof(cancel_signals) / sizeof(cancel_signals[0]); i++)
                        if (cancel_signals[i].sig == (int)v)
                                return (int)v;
                return 0;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < sizeof(cancel_signals) / sizeof(cancel_signals[0]); i++)
                if (strcasecmp(s, cancel_signals[i].name) == 0)
                        return cancel_signals[i].sig;
        return 0;
}

int cmd_cancel(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {{"signal", true, 's'}, {NULL, false, 0}};
        const char *pos[2];
        size_t npos = 0;
        int sig = SIGKILL, k, status = 0;
        struct cli_opts p;
        sbx_client *c;
        enum sbx_code rc;

        cli_opts_init(&p, cli, argc, argv, opts);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, argv[0]);
                        return 0;
                }
                if (k == CLI_OPT_POS) {
                        if (npos == 2)
                                return cli_usage_error("unexpected argument '%s' for sbx cancel",
                                                       p.arg);
                        pos[npos++] = p.arg;
                } else if (!(sig = parse_signal(p.arg))) {
                        return cli_bad_value("cancel", "--signal", p.arg,
                                             "expected INT, TERM, HUP, QUIT, USR1, USR2 or KILL");
                }
        }
        if (npos < 2)
                return cli_usage_error("sbx cancel needs a sandbox ID and a command ID (c-N, "
                                       "from sbx exec --print-id or sbx history)");
        if ((status = cli_connect(cli, &c)))
                return status;
        if (sig == SIGKILL)
                rc = sbx_cancel(c, pos[0], pos[1]);
        else
                rc = sbx_signal(c, pos[0], pos[1], sig);
        if (rc != SBX_OK)
                status = cli_client_error(c, rc);
        sbx_close(c);
        return status;
}
