/* it_isolation.c: integration tests of what a command inside a sandbox can and cannot
 * reach (issue "Sandboxes"): secrets, writes outside the allowed paths, the private and
 * size-limited /tmp, the network, other processes, the seccomp filter and capabilities,
 * ordinary developer tools, two sandboxes side by side, detached processes at Terminate
 * and at the deadline, leaks after 50 sandboxes, start failures, and the exit codes of
 * `sbx exec`.
 *
 * Every scenario runs real commands in real sandboxes of a real sbxd started on a
 * temporary socket and state directory (itutil.h), asserts an outcome and a bound, and
 * stops its daemon expecting exit status 0. What a test plants on the host (a
 * directory under /var/tmp, secrets under /root/.ssh and /home) is made and removed by
 * unchecked fixtures, so it goes away even when the test fails. Other test programs may
 * run daemons on the same machine at the same time: processes are found by unique
 * command lines (with this process's pid in them) or as descendants of our daemon,
 * never by a global count. The helper programs of tests/helpers/ must be built first
 * (`make tests`). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

/* Timeout of an ordinary command; generous for a loaded 2-core machine. */
#define CMD_MS 60000u

/* ---- helpers ------------------------------------------------------------------------ */

static void stop_ok(struct it_daemon *d) {
        int st = it_daemon_stop(d);

        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbxd stopped with status 0x%x", st);
}

/* What a command that exited left: exit code, output, wall time. */
struct run {
        int rc;
        char *out;
        char *err;
        double duration;
};

static void run_free(struct run *r) {
        free(r->out);
        free(r->err);
        memset(r, 0, sizeof(*r));
}

static struct run from_result(struct sbx_result *res, const char *what) {
        struct run r;

        ck_assert_msg(res->outcome == SBX_OUTCOME_EXITED, "`%s`: outcome %s (start error: %s)",
                      what, sbx_outcome_name(res->outcome),
                      res->start_error ? res->start_error : "-");
        r.rc = res->exit_code;
        r.out = strdup(res->stdout_data ? (const char *)res->stdout_data : "");
        r.err = strdup(res->stderr_data ? (const char *)res->stderr_data : "");
        r.duration = res->duration;
        ck_assert(r.out && r.err);
        sbx_result_free(res);
        return r;
}

/* Runs shell in sandbox id; the command must exit (not time out or be signalled). */
static struct run sh(sbx_client *c, const char *id, const char *shell) {
        return from_result(it_sh(c, id, CMD_MS, shell), shell);
}

/* Runs argv (NULL-terminated) in sandbox id; the command must exit. */
static struct run run_argv(sbx_client *c, const char *id, const char *const *argv) {
        return from_result(it_exec(c, id, CMD_MS, argv), argv[0]);
}

/* Exit code of shell in id (output dropped). */
static int sh_rc(sbx_client *c, const char *id, const char *shell) {
        struct run r = sh(c, id, shell);
        int rc = r.rc;

        run_free(&r);
        return rc;
}

static char *create_with(sbx_client *c, const struct sbx_create_opts *o) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code = sbx_create(c, o, &sb);
        char *id;

        ck_assert_msg(code == SBX_OK, "create: %s: %s", sbx_code_name(code), sbx_error_message(c));
        ck_assert_int_eq(sb->state, SBX_STATE_READY);
        id = strdup(sb->id);
        sbx_sandbox_free(sb);
        return id;
}

/* A sandbox with the writable path w and the NULL-ended lists of hidden (deny_read) and
 * read-only (deny_write) paths; returns its id. */
static char *create_confined(sbx_client *c, char *w, char **deny_read, char **deny_write) {
        struct sbx_create_opts o;
        char *wv[1] = {w};

        sbx_create_opts_init(&o);
        o.policy.writable_paths.v = wv;
        o.policy.writable_paths.n = 1;
        o.policy.denied_read_paths.v = deny_read;
        while (deny_read[o.policy.denied_read_paths.n])
                o.policy.denied_read_paths.n++;
        o.policy.denied_write_paths.v = deny_write;
        while (deny_write[o.policy.denied_write_paths.n])
                o.policy.denied_write_paths.n++;
        return create_with(c, &o);
}

static void terminate_ok(sbx_client *c, const char *id) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code = sbx_terminate(c, id, &sb);

        ck_assert_msg(code == SBX_OK, "terminate %s: %s: %s", id, sbx_code_name(code),
                      sbx_error_message(c));
        ck_assert_msg(sb->state == SBX_STATE_TERMINATED, "terminate %s: state %s", id,
                      sbx_state_name(sb->state));
        sbx_sandbox_free(sb);
}

/* Puts a helper program into sandbox id's workspace (through the file API: the build
 * tree may be anywhere, even under the host's /tmp, which a sandbox cannot see) and
 * returns its path inside. */
static char *helper(sbx_client *c, const char *id, const char *name) {
        char rel[512], inside[256];
        uint8_t *data;
        size_t len = 0, cap = 1 << 20;
        ssize_t n;
        enum sbx_code code;
        int fd;

        snprintf(rel, sizeof(rel), "%s/tests/helpers/%s", it_build_dir(), name);
        fd = open(rel, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "helper %s is missing: build it with `make tests` or `make %s`", rel,
                      rel);
        data = malloc(cap);
        while ((n = read(fd, data + len, cap - len)) > 0) {
                len += (size_t)n;
                if (len == cap)
                        data = realloc(data, cap *= 2);
        }
        close(fd);
        snprintf(inside, sizeof(inside), "/workspace/%s", name);
        code = sbx_write(c, id, inside, data, len, 0755, 0);
        free(data);
        ck_assert_msg(code == SBX_OK, "write %s: %s", inside, sbx_error_message(c));
        return strdup(inside);
}

static void put_file(const char *path, const char *data, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        size_t len = strlen(data);

        if (fd < 0 || write(fd, data, len) != (ssize_t)len)
                abort(); /* Called from unchecked fixtures too, where ck_assert cannot be. */
        close(fd);
        chmod(path, mode);
}

/* The file's whole content, or NULL when it cannot be read. */
static char *get_file(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0, cap = 4096;
        char *buf = malloc(cap + 1);
        ssize_t n;

        if (fd < 0 || !buf) {
                if (fd >= 0)
                        close(fd);
                free(buf);
                return NULL;
        }
        while ((n = read(fd, buf + len, cap - len)) > 0)
                if ((len += (size_t)n) == cap && !(buf = realloc(buf, (cap *= 2) + 1)))
                        abort();
        close(fd);
        if (n < 0) {
                free(buf);
                return NULL;
        }
        buf[len] = '\0';
        return buf;
}

static void mkdir_mode(const char *path, mode_t mode) {
        ck_assert_msg(mkdir(path, mode) == 0 || errno == EEXIST, "mkdir %s: %s", path,
                      strerror(errno));
        ck_assert_int_eq(chmod(path, mode), 0);
}

/* Waits up to ms for it_count_procs(needle) to equal want; returns the last count. */
static int wait_procs(const char *needle, int want, double ms) {
        double t0 = it_now_ms();
        int n;

        while ((n = it_count_procs(needle)) != want && it_now_ms() - t0 < ms)
                usleep(20000);
        return n;
}

/* Parent pid and start time (clock ticks) of pid from /proc/PID/stat; -1 when gone. */
static int proc_stat(pid_t pid, pid_t *ret_ppid, unsigned long long *ret_start) {
        char p[64], buf[1024], *s;
        int fd, i;
        ssize_t n;

        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        s = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
        if (!s)
                return -1;
        s += 2; /* field 3, state */
        for (i = 3; i < 22 && s; i++) {
                if (i == 4 && ret_ppid)
                        *ret_ppid = (pid_t)strtol(s, NULL, 10);
                s = strchr(s, ' ');
                if (s)
                        s++;
        }
        if (!s)
                return -1;
        if (ret_start)
                *ret_start = strtoull(s, NULL, 10);
        return 0;
}

static int cmdline_has(pid_t pid, const char *needle) {
        char p[64], buf[4096];
        int fd;
        ssize_t n, i;

        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        for (i = 0; i < n; i++)
                if (buf[i] == '\0')
                        buf[i] = ' ';
        buf[n] = '\0';
        return strstr(buf, needle) != NULL;
}

struct proc_id {
        pid_t pid;
        unsigned long long start;
};

/* The "sbx-init" processes descending from pid root: stored in out (at most max),
 * returns how many there are. */
static int inits_below(pid_t root, struct proc_id *out, int max) {
        DIR *dir = opendir("/proc");
        struct dirent *de;
        int count = 0;

        while (dir && (de = readdir(dir))) {
                pid_t pid = (pid_t)strtol(de->d_name, NULL, 10), cur;
                unsigned long long start = 0;
                int depth;

                if (pid <= 0 || !cmdline_has(pid, "sbx-init"))
                        continue;
                if (proc_stat(pid, NULL, &start) < 0)
                        continue;
                for (cur = pid, depth = 0; cur > 1 && depth < 64; depth++) {
                        pid_t pp = 0;
                        if (proc_stat(cur, &pp, NULL) < 0)
                                break;
                        if (pp == root) {
                                if (out && count < max) {
                                        out[count].pid = pid;
                                        out[count].start = start;
                                }
                                count++;
                                break;
                        }
                        cur = pp;
                }
        }
        if (dir)
                closedir(dir);
        return count;
}

/* 1 while the process p (same pid and start time) still exists. */
static int proc_alive(const struct proc_id *p) {
        unsigned long long start = 0;

        return proc_stat(p->pid, NULL, &start) == 0 && start == p->start;
}

static int mountinfo_lines(void) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        int n = 0, ch;

        ck_assert(f != NULL);
        while ((ch = fgetc(f)) != EOF)
                if (ch == '\n')
                        n++;
        fclose(f);
        return n;
}

/* Entries of a directory other than . and ..; -1 when it cannot be opened. */
static int dir_entries(const char *path, int dirs_only) {
        DIR *dir = opendir(path);
        struct dirent *de;
        int n = 0;

        if (!dir)
                return -1;
        while ((de = readdir(dir))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (dirs_only && de->d_type != DT_DIR)
                        continue;
                n++;
        }
        closedir(dir);
        return n;
}

/* A TCP listener on 127.0.0.1 (non-blocking); its port in *ret_port. */
static int listen_local(int *ret_port) {
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(fd, 16), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

/* 1 when a connection arrives on the listener within ms. */
static int accepted_within(int lfd, int ms) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int fd;

        if (poll(&p, 1, ms) != 1)
                return 0;
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return 0;
        close(fd);
        return 1;
}

/* A python3 program that connects to 127.0.0.1:port and prints "connected" or
 * "failed ERRNO". */
static char *connect_script(int port) {
        return xasprintf("import socket\n"
                         "try:\n"
                         "    s = socket.create_connection(('127.0.0.1', %d), timeout=3)\n"
                         "    print('connected')\n"
                         "except OSError as e:\n"
                         "    print('failed', e.errno)\n",
                         port);
}

/* ---- fixtures: what the tests plant on the host ------------------------------------ */

static char host_dir[256]; /* /var/tmp/sbxd-iso.XXXXXX, visible read-only in sandboxes */

static void host_setup(void) {
        snprintf(host_dir, sizeof(host_dir), "/var/tmp/sbxd-iso.XXXXXX");
        if (!mkdtemp(host_dir))
                abort();
        chmod(host_dir, 0755);
}

static void host_teardown(void) {
        char cmd[400];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", host_dir);
        if (host_dir[0] && system(cmd) != 0)
                fprintf(stderr, "it_isolation: cannot remove %s\n", host_dir);
}

#define ROOT_SECRET "/root/.ssh/id_rsa_sbxtest"
static char secret[96];    /* the planted secret text */
static char home_dir[128]; /* /home/sbxt-PID, a user's home on the host ("" if no /home) */
static int made_root_ssh;  /* /root/.ssh was created by us */

