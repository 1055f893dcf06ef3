/* it_load.c: the load test of sbxd: many raw-protocol clients pipelining a mix of
 * requests for a bounded time, with hostile ones among them, then proof that nothing
 * was lost and nothing was left behind.
 *
 * Each client is a process of its own with one connection on which it keeps several
 * requests in flight: commands (`true`, `echo TOKEN`, streamed output), file writes read
 * back, list, get, set-timeout, history, Hello, and extra sandboxes created, used and
 * terminated. It tracks every request id: each request gets exactly one final response
 * (a streamed command: CommandStarted and OutputChunks first), no response comes for an
 * id that is not in flight, and each answer is checked against what the client did. In
 * between it opens throwaway connections that send garbage, an oversized frame header,
 * half a frame, or start a command and vanish while it runs.
 *
 * Afterwards: no live sandbox, no process under the daemon, no cgroup and no sandbox
 * directory left; the daemon's open descriptors and RSS back near the baseline taken
 * after warm-up; it stops cleanly (exit 0, which under ASan also means no leak); and its
 * records hold every command with an outcome.
 *
 * Two daemon bugs this load found have focused tests of their own below:
 * stream_started_comes_first (output on the wire before CommandStarted) and
 * output_kept_under_load (a command's output dropped when the loop is slow); the mixed
 * test counts the dropped outputs and asserts on them last, after everything else.
 *
 * The default run is short (it is part of `make check`); `make load` sets
 * SBX_LOAD_SECONDS and SBX_LOAD_CLIENTS, and the test case's timeout follows them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "itutil.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"
#include "testutil.h"

#define DEFAULT_LOAD_SECONDS 12
#define DEFAULT_LOAD_CLIENTS 8
/* Requests one client keeps in flight on its connection. */
#define PIPELINE 4
/* Extra sandboxes one client has at once (created, used, terminated). */
#define MAX_EXTRAS 2

static int env_int(const char *name, int def, int lo, int hi) {
        const char *v = getenv(name);
        int n = v && v[0] ? atoi(v) : def;
        return n < lo ? lo : n > hi ? hi : n;
}

static int load_seconds(void) {
        return env_int("SBX_LOAD_SECONDS", DEFAULT_LOAD_SECONDS, 1, 24 * 3600);
}

static int load_clients(void) {
        return env_int("SBX_LOAD_CLIENTS", DEFAULT_LOAD_CLIENTS, 1, 200);
}

/* ---- /proc and the filesystem ------------------------------------------------------- */

static int dir_entries(const char *path, char *names, size_t len) {
        DIR *dir = opendir(path);
        struct dirent *de;
        int n = 0;
        if (names && len)
                names[0] = '\0';
        if (!dir)
                return -1;
        while ((de = readdir(dir))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                n++;
                if (names && strlen(names) + strlen(de->d_name) + 2 < len) {
                        strcat(names, de->d_name);
                        strcat(names, " ");
                }
        }
        closedir(dir);
        return n;
}

static int fd_count(pid_t pid) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
        return dir_entries(p, NULL, 0);
}

/* 1 when pid runs with AddressSanitizer (its freed memory sits in a quarantine of up
 * to 256 MiB, so its RSS says nothing about leaks; LeakSanitizer checks at exit). */
static int sanitized(pid_t pid) {
        char p[64], line[512];
        int found = 0;
        FILE *f;
        snprintf(p, sizeof(p), "/proc/%d/maps", (int)pid);
        f = fopen(p, "re");
        while (f && !found && fgets(line, sizeof(line), f))
                found = strstr(line, "libasan") != NULL;
        if (f)
                fclose(f);
        return found;
}

/* Processes whose parent is pid. */
static int children_of(pid_t pid) {
        DIR *dir = opendir("/proc");
        struct dirent *de;
        int n = 0;
        while (dir && (de = readdir(dir))) {
                char p[300], buf[512], *rp;
                int fd, ppid;
                ssize_t k;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
                fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                k = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (k <= 0)
                        continue;
                buf[k] = '\0';
                rp = strrchr(buf, ')');
                if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == pid)
                        n++;
        }
        if (dir)
                closedir(dir);
        return n;
}

/* Sub-directories (sandbox groups, but the warm pool's ~warm-*) in every cgroup directory
 * named like the daemon's base for state_dir (see daemon/main.c), at most depth levels
 * under path. */
static int cgroup_groups(const char *path, const char *name, int depth) {
        DIR *dir;
        struct dirent *de;
        int n = 0;
        if (depth < 0 || !(dir = opendir(path)))
                return 0;
        while ((de = readdir(dir))) {
                char sub[1024];
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                if (strcmp(de->d_name, name) == 0) {
                        DIR *g = opendir(sub);
                        struct dirent *ge;
                        while (g && (ge = readdir(g)))
                                if (ge->d_type == DT_DIR && ge->d_name[0] != '.' &&
                                    ge->d_name[0] != '~')
                                        n++;
                        if (g)
                                closedir(g);
                } else if (strncmp(de->d_name, "sbx", 3) != 0) {
                        n += cgroup_groups(sub, name, depth - 1);
                }
        }
        closedir(dir);
        return n;
}

