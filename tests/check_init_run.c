/* check_init_run.c: black-box tests of the real sbx-init binary over its channel.
 *
 * Each test plays the daemon: it creates the SOCK_SEQPACKET socketpair, spawns
 * $SBX_BUILD_DIR/sbx-init (default build/, run from the repository root) with the
 * channel on fd 3, sends Setup, expects Ready, starts commands with pipes it made and
 * checks what they print and how they end. A sandbox dies with its channel, so a test
 * that fails half-way leaves no process behind (its forked test process exits and
 * closes the channel); the temporary directories and cgroups live in an unchecked
 * fixture that removes them whatever happened. Needs root (root mode uses uid 65534,
 * the rootless test drops to it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init.pb-c.h"
#include "initmsg.h"
#include "sbx_limits.h"
#include "testutil.h"

#define NOBODY         65534
#define HOSTNAME       "sbx-test-host"
#define MSG_TIMEOUT_MS 10000
#define OUT_BYTES      65536

static char base_dir[128];   /* Temporary, removed by the fixture. */
static char cg_v1[PATH_MAX]; /* A pids cgroup (v1) the cgroup test may create. */
static char cg_v2[PATH_MAX]; /* Its v2 sibling under the unified hierarchy. */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        if (flag == FTW_DP)
                return rmdir(path) < 0 ? 0 : 0;
        unlink(path);
        return 0;
}

static void fixture_setup(void) {
        snprintf(base_dir, sizeof(base_dir), "/tmp/sbx-init-test.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(base_dir));
        /* The rootless test's init runs as nobody and must reach its workspace. */
        ck_assert_int_eq(chmod(base_dir, 0755), 0);
        snprintf(cg_v1, sizeof(cg_v1), "/sys/fs/cgroup/pids/sbx-init-test-%d", (int)getpid());
        snprintf(cg_v2, sizeof(cg_v2), "/sys/fs/cgroup/unified/sbx-init-test-%d", (int)getpid());
}

static void fixture_teardown(void) {
        char late[sizeof(base_dir) + 8];

        /* test_prebuilt_spare's mount, if it failed half-way. */
        snprintf(late, sizeof(late), "%s/late", base_dir);
        (void)umount2(late, MNT_DETACH);
        nftw(base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        rmdir(cg_v1);
        rmdir(cg_v2);
}

/* ---- playing the daemon ---------------------------------------------------------- */

/* protobuf-c's message structs take non-const pointers for what they only read. */
static void *unconst(const void *p) {
        return (void *)(uintptr_t)p;
}

struct box {
        pid_t stage0;
        int chan;
        pid_t init_pid; /* From Ready.init_host_pid. */
        bool sockets;   /* Ready.sockets: it answers MakeSocket */
        char ws[PATH_MAX];
        char pidns[64]; /* readlink of /proc/<init_pid>/ns/pid. */
};

struct setup_opts {
        const char *root_dir; /* NULL: "/". */
        bool rootless;
        bool network_full;
        const char *const *writable;
        const char *const *denied_read;
        const char *const *denied_write;
        const char *const *protected_paths;
        /* A spare built ahead: a base Setup first (prebuild), Built awaited, then between
         * (may be NULL) runs, then the Setup above. */
        bool prebuild;
        void (*between)(struct box *b);
        /* The writable paths' identities (stat now) go with Setup, as the daemon's. */
        bool objects;
        const char *sandboxes_dir; /* NULL: none */
        /* Setup.ptys (with has_ptys) and Setup.warm. */
        bool has_ptys;
        unsigned ptys;
        bool warm;
        /* How the writable paths are bound (Setup.writable_binds; n_binds 0: none). */
        Sbx__Init__V1__WritableBind **binds;
        size_t n_binds;
};

static const char *init_binary(void) {
        static char path[PATH_MAX];
        const char *dir = getenv("SBX_BUILD_DIR");

        snprintf(path, sizeof(path), "%s/sbx-init", dir && dir[0] ? dir : "build");
        return path;
}

static size_t count(const char *const *v) {
        size_t n = 0;

        while (v && v[n])
                n++;
        return n;
}

/* Receives one message within timeout_ms; fails the test otherwise. */
static Sbx__Init__V1__FromInit *recv_msg(int chan, int timeout_ms) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        struct pollfd pfd = {.fd = chan, .events = POLLIN};
        Sbx__Init__V1__FromInit *m;
        size_t len = 0, nfds = 0;
        int fds[SBX_INIT_MAX_FDS], r;

        r = poll(&pfd, 1, timeout_ms);
        ck_assert_msg(r == 1, "no message from sbx-init within %d ms", timeout_ms);
        r = initmsg_recv(chan, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len, &nfds);
        ck_assert_msg(r == 1, "initmsg_recv: %d", r);
        ck_assert_uint_eq(nfds, 0);
        m = sbx__init__v1__from_init__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(m);
        return m;
}

static void send_to_init(int chan, Sbx__Init__V1__ToInit *m, const int *fds, size_t nfds) {
        ck_assert_int_eq(initmsg_send(chan, &m->base, fds, nfds), 0);
}

/* Spawns sbx-init (as nobody when as_nobody) with the channel on fd 3. */
static void box_spawn(struct box *b, bool as_nobody) {
        int sv[2];
        pid_t pid;

        memset(b, 0, sizeof(*b));
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(sv[1], 3) < 0)
                        _exit(120);
                if (as_nobody &&
                    (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
                        _exit(121);
                execl(init_binary(), "sbx-init", "--fd", "3", (char *)NULL);
                _exit(122);
        }
        close(sv[1]);
        b->stage0 = pid;
        b->chan = sv[0];
}

/* Creates a fresh workspace directory for b under base_dir. */
static void box_workspace(struct box *b, uid_t owner) {
        static int n;

        snprintf(b->ws, sizeof(b->ws), "%s/ws%d-%d", base_dir, (int)getpid(), n++);
        ck_assert_int_eq(mkdir(b->ws, 0755), 0);
        ck_assert_int_eq(chown(b->ws, owner, owner), 0);
}

/* The fields of Setup a spare's base is built from (init.proto Setup.prebuild). */
static void setup_base(Sbx__Init__V1__Setup *s, const struct setup_opts *o, bool network_full) {
        s->root_dir = unconst(o->root_dir ? o->root_dir : "/");
        s->sandboxes_dir = unconst(o->sandboxes_dir);
        s->has_network_none = 1;
        s->network_none = !network_full;
        s->has_tmp_bytes = 1;
        s->tmp_bytes = 16 * 1024 * 1024;
        s->has_rootless = 1;
        s->rootless = o->rootless;
        if (o->rootless) {
                s->has_outer_uid = s->has_outer_gid = 1;
                s->outer_uid = s->outer_gid = NOBODY;
        }
}

/* A spare's first steps: the base Setup (of a network-isolated sandbox), then Built. */
static void box_prebuild(struct box *b, const struct setup_opts *o) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Setup s = SBX__INIT__V1__SETUP__INIT;
        Sbx__Init__V1__FromInit *r;

        s.sandbox_id = (char *)"~spare-test";
        setup_base(&s, o, false);
        s.has_prebuild = s.prebuild = 1;
        s.n_writable_binds = o->n_binds;
        s.writable_binds = o->binds;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_SETUP;
        m.setup = &s;
        send_to_init(b->chan, &m, NULL, 0);
        r = recv_msg(b->chan, MSG_TIMEOUT_MS);
        ck_assert_msg(r->body_case == SBX__INIT__V1__FROM_INIT__BODY_BUILT, "not Built: %s",
                      r->body_case == SBX__INIT__V1__FROM_INIT__BODY_READY && r->ready->error
                              ? r->ready->error
                              : "?");
        sbx__init__v1__from_init__free_unpacked(r, NULL);
}

