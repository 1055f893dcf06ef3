/* it_service.c: integration tests of sbxd as an installed system service.
 *
 * What is proved here: the installed units pass `systemd-analyze verify` against the
 * staged tree (and the check does fail on a missing ExecStart= binary and on a misspelt
 * setting); the sysusers and tmpfiles snippets create the group and the directories with
 * the owners and modes the units expect; sbxd started by systemd-socket-activate serves
 * a libsbx client, leaves the activator's socket file in place when it stops, and a new
 * activation on the same socket and state serves again; a NOTIFY_SOCKET bound here
 * (a path and an abstract name) receives READY=1 only once the socket serves and
 * STOPPING=1 at SIGTERM; sbxd serves sandboxes in the process state sbxd.service gives
 * it (group sbxd, no_new_privs, LimitNOFILE) without leaking that group into them;
 * `make install DESTDIR=... PREFIX=/usr` lays out exactly the expected files with the
 * final paths substituted, a client built with `pkg-config sbx` against the staged
 * header and library talks to the staged daemon, so does the staged Python package
 * (which names the final libdir), and `make uninstall` removes every file (and the
 * package's bytecode); `sbx doctor` reports this host's cgroup version and user namespaces as they
 * are, in text and in JSON. The test case "boot", booting a real systemd as PID 1 in
 * systemd-nspawn, runs only under `make check-systemd` (SBX_CHECK_SYSTEMD=1); how its
 * report is judged (a PASS for every check, a SKIP with its reason only for those that
 * need a delegated cgroup controller) is tested under `make check` too.
 *
 * Everything a test creates lives under a directory made by the unchecked fixture and
 * is removed by its teardown, which also ends any process a failed test left behind.
 * Strings a test allocates are registered with keep() and freed by free_kept() at its
 * end (the suite runs under LeakSanitizer in `make asan`). The tests run from the top of
 * the source tree, as `make check` runs them. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx_limits.h"
#include "testutil.h"

/* The gid the emulated service runs with (Group=sbxd): one no sandbox uses. */
#define SERVICE_TEST_GID 4242

/* ---- allocations of one test ------------------------------------------------------------ */

#define MAX_KEPT 512

static char *kept[MAX_KEPT];
static size_t n_kept;

/* Registers p (not NULL) to be freed by free_kept(); returns it. */
static char *keep(char *p) {
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_lt(n_kept, MAX_KEPT);
        kept[n_kept++] = p;
        return p;
}

static void free_kept(void) {
        while (n_kept > 0)
                free(kept[--n_kept]);
}

/* A formatted string, kept. */
__attribute__((format(printf, 1, 2))) static char *fmt(const char *format, ...) {
        char *p = NULL;
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(&p, format, ap);
        va_end(ap);
        ck_assert_int_ge(r, 0);
        return keep(p);
}

/* ---- the test case's directory and what runs in it --------------------------------------- */

static char svc_dir[256];

/* What systemd's tools leave on a host where systemd is not PID 1: `systemd-analyze
 * verify` stamps /run/systemd/systemd-units-load, systemd-nspawn makes empty
 * directories. The teardown removes those that were not there before (on a systemd host
 * they exist already and belong to systemd, so nothing is touched). */
static const char *const host_leftovers[] = {
        "/run/systemd/systemd-units-load",
        "/run/systemd/nspawn/propagate",
        "/run/systemd/nspawn",
        "/run/systemd/nspawn-root",
        NULL,
};
static int leftover_existed[8];

static void svc_setup(void) {
        for (size_t i = 0; host_leftovers[i]; i++)
                leftover_existed[i] = access(host_leftovers[i], F_OK) == 0;
        it_fixture_setup();
        snprintf(svc_dir, sizeof(svc_dir), "/tmp/sbxd-svc.XXXXXX");
        if (!mkdtemp(svc_dir))
                abort();
        chmod(svc_dir, 0755);
}

/* Ends a process a test left behind, if it still runs one of the programs started here. */
static void end_leftover(pid_t pid) {
        static const char *const ours[] = {"sbxd", "systemd-socket-activate", "systemd-nspawn",
                                           NULL};
        char exe[64], link[512];
        ssize_t n;
        int i, mine = 0;

        snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
        n = readlink(exe, link, sizeof(link) - 1);
        if (n <= 0)
                return;
        link[n] = '\0';
        for (i = 0; ours[i]; i++)
                if (strstr(link, ours[i]))
                        mine = 1;
        if (!mine)
                return;
        kill(pid, SIGTERM);
        for (i = 0; i < 400 && kill(pid, 0) == 0; i++)
                usleep(50000);
        if (kill(pid, 0) == 0) {
                fprintf(stderr, "it_service: process %d did not stop; killing it\n", (int)pid);
                kill(pid, SIGKILL);
                usleep(200000);
        }
}

