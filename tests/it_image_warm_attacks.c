/* it_image_warm_attacks.c: what was tried against sbxd --warm-image REF=N (warm.c; see
 * docs/images.md "Warm sandboxes" and "What was tried") with a real daemon, as root
 * (the daemon's own user, whose image REF is) and as BOB (tests/asbob.h), and rootless.
 *
 * The test image is tests/mkimage.sh's tag "img" (User 1000:1000, Env GREETING=hi,
 * WorkingDir /data), imported from an OCI layout as it_image_sandbox.c does. A claim is
 * told from a cold create by the daemon's log ("sbx=ID: claimed ~warm-"). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asbob.h"
#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"
#include "sbx_limits.h"
#include "testutil.h"

#define NOBODY 65534u

/* Waits (up to secs) until the log has want lines with needle; their count. */
static int wait_log_long(const struct it_daemon *d, const char *needle, int want, int secs) {
        double t0 = it_now_ms();

        while (it_log_count(d, needle) < want && it_now_ms() - t0 < secs * 1000.0)
                usleep(50000);
        return it_log_count(d, needle);
}

/* The lines of the daemon's log with needle, at most 3000 bytes (for a failure's
 * message; static). */
static const char *log_lines(const struct it_daemon *d, const char *needle) {
        static char out[3000];
        char line[1000];
        size_t len = 0;
        FILE *f = fopen(d->log, "re");

        out[0] = '\0';
        while (f && fgets(line, sizeof(line), f))
                if (strstr(line, needle) && len + strlen(line) < sizeof(out))
                        len += (size_t)sprintf(out + len, "%s", line);
        if (f)
                fclose(f);
        return out;
}

/* Whether the create of id claimed a warm sandbox (the daemon's log says so). */
static int claimed(const struct it_daemon *d, const char *id) {
        char needle[200];

        snprintf(needle, sizeof(needle), "sbx=%s: claimed ~warm-", id);
        return it_log_count(d, needle);
}

/* A sandbox of image with options o (image set here); the code, *ret_id on success. */
static enum sbx_code create_opts(sbx_client *c, struct sbx_create_opts *o, const char *image,
                                 char **ret_id) {
        struct sbx_sandbox *s = NULL;
        enum sbx_code rc;

        o->image = image;
        rc = sbx_create(c, o, &s);
        if (rc == SBX_OK) {
                *ret_id = strdup(s->id);
                sbx_sandbox_free(s);
        }
        return rc;
}

/* ---- the 63 blocks of ids ------------------------------------------------------------ */

/* A root sbxd has SBX_IMAGE_BLOCKS blocks of ids for image sandboxes, and a
 * --warm-image may ask for up to SBX_MAX_WARM_SANDBOXES (64) warm ones: the pool must
 * not take them all. It leaves one free for a client's create; a client's create that
 * finds none free while the pool holds some gives one up and says so (try again); the
 * pool does not take that one back. */
START_TEST(pool_leaves_blocks_to_clients) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *cold = NULL, *cold2 = NULL;
        const char *flags[] = {"--warm", "0", "--spares", "0", "--warm-image", ref, NULL};
        struct sbx_create_opts o;
        enum sbx_code rc;
        double t0;
        int tries = 0;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=%u", layout, SBX_IMAGE_BLOCKS);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        /* All the pool makes (one per block but the one it leaves). */
        ck_assert_int_ge(wait_log_long(&d, ": warm and ready", SBX_IMAGE_BLOCKS - 1, 120),
                         SBX_IMAGE_BLOCKS - 1);
        usleep(300000); /* a last one it would make comes in the same turn */

        /* Another policy: made cold, which needs a block of its own. */
        sbx_create_opts_init(&o);
        o.policy.network = SBX_NETWORK_FULL;
        rc = create_opts(c, &o, digest, &cold);
        ck_assert_msg(rc == SBX_OK, "cold create with the pool full: %s: %s", sbx_code_name(rc),
                      sbx_error_message(c));
        ck_assert_int_eq(claimed(&d, cold), 0);

        /* The next finds none free: the pool gives one up (said), and a retry gets it. */
        sbx_create_opts_init(&o);
        o.policy.network = SBX_NETWORK_FULL;
        rc = create_opts(c, &o, digest, &cold2);
        ck_assert_msg(rc == SBX_RESOURCE_EXHAUSTED, "second cold create: %s: %s",
                      sbx_code_name(rc), rc == SBX_OK ? "" : sbx_error_message(c));
        ck_assert_msg(strstr(sbx_error_message(c), "--warm-image") &&
                              strstr(sbx_error_message(c), "try again"),
                      "%s", sbx_error_message(c));
        t0 = it_now_ms();
        do {
                usleep(100000);
                sbx_create_opts_init(&o);
                o.policy.network = SBX_NETWORK_FULL;
                rc = create_opts(c, &o, digest, &cold2);
                tries++;
        } while (rc == SBX_RESOURCE_EXHAUSTED && it_now_ms() - t0 < 30000);
        ck_assert_msg(rc == SBX_OK, "after %d tries: %s: %s", tries, sbx_code_name(rc),
                      sbx_error_message(c));
        expect_out(c, cold2, "root", "echo x > /etc/x && busybox cat /etc/x", "x\n");
        /* A default create still claims one of those left. */
        {
                char *w = NULL;
                ck_assert_int_eq(img_create(c, digest, NULL, &w), SBX_OK);
                ck_assert_int_eq(claimed(&d, w), 1);
                ck_assert_int_eq(sbx_terminate(c, w, NULL), SBX_OK);
                free(w);
        }
        ck_assert_int_eq(sbx_terminate(c, cold, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, cold2, NULL), SBX_OK);
        free(cold);
        free(cold2);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        {
                char dir[700];
                snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
                ck_assert_int_eq(img_entries(dir), 0);
        }
}
END_TEST

