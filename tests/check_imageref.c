/* check_imageref.c: the Check suite of daemon/imageref.c: references normalised as
 * Docker normalises them (the default registry and "library/", which first component
 * is a host), and bad references refused with a message saying what is wrong. */
#include <errno.h>
#include <string.h>

#include "imageref.h"
#include "testutil.h"

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Parses s and compares its normal form with want (and its API host with api). */
static void expect(const char *s, const char *want, const char *api) {
        struct imageref r;
        char err[256] = "", out[600];

        ck_assert_msg(imageref_parse(s, &r, err, sizeof(err)) == 0, "%s: %s", s, err);
        ck_assert_int_lt(imageref_format(&r, out, sizeof(out)), (int)sizeof(out));
        ck_assert_str_eq(out, want);
        ck_assert_str_eq(r.api_host, api);
}

/* Parses s, expects -EINVAL and a message containing why. */
static void refuse(const char *s, const char *why) {
        struct imageref r;
        char err[512] = "";

        ck_assert_int_eq(imageref_parse(s, &r, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, why), "%s: \"%s\" lacks \"%s\"", s, err, why);
}

START_TEST(docker_hub_defaults) {
        expect("python:3.12-slim", "docker.io/library/python:3.12-slim", "registry-1.docker.io");
        expect("busybox", "docker.io/library/busybox:latest", "registry-1.docker.io");
        expect("user/repo", "docker.io/user/repo:latest", "registry-1.docker.io");
        expect("docker.io/python", "docker.io/library/python:latest", "registry-1.docker.io");
        expect("index.docker.io/user/repo:v1", "docker.io/user/repo:v1", "registry-1.docker.io");
        expect("a/b/c/d:x", "docker.io/a/b/c/d:x", "registry-1.docker.io");
        /* no '/': "localhost" and "localhost:5000" are a name (and a tag) on Docker Hub */
        expect("localhost", "docker.io/library/localhost:latest", "registry-1.docker.io");
        expect("localhost:5000", "docker.io/library/localhost:5000", "registry-1.docker.io");
}
END_TEST

START_TEST(hosts) {
        expect("localhost/name", "localhost/name:latest", "localhost");
        expect("localhost:5000/a/b:t", "localhost:5000/a/b:t", "localhost:5000");
        expect("127.0.0.1:5000/name:tag", "127.0.0.1:5000/name:tag", "127.0.0.1:5000");
        expect("quay.io/org/app", "quay.io/org/app:latest", "quay.io");
        expect("Registry/app", "Registry/app:latest", "Registry"); /* uppercase: a host */
        expect("[::1]:5000/app:1", "[::1]:5000/app:1", "[::1]:5000");
        expect("my-reg.example.com/app", "my-reg.example.com/app:latest", "my-reg.example.com");
        /* a first component without '.', ':' or uppercase is a path, not a host */
        expect("myhost/app", "docker.io/myhost/app:latest", "registry-1.docker.io");
}
END_TEST

