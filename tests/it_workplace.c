/* it_workplace.c: integration tests of the sandbox as a place to work, against a real
 * sbxd: the sandbox user, its environment and its tools (docs/sandboxes.md, "What a
 * sandbox is").
 *
 * The sandbox user has a name and a home: whoami, id, bash's \u, getent and ~ work; git
 * commits with a default identity that `git config` and the caller's environment still
 * override; the view's /etc/passwd and /etc/group carry the host's entries (or a
 * root_dir's) behind the sandbox user's, read-only, whether the sandbox came from the
 * warm pool or not, and the host's files are untouched. What the view hides stays hidden
 * (a denied /etc/passwd shows only the entry; a root_dir's /etc/passwd that leads to a
 * file the sandbox user may not read, or out of the view, is not copied). The daemon's
 * own environment does not leak: commands get the standard PATH and no TERM whatever
 * the daemon had, unless the caller passes them. The rootless side is in it_rootless.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

#define CMD_MS   60000u
#define STD_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Runs shell in id with the extra environment (NULL-terminated "K=V", may be NULL); it
 * must exit 0. Returns its stdout (caller frees). */
static char *sh_env(sbx_client *c, const char *id, const char *const *env, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        size_t n = 0;
        char *out;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = CMD_MS;
        while (env && env[n])
                n++;
        o.env = env;
        o.n_env = n;
        ck_assert_msg(sbx_exec(c, id, &o, &r) == SBX_OK, "`%s`: %s", shell, sbx_error_message(c));
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0,
                      "`%s`: outcome %s, exit %d, stderr: %s", shell, sbx_outcome_name(r->outcome),
                      r->exit_code, r->stderr_data ? (char *)r->stderr_data : "");
        out = strdup(r->stdout_data ? (const char *)r->stdout_data : "");
        sbx_result_free(r);
        return out;
}

static char *sh(sbx_client *c, const char *id, const char *shell) {
        return sh_env(c, id, NULL, shell);
}

/* The whole content of the host file path (caller frees). */
static char *slurp(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t cap = 0;
        ssize_t n;

        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        n = getdelim(&buf, &cap, '\0', f);
        fclose(f);
        return n < 0 ? strdup("") : buf;
}

