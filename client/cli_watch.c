/* cli_watch.c: `sbx watch ID PATH`, the changes under a directory of a sandbox, one line
 * per change (sbx_watch_open and sbx_watch_next of libsbx), until Ctrl-C (SIGINT),
 * SIGTERM or the end of the sandbox. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* How often the loop looks at the signals while no change comes. */
#define WATCH_POLL_MS 200

static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig) {
        (void)sig;
        stop_asked = 1;
}

/* SIGINT and SIGTERM end the watch cleanly (exit 0); SIGPIPE too (a reader gone). */
static void catch_stop_signals(void) {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
}

static void print_json_event(const struct sbx_file_event *e) {
        struct json j;

        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "kind");
        json_string(&j, sbx_file_event_kind_name(e->kind));
        json_key(&j, "path");
        json_string(&j, e->path);
        if (e->old_path) {
                json_key(&j, "old_path");
                json_string(&j, e->old_path);
        }
        json_key(&j, "is_dir");
        json_bool(&j, e->is_dir != 0);
        json_end_object(&j);
        (void)json_finish(&j);
}

/* One event as a line of text. The names are the sandbox's: control characters in them
 * are written escaped (cli_put_text), so a name can neither forge a line nor drive the
 * terminal. */
static void print_text_event(const struct sbx_file_event *e) {
        if (e->kind == SBX_FILE_RENAMED) {
                fputs("renamed ", stdout);
                cli_put_text(stdout, e->old_path ? e->old_path : "?");
                fputs(" -> ", stdout);
        } else {
                fputs(sbx_file_event_kind_name(e->kind), stdout);
                fputc(' ', stdout);
        }
        cli_put_text(stdout, e->path);
        fputc('\n', stdout);
}

/* One line per event (and one for an overflow); -1 when stdout is gone. */
static int print_batch(const struct sbx_file_events *ev, bool json) {
        if (ev->overflow && json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "overflow");
                json_bool(&j, true);
                json_key(&j, "reason");
                json_string(&j, ev->overflow_reason);
                json_end_object(&j);
                (void)json_finish(&j);
        } else if (ev->overflow) {
                fputs("overflow ", stdout);
                cli_put_text(stdout, ev->overflow_reason ? ev->overflow_reason : "");
                fputc('\n', stdout);
        }
        for (size_t i = 0; i < ev->n; i++) {
                if (json)
                        print_json_event(&ev->v[i]);
                else
                        print_text_event(&ev->v[i]);
        }
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -1;
}

/* Reads w's batches until a signal, a closed stdout or the end of the watch. */
static int watch_loop(sbx_client *c, sbx_watch *w, bool json) {
        for (;;) {
                struct sbx_file_events *ev = NULL;
                enum sbx_code rc = sbx_watch_next(w, WATCH_POLL_MS, &ev);
                int r;

                if (stop_asked)
                        rc = SBX_OK;
                if (rc != SBX_OK)
                        return cli_client_error(c, rc);
                r = ev ? print_batch(ev, json) : 0;
                sbx_file_events_free(ev);
                if (stop_asked || r < 0)
                        return 0;
        }
}

enum { W_JSON, W_RECURSIVE, W_COALESCE };

int cmd_watch(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {[W_JSON] = {"json", false, 0},
                                              [W_RECURSIVE] = {"recursive", false, 'r'},
                                              [W_COALESCE] = {"coalesce-ms", true, 0},
                                              {NULL, false, 0}};
        struct sbx_watch_opts o = {0, 0};
        const char *pos[2];
        size_t npos = 0;
        bool json = false;
        struct cli_opts p;
        sbx_client *c;
        sbx_watch *w;
        enum sbx_code rc;
        uint64_t ms;
        int k, status;

        cli_opts_init(&p, cli, argc, argv, opts);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, argv[0]);
                        return 0;
                }
                if (k == CLI_OPT_POS && npos == 2)
                        return cli_usage_error("unexpected argument '%s' for sbx watch", p.arg);
                if (k == CLI_OPT_POS)
                        pos[npos++] = p.arg;
                else if (k == W_JSON)
                        json = true;
                else if (k == W_RECURSIVE)
                        o.recursive = 1;
                else if (cli_parse_uint(p.arg, SBX_WATCH_MAX_COALESCE_MS, &ms) < 0 ||
                         ms < SBX_WATCH_MIN_COALESCE_MS)
                        return cli_bad_value("watch", "--coalesce-ms", p.arg,
                                             "expected milliseconds, 10..5000");
                else
                        o.coalesce_ms = (uint32_t)ms;
        }
        if (npos < 2)
                return cli_usage_error("sbx watch needs a sandbox ID and a path");
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        catch_stop_signals();
        rc = sbx_watch_open(c, pos[0], pos[1], &o, &w);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
                sbx_close(c);
                return status;
        }
        if (json)
                printf("{\"ready\":true}\n");
        else
                fprintf(stderr, "sbx: watching %s in sandbox %s (Ctrl-C ends)\n", pos[1], pos[0]);
        fflush(stdout);
        status = watch_loop(c, w, json);
        sbx_watch_close(w);
        sbx_close(c);
        return status;
}