/* Sends Setup and returns Ready (the caller frees it). */
static Sbx__Init__V1__FromInit *box_setup_raw(struct box *b, const struct setup_opts *o) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Setup s = SBX__INIT__V1__SETUP__INIT;
        Sbx__Init__V1__HostObject objs[8], *obj_ptrs[8];
        Sbx__Init__V1__FromInit *r;

        if (o->prebuild)
                box_prebuild(b, o);
        if (o->between)
                o->between(b);
        s.sandbox_id = (char *)"test";
        setup_base(&s, o, o->network_full);
        s.workspace_dir = b->ws;
        s.has_run_uid = s.has_run_gid = 1;
        s.run_uid = s.run_gid = o->rootless ? 0 : NOBODY;
        s.hostname = (char *)HOSTNAME;
        s.n_writable_paths = count(o->writable);
        s.writable_paths = unconst(o->writable);
        s.n_denied_read_paths = count(o->denied_read);
        s.denied_read_paths = unconst(o->denied_read);
        s.n_denied_write_paths = count(o->denied_write);
        s.denied_write_paths = unconst(o->denied_write);
        s.n_protected_paths = count(o->protected_paths);
        s.protected_paths = unconst(o->protected_paths);
        s.has_ptys = o->has_ptys;
        s.ptys = o->ptys;
        s.has_warm = s.warm = o->warm;
        for (size_t i = 0; o->objects && i < s.n_writable_paths && i < 8; i++) {
                struct stat st;
                ck_assert_int_eq(stat(s.writable_paths[i], &st), 0);
                sbx__init__v1__host_object__init(&objs[i]);
                objs[i].has_dev = objs[i].has_ino = 1;
                objs[i].dev = st.st_dev;
                objs[i].ino = st.st_ino;
                obj_ptrs[i] = &objs[i];
                s.n_writable_objects = i + 1;
                s.writable_objects = obj_ptrs;
        }
        s.n_writable_binds = o->n_binds;
        s.writable_binds = o->binds;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_SETUP;
        m.setup = &s;
        send_to_init(b->chan, &m, NULL, 0);
        r = recv_msg(b->chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_READY);
        return r;
}

/* Spawns and sets up a sandbox, asserting Ready ok. */
static void box_open(struct box *b, const struct setup_opts *o) {
        static const struct setup_opts defaults;
        Sbx__Init__V1__FromInit *r;
        char link[64];
        ssize_t n;

        if (!o)
                o = &defaults;
        box_spawn(b, o->rootless);
        box_workspace(b, o->rootless ? NOBODY : NOBODY);
        r = box_setup_raw(b, o);
        ck_assert_msg(r->ready->ok, "Ready not ok: %s (errno %d)",
                      r->ready->error ? r->ready->error : "?", r->ready->error_errno);
        ck_assert_msg(r->ready->has_init_host_pid && r->ready->init_host_pid > 1,
                      "Ready without init_host_pid");
        b->init_pid = r->ready->init_host_pid;
        b->sockets = r->ready->has_sockets && r->ready->sockets;
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        snprintf(link, sizeof(link), "/proc/%d/ns/pid", (int)b->init_pid);
        n = readlink(link, b->pidns, sizeof(b->pidns) - 1);
        ck_assert_int_gt(n, 0);
        b->pidns[n] = '\0';
}

/* Waits up to timeout_ms for stage 0 to exit; returns its wait status or -1. */
static int wait_stage0(struct box *b, int timeout_ms) {
        int status, waited;

        for (waited = 0; waited <= timeout_ms; waited += 10) {
                pid_t r = waitpid(b->stage0, &status, WNOHANG);
                if (r == b->stage0)
                        return status;
                usleep(10 * 1000);
        }
        return -1;
}

/* Closes the channel and reaps stage 0 (which must exit on its own). */
static void box_close(struct box *b) {
        int status;

        close(b->chan);
        status = wait_stage0(b, 5000);
        if (status == -1) {
                kill(b->stage0, SIGKILL);
                waitpid(b->stage0, &status, 0);
                ck_abort_msg("stage 0 did not exit after the channel closed");
        }
}

/* ---- commands -------------------------------------------------------------------- */

struct cmd {
        uint64_t id;
        int out, err; /* Our read ends. */
        bool started;
        int32_t pid;
        int start_errno;
        char start_error[512];
};

struct result {
        bool started;
        int start_errno;
        char start_error[512];
        int status;
        char out[OUT_BYTES];
        char err[OUT_BYTES];
        Sbx__Init__V1__Exited exited;
};

static const char *test_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C",
                                 NULL};

/* Start asks for Started (ack); the daemon's way, without, is test_start_without_ack's. */
static bool start_ack = true;

/* Sends Start for argv (stdin gets stdin_data then EOF) and waits for Started or
 * StartFailed (without start_ack: waits for nothing, c->started stays false). extra_fds
 * are appended as cgroup fds. */
static void cmd_start(struct box *b, struct cmd *c, uint64_t id, const char *const *argv,
                      const char *cwd, const char *stdin_data, const int *cg_fds, size_t n_cg,
                      bool v2) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Start s = SBX__INIT__V1__START__INIT;
        ProtobufCBinaryData av[32], ev[8];
        Sbx__Init__V1__FromInit *r;
        int in[2], out[2], err[2], fds[3 + 4];
        size_t i;

        memset(c, 0, sizeof(*c));
        c->id = id;
        ck_assert_uint_le(count(argv), 32);
        ck_assert_uint_le(n_cg, 4);
        for (i = 0; argv[i]; i++)
                av[i] = (ProtobufCBinaryData){strlen(argv[i]), unconst(argv[i])};
        for (i = 0; test_env[i]; i++)
                ev[i] = (ProtobufCBinaryData){strlen(test_env[i]), unconst(test_env[i])};
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
        if (stdin_data)
                ck_assert_int_eq(write(in[1], stdin_data, strlen(stdin_data)),
                                 (ssize_t)strlen(stdin_data));
        close(in[1]);
        s.has_command_id = 1;
        s.command_id = id;
        s.n_argv = count(argv);
        s.argv = av;
        s.n_envp = count(test_env);
        s.envp = ev;
        if (cwd) {
                s.has_cwd = 1;
                s.cwd = (ProtobufCBinaryData){strlen(cwd), unconst(cwd)};
        }
        s.has_n_cgroup_fds = 1;
        s.n_cgroup_fds = (uint32_t)n_cg;
        s.has_cgroup_v2 = 1;
        s.cgroup_v2 = v2;
        s.has_ack = 1;
        s.ack = start_ack;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_START;
        m.start = &s;
        fds[0] = in[0];
        fds[1] = out[1];
        fds[2] = err[1];
        for (i = 0; i < n_cg; i++)
                fds[3 + i] = cg_fds[i];
        send_to_init(b->chan, &m, fds, 3 + n_cg);
        close(in[0]);
        close(out[1]);
        close(err[1]);
        c->out = out[0];
        c->err = err[0];
        if (!start_ack)
                return;

        r = recv_msg(b->chan, MSG_TIMEOUT_MS);
        if (r->body_case == SBX__INIT__V1__FROM_INIT__BODY_STARTED) {
                ck_assert_uint_eq(r->started->command_id, id);
                ck_assert(r->started->has_pid && r->started->pid > 1);
                c->started = true;
                c->pid = r->started->pid;
        } else {
                ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_START_FAILED);
                ck_assert_uint_eq(r->start_failed->command_id, id);
                c->start_errno = r->start_failed->error_errno;
                snprintf(c->start_error, sizeof(c->start_error), "%s",
                         r->start_failed->error ? r->start_failed->error : "");
        }
        sbx__init__v1__from_init__free_unpacked(r, NULL);
}

/* Reads fd to end of stream into buf (NUL-terminated), within timeout_ms. */
static void read_all(int fd, char *buf, size_t cap, int timeout_ms) {
        size_t len = 0;

        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                ssize_t n;
                ck_assert_msg(poll(&pfd, 1, timeout_ms) == 1, "no end of output within %d ms",
                              timeout_ms);
                n = read(fd, buf + len, cap - 1 - len);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                len += (size_t)n;
                ck_assert_uint_lt(len, cap - 1);
        }
        buf[len] = '\0';
}

/* Waits for the Exited of c; returns the wait status and fills *ret_exited. */
static int cmd_wait(struct box *b, struct cmd *c, int timeout_ms,
                    Sbx__Init__V1__Exited *ret_exited) {
        Sbx__Init__V1__FromInit *r = recv_msg(b->chan, timeout_ms);
        int status;

        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_EXITED);
        ck_assert_uint_eq(r->exited->command_id, c->id);
        ck_assert(r->exited->has_wait_status);
        status = r->exited->wait_status;
        if (ret_exited)
                *ret_exited = *r->exited;
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        return status;
}