static int cgroup_leftovers(const char *state_dir) {
        unsigned h = 2166136261u;
        const char *s;
        char name[32];
        for (s = state_dir; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        snprintf(name, sizeof(name), "sbxd-%08x", h);
        return cgroup_groups("/sys/fs/cgroup", name, 4);
}

/* ---- a raw protocol client (runs in a child process: no ck_assert there) ------------- */

struct client {
        int index;
        const char *sock;
        char log[700];
        int fd;
        struct frame_reader reader;
        uint64_t next_id;
        unsigned seed;
        int files; /* the daemon implements write_file and read_file, and can do them */
        char home[SBX_ID_MAX_BYTES + 1];
        unsigned next_extra;
        int n_extras;
        /* counters */
        unsigned long requests, responses, chunks, commands, hostile, early_output;
        unsigned long lost_output; /* exited 0 with none of its output: see the test below */
};

enum kind {
        K_HELLO,
        K_CREATE,
        K_EXEC_TRUE,
        K_EXEC_ECHO,
        K_EXEC_STREAM,
        K_WRITE,
        K_READ,
        K_LIST,
        K_GET,
        K_SET_TIMEOUT,
        K_HISTORY,
        K_EXTRA_EXEC,
        K_TERMINATE,
};

struct pending {
        uint64_t id; /* 0: free slot */
        enum kind kind;
        char sandbox[SBX_ID_MAX_BYTES + 1];
        char token[64]; /* expected output or file content */
        char path[64];
        size_t streamed; /* stdout bytes seen in chunks */
        char stream_buf[128];
        int started;
};

static struct pending slots[PIPELINE];

static void die(struct client *c, const char *fmt, ...)
        __attribute__((format(printf, 2, 3), noreturn));
static void die(struct client *c, const char *fmt, ...) {
        FILE *f = fopen(c->log, "ae");
        va_list ap;
        if (f) {
                fprintf(f, "client %d: ", c->index);
                va_start(ap, fmt);
                vfprintf(f, fmt, ap);
                va_end(ap);
                fputc('\n', f);
                fclose(f);
        }
        _exit(1);
}

static int raw_connect(const char *sock) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        memcpy(sa.sun_path, sock, strlen(sock) + 1);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int send_all(int fd, const void *p, size_t n) {
        const uint8_t *b = p;
        while (n > 0) {
                ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                b += w;
                n -= (size_t)w;
        }
        return 0;
}

static void send_req(struct client *c, int fd, Sbx__V1__Request *req) {
        uint8_t *buf;
        size_t len;
        if (frame_pack(&req->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len) < 0)
                die(c, "frame_pack failed");
        if (send_all(fd, buf, len) < 0)
                die(c, "send: %s", strerror(errno));
        free(buf);
}

/* The next response on fd within timeout_ms; NULL at end of stream. Dies on a timeout. */
static Sbx__V1__Response *recv_resp(struct client *c, int fd, struct frame_reader *r,
                                    int timeout_ms) {
        double t0 = it_now_ms();
        for (;;) {
                const uint8_t *p;
                size_t len;
                uint8_t *dst;
                size_t room;
                ssize_t n;
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                int k = frame_reader_next(r, &p, &len), left;
                if (k < 0)
                        die(c, "a frame from sbxd larger than the maximum");
                if (k == 1) {
                        Sbx__V1__Response *resp = sbx__v1__response__unpack(NULL, len, p);
                        if (!resp)
                                die(c, "a response that does not decode (%zu bytes)", len);
                        return resp;
                }
                left = timeout_ms - (int)(it_now_ms() - t0);
                if (left <= 0 || poll(&pfd, 1, left) != 1)
                        die(c, "no response within %d ms", timeout_ms);
                if (frame_reader_prepare(r, &dst, &room) < 0)
                        die(c, "out of memory");
                n = read(fd, dst, room);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return NULL;
                if (n < 0)
                        die(c, "read: %s", strerror(errno));
                frame_reader_commit(r, (size_t)n);
        }
}

static struct pending *slot_free(void) {
        int i;
        for (i = 0; i < PIPELINE; i++)
                if (!slots[i].id)
                        return &slots[i];
        return NULL;
}

static int in_flight(void) {
        int i, n = 0;
        for (i = 0; i < PIPELINE; i++)
                n += slots[i].id != 0;
        return n;
}

static struct pending *slot_of(uint64_t id) {
        int i;
        for (i = 0; i < PIPELINE; i++)
                if (slots[i].id && slots[i].id == id)
                        return &slots[i];
        return NULL;
}

/* Starts a request of kind k in slot s (s->sandbox and s->token set by the caller as
 * needed). */
static void start(struct client *c, struct pending *s, enum kind k) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
        Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        Sbx__V1__ListSandboxes ls = SBX__V1__LIST_SANDBOXES__INIT;
        Sbx__V1__GetSandbox gs = SBX__V1__GET_SANDBOX__INIT;
        Sbx__V1__SetTimeout st = SBX__V1__SET_TIMEOUT__INIT;
        Sbx__V1__GetHistory gh = SBX__V1__GET_HISTORY__INIT;
        Sbx__V1__Terminate te = SBX__V1__TERMINATE__INIT;
        char *argv_true[] = {"true"};
        char *argv_echo[] = {"echo", s->token};
        char *argv_stream[] = {"sh", "-c", NULL};
        char script[160];

        s->id = ++c->next_id;
        s->kind = k;
        s->streamed = 0;
        s->started = 0;
        s->stream_buf[0] = '\0';
        req.has_request_id = 1;
        req.request_id = s->id;
        switch (k) {
        case K_HELLO:
                hello.client_name = "it_load";
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &hello;
                break;
        case K_CREATE:
                cs.id = s->sandbox;
                cs.has_timeout_ms = 1;
                cs.timeout_ms = 600 * 1000;
                req.body_case = SBX__V1__REQUEST__BODY_CREATE_SANDBOX;
                req.create_sandbox = &cs;
                break;
        case K_EXEC_TRUE:
        case K_EXTRA_EXEC:
        case K_EXEC_ECHO:
        case K_EXEC_STREAM:
                rc.sandbox_id = s->sandbox;
                rc.has_timeout_ms = 1;
                rc.timeout_ms = 60 * 1000;
                if (k == K_EXEC_ECHO) {
                        rc.n_argv = 2;
                        rc.argv = argv_echo;
                } else if (k == K_EXEC_STREAM) {
                        snprintf(script, sizeof(script), "echo %s; echo err >&2", s->token);
                        argv_stream[2] = script;
                        rc.n_argv = 3;
                        rc.argv = argv_stream;
                        rc.has_stream = 1;
                        rc.stream = 1;
                } else {
                        rc.n_argv = 1;
                        rc.argv = argv_true;
                }
                req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
                req.run_command = &rc;
                c->commands++;
                break;
        case K_WRITE:
                wf.sandbox_id = s->sandbox;
                wf.path = s->path;
                wf.has_data = 1;
                wf.data.data = (uint8_t *)s->token;
                wf.data.len = strlen(s->token);
                req.body_case = SBX__V1__REQUEST__BODY_WRITE_FILE;
                req.write_file = &wf;
                break;
        case K_READ:
                rf.sandbox_id = s->sandbox;
                rf.path = s->path;
                req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
                req.read_file = &rf;
                break;
        case K_LIST:
                req.body_case = SBX__V1__REQUEST__BODY_LIST_SANDBOXES;
                req.list_sandboxes = &ls;
                break;
        case K_GET:
                gs.sandbox_id = s->sandbox;
                req.body_case = SBX__V1__REQUEST__BODY_GET_SANDBOX;
                req.get_sandbox = &gs;
                break;
        case K_SET_TIMEOUT:
                st.sandbox_id = s->sandbox;
                st.has_timeout_ms = 1;
                st.timeout_ms = 600 * 1000;
                req.body_case = SBX__V1__REQUEST__BODY_SET_TIMEOUT;
                req.set_timeout = &st;
                break;
        case K_HISTORY:
                gh.sandbox_id = s->sandbox;
                gh.has_limit = 1;
                gh.limit = 5;
                req.body_case = SBX__V1__REQUEST__BODY_GET_HISTORY;
                req.get_history = &gh;
                break;
        case K_TERMINATE:
                te.sandbox_id = s->sandbox;
                req.body_case = SBX__V1__REQUEST__BODY_TERMINATE;
                req.terminate = &te;
                break;
        }
        send_req(c, c->fd, &req);
        c->requests++;
}