static void put_file(const char *path, const char *text, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

/* The file path of sandbox id as the file API reads it (caller frees), or NULL when it
 * cannot be read. */
static char *read_in(sbx_client *c, const char *id, const char *path) {
        struct sbx_read_result *rr = NULL;
        char *s;

        if (sbx_read(c, id, path, 0, 0, &rr) != SBX_OK)
                return NULL;
        s = strndup((const char *)rr->data, rr->len);
        sbx_read_result_free(rr);
        return s;
}

static int has_warning(const struct sbx_sandbox *sb, const char *needle) {
        size_t i;
        for (i = 0; i < sb->warnings.n; i++)
                if (strstr(sb->warnings.v[i], needle))
                        return 1;
        return 0;
}

/* The checks of a sandbox's user, in a daemon started with flags; with warm, once a warm
 * sandbox is ready, so that the create claims it (the log says so). */
static void check_user(const char *const *flags, int warm) {
        struct it_daemon d;
        sbx_client *c;
        char *id, *out, *host_passwd = slurp("/etc/passwd"), *host_group = slurp("/etc/group");
        char *uid, *first, *line;
        const char *who[] = {"exec", NULL, "--", "whoami", NULL};

        /* The warm sandbox claimed is ended by no mount of another program's. */
        if (warm)
                it_private_mounts();
        it_daemon_start(&d, flags);
        if (warm)
                (void)it_wait_log(&d, ": warm and ready", 1);
        c = it_connect(&d);
        id = it_create(c, NULL);
        ck_assert_int_eq(it_log_count(&d, ": claimed ~warm-"), warm ? 1 : 0);

        /* whoami through the sbx tool, as the newcomer ran it. */
        who[1] = id;
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, who), 0);
        ck_assert_str_eq(out, "sandbox\n");
        free(out);

        /* id, bash's \u, getent and ~ agree; the entry names the uid commands run as. */
        uid = sh(c, id, "id -u");
        out = sh(c, id,
                 "id -un; id -gn; bash -c 'p=\"\\u\"; echo \"${p@P}\"'; echo ~; "
                 "echo \"$USER $LOGNAME\"");
        ck_assert_str_eq(out, "sandbox\nsandbox\nsandbox\n/workspace\nsandbox sandbox\n");
        free(out);
        out = sh(c, id, "getent passwd sandbox; getent group sandbox");
        line = xasprintf("sandbox:x:%.*s:%.*s:sandbox:/workspace:", (int)strcspn(uid, "\n"), uid,
                         (int)strcspn(uid, "\n"), uid);
        ck_assert_msg(strncmp(out, line, strlen(line)) == 0, "getent: %s (want %s...)", out, line);
        free(line);
        free(out);

        /* The host's entries follow the sandbox user's; the files are read-only. */
        out = sh(c, id, "cat /etc/passwd");
        first = strchr(out, '\n');
        ck_assert_ptr_nonnull(first);
        ck_assert_msg(strcmp(first + 1, host_passwd) == 0,
                      "the host's /etc/passwd does not follow the entry: %s", out);
        free(out);
        out = sh(c, id, "cat /etc/group");
        first = strchr(out, '\n');
        ck_assert_ptr_nonnull(first);
        ck_assert_str_eq(first + 1, host_group);
        free(out);
        out = sh(c, id,
                 "echo evil::0:0::/:/bin/sh >> /etc/passwd 2>/dev/null && echo wrote; "
                 "echo evil::0: >> /etc/group 2>/dev/null && echo wrote; true");
        ck_assert_str_eq(out, "");
        free(out);

        /* git commits with the default identity, without the "configured automatically"
         * advice; git config made inside wins over it, and so does the caller's env. */
        out = sh(c, id,
                 "cd /workspace && git init -q r && cd r && "
                 "git commit --allow-empty -m one 2>&1 && "
                 "git log -1 --format='%an <%ae> / %cn <%ce>'");
        ck_assert_msg(!strstr(out, "configured automatically"), "git advice: %s", out);
        ck_assert_msg(
                strstr(out, "sandbox <sandbox@sbxd.invalid> / sandbox <sandbox@sbxd.invalid>\n"),
                "git identity: %s", out);
        free(out);
        out = sh(c, id,
                 "cd /workspace/r && git config user.name Alice && "
                 "git config user.email alice@example.org && git commit -q --allow-empty -m two && "
                 "git log -1 --format='%an <%ae>'");
        ck_assert_str_eq(out, "Alice <alice@example.org>\n");
        free(out);
        {
                const char *env[] = {"GIT_AUTHOR_NAME=Bob", "EMAIL=bob@example.org", NULL};
                out = sh_env(c, id, env,
                             "cd /workspace/r && git config --unset user.email && "
                             "git commit -q --allow-empty -m three && "
                             "git log -1 --format='%an <%ae> / %cn'");
                ck_assert_str_eq(out, "Bob <bob@example.org> / Alice\n");
                free(out);
        }

        /* The host's files are as they were. */
        out = slurp("/etc/passwd");
        ck_assert_str_eq(out, host_passwd);
        free(out);
        out = slurp("/etc/group");
        ck_assert_str_eq(out, host_group);
        free(out);

        free(uid);
        free(id);
        free(host_passwd);
        free(host_group);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

/* A sandbox set up for the create (no warm pool), and one claimed from the pool, whose
 * commands run under a uid chosen only at the claim. */
START_TEST(user_has_a_name_cold) {
        const char *flags[] = {"--warm", "0", NULL};
        check_user(flags, 0);
}
END_TEST

START_TEST(user_has_a_name_warm) {
        const char *flags[] = {"--warm", "2", NULL};
        check_user(flags, 1);
}
END_TEST

/* The environment the creator gives overrides the defaults, a command's overrides both,
 * and a name the creator inherits from the daemon is the daemon's. */