/* Runs argv to completion: output to end of stream, then Exited. */
static void run(struct box *b, uint64_t id, const char *const *argv, const char *cwd,
                const char *stdin_data, struct result *res) {
        struct cmd c;

        memset(res, 0, sizeof(*res));
        cmd_start(b, &c, id, argv, cwd, stdin_data, NULL, 0, false);
        res->started = c.started;
        res->start_errno = c.start_errno;
        memcpy(res->start_error, c.start_error, sizeof(res->start_error));
        if (c.started) {
                read_all(c.out, res->out, sizeof(res->out), 30000);
                read_all(c.err, res->err, sizeof(res->err), 30000);
                res->status = cmd_wait(b, &c, 30000, &res->exited);
        }
        close(c.out);
        close(c.err);
}

/* Runs argv and asserts it exited 0; returns its stdout in res. */
static void run_ok(struct box *b, uint64_t id, const char *const *argv, struct result *res) {
        run(b, id, argv, NULL, NULL, res);
        ck_assert_msg(res->started, "%s: start failed: %s", argv[0], res->start_error);
        ck_assert_msg(WIFEXITED(res->status) && WEXITSTATUS(res->status) == 0,
                      "%s %s: status 0x%x, stderr: %s", argv[0], argv[1] ? argv[1] : "",
                      res->status, res->err);
}

/* Runs `sh -c script` and returns its exit code (-1 when signaled). */
static int sh(struct box *b, uint64_t id, const char *script, struct result *res) {
        const char *argv[] = {"/bin/sh", "-c", script, NULL};

        run(b, id, argv, NULL, NULL, res);
        ck_assert_msg(res->started, "sh: start failed: %s", res->start_error);
        return WIFEXITED(res->status) ? WEXITSTATUS(res->status) : -1;
}

/* Processes on the host whose PID namespace is ns (a readlink of /proc/X/ns/pid). */
static int count_ns_procs(const char *ns) {
        struct dirent *de;
        DIR *d = opendir("/proc");
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d))) {
                char link[300], target[64];
                ssize_t len;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(link, sizeof(link), "/proc/%s/ns/pid", de->d_name);
                len = readlink(link, target, sizeof(target) - 1);
                if (len <= 0)
                        continue;
                target[len] = '\0';
                if (strcmp(target, ns) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

static void read_file(const char *path, char *buf, size_t cap) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        n = read(fd, buf, cap - 1);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        close(fd);
}

static void write_file(const char *path, const char *data) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
        close(fd);
}

/* ---- tests ----------------------------------------------------------------------- */

static struct result res; /* Large: kept off the stack. */

