/* it_image_sandbox.c: sandboxes made from images (CreateSandbox.image, RunCommand.user;
 * docs/images.md) against a real sbxd, root and rootless, and as two users.
 *
 * The test image is tests/mkimage.sh's tag "img" (busybox-static in four layers: a
 * whiteout, an opaque directory, a hard link, a setuid busybox; Env GREETING=hi,
 * WorkingDir /data, User 1000:1000), made once per test in the case's directory and
 * imported with PullImage from the OCI layout (`oci:DIR:img`): no registry is needed
 * for what a sandbox does with an image (tests/it_images.c pulls from one). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asbob.h"
#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"
#include "sbx_limits.h"
#include "testutil.h"

#define NOBODY 65534u

static const char *const group_flags[] = {"--socket-group", "3100", "--warm", "0", "--spares",
                                          "0", NULL};

/* Imports tag img of the layout; returns the image's digest (freed by the caller). */
static char *pull(sbx_client *c, const char *layout) {
        return img_pull(c, layout, "img");
}

/* A sandbox made from image; the code, with *ret_id (freed by the caller) on success. */
static enum sbx_code create_from(sbx_client *c, const char *image, char **ret_id) {
        return img_create(c, image, NULL, ret_id);
}

static char *must_create(sbx_client *c, const char *image) {
        char *id = NULL;

        ck_assert_msg(create_from(c, image, &id) == SBX_OK, "create: %s", sbx_error_message(c));
        return id;
}

/* The code of running `true` in id as user (which the tests expect refused). */
static enum sbx_code true_as(sbx_client *c, const char *id, const char *user) {
        const char *argv[] = {"true", NULL};
        struct sbx_exec_opts e;
        struct sbx_result *r = NULL;
        enum sbx_code rc;

        sbx_exec_opts_init(&e);
        e.argv = argv;
        e.argc = 1;
        e.timeout_ms = 10000;
        e.user = user;
        rc = sbx_exec(c, id, &e, &r);
        sbx_result_free(r);
        return rc;
}

/* The image's layers as the daemon unpacked them, as it shows them: what the overlay
 * gives each sandbox (whiteouts, the opaque directory, a hard link, the last writer). */
static void expect_layers_merged(sbx_client *c, const char *id) {
        expect_out(c, id, NULL, "ls /; ls -a /data; busybox cat /etc/greeting /etc/greeting.link",
                   "bin\ndata\ndev\netc\nproc\nrun\nsys\ntmp\nworkspace\n"
                   ".\n..\nfresh\nsecond\nsecond\n");
}

static int has_x(const char *path, const struct stat *st, int flag, struct FTW *f) {
        (void)st;
        (void)flag;
        (void)f;
        return strcmp(path + strlen(path) - 7, "/etc/x1") == 0;
}

/* Root of a root daemon's image sandbox: root of its own namespace over a block of host
 * ids of its own, writes the image's files (copies of the sandbox's), changes owners;
 * the image's user is the default; the store, the host and another sandbox see none of
 * it; the end leaves nothing but the image. */
