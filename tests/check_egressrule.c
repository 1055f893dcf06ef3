/* check_egressrule.c: NETWORK_ALLOWLIST's rules (daemon/egressrule.c): host patterns
 * and their normal form, CIDRs, address classes (with the IPv4-mapped, NAT64 and 6to4
 * tricks), IP literals and authorities. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "egressrule.h"
#include "testutil.h"

/* sa from an address literal (port 0). */
static const struct sockaddr *addr(const char *s, struct sockaddr_storage *ss) {
        ck_assert_msg(egressrule_literal(s, 0, ss) == 1, "%s is a literal", s);
        return (const struct sockaddr *)ss;
}

static int klass(const char *s) {
        struct sockaddr_storage ss;
        return (int)egressrule_classify(addr(s, &ss));
}

START_TEST(host_patterns_normalised) {
        char out[EGRESS_PATTERN_MAX_BYTES], err[256];

        ck_assert_int_eq(egressrule_host_normalize("PyPI.Org", out, sizeof(out), err, sizeof(err)),
                         0);
        ck_assert_str_eq(out, "pypi.org");
        ck_assert_int_eq(
                egressrule_host_normalize("*.NPMjs.org:0443", out, sizeof(out), err, sizeof(err)),
                0);
        ck_assert_str_eq(out, "*.npmjs.org:443");
        ck_assert_int_eq(
                egressrule_host_normalize("a_b-c.test", out, sizeof(out), err, sizeof(err)), 0);
}
END_TEST

START_TEST(host_patterns_refused) {
        static const char *const bad[] = {
                "",       "10.0.0.1", "10.0.0.1:80", "[::1]", "::1", "2001:db8::1",
                "a..b",   ".a",       "a.",          "*.",    "*",   "a*.b",
                "*.*.b",  "x:0",      "x:65536",     "x:8o",  "x:",  "sp ace.org",
                "a$.org", "1.2.3",    "host.123"};
        char out[EGRESS_PATTERN_MAX_BYTES], err[256], longname[300], label[70];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(egressrule_host_normalize(bad[i], out, sizeof(out), err,
                                                        sizeof(err)) == -EINVAL,
                              "\"%s\" refused", bad[i]);
        ck_assert_int_eq(egressrule_host_normalize("10.0.0.1", out, sizeof(out), err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "allowed_cidrs"), "%s", err);
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        for (size_t i = 60; i < sizeof(longname) - 1; i += 61)
                longname[i] = '.';
        ck_assert_int_eq(egressrule_host_normalize(longname, out, sizeof(out), err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "253"), "%s", err);
        memset(label, 'b', 64);
        strcpy(label + 64, ".org");
        ck_assert_int_eq(egressrule_host_normalize(label, out, sizeof(out), err, sizeof(err)),
                         -EINVAL);
}
END_TEST

START_TEST(host_matching) {
        char *p[] = {"pypi.org", "*.npmjs.org", "ports.test:8080"};

        ck_assert(egressrule_hosts_allow(p, 3, "pypi.org", 443));
        ck_assert(egressrule_hosts_allow(p, 3, "PYPI.ORG", 80));
        ck_assert(!egressrule_hosts_allow(p, 3, "pypi.org", 8443)); /* 80 and 443 only */
        ck_assert(!egressrule_hosts_allow(p, 3, "files.pypi.org", 443));
        ck_assert(!egressrule_hosts_allow(p, 3, "pypi.org.evil.test", 443));
        ck_assert(egressrule_hosts_allow(p, 3, "registry.npmjs.org", 443));
        ck_assert(egressrule_hosts_allow(p, 3, "a.b.npmjs.org", 443));
        ck_assert(!egressrule_hosts_allow(p, 3, "npmjs.org", 443)); /* not the suffix itself */
        ck_assert(!egressrule_hosts_allow(p, 3, "evilnpmjs.org", 443));
        ck_assert(egressrule_hosts_allow(p, 3, "ports.test", 8080));
        ck_assert(!egressrule_hosts_allow(p, 3, "ports.test", 80));
        ck_assert(!egressrule_hosts_allow(p, 3, "ports.test", 443));
        ck_assert(!egressrule_hosts_allow(p, 3, "a..npmjs.org", 443)); /* not a valid name */
        ck_assert(!egressrule_hosts_allow(p, 0, "pypi.org", 443));
}
END_TEST

