/* asbob.h: BOB, a second local user of a root daemon in the tests: uid 3202 without a
 * passwd entry, a member of the socket group 3100 (start the daemon with
 * --socket-group 3100), acting in a child the test forks, which takes his uid and
 * groups for good and reports what it saw as lines of text on a pipe; root is the other
 * user. Shared as static functions by the programs that include it (it_budget, it_egress,
 * it_egress_budget, it_ptys). The daemon's directory must be one BOB can reach
 * (it_fixture_setup_var). */
#ifndef SBX_TESTS_ASBOB_H
#define SBX_TESTS_ASBOB_H

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx.h"

#define BOB      3202u
#define SOCK_GRP 3100u

/* What BOB's child reports: lines of text. */
struct report {
        char text[16384];
        size_t len;
};

static void say(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct report *r, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
        va_end(ap);
        if (n > 0)
                r->len += (size_t)n < sizeof(r->text) - r->len ? (size_t)n
                                                               : sizeof(r->text) - r->len - 1;
}

/* Runs fn(d, arg) as uid (its gid the same; groups: the socket group) in a child;
 * returns what it reported. */
static char *as_user(uid_t uid, void (*fn)(struct it_daemon *d, const char *arg, struct report *r),
                     struct it_daemon *d, const char *arg) {
        const gid_t groups[1] = {SOCK_GRP};
        pid_t parent = getpid(), pid;
        struct report *r = calloc(1, sizeof(*r));
        int p[2], st;
        ssize_t n;
        size_t got = 0;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (setgroups(1, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
                    setresuid(uid, uid, uid) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
                    getppid() != parent)
                        _exit(120);
                signal(SIGPIPE, SIG_IGN);
                fn(d, arg, r);
                n = write(p[1], r->text, r->len);
                _exit(n == (ssize_t)r->len ? 0 : 121);
        }
        close(p[1]);
        while ((n = read(p[0], r->text + got, sizeof(r->text) - 1 - got)) > 0)
                got += (size_t)n;
        close(p[0]);
        r->text[got] = '\0';
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid %u's child: status 0x%x: %s",
                      (unsigned)uid, st, r->text);
        return (char *)r; /* text is the first member */
}

/* Runs fn(d, arg) as BOB (as_user). */
static char *as_bob(void (*fn)(struct it_daemon *d, const char *arg, struct report *r),
                    struct it_daemon *d, const char *arg) {
        return as_user(BOB, fn, d, arg);
}

__attribute__((unused)) static sbx_client *bob_connect(struct it_daemon *d, struct report *r) {
        sbx_client *c = NULL;

        if (sbx_connect(d->sock, "bob", &c) != SBX_OK) {
                say(r, "connect-failed %s\n", c ? sbx_error_message(c) : "");
                return NULL;
        }
        return c;
}

/* Counts the lines of text that begin with word. */
__attribute__((unused)) static int count_lines(const char *text, const char *word) {
        size_t n = strlen(word);
        int k = 0;

        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                k += strncmp(p, word, n) == 0;
        return k;
}

/* A connection to the daemon's socket at path, without a word said on it: the fd, or
 * -1. */
__attribute__((unused)) static int bob_raw_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t len = strlen(path);
        int fd;

        if (len >= sizeof(sa.sun_path))
                return -1;
        memcpy(sa.sun_path, path, len + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

#endif
