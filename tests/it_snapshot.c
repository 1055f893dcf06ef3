/* it_snapshot.c: snapshots of sandboxes made from images (SnapshotSandbox, sbx snapshot;
 * docs/snapshots.md) against a real root sbxd, as two users, across a restart.
 *
 * The image is tests/mkimage.sh's "img" (busybox in four layers; User 1000:1000,
 * WorkingDir /data), imported from its OCI layout as it_image_sandbox.c does. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asbob.h"
#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"
#include "snaptest.h"
#include "testutil.h"

static const char *const flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                                    "--keep-sandboxes", NULL};

/* sbx image inspect of the image digest: its config's label key holds want. */
static void expect_label(sbx_client *c, const char *digest, const char *key, const char *want) {
        struct sbx_image *img = NULL;
        const char *v = NULL;

        ck_assert_int_eq(sbx_image_inspect(c, digest, &img), SBX_OK);
        ck_assert_ptr_nonnull(img->config);
        for (size_t i = 0; i < img->config->n_labels; i++)
                if (strcmp(img->config->labels[i].key, key) == 0)
                        v = img->config->labels[i].value;
        ck_assert_msg(v && strstr(v, want), "%s: %s, not %s", key, v ? v : "(none)", want);
        sbx_image_free(img);
}

/* What a sandbox changed in its root (a file, a deletion, a directory replaced) and in
 * its workspace (files of its user's) is what a sandbox made from its snapshot starts
 * with; its config's labels name the sandbox, its image and its policy; the image's
 * layers and the first sandbox are as they were; a snapshot of that one stacks; the
 * names are the owner's; the snapshot outlives a restart. */
START_TEST(root_and_workspace_come_back) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, *c2, *s1, *s2, path[900];
        struct sbx_image *img = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, "root",
                   "echo changed > /etc/changed && busybox rm /etc/greeting && "
                   "busybox rm -rf /data && busybox mkdir -p /data && echo new > /data/only && "
                   "echo ok",
                   "ok\n");
        expect_out(c, a, NULL,
                   "echo mine > /workspace/w && busybox mkdir /workspace/d && "
                   "echo two > /workspace/d/f && busybox ln -s w /workspace/l && echo ok",
                   "ok\n");
        s1 = snap(c, a, "snap-one:v1");
        expect_label(c, s1, "io.sbxd.snapshot.sandbox", a);
        expect_label(c, s1, "io.sbxd.snapshot.parent", base);
        expect_label(c, s1, "io.sbxd.snapshot.policy", "\"network\":\"NETWORK_NONE\"");
        /* The first goes on, as it was. */
        expect_out(c, a, NULL, "busybox cat /workspace/w /etc/changed", "mine\nchanged\n");

        b = must_create(c, "snap-one:v1");
        expect_out(c, b, NULL,
                   "busybox cat /etc/changed; busybox ls /etc/greeting 2>/dev/null || echo gone; "
                   "busybox ls /data; busybox cat /workspace/w /workspace/d/f; "
                   "busybox readlink /workspace/l; busybox stat -c '%u:%g %a' /workspace/w "
                   "/workspace/d; busybox id -u; pwd",
                   "changed\ngone\nonly\nmine\ntwo\nw\n1000:1000 644\n1000:1000 755\n1000\n/data\n");
        /* The base image is untouched. */
        c2 = must_create(c, base);
        expect_out(c, c2, NULL, "busybox cat /etc/greeting; busybox ls /workspace | busybox wc -l",
                   "second\n0\n");

        /* A snapshot of a snapshot's sandbox: one more layer. */
        expect_out(c, b, NULL, "echo three > /workspace/d/g && echo ok", "ok\n");
        s2 = snap(c, b, NULL);
        ck_assert_int_eq(sbx_image_inspect(c, s2, &img), SBX_OK);
        ck_assert_uint_eq(img->layers.n, 6); /* the image's 4, and one per snapshot */
        ck_assert_msg(img->names.n == 1 && strncmp(img->names.v[0], "localhost/", 10) == 0,
                      "%s", img->names.n ? img->names.v[0] : "-");
        sbx_image_free(img);

        /* Across a restart: the store keeps it, and a sandbox is made from it. */
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, flags);
        c = it_connect(&d);
        free(c2);
        c2 = must_create(c, s2);
        expect_out(c, c2, NULL, "busybox cat /workspace/d/g /etc/changed", "three\nchanged\n");
        /* Nothing of a snapshot is left in the store's scratch space. */
        snprintf(path, sizeof(path), "%s/images/tmp", d.state);
        ck_assert_int_eq(img_entries(path), 0);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, c2, NULL), SBX_OK);
        free(a);
        free(b);
        free(c2);
        free(s1);
        free(s2);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* An image's sandbox (c's daemon) with a command writing `lines` numbered lines to
 * /workspace/log in the background, snapshotted once it has begun: the snapshot holds
 * whole lines, numbered from 0 in order (the last may be cut: a write caught half way is
 * the file as it was), and the command goes on to its end. */
