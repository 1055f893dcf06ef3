/* itutil.c: integration test helpers; see itutil.h. */
#include "itutil.h"

#include "sbx_limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char base_dir[256];

/* The HOME of the next daemon started as another user (it_daemon_start_home); NULL: its
 * own directory. */
static const char *spawn_home;
static const gid_t *spawn_groups; /* it_daemon_start_groups: the daemon's groups */
static size_t spawn_n_groups;

const char *it_build_dir(void) {
        const char *b = getenv("BUILD");
        return b && b[0] ? b : "build";
}

double it_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void it_fixture_setup(void) {
        snprintf(base_dir, sizeof(base_dir), "/tmp/sbxd-it.XXXXXX");
        if (!mkdtemp(base_dir))
                abort();
        chmod(base_dir, 0755);
}

void it_fixture_setup_var(void) {
        snprintf(base_dir, sizeof(base_dir), "/var/tmp/sbxd-it.XXXXXX");
        if (!mkdtemp(base_dir))
                abort();
        chmod(base_dir, 0755);
}

const char *it_base_dir(void) {
        return base_dir;
}

/* Pids of daemons started in this test case, one per line in base/pids. */
static void record_pid(pid_t pid) {
        char p[300];
        FILE *f;
        snprintf(p, sizeof(p), "%s/pids", base_dir);
        f = fopen(p, "a");
        if (f) {
                fprintf(f, "%d\n", (int)pid);
                fclose(f);
        }
}

/* Removes the group tree at path, depth first, killing the processes still in it (the
 * sandboxes of a daemon of this test case: ours). */
static int remove_group(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        char procs[PATH_MAX];
        int i, pid;
        FILE *f;

        if (flag != FTW_DP)
                return 0;
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
        for (i = 0; i < 40 && rmdir(path) < 0 && errno == EBUSY; i++) {
                f = fopen(procs, "re");
                while (f && fscanf(f, "%d", &pid) == 1)
                        kill(pid, SIGKILL);
                if (f)
                        fclose(f);
                usleep(50000);
        }
        if (access(path, F_OK) == 0)
                fprintf(stderr, "itutil: cannot remove the cgroup %s\n", path);
        return 0;
}

/* A daemon that a failed test SIGKILLed (it_daemon_kill) leaves its cgroups; each
 * daemon logs where it makes them ("cgroups under PATH"). */
static void remove_test_cgroups(void) {
        char cmd[400], path[PATH_MAX + 32];
        FILE *p;

        snprintf(cmd, sizeof(cmd),
                 "cat '%s'/d.*/sbxd.log 2>/dev/null | sed -n 's/.*sbxd: cgroups under //p' | "
                 "sort -u",
                 base_dir);
        p = popen(cmd, "re");
        while (p && fgets(path, sizeof(path), p)) {
                path[strcspn(path, "\n")] = '\0';
                if (path[0] == '/' && access(path, F_OK) == 0)
                        nftw(path, remove_group, 16, FTW_DEPTH | FTW_PHYS);
        }
        if (p)
                pclose(p);
}

/* A test that failed after it SIGKILLed its daemon leaves what that daemon mounted below
 * the base directory (a disk image on a workspace directory, with its loop device):
 * detached here (the loop device goes with its last user), before the directory is
 * removed. */
static void detach_test_mounts(void) {
        char line[8192], point[4096];
        size_t n = strlen(base_dir);
        FILE *f = fopen("/proc/self/mountinfo", "re");

        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 &&
                    strncmp(point, base_dir, n) == 0 && point[n] == '/')
                        (void)umount2(point, MNT_DETACH);
        if (f)
                fclose(f);
}

