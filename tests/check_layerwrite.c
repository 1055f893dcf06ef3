/* check_layerwrite.c: the Check suite of daemon/layerwrite.c. Each test builds a tree as
 * a sandbox's writable root and workspace would hold it (overlayfs's whiteouts and
 * opaque directories, hard links, symlinks, a FIFO, owners of a block of ids), writes
 * it as a layer, reads the tar back with libarchive, and unpacks it with layer.c as a
 * snapshot's layer would be: what comes out is what went in, in the store's form. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "layer.h"
#include "layerwrite.h"
#include "testutil.h"

#define BASE 2147549184u /* a block's first host id: inside 0 */

static char dir[256];

static void setup(void) {
        test_dir_make(dir, sizeof(dir), "check_layerwrite");
}

static void teardown(void) {
        test_dir_remove(dir);
}

static void put(const char *rel, const char *text, mode_t mode, uid_t uid) {
        char path[512];
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        ck_assert_int_eq(fchown(fd, uid, uid), 0); /* before the mode: chown clears setuid */
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void mk(const char *rel, uid_t uid) {
        char path[512];

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        ck_assert_int_eq(chown(path, uid, uid), 0);
}

static int open_dir(const char *rel) {
        char path[512];
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

/* The opts of a root daemon's block at BASE. */
static struct layerwrite_opts block_opts(void) {
        struct layerwrite_opts o = {.max_bytes = 1 << 20, .max_entries = 1000};

        o.uids.r[0] = (struct layerwrite_range){BASE, 0, 65536};
        o.gids.r[0] = o.uids.r[0];
        o.uids.n = o.gids.n = 1;
        return o;
}

/* The kind of the upper trees write_layer writes (a root sbxd's unless a case says). */
static enum layerwrite_kind kind = LAYERWRITE_UPPER;

/* Writes upper (and, not NULL, ws under "workspace") to DIR/name; the result. */
static int write_layer(const char *name, const char *upper, const char *ws,
                       const struct layerwrite_opts *o, struct layerwrite_result *res,
                       char *err, size_t errlen) {
        struct layerwrite *w = NULL;
        char path[512];
        int out, ufd, wfd = -1, r;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(out, 0);
        ufd = open_dir(upper);
        if (ws)
                wfd = open_dir(ws);
        r = layerwrite_open(out, o, err, errlen, &w);
        if (r == 0)
                r = layerwrite_tree(w, ufd, "", kind);
        if (r == 0 && ws)
                r = layerwrite_tree(w, wfd, "workspace", LAYERWRITE_PLAIN);
        if (r == 0)
                r = layerwrite_finish(w, res);
        layerwrite_free(w);
        close(ufd);
        if (wfd >= 0)
                close(wfd);
        close(out);
        return r;
}

/* The tree of a sandbox: upper/ with a file of inside uid 1000, a setuid file of root, a
 * hard link, a symlink out of the tree, a whiteout of /etc/gone (a 0/0 device), an
 * opaque /opt, a rootless whiteout file, a FIFO; ws/ with a file of the user's. */
static void make_sandbox_tree(void) {
        char path[512];

        mk("upper", BASE);
        mk("upper/etc", BASE);
        put("upper/etc/new", "hello\n", 0644, BASE + 1000);
        put("upper/etc/su", "#!\n", 04755, BASE);
        snprintf(path, sizeof(path), "%s/upper/etc/new", dir);
        {
                char to[512];
                snprintf(to, sizeof(to), "%s/upper/etc/new.link", dir);
                ck_assert_int_eq(link(path, to), 0);
        }
        snprintf(path, sizeof(path), "%s/upper/etc/host", dir);
        ck_assert_int_eq(symlink("/etc/shadow", path), 0);
        ck_assert_int_eq(lchown(path, BASE, BASE), 0);
        snprintf(path, sizeof(path), "%s/upper/etc/gone", dir);
        ck_assert_int_eq(mknod(path, S_IFCHR | 0, makedev(0, 0)), 0);
        mk("upper/opt", BASE);
        snprintf(path, sizeof(path), "%s/upper/opt", dir);
        ck_assert_int_eq(setxattr(path, "trusted.overlay.opaque", "y", 1, 0), 0);
        put("upper/opt/only", "x", 0644, BASE);
        put("upper/etc/xgone", "", 0, BASE);
        snprintf(path, sizeof(path), "%s/upper/etc/xgone", dir);
        ck_assert_int_eq(setxattr(path, "user.overlay.whiteout", "", 0, 0), 0);
        snprintf(path, sizeof(path), "%s/upper/etc/fifo", dir);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        /* An id of no range (the host's root here): written as the overflow id. */
        put("upper/etc/hosts", "h\n", 0644, 0);
        mk("ws", BASE + 1000);
        put("ws/notes", "mine\n", 0600, BASE + 1000);
        /* In the workspace, a plain tree, what look like markers are not. */
        snprintf(path, sizeof(path), "%s/ws/dev", dir);
        ck_assert_int_eq(mknod(path, S_IFCHR | 0, makedev(0, 0)), 0);
        snprintf(path, sizeof(path), "%s/ws", dir);
        ck_assert_int_eq(setxattr(path, "trusted.overlay.opaque", "y", 1, 0), 0);
}

struct seen {
        char name[256];
        int type; /* AE_IF* */
        unsigned uid, gid;
        mode_t perm;
        char link[256];
        char data[64];
};

/* The entries of the tar DIR/name, in order: their count (at most max). */
static int read_back(const char *name, struct seen *s, int max) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        char path[512];
        int n = 0;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        ck_assert_int_eq(archive_read_support_format_tar(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_read_open_filename(a, path, 10240), ARCHIVE_OK);
        while (n < max && archive_read_next_header(a, &e) == ARCHIVE_OK) {
                memset(&s[n], 0, sizeof(s[n]));
                snprintf(s[n].name, sizeof(s[n].name), "%s", archive_entry_pathname(e));
                s[n].type = (int)archive_entry_filetype(e);
                s[n].uid = (unsigned)archive_entry_uid(e);
                s[n].gid = (unsigned)archive_entry_gid(e);
                s[n].perm = archive_entry_perm(e);
                if (archive_entry_hardlink(e))
                        snprintf(s[n].link, sizeof(s[n].link), "h:%s", archive_entry_hardlink(e));
                else if (archive_entry_symlink(e))
                        snprintf(s[n].link, sizeof(s[n].link), "l:%s", archive_entry_symlink(e));
                (void)archive_read_data(a, s[n].data, sizeof(s[n].data) - 1);
                n++;
        }
        ck_assert_int_eq(archive_read_free(a), ARCHIVE_OK);
        return n;
}

static const struct seen *find(const struct seen *s, int n, const char *name) {
        for (int i = 0; i < n; i++)
                if (strcmp(s[i].name, name) == 0)
                        return &s[i];
        ck_abort_msg("no entry %s in the layer", name);
        return NULL;
}

static int has(const struct seen *s, int n, const char *name) {
        for (int i = 0; i < n; i++)
                if (strcmp(s[i].name, name) == 0)
                        return 1;
        return 0;
}

/* Everything of the sandbox's tree, as OCI says it, with ids inside the block. */
START_TEST(writes_the_tree_as_oci_says) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result res;
        struct seen s[64];
        char err[512] = "";
        const struct seen *e;
        int n;

        make_sandbox_tree();
        ck_assert_msg(write_layer("l.tar", "upper", "ws", &o, &res, err, sizeof(err)) == 0, "%s",
                      err);
        n = read_back("l.tar", s, 64);
        ck_assert_int_eq((int)res.entries, n);
        /* Sorted, relative. */
        ck_assert_str_eq(s[0].name, "etc/");
        e = find(s, n, "etc/new");
        ck_assert_uint_eq(e->uid, 1000);
        ck_assert_uint_eq(e->gid, 1000);
        ck_assert_str_eq(e->data, "hello\n");
        e = find(s, n, "etc/new.link");
        ck_assert_str_eq(e->link, "h:etc/new");
        e = find(s, n, "etc/su");
        ck_assert_uint_eq(e->perm, 04755);
        ck_assert_uint_eq(e->uid, 0);
        e = find(s, n, "etc/host");
        ck_assert_str_eq(e->link, "l:/etc/shadow");
        ck_assert_int_eq(e->type, AE_IFLNK);
        /* Whiteouts and the opaque directory, as OCI's names. */
        ck_assert(has(s, n, "etc/.wh.gone") && !has(s, n, "etc/gone"));
        /* user.overlay.whiteout is data in a root sbxd's upper (the sandbox may set it). */
        ck_assert(!has(s, n, "etc/.wh.xgone") && has(s, n, "etc/xgone"));
        ck_assert(has(s, n, "opt/.wh..wh..opq"));
        ck_assert(has(s, n, "opt/only"));
        /* The FIFO left out and named; the host's root an overflow id. */
        ck_assert(!has(s, n, "etc/fifo"));
        ck_assert_uint_eq(res.skipped, 2); /* and ws/dev, a 0/0 device of a plain tree */
        ck_assert_str_eq(res.first_skipped, "etc/fifo");
        ck_assert(!has(s, n, "workspace/.wh.dev") && !has(s, n, "workspace/dev"));
        ck_assert(!has(s, n, "workspace/.wh..wh..opq")); /* ws's trusted.overlay.opaque */
        ck_assert_uint_eq(find(s, n, "etc/hosts")->uid, LAYERWRITE_OVERFLOW_ID);
        /* The workspace under its prefix, its directory too. */
        ck_assert_uint_eq(find(s, n, "workspace/")->uid, 1000);
        ck_assert_str_eq(find(s, n, "workspace/notes")->data, "mine\n");
        ck_assert_uint_eq(res.data_bytes, strlen("hello\n") + 3 + 1 + 2 + strlen("mine\n"));
}
END_TEST

/* A rootless sbxd's upper (overlayfs with userxattr): user.overlay.* are its markers,
 * trusted.overlay.* data (the sandbox's root could not set it there, but neither does
 * overlayfs read it). */
START_TEST(userxattr_upper_markers) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result res;
        struct seen s[64];
        char err[512] = "", path[512];
        int n;

        make_sandbox_tree();
        snprintf(path, sizeof(path), "%s/upper/etc", dir);
        ck_assert_int_eq(setxattr(path, "user.overlay.opaque", "y", 1, 0), 0);
        kind = LAYERWRITE_UPPER_USERXATTR;
        ck_assert_msg(write_layer("u.tar", "upper", NULL, &o, &res, err, sizeof(err)) == 0, "%s",
                      err);
        n = read_back("u.tar", s, 64);
        ck_assert(has(s, n, "etc/.wh.xgone") && !has(s, n, "etc/xgone"));
        ck_assert(has(s, n, "etc/.wh.gone"));
        ck_assert(has(s, n, "etc/.wh..wh..opq"));
        ck_assert(!has(s, n, "opt/.wh..wh..opq") && has(s, n, "opt/only"));
}
END_TEST

