/* check_pbjson.c: the Check suite of daemon/pbjson.c: a protobuf-c message as JSON, on
 * sbxd's own messages: names, enums by name, nested and repeated fields, 64-bit values,
 * bytes, and what is left out (unset optional fields). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "sbx.pb-c.h"
#include "testutil.h"

/* m as compact JSON with sorted keys (freed by the caller). */
static char *dump(const ProtobufCMessage *m) {
        json_t *o = pbjson_of(m);
        char *s;

        ck_assert_ptr_nonnull(o);
        s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        ck_assert_ptr_nonnull(s);
        return s;
}

START_TEST(a_policy) {
        Sbx__V1__Policy p = SBX__V1__POLICY__INIT;
        Sbx__V1__Limits l = SBX__V1__LIMITS__INIT;
        char *paths[] = {"/home/a/project", "/srv/data"}, *s;

        p.n_writable_paths = 2;
        p.writable_paths = paths;
        p.has_network = 1;
        p.network = SBX__V1__NETWORK_MODE__NETWORK_ALLOWLIST;
        p.has_protect_defaults = 1;
        p.protect_defaults = 0;
        l.has_memory_bytes = 1;
        l.memory_bytes = UINT64_C(1) << 40;
        l.has_cpu_seconds = 1;
        l.cpu_seconds = 1.5;
        p.limits = &l;
        s = dump(&p.base);
        ck_assert_str_eq(s, "{\"limits\":{\"cpu_seconds\":1.5,\"memory_bytes\":1099511627776},"
                            "\"network\":\"NETWORK_ALLOWLIST\",\"protect_defaults\":false,"
                            "\"writable_paths\":[\"/home/a/project\",\"/srv/data\"]}");
        free(s);
}
END_TEST

/* Nothing set: an empty object (the defaults are not written out). */
START_TEST(nothing_set) {
        Sbx__V1__Policy p = SBX__V1__POLICY__INIT;
        char *s = dump(&p.base);

        ck_assert_str_eq(s, "{}");
        free(s);
}
END_TEST

/* Repeated numbers and messages, and bytes as hex. */
START_TEST(repeated_and_bytes) {
        Sbx__V1__CreateSandbox c = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__Label a = SBX__V1__LABEL__INIT, b = SBX__V1__LABEL__INIT;
        Sbx__V1__Label *labels[] = {&a, &b};
        Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
        uint32_t uids[] = {1000, 4294967295u};
        uint8_t data[] = {0x00, 0xab, 0xff};
        char *s;

        a.key = "k";
        a.value = "v";
        b.key = "x";
        c.n_labels = 2;
        c.labels = labels;
        c.n_share_uids = 2;
        c.share_uids = uids;
        c.has_timeout_ms = 1;
        c.timeout_ms = UINT64_MAX; /* past JSON's int64: clamped */
        s = dump(&c.base);
        ck_assert_str_eq(s, "{\"labels\":[{\"key\":\"k\",\"value\":\"v\"},{\"key\":\"x\"}],"
                            "\"share_uids\":[1000,4294967295],\"timeout_ms\":9223372036854775807}");
        free(s);
        w.has_data = 1;
        w.data.data = data;
        w.data.len = sizeof(data);
        s = dump(&w.base);
        ck_assert_msg(strstr(s, "\"data\":\"00abff\""), "%s", s);
        free(s);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("pbjson");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, a_policy);
        tcase_add_test(tc, nothing_set);
        tcase_add_test(tc, repeated_and_bytes);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