void it_remove_reservations(const char *base) {
        char state[300], buf[1024];
        struct dirent *e;
        int dfd = open("/var/lib/sbxd-uids", O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd, i;
        DIR *dir;

        if (dfd < 0)
                return;
        for (i = 0; i < 500 && flock(dfd, LOCK_EX | LOCK_NB) < 0; i++)
                usleep(20000);
        fd = i < 500 ? dup(dfd) : -1;
        dir = fd >= 0 ? fdopendir(fd) : NULL;
        snprintf(state, sizeof(state), "\nstate %s/", base);
        while (dir && (e = readdir(dir)) != NULL) {
                struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
                ssize_t n;
                fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, buf, sizeof(buf) - 1);
                buf[n > 0 ? n : 0] = '\0';
                if (n > 0 && strstr(buf, state) && fcntl(fd, F_OFD_GETLK, &l) == 0 &&
                    l.l_type == F_UNLCK)
                        (void)unlinkat(dfd, e->d_name, 0);
                close(fd);
        }
        if (dir)
                closedir(dir);
        else
                fprintf(stderr, "itutil: cannot look at /var/lib/sbxd-uids\n");
        close(dfd);
}

void it_fixture_teardown(void) {
        char p[300], cmd[400];
        FILE *f;
        int pid;

        snprintf(p, sizeof(p), "%s/pids", base_dir);
        f = fopen(p, "r");
        while (f && fscanf(f, "%d", &pid) == 1) {
                int i;
                char exe[64], link[512];
                ssize_t n;
                /* Only our own daemon: check that the pid still runs sbxd. */
                snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
                n = readlink(exe, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = '\0';
                if (!strstr(link, "sbxd") && !strstr(link, "memcheck"))
                        continue;
                kill(pid, SIGTERM);
                for (i = 0; i < 200 && kill(pid, 0) == 0; i++)
                        usleep(50000);
                if (kill(pid, 0) == 0) {
                        fprintf(stderr, "itutil: daemon %d did not stop; killing it\n", pid);
                        kill(pid, SIGKILL);
                        usleep(200000);
                }
        }
        if (f)
                fclose(f);
        remove_test_cgroups();
        detach_test_mounts();
        if (getenv("SBX_KEEP_TEST_DIRS")) {
                fprintf(stderr, "itutil: kept %s\n", base_dir);
                return;
        }
        it_remove_reservations(base_dir);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
        if (system(cmd) != 0)
                fprintf(stderr, "itutil: cannot remove %s\n", base_dir);
}

static int socket_accepts(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd, r;
        if (strlen(path) >= sizeof(sa.sun_path))
                return 0;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        return r == 0;
}

/* 1 when uid can execute both sbxd and sbx-init of the build directory (a checkout in
 * /root, or in a mktemp -d directory, is out of other users' reach). */
static int build_reachable(uid_t uid, gid_t gid) {
        char a[PATH_MAX + 16], b[PATH_MAX + 16], dir[PATH_MAX];
        pid_t pid;
        int st;

        /* By absolute path: a relative one (BUILD=build) is reached from the current
         * directory, while sbxd looks for its helper by the absolute path of itself. */
        ck_assert_ptr_nonnull(realpath(it_build_dir(), dir));
        snprintf(a, sizeof(a), "%s/sbxd", dir);
        snprintf(b, sizeof(b), "%s/sbx-init", dir);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
                    setresuid(uid, uid, uid) < 0)
                        _exit(2);
                _exit(access(a, X_OK) == 0 && access(b, X_OK) == 0 ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Copies src to dst through a new file renamed over it: dst may be running (a daemon
 * started before from the same stage), which a write into it would meet with ETXTBSY. */
static void copy_exe(const char *src, const char *dst) {
        char buf[65536], tmp[PATH_MAX + 16];
        int in = open(src, O_RDONLY | O_CLOEXEC), out;
        ssize_t n;

        ck_assert_msg(in >= 0, "%s: %s", src, strerror(errno));
        snprintf(tmp, sizeof(tmp), "%s.new", dst);
        out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        ck_assert_msg(out >= 0, "%s: %s", tmp, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
        ck_assert_int_eq(n, 0);
        close(in);
        ck_assert_int_eq(fchmod(out, 0755), 0);
        close(out);
        ck_assert_msg(rename(tmp, dst) == 0, "%s: %s", dst, strerror(errno));
}

/* The sbxd to run as uid: the build's, or, when uid cannot reach the build directory,
 * copies of sbxd and sbx-init staged in the test's base directory (0755), which go with
 * it. Into bin (len bytes). */
static void daemon_binary(uid_t uid, gid_t gid, char *bin, size_t len) {
        char dir[600], src[600];
        const char *names[] = {"sbxd", "sbx-init"};
        size_t i;

        snprintf(bin, len, "%s/sbxd", it_build_dir());
        if (uid == 0 || build_reachable(uid, gid))
                return;
        snprintf(dir, sizeof(dir), "%s/stage", base_dir);
        if (mkdir(dir, 0755) < 0)
                ck_assert_int_eq(errno, EEXIST);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        for (i = 0; i < 2; i++) {
                char dst[700];
                snprintf(src, sizeof(src), "%s/%s", it_build_dir(), names[i]);
                snprintf(dst, sizeof(dst), "%s/%s", dir, names[i]);
                copy_exe(src, dst);
        }
        snprintf(bin, len, "%s/sbxd", dir);
}

/* Starts d's daemon with the extra flags, without waiting for it. */
static void spawn(struct it_daemon *d, const char *const *extra) {
        char *args[64];
        char bin[700];
        size_t n = 0;
        pid_t parent = getpid();

        daemon_binary(d->uid, d->gid, bin, sizeof(bin));
        d->pid = fork();
        ck_assert_int_ge(d->pid, 0);
        if (d->pid == 0) {
                /* Copies made in the child only: nothing to free in the test. */
                args[n++] = bin;
                args[n++] = "--socket";
                args[n++] = d->sock;
                args[n++] = "--state-dir";
                args[n++] = d->state;
                args[n++] = "--log-level";
                args[n++] = "debug";
                while (extra && *extra && n < 60)
                        args[n++] = strdup(*extra++);
                args[n] = NULL;
                int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                /* A process group of its own: Check SIGKILLs the test's group when the
                 * test ends, which on a failed test (no it_daemon_stop) would kill the
                 * daemon with its sandboxes' cgroups still there. It gets SIGTERM
                 * instead (below) and ends them; the teardown waits for it. */
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(127);
                if (fd >= 0)
                        dup2(fd, 2);
                if (d->uid != 0) {
                        if (setgroups(spawn_n_groups, spawn_groups) < 0 ||
                            setresgid(d->gid, d->gid, d->gid) < 0 ||
                            setresuid(d->uid, d->uid, d->uid) < 0)
                                _exit(126);
                        /* PDEATHSIG is cleared by the uid change; set it again. */
                        prctl(PR_SET_PDEATHSIG, SIGTERM);
                        setenv("HOME", spawn_home ? spawn_home : d->dir, 1);
                        unsetenv("XDG_RUNTIME_DIR");
                }
                if (getenv("SBX_VALGRIND") && strcmp(getenv("SBX_VALGRIND"), "1") == 0) {
                        /* `make valgrind`: the daemon too, errors and definite leaks fatal. */
                        char *vg[80] = {"valgrind",
                                        "-q",
                                        "--error-exitcode=99",
                                        "--leak-check=full",
                                        "--errors-for-leak-kinds=definite",
                                        "--child-silent-after-fork=yes"};
                        size_t k = 6, j;
                        for (j = 0; args[j] && k < 78; j++)
                                vg[k++] = args[j];
                        vg[k] = NULL;
                        execvp("valgrind", vg);
                        _exit(127);
                }
                execv(bin, args);
                _exit(127);
        }
        record_pid(d->pid);
}

void it_daemon_wait_up(struct it_daemon *d) {
        double t0 = it_now_ms();

        while (!socket_accepts(d->sock)) {
                int st;
                if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                        char cmd[700];
                        snprintf(cmd, sizeof(cmd), "cat '%s' >&2", d->log);
                        (void)!system(cmd);
                        ck_abort_msg("sbxd exited at start-up (status %d); log above", st);
                }
                ck_assert_msg(it_now_ms() - t0 < (getenv("SBX_VALGRIND") ? 60000 : 10000),
                              "sbxd did not listen in time");
                usleep(5000);
        }
}

void it_daemon_start(struct it_daemon *d, const char *const *extra) {
        it_daemon_start_as(d, 0, 0, extra);
}

void it_daemon_start_as(struct it_daemon *d, uid_t uid, gid_t gid, const char *const *extra) {
        it_daemon_spawn_as(d, uid, gid, extra);
        it_daemon_wait_up(d);
}

void it_daemon_spawn_as(struct it_daemon *d, uid_t uid, gid_t gid, const char *const *extra) {
        memset(d, 0, sizeof(*d));
        d->uid = uid;
        d->gid = gid;
        snprintf(d->dir, sizeof(d->dir), "%s/d.XXXXXX", base_dir);
        ck_assert_ptr_nonnull(mkdtemp(d->dir));
        ck_assert_int_eq(chmod(d->dir, 0755), 0);
        if (uid != 0)
                ck_assert_int_eq(chown(d->dir, uid, gid), 0);
        snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
        snprintf(d->state, sizeof(d->state), "%s/state", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/sbxd.log", d->dir);
        spawn(d, extra);
}

void it_daemon_start_home(struct it_daemon *d, uid_t uid, gid_t gid, const char *home,
                          const char *const *extra) {
        spawn_home = home;
        it_daemon_start_as(d, uid, gid, extra);
        spawn_home = NULL;
}

void it_daemon_start_groups(struct it_daemon *d, uid_t uid, gid_t gid, const gid_t *groups,
                            size_t n_groups, const char *const *extra) {
        spawn_groups = groups;
        spawn_n_groups = n_groups;
        it_daemon_start_as(d, uid, gid, extra);
        spawn_groups = NULL;
        spawn_n_groups = 0;
}

void it_daemon_restart(struct it_daemon *d, const char *const *extra) {
        spawn(d, extra);
        it_daemon_wait_up(d);
}

void it_daemon_respawn(struct it_daemon *d, const char *const *extra) {
        spawn(d, extra);
}

int it_daemon_exit_status(struct it_daemon *d) {
        int st = -1, i;

        for (i = 0; i < 300; i++) {
                if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
                }
                usleep(50000);
        }
        ck_abort_msg("sbxd (pid %d) did not exit within 15 s", (int)d->pid);
        return -1;
}

int it_daemon_stop(struct it_daemon *d) {
        int st = -1, i;
        if (d->pid <= 0)
                return -1;
        kill(d->pid, SIGTERM);
        for (i = 0; i < 400; i++) {
                if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return st;
                }
                usleep(50000);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
        d->pid = 0;
        ck_abort_msg("sbxd did not stop within 20 s of SIGTERM");
        return st;
}

void it_daemon_kill(struct it_daemon *d) {
        double t0;
        int st;
        if (d->pid <= 0)
                return;
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
        d->pid = 0;
        /* A child the daemon forked a moment before (not yet in execve) still holds its
         * listening socket: until it is gone, the socket accepts with nobody serving,
         * and a restart would be taken for up when it is not. */
        t0 = it_now_ms();
        while (socket_accepts(d->sock) && it_now_ms() - t0 < 5000)
                usleep(10000);
}

sbx_client *it_connect(struct it_daemon *d) {
        sbx_client *c = NULL;
        enum sbx_code code = sbx_connect(d->sock, "itest", &c);
        ck_assert_msg(code == SBX_OK, "connect: %s", c ? sbx_error_message(c) : "out of memory");
        return c;
}

uint32_t it_sandbox_uid_first(const struct it_daemon *d) {
        struct sbx_hello *h = NULL;
        sbx_client *c = NULL;
        enum sbx_code code = sbx_connect(d->sock, "itest", &c);
        uint32_t first;

        ck_assert_msg(code == SBX_OK, "connect: %s", c ? sbx_error_message(c) : "out of memory");
        ck_assert_int_eq(sbx_hello(c, &h), SBX_OK);
        ck_assert_msg(h->sandbox_uid_count == SBX_UID_COUNT && h->uid_reservation,
                      "the Hello names %u sandbox uids", h->sandbox_uid_count);
        first = h->sandbox_uid_first;
        sbx_hello_free(h);
        sbx_close(c);
        return first;
}

static char *read_all(int fd) {
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        ssize_t n;
        while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
                len += (size_t)n;
                if (cap - len < 2) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                }
        }
        buf[len] = '\0';
        return buf;
}

