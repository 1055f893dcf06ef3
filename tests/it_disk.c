/* it_disk.c: integration tests of the workspace's disk limit (Limits.disk_bytes and
 * disk_inodes; docs/sandboxes.md, "Disk limit") against a real daemon.
 *
 * As root on a host with loop devices the limit is an ext4 image per sandbox
 * (FILESYSTEM_IMAGE); rootless it is a tmpfs made by init (TMPFS_SIZE). The tests prove
 * that a write past the limit fails with ENOSPC inside and leaves the file no larger
 * than the limit, that the inode limit holds, that WriteFile past it is
 * RESOURCE_EXHAUSTED naming the limit, that the command's result names "disk" in
 * limits_hit, that another sandbox and the host are not affected, that the daemon's
 * --default-disk applies, that bad values are refused naming their bound, and that an
 * ended sandbox (terminated, expired, lost in a crash) leaves no mount, loop device or
 * image behind unless keep_workspace keeps the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itutil.h"
#include "testutil.h"

#define NOBODY 65534
#define CMD_MS 60000u
#define MiB    (1024ull * 1024u)

/* ---- helpers ---------------------------------------------------------------------------- */

/* sbx_create with a disk limit of bytes and inodes (0: none given) and keep. */
static enum sbx_code try_create(sbx_client *c, uint64_t bytes, uint64_t inodes, int keep,
                                struct sbx_sandbox **sb) {
        struct sbx_create_opts o;

        sbx_create_opts_init(&o);
        if (bytes) {
                o.policy.limits.set |= SBX_LIMIT_DISK;
                o.policy.limits.disk_bytes = bytes;
        }
        if (inodes) {
                o.policy.limits.set |= SBX_LIMIT_DISK_INODES;
                o.policy.limits.disk_inodes = inodes;
        }
        o.keep_workspace = keep;
        return sbx_create(c, &o, sb);
}

/* Creates a sandbox with these limits; returns it (caller frees), failing the test with
 * the daemon's message. */
static struct sbx_sandbox *create_disk(sbx_client *c, uint64_t bytes, uint64_t inodes, int keep) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code = try_create(c, bytes, inodes, keep, &sb);

        ck_assert_msg(code == SBX_OK, "create with disk %llu: %s: %s", (unsigned long long)bytes,
                      sbx_code_name(code), sbx_error_message(c));
        ck_assert_int_eq(sb->state, SBX_STATE_READY);
        return sb;
}

/* The code of a create with these limits that must fail; its message into msg. */
static enum sbx_code create_refused(sbx_client *c, uint64_t bytes, uint64_t inodes, int keep,
                                    char *msg, size_t len) {
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code = try_create(c, bytes, inodes, keep, &sb);

        ck_assert_msg(code != SBX_OK, "create with disk %llu inodes %llu was accepted",
                      (unsigned long long)bytes, (unsigned long long)inodes);
        snprintf(msg, len, "%s", sbx_error_message(c));
        return code;
}

/* The enforcement sb reports for limit ("none" when absent). */
static const char *enforced(const struct sbx_sandbox *sb, const char *limit) {
        for (size_t i = 0; i < sb->n_enforcement; i++)
                if (strcmp(sb->enforcement[i].limit, limit) == 0)
                        return sb->enforcement[i].enforcement;
        return "none";
}

/* 1 when one of sb's warnings has needle. */
static int warned(const struct sbx_sandbox *sb, const char *needle) {
        for (size_t i = 0; i < sb->warnings.n; i++)
                if (strstr(sb->warnings.v[i], needle))
                        return 1;
        return 0;
}

static int has_hit(const struct sbx_result *r, const char *limit) {
        for (size_t i = 0; i < r->limits_hit.n; i++)
                if (strcmp(r->limits_hit.v[i], limit) == 0)
                        return 1;
        return 0;
}

/* Runs shell; it must exit. Returns the result (caller frees). */
static struct sbx_result *sh(sbx_client *c, const char *id, const char *shell) {
        struct sbx_result *r = it_sh(c, id, CMD_MS, shell);
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED, "`%s`: outcome %s (%s)", shell,
                      sbx_outcome_name(r->outcome), r->start_error ? r->start_error : "-");
        return r;
}

/* Fills sb's /workspace with `cat /dev/zero` (which writes 128 KiB at a time) `rounds`
 * times, emptying it in between: each command ends "No space left on device" (or "Disk
 * quota exceeded") and its result names "disk", every time. ext4 may refuse a write
 * while tens of KiB are still free (it allocates at write time when nearly full, and
 * what it counts as free lags): one fill can pass by luck where five do not. */
static void fill_named_every_time(sbx_client *c, const char *id, int rounds) {
        for (int i = 0; i < rounds; i++) {
                struct sbx_result *r = sh(c, id,
                                          "rm -f /workspace/f; cat /dev/zero > /workspace/f "
                                          "2>/tmp/err; echo $?; cat /tmp/err; df -k /workspace");
                ck_assert_msg(strncmp((char *)r->stdout_data, "1\n", 2) == 0 &&
                                      (strstr((char *)r->stdout_data, "No space left") ||
                                       strstr((char *)r->stdout_data, "Disk quota exceeded")),
                              "fill %d: %s", i, (char *)r->stdout_data);
                ck_assert_msg(has_hit(r, "disk"), "fill %d: limits_hit has no \"disk\": %s", i,
                              (char *)r->stdout_data);
                sbx_result_free(r);
        }
}

static void terminate_ok(sbx_client *c, const char *id) {
        struct sbx_sandbox *sb = NULL;
        ck_assert_int_eq(sbx_terminate(c, id, &sb), SBX_OK);
        sbx_sandbox_free(sb);
}

/* The daemon's state directory as the kernel names it. */
static void state_real(const struct it_daemon *d, char *buf) {
        ck_assert_ptr_nonnull(realpath(d->state, buf));
}

/* Mounts whose mount point is below the state directory (/proc/self/mountinfo). */
static int mounts_below(const struct it_daemon *d) {
        char state[PATH_MAX], line[8192];
        FILE *f = fopen("/proc/self/mountinfo", "r");
        int n = 0;

        state_real(d, state);
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                if (strstr(line, state))
                        n++;
        fclose(f);
        return n;
}

/* Loop devices whose backing file is below the state directory. */
static int loops_below(const struct it_daemon *d) {
        char state[PATH_MAX];

        state_real(d, state);
        return it_loops_below(state, NULL, 0);
}

/* How many lines the shell command cmd prints. */
static int lines_of(const char *cmd) {
        char *out = NULL;
        size_t cap = 0;
        FILE *p = popen(cmd, "r");
        int n = 0;

        ck_assert_ptr_nonnull(p);
        while (getline(&out, &cap, p) > 0)
                n++;
        free(out);
        pclose(p);
        return n;
}

