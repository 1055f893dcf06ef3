/* uidrange.c: sandbox uid ranges reserved host-wide; see uidrange.h.
 *
 * A reservation file is named after its base (decimal) and holds "pid PID\nstate
 * STATE_DIR\n"; only root may write it (the directory is root's, mode 0700: nobody
 * else may even open a file there, and so nobody else may lock one and pass for a
 * live daemon). A decision takes the directory's lock, lists every reservation (live,
 * dormant or stale), chooses, takes the file's lock, writes the file and then the state
 * directory's record, removes the stale files, and lets the directory's lock go. A
 * daemon that crashes in between leaves at worst a file that names a state directory
 * without its record: stale, as nothing was bound in that range yet. */
#include "uidrange.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx_limits.h"

/* How long a start waits for another daemon's decision (it takes milliseconds; a
 * daemon stopped in the middle of one holds the lock until it dies). */
#define DIR_LOCK_WAIT_MS 10000
/* How long the lock of this state directory's own range may stay held by a daemon
 * killed a moment ago: a child of it that had not reached execve yet shares the lock
 * (the state directory's lock, which the caller holds, waits the same way). */
#define PREDECESSOR_WAIT_MS 2000
/* Reservation files looked at; a directory with more is refused (it is root's: a bug
 * or an administrator filled it). */
#define MAX_RESERVATIONS      4096
#define RESERVATION_MAX_BYTES (PATH_MAX + 64)

/* A reservation file as found. */
struct held {
        uint32_t base;
        int live;    /* locked: a daemon runs on it */
        int dormant; /* unlocked, and its state directory records it */
        int ours;    /* it names the state directory of the daemon starting */
        long pid;    /* the daemon that wrote it (running only when live) */
        char *state; /* the state directory it names; NULL when unreadable */
};

struct found {
        struct held *v;
        size_t n;
};

static void sleep_ms(int ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* A reservation file's name: a base, in decimal without leading zeros (as the daemon
 * names it), from SBX_UID_BASE_MIN to SBX_UID_BASE_MAX. Returns 0 with *ret, or
 * -EINVAL. */
