/* it_watch.c: integration tests of WatchFiles against a real sbxd, through libsbx and the
 * sbx tool: a burst of 1,000 files made, modified, deleted and renamed arrives coalesced
 * and without loss of the final state (root and rootless daemons); a path outside the
 * view (hidden, the host's, a file) is refused; another user cannot watch a sandbox not
 * shared with them (NOT_FOUND word for word as for one that does not exist) and can
 * watch one that is (root daemon: a user of its socket group; rootless daemon, which
 * serves only its own user and root: its user, against root's sandbox); terminate ends the watch
 * with SANDBOX_ENDED; the bounds per sandbox and per user hold and a closed watch frees its place;
 * a flood is reported as an overflow; two users' watches of big trees stay within their
 * budgets of directories, so the guard still covers a hidden path the host makes after;
 * `sbx watch` prints a line per change and ends cleanly on SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "imgtest.h"
#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

/* A user of a root daemon's socket group, as in it_files.c: a raw uid without a passwd
 * entry. */
#define ALICE    3101u
#define BOB      3102u
#define SOCK_GRP 3100u
/* A host directory every sandbox sees unless its policy hides it. */
#define HIDDEN "/usr/share/doc"

/* ---- a model of the tree, kept from the events ------------------------------------- */

struct model {
        char **v;
        size_t n, cap;
        size_t events, overflows;
};

static ssize_t model_find(const struct model *m, const char *p) {
        for (size_t i = 0; i < m->n; i++)
                if (strcmp(m->v[i], p) == 0)
                        return (ssize_t)i;
        return -1;
}

static void model_add(struct model *m, const char *p) {
        if (model_find(m, p) >= 0)
                return;
        if (m->n == m->cap) {
                m->cap = m->cap ? m->cap * 2 : 256;
                m->v = realloc(m->v, m->cap * sizeof(*m->v));
                ck_assert_ptr_nonnull(m->v);
        }
        m->v[m->n++] = strdup(p);
}