/* ---- BOB without the image ---------------------------------------------------------- */

/* BOB tries root's image (arg: "DIGEST|ROOTNAME|NOSUCHDIGEST") by its digest, by root's
 * name, and by a digest nobody has: "CODE|message" for each, then his images' count. */
static void bob_tries(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_image_list *l = NULL;
        char buf[2000], *names[3], *save = NULL;
        size_t n = 0, i;

        snprintf(buf, sizeof(buf), "%s", arg);
        for (char *t = strtok_r(buf, "|", &save); t && n < 3; t = strtok_r(NULL, "|", &save))
                names[n++] = t;
        for (i = 0; i < n; i++) {
                char *id = NULL;
                enum sbx_code rc = img_create(c, names[i], NULL, &id);
                say(r, "%s|%s\n", sbx_code_name(rc), rc == SBX_OK ? id : sbx_error_message(c));
                if (rc == SBX_OK)
                        (void)sbx_terminate(c, id, NULL);
                free(id);
        }
        if (sbx_image_list(c, &l) == SBX_OK)
                say(r, "images %zu\n", l->n);
        sbx_image_list_free(l);
        sbx_close(c);
}

/* BOB has no name for the content root keeps warm: by its digest, by root's name for it
 * (the same string resolves among BOB's names, where it is none), he gets what he gets
 * for a digest nobody has (NOT_FOUND, the same words), claims nothing, and sees no image;
 * the pool keeps its sandboxes. */
START_TEST(bob_cannot_claim_without_the_image) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], arg[2000], nosuch[100], *digest, *said, want[1200];
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                               "--warm-image", ref, NULL};
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);
        snprintf(nosuch, sizeof(nosuch), "sha256:%064d", 7);
        snprintf(arg, sizeof(arg), "%s|oci:%s:img|%s", digest, layout, nosuch);
        said = as_bob(bob_tries, &d, arg);
        snprintf(want, sizeof(want),
                 "NOT_FOUND|no image %s: pull it first (sbx image pull %s)\n"
                 "NOT_FOUND|no image oci:%s:img: pull it first (sbx image pull oci:%s:img)\n"
                 "NOT_FOUND|no image %s: pull it first (sbx image pull %s)\n"
                 "images 0\n",
                 digest, digest, layout, layout, nosuch, nosuch);
        ck_assert_msg(strcmp(said, want) == 0, "BOB got:\n%s\nnot:\n%s", said, want);
        free(said);
        ck_assert_int_eq(it_log_count(&d, ": claimed ~warm-"), 0);
        ck_assert_int_eq(it_log_count(&d, "its image's name names"), 0);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- policies: claimed only when equal, limits the request's ----------------------- */

/* A request whose policy changes what init builds is made cold, never claimed: a
 * writable path, keep_workspace (the setid modes: docs/security.md), a disk limit, a
 * /tmp size, full network. Limits the cgroup enforces (memory, processes, cpu) do not
 * change the setup: such a request claims one, and its own limits hold there, not the
 * pool's defaults (read in the sandbox's cgroup, and GetSandbox says the same). */
