/* guard.c: re-covers hidden and read-only paths the host replaced or created (guard.h). */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "log.h"
#include "sandbox_int.h"
#include "sbxd.h"

#define GUARD_EVENTS (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* One guarded path of one sandbox. */
struct guard_path {
        struct guard_path *next;
        struct sandbox *sb;
        int wd;           /* the watch of its directory */
        int hide;         /* denied_read; else read-only */
        char *path;       /* absolute, in the host's and the sandbox's view alike */
        const char *name; /* its last component, inside path */
};

/* A helper running `sbx-init --reapply`, reaped through its pidfd. */
struct guard_helper {
        uv_poll_t poll;
        int pidfd;
        char *what;
};

struct guard {
        struct sbxd *d;
        int fd;
        int exe_fd; /* the sbx-init binary, O_PATH */
        uv_poll_t poll;
        struct guard_path *paths;
};

/* 1 when path is covered by a mount of its own in the view of the process pid (its mount
 * differs from its directory's), or is absent; 0 when it lies bare. */
static int covered(pid_t pid, const char *path) {
        char p[PATH_MAX + 64], *slash;
        struct statx a, b;
        size_t len;

        len = (size_t)snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, path);
        if (len >= sizeof(p))
                return 1;
        if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &a) < 0)
                return 1; /* gone (or the sandbox is): nothing to cover */
        slash = strrchr(p, '/');
        *slash = '\0';
        if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &b) < 0 ||
            !(a.stx_mask & b.stx_mask & STATX_MNT_ID))
                return 1;
        return a.stx_mnt_id != b.stx_mnt_id;
}

static void on_helper_closed(uv_handle_t *h) {
        struct guard_helper *k = h->data;
        close(k->pidfd);
        free(k->what);
        free(k);
}

