/* check_layer.c: the Check suite of daemon/layer.c. Each test builds its layers here with
 * libarchive's writer (a hostile tar is easier to write than to find), unpacks them into
 * a directory of its own and checks what is there, what is not, and that nothing was
 * written beside it. The whiteout tests mount a real overlay of two unpacked layers, in
 * a mount namespace of the test's process, so the mount goes away with it. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <grp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "layer.h"
#include "testutil.h"

static char dir[256];

static void setup(void) {
        test_dir_make(dir, sizeof(dir), "check_layer");
}

static void teardown(void) {
        test_dir_remove(dir);
}

/* One tar entry: type 'f' file (data), 'd' directory, 'l' symlink (to), 'h' hard link
 * (to), 'c' character device, 'p' FIFO. */
struct tent {
        const char *name;
        char type;
        const char *data;
        int mode;
        int uid, gid;
};

/* Writes the entries as a tar (compressed with filter: 0, 'g' gzip or 'z' zstd) to
 * DIR/file and returns its path (static). */
static const char *write_tar(const char *file, const struct tent *t, size_t n, char filter) {
        static char path[512];
        struct archive *a = archive_write_new();
        size_t i;

        snprintf(path, sizeof(path), "%s/%s", dir, file);
        ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        if (filter == 'g')
                ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        if (filter == 'z')
                ck_assert_int_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        for (i = 0; i < n; i++) {
                struct archive_entry *e = archive_entry_new();
                size_t len = t[i].data && t[i].type == 'f' ? strlen(t[i].data) : 0;

                archive_entry_set_pathname(e, t[i].name);
                archive_entry_set_perm(e, t[i].mode ? (mode_t)t[i].mode : 0644);
                archive_entry_set_uid(e, t[i].uid);
                archive_entry_set_gid(e, t[i].gid);
                archive_entry_set_mtime(e, 1000000000, 0);
                switch (t[i].type) {
                case 'f':
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_size(e, (la_int64_t)len);
                        break;
                case 'd':
                        archive_entry_set_filetype(e, AE_IFDIR);
                        if (!t[i].mode)
                                archive_entry_set_perm(e, 0755);
                        break;
                case 'l':
                        archive_entry_set_filetype(e, AE_IFLNK);
                        archive_entry_set_symlink(e, t[i].data);
                        break;
                case 'h':
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_hardlink(e, t[i].data);
                        break;
                case 'c':
                        archive_entry_set_filetype(e, AE_IFCHR);
                        archive_entry_set_rdev(e, makedev(1, 3));
                        break;
                case 'p':
                        archive_entry_set_filetype(e, AE_IFIFO);
                        break;
                }
                ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
                if (len)
                        ck_assert_int_eq(archive_write_data(a, t[i].data, len), (la_ssize_t)len);
                archive_entry_free(e);
        }
        ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        return path;
}

static const struct layer_opts root_opts = {.max_bytes = 1 << 20,
                                            .max_entries = 1000,
                                            .whiteouts = LAYER_WHITEOUT_CHARDEV,
                                            .keep_owners = 1};

/* Unpacks tar into DIR/sub (made here). Returns layer_unpack's result. */
static int unpack_into(const char *tar, const char *sub, const struct layer_opts *o,
                       struct layer_result *res, char *err, size_t errlen) {
        char path[512];
        int fd, dfd, r;

        snprintf(path, sizeof(path), "%s/%s", dir, sub);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        fd = open(tar, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        ck_assert_int_ge(fd, 0);
        err[0] = '\0';
        r = layer_unpack(fd, dfd, o, res, err, errlen);
        close(fd);
        close(dfd);
        return r;
}

/* Entries in DIR/sub (not counting . and ..). */
static int count_in(const char *sub) {
        char path[512];
        int fd, n = 0;
        DIR *d;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/%s", dir, sub);
        fd = open(path, O_RDONLY | O_DIRECTORY);
        ck_assert_int_ge(fd, 0);
        d = fdopendir(fd);
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        return n;
}

static int exists(const char *rel, struct stat *st) {
        char path[1024];
        struct stat s;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        return lstat(path, st ? st : &s) == 0;
}

static void read_rel(const char *rel, char *buf, size_t len) {
        char path[1024];
        int fd;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, len - 1);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        close(fd);
}