START_TEST(policies_that_differ_are_cold_limits_hold) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], wdir[700], *digest, *id;
        const char *flags[] = {"--warm", "0", "--spares", "0", "--warm-image", ref, NULL};
        const char *paths[1] = {wdir};
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        sbx_client *c;
        int i;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        snprintf(wdir, sizeof(wdir), "%s/w", it_base_dir());
        ck_assert_int_eq(mkdir(wdir, 0755), 0);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);

        for (i = 0; i < 5; i++) {
                enum sbx_code rc;
                sbx_create_opts_init(&o);
                switch (i) {
                case 0: sbx_policy_workspace_write(&o.policy, paths, 1, SBX_NETWORK_NONE); break;
                case 1: o.keep_workspace = 1; break;
                case 2:
                        o.policy.limits.set = SBX_LIMIT_DISK;
                        o.policy.limits.disk_bytes = 64u << 20;
                        break;
                case 3:
                        o.policy.limits.set = SBX_LIMIT_TMP;
                        o.policy.limits.tmp_bytes = 16u << 20;
                        break;
                default: o.policy.network = SBX_NETWORK_FULL; break;
                }
                id = NULL;
                rc = create_opts(c, &o, digest, &id);
                ck_assert_msg(rc == SBX_OK, "policy %d: %s", i, sbx_error_message(c));
                ck_assert_msg(claimed(&d, id) == 0, "policy %d claimed a warm sandbox", i);
                expect_out(c, id, NULL, "busybox id -u", "1000\n");
                ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
                free(id);
        }
        ck_assert_int_eq(it_log_count(&d, ": claimed ~warm-"), 0);

        /* Memory, processes, cpu: claimed, with the request's limits. */
        sbx_create_opts_init(&o);
        o.policy.limits.set = SBX_LIMIT_MEMORY | SBX_LIMIT_PROCESSES | SBX_LIMIT_CPU_PERCENT;
        o.policy.limits.memory_bytes = 48u << 20;
        o.policy.limits.processes = 37;
        o.policy.limits.cpu_percent = 30;
        id = NULL;
        ck_assert_msg(create_opts(c, &o, digest, &id) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_int_eq(claimed(&d, id), 1);
        expect_out(c, id, NULL,
                   "busybox cat /sys/fs/cgroup/memory/memory.limit_in_bytes "
                   "/sys/fs/cgroup/pids/pids.max; q=$(busybox cat "
                   "/sys/fs/cgroup/cpu/cpu.cfs_quota_us); p=$(busybox cat "
                   "/sys/fs/cgroup/cpu/cpu.cfs_period_us); echo $((q * 100 / p))",
                   "50331648\n37\n30\n");
        /* The limit holds: 40 more processes cannot all start. */
        {
                struct sbx_result *r = it_sh(c, id, 60000,
                                             "for i in $(busybox seq 40); do busybox sleep 3 & "
                                             "done; echo all started");
                ck_assert_msg(!strstr((char *)r->stdout_data, "all started") &&
                                      strstr((char *)r->stderr_data, "can't fork"),
                              "%s%s", (char *)r->stdout_data, (char *)r->stderr_data);
                sbx_result_free(r);
        }
        ck_assert_int_eq(sbx_get(c, id, &s), SBX_OK);
        ck_assert_uint_eq(s->policy.limits.memory_bytes, 48u << 20);
        ck_assert_uint_eq(s->policy.limits.processes, 37);
        sbx_sandbox_free(s);
        ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
        free(id);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* BOB's own name for root's content: he pulls, then creates with the default policy
 * (claimed) and with full network (cold), and reports of each: its owner, warnings,
 * what a command sees (ids, environment but the host name, /workspace, /tmp, owners
 * and modes): "ID|OWNER|NWARN|DIGEST|OUTPUT@@\n" each. */
static void bob_claims_and_colds(struct it_daemon *d, const char *layout, struct report *r) {
        sbx_client *c = it_connect(d);
        char *digest = img_pull(c, layout, "img"), source[800];
        const char *argv[] = {
                "/bin/sh", "-c",
                "busybox id; busybox env | busybox grep -v '^HOSTNAME=' | busybox sort; "
                "busybox ls -la /workspace /tmp | busybox grep -v ' \\.\\.$'; "
                "busybox stat -c '%n %u:%g %a' / /workspace /tmp /data /etc; "
                "busybox find /workspace /tmp /root -xdev -newer /proc/1 2>/dev/null | busybox grep -v "
                "'^/proc\\|^/sys\\|^/dev' | busybox sort",
                NULL};
        int i;

        snprintf(source, sizeof(source), "oci:%s:img", layout);
        for (i = 0; i < 2; i++) {
                struct sbx_create_opts o;
                struct sbx_sandbox *s = NULL;
                struct sbx_result *res = NULL;
                struct sbx_exec_opts e;
                enum sbx_code rc;

                sbx_create_opts_init(&o);
                o.image = source;
                if (i == 1)
                        o.policy.network = SBX_NETWORK_FULL;
                rc = sbx_create(c, &o, &s);
                if (rc != SBX_OK) {
                        say(r, "%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
                        continue;
                }
                sbx_exec_opts_init(&e);
                e.argv = argv;
                e.argc = 3;
                e.timeout_ms = 60000;
                rc = sbx_exec(c, s->id, &e, &res);
                say(r, "%s|%u|%zu|%s|", s->id, s->owner_uid, s->warnings.n, s->image_digest);
                for (size_t w = 0; w < s->warnings.n; w++)
                        say(r, "warning: %s\n", s->warnings.v[w]);
                say(r, "%s@@\n", rc == SBX_OK ? (char *)res->stdout_data : sbx_code_name(rc));
                sbx_result_free(res);
                (void)sbx_terminate(c, s->id, NULL);
                sbx_sandbox_free(s);
        }
        free(digest);
        sbx_close(c);
}

/* Nothing of root's (the pool's creator) shows in the sandbox BOB claims: it is his
 * (owner, record), and what runs in it sees what it sees in BOB's cold sandbox of the
 * same image (ids, environment, /workspace, /tmp, owners, no file in /workspace, /tmp
 * or /root newer than its init); the record says BOB; the host's upper directory is as
 * empty as a cold one's. (The image's own files are left out of that comparison: twice,
 * under a heavy load, three of them showed as newer than a claimed sandbox's /proc/1,
 * which is not explained yet: its init starts after the image is made.) */
/* Compares the two sandboxes bob_claims_and_colds reported in said (freed here): the
 * first claimed, the second not, both owned by owner, the same after their ids. Returns
 * the claimed one's id (freed by the caller). */
static char *same_but_claimed(const struct it_daemon *d, char *said, unsigned owner) {
        char *sep = strstr(said, "@@\n"), ida[128], idb[128], own[32];
        const char *a, *b;

        ck_assert_msg(sep && strstr(sep + 3, "@@\n"), "got: %s", said);
        *sep = '\0';
        a = said;
        b = sep + 3;
        *strstr(sep + 3, "@@\n") = '\0';
        snprintf(ida, sizeof(ida), "%.*s", (int)strcspn(a, "|"), a);
        snprintf(idb, sizeof(idb), "%.*s", (int)strcspn(b, "|"), b);
        ck_assert_int_eq(claimed(d, ida), 1);
        ck_assert_int_eq(claimed(d, idb), 0);
        snprintf(own, sizeof(own), "|%u|", owner);
        ck_assert_msg(strncmp(a + strlen(ida), own, strlen(own)) == 0, "got: %s", a);
        ck_assert_msg(strcmp(a + strlen(ida), b + strlen(idb)) == 0, "claimed:\n%s\ncold:\n%s",
                      a + strlen(ida), b + strlen(idb));
        free(said);
        return strdup(ida);
}

START_TEST(bob_claim_is_as_his_cold_one) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *ida, sql[300];
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                               "--warm-image", ref, NULL};
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        ida = same_but_claimed(&d, as_bob(bob_claims_and_colds, &d, layout), BOB);
        snprintf(sql, sizeof(sql), "SELECT owner_uid FROM sandboxes WHERE id = '%s'", ida);
        ck_assert_int_eq(it_db_int(&d, sql), BOB);
        free(ida);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A rootless daemon (nobody's) with --warm-image: its user's create claims one, which is
 * as its cold one (the image's user dropped to root with the same warning, /workspace
 * everyone's as in a cold one); the end leaves nothing. */
START_TEST(rootless_claim_is_as_a_cold_one) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], dir[700], *said, *id;
        const char *flags[] = {"--warm", "0", "--warm-image", ref, NULL};

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        it_private_mounts();
        it_daemon_start_as(&d, NOBODY, NOBODY, flags);
        said = as_user(NOBODY, bob_claims_and_colds, &d, layout); /* pulls first: no claim */
        ck_assert_msg(it_wait_log(&d, ": warm and ready", 1) == 1, "%s", log_lines(&d, "warm"));
        free(said);
        said = as_user(NOBODY, bob_claims_and_colds, &d, layout);
        ck_assert_msg(strstr(said, "warning: the image's user '1000:1000' cannot exist"), "%s",
                      said);
        id = same_but_claimed(&d, said, NOBODY);
        free(id);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
        ck_assert_int_eq(img_entries(dir), 0);
}
END_TEST

/* ---- a daemon killed with warm image sandboxes --------------------------------------- */

/* The names of the entries of dir starting with prefix, joined by '\n' (freed by the
 * caller). */
static char *entries_with(const char *dir, const char *prefix) {
        char *out = calloc(1, 1);
        size_t len = 0;
        struct dirent *e;
        DIR *dd = opendir(dir);

        ck_assert_ptr_nonnull(dd);
        while ((e = readdir(dd))) {
                if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0)
                        continue;
                out = realloc(out, len + strlen(e->d_name) + 2);
                len += (size_t)sprintf(out + len, "%s\n", e->d_name);
        }
        closedir(dd);
        return out;
}

