/* cli_relay.c: the copy of bytes both ways that `sbx dial-stdio` and `sbx port-forward`
 * make, with a half-close passed on each way.
 *
 * Two sides: the client's (bytes come from client_in and go to client_out: stdin and
 * stdout of dial-stdio, or one accepted socket of port-forward) and the far side (the
 * daemon's socket, or a stream of sbx_open_port). Each direction reads into its own
 * buffer and writes it out before it reads again, so a slow reader stalls only its own
 * direction, and only this relay. Owns nothing: the caller opens and closes the
 * descriptors (an output that is not a socket is closed here to pass its end on). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF_BYTES (64u * 1024u)

/* One direction of the copy: bytes read from `from` wait in buf until `to` takes them. */
struct pump {
        int from, to;
        uint8_t buf[RELAY_BUF_BYTES];
        size_t off, len;
        bool eof;  /* from has ended: nothing more to read */
        bool done;   /* eof and everything written, the end passed on */
        bool closed; /* to was closed to pass the end on (it was not a socket) */
};

/* Passes the end of p's input on to its output: a socket is shut down for writing, any
 * other descriptor closed (the reader of a pipe sees its end). */
static void pump_finish(struct pump *p) {
        int type;
        socklen_t len = sizeof(type);

        p->done = true;
        if (getsockopt(p->to, SOL_SOCKET, SO_TYPE, &type, &len) == 0)
                (void)shutdown(p->to, SHUT_WR);
        else {
                (void)close(p->to);
                p->closed = true;
        }
}

/* Does what poll said p may do. 0, -EPIPE when its output's reader went away, or
 * -errno of another failure to write. */
static int pump_step(struct pump *p, short rev_from, short rev_to) {
        if (p->len > p->off && (rev_to & (POLLOUT | POLLERR | POLLHUP))) {
                ssize_t n = write(p->to, p->buf + p->off, p->len - p->off);
                if (n < 0 && errno != EINTR && errno != EAGAIN)
                        return errno == EPIPE || errno == ECONNRESET ? -EPIPE : -errno;
                if (n > 0)
                        p->off += (size_t)n;
                if (p->off == p->len)
                        p->off = p->len = 0;
        }
        if (!p->eof && p->len == 0 && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t n = read(p->from, p->buf, sizeof(p->buf));
                if (n > 0)
                        p->len = (size_t)n;
                else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                        p->eof = true; /* an error reading is an end as well */
        }
        if (p->eof && p->len == 0 && !p->done)
                pump_finish(p);
        return 0;
}

/* The poll entries of p: its input when it may read, its output when it has bytes. An
 * entry with nothing to wait for is off (-1), or a hang-up would spin the loop. */
static void pump_poll(const struct pump *p, struct pollfd *in, struct pollfd *out) {
        *in = (struct pollfd){.fd = -1};
        *out = (struct pollfd){.fd = -1};
        if (!p->eof && p->len == 0)
                *in = (struct pollfd){.fd = p->from, .events = POLLIN};
        if (p->len > p->off)
                *out = (struct pollfd){.fd = p->to, .events = POLLOUT};
}

/* The loop of relay_copy over the two directions. Once the far side's direction has
 * ended, its socket is still watched for a hang-up (POLLHUP: the far side closed
 * altogether, a daemon that restarted, not a half-close), which ends the copy at once:
 * a client that then writes must find the pipe closed, not a copy that swallows its
 * bytes. With end_with_far the far side's end ends the copy. */
static int relay_loop(struct pump *up, struct pump *down, bool end_with_far) {
        int r = 0;

        while (!(up->done && down->done) && !(end_with_far && down->done)) {
                struct pollfd p[5];
                pump_poll(up, &p[0], &p[1]);
                pump_poll(down, &p[2], &p[3]);
                p[4] = (struct pollfd){.fd = down->done ? down->from : -1};
                if (poll(p, 5, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[4].revents & (POLLHUP | POLLERR))
                        return 0;
                r = pump_step(up, p[0].revents, p[1].revents);
                if (r == -EPIPE) /* the far side stopped reading: it closed */
                        r = 0, up->eof = up->done = true, up->len = up->off = 0;
                if (r == 0)
                        r = pump_step(down, p[2].revents, p[3].revents);
                if (r == -EPIPE) /* the client went away: nothing more to deliver */
                        return 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int set_nonblock(int fd) {
        int saved = fcntl(fd, F_GETFL);

        if (saved >= 0 && !(saved & O_NONBLOCK))
                (void)fcntl(fd, F_SETFL, saved | O_NONBLOCK);
        return saved;
}

static void restore_flags(int fd, int saved) {
        if (saved >= 0 && !(saved & O_NONBLOCK))
                (void)fcntl(fd, F_SETFL, saved);
}

int relay_copy(int client_in, int client_out, int far, bool end_with_far) {
        struct pump *up = malloc(sizeof(*up)), *down = malloc(sizeof(*down));
        int saved[3], r;

        if (!up || !down) {
                free(up);
                free(down);
                return -ENOMEM;
        }
        *up = (struct pump){.from = client_in, .to = far};
        *down = (struct pump){.from = far, .to = client_out};
        saved[0] = set_nonblock(client_in);
        saved[1] = client_out == client_in ? -1 : set_nonblock(client_out);
        saved[2] = set_nonblock(far);
        r = relay_loop(up, down, end_with_far);
        restore_flags(client_in, saved[0]);
        if (!down->closed)
                restore_flags(client_out, saved[1]);
        restore_flags(far, saved[2]);
        free(up);
        free(down);
        return r;
}