static void svc_teardown(void) {
        char p[300], cmd[400];
        FILE *f;
        int pid;

        snprintf(p, sizeof(p), "%s/pids", svc_dir);
        f = fopen(p, "re");
        while (f && fscanf(f, "%d", &pid) == 1)
                end_leftover((pid_t)pid);
        if (f)
                fclose(f);
        for (size_t i = 0; host_leftovers[i]; i++) {
                struct stat st;
                if (leftover_existed[i] || lstat(host_leftovers[i], &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        rmdir(host_leftovers[i]); /* only when empty */
                else if (S_ISREG(st.st_mode) && st.st_size == 0)
                        unlink(host_leftovers[i]);
        }
        if (getenv("SBX_KEEP_TEST_DIRS")) {
                fprintf(stderr, "it_service: kept %s\n", svc_dir);
        } else {
                it_remove_reservations(svc_dir);
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", svc_dir);
                if (system(cmd) != 0)
                        fprintf(stderr, "it_service: cannot remove %s\n", svc_dir);
        }
        it_fixture_teardown();
}

static void record_pid(pid_t pid) {
        char p[300];
        FILE *f;

        snprintf(p, sizeof(p), "%s/pids", svc_dir);
        f = fopen(p, "ae");
        if (f) {
                fprintf(f, "%d\n", (int)pid);
                fclose(f);
        }
}

/* A fresh directory under the test case's directory, kept. */
static char *new_dir(const char *name) {
        char *p = fmt("%s/%s.XXXXXX", svc_dir, name);
        ck_assert_ptr_nonnull(mkdtemp(p));
        ck_assert_int_eq(chmod(p, 0755), 0);
        return p;
}

static char *path_of(const char *dir, const char *rel) {
        return fmt("%s/%s", dir, rel);
}

/* ---- running programs ------------------------------------------------------------------ */

/* Applies env entries in a child: "K=V" sets, "K" unsets. */
static void apply_env(char *const *env) {
        for (; env && *env; env++) {
                const char *eq = strchr(*env, '=');
                char *name;

                if (!eq) {
                        unsetenv(*env);
                        continue;
                }
                /* A copy of the name: the entries may be string literals. */
                name = strndup(*env, (size_t)(eq - *env));
                if (name)
                        setenv(name, eq + 1, 1);
                free(name);
        }
}

/* What no child inherits: a sub-make must not join `make check`'s jobs. */
static char *no_make_env[] = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", NULL};

/* Runs argv (PATH lookup) with env applied, stdin_data on its stdin (NULL: empty), and
 * collects stdout and stderr (NUL-terminated, kept) into *ret_out and *ret_err when not
 * NULL. Kills it after timeout_s. Returns the exit code, or 256+N when killed by N. */
static int run(char *const *argv, char *const *env, const char *stdin_data, char **ret_out,
               char **ret_err, int timeout_s) {
        int in[2], pipes[2][2], fds[2], st = 0, open_fds = 2;
        char *buf[2];
        size_t len[2] = {0, 0}, cap[2] = {4096, 4096};
        double deadline = it_now_ms() + timeout_s * 1000.0;
        pid_t pid;

        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(pipes[0], O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(pipes[1], O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(pipes[0][1], 1);
                dup2(pipes[1][1], 2);
                apply_env(no_make_env);
                apply_env(env);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                execvp(argv[0], argv);
                fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(in[0]);
        close(pipes[0][1]);
        close(pipes[1][1]);
        /* Small inputs only (they fit the pipe buffer). */
        if (stdin_data)
                (void)!write(in[1], stdin_data, strlen(stdin_data));
        close(in[1]);
        for (int i = 0; i < 2; i++) {
                fds[i] = pipes[i][0];
                buf[i] = malloc(cap[i]);
                ck_assert_ptr_nonnull(buf[i]);
        }
        while (open_fds > 0) {
                struct pollfd pfd[2] = {{.fd = fds[0], .events = POLLIN},
                                        {.fd = fds[1], .events = POLLIN}};
                double left = deadline - it_now_ms();
                int r;

                if (left <= 0) {
                        kill(pid, SIGKILL);
                        break;
                }
                r = poll(pfd, 2, (int)left);
                if (r < 0 && errno == EINTR)
                        continue;
                ck_assert_int_ge(r, 0);
                for (int i = 0; i < 2; i++) {
                        ssize_t n;
                        if (fds[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        if (cap[i] - len[i] < 1024) {
                                cap[i] *= 2;
                                buf[i] = realloc(buf[i], cap[i]);
                                ck_assert_ptr_nonnull(buf[i]);
                        }
                        n = read(fds[i], buf[i] + len[i], cap[i] - len[i] - 1);
                        if (n > 0) {
                                len[i] += (size_t)n;
                        } else if (n == 0 || errno != EINTR) {
                                close(fds[i]);
                                fds[i] = -1;
                                open_fds--;
                        }
                }
        }
        for (int i = 0; i < 2; i++) {
                if (fds[i] >= 0)
                        close(fds[i]);
                buf[i][len[i]] = '\0';
                keep(buf[i]);
        }
        waitpid(pid, &st, 0);
        if (ret_out)
                *ret_out = buf[0];
        if (ret_err)
                *ret_err = buf[1];
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

/* Runs argv and fails the test unless it exits 0, showing its output. */
static void run_ok(char *const *argv, char *const *env, int timeout_s) {
        char *out, *err;
        int rc = run(argv, env, NULL, &out, &err, timeout_s);
        ck_assert_msg(rc == 0, "%s exited %d\nstdout:\n%s\nstderr:\n%s", argv[0], rc, out, err);
}

/* The program's full path (kept) when it is on PATH, else NULL. */
static char *which(const char *prog) {
        const char *path = getenv("PATH");
        char *copy = keep(strdup(path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"));
        char *save = NULL;

        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                char *p = path_of(d, prog);
                if (access(p, X_OK) == 0)
                        return p;
        }
        return NULL;
}

/* Starts argv with stdout and stderr to log; it gets SIGTERM when the test process dies,
 * and the teardown ends it if the test does not. */
static pid_t spawn_logged(char *const *argv, char *const *env, const char *log) {
        pid_t parent = getpid();
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(127);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                if (null >= 0)
                        dup2(null, 0);
                apply_env(no_make_env);
                apply_env(env);
                execvp(argv[0], argv);
                _exit(127);
        }
        record_pid(pid);
        return pid;
}

static void show_file(const char *path) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "echo '--- %s' >&2; cat '%s' >&2", path, path);
        (void)!system(cmd);
}

/* Waits (timeout_ms at most) for pid to exit and returns its wait status. */
static int wait_exit(pid_t pid, int timeout_ms, const char *log) {
        double t0 = it_now_ms();
        int st;

        while (it_now_ms() - t0 < timeout_ms) {
                if (waitpid(pid, &st, WNOHANG) == pid)
                        return st;
                usleep(20000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        if (log)
                show_file(log);
        ck_abort_msg("process %d did not exit within %d ms", (int)pid, timeout_ms);
        return st;
}

/* 0 when something accepts connections at path, else -errno. */
static int try_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd, r, err;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        err = errno;
        close(fd);
        return r == 0 ? 0 : -err;
}

/* Waits (10 s at most) until path accepts connections; fails if pid exits first. */
static void wait_serving(const char *path, pid_t pid, const char *log) {
        double t0 = it_now_ms();
        int st;

        while (try_connect(path) != 0) {
                if (waitpid(pid, &st, WNOHANG) == pid) {
                        show_file(log);
                        ck_abort_msg("the server of %s exited at start-up (status %d); log above",
                                     path, st);
                }
                if (it_now_ms() - t0 > 10000) {
                        show_file(log);
                        ck_abort_msg("nothing served %s within 10 s", path);
                }
                usleep(5000);
        }
}

/* The contents of a (small) file, kept. */
static char *read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf;
        size_t n;

        ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
        buf = keep(calloc(1, 1 << 20));
        n = fread(buf, 1, (1 << 20) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
        ck_assert_int_ge(fputs(text, f), 0);
        ck_assert_int_eq(fclose(f), 0);
}

/* 1 when the file contains the bytes needle. */
static int file_contains(const char *path, const char *needle) {
        FILE *f = fopen(path, "re");
        size_t len = strlen(needle), n, cap = 1 << 20, got = 0;
        char *buf;
        int found = 0;

        ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
        buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        while ((n = fread(buf + got, 1, cap - got, f)) > 0) {
                got += n;
                if (got == cap) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        ck_assert_ptr_nonnull(buf);
                }
        }
        fclose(f);
        found = memmem(buf, got, needle, len) != NULL;
        free(buf);
        return found;
}

static void check_repo_root(void) {
        ck_assert_msg(access("Makefile", R_OK) == 0 && access("systemd/sbxd.service", R_OK) == 0,
                      "run the integration tests from the top of the source tree");
}

/* `make install` (or uninstall) of the current build into stage with PREFIX=/usr.
 * `-o all`: install exactly what is built and never rebuild it here, because other test
 * programs run those binaries and `make asan` builds them with flags this make would not
 * pass; `make check` has built everything before any test runs. */
static void make_target(const char *target, const char *stage) {
        char *argv[] = {"make",        "--no-print-directory",          "-o",
                        "all",         fmt("BUILD=%s", it_build_dir()), fmt("DESTDIR=%s", stage),
                        "PREFIX=/usr", (char *)(uintptr_t)target,       NULL};

        check_repo_root();
        run_ok(argv, NULL, 600);
}

/* ---- the staged tree ------------------------------------------------------------------- */

static const char *const installed[] = {
        "usr/sbin/sbxd",
        "usr/libexec/sbxd/sbx-init",
        "usr/bin/sbx",
        "usr/lib/libsbx.so.0",
        "usr/lib/libsbx.so",
        "usr/lib/libsbx.a",
        "usr/include/sbx.h",
        "usr/lib/pkgconfig/sbx.pc",
        "usr/lib/systemd/system/sbxd.service",
        "usr/lib/systemd/system/sbxd.socket",
        "usr/lib/sysusers.d/sbxd.conf",
        "usr/lib/tmpfiles.d/sbxd.conf",
        "usr/share/man/man1/sbx.1",
        "usr/share/man/man3/libsbx.3",
        "usr/share/man/man8/sbxd.8",
        "usr/lib/python3/dist-packages/sbx/__init__.py",
        "usr/lib/python3/dist-packages/sbx/__main__.py",
        "usr/lib/python3/dist-packages/sbx/_client.py",
        "usr/lib/python3/dist-packages/sbx/_errors.py",
        "usr/lib/python3/dist-packages/sbx/_images.py",
        "usr/lib/python3/dist-packages/sbx/_installed.py",
        "usr/lib/python3/dist-packages/sbx/_lib.py",
        "usr/lib/python3/dist-packages/sbx/_types.py",
        "usr/lib/python3/dist-packages/sbx/py.typed",
        NULL,
};

/* What the staged Python package runs against the staged daemon (argv[1], the socket):
 * it says where it was imported from and where make install told it libsbx went. */
static const char demo_py[] =
        "import sys, sbx, sbx._installed\n"
        "print(sbx.__file__)\n"
        "print(sbx._installed.LIBDIR)\n"
        "with sbx.Client(sys.argv[1]) as c:\n"
        "    with c.create() as sb:\n"
        "        print(sb.run(['echo', 'staged python']).stdout, end='')\n";

/* Files and symlinks (not directories) found under a tree, relative, one per line. */
static char walk_list[16384];
static size_t walk_root_len;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        size_t used = strlen(walk_list);
        if (type == FTW_F || type == FTW_SL || type == FTW_SLN)
                snprintf(walk_list + used, sizeof(walk_list) - used, "%s\n",
                         path + walk_root_len + 1);
        return 0;
}

static const char *list_files(const char *root) {
        walk_list[0] = '\0';
        walk_root_len = strlen(root);
        ck_assert_int_eq(nftw(root, walk_one, 16, FTW_PHYS), 0);
        return walk_list;
}

/* ---- tests: the units and the snippets ------------------------------------------------- */

START_TEST(units_verify_and_snippets_apply) {
        char *stage = new_dir("stage"), *vroot = new_dir("vroot");
        char *units = path_of(vroot, "usr/lib/systemd/system");
        char *analyze = which("systemd-analyze");
        char *sysusers = which("systemd-sysusers"), *tmpfiles = which("systemd-tmpfiles");
        char *root_opt = fmt("--root=%s", vroot);
        char *env[] = {fmt("MANPATH=%s/usr/share/man", stage), "SYSTEMD_LOG_COLOR=0", NULL};
        char *out, *err, *text;
        const char *host_units = access("/usr/lib/systemd/system/sysinit.target", R_OK) == 0
                                         ? "/usr/lib/systemd/system/."
                                         : "/lib/systemd/system/.";
        struct stat st;
        gid_t gid = (gid_t)-1;
        FILE *f;
        char line[256];
        int rc;

        make_target("install", stage);
        text = read_file(path_of(stage, "usr/lib/systemd/system/sbxd.service"));
        ck_assert_msg(
                strstr(text, "\nExecStart=/usr/sbin/sbxd --init /usr/libexec/sbxd/sbx-init "
                             "--daemon-memory-max 4G --daemon-tasks-max 1024\n"),
                "the installed service does not name the installed programs:\n%s", text);
        ck_assert_msg(strstr(text, "\nType=notify\n") && strstr(text, "\nDelegate=yes\n") &&
                              strstr(text, "\nKillMode=mixed\n"),
                      "the installed service lost its essential settings");
        if (!analyze) {
                fprintf(stderr, "it_service: SKIP systemd-analyze verify: systemd-analyze is not "
                                "installed (apt-get install systemd)\n");
                free_kept();
                return;
        }

        /* A root to verify in: the staged install plus the host's own units for the
         * targets ours refer to (sockets.target, sysinit.target, ...). ExecStart= is
         * looked up inside this root and the man pages of Documentation= through
         * MANPATH, so both must really have been installed. */
        {
                char *cp1[] = {"cp", "-a", path_of(stage, "."), vroot, NULL};
                char *mk[] = {"mkdir", "-p", units, NULL};
                char *cp2[] = {"cp", "-an", (char *)(uintptr_t)host_units, units, NULL};
                run_ok(cp1, NULL, 60);
                run_ok(mk, NULL, 60);
                run_ok(cp2, NULL, 60);
        }
        {
                /* Without man-db, Documentation= cannot be checked; everything else is. */
                char *man_opt = which("man") ? "--man=yes" : "--man=no";
                char *argv[] = {analyze,       "verify",       man_opt, root_opt,
                                "sbxd.socket", "sbxd.service", NULL};
                char *sbxd = path_of(vroot, "usr/sbin/sbxd"), *away = path_of(vroot, "sbxd.away");

                rc = run(argv, env, NULL, &out, &err, 120);
                ck_assert_msg(rc == 0 && !*err && !*out,
                              "systemd-analyze verify failed (%d):\n%s%s", rc, out, err);

                /* The check can fail: without the ExecStart= binary ... */
                ck_assert_int_eq(rename(sbxd, away), 0);
                rc = run(argv, env, NULL, &out, &err, 120);
                ck_assert_msg(rc != 0 && strstr(err, "/usr/sbin/sbxd"),
                              "verify passed without sbxd installed (%d): %s", rc, err);
                ck_assert_int_eq(rename(away, sbxd), 0);
        }
        {
                /* ... and with a misspelt setting (only a warning, which counts as failure
                 * above). */
                char *argv[] = {analyze, "verify", root_opt, "sbxd-typo.service", NULL};
                char *typo = path_of(units, "sbxd-typo.service");

                write_file(typo, fmt("%sDelgate=yes\n", read_file(path_of(units, "sbxd.service"))));
                rc = run(argv, env, NULL, &out, &err, 120);
                ck_assert_msg(strstr(err, "Delgate"),
                              "verify said nothing of a misspelt setting (%d): %s", rc, err);
                ck_assert_int_eq(unlink(typo), 0);
        }

        /* The snippets, applied to the verify root as after an install: the group exists,
         * and the directories have the owner, group and modes the units give them (so
         * that neither rewrites the other's). */
        if (!sysusers || !tmpfiles) {
                fprintf(stderr, "it_service: SKIP snippets: systemd-sysusers or "
                                "systemd-tmpfiles is not installed\n");
                free_kept();
                return;
        }
        ck_assert_int_eq(mkdir(path_of(vroot, "etc"), 0755), 0);
        {
                char *argv[] = {sysusers, root_opt, NULL};
                run_ok(argv, NULL, 60);
        }
        f = fopen(path_of(vroot, "etc/group"), "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "sbxd:x:", 7) == 0)
                        gid = (gid_t)strtoul(line + 7, NULL, 10);
        fclose(f);
        ck_assert_msg(gid != (gid_t)-1, "systemd-sysusers did not create group sbxd");
        {
                char *argv[] = {tmpfiles, "--create", root_opt, NULL};
                run_ok(argv, NULL, 60);
        }
        ck_assert_int_eq(stat(path_of(vroot, "run/sbxd"), &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0750 && st.st_uid == 0 && st.st_gid == gid,
                      "/run/sbxd is %o %u:%u, not 0750 root:sbxd", (unsigned)(st.st_mode & 07777),
                      (unsigned)st.st_uid, (unsigned)st.st_gid);
        ck_assert_int_eq(stat(path_of(vroot, "var/lib/sbxd"), &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0700 && st.st_uid == 0 && st.st_gid == gid,
                      "/var/lib/sbxd is %o %u:%u, not 0700 root:sbxd",
                      (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid);
        free_kept();
}
END_TEST

/* ---- tests: socket activation ----------------------------------------------------------- */

/* Hello, create, exec echo WORD, terminate; returns the sandbox's ID (kept). */
static char *serve_one(struct it_daemon *d, const char *word) {
        sbx_client *c = it_connect(d);
        struct sbx_hello *h = NULL;
        struct sbx_result *r;
        const char *argv[] = {"echo", word, NULL};
        char *id;

        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_str_eq(h->daemon_version, SBX_VERSION);
        sbx_hello_free(h);
        id = keep(it_create(c, NULL));
        r = it_exec(c, id, 10000, argv);
        ck_assert_int_eq(r->outcome, SBX_OUTCOME_EXITED);
        ck_assert_int_eq(r->exit_code, 0);
        ck_assert_str_eq((char *)r->stdout_data, fmt("%s\n", word));
        sbx_result_free(r);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        sbx_close(c);
        return id;
}

START_TEST(socket_activation_serves_and_survives_restart) {
        char *activate = which("systemd-socket-activate");
        char *dir = new_dir("act");
        struct it_daemon d;
        struct stat st;
        char *first;
        pid_t pid;
        int status;

        if (!activate) {
                fprintf(stderr, "it_service: SKIP socket activation: systemd-socket-activate "
                                "is not installed (apt-get install systemd)\n");
                free_kept();
                return;
        }
        memset(&d, 0, sizeof(d));
        snprintf(d.dir, sizeof(d.dir), "%s", dir);
        snprintf(d.sock, sizeof(d.sock), "%s/sock", dir);
        snprintf(d.state, sizeof(d.state), "%s/state", dir);
        snprintf(d.log, sizeof(d.log), "%s/sbxd.log", dir);
        {
                char *argv[] = {
                        activate,      "-l",    d.sock,        fmt("%s/sbxd", it_build_dir()),
                        "--state-dir", d.state, "--log-level", "debug",
                        NULL};

                pid = spawn_logged(argv, NULL, d.log);
                /* The activator binds at once and execs sbxd (same pid) at the first
                 * connection; the client waits in the backlog meanwhile. */
                wait_serving(d.sock, pid, d.log);
                first = serve_one(&d, "activated");
                ck_assert_msg(strstr(read_file(d.log), "(socket-activated)"),
                              "sbxd did not adopt the passed socket:\n%s", read_file(d.log));

                kill(pid, SIGTERM);
                status = wait_exit(pid, 30000, d.log);
                ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                              "sbxd ended with status %d at SIGTERM", status);
                /* The socket file is the activator's: it stays; sbxd's own lock goes. */
                ck_assert_int_eq(lstat(d.sock, &st), 0);
                ck_assert(S_ISSOCK(st.st_mode));
                ck_assert_int_eq(access(path_of(dir, "sock.lock"), F_OK), -1);
                ck_assert_int_eq(try_connect(d.sock), -ECONNREFUSED);

                /* A new activation on the same socket file and state directory serves, and
                 * has the records of the first. */
                pid = spawn_logged(argv, NULL, d.log);
                wait_serving(d.sock, pid, d.log);
                serve_one(&d, "again");
                {
                        sbx_client *c = it_connect(&d);
                        struct sbx_sandbox *sb = NULL;
                        ck_assert_int_eq(sbx_get(c, first, &sb), SBX_OK);
                        ck_assert_int_eq(sb->state, SBX_STATE_TERMINATED);
                        sbx_sandbox_free(sb);
                        sbx_close(c);
                }
                kill(pid, SIGTERM);
                status = wait_exit(pid, 30000, d.log);
                ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                ck_assert_int_eq(lstat(d.sock, &st), 0);
        }
        free_kept();
}
END_TEST

/* ---- tests: readiness notification ----------------------------------------------------- */

/* Waits (timeout_ms at most) for a datagram on fd that contains want; what arrives is
 * appended to seen ('|' between datagrams). Returns 1 when found. */
static int await_notify(int fd, const char *want, char *seen, size_t seen_len, int timeout_ms) {
        double t0 = it_now_ms();

        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                char msg[4096];
                double left = timeout_ms - (it_now_ms() - t0);
                ssize_t n;

                if (left <= 0)
                        return 0;
                if (poll(&pfd, 1, (int)left) <= 0)
                        continue;
                n = recv(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
                if (n <= 0)
                        continue;
                msg[n] = '\0';
                strncat(seen, msg, seen_len - strlen(seen) - 1);
                strncat(seen, "|", seen_len - strlen(seen) - 1);
                if (strstr(msg, want))
                        return 1;
        }
}

/* Starts sbxd with NOTIFY_SOCKET=notify_name (fd bound to it) and checks READY=1 and
 * STOPPING=1. */
static void notify_round(const char *dir, int fd, const char *notify_name, int with_sandbox) {
        char *sock = path_of(dir, "sock"), *log = path_of(dir, "sbxd.log");
        char *argv[] = {fmt("%s/sbxd", it_build_dir()), "--socket",    sock,    "--state-dir",
                        path_of(dir, "state"),          "--log-level", "debug", NULL};
        char *env[] = {fmt("NOTIFY_SOCKET=%s", notify_name), NULL};
        char seen[8192] = "";
        struct it_daemon d;
        struct sbx_hello *h = NULL;
        sbx_client *c;
        pid_t pid;
        int status;

        pid = spawn_logged(argv, env, log);
        if (!await_notify(fd, "READY=1", seen, sizeof(seen), 15000)) {
                show_file(log);
                ck_abort_msg("no READY=1 within 15 s (received: %s)", seen);
        }
        ck_assert_msg(!strstr(seen, "STOPPING=1"), "STOPPING before READY: %s", seen);
        /* Ready means serving: the very next connection is answered, no retry. */
        ck_assert_int_eq(try_connect(sock), 0);
        memset(&d, 0, sizeof(d));
        snprintf(d.sock, sizeof(d.sock), "%s", sock);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        sbx_hello_free(h);
        if (with_sandbox)
                keep(it_create(c, "notified"));
        sbx_close(c);

        kill(pid, SIGTERM);
        if (!await_notify(fd, "STOPPING=1", seen, sizeof(seen), 15000)) {
                show_file(log);
                ck_abort_msg("no STOPPING=1 within 15 s of SIGTERM (received: %s)", seen);
        }
        status = wait_exit(pid, 30000, log);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sbxd exited %d", status);
        /* The socket it bound itself is removed at exit. */
        ck_assert_int_eq(access(sock, F_OK), -1);
}

START_TEST(notify_socket_gets_ready_and_stopping) {
        char *dir = new_dir("notify");
        char *path = path_of(dir, "notify.sock");
        char *abstract = fmt("@sbxd-it-notify-%d", (int)getpid());
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        socklen_t salen;
        int fd;

        /* A path socket, as systemd passes it ... */
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        notify_round(new_dir("n1"), fd, path, 1);
        close(fd);

        /* ... and an abstract one ("@name"), which systemd may pass too. */
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path + 1, abstract + 1, strlen(abstract) - 1);
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(abstract));
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, salen), 0);
        notify_round(new_dir("n2"), fd, abstract, 0);
        close(fd);
        free_kept();
}
END_TEST

/* ---- tests: the process state of the service -------------------------------------------- */

/* sbxd.service runs sbxd as uid 0 with Group=sbxd, NoNewPrivileges=yes and
 * LimitNOFILE=65536. This starts sbxd in that state (setgroups, setresgid,
 * PR_SET_NO_NEW_PRIVS and setrlimit, which is what systemd does for those settings) and
 * proves that sandboxes still work, with cgroup limits, and that the group does not leak
 * into them. */
START_TEST(service_process_state) {
        char *dir = new_dir("svc");
        char *sock = path_of(dir, "sock"), *state = path_of(dir, "state");
        char *log = path_of(dir, "sbxd.log"), *bin = fmt("%s/sbxd", it_build_dir());
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *r;
        sbx_client *c;
        pid_t parent = getpid(), pid;
        char *status_text;
        int status;

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char *argv[] = {bin,   "--socket",    sock,    "--state-dir",
                                state, "--log-level", "debug", NULL};
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                struct rlimit rl;

                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(127);
                if (fd >= 0)
                        dup2(fd, 2);
                /* LimitNOFILE=65536, or the hard limit when this process may not raise it
                 * that far (systemd sets the closest possible value the same way). */
                if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > 65536)
                        rl.rlim_max = 65536;
                rl.rlim_cur = rl.rlim_max;
                if (setgroups(0, NULL) < 0 ||
                    setresgid(SERVICE_TEST_GID, SERVICE_TEST_GID, SERVICE_TEST_GID) < 0 ||
                    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        _exit(126);
                execv(bin, argv);
                _exit(127);
        }
        record_pid(pid);
        wait_serving(sock, pid, log);
        status_text = read_file(fmt("/proc/%d/status", (int)pid));
        ck_assert_msg(strstr(status_text, "NoNewPrivs:\t1") &&
                              strstr(status_text,
                                     fmt("Gid:\t%d\t%d", SERVICE_TEST_GID, SERVICE_TEST_GID)),
                      "sbxd is not in the service's state:\n%s", status_text);

        memset(&d, 0, sizeof(d));
        snprintf(d.sock, sizeof(d.sock), "%s", sock);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.id = "svc";
        o.policy.limits.set = SBX_LIMIT_MEMORY | SBX_LIMIT_PROCESSES | SBX_LIMIT_OPEN_FILES;
        o.policy.limits.memory_bytes = 128u << 20;
        o.policy.limits.processes = 64;
        o.policy.limits.open_files = 256;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "create: %s", sbx_error_message(c));
        for (size_t i = 0; i < sb->warnings.n; i++)
                fprintf(stderr, "it_service: sandbox warning: %s\n", sb->warnings.v[i]);
        sbx_sandbox_free(sb);
        r = it_sh(c, "svc", 20000,
                  "id -G; ulimit -n; grep NoNewPrivs /proc/self/status; "
                  "echo data > /workspace/f && cat /workspace/f");
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0,
                      "the command failed: %s / %s", (char *)r->stdout_data,
                      (char *)r->stderr_data);
        ck_assert_msg(!strstr((char *)r->stdout_data, fmt("%d", SERVICE_TEST_GID)),
                      "the daemon's group leaked into the sandbox: %s", (char *)r->stdout_data);
        ck_assert_msg(strstr((char *)r->stdout_data, "\n256\nNoNewPrivs:\t1\ndata\n"),
                      "unexpected output: %s", (char *)r->stdout_data);
        sbx_result_free(r);
        ck_assert_int_eq(sbx_terminate(c, "svc", NULL), SBX_OK);
        sbx_close(c);
        kill(pid, SIGTERM);
        status = wait_exit(pid, 30000, log);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        free_kept();
}
END_TEST

