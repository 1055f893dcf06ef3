/* it_rootless.c: integration tests of sbxd run as an unprivileged user (`nobody`).
 *
 * The daemon then has no capabilities on the host and builds each sandbox inside a
 * user namespace (Hello's features.rootless). These tests prove that the isolation
 * still holds: a sandbox is created, commands run as the mapped user (uid 0 inside),
 * the root is read-only, /etc/shadow is hidden, network none cannot reach a host
 * listener, ps shows only the sandbox, a detached process dies at Terminate; and that
 * limits the host cannot enforce for `nobody` (no delegated cgroup) are named in the
 * sandbox's warnings instead of being dropped silently. Each test starts its own
 * daemon as uid/gid 65534 (itutil.h) and stops it expecting exit status 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

#define NOBODY 65534
#define CMD_MS 60000u

/* Starts the daemon as nobody and connects; checks that it says it is rootless. */
static sbx_client *start_rootless(struct it_daemon *d) {
        struct sbx_hello *h = NULL;
        sbx_client *c;

        it_daemon_start_as(d, NOBODY, NOBODY, NULL);
        c = it_connect(d);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_msg(h->rootless, "a daemon running as uid %d does not say rootless", NOBODY);
        ck_assert_msg(h->user_namespaces, "rootless daemon without user namespaces");
        sbx_hello_free(h);
        return c;
}

static void stop_ok(struct it_daemon *d) {
        int st = it_daemon_stop(d);

        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbxd stopped with status 0x%x", st);
}

/* Creates a sandbox with o (NULL: defaults); fails the test with the daemon's message
 * (and its log) when rootless creation fails. */
static struct sbx_sandbox *create_sb(struct it_daemon *d, sbx_client *c,
                                     const struct sbx_create_opts *o) {
        struct sbx_create_opts def;
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code;

        if (!o) {
                sbx_create_opts_init(&def);
                o = &def;
        }
        code = sbx_create(c, o, &sb);
        if (code != SBX_OK) {
                char cmd[700];
                snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", d->log);
                (void)!system(cmd);
        }
        ck_assert_msg(code == SBX_OK, "rootless create: %s: %s (daemon log above)",
                      sbx_code_name(code), sbx_error_message(c));
        ck_assert_int_eq(sb->state, SBX_STATE_READY);
        return sb;
}

/* Runs shell in id; the command must exit. Returns its stdout (caller frees) and the
 * exit code in *ret_rc. */
static char *sh_out(sbx_client *c, const char *id, const char *shell, int *ret_rc) {
        struct sbx_result *r = it_sh(c, id, CMD_MS, shell);
        char *out;

        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED, "`%s`: outcome %s (%s)", shell,
                      sbx_outcome_name(r->outcome), r->start_error ? r->start_error : "-");
        *ret_rc = r->exit_code;
        out = strdup(r->stdout_data ? (const char *)r->stdout_data : "");
        sbx_result_free(r);
        return out;
}

static void terminate_ok(sbx_client *c, const char *id) {
        struct sbx_sandbox *sb = NULL;

        ck_assert_int_eq(sbx_terminate(c, id, &sb), SBX_OK);
        ck_assert_int_eq(sb->state, SBX_STATE_TERMINATED);
        sbx_sandbox_free(sb);
}

/* Waits up to ms for it_count_procs(needle) to equal want; returns the last count. */
static int wait_procs(const char *needle, int want, double ms) {
        double t0 = it_now_ms();
        int n;

        while ((n = it_count_procs(needle)) != want && it_now_ms() - t0 < ms)
                usleep(20000);
        return n;
}

