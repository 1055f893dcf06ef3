/* egressrule.c: NETWORK_ALLOWLIST's rules as pure functions (egressrule.h): host
 * patterns, address ranges and address classes. Called by the policy module (to
 * validate and normalise a request) and by the proxy (egress.c, to judge a
 * connection); it owns nothing. */
#include "egressrule.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX_BYTES 63u

static int failf(char *err, size_t errlen, const char *what, const char *in) {
        if (err && errlen)
                snprintf(err, errlen, "allowed host \"%.80s\": %s", in, what);
        return -EINVAL;
}

/* Parses a decimal port 1..65535 of exactly len bytes. 0 or -EINVAL. */
static int parse_port(const char *s, size_t len, unsigned *ret) {
        unsigned long v = 0;
        size_t i;

        if (len == 0 || len > 5)
                return -EINVAL;
        for (i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(s[i] - '0');
        }
        if (v < 1 || v > 65535)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

/* Checks a name of len bytes: labels of [A-Za-z0-9_-], 1..63 bytes, the whole at most
 * 253, the last label not all digits. NULL when good, else why. */
static const char *name_problem(const char *s, size_t len) {
        size_t i, label = 0;
        int last_digits = 1;

        if (len == 0)
                return "empty name";
        if (len > EGRESS_NAME_MAX_BYTES)
                return "longer than 253 bytes";
        for (i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch == '.') {
                        if (label == 0)
                                return "empty label";
                        label = 0;
                        last_digits = 1;
                        continue;
                }
                if (!isalnum(ch) && ch != '-' && ch != '_')
                        return "bad character (letters, digits, '-', '_' and '.' only)";
                if (++label > LABEL_MAX_BYTES)
                        return "a label is longer than 63 bytes";
                if (!isdigit(ch))
                        last_digits = 0;
        }
        if (label == 0)
                return "empty label";
        if (last_digits)
                return "an IP address (use allowed_cidrs)";
        return NULL;
}

int egressrule_name_check(const char *name) {
        return name && !name_problem(name, strlen(name)) ? 0 : -EINVAL;
}

int egressrule_host_normalize(const char *in, char *out, size_t outlen, char *err, size_t errlen) {
        const char *name = in, *colon;
        size_t len, i, n;
        unsigned port = 0;
        const char *why;
        struct sockaddr_storage ss;
        int wild = 0;

        if (!in || !in[0])
                return failf(err, errlen, "empty", "");
        if (in[0] == '[' || egressrule_literal(in, 0, &ss))
                return failf(err, errlen, "an IP address (use allowed_cidrs)", in);
        colon = strchr(in, ':');
        if (colon && strchr(colon + 1, ':'))
                return failf(err, errlen, "an IP address (use allowed_cidrs)", in);
        len = colon ? (size_t)(colon - in) : strlen(in);
        if (colon && parse_port(colon + 1, strlen(colon + 1), &port) < 0)
                return failf(err, errlen, "the port must be 1..65535", in);
        if (len >= 2 && name[0] == '*' && name[1] == '.') {
                wild = 1;
                name += 2;
                len -= 2;
        }
        if (memchr(name, '*', len))
                return failf(err, errlen, "'*' only as a whole first label (\"*.example.org\")",
                             in);
        why = name_problem(name, len);
        if (why)
                return failf(err, errlen, why, in);
        n = (size_t)snprintf(out, outlen, "%s", wild ? "*." : "");
        if (n + len + 8 > outlen)
                return failf(err, errlen, "too long", in);
        for (i = 0; i < len; i++)
                out[n + i] = (char)tolower((unsigned char)name[i]);
        n += len;
        out[n] = '\0';
        if (port)
                snprintf(out + n, outlen - n, ":%u", port);
        return 0;
}

/* One pattern of egressrule_hosts_allow. */
static int host_match(const char *pattern, const char *host, unsigned port) {
        const char *colon = strchr(pattern, ':');
        size_t plen = colon ? (size_t)(colon - pattern) : strlen(pattern);
        size_t hlen = strlen(host);
        unsigned want = 0;

        if (colon && parse_port(colon + 1, strlen(colon + 1), &want) < 0)
                return 0;
        if (want ? port != want : port != 80 && port != 443)
                return 0;
        if (plen >= 2 && pattern[0] == '*' && pattern[1] == '.') {
                /* ".suffix" at the end of host, with a label before it. */
                size_t slen = plen - 1;
                return hlen > slen && strncasecmp(host + hlen - slen, pattern + 1, slen) == 0;
        }
        return hlen == plen && strncasecmp(host, pattern, plen) == 0;
}

int egressrule_hosts_allow(char *const *patterns, size_t n, const char *host, unsigned port) {
        size_t i;

        if (egressrule_name_check(host) < 0)
                return 0;
        for (i = 0; i < n; i++)
                if (host_match(patterns[i], host, port))
                        return 1;
        return 0;
}

/* ---- ranges ------------------------------------------------------------------------- */

