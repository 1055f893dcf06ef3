/* imgtest.h: what the suites of sandboxes made from images share (it_image_sandbox.c,
 * it_image_attacks.c, it_image_warm_attacks.c): tests/mkimage.sh's image made in the
 * case's directory, imported from its OCI layout, a sandbox made from one, a command's
 * output there, the entries of a directory. Static functions, one copy per program
 * (those a program may leave unused are marked so). */
#ifndef SBX_TESTS_IMGTEST_H
#define SBX_TESTS_IMGTEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "itutil.h"
#include "sbx.h"

/* Imports tag of the OCI layout (oci:LAYOUT:TAG) on c; returns the image's digest
 * (freed by the caller). Fails the test when the pull does. */
static char *img_pull(sbx_client *c, const char *layout, const char *tag) {
        struct sbx_image *img = NULL;
        char source[800], *digest;

        snprintf(source, sizeof(source), "oci:%s:%s", layout, tag);
        ck_assert_msg(sbx_image_pull(c, source, NULL, &img) == SBX_OK, "pull %s: %s", source,
                      sbx_error_message(c));
        digest = strdup(img->digest);
        sbx_image_free(img);
        return digest;
}

/* A sandbox from image, with the writable path w (NULL: none); its code, and *ret_id
 * (freed by the caller) on success. */
static enum sbx_code img_create(sbx_client *c, const char *image, const char *w,
                                char **ret_id) {
        const char *paths[1] = {w}; /* the policy points at it until sbx_create returns */
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        enum sbx_code rc;

        sbx_create_opts_init(&o);
        o.image = image;
        if (w)
                sbx_policy_workspace_write(&o.policy, paths, 1, SBX_NETWORK_NONE);
        rc = sbx_create(c, &o, &s);
        if (rc == SBX_OK) {
                *ret_id = strdup(s->id);
                sbx_sandbox_free(s);
        }
        return rc;
}

#define IMG_MAYBE_UNUSED __attribute__((unused))

/* The entries of dir but . and .. (-1: cannot read it). */
IMG_MAYBE_UNUSED static int img_entries(const char *dir) {
        struct dirent *e;
        DIR *d = opendir(dir);
        int n = 0;

        if (!d)
                return -1;
        while ((e = readdir(d)))
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        closedir(d);
        return n;
}


/* Run as root in a sandbox with a disk limit of 20 MiB: 30 MiB into the root stop near
 * 20, then the workspace has no room ("capped\nshared\n"). */
#define IMG_DISK_CAPPED_SHELL                                                                      \
        "busybox dd if=/dev/zero of=/big bs=1M count=30 2>/dev/null; "                             \
        "test $(busybox stat -c %s /big) -lt 21000000 && echo capped; "                            \
        "busybox dd if=/dev/zero of=/workspace/w bs=1M count=4 2>/dev/null; "                      \
        "test $(busybox stat -c %s /workspace/w) -lt 1048576 && echo shared"

/* Makes the test image (tests/mkimage.sh) in the case's directory, readable by everyone
 * (a rootless daemon of nobody's imports it with nobody's rights, BOB pulls it); returns
 * the layout's path. */
IMG_MAYBE_UNUSED static const char *make_image(void) {
        static char layout[700];
        char dir[600], cmd[2000];

        snprintf(dir, sizeof(dir), "%s/img", it_base_dir());
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        snprintf(cmd, sizeof(cmd),
                 "bash tests/mkimage.sh %s >%s/mkimage.log 2>&1 && chmod -R a+rX %s", dir, dir,
                 dir);
        ck_assert_msg(system(cmd) == 0, "mkimage.sh failed: see %s/mkimage.log", dir);
        ck_assert_int_eq(chmod(it_base_dir(), 0755), 0);
        snprintf(layout, sizeof(layout), "%s/oci", dir);
        return layout;
}

/* The stdout of sh -c shell in id as user (NULL: the image's), which must exit 0. */
IMG_MAYBE_UNUSED static char *run_as(sbx_client *c, const char *id, const char *user,
                                     const char *shell) {
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

IMG_MAYBE_UNUSED static void expect_out(sbx_client *c, const char *id, const char *user,
                                        const char *shell, const char *want) {
        char *out = run_as(c, id, user, shell);

        ck_assert_msg(strcmp(out, want) == 0, "%s: '%s', not '%s'", shell, out, want);
        free(out);
}

/* The first id of the sandbox's namespace on the host (its uid_map's second field). */
IMG_MAYBE_UNUSED static unsigned long map_base(sbx_client *c, const char *id) {
        char *out = run_as(c, id, "root", "busybox cat /proc/self/uid_map");
        unsigned long in, base, count;

        ck_assert_int_eq(sscanf(out, "%lu %lu %lu", &in, &base, &count), 3);
        ck_assert_uint_eq(in, 0);
        free(out);
        return base;
}

#endif
