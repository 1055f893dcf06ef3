/* it_restore_attacks.c: a red-team pass on RestoreSandbox (sbx restore; docs/snapshots.md
 * "Restore, tried") against a real root sbxd as two users (root and BOB) and a rootless
 * one: the daemon stopped or killed while a restore builds and just after it took the
 * place, the replaced sandbox frozen while it ends, many restores in a row and at once,
 * a share user's and the owner's rights to the policy's host paths, other users'
 * images, the deadline and the idle limit while a restore builds, the bounds of ids and
 * ptys, a disk-limited workspace, a host directory's root, the records locked.
 *
 * The image is tests/mkimage.sh's "img" (busybox in four layers; User 1000:1000). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
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
#include "snaptest.h"
#include "testutil.h"

static const char *const keep[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                                   "--keep-sandboxes", NULL};

/* How many names in STATE/sandboxes are a restore's or a replaced one's. */
static int tilde_dirs(const struct it_daemon *d) {
        char path[900];
        struct dirent *e;
        DIR *dir;
        int n = 0;

        snprintf(path, sizeof(path), "%s/sandboxes", d->state);
        dir = opendir(path);
        while (dir && (e = readdir(dir)))
                n += strncmp(e->d_name, "~restore-", 9) == 0 ||
                     strncmp(e->d_name, "~replaced-", 10) == 0;
        if (dir)
                closedir(dir);
        return n;
}

/* Waits up to 10 s for no such directory (tilde_dirs); how many are left then. */
static int tilde_dirs_go(const struct it_daemon *d) {
        int n = 0;

        for (int i = 0; i < 1000 && (n = tilde_dirs(d)) > 0; i++)
                usleep(10000);
        return n;
}

/* The group of the freezer's hierarchy that holds the groups of the daemon's sandboxes
 * into base: the parent of sandbox id's group (named by its id: one a create made). */
static void freezer_base(const char *id, char *base, size_t len) {
        char cmd[600];
        FILE *p;

        snprintf(cmd, sizeof(cmd), "find /sys/fs/cgroup/freezer -maxdepth 6 -type d -name '%s'",
                 id);
        p = popen(cmd, "r");
        base[0] = '\0';
        if (p && fgets(base, (int)len, p))
                base[strcspn(base, "\n")] = '\0';
        if (p)
                pclose(p);
        ck_assert_msg(strrchr(base, '/'), "no freezer group of %s", id);
        *strrchr(base, '/') = '\0';
}

/* How many groups base (freezer_base) holds, waiting up to 10 s for them to be no
 * more than want. */
static int sandbox_groups(const char *base, int want) {
        int n = -1;

        for (int i = 0; i < 1000; i++) {
                DIR *dir = opendir(base);
                struct dirent *e;
                n = 0;
                while (dir && (e = readdir(dir)))
                        n += e->d_type == DT_DIR && e->d_name[0] != '.';
                if (dir)
                        closedir(dir);
                if (n <= want)
                        break;
                usleep(10000);
        }
        return n;
}

/* A sandbox whose snapshot "big" holds a 150 MiB workspace file (seeded into a restore's
 * new workspace, which makes the restore build long enough to be caught), /workspace/f
 * "snap" there and "now" in the sandbox. Its id. */
static char *big_snapshot_sandbox(sbx_client *c, const char *base) {
        char *a = must_create(c, base), *s;

        expect_out(c, a, NULL,
                   "busybox dd if=/dev/zero of=/workspace/big bs=1M count=150 2>/dev/null && "
                   "echo snap > /workspace/f && echo ok",
                   "ok\n");
        s = snap(c, a, "big");
        free(s);
        expect_out(c, a, NULL, "echo now > /workspace/f && echo ok", "ok\n");
        return a;
}

/* Waits until a restore's directory shows in STATE/sandboxes (up to 20 s): 1 when it
 * did. */
static int restore_building(const struct it_daemon *d) {
        for (int i = 0; i < 20000; i++) {
                if (tilde_dirs(d) > 0)
                        return 1;
                usleep(1000);
        }
        return 0;
}

/* Restores id from "big" and, while that builds, stops d (SIGTERM; SIGKILL when kill)
 * and starts it again with flags: the restore failed. c is closed; a new client. */
static sbx_client *restart_mid_restore(struct it_daemon *d, sbx_client *c, const char *id,
                                       int kill, const char *const *flags) {
        struct racer r = {.d = d, .id = id, .image = "big"};
        pthread_t th;

        ck_assert_int_eq(pthread_create(&th, NULL, restore_thread, &r), 0);
        ck_assert_msg(restore_building(d), "no restore directory showed");
        if (kill)
                it_daemon_kill(d);
        else
                ck_assert_int_eq(it_daemon_stop(d), 0);
        pthread_join(th, NULL);
        ck_assert_int_ne(r.rc, SBX_OK);
        sbx_close(c);
        it_daemon_restart(d, flags);
        return it_connect(d);
}

/* The daemon stopped (SIGTERM), then SIGKILLed, while a restore builds
 * (--keep-sandboxes): the next one adopts the sandbox as it was (its files, READY, a
 * live init), removes the restore's directory and group; a restore then works. Killed again just once a restore has taken the
 * sandbox's place: the next one adopts the restored sandbox, and nothing of the
 * replaced one is left. */
