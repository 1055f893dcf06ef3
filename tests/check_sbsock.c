/* check_sbsock.c: unit tests of daemon/sbsock.c, the checks of a socket a sandbox's init
 * hands over (MakeSocket) and the requests waiting for or holding one.
 *
 * What is proved: an unconnected, unbound TCP socket of the expected family and network
 * namespace passes; anything else init could send is refused as -EPROTO: another
 * family, UDP, a Unix socket, a pipe, a listening, bound or connected TCP socket, and a
 * TCP socket of another network namespace (made by a child in a namespace of its own,
 * with and without a user namespace: root mode and rootless). The set: a request gets
 * its checked socket once, is told of the sandbox's end once (pending: made with
 * -ENODEV; held: ended), an answer for a request let go of is closed quietly, an id
 * never asked for is -EPROTO, init's errno reaches the request, a socket that fails
 * the check is closed, and at most 64 wait at once. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbsock.h"
#include "sbx_limits.h"
#include "testutil.h"

static dev_t own_dev;
static ino_t own_ino;

static void own_netns(void) {
        struct stat st;
        ck_assert_int_eq(stat("/proc/self/ns/net", &st), 0);
        own_dev = st.st_dev;
        own_ino = st.st_ino;
}

static int tcp(int family) {
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static bool is_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

START_TEST(unconnected_tcp_of_its_netns_passes) {
        int fd4 = tcp(AF_INET), fd6 = tcp(AF_INET6);

        own_netns();
        ck_assert_int_eq(sbsock_check(fd4, AF_INET, own_dev, own_ino), 0);
        ck_assert_int_eq(sbsock_check(fd6, AF_INET6, own_dev, own_ino), 0);
        /* The family asked for, not any. */
        ck_assert_int_eq(sbsock_check(fd6, AF_INET, own_dev, own_ino), -EPROTO);
        ck_assert_int_eq(sbsock_check(fd4, AF_INET6, own_dev, own_ino), -EPROTO);
        close(fd4);
        close(fd6);
}
END_TEST

/* A listening socket on 127.0.0.1 and a port of it. */
static int listener(struct sockaddr_in *sa) {
        socklen_t len = sizeof(*sa);
        int fd = tcp(AF_INET);

        memset(sa, 0, sizeof(*sa));
        sa->sin_family = AF_INET;
        sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
        ck_assert_int_eq(listen(fd, 4), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)sa, &len), 0);
        return fd;
}

START_TEST(anything_else_is_refused) {
        struct sockaddr_in sa, any;
        int lfd, udp, unx, pfd[2], bound, conn, r;

        own_netns();
        lfd = listener(&sa);
        ck_assert_int_eq(sbsock_check(lfd, AF_INET, own_dev, own_ino), -EPROTO);
        udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(sbsock_check(udp, AF_INET, own_dev, own_ino), -EPROTO);
        unx = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(sbsock_check(unx, AF_INET, own_dev, own_ino), -EPROTO);
        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
        ck_assert_int_eq(sbsock_check(pfd[0], AF_INET, own_dev, own_ino), -EPROTO);
        /* Bound to a port of its own. */
        bound = tcp(AF_INET);
        any = sa;
        any.sin_port = 0;
        ck_assert_int_eq(bind(bound, (struct sockaddr *)&any, sizeof(any)), 0);
        ck_assert_int_eq(sbsock_check(bound, AF_INET, own_dev, own_ino), -EPROTO);
        /* Connected, and connecting. */
        conn = tcp(AF_INET);
        r = connect(conn, (struct sockaddr *)&sa, sizeof(sa));
        ck_assert(r == 0 || errno == EINPROGRESS);
        ck_assert_int_eq(sbsock_check(conn, AF_INET, own_dev, own_ino), -EPROTO);
        close(lfd);
        close(udp);
        close(unx);
        close(pfd[0]);
        close(pfd[1]);
        close(bound);
        close(conn);
}
END_TEST

/* A TCP socket made by a child in a new network namespace (and user namespace when
 * userns), received over a socketpair; ret_dev and ret_ino: that namespace. */
