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

/* Makes the test image in the case's directory (readable by everyone: a rootless daemon
 * of nobody's imports it with nobody's rights); returns the layout's path. */
static const char *make_image(void) {
        static char layout[700];
        char dir[600], cmd[2000];

        snprintf(dir, sizeof(dir), "%s/img", it_base_dir());
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        snprintf(cmd, sizeof(cmd), "bash tests/mkimage.sh %s >%s/mkimage.log 2>&1 && chmod -R a+rX %s",
                 dir, dir, dir);
        ck_assert_msg(system(cmd) == 0, "mkimage.sh failed: see %s/mkimage.log", dir);
        ck_assert_int_eq(chmod(it_base_dir(), 0755), 0);
        snprintf(layout, sizeof(layout), "%s/oci", dir);
        return layout;
}

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

/* The stdout of sh -c shell in id as user (NULL: the image's), which must exit 0. */
static char *run_as(sbx_client *c, const char *id, const char *user, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        const char *argv[] = {"/bin/sh", "-c", shell, NULL};
        char *out;

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.timeout_ms = 120000;
        o.user = user;
        ck_assert_msg(sbx_exec(c, id, &o, &r) == SBX_OK, "exec %s: %s", shell,
                      sbx_error_message(c));
        ck_assert_msg(r->has_exit_code && r->exit_code == 0, "%s: exit %d: %s%s", shell,
                      r->exit_code, (char *)r->stdout_data, (char *)r->stderr_data);
        out = strdup((char *)r->stdout_data);
        sbx_result_free(r);
        return out;
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

static void expect_out(sbx_client *c, const char *id, const char *user, const char *shell,
                       const char *want) {
        char *out = run_as(c, id, user, shell);

        ck_assert_msg(strcmp(out, want) == 0, "%s: '%s', not '%s'", shell, out, want);
        free(out);
}

/* The first id of the sandbox's namespace on the host (its uid_map's second field). */
static unsigned long map_base(sbx_client *c, const char *id) {
        char *out = run_as(c, id, "root", "busybox cat /proc/self/uid_map");
        unsigned long in, base, count;

        ck_assert_int_eq(sscanf(out, "%lu %lu %lu", &in, &base, &count), 3);
        ck_assert_uint_eq(in, 0);
        free(out);
        return base;
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
        enum sbx_code rc;
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
        /* A disk limit: refused where this host limits disks with tmpfs (it holds the root
         * only through project quotas or filesystem images: disk_limit_holds_the_root). */
        sbx_create_opts_init(&o);
        o.image = digest;
        o.policy.limits.disk_bytes = 20u << 20;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        rc = sbx_create(c, &o, &s);
        if (rc == SBX_OK) {
                ck_assert_int_eq(sbx_terminate(c, s->id, NULL), SBX_OK);
                sbx_sandbox_free(s);
                s = NULL;
        } else {
                ck_assert_msg(rc == SBX_UNIMPLEMENTED &&
                                      strstr(sbx_error_message(c), "holds its writable root "
                                                                   "only with project quotas "
                                                                   "or filesystem images"),
                              "%s", sbx_error_message(c));
        }

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
        if (rc == SBX_UNIMPLEMENTED) {
                /* tmpfs disks (a daemon without loop devices nor project quotas) */
                fprintf(stderr, "disk_limit_holds_the_root: SKIPPED: %s\n", sbx_error_message(c));
        } else {
                ck_assert_msg(rc == SBX_OK, "%s", sbx_error_message(c));
                /* 30 MiB into the root stops near 20; then the workspace has no room. */
                expect_out(c, sb->id, "root",
                           "busybox dd if=/dev/zero of=/big bs=1M count=30 2>/dev/null; "
                           "test $(busybox stat -c %s /big) -lt 21000000 && echo capped; "
                           "busybox dd if=/dev/zero of=/workspace/w bs=1M count=4 2>/dev/null; "
                           "test $(busybox stat -c %s /workspace/w) -lt 1048576 && echo shared",
                           "capped\nshared\n");
                ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
                sbx_sandbox_free(sb);
        }
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

static Suite *make_suite(void) {
        Suite *s = suite_create("image_sandbox");

        SBX_ADD_TEST_CASE(s, root_inside_root_daemon, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, refusals, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, writable_paths_as_the_owner, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disk_limit_holds_the_root, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_daemon, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, through_the_cli, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, custom_uid_base_has_no_blocks, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, mcp_from_an_image, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_subordinate_ids, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_layers_keep_owners, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_killed_unpack_leaves_nothing, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_store_refuses_the_other_way, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, adopted_after_restart, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, debian_installs, 600, it_fixture_setup_var, it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