START_TEST(root_inside_root_daemon) {
        struct it_daemon d;
        const char *layout = make_image();
        char path[1200], *digest, *a, *b;
        unsigned long base_a, base_b;
        struct stat st;
        sbx_client *c;

        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        a = must_create(c, digest);
        b = must_create(c, digest);
        {
                /* Its own user namespace, owned by root: what its processes may take of
                 * root's inotify watches is bounded (a share of the host's). */
                FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
                unsigned long long host = 0;
                char want[32];

                ck_assert_ptr_nonnull(f);
                ck_assert_int_eq(fscanf(f, "%llu", &host), 1);
                fclose(f);
                snprintf(want, sizeof(want), "%llu\n", host / SBX_SANDBOX_INOTIFY_SHARE);
                expect_out(c, a, NULL, "busybox cat /proc/sys/user/max_inotify_watches", want);
                /* Root inside, with the image's capabilities, cannot raise it. */
                expect_out(c, a, "root",
                           "echo 99999999 > /proc/sys/user/max_inotify_watches 2>/dev/null; "
                           "busybox cat /proc/sys/user/max_inotify_watches",
                           want);
        }

        /* The image's Env, WorkingDir and User. */
        expect_out(c, a, NULL, "busybox id -u; busybox id -g; pwd; echo $GREETING; echo $HOME",
                   "1000\n1000\n/data\nhi\n/workspace\n");
        expect_layers_merged(c, a);
        /* busybox is setuid root in the image: no_new_privs keeps its user. */
        expect_out(c, a, NULL, "busybox ls -ln /bin/busybox | busybox cut -c1-10; busybox id -u",
                   "-rwsr-xr-x\n1000\n");
        /* Root: a few capabilities in its namespace, its files, its chown. */
        expect_out(c, a, "root",
                   "busybox id -u; echo $HOME; echo one > /etc/x1; busybox chown 1000:1000 /etc/x1; "
                   "busybox ls -ln /etc/x1 | busybox tr -s ' ' | busybox cut -d' ' -f3,4; "
                   "busybox grep CapEff /proc/self/status",
                   "0\n/root\n1000 1000\nCapEff:\t00000000a00005fb\n");
        expect_out(c, a, "0:1000", "busybox id -u; busybox id -g", "0\n1000\n");
        /* The image's user, and not root's powers. */
        expect_out(c, a, NULL, "echo no > /etc/x2 2>/dev/null || echo refused", "refused\n");

        /* Blocks of their own, above 2^31, of SBX_IMAGE_IDS each. */
        base_a = map_base(c, a);
        base_b = map_base(c, b);
        ck_assert_uint_ge(base_a, SBX_IMAGE_UID_BASE);
        ck_assert_uint_ge(base_b, SBX_IMAGE_UID_BASE);
        ck_assert_msg(base_a != base_b && (base_a > base_b ? base_a - base_b : base_b - base_a) >=
                                                   SBX_IMAGE_IDS,
                      "blocks %lu and %lu overlap", base_a, base_b);
        /* On the host the copy is the sandbox's, in its block. */
        snprintf(path, sizeof(path), "%s/sandboxes/%s/root/upper/etc/x1", d.state, a);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_uint_eq(st.st_uid, base_a + 1000);
        ck_assert_uint_eq(st.st_gid, base_a + 1000);
        /* The other sandbox and the store saw nothing of it. */
        expect_out(c, b, NULL, "busybox ls /etc/x1 2>/dev/null || echo none", "none\n");
        snprintf(path, sizeof(path), "%s/images", d.state);
        ck_assert_int_eq(nftw(path, has_x, 16, FTW_PHYS), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 0077, 0); /* setuid files of images: no host user's */

        /* In use: not removed. */
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_FAILED_PRECONDITION);
        /* Info names it. */
        {
                struct sbx_sandbox *s = NULL;
                ck_assert_int_eq(sbx_get(c, a, &s), SBX_OK);
                ck_assert_str_eq(s->image, digest);
                ck_assert_str_eq(s->image_digest, digest);
                sbx_sandbox_free(s);
        }
        /* The end: the sandbox's root goes with it; then the image may go. */
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        /* Its record names the image and the digest, after its end too. */
        {
                struct sbx_sandbox *s = NULL;
                ck_assert_int_eq(sbx_get(c, a, &s), SBX_OK);
                ck_assert_int_eq(s->state, SBX_STATE_TERMINATED);
                ck_assert_str_eq(s->image, digest);
                ck_assert_str_eq(s->image_digest, digest);
                sbx_sandbox_free(s);
        }
        snprintf(path, sizeof(path), "%s/sandboxes/%s", d.state, a);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_OK);
        free(a);
        free(b);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static void bob_creates(struct it_daemon *d, const char *image, struct report *r) {
        sbx_client *c = it_connect(d);
        char *id = NULL;
        enum sbx_code rc = create_from(c, image, &id);

        say(r, "%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? id : sbx_error_message(c));
        free(id);
        sbx_close(c);
}

/* What is refused, and how: an image nobody pulled, another user's (word for word the
 * same), with a root_dir, with writable paths (root), a user of a sandbox without an
 * image, a user the image does not have. */
START_TEST(refusals) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        char *digest, *id, *host, *said, want[1400];
        sbx_client *c;

        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        digest = pull(c, layout);

        /* dir:PATH is a root_dir (read-only), absolute. */
        ck_assert_int_eq(create_from(c, "dir:relative/tree", &id), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "dir: needs an absolute path"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(create_from(c, "dir:/usr", &id), SBX_OK);
        expect_out(c, id, NULL, "test -x /bin/sh && touch /bin/x 2>/dev/null || echo ro", "ro\n");
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        ck_assert_int_eq(create_from(c, "localhost:1/never:pulled", &id), SBX_NOT_FOUND);
        ck_assert_msg(strstr(sbx_error_message(c), "no image localhost:1/never:pulled: pull it"),
                      "%s", sbx_error_message(c));
        /* BOB, with root's digest: as for a digest nobody pulled. */
        said = as_bob(bob_creates, &d, digest);
        snprintf(want, sizeof(want), "NOT_FOUND|no image %s: pull it first (sbx image pull %s)\n",
                 digest, digest);
        ck_assert_msg(strstr(said, want), "BOB got: %s", said);
        free(said);

        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.root_dir = "/usr";
        ck_assert_int_eq(sbx_create(c, &o, &s), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "image and root_dir"), "%s",
                      sbx_error_message(c));
        host = it_create(c, NULL);
        ck_assert_int_eq(true_as(c, host, "root"), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "only a sandbox made from an image"));

        id = must_create(c, digest);
        ck_assert_int_eq(true_as(c, id, "postgres"), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "user 'postgres' is not in the image"));
        ck_assert_int_eq(true_as(c, id, "70000"), SBX_INVALID_ARGUMENT);
        free(id);
        free(host);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The same image under a rootless daemon (nobody's): the daemon's user is root inside,
 * the only id; the image's User 1000 cannot be and the sandbox says so; the overlay's
 * whiteouts are user.overlay xattrs there. */
START_TEST(rootless_daemon) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_sandbox *s = NULL;
        struct sbx_create_opts o;
        char *digest, *id, path[1200];
        int warned = 0;
        sbx_client *c;

        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        digest = pull(c, layout);
        sbx_create_opts_init(&o);
        o.image = digest;
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "%s", sbx_error_message(c));
        id = strdup(s->id);
        for (size_t i = 0; i < s->warnings.n; i++)
                warned |= strstr(s->warnings.v[i], "the image's user '1000:1000' cannot exist here") != NULL;
        ck_assert_msg(warned, "no warning about the image's user");
        sbx_sandbox_free(s);

        expect_out(c, id, NULL, "busybox id -u; pwd; busybox cat /proc/self/uid_map | busybox tr -s ' '",
                   "0\n/data\n 0 65534 1\n");
        expect_layers_merged(c, id);
        expect_out(c, id, NULL, "echo one > /etc/x1 && busybox cat /etc/x1", "one\n");
        snprintf(path, sizeof(path), "%s/sandboxes/%s/root/upper/etc/x1", d.state, id);
        ck_assert_int_eq(access(path, F_OK), 0);

        ck_assert_int_eq(true_as(c, id, "1000"), SBX_UNIMPLEMENTED);
        ck_assert_msg(strstr(sbx_error_message(c), "have one user, root (0)"), "%s",
                      sbx_error_message(c));

        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        snprintf(path, sizeof(path), "%s/sandboxes/%s", d.state, id);
        ck_assert_int_eq(access(path, F_OK), -1);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A real Debian image (tests/mkdebian.sh, cached in the build directory): root of the
 * sandbox installs a package with dpkg and a wheel with pip into the system; a second
 * sandbox of the image and the host see none of it. */
START_TEST(debian_installs) {
        struct it_daemon d;
        char cmd[1400], dir[800], source[900], *digest, *a, *b, *out = NULL, *err = NULL;
        struct sbx_image *img = NULL;
        sbx_client *c;

        {
                char *build = realpath(it_build_dir(), NULL);
                ck_assert_ptr_nonnull(build);
                snprintf(dir, sizeof(dir), "%s/images/debian", build);
                free(build);
        }
        snprintf(cmd, sizeof(cmd), "bash tests/mkdebian.sh %s >%s/mkdebian.log 2>&1", dir,
                 it_base_dir());
        ck_assert_msg(system(cmd) == 0, "mkdebian.sh failed: see %s/mkdebian.log", it_base_dir());
        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        snprintf(source, sizeof(source), "oci:%s/oci:deb", dir);
        ck_assert_msg(sbx_image_pull(c, source, NULL, &img) == SBX_OK, "pull: %s",
                      sbx_error_message(c));
        digest = strdup(img->digest);
        sbx_image_free(img);
        a = must_create(c, digest);
        b = must_create(c, digest);
        for (int i = 0; i < 3; i++) {
                static const char *const files[] = {"hello.deb", "suid.deb",
                                                    "sbxhello-1.0-py3-none-any.whl"};
                char from[900], to[300];
                snprintf(from, sizeof(from), "%s/%s", dir, files[i]);
                snprintf(to, sizeof(to), "%s:/workspace/%s", a, strrchr(from, '/') + 1);
                ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                        (const char *const[]){"cp", from, to, NULL}),
                                 0);
                free(out);
                free(err);
        }
        expect_out(c, a, NULL,
                   "id -un; echo $HOME; touch /root/.profile.d && echo home; "
                   "dpkg -i /workspace/hello.deb >/dev/null && sbx-hello",
                   "root\n/root\nhome\nhello from a package\n");
        /* A setuid program installs: nothing this sandbox writes reaches another user. */
        expect_out(c, a, NULL,
                   "dpkg -i /workspace/suid.deb >/dev/null && stat -c %A /usr/bin/sbx-suid",
                   "-rwsr-xr-x\n");
        expect_out(c, a, NULL,
                   "python3 -m pip install -q --no-index --break-system-packages "
                   "/workspace/sbxhello-1.0-py3-none-any.whl 2>/dev/null && "
                   "python3 -c 'import sbxhello; print(sbxhello.GREETING)'",
                   "hello from a wheel\n");
        expect_out(c, b, NULL,
                   "command -v sbx-hello || echo no package; "
                   "python3 -c 'import sbxhello' 2>/dev/null || echo no wheel",
                   "no package\nno wheel\n");
        ck_assert_int_eq(access("/usr/bin/sbx-hello", F_OK), -1);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A restarted daemon (--keep-sandboxes) adopts an image's sandbox: its files, its block
 * of ids and its hold on the image are as before. */
