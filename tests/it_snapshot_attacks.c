/* it_snapshot_attacks.c: a hostile sandbox against its own snapshot (SnapshotSandbox,
 * sbx fork; docs/snapshots.md "What was tried") on a real root sbxd: overlayfs markers
 * forged where the daemon reads them, file capabilities, device nodes, names tar finds
 * hard, many hard links, and a fork past the owner's bound of sandboxes.
 *
 * The image is tests/mkimage.sh's "img" (busybox in four layers: /etc/greeting, /data/old
 * and more; User 1000:1000); the sandbox's tools are busybox and tests/helpers/sbxt_snap
 * (built static), written into its workspace. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asbob.h"
#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"
#include "snaptest.h"
#include "testutil.h"

static const char *const flags[] = {"--warm", "0", "--spares", "0", NULL};

/* tests/helpers/sbxt_snap, built static (the image has no C library), at /sbxt_snap in
 * the sandbox's root (outside its workspace: what the cases compare there stays theirs). */
static void put_helper(sbx_client *c, const char *id) {
        char cmd[1400], bin[700];
        uint8_t *data;
        size_t len = 0, cap = 4 << 20;
        ssize_t n;
        int fd;

        snprintf(bin, sizeof(bin), "%s/sbxt_snap", it_base_dir());
        if (access(bin, X_OK) != 0) {
                snprintf(cmd, sizeof(cmd), "cc -static -O1 -o %s tests/helpers/sbxt_snap.c", bin);
                ck_assert_msg(system(cmd) == 0, "%s failed (needs the C library's static archive)",
                              cmd);
        }
        fd = open(bin, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        data = malloc(cap);
        while ((n = read(fd, data + len, cap - len)) > 0)
                if ((len += (size_t)n) == cap)
                        data = realloc(data, cap *= 2);
        close(fd);
        ck_assert_msg(sbx_write(c, id, "/workspace/sbxt_snap", data, len, 0755, 0) == SBX_OK,
                      "write the helper: %s", sbx_error_message(c));
        free(data);
        expect_out(c, id, "root", "busybox mv /workspace/sbxt_snap /sbxt_snap && echo ok", "ok\n");
}

/* Root inside a sandbox of a root sbxd sets user.overlay.opaque on a directory of its
 * image and user.overlay.whiteout on an empty file beside a file of its image, in its
 * root and in its workspace, and makes a whiteout device in its workspace: overlayfs
 * does not take them for its own (they are plain data of its files there), so neither
 * does the snapshot: the image's files are still in a sandbox made from it, and so are
 * the marked files. */
START_TEST(forged_overlay_markers_are_data) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, *s, *out, tmp[700];
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        put_helper(c, a);
        /* The image's /data holds fresh; its /etc greeting.new. */
        expect_out(c, a, "root",
                   "busybox mkdir /data/new && echo n > /data/new/f && "
                   "/sbxt_snap setx /data user.overlay.opaque y && "
                   ": > /etc/marked && /sbxt_snap setx /etc/marked user.overlay.whiteout y && "
                   "busybox mkdir -p /workspace/wd && echo w > /workspace/keep && "
                   "/sbxt_snap setx /workspace/wd user.overlay.opaque y && "
                   ": > /workspace/wmark && "
                   "/sbxt_snap setx /workspace/wmark user.overlay.whiteout y",
                   "ok\nok\nok\nok\n");
        /* In the workspace (no overlay), a whiteout device: mknod is refused, or it is a
         * device the snapshot leaves out; never a deletion. */
        out = run_as(c, a, "root", "/sbxt_snap whiteout /workspace/keep2; echo x");
        ck_assert_msg(strcmp(out, "EPERM\nx\n") == 0 || strcmp(out, "ok\nx\n") == 0, "%s", out);
        free(out);
        /* The sandbox itself sees every file. */
        expect_out(c, a, NULL, "busybox ls /data /workspace/wd; busybox cat /etc/greeting.new",
                   "/data:\nfresh\nnew\n\n/workspace/wd:\nchanged\n");
        s = snap(c, a, "markers");
        snprintf(tmp, sizeof(tmp), "%s/images/tmp", d.state);
        ck_assert_int_eq(img_entries(tmp), 0); /* its scratch space is gone */
        b = must_create(c, "markers");
        expect_out(c, b, NULL,
                   "busybox ls /data; busybox cat /data/fresh /etc/greeting.new; "
                   "busybox ls /etc/marked /workspace/wmark; busybox cat /workspace/keep",
                   "fresh\nnew\nfresh\nchanged\n/etc/marked\n/workspace/wmark\nw\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A file capability root inside may set (it has CAP_SETFCAP in its namespace) is not
 * carried into the snapshot: a sandbox made from it finds the file without one. Nor is
 * a FIFO; names with a newline and of 255 bytes and symlinks pointing out of the sandbox
 * come back as they were (a symlink's text, never what it points at); a hard link of the
 * workspace comes back as a copy (the workspace is seeded file by file, seed.h). */
START_TEST(caps_fifos_and_odd_names) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, *s, long_name[256], shell[2000];
        sbx_client *c;

        memset(long_name, 'n', 255);
        long_name[255] = '\0';
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        put_helper(c, a);
        snprintf(shell, sizeof(shell),
                 "busybox cp /bin/busybox /capped && /sbxt_snap setx /capped security.capability cap "
                 "&& /sbxt_snap getx /capped security.capability && "
                 "busybox mkfifo /workspace/fifo && echo l > /workspace/%s && "
                 "echo nl > \"/workspace/a\nb\" && busybox ln /workspace/%s /workspace/hard && "
                 "busybox ln -s /etc/shadow /workspace/out && busybox ln -s ../../../.. "
                 "/workspace/up && echo done",
                 long_name, long_name);
        expect_out(c, a, "root", shell, "ok\n20\ndone\n");
        /* Root inside cannot uncover the upper directory's /workspace (where what it
         * wrote would go into the layer's workspace/ as well). */
        expect_out(c, a, "root",
                   "busybox umount /workspace 2>/dev/null || busybox umount -l /workspace "
                   "2>/dev/null || echo kept",
                   "kept\n");
        s = snap(c, a, "odd");
        b = must_create(c, "odd");
        put_helper(c, b);
        snprintf(shell, sizeof(shell),
                 "/sbxt_snap getx /capped security.capability; busybox ls /workspace/fifo "
                 "2>/dev/null || echo nofifo; busybox cat /workspace/%s \"/workspace/a\nb\" "
                 "/workspace/hard; busybox stat -c %%h /workspace/hard; "
                 "busybox readlink /workspace/out; busybox readlink /workspace/up",
                 long_name);
        expect_out(c, b, "root", shell, "ENODATA\nnofifo\nl\nnl\nl\n1\n/etc/shadow\n../../../..\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Files named as OCI's whiteouts (".wh.NAME", ".wh..wh..opq") that a sandbox made: a
 * layer cannot hold them as files (each would be read as a deletion), so the snapshot
 * leaves them out, as it does devices, and deletes nothing of the image. */
START_TEST(whiteout_names_are_left_out) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, *s;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, "root",
                   "echo x > /etc/.wh.greeting.new && busybox mkdir /data/sub && "
                   "echo y > /data/.wh..wh..opq && echo z > /data/sub/.wh..wh..opq && "
                   "echo w > /workspace/.wh.w && echo ok",
                   "ok\n");
        s = snap(c, a, "whnames");
        b = must_create(c, "whnames");
        expect_out(c, b, NULL,
                   "busybox cat /etc/greeting.new /data/fresh; busybox ls -A /data /workspace",
                   "changed\nfresh\n/data:\nfresh\nsub\n\n/workspace:\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless daemon (nobody's): its overlay's markers are user.overlay.* xattrs, which
 * root inside cannot forge through it (overlayfs refuses its own names, or from Linux
 * 6.7 stores them escaped, as user.overlay.overlay.*); a deletion and a replaced
 * directory come back as such, the forged ones as plain files, when this sbxd has a
 * freezer (else the snapshot is UNIMPLEMENTED, naming it). */
START_TEST(rootless_markers) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        char *base, *a, *b, *out;
        enum sbx_code rc;
        sbx_client *c;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        put_helper(c, a);
        expect_out(c, a, NULL,
                   "busybox rm /etc/greeting.new && busybox rm -rf /data && busybox mkdir /data && "
                   "echo n > /data/n && echo ok",
                   "ok\n");
        /* Through a userxattr overlay these are refused (before Linux 6.7) or stored
         * escaped (user.overlay.overlay.*): never overlayfs's own in the upper. */
        out = run_as(c, a, NULL, "/sbxt_snap setx /etc user.overlay.opaque y; : > /etc/m; "
                                 "/sbxt_snap setx /etc/m user.overlay.whiteout y");
        free(out);
        rc = sbx_snapshot(c, a, "rootless", &img);
        if (rc == SBX_UNIMPLEMENTED) {
                ck_assert_msg(strstr(sbx_error_message(c), "freezer"), "%s", sbx_error_message(c));
        } else {
                ck_assert_msg(rc == SBX_OK, "%s", sbx_error_message(c));
                sbx_image_free(img);
                b = must_create(c, "rootless");
                expect_out(c, b, NULL,
                           "busybox ls /etc/greeting.new 2>/dev/null || echo gone; busybox ls /data; "
                           "busybox ls /etc/m /etc/greeting.link",
                           "gone\nn\n/etc/greeting.link\n/etc/m\n");
                free(b);
        }
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --max-snapshot-bytes-per-uid counts what the store measured, not what an image's
 * config says: a pulled image labelled io.sbxd.snapshot.bytes 2^64-1 neither blocks its
 * owner's snapshots nor (two of 2^63, whose sum wraps to 0) hides them. */
START_TEST(forged_snapshot_bytes_label) {
        static const char *const bound[] = {"--warm", "0", "--spares", "0",
                                            "--max-snapshot-bytes-per-uid", "8M", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        char forged[800], cmd[3000], *base, *a, *s, *f;
        sbx_client *c;

        snprintf(forged, sizeof(forged), "%s/forged", it_base_dir());
        snprintf(cmd, sizeof(cmd),
                 "cp -a %s %s && umoci config --image %s:img --tag forged "
                 "--config.label io.sbxd.snapshot.bytes=18446744073709551615 >/dev/null 2>&1 && "
                 "chmod -R a+rX %s",
                 layout, forged, forged, forged);
        ck_assert_int_eq(system(cmd), 0);
        it_daemon_start(&d, bound);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        f = img_pull(c, forged, "forged");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo small > /workspace/s && echo ok", "ok\n");
        s = snap(c, a, "after-forged");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(s);
        free(f);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The number of the caller's live sandboxes. */
static size_t live(sbx_client *c) {
        struct sbx_sandbox_list *l = NULL;
        size_t n;

        ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_OK);
        n = l->n;
        sbx_sandbox_list_free(l);
        return n;
}

/* A fork whose creates pass --max-sandboxes-per-uid: all or nothing, the source alone
 * left running, its snapshot kept as an image. */
START_TEST(fork_past_the_owner_bound_leaves_none) {
        static const char *const bound[] = {"--warm", "0", "--spares", "0",
                                            "--max-sandboxes-per-uid", "3", NULL};
        struct sbx_fork_opts fo = {.count = 4};
        struct sbx_fork *f = NULL;
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a;
        sbx_client *c;

        it_daemon_start(&d, bound);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        ck_assert_int_eq(sbx_fork(c, a, &fo, &f), SBX_RESOURCE_EXHAUSTED);
        ck_assert_ptr_null(f);
        ck_assert_uint_eq(live(c), 1);
        expect_out(c, a, NULL, "echo running", "running\n");
        fo.count = 2; /* within it: fine */
        ck_assert_msg(sbx_fork(c, a, &fo, &f) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_uint_eq(f->n, 2);
        ck_assert_uint_eq(live(c), 3);
        sbx_fork_free(f);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB's tries on root's shared sandbox (arg "ID|DIGEST", DIGEST root's own snapshot of
 * another sandbox), a line each: "WHAT|CODE|detail". */
static void bob_on_shared(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_image *img = NULL;
        char id[128], *made = NULL;
        const char *digest = strchr(arg, '|') + 1;
        enum sbx_code rc;

        if (!c)
                return;
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(arg, "|"), arg);
        rc = sbx_snapshot(c, id, "shared-snap", &img);
        say(r, "snap|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        sbx_image_free(img);
        rc = img_create(c, "shared-snap", NULL, &made);
        say(r, "create-own|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        if (made)
                (void)sbx_terminate(c, made, NULL);
        free(made);
        made = NULL;
        rc = img_create(c, digest, NULL, &made);
        say(r, "create-roots|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? made : sbx_error_message(c));
        free(made);
        img = NULL;
        rc = sbx_image_inspect(c, digest, &img);
        say(r, "inspect-roots|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        sbx_image_free(img);
        rc = sbx_image_remove(c, "roots-only", NULL);
        say(r, "rm-roots|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_image_remove(c, "shared-snap", NULL);
        say(r, "rm-own|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        sbx_close(c);
}

/* BOB, in root's sandbox shared with him, plants a file and snapshots it under a name
 * of root's (arg "ID|NAME"). */
static void bob_takes_a_name(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_connect(d, r);
        struct sbx_image *img = NULL;
        struct sbx_result *res = NULL;
        struct sbx_exec_opts e;
        const char *argv[] = {"/bin/sh", "-c", "echo planted > /workspace/planted", NULL};
        char id[128];
        enum sbx_code rc;

        if (!c)
                return;
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(arg, "|"), arg);
        sbx_exec_opts_init(&e);
        e.argv = argv;
        e.argc = 3;
        rc = sbx_exec(c, id, &e, &res);
        say(r, "exec|%s\n", sbx_code_name(rc));
        sbx_result_free(res);
        rc = sbx_snapshot(c, id, strchr(arg, '|') + 1, &img);
        say(r, "snap|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        sbx_image_free(img);
        rc = sbx_snapshot(c, id, "bobs-own", &img);
        say(r, "snap-new|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        sbx_image_free(img);
        sbx_close(c);
}

/* A user a sandbox is shared with never moves a name its owner has: BOB's snapshot of
 * root's shared sandbox named as one of root's images is refused (root's "app" would
 * otherwise be BOB's planted files, in every sandbox root made from "app" after); under
 * a new name it is both users'. */
START_TEST(share_user_cannot_take_the_owners_names) {
        static const char *const shared[] = {"--socket-group", "3100", "--warm", "0",
                                             "--spares", "0", NULL};
        const uint32_t bob[1] = {BOB};
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_image *img = NULL;
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *app, arg[300], *said;
        sbx_client *c;

        it_daemon_start(&d, shared);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        app = snap(c, a, "app"); /* root's own image "app" */
        sbx_create_opts_init(&o);
        o.image = base;
        o.share_uids = bob;
        o.n_share_uids = 1;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        snprintf(arg, sizeof(arg), "%s|app", sb->id);
        said = as_bob(bob_takes_a_name, &d, arg);
        ck_assert_msg(strstr(said, "exec|OK\n"), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "snap|ALREADY_EXISTS|"), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "snap-new|OK|"), "BOB got: %s", said);
        free(said);
        ck_assert_int_eq(sbx_image_inspect(c, "app", &img), SBX_OK);
        ck_assert_str_eq(img->digest, app);
        sbx_image_free(img);
        ck_assert_int_eq(sbx_image_inspect(c, "bobs-own", &img), SBX_OK);
        sbx_image_free(img);
        ck_assert_int_eq(sbx_terminate(c, sb->id, NULL), SBX_OK);
        sbx_sandbox_free(sb);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(app);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox adopted by a restarted daemon (--keep-sandboxes) is snapshotted with its
 * owners and files; shared with BOB, BOB's snapshot of it is his and root's, each
 * removes only his own name; root's snapshot of a sandbox not shared with BOB is
 * NOT_FOUND to him by its digest too, for a create, an inspect and a removal. */
START_TEST(adopted_and_shared) {
        static const char *const keep[] = {"--socket-group", "3100", "--warm", "0", "--spares",
                                           "0", "--keep-sandboxes", NULL};
        const uint32_t bob[1] = {BOB};
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_image *img = NULL;
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *other, *b, *s1, *s2, arg[300], *said, want[300];
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.share_uids = bob;
        o.n_share_uids = 1;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        a = strdup(sb->id);
        sbx_sandbox_free(sb);
        other = must_create(c, base);
        expect_out(c, a, NULL, "echo mine > /workspace/m && echo ok", "ok\n");
        expect_out(c, a, "root", "echo r > /etc/r && echo ok", "ok\n");
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        s1 = snap(c, a, "adopted");
        b = must_create(c, "adopted");
        expect_out(c, b, NULL, "busybox cat /workspace/m /etc/r; busybox stat -c %u:%g /workspace/m",
                   "mine\nr\n1000:1000\n");
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        s2 = snap(c, other, "roots-only");
        snprintf(arg, sizeof(arg), "%s|%s", a, s2);
        said = as_bob(bob_on_shared, &d, arg);
        ck_assert_msg(strstr(said, "snap|OK|\ncreate-own|OK|\n"), "BOB got: %s", said);
        snprintf(want, sizeof(want), "create-roots|NOT_FOUND|");
        ck_assert_msg(strstr(said, want), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "inspect-roots|NOT_FOUND|"), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "rm-roots|NOT_FOUND|"), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "rm-own|OK|"), "BOB got: %s", said);
        free(said);
        /* BOB's snapshot of the sandbox is root's too: root's name stays. */
        ck_assert_msg(sbx_image_inspect(c, "shared-snap", &img) == SBX_OK, "%s",
                      sbx_error_message(c));
        sbx_image_free(img);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, other, NULL), SBX_OK);
        free(a);
        free(other);
        free(b);
        free(s1);
        free(s2);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The freezer.state of sandbox id (v1: a group whose name holds its ID, one or two
 * levels below the freezer hierarchy's root, where root sbxd's base groups are) into
 * buf; 0 when there is none. */
static int freezer_dir(const char *id, char *buf, size_t len) {
        const char *root = "/sys/fs/cgroup/freezer";
        char sub[800];
        struct dirent *e, *e2;
        DIR *dir = opendir(root), *d2;
        int found = 0;

        while (dir && !found && (e = readdir(dir))) {
                if (e->d_type != DT_DIR || e->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", root, e->d_name);
                if (strstr(e->d_name, id)) {
                        snprintf(buf, len, "%s/freezer.state", sub);
                        found = 1;
                        break;
                }
                d2 = opendir(sub);
                while (d2 && !found && (e2 = readdir(d2)))
                        if (e2->d_type == DT_DIR && strstr(e2->d_name, id)) {
                                snprintf(buf, len, "%s/%s/freezer.state", sub, e2->d_name);
                                found = 1;
                        }
                if (d2)
                        closedir(d2);
        }
        if (dir)
                closedir(dir);
        return found;
}

static void read_state(const char *path, char *buf, size_t len) {
        FILE *f = fopen(path, "re");

        buf[0] = '\0';
        if (f && fgets(buf, (int)len, f))
                buf[strcspn(buf, "\n")] = '\0';
        if (f)
                fclose(f);
}

/* A child that takes a snapshot of id on d (exit 0: taken, 1: refused, 2: no connection). */
static pid_t snapshot_in_child(const struct it_daemon *d, const char *id) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sbx_client *c = NULL;
                struct sbx_image *img = NULL;
                if (sbx_connect(d->sock, "snapper", &c) != SBX_OK)
                        _exit(2);
                _exit(sbx_snapshot(c, id, NULL, &img) == SBX_OK ? 0 : 1);
        }
        return pid;
}

/* Starts snapshots of id in a child until one is seen freezing or frozen (its capture
 * under way, state file freezer); that child's pid. */
static pid_t child_while_frozen(const struct it_daemon *d, const char *id, const char *freezer) {
        char st[64];
        int tries, i, status;
        pid_t pid;

        for (tries = 0; tries < 10; tries++) {
                pid = snapshot_in_child(d, id);
                for (i = 0; i < 60000; i++) {
                        read_state(freezer, st, sizeof(st));
                        if (strcmp(st, "FROZEN") == 0 || strcmp(st, "FREEZING") == 0)
                                return pid;
                        if (waitpid(pid, &status, WNOHANG) == pid)
                                break; /* done before it was seen: again */
                        usleep(200);
                }
        }
        ck_abort_msg("no snapshot of %s was ever seen frozen", id);
        return -1;
}

/* Polls until STATE/images/tmp is empty (the snapshot's job ended); 0 when it is. */
static int scratch_empties(const struct it_daemon *d) {
        char tmp[700];
        int i;

        snprintf(tmp, sizeof(tmp), "%s/images/tmp", d->state);
        for (i = 0; i < 600 && img_entries(tmp) != 0; i++)
                usleep(100000);
        return img_entries(tmp);
}

/* A client that disconnects while its snapshot's sandbox is frozen: the sandbox is thawed
 * and goes on, nothing is left in the store's scratch space. A sandbox terminated while
 * frozen for a snapshot: the daemon goes on (the snapshot taken or refused), its scratch
 * space and the sandbox's directory are gone once the job ended. */
START_TEST(disconnect_and_terminate_mid_snapshot) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, freezer[1500], st[64], dir[900];
        int status, i;
        pid_t pid;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        b = must_create(c, base);
        expect_out(c, a, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && "
                   "echo ok", "ok\n");
        expect_out(c, b, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && "
                   "echo ok", "ok\n");
        ck_assert_msg(freezer_dir(a, freezer, sizeof(freezer)), "no freezer group of %s", a);

        pid = child_while_frozen(&d, a, freezer);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        for (i = 0; i < 600; i++) {
                read_state(freezer, st, sizeof(st));
                if (strcmp(st, "THAWED") == 0)
                        break;
                usleep(100000);
        }
        ck_assert_msg(strcmp(st, "THAWED") == 0, "%s stays %s", freezer, st);
        expect_out(c, a, NULL, "echo goes-on", "goes-on\n");
        ck_assert_int_eq(scratch_empties(&d), 0);

        ck_assert_msg(freezer_dir(b, freezer, sizeof(freezer)), "no freezer group of %s", b);
        pid = child_while_frozen(&d, b, freezer);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) <= 1, "status 0x%x", status);
        ck_assert_int_eq(kill(d.pid, 0), 0);
        ck_assert_int_eq(scratch_empties(&d), 0);
        snprintf(dir, sizeof(dir), "%s/sandboxes/%s", d.state, b);
        for (i = 0; i < 600 && access(dir, F_OK) == 0; i++)
                usleep(100000);
        ck_assert_msg(access(dir, F_OK) != 0, "%s is still there", dir);
        expect_out(c, a, NULL, "echo still", "still\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(b);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox claimed from --warm-image's pool is snapshotted from its own files (its
 * workspace and root, not the pool's), the sandbox frozen by its own group; the pool's
 * next sandbox has none of them. A writable host path's contents are not captured: a
 * sandbox made from the snapshot has the directory (it was made in the root) without
 * the file written there, which stays on the host alone. */
START_TEST(warm_claimed_and_writable_paths) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], host[700], path[800], needle[200], *digest, *a, *b, *w, *next, *s;
        const char *wflags[] = {"--warm", "0", "--spares", "1", "--warm-image", ref, NULL};
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        snprintf(host, sizeof(host), "%s/hostw", it_base_dir());
        ck_assert_int_eq(mkdir(host, 0777), 0);
        ck_assert_int_eq(chmod(host, 0777), 0);
        it_daemon_start(&d, wflags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        a = must_create(c, digest);
        snprintf(needle, sizeof(needle), "sbx=%s: claimed ~warm-", a);
        ck_assert_int_eq(it_log_count(&d, needle), 1);
        expect_out(c, a, NULL, "echo claimed > /workspace/c && echo ok", "ok\n");
        expect_out(c, a, "root", "echo r > /etc/claimed && echo ok", "ok\n");
        s = snap(c, a, "claimed");
        free(s);
        b = must_create(c, "claimed");
        expect_out(c, b, NULL, "busybox cat /workspace/c /etc/claimed", "claimed\nr\n");
        ck_assert_int_ge(it_wait_log(&d, ": warm and ready", 2), 2);
        next = must_create(c, digest);
        expect_out(c, next, NULL,
                   "busybox ls /workspace | busybox wc -l; busybox ls /etc/claimed 2>/dev/null || "
                   "echo none",
                   "0\nnone\n");

        ck_assert_msg(img_create(c, digest, host, &w) == SBX_OK, "%s", sbx_error_message(c));
        snprintf(path, sizeof(path), "echo host-only > %s/f && echo ok", host);
        expect_out(c, w, NULL, path, "ok\n");
        s = snap(c, w, "with-writable");
        free(s);
        free(b);
        b = must_create(c, "with-writable");
        snprintf(path, sizeof(path), "busybox ls -A %s | busybox wc -l", host);
        expect_out(c, b, NULL, path, "0\n");
        snprintf(path, sizeof(path), "%s/f", host);
        ck_assert_int_eq(access(path, F_OK), 0);
        free(a);
        free(b);
        free(w);
        free(next);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A second snapshot of a sandbox while the first holds it frozen is refused
 * (RESOURCE_EXHAUSTED: retry), not taken with the processes thawed by the first's end
 * midway; once the first is done, another is taken. */
START_TEST(one_snapshot_of_a_sandbox_at_a_time) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *s, freezer[1500];
        struct sbx_image *img = NULL;
        enum sbx_code rc;
        int status;
        pid_t pid;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && "
                   "echo ok", "ok\n");
        ck_assert(freezer_dir(a, freezer, sizeof(freezer)));
        pid = child_while_frozen(&d, a, freezer);
        rc = sbx_snapshot(c, a, "second", &img);
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED, "%s: %s", sbx_code_name(rc),
                      sbx_error_message(c));
        ck_assert_msg(strstr(sbx_error_message(c), "is being taken now"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        s = snap(c, a, "third");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(s);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A watchdog for a sandbox the case may leave frozen with no daemon (freezer: its
 * freezer.state): a child that, unless told "ok" on the pipe before the case's process
 * ends, thaws the group and kills its processes (the case's own). Returns the pipe's
 * write end. */
static int frozen_watchdog(const char *freezer) {
        int p[2];
        pid_t pid;
        char c = 0, procs[1600];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                FILE *f;
                int k;
                /* Its own session: check kills the case's process group when it ends. */
                setsid();
                close(p[1]);
                if (read(p[0], &c, 1) == 1 && c == 'k')
                        _exit(0);
                snprintf(procs, sizeof(procs), "%.*s/cgroup.procs",
                         (int)(strlen(freezer) - strlen("/freezer.state")), freezer);
                if ((f = fopen(freezer, "we"))) {
                        fputs("THAWED", f);
                        fclose(f);
                }
                if ((f = fopen(procs, "re"))) {
                        while (fscanf(f, "%d", &k) == 1)
                                kill(k, SIGKILL);
                        fclose(f);
                }
                _exit(0);
        }
        close(p[0]);
        return p[1];
}

/* The daemon killed (SIGKILL) while a snapshot holds a kept sandbox frozen: the next
 * daemon adopts it thawed, its commands run, and the scratch space is cleared. */
START_TEST(daemon_killed_mid_snapshot) {
        static const char *const keep[] = {"--warm", "0", "--spares", "0", "--keep-sandboxes",
                                           NULL};
        struct sbx_result *r = NULL;
        struct sbx_exec_opts o;
        const char *argv[] = {"/bin/sh", "-c", "echo thawed", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, st[64], freezer[1500];
        int status, watchdog;
        pid_t pid;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && "
                   "echo ok", "ok\n");
        ck_assert(freezer_dir(a, freezer, sizeof(freezer)));
        watchdog = frozen_watchdog(freezer);
        pid = child_while_frozen(&d, a, freezer);
        it_daemon_kill(&d);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        sbx_close(c);
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        read_state(freezer, st, sizeof(st));
        ck_assert_msg(strcmp(st, "THAWED") == 0, "the adopted sandbox's group is %s", st);
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.timeout_ms = 10000;
        ck_assert_msg(sbx_exec(c, a, &o, &r) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_msg(r->has_exit_code && r->exit_code == 0 && !r->timed_out, "exit %d",
                      r->exit_code);
        sbx_result_free(r);
        ck_assert_int_eq(scratch_empties(&d), 0);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(write(watchdog, "k", 1), 1);
        close(watchdog);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Twelve snapshots of one sandbox at once by its owner, each on its own connection: the
 * offload bounds take some and refuse the rest (RESOURCE_EXHAUSTED) or they are taken;
 * none fails otherwise, the daemon goes on, the sandbox ends THAWED and running, and the
 * scratch space empties. */
START_TEST(many_at_once) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, st[64], freezer[1500];
        int i, status, ok = 0, refused = 0;
        pid_t pids[12];
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=20 2>/dev/null && echo ok",
                   "ok\n");
        for (i = 0; i < 12; i++) {
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        sbx_client *cc = NULL;
                        struct sbx_image *img = NULL;
                        char name[32];
                        if (sbx_connect(d.sock, "many", &cc) != SBX_OK)
                                _exit(100);
                        snprintf(name, sizeof(name), "many-%d", i);
                        _exit(sbx_snapshot(cc, a, name, &img));
                }
        }
        for (i = 0; i < 12; i++) {
                ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
                ck_assert(WIFEXITED(status));
                ok += WEXITSTATUS(status) == SBX_OK;
                refused += WEXITSTATUS(status) == SBX_RESOURCE_EXHAUSTED;
                ck_assert_msg(WEXITSTATUS(status) == SBX_OK ||
                                      WEXITSTATUS(status) == SBX_RESOURCE_EXHAUSTED,
                              "snapshot %d: %s", i, sbx_code_name(WEXITSTATUS(status)));
        }
        ck_assert_int_ge(ok, 1);
        ck_assert_int_eq(ok + refused, 12);
        ck_assert_int_eq(kill(d.pid, 0), 0);
        ck_assert_int_eq(scratch_empties(&d), 0);
        ck_assert(freezer_dir(a, freezer, sizeof(freezer)));
        read_state(freezer, st, sizeof(st));
        ck_assert_str_eq(st, "THAWED");
        expect_out(c, a, NULL, "echo on", "on\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The tmpfs a case mounted over its daemon's image store (unmounted by the teardown
 * when the case failed first). */
static char store_mount[800];

static void teardown_mount(void) {
        if (store_mount[0])
                (void)umount2(store_mount, MNT_DETACH);
        it_fixture_teardown();
}

static uint64_t used_bytes(const char *path) {
        struct statvfs v;

        ck_assert_int_eq(statvfs(path, &v), 0);
        return (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
}

/* A snapshot that fills the image store's filesystem (a 48 MiB tmpfs over STATE/images,
 * the sandbox's own files elsewhere) is refused, leaves nothing behind (the space used
 * as before, nothing in its scratch space, no image), the sandbox thawed and running;
 * a smaller one is taken after. */
START_TEST(a_full_store_leaves_nothing) {
        static const char *const roomy[] = {"--warm", "0", "--spares", "0",
                                            "--max-snapshot-bytes-per-uid", "1G", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image_list *l = NULL;
        char *base, *a, *s, old[900], cmd[3000], st[64], freezer[1500];
        struct sbx_image *img = NULL;
        uint64_t before;
        size_t n_images;
        sbx_client *c;

        it_daemon_start(&d, roomy);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        snprintf(store_mount, sizeof(store_mount), "%s/images", d.state);
        snprintf(old, sizeof(old), "%s/images.old", d.state);
        ck_assert_int_eq(rename(store_mount, old), 0);
        ck_assert_int_eq(mkdir(store_mount, 0700), 0);
        ck_assert_int_eq(mount("tmpfs", store_mount, "tmpfs", 0, "size=48m,mode=0700"), 0);
        snprintf(cmd, sizeof(cmd), "cp -a %s/. %s/ && rm -rf %s", old, store_mount, old);
        ck_assert_int_eq(system(cmd), 0);
        it_daemon_restart(&d, roomy);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "busybox head -c 55000000 /dev/urandom > /workspace/r && echo ok",
                   "ok\n");
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        n_images = l->n;
        sbx_image_list_free(l);
        before = used_bytes(store_mount);
        ck_assert_int_ne(sbx_snapshot(c, a, "full", &img), SBX_OK);
        ck_assert_msg(strstr(sbx_error_message(c), "space") || strstr(sbx_error_message(c), "full"),
                      "%s", sbx_error_message(c));
        ck_assert_int_eq(scratch_empties(&d), 0);
        ck_assert_msg(used_bytes(store_mount) <= before + (1u << 20), "%llu bytes used, %llu before",
                      (unsigned long long)used_bytes(store_mount), (unsigned long long)before);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, n_images);
        sbx_image_list_free(l);
        ck_assert_int_eq(sbx_image_inspect(c, "full", &img), SBX_NOT_FOUND);
        ck_assert(freezer_dir(a, freezer, sizeof(freezer)));
        read_state(freezer, st, sizeof(st));
        ck_assert_str_eq(st, "THAWED");
        expect_out(c, a, NULL, "busybox rm /workspace/r && echo small > /workspace/s && echo ok",
                   "ok\n");
        s = snap(c, a, "small");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(s);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(umount2(store_mount, MNT_DETACH), 0);
        store_mount[0] = '\0';
}
END_TEST

/* The import refuses the layer as it reads it (past --max-image-entries, 1000, with 3000
 * files in the workspace): the capture, which spools the tar ahead of the import, stops
 * too and the answer is the import's reason, not a broken pipe; nothing is left and the
 * sandbox runs on. */
START_TEST(an_import_refusal_stops_the_capture) {
        static const char *const few[] = {"--warm", "0", "--spares", "0", "--max-image-entries",
                                          "1000", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        struct sbx_image_list *l = NULL;
        char *base, *a;
        sbx_client *c;

        it_daemon_start(&d, few);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL,
                   "cd /workspace && busybox seq 3000 | busybox xargs busybox touch && "
                   "busybox ls | busybox wc -l",
                   "3000\n");
        ck_assert_int_eq(sbx_snapshot(c, a, "many", &img), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "entries") &&
                              !strstr(sbx_error_message(c), "Broken pipe"),
                      "%s", sbx_error_message(c));
        ck_assert_int_eq(scratch_empties(&d), 0);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        sbx_image_list_free(l);
        expect_out(c, a, NULL, "echo still", "still\n");
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A client that goes while its export is streamed (killed after the first bytes, a read
 * of the archive perhaps in flight on libuv's pool): the daemon goes on, the archive
 * leaves the scratch space, and the next export is whole. */
START_TEST(client_gone_mid_export) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        char *base, *a, *s, path[900], byte;
        int p[2], fd;
        sbx_client *c;
        pid_t pid;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "busybox head -c 30000000 /dev/urandom > /workspace/r && echo ok",
                   "ok\n");
        s = snap(c, a, "big");
        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sbx_client *cc = it_connect(&d);
                close(p[0]);
                _exit(sbx_image_export(cc, "big", p[1], NULL) == SBX_OK ? 0 : 1);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &byte, 1), 1); /* the stream has begun */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        ck_assert_int_eq(scratch_empties(&d), 0);
        snprintf(path, sizeof(path), "%s/again.tar", it_base_dir());
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(sbx_image_export(c, "big", fd, &img) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_str_eq(img->digest, s);
        ck_assert_int_gt(lseek(fd, 0, SEEK_END), 30000000);
        close(fd);
        sbx_image_free(img);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("snapshot_attacks");

        SBX_ADD_TEST_CASE(s, forged_overlay_markers_are_data, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, caps_fifos_and_odd_names, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, whiteout_names_are_left_out, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_markers, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, fork_past_the_owner_bound_leaves_none, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, adopted_and_shared, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, share_user_cannot_take_the_owners_names, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disconnect_and_terminate_mid_snapshot, 300, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, warm_claimed_and_writable_paths, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, a_full_store_leaves_nothing, 240, it_fixture_setup_var,
                          teardown_mount);
        SBX_ADD_TEST_CASE(s, many_at_once, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, an_import_refusal_stops_the_capture, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, client_gone_mid_export, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, daemon_killed_mid_snapshot, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, forged_snapshot_bytes_label, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, one_snapshot_of_a_sandbox_at_a_time, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
