/* trash.c: deleting what ended sandboxes leave on the host, off the event loop; see
 * trash.h.
 *
 * A workspace is first renamed into STATE/trash (instant, and out of every path a new
 * sandbox could be given), then deleted by an rm(1) child. Where pidfds exist (Linux
 * 5.3; not under valgrind) the child is started with posix_spawn (a vfork: the daemon's
 * page tables are not copied, which uv_spawn's fork did for every terminate, 1-3 ms of a
 * stalled loop) and reaped through its pidfd (libuv reaps only the children it spawned
 * itself); elsewhere through uv_spawn. Either way the loop never waits for rm. When no
 * child can be started (or the workspace cannot be renamed into the trash) the tree is
 * deleted here, synchronously, without following symlinks or entering another mount, as
 * rm --one-file-system. Owns each remover until its child is reaped. Called by the
 * sandbox modules (the end, recovery) and by main at start-up. */
#include "trash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "disk.h"
#include "log.h"
#include "sbx_limits.h"
#include "sbxd.h"

/* 1 when the directory fd is the root of a mount, or on another device than top's:
 * another filesystem, or a bind mount, which the removal must not enter. */
static int other_mount(int fd, const struct statx *top) {
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0)
                return 1;
        return stx.stx_dev_major != top->stx_dev_major ||
               stx.stx_dev_minor != top->stx_dev_minor ||
               ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
                (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT));
}

/* Removes dirfd/name and everything below it without following symlinks and, as
 * `rm --one-file-system`, without entering a mount below it (top: the tree's own
 * directory; NULL at the top itself): such a directory is left, with -EXDEV. */
static int rm_rf_at(int parent, const char *name, const struct statx *top, int depth) {
        struct statx here;
        int fd, r = 0;
        DIR *d;
        struct dirent *de;

        if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (depth > 256)
                return -ELOOP;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &here) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if (top && other_mount(fd, top)) {
                close(fd);
                return -EXDEV;
        }
        /* Make sure we can enter and delete even when the sandbox chmod'ed it. */
        (void)fchmod(fd, 0700);
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                int rr;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                rr = rm_rf_at(dirfd(d), de->d_name, top ? top : &here, depth + 1);
                if (rr < 0 && r == 0)
                        r = rr;
        }
        closedir(d);
        if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

static int rm_rf(const char *path) {
        return rm_rf_at(AT_FDCWD, path, NULL, 0);
}
/* A tree being deleted by an rm(1) child (see the top of this file). */
struct remover {
        union {
                uv_poll_t poll;    /* pidfd >= 0 */
                uv_process_t proc; /* pidfd < 0 */
        } h;
        int pidfd;
        pid_t pid;
        char *path;
        struct remover *next, *prev; /* the running ones (removers) */
};

/* The removers whose child runs, for trash_stop; and its timer. The daemon has one loop,
 * and these are touched on it only. */
static struct remover *removers;
static uv_timer_t stop_timer;
static int stop_timer_on;

static void running_add(struct remover *rm) {
        rm->prev = NULL;
        rm->next = removers;
        if (removers)
                removers->prev = rm;
        removers = rm;
}

static void running_remove(struct remover *rm) {
        if (rm->prev)
                rm->prev->next = rm->next;
        else if (removers == rm)
                removers = rm->next;
        if (rm->next)
                rm->next->prev = rm->prev;
        rm->next = rm->prev = NULL;
        /* Shutting down and nothing left to wait for: the timer goes too. */
        if (!removers && stop_timer_on) {
                stop_timer_on = 0;
                uv_close((uv_handle_t *)&stop_timer, NULL);
        }
}