START_TEST(adopted_after_restart) {
        static const char *const keep[] = {"--keep-sandboxes", "--warm", "0", "--spares", "0",
                                           NULL};
        struct it_daemon d;
        const char *layout = make_image();
        unsigned long base;
        char *digest, *id;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        digest = pull(c, layout);
        id = must_create(c, digest);
        expect_out(c, id, "root", "echo kept > /etc/k1 && echo ok", "ok\n");
        base = map_base(c, id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        /* The blocks follow the uid range: the state directory keeps it for the next
         * daemon, which would pick the first free one otherwise (another, once a daemon
         * on a lower range has stopped meanwhile) and could not adopt the sandbox. */
        {
                char rec[700];
                snprintf(rec, sizeof(rec), "%s/uid-range", d.state);
                ck_assert_msg(access(rec, F_OK) == 0, "%s is gone", rec);
        }
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        expect_out(c, id, "root", "busybox cat /etc/k1", "kept\n");
        expect_out(c, id, NULL, "busybox id -u", "1000\n");
        ck_assert_uint_eq(map_base(c, id), base);
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_FAILED_PRECONDITION);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_OK);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The first subordinate id (uid and gid) of nobody's that bind_subids gives. */
#define SUBID_BASE 1400000u

/* /etc/subuid and /etc/subgid give nobody ids SUBID_BASE .. +65535: the test's own
 * file bound over the host's, in a mount namespace of the test's process (entered once,
 * so that unbind_subids and a second bind_subids work on the same one). */
static void bind_subids(void) {
        static int private;
        char subids[800];
        FILE *f;

        if (!private) {
                ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
                ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
                private = 1;
        }
        snprintf(subids, sizeof(subids), "%s/subids", it_base_dir());
        f = fopen(subids, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "nobody:%u:65536\n", SUBID_BASE);
        fclose(f);
        ck_assert_int_eq(mount(subids, "/etc/subuid", NULL, MS_BIND, NULL), 0);
        ck_assert_int_eq(mount(subids, "/etc/subgid", NULL, MS_BIND, NULL), 0);
}

static void unbind_subids(void) {
        ck_assert_int_eq(umount2("/etc/subuid", MNT_DETACH), 0);
        ck_assert_int_eq(umount2("/etc/subgid", MNT_DETACH), 0);
}

/* A rootless daemon whose user has subordinate ids (bind_subids): the
 * image's users exist (ids 1 .. 65535 are the range), its User is the default, and what
 * they leave, which the daemon's user may not delete, goes with the sandbox all the
 * same (sbx-init --remove). */