/* How many of names ('\n'-separated) are still under dir or under any directory the
 * daemon's log says it makes cgroups under. */
static int left_of(const struct it_daemon *d, const char *dir, const char *names) {
        char line[1200], path[2400];
        const char *n;
        int left = 0;
        FILE *f;

        for (n = names; *n; n += strcspn(n, "\n") + 1) {
                int len = (int)strcspn(n, "\n");
                snprintf(path, sizeof(path), "%s/%.*s", dir, len, n);
                left += access(path, F_OK) == 0;
                f = fopen(d->log, "re");
                ck_assert_ptr_nonnull(f);
                while (fgets(line, sizeof(line), f)) {
                        char *u = strstr(line, "sbxd: cgroups under ");
                        if (!u)
                                continue;
                        u += strlen("sbxd: cgroups under ");
                        u[strcspn(u, "\n")] = '\0';
                        snprintf(path, sizeof(path), "%s/%.*s", u, len, n);
                        left += access(path, F_OK) == 0;
                }
                fclose(f);
        }
        return left;
}

/* SIGKILL with a claimed warm image sandbox and unclaimed ones: the restarted daemon
 * adopts the claimed one with its block of ids (what root wrote in it is there, the
 * same uid_map), and of the unclaimed ones nothing is left (state directories,
 * cgroups); the new pool's sandboxes take other blocks than the adopted one's. */
