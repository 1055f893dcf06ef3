/* layerns.c: layers unpacked and deleted in a user namespace of the daemon's user's
 * subordinate ids; see layerns.h.
 *
 * The daemon's side (layerns_unpack, _empty_dir, _remove_tree) starts the helper with
 * posix_spawn (a vfork and an execve at once: nothing of the threaded daemon runs in
 * the child) and waits for its one reply on a pipe; the helper's side
 * (layerns_helper_main) does the layer.h call and writes the reply. The reply is read
 * as what it is, a message from another process: its size and its strings are checked
 * before use. */
#include "layerns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The helper's answer. */
struct reply {
        uint32_t magic;
        int32_t r; /* 0 or -errno */
        struct layer_result res;      /* unpack */
        uint64_t disk;
        struct layerwrite_result wres; /* capture */
        char err[1024];
};

#define REPLY_MAGIC 0x6c6e7331u /* "lns1" */
/* The helper's fds: what it reads (a capture: the file it writes), its reply, the
 * directory, the daemon's binary, a second directory (a capture's workspace). */
#define FD_IN    0
#define FD_OUT   1
#define FD_DIR   3
#define FD_EXE   4
#define FD_DIR2  5
#define MAX_ARGS 12

static int in_ns(const struct layerns *ns) {
        return ns && ns->n_ids && ns->init_path;
}

/* A copy of fd at 10 or above, close-on-exec, so that the spawn's dup2s into 0 .. 4
 * never overwrite a source still to be copied. */