START_TEST(test_echo_and_stdin) {
        const char *echo[] = {"echo", "hi", NULL};
        const char *cat[] = {"cat", NULL};
        const char *err[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
        struct box b;

        box_open(&b, NULL);
        ck_assert_int_ne(b.init_pid, getpid());
        run_ok(&b, 1, echo, &res);
        ck_assert_str_eq(res.out, "hi\n");
        ck_assert_str_eq(res.err, "");
        ck_assert(res.exited.has_utime_usec && res.exited.has_stime_usec);
        ck_assert(res.exited.has_maxrss_kib && res.exited.maxrss_kib > 0);
        run_ok(&b, 2, cat, &res);
        ck_assert_str_eq(res.out, "");
        run(&b, 3, cat, NULL, "from stdin\n", &res);
        ck_assert_str_eq(res.out, "from stdin\n");
        run(&b, 4, err, NULL, NULL, &res);
        ck_assert(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 3);
        ck_assert_str_eq(res.out, "");
        ck_assert_str_eq(res.err, "oops\n");
        box_close(&b);
}
END_TEST

START_TEST(test_start_failures) {
        const char *missing[] = {"/nonexistent", NULL};
        const char *missing_path[] = {"sbx-no-such-program", NULL};
        const char *not_exec[] = {"/etc/passwd", NULL};
        const char *ok[] = {"true", NULL};
        struct box b;

        box_open(&b, NULL);
        run(&b, 1, missing, NULL, NULL, &res);
        ck_assert(!res.started);
        ck_assert_int_eq(res.start_errno, ENOENT);
        ck_assert_msg(strstr(res.start_error, "execve /nonexistent") &&
                              strstr(res.start_error, "No such file"),
                      "error: %s", res.start_error);
        run(&b, 2, missing_path, NULL, NULL, &res);
        ck_assert(!res.started);
        ck_assert_int_eq(res.start_errno, ENOENT);
        ck_assert_msg(strstr(res.start_error, "sbx-no-such-program"), "error: %s", res.start_error);
        run(&b, 3, not_exec, NULL, NULL, &res);
        ck_assert(!res.started);
        ck_assert_int_eq(res.start_errno, EACCES);
        run(&b, 4, ok, "/sbx/no/such/dir", NULL, &res);
        ck_assert(!res.started);
        ck_assert_int_eq(res.start_errno, ENOENT);
        ck_assert_msg(strstr(res.start_error, "chdir /sbx/no/such/dir"), "error: %s",
                      res.start_error);
        /* /root is 0700: the command's user may not enter it, even though PID 1 could. */
        run(&b, 5, ok, "/root", NULL, &res);
        ck_assert(!res.started);
        ck_assert_int_eq(res.start_errno, EACCES);
        /* The same id again after a failure is fine, and the sandbox still works. */
        run_ok(&b, 1, ok, &res);
        box_close(&b);
}
END_TEST

START_TEST(test_identity_and_hostname) {
        const char *idu[] = {"id", "-u", NULL};
        const char *idg[] = {"id", "-G", NULL};
        const char *host[] = {"hostname", NULL};
        const char *status[] = {"grep", "-E",
                                "^(Sig(Blk|Ign)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):",
                                "/proc/self/status", NULL};
        const char *fds[] = {"ls", "/proc/self/fd", NULL};
        const char *stat[] = {"cat", "/proc/self/stat", NULL};
        const char *limits[] = {"grep", "core file size", "/proc/self/limits", NULL};
        int pid, ppid, pgrp, session, tty;
        struct box b;

        box_open(&b, NULL);
        run_ok(&b, 1, idu, &res);
        ck_assert_str_eq(res.out, "65534\n");
        run_ok(&b, 2, idg, &res);
        ck_assert_str_eq(res.out, "65534\n"); /* No supplementary groups left. */
        run_ok(&b, 3, host, &res);
        ck_assert_str_eq(res.out, HOSTNAME "\n");
        run_ok(&b, 4, status, &res);
        ck_assert_str_eq(res.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
                                  "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
                                  "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                                  "CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n");
        /* Only 0, 1, 2 and ls's own directory descriptor: nothing of PID 1 leaks. */
        run_ok(&b, 5, fds, &res);
        ck_assert_str_eq(res.out, "0\n1\n2\n3\n");
        /* A session and process group of its own, no controlling terminal. */
        run_ok(&b, 6, stat, &res);
        ck_assert_int_eq(
                sscanf(res.out, "%d (cat) %*c %d %d %d %d", &pid, &ppid, &pgrp, &session, &tty), 5);
        ck_assert_int_eq(ppid, 1);
        ck_assert_int_eq(pgrp, pid);
        ck_assert_int_eq(session, pid);
        ck_assert_int_eq(tty, 0);
        /* No core dumps unless asked for. */
        run_ok(&b, 7, limits, &res);
        ck_assert_msg(strstr(res.out, " 0 ") && strstr(res.out, "bytes"), "%s", res.out);
        box_close(&b);
}
END_TEST

START_TEST(test_filesystem_view) {
        char path[PATH_MAX + 64], buf[256];
        const char *ls_proc[] = {"ls", "/proc", NULL};
        const char *ls_dev[] = {"ls", "/dev", NULL};
        struct box b;
        char *line, *save = NULL;
        int pids = 0, has_one = 0;

        box_open(&b, NULL);
        /* The host's secrets stay unreadable, / and /etc read-only. */
        ck_assert_int_ne(sh(&b, 1, "cat /etc/shadow", &res), 0);
        ck_assert_ptr_null(strstr(res.out, "root:"));
        ck_assert_int_ne(sh(&b, 2, "echo x > /etc/sbx-init-test", &res), 0);
        ck_assert_int_ne(access("/etc/sbx-init-test", F_OK), 0);
        ck_assert_int_ne(sh(&b, 3, "touch /sbx-init-test", &res), 0);
        ck_assert_ptr_nonnull(strstr(res.err, "Read-only file system"));
        ck_assert_int_ne(sh(&b, 4, "touch /usr/sbx-init-test", &res), 0);
        /* /workspace is the host directory, read-write. */
        ck_assert_int_eq(sh(&b, 5, "echo data > /workspace/x && pwd", &res), 0);
        ck_assert_str_eq(res.out, "/workspace\n");
        snprintf(path, sizeof(path), "%s/x", b.ws);
        read_file(path, buf, sizeof(buf));
        ck_assert_str_eq(buf, "data\n");
        /* /tmp is private and writable; /run is empty; /dev is minimal. */
        ck_assert_int_eq(sh(&b, 6, "echo t > /tmp/t && cat /tmp/t && ls -A /run | wc -l", &res), 0);
        ck_assert_str_eq(res.out, "t\n0\n");
        ck_assert_int_ne(access("/tmp/t", F_OK), 0);
        run_ok(&b, 7, ls_dev, &res);
        ck_assert_str_eq(res.out, "fd\nfull\nnull\nptmx\npts\nrandom\nshm\nstderr\nstdin\nstdout\n"
                                  "tty\nurandom\nzero\n");
        ck_assert_int_eq(sh(&b, 8,
                            "echo z > /dev/null && head -c 4 /dev/zero | wc -c && "
                            "echo s > /dev/shm/s && cat /dev/shm/s",
                            &res),
                         0);
        ck_assert_str_eq(res.out, "4\ns\n");
        ck_assert_int_ne(sh(&b, 9, "touch /dev/sbx-init-test", &res), 0);
        /* /proc shows the sandbox's processes only: PID 1 and ls itself. */
        run_ok(&b, 10, ls_proc, &res);
        for (line = strtok_r(res.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (line[0] < '0' || line[0] > '9')
                        continue;
                pids++;
                if (strcmp(line, "1") == 0)
                        has_one = 1;
        }
        ck_assert(has_one);
        ck_assert_int_eq(pids, 2);
        /* A pty from the private devpts works. */
        ck_assert_int_eq(sh(&b, 11,
                            "python3 -c 'import os; m, s = os.openpty(); "
                            "print(os.ttyname(s))'",
                            &res),
                         0);
        ck_assert_str_eq(res.out, "/dev/pts/0\n");
        box_close(&b);
}
END_TEST

START_TEST(test_mount_propagation) {
        char dir[PATH_MAX], sub[PATH_MAX + 16], check[PATH_MAX + 160], inside[PATH_MAX + 80];
        const char *wp[2];
        struct setup_opts o;
        struct box b;
        int code, mounted;

        /* A host directory, made a shared mount so that mounts below it propagate to
         * every copy of it, and made writable inside the sandbox. */
        snprintf(dir, sizeof(dir), "%s/prop", base_dir);
        snprintf(sub, sizeof(sub), "%s/sub", dir);
        ck_assert_int_eq(mkdir(dir, 0777), 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        ck_assert_int_eq(mkdir(sub, 0777), 0);
        ck_assert_int_eq(chmod(sub, 0777), 0);
        ck_assert_int_eq(mount(dir, dir, "none", MS_BIND, NULL), 0);
        if (mount("none", dir, "none", MS_SHARED, NULL) < 0) {
                umount2(dir, MNT_DETACH);
                ck_abort_msg("make %s shared: %s", dir, strerror(errno));
        }
        wp[0] = dir;
        wp[1] = NULL;
        memset(&o, 0, sizeof(o));
        o.writable = wp;
        box_open(&b, &o);
        /* Mounted on the host after the sandbox started: must not appear inside. */
        mounted = mount("sbx-prop-test", sub, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k");
        snprintf(check, sizeof(check),
                 "grep -c sbx-prop-test /proc/self/mountinfo; touch %s/inside && echo ok", sub);
        code = sh(&b, 1, check, &res);
        /* Unmount before asserting, so that a failure leaves nothing mounted. */
        umount2(sub, MNT_DETACH);
        umount2(dir, MNT_DETACH);
        ck_assert_int_eq(mounted, 0);
        ck_assert_int_eq(code, 0);
        ck_assert_str_eq(res.out, "0\nok\n");
        /* The write went to the real directory, which the host's tmpfs was hiding. */
        snprintf(inside, sizeof(inside), "%s/inside", sub);
        ck_assert_int_eq(access(inside, F_OK), 0);
        box_close(&b);
}
END_TEST

/* Run twice: set up at once, and as a spare built ahead (Setup.prebuild), whose view
 * gets the same paths after its base was built. */
START_TEST(test_policy_paths) {
        char rw[PATH_MAX], ro[PATH_MAX + 16], hid[PATH_MAX + 16], hidf[PATH_MAX + 16],
                prot[PATH_MAX + 16], script[4 * PATH_MAX], buf[64];
        const char *writable[2], *denied_read[6], *denied_write[3], *protected_paths[3];
        struct setup_opts o;
        struct box b;

        /* A writable host directory, with a read-only and two hidden things inside. */
        snprintf(rw, sizeof(rw), "%s/rw%d", base_dir, _i);
        ck_assert_int_eq(mkdir(rw, 0777), 0);
        ck_assert_int_eq(chmod(rw, 0777), 0);
        snprintf(ro, sizeof(ro), "%s/ro", rw);
        ck_assert_int_eq(mkdir(ro, 0777), 0);
        ck_assert_int_eq(chmod(ro, 0777), 0);
        snprintf(hid, sizeof(hid), "%s/hidden", rw);
        ck_assert_int_eq(mkdir(hid, 0777), 0);
        snprintf(script, sizeof(script), "%s/secret", hid);
        write_file(script, "TOPSECRET\n");
        snprintf(hidf, sizeof(hidf), "%s/secret.txt", rw);
        write_file(hidf, "TOPSECRET\n");
        snprintf(prot, sizeof(prot), "%s/hooks", rw);
        ck_assert_int_eq(mkdir(prot, 0777), 0);
        ck_assert_int_eq(chmod(prot, 0777), 0);
        writable[0] = rw;
        writable[1] = NULL;
        denied_read[0] = hid;
        denied_read[1] = hidf;
        denied_read[2] = "/etc/os-release"; /* A symlink to ../usr/lib/os-release. */
        denied_read[3] = "/usr/include";
        denied_read[4] = "/sbx/no/such/path"; /* Missing: skipped. */
        denied_read[5] = NULL;
        denied_write[0] = ro;
        denied_write[1] = "/sbx/no/such/path";
        denied_write[2] = NULL;
        protected_paths[0] = prot;
        protected_paths[1] = "/workspace/.git/hooks"; /* Missing: skipped. */
        protected_paths[2] = NULL;
        memset(&o, 0, sizeof(o));
        o.writable = writable;
        o.denied_read = denied_read;
        o.denied_write = denied_write;
        o.protected_paths = protected_paths;
        o.objects = true;
        o.prebuild = _i == 1;
        box_open(&b, &o);

        snprintf(script, sizeof(script), "echo w > %s/file && cat %s/file", rw, rw);
        ck_assert_int_eq(sh(&b, 1, script, &res), 0);
        ck_assert_str_eq(res.out, "w\n");
        snprintf(script, sizeof(script), "%s/file", rw);
        read_file(script, buf, sizeof(buf));
        ck_assert_str_eq(buf, "w\n");
        /* A denial beats the permission. */
        snprintf(script, sizeof(script), "touch %s/x", ro);
        ck_assert_int_ne(sh(&b, 2, script, &res), 0);
        ck_assert_ptr_nonnull(strstr(res.err, "Read-only file system"));
        snprintf(script, sizeof(script), "touch %s/x", prot);
        ck_assert_int_ne(sh(&b, 3, script, &res), 0);
        snprintf(script, sizeof(script), "ls -A %s | wc -l; cat %s/secret", hid, hid);
        ck_assert_int_ne(sh(&b, 4, script, &res), 0);
        ck_assert_str_eq(res.out, "0\n");
        snprintf(script, sizeof(script), "cat %s; cat /etc/os-release; ls -A /usr/include | wc -l",
                 hidf);
        ck_assert_int_eq(sh(&b, 5, script, &res), 0);
        ck_assert_str_eq(res.out, "0\n");
        snprintf(script, sizeof(script), "echo leak > %s; touch %s/new", hidf, hid);
        ck_assert_int_ne(sh(&b, 6, script, &res), 0);
        read_file(hidf, buf, sizeof(buf));
        ck_assert_str_eq(buf, "TOPSECRET\n");
        box_close(&b);
}
END_TEST

START_TEST(test_network_none) {
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        char script[256];
        const char *iplo[] = {"ip", "-o", "link", "show", "lo", NULL};
        struct setup_opts o;
        struct box b, full;
        int lfd, afd;

        /* A listener on the host's loopback. */
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(lfd, 4), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
        snprintf(script, sizeof(script), "exec 3<>/dev/tcp/127.0.0.1/%d && echo connected",
                 ntohs(sa.sin_port));

        box_open(&b, NULL);
        {
                const char *argv[] = {"bash", "-c", script, NULL};
                run(&b, 1, argv, NULL, NULL, &res);
        }
        ck_assert(res.started);
        ck_assert_msg(!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0,
                      "connected to the host from network none: %s", res.out);
        ck_assert_ptr_null(strstr(res.out, "connected"));
        /* Loopback is up inside. */
        run_ok(&b, 2, iplo, &res);
        ck_assert_msg(strstr(res.out, "UP"), "lo: %s", res.out);
        box_close(&b);

        /* Control: with the host's network the same connect works. */
        memset(&o, 0, sizeof(o));
        o.network_full = true;
        box_open(&full, &o);
        {
                const char *argv[] = {"bash", "-c", script, NULL};
                run(&full, 1, argv, NULL, NULL, &res);
        }
        ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "control: %s",
                      res.err);
        ck_assert_str_eq(res.out, "connected\n");
        afd = accept(lfd, NULL, NULL);
        ck_assert_int_ge(afd, 0);
        close(afd);
        close(lfd);
        box_close(&full);
}
END_TEST

START_TEST(test_signal) {
        const char *sleep100[] = {"sleep", "100", NULL};
        struct timespec t0, t1;
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Signal sig = SBX__INIT__V1__SIGNAL__INIT;
        struct cmd c;
        struct box b;
        int status;

        box_open(&b, NULL);
        cmd_start(&b, &c, 7, sleep100, NULL, NULL, NULL, 0, false);
        ck_assert(c.started);
        /* Unknown ids are ignored. */
        sig.has_command_id = sig.has_signal = 1;
        sig.command_id = 12345;
        sig.signal = SIGKILL;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_SIGNAL;
        m.signal = &sig;
        send_to_init(b.chan, &m, NULL, 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        sig.command_id = 7;
        sig.has_cont = 1;
        sig.cont = 1;
        send_to_init(b.chan, &m, NULL, 0);
        status = cmd_wait(&b, &c, 2000, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ck_assert_int_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000,
                         2000);
        close(c.out);
        close(c.err);
        /* Signalling it again, now reaped, is ignored; the sandbox goes on. */
        send_to_init(b.chan, &m, NULL, 0);
        {
                const char *echo[] = {"echo", "still", NULL};
                run_ok(&b, 8, echo, &res);
                ck_assert_str_eq(res.out, "still\n");
        }
        box_close(&b);
}
END_TEST

/* The daemon's way: no Started. A Signal sent right after the Start finds the command
 * (init handles the Start to its end first), the next message is its Exited; a failed
 * start still answers StartFailed. */
START_TEST(test_start_without_ack) {
        const char *sleep100[] = {"sleep", "100", NULL};
        const char *missing[] = {"/nonexistent", NULL};
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Signal sig = SBX__INIT__V1__SIGNAL__INIT;
        Sbx__Init__V1__FromInit *r;
        struct cmd c;
        struct box b;
        int status;

        box_open(&b, NULL);
        start_ack = false;
        cmd_start(&b, &c, 9, sleep100, NULL, NULL, NULL, 0, false);
        sig.has_command_id = sig.has_signal = sig.has_cont = 1;
        sig.command_id = 9;
        sig.signal = SIGKILL;
        sig.cont = 1;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_SIGNAL;
        m.signal = &sig;
        send_to_init(b.chan, &m, NULL, 0);
        status = cmd_wait(&b, &c, 5000, NULL); /* asserts the message is Exited */
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(c.out);
        close(c.err);
        cmd_start(&b, &c, 10, missing, NULL, NULL, NULL, 0, false);
        r = recv_msg(b.chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_START_FAILED);
        ck_assert_uint_eq(r->start_failed->command_id, 10);
        ck_assert_int_eq(r->start_failed->error_errno, ENOENT);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        close(c.out);
        close(c.err);
        start_ack = true;
        box_close(&b);
}
END_TEST

START_TEST(test_channel_close_ends_sandbox) {
        const char *bg[] = {"sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
                            NULL};
        const char *fg[] = {"sleep", "1000", NULL};
        struct cmd c;
        struct box b;
        int status, waited;

        box_open(&b, NULL);
        run_ok(&b, 1, bg, &res);
        ck_assert_int_gt(atoi(res.out), 1);
        cmd_start(&b, &c, 2, fg, NULL, NULL, NULL, 0, false);
        ck_assert(c.started);
        /* PID 1, the detached sleep and the running one. */
        ck_assert_int_eq(count_ns_procs(b.pidns), 3);

        close(b.chan);
        status = wait_stage0(&b, 5000);
        ck_assert_msg(status != -1, "stage 0 did not exit after the channel closed");
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (waited = 0; waited < 20000; waited += 10) {
                if (kill(b.init_pid, 0) < 0 && errno == ESRCH)
                        break;
                usleep(10 * 1000);
        }
        ck_assert_msg(waited < 20000, "PID 1 (host pid %d) still exists", (int)b.init_pid);
        ck_assert_int_eq(count_ns_procs(b.pidns), 0);
        /* The command's stdout reaches end of stream: every writer is gone. */
        read_all(c.out, res.out, sizeof(res.out), 2000);
        close(c.out);
        close(c.err);
}
END_TEST

START_TEST(test_init_killed) {
        struct box b, c;
        int status, waited;

        /* Killing PID 1 from outside ends stage 0 with 128 + 9. */
        box_open(&b, NULL);
        ck_assert_int_eq(kill(b.init_pid, SIGKILL), 0);
        status = wait_stage0(&b, 5000);
        ck_assert(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
        close(b.chan);
        /* And killing stage 0 takes PID 1 with it (PR_SET_PDEATHSIG). */
        box_open(&c, NULL);
        ck_assert_int_eq(kill(c.stage0, SIGKILL), 0);
        ck_assert_int_eq(waitpid(c.stage0, &status, 0), c.stage0);
        for (waited = 0; waited < 20000; waited += 10) {
                if (kill(c.init_pid, 0) < 0 && errno == ESRCH)
                        break;
                usleep(10 * 1000);
        }
        ck_assert_msg(waited < 20000, "PID 1 survived stage 0");
        ck_assert_int_eq(count_ns_procs(c.pidns), 0);
        close(c.chan);
}
END_TEST

START_TEST(test_bad_messages) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Start s = SBX__INIT__V1__START__INIT;
        Sbx__Init__V1__FromInit *r;
        ProtobufCBinaryData av[2];
        const char *echo[] = {"echo", "alive", NULL};
        uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
        int p[2];
        struct box b;

        box_open(&b, NULL);
        /* Garbage, then a Start without fds, then one with a NUL in argv. */
        ck_assert_int_eq(send(b.chan, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
        av[0] = (ProtobufCBinaryData){4, (uint8_t *)"true"};
        av[1] = (ProtobufCBinaryData){3, (uint8_t *)"a\0b"};
        s.has_command_id = 1;
        s.command_id = 10;
        s.n_argv = 1;
        s.argv = av;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_START;
        m.start = &s;
        send_to_init(b.chan, &m, NULL, 0);
        r = recv_msg(b.chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_START_FAILED);
        ck_assert_int_eq(r->start_failed->error_errno, EINVAL);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        {
                int fds[3] = {p[0], p[1], p[1]};
                s.command_id = 11;
                s.n_argv = 2;
                send_to_init(b.chan, &m, fds, 3);
        }
        close(p[0]);
        close(p[1]);
        r = recv_msg(b.chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_START_FAILED);
        ck_assert_uint_eq(r->start_failed->command_id, 11);
        ck_assert_int_eq(r->start_failed->error_errno, EINVAL);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        run_ok(&b, 12, echo, &res);
        ck_assert_str_eq(res.out, "alive\n");
        box_close(&b);
}
END_TEST

START_TEST(test_bad_setup) {
        Sbx__Init__V1__FromInit *r;
        struct setup_opts o;
        const char *wp[] = {"/sbx/no/such/writable", NULL};
        struct box b;

        memset(&o, 0, sizeof(o));
        o.writable = wp;
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        r = box_setup_raw(&b, &o);
        ck_assert(!r->ready->ok);
        ck_assert_int_eq(r->ready->error_errno, ENOENT);
        ck_assert_msg(strstr(r->ready->error, "/sbx/no/such/writable"), "%s", r->ready->error);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
        close(b.chan);

        /* One way of binding per writable path, each with its ids. */
        {
                Sbx__Init__V1__WritableBind wb[2], *wbp[2] = {&wb[0], &wb[1]};
                const char *two[] = {"/tmp", "/var/tmp", NULL};
                const char *const why[] = {"2 writable_binds for 1 writable_paths",
                                           "writable_bind 1 has no ids"};
                for (int k = 0; k < 2; k++) {
                        sbx__init__v1__writable_bind__init(&wb[0]);
                        sbx__init__v1__writable_bind__init(&wb[1]);
                        wb[0].has_uid = wb[0].has_gid = wb[1].has_uid = 1;
                        memset(&o, 0, sizeof(o));
                        o.writable = k == 0 ? wp : two;
                        o.binds = wbp;
                        o.n_binds = 2;
                        box_spawn(&b, false);
                        box_workspace(&b, NOBODY);
                        r = box_setup_raw(&b, &o);
                        ck_assert(!r->ready->ok);
                        ck_assert_int_eq(r->ready->error_errno, EINVAL);
                        ck_assert_msg(strstr(r->ready->error, why[k]), "%s", r->ready->error);
                        sbx__init__v1__from_init__free_unpacked(r, NULL);
                        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
                        close(b.chan);
                }
        }

        /* The daemon's sandboxes directory must be a clean absolute path. */
        memset(&o, 0, sizeof(o));
        o.sandboxes_dir = "var/lib/../sbxd";
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        r = box_setup_raw(&b, &o);
        ck_assert(!r->ready->ok);
        ck_assert_msg(strstr(r->ready->error, "sandboxes_dir"), "%s", r->ready->error);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
        close(b.chan);
}
END_TEST

START_TEST(test_tools) {
        struct box b;

        box_open(&b, NULL);
        ck_assert_msg(sh(&b, 1,
                         "cd /workspace && printf '#include <stdio.h>\\n"
                         "int main(void){puts(\"built\");return 0;}\\n' > t.c && "
                         "gcc -O1 -pthread -o t t.c && ./t",
                         &res) == 0,
                      "gcc: %s", res.err);
        ck_assert_str_eq(res.out, "built\n");
        ck_assert_msg(sh(&b, 2,
                         "python3 -c 'import threading, subprocess; r = [];"
                         "t = [threading.Thread(target=lambda: r.append(1)) for _ in range(8)];"
                         "[x.start() for x in t]; [x.join() for x in t];"
                         "print(len(r), subprocess.run([\"true\"]).returncode)'",
                         &res) == 0,
                      "python3: %s", res.err);
        ck_assert_str_eq(res.out, "8 0\n");
        ck_assert_msg(sh(&b, 3,
                         "cd /workspace && git init -q repo && cd repo && "
                         "git -c user.name=t -c user.email=t@t commit -q --allow-empty "
                         "-m m && git log --oneline | wc -l",
                         &res) == 0,
                      "git: %s", res.err);
        ck_assert_str_eq(res.out, "1\n");
        ck_assert_msg(sh(&b, 4,
                         "cd /workspace && printf 'all:\\n\\t@echo made\\n' > Makefile && "
                         "make -j2",
                         &res) == 0,
                      "make: %s", res.err);
        ck_assert_str_eq(res.out, "made\n");
        if (access("/usr/bin/node", X_OK) == 0) {
                ck_assert_msg(sh(&b, 5,
                                 "node -e 'require(\"fs\").readFile(\"/etc/hostname\", "
                                 "() => console.log(\"node ok\"))'",
                                 &res) == 0,
                              "node: %s", res.err);
                ck_assert_str_eq(res.out, "node ok\n");
        }
        box_close(&b);
}
END_TEST

/* Joins the command to a fresh cgroup (v1 file or v2 directory) and checks it. */
static void check_cgroup(struct box *b, uint64_t id, const char *dir, bool v2) {
        const char *cat[] = {"cat", "/proc/self/cgroup", NULL};
        char path[PATH_MAX + 32];
        const char *name = strrchr(dir, '/') + 1;
        struct cmd c;
        int fd, status;

        ck_assert_int_eq(mkdir(dir, 0755), 0);
        if (v2) {
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
                snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
                fd = open(path, O_WRONLY | O_CLOEXEC);
        }
        ck_assert_int_ge(fd, 0);
        cmd_start(b, &c, id, cat, NULL, NULL, &fd, 1, v2);
        close(fd);
        ck_assert_msg(c.started, "start: %s", c.start_error);
        read_all(c.out, res.out, sizeof(res.out), 5000);
        status = cmd_wait(b, &c, 5000, NULL);
        close(c.out);
        close(c.err);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_msg(strstr(res.out, name), "not in %s: %s", name, res.out);
        ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(test_cgroups) {
        struct box b;

        box_open(&b, NULL);
        if (access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) == 0)
                check_cgroup(&b, 1, cg_v1, false);
        if (access("/sys/fs/cgroup/unified/cgroup.procs", W_OK) == 0)
                check_cgroup(&b, 2, cg_v2, true);
        box_close(&b);
}
END_TEST

/* Sends a spare's Join with n of the descriptors fds (the claimed count is want). */
static void send_join(struct box *b, const int *fds, size_t n, uint32_t want) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Join j = SBX__INIT__V1__JOIN__INIT;

        j.has_n_cgroup_fds = j.has_cgroup_v2 = 1;
        j.n_cgroup_fds = want;
        j.cgroup_v2 = false;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_JOIN;
        m.join = &j;
        send_to_init(b->chan, &m, fds, n);
}

/* 1 when /proc/pid/cgroup names dir's last component. */
static int in_cgroup(pid_t pid, const char *dir) {
        char path[64], buf[4096];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return strstr(buf, strrchr(dir, '/') + 1) != NULL;
}

/* A spare: stage 0 joins the cgroup Join names before Setup comes (the daemon keeps
 * spares so that a create does not wait for the join), and the sandbox is set up from
 * the Setup that follows as any other. A Join whose descriptors do not match its count,
 * or whose join fails, is answered at once with a failed Ready. */
START_TEST(test_spare_join) {
        char procs[PATH_MAX + 16];
        Sbx__Init__V1__FromInit *r;
        struct setup_opts o;
        struct box b;
        int fd, i;

        if (access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) != 0)
                return; /* no writable v1 pids hierarchy here */
        memset(&o, 0, sizeof(o));
        ck_assert_int_eq(mkdir(cg_v1, 0755), 0);
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_v1);
        fd = open(procs, O_WRONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);

        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        send_join(&b, &fd, 1, 1);
        for (i = 0; i < 200 && !in_cgroup(b.stage0, cg_v1); i++)
                usleep(5 * 1000);
        ck_assert_msg(in_cgroup(b.stage0, cg_v1), "stage 0 did not join %s before Setup", cg_v1);
        r = box_setup_raw(&b, &o);
        ck_assert_msg(r->ready->ok, "Ready not ok after Join: %s", r->ready->error);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        close(b.chan);
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);

        /* Two descriptors for a count of one. */
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        {
                int two[2] = {fd, fd};
                send_join(&b, two, 2, 1);
        }
        r = recv_msg(b.chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_READY);
        ck_assert(!r->ready->ok);
        ck_assert_msg(strstr(r->ready->error, "Join came with 2 descriptors"), "%s",
                      r->ready->error);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
        close(b.chan);

        /* A join that fails is answered at once, before any Setup. */
        box_spawn(&b, false);
        {
                int bad = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(bad, 0);
                send_join(&b, &bad, 1, 1);
                close(bad);
        }
        r = recv_msg(b.chan, MSG_TIMEOUT_MS);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_READY);
        ck_assert(!r->ready->ok);
        ck_assert_msg(strstr(r->ready->error, "join the sandbox's cgroup"), "%s",
                      r->ready->error);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
        close(b.chan);
        close(fd);
        for (i = 0; i < 100 && rmdir(cg_v1) < 0 && errno == EBUSY; i++)
                usleep(10 * 1000);
        ck_assert_int_eq(access(cg_v1, F_OK), -1);
}
END_TEST

START_TEST(test_rootless) {
        const char *echo[] = {"echo", "hi", NULL};
        const char *idu[] = {"id", "-u", NULL};
        const char *status[] = {"grep", "-E",
                                "^(CapEff|CapBnd|NoNewPrivs|Seccomp):", "/proc/self/status", NULL};
        const char *denied[] = {"/etc/ssh", "/etc/hostname", "/sbx/no/such/path", NULL};
        char path[PATH_MAX + 64], buf[64];
        struct setup_opts o;
        struct box b;

        memset(&o, 0, sizeof(o));
        o.rootless = true;
        o.denied_read = denied;
        o.prebuild = _i == 1; /* run twice: the second time as a spare built ahead */
        box_open(&b, &o);
        run_ok(&b, 1, echo, &res);
        ck_assert_str_eq(res.out, "hi\n");
        run_ok(&b, 2, idu, &res);
        ck_assert_str_eq(res.out, "0\n");
        ck_assert_int_ne(sh(&b, 3, "echo x > /etc/sbx-init-test", &res), 0);
        ck_assert_int_ne(access("/etc/sbx-init-test", F_OK), 0);
        ck_assert_int_ne(sh(&b, 4, "cat /etc/shadow", &res), 0);
        ck_assert_int_eq(sh(&b, 5, "echo rl > /workspace/x && hostname", &res), 0);
        ck_assert_str_eq(res.out, HOSTNAME "\n");
        snprintf(path, sizeof(path), "%s/x", b.ws);
        read_file(path, buf, sizeof(buf));
        ck_assert_str_eq(buf, "rl\n");
        run_ok(&b, 6, status, &res);
        ck_assert_str_eq(res.out, "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                                  "NoNewPrivs:\t1\nSeccomp:\t2\n");
        ck_assert_int_eq(sh(&b, 8, "ls -A /etc/ssh | wc -l; cat /etc/hostname | wc -c", &res), 0);
        ck_assert_str_eq(res.out, "0\n0\n");
        /* uid 0 without capabilities cannot remount or unshare its way out. */
        ck_assert_int_ne(sh(&b, 7, "mount -o remount,rw / || unshare -r true", &res), 0);
        box_close(&b);
}
END_TEST

/* Sends MakeSocket and returns SocketMade's descriptor (-1 when none came); *ret_err:
 * its error_errno. */
static int make_socket(struct box *b, uint64_t id, bool ipv6, int *ret_err) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__MakeSocket ms = SBX__INIT__V1__MAKE_SOCKET__INIT;
        Sbx__Init__V1__FromInit *r;
        struct pollfd pfd = {.fd = b->chan, .events = POLLIN};
        int fds[SBX_INIT_MAX_FDS], got = -1;
        size_t len = 0, nfds = 0;

        ms.has_socket_id = 1;
        ms.socket_id = id;
        ms.has_ipv6 = 1;
        ms.ipv6 = ipv6;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_MAKE_SOCKET;
        m.make_socket = &ms;
        send_to_init(b->chan, &m, NULL, 0);
        ck_assert_int_eq(poll(&pfd, 1, MSG_TIMEOUT_MS), 1);
        ck_assert_int_eq(initmsg_recv(b->chan, buf, sizeof(buf), fds, SBX_INIT_MAX_FDS, &len,
                                      &nfds),
                         1);
        ck_assert_uint_le(nfds, 1);
        if (nfds == 1)
                got = fds[0];
        r = sbx__init__v1__from_init__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_SOCKET_MADE);
        ck_assert(r->socket_made->has_socket_id);
        ck_assert_uint_eq(r->socket_made->socket_id, id);
        *ret_err = r->socket_made->has_error_errno ? r->socket_made->error_errno : 0;
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        return got;
}

/* The socket's network namespace (SIOCGSKNS) is the one of /proc/PID/ns/net. */
static bool socket_in_netns_of(int fd, pid_t pid) {
        char path[64];
        struct stat a, b;
        int ns = ioctl(fd, SIOCGSKNS);

        ck_assert_msg(ns >= 0, "SIOCGSKNS: %s", strerror(errno));
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        ck_assert_int_eq(fstat(ns, &a), 0);
        ck_assert_int_eq(stat(path, &b), 0);
        close(ns);
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* MakeSocket (Ready says sockets): PID 1 hands over an unconnected TCP socket of the
 * family asked for, in the sandbox's network namespace, not ours: connected to
 * 127.0.0.1:P it reaches a server of the sandbox on P, while the host has a listener
 * of its own on that same port. Root mode and rootless. */
START_TEST(test_make_socket) {
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        char script[512], buf[64];
        struct setup_opts o;
        struct box b;
        struct cmd c;
        int lfd, fd, err, v, r;

        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(lfd, 4), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
        memset(&o, 0, sizeof(o));
        o.rootless = _i == 1;
        box_open(&b, &o);
        ck_assert(b.sockets);
        snprintf(script, sizeof(script),
                 "import socket,sys\n"
                 "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                 "s.bind(('127.0.0.1',%d));s.listen(1);print('listening',flush=True)\n"
                 "c,_=s.accept();c.sendall(b'inside\\n');c.close()\n",
                 ntohs(sa.sin_port));
        {
                const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
                cmd_start(&b, &c, 1, argv, NULL, NULL, NULL, 0, true);
        }
        ck_assert(c.started);
        ck_assert_int_eq(read(c.out, buf, 10), 10);

        fd = make_socket(&b, 7, true, &err);
        ck_assert_int_eq(err, 0);
        ck_assert_int_ge(fd, 0);
        len = sizeof(v);
        ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len), 0);
        ck_assert_int_eq(v, AF_INET6);
        close(fd);
        fd = make_socket(&b, 8, false, &err);
        ck_assert_int_eq(err, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len), 0);
        ck_assert_int_eq(v, AF_INET);
        ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len), 0);
        ck_assert_int_eq(v, IPPROTO_TCP);
        ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
        ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        ck_assert(socket_in_netns_of(fd, b.init_pid));
        ck_assert(!socket_in_netns_of(fd, getpid()));
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        memset(buf, 0, sizeof(buf));
        r = (int)read(fd, buf, sizeof(buf) - 1);
        ck_assert_int_eq(r, 7);
        ck_assert_str_eq(buf, "inside\n");
        close(fd);
        ck_assert(WIFEXITED(cmd_wait(&b, &c, 30000, NULL)));
        close(c.out);
        close(c.err);
        close(lfd);
        box_close(&b);
}
END_TEST