/* Images below the state directory: the files of STATE/disks, and files named
 * workspace.img (kept, or an older daemon's). */
static int images_below(const struct it_daemon *d) {
        char cmd[1400];

        snprintf(cmd, sizeof(cmd),
                 "find '%s' -type f \\( -name workspace.img -o -path '%s/disks/*' \\) "
                 "2>/dev/null",
                 d->state, d->state);
        return lines_of(cmd);
}

/* Records of images below the state directory (symlinks named workspace.img). */
static int records_below(const struct it_daemon *d) {
        char cmd[800];

        snprintf(cmd, sizeof(cmd), "find '%s' -type l -name workspace.img 2>/dev/null", d->state);
        return lines_of(cmd);
}

/* Waits up to ms for the host to hold nothing of the daemon's disks. */
static void assert_nothing_left(const struct it_daemon *d, double ms) {
        double t0 = it_now_ms();
        while ((mounts_below(d) || loops_below(d) || images_below(d) || records_below(d)) &&
               it_now_ms() - t0 < ms)
                usleep(20000);
        ck_assert_int_eq(mounts_below(d), 0);
        ck_assert_int_eq(loops_below(d), 0);
        ck_assert_int_eq(images_below(d), 0);
        ck_assert_int_eq(records_below(d), 0);
}

/* ---- the limit holds -------------------------------------------------------------------- */

/* A write past the limit fails with ENOSPC inside, the file is no larger than the limit,
 * the result names "disk", and a sandbox without a limit (and the host) can still write
 * what this one could not. */
START_TEST(test_disk_enospc) {
        struct it_daemon d;
        struct sbx_sandbox *sb, *other;
        struct sbx_result *r;
        long size = -1;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 8 * MiB, 0, 0);
        ck_assert_str_ne(enforced(sb, "disk"), "none");
        ck_assert_uint_eq(sb->policy.limits.disk_bytes, 8 * MiB);
        ck_assert(!warned(sb, "disk") && !warned(sb, "workspace")); /* nothing to add */
        r = sh(c, sb->id,
               "head -c 20M /dev/zero > /workspace/big 2>/tmp/err; echo $?; "
               "stat -c %s /workspace/big; cat /tmp/err");
        ck_assert_msg(sscanf((char *)r->stdout_data, "1\n%ld", &size) == 1,
                      "head past the limit: %s", (char *)r->stdout_data);
        ck_assert_msg(size > 0 && size <= (long)(8 * MiB), "the file is %ld bytes", size);
        ck_assert_msg(strstr((char *)r->stdout_data, "No space left on device"), "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(has_hit(r, "disk"), "limits_hit has no \"disk\"");
        sbx_result_free(r);

        /* The sandbox's /tmp is not its workspace: it still takes a file. */
        r = sh(c, sb->id, "head -c 1M /dev/zero > /tmp/t && echo ok");
        ck_assert_str_eq((char *)r->stdout_data, "ok\n");
        sbx_result_free(r);

        /* Removing files makes room again; a command that fits names no limit. */
        r = sh(c, sb->id, "rm /workspace/big && head -c 1M /dev/zero > /workspace/s && echo ok");
        ck_assert_str_eq((char *)r->stdout_data, "ok\n");
        ck_assert(!has_hit(r, "disk"));
        sbx_result_free(r);

        /* Another sandbox, without a limit, writes what this one could not. */
        other = create_disk(c, 0, 0, 0);
        ck_assert_str_eq(enforced(other, "disk"), "none");
        r = sh(c, other->id, "head -c 20M /dev/zero > /workspace/big && stat -c %s /workspace/big");
        ck_assert_str_eq((char *)r->stdout_data, "20971520\n");
        sbx_result_free(r);

        terminate_ok(c, sb->id);
        terminate_ok(c, other->id);
        sbx_sandbox_free(sb);
        sbx_sandbox_free(other);
        assert_nothing_left(&d, 30000);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A full workspace is named in limits_hit whatever writes it full: `cat /dev/zero` into
 * a 20 MiB limit, five times over (it once ended with limits_hit [] while ext4 still
 * counted 92 KiB free). */
START_TEST(test_disk_full_named_every_time) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 20 * MiB, 0, 0);
        ck_assert_str_ne(enforced(sb, "disk"), "none");
        fill_named_every_time(c, sb->id, 5);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* disk_inodes: touch stops at about the limit with ENOSPC. */
START_TEST(test_disk_inodes) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        int made = -1;
        sbx_client *c;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 4 * MiB, 100, 0);
        ck_assert_uint_eq(sb->policy.limits.disk_inodes, 100);
        r = sh(c, sb->id,
               "cd /workspace; i=0; while [ $i -lt 400 ] && touch f$i 2>/tmp/err; do "
               "i=$((i+1)); done; echo $i; cat /tmp/err");
        ck_assert_int_eq(sscanf((char *)r->stdout_data, "%d", &made), 1);
        /* At least what was asked; the filesystem rounds its inode table up a little. */
        ck_assert_msg(made >= 100 && made < 400, "%d files made with disk_inodes 100", made);
        ck_assert_msg(strstr((char *)r->stdout_data, "No space left on device"), "%s",
                      (char *)r->stdout_data);
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* WriteFile past the limit: RESOURCE_EXHAUSTED saying the disk limit and what to do. */
START_TEST(test_disk_write_file) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        char *big = calloc(1, 3 * MiB);
        sbx_client *c;
        enum sbx_code code;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 2 * MiB, 0, 0);
        code = sbx_write(c, sb->id, "/workspace/big", big, 3 * MiB, 0644, 0);
        ck_assert_msg(code == SBX_RESOURCE_EXHAUSTED, "WriteFile past the limit: %s: %s",
                      sbx_code_name(code), sbx_error_message(c));
        ck_assert_msg(strstr(sbx_error_message(c), "disk limit") &&
                              strstr(sbx_error_message(c), "2097152") &&
                              strstr(sbx_error_message(c), "--disk"),
                      "%s", sbx_error_message(c));
        /* What fits is written. */
        ck_assert_int_eq(sbx_write(c, sb->id, "/workspace/small", big, 4096, 0644, 0), SBX_OK);
        /* The limit is the workspace's: /tmp takes the big file. */
        ck_assert_int_eq(sbx_write(c, sb->id, "/tmp/big", big, 3 * MiB, 0644, 0), SBX_OK);
        free(big);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --default-disk and --default-disk-inodes apply to a sandbox that sets none, and to
 * the warm sandboxes, which serve such creates. */
