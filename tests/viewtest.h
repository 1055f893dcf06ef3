/* viewtest.h: a sandbox's view without a daemon, for the suites of the modules that
 * work in it (check_files.c, check_fswatch.c): a struct sandbox that is ready, whose root
 * is a directory of the test's, whose user is nobody, hiding the paths given. Static
 * functions, one copy per program. */
#ifndef SBX_TESTS_VIEWTEST_H
#define SBX_TESTS_VIEWTEST_H

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pathset.h"
#include "sandbox_int.h"
#include "sbxd.h"

#define VIEWTEST_NOBODY 65534u

/* Fills *sb (and *core, its daemon: openat2 on) as a ready sandbox whose root is root,
 * hiding hidden (NULL ended, may be NULL); sb. */
__attribute__((unused)) static struct sandbox *
viewtest_up(struct sandbox *sb, struct sbxd *core, const char *root, const char *const *hidden) {
        struct pathset_list l = {0};

        memset(core, 0, sizeof(*core));
        core->features.openat2 = 1;
        memset(sb, 0, sizeof(*sb));
        sb->view.id = "sbx-test";
        sb->view.d = core;
        sb->view.state = SBX__V1__SANDBOX_STATE__READY;
        sb->view.init_pidfd = -1;
        sb->view.root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(sb->view.root_fd, 0);
        sb->view.run_uid = VIEWTEST_NOBODY;
        sb->view.run_gid = VIEWTEST_NOBODY;
        for (size_t i = 0; hidden && hidden[i]; i++)
                ck_assert_ptr_nonnull(pathset_list_add(&l, strdup(hidden[i])));
        sb->view.hidden = pathset_freeze(&l);
        ck_assert_ptr_nonnull(sb->view.hidden);
        return sb;
}

/* Lets go of what viewtest_up made. */
__attribute__((unused)) static void viewtest_down(struct sandbox *sb) {
        close(sb->view.root_fd);
        pathset_unref(sb->view.hidden);
        free(sb->view.files_cache);
        memset(sb, 0, sizeof(*sb));
}

#endif
