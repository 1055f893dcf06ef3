/* check_client_json.c: unit tests of the sbx tool's JSON writer (client/cli_json.c).
 *
 * The writer moved onto jansson; what the --json outputs print must stay the bytes the
 * hand-made writer printed (tests and scripts read them). The expected strings below are
 * that writer's output for the same calls, byte for byte, but for the two spellings
 * cli_json.c documents as changed (upper-case hex in \u escapes, DEL unescaped), which
 * have a test of their own. Each test writes into a memory stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "cli.h"

/* The document the calls of fill() make, as a new string. */
static char *render(void (*fill)(struct json *j)) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct json j;

        ck_assert_ptr_nonnull(f);
        json_init(&j, f);
        fill(&j);
        ck_assert_int_eq(json_finish(&j), 0);
        ck_assert_int_eq(fclose(f), 0);
        return buf;
}

static void fill_scalars(struct json *j) {
        static const char bytes[] = "a\xff"
                                    "b\xe2\x82"
                                    "c\"\\\n\t\r\b\f/\xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf end";
        json_begin_object(j);
        json_key(j, "s");
        json_string(j, "plain");
        json_key(j, "null");
        json_string(j, NULL);
        json_key(j, "bytes");
        json_bytes(j, bytes, sizeof(bytes) - 1);
        json_key(j, "nul");
        json_bytes(j, "a\0b", 3);
        json_key(j, "k\xff");
        json_int(j, -5);
        json_key(j, "u");
        json_uint(j, 18446744073709551ull);
        json_key(j, "b");
        json_bool(j, true);
        json_key(j, "n");
        json_null(j);
        json_key(j, "maybe");
        json_int_or_null(j, 0, 3);
        json_key(j, "some");
        json_int_or_null(j, 1, 3);
        json_key(j, "empty");
        json_begin_object(j);
        json_end_object(j);
        json_key(j, "list");
        json_begin_array(j);
        json_begin_array(j);
        json_end_array(j);
        json_begin_object(j);
        json_key(j, "x");
        json_uint(j, 1);
        json_end_object(j);
        json_end_array(j);
        json_end_object(j);
}

START_TEST(scalars_strings_and_nesting) {
        char *s = render(fill_scalars);
        ck_assert_str_eq(s, "{\"s\":\"plain\",\"null\":null,"
                            "\"bytes\":\"a\xEF\xBF\xBD"
                            "b\xEF\xBF\xBD"
                            "c\\\"\\\\\\n\\t\\r\\b\\f/\xf0\x9f\x98\x80 \xEF\xBF\xBD\xEF\xBF\xBD"
                            "\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD end\","
                            "\"nul\":\"a\\u0000b\",\"k\xEF\xBF\xBD\":-5,\"u\":18446744073709551,"
                            "\"b\":true,\"n\":null,\"maybe\":null,\"some\":3,\"empty\":{},"
                            "\"list\":[[],{\"x\":1}]}\n");
        free(s);
}
END_TEST

static void fill_numbers(struct json *j) {
        static const double ds[] = {0,         -0.0,      1,       1.5,        0.123456789,
                                    12.000001, 3.0000004, 0.0001,  0.00012,    1234567.654321,
                                    86400,     0.5,       2.25,    1e9 + 0.25, NAN,
                                    100.1,     0.001,     0.000999};
        static const int64_t ms[] = {
                0,     1,     999,          1000, 1001, 1700000000123, 1700000000100, 1700000000000,
                -1500, -1000, 4102444800999};
        json_begin_array(j);
        for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++)
                json_double(j, ds[i], 6);
        json_double(j, 2.5, 0);
        json_double(j, 2.123, 2);
        for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
                json_ms_as_secs(j, ms[i]);
        json_end_array(j);
}

START_TEST(numbers_keep_their_decimals) {
        char *s = render(fill_numbers);
        ck_assert_str_eq(s, "[0,0,1,1.5,0.123457,12.000001,3,0.0001,0.00012,1234567.654321,86400,"
                            "0.5,2.25,1000000000.25,null,100.1,0.001,0.000999,2,2.12,0,0.001,0.999,"
                            "1,1.001,1700000000.123,1700000000.1,1700000000,-1.5,-1,"
                            "4102444800.999]\n");
        free(s);
}
END_TEST

static void fill_controls(struct json *j) {
        json_begin_array(j);
        json_string(j, "\x01\x1b\x7f");
        json_end_array(j);
}

/* The two spellings that changed with jansson: equal JSON, other bytes. */
START_TEST(control_characters_as_jansson_writes_them) {
        char *s = render(fill_controls);
        ck_assert_str_eq(s, "[\"\\u0001\\u001B\x7f\"]\n");
        free(s);
}
END_TEST

START_TEST(utf8_helpers) {
        size_t n = 0;
        char *s = cli_utf8_valid("ok\xc3\xa9\xff\xfe", 6, &n);
        ck_assert_str_eq(s, "ok\xc3\xa9\xEF\xBF\xBD\xEF\xBF\xBD");
        ck_assert_uint_eq(n, strlen(s));
        free(s);
        ck_assert_uint_eq(cli_utf8_invalid_bytes("ok\xc3\xa9\xff\xfe", 6), 2);
        ck_assert_uint_eq(cli_utf8_invalid_bytes("\xe2\x82", 2), 2);
        ck_assert_uint_eq(cli_utf8_invalid_bytes("plain", 5), 0);
}
END_TEST

static void fill_two_documents(struct json *j) {
        json_begin_array(j);
        json_end_array(j);
        json_begin_array(j); /* a second document: refused */
        json_end_array(j);
}

START_TEST(misuse_fails_instead_of_printing_bad_json) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct json j;

        json_init(&j, f);
        fill_two_documents(&j);
        ck_assert_int_lt(json_finish(&j), 0);
        json_init(&j, f);
        json_begin_object(&j);
        json_uint(&j, 1); /* a value without its key */
        json_end_object(&j);
        ck_assert_int_lt(json_finish(&j), 0);
        fclose(f);
        ck_assert_uint_eq(len, 0);
        free(buf);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("client_json");
        TCase *tc = tcase_create("writer");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, scalars_strings_and_nesting);
        tcase_add_test(tc, numbers_keep_their_decimals);
        tcase_add_test(tc, control_characters_as_jansson_writes_them);
        tcase_add_test(tc, utf8_helpers);
        tcase_add_test(tc, misuse_fails_instead_of_printing_bad_json);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