START_TEST(test_disk_default) {
        const char *flags[] = {"--default-disk", "4M", "--default-disk-inodes", "200", NULL};
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        sbx_client *c;
        long blocks = 0, bsize = 0;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        sb = create_disk(c, 0, 0, 0);
        ck_assert_uint_eq(sb->policy.limits.disk_bytes, 4 * MiB);
        ck_assert_uint_eq(sb->policy.limits.disk_inodes, 200);
        ck_assert_str_ne(enforced(sb, "disk"), "none");
        r = sh(c, sb->id, "stat -f -c '%b %S' /workspace; id -u; stat -c %u /workspace");
        ck_assert_int_eq(sscanf((char *)r->stdout_data, "%ld %ld", &blocks, &bsize), 2);
        ck_assert_msg(blocks * bsize <= (long)(4 * MiB) && blocks * bsize > (long)(3 * MiB),
                      "/workspace is %ld bytes", blocks * bsize);
        sbx_result_free(r);
        /* The workspace is the sandbox user's, as without a limit. */
        r = sh(c, sb->id, "touch /workspace/mine && echo ok");
        ck_assert_str_eq((char *)r->stdout_data, "ok\n");
        sbx_result_free(r);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        /* A policy's own limit wins over the default. */
        sb = create_disk(c, 16 * MiB, 0, 0);
        ck_assert_uint_eq(sb->policy.limits.disk_bytes, 16 * MiB);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        assert_nothing_left(&d, 30000);
}
END_TEST

/* Bad values are INVALID_ARGUMENT naming the bound; bad daemon flags stop sbxd. */
START_TEST(test_disk_bad_values) {
        const char *flags[] = {"--max-disk", "64M", NULL};
        struct it_daemon d;
        sbx_client *c;
        char msg[512], *out = NULL, *err = NULL;
        int rc;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        ck_assert_int_eq(create_refused(c, 1000, 0, 0, msg, sizeof(msg)), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "minimum of 1048576 bytes (1 MiB)"), "%s", msg);
        ck_assert_int_eq(create_refused(c, 65 * MiB, 0, 0, msg, sizeof(msg)), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "--max-disk"), "%s", msg);
        ck_assert_int_eq(create_refused(c, UINT64_MAX, 0, 0, msg, sizeof(msg)),
                         SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(create_refused(c, 4 * MiB, 3, 0, msg, sizeof(msg)), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "disk_inodes 3 is below the minimum of 16"), "%s", msg);
        ck_assert_int_eq(create_refused(c, 4 * MiB, 1u << 20, 0, msg, sizeof(msg)),
                         SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "above the maximum of 2048"), "%s", msg);
        ck_assert_int_eq(create_refused(c, 0, 100, 0, msg, sizeof(msg)), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "disk_inodes needs disk_bytes"), "%s", msg);
        /* The CLI: its own parse, and the daemon's refusal in its words. */
        {
                const char *a[] = {"create", "--disk", "lots", NULL};
                rc = it_sbx(&d, NULL, 0, &out, &err, a);
                ck_assert_int_eq(rc, 125);
                ck_assert_msg(strstr(err, "--disk"), "%s", err);
                free(out);
                free(err);
        }
        {
                const char *a[] = {"create", "--disk", "100K", NULL};
                rc = it_sbx(&d, NULL, 0, &out, &err, a);
                ck_assert_int_ne(rc, 0);
                ck_assert_msg(
                        strstr(err,
                               "--disk 102400 bytes is below the minimum of 1048576 bytes (1 MiB)"),
                        "%s", err);
                free(out);
                free(err);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Terminating a sandbox whose image holds gigabytes just written does not stall the
 * daemon: the image's filesystem shuts down (writing back through the loop device) on a
 * thread of its own, not on the event loop (2 GB: 2.2 s on the loop before). */
START_TEST(test_disk_release_off_the_loop) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        sbx_client *c;
        double t0, took;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 3ull << 30, 0, 0);
        r = sh(c, sb->id, "head -c 2000M /dev/zero > /workspace/big && echo ok");
        ck_assert_str_eq((char *)r->stdout_data, "ok\n");
        sbx_result_free(r);
        t0 = it_now_ms();
        terminate_ok(c, sb->id);
        took = it_now_ms() - t0;
        fprintf(stderr, "it_disk release_off_the_loop: terminate took %.0f ms\n", took);
        ck_assert_msg(took < 1200, "terminate took %.0f ms", took);
        sbx_sandbox_free(sb);
        assert_nothing_left(&d, 30000);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A limit larger than what is free where the images (or quota'd directories) live would
 * let the sandbox fill the host's disk instead of its own: RESOURCE_EXHAUSTED, saying
 * what is free. */
START_TEST(test_disk_more_than_free) {
        const char *flags[] = {"--max-disk", "16T", NULL};
        struct it_daemon d;
        struct statvfs v;
        uint64_t free_bytes;
        sbx_client *c;
        char msg[512];

        it_daemon_start(&d, flags);
        ck_assert_int_eq(statvfs(d.dir, &v), 0);
        free_bytes = (uint64_t)v.f_bavail * v.f_frsize;
        if (free_bytes + (1ull << 30) > (16ull << 40) - (1ull << 20)) {
                fprintf(stderr, "it_disk more_than_free: SKIPPED (%llu bytes free)\n",
                        (unsigned long long)free_bytes);
        } else {
                c = it_connect(&d);
                ck_assert_int_eq(
                        create_refused(c, free_bytes + (1ull << 30), 0, 0, msg, sizeof(msg)),
                        SBX_RESOURCE_EXHAUSTED);
                ck_assert_msg(strstr(msg, "bytes free on the filesystem of sbxd's state "
                                          "directory"),
                              "%s", msg);
                sbx_close(c);
        }
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        assert_nothing_left(&d, 30000);
}
END_TEST

/* `sbx create --disk 8M --disk-inodes 64 --json` and `sbx info` show the limit and
 * what enforces it. */
START_TEST(test_disk_cli) {
        struct it_daemon d;
        char *out = NULL, *err = NULL, id[128];
        int rc;

        it_daemon_start(&d, NULL);
        {
                const char *a[] = {"create", "--disk", "8M", "--disk-inodes", "64", NULL};
                rc = it_sbx(&d, NULL, 0, &out, &err, a);
                ck_assert_msg(rc == 0, "sbx create --disk: %s", err);
                ck_assert_int_eq(sscanf(out, "%127s", id), 1);
                free(out);
                free(err);
        }
        {
                const char *a[] = {"info", id, NULL};
                rc = it_sbx(&d, NULL, 0, &out, &err, a);
                ck_assert_int_eq(rc, 0);
                ck_assert_msg(strstr(out, "disk=8388608") && strstr(out, "disk_inodes=64") &&
                                      strstr(out, "disk=filesystem_image"),
                              "%s", out);
                free(out);
                free(err);
        }
        {
                const char *a[] = {"info", "--json", id, NULL};
                rc = it_sbx(&d, NULL, 0, &out, &err, a);
                ck_assert_int_eq(rc, 0);
                ck_assert_msg(strstr(out, "\"disk_bytes\":8388608") &&
                                      strstr(out, "\"disk\":\"filesystem_image\""),
                              "%s", out);
                free(out);
                free(err);
        }
        {
                const char *a[] = {"terminate", id, NULL};
                ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, NULL, a), 0);
        }
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- what an ended sandbox leaves ------------------------------------------------------- */

