/* snaptest.h: what the snapshot suites share (it_snapshot.c, it_snapshot_attacks.c):
 * tests/mkimage.sh's image made in the case's directory, a sandbox made from an image,
 * a shell command run in one, a snapshot taken. Static functions, one copy per program;
 * include after imgtest.h. */
#ifndef SBX_TESTS_SNAPTEST_H
#define SBX_TESTS_SNAPTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"

/* The test image in the case's directory, readable by every user; its layout's path. */
__attribute__((unused)) static const char *make_image(void) {
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

__attribute__((unused)) static char *must_create(sbx_client *c, const char *image) {
        char *id = NULL;

        ck_assert_msg(img_create(c, image, NULL, &id) == SBX_OK, "create from %s: %s", image,
                      sbx_error_message(c));
        return id;
}

/* sh -c shell in id as user (NULL: the image's); its stdout, which must exit 0 (within
 * two minutes). */
__attribute__((unused)) static char *run_as(sbx_client *c, const char *id, const char *user,
                                            const char *shell) {
        const char *argv[] = {"/bin/sh", "-c", shell, NULL};
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
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

__attribute__((unused)) static void expect_out(sbx_client *c, const char *id, const char *user,
                                               const char *shell, const char *want) {
        char *out = run_as(c, id, user, shell);

        ck_assert_msg(strcmp(out, want) == 0, "%s: '%s', not '%s'", shell, out, want);
        free(out);
}

/* A snapshot of id named name (NULL: the default); its digest (freed by the caller). */
__attribute__((unused)) static char *snap(sbx_client *c, const char *id, const char *name) {
        struct sbx_image *img = NULL;
        char *digest;

        ck_assert_msg(sbx_snapshot(c, id, name, &img) == SBX_OK, "snapshot %s: %s", id,
                      sbx_error_message(c));
        digest = strdup(img->digest);
        sbx_image_free(img);
        return digest;
}

#endif