static int parse_base(const char *s, uint32_t *ret) {
        unsigned long long v = 0;
        size_t i;

        if (s[0] == '0')
                return -EINVAL;

        for (i = 0; s[i]; i++) {
                if (i >= 10 || s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (i == 0 || v < SBX_UID_BASE_MIN || v > SBX_UID_BASE_MAX)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

static int overlaps(uint32_t a, uint32_t b) {
        return a < b ? b - a < SBX_UID_COUNT : a - b < SBX_UID_COUNT;
}

/* 1 when some open file description holds a lock on fd's file, 0 when none, -errno. */
static int file_locked(int fd) {
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

        if (fcntl(fd, F_OFD_GETLK, &l) < 0)
                return -errno;
        return l.l_type != F_UNLCK;
}

/* The base state_dir records (its STATE/uid-range, written by root). Returns 0 with
 * *ret, -ENOENT when there is none, -EPERM when the file is not root's regular file,
 * -EINVAL when it holds no base, or another -errno. */
static int read_record(const char *state_dir, uint32_t *ret) {
        char path[PATH_MAX], buf[32];
        struct stat st;
        ssize_t n;
        int fd;

        if (snprintf(path, sizeof(path), "%s/%s", state_dir, UIDRANGE_RECORD) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0) {
                close(fd);
                return -EPERM;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return -EIO;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return parse_base(buf, ret);
}

/* Writes base as state_dir's record, replacing the old one at once (rename) and
 * durably (fsync). 0 or -errno. */
static int write_record(const char *state_dir, uint32_t base) {
        char path[PATH_MAX], tmp[PATH_MAX + 8];
        int fd, r = 0;

        if (snprintf(path, sizeof(path), "%s/%s", state_dir, UIDRANGE_RECORD) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        if (dprintf(fd, "%u\n", (unsigned)base) < 0 || fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                (void)fsync(fd);
                close(fd);
        }
        return 0;
}

/* Waits up to PREDECESSOR_WAIT_MS for fd's lock to go. Returns 1 when it is still
 * held, 0 when it went. */
static int still_locked(int fd) {
        int waited;

        for (waited = 0; waited < PREDECESSOR_WAIT_MS; waited += 20) {
                if (file_locked(fd) == 0)
                        return 0;
                sleep_ms(20);
        }
        return file_locked(fd) != 0;
}

/* Fills h from the reservation file name (of base) in dfd, for the daemon of
 * state_dir. 0, or -errno when the file cannot be looked at. */
static int inspect(int dfd, const char *name, uint32_t base, const char *state_dir,
                   struct held *h) {
        char buf[RESERVATION_MAX_BYTES], *st;
        struct stat sb;
        ssize_t n;
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), locked;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (locked = file_locked(fd)) < 0 ||
            (n = pread(fd, buf, sizeof(buf) - 1, 0)) < 0) {
                close(fd);
                return -EIO;
        }
        buf[n] = '\0';
        memset(h, 0, sizeof(*h));
        h->base = base;
        h->live = locked;
        if (sscanf(buf, "pid %ld\n", &h->pid) == 1 && (st = strstr(buf, "\nstate ")) != NULL) {
                st += strlen("\nstate ");
                if (n > 0 && buf[n - 1] == '\n')
                        buf[n - 1] = '\0';
                h->state = strdup(st);
                if (!h->state) {
                        close(fd);
                        return -ENOMEM;
                }
        }
        h->ours = h->state && strcmp(h->state, state_dir) == 0;
        /* This state directory's lock is the caller's: who else holds its range is a
         * daemon of it that was killed a moment ago. */
        if (h->live && h->ours)
                h->live = still_locked(fd);
        if (!h->live && h->state) {
                uint32_t rec;
                h->dormant = read_record(h->state, &rec) == 0 && rec == base;
        }
        close(fd);
        return 0;
}

static void found_clear(struct found *f) {
        size_t i;

        for (i = 0; i < f->n; i++)
                free(f->v[i].state);
        free(f->v);
        f->v = NULL;
        f->n = 0;
}

/* Every reservation file in dfd, looked at for the daemon of state_dir. 0 or -errno. */
static int list(int dfd, const char *state_dir, struct found *f) {
        struct dirent *e;
        uint32_t base;
        int r = 0, fd = dup(dfd);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;

        if (!dir) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                return r;
        }
        f->v = calloc(MAX_RESERVATIONS, sizeof(*f->v));
        if (!f->v)
                r = -ENOMEM;
        while (r == 0 && (e = readdir(dir)) != NULL) {
                if (parse_base(e->d_name, &base) < 0)
                        continue;
                if (f->n == MAX_RESERVATIONS)
                        r = -EMFILE;
                else if ((r = inspect(dfd, e->d_name, base, state_dir, &f->v[f->n])) == 0)
                        f->n++;
                else if (r == -ENOENT) /* removed meanwhile: one of ours, or by hand */
                        r = 0;
        }
        closedir(dir);
        if (r < 0)
                found_clear(f);
        return r;
}

/* The reservation that keeps base from being taken: live, or dormant and another state
 * directory's. NULL when there is none. */
static const struct held *blocker(const struct found *f, uint32_t base) {
        size_t i;

        for (i = 0; i < f->n; i++)
                if (overlaps(f->v[i].base, base) &&
                    (f->v[i].live || (f->v[i].dormant && !f->v[i].ours)))
                        return &f->v[i];
        return NULL;
}

/* Why base cannot be taken (b blocks it), into err. */
static void explain(const struct held *b, uint32_t base, char *err, size_t errlen) {
        const char *state = b->state ? b->state : "unknown";
        char how[64] = " are";

        if (b->base != base)
                snprintf(how, sizeof(how), " overlap %u-%u,", (unsigned)b->base,
                         (unsigned)(b->base + SBX_UID_COUNT - 1));
        if (b->live)
                snprintf(err, errlen,
                         "sandbox uids %u-%u%s reserved by the sbxd of pid %ld (state directory "
                         "%s)",
                         (unsigned)base, (unsigned)(base + SBX_UID_COUNT - 1), how, b->pid, state);
        else
                snprintf(err, errlen,
                         "sandbox uids %u-%u%s the state directory %s's (no sbxd runs on it now; "
                         "its records bind those uids to owners for good)",
                         (unsigned)base, (unsigned)(base + SBX_UID_COUNT - 1), how, state);
}

/* The range w->legacy_state_dir (the default state directory, not the daemon's own)
 * owns, as a dormant reservation added to f when its file is missing (lost, or records
 * from before ranges, which may bind uids of the first range): its record's, or the
 * first when it has records (sbxd.db) but no record of a range. 0 or -ENOMEM. */
static int add_legacy(struct found *f, const struct uidrange_want *w) {
        char path[PATH_MAX];
        uint32_t base = 0;
        size_t i;
        int r;

        if (!w->legacy_state_dir || strcmp(w->legacy_state_dir, w->state_dir) == 0 ||
            f->n == MAX_RESERVATIONS)
                return 0;
        r = read_record(w->legacy_state_dir, &base);
        snprintf(path, sizeof(path), "%s/sbxd.db", w->legacy_state_dir);
        if (r == -ENOENT && access(path, F_OK) == 0)
                base = SBX_UID_BASE;
        else if (r < 0)
                return 0;
        for (i = 0; i < f->n; i++)
                if (f->v[i].base == base)
                        return 0;
        f->v[f->n] =
                (struct held){.base = base, .dormant = 1, .state = strdup(w->legacy_state_dir)};
        if (!f->v[f->n].state)
                return -ENOMEM;
        f->n++;
        return 0;
}

/* The range to take: want when it is free, else (want 0) the first free one of the
 * SBX_UID_RANGES. 0 with *ret, or -errno with err. */
static int choose(const struct found *f, uint32_t want, uint32_t *ret, char *err, size_t errlen) {
        const struct held *b;
        unsigned k;

        if (want) {
                b = blocker(f, want);
                if (b) {
                        explain(b, want, err, errlen);
                        return -EADDRINUSE;
                }
                *ret = want;
                return 0;
        }
        for (k = 0; k < SBX_UID_RANGES; k++)
                if (!blocker(f, SBX_UID_BASE + k * SBX_UID_COUNT)) {
                        *ret = SBX_UID_BASE + k * SBX_UID_COUNT;
                        return 0;
                }
        snprintf(err, errlen,
                 "every one of the %u sandbox uid ranges from %u is reserved (see %s): stop a "
                 "root sbxd, remove a state directory no longer used, or pass --uid-base",
                 SBX_UID_RANGES, SBX_UID_BASE, UIDRANGE_DIR);
        return -EAGAIN;
}

/* Takes the reservation file of base in dfd for the daemon of state_dir: locked, and
 * naming that daemon. Returns its fd or -errno. */
static int take(int dfd, uint32_t base, const char *state_dir) {
        char name[16];
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int fd, r = 0;

        snprintf(name, sizeof(name), "%u", (unsigned)base);
        fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (fcntl(fd, F_OFD_SETLK, &l) < 0)
                r = errno == EAGAIN || errno == EACCES ? -EADDRINUSE : -errno;
        else if (ftruncate(fd, 0) < 0 ||
                 dprintf(fd, "pid %ld\nstate %s\n", (long)getpid(), state_dir) < 0 || fsync(fd) < 0)
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* Removes the reservations that keep nothing (stale, or this state directory's old
 * range) but base's, which is now the daemon's. */
static void prune(int dfd, const struct found *f, uint32_t base) {
        char name[16];
        size_t i;

        for (i = 0; i < f->n; i++) {
                const struct held *h = &f->v[i];
                if (h->live || h->base == base || (h->dormant && !h->ours))
                        continue;
                snprintf(name, sizeof(name), "%u", (unsigned)h->base);
                (void)unlinkat(dfd, name, 0);
        }
}

/* Opens dir (created root's and 0700 if missing; made 0700 if it is not) and takes its
 * lock, waiting DIR_LOCK_WAIT_MS at most. Returns its fd (the lock goes with it) or
 * -errno with err. */
static int open_locked_dir(const char *dir, char *err, size_t errlen) {
        struct stat st;
        int fd, waited = 0;

        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
                return -errno;
        }
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                int r = -errno;
                snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return r;
        }
        if (st.st_uid != 0) {
                snprintf(err, errlen, "%s belongs to uid %u, not root: remove it", dir,
                         (unsigned)st.st_uid);
                close(fd);
                return -EPERM;
        }
        if ((st.st_mode & 077) && fchmod(fd, 0700) < 0) {
                snprintf(err, errlen, "cannot make %s root's alone: %s", dir, strerror(errno));
                close(fd);
                return -EPERM;
        }
        while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK || waited >= DIR_LOCK_WAIT_MS) {
                        snprintf(err, errlen, "cannot lock %s: %s", dir,
                                 errno == EWOULDBLOCK ? "another sbxd holds it" : strerror(errno));
                        close(fd);
                        return errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
                }
                sleep_ms(20);
                waited += 20;
        }
        return fd;
}