START_TEST(sigkill_adopts_claimed_leaves_no_warm) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], dir[700], *digest, *a, *b, *old_warm;
        const char *flags[] = {"--warm", "0", "--spares", "1", "--warm-image", ref, NULL};
        unsigned long base_a;
        double t0;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);
        a = NULL;
        ck_assert_int_eq(img_create(c, digest, NULL, &a), SBX_OK);
        ck_assert_int_eq(claimed(&d, a), 1);
        expect_out(c, a, "root", "echo kept > /etc/k1 && echo ok", "ok\n");
        base_a = map_base(c, a);
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 3), 3); /* topped up */
        old_warm = entries_with(dir, "~");
        ck_assert_msg(strlen(old_warm) > 0, "no ~warm- directory in %s", dir);
        sbx_close(c);

        it_daemon_kill(&d);
        it_daemon_restart(&d, flags);
        c = it_connect(&d);
        expect_out(c, a, "root", "busybox cat /etc/k1", "kept\n");
        expect_out(c, a, NULL, "busybox id -u", "1000\n");
        ck_assert_uint_eq(map_base(c, a), base_a);
        t0 = it_now_ms();
        while (left_of(&d, dir, old_warm) > 0 && it_now_ms() - t0 < 20000)
                usleep(100000);
        ck_assert_msg(left_of(&d, dir, old_warm) == 0, "left of %s", old_warm);
        /* The new pool: its own blocks. */
        ck_assert_int_ge(it_wait_log(&d, ": warm and ready", 5), 5);
        b = NULL;
        ck_assert_int_eq(img_create(c, digest, NULL, &b), SBX_OK);
        ck_assert_int_eq(claimed(&d, b), 1);
        ck_assert_uint_ne(map_base(c, b), base_a);
        expect_out(c, b, "root", "busybox test -e /etc/k1 && echo there || echo none", "none\n");
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        free(a);
        free(b);
        free(old_warm);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(img_entries(dir), 0);
}
END_TEST

/* ---- spares and --max-sandboxes ------------------------------------------------------- */

/* An image create no warm sandbox matches takes the plain spare; when it then fails (no
 * such image among the caller's: BOB names root's), the spare goes whole: no state
 * directory under either name, its cgroup removed, its init gone; the next create of
 * BOB's works. */
START_TEST(failed_image_create_drops_its_spare) {
        struct it_daemon d;
        const char *layout = make_image();
        char dir[700], needle[200], spare[128], *digest, *said, line[400];
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "2", NULL};
        char *p, arg[1200];
        double t0;
        int pid = 0;
        sbx_client *c;

        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        /* BOB names root's digest: refused after the plain spare was taken. */
        snprintf(arg, sizeof(arg), "%s", digest);
        said = as_bob(bob_tries, &d, arg);
        ck_assert_msg(strncmp(said, "NOT_FOUND|", 10) == 0, "BOB got: %s", said);
        free(said);
        p = NULL;
        {
                FILE *f = fopen(d.log, "re");
                ck_assert_ptr_nonnull(f);
                while (fgets(line, sizeof(line), f))
                        if ((p = strstr(line, ": takes the plain spare ")))
                                break;
                fclose(f);
        }
        ck_assert_msg(p, "no spare was taken: see %s", d.log);
        ck_assert_int_eq(sscanf(p, ": takes the plain spare %127s (init pid %d)", spare, &pid),
                         2);
        snprintf(needle, sizeof(needle), "%s\n", spare);
        t0 = it_now_ms();
        while ((left_of(&d, dir, needle) > 0 || kill(pid, 0) == 0) && it_now_ms() - t0 < 20000)
                usleep(100000);
        ck_assert_int_eq(left_of(&d, dir, needle), 0);
        ck_assert_int_eq(kill(pid, 0), -1);
        /* Only spares are left, and the sandboxes dir has no other entry. */
        {
                char *all = entries_with(dir, ""), *q;
                for (q = all; *q; q += strcspn(q, "\n") + 1)
                        ck_assert_msg(strncmp(q, "~spare-", 7) == 0, "left: %s", all);
                free(all);
        }
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(img_entries(dir), 0);
}
END_TEST

/* --max-sandboxes counts warm image sandboxes: with 2 and a pool of 2, a cold create
 * ends one for room, a default one claims the other, a third is refused naming the
 * maximum; a sandbox's end lets the pool make one again. */
START_TEST(max_sandboxes_counts_the_pool) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *a = NULL, *b = NULL, *x = NULL;
        const char *flags[] = {"--warm", "0", "--spares", "0", "--max-sandboxes", "2",
                               "--max-sandboxes-per-uid", "2", "--warm-image", ref, NULL};
        struct sbx_create_opts o;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);
        sbx_create_opts_init(&o);
        o.policy.network = SBX_NETWORK_FULL;
        ck_assert_msg(create_opts(c, &o, digest, &a) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_int_eq(claimed(&d, a), 0);
        ck_assert_msg(img_create(c, digest, NULL, &b) == SBX_OK, "%s", sbx_error_message(c));
        ck_assert_int_eq(claimed(&d, b), 1);
        ck_assert_int_eq(img_create(c, digest, NULL, &x), SBX_RESOURCE_EXHAUSTED);
        ck_assert_msg(strstr(sbx_error_message(c), "--max-sandboxes"), "%s",
                      sbx_error_message(c));
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 3), 3);
        ck_assert_int_eq(img_create(c, digest, NULL, &x), SBX_OK);
        ck_assert_int_eq(claimed(&d, x), 1);
        ck_assert_int_eq(sbx_terminate(c, b, NULL), SBX_OK);
        ck_assert_int_eq(sbx_terminate(c, x, NULL), SBX_OK);
        free(a);
        free(b);
        free(x);
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- one name, two contents --------------------------------------------------------- */

