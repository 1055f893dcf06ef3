/* cli_bg.c: background commands from sbx: `sbx exec --background` (prints the command ID
 * at once; with --json an object with command_id), `sbx attach [--follow] ID CMD` (the
 * output the command kept, with --follow what it prints until it ends, then its exit
 * status as sbx exec gives it), and the commands of `sbx info`. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* "sbx: command c-3 runs in the background until it exits or sandbox web ends (at ISO;
 * `sbx set-timeout web SECS` moves that)", or "... and is killed after 30 s (--timeout)",
 * then how to follow and stop it, on stderr: what a person at a terminal should know of
 * a command sbx leaves running (a dev server killed unannounced was the surprise). The
 * sandbox's deadline comes from one GetSandbox on c; without it the line has none. */
static void say_background(sbx_client *c, const char *id, const struct sbx_exec_opts *o,
                           const char *command_id) {
        struct sbx_sandbox *s = NULL;
        char iso[64];

        fputs("sbx: command ", stderr);
        cli_put_text(stderr, command_id);
        fputs(" runs in the background ", stderr);
        if (!o->no_timeout) {
                fprintf(stderr, "and is killed after %.3g s (--timeout)",
                        (double)o->timeout_ms / 1000.0);
        } else {
                fputs("until it exits or sandbox ", stderr);
                cli_put_text(stderr, id);
                fputs(" ends", stderr);
                if (sbx_get(c, id, &s) == SBX_OK && s->deadline_unix_ms) {
                        cli_format_iso(iso, sizeof(iso), s->deadline_unix_ms, false);
                        fprintf(stderr, " (at %s; `sbx set-timeout ", iso);
                        cli_put_text(stderr, id);
                        fputs(" SECS` moves that)", stderr);
                }
                sbx_sandbox_free(s);
        }
        fputs("; `sbx attach -f ", stderr);
        cli_put_text(stderr, id);
        fputc(' ', stderr);
        cli_put_text(stderr, command_id);
        fputs("` follows it, `sbx cancel ", stderr);
        cli_put_text(stderr, id);
        fputc(' ', stderr);
        cli_put_text(stderr, command_id);
        fputs("` stops it\n", stderr);
}

int cli_exec_background(struct cli *cli, const char *id, const struct sbx_exec_opts *o, bool json) {
        struct sbx_background *b = NULL;
        sbx_client *c = NULL;
        enum sbx_code rc;
        struct json j;
        int status = cli_connect(cli, &c);

        if (status)
                return status;
        rc = sbx_exec_background(c, id, o, &b);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
                sbx_close(c);
                return status;
        }
        if (b->result) {
                /* It never ran: the same report as sbx exec's. */
                if (json) {
                        json_init(&j, stdout);
                        cli_json_result(&j, b->result);
                        status = json_finish(&j) < 0 ? CLI_EXIT_ERROR : 0;
                } else {
                        status = cli_result_status(b->result);
                }
        } else if (json) {
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, id);
                json_key(&j, "command_id");
                json_string(&j, b->command_id);
                json_key(&j, "state");
                json_string(&j, b->queued ? "queued" : "running");
                json_key(&j, "ahead");
                json_uint(&j, b->ahead);
                json_end_object(&j);
                status = json_finish(&j) < 0 ? CLI_EXIT_ERROR : 0;
        } else {
                printf("%s\n", b->command_id);
                fflush(stdout);
                if (b->queued)
                        fprintf(stderr,
                                "sbx: command %s waits for a slot in sandbox %s (%u ahead)\n",
                                b->command_id, id, b->ahead);
                if (isatty(STDERR_FILENO))
                        say_background(c, id, o, b->command_id);
        }
        sbx_background_free(b);
        sbx_close(c);
        return status;
}

/* sbx attach's chunks: straight to our stdout and stderr. */
static void attach_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                          size_t len) {
        int *write_err = ud;
        (void)offset;
        if (cli_write_all(stream == SBX_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len) < 0)
                *write_err = errno ? errno : EIO;
}

int cmd_attach(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {
                {"follow", false, 'f'}, {"json", false, 0}, {NULL, false, 0}};
        struct sbx_attach_opts ao;
        struct sbx_result *r = NULL;
        const char *pos[2];
        size_t npos = 0;
        int k, status, write_err = 0;
        bool json = false;
        struct cli_opts p;
        sbx_client *c;
        enum sbx_code rc;
        struct json j;

        memset(&ao, 0, sizeof(ao));
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
                                return cli_usage_error("unexpected argument '%s' for sbx attach",
                                                       p.arg);
                        pos[npos++] = p.arg;
                } else if (k == 0) {
                        ao.follow = 1;
                } else {
                        json = true;
                }
        }
        if (npos < 2)
                return cli_usage_error("sbx attach needs a sandbox ID and a command ID (c-N, "
                                       "from sbx exec --background or sbx info)");
        if ((status = cli_connect(cli, &c)))
                return status;
        ao.command_id = pos[1];
        if (!json) {
                ao.on_output = attach_output;
                ao.userdata = &write_err;
        }
        rc = sbx_attach(c, pos[0], &ao, &r);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json) {
                json_init(&j, stdout);
                cli_json_result(&j, r);
                status = json_finish(&j) < 0 ? CLI_EXIT_ERROR : 0;
        } else if (r->outcome == SBX_OUTCOME_RUNNING) {
                status = 0; /* not ended: nothing to report but its output */
        } else {
                status = cli_result_status(r);
        }
        if (!status && write_err)
                status =
                        cli_error(SBX_INTERNAL, "cannot write the output: %s", strerror(write_err));
        sbx_result_free(r);
        sbx_close(c);
        return status;
}

void cli_json_commands(struct json *j, const struct sbx_command_info *v, size_t n) {
        json_begin_array(j);
        for (size_t i = 0; i < n; i++) {
                json_begin_object(j);
                json_key(j, "command_id");
                json_string(j, v[i].command_id);
                json_key(j, "argv");
                json_strv(j, &v[i].argv);
                json_key(j, "state");
                json_string(j, sbx_command_state_name(v[i].state));
                json_key(j, "background");
                json_bool(j, v[i].background);
                json_key(j, "tty");
                json_bool(j, v[i].tty);
                json_key(j, "caller_uid");
                json_uint(j, v[i].caller_uid);
                json_key(j, "started_unix_ms");
                json_int_or_null(j, v[i].started_unix_ms != 0, v[i].started_unix_ms);
                json_key(j, "ended_unix_ms");
                json_int_or_null(j, v[i].ended_unix_ms != 0, v[i].ended_unix_ms);
                json_key(j, "outcome");
                if (v[i].state == SBX_COMMAND_ENDED)
                        json_string(j, sbx_outcome_name(v[i].outcome));
                else
                        json_null(j);
                json_key(j, "exit_code");
                json_int_or_null(j, v[i].has_exit_code, v[i].exit_code);
                json_end_object(j);
        }
        json_end_array(j);
}

void cli_print_commands(const struct sbx_command_info *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                printf("%-20s %s %s%s%s", i ? "" : "commands:", v[i].command_id,
                       sbx_command_state_name(v[i].state), v[i].background ? " background" : "",
                       v[i].tty ? " tty" : "");
                if (v[i].state == SBX_COMMAND_ENDED) {
                        printf(" %s", sbx_outcome_name(v[i].outcome));
                        if (v[i].has_exit_code)
                                printf(" %d", v[i].exit_code);
                }
                for (size_t a = 0; a < v[i].argv.n; a++)
                        printf("%s%s", a ? " " : " -- ", v[i].argv.v[a]);
                putchar('\n');
        }
}