/* The range the records want: the one whose uids they bind (for records from before
 * ranges, which bind uids of the first range only, that one), else --uid-base's, else
 * the recorded one; 0 when any will do. 0 with *ret, or -EINVAL with err. */
static int wanted(const struct uidrange_want *w, uint32_t record, uint32_t *ret, char *err,
                  size_t errlen) {
        uint32_t b = record;

        if (!w->bound_lo) {
                *ret = w->flag_base ? w->flag_base : record;
                return 0;
        }
        if (!b && w->bound_lo >= SBX_UID_BASE &&
            w->bound_lo - SBX_UID_BASE < SBX_UID_RANGES * SBX_UID_COUNT)
                b = SBX_UID_BASE + (w->bound_lo - SBX_UID_BASE) / SBX_UID_COUNT * SBX_UID_COUNT;
        if (!b || w->bound_lo < b || w->bound_hi - b >= SBX_UID_COUNT) {
                snprintf(err, errlen,
                         "the records in %s bind sandbox uids %u-%u to owners, which is not one "
                         "range%s; restore %s/%s or use another --state-dir",
                         w->state_dir, (unsigned)w->bound_lo, (unsigned)w->bound_hi,
                         record ? " from the one recorded" : "", w->state_dir, UIDRANGE_RECORD);
                return -EINVAL;
        }
        if (w->flag_base && w->flag_base != b) {
                snprintf(err, errlen,
                         "--uid-base %u: the records in %s bind the sandbox uids from %u to "
                         "owners for good; pass --uid-base %u, or another --state-dir",
                         (unsigned)w->flag_base, w->state_dir, (unsigned)b, (unsigned)b);
                return -EINVAL;
        }
        *ret = b;
        return 0;
}