START_TEST(test_rootless_create_and_run) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        double t0 = it_now_ms();
        char *out;
        int rc;
        sbx_client *c;

        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);
        ck_assert_msg(sb->isolated, "a rootless sandbox says it is not isolated");
        out = sh_out(c, sb->id, "echo hi", &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_str_eq(out, "hi\n");
        free(out);
        /* The command runs as the user mapped to the daemon's uid: 0 inside. */
        out = sh_out(c, sb->id, "id -u; id -g", &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_str_eq(out, "0\n0\n");
        free(out);
        /* ... with no capabilities and no_new_privs even so. */
        out = sh_out(c, sb->id, "grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status", &rc);
        ck_assert_str_eq(out, "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                              "NoNewPrivs:\t1\n");
        free(out);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
        ck_assert_msg(it_now_ms() - t0 < 30000, "took %.0f ms", it_now_ms() - t0);
}
END_TEST

START_TEST(test_rootless_confined) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sockaddr_in sa;
        struct pollfd p;
        socklen_t len = sizeof(sa);
        char head[17], *out, *cmd, probe[64];
        int fd, rc, lfd, port, leaked, lines = 0;
        ssize_t n;
        sbx_client *c;

        fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "cannot read the host's /etc/shadow: %s", strerror(errno));
        n = read(fd, head, sizeof(head) - 1);
        close(fd);
        ck_assert_int_gt(n, 4);
        head[n] = '\0';

        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(lfd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(lfd, 16), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
        port = ntohs(sa.sin_port);

        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);

        /* Uid 0 inside, but the root stays read-only. */
        snprintf(probe, sizeof(probe), "/etc/sbxt-rootless-%d", (int)getpid());
        cmd = xasprintf("echo x > %s", probe);
        out = sh_out(c, sb->id, cmd, &rc);
        leaked = access(probe, F_OK) == 0;
        if (leaked)
                unlink(probe);
        ck_assert_int_ne(rc, 0);
        ck_assert_msg(!leaked, "%s was written on the host", probe);
        free(out);
        free(cmd);
        out = sh_out(c, sb->id, "touch /usr/sbxt-rootless || mkdir /sbxt-rootless", &rc);
        ck_assert_int_ne(rc, 0);
        free(out);

        /* /etc/shadow: nothing of the host's. */
        out = sh_out(c, sb->id, "cat /etc/shadow", &rc);
        ck_assert_msg(strstr(out, head) == NULL, "/etc/shadow leaked");
        ck_assert_str_eq(out, "");
        free(out);

        /* Network none: the host's 127.0.0.1 is not reachable. */
        cmd = xasprintf("python3 -c \"import socket\n"
                        "try:\n"
                        "    socket.create_connection(('127.0.0.1', %d), timeout=3)\n"
                        "    print('connected')\n"
                        "except OSError as e:\n"
                        "    print('failed', e.errno)\"",
                        port);
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_msg(strncmp(out, "failed", 6) == 0, "host listener reached: %s", out);
        free(out);
        free(cmd);
        p.fd = lfd;
        p.events = POLLIN;
        ck_assert_msg(poll(&p, 1, 300) == 0, "a connection reached the host listener");
        close(lfd);

        /* ps: PID 1 is sbx-init, and nothing but the sandbox's own processes. */
        out = sh_out(c, sb->id, "ps ax -o pid=,args=", &rc);
        ck_assert_int_eq(rc, 0);
        {
                char *save = NULL, *line;
                int saw_init = 0;
                for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        char *end;
                        long pid = strtol(line, &end, 10);
                        while (*end == ' ')
                                end++;
                        lines++;
                        if (pid == 1) {
                                ck_assert_msg(strncmp(end, "sbx-init", 8) == 0, "PID 1: %s", end);
                                saw_init = 1;
                        } else {
                                ck_assert_msg(strncmp(end, "/bin/sh -c", 10) == 0 ||
                                                      strncmp(end, "ps ax", 5) == 0,
                                              "unexpected process %ld `%s`", pid, end);
                        }
                }
                ck_assert(saw_init);
                ck_assert_int_le(lines, 4);
        }
        free(out);
        cmd = xasprintf("kill -0 %d", (int)getpid());
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_int_ne(rc, 0);
        free(out);
        free(cmd);

        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

START_TEST(test_rootless_setsid_dies_at_terminate) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char needle[64], *cmd, *out;
        double t0;
        int rc;
        sbx_client *c;

        snprintf(needle, sizeof(needle), "sleep 1236.%d", (int)getpid());
        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);
        cmd = xasprintf("setsid %s </dev/null >/dev/null 2>&1 &", needle);
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_int_eq(rc, 0);
        free(out);
        free(cmd);
        ck_assert_int_eq(wait_procs(needle, 1, 10000), 1);
        usleep(300000);
        ck_assert_int_eq(it_count_procs(needle), 1); /* It outlived its command. */
        t0 = it_now_ms();
        terminate_ok(c, sb->id);
        ck_assert_int_eq(wait_procs(needle, 0, 5000), 0);
        ck_assert_msg(it_now_ms() - t0 < 5000, "took %.0f ms", it_now_ms() - t0);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* 1 when one warning contains both a and b (case-sensitive). */
static int warned(const struct sbx_strv *w, const char *a, const char *b) {
        size_t i;

        for (i = 0; i < w->n; i++)
                if (strstr(w->v[i], a) && strstr(w->v[i], b))
                        return 1;
        return 0;
}

