/* sbsock.c: sockets made by a sandbox's init, their requests and checks; see sbsock.h.
 *
 * Owns nothing but the descriptors passing through sbsock_made (each ends with its
 * request's owner or closed). Called by the lifecycle (sandbox.c) only. */
#include "sbsock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sbx_limits.h"

int sbsock_reserve(struct sbsock_set *set, uint64_t *ret_id) {
        if (set->n_pending >= SBX_SANDBOX_MAX_PENDING_SOCKETS)
                return -EAGAIN;
        *ret_id = ++set->next_id;
        return 0;
}

/* Puts req at the head of set's requests, counted as pending or held as it says. */
static void link_req(struct sbsock_set *set, struct sbsock_req *req) {
        req->set = set;
        req->prev = NULL;
        req->next = set->head;
        if (set->head)
                set->head->prev = req;
        set->head = req;
        if (req->pending)
                set->n_pending++;
        else
                set->n_held++;
}

void sbsock_add(struct sbsock_set *set, struct sbsock_req *req, uint64_t id, bool ipv6,
                const struct sbsock_ops *ops, void *ud) {
        memset(req, 0, sizeof(*req));
        req->id = id;
        req->ipv6 = ipv6;
        req->pending = true;
        req->ops = ops;
        req->ud = ud;
        link_req(set, req);
}

void sbsock_release(struct sbsock_req *req) {
        struct sbsock_set *set = req->set;

        if (!set)
                return;
        if (req->prev)
                req->prev->next = req->next;
        else
                set->head = req->next;
        if (req->next)
                req->next->prev = req->prev;
        if (req->pending)
                set->n_pending--;
        else
                set->n_held--;
        req->next = req->prev = NULL;
        req->set = NULL;
}

/* Reads one socket option as an int; -errno when it cannot. */
static int sockopt_int(int fd, int opt, int *ret) {
        socklen_t len = sizeof(*ret);
        return getsockopt(fd, SOL_SOCKET, opt, ret, &len) < 0 ? -errno : 0;
}

/* 1 when fd is bound to nothing: its own address is the family's any address, port 0. */
static int unbound(int fd, int family) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        memset(&ss, 0, sizeof(ss));
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return -errno;
        if (family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
                return in->sin_port == 0 && in->sin_addr.s_addr == htonl(INADDR_ANY);
        }
        {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
                return in6->sin6_port == 0 && IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
        }
}

/* 1 when fd's network namespace is netns_dev/netns_ino. SIOCGSKNS (Linux 4.9) needs
 * CAP_NET_ADMIN over the namespace's user namespace: root has it, and a rootless daemon
 * owns the user namespace its sandboxes' namespaces belong to. */
static int in_netns(int fd, dev_t netns_dev, ino_t netns_ino) {
        struct stat st;
        int ns = ioctl(fd, SIOCGSKNS);
        int r;

        if (ns < 0)
                return -errno;
        r = fstat(ns, &st) < 0 ? -errno : st.st_dev == netns_dev && st.st_ino == netns_ino;
        close(ns);
        return r;
}

int sbsock_check(int fd, int family, dev_t netns_dev, ino_t netns_ino) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int domain, type, proto, listening, r;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EPROTO;
        if ((r = sockopt_int(fd, SO_DOMAIN, &domain)) < 0 ||
            (r = sockopt_int(fd, SO_TYPE, &type)) < 0 ||
            (r = sockopt_int(fd, SO_PROTOCOL, &proto)) < 0 ||
            (r = sockopt_int(fd, SO_ACCEPTCONN, &listening)) < 0)
                return r == -ENOPROTOOPT ? -EPROTO : r;
        if (domain != family || type != SOCK_STREAM || proto != IPPROTO_TCP || listening)
                return -EPROTO;
        /* Connected (or connecting) to nothing, bound to nothing. */
        if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 || errno != ENOTCONN)
                return -EPROTO;
        r = unbound(fd, family);
        if (r <= 0)
                return r < 0 ? r : -EPROTO;
        r = in_netns(fd, netns_dev, netns_ino);
        return r < 0 ? r : r ? 0 : -EPROTO;
}

int sbsock_pin_netns(struct sbsock_set *set, pid_t pid, int pidfd) {
        char path[64];
        struct stat st;

        if (set->netns_ino)
                return 0;
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        if (pid <= 0 || stat(path, &st) < 0)
                return pid <= 0 ? -ESRCH : -errno;
        /* The pid named PID 1 when we looked only if its pidfd still names a live process
         * now (a pidfd pins its process, not the number). */
        if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                return -errno;
        set->netns_dev = st.st_dev;
        set->netns_ino = st.st_ino;
        return 0;
}

static struct sbsock_req *find_pending(struct sbsock_set *set, uint64_t id) {
        struct sbsock_req *req;

        for (req = set->head; req; req = req->next)
                if (req->pending && req->id == id)
                        return req;
        return NULL;
}

int sbsock_made(struct sbsock_set *set, uint64_t id, int err, int fd) {
        struct sbsock_req *req = find_pending(set, id);
        int r;

        if (!req) {
                /* An id never asked for is init misbehaving; one its owner has let go
                 * of meanwhile is not. */
                if (fd >= 0)
                        close(fd);
                return id == 0 || id > set->next_id ? -EPROTO : 0;
        }
        if (err != 0) /* init's errno: untrusted, any value */
                r = err > 0 && err < 4096 ? -err : -EPROTO;
        else if (fd < 0 || !set->netns_ino)
                r = -EPROTO;
        else
                r = sbsock_check(fd, req->ipv6 ? AF_INET6 : AF_INET, set->netns_dev,
                                 set->netns_ino);
        if (r < 0 && fd >= 0) {
                close(fd);
                fd = -1;
        }
        sbsock_release(req);
        if (r == 0) {
                /* Held from now on, until its owner lets go or the sandbox ends. */
                req->pending = false;
                link_req(set, req);
        }
        req->ops->made(req->ud, fd, r);
        return 0;
}

void sbsock_end(struct sbsock_set *set, const char *why) {
        while (set->head) {
                struct sbsock_req *req = set->head;
                bool pending = req->pending;
                sbsock_release(req);
                if (pending)
                        req->ops->made(req->ud, -1, -ENODEV);
                else
                        req->ops->ended(req->ud, why);
        }
}
