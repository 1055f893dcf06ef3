/* check_init_user.c: the composition of the view's /etc/passwd and /etc/group (user.c).
 *
 * The entry comes first, the host's text follows byte for byte, a missing final newline
 * is added (or the next file's entries would run into the last host line), an empty or
 * absent host file leaves the entry alone. What user_install mounts, and what it refuses
 * to copy, is tested against a real daemon in it_workplace.c and it_rootless.c. */
#include <stdlib.h>
#include <string.h>

#include "init/user.h"
#include "testutil.h"

START_TEST(passwd_entry_first) {
        const char host[] = "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1::/:/bin/false\n";
        size_t len = 0;
        char *s = user_compose(true, host, strlen(host), 2100000007, 2100000008, "/bin/bash", &len);

        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "sandbox:x:2100000007:2100000008:sandbox:/workspace:/bin/bash\n"
                            "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1::/:/bin/false\n");
        ck_assert_uint_eq(len, strlen(s));
        free(s);
}
END_TEST

START_TEST(group_entry_first) {
        const char host[] = "root:x:0:";
        size_t len = 0;
        char *s = user_compose(false, host, strlen(host), 0, 0, "/bin/sh", &len);

        ck_assert_ptr_nonnull(s);
        /* The host's last line had no newline: one is added. */
        ck_assert_str_eq(s, "sandbox:x:0:\nroot:x:0:\n");
        ck_assert_uint_eq(len, strlen(s));
        free(s);
}
END_TEST

START_TEST(empty_host_file) {
        size_t len = 0;
        char *s = user_compose(true, "", 0, 5, 6, "/bin/sh", &len);

        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "sandbox:x:5:6:sandbox:/workspace:/bin/sh\n");
        ck_assert_uint_eq(len, strlen(s));
        free(s);
}
END_TEST

START_TEST(host_bytes_kept) {
        /* Whatever the host's file holds (even a NUL) is passed on as it is. */
        const char host[] = {'a', ':', '\0', 'b', '\n'};
        size_t len = 0;
        char *s = user_compose(false, host, sizeof(host), 9, 9, "/bin/sh", &len);

        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(len, strlen("sandbox:x:9:\n") + sizeof(host));
        ck_assert_int_eq(memcmp(s + strlen("sandbox:x:9:\n"), host, sizeof(host)), 0);
        free(s);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("init_user");
        TCase *tc = tcase_create("compose");

        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, passwd_entry_first);
        tcase_add_test(tc, group_entry_first);
        tcase_add_test(tc, empty_host_file);
        tcase_add_test(tc, host_bytes_kept);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