/* BOB creates from name (arg) and reports "ID|DIGEST|" and the image's /etc/greeting. */
static void bob_creates_from(struct it_daemon *d, const char *name, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_sandbox *s = NULL;
        char *id = NULL;
        enum sbx_code rc = img_create(c, name, NULL, &id);

        if (rc == SBX_OK && (rc = sbx_get(c, id, &s)) == SBX_OK)
                say(r, "%s|%s|\n", id, s->image_digest);
        else
                say(r, "%s|%s\n", sbx_code_name(rc), sbx_error_message(c));
        sbx_sandbox_free(s);
        if (id)
                (void)sbx_terminate(c, id, NULL);
        free(id);
        sbx_close(c);
}

/* BOB pulls name (arg) and reports its digest. */
static void bob_pulls(struct it_daemon *d, const char *layout, struct report *r) {
        sbx_client *c = it_connect(d);
        char *digest = img_pull(c, layout, "img");

        say(r, "%s", digest);
        free(digest);
        sbx_close(c);
}

/* The same name, other content for root than for BOB: BOB pulled oci:LAYOUT:img (X),
 * then the layout changed and root pulled the name again (Y), which the pool follows
 * (its X sandboxes end, Y ones are made). BOB's create of that name is of X: it claims
 * none of the pool's Y sandboxes, and his sandbox is X's; root's claims one of Y. */
START_TEST(one_name_other_content_is_not_claimed) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], name[800], other[800], cmd[4000], *x, *y, *said, *a = NULL;
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                               "--warm-image", ref, NULL};
        struct sbx_sandbox *s = NULL;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        snprintf(name, sizeof(name), "oci:%s:img", layout);
        it_private_mounts(); /* no neighbour's mount ends the pool's sandboxes */
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        x = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        said = as_bob(bob_pulls, &d, layout);
        ck_assert_str_eq(said, x);
        free(said);
        /* Other content under the same layout path: another build of the image. */
        snprintf(other, sizeof(other), "%s/img2", it_base_dir());
        ck_assert_int_eq(mkdir(other, 0755), 0);
        snprintf(cmd, sizeof(cmd),
                 "sleep 1.1 && bash tests/mkimage.sh %s >%s/mkimage.log 2>&1 && chmod -R a+rX %s "
                 "&& rm -rf %s && cp -a %s/oci %s",
                 other, other, other, layout, other, layout);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        y = img_pull(c, layout, "img");
        ck_assert_str_ne(x, y);
        ck_assert_int_eq(it_wait_log(&d, "its image's name names another image now", 1), 1);
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);

        said = as_bob(bob_creates_from, &d, name);
        {
                char bid[128];
                snprintf(bid, sizeof(bid), "%.*s", (int)strcspn(said, "|"), said);
                ck_assert_msg(strstr(said, x), "BOB got: %s (X %s)", said, x);
                ck_assert_int_eq(claimed(&d, bid), 0);
        }
        free(said);
        ck_assert_int_eq(img_create(c, name, NULL, &a), SBX_OK);
        ck_assert_int_eq(claimed(&d, a), 1);
        ck_assert_int_eq(sbx_get(c, a, &s), SBX_OK);
        ck_assert_str_eq(s->image_digest, y);
        sbx_sandbox_free(s);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        free(x);
        free(y);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- races ----------------------------------------------------------------------------- */

struct racer {
        struct it_daemon *d;
        char *id;
        enum sbx_code rc;
        char msg[300];
        const char *image;
};

static void *race_create(void *arg) {
        struct racer *r = arg;
        sbx_client *c = it_connect(r->d);

        r->rc = img_create(c, r->image, NULL, &r->id);
        if (r->rc != SBX_OK)
                snprintf(r->msg, sizeof(r->msg), "%s", sbx_error_message(c));
        sbx_close(c);
        return NULL;
}

/* Four creates at once for a pool of one: each gets a sandbox of its own (distinct
 * blocks of ids), none is claimed twice. Then the host's mounts change (a tmpfs mounted
 * in the test's namespace, the daemon's): a create right after takes no sandbox made
 * before (the pool's is ended, then made again, and claimed). */
