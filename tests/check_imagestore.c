/* check_imagestore.c: the Check suite of daemon/imagestore.c and daemon/imageimport.c.
 *
 * The images are real: tests/mkimage.sh makes them once per run with umoci and skopeo
 * from Debian's static busybox (an OCI layout with four layers, a whiteout, an opaque
 * directory, a hard link and a setuid file; an arm64 image; a multi-architecture
 * index; an oci-archive and a docker-archive of it). Each test has a store of its own;
 * the tests that look through an image mount an overlay of its layers in a mount
 * namespace of the test's process, so the mount goes with it even when it fails. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "imageimport.h"
#include "imagestore.h"
#include "servers.h"
#include "testutil.h"

/* Run from the source tree, as make check runs every test. */
#define MKIMAGE "tests/mkimage.sh"

static char dir[256];  /* this test's */
static char imgs[256]; /* the images, made once */
static pid_t imgs_maker;

static void remove_imgs(void) {
        if (getpid() == imgs_maker)
                test_dir_remove(imgs);
}


static void setup(void) {
        if (!imgs[0]) {
                test_dir_make(imgs, sizeof(imgs), "check_imagestore_images");
                imgs_maker = getpid();
                atexit(remove_imgs);
                ck_assert_msg(srv_sh(MKIMAGE " %s >%s/log 2>&1 || { cat %s/log >&2; exit 1; }", imgs,
                                 imgs, imgs) == 0,
                              "tests/mkimage.sh failed (it needs umoci, skopeo and busybox-static: "
                              "make test-pkgs); its output is above");
        }
        test_dir_make(dir, sizeof(dir), "check_imagestore");
}

static void teardown(void) {
        test_dir_remove(dir);
}

static const struct imagestore_opts opts = {.max_image_bytes = 64u << 20,
                                            .max_layer_entries = 100000,
                                            .whiteouts = LAYER_WHITEOUT_CHARDEV,
                                            .keep_owners = 1};

/* Opens the store DIR/store (DIR/NAME with open_store_at). */
static struct imagestore *open_store_at(const char *name, const struct imagestore_opts *o) {
        char root[512], err[512] = "";
        struct imagestore *s = NULL;

        snprintf(root, sizeof(root), "%s/%s", dir, name);
        ck_assert_msg(imagestore_open(root, o, &s, err, sizeof(err)) == 0, "%s", err);
        return s;
}

static struct imagestore *open_store_with(const struct imagestore_opts *o) {
        return open_store_at("store", o);
}

static struct imagestore *open_store(void) {
        return open_store_with(&opts);
}

/* imageimport_oci from the layout at path (relative to the images when not absolute). */
static int import_layout(struct imagestore *s, const char *path, const char *tag, const char *ref,
                         char *manifest, char *err) {
        char p[512];
        int fd, r;

        snprintf(p, sizeof(p), "%s/%s", path[0] == '/' ? "" : imgs, path);
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        err[0] = '\0';
        r = imageimport_oci(s, fd, tag, ref, manifest, err, 512);
        close(fd);
        return r;
}

static int import_archive(struct imagestore *s, const char *file, int docker, const char *tag,
                          const char *ref, char *manifest, char *err) {
        char p[512];
        int fd, r;

        snprintf(p, sizeof(p), "%s/%s", imgs, file);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        r = docker ? imageimport_docker_archive(s, fd, tag, ref, manifest, err, 512)
                   : imageimport_oci_archive(s, fd, tag, ref, manifest, err, 512);
        close(fd);
        return r;
}

/* Entries of DIR/rel. */
static int count_in(const char *rel) {
        char p[512];
        struct dirent *de;
        DIR *d;
        int n = 0;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        d = opendir(p);
        ck_assert_msg(d != NULL, "%s: %s", p, strerror(errno));
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        return n;
}

/* Mounts an overlay of the image's layers read-only at DIR/mnt (in a mount namespace of
 * this test process). */
static void mount_image(struct imagestore *s, const char *name) {
        struct imagestore_image img;
        char opts_s[4096] = "lowerdir=", path[512], mnt[512];
        size_t i;

        ck_assert_int_eq(imagestore_find(s, name, &img), 0);
        for (i = img.nlayers; i-- > 0;) {
                ck_assert_int_eq(imagestore_layer_path(s, img.layers[i], path, sizeof(path)), 0);
                strcat(opts_s, path);
                if (i)
                        strcat(opts_s, ":");
        }
        imagestore_image_free(&img);
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
        ck_assert_int_eq(mkdir(mnt, 0700), 0);
        ck_assert_msg(mount("overlay", mnt, "overlay", MS_RDONLY, opts_s) == 0, "mount: %s",
                      strerror(errno));
}

static int exists(const char *rel, struct stat *st) {
        char p[1024];
        struct stat s;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        return lstat(p, st ? st : &s) == 0;
}

static void assert_content(const char *rel, const char *want) {
        char p[1024], buf[256];
        int fd;
        ssize_t n;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        fd = open(p, O_RDONLY);
        ck_assert_msg(fd >= 0, "%s: %s", rel, strerror(errno));
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        ck_assert_str_eq(buf, want);
}