static const char *rm_binary(void) {
        static const char *const candidates[] = {"/usr/bin/rm", "/bin/rm"};
        size_t i;
        for (i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
                if (access(candidates[i], X_OK) == 0)
                        return candidates[i];
        return NULL;
}

static void on_remover_closed(uv_handle_t *h) {
        struct remover *rm = h->data;
        if (rm->pidfd >= 0)
                close(rm->pidfd);
        free(rm->path);
        free(rm);
}

static void remover_done(struct remover *rm, int ok, const char *how, int value) {
        running_remove(rm);
        if (!ok)
                log_warning("cannot remove %s completely (rm ended with %s %d)", rm->path, how,
                            value);
        uv_close(rm->pidfd >= 0 ? (uv_handle_t *)&rm->h.poll : (uv_handle_t *)&rm->h.proc,
                 on_remover_closed);
}

static void on_remover_pidfd(uv_poll_t *h, int status, int events) {
        struct remover *rm = h->data;
        siginfo_t si;

        memset(&si, 0, sizeof(si));
        if (waitid(P_PIDFD, (id_t)rm->pidfd, &si, WEXITED | WNOHANG) < 0) {
                int st;
                if (errno == EINTR)
                        return;
                /* Linux 5.3 has pidfds but not P_PIDFD (5.4): wait by pid, which is
                 * still ours (the child is a zombie until reaped here). */
                if (errno == EINVAL && waitpid(rm->pid, &st, WNOHANG) == 0)
                        return;
                /* Anything else: there is nothing left to wait for. */
                remover_done(rm, 1, "", 0);
                return;
        }
        if (si.si_pid == 0)
                return; /* not yet */
        remover_done(rm, si.si_code == CLD_EXITED && si.si_status == 0,
                     si.si_code == CLD_EXITED ? "status" : "signal", si.si_status);
}

static void on_remover_exit(uv_process_t *p, int64_t status, int term_signal) {
        remover_done(p->data, status == 0 && term_signal == 0, term_signal ? "signal" : "status",
                     term_signal ? term_signal : (int)status);
}

/* posix_spawn and a pidfd. Returns 0 (started, or already done and rm freed), 1 when
 * pidfds are missing (nothing was started), -errno when posix_spawn failed (rm is left
 * to the caller). */
static int start_remover_pidfd(struct sbxd *d, struct remover *rm, const char *rm_bin,
                               char **args) {
        static int no_pidfd;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        int r, probe;

        if (no_pidfd)
                return 1;
        /* Whether this kernel (or valgrind) has pidfds, asked once of our own pid. */
        probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
        if (probe < 0) {
                no_pidfd = 1;
                return 1;
        }
        close(probe);
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawnattr_init(&attr);
        /* Default dispositions and an empty mask in the child, whatever libuv set up. */
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        r = -posix_spawn(&rm->pid, rm_bin, &fa, &attr, args, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r < 0)
                return r;
        rm->pidfd = (int)syscall(SYS_pidfd_open, rm->pid, 0);
        if (rm->pidfd < 0 || uv_poll_init(d->loop, &rm->h.poll, rm->pidfd) < 0) {
                /* Cannot happen once the probe worked; rm has the tree to itself. */
                if (rm->pidfd >= 0)
                        close(rm->pidfd);
                rm->pidfd = -1;
                while (waitpid(rm->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                free(rm->path);
                free(rm);
                return 0;
        }
        fcntl(rm->pidfd, F_SETFD, FD_CLOEXEC);
        rm->h.poll.data = rm;
        uv_poll_start(&rm->h.poll, UV_READABLE, on_remover_pidfd);
        running_add(rm);
        return 0;
}

/* uv_spawn. Returns 0, or -errno after which rm goes with its handle's close. */
static int start_remover_uv(struct sbxd *d, struct remover *rm, const char *rm_bin, char **args) {
        uv_process_options_t o;
        uv_stdio_container_t stdio[3];
        int r;

        memset(&o, 0, sizeof(o));
        memset(stdio, 0, sizeof(stdio));
        stdio[0].flags = stdio[1].flags = UV_IGNORE;
        stdio[2].flags = UV_INHERIT_FD;
        stdio[2].data.fd = 2;
        o.file = rm_bin;
        o.args = args;
        o.stdio = stdio;
        o.stdio_count = 3;
        o.exit_cb = on_remover_exit;
        rm->h.proc.data = rm;
        r = uv_spawn(d->loop, &rm->h.proc, &o);
        if (r < 0)
                /* A handle that failed to spawn must still be closed. */
                uv_close((uv_handle_t *)&rm->h.proc, on_remover_closed);
        else
                running_add(rm);
        return r;
}

/* A rootless daemon whose image sandboxes map the user's subordinate ids (sbimage.h)
 * leaves files of those ids in workspaces and writable roots, which its user may not
 * delete: sbx-init removes them from a user namespace that maps the same ids
 * (`sbx-init --remove PATH SUBUID SUBGID N`, as podman's `unshare rm`). The ids as
 * text in buf (3 x 16 bytes); 0 when the daemon has none. */
static int subids_of(const struct sbxd *d, char buf[3][16]) {
        uint32_t n = hostfeat_image_subids(&d->features);

        if (!n || !d->cfg || !d->cfg->init_path)
                return 0;
        snprintf(buf[0], 16, "%u", (unsigned)d->features.subuid_start);
        snprintf(buf[1], 16, "%u", (unsigned)d->features.subgid);
        snprintf(buf[2], 16, "%u", (unsigned)n);
        return 1;
}

void trash_remove_later(struct sbxd *d, const char *path) {
        char ids[3][16];
        int ranged = subids_of(d, ids);
        const char *rm_bin = ranged ? d->cfg->init_path : rm_binary();
        struct remover *rm = rm_bin ? calloc(1, sizeof(*rm)) : NULL;
        char *args[7];
        int r = -ENOMEM;

        if (rm && (rm->path = strdup(path))) {
                rm->pidfd = -1;
                args[0] = (char *)"rm";
                args[1] = (char *)"-rf";
                args[2] = (char *)"--one-file-system";
                args[3] = rm->path;
                args[4] = NULL;
                if (ranged) {
                        args[0] = (char *)"sbx-init";
                        args[1] = (char *)"--remove";
                        args[2] = rm->path;
                        args[3] = ids[0];
                        args[4] = ids[1];
                        args[5] = ids[2];
                        args[6] = NULL;
                }
                r = start_remover_pidfd(d, rm, rm_bin, args);
                if (r == 0)
                        return;
                if (r == 1) {
                        r = start_remover_uv(d, rm, rm_bin, args);
                        if (r == 0)
                                return;
                        rm = NULL; /* its handle's close frees it */
                }
        }
        if (rm) {
                free(rm->path);
                free(rm);
        }
        r = rm_rf(path);
        if (r < 0)
                log_warning("cannot remove %s: %s", path, strerror(-r));
}

/* The writable root of an image's sandbox (sbimage.h), beside its workspace in dir:
 * never kept; to the trash, deleted off the loop. */
static void trash_image_root(struct sbxd *d, const char *id, const char *dir) {
        char root[SBX_PATH_MAX_BYTES + 16], trash[SBX_PATH_MAX_BYTES + 128];

        snprintf(root, sizeof(root), "%s/root", dir);
        snprintf(trash, sizeof(trash), "%s/trash/%s.root.%lld", d->cfg->state_dir, id,
                 (long long)sbxd_now_unix_ms());
        if (rename(root, trash) == 0)
                trash_remove_later(d, trash);
        else if (errno != ENOENT)
                trash_remove_later(d, root);
}

char *trash_sandbox_dir(struct sbxd *d, const char *id, const char *workspace, int mount_fd,
                        int keep) {
        char *dir = strdup(workspace), *slash, *later = NULL;

        /* A disk-limited workspace is an image first (disk.h). */
        disk_release(workspace, mount_fd, keep);
        if (!dir)
                return NULL;
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                if (!keep) {
                        char trash[SBX_PATH_MAX_BYTES + 128];
                        snprintf(trash, sizeof(trash), "%s/trash/%s.%lld", d->cfg->state_dir, id,
                                 (long long)sbxd_now_unix_ms());
                        if (rename(workspace, trash) == 0) {
                                later = strdup(trash);
                                if (!later)
                                        trash_remove_later(d, trash);
                        } else {
                                int r = rm_rf(workspace);
                                if (r < 0)
                                        log_warning("sbx=%s: cannot remove workspace %s: %s", id,
                                                    workspace, strerror(-r));
                        }
                }
                {
                        char sock[SBX_PATH_MAX_BYTES + 16];
                        snprintf(sock, sizeof(sock), "%s/init.sock", dir);
                        (void)unlink(sock);
                }
                trash_image_root(d, id, dir);
                (void)rmdir(dir);
        }
        free(dir);
        return later;
}

void trash_sandbox_dir_now(struct sbxd *d, const char *id, const char *workspace, int mount_fd,
                           int keep) {
        char *later = trash_sandbox_dir(d, id, workspace, mount_fd, keep);
        if (later)
                trash_remove_later(d, later);
        free(later);
}

void trash_empty(struct sbxd *d) {
        char path[SBX_PATH_MAX_BYTES + 16];
        DIR *dir;
        struct dirent *de;
        snprintf(path, sizeof(path), "%s/trash", d->cfg->state_dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return;
        dir = opendir(path);
        while (dir && (de = readdir(dir))) {
                char sub[SBX_PATH_MAX_BYTES + 300];
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                trash_remove_later(d, sub);
        }
        if (dir)
                closedir(dir);
}

/* The grace is over: each rm still running is killed (it is ours, by its pidfd or by
 * libuv's handle of it) and reaped as ever; what it left stays in STATE/trash. */
static void on_stop_timer(uv_timer_t *t) {
        struct remover *rm;

        for (rm = removers; rm; rm = rm->next) {
                log_notice("stopped deleting %s at shutdown: the next start goes on with it",
                           rm->path);
                if (rm->pidfd >= 0)
                        (void)syscall(SYS_pidfd_send_signal, rm->pidfd, SIGKILL, NULL, 0);
                else
                        (void)uv_process_kill(&rm->h.proc, SIGKILL);
        }
}

void trash_stop(struct sbxd *d, uint64_t grace_ms) {
        if (!removers || stop_timer_on)
                return;
        uv_timer_init(d->loop, &stop_timer);
        /* Unreferenced: the removers keep the loop; this only ends their wait. */
        uv_unref((uv_handle_t *)&stop_timer);
        uv_timer_start(&stop_timer, on_stop_timer, grace_ms, 0);
        stop_timer_on = 1;
}