START_TEST(rootless_subordinate_ids) {
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *id, path[1200];
        sbx_client *c;
        int i;

        bind_subids();
        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        digest = pull(c, layout);
        id = must_create(c, digest);
        expect_out(c, id, NULL,
                   "busybox id -u; busybox cat /proc/self/uid_map | busybox tr -s ' ' | busybox tr '\\n' ';'",
                   "1000\n 0 65534 1; 1 1400000 65535;");
        expect_out(c, id, "root",
                   "busybox mkdir -p /home/u/d && echo x > /home/u/d/f && "
                   "busybox chown -R 1000:1000 /home/u && busybox chmod 700 /home/u /home/u/d && "
                   "busybox stat -c %u /home/u",
                   "1000\n");
        /* The workspace is everyone's there: the image's user writes it. */
        expect_out(c, id, NULL, "echo w > /workspace/w && busybox cat /workspace/w", "w\n");
        snprintf(path, sizeof(path), "%s/sandboxes/%s/root/upper/home/u", d.state, id);
        {
                struct stat st;
                ck_assert_int_eq(lstat(path, &st), 0);
                ck_assert_uint_eq(st.st_uid, 1400000 + 999);
        }
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        /* Deleted off the loop: wait for the trash to empty. */
        snprintf(path, sizeof(path), "%s/trash", d.state);
        for (i = 0; i < 200 && img_entries(path) > 0; i++)
                usleep(50000);
        ck_assert_msg(img_entries(path) == 0, "%d entries left in %s", img_entries(path),
                      path);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Adds tag to the layout: the image "img" and a layer of what the shell commands make
 * (run as root in an empty directory, whose entries become the layer's, numeric ids
 * kept). */
static void add_layer(const char *layout, const char *tag, const char *make) {
        char cmd[3000], dir[700];

        snprintf(dir, sizeof(dir), "%s/layer-%s", it_base_dir(), tag);
        snprintf(cmd, sizeof(cmd),
                 "set -e; mkdir -p %s/t; cd %s/t; %s; tar --numeric-owner -cf ../l.tar *; "
                 "umoci raw add-layer --image %s:img --tag %s ../l.tar; chmod -R a+rX %s",
                 dir, dir, make, layout, tag, layout);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* Tag "owners": /home/app (0700) and /home/app/f are 1000:1000's, /srv/d (0750) and
 * /srv/d/x 100:101's, and /high 70000:70001's (beyond the 65535 ids a sandbox maps). */
static void add_owners_layer(const char *layout) {
        add_layer(layout, "owners",
                  "mkdir -p home/app srv/d; echo f > home/app/f; echo x > srv/d/x; "
                  "echo h > high; chown -R 1000:1000 home/app; chmod 700 home/app; "
                  "chown -R 100:101 srv/d; chmod 750 srv/d; chown 70000:70001 high");
}

/* Entries beneath the tree at path owned by a uid or gid of SUBID_BASE or above. */
static int subid_files;
static int count_subid(const char *path, const struct stat *st, int flag, struct FTW *f) {
        (void)path, (void)flag, (void)f;
        subid_files += st->st_uid >= SUBID_BASE || st->st_gid >= SUBID_BASE;
        return 0;
}

static int files_of_subids(const char *path) {
        subid_files = 0;
        ck_assert_int_eq(nftw(path, count_subid, 16, FTW_PHYS), 0);
        return subid_files;
}

/* Waits (10 s at most) until dir has no entry; fails showing how many are left. */
static void wait_empty(const char *dir) {
        int i;

        for (i = 0; i < 200 && img_entries(dir) != 0; i++)
                usleep(50000);
        ck_assert_msg(img_entries(dir) == 0, "%d entries left in %s", img_entries(dir), dir);
}

/* A rootless daemon with subordinate ids unpacks the layers in a namespace that maps
 * them (layerns.h): inside a sandbox the image's files have the image's owners (1000,
 * 100:101; an id beyond the map is root's), the users write what the image lets them,
 * and on the host the layers' files are the subordinate ids. A restart without the ids
 * is refused, naming the store's mapping; with them back, removing the image leaves
 * nothing of its layers. */
START_TEST(rootless_layers_keep_owners) {
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *id, path[1200];
        sbx_client *c;

        add_owners_layer(layout);
        bind_subids();
        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        digest = img_pull(c, layout, "owners");
        id = must_create(c, digest);
        expect_out(c, id, "root", "busybox stat -c %u:%g /home/app /home/app/f /srv/d /srv/d/x /high",
                   "1000:1000\n1000:1000\n100:101\n100:101\n0:0\n");
        expect_out(c, id, "1000",
                   "echo mine > /home/app/new && busybox cat /home/app/f /home/app/new && "
                   "busybox stat -c %u /home/app/new",
                   "f\nmine\n1000\n");
        expect_out(c, id, NULL, "busybox id -u; busybox id -g; echo m2 > /home/app/n2 && "
                   "busybox stat -c %u:%g /home/app/n2", "1000\n1000\n1000:1000\n");
        expect_out(c, id, "100:101", "echo y > /srv/d/y && busybox cat /srv/d/x /srv/d/y",
                   "x\ny\n");
        /* Another user may not: the owners hold. */
        expect_out(c, id, "1000", "busybox ls /srv/d 2>/dev/null || echo denied", "denied\n");
        /* The layers on the host: the image's ids as the subordinate ids. */
        snprintf(path, sizeof(path), "%s/images/layers", d.state);
        ck_assert_int_ge(files_of_subids(path), 4);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        /* The same store without the ids: refused, naming how its layers were made. */
        unbind_subids();
        it_daemon_respawn(&d, NULL);
        ck_assert_int_ne(it_daemon_exit_status(&d), 0);
        ck_assert_int_eq(it_log_count(&d, "its layers were unpacked with ids 1-65535 as the "
                                          "subordinate uids from 1400000"),
                         1);

        bind_subids();
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_OK);
        ck_assert_int_eq(sbx_image_prune(c, NULL), SBX_OK);
        snprintf(path, sizeof(path), "%s/images/layers", d.state);
        wait_empty(path);
        snprintf(path, sizeof(path), "%s/images/trash", d.state);
        wait_empty(path);
        snprintf(path, sizeof(path), "%s/images/tmp", d.state);
        wait_empty(path);
        ck_assert_int_eq(files_of_subids(d.state), 0);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The other way: a store a rootless daemon filled without subordinate ids (its layers
 * its user's files) is refused once the ids appear, naming how to remove it; removed,
 * the daemon starts and pulls with the image's owners. */
START_TEST(rootless_store_refuses_the_other_way) {
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, path[1200];
        sbx_client *c;

        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        free(img_pull(c, layout, "img"));
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        bind_subids();
        it_daemon_respawn(&d, NULL);
        ck_assert_int_ne(it_daemon_exit_status(&d), 0);
        ck_assert_int_eq(it_log_count(&d, "its layers were unpacked as the daemon's user's "
                                          "files (no subordinate ids), and this sbxd unpacks "
                                          "them with ids 1-65535"),
                         1);
        ck_assert_int_eq(it_log_count(&d, "its files are the daemon's user's"), 1);
        snprintf(path, sizeof(path), "rm -rf %s/images", d.state);
        ck_assert_int_eq(system(path), 0);
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        add_owners_layer(layout);
        digest = img_pull(c, layout, "owners");
        snprintf(path, sizeof(path), "%s/images/layers", d.state);
        ck_assert_int_ge(files_of_subids(path), 4);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Entries of the tree at path owned by a subordinate id, counted while it may be
 * written or removed (errors ignored). */
static int racing_subid_files(const char *path) {
        subid_files = 0;
        (void)nftw(path, count_subid, 16, FTW_PHYS);
        return subid_files;
}

/* A rootless daemon with subordinate ids SIGKILLed while it unpacks a layer of 20,000
 * files of 1000's: its helper goes with it, and the next start deletes what the unpack
 * left in the store's tmp/ (files of subordinate ids, which the daemon's user could not
 * delete itself) through the namespace. */
START_TEST(rootless_killed_unpack_leaves_nothing) {
        struct it_daemon d;
        const char *layout = make_image();
        char tmp[800];
        pid_t puller;
        int i, st;

        add_layer(layout, "many",
                  "mkdir -p home/app; python3 -c 'import os\nfor i in range(20000): "
                  "open(\"home/app/f%d\" % i, \"w\").close()'; chown -R 1000:1000 home/app");
        bind_subids();
        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        puller = fork();
        ck_assert_int_ge(puller, 0);
        if (puller == 0) {
                sbx_client *c = it_connect(&d);
                struct sbx_image *img = NULL;
                char source[800];
                snprintf(source, sizeof(source), "oci:%s:many", layout);
                _exit(sbx_image_pull(c, source, NULL, &img) == SBX_OK ? 0 : 1);
        }
        snprintf(tmp, sizeof(tmp), "%s/images/tmp", d.state);
        for (i = 0; i < 1200 && racing_subid_files(tmp) < 100; i++)
                usleep(10000);
        ck_assert_msg(racing_subid_files(tmp) >= 100, "the unpack never wrote into %s", tmp);
        it_daemon_kill(&d);
        ck_assert_int_eq(waitpid(puller, &st, 0), puller);
        ck_assert_int_eq(it_wait_procs("--layer-helper", 0, 10000), 0);
        ck_assert_int_gt(racing_subid_files(tmp), 0);

        it_daemon_restart(&d, NULL);
        ck_assert_int_eq(img_entries(tmp), 0);
        ck_assert_int_eq(files_of_subids(d.state), 0);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx mcp --image: the session's own sandbox is made from the image. */
START_TEST(mcp_from_an_image) {
        static const char in[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
                "\"name\":\"t\",\"version\":\"1\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"run_command\",\"arguments\":{\"command\":"
                "\"busybox id -u; pwd; echo $GREETING\"}}}\n";
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *out = NULL, *err = NULL;
        sbx_client *c;

        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        ck_assert_int_eq(it_sbx(&d, in, sizeof(in) - 1, &out, &err,
                                (const char *const[]){"mcp", "--image", digest, NULL}),
                         0);
        ck_assert_msg(strstr(out, "\"stdout\":\"1000\\n/data\\nhi\\n\""), "%s\n%s", out, err);
        ck_assert_msg(strstr(err, "terminated"), "%s", err);
        free(out);
        free(err);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

END_TEST

/* BOB's image sandbox with a writable directory of his (root daemon): the image's user
 * works there as BOB (what it creates is BOB's on the host); root of the sandbox may
 * change BOB's files but creates nothing there (no id of the sandbox's block lands on
 * the host). */
static void bob_writes(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        char source[800], *digest, *id = NULL;
        const char *w[] = {arg};
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_image *img = NULL;
        struct sbx_exec_opts e;
        struct sbx_result *res = NULL;

        snprintf(source, sizeof(source), "oci:%.*s/oci:img", (int)(strrchr(arg, '/') - arg), arg);
        if (sbx_image_pull(c, source, NULL, &img) != SBX_OK) {
                say(r, "pull: %s\n", sbx_error_message(c));
                return;
        }
        digest = strdup(img->digest);
        sbx_image_free(img);
        sbx_create_opts_init(&o);
        o.image = digest;
        sbx_policy_workspace_write(&o.policy, w, 1, SBX_NETWORK_NONE);
        if (sbx_create(c, &o, &sb) != SBX_OK) {
                say(r, "create: %s\n", sbx_error_message(c));
                return;
        }
        id = strdup(sb->id);
        sbx_sandbox_free(sb);
        for (int i = 0; i < 2; i++) {
                char shell[1200];
                if (i)
                        snprintf(shell, sizeof(shell),
                                 "echo more >> %s/mine && echo root > %s/roots 2>/dev/null; "
                                 "busybox cat %s/mine; busybox ls %s",
                                 arg, arg, arg, arg);
                else
                        snprintf(shell, sizeof(shell),
                                 "busybox id -u; echo mine > %s/mine; busybox stat -c %%u %s/mine; "
                                 "busybox chmod 4755 %s/mine 2>/dev/null || echo no setuid",
                                 arg, arg, arg);
                sbx_exec_opts_init(&e);
                e.shell = shell;
                e.timeout_ms = 20000;
                e.user = i ? "root" : NULL;
                if (sbx_exec(c, id, &e, &res) != SBX_OK) {
                        say(r, "exec: %s\n", sbx_error_message(c));
                        break;
                }
                say(r, "%s", (char *)res->stdout_data);
                sbx_result_free(res);
                res = NULL;
        }
        sbx_terminate(c, id, NULL);
        free(id);
        free(digest);
        sbx_close(c);
}

START_TEST(writable_paths_as_the_owner) {
        struct it_daemon d;
        const char *layout = make_image();
        char dir[800], path[900], *said;
        struct stat st;

        snprintf(dir, sizeof(dir), "%.*s/bobs", (int)(strrchr(layout, '/') - layout), layout);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        ck_assert_int_eq(chown(dir, BOB, BOB), 0);
        it_daemon_start(&d, group_flags);
        said = as_bob(bob_writes, &d, dir);
        ck_assert_msg(strcmp(said, "1000\n1000\nno setuid\nmine\nmore\nmine\n") == 0, "BOB saw: %s",
                      said);
        free(said);
        snprintf(path, sizeof(path), "%s/mine", dir);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_uid, BOB);
        snprintf(path, sizeof(path), "%s/roots", dir);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Writes text to path through a temporary name renamed over it, as editors and
 * credential tools replace a file (the mount over the old one goes with it). */
static void replace_file(const char *path, const char *text) {
        char tmp[1200];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.new", path);
        f = fopen(tmp, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_ge(fputs(text, f), 0);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(tmp, 0666), 0);
        ck_assert_int_eq(rename(tmp, path), 0);
}

/* The host's file path holds want (its first line, up to 63 bytes). */
static void expect_file(const char *path, const char *want) {
        FILE *f = fopen(path, "r");
        char line[64] = "";

        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        fclose(f);
        ck_assert_str_eq(line, want);
}

/* Root mode: a process of image sandbox id that opened file (in a writable path, bare)
 * is killed when sbx-init --reapply covers it (its descriptor would outlive the mount),
 * and the file cannot be written after. The helper is run by hand, as the guard runs it
 * (in the sandbox's mount namespace, as the host's root), so that the window is as long
 * as the test needs. */
static void reapply_kills_holders(sbx_client *c, const char *id, const char *file) {
        char cmd[1400];
        pid_t holder = -1;
        int st;

        snprintf(cmd, sizeof(cmd),
                 "busybox setsid busybox sh -c 'exec 3>>%s; exec busybox sleep 779.4323' "
                 "</dev/null >/dev/null 2>&1 &",
                 file);
        free(run_as(c, id, NULL, cmd));
        for (int i = 0; i < 250 && holder < 0; i++) {
                holder = it_find_proc("busybox sleep ", "sleep 779.4323");
                if (holder < 0)
                        usleep(20000);
        }
        ck_assert_int_gt(holder, 0);
        st = it_reapply(holder, "read-only", file);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reapply status 0x%x", st);
        ck_assert_int_eq(it_wait_procs("sleep 779.4323", 0, 5000), 0);
        snprintf(cmd, sizeof(cmd), "echo EVIL 2>/dev/null >>%s && echo written; true", file);
        expect_out(c, id, NULL, cmd, "");
}

/* 1 once the output of shell in id (as the image's user) lacks needle, within 5 s. */
static int eventually_lacks(sbx_client *c, const char *id, const char *shell, const char *needle) {
        for (int i = 0; i < 250; i++) {
                char *out = run_as(c, id, NULL, shell);
                int clean = strstr(out, needle) == NULL;
                free(out);
                if (clean)
                        return 1;
                usleep(20000);
        }
        return 0;
}

/* The guard keeps an image's sandbox's hidden and read-only paths in its writable host
 * path covered when the host replaces them (a rename over a file takes its mount with
 * the old one), as for a sandbox of the host's root: the new secret is not read, the
 * new settings not written. Under a root daemon (name "gw") or a rootless one. */
static void guard_covers_on(const char *layout, const char *name, int rootless) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        char dir[800], secret[900], settings[900], cmd[1000], *wv[1], *drv[1], *dwv[1];
        char *digest, *out;
        sbx_client *c;

        snprintf(dir, sizeof(dir), "%s/%s", it_base_dir(), name);
        ck_assert_int_eq(mkdir(dir, 0777), 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        snprintf(secret, sizeof(secret), "%s/secret", dir);
        snprintf(settings, sizeof(settings), "%s/settings", dir);
        replace_file(secret, "old-secret\n");
        replace_file(settings, "host-settings\n");
        if (rootless) {
                ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
                it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        } else {
                it_daemon_start(&d, group_flags);
        }
        c = it_connect(&d);
        digest = pull(c, layout);
        wv[0] = dir;
        drv[0] = secret;
        dwv[0] = settings;
        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.writable_paths.v = wv;
        o.policy.writable_paths.n = 1;
        o.policy.denied_read_paths.v = drv;
        o.policy.denied_read_paths.n = 1;
        o.policy.denied_write_paths.v = dwv;
        o.policy.denied_write_paths.n = 1;
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "create: %s", sbx_error_message(c));
        snprintf(cmd, sizeof(cmd), "busybox cat %s 2>/dev/null; true", secret);
        out = run_as(c, s->id, NULL, cmd);
        ck_assert_msg(strstr(out, "old-secret") == NULL, "the hidden file was shown: %s", out);
        free(out);

        replace_file(secret, "new-secret\n");
        ck_assert_msg(eventually_lacks(c, s->id, cmd, "new-secret"),
                      "the replaced secret stayed readable");
        /* Once the guard says so, the replaced settings are read-only again (in the
         * milliseconds before, the sandbox could have written them: docs/security.md). */
        replace_file(settings, "host-settings-2\n");
        ck_assert_int_eq(it_wait_log(&d, "/settings changed on the host: covered again", 1), 1);
        snprintf(cmd, sizeof(cmd), "echo EVIL 2>/dev/null >%s && echo written; true", settings);
        out = run_as(c, s->id, NULL, cmd);
        ck_assert_msg(strstr(out, "written") == NULL, "the replaced read-only file was written");
        free(out);
        expect_file(settings, "host-settings-2\n");
        if (!rootless) {
                snprintf(cmd, sizeof(cmd), "%s/bare", dir);
                replace_file(cmd, "bare\n");
                reapply_kills_holders(c, s->id, cmd);
                expect_file(cmd, "bare\n");
        }
        ck_assert_int_eq(sbx_terminate(c, s->id, NULL), SBX_OK);
        sbx_sandbox_free(s);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

START_TEST(guard_covers_replaced_paths) {
        const char *layout = make_image();

        /* The guard enters a sandbox through its init's pidfd, which valgrind does not
         * emulate (`make valgrind`). */
        if (getenv("SBX_VALGRIND"))
                return;
        guard_covers_on(layout, "gw", 0);
        guard_covers_on(layout, "gw-rootless", 1);
}
END_TEST

/* A disk limit holds the writable root and the workspace together (one filesystem
 * image, one project quota, or, rootless, one tmpfs): writing past it in / fills
 * /workspace too. Under a root daemon, then a rootless one. */
static void disk_limit_on(const char *layout, int rootless) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        enum sbx_code rc;
        char *digest;
        sbx_client *c;

        if (rootless)
                it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        else
                it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.limits.disk_bytes = 20u << 20;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        rc = sbx_create(c, &o, &sb);
        ck_assert_msg(rc == SBX_OK, "%s", sbx_error_message(c));
        /* 30 MiB into the root stops near 20; then the workspace has no room. */
        expect_out(c, sb->id, "root", IMG_DISK_CAPPED_SHELL, "capped\nshared\n");
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

START_TEST(disk_limit_holds_the_root) {
        const char *layout = make_image();

        disk_limit_on(layout, 0);
        disk_limit_on(layout, 1);
}
END_TEST

/* Runs shell in id as root; its stdout (freed by the caller), with *ret_disk 1 when its
 * result's limits_hit names "disk". */
static char *root_run_hits(sbx_client *c, const char *id, const char *shell, int *ret_disk) {
        const char *argv[] = {"/bin/sh", "-c", shell, NULL};
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        char *out;

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.timeout_ms = 120000;
        o.user = "root";
        ck_assert_msg(sbx_exec(c, id, &o, &r) == SBX_OK, "exec %s: %s", shell,
                      sbx_error_message(c));
        *ret_disk = 0;
        for (size_t i = 0; i < r->limits_hit.n; i++)
                *ret_disk |= strcmp(r->limits_hit.v[i], "disk") == 0;
        out = strdup((char *)r->stdout_data);
        sbx_result_free(r);
        return out;
}

/* After first (shell), 16 MiB into file in id, as root, end in ENOSPC (dd exits 1),
 * and the result's limits_hit names the disk. */
static void expect_full(sbx_client *c, const char *id, const char *first, const char *file) {
        char shell[600], *out;
        int hit;

        snprintf(shell, sizeof(shell),
                 "%s busybox dd if=/dev/zero of=%s bs=1M count=16 2>/tmp/e; echo $?; "
                 "busybox grep -c 'No space left' /tmp/e",
                 first, file);
        out = root_run_hits(c, id, shell, &hit);
        ck_assert_msg(strcmp(out, "1\n1\n") == 0, "16 MiB into %s: %s", file, out);
        ck_assert_msg(hit, "limits_hit has no disk after %s filled", file);
        free(out);
}

/* The lines of this process's mount table (a namespace of its own: other programs'
 * mounts do not count). */
static int mount_lines(void) {
        FILE *f = fopen("/proc/self/mountinfo", "r");
        char line[8192];
        int n = 0;

        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                n++;
        fclose(f);
        return n;
}

/* A root daemon that limits disks with tmpfs: one tmpfs, which stage 0 makes in no
 * mount table, holds an image sandbox's writable root and workspace: 16 MiB into / or
 * into /workspace is ENOSPC under 8 MiB, named in limits_hit, and what / holds leaves
 * the workspace no room; the host's mount table never lists it. */
START_TEST(disk_limit_tmpfs_as_root) {
        static const char *const flags[] = {"--disk-via", "tmpfs", "--warm", "0", "--spares", "0",
                                            NULL};
        const char *layout = make_image();
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        char *digest, *out;
        int hit, before;
        sbx_client *c;

        it_private_mounts();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        before = mount_lines();
        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.limits.disk_bytes = 8u << 20;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_int_eq(mount_lines(), before);
        /* The workspace is the image's user's, on the tmpfs. */
        expect_out(c, sb->id, NULL,
                   "busybox stat -c %u:%g /workspace; busybox stat -f -c %T /workspace",
                   "1000:1000\ntmpfs\n");
        /* The file requests reach it too. */
        ck_assert_msg(sbx_write(c, sb->id, "/workspace/hello", "hi\n", 3, 0, 0) == SBX_OK, "%s",
                      sbx_error_message(c));
        expect_out(c, sb->id, NULL, "busybox cat /workspace/hello", "hi\n");

        expect_full(c, sb->id, "", "/big");
        expect_full(c, sb->id, "busybox rm /big;", "/workspace/w");
        /* One limit: 6 MiB in / leave the workspace less than 4. */
        out = root_run_hits(c, sb->id,
                            "busybox rm /workspace/w; busybox dd if=/dev/zero of=/big bs=1M "
                            "count=6 2>/dev/null && echo fits; busybox dd if=/dev/zero "
                            "of=/workspace/w bs=1M count=4 2>/dev/null || echo shared",
                            &hit);
        ck_assert_msg(strcmp(out, "fits\nshared\n") == 0, "%s", out);
        ck_assert(hit);
        free(out);
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        ck_assert_int_eq(mount_lines(), before);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A root daemon with a --uid-base outside sbxd's own ranges has no share of the image
 * ids it could call its own (another daemon's could be the same): refused, saying so. */
START_TEST(custom_uid_base_has_no_blocks) {
        static const char *const flags[] = {"--uid-base", "1900000000", "--warm", "0",
                                            "--spares", "0", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *id = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        ck_assert_int_eq(create_from(c, digest, &id), SBX_UNIMPLEMENTED);
        ck_assert_msg(strstr(sbx_error_message(c), "--uid-base (1900000000) is none of sbxd's "
                                                   "own ranges"),
                      "%s", sbx_error_message(c));
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The sbx tool: create --image, exec --user, info. */
START_TEST(through_the_cli) {
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *out = NULL, *err = NULL, id[128];
        sbx_client *c;

        it_daemon_start(&d, group_flags);
        c = it_connect(&d);
        digest = pull(c, layout);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"create", "--image", digest, NULL}),
                         0);
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(out, "\n"), out);
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"exec", "--user", "root", id, "--",
                                                      "busybox", "id", "-u", NULL}),
                         0);
        ck_assert_str_eq(out, "0\n");
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err, (const char *const[]){"info", id, NULL}),
                         0);
        ck_assert_msg(strstr(out, digest), "%s", out);
        free(out);
        free(err);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB pulls the image from the same layout under his own name (the source) and creates
 * from it: "OK|ID|IMAGE|DIGEST|OUT" or "CODE|message". */
static void bob_pulls_and_creates(struct it_daemon *d, const char *layout, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_sandbox *s = NULL;
        struct sbx_result *res = NULL;
        struct sbx_exec_opts e;
        const char *argv[] = {"/bin/sh", "-c", "busybox id -u; busybox hostname; echo $GREETING",
                              NULL};
        char source[800], *digest, *id = NULL;
        enum sbx_code rc;

        snprintf(source, sizeof(source), "oci:%s:img", layout);
        digest = img_pull(c, layout, "img");
        rc = create_from(c, source, &id);
        if (rc != SBX_OK) {
                say(r, "%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
                goto out;
        }
        sbx_exec_opts_init(&e);
        e.argv = argv;
        e.argc = 3;
        e.timeout_ms = 30000;
        rc = sbx_get(c, id, &s);
        if (rc == SBX_OK)
                rc = sbx_exec(c, id, &e, &res);
        if (rc != SBX_OK)
                say(r, "%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        else
                say(r, "OK|%s|%s|%s|%s", id, s->image, s->image_digest,
                    (char *)res->stdout_data);
        sbx_result_free(res);
        sbx_sandbox_free(s);
        (void)sbx_terminate(c, id, NULL);
out:
        free(id);
        free(digest);
        sbx_close(c);
}

/* --warm-image REF=N: N sandboxes of root's image REF wait set up (after REF is pulled:
 * before, the daemon says so once); a create of the same content with the default
 * policy claims one, by any user and under any name of theirs (BOB's own), keeping the
 * image's user, its own block of ids, the client's id as host name and the image's
 * digest in its record; another policy is made from a plain spare; the pool fills up
 * again; the end leaves nothing. */
START_TEST(warm_image_pool) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *said, *a, *cold, want[1400], needle[200];
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "2",
                               "--warm-image", ref, NULL};
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        unsigned long base_a;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        it_daemon_start(&d, flags);
        ck_assert_int_eq(it_wait_log(&d, "no sandbox of it is kept warm until then", 1), 1);
        c = it_connect(&d);
        digest = pull(c, layout);
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);

        /* BOB: his own name for the same content claims one. */
        said = as_bob(bob_pulls_and_creates, &d, layout);
        ck_assert_msg(strncmp(said, "OK|", 3) == 0, "BOB got: %s", said);
        snprintf(want, sizeof(want), "|oci:%s:img|%s|1000\n", layout, digest);
        ck_assert_msg(strstr(said, want), "BOB got: %s (want %s)", said, want);
        {
                char bob_id[128];
                snprintf(bob_id, sizeof(bob_id), "%.*s", (int)strcspn(said + 3, "|"), said + 3);
                snprintf(want, sizeof(want), "\n%s\nhi\n", bob_id); /* its host name */
                ck_assert_msg(strstr(said, want), "BOB got: %s", said);
                snprintf(needle, sizeof(needle), "sbx=%s: claimed ~warm-", bob_id);
                ck_assert_int_eq(it_log_count(&d, needle), 1);
        }
        free(said);

        /* Root, by digest: another one, a block of its own; root inside writes. */
        ck_assert_int_ge(it_wait_log(&d, ": warm and ready", 3), 3); /* the pool tops up */
        a = must_create(c, digest);
        snprintf(needle, sizeof(needle), "sbx=%s: claimed ~warm-", a);
        ck_assert_int_eq(it_log_count(&d, needle), 1);
        expect_out(c, a, NULL, "busybox id -u; pwd", "1000\n/data\n");
        expect_out(c, a, "root", "echo one > /etc/x1 && busybox cat /etc/x1", "one\n");
        base_a = map_base(c, a);
        ck_assert_uint_ge(base_a, SBX_IMAGE_UID_BASE);
        ck_assert_int_eq(sbx_get(c, a, &s), SBX_OK);
        ck_assert_str_eq(s->image, digest);
        ck_assert_str_eq(s->image_digest, digest);
        sbx_sandbox_free(s);
        s = NULL;

        /* Another policy: made cold, from the plain spare (init already in its cgroup;
         * never the built one, whose base is the host's root). */
        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.network = SBX_NETWORK_FULL;
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "%s", sbx_error_message(c));
        cold = strdup(s->id);
        sbx_sandbox_free(s);
        snprintf(needle, sizeof(needle), "sbx=%s: claimed", cold);
        ck_assert_int_eq(it_log_count(&d, needle), 0);
        snprintf(needle, sizeof(needle), "sbx=%s: takes the plain spare", cold);
        ck_assert_int_eq(it_log_count(&d, needle), 1);
        expect_out(c, cold, "root", "echo two > /etc/x1 && busybox cat /etc/x1", "two\n");

        /* Root's name for it goes (BOB still has it): the pool's sandboxes of that name
         * end, and none is made until it is pulled again. */
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_OK);
        ck_assert_int_eq(it_wait_log(&d, "its image's name names no image now", 2), 2);
        ck_assert_int_eq(it_log_count(&d, "no sandbox of it is kept warm until then"), 2);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, cold, NULL), SBX_OK);
        free(a);
        free(cold);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        /* The pool's sandboxes went with the daemon, their directories too. */
        {
                char dir[700];
                snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
                ck_assert_int_eq(img_entries(dir), 0);
        }
}
END_TEST