START_TEST(oci_layout_imported_and_seen_through_overlay) {
        struct imagestore *s = open_store();
        struct imageconfig c;
        struct imagestore_image img;
        char m[DIGEST_STR_BYTES], err[512];
        struct stat st;

        ck_assert_msg(import_layout(s, "oci", "img", "test/img:1", m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_find(s, "test/img:1", &img), 0);
        ck_assert_str_eq(img.manifest, m);
        ck_assert_uint_eq(img.nlayers, 4);
        ck_assert_uint_eq(img.nrefs, 1);
        ck_assert_uint_gt(img.size_bytes, 1000000); /* busybox */
        ck_assert_uint_ge(img.size_bytes, img.data_bytes);
        imagestore_image_free(&img);
        ck_assert_int_eq(imagestore_inspect(s, m, &c), 0);
        ck_assert_uint_eq(c.nenv, 1);
        ck_assert_str_eq(c.env[0], "GREETING=hi");
        ck_assert_str_eq(c.working_dir, "/data");
        ck_assert_str_eq(c.user, "1000:1000");
        ck_assert_uint_eq(c.nentrypoint, 1);
        ck_assert_str_eq(c.entrypoint[0], "/bin/sh");
        ck_assert_uint_eq(c.ncmd, 2);
        ck_assert_str_eq(c.cmd[1], "echo hi");
        ck_assert_str_eq(c.arch, "amd64");
        imageconfig_free(&c);
        /* The store is its owner's alone. */
        ck_assert(exists("store", &st));
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(count_in("store/tmp"), 0);
        mount_image(s, "test/img:1");
        ck_assert(exists("mnt", &st));
        ck_assert_uint_eq(st.st_mode & 07777, 0755); /* "/" as Docker makes it */
        ck_assert(exists("mnt/bin/busybox", &st));
        ck_assert_uint_eq(st.st_mode & 07777, 04755); /* kept, inside the store only */
        ck_assert(exists("mnt/bin/sh", &st) && S_ISLNK(st.st_mode));
        assert_content("mnt/etc/greeting", "second\n");
        /* Layer 4 rewrote the file of both names (one inode in umoci's bundle). */
        assert_content("mnt/etc/greeting.link", "second\n");
        assert_content("mnt/etc/greeting.new", "changed\n");
        ck_assert(!exists("mnt/gone", NULL));     /* whiteout of a directory */
        ck_assert(!exists("mnt/data/old", NULL)); /* beneath the opaque directory */
        assert_content("mnt/data/fresh", "fresh\n");
        ck_assert_int_eq(count_in("mnt/data"), 1);
        /* The image runs. */
        ck_assert_int_eq(
                srv_sh("chroot %s/mnt /bin/sh -c 'test \"$(/bin/busybox cat /etc/greeting)\" = second'",
                   dir),
                0);
        ck_assert_int_eq(umount2(strcat(strcpy((char[512]){0}, dir), "/mnt"), MNT_DETACH), 0);
        imagestore_close(s);
}
END_TEST

START_TEST(hard_link_kept_within_its_layer) {
        struct imagestore *s = open_store();
        struct imagestore_image img;
        char m[DIGEST_STR_BYTES], err[512], a[600], b[600], path[512];
        struct stat sa, sb;

        ck_assert_msg(import_layout(s, "oci", "img", NULL, m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_find(s, m, &img), 0);
        ck_assert_int_eq(imagestore_layer_path(s, img.layers[0], path, sizeof(path)), 0);
        snprintf(a, sizeof(a), "%s/etc/greeting", path);
        snprintf(b, sizeof(b), "%s/etc/greeting.link", path);
        ck_assert_int_eq(lstat(a, &sa), 0);
        ck_assert_int_eq(lstat(b, &sb), 0);
        ck_assert_uint_eq(sa.st_ino, sb.st_ino);
        ck_assert_uint_eq(sa.st_nlink, 2);
        imagestore_image_free(&img);
        imagestore_close(s);
}
END_TEST

START_TEST(archives_share_the_layers) {
        struct imagestore *s = open_store();
        struct imagestore_image a, b;
        char m1[DIGEST_STR_BYTES], m2[DIGEST_STR_BYTES], m3[DIGEST_STR_BYTES], err[512];
        uint64_t one;
        size_t i;

        ck_assert_msg(import_layout(s, "oci", "img", "layout", m1, err) == 0, "%s", err);
        one = imagestore_usage(s);
        ck_assert_msg(import_archive(s, "img.oci.tar", 0, NULL, "ociarchive", m2, err) == 0, "%s",
                      err);
        ck_assert_str_eq(m1, m2); /* the same manifest: the same image, one more ref */
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, "docker.io/library/busybox:test",
                                     "docker", m3, err) == 0,
                      "%s", err);
        ck_assert_str_ne(m1, m3);
        ck_assert_int_eq(imagestore_find(s, "ociarchive", &a), 0);
        ck_assert_int_eq(imagestore_find(s, "docker", &b), 0);
        ck_assert_uint_eq(a.nrefs, 2);
        ck_assert_uint_eq(a.nlayers, b.nlayers);
        for (i = 0; i < a.nlayers; i++)
                ck_assert_str_eq(a.layers[i], b.layers[i]);
        imagestore_image_free(&a);
        imagestore_image_free(&b);
        /* Layers unpacked once: four directories, and the store grew by two small blobs. */
        ck_assert_int_eq(count_in("store/layers"), 4);
        ck_assert_uint_lt(imagestore_usage(s), one + 8192);
        ck_assert_int_eq(count_in("store/tmp"), 0);
        ck_assert_int_eq(import_archive(s, "img.docker.tar", 1, "nosuch:tag", NULL, m3, err),
                         -ENOENT);
        ck_assert_msg(strstr(err, "nosuch:tag") != NULL, "%s", err);
        ck_assert_int_eq(count_in("store/tmp"), 0);
        imagestore_close(s);
}
END_TEST

static void assert_nothing_stored(void) {
        ck_assert_int_eq(count_in("store/layers"), 0);
        ck_assert_int_eq(count_in("store/images"), 0);
        ck_assert_int_eq(count_in("store/tmp"), 0);
}

