/* it_cli.c: integration tests of the sbx command-line tool as a user meets it: the real
 * build/sbx binary run as a subprocess against a real sbxd. Failures with --json are
 * JSON; ls, read and write speak JSON; abnormal endings of `sbx exec` say so on stderr;
 * a start failure keeps the "sbx: CODE: message" form and its own exit status; signals
 * of sbx reach the command; piped stdin is forwarded and a stdin that never closes does
 * not hang sbx; bytes that are not UTF-8 survive --json; a command's ID is known as it
 * starts; cancel, stat, mkdir, rm and bulk terminate; messages name the CLI's flags; and
 * create tells a person at a terminal when the sandbox ends. Each test asserts an
 * outcome and, where time matters, a bound. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

/* ---- running sbx ------------------------------------------------------------------------- */

/* A running sbx: its pid and the read ends of its stdout and stderr. */
struct proc {
        pid_t pid;
        int out, err;
        char *obuf, *ebuf;
        size_t olen, elen;
        double signalled_ms; /* when exec_and_signal sent the first signal */
};

/* Starts build/sbx with args (NULL-terminated), SBX_SOCKET set to d's socket, stdin_fd
 * as its stdin (-1: /dev/null) and stderr_fd as its stderr (-1: a pipe read into
 * p->ebuf). */
static void spawn_sbx(struct it_daemon *d, int stdin_fd, int stderr_fd, const char *const *args,
                      struct proc *p) {
        int o[2], e[2] = {-1, -1};
        char bin[512], *argv[64];
        size_t n = 0;

        memset(p, 0, sizeof(*p));
        snprintf(bin, sizeof(bin), "%s/sbx", it_build_dir());
        argv[n++] = bin;
        while (args && *args && n < 62)
                argv[n++] = (char *)(uintptr_t)*args++;
        argv[n] = NULL;
        ck_assert_int_eq(pipe2(o, O_CLOEXEC), 0);
        if (stderr_fd < 0)
                ck_assert_int_eq(pipe2(e, O_CLOEXEC), 0);
        p->pid = fork();
        ck_assert_int_ge(p->pid, 0);
        if (p->pid == 0) {
                int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(in, 0);
                dup2(o[1], 1);
                dup2(stderr_fd >= 0 ? stderr_fd : e[1], 2);
                setenv("SBX_SOCKET", d->sock, 1);
                execv(bin, argv);
                _exit(127);
        }
        close(o[1]);
        p->out = o[0];
        p->err = -1;
        if (stderr_fd < 0) {
                close(e[1]);
                p->err = e[0];
        }
}

/* Appends what fd has now to *buf (NUL-terminated); 0 at end of file. */
static ssize_t drain_some(int fd, char **buf, size_t *len) {
        char chunk[4096];
        ssize_t r = read(fd, chunk, sizeof(chunk));

        if (r < 0 && (errno == EINTR || errno == EAGAIN))
                return 1;
        if (r <= 0)
                return 0;
        *buf = realloc(*buf, *len + (size_t)r + 1);
        ck_assert_ptr_nonnull(*buf);
        memcpy(*buf + *len, chunk, (size_t)r);
        *len += (size_t)r;
        (*buf)[*len] = 0;
        return r;
}

/* How many bytes the pipe whose read end is fd holds. */
static int pipe_queued(int fd) {
        int n = -1;

        ck_assert_int_eq(ioctl(fd, FIONREAD, &n), 0);
        return n;
}

/* Reads p's stdout and stderr until *buf (p->obuf or p->ebuf) holds needle (or the ends
 * close, or ms pass). 1 when needle was seen. */
static int wait_in(struct proc *p, char *const *buf, const char *needle, int ms) {
        double t0 = it_now_ms();

        while (it_now_ms() - t0 < ms) {
                struct pollfd f[2] = {{.fd = p->out, .events = POLLIN},
                                      {.fd = p->err, .events = POLLIN}};
                if (*buf && strstr(*buf, needle))
                        return 1;
                if (p->out < 0 && p->err < 0)
                        return 0;
                if (poll(f, 2, 50) <= 0)
                        continue;
                if (p->out >= 0 && f[0].revents && !drain_some(p->out, &p->obuf, &p->olen)) {
                        close(p->out);
                        p->out = -1;
                }
                if (p->err >= 0 && f[1].revents && !drain_some(p->err, &p->ebuf, &p->elen)) {
                        close(p->err);
                        p->err = -1;
                }
        }
        return *buf && strstr(*buf, needle);
}

static int wait_stderr(struct proc *p, const char *needle, int ms) {
        return wait_in(p, &p->ebuf, needle, ms);
}

/* Reads the rest of p's output and reaps it; its exit code, or 256+N for signal N.
 * p->obuf and p->ebuf are never NULL afterwards (the caller frees them). */
static int finish(struct proc *p) {
        int st;

        while (p->out >= 0 || p->err >= 0) {
                struct pollfd f[2] = {{.fd = p->out, .events = POLLIN},
                                      {.fd = p->err, .events = POLLIN}};
                if (poll(f, 2, 1000) < 0 && errno != EINTR)
                        break;
                if (p->out >= 0 && f[0].revents && !drain_some(p->out, &p->obuf, &p->olen)) {
                        close(p->out);
                        p->out = -1;
                }
                if (p->err >= 0 && f[1].revents && !drain_some(p->err, &p->ebuf, &p->elen)) {
                        close(p->err);
                        p->err = -1;
                }
        }
        ck_assert_int_eq(waitpid(p->pid, &st, 0), p->pid);
        if (!p->obuf)
                p->obuf = calloc(1, 1);
        if (!p->ebuf)
                p->ebuf = calloc(1, 1);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

static void proc_free(struct proc *p) {
        free(p->obuf);
        free(p->ebuf);
}

/* it_sbx with both outputs kept; the caller frees them. */
static int sbx(struct it_daemon *d, const char *in, char **out, char **err,
               const char *const *args) {
        return it_sbx(d, in, in ? strlen(in) : 0, out, err, args);
}

#define has(hay, needle)   ck_assert_msg(strstr((hay), (needle)), "no '%s' in '%s'", (needle), (hay))
#define hasnt(hay, needle) ck_assert_msg(!strstr((hay), (needle)), "'%s' in '%s'", (needle), (hay))

/* Starts a daemon and creates sandbox id in it. */
static sbx_client *start(struct it_daemon *d, const char *id, const char *const *extra) {
        sbx_client *c;

        it_daemon_start(d, extra);
        c = it_connect(d);
        if (id)
                free(it_create(c, id));
        return c;
}

static void stop(struct it_daemon *d, sbx_client *c) {
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(d), 0);
}

/* ---- 2: --json failures are JSON; ls, read and write speak JSON ------------------------------ */

