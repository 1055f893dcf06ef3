/* check_server.c: unit tests of sbxd's listening socket and its admission of
 * connections (server.c), in this process, without a daemon process: a server bound to
 * a socket in a temporary directory, over the core of tests/inproc.h, with the real
 * connection handlers (conn.c, rpc.c).
 *
 * Admission: the per-uid cap (a connection over it gets RESOURCE_EXHAUSTED with request
 * id 0 and is closed; refused connections do not count; a closed one frees its place),
 * the total cap, a rootless daemon's users, the uids of a root daemon's sandboxes, and a
 * peer whose process is gone. The uid tests run a child as another user and need
 * root. Start-up: a second server on the same socket is refused, a stale socket is
 * replaced. */
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "inproc.h"
#include "server.h"
#include "testutil.h"

static struct core K;
static struct server S;
static char sock_path[100];

/* A core and a listening server at DIR/s. */
static void begin(void) {
        core_init(&K);
        snprintf(sock_path, sizeof(sock_path), "%s/s", K.dir);
        ck_assert_int_eq(server_bind(&S, &K.d, sock_path), 0);
        K.d.server = &S;
        ck_assert_int_eq(server_listen(&S), 0);
}

static int no_conns(void *ud) {
        return S.n_conns == 0;
}

/* Closes every peer, waits until the server has forgotten every connection, then takes
 * the server and the core down. */
static void end(struct peer *peers, int n) {
        int i;

        for (i = 0; i < n; i++)
                peer_close(&peers[i]);
        ck_assert_msg(core_run_until(&K, no_conns, NULL, 5000), "%u connections left",
                      S.n_conns);
        server_stop_listening(&S);
        server_release(&S);
        free(S.path);
        core_free(&K);
}

/* A socket connected to the server (not accepted yet), nonblocking. */
static int dial(void) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int64_t end = core_now_ms() + 5000;

        ck_assert_int_ge(fd, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        /* A full backlog answers EAGAIN: the loop accepts, and we try again. */
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                ck_assert_msg(errno == EAGAIN, "connect: %s", strerror(errno));
                ck_assert(core_now_ms() < end);
                core_turns(&K, 1);
        }
        return fd;
}

/* Connects a peer and proves it is served: Hello is answered. */
static void connect_served(struct peer *p, uint64_t rid) {
        Sbx__V1__Response *r;

        peer_adopt(p, dial());
        peer_send_hello(&K, p, rid);
        r = peer_wait(&K, p);
        ck_assert_msg(r != NULL, "closed instead of served");
        ck_assert_int_eq(r->body_case, SBX__V1__RESPONSE__BODY_HELLO);
        sbx__v1__response__free_unpacked(r, NULL);
}

/* Connects a peer and expects the refusal: one status with request id 0, then the end. */
static void connect_refused(struct peer *p, Sbx__V1__Code code, const char *why) {
        peer_adopt(p, dial());
        peer_expect_status(&K, p, 0, code, why);
        peer_wait_eof(&K, p);
}

START_TEST(per_uid_cap) {
        struct peer p[5];

        begin();
        K.cfg.max_connections_per_uid = 2;
        connect_served(&p[0], 1);
        connect_served(&p[1], 1);
        connect_refused(&p[2], SBX__V1__CODE__RESOURCE_EXHAUSTED,
                        "has 2 connections open, the daemon's maximum per user "
                        "(--max-connections-per-uid 2)");
        /* The refused one never counted: still two served, still full. */
        connect_refused(&p[3], SBX__V1__CODE__RESOURCE_EXHAUSTED, "--max-connections-per-uid");
        /* A served one goes: its place is free once the server has closed it. */
        peer_close(&p[0]);
        ck_assert(core_run_until(&K, no_conns, NULL, 300) == 0); /* p[1] stays */
        connect_served(&p[4], 1);
        end(p, 5);
}
END_TEST

/* SBX_MAX_CONNECTIONS open connections, the per-uid cap out of the way: the next one is
 * refused by the total cap. */
START_TEST(total_cap) {
        static struct peer p[SBX_MAX_CONNECTIONS + 1];
        struct rlimit rl;
        unsigned i;

        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max < 2 * SBX_MAX_CONNECTIONS + 64) {
                fprintf(stderr, "total_cap: RLIMIT_NOFILE hard limit %llu too low, skipped\n",
                        (unsigned long long)rl.rlim_max);
                return;
        }
        rl.rlim_cur = rl.rlim_max;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        begin();
        K.cfg.max_connections_per_uid = SBX_MAX_CONNECTIONS;
        for (i = 0; i < SBX_MAX_CONNECTIONS - 1; i++)
                peer_adopt(&p[i], dial());
        connect_served(&p[SBX_MAX_CONNECTIONS - 1], 7);
        ck_assert_uint_eq(S.n_conns, SBX_MAX_CONNECTIONS);
        connect_refused(&p[SBX_MAX_CONNECTIONS], SBX__V1__CODE__RESOURCE_EXHAUSTED,
                        "connections open, its maximum");
        end(p, SBX_MAX_CONNECTIONS + 1);
}
END_TEST

