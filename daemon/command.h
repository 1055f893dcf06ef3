/* command.h: the commands of a sandbox, as the request layer sees them: starting one
 * (RunCommand), finding one by its id, cancelling it, forwarding a signal, feeding its
 * stdin, resuming its streamed output, and making the ones still running visible in the
 * records. Each command ends with exactly one result, given to the callbacks it was
 * started with.
 *
 * Implemented in command.c, called by rpc.c on the loop thread for a sandbox it found in
 * the table. A struct command is command.c's: its starter keeps the pointer command_run
 * gave until its done callback has returned, and anyone else finds it by id
 * (command_find) and uses it within the same loop turn. */
#ifndef SBX_COMMAND_H
#define SBX_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "caller.h"
#include "sbx.pb-c.h"

struct sandbox;
struct cmdsched_ops;

struct command_callbacks {
        /* Stream mode: the command waits for a slot, ahead others before it (may be NULL). */
        void (*queued)(void *ud, char *command_id, unsigned ahead);
        /* Stream mode: the command has started. */
        void (*started)(void *ud, char *command_id);
        /* Stream mode: a chunk of output. taken: data is malloc()ed and the callee's
         * (sent from where it was read, without a copy); else valid during the call. */
        void (*output)(void *ud, char *command_id, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len, int taken);
        /* Stream mode: 1 while the receiver cannot take more (reading the pipes pauses). */
        int (*congested)(void *ud);
        /* Always, exactly once: the final result (valid during the call). A background
         * command (RunCommand.background) calls exactly one of queued, started and done,
         * then forgets its requester: ud is never used again (command_run). */
        void (*done)(void *ud, Sbx__V1__CommandResult *result);
};

/* An attacher of a running command (AttachCommand, attach.c): it hears every chunk of
 * output read from now on and the result, whoever started the command. The memory is
 * the attacher's; command.c links it. */
struct command_watch;
struct command_watch_ops {
        /* A chunk of output, at offset within everything the stream produced. */
        void (*output)(struct command_watch *w, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len);
        /* The command ended (result valid during the call: its stdout and stderr are the
         * kept tails, empty for a streamed command). w is unlinked before the call. */
        void (*done)(struct command_watch *w, Sbx__V1__CommandResult *result);
};
struct command_watch {
        struct command_watch *next, *prev; /* command.c's */
        const struct command_watch_ops *ops;
};

struct command;

/* How the scheduler (cmdsched.h) reaches the commands it schedules: a sandbox's caps
 * (Limits.commands and Limits.queued_commands, at most the daemon's flags), whether it
 * may start a command now, and the start of a waiting command. Given to cmdsched_init by
 * the sandbox table, which makes the daemon's scheduler. */
extern const struct cmdsched_ops command_sched_ops;

/* Starts req in sb, or queues it when sb runs its maximum of commands (Limits.commands)
 * or the caller its quota (--max-commands-per-uid): it then waits for a slot for at most
 * req's queue_timeout_ms (or --queue-timeout), taking turns with other connections'
 * commands (cmdsched.h), and ends QUEUE_TIMEOUT, CANCELLED or SANDBOX_ENDED if it never
 * starts. Returns 0 when cbs->done will be called later (*ret is then the command,
 * valid until done has returned), or -errno with a reason in err: -EINVAL bad request,
 * -EMSGSIZE stdin, argv or environment too large, -EBUSY sb runs its maximum and the
 * command may not wait (queue_timeout_ms 0) or its queue, or the daemon's, is full,
 * -EAGAIN the caller's quota and it may not wait, -ESHUTDOWN the sandbox is not ready
 * yet, -ENODEV it is ending, -ENOMEM. A command that
 * cannot get its pipes is still started: its result says START_FAILED (done may then be
 * called before command_run returns; *ret is set before). */
int command_run(struct sandbox *sb, const Sbx__V1__RunCommand *req, const struct caller *caller,
                const struct command_callbacks *cbs, void *ud, struct command **ret, char *err,
                size_t errlen);

/* The command of sb with this id ("c-N") that has not finished (running or waiting for
 * a slot), or NULL. */
struct command *command_find(struct sandbox *sb, const char *command_id);

/* cmd's id, "c-N" (valid as long as cmd). */
const char *command_id(const struct command *cmd);

/* Kills cmd's process group; its result becomes CANCELLED. A command waiting for a slot
 * never starts: its result comes at once. Nothing to do when it has already exited, is
 * being killed or has finished. */