START_TEST(json_failures_are_json) {
        struct it_daemon d;
        sbx_client *c = start(&d, "j", NULL);
        char *out, *err;
        int rc;

        {
                const char *a[] = {"info", "--json", "nosuch", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                ck_assert_msg(
                        strncmp(out, "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"", 40) == 0,
                        "stdout: '%s'", out);
                has(out, "nosuch");
                ck_assert_msg(out[strlen(out) - 1] == '\n' &&
                                      strchr(out, '\n') == out + strlen(out) - 1,
                              "not one line: '%s'", out);
                has(err, "sbx: NOT_FOUND: ");
                free(out);
                free(err);
        }
        /* A usage error before the parser reaches --json, and one after it. */
        {
                const char *a[] = {"ls", "--bogus", "--json", "j", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                has(out, "{\"error\":{\"code\":\"INVALID_ARGUMENT\"");
                has(err, "sbx: INVALID_ARGUMENT: unknown option '--bogus'");
                free(out);
                free(err);
        }
        {
                const char *a[] = {"exec", "--json", "nosuch", "--", "true", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                has(out, "{\"error\":{\"code\":\"NOT_FOUND\"");
                has(err, "sbx: NOT_FOUND: ");
                free(out);
                free(err);
        }
        /* Without --json stdout stays empty. */
        {
                const char *a[] = {"info", "nosuch", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                ck_assert_str_eq(out, "");
                free(out);
                free(err);
        }
        stop(&d, c);
}
END_TEST

START_TEST(ls_read_write_json) {
        struct it_daemon d;
        sbx_client *c = start(&d, "f", NULL);
        char *out, *err;
        int rc;

        {
                struct sbx_result *r = it_sh(c, "f", 10000,
                                             "mkdir /workspace/d && cd /workspace/d && touch a b "
                                             "c d e && printf '\\377\\000x' > /workspace/bin");
                ck_assert_int_eq(r->exit_code, 0);
                sbx_result_free(r);
        }
        {
                const char *a[] = {"ls", "--json", "f", "/workspace/d", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                ck_assert_msg(strncmp(out,
                                      "{\"sandbox_id\":\"f\",\"path\":\"/workspace/d\","
                                      "\"entries\":[{\"name\":",
                                      59) == 0,
                              "%s", out);
                has(out, "],\"truncated\":false}\n");
                free(out);
        }
        {
                const char *a[] = {"ls", "--json", "--limit", "2", "f", "/workspace/d", NULL};
                const char *p;
                int n = 0;
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "\"truncated\":true}");
                for (p = out; (p = strstr(p, "\"name\":")); p++)
                        n++;
                ck_assert_int_eq(n, 2);
                free(out);
        }
        {
                const char *a[] = {"ls", "--limit", "2", "f", "/workspace/d", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, &err, a), 0);
                has(err, "cut at 2 entries");
                free(out);
                free(err);
        }
        {
                const char *a[] = {"write", "--json", "f", "/workspace/w.txt", NULL};
                ck_assert_int_eq(sbx(&d, "hello\n", &out, NULL, a), 0);
                ck_assert_str_eq(out, "{\"sandbox_id\":\"f\",\"path\":\"/workspace/w.txt\","
                                      "\"bytes\":6,\"append\":false}\n");
                free(out);
        }
        {
                const char *a[] = {"read", "--json", "f", "/workspace/w.txt", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                ck_assert_str_eq(out, "{\"sandbox_id\":\"f\",\"path\":\"/workspace/w.txt\","
                                      "\"offset\":0,\"bytes\":6,\"size\":6,\"next_offset\":6,"
                                      "\"eof\":true,\"data\":\"hello\\n\",\"data_base64\":null}\n");
                free(out);
        }
        {
                const char *a[] = {"read", "--json", "f", "/workspace/bin", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "\"data_base64\":\"/wB4\"}");
                free(out);
        }
        {
                const char *a[] = {"read", "--json", "f", "/workspace/nosuch", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                has(out, "{\"error\":{\"code\":\"NOT_FOUND\"");
                free(out);
                free(err);
        }
        stop(&d, c);
}
END_TEST

/* ---- 4: abnormal endings say so; start failures keep the CODE form -------------------- */

START_TEST(abnormal_endings_say_so) {
        struct it_daemon d;
        sbx_client *c = start(&d, "e", NULL);
        char *out, *err;
        double t0;
        int rc;

        {
                const char *a[] = {"exec", "--timeout", "0.3", "e", "--", "sleep", "100", NULL};
                t0 = it_now_ms();
                rc = sbx(&d, NULL, NULL, &err, a);
                ck_assert_int_eq(rc, 124);
                /* At the timeout, long before the sleep's end (room for a loaded machine). */
                ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
                ck_assert_msg(strstr(err, "sbx: command c-") &&
                                      strstr(err, " timed out after 0.3 s (killed)\n"),
                              "stderr: '%s'", err);
                free(err);
        }
        {
                const char *a[] = {"exec", "e", "--", "sh", "-c", "kill -TERM $$", NULL};
                rc = sbx(&d, NULL, NULL, &err, a);
                ck_assert_int_eq(rc, 128 + SIGTERM);
                has(err, " was killed by signal 15 (SIGTERM)\n");
                free(err);
        }
        /* A plain exit says nothing. */
        {
                const char *a[] = {"exec", "e", "--", "sh", "-c", "exit 3", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_int_eq(rc, 3);
                ck_assert_str_eq(err, "");
                free(out);
                free(err);
        }
        /* A missing program, a program that cannot run, a missing --cwd: each its own
         * status and message, in the "sbx: CODE: message" form. */
        {
                const char *a[] = {"exec", "e", "--", "sbxt-no-such-program", NULL};
                rc = sbx(&d, NULL, NULL, &err, a);
                ck_assert_int_eq(rc, 127);
                ck_assert_msg(strncmp(err,
                                      "sbx: NOT_FOUND: program 'sbxt-no-such-program' not found",
                                      56) == 0,
                              "stderr: '%s'", err);
                free(err);
        }
        {
                const char *a[] = {"exec", "e", "--", "/etc/passwd", NULL};
                rc = sbx(&d, NULL, NULL, &err, a);
                ck_assert_int_eq(rc, 126);
                ck_assert_msg(strncmp(err, "sbx: PERMISSION_DENIED: cannot execute '/etc/passwd'",
                                      51) == 0,
                              "stderr: '%s'", err);
                free(err);
        }
        {
                const char *a[] = {"exec", "--cwd", "/sbxt-nosuch", "e", "--", "true", NULL};
                rc = sbx(&d, NULL, NULL, &err, a);
                ck_assert_int_eq(rc, 125);
                ck_assert_msg(
                        strncmp(err,
                                "sbx: NOT_FOUND: cannot enter working directory '/sbxt-nosuch'",
                                61) == 0,
                        "stderr: '%s'", err);
                has(err, "--cwd");
                free(err);
        }
        /* The sandbox ends under a running command: its own code, 125. */
        {
                const char *a[] = {"exec", "--print-id", "e", "--", "sleep", "30", NULL};
                struct proc p;
                spawn_sbx(&d, -1, -1, a, &p);
                ck_assert_msg(wait_stderr(&p, "\n", 10000), "no ID");
                ck_assert_int_eq(sbx_terminate(c, "e", NULL), SBX_OK);
                rc = finish(&p);
                ck_assert_int_eq(rc, 125);
                has(p.ebuf, "sbx: SANDBOX_ENDED: sandbox 'e' ended");
                proc_free(&p);
        }
        /* Out of memory, where this host can enforce a memory limit. */
        {
                struct sbx_create_opts o;
                struct sbx_sandbox *s = NULL;
                const char *a[] = {"exec", "oom",
                                   "--",   "python3",
                                   "-c",   "b = []\nwhile True: b.append(bytearray(1 << 20))",
                                   NULL};
                bool enforced = false;
                sbx_create_opts_init(&o);
                o.id = "oom";
                o.policy.limits.set = SBX_LIMIT_MEMORY;
                o.policy.limits.memory_bytes = 64u << 20;
                ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
                for (size_t i = 0; i < s->n_enforcement; i++)
                        if (strcmp(s->enforcement[i].limit, "memory") == 0 &&
                            strcmp(s->enforcement[i].enforcement, "none") != 0)
                                enforced = true;
                sbx_sandbox_free(s);
                if (enforced) {
                        rc = sbx(&d, NULL, NULL, &err, a);
                        ck_assert_msg(rc == 137, "status %d: %s", rc, err);
                        has(err, " ran out of memory and was killed");
                        free(err);
                } else {
                        fprintf(stderr, "it_cli: no memory limit on this host; the out-of-memory "
                                        "line is not tried\n");
                }
        }
        stop(&d, c);
}
END_TEST

/* A command cancelled from another process: sbx cancel, with the ID sbx exec --print-id
 * gave at the start; the running command shows as running in the history meanwhile (it
 * runs until cancelled, however slow the steps between). */
START_TEST(print_id_cancel_and_running_history) {
        struct it_daemon d;
        sbx_client *c = start(&d, "p", NULL);
        const char *a[] = {"exec", "--print-id", "p", "--", "sleep", "600", NULL};
        char *out, *err, cid[64];
        struct proc p;
        double t0;
        int rc;

        spawn_sbx(&d, -1, -1, a, &p);
        ck_assert_msg(wait_stderr(&p, "\n", 10000), "no ID: '%s'", p.ebuf ? p.ebuf : "");
        ck_assert_msg(sscanf(p.ebuf, "%63[^\n]", cid) == 1 && strncmp(cid, "c-", 2) == 0,
                      "first line '%s'", p.ebuf);
        {
                const char *h[] = {"history", "p", NULL};
                const char *hj[] = {"history", "--json", "p", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, h), 0);
                has(out, "running");
                hasnt(out, "unspecified");
                free(out);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, hj), 0);
                has(out, "\"outcome\":\"running\"");
                free(out);
        }
        {
                const char *k[] = {"cancel", "p", cid, NULL};
                t0 = it_now_ms();
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, k), 0);
                free(err);
        }
        rc = finish(&p);
        /* At the cancel, not when the sleep ends. */
        ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
        ck_assert_int_eq(rc, 137);
        has(p.ebuf, " was cancelled (killed)\n");
        proc_free(&p);
        /* With --json the first line is the start, the second the result. */
        {
                const char *j[] = {"exec", "--json", "--print-id", "p", "--", "true", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, j), 0);
                ck_assert_msg(strncmp(out, "{\"sandbox_id\":\"p\",\"command_id\":\"c-", 34) == 0,
                              "%s", out);
                has(out, "\"outcome\":\"running\"}\n{\"sandbox_id\":\"p\"");
                has(out, "\"outcome\":\"exited\"");
                free(out);
        }
        /* Cancelling what is not running is an error. */
        {
                const char *k[] = {"cancel", "p", cid, NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, k), 125);
                has(err, "sbx: NOT_FOUND: ");
                free(err);
        }
        stop(&d, c);
}
END_TEST