/* A refused layer: r, err names the entry, and the directory is left empty. */
static void assert_refused(const char *tar, int want_r, const char *want_name) {
        struct layer_result res;
        char err[512];
        int r = unpack_into(tar, "l", &root_opts, &res, err, sizeof(err));

        ck_assert_int_eq(r, want_r);
        ck_assert_msg(strstr(err, want_name) != NULL, "err \"%s\" names no \"%s\"", err, want_name);
        ck_assert_int_eq(count_in("l"), 0);
}

static void check_plain(char filter) {
        static const struct tent t[] = {
                {"./", 'd', NULL, 0755, 0, 0},
                {"./etc/", 'd', NULL, 0755, 0, 0},
                {"./etc/hello", 'f', "hello world\n", 0644, 1234, 5678},
                {"./bin/su", 'f', "#!/bin/sh\n", 04755, 0, 0},
                {"./bin/link", 'h', "./etc/hello", 0, 0, 0},
                {"./bin/sh", 'l', "/bin/busybox", 0777, 0, 0},
                {"./ro/", 'd', NULL, 0555, 0, 0},
                {"./ro/inside", 'f', "x", 0444, 0, 0},
        };
        const char *tar = write_tar("l.tar", t, sizeof(t) / sizeof(t[0]), filter);
        char err[512], buf[64], target[64], want[DIGEST_STR_BYTES], lpath[512];
        struct layer_result res;
        struct stat st, st2;
        int fd;

        ck_assert_msg(unpack_into(tar, "l", &root_opts, &res, err, sizeof(err)) == 0, "%s", err);
        read_rel("l/etc/hello", buf, sizeof(buf));
        ck_assert_str_eq(buf, "hello world\n");
        ck_assert(exists("l/etc/hello", &st));
        ck_assert_uint_eq(st.st_uid, 1234);
        ck_assert_uint_eq(st.st_gid, 5678);
        ck_assert_int_eq(st.st_mtime, 1000000000);
        ck_assert(exists("l/bin/su", &st));
        ck_assert_uint_eq(st.st_mode & 07777, 04755);
        ck_assert(exists("l/bin/link", &st2));
        ck_assert(exists("l/etc/hello", &st));
        ck_assert_uint_eq(st.st_ino, st2.st_ino);
        ck_assert(exists("l/bin/sh", &st));
        ck_assert(S_ISLNK(st.st_mode));
        snprintf(lpath, sizeof(lpath), "%s/l/bin/sh", dir);
        target[readlink(lpath, target, sizeof(target) - 1)] = '\0';
        ck_assert_str_eq(target, "/bin/busybox");
        ck_assert(exists("l/ro", &st));
        ck_assert_uint_eq(st.st_mode & 07777, 0555);
        ck_assert(exists("l/ro/inside", NULL));
        ck_assert_uint_eq(res.entries, 8);
        ck_assert_uint_eq(res.bytes, 12 + 10 + 1);
        ck_assert_uint_eq(res.skipped, 0);
        /* The blob digest is the file's; for an uncompressed layer the diff_id too. */
        fd = open(tar, O_RDONLY);
        ck_assert_int_eq(digest_fd(fd, want, NULL), 0);
        close(fd);
        ck_assert_str_eq(res.blob_digest, want);
        if (!filter)
                ck_assert_str_eq(res.diff_id, want);
        else
                ck_assert_str_ne(res.diff_id, want);
}

START_TEST(plain_tar) {
        check_plain(0);
}
END_TEST

