/* imageref.c: image references parsed and normalised as Docker does; see imageref.h. */
#include "imageref.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int alnum(char c) {
        return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static int fail(char *err, size_t errlen, const char *what, const char *s) {
        snprintf(err, errlen, "invalid image reference \"%.300s\": %s", s, what);
        return -EINVAL;
}

/* One path component: [a-z0-9]+ joined by '.', '_', "__" or a run of '-'. NULL when
 * [p, p+n) is one, else what is wrong. */
static const char *component_error(const char *p, size_t n) {
        size_t i = 0;

        if (n == 0)
                return "empty path component";
        for (i = 0; i < n; i++)
                if (p[i] >= 'A' && p[i] <= 'Z')
                        return "repository name must be lowercase";
        i = 0;
        while (i < n) {
                size_t run = 0;
                while (i < n && lower_alnum(p[i]))
                        i++, run++;
                if (run == 0)
                        return "a path component must start and end with [a-z0-9]";
                if (i == n)
                        return NULL;
                if (p[i] == '.' || (p[i] == '_' && (i + 1 >= n || p[i + 1] != '_')))
                        i++;
                else if (p[i] == '_')
                        i += 2;
                else if (p[i] == '-')
                        while (i < n && p[i] == '-')
                                i++;
                else
                        return "a path component holds only [a-z0-9], '.', '_' and '-'";
                if (i == n)
                        return "a path component must start and end with [a-z0-9]";
        }
        return NULL;
}

static const char *port_error(const char *p, size_t n) {
        unsigned v = 0;
        size_t i;

        if (n == 0 || n > 5)
                return "bad registry port";
        for (i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return "bad registry port";
                v = v * 10 + (unsigned)(p[i] - '0');
        }
        return v == 0 || v > 65535 ? "bad registry port" : NULL;
}

/* A registry: "[v6addr]" or host labels of [A-Za-z0-9-] (no '-' at either end) joined
 * by '.', then an optional ":port". */
static const char *domain_error(const char *p, size_t n) {
        const char *colon;
        size_t host_n, i;

        if (p[0] == '[') {
                char a[64];
                struct in6_addr v6;
                const char *close = memchr(p, ']', n);
                if (!close || (size_t)(close - p - 1) >= sizeof(a))
                        return "bad IPv6 registry address";
                memcpy(a, p + 1, (size_t)(close - p - 1));
                a[close - p - 1] = '\0';
                if (inet_pton(AF_INET6, a, &v6) != 1)
                        return "bad IPv6 registry address";
                host_n = (size_t)(close - p + 1);
                if (host_n == n)
                        return NULL;
                if (p[host_n] != ':')
                        return "bad IPv6 registry address";
                return port_error(p + host_n + 1, n - host_n - 1);
        }
        colon = memchr(p, ':', n);
        host_n = colon ? (size_t)(colon - p) : n;
        for (i = 0; i < host_n;) {
                size_t start = i;
                while (i < host_n && (alnum(p[i]) || p[i] == '-'))
                        i++;
                if (i == start || p[start] == '-' || p[i - 1] == '-')
                        return "bad registry host name";
                if (i < host_n && p[i] != '.')
                        return "bad registry host name";
                if (i < host_n && ++i == host_n)
                        return "bad registry host name";
        }
        if (host_n == 0)
                return "bad registry host name";
        return colon ? port_error(colon + 1, n - host_n - 1) : NULL;
}

static const char *tag_error(const char *t) {
        size_t i, n = strlen(t);

        if (n == 0)
                return "empty tag";
        if (n > IMAGEREF_TAG_MAX)
                return "tag longer than 128 bytes";
        for (i = 0; i < n; i++)
                if (!(alnum(t[i]) || t[i] == '_' || (i > 0 && (t[i] == '.' || t[i] == '-'))))
                        return "a tag holds only [A-Za-z0-9_.-] and starts with [A-Za-z0-9_]";
        return NULL;
}

/* The first component names a registry when it has a '.' or ':', is "localhost", or has
 * an uppercase letter (which no repository path may have). */
static int names_registry(const char *p, size_t n) {
        size_t i;

        if (n == 9 && memcmp(p, "localhost", 9) == 0)
                return 1;
        for (i = 0; i < n; i++)
                if (p[i] == '.' || p[i] == ':' || (p[i] >= 'A' && p[i] <= 'Z'))
                        return 1;
        return 0;
}