static void secrets_setup(void) {
        char p[300];
        struct stat st;

        snprintf(secret, sizeof(secret), "sbxtest-secret-%d-%ld-K3y", (int)getpid(),
                 (long)time(NULL));
        made_root_ssh = mkdir("/root/.ssh", 0700) == 0;
        put_file(ROOT_SECRET, secret, 0600);
        home_dir[0] = '\0';
        if (stat("/home", &st) == 0 && S_ISDIR(st.st_mode)) {
                snprintf(home_dir, sizeof(home_dir), "/home/sbxt-%d", (int)getpid());
                if (mkdir(home_dir, 0755) < 0 && errno != EEXIST)
                        abort();
                chmod(home_dir, 0755);
                snprintf(p, sizeof(p), "%s/.ssh", home_dir);
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        abort();
                chmod(p, 0755);
                /* World-readable on purpose: only the policy may keep it from a command. */
                snprintf(p, sizeof(p), "%s/.ssh/id_rsa", home_dir);
                put_file(p, secret, 0644);
        }
}

static void secrets_teardown(void) {
        char cmd[300];

        unlink(ROOT_SECRET);
        if (made_root_ssh)
                rmdir("/root/.ssh");
        if (home_dir[0]) {
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home_dir);
                if (system(cmd) != 0)
                        fprintf(stderr, "it_isolation: cannot remove %s\n", home_dir);
        }
}

/* ---- secrets ------------------------------------------------------------------------- */

START_TEST(test_secrets_unreadable) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_read_result *rr = NULL;
        char head[17], *home_like, *key, *token, *other, *a, *b, *ctl, *cmd;
        char *deny[3];
        struct run r;
        double t0 = it_now_ms();
        ssize_t n;
        int fd;
        sbx_client *c;

        /* The host's first bytes of /etc/shadow: no command may ever print them. */
        fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "cannot read the host's /etc/shadow: %s", strerror(errno));
        n = read(fd, head, sizeof(head) - 1);
        close(fd);
        ck_assert_int_gt(n, 4);
        head[n] = '\0';

        /* A HOME-like directory with a world-readable key, and a loose token file. */
        home_like = xasprintf("%s/home", host_dir);
        mkdir_mode(home_like, 0755);
        cmd = xasprintf("%s/.ssh", home_like);
        mkdir_mode(cmd, 0755);
        free(cmd);
        key = xasprintf("%s/.ssh/id_rsa", home_like);
        put_file(key, secret, 0644);
        token = xasprintf("%s/token.txt", host_dir);
        put_file(token, secret, 0644);
        other = xasprintf("%s/other", host_dir);
        mkdir_mode(other, 0755);
        cmd = xasprintf("%s/key", other);
        put_file(cmd, secret, 0644);
        free(cmd);

        it_daemon_start(&d, NULL);
        c = it_connect(&d);

        /* A: the default policy (protect_defaults). */
        a = it_create(c, "sec-a");
        r = sh(c, a, "cat /etc/shadow");
        ck_assert_msg(strstr(r.out, head) == NULL, "/etc/shadow leaked: %s", r.out);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        r = sh(c, a, "cat " ROOT_SECRET "; ls -A /root");
        ck_assert_msg(strstr(r.out, secret) == NULL, "%s leaked", ROOT_SECRET);
        ck_assert_str_eq(r.out, "");
        /* ls succeeded on an empty /root: hidden by the policy, not merely unreadable. */
        ck_assert_msg(r.rc == 0, "/root is not an empty directory: %s", r.err);
        run_free(&r);
        ck_assert_msg(home_dir[0], "no /home on this host to plant a user's key in");
        cmd = xasprintf("cat %s/.ssh/id_rsa; ls -A %s/.ssh", home_dir, home_dir);
        r = sh(c, a, cmd);
        ck_assert_msg(strstr(r.out, secret) == NULL, "%s/.ssh/id_rsa leaked", home_dir);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        free(cmd);
        cmd = xasprintf("stat -c %%d:%%i /root %s/.ssh | uniq | wc -l", home_dir);
        r = sh(c, a, cmd);
        ck_assert_str_eq(r.out, "1\n"); /* the same empty filesystem */
        run_free(&r);
        free(cmd);
        /* The file API sees what a command sees. */
        if (sbx_read(c, a, "/etc/shadow", 0, 0, &rr) == SBX_OK) {
                ck_assert_msg(rr->len == 0 || !memmem(rr->data, rr->len, head, strlen(head)),
                              "ReadFile /etc/shadow leaked the host's bytes");
                sbx_read_result_free(rr);
                rr = NULL;
        }
        cmd = xasprintf("%s/.ssh/id_rsa", home_dir);
        if (sbx_read(c, a, cmd, 0, 0, &rr) == SBX_OK) {
                ck_assert_msg(!memmem(rr->data, rr->len, secret, strlen(secret)),
                              "ReadFile %s leaked the secret", cmd);
                sbx_read_result_free(rr);
                rr = NULL;
        }
        free(cmd);

        /* B: the HOME-like directory and the token denied explicitly. */
        sbx_create_opts_init(&o);
        o.id = "sec-b";
        deny[0] = home_like;
        deny[1] = token;
        deny[2] = other;
        o.policy.denied_read_paths.v = deny;
        o.policy.denied_read_paths.n = 3;
        b = create_with(c, &o);
        cmd = xasprintf("cat %s %s; grep -rs -- '%s' %s", key, token, secret, host_dir);
        r = sh(c, b, cmd);
        ck_assert_msg(strstr(r.out, secret) == NULL, "a denied_read_path leaked: %s", r.out);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        free(cmd);
        /* The hidden directories show one empty filesystem (one for all of them, not one
         * each: each costs the host memory), read-only: nothing can be put in either. */
        cmd = xasprintf("find %s %s -mindepth 1 | wc -l; stat -c %%d:%%i %s %s | uniq | wc -l; "
                        "touch %s/x || mkdir %s/d || echo refused",
                        home_like, other, home_like, other, other, home_like);
        r = sh(c, b, cmd);
        ck_assert_str_eq(r.out, "0\n1\nrefused\n");
        ck_assert_msg(strstr(r.err, "Read-only"), "%s", r.err);
        run_free(&r);
        free(cmd);

        /* Control: without any protection the same files are readable, so the checks
         * above can fail. */
        sbx_create_opts_init(&o);
        o.id = "sec-control";
        o.policy.protect_defaults = 0;
        ctl = create_with(c, &o);
        cmd = xasprintf("cat %s", key);
        r = sh(c, ctl, cmd);
        ck_assert_int_eq(r.rc, 0);
        ck_assert_str_eq(r.out, secret);
        run_free(&r);
        free(cmd);

        terminate_ok(c, a);
        terminate_ok(c, b);
        terminate_ok(c, ctl);
        sbx_close(c);
        stop_ok(&d);
        ck_assert_msg(it_now_ms() - t0 < 30000, "took %.0f ms", it_now_ms() - t0);
        free(a);
        free(b);
        free(ctl);
        free(home_like);
        free(key);
        free(token);
        free(other);
}
END_TEST

/* ---- paths the host changes later ----------------------------------------------------- */

/* Makes and removes a directory and a file as fast as it can until told to stop. */
struct flipper {
        const char *dir, *file, *ro;
        volatile int stop;
        long flips;
};

static void *flip_paths(void *arg) {
        struct flipper *f = arg;
        while (!f->stop) {
                int fd;
                (void)mkdir(f->dir, 0755);
                (void)mkdir(f->ro, 0755);
                fd = open(f->file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                if (fd >= 0)
                        close(fd);
                (void)rmdir(f->dir);
                (void)rmdir(f->ro);
                (void)unlink(f->file);
                f->flips++;
        }
        return NULL;
}

/* A hidden or read-only path the host removes while a sandbox is made (a user deleting
 * their ~/.ssh while someone else creates) is as if it had never been there: the create
 * succeeds (it failed INTERNAL when the path went between init's look and its mount). */
START_TEST(test_paths_removed_while_created) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct flipper f = {0};
        pthread_t th;
        char *deny_read[2], *deny_write[1];
        const char *flags[] = {"--warm", "0", NULL};
        sbx_client *c;
        int i, failed = 0;

        deny_read[0] = xasprintf("%s/flip-dir", host_dir);
        deny_read[1] = xasprintf("%s/flip-file", host_dir);
        deny_write[0] = xasprintf("%s/flip-ro", host_dir);
        f.dir = deny_read[0];
        f.file = deny_read[1];
        f.ro = deny_write[0];
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        ck_assert_int_eq(pthread_create(&th, NULL, flip_paths, &f), 0);
        for (i = 0; i < 60; i++) {
                struct sbx_sandbox *sb = NULL;
                enum sbx_code code;

                sbx_create_opts_init(&o);
                o.policy.denied_read_paths.v = deny_read;
                o.policy.denied_read_paths.n = 2;
                o.policy.denied_write_paths.v = deny_write;
                o.policy.denied_write_paths.n = 1;
                code = sbx_create(c, &o, &sb);
                if (code != SBX_OK) {
                        fprintf(stderr, "it_isolation: create %d: %s: %s\n", i, sbx_code_name(code),
                                sbx_error_message(c));
                        failed++;
                        continue;
                }
                terminate_ok(c, sb->id);
                sbx_sandbox_free(sb);
        }
        f.stop = 1;
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        fprintf(stderr, "it_isolation: 60 creates beside %ld flips of the host's paths\n", f.flips);
        ck_assert_int_eq(failed, 0);
        sbx_close(c);
        stop_ok(&d);
        for (i = 0; i < 2; i++)
                free(deny_read[i]);
        free(deny_write[0]);
}
END_TEST

/* Runs shell in id every 20 ms until its stdout contains none of needle (returns 1) or 5
 * s have passed (returns 0). */
static int eventually_without(sbx_client *c, const char *id, const char *shell,
                              const char *needle) {
        for (int i = 0; i < 250; i++) {
                struct run r = sh(c, id, shell);
                int clean = strstr(r.out, needle) == NULL;
                run_free(&r);
                if (clean)
                        return 1;
                usleep(20000);
        }
        return 0;
}

/* 1 when the mount table of pid shows a mount at path. */
static int has_mount(pid_t pid, const char *path) {
        char mi[64], line[4096], needle[700];
        FILE *f;
        int yes = 0;

        snprintf(mi, sizeof(mi), "/proc/%d/mountinfo", (int)pid);
        snprintf(needle, sizeof(needle), " %s ", path);
        if (!(f = fopen(mi, "r")))
                return 0;
        while (!yes && fgets(line, sizeof(line), f))
                yes = strstr(line, needle) != NULL;
        fclose(f);
        return yes;
}

/* ---- holding a sandbox's PID 1 at work (ptrace: we are root) ---- */

/* The field of /proc/PID/status (e.g. "PPid:"), as text, in out; 0 when absent. */
static int status_field(pid_t pid, const char *field, char *out, size_t len) {
        char path[64], line[256];
        size_t n = strlen(field);
        FILE *f;
        int found = 0;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (!(f = fopen(path, "r")))
                return 0;
        while (!found && fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0) {
                        snprintf(out, len, "%s", line + n);
                        found = 1;
                }
        fclose(f);
        return found;
}

/* 1 when pid is PID 1 of a new PID namespace, forked by a child of dpid (stage 0). */
static int is_init_of(pid_t pid, pid_t dpid) {
        char v[128], *last;

        if (!status_field(pid, "NSpid:", v, sizeof(v)) || !(last = strrchr(v, '\t')) ||
            atoi(last + 1) != 1 || !status_field(pid, "PPid:", v, sizeof(v)))
                return 0;
        return status_field((pid_t)atoi(v), "PPid:", v, sizeof(v)) && (pid_t)atoi(v) == dpid;
}

/* Traces the daemon dpid's forks (not its threads), and theirs: call before the request
 * that makes a sandbox, then catch_init from this same thread. 0 or -errno. */