START_TEST(gzip_and_zstd_give_the_same_diff_id) {
        static const struct tent t[] = {{"a", 'f', "same content", 0644, 0, 0}};
        struct layer_result r0, rg, rz;
        char err[512];

        ck_assert_int_eq(unpack_into(write_tar("0.tar", t, 1, 0), "0", &root_opts, &r0, err, 512),
                         0);
        ck_assert_int_eq(unpack_into(write_tar("g.tar", t, 1, 'g'), "g", &root_opts, &rg, err, 512),
                         0);
        ck_assert_int_eq(unpack_into(write_tar("z.tar", t, 1, 'z'), "z", &root_opts, &rz, err, 512),
                         0);
        ck_assert_str_eq(r0.diff_id, rg.diff_id);
        ck_assert_str_eq(r0.diff_id, rz.diff_id);
        ck_assert_str_ne(rg.blob_digest, rz.blob_digest);
        ck_assert(exists("g/a", NULL) && exists("z/a", NULL));
        check_plain('g');
}
END_TEST

START_TEST(dotdot_is_refused) {
        static const struct tent t[] = {{"ok", 'f', "x", 0644, 0, 0},
                                        {"a/../../escaped", 'f', "x", 0644, 0, 0}};

        assert_refused(write_tar("l.tar", t, 2, 0), -EINVAL, "a/../../escaped");
        ck_assert(!exists("escaped", NULL));
}
END_TEST

START_TEST(absolute_name_is_refused) {
        static const struct tent t[] = {{"ok", 'f', "x", 0644, 0, 0},
                                        {"/tmp/check_layer_absolute", 'f', "x", 0644, 0, 0}};

        assert_refused(write_tar("l.tar", t, 2, 0), -EINVAL, "/tmp/check_layer_absolute");
        ck_assert_int_eq(access("/tmp/check_layer_absolute", F_OK), -1);
}
END_TEST

START_TEST(file_through_a_symlink_is_refused) {
        char out[512];
        struct tent t[] = {{"evil", 'l', NULL, 0777, 0, 0}, {"evil/planted", 'f', "x", 0644, 0, 0}};
        struct tent rel[] = {{"up", 'l', "../outside", 0777, 0, 0},
                             {"up/planted", 'f', "x", 0644, 0, 0}};

        snprintf(out, sizeof(out), "%s/outside", dir);
        ck_assert_int_eq(mkdir(out, 0700), 0);
        t[0].data = out; /* absolute, out of the layer */
        assert_refused(write_tar("l.tar", t, 2, 0), -EINVAL, "evil/planted");
        ck_assert_int_eq(count_in("outside"), 0);
        ck_assert_int_eq(rmdir(strcat(strcpy(out, dir), "/l")), 0);
        assert_refused(write_tar("r.tar", rel, 2, 0), -EINVAL, "up/planted");
        ck_assert_int_eq(count_in("outside"), 0);
}
END_TEST

START_TEST(hard_links_out_of_the_layer_are_refused) {
        static const struct tent passwd[] = {{"pw", 'h', "/etc/passwd", 0, 0, 0}};
        static const struct tent up[] = {{"a/", 'd', NULL, 0, 0, 0},
                                         {"a/pw", 'h', "../../etc/passwd", 0, 0, 0}};
        static const struct tent later[] = {{"first", 'h', "second", 0, 0, 0},
                                            {"second", 'f', "x", 0644, 0, 0}};
        static const struct tent via[] = {{"s", 'l', "/etc", 0777, 0, 0},
                                          {"pw", 'h', "s/passwd", 0, 0, 0}};
        struct stat st;

        ck_assert_int_eq(stat("/etc/passwd", &st), 0);
        assert_refused(write_tar("1.tar", passwd, 1, 0), -EINVAL, "/etc/passwd");
        ck_assert_int_eq(rmdir(strcat(strcpy((char[512]){0}, dir), "/l")), 0);
        assert_refused(write_tar("2.tar", up, 2, 0), -EINVAL, "a/pw");
        ck_assert_int_eq(rmdir(strcat(strcpy((char[512]){0}, dir), "/l")), 0);
        assert_refused(write_tar("3.tar", later, 2, 0), -EINVAL, "first");
        ck_assert_int_eq(rmdir(strcat(strcpy((char[512]){0}, dir), "/l")), 0);
        assert_refused(write_tar("4.tar", via, 2, 0), -EINVAL, "s/passwd");
        /* /etc/passwd gained no link. */
        ck_assert_int_eq(stat("/etc/passwd", &st), 0);
        ck_assert_uint_eq(st.st_nlink, 1);
}
END_TEST