static void check_ok(struct client *c, const struct pending *s, const Sbx__V1__Response *resp) {
        if (!resp->status || !resp->status->has_code)
                die(c, "req %llu (kind %d): a response without a status", (unsigned long long)s->id,
                    s->kind);
        if (resp->status->code != SBX__V1__CODE__OK)
                die(c, "req %llu (kind %d, sandbox %s): %d: %s", (unsigned long long)s->id, s->kind,
                    s->sandbox, (int)resp->status->code,
                    resp->status->message ? resp->status->message : "");
}

static void check_result(struct client *c, struct pending *s, const Sbx__V1__CommandResult *r) {
        if (!r || !r->has_outcome || r->outcome != SBX__V1__OUTCOME__EXITED || !r->has_exit_code ||
            r->exit_code != 0)
                die(c, "req %llu: command in %s did not exit 0 (outcome %d, code %d, %s)",
                    (unsigned long long)s->id, s->sandbox, r ? (int)r->outcome : -1,
                    r ? r->exit_code : -1, r && r->start_error ? r->start_error : "");
        if ((s->kind == K_EXEC_TRUE || s->kind == K_EXTRA_EXEC) &&
            (r->stdout_bytes || r->stderr_bytes))
                die(c, "req %llu: `true` in %s produced %llu + %llu bytes: \"%.*s\"",
                    (unsigned long long)s->id, s->sandbox, (unsigned long long)r->stdout_bytes,
                    (unsigned long long)r->stderr_bytes, (int)r->stdout.len,
                    (const char *)r->stdout.data);
        if (s->kind == K_EXEC_ECHO && r->stderr_bytes)
                die(c, "req %llu: echo wrote %llu bytes to stderr", (unsigned long long)s->id,
                    (unsigned long long)r->stderr_bytes);
        if ((s->kind == K_EXEC_ECHO || s->kind == K_EXEC_STREAM) && r->stdout_bytes == 0 &&
            s->streamed == 0) {
                /* The output the command wrote before it exited never reached its result:
                 * counted, and asserted once everything else has been checked. */
                c->lost_output++;
                return;
        }
        if (s->kind == K_EXEC_ECHO) {
                size_t n = strlen(s->token);
                if (r->stdout.len != n + 1 || memcmp(r->stdout.data, s->token, n) != 0 ||
                    r->stdout.data[n] != '\n')
                        die(c,
                            "req %llu: echo %s: the result has %zu bytes of stdout (%llu "
                            "produced), exit 0, duration %.3f s",
                            (unsigned long long)s->id, s->token, r->stdout.len,
                            (unsigned long long)r->stdout_bytes, r->duration);
        }
        if (s->kind == K_EXEC_STREAM) {
                size_t n = strlen(s->token);
                if (!s->started)
                        die(c, "req %llu: streamed result without CommandStarted",
                            (unsigned long long)s->id);
                if (s->streamed != n + 1 || memcmp(s->stream_buf, s->token, n) != 0 ||
                    r->stdout_bytes != n + 1)
                        die(c, "req %llu: streamed %zu bytes of stdout, expected %zu",
                            (unsigned long long)s->id, s->streamed, n + 1);
        }
}

