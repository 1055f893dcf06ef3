/* cli_tty.c: the client's terminal for `sbx exec -t`: raw mode while the command runs,
 * and the settings it had restored on every way out.
 *
 * cli_tty_raw saves the terminal's settings once and switches it to raw mode as ssh -t
 * does (no echo, no line editing, no signals from keys: Ctrl-C travels to the command as
 * the byte 0x03, no output processing: the command's own terminal already turns "\n"
 * into "\r\n"). cli_tty_restore puts the saved settings back; it only calls tcsetattr,
 * which is async-signal-safe, so that the paths that end sbx by a signal (cli_exec.c's
 * die_by) can call it too, and it is registered with atexit for the paths that call
 * exit(). Used by cli_exec.c only; a process has one terminal, so the state is global.
 * A stop from outside (SIGTSTP: in raw mode Ctrl-Z is only a byte for the command) puts
 * the settings back before sbx stops, and SIGCONT makes the terminal raw again. */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved, raw_mode;
static int saved_fd = -1; /* the terminal in raw mode, -1 when none */

void cli_tty_restore(void) {
        int fd = saved_fd;

        if (fd < 0)
                return;
        /* TCSADRAIN: what the command printed last is shown before echo comes back. */
        while (tcsetattr(fd, TCSADRAIN, &saved) < 0 && errno == EINTR)
                ;
        saved_fd = -1;
}

/* SIGPIPE (stdout a pipe whose reader ended: `sbx exec -t ... | head -1`) ends sbx as it
 * would have, once the terminal is restored: its default action skips atexit. */
static void on_sigpipe(int sig) {
        cli_tty_restore();
        signal(sig, SIG_DFL);
        raise(sig); /* blocked in its handler: delivered, by default, when it returns */
}

/* Catches sig with fn when it has its default action (not when ignored). */
static void catch_default(int sig, void (*fn)(int)) {
        struct sigaction sa, old;

        if (sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL)
                return;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = fn;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        (void)sigaction(sig, &sa, NULL);
}

/* SIGCONT: sbx goes on after a stop (a SIGSTOP, or the SIGTSTP below), perhaps after the
 * shell put its own settings on the terminal meanwhile: raw mode again, as ssh -t does. */
static void on_sigcont(int sig) {
        int e = errno;

        (void)sig;
        if (saved_fd >= 0)
                (void)tcsetattr(saved_fd, TCSADRAIN, &raw_mode);
        errno = e;
}

/* SIGTSTP from outside (in raw mode Ctrl-Z is only a byte for the command): the
 * terminal as it was, then the stop itself; on_sigcont makes it raw again. */
static void on_sigtstp(int sig) {
        int e = errno, fd = saved_fd;
        sigset_t one;

        if (fd >= 0)
                (void)tcsetattr(fd, TCSADRAIN, &saved);
        signal(sig, SIG_DFL);
        sigemptyset(&one);
        sigaddset(&one, sig);
        (void)raise(sig);
        (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL); /* it stops here until SIGCONT */
        (void)pthread_sigmask(SIG_BLOCK, &one, NULL);
        signal(sig, on_sigtstp);
        /* Raw again (also when the kernel dropped the stop: an orphaned process group). */
        if (fd >= 0 && saved_fd >= 0)
                (void)tcsetattr(fd, TCSADRAIN, &raw_mode);
        errno = e;
}

int cli_tty_raw(int fd) {
        static bool registered;
        struct termios raw;
        int r;

        if (saved_fd >= 0)
                return 0;
        if (tcgetattr(fd, &saved) < 0)
                return -errno;
        raw = saved;
        raw.c_iflag |= IGNPAR;
        raw.c_iflag &= ~(tcflag_t)(ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXANY | IXOFF | IUCLC);
        raw.c_lflag &= ~(tcflag_t)(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
        raw.c_oflag &= ~(tcflag_t)OPOST;
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        if (!registered && atexit(cli_tty_restore) == 0)
                registered = true;
        catch_default(SIGPIPE, on_sigpipe);
        catch_default(SIGTSTP, on_sigtstp);
        catch_default(SIGCONT, on_sigcont);
        raw_mode = raw;
        saved_fd = fd;
        while ((r = tcsetattr(fd, TCSADRAIN, &raw)) < 0 && errno == EINTR)
                ; /* a signal sbx exec forwards (SIGWINCH) came meanwhile */
        if (r < 0) {
                int e = errno;
                saved_fd = -1;
                return -e;
        }
        return 0;
}

int cli_tty_size(int fd, uint32_t *ret_rows, uint32_t *ret_cols) {
        struct winsize ws;

        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0)
                return -EINVAL; /* a terminal that does not know its size */
        *ret_rows = ws.ws_row > SBX_MAX_TTY_DIM ? SBX_MAX_TTY_DIM : ws.ws_row;
        *ret_cols = ws.ws_col > SBX_MAX_TTY_DIM ? SBX_MAX_TTY_DIM : ws.ws_col;
        return 0;
}
