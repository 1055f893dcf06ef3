/* initchan.h: the daemon's end of the channel to one sandbox's init helper (an AF_UNIX
 * SOCK_SEQPACKET socketpair, see init.proto and initmsg.h).
 *
 * Sends messages to init in order, queueing what the socket cannot take yet (a busy or
 * cpu-throttled init), and reads what init sends: every packet is size-checked by
 * initmsg, decoded, and handed to the owner through the callbacks it gave, untrusted
 * (the owner checks that it names commands it started). The channel knows nothing of
 * sandboxes or commands: it is the bottom of the sandbox layer, reaching its owner only
 * through those callbacks. Embedded in its owner (struct sandbox) and used on the loop
 * thread only. */
#ifndef SBX_INITCHAN_H
#define SBX_INITCHAN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "init.pb-c.h"

struct init_out;

/* What the channel tells its owner (ud is the one given to initchan_init). Messages are
 * valid during the call only; a callback may stop or close the channel. */
struct initchan_ops {
        /* init sent Ready (its setup is done, or failed: ready->ok says). Only while the
         * channel has not been stopped. fd: the one descriptor Ready carried when it says
         * so (proxy_listener), which the callee owns from now on, or -1. */
        void (*ready)(void *ud, const Sbx__Init__V1__Ready *ready, int fd);
        /* A spare's base is built (init.proto Built). Only while the channel has not
         * been stopped. */
        void (*built)(void *ud);
        /* A command could not be started (init.proto StartFailed). */
        void (*start_failed)(void *ud, uint64_t command_id, int err, const char *msg);
        /* A command started with `ack` has started (init.proto Started); may be NULL. */
        void (*started)(void *ud, uint64_t command_id);
        /* init answered a MakeSocket (init.proto SocketMade). Only while the channel has
         * not been stopped. fd: the socket the packet carried when it says no error,
         * which the callee owns from now on (unchecked), or -1. */
        void (*socket_made)(void *ud, const Sbx__Init__V1__SocketMade *made, int fd);
        /* A command's leader was reaped (init.proto Exited). */
        void (*exited)(void *ud, const Sbx__Init__V1__Exited *ex);
        /* The channel failed: init misbehaved, went away, or cannot be written to. why is
         * one line ("its init closed the channel"). */
        void (*failed)(void *ud, const char *why);
        /* The channel's poll handle, closed by initchan_close, is closed now. */
        void (*handle_closed)(void *ud);
};

struct initchan {
        int fd; /* non-blocking once watched; -1 when none */
        uv_poll_t poll;
        int poll_inited;       /* poll is a live handle (closed by initchan_close) */
        int poll_active;       /* reading (and writing the queue) through the loop */
        int stopped;           /* the owner is ending: no more reading, failures not reported */
        struct init_out *outq; /* messages the socket could not take yet, in order */
        struct init_out *outq_tail;
        unsigned outq_n;
        const struct initchan_ops *ops;
        void *ud;
};

/* Sets ch up without a socket (fd -1); ops and ud are kept for ch's life. */
void initchan_init(struct initchan *ch, const struct initchan_ops *ops, void *ud);

/* Takes fd (a connected SOCK_SEQPACKET socket to init; ch owns it from now on) and makes
 * it non-blocking. */
void initchan_open(struct initchan *ch, int fd);

/* Puts the socket on loop: from now on incoming messages reach the callbacks and the
 * queue is written as room appears. Returns 0 (the poll handle is then ch's until
 * initchan_close) or -errno (nothing is watched). */
int initchan_watch(struct initchan *ch, uv_loop_t *loop);

/* Sends msg with nfds descriptors (duplicated when queued; the caller keeps its own).
 * Before initchan_watch nothing can be queued. Returns 0 when sent or queued, or
 * -errno; on failure ops->failed has been called unless ch was stopped. */
int initchan_send(struct initchan *ch, const Sbx__Init__V1__ToInit *msg, const int *fds,
                  size_t nfds);

/* Handles what init has sent and the loop has not read yet, without waiting: a timer
 * that fires after a long loop turn runs before the loop reads what arrived meanwhile.
 * At most 64 messages; nothing once ch is stopped. */
void initchan_take_pending(struct initchan *ch);

/* Handles every message init sent before it went away (exits of commands that ended
 * just before the sandbox, Ready with the reason of a failed setup), without waiting,
 * stopped or not. */
void initchan_drain(struct initchan *ch);

/* The owner is ending: reading stops, and a failure is no longer reported. */
void initchan_stop(struct initchan *ch);

/* Lets go of the channel: drops the queue, closes the poll handle (ops->handle_closed
 * follows on a later loop turn) and the socket. ch may be closed again. */
void initchan_close(struct initchan *ch);

#endif