/* Terminate and expiry leave no mount, loop device or image; while it runs the image is
 * on a loop device and mounted only in the sandbox's own mount namespace: the host's
 * mount table names nothing below the state directory (no sandbox id). */
START_TEST(test_disk_cleanup) {
        struct it_daemon d;
        struct sbx_sandbox *a, *b, *e = NULL;
        sbx_client *c;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        a = create_disk(c, 4 * MiB, 0, 0);
        b = create_disk(c, 4 * MiB, 0, 0);
        if (strcmp(enforced(a, "disk"), "filesystem_image") == 0) {
                ck_assert_int_eq(mounts_below(&d), 0);
                ck_assert_int_eq(loops_below(&d), 2);
                ck_assert_int_eq(images_below(&d), 2);
        }
        terminate_ok(c, a->id);
        ck_assert_int_eq(sbx_set_timeout(c, b->id, 300, &e), SBX_OK);
        sbx_sandbox_free(e);
        t0 = it_now_ms();
        do {
                e = NULL;
                ck_assert_int_eq(sbx_get(c, b->id, &e), SBX_OK);
                if (e->state == SBX_STATE_EXPIRED)
                        break;
                sbx_sandbox_free(e);
                e = NULL;
                usleep(50000);
        } while (it_now_ms() - t0 < 30000);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->state, SBX_STATE_EXPIRED);
        sbx_sandbox_free(e);
        assert_nothing_left(&d, 30000);
        sbx_sandbox_free(a);
        sbx_sandbox_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A spare built while another sandbox's image is mounted holds none of it: once that
 * sandbox ends, its loop device goes, also when keep_workspace keeps its directory
 * (whose removal would otherwise detach the mount everywhere): init detached the mounts
 * below the sandboxes directory from the host's tree the spare keeps. And the daemon's
 * own image mounts and unmounts do not end the built spares (they are not the host
 * changing). */
START_TEST(test_disk_spare_holds_no_image) {
        const char *flags[] = {"--warm", "0", "--spares", "2", NULL};
        const char *roots[1];
        struct sbx_create_opts o;
        struct sbx_sandbox *a, *b = NULL;
        struct it_daemon d;
        char rw[700];
        sbx_client *c;
        double t0;
        int built;

        /* The pool counted or claimed here is ended by no mount of another program's. */
        it_private_mounts();
        it_daemon_start(&d, flags);
        ck_assert_int_eq(it_wait_log(&d, ": spare built", 1), 1);
        c = it_connect(&d);
        a = create_disk(c, 4 * MiB, 0, 1);
        if (strcmp(enforced(a, "disk"), "filesystem_image") != 0) {
                sbx_sandbox_free(a);
                sbx_close(c);
                ck_assert_int_eq(it_daemon_stop(&d), 0);
                return; /* no image here */
        }
        ck_assert_int_eq(loops_below(&d), 1);
        /* b takes the built spare; the one built next sees a's image mounted. */
        snprintf(rw, sizeof(rw), "%s/rw-image", it_base_dir());
        ck_assert_int_eq(mkdir(rw, 0777), 0);
        roots[0] = rw;
        sbx_create_opts_init(&o);
        sbx_policy_workspace_write(&o.policy, roots, 1, SBX_NETWORK_NONE);
        ck_assert_msg(sbx_create(c, &o, &b) == SBX_OK, "create: %s", sbx_error_message(c));
        ck_assert_int_eq(it_log_count(&d, ": takes the built spare"), 1);
        ck_assert_int_eq(it_wait_log(&d, ": spare built", 2), 2);
        terminate_ok(c, a->id);
        t0 = it_now_ms();
        while (loops_below(&d) > 0 && it_now_ms() - t0 < 10000)
                usleep(20000);
        ck_assert_msg(loops_below(&d) == 0, "the image's loop device is still attached 10 s after "
                                            "its sandbox ended");
        built = it_log_count(&d, ": spare built");
        ck_assert_int_eq(it_log_count(&d, "the host's mounts or / changed"), 0);
        ck_assert_int_eq(built, 2); /* none rebuilt for the daemon's own mounts */
        terminate_ok(c, b->id);
        sbx_sandbox_free(a);
        sbx_sandbox_free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* With --default-disk every warm sandbox mounts an image of its own while it is set up:
 * that change of the daemon's mount table is its own, not the host's, and the warm
 * sandbox is claimed, not ended as one that copied a passing mount. */
START_TEST(test_disk_default_warm_claimed) {
        const char *flags[] = {"--default-disk", "4M", "--warm", "1", "--spares", "0", NULL};
        struct it_daemon d;
        sbx_client *c;
        char *id;

        /* The pool counted or claimed here is ended by no mount of another program's. */
        it_private_mounts();
        it_daemon_start(&d, flags);
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        usleep(1500 * 1000); /* an ended one would be gone by now */
        c = it_connect(&d);
        id = it_create(c, NULL);
        ck_assert_int_eq(it_log_count(&d, ": claimed ~warm-"), 1);
        ck_assert_int_eq(it_log_count(&d, "the host changed"), 0);
        terminate_ok(c, id);
        free(id);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* keep_workspace keeps the files as the image next to the workspace directory (in the
 * place of its record), no longer mounted nor attached; its content is what the sandbox
 * wrote. */
START_TEST(test_disk_keep_workspace) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        char img[1200], cmd[1400], buf[64] = "";
        sbx_client *c;
        FILE *p;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 4 * MiB, 0, 1);
        ck_assert_msg(warned(sb, "kept as the file") && warned(sb, "workspace.img"),
                      "no warning says where the workspace is kept");
        r = sh(c, sb->id, "echo kept > /workspace/f");
        sbx_result_free(r);
        snprintf(img, sizeof(img), "%s/sandboxes/%s/workspace.img", d.state, sb->id);
        terminate_ok(c, sb->id);
        ck_assert_int_eq(mounts_below(&d), 0);
        /* The loop device goes once the filesystem is shut down, off the event loop. */
        for (int i = 0; i < 1500 && loops_below(&d); i++)
                usleep(20000);
        ck_assert_int_eq(loops_below(&d), 0);
        ck_assert_msg(access(img, R_OK) == 0, "%s: %s", img, strerror(errno));
        /* The image itself, not its record; nothing left in STATE/disks. */
        ck_assert_int_eq(records_below(&d), 0);
        ck_assert_int_eq(images_below(&d), 1);
        snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /f' '%s' 2>/dev/null", img);
        p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), p));
        pclose(p);
        ck_assert_str_eq(buf, "kept\n");
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The image's file, and so its loop device's backing file (which every local user reads
 * in /sys/block/loopN/loop/backing_file), names nothing of the sandbox's: it is
 * STATE/disks/ and 32 random hex digits, another for each sandbox, and the sandbox's
 * record STATE/sandboxes/ID/workspace.img leads to it. */