static int trace_forks(pid_t dpid) {
        long opts = PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACESYSGOOD;

        return ptrace(PTRACE_SEIZE, dpid, NULL, (void *)opts) < 0 ? -errno : 0;
}

/* After trace_forks(dpid): waits until stage 0 forks PID 1 of a sandbox and returns its
 * pid, traced and stopped before it did anything (its options: PTRACE_O_TRACESYSGOOD
 * alone), once every other process traced has been let go; 0 when the daemon ended.
 * A process of ours that is not traced must not end meanwhile (waitpid(-1)). */
static pid_t catch_init(pid_t dpid) {
        enum { MAX_TRACED = 64 };
        pid_t traced[MAX_TRACED], init = 0;
        int n = 1, i, st;

        traced[0] = dpid;
        while (n > (init ? 1 : 0)) {
                pid_t pid = waitpid(-1, &st, __WALL);
                int event = st >> 16, sig;

                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid < 0)
                        return 0;
                for (i = 0; i < n && traced[i] != pid; i++)
                        ;
                if (!WIFSTOPPED(st)) {
                        if (pid == dpid)
                                return 0;
                        if (i < n)
                                traced[i] = traced[--n];
                        continue;
                }
                if (i == n) {
                        ck_assert_int_lt(n, MAX_TRACED);
                        traced[n++] = pid; /* born traced: stopped once, first */
                }
                /* PID 1's first stop: it stays stopped. */
                if (pid == init)
                        continue;
                /* A signal for the process (not an event) is delivered as it was. */
                sig = event ? 0 : WSTOPSIG(st);
                if (!init && is_init_of(pid, dpid)) {
                        init = pid;
                        ck_assert_int_eq(ptrace(PTRACE_SETOPTIONS, pid, NULL,
                                                (void *)(long)PTRACE_O_TRACESYSGOOD),
                                         0);
                        for (int k = 0; k < n; k++)
                                if (traced[k] != init)
                                        (void)ptrace(PTRACE_INTERRUPT, traced[k], NULL, NULL);
                        continue;
                }
                if (init) {
                        (void)ptrace(PTRACE_DETACH, pid, NULL, (void *)(long)sig);
                        traced[i] = traced[--n];
                } else {
                        (void)ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
                }
        }
        return init;
}

/* Lets pid (caught by catch_init) run one system call at a time until first is mounted
 * in its view: returns 1 with pid stopped there, still traced (PTRACE_DETACH lets it go
 * on; our exit does too), or 0 when it ended first. Wherever the machine is slow, pid
 * waits for us, not we for it. */
static int run_until_mounted(pid_t pid, const char *first) {
        int st, sig = 0;

        while (!has_mount(pid, first)) {
                if (ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(long)sig) < 0 ||
                    waitpid(pid, &st, __WALL) != pid || !WIFSTOPPED(st))
                        return 0;
                sig = WSTOPSIG(st) == (SIGTRAP | 0x80) || st >> 16 ? 0 : WSTOPSIG(st);
        }
        return 1;
}

struct bg_create {
        struct it_daemon *d;
        struct sbx_create_opts *o;
        char *id;
};

static void *create_in_bg(void *arg) {
        struct bg_create *b = arg;
        sbx_client *c = it_connect(b->d);
        struct sbx_sandbox *sb = NULL;

        if (sbx_create(c, b->o, &sb) == SBX_OK) {
                b->id = strdup(sb->id);
                sbx_sandbox_free(sb);
        }
        sbx_close(c);
        return NULL;
}

/* A hidden directory the host makes while a sandbox is being made, after init looked for
 * it and before the sandbox is ready, is covered once it is ready: the guard drops what
 * it sees of a sandbox not ready yet, so it looks at every path when one becomes ready.
 * The directory is made while init, traced from its birth, is held between hiding the
 * first and the last of the others listed after it. */
START_TEST(test_hidden_made_during_create) {
        enum { N = 3 };
        const char *flags[] = {"--warm", "0", "--spares", "0", NULL};
        struct it_daemon d;
        struct sbx_create_opts o;
        struct bg_create b = {.d = &d, .o = &o};
        char *deny[N + 1], *late, *key, *cmd;
        pthread_t th;
        pid_t init;
        int i;
        sbx_client *c;

        /* The guard enters a sandbox through its init's pidfd, which valgrind does not
         * emulate (`make valgrind`). */
        if (getenv("SBX_VALGRIND")) {
                fprintf(stderr, "%s: skipped under valgrind\n", __func__);
                return;
        }
        late = xasprintf("%s/m", host_dir);
        mkdir_mode(late, 0755);
        free(late);
        for (i = 0; i < N; i++) {
                deny[i + 1] = xasprintf("%s/m/d%03d", host_dir, i);
                mkdir_mode(deny[i + 1], 0755);
        }
        deny[0] = late = xasprintf("%s/a-late", host_dir);
        key = xasprintf("%s/key", late);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.denied_read_paths.v = deny;
        o.policy.denied_read_paths.n = N + 1;
        ck_assert_int_eq(trace_forks(d.pid), 0);
        ck_assert_int_eq(pthread_create(&th, NULL, create_in_bg, &b), 0);
        init = catch_init(d.pid);
        ck_assert_msg(init > 0, "sbxd ended before it started a sandbox");
        /* Once init hides the first of the others, it has looked for late. */
        ck_assert_msg(run_until_mounted(init, deny[1]), "init ended before it hid %s", deny[1]);
        ck_assert_msg(!has_mount(init, deny[N]), "init hid %s with %s", deny[N], deny[1]);
        mkdir_mode(late, 0755);
        put_file(key, secret, 0644);
        ck_assert_int_eq(ptrace(PTRACE_DETACH, init, NULL, NULL), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_msg(b.id, "create failed");
        cmd = xasprintf("cat %s 2>/dev/null", key);
        ck_assert_msg(eventually_without(c, b.id, cmd, secret),
                      "%s lay bare in the sandbox after 5 s", key);
        free(cmd);
        terminate_ok(c, b.id);
        free(b.id);
        free(key);
        free(late);
        sbx_close(c);
        stop_ok(&d);
        for (i = 1; i <= N; i++)
                free(deny[i]);
}
END_TEST

/* A hidden directory the host makes while the daemon is down is covered when the next
 * daemon re-adopts the sandbox (no event tells of it). */
START_TEST(test_hidden_made_while_daemon_down) {
        struct it_daemon d;
        struct sbx_create_opts o;
        char *deny[1], *key, *id, *gnupg, *log, *cmd;
        sbx_client *c;

        /* Adoption needs pidfds, which valgrind does not emulate (`make valgrind`). */
        if (getenv("SBX_VALGRIND"))
                return;
        deny[0] = xasprintf("%s/made-later", host_dir);
        key = xasprintf("%s/key", deny[0]);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.denied_read_paths.v = deny;
        o.policy.denied_read_paths.n = 1;
        id = create_with(c, &o);
        sbx_close(c);
        /* A credential the sandbox cannot read (its init left it): not "covered again"
         * after the restart, as every such path of every sandbox would be. */
        gnupg = xasprintf("%s/.gnupg", home_dir);
        mkdir_mode(gnupg, 0700);
        it_daemon_kill(&d);
        mkdir_mode(deny[0], 0755);
        put_file(key, secret, 0644);
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        cmd = xasprintf("cat %s 2>/dev/null", key);
        ck_assert_msg(eventually_without(c, id, cmd, secret),
                      "%s lay bare after the daemon came back", key);
        free(cmd);
        log = get_file(d.log);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(strstr(log, "/made-later changed on the host: covered again"), "%s", log);
        ck_assert_msg(!strstr(log, "/.gnupg changed on the host"), "%s", log);
        free(log);
        rmdir(gnupg);
        free(gnupg);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
        free(key);
        free(deny[0]);
}
END_TEST

/* A hidden file the host replaces (a rename over it: the mount over the old file goes
 * with it) or creates after the sandbox, and a read-only file it replaces, are covered
 * again by the daemon's guard within moments. */
START_TEST(test_host_changes_covered_again) {
        struct it_daemon d;
        char *w, *hidden_file, *later, *settings, *tmp, *id, *cmd;
        struct run r;
        sbx_client *c;

        /* The guard enters a sandbox through its init's pidfd, which valgrind does not
         * emulate (`make valgrind`). */
        if (getenv("SBX_VALGRIND")) {
                fprintf(stderr, "%s: skipped under valgrind\n", __func__);
                return;
        }
        w = xasprintf("%s/gw", host_dir);
        hidden_file = xasprintf("%s/secret", w);
        later = xasprintf("%s/later", w);
        settings = xasprintf("%s/settings", w);
        tmp = xasprintf("%s/.tmp", w);
        mkdir_mode(w, 0777);
        put_file(hidden_file, "old-secret\n", 0666);
        put_file(settings, "host-settings\n", 0666);

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        {
                char *drv[] = {hidden_file, later, NULL}, *dwv[] = {settings, NULL};
                id = create_confined(c, w, drv, dwv);
        }
        cmd = xasprintf("cat %s", hidden_file);
        r = sh(c, id, cmd);
        ck_assert_msg(strstr(r.out, "old-secret") == NULL, "hidden file shown: %s", r.out);
        run_free(&r);

        /* The host writes a new secret the way editors and credential tools do. */
        put_file(tmp, "new-secret\n", 0666);
        ck_assert_int_eq(rename(tmp, hidden_file), 0);
        ck_assert_msg(eventually_without(c, id, cmd, "new-secret"),
                      "the replaced secret stayed readable");
        free(cmd);
        /* A hidden path the host creates later. */
        put_file(later, "later-secret\n", 0666);
        cmd = xasprintf("cat %s", later);
        ck_assert_msg(eventually_without(c, id, cmd, "later-secret"),
                      "the secret created later stayed readable");
        free(cmd);
        /* A read-only file the host replaces stays read-only. */
        put_file(tmp, "host-settings-2\n", 0666);
        ck_assert_int_eq(rename(tmp, settings), 0);
        cmd = xasprintf("echo EVIL > %s 2>/dev/null && echo written", settings);
        ck_assert_msg(eventually_without(c, id, cmd, "written"),
                      "the replaced read-only file became writable");
        free(cmd);

        /* A process that opened the file before it was covered again is killed: its
         * descriptor would outlive the mount. The helper is run by hand here (as the
         * guard runs it, in the sandbox's mount namespace), so that the window is as
         * long as the test needs. */
        {
                char *bare = xasprintf("%s/bare", w);
                pid_t holder = -1;
                int st;

                put_file(bare, "bare\n", 0666);
                cmd = xasprintf("setsid sh -c 'exec 3>>%s; exec sleep 779.4321' </dev/null "
                                ">/dev/null 2>&1 &",
                                bare);
                ck_assert_int_eq(sh_rc(c, id, cmd), 0);
                free(cmd);
                for (int i = 0; i < 100 && holder < 0; i++) {
                        holder = it_find_proc("sleep ", "sleep 779.4321");
                        if (holder < 0)
                                usleep(20000);
                }
                ck_assert_int_gt(holder, 0);
                st = it_reapply(holder, "read-only", bare);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reapply status 0x%x", st);
                ck_assert_int_eq(wait_procs("sleep 779.4321", 0, 5000), 0);
                cmd = xasprintf("echo EVIL >> %s", bare);
                ck_assert_int_ne(sh_rc(c, id, cmd), 0);
                free(cmd);
                cmd = get_file(bare);
                ck_assert_str_eq(cmd, "bare\n");
                free(cmd);
                free(bare);
        }

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
        free(w);
        free(hidden_file);
        free(later);
        free(settings);
        free(tmp);
}
END_TEST

/* ---- writes -------------------------------------------------------------------------- */

START_TEST(test_writes_confined) {
        struct it_daemon d;
        char *w, *ro, *git, *hooks, *hidden, *nl, *id, *cmd, *content, *conf, *settings;
        char *sub, *tok;
        char *mark;
        struct run r;
        double t0 = it_now_ms();
        size_t i;
        sbx_client *c;
        int pid = (int)getpid();

        w = xasprintf("%s/w", host_dir);
        ro = xasprintf("%s/ro", w);
        git = xasprintf("%s/.git", w);
        hooks = xasprintf("%s/.git/hooks", w);
        hidden = xasprintf("%s/hidden.txt", w);
        conf = xasprintf("%s/conf", w);
        settings = xasprintf("%s/conf/settings", w);
        sub = xasprintf("%s/sub", w);
        tok = xasprintf("%s/sub/tok", w);
        nl = xasprintf("%s/notlisted", host_dir);
        /* World-writable, so that only the sandbox's mounts can refuse a write. */
        mkdir_mode(w, 0777);
        mkdir_mode(ro, 0777);
        mkdir_mode(git, 0777);
        mkdir_mode(hooks, 0777);
        mkdir_mode(nl, 0777);
        mkdir_mode(conf, 0777);
        put_file(settings, "host-settings\n", 0666);
        mkdir_mode(sub, 0777);
        put_file(tok, "sub-token\n", 0666);
        content = xasprintf("hidden-content-%d", pid);
        put_file(hidden, content, 0666);

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        {
                char *drv[] = {hidden, tok, NULL}, *dwv[] = {ro, settings, NULL};
                id = create_confined(c, w, drv, dwv);
        }

        /* Refused: the read-only root, a host directory not listed, a denied_write_path
         * inside the writable one, and .git/hooks (protect_defaults). */
        {
                char *refused[] = {
                        xasprintf("echo x > /etc/sbxt-w-%d", pid),
                        xasprintf("touch /usr/sbxt-w-%d", pid),
                        xasprintf("touch /sbxt-w-%d", pid),
                        xasprintf("mkdir /var/sbxt-w-%d", pid),
                        xasprintf("touch %s/f", nl),
                        xasprintf("touch %s/f", ro),
                        xasprintf("touch %s/post-commit", hooks),
                };
                for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                        r = sh(c, id, refused[i]);
                        ck_assert_msg(r.rc != 0, "`%s` succeeded", refused[i]);
                        /* Where the directory is world-writable only a mount can refuse. */
                        if (i >= 4)
                                ck_assert_msg(strstr(r.err, "Read-only file system"), "`%s`: %s",
                                              refused[i], r.err);
                        run_free(&r);
                        free(refused[i]);
                }
        }

        /* A protected path's parent cannot be moved aside and replaced (a .git of the
         * sandbox's own, with hooks for the host's git to run; a conf/ with its own
         * settings): it is a mount point. */
        {
                char *moves[] = {
                        xasprintf("mv %s %s.old && mkdir -p %s/hooks && "
                                  "echo 'id > /tmp/pwned' > %s/hooks/pre-commit",
                                  git, git, git, git),
                        xasprintf("mv %s %s.old && mkdir %s && echo EVIL > %s", conf, conf, conf,
                                  settings),
                        xasprintf("rm -rf %s", git),
                        xasprintf("echo EVIL > %s.new && mv %s.new %s", settings, settings,
                                  settings),
                        /* A hidden path's parent too: moved aside, the host's next
                         * version of the file would land bare in a new one. */
                        xasprintf("mv %s %s.old", sub, sub),
                };
                for (i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
                        r = sh(c, id, moves[i]);
                        ck_assert_msg(r.rc != 0, "`%s` succeeded", moves[i]);
                        ck_assert_msg(strstr(r.err, "busy") || strstr(r.err, "Read-only"),
                                      "`%s`: %s", moves[i], r.err);
                        run_free(&r);
                        free(moves[i]);
                }
        }

        /* Allowed: /workspace, /tmp, the writable path. */
        r = sh(c, id,
               "echo ws > /workspace/f && cat /workspace/f && echo tmp > /tmp/f && cat /tmp/f");
        ck_assert_int_eq(r.rc, 0);
        ck_assert_str_eq(r.out, "ws\ntmp\n");
        run_free(&r);
        cmd = xasprintf("echo data-%d > %s/out.txt", pid, w);
        ck_assert_int_eq(sh_rc(c, id, cmd), 0);
        free(cmd);

        /* The denied_read_path inside the writable path shows nothing, and a write to it
         * does not reach the host's file. */
        cmd = xasprintf("cat %s; echo overwritten > %s; cat %s", hidden, hidden, hidden);
        r = sh(c, id, cmd);
        ck_assert_msg(strstr(r.out, "hidden-content") == NULL, "denied_read_path leaked: %s",
                      r.out);
        run_free(&r);
        free(cmd);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);

        /* On the host: the writable path got its file, nothing else was written. */
        cmd = xasprintf("%s/out.txt", w);
        mark = get_file(cmd);
        ck_assert_msg(mark != NULL, "%s did not appear on the host", cmd);
        {
                char *want = xasprintf("data-%d\n", pid);
                ck_assert_str_eq(mark, want);
                free(want);
        }
        free(mark);
        free(cmd);
        {
                char *absent[] = {
                        xasprintf("/etc/sbxt-w-%d", pid),
                        xasprintf("/usr/sbxt-w-%d", pid),
                        xasprintf("/sbxt-w-%d", pid),
                        xasprintf("/var/sbxt-w-%d", pid),
                        xasprintf("%s/f", nl),
                        xasprintf("%s/f", ro),
                        xasprintf("%s/post-commit", hooks),
                        xasprintf("%s/pre-commit", hooks),
                        xasprintf("%s.old", git),
                        xasprintf("%s.old", conf),
                };
                for (i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
                        int exists = access(absent[i], F_OK) == 0;
                        if (exists && strncmp(absent[i], host_dir, strlen(host_dir)) != 0)
                                unlink(absent[i]); /* Never leave it on the host. */
                        ck_assert_msg(!exists, "%s was written on the host", absent[i]);
                        free(absent[i]);
                }
        }
        mark = get_file(hidden);
        ck_assert(mark != NULL);
        ck_assert_str_eq(mark, content);
        free(mark);
        mark = get_file(settings);
        ck_assert(mark != NULL);
        ck_assert_str_eq(mark, "host-settings\n");
        free(mark);
        ck_assert_msg(it_now_ms() - t0 < 30000, "took %.0f ms", it_now_ms() - t0);
        free(id);
        free(w);
        free(ro);
        free(git);
        free(conf);
        free(settings);
        free(sub);
        free(tok);
        free(hooks);
        free(hidden);
        free(nl);
        free(content);
}
END_TEST