static void clear_host_bits(uint8_t *a, unsigned bytes, unsigned prefix) {
        unsigned i;

        for (i = 0; i < bytes; i++) {
                unsigned lo = i * 8;
                if (prefix >= lo + 8)
                        continue;
                a[i] &= prefix <= lo ? 0 : (uint8_t)(0xff << (8 - (prefix - lo)));
        }
}

int egressrule_cidr_parse(const char *in, struct egressrule_cidr *ret, char *err, size_t errlen) {
        char addr[INET6_ADDRSTRLEN + 1];
        const char *slash;
        size_t alen;
        unsigned prefix, max;
        struct egressrule_cidr c;

        memset(&c, 0, sizeof(c));
        slash = in ? strchr(in, '/') : NULL;
        alen = in ? (slash ? (size_t)(slash - in) : strlen(in)) : 0;
        if (alen == 0 || alen >= sizeof(addr))
                goto bad;
        memcpy(addr, in, alen);
        addr[alen] = '\0';
        if (inet_pton(AF_INET, addr, c.addr) == 1)
                c.family = AF_INET;
        else if (inet_pton(AF_INET6, addr, c.addr) == 1)
                c.family = AF_INET6;
        else
                goto bad;
        max = c.family == AF_INET ? 32 : 128;
        prefix = max;
        if (slash) {
                unsigned long v = 0;
                const char *p = slash + 1;
                if (!*p || strlen(p) > 3)
                        goto bad_prefix;
                for (; *p; p++) {
                        if (*p < '0' || *p > '9')
                                goto bad_prefix;
                        v = v * 10 + (unsigned long)(*p - '0');
                }
                if (v > max)
                        goto bad_prefix;
                prefix = (unsigned)v;
        }
        c.prefix = prefix;
        clear_host_bits(c.addr, max / 8, prefix);
        *ret = c;
        return 0;
bad_prefix:
        if (err && errlen)
                snprintf(err, errlen, "allowed CIDR \"%.80s\": the prefix must be 0..%u", in,
                         addr[0] && strchr(addr, ':') ? 128 : 32);
        return -EINVAL;
bad:
        if (err && errlen)
                snprintf(err, errlen,
                         "allowed CIDR \"%.80s\": not an IPv4 or IPv6 address[/prefix]",
                         in ? in : "");
        return -EINVAL;
}

void egressrule_cidr_format(const struct egressrule_cidr *c, char *out, size_t len) {
        char a[INET6_ADDRSTRLEN];

        if (!inet_ntop(c->family, c->addr, a, sizeof(a)))
                a[0] = '\0';
        snprintf(out, len, "%s/%u", a, c->prefix);
}

/* The address of sa as family and bytes; an IPv4-mapped IPv6 address becomes IPv4.
 * 0 or -EAFNOSUPPORT. */
static int addr_of(const struct sockaddr *sa, int *family, uint8_t *a) {
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

        if (sa->sa_family == AF_INET) {
                memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
                *family = AF_INET;
                return 0;
        }
        if (sa->sa_family != AF_INET6)
                return -EAFNOSUPPORT;
        memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        *family = AF_INET6;
        if (memcmp(a, mapped, 12) == 0) {
                memmove(a, a + 12, 4);
                *family = AF_INET;
        }
        return 0;
}

static int covers(const struct egressrule_cidr *c, int family, const uint8_t *a) {
        uint8_t masked[16];
        unsigned bytes = family == AF_INET ? 4 : 16;

        if (c->family != family)
                return 0;
        memcpy(masked, a, bytes);
        clear_host_bits(masked, bytes, c->prefix);
        return memcmp(masked, c->addr, bytes) == 0;
}

int egressrule_cidrs_cover(char *const *cidrs, size_t n, const struct sockaddr *sa) {
        uint8_t a[16];
        int family;
        size_t i;

        if (addr_of(sa, &family, a) < 0)
                return 0;
        for (i = 0; i < n; i++) {
                struct egressrule_cidr c;
                if (egressrule_cidr_parse(cidrs[i], &c, NULL, 0) == 0 && covers(&c, family, a))
                        return 1;
        }
        return 0;
}

/* ---- classes ------------------------------------------------------------------------ */

static enum egressrule_class classify4(const uint8_t *a) {
        if (a[0] == 0)
                return EGRESS_UNSPECIFIED;
        if ((a[0] == 192 && a[1] == 0 && a[2] == 0) || (a[0] == 198 && (a[1] & 0xfe) == 18))
                return EGRESS_RESERVED; /* IETF protocol assignments, benchmarking */
        if (a[0] == 127)
                return EGRESS_LOOPBACK;
        if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
            (a[0] == 100 && (a[1] & 0xc0) == 64))
                return EGRESS_PRIVATE;
        if (a[0] == 169 && a[1] == 254)
                return EGRESS_LINK_LOCAL;
        if ((a[0] & 0xf0) == 224)
                return EGRESS_MULTICAST;
        if ((a[0] & 0xf0) == 240)
                return EGRESS_RESERVED; /* with 255.255.255.255, the broadcast address */
        return EGRESS_PUBLIC;
}

