/* cli.c: main() of the sbx command-line tool, and what its commands share: the global
 * options and dispatch, the help text, the option and value parsers, error reporting,
 * and small I/O helpers.
 *
 * The command line is a stable contract that scripts rely on (sbx(1), EXIT STATUS): every failure
 * of sbx or of the daemon is one line "sbx: CODE: message" on stderr and exit status
 * 125; usage errors are INVALID_ARGUMENT with a hint to run `sbx help`. The commands
 * themselves live in cli_sandbox.c, cli_exec.c, cli_files.c and cli_doctor.c. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- help -------------------------------------------------------------------------------- */

struct command {
        const char *name;
        int (*fn)(struct cli *cli, int argc, char **argv);
        const char *synopsis;
        const char *summary;
};

static const struct command commands[] = {
        {"create", cmd_create,
         "create [--id ID] [--timeout SECS] [--idle-timeout SECS|0]\n"
         "       [--network none|full|allowlist] [--allow-host HOST[:PORT]]... [--allow-cidr "
         "CIDR]...\n"
         "       [--writable PATH]... [--deny-read PATH]... [--deny-write PATH]...\n"
         "       [--no-protect-defaults] [--env K=V]... [--memory BYTES] [--cpu-seconds N]\n"
         "       [--cpu-percent N] [--processes N] [--file-size BYTES] [--open-files N]\n"
         "       [--tmp-size BYTES] [--max-commands N] [--max-queued N] [--root DIR]\n"
         "       [--disk BYTES] [--disk-inodes N] [--image REF]\n"
         "       [--label K=V]... [--share-uid N]... [--keep-workspace] [--json]",
         "create a sandbox and print its ID (--json: the sandbox object); --image: from\n"
         "      a container image you pulled (sbx image pull), / writable, root inside"},
        {"exec", cmd_exec,
         "exec [--timeout SECS] [--queue-timeout SECS] [--cwd DIR] [--env K=V]...\n"
         "     [--stdin FILE|- | -n|--no-stdin] [--max-output BYTES] [--shell] [--print-id]\n"
         "     [--background|-t|-tt] [--user USER] [--json] ID -- ARGV...",
         "run a command; exits with its status (128+N signal N, 124 timed out, 125 sbx\n"
         "      error, bad --cwd or no slot within --queue-timeout, 126 cannot execute, 127\n"
         "      not found, 137 out of memory or cancelled); --json prints the result instead.\n"
         "      A command over the sandbox's --max-commands waits for a slot (--queue-timeout,\n"
         "      default the daemon's 60 s; 0: never wait). stdin is forwarded unless it is a\n"
         "      terminal (-n: never); Ctrl-C, SIGTERM and SIGHUP are forwarded to the\n"
         "      command (a second one kills it; while it waits for a slot, the first one\n"
         "      cancels it); --print-id prints the command's ID as it starts (on stderr;\n"
         "      with --json as a first JSON line); -t runs it on a terminal of the sandbox\n"
         "      sized as ours, our terminal raw (Ctrl-C goes to the command), its size\n"
         "      changes forwarded (-tt: a terminal even when stdin is none). --timeout:\n"
         "      default 60 s, at most the daemon's --max-command-timeout; 0 (none) only with\n"
         "      --background. --background: start it, print its ID at once (--json: an\n"
         "      object with command_id) and leave it running, its output kept for sbx\n"
         "      attach; it has no timeout of its own unless --timeout SECS gives one: it runs\n"
         "      until it exits, is cancelled, or the sandbox ends (its deadline: sbx info,\n"
         "      sbx set-timeout). On a terminal sbx says which, and how to follow or stop it.\n"
         "      --user: a user of an image's sandbox (NAME, UID or UID:GID; root is root of\n"
         "      the sandbox's own namespace)"},
        {"attach", cmd_attach, "attach [-f|--follow] [--json] ID COMMAND_ID",
         "write the output a command kept (a background one: sbx exec --background) to\n"
         "      stdout and stderr; --follow: then what it prints until it ends, and exit\n"
         "      with its status as sbx exec does (--json: its result instead)"},
        {"cancel", cmd_cancel, "cancel [--signal SIG] ID COMMAND_ID",
         "kill a running command (its result becomes cancelled), or with --signal send\n"
         "      it INT, TERM, HUP, QUIT, USR1, USR2 or KILL"},
        {"read", cmd_read, "read [--offset N] [--limit BYTES] [--json] ID PATH",
         "write the bytes of a sandbox file to stdout (--json: an object with them)"},
        {"write", cmd_write, "write [--mode OCTAL] [-p|--parents] [--append] [--json] ID PATH",
         "write stdin to a sandbox file (atomically when it fits one frame; larger data\n"
         "      is written in 16 MiB chunks and only the first chunk is atomic)"},
        {"ls", cmd_ls, "ls [--limit N] [--json] ID [PATH]",
         "list a sandbox directory (default /workspace)"},
        {"stat", cmd_stat, "stat [--json] ID PATH", "show one file of a sandbox"},
        {"mkdir", cmd_mkdir, "mkdir [-p|--parents] [--mode OCTAL] ID PATH",
         "make a directory in a sandbox (-p: and its parents, and accept one that exists)"},
        {"rm", cmd_rm, "rm [-r|--recursive] [-f|--force] ID PATH",
         "remove a file, or with -r a directory tree, from a sandbox (-f: a missing one\n"
         "      is not an error)"},
        {"watch", cmd_watch, "watch [-r|--recursive] [--coalesce-ms MS] [--json] ID PATH",
         "print the changes under a sandbox directory, one line per change (created,\n"
         "      modified, deleted, renamed OLD -> NEW; -r: every directory below it too),\n"
         "      coalesced over MS (default 100), until Ctrl-C or the sandbox ends"},
        {"cp", cmd_cp, "cp SRC DST",
         "copy files or directories between the host and a sandbox; exactly\n"
         "      one side is ID:PATH (write ./a:b for a host path with a colon)"},
        {"terminate", cmd_terminate, "terminate [--json] ID... | --label K=V... | --all",
         "end sandboxes and every process in them: those named, or the live sandboxes\n"
         "      of yours that carry every --label, or (--all) every live one of yours"},
        {"list", cmd_list, "list [--json] [--all] [--label K=V]...",
         "list sandboxes (--all: also ended ones)"},
        {"info", cmd_info, "info [--json] ID", "show a sandbox"},
        {"set-timeout", cmd_set_timeout, "set-timeout [--json] ID SECS",
         "move a sandbox's deadline to SECS from now"},
        {"history", cmd_history, "history [--json] [--connections | --forwards] ID",
         "list the commands a sandbox ran and runs (--connections: what its network\n"
         "      allowlist proxy allowed and refused; --forwards: the streams to its ports)"},
        {"image", cmd_image,
         "image pull [--json] [--registry-auth USER:PASS] IMAGE | image ls [--json] |\n"
         "    image rm NAME... | image inspect NAME | image prune [--json] |\n"
         "    image export NAME FILE",
         "your container images: pull one from a registry (python:3.12-slim,\n"
         "      host:5000/app:v1, name@sha256:...) or import oci:DIR[:TAG],\n"
         "      oci-archive:FILE or docker-archive:FILE (read with your rights), with a\n"
         "      progress bar on a terminal; list, remove, inspect (JSON), and remove\n"
         "      every one no sandbox uses; export one as an OCI archive (FILE, or - for\n"
         "      stdout). Credentials: --registry-auth, else your\n"
         "      ~/.docker/config.json or $XDG_RUNTIME_DIR/containers/auth.json"},
        {"snapshot", cmd_snapshot, "snapshot [--name NAME] [--json] ID",
         "capture a sandbox made from an image, its root and /workspace, as an image\n"
         "      of its owner's (NAME, else localhost/ID:UNIXMS; printed with its digest),\n"
         "      its processes frozen meanwhile: sbx create --image NAME starts from it"},
        {"fork", cmd_fork, "fork [-n|--count N] [--name NAME] [--json] [CREATE OPTIONS] ID",
         "make N sandboxes (default 1, at most 256) with a sandbox's files at one\n"
         "      instant (one snapshot, NAME or the default) and its policy, labels,\n"
         "      shares and idle timeout, but for what the options of sbx create given\n"
         "      change (not --id nor --image; a list option adds to the sandbox's list,\n"
         "      --label K=V replaces its K); print their IDs (--json: an array).\n"
         "      Processes are not copied"},
        {"restore", cmd_restore, "restore [--json] ID SNAPSHOT",
         "put a sandbox's files back to a snapshot's (any image of yours and its\n"
         "      owner's): its processes are ended, its root and /workspace are the\n"
         "      snapshot's; its ID, owner, policy, deadline and history stay"},
        {"doctor", cmd_doctor, "doctor [--json]",
         "check what this kernel and host allow, and how to fix what is missing"},
        {"version", cmd_version, "version", "print the versions of sbx and of the daemon"},
        {"dial-stdio", cmd_dial_stdio, "dial-stdio [--end-with-daemon]",
         "connect stdin and stdout to the daemon's socket until both sides ended (or\n"
         "      the daemon's, with --end-with-daemon): what a client with --socket\n"
         "      ssh://HOST runs on HOST through ssh"},
        {"mcp", cmd_mcp,
         "mcp [--sandbox ID | [CREATE OPTIONS] [--keep]] [--default-command-timeout SECS]\n"
         "    [--max-command-timeout SECS] [--max-output-bytes BYTES] [--max-output-lines N]\n"
         "    [--max-read-bytes BYTES]",
         "serve the Model Context Protocol on stdin and stdout (JSON-RPC, one message a\n"
         "      line) in sandbox ID (attached: left running), or in a sandbox created with\n"
         "      the options of `sbx create` and terminated when stdin closes (--keep leaves\n"
         "      it). Defaults: commands time out after 60 s (at most 600 s; a background one\n"
         "      has none unless given), each output stream is cut to its last 50K bytes and\n"
         "      2000 lines, read_file reads files up to 5M. See sbx(1), MCP SERVER.\n"
         "      Tools: @TOOLS@"},
        {"port-forward", cmd_port_forward,
         "port-forward [--unix PATH:SANDBOX_PORT]... [--sandbox-address ADDR] ID\n"
         "    [[ADDR:]LOCAL_PORT:SANDBOX_PORT]...",
         "listen on LOCAL_PORT of ADDR (default 127.0.0.1; 0 picks a free port) or on a\n"
         "      Unix socket PATH (mode 0600), and carry each connection to SANDBOX_PORT of\n"
         "      the sandbox's own loopback (ADDR there: 127.0.0.1, or ::1); prints one\n"
         "      line per forward (127.0.0.1:43211 -> ID:8000) and serves until SIGINT or\n"
         "      SIGTERM (exit 0) or the sandbox's end (125). A stream that cannot be\n"
         "      opened closes its connection, with a line on stderr saying why"},
};