static void snapshot_a_writer(sbx_client *c, const char *layout, unsigned lines) {
        char shell[200], want[32], *base, *a, *b, *s, *out;
        const char *argv[] = {"/bin/sh", "-c", shell, NULL};
        struct sbx_attach_opts ao = {.follow = 1};
        struct sbx_background *bg = NULL;
        struct sbx_result *r = NULL;
        struct sbx_exec_opts o;

        snprintf(shell, sizeof(shell),
                 "i=0; while [ $i -lt %u ]; do echo line-$i; i=$((i+1)); done > /workspace/log",
                 lines);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.no_timeout = 1;
        ck_assert_msg(sbx_exec_background(c, a, &o, &bg) == SBX_OK, "%s", sbx_error_message(c));
        for (int i = 0; i < 200; i++) {
                int n;
                out = run_as(c, a, NULL, "busybox wc -l < /workspace/log 2>/dev/null || echo 0");
                n = atoi(out);
                free(out);
                if (n > 0)
                        break;
                usleep(10000);
        }
        s = snap(c, a, "writing");
        b = must_create(c, "writing");
        out = run_as(c, b, NULL,
                     "n=$(busybox grep -c . /workspace/log); "
                     "busybox head -n $((n - 1)) /workspace/log | busybox awk "
                     "'$0 != \"line-\" NR-1 { bad = 1 } END { print (bad ? \"bad\" : \"ok\") }'");
        ck_assert_str_eq(out, "ok\n");
        free(out);
        ao.command_id = bg->command_id;
        ck_assert_int_eq(sbx_attach(c, a, &ao, &r), SBX_OK);
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        snprintf(want, sizeof(want), "%u\n", lines);
        expect_out(c, a, NULL, "busybox wc -l < /workspace/log", want);
        sbx_background_free(bg);
        free(a);
        free(b);
        free(s);
        free(base);
}

/* A command that writes while the snapshot is taken is frozen, then goes on; the
 * snapshot holds whole lines of what it had written. */