/* Handles one response on the main connection; returns 1 when it was final. */
static int on_response(struct client *c, Sbx__V1__Response *resp) {
        struct pending *s;
        size_t i;

        if (!resp->has_request_id || !(s = slot_of(resp->request_id)))
                die(c,
                    "a response for request %llu, which is not in flight (lost, duplicated "
                    "or foreign)",
                    (unsigned long long)resp->request_id);
        c->responses++;
        check_ok(c, s, resp);
        if (s->kind == K_EXEC_STREAM &&
            resp->body_case == SBX__V1__RESPONSE__BODY_COMMAND_STARTED) {
                if (s->started)
                        die(c, "req %llu: CommandStarted twice", (unsigned long long)s->id);
                /* Output before CommandStarted breaks sbx.proto's order; the test
                 * stream_started_comes_first shows it alone, here it is counted. */
                if (s->streamed)
                        c->early_output++;
                s->started = 1;
                return 0;
        }
        if (s->kind == K_EXEC_STREAM && resp->body_case == SBX__V1__RESPONSE__BODY_OUTPUT) {
                const Sbx__V1__OutputChunk *o = resp->output;
                c->chunks++;
                if (o->stream == SBX__V1__STREAM__STDOUT) {
                        if (o->offset != s->streamed ||
                            s->streamed + o->data.len >= sizeof(s->stream_buf))
                                die(c, "req %llu: chunk at offset %llu, expected %zu",
                                    (unsigned long long)s->id, (unsigned long long)o->offset,
                                    s->streamed);
                        memcpy(s->stream_buf + s->streamed, o->data.data, o->data.len);
                        s->streamed += o->data.len;
                }
                return 0;
        }
        switch (s->kind) {
        case K_HELLO:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_HELLO)
                        die(c, "Hello answered with body %d", resp->body_case);
                break;
        case K_CREATE:
        case K_GET:
        case K_SET_TIMEOUT:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_SANDBOX ||
                    strcmp(resp->sandbox->id, s->sandbox) != 0 ||
                    resp->sandbox->state != SBX__V1__SANDBOX_STATE__READY)
                        die(c, "req %llu (kind %d): sandbox %s not ready in the answer",
                            (unsigned long long)s->id, s->kind, s->sandbox);
                break;
        case K_TERMINATE:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_SANDBOX ||
                    resp->sandbox->state != SBX__V1__SANDBOX_STATE__TERMINATED)
                        die(c, "terminate %s: state %d", s->sandbox,
                            resp->body_case == SBX__V1__RESPONSE__BODY_SANDBOX
                                    ? (int)resp->sandbox->state
                                    : -1);
                if (strcmp(s->sandbox, c->home) != 0)
                        c->n_extras--;
                break;
        case K_EXEC_TRUE:
        case K_EXEC_ECHO:
        case K_EXEC_STREAM:
        case K_EXTRA_EXEC:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_COMMAND_RESULT)
                        die(c, "req %llu: a command answered with body %d",
                            (unsigned long long)s->id, resp->body_case);
                check_result(c, s, resp->command_result);
                break;
        case K_WRITE:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_WRITE_FILE ||
                    resp->write_file->bytes_written != strlen(s->token))
                        die(c, "write %s: wrong answer", s->path);
                break;
        case K_READ:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_READ_FILE ||
                    resp->read_file->data.len != strlen(s->token) ||
                    memcmp(resp->read_file->data.data, s->token, strlen(s->token)) != 0)
                        die(c, "read %s: not what this client wrote (%zu bytes)", s->path,
                            resp->body_case == SBX__V1__RESPONSE__BODY_READ_FILE
                                    ? resp->read_file->data.len
                                    : 0);
                break;
        case K_LIST: {
                int found = 0;
                if (resp->body_case != SBX__V1__RESPONSE__BODY_LIST_SANDBOXES)
                        die(c, "list answered with body %d", resp->body_case);
                for (i = 0; i < resp->list_sandboxes->n_sandboxes; i++)
                        found |= strcmp(resp->list_sandboxes->sandboxes[i]->id, c->home) == 0;
                if (!found && !resp->list_sandboxes->truncated)
                        die(c, "list does not show this client's sandbox %s", c->home);
                break;
        }
        case K_HISTORY:
                if (resp->body_case != SBX__V1__RESPONSE__BODY_HISTORY)
                        die(c, "history answered with body %d", resp->body_case);
                break;
        }
        return 1;
}