static const struct command *find_command(const char *name) {
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(commands[i].name, name) == 0)
                        return &commands[i];
        return NULL;
}

/* A command's summary; a summary that ends in @TOOLS@ ends in the names of sbx mcp's
 * tools from its table (cli_mcp_tools.c) instead, wrapped at 80 columns under the
 * summary's indent of 6. */
static void put_summary(FILE *f, const char *s) {
        const char *at = strstr(s, "@TOOLS@"), *nl;
        char names[512], *save = NULL;
        size_t col;

        if (!at) {
                fputs(s, f);
                return;
        }
        fwrite(s, 1, (size_t)(at - s), f);
        for (nl = at; nl > s && nl[-1] != '\n'; nl--)
                ;
        col = (size_t)(at - nl);
        cli_mcp_tool_names(names, sizeof(names));
        for (char *w = strtok_r(names, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
                size_t n = strlen(w);
                if (col > 6 && col + 1 + n > 80) {
                        fputs("\n      ", f);
                        col = 6;
                } else if (w != names) {
                        fputc(' ', f);
                        col++;
                }
                fputs(w, f);
                col += n;
        }
}

void cli_usage(FILE *f, const char *cmd) {
        const struct command *c = cmd ? find_command(cmd) : NULL;

        if (c) {
                fprintf(f, "usage: sbx [--socket PATH] %s\n\n  ", c->synopsis);
                put_summary(f, c->summary);
                fputc('\n', f);
                return;
        }
        fputs("usage: sbx [--socket PATH] COMMAND [OPTIONS] ...\n\n"
              "sbx drives sbxd, the local sandbox daemon: persistent Linux sandboxes by ID.\n\n"
              "Commands:\n",
              f);
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
                fprintf(f, "  sbx %s\n      ", commands[i].synopsis);
                put_summary(f, commands[i].summary);
                fputc('\n', f);
        }
        fputs("  sbx help [COMMAND]\n\n"
              "Socket: --socket PATH, else $SBX_SOCKET, else /run/sbxd/sbxd.sock for root and\n"
              "$XDG_RUNTIME_DIR/sbxd/sbxd.sock otherwise. A daemon on another machine:\n"
              "ssh://[user@]host[:port][/path/to/socket] as PATH (ssh runs `sbx dial-stdio`\n"
              "there; SBX_SSH, SBX_SSH_OPTS, SBX_SSH_REMOTE_SBX: see sbx(1)).\n"
              "BYTES take K, M, G suffixes (powers of 1024); SECS take fractions (0.5).\n"
              "Errors print one line \"sbx: CODE: message\" on stderr and exit with status 125;\n"
              "with --json also {\"error\":{\"code\":CODE,\"message\":...}} on stdout.\n",
              f);
}

