/* check_imageconfig.c: the Check suite of daemon/imageconfig.c: an image's config read
 * whole, with the fields it may lack, and refused when a field has the wrong type. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "imageconfig.h"
#include "testutil.h"

#define FULL                                                                                       \
        "{\"architecture\":\"arm\",\"variant\":\"v7\",\"os\":\"linux\",\"config\":{"               \
        "\"Env\":[\"PATH=/usr/bin\",\"LANG=C.UTF-8\"],\"Entrypoint\":[\"/bin/sh\",\"-c\"],"        \
        "\"Cmd\":[\"echo hi\"],\"WorkingDir\":\"/srv\",\"User\":\"app:app\"},"                     \
        "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}"

static int parse(const char *json, struct imageconfig *c) {
        return imageconfig_parse(json, strlen(json), c);
}

START_TEST(full_config) {
        struct imageconfig c;

        ck_assert_int_eq(parse(FULL, &c), 0);
        ck_assert_str_eq(c.os, "linux");
        ck_assert_str_eq(c.arch, "arm");
        ck_assert_str_eq(c.variant, "v7");
        ck_assert_uint_eq(c.nenv, 2);
        ck_assert_str_eq(c.env[1], "LANG=C.UTF-8");
        ck_assert_ptr_null(c.env[2]);
        ck_assert_uint_eq(c.nentrypoint, 2);
        ck_assert_str_eq(c.entrypoint[1], "-c");
        ck_assert_uint_eq(c.ncmd, 1);
        ck_assert_str_eq(c.cmd[0], "echo hi");
        ck_assert_str_eq(c.working_dir, "/srv");
        ck_assert_str_eq(c.user, "app:app");
        imageconfig_free(&c);
        ck_assert_ptr_null(c.env);
        imageconfig_free(&c); /* twice, and NULL: harmless */
        imageconfig_free(NULL);
}
END_TEST

START_TEST(fields_may_be_absent_or_null) {
        struct imageconfig c;

        ck_assert_int_eq(parse("{\"architecture\":\"amd64\",\"os\":\"linux\"}", &c), 0);
        ck_assert_ptr_null(c.env);
        ck_assert_uint_eq(c.nenv, 0);
        ck_assert_ptr_null(c.user);
        imageconfig_free(&c);
        ck_assert_int_eq(parse("{\"config\":null}", &c), 0);
        imageconfig_free(&c);
        ck_assert_int_eq(parse("{\"config\":{\"Env\":null,\"Cmd\":null,\"User\":null}}", &c), 0);
        ck_assert_ptr_null(c.cmd);
        imageconfig_free(&c);
}
END_TEST

START_TEST(wrong_types_are_refused) {
        static const char *const bad[] = {
                "not json",
                "[]",
                "{\"config\":[]}",
                "{\"config\":{\"Env\":\"PATH=/bin\"}}",
                "{\"config\":{\"Env\":[\"A=1\",2]}}",
                "{\"config\":{\"Cmd\":{}}}",
                "{\"config\":{\"Entrypoint\":[null]}}",
                "{\"config\":{\"User\":0}}",
                "{\"config\":{\"WorkingDir\":[\"/\"]}}",
                "{\"architecture\":64}",
                "{\"os\":\"linux\",\"os\":\"windows\"}", /* a duplicate key */
        };
        struct imageconfig c;
        size_t i;

        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(parse(bad[i], &c) == -EINVAL, "accepted %s", bad[i]);
                ck_assert_ptr_null(c.env);
                ck_assert_ptr_null(c.os);
        }
}
END_TEST

/* Labels: string values only, sorted by key; none without an object. */
START_TEST(labels_sorted_strings_only) {
        static const char j[] = "{\"config\":{\"Labels\":{\"b\":\"2\",\"a\":\"1\",\"n\":3,"
                                "\"x\":null,\"c\":\"\"}}}";
        static const char none[] = "{\"config\":{\"Labels\":null}}";
        struct imageconfig c;

        ck_assert_int_eq(imageconfig_parse(j, sizeof(j) - 1, &c), 0);
        ck_assert_uint_eq(c.nlabels, 3);
        ck_assert_str_eq(c.label_keys[0], "a");
        ck_assert_str_eq(c.label_values[0], "1");
        ck_assert_str_eq(c.label_keys[1], "b");
        ck_assert_str_eq(c.label_keys[2], "c");
        ck_assert_str_eq(c.label_values[2], "");
        imageconfig_free(&c);
        ck_assert_int_eq(imageconfig_parse(none, strlen(none), &c), 0);
        ck_assert_uint_eq(c.nlabels, 0);
        imageconfig_free(&c);
}
END_TEST

START_TEST(load_from_fd) {
        char path[] = "/tmp/check_imageconfig.XXXXXX";
        struct imageconfig c;
        int fd = mkstemp(path);

        ck_assert_int_ge(fd, 0);
        unlink(path);
        ck_assert_int_eq(write(fd, FULL, strlen(FULL)), (ssize_t)strlen(FULL));
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        ck_assert_int_eq(imageconfig_load(fd, &c), 0);
        ck_assert_str_eq(c.working_dir, "/srv");
        imageconfig_free(&c);
        close(fd);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("imageconfig");
        TCase *tc = tcase_create("imageconfig");

        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, full_config);
        tcase_add_test(tc, fields_may_be_absent_or_null);
        tcase_add_test(tc, wrong_types_are_refused);
        tcase_add_test(tc, labels_sorted_strings_only);
        tcase_add_test(tc, load_from_fd);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