/* Follow-ups: a write is read back, an extra sandbox runs a command then ends. */
static void follow_up(struct client *c, struct pending *done) {
        struct pending s = *done;
        struct pending *n = done;
        memset(done, 0, sizeof(*done));
        switch (s.kind) {
        case K_WRITE:
                *n = s;
                start(c, n, K_READ);
                break;
        case K_CREATE:
                if (strcmp(s.sandbox, c->home) == 0)
                        break; /* home stays for the whole run */
                *n = s;
                start(c, n, K_EXTRA_EXEC);
                break;
        case K_EXTRA_EXEC:
                *n = s;
                start(c, n, K_TERMINATE);
                break;
        case K_HELLO:
        case K_EXEC_TRUE:
        case K_EXEC_ECHO:
        case K_EXEC_STREAM:
        case K_READ:
        case K_LIST:
        case K_GET:
        case K_SET_TIMEOUT:
        case K_HISTORY:
        case K_TERMINATE:
                break;
        }
}

static void read_main(struct client *c, int timeout_ms) {
        Sbx__V1__Response *resp = recv_resp(c, c->fd, &c->reader, timeout_ms);
        struct pending *s;
        if (!resp)
                die(c, "sbxd closed the main connection with %d requests in flight", in_flight());
        s = slot_of(resp->request_id);
        if (on_response(c, resp) && s)
                follow_up(c, s);
        sbx__v1__response__free_unpacked(resp, NULL);
}

/* ---- hostile throwaway connections ---- */

