/* it_ssh.c: integration tests of the ssh:// transport (sbx(1), REMOTE DAEMONS): libsbx, the
 * sbx tool, the Python binding and `sbx mcp` reach a real sbxd through a real OpenSSH
 * server and `sbx dial-stdio`, as a client on another machine would.
 *
 * Each test starts its own sshd (Debian's openssh-server; `make check` installs it) as
 * root on 127.0.0.1 at a free port, with a configuration, a throwaway host key and an
 * authorized key of its own in the test's directory, and the client side a config file
 * of its own (known_hosts, identity; no agent, no ~/.ssh) given through SBX_SSH_OPTS.
 * The test logs in as root; the session's PATH (sshd's SetEnv) starts with the build
 * directory, so the remote `sbx` is this tree's. sshd runs in the foreground as the
 * test's child with PR_SET_PDEATHSIG, and the fixture's teardown kills it by the pid it
 * wrote, so that it ends even when a test fails.
 *
 * Covered: the core calls over ssh (hello, create, exec with output and exit code, read
 * and write, streamed stdin, terminate); the sbx tool with SBX_SOCKET and --socket; a
 * command cancelled by its client going away; `sbx dial-stdio` alone (half-close, and
 * no daemon); each failure of the path as one clear UNAVAILABLE message with ssh's own
 * words, well within the client's timeout (a wrong host key, refused authentication,
 * no sbx on the remote side, no daemon there, text from the remote shell, a bad URL);
 * the Python binding and `sbx mcp` over ssh; and the added latency, printed. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sshd.h"
#include "testutil.h"

/* Every failure must be reported well within the client's own bound (30 s for Hello). */
#define FAIL_WITHIN_MS 15000.0

/* ---- clients ---------------------------------------------------------------------------- */

/* A connection to url that must fail: UNAVAILABLE, within FAIL_WITHIN_MS, with a message
 * containing each of the NULL-terminated needles. Returns the message (freed by the
 * caller). */
static char *connect_fails(const char *url, enum sbx_code want, const char *const *needles) {
        sbx_client *c = NULL;
        double t0 = it_now_ms(), ms;
        enum sbx_code rc = sbx_connect(url, "it_ssh", &c);
        char *msg;

        ms = it_now_ms() - t0;
        ck_assert_ptr_nonnull(c);
        msg = strdup(sbx_error_message(c));
        ck_assert_msg(rc == want, "%s: %s, not %s: %s", url, sbx_code_name(rc), sbx_code_name(want),
                      msg);
        ck_assert_msg(ms < FAIL_WITHIN_MS, "the failure took %.0f ms: %s", ms, msg);
        for (; needles && *needles; needles++)
                ck_assert_msg(strstr(msg, *needles), "'%s' not in: %s", *needles, msg);
        /* A later call fails the same way, and closing reaps what was started. */
        ck_assert_int_eq(sbx_list(c, NULL, &(struct sbx_sandbox_list *){NULL}), want);
        sbx_close(c);
        return msg;
}

/* ---- the core calls --------------------------------------------------------------------- */