static const char *enforcement_of(const struct sbx_sandbox *sb, const char *limit) {
        size_t i;

        for (i = 0; i < sb->n_enforcement; i++)
                if (strcmp(sb->enforcement[i].limit, limit) == 0)
                        return sb->enforcement[i].enforcement;
        return NULL;
}

static void dump_warnings(const struct sbx_strv *w) {
        size_t i;

        for (i = 0; i < w->n; i++)
                fprintf(stderr, "warning: %s\n", w->v[i]);
}

START_TEST(test_rootless_limits_warned) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb;
        const char *e;
        char *out;
        int rc;
        sbx_client *c;

        c = start_rootless(&d);
        sbx_create_opts_init(&o);
        o.policy.limits.set = SBX_LIMIT_MEMORY | SBX_LIMIT_PROCESSES;
        o.policy.limits.memory_bytes = 64ull * 1024 * 1024;
        o.policy.limits.processes = 32;
        sb = create_sb(&d, c, &o);
        if (!warned(&sb->warnings, "memory", "not enforced") ||
            !warned(&sb->warnings, "process", "not enforced"))
                dump_warnings(&sb->warnings);
        ck_assert_msg(warned(&sb->warnings, "memory", "not enforced"),
                      "no warning that the memory limit is not enforced (%zu warnings)",
                      sb->warnings.n);
        ck_assert_msg(warned(&sb->warnings, "process", "not enforced"),
                      "no warning that the process limit is not enforced (%zu warnings)",
                      sb->warnings.n);
        e = enforcement_of(sb, "memory");
        ck_assert_msg(e && strcmp(e, "none") == 0, "memory enforced by %s", e ? e : "(absent)");
        /* The sandbox still works; the limits asked for are kept in its policy. */
        ck_assert_uint_eq(sb->policy.limits.memory_bytes, 64ull * 1024 * 1024);
        ck_assert_uint_eq(sb->policy.limits.processes, 32);
        out = sh_out(c, sb->id, "echo ok", &rc);
        ck_assert_str_eq(out, "ok\n");
        free(out);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* The guard works for a rootless daemon too (its helper enters the sandbox's user
 * namespace first): a hidden file of the user's that the host replaces is covered again
 * within moments. */
static char secret_dir[64]; /* made and removed by the runner, so a failure leaves nothing */

static void secret_dir_setup(void) {
        snprintf(secret_dir, sizeof(secret_dir), "/var/tmp/sbxt-rootless-XXXXXX");
        if (!mkdtemp(secret_dir) || chmod(secret_dir, 0755) < 0)
                secret_dir[0] = '\0';
}

static void secret_dir_teardown(void) {
        char cmd[128];

        if (!secret_dir[0])
                return;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", secret_dir);
        (void)!system(cmd);
}

START_TEST(test_rootless_replaced_secret_hidden_again) {
        const char *dir = secret_dir;
        char *secret, *tmp, *cmd, *out;
        struct sbx_create_opts o;
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char *drv[1];
        sbx_client *c;
        int rc, clean = 0;
        FILE *f;

        ck_assert_str_ne(dir, "");
        secret = xasprintf("%s/token", dir);
        tmp = xasprintf("%s/.token.new", dir);
        f = fopen(secret, "w");
        ck_assert_ptr_nonnull(f);
        fputs("old-token\n", f);
        fclose(f);
        ck_assert_int_eq(chmod(secret, 0644), 0);

        c = start_rootless(&d);
        sbx_create_opts_init(&o);
        drv[0] = secret;
        o.policy.denied_read_paths.v = drv;
        o.policy.denied_read_paths.n = 1;
        sb = create_sb(&d, c, &o);
        cmd = xasprintf("cat %s", secret);
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_msg(strstr(out, "old-token") == NULL, "hidden file shown: %s", out);
        free(out);
        f = fopen(tmp, "w");
        ck_assert_ptr_nonnull(f);
        fputs("new-token\n", f);
        fclose(f);
        ck_assert_int_eq(chmod(tmp, 0644), 0);
        ck_assert_int_eq(rename(tmp, secret), 0);
        for (int i = 0; i < 250 && !clean; i++) {
                out = sh_out(c, sb->id, cmd, &rc);
                clean = strstr(out, "new-token") == NULL;
                free(out);
                if (!clean)
                        usleep(20000);
        }
        ck_assert_msg(clean, "the replaced secret stayed readable");
        free(cmd);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
        free(secret);
        free(tmp);
}
END_TEST

/* Hidden directories rootless: empty, read-only, one filesystem for all of them (init
 * mounts it in the sandbox's own user namespace and binds it on each). */