START_TEST(test_disk_image_named_opaquely) {
        char state[PATH_MAX], ids[2][64], record[1300], target[128], *files[2] = {NULL, NULL};
        struct sbx_create_opts o;
        struct sbx_sandbox *sb;
        struct it_daemon d;
        sbx_client *c;
        ssize_t n;
        int i;

        it_daemon_start(&d, NULL);
        state_real(&d, state);
        c = it_connect(&d);
        for (i = 0; i < 2; i++) {
                snprintf(ids[i], sizeof(ids[i]), "named-%d-%d", i, (int)getpid());
                sbx_create_opts_init(&o);
                o.id = ids[i];
                o.policy.limits.set |= SBX_LIMIT_DISK;
                o.policy.limits.disk_bytes = 4 * MiB;
                ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
                if (strcmp(enforced(sb, "disk"), "filesystem_image") != 0) {
                        sbx_sandbox_free(sb);
                        sbx_close(c);
                        ck_assert_int_eq(it_daemon_stop(&d), 0);
                        return; /* no image here */
                }
                sbx_sandbox_free(sb);
        }
        ck_assert_int_eq(it_loops_below(state, files, 2), 2);
        for (i = 0; i < 2; i++) {
                const char *name = strrchr(files[i], '/') + 1;
                ck_assert_msg(!strstr(files[i], "named-") && !strstr(files[i], "sandboxes"),
                              "the backing file names the sandbox: %s", files[i]);
                ck_assert_msg(strncmp(files[i], state, strlen(state)) == 0 &&
                                      strncmp(files[i] + strlen(state), "/disks/", 7) == 0 &&
                                      strlen(name) == 36 &&
                                      strspn(name, "0123456789abcdef") == 32 &&
                                      strcmp(name + 32, ".img") == 0,
                              "%s", files[i]);
        }
        ck_assert_str_ne(files[0], files[1]);
        for (i = 0; i < 2; i++) {
                int has = 0;
                snprintf(record, sizeof(record), "%s/sandboxes/%s/workspace.img", d.state, ids[i]);
                n = readlink(record, target, sizeof(target) - 1);
                ck_assert_msg(n > 0, "%s: %s", record, strerror(errno));
                target[n] = '\0';
                ck_assert_msg(strncmp(target, "../../disks/", 12) == 0, "%s", target);
                for (int k = 0; k < 2; k++)
                        has |= strcmp(strrchr(files[k], '/') + 1, target + 12) == 0;
                ck_assert_msg(has, "%s leads to %s, no image attached", record, target);
                terminate_ok(c, ids[i]);
        }
        assert_nothing_left(&d, 5000);
        free(files[0]);
        free(files[1]);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Creates a sandbox with a disk limit of 4 MiB on d (its id into id), then kills the
 * daemon with SIGKILL. */
static void create_then_kill(struct it_daemon *d, char *id, size_t len) {
        sbx_client *c = it_connect(d);
        struct sbx_sandbox *sb = create_disk(c, 4 * MiB, 0, 0);

        snprintf(id, len, "%s", sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        it_daemon_kill(d);
}

/* Puts sandbox id's image where an older daemon had it, STATE/sandboxes/ID/workspace.img
 * (in its record's place: its loop device's backing file follows), while the daemon is
 * down; with live (its sandbox lives on, holding its mount), checks the loop device shows
 * that name now. (A sandbox that died with the daemon took its mount, the image's only
 * one, and so its loop device with it.) */
static void as_older_daemon(const struct it_daemon *d, const char *id, int live) {
        char record[1300], img[1400], target[128], state[PATH_MAX], *file = NULL;
        ssize_t n;

        snprintf(record, sizeof(record), "%s/sandboxes/%s/workspace.img", d->state, id);
        n = readlink(record, target, sizeof(target) - 1);
        ck_assert_msg(n > 12, "%s: %s", record, strerror(errno));
        target[n] = '\0';
        snprintf(img, sizeof(img), "%s/%s", d->state, target + 6); /* past "../../" */
        ck_assert_msg(rename(img, record) == 0, "%s: %s", img, strerror(errno));
        state_real(d, state);
        if (live)
                ck_assert_int_ge(it_loops_below(state, &file, 1), 1);
        free(file);
}

/* Images an older daemon made (the file STATE/sandboxes/ID/workspace.img itself, attached
 * under that name) still work: an adopted sandbox's limit holds and its end removes the
 * image and its loop device; one kept stays as it is; one whose sandbox died with the
 * daemon goes at the next start. */
START_TEST(test_disk_older_image_names) {
        const char *lost[] = {"--adopt-grace", "0", NULL};
        struct it_daemon d;
        struct sbx_sandbox *a, *b;
        struct sbx_result *r;
        char kept[1300], ida[128], idb[128];
        struct stat st;
        sbx_client *c;

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds */
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        a = create_disk(c, 4 * MiB, 0, 0);
        b = create_disk(c, 4 * MiB, 0, 1);
        snprintf(ida, sizeof(ida), "%s", a->id);
        snprintf(idb, sizeof(idb), "%s", b->id);
        if (strcmp(enforced(a, "disk"), "filesystem_image") != 0) {
                sbx_sandbox_free(a);
                sbx_sandbox_free(b);
                sbx_close(c);
                ck_assert_int_eq(it_daemon_stop(&d), 0);
                return; /* no image here */
        }
        sbx_sandbox_free(a);
        sbx_sandbox_free(b);
        r = sh(c, idb, "echo kept > /workspace/f");
        sbx_result_free(r);
        sbx_close(c);
        it_daemon_kill(&d);
        as_older_daemon(&d, ida, 1);
        as_older_daemon(&d, idb, 1);
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        r = sh(c, ida, "head -c 10M /dev/zero > /workspace/big; echo $?");
        ck_assert_str_eq((char *)r->stdout_data, "1\n");
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        terminate_ok(c, ida);
        terminate_ok(c, idb);
        snprintf(kept, sizeof(kept), "%s/sandboxes/%s/workspace.img", d.state, idb);
        ck_assert_int_eq(lstat(kept, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        /* Once its loop device has gone, nothing but the kept image is left. */
        for (int i = 0; i < 500 && loops_below(&d); i++)
                usleep(20000);
        ck_assert_int_eq(unlink(kept), 0);
        assert_nothing_left(&d, 5000);

        /* A sandbox of an older daemon that died with it. */
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        it_daemon_restart(&d, lost);
        create_then_kill(&d, ida, sizeof(ida));
        as_older_daemon(&d, ida, 0);
        it_daemon_restart(&d, lost);
        assert_nothing_left(&d, 5000);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A daemon killed with SIGKILL and restarted adopts the sandbox: its limit still holds,
 * and its end cleans up. */
START_TEST(test_disk_readopted) {
        struct it_daemon d;
        struct sbx_result *r;
        char id[128];
        sbx_client *c;

        if (getenv("SBX_VALGRIND"))
                return; /* adoption needs pidfds */
        it_daemon_start(&d, NULL);
        create_then_kill(&d, id, sizeof(id));
        it_daemon_restart(&d, NULL);
        c = it_connect(&d);
        r = sh(c, id, "head -c 10M /dev/zero > /workspace/big; echo $?; stat -c %s /workspace/big");
        ck_assert_msg(strncmp((char *)r->stdout_data, "1\n", 2) == 0, "%s", (char *)r->stdout_data);
        ck_assert_msg(atol((char *)r->stdout_data + 2) <= (long)(4 * MiB), "%s",
                      (char *)r->stdout_data);
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        terminate_ok(c, id);
        assert_nothing_left(&d, 30000);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A crash whose sandboxes die with it (no adoption) leaves images and their records (the
 * images were mounted in the sandboxes' own namespaces only: their mounts and loop
 * devices go with them), and one cut short between attaching a loop device and
 * mounting it leaves an attached device: the next start removes all of them. */
START_TEST(test_disk_crash_cleaned) {
        const char *flags[] = {"--adopt-grace", "0", NULL};
        struct it_daemon d;
        struct sbx_sandbox *sb;
        sbx_client *c;
        char dir[1200], cmd[2600];
        double t0;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        sb = create_disk(c, 4 * MiB, 0, 0);
        if (strcmp(enforced(sb, "disk"), "filesystem_image") != 0) {
                sbx_sandbox_free(sb);
                sbx_close(c);
                it_daemon_stop(&d);
                return;
        }
        sbx_sandbox_free(sb);
        sb = create_disk(c, 4 * MiB, 0, 0);
        sbx_sandbox_free(sb);
        sbx_close(c);
        it_daemon_kill(&d);
        ck_assert_int_eq(mounts_below(&d), 0);
        t0 = it_now_ms();
        while (loops_below(&d) > 0 && it_now_ms() - t0 < 30000)
                usleep(20000);
        ck_assert_int_eq(loops_below(&d), 0);
        ck_assert_int_eq(images_below(&d), 2);
        /* An image attached and never mounted, as a crash in between leaves it. */
        snprintf(dir, sizeof(dir), "%s/sandboxes/sbx-cut-short", d.state);
        ck_assert_int_eq(mkdir(dir, 0711), 0);
        snprintf(cmd, sizeof(cmd),
                 "truncate -s 2M '%s/workspace.img' && losetup -f '%s/workspace.img'", dir, dir);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(loops_below(&d), 1);
        it_daemon_restart(&d, flags);
        assert_nothing_left(&d, 30000);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A sandbox whose image is still being made when the daemon's sweep (every 5 s) looks
 * at the sandboxes being created is not failed as a setup that took too long: large
 * images (about 15 TiB, ~0.5-1 s each: mke2fs writes ~200 MiB of metadata; each of
 * another size, so that no template is copied) are created one after another for
 * longer than a sweep's interval. The state directory is in /dev/shm, so that this
 * metadata is memory, freed at each terminate. */
static char shm_state[128];

static void shm_setup(void) {
        const char *base;

        it_fixture_setup();
        base = strrchr(it_base_dir(), '/');
        snprintf(shm_state, sizeof(shm_state), "/dev/shm/it_disk-%s", base ? base + 1 : "x");
        ck_assert_int_eq(mkdir(shm_state, 0700), 0);
}

static void shm_teardown(void) {
        char cmd[200];

        it_fixture_teardown();
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm_state);
        (void)!system(cmd);
}

START_TEST(test_disk_slow_image_survives_the_sweep) {
        struct it_daemon d;
        const char *flags[] = {"--state-dir", shm_state,           "--warm", "0", "--max-disk",
                               "16T",         "--disk-overcommit", NULL};
        sbx_client *c;
        double t0;
        int n = 0;

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        t0 = it_now_ms();
        while (it_now_ms() - t0 < 6000 || n < 2) {
                struct sbx_sandbox *sb = create_disk(c, (15ull << 40) - ((uint64_t)n << 30), 0, 0);
                terminate_ok(c, sb->id);
                sbx_sandbox_free(sb);
                n++;
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Terminate while the image is still being made (a 15 TiB one, ~0.5-1 s): the create
 * fails saying the sandbox ended, the terminate answers, and the image that comes after
 * is unmounted and removed with the rest. */
struct bg_create {
        struct it_daemon *d;
        const char *id;
        enum sbx_code code;
        char msg[512];
};

static void *create_in_background(void *arg) {
        struct bg_create *b = arg;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        sbx_client *c = it_connect(b->d);

        sbx_create_opts_init(&o);
        o.id = b->id;
        o.policy.limits.set |= SBX_LIMIT_DISK;
        o.policy.limits.disk_bytes = 15ull << 40;
        b->code = sbx_create(c, &o, &sb);
        snprintf(b->msg, sizeof(b->msg), "%s", b->code ? sbx_error_message(c) : "");
        sbx_sandbox_free(sb);
        sbx_close(c);
        return NULL;
}

START_TEST(test_disk_terminated_while_image_made) {
        struct it_daemon d;
        const char *flags[] = {"--state-dir", shm_state,           "--warm", "0", "--max-disk",
                               "16T",         "--disk-overcommit", NULL};
        struct bg_create b = {.d = &d};
        struct sbx_sandbox *sb = NULL;
        pthread_t th;
        sbx_client *c;
        enum sbx_code code;
        char img[300], id[32];
        pid_t mkfs = -1;
        double t0;
        int attempt, there;

        it_daemon_start(&d, flags);
        snprintf(d.state, sizeof(d.state), "%s", shm_state);
        c = it_connect(&d);
        /* The mke2fs making the image is stopped (our daemon's child) while the terminate
         * comes, and let go after: the terminate comes while the image is being made,
         * however slow the machine. An attempt that finds it done already (it never was
         * on any run seen) is made again with another sandbox. */
        for (attempt = 0; attempt < 5 && mkfs < 0; attempt++) {
                snprintf(id, sizeof(id), "racing-image-%d", attempt);
                b.id = id;
                ck_assert_int_eq(pthread_create(&th, NULL, create_in_background, &b), 0);
                /* Until the daemon has it (creating) ... */
                t0 = it_now_ms();
                while ((code = sbx_get(c, id, &sb)) != SBX_OK && it_now_ms() - t0 < 30000)
                        usleep(2000);
                ck_assert_int_eq(code, SBX_OK);
                ck_assert_int_eq(sb->state, SBX_STATE_CREATING);
                sbx_sandbox_free(sb);
                /* ... and its image is being made: on a loaded machine the create can be
                 * seen before its thread has begun the image, which is not the case
                 * under test. */
                snprintf(img, sizeof(img), "%s/sandboxes/%s/workspace.img", shm_state, id);
                while (access(img, F_OK) != 0 && it_now_ms() - t0 < 30000)
                        usleep(1000);
                ck_assert_msg(access(img, F_OK) == 0, "the image was never begun");
                mkfs = it_find_proc("mke2fs ", shm_state); /* its template's */
                if (mkfs > 0 && kill(mkfs, SIGSTOP) < 0)
                        mkfs = -1;
                if (mkfs < 0) {
                        fprintf(stderr, "it_disk: %s: its image was made already; again\n", id);
                        terminate_ok(c, id);
                        ck_assert_int_eq(pthread_join(th, NULL), 0);
                }
        }
        ck_assert_msg(mkfs > 0, "no mke2fs caught at work in %d attempts", attempt);
        code = sbx_terminate(c, id, &sb);
        /* Ended and answered while its image is still being made (had it been made,
         * the end would have removed it before answering). mke2fs goes on before any
         * check can fail. */
        there = access(img, F_OK) == 0;
        ck_assert_int_eq(kill(mkfs, SIGCONT), 0);
        ck_assert_msg(code == SBX_OK, "terminate: %s", sbx_error_message(c));
        sbx_sandbox_free(sb);
        ck_assert_msg(there, "the image was made before the terminate");
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_msg(b.code != SBX_OK && strstr(b.msg, "could not be created"), "%s: %s",
                      sbx_code_name(b.code), b.msg);
        assert_nothing_left(&d, 30000);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- rootless: a tmpfs ------------------------------------------------------------------ */

START_TEST(test_disk_rootless_tmpfs) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        char msg[512];
        long size = -1;
        int made = -1;
        sbx_client *c;

        it_daemon_start_as(&d, NOBODY, NOBODY, NULL);
        c = it_connect(&d);
        sb = create_disk(c, 4 * MiB, 64, 0);
        ck_assert_str_eq(enforced(sb, "disk"), "tmpfs_size");
        ck_assert(warned(sb, "is a tmpfs of 4194304 bytes (a rootless daemon): what it holds "
                             "is memory"));
        r = sh(c, sb->id,
               "head -c 10M /dev/zero > /workspace/big 2>/dev/null; echo $?; "
               "stat -c %s /workspace/big; stat -f -c %T /workspace");
        ck_assert_msg(sscanf((char *)r->stdout_data, "1\n%ld", &size) == 1, "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(size > 0 && size <= (long)(4 * MiB), "%ld", size);
        ck_assert_msg(strstr((char *)r->stdout_data, "tmpfs"), "%s", (char *)r->stdout_data);
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        r = sh(c, sb->id,
               "rm /workspace/big; cd /workspace; i=0; while [ $i -lt 200 ] && touch f$i "
               "2>/dev/null; do i=$((i+1)); done; echo $i");
        ck_assert_int_eq(sscanf((char *)r->stdout_data, "%d", &made), 1);
        ck_assert_msg(made >= 60 && made <= 64, "%d files with disk_inodes 64", made);
        sbx_result_free(r);
        /* The workspace is the commands' user's. */
        r = sh(c, sb->id, "rm /workspace/f*; mkdir /workspace/d && echo ok");
        ck_assert_str_eq((char *)r->stdout_data, "ok\n");
        sbx_result_free(r);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        /* A tmpfs ends with its sandbox: keep_workspace cannot be honoured. */
        ck_assert_int_eq(create_refused(c, 4 * MiB, 0, 1, msg, sizeof(msg)), SBX_INVALID_ARGUMENT);
        ck_assert_msg(strstr(msg, "keep_workspace"), "%s", msg);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* --disk-via tmpfs as root (as on a host without loop devices): init's tmpfs, owned by
 * the sandbox's user, also for a warm sandbox made ahead with --default-disk and then
 * claimed (its tmpfs is chowned to the claimer's uid inside its namespace); a means the
 * host lacks stops sbxd at start-up. */
START_TEST(test_disk_tmpfs_as_root) {
        const char *flags[] = {"--disk-via", "tmpfs", "--default-disk", "4M", "--warm", "1", NULL};
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        char cmd[2000];
        long size = -1;
        sbx_client *c;

        /* The pool counted or claimed here is ended by no mount of another program's. */
        it_private_mounts();
        it_daemon_start(&d, flags);
        c = it_connect(&d);
        /* Once the warm sandbox is made, this create is served by it. */
        ck_assert_int_eq(it_wait_log(&d, ": warm and ready", 1), 1);
        sb = create_disk(c, 0, 0, 0);
        ck_assert_int_eq(it_log_count(&d, ": claimed ~warm-"), 1);
        ck_assert_str_eq(enforced(sb, "disk"), "tmpfs_size");
        ck_assert_uint_eq(sb->policy.limits.disk_bytes, 4 * MiB);
        ck_assert(warned(sb, "what it holds is memory"));
        r = sh(c, sb->id,
               "head -c 10M /dev/zero > /workspace/big 2>/dev/null; echo $?; "
               "stat -c %s /workspace/big; stat -f -c %T /workspace; "
               "[ \"$(stat -c %u /workspace)\" = \"$(id -u)\" ] && echo mine");
        ck_assert_msg(sscanf((char *)r->stdout_data, "1\n%ld", &size) == 1, "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(size > 0 && size <= (long)(4 * MiB), "%ld", size);
        ck_assert_msg(strstr((char *)r->stdout_data, "tmpfs\nmine\n"), "%s",
                      (char *)r->stdout_data);
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        r = sh(c, sb->id, "rm /workspace/big");
        sbx_result_free(r);
        fill_named_every_time(c, sb->id, 5);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        /* Nothing on the host: the tmpfs was the sandbox's own. */
        ck_assert_int_eq(mounts_below(&d), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);

        /* A means this host does not have: sbxd says so and exits. */
        snprintf(cmd, sizeof(cmd),
                 "timeout 20 %s/sbxd --socket '%s/q.sock' --state-dir '%s/q' --disk-via quota "
                 "2>'%s/q.err'",
                 it_build_dir(), it_base_dir(), it_base_dir(), it_base_dir());
        ck_assert_int_ne(system(cmd), 0);
        snprintf(cmd, sizeof(cmd), "grep -q 'disk-via: this host cannot' '%s/q.err'",
                 it_base_dir());
        ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- a project quota (ext4 with the project feature, mounted prjquota) ---------------- */

static char prj_mnt[700];

/* The state directory's filesystem: an ext4 image with project quotas, loop-mounted
 * with prjquota below the test's base directory. 0, or -1 when this host cannot (no
 * quota support in its kernel: then the test says so and passes). */
static int mount_prjquota(void) {
        char cmd[4000];

        snprintf(prj_mnt, sizeof(prj_mnt), "%s/prj", it_base_dir());
        snprintf(cmd, sizeof(cmd),
                 "truncate -s 256M '%s.img' && mkfs.ext4 -q -O quota,project '%s.img' && "
                 "mkdir '%s' && mount -o loop,prjquota '%s.img' '%s' 2>/dev/null",
                 prj_mnt, prj_mnt, prj_mnt, prj_mnt, prj_mnt);
        if (system(cmd) == 0)
                return 0;
        prj_mnt[0] = '\0';
        ck_assert_msg(!getenv("SBX_REQUIRE_PRJQUOTA"),
                      "cannot mount ext4 with prjquota here (SBX_REQUIRE_PRJQUOTA is set)");
        fprintf(stderr, "*** SKIPPED: project_quota: this kernel cannot mount ext4 with "
                        "prjquota (CONFIG_QUOTA) ***\n");
        return -1;
}

static void prjquota_teardown(void) {
        char cmd[800];

        if (prj_mnt[0]) {
                snprintf(cmd, sizeof(cmd), "umount -l '%s' 2>/dev/null", prj_mnt);
                (void)!system(cmd);
        }
        it_fixture_teardown();
}

START_TEST(test_disk_project_quota) {
        struct it_daemon d;
        struct sbx_sandbox *sb;
        struct sbx_result *r;
        char state[sizeof(d.state)];
        const char *flags[] = {"--state-dir", state, NULL};
        long size = -1;
        int made = -1;
        sbx_client *c;

        if (mount_prjquota() < 0)
                return;
        ck_assert_uint_lt(strlen(prj_mnt) + 7, sizeof(state));
        snprintf(state, sizeof(state), "%.590s/state", prj_mnt);
        it_daemon_start(&d, flags);
        snprintf(d.state, sizeof(d.state), "%s", state);
        c = it_connect(&d);
        sb = create_disk(c, 8 * MiB, 50, 0);
        ck_assert_str_eq(enforced(sb, "disk"), "project_quota");
        r = sh(c, sb->id,
               "head -c 20M /dev/zero > /workspace/big 2>/tmp/err; echo $?; "
               "stat -c %s /workspace/big; cat /tmp/err");
        ck_assert_msg(sscanf((char *)r->stdout_data, "1\n%ld", &size) == 1, "%s",
                      (char *)r->stdout_data);
        ck_assert_msg(size > 0 && size <= (long)(8 * MiB), "%ld", size);
        ck_assert_msg(strstr((char *)r->stdout_data, "Disk quota exceeded"), "%s",
                      (char *)r->stdout_data);
        ck_assert(has_hit(r, "disk"));
        sbx_result_free(r);
        r = sh(c, sb->id,
               "rm /workspace/big; cd /workspace; i=0; while [ $i -lt 200 ] && touch f$i "
               "2>/dev/null; do i=$((i+1)); done; echo $i; "
               "chattr -P +A f1 2>/dev/null && echo chattr-worked");
        ck_assert_int_eq(sscanf((char *)r->stdout_data, "%d", &made), 1);
        ck_assert_msg(made == 50, "%d files with disk_inodes 50", made);
        /* The project id and its inherit flag cannot be changed from inside. */
        ck_assert_ptr_null(strstr((char *)r->stdout_data, "chattr-worked"));
        sbx_result_free(r);
        r = sh(c, sb->id, "rm -f /workspace/f*");
        sbx_result_free(r);
        fill_named_every_time(c, sb->id, 5);
        terminate_ok(c, sb->id);
        sbx_sandbox_free(sb);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static TCase *add(Suite *s, const char *name, const TTest *test) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, test);
        suite_add_tcase(s, tc);
        return tc;
}

static Suite *make_suite(void) {
        Suite *s = suite_create("disk");

        add(s, "enospc", test_disk_enospc);
        add(s, "full_named_every_time", test_disk_full_named_every_time);
        add(s, "inodes", test_disk_inodes);
        add(s, "write_file", test_disk_write_file);
        add(s, "default", test_disk_default);
        add(s, "bad_values", test_disk_bad_values);
        add(s, "more_than_free", test_disk_more_than_free);
        add(s, "release_off_the_loop", test_disk_release_off_the_loop);
        add(s, "cli", test_disk_cli);
        add(s, "cleanup", test_disk_cleanup);
        add(s, "spare_holds_no_image", test_disk_spare_holds_no_image);
        add(s, "default_warm_claimed", test_disk_default_warm_claimed);
        add(s, "keep_workspace", test_disk_keep_workspace);
        add(s, "image_named_opaquely", test_disk_image_named_opaquely);
        add(s, "older_image_names", test_disk_older_image_names);
        add(s, "readopted", test_disk_readopted);
        add(s, "crash_cleaned", test_disk_crash_cleaned);
        add(s, "rootless_tmpfs", test_disk_rootless_tmpfs);
        add(s, "tmpfs_as_root", test_disk_tmpfs_as_root);
        {
                TCase *tc = tcase_create("slow_image_survives_the_sweep");
                tcase_add_unchecked_fixture(tc, shm_setup, shm_teardown);
                tcase_set_timeout(tc, 90);
                tcase_add_test(tc, test_disk_slow_image_survives_the_sweep);
                suite_add_tcase(s, tc);
                tc = tcase_create("terminated_while_image_made");
                tcase_add_unchecked_fixture(tc, shm_setup, shm_teardown);
                tcase_set_timeout(tc, 90);
                tcase_add_test(tc, test_disk_terminated_while_image_made);
                suite_add_tcase(s, tc);
        }
        {
                TCase *tc = tcase_create("project_quota");
                tcase_add_unchecked_fixture(tc, it_fixture_setup, prjquota_teardown);
                tcase_set_timeout(tc, 90);
                tcase_add_test(tc, test_disk_project_quota);
                suite_add_tcase(s, tc);
        }
        return s;
}

SBX_TEST_MAIN(make_suite)