/* DIR/linked.tar: the docker-archive with manifest.json naming each layer through the
 * symlink skopeo left for it (ID/layer.tar -> ../HEX.tar, as docker save links a layer
 * it holds twice), the first one replaced by evil/layer.tar -> target when target is
 * not NULL. */
static void relink_docker_archive(const char *target) {
        ck_assert_int_eq(
                srv_sh("cd %s && rm -rf x linked.tar && mkdir x && tar -C x -xf %s/img.docker.tar && "
                   "cd x && python3 -c '\n"
                   "import json, os\n"
                   "links = {os.readlink(d + \"/layer.tar\")[3:]: d + \"/layer.tar\"\n"
                   "         for d in os.listdir(\".\") if os.path.islink(d + \"/layer.tar\")}\n"
                   "m = json.load(open(\"manifest.json\"))\n"
                   "m[0][\"Layers\"] = [links[l] for l in m[0][\"Layers\"]]\n"
                   "json.dump(m, open(\"manifest.json\", \"w\"))' && "
                   "tar -cf ../linked.tar .",
                   dir, imgs),
                0);
        if (target)
                ck_assert_int_eq(
                        srv_sh("cd %s/x && mkdir evil && ln -s %s evil/layer.tar && python3 -c '\n"
                           "import json\n"
                           "m = json.load(open(\"manifest.json\"))\n"
                           "m[0][\"Layers\"][0] = \"evil/layer.tar\"\n"
                           "json.dump(m, open(\"manifest.json\", \"w\"))' && "
                           "tar -cf ../linked.tar .",
                           dir, target),
                        0);
}

START_TEST(docker_archive_links_stay_inside_it) {
        struct imagestore *s = open_store();
        char m[DIGEST_STR_BYTES], d[DIGEST_STR_BYTES], err[512], path[512];
        int fd;

        snprintf(path, sizeof(path), "%s/linked.tar", dir);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, NULL, d, err) == 0, "%s", err);
        relink_docker_archive(NULL);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(imageimport_docker_archive(s, fd, NULL, "linked", m, err, sizeof(err)) == 0,
                      "%s", err);
        close(fd);
        ck_assert_str_eq(m, d); /* the same layers, so the same manifest */
        ck_assert_int_eq(imagestore_remove(s, m, err, sizeof(err)), 0);
        /* A link out of the archive resolves inside it, where there is no such file. */
        relink_docker_archive("/etc/passwd");
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(imageimport_docker_archive(s, fd, NULL, NULL, m, err, sizeof(err)),
                         -ENOENT);
        close(fd);
        ck_assert_msg(strstr(err, "evil/layer.tar") != NULL, "%s", err);
        relink_docker_archive("../../../../../../../../etc/passwd");
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(imageimport_docker_archive(s, fd, NULL, NULL, m, err, sizeof(err)),
                         -ENOENT);
        close(fd);
        assert_nothing_stored();
        imagestore_close(s);
}
END_TEST

START_TEST(multi_arch_index_selects_the_platform) {
        struct imagestore *s = open_store();
        struct imagestore_opts arm = opts;
        char img[DIGEST_STR_BYTES], m[DIGEST_STR_BYTES], armm[DIGEST_STR_BYTES], err[512];

        ck_assert_msg(import_layout(s, "oci", "img", NULL, img, err) == 0, "%s", err);
        ck_assert_msg(import_layout(s, "oci", "multi", "multi", m, err) == 0, "%s", err);
        ck_assert_str_eq(m, img);
        ck_assert_int_eq(import_layout(s, "oci", "armonly", NULL, m, err), -ENOEXEC);
        ck_assert_msg(strstr(err, "linux/amd64") != NULL, "%s", err);
        ck_assert_int_eq(import_layout(s, "oci", "arm", NULL, m, err), -ENOEXEC);
        ck_assert_msg(strstr(err, "arm64") != NULL, "%s", err);
        ck_assert_int_eq(import_layout(s, "oci", NULL, NULL, m, err), -EINVAL);
        ck_assert_msg(strstr(err, "name one") != NULL, "%s", err);
        ck_assert_int_eq(import_layout(s, "oci", "nosuch", NULL, m, err), -ENOENT);
        imagestore_close(s);
        /* A store of an arm64 machine takes the other one. */
        arm.arch = "arm64";
        arm.variant = "v8";
        s = open_store_at("armstore", &arm);
        ck_assert_msg(import_layout(s, "oci", "multi", NULL, m, err) == 0, "%s", err);
        ck_assert_msg(import_layout(s, "oci", "arm", NULL, armm, err) == 0, "%s", err);
        ck_assert_str_eq(m, armm);
        imagestore_close(s);
}
END_TEST