static char late_dir[PATH_MAX];

/* The host mounts a tmpfs after a spare's base was built. */
static void mount_late(struct box *b) {
        (void)b;
        ck_assert_int_eq(mount("sbx-init-test-late", late_dir, "tmpfs", 0, "size=64k"), 0);
}

/* Sends a Setup with the given failure expected in Ready, and reaps stage 0. */
static void expect_setup_failure(struct box *b, const struct setup_opts *o, const char *what) {
        Sbx__Init__V1__FromInit *r = box_setup_raw(b, o);

        ck_assert_msg(!r->ready->ok && r->ready->error && strstr(r->ready->error, what),
                      "Ready %s: %s, not \"%s\"", r->ready->ok ? "ok" : "failed",
                      r->ready->error ? r->ready->error : "", what);
        sbx__init__v1__from_init__free_unpacked(r, NULL);
        ck_assert_int_ne(wait_stage0(b, 5000), -1);
        close(b->chan);
}

/* A spare built ahead (Setup.prebuild): PID 1 builds the view's base and answers Built,
 * and the sandbox's own Setup must build on that base (a full network namespace where
 * the base made none is refused); it comes with no second Join; a writable path on a
 * mount the host made after the base is not in the host's tree the spare kept, and is
 * refused by its identity, never mounted. A built spare whose daemon goes away exits
 * quietly. */
