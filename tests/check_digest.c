/* check_digest.c: the Check suite of daemon/digest.c: SHA-256 digests in the OCI form,
 * against the standard's test vectors, streamed or whole, and the parser that keeps any
 * digest a client or a registry sends from naming a path outside the store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "testutil.h"

/* FIPS 180-2's vectors. */
#define EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MILLION_A "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

START_TEST(known_vectors) {
        char out[DIGEST_STR_BYTES];

        ck_assert_int_eq(digest_buf("", 0, out), 0);
        ck_assert_str_eq(out, EMPTY);
        ck_assert_int_eq(digest_buf("abc", 3, out), 0);
        ck_assert_str_eq(out, ABC);
}
END_TEST

START_TEST(streamed_equals_whole) {
        char a[1000], out[DIGEST_STR_BYTES];
        struct digest d;
        int i;

        memset(a, 'a', sizeof(a));
        ck_assert_int_eq(digest_init(&d), 0);
        for (i = 0; i < 1000; i++)
                ck_assert_int_eq(digest_update(&d, a, sizeof(a)), 0);
        ck_assert_uint_eq(d.bytes, 1000000);
        ck_assert_int_eq(digest_final(&d, out), 0);
        ck_assert_str_eq(out, MILLION_A);
        ck_assert_ptr_null(d.ctx);
        digest_free(&d); /* twice: harmless */
        ck_assert_int_eq(digest_update(&d, a, 1), -EINVAL);
}
END_TEST

START_TEST(of_a_file) {
        char path[] = "/tmp/check_digest.XXXXXX", out[DIGEST_STR_BYTES], a[4096];
        uint64_t n = 0;
        int fd = mkstemp(path), i;

        ck_assert_int_ge(fd, 0);
        unlink(path);
        memset(a, 'a', sizeof(a));
        for (i = 0; i < 244; i++)
                ck_assert_int_eq(write(fd, a, sizeof(a)), (ssize_t)sizeof(a));
        ck_assert_int_eq(write(fd, a, 576), 576); /* 244 * 4096 + 576 = 1,000,000 */
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        ck_assert_int_eq(digest_fd(fd, out, &n), 0);
        ck_assert_str_eq(out, MILLION_A);
        ck_assert_uint_eq(n, 1000000);
        close(fd);
        ck_assert_int_eq(digest_fd(fd, out, NULL), -EBADF);
}
END_TEST

START_TEST(parse_accepts_only_the_canonical_form) {
        const char *hex = NULL;
        static const char *const bad[] = {
                "",
                "sha256:",
                "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "SHA256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555",
                "sha256:../../../../etc/passwd/fc1c149afbf4c8996fb92427ae41e4649b934ca4",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85/",
                " sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        };
        size_t i;

        ck_assert_int_eq(digest_parse(EMPTY, &hex), 1);
        ck_assert_ptr_eq(hex, EMPTY + 7);
        ck_assert_int_eq(digest_parse(ABC, NULL), 1);
        ck_assert_int_eq(digest_parse(NULL, NULL), 0);
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(digest_parse(bad[i], NULL) == 0, "accepted '%s'", bad[i]);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("digest");
        TCase *tc = tcase_create("digest");

        tcase_add_test(tc, known_vectors);
        tcase_add_test(tc, streamed_equals_whole);
        tcase_add_test(tc, of_a_file);
        tcase_add_test(tc, parse_accepts_only_the_canonical_form);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