/* A tree of many hard-linked files (a sandbox may hold a million) is written in time
 * about linear in them: 200,000 files of two links each within 15 s (3.6 s here; a
 * list searched for each name took 24.5 s, and would take a quarter of an hour for a
 * million), every second name a link to the first. */
START_TEST(many_hard_links_in_linear_time) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result res;
        struct timespec t0, t1;
        char err[512] = "", a[512], b[512];
        const unsigned n = 200000;
        unsigned i;
        long ms;
        int fd;

        mk("many", BASE);
        for (i = 0; i < n; i++) {
                snprintf(a, sizeof(a), "%s/many/f%u", dir, i);
                snprintf(b, sizeof(b), "%s/many/g%u", dir, i);
                fd = open(a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
                ck_assert_int_eq(link(a, b), 0);
        }
        o.max_entries = 3 * n;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ck_assert_msg(write_layer("many.tar", "many", NULL, &o, &res, err, sizeof(err)) == 0, "%s",
                      err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_uint_eq(res.entries, 2 * n);
        ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        ck_assert_msg(ms < 15000, "%ld ms for %u linked files", ms, n);
}
END_TEST

/* The same tree written twice is the same layer (its digest is its diff_id), and layer.c
 * reads it back with that very diff_id, whiteouts in the store's form. */
START_TEST(same_tree_same_digest_and_unpacks) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result a, b;
        struct layer_opts lo = {.max_bytes = 1 << 20,
                                .max_entries = 1000,
                                .whiteouts = LAYER_WHITEOUT_CHARDEV,
                                .keep_owners = 1};
        struct layer_result lr;
        char err[512] = "", path[512], v[4];
        struct stat st;
        int fd, out;

        make_sandbox_tree();
        ck_assert_int_eq(write_layer("a.tar", "upper", "ws", &o, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(write_layer("b.tar", "upper", "ws", &o, &b, err, sizeof(err)), 0);
        ck_assert_str_eq(a.digest, b.digest);
        ck_assert_uint_eq(a.size, b.size);
        {
                char d2[DIGEST_STR_BYTES];
                snprintf(path, sizeof(path), "%s/a.tar", dir);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                ck_assert_int_eq(digest_fd(fd, d2, NULL), 0);
                close(fd);
                ck_assert_str_eq(d2, a.digest);
        }
        mk("out", 0);
        out = open_dir("out");
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(layer_unpack(fd, out, &lo, &lr, err, sizeof(err)) == 0, "%s", err);
        close(fd);
        close(out);
        ck_assert_str_eq(lr.diff_id, a.digest);
        snprintf(path, sizeof(path), "%s/out/etc/gone", dir);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        snprintf(path, sizeof(path), "%s/out/opt", dir);
        ck_assert_int_eq(getxattr(path, "trusted.overlay.opaque", v, sizeof(v)), 1);
        snprintf(path, sizeof(path), "%s/out/etc/new", dir);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_uint_eq(st.st_uid, 1000);
        ck_assert_uint_eq(st.st_nlink, 2);
        snprintf(path, sizeof(path), "%s/out/workspace/notes", dir);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
}
END_TEST

/* Past max_bytes: -EFBIG, past max_entries: -E2BIG, naming the entry; too deep: -ELOOP. */
START_TEST(bounds_are_refused) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result res;
        char err[512] = "";

        make_sandbox_tree();
        o.max_bytes = 8;
        ck_assert_int_eq(write_layer("x.tar", "upper", NULL, &o, &res, err, sizeof(err)), -EFBIG);
        ck_assert_msg(strstr(err, "more than 8 bytes"), "%s", err);
        o = block_opts();
        o.max_entries = 3;
        ck_assert_int_eq(write_layer("x.tar", "upper", NULL, &o, &res, err, sizeof(err)), -E2BIG);
        ck_assert_msg(strstr(err, "more than 3 files"), "%s", err);

        o = block_opts();
        mk("deep", 0);
        {
                int fd = open_dir("deep");
                for (int i = 0; i < LAYER_MAX_DEPTH + 2; i++) {
                        int next;
                        ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
                        next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        ck_assert_int_ge(next, 0);
                        close(fd);
                        fd = next;
                }
                close(fd);
        }
        ck_assert_int_eq(write_layer("x.tar", "deep", NULL, &o, &res, err, sizeof(err)), -ELOOP);
        ck_assert_msg(strstr(err, "directories deep"), "%s", err);
}
END_TEST

/* A symlink where a directory was listed is never followed (-ESTALE), and a symlink to
 * a directory is written as a symlink, not walked. */
START_TEST(symlinks_are_never_followed) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite_result res;
        struct seen s[16];
        char err[512] = "", path[512];
        int n;

        mk("t", 0);
        snprintf(path, sizeof(path), "%s/t/root", dir);
        ck_assert_int_eq(symlink("/", path), 0);
        ck_assert_int_eq(write_layer("s.tar", "t", NULL, &o, &res, err, sizeof(err)), 0);
        n = read_back("s.tar", s, 16);
        ck_assert_int_eq(n, 1);
        ck_assert_str_eq(s[0].link, "l:/");
}
END_TEST