static int at_or_below(const char *p, const char *dir) {
        size_t n = strlen(dir);
        return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Removes p and everything below it. */
static void model_del(struct model *m, const char *p) {
        for (size_t i = 0; i < m->n;) {
                if (at_or_below(m->v[i], p)) {
                        free(m->v[i]);
                        m->v[i] = m->v[--m->n];
                } else {
                        i++;
                }
        }
}

static void model_rename(struct model *m, const char *from, const char *to) {
        size_t fl = strlen(from);

        model_del(m, to);
        for (size_t i = 0; i < m->n; i++) {
                char buf[4096];
                if (!at_or_below(m->v[i], from))
                        continue;
                snprintf(buf, sizeof(buf), "%s%s", to, m->v[i] + fl);
                free(m->v[i]);
                m->v[i] = strdup(buf);
        }
}

static void model_apply(struct model *m, const struct sbx_file_events *ev) {
        m->overflows += ev->overflow != 0;
        for (size_t i = 0; i < ev->n; i++) {
                const struct sbx_file_event *e = &ev->v[i];
                m->events++;
                switch (e->kind) {
                case SBX_FILE_CREATED:
                case SBX_FILE_MODIFIED:
                        model_add(m, e->path);
                        break;
                case SBX_FILE_DELETED:
                        model_del(m, e->path);
                        break;
                case SBX_FILE_RENAMED:
                        ck_assert_ptr_nonnull(e->old_path);
                        model_rename(m, e->old_path, e->path);
                        break;
                case SBX_FILE_EVENT_UNSPECIFIED:
                        ck_abort_msg("an event of no kind for %s", e->path);
                }
        }
}

static void model_free(struct model *m) {
        for (size_t i = 0; i < m->n; i++)
                free(m->v[i]);
        free(m->v);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads w until `last` is in the model and then quiet_ms pass without a batch (at most
 * 120 s). */
static void read_until(sbx_client *c, sbx_watch *w, struct model *m, const char *last,
                       int quiet_ms) {
        double t0 = it_now_ms();
        int seen = 0;

        while (it_now_ms() - t0 < 120000) {
                struct sbx_file_events *ev = NULL;
                enum sbx_code rc = sbx_watch_next(w, seen ? quiet_ms : 1000, &ev);
                ck_assert_msg(rc == SBX_OK, "watch ended: %s: %s", sbx_code_name(rc),
                              sbx_error_message(c));
                if (!ev && seen)
                        return;
                if (ev)
                        model_apply(m, ev);
                sbx_file_events_free(ev);
                seen = seen || model_find(m, last) >= 0;
        }
        ck_abort_msg("%s never came within 120 s (%zu events)", last, m->events);
}

/* The sandbox's tree below dir (find), sorted, checked against the model's. */
static void check_final_state(sbx_client *c, const char *id, const char *dir, struct model *m) {
        char cmd[512], *save = NULL, *line, **want = NULL;
        size_t n = 0, cap = 0, i;
        struct sbx_result *r;

        snprintf(cmd, sizeof(cmd), "find %s -mindepth 1 | LC_ALL=C sort", dir);
        r = it_sh(c, id, 60000, cmd);
        ck_assert_int_eq(r->exit_code, 0);
        for (line = strtok_r((char *)r->stdout_data, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 256;
                        want = realloc(want, cap * sizeof(*want));
                }
                want[n++] = line;
        }
        qsort(m->v, m->n, sizeof(*m->v), cmp_str);
        for (i = 0; i < n && i < m->n; i++)
                ck_assert_msg(strcmp(want[i], m->v[i]) == 0,
                              "entry %zu: the sandbox has %s, the events say %s", i, want[i],
                              m->v[i]);
        ck_assert_msg(n == m->n, "the sandbox has %zu entries below %s, the events %zu", n, dir,
                      m->n);
        free(want);
        sbx_result_free(r);
}

/* 1,000 files in 10 directories made, then 500 appended to, 200 removed with their
 * directories, 50 moved to another directory, one directory renamed, 100 made and
 * removed at once, and a directory of 100 files made outside the watched tree moved in
 * (what is in it can only be known by listing it); DONE last. inotify reports over
 * 5,000 changes for it (each `echo > f` is a create, a modify and a close). */
#define BURST                                                                                      \
        "set -e; cd /workspace/burst; "                                                            \
        "for d in 0 1 2 3 4 5 6 7 8 9; do mkdir d$d; i=0; "                                        \
        "while [ $i -lt 100 ]; do echo v1 > d$d/f$i; i=$((i+1)); done; done; "                     \
        "for d in 0 1 2 3 4; do i=0; while [ $i -lt 100 ]; do echo v2 >> d$d/f$i; "                \
        "i=$((i+1)); done; done; "                                                                 \
        "rm -r d5 d6; "                                                                            \
        "i=0; while [ $i -lt 50 ]; do mv d7/f$i d8/g$i; i=$((i+1)); done; "                        \
        "mv d9 d9renamed; "                                                                        \
        "i=0; while [ $i -lt 100 ]; do echo t > tmp$i; rm tmp$i; i=$((i+1)); done; "               \
        "mkdir -p /workspace/stage/sub; i=0; "                                                     \
        "while [ $i -lt 100 ]; do echo s > /workspace/stage/sub/s$i; i=$((i+1)); done; "           \
        "mv /workspace/stage in; "                                                                 \
        "touch DONE"

static void burst_case(struct it_daemon *d) {
        struct sbx_watch_opts o = {.recursive = 1, .coalesce_ms = 100};
        struct model m = {0};
        struct sbx_result *r;
        sbx_client *c = it_connect(d), *c2 = it_connect(d);
        sbx_watch *w = NULL;

        free(it_create(c2, "burst"));
        sbx_result_free(it_sh(c2, "burst", 30000, "mkdir /workspace/burst"));
        ck_assert_int_eq(sbx_watch_open(c, "burst", "/workspace/burst", &o, &w), SBX_OK);
        r = it_sh(c2, "burst", 120000, BURST);
        ck_assert_msg(r->exit_code == 0, "burst: %s", r->stderr_data);
        sbx_result_free(r);
        read_until(c, w, &m, "/workspace/burst/DONE", 1500);
        ck_assert_uint_eq(m.overflows, 0);
        check_final_state(c2, "burst", "/workspace/burst", &m);
        /* Coalesced: each file made and written is one event (its later append another),
         * one made and removed within a batch none: about 1,900 events, not 5,000. */
        ck_assert_msg(m.events < 2200, "%zu events for the burst", m.events);
        ck_assert_uint_eq(model_find(&m, "/workspace/burst/d9renamed/f99") >= 0, 1);
        ck_assert_uint_eq(model_find(&m, "/workspace/burst/in/sub/s99") >= 0, 1);
        model_free(&m);
        sbx_watch_close(w);
        sbx_close(c);
        sbx_close(c2);
}

/* A repository of 1,000 files in 20 directories on branch a; branch b changes 300 of
 * them, removes 200 with 4 of the directories, and adds 100 in 2 new ones. */
#define GIT_REPO                                                                                   \
        "set -e; export HOME=/tmp GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "                         \
        "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; "                                           \
        "git init -q -b a /workspace/repo; cd /workspace/repo; "                                   \
        "for d in $(seq 0 19); do mkdir d$d; for i in $(seq 0 49); do echo a$i > d$d/f$i; "        \
        "done; done; git add -A; git commit -qm a; git checkout -q -b b; "                         \
        "for d in $(seq 0 5); do for i in $(seq 0 49); do echo b$i >> d$d/f$i; done; done; "       \
        "git rm -rq d6 d7 d8 d9; mkdir n0 n1; "                                                    \
        "for i in $(seq 0 49); do echo n > n0/g$i; echo n > n1/g$i; done; "                        \
        "git add -A; git commit -qm b; git checkout -q a"

/* `git checkout b` of that repository, watched: the events, applied in order, give the
 * tree as it is after the checkout (.git included). */
START_TEST(git_checkout_coalesced_final_state) {
        struct sbx_watch_opts o = {.recursive = 1, .coalesce_ms = 100};
        struct model m = {0};
        struct sbx_result *r;
        struct it_daemon d;
        sbx_client *c, *c2;
        sbx_watch *w = NULL;
        char *line, *save = NULL;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        free(it_create(c2, "git"));
        r = it_sh(c2, "git", 120000, "command -v git");
        if (r->exit_code != 0) {
                /* No git in the sandbox's view: the burst tests stand in for it. */
                fprintf(stderr, "git_checkout_coalesced_final_state: no git in the sandbox's "
                                "view; the burst tests stand in for it\n");
                sbx_result_free(r);
                sbx_close(c);
                sbx_close(c2);
                ck_assert_int_eq(it_daemon_stop(&d), 0);
                return;
        }
        sbx_result_free(r);
        r = it_sh(c2, "git", 120000, GIT_REPO);
        ck_assert_msg(r->exit_code == 0, "repo: %s", r->stderr_data);
        sbx_result_free(r);
        /* The model starts from the tree before the checkout. */
        r = it_sh(c2, "git", 60000, "find /workspace/repo -mindepth 1");
        for (line = strtok_r((char *)r->stdout_data, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save))
                model_add(&m, line);
        sbx_result_free(r);
        ck_assert_int_eq(sbx_watch_open(c, "git", "/workspace/repo", &o, &w), SBX_OK);
        r = it_sh(
                c2, "git", 120000,
                "cd /workspace/repo && HOME=/tmp git checkout -q b && touch /workspace/repo/DONE");
        ck_assert_msg(r->exit_code == 0, "checkout: %s", r->stderr_data);
        sbx_result_free(r);
        m.events = 0;
        read_until(c, w, &m, "/workspace/repo/DONE", 1500);
        ck_assert_uint_eq(m.overflows, 0);
        check_final_state(c2, "git", "/workspace/repo", &m);
        ck_assert_uint_eq(model_find(&m, "/workspace/repo/n1/g49") >= 0, 1);
        ck_assert_int_lt(model_find(&m, "/workspace/repo/d9/f0"), 0);
        model_free(&m);
        sbx_watch_close(w);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(burst_coalesced_final_state_root) {
        struct it_daemon d;

        it_daemon_start(&d, NULL);
        burst_case(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(burst_coalesced_final_state_rootless) {
        struct it_daemon d;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        burst_case(&d);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- what may not be watched --------------------------------------------------------- */

static enum sbx_code watch_code(sbx_client *c, const char *id, const char *path) {
        struct sbx_watch_opts o = {.recursive = 1};
        sbx_watch *w = NULL;
        enum sbx_code rc = sbx_watch_open(c, id, path, &o, &w);

        sbx_watch_close(w);
        return rc;
}

/* A path the policy hides, a host directory the sandbox does not see (directly, through
 * a symlink, through ".."), a file: refused; ".." stops at the sandbox's own root. */
START_TEST(outside_view_refused) {
        struct sbx_watch_opts o = {.recursive = 0};
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        struct it_daemon d;
        struct model m = {0};
        char host[700], cmd[2048], hidden[] = HIDDEN, *dv[1];
        sbx_client *c, *c2;
        sbx_watch *w = NULL;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        /* The test's base directory is below the host's /tmp: no sandbox sees it. */
        snprintf(host, sizeof(host), "%s/hostonly", it_base_dir());
        ck_assert_int_eq(mkdir(host, 0755), 0);
        sbx_create_opts_init(&co);
        co.id = "view";
        dv[0] = hidden;
        co.policy.denied_read_paths.v = dv;
        co.policy.denied_read_paths.n = 1;
        ck_assert_int_eq(sbx_create(c, &co, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        snprintf(cmd, sizeof(cmd),
                 "ln -s '%s' /workspace/host && ln -s " HIDDEN " /workspace/sec && "
                 "echo x > /workspace/file",
                 host);
        sbx_result_free(it_sh(c, "view", 30000, cmd));
        ck_assert_int_eq(watch_code(c, "view", HIDDEN), SBX_NOT_FOUND);
        ck_assert_int_eq(watch_code(c, "view", "sec"), SBX_NOT_FOUND);
        ck_assert_int_eq(watch_code(c, "view", host), SBX_NOT_FOUND);
        ck_assert_int_eq(watch_code(c, "view", "host"), SBX_NOT_FOUND);
        snprintf(cmd, sizeof(cmd), "../../../..%s", host);
        ck_assert_int_eq(watch_code(c, "view", cmd), SBX_NOT_FOUND);
        ck_assert_int_eq(watch_code(c, "view", "file"), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "is a regular file, not a directory"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(watch_code(c, "view", "/nonexistent"), SBX_NOT_FOUND);
        /* The host's copy is there, and unhidden on the host. */
        ck_assert_int_eq(access(HIDDEN, F_OK), 0);
        /* ".." stops at the sandbox's root: this watches its own /tmp. */
        ck_assert_int_eq(sbx_watch_open(c, "view", "/workspace/../../../tmp", &o, &w), SBX_OK);
        sbx_result_free(it_sh(c2, "view", 30000, "touch /tmp/inside"));
        read_until(c, w, &m, "/tmp/inside", 500);
        model_free(&m);
        sbx_watch_close(w);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- another user ------------------------------------------------------------------- */

struct alice_report {
        int own, none, shared, event;
        char msg_own[512], msg_none[512];
};

/* In a forked child, as uid (its group that too, and group besides): watches "w-own" (not shared),
 * "w-none" (never made) and "w-shared" (shared with ALICE), where the parent then makes a file. */
static void alice_watch(const struct it_daemon *d, uid_t uid, gid_t group, int fd, int go_fd) {
        const gid_t groups[] = {group};
        struct sbx_watch_opts o = {.recursive = 1};
        struct alice_report a;
        struct sbx_file_events *ev = NULL;
        sbx_client *c = NULL;
        sbx_watch *w = NULL;
        char go;

        memset(&a, 0, sizeof(a));
        if (setgroups(1, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
            setresuid(uid, uid, uid) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(120);
        if (sbx_connect(d->sock, "it_watch-alice", &c) != SBX_OK)
                _exit(121);
        a.own = sbx_watch_open(c, "w-own", "/workspace", &o, &w);
        snprintf(a.msg_own, sizeof(a.msg_own), "%s", sbx_error_message(c));
        sbx_watch_close(w);
        w = NULL;
        a.none = sbx_watch_open(c, "w-none", "/workspace", &o, &w);
        snprintf(a.msg_none, sizeof(a.msg_none), "%s", sbx_error_message(c));
        sbx_watch_close(w);
        w = NULL;
        a.shared = sbx_watch_open(c, "w-shared", "/workspace", &o, &w);
        if (write(fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
                _exit(122);
        if (a.shared == SBX_OK && read(go_fd, &go, 1) == 1) {
                while (sbx_watch_next(w, 30000, &ev) == SBX_OK && ev) {
                        for (size_t i = 0; i < ev->n; i++)
                                a.event |= strcmp(ev->v[i].path, "/workspace/from-owner") == 0;
                        sbx_file_events_free(ev);
                        if (a.event)
                                break;
                }
        }
        if (write(fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
                _exit(123);
        sbx_watch_close(w);
        sbx_close(c);
        _exit(0);
}

/* Replaces every "w-own" / "w-none" of msg by "ID". */
static void unname(char *msg) {
        char *p;

        while ((p = strstr(msg, "w-own")) || (p = strstr(msg, "w-none"))) {
                size_t n = p[2] == 'o' ? 5 : 6;
                memcpy(p, "ID", 2);
                memmove(p + 2, p + n, strlen(p + n) + 1);
        }
}

/* On d, whose socket the other user uid reaches through group: uid cannot watch the
 * caller's (root's) sandbox (NOT_FOUND word for word as for an id nobody used), and
 * watches one shared with it, seeing a file its owner makes. */
static void other_user_case(struct it_daemon *d, uid_t uid, gid_t group) {
        const uint32_t share[] = {uid};
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        struct alice_report a;
        int p[2], go[2], st;
        sbx_client *c = it_connect(d);
        pid_t pid;

        free(it_create(c, "w-own"));
        sbx_create_opts_init(&co);
        co.id = "w-shared";
        co.share_uids = share;
        co.n_share_uids = 1;
        ck_assert_int_eq(sbx_create(c, &co, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                alice_watch(d, uid, group, p[1], go[0]);
        close(p[1]);
        close(go[0]);
        ck_assert_int_eq(read(p[0], &a, sizeof(a)), (ssize_t)sizeof(a));
        ck_assert_msg(a.own == SBX_NOT_FOUND, "%s: %s", sbx_code_name(a.own), a.msg_own);
        ck_assert_int_eq(a.none, SBX_NOT_FOUND);
        unname(a.msg_own);
        unname(a.msg_none);
        ck_assert_str_eq(a.msg_own, a.msg_none);
        ck_assert_msg(a.shared == SBX_OK, "the shared sandbox: %s", sbx_code_name(a.shared));
        sbx_result_free(it_sh(c, "w-shared", 30000, "echo hi > /workspace/from-owner"));
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        ck_assert_int_eq(read(p[0], &a, sizeof(a)), (ssize_t)sizeof(a));
        ck_assert_int_eq(a.event, 1);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_int_eq(WIFEXITED(st) ? WEXITSTATUS(st) : 256, 0);
        close(p[0]);
        close(go[1]);
        sbx_close(c);
}

START_TEST(other_user_not_found_unless_shared_root) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        struct it_daemon d;

        it_daemon_start(&d, flags);
        other_user_case(&d, ALICE, SOCK_GRP);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless daemon of nobody's serves only nobody and root: root's sandbox there is
 * nobody's to watch only when shared with nobody. */
START_TEST(other_user_not_found_unless_shared_rootless) {
        struct it_daemon d;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        other_user_case(&d, 65534, 65534);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- how a watch ends --------------------------------------------------------------- */

START_TEST(terminate_ends_watch) {
        struct sbx_watch_opts o = {.recursive = 1};
        struct sbx_file_events *ev = NULL;
        struct it_daemon d;
        enum sbx_code rc = SBX_OK;
        sbx_client *c, *c2;
        sbx_watch *w = NULL;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        free(it_create(c2, "ends"));
        ck_assert_int_eq(sbx_watch_open(c, "ends", "/workspace", &o, &w), SBX_OK);
        /* While the watch holds the connection, the client makes no other call. */
        ck_assert_int_eq(sbx_terminate(c, "ends", NULL), SBX_FAILED_PRECONDITION);
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_terminate(c2, "ends", NULL), SBX_OK);
        while (rc == SBX_OK && it_now_ms() - t0 < 10000) {
                rc = sbx_watch_next(w, 1000, &ev);
                sbx_file_events_free(ev);
                ev = NULL;
        }
        ck_assert_msg(rc == SBX_SANDBOX_ENDED, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "'ends' ended"));
        ck_assert_int_eq(sbx_watch_next(w, 0, &ev), SBX_FAILED_PRECONDITION);
        sbx_watch_close(w);
        /* The client is free again. */
        ck_assert_int_eq(watch_code(c, "ends", "/workspace"), SBX_SANDBOX_ENDED);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Opens a watch, retrying while the bound is reached (a closed watch frees its place
 * once the daemon has seen its connection close). */
static enum sbx_code open_retry(sbx_client *c, const char *id, const char *path,
                                const struct sbx_watch_opts *o, sbx_watch **w) {
        double t0 = it_now_ms();
        enum sbx_code rc;

        while ((rc = sbx_watch_open(c, id, path, o, w)) == SBX_RESOURCE_EXHAUSTED &&
               it_now_ms() - t0 < 10000)
                usleep(20000);
        return rc;
}

/* A sandbox restored from its snapshot serves on with other files: its watch ends with
 * UNAVAILABLE (watch again), not ENDED. */
START_TEST(restore_ends_watch_unavailable) {
        struct sbx_watch_opts o = {.recursive = 1};
        struct sbx_file_events *ev = NULL;
        struct sbx_image *img = NULL;
        const char *layout = make_image();
        struct it_daemon d;
        enum sbx_code rc = SBX_OK;
        char *base, *id = NULL;
        sbx_client *c, *c2;
        sbx_watch *w = NULL;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        base = img_pull(c2, layout, "img");
        ck_assert_int_eq(img_create(c2, base, NULL, &id), SBX_OK);
        ck_assert_msg(sbx_snapshot(c2, id, "watched", &img) == SBX_OK, "snapshot: %s",
                      sbx_error_message(c2));
        sbx_image_free(img);
        ck_assert_int_eq(sbx_watch_open(c, id, "/workspace", &o, &w), SBX_OK);
        ck_assert_msg(sbx_restore(c2, id, "watched", NULL) == SBX_OK, "restore: %s",
                      sbx_error_message(c2));
        t0 = it_now_ms();
        while (rc == SBX_OK && it_now_ms() - t0 < 10000) {
                rc = sbx_watch_next(w, 1000, &ev);
                sbx_file_events_free(ev);
                ev = NULL;
        }
        ck_assert_msg(rc == SBX_UNAVAILABLE, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "was restored"));
        sbx_watch_close(w);
        /* The sandbox serves on: a new watch of it works. */
        ck_assert_int_eq(sbx_watch_open(c, id, "/workspace", &o, &w), SBX_OK);
        sbx_watch_close(w);
        free(base);
        free(id);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A fifth watch of one sandbox is refused, naming the bound; closed watches free their
 * places; the watched directory removed ends the watch with NOT_FOUND. */
START_TEST(bounds_and_closed_watches) {
        struct sbx_watch_opts o = {.recursive = 0, .coalesce_ms = 10};
        sbx_client *cs[SBX_WATCH_MAX_PER_SANDBOX + 1];
        sbx_watch *ws[SBX_WATCH_MAX_PER_SANDBOX + 1];
        struct sbx_file_events *ev = NULL;
        struct it_daemon d;
        enum sbx_code rc = SBX_OK;
        unsigned i, round;
        double t0;

        it_daemon_start(&d, NULL);
        for (i = 0; i <= SBX_WATCH_MAX_PER_SANDBOX; i++)
                cs[i] = it_connect(&d);
        free(it_create(cs[0], "bnd"));
        sbx_result_free(it_sh(cs[0], "bnd", 30000, "mkdir /workspace/gone"));
        for (round = 0; round < 2; round++) {
                for (i = 0; i < SBX_WATCH_MAX_PER_SANDBOX; i++) {
                        rc = open_retry(cs[i], "bnd", "/workspace", &o, &ws[i]);
                        ck_assert_msg(rc == SBX_OK, "watch %u: %s", i, sbx_error_message(cs[i]));
                }
                rc = sbx_watch_open(cs[i], "bnd", "/workspace", &o, &ws[i]);
                ck_assert_int_eq(rc, SBX_RESOURCE_EXHAUSTED);
                ck_assert_ptr_nonnull(strstr(sbx_error_message(cs[i]), "4 file watches"));
                for (i = 0; i < SBX_WATCH_MAX_PER_SANDBOX; i++)
                        sbx_watch_close(ws[i]);
        }
        ck_assert_int_eq(open_retry(cs[0], "bnd", "gone", &o, &ws[0]), SBX_OK);
        sbx_result_free(it_sh(cs[1], "bnd", 30000, "rmdir /workspace/gone"));
        t0 = it_now_ms();
        while (rc != SBX_NOT_FOUND && it_now_ms() - t0 < 10000) {
                rc = sbx_watch_next(ws[0], 1000, &ev);
                sbx_file_events_free(ev);
                ev = NULL;
        }
        ck_assert_int_eq(rc, SBX_NOT_FOUND);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(cs[0]), "was removed"));
        sbx_watch_close(ws[0]);
        for (i = 0; i <= SBX_WATCH_MAX_PER_SANDBOX; i++)
                sbx_close(cs[i]);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* 16 watches of one user over 4 sandboxes: a 17th, on a fifth sandbox, is refused,
 * naming the bound. */
START_TEST(bound_per_user) {
        struct sbx_watch_opts o = {.recursive = 0};
        sbx_client *cs[SBX_WATCH_MAX_PER_UID + 1];
        sbx_watch *ws[SBX_WATCH_MAX_PER_UID + 1];
        struct it_daemon d;
        char id[32];
        unsigned i;

        it_daemon_start(&d, NULL);
        for (i = 0; i <= SBX_WATCH_MAX_PER_UID; i++)
                cs[i] = it_connect(&d);
        for (i = 0; i <= SBX_WATCH_MAX_PER_UID / SBX_WATCH_MAX_PER_SANDBOX; i++) {
                snprintf(id, sizeof(id), "u%u", i);
                free(it_create(cs[0], id));
        }
        for (i = 0; i < SBX_WATCH_MAX_PER_UID; i++) {
                snprintf(id, sizeof(id), "u%u", i / SBX_WATCH_MAX_PER_SANDBOX);
                ck_assert_msg(sbx_watch_open(cs[i], id, "/workspace", &o, &ws[i]) == SBX_OK,
                              "watch %u: %s", i, sbx_error_message(cs[i]));
        }
        snprintf(id, sizeof(id), "u%u", SBX_WATCH_MAX_PER_UID / SBX_WATCH_MAX_PER_SANDBOX);
        ck_assert_int_eq(sbx_watch_open(cs[i], id, "/workspace", &o, &ws[i]),
                         SBX_RESOURCE_EXHAUSTED);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(cs[i]), "has 16 file watches"));
        for (i = 0; i < SBX_WATCH_MAX_PER_UID; i++)
                sbx_watch_close(ws[i]);
        for (i = 0; i <= SBX_WATCH_MAX_PER_UID; i++)
                sbx_close(cs[i]);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* More paths changed within one batch than a watch keeps: the batch says overflow with
 * its reason (and the daemon holds no more than the bound); the next batch is whole. */
START_TEST(flood_reported_as_overflow) {
        struct sbx_watch_opts o = {.recursive = 1, .coalesce_ms = 5000};
        struct sbx_file_events *ev = NULL;
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c, *c2;
        sbx_watch *w = NULL;
        int overflowed = 0, after = 0;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        free(it_create(c2, "flood"));
        ck_assert_int_eq(sbx_watch_open(c, "flood", "/workspace", &o, &w), SBX_OK);
        r = it_sh(c2, "flood", 120000,
                  "cd /workspace && i=0; while [ $i -lt 5000 ]; do : > f$i; i=$((i+1)); done");
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        t0 = it_now_ms();
        while (!overflowed && it_now_ms() - t0 < 60000) {
                ck_assert_int_eq(sbx_watch_next(w, 1000, &ev), SBX_OK);
                if (ev && ev->overflow) {
                        overflowed = 1;
                        /* The watch's bound, or (a daemon slow to read) the kernel's. */
                        ck_assert_msg(strstr(ev->overflow_reason, "more than 4096 paths") ||
                                              strstr(ev->overflow_reason, "event queue"),
                                      "%s", ev->overflow_reason);
                }
                sbx_file_events_free(ev);
                ev = NULL;
        }
        ck_assert_int_eq(overflowed, 1);
        sbx_result_free(it_sh(c2, "flood", 30000, "touch /workspace/after"));
        t0 = it_now_ms();
        while (!after && it_now_ms() - t0 < 30000) {
                ck_assert_int_eq(sbx_watch_next(w, 1000, &ev), SBX_OK);
                for (size_t i = 0; ev && i < ev->n; i++)
                        after |= strcmp(ev->v[i].path, "/workspace/after") == 0;
                sbx_file_events_free(ev);
                ev = NULL;
        }
        ck_assert_int_eq(after, 1);
        sbx_watch_close(w);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A prober: stats a file of sandbox id through its own client until told to stop, and
 * keeps the longest answer's wait. */
struct prober {
        struct it_daemon *d;
        const char *id;
        atomic_int stop;
        double worst_ms;
        int calls;
};

static void *probe_run(void *arg) {
        struct prober *p = arg;
        sbx_client *c = it_connect(p->d);

        while (!atomic_load(&p->stop)) {
                struct sbx_file_info *fi = NULL;
                double t0 = it_now_ms(), t;
                if (sbx_stat(c, p->id, "/workspace/probe", &fi) == SBX_OK)
                        p->calls++;
                sbx_file_info_free(fi);
                t = it_now_ms() - t0;
                if (t > p->worst_ms)
                        p->worst_ms = t;
                usleep(2000);
        }
        sbx_close(c);
        return NULL;
}

/* A tree of 9,090 directories: the watch follows 8,192 and says overflow, naming the
 * bound; meanwhile another client's requests are answered within a second each (a walk
 * of this size takes well under a second even unsliced here: this bounds a walk gone
 * slow, the slices are what keeps a bigger one from holding the loop). */
START_TEST(big_tree_bounded) {
        struct sbx_watch_opts o = {.recursive = 1, .coalesce_ms = 10};
        struct sbx_file_events *ev = NULL;
        struct prober pr;
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c, *c2;
        sbx_watch *w = NULL;
        pthread_t th;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        free(it_create(c2, "tree"));
        r = it_sh(c2, "tree", 300000,
                  "set -e; cd /workspace; touch probe; mkdir t; cd t; for i in $(seq 0 89); do "
                  "mkdir d$i; (cd d$i && mkdir $(seq 0 99)); done");
        ck_assert_msg(r->exit_code == 0, "tree: %s", r->stderr_data);
        sbx_result_free(r);
        memset(&pr, 0, sizeof(pr));
        pr.d = &d;
        pr.id = "tree";
        ck_assert_int_eq(pthread_create(&th, NULL, probe_run, &pr), 0);
        usleep(100000);
        t0 = it_now_ms();
        ck_assert_msg(sbx_watch_open(c, "tree", "/workspace/t", &o, &w) == SBX_OK, "%s",
                      sbx_error_message(c));
        fprintf(stderr, "big_tree: watched in %.0f ms; %d probes, the slowest %.0f ms\n",
                it_now_ms() - t0, pr.calls, pr.worst_ms);
        atomic_store(&pr.stop, 1);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_int_gt(pr.calls, 0);
        ck_assert_msg(pr.worst_ms < 1000, "a stat waited %.0f ms during the walk", pr.worst_ms);
        ck_assert_int_eq(sbx_watch_next(w, 10000, &ev), SBX_OK);
        ck_assert_ptr_nonnull(ev);
        ck_assert_int_eq(ev->overflow, 1);
        ck_assert_msg(strstr(ev->overflow_reason, "more than 8192 directories"), "%s",
                      ev->overflow_reason);
        sbx_file_events_free(ev);
        sbx_watch_close(w);
        sbx_close(c);
        sbx_close(c2);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- the daemon's share of the host's inotify watches ----------------------------------- */

struct budget_report {
        unsigned ok, exhausted;
        char user_bound[512]; /* the overflow reason naming the user's bound, if one came */
        char refused[512];    /* the message of a watch refused, if one was */
};

/* In a forked child, as uid (of group SOCK_GRP): as many recursive watches of path as
 * the bounds allow (4 on each of the sandboxes ids[0..3]), each read to its first batch;
 * writes what came to fd, then holds the watches until go_fd closes. */
static void budget_child(const struct it_daemon *d, uid_t uid, const char *const *ids,
                         const char *path, int fd, int go_fd) {
        const gid_t groups[] = {SOCK_GRP};
        struct sbx_watch_opts o = {.recursive = 1, .coalesce_ms = 10};
        sbx_client *cs[SBX_WATCH_MAX_PER_UID];
        sbx_watch *ws[SBX_WATCH_MAX_PER_UID];
        struct budget_report rep;
        unsigned i;
        char go;

        memset(&rep, 0, sizeof(rep));
        if (setgroups(1, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
            setresuid(uid, uid, uid) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(120);
        for (i = 0; i < SBX_WATCH_MAX_PER_UID; i++) {
                struct sbx_file_events *ev = NULL;
                enum sbx_code rc;
                ws[i] = NULL;
                if (sbx_connect(d->sock, "it_watch-budget", &cs[i]) != SBX_OK)
                        _exit(121);
                sbx_set_call_timeout_ms(cs[i], 120000);
                rc = sbx_watch_open(cs[i], ids[i / SBX_WATCH_MAX_PER_SANDBOX], path, &o, &ws[i]);
                if (rc == SBX_RESOURCE_EXHAUSTED) {
                        rep.exhausted++;
                        snprintf(rep.refused, sizeof(rep.refused), "%s",
                                 sbx_error_message(cs[i]));
                        continue;
                }
                if (rc != SBX_OK)
                        _exit(122);
                rep.ok++;
                if (sbx_watch_next(ws[i], 60000, &ev) == SBX_OK && ev && ev->overflow &&
                    strstr(ev->overflow_reason, "most one user's may"))
                        snprintf(rep.user_bound, sizeof(rep.user_bound), "%s",
                                 ev->overflow_reason);
                sbx_file_events_free(ev);
        }
        if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
                _exit(123);
        if (read(go_fd, &go, 1) < 0)
                _exit(124);
        for (i = 0; i < SBX_WATCH_MAX_PER_UID; i++) {
                sbx_watch_close(ws[i]);
                sbx_close(cs[i]);
        }
        _exit(0);
}

/* Creates the sandbox id, hiding secret, on c: the code. */
static enum sbx_code create_hiding(sbx_client *c, const char *id, char *secret) {
        char *deny[] = {secret};
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        enum sbx_code rc;

        sbx_create_opts_init(&co);
        co.id = id;
        co.policy.denied_read_paths.v = deny;
        co.policy.denied_read_paths.n = 1;
        rc = sbx_create(c, &co, &sb);
        sbx_sandbox_free(sb);
        return rc;
}

/* 1 when `cat path` in the sandbox id still shows marker 2 s on (polled every 20 ms):
 * the guard did not cover it. */
static int still_readable(sbx_client *c, const char *id, const char *path, const char *marker) {
        char *cmd = xasprintf("cat '%s' 2>/dev/null; echo END", path);
        double t0 = it_now_ms();
        int seen = 1;

        while (seen && it_now_ms() - t0 < 2000) {
                struct sbx_result *r = it_sh(c, id, 30000, cmd);
                seen = strstr((const char *)r->stdout_data, marker) != NULL;
                sbx_result_free(r);
                if (seen)
                        usleep(20000);
        }
        free(cmd);
        return seen;
}

#define TREE_TOP 90
#define TREE_SUB 100

/* The host tree dir/dI/J of TREE_TOP * (TREE_SUB + 1) directories, everyone's to read. */
static void make_tree(const char *dir) {
        char *cmd = xasprintf("set -e; mkdir -p '%s'; cd '%s'; for i in $(seq 0 %d); do mkdir d$i; "
                              "(cd d$i && mkdir $(seq 0 %d)); done",
                              dir, dir, TREE_TOP - 1, TREE_SUB - 1);

        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
}

/* Two users each watch a host tree of 9,090 directories as often as the bounds allow
 * (16 watches of up to 8,192 directories each would be 262,144 inotify watches, more than
 * the host's fs.inotify.max_user_watches): each stops at their share, named in an
 * overflow and in the refusal of further watches; a third client's requests are answered
 * meanwhile (the walks share each loop turn); and the guard still covers a path a new
 * sandbox hides that the host makes afterwards. */
START_TEST(watch_budget_keeps_the_guard) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        const char *ids[8] = {"bud0", "bud1", "bud2", "bud3", "bud4", "bud5", "bud6", "bud7"};
        const uid_t users[2] = {ALICE, BOB};
        const char *base = it_base_dir();
        char *tree = xasprintf("%s/tree", base), *later = xasprintf("%s/later", base);
        char *secret = xasprintf("%s/secret", later), *cmd;
        int p[2][2], go[2][2], st, u;
        struct budget_report rep[2];
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        struct it_daemon d;
        struct prober pr;
        pthread_t th;
        pid_t pid[2];
        sbx_client *c;

        make_tree(tree);
        ck_assert_int_eq(mkdir(later, 0755), 0);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        for (u = 0; u < 8; u++) {
                const uint32_t share[] = {users[u / 4]};
                sbx_create_opts_init(&co);
                co.id = ids[u];
                co.share_uids = share;
                co.n_share_uids = 1;
                ck_assert_msg(sbx_create(c, &co, &sb) == SBX_OK, "%s", sbx_error_message(c));
                sbx_sandbox_free(sb);
                sb = NULL;
        }
        sbx_result_free(it_sh(c, "bud0", 30000, "touch /workspace/probe"));
        for (u = 0; u < 2; u++) {
                ck_assert_int_eq(pipe2(p[u], O_CLOEXEC), 0);
                ck_assert_int_eq(pipe2(go[u], O_CLOEXEC), 0);
                pid[u] = fork();
                ck_assert_int_ge(pid[u], 0);
                if (pid[u] == 0) {
                        for (int v = 0; v < u; v++) { /* the earlier child's ends */
                                close(go[v][1]);
                                close(p[v][0]);
                        }
                        close(go[u][1]);
                        budget_child(&d, users[u], ids + 4 * u, tree, p[u][1], go[u][0]);
                }
                close(p[u][1]);
                close(go[u][0]);
        }
        /* Started after the forks: a child of a process with threads inherits their
         * locks (the allocator's) as they were. */
        memset(&pr, 0, sizeof(pr));
        pr.d = &d;
        pr.id = "bud0";
        ck_assert_int_eq(pthread_create(&th, NULL, probe_run, &pr), 0);
        for (u = 0; u < 2; u++) {
                ck_assert_int_eq(read(p[u][0], &rep[u], sizeof(rep[u])), (ssize_t)sizeof(rep[u]));
                fprintf(stderr, "watch budget: uid %u: %u watches, %u refused: %s / %s\n",
                        (unsigned)users[u], rep[u].ok, rep[u].exhausted, rep[u].user_bound,
                        rep[u].refused);
                ck_assert_msg(rep[u].user_bound[0], "uid %u's watches never met their bound",
                              (unsigned)users[u]);
                ck_assert_uint_gt(rep[u].exhausted, 0);
                ck_assert_ptr_nonnull(strstr(rep[u].refused, "directories"));
        }
        atomic_store(&pr.stop, 1);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        fprintf(stderr, "watch budget: %d probes meanwhile, the slowest %.0f ms\n", pr.calls,
                pr.worst_ms);
        ck_assert_int_gt(pr.calls, 0);
        ck_assert_msg(pr.worst_ms < 1000, "a stat waited %.0f ms during the walks", pr.worst_ms);
        /* A new sandbox hides a path that does not exist yet; the host makes it. */
        ck_assert_msg(create_hiding(c, "guarded", secret) == SBX_OK, "%s", sbx_error_message(c));
        cmd = xasprintf("echo budget-secret-marker > '%s'", secret);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        ck_assert_msg(!still_readable(c, "guarded", secret, "budget-secret-marker"),
                      "%s, hidden by the sandbox's policy and made after it, was readable for 2 s "
                      "while other users' watches were at their bounds",
                      secret);
        for (u = 0; u < 2; u++) {
                close(go[u][1]);
                ck_assert_int_eq(waitpid(pid[u], &st, 0), pid[u]);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid %u's child: %#x",
                              (unsigned)users[u], st);
                close(p[u][0]);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(tree);
        free(later);
        free(secret);
}
END_TEST


/* The uid of the rootless daemon below, and of the process that takes every inotify
 * watch that uid may have: no other test runs as it. */
#define GREEDY 3150u

/* In a forked child, as uid: inotify watches of tree's directories, instance after
 * instance, until the kernel refuses one (ENOSPC); writes how many it holds to fd, then
 * holds them until go_fd closes. */
static void take_every_watch(uid_t uid, const char *tree, int fd, int go_fd) {
        long held = 0;
        int full = 0;
        char path[512], go;

        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(120);
        while (!full) {
                int ifd = inotify_init1(IN_CLOEXEC);
                if (ifd < 0)
                        _exit(121);
                for (int i = 0; i < TREE_TOP && !full; i++)
                        for (int j = -1; j < TREE_SUB && !full; j++) {
                                if (j < 0)
                                        snprintf(path, sizeof(path), "%s/d%d", tree, i);
                                else
                                        snprintf(path, sizeof(path), "%s/d%d/%d", tree, i, j);
                                if (inotify_add_watch(ifd, path, IN_CREATE) >= 0)
                                        held++;
                                else if (errno == ENOSPC)
                                        full = 1;
                                else
                                        _exit(122);
                        }
        }
        if (write(fd, &held, sizeof(held)) != (ssize_t)sizeof(held))
                _exit(123);
        if (read(go_fd, &go, 1) < 0)
                _exit(124);
        _exit(0);
}

/* While every inotify watch the daemon's user may have is taken (here by another
 * process of that user; file watches are kept below a share, but the user's other
 * programs are not), a sandbox whose hidden path the guard could not watch is refused
 * (RESOURCE_EXHAUSTED naming the limit) rather than made with that path uncovered; once
 * watches are free again it is made, and the path the host then makes stays hidden. */
START_TEST(guard_without_watches_refuses) {
        const char *base = it_base_dir();
        char *tree = xasprintf("%s/gtree", base), *later = xasprintf("%s/glater", base);
        char *secret = xasprintf("%s/secret", later), *cmd;
        struct it_daemon d;
        int p[2], go[2], st;
        enum sbx_code rc;
        sbx_client *c;
        long held = 0;
        pid_t pid;

        make_tree(tree);
        ck_assert_int_eq(mkdir(later, 0755), 0);
        ck_assert_int_eq(chmod(base, 0755), 0);
        it_daemon_start_as(&d, GREEDY, GREEDY, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(go[1]);
                take_every_watch(GREEDY, tree, p[1], go[0]);
        }
        close(p[1]);
        close(go[0]);
        ck_assert_int_eq(read(p[0], &held, sizeof(held)), (ssize_t)sizeof(held));
        fprintf(stderr, "guard without watches: another process of uid %u holds %ld\n",
                (unsigned)GREEDY, held);
        rc = create_hiding(c, "unguarded", secret);
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED && strstr(sbx_error_message(c),
                                                             "fs.inotify.max_user_watches"),
                      "a sandbox made while the guard could not watch: %s: %s",
                      sbx_code_name(rc), sbx_error_message(c));
        close(go[1]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the greedy child: %#x", st);
        close(p[0]);
        rc = create_hiding(c, "guarded", secret);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        cmd = xasprintf("echo greedy-secret-marker > '%s'", secret);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        ck_assert_msg(!still_readable(c, "guarded", secret, "greedy-secret-marker"),
                      "%s, hidden and made after the sandbox, was readable", secret);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(tree);
        free(later);
        free(secret);
}
END_TEST


/* The uid of the rootless daemon below: no other test runs as it. */
#define HOARDER 3152u

/* Python, run in a sandbox: 15,000 directories in /tmp, then inotify watches of them,
 * instance after instance, until the kernel refuses (ENOSPC, or EMFILE for instances);
 * writes the count held and the sandbox's bound to /tmp/count, then holds them. */
static const char hoard_py[] =
        "import ctypes, os, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "dirs = []\n"
        "for i in range(15000):\n"
        "    p = '/tmp/h/%d' % i\n"
        "    os.makedirs(p)\n"
        "    dirs.append(p.encode())\n"
        "held, why = 0, ''\n"
        "while not why:\n"
        "    fd = libc.inotify_init1(0)\n"
        "    if fd < 0:\n"
        "        why = os.strerror(ctypes.get_errno())\n"
        "        break\n"
        "    for d in dirs:\n"
        "        if libc.inotify_add_watch(fd, d, 0x100) < 0:\n"
        "            why = os.strerror(ctypes.get_errno())\n"
        "            break\n"
        "        held += 1\n"
        "bound = open('/proc/sys/user/max_inotify_watches').read().strip()\n"
        "open('/tmp/count.new', 'w').write('%d %s %s\\n' % (held, bound, why))\n"
        "os.rename('/tmp/count.new', '/tmp/count')\n"
        "time.sleep(120)\n";

/* A sandbox of a rootless daemon lives in a user namespace the daemon's user owns, and
 * the kernel charges its processes' inotify watches to that user too: a sandbox that
 * takes every watch it can gets at most its share (a sixteenth of the host's), and the
 * daemon can still make a sandbox whose hidden path the guard must watch. */
START_TEST(sandbox_inotify_bounded) {
        const char *const argv[] = {"python3", "-c", hoard_py, NULL};
        struct sbx_background *bg = NULL;
        struct sbx_exec_opts eo;
        struct it_daemon d;
        struct sbx_result *r;
        unsigned long long held = 0, bound = 0, host = 0;
        char why[64] = "", *secret = xasprintf("%s/hoard-secret", it_base_dir());
        FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
        enum sbx_code rc;
        sbx_client *c;
        double t0;

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fscanf(f, "%llu", &host), 1);
        fclose(f);
        it_daemon_start_as(&d, HOARDER, HOARDER, NULL);
        c = it_connect(&d);
        free(it_create(c, "hoard"));
        sbx_exec_opts_init(&eo);
        eo.argv = argv;
        eo.argc = 3;
        eo.no_timeout = 1;
        ck_assert_msg(sbx_exec_background(c, "hoard", &eo, &bg) == SBX_OK, "%s",
                      sbx_error_message(c));
        sbx_background_free(bg);
        t0 = it_now_ms();
        while (!held && it_now_ms() - t0 < 120000) {
                r = it_sh(c, "hoard", 30000, "cat /tmp/count 2>/dev/null");
                if (sscanf((const char *)r->stdout_data, "%llu %llu %63[^\n]", &held, &bound,
                           why) < 2)
                        held = 0;
                sbx_result_free(r);
                if (!held)
                        usleep(200000);
        }
        fprintf(stderr, "sandbox inotify: held %llu of a bound of %llu (host %llu): %s\n", held,
                bound, host, why);
        ck_assert_uint_eq(bound, host / SBX_SANDBOX_INOTIFY_SHARE);
        ck_assert_uint_le(held, bound);
        ck_assert_uint_ge(held, bound / 2);
        rc = create_hiding(c, "after-hoard", secret);
        ck_assert_msg(rc == SBX_OK, "a sandbox made while another took every inotify watch it "
                                    "could: %s: %s",
                      sbx_code_name(rc), sbx_error_message(c));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(secret);
}
END_TEST


/* The uid of the rootless daemon below: no other test runs as it. */
#define NO_INSTANCES 3153u

/* In a forked child, as NO_INSTANCES: inotify instances until the kernel refuses one;
 * writes how many to fd, then holds them until go_fd closes. */
static void take_every_instance(int fd, int go_fd) {
        long held = 0;
        char go;

        if (setgroups(0, NULL) < 0 || setresgid(NO_INSTANCES, NO_INSTANCES, NO_INSTANCES) < 0 ||
            setresuid(NO_INSTANCES, NO_INSTANCES, NO_INSTANCES) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(120);
        while (inotify_init1(IN_CLOEXEC) >= 0)
                held++;
        if (write(fd, &held, sizeof(held)) != (ssize_t)sizeof(held))
                _exit(123);
        if (read(go_fd, &go, 1) < 0)
                _exit(124);
        _exit(0);
}

/* A daemon that starts while its user has no inotify instance left has no guard: it
 * makes no sandbox (RESOURCE_EXHAUSTED naming the limit) rather than sandboxes whose
 * hidden paths nothing keeps covered, and makes them again once it got one. */
START_TEST(no_guard_no_sandbox) {
        char *secret = xasprintf("%s/noguard/secret", it_base_dir());
        int p[2], go[2], st;
        struct it_daemon d;
        enum sbx_code rc = SBX_OK;
        sbx_client *c;
        long held = 0;
        pid_t pid;
        double t0;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(go[1]);
                take_every_instance(p[1], go[0]);
        }
        close(p[1]);
        close(go[0]);
        ck_assert_int_eq(read(p[0], &held, sizeof(held)), (ssize_t)sizeof(held));
        it_daemon_start_as(&d, NO_INSTANCES, NO_INSTANCES, NULL);
        c = it_connect(&d);
        rc = create_hiding(c, "no-guard", secret);
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED &&
                              strstr(sbx_error_message(c), "fs.inotify.max_user_instances"),
                      "a sandbox made by a daemon without a guard (%ld instances held "
                      "elsewhere): %s: %s",
                      held, sbx_code_name(rc), sbx_error_message(c));
        close(go[1]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        close(p[0]);
        t0 = it_now_ms();
        for (int i = 0; it_now_ms() - t0 < 3 * SBX_SWEEP_INTERVAL_MS + 5000; i++) {
                char id[32];
                snprintf(id, sizeof(id), "guard-back-%d", i);
                rc = create_hiding(c, id, secret);
                if (rc == SBX_OK)
                        break;
                usleep(500000);
        }
        ck_assert_msg(rc == SBX_OK, "no sandbox once the instances were free: %s: %s",
                      sbx_code_name(rc), sbx_error_message(c));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(secret);
}
END_TEST


/* The uid of the rootless daemon below: no other test runs as it. */
#define LATE_GREEDY 3154u

/* A sandbox hides a path whose directory does not exist yet; then every inotify watch
 * of the daemon's user is taken, and the host makes the directory and the file: the
 * guard cannot watch the new directory, and covers it whole rather than leave the file
 * bare (it was dropped, and the file readable). */
START_TEST(unwatchable_new_directory_covered) {
        const char *base = it_base_dir();
        char *tree = xasprintf("%s/ltree", base), *top = xasprintf("%s/lsec", base);
        char *secret = xasprintf("%s/d/secret", top), *cmd;
        int p[2], go[2], st;
        struct it_daemon d;
        sbx_client *c;
        long held = 0;
        pid_t pid;

        make_tree(tree);
        ck_assert_int_eq(mkdir(top, 0755), 0);
        ck_assert_int_eq(chmod(base, 0755), 0);
        it_daemon_start_as(&d, LATE_GREEDY, LATE_GREEDY, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(create_hiding(c, "late", secret), SBX_OK);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(go[1]);
                take_every_watch(LATE_GREEDY, tree, p[1], go[0]);
        }
        close(p[1]);
        close(go[0]);
        ck_assert_int_eq(read(p[0], &held, sizeof(held)), (ssize_t)sizeof(held));
        cmd = xasprintf("mkdir '%s/d' && echo late-secret-marker > '%s' && chmod 644 '%s'", top,
                        secret, secret);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        ck_assert_msg(!still_readable(c, "late", secret, "late-secret-marker"),
                      "%s, hidden and made after the sandbox while %ld inotify watches were held "
                      "elsewhere, was readable",
                      secret, held);
        close(go[1]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        close(p[0]);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        free(tree);
        free(top);
        free(secret);
}
END_TEST

/* ---- the tool ----------------------------------------------------------------------- */

/* Reads a line from fd into buf (len bytes) within timeout_ms; 0 when none came. */
static int read_line(int fd, char *buf, size_t len, int timeout_ms) {
        size_t n = 0;
        double t0 = it_now_ms();

        while (n + 1 < len && it_now_ms() - t0 < timeout_ms) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 100) <= 0)
                        continue;
                if (read(fd, buf + n, 1) != 1)
                        break;
                if (buf[n] == '\n') {
                        buf[n] = '\0';
                        return 1;
                }
                n++;
        }
        buf[n] = '\0';
        return 0;
}

/* Starts `sbx watch ARGS...` on d with stdout to a pipe (*ret_fd). */
static pid_t sbx_watch_cli(struct it_daemon *d, const char *const *args, int *ret_fd) {
        char sbx[600];
        int p[2];
        pid_t pid;

        snprintf(sbx, sizeof(sbx), "%s/sbx", it_build_dir());
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char *argv[16];
                int i = 0;
                dup2(p[1], 1);
                dup2(p[1], 2);
                setenv("SBX_SOCKET", d->sock, 1);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                argv[i++] = sbx;
                argv[i++] = (char *)"watch";
                for (; *args && i < 15; args++)
                        argv[i++] = strdup(*args);
                argv[i] = NULL;
                execv(sbx, argv);
                _exit(127);
        }
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}

/* The CLI: JSON lines, text lines (names the sandbox chose, control characters
 * escaped), SIGINT ends it 0, the sandbox's end 125. */
START_TEST(cli_watch_lines_and_sigint) {
        const char *json_args[] = {"--json", "-r", "cli", "/workspace", NULL};
        const char *text_args[] = {"--coalesce-ms", "20", "cli", "/workspace", NULL};
        struct it_daemon d;
        char line[1024];
        sbx_client *c;
        int fd, st;
        pid_t pid;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "cli"));
        pid = sbx_watch_cli(&d, json_args, &fd);
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_str_eq(line, "{\"ready\":true}");
        sbx_result_free(it_sh(c, "cli", 30000, "mkdir /workspace/j && echo x > /workspace/j/a"));
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_str_eq(line, "{\"kind\":\"created\",\"path\":\"/workspace/j\",\"is_dir\":true}");
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_str_eq(line,
                         "{\"kind\":\"created\",\"path\":\"/workspace/j/a\",\"is_dir\":false}");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbx watch ended with %#x", st);
        close(fd);
        pid = sbx_watch_cli(&d, text_args, &fd);
        /* In text mode the line that says it watches goes to stderr (here the pipe). */
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_ptr_nonnull(strstr(line, "watching /workspace"));
        sbx_result_free(it_sh(c, "cli", 30000, "mv /workspace/j /workspace/k"));
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_str_eq(line, "renamed /workspace/j -> /workspace/k");
        /* A name with a terminal's escape and a newline: written escaped, one line. */
        sbx_result_free(it_sh(c, "cli", 30000,
                              "touch \"$(printf '/workspace/\\033]0;t\\007x\\ny')\""));
        ck_assert_int_eq(read_line(fd, line, sizeof(line), 15000), 1);
        ck_assert_str_eq(line, "created /workspace/\\x1b]0;t\\x07x\\x0ay");
        ck_assert_int_eq(sbx_terminate(c, "cli", NULL), SBX_OK);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 125, "sbx watch ended with %#x", st);
        close(fd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("watch");
        TCase *tc = tcase_create("watch");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, burst_coalesced_final_state_root);
        tcase_add_test(tc, burst_coalesced_final_state_rootless);
        tcase_add_test(tc, git_checkout_coalesced_final_state);
        tcase_add_test(tc, outside_view_refused);
        tcase_add_test(tc, other_user_not_found_unless_shared_root);
        tcase_add_test(tc, other_user_not_found_unless_shared_rootless);
        tcase_add_test(tc, terminate_ends_watch);
        tcase_add_test(tc, restore_ends_watch_unavailable);
        tcase_add_test(tc, bounds_and_closed_watches);
        tcase_add_test(tc, bound_per_user);
        tcase_add_test(tc, flood_reported_as_overflow);
        tcase_add_test(tc, big_tree_bounded);
        tcase_add_test(tc, cli_watch_lines_and_sigint);
        suite_add_tcase(s, tc);
        /* Host paths the sandboxes must see: under /var/tmp. */
        tc = tcase_create("budget");
        tcase_add_unchecked_fixture(tc, it_fixture_setup_var, it_fixture_teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, watch_budget_keeps_the_guard);
        tcase_add_test(tc, guard_without_watches_refuses);
        tcase_add_test(tc, sandbox_inotify_bounded);
        tcase_add_test(tc, no_guard_no_sandbox);
        tcase_add_test(tc, unwatchable_new_directory_covered);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