/* The struct for the range base, taken (its reservation file is fd). NULL when out of
 * memory. */
static struct uidrange *range_new(const struct uidrange_want *w, uint32_t base,
                                  enum uidrange_origin origin, int fd) {
        struct uidrange *r = calloc(1, sizeof(*r));

        if (!r)
                return NULL;
        r->base = base;
        r->origin = origin;
        r->fd = fd;
        r->dir = strdup(w->dir);
        if (asprintf(&r->path, "%s/%u", w->dir, (unsigned)base) < 0)
                r->path = NULL;
        if (asprintf(&r->record, "%s/%s", w->state_dir, UIDRANGE_RECORD) < 0)
                r->record = NULL;
        if (!r->dir || !r->path || !r->record) {
                r->fd = -1;
                uidrange_release(r, 0);
                return NULL;
        }
        return r;
}

/* With the directory's lock held (dfd): chooses the range (want, or any when 0), takes
 * it and records it. Returns the reservation file's fd with *ret_base, or -errno with
 * err. */
static int reserve_locked(int dfd, const struct uidrange_want *w, uint32_t want, uint32_t record,
                          uint32_t *ret_base, char *err, size_t errlen) {
        struct found f = {0};
        char name[16];
        int fd, r;

        r = list(dfd, w->state_dir, &f);
        if (r == 0)
                r = add_legacy(&f, w);
        if (r < 0) {
                snprintf(err, errlen, "cannot read the reservations in %s: %s", w->dir,
                         strerror(-r));
                return r;
        }
        r = choose(&f, want, ret_base, err, errlen);
        fd = r < 0 ? r : take(dfd, *ret_base, w->state_dir);
        if (r == 0 && fd < 0)
                snprintf(err, errlen, "cannot take %s/%u: %s", w->dir, (unsigned)*ret_base,
                         fd == -EADDRINUSE ? "another sbxd holds it" : strerror(-fd));
        if (fd >= 0 && record != *ret_base && (r = write_record(w->state_dir, *ret_base)) < 0) {
                snprintf(err, errlen, "cannot record the uid range in %s/%s: %s", w->state_dir,
                         UIDRANGE_RECORD, strerror(-r));
                snprintf(name, sizeof(name), "%u", (unsigned)*ret_base);
                (void)unlinkat(dfd, name, 0);
                close(fd);
                fd = r;
        }
        if (fd >= 0)
                prune(dfd, &f, *ret_base);
        found_clear(&f);
        return fd;
}

