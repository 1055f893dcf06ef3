/* cli_exec.c: `sbx exec`, which runs one command in a sandbox.
 *
 * Without --json the command's output streams to our stdout and stderr as it arrives
 * and sbx exits with the command's status: its exit code, 128+N for signal N, 124 timed
 * out, 126 cannot execute, 127 not found, 137 out of memory or cancelled, and 125 when
 * sbx, the daemon or the sandbox failed (sandbox_ended, unknown). With --json the
 * result is printed as one JSON object (keys: sandbox_id, command_id, outcome,
 * exit_code, signal, timed_out, stdout, stderr, stdout_truncated, stderr_truncated,
 * stdout_bytes, stderr_bytes, duration, isolated, warnings, resources, start_error) and
 * sbx exits 0 unless sbx itself failed. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { E_TIMEOUT, E_CWD, E_ENV, E_STDIN, E_MAX_OUTPUT, E_SHELL, E_JSON };

static const struct cli_opt exec_opts[] = {
        [E_TIMEOUT] = {"timeout", true, 0},
        [E_CWD] = {"cwd", true, 0},
        [E_ENV] = {"env", true, 0},
        [E_STDIN] = {"stdin", true, 0},
        [E_MAX_OUTPUT] = {"max-output", true, 0},
        [E_SHELL] = {"shell", false, 0},
        [E_JSON] = {"json", false, 0},
        {NULL, false, 0},
};

struct exec_state {
        struct sbx_exec_opts o;
        const char **env;
        size_t n_env;
        const char *stdin_path;
        bool shell, json;
};

struct stream_state {
        uint64_t chunks[3]; /* per enum sbx_stream */
        int write_err;
};

/* Applies one option. 0 or an exit status. */
static int apply_opt(struct exec_state *st, int k, const char *a) {
        uint64_t v;

        switch (k) {
        case E_TIMEOUT:
                if (cli_parse_secs_ms(a, &st->o.timeout_ms) < 0)
                        return cli_bad_value("exec", "--timeout", a,
                                             "expected seconds, e.g. 10 or 0.5");
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

static void on_output(void *userdata, enum sbx_stream stream, uint64_t offset, const void *data,
                      size_t len) {
        struct stream_state *ss = userdata;
        int fd = stream == SBX_STDERR ? STDERR_FILENO : STDOUT_FILENO;
        int r;

        ss->chunks[stream == SBX_STDERR ? SBX_STDERR : SBX_STDOUT]++;
        r = cli_write_all(fd, data, len);
        if (r < 0 && !ss->write_err)
                ss->write_err = -r;
}

/* The exit status that stands for a result, or -1 when the command has none (the
 * sandbox ended under it, or the daemon lost it), which is an error of sbx. */
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
                if (r->start_errno == ENOENT ||
                    (!r->start_errno && r->start_error && strstr(r->start_error, "No such file")))
                        return 127;
                return 126;
        case SBX_OUTCOME_SANDBOX_ENDED:
        case SBX_OUTCOME_UNKNOWN:
        case SBX_OUTCOME_RUNNING:
        case SBX_OUTCOME_UNSPECIFIED:
                break;
        }
        return -1;
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
        json_key(j, "isolated");
        json_bool(j, r->isolated);
        json_key(j, "warnings");
        json_begin_array(j);
        for (size_t i = 0; i < r->warnings.n; i++)
                json_string(j, r->warnings.v[i]);
        json_end_array(j);
        json_key(j, "resources");
        json_begin_object(j);
        json_key(j, "peak_memory_bytes");
        json_uint(j, r->peak_memory_bytes);
        json_key(j, "peak_memory_source");
        json_string(j, r->peak_memory_source);
        json_key(j, "cpu_seconds");
        json_double(j, r->cpu_seconds, 6);
        json_key(j, "limits_hit");
        json_begin_array(j);
        for (size_t i = 0; i < r->limits_hit.n; i++)
                json_string(j, r->limits_hit.v[i]);
        json_end_array(j);
        json_key(j, "enforcement");
        json_begin_object(j);
        for (size_t i = 0; i < r->n_enforcement; i++) {
                json_key(j, r->enforcement[i].limit);
                json_string(j, r->enforcement[i].enforcement);
        }
        json_end_object(j);
        json_end_object(j);
        json_key(j, "start_error");
        json_string(j, r->start_error);
        json_key(j, "owner_uid");
        json_int_or_null(j, r->has_owner_uid, r->owner_uid);
        json_end_object(j);
}