/* ---- tests: make install, pkg-config, make uninstall ------------------------------------ */

static const char demo_c[] =
        "#include <stdio.h>\n"
        "#include <sbx.h>\n"
        "\n"
        "int main(int argc, char **argv) {\n"
        "        sbx_client *c = NULL;\n"
        "        struct sbx_hello *h = NULL;\n"
        "        struct sbx_create_opts co;\n"
        "        struct sbx_sandbox *sb = NULL;\n"
        "        struct sbx_exec_opts eo;\n"
        "        struct sbx_result *r = NULL;\n"
        "        const char *words[] = {\"echo\", \"staged\"};\n"
        "        enum sbx_code rc = sbx_connect(argc > 1 ? argv[1] : NULL, \"demo\", &c);\n"
        "\n"
        "        if (rc == SBX_OK)\n"
        "                rc = sbx_hello(c, &h);\n"
        "        if (rc != SBX_OK) {\n"
        "                fprintf(stderr, \"%s: %s\\n\", sbx_code_name(rc),\n"
        "                        c ? sbx_error_message(c) : \"out of memory\");\n"
        "                sbx_close(c);\n"
        "                return 1;\n"
        "        }\n"
        "        printf(\"sbxd %s\\n\", h->daemon_version);\n"
        "        sbx_hello_free(h);\n"
        "        sbx_create_opts_init(&co);\n"
        "        rc = sbx_create(c, &co, &sb);\n"
        "        if (rc == SBX_OK) {\n"
        "                sbx_exec_opts_init(&eo);\n"
        "                eo.argv = words;\n"
        "                eo.argc = 2;\n"
        "                rc = sbx_exec(c, sb->id, &eo, &r);\n"
        "                if (rc == SBX_OK)\n"
        "                        fwrite(r->stdout_data, 1, r->stdout_len, stdout);\n"
        "                sbx_result_free(r);\n"
        "                if (sbx_terminate(c, sb->id, NULL) != SBX_OK)\n"
        "                        rc = SBX_INTERNAL;\n"
        "        }\n"
        "        if (rc != SBX_OK)\n"
        "                fprintf(stderr, \"%s: %s\\n\", sbx_code_name(rc), sbx_error_message(c));\n"
        "        sbx_sandbox_free(sb);\n"
        "        sbx_close(c);\n"
        "        return rc == SBX_OK ? 0 : 1;\n"
        "}\n";