START_TEST(device_nodes_and_fifos_are_skipped) {
        static const struct tent t[] = {{"dev/", 'd', NULL, 0, 0, 0},
                                        {"dev/null", 'c', NULL, 0666, 0, 0},
                                        {"dev/fifo", 'p', NULL, 0666, 0, 0},
                                        {"dev/file", 'f', "x", 0644, 0, 0}};
        struct layer_result res;
        char err[512];

        ck_assert_int_eq(unpack_into(write_tar("l.tar", t, 4, 0), "l", &root_opts, &res, err, 512),
                         0);
        ck_assert_uint_eq(res.skipped, 2);
        ck_assert_str_eq(res.first_skipped, "dev/null");
        ck_assert(!exists("l/dev/null", NULL));
        ck_assert(!exists("l/dev/fifo", NULL));
        ck_assert(exists("l/dev/file", NULL));
}
END_TEST

START_TEST(tar_bomb_is_refused_and_removed) {
        static char big[300001];
        struct tent t[] = {{"a", 'f', "small", 0644, 0, 0}, {"b", 'f', big, 0644, 0, 0}};
        struct tent many[60];
        struct layer_opts o = root_opts;
        char names[60][16];
        int i;

        memset(big, 'x', sizeof(big) - 1);
        o.max_bytes = 200000;
        {
                struct layer_result res;
                char err[512];
                ck_assert_int_eq(
                        unpack_into(write_tar("big.tar", t, 2, 'g'), "l", &o, &res, err, 512),
                        -EFBIG);
                ck_assert_msg(strstr(err, "\"b\"") && strstr(err, "200000"), "%s", err);
                ck_assert_int_eq(count_in("l"), 0);
        }
        for (i = 0; i < 60; i++) {
                snprintf(names[i], sizeof(names[i]), "f%d", i);
                many[i] = (struct tent){names[i], 'f', "x", 0644, 0, 0};
        }
        o = root_opts;
        o.max_entries = 50;
        {
                struct layer_result res;
                char err[512];
                ck_assert_int_eq(
                        unpack_into(write_tar("many.tar", many, 60, 0), "m", &o, &res, err, 512),
                        -EDQUOT);
                ck_assert_msg(strstr(err, "f50") && strstr(err, "50 entries"), "%s", err);
                ck_assert_int_eq(count_in("m"), 0);
        }
}
END_TEST

START_TEST(names_deeper_than_the_bound_are_refused) {
        static char deep[2 * (LAYER_MAX_DEPTH + 1) + 2];
        struct tent ok[] = {{deep, 'f', "x", 0644, 0, 0}};
        struct layer_result res;
        char err[512];
        int i;

        /* "a/a/.../a": LAYER_MAX_DEPTH components pass; one more is refused. */
        deep[0] = 'a';
        for (i = 1; i < LAYER_MAX_DEPTH; i++)
                deep[2 * i - 1] = '/', deep[2 * i] = 'a';
        ck_assert_uint_eq(strlen(deep), 2 * LAYER_MAX_DEPTH - 1);
        ck_assert_msg(
                unpack_into(write_tar("ok.tar", ok, 1, 0), "ok", &root_opts, &res, err, 512) == 0,
                "%s", err);
        strcat(deep, "/b");
        ck_assert_int_eq(
                unpack_into(write_tar("deep.tar", ok, 1, 0), "l", &root_opts, &res, err, 512),
                -EINVAL);
        ck_assert_msg(strstr(err, "deeper than 256") != NULL, "%s", err);
        ck_assert_int_eq(count_in("l"), 0);
}
END_TEST