int it_sbx(struct it_daemon *d, const char *stdin_data, size_t stdin_len, char **out, char **err,
           const char *const *args) {
        int in[2], o[2], e[2], st;
        char *argv[64];
        char bin[512];
        size_t n = 0;
        pid_t pid;
        char *ob, *eb;

        snprintf(bin, sizeof(bin), "%s/sbx", it_build_dir());
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(o, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(e, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                argv[n++] = bin;
                while (args && *args && n < 62)
                        argv[n++] = strdup(*args++);
                argv[n] = NULL;
                dup2(in[0], 0);
                dup2(o[1], 1);
                dup2(e[1], 2);
                setenv("SBX_SOCKET", d->sock, 1);
                execv(bin, argv);
                _exit(127);
        }
        close(in[0]);
        close(o[1]);
        close(e[1]);
        /* Small inputs only (the pipe buffer): tests feed a few KiB at most. An sbx that
         * exits without reading them (a refused argument) must not kill the test with
         * SIGPIPE. */
        if (stdin_data && stdin_len) {
                struct sigaction ign = {.sa_handler = SIG_IGN}, old;
                sigaction(SIGPIPE, &ign, &old);
                (void)!write(in[1], stdin_data, stdin_len);
                sigaction(SIGPIPE, &old, NULL);
        }
        close(in[1]);
        ob = read_all(o[0]);
        eb = read_all(e[0]);
        close(o[0]);
        close(e[0]);
        waitpid(pid, &st, 0);
        if (out)
                *out = ob;
        else
                free(ob);
        if (err)
                *err = eb;
        else
                free(eb);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

int it_raw_connect(struct it_daemon *d) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_uint_lt(strlen(d->sock), sizeof(sa.sun_path));
        memcpy(sa.sun_path, d->sock, strlen(d->sock) + 1);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

void it_raw_write(int fd, const void *p, size_t n) {
        const uint8_t *b = p;
        while (n > 0) {
                ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
                ck_assert_msg(w > 0, "send: %s", strerror(errno));
                b += w;
                n -= (size_t)w;
        }
}

void it_raw_send(int fd, Sbx__V1__Request *req) {
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(frame_pack(&req->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &len), 0);
        it_raw_write(fd, buf, len);
        free(buf);
}

Sbx__V1__Response *it_raw_read(int fd, struct frame_reader *r, int timeout_ms) {
        for (;;) {
                const uint8_t *p;
                size_t len, room;
                uint8_t *dst;
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                ssize_t n;
                int k = frame_reader_next(r, &p, &len);
                ck_assert_int_ge(k, 0);
                if (k == 1) {
                        Sbx__V1__Response *resp = sbx__v1__response__unpack(NULL, len, p);
                        ck_assert_ptr_nonnull(resp);
                        return resp;
                }
                ck_assert_msg(poll(&pfd, 1, timeout_ms) == 1, "no response within %d ms",
                              timeout_ms);
                ck_assert_int_eq(frame_reader_prepare(r, &dst, &room), 0);
                n = read(fd, dst, room);
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return NULL;
                ck_assert_int_gt(n, 0);
                frame_reader_commit(r, (size_t)n);
        }
}

int it_db_int(const struct it_daemon *d, const char *sql) {
        char path[700];
        sqlite3 *db;
        sqlite3_stmt *s;
        int n = -1;
        snprintf(path, sizeof(path), "%s/sbxd.db", d->state);
        ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql,
                      sqlite3_errmsg(db));
        if (sqlite3_step(s) == SQLITE_ROW)
                n = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
        sqlite3_close(db);
        return n;
}

int it_db_ok(const struct it_daemon *d) {
        return it_db_int(d, "SELECT count(*) FROM pragma_integrity_check "
                            "WHERE integrity_check = 'ok'") == 1;
}

/* Walks /proc for processes whose command line contains needle and starts with start
 * (NULL: anything): their count, the last one's pid in *ret_pid. */
static int scan_procs(const char *needle, const char *start, pid_t *ret_pid) {
        DIR *dir = opendir("/proc");
        struct dirent *de;
        int count = 0;
        while (dir && (de = readdir(dir))) {
                char p[300], buf[4096];
                ssize_t n, i;
                int fd;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
                fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                for (i = 0; i < n; i++)
                        if (buf[i] == '\0')
                                buf[i] = ' ';
                buf[n] = '\0';
                if (strstr(buf, needle) && (!start || strncmp(buf, start, strlen(start)) == 0)) {
                        count++;
                        if (ret_pid)
                                *ret_pid = (pid_t)atoi(de->d_name);
                }
        }
        if (dir)
                closedir(dir);
        return count;
}

int it_loops_below(const char *dir, char **files, int max) {
        char path[600], back[PATH_MAX + 32];
        DIR *d = opendir("/sys/block");
        struct dirent *de;
        int n = 0;

        while (d && (de = readdir(d))) {
                FILE *f;
                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
                f = fopen(path, "r");
                if (!f)
                        continue;
                if (fgets(back, sizeof(back), f) && strncmp(back, dir, strlen(dir)) == 0 &&
                    back[strlen(dir)] == '/') {
                        back[strcspn(back, "\n")] = '\0';
                        if (n < max)
                                files[n] = strdup(back);
                        n++;
                }
                fclose(f);
        }
        if (d)
                closedir(d);
        return n;
}

int it_count_procs(const char *needle) {
        return scan_procs(needle, NULL, NULL);
}

int it_open_fds(pid_t pid) {
        char path[64];
        struct dirent *de;
        DIR *dir;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        dir = opendir(path);
        while (dir && (de = readdir(dir)))
                n += de->d_name[0] != '.';
        if (dir)
                closedir(dir);
        return n;
}

long it_proc_status(pid_t pid, const char *field) {
        char path[64], line[256];
        size_t fl = strlen(field);
        long v = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
                        v = strtol(line + fl + 1, NULL, 10);
                        break;
                }
        if (f)
                fclose(f);
        return v;
}