/* ---- /tmp ---------------------------------------------------------------------------- */

START_TEST(test_tmp_private_and_limited) {
        struct it_daemon d;
        struct sbx_create_opts o;
        char *id, *cmd, *inside, *outside;
        struct run r;
        int leaked, pid = (int)getpid();
        unsigned long long blocks = 0, bsize = 0, big = 0;
        sbx_client *c;

        inside = xasprintf("/tmp/sbxt-in-%d", pid);
        outside = xasprintf("/tmp/sbxt-host-%d", pid);
        unlink(inside);
        put_file(outside, "host-tmp", 0644);

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.limits.set = SBX_LIMIT_TMP;
        o.policy.limits.tmp_bytes = 1024 * 1024;
        id = create_with(c, &o);

        cmd = xasprintf("echo inside > %s && cat %s; cat %s; ls -A /tmp", inside, inside, outside);
        r = sh(c, id, cmd);
        free(cmd);
        leaked = access(inside, F_OK) == 0;
        unlink(inside);
        unlink(outside);
        ck_assert_msg(!leaked, "%s written in the sandbox appeared in the host's /tmp", inside);
        ck_assert_msg(strstr(r.out, "host-tmp") == NULL && strstr(r.out, "sbxt-host") == NULL,
                      "the host's /tmp is visible: %s", r.out);
        cmd = xasprintf("inside\nsbxt-in-%d\n", pid);
        ck_assert_str_eq(r.out, cmd);
        free(cmd);
        run_free(&r);

        /* 1 MiB of /tmp: the filesystem says so, and writing 4 MiB fails with ENOSPC. */
        r = sh(c, id, "stat -f -c '%b %S' /tmp");
        ck_assert_int_eq(r.rc, 0);
        ck_assert_int_eq(sscanf(r.out, "%llu %llu", &blocks, &bsize), 2);
        ck_assert_msg(blocks * bsize <= 1024 * 1024 + 4096, "/tmp holds %llu bytes",
                      blocks * bsize);
        run_free(&r);
        r = sh(c, id, "dd if=/dev/zero of=/tmp/big bs=64k count=64; echo rc=$?; wc -c < /tmp/big");
        ck_assert_msg(strstr(r.err, "No space left on device"), "dd: %s", r.err);
        ck_assert_msg(strstr(r.out, "rc=0") == NULL, "writing 4 MiB into /tmp succeeded");
        ck_assert_int_eq(sscanf(strstr(r.out, "\n") ? strstr(r.out, "\n") + 1 : "", "%llu", &big),
                         1);
        ck_assert_msg(big <= 1024 * 1024, "/tmp/big has %llu bytes", big);
        ck_assert_msg(r.duration < 10.0, "dd took %.1f s", r.duration);
        run_free(&r);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
        free(inside);
        free(outside);
}
END_TEST

/* ---- network ------------------------------------------------------------------------- */

START_TEST(test_network_none_blocks_host) {
        struct it_daemon d;
        char *id, *script;
        struct run r;
        int port, lfd;
        sbx_client *c;

        lfd = listen_local(&port);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL); /* network none is the default */
        script = connect_script(port);
        {
                const char *argv[] = {"python3", "-c", script, NULL};
                r = run_argv(c, id, argv);
        }
        ck_assert_msg(strncmp(r.out, "failed", 6) == 0, "host listener reached: %s%s", r.out,
                      r.err);
        ck_assert_msg(r.duration < 10.0, "connect took %.1f s", r.duration);
        run_free(&r);
        ck_assert_msg(!accepted_within(lfd, 300), "a connection reached the host listener");

        /* Only loopback exists in the sandbox's network namespace. */
        r = sh(c, id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
        ck_assert_str_eq(r.out, "lo\n");
        run_free(&r);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        close(lfd);
        free(script);
        free(id);
}
END_TEST

