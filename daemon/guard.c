/* guard.c: re-covers hidden and read-only paths the host replaced or created (guard.h).
 * A sandbox is known here by its struct sandbox_view (sandbox_view.h), held from
 * guard_watch to guard_forget. */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "credcache.h"
#include "log.h"
#include "pathset.h"
#include "policy.h"
#include "sandbox_view.h"
#include "sbxd.h"

/* IN_ATTRIB: a listed credential (or its directory) whose permissions change may
 * become readable to sandboxes: the shared list is looked at again (credcache.h). */
#define GUARD_EVENTS                                                                               \
        (IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The descriptor the helper finds the sandbox's PID 1 at (`--pidfd`). */
#define HELPER_PIDFD 3

enum guard_kind { GUARD_HIDE, GUARD_READ_ONLY };

/* One watched path: of one sandbox, or (sv NULL) of the shared credential sets. */
struct guard_path {
        struct guard_path *next;
        struct sandbox_view *sv;
        int wd; /* the watch of its directory */
        enum guard_kind kind;
        char *path;       /* on the host */
        const char *name; /* the name watched for in wd: path's last component, or
                           * (pending) the next component below wd's directory */
        char *view;       /* in the sandbox's view; NULL: the same as path */
        char *pending;    /* its directory is missing: the name awaited in an ancestor */
        size_t pending_at; /* where pending begins in path */
        int on_change;    /* a credential below a root_dir, hidden only when the sandbox
                           * could read it: looked at when it changes, not on adoption */
};

/* A path the guard saw change while its sandbox was not ready (looked at on ready), or
 * one waiting for the helper running in its sandbox to end (one runs at a time). */
struct guard_missed {
        struct guard_missed *next;
        struct sandbox_view *sv;
        enum guard_kind kind;
        char *path, *view; /* as in guard_path; view may be NULL */
};

/* A sandbox that keeps the shared credential paths hidden (its root is the host's). */
struct guard_sub {
        struct guard_sub *next;
        struct sandbox_view *sv;
};

/* A helper running `sbx-init --reapply`, reaped through its pidfd. */
struct guard_helper {
        struct guard_helper *next;
        struct guard *g;
        uv_poll_t poll;
        int pidfd;
        struct sandbox_view *sv; /* NULL once the sandbox is gone */
        enum guard_kind kind;
        char *path; /* in the sandbox's view */
        int again;  /* the path changed again while it ran: look once more */
        char *what;
};

struct guard {
        struct sbxd *d;
        int fd;
        int exe_fd; /* the sbx-init binary, O_PATH */
        uv_poll_t poll;
        struct guard_path *paths;
        struct guard_sub *subs; /* sandboxes that keep the shared paths hidden */
        struct guard_missed *missed;
        /* Paths to cover again, each waiting for its sandbox's helper to end: two helpers
         * at once in one sandbox race each other's mounts (each pins the directories
         * above its path, init/mnt.c), and one fails, leaving its path bare. */
        struct guard_missed *queued;
        int homes_wd, etc_wd;   /* /home and /etc (passwd): new homes, -1 when unwatched */
        struct pathset *shared; /* the last shared set watched (its paths are) */
        struct guard_helper *helpers;
        unsigned long no_space; /* paths left unwatched: fs.inotify.max_user_watches reached */
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
        free(k->path);
        free(k->what);
        free(k);
}

static void reapply(struct guard *g, struct sandbox_view *sv, enum guard_kind kind, char *path);
static void run_queued(struct guard *g, struct sandbox_view *sv);

/* 1 while a helper runs in sv. */
static int busy(const struct guard *g, const struct sandbox_view *sv) {
        const struct guard_helper *k;

        for (k = g->helpers; k; k = k->next)
                if (k->sv == sv)
                        return 1;
        return 0;
}

/* Adds path (of kind, seen at view; NULL: the same) of sv to *list, once per path. 0, or
 * -ENOMEM (nothing added). */
static int note(struct guard_missed **list, struct sandbox_view *sv, enum guard_kind kind,
                const char *path, const char *view) {
        struct guard_missed *m;

        for (m = *list; m; m = m->next)
                if (m->sv == sv && strcmp(m->path, path) == 0)
                        return 0;
        m = calloc(1, sizeof(*m));
        if (!m || !(m->path = strdup(path)) || (view && !(m->view = strdup(view)))) {
                if (m)
                        free(m->path);
                free(m);
                return -ENOMEM;
        }
        m->sv = sv;
        m->kind = kind;
        m->next = *list;
        *list = m;
        return 0;
}

static void helper_unlink(struct guard_helper *k) {
        struct guard_helper **pp;
        for (pp = &k->g->helpers; *pp; pp = &(*pp)->next)
                if (*pp == k) {
                        *pp = k->next;
                        break;
                }
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
        /* The view has a new mount: the file operations' picture of it is stale. */
        if (k->sv)
                k->sv->generation++;
        helper_unlink(k);
        uv_poll_stop(p);
        /* Changed again meanwhile (one helper per path at a time: a host renaming in a
         * loop must not fork a helper per event): look once more. */
        if (k->again && k->sv && k->sv->state == SBX__V1__SANDBOX_STATE__READY &&
            k->sv->init_pid > 0 && !covered(k->sv->init_pid, k->path))
                reapply(k->g, k->sv, k->kind, k->path);
        /* Then the paths that waited for this one, in turn. */
        if (k->sv)
                run_queued(k->g, k->sv);
        uv_close((uv_handle_t *)p, on_helper_closed);
}

/* Runs `sbx-init --reapply KIND PATH --pidfd 3 [--userns]` for path of sv's view. The
 * helper is executed from the host's binary before it enters the sandbox's namespaces
 * (it does that itself, through the pidfd of PID 1), so nothing it loads (its dynamic
 * loader, its libraries) comes from a view that sandboxed code may shape. */
static void reapply(struct guard *g, struct sandbox_view *sv, enum guard_kind kind, char *path) {
        char *argv[] = {(char *)"sbx-init",
                        (char *)"--reapply",
                        (char *)(kind == GUARD_HIDE ? "hide" : "read-only"),
                        path,
                        (char *)"--pidfd",
                        (char *)"3",
                        sv->d->features.rootless ? (char *)"--userns" : NULL,
                        NULL};
        char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        struct guard_helper *k;
        int pidfd = sv->init_pidfd;
        pid_t pid;

        for (k = g->helpers; k; k = k->next)
                if (k->sv == sv && strcmp(k->path, path) == 0) {
                        k->again = 1; /* it looks again when it is done */
                        return;
                }
        if (busy(g, sv)) {
                if (note(&g->queued, sv, kind, path, NULL) < 0)
                        log_err("sbx=%s: cannot cover %s again: out of memory", sv->id, path);
                return;
        }
        k = calloc(1, sizeof(*k));
        if (!k || !(k->path = strdup(path)) ||
            asprintf(&k->what, "sbx=%s: %s %s changed on the host", sv->id,
                     kind == GUARD_HIDE ? "hidden path" : "read-only path", path) < 0) {
                if (k)
                        free(k->path);
                free(k);
                log_err("sbx=%s: cannot cover %s again: out of memory", sv->id, path);
                return;
        }
        k->kind = kind;
        sv->generation++;
        pid = fork();
        if (pid == 0) {
                /* Only system calls here: the daemon has threads. dup2 onto the same
                 * number would keep close-on-exec. */
                if (pidfd == HELPER_PIDFD ? fcntl(pidfd, F_SETFD, 0) == 0
                                          : dup2(pidfd, HELPER_PIDFD) == HELPER_PIDFD)
                        syscall(SYS_execveat, g->exe_fd, "", argv, envp, AT_EMPTY_PATH);
                _exit(127);
        }
        if (pid < 0 || (k->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0 ||
            uv_poll_init(sv->d->loop, &k->poll, k->pidfd) < 0) {
                log_err("%s: cannot start a helper: %s", k->what, strerror(errno));
                if (pid > 0)
                        (void)waitpid(pid, NULL, 0);
                if (k->pidfd > 0)
                        close(k->pidfd);
                free(k->path);
                free(k->what);
                free(k);
                return;
        }
        fcntl(k->pidfd, F_SETFD, FD_CLOEXEC);
        k->g = g;
        k->sv = sv;
        k->next = g->helpers;
        g->helpers = k;
        k->poll.data = k;
        uv_poll_start(&k->poll, UV_READABLE, on_helper_exit);
}

/* Remembers that path changed while sv was not ready (once per path). */
static void miss(struct guard *g, struct sandbox_view *sv, const struct guard_path *gp) {
        if (note(&g->missed, sv, gp->kind, gp->path, gp->view) < 0)
                log_warning("sbx=%s: out of memory: %s changed while it was set up and will not "
                            "be looked at when it is ready",
                            sv->id, gp->path);
}

static void missed_free(struct guard_missed *m) {
        free(m->path);
        free(m->view);
        free(m);
}

/* Drops the entries of *list that are sv's (every one when sv is NULL). */
static void drop_noted(struct guard_missed **list, const struct sandbox_view *sv) {
        struct guard_missed **mp, *m;

        for (mp = list; (m = *mp);) {
                if (sv && m->sv != sv) {
                        mp = &m->next;
                        continue;
                }
                *mp = m->next;
                missed_free(m);
        }
}

/* 1 when sv is ready, with an init to cover paths in. */
static int up(const struct sandbox_view *sv) {
        return sv->state == SBX__V1__SANDBOX_STATE__READY && sv->init_pid > 0 &&
               sv->init_pidfd >= 0;
}

/* No helper runs in sv: the next of its queued paths that lies bare gets one (the
 * others, covered meanwhile or by that helper's turn, are dropped as they come). */
static void run_queued(struct guard *g, struct sandbox_view *sv) {
        struct guard_missed **mp, *m;

        for (mp = &g->queued; !busy(g, sv) && (m = *mp);) {
                if (m->sv != sv) {
                        mp = &m->next;
                        continue;
                }
                *mp = m->next;
                if (up(sv) && !covered(sv->init_pid, m->path))
                        reapply(g, sv, m->kind, m->path);
                missed_free(m);
        }
}

/* Covers path (of kind, seen at view in the sandbox; NULL: the same) again in sv (up)
 * when the path lies bare. */
static void check_path(struct guard *g, struct sandbox_view *sv, enum guard_kind kind, char *path,
                       char *view_path) {
        const Sbx__V1__Policy *pol = sv->policy;
        char *view = view_path ? view_path : path;
        size_t i, n;

        if (covered(sv->init_pid, view))
                return;
        /* Replaced on the host in a directory the sandbox may write: until it is covered
         * again, sandboxed code can rename its own file there (or write into the host's
         * new one), and what gets covered may be its. Nothing tells the two apart (its
         * files are its owner's, idmapped): the operator is told. */
        for (i = 0; pol && i < pol->n_writable_paths; i++) {
                n = strlen(pol->writable_paths[i]);
                if (strncmp(pol->writable_paths[i], path, n) == 0 && path[n] == '/') {
                        log_warning("sbx=%s: %s was replaced on the host while this sandbox may "
                                    "write beside it: check its content before the host uses it "
                                    "(sandboxed code may have put its own there before it was "
                                    "covered again)",
                                    sv->id, path);
                        break;
                }
        }
        reapply(g, sv, kind, view);
}

/* Covers gp again in sv when sv is up and the path lies bare; while sv is being created,
 * remembers gp for guard_ready. */
static void check(struct guard *g, struct sandbox_view *sv, struct guard_path *gp) {
        if (sv->state == SBX__V1__SANDBOX_STATE__CREATING) {
                miss(g, sv, gp);
                return;
        }
        if (up(sv))
                check_path(g, sv, gp->kind, gp->path, gp->view);
}

/* A shared path changed: every sandbox that keeps the shared paths hidden looks (a
 * path of an older expansion of the list is looked at too: it may still be bare). */
static void check_shared(struct guard *g, struct guard_path *gp) {
        struct guard_sub *s;

        for (s = g->subs; s; s = s->next)
                check(g, s->sv, gp);
}

static void advance(struct guard *g, struct guard_path *old);

/* Watches the entries of wd again (all of them for -1), from their paths as they are
 * now, and looks at each at once: their directory was deleted or renamed (the watch
 * follows the old inode), or events were lost (the queue overflowed). */
static void rewatch(struct guard *g, int wd) {
        struct guard_path *gp, **v;
        size_t n = 0, i;

        for (gp = g->paths; gp; gp = gp->next)
                n += wd < 0 || gp->wd == wd;
        if (!n)
                return;
        v = calloc(n, sizeof(*v));
        if (!v) {
                log_err("the guard cannot watch %zu paths again: out of memory", n);
                return;
        }
        for (gp = g->paths, i = 0; gp && i < n; gp = gp->next)
                if (wd < 0 || gp->wd == wd)
                        v[i++] = gp;
        for (i = 0; i < n; i++)
                advance(g, v[i]);
        free(v);
}

static void on_events(uv_poll_t *p, int status, int events) {
        struct guard *g = p->data;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        /* One buffer a turn: the loop serves every client in between (a user renaming in a
         * watched directory of theirs as fast as they can must not stall the daemon);
         * the descriptor stays readable, so the rest comes next turn. */
        if ((n = read(g->fd, buf, sizeof(buf))) > 0) {
                const char *at = buf;
                while (at < buf + n) {
                        const struct inotify_event *ev = (const struct inotify_event *)at;
                        struct guard_path *gp;

                        at += sizeof(*ev) + ev->len;
                        /* Events were lost: the list expanded anew, everything watched and
                         * looked at again. */
                        if (ev->mask & IN_Q_OVERFLOW) {
                                log_warning("the guard's event queue overflowed: looking at every "
                                            "watched path again");
                                credcache_changed();
                                credcache_refresh(g->d);
                                rewatch(g, -1);
                                continue;
                        }
                        /* A watched directory went (deleted, renamed: its watch follows the
                         * old one): its paths are watched again where they are now. */
                        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                                credcache_changed();
                                if (ev->mask & IN_MOVE_SELF)
                                        inotify_rm_watch(g->fd, ev->wd);
                                rewatch(g, ev->wd);
                                continue;
                        }
                        /* A new home, or a new /etc/passwd: the credential list is expanded
                         * anew at once, and its new paths watched and covered in the live
                         * sandboxes too (guard_share). */
                        if ((ev->wd == g->homes_wd && ev->len) ||
                            (ev->wd == g->etc_wd && ev->len && strcmp(ev->name, "passwd") == 0)) {
                                credcache_changed();
                                credcache_refresh(g->d);
                        }
                        /* Pending entries whose directory appeared go deeper first (the
                         * list changes, so one at a time, from the start). */
                        do {
                                for (gp = g->paths; gp; gp = gp->next)
                                        if (gp->pending && (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
                                            gp->wd == ev->wd && ev->len &&
                                            strcmp(gp->name, ev->name) == 0)
                                                break;
                                if (gp)
                                        advance(g, gp);
                        } while (gp);
                        for (gp = g->paths; gp; gp = gp->next) {
                                if (gp->pending || gp->wd != ev->wd)
                                        continue;
                                if ((ev->mask & IN_ATTRIB) && !gp->sv &&
                                    (!ev->len || strcmp(gp->name, ev->name) == 0))
                                        credcache_changed();
                                if (!(ev->mask & (IN_CREATE | IN_MOVED_TO)) ||
                                    !(ev->len && strcmp(gp->name, ev->name) == 0))
                                        continue;
                                if (gp->sv) {
                                        check(g, gp->sv, gp);
                                } else {
                                        credcache_changed();
                                        check_shared(g, gp);
                                }
                        }
                }
        }
}

int guard_start(struct sbxd *d, const char *init_path) {
        struct guard *g = calloc(1, sizeof(*g));
        int r;

        credcache_on_change(NULL);
        if (!g)
                return -ENOMEM;
        g->d = d;
        g->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        g->exe_fd = open(init_path, O_PATH | O_CLOEXEC);
        if (g->fd < 0 || g->exe_fd < 0) {
                r = -errno;
                goto fail;
        }
        g->homes_wd = inotify_add_watch(g->fd, "/home", IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
        g->etc_wd = inotify_add_watch(g->fd, "/etc", IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
        r = uv_poll_init(d->loop, &g->poll, g->fd);
        if (r < 0)
                goto fail;
        g->poll.data = g;
        uv_poll_start(&g->poll, UV_READABLE, on_events);
        uv_unref((uv_handle_t *)&g->poll); /* it never keeps the loop alive */
        d->guard = g;
        credcache_on_change(guard_share);
        return 0;
fail:
        if (g->fd >= 0)
                close(g->fd);
        if (g->exe_fd >= 0)
                close(g->exe_fd);
        free(g);
        return r;
}

/* Watches host (absolute) for sv (NULL: shared), seen at view in the sandbox (NULL:
 * the same): the directory holding it, or when that is missing, the nearest ancestor
 * that exists, for the next missing directory to appear (pending). Returns the entry,
 * or NULL when nothing can be watched. */
static struct guard_path *add_path(struct guard *g, struct sandbox_view *sv, enum guard_kind kind,
                                   const char *host, const char *view) {
        struct guard_path *gp;
        char *slash, *cut = NULL;
        int wd = -1;

        if (!host || host[0] != '/')
                return NULL;
        gp = calloc(1, sizeof(*gp));
        if (!gp || !(gp->path = strdup(host)) || (view && !(gp->view = strdup(view)))) {
                if (gp)
                        free(gp->path);
                free(gp);
                return NULL;
        }
        /* Its directory, else each ancestor in turn. */
        while ((slash = strrchr(gp->path, '/'))) {
                *slash = '\0';
                if (cut)
                        *cut = '/';
                wd = inotify_add_watch(g->fd, gp->path[0] ? gp->path : "/", GUARD_EVENTS);
                if (wd >= 0 || (errno != ENOENT && errno != ENOTDIR) || slash == gp->path)
                        break;
                cut = slash;
        }
        if (slash)
                *slash = '/';
        if (wd < 0) {
                if (errno == ENOSPC)
                        g->no_space++;
                if (errno != ENOENT && errno != ENOTDIR)
                        log_warning("sbx=%s: cannot watch the directory of %s: %s",
                                    sv ? sv->id : "-", host, strerror(errno));
                free(gp->view);
                free(gp->path);
                free(gp);
                return NULL;
        }
        if (cut) {
                /* Pending: wd watches an ancestor; the next component is awaited. */
                size_t n = (size_t)(cut - (slash + 1));
                gp->pending = strndup(slash + 1, n);
                gp->pending_at = (size_t)(slash + 1 - gp->path);
                if (!gp->pending) {
                        free(gp->view);
                        free(gp->path);
                        free(gp);
                        return NULL;
                }
                gp->name = gp->pending;
        } else {
                gp->name = slash + 1;
        }
        gp->sv = sv;
        gp->wd = wd;
        gp->kind = kind;
        gp->next = g->paths;
        g->paths = gp;
        return gp;
}

/* 1 when p (canonical) is dir or lies below it. */
static int at_or_below(const char *dir, const char *p) {
        size_t n = strlen(dir);

        if (strcmp(dir, "/") == 0)
                return 1;
        return strncmp(dir, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* 1 when p is a host path of the sandbox's view: at or below one of only's paths, or
 * anywhere when only is NULL. */
static int on_host(const struct guard_only *only, const char *p) {
        size_t i;

        if (!only)
                return 1;
        for (i = 0; i < only->n; i++)
                if (at_or_below(only->v[i], p))
                        return 1;
        return 0;
}

/* Watches the view paths of set for sv, at root + path on the host; with only, those
 * of them at or below one of its paths alone. */
static void add_set(struct guard *g, struct sandbox_view *sv, enum guard_kind kind,
                    const char *root, char *const *v, size_t n, int on_change,
                    const struct guard_only *only) {
        struct guard_path *gp;
        char host[PATH_MAX];
        size_t i;

        for (i = 0; i < n; i++) {
                if (!on_host(only, v[i]))
                        continue;
                if (strcmp(root, "/") == 0)
                        gp = add_path(g, sv, kind, v[i], NULL);
                else if ((size_t)snprintf(host, sizeof(host), "%s%s", root, v[i]) < sizeof(host))
                        gp = add_path(g, sv, kind, host, v[i]);
                else
                        gp = NULL;
                if (gp)
                        gp->on_change = on_change;
        }
}

void guard_share(struct sbxd *d, struct pathset *set) {
        struct guard *g = d->guard;
        struct guard_path *gp;
        size_t i;

        if (!g || !set || set == g->shared)
                return;
        for (i = 0; i < set->n; i++) {
                for (gp = g->paths; gp; gp = gp->next)
                        if (!gp->sv && strcmp(gp->path, set->v[i]) == 0)
                                break;
                if (gp)
                        continue;
                /* A new path (a new home's): it may exist already, bare in the live
                 * sandboxes, which were made before it was on the list. */
                gp = add_path(g, NULL, GUARD_HIDE, set->v[i], NULL);
                if (gp && !gp->pending)
                        check_shared(g, gp);
        }
        pathset_unref(g->shared);
        g->shared = pathset_ref(set);
}

int guard_watch(struct sbxd *d, struct sandbox_view *sv, const struct policy_view *view,
                const char *root, char *const *denied_write, size_t n_denied_write,
                const struct guard_only *only) {
        struct guard *g = d->guard;
        unsigned long no_space;

        if (!g)
                return -EMFILE; /* no guard (guard_start failed): nothing would be covered */
        no_space = g->no_space;
        add_set(g, sv, GUARD_HIDE, root, view->hidden->v, view->hidden->n, 0, only);
        add_set(g, sv, GUARD_READ_ONLY, root, denied_write, n_denied_write, 0, only);
        /* Names inside writable paths: host paths, bound at the same path. */
        add_set(g, sv, GUARD_READ_ONLY, "/", view->protected_paths->v, view->protected_paths->n, 0,
                only);
        add_set(g, sv, GUARD_READ_ONLY, "/", view->made_dirs->v, view->made_dirs->n, 0, only);
        add_set(g, sv, GUARD_READ_ONLY, "/", view->made_files->v, view->made_files->n, 0, only);
        add_set(g, sv, GUARD_HIDE, root, view->watched->v, view->watched->n, 1, only);
        if (view->watched_shared) {
                struct guard_sub *s = calloc(1, sizeof(*s));
                guard_share(d, view->watched_shared);
                if (s) {
                        s->sv = sv;
                        s->next = g->subs;
                        g->subs = s;
                }
        }
        return g->no_space != no_space ? -ENOSPC : 0;
}

void guard_ready(struct sbxd *d, struct sandbox_view *sv, int adopted) {
        struct guard *g = d->guard;
        struct guard_missed **mp, *m;
        struct guard_path *gp;

        if (!g)
                return;
        for (mp = &g->missed; (m = *mp);) {
                if (m->sv != sv) {
                        mp = &m->next;
                        continue;
                }
                *mp = m->next;
                if (up(sv))
                        check_path(g, sv, m->kind, m->path, m->view);
                missed_free(m);
        }
        /* Adopted: what init covered of its own may have been replaced meanwhile. */
        for (gp = g->paths; adopted && gp; gp = gp->next)
                if (gp->sv == sv && !gp->pending && !gp->on_change)
                        check(g, sv, gp);
}

static void free_path(struct guard *g, struct guard_path *gp) {
        struct guard_path *o;
        int used = 0;

        for (o = g->paths; o && !used; o = o->next)
                used = o != gp && o->wd == gp->wd;
        if (!used)
                inotify_rm_watch(g->fd, gp->wd);
        free(gp->pending);
        free(gp->view);
        free(gp->path);
        free(gp);
}

/* A directory of old's path that cannot be watched (the daemon user's inotify watches
 * are all in use): the missing one it awaited, which appeared, or its own, made again.
 * Rather than leave what is made there bare, the directory is covered whole (hidden, or
 * read-only) in old's sandbox. */
static void cover_appeared(struct guard *g, const struct guard_path *old) {
        const char *slash = strrchr(old->path, '/');
        size_t end = old->pending ? old->pending_at + strlen(old->pending)
                                  : (size_t)(slash - old->path),
               below = strlen(old->path) - end;
        char *host, *view = NULL;

        if (end == 0)
                return; /* "/" itself */
        host = strndup(old->path, end);
        /* The view ends as the host path does (root + view): the same cut. */
        if (old->view && strlen(old->view) > below)
                view = strndup(old->view, strlen(old->view) - below);
        if (!host || (old->view && !view)) {
                log_err("sbx=%s: cannot cover a directory of %s: out of memory", old->sv->id,
                        old->path);
        } else {
                log_warning("sbx=%s: cannot watch %s (the daemon user's inotify watches are "
                            "all in use): it is %s whole in the sandbox",
                            old->sv->id, host, old->kind == GUARD_HIDE ? "hidden" : "read-only");
                if (up(old->sv))
                        check_path(g, old->sv, old->kind, host, view);
                else if (note(&g->missed, old->sv, old->kind, host, view) < 0)
                        log_err("sbx=%s: cannot cover %s: out of memory", old->sv->id, host);
        }
        free(host);
        free(view);
}

/* A missing directory of a pending entry appeared: the entry is watched again, one
 * level deeper or at its own directory, and looked at at once (what it awaits may have
 * been made in the same breath as the directory). When it cannot be watched for lack of
 * inotify watches, that directory is covered whole. */
static void advance(struct guard *g, struct guard_path *old) {
        struct guard_path **pp, *gp;
        unsigned long no_space = g->no_space;

        for (pp = &g->paths; *pp && *pp != old; pp = &(*pp)->next)
                ;
        if (!*pp)
                return;
        *pp = old->next;
        gp = add_path(g, old->sv, old->kind, old->path, old->view);
        if (gp)
                gp->on_change = old->on_change;
        else if (g->no_space != no_space && old->sv)
                cover_appeared(g, old);
        free_path(g, old);
        if (!gp || gp->pending)
                return;
        if (gp->sv) {
                check(g, gp->sv, gp);
        } else {
                credcache_changed();
                check_shared(g, gp);
        }
}

void guard_forget(struct sbxd *d, struct sandbox_view *sv) {
        struct guard *g = d->guard;
        struct guard_path **pp, *gp;
        struct guard_sub **sp, *x;
        struct guard_helper *k;

        if (!g)
                return;
        for (k = g->helpers; k; k = k->next)
                if (k->sv == sv)
                        k->sv = NULL;
        drop_noted(&g->missed, sv);
        drop_noted(&g->queued, sv);
        for (pp = &g->paths; (gp = *pp);) {
                if (gp->sv != sv) {
                        pp = &gp->next;
                        continue;
                }
                *pp = gp->next;
                free_path(g, gp);
        }
        for (sp = &g->subs; (x = *sp);) {
                if (x->sv == sv) {
                        *sp = x->next;
                        free(x);
                } else {
                        sp = &x->next;
                }
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
        struct guard_sub *s;
        struct guard_helper *k;

        if (!g)
                return;
        while ((gp = g->paths)) {
                g->paths = gp->next;
                free(gp->pending);
                free(gp->view);
                free(gp->path);
                free(gp);
        }
        while ((s = g->subs)) {
                g->subs = s->next;
                free(s);
        }
        drop_noted(&g->missed, NULL);
        drop_noted(&g->queued, NULL);
        pathset_unref(g->shared);
        g->shared = NULL;
        /* Helpers still running close their own handles; they no longer name a guard. */
        for (k = g->helpers; k; k = k->next)
                k->sv = NULL;
        g->helpers = NULL;
        uv_poll_stop(&g->poll);
        uv_close((uv_handle_t *)&g->poll, on_guard_closed);
        d->guard = NULL;
}