/* ---- errors ------------------------------------------------------------------------------ */

/* Prints a message on one line: newlines and other control characters become spaces. */
static void put_one_line(FILE *f, const char *s) {
        for (; *s; s++)
                fputc((unsigned char)*s < 0x20 || *s == 0x7F ? ' ' : *s, f);
}

/* JSON errors: on once the command was given --json (cli_json_errors); the first error
 * of the process is then printed on stdout too, once. */
static bool json_errors, json_error_printed;

void cli_json_errors(void) {
        json_errors = true;
}

/* {"error":{"code":"CODE","message":"..."}} on stdout. */
static void print_json_error(enum sbx_code code, const char *m) {
        struct json j;

        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "error");
        json_begin_object(&j);
        json_key(&j, "code");
        json_string(&j, sbx_code_name(code));
        json_key(&j, "message");
        json_string(&j, m);
        json_end_object(&j);
        json_end_object(&j);
        (void)json_finish(&j);
        fflush(stdout);
}

static void verror(enum sbx_code code, bool json, const char *fmt, va_list ap) {
        char *m = NULL;

        fflush(stdout);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        if (json && json_errors && !json_error_printed) {
                json_error_printed = true;
                print_json_error(code, m ? m : "(out of memory)");
        }
        fprintf(stderr, "sbx: %s: ", sbx_code_name(code));
        put_one_line(stderr, m ? m : "(out of memory)");
        fputc('\n', stderr);
        free(m);
}

