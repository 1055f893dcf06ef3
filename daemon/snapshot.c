/* snapshot.c: a sandbox's files captured as an image of the store; see snapshot.h. */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "imageconfig.h"
#include "imagestore.h"
#include "layerns.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG   "application/vnd.oci.image.config.v1+json"
#define MT_OCI_TAR      "application/vnd.oci.image.layer.v1.tar"

static int fail(struct snapshot_job *j, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct snapshot_job *j, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(j->err, sizeof(j->err), fmt, ap);
        va_end(ap);
        return r;
}

static void continue_stopped(struct snapshot_freezer *f);

void snapshot_job_clear(struct snapshot_job *j) {
        unsigned i;

        if (j->upper_fd >= 0)
                close(j->upper_fd);
        if (j->ws_fd >= 0)
                close(j->ws_fd);
        j->upper_fd = j->ws_fd = -1;
        free(j->sandbox_id);
        free(j->policy);
        j->policy = NULL;
        for (i = 0; i < j->n_refs; i++)
                free(j->refs[i]);
        free(j->freezer.control);
        free(j->freezer.events);
        continue_stopped(&j->freezer); /* none, unless a capture stopped half way */
        free(j->freezer.stopped);
        j->freezer.stopped = NULL;
        j->sandbox_id = j->freezer.control = j->freezer.events = NULL;
        j->n_refs = 0;
}

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the freezer ----------------------------------------------------------------------- */