int uidrange_reserve(const struct uidrange_want *w, struct uidrange **ret, char *err,
                     size_t errlen) {
        uint32_t record = 0, want = 0, base = 0;
        int r = read_record(w->state_dir, &record), dfd, fd;

        if (r < 0 && r != -ENOENT) {
                snprintf(err, errlen, "cannot read %s/%s: %s", w->state_dir, UIDRANGE_RECORD,
                         r == -EPERM ? "not a file of root's" : strerror(-r));
                return r;
        }
        r = wanted(w, record, &want, err, errlen);
        if (r < 0)
                return r;
        dfd = open_locked_dir(w->dir, err, errlen);
        if (dfd < 0)
                return dfd;
        fd = reserve_locked(dfd, w, want, record, &base, err, errlen);
        close(dfd);
        if (fd < 0)
                return fd;
        *ret = range_new(w, base,
                         record == base || w->bound_lo ? UIDRANGE_RECORDED
                         : w->flag_base                ? UIDRANGE_FLAG
                                                       : UIDRANGE_PICKED,
                         fd);
        if (!*ret) {
                close(fd);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

struct uidrange *uidrange_release(struct uidrange *r, int forget) {
        char err[256];
        int dfd;

        if (!r)
                return NULL;
        if (forget && r->fd >= 0 && (dfd = open_locked_dir(r->dir, err, sizeof(err))) >= 0) {
                /* The record first: a file without it is stale, never the reverse. */
                (void)unlink(r->record);
                (void)unlink(r->path);
                close(dfd);
        }
        if (r->fd >= 0)
                close(r->fd);
        free(r->dir);
        free(r->path);
        free(r->record);
        free(r);
        return NULL;
}

uint32_t uidrange_base(const struct uidrange *own) {
        return own ? own->base : SBX_UID_BASE;
}

int uidrange_is_sandbox_uid(const struct uidrange *own, uint32_t uid) {
        struct dirent *e;
        uint32_t base;
        int found = 0;
        DIR *dir;

        if (uid < SBX_UID_BASE_MIN)
                return 0;
        if (own && uid >= own->base && uid - own->base < SBX_UID_COUNT)
                return 1;
        if (uid >= SBX_UID_BASE && uid - SBX_UID_BASE < SBX_UID_RANGES * SBX_UID_COUNT)
                return 1;
        /* The blocks of every range's image sandboxes (sbx_limits.h). */
        if (uid >= SBX_IMAGE_UID_BASE &&
            uid - SBX_IMAGE_UID_BASE < SBX_UID_RANGES * SBX_IMAGE_BLOCKS * SBX_IMAGE_IDS)
                return 1;
        dir = opendir(own ? own->dir : UIDRANGE_DIR);
        while (dir && !found && (e = readdir(dir)) != NULL)
                found = parse_base(e->d_name, &base) == 0 && uid >= base &&
                        uid - base < SBX_UID_COUNT;
        if (dir)
                closedir(dir);
        return found;
}

const char *uidrange_origin_name(enum uidrange_origin o) {
        switch (o) {
        case UIDRANGE_PICKED:
                return "picked";
        case UIDRANGE_RECORDED:
                return "recorded";
        case UIDRANGE_FLAG:
                return "flag";
        }
        return "unknown";
}