void cli_error_line(enum sbx_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        verror(code, false, fmt, ap);
        va_end(ap);
}

int cli_error(enum sbx_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        verror(code, true, fmt, ap);
        va_end(ap);
        return CLI_EXIT_ERROR;
}

int cli_usage_error(const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        cli_error(SBX_INVALID_ARGUMENT, "%s (run `sbx help` for usage)", m ? m : "bad usage");
        free(m);
        return CLI_EXIT_ERROR;
}

int cli_client_error(sbx_client *c, enum sbx_code rc) {
        const char *m = sbx_error_message(c);
        char *w = m && *m ? cli_cli_words(m) : NULL;

        cli_error(rc, "%s", w ? w : m && *m ? m : "the call failed without a message");
        free(w);
        return CLI_EXIT_ERROR;
}

/* ---- the daemon's words and the command line's ---------------------------------------- */

/* Request fields (and phrases) of the wire protocol that messages of the daemon and of
 * libsbx name, and the flag of sbx that sets each. A name is replaced where it stands as
 * a whole word (not inside another name, not already after a dash). The names that are
 * also plain words (memory) are replaced only where a message opens with them followed
 * by a value ("memory 256 bytes is below the minimum of 4 MiB"). */
static const struct {
        const char *field;
        const char *flag;
        bool lead; /* only at the start of the message, before a number */
} cli_words[] = {
        {"create_parents", "--parents", false},
        {"pass parents", "pass -p (--parents)", false},
        {"timeout_ms", "--timeout", false},
        {"idle_timeout_ms", "--idle-timeout", false},
        {"queue_timeout_ms", "--queue-timeout", false},
        {"queued_commands", "--max-queued", false},
        {"max_stdout_bytes", "--max-output", false},
        {"max_stderr_bytes", "--max-output", false},
        {"stdin_stream", "--stdin", false},
        {"memory_bytes", "--memory", false},
        {"cpu_seconds", "--cpu-seconds", false},
        {"cpu_percent", "--cpu-percent", false},
        {"file_size_bytes", "--file-size", false},
        {"file_size", "--file-size", false},
        {"open_files", "--open-files", false},
        {"tmp_bytes", "--tmp-size", false},
        {"disk_bytes", "--disk", false},
        {"disk_inodes", "--disk-inodes", false},
        {"writable_paths", "--writable", false},
        {"denied_read_paths", "--deny-read", false},
        {"denied_write_paths", "--deny-write", false},
        {"root_dir", "--root", false},
        {"share_uids", "--share-uid", false},
        {"share_gids", "--share-gid", false},
        {"keep_workspace", "--keep-workspace", false},
        {"allowed_hosts", "--allow-host", false},
        {"allowed_cidrs", "--allow-cidr", false},
        {"(limit)", "(--limit)", false},
        {"memory", "--memory", true},
        {"processes", "--processes", true},
        {"tmp", "--tmp-size", true},
        {"disk", "--disk", true},
};

static bool is_digit(char ch) {
        return ch >= '0' && ch <= '9';
}

static bool word_char(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_';
}

/* The length of the field of cli_words that starts at s[i] as a whole word, 0 if none;
 * *ret_flag gets its flag. */
