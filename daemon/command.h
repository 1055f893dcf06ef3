/* command.h: the commands of a sandbox, as the request layer sees them: starting one
 * (RunCommand), cancelling it, forwarding a signal, feeding its stdin, resuming its
 * streamed output, and making the ones still running visible in the records. Each
 * command ends with exactly one result, given to the callbacks it was started with.
 *
 * Implemented in command.c, called by rpc.c on the loop thread for a sandbox it found in
 * the table. (sandbox_run, sandbox_cancel, sandbox_resume_output and
 * sandbox_command_input carry the sandbox prefix for their callers; wave 2 renames them
 * command_run, command_cancel, command_resume_output, command_input.) */
#ifndef SBX_COMMAND_H
#define SBX_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "caller.h"
#include "sbx.pb-c.h"

struct sandbox;

struct command_callbacks {
        /* Stream mode: the command has started. */
        void (*started)(void *ud, char *command_id);
        /* Stream mode: a chunk of output. */
        void (*output)(void *ud, char *command_id, Sbx__V1__Stream stream, uint64_t offset,
                       uint8_t *data, size_t len);
        /* Stream mode: 1 while the receiver cannot take more (reading the pipes pauses). */
        int (*congested)(void *ud);
        /* Always, exactly once: the final result (valid during the call). */
        void (*done)(void *ud, Sbx__V1__CommandResult *result);
};

/* Starts req in sb. Returns 0 when cbs->done will be called later (the command's id is
 * then in ret_command_id, at least 32 bytes), or -errno with a reason in err: -EINVAL bad
 * request, -EMSGSIZE stdin, argv or environment too large, -EBUSY too many commands
 * running (the per-sandbox bound), -EAGAIN the caller's --max-commands-per-uid,
 * -ESHUTDOWN the sandbox is not ready yet, -ENODEV it is ending, -ENOMEM. A command that
 * cannot get its pipes is still started: its result says START_FAILED. */
int sandbox_run(struct sandbox *sb, const Sbx__V1__RunCommand *req, const struct caller *caller,
                const struct command_callbacks *cbs, void *ud, char *ret_command_id, char *err,
                size_t errlen);

/* Kills the command's process group; its result becomes CANCELLED. 0 (also when it had
 * already exited or was being killed), -ENOENT unknown or finished. */
int sandbox_cancel(struct sandbox *sb, const char *command_id);

/* The client of a streamed command has room again: read its output now (without
 * waiting for the next look). -ENOENT: unknown or finished. */
int sandbox_resume_output(struct sandbox *sb, const char *command_id);

/* Called once input given to sandbox_command_input has reached the command's pipe
 * (err 0), or could not (-EPIPE: the command ended or closed its stdin). */
typedef void (*command_input_cb)(void *ud, int err);

/* Writes data to a running command's stdin (started with stdin_stream); closes it on eof.
 * Returns 1 when cb will be called once the data is in the pipe (the caller answers
 * then, which paces a client to what the command consumes), 0 when there was nothing
 * to wait for (cb is not called), -ENOENT unknown command, -EPIPE stdin already closed,
 * -EAGAIN too much input queued. */
int sandbox_command_input(struct sandbox *sb, const char *command_id, const uint8_t *data,
                          size_t len, int eof, command_input_cb cb, void *ud);

/* 1 when signo may be sent with CancelCommand.signal: SIGHUP, SIGINT, SIGQUIT, SIGKILL,
 * SIGUSR1, SIGUSR2 or SIGTERM (what a terminal, a supervisor or a user sends; never a
 * stop or a fault signal). */
int command_signal_allowed(int signo);

/* Delivers signo (see command_signal_allowed; not SIGKILL, which is sandbox_cancel's) to
 * the process group of the running command command_id of sb, through init, and nothing
 * else: the command's result says how it then ends. Returns 0 when it was sent or when
 * the command has already exited (nothing is left to signal), -ENOENT for an unknown or
 * finished command, -EINVAL for a signal not allowed. */
int command_signal(struct sandbox *sb, const char *command_id, int signo);

/* Writes the start of every command of sb that is running but not yet in the records
 * (a command is recorded some milliseconds after its start, see
 * SBX_RECORD_START_DELAY_MS), so that the history read next shows it as running. */
void command_record_running(struct sandbox *sb);

#endif