START_TEST(a_writing_command_goes_on) {
        struct it_daemon d;
        const char *layout = make_image();
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        snapshot_a_writer(c, layout, 200000);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static void bob_tries(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_image *img = NULL;
        char id[128], *made = NULL;
        enum sbx_code rc;

        snprintf(id, sizeof(id), "%.*s", (int)strcspn(arg, "|"), arg);
        rc = sbx_snapshot(c, id, "bobs", &img);
        say(r, "snap-root|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? img->digest : sbx_error_message(c));
        sbx_image_free(img);
        img = NULL;
        rc = sbx_snapshot(c, "no-such-sandbox", "bobs", &img);
        say(r, "snap-none|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = img_create(c, strchr(arg, '|') + 1, NULL, &made);
        say(r, "create|%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? made : sbx_error_message(c));
        free(made);
        sbx_close(c);
}

/* Another user: a snapshot of root's sandbox is NOT_FOUND in the words of a sandbox that
 * does not exist, and root's snapshot by its name is NOT_FOUND as a name nobody pulled.
 * A sandbox of the host's root, and bad names, are refused and say why. */
START_TEST(others_and_refusals) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        char *base, *a, *host, *s, arg[300], *said, want[400];
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        s = snap(c, a, "roots");
        snprintf(arg, sizeof(arg), "%s|roots", a);
        said = as_bob(bob_tries, &d, arg);
        snprintf(want, sizeof(want), "snap-root|NOT_FOUND|sandbox '%s' not found", a);
        ck_assert_msg(strstr(said, want), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "snap-none|NOT_FOUND|sandbox 'no-such-sandbox' not found"),
                      "BOB got: %s", said);
        ck_assert_msg(strstr(said, "create|NOT_FOUND|no image roots: pull it first"), "BOB got: %s",
                      said);
        free(said);

        host = it_create(c, NULL);
        ck_assert_int_eq(sbx_snapshot(c, host, NULL, &img), SBX_UNIMPLEMENTED);
        ck_assert_msg(strstr(sbx_error_message(c), "only one made from an image"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(sbx_snapshot(c, a, "name@sha256:0123456789abcdef0123456789abcdef"
                                            "0123456789abcdef0123456789abcdef",
                                      &img),
                         SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_snapshot(c, a, "oci:/tmp/x", &img), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(sbx_error_message(c), "not a digest or a local source"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(sbx_snapshot(c, a, "Bad Name", &img), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_snapshot(c, NULL, NULL, &img), SBX_INVALID_ARGUMENT);
        free(host);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Past --max-image-size: TOO_LARGE naming the bound; the sandbox runs on, thawed, and
 * the store keeps nothing of it. */
START_TEST(too_large_leaves_nothing) {
        static const char *const small[] = {"--warm", "0", "--spares", "0", "--max-image-size",
                                            "4M", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image_list *l = NULL;
        struct sbx_image *img = NULL;
        char *base, *a, path[900];
        sbx_client *c;

        it_daemon_start(&d, small);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "busybox head -c 6000000 /dev/zero > /workspace/big && echo ok",
                   "ok\n");
        ck_assert_int_eq(sbx_snapshot(c, a, "big", &img), SBX_TOO_LARGE);
        ck_assert_msg(strstr(sbx_error_message(c), "--max-image-size"), "%s", sbx_error_message(c));
        expect_out(c, a, NULL, "echo still", "still\n");
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        sbx_image_list_free(l);
        snprintf(path, sizeof(path), "%s/images/tmp", d.state);
        ck_assert_int_eq(img_entries(path), 0);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx snapshot prints the name and the digest; sbx create --image takes the name. */
START_TEST(through_the_cli) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *out = NULL, *err = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo cli > /workspace/f && echo ok", "ok\n");
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"snapshot", "--name", "clisnap", a, NULL}),
                         0);
        ck_assert_msg(strncmp(out, "docker.io/library/clisnap:latest sha256:", 40) == 0, "%s", out);
        free(out);
        free(err);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"create", "--image", "clisnap", NULL}),
                         0);
        out[strcspn(out, "\n")] = '\0';
        expect_out(c, out, NULL, "busybox cat /workspace/f", "cli\n");
        free(out);
        free(err);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx_fork: five sandboxes with the source's files at one instant and its policy and
 * labels; each diverges without the others or the source seeing it. */
START_TEST(fork_five_diverge) {
        struct it_daemon d;
        const char *layout = make_image();
        const struct sbx_label label = {.key = "team", .value = "a"};
        struct sbx_fork_opts fo = {.count = 5};
        struct sbx_create_opts o;
        struct sbx_sandbox *src = NULL, *s = NULL;
        struct sbx_fork *f = NULL;
        char *base, shell[200];
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.labels = &label;
        o.n_labels = 1;
        o.policy.limits.memory_bytes = 256u << 20;
        o.policy.limits.set |= SBX_LIMIT_MEMORY;
        ck_assert_msg(sbx_create(c, &o, &src) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, src->id, NULL, "echo base > /workspace/f && echo ok", "ok\n");
        ck_assert_msg(sbx_fork(c, src->id, &fo, &f) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_uint_eq(f->n, 5);
        for (size_t i = 0; i < f->n; i++) {
                snprintf(shell, sizeof(shell), "echo %zu > /workspace/me && busybox cat /workspace/f",
                         i);
                expect_out(c, f->ids[i], NULL, shell, "base\n");
        }
        for (size_t i = 0; i < f->n; i++) {
                char want[32];
                snprintf(want, sizeof(want), "%zu\n", i);
                expect_out(c, f->ids[i], NULL, "busybox cat /workspace/me", want);
                ck_assert_int_eq(sbx_get(c, f->ids[i], &s), SBX_OK);
                ck_assert_uint_eq(s->n_labels, 1);
                ck_assert_str_eq(s->labels[0].value, "a");
                ck_assert_uint_eq(s->policy.limits.memory_bytes, 256u << 20);
                ck_assert_str_eq(s->image_digest, f->snapshot);
                sbx_sandbox_free(s);
                s = NULL;
        }
        expect_out(c, src->id, NULL, "busybox ls /workspace", "f\n");
        /* A sandbox that does not exist: NOT_FOUND, nothing made. */
        sbx_fork_free(f);
        f = NULL;
        ck_assert_int_eq(sbx_fork(c, "no-such", &fo, &f), SBX_NOT_FOUND);
        ck_assert_ptr_null(f);
        sbx_sandbox_free(src);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx fork with options of sbx create: those given replace the source's (--memory,
 * --network; --label K=V its label K), a list option adds to the source's list
 * (--writable), the rest stays the source's (its other labels, its other limits). A bad
 * value, --id or --image is a usage error naming the option before anything is made: no
 * snapshot, no sandbox. */
START_TEST(fork_overrides) {
        static const char *const bad[][2] = {
                {"--memory", "lots"}, {"--network", "some"}, {"--id", "one"}, {"--image", "img"}};
        static const struct sbx_label labels[] = {{.key = "team", .value = "a"},
                                                  {.key = "run", .value = "1"}};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_label team = {.key = "team", .value = "a"};
        struct sbx_list_opts lo = {.labels = &team, .n_labels = 1};
        struct sbx_sandbox_list *l = NULL;
        struct sbx_image_list *imgs = NULL;
        struct sbx_create_opts o;
        struct sbx_sandbox *src = NULL, *s = NULL;
        char *base, *out = NULL, *err = NULL, *id, *save = NULL, mine[600], added[600];
        char *wv[1] = {mine};
        sbx_client *c;
        size_t n = 0;

        snprintf(mine, sizeof(mine), "%s/fork-mine", it_base_dir());
        snprintf(added, sizeof(added), "%s/fork-added", it_base_dir());
        ck_assert_int_eq(mkdir(mine, 0755), 0);
        ck_assert_int_eq(mkdir(added, 0755), 0);
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.labels = labels;
        o.n_labels = 2;
        o.policy.network = SBX_NETWORK_FULL;
        o.policy.limits.memory_bytes = 256u << 20;
        o.policy.limits.processes = 100;
        o.policy.limits.set |= SBX_LIMIT_MEMORY | SBX_LIMIT_PROCESSES;
        o.policy.writable_paths = (struct sbx_strv){wv, 1};
        ck_assert_msg(sbx_create(c, &o, &src) == SBX_OK, "%s", sbx_error_message(c));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                        (const char *const[]){"fork", "-n", "2", bad[i][0],
                                                              bad[i][1], src->id, NULL}),
                                 125);
                ck_assert_msg(strstr(err, "INVALID_ARGUMENT") && strstr(err, bad[i][0]), "%s: %s",
                              bad[i][0], err);
                free(out);
                free(err);
        }
        ck_assert_int_eq(sbx_image_list(c, &imgs), SBX_OK);
        ck_assert_uint_eq(imgs->n, 1); /* the image only: no snapshot */
        sbx_image_list_free(imgs);
        ck_assert_int_eq(sbx_list(c, &lo, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1); /* the source only */
        sbx_sandbox_list_free(l);

        ck_assert_int_eq(
                it_sbx(&d, NULL, 0, &out, &err,
                       (const char *const[]){"fork", "-n", "2", "--memory", "512M", "--network",
                                             "none", "--label", "run=2", "--writable", added,
                                             src->id, NULL}),
                0);
        for (id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save), n++) {
                ck_assert_msg(sbx_get(c, id, &s) == SBX_OK, "%s", sbx_error_message(c));
                ck_assert_uint_eq(s->policy.limits.memory_bytes, 512u << 20);
                ck_assert_uint_eq(s->policy.limits.processes, 100);
                ck_assert_int_eq(s->policy.network, SBX_NETWORK_NONE);
                ck_assert_uint_eq(s->n_labels, 2);
                for (size_t i = 0; i < 2; i++)
                        ck_assert_str_eq(s->labels[i].value,
                                         strcmp(s->labels[i].key, "team") == 0 ? "a" : "2");
                ck_assert_uint_eq(s->policy.writable_paths.n, 2);
                ck_assert_str_eq(s->policy.writable_paths.v[0], mine);
                ck_assert_str_eq(s->policy.writable_paths.v[1], added);
                ck_assert_ptr_nonnull(s->image_digest);
                sbx_sandbox_free(s);
                s = NULL;
        }
        ck_assert_msg(n == 2, "%s", err);
        free(out);
        free(err);
        /* The source is as it was. */
        ck_assert_int_eq(sbx_get(c, src->id, &s), SBX_OK);
        ck_assert_uint_eq(s->policy.limits.memory_bytes, 256u << 20);
        ck_assert_int_eq(s->policy.network, SBX_NETWORK_FULL);
        ck_assert_uint_eq(s->policy.writable_paths.n, 1);
        sbx_sandbox_free(s);
        sbx_sandbox_free(src);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox whose disk limit holds its root and workspace (a filesystem image or project
 * quota here): its files are read from there. A set-id file of its workspace comes back
 * without the bit (init writes the workspace before its filter, and a workspace may be
 * kept on the host). */
START_TEST(disk_limited_and_setid) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        char *base, *snapd, *b = NULL;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.policy.limits.disk_bytes = 64u << 20;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        ck_assert_msg(sbx_create(c, &o, &s) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, s->id, "root",
                   "echo r > /etc/r && echo w > /workspace/w && busybox cp /bin/busybox "
                   "/workspace/suid && busybox chmod 6755 /workspace/suid && echo ok",
                   "ok\n");
        snapd = snap(c, s->id, "disked");
        o.image = "disked";
        ck_assert_msg(img_create(c, "disked", NULL, &b) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, b, NULL, "busybox cat /etc/r /workspace/w; busybox stat -c %a /workspace/suid",
                   "r\nw\n755\n");
        sbx_sandbox_free(s);
        free(b);
        free(snapd);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --max-snapshot-bytes-per-uid: the owner's snapshots' own layers together; past it
 * RESOURCE_EXHAUSTED naming the flag, the sandbox running on; room again once one goes. */
START_TEST(per_uid_bound) {
        static const char *const bound[] = {"--warm", "0", "--spares", "0",
                                            "--max-snapshot-bytes-per-uid", "3M", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_image *img = NULL;
        char *base, *a, *s1, *s2;
        sbx_client *c;

        it_daemon_start(&d, bound);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "busybox head -c 2000000 /dev/urandom > /workspace/r && echo ok",
                   "ok\n");
        s1 = snap(c, a, "first");
        ck_assert_int_eq(sbx_snapshot(c, a, "second", &img), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "--max-snapshot-bytes-per-uid (3145728)"), "%s",
                      sbx_error_message(c));
        expect_out(c, a, NULL, "echo still", "still\n");
        ck_assert_int_eq(sbx_image_remove(c, "first", NULL), SBX_OK);
        s2 = snap(c, a, "second");
        free(s1);
        free(s2);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* sbx mcp's snapshot tool: the session's own sandbox, by the name given; a sandbox made
 * from it has what the session wrote. In a sandbox of the host's root it says why not. */
START_TEST(mcp_snapshot_tool) {
        static const char in[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
                "\"name\":\"t\",\"version\":\"1\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"write_file\",\"arguments\":{\"path\":\"/workspace/a\","
                "\"content\":\"agent\\n\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"snapshot\",\"arguments\":{\"name\":\"mcpsnap:1\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"snapshot\",\"arguments\":{\"name\":7}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"write_file\",\"arguments\":{\"path\":\"/workspace/a\","
                "\"content\":\"broken\\n\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"restore\",\"arguments\":{\"snapshot\":\"mcpsnap:1\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"read_file\",\"arguments\":{\"path\":\"/workspace/a\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"restore\",\"arguments\":{}}}\n";
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *out = NULL, *err = NULL, *b;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        ck_assert_int_eq(it_sbx(&d, in, sizeof(in) - 1, &out, &err,
                                (const char *const[]){"mcp", "--image", base, NULL}),
                         0);
        ck_assert_msg(strstr(out, "\"name\":\"docker.io/library/mcpsnap:1\""), "%s\n%s", out, err);
        ck_assert_msg(strstr(out, "invalid arguments for snapshot: 'name' must be a string"), "%s",
                      out);
        /* restore: the file as the snapshot had it, and its argument required. */
        ck_assert_msg(strstr(out, "restored sandbox "), "%s", out);
        ck_assert_msg(strstr(out, "\"id\":7,\"result\":{\"content\":[{\"type\":\"text\","
                                  "\"text\":\"agent\\n"),
                      "%s", out);
        ck_assert_msg(strstr(out, "invalid arguments for restore: 'snapshot' is required"), "%s",
                      out);
        free(out);
        free(err);
        b = must_create(c, "mcpsnap:1");
        expect_out(c, b, NULL, "busybox cat /workspace/a", "agent\n");
        /* The host's root: the snapshot tool says UNIMPLEMENTED and why. */
        ck_assert_int_eq(it_sbx(&d, in, sizeof(in) - 1, &out, &err,
                                (const char *const[]){"mcp", NULL}),
                         0);
        ck_assert_msg(strstr(out, "UNIMPLEMENTED: a snapshot of a sandbox of the host's root"),
                      "%s", out);
        free(out);
        free(err);
        free(b);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The freezer file of the v1 cgroup of process pid ("" when it has none). */
static void freezer_state_of(pid_t pid, char *buf, size_t len) {
        char path[64], line[512];
        FILE *f;

        buf[0] = '\0';
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f)) {
                char *p = strstr(line, ":freezer:");
                if (!p)
                        continue;
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, len, "/sys/fs/cgroup/freezer%s/freezer.state", p + 9);
        }
        if (f)
                fclose(f);
}