static size_t match_field(const char *s, size_t i, const char **ret_flag) {
        if (i > 0 && (word_char(s[i - 1]) || s[i - 1] == '-'))
                return 0;
        for (size_t k = 0; k < sizeof(cli_words) / sizeof(cli_words[0]); k++) {
                size_t n = strlen(cli_words[k].field);
                if (cli_words[k].lead && (i > 0 || s[n] != ' ' || !is_digit(s[n + 1])))
                        continue;
                if (strncmp(s + i, cli_words[k].field, n) == 0 && !word_char(s[i + n])) {
                        *ret_flag = cli_words[k].flag;
                        return n;
                }
        }
        return 0;
}

/* "86400000 ms" (or "500ms") at s[i], a whole number of milliseconds: its length, and the
 * value in *ret_ms. 0 if there is none. */
static size_t match_ms(const char *s, size_t i, uint64_t *ret_ms) {
        size_t j = i;
        uint64_t v = 0;

        if (i > 0 && (word_char(s[i - 1]) || s[i - 1] == '.' || s[i - 1] == '-'))
                return 0;
        while (is_digit(s[j])) {
                if (v > UINT64_MAX / 10 - 9)
                        return 0;
                v = v * 10 + (uint64_t)(s[j] - '0');
                j++;
        }
        if (j == i)
                return 0;
        if (s[j] == ' ')
                j++;
        if (s[j] != 'm' || s[j + 1] != 's' || word_char(s[j + 2]))
                return 0;
        *ret_ms = v;
        return j + 2 - i;
}

char *cli_cli_words(const char *msg) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        for (size_t i = 0; msg[i];) {
                const char *flag;
                uint64_t ms;
                size_t n;

                if ((n = match_field(msg, i, &flag))) {
                        fputs(flag, f);
                        i += n;
                } else if ((n = match_ms(msg, i, &ms))) {
                        char frac[8] = "";
                        if (ms % 1000) {
                                size_t e;
                                snprintf(frac, sizeof(frac), ".%03u", (unsigned)(ms % 1000));
                                for (e = strlen(frac); frac[e - 1] == '0'; e--)
                                        frac[e - 1] = 0;
                        }
                        fprintf(f, "%llu%s s", (unsigned long long)(ms / 1000), frac);
                        i += n;
                } else {
                        fputc(msg[i++], f);
                }
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

void cli_warn(const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        fflush(stdout);
        fputs("sbx: warning: ", stderr);
        put_one_line(stderr, m ? m : "(out of memory)");
        fputc('\n', stderr);
        free(m);
}

/* The uid the daemon knows this process by, once a Hello said it (over ssh:// that is
 * the remote ssh user's, not ours). */
static uint32_t self_uid;
static bool self_uid_known;

uint32_t cli_self_uid(sbx_client *c) {
        struct sbx_hello *h = NULL;

        if (!self_uid_known && c && sbx_hello(c, &h) == SBX_OK) {
                self_uid = h->peer_uid;
                self_uid_known = true;
        }
        sbx_hello_free(h);
        return self_uid_known ? self_uid : (uint32_t)geteuid();
}

static int connect_as(const struct cli *cli, bool pipelined, sbx_client **ret) {
        sbx_client *c = NULL;
        enum sbx_code rc = pipelined
                                   ? libsbx_connect_pipelined(cli->socket_path, CLI_CLIENT_NAME, &c)
                                   : sbx_connect(cli->socket_path, CLI_CLIENT_NAME, &c);

        *ret = NULL;
        if (rc != SBX_OK) {
                if (c)
                        cli_client_error(c, rc);
                else
                        cli_error(SBX_INTERNAL, "out of memory");
                sbx_close(c);
                return CLI_EXIT_ERROR;
        }
        sbx_set_call_timeout_ms(c, CLI_CALL_TIMEOUT_MS);
        *ret = c;
        return 0;
}

int cli_connect(const struct cli *cli, sbx_client **ret) {
        return connect_as(cli, true, ret);
}

int cli_connect_kept(const struct cli *cli, sbx_client **ret) {
        return connect_as(cli, false, ret);
}

void cli_warn_not_owner(sbx_client *c, const char *id, uint32_t owner_uid) {
        uint32_t me = cli_self_uid(c);

        if (owner_uid == me)
                return;
        fprintf(stderr,
                "sbx: warning: sandbox '%s' belongs to uid %u, not to you (uid %u): it was shared "
                "with you, and its owner sees and can change everything run and written there\n",
                id, (unsigned)owner_uid, (unsigned)me);
}

void cli_check_owner(sbx_client *c, const char *id) {
        struct sbx_sandbox *sb = NULL;

        if (sbx_get(c, id, &sb) == SBX_OK && sb)
                cli_warn_not_owner(c, id, sb->owner_uid);
        sbx_sandbox_free(sb);
}

/* ---- I/O helpers ------------------------------------------------------------------------- */

int cli_write_all(int fd, const void *buf, size_t len) {
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int cli_read_all(int fd, size_t max, uint8_t **ret, size_t *ret_len) {
        size_t len = 0, cap = 64 * 1024;
        uint8_t *buf = malloc(cap + 1);

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;
                if (len == cap) {
                        uint8_t *nb;
                        if (cap > SIZE_MAX / 4) {
                                free(buf);
                                return -EFBIG;
                        }
                        cap *= 2;
                        nb = realloc(buf, cap + 1);
                        if (!nb) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = nb;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        int err = errno;
                        if (err == EINTR)
                                continue;
                        free(buf);
                        return -err;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (max && len > max) {
                        free(buf);
                        return -EFBIG;
                }
        }
        buf[len] = 0;
        *ret = buf;
        *ret_len = len;
        return 0;
}

const char *cli_file_type_name(enum sbx_file_type t) {
        switch (t) {
        case SBX_FILE_REGULAR:
                return "file";
        case SBX_FILE_DIRECTORY:
                return "directory";
        case SBX_FILE_SYMLINK:
                return "symlink";
        case SBX_FILE_FIFO:
                return "fifo";
        case SBX_FILE_SOCKET:
                return "socket";
        case SBX_FILE_CHAR_DEVICE:
                return "char_device";
        case SBX_FILE_BLOCK_DEVICE:
                return "block_device";
        case SBX_FILE_UNKNOWN:
                break;
        }
        return "unknown";
}

void cli_put_text(FILE *f, const char *s) {
        if (!s) {
                fputc('-', f);
                return;
        }
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch < 0x20 || ch == 0x7F)
                        fprintf(f, "\\x%02x", ch);
                else
                        fputc(ch, f);
        }
}