static int write_text(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

        if (fd < 0)
                return -errno;
        if (write(fd, text, strlen(text)) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* 1 when the group's processes are all frozen, 0 not yet, -errno. */
static int is_frozen(const struct snapshot_freezer *f) {
        char buf[512];
        int fd = open(f->v2 ? f->events : f->control, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return f->v2 ? strstr(buf, "frozen 1") != NULL : strncmp(buf, "FROZEN", 6) == 0;
}

/* ---- without a cgroup: signals ---------------------------------------------------------- */

/* The state letter of /proc/PID/stat ('T' stopped), or 0 when it is gone. */
static char proc_state(pid_t pid) {
        char path[64], buf[512], *close_paren;
        int fd;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        close_paren = strrchr(buf, ')');
        return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

/* 1 when pid is a process of f's PID namespace (not its init). */
static int in_namespace(const struct snapshot_freezer *f, pid_t pid) {
        char path[64];
        struct stat st;

        if (pid == f->init_pid)
                return 0;
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        return stat(path, &st) == 0 && st.st_dev == f->pidns_dev && st.st_ino == f->pidns_ino;
}

static int stopped_by_us(const struct snapshot_freezer *f, pid_t pid) {
        for (size_t i = 0; i < f->n_stopped; i++)
                if (f->stopped[i].pid == pid)
                        return 1;
        return 0;
}

/* One pass over /proc: stops what of f's namespace runs. 1 when all were stopped
 * already, 0 when one was not yet, -errno. */
static int stop_pass(struct snapshot_freezer *f) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        int all = 1;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                pid_t pid = (pid_t)atoi(de->d_name);
                char st;
                int fd;
                if (pid <= 0 || !in_namespace(f, pid) || (st = proc_state(pid)) == 0 || st == 'Z')
                        continue;
                if (st == 'T' || st == 't')
                        continue; /* ours already, or stopped before */
                all = 0;
                if (stopped_by_us(f, pid))
                        continue; /* signalled, not stopped yet */
                if (f->n_stopped == SNAPSHOT_MAX_STOPPED)
                        break;
                fd = (int)syscall(SYS_pidfd_open, pid, 0);
                if (fd < 0)
                        continue; /* gone meanwhile */
                if (syscall(SYS_pidfd_send_signal, fd, SIGSTOP, NULL, 0) < 0) {
                        close(fd);
                        continue;
                }
                f->stopped[f->n_stopped].pidfd = fd;
                f->stopped[f->n_stopped++].pid = pid;
        }
        closedir(d);
        return all;
}

static void continue_stopped(struct snapshot_freezer *f) {
        for (size_t i = 0; i < f->n_stopped; i++) {
                (void)syscall(SYS_pidfd_send_signal, f->stopped[i].pidfd, SIGCONT, NULL, 0);
                close(f->stopped[i].pidfd);
        }
        f->n_stopped = 0;
}

/* ---- the freezer ----------------------------------------------------------------------- */

static void thaw(struct snapshot_freezer *f) {
        if (f->control)
                (void)write_text(f->control, f->v2 ? "0" : "THAWED");
        else
                continue_stopped(f);
}

/* Stops f's namespace's processes with signals, until all show stopped. */
static int stop_all(struct snapshot_job *j) {
        struct snapshot_freezer *f = &j->freezer;
        uint64_t t0 = now_ms();
        int r;

        if (!f->stopped && !(f->stopped = calloc(SNAPSHOT_MAX_STOPPED, sizeof(*f->stopped))))
                return fail(j, -ENOMEM, "daemon out of memory");
        while ((r = stop_pass(f)) == 0) {
                if (now_ms() - t0 > SNAPSHOT_FREEZE_WAIT_MS) {
                        thaw(f);
                        return fail(j, -EBUSY,
                                    "its processes did not stop within %u ms (one may be in an "
                                    "uninterruptible wait: on a file system or a device); retry",
                                    SNAPSHOT_FREEZE_WAIT_MS);
                }
                usleep(1000);
        }
        if (r < 0) {
                thaw(f);
                return fail(j, r, "cannot stop its processes: %s", strerror(-r));
        }
        return 0;
}

/* Freezes the group and waits until it is (SNAPSHOT_FREEZE_WAIT_MS at most). */
static int freeze(struct snapshot_job *j) {
        struct snapshot_freezer *f = &j->freezer;
        uint64_t t0 = now_ms();
        int r;

        if (!f->control)
                return stop_all(j);
        r = write_text(f->control, f->v2 ? "1" : "FROZEN");

        while (r == 0 && (r = is_frozen(f)) == 0) {
                if (now_ms() - t0 > SNAPSHOT_FREEZE_WAIT_MS) {
                        thaw(f);
                        return fail(j, -EBUSY,
                                    "its processes did not freeze within %u ms (one may be in an "
                                    "uninterruptible wait: on a file system or a device); retry",
                                    SNAPSHOT_FREEZE_WAIT_MS);
                }
                usleep(1000);
        }
        if (r < 0) {
                thaw(f);
                return fail(j, r, "cannot freeze its processes: %s", strerror(-r));
        }
        return 0;
}

/* ---- the layer --------------------------------------------------------------------------- */

/* ---- the capture ----------------------------------------------------------------------- */

/* The capture writes the tar into a spool (an unnamed file of the store's scratch space)
 * at the speed of reading the sandbox's files, frozen; a pump thread copies the spool
 * into a pipe as fast as the import, on a thread of its own, unpacks it into the store
 * (imagestore_import_layer). So the freeze lasts as long as the files take to read, not
 * as long as their import, and the spool is gone before the import syncs the layer: its
 * pages are dropped, never written back (what changed is written to disk once). */
struct spool {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        uint64_t written; /* bytes of the tar in the spool so far */
        int done;         /* the capture has ended */
        int failed;       /* ... and failed: the pump stops at once */
        int stopped;      /* the import stopped reading: the capture stops */
        int fd;           /* the spool */
        int out;          /* the pipe's write end (the pump closes it) */
};

struct import {
        struct imagestore *store;
        struct imagestore_budget budget;
        int fd; /* the pipe's read end, until the store takes it */
        int clone_fd; /* the spool's, when the store shares blocks; the store closes it */
        struct imagestore_layer_ref ref;
        char err[512];
        int r;
};

static int spool_written(void *ud, uint64_t bytes) {
        struct spool *sp = ud;
        int stopped;

        pthread_mutex_lock(&sp->mu);
        sp->written = bytes;
        stopped = sp->stopped;
        pthread_cond_signal(&sp->cond);
        pthread_mutex_unlock(&sp->mu);
        return stopped;
}

static void spool_done(struct spool *sp, int failed) {
        pthread_mutex_lock(&sp->mu);
        sp->done = 1;
        sp->failed = failed;
        pthread_cond_signal(&sp->cond);
        pthread_mutex_unlock(&sp->mu);
}

/* Copies the spool into the pipe as it grows, until the capture is done and all of it
 * is copied, or the import stops reading (EPIPE: the capture is told). Closes the
 * pipe. */
static void *pump_main(void *ud) {
        struct spool *sp = ud;
        char buf[1 << 16]; /* the thread's stack is 8 MiB */
        uint64_t off = 0;

        for (;;) {
                uint64_t avail;
                int done, failed;
                ssize_t n;

                pthread_mutex_lock(&sp->mu);
                while (sp->written == off && !sp->done)
                        pthread_cond_wait(&sp->cond, &sp->mu);
                avail = sp->written - off;
                done = sp->done;
                failed = sp->failed;
                pthread_mutex_unlock(&sp->mu);
                if ((avail == 0 && done) || failed)
                        break;
                n = pread(sp->fd, buf, avail < sizeof(buf) ? avail : sizeof(buf), (off_t)off);
                if (n <= 0 && !(n < 0 && errno == EINTR))
                        break; /* the import sees a cut tar */
                for (ssize_t k = 0; n > 0 && k < n;) {
                        ssize_t m = write(sp->out, buf + k, (size_t)(n - k));
                        if (m < 0 && errno == EINTR)
                                continue;
                        if (m <= 0) { /* the import stopped: it says why */
                                pthread_mutex_lock(&sp->mu);
                                sp->stopped = 1;
                                pthread_mutex_unlock(&sp->mu);
                                goto out;
                        }
                        k += m;
                }
                off += n > 0 ? (uint64_t)n : 0;
        }
out:
        close(sp->out);
        return NULL;
}

static int take_pipe(void *ud, char *err, size_t errlen) {
        int *fd = ud, r = *fd;

        (void)err;
        (void)errlen;
        *fd = -1; /* the store closes it */
        return r;
}

static void *import_main(void *ud) {
        struct import *im = ud;
        struct imagestore_blob_source src = {take_pipe, &im->fd, NULL, -1,
                                             im->clone_fd >= 0 ? &im->clone_fd : NULL};

        im->r = imagestore_import_layer(im->store, &src, &im->budget, &im->ref, im->err,
                                        sizeof(im->err));
        if (im->fd >= 0) /* never taken: the pump's next write fails */
                close(im->fd);
        if (im->clone_fd >= 0)
                close(im->clone_fd);
        return NULL;
}

/* Writes the sandbox's files as a tar into the spool, frozen meanwhile. */
static int write_tar(struct snapshot_job *j, struct spool *sp, uint64_t budget,
                     uint64_t max_entries, struct layerwrite_result *res, char *err,
                     size_t errlen) {
        struct layerwrite_opts o = {.max_bytes = budget, .max_entries = max_entries,
                                    .uids = j->uids, .gids = j->gids, .no_digest = 1,
                                    .clone = imagestore_shares_blocks(j->store),
                                    .written = spool_written, .written_ud = sp};
        uint64_t t0;
        int r;

        t0 = now_ms(); /* frozen from the freeze's start (its wait included) to the thaw */
        if ((j->freezer.control || j->freezer.pidns_ino) && (r = freeze(j)) < 0)
                return r;
        j->signalled = j->freezer.n_stopped;
        /* A rootless sbxd whose store keeps subordinate ids reads its sandboxes' files in
         * their namespace, where it may (layerns.h). */
        r = layerns_capture(&imagestore_opts(j->store)->ns, j->upper_fd, j->ws_fd, j->upper_kind,
                            sp->fd, &o, res, err, errlen);
        if (j->freezer.control || j->freezer.pidns_ino)
                thaw(&j->freezer);
        j->frozen_ms = now_ms() - t0;
        return r;
}

/* The spool and the pipe (sp->fd; sp->out and im->fd, its two ends), then the import
 * and pump threads (*import, *pump). 0, or -errno with nothing left (j->err set). */
static int start_threads(struct snapshot_job *j, struct spool *sp, struct import *im,
                         pthread_t *pump, pthread_t *import) {
        int p[2] = {-1, -1}, r;

        sp->fd = imagestore_spool(j->store);
        if (sp->fd < 0)
                return fail(j, sp->fd, "image store: %s", strerror(-sp->fd));
        if (pipe2(p, O_CLOEXEC) < 0) {
                r = -errno;
                close(sp->fd);
                return fail(j, r, "a pipe: %s", strerror(-r));
        }
        (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20); /* fewer turns; the default works too */
        sp->out = p[1];
        im->fd = p[0];
        /* The import takes each file's data from the spool where the tar has it: the
         * same blocks, shared. */
        im->clone_fd = imagestore_shares_blocks(j->store) ? fcntl(sp->fd, F_DUPFD_CLOEXEC, 3) : -1;
        r = -pthread_create(import, NULL, import_main, im);
        if (r == 0 && (r = -pthread_create(pump, NULL, pump_main, sp)) < 0) {
                close(p[1]); /* the import sees an empty tar, and ends */
                pthread_join(*import, NULL);
                close(sp->fd);
                return fail(j, r, "a thread: %s", strerror(-r));
        }
        if (r < 0) {
                close(p[0]);
                close(p[1]);
                if (im->clone_fd >= 0)
                        close(im->clone_fd);
                close(sp->fd);
                return fail(j, r, "a thread: %s", strerror(-r));
        }
        return 0;
}

/* Captures the sandbox's files into a new layer of the store (pinned: *ref, its
 * diff_id in res->digest), its processes frozen while they are read. */
static int capture(struct snapshot_job *j, uint64_t budget, uint64_t max_entries,
                   struct layerwrite_result *res, struct imagestore_layer_ref *ref) {
        const struct imagestore_opts *so = imagestore_opts(j->store);
        struct spool sp = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
                           .fd = -1, .out = -1};
        struct import im = {.store = j->store,
                            .budget = {.bytes = budget,
                                       .entries = so->max_image_entries ? so->max_image_entries
                                                                        : UINT64_MAX},
                            .fd = -1, .clone_fd = -1};
        char err[512] = "";
        pthread_t pump, import;
        int r;

        r = start_threads(j, &sp, &im, &pump, &import);
        if (r < 0)
                return r;
        r = write_tar(j, &sp, budget, max_entries, res, err, sizeof(err));
        spool_done(&sp, r < 0);
        pthread_join(pump, NULL);
        close(sp.fd); /* before the import syncs: its pages go, never written back */
        pthread_join(import, NULL);
        pthread_cond_destroy(&sp.cond);
        pthread_mutex_destroy(&sp.mu);
        /* A cut tar the import took whole (cut at an entry's end): nobody's layer, which
         * the store's next collection removes. */
        if (r < 0 && im.r == 0)
                imagestore_unpin(j->store, im.ref.diff_id);
        if (im.r < 0 && (r == 0 || r == -EPIPE)) /* the import stopped first */
                return fail(j, im.r, "%s", im.err[0] ? im.err : strerror(-im.r));
        if (r == -EFBIG)
                return fail(j, r, "%s: past sbxd --max-image-size with its image", err);
        if (r == -E2BIG)
                return fail(j, r, "%s: past the image store's bound of entries a layer", err);
        if (r < 0)
                return fail(j, r, "%s", err[0] ? err : strerror(-r));
        *ref = im.ref;
        snprintf(res->digest, sizeof(res->digest), "%s", im.ref.diff_id);
        j->layer_bytes = res->size;
        j->skipped = res->skipped;
        snprintf(j->first_skipped, sizeof(j->first_skipped), "%s", res->first_skipped);
        return 0;
}

/* ---- the owner's bound ------------------------------------------------------------------- */

/* The file data of the owner's snapshots' own layers (their configs say it). */
static uint64_t owner_usage(struct snapshot_job *j) {
        struct imagestore_image *all = NULL;
        size_t plen = strlen(j->owner_prefix);
        int n = imagestore_list(j->store, &all), i;
        uint64_t used = 0, bytes;

        for (i = 0; i < n; i++) {
                struct imageconfig cfg;
                size_t k;
                for (k = 0; k < all[i].nrefs; k++)
                        if (strncmp(all[i].refs[k], j->owner_prefix, plen) == 0)
                                break;
                if (k == all[i].nrefs || imagestore_inspect(j->store, all[i].manifest, &cfg) < 0)
                        continue;
                /* The label is the config's, which a pulled image may forge: never more
                 * than the files the store measured (a forged 2^63 twice would otherwise
                 * wrap the sum and hide every real snapshot). */
                bytes = cfg.snapshot_bytes < all[i].data_bytes ? cfg.snapshot_bytes
                                                               : all[i].data_bytes;
                used = used + bytes < used ? UINT64_MAX : used + bytes;
                imageconfig_free(&cfg);
        }
        if (n > 0)
                imagestore_list_free(all, (size_t)n);
        return used;
}

/* -EDQUOT (with the message) when adding bytes passes the owner's bound. */
static int check_owner(struct snapshot_job *j, uint64_t used, uint64_t bytes) {
        if (used <= j->max_snapshot_bytes && bytes <= j->max_snapshot_bytes - used)
                return 0;
        return fail(j, -EDQUOT,
                    "the snapshots of uid %.*s hold %llu bytes of files; with this one (%llu) that "
                    "is past sbxd --max-snapshot-bytes-per-uid (%llu): remove some (sbx image rm "
                    "NAME)",
                    (int)strlen(j->owner_prefix) - 1, j->owner_prefix, (unsigned long long)used,
                    (unsigned long long)bytes, (unsigned long long)j->max_snapshot_bytes);
}

/* ---- the image --------------------------------------------------------------------------- */

/* The JSON of the parent's manifest (config 0) or config (1) blob, or NULL after fail. */
static json_t *load_blob(struct snapshot_job *j, int config) {
        int fd = imagestore_open_blob(j->store, j->parent, config);
        json_error_t je;
        json_t *v;

        if (fd < 0) {
                fail(j, fd, "its image %s cannot be read: %s", j->parent, strerror(-fd));
                return NULL;
        }
        v = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
        close(fd);
        if (!json_is_object(v)) {
                json_decref(v);
                fail(j, -EINVAL, "its image's %s is not a JSON object", config ? "config" : "manifest");
                return NULL;
        }
        return v;
}

/* j->now_ms as RFC 3339 ("2026-12-07T12:00:00Z"). */
static void iso_time(int64_t ms, char *buf, size_t len) {
        time_t t = (time_t)(ms / 1000);
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* obj[key], an object or array of the kind made (and set) when absent; NULL when key
 * holds something else. */
static json_t *member(json_t *obj, const char *key, int array) {
        json_t *v = json_object_get(obj, key);

        if (!v || json_is_null(v)) {
                v = array ? json_array() : json_object();
                if (!v || json_object_set_new(obj, key, v) < 0)
                        return NULL;
        }
        return (array ? json_is_array(v) : json_is_object(v)) ? v : NULL;
}

/* The parent's config with the new layer: its diff_id, a history entry, the labels. */
static int new_config(struct snapshot_job *j, const struct layerwrite_result *res, char **ret) {
        const char *diff_id = res->digest;
        json_t *c = load_blob(j, 1), *rootfs, *ids, *hist, *cfg, *labels, *h;
        char when[32], by[300], bytes[24];

        if (!c)
                return j->r ? j->r : -EINVAL;
        iso_time(j->now_ms, when, sizeof(when));
        snprintf(by, sizeof(by), "sbx snapshot %s", j->sandbox_id);
        snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)res->data_bytes);
        rootfs = member(c, "rootfs", 0);
        ids = rootfs ? member(rootfs, "diff_ids", 1) : NULL;
        hist = member(c, "history", 1);
        cfg = member(c, "config", 0);
        labels = cfg ? member(cfg, "Labels", 0) : NULL;
        h = json_pack("{s:s, s:s}", "created", when, "created_by", by);
        if (!ids || !hist || !labels || !h || json_array_append_new(ids, json_string(diff_id)) < 0 ||
            json_array_append_new(hist, h) < 0 ||
            json_object_set_new(labels, IMAGECONFIG_LABEL_WORKSPACE, json_string("1")) < 0 ||
            json_object_set_new(labels, IMAGECONFIG_LABEL_SANDBOX, json_string(j->sandbox_id)) < 0 ||
            json_object_set_new(labels, IMAGECONFIG_LABEL_PARENT, json_string(j->parent)) < 0 ||
            json_object_set_new(labels, IMAGECONFIG_LABEL_BYTES, json_string(bytes)) < 0 ||
            (j->policy &&
             json_object_set_new(labels, IMAGECONFIG_LABEL_POLICY, json_string(j->policy)) < 0) ||
            json_object_set_new(rootfs, "type", json_string("layers")) < 0 ||
            json_object_set_new(c, "created", json_string(when)) < 0 ||
            !(*ret = json_dumps(c, JSON_COMPACT))) {
                json_decref(c);
                return fail(j, -EINVAL, "its image's config cannot take the snapshot's layer");
        }
        json_decref(c);
        return 0;
}