START_TEST(test_network_none_loopback_up) {
        static const char script[] = "import socket\n"
                                     "s = socket.socket()\n"
                                     "s.bind(('127.0.0.1', 0))\n"
                                     "s.listen(1)\n"
                                     "c = socket.create_connection(s.getsockname(), timeout=3)\n"
                                     "a, _ = s.accept()\n"
                                     "a.sendall(b'pong')\n"
                                     "print(c.recv(4).decode())\n";
        const char *argv[] = {"python3", "-c", script, NULL};
        struct it_daemon d;
        struct run r;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = run_argv(c, id, argv);
        ck_assert_msg(r.rc == 0, "loopback server: %s", r.err);
        ck_assert_str_eq(r.out, "pong\n");
        ck_assert_msg(r.duration < 20.0, "took %.1f s", r.duration);
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

START_TEST(test_network_full_reaches_host) {
        struct it_daemon d;
        struct sbx_create_opts o;
        char *id, *script;
        struct run r;
        int port, lfd;
        sbx_client *c;

        lfd = listen_local(&port);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.network = SBX_NETWORK_FULL;
        id = create_with(c, &o);
        script = connect_script(port);
        {
                const char *argv[] = {"python3", "-c", script, NULL};
                r = run_argv(c, id, argv);
        }
        ck_assert_msg(strcmp(r.out, "connected\n") == 0, "network full: %s%s", r.out, r.err);
        ck_assert_msg(r.duration < 20.0, "took %.1f s", r.duration);
        run_free(&r);
        ck_assert_msg(accepted_within(lfd, 5000), "the host listener saw no connection");
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        close(lfd);
        free(script);
        free(id);
}
END_TEST

/* ---- processes ----------------------------------------------------------------------- */

START_TEST(test_processes_invisible) {
        const char *ps[] = {"ps", "ax", "-o", "pid=,args=", NULL};
        struct it_daemon d;
        struct run r;
        char *id, *cmd, *line, *save = NULL, host_sleep[64];
        int lines = 0, saw_init = 0;
        pid_t hp;
        sbx_client *c;

        /* A process of the host's, with a command line nobody else has. */
        snprintf(host_sleep, sizeof(host_sleep), "3456.%d", (int)getpid());
        hp = fork();
        ck_assert_int_ge(hp, 0);
        if (hp == 0) {
                execlp("sleep", "sleep", host_sleep, (char *)NULL);
                _exit(127);
        }

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);

        r = run_argv(c, id, ps);
        ck_assert_int_eq(r.rc, 0);
        for (line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *end;
                long pid = strtol(line, &end, 10);
                while (*end == ' ')
                        end++;
                lines++;
                if (pid == 1) {
                        ck_assert_msg(strncmp(end, "sbx-init", 8) == 0, "PID 1 is `%s`", end);
                        saw_init = 1;
                        continue;
                }
                ck_assert_msg(strncmp(end, "ps ax", 5) == 0, "unexpected process %ld `%s`", pid,
                              end);
        }
        ck_assert_msg(saw_init, "no PID 1 in ps");
        ck_assert_int_le(lines, 3);
        run_free(&r);

        r = sh(c, id, "ls /proc | grep -c '^[0-9]'");
        ck_assert_int_le(atoi(r.out), 6);
        run_free(&r);
        r = sh(c, id, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; ps ax -o args=");
        ck_assert_msg(strstr(r.out, host_sleep) == NULL, "a host process is visible: %s", r.out);
        ck_assert_msg(strstr(r.out, "sbxd") == NULL, "the daemon is visible: %s", r.out);
        run_free(&r);

        /* Host pids: not there, cannot be signalled. */
        cmd = xasprintf("kill -0 %d", (int)getpid());
        ck_assert_int_ne(sh_rc(c, id, cmd), 0);
        free(cmd);
        cmd = xasprintf("kill -0 %d", (int)hp);
        ck_assert_int_ne(sh_rc(c, id, cmd), 0);
        free(cmd);
        cmd = xasprintf("kill -9 %d", (int)d.pid);
        ck_assert_int_ne(sh_rc(c, id, cmd), 0);
        free(cmd);
        ck_assert_int_eq(kill(hp, 0), 0); /* Still alive on the host. */
        ck_assert_int_eq(kill(d.pid, 0), 0);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        kill(hp, SIGKILL);
        waitpid(hp, NULL, 0);
        free(id);
}
END_TEST

/* ---- seccomp and capabilities -------------------------------------------------------- */

START_TEST(test_seccomp_denies) {
        static const char *const want[] = {
                "ptrace=EPERM",
                "keyctl=EPERM",
                "add_key=EPERM",
                "request_key=EPERM",
                "init_module=EPERM",
                "finit_module=EPERM",
                "delete_module=EPERM",
                "mount=EPERM",
                "umount2=EPERM",
                "chroot=EPERM",
                "pivot_root=EPERM",
                "unshare_user=EPERM",
                "unshare_mount=EPERM",
                "setns=EPERM",
                "clone_newuser=EPERM",
                "bpf=EPERM",
                "perf_event_open=EPERM",
                "userfaultfd=EPERM",
                "process_vm_readv=EPERM",
                "kexec_load=EPERM",
                "reboot=EPERM",
                "clock_settime=EPERM",
                "swapon=EPERM",
                "open_by_handle_at=EPERM",
                "socket_alg=EPERM",
                "socket_packet=EPERM",
                "ioctl_tiocsti=EPERM",
                "clone3=ENOSYS",
                "io_uring_setup=ENOSYS",
                "open_tree=ENOSYS",
                "fsopen=ENOSYS",
                "socket_inet=ok",
                "socket_unix=ok",
                "fork=ok",
                "done",
        };
        struct it_daemon d;
        struct run r;
        char *id, *prog, *all;
        size_t i;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        prog = helper(c, id, "sbxt_forbidden");
        {
                const char *argv[] = {prog, NULL};
                r = run_argv(c, id, argv);
        }
        ck_assert_msg(r.rc == 0, "sbxt_forbidden: %s", r.err);
        all = xasprintf("\n%s", r.out);
        for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                char *line = xasprintf("\n%s\n", want[i]);
                ck_assert_msg(strstr(all, line), "expected %s; the helper said:%s", want[i], all);
                free(line);
        }
        free(all);
        run_free(&r);

        /* The same through ordinary tools. */
        ck_assert_int_ne(sh_rc(c, id, "unshare -r true"), 0);
        ck_assert_int_ne(sh_rc(c, id, "unshare -m true"), 0);
        ck_assert_int_ne(sh_rc(c, id, "unshare -n true"), 0);
        r = sh(c, id,
               "if command -v strace >/dev/null; then strace -o /dev/null true; "
               "else python3 -c 'import ctypes,sys; "
               "sys.exit(0 if ctypes.CDLL(None).ptrace(0,0,0,0) == 0 else 1)'; fi");
        ck_assert_msg(r.rc != 0, "ptrace worked: %s", r.err);
        run_free(&r);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(prog);
        free(id);
}
END_TEST

/* Linux 6.17's file_setattr(2) sets what FS_IOC_FSSETXATTR sets (the project id, the
 * project-inherit flag): with the ioctl refused and the syscall allowed, a sandbox on a
 * kernel that has it could move a directory of its workspace out of its project and
 * escape the project-quota disk limit. open_tree_attr(2) (6.15) is open_tree with
 * attributes: of the new mount API, which the filter refuses with ENOSYS. Both fail with
 * ENOSYS (chattr and xfs_io fall back to the ioctl, refused); file_getattr stays
 * allowed. */
START_TEST(test_file_setattr_and_open_tree_attr_refused) {
        struct it_daemon d;
        struct sbx_result *r;
        sbx_client *c;
        char *id;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        /* 467 open_tree_attr, 468 file_getattr, 469 file_setattr: one number on every
         * architecture since 5.1 (alpha and mips aside). */
        r = it_sh(c, id, CMD_MS,
                  "mkdir /workspace/d && python3 -c '\n"
                  "import ctypes, os, struct\n"
                  "libc = ctypes.CDLL(None, use_errno=True)\n"
                  "def call(nr, *a):\n"
                  "    ctypes.set_errno(0)\n"
                  "    r = libc.syscall(nr, *a)\n"
                  "    return \"ok\" if r >= 0 else os.strerror(ctypes.get_errno())\n"
                  "attr = ctypes.create_string_buffer(struct.pack(\"QIIII\", 0, 0, 0, 0, 0), 24)\n"
                  "print(\"file_setattr\", call(469, -100, b\"/workspace/d\", attr, 24, 0))\n"
                  "print(\"file_getattr\", call(468, -100, b\"/workspace/d\", attr, 24, 0))\n"
                  "print(\"open_tree_attr\", call(467, -100, b\"/tmp\", 1, None, 0))\n"
                  "'");
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "%s%s",
                      (char *)r->stdout_data, (char *)r->stderr_data);
        ck_assert_msg(strstr((char *)r->stdout_data, "file_setattr Function not implemented"), "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(strstr((char *)r->stdout_data, "open_tree_attr Function not implemented"),
                      "%s", (char *)r->stdout_data);
        /* Reading the attributes is harmless: only where the kernel has it. */
        ck_assert_msg(strstr((char *)r->stdout_data, "file_getattr ok") ||
                              strstr((char *)r->stdout_data, "file_getattr Function not implemented"),
                      "%s", (char *)r->stdout_data);
        sbx_result_free(r);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

START_TEST(test_no_caps_own_session) {
        static const char session[] =
                "import os\n"
                "f = open('/proc/self/stat').read().rsplit(')', 1)[1].split()\n"
                "print(os.getpid(), os.getsid(0), os.getpgrp(), f[4])\n";
        const char *status[] = {"cat", "/proc/self/status", NULL};
        const char *sess[] = {"python3", "-c", session, NULL};
        static const char *const want[] = {
                "\nCapInh:\t0000000000000000\n",
                "\nCapPrm:\t0000000000000000\n",
                "\nCapEff:\t0000000000000000\n",
                "\nCapBnd:\t0000000000000000\n",
                "\nCapAmb:\t0000000000000000\n",
                "\nNoNewPrivs:\t1\n",
                "\nSeccomp:\t2\n",
        };
        struct it_daemon d;
        struct run r;
        long pid = 0, sid = -1, pgrp = -1, tty = -1;
        size_t i;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);

        r = run_argv(c, id, status);
        ck_assert_int_eq(r.rc, 0);
        for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                ck_assert_msg(strstr(r.out, want[i]), "missing `%s` in:\n%s", want[i] + 1, r.out);
        run_free(&r);

        /* The leader is alone in its session and process group, with no terminal. */
        r = run_argv(c, id, sess);
        ck_assert_int_eq(r.rc, 0);
        ck_assert_int_eq(sscanf(r.out, "%ld %ld %ld %ld", &pid, &sid, &pgrp, &tty), 4);
        ck_assert_int_eq(sid, pid);
        ck_assert_int_eq(pgrp, pid);
        ck_assert_int_eq(tty, 0);
        run_free(&r);

        /* An unprivileged user. */
        r = sh(c, id, "id -u; id -g");
        ck_assert_int_eq(r.rc, 0);
        ck_assert_msg(strcmp(r.out, "0\n0\n") != 0 && strncmp(r.out, "0\n", 2) != 0,
                      "runs as root: %s", r.out);
        run_free(&r);

        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

/* ---- ordinary work ------------------------------------------------------------------- */

static void write_ws(sbx_client *c, const char *id, const char *path, const char *data) {
        enum sbx_code code = sbx_write(c, id, path, data, strlen(data), 0644, 0);

        ck_assert_msg(code == SBX_OK, "write %s: %s: %s", path, sbx_code_name(code),
                      sbx_error_message(c));
}