pid_t it_find_proc(const char *start, const char *needle) {
        pid_t pid = -1;
        return scan_procs(needle, start, &pid) > 0 ? pid : -1;
}

char *it_create(sbx_client *c, const char *id) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code;
        char *r;
        sbx_create_opts_init(&o);
        o.id = id;
        code = sbx_create(c, &o, &sb);
        ck_assert_msg(code == SBX_OK, "create: %s: %s", sbx_code_name(code), sbx_error_message(c));
        r = strdup(sb->id);
        sbx_sandbox_free(sb);
        return r;
}

struct sbx_result *it_exec(sbx_client *c, const char *id, uint64_t timeout_ms,
                           const char *const *argv) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;
        size_t n = 0;
        while (argv[n])
                n++;
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = n;
        o.timeout_ms = timeout_ms;
        code = sbx_exec(c, id, &o, &r);
        ck_assert_msg(code == SBX_OK, "exec %s: %s: %s", argv[0], sbx_code_name(code),
                      sbx_error_message(c));
        return r;
}

struct sbx_result *it_sh(sbx_client *c, const char *id, uint64_t timeout_ms, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;
        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = timeout_ms;
        code = sbx_exec(c, id, &o, &r);
        ck_assert_msg(code == SBX_OK, "sh %s: %s: %s", shell, sbx_code_name(code),
                      sbx_error_message(c));
        return r;
}

