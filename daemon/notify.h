/* notify.h: the service manager's readiness protocol (sd_notify(3)) and socket
 * activation (sd_listen_fds(3)), written directly so sbxd needs no libsystemd.
 * Called by main() only; nothing here logs. */
#ifndef SBX_NOTIFY_H
#define SBX_NOTIFY_H

/* Sends state (e.g. "READY=1") to $NOTIFY_SOCKET when it is set. Returns 1 when sent,
 * 0 when there is no notify socket, -errno on failure. */
int notify_send(const char *state);

/* The listening socket passed by socket activation: the fd when $LISTEN_PID is this
 * process and $LISTEN_FDS is 1 and fd 3 is a listening Unix stream socket, 0 when the
 * daemon was not socket-activated, -errno when what was passed is unusable. Unsets the
 * variables so children never see them. */
int notify_listen_fd(void);

#endif