START_TEST(test_prebuilt_spare) {
        const char *writable[] = {late_dir, NULL};
        struct setup_opts o;
        struct box b;
        int status;

        memset(&o, 0, sizeof(o));
        o.prebuild = true;
        o.network_full = true;
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        expect_setup_failure(&b, &o, "does not build on the spare's base");

        snprintf(late_dir, sizeof(late_dir), "%s/late", base_dir);
        ck_assert_int_eq(mkdir(late_dir, 0755), 0);
        memset(&o, 0, sizeof(o));
        o.prebuild = true;
        o.between = mount_late;
        o.writable = writable;
        o.objects = true;
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        expect_setup_failure(&b, &o, "is not what the daemon checked");
        ck_assert_int_eq(umount2(late_dir, MNT_DETACH), 0);
        ck_assert_int_eq(rmdir(late_dir), 0);

        memset(&o, 0, sizeof(o));
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        box_prebuild(&b, &o);
        send_join(&b, NULL, 0, 0);
        {
                Sbx__Init__V1__FromInit *r = recv_msg(b.chan, MSG_TIMEOUT_MS);
                ck_assert_int_eq(r->body_case, SBX__INIT__V1__FROM_INIT__BODY_READY);
                ck_assert_msg(!r->ready->ok && strstr(r->ready->error, "not Setup"), "%s",
                              r->ready->error ? r->ready->error : "ok");
                sbx__init__v1__from_init__free_unpacked(r, NULL);
        }
        ck_assert_int_ne(wait_stage0(&b, 5000), -1);
        close(b.chan);

        box_spawn(&b, false);
        box_prebuild(&b, &o);
        close(b.chan);
        status = wait_stage0(&b, 5000);
        ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "stage 0 of a built spare whose daemon left: status 0x%x", status);
}
END_TEST

