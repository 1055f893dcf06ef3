/* check_hostsfile.c: the hosts file the allowlist proxy answers names from
 * (daemon/hostsfile.c): hosts(5)'s format (comments, several names a line, IPv4 and
 * IPv6, blanks of either kind, any case), the order of lines, addresses that are no
 * hosts(5) address, and the file read again only when it changed, within its bound. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressrule.h"
#include "hostsfile.h"
#include "testutil.h"

static const char hosts[] = "# The test's hosts\n"
                            "127.0.0.1\tlocalhost\n"
                            "203.0.113.10  web.test   www.test\tWWW2.Test # a comment: x.test\n"
                            "  198.51.100.7 mail.test\n"
                            "2001:db8::5 web.test six.test\n"
                            "#198.51.100.8 gone.test\n"
                            "198.51.100.9 # only.comment.test\n"
                            "fe80::1%eth0 zoned.test\n"
                            "[2001:db8::6] bracket.test\n"
                            "not-an-address bad.test\n"
                            "300.1.2.3 bad.test\n"
                            "198.51.100.10 last.test"; /* no newline at the end */

/* The text of address i of out. */
static const char *text(const struct sockaddr_storage *out, size_t i, char *buf, size_t len) {
        egressrule_addr_text((const struct sockaddr *)&out[i], buf, len);
        return buf;
}

static unsigned port_of(const struct sockaddr_storage *ss) {
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static size_t scan(const char *name, struct sockaddr_storage *out, size_t max) {
        return hostsfile_scan(hosts, sizeof(hosts) - 1, name, 8080, out, max);
}

START_TEST(format_of_hosts5) {
        struct sockaddr_storage out[HOSTSFILE_MAX_ADDRS];
        char b[64];

        ck_assert_uint_eq(scan("localhost", out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "127.0.0.1");
        ck_assert_uint_eq(port_of(&out[0]), 8080);
        /* Aliases, tabs, any case; a name after '#' is no name. */
        ck_assert_uint_eq(scan("www.test", out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "203.0.113.10");
        ck_assert_uint_eq(scan("www2.test", out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_uint_eq(scan("WEB.TEST", out, HOSTSFILE_MAX_ADDRS), 2);
        ck_assert_uint_eq(scan("x.test", out, HOSTSFILE_MAX_ADDRS), 0);
        ck_assert_uint_eq(scan("a", out, HOSTSFILE_MAX_ADDRS), 0);
        ck_assert_uint_eq(scan("", out, HOSTSFILE_MAX_ADDRS), 0);
        /* Leading blanks; the last line without its newline. */
        ck_assert_uint_eq(scan("mail.test", out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "198.51.100.7");
        ck_assert_uint_eq(scan("last.test", out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "198.51.100.10");
        /* Commented out, or only in a comment. */
        ck_assert_uint_eq(scan("gone.test", out, HOSTSFILE_MAX_ADDRS), 0);
        ck_assert_uint_eq(scan("only.comment.test", out, HOSTSFILE_MAX_ADDRS), 0);
}
END_TEST

START_TEST(every_line_in_order_ipv4_and_ipv6) {
        struct sockaddr_storage out[HOSTSFILE_MAX_ADDRS];
        char b[64];

        ck_assert_uint_eq(scan("web.test", out, HOSTSFILE_MAX_ADDRS), 2);
        ck_assert_int_eq(out[0].ss_family, AF_INET);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "203.0.113.10");
        ck_assert_int_eq(out[1].ss_family, AF_INET6);
        ck_assert_str_eq(text(out, 1, b, sizeof(b)), "2001:db8::5");
        ck_assert_uint_eq(port_of(&out[1]), 8080);
        ck_assert_uint_eq(scan("six.test", out, HOSTSFILE_MAX_ADDRS), 1);
        /* At most max. */
        ck_assert_uint_eq(scan("web.test", out, 1), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "203.0.113.10");
        ck_assert_uint_eq(scan("web.test", out, 0), 0);
}
END_TEST

START_TEST(no_hosts5_address_passed_over) {
        struct sockaddr_storage out[HOSTSFILE_MAX_ADDRS];

        ck_assert_uint_eq(scan("zoned.test", out, HOSTSFILE_MAX_ADDRS), 0);
        ck_assert_uint_eq(scan("bracket.test", out, HOSTSFILE_MAX_ADDRS), 0);
        ck_assert_uint_eq(scan("bad.test", out, HOSTSFILE_MAX_ADDRS), 0);
        /* An address longer than any is not copied anywhere. */
        {
                char line[200];
                memset(line, '1', 150);
                snprintf(line + 150, sizeof(line) - 150, " long.test\n");
                ck_assert_uint_eq(hostsfile_scan(line, strlen(line), "long.test", 80, out,
                                                 HOSTSFILE_MAX_ADDRS),
                                  0);
        }
}
END_TEST

static void write_file(const char *path, const char *s) {
        FILE *f = fopen(path, "w");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_ge(fputs(s, f), 0);
        ck_assert_int_eq(fclose(f), 0);
}

START_TEST(read_again_when_changed) {
        char dir[] = "/tmp/check-hostsfile-XXXXXX", path[64], next[64], *big;
        struct sockaddr_storage out[HOSTSFILE_MAX_ADDRS];
        struct hostsfile h = {0};
        char b[64];

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/hosts", dir);
        snprintf(next, sizeof(next), "%s/hosts.new", dir);
        ck_assert_int_eq(hostsfile_refresh(&h, path), -ENOENT);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 0);
        write_file(path, "192.0.2.1 a.test\n");
        ck_assert_int_eq(hostsfile_refresh(&h, path), 0);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "192.0.2.1");
        /* Unchanged: not read again (the text is the same buffer). */
        {
                const char *before = h.text;
                ck_assert_int_eq(hostsfile_refresh(&h, path), 0);
                ck_assert_ptr_eq(h.text, before);
        }
        /* Replaced (as editors and resolvconf do: a new inode), same size. */
        write_file(next, "192.0.2.2 a.test\n");
        ck_assert_int_eq(rename(next, path), 0);
        ck_assert_int_eq(hostsfile_refresh(&h, path), 0);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "192.0.2.2");
        /* Written in place, longer. */
        write_file(path, "192.0.2.3 b.test\n192.0.2.4 a.test\n");
        ck_assert_int_eq(hostsfile_refresh(&h, path), 0);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 1);
        ck_assert_str_eq(text(out, 0, b, sizeof(b)), "192.0.2.4");
        /* Over the bound: not read, no names. */
        big = malloc(HOSTSFILE_MAX_BYTES + 2);
        ck_assert_ptr_nonnull(big);
        memset(big, '#', HOSTSFILE_MAX_BYTES + 1);
        big[HOSTSFILE_MAX_BYTES + 1] = '\0';
        write_file(path, big);
        free(big);
        ck_assert_int_eq(hostsfile_refresh(&h, path), -EFBIG);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 0);
        /* Not a regular file: not opened (a FIFO would hold the loop). */
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        ck_assert_int_eq(hostsfile_refresh(&h, path), -EINVAL);
        ck_assert_uint_eq(hostsfile_find(&h, "a.test", 80, out, HOSTSFILE_MAX_ADDRS), 0);
        hostsfile_clear(&h);
        ck_assert_ptr_null(h.text);
        unlink(path);
        rmdir(dir);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("hostsfile");
        TCase *tc = tcase_create("hostsfile");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, format_of_hosts5);
        tcase_add_test(tc, every_line_in_order_ipv4_and_ipv6);
        tcase_add_test(tc, no_hosts5_address_passed_over);
        tcase_add_test(tc, read_again_when_changed);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