/* A child that becomes uid (when uid is not -1) connects on fd and exits; the socket
 * stays the caller's, whose peer is then a process that is gone. */
static void connect_from_child(int fd, uid_t uid) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int st;
        pid_t pid;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (uid != (uid_t)-1 &&
                    (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
                     setresuid(uid, uid, uid) < 0))
                        _exit(1);
                _exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : 2);
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
}

static int other_user_refused(uid_t uid, Sbx__V1__Code code, const char *why) {
        struct peer p;
        int fd;

        if (geteuid() != 0)
                return 0;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        /* The directory must let the other user reach the socket. */
        ck_assert_int_eq(chmod(K.dir, 0755), 0);
        ck_assert_int_eq(chmod(sock_path, 0666), 0);
        connect_from_child(fd, uid);
        peer_adopt(&p, fd);
        peer_expect_status(&K, &p, 0, code, why);
        peer_wait_eof(&K, &p);
        end(&p, 1);
        return 1;
}

/* A rootless daemon serves its own user and root, nobody else. */
START_TEST(rootless_serves_only_its_user) {
        struct peer p;

        begin();
        K.d.euid = 4242; /* as if rootless */
        connect_served(&p, 1); /* root */
        peer_close(&p);
        if (!other_user_refused(65534, SBX__V1__CODE__PERMISSION_DENIED,
                                "runs as uid 4242 without privileges and serves only that user")) {
                fprintf(stderr, "rootless_serves_only_its_user: not root, skipped\n");
                end(NULL, 0);
        }
}
END_TEST

/* A root daemon refuses the uids its sandboxes' commands run as. */
START_TEST(sandbox_uids_refused) {
        begin();
        if (K.d.euid != 0) {
                fprintf(stderr, "sandbox_uids_refused: not root, skipped\n");
                end(NULL, 0);
                return;
        }
        ck_assert(other_user_refused(SBX_UID_BASE + 1, SBX__V1__CODE__PERMISSION_DENIED,
                                     "connections from sandboxed processes are refused"));
}
END_TEST

/* The process that connected is gone before the server looks at it: whoever uses the
 * socket now cannot be told apart from a sandboxed process, so it is refused. */
START_TEST(gone_peer_refused) {
        struct peer p;
        int fd;

        begin();
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        connect_from_child(fd, (uid_t)-1);
        peer_adopt(&p, fd);
        peer_expect_status(&K, &p, 0, SBX__V1__CODE__PERMISSION_DENIED,
                           "the connecting process (pid");
        peer_wait_eof(&K, &p);
        end(&p, 1);
}
END_TEST

/* A second server on a live socket is refused; a stale socket (nothing listening, no
 * lock) is replaced. */
START_TEST(bind_refuses_live_replaces_stale) {
        struct server s2;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct peer p;
        char stale[100];
        int fd;

        begin();
        memset(&s2, 0, sizeof(s2));
        ck_assert_int_eq(server_bind(&s2, &K.d, sock_path), -EADDRINUSE);
        /* A socket file nobody listens on. */
        snprintf(stale, sizeof(stale), "%s/stale", K.dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        ck_assert_int_eq(server_bind(&s2, &K.d, stale), 0);
        ck_assert_int_eq(server_listen(&s2), 0);
        server_stop_listening(&s2);
        ck_assert_int_eq(access(stale, F_OK), -1);
        server_release(&s2);
        free(s2.path);
        connect_served(&p, 1);
        end(&p, 1);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("server");
        TCase *admit = tcase_create("admission");
        TCase *bind_case = tcase_create("bind");

        tcase_set_timeout(admit, 60);
        tcase_add_test(admit, per_uid_cap);
        tcase_add_test(admit, total_cap);
        tcase_add_test(admit, rootless_serves_only_its_user);
        tcase_add_test(admit, sandbox_uids_refused);
        tcase_add_test(admit, gone_peer_refused);
        suite_add_tcase(s, admit);
        tcase_set_timeout(bind_case, 30);
        tcase_add_test(bind_case, bind_refuses_live_replaces_stale);
        suite_add_tcase(s, bind_case);
        return s;
}

SBX_TEST_MAIN(make_suite)