/* ---- 5: signals of sbx reach the command ------------------------------------------------ */

/* Runs shell in sandbox id through sbx exec --print-id and sends sbx the signals in sigs
 * (0-terminated) once the command is ready for them: once the shell wrote "armed" to
 * stderr (after it set its traps) when it says it will (it has "echo armed" in it), or
 * else once a process whose command line starts with running is there (a shell takes a
 * SIGINT that comes while it starts up as its own: dash catches it and goes on); and
 * each signal after the first once the command's stdout holds took (it took the one
 * before). Its exit status, output in *p. sbx must wait for those signals on its one
 * thread (a thread of its own cost 0.5 ms of each sbx exec). */
static int exec_and_signal(struct it_daemon *d, const char *id, const char *shell, const int *sigs,
                           const char *took, const char *running, struct proc *p) {
        const char *a[] = {"exec", "--print-id", id, "--", "sh", "-c", shell, NULL};
        const char *ready = strstr(shell, "echo armed") ? "armed\n" : "\n";

        spawn_sbx(d, -1, -1, a, p);
        ck_assert_msg(wait_stderr(p, ready, 30000), "not %s: '%s'",
                      strcmp(ready, "\n") ? "armed" : "started", p->ebuf ? p->ebuf : "");
        for (double t0 = it_now_ms(); running && it_find_proc(running, running) < 0; usleep(20000))
                ck_assert_msg(it_now_ms() - t0 < 30000, "no %s after 30 s", running);
        ck_assert_int_eq(it_proc_status(p->pid, "Threads"), 1);
        for (int first = 1; *sigs; sigs++, first = 0) {
                if (!first)
                        ck_assert_msg(wait_in(p, &p->obuf, took, 30000), "'%s' not in '%s'", took,
                                      p->obuf ? p->obuf : "");
                else
                        p->signalled_ms = it_now_ms();
                kill(p->pid, *sigs);
        }
        return finish(p);
}