/* ---- clones (layerwrite.h o.clone, layer.h clone_fd) ------------------------------------ */

static const size_t clone_sizes[] = {0, 100, 4095, 4096, 4097, 12345, 100000, 1u << 20};
#define LONG_NAME_BYTES 200

/* size bytes of a pattern that differs by seed at DIR/rel. */
static void fill_file(const char *rel, size_t size, unsigned seed) {
        char path[512], *buf = malloc(size + 1);
        int fd;

        ck_assert_ptr_nonnull(buf);
        for (size_t i = 0; i < size; i++)
                buf[i] = (char)((i * 31u + i / 4096u + seed) & 0xff);
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, buf, size), (ssize_t)size);
        close(fd);
        free(buf);
}

/* DIR/root: a file of each of clone_sizes, one with a name long enough for a pax
 * header, a hard link, a symlink, a directory. */
static void make_clone_tree(const char *root) {
        char rel[512], name[LONG_NAME_BYTES + 1];
        size_t i;

        mk(root, BASE);
        for (i = 0; i < sizeof(clone_sizes) / sizeof(clone_sizes[0]); i++) {
                snprintf(rel, sizeof(rel), "%s/f%zu", root, clone_sizes[i]);
                fill_file(rel, clone_sizes[i], (unsigned)i);
        }
        memset(name, 'n', LONG_NAME_BYTES);
        name[LONG_NAME_BYTES] = '\0';
        snprintf(rel, sizeof(rel), "%s/%s", root, name);
        fill_file(rel, 8192, 99);
        snprintf(rel, sizeof(rel), "%s/sub", root);
        mk(rel, BASE);
        snprintf(rel, sizeof(rel), "%s/sub/f5000", root);
        fill_file(rel, 5000, 7);
        {
                char a[512], b[512];
                snprintf(a, sizeof(a), "%s/%s/f100000", dir, root);
                snprintf(b, sizeof(b), "%s/%s/sub/linked", dir, root);
                ck_assert_int_eq(link(a, b), 0);
                snprintf(b, sizeof(b), "%s/%s/sub/sym", dir, root);
                ck_assert_int_eq(symlink("../f100", b), 0);
        }
}