START_TEST(hold_remove_prune) {
        struct imagestore *s = open_store();
        struct imagestore_image *list;
        char m[DIGEST_STR_BYTES], d[DIGEST_STR_BYTES], err[512], path[512];
        int n;

        ck_assert_msg(import_layout(s, "oci", "img", "a", m, err) == 0, "%s", err);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, "b", d, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_hold(s, "a"), 0);
        ck_assert_int_eq(imagestore_remove(s, "a", err, sizeof(err)), -EBUSY);
        ck_assert_msg(strstr(err, "used by 1") != NULL, "%s", err);
        ck_assert_int_eq(imagestore_prune(s, 1), 1); /* b only */
        ck_assert_int_eq(imagestore_release(s, "a"), 0);
        ck_assert_int_eq(imagestore_release(s, "a"), -EINVAL);
        ck_assert_int_eq(imagestore_hold(s, "nosuch"), -ENOENT);
        ck_assert_int_eq(imagestore_release(s, "nosuch"), -ENOENT);
        ck_assert_int_eq(imagestore_remove(s, "nosuch", err, sizeof(err)), -ENOENT);
        ck_assert_int_eq(imagestore_layer_path(s, "sha256:../../etc", path, sizeof(path)), -EINVAL);
        /* A second ref: removing one leaves the image. */
        ck_assert_msg(import_layout(s, "oci", "img", "a2", m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_remove(s, "a", err, sizeof(err)), 0);
        ck_assert_int_eq(imagestore_list(s, &list), 1);
        ck_assert_uint_eq(list[0].nrefs, 1);
        ck_assert_str_eq(list[0].refs[0], "a2");
        imagestore_list_free(list, 1);
        ck_assert_int_eq(count_in("store/layers"), 4);
        ck_assert_int_eq(imagestore_remove(s, "a2", err, sizeof(err)), 0);
        ck_assert_int_eq(count_in("store/layers"), 0);
        ck_assert_int_eq(count_in("store/images"), 0);
        ck_assert_int_gt(count_in("store/trash"), 0);
        ck_assert_int_eq(imagestore_collect(s), 0);
        ck_assert_int_eq(count_in("store/trash"), 0);
        ck_assert_int_eq(count_in("store/blobs/sha256"), 0);
        ck_assert_uint_eq(imagestore_usage(s), 0);
        /* prune without all: only images no ref names. */
        ck_assert_msg(import_layout(s, "oci", "img", "x", m, err) == 0, "%s", err);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, "x", d, err) == 0, "%s", err);
        n = imagestore_prune(s, 0); /* the layout's image lost "x" to the docker one */
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(imagestore_find(s, m, &(struct imagestore_image){0}), -ENOENT);
        imagestore_close(s);
}
END_TEST

START_TEST(cache_bound_evicts_least_recently_used) {
        struct imagestore *s = open_store();
        struct imagestore_image img;
        char a[DIGEST_STR_BYTES], b[DIGEST_STR_BYTES], err[512];
        uint64_t total;

        ck_assert_msg(import_layout(s, "oci", "img", "a", a, err) == 0, "%s", err);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, "b", b, err) == 0, "%s", err);
        /* a used after b's import: b is the least recently used. */
        usleep(5000);
        ck_assert_int_eq(imagestore_hold(s, "a"), 0);
        ck_assert_int_eq(imagestore_release(s, "a"), 0);
        total = imagestore_usage(s);
        ck_assert_int_eq(imagestore_fit(s, total, UINT64_MAX), 0);
        ck_assert_int_eq(imagestore_fit(s, total - 1, UINT64_MAX), 1);
        ck_assert_int_eq(imagestore_find(s, "b", &img), -ENOENT);
        ck_assert_int_eq(imagestore_find(s, "a", &img), 0);
        imagestore_image_free(&img);
        /* A held image is never evicted, whatever the bound. */
        ck_assert_int_eq(imagestore_hold(s, "a"), 0);
        ck_assert_int_eq(imagestore_fit(s, 0, UINT64_MAX), 0);
        ck_assert_int_eq(count_in("store/layers"), 4);
        ck_assert_int_eq(imagestore_release(s, "a"), 0);
        ck_assert_int_eq(imagestore_fit(s, 0, UINT64_MAX), 1);
        ck_assert_uint_eq(imagestore_usage(s), 0);
        ck_assert_int_eq(count_in("store/layers"), 0);
        imagestore_close(s);
}
END_TEST

START_TEST(restart_keeps_images_and_repairs_leftovers) {
        struct imagestore *s = open_store();
        struct imagestore_image img;
        char m[DIGEST_STR_BYTES], err[512];
        int64_t used;

        ck_assert_msg(import_layout(s, "oci", "img", "kept", m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_hold(s, "kept"), 0);
        ck_assert_int_eq(imagestore_find(s, "kept", &img), 0);
        used = img.last_used_ms;
        imagestore_image_free(&img);
        imagestore_close(s);
        /* What a crash can leave: work in tmp/, a layer no record names, a record whose
         * layer is gone, a record that is not JSON. */
        ck_assert_int_eq(
                srv_sh("cd %s/store && mkdir -p tmp/s-1-1/tree && echo x > tmp/s-1-1/tree/f && "
                   "mkdir -p layers/%064d/tree && echo '{\"manifest\":\"sha256:%064d\","
                   "\"config\":\"sha256:%064d\",\"refs\":[\"bad\"],\"layers\":[]}' > "
                   "images/%064d.json && echo junk > images/%063d9.json && "
                   "touch blobs/sha256/%064d",
                   dir, 0, 1, 2, 1, 0, 3),
                0);
        s = open_store();
        ck_assert_uint_eq(imagestore_repaired(s), 4);
        ck_assert_int_eq(count_in("store/tmp"), 0);
        ck_assert_int_eq(count_in("store/trash"), 0);
        ck_assert_int_eq(count_in("store/layers"), 4);
        ck_assert_int_eq(count_in("store/images"), 1);
        ck_assert_int_eq(imagestore_find(s, "bad", &img), -ENOENT);
        ck_assert_int_eq(imagestore_find(s, "kept", &img), 0);
        ck_assert_str_eq(img.manifest, m);
        ck_assert_int_eq(img.last_used_ms, used);
        ck_assert_uint_eq(img.holds, 0); /* holds are the daemon's to restore */
        imagestore_image_free(&img);
        imagestore_close(s);
}
END_TEST

START_TEST(store_reachable_by_others_is_refused) {
        char root[512], err[512];
        struct imagestore *s = NULL;

        snprintf(root, sizeof(root), "%s/store", dir);
        ck_assert_int_eq(mkdir(root, 0755), 0);
        ck_assert_int_eq(chmod(root, 0755), 0);
        ck_assert_int_eq(imagestore_open(root, &opts, &s, err, sizeof(err)), -EPERM);
        ck_assert_msg(strstr(err, "0700") != NULL, "%s", err);
        ck_assert_int_eq(rmdir(root), 0);
        ck_assert_int_eq(symlink("/tmp", root), 0);
        ck_assert_int_lt(imagestore_open(root, &opts, &s, err, sizeof(err)), 0);
        ck_assert_ptr_null(s);
}
END_TEST

/* A copy of the layout to damage: DIR/bad. */
static void copy_layout(void) {
        ck_assert_int_eq(srv_sh("cp -a %s/oci %s/bad", imgs, dir), 0);
}

/* The busybox layer's blob path in DIR/bad (the largest blob). */
static void largest_blob(char *path, size_t len) {
        FILE *f;
        char cmd[600];

        snprintf(cmd, sizeof(cmd), "ls -S %s/bad/blobs/sha256 | head -1", dir);
        f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(cmd, sizeof(cmd), f));
        pclose(f);
        cmd[strcspn(cmd, "\n")] = '\0';
        snprintf(path, len, "%s/bad/blobs/sha256/%.64s", dir, cmd);
}