START_TEST(test_rootless_hidden_directories) {
        struct sbx_create_opts o;
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char *dirs[2], *cmd, *out;
        sbx_client *c;
        int i, rc;

        ck_assert_str_ne(secret_dir, "");
        for (i = 0; i < 2; i++) {
                FILE *f;
                dirs[i] = xasprintf("%s/h%d", secret_dir, i);
                ck_assert_int_eq(mkdir(dirs[i], 0755), 0);
                cmd = xasprintf("%s/key", dirs[i]);
                f = fopen(cmd, "w");
                ck_assert_ptr_nonnull(f);
                fputs("sekrit\n", f);
                fclose(f);
                ck_assert_int_eq(chmod(cmd, 0644), 0);
                free(cmd);
        }
        c = start_rootless(&d);
        sbx_create_opts_init(&o);
        o.policy.denied_read_paths.v = dirs;
        o.policy.denied_read_paths.n = 2;
        sb = create_sb(&d, c, &o);
        cmd = xasprintf(
                "cat %s/key %s/key 2>/dev/null; find %s %s -mindepth 1 | wc -l; "
                "stat -c %%d:%%i %s %s | uniq | wc -l; touch %s/x 2>/dev/null || echo refused",
                dirs[0], dirs[1], dirs[0], dirs[1], dirs[0], dirs[1], dirs[1]);
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_str_eq(out, "0\n1\nrefused\n");
        free(out);
        free(cmd);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
        for (i = 0; i < 2; i++)
                free(dirs[i]);
}
END_TEST

/* The sandbox user has a name rootless too: uid 0 of the sandbox's user namespace is
 * "sandbox" (its entry first, so that getpwuid finds it), with home /workspace, while
 * the host's "root" entry stays for the tools that look root up by name; git commits
 * with the default identity (docs/sandboxes.md, "What a sandbox is"). */
START_TEST(test_rootless_user_has_a_name) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char *out;
        int rc;
        sbx_client *c;

        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);
        out = sh_out(c, sb->id,
                     "whoami; id -un; id -gn; echo ~; head -n 1 /etc/passwd; "
                     "getent passwd root | cut -d: -f1,3",
                     &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_str_eq(out, "sandbox\nsandbox\nsandbox\n/workspace\n"
                              "sandbox:x:0:0:sandbox:/workspace:/bin/bash\nroot:0\n");
        free(out);
        out = sh_out(c, sb->id,
                     "cd /workspace && git init -q r && cd r && "
                     "git commit -q --allow-empty -m one && git log --format='%an <%ae>'",
                     &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_str_eq(out, "sandbox <sandbox@sbxd.invalid>\n");
        free(out);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* A background command under a rootless daemon: its id at once (init's Started ack
 * works in a user namespace), it outlives its client, another client attaches to it and
 * follows it to its end. */
START_TEST(test_rootless_background) {
        struct sbx_background *b = NULL;
        struct sbx_attach_opts ao;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct it_daemon d;
        struct sbx_sandbox *sb;
        sbx_client *c;

        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);
        sbx_exec_opts_init(&o);
        o.shell = "echo up; sleep 0.5; echo down; exit 6";
        ck_assert_int_eq(sbx_exec_background(c, sb->id, &o, &b), SBX_OK);
        ck_assert_ptr_null(b->result);
        sbx_close(c);
        c = it_connect(&d);
        memset(&ao, 0, sizeof(ao));
        ao.command_id = b->command_id;
        ao.follow = 1;
        ck_assert_int_eq(sbx_attach(c, sb->id, &ao, &r), SBX_OK);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->exit_code, 6);
        ck_assert_str_eq((char *)r->stdout_data, "up\ndown\n");
        sbx_result_free(r);
        sbx_background_free(b);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* A rootless sandbox drops the daemon user's supplementary groups where newgidmap and
 * a range of the user's in /etc/subgid let it: a file readable through one of them is
 * out of reach and nothing is warned; without the range they stay (setgroups is denied
 * in a user namespace the user maps alone), with a warning saying what to do. Before,
 * they always stayed, unsaid: a sandbox of a member of a root daemon's socket group
 * could reach that daemon. The /etc/subgid the daemon and newgidmap read is the test's
 * own, bound over the host's in a mount namespace of the test's process (gone with
 * it). */
START_TEST(test_rootless_groups_dropped) {
        const gid_t groups[1] = {3190};
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char *subgid = NULL, *secret = NULL, *cmd, *out;
        sbx_client *c;
        FILE *f;
        int rc;

        ck_assert_msg(access("/usr/bin/newgidmap", X_OK) == 0,
                      "newgidmap is missing: `make test-pkgs` installs uidmap");
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_ge(asprintf(&subgid, "%s/subgid", it_base_dir()), 0);
        ck_assert_int_ge(asprintf(&secret, "%s/group-secret", it_base_dir()), 0);
        f = fopen(subgid, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        ck_assert_int_eq(mount(subgid, "/etc/subgid", NULL, MS_BIND, NULL), 0);
        f = fopen(secret, "w");
        ck_assert_ptr_nonnull(f);
        fputs("GROUP-SECRET\n", f);
        fclose(f);
        ck_assert_int_eq(chown(secret, 0, groups[0]), 0);
        ck_assert_int_eq(chmod(secret, 0640), 0);
        ck_assert_int_ge(asprintf(&cmd, "id -G; cat %s 2>&1; true", secret), 0);

        /* No range: the group stays (unmapped inside, so 65534), with a warning. */
        it_daemon_start_groups(&d, NOBODY, NOBODY, groups, 1, NULL);
        c = it_connect(&d);
        sb = create_sb(&d, c, NULL);
        ck_assert_msg(warned(&sb->warnings, "supplementary groups", "/etc/subgid"),
                      "kept groups are not warned (%zu warnings)", sb->warnings.n);
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_msg(strcmp(out, "0 65534\nGROUP-SECRET\n") == 0, "groups kept: %s", out);
        free(out);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);

        /* A range: the groups go, and nothing is warned. */
        f = fopen("/etc/subgid", "w");
        ck_assert_ptr_nonnull(f);
        fputs("nobody:1300000:65536\n", f);
        fclose(f);
        it_daemon_start_groups(&d, NOBODY, NOBODY, groups, 1, NULL);
        c = it_connect(&d);
        sb = create_sb(&d, c, NULL);
        if (sb->warnings.n)
                dump_warnings(&sb->warnings);
        ck_assert_msg(!warned(&sb->warnings, "supplementary groups", ""),
                      "groups warned although dropped");
        out = sh_out(c, sb->id, cmd, &rc);
        ck_assert_msg(strncmp(out, "0\n", 2) == 0 && strstr(out, "Permission denied") &&
                              !strstr(out, "GROUP-SECRET"),
                      "groups not dropped: %s", out);
        free(out);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
        free(cmd);
        free(subgid);
        free(secret);
}
END_TEST

static TCase *add(Suite *s, const char *name, const TTest *test) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, test);
        suite_add_tcase(s, tc);
        return tc;
}

