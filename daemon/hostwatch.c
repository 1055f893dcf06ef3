/* hostwatch.c: changes of the host under the view; see hostwatch.h.
 *
 * The kernel reports a change of a mount table to the next poll of each open mountinfo
 * file, once (mounts_poll: POLLERR|POLLPRI when the file's last report is older than the
 * namespace's last change). The loop's epoll may take the report of a change whose
 * callback has not run yet when a create read in the same loop turn asks: so
 * hostwatch_gen polls a file of its own, which has its own reports. A change counts
 * only when the table, less the lines below the daemon's sandboxes directory, reads
 * differently (an FNV-1a hash of it): the daemon's own disk images come and go with
 * its sandboxes and are in no view (init detaches them, init.proto). */
#include "hostwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <uv.h>

#include "disk.h"
#include "log.h"
#include "sbxd.h"

#define ROOT_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR)

struct hostwatch {
        struct sbxd *d;
        void (*changed)(void *ud);
        void *ud;
        int mounts_fd; /* /proc/self/mountinfo, only polled, by the loop */
        int check_fd;  /* the same, polled by hostwatch_gen */
        int root_fd;   /* inotify on / */
        uv_poll_t mounts_poll, root_poll;
        int open_handles; /* polls not closed yet */
        uint64_t gen;
        uint64_t events; /* changes seen, also back to what was (hostwatch.h) */
        uint64_t own_done; /* disk_mount_ops' count at the last look */
        uint64_t sig;    /* of the mount table, less the daemon's own images */
};

/* 1 when the mount point field of a mountinfo line (the fifth) is strictly below dir. */
static int point_below(const char *line, const char *dir, size_t dir_len) {
        const char *p = line;
        int field;

        for (field = 0; field < 4 && p; field++)
                if ((p = strchr(p, ' ')))
                        p++;
        return p && strncmp(p, dir, dir_len) == 0 && p[dir_len] == '/';
}

/* The hash of the mount table less the mounts below the sandboxes directory; 0 when it
 * cannot be read (a change, for the caller). */
static uint64_t signature(const struct hostwatch *w) {
        const char *dir = w->d->sandboxes_dir;
        size_t dir_len = dir ? strlen(dir) : 0, cap = 0;
        uint64_t h = 14695981039346656037ull;
        char *line = NULL;
        ssize_t n;
        FILE *f = fopen("/proc/self/mountinfo", "re");

        if (!f)
                return 0;
        while ((n = getline(&line, &cap, f)) > 0) {
                if (dir && point_below(line, dir, dir_len))
                        continue;
                for (ssize_t i = 0; i < n; i++)
                        h = (h ^ (unsigned char)line[i]) * 1099511628211ull;
        }
        free(line);
        fclose(f);
        return h;
}

/* 1 when the mount table changed since the last look (a new signature is kept). */
static int mounts_changed(struct hostwatch *w) {
        uint64_t sig = signature(w);

        if (sig != 0 && sig == w->sig)
                return 0;
        w->sig = sig;
        return 1;
}

/* Reads what inotify has; 1 when it had something. */
static int drain_root(struct hostwatch *w) {
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        int any = 0;

        while (read(w->root_fd, buf, sizeof(buf)) > 0)
                any = 1;
        return any;
}

/* The loop saw the mount table's file or the inotify on / report something. */
static void on_event(uv_poll_t *h, int status, int events) {
        struct hostwatch *w = h->data;
        int mounts = h == &w->mounts_poll;

        if (status < 0) {
                /* Not watched on the loop any more; hostwatch_gen still looks. */
                log_warning("watching the host's %s: %s", mounts ? "mounts" : "/",
                            uv_strerror(status));
                uv_poll_stop(h);
                return;
        }
        if (mounts ? mounts_changed(w) : drain_root(w)) {
                w->gen++;
                w->changed(w->ud);
        }
}

int hostwatch_start(struct sbxd *d, void (*changed)(void *ud), void *ud, struct hostwatch **ret) {
        struct hostwatch *w = calloc(1, sizeof(*w));
        int r = 0;

        *ret = NULL;
        if (!w)
                return -ENOMEM;
        w->d = d;
        w->changed = changed;
        w->ud = ud;
        w->mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        w->check_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        w->root_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->mounts_fd < 0 || w->check_fd < 0 || w->root_fd < 0 ||
            inotify_add_watch(w->root_fd, "/", ROOT_EVENTS) < 0)
                r = -errno;
        if (r == 0 && (r = uv_poll_init(d->loop, &w->mounts_poll, w->mounts_fd)) == 0)
                w->open_handles++;
        if (r == 0 && (r = uv_poll_init(d->loop, &w->root_poll, w->root_fd)) == 0)
                w->open_handles++;
        if (r == 0) {
                w->mounts_poll.data = w->root_poll.data = w;
                /* Never keeps the loop alive. */
                uv_unref((uv_handle_t *)&w->mounts_poll);
                uv_unref((uv_handle_t *)&w->root_poll);
                r = uv_poll_start(&w->mounts_poll, UV_PRIORITIZED, on_event);
        }
        if (r == 0)
                r = uv_poll_start(&w->root_poll, UV_READABLE, on_event);
        if (r < 0) {
                log_warning("cannot watch the host's mounts and /: %s; no spare is built ahead",
                            strerror(-r));
                hostwatch_stop(w);
                return r;
        }
        w->sig = signature(w);
        {
                uint64_t begun;
                disk_mount_ops(&begun, &w->own_done);
        }
        *ret = w;
        return 0;
}

uint64_t hostwatch_gen(struct hostwatch *w, uint64_t *ret_events) {
        struct pollfd pfd = {.fd = w->check_fd, .events = POLLPRI};
        uint64_t begun, done;
        /* What inotify has stays readable until read. */
        int changed = drain_root(w);

        w->events += changed != 0;
        disk_mount_ops(&begun, &done);
        if (poll(&pfd, 1, 0) != 0) {
                int moved = mounts_changed(w);
                /* A report that leaves the table as it was (less the daemon's images)
                 * is an event, unless the daemon's own image mounts were at work since
                 * the last look: which of the two it was cannot be told. */
                if (moved || (begun == done && done == w->own_done))
                        w->events++;
                changed |= moved;
        }
        w->own_done = done;
        w->gen += changed != 0;
        if (ret_events)
                *ret_events = w->events;
        return w->gen;
}

static void close_fds(struct hostwatch *w) {
        if (w->mounts_fd >= 0)
                close(w->mounts_fd);
        if (w->check_fd >= 0)
                close(w->check_fd);
        if (w->root_fd >= 0)
                close(w->root_fd);
        free(w);
}

static void on_closed(uv_handle_t *h) {
        struct hostwatch *w = h->data;

        if (--w->open_handles > 0)
                return;
        close_fds(w);
}

void hostwatch_stop(struct hostwatch *w) {
        int n;

        if (!w)
                return;
        n = w->open_handles;
        if (n == 0) {
                close_fds(w);
                return;
        }
        /* data is w for both once initialised; a poll never started may be closed too. */
        w->mounts_poll.data = w->root_poll.data = w;
        uv_close((uv_handle_t *)&w->mounts_poll, on_closed);
        if (n == 2)
                uv_close((uv_handle_t *)&w->root_poll, on_closed);
}