static int high(int fd) {
        return fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

/* The helper's command line into argv (MAX_ARGS + 8 entries): sbx-init entering the
 * namespace of ns (its ids as text in ids), then the daemon's binary at FD_EXE with
 * args (NULL-terminated). */
static void helper_argv(const struct layerns *ns, char **args, char ids[3][16], char **argv) {
        size_t k = 0, i;

        snprintf(ids[0], 16, "%" PRIu32, ns->subuid);
        snprintf(ids[1], 16, "%" PRIu32, ns->subgid);
        snprintf(ids[2], 16, "%" PRIu32, ns->n_ids);
        argv[k++] = (char *)"sbx-init";
        argv[k++] = (char *)"--subids-exec";
        for (i = 0; i < 3; i++)
                argv[k++] = ids[i];
        argv[k++] = (char *)"/proc/self/fd/4"; /* FD_EXE */
        argv[k++] = (char *)"--layer-helper";
        for (i = 0; args[i] && i < MAX_ARGS; i++)
                argv[k++] = args[i];
        argv[k] = NULL;
}

/* posix_spawn of the helper with src[] (fds, see FD_*) at FD_IN, FD_OUT, FD_DIR, FD_EXE
 * and FD_DIR2 (src[4] -1: none), default signal dispositions and an empty mask. 0 or
 * -errno. */
static int spawn_with(const char *path, const int src[5], char **argv, pid_t *ret_pid) {
        static const int at[5] = {FD_IN, FD_OUT, FD_DIR, FD_EXE, FD_DIR2};
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        int r, i;

        sigemptyset(&none);
        sigfillset(&all);
        posix_spawn_file_actions_init(&fa);
        for (i = 0; i < 5; i++)
                if (src[i] >= 0)
                        posix_spawn_file_actions_adddup2(&fa, src[i], at[i]);
        posix_spawnattr_init(&attr);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        r = -posix_spawn(ret_pid, path, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return r;
}

/* Reads the one reply from fd into *rep: the bytes read. */
static size_t read_reply(int fd, struct reply *rep) {
        size_t got = 0;

        while (got < sizeof(*rep)) {
                ssize_t n = read(fd, (char *)rep + got, sizeof(*rep) - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        return got;
}

/* Starts the helper with args (NULL-terminated) on in_fd (-1: /dev/null), dir_fd and
 * dir2_fd (-1: none), and reads its reply into *rep. 0, or -errno when it could not run
 * or said nothing (status: its wait status, -1 when it did not start). */
static int spawn_helper(const struct layerns *ns, int in_fd, int dir_fd, int dir2_fd,
                        char **args, struct reply *rep, int *status) {
        char ids[3][16], *argv[MAX_ARGS + 8];
        int src[5] = {-1, -1, -1, -1, -1}, p[2] = {-1, -1}, null = -1, r = 0, i;
        size_t got = 0;
        pid_t pid;

        *status = -1;
        helper_argv(ns, args, ids, argv);
        if (in_fd < 0)
                in_fd = null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (pipe2(p, O_CLOEXEC) < 0)
                r = -errno;
        src[0] = r == 0 && in_fd >= 0 ? high(in_fd) : -1;
        src[1] = r == 0 ? high(p[1]) : -1;
        src[2] = r == 0 ? high(dir_fd) : -1;
        /* The running binary, whatever has replaced it on disk since. */
        src[3] = r == 0 ? open("/proc/self/exe", O_PATH | O_CLOEXEC) : -1;
        for (i = 0; i < 4 && r == 0; i++)
                if (src[i] < 0)
                        r = -EBADF;
        if (r == 0 && dir2_fd >= 0 && (src[4] = high(dir2_fd)) < 0)
                r = -EBADF;
        if (r == 0)
                r = spawn_with(ns->init_path, src, argv, &pid);
        for (i = 0; i < 5; i++)
                if (src[i] >= 0)
                        close(src[i]);
        if (null >= 0)
                close(null);
        if (p[1] >= 0)
                close(p[1]); /* the helper's alone: its end is our EOF */
        if (r == 0)
                got = read_reply(p[0], rep);
        if (p[0] >= 0)
                close(p[0]);
        if (r < 0)
                return r;
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                ;
        if (got != sizeof(*rep) || rep->magic != REPLY_MAGIC || rep->r > 0 || rep->r < -4095)
                return -EIO;
        rep->err[sizeof(rep->err) - 1] = '\0';
        return 0;
}

/* Says in err why the helper gave no answer; returns -EIO. */
static int helper_failed(const struct layerns *ns, int r, int status, char *err, size_t errlen) {
        if (status == -1)
                snprintf(err, errlen, "cannot start %s --subids-exec: %s", ns->init_path,
                         strerror(-r));
        else
                snprintf(err, errlen,
                         "the layer helper in the namespace of the subordinate ids (%" PRIu32
                         " and %" PRIu32 ", %" PRIu32 " of them) failed (%s %d): see the "
                         "daemon's log",
                         ns->subuid, ns->subgid, ns->n_ids,
                         WIFSIGNALED(status) ? "signal" : "status",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return -EIO;
}

int layerns_unpack(const struct layerns *ns, int fd, int dir_fd, const struct layer_opts *o,
                   struct layer_result *ret, uint64_t *ret_disk, char *err, size_t errlen) {
        char b[24], e[24], m[24];
        char *args[] = {(char *)"unpack", b, e, m, NULL};
        struct reply rep;
        int r, status;

        if (!in_ns(ns)) {
                r = layer_unpack(fd, dir_fd, o, ret, err, errlen);
                if (r == 0)
                        *ret_disk = layer_disk_usage(dir_fd);
                return r;
        }
        snprintf(b, sizeof(b), "%" PRIu64, o->max_bytes);
        snprintf(e, sizeof(e), "%" PRIu64, o->max_entries);
        snprintf(m, sizeof(m), "%" PRIu32, ns->n_ids);
        memset(&rep, 0, sizeof(rep));
        r = spawn_helper(ns, fd, dir_fd, -1, args, &rep, &status);
        if (r < 0) {
                layerns_empty_dir(ns, dir_fd); /* what a killed helper left */
                return helper_failed(ns, r, status, err, errlen);
        }
        if (rep.r < 0) {
                snprintf(err, errlen, "%s", rep.err);
                return rep.r;
        }
        rep.res.first_skipped[sizeof(rep.res.first_skipped) - 1] = '\0';
        rep.res.blob_digest[sizeof(rep.res.blob_digest) - 1] = '\0';
        rep.res.diff_id[sizeof(rep.res.diff_id) - 1] = '\0';
        *ret = rep.res;
        *ret_disk = rep.disk;
        return 0;
}

/* A capture in this process. */
static int capture_here(int upper_fd, int ws_fd, enum layerwrite_kind kind, int out_fd,
                        const struct layerwrite_opts *o, struct layerwrite_result *res, char *err,
                        size_t errlen) {
        struct layerwrite *w = NULL;
        int r = layerwrite_open(out_fd, o, err, errlen, &w);

        if (r == 0)
                r = layerwrite_tree(w, upper_fd, "", kind);
        if (r == 0 && ws_fd >= 0)
                r = layerwrite_tree(w, ws_fd, "workspace", LAYERWRITE_PLAIN);
        if (r == 0)
                r = layerwrite_finish(w, res);
        layerwrite_free(w);
        return r;
}

int layerns_capture(const struct layerns *ns, int upper_fd, int ws_fd, enum layerwrite_kind kind,
                    int out_fd, const struct layerwrite_opts *o, struct layerwrite_result *res,
                    char *err, size_t errlen) {
        char b[24], e[24], k[8], m[24];
        char *args[] = {(char *)"capture", b, e, k, m, o->no_digest ? (char *)"0" : (char *)"1",
                        ws_fd >= 0 ? (char *)"1" : (char *)"0", NULL};
        struct reply rep;
        int r, status;

        if (!in_ns(ns))
                return capture_here(upper_fd, ws_fd, kind, out_fd, o, res, err, errlen);
        snprintf(b, sizeof(b), "%" PRIu64, o->max_bytes);
        snprintf(e, sizeof(e), "%" PRIu64, o->max_entries);
        snprintf(k, sizeof(k), "%d", (int)kind);
        snprintf(m, sizeof(m), "%" PRIu32, ns->n_ids);
        memset(&rep, 0, sizeof(rep));
        r = spawn_helper(ns, out_fd, upper_fd, ws_fd, args, &rep, &status);
        if (r < 0)
                return helper_failed(ns, r, status, err, errlen);
        if (rep.r < 0) {
                snprintf(err, errlen, "%s", rep.err);
                return rep.r;
        }
        rep.wres.first_skipped[sizeof(rep.wres.first_skipped) - 1] = '\0';
        rep.wres.digest[sizeof(rep.wres.digest) - 1] = '\0';
        *res = rep.wres;
        if (o->written && o->written(o->written_ud, res->size) != 0)
                return -EPIPE;
        return 0;
}

/* An empty or remove in the namespace (name NULL: empty). */
static int ns_removal(const struct layerns *ns, int dir_fd, const char *name) {
        char copy[NAME_MAX + 1];
        char *args[] = {name ? (char *)"remove" : (char *)"empty", name ? copy : NULL, NULL};
        struct reply rep;
        int r, status;

        if (name && (size_t)snprintf(copy, sizeof(copy), "%s", name) >= sizeof(copy))
                return -ENAMETOOLONG;

        memset(&rep, 0, sizeof(rep));
        r = spawn_helper(ns, -1, dir_fd, -1, args, &rep, &status);
        return r < 0 ? r : rep.r;
}

int layerns_empty_dir(const struct layerns *ns, int dir_fd) {
        return in_ns(ns) ? ns_removal(ns, dir_fd, NULL) : layer_empty_dir(dir_fd);
}

int layerns_remove_tree(const struct layerns *ns, int parent_fd, const char *name) {
        return in_ns(ns) ? ns_removal(ns, parent_fd, name) : layer_remove_tree(parent_fd, name);
}

/* ---- the store's record ---------------------------------------------------------------- */

#define OWNERS_FILE "owners"

static void describe(const struct layerns *ns, int keep_owners, char *buf, size_t len) {
        if (keep_owners)
                snprintf(buf, len, "tar\n");
        else if (in_ns(ns))
                snprintf(buf, len, "subids %" PRIu32 " %" PRIu32 " %" PRIu32 "\n", ns->subuid,
                         ns->subgid, ns->n_ids);
        else
                snprintf(buf, len, "own\n");
}

/* In words, for the message: how a store of kind text was unpacked. */
static void in_words(const char *text, char *buf, size_t len) {
        unsigned long u, g, n;

        if (strcmp(text, "tar\n") == 0)
                snprintf(buf, len, "with the tar's owners (a root sbxd's)");
        else if (strcmp(text, "own\n") == 0)
                snprintf(buf, len, "as the daemon's user's files (no subordinate ids)");
        else if (sscanf(text, "subids %lu %lu %lu", &u, &g, &n) == 3)
                snprintf(buf, len,
                         "with ids 1-%lu as the subordinate uids from %lu and gids from %lu", n, u,
                         g);
        else
                snprintf(buf, len, "in an unknown way (\"%.40s\")", text);
}

/* 1 when the store has a layer (an entry of ROOT/layers). */
static int has_layers(int root_fd) {
        int fd = openat(root_fd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int n = 0;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        while (!n && (de = readdir(d)))
                n = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(d);
        return n;
}

/* Writes text as ROOT/owners, durably. */
static int write_owners(int root_fd, const char *text) {
        int fd = openat(root_fd, OWNERS_FILE ".new",
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t n = strlen(text);
        int r = 0;

        if (fd < 0)
                return -errno;
        if (write(fd, text, n) != (ssize_t)n || fsync(fd) < 0)
                r = -EIO;
        close(fd);
        if (r == 0 && renameat(root_fd, OWNERS_FILE ".new", root_fd, OWNERS_FILE) < 0)
                r = -errno;
        if (r == 0)
                fsync(root_fd);
        return r;
}

int layerns_check_store(int root_fd, const char *root, const struct layerns *ns, int keep_owners,
                        char *err, size_t errlen) {
        char want[80], had[80] = "", w1[160], w2[160], how[2 * 4096 + 256];
        int fd = openat(root_fd, OWNERS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n = 0;

        describe(ns, keep_owners, want, sizeof(want));
        if (fd >= 0) {
                n = read(fd, had, sizeof(had) - 1);
                close(fd);
                had[n > 0 ? n : 0] = '\0';
        } else if (errno != ENOENT) {
                snprintf(err, errlen, "image store %s: %s: %s", root, OWNERS_FILE, strerror(errno));
                return -errno;
        } else {
                /* A store of an sbxd before the file: its layers are as it made them. */
                snprintf(had, sizeof(had), "%s", keep_owners ? "tar\n" : "own\n");
        }
        if (strcmp(had, want) == 0)
                return fd >= 0 ? 0 : write_owners(root_fd, want);
        /* No layer (a new store, or all removed): nothing can be wrong. */
        if (!has_layers(root_fd))
                return write_owners(root_fd, want);
        in_words(had, w1, sizeof(w1));
        in_words(want, w2, sizeof(w2));
        if (strcmp(had, "own\n") == 0)
                snprintf(how, sizeof(how),
                         "Remove the directory (rm -rf %s: its files are the daemon's user's) and "
                         "pull again, or take the user's ranges out again",
                         root);
        else
                snprintf(how, sizeof(how),
                         "Restore the earlier ranges, or remove the directory %s as root, or with "
                         "`sbx-init --remove %s SUBUID SUBGID N` while the user still has the "
                         "earlier ranges",
                         root, root);
        snprintf(err, errlen,
                 "image store %s: its layers were unpacked %s, and this sbxd unpacks them %s "
                 "(the user's ranges in /etc/subuid and /etc/subgid, or uidmap, changed since): "
                 "its sandboxes would see owners of both. %s",
                 root, w1, w2, how);
        return -ESTALE;
}

/* ---- the helper ------------------------------------------------------------------------ */

static int number(const char *s, uint64_t *ret) {
        char *end;

        errno = 0;
        *ret = strtoull(s, &end, 10);
        return errno || !*s || *end || s[0] == '-' ? -EINVAL : 0;
}

/* A capture's arguments (MAX_BYTES MAX_ENTRIES KIND MAX_ID DIGEST WORKSPACE): its
 * options into *w, the upper directory's kind into *kind, whether FD_DIR2 is a
 * workspace into *ws. 2, or -EINVAL. Inside, the files have the image's ids: the map is
 * the identity up to MAX_ID. */
static int capture_args(char **argv, struct layerwrite_opts *w, enum layerwrite_kind *kind,
                        int *ws) {
        uint64_t k, max_id, digest, with_ws;

        if (number(argv[3], &w->max_bytes) < 0 || number(argv[4], &w->max_entries) < 0 ||
            number(argv[5], &k) < 0 || k > LAYERWRITE_UPPER_USERXATTR ||
            number(argv[6], &max_id) < 0 || max_id == 0 || max_id >= UINT32_MAX ||
            number(argv[7], &digest) < 0 || digest > 1 || number(argv[8], &with_ws) < 0 ||
            with_ws > 1)
                return -EINVAL;
        w->no_digest = !digest;
        *ws = (int)with_ws;
        *kind = (enum layerwrite_kind)k;
        w->uids.r[0] = (struct layerwrite_range){0, 0, (uint32_t)max_id + 1};
        w->uids.n = 1;
        w->gids = w->uids;
        return 2;
}

/* The helper's arguments: its mode's options into *o (a capture's into *w, *kind, *ws),
 * and 2 for capture, 1 for unpack, 0 for empty or remove; -EINVAL when they are none of
 * the four. */
static int helper_args(int argc, char **argv, struct layer_opts *o, struct layerwrite_opts *w,
                       enum layerwrite_kind *kind, int *ws) {
        uint64_t max_id;

        if (argc == 9 && strcmp(argv[2], "capture") == 0)
                return capture_args(argv, w, kind, ws);
        if (argc == 3 && strcmp(argv[2], "empty") == 0)
                return 0;
        if (argc == 4 && strcmp(argv[2], "remove") == 0)
                return !argv[3][0] || strchr(argv[3], '/') || !strcmp(argv[3], ".") ||
                                       !strcmp(argv[3], "..")
                               ? -EINVAL
                               : 0;
        if (argc != 6 || strcmp(argv[2], "unpack") != 0 || number(argv[3], &o->max_bytes) < 0 ||
            number(argv[4], &o->max_entries) < 0 || number(argv[5], &max_id) < 0 || max_id == 0 ||
            max_id > UINT32_MAX)
                return -EINVAL;
        o->max_id = (uint32_t)max_id;
        return 1;
}

/* What the helper was asked (helper_args said which: mode): its reply in *rep. */
static void helper_run(int argc, char **argv, const struct layer_opts *o,
                       const struct layerwrite_opts *w, enum layerwrite_kind kind, int ws,
                       int mode, struct reply *rep) {
        if (mode == 2) {
                rep->r = capture_here(FD_DIR, ws ? FD_DIR2 : -1, kind, FD_IN, w, &rep->wres,
                                      rep->err, sizeof(rep->err));
        } else if (mode == 1) {
                rep->r = layer_unpack(FD_IN, FD_DIR, o, &rep->res, rep->err, sizeof(rep->err));
                if (rep->r == 0)
                        rep->disk = layer_disk_usage(FD_DIR);
        } else if (argc == 3) {
                rep->r = layer_empty_dir(FD_DIR);
        } else {
                rep->r = layer_remove_tree(FD_DIR, argv[3]);
        }
}

int layerns_helper_main(int argc, char **argv) {
        struct layer_opts o = {.whiteouts = LAYER_WHITEOUT_USERXATTR, .keep_owners = 1};
        struct layerwrite_opts w = {.no_digest = 1};
        enum layerwrite_kind kind = LAYERWRITE_PLAIN;
        struct reply *rep = calloc(1, sizeof(*rep));
        int ws = 0;
        struct stat out, dir;
        size_t off = 0;
        int r;

        /* Gone with the thread that started it (the daemon's end). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(FD_EXE);
        if (!rep || fstat(FD_OUT, &out) < 0 || !S_ISFIFO(out.st_mode) || fstat(FD_DIR, &dir) < 0 ||
            !S_ISDIR(dir.st_mode)) {
                fprintf(stderr, "<3>sbxd --layer-helper: not started by sbxd (fds 1 and 3)\n");
                free(rep);
                return 2;
        }
        r = helper_args(argc, argv, &o, &w, &kind, &ws);
        if (r == 2 && ws && (fstat(FD_DIR2, &dir) < 0 || !S_ISDIR(dir.st_mode)))
                r = -EINVAL;
        if (r < 0) {
                fprintf(stderr, "<3>sbxd --layer-helper: bad arguments\n");
                free(rep);
                return 2;
        }
        helper_run(argc, argv, &o, &w, kind, ws, r, rep);
        rep->magic = REPLY_MAGIC;
        while (off < sizeof(*rep)) {
                ssize_t n = write(FD_OUT, (char *)rep + off, sizeof(*rep) - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        free(rep);
        return off == sizeof(*rep) ? 0 : 1;
}