/* Splits s (in place) into words appended to v (at most max). Returns their count. */
static size_t split_words(char *s, char **v, size_t max) {
        size_t n = 0;
        for (char *save = NULL, *w = strtok_r(s, " \t\n", &save); w && n < max;
             w = strtok_r(NULL, " \t\n", &save))
                v[n++] = w;
        return n;
}

/* Fails the test when text (the contents of file) keeps a make placeholder (@NAME@). */
static void assert_no_placeholder(const char *file, const char *text) {
        for (const char *at = strchr(text, '@'); at; at = strchr(at + 1, '@')) {
                size_t k = 1;
                while ((at[k] >= 'A' && at[k] <= 'Z') || at[k] == '_')
                        k++;
                ck_assert_msg(!(k > 1 && at[k] == '@'), "%s keeps a placeholder: %.*s", file,
                              (int)k + 1, at);
        }
}

/* Compiles src into bin with the flags `pkg-config --cflags --libs sbx` gives in env
 * (strict warnings), adding the sanitizers when libso was built with them (make asan).
 * Returns the flags (kept). */
static char *build_demo(char *const *env, const char *src, const char *bin, const char *libso) {
        char *pc[] = {"pkg-config", "--cflags", "--libs", "sbx", NULL};
        char *flags, *err, *words;
        char *argv[64] = {"cc",     "-std=c11", "-Wall",      "-Wextra", "-Wstrict-prototypes",
                          "-Werror", "-o",      fmt("%s", bin), fmt("%s", src)};
        size_t n = 9;
        int rc = run(pc, env, NULL, &flags, &err, 60);

        ck_assert_msg(rc == 0, "pkg-config --cflags --libs sbx failed: %s", err);
        if (file_contains(libso, "libasan.so"))
                argv[n++] = "-fsanitize=address,undefined";
        words = fmt("%s", flags);
        n += split_words(words, argv + n, 50);
        argv[n] = NULL;
        run_ok(argv, NULL, 120);
        return flags;
}

