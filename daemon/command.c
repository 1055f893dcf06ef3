/* command.c: one command in a sandbox, from RunCommand to its one terminal result.
 *
 * The daemon makes the command's pipes and hands the child ends to the sandbox's init
 * (Start over the channel); output flows from the command straight into the daemon.
 * A command with RunCommand.tty gets a pty of its sandbox's devpts instead (devpts.h):
 * the slave goes to init three times, the master is read as stdout and written as
 * stdin, and the end of its input is the terminal's end-of-file character.
 * Each stream keeps at most its cap, and past the cap the tail (outbuf.h), while
 * counting every byte. In stream mode chunks are forwarded as they come and reading
 * pauses while the client's connection is congested. Otherwise output is read when
 * init reports the exit, and the loop watches the pipes only once output piles up in
 * them (SBX_OUTPUT_WATCH_BYTES): that saves the poll registrations and a wakeup per
 * command (a quarter of the daemon's system calls for `true`).
 *
 * A command completes when its leader has exited (init's Exited), never on pipe EOF:
 * after the exit the pipes are drained for SBX_DRAIN_AFTER_EXIT_MS, then closed. A
 * timeout or a cancel sends SIGCONT+SIGKILL to the process group through init, and the
 * result is reported only when init reports the leader reaped; the outcome follows the
 * rules of outcome.h. Every command is recorded in the store when it starts (or some
 * milliseconds later, SBX_RECORD_START_DELAY_MS) and when it ends.
 *
 * When a command may run, and which waiting command starts when a slot frees, is the
 * scheduler's (cmdsched.h): a command asks it for a slot or a place in the queue, gives
 * its slot back when it ends, and is started by it (command_sched_ops) when its turn
 * comes.
 *
 * Owns each command (listed in its sandbox) until its handles are closed. Called by
 * rpc.c (command.h), by the sandbox for what init reports and for its end
 * (sandbox_int.h), and by the scheduler (command_sched_ops); it reaches the sandbox only
 * through the hooks the sandbox gave it, and init through the sandbox's channel
 * (initchan.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bgkept.h"
#include "bounds.h"
#include "cgroup.h"
#include "cmdsched.h"
#include "command.h"
#include "devpts.h"
#include "disk.h"
#include "initchan.h"
#include "log.h"
#include "names.h"
#include "outbuf.h"
#include "outcome.h"
#include "quota.h"
#include "rlimits.h"
#include "sandbox_int.h"
#include "sbimage.h"
#include "sbxd.h"
#include "store.h"

extern char **environ;

/* After a kill, init must report the leader reaped within this long. */
#define COMMAND_KILL_GUARD_MS 5000u
/* While a streaming client is congested, look again this often (its connection also
 * says when it has drained: command_resume_output). */
#define COMMAND_RESUME_POLL_MS 10u
/* Most bytes of stdin queued by CommandInput and not yet taken by the command. */
#define COMMAND_MAX_PENDING_INPUT_BYTES (16u * 1024u * 1024u)
/* Reads of a terminal in a row that may return 0 before it counts as ended (see
 * tty_zero_read). */
#define TTY_ZERO_READS 1000u
/* One read of a command's output: a pipe's default capacity. */
#define OUTPUT_READ_BYTES (64u * 1024u)
/* A streamed chunk at least this long is sent from the buffer it was read into; a
 * shorter one is copied into its frame (cheaper than a buffer of its own). */
#define OUTPUT_TAKE_MIN_BYTES (2u * 1024u)

struct outstream {
        uv_pipe_t pipe;
        int fd; /* the read end (non-blocking), while open is set */
        int open;
        int watched; /* pipe is initialised on fd (and owns it) */
        int reading;
        unsigned zero_reads; /* a terminal's reads in a row that returned 0 (tty_zero_read) */
        struct outbuf kept;  /* the tail kept (and every byte counted) */
        uint8_t *rbuf;       /* stream mode: the next read goes here, to be handed on */
};

struct input_req {
        uv_write_t req;
        struct command *cmd;
        uint8_t *data;
        size_t len;
        struct quota_hold hold; /* len, held for its sender */
        command_input_cb cb;    /* NULL for the stdin given with RunCommand */
        void *ud;
};

struct command {
        struct sandbox *sb;
        struct command *next, *prev; /* sb->commands, once it holds a slot */
        struct cmdsched_entry slot;  /* waiting for a slot or holding one (cmdsched.h) */
        uint64_t queued_hr;          /* when it began to wait */
        uint64_t queued_ms;          /* how long it waited */
        Sbx__V1__RunCommand *req;    /* a queued command's request, until it starts */
        uid_t caller_uid;
        pid_t caller_pid;
        char *client_name;
        int recorded;   /* its start is in the store */
        int overlapped; /* another command of the sandbox ran meanwhile */
        uint64_t num;
        char id[32];
        struct command_callbacks cbs;
        void *ud;
        int requester;  /* cbs and ud may be used (a background command forgets them) */
        int background; /* RunCommand.background */
        int await_ack;  /* background: its requester waits for init's Started */
        struct command_watch *watchers; /* AttachCommand with follow */
        int stream;
        int tty;              /* RunCommand.tty: out[0] is the terminal's master */
        uint8_t in_last_byte; /* tty: the last byte of input, for its end (tty_eof) */
        struct outstream out[2];
        uv_pipe_t in;
        struct quota_hold stdin_hold; /* RunCommand.stdin, held for the caller until written */
        int in_inited;
        int in_eof_wanted;
        size_t in_pending;
        uv_timer_t timer;
        uv_timer_t drain; /* also the next look at the output (on_watch_due) */
        unsigned watch_delay_ms;
        int started, exited, start_failed, finished;
        int wait_status;
        int64_t utime_usec, stime_usec, maxrss_kib;
        enum command_kill kill;
        int start_errno;
        char *start_error;
        uint64_t start_hr;
        int64_t started_ms;
        uint64_t timeout_ms;
        uint64_t oom_before, pids_before; /* sandbox group + command group */
        struct cgroup *cg;                /* the command's own group, below the sandbox's */
        double cpu_limit;
        char **argv;
        size_t argc;
        char *cwd;
        int handles;
};

static void finish(struct command *cmd);
static void record_start(struct command *cmd);

/* ---- helpers ------------------------------------------------------------------------ */

static void list_remove(struct command *cmd) {
        struct sandbox *sb = cmd->sb;
        if (cmd->prev)
                cmd->prev->next = cmd->next;
        else if (sb->commands == cmd)
                sb->commands = cmd->next;
        if (cmd->next)
                cmd->next->prev = cmd->prev;
        cmd->next = cmd->prev = NULL;
}

static struct command *find(struct sandbox *sb, uint64_t num) {
        struct command *c;
        for (c = sb->commands; c; c = c->next)
                if (c->num == num)
                        return c;
        return NULL;
}

static struct command *of_entry(struct cmdq_entry *e) {
        return (struct command *)((char *)e - offsetof(struct command, slot.wait));
}

struct command *command_find(struct sandbox *sb, const char *command_id) {
        const char *id = command_id ? command_id : "";
        struct cmdq_entry *e;
        struct command *c;

        for (c = sb->commands; c; c = c->next)
                if (!c->finished && strcmp(c->id, id) == 0)
                        return c;
        for (e = sb->sched.queue.head; e; e = e->next)
                if (strcmp(of_entry(e)->id, id) == 0)
                        return of_entry(e);
        return NULL;
}

const char *command_id(const struct command *cmd) {
        return cmd->id;
}

static void command_free(struct command *cmd) {
        size_t i;
        struct sandbox *sb = cmd->sb;
        for (i = 0; i < 2; i++) {
                outbuf_free(&cmd->out[i].kept);
                free(cmd->out[i].rbuf);
        }
        if (cmd->cg) {
                /* Empty unless a detached process lives on; then the sandbox's end
                 * removes the directory with the rest of its tree. */
                (void)cgroup_destroy(cmd->cg);
        }
        for (i = 0; i < cmd->argc; i++)
                free(cmd->argv[i]);
        free(cmd->argv);
        free(cmd->cwd);
        free(cmd->client_name);
        free(cmd->start_error);
        if (cmd->req)
                sbx__v1__run_command__free_unpacked(cmd->req, NULL);
        (void)quota_hold_to(&cmd->stdin_hold, 0);
        free(cmd);
        sb->hooks->release(sb); /* the command held the sandbox */
}

static void on_closed(uv_handle_t *h) {
        struct command *cmd = h->data;
        if (--cmd->handles == 0)
                command_free(cmd);
}

static void close_handle(struct command *cmd, uv_handle_t *h) {
        if (!uv_is_closing(h))
                uv_close(h, on_closed);
}

/* ---- output ------------------------------------------------------------------------- */

/* A streamed command's output is read into a buffer of its own that is then sent as
 * it is (cbs.output, taken): copying each chunk once more into its frame was 7% of the
 * daemon's CPU relaying 2 GiB. Other output is kept (copied) from one shared slab. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        static char slab[OUTPUT_READ_BYTES];
        struct command *cmd = h->data;
        struct outstream *o = (uv_pipe_t *)h == &cmd->out[0].pipe ? &cmd->out[0] : &cmd->out[1];

        (void)suggested;
        if (cmd->stream && !o->rbuf)
                o->rbuf = malloc(OUTPUT_READ_BYTES);
        buf->base = o->rbuf && cmd->stream ? (char *)o->rbuf : slab;
        buf->len = OUTPUT_READ_BYTES;
}

static void maybe_finish(struct command *cmd);
static void update_stream_reading(struct command *cmd);

static void stream_closed(struct command *cmd, int idx) {
        struct outstream *o = &cmd->out[idx];
        if (!o->open)
                return;
        o->open = 0;
        o->reading = 0;
        if (o->watched) {
                o->watched = 0;
                close_handle(cmd, (uv_handle_t *)&o->pipe);
        } else {
                close(o->fd);
        }
        o->fd = -1;
}

/* Puts stream idx's pipe on the loop (not reading yet). 0 or -errno. */
static int watch_stream(struct command *cmd, int idx) {
        struct outstream *o = &cmd->out[idx];
        int r;

        if (!o->open || o->watched)
                return 0;
        r = uv_pipe_init(cmd->sb->d->loop, &o->pipe, 0);
        if (r < 0)
                return r;
        o->pipe.data = cmd;
        cmd->handles++;
        r = uv_pipe_open(&o->pipe, o->fd);
        if (r < 0) {
                /* The handle is on the loop now: it must be closed; fd stays ours. */
                close_handle(cmd, (uv_handle_t *)&o->pipe);
                return r;
        }
        o->watched = 1;
        return 0;
}