/* A copy of the layout rewritten by tests/mkimage.sh --lie kind: DIR/bad. */
static void lying_layout(const char *kind, char *path, size_t len) {

        snprintf(path, len, "%s/bad", dir);
        ck_assert_int_eq(srv_sh("rm -rf %s", path), 0);
        copy_layout();
        ck_assert_int_eq(srv_sh(MKIMAGE " --lie %s %s", kind, path), 0);
}

/* Importing tag "img" of the layout at path fails with want_r, err saying want, and
 * the store holds nothing. */
static void assert_import_refused(struct imagestore *s, const char *path, int want_r,
                                  const char *want) {
        char m[DIGEST_STR_BYTES], err[512];

        ck_assert_int_eq(import_layout(s, path, "img", NULL, m, err), want_r);
        ck_assert_msg(strstr(err, want) != NULL, "err \"%s\" says no \"%s\"", err, want);
        assert_nothing_stored();
}

START_TEST(blob_that_lies_is_refused) {
        struct imagestore *s = open_store();
        char m[DIGEST_STR_BYTES], err[512], blob[600], path[600];

        copy_layout();
        largest_blob(blob, sizeof(blob));
        snprintf(path, sizeof(path), "%s/bad", dir);
        /* One more byte than its descriptor says. */
        ck_assert_int_eq(srv_sh("echo >> %s", blob), 0);
        ck_assert_int_eq(import_layout(s, path, "img", NULL, m, err), -EINVAL);
        ck_assert_msg(strstr(err, "descriptor says") != NULL || strstr(err, "digest") != NULL, "%s",
                      err);
        assert_nothing_stored();
        /* The same size, one byte of gzip's header changed (its mtime: the stream still
         * reads, to the same tar): the blob's digest is not the one named. */
        ck_assert_int_eq(srv_sh("truncate -s -1 %s && printf 'Z' | dd of=%s bs=1 seek=4 conv=notrunc "
                            "status=none",
                            blob, blob),
                         0);
        assert_import_refused(s, path, -EINVAL, "has the digest");
        imagestore_close(s);
}
END_TEST

START_TEST(manifest_that_lies_is_refused) {
        struct imagestore *s = open_store();
        char path[600];

        lying_layout("size", path, sizeof(path));
        assert_import_refused(s, path, -EINVAL, "descriptor says");
        lying_layout("diff_id", path, sizeof(path));
        assert_import_refused(s, path, -EINVAL, "has the diff_id");
        /* A config inspect could not read. */
        lying_layout("env", path, sizeof(path));
        assert_import_refused(s, path, -EINVAL, "wrong type");
        /* A config that is not the one its manifest names. */
        ck_assert_int_eq(srv_sh("rm -rf %s", path), 0);
        copy_layout();
        ck_assert_int_eq(srv_sh("cd %s/blobs/sha256 && f=$(grep -l GREETING=hi *) && "
                            "sed -i s/GREETING=hi/GREETING=ho/ $f",
                            path),
                         0);
        assert_import_refused(s, path, -EINVAL, "has the digest");
        imagestore_close(s);
}
END_TEST

START_TEST(layout_bounds_are_enforced) {
        struct imagestore *s = open_store();
        char path[600];

        lying_layout("layers", path, sizeof(path));
        assert_import_refused(s, path, -EINVAL, "more than 256");
        lying_layout("nest", path, sizeof(path));
        assert_import_refused(s, path, -EINVAL, "nested deeper than 2");
        /* JSON past IMAGESTORE_MAX_JSON_BYTES (still valid JSON: trailing spaces). */
        ck_assert_int_eq(srv_sh("rm -rf %s", path), 0);
        copy_layout();
        ck_assert_int_eq(
                srv_sh("printf '%%*s' %u '' >> %s/index.json", IMAGESTORE_MAX_JSON_BYTES, path), 0);
        assert_import_refused(s, path, -EFBIG, "index.json");
        imagestore_close(s);
}
END_TEST