START_TEST(core_calls_over_ssh) {
        struct it_daemon d;
        struct sshd s;
        struct sbx_hello *h = NULL;
        struct sbx_sandbox *sb = NULL;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct sbx_read_result *rr = NULL;
        sbx_client *c;
        char *id, *big;
        const size_t big_len = 3u << 20;
        int fds[2];

        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        c = connect_url(s.url);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_uint_eq(h->peer_uid, 0); /* the ssh user */
        sbx_hello_free(h);
        id = it_create(c, "over-ssh");

        /* Output on both streams and the exit code. */
        r = it_sh(c, id, 10000, "echo out; echo err >&2; exit 3");
        ck_assert_int_eq(r->exit_code, 3);
        ck_assert_str_eq((char *)r->stdout_data, "out\n");
        ck_assert_str_eq((char *)r->stderr_data, "err\n");
        sbx_result_free(r);

        /* A file larger than one read of the pipe both ways. */
        big = malloc(big_len);
        for (size_t i = 0; i < big_len; i++)
                big[i] = (char)('a' + i % 26);
        ck_assert_int_eq(sbx_write(c, id, "/workspace/big", big, big_len, 0, 0), SBX_OK);
        ck_assert_int_eq(sbx_read(c, id, "/workspace/big", 0, 0, &rr), SBX_OK);
        ck_assert_uint_eq(rr->len, big_len);
        ck_assert(memcmp(rr->data, big, big_len) == 0);
        sbx_read_result_free(rr);
        r = it_sh(c, id, 10000, "wc -c < /workspace/big");
        ck_assert_str_eq((char *)r->stdout_data, "3145728\n");
        sbx_result_free(r);

        /* stdin streamed from a pipe through the ssh pipe. */
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        ck_assert_int_eq(write(fds[1], "piped\n", 6), 6);
        close(fds[1]);
        sbx_exec_opts_init(&o);
        o.shell = "tr a-z A-Z";
        o.stdin_stream = 1;
        o.stdin_fd = fds[0];
        ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
        close(fds[0]);
        ck_assert_str_eq((char *)r->stdout_data, "PIPED\n");
        sbx_result_free(r);

        /* Terminate, and the state seen over a plain local connection. */
        ck_assert_int_eq(sbx_terminate(c, id, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        sbx_close(c);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, id, &sb), SBX_OK);
        ck_assert_int_eq(sb->state, SBX_STATE_TERMINATED);
        sbx_sandbox_free(sb);
        sbx_close(c);
        dial_procs_end(&d); /* every ssh and dial-stdio ended with its client */
        free(big);
        free(id);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The sbx tool with SBX_SOCKET=ssh://... (it_sbx sets it from d.sock) and --socket. */
START_TEST(cli_over_ssh) {
        struct it_daemon d, remote;
        struct sshd s;
        char *out = NULL, *err = NULL;
        int rc;

        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        remote = d;
        memcpy(remote.sock, s.url, sizeof(s.url)); /* it_sbx sets SBX_SOCKET to it */
        rc = it_sbx(&remote, NULL, 0, &out, &err,
                    (const char *[]){"create", "--id", "cli-ssh", NULL});
        ck_assert_msg(rc == 0, "create: %d %s", rc, err);
        free(out);
        free(err);
        rc = it_sbx(&remote, NULL, 0, &out, &err,
                    (const char *[]){"exec", "cli-ssh", "--", "true", NULL});
        ck_assert_msg(rc == 0, "exec true: %d %s", rc, err);
        free(out);
        free(err);
        rc = it_sbx(&remote, NULL, 0, &out, &err,
                    (const char *[]){"exec", "cli-ssh", "--", "sh", "-c",
                                     "echo to-out; echo to-err >&2; exit 7", NULL});
        ck_assert_int_eq(rc, 7);
        ck_assert_str_eq(out, "to-out\n");
        ck_assert_str_eq(err, "to-err\n");
        free(out);
        free(err);
        rc = it_sbx(&remote, "line one\nline two\n", 18, &out, &err,
                    (const char *[]){"write", "cli-ssh", "/workspace/w.txt", NULL});
        ck_assert_msg(rc == 0, "write: %s", err);
        free(out);
        free(err);
        rc = it_sbx(&remote, NULL, 0, &out, &err,
                    (const char *[]){"read", "cli-ssh", "/workspace/w.txt", NULL});
        ck_assert_int_eq(rc, 0);
        ck_assert_str_eq(out, "line one\nline two\n");
        free(out);
        free(err);
        /* --socket wins over SBX_SOCKET; the owner is "you" (the ssh user, root). */
        rc = it_sbx(&d, NULL, 0, &out, &err,
                    (const char *[]){"--socket", s.url, "info", "cli-ssh", NULL});
        ck_assert_int_eq(rc, 0);
        ck_assert_ptr_nonnull(strstr(out, "(you)"));
        free(out);
        free(err);
        rc = it_sbx(&remote, NULL, 0, &out, &err, (const char *[]){"doctor", NULL});
        ck_assert_msg(strstr(out, "answers at ssh://"), "doctor: %s", out);
        free(out);
        free(err);
        rc = it_sbx(&remote, NULL, 0, &out, &err, (const char *[]){"terminate", "cli-ssh", NULL});
        ck_assert_int_eq(rc, 0);
        free(out);
        free(err);
        /* A failure keeps the tool's contract: one line, exit status 125. */
        setenv("SBX_SSH_REMOTE_SBX", "sbx-not-installed-here", 1);
        rc = it_sbx(&remote, NULL, 0, &out, &err, (const char *[]){"list", NULL});
        unsetenv("SBX_SSH_REMOTE_SBX");
        ck_assert_int_eq(rc, 125);
        ck_assert_msg(strncmp(err, "sbx: UNAVAILABLE: ", 18) == 0 && strstr(err, "no sbx on the "
                                                                                 "remote side"),
                      "%s", err);
        ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
        free(out);
        free(err);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client that goes away (killed) while its command runs: ssh sees the end of its
 * pipe, the remote dial-stdio passes it on, and sbxd cancels the command. */
START_TEST(client_going_away_cancels) {
        struct it_daemon d;
        struct sshd s;
        sbx_client *local;
        pid_t child;
        int i, st;
        char sleeper[64], shell[80];

        /* Its own command line: other test programs run this test on the host too. */
        snprintf(sleeper, sizeof(sleeper), "sleep 300.%d", (int)getpid());
        snprintf(shell, sizeof(shell), "exec %s", sleeper);
        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        local = it_connect(&d);
        free(it_create(local, "gone"));
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                sbx_client *c = NULL;
                struct sbx_result *r = NULL;
                struct sbx_exec_opts o;
                if (sbx_connect(s.url, "it_ssh-child", &c) != SBX_OK)
                        _exit(3);
                sbx_exec_opts_init(&o);
                o.shell = shell;
                o.timeout_ms = 600000;
                sbx_exec(c, "gone", &o, &r);
                _exit(4);
        }
        for (i = 0; i < 400 && it_count_procs(sleeper) != 1; i++) {
                ck_assert_int_eq(waitpid(child, &st, WNOHANG), 0);
                usleep(50000);
        }
        ck_assert_int_lt(i, 400);
        kill(child, SIGKILL);
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        /* Cancelled (not ended by itself, 300 s on): the bounds leave a loaded machine room. */
        for (i = 0; i < 600 && it_db_int(&d, "SELECT count(*) FROM commands WHERE outcome = "
                                             "'cancelled'") != 1;
             i++)
                usleep(50000);
        ck_assert_msg(i < 600, "the command was not cancelled within 30 s");
        for (i = 0; i < 600 && it_count_procs(sleeper); i++)
                usleep(50000);
        ck_assert_int_eq(it_count_procs(sleeper), 0);
        dial_procs_end(&d); /* the orphaned ssh and the remote dial-stdio ended too */
        sbx_close(local);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- sbx dial-stdio alone --------------------------------------------------------------- */

/* Bytes pass unchanged both ways; the end of stdin is a half-close, after which the
 * daemon's side ends and dial-stdio exits 0. Without a daemon: 125 and one line. */
START_TEST(dial_stdio_alone) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Hello hello = SBX__V1__HELLO__INIT;
        Sbx__V1__Response *resp;
        struct frame_reader rd;
        struct it_daemon d;
        char nosock[700], errbuf[1024];
        int fd, efd, st;
        ssize_t n;
        pid_t pid;
        double t0;

        it_daemon_start(&d, NULL);
        pid = spawn_dial(d.sock, &fd, &efd);
        frame_reader_init(&rd, 1u << 20);
        hello.has_protocol_version = 1;
        hello.protocol_version = 1;
        hello.client_name = (char *)"raw-over-dial-stdio";
        req.has_request_id = 1;
        req.request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_HELLO;
        req.hello = &hello;
        it_raw_send(fd, &req);
        resp = it_raw_read(fd, &rd, 10000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_HELLO);
        ck_assert_uint_eq(resp->request_id, 1);
        sbx__v1__response__free_unpacked(resp, NULL);
        t0 = it_now_ms();
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        ck_assert_ptr_null(it_raw_read(fd, &rd, 10000)); /* the daemon closed */
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
        ck_assert_double_lt(it_now_ms() - t0, 20000); /* room for a loaded machine */
        frame_reader_free(&rd);
        close(fd);
        close(efd);

        snprintf(nosock, sizeof(nosock), "%s/no-such.sock", it_base_dir());
        pid = spawn_dial(nosock, &fd, &efd);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 125);
        n = read(efd, errbuf, sizeof(errbuf) - 1);
        ck_assert_int_gt(n, 0);
        errbuf[n] = 0;
        ck_assert_msg(strncmp(errbuf, "sbx: UNAVAILABLE: cannot connect to sbxd at ", 44) == 0,
                      "%s", errbuf);
        n = read(fd, errbuf, sizeof(errbuf)); /* nothing on stdout */
        ck_assert_int_eq(n, 0);
        close(fd);
        close(efd);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- failures, each clear and bounded ---------------------------------------------------- */

START_TEST(failures_are_clear) {
        struct it_daemon d;
        struct sshd s;
        char url[800], path[700];
        sbx_client *c = NULL;

        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);

        /* The host's key is not the one known_hosts has for it. */
        use_client_config(&s, "ssh_config_wrong_host");
        free(connect_fails(s.url, SBX_UNAVAILABLE,
                           (const char *[]){"cannot reach sbxd at ssh://", "exit status 255",
                                            "Host key verification failed", "known_hosts", NULL}));
        /* The server does not accept our key. */
        use_client_config(&s, "ssh_config_wrong_key");
        free(connect_fails(
                s.url, SBX_UNAVAILABLE,
                (const char *[]){"exit status 255", "Permission denied", "BatchMode", NULL}));
        use_client_config(&s, "ssh_config");
        /* No sbx on the remote side. */
        setenv("SBX_SSH_REMOTE_SBX", "sbx-not-installed-here", 1);
        free(connect_fails(s.url, SBX_UNAVAILABLE,
                           (const char *[]){"no sbx on the remote side", "exit status 127",
                                            "sbx-not-installed-here", "not found",
                                            "SBX_SSH_REMOTE_SBX", NULL}));
        unsetenv("SBX_SSH_REMOTE_SBX");
        /* sbx is there, sbxd is not (at that path). */
        snprintf(path, sizeof(path), "%s/no-such.sock", it_base_dir());
        url_with_path(&s, path, url, sizeof(url));
        free(connect_fails(url, SBX_UNAVAILABLE,
                           (const char *[]){"exit status 125", "cannot connect to sbxd at",
                                            "no-such.sock", NULL}));
        /* Nothing listens at the port. */
        snprintf(url, sizeof(url), "ssh://root@127.0.0.1:%d%s", free_port(), d.sock);
        free(connect_fails(url, SBX_UNAVAILABLE, (const char *[]){"Connection refused", NULL}));
        /* The remote "sbx" prints text instead of speaking the protocol. */
        setenv("SBX_SSH_REMOTE_SBX", "echo", 1);
        free(connect_fails(s.url, SBX_UNAVAILABLE,
                           (const char *[]){"the remote side wrote 'dial-stdio --socket",
                                            "print nothing else", NULL}));
        unsetenv("SBX_SSH_REMOTE_SBX");
        /* No ssh program. */
        setenv("SBX_SSH", "/nonexistent/ssh", 1);
        free(connect_fails(s.url, SBX_UNAVAILABLE,
                           (const char *[]){"cannot start /nonexistent/ssh", "SBX_SSH", NULL}));
        unsetenv("SBX_SSH");
        /* URLs refused before anything starts (a host that would be an ssh option too). */
        free(connect_fails("ssh://", SBX_INVALID_ARGUMENT, (const char *[]){"bad ssh URL", NULL}));
        free(connect_fails("ssh://-oProxyCommand=touch${IFS}x", SBX_INVALID_ARGUMENT,
                           (const char *[]){"bad ssh URL", NULL}));
        free(connect_fails("ssh://root@h:70000/s", SBX_INVALID_ARGUMENT,
                           (const char *[]){"port", NULL}));

        /* After all that, the right setup still works, and nothing of ours is left. */
        c = connect_url(s.url);
        sbx_close(c);
        dial_procs_end(&d);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- the Python binding and sbx mcp ------------------------------------------------------ */

START_TEST(python_over_ssh) {
        static const char script[] =
                "import sys, sbx\n"
                "url, bad = sys.argv[1], sys.argv[2]\n"
                "with sbx.Client(url, call_timeout=30) as c:\n"
                "    with c.create(id='py-ssh') as sb:\n"
                "        r = sb.run('echo py-over-ssh; exit 4')\n"
                "        assert r.exit_code == 4 and r.stdout == 'py-over-ssh\\n', r\n"
                "        sb.write_file('/workspace/p.txt', 'from python')\n"
                "        assert sb.read_file('/workspace/p.txt') == b'from python'\n"
                "try:\n"
                "    sbx.Client(bad)\n"
                "    print('no error')\n"
                "except sbx.Unavailable as e:\n"
                "    print('unavailable:', e)\n"
                "print('done')\n";
        struct it_daemon d;
        struct sshd s;
        char root[4096], lib[4096 + 32], pypath[4096 + 32], bad[800], out[4096];
        int p[2], st;
        ssize_t n, got = 0;
        pid_t pid;

#ifdef __SANITIZE_ADDRESS__
        /* A sanitized libsbx.so cannot be loaded into python3 without the ASan runtime
         * first (the Python suite is left out of make asan for the same reason). */
        fprintf(stderr, "it_ssh: python_over_ssh skipped in a sanitized build\n");
        return;
#endif
        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        snprintf(bad, sizeof(bad), "ssh://root@127.0.0.1:%d%s/none.sock", s.port, it_base_dir());
        ck_assert_ptr_nonnull(realpath(".", root));
        snprintf(pypath, sizeof(pypath), "%s/client/python", root);
        ck_assert_ptr_nonnull(realpath(it_build_dir(), lib));
        strcat(lib, "/libsbx.so");
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(p[1], 1);
                dup2(p[1], 2);
                setenv("PYTHONPATH", pypath, 1);
                setenv("SBX_LIBSBX", lib, 1);
                execlp("python3", "python3", "-c", script, s.url, bad, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        while (got < (ssize_t)sizeof(out) - 1 &&
               (n = read(p[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
                got += n;
        out[got] = 0;
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "python: %s", out);
        ck_assert_msg(strstr(out, "unavailable: UNAVAILABLE: cannot reach sbxd at ssh://") &&
                              strstr(out, "exit status 125") && strstr(out, "done"),
                      "python: %s", out);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(mcp_over_ssh) {
        static const char input[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":"
                "{\"name\":\"it\",\"version\":\"1\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo "
                "mcp-over-$((6*7))\"}}}\n";
        struct it_daemon d, remote;
        struct sshd s;
        sbx_client *local;
        char *out = NULL, *err = NULL;
        int rc;

        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        local = it_connect(&d);
        free(it_create(local, "mcp-ssh"));
        remote = d;
        memcpy(remote.sock, s.url, sizeof(s.url)); /* it_sbx sets SBX_SOCKET to it */
        rc = it_sbx(&remote, input, strlen(input), &out, &err,
                    (const char *[]){"mcp", "--sandbox", "mcp-ssh", NULL});
        ck_assert_msg(rc == 0, "mcp: %d %s", rc, err);
        ck_assert_msg(strstr(out, "\"id\":2") && strstr(out, "mcp-over-42"), "mcp: %s", out);
        free(out);
        free(err);
        sbx_close(local);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- what ssh costs ----------------------------------------------------------------------- */

/* ms per `exec true` over n calls; per_call: connect and close around each call. */
static double exec_true_ms(const char *url, int n, bool per_call) {
        const char *argv[] = {"true", NULL};
        sbx_client *c = per_call ? NULL : connect_url(url);
        double t0 = it_now_ms();

        for (int i = 0; i < n; i++) {
                if (per_call)
                        c = connect_url(url);
                sbx_result_free(it_exec(c, "lat", 10000, argv));
                if (per_call) {
                        sbx_close(c);
                        c = NULL;
                }
        }
        sbx_close(c);
        return (it_now_ms() - t0) / n;
}

static double cli_true_ms(struct it_daemon *d, int n) {
        double t0 = it_now_ms();
        for (int i = 0; i < n; i++)
                ck_assert_int_eq(it_sbx(d, NULL, 0, NULL, NULL,
                                        (const char *[]){"exec", "lat", "--", "true", NULL}),
                                 0);
        return (it_now_ms() - t0) / n;
}

/* Prints the latency the ssh path adds per command: one connection per call, a kept
 * connection, and one connection per call through an ssh master connection that ssh
 * keeps (ControlMaster, as ~/.ssh/config can ask); asserts only that a kept connection
 * pays no handshake per call. */
START_TEST(latency_of_the_ssh_path) {
        const int n = 10;
        struct it_daemon d, remote;
        struct sshd s;
        sbx_client *c;
        char opts[1600], cp[700];
        double lk, lp, sk, sp, mp, cl, cs, cm;

        it_daemon_start(&d, NULL);
        sshd_start(&s, &d);
        c = it_connect(&d);
        free(it_create(c, "lat"));
        sbx_close(c);
        remote = d;
        memcpy(remote.sock, s.url, sizeof(s.url)); /* it_sbx sets SBX_SOCKET to it */
        (void)exec_true_ms(d.sock, 2, false);      /* warm up */
        lk = exec_true_ms(d.sock, n, false);
        lp = exec_true_ms(d.sock, n, true);
        sk = exec_true_ms(s.url, n, false);
        sp = exec_true_ms(s.url, n, true);
        cl = cli_true_ms(&d, n);
        cs = cli_true_ms(&remote, n);
        /* The same through a master connection (the first call makes it). */
        snprintf(cp, sizeof(cp), "%s/cm-%%C", s.dir);
        snprintf(opts, sizeof(opts),
                 "-o ControlMaster=auto -o ControlPath=%s -o ControlPersist=30 -F %s/ssh_config",
                 cp, s.dir);
        setenv("SBX_SSH_OPTS", opts, 1);
        (void)exec_true_ms(s.url, 1, true);
        mp = exec_true_ms(s.url, n, true);
        cm = cli_true_ms(&remote, n);
        {
                char port[16], cpo[720];
                snprintf(port, sizeof(port), "%d", s.port);
                snprintf(cpo, sizeof(cpo), "ControlPath=%s", cp);
                run_quiet((const char *[]){"ssh", "-F", "/dev/null", "-o", cpo, "-O", "exit", "-p",
                                           port, "root@127.0.0.1", NULL});
        }
        use_client_config(&s, "ssh_config");
        fprintf(stderr,
                "it_ssh: ms per `exec true` (mean of %d): libsbx local: kept %.1f, per call "
                "%.1f; libsbx over ssh: kept %.1f, per call %.1f, per call with ControlMaster "
                "%.1f; sbx CLI: local %.1f, over ssh %.1f, over ssh with ControlMaster %.1f\n",
                n, lk, lp, sk, sp, mp, cl, cs, cm);
        ck_assert_double_lt(sk, sp);
        sshd_stop(&s);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("ssh");
        struct {
                const char *name;
                const TTest *t;
        } tests[] = {
                {"core_calls_over_ssh", core_calls_over_ssh},
                {"cli_over_ssh", cli_over_ssh},
                {"client_going_away_cancels", client_going_away_cancels},
                {"dial_stdio_alone", dial_stdio_alone},
                {"failures_are_clear", failures_are_clear},
                {"python_over_ssh", python_over_ssh},
                {"mcp_over_ssh", mcp_over_ssh},
                {"latency_of_the_ssh_path", latency_of_the_ssh_path},
        };

        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
                TCase *tc = tcase_create(tests[i].name);
                tcase_add_unchecked_fixture(tc, it_fixture_setup, ssh_fixture_teardown);
                tcase_set_timeout(tc, 120);
                tcase_add_test(tc, tests[i].t);
                suite_add_tcase(s, tc);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