void cli_format_iso(char *buf, size_t len, int64_t unix_ms, bool with_ms) {
        int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : -((-unix_ms + 999) / 1000);
        int ms = (int)(unix_ms - secs * 1000);
        time_t t = (time_t)secs;
        struct tm tm;
        size_t n;

        if (!gmtime_r(&t, &tm)) {
                snprintf(buf, len, "?");
                return;
        }
        n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
        if (with_ms)
                snprintf(buf + n, len - n, ".%03dZ", ms);
        else
                snprintf(buf + n, len - n, "Z");
}

int64_t cli_now_unix_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- options ----------------------------------------------------------------------------- */

void cli_opts_init(struct cli_opts *p, struct cli *cli, int argc, char **argv,
                   const struct cli_opt *spec) {
        memset(p, 0, sizeof(*p));
        p->cli = cli;
        p->cmd = argv[0];
        p->argc = argc;
        p->argv = argv;
        p->i = 1;
        p->spec = spec;
}

/* A usage error found while parsing p: JSON as well when the command line asks for
 * --json (before any "--") and the command takes it, since the parser may stop before it
 * reaches that word. */
static int opts_error(struct cli_opts *p) {
        bool takes_json = false;

        for (int k = 0; p->spec[k].name; k++)
                if (strcmp(p->spec[k].name, "json") == 0)
                        takes_json = true;
        for (int i = 1; takes_json && i < p->argc && strcmp(p->argv[i], "--") != 0; i++)
                if (strcmp(p->argv[i], "--json") == 0)
                        cli_json_errors();
        return CLI_OPT_ERR;
}

/* The option k of p's spec was found: its index, with JSON errors on for "json". */
static int opts_found(struct cli_opts *p, int k) {
        if (strcmp(p->spec[k].name, "json") == 0)
                cli_json_errors();
        return k;
}

/* The next option of the cluster of short options in p->shorts. */
static int next_short(struct cli_opts *p) {
        char ch = *p->shorts++;

        for (int k = 0; p->spec[k].name; k++) {
                const struct cli_opt *o = &p->spec[k];
                if (o->short_name != ch)
                        continue;
                if (!o->has_arg) {
                        p->arg = NULL;
                        return opts_found(p, k);
                }
                if (*p->shorts) {
                        p->arg = p->shorts; /* -m0644 */
                } else if (p->i < p->argc) {
                        p->arg = p->argv[p->i++];
                } else {
                        opts_error(p);
                        cli_usage_error("option -%c of sbx %s needs a value", ch, p->cmd);
                        return CLI_OPT_ERR;
                }
                p->shorts = NULL;
                return opts_found(p, k);
        }
        opts_error(p);
        cli_usage_error("unknown option '-%c' for sbx %s", ch, p->cmd);
        return CLI_OPT_ERR;
}

/* --socket PATH (or --socket=PATH; eq is the '=' or NULL), which every command takes.
 * 0, or CLI_OPT_ERR after a usage error. */