START_TEST(signals_forwarded) {
        struct it_daemon d;
        sbx_client *c = start(&d, "s", NULL);
        struct proc p;
        int rc;

        /* SIGINT runs the command's trap. */
        {
                const int sigs[] = {SIGINT, 0};
                rc = exec_and_signal(
                        &d, "s",
                        "trap 'echo trapped INT; exit 3' INT; echo armed >&2; sleep 30 & wait",
                        sigs, NULL, NULL, &p);
                ck_assert_msg(rc == 3, "status %d, stderr '%s'", rc, p.ebuf);
                ck_assert_str_eq(p.obuf, "trapped INT\n");
                /* At the signal, not when the sleep ends. */
                ck_assert_msg(it_now_ms() - p.signalled_ms < 20000, "took %.0f ms",
                              it_now_ms() - p.signalled_ms);
                proc_free(&p);
        }
        /* SIGTERM and SIGHUP likewise, each as itself. */
        {
                const int sigs[] = {SIGTERM, 0};
                rc = exec_and_signal(
                        &d, "s",
                        "trap 'echo trapped TERM; exit 4' TERM; echo armed >&2; sleep 30 & wait",
                        sigs, NULL, NULL, &p);
                ck_assert_msg(rc == 4, "status %d, stderr '%s'", rc, p.ebuf);
                ck_assert_str_eq(p.obuf, "trapped TERM\n");
                proc_free(&p);
        }
        {
                const int sigs[] = {SIGHUP, 0};
                rc = exec_and_signal(
                        &d, "s",
                        "trap 'echo trapped HUP; exit 5' HUP; echo armed >&2; sleep 30 & wait",
                        sigs, NULL, NULL, &p);
                ck_assert_msg(rc == 5, "status %d, stderr '%s'", rc, p.ebuf);
                ck_assert_str_eq(p.obuf, "trapped HUP\n");
                proc_free(&p);
        }
        /* Without a trap the command dies of the signal, and sbx says so. */
        {
                const int sigs[] = {SIGINT, 0};
                char sleeper[64], shell[96];
                snprintf(sleeper, sizeof(sleeper), "sleep 30.%d", (int)getpid());
                snprintf(shell, sizeof(shell), "exec %s", sleeper);
                rc = exec_and_signal(&d, "s", shell, sigs, NULL, sleeper, &p);
                ck_assert_msg(rc == 128 + SIGINT, "status %d, stderr '%s'", rc, p.ebuf);
                has(p.ebuf, "was killed by signal 2 (SIGINT)");
                proc_free(&p);
        }
        /* A command that ignores it is killed at the second interrupt. */
        {
                const int sigs[] = {SIGINT, SIGINT, 0};
                rc = exec_and_signal(&d, "s",
                                     "trap 'echo ignored' INT; echo armed >&2; "
                                     "while :; do sleep 0.05; done",
                                     sigs, "ignored\n", NULL, &p);
                ck_assert_msg(rc == 137, "status %d, stderr '%s'", rc, p.ebuf);
                has(p.obuf, "ignored");
                has(p.ebuf, "was killed after SIGINT (cancelled)");
                /* At the second, not after the grace period (10 s after the first). */
                ck_assert_msg(it_now_ms() - p.signalled_ms < 9000, "took %.0f ms",
                              it_now_ms() - p.signalled_ms);
                proc_free(&p);
        }
        /* ... or after the grace period (10 s) without a second one. */
        {
                const int sigs[] = {SIGTERM, 0};
                rc = exec_and_signal(&d, "s", "trap '' TERM; echo armed >&2; sleep 60", sigs, NULL,
                                     NULL, &p);
                ck_assert_msg(rc == 137, "status %d, stderr '%s'", rc, p.ebuf);
                /* After the grace period, not when the sleep ends (60 s). */
                ck_assert_msg(it_now_ms() - p.signalled_ms > 9000 &&
                                      it_now_ms() - p.signalled_ms < 40000,
                              "took %.0f ms", it_now_ms() - p.signalled_ms);
                proc_free(&p);
        }
        /* The killed one left nothing behind. */
        {
                struct sbx_result *r = it_sh(c, "s", 10000, "ps -e -o args= | grep -c '^sleep 60'");
                ck_assert_str_eq((char *)r->stdout_data, "0\n");
                sbx_result_free(r);
        }
        stop(&d, c);
}
END_TEST

/* An interrupt reaches the command while sbx is stuck writing its output to a reader
 * that does not read (`sbx exec ... | less` on a screen): the write is interrupted, the
 * signal sent, and the write goes on. */
START_TEST(signal_reaches_command_while_output_stalls) {
        struct it_daemon d;
        sbx_client *c = start(&d, "s", NULL);
        const char *a[] = {"exec", "--print-id", "s", "--", "yes", NULL};
        struct proc p;
        double t0;
        int gone = 0;

        spawn_sbx(&d, -1, -1, a, &p);
        /* The ID comes on stderr; stdout is never read, so sbx soon waits in a write. */
        t0 = it_now_ms();
        while ((!p.ebuf || !strchr(p.ebuf, '\n')) && it_now_ms() - t0 < 10000) {
                struct pollfd f = {.fd = p.err, .events = POLLIN};
                if (poll(&f, 1, 50) > 0 && !drain_some(p.err, &p.ebuf, &p.elen))
                        break;
        }
        ck_assert_msg(p.ebuf && strchr(p.ebuf, '\n'), "no ID: '%s'", p.ebuf ? p.ebuf : "");
        /* Stuck: its stdout is full (and yes never stops), however long that took. */
        for (t0 = it_now_ms(); pipe_queued(p.out) < fcntl(p.out, F_GETPIPE_SZ); usleep(20000))
                ck_assert_msg(it_now_ms() - t0 < 30000, "sbx's stdout holds %d bytes after 30 s",
                              pipe_queued(p.out));
        kill(p.pid, SIGINT);
        for (t0 = it_now_ms(); !gone && it_now_ms() - t0 < 20000; usleep(100000)) {
                struct sbx_result *r = it_sh(c, "s", 10000, "ps -e -o args= | grep -c '^yes'");
                gone = strcmp((char *)r->stdout_data, "0\n") == 0;
                sbx_result_free(r);
        }
        ck_assert_msg(gone, "yes still runs 20 s after sbx got SIGINT");
        close(p.out); /* sbx's next write fails: it ends */
        p.out = -1;
        (void)finish(&p);
        proc_free(&p);
        stop(&d, c);
}
END_TEST

/* An interrupt reaches the command while its output never pauses: sbx reads reply
 * after reply without waiting (the socket always has more), and the signal is taken
 * between them, not when the output ends. */
START_TEST(signal_reaches_command_while_output_floods) {
        struct it_daemon d;
        sbx_client *c = start(&d, "s", NULL);
        const char *a[] = {"exec", "s", "--", "yes", NULL};
        char buf[65536];
        struct proc p;
        double t0;
        int st = -1, signalled = 0;

        spawn_sbx(&d, -1, -1, a, &p);
        for (t0 = it_now_ms(); it_now_ms() - t0 < 20000;) {
                struct pollfd f = {.fd = p.out, .events = POLLIN};
                pid_t w;
                if (poll(&f, 1, 50) > 0 && read(p.out, buf, sizeof(buf)) == 0)
                        break;
                if (p.pid > 0 && it_now_ms() - t0 > 500 && !signalled) {
                        kill(p.pid, SIGINT);
                        signalled = 1;
                }
                w = waitpid(p.pid, &st, WNOHANG);
                if (w == p.pid)
                        break;
        }
        ck_assert_msg(it_now_ms() - t0 < 10000, "sbx still ran %.0f ms after SIGINT",
                      it_now_ms() - t0 - 500);
        if (st == -1) /* its output ended first: it is exiting */
                ck_assert_int_eq(waitpid(p.pid, &st, 0), p.pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT, "status 0x%x", st);
        close(p.out);
        close(p.err);
        proc_free(&p);
        stop(&d, c);
}
END_TEST

/* ---- 6: piped stdin is forwarded, a stdin that never closes does not hang ------------------ */