/* The OCI media type of a layer descriptor's (Docker's have OCI equivalents). */
static const char *oci_layer_type(const char *mt) {
        if (mt && strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar.gzip") == 0)
                return "application/vnd.oci.image.layer.v1.tar+gzip";
        if (mt && strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar") == 0)
                return MT_OCI_TAR;
        return mt;
}

/* An OCI manifest: the parent's layers, then the new one (a tar: its digest its diff_id). */
static int new_manifest(struct snapshot_job *j, const char *config, size_t config_len,
                        const char *diff_id, uint64_t size, char **ret) {
        json_t *p = load_blob(j, 0), *layers, *m = NULL, *out = NULL, *l;
        char cdigest[DIGEST_STR_BYTES];
        size_t i;

        if (!p)
                return j->r ? j->r : -EINVAL;
        layers = json_object_get(p, "layers");
        if (digest_buf(config, config_len, cdigest) == 0 && json_is_array(layers))
                out = json_array();
        for (i = 0; out && i < json_array_size(layers); i++) {
                json_t *d = json_deep_copy(json_array_get(layers, i));
                const char *mt = json_string_value(json_object_get(d, "mediaType"));
                if (!d || !mt || json_object_set_new(d, "mediaType", json_string(oci_layer_type(mt))) < 0 ||
                    json_array_append_new(out, d) < 0) {
                        json_decref(d);
                        json_decref(out);
                        out = NULL;
                }
        }
        l = out ? json_pack("{s:s, s:s, s:I}", "mediaType", MT_OCI_TAR, "digest", diff_id, "size",
                            (json_int_t)size)
                : NULL;
        if (l && json_array_append_new(out, l) == 0)
                m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
                              MT_OCI_MANIFEST, "config", "mediaType", MT_OCI_CONFIG, "digest",
                              cdigest, "size", (json_int_t)config_len, "layers", out);
        else
                json_decref(out);
        json_decref(p);
        if (!m || !(*ret = json_dumps(m, JSON_COMPACT))) {
                json_decref(m);
                return fail(j, -EINVAL, "its image's manifest cannot take the snapshot's layer");
        }
        json_decref(m);
        return 0;
}

/* The layers are in the store already (the sandbox holds its image; the snapshot's is
 * pinned). */
static int no_source(void *ud, char *err, size_t errlen) {
        (void)ud;
        snprintf(err, errlen, "a layer of the image is gone from the store");
        return -ENOENT;
}

/* Stores blob text under its digest (into digest), pinned. */
static int put(struct snapshot_job *j, const char *text, char digest[DIGEST_STR_BYTES]) {
        size_t len = strlen(text);
        int r = digest_buf(text, len, digest);

        if (r == 0)
                r = imagestore_pin(j->store, digest);
        if (r == 0 && (r = imagestore_put_blob(j->store, digest, text, len, j->err,
                                               sizeof(j->err))) < 0)
                imagestore_unpin(j->store, digest);
        return r;
}

/* The refs of the parent's layers (img) and the new one (res) into refs (img.nlayers +
 * 1), all in the store, counted against the image's bounds. Pins each (the caller
 * unpins what *ret_pinned says). */
static int get_layers(struct snapshot_job *j, const struct imagestore_image *img,
                      const struct layerwrite_result *res, struct imagestore_layer_ref *refs,
                      size_t *ret_pinned) {
        const struct imagestore_opts *so = imagestore_opts(j->store);
        struct imagestore_blob_source none = {no_source, NULL, NULL, -1, NULL};
        struct imagestore_budget budget = {
                .bytes = j->max_image_bytes,
                .entries = so->max_image_entries ? so->max_image_entries : UINT64_MAX};
        size_t i;
        int r = 0;

        for (i = 0; i <= img->nlayers && r == 0; i++) {
                const char *id = i < img->nlayers ? img->layers[i] : res->digest;
                if ((r = imagestore_pin(j->store, id)) < 0)
                        break;
                *ret_pinned = i + 1;
                r = imagestore_get_layer(j->store, id, &none, &budget, &refs[i], j->err,
                                         sizeof(j->err));
                snprintf(refs[i].diff_id, sizeof(refs[i].diff_id), "%s", id);
        }
        return r;
}

/* A snapshot taken by a user the sandbox is shared with (two refs: the owner's, the
 * caller's) never moves a name the owner has: that user would choose what the owner's
 * next sandboxes of that name hold. -EEXIST when the owner's ref names an image. (The
 * owner's own pull of that name meanwhile may still be moved: the owner's doing.) */
static int check_owner_name(struct snapshot_job *j) {
        struct imagestore_image img;
        const char *name;

        if (j->n_refs < 2 || imagestore_find(j->store, j->refs[0], &img) < 0)
                return 0;
        imagestore_image_free(&img);
        name = strchr(j->refs[0], '/') ? strchr(j->refs[0], '/') + 1 : j->refs[0];
        return fail(j, -EEXIST,
                    "its owner has an image named %s: a user the sandbox is shared with cannot "
                    "move its owner's names (take another name)",
                    name);
}

/* The image of the parent plus the new layer (res), committed under the refs. */
static int commit(struct snapshot_job *j, const struct layerwrite_result *res,
                  int (*stop)(void *), void *ud) {
        struct imagestore_image img;
        struct imagestore_layer_ref *refs = NULL;
        char *config = NULL, *manifest = NULL, cdigest[DIGEST_STR_BYTES] = "";
        size_t pinned = 0, i;
        int r = imagestore_find(j->store, j->parent, &img);

        if (r < 0)
                return fail(j, r, "its image %s is gone from the store", j->parent);
        refs = calloc(img.nlayers + 1, sizeof(*refs));
        r = refs ? new_config(j, res, &config) : -ENOMEM;
        if (r == 0)
                r = new_manifest(j, config, strlen(config), res->digest, res->size, &manifest);
        if (r == 0)
                r = get_layers(j, &img, res, refs, &pinned);
        if (r == 0 && stop(ud))
                r = fail(j, -ECANCELED, "cancelled");
        if (r == 0)
                r = check_owner_name(j);
        if (r == 0 && (r = put(j, config, cdigest)) == 0) {
                r = put(j, manifest, j->manifest);
                for (i = 0; r == 0 && i < j->n_refs; i++)
                        r = imagestore_commit(j->store, j->manifest, cdigest, refs,
                                              img.nlayers + 1, strlen(config) + strlen(manifest),
                                              j->refs[i], j->err, sizeof(j->err));
                if (j->manifest[0])
                        imagestore_unpin(j->store, j->manifest);
                imagestore_unpin(j->store, cdigest);
        }
        for (i = 0; i < pinned; i++)
                imagestore_unpin(j->store, refs[i].diff_id);
        if (r == -ENOMEM && !j->err[0])
                fail(j, r, "daemon out of memory");
        free(config);
        free(manifest);
        free(refs);
        imagestore_image_free(&img);
        return r;
}

void snapshot_run(struct snapshot_job *j, int (*stop)(void *ud), void *ud) {
        const struct imagestore_opts *so = imagestore_opts(j->store);
        struct imagestore_image parent;
        struct imagestore_layer_ref layer;
        struct layerwrite_result res;
        uint64_t budget = 0, used = owner_usage(j);
        int r;

        j->err[0] = '\0';
        j->manifest[0] = '\0';
        memset(&layer, 0, sizeof(layer));
        r = imagestore_find(j->store, j->parent, &parent);
        if (r < 0) {
                j->r = fail(j, r, "its image %s is gone from the store", j->parent);
                return;
        }
        if (parent.data_bytes < j->max_image_bytes)
                budget = j->max_image_bytes - parent.data_bytes;
        imagestore_image_free(&parent);
        r = check_owner(j, used, 0);
        /* No layer past what the owner has left. */
        if (r == 0 && j->max_snapshot_bytes - used < budget)
                budget = j->max_snapshot_bytes - used;
        if (r == 0 && stop(ud))
                r = fail(j, -ECANCELED, "cancelled");
        if (r == 0)
                r = capture(j, budget, so->max_layer_entries, &res, &layer);
        if (r == -EFBIG && budget == j->max_snapshot_bytes - used)
                r = check_owner(j, used, budget + 1);
        if (r == 0 && stop(ud))
                r = fail(j, -ECANCELED, "cancelled");
        if (r == 0)
                r = commit(j, &res, stop, ud);
        if (layer.diff_id[0])
                imagestore_unpin(j->store, layer.diff_id);
        j->r = r;
}