START_TEST(racing_claims_and_host_changes) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], mnt[700], *digest, *a = NULL;
        const char *flags[] = {"--warm", "0", "--spares", "0", "--warm-image", ref, NULL};
        struct racer r[4];
        pthread_t th[4];
        unsigned long base[4];
        int i, j, n_claimed = 0;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        snprintf(mnt, sizeof(mnt), "%s/m", it_base_dir());
        ck_assert_int_eq(mkdir(mnt, 0755), 0);
        it_private_mounts();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        for (i = 0; i < 4; i++) {
                memset(&r[i], 0, sizeof(r[i]));
                r[i].d = &d;
                r[i].image = digest;
                ck_assert_int_eq(pthread_create(&th[i], NULL, race_create, &r[i]), 0);
        }
        for (i = 0; i < 4; i++) {
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);
                ck_assert_msg(r[i].rc == SBX_OK, "racer %d: %s", i, r[i].msg);
                n_claimed += claimed(&d, r[i].id);
                base[i] = map_base(c, r[i].id);
                for (j = 0; j < i; j++)
                        ck_assert_uint_ne(base[i], base[j]);
        }
        ck_assert_int_ge(n_claimed, 1);
        ck_assert_int_eq(n_claimed, it_log_count(&d, ": claimed ~warm-"));

        /* The host changes: the pool's sandbox made before goes, none is claimed. */
        ck_assert_int_ge(it_wait_log(&d, ": warm and ready", 1 + n_claimed), 1 + n_claimed);
        ck_assert_int_eq(mount("t", mnt, "tmpfs", 0, "size=1m"), 0);
        ck_assert_int_eq(img_create(c, digest, NULL, &a), SBX_OK);
        (void)umount(mnt);
        ck_assert_int_eq(claimed(&d, a), 0);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        a = NULL;
        /* Made again after the rebuild window: claimed. */
        ck_assert_int_ge(wait_log_long(&d, ": warm and ready", 2 + n_claimed, 30), 2 + n_claimed);
        ck_assert_int_eq(img_create(c, digest, NULL, &a), SBX_OK);
        ck_assert_int_eq(claimed(&d, a), 1);
        ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
        free(a);
        for (i = 0; i < 4; i++) {
                ck_assert_int_eq(sbx_terminate(c, r[i].id, NULL), SBX_OK);
                free(r[i].id);
        }
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- --default-disk --------------------------------------------------------------------- */

/* With --default-disk every sandbox has a disk limit, the pool's too: a default create
 * claims one, and its disk limit holds there as in a cold one (the image's writable
 * root and /workspace share it), after the state directory's rename. */
START_TEST(default_disk_holds_in_a_claimed_one) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *a = NULL;
        const char *flags[] = {"--warm", "0", "--spares", "0", "--default-disk", "20M",
                               "--warm-image", ref, NULL};
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=1", layout);
        it_private_mounts();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        if (it_wait_log(&d, ": warm and ready", 1) != 1) {
                ck_assert_msg(strstr(log_lines(&d, "warm"), "UNIMPLEMENTED"), "%s",
                              log_lines(&d, "warm"));
                fprintf(stderr, "default_disk_holds_in_a_claimed_one: SKIPPED: %s\n",
                        log_lines(&d, "warm"));
        } else {
                ck_assert_int_eq(img_create(c, digest, NULL, &a), SBX_OK);
                ck_assert_int_eq(claimed(&d, a), 1);
                expect_out(c, a, "root", IMG_DISK_CAPPED_SHELL, "capped\nshared\n");
                ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
                free(a);
        }
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        {
                char dir[700];
                snprintf(dir, sizeof(dir), "%s/sandboxes", d.state);
                ck_assert_int_eq(img_entries(dir), 0);
        }
}
END_TEST

/* ---- what BOB learns of the pool ------------------------------------------------------- */

/* BOB pulls root's content under his name and reports what his image calls say of it:
 * "pull N|list N|inspect N|pruned K|images M" (N: ImageInfo.sandboxes). */
static void bob_looks(struct it_daemon *d, const char *layout, struct report *r) {
        sbx_client *c = it_connect(d);
        struct sbx_image *img = NULL;
        struct sbx_image_list *l = NULL;
        struct sbx_removed_images *rm = NULL;
        char source[800];

        snprintf(source, sizeof(source), "oci:%s:img", layout);
        if (sbx_image_pull(c, source, NULL, &img) == SBX_OK)
                say(r, "pull %u|", img->sandboxes);
        sbx_image_free(img);
        img = NULL;
        if (sbx_image_list(c, &l) == SBX_OK && l->n == 1)
                say(r, "list %u|", l->v[0].sandboxes);
        sbx_image_list_free(l);
        l = NULL;
        if (sbx_image_inspect(c, source, &img) == SBX_OK)
                say(r, "inspect %u|", img->sandboxes);
        sbx_image_free(img);
        if (sbx_image_prune(c, &rm) == SBX_OK)
                say(r, "pruned %zu|", rm->names.n);
        sbx_removed_images_free(rm);
        if (sbx_image_list(c, &l) == SBX_OK)
                say(r, "images %zu", l->n);
        sbx_image_list_free(l);
        sbx_close(c);
}

/* The pool's sandboxes are nobody's: BOB, with a name for the content root keeps warm,
 * sees no sandbox using it (ImageInfo.sandboxes 0 from pull, list and inspect, as
 * before --warm-image), and his prune removes his name, which no sandbox of anyone's
 * uses. Root's own list says 0 too, then 1 with a sandbox it claimed. */