/* Opens /dev/ptmx until the kernel refuses, says how many, then how many entries
 * /dev/pts has once they are closed again (ptmx alone, or nothing without a devpts). */
static const char count_ptys[] =
        "python3 -c '\n"
        "import os\n"
        "fds = []\n"
        "try:\n"
        "    while len(fds) < 64:\n"
        "        fds.append(os.open(\"/dev/ptmx\", os.O_RDWR | os.O_NOCTTY))\n"
        "except OSError:\n"
        "    pass\n"
        "print(len(fds))'; ls -A /dev/pts | wc -l";

/* Setup.ptys: the view's devpts holds that many at once, built so at once or, in a spare
 * built ahead with SBX_SANDBOX_PTYS, remounted when its own Setup comes; 0 is no devpts
 * at all (max=0 would be no bound); more than SBX_SANDBOX_PTYS is refused. */
START_TEST(test_ptys) {
        struct setup_opts o;
        struct box b;
        char why[64];

        memset(&o, 0, sizeof(o));
        o.prebuild = _i == 1; /* run twice: the second time as a spare built ahead */
        o.has_ptys = true;
        o.ptys = 3;
        box_open(&b, &o);
        ck_assert_int_eq(sh(&b, 1, count_ptys, &res), 0);
        ck_assert_str_eq(res.out, "3\n1\n");
        box_close(&b);
        o.ptys = 0;
        box_open(&b, &o);
        ck_assert_int_eq(sh(&b, 1, count_ptys, &res), 0);
        ck_assert_str_eq(res.out, "0\n0\n");
        box_close(&b);
        o.ptys = SBX_SANDBOX_PTYS + 1;
        snprintf(why, sizeof(why), "ptys %u (at most %u)", o.ptys, SBX_SANDBOX_PTYS);
        box_spawn(&b, false);
        box_workspace(&b, NOBODY);
        expect_setup_failure(&b, &o, why);
}
END_TEST