START_TEST(identity_env_overridable) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        sbx_client *c;
        char *out, *inherit[] = {"EMAIL"};
        const char *env[] = {"USER=me", "EMAIL=me@example.org", NULL};
        const char *cmd_env[] = {"EMAIL=cmd@example.org", NULL};

        setenv("EMAIL", "daemon@example.org", 1);
        it_daemon_start(&d, NULL);
        unsetenv("EMAIL");
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.env = env;
        o.n_env = 2;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        out = sh(c, sb->id, "echo \"$USER $LOGNAME $EMAIL\"");
        ck_assert_str_eq(out, "me sandbox me@example.org\n");
        free(out);
        out = sh_env(c, sb->id, cmd_env, "echo \"$EMAIL\"");
        ck_assert_str_eq(out, "cmd@example.org\n");
        free(out);
        sbx_sandbox_free(sb);

        sbx_create_opts_init(&o);
        o.policy.inherit_environment.v = inherit;
        o.policy.inherit_environment.n = 1;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        out = sh(c, sb->id, "echo \"$EMAIL $USER\"");
        ck_assert_str_eq(out, "daemon@example.org sandbox\n");
        free(out);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A denied /etc/passwd stays hidden: the view's file holds the entry and nothing of the
 * host's. */
START_TEST(denied_passwd_stays_hidden) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        sbx_client *c;
        char *out, *deny[] = {"/etc/passwd"};
        const char *flags[] = {"--warm", "0", NULL};

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.denied_read_paths.v = deny;
        o.policy.denied_read_paths.n = 1;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        out = sh(c, sb->id, "cat /etc/passwd; whoami");
        ck_assert_msg(strncmp(out, "sandbox:x:", 10) == 0 && !strstr(out, "root:"),
                      "a denied /etc/passwd shows: %s", out);
        ck_assert_msg(strstr(out, "\nsandbox\n"), "whoami: %s", out);
        free(out);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Creates a sandbox with root_dir root; returns it (caller frees). */
static struct sbx_sandbox *create_root(sbx_client *c, char *root) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;

        sbx_create_opts_init(&o);
        o.policy.root_dir = root;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create with root %s: %s", root,
                      sbx_error_message(c));
        return sb;
}

/* A root_dir sandbox: the tree's own entries follow the sandbox user's (none of the
 * host's); a tree without /etc gets one with the entries alone; a tree with an /etc but
 * no passwd is left so, with a warning; a passwd the sandbox user may not read, or that
 * leads out of the view (to where the host's tree hangs while the view is built), is not
 * copied. The file API reads the view as commands do. */
START_TEST(root_dir_entries) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        sbx_client *c;
        char *root, *p, *out, *shadow = slurp("/etc/shadow"), *shadow_line;
        const char *flags[] = {"--warm", "0", NULL};

        it_daemon_start(&d, flags);
        c = it_connect(&d);

        /* A tree with its own files. */
        root = xasprintf("%s/tree", it_base_dir());
        ck_assert_int_eq(mkdir(root, 0755), 0);
        p = xasprintf("%s/etc", root);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        p = xasprintf("%s/etc/passwd", root);
        put_file(p, "treeuser:x:4242:4242::/:/bin/false", 0644); /* no final newline */
        free(p);
        p = xasprintf("%s/etc/group", root);
        put_file(p, "treegroup:x:4242:\n", 0644);
        free(p);
        sb = create_root(c, root);
        out = read_in(c, sb->id, "/etc/passwd");
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(strncmp(out, "sandbox:x:", 10) == 0 &&
                              strstr(out, ":sandbox:/workspace:/bin/sh\ntreeuser:x:4242:4242::/:/"
                                          "bin/false\n") &&
                              !strstr(out, "root:x:0:0"),
                      "root_dir /etc/passwd: %s", out);
        free(out);
        out = read_in(c, sb->id, "/etc/group");
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(strncmp(out, "sandbox:x:", 10) == 0 && strstr(out, ":\ntreegroup:x:4242:\n"),
                      "root_dir /etc/group: %s", out);
        free(out);
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        free(root);

        /* A tree without /etc. */
        root = xasprintf("%s/bare", it_base_dir());
        ck_assert_int_eq(mkdir(root, 0755), 0);
        sb = create_root(c, root);
        out = read_in(c, sb->id, "/etc/passwd");
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(strncmp(out, "sandbox:x:", 10) == 0 &&
                              strchr(out, '\n') == out + strlen(out) - 1,
                      "a tree without /etc: %s", out);
        free(out);
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        free(root);

        /* A tree with /etc and no passwd: left as it is, said in the warnings. */
        root = xasprintf("%s/nopasswd", it_base_dir());
        ck_assert_int_eq(mkdir(root, 0755), 0);
        p = xasprintf("%s/etc", root);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        sb = create_root(c, root);
        ck_assert_msg(has_warning(sb, "/etc/passwd"), "no warning about the missing /etc/passwd");
        ck_assert_ptr_null(read_in(c, sb->id, "/etc/passwd"));
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        free(root);

        /* A passwd only root may read, and one that leads to the host's shadow file by
         * the name the host's tree has while the view is built: neither is copied. */
        root = xasprintf("%s/secret", it_base_dir());
        ck_assert_int_eq(mkdir(root, 0755), 0);
        p = xasprintf("%s/etc", root);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        p = xasprintf("%s/etc/passwd", root);
        put_file(p, "secret-line-4711\n", 0600);
        free(p);
        p = xasprintf("%s/etc/group", root);
        ck_assert_int_eq(symlink("/.sbx-oldroot/etc/shadow", p), 0);
        free(p);
        sb = create_root(c, root);
        out = read_in(c, sb->id, "/etc/passwd");
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(strncmp(out, "sandbox:x:", 10) == 0 && !strstr(out, "secret-line-4711"),
                      "an unreadable /etc/passwd was copied: %s", out);
        free(out);
        shadow_line = strndup(shadow, strcspn(shadow, "\n"));
        out = read_in(c, sb->id, "/etc/group");
        ck_assert_msg(!out || !strstr(out, shadow_line), "the host's shadow file shows: %s", out);
        ck_assert_msg(has_warning(sb, "/etc/group"), "no warning about /etc/group");
        free(out);
        free(shadow_line);
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        free(root);

        free(shadow);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The daemon's own PATH and TERM do not reach commands: they get the standard PATH and
 * no TERM, while the host's locale still comes through; a PATH the creator gives is
 * used, and a command's own wins over it. The effective policy says what is inherited. */