START_TEST(stdin_forwarded) {
        struct it_daemon d;
        sbx_client *c = start(&d, "i", NULL);
        char *out, *err;
        int in[2];
        struct proc p;
        double t0;
        int rc;

        {
                const char *a[] = {"exec", "i", "--", "cat", NULL};
                ck_assert_int_eq(sbx(&d, "hi\n", &out, NULL, a), 0);
                ck_assert_str_eq(out, "hi\n");
                free(out);
        }
        {
                const char *a[] = {"exec", "-n", "i", "--", "cat", NULL};
                const char *b[] = {"exec", "--no-stdin", "i", "--", "cat", NULL};
                ck_assert_int_eq(sbx(&d, "hi\n", &out, NULL, a), 0);
                ck_assert_str_eq(out, "");
                free(out);
                ck_assert_int_eq(sbx(&d, "hi\n", &out, NULL, b), 0);
                ck_assert_str_eq(out, "");
                free(out);
        }
        {
                const char *a[] = {"exec", "--json", "i", "--", "cat", NULL};
                ck_assert_int_eq(sbx(&d, "in json\n", &out, NULL, a), 0);
                has(out, "\"stdout\":\"in json\\n\"");
                free(out);
        }
        {
                const char *a[] = {"exec", "-n", "--stdin", "-", "i", "--", "cat", NULL};
                ck_assert_int_eq(sbx(&d, "x", NULL, &err, a), 125);
                has(err, "sbx: INVALID_ARGUMENT: ");
                free(err);
        }
        /* /dev/null is not streamed: the command gets /dev/null itself, not a pipe. */
        {
                const char *a[] = {"exec",
                                   "i",
                                   "--",
                                   "sh",
                                   "-c",
                                   "if [ -p /dev/stdin ]; then echo pipe; fi; "
                                   "readlink /proc/self/fd/0",
                                   NULL};
                spawn_sbx(&d, -1, -1, a, &p);
                ck_assert_int_eq(finish(&p), 0);
                ck_assert_str_eq(p.obuf, "/dev/null\n");
                proc_free(&p);
                ck_assert_int_eq(sbx(&d, "", &out, NULL, a), 0);
                has(out, "pipe\n");
                free(out);
        }
        /* A stdin that never closes: a command that does not read it ends sbx at once... */
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        {
                const char *a[] = {"exec", "i", "--", "true", NULL};
                t0 = it_now_ms();
                spawn_sbx(&d, in[0], -1, a, &p);
                rc = finish(&p);
                ck_assert_int_eq(rc, 0);
                /* Not held by the stdin that never ends (room for a loaded machine). */
                ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
                proc_free(&p);
        }
        /* ... and one that reads it ends at its timeout. */
        {
                const char *a[] = {"exec", "--timeout", "1", "i", "--", "cat", NULL};
                t0 = it_now_ms();
                spawn_sbx(&d, in[0], -1, a, &p);
                rc = finish(&p);
                ck_assert_int_eq(rc, 124);
                ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
                proc_free(&p);
        }
        close(in[0]);
        close(in[1]);
        stop(&d, c);
}
END_TEST

/* ---- 7: bytes that are not UTF-8 survive --json -------------------------------------------- */

START_TEST(binary_output_in_json) {
        struct it_daemon d;
        sbx_client *c = start(&d, "b", NULL);
        char *out;

        {
                const char *a[] = {"exec", "--json", "b", "--", "printf", "\\377\\000a", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "\"stdout\":\"\xEF\xBF\xBD\\u0000a\"");
                has(out, "\"stdout_base64\":\"/wBh\",\"stderr_base64\":null}");
                free(out);
        }
        {
                const char *a[] = {
                        "exec", "--json", "b", "--", "sh", "-c", "printf 'h\xC3\xA9' >&2", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "\"stderr\":\"h\xC3\xA9\"");
                has(out, "\"stdout_base64\":null,\"stderr_base64\":null}");
                free(out);
        }
        stop(&d, c);
}
END_TEST

/* ---- 9: what libsbx can do, sbx can do ------------------------------------------------------ */

START_TEST(stat_mkdir_rm) {
        struct it_daemon d;
        sbx_client *c = start(&d, "m", NULL);
        char *out, *err;

        {
                const char *a[] = {"mkdir", "m", "/workspace/x/y", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, a), 125);
                has(err, "sbx: NOT_FOUND: ");
                free(err);
        }
        {
                const char *a[] = {"mkdir", "-p", "m", "/workspace/x/y", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, a), 0);
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, a), 0); /* again: it exists */
        }
        {
                const char *a[] = {"stat", "m", "/workspace/x/y", NULL};
                const char *j[] = {"stat", "--json", "m", "/workspace/x/y", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                ck_assert_msg(out[0] == 'd' && strstr(out, " /workspace/x/y/\n"), "%s", out);
                free(out);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, j), 0);
                has(out, "{\"sandbox_id\":\"m\",\"path\":\"/workspace/x/y\",\"name\":\"y\","
                         "\"type\":\"directory\"");
                free(out);
        }
        {
                const char *a[] = {"rm", "m", "/workspace/x", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, a), 125);
                free(err);
        }
        {
                const char *a[] = {"rm", "-r", "m", "/workspace/x", NULL};
                const char *s[] = {"stat", "m", "/workspace/x", NULL};
                const char *f[] = {"rm", "-rf", "m", "/workspace/x", NULL};
                const char *nf[] = {"rm", "m", "/workspace/x", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, a), 0);
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, s), 125);
                has(err, "sbx: NOT_FOUND: ");
                free(err);
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, f), 0);
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, nf), 125);
                free(err);
        }
        stop(&d, c);
}
END_TEST

#define OTHER_UID 3291u
#define SOCK_GID  3290u

/* Creates sandbox id as OTHER_UID (a member of the socket's group). */
static void create_as_other(struct it_daemon *d, const char *id) {
        pid_t pid = fork();
        int st;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                gid_t g = SOCK_GID;
                struct sbx_create_opts o;
                struct sbx_sandbox *s = NULL;
                sbx_client *c = NULL;
                if (setgroups(1, &g) < 0 || setresgid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 ||
                    setresuid(OTHER_UID, OTHER_UID, OTHER_UID) < 0)
                        _exit(2);
                if (sbx_connect(d->sock, "it_cli", &c) != SBX_OK)
                        _exit(3);
                sbx_create_opts_init(&o);
                o.id = id;
                _exit(sbx_create(c, &o, &s) == SBX_OK ? 0 : 4);
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "create as uid %u: %d", OTHER_UID, st);
}

static int state_of(sbx_client *c, const char *id) {
        struct sbx_sandbox *s = NULL;
        int state;

        ck_assert_int_eq(sbx_get(c, id, &s), SBX_OK);
        state = s->state;
        sbx_sandbox_free(s);
        return state;
}