static void on_helper_exit(uv_poll_t *p, int status, int events) {
        struct guard_helper *k = p->data;
        siginfo_t si;

        memset(&si, 0, sizeof(si));
        if (waitid((idtype_t)P_PIDFD, (id_t)k->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return; /* not yet (or not ours to wait for) */
        if (si.si_code == CLD_EXITED && si.si_status == 0)
                log_notice("%s: covered again", k->what);
        else
                log_err("%s: could not cover it again (helper status %d)", k->what, si.si_status);
        uv_poll_stop(p);
        uv_close((uv_handle_t *)p, on_helper_closed);
}

/* Runs `sbx-init --reapply` in sb's mount namespace for gp. */
static void reapply(struct guard *g, struct guard_path *gp) {
        struct sandbox *sb = gp->sb;
        char *argv[] = {(char *)"sbx-init", (char *)"--reapply",
                        (char *)(gp->hide ? "hide" : "read-only"), gp->path, NULL};
        char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        int flags = CLONE_NEWNS | (sb->d->features.rootless ? CLONE_NEWUSER : 0);
        struct guard_helper *k;
        pid_t pid;

        k = calloc(1, sizeof(*k));
        if (!k || asprintf(&k->what, "sbx=%s: %s %s changed on the host", sb->id,
                           gp->hide ? "hidden path" : "read-only path", gp->path) < 0) {
                free(k);
                log_err("sbx=%s: cannot cover %s again: out of memory", sb->id, gp->path);
                return;
        }
        pid = fork();
        if (pid == 0) {
                /* Only system calls here: the daemon has threads. */
                if (setns(sb->init_pidfd, flags) == 0)
                        syscall(SYS_execveat, g->exe_fd, "", argv, envp, AT_EMPTY_PATH);
                _exit(127);
        }
        if (pid < 0 || (k->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0 ||
            uv_poll_init(sb->d->loop, &k->poll, k->pidfd) < 0) {
                log_err("%s: cannot start a helper: %s", k->what, strerror(errno));
                if (pid > 0)
                        (void)waitpid(pid, NULL, 0);
                if (k->pidfd > 0)
                        close(k->pidfd);
                free(k->what);
                free(k);
                return;
        }
        k->poll.data = k;
        uv_poll_start(&k->poll, UV_READABLE, on_helper_exit);
}

/* Covers gp again when its sandbox is up and the path lies bare. */
static void check(struct guard *g, struct guard_path *gp) {
        struct sandbox *sb = gp->sb;

        if (sb->state != SBX__V1__SANDBOX_STATE__READY || sb->init_pid <= 0 || sb->init_pidfd < 0 ||
            covered(sb->init_pid, gp->path))
                return;
        reapply(g, gp);
}

static void on_events(uv_poll_t *p, int status, int events) {
        struct guard *g = p->data;
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        while ((n = read(g->fd, buf, sizeof(buf))) > 0) {
                const char *at = buf;
                while (at < buf + n) {
                        const struct inotify_event *ev = (const struct inotify_event *)at;
                        struct guard_path *gp;

                        at += sizeof(*ev) + ev->len;
                        for (gp = g->paths; gp; gp = gp->next) {
                                /* An overflow lost events: look at everything. */
                                if ((ev->mask & IN_Q_OVERFLOW) || (ev->len && gp->wd == ev->wd &&
                                                                   strcmp(gp->name, ev->name) == 0))
                                        check(g, gp);
                        }
                }
        }
}

int guard_start(struct sbxd *d, const char *init_path) {
        struct guard *g = calloc(1, sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        g->d = d;
        g->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        g->exe_fd = open(init_path, O_PATH | O_CLOEXEC);
        if (g->fd < 0 || g->exe_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = uv_poll_init(d->loop, &g->poll, g->fd);
        if (r < 0)
                goto fail;
        g->poll.data = g;
        uv_poll_start(&g->poll, UV_READABLE, on_events);
        uv_unref((uv_handle_t *)&g->poll); /* it never keeps the loop alive */
        d->guard = g;
        return 0;
fail:
        if (g->fd >= 0)
                close(g->fd);
        if (g->exe_fd >= 0)
                close(g->exe_fd);
        free(g);
        return r;
}

void guard_add(struct sbxd *d, struct sandbox *sb, char *const *paths, size_t n, int hide) {
        struct guard *g = d->guard;
        const char *root = sb->spec && sb->spec->policy ? sb->spec->policy->root_dir : NULL;
        size_t i;

        if (!g || (root && root[0] && strcmp(root, "/") != 0))
                return;
        for (i = 0; i < n; i++) {
                struct guard_path *gp;
                char *slash;
                int wd;

                if (!paths[i] || paths[i][0] != '/')
                        continue;
                gp = calloc(1, sizeof(*gp));
                if (!gp || !(gp->path = strdup(paths[i]))) {
                        free(gp);
                        return;
                }
                slash = strrchr(gp->path, '/');
                *slash = '\0';
                wd = inotify_add_watch(g->fd, gp->path[0] ? gp->path : "/", GUARD_EVENTS);
                *slash = '/';
                if (wd < 0) {
                        /* Its directory is missing (then nothing can appear in it) or
                         * the watches ran out. */
                        if (errno != ENOENT && errno != ENOTDIR)
                                log_warning("sbx=%s: cannot watch the directory of %s: %s", sb->id,
                                            paths[i], strerror(errno));
                        free(gp->path);
                        free(gp);
                        continue;
                }
                gp->sb = sb;
                gp->wd = wd;
                gp->hide = hide;
                gp->name = slash + 1;
                gp->next = g->paths;
                g->paths = gp;
        }
}

void guard_forget(struct sbxd *d, const struct sandbox *sb) {
        struct guard *g = d->guard;
        struct guard_path **pp, *gp;

        if (!g)
                return;
        for (pp = &g->paths; (gp = *pp);) {
                struct guard_path *o;
                int used = 0;

                if (gp->sb != sb) {
                        pp = &gp->next;
                        continue;
                }
                *pp = gp->next;
                for (o = g->paths; o && !used; o = o->next)
                        used = o->wd == gp->wd;
                if (!used)
                        inotify_rm_watch(g->fd, gp->wd);
                free(gp->path);
                free(gp);
        }
}

static void on_guard_closed(uv_handle_t *h) {
        struct guard *g = h->data;
        close(g->fd);
        close(g->exe_fd);
        free(g);
}

void guard_stop(struct sbxd *d) {
        struct guard *g = d->guard;
        struct guard_path *gp;

        if (!g)
                return;
        while ((gp = g->paths)) {
                g->paths = gp->next;
                free(gp->path);
                free(gp);
        }
        uv_poll_stop(&g->poll);
        uv_close((uv_handle_t *)&g->poll, on_guard_closed);
        d->guard = NULL;
}