void command_cancel(struct command *cmd);

/* The client of a streamed command has room again: read its output now (without
 * waiting for the next look). */
void command_resume_output(struct command *cmd);

/* Called once input given to command_input has reached the command's pipe (err 0), or
 * could not (-EPIPE: the command ended or closed its stdin). */
typedef void (*command_input_cb)(void *ud, int err);

/* Writes data to cmd's stdin (started with stdin_stream); closes it on eof. What waits
 * for the pipe is held for uid, the sender (--max-buffered-per-uid). Returns 1 when cb
 * will be called once the data is in the pipe (the caller answers then, which paces a
 * client to what the command consumes), 0 when there was nothing to wait for (cb is not
 * called), -ENOENT finished, -ESHUTDOWN still waiting for a slot, -EPIPE stdin already
 * closed, -EAGAIN too much input queued for the command, -EDQUOT or -ENOSPC over the
 * sender's or everyone's budget (quota_explain_buffered says which). */
int command_input(struct command *cmd, uid_t uid, const uint8_t *data, size_t len, int eof,
                  command_input_cb cb, void *ud);

/* Resizes cmd's terminal (RunCommand.tty) to rows x cols, each 1 to DEVPTS_MAX_DIM (devpts.h):
 * the command's foreground process group gets SIGWINCH. A command waiting for a slot
 * starts with that size; one whose terminal is already closed is left alone. Returns 0,
 * -ENOENT finished, -ENOTTY not started with tty, -EINVAL a bad size, or -errno. */
int command_resize(struct command *cmd, unsigned rows, unsigned cols);

/* 1 when signo may be sent with CancelCommand.signal: SIGHUP, SIGINT, SIGQUIT, SIGKILL,
 * SIGUSR1, SIGUSR2 or SIGTERM (what a terminal, a supervisor or a user sends; never a
 * stop or a fault signal). */
int command_signal_allowed(int signo);

/* Delivers signo (see command_signal_allowed; not SIGKILL, which is command_cancel's) to
 * cmd's process group, through init, and nothing else: the command's result says how it
 * then ends. Returns 0 when it was sent or when the command has already exited (nothing
 * is left to signal), -ENOENT for a finished command, -EINVAL for a signal not allowed. */
int command_signal(struct command *cmd, int signo);

/* Adds w to cmd's attachers: from now on cmd's output is read as it comes (never paused
 * for an attacher: one that cannot keep up reads the kept tail later, see
 * command_kept_output) and each chunk, then the result, goes to w. */
void command_watch_add(struct command *cmd, struct command_watch *w);

/* Removes w (the attacher went away); the command goes on. */
void command_watch_remove(struct command *cmd, struct command_watch *w);

/* Copies at most max bytes of what cmd kept of stream idx (0 stdout, 1 stderr) from
 * offset from into dst; *ret_first: the offset of the first byte copied (the oldest
 * byte kept when from is older). A streamed command keeps nothing (its client got its
 * output). Returns the number of bytes copied. */
size_t command_kept_output(const struct command *cmd, int idx, uint64_t from, uint8_t *dst,
                           size_t max, uint64_t *ret_first);

/* Fills res with what is known of cmd while it runs or waits: its ids, outcome RUNNING,
 * the bytes produced so far, how long it has run and waited (no output). */
void command_running_result(struct command *cmd, Sbx__V1__CommandResult *res);

/* The packed CommandResult (with its kept output) of a background command of sb that
 * ended and is still kept (the last SBX_KEPT_BACKGROUND_RESULTS, see bgkept.h), or
 * NULL; *ret_len its size. Valid within the loop turn. */
const uint8_t *command_ended_result(struct sandbox *sb, const char *command_id, size_t *ret_len);

/* The commands of sb for SandboxInfo.commands: running and waiting ones, then ended
 * background ones still kept, oldest first (by number). ret owns the array; the strings
 * point into the commands (valid within the loop turn). Free with
 * command_infos_free. 0 or -ENOMEM. */
struct command_infos {
        Sbx__V1__CommandInfo *infos;
        Sbx__V1__CommandInfo **ptrs;
        size_t n;
};
int command_infos(struct sandbox *sb, struct command_infos *ret);
void command_infos_free(struct command_infos *ci);

/* Writes the start of every command of sb that is running but not yet in the records
 * (a command is recorded some milliseconds after its start, see
 * SBX_RECORD_START_DELAY_MS), so that the history read next shows it as running. */
void command_record_running(struct sandbox *sb);

#endif