static int all_hex64(const char *s) {
        size_t i;

        for (i = 0; i < DIGEST_HEX_LEN; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return 0;
        return s[DIGEST_HEX_LEN] == '\0';
}

/* Splits name (a copy, at most IMAGEREF_NAME_MAX) into registry and path, checked. */
static int parse_name(const char *name, const char *s, struct imageref *r, char *err,
                      size_t errlen) {
        const char *slash = strchr(name, '/'), *path = name, *p, *why;
        int n;

        r->registry[0] = '\0';
        if (slash && names_registry(name, (size_t)(slash - name))) {
                if ((why = domain_error(name, (size_t)(slash - name))))
                        return fail(err, errlen, why, s);
                memcpy(r->registry, name, (size_t)(slash - name));
                r->registry[slash - name] = '\0';
                path = slash + 1;
        }
        if (!r->registry[0] || strcmp(r->registry, "index.docker.io") == 0)
                snprintf(r->registry, sizeof(r->registry), "%s", IMAGEREF_DEFAULT_REGISTRY);
        for (p = path;; p = slash + 1) {
                slash = strchr(p, '/');
                why = component_error(p, slash ? (size_t)(slash - p) : strlen(p));
                if (why)
                        return fail(err, errlen, why, s);
                if (!slash)
                        break;
        }
        if (strcmp(r->registry, IMAGEREF_DEFAULT_REGISTRY) == 0 && !strchr(path, '/'))
                n = snprintf(r->repository, sizeof(r->repository), "library/%s", path);
        else
                n = snprintf(r->repository, sizeof(r->repository), "%s", path);
        if (n < 0 || strlen(r->registry) + 1 + (size_t)n > IMAGEREF_NAME_MAX)
                return fail(err, errlen, "name longer than 255 bytes", s);
        snprintf(r->api_host, sizeof(r->api_host), "%s",
                 strcmp(r->registry, IMAGEREF_DEFAULT_REGISTRY) == 0 ? IMAGEREF_DOCKER_HUB_API
                                                                     : r->registry);
        return 0;
}

int imageref_parse(const char *s, struct imageref *ret, char *err, size_t errlen) {
        char name[IMAGEREF_NAME_MAX + 1];
        struct imageref r;
        const char *at, *colon, *slash, *why;
        size_t name_n;
        int k;

        memset(&r, 0, sizeof(r));
        if (!s || !s[0])
                return fail(err, errlen, "empty reference", s ? s : "");
        at = strchr(s, '@');
        if (at) {
                if (strncmp(at + 1, "sha256:", 7) != 0)
                        return fail(err, errlen, "only sha256 digests are accepted", s);
                if (!digest_parse(at + 1, NULL))
                        return fail(err, errlen, "a digest is sha256: and 64 lowercase hex digits",
                                    s);
                memcpy(r.digest, at + 1, DIGEST_STR_BYTES);
        }
        name_n = at ? (size_t)(at - s) : strlen(s);
        slash = memrchr(s, '/', name_n);
        colon = memrchr(slash ? slash : s, ':', name_n - (size_t)((slash ? slash : s) - s));
        if (colon) {
                if ((size_t)(s + name_n - colon - 1) > IMAGEREF_TAG_MAX)
                        return fail(err, errlen, "tag longer than 128 bytes", s);
                memcpy(r.tag, colon + 1, (size_t)(s + name_n - colon - 1));
                if ((why = tag_error(r.tag)))
                        return fail(err, errlen, why, s);
                name_n = (size_t)(colon - s);
        }
        if (name_n == 0)
                return fail(err, errlen, "empty repository name", s);
        if (name_n > IMAGEREF_NAME_MAX)
                return fail(err, errlen, "name longer than 255 bytes", s);
        memcpy(name, s, name_n);
        name[name_n] = '\0';
        if (name_n == DIGEST_HEX_LEN && all_hex64(name))
                return fail(err, errlen,
                            "a name cannot be 64 hexadecimal digits (that is an image id)", s);
        if ((k = parse_name(name, s, &r, err, errlen)) < 0)
                return k;
        if (!r.tag[0] && !r.digest[0])
                memcpy(r.tag, "latest", 7);
        *ret = r;
        return 0;
}

int imageref_format(const struct imageref *r, char *buf, size_t len) {
        return snprintf(buf, len, "%s/%s%s%s%s%s", r->registry, r->repository, r->tag[0] ? ":" : "",
                        r->tag, r->digest[0] ? "@" : "", r->digest);
}

int imageref_host_loopback(const char *host) {
        char a[64];
        size_t n = strlen(host);
        struct in6_addr v6;
        struct in_addr v4;

        if (strcasecmp(host, "localhost") == 0)
                return 1;
        if (host[0] == '[' && n >= 2 && host[n - 1] == ']')
                host++, n -= 2;
        if (n >= sizeof(a))
                return 0;
        memcpy(a, host, n);
        a[n] = '\0';
        if (inet_pton(AF_INET6, a, &v6) == 1)
                return memcmp(&v6, &in6addr_loopback, sizeof(v6)) == 0;
        return inet_pton(AF_INET, a, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

int imageref_loopback(const struct imageref *r) {
        char host[IMAGEREF_NAME_MAX + 1];
        const char *h = r->registry, *end;

        if (h[0] == '[')
                end = strchr(h, ']') ? strchr(h, ']') + 1 : h + strlen(h);
        else
                end = strchr(h, ':') ? strchr(h, ':') : h + strlen(h);
        snprintf(host, sizeof(host), "%.*s", (int)(end - h), h);
        return imageref_host_loopback(host);
}