START_TEST(bulk_terminate) {
        const char *extra[] = {"--socket-group", "3290", NULL};
        struct it_daemon d;
        sbx_client *c = start(&d, NULL, extra);
        struct sbx_create_opts o;
        struct sbx_label lab = {(char *)"team", (char *)"red"};
        struct sbx_sandbox *s;
        char *out, *err;

        sbx_create_opts_init(&o);
        o.labels = &lab;
        o.n_labels = 1;
        o.id = "red1";
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        o.id = "red2";
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_OK);
        sbx_sandbox_free(s);
        free(it_create(c, "plain"));
        create_as_other(&d, "theirs");

        {
                const char *a[] = {"terminate", "--label", "team=red", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "terminated red1\n");
                has(out, "terminated red2\n");
                has(out, "terminated 2 sandboxes\n");
                free(out);
                ck_assert_int_eq(state_of(c, "red1"), SBX_STATE_TERMINATED);
                ck_assert_int_eq(state_of(c, "plain"), SBX_STATE_READY);
        }
        /* --all: every live one of the caller's own (root here), not the other user's. */
        {
                const char *a[] = {"terminate", "--all", "--json", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                ck_assert_str_eq(out, "{\"terminated\":[\"plain\"],\"failed\":[]}\n");
                free(out);
                ck_assert_int_eq(state_of(c, "plain"), SBX_STATE_TERMINATED);
                ck_assert_int_eq(state_of(c, "theirs"), SBX_STATE_READY);
        }
        {
                const char *a[] = {"terminate", "--all", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                ck_assert_str_eq(out, "terminated 0 sandboxes\n");
                free(out);
        }
        /* Several IDs: one that does not exist is a failure in the summary. */
        {
                const char *a[] = {"terminate", "theirs", "nosuch", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, &err, a), 125);
                has(out, "terminated theirs\n");
                has(out, "terminated 1 sandbox, 1 failed\n");
                has(err, "sbx: NOT_FOUND: ");
                free(out);
                free(err);
        }
        {
                const char *a[] = {"terminate", "--all", "x", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, a), 125);
                has(err, "sbx: INVALID_ARGUMENT: ");
                free(err);
        }
        stop(&d, c);
}
END_TEST

/* ---- 11: messages name the CLI's flags, in the CLI's units ---------------------------------- */

START_TEST(messages_in_cli_words) {
        struct it_daemon d;
        sbx_client *c = start(&d, "w", NULL);
        char *err;

        {
                const char *a[] = {"write", "w", "/workspace/a/b/c", NULL};
                ck_assert_int_eq(sbx(&d, "x", NULL, &err, a), 125);
                has(err, "--parents");
                hasnt(err, "create_parents");
                free(err);
        }
        {
                const char *a[] = {"set-timeout", "w", "100000000", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, a), 125);
                has(err, "100000000 s");
                hasnt(err, " ms");
                free(err);
        }
        {
                const char *a[] = {"create", "--memory", "256", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, a), 125);
                has(err, "sbx: INVALID_ARGUMENT: --memory 256 bytes is below the minimum of "
                         "4194304 bytes (4 "
                         "MiB)");
                free(err);
        }
        /* history's flags and its one argument (--connections shares the parser). */
        {
                const char *none[] = {"history", "--connections", NULL};
                const char *two[] = {"history", "--connections", "w", "x", NULL};
                const char *bogus[] = {"history", "--bogus", "w", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, none), 125);
                has(err, "sbx history needs 1 argument");
                free(err);
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, two), 125);
                has(err, "unexpected argument 'x' for sbx history");
                free(err);
                ck_assert_int_eq(sbx(&d, NULL, NULL, &err, bogus), 125);
                has(err, "--bogus");
                free(err);
        }
        /* With no daemon, doctor's fix names what works from a source tree too. */
        {
                const char *a[] = {"doctor", "--socket", "/nonexistent/sbxd.sock", NULL};
                char *out;
                sbx(&d, NULL, &out, NULL, a);
                has(out, "`make run` in its source tree");
                free(out);
        }
        stop(&d, c);
}
END_TEST

/* ---- 14: create says when the sandbox ends, to a person at a terminal --------------------------
 */

/* Runs sbx with args, its stderr a terminal (a pty) and its stdout a pipe; it must exit
 * 0. Returns what it wrote on the terminal (the caller frees it); *ret_out (when not
 * NULL) gets its stdout (the caller frees it). */
static char *sbx_on_a_terminal(struct it_daemon *d, const char *const *args, char **ret_out) {
        struct proc p;
        char *tty = NULL;
        size_t tlen = 0;
        int m, s;

        m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(m, 0);
        ck_assert_int_eq(grantpt(m), 0);
        ck_assert_int_eq(unlockpt(m), 0);
        s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(s, 0);
        spawn_sbx(d, -1, s, args, &p);
        close(s);
        ck_assert_int_eq(finish(&p), 0);
        {
                struct pollfd f = {.fd = m, .events = POLLIN};
                while (poll(&f, 1, 200) > 0 && drain_some(m, &tty, &tlen) > 0)
                        ;
        }
        close(m);
        ck_assert_ptr_nonnull(tty);
        if (ret_out) {
                *ret_out = p.obuf;
                p.obuf = NULL;
        }
        proc_free(&p);
        return tty;
}

START_TEST(create_tells_deadline_on_a_terminal) {
        struct it_daemon d;
        sbx_client *c = start(&d, NULL, NULL);
        const char *a[] = {"create", "--id",           "tty", "--timeout",
                           "600",    "--idle-timeout", "120", NULL};
        const char *b[] = {"create", "--id", "notty", NULL};
        char *tty, *err, *id;

        tty = sbx_on_a_terminal(&d, a, &id);
        ck_assert_str_eq(id, "tty\n");
        free(id);
        ck_assert_msg(strstr(tty, "sbx: sandbox tty ends at 20") && strstr(tty, "(in 10 min)") &&
                              strstr(tty, "or after 2 min without use") &&
                              strstr(tty, "`sbx set-timeout tty SECS` to change"),
                      "terminal: '%s'", tty);
        free(tty);
        /* Not to a pipe. */
        ck_assert_int_eq(sbx(&d, NULL, NULL, &err, b), 0);
        ck_assert_str_eq(err, "");
        free(err);
        /* --idle-timeout 0: no idle timeout at all (without it, the daemon's default). */
        {
                const char *z[] = {"create", "--id", "noidle", "--idle-timeout", "0", NULL};
                const char *i[] = {"info", "--json", "noidle", NULL};
                const char *t[] = {"info", "--json", "tty", NULL};
                char *out;
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, z), 0);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, i), 0);
                has(out, "\"idle_timeout\":null");
                free(out);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, t), 0);
                has(out, "\"idle_timeout\":120,");
                free(out);
        }
        stop(&d, c);
}
END_TEST

/* ---- a command that waits for a slot, as sbx shows it ------------------------------------- */

/* The queued_commands of sandbox id (libsbx). */
static uint32_t queued_of(sbx_client *c, const char *id) {
        struct sbx_sandbox *s = NULL;
        uint32_t n;

        ck_assert_int_eq(sbx_get(c, id, &s), SBX_OK);
        n = s->queued_commands;
        sbx_sandbox_free(s);
        return n;
}

/* The number of seconds after the first after in text (-1 when it is not there). */
static double waited_s(const char *text, const char *after) {
        const char *p = strstr(text, after);

        return p ? strtod(p + strlen(after), NULL) : -1;
}

/* Waits (10 s at most) until sandbox id has want commands waiting for a slot. */
static void wait_queued(sbx_client *c, const char *id, uint32_t want) {
        double t0 = it_now_ms();
        uint32_t n;

        while ((n = queued_of(c, id)) != want && it_now_ms() - t0 < 10000)
                usleep(20000);
        ck_assert_msg(n == want, "sandbox %s: %u commands waiting, not %u", id, n, want);
}