static void hostile(struct client *c, int which) {
        struct frame_reader r;
        Sbx__V1__Response *resp;
        int fd = raw_connect(c->sock);
        uint8_t garbage[12] = {0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
        uint8_t half[14] = {0, 0, 0, 100, 8, 1, 0x52, 2, 10, 0};

        if (fd < 0)
                die(c, "connect: %s", strerror(errno));
        c->hostile++;
        frame_reader_init(&r, SBX_DEFAULT_MAX_FRAME_BYTES);
        switch (which) {
        case 0: /* an undecodable payload: INVALID_ARGUMENT for request 0, then EOF */
                if (send_all(fd, garbage, sizeof(garbage)) < 0)
                        die(c, "send garbage");
                resp = recv_resp(c, fd, &r, 10000);
                if (!resp || resp->request_id != 0 ||
                    resp->status->code != SBX__V1__CODE__INVALID_ARGUMENT)
                        die(c, "garbage frame: no INVALID_ARGUMENT");
                sbx__v1__response__free_unpacked(resp, NULL);
                if ((resp = recv_resp(c, fd, &r, 10000)))
                        die(c, "garbage frame: the connection stayed open");
                break;
        case 1: /* a 4 GiB header: TOO_LARGE, then EOF */
                if (send_all(fd, huge, sizeof(huge)) < 0)
                        die(c, "send header");
                resp = recv_resp(c, fd, &r, 10000);
                if (!resp || resp->status->code != SBX__V1__CODE__TOO_LARGE)
                        die(c, "oversized header: no TOO_LARGE");
                sbx__v1__response__free_unpacked(resp, NULL);
                if ((resp = recv_resp(c, fd, &r, 10000)))
                        die(c, "oversized header: the connection stayed open");
                break;
        case 2: /* half a frame, then gone */
                (void)send_all(fd, half, 4 + (size_t)(rand_r(&c->seed) % 10));
                break;
        default: { /* a streamed command that is running when its client vanishes */
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
                char *argv[] = {"sh", "-c", "echo go; sleep 0.1; echo late"};
                req.has_request_id = 1;
                req.request_id = 1;
                rc.sandbox_id = c->home;
                rc.n_argv = 3;
                rc.argv = argv;
                rc.has_timeout_ms = 1;
                rc.timeout_ms = 10000;
                rc.has_stream = 1;
                rc.stream = 1;
                req.body_case = SBX__V1__REQUEST__BODY_RUN_COMMAND;
                req.run_command = &rc;
                send_req(c, fd, &req);
                resp = recv_resp(c, fd, &r, 20000);
                if (!resp || resp->status->code != SBX__V1__CODE__OK)
                        die(c, "vanishing client: its command did not start (%s)",
                            resp && resp->status->message ? resp->status->message : "EOF");
                sbx__v1__response__free_unpacked(resp, NULL);
                break;
        }
        }
        close(fd);
        frame_reader_free(&r);
}

/* Synchronous request on the main connection (nothing else in flight). */
static void sync_request(struct client *c, enum kind k, const char *sandbox) {
        struct pending *s = &slots[0];
        memset(s, 0, sizeof(*s));
        snprintf(s->sandbox, sizeof(s->sandbox), "%s", sandbox);
        start(c, s, k);
        while (s->id)
                read_main(c, 120000);
}

static void client_main(struct client *c, double seconds) {
        double end;
        Sbx__V1__Response *resp;

        c->fd = raw_connect(c->sock);
        if (c->fd < 0)
                die(c, "connect: %s", strerror(errno));
        frame_reader_init(&c->reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        /* Hello, to learn whether file operations are there. */
        {
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__Hello h = SBX__V1__HELLO__INIT;
                size_t i;
                req.has_request_id = 1;
                req.request_id = ++c->next_id;
                h.client_name = "it_load";
                req.body_case = SBX__V1__REQUEST__BODY_HELLO;
                req.hello = &h;
                send_req(c, c->fd, &req);
                resp = recv_resp(c, c->fd, &c->reader, 20000);
                if (!resp || resp->body_case != SBX__V1__RESPONSE__BODY_HELLO)
                        die(c, "no Hello reply");
                for (i = 0; resp->hello->features && i < resp->hello->features->n_implemented; i++)
                        c->files +=
                                strcmp(resp->hello->features->implemented[i], "write_file") == 0 ||
                                strcmp(resp->hello->features->implemented[i], "read_file") == 0;
                /* Without openat2 (an old kernel, or valgrind, which does not know the
                 * call) the daemon refuses file operations, as it says in Hello. */
                c->files = c->files == 2 && resp->hello->features &&
                           resp->hello->features->openat2;
                sbx__v1__response__free_unpacked(resp, NULL);
        }
        snprintf(c->home, sizeof(c->home), "load-%d-home", c->index);
        sync_request(c, K_CREATE, c->home);

        end = it_now_ms() + seconds * 1000;
        while (it_now_ms() < end) {
                struct pending *s;
                unsigned roll;
                while ((s = slot_free()) && it_now_ms() < end) {
                        memset(s, 0, sizeof(*s));
                        snprintf(s->sandbox, sizeof(s->sandbox), "%s", c->home);
                        snprintf(s->token, sizeof(s->token), "tok-%d-%llu-%u", c->index,
                                 (unsigned long long)c->next_id + 1, rand_r(&c->seed));
                        roll = (unsigned)rand_r(&c->seed) % 100;
                        if (roll < 25) {
                                start(c, s, K_EXEC_TRUE);
                        } else if (roll < 40) {
                                start(c, s, K_EXEC_ECHO);
                        } else if (roll < 50) {
                                start(c, s, K_EXEC_STREAM);
                        } else if (roll < 60 && c->files) {
                                snprintf(s->path, sizeof(s->path), "f-%llu.txt",
                                         (unsigned long long)c->next_id + 1);
                                start(c, s, K_WRITE);
                        } else if (roll < 66) {
                                start(c, s, K_LIST);
                        } else if (roll < 72) {
                                start(c, s, K_GET);
                        } else if (roll < 76) {
                                start(c, s, K_SET_TIMEOUT);
                        } else if (roll < 80) {
                                start(c, s, K_HISTORY);
                        } else if (roll < 84) {
                                start(c, s, K_HELLO);
                        } else if (roll < 90 && c->n_extras < MAX_EXTRAS) {
                                snprintf(s->sandbox, sizeof(s->sandbox), "load-%d-x%u", c->index,
                                         c->next_extra++);
                                c->n_extras++;
                                start(c, s, K_CREATE);
                        } else if (roll < 97) {
                                hostile(c, (int)((unsigned)rand_r(&c->seed) % 3));
                        } else {
                                hostile(c, 3);
                        }
                }
                if (in_flight())
                        read_main(c, 120000);
        }
        /* Everything in flight gets its answer (follow-ups included). */
        while (in_flight())
                read_main(c, 120000);
        sync_request(c, K_TERMINATE, c->home);
        close(c->fd);
        frame_reader_free(&c->reader);
}

/* ---- the tests ----------------------------------------------------------------------- */

struct baseline {
        int fds;
        long rss_kib;
};

static void warm_up(struct it_daemon *d, struct baseline *b) {
        sbx_client *c = it_connect(d);
        char *id = it_create(c, "load-warm");
        const char *argv[] = {"echo", "warm", NULL};
        struct sbx_result *r;
        int i;
        for (i = 0; i < 5; i++) {
                r = it_exec(c, id, 30000, argv);
                ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
                sbx_result_free(r);
        }
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        sbx_close(c);
        usleep(200000);
        b->fds = fd_count(d->pid);
        b->rss_kib = it_proc_status(d->pid, "VmRSS");
        ck_assert_int_gt(b->fds, 0);
        ck_assert_int_gt(b->rss_kib, 0);
}

/* Waits (bounded) until the daemon's fd count is at most want; returns the last count. */
static int settle_fds(pid_t pid, int want, int ms) {
        double t0 = it_now_ms();
        int n;
        while ((n = fd_count(pid)) > want && it_now_ms() - t0 < ms)
                usleep(50000);
        return n;
}

START_TEST(mixed_load) {
        int seconds = load_seconds(), clients = load_clients(), i, st, fds, kids, groups, dirs;
        unsigned long lost = 0, commands = 0;
        struct it_daemon d;
        struct baseline b;
        pid_t *pids = calloc((size_t)clients, sizeof(pid_t));
        char log[700], sbdir[700], names[1024];
        /* The warm pool is claimed from and refilled all along (most creates are of the
         * default policy); its sandboxes are the daemon's own and stay. */
        const char *extra[] = {"--log-level", "info", "--warm", "2", "--spares", "2", NULL};
        const int warm = 2 + 2; /* the pool: warm sandboxes and spares, each one process */
        sbx_client *c;
        struct sbx_sandbox_list *l = NULL;
        long rss;
        double t0;

        ck_assert_ptr_nonnull(pids);
        /* The pool counted at the end is ended by no mount of another program's. */
        it_private_mounts();
        it_daemon_start(&d, extra);
        warm_up(&d, &b);
        snprintf(log, sizeof(log), "%s/clients.log", d.dir);

        t0 = it_now_ms();
        for (i = 0; i < clients; i++) {
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        struct client cl;
                        memset(&cl, 0, sizeof(cl));
                        cl.index = i;
                        cl.sock = d.sock;
                        cl.seed = (unsigned)(i * 7919 + getpid());
                        snprintf(cl.log, sizeof(cl.log), "%s", log);
                        client_main(&cl, seconds);
                        {
                                char path[800];
                                FILE *f;
                                snprintf(path, sizeof(path), "%s/client-%d.stats", d.dir, i);
                                f = fopen(path, "we");
                                if (f) {
                                        fprintf(f, "%lu %lu %lu\n", cl.lost_output, cl.commands,
                                                cl.early_output);
                                        fclose(f);
                                }
                        }
                        {
                                FILE *f = fopen(log, "ae");
                                if (f) {
                                        fprintf(f,
                                                "client %d: ok: %lu requests, %lu responses (%lu "
                                                "chunks), %lu commands, %lu hostile connections, "
                                                "%lu streams with output before CommandStarted, "
                                                "%lu outputs lost\n",
                                                i, cl.requests, cl.responses, cl.chunks,
                                                cl.commands, cl.hostile, cl.early_output,
                                                cl.lost_output);
                                        fclose(f);
                                }
                        }
                        _exit(0);
                }
        }
        for (i = 0; i < clients; i++) {
                ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        char cmd[2000];
                        snprintf(cmd, sizeof(cmd), "cat '%s' >&2; tail -n 30 '%s' >&2", log, d.log);
                        (void)!system(cmd);
                        ck_abort_msg("client %d failed (status %d); its reason is above", i, st);
                }
        }
        {
                char cmd[2000];
                snprintf(cmd, sizeof(cmd), "grep -c ': ok:' '%s' >/dev/null && cat '%s' >&2", log,
                         log);
                (void)!system(cmd);
        }
        fprintf(stderr, "it_load: %d clients for %d s: done in %.1f s\n", clients, seconds,
                (it_now_ms() - t0) / 1000);
        for (i = 0; i < clients; i++) {
                char path[800];
                unsigned long nl = 0, n = 0, e = 0;
                FILE *f;
                snprintf(path, sizeof(path), "%s/client-%d.stats", d.dir, i);
                f = fopen(path, "re");
                ck_assert_ptr_nonnull(f);
                ck_assert_int_eq(fscanf(f, "%lu %lu %lu", &nl, &n, &e), 3);
                fclose(f);
                lost += nl;
                commands += n;
        }

        /* Nothing live, nothing left. */
        c = it_connect(&d);
        ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_OK);
        ck_assert_msg(l->n == 0, "%zu sandboxes still live after every client terminated its own",
                      l->n);
        sbx_sandbox_list_free(l);
        sbx_close(c);
        t0 = it_now_ms();
        while ((kids = children_of(d.pid)) > warm && it_now_ms() - t0 < 10000)
                usleep(50000);
        ck_assert_msg(kids <= warm,
                      "%d processes still under the daemon (%d warm sandboxes and spares)", kids,
                      warm);
        groups = cgroup_leftovers(d.state);
        ck_assert_msg(groups == 0, "%d sandbox cgroups left", groups);

        /* Descriptors and memory back near the baseline. */
        fds = settle_fds(d.pid, b.fds + 2, 10000);
        ck_assert_msg(fds <= b.fds + 2, "daemon has %d fds open, %d after warm-up", fds, b.fds);
        rss = it_proc_status(d.pid, "VmRSS");
        ck_assert_msg(rss <= b.rss_kib * 2 + 16 * 1024 + (sanitized(d.pid) ? 320 * 1024 : 0),
                      "daemon RSS %ld KiB, %ld KiB after warm-up", rss, b.rss_kib);
        fprintf(stderr, "it_load: fds %d (baseline %d), RSS %ld KiB (baseline %ld KiB)\n", fds,
                b.fds, rss, b.rss_kib);

        /* A clean stop; then the records. */
        st = it_daemon_stop(&d);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbxd exit status %d", st);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM commands WHERE outcome IS NULL"),
                         0);
        ck_assert_int_gt(it_db_int(&d, "SELECT count(*) FROM commands"), clients);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM sandboxes WHERE state IN "
                                             "('creating','ready','terminating')"),
                         0);
        snprintf(sbdir, sizeof(sbdir), "%s/sandboxes", d.state);
        dirs = dir_entries(sbdir, names, sizeof(names));
        ck_assert_msg(dirs == 0, "%d sandbox directories left in %s: %s", dirs, sbdir, names);
        /* Last, so that everything above is proven first: see output_kept_under_load. */
        ck_assert_msg(lost == 0,
                      "%lu of %lu commands exited 0 but their result holds none of the output "
                      "they wrote",
                      lost, commands);
        free(pids);
}
END_TEST