START_TEST(test_work_gcc) {
        static const char prog[] = "#include <stdio.h>\n"
                                   "int main(void) {\n"
                                   "        int s = 0;\n"
                                   "        for (int i = 1; i <= 10; i++) s += i;\n"
                                   "        printf(\"sum=%d\\n\", s);\n"
                                   "        return 0;\n"
                                   "}\n";
        struct it_daemon d;
        struct run r;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        write_ws(c, id, "/workspace/sum.c", prog);
        r = sh(c, id, "gcc -O2 -Wall -o sum sum.c && ./sum");
        ck_assert_msg(r.rc == 0, "gcc: %s", r.err);
        ck_assert_str_eq(r.out, "sum=55\n");
        ck_assert_msg(r.duration < 45.0, "gcc took %.1f s", r.duration);
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

START_TEST(test_work_python) {
        static const char script[] = "import json, hashlib, sys\n"
                                     "data = {'squares': [i * i for i in range(5)]}\n"
                                     "print(json.dumps(data, sort_keys=True))\n"
                                     "print(hashlib.sha256(b'sbx').hexdigest()[:12])\n"
                                     "print(sys.argv[1])\n";
        struct it_daemon d;
        struct run r;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        write_ws(c, id, "/workspace/script.py", script);
        r = sh(c, id, "python3 script.py arg1");
        ck_assert_msg(r.rc == 0, "python3: %s", r.err);
        ck_assert_str_eq(r.out, "{\"squares\": [0, 1, 4, 9, 16]}\n"
                                "c98a5865f0e7\n"
                                "arg1\n");
        ck_assert_msg(r.duration < 30.0, "python took %.1f s", r.duration);
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

START_TEST(test_work_git) {
        struct it_daemon d;
        struct run r;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        r = sh(c, id,
               "set -e; git init -q repo; cd repo; echo hello > a.txt; git add a.txt; "
               "git -c user.name=Sbx -c user.email=sbx@example.invalid commit -q -m first; "
               "echo more >> a.txt; "
               "git -c user.name=Sbx -c user.email=sbx@example.invalid commit -q -am second; "
               "git log --format=%s; git status --porcelain | wc -l");
        ck_assert_msg(r.rc == 0, "git: %s", r.err);
        ck_assert_str_eq(r.out, "second\nfirst\n0\n");
        ck_assert_msg(r.duration < 30.0, "git took %.1f s", r.duration);
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

START_TEST(test_work_threads) {
        static const char pythreads[] =
                "import threading\n"
                "out = [0] * 8\n"
                "def work(i):\n"
                "    out[i] = sum(range(i * 1000))\n"
                "ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]\n"
                "[t.start() for t in ts]\n"
                "[t.join() for t in ts]\n"
                "print(sum(out))\n";
        const char *py[] = {"python3", "-c", pythreads, NULL};
        struct it_daemon d;
        struct run r;
        char *id, *prog;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        prog = helper(c, id, "sbxt_threads");
        {
                const char *argv[] = {prog, "16", NULL};
                r = run_argv(c, id, argv);
        }
        ck_assert_msg(r.rc == 0, "threads: %s%s", r.out, r.err);
        ck_assert_str_eq(r.out, "threads=16 total=1600000 distinct=16\n");
        ck_assert_msg(r.duration < 30.0, "threads took %.1f s", r.duration);
        run_free(&r);
        r = run_argv(c, id, py);
        ck_assert_msg(r.rc == 0, "python threads: %s", r.err);
        ck_assert_str_eq(r.out, "69986000\n");
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(prog);
        free(id);
}
END_TEST

START_TEST(test_work_make) {
        static const char makefile[] = "out.txt: in.txt\n"
                                       "\tcp in.txt out.txt\n"
                                       "\techo built >> out.txt\n";
        struct it_daemon d;
        struct run r;
        char *id;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        write_ws(c, id, "/workspace/Makefile", makefile);
        r = sh(c, id, "echo src > in.txt && make -s && cat out.txt && make");
        ck_assert_msg(r.rc == 0, "make: %s", r.err);
        ck_assert_msg(strncmp(r.out, "src\nbuilt\n", 10) == 0, "make output: %s", r.out);
        ck_assert_msg(strstr(r.out, "up to date"), "second make rebuilt: %s", r.out);
        ck_assert_msg(r.duration < 30.0, "make took %.1f s", r.duration);
        run_free(&r);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

/* ---- two sandboxes ------------------------------------------------------------------- */

START_TEST(test_two_sandboxes_apart) {
        struct it_daemon d;
        struct run r;
        char *a, *b, *cmd, name[64], dur[32], needle[64];
        double t0 = it_now_ms();
        sbx_client *c;

        snprintf(name, sizeof(name), "sbxt-a-%d.txt", (int)getpid());
        snprintf(dur, sizeof(dur), "2345.%d", (int)getpid());
        snprintf(needle, sizeof(needle), "sleep %s", dur);

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        a = it_create(c, "two-a");
        b = it_create(c, "two-b");

        cmd = xasprintf("echo token-a > /workspace/%s && setsid sleep %s </dev/null >/dev/null "
                        "2>&1 &",
                        name, dur);
        ck_assert_int_eq(sh_rc(c, a, cmd), 0);
        free(cmd);
        ck_assert_int_eq(wait_procs(needle, 1, 10000), 1);

        /* Nowhere in B: not in its workspace, not anywhere in its view, not at A's
         * workspace path on the host (under the daemon's state directory). */
        r = sh(c, b, "ls -A /workspace");
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        cmd = xasprintf("find / \\( -path /proc -o -path /sys \\) -prune -o -name '%s' -print "
                        "2>/dev/null; true",
                        name);
        r = sh(c, b, cmd);
        ck_assert_msg(strcmp(r.out, "") == 0, "A's file is visible in B: %s", r.out);
        run_free(&r);
        /* Control: the same search in A finds it. */
        r = sh(c, a, cmd);
        ck_assert_msg(strstr(r.out, name) != NULL, "find does not see A's file in A: %s", r.out);
        run_free(&r);
        free(cmd);
        cmd = xasprintf("cat %s/sandboxes/%s/workspace/%s || ls %s/sandboxes/%s", d.state, a, name,
                        d.state, a);
        r = sh(c, b, cmd);
        ck_assert_msg(r.rc != 0 && strstr(r.out, "token-a") == NULL,
                      "A's workspace is reachable from B: %s", r.out);
        run_free(&r);
        free(cmd);
        /* The file really is in A. */
        cmd = xasprintf("cat /workspace/%s", name);
        r = sh(c, a, cmd);
        ck_assert_str_eq(r.out, "token-a\n");
        run_free(&r);
        free(cmd);

        /* A's processes are not in B. */
        r = sh(c, b, "ps ax -o args=");
        ck_assert_msg(strstr(r.out, dur) == NULL, "A's sleep is visible in B:\n%s", r.out);
        run_free(&r);
        r = sh(c, a, "ps ax -o args=");
        ck_assert_msg(strstr(r.out, needle) != NULL, "A's sleep not visible in A:\n%s", r.out);
        run_free(&r);

        terminate_ok(c, a);
        terminate_ok(c, b);
        ck_assert_int_eq(wait_procs(needle, 0, 5000), 0);
        sbx_close(c);
        stop_ok(&d);
        ck_assert_msg(it_now_ms() - t0 < 90000, "took %.0f ms", it_now_ms() - t0);
        free(a);
        free(b);
}
END_TEST

/* ---- other sandboxes' disks ----------------------------------------------------------- */

/* Users of a root daemon's socket group (raw uids, as in it_trust.c). */
#define ALICE    3101u
#define BOB      3102u
#define SOCK_GRP 3100u

/* In a child as uid (its gid the same, in SOCK_GRP), on d's socket: creates a sandbox
 * (id, NULL: generated; disk_bytes 0: no disk limit; protect: protect_defaults) and runs
 * shell there. What it printed goes to *ret_out (caller frees), after a first line
 * "id ID\n"; the sandbox stays. Returns the command's exit code, or -1 when the child
 * failed (its reason in *ret_out). */
static int as_user(const struct it_daemon *d, uid_t uid, const char *id, uint64_t disk_bytes,
                   int protect, const char *shell, char **ret_out) {
        const gid_t groups[] = {SOCK_GRP};
        char *out = NULL;
        size_t len = 0, cap = 0;
        int p[2], st;
        pid_t parent = getpid(), pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct sbx_create_opts o;
                struct sbx_exec_opts e;
                struct sbx_sandbox *sb = NULL;
                struct sbx_result *r = NULL;
                sbx_client *c = NULL;
                FILE *f = fdopen(p[1], "w");

                close(p[0]);
                if (!f || setgroups(1, groups) < 0 || setresgid(uid, uid, uid) < 0 ||
                    setresuid(uid, uid, uid) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
                    getppid() != parent)
                        _exit(120);
                sbx_create_opts_init(&o);
                o.id = id;
                o.policy.protect_defaults = protect;
                if (disk_bytes) {
                        o.policy.limits.set |= SBX_LIMIT_DISK;
                        o.policy.limits.disk_bytes = disk_bytes;
                }
                sbx_exec_opts_init(&e);
                e.shell = shell;
                e.timeout_ms = CMD_MS;
                if (sbx_connect(d->sock, "it_isolation", &c) != SBX_OK ||
                    sbx_create(c, &o, &sb) != SBX_OK) {
                        fprintf(f, "FAILED: %s\n", c ? sbx_error_message(c) : "connect");
                        _exit(121);
                }
                fprintf(f, "id %s\n", sb->id);
                if (sbx_exec(c, sb->id, &e, &r) != SBX_OK || r->outcome != SBX_OUTCOME_EXITED) {
                        fprintf(f, "FAILED: exec: %s\n", r ? "did not exit" : sbx_error_message(c));
                        _exit(122);
                }
                fwrite(r->stdout_data, 1, r->stdout_len, f);
                fclose(f);
                _exit(r->exit_code);
        }
        close(p[1]);
        for (;;) {
                ssize_t n;
                if (cap - len < 4096) {
                        cap = cap ? cap * 2 : 65536;
                        out = realloc(out, cap);
                        ck_assert_ptr_nonnull(out);
                }
                n = read(p[0], out + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(p[0]);
        out[len] = '\0';
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        *ret_out = out;
        return WIFEXITED(st) && WEXITSTATUS(st) < 120 ? WEXITSTATUS(st) : -1;
}

/* Terminates, as root, the sandbox whose id is on out's first line (as_user's). */
static void terminate_from(sbx_client *c, const char *out) {
        char id[128];

        ck_assert_msg(sscanf(out, "id %127s", id) == 1, "no sandbox: %s", out);
        terminate_ok(c, id);
}

/* A block device of the host that is no loop device and not empty (its name into name,
 * its size in sectors into size), 0 when there is none. */
static int host_disk(char *name, size_t len, char *size, size_t size_len) {
        DIR *d = opendir("/sys/block");
        struct dirent *de;
        int found = 0;

        while (!found && d && (de = readdir(d))) {
                char path[600];
                FILE *f;
                if (de->d_name[0] == '.' || strncmp(de->d_name, "loop", 4) == 0)
                        continue;
                snprintf(path, sizeof(path), "/sys/block/%s/size", de->d_name);
                f = fopen(path, "r");
                if (!f)
                        continue;
                found = fgets(size, (int)size_len, f) != NULL;
                size[strcspn(size, "\n")] = '\0';
                found = found && strcmp(size, "0") != 0; /* /proc/partitions lists none */
                snprintf(name, len, "%s", de->d_name);
                fclose(f);
        }
        if (d)
                closedir(d);
        return found;
}

/* 1 when a line of the file path holds s. */
static int file_has(const char *path, const char *s) {
        char line[8192];
        FILE *f = fopen(path, "re");
        int found = 0;

        ck_assert_ptr_nonnull(f);
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, s) != NULL;
        fclose(f);
        return found;
}

/* What a command prints when it finds id or state (a path) in what lists block
 * devices, or a loop device listed at all ("shows: ..." lines; with mountinfo, id in
 * its mount table too); then "disk NAME SIZE N" for the host's disk (a block device
 * that is no loop device; "": none): its size and its lines in /proc/partitions as the
 * view shows them; last "checked". */
static char *unseen_script(const char *id, const char *state, const char *disk, int mountinfo) {
        char *mi = mountinfo ? xasprintf("grep -qF '%s' /proc/self/mountinfo && "
                                         "echo 'shows: mountinfo'; ",
                                         id)
                             : strdup("");
        char *s = xasprintf(
                "grep -rlsF -e '%s' -e '%s' /sys/devices/virtual/block /sys/fs /proc/fs "
                "/proc/diskstats /proc/partitions /sys/block/*/ /sys/class/block/*/ "
                "/sys/dev/block/*/ | sed 's/^/shows: /'; "
                "for l in /sys/block /sys/class/block /sys/dev/block /sys/devices/virtual/block "
                "/sys/fs/ext4 /proc/fs/ext4 /proc/fs/jbd2; do "
                "ls -l $l 2>/dev/null | grep -q loop && echo \"shows: a loop device in $l\"; "
                "done; "
                "grep -ls loop /proc/partitions /proc/diskstats | sed 's/^/shows: a loop in /'; "
                "%s[ -z '%s' ] || echo \"disk %s $(cat /sys/block/%s/size) "
                "$(grep -cw '%s' /proc/partitions)\"; echo checked",
                id, state, mi, disk, disk, disk, disk);

        free(mi);
        return s;
}

/* 1 when line (with its newline) is one of text's lines. */
static int has_line(const char *text, const char *line) {
        size_t n = strlen(line);
        const char *p;

        for (p = text; (p = strstr(p, line)); p += n)
                if (p == text || p[-1] == '\n')
                        return 1;
        return 0;
}

/* Asserts that out (a run of unseen_script, in the sandbox what) showed nothing and saw
 * the host's disk (name, of size sectors; none when name is ""). */
static void assert_unseen(const char *out, const char *what, const char *name, const char *size) {
        char want[NAME_MAX + 64];

        ck_assert_msg(has_line(out, "checked\n"), "%s: the check did not finish:\n%s", what, out);
        ck_assert_msg(!strstr(out, "shows: "), "%s sees the disks of others:\n%s", what, out);
        snprintf(want, sizeof(want), "disk %s %s 1\n", name, size);
        ck_assert_msg(!name[0] || has_line(out, want), "%s does not see the host's disk (%s):\n%s",
                      what, want, out);
}

/* A root daemon shared by two users: from BOB's sandboxes (default policy, and
 * protect_defaults off) nothing that lists block devices in /sys or /proc names
 * ALICE's sandbox, whose workspace is a disk image on a loop device, nor the daemon's
 * state directory, nor lists a loop device at all (whose backing file, size, I/O
 * counters and filesystem's writes they would show); their mount table does not name
 * ALICE's sandbox either. The host's own disks are still there. ALICE's own sandbox
 * sees no loop device either, and still its disk's size (df). */
START_TEST(test_other_disks_unseen) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        char state[PATH_MAX], id[64], disk[NAME_MAX + 1] = "", size[32] = "", *out = NULL, *script;
        struct it_daemon d;
        sbx_client *c;
        int protect;

        it_daemon_start(&d, flags);
        ck_assert_ptr_nonnull(realpath(d.state, state));
        (void)host_disk(disk, sizeof(disk), size, sizeof(size));
        snprintf(id, sizeof(id), "alice-disk-%d", (int)getpid());
        script = unseen_script(id, state, disk, 1);
        ck_assert_int_eq(as_user(&d, ALICE, id, 8u << 20, 1,
                                 "head -c 1M /dev/urandom > /workspace/f && sync && "
                                 "df -k /workspace | tail -1",
                                 &out),
                         0);
        c = it_connect(&d);
        if (it_loops_below(state, NULL, 0) == 0) {
                fprintf(stderr, "it_isolation: no disk image here (rootless, no loop devices "
                                "or no mke2fs): other_disks_unseen checks nothing\n");
                terminate_ok(c, id);
                goto out;
        }
        /* Its own: the size of its disk, and no loop device either. */
        ck_assert_msg(strstr(out, "/workspace"), "df in ALICE's sandbox: %s", out);
        free(out);
        ck_assert_int_eq(as_user(&d, ALICE, NULL, 0, 1, script, &out), 0);
        assert_unseen(out, "another sandbox of ALICE's", disk, size);
        terminate_from(c, out);
        for (protect = 1; protect >= 0; protect--) {
                free(out);
                ck_assert_int_eq(as_user(&d, BOB, NULL, 0, protect, script, &out), 0);
                assert_unseen(out, protect ? "BOB's sandbox" : "BOB's sandbox (protect off)", disk,
                              size);
                terminate_from(c, out);
        }
        terminate_ok(c, id);
out:
        free(out);
        free(script);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* The same from a sandbox of a rootless daemon on that host, with the default policy
 * and protect_defaults off: /sys and /proc list no loop device, nothing there names
 * the root daemon's sandbox or state directory, nor does its mount table, a copy of
 * the host's (the root daemon mounts the image attached nowhere and its sandbox's init
 * attaches it in its own namespace; before, it was mounted on
 * STATE/sandboxes/ID/workspace in the host's mount table, which a rootless sandbox's
 * view copies). Nor does the host's own mount table. */
START_TEST(test_other_disks_unseen_rootless) {
        char state[PATH_MAX], disk[NAME_MAX + 1] = "", size[32] = "", *script, *id;
        struct it_daemon d, r;
        struct sbx_create_opts o;
        sbx_client *c, *rc;
        int protect;

        it_daemon_start(&d, NULL);
        ck_assert_ptr_nonnull(realpath(d.state, state));
        (void)host_disk(disk, sizeof(disk), size, sizeof(size));
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.policy.limits.set |= SBX_LIMIT_DISK;
        o.policy.limits.disk_bytes = 8u << 20;
        id = create_with(c, &o);
        if (it_loops_below(state, NULL, 0) == 0) {
                fprintf(stderr, "it_isolation: no disk image here: other_disks_unseen_rootless "
                                "checks nothing\n");
                goto out;
        }
        ck_assert_msg(!file_has("/proc/self/mountinfo", id),
                      "the host's mount table names sandbox %s", id);
        it_daemon_start_as(&r, 65534, 65534, NULL);
        rc = it_connect(&r);
        script = unseen_script(id, state, disk, 1);
        for (protect = 1; protect >= 0; protect--) {
                struct run run;
                char *rid;
                sbx_create_opts_init(&o);
                o.policy.protect_defaults = protect;
                rid = create_with(rc, &o);
                run = sh(rc, rid, script);
                assert_unseen(run.out,
                              protect ? "a rootless sandbox"
                                      : "a rootless sandbox "
                                        "(protect off)",
                              disk, size);
                run_free(&run);
                terminate_ok(rc, rid);
                free(rid);
        }
        free(script);
        sbx_close(rc);
        stop_ok(&r);
out:
        terminate_ok(c, id);
        free(id);
        sbx_close(c);
        stop_ok(&d);
}
END_TEST

/* ---- detached processes -------------------------------------------------------------- */

START_TEST(test_setsid_dies_at_terminate) {
        struct it_daemon d;
        struct run r;
        char *id, *cmd, needle[64];
        double t0;
        sbx_client *c;

        snprintf(needle, sizeof(needle), "sleep 1234.%d", (int)getpid());
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, NULL);
        cmd = xasprintf("setsid %s </dev/null >/dev/null 2>&1 &", needle);
        r = sh(c, id, cmd);
        ck_assert_int_eq(r.rc, 0);
        ck_assert_msg(r.duration < 10.0, "the command waited for its detached child");
        run_free(&r);
        free(cmd);
        ck_assert_int_eq(wait_procs(needle, 1, 10000), 1);
        /* It survives the command, by design... */
        usleep(300000);
        ck_assert_int_eq(it_count_procs(needle), 1);
        /* ...and dies with the sandbox (the bound leaves a loaded machine room). */
        t0 = it_now_ms();
        terminate_ok(c, id);
        ck_assert_int_eq(wait_procs(needle, 0, 20000), 0);
        ck_assert_msg(it_now_ms() - t0 < 20000, "took %.0f ms", it_now_ms() - t0);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

START_TEST(test_setsid_dies_at_deadline) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_exec_opts eo;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *res = NULL;
        char *id, *cmd, needle[64];
        double t_create, waited;
        enum sbx_state st = SBX_STATE_UNSPECIFIED;
        enum sbx_code code;
        unsigned timeout_ms;
        sbx_client *c;

        snprintf(needle, sizeof(needle), "sleep 1235.%d", (int)getpid());
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        cmd = xasprintf("setsid %s </dev/null >/dev/null 2>&1 &", needle);
        sbx_exec_opts_init(&eo);
        eo.timeout_ms = 30000;
        /* A detached process runs, then a command, when the deadline comes: the command
         * ends with sandbox_ended. A machine so slow that the deadline came before they
         * ran tries again with a deadline twice as far. */
        for (timeout_ms = 1500;; timeout_ms *= 2) {
                sbx_create_opts_init(&o);
                o.timeout_ms = timeout_ms;
                t_create = it_now_ms();
                id = create_with(c, &o);
                eo.shell = cmd;
                code = sbx_exec(c, id, &eo, &res);
                if (code == SBX_OK) {
                        ck_assert_int_eq(res->exit_code, 0);
                        sbx_result_free(res);
                        res = NULL;
                        if (wait_procs(needle, 1, timeout_ms) != 1)
                                code = SBX_SANDBOX_ENDED; /* gone with the sandbox, maybe */
                }
                if (code == SBX_OK) {
                        eo.shell = "sleep 30";
                        code = sbx_exec(c, id, &eo, &res);
                }
                waited = it_now_ms() - t_create;
                if (code != SBX_SANDBOX_ENDED || timeout_ms >= 24000)
                        break;
                fprintf(stderr,
                        "setsid_deadline: the deadline came before the commands at %u "
                        "ms; again\n",
                        timeout_ms);
                free(id);
        }
        free(cmd);
        ck_assert_msg(code == SBX_OK, "exec: %s: %s", sbx_code_name(code), sbx_error_message(c));
        ck_assert_msg(res->outcome == SBX_OUTCOME_SANDBOX_ENDED, "outcome %s after %.0f ms",
                      sbx_outcome_name(res->outcome), waited);
        sbx_result_free(res);
        /* At the deadline: not before, nor at the sleep's end (30 s). */
        ck_assert_msg(waited >= timeout_ms - 500 && waited < timeout_ms + 20000,
                      "deadline of %u ms hit after %.0f ms", timeout_ms, waited);

        /* The record says expired (allow a moment for terminating -> expired). */
        while (it_now_ms() - t_create < timeout_ms + 15000.0) {
                ck_assert_int_eq(sbx_get(c, id, &sb), SBX_OK);
                st = sb->state;
                sbx_sandbox_free(sb);
                sb = NULL;
                if (st != SBX_STATE_READY && st != SBX_STATE_TERMINATING)
                        break;
                usleep(50000);
        }
        ck_assert_msg(st == SBX_STATE_EXPIRED, "state %s", sbx_state_name(st));
        ck_assert_int_eq(wait_procs(needle, 0, 20000), 0);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

/* ---- leaks after many sandboxes ------------------------------------------------------ */

#define MANY 50

/* Cgroup base directories (.../sbxd-XXXX) of the daemon, from an init's /proc/PID/cgroup.
 * Stores up to max paths in out; returns how many. */
static int cgroup_bases(pid_t init, char out[][512], int max) {
        char p[64], line[1024];
        FILE *f;
        int n = 0;

        snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)init);
        f = fopen(p, "re");
        while (f && n < max && fgets(line, sizeof(line), f)) {
                char *ctrl = strchr(line, ':'), *path, *base, *end;
                const char *hier;
                char hbuf[128];
                struct stat st;

                if (!ctrl)
                        continue;
                ctrl++;
                path = strchr(ctrl, ':');
                if (!path)
                        continue;
                *path++ = '\0';
                path[strcspn(path, "\n")] = '\0';
                base = strstr(path, "/sbxd-");
                if (!base)
                        continue;
                end = strchr(base + 1, '/');
                if (end)
                        *end = '\0';
                if (ctrl[0] == '\0')
                        hier = stat("/sys/fs/cgroup/unified", &st) == 0 ? "unified" : "";
                else if (strncmp(ctrl, "name=", 5) == 0)
                        hier = ctrl + 5;
                else
                        hier = ctrl;
                snprintf(hbuf, sizeof(hbuf), "%s", hier);
                snprintf(out[n], 512, "/sys/fs/cgroup%s%s%s", hbuf[0] ? "/" : "", hbuf, path);
                n++;
        }
        if (f)
                fclose(f);
        return n;
}

START_TEST(test_many_sandboxes_no_leak) {
        static struct proc_id inits[4 * MANY];
        static char bases[16][512];
        struct it_daemon d;
        char *ids[MANY], sbdir[700];
        int i, n_inits, n_bases, mounts_before, mounts_after, alive;
        /* No warm pool and no spares: every init, group and directory below is one of
         * these. */
        const char *flags[] = {"--warm", "0", "--spares", "0", NULL};
        double t0;
        sbx_client *c;

        mounts_before = mountinfo_lines();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        snprintf(sbdir, sizeof(sbdir), "%s/sandboxes", d.state);

        t0 = it_now_ms();
        for (i = 0; i < MANY; i++)
                ids[i] = it_create(c, NULL);
        n_inits = inits_below(d.pid, inits, 4 * MANY);
        ck_assert_msg(n_inits >= MANY, "%d init processes for %d sandboxes", n_inits, MANY);
        ck_assert_int_le(n_inits, 4 * MANY);
        ck_assert_int_eq(dir_entries(sbdir, 0), MANY);
        /* The cgroups: where the daemon put them, read from one of the inits. */
        n_bases = cgroup_bases(inits[0].pid, bases, 16);
        ck_assert_msg(n_bases > 0, "init %d is in no sbxd-* cgroup", (int)inits[0].pid);
        for (i = 0; i < n_bases; i++)
                ck_assert_msg(dir_entries(bases[i], 1) >= MANY, "%s has %d groups", bases[i],
                              dir_entries(bases[i], 1));

        for (i = 0; i < MANY; i++)
                terminate_ok(c, ids[i]);
        ck_assert_msg(it_now_ms() - t0 < 60000, "%d creates and terminates took %.0f ms", MANY,
                      it_now_ms() - t0);

        /* Nothing left: processes, sandbox cgroups, workspaces, mounts. */
        t0 = it_now_ms();
        do {
                alive = 0;
                for (i = 0; i < n_inits; i++)
                        alive += proc_alive(&inits[i]);
        } while (alive && it_now_ms() - t0 < 5000 && usleep(20000) == 0);
        ck_assert_msg(alive == 0, "%d init processes still alive after terminate", alive);
        ck_assert_int_eq(inits_below(d.pid, NULL, 0), 0);
        /* The groups go one loop turn after each terminate's answer. */
        t0 = it_now_ms();
        for (i = 0; i < n_bases; i++) {
                while (dir_entries(bases[i], 1) > 0 && it_now_ms() - t0 < 5000)
                        usleep(20000);
                ck_assert_msg(dir_entries(bases[i], 1) == 0, "%s still has %d groups", bases[i],
                              dir_entries(bases[i], 1));
        }
        ck_assert_int_eq(dir_entries(sbdir, 0), 0);
        mounts_after = mountinfo_lines();
        ck_assert_int_eq(mounts_after, mounts_before);

        sbx_close(c);
        stop_ok(&d);
        for (i = 0; i < n_bases; i++)
                ck_assert_msg(access(bases[i], F_OK) < 0, "%s remains after the daemon stopped",
                              bases[i]);
        ck_assert_int_eq(mountinfo_lines(), mounts_before);
        for (i = 0; i < MANY; i++)
                free(ids[i]);
}
END_TEST

/* ---- start failures and CLI exit codes ----------------------------------------------- */

/* Runs argv with cwd in id and returns the result (caller frees). */
static struct sbx_result *exec_cwd(sbx_client *c, const char *id, const char *const *argv,
                                   const char *cwd) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;
        size_t n = 0;

        while (argv[n])
                n++;
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = n;
        o.cwd = cwd;
        o.timeout_ms = CMD_MS;
        code = sbx_exec(c, id, &o, &r);
        ck_assert_msg(code == SBX_OK, "exec %s: %s: %s", argv[0], sbx_code_name(code),
                      sbx_error_message(c));
        return r;
}