START_TEST(symlinked_blob_is_never_followed) {
        struct imagestore *s = open_store();
        char blob[600], path[600];

        copy_layout();
        largest_blob(blob, sizeof(blob));
        ck_assert_int_eq(srv_sh("rm %s && ln -s /etc/passwd %s", blob, blob), 0);
        snprintf(path, sizeof(path), "%s/bad", dir);
        assert_import_refused(s, path, -EINVAL, "symlink");
        imagestore_close(s);
}
END_TEST

START_TEST(image_past_the_size_bound_is_refused) {
        struct imagestore_opts small = opts;
        struct imagestore *s;
        char m[DIGEST_STR_BYTES], err[512];

        small.max_image_bytes = 500000; /* busybox is about 2 MB */
        s = open_store_with(&small);
        ck_assert_int_eq(import_layout(s, "oci", "img", NULL, m, err), -EFBIG);
        ck_assert_msg(strstr(err, "500000") != NULL, "%s", err);
        assert_nothing_stored();
        ck_assert_int_eq(import_archive(s, "img.docker.tar", 1, NULL, NULL, m, err), -EFBIG);
        assert_nothing_stored();
        imagestore_close(s);
}
END_TEST

/* A full disk: the store on a 1 MiB tmpfs (in this test's mount namespace) cannot take
 * busybox. The import fails with -ENOSPC and leaves nothing; a small image still fits
 * afterwards. */
START_TEST(full_disk_leaves_nothing_half_used) {
        struct imagestore *s;
        char m[DIGEST_STR_BYTES], err[512], small[512];

        snprintf(small, sizeof(small), "%s/small", dir);
        ck_assert_int_eq(mkdir(small, 0700), 0);
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mount("tmpfs", small, "tmpfs", 0, "size=1m,mode=0700"), 0);
        s = open_store_at("small/store", &opts);
        ck_assert_int_eq(import_layout(s, "oci", "img", NULL, m, err), -ENOSPC);
        ck_assert_msg(strstr(err, "No space left") != NULL, "%s", err);
        ck_assert_int_eq(count_in("small/store/layers"), 0);
        ck_assert_int_eq(count_in("small/store/images"), 0);
        ck_assert_int_eq(count_in("small/store/tmp"), 0);
        ck_assert_msg(import_layout(s, "oci", "arm", NULL, m, err) == -ENOEXEC, "%s", err);
        imagestore_close(s);
        {
                struct imagestore_opts arm = opts;
                arm.arch = "arm64";
                s = open_store_at("small/store", &arm);
                ck_assert_msg(import_layout(s, "oci", "arm", "a", m, err) == 0, "%s", err);
                ck_assert_int_eq(count_in("small/store/images"), 1);
                imagestore_close(s);
        }
        ck_assert_int_eq(umount2(small, MNT_DETACH), 0);
}
END_TEST

/* ---- concurrency -------------------------------------------------------------------- */

struct importer {
        struct imagestore *s;
        int r;
        char err[512];
};

static void *import_thread(void *arg) {
        struct importer *im = arg;
        char m[DIGEST_STR_BYTES];

        im->r = import_layout(im->s, "oci", "img", NULL, m, im->err);
        return NULL;
}

/* Waiters on the flock of the file of inode ino, from /proc/locks. */
static int lock_waiters(ino_t ino) {
        char line[256], want[64];
        FILE *f = fopen("/proc/locks", "r");
        int n = 0;

        ck_assert_ptr_nonnull(f);
        snprintf(want, sizeof(want), ":%lu ", (unsigned long)ino);
        while (fgets(line, sizeof(line), f))
                n += strstr(line, "->") && strstr(line, "FLOCK") && strstr(line, want);
        fclose(f);
        return n;
}