/* The terminal of a tty command in id as user (NULL: the image's): its name and owner
 * ("/dev/pts/N UID"), or the reason it did not start. */
static void expect_terminal(sbx_client *c, const char *id, const char *user, const char *uid) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        char want[64];

        sbx_exec_opts_init(&o);
        o.shell = "t=$(busybox tty) && echo \"$t $(busybox stat -c %u $t)\"";
        o.tty = 1;
        o.user = user;
        o.timeout_ms = 60000;
        ck_assert_msg(sbx_exec(c, id, &o, &r) == SBX_OK, "%s", sbx_error_message(c));
        snprintf(want, sizeof(want), " %s\r\n", uid);
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0 &&
                              strncmp((char *)r->stdout_data, "/dev/pts/", 9) == 0 &&
                              strstr((char *)r->stdout_data, want),
                      "a terminal as %s: %s: %s", user ? user : "the image's user",
                      sbx_outcome_name(r->outcome),
                      r->start_error ? r->start_error : (char *)r->stdout_data);
        sbx_result_free(r);
}

/* A terminal in a sandbox of an image (root and rootless sbxd): the command's, as the
 * image's user and as root. The daemon opens the pty outside, as a host id the image's
 * namespace does not map: the command's chown of it failed (EPERM) until the sandbox's
 * devpts gave its new ptys to its own root (init/mnt.c). */