START_TEST(test_start_failed) {
        const char *missing[] = {"/nonexistent-sbxt/prog", NULL};
        const char *unknown[] = {"sbxt-no-such-program", NULL};
        const char *notexec[] = {"/workspace/notexec.sh", NULL};
        const char *truecmd[] = {"true", NULL};
        struct it_daemon d;
        struct sbx_result *r;
        char *id;
        double t0 = it_now_ms();
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, "sf");
        write_ws(c, id, "/workspace/notexec.sh", "#!/bin/sh\necho should-not-run\n");

        r = exec_cwd(c, id, missing, NULL);
        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED, "missing: %s",
                      sbx_outcome_name(r->outcome));
        ck_assert_int_eq(r->start_errno, ENOENT);
        sbx_result_free(r);
        r = exec_cwd(c, id, unknown, NULL);
        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED, "unknown: %s",
                      sbx_outcome_name(r->outcome));
        ck_assert_int_eq(r->start_errno, ENOENT);
        sbx_result_free(r);
        r = exec_cwd(c, id, notexec, NULL);
        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED, "not executable: %s",
                      sbx_outcome_name(r->outcome));
        ck_assert_int_eq(r->start_errno, EACCES);
        ck_assert_uint_eq(r->stdout_len, 0);
        sbx_result_free(r);
        r = exec_cwd(c, id, truecmd, "/nonexistent-sbxt-dir");
        ck_assert_msg(r->outcome == SBX_OUTCOME_START_FAILED, "bad cwd: %s",
                      sbx_outcome_name(r->outcome));
        ck_assert_int_eq(r->start_errno, ENOENT);
        ck_assert_msg(r->start_error && r->start_error[0], "no start_error text for a bad cwd");
        sbx_result_free(r);

        /* The same through the CLI: 127 not found, 126 cannot execute. */
        {
                const char *a1[] = {"exec", id, "--", "/nonexistent-sbxt/prog", NULL};
                const char *a2[] = {"exec", id, "--", "sbxt-no-such-program", NULL};
                const char *a3[] = {"exec", id, "--", "/workspace/notexec.sh", NULL};
                const char *a4[] = {"exec", "--cwd", "/nonexistent-sbxt-dir", id, "--",
                                    "true", NULL};
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a1), 127);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a2), 127);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a3), 126);
                ck_assert_int_ne(it_sbx(&d, NULL, 0, NULL, NULL, a4), 0);
        }

        /* The sandbox is still fine afterwards. */
        ck_assert_int_eq(sh_rc(c, id, "true"), 0);
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        ck_assert_msg(it_now_ms() - t0 < 30000, "took %.0f ms", it_now_ms() - t0);
        free(id);
}
END_TEST