/* Takes n bytes of output of stream idx: forwarded (stream mode) or kept (the tail). */
static void take_output(struct command *cmd, int idx, uint8_t *data, size_t n) {
        struct outstream *o = &cmd->out[idx];
        Sbx__V1__Stream stream = idx == 0 ? SBX__V1__STREAM__STDOUT : SBX__V1__STREAM__STDERR;
        uint64_t off = o->kept.total;
        struct command_watch *w, *next;

        for (w = cmd->watchers; w; w = next) {
                next = w->next;
                w->ops->output(w, stream, off, data, n);
        }
        if (!cmd->stream) {
                outbuf_take(&o->kept, data, n);
                return;
        }
        (void)outbuf_count(&o->kept, n);
        if (data == o->rbuf && n >= OUTPUT_TAKE_MIN_BYTES) {
                /* Handed on with its buffer; a short one gives back the room it does not
                 * use (queued output is counted by its length). */
                uint8_t *taken = o->rbuf, *shrunk;
                o->rbuf = NULL;
                if (n < OUTPUT_READ_BYTES / 2 && (shrunk = realloc(taken, n)))
                        taken = shrunk;
                cmd->cbs.output(cmd->ud, cmd->id, stream, off, taken, n, 1);
                return;
        }
        cmd->cbs.output(cmd->ud, cmd->id, stream, off, data, n, 0);
}

/* A pty master's read returns 0 for a moment after the last slave closed while bytes
 * are still on their way through the line discipline (seen on Linux 6.18: they are
 * read right after); its end is EIO. So a 0 from a terminal is not its end: reading
 * goes on (libuv stopped at what it took for an end of file), up to TTY_ZERO_READS in
 * a row (a kernel whose 0 is an end of file after all). Returns 1 when the stream
 * stays open. */
static int tty_zero_read(struct command *cmd, int idx) {
        struct outstream *o = &cmd->out[idx];

        if (!cmd->tty || !o->watched || ++o->zero_reads > TTY_ZERO_READS)
                return 0;
        o->reading = 0;
        update_stream_reading(cmd);
        return 1;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct command *cmd = s->data;
        int idx = (uv_pipe_t *)s == &cmd->out[0].pipe ? 0 : 1;

        if (nread == UV_EOF && tty_zero_read(cmd, idx))
                return;
        if (nread > 0)
                cmd->out[idx].zero_reads = 0;
        if (nread < 0) {
                stream_closed(cmd, idx);
                maybe_finish(cmd);
                return;
        }
        if (nread == 0 || cmd->finished)
                return;
        take_output(cmd, idx, (uint8_t *)buf->base, (size_t)nread);
        if (cmd->stream && cmd->cbs.congested(cmd->ud))
                update_stream_reading(cmd);
}

/* Reads what the pipes hold right now, without waiting: the last output before they
 * are closed (the loop may not have polled them since the leader exited). A stream at
 * its end, or failing, is closed. Bounded, so it cannot stall the loop. A terminal gives
 * at most one line discipline buffer (4 KiB, often less) per read while the kernel may
 * still hold 64 KiB more in its flip buffers: it gets more rounds. */
static void drain_now(struct command *cmd) {
        static uint8_t buf[64 * 1024];
        int i;
        for (i = 0; i < 2; i++) {
                int rounds = cmd->tty ? 1024 : 64;
                while (cmd->out[i].open && rounds-- > 0) {
                        ssize_t n = read(cmd->out[i].fd, buf, sizeof(buf));
                        if (n > 0) {
                                take_output(cmd, i, buf, (size_t)n);
                                continue;
                        }
                        if ((n < 0 && errno == EINTR) || (n == 0 && cmd->tty))
                                continue; /* a terminal's end is EIO (tty_zero_read) */
                        if (n < 0 && errno == EAGAIN)
                                break;         /* empty now; a background process holds it */
                        stream_closed(cmd, i); /* end of stream */
                }
        }
}

static void on_resume_poll(uv_timer_t *t);

/* Starts or stops reading the pipes: stream mode pauses while the client is congested. */
static void update_stream_reading(struct command *cmd) {
        int i;
        int want = !(cmd->stream && cmd->cbs.congested(cmd->ud));
        for (i = 0; i < 2; i++) {
                struct outstream *o = &cmd->out[i];
                if (!o->watched)
                        continue;
                if (want && !o->reading) {
                        if (uv_read_start((uv_stream_t *)&o->pipe, on_alloc, on_read) == 0)
                                o->reading = 1;
                } else if (!want && o->reading) {
                        uv_read_stop((uv_stream_t *)&o->pipe);
                        o->reading = 0;
                }
        }
        if (!want && !cmd->exited)
                uv_timer_start(&cmd->drain, on_resume_poll, COMMAND_RESUME_POLL_MS, 0);
}

static void on_resume_poll(uv_timer_t *t) {
        struct command *cmd = t->data;
        if (!cmd->exited)
                update_stream_reading(cmd);
}

/* Puts the open pipes on the loop and reads them. A pipe that cannot be watched (out
 * of memory) is closed: the command then gets EPIPE writing it, and the result says
 * how much was read. */
static void watch_output(struct command *cmd) {
        int i;
        for (i = 0; i < 2; i++) {
                int r = watch_stream(cmd, i);
                if (r < 0) {
                        log_err("sbx=%s cmd=%s: cannot watch its output: %s", cmd->sb->id, cmd->id,
                                uv_strerror(r));
                        stream_closed(cmd, i);
                }
        }
        update_stream_reading(cmd);
}

/* Whether a pipe not yet watched holds SBX_OUTPUT_WATCH_BYTES: its writer may soon
 * wait for room. */
static int output_piling_up(const struct command *cmd) {
        int i, n;
        for (i = 0; i < 2; i++) {
                const struct outstream *o = &cmd->out[i];
                if (o->open && !o->watched &&
                    (ioctl(o->fd, FIONREAD, &n) < 0 || n >= (int)SBX_OUTPUT_WATCH_BYTES))
                        return 1;
        }
        return 0;
}

/* A look at a running command's output (see SBX_OUTPUT_WATCH_BYTES). Timers run
 * before the loop reads what arrived during a long turn: an exit report may be
 * waiting, and is read first. */
static void on_watch_due(uv_timer_t *t) {
        struct command *cmd = t->data;
        uint64_t ran_ns;
        int piling;

        if (!cmd->exited && !cmd->finished)
                initchan_take_pending(&cmd->sb->chan);
        if (cmd->exited || cmd->finished)
                return;
        piling = output_piling_up(cmd);
        ran_ns = uv_hrtime() - cmd->start_hr;
        /* Running for SBX_RECORD_START_DELAY_MS, or its pipes watched from now on (there
         * is no later look): its start is recorded now. */
        if (piling || ran_ns >= (uint64_t)SBX_RECORD_START_DELAY_MS * 1000000u)
                record_start(cmd);
        if (piling) {
                watch_output(cmd);
                return;
        }
        if (cmd->watch_delay_ms < SBX_OUTPUT_WATCH_MAX_DELAY_MS)
                cmd->watch_delay_ms *= 2;
        uv_timer_start(&cmd->drain, on_watch_due, cmd->watch_delay_ms, 0);
}

/* ---- completion --------------------------------------------------------------------- */

/* OOM kills and refused forks so far: in the command's own group where it has one
 * (where the event happened: v1's pids.events, v2's pids.events.local and
 * memory.events), else in the sandbox's. */
static void count_events(const struct command *cmd, uint64_t *ret_oom, uint64_t *ret_pids) {
        /* A command with a group of its own is counted there alone: the sandbox's group
         * also counts its neighbours. */
        struct cgroup *groups[2] = {cmd->cg ? NULL : cmd->sb->cg, cmd->cg};
        int i;
        int memory = cmd->sb->cg_enforced & (1 << CG_MEMORY),
            pids = cmd->sb->cg_enforced & (1 << CG_PIDS);
        *ret_oom = *ret_pids = 0;
        /* Only a limit that holds can be hit: spare the other reads. */
        for (i = 0; i < 2; i++) {
                uint64_t v;
                if (!groups[i])
                        continue;
                if (memory && cgroup_oom_kills(groups[i], &v) == 0)
                        *ret_oom += v;
                if (pids && cgroup_pids_max_events(groups[i], &v) == 0)
                        *ret_pids += v;
        }
}

/* The start fields of cmd's record. */
static void start_fields(const struct command *cmd, struct store_command *sc) {
        memset(sc, 0, sizeof(*sc));
        sc->sandbox_id = cmd->sb->id;
        sc->command_id = cmd->id;
        sc->argv = (const char *const *)cmd->argv;
        sc->argc = cmd->argc;
        sc->cwd = cmd->cwd;
        sc->caller_uid = cmd->caller_uid;
        sc->caller_pid = cmd->caller_pid;
        sc->client_name = cmd->client_name;
        /* One that never started: when it left the queue. */
        sc->started_ms = cmd->slot.queued ? sbxd_now_unix_ms() : cmd->started_ms;
        sc->seq = cmd->num;
        sc->queued_ms = cmd->queued_ms;
        sc->background = cmd->background;
        sc->tty = cmd->tty;
}

/* Writes the record of cmd's start (it joins the batch, committed before any reply or
 * within SBX_RECORD_BATCH_MS). A command that ends before this is called is recorded
 * whole by finish(), in one statement instead of two. */
static void record_start(struct command *cmd) {
        struct store *st = cmd->sb->d->store;
        struct store_command sc;

        if (cmd->recorded)
                return;
        cmd->recorded = 1;
        start_fields(cmd, &sc);
        if (store_command_insert(st, &sc) < 0)
                log_err("sbx=%s cmd=%s: cannot record it: %s", cmd->sb->id, cmd->id,
                        store_last_error(st));
}

/* The result of a command and what it points to, while it is delivered. */
struct result {
        Sbx__V1__CommandResult res;
        Sbx__V1__ResourceReport rr;
        Sbx__V1__LimitEnforcement enf[LIM_N];
        Sbx__V1__LimitEnforcement *enf_ptrs[LIM_N];
        struct outcome oc;
        double cpu_seconds;
        uint8_t *out_data[2]; /* the kept output, malloc()ed */
        char **warnings;  /* the sandbox's and the command's own, malloc()ed (not the strings) */
        char cut[2][300]; /* why a stream's kept output was cut short (the budget) */
};

/* What is known of cmd now, for outcome_classify. */
static void gather_facts(const struct command *cmd, double cpu, struct outcome_facts *f) {
        const Sbx__V1__Limits *l = cmd->sb->spec->policy->limits;
        uint64_t now_oom = 0, now_pids = 0;

        memset(f, 0, sizeof(*f));
        f->kill = cmd->kill;
        if (cmd->slot.queued) {
                f->never_started = 1;
                return;
        }
        count_events(cmd, &now_oom, &now_pids);
        f->start_failed = cmd->start_failed;
        f->exited = cmd->exited;
        f->wait_status = cmd->wait_status;
        f->oom_killed = now_oom > cmd->oom_before;
        /* The sandbox's counters count every command: a refused fork is this command's
         * only if nothing else ran meanwhile (or its own group counted it). */
        f->forks_refused = now_pids > cmd->pids_before && (!cmd->overlapped || cmd->cg);
        f->output_truncated = cmd->out[0].kept.truncated || cmd->out[1].kept.truncated;
        f->cpu_seconds = cpu;
        f->has_cpu_limit = l && l->has_cpu_seconds;
        f->cpu_limit = cmd->cpu_limit;
        f->has_file_size_limit = l && l->has_file_size_bytes;
        f->disk_full = l && l->has_disk_bytes && cmd->sb->view.root_fd >= 0 &&
                       disk_full(cmd->sb->view.root_fd) == 1;
}