/* A pseudo-terminal: its master into *m, its slave into *s. */
static void open_pty(int *m, int *s) {
        *m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(*m, 0);
        ck_assert_int_eq(grantpt(*m), 0);
        ck_assert_int_eq(unlockpt(*m), 0);
        *s = open(ptsname(*m), O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(*s, 0);
}

/* Everything the master m has to read (200 ms of quiet ends it); freed by the caller. */
static char *drain_pty(int m) {
        struct pollfd f = {.fd = m, .events = POLLIN};
        char *buf = NULL;
        size_t len = 0;

        while (poll(&f, 1, 200) > 0 && drain_some(m, &buf, &len) > 0)
                ;
        return buf ? buf : calloc(1, 1);
}

/* Against a real sbxd --max-commands 1 whose one slot a sleep holds: --queue-timeout
 * 0.3 ends 125 after about that long with its message, and 0 is refused at once
 * (RESOURCE_EXHAUSTED, 125); the waiting line goes to a terminal and not to a pipe;
 * SIGINT ends a waiting sbx exec 137 and its command never runs; sbx info counts the
 * waiting command, sbx history shows those that never ran. */
START_TEST(queue_timeout_interrupt_and_info) {
        const char *flags[] = {"--max-commands", "1", NULL};
        struct it_daemon d;
        sbx_client *c = start(&d, "qc", flags);
        /* Holds the one slot until cancelled, however long the steps below take. */
        const char *hold[] = {"exec", "--print-id", "qc", "--", "sleep", "600", NULL};
        struct proc holder, p;
        char *out, *err, *tty, hid[64];
        double t0, took;
        int rc, m, s;

        spawn_sbx(&d, -1, -1, hold, &holder);
        ck_assert_msg(wait_stderr(&holder, "\n", 10000), "no ID: '%s'",
                      holder.ebuf ? holder.ebuf : "");
        ck_assert_int_eq(sscanf(holder.ebuf, "%63[^\n]", hid), 1);

        /* Waits 0.3 s, never runs: 125 and why, no waiting line on a pipe. */
        {
                const char *a[] = {"exec", "--queue-timeout",       "0.3", "qc", "--", "sh",
                                   "-c",   "touch /workspace/late", NULL};
                t0 = it_now_ms();
                rc = sbx(&d, NULL, &out, &err, a);
                took = it_now_ms() - t0;
                ck_assert_msg(rc == 125, "status %d, stderr '%s'", rc, err);
                /* It gave up at its queue timeout (the slot is held until cancelled). */
                ck_assert_msg(took >= 280 && took < 20000, "took %.0f ms", took);
                ck_assert_str_eq(out, "");
                has(err, "sbx: RESOURCE_EXHAUSTED: command c-");
                /* The wait as measured: 0.3 s, or more on a busy machine. */
                ck_assert_msg(waited_s(err, " waited ") >= 0.28, "stderr '%s'", err);
                has(err, " s for a slot in sandbox 'qc' and never ran");
                has(err, "--queue-timeout");
                hasnt(err, "waiting for a slot");
                free(out);
                free(err);
        }
        /* 0: refused at once, the refusal in the CLI's words. */
        {
                const char *a[] = {"exec", "--queue-timeout", "0", "qc", "--", "true", NULL};
                t0 = it_now_ms();
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_msg(rc == 125, "status %d, stderr '%s'", rc, err);
                /* At once: not after the daemon's default wait (60 s). */
                ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
                has(err, "sbx: RESOURCE_EXHAUSTED: sandbox 'qc' already runs 1 commands");
                has(err, "--queue-timeout");
                free(out);
                free(err);
        }
        {
                const char *a[] = {"exec", "--json", "--queue-timeout", "0", "qc", "--",
                                   "true", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, &err, a), 125);
                has(out, "{\"error\":{\"code\":\"RESOURCE_EXHAUSTED\"");
                free(out);
                free(err);
        }
        /* With --json the result of one that never got a slot is printed, outcome and
         * wait included, and sbx exits 0 (the result carries the status). */
        {
                const char *a[] = {"exec", "--json", "--queue-timeout", "0.2", "qc", "--",
                                   "true", NULL};
                rc = sbx(&d, NULL, &out, &err, a);
                ck_assert_msg(rc == 0, "status %d, stdout '%s'", rc, out);
                has(out, "\"outcome\":\"queue_timeout\"");
                hasnt(out, "\"queued_ms\":0,");
                free(out);
                free(err);
        }
        /* A terminal on stderr hears of the wait (once), a pipe did not (above). */
        {
                const char *a[] = {"exec", "--queue-timeout", "0.5", "qc", "--", "true", NULL};
                open_pty(&m, &s);
                spawn_sbx(&d, -1, s, a, &p);
                close(s);
                rc = finish(&p);
                tty = drain_pty(m);
                close(m);
                ck_assert_msg(rc == 125, "status %d, terminal '%s'", rc, tty);
                ck_assert_msg(strstr(tty, "sbx: waiting for a slot in sandbox qc (0 ahead)"),
                              "terminal: '%s'", tty);
                ck_assert_msg(strstr(tty, "never ran"), "terminal: '%s'", tty);
                free(tty);
                proc_free(&p);
        }
        /* SIGINT while it waits: 137, cancelled, and the command never runs. sbx info
         * counts it meanwhile. */
        {
                const char *a[] = {"exec", "qc", "--", "touch", "/workspace/marker", NULL};
                const char *i[] = {"info", "qc", NULL};
                const char *ij[] = {"info", "--json", "qc", NULL};
                spawn_sbx(&d, -1, -1, a, &p);
                wait_queued(c, "qc", 1);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, i), 0);
                ck_assert_msg(strstr(out, "queued_commands:     1\n") &&
                                      strstr(out, "running_commands:    1\n"),
                              "%s", out);
                free(out);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, ij), 0);
                has(out, "\"queued_commands\":1");
                has(out, "\"running_commands\":1");
                free(out);
                t0 = it_now_ms();
                kill(p.pid, SIGINT);
                rc = finish(&p);
                ck_assert_msg(rc == 137, "status %d, stderr '%s'", rc, p.ebuf);
                /* At the interrupt, not when a slot frees. */
                ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
                has(p.ebuf, " was cancelled while it waited for a slot (it never ran)");
                proc_free(&p);
                ck_assert_uint_eq(queued_of(c, "qc"), 0);
        }
        /* The slot frees: nothing that waited runs now. */
        ck_assert_int_eq(sbx_cancel(c, "qc", hid), SBX_OK);
        ck_assert_int_eq(finish(&holder), 137);
        proc_free(&holder);
        {
                struct sbx_result *r = it_sh(c, "qc", 10000,
                                             "sleep 0.3; ls /workspace/marker /workspace/late "
                                             "2>/dev/null | wc -l");
                ck_assert_str_eq((char *)r->stdout_data, "0\n");
                sbx_result_free(r);
        }
        /* The history shows them, with the WAITED column. */
        {
                const char *h[] = {"history", "qc", NULL};
                const char *hj[] = {"history", "--json", "qc", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, h), 0);
                has(out, "WAITED");
                has(out, "queue_timeout");
                has(out, "cancelled");
                free(out);
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, hj), 0);
                has(out, "\"outcome\":\"queue_timeout\"");
                has(out, "\"queued_ms\":");
                free(out);
        }
        stop(&d, c);
}
END_TEST

