/* it_restore.c: putting a sandbox's files back to a snapshot (RestoreSandbox, sbx
 * restore; docs/snapshots.md) against a real sbxd, root and rootless, as two users,
 * across a restart.
 *
 * The image is tests/mkimage.sh's "img" (busybox in four layers; User 1000:1000,
 * WorkingDir /data), imported from its OCI layout as it_snapshot.c does. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asbob.h"
#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"
#include "snaptest.h"
#include "testutil.h"

static const char *const flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                                    "--keep-sandboxes", NULL};

/* The names in STATE/sandboxes, one per line, sorted by readdir order. */
static char *state_dirs(const struct it_daemon *d) {
        char path[900], *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        struct dirent *e;
        DIR *dir;

        snprintf(path, sizeof(path), "%s/sandboxes", d->state);
        dir = opendir(path);
        while (dir && (e = readdir(dir)))
                if (e->d_name[0] != '.')
                        fprintf(f, "%s\n", e->d_name);
        if (dir)
                closedir(dir);
        fclose(f);
        return out;
}

/* A background command of id that sleeps; its id (freed by the caller). */
static char *sleeper(sbx_client *c, const char *id) {
        const char *argv[] = {"/bin/sh", "-c", "exec busybox sleep 1000", NULL};
        struct sbx_background *bg = NULL;
        struct sbx_exec_opts o;
        char *cmd;

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.no_timeout = 1;
        ck_assert_msg(sbx_exec_background(c, id, &o, &bg) == SBX_OK, "%s", sbx_error_message(c));
        cmd = strdup(bg->command_id);
        sbx_background_free(bg);
        return cmd;
}

/* The record of command cmd of sandbox id (NULL when there is none). */
static struct sbx_command_record *record_of(struct sbx_history *h, const char *cmd) {
        for (size_t i = 0; i < h->n; i++)
                if (strcmp(h->v[i].command_id, cmd) == 0)
                        return &h->v[i];
        return NULL;
}

/* After an `rm -rf` of the workspace and a broken system (its shell gone, a file of
 * /etc changed) a restore puts both back as the snapshot had them: the sandbox keeps its
 * ID, owner, creation time, deadline, labels and history; a command running then ends
 * as the sandbox ending; files made after the snapshot (and /tmp) are gone; the next command is
 * numbered on; the old directory goes; the restored sandbox is adopted after a restart
 * and restored again; its terminate records one end. */