START_TEST(cidrs) {
        struct egressrule_cidr c;
        struct sockaddr_storage ss;
        char out[EGRESS_CIDR_MAX_BYTES], err[256];
        char *list[] = {"10.0.0.0/8", "2001:db8::/32", "192.0.2.7/32"};

        ck_assert_int_eq(egressrule_cidr_parse("10.1.2.3/8", &c, err, sizeof(err)), 0);
        egressrule_cidr_format(&c, out, sizeof(out));
        ck_assert_str_eq(out, "10.0.0.0/8"); /* host bits cleared */
        ck_assert_int_eq(egressrule_cidr_parse("10.1.2.3", &c, err, sizeof(err)), 0);
        egressrule_cidr_format(&c, out, sizeof(out));
        ck_assert_str_eq(out, "10.1.2.3/32");
        ck_assert_int_eq(egressrule_cidr_parse("2001:db8::1:2/33", &c, err, sizeof(err)), 0);
        egressrule_cidr_format(&c, out, sizeof(out));
        ck_assert_str_eq(out, "2001:db8::/33");
        ck_assert_int_eq(egressrule_cidr_parse("0.0.0.0/0", &c, err, sizeof(err)), 0);
        ck_assert_int_eq(egressrule_cidr_parse("10.0.0.0/33", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("::/129", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("10.0.0.0/", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("10.0.0.0/-1", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("10.0.0.0/+8", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("10.0.0/8", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("host.test/8", &c, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(egressrule_cidr_parse("", &c, err, sizeof(err)), -EINVAL);
        ck_assert(egressrule_cidrs_cover(list, 3, addr("10.255.0.1", &ss)));
        ck_assert(egressrule_cidrs_cover(list, 3, addr("::ffff:10.0.0.1", &ss))); /* mapped */
        ck_assert(!egressrule_cidrs_cover(list, 3, addr("11.0.0.1", &ss)));
        ck_assert(egressrule_cidrs_cover(list, 3, addr("2001:db8:ffff::1", &ss)));
        ck_assert(!egressrule_cidrs_cover(list, 3, addr("2001:db9::1", &ss)));
        ck_assert(egressrule_cidrs_cover(list, 3, addr("192.0.2.7", &ss)));
        ck_assert(!egressrule_cidrs_cover(list, 3, addr("192.0.2.8", &ss)));
}
END_TEST

START_TEST(address_classes) {
        ck_assert_int_eq(klass("203.0.113.10"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("8.8.8.8"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("2001:db8::1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("10.0.0.1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("172.16.0.1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("172.31.255.255"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("172.32.0.1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("192.168.1.1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("100.64.0.1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("100.127.255.255"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("100.128.0.1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("127.0.0.1"), EGRESS_LOOPBACK);
        ck_assert_int_eq(klass("127.255.0.9"), EGRESS_LOOPBACK);
        ck_assert_int_eq(klass("169.254.169.254"), EGRESS_LINK_LOCAL); /* cloud metadata */
        ck_assert_int_eq(klass("0.0.0.0"), EGRESS_UNSPECIFIED);
        ck_assert_int_eq(klass("224.0.0.1"), EGRESS_MULTICAST);
        ck_assert_int_eq(klass("255.255.255.255"), EGRESS_RESERVED);
        ck_assert_int_eq(klass("::"), EGRESS_UNSPECIFIED);
        ck_assert_int_eq(klass("::1"), EGRESS_LOOPBACK);
        ck_assert_int_eq(klass("fc00::1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("fd12:3456::1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("fe80::1"), EGRESS_LINK_LOCAL);
        ck_assert_int_eq(klass("ff02::1"), EGRESS_MULTICAST);
        /* The IPv4 inside IPv6: mapped, NAT64, 6to4; IPv4-compatible is refused. */
        ck_assert_int_eq(klass("::ffff:10.0.0.1"), EGRESS_PRIVATE);
        ck_assert_int_eq(klass("::ffff:127.0.0.1"), EGRESS_LOOPBACK);
        ck_assert_int_eq(klass("::ffff:203.0.113.1"), EGRESS_PUBLIC);
        ck_assert_int_eq(klass("64:ff9b::a9fe:a9fe"), EGRESS_LINK_LOCAL);
        ck_assert_int_eq(klass("2002:7f00:1::1"), EGRESS_LOOPBACK);
        ck_assert_int_eq(klass("::10.0.0.1"), EGRESS_RESERVED);
        ck_assert_str_eq(egressrule_class_name(EGRESS_PRIVATE), "private");
}
END_TEST

/* Address classes the rules once called public although no public host has them: a name
 * allowed in allowed_hosts whose DNS answer (or a DNS64 resolver's synthesis) is one of
 * these must not get the daemon to connect there. The IPv6 forms of an IPv4 address that a
 * translator on the host's network would carry to the address inside (NAT64's local-use
 * prefix, SIIT's IPv4-translated form, Teredo), IPv6 discard-only, and IPv4's IETF
 * protocol and benchmarking ranges. */
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

START_TEST(literals_and_authorities) {
        struct sockaddr_storage ss;
        char host[256], text[64];
        unsigned port;

        ck_assert_int_eq(egressrule_literal("[2001:db8::1]", 443, &ss), 1);
        ck_assert_int_eq(ss.ss_family, AF_INET6);
        ck_assert_int_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 443);
        egressrule_addr_text((struct sockaddr *)&ss, text, sizeof(text));
        ck_assert_str_eq(text, "2001:db8::1");
        ck_assert_int_eq(egressrule_literal("pypi.org", 443, &ss), 0);
        ck_assert_int_eq(egressrule_literal("2130706433", 80, &ss), 0); /* not inet_aton's */
        ck_assert_int_eq(egressrule_literal("0x7f.1", 80, &ss), 0);
        ck_assert_int_eq(
                egressrule_split_authority("pypi.org:443", 12, host, sizeof(host), &port, 80), 0);
        ck_assert_str_eq(host, "pypi.org");
        ck_assert_uint_eq(port, 443);
        ck_assert_int_eq(egressrule_split_authority("pypi.org", 8, host, sizeof(host), &port, 80),
                         0);
        ck_assert_uint_eq(port, 80);
        ck_assert_int_eq(
                egressrule_split_authority("[::1]:8080", 10, host, sizeof(host), &port, 80), 0);
        ck_assert_str_eq(host, "::1");
        ck_assert_uint_eq(port, 8080);
        ck_assert_int_eq(egressrule_split_authority("::1:80", 6, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_split_authority("a:0", 3, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_split_authority("a:99999", 7, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_split_authority(":80", 3, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_split_authority("[::1", 4, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_split_authority("[::1]x", 6, host, sizeof(host), &port, 80),
                         -EINVAL);
        ck_assert_int_eq(egressrule_name_check("ok.test"), 0);
        ck_assert_int_eq(egressrule_name_check("1.2.3.4"), -EINVAL);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("egressrule");
        TCase *tc = tcase_create("egressrule");
        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, host_patterns_normalised);
        tcase_add_test(tc, host_patterns_refused);
        tcase_add_test(tc, host_matching);
        tcase_add_test(tc, cidrs);
        tcase_add_test(tc, address_classes);
        tcase_add_test(tc, translated_and_special_forms_are_not_public);
        tcase_add_test(tc, literals_and_authorities);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