static int foreign_socket(bool userns, dev_t *ret_dev, ino_t *ret_ino) {
        int sp[2], fd = -1, status;
        char path[64], c = 0;
        struct stat st;
        pid_t pid;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int s;
                close(sp[0]);
                if (unshare(CLONE_NEWNET | (userns ? CLONE_NEWUSER : 0)) < 0)
                        _exit(2);
                s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                {
                        char cm[CMSG_SPACE(sizeof(int))] = {0};
                        struct iovec iov = {.iov_base = &c, .iov_len = 1};
                        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                                            .msg_control = cm, .msg_controllen = sizeof(cm)};
                        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
                        h->cmsg_level = SOL_SOCKET;
                        h->cmsg_type = SCM_RIGHTS;
                        h->cmsg_len = CMSG_LEN(sizeof(int));
                        memcpy(CMSG_DATA(h), &s, sizeof(int));
                        if (s < 0 || sendmsg(sp[1], &mh, 0) != 1)
                                _exit(3);
                }
                /* Lives until the parent has looked at its namespace. */
                (void)!read(sp[1], &c, 1);
                _exit(0);
        }
        close(sp[1]);
        {
                char cm[CMSG_SPACE(sizeof(int))];
                struct iovec iov = {.iov_base = &c, .iov_len = 1};
                struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm,
                                    .msg_controllen = sizeof(cm)};
                ck_assert_int_eq(recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC), 1);
                ck_assert_ptr_nonnull(CMSG_FIRSTHDR(&mh));
                memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
        }
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        ck_assert_int_eq(stat(path, &st), 0);
        *ret_dev = st.st_dev;
        *ret_ino = st.st_ino;
        close(sp[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_int_eq(status, 0);
        return fd;
}

START_TEST(socket_of_another_netns_is_refused) {
        dev_t dev;
        ino_t ino;
        int fd;

        own_netns();
        fd = foreign_socket(_i == 1, &dev, &ino);
        ck_assert(ino != own_ino);
        ck_assert_int_eq(sbsock_check(fd, AF_INET, own_dev, own_ino), -EPROTO);
        /* Control: it is a socket the check takes in its own namespace. */
        ck_assert_int_eq(sbsock_check(fd, AF_INET, dev, ino), 0);
        close(fd);
}
END_TEST

/* ---- the set ---------------------------------------------------------------------- */

struct user {
        struct sbsock_req req;
        int made_n, ended_n;
        int fd, err;
};

static void on_made(void *ud, int fd, int err) {
        struct user *u = ud;
        u->made_n++;
        u->fd = fd;
        u->err = err;
}

static void on_ended(void *ud, const char *why) {
        struct user *u = ud;
        ck_assert_ptr_nonnull(why);
        u->ended_n++;
}

static const struct sbsock_ops ops = {.made = on_made, .ended = on_ended};

static uint64_t ask(struct sbsock_set *set, struct user *u, bool ipv6) {
        uint64_t id;
        memset(u, 0, sizeof(*u));
        u->fd = -1;
        ck_assert_int_eq(sbsock_reserve(set, &id), 0);
        sbsock_add(set, &u->req, id, ipv6, &ops, u);
        return id;
}

START_TEST(requests_get_their_socket_and_the_end) {
        struct sbsock_set set;
        struct user a, b, c;
        uint64_t ia, ib;
        int fd;

        memset(&set, 0, sizeof(set));
        ck_assert_int_eq(sbsock_pin_netns(&set, getpid(), -1), 0);
        ia = ask(&set, &a, false);
        ib = ask(&set, &b, true);
        ck_assert_uint_eq(set.n_pending, 2);
        fd = tcp(AF_INET);
        ck_assert_int_eq(sbsock_made(&set, ia, 0, fd), 0);
        ck_assert_int_eq(a.made_n, 1);
        ck_assert_int_eq(a.fd, fd);
        ck_assert_int_eq(a.err, 0);
        ck_assert_uint_eq(set.n_pending, 1);
        ck_assert_uint_eq(set.n_held, 1);
        /* Answered twice: the second is an id no longer pending, its socket closed. */
        fd = tcp(AF_INET);
        ck_assert_int_eq(sbsock_made(&set, ia, 0, fd), 0);
        ck_assert(!is_open(fd));
        ck_assert_int_eq(a.made_n, 1);
        /* An id never asked for is init misbehaving. */
        fd = tcp(AF_INET);
        ck_assert_int_eq(sbsock_made(&set, ib + 1, 0, fd), -EPROTO);
        ck_assert(!is_open(fd));
        /* The end: the pending one is made with -ENODEV, the held one is ended. */
        ask(&set, &c, false);
        sbsock_release(&c.req);
        sbsock_end(&set, "the sandbox ended");
        ck_assert_int_eq(a.ended_n, 1);
        ck_assert_int_eq(a.made_n, 1);
        ck_assert_int_eq(b.made_n, 1);
        ck_assert_int_eq(b.err, -ENODEV);
        ck_assert_int_eq(b.ended_n, 0);
        ck_assert_int_eq(c.made_n + c.ended_n, 0);
        ck_assert_ptr_null(set.head);
        ck_assert_uint_eq(set.n_pending + set.n_held, 0);
        sbsock_release(&a.req); /* a no-op now */
        close(a.fd);
}
END_TEST

START_TEST(bad_answers_reach_the_request_as_errors) {
        struct sbsock_set set;
        struct user a, b, c, d;
        uint64_t id;
        int fd;

        memset(&set, 0, sizeof(set));
        ck_assert_int_eq(sbsock_pin_netns(&set, getpid(), -1), 0);
        /* init's errno. */
        id = ask(&set, &a, false);
        ck_assert_int_eq(sbsock_made(&set, id, EMFILE, -1), 0);
        ck_assert_int_eq(a.err, -EMFILE);
        ck_assert_int_eq(a.fd, -1);
        /* An errno no kernel gives, with a descriptor anyway. */
        id = ask(&set, &b, false);
        fd = tcp(AF_INET);
        ck_assert_int_eq(sbsock_made(&set, id, -5, fd), 0);
        ck_assert_int_eq(b.err, -EPROTO);
        ck_assert(!is_open(fd));
        /* A socket of the wrong family; then success without a descriptor. */
        id = ask(&set, &c, false);
        fd = tcp(AF_INET6);
        ck_assert_int_eq(sbsock_made(&set, id, 0, fd), 0);
        ck_assert_int_eq(c.err, -EPROTO);
        ck_assert_int_eq(c.fd, -1);
        ck_assert(!is_open(fd));
        id = ask(&set, &d, false);
        ck_assert_int_eq(sbsock_made(&set, id, 0, -1), 0);
        ck_assert_int_eq(d.err, -EPROTO);
        ck_assert_uint_eq(set.n_pending + set.n_held, 0);
}
END_TEST

START_TEST(at_most_64_pending) {
        static struct user u[SBX_SANDBOX_MAX_PENDING_SOCKETS];
        struct sbsock_set set;
        struct user last;
        uint64_t id;
        unsigned i;

        memset(&set, 0, sizeof(set));
        for (i = 0; i < SBX_SANDBOX_MAX_PENDING_SOCKETS; i++)
                ask(&set, &u[i], false);
        ck_assert_int_eq(sbsock_reserve(&set, &id), -EAGAIN);
        /* One answered (refused here: no namespace known) makes room. */
        ck_assert_int_eq(sbsock_made(&set, u[0].req.id, 0, tcp(AF_INET)), 0);
        ck_assert_int_eq(u[0].err, -EPROTO);
        ask(&set, &last, false);
        sbsock_end(&set, "the sandbox ended");
        for (i = 1; i < SBX_SANDBOX_MAX_PENDING_SOCKETS; i++)
                ck_assert_int_eq(u[i].err, -ENODEV);
        ck_assert_int_eq(last.err, -ENODEV);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("sbsock");
        TCase *tc = tcase_create("sbsock");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, unconnected_tcp_of_its_netns_passes);
        tcase_add_test(tc, anything_else_is_refused);
        tcase_add_loop_test(tc, socket_of_another_netns_is_refused, 0, 2);
        tcase_add_test(tc, requests_get_their_socket_and_the_end);
        tcase_add_test(tc, bad_answers_reach_the_request_as_errors);
        tcase_add_test(tc, at_most_64_pending);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
