/* snaptest.h: what the snapshot suites share (it_snapshot.c, it_snapshot_attacks.c)
 * beyond imgtest.h (the image, a shell command in a sandbox): a sandbox made from an
 * image, a snapshot taken. Static functions, one copy per program. */
#ifndef SBX_TESTS_SNAPTEST_H
#define SBX_TESTS_SNAPTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imgtest.h"
#include "itutil.h"
#include "sbx.h"

__attribute__((unused)) static char *must_create(sbx_client *c, const char *image) {
        char *id = NULL;

        ck_assert_msg(img_create(c, image, NULL, &id) == SBX_OK, "create from %s: %s", image,
                      sbx_error_message(c));
        return id;
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

/* A restore of id from image on a connection of its own (a thread's: restore_thread),
 * its code and message. */
struct racer {
        struct it_daemon *d;
        const char *id, *image;
        enum sbx_code rc;
        char msg[512];
};

__attribute__((unused)) static void *restore_thread(void *arg) {
        struct racer *r = arg;
        sbx_client *c = it_connect(r->d);

        r->rc = sbx_restore(c, r->id, r->image, NULL);
        snprintf(r->msg, sizeof(r->msg), "%s", sbx_error_message(c));
        sbx_close(c);
        return NULL;
}

#endif