/* sbx.proto: a streamed RunCommand answers CommandStarted first, then OutputChunks, then
 * the result. The daemon reads the command's pipes as soon as it has sent Start to init,
 * and forwards output without waiting for init's Started: a command that prints at once
 * can have its output on the wire before CommandStarted. */
START_TEST(stream_started_comes_first) {
        enum { RUNS = 100 };
        struct it_daemon d;
        struct client cl;
        int i, early = 0;

        it_daemon_start(&d, NULL);
        memset(&cl, 0, sizeof(cl));
        cl.sock = d.sock;
        snprintf(cl.log, sizeof(cl.log), "%s/client.log", d.dir);
        cl.fd = raw_connect(d.sock);
        ck_assert_int_ge(cl.fd, 0);
        frame_reader_init(&cl.reader, SBX_DEFAULT_MAX_FRAME_BYTES);
        snprintf(cl.home, sizeof(cl.home), "order");
        {
                char *id = NULL;
                sbx_client *c = it_connect(&d);
                id = it_create(c, "order");
                free(id);
                sbx_close(c);
        }
        for (i = 0; i < RUNS; i++) {
                struct pending *s = &slots[0];
                memset(s, 0, sizeof(*s));
                snprintf(s->sandbox, sizeof(s->sandbox), "order");
                snprintf(s->token, sizeof(s->token), "t%d", i);
                start(&cl, s, K_EXEC_STREAM);
                while (s->id)
                        read_main(&cl, 30000);
        }
        early = (int)cl.early_output;
        close(cl.fd);
        frame_reader_free(&cl.reader);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_msg(early == 0,
                      "%d of %d streamed commands had output on the wire before CommandStarted",
                      early, RUNS);
}
END_TEST