START_TEST(daemon_killed_mid_restore) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_sandbox *sb = NULL;
        struct racer r;
        pthread_t th;
        char *base, *a, sql[300], cg[1000];
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = big_snapshot_sandbox(c, base);
        freezer_base(a, cg, sizeof(cg));

        /* Stopped (SIGTERM) while it builds: the restore fails, the sandbox is left to
         * the next daemon as it was. */
        c = restart_mid_restore(&d, c, a, 0, keep);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "now\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        ck_assert_int_eq(sandbox_groups(cg, 1), 1);

        c = restart_mid_restore(&d, c, a, 1, keep);
        ck_assert_int_eq(sbx_get(c, a, &sb), SBX_OK);
        ck_assert_int_eq(sb->state, SBX_STATE_READY);
        sbx_sandbox_free(sb);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "now\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        ck_assert_int_eq(sandbox_groups(cg, 1), 1);

        /* Killed once the restore took the sandbox's place (its log line follows the
         * record's update at once). */
        r = (struct racer){.d = &d, .id = a, .image = "big"};
        ck_assert_int_eq(pthread_create(&th, NULL, restore_thread, &r), 0);
        ck_assert_int_eq(it_wait_log(&d, "restored from big", 1), 1);
        it_daemon_kill(&d);
        pthread_join(th, NULL);
        sbx_close(c);
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, a, &sb), SBX_OK);
        ck_assert_msg(sb->state == SBX_STATE_READY, "state %d", sb->state);
        sbx_sandbox_free(sb);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM sandboxes WHERE id = '%s' AND state = 'ready'", a);
        ck_assert_int_eq(it_db_int(&d, sql), 1);
        ck_assert_int_eq(sandbox_groups(cg, 1), 1);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB, given "SHARED": snapshots root's sandbox shared with him (both's), then
 * restores it from that snapshot. */