/* The outcome and the output of r's result. */
/* The result's warnings: the sandbox's, and a stream's kept output cut short by its
 * caller's budget (the tail is kept, up to what the stream had when it was refused). */
static void fill_warnings(const struct command *cmd, struct result *r) {
        struct sandbox *sb = cmd->sb;
        size_t n = sb->n_warnings, i;

        r->res.n_warnings = sb->n_warnings;
        r->res.warnings = sb->warnings;
        for (i = 0; i < 2; i++) {
                const struct outbuf *o = &cmd->out[i].kept;
                char why[200];
                if (!o->refused)
                        continue;
                quota_explain_buffered(&sb->d->buffered, cmd->caller_uid, o->refused, why,
                                       sizeof(why));
                snprintf(r->cut[i], sizeof(r->cut[i]), "%s: only the last %zu bytes were kept: %s",
                         i ? "stderr" : "stdout", o->len, why);
        }
        if (!r->cut[0][0] && !r->cut[1][0])
                return;
        r->warnings = calloc(n + 2, sizeof(char *));
        if (!r->warnings)
                return;
        if (n)
                memcpy(r->warnings, sb->warnings, n * sizeof(char *));
        for (i = 0; i < 2; i++)
                if (r->cut[i][0])
                        r->warnings[n++] = r->cut[i];
        r->res.n_warnings = n;
        r->res.warnings = r->warnings;
}

static void fill_result(struct command *cmd, struct result *r) {
        Sbx__V1__CommandResult *res = &r->res;
        struct sandbox *sb = cmd->sb;
        size_t len[2] = {0, 0};
        int i;

        res->command_id = cmd->id;
        res->sandbox_id = sb->id;
        res->has_outcome = 1;
        res->outcome = r->oc.outcome;
        if (cmd->start_failed) {
                res->start_error = cmd->start_error;
                res->has_start_errno = 1;
                res->start_errno = cmd->start_errno;
        }
        res->has_exit_code = r->oc.has_exit_code;
        res->exit_code = r->oc.exit_code;
        res->has_signal = r->oc.has_signal;
        res->signal = r->oc.signal;
        res->has_timed_out = 1;
        res->timed_out = res->outcome == SBX__V1__OUTCOME__TIMED_OUT;
        for (i = 0; i < 2; i++)
                if (!cmd->stream)
                        r->out_data[i] = outbuf_bytes(&cmd->out[i].kept, &len[i]);
        res->has_stdout = res->has_stderr = 1;
        res->stdout.data = r->out_data[0];
        res->stdout.len = len[0];
        res->stderr.data = r->out_data[1];
        res->stderr.len = len[1];
        res->has_stdout_truncated = res->has_stderr_truncated = 1;
        res->stdout_truncated = cmd->out[0].kept.truncated;
        res->stderr_truncated = cmd->out[1].kept.truncated;
        res->has_stdout_bytes = res->has_stderr_bytes = 1;
        res->stdout_bytes = cmd->out[0].kept.total;
        res->stderr_bytes = cmd->out[1].kept.total;
        res->has_duration = 1;
        res->duration = cmd->slot.queued ? 0 : (double)(uv_hrtime() - cmd->start_hr) / 1e9;
        res->has_queued_ms = 1;
        res->queued_ms = cmd->queued_ms;
        res->has_timeout_ms = 1;
        res->timeout_ms = cmd->timeout_ms;
        res->has_isolated = 1;
        res->isolated = sb->isolated;
        fill_warnings(cmd, r);
        res->has_owner_uid = 1;
        res->owner_uid = sb->owner_uid;
}

/* The resource report of r's result: cpu, peak memory, limits hit, enforcement. */
static void fill_resources(struct command *cmd, struct result *r) {
        Sbx__V1__ResourceReport *rr = &r->rr;
        struct sandbox *sb = cmd->sb;
        uint64_t peak;

        rr->has_cpu_seconds = 1;
        rr->cpu_seconds = r->cpu_seconds;
        rr->has_peak_memory_bytes = 1;
        rr->peak_memory_bytes = (uint64_t)cmd->maxrss_kib * 1024u;
        rr->peak_memory_source = (char *)"rusage";
        if (cmd->cg && cgroup_peak_memory(cmd->cg, &peak) == 0 && peak > 0) {
                rr->peak_memory_bytes = peak;
                rr->peak_memory_source = sb->d->cgroups->version == CGROUP_V2 ? (char *)"cgroup_v2"
                                                                              : (char *)"cgroup_v1";
        }
        rr->n_limits_hit = r->oc.n_hits;
        rr->limits_hit = r->oc.hits;
        rr->n_enforcement = enforce_report(sb->enforcement, r->enf, r->enf_ptrs);
        rr->enforcement = r->enf_ptrs;
        r->res.resources = rr;
}

/* Writes cmd's end into the records: the whole command when its start was not written
 * yet, else its end. */
static void record_end(struct command *cmd, const struct result *r) {
        struct store *st = cmd->sb->d->store;
        char hits[128];
        struct store_command sc;

        outcome_hits_text(&r->oc, hits, sizeof(hits));
        start_fields(cmd, &sc);
        sc.ended_ms = sbxd_now_unix_ms();
        sc.outcome = names_outcome(r->res.outcome);
        sc.has_exit_code = r->res.has_exit_code;
        sc.exit_code = r->res.exit_code;
        sc.has_signal = r->res.has_signal;
        sc.signal = r->res.signal;
        sc.duration = r->res.duration;
        sc.cpu_seconds = r->cpu_seconds;
        sc.peak_memory_bytes = r->rr.peak_memory_bytes;
        sc.stdout_bytes = r->res.stdout_bytes;
        sc.stderr_bytes = r->res.stderr_bytes;
        sc.stdout_truncated = r->res.stdout_truncated;
        sc.stderr_truncated = r->res.stderr_truncated;
        sc.limits_hit = hits;
        sc.start_error = cmd->start_error;
        if ((cmd->recorded ? store_command_finish(st, &sc) : store_command_insert_ended(st, &sc)) <
            0)
                log_err("sbx=%s cmd=%s: cannot record its result: %s", cmd->sb->id, cmd->id,
                        store_last_error(st));
        log_debug("sbx=%s cmd=%s: %s", cmd->sb->id, cmd->id, sc.outcome);
}

/* An ended background command stays attachable (bgkept.h): its result, with the output
 * it kept, and what SandboxInfo.commands says of it. */
static void keep_ended(struct command *cmd, const struct result *r) {
        const struct quota_bound *b = &cmd->sb->d->buffered;
        Sbx__V1__CommandResult bare;
        struct bgkept_entry e;
        char why[200], **warnings;
        int k;

        memset(&e, 0, sizeof(e));
        e.num = cmd->num;
        snprintf(e.id, sizeof(e.id), "%s", cmd->id);
        e.caller_uid = cmd->caller_uid;
        e.started_ms = cmd->started_ms;
        e.ended_ms = sbxd_now_unix_ms();
        e.outcome = r->res.outcome;
        e.has_exit_code = r->res.has_exit_code;
        e.exit_code = r->res.exit_code;
        e.tty = cmd->tty;
        k = bgkept_add(&cmd->sb->bg_ended, &e, (const char *const *)cmd->argv, cmd->argc, &r->res,
                       b);
        if (k == -EDQUOT || k == -ENOSPC) {
                /* Over its caller's budget: kept without its output, saying so. */
                bare = r->res;
                bare.stdout.len = bare.stderr.len = 0;
                bare.stdout_truncated = bare.stdout_bytes > 0;
                bare.stderr_truncated = bare.stderr_bytes > 0;
                quota_explain_buffered(b, cmd->caller_uid, k, why, sizeof(why));
                warnings = calloc(bare.n_warnings + 1, sizeof(char *));
                k = -ENOMEM;
                if (warnings) {
                        if (bare.n_warnings)
                                memcpy(warnings, bare.warnings,
                                       bare.n_warnings * sizeof(char *));
                        warnings[bare.n_warnings++] = why;
                        bare.warnings = warnings;
                        k = bgkept_add(&cmd->sb->bg_ended, &e, (const char *const *)cmd->argv,
                                       cmd->argc, &bare, NULL);
                        free(warnings);
                }
        }
        if (k < 0)
                log_err("sbx=%s cmd=%s: out of memory keeping its result; it cannot be "
                        "attached to",
                        cmd->sb->id, cmd->id);
}

/* The attachers of cmd hear its result, each unlinked first. */
static void tell_watchers(struct command *cmd, Sbx__V1__CommandResult *res) {
        while (cmd->watchers) {
                struct command_watch *w = cmd->watchers;
                command_watch_remove(cmd, w);
                w->ops->done(w, res);
        }
}

/* cmd leaves its sandbox: no longer running or waiting, no longer counted, no longer
 * findable. */
static void unlink_command(struct command *cmd) {
        (void)cmdsched_leave(cmd->sb->d->sched, &cmd->slot);
        list_remove(cmd);
}

/* Closes what cmd still has open; it frees itself once its handles are closed. */
static void close_all(struct command *cmd) {
        stream_closed(cmd, 0);
        stream_closed(cmd, 1);
        if (cmd->in_inited) {
                cmd->in_inited = 0;
                close_handle(cmd, (uv_handle_t *)&cmd->in);
        }
        close_handle(cmd, (uv_handle_t *)&cmd->timer);
        close_handle(cmd, (uv_handle_t *)&cmd->drain);
}

/* The end of cmd, once: classify the outcome, fill the result and its resources, record
 * the end, answer, and let go. */
static void finish(struct command *cmd) {
        struct sandbox *sb = cmd->sb;
        int freed_slot = cmd->slot.holds_slot;
        struct outcome_facts f;
        struct result r;

        if (cmd->finished)
                return;
        cmd->finished = 1;
        uv_timer_stop(&cmd->timer);
        uv_timer_stop(&cmd->drain);
        if (cmd->slot.queued)
                cmd->queued_ms = (uv_hrtime() - cmd->queued_hr) / 1000000u;

        memset(&r, 0, sizeof(r));
        sbx__v1__command_result__init(&r.res);
        sbx__v1__resource_report__init(&r.rr);
        r.cpu_seconds = (double)(cmd->utime_usec + cmd->stime_usec) / 1e6;
        gather_facts(cmd, r.cpu_seconds, &f);
        outcome_classify(&f, &r.oc);
        fill_result(cmd, &r);
        fill_resources(cmd, &r);
        record_end(cmd, &r);
        /* The result has its copy of the kept output: the streams' memory goes back
         * before a background command's result is held for its caller instead. */
        outbuf_free(&cmd->out[0].kept);
        outbuf_free(&cmd->out[1].kept);
        if (cmd->background)
                keep_ended(cmd, &r);

        unlink_command(cmd);
        if (cmd->requester)
                cmd->cbs.done(cmd->ud, &r.res);
        tell_watchers(cmd, &r.res);
        free(r.out_data[0]);
        free(r.out_data[1]);
        free(r.warnings);
        close_all(cmd);
        /* Its slot, and one of its caller's quota, may start a waiting command (of this
         * sandbox, or of its caller in another). */
        if (freed_slot)
                cmdsched_slot_freed(sb->d->sched);
        if (sb->sched.n_running == 0)
                sb->hooks->idle(sb);
}

