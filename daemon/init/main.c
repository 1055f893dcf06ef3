/* main.c: sbx-init, the init helper of one sandbox: stage 0 and PID 1's setup.
 *
 * The daemon runs `sbx-init --fd N` with N its end of a SOCK_SEQPACKET socketpair
 * (init.proto), stdin and stdout on /dev/null and stderr its own. Stage 0 (this
 * process) reads Setup, joins the sandbox's cgroup, enters a new user namespace of its own when
 * rootless, unshares the other namespaces and forks PID 1 of the new PID namespace; it hands PID 1
 * its host pid over a pipe (PID 1 cannot see it), keeps that pipe's write end until it dies so PID
 * 1 can tell it is there, closes its copy of the channel, waits for PID 1 and exits with its
 * status. PID 1 ties its life to stage 0 (PR_SET_PDEATHSIG), builds the seccomp filter, brings up
 * loopback, builds the view's base, names the host, builds the rest of the view, answers Ready
 * with its host pid, then serves the channel (serve.c) until end of stream, when its exit ends
 * every process of the sandbox. A spare built ahead (Setup.prebuild) stops after the view's base,
 * answers Built, and goes on when the Setup of the sandbox it becomes arrives (its devpts then
 * remounted with that sandbox's ptys). A warm sandbox (Setup.warm) loads its filter only at its
 * Claim, after its owner's ptys, and starts nothing before (serve.c). Owns the Setup
 * message and the filter for the life of the process. The checklist reads top to bottom in pid1(),
 * nsjail style. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "filter.h"
#include "image.h"
#include "init.pb-c.h"
#include "initmsg.h"
#include "sbx_limits.h"
#include "mnt.h"
#include "ns.h"
#include "serve.h"
#include "spawn.h"
#include "user.h"
#include "util.h"

/* The uid/gid of commands in root mode when Setup names none: never root by accident. */
#define FALLBACK_RUN_ID    65534u
#define HOSTNAME_MAX_BYTES 64u

/* 1 when the /proc entry link (a descriptor or cwd of a process) leads to dev:ino. */
static int leads_to(const char *link, dev_t dev, ino_t ino) {
        struct stat st;
        return stat(link, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* 1 when the process whose /proc directory is p maps the file dev:ino (a mapping
 * outlives the descriptor it was made from, and the mount that now covers the file). */
static int maps_it(const char *p, dev_t dev, ino_t ino) {
        char path[320], *line = NULL;
        size_t cap = 0;
        FILE *f;
        int hit = 0;

        snprintf(path, sizeof(path), "%s/maps", p);
        f = fopen(path, "re");
        while (f && !hit && getline(&line, &cap, f) > 0) {
                /* "7f..-7f.. r--s 00000000 fd:01 1234 /path" */
                unsigned maj, min;
                unsigned long long i;
                if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &i) == 3)
                        hit = i == (unsigned long long)ino && makedev(maj, min) == dev;
        }
        free(line);
        if (f)
                fclose(f);
        return hit;
}

/* After `--reapply` covered a path again: the sandbox's processes that opened or mapped
 * what lay bare in the milliseconds before (a descriptor, a mapping or a working
 * directory outlives the new mount: a read or a write through it would reach the host's
 * file) are killed, through a descriptor of their /proc directory (this helper is not
 * in their PID namespace, so their pids mean nothing to kill(2)). Passes again until
 * one finds nobody, so that a process forking meanwhile is caught too. A descriptor in
 * flight (sent over a Unix socket and not yet received) is in no process's table and
 * escapes. Returns how many were killed. */
static int kill_holders(const struct stat *bare) {
        long done[256]; /* killed already (a dying process still shows its descriptors) */
        int killed = 0, found, pass;

        for (pass = 0; pass < 8; pass++) {
                DIR *d = opendir("/proc");
                struct dirent *de;

                if (!d)
                        break;
                found = 0;
                while ((de = readdir(d))) {
                        char p[300], link[600];
                        int holds = 0, pfd;
                        DIR *fds;
                        struct dirent *fe;

                        /* PID 1 opens no file of the view; it is never killed here. */
                        if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
                            strcmp(de->d_name, "1") == 0)
                                continue;
                        snprintf(p, sizeof(p), "/proc/%s/cwd", de->d_name);
                        holds = leads_to(p, bare->st_dev, bare->st_ino);
                        snprintf(p, sizeof(p), "/proc/%s/fd", de->d_name);
                        fds = holds ? NULL : opendir(p);
                        while (fds && !holds && (fe = readdir(fds))) {
                                if (fe->d_name[0] == '.')
                                        continue;
                                snprintf(link, sizeof(link), "%s/%s", p, fe->d_name);
                                holds = leads_to(link, bare->st_dev, bare->st_ino);
                        }
                        if (fds)
                                closedir(fds);
                        snprintf(p, sizeof(p), "/proc/%s", de->d_name);
                        holds = holds || maps_it(p, bare->st_dev, bare->st_ino);
                        for (int k = 0; holds && k < killed && k < 256; k++)
                                holds = done[k] != atol(de->d_name);
                        if (!holds)
                                continue;
                        snprintf(p, sizeof(p), "/proc/%s", de->d_name);
                        pfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (pfd >= 0 &&
                            syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
                                if (killed < 256)
                                        done[killed] = atol(de->d_name);
                                found++;
                                killed++;
                        }
                        if (pfd >= 0)
                                close(pfd);
                }
                closedir(d);
                if (!found)
                        break;
        }
        return killed;
}

/* --reapply's "--pidfd N [--userns]": enters the mount namespace (and with --userns the
 * user namespace) of the process whose pidfd is N. No arguments: already there.
 * Returns 0, -EINVAL for bad arguments, or -errno. */
static int enter_sandbox(int argc, char **argv) {
        char *end;
        long fd;
        int flags = CLONE_NEWNS;

        if (argc == 0)
                return 0;
        if (argc < 2 || argc > 3 || strcmp(argv[0], "--pidfd") != 0 ||
            (argc == 3 && strcmp(argv[2], "--userns") != 0)) {
                util_log(UTIL_LOG_ERR, "--reapply: unexpected arguments");
                return -EINVAL;
        }
        errno = 0;
        fd = strtol(argv[1], &end, 10);
        if (errno || *end || end == argv[1] || fd < 0 || fd > 1024 * 1024)
                return -EINVAL;
        if (argc == 3)
                flags |= CLONE_NEWUSER;
        if (setns((int)fd, flags) < 0) {
                int e = errno;
                util_log(UTIL_LOG_ERR, "--reapply: setns into the sandbox: %s", strerror(e));
                return -e;
        }
        close((int)fd);
        return 0;
}

static void usage(void) {
        static const char msg[] = "usage: sbx-init --fd N | --reapply hide|read-only PATH "
                                  "[--pidfd N [--userns]]\n"
                                  "The init helper of one sbxd sandbox; started by sbxd only.\n";
        if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
                /* Nothing else to do. */
        }
}