/* What the loader resolves libsbx.so.0 to for bin run with env (kept). */
static char *loaded_libsbx(const char *bin, char *const *env) {
        char *argv[] = {fmt("%s", bin), NULL};
        char *envv[4] = {"LD_TRACE_LOADED_OBJECTS=1", NULL};
        char *out, *err, *at, *end;
        size_t n = 1;
        int rc;

        for (size_t i = 0; env && env[i] && n < 3; i++)
                envv[n++] = env[i];
        rc = run(argv, envv, NULL, &out, &err, 60);
        ck_assert_msg(rc == 0, "%s with LD_TRACE_LOADED_OBJECTS: %s%s", bin, out, err);
        at = strstr(out, "libsbx.so.0 => ");
        ck_assert_msg(at, "%s does not load libsbx.so.0: %s", bin, out);
        at += strlen("libsbx.so.0 => ");
        end = strchr(at, ' ');
        return fmt("%.*s", end ? (int)(end - at) : (int)strlen(at), at);
}

/* README, "C: libsbx": a program builds against the source tree with
 * `PKG_CONFIG_PATH=build pkg-config --cflags --libs sbx` (build/sbx-uninstalled.pc) and
 * runs from there without LD_LIBRARY_PATH, talking to a daemon; and the man pages of
 * the build have their paths filled in. */
START_TEST(tree_pkgconfig_client_and_man_pages) {
        char *work = new_dir("tree-client");
        char *build = keep(realpath(it_build_dir(), NULL));
        char *src = path_of(work, "demo.c"), *bin = path_of(work, "demo");
        char *cwd = keep(getcwd(NULL, 0));
        char *flags, *out, *err;
        struct it_daemon d;
        int rc;

        ck_assert_ptr_nonnull(build);
        write_file(src, demo_c);
        {
                char *env[] = {fmt("PKG_CONFIG_PATH=%s", build), "PKG_CONFIG_SYSROOT_DIR=", NULL};
                flags = build_demo(env, src, bin, path_of(build, "libsbx.so.0"));
        }
        ck_assert_msg(strstr(flags, fmt("-I%s/client", cwd)) && strstr(flags, fmt("-L%s", build)) &&
                              strstr(flags, "-lsbx"),
                      "pkg-config flags do not point into the tree: %s", flags);
        ck_assert_str_eq(loaded_libsbx(bin, NULL), path_of(build, "libsbx.so.0"));
        it_daemon_start(&d, NULL);
        {
                char *argv[] = {bin, d.sock, NULL};
                char *env[] = {"LD_LIBRARY_PATH=", NULL};
                rc = run(argv, env, NULL, &out, &err, 60);
                ck_assert_msg(rc == 0, "the tree's client failed (%d): %s%s", rc, out, err);
                ck_assert_str_eq(out, "sbxd " SBX_VERSION "\nstaged\n");
        }
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        for (size_t i = 0; installed[i]; i++) {
                const char *m = strstr(installed[i], "share/man/"), *t;
                if (!m)
                        continue;
                t = path_of(build, fmt("man/%s", m + strlen("share/man/")));
                assert_no_placeholder(t, read_file(t));
        }
        free_kept();
}
END_TEST