/* Whether the file at path holds exactly len bytes of buf. */
static int same_file(const char *path, const void *buf, size_t len) {
        char *got = malloc(len + 1);
        int fd = open(path, O_RDONLY | O_CLOEXEC), same;
        ssize_t n;

        ck_assert_ptr_nonnull(got);
        ck_assert_int_ge(fd, 0);
        n = read(fd, got, len + 1);
        same = n == (ssize_t)len && memcmp(got, buf, len) == 0;
        close(fd);
        free(got);
        return same;
}

/* Reads the tar at tar: every regular entry's data is the file of DIR/root it names
 * (the workspace's under ws), read through libarchive and, at the stream's position
 * after its header, in the tar's own bytes. Returns the regular entries of at least
 * block bytes whose data starts at a multiple of block. */
static int check_tar(const char *tar, const char *root, uint32_t block, int *ret_regular) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        int fd = open(tar, O_RDONLY | O_CLOEXEC), aligned = 0;
        char path[1024];

        *ret_regular = 0;
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(archive_read_support_format_tar(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_read_open_fd(a, fd, 10240), ARCHIVE_OK);
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                int64_t pos = archive_filter_bytes(a, 0), size = archive_entry_size(e);
                char *data;

                ck_assert_msg(strncmp(archive_entry_pathname(e), "sbxd.pad", 8) != 0,
                              "a pad read as an entry");
                if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e))
                        continue;
                data = malloc((size_t)size + 1);
                ck_assert_ptr_nonnull(data);
                ck_assert_int_eq(archive_read_data(a, data, (size_t)size + 1), size);
                snprintf(path, sizeof(path), "%s/%s/%s", dir, root, archive_entry_pathname(e));
                ck_assert_msg(same_file(path, data, (size_t)size), "%s differs", path);
                ck_assert_int_eq(pread(fd, data, (size_t)size, pos), size);
                ck_assert_msg(same_file(path, data, (size_t)size), "%s: not at %lld in the tar",
                              path, (long long)pos);
                (*ret_regular)++;
                if (size >= (int64_t)block && pos % block == 0)
                        aligned++;
                free(data);
        }
        ck_assert_int_eq(archive_read_free(a), ARCHIVE_OK);
        close(fd);
        return aligned;
}