static int take_socket(struct cli_opts *p, const char *eq) {
        if (eq) {
                p->cli->socket_path = eq + 1;
        } else if (p->i < p->argc) {
                p->cli->socket_path = p->argv[p->i++];
        } else {
                opts_error(p);
                cli_usage_error("option --socket of sbx %s needs a value", p->cmd);
                return CLI_OPT_ERR;
        }
        return 0;
}

/* The long option named by the nlen bytes of name (its value after eq, the '=', or in
 * the next word): its index in p->spec, or CLI_OPT_ERR after a usage error. */
static int next_long(struct cli_opts *p, const char *name, size_t nlen, const char *eq) {
        for (int k = 0; p->spec[k].name; k++) {
                const struct cli_opt *o = &p->spec[k];
                if (strlen(o->name) != nlen || strncmp(o->name, name, nlen) != 0)
                        continue;
                if (!o->has_arg) {
                        if (eq) {
                                opts_error(p);
                                cli_usage_error("option --%s of sbx %s takes no value", o->name,
                                                p->cmd);
                                return CLI_OPT_ERR;
                        }
                        p->arg = NULL;
                        return opts_found(p, k);
                }
                if (eq) {
                        p->arg = eq + 1;
                } else if (p->i < p->argc) {
                        p->arg = p->argv[p->i++];
                } else {
                        opts_error(p);
                        cli_usage_error("option --%s of sbx %s needs a value", o->name, p->cmd);
                        return CLI_OPT_ERR;
                }
                return opts_found(p, k);
        }
        opts_error(p);
        cli_usage_error("unknown option '--%.*s' for sbx %s", (int)nlen, name, p->cmd);
        return CLI_OPT_ERR;
}

int cli_opts_next(struct cli_opts *p) {
        for (;;) {
                const char *w, *name, *eq;
                size_t nlen;

                if (p->shorts && *p->shorts)
                        return next_short(p);
                p->shorts = NULL;
                if (p->i >= p->argc)
                        return CLI_OPT_END;
                w = p->argv[p->i++];
                if (p->only_positional || w[0] != '-' || w[1] == 0) {
                        p->arg = w;
                        p->saw_dashdash = p->only_positional;
                        return CLI_OPT_POS;
                }
                if (strcmp(w, "--") == 0) {
                        p->only_positional = true;
                        continue;
                }
                if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0)
                        return CLI_OPT_HELP;
                if (w[1] != '-') {
                        p->shorts = w + 1;
                        return next_short(p);
                }
                name = w + 2;
                eq = strchr(name, '=');
                nlen = eq ? (size_t)(eq - name) : strlen(name);
                if (nlen != 6 || strncmp(name, "socket", 6) != 0)
                        return next_long(p, name, nlen, eq);
                if (take_socket(p, eq) < 0)
                        return CLI_OPT_ERR;
        }
}

int cli_bad_value(const char *cmd, const char *opt, const char *value, const char *what) {
        return cli_usage_error("bad value '%s' for %s of sbx %s: %s", value, opt, cmd, what);
}

/* ---- values ------------------------------------------------------------------------------ */