START_TEST(two_imports_of_one_layer_unpack_it_once) {
        struct imagestore *s = open_store(), *probe;
        struct imagestore_image *list;
        struct importer a = {0}, b = {0};
        struct imagestore_image img;
        pthread_t ta, tb;
        char m[DIGEST_STR_BYTES], err[512], lock[700];
        struct stat st;
        int lfd, i;

        /* The first layer's diff_id, from an import into another store. */
        probe = open_store_at("probe", &opts);
        ck_assert_msg(import_layout(probe, "oci", "img", NULL, m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_find(probe, m, &img), 0);
        imagestore_close(probe);
        /* Both imports must meet on that layer's lock: hold it until both wait. */
        snprintf(lock, sizeof(lock), "%s/store/locks/%s.lock", dir, img.layers[0] + 7);
        imagestore_image_free(&img);
        lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(lfd, 0);
        ck_assert_int_eq(flock(lfd, LOCK_EX), 0);
        ck_assert_int_eq(fstat(lfd, &st), 0);
        a.s = b.s = s;
        ck_assert_int_eq(pthread_create(&ta, NULL, import_thread, &a), 0);
        ck_assert_int_eq(pthread_create(&tb, NULL, import_thread, &b), 0);
        for (i = 0; i < 2000 && lock_waiters(st.st_ino) < 2; i++)
                usleep(10000);
        ck_assert_int_eq(lock_waiters(st.st_ino), 2);
        close(lfd);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        ck_assert_msg(a.r == 0, "%s", a.err);
        ck_assert_msg(b.r == 0, "%s", b.err);
        ck_assert_int_eq(count_in("store/layers"), 4);
        ck_assert_int_eq(count_in("store/tmp"), 0);
        ck_assert_int_eq(imagestore_list(s, &list), 1);
        imagestore_list_free(list, 1);
        imagestore_close(s);
}
END_TEST

/* A layer tar of one 1 MiB file and one more whose data never comes, as far as it goes
 * (the test writes it to a pipe the store reads). */
static int open_pipe(void *ud, char *err, size_t errlen) {
        return dup(*(int *)ud);
}

START_TEST(killed_mid_unpack_leaves_nothing_half_used) {
        static char block[512 * 64];
        char err[512];
        int p[2], i;
        pid_t child;

        ck_assert_int_eq(pipe(p), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                struct imagestore *s = open_store();
                struct imagestore_blob_source src = {open_pipe, &p[0], NULL, -1, NULL};
                struct imagestore_budget budget = {1u << 30, UINT64_MAX};
                struct imagestore_layer_ref l;
                close(p[1]);
                imagestore_pin(s,
                               "sha256:"
                               "1111111111111111111111111111111111111111111111111111111111111111");
                imagestore_get_layer(
                        s,
                        "sha256:1111111111111111111111111111111111111111111111111111111111111111",
                        &src, &budget, &l, err, sizeof(err));
                _exit(0);
        }
        close(p[0]);
        /* A ustar header for "big" of 16 MiB, then some of its data. */
        memset(block, 0, sizeof(block));
        snprintf(block, 100, "big");
        snprintf(block + 100, 8, "0000644");
        snprintf(block + 108, 8, "0000000");
        snprintf(block + 116, 8, "0000000");
        snprintf(block + 124, 12, "%011o", 16u << 20);
        snprintf(block + 136, 12, "%011o", 0);
        block[156] = '0';
        memcpy(block + 257,
               "ustar\0"
               "00",
               8);
        {
                unsigned sum = 0;
                memset(block + 148, ' ', 8);
                for (i = 0; i < 512; i++)
                        sum += (unsigned char)block[i];
                snprintf(block + 148, 8, "%06o", sum);
        }
        ck_assert_int_eq(write(p[1], block, sizeof(block)), (ssize_t)sizeof(block));
        /* Wait until the half-written file is in the store's tmp/, then kill. */
        for (i = 0; i < 2000; i++) {
                if (srv_sh("test -n \"$(find %s/store/tmp -name big -size +1k 2>/dev/null)\"", dir) ==
                    0)
                        break;
                if (i % 10 == 0)
                        ck_assert_int_eq(write(p[1], block + 512, sizeof(block) - 512),
                                         (ssize_t)sizeof(block) - 512);
                usleep(10000);
        }
        ck_assert_int_lt(i, 2000);
        kill(child, SIGKILL);
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
        close(p[1]);
        ck_assert_int_eq(count_in("store/layers"), 0);
        ck_assert_int_eq(count_in("store/tmp"), 1);
        {
                struct imagestore *s = open_store();
                char m[DIGEST_STR_BYTES];
                ck_assert_int_eq(count_in("store/tmp"), 0);
                ck_assert_int_eq(count_in("store/layers"), 0);
                ck_assert_msg(import_layout(s, "oci", "img", NULL, m, err) == 0, "%s", err);
                imagestore_close(s);
        }
}
END_TEST

/* The layer blob digests of the manifest m as the store keeps it (up to 8). */
static size_t manifest_blobs(const char *m, char out[][DIGEST_STR_BYTES]) {
        char p[512];
        json_t *j, *l;
        size_t i, n = 0;

        snprintf(p, sizeof(p), "%s/store/blobs/sha256/%s", dir, m + 7);
        j = json_load_file(p, 0, NULL);
        ck_assert_ptr_nonnull(j);
        json_array_foreach(json_object_get(j, "layers"), i, l) {
                if (n < 8)
                        snprintf(out[n++], DIGEST_STR_BYTES, "%s",
                                 json_string_value(json_object_get(l, "digest")));
        }
        json_decref(j);
        return n;
}

/* Each layer unpacked from a layout's blob is known by that blob (so that a pull skips
 * it); a layer already there when another image names it by another blob (the docker
 * archive's plain tars) is not known by that one: only a blob this store unpacked to
 * its diff_id is ever recorded. The record goes with its image. */
START_TEST(layers_remember_the_blobs_they_came_from) {
        struct imagestore *s = open_store();
        struct imagestore_image img;
        char a[DIGEST_STR_BYTES], b[DIGEST_STR_BYTES], got[DIGEST_STR_BYTES], err[512];
        char blobs[8][DIGEST_STR_BYTES], dblobs[8][DIGEST_STR_BYTES];
        size_t n, i;

        ck_assert_msg(import_layout(s, "oci", "img", "a", a, err) == 0, "%s", err);
        n = manifest_blobs(a, blobs);
        ck_assert_int_eq(imagestore_find(s, "a", &img), 0);
        ck_assert_uint_eq(n, img.nlayers);
        for (i = 0; i < n; i++) {
                ck_assert_int_eq(imagestore_blob_layer(s, blobs[i], 0, got), 1);
                ck_assert_str_eq(got, img.layers[i]);
        }
        imagestore_image_free(&img);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, "b", b, err) == 0, "%s", err);
        ck_assert_uint_eq(manifest_blobs(b, dblobs), n);
        for (i = 0; i < n; i++) {
                ck_assert_str_ne(dblobs[i], blobs[i]);
                ck_assert_int_eq(imagestore_blob_layer(s, dblobs[i], 0, got), 0);
        }
        /* Pinned: a removal of every image keeps the layer until unpinned. */
        ck_assert_int_eq(imagestore_blob_layer(s, blobs[0], 1, got), 1);
        ck_assert_int_eq(imagestore_remove(s, "a", err, sizeof(err)), 0);
        ck_assert_int_eq(imagestore_blob_layer(s, blobs[1], 0, got), 0);
        ck_assert_int_eq(imagestore_remove(s, "b", err, sizeof(err)), 0);
        ck_assert_int_eq(count_in("store/layers"), 1);
        imagestore_unpin(s, got);
        ck_assert_int_eq(imagestore_prune(s, 1), 0);
        ck_assert_int_eq(count_in("store/layers"), 0);
        imagestore_close(s);
}
END_TEST