static void on_drained(uv_timer_t *t) {
        struct command *cmd = t->data;
        drain_now(cmd);
        finish(cmd);
}

/* Finishes once the leader is gone and the pipes are drained (or the drain time is up). */
static void maybe_finish(struct command *cmd) {
        if (cmd->finished || !(cmd->exited || cmd->start_failed))
                return;
        /* What the pipes hold now; at their end they close. (A streamed command's pipes
         * are on the loop, which reads them as its client makes room.) */
        if (!cmd->stream)
                drain_now(cmd);
        if (!cmd->out[0].open && !cmd->out[1].open) {
                finish(cmd);
                return;
        }
        /* Output still open: a background child holds it. Drain briefly, then close. */
        watch_output(cmd);
        if (!uv_is_active((uv_handle_t *)&cmd->drain) || cmd->drain.timer_cb != on_drained) {
                uv_update_time(cmd->sb->d->loop);
                uv_timer_start(&cmd->drain, on_drained, SBX_DRAIN_AFTER_EXIT_MS, 0);
        }
}

/* ---- events from init --------------------------------------------------------------- */

static void send_kill(struct command *cmd);
static void on_timeout(uv_timer_t *t);

void command_on_start_failed(struct sandbox *sb, uint64_t num, int err, const char *msg) {
        struct command *cmd = find(sb, num);
        if (!cmd || cmd->start_failed || cmd->exited) {
                log_warning("sbx=%s: init reported an unknown command %llu failed", sb->id,
                            (unsigned long long)num);
                return;
        }
        cmd->start_failed = 1;
        cmd->start_errno = err;
        cmd->start_error = strdup(msg ? msg : strerror(err));
        maybe_finish(cmd);
}

void command_on_exited(struct sandbox *sb, const Sbx__Init__V1__Exited *ex) {
        struct command *cmd = find(sb, ex->command_id);
        if (!cmd || !cmd->started || cmd->exited) {
                log_warning("sbx=%s: init reported an unknown command %llu exited", sb->id,
                            (unsigned long long)ex->command_id);
                return;
        }
        cmd->exited = 1;
        cmd->wait_status = ex->wait_status;
        cmd->utime_usec = ex->utime_usec > 0 ? ex->utime_usec : 0;
        cmd->stime_usec = ex->stime_usec > 0 ? ex->stime_usec : 0;
        cmd->maxrss_kib = ex->maxrss_kib > 0 ? ex->maxrss_kib : 0;
        uv_timer_stop(&cmd->timer);
        maybe_finish(cmd);
}

void command_end_all(struct sandbox *sb, int unknown) {
        /* The waiting first: a slot the running free must not start them. When the
         * daemon leaves the sandbox to the next one (unknown), they never ran and never
         * will: cancelled, not ended with a sandbox that lives on. */
        while (sb->sched.queue.head) {
                struct command *cmd = of_entry(sb->sched.queue.head);
                cmd->kill = unknown ? KILL_CANCEL : KILL_SANDBOX_ENDED;
                finish(cmd);
        }
        while (sb->commands) {
                struct command *cmd = sb->commands;
                /* One that had already exited (or failed to start) keeps its outcome. */
                if (!cmd->exited && !cmd->start_failed)
                        cmd->kill = unknown ? KILL_DAEMON_LEFT : KILL_SANDBOX_ENDED;
                drain_now(cmd);
                finish(cmd);
        }
        /* Attachable until the sandbox ends. */
        bgkept_clear(&sb->bg_ended);
}

void command_on_started(struct sandbox *sb, uint64_t num) {
        struct command *cmd = find(sb, num);

        /* Only a background command's Start asks for it; an older init answers every
         * Start (init.proto): nothing to do. */
        if (!cmd || !cmd->await_ack)
                return;
        cmd->await_ack = 0;
        if (cmd->requester && cmd->cbs.started) {
                cmd->cbs.started(cmd->ud, cmd->id);
                cmd->requester = 0;
        }
}

/* ---- kills -------------------------------------------------------------------------- */

static void send_kill(struct command *cmd) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Signal s = SBX__INIT__V1__SIGNAL__INIT;
        s.has_command_id = s.has_signal = s.has_cont = 1;
        s.command_id = cmd->num;
        s.signal = SIGKILL;
        s.cont = 1;
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_SIGNAL;
        msg.signal = &s;
        initchan_send(&cmd->sb->chan, &msg, NULL, 0);
        /* And every process the command started that is still in its own cgroup,
         * including ones that left its process group. */
        if (cmd->cg)
                cgroup_kill(cmd->cg);
}

static void on_timeout(uv_timer_t *t) {
        struct command *cmd = t->data;
        if (cmd->kill == KILL_NONE) {
                cmd->kill = KILL_TIMEOUT;
                log_debug("sbx=%s cmd=%s: timed out after %llu ms; killing", cmd->sb->id, cmd->id,
                          (unsigned long long)cmd->timeout_ms);
                send_kill(cmd);
                uv_timer_start(&cmd->timer, on_timeout, COMMAND_KILL_GUARD_MS, 0);
                return;
        }
        /* init did not report the leader reaped after the kill: it is not doing its job. */
        log_err("sbx=%s cmd=%s: init did not reap the command %u ms after SIGKILL; ending the "
                "sandbox",
                cmd->sb->id, cmd->id, COMMAND_KILL_GUARD_MS);
        cmd->sb->hooks->fail(cmd->sb, "failed: init did not stop a command");
}

void command_cancel(struct command *cmd) {
        if (cmd->slot.queued) {
                /* It never starts: its result now. */
                cmd->kill = KILL_CANCEL;
                finish(cmd);
                return;
        }
        if (cmd->finished || cmd->kill != KILL_NONE || cmd->exited || cmd->start_failed)
                return;
        cmd->kill = KILL_CANCEL;
        /* Not started: its Start never reached init (the sandbox is failing). */
        if (cmd->started) {
                send_kill(cmd);
                uv_timer_start(&cmd->timer, on_timeout, COMMAND_KILL_GUARD_MS, 0);
        }
}

int command_signal_allowed(int signo) {
        switch (signo) {
        case SIGHUP:
        case SIGINT:
        case SIGQUIT:
        case SIGKILL:
        case SIGUSR1:
        case SIGUSR2:
        case SIGTERM:
                return 1;
        default:
                return 0;
        }
}

int command_signal(struct command *cmd, int signo) {
        Sbx__Init__V1__ToInit msg = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Signal s = SBX__INIT__V1__SIGNAL__INIT;

        if (!command_signal_allowed(signo) || signo == SIGKILL)
                return -EINVAL;
        if (cmd->finished)
                return -ENOENT;
        /* Exited (its group may live on: it is no longer the command's), never started
         * (its Start did not reach init), or being killed already: nothing to do. */
        if (!cmd->started || cmd->exited || cmd->start_failed || cmd->kill != KILL_NONE)
                return 0;
        /* No SIGCONT first: a forwarded signal does what it would do outside, and a kill
         * (the escalation) continues the group itself. init handles this after the
         * command's Start, and only while the leader is not reaped (init.proto). */
        s.has_command_id = s.has_signal = 1;
        s.command_id = cmd->num;
        s.signal = signo;
        msg.body_case = SBX__INIT__V1__TO_INIT__BODY_SIGNAL;
        msg.signal = &s;
        log_debug("sbx=%s cmd=%s: forwarding signal %d", cmd->sb->id, cmd->id, signo);
        /* A failed send ends the sandbox, which ends the command: nothing to report. */
        (void)initchan_send(&cmd->sb->chan, &msg, NULL, 0);
        return 0;
}

void command_record_running(struct sandbox *sb) {
        struct command *cmd;
        for (cmd = sb->commands; cmd; cmd = cmd->next)
                if (!cmd->finished && !cmd->start_failed)
                        record_start(cmd);
}

void command_resume_output(struct command *cmd) {
        if (!cmd->finished && cmd->stream && !cmd->exited)
                update_stream_reading(cmd);
}

/* ---- stdin -------------------------------------------------------------------------- */

static void close_stdin(struct command *cmd) {
        if (cmd->in_inited) {
                cmd->in_inited = 0;
                close_handle(cmd, (uv_handle_t *)&cmd->in);
        }
}

static void on_input_written(uv_write_t *req, int status) {
        struct input_req *w = (struct input_req *)req;
        struct command *cmd = w->cmd;
        cmd->in_pending -= w->len;
        if (w->cb)
                w->cb(w->ud, status < 0 ? -EPIPE : 0);
        free(w->data);
        (void)quota_hold_to(&w->hold, 0);
        free(w);
        if (status < 0 || (cmd->in_eof_wanted && cmd->in_pending == 0))
                close_stdin(cmd);
}

/* Queues len bytes of data for cmd's stdin, held for uid, or by held when given (the
 * hold is then moved to the write). */
static int queue_input(struct command *cmd, uid_t uid, struct quota_hold *held, const uint8_t *data,
                       size_t len, command_input_cb cb, void *ud) {
        struct input_req *w;
        uv_buf_t b;
        int r;
        if (len == 0)
                return 0;
        if (cmd->in_pending + len > COMMAND_MAX_PENDING_INPUT_BYTES)
                return -EAGAIN;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->hold = (struct quota_hold){.b = &cmd->sb->d->buffered, .uid = uid};
        if (held) {
                w->hold = *held;
                held->held = 0;
        }
        r = quota_hold_to(&w->hold, len);
        w->data = r < 0 ? NULL : malloc(len);
        if (!w->data) {
                (void)quota_hold_to(&w->hold, 0);
                free(w);
                return r < 0 ? r : -ENOMEM;
        }
        memcpy(w->data, data, len);
        w->len = len;
        w->cmd = cmd;
        w->cb = cb;
        w->ud = ud;
        b = uv_buf_init((char *)w->data, (unsigned)len);
        r = uv_write(&w->req, (uv_stream_t *)&cmd->in, &b, 1, on_input_written);
        if (r < 0) {
                free(w->data);
                (void)quota_hold_to(&w->hold, 0);
                free(w);
                return r == UV_EPIPE ? -EPIPE : r;
        }
        cmd->in_pending += len;
        cmd->in_last_byte = data[len - 1];
        return 0;
}

/* The end of a terminal's input: the terminal stays open (its master is the output
 * too), so the command is sent the end-of-file character instead, as typed: twice when
 * a line is pending (the first only sends that line), so that its read returns 0. */
static void tty_eof(struct command *cmd) {
        uint8_t eofc[2];

        if (!cmd->tty || !cmd->out[0].open)
                return;
        eofc[0] = eofc[1] = devpts_eof_char(cmd->out[0].fd);
        (void)queue_input(cmd, cmd->caller_uid, NULL, eofc,
                          cmd->in_last_byte && cmd->in_last_byte != '\n' ? 2 : 1, NULL, NULL);
}

int command_resize(struct command *cmd, unsigned rows, unsigned cols) {
        if (cmd->finished)
                return -ENOENT;
        if (!cmd->tty)
                return -ENOTTY;
        if (rows == 0 || cols == 0 || rows > DEVPTS_MAX_DIM || cols > DEVPTS_MAX_DIM)
                return -EINVAL;
        if (cmd->slot.queued) {
                /* Sized so when it starts. */
                cmd->req->has_rows = cmd->req->has_cols = 1;
                cmd->req->rows = rows;
                cmd->req->cols = cols;
                return 0;
        }
        /* Its output is over (no terminal left to size), or it never started. */
        if (!cmd->out[0].open)
                return 0;
        return devpts_resize(cmd->out[0].fd, rows, cols);
}