/* Writes DIR/root to tar with o.clone (no digest, as a snapshot's spool). */
static void write_clone_layer(const char *tar, const char *root, struct layerwrite_result *res) {
        struct layerwrite_opts o = block_opts();
        struct layerwrite *w = NULL;
        char err[512] = "";
        int out = open(tar, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), t = open_dir(root);
        struct stat st;

        o.max_bytes = 64u << 20;
        o.no_digest = 1;
        o.clone = 1;
        ck_assert_int_ge(out, 0);
        ck_assert_msg(layerwrite_open(out, &o, err, sizeof(err), &w) == 0, "%s", err);
        ck_assert_msg(layerwrite_tree(w, t, "", LAYERWRITE_PLAIN) == 0, "%s", err);
        ck_assert_msg(layerwrite_finish(w, res) == 0, "%s", err);
        layerwrite_free(w);
        ck_assert_int_eq(fstat(out, &st), 0); /* extended meanwhile, cut back */
        ck_assert_int_eq(st.st_size, (off_t)res->size);
        close(t);
        close(out);
}

/* Unpacks tar into DIR/out taking data from clone (a path, or NULL: none). */
static void unpack_with(const char *tar, const char *clone, const char *out,
                        struct layer_result *lr) {
        struct layer_opts lo = {.max_bytes = 64u << 20,
                                .max_entries = 1000,
                                .whiteouts = LAYER_WHITEOUT_CHARDEV,
                                .keep_owners = 1};
        char err[512] = "";
        int fd = open(tar, O_RDONLY | O_CLOEXEC), cfd = clone ? open(clone, O_RDONLY | O_CLOEXEC) : -1,
            o;

        lo.clone_fd = clone ? &cfd : NULL;
        mk(out, 0);
        o = open_dir(out);
        ck_assert_msg(layer_unpack(fd, o, &lo, lr, err, sizeof(err)) == 0, "%s", err);
        close(o);
        close(fd);
        if (cfd >= 0)
                close(cfd);
}