/* A config that gives a blob the store unpacked another diff_id lies: refused naming
 * both, whether or not that diff_id is in the store. */
START_TEST(blob_known_to_another_diff_id_is_refused) {
        struct imagestore *s = open_store();
        char m[DIGEST_STR_BYTES], err[512], path[600];

        ck_assert_msg(import_layout(s, "oci", "img", "good", m, err) == 0, "%s", err);
        lying_layout("diff_id", path, sizeof(path));
        ck_assert_int_eq(import_layout(s, path, "img", NULL, m, err), -EINVAL);
        ck_assert_msg(strstr(err, "unpacks to the diff_id") && strstr(err, "sha256:abab"), "%s",
                      err);
        ck_assert_int_eq(count_in("store/images"), 1);
        ck_assert_int_eq(count_in("store/layers"), 4);
        imagestore_close(s);
}
END_TEST

/* max_image_entries: an image past it is refused (-EDQUOT, naming the image's bound)
 * and leaves nothing, the layers unpacked before the one refused included; its layers
 * already in the store count as well. */
START_TEST(image_past_the_entries_bound_is_refused) {
        struct imagestore_opts few = opts;
        struct imagestore_image img;
        struct imagestore *s = open_store();
        char m[DIGEST_STR_BYTES], err[512];
        uint64_t entries;

        ck_assert_msg(import_layout(s, "oci", "img", "a", m, err) == 0, "%s", err);
        ck_assert_int_eq(imagestore_find(s, "a", &img), 0);
        entries = img.entries;
        ck_assert_uint_gt(entries, 4);
        ck_assert_uint_eq(imagestore_entries(s), entries);
        imagestore_image_free(&img);
        imagestore_close(s);
        /* Present already: the docker archive's image names the same layers. */
        few.max_image_entries = entries - 1;
        s = open_store_with(&few);
        ck_assert_int_eq(import_archive(s, "img.docker.tar", 1, NULL, NULL, m, err), -EDQUOT);
        ck_assert_msg(strstr(err, "pass the image's bound"), "%s", err);
        ck_assert_int_eq(count_in("store/images"), 1);
        ck_assert_int_eq(imagestore_prune(s, 1), 1);
        ck_assert_int_eq(imagestore_collect(s), 0);
        /* Unpacked here: refused at the layer that passes, nothing left. */
        ck_assert_int_eq(import_layout(s, "oci", "img", NULL, m, err), -EDQUOT);
        ck_assert_msg(strstr(err, "left of the image's bound"), "%s", err);
        assert_nothing_stored();
        imagestore_close(s);
        few.max_image_entries = entries;
        s = open_store_with(&few);
        ck_assert_msg(import_layout(s, "oci", "img", NULL, m, err) == 0, "%s", err);
        imagestore_close(s);
}
END_TEST

/* The cache bound counts entries too: past it the least recently used images not held
 * go, even when the bytes are within theirs. */
START_TEST(cache_bound_counts_entries) {
        struct imagestore *s = open_store();
        char a[DIGEST_STR_BYTES], b[DIGEST_STR_BYTES], err[512];
        uint64_t e;

        ck_assert_msg(import_layout(s, "oci", "img", "a", a, err) == 0, "%s", err);
        ck_assert_msg(import_archive(s, "img.docker.tar", 1, NULL, "b", b, err) == 0, "%s", err);
        e = imagestore_entries(s); /* the two share their layers: counted once */
        ck_assert_uint_gt(e, 0);
        ck_assert_int_eq(imagestore_hold(s, "a"), 0);
        ck_assert_int_eq(imagestore_fit(s, UINT64_MAX, e), 0);
        ck_assert_int_eq(imagestore_fit(s, UINT64_MAX, e - 1), 1); /* b; a is held */
        ck_assert_int_eq(imagestore_find(s, "b", &(struct imagestore_image){0}), -ENOENT);
        ck_assert_uint_eq(imagestore_entries(s), e);
        ck_assert_int_eq(imagestore_release(s, "a"), 0);
        ck_assert_int_eq(imagestore_fit(s, UINT64_MAX, e - 1), 1);
        ck_assert_uint_eq(imagestore_entries(s), 0);
        ck_assert_int_eq(count_in("store/layers"), 0);
        imagestore_close(s);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("imagestore");

        SBX_ADD_TEST_CASE(s, oci_layout_imported_and_seen_through_overlay, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, hard_link_kept_within_its_layer, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, archives_share_the_layers, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, docker_archive_links_stay_inside_it, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, multi_arch_index_selects_the_platform, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, hold_remove_prune, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, cache_bound_evicts_least_recently_used, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, restart_keeps_images_and_repairs_leftovers, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, store_reachable_by_others_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, blob_that_lies_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, manifest_that_lies_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, layout_bounds_are_enforced, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, symlinked_blob_is_never_followed, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, image_past_the_size_bound_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, full_disk_leaves_nothing_half_used, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, two_imports_of_one_layer_unpack_it_once, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, killed_mid_unpack_leaves_nothing_half_used, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, layers_remember_the_blobs_they_came_from, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, blob_known_to_another_diff_id_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, image_past_the_entries_bound_is_refused, 120, setup, teardown);
        SBX_ADD_TEST_CASE(s, cache_bound_counts_entries, 120, setup, teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