/* A daemon that dies while a sandbox is frozen (mid-snapshot) leaves it frozen: the
 * daemon that adopts it thaws it, and its commands run. */
START_TEST(frozen_by_a_dead_daemon_is_thawed) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, needle[200], line[1024], state[700];
        pid_t init = 0;
        FILE *f;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        snprintf(needle, sizeof(needle), "sbx=%s: ready (init pid ", a);
        f = fopen(d.log, "re");
        while (f && fgets(line, sizeof(line), f))
                if (strstr(line, needle))
                        init = (pid_t)atoi(strstr(line, needle) + strlen(needle));
        if (f)
                fclose(f);
        ck_assert_int_gt(init, 0);
        freezer_state_of(init, state, sizeof(state));
        if (!state[0]) {
                fprintf(stderr, "%s: skipped, no v1 freezer here\n", __func__);
                goto out;
        }
        f = fopen(state, "we");
        ck_assert_ptr_nonnull(f);
        fputs("FROZEN", f);
        ck_assert_int_eq(fclose(f), 0);
        sbx_close(c);
        it_daemon_kill(&d);
        it_daemon_restart(&d, flags);
        c = it_connect(&d);
        expect_out(c, a, NULL, "echo thawed", "thawed\n");
out:
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless sbxd (nobody's): without delegated cgroups its sandbox's processes are
 * stopped with signals (SIGSTOP to each of its PID namespace's, init aside) and
 * continued after; a command writing meanwhile goes on, and the snapshot holds whole
 * lines of its output. */
START_TEST(rootless_snapshot) {
        struct it_daemon d;
        const char *layout = make_image();
        sbx_client *c;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        c = it_connect(&d);
        snapshot_a_writer(c, layout, 100000);
        /* The shell loop at least was stopped (and continued). */
        ck_assert_int_eq(it_log_count(&d, "processes stopped by signals)"), 1);
        ck_assert_int_eq(it_log_count(&d, ", 0 processes stopped by signals)"), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static void bob_exports(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        char path[700];
        int fd;
        enum sbx_code rc;

        snprintf(path, sizeof(path), "%s.bob", arg);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = sbx_image_export(c, "exported", fd, NULL);
        say(r, "export|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        close(fd);
        unlink(path);
        sbx_close(c);
}

/* sbx image export: a snapshot as an OCI archive that skopeo copies and that imports
 * again (sbx image pull oci-archive:), as a sandbox with the same files, workspace
 * included. Another user's image is NOT_FOUND; a failed export leaves no file. */
START_TEST(export_loads) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *b, *s, file[700], cmd[2200], *out = NULL, *err = NULL, *said;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, "root", "echo root > /etc/r && busybox rm /etc/greeting && echo ok",
                   "ok\n");
        expect_out(c, a, NULL, "echo ws > /workspace/w && echo ok", "ok\n");
        s = snap(c, a, "exported");
        snprintf(file, sizeof(file), "%s/exported.tar", it_base_dir());
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"image", "export", "exported", file, NULL}),
                         0);
        ck_assert_msg(strstr(out, s), "%s", out);
        free(out);
        free(err);
        snprintf(cmd, sizeof(cmd),
                 "skopeo copy --quiet oci-archive:%s oci:%s/copied:t >%s/skopeo.log 2>&1", file,
                 it_base_dir(), it_base_dir());
        ck_assert_msg(system(cmd) == 0, "skopeo copy failed: see %s/skopeo.log", it_base_dir());
        /* Imported again, as another image: the same files. */
        snprintf(cmd, sizeof(cmd), "oci-archive:%s", file);
        {
                struct sbx_image *img = NULL;
                ck_assert_msg(sbx_image_pull(c, cmd, NULL, &img) == SBX_OK, "%s",
                              sbx_error_message(c));
                sbx_image_free(img);
        }
        b = must_create(c, cmd);
        expect_out(c, b, NULL,
                   "busybox cat /etc/r /workspace/w; busybox ls /etc/greeting 2>/dev/null || "
                   "echo gone",
                   "root\nws\ngone\n");
        /* BOB: not his. */
        said = as_bob(bob_exports, &d, file);
        ck_assert_msg(strstr(said, "export|NOT_FOUND|no image exported"), "BOB got: %s", said);
        free(said);
        /* A failed export leaves no file. */
        snprintf(file, sizeof(file), "%s/none.tar", it_base_dir());
        ck_assert_int_ne(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"image", "export", "no-such", file, NULL}),
                         0);
        ck_assert_int_eq(access(file, F_OK), -1);
        free(out);
        free(err);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The snapshot's file rel of the store under state (its layer's tree); its path. */