/* The files of DIR/root and DIR/out are the same. */
static void same_trees(const char *root, const char *out) {
        char a[1024], b[1024], name[LONG_NAME_BYTES + 1];
        size_t i;

        memset(name, 'n', LONG_NAME_BYTES);
        name[LONG_NAME_BYTES] = '\0';
        for (i = 0; i <= sizeof(clone_sizes) / sizeof(clone_sizes[0]) + 2; i++) {
                char rel[512];
                struct stat st;
                char *buf;
                int fd;

                if (i < sizeof(clone_sizes) / sizeof(clone_sizes[0]))
                        snprintf(rel, sizeof(rel), "f%zu", clone_sizes[i]);
                else
                        snprintf(rel, sizeof(rel), "%s",
                                 i == sizeof(clone_sizes) / sizeof(clone_sizes[0]) ? name
                                 : i == sizeof(clone_sizes) / sizeof(clone_sizes[0]) + 1
                                         ? "sub/f5000"
                                         : "sub/linked");
                snprintf(a, sizeof(a), "%s/%s/%s", dir, root, rel);
                snprintf(b, sizeof(b), "%s/%s/%s", dir, out, rel);
                ck_assert_int_eq(stat(a, &st), 0);
                buf = malloc((size_t)st.st_size + 1);
                fd = open(a, O_RDONLY | O_CLOEXEC);
                ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
                close(fd);
                ck_assert_msg(same_file(b, buf, (size_t)st.st_size), "%s differs from %s", b, a);
                free(buf);
        }
}

/* With o.clone the tar is the same tar to any reader (the pads are no entries), every
 * file of a block or more has its data at a block boundary, and layer.c taking the data
 * from the tar's own file writes the same tree under the same diff_id. */