START_TEST(restore_puts_files_back) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_sandbox *before = NULL, *after = NULL;
        struct sbx_history *h = NULL;
        struct sbx_command_record *rec;
        char *base, *a, *s, *cmd, *dirs;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, "root", "echo kept > /etc/kept && echo ok", "ok\n");
        expect_out(c, a, NULL,
                   "echo mine > /workspace/w && busybox mkdir /workspace/d && "
                   "echo two > /workspace/d/f && echo ok",
                   "ok\n");
        s = snap(c, a, "good");
        ck_assert_int_eq(sbx_get(c, a, &before), SBX_OK);

        /* Things go wrong. */
        expect_out(c, a, "root",
                   "echo broken > /etc/kept && busybox rm -rf /workspace/* && "
                   "echo later > /workspace/later && echo t > /tmp/t && echo ok",
                   "ok\n");
        cmd = sleeper(c, a);
        expect_out(c, a, "root", "busybox rm /bin/sh && echo ok", "ok\n");

        ck_assert_msg(sbx_restore(c, a, "good", &after) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_str_eq(after->id, a);
        ck_assert_uint_eq(after->owner_uid, before->owner_uid);
        ck_assert_int_eq(after->created_unix_ms, before->created_unix_ms);
        ck_assert_int_eq(after->deadline_unix_ms, before->deadline_unix_ms);
        ck_assert_int_eq(after->state, SBX_STATE_READY);
        ck_assert_str_eq(after->image, "good");
        ck_assert_str_eq(after->image_digest, s);
        expect_out(c, a, NULL,
                   "busybox cat /etc/kept /workspace/w /workspace/d/f; "
                   "busybox ls /workspace/later /tmp/t 2>/dev/null || echo gone; busybox id -u",
                   "kept\nmine\ntwo\ngone\n1000\n");

        /* The command that ran then was killed and recorded; the history goes on. */
        ck_assert_int_eq(sbx_history(c, a, 0, 0, &h), SBX_OK);
        rec = record_of(h, cmd);
        ck_assert_ptr_nonnull(rec);
        ck_assert_int_ne(rec->ended_unix_ms, 0);
        ck_assert_int_eq(rec->outcome, SBX_OUTCOME_SANDBOX_ENDED);
        ck_assert_uint_eq(h->n, 6);
        ck_assert_ptr_nonnull(record_of(h, "c-6")); /* the cat above: numbered on */
        sbx_history_free(h);

        /* Only its own directory is left. */
        for (int i = 0; i < 200; i++) {
                dirs = state_dirs(&d);
                if (strchr(dirs, '~') == NULL)
                        break;
                free(dirs);
                dirs = NULL;
                usleep(10000);
        }
        ck_assert_ptr_nonnull(dirs);
        ck_assert_msg(strncmp(dirs, a, strlen(a)) == 0 && strcmp(dirs + strlen(a), "\n") == 0,
                      "left: %s", dirs);
        free(dirs);

        /* Across a restart: adopted with the restored files, and restored again. */
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, flags);
        c = it_connect(&d);
        expect_out(c, a, NULL, "echo again > /workspace/w && busybox cat /etc/kept", "kept\n");
        ck_assert_int_eq(sbx_restore(c, a, s, NULL), SBX_OK);
        expect_out(c, a, NULL, "busybox cat /workspace/w", "mine\n");
        ck_assert_int_eq(it_log_count(&d, "restored from"), 2); /* one log, both daemons */

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        sbx_sandbox_free(after);
        after = NULL;
        ck_assert_int_eq(sbx_get(c, a, &after), SBX_OK);
        ck_assert_int_eq(after->state, SBX_STATE_TERMINATED);
        ck_assert_int_eq(sbx_restore(c, a, s, NULL), SBX_SANDBOX_ENDED);

        sbx_sandbox_free(before);
        sbx_sandbox_free(after);
        free(cmd);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB, given "ROOTS|SHARED|DIGEST": root's own sandbox with root's snapshot's name and
 * digest, and the sandbox root shares with him from a snapshot he takes of it (both's);
 * given "again|SHARED": that snapshot again, once root has removed his name for it. */
static void bob_restores(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        char ids[2][128], *bobs;
        const char *p = arg;
        enum sbx_code rc;

        for (int i = 0; i < 2; i++) {
                snprintf(ids[i], sizeof(ids[i]), "%.*s", (int)strcspn(p, "|"), p);
                p += strcspn(p, "|") + 1;
        }
        if (strcmp(ids[0], "again") == 0) {
                rc = sbx_restore(c, ids[1], "bobsnap", NULL);
                say(r, "bobs-own|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
                sbx_close(c);
                return;
        }
        rc = sbx_restore(c, ids[0], "rootsnap", NULL);
        say(r, "others|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        rc = sbx_restore(c, ids[0], p, NULL);
        say(r, "others-digest|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        bobs = snap(c, ids[1], "bobsnap");
        rc = sbx_restore(c, ids[1], "bobsnap", NULL);
        say(r, "shared|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        free(bobs);
        sbx_close(c);
}

/* BOB: root's sandbox is NOT_FOUND in the words of one that does not exist, whatever
 * image he names; in a sandbox root shares with him, a snapshot he took (both's)
 * restores, an image of his alone does not. Root: no image, an unknown one, and a
 * sandbox of the host's root restored to an image. */
START_TEST(others_and_refusals) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        uint32_t bob = BOB;
        char *base, *a, *shared, *s, *host, arg[600], want[300], *said;
        sbx_client *c;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo roots > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "rootsnap");
        sbx_create_opts_init(&o);
        o.image = base;
        o.share_uids = &bob;
        o.n_share_uids = 1;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        shared = strdup(sb->id);
        sbx_sandbox_free(sb);
        expect_out(c, shared, NULL, "echo shared > /workspace/f && echo ok", "ok\n");
        expect_out(c, a, NULL, "echo changed > /workspace/f && echo ok", "ok\n");

        snprintf(arg, sizeof(arg), "%s|%s|%s", a, shared, s);
        said = as_bob(bob_restores, &d, arg);
        snprintf(want, sizeof(want), "others|NOT_FOUND|sandbox '%s' not found", a);
        ck_assert_msg(strstr(said, want), "BOB got: %s", said);
        snprintf(want, sizeof(want), "others-digest|NOT_FOUND|sandbox '%s' not found", a);
        ck_assert_msg(strstr(said, want), "BOB got: %s", said);
        ck_assert_msg(strstr(said, "shared|OK|"), "BOB got: %s", said);
        free(said);
        /* Once root has removed his name for it, BOB's snapshot is his alone. */
        ck_assert_int_eq(sbx_image_remove(c, "bobsnap", NULL), SBX_OK);
        snprintf(arg, sizeof(arg), "again|%s", shared);
        said = as_bob(bob_restores, &d, arg);
        ck_assert_msg(strstr(said, "bobs-own|NOT_FOUND|image bobsnap is not one the sandbox's "
                                   "owner has"),
                      "BOB got: %s", said);
        free(said);
        /* Root's sandbox is untouched; the shared one is as BOB's snapshot had it, its
         * image named by its digest (BOB's name for it may mean another image to root). */
        expect_out(c, a, NULL, "busybox cat /workspace/f", "changed\n");
        expect_out(c, shared, NULL, "busybox cat /workspace/f", "shared\n");
        ck_assert_int_eq(sbx_get(c, shared, &sb), SBX_OK);
        ck_assert_msg(strncmp(sb->image, "sha256:", 7) == 0 &&
                              strcmp(sb->image, sb->image_digest) == 0,
                      "%s %s", sb->image, sb->image_digest);
        sbx_sandbox_free(sb);
        sb = NULL;

        ck_assert_int_eq(sbx_restore(c, a, "", NULL), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_restore(c, a, "no-such-image", NULL), SBX_NOT_FOUND);
        ck_assert_msg(strstr(sbx_error_message(c), "no-such-image"), "%s", sbx_error_message(c));
        ck_assert_int_eq(sbx_restore(c, "no-such-sandbox", s, NULL), SBX_NOT_FOUND);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "changed\n");

        /* A sandbox of the host's root becomes one of the snapshot. */
        host = it_create(c, NULL);
        ck_assert_msg(sbx_restore(c, host, "rootsnap", NULL) == SBX_OK, "%s",
                      sbx_error_message(c));
        expect_out(c, host, NULL, "busybox cat /workspace/f /etc/greeting", "roots\nsecond\n");

        free(host);
        free(shared);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Two restores at once: one restores, the other is refused (RESOURCE_EXHAUSTED, retry)
 * or comes after it. A terminate during a restore: the restore says the sandbox ended,
 * or it restored and the terminate ended the restored one; either way one end is
 * recorded and nothing is left in the state directory. The CLI restores and prints
 * nothing. */
START_TEST(races_and_cli) {
        struct it_daemon d;
        const char *layout = make_image();
        struct racer r[2];
        pthread_t th[2];
        struct sbx_sandbox *sb = NULL;
        char *base, *a, *s, *out = NULL, *err = NULL, *dirs;
        sbx_client *c;
        int ok = 0;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo one > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "racesnap");
        for (int i = 0; i < 2; i++) {
                r[i] = (struct racer){.d = &d, .id = a, .image = "racesnap"};
                ck_assert_int_eq(pthread_create(&th[i], NULL, restore_thread, &r[i]), 0);
        }
        for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                ck_assert_msg(r[i].rc == SBX_OK || (r[i].rc == SBX_RESOURCE_EXHAUSTED &&
                                                    strstr(r[i].msg, "under way")),
                              "%s: %s", sbx_code_name(r[i].rc), r[i].msg);
                ok += r[i].rc == SBX_OK;
        }
        ck_assert_int_ge(ok, 1);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "one\n");

        /* The CLI. */
        expect_out(c, a, NULL, "echo two > /workspace/f && echo ok", "ok\n");
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"restore", a, "racesnap", NULL}),
                         0);
        ck_assert_str_eq(out, "");
        free(out);
        free(err);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "one\n");
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, &err,
                                (const char *const[]){"restore", a, "nope", NULL}),
                         125);
        ck_assert_msg(strstr(err, "NOT_FOUND"), "%s", err);
        free(out);
        free(err);

        /* A terminate while it is restored. */
        r[0] = (struct racer){.d = &d, .id = a, .image = "racesnap"};
        ck_assert_int_eq(pthread_create(&th[0], NULL, restore_thread, &r[0]), 0);
        usleep(5000);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        pthread_join(th[0], NULL);
        ck_assert_msg(r[0].rc == SBX_OK || r[0].rc == SBX_SANDBOX_ENDED, "%s: %s",
                      sbx_code_name(r[0].rc), r[0].msg);
        if (r[0].rc == SBX_OK) /* it restored first: the terminate ended the restored one */
                ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_get(c, a, &sb), SBX_OK);
        ck_assert_int_eq(sb->state, SBX_STATE_TERMINATED);
        sbx_sandbox_free(sb);
        for (int i = 0; i < 300; i++) {
                dirs = state_dirs(&d);
                if (!dirs[0])
                        break;
                free(dirs);
                dirs = NULL;
                usleep(10000);
        }
        ck_assert_msg(dirs && !dirs[0], "left: %s", dirs ? dirs : "?");
        free(dirs);

        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless sbxd (nobody's): the same restore, its files its user's. */
START_TEST(rootless_restore) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *s;
        sbx_client *c;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo mine > /workspace/w && echo ok", "ok\n");
        s = snap(c, a, "rl");
        expect_out(c, a, NULL, "busybox rm -rf /workspace/* && echo ok", "ok\n");
        ck_assert_msg(sbx_restore(c, a, "rl", NULL) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/w", "mine\n");
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("restore");

        SBX_ADD_TEST_CASE(s, restore_puts_files_back, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, others_and_refusals, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, races_and_cli, 240, it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_restore, 240, it_fixture_setup_var, it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
