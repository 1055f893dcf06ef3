/* check_socks5.c: the SOCKS5 messages of the egress proxy (daemon/socks5.c): greetings,
 * CONNECT requests of each address type, every refusal, bytes arriving one at a time. */
#include <errno.h>
#include <string.h>

#include "socks5.h"
#include "testutil.h"

START_TEST(greetings) {
        static const uint8_t ok[] = {5, 2, 2, 0};
        static const uint8_t auth_only[] = {5, 1, 2};
        static const uint8_t v4[] = {4, 1, 0};
        static const uint8_t none[] = {5, 0};
        int no_auth = -1;

        for (size_t n = 0; n < sizeof(ok); n++)
                ck_assert_int_eq(socks5_greeting(ok, n, &no_auth), 0);
        ck_assert_int_eq(socks5_greeting(ok, sizeof(ok), &no_auth), 4);
        ck_assert_int_eq(no_auth, 1);
        ck_assert_int_eq(socks5_greeting(auth_only, sizeof(auth_only), &no_auth), 3);
        ck_assert_int_eq(no_auth, 0);
        ck_assert_int_eq(socks5_greeting(v4, 1, &no_auth), -EPROTO);
        ck_assert_int_eq(socks5_greeting(none, sizeof(none), &no_auth), -EPROTO);
}
END_TEST

START_TEST(requests) {
        static const uint8_t name[] = {5,   1,   0,   3,   8,   'p', 'y', 'p',
                                       'i', '.', 'o', 'r', 'g', 1,   187};
        static const uint8_t ip4[] = {5, 1, 0, 1, 203, 0, 113, 10, 0, 80};
        static const uint8_t ip6[] = {5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0,
                                      0, 0, 0, 0, 0,    0,    0,    0,    1, 0, 22};
        char host[256];
        unsigned port = 0;
        uint8_t rep = 0xee;

        for (size_t n = 0; n < sizeof(name); n++)
                ck_assert_int_eq(socks5_request(name, n, host, sizeof(host), &port, &rep), 0);
        ck_assert_int_eq(socks5_request(name, sizeof(name), host, sizeof(host), &port, &rep),
                         (int)sizeof(name));
        ck_assert_str_eq(host, "pypi.org");
        ck_assert_uint_eq(port, 443);
        ck_assert_int_eq(socks5_request(ip4, sizeof(ip4), host, sizeof(host), &port, &rep), 10);
        ck_assert_str_eq(host, "203.0.113.10");
        ck_assert_uint_eq(port, 80);
        ck_assert_int_eq(socks5_request(ip6, sizeof(ip6), host, sizeof(host), &port, &rep), 22);
        ck_assert_str_eq(host, "2001:db8::1");
        ck_assert_uint_eq(port, 22);
}
END_TEST

START_TEST(refusals) {
        static const uint8_t udp[] = {5, 3, 0, 1, 8, 8, 8, 8, 0, 53};
        static const uint8_t bind_[] = {5, 2, 0, 1, 8, 8, 8, 8, 0, 53};
        static const uint8_t atyp[] = {5, 1, 0, 9, 1, 2, 3, 4, 0, 80};
        static const uint8_t empty[] = {5, 1, 0, 3, 0, 0, 80};
        static const uint8_t nul[] = {5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80};
        static const uint8_t port0[] = {5, 1, 0, 1, 1, 2, 3, 4, 0, 0};
        static const uint8_t rsv[] = {5, 1, 7, 1, 1, 2, 3, 4, 0, 80};
        char host[256];
        unsigned port;
        uint8_t rep, out[SOCKS5_REPLY_BYTES];

        ck_assert_int_eq(socks5_request(udp, sizeof(udp), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_BAD_COMMAND);
        ck_assert_int_eq(socks5_request(bind_, sizeof(bind_), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_BAD_COMMAND);
        ck_assert_int_eq(socks5_request(atyp, sizeof(atyp), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_BAD_ADDRESS);
        ck_assert_int_eq(socks5_request(empty, sizeof(empty), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_int_eq(socks5_request(nul, sizeof(nul), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_BAD_ADDRESS);
        ck_assert_int_eq(socks5_request(port0, sizeof(port0), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_NOT_ALLOWED);
        ck_assert_int_eq(socks5_request(rsv, sizeof(rsv), host, sizeof(host), &port, &rep),
                         -EPROTO);
        ck_assert_uint_eq(rep, SOCKS5_FAILURE);
        /* A name longer than the caller's buffer. */
        {
                uint8_t big[4 + 1 + 255 + 2] = {5, 1, 0, 3, 255};
                memset(big + 5, 'a', 255);
                ck_assert_int_eq(socks5_request(big, sizeof(big), host, 100, &port, &rep), -EPROTO);
                ck_assert_uint_eq(rep, SOCKS5_BAD_ADDRESS);
        }
        socks5_reply(SOCKS5_NOT_ALLOWED, out);
        ck_assert_uint_eq(out[0], 5);
        ck_assert_uint_eq(out[1], SOCKS5_NOT_ALLOWED);
        ck_assert_uint_eq(out[3], 1);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("socks5");
        TCase *tc = tcase_create("socks5");
        tcase_set_timeout(tc, 10);
        tcase_add_test(tc, greetings);
        tcase_add_test(tc, requests);
        tcase_add_test(tc, refusals);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