/* A decompression bomb: a small tar, then megabytes of zeros that gzip makes tiny. */
START_TEST(padding_past_the_stream_bound_is_refused) {
        static const struct tent t[] = {{"a", 'f', "x", 0644, 0, 0}};
        struct layer_opts o = root_opts;
        struct layer_result res;
        char err[512];

        write_tar("l.tar", t, 1, 0);
        ck_assert_int_eq(system(strcat(strcat(strcpy((char[1024]){0}, "cd "), dir),
                                       " && head -c 4000000 /dev/zero >> l.tar && gzip l.tar")),
                         0);
        o.max_entries = 2;
        o.max_bytes = 1000; /* the bound: 1000 + 4 * LAYER_HEADER_ALLOWANCE bytes */
        ck_assert_int_eq(unpack_into(strcat(strcpy((char[512]){0}, dir), "/l.tar.gz"), "l", &o,
                                     &res, err, 512),
                         -EFBIG);
        ck_assert_msg(strstr(err, "larger than 263144") != NULL, "%s", err);
        ck_assert_int_eq(count_in("l"), 0);
        /* Within a bound that allows it, the same layer unpacks. */
        o.max_bytes = 8000000;
        ck_assert_msg(unpack_into(strcat(strcpy((char[512]){0}, dir), "/l.tar.gz"), "m", &o, &res,
                                  err, 512) == 0,
                      "%s", err);
        ck_assert_uint_eq(res.entries, 1);
}
END_TEST

START_TEST(size_that_lies_is_refused) {
        static char data[100001];
        struct tent t[] = {{"first", 'f', "ok", 0644, 0, 0}, {"liar", 'f', data, 0644, 0, 0}};
        const char *tar;

        memset(data, 'y', sizeof(data) - 1);
        tar = write_tar("l.tar", t, 2, 0);
        /* The header of "liar" says 100000 bytes; the stream ends after 2000 of them. */
        ck_assert_int_eq(truncate(tar, 512 * 4 + 2000), 0);
        assert_refused(tar, -EINVAL, "liar");
}
END_TEST

