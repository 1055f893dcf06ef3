/* imagestore.c: the image store's directory, its records (one JSON file per image, kept
 * in memory too), holds, pins, removal, pruning, the cache bound and the repairs made at
 * open; see imagestore.h for the layout and its guarantees. imageimport.c brings images
 * in through the step functions at the end of this file. */
#include "imagestore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/fs.h>

#define DS DIGEST_STR_BYTES

struct rec {
        char manifest[DS], config[DS];
        char **refs;
        size_t nrefs;
        struct imagestore_layer_ref *layers;
        size_t nlayers;
        uint64_t blob_bytes;
        int64_t created_ms, last_used_ms;
        unsigned holds;
};

struct pin {
        char digest[DS];
        unsigned n;
};

struct imagestore {
        pthread_mutex_t mu;
        struct imagestore_opts o;
        char arch[32], variant[16];
        char *root;
        int root_fd, blobs_fd, layers_fd, images_fd, locks_fd, tmp_fd, trash_fd;
        struct rec *recs; /* import order */
        size_t nrecs;
        struct pin *pins;
        size_t npins;
        unsigned repaired;
        unsigned long serial; /* names in tmp/ and trash/ */
        int shares_blocks;    /* its filesystem clones files (imagestore_shares_blocks) */
};

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The hex digits of a digest digest_parse accepts, or NULL. */
static const char *hex_of(const char *digest) {
        const char *hex = NULL;
        return digest_parse(digest, &hex) ? hex : NULL;
}

static void rec_clear(struct rec *r) {
        size_t i;
        for (i = 0; i < r->nrefs; i++)
                free(r->refs[i]);
        free(r->refs);
        free(r->layers);
        memset(r, 0, sizeof(*r));
}

/* ---- records on disk --------------------------------------------------------------- */

static json_t *rec_to_json(const struct rec *r) {
        json_t *o = json_object(), *refs = json_array(), *layers = json_array();
        size_t i;

        for (i = 0; i < r->nrefs; i++)
                json_array_append_new(refs, json_string(r->refs[i]));
        for (i = 0; i < r->nlayers; i++) {
                const struct imagestore_layer_ref *l = &r->layers[i];
                json_t *lj = json_pack("{s:s,s:I,s:I,s:I}", "diff_id", l->diff_id, "data",
                                       (json_int_t)l->data_bytes, "disk", (json_int_t)l->disk_bytes,
                                       "entries", (json_int_t)l->entries);
                if (lj && l->blob[0])
                        json_object_set_new(lj, "blob", json_string(l->blob));
                json_array_append_new(layers, lj);
        }
        json_object_set_new(o, "manifest", json_string(r->manifest));
        json_object_set_new(o, "config", json_string(r->config));
        json_object_set_new(o, "refs", refs);
        json_object_set_new(o, "layers", layers);
        json_object_set_new(o, "blob_bytes", json_integer((json_int_t)r->blob_bytes));
        json_object_set_new(o, "created_ms", json_integer(r->created_ms));
        json_object_set_new(o, "last_used_ms", json_integer(r->last_used_ms));
        return o;
}

/* Copies the digest string j into out when it is one. */
static int get_digest(json_t *j, char out[DS]) {
        const char *v = json_string_value(j);
        if (!v || !digest_parse(v, NULL))
                return -EINVAL;
        memcpy(out, v, DS);
        return 0;
}

static int rec_from_json(json_t *o, struct rec *r) {
        json_t *refs = json_object_get(o, "refs"), *layers = json_object_get(o, "layers"), *v;
        size_t i;

        memset(r, 0, sizeof(*r));
        if (get_digest(json_object_get(o, "manifest"), r->manifest) < 0 ||
            get_digest(json_object_get(o, "config"), r->config) < 0 || !json_is_array(refs) ||
            !json_is_array(layers) || json_array_size(layers) > IMAGESTORE_MAX_LAYERS)
                return -EINVAL;
        r->refs = calloc(json_array_size(refs) + 1, sizeof(char *));
        r->layers = calloc(json_array_size(layers) + 1, sizeof(*r->layers));
        if (!r->refs || !r->layers)
                return -ENOMEM;
        json_array_foreach(refs, i, v) {
                if (!json_is_string(v) || !(r->refs[r->nrefs] = strdup(json_string_value(v))))
                        return -EINVAL;
                r->nrefs++;
        }
        json_array_foreach(layers, i, v) {
                struct imagestore_layer_ref *l = &r->layers[r->nlayers++];
                if (get_digest(json_object_get(v, "diff_id"), l->diff_id) < 0)
                        return -EINVAL;
                /* Optional (records of older stores have neither): no blob known, and
                 * entries not counted. */
                if (json_object_get(v, "blob") &&
                    get_digest(json_object_get(v, "blob"), l->blob) < 0)
                        return -EINVAL;
                l->data_bytes = (uint64_t)json_integer_value(json_object_get(v, "data"));
                l->disk_bytes = (uint64_t)json_integer_value(json_object_get(v, "disk"));
                l->entries = (uint64_t)json_integer_value(json_object_get(v, "entries"));
        }
        r->blob_bytes = (uint64_t)json_integer_value(json_object_get(o, "blob_bytes"));
        r->created_ms = json_integer_value(json_object_get(o, "created_ms"));
        r->last_used_ms = json_integer_value(json_object_get(o, "last_used_ms"));
        return 0;
}

/* Writes buf as name in dir_fd: a file in tmp/ first, then renamed; durable: fsynced
 * before the rename and the directory after it (without: a crash may keep the old
 * file, never a part of either). */