START_TEST(daemon_env_does_not_leak) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        sbx_client *c;
        char *out, *old_path = strdup(getenv("PATH") ? getenv("PATH") : STD_PATH), *leaky;
        const char *env[] = {"PATH=/opt/mine/bin:/usr/bin:/bin", NULL};
        const char *cmd_env[] = {"PATH=/cmd/bin:/usr/bin:/bin", NULL};
        size_t i;

        leaky = xasprintf("/opt/sbx-leak/shims:%s", old_path);
        setenv("PATH", leaky, 1);
        setenv("TERM", "xterm-sbx-leak", 1);
        setenv("LANG", "C.UTF-8", 1);
        it_daemon_start(&d, NULL);
        setenv("PATH", old_path, 1);
        unsetenv("TERM");
        c = it_connect(&d);

        sbx_create_opts_init(&o);
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        out = sh(c, sb->id, "echo \"$PATH\"; echo \"${TERM-unset}\"; echo \"$LANG\"");
        ck_assert_str_eq(out, STD_PATH "\nunset\nC.UTF-8\n");
        free(out);
        for (i = 0; i < sb->policy.inherit_environment.n; i++) {
                ck_assert_str_ne(sb->policy.inherit_environment.v[i], "PATH");
                ck_assert_str_ne(sb->policy.inherit_environment.v[i], "TERM");
        }
        sbx_sandbox_free(sb);

        sbx_create_opts_init(&o);
        o.env = env;
        o.n_env = 1;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        out = sh(c, sb->id, "echo \"$PATH\"");
        ck_assert_str_eq(out, "/opt/mine/bin:/usr/bin:/bin\n");
        free(out);
        out = sh_env(c, sb->id, cmd_env, "echo \"$PATH\"");
        ck_assert_str_eq(out, "/cmd/bin:/usr/bin:/bin\n");
        free(out);
        sbx_sandbox_free(sb);

        free(leaky);
        free(old_path);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("workplace");
        TCase *tc = tcase_create("workplace");

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, user_has_a_name_cold);
        tcase_add_test(tc, user_has_a_name_warm);
        tcase_add_test(tc, identity_env_overridable);
        tcase_add_test(tc, denied_passwd_stays_hidden);
        tcase_add_test(tc, root_dir_entries);
        tcase_add_test(tc, daemon_env_does_not_leak);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