static void write_proc(const char *file, const char *text) {
        int fd = open(file, O_WRONLY | O_CLOEXEC);

        ck_assert_msg(fd >= 0, "%s: %s", file, strerror(errno));
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

/* As a rootless daemon and its sandbox: this process becomes nobody (no capability
 * left) before it unpacks, and mounts the overlay in a user namespace of its own. */
#define NOBODY 65534
static void become_nobody(void) {
        ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(NOBODY, NOBODY, NOBODY), 0);
        ck_assert_int_eq(setresuid(NOBODY, NOBODY, NOBODY), 0);
        /* Dumpable again, so that /proc/self stays this user's (for the maps). */
        ck_assert_int_eq(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
}

static void enter_userns(void) {
        ck_assert_int_eq(unshare(CLONE_NEWUSER | CLONE_NEWNS), 0);
        write_proc("/proc/self/setgroups", "deny");
        write_proc("/proc/self/uid_map", "0 65534 1");
        write_proc("/proc/self/gid_map", "0 65534 1");
}

/* Unpacks two layers with whiteouts in mode w, mounts an overlay of them (options
 * extra) and checks what it shows; rootless: as nobody, see become_nobody. */
static void check_overlay(enum layer_whiteouts w, const char *extra, int rootless) {
        static const struct tent lower[] = {
                {"a/", 'd', NULL, 0755, 0, 0},       {"a/keep", 'f', "k", 0644, 0, 0},
                {"a/gone", 'f', "g", 0644, 0, 0},    {"d/", 'd', NULL, 0755, 0, 0},
                {"d/old", 'f', "o", 0644, 0, 0},     {"d/sub/", 'd', NULL, 0755, 0, 0},
                {"d/sub/x", 'f', "x", 0644, 0, 0},   {"gonedir/", 'd', NULL, 0755, 0, 0},
                {"gonedir/y", 'f', "y", 0644, 0, 0},
        };
        static const struct tent upper[] = {
                {"a/", 'd', NULL, 0755, 0, 0},   {"a/.wh.gone", 'f', "", 0644, 0, 0},
                {"d/", 'd', NULL, 0755, 0, 0},   {"d/.wh..wh..opq", 'f', "", 0644, 0, 0},
                {"d/new", 'f', "n", 0644, 0, 0}, {".wh.gonedir", 'f', "", 0644, 0, 0},
        };
        struct layer_opts o = root_opts;
        struct layer_result res;
        char err[512], opts[1024], mnt[512];

        o.whiteouts = w;
        o.keep_owners = w == LAYER_WHITEOUT_CHARDEV;
        if (rootless)
                become_nobody();
        ck_assert_msg(unpack_into(write_tar("1.tar", lower, 9, 'g'), "l1", &o, &res, err, 512) == 0,
                      "%s", err);
        ck_assert_msg(unpack_into(write_tar("2.tar", upper, 6, 'z'), "l2", &o, &res, err, 512) == 0,
                      "%s", err);
        if (rootless)
                enter_userns();
        else
                ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
        ck_assert_int_eq(mkdir(mnt, 0700), 0);
        snprintf(opts, sizeof(opts), "lowerdir=%s/l2:%s/l1%s", dir, dir, extra);
        ck_assert_msg(mount("overlay", mnt, "overlay", MS_RDONLY, opts) == 0, "mount %s: %s", opts,
                      strerror(errno));
        ck_assert(exists("mnt/a/keep", NULL));
        ck_assert(!exists("mnt/a/gone", NULL));
        ck_assert(exists("mnt/d/new", NULL));
        ck_assert(!exists("mnt/d/old", NULL));
        ck_assert(!exists("mnt/d/sub", NULL));
        ck_assert(!exists("mnt/gonedir", NULL));
        ck_assert_int_eq(count_in("mnt/d"), 1);
        ck_assert_int_eq(count_in("mnt/a"), 1);
        /* The whiteouts themselves are no names the overlay shows. */
        ck_assert_int_eq(count_in("mnt"), 2);
        ck_assert_int_eq(umount(mnt), 0);
}

START_TEST(whiteouts_as_devices_through_overlay) {
        struct stat st;

        check_overlay(LAYER_WHITEOUT_CHARDEV, "", 0);
        ck_assert(exists("l2/a/gone", &st));
        ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        ck_assert_int_eq(getxattr(strcat(strcpy((char[512]){0}, dir), "/l2/d"),
                                  "trusted.overlay.opaque", (char[4]){0}, 4),
                         1);
}
END_TEST

START_TEST(whiteouts_as_user_xattrs_through_overlay) {
        char v[4] = {0};
        struct stat st;

        check_overlay(LAYER_WHITEOUT_USERXATTR, ",userxattr", 0);
        ck_assert(exists("l2/a/gone", &st));
        ck_assert(S_ISREG(st.st_mode) && st.st_size == 0);
        ck_assert_int_eq(
                getxattr(strcat(strcpy((char[512]){0}, dir), "/l2/a"), "user.overlay.opaque", v, 3),
                1);
        ck_assert_str_eq(v, "x");
        ck_assert_int_eq(
                getxattr(strcat(strcpy((char[512]){0}, dir), "/l2/d"), "user.overlay.opaque", v, 3),
                1);
        ck_assert_str_eq(v, "y");
}
END_TEST

START_TEST(rootless_unpack_and_overlay_in_a_user_namespace) {
        char v[4] = {0};
        struct stat st;

        check_overlay(LAYER_WHITEOUT_USERXATTR, ",userxattr", 1);
        ck_assert(exists("l2/a/gone", &st));
        ck_assert_uint_eq(st.st_uid, 0); /* nobody's, seen from its user namespace */
        ck_assert_int_eq(
                getxattr(strcat(strcpy((char[512]){0}, dir), "/l2/d"), "user.overlay.opaque", v, 3),
                1);
        ck_assert_str_eq(v, "y");
}
END_TEST

START_TEST(rootless_does_not_chown) {
        static const struct tent t[] = {{"f", 'f', "x", 0644, 4321, 4321}};
        struct layer_opts o = root_opts;
        struct layer_result res;
        char err[512];
        struct stat st;

        o.keep_owners = 0;
        ck_assert_int_eq(unpack_into(write_tar("l.tar", t, 1, 0), "l", &o, &res, err, 512), 0);
        ck_assert(exists("l/f", &st));
        ck_assert_uint_eq(st.st_uid, getuid());
}
END_TEST

/* max_id (a namespace of subordinate ids, layerns.h): ids up to it are given, a uid or
 * gid above it stays the unpacking user's, each on its own. */
START_TEST(ids_above_max_id_stay_the_unpackers) {
        static const struct tent t[] = {{"in", 'f', "x", 0644, 100, 101},
                                        {"at", 'f', "x", 0644, 500, 500},
                                        {"uid", 'f', "x", 0644, 501, 7},
                                        {"gid", 'd', NULL, 0755, 9, 70000}};
        struct layer_opts o = root_opts;
        struct layer_result res;
        char err[512];
        struct stat st;

        o.max_id = 500;
        ck_assert_int_eq(unpack_into(write_tar("l.tar", t, 4, 0), "l", &o, &res, err, 512), 0);
        ck_assert(exists("l/in", &st));
        ck_assert_uint_eq(st.st_uid, 100);
        ck_assert_uint_eq(st.st_gid, 101);
        ck_assert(exists("l/at", &st));
        ck_assert_uint_eq(st.st_uid, 500);
        ck_assert_uint_eq(st.st_gid, 500);
        ck_assert(exists("l/uid", &st));
        ck_assert_uint_eq(st.st_uid, getuid());
        ck_assert_uint_eq(st.st_gid, 7);
        ck_assert(exists("l/gid", &st));
        ck_assert_uint_eq(st.st_uid, 9);
        ck_assert_uint_eq(st.st_gid, getgid());
}
END_TEST

START_TEST(not_a_tar_is_refused) {
        char path[512];
        struct layer_result res;
        char err[512];
        int fd;

        snprintf(path, sizeof(path), "%s/junk", dir);
        fd = open(path, O_WRONLY | O_CREAT, 0600);
        ck_assert_int_eq(write(fd, "this is no tar at all, not even close...", 40), 40);
        close(fd);
        ck_assert_int_eq(unpack_into(path, "l", &root_opts, &res, err, 512), -EINVAL);
        ck_assert_msg(strstr(err, "layer") != NULL, "%s", err);
        ck_assert_int_eq(count_in("l"), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("layer");

        SBX_ADD_TEST_CASE(s, plain_tar, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, gzip_and_zstd_give_the_same_diff_id, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, dotdot_is_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, absolute_name_is_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, file_through_a_symlink_is_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, hard_links_out_of_the_layer_are_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, device_nodes_and_fifos_are_skipped, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, tar_bomb_is_refused_and_removed, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, size_that_lies_is_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, names_deeper_than_the_bound_are_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, padding_past_the_stream_bound_is_refused, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, whiteouts_as_devices_through_overlay, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, whiteouts_as_user_xattrs_through_overlay, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, rootless_unpack_and_overlay_in_a_user_namespace, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, rootless_does_not_chown, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, ids_above_max_id_stay_the_unpackers, 30, setup, teardown);
        SBX_ADD_TEST_CASE(s, not_a_tar_is_refused, 30, setup, teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