static int write_atomic(struct imagestore *s, int dir_fd, const char *name, const void *buf,
                        size_t len, int durable) {
        char tmp[64];
        const char *p = buf;
        int fd, r = 0;

        snprintf(tmp, sizeof(tmp), "w-%ld-%lu", (long)getpid(),
                 __atomic_add_fetch(&s->serial, 1, __ATOMIC_RELAXED));
        fd = openat(s->tmp_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        while (r == 0 && len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno != EINTR)
                        r = -errno;
                else if (n > 0)
                        p += n, len -= (size_t)n;
        }
        if (r == 0 && durable && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && renameat(s->tmp_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0)
                unlinkat(s->tmp_fd, tmp, 0);
        else if (durable)
                fsync(dir_fd);
        return r;
}

/* Writes r's record file (durable: see write_atomic). Called with mu held. */
static int rec_save(struct imagestore *s, const struct rec *r, int durable) {
        char name[DIGEST_HEX_LEN + 8];
        json_t *j = rec_to_json(r);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        int ret;

        json_decref(j);
        if (!text)
                return -ENOMEM;
        snprintf(name, sizeof(name), "%s.json", hex_of(r->manifest));
        ret = write_atomic(s, s->images_fd, name, text, strlen(text), durable);
        free(text);
        return ret;
}

/* ---- lookups (mu held) ------------------------------------------------------------- */

static struct rec *find_rec(struct imagestore *s, const char *name) {
        size_t i, k;

        for (i = 0; i < s->nrecs; i++) {
                if (strcmp(s->recs[i].manifest, name) == 0)
                        return &s->recs[i];
                for (k = 0; k < s->recs[i].nrefs; k++)
                        if (strcmp(s->recs[i].refs[k], name) == 0)
                                return &s->recs[i];
        }
        return NULL;
}

static struct pin *find_pin(struct imagestore *s, const char *digest) {
        size_t i;
        for (i = 0; i < s->npins; i++)
                if (strcmp(s->pins[i].digest, digest) == 0)
                        return &s->pins[i];
        return NULL;
}

/* 1 when a record names digest (a layer's diff_id, a manifest or a config), or a pin. */
static int in_use(struct imagestore *s, const char *digest) {
        size_t i, k;

        if (find_pin(s, digest))
                return 1;
        for (i = 0; i < s->nrecs; i++) {
                const struct rec *r = &s->recs[i];
                if (!strcmp(r->manifest, digest) || !strcmp(r->config, digest))
                        return 1;
                for (k = 0; k < r->nlayers; k++)
                        if (!strcmp(r->layers[k].diff_id, digest))
                                return 1;
        }
        return 0;
}

static int copy_image(const struct rec *r, struct imagestore_image *out) {
        size_t i;

        memset(out, 0, sizeof(*out));
        memcpy(out->manifest, r->manifest, DS);
        memcpy(out->config, r->config, DS);
        out->refs = calloc(r->nrefs + 1, sizeof(char *));
        out->layers = calloc(r->nlayers + 1, DS);
        if (!out->refs || !out->layers) {
                imagestore_image_free(out);
                return -ENOMEM;
        }
        for (i = 0; i < r->nrefs; i++) {
                out->refs[i] = strdup(r->refs[i]);
                if (!out->refs[i]) {
                        imagestore_image_free(out);
                        return -ENOMEM;
                }
                out->nrefs++;
        }
        out->size_bytes = r->blob_bytes;
        for (i = 0; i < r->nlayers; i++) {
                memcpy(out->layers[i], r->layers[i].diff_id, DS);
                out->size_bytes += r->layers[i].disk_bytes;
                out->data_bytes += r->layers[i].data_bytes;
                out->entries += r->layers[i].entries;
        }
        out->nlayers = r->nlayers;
        out->created_ms = r->created_ms;
        out->last_used_ms = r->last_used_ms;
        out->holds = r->holds;
        return 0;
}

/* A directory stream of dir_fd (a dup of it, read from its start), or NULL. */
static DIR *dir_stream(int dir_fd) {
        int fd = dup(dir_fd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (!d && fd >= 0)
                close(fd);
        if (d)
                rewinddir(d); /* the dup shares dir_fd's offset */
        return d;
}

/* ---- garbage (mu held) --------------------------------------------------------------- */

/* Moves name of dir_fd into trash/ (fast: the tree is deleted by imagestore_collect). */
static int to_trash(struct imagestore *s, int dir_fd, const char *name) {
        char t[64];

        snprintf(t, sizeof(t), "t-%ld-%lu", (long)getpid(),
                 __atomic_add_fetch(&s->serial, 1, __ATOMIC_RELAXED));
        return renameat(dir_fd, name, s->trash_fd, t) < 0 ? -errno : 0;
}

/* Moves to trash/ every layer and blob of the directory dir_fd that no record names and
 * no pin holds (names that are no digest's hex digits too). Returns how many. */
static unsigned sweep(struct imagestore *s, int dir_fd) {
        DIR *d = dir_stream(dir_fd);
        struct dirent *de;
        unsigned n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                char digest[DS];
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
                if (strlen(de->d_name) == DIGEST_HEX_LEN && digest_parse(digest, NULL) &&
                    in_use(s, digest))
                        continue;
                if (to_trash(s, dir_fd, de->d_name) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

static unsigned sweep_all(struct imagestore *s) {
        return sweep(s, s->layers_fd) + sweep(s, s->blobs_fd);
}

/* Removes record r (its file, then from memory). */
static int drop_rec(struct imagestore *s, struct rec *r) {
        char name[DIGEST_HEX_LEN + 8];
        size_t i = (size_t)(r - s->recs);

        snprintf(name, sizeof(name), "%s.json", hex_of(r->manifest));
        if (unlinkat(s->images_fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        rec_clear(r);
        memmove(&s->recs[i], &s->recs[i + 1], (s->nrecs - i - 1) * sizeof(*r));
        s->nrecs--;
        return 0;
}

/* ---- open, close ------------------------------------------------------------------- */

/* This machine's platform in OCI's words. */
static void machine_platform(char *arch, size_t alen, char *variant, size_t vlen) {
        static const struct {
                const char *uname, *arch, *variant;
        } map[] = {{"x86_64", "amd64", ""}, {"aarch64", "arm64", "v8"}, {"armv7l", "arm", "v7"},
                   {"armv6l", "arm", "v6"}, {"i686", "386", ""},        {"ppc64le", "ppc64le", ""},
                   {"s390x", "s390x", ""},  {"riscv64", "riscv64", ""}};
        struct utsname u;
        size_t i;

        snprintf(arch, alen, "unknown");
        snprintf(variant, vlen, "%s", "");
        if (uname(&u) < 0)
                return;
        for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (strcmp(u.machine, map[i].uname) == 0) {
                        snprintf(arch, alen, "%s", map[i].arch);
                        snprintf(variant, vlen, "%s", map[i].variant);
                        return;
                }
        snprintf(arch, alen, "%.31s", u.machine);
}

/* mkdir (0700) and open name beneath parent (never a symlink). */
static int open_sub(int parent, const char *name, int empty) {
        int fd;

        if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (empty)
                layer_empty_dir(fd);
        return fd;
}

/* Opens root (creating it) and checks that it is this user's alone. */
static int open_root(const char *root, char *err, size_t errlen) {
        struct stat st;
        int fd;

        if (mkdir(root, 0700) < 0 && errno != EEXIST) {
                snprintf(err, errlen, "image store %s: mkdir: %s", root, strerror(errno));
                return -errno;
        }
        fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                snprintf(err, errlen, "image store %s: %s", root, strerror(errno));
                return -errno;
        }
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
                snprintf(err, errlen,
                         "image store %s must be owned by uid %u and reachable by no one else "
                         "(mode 0700); it is uid %u, mode 0%o",
                         root, (unsigned)geteuid(), (unsigned)st.st_uid,
                         (unsigned)(st.st_mode & 07777));
                close(fd);
                return -EPERM;
        }
        return fd;
}

/* Reads every record of images/; drops those that are malformed or name a missing
 * layer or blob. */
static int load_records(struct imagestore *s) {
        DIR *d = dir_stream(s->images_fd);
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                json_t *j;
                struct rec r = {0};
                int ok, jfd;
                size_t i;

                if (de->d_name[0] == '.')
                        continue;
                jfd = openat(s->images_fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                j = jfd >= 0 ? json_loadfd(jfd, JSON_REJECT_DUPLICATES, NULL) : NULL;
                if (jfd >= 0)
                        close(jfd);
                ok = j && rec_from_json(j, &r) == 0;
                json_decref(j);
                for (i = 0; ok && i < r.nlayers; i++)
                        ok = faccessat(s->layers_fd, hex_of(r.layers[i].diff_id), F_OK,
                                       AT_SYMLINK_NOFOLLOW) == 0;
                ok = ok &&
                     faccessat(s->blobs_fd, hex_of(r.manifest), F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
                     faccessat(s->blobs_fd, hex_of(r.config), F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
                     !find_rec(s, r.manifest);
                if (ok) {
                        struct rec *n = realloc(s->recs, (s->nrecs + 1) * sizeof(*n));
                        ok = n != NULL;
                        if (n) {
                                s->recs = n;
                                s->recs[s->nrecs++] = r;
                        }
                }
                if (!ok) {
                        rec_clear(&r);
                        unlinkat(s->images_fd, de->d_name, 0);
                        s->repaired++;
                }
        }
        closedir(d);
        return 0;
}

static int by_created(const void *a, const void *b) {
        const struct rec *x = a, *y = b;
        return x->created_ms < y->created_ms ? -1 : x->created_ms > y->created_ms;
}

/* Whether tmp/'s filesystem clones a file (FICLONE: XFS with reflink, Btrfs), tried on
 * two spools. */
static int probe_clone(struct imagestore *s) {
        int a = imagestore_spool(s), b = a >= 0 ? imagestore_spool(s) : -1, yes;
        char block[4096];

        memset(block, 'x', sizeof(block));
        yes = b >= 0 && write(a, block, sizeof(block)) == (ssize_t)sizeof(block) &&
              ioctl(b, FICLONE, a) == 0;
        if (a >= 0)
                close(a);
        if (b >= 0)
                close(b);
        return yes;
}

int imagestore_shares_blocks(const struct imagestore *s) {
        return s->shares_blocks;
}

int imagestore_open(const char *root, const struct imagestore_opts *o, struct imagestore **ret,
                    char *err, size_t errlen) {
        struct imagestore *s = calloc(1, sizeof(*s));
        int r, blobs;

        if (!s || !(s->root = strdup(root))) {
                free(s);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        pthread_mutex_init(&s->mu, NULL);
        s->o = *o;
        machine_platform(s->arch, sizeof(s->arch), s->variant, sizeof(s->variant));
        if (o->arch) {
                snprintf(s->arch, sizeof(s->arch), "%s", o->arch);
                snprintf(s->variant, sizeof(s->variant), "%s", o->variant ? o->variant : "");
        }
        s->blobs_fd = s->layers_fd = s->images_fd = s->locks_fd = s->tmp_fd = s->trash_fd = -1;
        s->root_fd = open_root(root, err, errlen);
        if (s->root_fd < 0) {
                r = s->root_fd;
                imagestore_close(s);
                return r;
        }
        r = layerns_check_store(s->root_fd, root, &o->ns, o->keep_owners, err, errlen);
        if (r < 0) {
                imagestore_close(s);
                return r;
        }
        blobs = open_sub(s->root_fd, "blobs", 0);
        s->blobs_fd = blobs >= 0 ? open_sub(blobs, "sha256", 0) : blobs;
        if (blobs >= 0)
                close(blobs);
        s->layers_fd = open_sub(s->root_fd, "layers", 0);
        s->images_fd = open_sub(s->root_fd, "images", 0);
        s->locks_fd = open_sub(s->root_fd, "locks", 1);
        s->tmp_fd = open_sub(s->root_fd, "tmp", 0);
        s->trash_fd = open_sub(s->root_fd, "trash", 0);
        r = s->blobs_fd < 0    ? s->blobs_fd
            : s->layers_fd < 0 ? s->layers_fd
            : s->images_fd < 0 ? s->images_fd
            : s->locks_fd < 0  ? s->locks_fd
            : s->tmp_fd < 0    ? s->tmp_fd
            : s->trash_fd < 0  ? s->trash_fd
                               : load_records(s);
        if (r < 0) {
                snprintf(err, errlen, "image store %s: %s", root, strerror(-r));
                imagestore_close(s);
                return r;
        }
        if (s->nrecs > 1)
                qsort(s->recs, s->nrecs, sizeof(*s->recs), by_created);
        s->repaired += sweep_all(s);
        layerns_empty_dir(&s->o.ns, s->tmp_fd);
        imagestore_collect(s);
        s->shares_blocks = probe_clone(s);
        *ret = s;
        return 0;
}

struct imagestore *imagestore_close(struct imagestore *s) {
        size_t i;

        if (!s)
                return NULL;
        for (i = 0; i < s->nrecs; i++)
                rec_clear(&s->recs[i]);
        free(s->recs);
        free(s->pins);
        if (s->root_fd >= 0)
                close(s->root_fd);
        if (s->blobs_fd >= 0)
                close(s->blobs_fd);
        if (s->layers_fd >= 0)
                close(s->layers_fd);
        if (s->images_fd >= 0)
                close(s->images_fd);
        if (s->locks_fd >= 0)
                close(s->locks_fd);
        if (s->tmp_fd >= 0)
                close(s->tmp_fd);
        if (s->trash_fd >= 0)
                close(s->trash_fd);
        pthread_mutex_destroy(&s->mu);
        free(s->root);
        free(s);
        return NULL;
}

unsigned imagestore_repaired(const struct imagestore *s) {
        return s->repaired;
}

/* ---- queries ----------------------------------------------------------------------- */

int imagestore_find(struct imagestore *s, const char *name, struct imagestore_image *ret) {
        struct rec *r;
        int q;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        q = r ? copy_image(r, ret) : -ENOENT;
        pthread_mutex_unlock(&s->mu);
        return q;
}

int imagestore_list(struct imagestore *s, struct imagestore_image **ret) {
        struct imagestore_image *list;
        size_t i;
        int q = 0;

        pthread_mutex_lock(&s->mu);
        list = calloc(s->nrecs + 1, sizeof(*list));
        for (i = 0; list && i < s->nrecs && q == 0; i++)
                q = copy_image(&s->recs[i], &list[i]);
        if (!list || q < 0) {
                imagestore_list_free(list, list ? i : 0);
                pthread_mutex_unlock(&s->mu);
                return -ENOMEM;
        }
        q = (int)s->nrecs;
        pthread_mutex_unlock(&s->mu);
        *ret = list;
        return q;
}

void imagestore_image_free(struct imagestore_image *img) {
        size_t i;

        if (!img)
                return;
        for (i = 0; img->refs && i < img->nrefs; i++)
                free(img->refs[i]);
        free(img->refs);
        free(img->layers);
        memset(img, 0, sizeof(*img));
}

void imagestore_list_free(struct imagestore_image *list, size_t n) {
        size_t i;

        for (i = 0; list && i < n; i++)
                imagestore_image_free(&list[i]);
        free(list);
}

int imagestore_layer_path(struct imagestore *s, const char *diff_id, char *buf, size_t len) {
        const char *hex = hex_of(diff_id);

        if (!hex)
                return -EINVAL;
        if ((size_t)snprintf(buf, len, "%s/layers/%s/tree", s->root, hex) >= len)
                return -ENAMETOOLONG;
        return 0;
}

/* ---- holds, removal, the cache bound -------------------------------------------------- */

int imagestore_hold(struct imagestore *s, const char *name) {
        struct rec *r;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        if (r) {
                r->holds++;
                r->last_used_ms = now_ms();
                /* On the loop, at each sandbox's start: not fsynced, as a last-used
                 * time a crash loses costs only eviction order. */
                rec_save(s, r, 0);
        }
        pthread_mutex_unlock(&s->mu);
        return r ? 0 : -ENOENT;
}

int imagestore_release(struct imagestore *s, const char *name) {
        struct rec *r;
        int q = 0;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        if (!r)
                q = -ENOENT;
        else if (r->holds == 0)
                q = -EINVAL;
        else
                r->holds--;
        pthread_mutex_unlock(&s->mu);
        return q;
}

/* Removes a ref of r (it has another). */
static int drop_ref(struct imagestore *s, struct rec *r, const char *ref) {
        size_t k;

        for (k = 0; k < r->nrefs; k++)
                if (strcmp(r->refs[k], ref) == 0) {
                        free(r->refs[k]);
                        memmove(&r->refs[k], &r->refs[k + 1], (r->nrefs - k - 1) * sizeof(char *));
                        r->nrefs--;
                        return rec_save(s, r, 1);
                }
        return -ENOENT;
}

int imagestore_remove(struct imagestore *s, const char *name, char *err, size_t errlen) {
        struct rec *r;
        int q;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        if (!r) {
                q = -ENOENT;
                snprintf(err, errlen, "no image %.300s in the store", name);
        } else if (r->nrefs > 1 && strcmp(name, r->manifest) != 0) {
                q = drop_ref(s, r, name);
        } else if (r->holds) {
                q = -EBUSY;
                snprintf(err, errlen, "image %.300s is used by %u sandbox(es)", name, r->holds);
        } else {
                q = drop_rec(s, r);
                if (q == 0)
                        sweep_all(s);
                else
                        snprintf(err, errlen, "removing image %.300s: %s", name, strerror(-q));
        }
        pthread_mutex_unlock(&s->mu);
        return q;
}

int imagestore_prune(struct imagestore *s, int all) {
        size_t i;
        int n = 0;

        pthread_mutex_lock(&s->mu);
        for (i = s->nrecs; i-- > 0;) {
                struct rec *r = &s->recs[i];
                if (r->holds == 0 && (all || r->nrefs == 0) && drop_rec(s, r) == 0)
                        n++;
        }
        sweep_all(s);
        pthread_mutex_unlock(&s->mu);
        return n;
}

/* The store's bytes on disk (*ret_entries: its layers' entries), each layer counted
 * once. mu held. */
static uint64_t usage(struct imagestore *s, uint64_t *ret_entries) {
        uint64_t total = 0, entries = 0;
        size_t i, k, j, m;

        for (i = 0; i < s->nrecs; i++) {
                total += s->recs[i].blob_bytes;
                for (k = 0; k < s->recs[i].nlayers; k++) {
                        const char *d = s->recs[i].layers[k].diff_id;
                        int seen = 0;
                        for (j = 0; j < i && !seen; j++)
                                for (m = 0; m < s->recs[j].nlayers && !seen; m++)
                                        seen = !strcmp(s->recs[j].layers[m].diff_id, d);
                        for (m = 0; m < k && !seen; m++)
                                seen = !strcmp(s->recs[i].layers[m].diff_id, d);
                        if (!seen) {
                                total += s->recs[i].layers[k].disk_bytes;
                                entries += s->recs[i].layers[k].entries;
                        }
                }
        }
        if (ret_entries)
                *ret_entries = entries;
        return total;
}

uint64_t imagestore_usage(struct imagestore *s) {
        uint64_t u;

        pthread_mutex_lock(&s->mu);
        u = usage(s, NULL);
        pthread_mutex_unlock(&s->mu);
        return u;
}

uint64_t imagestore_entries(struct imagestore *s) {
        uint64_t e;

        pthread_mutex_lock(&s->mu);
        usage(s, &e);
        pthread_mutex_unlock(&s->mu);
        return e;
}

/* 1 when the store is past either bound. mu held. */
static int over(struct imagestore *s, uint64_t max_bytes, uint64_t max_entries) {
        uint64_t entries, bytes = usage(s, &entries);

        return bytes > max_bytes || entries > max_entries;
}

int imagestore_fit(struct imagestore *s, uint64_t max_bytes, uint64_t max_entries) {
        int n = 0;

        pthread_mutex_lock(&s->mu);
        while (over(s, max_bytes, max_entries)) {
                struct rec *lru = NULL;
                size_t i;
                for (i = 0; i < s->nrecs; i++)
                        if (!s->recs[i].holds &&
                            (!lru || s->recs[i].last_used_ms < lru->last_used_ms))
                                lru = &s->recs[i];
                if (!lru || drop_rec(s, lru) < 0)
                        break;
                n++;
        }
        sweep_all(s);
        pthread_mutex_unlock(&s->mu);
        return n;
}

unsigned imagestore_sweep(struct imagestore *s) {
        unsigned n;

        pthread_mutex_lock(&s->mu);
        n = sweep_all(s);
        pthread_mutex_unlock(&s->mu);
        return n;
}

int imagestore_collect(struct imagestore *s) {
        return layerns_empty_dir(&s->o.ns, s->trash_fd);
}

/* ---- the steps of an import ---------------------------------------------------------- */

const struct imagestore_opts *imagestore_opts(const struct imagestore *s) {
        return &s->o;
}

void imagestore_platform(const struct imagestore *s, const char **ret_arch,
                         const char **ret_variant) {
        *ret_arch = s->arch;
        *ret_variant = s->variant;
}

int imagestore_pin(struct imagestore *s, const char *digest) {
        struct pin *p;
        int q = 0;

        pthread_mutex_lock(&s->mu);
        p = find_pin(s, digest);
        if (p) {
                p->n++;
        } else if ((p = realloc(s->pins, (s->npins + 1) * sizeof(*p)))) {
                s->pins = p;
                snprintf(p[s->npins].digest, DS, "%s", digest);
                p[s->npins++].n = 1;
        } else {
                q = -ENOMEM;
        }
        pthread_mutex_unlock(&s->mu);
        return q;
}

void imagestore_unpin(struct imagestore *s, const char *digest) {
        struct pin *p;

        pthread_mutex_lock(&s->mu);
        p = find_pin(s, digest);
        if (p && --p->n == 0) {
                *p = s->pins[s->npins - 1];
                s->npins--;
        }
        pthread_mutex_unlock(&s->mu);
}

int imagestore_put_blob(struct imagestore *s, const char *digest, const void *buf, size_t len,
                        char *err, size_t errlen) {
        char got[DS];
        const char *hex = hex_of(digest);
        int q;

        if (!hex) {
                snprintf(err, errlen, "\"%.100s\" is no sha256 digest", digest);
                return -EINVAL;
        }
        q = digest_buf(buf, len, got);
        if (q == 0 && strcmp(got, digest) != 0) {
                snprintf(err, errlen, "blob %s has the digest %s", digest, got);
                return -EINVAL;
        }
        if (q == 0 && faccessat(s->blobs_fd, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return 0;
        if (q == 0)
                q = write_atomic(s, s->blobs_fd, hex, buf, len, 1);
        if (q < 0)
                snprintf(err, errlen, "storing blob %s: %s", digest, strerror(-q));
        return q;
}

int imagestore_scratch(struct imagestore *s, int *ret_fd, char *ret_name) {
        int fd;

        snprintf(ret_name, NAME_MAX + 1, "s-%ld-%lu", (long)getpid(),
                 __atomic_add_fetch(&s->serial, 1, __ATOMIC_RELAXED));
        if (mkdirat(s->tmp_fd, ret_name, 0700) < 0)
                return -errno;
        fd = openat(s->tmp_fd, ret_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int q = -errno;
                unlinkat(s->tmp_fd, ret_name, AT_REMOVEDIR);
                return q;
        }
        *ret_fd = fd;
        return 0;
}

void imagestore_scratch_remove(struct imagestore *s, const char *name) {
        layerns_remove_tree(&s->o.ns, s->tmp_fd, name);
}

int imagestore_spool(struct imagestore *s) {
        char name[64];
        int fd = openat(s->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
                return fd >= 0 ? fd : -errno;
        /* No O_TMPFILE on this filesystem. */
        snprintf(name, sizeof(name), "spool.%d.%lu", (int)getpid(), (unsigned long)pthread_self());
        fd = openat(s->tmp_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        (void)unlinkat(s->tmp_fd, name, 0);
        return fd;
}

/* Reads layers/HEX/size into l's sizes (entries 0 for a layer an older store unpacked,
 * which did not count them). */
static int read_layer_size(struct imagestore *s, const char *hex, struct imagestore_layer_ref *l) {
        char path[DIGEST_HEX_LEN + 8], buf[96];
        int fd;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/size", hex);
        fd = openat(s->layers_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        l->entries = 0;
        return sscanf(buf, "%" SCNu64 " %" SCNu64 " %" SCNu64, &l->data_bytes, &l->disk_bytes,
                      &l->entries) >= 2
                       ? 0
                       : -EIO;
}

/* Closes src's clone source (imagestore.h). */
static void drop_clone(const struct imagestore_blob_source *src) {
        if (src->clone_fd && *src->clone_fd >= 0) {
                close(*src->clone_fd);
                *src->clone_fd = -1;
        }
}

/* Unpacks src into a new directory of tmp/ (*name: NAME/tree, NAME/size, synced) once
 * its digests matched src's and diff_id (NULL: any; l->diff_id gets the tar's), filling
 * l. On failure nothing is left. */
static int unpack_scratch(struct imagestore *s, const char *diff_id,
                          const struct imagestore_blob_source *src,
                          const struct imagestore_budget *budget, struct imagestore_layer_ref *l,
                          char name[NAME_MAX + 1], char *err, size_t errlen) {
        struct layer_opts lo = {budget->bytes, s->o.max_layer_entries, s->o.whiteouts,
                                s->o.keep_owners, 0, src->clone_fd};
        const char *what = diff_id ? diff_id : "of the snapshot";
        struct layer_result res;
        char size[96];
        int dfd, tfd = -1, bfd, q;
        uint64_t du = 0;

        if (budget->entries < lo.max_entries)
                lo.max_entries = budget->entries;
        q = imagestore_scratch(s, &dfd, name);
        if (q < 0) {
                drop_clone(src);
                snprintf(err, errlen, "image store: %s", strerror(-q));
                return q;
        }
        bfd = src->open(src->userdata, err, errlen);
        q = bfd < 0 ? bfd : open_sub(dfd, "tree", 0);
        if (q >= 0) {
                tfd = q;
                /* The root of every layer is the image's "/" (overlayfs shows the upper
                 * one's): 0755, as Docker makes it; the store around it stays 0700. */
                q = fchmod(tfd, 0755) < 0 ? -errno : 0;
        }
        if (q == 0)
                q = layerns_unpack(&s->o.ns, bfd, tfd, &lo, &res, &du, err, errlen);
        drop_clone(src); /* before the sync: its pages go, never written back */
        if (q == -EDQUOT && lo.max_entries < s->o.max_layer_entries)
                snprintf(err, errlen,
                         "layer %s: more than the %" PRIu64
                         " entries (files, directories, links) left of the image's bound",
                         what, lo.max_entries);
        else if (q == -EDQUOT)
                snprintf(err + strlen(err), errlen - strlen(err), " (a layer's bound)");
        if (q == 0 && src->blob_digest && strcmp(res.blob_digest, src->blob_digest) != 0)
                q = -EINVAL, snprintf(err, errlen, "layer blob %s has the digest %s",
                                      src->blob_digest, res.blob_digest);
        else if (q == 0 && src->blob_size >= 0 && res.blob_bytes != (uint64_t)src->blob_size)
                q = -EINVAL,
                snprintf(err, errlen,
                         "layer blob %s is %" PRIu64 " bytes, its descriptor says %" PRId64,
                         src->blob_digest ? src->blob_digest : what, res.blob_bytes,
                         src->blob_size);
        else if (q == 0 && diff_id && strcmp(res.diff_id, diff_id) != 0)
                q = -EINVAL,
                snprintf(err, errlen, "layer %s has the diff_id %s", diff_id, res.diff_id);
        if (q == 0) {
                memcpy(l->diff_id, res.diff_id, DS);
                l->data_bytes = res.bytes;
                l->disk_bytes = du;
                l->entries = res.entries;
                snprintf(size, sizeof(size), "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", l->data_bytes,
                         l->disk_bytes, l->entries);
                q = syncfs(tfd) < 0 ? -errno : 0;
        }
        if (q == 0) {
                int f = openat(dfd, "size", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                q = f < 0 || write(f, size, strlen(size)) != (ssize_t)strlen(size) || fsync(f) < 0
                            ? -EIO
                            : 0;
                if (f >= 0)
                        close(f);
        }
        if (q < 0 && !err[0])
                snprintf(err, errlen, "layer %s: %s", what, strerror(-q));
        if (bfd >= 0)
                close(bfd);
        if (tfd >= 0)
                close(tfd);
        close(dfd);
        if (q < 0)
                imagestore_scratch_remove(s, name);
        return q;
}

/* Renames tmp/name to layers/HEX of l's diff_id. The layer's lock is held. 0 or -errno
 * with err (tmp/name is removed unless it was placed). */
static int place_layer(struct imagestore *s, const char *name, struct imagestore_layer_ref *l,
                       char *err, size_t errlen) {
        int q = 0;

        if (renameat(s->tmp_fd, name, s->layers_fd, hex_of(l->diff_id)) < 0) {
                q = -errno;
                /* Made meanwhile by an unpack that did not wait on the lock (where
                 * flock(2) is not honoured, as on some network filesystems): the same
                 * content, checked by the same digests. The first one stays. */
                if ((q == -ENOTEMPTY || q == -EEXIST) &&
                    read_layer_size(s, hex_of(l->diff_id), l) == 0)
                        q = 1;
        }
        if (q == 0)
                fsync(s->layers_fd);
        else if (q < 0)
                snprintf(err, errlen, "layer %s: %s", l->diff_id, strerror(-q));
        if (q != 0)
                imagestore_scratch_remove(s, name);
        return q < 0 ? q : 0;
}

/* Locks layer diff_id (its lock file's fd, or -errno with err). */
static int lock_layer(struct imagestore *s, const char *diff_id, char *err, size_t errlen) {
        char lock[DIGEST_HEX_LEN + 8];
        int lfd, q;

        snprintf(lock, sizeof(lock), "%s.lock", hex_of(diff_id));
        lfd = openat(s->locks_fd, lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
                q = -errno;
                snprintf(err, errlen, "locking layer %s: %s", diff_id, strerror(-q));
                if (lfd >= 0)
                        close(lfd);
                return q;
        }
        return lfd;
}

/* The diff_id a record says blob was unpacked to, or NULL. mu held. */
static const char *known_blob(struct imagestore *s, const char *blob) {
        size_t i, k;

        for (i = 0; i < s->nrecs; i++)
                for (k = 0; k < s->recs[i].nlayers; k++)
                        if (strcmp(s->recs[i].layers[k].blob, blob) == 0)
                                return s->recs[i].layers[k].diff_id;
        return NULL;
}

int imagestore_blob_layer(struct imagestore *s, const char *blob, int pin,
                          char ret_diff_id[DIGEST_STR_BYTES]) {
        char diff_id[DS];
        const char *d;

        if (!blob || !blob[0])
                return 0;
        pthread_mutex_lock(&s->mu);
        d = known_blob(s, blob);
        if (d)
                memcpy(diff_id, d, DS);
        pthread_mutex_unlock(&s->mu);
        /* Pinned after the lookup: a removal between the two may have swept it, which
         * the faccessat below sees (a pin keeps it from then on). */
        if (!d || (pin && imagestore_pin(s, diff_id) < 0))
                return d ? -ENOMEM : 0;
        if (faccessat(s->layers_fd, hex_of(diff_id), F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                if (pin)
                        imagestore_unpin(s, diff_id);
                return 0;
        }
        memcpy(ret_diff_id, diff_id, DS);
        return 1;
}

/* Checks that a layer the store has fits in what the image may still take. */
static int fits(const struct imagestore_layer_ref *l, const struct imagestore_budget *budget,
                const char *diff_id, char *err, size_t errlen) {
        if (l->data_bytes > budget->bytes) {
                snprintf(err, errlen, "layer %s: its %" PRIu64 " bytes pass the image's bound",
                         diff_id, l->data_bytes);
                return -EFBIG;
        }
        if (l->entries > budget->entries) {
                snprintf(err, errlen,
                         "layer %s: its %" PRIu64
                         " entries (files, directories, links) pass the image's bound",
                         diff_id, l->entries);
                return -EDQUOT;
        }
        return 0;
}

int imagestore_get_layer(struct imagestore *s, const char *diff_id,
                         const struct imagestore_blob_source *src, struct imagestore_budget *budget,
                         struct imagestore_layer_ref *ret, char *err, size_t errlen) {
        char known[DS] = "", name[NAME_MAX + 1];
        const char *hex = hex_of(diff_id);
        int lfd, q;

        err[0] = '\0';
        if (!hex) {
                snprintf(err, errlen, "\"%.100s\" is no sha256 digest", diff_id);
                return -EINVAL;
        }
        memset(ret, 0, sizeof(*ret));
        memcpy(ret->diff_id, diff_id, DS);
        lfd = lock_layer(s, diff_id, err, errlen);
        if (lfd < 0)
                return lfd;
        q = read_layer_size(s, hex, ret);
        if (q == 0) {
                q = fits(ret, budget, diff_id, err, errlen);
                /* Unpacked before: src's blob is this layer's only when a record says so
                 * (the manifest's word alone is not recorded). */
                if (q == 0 && src->blob_digest &&
                    imagestore_blob_layer(s, src->blob_digest, 0, known) == 1 &&
                    strcmp(known, diff_id) == 0)
                        memcpy(ret->blob, src->blob_digest, DS);
        } else {
                q = unpack_scratch(s, diff_id, src, budget, ret, name, err, errlen);
                if (q == 0)
                        q = place_layer(s, name, ret, err, errlen);
                if (q == 0 && src->blob_digest)
                        memcpy(ret->blob, src->blob_digest, DS);
        }
        close(lfd); /* unlocks */
        if (q == 0) {
                budget->bytes -= ret->data_bytes;
                budget->entries -= ret->entries;
        }
        return q;
}

int imagestore_import_layer(struct imagestore *s, const struct imagestore_blob_source *src,
                            const struct imagestore_budget *budget,
                            struct imagestore_layer_ref *ret, char *err, size_t errlen) {
        char name[NAME_MAX + 1];
        int lfd, q;

        err[0] = '\0';
        memset(ret, 0, sizeof(*ret));
        q = unpack_scratch(s, NULL, src, budget, ret, name, err, errlen);
        if (q < 0)
                return q;
        q = imagestore_pin(s, ret->diff_id);
        lfd = q < 0 ? q : lock_layer(s, ret->diff_id, err, errlen);
        if (lfd < 0) {
                if (q == 0)
                        imagestore_unpin(s, ret->diff_id);
                imagestore_scratch_remove(s, name);
                return lfd;
        }
        /* The same content in the store already (a snapshot of what did not change):
         * that one stays. */
        if (read_layer_size(s, hex_of(ret->diff_id), ret) == 0)
                imagestore_scratch_remove(s, name);
        else
                q = place_layer(s, name, ret, err, errlen);
        close(lfd);
        if (q < 0)
                imagestore_unpin(s, ret->diff_id);
        return q;
}

/* Takes ref from every image but keep (mu held). */
static void take_ref(struct imagestore *s, const char *ref, struct rec *keep) {
        size_t i;

        for (i = 0; i < s->nrecs; i++)
                if (&s->recs[i] != keep)
                        drop_ref(s, &s->recs[i], ref);
}

static int add_ref(struct rec *r, const char *ref) {
        char **refs;
        size_t k;

        for (k = 0; k < r->nrefs; k++)
                if (strcmp(r->refs[k], ref) == 0)
                        return 0;
        refs = realloc(r->refs, (r->nrefs + 2) * sizeof(char *));
        if (!refs)
                return -ENOMEM;
        r->refs = refs;
        if (!(refs[r->nrefs] = strdup(ref)))
                return -ENOMEM;
        r->nrefs++;
        return 0;
}

int imagestore_commit(struct imagestore *s, const char *manifest, const char *config,
                      const struct imagestore_layer_ref *layers, size_t nlayers,
                      uint64_t blob_bytes, const char *ref, char *err, size_t errlen) {
        struct rec *r, n = {0};
        int q = 0, created = 0;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, manifest);
        if (!r) {
                struct rec *grown = realloc(s->recs, (s->nrecs + 1) * sizeof(*grown));
                if (grown)
                        s->recs = grown;
                n.layers = calloc(nlayers + 1, sizeof(*n.layers));
                n.refs = calloc(1, sizeof(char *));
                if (!grown || !n.layers || !n.refs) {
                        rec_clear(&n);
                        q = -ENOMEM;
                        goto out;
                }
                snprintf(n.manifest, DS, "%s", manifest);
                snprintf(n.config, DS, "%s", config);
                memcpy(n.layers, layers, nlayers * sizeof(*layers));
                n.nlayers = nlayers;
                n.blob_bytes = blob_bytes;
                n.created_ms = n.last_used_ms = now_ms();
                s->recs[s->nrecs++] = n;
                r = &s->recs[s->nrecs - 1];
                created = 1;
        }
        if (ref) {
                take_ref(s, ref, r);
                q = add_ref(r, ref);
        }
        if (q == 0)
                q = rec_save(s, r, 1);
        if (q < 0 && created) { /* never written: the image was not imported */
                rec_clear(r);
                s->nrecs--;
        }
out:
        if (q < 0)
                snprintf(err, errlen, "recording image %s: %s", manifest, strerror(-q));
        pthread_mutex_unlock(&s->mu);
        return q;
}

/* ---- inspect ------------------------------------------------------------------------- */

int imagestore_open_blob(struct imagestore *s, const char *name, int config) {
        char digest[DS];
        struct rec *r;
        int fd;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        if (r)
                memcpy(digest, config ? r->config : r->manifest, DS);
        pthread_mutex_unlock(&s->mu);
        if (!r)
                return -ENOENT;
        fd = openat(s->blobs_fd, hex_of(digest), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int imagestore_inspect(struct imagestore *s, const char *name, struct imageconfig *ret) {
        char config[DS];
        struct rec *r;
        int fd, q;

        pthread_mutex_lock(&s->mu);
        r = find_rec(s, name);
        if (r)
                memcpy(config, r->config, DS);
        pthread_mutex_unlock(&s->mu);
        if (!r)
                return -ENOENT;
        fd = openat(s->blobs_fd, hex_of(config), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        q = imageconfig_load(fd, ret);
        close(fd);
        return q;
}