START_TEST(digests) {
        struct imageref r;
        char err[256];

        expect("python@sha256:" HEX, "docker.io/library/python@sha256:" HEX,
               "registry-1.docker.io");
        ck_assert_int_eq(imageref_parse("python@sha256:" HEX, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r.tag, ""); /* no "latest" beside a digest */
        expect("h:1/a:v2@sha256:" HEX, "h:1/a:v2@sha256:" HEX, "h:1");
        refuse("python@sha512:" HEX HEX, "only sha256");
        refuse("python@sha256:"
               "ABCDEF",
               "64 lowercase hex");
        refuse("python@sha256:" HEX "0", "64 lowercase hex");
        refuse("python@", "only sha256");
        refuse(HEX, "image id");
}
END_TEST

START_TEST(separators) {
        expect("a_b/c__d/e-f/g--h/i.j:t", "docker.io/a_b/c__d/e-f/g--h/i.j:t",
               "registry-1.docker.io");
        refuse("a___b", "[a-z0-9]");
        refuse("a..b", "[a-z0-9]");
        refuse("-a", "start and end");
        refuse("a-", "start and end");
        refuse("a/", "empty path component");
        refuse("a//b", "empty path component");
        refuse("/a", "empty path component");
        refuse("a b", "[a-z0-9]");
}
END_TEST

START_TEST(lowercase_and_tags) {
        refuse("Python", "lowercase");
        refuse("host.io/Org/app", "lowercase");
        refuse("app:", "empty tag");
        refuse("app:-x", "starts with");
        refuse("app:.x", "starts with");
        refuse("app:a/b", "port"); /* "app:a" has a colon: a registry, with a bad port */
        refuse("app:a$b", "tag holds only");
        expect("app:_A.b-C", "docker.io/library/app:_A.b-C", "registry-1.docker.io");
}
END_TEST

START_TEST(bad_hosts) {
        refuse("host:0/app", "port");
        refuse("host:65536/app", "port");
        refuse("host:12x/app", "port");
        refuse("host:/app", "port");
        refuse("-bad.io/app", "host name");
        refuse("bad-.io/app", "host name");
        refuse("bad..io/app", "host name");
        refuse("bad.io./app", "host name");
        refuse("[::1/app", "IPv6");
        refuse("[zz::1]:5/app", "IPv6");
        refuse("[::1]x/app", "IPv6");
        refuse("bad_host.io/app", "host name");
}
END_TEST

START_TEST(length_bounds) {
        char s[600], want[700];
        struct imageref r;
        char err[256];
        size_t room = IMAGEREF_NAME_MAX - strlen("docker.io/library/");

        refuse("", "empty reference");
        refuse(":tag", "empty repository name");
        /* a name that is exactly 255 bytes once normalised, then one byte more */
        memset(s, 'a', room);
        s[room] = '\0';
        snprintf(want, sizeof(want), "docker.io/library/%s:latest", s);
        expect(s, want, "registry-1.docker.io");
        s[room] = 'a';
        s[room + 1] = '\0';
        refuse(s, "longer than 255");
        memset(s, 'b', 300);
        s[300] = '\0';
        refuse(s, "longer than 255");
        /* a tag of 128 bytes, then 129 */
        memcpy(s, "app:", 4);
        memset(s + 4, 't', 128);
        s[132] = '\0';
        ck_assert_int_eq(imageref_parse(s, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(strlen(r.tag), 128);
        s[132] = 't';
        s[133] = '\0';
        refuse(s, "tag longer than 128");
}
END_TEST

START_TEST(loopback) {
        static const struct {
                const char *s;
                int loop;
        } cases[] = {
                {"localhost/a", 1},
                {"localhost:5000/a", 1},
                {"LOCALHOST:1/a", 1},
                {"127.0.0.1:5000/a", 1},
                {"127.255.1.2/a", 1},
                {"[::1]:5000/a", 1},
                {"a", 0},
                {"10.0.0.1:5000/a", 0},
                {"127.0.0.1.nip.io/a", 0},
                {"[::2]:5000/a", 0},
                {"localhost.example.com/a", 0},
        };
        struct imageref r;
        char err[256];
        size_t i;

        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                ck_assert_msg(imageref_parse(cases[i].s, &r, err, sizeof(err)) == 0, "%s", err);
                ck_assert_msg(imageref_loopback(&r) == cases[i].loop, "%s", cases[i].s);
        }
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("imageref");
        TCase *tc = tcase_create("parse");

        tcase_add_test(tc, docker_hub_defaults);
        tcase_add_test(tc, hosts);
        tcase_add_test(tc, digests);
        tcase_add_test(tc, separators);
        tcase_add_test(tc, lowercase_and_tags);
        tcase_add_test(tc, bad_hosts);
        tcase_add_test(tc, length_bounds);
        tcase_add_test(tc, loopback);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
