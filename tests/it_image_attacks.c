/* it_image_attacks.c: a hostile image against a real sbxd (docs/images.md, "Sandboxes
 * from images"): what its layers hold and what root of its sandbox does must reach no
 * host file, no other user's image and no id beyond the sandbox's block.
 *
 * The image is tests/mkhostile.sh's tag "evil": symlinks where the sandbox's own mount
 * points go and on the way to a writable path, all of them into /.sbx-oldroot (where the
 * host's tree is while the view is being built), device nodes, a setuid copy of
 * busybox, capability and overlayfs xattrs smuggled in a raw tar. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static const char *const root_flags[] = {"--warm", "0", "--spares", "0", NULL};

/* it_base_dir()/NAME, made with mode (chmod'ed: the umask is not the test's). */
static const char *make_dir(const char *name, mode_t mode, uid_t uid) {
        static char paths[4][700];
        static int k;
        char *p = paths[k++ % 4];

        snprintf(p, sizeof(paths[0]), "%s/%s", it_base_dir(), name);
        ck_assert_int_eq(mkdir(p, mode), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
        ck_assert_int_eq(chown(p, uid, uid), 0);
        return p;
}

/* Makes the hostile image, whose /var leads to escape on the host ("-": nowhere), and
 * with extra "bigpw" its tag "bigpw" too; returns the layout's path. */
static const char *make_hostile_with(const char *escape, const char *extra) {
        static char layout[700];
        char cmd[2400];
        const char *dir = make_dir("img", 0755, 0);

        snprintf(cmd, sizeof(cmd), "bash tests/mkhostile.sh %s %s %s >%s/mkhostile.log 2>&1",
                 dir, escape, extra, dir);
        ck_assert_msg(system(cmd) == 0, "mkhostile.sh failed: see %s/mkhostile.log", dir);
        snprintf(layout, sizeof(layout), "%s/oci", dir);
        return layout;
}

static const char *make_hostile(const char *escape) {
        return make_hostile_with(escape, "");
}

/* The stdout of shell in id, which must exit 0. */
static void expect_sh(sbx_client *c, const char *id, const char *shell, const char *want) {
        struct sbx_result *r = it_sh(c, id, 60000, shell);

        ck_assert_msg(r->has_exit_code && r->exit_code == 0, "%s: exit %d: %s%s", shell,
                      r->exit_code, (char *)r->stdout_data, (char *)r->stderr_data);
        ck_assert_msg(strcmp((char *)r->stdout_data, want) == 0, "%s: '%s', not '%s'", shell,
                      (char *)r->stdout_data, want);
        sbx_result_free(r);
}

/* The sandbox's own mount points where the image has symlinks into the host's tree:
 * its own /proc, /dev, /tmp, /run, /sys and /workspace, no /.sbx-oldroot; no device
 * node, capability or overlayfs xattr of the layers took effect. */
static void expect_own_view(sbx_client *c, const char *id) {
        expect_sh(c, id,
                  "cd /; busybox stat -c '%n %F' proc dev tmp run sys workspace; "
                  "busybox ls -d .sbx-oldroot null sda fifo 2>/dev/null; "
                  "busybox grep -c sbx-oldroot /proc/self/mountinfo; "
                  "busybox ls /redir | busybox wc -l; busybox cat /meta; "
                  "busybox grep CapEff /proc/self/status",
                  "proc directory\ndev directory\ntmp directory\nrun directory\n"
                  "sys directory\nworkspace directory\n0\n0\nm\nCapEff:\t00000000a00005fb\n");
        /* The setuid copy and the file with capabilities give nothing: no_new_privs. */
        {
                struct sbx_exec_opts o;
                struct sbx_result *r = NULL;
                const char *argv[] = {"/bin/busybox.suid", "id", "-u", NULL};

                sbx_exec_opts_init(&o);
                o.argv = argv;
                o.argc = 3;
                o.timeout_ms = 60000;
                o.user = "1000:1000";
                ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
                ck_assert_msg(r->exit_code == 0 && strcmp((char *)r->stdout_data, "1000\n") == 0,
                              "suid: %d %s%s", r->exit_code, (char *)r->stdout_data,
                              (char *)r->stderr_data);
                sbx_result_free(r);
        }
}

/* The image's symlinks at the mount points are replaced by the sandbox's own; the
 * writable path /var/... that the image leads into /.sbx-oldroot (a world-writable host
 * directory) is refused and leaves nothing there: under a root daemon no directory of
 * the sandbox's block of ids on the host, under a rootless one none of its user's. */
static void escape_case(bool rootless) {
        struct it_daemon d;
        const char *escape = make_dir("escape", 01777, 0);
        const char *layout = make_hostile_with(escape, rootless ? "relative" : "");
        const char *w = make_dir("w", 0755, rootless ? NOBODY : 0);
        char *digest, *id = NULL;
        enum sbx_code rc;
        sbx_client *c;

        if (rootless)
                it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        else
                it_daemon_start(&d, root_flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        ck_assert_int_eq(img_create(c, digest, NULL, &id), SBX_OK);
        if (rootless)
                expect_sh(c, id,
                          "cd /; busybox stat -c '%n %F' proc dev tmp run sys workspace; "
                          "busybox ls -d .sbx-oldroot null sda fifo 2>/dev/null; echo end",
                          "proc directory\ndev directory\ntmp directory\nrun directory\n"
                          "sys directory\nworkspace directory\nend\n");
        else
                expect_own_view(c, id);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        id = NULL;

        rc = img_create(c, digest, w, &id);
        ck_assert_msg(img_entries(escape) == 0, "the sandbox made %d entries in %s (%s)",
                      img_entries(escape), escape, sbx_code_name(rc));
        ck_assert_msg(rc != SBX_OK && strstr(sbx_error_message(c), "out of the image"),
                      "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}

/* Root daemon, /var an absolute symlink. */
START_TEST(symlinks_into_the_host_root) {
        escape_case(false);
}
END_TEST

/* Rootless daemon (nobody): the same, with plain binds (bind_writable's route), and /var
 * a relative symlink that climbs with ..: nothing of nobody's is made in the host
 * directory the image points at. */
START_TEST(symlinks_into_the_host_root_rootless) {
        escape_case(true);
}
END_TEST

/* A writable file whose path is, in the image, a dangling symlink into /.sbx-oldroot:
 * the mount point made for it (an O_CREAT) would be the symlink's target on the host. */
START_TEST(dangling_symlink_at_a_writable_file) {
        struct it_daemon d;
        const char *escape = make_dir("escape", 01777, 0);
        char wf[800], extra[900], *digest, *id = NULL;
        const char *layout;
        enum sbx_code rc;
        sbx_client *c;
        int fd;

        snprintf(wf, sizeof(wf), "%s/wf", it_base_dir());
        fd = open(wf, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        snprintf(extra, sizeof(extra), "dangling:%s", wf);
        layout = make_hostile_with(escape, extra);
        it_daemon_start(&d, root_flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        rc = img_create(c, digest, wf, &id);
        ck_assert_msg(img_entries(escape) == 0, "the sandbox made %d entries in %s (%s)",
                      img_entries(escape), escape, sbx_code_name(rc));
        ck_assert_msg(rc != SBX_OK && strstr(sbx_error_message(c), "a symlink to nowhere"),
                      "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A writable path above the daemon's own directories (its state directory: the image
 * store, the other sandboxes' roots, the database; its socket's): hidden there as in
 * every other sandbox, whatever the policy. Bound idmapped as the image's default user,
 * the store would otherwise be that user's to change, under every sandbox of the image. */
START_TEST(daemon_dirs_under_a_writable_path) {
        struct it_daemon d;
        const char *layout = make_hostile("-");
        char *digest, *id = NULL, shell[2800];
        sbx_client *c;

        it_daemon_start(&d, root_flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        ck_assert_msg(img_create(c, digest, it_base_dir(), &id) == SBX_OK, "create: %s",
                      sbx_error_message(c));
        snprintf(shell, sizeof(shell),
                 "busybox ls -A %s/images %s/sandboxes 2>/dev/null | busybox wc -l; "
                 "busybox ls -A %s | busybox wc -l; "
                 "echo x > %s/images/x 2>/dev/null || echo refused",
                 d.state, d.state, d.state, d.state);
        expect_sh(c, id, shell, "0\n0\nrefused\n");
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Root of the sandbox (its namespace's, with Docker's default capabilities less a few):
 * its cgroup's limits, the host's kernel knobs, device nodes, ids beyond its block, the
 * daemon's processes, the image store (its layers mounted from descriptors): none. */
START_TEST(root_inside_reaches_nothing) {
        struct it_daemon d;
        const char *layout = make_hostile("-");
        char *digest, *id = NULL;
        struct sbx_result *r;
        sbx_client *c;

        it_daemon_start(&d, root_flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        ck_assert_int_eq(img_create(c, digest, NULL, &id), SBX_OK);
        r = it_sh(c, id, 60000,
                  "t() { if eval \"$2\" 2>/dev/null; then echo \"$1 done\"; fi; }; "
                  "for f in /sys/fs/cgroup/*/memory.limit_in_bytes /sys/fs/cgroup/*/pids.max "
                  "/sys/fs/cgroup/*/cpu.cfs_quota_us /sys/fs/cgroup/*/cgroup.procs "
                  "/sys/fs/cgroup/*/tasks /sys/fs/cgroup/*/release_agent; do "
                  "[ -e $f ] && t $f \"echo -1 > $f\"; done; "
                  "t sysrq 'echo h > /proc/sysrq-trigger'; "
                  "t drop_caches 'echo 1 > /proc/sys/vm/drop_caches'; "
                  "t core_pattern 'echo x > /proc/sys/kernel/core_pattern'; "
                  "t mknod 'busybox mknod /tmp/sda b 8 0'; "
                  "t mknod-c 'busybox mknod /tmp/mem c 1 1'; "
                  "t chown-beyond 'echo > /tmp/f; busybox chown 65536 /tmp/f'; "
                  "t sys-write 'echo x > /sys/kernel/uevent_helper'; "
                  "t remount-sys 'busybox mount -o remount,rw /sys'; "
                  "t images 'busybox find / -xdev -name sbxd.db | busybox grep -q .'; "
                  "t procs 'busybox ps -o pid,comm | busybox grep -q sbxd'; "
                  "t kmsg 'busybox head -c1 /dev/kmsg'; "
                  "echo end");
        ck_assert_msg(r->exit_code == 0 && strcmp((char *)r->stdout_data, "end\n") == 0,
                      "root reached: %s%s", (char *)r->stdout_data, (char *)r->stderr_data);
        sbx_result_free(r);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A flood of image sandboxes: SBX_IMAGE_BLOCKS at once, the next one RESOURCE_EXHAUSTED
 * naming the bound; a block freed is taken again, also after a creation that failed
 * (a writable path the image leads out of itself) gave its block back. */
START_TEST(flood_of_image_sandboxes) {
        static const char *const flags[] = {"--warm", "0", "--spares", "0", "--max-sandboxes",
                                            "200", "--max-sandboxes-per-uid", "200", NULL};
        struct it_daemon d;
        const char *escape = make_dir("escape", 01777, 0), *layout = make_hostile(escape);
        const char *w = make_dir("w", 0755, 0);
        char *digest, *ids[SBX_IMAGE_BLOCKS], *id = NULL, want[64];
        enum sbx_code rc;
        unsigned i;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        for (i = 0; i < SBX_IMAGE_BLOCKS; i++)
                ck_assert_msg(img_create(c, digest, NULL, &ids[i]) == SBX_OK, "%u: %s", i,
                              sbx_error_message(c));
        ck_assert_int_eq(img_create(c, digest, NULL, &id), SBX_RESOURCE_EXHAUSTED);
        snprintf(want, sizeof(want), "runs %u sandboxes made from images", SBX_IMAGE_BLOCKS);
        ck_assert_msg(strstr(sbx_error_message(c), want), "%s", sbx_error_message(c));
        /* The block comes back once the sandbox is cleaned up, after Terminate answers. */
        ck_assert_int_eq(sbx_terminate(c, ids[0], NULL), SBX_OK);
        free(ids[0]);
        for (i = 0; i < 600 && (rc = img_create(c, digest, w, &id)) == SBX_RESOURCE_EXHAUSTED; i++)
                usleep(50000);
        ck_assert_msg(rc != SBX_OK && strstr(sbx_error_message(c), "out of the image"), "%s: %s",
                      sbx_code_name(rc), sbx_error_message(c));
        ck_assert_int_eq(img_entries(escape), 0);
        for (i = 0; i < 600 && (rc = img_create(c, digest, NULL, &ids[0])) ==
                                       SBX_RESOURCE_EXHAUSTED; i++)
                usleep(50000);
        ck_assert_msg(rc == SBX_OK, "again: %s", sbx_error_message(c));
        for (i = 0; i < SBX_IMAGE_BLOCKS; i++) {
                ck_assert_int_eq(sbx_terminate(c, ids[i], NULL), SBX_OK);
                free(ids[i]);
        }
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx-init --remove (a rootless daemon's remover of trees of its subordinate ids): an
 * argument that is no absolute path (an option, say) or ids that are no positive numbers
 * are refused before anything is entered or run, and nothing is removed. */
START_TEST(remove_arguments) {
        static const char *const bad[][4] = {
                {"-rf", "1", "1", "1"},     {"--one-file-system", "1", "1", "1"},
                {"rel/dir", "1", "1", "1"}, {"/x", "0", "1", "1"},
                {"/x", "1", "-1", "1"},     {"/x", "1", "1", "99999999999"},
                {"/x", "1x", "1", "1"},     {"/x", "", "1", "1"},
        };
        const char *victim = make_dir("victim", 0755, 0);
        char cmd[1600], keep[800];
        size_t i;

        snprintf(keep, sizeof(keep), "%s/keep", victim);
        ck_assert_int_eq(mkdir(keep, 0755), 0);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int st;
                snprintf(cmd, sizeof(cmd),
                         "cd %s && %s/sbx-init --remove '%s' '%s' '%s' '%s' 2>/dev/null", victim,
                         it_build_dir(), bad[i][0], bad[i][1], bad[i][2], bad[i][3]);
                st = system(cmd);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s: %d", cmd, st);
        }
        /* The wrong number of arguments is no --remove at all. */
        snprintf(cmd, sizeof(cmd), "%s/sbx-init --remove %s 1 1 2>/dev/null", it_build_dir(),
                 keep);
        ck_assert_int_ne(system(cmd), 0);
        ck_assert_int_eq(access(keep, F_OK), 0);
}
END_TEST

/* The image store's helper in a namespace of subordinate ids (layerns.h): sbx-init
 * --subids-exec with ids that are no positive numbers, or without a program, runs
 * nothing; sbxd --layer-helper with another mode, missing or bad numbers, a name that
 * is no single entry, or fds that are not the daemon's (1 no pipe) does nothing; and
 * with good ones it does what it is asked (so that the refusals mean something). */
START_TEST(layer_helper_arguments) {
        static const char *const bad_ids[][3] = {
                {"0", "1", "1"}, {"1", "-1", "1"}, {"1", "1", "99999999999"},
                {"1x", "1", "1"}, {"", "1", "1"},
        };
        static const char *const bad_modes[] = {
                "",           "bogus",         "unpack 1 1",   "unpack x 1 1", "unpack 1 1 0",
                "unpack 1 1 4294967296", "remove ..", "remove a/b", "remove .",    "remove",
                "empty extra", "remove keep keep",
                /* capture MAX_BYTES MAX_ENTRIES KIND MAX_ID DIGEST WORKSPACE */
                "capture 1 1 0 1 0", "capture 1 1 3 1 0 0", "capture 1 1 0 0 0 0",
                "capture 1 1 0 4294967295 0 0", "capture 1 1 0 1 2 0", "capture 1 1 0 1 0 2",
                "capture x 1 0 1 0 0", "capture 1 1 0 1 0 1", /* no fd 5, a directory */
        };
        const char *victim = make_dir("victim", 0755, 0);
        char cmd[2000], keep[800], made[800];
        size_t i;
        int st;

        snprintf(keep, sizeof(keep), "%s/keep", victim);
        snprintf(made, sizeof(made), "%s/made", victim);
        ck_assert_int_eq(mkdir(keep, 0755), 0);
        for (i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
                snprintf(cmd, sizeof(cmd),
                         "%s/sbx-init --subids-exec '%s' '%s' '%s' /usr/bin/touch %s 2>/dev/null",
                         it_build_dir(), bad_ids[i][0], bad_ids[i][1], bad_ids[i][2], made);
                st = system(cmd);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s: %d", cmd, st);
                ck_assert_int_eq(access(made, F_OK), -1);
        }
        snprintf(cmd, sizeof(cmd), "%s/sbx-init --subids-exec 1 1 1 2>/dev/null", it_build_dir());
        ck_assert_int_ne(system(cmd), 0);
        for (i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
                snprintf(cmd, sizeof(cmd),
                         "bash -c 'set -o pipefail; %s/sbxd --layer-helper %s 3<%s 2>/dev/null | "
                         "cat >/dev/null'",
                         it_build_dir(), bad_modes[i], victim);
                st = system(cmd);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: %d", cmd, st);
                ck_assert_int_eq(access(keep, F_OK), 0);
        }
        /* fd 1 no pipe: not the daemon's. */
        snprintf(cmd, sizeof(cmd), "%s/sbxd --layer-helper empty 3<%s >/dev/null 2>&1",
                 it_build_dir(), victim);
        st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: %d", cmd, st);
        ck_assert_int_eq(access(keep, F_OK), 0);
        /* The same helper, asked as the daemon asks it. */
        snprintf(cmd, sizeof(cmd),
                 "bash -c 'set -o pipefail; %s/sbxd --layer-helper remove keep 3<%s | "
                 "cat >/dev/null'",
                 it_build_dir(), victim);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(access(keep, F_OK), -1);
}
END_TEST

/* BOB, with what he may know of root's image: its OCI layout's path (in a directory of
 * root's that BOB may not enter), as a pull and as an image to create from; the digest
 * of one of its layers; a path into the store. The pull is refused with BOB's rights,
 * the layout and the layer are names nobody pulled, the path no name; BOB gets no
 * sandbox. */
static void bob_reaches(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_image *img = NULL;
        const char *tries[3];
        char source[800], *id = NULL;
        size_t i;

        snprintf(source, sizeof(source), "oci:%s:evil", arg);
        say(r, "pull %s\n",
            sbx_code_name(sbx_image_pull(c, source, NULL, &img)));
        sbx_image_free(img);
        tries[0] = source;
        tries[1] = arg + strlen(arg) + 1; /* the layer's digest */
        tries[2] = "../../images";
        for (i = 0; i < 3; i++) {
                enum sbx_code rc = img_create(c, tries[i], NULL, &id);
                say(r, "create %s\n", sbx_code_name(rc));
                free(id);
                id = NULL;
        }
        sbx_close(c);
}

START_TEST(bob_and_roots_image) {
        static const char *const flags[] = {"--socket-group", "3100", "--warm", "0", "--spares",
                                            "0", NULL};
        struct it_daemon d;
        const char *layout = make_hostile("-");
        struct sbx_image *img = NULL;
        char arg[1600], source[800], *said;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        snprintf(source, sizeof(source), "oci:%s:evil", layout);
        ck_assert_int_eq(sbx_image_pull(c, source, NULL, &img), SBX_OK);
        ck_assert_int_eq(chmod(it_base_dir(), 0755), 0);
        /* Root's layout, in a directory BOB may not enter. */
        ck_assert_int_eq(chmod(layout, 0700), 0);
        snprintf(arg, sizeof(arg), "%s%c%s", layout, 0, img->layers.v[0]);
        said = as_bob(bob_reaches, &d, arg);
        ck_assert_msg(strcmp(said, "pull PERMISSION_DENIED\ncreate NOT_FOUND\n"
                                   "create NOT_FOUND\ncreate INVALID_ARGUMENT\n") == 0,
                      "BOB got: %s", said);
        free(said);
        sbx_image_free(img);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* An image whose /etc/passwd and /etc/group are huge (64 MiB): the daemon reads them on
 * its loop to find a user by name, at creation (the image's User) and at each command
 * with --user, which would stall every other client meanwhile. Past SBIMAGE_ETC_MAX_BYTES
 * a name is refused, saying why; numbers and root need no lookup and still work. */
START_TEST(huge_etc_passwd) {
        struct it_daemon d;
        const char *layout = make_hostile_with("-", "bigpw");
        struct sbx_image *img = NULL;
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        const char *argv[] = {"busybox", "id", "-u", NULL};
        const char *users[] = {"big", "0:big", "1000", "root"};
        char source[800], *id = NULL;
        enum sbx_code rc;
        sbx_client *c;
        size_t i;

        it_daemon_start(&d, root_flags);
        c = it_connect(&d);
        snprintf(source, sizeof(source), "oci:%s:bigpw", layout);
        ck_assert_msg(sbx_image_pull(c, source, NULL, &img) == SBX_OK, "pull: %s",
                      sbx_error_message(c));
        ck_assert_int_eq(img_create(c, img->digest, NULL, &id), SBX_OK);
        for (i = 0; i < 4; i++) {
                double t0 = it_now_ms();
                sbx_exec_opts_init(&o);
                o.argv = argv;
                o.argc = 3;
                o.timeout_ms = 60000;
                o.user = users[i];
                rc = sbx_exec(c, id, &o, &r);
                fprintf(stderr, "--user %s: %s in %.0f ms\n", users[i], sbx_code_name(rc),
                       it_now_ms() - t0);
                if (i < 2) {
                        ck_assert_msg(rc == SBX_INVALID_ARGUMENT &&
                                              strstr(sbx_error_message(c), "larger than"),
                                      "%s: %s", sbx_code_name(rc), sbx_error_message(c));
                } else {
                        ck_assert_msg(rc == SBX_OK, "%s: %s", users[i], sbx_error_message(c));
                        ck_assert_str_eq((char *)r->stdout_data, i == 2 ? "1000\n" : "0\n");
                }
                sbx_result_free(r);
                r = NULL;
        }
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        sbx_image_free(img);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB at the adoption socket of root's image sandbox (its PID 1 takes an unmapped peer
 * from outside its PID namespace for the daemon: the state directory is what keeps
 * anyone else from it). */
static void bob_adopts(struct it_daemon *d, const char *arg, struct report *r) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        (void)d;
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", arg);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
                say(r, "connected\n");
        else
                say(r, "%s\n", strerror(errno));
        close(fd);
}

START_TEST(bob_at_the_adoption_socket) {
        static const char *const flags[] = {"--socket-group", "3100", "--warm", "0", "--spares",
                                            "0", NULL};
        struct it_daemon d;
        const char *layout = make_hostile("-");
        char *digest, *id = NULL, *said, sock[1200];
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "evil");
        ck_assert_int_eq(img_create(c, digest, NULL, &id), SBX_OK);
        snprintf(sock, sizeof(sock), "%s/sandboxes/%s/init.sock", d.state, id);
        ck_assert_int_eq(access(sock, F_OK), 0);
        ck_assert_int_eq(chmod(it_base_dir(), 0755), 0);
        said = as_bob(bob_adopts, &d, sock);
        ck_assert_msg(strcmp(said, "Permission denied\n") == 0, "BOB: %s", said);
        free(said);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("image_attacks");

        SBX_ADD_TEST_CASE(s, symlinks_into_the_host_root, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, symlinks_into_the_host_root_rootless, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, dangling_symlink_at_a_writable_file, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, daemon_dirs_under_a_writable_path, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, root_inside_reaches_nothing, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, flood_of_image_sandboxes, 480, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, remove_arguments, 60, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, layer_helper_arguments, 60, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, bob_and_roots_image, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, huge_etc_passwd, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, bob_at_the_adoption_socket, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
