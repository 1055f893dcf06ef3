/* imgtest.h: what the suites of sandboxes made from images share (it_image_sandbox.c,
 * it_image_attacks.c): an image imported from an OCI layout, a sandbox made from one,
 * the entries of a directory. Static functions, one copy per program. */
#ifndef SBX_TESTS_IMGTEST_H
#define SBX_TESTS_IMGTEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The entries of dir but . and .. (-1: cannot read it). */
static int img_entries(const char *dir) {
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

#endif