static void layer_file(const char *state, const char *rel, char *path, size_t len) {
        char pattern[1200];
        glob_t g;

        snprintf(pattern, sizeof(pattern), "%s/images/layers/*/tree/%s", state, rel);
        ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
        ck_assert_uint_eq(g.gl_pathc, 1);
        snprintf(path, len, "%s", g.gl_pathv[0]);
        globfree(&g);
}

/* A daemon whose state directory is on a filesystem that shares blocks (XFS with
 * reflink, made by the test): a snapshot takes what changed by cloning it, so that the
 * store's layer holds the sandbox's own blocks (on disk once); a sandbox made from it
 * has the same files; the sandbox goes on. */
START_TEST(shares_blocks_on_xfs) {
        struct it_daemon d;
        const char *layout = make_image();
        char mnt[600], img[600], state[700], path[1300], *base, *a, *b, *s, *sums, *sums_b;
        const char *xflags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                                "--state-dir", state, NULL};
        const char *sum = "busybox md5sum /workspace/f* /etc/big";
        uint64_t before, grown;
        sbx_client *c;

        test_private_mounts();
        snprintf(mnt, sizeof(mnt), "%s/xfs", it_base_dir());
        snprintf(img, sizeof(img), "%s/xfs.img", it_base_dir());
        ck_assert_int_eq(mkdir(mnt, 0755), 0);
        if (!test_xfs_mount(img, mnt))
                return;
        snprintf(state, sizeof(state), "%s/state", mnt);
        it_daemon_start(&d, xflags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, "root",
                   "i=0; while [ $i -lt 32 ]; do busybox dd if=/dev/urandom of=/workspace/f$i "
                   "bs=1048576 count=1 2>/dev/null; i=$((i+1)); done; busybox dd "
                   "if=/dev/urandom of=/etc/big bs=1048576 count=2 2>/dev/null; echo ok",
                   "ok\n");
        sums = run_as(c, a, NULL, sum);
        sync();
        before = test_used_bytes(mnt);
        s = snap(c, a, "xfs:1");
        sync();
        grown = test_used_bytes(mnt) - before;
        /* 34 MiB changed: the layer shares their blocks; headers, small files, metadata. */
        ck_assert_msg(grown < (8u << 20), "the snapshot took %llu bytes more",
                      (unsigned long long)grown);
        layer_file(state, "workspace/f7", path, sizeof(path));
        ck_assert_uint_eq(test_shared_bytes(path), 1u << 20);
        layer_file(state, "etc/big", path, sizeof(path));
        ck_assert_uint_eq(test_shared_bytes(path), 2u << 20);
        ck_assert_int_eq(it_log_count(&d, "snapshot "), 1);

        b = must_create(c, "xfs:1");
        sums_b = run_as(c, b, NULL, sum);
        ck_assert_str_eq(sums_b, sums);
        /* Both go on, apart: what one writes the other does not see. */
        expect_out(c, a, "root", "echo a > /workspace/f7 && busybox wc -c < /workspace/f7", "2\n");
        expect_out(c, b, NULL, "busybox wc -c < /workspace/f7", "1048576\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(sums);
        free(sums_b);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("snapshot");

        SBX_ADD_TEST_CASE(s, root_and_workspace_come_back, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, a_writing_command_goes_on, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, others_and_refusals, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, too_large_leaves_nothing, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, through_the_cli, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, fork_five_diverge, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, fork_overrides, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disk_limited_and_setid, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, per_uid_bound, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, mcp_snapshot_tool, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, frozen_by_a_dead_daemon_is_thawed, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_snapshot, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, export_loads, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, shares_blocks_on_xfs, 240, it_fixture_setup_var, it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