static int parse_args(int argc, char **argv, int *ret_fd) {
        char *end;
        long fd;

        if (argc != 3 || strcmp(argv[1], "--fd") != 0)
                return -EINVAL;
        errno = 0;
        fd = strtol(argv[2], &end, 10);
        if (errno || *end || end == argv[2] || fd < 3 || fd > 1024 * 1024)
                return -EINVAL;
        *ret_fd = (int)fd;
        return 0;
}

/* Makes sure 0, 1 and 2 are open (commands' descriptors received later must land at
 * 3 or above) and closes everything else the daemon may have leaked to us. */
static int sanitize_fds(int chan) {
        int fd, type;
        socklen_t len = sizeof(type);

        if (getsockopt(chan, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET)
                return -EBADF;
        for (fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0)
                        continue;
                if (open("/dev/null", O_RDWR) != fd)
                        return -EBADF;
        }
        if (chan > 3 && syscall(SYS_close_range, 3u, (unsigned)chan - 1, 0u) < 0) {
                for (fd = 3; fd < chan; fd++)
                        close(fd);
        }
        if (syscall(SYS_close_range, (unsigned)chan + 1, ~0U, 0u) < 0) {
                for (fd = chan + 1; fd < 65536; fd++)
                        close(fd);
        }
        /* No command may inherit the channel. */
        if (fcntl(chan, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        return 0;
}

/* The descriptors that come with Setup: the adoption socket and the cgroup's; or, for a
 * spare, whether the cgroup was joined before Setup came (Join) and how that went. */
struct setup_fds {
        int adopt_fd;     /* -1: none */
        int workspace_fd; /* Setup.workspace_mount's; -1: none */
        int upper_fd;     /* Setup.image_upper_mount's; -1: none */
        int cgroup_fds[SBX_INIT_MAX_FDS];
        size_t n_cgroup_fds;
        bool joined; /* a Join came first, and the cgroup is joined */
};

static void setup_fds_close_cgroups(struct setup_fds *f) {
        while (f->n_cgroup_fds > 0)
                close(f->cgroup_fds[--f->n_cgroup_fds]);
}

/* One packet and the descriptors it brought (*nfds of them, into fds). 0, or -errno
 * with err. */
static int recv_packet(int chan, uint8_t *buf, size_t cap, Sbx__Init__V1__ToInit **ret_msg,
                       int *fds, size_t *nfds, struct util_err *err) {
        size_t len = 0;
        int r = initmsg_recv(chan, buf, cap, fds, SBX_INIT_MAX_FDS, &len, nfds);

        if (r == 0)
                return util_fail(err, EPIPE, NULL, "read Setup: end of stream");
        if (r < 0)
                return util_fail(err, r, NULL, "read Setup");
        *ret_msg = sbx__init__v1__to_init__unpack(NULL, len, buf);
        if (!*ret_msg) {
                for (size_t i = 0; i < *nfds; i++)
                        close(fds[i]);
                return util_fail(err, EBADMSG, NULL, "decode Setup");
        }
        return 0;
}

/* A spare's Join (m, with nfds descriptors): the cgroup is joined now, first thing and
 * before anything is forked. 0, or -errno with err when the packet is not a Join that
 * init can take or the join failed (init then answers Ready with the error and exits,
 * and the daemon replaces the spare before a create takes it). */
static int take_join(const Sbx__Init__V1__ToInit *m, int *fds, size_t nfds, struct setup_fds *sf,
                     struct util_err *err) {
        const Sbx__Init__V1__Join *j = m->join;
        size_t want = j->has_n_cgroup_fds ? j->n_cgroup_fds : 0;
        int r = nfds == want ? util_join_cgroups(fds, nfds, j->has_cgroup_v2 && j->cgroup_v2) : 0;

        for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
        if (nfds != want)
                return util_fail(err, EPROTO, NULL, "Join came with %zu descriptors, not %zu", nfds,
                                 want);
        if (r < 0)
                return util_fail(err, -r, NULL, "join the sandbox's cgroup");
        sf->joined = true;
        return 0;
}

/* Reads Setup, the first packet (or the second, after a spare's Join), with the
 * descriptors it names. */
static int read_setup(int chan, Sbx__Init__V1__ToInit **ret_msg, struct setup_fds *sf,
                      struct util_err *err) {
        static uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        int fds[SBX_INIT_MAX_FDS];
        size_t nfds = 0, i, want = 0, at = 0;
        Sbx__Init__V1__ToInit *m;
        bool cg_twice = false;
        int r;

        r = recv_packet(chan, buf, sizeof(buf), &m, fds, &nfds, err);
        /* One Join at most, first (a built spare's PID 1 reads its Setup here too). */
        if (r == 0 && m->body_case == SBX__INIT__V1__TO_INIT__BODY_JOIN && m->join &&
            !sf->joined) {
                r = take_join(m, fds, nfds, sf, err);
                sbx__init__v1__to_init__free_unpacked(m, NULL);
                if (r == 0)
                        r = recv_packet(chan, buf, sizeof(buf), &m, fds, &nfds, err);
        }
        if (r < 0)
                return r;
        if (m->body_case == SBX__INIT__V1__TO_INIT__BODY_SETUP && m->setup) {
                const Sbx__Init__V1__Setup *s = m->setup;
                int adoptable = s->has_adoptable && s->adoptable;
                int ws = s->has_workspace_mount && s->workspace_mount;
                int up = ws && s->has_image_upper_mount && s->image_upper_mount;
                size_t n_cg = s->has_n_cgroup_fds ? s->n_cgroup_fds : 0;

                /* After a Join, the cgroup is joined already: Setup brings none. */
                cg_twice = sf->joined && n_cg > 0;
                want = (adoptable ? 1u : 0u) + n_cg + (ws ? 1u : 0u) + (up ? 1u : 0u);
                if (nfds == want && !cg_twice) {
                        if (adoptable) {
                                sf->adopt_fd = fds[at];
                                fds[at++] = -1;
                        }
                        for (i = 0; i < n_cg; i++) {
                                sf->cgroup_fds[sf->n_cgroup_fds++] = fds[at];
                                fds[at++] = -1;
                        }
                        if (ws) {
                                sf->workspace_fd = fds[at];
                                fds[at++] = -1;
                        }
                        if (up) {
                                sf->upper_fd = fds[at];
                                fds[at++] = -1;
                        }
                }
        }
        for (i = 0; i < nfds; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        if (m->body_case != SBX__INIT__V1__TO_INIT__BODY_SETUP || !m->setup) {
                sbx__init__v1__to_init__free_unpacked(m, NULL);
                return util_fail(err, EPROTO, NULL, "first message is not Setup");
        }
        if (cg_twice) {
                sbx__init__v1__to_init__free_unpacked(m, NULL);
                return util_fail(err, EPROTO, NULL, "Setup names cgroup descriptors after Join");
        }
        if (nfds != want) {
                sbx__init__v1__to_init__free_unpacked(m, NULL);
                return util_fail(err, EPROTO, NULL, "Setup came with %zu descriptors, not %zu",
                                 nfds, want);
        }
        *ret_msg = m;
        return 0;
}

static int check_paths(const char *what, char *const *list, size_t n, size_t max,
                       struct util_err *err) {
        size_t i;

        if (n > max)
                return util_fail(err, E2BIG, NULL, "Setup: %zu %s (at most %zu)", n, what, max);
        for (i = 0; i < n; i++)
                if (!util_path_ok(list[i]) || strcmp(list[i], "/") == 0)
                        return util_fail(err, EINVAL, "absolute, no . or .., not /",
                                         "Setup: %s \"%.200s\"", what, list[i]);
        return 0;
}

static int validate_setup(const Sbx__Init__V1__Setup *s, struct util_err *err) {
        int r;

        if (s->root_dir && s->root_dir[0] && !util_path_ok(s->root_dir))
                return util_fail(err, EINVAL, NULL, "Setup: root_dir \"%.200s\"", s->root_dir);
        if (s->workspace_dir && s->workspace_dir[0] && !util_path_ok(s->workspace_dir))
                return util_fail(err, EINVAL, NULL, "Setup: workspace_dir \"%.200s\"",
                                 s->workspace_dir);
        if (s->sandboxes_dir && s->sandboxes_dir[0] && !util_path_ok(s->sandboxes_dir))
                return util_fail(err, EINVAL, NULL, "Setup: sandboxes_dir \"%.200s\"",
                                 s->sandboxes_dir);
        if (s->hostname && strlen(s->hostname) > HOSTNAME_MAX_BYTES)
                return util_fail(err, EINVAL, NULL, "Setup: hostname longer than %u bytes",
                                 HOSTNAME_MAX_BYTES);
        r = check_paths("writable_path", s->writable_paths, s->n_writable_paths,
                        SBX_MAX_POLICY_PATHS, err);
        if (r == 0)
                r = check_paths("denied_read_path", s->denied_read_paths, s->n_denied_read_paths,
                                SBX_MAX_HIDDEN_PATHS, err);
        if (r == 0)
                r = check_paths("denied_write_path", s->denied_write_paths, s->n_denied_write_paths,
                                SBX_MAX_POLICY_PATHS, err);
        if (r == 0)
                r = check_paths("protected_path", s->protected_paths, s->n_protected_paths,
                                SBX_MAX_HIDDEN_PATHS, err);
        if (r == 0)
                r = check_paths("protected_mkdir", s->protected_mkdirs, s->n_protected_mkdirs,
                                SBX_MAX_HIDDEN_PATHS, err);
        if (r == 0 && s->n_protected_files > SBX_MAX_POLICY_PATHS)
                r = util_fail(err, E2BIG, NULL, "Setup: %zu protected_files", s->n_protected_files);
        for (size_t i = 0; r == 0 && i < s->n_protected_files; i++) {
                const Sbx__Init__V1__MadeFile *f = s->protected_files[i];
                if (!f->path || !util_path_ok(f->path) || (f->has_content && f->content.len > 64))
                        r = util_fail(err, EINVAL, NULL, "Setup: protected_file %zu", i);
        }
        if (r == 0 && s->n_writable_objects && s->n_writable_objects != s->n_writable_paths)
                r = util_fail(err, EINVAL, NULL,
                              "Setup: %zu writable_objects for %zu writable_paths",
                              s->n_writable_objects, s->n_writable_paths);
        if (r == 0 && s->has_ptys && s->ptys > SBX_SANDBOX_PTYS)
                r = util_fail(err, EINVAL, NULL, "Setup: ptys %u (at most %u)", s->ptys,
                              SBX_SANDBOX_PTYS);
        if (r == 0 && s->n_writable_binds && s->n_writable_binds != s->n_writable_paths)
                r = util_fail(err, EINVAL, NULL, "Setup: %zu writable_binds for %zu writable_paths",
                              s->n_writable_binds, s->n_writable_paths);
        for (size_t i = 0; r == 0 && i < s->n_writable_binds; i++) {
                const Sbx__Init__V1__WritableBind *b = s->writable_binds[i];
                /* (uid_t)-1 is no id: the kernel maps neither it nor to it. */
                if (!b->has_uid || !b->has_gid || b->uid == UINT32_MAX || b->gid == UINT32_MAX)
                        r = util_fail(err, EINVAL, NULL, "Setup: writable_bind %zu has no ids", i);
        }
        if (r == 0)
                r = check_paths("image_layer", s->image_layers, s->n_image_layers,
                                SBX_MAX_IMAGE_LAYERS, err);
        if (r == 0 && s->n_image_layers && (!s->image_upper || !util_path_ok(s->image_upper)))
                r = util_fail(err, EINVAL, NULL, "Setup: image_layers without an image_upper");
        if (r == 0 && s->has_image_subids && (s->image_subids >= SBX_IMAGE_IDS ||
                                              !s->has_outer_subuid || !s->has_outer_subgid))
                r = util_fail(err, EINVAL, NULL, "Setup: image_subids %u",
                              (unsigned)s->image_subids);
        if (r == 0 && s->has_image_uid_base &&
            (s->image_uid_base < SBX_IMAGE_UID_BASE ||
             s->image_uid_base > UINT32_MAX - SBX_IMAGE_IDS))
                r = util_fail(err, EINVAL, NULL, "Setup: image_uid_base %u",
                              (unsigned)s->image_uid_base);
        if (r == 0 && s->n_cgroup_v1_controllers > 8)
                r = util_fail(err, E2BIG, NULL, "Setup: %zu cgroup_v1_controllers",
                              s->n_cgroup_v1_controllers);
        for (size_t i = 0; r == 0 && i < s->n_cgroup_v1_controllers; i++) {
                const char *c = s->cgroup_v1_controllers[i];
                if (!c || !c[0] || strlen(c) > 32 ||
                    strspn(c, "abcdefghijklmnopqrstuvwxyz_") != strlen(c))
                        r = util_fail(err, EINVAL, NULL, "Setup: cgroup_v1_controller \"%.40s\"",
                                      c ? c : "");
        }
        return r;
}

/* The objects of Setup as mnt.h wants them (objs: n_writable_paths + 1 entries). */
static void fill_objects(const Sbx__Init__V1__Setup *s, struct mnt_config *mc,
                         struct mnt_object *objs) {
        size_t i;

        if (s->root_object) {
                objs[0].dev = s->root_object->dev;
                objs[0].ino = s->root_object->ino;
                mc->root_object = &objs[0];
        }
        if (s->n_writable_objects) {
                for (i = 0; i < s->n_writable_objects; i++) {
                        objs[i + 1].dev = s->writable_objects[i]->dev;
                        objs[i + 1].ino = s->writable_objects[i]->ino;
                }
                mc->writable_objects = &objs[1];
        }
}

/* Sends Ready: ok when err is NULL or holds no error. host_pid <= 0 is left out. */
static void send_ready(int chan, struct util_err *err, struct util_warnings *warn, pid_t host_pid,
                       int proxy_fd) {
        Sbx__Init__V1__FromInit m = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Ready ready = SBX__INIT__V1__READY__INIT;
        char *warnings[UTIL_MAX_WARNINGS];
        size_t i;
        int r;

        ready.has_ok = 1;
        ready.ok = !err || err->err == 0;
        if (!ready.ok) {
                ready.error = err->text;
                ready.has_error_errno = 1;
                ready.error_errno = err->err;
        }
        for (i = 0; warn && i < warn->n; i++)
                warnings[i] = warn->text[i];
        ready.n_warnings = warn ? warn->n : 0;
        ready.warnings = warnings;
        if (host_pid > 0) {
                ready.has_init_host_pid = 1;
                ready.init_host_pid = host_pid;
        }
        /* This init answers MakeSocket (serve.c). */
        ready.has_sockets = ready.ok;
        ready.sockets = ready.ok;
        if (ready.ok && proxy_fd >= 0) {
                ready.has_proxy_listener = 1;
                ready.proxy_listener = 1;
        }
        m.body_case = SBX__INIT__V1__FROM_INIT__BODY_READY;
        m.ready = &ready;
        r = initmsg_send(chan, &m.base, ready.has_proxy_listener ? &proxy_fd : NULL,
                         ready.has_proxy_listener ? 1 : 0);
        if (r < 0)
                util_log(UTIL_LOG_ERR, "send Ready: %s", strerror(-r));
}

/* Reports a setup failure to the daemon and to the log. Returns the exit code. */
static int setup_failed(int chan, struct util_err *err, pid_t host_pid) {
        util_log(UTIL_LOG_ERR, "setup failed: %s", err->text);
        send_ready(chan, err, NULL, host_pid, -1);
        return 1;
}

/* Step 1: dies with stage 0, and learns its own pid in the daemon's PID namespace.
 * PR_SET_PDEATHSIG is armed before looking at the pipe: stage 0 keeps its end open
 * until it exits, so POLLHUP afterwards means it is already gone and the signal was
 * missed. Returns 0 with *ret_host_pid, 1 when stage 0 is gone (nobody to tell), or
 * -errno with err set. */
static int tie_to_stage0(int pidpipe, int32_t *ret_host_pid, struct util_err *err) {
        struct pollfd pfd = {.fd = pidpipe, .events = POLLIN};
        int32_t host_pid = 0;
        ssize_t n;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return util_fail(err, errno, NULL, "PR_SET_PDEATHSIG");
        do
                n = read(pidpipe, &host_pid, sizeof(host_pid));
        while (n < 0 && errno == EINTR);
        if (n != sizeof(host_pid))
                return 1; /* Stage 0 died before telling us; the daemon sees its exit. */
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLHUP))
                return 1;
        close(pidpipe);
        *ret_host_pid = host_pid;
        return 0;
}

/* Step 2: signals at their default dispositions, SIGCHLD blocked and read through a
 * signalfd (*ret_sigfd); the bounding set and the securebits every command inherits;
 * the commands' stack. Returns 0 or -errno with err set. */
static int prepare_commands(int *ret_sigfd, struct util_err *err) {
        int r = spawn_prepare_parent(), sigfd;

        if (r < 0)
                return util_fail(err, r, NULL, "prepare to start commands");
        sigfd = serve_signals_init();
        if (sigfd < 0)
                return util_fail(err, sigfd, NULL, "signalfd for SIGCHLD");
        umask(022);
        *ret_sigfd = sigfd;
        return 0;
}

/* Step 3: builds the seccomp filter into *prog, or warns that this kernel cannot load
 * one (prog stays empty). Returns 0 or -errno with err set. */
static int build_filter(struct sock_fprog *prog, bool setid_modes, struct util_err *err,
                        struct util_warnings *warn) {
        int r;

        if (filter_supported() < 0) {
                util_warn(warn, "seccomp: this kernel cannot load filters (needs "
                                "CONFIG_SECCOMP_FILTER); commands run without one");
                return 0;
        }
        r = filter_build(prog, setid_modes);
        return r < 0 ? util_fail(err, r, NULL, "build the seccomp filter") : 0;
}

/* What steps 5 and 7 hand to mnt_view_base and mnt_view_finish: the config and the
 * arrays it points into. */
struct view_config {
        struct mnt_config mc;
        struct mnt_object objs[SBX_MAX_POLICY_PATHS + 1];
        struct mnt_bind binds[SBX_MAX_POLICY_PATHS];
        struct mnt_file files[SBX_MAX_POLICY_PATHS];
        struct user_config user;
};

/* Fills vc from Setup s (validated), pointing into s. */
static void view_config_fill(const Sbx__Init__V1__Setup *s, struct view_config *vc) {
        struct mnt_config *mc = &vc->mc;
        size_t i;

        memset(vc, 0, sizeof(*vc));
        mc->root_dir = s->root_dir;
        mc->workspace_dir = s->workspace_dir;
        mc->seed_workspace = s->has_seed_workspace && s->seed_workspace && s->n_image_layers;
        mc->writable_paths = s->writable_paths;
        mc->n_writable_paths = s->n_writable_paths;
        mc->denied_read_paths = s->denied_read_paths;
        mc->n_denied_read_paths = s->n_denied_read_paths;
        mc->denied_write_paths = s->denied_write_paths;
        mc->n_denied_write_paths = s->n_denied_write_paths;
        mc->protected_paths = s->protected_paths;
        mc->n_protected_paths = s->n_protected_paths;
        mc->tmp_bytes = s->has_tmp_bytes ? s->tmp_bytes : 0;
        mc->ptys = s->has_ptys ? s->ptys : SBX_SANDBOX_PTYS;
        fill_objects(s, mc, vc->objs);
        mc->idmap = !(s->has_rootless && s->rootless) && s->has_owner_uid && s->has_owner_gid;
        mc->owner_uid = s->owner_uid;
        mc->owner_gid = s->owner_gid;
        for (i = 0; i < s->n_writable_binds && i < SBX_MAX_POLICY_PATHS; i++) {
                vc->binds[i].uid = s->writable_binds[i]->uid;
                vc->binds[i].gid = s->writable_binds[i]->gid;
                vc->binds[i].system_dir =
                        s->writable_binds[i]->has_system_dir && s->writable_binds[i]->system_dir;
        }
        if (s->n_writable_binds)
                mc->writable_binds = vc->binds;
        mc->run_uid = s->has_run_uid ? s->run_uid : FALLBACK_RUN_ID;
        mc->run_gid = s->has_run_gid ? s->run_gid : FALLBACK_RUN_ID;
        /* An image's sandbox, root mode: its run ids are of its namespace; what the view
         * maps writable paths to are their host ids, in its block. */
        if (s->has_image_uid_base) {
                mc->run_uid += s->image_uid_base;
                mc->run_gid += s->image_uid_base;
                mc->image_block = s->image_uid_base;
        }
        if (s->has_workspace_tmpfs && s->workspace_tmpfs) {
                mc->workspace_tmpfs_bytes = s->has_workspace_bytes ? s->workspace_bytes : 0;
                mc->workspace_tmpfs_inodes = s->has_workspace_inodes ? s->workspace_inodes : 0;
                mc->workspace_uid = s->has_rootless && s->rootless ? (uid_t)-1 : mc->run_uid;
                mc->workspace_gid = s->has_rootless && s->rootless ? (gid_t)-1 : mc->run_gid;
        }
        mc->sandboxes_dir = s->sandboxes_dir;
        /* Rootless, an image's with a tmpfs disk: stage 0's tmpfs holds the workspace. */
        if (s->n_image_layers && mc->workspace_tmpfs_bytes && s->has_rootless && s->rootless)
                mc->image_disk_dir = s->image_upper;
        mc->cgroup_v1_controllers = s->cgroup_v1_controllers;
        mc->n_cgroup_v1_controllers = s->n_cgroup_v1_controllers;
        mc->protected_mkdirs = s->protected_mkdirs;
        mc->n_protected_mkdirs = s->n_protected_mkdirs;
        for (i = 0; i < s->n_protected_files && i < SBX_MAX_POLICY_PATHS; i++) {
                const Sbx__Init__V1__MadeFile *f = s->protected_files[i];
                vc->files[i].path = f->path;
                vc->files[i].content = f->content.data;
                vc->files[i].len = f->has_content ? f->content.len : 0;
        }
        mc->protected_files = vc->files;
        mc->n_protected_files = s->n_protected_files;
        vc->user.keep_groups = s->has_rootless && s->rootless;
        vc->user.uid = vc->user.keep_groups ? 0 : mc->run_uid; /* rootless: see step 9 */
        vc->user.gid = vc->user.keep_groups ? 0 : mc->run_gid;
        /* An image brings its own users (its /etc/passwd). */
        mc->user = s->n_image_layers ? NULL : &vc->user;
}

/* PID 1's seccomp filter (step 3), and the ptys its devpts holds now: a warm sandbox
 * applies its owner's and loads the filter at Claim (claim_view). */
static struct sock_fprog filter;
static unsigned view_ptys;

/* Step 8: loads prog (when built) on PID 1 itself, once: every command inherits it
 * across clone and execve. Loading it per command cost a copy, a check and a JIT
 * compilation of the program each time (about 0.2 ms). PID 1 needs none of the calls
 * it denies from here on (poll, the channel, clone without namespace flags, wait4,
 * kill, accept4), and each command still drops its uid and capabilities and sets
 * no_new_privs itself before execve. Returns 0 or -errno with err set. */
static int load_filter(const struct sock_fprog *prog, struct util_err *err) {
        int r;

        if (!prog->filter)
                return 0;
        r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : filter_load(prog);
        return r < 0 ? util_fail(err, r, NULL, "load the seccomp filter") : 0;
}

/* A warm sandbox's Claim (serve.h), once, before anything runs in it: the owner's ptys
 * (UINT_MAX: kept), then the filter held back until now, which refuses mount(2) from
 * here on. 0 or -errno (logged). */
static int claim_view(unsigned ptys) {
        struct util_err err;

        memset(&err, 0, sizeof(err));
        if (ptys != UINT_MAX && ptys > SBX_SANDBOX_PTYS)
                util_fail(&err, EINVAL, NULL, "Claim: ptys %u (at most %u)", ptys,
                          SBX_SANDBOX_PTYS);
        else if (ptys != UINT_MAX && ptys != view_ptys && mnt_set_ptys(ptys, &err) == 0)
                view_ptys = ptys;
        if (err.err == 0)
                (void)load_filter(&filter, &err);
        if (err.err == 0)
                return 0;
        util_log(UTIL_LOG_ERR, "claim: %s", err.text);
        return -err.err;
}

/* Step 9's configuration of the service loop. */
static void serve_config_fill(const Sbx__Init__V1__Setup *s, int adopt_fd, int32_t host_pid,
                              int proxy_fd, struct serve_config *cfg) {
        memset(cfg, 0, sizeof(*cfg));
        cfg->proxy_fd = proxy_fd;
        cfg->adopt_fd = adopt_fd;
        cfg->adopt_grace_ms = s->has_adopt_grace_ms ? s->adopt_grace_ms : 0;
        if (s->has_rootless && s->rootless && !(s->n_image_layers && s->has_image_subids)) {
                /* The only mapped ids of our user namespace. */
                cfg->run_uid = 0;
                cfg->run_gid = 0;
                cfg->rootless = true;
        } else if (s->has_rootless && s->rootless) {
                /* An image's, with the user's subordinate ids: its users exist. */
                cfg->run_uid = s->has_run_uid ? s->run_uid : 0;
                cfg->run_gid = s->has_run_gid ? s->run_gid : 0;
                cfg->rootless = true;
        } else {
                cfg->run_uid = s->has_run_uid ? s->run_uid : FALLBACK_RUN_ID;
                cfg->run_gid = s->has_run_gid ? s->run_gid : FALLBACK_RUN_ID;
        }
        cfg->host_pid = host_pid;
        cfg->claim = s->has_warm && s->warm ? claim_view : NULL;
        if (s->has_image_uid_base) {
                char buf[16] = "";
                int fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (fd >= 0)
                        close(fd);
                cfg->daemon_unmapped = true;
                cfg->overflow_uid = n > 0 ? (uid_t)strtoul(buf, NULL, 10) : 65534;
        }
}

/* 1 when the two Setups build the same base (what a spare builds ahead, init.proto
 * Setup.prebuild). */
static bool same_base(const Sbx__Init__V1__Setup *a, const Sbx__Init__V1__Setup *b) {
        const char *ra = a->root_dir && a->root_dir[0] ? a->root_dir : "/";
        const char *rb = b->root_dir && b->root_dir[0] ? b->root_dir : "/";
        size_t i;

        if ((a->has_rootless && a->rootless) != (b->has_rootless && b->rootless) ||
            a->outer_uid != b->outer_uid || a->outer_gid != b->outer_gid ||
            a->outer_subgid != b->outer_subgid ||
            (a->has_network_none && a->network_none) != (b->has_network_none && b->network_none) ||
            (a->has_tmp_bytes ? a->tmp_bytes : 0) != (b->has_tmp_bytes ? b->tmp_bytes : 0) ||
            strcmp(ra, "/") != 0 || strcmp(rb, "/") != 0 || a->root_object || b->root_object ||
            strcmp(a->sandboxes_dir ? a->sandboxes_dir : "", b->sandboxes_dir ? b->sandboxes_dir : "") ||
            a->n_cgroup_v1_controllers != b->n_cgroup_v1_controllers)
                return false;
        for (i = 0; i < a->n_cgroup_v1_controllers; i++)
                if (strcmp(a->cgroup_v1_controllers[i], b->cgroup_v1_controllers[i]) != 0)
                        return false;
        return true;
}

/* A spare built ahead: its base is done. Tells the daemon (Built) and waits for the
 * sandbox's own Setup, which must build on that base; *ret_msg (kept for PID 1's life)
 * and *adopt_fd (its adoption socket, -1: none) and *ws_fd (its workspace's mount, -1:
 * none) on success. Returns 0, 1 when the daemon went away without a use for the spare,
 * or -errno with err. */
static int await_own_setup(int chan, const Sbx__Init__V1__Setup *base,
                           Sbx__Init__V1__ToInit **ret_msg, int *adopt_fd, int *ws_fd,
                           struct util_err *err) {
        Sbx__Init__V1__FromInit built_msg = SBX__INIT__V1__FROM_INIT__INIT;
        Sbx__Init__V1__Built built = SBX__INIT__V1__BUILT__INIT;
        struct setup_fds sf = {.adopt_fd = -1, .workspace_fd = -1, .upper_fd = -1, .joined = true};
        const Sbx__Init__V1__Setup *s;
        int r;

        built_msg.body_case = SBX__INIT__V1__FROM_INIT__BODY_BUILT;
        built_msg.built = &built;
        r = initmsg_send(chan, &built_msg.base, NULL, 0);
        if (r < 0)
                return r == -EPIPE ? 1 : util_fail(err, -r, NULL, "send Built");
        r = read_setup(chan, ret_msg, &sf, err);
        if (r < 0)
                return err->err == EPIPE ? 1 : r;
        s = (*ret_msg)->setup;
        *adopt_fd = sf.adopt_fd;
        *ws_fd = sf.workspace_fd;
        util_log_set_sandbox(s->sandbox_id);
        r = validate_setup(s, err);
        if (r == 0 && s->has_prebuild && s->prebuild)
                r = util_fail(err, EPROTO, NULL, "a second Setup with prebuild");
        if (r == 0 && !same_base(base, s))
                r = util_fail(err, EPROTO, NULL, "Setup does not build on the spare's base");
        return r;
}

/* PID 1: the checklist. Returns its exit code. */
/* Set by stage 0 before it forks PID 1: the sandbox's processes keep the daemon's
 * supplementary groups (rootless, where they could not be dropped). */
static bool groups_kept;

/* An image's sandbox, root mode: its writable paths as mounts stage 0 prepared (see
 * mnt_prepare_writable), for PID 1. */
static int writable_mounts[SBX_MAX_POLICY_PATHS];
static bool writable_dirs[SBX_MAX_POLICY_PATHS];
static bool writable_prepared;
static struct util_warnings stage0_warn; /* what preparing them warned, for Ready */

static int pid1(int chan, const Sbx__Init__V1__Setup *s, int pidpipe, int adopt_fd, int ws_fd,
                int root_fd) {
        static struct view_config vc;
        Sbx__Init__V1__ToInit *own = NULL;
        struct util_warnings warn;
        struct util_err err;
        struct serve_config cfg;
        struct mnt_host host = {.fd = -1};
        int32_t host_pid = 0;
        int r, sigfd = -1, proxy_fd = -1;

        warn = stage0_warn;
        memset(&err, 0, sizeof(err));

        /* 1. Die with stage 0. */
        r = tie_to_stage0(pidpipe, &host_pid, &err);
        if (r != 0)
                return r > 0 ? 1 : setup_failed(chan, &err, 0);

        /* 2. Signals, the bounding set and securebits, the commands' stack. Root of an
         * image's sandbox is root of its own namespace, with a few capabilities there. */
        if (s->n_image_layers)
                caps_keep(SBX_IMAGE_CAPS);
        if (prepare_commands(&sigfd, &err) < 0)
                return setup_failed(chan, &err, host_pid);

        /* 3. The seccomp filter, built once. */
        if (build_filter(&filter, s->n_image_layers && s->has_setid_modes && s->setid_modes, &err,
                         &warn) < 0)
                return setup_failed(chan, &err, host_pid);
        if (groups_kept)
                util_warn(&warn, "commands keep the daemon user's supplementary groups, and what "
                                 "each may reach on the host (a daemon's socket group too); to "
                                 "drop them, install uidmap and give the user a range in "
                                 "/etc/subgid");

        /* 4. The network. */
        if (s->has_network_none && s->network_none && ns_loopback_up(&err) < 0)
                return setup_failed(chan, &err, host_pid);

        /* 5. The view's base. */
        view_config_fill(s, &vc);
        vc.mc.workspace_mount = ws_fd >= 0;
        vc.mc.workspace_fd = ws_fd;
        vc.mc.image_root = root_fd >= 0;
        vc.mc.root_mount_fd = root_fd;
        if (writable_prepared) {
                vc.mc.writable_mounts = writable_mounts;
                vc.mc.writable_dirs = writable_dirs;
        }
        if (mnt_view_base(&vc.mc, &host, &err, &warn) < 0)
                return setup_failed(chan, &err, host_pid);
        view_ptys = vc.mc.ptys;

        /* A spare built ahead waits here for the Setup of the sandbox it becomes, whose
         * ptys its devpts takes now (its owner's budget: fewer, or none). */
        if (s->has_prebuild && s->prebuild) {
                r = await_own_setup(chan, s, &own, &adopt_fd, &ws_fd, &err);
                if (r != 0)
                        return r > 0 ? 0 : setup_failed(chan, &err, host_pid);
                s = own->setup;
                view_config_fill(s, &vc);
                vc.mc.workspace_mount = ws_fd >= 0;
                vc.mc.workspace_fd = ws_fd;
                vc.mc.image_root = root_fd >= 0;
                vc.mc.root_mount_fd = root_fd;
                if (vc.mc.ptys != view_ptys && mnt_set_ptys(vc.mc.ptys, &err) < 0)
                        return setup_failed(chan, &err, host_pid);
                view_ptys = vc.mc.ptys;
        }

        /* 6. Host name, and the egress proxy's socket: made here, inside the sandbox's
         * own network namespace, and handed to the daemon with Ready: no setns from the
         * daemon (which a rootless one could not do), no relay process, no Unix socket
         * bound into the view. */
        if (ns_set_hostname(s->hostname, &err) < 0)
                return setup_failed(chan, &err, host_pid);
        if (s->has_proxy_port && s->proxy_port > 0 && s->proxy_port < 65536 &&
            s->has_network_none && s->network_none &&
            (proxy_fd = ns_proxy_listen(s->proxy_port, &err)) < 0)
                return setup_failed(chan, &err, host_pid);

        /* 7. The rest of the view: the sandbox's own paths. */
        if (mnt_view_finish(&vc.mc, &host, &err, &warn) < 0)
                return setup_failed(chan, &err, host_pid);
        if (ws_fd >= 0)
                close(ws_fd); /* attached: the mount is the view's now */

        /* 8. The filter, loaded here, once, for every command; a warm sandbox's at its
         * Claim (claim_view), after its owner's ptys, and it starts nothing before. */
        if (!(s->has_warm && s->warm) && load_filter(&filter, &err) < 0)
                return setup_failed(chan, &err, host_pid);

        /* 9. Ready, then serve. */
        send_ready(chan, NULL, &warn, host_pid, proxy_fd);
        serve_config_fill(s, adopt_fd, host_pid, proxy_fd, &cfg);
        /* Building the view and the filter left most of the heap free: give it back,
         * since an idle sandbox keeps this process for its whole life. */
        malloc_trim(0);
        r = serve_run(chan, sigfd, &cfg);
        if (r < 0) {
                util_log(UTIL_LOG_ERR, "init channel: %s", strerror(-r));
                return 2;
        }
        return 0;
}

/* Stage 0: cgroup, namespaces, fork PID 1, wait for it. Returns the exit code. */
/* Root mode, an image: the overlay of its layers idmapped through the sandbox's own user
 * namespace (made here, as the host's root) and its writable paths prepared, then into
 * that namespace as its root. */
static int image_root_as_host(const Sbx__Init__V1__Setup *s, const char *upper,
                              int *ret_root_fd, struct util_err *err,
                              struct util_warnings *warn) {
        static struct view_config vc;
        int userns = image_userns(s->has_image_uid_base ? s->image_uid_base : 0, err), r;

        if (userns < 0)
                return userns;
        *ret_root_fd = image_mount_root(s->image_layers, s->n_image_layers, upper, userns, false,
                                        err);
        r = *ret_root_fd < 0 ? *ret_root_fd : 0;
        if (r == 0 && s->n_writable_paths) {
                view_config_fill(s, &vc);
                r = mnt_prepare_writable(&vc.mc, writable_mounts, writable_dirs, err, warn);
                writable_prepared = r == 0;
        }
        if (r == 0)
                r = image_enter_userns(userns, err);
        close(userns);
        return r;
}

/* Root mode, an image with a tmpfs disk limit: one tmpfs, made here as the host's root
 * and attached nowhere, holds the writable root (sf->upper_fd from now on, in the place
 * of a disk image's) and the workspace (*ws_fd, a copy of its directory). 0, or -errno
 * with err. */
static int disk_tmpfs_as_host(const Sbx__Init__V1__Setup *s, struct setup_fds *sf, int *ws_fd,
                              struct util_err *err) {
        uint32_t base = s->has_image_uid_base ? s->image_uid_base : 0;
        uint32_t uid = s->has_run_uid ? s->run_uid : 0, gid = s->has_run_gid ? s->run_gid : 0;
        int ws = -1, mnt;

        if (uid >= SBX_IMAGE_IDS || gid >= SBX_IMAGE_IDS)
                return util_fail(err, EINVAL, NULL, "Setup: run ids %u:%u in an image's block",
                                 (unsigned)uid, (unsigned)gid);
        mnt = image_disk_tmpfs_detached(s->has_workspace_bytes ? s->workspace_bytes : 0,
                                        s->has_workspace_inodes ? s->workspace_inodes : 0, base,
                                        base + uid, base + gid, &ws, err);
        if (mnt < 0)
                return mnt;
        if (sf->upper_fd >= 0)
                close(sf->upper_fd);
        sf->upper_fd = mnt;
        if (*ws_fd >= 0)
                close(*ws_fd);
        *ws_fd = ws;
        return 0;
}

static int stage0(int chan, const Sbx__Init__V1__Setup *s, struct setup_fds *sf) {
        int adopt_fd = sf->adopt_fd, ws_fd = sf->workspace_fd, root_fd = -1;
        char upper[64];
        /* The writable root: a directory of the host's, or on the disk image's mount. */
        const char *upper_dir = s->image_upper;

        if (!s->n_image_layers && sf->upper_fd >= 0) {
                close(sf->upper_fd);
                sf->upper_fd = -1;
        }
        struct util_err err;
        int32_t host_pid;
        int p[2], status, r;
        pid_t pid;

        memset(&err, 0, sizeof(err));
        /* The cgroup first: before the cgroup namespace is made (its root is the group
         * we are in then) and before anything is forked (children stay where they are
         * born). */
        r = sf->joined ? 0
                       : util_join_cgroups(sf->cgroup_fds, sf->n_cgroup_fds,
                                           s->has_cgroup_v2 && s->cgroup_v2);
        setup_fds_close_cgroups(sf);
        if (r < 0) {
                util_fail(&err, -r, NULL, "join the sandbox's cgroup");
                return setup_failed(chan, &err, 0);
        }
        if (s->has_rootless && s->rootless) {
                struct ns_ids ids = {
                        .outer_uid = s->has_outer_uid ? s->outer_uid : geteuid(),
                        .outer_gid = s->has_outer_gid ? s->outer_gid : getegid(),
                        .subgid = s->has_outer_subgid ? s->outer_subgid : 0,
                        .subuid = s->has_outer_subuid ? s->outer_subuid : 0,
                        .n_ids = s->n_image_layers && s->has_image_subids ? s->image_subids : 0,
                };
                if (ns_enter_user(&ids, &groups_kept, &err) < 0)
                        return setup_failed(chan, &err, 0);
        } else if (s->n_image_layers) {
                if (s->has_workspace_tmpfs && s->workspace_tmpfs &&
                    disk_tmpfs_as_host(s, sf, &ws_fd, &err) < 0)
                        return setup_failed(chan, &err, 0);
                if (sf->upper_fd >= 0) {
                        snprintf(upper, sizeof(upper), "/proc/self/fd/%d", sf->upper_fd);
                        upper_dir = upper;
                }
                r = image_root_as_host(s, upper_dir, &root_fd, &err, &stage0_warn);
                if (sf->upper_fd >= 0)
                        close(sf->upper_fd); /* the overlay holds it now */
                sf->upper_fd = -1;
                if (r < 0)
                        return setup_failed(chan, &err, 0);
        }
        /* In a user namespace of its own: what its processes charge to the daemon's
         * user is bounded. */
        if (((s->has_rootless && s->rootless) || s->n_image_layers) &&
            ns_bound_inotify(&stage0_warn, &err) < 0)
                return setup_failed(chan, &err, 0);
        if (ns_unshare_sandbox(s->has_network_none && s->network_none, &err) < 0)
                return setup_failed(chan, &err, 0);
        if (s->n_image_layers && root_fd < 0 && s->has_workspace_tmpfs && s->workspace_tmpfs &&
            image_disk_tmpfs(upper_dir, s->has_workspace_bytes ? s->workspace_bytes : 0,
                             s->has_workspace_inodes ? s->workspace_inodes : 0,
                             s->has_run_uid && s->run_uid != 0, &err) < 0)
                return setup_failed(chan, &err, 0);
        if (s->n_image_layers && root_fd < 0) {
                root_fd = image_mount_root(s->image_layers, s->n_image_layers, upper_dir, -1,
                                           false, &err);
                if (root_fd < 0)
                        return setup_failed(chan, &err, 0);
        }
        if (pipe2(p, O_CLOEXEC) < 0) {
                util_fail(&err, errno, NULL, "pipe");
                return setup_failed(chan, &err, 0);
        }
        pid = fork();
        if (pid < 0) {
                util_fail(&err, errno, "the pid limit may be reached", "fork PID 1");
                return setup_failed(chan, &err, 0);
        }
        if (pid == 0) {
                close(p[1]);
                _exit(pid1(chan, s, p[0], adopt_fd, ws_fd, root_fd));
        }
        close(p[0]);
        close(chan);
        if (adopt_fd >= 0)
                close(adopt_fd); /* PID 1's alone */
        if (ws_fd >= 0)
                close(ws_fd); /* PID 1's alone */
        if (root_fd >= 0)
                close(root_fd); /* PID 1's alone */
        /* Our pid namespace is the daemon's: fork() returned PID 1's pid there. The
         * write end stays open until we exit (see pid1()). */
        host_pid = (int32_t)pid;
        if (write(p[1], &host_pid, sizeof(host_pid)) != (ssize_t)sizeof(host_pid)) {
                util_log(UTIL_LOG_ERR, "pass PID 1's pid: %s", strerror(errno));
                kill(pid, SIGKILL);
        }
        malloc_trim(0); /* from now on it only waits: its free heap goes back */
        while (waitpid(pid, &status, 0) < 0) {
                if (errno != EINTR) {
                        util_log(UTIL_LOG_ERR, "wait for PID 1: %s", strerror(errno));
                        return 1;
                }
        }
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
}

/* Enters a user namespace where our ids are 0 and ids 1 .. N the user's subordinate ids
 * from SUBUID and SUBGID (ns.h), whose capabilities reach every file of those ids: a[0]
 * SUBUID, a[1] SUBGID, a[2] N (at most SBX_IMAGE_IDS - 1 are mapped), what the daemon's
 * image sandboxes map (daemon/sbimage.c). 0, or 2 (bad ids) or 1 (logged as what). */
static int enter_subids(char **a, const char *what) {
        struct ns_ids ids = {.outer_uid = geteuid(), .outer_gid = getegid()};
        unsigned long v[3];
        struct util_err err;
        bool kept;
        char *end;
        size_t i;

        memset(&err, 0, sizeof(err));
        for (i = 0; i < 3; i++) {
                errno = 0;
                v[i] = strtoul(a[i], &end, 10);
                if (errno || *end || end == a[i] || v[i] == 0 || v[i] > UINT32_MAX) {
                        util_log(UTIL_LOG_ERR, "%s: bad ids", what);
                        return 2;
                }
        }
        ids.subuid = (uid_t)v[0];
        ids.subgid = (gid_t)v[1];
        ids.n_ids = v[2] < SBX_IMAGE_IDS ? (unsigned)v[2] : SBX_IMAGE_IDS - 1;
        if (ns_enter_user(&ids, &kept, &err) < 0) {
                util_log(UTIL_LOG_ERR, "%s: %s", what, err.text);
                return 1;
        }
        return 0;
}

/* --remove PATH SUBUID SUBGID N: rm -rf PATH in the namespace of enter_subids. Returns
 * rm's status, or 1 (2: bad arguments). */
static int remove_tree(char **a) {
        static const char *const rms[] = {"/usr/bin/rm", "/bin/rm"};
        size_t i;
        int r;

        if (a[0][0] != '/') {
                util_log(UTIL_LOG_ERR, "--remove %s: not absolute", a[0]);
                return 1;
        }
        r = enter_subids(a + 1, "--remove");
        if (r != 0)
                return r;
        for (i = 0; i < 2; i++)
                if (access(rms[i], X_OK) == 0)
                        execl(rms[i], "rm", "-rf", "--one-file-system", a[0], (char *)NULL);
        util_log(UTIL_LOG_ERR, "--remove: no rm to run");
        return 1;
}

/* --subids-exec SUBUID SUBGID N PROGRAM [ARG...]: PROGRAM (argv[0] PROGRAM) run in the
 * namespace of enter_subids; the daemon's image store unpacks and deletes layers so
 * (daemon/layerns.h), with its own binary as PROGRAM. The fds are PROGRAM's as they
 * came. Returns 1 when PROGRAM cannot run (2: bad arguments). */
static int subids_exec(char **a) {
        int r = enter_subids(a, "--subids-exec");

        if (r != 0)
                return r;
        execv(a[3], a + 3);
        util_log(UTIL_LOG_ERR, "--subids-exec %s: %s", a[3], strerror(errno));
        return 1;
}

int main(int argc, char **argv) {
        Sbx__Init__V1__ToInit *m = NULL;
        struct setup_fds sf = {.adopt_fd = -1, .workspace_fd = -1, .upper_fd = -1};
        struct util_err err;
        int chan, r;

        memset(&err, 0, sizeof(err));
        /* The daemon's helper: mount over a path the host replaced or created (mnt.h),
         * in the sandbox's mount namespace, which it enters itself through PID 1's pidfd
         * (--pidfd), after everything it loads has come from the host. */
        if (argc >= 4 && strcmp(argv[1], "--reapply") == 0 &&
            (strcmp(argv[2], "hide") == 0 || strcmp(argv[2], "read-only") == 0)) {
                struct stat bare;
                r = enter_sandbox(argc - 4, argv + 4);
                if (r < 0)
                        return r == -EINVAL ? 2 : 1;
                r = mnt_reapply(strcmp(argv[2], "hide") == 0, argv[3], &bare, &err);
                if (r < 0) {
                        util_log(UTIL_LOG_ERR, "%s", err.text);
                        return 1;
                }
                if (r > 0 && (r = kill_holders(&bare)) > 0)
                        util_log(UTIL_LOG_WARNING,
                                 "%s: killed %d process(es) that opened it before it was "
                                 "covered again",
                                 argv[3], r);
                return 0;
        }
        /* The daemon's helper (trash.c): a tree that holds files of the user's
         * subordinate ids, removed from a user namespace that maps them. */
        if (argc == 6 && strcmp(argv[1], "--remove") == 0)
                return remove_tree(argv + 2);
        if (argc >= 6 && strcmp(argv[1], "--subids-exec") == 0)
                return subids_exec(argv + 2);
        if (parse_args(argc, argv, &chan) < 0) {
                usage();
                return 2;
        }
        r = sanitize_fds(chan);
        if (r < 0) {
                util_log(UTIL_LOG_ERR, "--fd %d: not an init channel (%s)", chan, strerror(-r));
                return 2;
        }
        /* Hold nothing of the daemon's current directory. */
        if (chdir("/") < 0) {
                util_log(UTIL_LOG_ERR, "chdir /: %s", strerror(errno));
                return 1;
        }
        if (read_setup(chan, &m, &sf, &err) < 0) {
                /* A spare whose daemon went away before it had a use for it. */
                if (sf.joined && err.err == EPIPE)
                        return 0;
                util_log(UTIL_LOG_ERR, "%s", err.text);
                send_ready(chan, &err, NULL, 0, -1);
                return 1;
        }
        util_log_set_sandbox(m->setup->sandbox_id);
        if (validate_setup(m->setup, &err) < 0) {
                setup_fds_close_cgroups(&sf);
                r = setup_failed(chan, &err, 0);
                sbx__init__v1__to_init__free_unpacked(m, NULL);
                return r;
        }
        r = stage0(chan, m->setup, &sf);
        sbx__init__v1__to_init__free_unpacked(m, NULL);
        return r;
}
