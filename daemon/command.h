/* command.h: what the request layer asks of a sandbox's commands beyond sandbox.h (which
 * starts, cancels and feeds them): forwarding a signal to a running command, and making
 * the commands still running visible in the records. Implemented in command.c, called
 * by rpc.c. */
#ifndef SBX_COMMAND_H
#define SBX_COMMAND_H

struct sandbox;

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