int it_log_count(const struct it_daemon *d, const char *needle) {
        char line[2048];
        FILE *f = fopen(d->log, "re");
        int n = 0;

        while (f && fgets(line, sizeof(line), f))
                n += strstr(line, needle) != NULL;
        if (f)
                fclose(f);
        return n;
}

int it_wait_log(const struct it_daemon *d, const char *needle, int want) {
        double t0 = it_now_ms();

        while (it_log_count(d, needle) < want && it_now_ms() - t0 < 15000)
                usleep(20000);
        return it_log_count(d, needle);
}

/* The line rpc.c logs as it takes up a request of kind body ("... body=N" and the end of
 * the line, so that body 1 is not counted as 12). */
static void request_needle(int body, char *out, size_t len) {
        snprintf(out, len, " body=%d\n", body);
}

int it_requests_taken(const struct it_daemon *d, int body) {
        char needle[32];

        request_needle(body, needle, sizeof(needle));
        return it_log_count(d, needle);
}

void it_wait_requests(const struct it_daemon *d, int body, int want) {
        char needle[32];
        int n;

        request_needle(body, needle, sizeof(needle));
        n = it_wait_log(d, needle, want);
        ck_assert_msg(n >= want, "sbxd took %d requests of kind %d, not %d, in 15 s", n, body,
                      want);
}