int command_input(struct command *cmd, uid_t uid, const uint8_t *data, size_t len, int eof,
                  command_input_cb cb, void *ud) {
        int r;
        if (cmd->finished)
                return -ENOENT;
        if (cmd->slot.queued)
                return -ESHUTDOWN;
        if (!cmd->in_inited || cmd->in_eof_wanted)
                return -EPIPE;
        r = queue_input(cmd, uid, NULL, data, len, cb, ud);
        if (r < 0)
                return r;
        if (eof) {
                tty_eof(cmd);
                cmd->in_eof_wanted = 1;
                if (cmd->in_pending == 0)
                        close_stdin(cmd);
        }
        return len > 0 ? 1 : 0;
}

/* ---- starting ----------------------------------------------------------------------- */

struct envv {
        char **v;
        size_t n, cap;
};

/* Sets name=value (given as one "K=V" string), replacing an earlier one of that name. */
static int env_put(struct envv *e, const char *kv, size_t name_len) {
        size_t i;
        char *copy = strdup(kv);
        if (!copy)
                return -ENOMEM;
        for (i = 0; i < e->n; i++)
                if (strncmp(e->v[i], kv, name_len + 1) == 0) {
                        free(e->v[i]);
                        e->v[i] = copy;
                        return 0;
                }
        if (e->n == e->cap) {
                size_t nc = e->cap ? e->cap * 2 : 32;
                char **nv = realloc(e->v, nc * sizeof(*nv));
                if (!nv) {
                        free(copy);
                        return -ENOMEM;
                }
                e->v = nv;
                e->cap = nc;
        }
        e->v[e->n++] = copy;
        return 0;
}

static void env_free(struct envv *e) {
        size_t i;
        for (i = 0; i < e->n; i++)
                free(e->v[i]);
        free(e->v);
}

/* as_root: the command runs as root of an image's sandbox (its HOME is /root). */
static int build_env(const struct sandbox *sb, const Sbx__V1__RunCommand *req, int as_root,
                     struct envv *e) {
        const Sbx__V1__Policy *pol = sb->spec->policy;
        char **ep;
        size_t i;
        int r = 0, have_path = 0, have_home = 0;

        /* An image's Env first: what the sandbox and the request say goes over it. */
        for (i = 0; sb->image && i < sb->image->config.nenv && r == 0; i++) {
                const char *kv = sb->image->config.env[i], *eq = strchr(kv, '=');
                if (eq && eq != kv)
                        r = env_put(e, kv, (size_t)(eq - kv));
        }
        for (i = 0; i < pol->n_inherit_environment && r == 0; i++) {
                const char *name = pol->inherit_environment[i];
                size_t nl = strlen(name);
                int prefix = nl > 0 && name[nl - 1] == '*';
                if (prefix)
                        nl--;
                for (ep = environ; *ep && r == 0; ep++) {
                        const char *eq = strchr(*ep, '=');
                        if (!eq)
                                continue;
                        if (prefix ? strncmp(*ep, name, nl) == 0
                                   : ((size_t)(eq - *ep) == nl && strncmp(*ep, name, nl) == 0))
                                r = env_put(e, *ep, (size_t)(eq - *ep));
                }
        }
        for (i = 0; i < e->n; i++) {
                if (strncmp(e->v[i], "PATH=", 5) == 0)
                        have_path = 1;
                if (strncmp(e->v[i], "HOME=", 5) == 0)
                        have_home = 1;
        }
        if (r == 0 && !have_path)
                r = env_put(e, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            4);
        /* An image's root is at home in /root, as in any container. */
        if (r == 0 && !(sb->image && have_home))
                r = env_put(e, as_root ? "HOME=/root" : "HOME=/workspace", 4);
        for (i = 0; i < sb->spec->n_env && r == 0; i++)
                r = env_put(e, sb->spec->env[i],
                            (size_t)(strchr(sb->spec->env[i], '=') - sb->spec->env[i]));
        for (i = 0; i < req->n_env && r == 0; i++) {
                const Sbx__V1__EnvVar *v = req->env[i];
                char *kv;
                if (!v->name || !v->name[0] || strchr(v->name, '='))
                        return -EINVAL;
                if (asprintf(&kv, "%s=%s", v->name, v->value ? v->value : "") < 0)
                        return -ENOMEM;
                r = env_put(e, kv, strlen(v->name));
                free(kv);
        }
        return r;
}

/* /dev/null for reading, opened once: the stdin of every command given none (init
 * receives a copy of it with each Start). The descriptor or -errno. */
static int null_fd = -1;

static int dev_null(void) {
        if (null_fd < 0)
                null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return null_fd >= 0 ? null_fd : -errno;
}

/* Makes stream idx's pipe: the read end stays here, non-blocking (the command's end
 * blocks as a pipe should); stream mode watches it at once. */