/* Prints why a command has no exit status of its own; returns CLI_EXIT_ERROR. */
static int no_status_error(const struct sbx_result *r) {
        switch (r->outcome) {
        case SBX_OUTCOME_SANDBOX_ENDED:
                return cli_error(SBX_UNAVAILABLE,
                                 "sandbox '%s' ended (terminated or expired) while command %s ran",
                                 r->sandbox_id, r->command_id);
        case SBX_OUTCOME_UNKNOWN:
                return cli_error(
                        SBX_UNAVAILABLE,
                        "sbxd restarted while command %s ran in sandbox '%s'; its outcome is "
                        "unknown (see `sbx history %s`)",
                        r->command_id, r->sandbox_id, r->sandbox_id);
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

int cmd_exec(struct cli *cli, int argc, char **argv) {
        struct exec_state st;
        struct stream_state ss = {0};
        struct sbx_result *r = NULL;
        const char *id = NULL;
        char **words;
        int nwords, next = 0, status, in_fd = -1;
        bool dashdash = false;
        char *shell = NULL;
        sbx_client *c = NULL;
        enum sbx_code rc;

        memset(&st, 0, sizeof(st));
        sbx_exec_opts_init(&st.o);
        st.env = calloc((size_t)argc, sizeof(*st.env));
        if (!st.env)
                return cli_error(SBX_INTERNAL, "out of memory");
        status = parse_opts(cli, &st, argc, argv, &id, &next, &dashdash);
        if (status)
                goto out;
        if (!id) {
                status = cli_usage_error(
                        "sbx exec needs a sandbox ID and a command: sbx exec ID -- ARGV...");
                goto out;
        }
        words = argv + next;
        nwords = argc - next;
        if (!dashdash && nwords > 0) {
                /* Options may also sit between the ID and "--": `exec ID --json -- ls`. */
                int m = -1;
                for (int i = 0; i < nwords; i++)
                        if (strcmp(words[i], "--") == 0) {
                                m = i;
                                break;
                        }
                if (m > 0 && words[0][0] == '-') {
                        /* Parse words[0..m) with words[-1] (the ID) standing in as argv[0]. */
                        const char *pos = NULL;
                        int sub_next;
                        bool sub_dd;
                        char *saved = words[-1];
                        words[-1] = argv[0];
                        status = parse_opts(cli, &st, m + 1, words - 1, &pos, &sub_next, &sub_dd);
                        words[-1] = saved;
                        if (!status && pos)
                                status = cli_usage_error(
                                        "unexpected argument '%s' before '--' for sbx exec", pos);
                        if (status)
                                goto out;
                        words += m + 1;
                        nwords -= m + 1;
                } else if (m == 0) {
                        words++;
                        nwords--;
                }
        }
        if (nwords == 0) {
                status = cli_usage_error(
                        "sbx exec needs a command after the sandbox ID: sbx exec %s -- ARGV...",
                        id);
                goto out;
        }
        if (st.shell) {
                shell = join_words(words, nwords);
                if (!shell) {
                        status = cli_error(SBX_INTERNAL, "out of memory");
                        goto out;
                }
                st.o.shell = shell;
        } else {
                st.o.argv = (const char *const *)words;
                st.o.argc = (size_t)nwords;
        }
        st.o.env = st.env;
        st.o.n_env = st.n_env;
        if (st.stdin_path) {
                int fd = open_stdin_opt(st.stdin_path);
                if (fd < 0) {
                        status = -fd;
                        goto out;
                }
                in_fd = fd;
                st.o.stdin_stream = 1;
                st.o.stdin_fd = fd;
        }
        if (!st.json) {
                st.o.on_output = on_output;
                st.o.userdata = &ss;
        }
        if ((status = cli_connect(cli, &c)))
                goto out;

        fflush(stdout);
        rc = sbx_exec(c, id, &st.o, &r);
        if (!r) {
                status = cli_client_error(c, rc);
                goto out;
        }
        /* A result may come with a failure status when the command never started. */
        if (rc != SBX_OK && r->outcome != SBX_OUTCOME_START_FAILED) {
                status = cli_client_error(c, rc);
                goto out;
        }
        if (r->has_owner_uid)
                cli_warn_not_owner(id, r->owner_uid);
        if (st.json) {
                struct json j;
                json_init(&j, stdout);
                json_result(&j, r);
                status = json_finish(&j) < 0 ? cli_error(SBX_INTERNAL, "cannot write to stdout: %s",
                                                         strerror(errno))
                                             : 0;
                goto out;
        }
        /* A daemon that does not stream puts the output into the result instead. */
        if (!ss.chunks[SBX_STDOUT] && r->stdout_len)
                cli_write_all(STDOUT_FILENO, r->stdout_data, r->stdout_len);
        if (!ss.chunks[SBX_STDERR] && r->stderr_len)
                cli_write_all(STDERR_FILENO, r->stderr_data, r->stderr_len);
        if (r->outcome == SBX_OUTCOME_START_FAILED) {
                fprintf(stderr, "sbx: ");
                cli_put_text(stderr, r->start_error ? r->start_error : sbx_error_message(c));
                fputc('\n', stderr);
        }
        status = result_status(r);
        if (status < 0)
                status = no_status_error(r);
out:
        sbx_result_free(r);
        sbx_close(c);
        free(shell);
        if (in_fd > STDIN_FILENO)
                close(in_fd);
        free(st.env);
        return status < 0 ? 0 : status;
}