/* Sends a warm sandbox its Claim, with ptys unless ptys < 0. */
static void send_claim(struct box *b, int ptys) {
        Sbx__Init__V1__ToInit m = SBX__INIT__V1__TO_INIT__INIT;
        Sbx__Init__V1__Claim cl = SBX__INIT__V1__CLAIM__INIT;

        cl.hostname = (char *)"claimed";
        cl.has_ptys = ptys >= 0;
        cl.ptys = ptys >= 0 ? (uint32_t)ptys : 0;
        m.body_case = SBX__INIT__V1__TO_INIT__BODY_CLAIM;
        m.claim = &cl;
        send_to_init(b->chan, &m, NULL, 0);
}

/* A warm sandbox (Setup.warm) starts nothing before its Claim, which applies the owner's
 * ptys (a remount: root mode and rootless, in its user namespace) and then loads the
 * seccomp filter; a Claim of more ptys than allowed ends the sandbox. */
START_TEST(test_warm_claim) {
        const char *status[] = {"grep", "^Seccomp:", "/proc/self/status", NULL};
        const char *echo[] = {"/bin/echo", "hi", NULL};
        struct setup_opts o;
        struct box b;
        int st;

        memset(&o, 0, sizeof(o));
        o.warm = true;
        o.rootless = _i == 1; /* run twice: the second time rootless */
        box_open(&b, &o);
        run(&b, 1, echo, NULL, NULL, &res);
        ck_assert_msg(!res.started && res.start_errno == EPERM &&
                              strstr(res.start_error, "before it is claimed"),
                      "a Start before the Claim: %s", res.start_error);
        send_claim(&b, 2);
        ck_assert_int_eq(sh(&b, 2, count_ptys, &res), 0);
        ck_assert_str_eq(res.out, "2\n1\n");
        run_ok(&b, 3, status, &res);
        ck_assert_str_eq(res.out, "Seccomp:\t2\n");
        /* A second Claim changes nothing: the filter refuses mount(2) now. */
        send_claim(&b, 5);
        ck_assert_int_eq(sh(&b, 4, count_ptys, &res), 0);
        ck_assert_str_eq(res.out, "2\n1\n");
        box_close(&b);

        box_open(&b, &o);
        send_claim(&b, SBX_SANDBOX_PTYS + 1);
        st = wait_stage0(&b, 5000);
        ck_assert_msg(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0),
                      "a Claim of too many ptys: stage 0 status 0x%x", st);
        close(b.chan);
}
END_TEST

START_TEST(test_root_dir) {
        const char *ls[] = {"/bin/ls", "-A", "/", NULL};
        static char listing[OUT_BYTES + 2];
        struct setup_opts o;
        struct box b;

        /* On a merged-/usr system /usr alone is a usable root: bin, lib, lib64, sbin. */
        if (access("/usr/lib64", F_OK) < 0 && access("/usr/lib/ld-linux-aarch64.so.1", F_OK) < 0)
                return;
        memset(&o, 0, sizeof(o));
        o.root_dir = "/usr";
        box_open(&b, &o);
        run_ok(&b, 1, ls, &res);
        snprintf(listing, sizeof(listing), "\n%s", res.out);
        ck_assert_msg(strstr(listing, "\nshare\n") && strstr(listing, "\nbin\n") &&
                              strstr(listing, "\nworkspace\n") && strstr(listing, "\nproc\n") &&
                              strstr(listing, "\ntmp\n"),
                      "ls /: %s", res.out);
        ck_assert_ptr_null(strstr(listing, "\nusr\n")); /* The host root is not visible. */
        ck_assert_int_eq(sh(&b, 2, "echo in > /workspace/f && cat /workspace/f", &res), 0);
        ck_assert_str_eq(res.out, "in\n");
        ck_assert_int_ne(sh(&b, 3, "touch /share/sbx-init-test", &res), 0);
        box_close(&b);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("init_run");
        TCase *tc = tcase_create("sandbox");

        signal(SIGPIPE, SIG_IGN);
        tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_echo_and_stdin);
        tcase_add_test(tc, test_start_failures);
        tcase_add_test(tc, test_identity_and_hostname);
        tcase_add_test(tc, test_filesystem_view);
        tcase_add_test(tc, test_mount_propagation);
        tcase_add_loop_test(tc, test_policy_paths, 0, 2);
        tcase_add_test(tc, test_network_none);
        tcase_add_test(tc, test_signal);
        tcase_add_test(tc, test_start_without_ack);
        tcase_add_test(tc, test_channel_close_ends_sandbox);
        tcase_add_test(tc, test_init_killed);
        tcase_add_test(tc, test_bad_messages);
        tcase_add_test(tc, test_bad_setup);
        tcase_add_test(tc, test_tools);
        tcase_add_test(tc, test_cgroups);
        tcase_add_test(tc, test_spare_join);
        tcase_add_test(tc, test_root_dir);
        tcase_add_loop_test(tc, test_rootless, 0, 2);
        tcase_add_loop_test(tc, test_make_socket, 0, 2);
        tcase_add_test(tc, test_prebuilt_spare);
        tcase_add_loop_test(tc, test_ptys, 0, 2);
        tcase_add_loop_test(tc, test_warm_claim, 0, 2);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