/* Parses the decimal digits at *pp into *ret (at most max); advances *pp. */
static int parse_digits(const char **pp, uint64_t max, uint64_t *ret) {
        const char *p = *pp;
        uint64_t v = 0;

        if (!is_digit(*p))
                return -EINVAL;
        for (; is_digit(*p); p++) {
                unsigned d = (unsigned)(*p - '0');
                if (v > (max - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *pp = p;
        *ret = v;
        return 0;
}

/* Parses ".digits" at *pp: up to max_digits digits as a numerator over *ret_den (a
 * power of ten); further digits are dropped. No fraction: 0/1. */
static int parse_fraction(const char **pp, unsigned max_digits, uint64_t *ret_num,
                          uint64_t *ret_den) {
        const char *p = *pp;
        uint64_t num = 0, den = 1;
        unsigned k = 0;

        *ret_num = 0;
        *ret_den = 1;
        if (*p != '.')
                return 0;
        p++;
        if (!is_digit(*p))
                return -EINVAL;
        for (; is_digit(*p); p++) {
                if (k < max_digits) {
                        num = num * 10 + (uint64_t)(*p - '0');
                        den *= 10;
                        k++;
                } else if (*p != '0') {
                        num++; /* keep "more than" for rounding up */
                        while (is_digit(*p))
                                p++;
                        break;
                }
        }
        /* num may have been bumped past the last kept digit; clamp below den. */
        if (num >= den)
                num = den - 1;
        *pp = p;
        *ret_num = num;
        *ret_den = den;
        return 0;
}

int cli_parse_uint(const char *s, uint64_t max, uint64_t *ret) {
        const char *p = s;
        uint64_t v;

        if (!s || parse_digits(&p, max, &v) < 0 || *p)
                return -EINVAL;
        *ret = v;
        return 0;
}

int cli_parse_bytes(const char *s, uint64_t *ret) {
        const char *p = s;
        uint64_t ip, num, den, mult = 1, v;
        bool frac;

        if (!s || parse_digits(&p, UINT64_MAX, &ip) < 0)
                return -EINVAL;
        frac = *p == '.';
        /* Six digits keep num * mult (mult <= 2^40) well inside 64 bits. */
        if (parse_fraction(&p, 6, &num, &den) < 0)
                return -EINVAL;
        switch (*p) {
        case 'K':
        case 'k':
                mult = 1ull << 10;
                break;
        case 'M':
        case 'm':
                mult = 1ull << 20;
                break;
        case 'G':
        case 'g':
                mult = 1ull << 30;
                break;
        case 'T':
        case 't':
                mult = 1ull << 40;
                break;
        default:
                break;
        }
        if (mult > 1) {
                p++;
                if ((p[0] == 'i' || p[0] == 'I') && (p[1] == 'B' || p[1] == 'b'))
                        p += 2;
                else if (p[0] == 'B' || p[0] == 'b')
                        p++;
        } else if ((p[0] == 'B' || p[0] == 'b') && p[1] == 0) {
                p++;
        }
        if (*p || (frac && mult == 1))
                return -EINVAL;
        if (ip > UINT64_MAX / mult)
                return -EINVAL;
        v = ip * mult;
        if (v > UINT64_MAX - num * mult / den)
                return -EINVAL;
        *ret = v + num * mult / den;
        return 0;
}

int cli_parse_secs_ms(const char *s, uint64_t *ret_ms) {
        const char *p = s;
        uint64_t ip, num, den, ms;

        /* Up to ~31,700 years keeps ip * 1000 far from overflow. */
        if (!s || parse_digits(&p, 1000000000000ull, &ip) < 0)
                return -EINVAL;
        if (parse_fraction(&p, 9, &num, &den) < 0 || *p)
                return -EINVAL;
        ms = ip * 1000 + (num * 1000 + den - 1) / den;
        *ret_ms = ms;
        return 0;
}

int cli_parse_double(const char *s, double *ret) {
        const char *p = s;
        uint64_t ip, num, den;

        if (!s || parse_digits(&p, UINT64_MAX, &ip) < 0)
                return -EINVAL;
        if (parse_fraction(&p, 18, &num, &den) < 0 || *p)
                return -EINVAL;
        *ret = strtod(s, NULL);
        return 0;
}

int cli_parse_mode(const char *s, uint32_t *ret) {
        uint32_t v = 0;
        size_t n = 0;

        if (!s || !*s)
                return -EINVAL;
        for (const char *p = s; *p; p++, n++) {
                if (*p < '0' || *p > '7' || n >= 6)
                        return -EINVAL;
                v = v * 8 + (uint32_t)(*p - '0');
        }
        if (v > 07777)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
        struct cli cli = {0};
        const struct command *c;
        int i = 1, rc;

        while (i < argc && argv[i][0] == '-') {
                const char *w = argv[i];
                if (strcmp(w, "--socket") == 0) {
                        if (i + 1 >= argc)
                                return cli_usage_error("option --socket needs a value");
                        cli.socket_path = argv[i + 1];
                        i += 2;
                } else if (strncmp(w, "--socket=", 9) == 0) {
                        cli.socket_path = w + 9;
                        i++;
                } else if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
                        cli_usage(stdout, NULL);
                        return 0;
                } else if (strcmp(w, "--version") == 0) {
                        char *vargv[] = {(char *)"version", NULL};
                        return cmd_version(&cli, 1, vargv);
                } else {
                        return cli_usage_error("unknown option '%s'", w);
                }
        }
        if (i >= argc)
                return cli_usage_error("no command given");
        if (strcmp(argv[i], "help") == 0) {
                if (i + 1 < argc && !find_command(argv[i + 1]))
                        return cli_usage_error("unknown command '%s'", argv[i + 1]);
                cli_usage(stdout, i + 1 < argc ? argv[i + 1] : NULL);
                return 0;
        }
        c = find_command(argv[i]);
        if (!c)
                return cli_usage_error("unknown command '%s'", argv[i]);
        rc = c->fn(&cli, argc - i, argv + i);
        if (fflush(stdout) != 0 && rc == 0)
                return cli_error(SBX_INTERNAL, "cannot write to stdout: %s", strerror(errno));
        return rc;
}