static void bob_restores_shared(struct it_daemon *d, const char *id, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_image *img = NULL;
        enum sbx_code rc = sbx_snapshot(c, id, "bobsnap", &img);

        say(r, "snapshot|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        sbx_image_free(img);
        rc = sbx_restore(c, id, "bobsnap", NULL);
        say(r, "restore|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        sbx_close(c);
}

/* Root's sandbox with a writable host directory only root may open, shared with BOB:
 * BOB's restore is judged with his rights and refused, the sandbox as it was (its
 * writable path still written through); root's own restore of it works. */
START_TEST(share_user_restore_judged_with_his_rights) {
        struct it_daemon d;
        const char *layout = make_image();
        const char *paths[1];
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        uint32_t bob = BOB;
        char host[700], cmd[1600], *base, *said, *s;
        sbx_client *c;

        /* Open to anyone inside a directory only root may enter. */
        snprintf(host, sizeof(host), "%s/rootonly", it_base_dir());
        ck_assert_int_eq(mkdir(host, 0700), 0);
        snprintf(host, sizeof(host), "%s/rootonly/w", it_base_dir());
        ck_assert_int_eq(mkdir(host, 0777), 0);
        ck_assert_int_eq(chmod(host, 0777), 0);
        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.share_uids = &bob;
        o.n_share_uids = 1;
        paths[0] = host;
        sbx_policy_workspace_write(&o.policy, paths, 1, SBX_NETWORK_NONE);
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        snprintf(cmd, sizeof(cmd), "echo before > /workspace/f && echo r > %s/r && echo ok",
                 host);
        expect_out(c, sb->id, NULL, cmd, "ok\n");

        said = as_bob(bob_restores_shared, &d, sb->id);
        ck_assert_msg(strstr(said, "snapshot|OK|"), "BOB got: %s", said);
        ck_assert_msg(!strstr(said, "restore|OK|"), "BOB restored: %s", said);
        ck_assert_msg(strstr(said, host), "BOB got: %s", said);
        free(said);
        snprintf(cmd, sizeof(cmd), "busybox cat /workspace/f %s/r && echo w > %s/w && echo ok",
                 host, host);
        expect_out(c, sb->id, NULL, cmd, "before\nr\nok\n");

        s = snap(c, sb->id, "rootsnap");
        expect_out(c, sb->id, NULL, "echo after > /workspace/f && echo ok", "ok\n");
        ck_assert_msg(sbx_restore(c, sb->id, "rootsnap", NULL) == SBX_OK, "%s",
                      sbx_error_message(c));
        snprintf(cmd, sizeof(cmd), "busybox cat /workspace/f %s/w", host);
        expect_out(c, sb->id, NULL, cmd, "before\nw\n");

        free(s);
        sbx_sandbox_free(sb);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A background command of id that sleeps (its output unread). */
static void sleeper(sbx_client *c, const char *id) {
        const char *argv[] = {"/bin/sh", "-c", "exec busybox sleep 1000", NULL};
        struct sbx_background *bg = NULL;
        struct sbx_exec_opts o;

        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 3;
        o.no_timeout = 1;
        ck_assert_msg(sbx_exec_background(c, id, &o, &bg) == SBX_OK, "%s", sbx_error_message(c));
        sbx_background_free(bg);
}

/* Waits up to 10 s for the daemon's descriptors to be no more than want; how many. */
static int fds_settle(const struct it_daemon *d, int want) {
        int n = 0;

        for (int i = 0; i < 1000 && (n = it_open_fds(d->pid)) > want; i++)
                usleep(10000);
        return n;
}

/* More restores of one sandbox, each with a background command running, than a root
 * sbxd has blocks of ids for image sandboxes: each one gives back the replaced
 * sandbox's block, descriptors, directory and group; the commands are numbered on. */
START_TEST(restores_in_a_loop_leak_nothing) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_history *h = NULL;
        char *base, *a, *s, want[64], cg[1000];
        int fds;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        freezer_base(a, cg, sizeof(cg));
        expect_out(c, a, NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "loop");
        ck_assert_int_eq(sbx_restore(c, a, "loop", NULL), SBX_OK);
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        /* The descriptors of a sandbox that ran a command (a group's events watched). */
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        fds = it_open_fds(d.pid);
        for (unsigned i = 0; i < SBX_IMAGE_BLOCKS + 3; i++) {
                sleeper(c, a);
                ck_assert_msg(sbx_restore(c, a, "loop", NULL) == SBX_OK, "restore %u: %s", i,
                              sbx_error_message(c));
        }
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        ck_assert_int_eq(sandbox_groups(cg, 1), 1);
        ck_assert_int_le(fds_settle(&d, fds), fds);
        ck_assert_int_eq(sbx_history(c, a, 0, 0, &h), SBX_OK);
        /* Two commands before the loop, one per restore in it, then the cat above. */
        snprintf(want, sizeof(want), "c-%u", 2 + SBX_IMAGE_BLOCKS + 3 + 1);
        ck_assert_str_eq(h->v[h->n - 1].command_id, want);
        sbx_history_free(h);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Writes state ("FROZEN", "THAWED") into the freezer group of sandbox id (named by its
 * id: a sandbox made by a create). */
static int set_freezer(const char *base, const char *id, const char *state) {
        char path[1400];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s/freezer.state", base, id);
        f = fopen(path, "w");
        if (!f)
                return -1;
        fputs(state, f);
        return fclose(f) == 0 ? 0 : -1;
}

/* While the replaced sandbox is still ending (its processes frozen, as a snapshot that
 * holds them frozen keeps them: v1's freezer lets no frozen task die), the sandbox is
 * listed once, as the restored one (READY), not also as a TERMINATING one. */
START_TEST(replaced_sandbox_not_listed) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_sandbox_list *l = NULL;
        struct sbx_list_opts lo;
        char *base, *a, *s, cg[1000];
        size_t n = 0, ready = 0;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        s = snap(c, a, "small");
        freezer_base(a, cg, sizeof(cg));
        ck_assert_int_eq(set_freezer(cg, a, "FROZEN"), 0);
        ck_assert_msg(sbx_restore(c, a, "small", NULL) == SBX_OK, "%s", sbx_error_message(c));
        memset(&lo, 0, sizeof(lo));
        lo.include_ended = 1;
        ck_assert_int_eq(sbx_list(c, &lo, &l), SBX_OK);
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->v[i]->id, a) == 0) {
                        n++;
                        ready += l->v[i]->state == SBX_STATE_READY;
                }
        sbx_sandbox_list_free(l);
        ck_assert_int_eq(set_freezer(cg, a, "THAWED"), 0);
        ck_assert_msg(n == 1 && ready == 1, "listed %zu times, %zu READY", n, ready);
        expect_out(c, a, NULL, "echo ok", "ok\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The daemon SIGKILLed while the sandbox a restore replaced is still ending, frozen (a
 * snapshot held it so): the next daemon adopts the restored sandbox and removes the
 * replaced one's group, its processes with it (thawed: v1's freezer lets no frozen task
 * die), and its directory. */
START_TEST(daemon_killed_while_replaced_one_frozen) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *s, cg[1000];
        int groups;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "small");
        expect_out(c, a, NULL, "echo now > /workspace/f && echo ok", "ok\n");
        freezer_base(a, cg, sizeof(cg));
        ck_assert_int_eq(set_freezer(cg, a, "FROZEN"), 0);
        ck_assert_msg(sbx_restore(c, a, "small", NULL) == SBX_OK, "%s", sbx_error_message(c));
        it_daemon_kill(&d);
        sbx_close(c);
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        groups = sandbox_groups(cg, 1);
        if (groups != 1) {
                /* What is left of it ends (SIGKILLed already), its groups go. */
                char cmd[2400];
                (void)set_freezer(cg, a, "THAWED");
                snprintf(cmd, sizeof(cmd),
                         "for i in $(seq 100); do rmdir /sys/fs/cgroup/*/%s/%s 2>/dev/null; "
                         "ls -d /sys/fs/cgroup/*/%s/%s >/dev/null 2>&1 || break; "
                         "sleep 0.05; done",
                         strrchr(cg, '/') + 1, a, strrchr(cg, '/') + 1, a);
                if (system(cmd) != 0)
                        fprintf(stderr, "cannot remove the groups of %s\n", a);
        }
        ck_assert_msg(groups == 1, "%d groups left", groups);
        ck_assert_int_eq(tilde_dirs_go(&d), 0);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Waits up to 10 s for sandbox id to be EXPIRED: 1 when it is. */
