/* check_redteam20.c: address classes the egress proxy's rules (daemon/egressrule.c)
 * once called public although no public host has them: a name allowed in
 * allowed_hosts whose DNS answer (or a DNS64 resolver's synthesis) is one of these
 * must not get the daemon to connect there. The IPv6 forms of an IPv4 address that a
 * translator on the host's network would carry to the address inside (NAT64's local-use
 * prefix, SIIT's IPv4-translated form, Teredo), IPv6 discard-only, and IPv4's IETF
 * protocol and benchmarking ranges. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "egressrule.h"
#include "testutil.h"

static int klass(const char *s) {
        struct sockaddr_storage ss;

        ck_assert_msg(egressrule_literal(s, 0, &ss) == 1, "%s is a literal", s);
        return (int)egressrule_classify((const struct sockaddr *)&ss);
}

START_TEST(translated_and_special_forms_are_not_public) {
        static const char *const not_public[] = {
                "64:ff9b:1::a09:909",     /* NAT64 local use (RFC 8215), 10.9.9.9 inside */
                "64:ff9b:1:ffff::7f00:1", /* ... 127.0.0.1 */
                "::ffff:0:a09:909",       /* SIIT IPv4-translated (RFC 2765) */
                "::ffff:0:7f00:1",
                "2001:0:a09:909::1", /* Teredo */
                "100::1",            /* discard-only (RFC 6666) */
                "192.0.0.1",         /* IETF protocol assignments */
                "198.18.0.1",        /* benchmarking (RFC 2544) */
                "198.19.255.254",
        };

        for (size_t i = 0; i < sizeof(not_public) / sizeof(not_public[0]); i++)
                ck_assert_msg(klass(not_public[i]) != EGRESS_PUBLIC, "%s is public", not_public[i]);
        /* Their neighbours stay public. */
        ck_assert_int_eq(klass("64:ff9b:2::1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("2001:db8::1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("2001:4860::1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("198.20.0.1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("192.0.1.1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("203.0.113.10"), EGRESS_PUBLIC);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("redteam20");
        TCase *tc = tcase_create("redteam20");
        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, translated_and_special_forms_are_not_public);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
