/* sbsock.h: TCP sockets a sandbox's init makes in the sandbox's network namespace for
 * the daemon (init.proto MakeSocket / SocketMade), and the daemon's checks of them.
 *
 * The daemon never enters a sandbox's namespaces: to reach a port of the sandbox's own
 * loopback (OpenPort), it asks PID 1, which lives in that namespace, for an unconnected
 * TCP socket, and connects it itself. What PID 1 hands over is untrusted: sbsock_check
 * refuses anything but an unconnected, unbound TCP socket of the expected family whose
 * network namespace is the sandbox's.
 *
 * A struct sbsock_req is one caller's use of such a socket, embedded in the caller's own
 * object: registered with its sandbox's struct sbsock_set (embedded in struct sandbox,
 * driven by sandbox.c) from the request until the caller lets go of it, so that the
 * sandbox's end reaches every user of its sockets. Loop thread only. */
#ifndef SBX_SBSOCK_H
#define SBX_SBSOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What a request tells its owner (ud as given to sbsock_add). */
struct sbsock_ops {
        /* Once per request, never from within sbsock_add: fd (the owner's from now on; a
         * checked socket, non-blocking, close-on-exec) and err 0, or fd -1 and err -errno:
         * init could not make one (its errno), sent something else (-EPROTO), or the
         * sandbox ended (-ENODEV; then `ended` does not follow). */
        void (*made)(void *ud, int fd, int err);
        /* The sandbox ends while the request is registered after `made` gave a socket:
         * why is one line ("the sandbox ended"). The request is no longer registered. */
        void (*ended)(void *ud, const char *why);
};

struct sbsock_set;

struct sbsock_req {
        struct sbsock_req *next, *prev;
        struct sbsock_set *set; /* NULL: not registered */
        uint64_t id;
        bool ipv6;
        bool pending; /* made not called yet */
        const struct sbsock_ops *ops;
        void *ud;
};

/* One sandbox's requests. Zeroed memory is an empty set. */
struct sbsock_set {
        struct sbsock_req *head;
        unsigned n_pending;
        unsigned n_held;
        uint64_t next_id;
        dev_t netns_dev; /* the sandbox's network namespace (nsfs inode), once known */
        ino_t netns_ino;
};

/* Takes the next request id (*ret_id, the MakeSocket id to send) when fewer than
 * SBX_SANDBOX_MAX_PENDING_SOCKETS are pending: 0, or -EAGAIN. */
int sbsock_reserve(struct sbsock_set *set, uint64_t *ret_id);

/* Registers req (the caller's memory, until sbsock_release or the set's end) as the
 * request of id (from sbsock_reserve, its MakeSocket sent) for a socket of the family
 * ipv6 says. */
void sbsock_add(struct sbsock_set *set, struct sbsock_req *req, uint64_t id, bool ipv6,
                const struct sbsock_ops *ops, void *ud);

/* Unregisters req (nothing more is called on it); a no-op when it is not registered. */
void sbsock_release(struct sbsock_req *req);

/* init answered request id: err is SocketMade.error_errno (0: none), fd the one
 * descriptor the packet carried or -1 (taken in every case). The socket is checked
 * (sbsock_check, against the set's network namespace, which must be known) and given
 * to its request; a descriptor with an error, or for a request let go of meanwhile, is
 * closed. Returns 0, or -EPROTO when init answered an id never asked for. */
int sbsock_made(struct sbsock_set *set, uint64_t id, int err, int fd);

/* The sandbox ends: each pending request gets made(-1, -ENODEV), each held one
 * ended(why); none stays registered. */
void sbsock_end(struct sbsock_set *set, const char *why);

/* Learns the network namespace of the sandbox whose PID 1 is pid, pinned by pidfd (-1:
 * none): /proc/PID/ns/net, then the pidfd says the pid was still that process. 0, or
 * -errno (-ESRCH when it has exited). Kept in the set; a no-op once known. */
int sbsock_pin_netns(struct sbsock_set *set, pid_t pid, int pidfd);

/* 0 when fd is an unconnected, unbound, non-listening TCP socket of family (AF_INET or
 * AF_INET6) in the network namespace netns_dev/netns_ino (ioctl SIOCGSKNS); -EPROTO
 * when it is something else, or -errno when it cannot be told. */
int sbsock_check(int fd, int family, dev_t netns_dev, ino_t netns_ino);

#endif
