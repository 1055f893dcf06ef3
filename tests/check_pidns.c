/* check_pidns.c: telling a sandbox's PID namespace from any other (pidns.c), on real
 * namespaces: this test's own, one whose PID 1 runs as sbx-init (as every sbxd's
 * sandbox init does), one whose PID 1 is another program, each nested in the other,
 * one the daemon says is its own, and one whose PID 1 is gone. Each namespace is made
 * by a child that unshares it and forks its PID 1, a shell whose argv[0] is the name
 * under test, which says it is ready on a pipe; the test kills it (and with it
 * everything below) and reaps the child, also when a check fails (pdeath signals).
 * Needs root (CLONE_NEWPID). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pidns.h"
#include "testutil.h"

struct nsproc {
        pid_t outer; /* the child that unshared (PID 1's parent) */
        pid_t init;  /* PID 1 of the first namespace, as a pid of ours */
};

/* In a process that has just unshared CLONE_NEWPID: forks PID 1 of the new namespace,
 * which runs a shell named name that writes a line on fd ready and waits. Returns its
 * pid (of the caller's namespace). */
static pid_t fork_init(const char *name, int ready) {
        pid_t pid = fork();

        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(ready, 3);
                execl("/bin/sh", name, "-c", "echo ready >&3; exec 3>&-; while :; do sleep 1; done",
                      (char *)NULL);
                _exit(127);
        }
        return pid;
}

/* A namespace whose PID 1 is named outer_name and, when inner_name is not NULL, a second
 * one below it whose PID 1 (forked by the first before it runs its shell) is named
 * inner_name. Waits until every PID 1 is ready. */
static struct nsproc make_ns(const char *outer_name, const char *inner_name) {
        struct nsproc p = {0};
        int ready[2], want = inner_name ? 2 : 1, got = 0;
        int init[2];
        char buf[64];

        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe(init), 0);
        p.outer = fork();
        ck_assert_int_ge(p.outer, 0);
        if (p.outer == 0) {
                pid_t b;
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (unshare(CLONE_NEWPID) < 0)
                        _exit(1);
                b = fork();
                if (b == 0) {
                        /* PID 1 of the first namespace. */
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (inner_name &&
                            (unshare(CLONE_NEWPID) < 0 || fork_init(inner_name, ready[1]) < 0))
                                _exit(1);
                        dup2(ready[1], 3);
                        execl("/bin/sh", outer_name, "-c",
                              "echo ready >&3; exec 3>&-; while :; do sleep 1; done", (char *)NULL);
                        _exit(127);
                }
                if (write(init[1], &b, sizeof(b)) != (ssize_t)sizeof(b))
                        _exit(1);
                waitpid(b, NULL, 0);
                _exit(0);
        }
        close(init[1]);
        ck_assert_int_eq(read(init[0], &p.init, sizeof(p.init)), (ssize_t)sizeof(p.init));
        close(init[0]);
        close(ready[1]);
        while (got < want) {
                ssize_t n = read(ready[0], buf, sizeof(buf));
                ck_assert_int_gt(n, 0);
                for (ssize_t i = 0; i < n; i++)
                        got += buf[i] == '\n';
        }
        close(ready[0]);
        return p;
}

static void end_ns(struct nsproc *p) {
        kill(p->init, SIGKILL);
        ck_assert_int_eq(waitpid(p->outer, NULL, 0), p->outer);
}

/* The verdict on /proc/PID/ns/NAME. */
static int verdict(pid_t pid, const char *name, enum pidns_verdict *v) {
        char path[64];
        int fd, r;

        snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        r = pidns_sandboxed(fd, NULL, NULL, v);
        close(fd);
        return r;
}

static bool matches(const void *ctx, dev_t dev, ino_t ino) {
        const struct stat *st = ctx;
        return st->st_dev == dev && st->st_ino == ino;
}

START_TEST(test_own_namespace_is_free) {
        enum pidns_verdict v = PIDNS_SANDBOXED;

        ck_assert_int_eq(verdict(getpid(), "pid", &v), 0);
        ck_assert_int_eq(v, PIDNS_FREE);
        ck_assert_int_eq(pidns_is_sbx_init(getpid()), 0);
        ck_assert_int_eq(pidns_is_sbx_init(1), 0);
}
END_TEST