START_TEST(install_layout_pkgconfig_client_uninstall) {
        char *stage = new_dir("stage"), *work = new_dir("client");
        char *libdir = path_of(stage, "usr/lib");
        char *sbxd = path_of(stage, "usr/sbin/sbxd"),
             *init = path_of(stage, "usr/libexec/sbxd/sbx-init");
        char *demo = path_of(work, "demo"), *demo_src = path_of(work, "demo.c");
        char *sock = path_of(work, "sock"), *log = path_of(work, "sbxd.log");
        char *env_ld = fmt("LD_LIBRARY_PATH=%s", libdir);
        char *out, *err, *flags, *want = fmt("%s", "");
        const char *list;
        char link[64];
        struct stat st;
        pid_t pid;
        int rc, status;

        make_target("install", stage);

        /* Exactly the expected files, with their modes. */
        for (size_t i = 0; installed[i]; i++)
                want = fmt("%s%s\n", want, installed[i]);
        list = list_files(stage);
        for (size_t i = 0; installed[i]; i++)
                ck_assert_msg(strstr(list, fmt("%s\n", installed[i])),
                              "%s was not installed; installed:\n%s", installed[i], list);
        ck_assert_msg(strlen(list) == strlen(want), "install added other files:\n%s", list);
        ck_assert_int_eq(stat(sbxd, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(stat(init, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0755);
        memset(link, 0, sizeof(link));
        ck_assert_int_ge(readlink(path_of(libdir, "libsbx.so"), link, sizeof(link) - 1), 0);
        ck_assert_str_eq(link, "libsbx.so.0");

        /* Files that name paths name the final ones: no placeholder and no staging
         * directory left in any of them. */
        for (size_t i = 0; installed[i]; i++) {
                const char *f = installed[i];
                const char *t;
                if (!strstr(f, ".service") && !strstr(f, ".socket") && !strstr(f, ".pc") &&
                    !strstr(f, ".conf") && !strstr(f, "/man"))
                        continue;
                t = read_file(path_of(stage, f));
                ck_assert_msg(!strstr(t, stage), "%s names the staging directory", f);
                assert_no_placeholder(f, t);
        }
        {
                const char *pc = read_file(path_of(libdir, "pkgconfig/sbx.pc"));
                ck_assert_msg(strstr(pc, "prefix=/usr\n") && strstr(pc, "libdir=/usr/lib\n") &&
                                      strstr(pc, "includedir=/usr/include\n") &&
                                      strstr(pc, "Version: " SBX_VERSION "\n"),
                              "sbx.pc does not describe the /usr install:\n%s", pc);
        }
        {
                /* The installed man pages render without a warning. */
                char *groff = which("groff");
                for (size_t i = 0; groff && installed[i]; i++) {
                        char *argv[] = {groff, "-man", "-ww", "-z", path_of(stage, installed[i]),
                                        NULL};
                        if (!strstr(installed[i], "share/man/"))
                                continue;
                        rc = run(argv, NULL, NULL, &out, &err, 60);
                        ck_assert_msg(rc == 0 && !*err, "groff warns on %s:\n%s", installed[i],
                                      err);
                }
                if (!groff)
                        fprintf(stderr, "it_service: SKIP man page rendering: no groff\n");
        }

        /* A client built from the staged header and library, as pkg-config says. */
        write_file(demo_src, demo_c);
        {
                char *env[] = {fmt("PKG_CONFIG_PATH=%s/pkgconfig", libdir),
                               fmt("PKG_CONFIG_SYSROOT_DIR=%s", stage), NULL};
                flags = build_demo(env, demo_src, demo, path_of(libdir, "libsbx.so.0"));
                ck_assert_msg(strstr(flags, fmt("-I%s/usr/include", stage)) &&
                                      strstr(flags, fmt("-L%s/usr/lib", stage)) &&
                                      strstr(flags, "-lsbx"),
                              "pkg-config flags do not point into the stage: %s", flags);
        }

        /* The staged daemon, with the staged helper, serves the staged client. */
        {
                char *argv[] = {sbxd,     "--socket", sock, "--state-dir", path_of(work, "state"),
                                "--init", init,       NULL};
                pid = spawn_logged(argv, NULL, log);
        }
        wait_serving(sock, pid, log);
        {
                char *argv[] = {demo, sock, NULL};
                char *env[] = {env_ld, NULL};
                rc = run(argv, env, NULL, &out, &err, 60);
                ck_assert_msg(rc == 0, "the client failed (%d): %s%s", rc, out, err);
                ck_assert_str_eq(out, "sbxd " SBX_VERSION "\nstaged\n");
        }
        {
                /* It really loaded the staged shared library. */
                char *argv[] = {demo, NULL};
                char *env[] = {env_ld, "LD_TRACE_LOADED_OBJECTS=1", NULL};
                rc = run(argv, env, NULL, &out, &err, 60);
                ck_assert_msg(rc == 0 && strstr(out, fmt("libsbx.so.0 => %s/libsbx.so.0", libdir)),
                              "the client loads: %s", out);
        }
        {
                /* And the staged sbx tool talks to it as well. */
                char *argv[] = {path_of(stage, "usr/bin/sbx"), "version", NULL};
                char *env[] = {fmt("SBX_SOCKET=%s", sock), NULL};
                rc = run(argv, env, NULL, &out, &err, 60);
                ck_assert_msg(rc == 0 && strstr(out, "sbxd " SBX_VERSION " (protocol"),
                              "staged sbx version: %s%s", out, err);
        }
        if (file_contains(path_of(libdir, "libsbx.so.0"), "libasan.so")) {
                /* The interpreter cannot load a sanitized library without preloading the
                 * runtime; `make check` runs this with the plain build. */
                fprintf(stderr, "it_service: SKIP the staged Python package: libsbx is built "
                                "with sanitizers\n");
        } else {
                /* The staged Python package imports with the staged libsbx (SBX_LIBSBX
                 * stands in for /usr/lib, which the stage is not) and drives the daemon;
                 * the bytecode it leaves behind is uninstall's to remove as well. */
                char *py = which("python3");
                char *pkgdir = path_of(stage, "usr/lib/python3/dist-packages");
                char *argv[] = {py ? py : "python3", "-c", fmt("%s", demo_py), sock, NULL};
                char *env[] = {fmt("PYTHONPATH=%s", pkgdir),
                               fmt("SBX_LIBSBX=%s/libsbx.so.0", libdir), NULL};
                rc = run(argv, env, NULL, &out, &err, 60);
                ck_assert_msg(rc == 0, "the staged Python package failed (%d): %s%s", rc, out,
                              err);
                ck_assert_str_eq(out, fmt("%s/sbx/__init__.py\n/usr/lib\nstaged python\n",
                                          pkgdir));
        }
        kill(pid, SIGTERM);
        status = wait_exit(pid, 30000, log);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* Uninstall removes every file install added. */
        make_target("uninstall", stage);
        list = list_files(stage);
        ck_assert_msg(!*list, "uninstall left files behind:\n%s", list);
        free_kept();
}
END_TEST

/* ---- tests: sbx doctor ------------------------------------------------------------------ */

/* The line of `sbx doctor` for check name ("ok    userns  ..."), kept; NULL if none. */
static char *doctor_line(const char *out, const char *name) {
        const char *p = out;
        while (p && *p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                char st[16], nm[64];
                if (sscanf(p, "%15s %63s", st, nm) == 2 && strcmp(nm, name) == 0)
                        return keep(strndup(p, len));
                p = nl ? nl + 1 : NULL;
        }
        return NULL;
}

/* The JSON object of check name in `sbx doctor --json`, kept; NULL if none. */
static char *doctor_object(const char *json, const char *name) {
        const char *at = strstr(json, fmt("\"name\":\"%s\"", name)), *start, *end;

        if (!at)
                return NULL;
        for (start = at; start > json && *start != '{'; start--)
                ;
        end = strchr(at, '}');
        if (!end)
                return NULL;
        return keep(strndup(start, (size_t)(end - start + 1)));
}

/* What this host allows, found independently of sbx doctor. */
static int userns_works(void) {
        int st;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
        waitpid(pid, &st, 0);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static const char *cgroup_kind(void) {
        struct statfs sf;
        if (statfs("/sys/fs/cgroup", &sf) < 0)
                return "none";
        return sf.f_type == CGROUP2_SUPER_MAGIC ? "v2" : "v1";
}

START_TEST(doctor_reports_this_host) {
        const char *text_args[] = {"doctor", NULL}, *json_args[] = {"doctor", "--json", NULL};
        const char *cg = fmt("cgroup %s", cgroup_kind());
        int userns = userns_works();
        struct it_daemon d;
        char *out = NULL, *err = NULL, *line, *obj;
        int rc;

        it_daemon_start(&d, NULL);
        rc = it_sbx(&d, NULL, 0, &out, &err, text_args);
        keep(out);
        keep(err);
        fprintf(stderr, "it_service: sbx doctor on this host:\n%s", out);
        /* doctor exits 1 only when a check fails; nothing this suite needs may fail. */
        ck_assert_msg(rc == 0, "sbx doctor exited %d:\n%s%s", rc, out, err);
        line = doctor_line(out, "user");
        ck_assert_msg(line && strncmp(line, "ok", 2) == 0 && strstr(line, "root"), "%s", out);

        line = doctor_line(out, "userns");
        ck_assert_ptr_nonnull(line);
        if (userns)
                ck_assert_msg(strncmp(line, "ok", 2) == 0 && strstr(line, "user namespaces work"),
                              "user namespaces work here, but doctor says: %s", line);
        else
                ck_assert_msg(strncmp(line, "ok", 2) != 0, "doctor claims userns: %s", line);

        line = doctor_line(out, "cgroup");
        ck_assert_ptr_nonnull(line);
        ck_assert_msg(strstr(line, cg), "this host has %s, doctor says: %s", cg, line);
        if (strcmp(cgroup_kind(), "v1") == 0 && access("/sys/fs/cgroup/memory", W_OK) == 0)
                ck_assert_msg(strncmp(line, "ok", 2) == 0, "writable v1 is not ok: %s", line);

        line = doctor_line(out, "socket");
        ck_assert_msg(line && strncmp(line, "ok", 2) == 0 && strstr(line, d.sock),
                      "doctor does not find the daemon: %s", out);
        line = doctor_line(out, "daemon");
        ck_assert_msg(line && strstr(line, cg) && strstr(line, userns ? "userns yes" : "userns no"),
                      "the daemon's view differs: %s", out);

        /* --json: valid JSON (python3's parser when there is one) with the same facts. */
        rc = it_sbx(&d, NULL, 0, &out, &err, json_args);
        keep(out);
        keep(err);
        ck_assert_msg(rc == 0, "sbx doctor --json exited %d: %s", rc, err);
        ck_assert_msg(out[0] == '[' && strlen(out) > 2 && strcmp(out + strlen(out) - 2, "]\n") == 0,
                      "not one JSON array: %s", out);
        {
                char *py = which("python3");
                char *argv[] = {py, "-c",
                                "import json, sys\n"
                                "d = json.load(sys.stdin)\n"
                                "assert isinstance(d, list) and d\n"
                                "for c in d:\n"
                                "    assert set(c) == {'status', 'name', 'detail', 'fix'}, c\n"
                                "    assert c['status'] in ('ok', 'warn', 'fail'), c\n"
                                "    assert (c['fix'] is None) == (c['status'] == 'ok'), c\n"
                                "print(' '.join(c['name'] + '=' + c['status'] for c in d))\n",
                                NULL};
                char *pout, *perr;
                if (py) {
                        rc = run(argv, NULL, out, &pout, &perr, 60);
                        ck_assert_msg(rc == 0, "doctor --json does not parse: %s\n%s", perr, out);
                        ck_assert_msg(strstr(pout, "socket=ok"), "%s", pout);
                }
        }
        obj = doctor_object(out, "userns");
        ck_assert_ptr_nonnull(obj);
        if (userns)
                ck_assert_msg(strstr(obj, "\"status\":\"ok\"") && strstr(obj, "\"fix\":null"), "%s",
                              obj);
        obj = doctor_object(out, "cgroup");
        ck_assert_msg(obj && strstr(obj, cg), "%s", out);
        obj = doctor_object(out, "daemon");
        ck_assert_msg(obj && strstr(obj, cg), "%s", out);
        ck_assert_int_eq(WEXITSTATUS(it_daemon_stop(&d)), 0);
        free_kept();
}
END_TEST

/* ---- stretch: a real systemd as PID 1 (make check-systemd only) -------------------------- */

/* Run inside the booted container by sbxd-check.service, as root, after sysinit.target
 * (so systemd-sysusers and systemd-tmpfiles have applied our snippets), with sbxd.socket
 * listening and sbxd.service not started yet. Prints "PASS name" or "FAIL name: what"
 * for each check, "SKIP name: why" for a check of the daemon's bounds whose cgroup
 * controller it found not delegated, and "DONE" at the end; $1 is "default" or
 * "unified" (the cgroups). */
static const char boot_check_sh[] =
        "S=/run/sbxd/sbxd.sock\n"
        "export SBX_SOCKET=$S\n"
        "mode=$1\n"
        "check() { name=$1; shift; if \"$@\"; then echo \"PASS $name\"; "
        "else echo \"FAIL $name: $*\"; fi; }\n"
        "perm() { stat -c '%a %U:%G' \"$1\"; }\n"
        "gid=$(getent group sbxd | cut -d: -f3)\n"
        "check group test -n \"$gid\"\n"
        "check run_dir test \"$(perm /run/sbxd)\" = '750 root:sbxd'\n"
        "check state_dir test \"$(perm /var/lib/sbxd)\" = '700 root:sbxd'\n"
        "check socket_file test \"$(perm $S)\" = '660 root:sbxd'\n"
        "check socket_active test \"$(systemctl is-active sbxd.socket)\" = active\n"
        "check on_demand test \"$(systemctl is-active sbxd.service)\" = inactive\n"
        "check create test \"$(sbx create --id boot)\" = boot\n"
        "check exec test \"$(sbx exec boot -- echo hello)\" = hello\n"
        "check active test \"$(systemctl is-active sbxd.service)\" = active\n"
        "check notify_status test \"$(systemctl show -p StatusText --value sbxd.service)\" = "
        "serving\n"
        "P=$(systemctl show -p MainPID --value sbxd.service)\n"
        "check daemon_uid grep -q \"^Uid:\t0\t0\t0\t0\" /proc/$P/status\n"
        "check daemon_group grep -q \"^Gid:\t$gid\t$gid\t$gid\t$gid\" /proc/$P/status\n"
        "check daemon_nnp grep -q \"^NoNewPrivs:\t1\" /proc/$P/status\n"
        "check socket_file_kept_group test \"$(perm $S)\" = '660 root:sbxd'\n"
        "check state_dir_kept test \"$(perm /var/lib/sbxd)\" = '700 root:sbxd'\n"
        "nofile() { grep '^Max open files' $1 | tr -s ' ' | cut -d' ' -f4,5; }\n"
        "max=$(nofile /proc/1/limits | cut -d' ' -f2)\n"
        "[ \"$max\" = unlimited ] || [ \"$max\" -gt 65536 ] && max=65536\n"
        "check daemon_nofile test \"$(nofile /proc/$P/limits)\" = \"$max $max\"\n"
        "check oom_policy test \"$(systemctl show -p OOMPolicy --value sbxd.service)\" = continue\n"
        "check tasks_max test \"$(systemctl show -p TasksMax --value sbxd.service)\" = infinity\n"
        "check kill_mode test \"$(systemctl show -p KillMode --value sbxd.service)\" = mixed\n"
        /* The daemon's own bounds (--daemon-memory-max 4G --daemon-tasks-max 1024 in
         * the unit). bound CHECK CONTROLLER FILE WANT reads FILE in the daemon's cgroup of
         * that controller and wants WANT there, unless the controller is not delegated:
         * on v2 it is not in the service's cgroup.controllers (systemd-nspawn on a host
         * whose cgroup2 has no controllers), on v1 the daemon's group in its hierarchy
         * is not writable (systemd-nspawn mounts the v1 hierarchies read-only) or not
         * mounted. Only then it says SKIP with that reason, and only if the daemon too
         * said it runs without its bounds. */
        "svc=/sys/fs/cgroup/system.slice/sbxd.service\n"
        "bound() { name=$1; ctrl=$2; if [ \"$mode\" = unified ]; then\n"
        "  c=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$P/cgroup)\n"
        "  grep -qw $ctrl $svc/cgroup.controllers || why=\"no $ctrl controller in "
        "$svc/cgroup.controllers\"\n"
        "  else c=/sys/fs/cgroup/$ctrl$(grep \":$ctrl:\" /proc/$P/cgroup | cut -d: -f3)\n"
        "  if [ ! -d /sys/fs/cgroup/$ctrl ]; then why=\"no v1 $ctrl hierarchy\";\n"
        "  elif [ ! -w \"$c\" ]; then why=\"the v1 $ctrl group $c is read-only\"; fi; fi\n"
        "  if [ -n \"$why\" ]; then\n"
        "    if journalctl -u sbxd -o cat | grep -q 'cannot bound the daemon itself'; then\n"
        "      echo \"SKIP $name: $why\"; else echo \"FAIL $name: $why, yet sbxd did not say "
        "it runs without\"; fi\n"
        "  else check $name test \"$(cat \"$c/$3\")\" = $4; fi; why=; }\n"
        "if [ \"$mode\" = unified ]; then mem=memory.max; else mem=memory.limit_in_bytes; fi\n"
        "bound daemon_memory_max memory $mem 4294967296\n"
        "bound daemon_tasks_max pids pids.max 1024\n"
        "groups=$(sbx exec boot -- id -G)\n"
        "check sandbox_groups test -n \"$groups\" -a -z \"$(echo \" $groups \" | grep \" $gid "
        "\")\"\n"
        "if [ \"$mode\" = unified ]; then\n"
        "  check daemon_leaf grep -qx '0::/system.slice/sbxd.service/daemon' /proc/$P/cgroup\n"
        /* The cgroup of boot's init: named after the warm sandbox boot claimed, if it
         * claimed one, so found through the init pid sbxd logs. */
        "  ip=$(journalctl -u sbxd -o cat | sed -n 's/.*sbx=boot: .*(init pid "
        "\\([0-9]*\\).*/\\1/p' | head -n 1)\n"
        "  check sandbox_cgroup grep -q '^0::/system.slice/sbxd.service/sbxd-[^/]*/[^/]' "
        "/proc/${ip:-0}/cgroup\n"
        "else\n"
        "  check delegated grep -q ':/system.slice/sbxd.service' /proc/$P/cgroup\n"
        "fi\n"
        "useradd -M -G sbxd alice && useradd -M bob\n"
        "as() { u=$1; shift; setpriv --reuid=$(id -u $u) --regid=$(id -g $u) --init-groups -- "
        "\"$@\"; }\n"
        "check member_create test \"$(as alice sbx create --id alice1)\" = alice1\n"
        "u=$(as alice sbx exec alice1 -- id -u)\n"
        "check member_exec test -n \"$u\" -a \"$u\" != 0\n"
        /* Another user's sandbox does not exist for alice: NOT_FOUND, word for word as
         * an id nobody used. */
        "as alice sbx exec boot -- true 2>/tmp/err; rc=$?\n"
        "as alice sbx exec unused -- true 2>/tmp/err2; rc2=$?\n"
        "check member_not_owner sh -c \"test $rc = 125 -a $rc2 = 125 && "
        "grep -q '^sbx: NOT_FOUND: ' /tmp/err && sed s/boot/unused/g /tmp/err | cmp -s - "
        "/tmp/err2\"\n"
        "as bob sbx list 2>/tmp/err; rc=$?\n"
        "check non_member_refused sh -c \"test $rc = 125 && grep -q 'ermission denied' /tmp/err\"\n"
        "sbx doctor >/tmp/doctor; check doctor test $? = 0\n"
        "systemctl stop sbxd.service\n"
        "check stop_result test \"$(systemctl show -p Result --value sbxd.service)\" = success\n"
        "check stop_in_order sh -c 'journalctl -u sbxd -o cat | grep -q \"all sandboxes ended\"'\n"
        "check socket_kept test -S $S\n"
        "check reactivated sh -c 'sbx info --json boot | grep -q "
        "\"\\\"end_reason\\\":\\\"shutdown\\\"\"'\n"
        "check active_again test \"$(systemctl is-active sbxd.service)\" = active\n"
        "sbx create --id crash >/dev/null\n"
        "P=$(systemctl show -p MainPID --value sbxd.service)\n"
        "kill -9 $P\n"
        "i=0; while [ $i -lt 100 ]; do\n"
        "  [ \"$(systemctl show -p NRestarts --value sbxd.service)\" = 1 ] && "
        "[ \"$(systemctl is-active sbxd.service)\" = active ] && break\n"
        "  sleep 0.1; i=$((i+1)); done\n"
        "check restarted test \"$(systemctl show -p NRestarts --value sbxd.service)\" = 1\n"
        "check crash_lost sh -c 'sbx info --json crash | grep -q \"\\\"state\\\":\\\"lost\\\"\"'\n"
        /* No init of the daemon that was killed is left: every sbx-init running now
         * descends from the restarted daemon (its warm pool). One that vanishes while it
         * is looked at is not left either. */
        "under() { p=$1; while [ \"$p\" != 1 ]; do [ \"$p\" = \"$2\" ] && return 0;\n"
        "  p=$(sed -n 's/^PPid:\t//p' /proc/$p/status 2>/dev/null); [ -n \"$p\" ] || return 0;\n"
        "  done; return 1; }\n"
        "left() { N=$(systemctl show -p MainPID --value sbxd.service)\n"
        "  for i in $(pgrep -x sbx-init); do under $i $N || echo $i; done; }\n"
        "check crash_cleanup test -z \"$(left)\"\n"
        "systemctl stop sbxd.socket\n"
        "check socket_removed test ! -e $S\n"
        "check stopped_with_socket test \"$(systemctl is-active sbxd.service)\" = inactive\n"
        "echo '--- journal'; journalctl -u sbxd -o short-monotonic --no-pager | tail -n 40\n"
        "echo DONE\n";

static const char *const boot_checks[] = {
        "group",
        "run_dir",
        "state_dir",
        "socket_file",
        "socket_active",
        "on_demand",
        "create",
        "exec",
        "active",
        "notify_status",
        "daemon_uid",
        "daemon_group",
        "daemon_nnp",
        "socket_file_kept_group",
        "state_dir_kept",
        "daemon_nofile",
        "oom_policy",
        "tasks_max",
        "kill_mode",
        "daemon_memory_max",
        "daemon_tasks_max",
        "sandbox_groups",
        "member_create",
        "member_exec",
        "member_not_owner",
        "non_member_refused",
        "doctor",
        "stop_result",
        "stop_in_order",
        "socket_kept",
        "reactivated",
        "active_again",
        "restarted",
        "crash_lost",
        "crash_cleanup",
        "socket_removed",
        "stopped_with_socket",
        NULL,
};

/* The checks that may say "SKIP name: why" instead of PASS: the daemon's own bounds,
 * which need a delegated memory or pids controller. boot_check_sh says SKIP only when it
 * found that controller missing from the service's cgroup (v2) or read-only or absent
 * (v1) and sbxd said it runs without its bounds. */
static const char *const boot_skippable[] = {"daemon_memory_max", "daemon_tasks_max", NULL};

/* The line of report that begins with prefix, or NULL. */
static const char *report_line(const char *report, const char *prefix) {
        for (const char *l = report; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, prefix, strlen(prefix)) == 0)
                        return l;
        return NULL;
}

static int listed(const char *const *names, const char *name) {
        for (; names && *names; names++)
                if (strcmp(*names, name) == 0)
                        return 1;
        return 0;
}

/* Why report (boot_check_sh's output) does not prove every check of checks and extra,
 * or NULL when it does: each needs a line "PASS name", or "SKIP name: why" with a
 * reason when it is in boot_skippable; no line may say FAIL and the report must end
 * with DONE. The answer is kept. */
static const char *boot_report_problem(const char *report, const char *const *checks,
                                       const char *const *extra) {
        const char *const *lists[] = {checks, extra};
        const char *l;

        if (!strstr(report, "\nDONE\n"))
                return "the report does not end with DONE";
        if ((l = report_line(report, "FAIL ")))
                return fmt("%.*s", (int)strcspn(l, "\n"), l);
        for (size_t k = 0; k < 2; k++)
                for (const char *const *c = lists[k]; c && *c; c++) {
                        const char *skip = report_line(report, fmt("SKIP %s: ", *c));
                        if (report_line(report, fmt("PASS %s\n", *c)))
                                continue;
                        if (!skip)
                                return fmt("check %s did not pass", *c);
                        if (!listed(boot_skippable, *c))
                                return fmt("check %s may not be skipped", *c);
                        skip += strlen("SKIP : ") + strlen(*c);
                        if (strspn(skip, " \t") == strcspn(skip, "\n"))
                                return fmt("check %s skipped without a reason", *c);
                }
        return NULL;
}

/* Boots the host's systemd in a container (systemd-nspawn: a volatile root over the
 * host's /usr with the staged install laid over it, no network, unified cgroups when
 * mode is "unified"), lets it start sbxd.socket, runs boot_check_sh there and checks its
 * report. */
static void boot_round(const char *mode) {
        char *nspawn = which("systemd-nspawn");
        char *dir = new_dir(mode), *stage = path_of(dir, "stage"), *check = path_of(dir, "check");
        char *results = path_of(dir, "results"), *log = path_of(dir, "console.log");
        char *report = path_of(results, "report"), *text;
        const char *const *extra, *problem;
        static const char *const unified_checks[] = {"daemon_leaf", "sandbox_cgroup", NULL};
        static const char *const default_checks[] = {"delegated", NULL};
        pid_t pid;
        int status;

        ck_assert_msg(nspawn != NULL, "systemd-nspawn is missing: apt-get install "
                                      "systemd-container (make check-systemd does this)");
        ck_assert_int_eq(mkdir(stage, 0755), 0);
        ck_assert_int_eq(mkdir(check, 0755), 0);
        ck_assert_int_eq(mkdir(results, 0755), 0);
        make_target("install", stage);
        write_file(path_of(check, "run.sh"), boot_check_sh);
        write_file(path_of(stage, "usr/lib/systemd/system/sbxd-check.service"),
                   fmt("[Unit]\n"
                       "Description=sbxd boot check (make check-systemd)\n"
                       "Wants=sbxd.socket\n"
                       "After=sbxd.socket\n"
                       "SuccessAction=exit-force\n"
                       "FailureAction=exit-force\n"
                       "\n"
                       "[Service]\n"
                       "Type=oneshot\n"
                       "ExecStart=/bin/sh /check/run.sh %s\n"
                       "StandardOutput=file:/results/report\n"
                       "StandardError=inherit\n"
                       "TimeoutStartSec=150\n",
                       mode));
        {
                char *argv[] = {nspawn,
                                "-D",
                                "/",
                                "--volatile=yes",
                                "--register=no",
                                "--keep-unit",
                                "--private-network",
                                fmt("--machine=sbxd-check-%d", (int)getpid()),
                                fmt("--overlay-ro=/usr:%s/usr:/usr", stage),
                                fmt("--bind-ro=%s:/check", check),
                                fmt("--bind=%s:/results", results),
                                "--setenv=SYSTEMD_COLORS=0",
                                "-b",
                                "--",
                                "systemd.unit=sbxd-check.service",
                                "systemd.firstboot=no",
                                NULL};
                char *env_unified[] = {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1", NULL};

                pid = spawn_logged(argv, strcmp(mode, "unified") == 0 ? env_unified : NULL, log);
        }
        status = wait_exit(pid, 300000, log);
        text = access(report, R_OK) == 0 ? read_file(report) : "(no report)\n";
        fprintf(stderr, "it_service: systemd boot (%s cgroups):\n%s", mode, text);
        if (!strstr(text, "\nDONE\n"))
                show_file(log);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(text, "\nDONE\n"),
                      "the container did not finish its checks (status %d)", status);
        extra = strcmp(mode, "unified") == 0 ? unified_checks : default_checks;
        problem = boot_report_problem(text, boot_checks, extra);
        ck_assert_msg(problem == NULL, "under systemd (%s cgroups): %s", mode, problem);
        free_kept();
}

/* report with its line `line` (which it must have) changed to `to`, kept. */
static char *with_line(const char *report, const char *line, const char *to) {
        const char *at = report_line(report, line);

        ck_assert_ptr_nonnull(at);
        return fmt("%.*s%s%s", (int)(at - report), report, to, at + strlen(line));
}

/* The judge of the boot report: every check passes, or (the daemon's bounds only) says
 * SKIP with a reason; anything else is refused. */
START_TEST(boot_report_needs_pass_or_a_skip_with_reason) {
        static const char *const extra[] = {"daemon_leaf", NULL};
        char *all = fmt("%s", "");
        const char *problem;

        for (size_t i = 0; boot_checks[i]; i++)
                all = fmt("%sPASS %s\n", all, boot_checks[i]);
        all = fmt("%sPASS daemon_leaf\n--- journal\nDONE\n", all);
        ck_assert_ptr_null(boot_report_problem(all, boot_checks, extra));
        /* Without DONE, with a FAIL, with a check missing or only passed by a prefix. */
        problem = boot_report_problem(fmt("PASS group\n"), boot_checks, extra);
        ck_assert_msg(problem && strstr(problem, "DONE"), "%s", problem);
        problem = boot_report_problem(fmt("FAIL x: y\n%s", all), boot_checks, extra);
        ck_assert_msg(problem && strcmp(problem, "FAIL x: y") == 0, "%s", problem);
        problem = boot_report_problem(with_line(all, "PASS exec\n", "PASS exec_\n"), boot_checks,
                                      extra);
        ck_assert_msg(problem && strcmp(problem, "check exec did not pass") == 0, "%s", problem);
        problem = boot_report_problem(with_line(all, "PASS daemon_leaf\n", ""), boot_checks, extra);
        ck_assert_msg(problem && strcmp(problem, "check daemon_leaf did not pass") == 0, "%s",
                      problem);
        /* A SKIP with its reason, for a bound of the daemon's only. */
        ck_assert_ptr_null(boot_report_problem(
                with_line(all, "PASS daemon_memory_max\n",
                          "SKIP daemon_memory_max: the v1 memory group / is read-only\n"),
                boot_checks, extra));
        problem = boot_report_problem(
                with_line(all, "PASS daemon_tasks_max\n", "SKIP daemon_tasks_max: \n"), boot_checks,
                extra);
        ck_assert_msg(problem && strstr(problem, "without a reason"), "%s", problem);
        problem = boot_report_problem(with_line(all, "PASS exec\n", "SKIP exec: no\n"), boot_checks,
                                      extra);
        ck_assert_msg(problem && strcmp(problem, "check exec may not be skipped") == 0, "%s",
                      problem);
        problem = boot_report_problem(
                with_line(all, "PASS daemon_leaf\n", "SKIP daemon_leaf: no v2\n"), boot_checks,
                extra);
        ck_assert_msg(problem && strstr(problem, "may not be skipped"), "%s", problem);
        free_kept();
}
END_TEST

START_TEST(boot_systemd_default_cgroups) {
        boot_round("default");
}
END_TEST

START_TEST(boot_systemd_unified_cgroups) {
        boot_round("unified");
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("service");
        TCase *tc = tcase_create("service");

        tcase_add_unchecked_fixture(tc, svc_setup, svc_teardown);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, units_verify_and_snippets_apply);
        tcase_add_test(tc, socket_activation_serves_and_survives_restart);
        tcase_add_test(tc, notify_socket_gets_ready_and_stopping);
        tcase_add_test(tc, service_process_state);
        tcase_add_test(tc, install_layout_pkgconfig_client_uninstall);
        tcase_add_test(tc, tree_pkgconfig_client_and_man_pages);
        tcase_add_test(tc, doctor_reports_this_host);
        suite_add_tcase(s, tc);
        SBX_ADD_TEST_CASE(s, boot_report_needs_pass_or_a_skip_with_reason, 60, svc_setup,
                          svc_teardown);

        /* Booting systemd is `make check-systemd`, never `make check`. */
        if (getenv("SBX_CHECK_SYSTEMD")) {
                TCase *boot = tcase_create("boot");
                tcase_add_unchecked_fixture(boot, svc_setup, svc_teardown);
                tcase_set_timeout(boot, 900);
                tcase_add_test(boot, boot_systemd_default_cgroups);
                tcase_add_test(boot, boot_systemd_unified_cgroups);
                suite_add_tcase(s, boot);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