START_TEST(test_cli_exit_codes) {
        struct it_daemon d;
        char *id, *out = NULL, dur[32], needle[64];
        double t0, took;
        int rc;
        sbx_client *c;

        snprintf(dur, sizeof(dur), "10.%d", (int)getpid());
        snprintf(needle, sizeof(needle), "sleep %s", dur);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        id = it_create(c, "cli");
        {
                const char *a1[] = {"exec", id, "--", "sh", "-c", "echo out; exit 7", NULL};
                const char *a2[] = {"exec", id, "--", "sh", "-c", "kill -TERM $$", NULL};
                const char *a3[] = {"exec", "--timeout", "0.2", id, "--", "sleep", dur, NULL};
                const char *a4[] = {"exec", id, "--", "true", NULL};

                ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, a1), 7);
                ck_assert_str_eq(out, "out\n");
                free(out);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a2), 128 + SIGTERM);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a4), 0);
                t0 = it_now_ms();
                rc = it_sbx(&d, NULL, 0, NULL, NULL, a3);
                took = it_now_ms() - t0;
                ck_assert_int_eq(rc, 124);
                /* At the timeout, not at the sleep's end (10 s): room for a loaded machine
                 * (the CLI starts, execs and reports through the daemon). */
                ck_assert_msg(took < 5000, "a 0.2 s timeout returned after %.0f ms", took);
                /* timed_out is reported once the command has stopped. */
                ck_assert_int_eq(it_count_procs(needle), 0);
        }
        terminate_ok(c, id);
        sbx_close(c);
        stop_ok(&d);
        free(id);
}
END_TEST

/* One TCase per test: the unchecked fixtures run once per TCase, and each test needs
 * its own base directory (itutil numbers daemon directories per test process). */
static void add(Suite *s, const char *name, const TTest *test, int timeout_s, int host,
                int secrets) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        if (host)
                tcase_add_unchecked_fixture(tc, host_setup, host_teardown);
        if (secrets)
                tcase_add_unchecked_fixture(tc, secrets_setup, secrets_teardown);
        tcase_set_timeout(tc, timeout_s);
        tcase_add_test(tc, test);
        suite_add_tcase(s, tc);
}

/* The ready-made policies: read_only writes nowhere on the host, workspace_write(dir)
 * writes exactly there. */
START_TEST(test_ready_made_policies) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        sbx_client *c;
        char dir[700], sh[900], probe[800];
        const char *roots[1];

        it_daemon_start(&d, NULL);
        /* Beside the daemon's directory: that one holds its socket and is hidden. */
        snprintf(dir, sizeof(dir), "%s-ww", d.dir);
        ck_assert_int_eq(mkdir(dir, 0777), 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        roots[0] = dir;
        snprintf(sh, sizeof(sh), "echo hi > %s/f", dir);
        snprintf(probe, sizeof(probe), "%s/f", dir);
        c = it_connect(&d);

        sbx_create_opts_init(&o);
        sbx_policy_read_only(&o.policy, SBX_NETWORK_NONE);
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        r = it_sh(c, sb->id, 10000, sh);
        ck_assert_int_ne(r->exit_code, 0);
        ck_assert_int_eq(access(probe, F_OK), -1);
        sbx_result_free(r);
        sbx_sandbox_free(sb);

        sbx_create_opts_init(&o);
        sbx_policy_workspace_write(&o.policy, roots, 1, SBX_NETWORK_NONE);
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        ck_assert_uint_eq(sb->policy.writable_paths.n, 1);
        r = it_sh(c, sb->id, 10000, sh);
        ck_assert_int_eq(r->exit_code, 0);
        ck_assert_int_eq(access(probe, F_OK), 0);
        sbx_result_free(r);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("isolation");

        add(s, "secrets", test_secrets_unreadable, 90, 1, 1);
        add(s, "writes", test_writes_confined, 90, 1, 0);
        add(s, "host_changes", test_host_changes_covered_again, 90, 1, 0);
        add(s, "removed_while_created", test_paths_removed_while_created, 90, 1, 0);
        add(s, "made_during_create", test_hidden_made_during_create, 90, 1, 1);
        add(s, "made_while_down", test_hidden_made_while_daemon_down, 90, 1, 1);
        add(s, "tmp", test_tmp_private_and_limited, 90, 0, 0);
        add(s, "network_none", test_network_none_blocks_host, 90, 0, 0);
        add(s, "network_lo", test_network_none_loopback_up, 90, 0, 0);
        add(s, "network_full", test_network_full_reaches_host, 90, 0, 0);
        add(s, "processes", test_processes_invisible, 90, 0, 0);
        add(s, "seccomp", test_seccomp_denies, 90, 0, 0);
        add(s, "seccomp_new_syscalls", test_file_setattr_and_open_tree_attr_refused, 90, 0, 0);
        add(s, "caps_session", test_no_caps_own_session, 90, 0, 0);
        add(s, "ready_made", test_ready_made_policies, 90, 0, 0);
        add(s, "work_gcc", test_work_gcc, 120, 0, 0);
        add(s, "work_python", test_work_python, 90, 0, 0);
        add(s, "work_git", test_work_git, 90, 0, 0);
        add(s, "work_threads", test_work_threads, 90, 0, 0);
        add(s, "work_make", test_work_make, 90, 0, 0);
        add(s, "two_sandboxes", test_two_sandboxes_apart, 120, 0, 0);
        add(s, "other_disks_unseen", test_other_disks_unseen, 120, 0, 0);
        add(s, "other_disks_unseen_rootless", test_other_disks_unseen_rootless, 120, 0, 0);
        add(s, "setsid_terminate", test_setsid_dies_at_terminate, 90, 0, 0);
        add(s, "setsid_deadline", test_setsid_dies_at_deadline, 90, 0, 0);
        add(s, "many", test_many_sandboxes_no_leak, 120, 0, 0);
        add(s, "start_failed", test_start_failed, 90, 0, 0);
        add(s, "cli_exit_codes", test_cli_exit_codes, 90, 0, 0);
        return s;
}

SBX_TEST_MAIN(make_suite)