/* A command that wrote its output and exited 0 must have that output in its result.
 * Under load the daemon drops it: command.c finishes a command SBX_DRAIN_AFTER_EXIT_MS
 * after init reports the exit (maybe_finish starts the drain timer, on_drained calls
 * finish(), which closes the pipes unread). uv_timer_start counts from the loop time
 * cached at the start of the iteration, and libuv runs due timers before it polls for
 * I/O, so when one iteration of a busy loop takes longer than 50 ms, output already
 * waiting in the pipe is never read. 32 clients running `echo` in 8 sandboxes. */
struct echoer {
        pthread_t thread;
        struct it_daemon *d;
        int index;
        double until_ms;
        unsigned long runs, lost, errors;
        char detail[200];
};

static void *echoer_main(void *arg) {
        struct echoer *e = arg;
        sbx_client *c = NULL;
        char sandbox[32], token[64];
        if (sbx_connect(e->d->sock, "echoer", &c) != SBX_OK) {
                e->errors++;
                sbx_close(c);
                return NULL;
        }
        snprintf(sandbox, sizeof(sandbox), "echo-%d", e->index % 8);
        while (it_now_ms() < e->until_ms) {
                const char *argv[] = {"echo", token, NULL};
                struct sbx_exec_opts o;
                struct sbx_result *r = NULL;
                snprintf(token, sizeof(token), "token-%d-%lu", e->index, e->runs);
                sbx_exec_opts_init(&o);
                o.argv = argv;
                o.argc = 2;
                if (sbx_exec(c, sandbox, &o, &r) != SBX_OK) {
                        e->errors++;
                        snprintf(e->detail, sizeof(e->detail), "%s", sbx_error_message(c));
                        continue;
                }
                e->runs++;
                if (r->outcome != SBX_OUTCOME_EXITED || r->exit_code != 0) {
                        e->errors++;
                        snprintf(e->detail, sizeof(e->detail), "echo ended with outcome %s",
                                 sbx_outcome_name(r->outcome));
                } else if (r->stdout_len != strlen(token) + 1 ||
                           memcmp(r->stdout_data, token, strlen(token)) != 0) {
                        e->lost++;
                        snprintf(e->detail, sizeof(e->detail),
                                 "echo %s: %zu bytes of stdout (%llu produced) after %.3f s", token,
                                 r->stdout_len, (unsigned long long)r->stdout_bytes, r->duration);
                }
                sbx_result_free(r);
        }
        sbx_close(c);
        return NULL;
}

START_TEST(output_kept_under_load) {
        enum { THREADS = 32 };
        struct it_daemon d;
        struct echoer es[THREADS];
        sbx_client *c;
        unsigned long runs = 0, lost = 0, errors = 0;
        const char *detail = "";
        double seconds = load_seconds() < 6 ? load_seconds() : 6;
        int i;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        for (i = 0; i < 8; i++) {
                char id[32];
                snprintf(id, sizeof(id), "echo-%d", i);
                free(it_create(c, id));
        }
        memset(es, 0, sizeof(es));
        for (i = 0; i < THREADS; i++) {
                es[i].d = &d;
                es[i].index = i;
                es[i].until_ms = it_now_ms() + seconds * 1000;
                ck_assert_int_eq(pthread_create(&es[i].thread, NULL, echoer_main, &es[i]), 0);
        }
        for (i = 0; i < THREADS; i++) {
                pthread_join(es[i].thread, NULL);
                runs += es[i].runs;
                lost += es[i].lost;
                errors += es[i].errors;
                if (es[i].detail[0])
                        detail = es[i].detail;
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_msg(errors == 0, "%lu errors, e.g. %s", errors, detail);
        ck_assert_msg(runs > 0, "no command ran");
        ck_assert_msg(lost == 0,
                      "%lu of %lu `echo` commands exited 0 without their output, e.g. %s", lost,
                      runs, detail);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("load");
        TCase *tc = tcase_create("load");
        int seconds = load_seconds(), clients = load_clients();
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        /* The run itself, draining, the checks and a stop of up to 20 s; generous for
         * ASan and for many clients on two cores. */
        tcase_set_timeout(tc, (double)seconds * 2 + 120 + clients * 2);
        tcase_add_test(tc, mixed_load);
        tcase_add_test(tc, stream_started_comes_first);
        tcase_add_test(tc, output_kept_under_load);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