START_TEST(clones_align_data_and_read_back_the_same) {
        struct layerwrite_result res;
        struct layer_result lr;
        char tar[512], d[DIGEST_STR_BYTES];
        struct statfs sf;
        int regular, fd;

        make_clone_tree("t");
        snprintf(tar, sizeof(tar), "%s/c.tar", dir);
        write_clone_layer(tar, "t", &res);
        ck_assert_int_eq(statfs(dir, &sf), 0);
        /* f4096, f4097, f12345, f100000, f1048576, the long name, sub/f5000 */
        ck_assert_int_eq(check_tar(tar, "t", (uint32_t)sf.f_bsize, &regular), 7);
        ck_assert_int_eq(regular, 10);
        fd = open(tar, O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(digest_fd(fd, d, NULL), 0);
        close(fd);
        unpack_with(tar, tar, "out", &lr);
        ck_assert_str_eq(lr.diff_id, d);
        same_trees("t", "out");
}
END_TEST

/* A clone source that is not the tar's bytes is not believed: each block taken from it
 * is compared with the tar's, and one that differs is written from the tar. */
START_TEST(a_clone_source_that_differs_is_not_believed) {
        struct layerwrite_result res;
        struct layer_result lr;
        char tar[512], other[512], cmd[1200];
        int fd;

        make_clone_tree("t");
        snprintf(tar, sizeof(tar), "%s/c.tar", dir);
        snprintf(other, sizeof(other), "%s/other.tar", dir);
        write_clone_layer(tar, "t", &res);
        snprintf(cmd, sizeof(cmd), "cp %s %s", tar, other);
        ck_assert_int_eq(system(cmd), 0);
        /* Every byte from the middle on changed: file data and headers alike. */
        fd = open(other, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        for (off_t off = (off_t)res.size / 2; off < (off_t)res.size; off += 4096)
                ck_assert_int_eq(pwrite(fd, "XXXXXXXX", 8, off + 1000), 8);
        close(fd);
        unpack_with(tar, other, "out", &lr);
        same_trees("t", "out");
}
END_TEST

/* On a filesystem that shares blocks (XFS with reflink, made by the test), the tar's
 * data and the unpacked layer's files are the tree's own blocks: the data is on disk
 * once. */
START_TEST(clones_share_blocks_on_xfs) {
        struct layerwrite_result res;
        struct layer_result lr;
        char mnt[512], img[600], tar[600], path[700];
        uint64_t before;

        test_private_mounts();
        snprintf(mnt, sizeof(mnt), "%s/xfs", dir);
        snprintf(img, sizeof(img), "%s/xfs.img", dir);
        ck_assert_int_eq(mkdir(mnt, 0755), 0);
        if (!test_xfs_mount(img, mnt))
                return;
        make_clone_tree("xfs/t");
        for (int i = 0; i < 8; i++) { /* 8 MiB more */
                snprintf(path, sizeof(path), "xfs/t/sub/big%d", i);
                fill_file(path, 1u << 20, 50u + (unsigned)i);
        }
        sync();
        before = test_used_bytes(mnt);
        snprintf(tar, sizeof(tar), "%s/c.tar", mnt);
        write_clone_layer(tar, "xfs/t", &res);
        ck_assert_uint_ge(test_shared_bytes(tar), 9u << 20);
        unpack_with(tar, tar, "xfs/out", &lr);
        same_trees("xfs/t", "xfs/out");
        snprintf(path, sizeof(path), "%s/out/sub/big3", mnt);
        ck_assert_uint_eq(test_shared_bytes(path), 1u << 20);
        snprintf(path, sizeof(path), "%s/out/f1048576", mnt);
        ck_assert_uint_eq(test_shared_bytes(path), 1u << 20);
        sync();
        /* 10 MiB of data twice more, in 1 MiB: headers, pads, small files, metadata. */
        ck_assert_msg(test_used_bytes(mnt) - before < (1u << 20), "%llu bytes more used",
                      (unsigned long long)(test_used_bytes(mnt) - before));
}
END_TEST

static void xfs_teardown(void) {
        test_dir_unmount(dir);
        test_dir_remove(dir);
}

static Suite *make_suite(void) {
        Suite *s = suite_create("layerwrite");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, writes_the_tree_as_oci_says);
        tcase_add_test(tc, userxattr_upper_markers);
        tcase_add_test(tc, same_tree_same_digest_and_unpacks);
        tcase_add_test(tc, bounds_are_refused);
        tcase_add_test(tc, symlinks_are_never_followed);
        tcase_add_test(tc, clones_align_data_and_read_back_the_same);
        tcase_add_test(tc, a_clone_source_that_differs_is_not_believed);
        suite_add_tcase(s, tc);
        tc = tcase_create("xfs");
        tcase_add_checked_fixture(tc, setup, xfs_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, clones_share_blocks_on_xfs);
        suite_add_tcase(s, tc);
        tc = tcase_create("many_links");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, many_hard_links_in_linear_time);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
