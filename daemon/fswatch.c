/* fswatch.c: one file watch; see fswatch.h.
 *
 * inotify names a change by a watch descriptor (a directory) and a name in it: the
 * table `dirs` maps each descriptor to its directory's path as the sandbox sees it,
 * rewritten when a watched directory is renamed within the tree. The two halves of a
 * rename (IN_MOVED_FROM, IN_MOVED_TO with one cookie) come one after the other in a read
 * (inotify(7), "Dealing with rename() events"); a half left alone is a move out of (or
 * into) the tree. Directories still to be watched wait in `walk`; a watch with a walk
 * to do waits in its user's line, and the user in the pool's ring (walk_wait); the
 * carrier's idle handle serves them (pool_walk). The walk calls nothing of the owner's
 * (ready goes through the watch's timer), so no watch is freed while the pool walks.
 * Every directory a watch follows or has queued is counted in its user's and the pool's
 * `dirs` (account). Events are handled within the same budget of a loop turn as the
 * walk (pump), the rest of a read kept in evbuf. The four handles (poll, timer, idle,
 * more) close together in
 * fswatch_free, and the memory goes in the last close callback. */
#include "fswatch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "files.h"
#include "sbx_limits.h"

/* A path as walked: below SBX_PATH_MAX_BYTES, and a name. */
#define PATH_CAP (SBX_PATH_MAX_BYTES + 16)
#define WATCH_MASK                                                                                 \
        (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM |          \
         IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
#define DIR_BUCKETS 1024u

/* ---- the coalescer ------------------------------------------------------------------ */

struct fswatch_entry {
        Sbx__V1__FileEventKind kind;
        char *path;
        char *old_path; /* RENAMED's source */
        int is_dir;
        int modified_after; /* RENAMED, then modified: both are told */
        struct fswatch_entry *hnext, *next, *prev;
};

static size_t hash_str(const char *s) {
        size_t h = 1469598103934665603ull;
        while (*s)
                h = (h ^ (unsigned char)*s++) * 1099511628211ull;
        return h;
}

static struct fswatch_entry **slot_of(struct fswatch_pending *p, const char *path) {
        struct fswatch_entry **e = &p->buckets[hash_str(path) & (p->n_buckets - 1)];
        while (*e && strcmp((*e)->path, path) != 0)
                e = &(*e)->hnext;
        return e;
}

static struct fswatch_entry *find(struct fswatch_pending *p, const char *path) {
        return p->buckets ? *slot_of(p, path) : NULL;
}

static void entry_free(struct fswatch_entry *e) {
        free(e->path);
        free(e->old_path);
        free(e);
}

/* Unlinks e from the table and the order, and frees it. */
static void drop(struct fswatch_pending *p, struct fswatch_entry *e) {
        struct fswatch_entry **s = slot_of(p, e->path);
        *s = e->hnext;
        if (e->prev)
                e->prev->next = e->next;
        else
                p->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                p->tail = e->prev;
        p->n--;
        entry_free(e);
}

void fswatch_pending_clear(struct fswatch_pending *p) {
        struct fswatch_entry *e, *nx;
        size_t max = p->max;

        for (e = p->head; e; e = nx) {
                nx = e->next;
                entry_free(e);
        }
        free(p->buckets);
        memset(p, 0, sizeof(*p));
        p->max = max;
}

void fswatch_pending_overflow(struct fswatch_pending *p, const char *fmt, ...) {
        char why[sizeof(p->overflow)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        fswatch_pending_clear(p);
        if (!why[0])
                snprintf(why, sizeof(why), "changes were lost");
        memcpy(p->overflow, why, sizeof(why));
}

/* A new entry at the end of the order; NULL (the batch overflowed) past max or out of
 * memory. */
static struct fswatch_entry *append(struct fswatch_pending *p, Sbx__V1__FileEventKind kind,
                                    const char *path, const char *old_path, int is_dir) {
        struct fswatch_entry *e, **s;

        if (p->n >= p->max) {
                fswatch_pending_overflow(p, "more than %zu paths changed within one batch", p->max);
                return NULL;
        }
        if (!p->buckets) {
                p->n_buckets = 1;
                while (p->n_buckets < p->max * 2 && p->n_buckets < 65536)
                        p->n_buckets <<= 1;
                p->buckets = calloc(p->n_buckets, sizeof(*p->buckets));
        }
        e = calloc(1, sizeof(*e));
        if (e)
                e->path = strdup(path);
        if (e && old_path)
                e->old_path = strdup(old_path);
        if (!p->buckets || !e || !e->path || (old_path && !e->old_path)) {
                if (e)
                        entry_free(e);
                fswatch_pending_overflow(p, "the daemon ran out of memory for changes");
                return NULL;
        }
        e->kind = kind;
        e->is_dir = is_dir;
        s = slot_of(p, path);
        e->hnext = *s;
        *s = e;
        e->prev = p->tail;
        if (p->tail)
                p->tail->next = e;
        else
                p->head = e;
        p->tail = e;
        p->n++;
        return e;
}

/* Moves the entries below from/ to below to/ (a directory created in this batch and
 * renamed: its children were never told under their old names). */
static int move_children(struct fswatch_pending *p, const char *from, const char *to) {
        size_t fl = strlen(from), tl = strlen(to);
        struct fswatch_entry *e;

        for (e = p->head; e; e = e->next) {
                struct fswatch_entry **s;
                char *np;
                if (strncmp(e->path, from, fl) != 0 || e->path[fl] != '/')
                        continue;
                np = malloc(tl + strlen(e->path + fl) + 1);
                if (!np)
                        return -ENOMEM;
                memcpy(np, to, tl);
                strcpy(np + tl, e->path + fl);
                s = slot_of(p, e->path);
                *s = e->hnext;
                free(e->path);
                e->path = np;
                s = slot_of(p, np);
                e->hnext = *s;
                *s = e;
        }
        return 0;
}

static void add_renamed(struct fswatch_pending *p, const char *from, const char *to, int is_dir) {
        struct fswatch_entry *eo = find(p, from), *e;
        char *src = NULL;
        int modified = 0;

        if (eo && eo->kind == SBX__V1__FILE_EVENT_KIND__CREATED) {
                if (is_dir && move_children(p, from, to) < 0) {
                        fswatch_pending_overflow(p, "the daemon ran out of memory for changes");
                        return;
                }
                drop(p, eo);
                if ((e = find(p, to)))
                        drop(p, e);
                (void)append(p, SBX__V1__FILE_EVENT_KIND__CREATED, to, NULL, is_dir);
                return;
        }
        if (eo && eo->kind == SBX__V1__FILE_EVENT_KIND__RENAMED) {
                src = eo->old_path;
                eo->old_path = NULL;
                modified = eo->modified_after;
                drop(p, eo);
        }
        if ((e = find(p, to)))
                drop(p, e);
        if (src && strcmp(src, to) == 0)
                fswatch_pending_add(p, SBX__V1__FILE_EVENT_KIND__MODIFIED, to, NULL, is_dir);
        else if ((e = append(p, SBX__V1__FILE_EVENT_KIND__RENAMED, to, src ? src : from, is_dir)))
                e->modified_after = modified;
        free(src);
}

/* Applies kind (not RENAMED) to the entry e of its path (NULL: none yet). */
static void add_simple(struct fswatch_pending *p, struct fswatch_entry *e,
                       Sbx__V1__FileEventKind kind, const char *path, int is_dir) {
        char *src;

        if (!e) {
                (void)append(p, kind, path, NULL, is_dir);
                return;
        }
        switch (e->kind) {
        case SBX__V1__FILE_EVENT_KIND__CREATED:
                if (kind == SBX__V1__FILE_EVENT_KIND__DELETED)
                        drop(p, e);
                return;
        case SBX__V1__FILE_EVENT_KIND__RENAMED:
                if (kind != SBX__V1__FILE_EVENT_KIND__DELETED) {
                        e->modified_after = 1;
                        return;
                }
                src = e->old_path;
                e->old_path = NULL;
                drop(p, e);
                fswatch_pending_add(p, kind, src, NULL, is_dir);
                free(src);
                return;
        case SBX__V1__FILE_EVENT_KIND__DELETED:
                e->kind = kind == SBX__V1__FILE_EVENT_KIND__DELETED
                                  ? kind
                                  : SBX__V1__FILE_EVENT_KIND__MODIFIED;
                e->is_dir = is_dir;
                return;
        case SBX__V1__FILE_EVENT_KIND__MODIFIED:
        case SBX__V1__FILE_EVENT_KIND__FILE_EVENT_KIND_UNSPECIFIED:
        case _SBX__V1__FILE_EVENT_KIND_IS_INT_SIZE:
                break;
        }
        if (kind == SBX__V1__FILE_EVENT_KIND__DELETED)
                e->kind = kind;
}

void fswatch_pending_add(struct fswatch_pending *p, Sbx__V1__FileEventKind kind, const char *path,
                         const char *old_path, int is_dir) {
        if (p->overflow[0])
                return; /* lost anyway: the client re-lists */
        if (kind == SBX__V1__FILE_EVENT_KIND__RENAMED)
                add_renamed(p, old_path, path, is_dir);
        else
                add_simple(p, find(p, path), kind, path, is_dir);
}

int fswatch_pending_empty(const struct fswatch_pending *p) {
        return !p->head && !p->overflow[0];
}

int fswatch_pending_drain(struct fswatch_pending *p, size_t per,
                          void (*fn)(void *ud, const struct fswatch_event *ev, size_t n,
                                     const char *overflow),
                          void *ud) {
        struct fswatch_event *v = calloc(per ? per : 1, sizeof(*v));
        const char *of = p->overflow[0] ? p->overflow : NULL;
        struct fswatch_entry *e = p->head;
        size_t n = 0;

        if (!v) {
                fswatch_pending_overflow(p, "the daemon ran out of memory for changes");
                fn(ud, NULL, 0, p->overflow);
                fswatch_pending_clear(p);
                return -ENOMEM;
        }
        for (; e; e = e->next) {
                int k, times = e->modified_after ? 2 : 1;
                for (k = 0; k < times; k++) {
                        if (n == per) {
                                fn(ud, v, n, of);
                                of = NULL;
                                n = 0;
                        }
                        v[n].kind = k ? SBX__V1__FILE_EVENT_KIND__MODIFIED : e->kind;
                        v[n].path = e->path;
                        v[n].old_path = k ? NULL : e->old_path;
                        v[n].is_dir = e->is_dir;
                        n++;
                }
        }
        if (n || of)
                fn(ud, v, n, of);
        free(v);
        fswatch_pending_clear(p);
        return 0;
}

/* ---- the watch ---------------------------------------------------------------------- */

struct dir {
        int wd;
        char *path;
        struct dir *hnext;
};

struct walk {
        char *path;
        int announce; /* a new directory: what is in it is reported created */
        struct walk *next;
};

/* One uid's watches in a pool. */
struct fswatch_user {
        uid_t uid;
        size_t dirs;      /* directories its watches follow or have queued */
        unsigned watches; /* its watches in the pool */
        struct fswatch *wait_head, *wait_tail; /* its watches with a walk to do */
        int in_ring;
        struct fswatch_user *next;  /* the pool's users */
        struct fswatch_user *rnext; /* the ring of users with a walk to do */
};

struct fswatch_pool {
        uv_loop_t *loop;
        size_t dirs, max_dirs, max_per_user;
        struct fswatch_user *users;
        struct fswatch_user *ring_head, *ring_tail; /* served from the head, back at the tail */
        struct fswatch *carrier; /* whose idle handle walks, while anyone has a walk to do */
        size_t slice_entries;    /* entries listed in this turn's walk */
        uint64_t turn_ms;        /* the loop's time of the turn turn_ns counts */
        uint64_t turn_ns;        /* spent walking and handling events in that turn */
};

struct fswatch {
        struct fswatch_pool *pool; /* NULL once the watch let go of it (fswatch_free) */
        struct fswatch_user *user;
        struct sandbox *sb;
        const struct fswatch_ops *ops;
        void *ud;
        int ifd;
        int recursive;
        uint32_t coalesce_ms;
        uv_poll_t poll;
        uv_timer_t timer;
        uv_idle_t idle;
        uv_idle_t more; /* events read and not yet handled: the next turn goes on (an idle
                         * handle: a timer started in a timer's callback runs in that turn) */
        int open_handles;
        int told_ready, failed, timer_running, held;
        int waiting;               /* in its user's line for the walk */
        struct fswatch *wait_next; /* that line */
        char root[PATH_CAP];
        struct dir *dirs[DIR_BUCKETS];
        size_t n_dirs;
        struct walk *walk_head, *walk_tail;
        size_t n_walk;
        struct fswatch_pending pending;
        /* The last read of the inotify descriptor, handled up to ev_off of ev_len. */
        char evbuf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        size_t ev_off, ev_len;
        /* The IN_MOVED_FROM of a read, waiting for its IN_MOVED_TO. */
        uint32_t move_cookie;
        int move_is_dir;
        char *move_from;
};

/* Counts delta more (or fewer) directories against w's user and pool. */
static void account(struct fswatch *w, long delta) {
        if (!w->pool)
                return;
        w->user->dirs += (size_t)delta;
        w->pool->dirs += (size_t)delta;
}

static struct dir *dir_find(struct fswatch *w, int wd) {
        struct dir *d = w->dirs[(unsigned)wd % DIR_BUCKETS];
        while (d && d->wd != wd)
                d = d->hnext;
        return d;
}

static void dir_drop(struct fswatch *w, int wd) {
        struct dir **d = &w->dirs[(unsigned)wd % DIR_BUCKETS], *x;
        while (*d && (*d)->wd != wd)
                d = &(*d)->hnext;
        if (!*d)
                return;
        x = *d;
        *d = x->hnext;
        free(x->path);
        free(x);
        w->n_dirs--;
        account(w, -1);
}

/* Records wd as path's (a directory watched again keeps its descriptor: then the path
 * is updated). */
static int dir_add(struct fswatch *w, int wd, const char *path) {
        struct dir *d = dir_find(w, wd);
        char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        if (d) {
                free(d->path);
                d->path = p;
                return 0;
        }
        d = calloc(1, sizeof(*d));
        if (!d) {
                free(p);
                return -ENOMEM;
        }
        d->wd = wd;
        d->path = p;
        d->hnext = w->dirs[(unsigned)wd % DIR_BUCKETS];
        w->dirs[(unsigned)wd % DIR_BUCKETS] = d;
        w->n_dirs++;
        account(w, 1);
        return 0;
}

/* parent/name into out (PATH_CAP); -ENAMETOOLONG past it. */
static int join(char *out, const char *parent, const char *name) {
        int n = snprintf(out, PATH_CAP, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", name);
        return n < 0 || (size_t)n >= PATH_CAP ? -ENAMETOOLONG : 0;
}

static void arm_timer(struct fswatch *w);
static void on_idle(uv_idle_t *h);
static void on_timer(uv_timer_t *t);

static void change(struct fswatch *w, Sbx__V1__FileEventKind kind, const char *path,
                   const char *old_path, int is_dir) {
        fswatch_pending_add(&w->pending, kind, path, old_path, is_dir);
        arm_timer(w);
}

/* The batch overflows: why (printf style), then path when not NULL. */
static void overflow(struct fswatch *w, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void overflow(struct fswatch *w, const char *path, const char *fmt, ...) {
        char why[200];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        fswatch_pending_overflow(&w->pending, "%s%s%.96s", why, path ? ": " : "", path ? path : "");
        arm_timer(w);
}

/* ---- the walk, shared by the pool's watches ------------------------------------------ */

/* What the pool's watches spent walking and handling events in this loop turn (a turn:
 * the loop's time in milliseconds; turns within one millisecond share it). */
static uint64_t turn_spent(struct fswatch_pool *p) {
        uint64_t now = uv_now(p->loop);

        if (now != p->turn_ms) {
                p->turn_ms = now;
                p->turn_ns = 0;
        }
        return p->turn_ns;
}

/* 1 when the turn's budget is spent, counting the work begun at t0 (uv_hrtime). */
static int turn_over(struct fswatch_pool *p, uint64_t t0) {
        return turn_spent(p) + (uv_hrtime() - t0) >= SBX_WATCH_WALK_SLICE_US * 1000ull;
}

/* Starts the carrier's idle handle when someone has a walk to do and none runs. */
static void drive(struct fswatch_pool *p) {
        if (p->carrier || !p->ring_head)
                return;
        p->carrier = p->ring_head->wait_head;
        uv_idle_start(&p->carrier->idle, on_idle);
}

static void ring_append(struct fswatch_pool *p, struct fswatch_user *u) {
        u->in_ring = 1;
        u->rnext = NULL;
        if (p->ring_tail)
                p->ring_tail->rnext = u;
        else
                p->ring_head = u;
        p->ring_tail = u;
}

/* Puts w (which has a walk to do) at the end of its user's line, its user in the ring. */
static void walk_wait(struct fswatch *w) {
        struct fswatch_user *u = w->user;

        if (!w->pool || w->waiting || w->failed)
                return;
        w->waiting = 1;
        w->wait_next = NULL;
        if (u->wait_tail)
                u->wait_tail->wait_next = w;
        else
                u->wait_head = w;
        u->wait_tail = w;
        if (!u->in_ring)
                ring_append(w->pool, u);
        drive(w->pool);
}

/* Takes w out of its user's line (and the user out of the ring when its line empties);
 * hands the carrier's part to another watch when w had it. */
static void walk_leave(struct fswatch *w) {
        struct fswatch_pool *p = w->pool;
        struct fswatch_user *u = w->user, **r;
        struct fswatch **x;

        if (!p)
                return;
        if (w->waiting) {
                struct fswatch *prev = NULL;
                for (x = &u->wait_head; *x != w; x = &(*x)->wait_next)
                        prev = *x;
                *x = w->wait_next;
                if (u->wait_tail == w)
                        u->wait_tail = prev;
                w->waiting = 0;
        }
        if (!u->wait_head && u->in_ring) {
                struct fswatch_user *prev = NULL;
                for (r = &p->ring_head; *r != u; r = &(*r)->rnext)
                        prev = *r;
                *r = u->rnext;
                if (p->ring_tail == u)
                        p->ring_tail = prev;
                u->in_ring = 0;
        }
        if (p->carrier == w) {
                uv_idle_stop(&w->idle);
                p->carrier = NULL;
        }
        drive(p);
}

/* w's walk is done: ready is told from its timer, at once (not from the walk, which
 * calls nothing of the owners'). */
static void walk_done(struct fswatch *w) {
        if (w->told_ready || w->failed)
                return;
        uv_timer_stop(&w->timer);
        w->timer_running = 1;
        uv_timer_start(&w->timer, on_timer, 0, 0);
}

/* Queues the directory path to be watched (and listed), within the bounds. */
static void walk_push(struct fswatch *w, const char *path, int announce) {
        struct walk *k;

        if (!w->pool)
                return;
        if (strlen(path) > SBX_PATH_MAX_BYTES) {
                overflow(w, NULL,
                         "a directory's path is longer than %u bytes; changes below it "
                         "are not seen",
                         SBX_PATH_MAX_BYTES);
                return;
        }
        if (w->n_dirs + w->n_walk >= SBX_WATCH_MAX_DIRS) {
                overflow(w, path,
                         "more than %u directories are watched; changes below this one are "
                         "not seen",
                         SBX_WATCH_MAX_DIRS);
                return;
        }
        if (w->user->dirs >= w->pool->max_per_user) {
                overflow(w, path,
                         "uid %u's watches follow %zu directories, the most one user's may "
                         "(a share of the host's inotify watches); changes below this one "
                         "are not seen",
                         (unsigned)w->user->uid, w->pool->max_per_user);
                return;
        }
        if (w->pool->dirs >= w->pool->max_dirs) {
                overflow(w, path,
                         "the daemon's watches follow %zu directories, the most it keeps (a "
                         "share of the host's inotify watches); changes below this one are "
                         "not seen",
                         w->pool->max_dirs);
                return;
        }
        k = calloc(1, sizeof(*k));
        if (k)
                k->path = strdup(path);
        if (!k || !k->path) {
                free(k);
                overflow(w, NULL, "the daemon ran out of memory");
                return;
        }
        k->announce = announce;
        if (w->walk_tail)
                w->walk_tail->next = k;
        else
                w->walk_head = k;
        w->walk_tail = k;
        w->n_walk++;
        account(w, 1);
        walk_wait(w);
}

struct listing {
        struct fswatch *w;
        const char *dir;
        int announce;
};

static int on_entry(void *ud, const char *name, int is_dir) {
        struct listing *l = ud;
        char p[PATH_CAP];

        if (l->w->pool)
                l->w->pool->slice_entries++;
        if (join(p, l->dir, name) < 0)
                return 0;
        if (l->announce)
                change(l->w, SBX__V1__FILE_EVENT_KIND__CREATED, p, NULL, is_dir);
        if (is_dir && l->w->recursive)
                walk_push(l->w, p, l->announce);
        return 0;
}

/* Watches (and lists) one directory of the walk. Gone or hidden by now: skipped. */
static void watch_one(struct fswatch *w, const struct walk *k) {
        struct listing l = {w, k->path, k->announce};
        char err[256];
        int wd = -1, r;

        r = files_watch_dir(w->sb, k->path, w->ifd, WATCH_MASK, &wd, NULL, on_entry, &l,
                            SBX_WATCH_MAX_PENDING, err, sizeof(err));
        if (r == 0 || r == -E2BIG)
                r = dir_add(w, wd, k->path) < 0 ? -ENOMEM : r;
        switch (r) {
        case 0:
        case -EINVAL: /* no longer a directory */
        case -ENOENT:
        case -ENOTDIR:
        case -EACCES:
        case -EPERM:
        case -ENODEV:
                return;
        case -E2BIG:
                overflow(w, k->path, "a directory has more than %u entries; not all are seen",
                         SBX_WATCH_MAX_PENDING);
                return;
        case -ENOSPC:
                overflow(w, k->path, "the host's fs.inotify.max_user_watches is reached");
                return;
        default:
                overflow(w, NULL, "%s", err);
        }
}

/* Walks one directory of the first watch in line of the first user in the ring, then
 * puts both at the back of their lines (when they have more to do). */
static void walk_one(struct fswatch_pool *p) {
        struct fswatch_user *u = p->ring_head;
        struct fswatch *w = u->wait_head;
        struct walk *k = w->walk_head;

        p->ring_head = u->rnext;
        if (!p->ring_head)
                p->ring_tail = NULL;
        u->in_ring = 0;
        u->wait_head = w->wait_next;
        if (!u->wait_head)
                u->wait_tail = NULL;
        w->waiting = 0;
        w->walk_head = k->next;
        if (!w->walk_head)
                w->walk_tail = NULL;
        w->n_walk--;
        account(w, -1);
        watch_one(w, k); /* may queue more of w's, and so put w back in line */
        free(k->path);
        free(k);
        if (w->walk_head)
                walk_wait(w);
        else
                walk_done(w);
        if (u->wait_head && !u->in_ring)
                ring_append(p, u);
}

static void on_idle(uv_idle_t *h) {
        struct fswatch *w = h->data;
        struct fswatch_pool *p = w->pool;
        uint64_t t0 = uv_hrtime();
        unsigned n;

        if (!p || p->carrier != w) {
                uv_idle_stop(h);
                return;
        }
        p->slice_entries = 0;
        for (n = 0; p->ring_head && n < SBX_WATCH_WALK_SLICE &&
                    p->slice_entries < SBX_WATCH_WALK_SLICE_ENTRIES && (n == 0 || !turn_over(p, t0));
             n++)
                walk_one(p);
        p->turn_ns += uv_hrtime() - t0;
        if (!p->ring_head) {
                uv_idle_stop(h);
                p->carrier = NULL;
        }
}

/* ---- events and batches ---------------------------------------------------------------- */

static void hand_batch(void *ud, const struct fswatch_event *ev, size_t n, const char *of) {
        struct fswatch *w = ud;
        w->ops->batch(w->ud, ev, n, of);
}

/* Hands the batch over, unless the owner is congested (then fswatch_resume does). */
static void flush(struct fswatch *w) {
        if (w->failed || !w->told_ready || fswatch_pending_empty(&w->pending))
                return;
        if (w->ops->congested(w->ud)) {
                w->held = 1;
                return;
        }
        w->held = 0;
        (void)fswatch_pending_drain(&w->pending, SBX_WATCH_EVENTS_PER_REPLY, hand_batch, w);
}

static void on_timer(uv_timer_t *t) {
        struct fswatch *w = t->data;

        w->timer_running = 0;
        if (!w->told_ready) {
                if (w->waiting || w->failed)
                        return; /* more to walk: walk_done comes back */
                w->told_ready = 1;
                w->ops->ready(w->ud);
                arm_timer(w); /* the changes seen during the walk, coalesced as any */
                return;
        }
        flush(w);
}

static void arm_timer(struct fswatch *w) {
        if (w->failed || !w->open_handles || w->timer_running || w->held ||
            fswatch_pending_empty(&w->pending))
                return;
        w->timer_running = 1;
        uv_timer_start(&w->timer, on_timer, w->coalesce_ms, 0);
}

void fswatch_resume(struct fswatch *w) {
        if (w && w->held)
                flush(w);
}

/* *path with its prefix from replaced by to, when it is from or below it. */
static void rebase(char **path, const char *from, size_t fl, const char *to) {
        char np[PATH_CAP];
        char *c;

        if (strncmp(*path, from, fl) != 0 || ((*path)[fl] != '/' && (*path)[fl] != '\0'))
                return;
        if ((size_t)snprintf(np, sizeof(np), "%s%s", to, *path + fl) >= PATH_CAP ||
            !(c = strdup(np)))
                return;
        free(*path);
        *path = c;
}

/* Rewrites the paths of the directories watched, or waiting to be, at and below from to
 * below to. */
static void dirs_renamed(struct fswatch *w, const char *from, const char *to) {
        size_t fl = strlen(from), i;
        struct walk *k;

        for (k = w->walk_head; k; k = k->next)
                rebase(&k->path, from, fl, to);
        for (i = 0; i < DIR_BUCKETS; i++) {
                struct dir *d;
                for (d = w->dirs[i]; d; d = d->hnext)
                        rebase(&d->path, from, fl, to);
        }
}

/* Stops watching the directories at and below path (moved out of the tree). */
static void dirs_gone(struct fswatch *w, const char *path) {
        size_t fl = strlen(path), i;

        for (i = 0; i < DIR_BUCKETS; i++) {
                struct dir *d = w->dirs[i], *nx;
                for (; d; d = nx) {
                        nx = d->hnext;
                        if (strncmp(d->path, path, fl) == 0 &&
                            (d->path[fl] == '/' || d->path[fl] == '\0')) {
                                (void)inotify_rm_watch(w->ifd, d->wd);
                                dir_drop(w, d->wd);
                        }
                }
        }
}

/* An IN_MOVED_FROM left without its IN_MOVED_TO: moved out of the tree, deleted. */
static void settle_move(struct fswatch *w) {
        if (!w->move_from)
                return;
        change(w, SBX__V1__FILE_EVENT_KIND__DELETED, w->move_from, NULL, w->move_is_dir);
        if (w->move_is_dir)
                dirs_gone(w, w->move_from);
        free(w->move_from);
        w->move_from = NULL;
}

static void moved_to(struct fswatch *w, const struct inotify_event *ev, const char *p, int isdir) {
        if (w->move_from && w->move_cookie == ev->cookie) {
                change(w, SBX__V1__FILE_EVENT_KIND__RENAMED, p, w->move_from, isdir);
                if (isdir)
                        dirs_renamed(w, w->move_from, p);
                free(w->move_from);
                w->move_from = NULL;
                return;
        }
        settle_move(w);
        change(w, SBX__V1__FILE_EVENT_KIND__CREATED, p, NULL, isdir);
        if (isdir && w->recursive)
                walk_push(w, p, 1);
}

static void fail_watch(struct fswatch *w, int r, const char *msg) {
        if (w->failed)
                return;
        w->failed = 1;
        walk_leave(w);
        w->ops->failed(w->ud, r, msg);
}

/* What happened to a watched directory itself (no name). */
static void self_event(struct fswatch *w, const struct inotify_event *ev, const struct dir *d) {
        char msg[PATH_CAP + 96];

        if (strcmp(d->path, w->root) != 0 ||
            !(ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)))
                return;
        snprintf(msg, sizeof(msg), "the watched directory '%.1024s' was %s; the watch ended",
                 w->root, ev->mask & IN_MOVE_SELF ? "moved away" : "removed");
        fail_watch(w, -ENOENT, msg);
}

static void one_event(struct fswatch *w, const struct inotify_event *ev) {
        int isdir = !!(ev->mask & IN_ISDIR);
        struct dir *d;
        char p[PATH_CAP];

        if (ev->mask & IN_Q_OVERFLOW) {
                overflow(w, NULL,
                         "the kernel's event queue overflowed (fs.inotify.max_queued_events)");
                return;
        }
        if (!(ev->mask & IN_MOVED_TO))
                settle_move(w);
        d = dir_find(w, ev->wd);
        if (!d)
                return;
        if (!ev->len) {
                self_event(w, ev, d);
                if (ev->mask & IN_IGNORED)
                        dir_drop(w, ev->wd);
                return;
        }
        if (join(p, d->path, ev->name) < 0)
                return;
        if (ev->mask & IN_CREATE) {
                change(w, SBX__V1__FILE_EVENT_KIND__CREATED, p, NULL, isdir);
                if (isdir && w->recursive)
                        walk_push(w, p, 1);
        } else if (ev->mask & IN_DELETE) {
                change(w, SBX__V1__FILE_EVENT_KIND__DELETED, p, NULL, isdir);
        } else if (ev->mask & IN_MOVED_FROM) {
                w->move_from = strdup(p);
                w->move_cookie = ev->cookie;
                w->move_is_dir = isdir;
        } else if (ev->mask & IN_MOVED_TO) {
                moved_to(w, ev, p, isdir);
        } else if (ev->mask & (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)) {
                change(w, SBX__V1__FILE_EVENT_KIND__MODIFIED, p, NULL, isdir);
        }
}

static void on_more(uv_idle_t *h);

/* Handles w's events, reading more as the last read is done, while the pool's budget of
 * the turn lasts (one event at least): a costly event (a rename below thousands of
 * directories) delays the other clients no more than a walk does. What is left waits in
 * evbuf (and the kernel's queue) for the next turn. An event may end the watch (its
 * owner may then free it, and the pool with its last watch): nothing of either is
 * touched after one that did. */
static void pump(struct fswatch *w) {
        struct fswatch_pool *p = w->pool;
        uint64_t t0 = uv_hrtime();
        int reads = 0;

        while (!w->failed) {
                const struct inotify_event *ev;
                if (w->ev_off >= w->ev_len) {
                        ssize_t n;
                        if (reads == 16 || (reads > 0 && turn_over(p, t0)))
                                break;
                        n = read(w->ifd, w->evbuf, sizeof(w->evbuf));
                        reads++;
                        if (n <= 0)
                                break;
                        w->ev_len = (size_t)n;
                        w->ev_off = 0;
                }
                ev = (const struct inotify_event *)(w->evbuf + w->ev_off);
                w->ev_off += sizeof(*ev) + ev->len;
                one_event(w, ev);
                if (w->failed)
                        return;
                if (w->ev_off >= w->ev_len)
                        settle_move(w); /* a read's halves of renames are all in it */
                if (turn_over(p, t0))
                        break;
        }
        if (w->failed)
                return;
        p->turn_ns += uv_hrtime() - t0;
        if (w->ev_off < w->ev_len)
                uv_idle_start(&w->more, on_more);
}

static void on_more(uv_idle_t *h) {
        uv_idle_stop(h);
        pump(h->data);
}

static void on_poll(uv_poll_t *h, int status, int events) {
        struct fswatch *w = h->data;

        (void)events;
        if (status < 0) {
                fail_watch(w, status, "the watch's inotify descriptor failed");
                return;
        }
        pump(w);
}

/* ---- the pool ------------------------------------------------------------------------ */

void fswatch_budget(uint64_t host_watches, size_t *ret_max_dirs, size_t *ret_max_dirs_per_user) {
        uint64_t all = (host_watches ? host_watches : 8192) / SBX_WATCH_HOST_SHARE;

        if (all > SBX_WATCH_MAX_DIRS_TOTAL)
                all = SBX_WATCH_MAX_DIRS_TOTAL;
        *ret_max_dirs = (size_t)all;
        *ret_max_dirs_per_user = (size_t)all / SBX_WATCH_UID_SHARE;
}

struct fswatch_pool *fswatch_pool_new(uv_loop_t *loop, size_t max_dirs, size_t max_dirs_per_user) {
        struct fswatch_pool *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->loop = loop;
        p->max_dirs = max_dirs;
        p->max_per_user = max_dirs_per_user;
        return p;
}

void fswatch_pool_free(struct fswatch_pool *pool) {
        free(pool);
}

int fswatch_pool_empty(const struct fswatch_pool *pool) {
        return !pool->users;
}

/* Joins w to its pool as uid's (its first directory not yet counted). */
static int pool_join(struct fswatch *w, struct fswatch_pool *p, uid_t uid) {
        struct fswatch_user *u = p->users;

        while (u && u->uid != uid)
                u = u->next;
        if (!u) {
                u = calloc(1, sizeof(*u));
                if (!u)
                        return -ENOMEM;
                u->uid = uid;
                u->next = p->users;
                p->users = u;
        }
        u->watches++;
        w->pool = p;
        w->user = u;
        return 0;
}

/* w lets go of its pool: out of the walk's lines, its directories uncounted, its user
 * gone with its last watch. */
static void pool_leave(struct fswatch *w) {
        struct fswatch_pool *p = w->pool;
        struct fswatch_user *u = w->user, **x;

        if (!p)
                return;
        walk_leave(w);
        account(w, -(long)(w->n_dirs + w->n_walk));
        w->pool = NULL;
        w->user = NULL;
        if (--u->watches > 0)
                return;
        for (x = &p->users; *x != u; x = &(*x)->next)
                ;
        *x = u->next;
        free(u);
}

/* ---- start and end --------------------------------------------------------------------- */

/* Frees w and what it holds (its inotify descriptor is closed, its handles are). */
static void free_now(struct fswatch *w) {
        struct walk *k, *nx;
        size_t i;

        pool_leave(w);
        for (i = 0; i < DIR_BUCKETS; i++)
                while (w->dirs[i])
                        dir_drop(w, w->dirs[i]->wd);
        for (k = w->walk_head; k; k = nx) {
                nx = k->next;
                free(k->path);
                free(k);
        }
        fswatch_pending_clear(&w->pending);
        free(w->move_from);
        free(w);
}

static void on_closed(uv_handle_t *h) {
        struct fswatch *w = h->data;

        if (--w->open_handles > 0)
                return;
        close(w->ifd);
        free_now(w);
}

void fswatch_free(struct fswatch *w) {
        if (!w)
                return;
        w->failed = 1;
        pool_leave(w);
        uv_close((uv_handle_t *)&w->poll, on_closed);
        uv_close((uv_handle_t *)&w->timer, on_closed);
        uv_close((uv_handle_t *)&w->idle, on_closed);
        uv_close((uv_handle_t *)&w->more, on_closed);
}

/* The handles of w, on loop; w->ifd is open. On failure none is left open. */
static int init_handles(struct fswatch *w, uv_loop_t *loop) {
        int r = uv_poll_init(loop, &w->poll, w->ifd);
        if (r < 0)
                return r;
        w->poll.data = w->timer.data = w->idle.data = w->more.data = w;
        uv_timer_init(loop, &w->timer);
        uv_idle_init(loop, &w->idle);
        uv_idle_init(loop, &w->more);
        w->open_handles = 4;
        return 0;
}

/* 0 when uid may have one more directory followed in pool; else -ENOSPC, why in err. */
static int check_budget(const struct fswatch *w, char *err, size_t errlen) {
        const struct fswatch_pool *p = w->pool;

        if (w->user->dirs >= p->max_per_user)
                snprintf(err, errlen,
                         "uid %u's file watches follow %zu directories, the most one user's may "
                         "(a share of the host's inotify watches); stop a recursive watch first",
                         (unsigned)w->user->uid, p->max_per_user);
        else if (p->dirs >= p->max_dirs)
                snprintf(err, errlen,
                         "the daemon's file watches follow %zu directories, the most it keeps "
                         "(a share of the host's inotify watches); try later",
                         p->max_dirs);
        else
                return 0;
        return -ENOSPC;
}

/* Makes w's inotify instance and handles, and watches (and, recursive, lists) its root
 * directory path. On failure -errno, why in err; w is then freed (at once, or by its
 * handles' close). */
static int watch_root(struct fswatch *w, const char *path, char *err, size_t errlen) {
        struct listing l = {w, w->root, 0};
        int wd = -1, r;

        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0) {
                r = -errno;
                snprintf(err, errlen,
                         "cannot make an inotify instance: %s (the host's "
                         "fs.inotify.max_user_instances may be reached)",
                         strerror(-r));
                free_now(w);
                return r == -ENFILE ? -EMFILE : r;
        }
        r = init_handles(w, w->pool->loop);
        if (r < 0) {
                snprintf(err, errlen, "cannot poll an inotify descriptor: %s", uv_strerror(r));
                close(w->ifd);
                free_now(w);
                return r;
        }
        r = files_watch_dir(w->sb, path, w->ifd, WATCH_MASK, &wd, w->root,
                            w->recursive ? on_entry : NULL, &l, SBX_WATCH_MAX_PENDING, err,
                            errlen);
        if (r == -E2BIG)
                overflow(w, NULL, "the directory has more than %u entries; not all are seen",
                         SBX_WATCH_MAX_PENDING);
        if (r == 0 || r == -E2BIG)
                r = dir_add(w, wd, w->root);
        if (r == 0) {
                r = uv_poll_start(&w->poll, UV_READABLE, on_poll);
                if (r < 0)
                        snprintf(err, errlen, "cannot poll an inotify descriptor: %s",
                                 uv_strerror(r));
        }
        if (r < 0) {
                if (r == -ENOMEM)
                        snprintf(err, errlen, "daemon out of memory for a watch");
                fswatch_free(w);
        }
        return r;
}

int fswatch_start(struct fswatch_pool *pool, uid_t uid, struct sandbox *sb, const char *path,
                  int recursive, uint32_t coalesce_ms, const struct fswatch_ops *ops, void *ud,
                  struct fswatch **ret, char *err, size_t errlen) {
        struct fswatch *w = calloc(1, sizeof(*w));
        int r;

        if (!w || pool_join(w, pool, uid) < 0) {
                free(w);
                snprintf(err, errlen, "daemon out of memory for a watch");
                return -ENOMEM;
        }
        w->sb = sb;
        w->ops = ops;
        w->ud = ud;
        w->recursive = recursive;
        w->coalesce_ms = coalesce_ms;
        w->pending.max = SBX_WATCH_MAX_PENDING;
        r = check_budget(w, err, errlen);
        if (r < 0) {
                free_now(w);
                return r;
        }
        r = watch_root(w, path, err, errlen);
        if (r < 0)
                return r;
        if (!w->waiting)
                walk_done(w); /* nothing below it to walk: ready at once */
        arm_timer(w);
        *ret = w;
        return 0;
}