const char *it_sleeper(char *out, size_t len, int seconds) {
        snprintf(out, len, "sleep %d.%d", seconds, (int)getpid());
        return out;
}

int it_wait_procs(const char *needle, int want, int ms) {
        double t0 = it_now_ms();
        int n;

        while (((n = it_count_procs(needle)) < want || (want == 0 && n > 0)) &&
               it_now_ms() - t0 < ms)
                usleep(20000);
        return n;
}

void it_wait_commands(sbx_client *c, const char *id, uint32_t running, uint32_t queued) {
        double t0 = it_now_ms();

        for (;;) {
                struct sbx_sandbox *sb = NULL;
                int done;
                ck_assert_int_eq(sbx_get(c, id, &sb), SBX_OK);
                done = sb->running_commands == running && sb->queued_commands == queued;
                ck_assert_msg(done || it_now_ms() - t0 < 30000,
                              "%s: %u running, %u waiting after 30 s (not %u, %u)", id,
                              sb->running_commands, sb->queued_commands, running, queued);
                sbx_sandbox_free(sb);
                if (done)
                        return;
                usleep(20000);
        }
}

void it_private_mounts(void) {
        ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
        ck_assert_msg(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make / private: %s",
                      strerror(errno));
}

int it_reapply(pid_t pid, const char *kind, const char *path) {
        char exe[PATH_MAX], ns[64];
        pid_t kid;
        int st = -1;

        snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
        snprintf(exe, sizeof(exe), "%s/sbx-init", it_build_dir());
        kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0) {
                char *argv[] = {"sbx-init", "--reapply", (char *)(uintptr_t)kind,
                                (char *)(uintptr_t)path, NULL};
                int efd = open(exe, O_PATH | O_CLOEXEC), fd = open(ns, O_RDONLY | O_CLOEXEC);
                if (efd < 0 || fd < 0 || setns(fd, CLONE_NEWNS) < 0)
                        _exit(90);
                syscall(SYS_execveat, efd, "", argv, environ, AT_EMPTY_PATH);
                _exit(91);
        }
        ck_assert_int_eq(waitpid(kid, &st, 0), kid);
        return st;
}