/* A command whose sandbox is terminated while it waits for a slot never ran, and sbx
 * exec says so (not "while command c-N ran"). */
START_TEST(sandbox_ended_while_waiting_says_it_never_ran) {
        const char *flags[] = {"--max-commands", "1", NULL};
        struct it_daemon d;
        sbx_client *c = start(&d, "qe", flags);
        const char *hold[] = {"exec", "--print-id", "qe", "--", "sleep", "600", NULL};
        const char *a[] = {"exec", "qe", "--", "true", NULL};
        struct proc holder, p;
        int rc;

        spawn_sbx(&d, -1, -1, hold, &holder);
        ck_assert_msg(wait_stderr(&holder, "\n", 10000), "no ID");
        spawn_sbx(&d, -1, -1, a, &p);
        wait_queued(c, "qe", 1);
        ck_assert_int_eq(sbx_terminate(c, "qe", NULL), SBX_OK);
        rc = finish(&p);
        ck_assert_int_eq(rc, 125);
        has(p.ebuf, "sbx: SANDBOX_ENDED: sandbox 'qe' ended");
        hasnt(p.ebuf, " ran; ");
        has(p.ebuf, "never ran");
        proc_free(&p);
        ck_assert_int_eq(finish(&holder), 125);
        proc_free(&holder);
        stop(&d, c);
}
END_TEST

/* ---- help ---------------------------------------------------------------------------------- */

START_TEST(help_names_every_command) {
        struct it_daemon d;
        sbx_client *c = start(&d, NULL, NULL);
        static const char *const cmds[] = {"cancel", "stat", "mkdir", "rm", "terminate", NULL};
        char *out;

        {
                const char *a[] = {"help", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                for (size_t i = 0; cmds[i]; i++) {
                        char w[64];
                        snprintf(w, sizeof(w), "  sbx %s ", cmds[i]);
                        has(out, w);
                }
                has(out, "--no-stdin");
                has(out, "--print-id");
                free(out);
        }
        for (size_t i = 0; cmds[i]; i++) {
                const char *a[] = {cmds[i], "--help", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "usage: sbx");
                free(out);
        }
        stop(&d, c);
}
END_TEST

/* sbx exec --background gives the command no timeout of its own unless --timeout says
 * one (a dev server must not die at 60 s): so it starts on a daemon whose
 * --max-command-timeout (2 s) is below sbx's default of 60 s, and still runs past it;
 * on a terminal sbx says until when it runs and how to follow and stop it. A foreground
 * --timeout 0 is refused naming the rule, and nothing runs. */
START_TEST(background_runs_until_the_sandbox_ends) {
        const char *flags[] = {"--max-command-timeout", "2", NULL};
        struct it_daemon d;
        sbx_client *c = start(&d, "bgt", flags);
        char *out, *err, *tty;

        {
                const char *a[] = {"exec", "--background", "bgt", "--", "sleep", "100", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, &err, a), 0);
                ck_assert_str_eq(out, "c-1\n");
                ck_assert_str_eq(err, ""); /* not a terminal: only the ID */
                free(out);
                free(err);
        }
        /* Past --max-command-timeout, and past what a 2 s timeout would allow. */
        usleep(3000 * 1000);
        {
                const char *a[] = {"attach", "--json", "bgt", "c-1", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, NULL, a), 0);
                has(out, "\"outcome\":\"running\"");
                free(out);
        }
        {
                const char *a[] = {"exec", "--background", "bgt", "--", "sleep", "100", NULL};
                tty = sbx_on_a_terminal(&d, a, &out);
                ck_assert_str_eq(out, "c-2\n");
                free(out);
                ck_assert_msg(strstr(tty, "sbx: command c-2 runs in the background until it "
                                          "exits or sandbox bgt ends (at 20") &&
                                      strstr(tty, "`sbx set-timeout bgt SECS` moves that); `sbx "
                                                  "attach -f bgt c-2` follows it, `sbx cancel "
                                                  "bgt c-2` stops it"),
                              "terminal: '%s'", tty);
                free(tty);
        }
        {
                const char *a[] = {"exec", "--background", "--timeout", "1.5", "bgt",
                                   "--",   "sleep",        "100",       NULL};
                tty = sbx_on_a_terminal(&d, a, NULL);
                ck_assert_msg(strstr(tty, "sbx: command c-3 runs in the background and is "
                                          "killed after 1.5 s (--timeout); `sbx attach -f bgt "
                                          "c-3` follows it"),
                              "terminal: '%s'", tty);
                free(tty);
        }
        {
                const char *a[] = {"exec", "--timeout", "0", "bgt", "--", "echo", "ran", NULL};
                ck_assert_int_eq(sbx(&d, NULL, &out, &err, a), 125);
                ck_assert_str_eq(out, "");
                has(err, "--timeout 0 (no timeout) is refused: only a background command may "
                         "have none");
                free(out);
                free(err);
        }
        {
                const char *a[] = {"cancel", "bgt", "c-1", NULL};
                ck_assert_int_eq(sbx(&d, NULL, NULL, NULL, a), 0);
        }
        stop(&d, c);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("cli");
        struct {
                const char *name;
                const TTest *t;
        } tests[] = {
                {"json_failures_are_json", json_failures_are_json},
                {"ls_read_write_json", ls_read_write_json},
                {"abnormal_endings_say_so", abnormal_endings_say_so},
                {"print_id_cancel_and_running_history", print_id_cancel_and_running_history},
                {"signals_forwarded", signals_forwarded},
                {"signal_reaches_command_while_output_stalls",
                 signal_reaches_command_while_output_stalls},
                {"signal_reaches_command_while_output_floods",
                 signal_reaches_command_while_output_floods},
                {"stdin_forwarded", stdin_forwarded},
                {"binary_output_in_json", binary_output_in_json},
                {"stat_mkdir_rm", stat_mkdir_rm},
                {"bulk_terminate", bulk_terminate},
                {"messages_in_cli_words", messages_in_cli_words},
                {"create_tells_deadline_on_a_terminal", create_tells_deadline_on_a_terminal},
                {"background_runs_until_the_sandbox_ends", background_runs_until_the_sandbox_ends},
                {"help_names_every_command", help_names_every_command},
                {"queue_timeout_interrupt_and_info", queue_timeout_interrupt_and_info},
                {"sandbox_ended_while_waiting_says_it_never_ran",
                 sandbox_ended_while_waiting_says_it_never_ran},
        };

        /* One TCase per test: each gets its own base directory from the fixture. */
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
                TCase *tc = tcase_create(tests[i].name);
                tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
                tcase_set_timeout(tc, 120);
                tcase_add_test(tc, tests[i].t);
                suite_add_tcase(s, tc);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