static enum egressrule_class classify6(const uint8_t *a) {
        static const uint8_t zero[16];
        static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};

        if (memcmp(a, zero, 15) == 0)
                return a[15] == 0   ? EGRESS_UNSPECIFIED
                       : a[15] == 1 ? EGRESS_LOOPBACK
                                    : EGRESS_RESERVED;
        if (memcmp(a, zero, 12) == 0)
                return EGRESS_RESERVED; /* IPv4-compatible ::a.b.c.d, deprecated */
        if (memcmp(a, nat64, 12) == 0)
                return classify4(a + 12);
        /* Forms a translator on the host's network carries to an IPv4 address inside
         * them, wherever it sits: NAT64 for local use (64:ff9b:1::/48), SIIT's
         * IPv4-translated ::ffff:0:a.b.c.d, Teredo (2001::/32); and discard-only
         * 100::/64. */
        if (memcmp(a, nat64, 4) == 0 && a[4] == 0 && a[5] == 1)
                return EGRESS_RESERVED;
        if (memcmp(a, zero, 8) == 0 && a[8] == 0xff && a[9] == 0xff && a[10] == 0 && a[11] == 0)
                return EGRESS_RESERVED;
        if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0)
                return EGRESS_RESERVED;
        if (a[0] == 0x01 && a[1] == 0 && memcmp(a + 2, zero, 6) == 0)
                return EGRESS_RESERVED;
        if (a[0] == 0x20 && a[1] == 0x02)
                return classify4(a + 2); /* 6to4 */
        if ((a[0] & 0xfe) == 0xfc || (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0))
                return EGRESS_PRIVATE;
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
                return EGRESS_LINK_LOCAL;
        if (a[0] == 0xff)
                return EGRESS_MULTICAST;
        return EGRESS_PUBLIC;
}

enum egressrule_class egressrule_classify(const struct sockaddr *sa) {
        uint8_t a[16];
        int family;

        if (addr_of(sa, &family, a) < 0)
                return EGRESS_RESERVED;
        return family == AF_INET ? classify4(a) : classify6(a);
}

const char *egressrule_class_name(enum egressrule_class c) {
        switch (c) {
        case EGRESS_PUBLIC:
                return "public";
        case EGRESS_PRIVATE:
                return "private";
        case EGRESS_LOOPBACK:
                return "loopback";
        case EGRESS_LINK_LOCAL:
                return "link-local";
        case EGRESS_UNSPECIFIED:
                return "unspecified";
        case EGRESS_MULTICAST:
                return "multicast";
        case EGRESS_RESERVED:
                return "reserved";
        }
        return "reserved";
}

/* ---- literals and authorities --------------------------------------------------------- */

int egressrule_literal(const char *host, unsigned port, struct sockaddr_storage *ret) {
        char buf[INET6_ADDRSTRLEN + 2];
        size_t n = strlen(host);
        struct sockaddr_in *s4 = (struct sockaddr_in *)ret;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ret;

        memset(ret, 0, sizeof(*ret));
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                host++;
                n -= 2;
        }
        if (n >= sizeof(buf))
                return 0;
        memcpy(buf, host, n);
        buf[n] = '\0';
        if (inet_pton(AF_INET, buf, &s4->sin_addr) == 1) {
                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t)port);
                return 1;
        }
        if (inet_pton(AF_INET6, buf, &s6->sin6_addr) == 1) {
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                return 1;
        }
        memset(ret, 0, sizeof(*ret));
        return 0;
}

int egressrule_split_authority(const char *auth, size_t len, char *host, size_t hostlen,
                               unsigned *ret_port, unsigned def_port) {
        const char *end = auth + len, *h = auth, *hend, *colon = NULL;

        if (len == 0)
                return -EINVAL;
        if (auth[0] == '[') {
                const char *rb = memchr(auth, ']', len);
                if (!rb)
                        return -EINVAL;
                h = auth + 1;
                hend = rb;
                if (rb + 1 < end) {
                        if (rb[1] != ':')
                                return -EINVAL;
                        colon = rb + 1;
                }
        } else {
                colon = memchr(auth, ':', len);
                if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
                        return -EINVAL; /* a bare IPv6 literal: brackets are required */
                hend = colon ? colon : end;
        }
        if (hend == h || (size_t)(hend - h) >= hostlen)
                return -EINVAL;
        memcpy(host, h, (size_t)(hend - h));
        host[hend - h] = '\0';
        *ret_port = def_port;
        if (colon && parse_port(colon + 1, (size_t)(end - colon - 1), ret_port) < 0)
                return -EINVAL;
        return 0;
}

void egressrule_addr_text(const struct sockaddr *sa, char *out, size_t len) {
        const void *a =
                sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

        if (!inet_ntop(sa->sa_family, a, out, (socklen_t)len))
                snprintf(out, len, "?");
}