static int expires(sbx_client *c, const char *id) {
        for (int i = 0; i < 1000; i++) {
                struct sbx_sandbox *sb = NULL;
                int expired;
                ck_assert_int_eq(sbx_get(c, id, &sb), SBX_OK);
                expired = sb->state == SBX_STATE_EXPIRED;
                sbx_sandbox_free(sb);
                if (expired)
                        return 1;
                usleep(10000);
        }
        return 0;
}

/* The deadline reached while a restore builds (a workspace of 150 MiB to seed; shorter
 * deadlines until one is reached so): the restore says the sandbox ended, the sandbox is
 * EXPIRED, recorded so, with nothing left of either in the state directory or the
 * groups. A restore that won the race leaves a restored sandbox that expires at that
 * same deadline. */
START_TEST(deadline_while_restoring) {
        struct it_daemon d;
        const char *layout = make_image();
        struct racer r;
        pthread_t th;
        char *base, *a, sql[300], cg[1000];
        int ended = 0, n = 0;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = big_snapshot_sandbox(c, base);
        freezer_base(a, cg, sizeof(cg));
        for (uint64_t ms = 800; !ended && ms >= 25; ms /= 2, n++) {
                if (n > 0) {
                        free(a);
                        a = must_create(c, "big");
                }
                ck_assert_int_eq(sbx_set_timeout(c, a, ms, NULL), SBX_OK);
                r = (struct racer){.d = &d, .id = a, .image = "big"};
                ck_assert_int_eq(pthread_create(&th, NULL, restore_thread, &r), 0);
                pthread_join(th, NULL);
                ck_assert_msg(r.rc == SBX_OK || r.rc == SBX_SANDBOX_ENDED, "%s: %s",
                              sbx_code_name(r.rc), r.msg);
                ended = r.rc == SBX_SANDBOX_ENDED;
                ck_assert_msg(expires(c, a), "%s did not expire (restore: %s)", a,
                              sbx_code_name(r.rc));
                snprintf(sql, sizeof(sql), "SELECT count(*) FROM sandboxes WHERE state = 'expired'");
                ck_assert_int_eq(it_db_int(&d, sql), n + 1);
                ck_assert_int_eq(tilde_dirs_go(&d), 0);
                ck_assert_int_eq(sandbox_groups(cg, 0), 0);
        }
        ck_assert_msg(ended, "no restore was under way at the deadline");

        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Every block of ids for image sandboxes taken (SBX_IMAGE_BLOCKS sandboxes): a restore
 * cannot have one for its new sandbox and is RESOURCE_EXHAUSTED, the sandbox as it was
 * (its files, its commands, nothing left in the state directory); once a block is
 * free it restores. */
START_TEST(no_block_of_ids_left) {
        static const char *const many[] = {"--warm", "0", "--spares", "0", "--max-sandboxes",
                                           "200", "--max-sandboxes-per-uid", "200", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *s, *ids[SBX_IMAGE_BLOCKS];
        enum sbx_code rc;
        unsigned i;
        sbx_client *c;

        it_daemon_start(&d, many);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "blocks");
        expect_out(c, a, NULL, "echo now > /workspace/f && echo ok", "ok\n");
        for (i = 0; i < SBX_IMAGE_BLOCKS - 1; i++)
                ids[i] = must_create(c, base);
        rc = sbx_restore(c, a, "blocks", NULL);
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED && strstr(sbx_error_message(c), "as it was"),
                      "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "now\n");
        ck_assert_int_eq(tilde_dirs(&d), 0);
        ck_assert_int_eq(sbx_terminate(c, ids[0], NULL), SBX_OK);
        for (i = 0; i < 600 && (rc = sbx_restore(c, a, "blocks", NULL)) ==
                                       SBX_RESOURCE_EXHAUSTED; i++)
                usleep(50000);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");

        for (i = 0; i < SBX_IMAGE_BLOCKS - 1; i++) {
                if (i > 0)
                        ck_assert_int_eq(sbx_terminate(c, ids[i], NULL), SBX_OK);
                free(ids[i]);
        }
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The warning of sb about its ptys ("" when none: it has all of them). */
static const char *pty_warning(const struct sbx_sandbox *sb) {
        for (size_t i = 0; i < sb->warnings.n; i++)
                if (strstr(sb->warnings.v[i], "ptys"))
                        return sb->warnings.v[i];
        return "";
}

/* An owner whose pty budget holds one sandbox's ptys (--max-ptys-per-uid 16): the
 * restored sandbox has the ptys the one it replaced had, not none (its new sandbox is
 * set up while the replaced one still holds them), restored again, and after a
 * restart (adopted, and restored then). */
START_TEST(restored_sandbox_keeps_its_ptys) {
        static const char *const ptys[] = {"--warm", "0", "--spares", "0", "--keep-sandboxes",
                                           "--max-ptys-per-uid", "16", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_sandbox *sb = NULL;
        char *base, *a, *s, *b;
        sbx_client *c;

        it_daemon_start(&d, ptys);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        ck_assert_int_eq(sbx_get(c, a, &sb), SBX_OK);
        ck_assert_str_eq(pty_warning(sb), "");
        sbx_sandbox_free(sb);
        s = snap(c, a, "ptys");
        for (int i = 0; i < 2; i++) {
                ck_assert_msg(sbx_restore(c, a, "ptys", &sb) == SBX_OK, "%s",
                              sbx_error_message(c));
                ck_assert_msg(!pty_warning(sb)[0], "restored: %s", pty_warning(sb));
                sbx_sandbox_free(sb);
                ck_assert_int_eq(tilde_dirs_go(&d), 0);
        }
        /* The budget is the restored one's: a second sandbox has none. */
        b = must_create(c, base);
        ck_assert_int_eq(sbx_get(c, b, &sb), SBX_OK);
        ck_assert_msg(strstr(pty_warning(sb), "has no ptys"), "%s", pty_warning(sb));
        sbx_sandbox_free(sb);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, ptys);
        c = it_connect(&d);
        ck_assert_int_eq(sbx_get(c, a, &sb), SBX_OK);
        ck_assert_msg(!pty_warning(sb)[0], "adopted: %s", pty_warning(sb));
        sbx_sandbox_free(sb);
        ck_assert_msg(sbx_restore(c, a, "ptys", &sb) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_msg(!pty_warning(sb)[0], "adopted, restored: %s", pty_warning(sb));
        sbx_sandbox_free(sb);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(b);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* How many entries STATE/sub holds (-1: none there). */
static int entries_in(const struct it_daemon *d, const char *sub) {
        char path[900];

        snprintf(path, sizeof(path), "%s/%s", d->state, sub);
        return img_entries(path);
}

/* A sandbox with a disk limit (a filesystem image of its own) and keep_workspace: the
 * restored one has the snapshot's files on an image of its own, the replaced one's
 * image goes; across a restart it is adopted with them; its terminate keeps the
 * restored workspace, as keep_workspace says, and only that. */
START_TEST(disk_limit_and_keep_workspace) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        char *base, *a, *s, path[900];
        int n = 0;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        sbx_create_opts_init(&o);
        o.image = base;
        o.keep_workspace = 1;
        o.policy.limits.disk_bytes = 64u << 20;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        a = strdup(sb->id);
        sbx_sandbox_free(sb);
        expect_out(c, a, NULL, "echo old > /workspace/w && echo ok", "ok\n");
        s = snap(c, a, "disked");
        expect_out(c, a, NULL, "echo new > /workspace/w && echo ok", "ok\n");
        ck_assert_int_eq(entries_in(&d, "disks"), 1);
        ck_assert_msg(sbx_restore(c, a, "disked", NULL) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/w && busybox df -m /workspace | busybox tail -1 | busybox awk '{print ($2 < 100)}'",
                   "old\n1\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        for (int i = 0; i < 1000 && (n = entries_in(&d, "disks")) != 1; i++)
                usleep(10000);
        ck_assert_int_eq(n, 1);

        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, keep);
        c = it_connect(&d);
        expect_out(c, a, NULL, "busybox cat /workspace/w", "old\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        snprintf(path, sizeof(path), "%s/sandboxes/%s/workspace.img", d.state, a);
        ck_assert_msg(access(path, F_OK) == 0, "%s: %s", path, strerror(errno));
        ck_assert_int_eq(tilde_dirs_go(&d), 0);

        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless sbxd (nobody's, --keep-sandboxes) SIGKILLed while a restore builds: the
 * next one adopts the sandbox as it was and removes the restore's directory (files of
 * its subordinate ids); a restore then works. */
START_TEST(rootless_killed_mid_restore) {
        static const char *const rl[] = {"--warm", "0", "--spares", "0", "--keep-sandboxes",
                                         NULL};
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a;
        sbx_client *c;

        it_daemon_start_as(&d, 65534, 65534, rl);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = big_snapshot_sandbox(c, base);
        c = restart_mid_restore(&d, c, a, 1, rl);
        expect_out(c, a, NULL, "busybox cat /workspace/f", "now\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        ck_assert_msg(sbx_restore(c, a, "big", NULL) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        ck_assert_int_eq(tilde_dirs_go(&d), 0);

        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox with an idle limit shorter than its restore takes (a workspace of 1,000
 * files to seed, file by file): a restore under way is a use of it, as a running command is, so it does
 * not end idle meanwhile; the restored one has the same limit and idles out after. */
START_TEST(idle_limit_while_restoring) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        char *base, *a;
        enum sbx_code rc;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL,
                   "cd /workspace && busybox seq -w 1 1000 | busybox xargs busybox touch && "
                   "echo ok",
                   "ok\n");
        free(snap(c, a, "many"));
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        sbx_create_opts_init(&o);
        o.image = "many";
        o.idle_timeout_ms = 150;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        a = strdup(sb->id);
        sbx_sandbox_free(sb);
        rc = sbx_restore(c, a, "many", NULL);
        ck_assert_msg(rc == SBX_OK, "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_msg(expires(c, a), "the restored sandbox did not idle out");

        free(a);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox whose root is a host directory (image "dir:PATH", read-only) is restored
 * as one of the host's root is: its root becomes the snapshot's, not refused as a
 * create naming both an image and a root_dir would be. */
START_TEST(host_directory_root_restored) {
        struct it_daemon d;
        const char *layout = make_image();
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL, *after = NULL;
        char *base, *a, *s, dir[900];
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "ofdir");
        sbx_create_opts_init(&o);
        snprintf(dir, sizeof(dir), "dir:%s/img", it_base_dir());
        o.image = dir;
        ck_assert_msg(sbx_create(c, &o, &sb) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_msg(sbx_restore(c, sb->id, "ofdir", &after) == SBX_OK, "%s",
                      sbx_error_message(c));
        ck_assert_str_eq(after->image, "ofdir");
        ck_assert_msg(!after->policy.root_dir || strcmp(after->policy.root_dir, "/") == 0, "%s", after->policy.root_dir);
        expect_out(c, sb->id, NULL, "busybox cat /workspace/f /etc/greeting", "snap\nsecond\n");

        sbx_sandbox_free(sb);
        sbx_sandbox_free(after);
        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

#define NO_DIGEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* msg with every digest in it written as NO_DIGEST, into buf. */
static void as_missing(const char *msg, const char *digest, char *buf, size_t len) {
        size_t n = strlen(digest), at = 0;

        for (const char *p = msg; *p && at + 1 < len;) {
                if (strncmp(p, digest, n) == 0) {
                        at += (size_t)snprintf(buf + at, len - at, "%s", NO_DIGEST);
                        p += n;
                } else {
                        buf[at++] = *p++;
                }
        }
        buf[at < len ? at : len - 1] = '\0';
}

/* BOB, given "LAYOUT|ROOTS" (root's snapshot's digest): pulls the image, makes a sandbox
 * of his own and restores it from root's snapshot's digest and from a digest nobody
 * has; reports both answers and his own snapshot's digest. */
static void bob_restores_own(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        const char *bar = strchr(arg, '|');
        char layout[700], *base, *id, said[600];
        struct sbx_image *img = NULL;
        enum sbx_code rc;

        snprintf(layout, sizeof(layout), "%.*s", (int)(bar - arg), arg);
        base = img_pull(c, layout, "img");
        id = must_create(c, base);
        rc = sbx_restore(c, id, bar + 1, NULL);
        as_missing(sbx_error_message(c), bar + 1, said, sizeof(said));
        say(r, "roots|%s|%s\n", sbx_code_name(rc), said);
        rc = sbx_restore(c, id, NO_DIGEST, NULL);
        say(r, "none|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_int_eq(sbx_snapshot(c, id, "bobs", &img), SBX_OK);
        say(r, "bobs|%s\n", img->digest);
        sbx_image_free(img);
        free(id);
        free(base);
        sbx_close(c);
}

/* Another user's image is NOT_FOUND in a restore in the words of one that nobody has:
 * BOB's own sandbox from root's snapshot's digest, root's from BOB's. */
START_TEST(others_image_not_found) {
        struct it_daemon d;
        const char *layout = make_image();
        char arg[1000], *base, *a, *s, *said, *p, bobs[100], mine[600], want[600];
        enum sbx_code rc;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo roots > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "rootsnap");
        snprintf(arg, sizeof(arg), "%s|%s", layout, s);
        said = as_bob(bob_restores_own, &d, arg);
        p = strstr(said, "none|");
        ck_assert_msg(p && strstr(said, "roots|"), "BOB got: %s", said);
        snprintf(want, sizeof(want), "roots|%.*s", (int)strcspn(p + 5, "\n"), p + 5);
        ck_assert_msg(strstr(said, want) && strstr(want, "NOT_FOUND"), "BOB got: %s", said);
        p = strstr(said, "bobs|");
        ck_assert_ptr_nonnull(p);
        snprintf(bobs, sizeof(bobs), "%.*s", (int)strcspn(p + 5, "\n"), p + 5);
        free(said);

        rc = sbx_restore(c, a, bobs, NULL);
        as_missing(sbx_error_message(c), bobs, mine, sizeof(mine));
        ck_assert_int_eq(rc, SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_restore(c, a, NO_DIGEST, NULL), SBX_NOT_FOUND);
        ck_assert_str_eq(mine, sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "roots\n");

        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* An owner at --max-sandboxes-per-uid (3) restores all three of its sandboxes at once:
 * each restores (the new ones count against no bound while they are set up), and after
 * them the owner's count is three again: a fourth create is refused naming the bound, one
 * more fits once one is terminated. */
START_TEST(all_restored_at_the_owner_bound) {
        static const char *const three[] = {"--warm", "0", "--spares", "0",
                                            "--max-sandboxes-per-uid", "3", NULL};
        struct it_daemon d;
        const char *layout = make_image();
        struct racer r[3];
        pthread_t th[3];
        char *base, *ids[3], *s, *x = NULL;
        enum sbx_code rc;
        sbx_client *c;

        it_daemon_start(&d, three);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        for (int i = 0; i < 3; i++)
                ids[i] = must_create(c, base);
        expect_out(c, ids[0], NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, ids[0], "three");
        for (int i = 0; i < 3; i++) {
                r[i] = (struct racer){.d = &d, .id = ids[i], .image = "three"};
                ck_assert_int_eq(pthread_create(&th[i], NULL, restore_thread, &r[i]), 0);
        }
        for (int i = 0; i < 3; i++) {
                pthread_join(th[i], NULL);
                ck_assert_msg(r[i].rc == SBX_OK, "%s: %s", sbx_code_name(r[i].rc), r[i].msg);
                expect_out(c, ids[i], NULL, "busybox cat /workspace/f", "snap\n");
        }
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        /* The replaced ones' counts come back as they end (a moment after the answers). */
        for (int i = 0; i < 300 && (rc = img_create(c, base, NULL, &x)) == SBX_OK; i++) {
                ck_assert_int_eq(sbx_terminate(c, x, NULL), SBX_OK);
                free(x);
                x = NULL;
                usleep(10000);
        }
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED &&
                              strstr(sbx_error_message(c), "--max-sandboxes-per-uid 3"),
                      "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        ck_assert_int_eq(sbx_terminate(c, ids[2], NULL), SBX_OK);
        ck_assert_msg(img_create(c, base, NULL, &x) == SBX_OK, "%s", sbx_error_message(c));

        for (int i = 0; i < 3; i++)
                free(ids[i]);
        free(x);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Holds the write lock of d's records (another process's BEGIN EXCLUSIVE) until a line
 * is written to *ret_fd: the pid of that process. */
static pid_t lock_records(const struct it_daemon *d, int *ret_fd) {
        char db[700], ready[8];
        int in[2], out[2];
        size_t got = 0;
        pid_t pid;

        snprintf(db, sizeof(db), "%s/sbxd.db", d->state);
        ck_assert_int_eq(pipe(in), 0);
        ck_assert_int_eq(pipe(out), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                execlp("python3", "python3", "-c",
                       "import sqlite3, sys\n"
                       "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n"
                       "c.execute('BEGIN EXCLUSIVE')\n"
                       "print('ok', flush=True)\n"
                       "sys.stdin.readline()\n"
                       "c.execute('ROLLBACK')\n",
                       db, (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        /* "ok\n", which a pipe may hand over in pieces. */
        while (got < 3) {
                ssize_t n = read(out[0], ready + got, 3 - got);
                ck_assert_msg(n > 0, "the locking process ended before it held the lock");
                got += (size_t)n;
        }
        ck_assert(memcmp(ready, "ok\n", 3) == 0);
        close(out[0]);
        *ret_fd = in[1];
        return pid;
}

/* The record cannot be written when the restored sandbox would take the place (the
 * records locked by another process past the store's busy timeout): the restore fails
 * saying so, the sandbox as it was (its files, its directory, its record), nothing of
 * the new one left; once the records are free a restore works. */
START_TEST(record_not_written_leaves_it) {
        struct it_daemon d;
        const char *layout = make_image();
        char *base, *a, *s, sql[300];
        enum sbx_code rc;
        pid_t locker;
        int fd, st;
        sbx_client *c;

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        base = img_pull(c, layout, "img");
        a = must_create(c, base);
        expect_out(c, a, NULL, "echo snap > /workspace/f && echo ok", "ok\n");
        s = snap(c, a, "locked");
        expect_out(c, a, NULL, "echo now > /workspace/f && echo ok", "ok\n");
        snprintf(sql, sizeof(sql), "SELECT init_pid FROM sandboxes WHERE id = '%s'", a);
        st = it_db_int(&d, sql);

        locker = lock_records(&d, &fd);
        rc = sbx_restore(c, a, "locked", NULL);
        ck_assert_int_eq(write(fd, "\n", 1), 1);
        close(fd);
        ck_assert_int_eq(waitpid(locker, NULL, 0), locker);
        ck_assert_msg(rc != SBX_OK && strstr(sbx_error_message(c), "as it was"), "%s: %s",
                      sbx_code_name(rc), sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "now\n");
        ck_assert_int_eq(it_db_int(&d, sql), st);
        ck_assert_int_eq(tilde_dirs_go(&d), 0);
        ck_assert_msg(sbx_restore(c, a, "locked", NULL) == SBX_OK, "%s", sbx_error_message(c));
        expect_out(c, a, NULL, "busybox cat /workspace/f", "snap\n");
        ck_assert_int_ne(it_db_int(&d, sql), st);

        free(a);
        free(s);
        free(base);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB, given "LAYOUT|W|SHARE": pulls the image and makes a sandbox with W writable,
 * shared with uid SHARE; reports its id. Given "swap|W|TARGET": W (his) becomes a
 * symlink to TARGET. Given "restore|ID|IMAGE": restores ID from IMAGE. */
static void bob_writable_sandbox(struct it_daemon *d, const char *arg, struct report *r) {
        char parts[3][700], old[760];
        const char *p = arg;

        for (int i = 0; i < 3; i++) {
                snprintf(parts[i], sizeof(parts[i]), "%.*s", (int)strcspn(p, "|"), p);
                p += strcspn(p, "|") + (p[strcspn(p, "|")] ? 1 : 0);
        }
        if (strcmp(parts[0], "restore") == 0) {
                sbx_client *c = it_connect(d);
                enum sbx_code rc = sbx_restore(c, parts[1], parts[2], NULL);
                say(r, "restore|%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
                sbx_close(c);
                return;
        }
        if (strcmp(parts[0], "swap") == 0) {
                snprintf(old, sizeof(old), "%s.old", parts[1]);
                int moved = rename(parts[1], old), linked = symlink(parts[2], parts[1]);
                say(r, "swap|%d|%d|%s\n", moved, linked, strerror(errno));
                return;
        }
        {
                sbx_client *c = it_connect(d);
                const char *paths[1] = {parts[1]};
                uint32_t share = (uint32_t)atoi(parts[2]);
                struct sbx_create_opts o;
                struct sbx_sandbox *sb = NULL;
                char *base = img_pull(c, parts[0], "img");
                enum sbx_code rc;

                sbx_create_opts_init(&o);
                o.image = base;
                o.share_uids = &share;
                o.n_share_uids = 1;
                sbx_policy_workspace_write(&o.policy, paths, 1, SBX_NETWORK_NONE);
                rc = sbx_create(c, &o, &sb);
                say(r, "id|%s|%s\n", rc == SBX_OK ? sb->id : sbx_code_name(rc),
                    sbx_error_message(c));
                sbx_sandbox_free(sb);
                free(base);
                sbx_close(c);
        }
}

/* BOB's sandbox has a writable directory of his, and is shared with root, who restores
 * it. BOB then makes that name a symlink to a directory only root may reach: root's next
 * restore must not open it with root's rights for BOB's sandbox (judged for its owner
 * too): refused, as BOB's own is, and nothing of the sandbox's reaches that directory. */
START_TEST(owners_path_not_judged_with_share_users_rights) {
        struct it_daemon d;
        const char *layout = make_image();
        char home[700], w[760], rootonly[700], arg[2400], id[128], pwn[800], *said, *p, *s;
        char cmd[1800];
        enum sbx_code rc;
        sbx_client *c;

        snprintf(home, sizeof(home), "%s/bobhome", it_base_dir());
        ck_assert_int_eq(mkdir(home, 0755), 0);
        ck_assert_int_eq(chown(home, BOB, BOB), 0);
        snprintf(w, sizeof(w), "%s/w", home);
        ck_assert_int_eq(mkdir(w, 0777), 0);
        ck_assert_int_eq(chmod(w, 0777), 0);
        ck_assert_int_eq(chown(w, BOB, BOB), 0);
        /* Open to anyone, inside a directory only root may enter. */
        snprintf(rootonly, sizeof(rootonly), "%s/rootonly", it_base_dir());
        ck_assert_int_eq(mkdir(rootonly, 0700), 0);
        snprintf(rootonly, sizeof(rootonly), "%s/rootonly/open", it_base_dir());
        ck_assert_int_eq(mkdir(rootonly, 0777), 0);
        ck_assert_int_eq(chmod(rootonly, 0777), 0);

        it_daemon_start(&d, keep);
        c = it_connect(&d);
        snprintf(arg, sizeof(arg), "%s|%s|0", layout, w);
        said = as_bob(bob_writable_sandbox, &d, arg);
        p = strstr(said, "id|");
        ck_assert_msg(p && strncmp(p + 3, "sbx-", 4) == 0, "BOB got: %s", said);
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(p + 3, "|"), p + 3);
        free(said);
        s = snap(c, id, "of-bobs");
        /* As it is, root's restore of it works, the path BOB's. */
        ck_assert_msg(sbx_restore(c, id, "of-bobs", NULL) == SBX_OK, "%s", sbx_error_message(c));
        snprintf(cmd, sizeof(cmd), "echo mine > %s/mine && echo ok", w);
        expect_out(c, id, NULL, cmd, "ok\n");
        snprintf(arg, sizeof(arg), "swap|%s|%s", w, rootonly);
        said = as_bob(bob_writable_sandbox, &d, arg);
        ck_assert_msg(strstr(said, "swap|0|0|"), "BOB got: %s", said);
        free(said);

        /* BOB's own restore: judged with his rights, refused. */
        snprintf(arg, sizeof(arg), "restore|%s|of-bobs", id);
        said = as_bob(bob_writable_sandbox, &d, arg);
        ck_assert_msg(strstr(said, "restore|") && !strstr(said, "restore|OK|"), "BOB got: %s",
                      said);
        free(said);

        rc = sbx_restore(c, id, "of-bobs", NULL);
        if (rc == SBX_OK) {
                snprintf(cmd, sizeof(cmd), "echo pwn > %s/pwn; echo pwn > %s/pwn; echo done", w,
                         rootonly);
                expect_out(c, id, NULL, cmd, "done\n");
        }
        snprintf(pwn, sizeof(pwn), "%s/pwn", rootonly);
        ck_assert_msg(access(pwn, F_OK) != 0, "BOB's sandbox wrote %s", pwn);
        ck_assert_msg(rc != SBX_OK, "root's restore of BOB's sandbox opened %s for it", w);

        free(s);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("restore_attacks");

        SBX_ADD_TEST_CASE(s, daemon_killed_mid_restore, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, share_user_restore_judged_with_his_rights, 240,
                          it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, restores_in_a_loop_leak_nothing, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, replaced_sandbox_not_listed, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, daemon_killed_while_replaced_one_frozen, 240,
                          it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, deadline_while_restoring, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, no_block_of_ids_left, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, restored_sandbox_keeps_its_ptys, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, disk_limit_and_keep_workspace, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_killed_mid_restore, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, idle_limit_while_restoring, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, host_directory_root_restored, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, others_image_not_found, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, all_restored_at_the_owner_bound, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, record_not_written_leaves_it, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, owners_path_not_judged_with_share_users_rights, 240,
                          it_fixture_setup_var, it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