START_TEST(terminal_in_an_image_sandbox) {
        struct it_daemon d;
        const char *layout = make_image();
        char *digest, *id;
        sbx_client *c;

        for (int rootless = 0; rootless < 2; rootless++) {
                if (rootless)
                        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
                else
                        it_daemon_start(&d, NULL);
                c = it_connect(&d);
                digest = img_pull(c, layout, "img");
                id = must_create(c, digest);
                expect_terminal(c, id, NULL, rootless ? "0" : "1000");
                expect_terminal(c, id, "root", "0");
                ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
                free(id);
                free(digest);
                sbx_close(c);
                ck_assert_int_eq(it_daemon_stop(&d), 0);
        }
}
END_TEST

/* A snapshot in a rootless daemon whose store keeps the subordinate ids: files of the
 * image's user in a private directory, and root's in /etc, come back in a sandbox made
 * from it with their owners; so they do from its export, imported again. */
START_TEST(rootless_subids_snapshot) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        char *digest, *id, *b, path[900], src[1000];
        sbx_client *c;
        int fd;

        bind_subids();
        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        id = must_create(c, digest);
        expect_out(c, id, NULL,
                   "busybox mkdir -m 700 /workspace/p && echo s > /workspace/p/f && echo ok",
                   "ok\n");
        expect_out(c, id, "root",
                   "echo r > /etc/r && busybox chmod 600 /etc/r && busybox mkdir -m 700 /q && "
                   "echo t > /q/g && busybox chown -R 1000:1000 /q && echo ok",
                   "ok\n");
        ck_assert_msg(sbx_snapshot(c, id, "subsnap", &img) == SBX_OK, "%s",
                      sbx_error_message(c));
        sbx_image_free(img);
        b = must_create(c, "subsnap");
        expect_out(c, b, NULL,
                   "busybox cat /workspace/p/f /q/g; busybox stat -c %u:%g:%a /workspace/p /q",
                   "s\nt\n1000:1000:700\n1000:1000:700\n");
        expect_out(c, b, "root", "busybox cat /etc/r; busybox stat -c %u:%a /etc/r", "r\n0:600\n");
        /* Its export (read in the ids' namespace too) imports again with the owners. */
        snprintf(path, sizeof(path), "%s/subsnap.tar", it_base_dir());
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(sbx_image_export(c, "subsnap", fd, NULL) == SBX_OK, "%s",
                      sbx_error_message(c));
        close(fd);
        ck_assert_int_eq(chmod(it_base_dir(), 0755), 0);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        ck_assert_int_eq(sbx_image_remove(c, "subsnap", NULL), SBX_OK);
        snprintf(src, sizeof(src), "oci-archive:%s", path);
        ck_assert_msg(sbx_image_pull(c, src, NULL, &img) == SBX_OK, "%s", sbx_error_message(c));
        free(b);
        b = must_create(c, img->digest);
        sbx_image_free(img);
        expect_out(c, b, NULL, "busybox cat /workspace/p/f /q/g; busybox stat -c %u:%g:%a /q/g",
                   "s\nt\n1000:1000:644\n");
        free(b);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        unbind_subids();
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("image_sandbox");

        SBX_ADD_TEST_CASE(s, root_inside_root_daemon, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, refusals, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, writable_paths_as_the_owner, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disk_limit_holds_the_root, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disk_limit_tmpfs_as_root, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, guard_covers_replaced_paths, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_daemon, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, through_the_cli, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, custom_uid_base_has_no_blocks, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, mcp_from_an_image, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_subordinate_ids, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, terminal_in_an_image_sandbox, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_subids_snapshot, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_layers_keep_owners, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_killed_unpack_leaves_nothing, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_store_refuses_the_other_way, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, adopted_after_restart, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, debian_installs, 600, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, warm_image_pool, 240, it_fixture_setup_var, it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
