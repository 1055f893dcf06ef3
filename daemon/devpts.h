/* devpts.h: pseudo-terminals for commands (RunCommand.tty), opened in a sandbox's own devpts.
 *
 * The daemon opens the master itself, through the sandbox's root (its view's root_fd, in
 * the sandbox's mount namespace), from the devpts instance the sandbox's init mounted on
 * /dev/pts: host ptys and other sandboxes' stay invisible, and the daemon alone holds
 * the master's open file description (nothing sandboxed can read it, or clear its
 * O_NONBLOCK, under the event loop). The slave goes to init with the command's Start,
 * like a pipe's child end. Everything on the way is checked: the node must be devpts's
 * ptmx (looked at O_PATH, which opens no device), the opened descriptor a pty master.
 *
 * Used by command.c on the loop thread, and by the lifecycle to learn how many ptys a
 * sandbox it adopts holds; tested by check_devpts. Nothing here logs. */
#ifndef SBX_DEVPTS_H
#define SBX_DEVPTS_H

#include <sys/types.h>

#include "sbx_limits.h"

/* The largest rows and cols a terminal may have (RunCommand, CommandInput). */
#define DEVPTS_MAX_DIM      SBX_MAX_TTY_DIM
#define DEVPTS_DEFAULT_ROWS SBX_DEFAULT_TTY_ROWS
#define DEVPTS_DEFAULT_COLS SBX_DEFAULT_TTY_COLS

/* Opens a new pty in the devpts of the tree whose root is root_fd ("dev/pts/ptmx",
 * resolved inside that root, no symlink followed; never the daemon's own devpts, whose
 * ptys are the host's), unlocked and sized rows x cols. On
 * success *ret_master is the master (non-blocking, close-on-exec, no controlling
 * terminal taken) and *ret_slave its slave (close-on-exec), both the caller's. Returns
 * 0, -ENOTTY when what is there is not a devpts ptmx or what opened is no pty master,
 * -ENOSYS without openat2 (Linux 5.6) or TIOCGPTPEER (Linux 4.13), or another -errno. */
int devpts_open(int root_fd, unsigned rows, unsigned cols, int *ret_master, int *ret_slave);

/* The max= of the devpts instance mounted at /dev/pts in the view of process pid (a
 * sandbox's PID 1: its /proc/PID/mountinfo, which the kernel writes; the last mount
 * there is the one seen): the most ptys it holds at once, DEVPTS_NO_MAX when it has no
 * max=, 0 when no devpts is mounted there. -errno when the table cannot be read. */
#define DEVPTS_NO_MAX (1 << 20)
int devpts_max_of(pid_t pid);

/* 0 when fd is a pty master (an open ptmx node, 5:2, that answers TIOCGPTN), else
 * -ENOTTY (or -errno of fstat). */
int devpts_check_master(int fd);

/* Sets the size of master's terminal: the foreground process group of its slave gets
 * SIGWINCH when it changed. rows and cols from 1 to DEVPTS_MAX_DIM. 0 or -errno. */
int devpts_resize(int master, unsigned rows, unsigned cols);

/* The terminal's end-of-file character (VEOF, ^D unless the command changed it), which
 * makes a read of the slave in canonical mode return what was typed, or 0 at the start
 * of a line. */
unsigned char devpts_eof_char(int master);

#endif