START_TEST(bob_learns_nothing_of_the_pool) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], *digest, *said;
        const char *flags[] = {"--socket-group", "3100", "--warm", "0", "--spares", "0",
                               "--warm-image", ref, NULL};
        struct sbx_image_list *l = NULL;
        sbx_client *c;

        snprintf(ref, sizeof(ref), "oci:%s:img=2", layout);
        it_private_mounts();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        digest = img_pull(c, layout, "img");
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 2), 2);
        said = as_bob(bob_looks, &d, layout);
        ck_assert_msg(strcmp(said, "pull 0|list 0|inspect 0|pruned 1|images 0") == 0,
                      "BOB got: %s", said);
        free(said);
        ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_uint_eq(l->v[0].sandboxes, 0);
        sbx_image_list_free(l);
        /* A claimed one is its owner's: counted (the pool tops up, not counted). */
        {
                char *a = NULL;
                ck_assert_int_eq(img_create(c, digest, NULL, &a), SBX_OK);
                ck_assert_int_eq(claimed(&d, a), 1);
                ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 3), 3);
                ck_assert_int_eq(sbx_image_list(c, &l), SBX_OK);
                ck_assert_uint_eq(l->v[0].sandboxes, 1);
                sbx_image_list_free(l);
                ck_assert_int_eq(sbx_terminate(c, a, NULL), SBX_OK);
                free(a);
        }
        /* Root's last name for it: refused while the pool holds it, saying why (no
         * "terminate them first": root cannot terminate warm sandboxes). */
        ck_assert_int_eq(sbx_image_remove(c, digest, NULL), SBX_FAILED_PRECONDITION);
        ck_assert_msg(strstr(sbx_error_message(c), "kept warm by sbxd --warm-image"), "%s",
                      sbx_error_message(c));
        free(digest);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- what the pool cannot make: said once ---------------------------------------------- */

/* A --warm-image the pool cannot make, for good until the next pull: on a root sbxd
 * whose --uid-base is none of sbxd's ranges (no blocks of ids: UNIMPLEMENTED, as in
 * it_image_sandbox custom_uid_base_has_no_blocks), or an image whose User is in none
 * of its /etc/passwd (tag "bad", umoci's). The pool says so once, not at every retry
 * (SBX_WARM_RETRY_MS), and creates are refused as without the flag. */
START_TEST(what_cannot_be_made_is_said_once) {
        struct it_daemon d;
        const char *layout = make_image();
        char ref[900], cmd[1600], *digest, *id = NULL;
        const char *flags[2][12] = {
                {"--uid-base", "1900000000", "--warm", "0", "--spares", "0", "--warm-image", ref,
                 NULL},
                {"--warm", "0", "--spares", "0", "--warm-image", ref, NULL}};
        const enum sbx_code want[2] = {SBX_UNIMPLEMENTED, SBX_INVALID_ARGUMENT};
        const char *tag[2] = {"img", "bad"};
        sbx_client *c;
        int i;

        snprintf(cmd, sizeof(cmd),
                 "umoci config --image %s:img --tag bad --config.user nosuch >/dev/null 2>&1 && "
                 "chmod -R a+rX %s",
                 layout, layout);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        it_private_mounts();
        for (i = 0; i < 2; i++) {
                snprintf(ref, sizeof(ref), "oci:%s:%s=1", layout, tag[i]);
                it_daemon_start(&d, flags[i]);
                c = it_connect(&d);
                digest = img_pull(c, layout, tag[i]);
                ck_assert_int_eq(it_wait_log(&d, "cannot set up a warm sandbox", 1), 1);
                usleep((SBX_WARM_RETRY_MS + 1500) * 1000);
                ck_assert_msg(it_log_count(&d, "cannot set up a warm sandbox") == 1, "%s",
                              log_lines(&d, "cannot set up a warm sandbox"));
                ck_assert_int_eq(img_create(c, digest, NULL, &id), want[i]);
                free(digest);
                sbx_close(c);
                ck_assert_int_eq(it_daemon_stop(&d), 0);
        }
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("image_warm_attacks");

        SBX_ADD_TEST_CASE(s, pool_leaves_blocks_to_clients, 300, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, bob_cannot_claim_without_the_image, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, policies_that_differ_are_cold_limits_hold, 240,
                          it_fixture_setup_var, it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, bob_claim_is_as_his_cold_one, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, sigkill_adopts_claimed_leaves_no_warm, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, failed_image_create_drops_its_spare, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, max_sandboxes_counts_the_pool, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, rootless_claim_is_as_a_cold_one, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, one_name_other_content_is_not_claimed, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, racing_claims_and_host_changes, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, default_disk_holds_in_a_claimed_one, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, bob_learns_nothing_of_the_pool, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        SBX_ADD_TEST_CASE(s, what_cannot_be_made_is_said_once, 240, it_fixture_setup_var,
                          it_fixture_teardown);
        return s;
}

SBX_TEST_MAIN(make_suite)