/* A command on a terminal (RunCommand.tty) in a rootless sandbox: a pty of the
 * sandbox's own devpts (mounted in its user namespace), sized as asked, its controlling
 * terminal, and a resize reaches it. */
START_TEST(test_rootless_tty) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        sbx_client *c;

        c = start_rootless(&d);
        sb = create_sb(&d, c, NULL);
        sbx_exec_opts_init(&o);
        o.shell = "tty; stty size; test -t 0 -a -t 1 -a -t 2 && echo ALL; exec </dev/tty && "
                  "echo CTTY";
        o.tty = 1;
        o.rows = 30;
        o.cols = 100;
        o.timeout_ms = CMD_MS;
        ck_assert_int_eq(sbx_exec(c, sb->id, &o, &r), SBX_OK);
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "outcome %s: %s",
                      sbx_outcome_name(r->outcome), r->start_error ? r->start_error : "-");
        ck_assert_str_eq((char *)r->stdout_data, "/dev/pts/0\r\n30 100\r\nALL\r\nCTTY\r\n");
        ck_assert_uint_eq(r->stderr_len, 0);
        sbx_result_free(r);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("rootless");
        TCase *tc;

        add(s, "create_and_run", test_rootless_create_and_run);
        add(s, "confined", test_rootless_confined);
        add(s, "setsid_terminate", test_rootless_setsid_dies_at_terminate);
        add(s, "limits_warned", test_rootless_limits_warned);
        add(s, "user_has_a_name", test_rootless_user_has_a_name);
        add(s, "background", test_rootless_background);
        add(s, "tty", test_rootless_tty);
        /* Under /var/tmp: the sandbox's /tmp is its own. */
        tc = tcase_create("groups_dropped");
        tcase_add_unchecked_fixture(tc, it_fixture_setup_var, it_fixture_teardown);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, test_rootless_groups_dropped);
        suite_add_tcase(s, tc);
        tcase_add_unchecked_fixture(
                add(s, "replaced_secret", test_rootless_replaced_secret_hidden_again),
                secret_dir_setup, secret_dir_teardown);
        tcase_add_unchecked_fixture(add(s, "hidden_directories", test_rootless_hidden_directories),
                                    secret_dir_setup, secret_dir_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