START_TEST(test_sbx_init_namespace) {
        struct nsproc p = make_ns("sbx-init", NULL);
        enum pidns_verdict v = PIDNS_FREE;

        ck_assert_int_eq(pidns_is_sbx_init(p.init), 1);
        ck_assert_int_eq(verdict(p.init, "pid", &v), 0);
        ck_assert_int_eq(v, PIDNS_SANDBOXED);
        end_ns(&p);
}
END_TEST

START_TEST(test_other_init_namespace) {
        struct nsproc p = make_ns("bwrap", NULL);
        enum pidns_verdict v = PIDNS_SANDBOXED;

        ck_assert_int_eq(pidns_is_sbx_init(p.init), 0);
        ck_assert_int_eq(verdict(p.init, "pid", &v), 0);
        ck_assert_int_eq(v, PIDNS_FREE);
        /* A name that only starts like it is another program. */
        end_ns(&p);
        p = make_ns("sbx-init2", NULL);
        ck_assert_int_eq(pidns_is_sbx_init(p.init), 0);
        end_ns(&p);
}
END_TEST

/* A namespace below a sandbox's, whatever its own PID 1, is a sandbox's; and one below
 * a free namespace whose own PID 1 is sbx-init is too. */
START_TEST(test_nested) {
        struct nsproc p = make_ns("sbx-init", "sh");
        enum pidns_verdict v = PIDNS_FREE;

        ck_assert_int_eq(verdict(p.init, "pid_for_children", &v), 0);
        ck_assert_int_eq(v, PIDNS_SANDBOXED);
        end_ns(&p);
        p = make_ns("sh", "sbx-init");
        v = PIDNS_FREE;
        ck_assert_int_eq(verdict(p.init, "pid_for_children", &v), 0);
        ck_assert_int_eq(v, PIDNS_SANDBOXED);
        v = PIDNS_SANDBOXED;
        ck_assert_int_eq(verdict(p.init, "pid", &v), 0);
        ck_assert_int_eq(v, PIDNS_FREE);
        end_ns(&p);
}
END_TEST

/* The daemon's own word counts whatever PID 1's name; a namespace that is not below
 * ours is not one is_ours is asked about. */
START_TEST(test_is_ours) {
        struct nsproc p = make_ns("sh", NULL);
        enum pidns_verdict v = PIDNS_FREE;
        char path[64];
        struct stat st;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p.init);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_eq(pidns_sandboxed(fd, matches, &st, &v), 0);
        ck_assert_int_eq(v, PIDNS_SANDBOXED);
        close(fd);
        /* Our own namespace is never asked about. */
        ck_assert_int_eq(stat("/proc/self/ns/pid", &st), 0);
        fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        v = PIDNS_SANDBOXED;
        ck_assert_int_eq(pidns_sandboxed(fd, matches, &st, &v), 0);
        ck_assert_int_eq(v, PIDNS_FREE);
        close(fd);
        end_ns(&p);
}
END_TEST

/* A namespace whose PID 1 has exited (every process of it is killed): -ESRCH, which
 * admission refuses. */
START_TEST(test_init_gone) {
        struct nsproc p = make_ns("sbx-init", NULL);
        enum pidns_verdict v = PIDNS_FREE;
        char path[64];
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p.init);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        end_ns(&p);
        ck_assert_int_eq(pidns_sandboxed(fd, NULL, NULL, &v), -ESRCH);
        close(fd);
        ck_assert_int_ne(pidns_is_sbx_init(p.init), 1);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("pidns");
        TCase *tc = tcase_create("pidns");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_own_namespace_is_free);
        tcase_add_test(tc, test_sbx_init_namespace);
        tcase_add_test(tc, test_other_init_namespace);
        tcase_add_test(tc, test_nested);
        tcase_add_test(tc, test_is_ours);
        tcase_add_test(tc, test_init_gone);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