static int open_out(struct command *cmd, int idx, int *ret_child_fd) {
        struct outstream *o = &cmd->out[idx];
        int p[2], one = 1, r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        if (ioctl(p[0], FIONBIO, &one) < 0) {
                r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        o->fd = p[0];
        o->open = 1;
        if (cmd->stream) {
                r = watch_stream(cmd, idx);
                if (r < 0) {
                        stream_closed(cmd, idx);
                        close(p[1]);
                        return r;
                }
        }
        *ret_child_fd = p[1];
        return 0;
}

/* The Start message being built for a command, with what it points to. */
struct start {
        Sbx__Init__V1__ToInit msg;
        Sbx__Init__V1__Start start;
        struct envv env;
        ProtobufCBinaryData *argv_b, *env_b;
        struct rlimits rl;
        int fds[3 + SBX_INIT_MAX_FDS]; /* stdin, stdout, stderr, then the cgroup's; owned */
        size_t n_cg_fds;
};

static void start_init(struct start *s) {
        size_t i;
        memset(s, 0, sizeof(*s));
        sbx__init__v1__to_init__init(&s->msg);
        sbx__init__v1__start__init(&s->start);
        for (i = 0; i < sizeof(s->fds) / sizeof(s->fds[0]); i++)
                s->fds[i] = -1;
}

/* Closes the descriptors s still owns (the shared /dev/null stays open). */
static void start_close_fds(struct start *s) {
        size_t i;
        for (i = 0; i < 3 + s->n_cg_fds; i++)
                if (s->fds[i] >= 0 && s->fds[i] != null_fd)
                        close(s->fds[i]);
        for (i = 0; i < 3 + s->n_cg_fds; i++)
                s->fds[i] = -1;
}

static void start_clear(struct start *s) {
        start_close_fds(s);
        free(s->argv_b);
        free(s->env_b);
        env_free(&s->env);
}

/* A terminal's size: rows and cols only with tty, each from 1 to DEVPTS_MAX_DIM. 0 or
 * -EINVAL with err. */
static int validate_tty(const Sbx__V1__RunCommand *req, char *err, size_t errlen) {
        int tty = req->has_tty && req->tty;

        if (!tty && (req->has_rows || req->has_cols)) {
                snprintf(err, errlen, "rows and cols size a terminal: give them with tty");
                return -EINVAL;
        }
        if ((req->has_rows && (req->rows == 0 || req->rows > DEVPTS_MAX_DIM)) ||
            (req->has_cols && (req->cols == 0 || req->cols > DEVPTS_MAX_DIM))) {
                snprintf(err, errlen, "rows and cols must be 1 to %u (got %u x %u)", DEVPTS_MAX_DIM,
                         req->has_rows ? (unsigned)req->rows : DEVPTS_DEFAULT_ROWS,
                         req->has_cols ? (unsigned)req->cols : DEVPTS_DEFAULT_COLS);
                return -EINVAL;
        }
        return 0;
}

/* The checks of a RunCommand that need nothing but sb and req. 0 or -errno with err. */
static int validate(const struct sandbox *sb, const Sbx__V1__RunCommand *req, char *err,
                    size_t errlen) {
        if (sb->view.state == SBX__V1__SANDBOX_STATE__CREATING) {
                snprintf(err, errlen, "sandbox '%s' is not ready (still creating); wait for it",
                         sb->id);
                return -ESHUTDOWN;
        }
        if (sb->view.state != SBX__V1__SANDBOX_STATE__READY) {
                /* -ENODEV is SANDBOX_ENDED on the wire: terminal. */
                snprintf(err, errlen, "sandbox '%s' is ending; create a new one", sb->id);
                return -ENODEV;
        }
        if ((req->n_argv > 0) == (req->shell != NULL)) {
                snprintf(err, errlen, "give exactly one of argv and shell");
                return -EINVAL;
        }
        if (req->n_argv > SBX_MAX_ARGV || (req->n_argv > 0 && !req->argv[0][0])) {
                snprintf(err, errlen, "argv must have 1 to %u entries and a non-empty program",
                         SBX_MAX_ARGV);
                return -EINVAL;
        }
        if (!req->has_timeout_ms ||
            (req->timeout_ms == 0 && !(req->has_background && req->background))) {
                snprintf(err, errlen,
                         "timeout_ms is required and must be greater than 0 (sbx and "
                         "libsbx default to 60000; only a background command may say 0, "
                         "to run until it exits or the sandbox ends)");
                return -EINVAL;
        }
        if (req->has_stdin && req->stdin.len > SBX_MAX_STDIN_BYTES) {
                snprintf(err, errlen, "stdin is larger than %u bytes; stream it with stdin_stream",
                         SBX_MAX_STDIN_BYTES);
                return -EMSGSIZE;
        }
        /* The timeouts (at most --max-command-timeout) and the output caps: bounds.h. */
        if (bounds_check_command(sb->d->cfg, req, err, errlen) < 0)
                return -EINVAL;
        if (req->cwd && strlen(req->cwd) >= SBX_PATH_MAX_BYTES) {
                snprintf(err, errlen, "cwd is too long");
                return -EINVAL;
        }
        if (req->user && !sb->image) {
                snprintf(err, errlen, "user: only a sandbox made from an image has users to "
                                      "run as (create it with an image)");
                return -EINVAL;
        }
        return validate_tty(req, err, errlen);
}

/* ---- a new command: its start, or its wait for a slot ------------------------------- */

/* How long a command of req may wait for a slot: its queue_timeout_ms, or the daemon's
 * --queue-timeout, at most --max-command-timeout. 0: not at all. */
static uint64_t queue_wait_ms(const struct sandbox *sb, const Sbx__V1__RunCommand *req) {
        const struct config *cfg = sb->d->cfg;
        uint64_t w = req->has_queue_timeout_ms ? req->queue_timeout_ms : cfg->queue_timeout_ms;
        return w > cfg->max_command_timeout_ms ? cfg->max_command_timeout_ms : w;
}

/* Frees a command that never got its handles (nothing of it was sent or recorded). */
static void command_discard(struct command *cmd) {
        size_t i;
        for (i = 0; cmd->argv && i < cmd->argc; i++)
                free(cmd->argv[i]);
        free(cmd->argv);
        free(cmd->cwd);
        free(cmd->client_name);
        (void)quota_hold_to(&cmd->stdin_hold, 0);
        free(cmd);
}

/* The argv a command runs: req's, or /bin/sh -c req->shell. 0 or -ENOMEM. */
static int copy_argv(struct command *cmd, const Sbx__V1__RunCommand *req) {
        size_t i;

        cmd->argc = req->shell ? 3 : req->n_argv;
        cmd->argv = calloc(cmd->argc, sizeof(char *));
        if (!cmd->argv)
                return -ENOMEM;
        for (i = 0; i < cmd->argc; i++) {
                const char *a = req->shell ? (i == 0   ? "/bin/sh"
                                              : i == 1 ? "-c"
                                                       : req->shell)
                                           : req->argv[i];
                cmd->argv[i] = strdup(a);
                if (!cmd->argv[i])
                        return -ENOMEM;
        }
        return 0;
}

/* Where a command starts unless it says: its image's WorkingDir, else /workspace. */
static const char *default_cwd(const struct sandbox *sb) {
        const char *w = sb->image ? sb->image->config.working_dir : NULL;

        return w && w[0] == '/' && strlen(w) < SBX_PATH_MAX_BYTES / 2 ? w : "/workspace";
}

/* A new command of sb for req, numbered, with its caps, timeout, argv and cwd; in no
 * list yet. NULL when out of memory. */
static struct command *command_new(struct sandbox *sb, const Sbx__V1__RunCommand *req,
                                   const struct caller *caller) {
        struct command *cmd = calloc(1, sizeof(*cmd));
        uint64_t max_cmd = sb->d->cfg->max_command_timeout_ms;

        if (!cmd)
                return NULL;
        cmd->sb = sb;
        cmd->caller_uid = caller->uid;
        cmd->slot.uid = caller->uid;
        cmd->caller_pid = caller->pid;
        cmd->background = req->has_background && req->background;
        /* A background command keeps its output for whoever attaches: never streamed. */
        cmd->stream = req->has_stream && req->stream && !cmd->background;
        cmd->requester = 1;
        cmd->tty = req->has_tty && req->tty;
        /* Checked by validate: at most SBX_MAX_OUTPUT_BYTES. */
        outbuf_init(&cmd->out[0].kept,
                    (size_t)(req->has_max_stdout_bytes ? req->max_stdout_bytes
                                                       : SBX_DEFAULT_MAX_OUTPUT_BYTES));
        outbuf_init(&cmd->out[1].kept,
                    (size_t)(req->has_max_stderr_bytes ? req->max_stderr_bytes
                                                       : SBX_DEFAULT_MAX_OUTPUT_BYTES));
        /* What it keeps is held for its caller (--max-buffered-per-uid). */
        outbuf_charge(&cmd->out[0].kept, &sb->d->buffered, cmd->caller_uid);
        outbuf_charge(&cmd->out[1].kept, &sb->d->buffered, cmd->caller_uid);
        cmd->timeout_ms = req->timeout_ms > max_cmd ? max_cmd : req->timeout_ms;
        if (req->cwd && req->cwd[0] == '/')
                cmd->cwd = strdup(req->cwd);
        else if (asprintf(&cmd->cwd, "%s%s%s", default_cwd(sb), req->cwd && req->cwd[0] ? "/" : "",
                          req->cwd ? req->cwd : "") < 0)
                cmd->cwd = NULL;
        if (caller->client_name)
                cmd->client_name = strdup(caller->client_name);
        if (copy_argv(cmd, req) < 0 || !cmd->cwd || (caller->client_name && !cmd->client_name)) {
                command_discard(cmd);
                return NULL;
        }
        cmd->num = ++sb->next_command;
        snprintf(cmd->id, sizeof(cmd->id), "c-%llu", (unsigned long long)cmd->num);
        return cmd;
}

/* The environment, argv and rlimits of cmd's Start, and its size checked. 0 or -errno
 * with err. */
static int build_start(struct command *cmd, const Sbx__V1__RunCommand *req, struct start *s,
                       char *err, size_t errlen) {
        struct sandbox *sb = cmd->sb;
        const Sbx__V1__Limits *lim = sb->spec->policy->limits;
        size_t i;
        uid_t uid = sb->image ? sb->image->uid : 1;
        gid_t gid = 0;
        int r;

        /* An image's user (RunCommand.user), looked up once: in its /etc/passwd. */
        if (req->user && (r = sbimage_user(sb->image, req->user, &uid, &gid, err, errlen)) < 0)
                return r;
        r = build_env(sb, req, sb->image && uid == 0, &s->env);
        if (r < 0 || s->env.n > SBX_MAX_ENV) {
                snprintf(err, errlen,
                         r == -EINVAL ? "env names must be non-empty and contain no '='"
                                      : "cannot build the environment");
                return r < 0 ? r : -EINVAL;
        }
        s->argv_b = calloc(cmd->argc, sizeof(*s->argv_b));
        s->env_b = calloc(s->env.n ? s->env.n : 1, sizeof(*s->env_b));
        if (!s->argv_b || !s->env_b) {
                snprintf(err, errlen, "daemon out of memory");
                return -ENOMEM;
        }
        for (i = 0; i < cmd->argc; i++)
                s->argv_b[i] = (ProtobufCBinaryData){.len = strlen(cmd->argv[i]),
                                                     .data = (uint8_t *)cmd->argv[i]};
        for (i = 0; i < s->env.n; i++)
                s->env_b[i] = (ProtobufCBinaryData){.len = strlen(s->env.v[i]),
                                                    .data = (uint8_t *)s->env.v[i]};
        if (rlimits_for_command(&s->rl, lim, sb->enforcement[LIM_PROCESSES], sb->d->nofile_soft) <
            0) {
                snprintf(err, errlen, "too many rlimits for one command");
                return -E2BIG;
        }
        if (lim && lim->has_cpu_seconds)
                cmd->cpu_limit = lim->cpu_seconds;
        s->start.has_command_id = 1;
        s->start.command_id = cmd->num;
        s->start.n_argv = cmd->argc;
        s->start.argv = s->argv_b;
        s->start.n_envp = s->env.n;
        s->start.envp = s->env_b;
        s->start.has_cwd = 1;
        s->start.cwd = (ProtobufCBinaryData){.len = strlen(cmd->cwd), .data = (uint8_t *)cmd->cwd};
        if (req->user) {
                s->start.has_uid = s->start.has_gid = 1;
                s->start.uid = uid;
                s->start.gid = gid;
        }
        s->start.n_rlimits = s->rl.n;
        s->start.rlimits = s->rl.ptrs;
        s->start.has_n_cgroup_fds = 1;
        s->start.n_cgroup_fds = 0;
        /* A background command's requester is answered once it has started (or could
         * not): init says so with Started. */
        s->start.has_ack = s->start.ack = cmd->background && cmd->requester;
        s->msg.body_case = SBX__INIT__V1__TO_INIT__BODY_START;
        s->msg.start = &s->start;
        if (sbx__init__v1__to_init__get_packed_size(&s->msg) > SBX_INIT_MAX_MSG_BYTES) {
                snprintf(err, errlen,
                         "argv and environment exceed %u bytes; pass large input "
                         "through stdin or a file",
                         SBX_INIT_MAX_MSG_BYTES);
                return -EMSGSIZE;
        }
        return 0;
}

/* A cgroup of cmd's own below the sandbox's, where commands get one: the child joins it
 * through the descriptors added to s. Without one it is bounded by the sandbox's. */
static void join_own_cgroup(struct command *cmd, struct start *s) {
        struct sandbox *sb = cmd->sb;
        char rel[SBX_ID_MAX_BYTES + 40];
        int r, v2 = 0;

        /* An image's root joins only a group that is its to join (sandbox.c). */
        if (!sb->cg || !sb->d->command_cgroups || (sb->image && sb->image->block >= 0 &&
                                                  !sb->cg_delegated))
                return;
        snprintf(rel, sizeof(rel), "%s/%s", sb->cg_name, cmd->id);
        r = cgroup_create(sb->d->cgroups, rel, 1, &cmd->cg);
        if (r == 0 && sb->image && sb->image->block >= 0) {
                uid_t root = sbimage_host_id(sb->image, 0);
                r = cgroup_delegate_procs(cmd->cg, root, root);
                if (r < 0) {
                        (void)cgroup_destroy(cmd->cg);
                        cmd->cg = NULL;
                }
        }
        if (r == 0) {
                r = cgroup_join_fds(cmd->cg, s->fds + 3, SBX_INIT_MAX_FDS - 3, &v2);
                if (r >= 0) {
                        s->n_cg_fds = (size_t)r;
                        s->start.n_cgroup_fds = (uint32_t)s->n_cg_fds;
                        s->start.has_cgroup_v2 = 1;
                        s->start.cgroup_v2 = v2;
                }
        }
        if (r < 0)
                log_warning("sbx=%s cmd=%s: no cgroup of its own (%s); it is bounded by the "
                            "sandbox's",
                            sb->id, cmd->id, strerror(-r));
}

/* cmd owns its two timers from now on (and frees itself once its handles are closed),
 * and holds its sandbox. */
static void command_attach(struct command *cmd) {
        struct sandbox *sb = cmd->sb;

        uv_timer_init(sb->d->loop, &cmd->timer);
        uv_timer_init(sb->d->loop, &cmd->drain);
        cmd->timer.data = cmd->drain.data = cmd;
        cmd->handles = 2;
        sb->hooks->hold(sb); /* the sandbox outlives its commands' handles */
}

/* cmd, attached and holding a slot (cmdsched_take_slot), joins its sandbox's running commands:
 * listed, counted and timed. */
static void command_link(struct command *cmd) {
        struct sandbox *sb = cmd->sb;
        struct command *o;

        for (o = sb->commands; o; o = o->next)
                o->overlapped = cmd->overlapped = 1;
        cmd->next = sb->commands;
        if (sb->commands)
                sb->commands->prev = cmd;
        sb->commands = cmd;
        cmdsched_run(&sb->sched, &cmd->slot);
        sb->commands_run++;
        cmd->start_hr = uv_hrtime();
        cmd->started_ms = sbxd_now_unix_ms();
        count_events(cmd, &cmd->oom_before, &cmd->pids_before);
}
/* The command's stdin: a pipe when it is given input (now or streamed), else the
 * shared /dev/null. Its read end goes into *ret_fd. 0 or -errno. */
static int open_in(struct command *cmd, const Sbx__V1__RunCommand *req, int *ret_fd) {
        int p[2];

        if (!(req->has_stdin && req->stdin.len > 0) &&
            !(req->has_stdin_stream && req->stdin_stream)) {
                *ret_fd = dev_null();
                return *ret_fd < 0 ? *ret_fd : 0;
        }
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        if (uv_pipe_init(cmd->sb->d->loop, &cmd->in, 0) < 0) {
                close(p[0]);
                close(p[1]);
                return -EIO;
        }
        cmd->in.data = cmd;
        cmd->handles++;
        if (uv_pipe_open(&cmd->in, p[1]) < 0) {
                close_handle(cmd, (uv_handle_t *)&cmd->in);
                close(p[0]);
                close(p[1]);
                return -EIO;
        }
        cmd->in_inited = 1;
        *ret_fd = p[0];
        return 0;
}

/* A terminal for cmd (RunCommand.tty) in its sandbox's devpts: the master is its
 * output (stdout; stderr stays closed, empty) and, duplicated, its input when it is
 * given any; the slave, three times, the child's stdio. 0 or -errno. */
static int open_tty(struct command *cmd, const Sbx__V1__RunCommand *req, struct start *s) {
        unsigned rows = req->has_rows ? req->rows : DEVPTS_DEFAULT_ROWS,
                 cols = req->has_cols ? req->cols : DEVPTS_DEFAULT_COLS;
        int master, slave, in = -1, r, i;

        /* None at all: its owner's budget was spent when it was made (no devpts there). */
        if (cmd->sb->ptys == 0)
                return -ENOSPC;
        r = devpts_open(cmd->sb->view.root_fd, rows, cols, &master, &slave);
        if (r < 0)
                return r;
        s->fds[0] = slave;
        for (i = 1; i < 3; i++)
                if ((s->fds[i] = fcntl(slave, F_DUPFD_CLOEXEC, 3)) < 0)
                        r = -errno;
        s->start.has_tty = s->start.tty = 1;
        cmd->out[0].fd = master;
        cmd->out[0].open = 1;
        if (r == 0 && cmd->stream)
                r = watch_stream(cmd, 0);
        if (r == 0 && ((req->has_stdin && req->stdin.len > 0) ||
                       (req->has_stdin_stream && req->stdin_stream))) {
                /* A handle of its own (the loop watches each descriptor once). */
                in = fcntl(master, F_DUPFD_CLOEXEC, 3);
                r = in < 0 ? -errno : uv_pipe_init(cmd->sb->d->loop, &cmd->in, 0);
                if (r == 0) {
                        cmd->in.data = cmd;
                        cmd->handles++;
                        cmd->in_inited = 1;
                        r = uv_pipe_open(&cmd->in, in);
                        in = r < 0 ? in : -1;
                }
        }
        if (in >= 0)
                close(in);
        return r;
}

/* The three pipes of cmd (the child's ends into s), or its terminal. 0 or -errno. */
static int open_stdio(struct command *cmd, const Sbx__V1__RunCommand *req, struct start *s) {
        int r;

        if (cmd->tty)
                return open_tty(cmd, req, s);
        r = open_out(cmd, 0, &s->fds[1]);
        if (r == 0)
                r = open_out(cmd, 1, &s->fds[2]);
        if (r == 0)
                r = open_in(cmd, req, &s->fds[0]);
        return r;
}

/* Sends Start (init holds the child's descriptors then; ours are closed), records a
 * streamed command's start and tells its client. 0, or -errno when the send failed (the
 * sandbox is failing; its end finishes cmd as sandbox_ended, so cmd stays valid). */
static int send_start(struct command *cmd, struct start *s) {
        /* Start first: the record and the rest are written while init starts the
         * command on the other CPU. init answers only a failure (StartFailed), and
         * handles a later Signal after this Start (init.proto): sent is started. */
        int r = initchan_send(&cmd->sb->chan, &s->msg, s->fds, 3 + s->n_cg_fds);

        if (r >= 0)
                cmd->started = 1;
        cmd->await_ack = r >= 0 && s->start.ack;
        start_close_fds(s);
        /* A background command is recorded at once: it is listed and attachable from
         * now on. */
        if (cmd->background)
                record_start(cmd);
        /* A streamed command is recorded at once (its client is told it started);
         * another one at the first look at its output, or whole when it ends before
         * that (SBX_RECORD_START_DELAY_MS). Stream mode: CommandStarted goes out before
         * any output can (the command id is what a client needs for CommandInput and
         * CancelCommand): output is read on a later loop turn. */
        if (cmd->stream) {
                record_start(cmd);
                cmd->cbs.started(cmd->ud, cmd->id);
        }
        return r;
}

/* A started command's stdin (what RunCommand gave, then closed unless streamed) and its
 * timers: the timeout, and the output (read as it comes when streamed, else looked at
 * later, see SBX_OUTPUT_WATCH_BYTES). */
static void arm_command(struct command *cmd, const Sbx__V1__RunCommand *req) {
        if (req->has_stdin && req->stdin.len > 0 &&
            queue_input(cmd, cmd->caller_uid, &cmd->stdin_hold, req->stdin.data, req->stdin.len,
                        NULL, NULL) < 0)
                close_stdin(cmd);
        if (cmd->in_inited && !(req->has_stdin_stream && req->stdin_stream)) {
                tty_eof(cmd);
                cmd->in_eof_wanted = 1;
                if (cmd->in_pending == 0)
                        close_stdin(cmd);
        }
        /* The loop's clock is cached per iteration: refresh it, or the timeout would be
         * counted from the start of this iteration and fire early. */
        uv_update_time(cmd->sb->d->loop);
        if (cmd->stream) {
                update_stream_reading(cmd);
        } else if (cmd->background || cmd->watchers) {
                /* Read as it comes: an attacher sees it at once. */
                watch_output(cmd);
        } else {
                /* A terminal's buffer (4 KiB) never reaches SBX_OUTPUT_WATCH_BYTES: read it
                 * as it comes. The timer still records the start. */
                if (cmd->tty)
                        watch_output(cmd);
                cmd->watch_delay_ms = SBX_OUTPUT_WATCH_DELAY_MS;
                uv_timer_start(&cmd->drain, on_watch_due, cmd->watch_delay_ms, 0);
        }
        /* 0 (background only): until it exits or the sandbox ends. */
        if (cmd->timeout_ms > 0)
                uv_timer_start(&cmd->timer, on_timeout, cmd->timeout_ms, 0);
        if (cmd->timeout_ms < req->timeout_ms)
                log_debug("sbx=%s cmd=%s: timeout capped to %llu ms", cmd->sb->id, cmd->id,
                          (unsigned long long)cmd->timeout_ms);
}

/* cmd could not be started (what: why; r: -errno): it is set up enough to end with a
 * result of its own, START_FAILED with why, rather than an error. */
static void fail_locally(struct command *cmd, struct start *s, int r, const char *what) {
        char err[640];

        snprintf(err, sizeof(err), "%s: %s", what, strerror(-r));
        start_close_fds(s);
        cmd->start_failed = 1;
        cmd->start_errno = -r;
        cmd->start_error = strdup(err);
        finish(cmd);
}

/* Why cmd's terminal could not be opened: how many ptys its sandbox holds, and the bound
 * (flag and value) that left it fewer than SBX_SANDBOX_PTYS (sandbox.c). */
static void tty_failure(const struct command *cmd, char *buf, size_t len) {
        const struct sandbox *sb = cmd->sb;
        const char *cut = sb->ptys_cut;

        if (sb->ptys == 0)
                snprintf(buf, len,
                         "cannot open the command's terminal: this sandbox has no ptys; when it "
                         "was created, %s",
                         cut ? cut : "its owner had none left");
        else
                snprintf(buf, len,
                         "cannot open the command's terminal in the sandbox's devpts, which holds "
                         "%u ptys at once%s%s",
                         sb->ptys, cut ? "; when it was created, " : "", cut ? cut : "");
}

/* Starts cmd, attached, holding a slot, with s built from req: its own cgroup, its
 * place among the running, its pipes, Start, its stdin and timers. */
static void launch(struct command *cmd, const Sbx__V1__RunCommand *req, struct start *s) {
        char what[512];
        int r;

        join_own_cgroup(cmd, s);
        command_link(cmd);
        r = open_stdio(cmd, req, s);
        if (r < 0 && cmd->tty)
                tty_failure(cmd, what, sizeof(what));
        if (r < 0)
                fail_locally(cmd, s, r, cmd->tty ? what : "cannot set up the command's pipes");
        else if (send_start(cmd, s) >= 0)
                arm_command(cmd, req);
}

/* Keeps a copy of req in cmd for its start, later. 0 or -ENOMEM. */
static int keep_request(struct command *cmd, const Sbx__V1__RunCommand *req) {
        size_t len = sbx__v1__run_command__get_packed_size(req);
        uint8_t *buf = malloc(len ? len : 1);

        if (!buf)
                return -ENOMEM;
        sbx__v1__run_command__pack(req, buf);
        cmd->req = sbx__v1__run_command__unpack(NULL, len, buf);
        free(buf);
        return cmd->req ? 0 : -ENOMEM;
}

static void on_queue_timeout(uv_timer_t *t) {
        struct command *cmd = t->data;

        log_debug("sbx=%s cmd=%s: no slot within its queue timeout; it does not run", cmd->sb->id,
                  cmd->id);
        cmd->kill = KILL_QUEUE_TIMEOUT;
        finish(cmd);
}

/* cmd, attached, waits for a slot in its sandbox's queue for at most wait_ms, taking
 * turns with the other commands of owner's connection; a streamed command's client is
 * told how many wait before it. */
static void enqueue(struct command *cmd, uint64_t owner, uint64_t wait_ms) {
        struct sandbox *sb = cmd->sb;
        struct sbxd *d = sb->d;

        cmd->queued_hr = uv_hrtime();
        cmdsched_enqueue(d->sched, &sb->sched, &cmd->slot, owner);
        uv_update_time(d->loop);
        uv_timer_start(&cmd->timer, on_queue_timeout, wait_ms, 0);
        log_debug("sbx=%s cmd=%s: waits for a slot (%u ahead)", sb->id, cmd->id,
                  cmdsched_ahead(&cmd->slot));
        if (cmd->stream && cmd->cbs.queued)
                cmd->cbs.queued(cmd->ud, cmd->id, cmdsched_ahead(&cmd->slot));
        /* A background command's one answer: it waits. */
        if (cmd->background && cmd->requester && cmd->cbs.queued) {
                cmd->cbs.queued(cmd->ud, cmd->id, cmdsched_ahead(&cmd->slot));
                cmd->requester = 0;
        }
}

/* The waiting command cmd has its slot: it starts with the request it kept. */
static void start_queued(struct command *cmd) {
        Sbx__V1__RunCommand *req = cmd->req;
        struct start s;
        char err[512];
        int r;

        uv_timer_stop(&cmd->timer);
        cmd->queued_ms = (uv_hrtime() - cmd->queued_hr) / 1000000u;
        cmd->req = NULL;
        start_init(&s);
        /* Checked when it was queued: only the daemon's memory can fail it now. */
        r = build_start(cmd, req, &s, err, sizeof(err));
        if (r < 0) {
                join_own_cgroup(cmd, &s);
                command_link(cmd);
                fail_locally(cmd, &s, r, "cannot build the command's start");
        } else {
                launch(cmd, req, &s);
        }
        start_clear(&s);
        sbx__v1__run_command__free_unpacked(req, NULL);
}

/* ---- the scheduler's view of sandboxes and commands (cmdsched.h) -------------------- */

/* A cap of sb's policy (has: it gives one), at most the daemon's (max): a sandbox
 * recorded by an older daemon has none, and one re-adopted after a restart with lower
 * flags may have more. */
static unsigned policy_cap(int has, uint32_t v, uint32_t max) {
        return has && v < max ? v : max;
}

/* The sandbox whose scheduling part q is. */
static const struct sandbox *sandbox_of(const struct cmdsched_queue *q) {
        return (const struct sandbox *)((const char *)q - offsetof(struct sandbox, sched));
}

/* The most commands sb runs at once (Limits.commands, sbxd --max-commands). */
static unsigned max_running(const struct cmdsched_queue *q) {
        const struct sandbox *sb = sandbox_of(q);
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        unsigned n = policy_cap(l && l->has_commands, l ? l->commands : 0,
                                sb->d->cfg->max_commands_per_sandbox);
        return n ? n : 1;
}

/* The most commands of sb that wait for a slot at once (Limits.queued_commands, sbxd
 * --max-queued). */
static unsigned max_queued(const struct cmdsched_queue *q) {
        const struct sandbox *sb = sandbox_of(q);
        const Sbx__V1__Limits *l = sb->spec->policy->limits;
        return policy_cap(l && l->has_queued_commands, l ? l->queued_commands : 0,
                          sb->d->cfg->max_queued_per_sandbox);
}

/* Whether the sandbox of q may start a waiting command now. Nothing starts once the
 * daemon is stopping: a slot freed by a sandbox that ends (or is left to the next
 * daemon) must not start a command elsewhere that its own end would kill (or leave
 * unknown) a moment later. */
static int may_start(const struct cmdsched_queue *q) {
        const struct sandbox *sb = sandbox_of(q);

        return !sb->d->shutting_down && sb->view.state == SBX__V1__SANDBOX_STATE__READY &&
               !sb->ending;
}

/* The scheduler gave the waiting command of e a slot, out of its queue: it starts. */
static void start_waiting(struct cmdsched_entry *e) {
        struct command *cmd = of_entry(&e->wait);

        log_debug("sbx=%s cmd=%s: starts after waiting %llu ms for a slot", cmd->sb->id, cmd->id,
                  (unsigned long long)((uv_hrtime() - cmd->queued_hr) / 1000000u));
        start_queued(cmd);
}

const struct cmdsched_ops command_sched_ops = {
        .max_running = max_running,
        .max_queued = max_queued,
        .may_start = may_start,
        .start = start_waiting,
};

/* ---- RunCommand --------------------------------------------------------------------- */

/* RunCommand.stdin is held for the caller from now until it is in the command's pipe.
 * 0, or -EDQUOT or -ENOSPC with err. */
static int hold_stdin(struct command *cmd, const Sbx__V1__RunCommand *req, char *err,
                      size_t errlen) {
        char why[200];
        int r;

        if (!req->has_stdin || req->stdin.len == 0)
                return 0;
        cmd->stdin_hold = (struct quota_hold){.b = &cmd->sb->d->buffered, .uid = cmd->caller_uid};
        r = quota_hold_to(&cmd->stdin_hold, req->stdin.len);
        if (r < 0) {
                quota_explain_buffered(cmd->stdin_hold.b, cmd->caller_uid, r, why, sizeof(why));
                snprintf(err, errlen,
                         "stdin of %zu bytes cannot be held for the command: %s; stream it "
                         "with stdin_stream, or wait for your other commands to end",
                         req->stdin.len, why);
        }
        return r;
}

int command_run(struct sandbox *sb, const Sbx__V1__RunCommand *req, const struct caller *caller,
                const struct command_callbacks *cbs, void *ud, struct command **ret, char *err,
                size_t errlen) {
        uint64_t wait_ms = queue_wait_ms(sb, req);
        struct command *cmd;
        struct start s;
        int r, slot;

        r = validate(sb, req, err, errlen);
        if (r < 0)
                return r;
        /* A slot now, or a place in the queue when the command may wait for one. */
        r = cmdsched_take_slot(sb->d->sched, &sb->sched, caller->uid, err, errlen);
        slot = r == 0;
        if (r == -ENOMEM || (r < 0 && wait_ms == 0) ||
            (!slot &&
             (r = cmdsched_queue_room(sb->d->sched, &sb->sched, caller->uid, err, errlen)) < 0))
                return r;
        cmd = command_new(sb, req, caller);
        r = cmd ? 0 : -ENOMEM;
        if (cmd) {
                cmd->cbs = *cbs;
                cmd->ud = ud;
                start_init(&s);
                /* Checked now, also for a command that waits: its start can only run out
                 * of memory later. */
                r = build_start(cmd, req, &s, err, errlen);
                if (r == 0)
                        r = hold_stdin(cmd, req, err, errlen);
                if (r == 0 && !slot && (r = keep_request(cmd, req)) < 0)
                        snprintf(err, errlen, "daemon out of memory");
                if (r < 0) {
                        start_clear(&s);
                        command_discard(cmd);
                        sb->next_command--;
                }
        } else {
                snprintf(err, errlen, "daemon out of memory");
        }
        if (r < 0) {
                if (slot)
                        cmdsched_untake(sb->d->sched, caller->uid);
                return r;
        }
        *ret = cmd;
        command_attach(cmd);
        if (slot)
                launch(cmd, req, &s);
        else
                enqueue(cmd, caller->conn_id, wait_ms);
        start_clear(&s);
        return 0;
}

/* ---- attachers and listing (AttachCommand, SandboxInfo.commands) --------------------- */

void command_watch_add(struct command *cmd, struct command_watch *w) {
        w->prev = NULL;
        w->next = cmd->watchers;
        if (cmd->watchers)
                cmd->watchers->prev = w;
        cmd->watchers = w;
        /* From now on its output is read as it comes (a command that is not streamed
         * was looked at only now and then); a waiting one starts so when it starts. */
        if (cmd->started && !cmd->exited && !cmd->finished)
                watch_output(cmd);
}

void command_watch_remove(struct command *cmd, struct command_watch *w) {
        if (w->prev)
                w->prev->next = w->next;
        else if (cmd->watchers == w)
                cmd->watchers = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->next = w->prev = NULL;
}

size_t command_kept_output(const struct command *cmd, int idx, uint64_t from, uint8_t *dst,
                           size_t max, uint64_t *ret_first) {
        return outbuf_copy(&cmd->out[idx ? 1 : 0].kept, from, dst, max, ret_first);
}

void command_running_result(struct command *cmd, Sbx__V1__CommandResult *res) {
        sbx__v1__command_result__init(res);
        res->command_id = cmd->id;
        res->sandbox_id = cmd->sb->id;
        res->has_outcome = 1;
        res->outcome = SBX__V1__OUTCOME__RUNNING;
        res->has_stdout_bytes = res->has_stderr_bytes = 1;
        res->stdout_bytes = cmd->out[0].kept.total;
        res->stderr_bytes = cmd->out[1].kept.total;
        res->has_stdout_truncated = res->has_stderr_truncated = 1;
        res->stdout_truncated = cmd->out[0].kept.truncated;
        res->stderr_truncated = cmd->out[1].kept.truncated;
        res->has_duration = 1;
        res->duration = cmd->slot.queued || !cmd->start_hr
                                ? 0
                                : (double)(uv_hrtime() - cmd->start_hr) / 1e9;
        res->has_queued_ms = 1;
        res->queued_ms =
                cmd->slot.queued ? (uv_hrtime() - cmd->queued_hr) / 1000000u : cmd->queued_ms;
        res->has_timeout_ms = 1;
        res->timeout_ms = cmd->timeout_ms;
        res->has_isolated = 1;
        res->isolated = cmd->sb->isolated;
        res->has_owner_uid = 1;
        res->owner_uid = cmd->sb->owner_uid;
}

const uint8_t *command_ended_result(struct sandbox *sb, const char *command_id, size_t *ret_len) {
        const struct bgkept_entry *e = bgkept_find(&sb->bg_ended, command_id);

        *ret_len = e ? e->result_len : 0;
        return e ? e->result : NULL;
}

/* The CommandInfo of a running or waiting command. */
static void live_info(struct command *cmd, Sbx__V1__CommandInfo *ci) {
        sbx__v1__command_info__init(ci);
        ci->command_id = cmd->id;
        ci->n_argv = cmd->argc;
        ci->argv = cmd->argv;
        ci->has_state = 1;
        ci->state = cmd->slot.queued ? SBX__V1__COMMAND_STATE__COMMAND_QUEUED
                                     : SBX__V1__COMMAND_STATE__COMMAND_RUNNING;
        ci->has_background = 1;
        ci->background = cmd->background;
        ci->has_tty = 1;
        ci->tty = cmd->tty;
        ci->has_caller_uid = 1;
        ci->caller_uid = cmd->caller_uid;
        ci->has_started_unix_ms = !cmd->slot.queued;
        ci->started_unix_ms = cmd->started_ms;
}

/* The CommandInfo of an ended background command still kept. */
static void ended_info(struct bgkept_entry *e, Sbx__V1__CommandInfo *ci) {
        sbx__v1__command_info__init(ci);
        ci->command_id = e->id;
        ci->n_argv = e->argc;
        ci->argv = e->argv;
        ci->has_state = 1;
        ci->state = SBX__V1__COMMAND_STATE__COMMAND_ENDED;
        ci->has_background = ci->background = 1;
        ci->has_tty = 1;
        ci->tty = e->tty;
        ci->has_caller_uid = 1;
        ci->caller_uid = e->caller_uid;
        ci->has_started_unix_ms = e->started_ms != 0;
        ci->started_unix_ms = e->started_ms;
        ci->has_ended_unix_ms = 1;
        ci->ended_unix_ms = e->ended_ms;
        ci->has_outcome = 1;
        ci->outcome = e->outcome;
        ci->has_exit_code = e->has_exit_code;
        ci->exit_code = e->exit_code;
}

/* Oldest first: c-N by N. */
static int by_number(const void *a, const void *b) {
        const Sbx__V1__CommandInfo *x = a, *y = b;
        unsigned long long nx = strtoull(x->command_id + 2, NULL, 10),
                           ny = strtoull(y->command_id + 2, NULL, 10);
        return nx < ny ? -1 : nx > ny;
}

int command_infos(struct sandbox *sb, struct command_infos *ret) {
        size_t n = sb->bg_ended.n + sb->sched.n_queued, i = 0;
        struct bgkept_entry *e;
        struct cmdq_entry *q;
        struct command *c;

        memset(ret, 0, sizeof(*ret));
        for (c = sb->commands; c; c = c->next)
                n++;
        if (n == 0)
                return 0;
        ret->infos = calloc(n, sizeof(*ret->infos));
        ret->ptrs = calloc(n, sizeof(*ret->ptrs));
        if (!ret->infos || !ret->ptrs) {
                command_infos_free(ret);
                return -ENOMEM;
        }
        for (c = sb->commands; c && i < n; c = c->next)
                live_info(c, &ret->infos[i++]);
        for (q = sb->sched.queue.head; q && i < n; q = q->next)
                live_info(of_entry(q), &ret->infos[i++]);
        for (e = sb->bg_ended.head; e && i < n; e = e->next)
                ended_info(e, &ret->infos[i++]);
        qsort(ret->infos, i, sizeof(*ret->infos), by_number);
        for (ret->n = 0; ret->n < i; ret->n++)
                ret->ptrs[ret->n] = &ret->infos[ret->n];
        return 0;
}

void command_infos_free(struct command_infos *ci) {
        free(ci->infos);
        free(ci->ptrs);
        memset(ci, 0, sizeof(*ci));
}
