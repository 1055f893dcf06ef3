/* registry.c: the registry client (HTTP API v2 over libcurl); see registry.h. One
 * struct pull per call holds the curl handle, the Authorization header the registry
 * accepted and the destination's directories; one struct resp per HTTP exchange holds
 * what came back: headers, and the body, sent to memory (bounded) or to a blob file
 * through its digest. The OCI layout side (blob files, index.json) is in ociwrite.c. */
#include "registry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "ociwrite.h"

#define MT_OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_V1       "application/vnd.docker.distribution.manifest.v1"
#define ACCEPT_MANIFESTS                                                                           \
        "Accept: " MT_OCI_MANIFEST ", " MT_OCI_INDEX ", " MT_DOCKER_MANIFEST ", " MT_DOCKER_LIST
#define ERROR_BODY_MAX (64u << 10)

struct pull {
        const struct registry_pull *p;
        CURL *curl;
        char base[IMAGEREF_NAME_MAX * 2 + 32]; /* scheme://host/v2/repository */
        char refname[IMAGEREF_NAME_MAX * 2 + 2 * DIGEST_STR_BYTES];
        char *auth; /* "Authorization: ..." the registry took, or NULL */
        struct ociwrite *out;
        char *err;
        size_t errlen;
};

/* What one exchange sends its body to. */
struct resp {
        struct pull *pl;
        long status;
        char www_auth[2048], content_type[128], docker_digest[DIGEST_STR_BYTES + 8];
        char location[4096];
        char *mem; /* memory body (also the error body of a blob) */
        size_t mem_len, mem_max, mem_cap;
        struct ociwrite_blob *blob; /* or a blob file */
        const struct registry_progress *prog_template;
        uint64_t prog_last;
        int abort_rc; /* why a callback stopped the transfer */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void) {
        curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int failf(struct pull *pl, int rc, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int failf(struct pull *pl, int rc, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(pl->err, pl->errlen, fmt, ap);
        va_end(ap);
        return rc;
}

static int cancelled(const struct pull *pl) {
        return pl->p->cancel && __atomic_load_n(pl->p->cancel, __ATOMIC_RELAXED);
}

/* ---- platforms ---------------------------------------------------------------------- */

void registry_machine_platform(const char **ret_arch, const char **ret_variant) {
        static const struct {
                const char *machine, *arch, *variant;
        } map[] = {
                {"x86_64", "amd64", ""},
                {"aarch64", "arm64", "v8"},
                {"armv7l", "arm", "v7"},
                {"armv6l", "arm", "v6"},
                {"i686", "386", ""},
                {"i386", "386", ""},
                {"ppc64le", "ppc64le", ""},
                {"s390x", "s390x", ""},
                {"riscv64", "riscv64", ""},
                {"mips64", "mips64", ""},
                {"loongarch64", "loong64", ""},
        };
        static __thread struct utsname u;
        size_t i;

        *ret_arch = "unknown";
        *ret_variant = "";
        if (uname(&u) != 0)
                return;
        for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (strcmp(u.machine, map[i].machine) == 0) {
                        *ret_arch = map[i].arch;
                        *ret_variant = map[i].variant;
                        return;
                }
        *ret_arch = u.machine;
}

/* An index entry's variant fits when it is the wanted one, or none, or the one an
 * architecture has when it names none (amd64 "v1", arm64 "v8"). */
static int variant_fits(const char *arch, const char *want, const char *have) {
        if (!have[0] || strcmp(have, want) == 0)
                return 1;
        if (!want[0] && strcmp(arch, "amd64") == 0)
                return strcmp(have, "v1") == 0;
        return 0;
}

/* ---- curl callbacks ----------------------------------------------------------------- */

static void copy_header_value(char *dst, size_t len, const char *v, size_t n) {
        while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
                n--;
        while (n && (*v == ' ' || *v == '\t'))
                v++, n--;
        if (n >= len) /* too long to be honest: kept empty, so that it is not used cut */
                n = 0;
        memcpy(dst, v, n);
        dst[n] = '\0';
}

static size_t on_header(char *b, size_t size, size_t n, void *opaque) {
        static const struct {
                const char *name;
                size_t off, len;
        } keep[] = {
                {"www-authenticate:", offsetof(struct resp, www_auth),
                 sizeof(((struct resp *)0)->www_auth)},
                {"content-type:", offsetof(struct resp, content_type),
                 sizeof(((struct resp *)0)->content_type)},
                {"docker-content-digest:", offsetof(struct resp, docker_digest),
                 sizeof(((struct resp *)0)->docker_digest)},
                {"location:", offsetof(struct resp, location),
                 sizeof(((struct resp *)0)->location)},
        };
        struct resp *rs = opaque;
        size_t len = size * n, i;

        if (len >= 5 && strncmp(b, "HTTP/", 5) == 0) { /* a new response: forget the last */
                rs->www_auth[0] = rs->content_type[0] = rs->docker_digest[0] = '\0';
                rs->location[0] = '\0';
        }
        for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
                size_t k = strlen(keep[i].name);
                if (len > k && strncasecmp(b, keep[i].name, k) == 0)
                        copy_header_value((char *)rs + keep[i].off, keep[i].len, b + k, len - k);
        }
        return len;
}

static void report(struct resp *rs, int force) {
        struct registry_progress p;

        if (!rs->prog_template || !rs->pl->p->progress)
                return;
        p = *rs->prog_template;
        p.done_bytes = ociwrite_blob_bytes(rs->blob);
        if (!force && p.done_bytes - rs->prog_last < REGISTRY_PROGRESS_STEP_BYTES)
                return;
        rs->prog_last = p.done_bytes;
        rs->pl->p->progress(rs->pl->p->progress_opaque, &p);
}

static size_t to_memory(struct resp *rs, const char *b, size_t len, size_t max) {
        if (rs->mem_len + len > max) {
                rs->abort_rc = -EFBIG;
                return 0;
        }
        if (rs->mem_cap < max + 1) { /* an error body first, a bigger answer after it */
                char *m = realloc(rs->mem, max + 1);
                if (!m) {
                        rs->abort_rc = -ENOMEM;
                        return 0;
                }
                rs->mem = m;
                rs->mem_cap = max + 1;
        }
        memcpy(rs->mem + rs->mem_len, b, len);
        rs->mem_len += len;
        rs->mem[rs->mem_len] = '\0';
        return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *opaque) {
        struct resp *rs = opaque;
        size_t len = size * n;
        long status = 0;
        int r;

        if (cancelled(rs->pl)) {
                rs->abort_rc = -ECANCELED;
                return 0;
        }
        curl_easy_getinfo(rs->pl->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 300 && status < 400)
                return len; /* a redirect's body: not read */
        if (status >= 400 || !rs->blob) {
                size_t max = status >= 400 ? ERROR_BODY_MAX : rs->mem_max;
                if (status >= 400 && rs->mem_len + len > max)
                        return len; /* an error page past the bound: the rest is dropped */
                return to_memory(rs, b, len, max);
        }
        r = ociwrite_blob_write(rs->blob, b, len);
        if (r < 0) {
                rs->abort_rc = r;
                return 0;
        }
        report(rs, 0);
        return len;
}

static int on_xfer(void *opaque, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow) {
        struct resp *rs = opaque;

        if (!cancelled(rs->pl))
                return 0;
        rs->abort_rc = -ECANCELED;
        return 1;
}

/* ---- one exchange, redirects followed ---------------------------------------------- */

/* 1 when a and b (absolute URLs) have the same scheme, host and port. */
static int same_origin(const char *a, const char *b) {
        static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
        CURLU *ua = curl_url(), *ub = curl_url();
        int same = ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
                   curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK;
        size_t i;

        for (i = 0; same && i < sizeof(parts) / sizeof(parts[0]); i++) {
                char *x = NULL, *y = NULL;
                same = curl_url_get(ua, parts[i], &x, CURLU_DEFAULT_PORT) == CURLUE_OK &&
                       curl_url_get(ub, parts[i], &y, CURLU_DEFAULT_PORT) == CURLUE_OK &&
                       strcasecmp(x, y) == 0;
                curl_free(x);
                curl_free(y);
        }
        curl_url_cleanup(ua);
        curl_url_cleanup(ub);
        return same;
}

/* 0 when url may be fetched: https, or plain http to a loopback host. */
static int url_allowed(struct pull *pl, const char *url) {
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL;
        int r = -EBADMSG;

        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
                failf(pl, r, "%s: bad URL %.200s", pl->refname, url);
        else if (strcmp(scheme, "https") != 0 &&
                 !(strcmp(scheme, "http") == 0 && imageref_host_loopback(host)))
                failf(pl, r, "%s: %.200s refused: only https, or plain http to a loopback host",
                      pl->refname, url);
        else
                r = 0;
        curl_free(scheme);
        curl_free(host);
        curl_url_cleanup(u);
        return r;
}

/* Resolves location against *url into a fresh *url (freed with free), if allowed. */
static int follow(struct pull *pl, char **url, const char *location) {
        CURLU *u = curl_url();
        char *next = NULL;
        int r;

        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, *url, 0) != CURLUE_OK ||
            curl_url_set(u, CURLUPART_URL, location, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_URL, &next, 0) != CURLUE_OK)
                r = failf(pl, -EBADMSG, "%s: the registry redirected to a bad URL", pl->refname);
        else
                r = url_allowed(pl, next);
        if (r == 0) {
                free(*url);
                *url = strdup(next);
                r = *url ? 0 : -ENOMEM;
        }
        curl_free(next);
        curl_url_cleanup(u);
        return r;
}

static int curl_failure(struct pull *pl, struct resp *rs, CURLcode c, const char *errbuf,
                        const char *url) {
        const char *why = errbuf[0] ? errbuf : curl_easy_strerror(c);
        long os_errno = 0;

        if (rs->abort_rc == -ECANCELED || cancelled(pl))
                return failf(pl, -ECANCELED, "%s: pull cancelled", pl->refname);
        if (rs->abort_rc == -EFBIG) /* a manifest, or a token server's answer */
                return failf(pl, -EFBIG, "%s: %.200s: the answer is larger than %zu bytes",
                             pl->refname, url, rs->mem_max);
        if (rs->abort_rc) /* the blob writer's own error said what it is */
                return rs->abort_rc;
        /* curl's codes are a long list of which these matter (if, not switch: the rest
         * are one case) */
        if (c == CURLE_OPERATION_TIMEDOUT)
                return failf(pl, -ETIMEDOUT, "%s: %.200s timed out: %s", pl->refname, url, why);
        if (c == CURLE_PARTIAL_FILE)
                return failf(pl, -EBADMSG, "%s: %.200s: the registry sent less than it announced",
                             pl->refname, url);
        if (c == CURLE_OUT_OF_MEMORY)
                return failf(pl, -ENOMEM, "%s: out of memory", pl->refname);
        curl_easy_getinfo(pl->curl, CURLINFO_OS_ERRNO, &os_errno);
        return failf(pl, -EHOSTUNREACH, "%s: registry unreachable (%.200s): %s%s%s%s", pl->refname,
                     url, why, os_errno ? " (" : "", os_errno ? strerror((int)os_errno) : "",
                     os_errno ? ")" : "");
}

/* GETs url, following redirects, sending auth (an "Authorization: ..." header, or NULL)
 * only to url's own origin. 0 with rs->status set (any status), or a failure. */
static int http_get(struct pull *pl, const char *url0, const char *auth, const char *accept,
                    struct resp *rs) {
        char errbuf[CURL_ERROR_SIZE], *url = strdup(url0);
        int hops, r = 0;

        if (!url)
                return -ENOMEM;
        for (hops = 0;; hops++) {
                struct curl_slist *h = NULL, *h2;
                CURLcode c;

                h2 = curl_slist_append(h, "User-Agent: sbxd");
                if (h2 && accept)
                        h2 = curl_slist_append(h = h2, accept);
                if (h2 && auth && same_origin(url0, url))
                        h2 = curl_slist_append(h = h2, auth);
                if (!h2) {
                        curl_slist_free_all(h);
                        r = -ENOMEM;
                        break;
                }
                h = h2;
                errbuf[0] = '\0';
                curl_easy_setopt(pl->curl, CURLOPT_URL, url);
                curl_easy_setopt(pl->curl, CURLOPT_HTTPHEADER, h);
                curl_easy_setopt(pl->curl, CURLOPT_ERRORBUFFER, errbuf);
                curl_easy_setopt(pl->curl, CURLOPT_WRITEDATA, rs);
                curl_easy_setopt(pl->curl, CURLOPT_HEADERDATA, rs);
                curl_easy_setopt(pl->curl, CURLOPT_XFERINFODATA, rs);
                rs->mem_len = 0;
                c = curl_easy_perform(pl->curl);
                curl_easy_setopt(pl->curl, CURLOPT_HTTPHEADER, NULL);
                curl_easy_setopt(pl->curl, CURLOPT_ERRORBUFFER, NULL); /* errbuf ends here */
                curl_slist_free_all(h);
                if (c != CURLE_OK) {
                        r = curl_failure(pl, rs, c, errbuf, url);
                        break;
                }
                curl_easy_getinfo(pl->curl, CURLINFO_RESPONSE_CODE, &rs->status);
                if (rs->status < 300 || rs->status >= 400 || !rs->location[0])
                        break;
                if (hops == REGISTRY_MAX_REDIRECTS) {
                        r = failf(pl, -EBADMSG, "%s: more than %d redirects", pl->refname,
                                  REGISTRY_MAX_REDIRECTS);
                        break;
                }
                if ((r = follow(pl, &url, rs->location)) < 0)
                        break;
        }
        free(url);
        return r;
}

/* ---- authentication ---------------------------------------------------------------- */

/* Reads the value of key in a challenge's parameters (key="value" or key=token). */
static int challenge_param(const char *params, const char *key, char *out, size_t len) {
        const char *p = params;
        size_t k = strlen(key);

        while (*p) {
                size_t n = 0;
                while (*p == ' ' || *p == ',')
                        p++;
                int match = strncasecmp(p, key, k) == 0 && p[k] == '=';
                while (*p && *p != '=')
                        p++;
                if (*p++ != '=')
                        return 0;
                if (*p == '"') {
                        for (p++; *p && *p != '"'; p++) {
                                if (*p == '\\' && p[1])
                                        p++;
                                if (match && n + 1 < len)
                                        out[n++] = *p;
                        }
                        if (*p)
                                p++;
                } else {
                        for (; *p && *p != ','; p++)
                                if (match && n + 1 < len)
                                        out[n++] = *p;
                }
                if (match) {
                        out[n] = '\0';
                        return 1;
                }
        }
        return 0;
}

/* "Authorization: Basic base64(user:password)" for the caller's credentials. */
static char *basic_header(const struct registry_pull *p) {
        size_t n = strlen(p->username) + 1 + strlen(p->password);
        char *plain = malloc(n + 1), *h = malloc(32 + 4 * (n / 3 + 1) + 1);

        if (!plain || !h) {
                free(plain);
                free(h);
                return NULL;
        }
        snprintf(plain, n + 1, "%s:%s", p->username, p->password);
        memcpy(h, "Authorization: Basic ", 21);
        EVP_EncodeBlock((unsigned char *)h + 21, (unsigned char *)plain, (int)n);
        explicit_bzero(plain, n);
        free(plain);
        return h;
}

/* A token is sent in a header: printable ASCII without spaces only. */
static int token_ok(const char *t) {
        size_t n = 0;

        for (; t[n]; n++)
                if (t[n] < 0x21 || t[n] > 0x7e)
                        return 0;
        return n > 0 && n <= REGISTRY_TOKEN_MAX_BYTES;
}

/* The bearer handshake: a token from the challenge's realm, for its service and scope
 * (or pull of this repository), then "Authorization: Bearer TOKEN" in pl->auth. */
static int bearer(struct pull *pl, const char *params) {
        char realm[1024], service[256] = "", scope[512], *url = NULL, *basic = NULL;
        char *es = NULL, *esc = NULL;
        struct resp rs = {.pl = pl, .mem_max = REGISTRY_TOKEN_MAX_BYTES};
        json_t *j = NULL, *t;
        int r;

        if (!challenge_param(params, "realm", realm, sizeof(realm)))
                return failf(pl, -EACCES, "%s: a Bearer challenge without a realm", pl->refname);
        challenge_param(params, "service", service, sizeof(service));
        if (!challenge_param(params, "scope", scope, sizeof(scope)))
                snprintf(scope, sizeof(scope), "repository:%s:pull", pl->p->ref->repository);
        es = curl_easy_escape(pl->curl, service, 0);
        esc = curl_easy_escape(pl->curl, scope, 0);
        if (!es || !esc ||
            asprintf(&url, "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", es,
                     esc) < 0) {
                url = NULL;
                r = -ENOMEM;
                goto out;
        }
        if ((r = url_allowed(pl, url)) < 0) /* the realm: https, or http on loopback */
                goto out;
        if (pl->p->username && !(basic = basic_header(pl->p))) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = http_get(pl, url, basic, NULL, &rs)) < 0)
                goto out;
        if (rs.status == 401 || rs.status == 403) {
                r = failf(pl, -EACCES, "%s: unauthorized: the token server refused %s (HTTP %ld)",
                          pl->refname, pl->p->username ? "the credentials" : "anonymous access",
                          rs.status);
                goto out;
        }
        j = rs.status == 200 && rs.mem ? json_loadb(rs.mem, rs.mem_len, 0, NULL) : NULL;
        t = json_object_get(j, "token");
        if (!json_is_string(t))
                t = json_object_get(j, "access_token");
        if (!json_is_string(t) || !token_ok(json_string_value(t))) {
                r = failf(pl, -EACCES, "%s: no token from %.200s (HTTP %ld)", pl->refname, realm,
                          rs.status);
                goto out;
        }
        free(pl->auth);
        if (asprintf(&pl->auth, "Authorization: Bearer %s", json_string_value(t)) < 0) {
                pl->auth = NULL;
                r = -ENOMEM;
        }
out:
        json_decref(j);
        if (rs.mem) /* held the token */
                explicit_bzero(rs.mem, rs.mem_len);
        free(rs.mem);
        if (basic)
                explicit_bzero(basic, strlen(basic));
        free(basic);
        curl_free(es);
        curl_free(esc);
        free(url);
        return r;
}

/* Answers rs's 401 challenge: Bearer (a token) or Basic (the caller's credentials). */
static int authenticate(struct pull *pl, const char *challenge) {
        if (strncasecmp(challenge, "Bearer ", 7) == 0)
                return bearer(pl, challenge + 7);
        if (strncasecmp(challenge, "Basic", 5) == 0) {
                if (!pl->p->username)
                        return failf(pl, -EACCES,
                                     "%s: unauthorized: the registry asks for a "
                                     "user name and password",
                                     pl->refname);
                free(pl->auth);
                pl->auth = basic_header(pl->p);
                return pl->auth ? 0 : -ENOMEM;
        }
        return failf(pl, -EACCES, "%s: unauthorized: unsupported challenge \"%.60s\"", pl->refname,
                     challenge);
}

/* The registry's own words for an error body: the first errors[] code and message. */
static void registry_words(const struct resp *rs, char *out, size_t len) {
        json_t *j = rs->mem ? json_loadb(rs->mem, rs->mem_len, 0, NULL) : NULL;
        json_t *e = json_array_get(json_object_get(j, "errors"), 0);
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        size_t i;

        snprintf(out, len, "%s%s%s", code ? code : "", code && msg ? ": " : "", msg ? msg : "");
        for (i = 0; out[i]; i++)
                if (!isprint((unsigned char)out[i]))
                        out[i] = '?';
        json_decref(j);
}

/* GETs a registry path (manifests/..., blobs/...) with the current authorization,
 * answering one challenge (then asking once more). 0 when the status is 2xx; else the typed
 * failure, what names what was asked for. */
static int registry_get(struct pull *pl, const char *path, const char *accept, struct resp *rs,
                        const char *what) {
        char url[sizeof(pl->base) + 256], words[256];
        int r;

        snprintf(url, sizeof(url), "%s/%s", pl->base, path);
        r = http_get(pl, url, pl->auth, accept, rs);
        if (r == 0 && rs->status == 401) { /* the first request, or a token that expired */
                if ((r = authenticate(pl, rs->www_auth)) < 0)
                        return r;
                rs->mem_len = 0;
                r = http_get(pl, url, pl->auth, accept, rs);
        }
        if (r < 0)
                return r;
        if (rs->status >= 200 && rs->status < 300)
                return 0;
        registry_words(rs, words, sizeof(words));
        if (rs->status == 404)
                return failf(pl, -ENOENT, "%s not found: %s (%s)", what, pl->refname,
                             words[0] ? words : "HTTP 404");
        if (rs->status == 401 || rs->status == 403)
                return failf(pl, -EACCES, "%s: unauthorized (HTTP %ld%s%s)", pl->refname,
                             rs->status, words[0] ? ", " : "", words);
        return failf(pl, -EPROTO, "%s: the registry answered HTTP %ld for %s%s%s", pl->refname,
                     rs->status, what, words[0] ? ": " : "", words);
}

/* ---- manifests ---------------------------------------------------------------------- */

struct desc {
        char media_type[128];
        char digest[DIGEST_STR_BYTES];
        uint64_t size;
};

struct manifest {
        char *body;
        size_t len;
        char media_type[128];
        char digest[DIGEST_STR_BYTES];
        json_t *json;
};

struct image {
        struct desc config;
        struct desc *layers;
        unsigned n;
};

static void manifest_free(struct manifest *m) {
        free(m->body);
        json_decref(m->json);
        memset(m, 0, sizeof(*m));
}

/* Reads a descriptor (mediaType, digest, size) of the manifest; what names it. */
static int read_desc(struct pull *pl, json_t *o, struct desc *d, const char *what) {
        json_t *mt = json_object_get(o, "mediaType"), *dg = json_object_get(o, "digest");
        json_t *sz = json_object_get(o, "size");

        if (!json_is_object(o) || !json_is_string(dg) || !json_is_integer(sz) ||
            json_integer_value(sz) < 0 || (mt && !json_is_string(mt)) ||
            (mt && strlen(json_string_value(mt)) >= sizeof(d->media_type)))
                return failf(pl, -EBADMSG, "%s: the %s is no valid descriptor", pl->refname, what);
        if (!digest_parse(json_string_value(dg), NULL))
                return failf(pl, -EBADMSG,
                             "%s: the %s's digest \"%.80s\" is not sha256 and 64 "
                             "lowercase hex digits",
                             pl->refname, what, json_string_value(dg));
        snprintf(d->media_type, sizeof(d->media_type), "%s", mt ? json_string_value(mt) : "");
        memcpy(d->digest, json_string_value(dg), DIGEST_STR_BYTES);
        d->size = (uint64_t)json_integer_value(sz);
        return 0;
}

static int is_index(const struct manifest *m) {
        return strcmp(m->media_type, MT_OCI_INDEX) == 0 ||
               strcmp(m->media_type, MT_DOCKER_LIST) == 0;
}

/* 1 when a Content-Type names a manifest or an index (or a schema 1 manifest). */
static int known_type(const char *ct) {
        static const char *const known[] = {MT_OCI_MANIFEST, MT_OCI_INDEX, MT_DOCKER_MANIFEST,
                                            MT_DOCKER_LIST, MT_DOCKER_V1};
        size_t i, n = strcspn(ct, "; ");

        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                if (strncmp(ct, known[i], strlen(known[i])) == 0 && n >= strlen(known[i]))
                        return 1;
        return 0;
}

/* Checks what came as a manifest: its digest (the one asked for, the one the registry
 * names), its JSON, its media type and schema version. */
static int check_manifest(struct pull *pl, const char *ref, const struct resp *rs,
                          struct manifest *m) {
        json_t *mt, *sv;
        int r = digest_buf(m->body ? m->body : "", m->len, m->digest);

        if (r < 0)
                return r;
        if (digest_parse(ref, NULL) && strcmp(ref, m->digest) != 0)
                return failf(pl, -EBADMSG,
                             "%s: the manifest sent has digest %s, not the one "
                             "asked for",
                             pl->refname, m->digest);
        if (digest_parse(rs->docker_digest, NULL) && strcmp(rs->docker_digest, m->digest) != 0)
                return failf(pl, -EBADMSG,
                             "%s: the manifest sent has digest %s, not %s as the "
                             "registry says",
                             pl->refname, m->digest, rs->docker_digest);
        m->json = m->body ? json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (!json_is_object(m->json))
                return failf(pl, -EBADMSG, "%s: the manifest is not a JSON object", pl->refname);
        mt = json_object_get(m->json, "mediaType");
        if (json_is_string(mt))
                snprintf(m->media_type, sizeof(m->media_type), "%s", json_string_value(mt));
        else if (known_type(rs->content_type))
                snprintf(m->media_type, sizeof(m->media_type), "%.*s",
                         (int)strcspn(rs->content_type, "; "), rs->content_type);
        sv = json_object_get(m->json, "schemaVersion");
        if (json_integer_value(sv) == 1 ||
            strncmp(m->media_type, MT_DOCKER_V1, strlen(MT_DOCKER_V1)) == 0)
                return failf(pl, -EPROTONOSUPPORT,
                             "%s: a Docker schema 1 manifest: not supported "
                             "(push the image again with a current client)",
                             pl->refname);
        if (!json_is_integer(sv) || json_integer_value(sv) != 2)
                return failf(pl, -EBADMSG, "%s: the manifest's schemaVersion is not 2",
                             pl->refname);
        if (!m->media_type[0]) /* none (OCI allows that), or "application/json": by content */
                snprintf(m->media_type, sizeof(m->media_type), "%s",
                         json_object_get(m->json, "manifests") ? MT_OCI_INDEX : MT_OCI_MANIFEST);
        if (!is_index(m) && strcmp(m->media_type, MT_OCI_MANIFEST) != 0 &&
            strcmp(m->media_type, MT_DOCKER_MANIFEST) != 0)
                return failf(pl, -EPROTONOSUPPORT, "%s: media type \"%.100s\" is no image manifest",
                             pl->refname, m->media_type);
        return 0;
}

/* GETs the manifest ref (a tag or a digest) into *m, checked. */
static int fetch_manifest(struct pull *pl, const char *ref, struct manifest *m) {
        struct resp rs = {.pl = pl, .mem_max = REGISTRY_MANIFEST_MAX_BYTES};
        char path[16 + IMAGEREF_TAG_MAX + DIGEST_STR_BYTES];
        int r;

        snprintf(path, sizeof(path), "manifests/%s", ref);
        r = registry_get(pl, path, ACCEPT_MANIFESTS, &rs, "manifest");
        m->body = rs.mem;
        m->len = rs.mem_len;
        return r < 0 ? r : check_manifest(pl, ref, &rs, m);
}

/* Picks the index entry of linux/ARCH[/VARIANT]; -ENOEXEC naming what the index has. */
static int pick_platform(struct pull *pl, json_t *index, struct desc *ret) {
        const char *arch, *variant, *v;
        char have[512] = "";
        json_t *list = json_object_get(index, "manifests"), *e;
        size_t i, n = 0;

        registry_machine_platform(&arch, &variant);
        if (pl->p->arch)
                arch = pl->p->arch, variant = pl->p->variant ? pl->p->variant : "";
        if (!json_is_array(list))
                return failf(pl, -EBADMSG, "%s: an index without manifests", pl->refname);
        json_array_foreach(list, i, e) {
                json_t *pf = json_object_get(e, "platform");
                const char *os = json_string_value(json_object_get(pf, "os"));
                const char *a = json_string_value(json_object_get(pf, "architecture"));

                v = json_string_value(json_object_get(pf, "variant"));
                if (!os || !a)
                        continue;
                if (strcmp(os, "linux") == 0 && strcmp(a, arch) == 0 &&
                    variant_fits(arch, variant, v ? v : ""))
                        return read_desc(pl, e, ret, "index entry");
                if (n < sizeof(have))
                        n += (size_t)snprintf(have + n, sizeof(have) - n, "%s%s/%s%s%s",
                                              n ? ", " : "", os, a, v ? "/" : "", v ? v : "");
        }
        return failf(pl, -ENOEXEC, "%s: no image for linux/%s%s%s in the index (it has: %s)",
                     pl->refname, arch, variant[0] ? "/" : "", variant, n ? have : "nothing");
}

/* The manifest of the image to pull: the reference's, or its index's entry for this
 * platform (fetched by digest, its size that of the entry, and no index again). */
static int resolve(struct pull *pl, struct manifest *m) {
        const struct imageref *ref = pl->p->ref;
        struct desc d;
        int r = fetch_manifest(pl, ref->digest[0] ? ref->digest : ref->tag, m);

        if (r < 0 || !is_index(m))
                return r;
        if ((r = pick_platform(pl, m->json, &d)) < 0)
                return r;
        manifest_free(m);
        if ((r = fetch_manifest(pl, d.digest, m)) < 0)
                return r;
        if (m->len != d.size)
                return failf(pl, -EBADMSG, "%s: manifest %s is %zu bytes, the index says %llu",
                             pl->refname, d.digest, m->len, (unsigned long long)d.size);
        if (is_index(m))
                return failf(pl, -EBADMSG, "%s: the index names another index for this platform",
                             pl->refname);
        return 0;
}

/* The image's config and layers, bounded by count and by max_total_bytes. */
static int read_image(struct pull *pl, const struct manifest *m, struct image *img) {
        json_t *layers = json_object_get(m->json, "layers");
        const char *ct;
        uint64_t total = m->len;
        size_t i;
        int r;

        if (!json_is_array(layers))
                return failf(pl, -EBADMSG, "%s: the manifest has no layers list", pl->refname);
        if (json_array_size(layers) > REGISTRY_MAX_LAYERS)
                return failf(pl, -EFBIG, "%s: %zu layers, more than %d", pl->refname,
                             json_array_size(layers), REGISTRY_MAX_LAYERS);
        if ((r = read_desc(pl, json_object_get(m->json, "config"), &img->config, "config")) < 0)
                return r;
        ct = img->config.media_type;
        if (strcmp(ct, "application/vnd.oci.image.config.v1+json") != 0 &&
            strcmp(ct, "application/vnd.docker.container.image.v1+json") != 0)
                return failf(pl, -EPROTONOSUPPORT,
                             "%s: an artifact, not a container image "
                             "(config media type \"%.100s\")",
                             pl->refname, ct);
        img->n = (unsigned)json_array_size(layers);
        if (img->n && !(img->layers = calloc(img->n, sizeof(*img->layers))))
                return -ENOMEM;
        total += img->config.size;
        for (i = 0; i < img->n; i++) {
                if ((r = read_desc(pl, json_array_get(layers, i), &img->layers[i], "layer")) < 0)
                        return r;
                total += img->layers[i].size; /* each < 2^63, at most 129 of them: no wrap */
        }
        if (total > pl->p->max_total_bytes || total < img->config.size)
                return failf(pl, -EFBIG, "%s: the image is %llu bytes, more than the bound of %llu",
                             pl->refname, (unsigned long long)total,
                             (unsigned long long)pl->p->max_total_bytes);
        return 0;
}

/* ---- blobs -------------------------------------------------------------------------- */

/* Counts blob d as found locally, and says so (tmpl: its progress, NULL for the
 * config). */
static void report_reused(struct pull *pl, const struct desc *d, struct registry_progress *tmpl,
                          struct registry_result *res) {
        res->reused_bytes += d->size;
        if (tmpl && pl->p->progress) {
                tmpl->done_bytes = d->size;
                tmpl->reused = 1;
                pl->p->progress(pl->p->progress_opaque, tmpl);
        }
}

/* Puts blob d in the destination: found there or in reuse_blobs, else downloaded through
 * its digest. tmpl: the progress to report (NULL for the config). */
static int fetch_blob(struct pull *pl, const struct desc *d, struct registry_progress *tmpl,
                      struct registry_result *res) {
        struct resp rs = {.pl = pl, .prog_template = tmpl};
        char path[8 + DIGEST_STR_BYTES];
        int r;

        if (cancelled(pl))
                return failf(pl, -ECANCELED, "%s: pull cancelled", pl->refname);
        r = ociwrite_has(pl->out, d->digest, d->size);
        if (r == 0 && pl->p->reuse_blobs)
                r = ociwrite_copy_from(pl->out, pl->p->reuse_blobs, d->digest, d->size);
        if (r < 0)
                return r;
        if (r == 1) {
                report_reused(pl, d, tmpl, res);
                return 0;
        }
        if ((r = ociwrite_blob_start(pl->out, d->digest, d->size, &rs.blob)) < 0)
                return r;
        report(&rs, 1);
        snprintf(path, sizeof(path), "blobs/%s", d->digest);
        r = registry_get(pl, path, NULL, &rs, d->digest);
        if (r == 0) {
                report(&rs, rs.prog_last != ociwrite_blob_bytes(rs.blob));
                res->downloaded_bytes += ociwrite_blob_bytes(rs.blob);
                r = ociwrite_blob_commit(rs.blob);
        } else {
                ociwrite_blob_abort(rs.blob);
        }
        free(rs.mem);
        return r;
}

static int fetch_blobs(struct pull *pl, const struct image *img, struct registry_result *res) {
        struct registry_progress t;
        unsigned i;
        int r = fetch_blob(pl, &img->config, NULL, res);

        for (i = 0; r == 0 && i < img->n; i++) {
                t = (struct registry_progress){.digest = img->layers[i].digest,
                                               .index = i,
                                               .count = img->n,
                                               .total_bytes = img->layers[i].size};
                r = pl->p->have_layer
                            ? pl->p->have_layer(pl->p->have_layer_opaque, img->layers[i].digest)
                            : 0;
                if (r == 1)
                        report_reused(pl, &img->layers[i], &t, res);
                if (r == 0)
                        r = fetch_blob(pl, &img->layers[i], &t, res);
                else if (r == 1)
                        r = 0;
        }
        return r;
}

/* ---- a pull ------------------------------------------------------------------------- */

static int setup(struct pull *pl) {
        const struct registry_pull *p = pl->p;
        unsigned connect_ms =
                p->connect_timeout_ms ? p->connect_timeout_ms : REGISTRY_CONNECT_TIMEOUT_MS;
        unsigned stall_ms = p->stall_timeout_ms ? p->stall_timeout_ms : REGISTRY_STALL_TIMEOUT_MS;
        int loop = imageref_loopback(p->ref);

        imageref_format(p->ref, pl->refname, sizeof(pl->refname));
        snprintf(pl->base, sizeof(pl->base), "%s://%s/v2/%s", loop ? "http" : "https",
                 p->ref->api_host, p->ref->repository);
        pthread_once(&curl_once, curl_init_once);
        if (curl_init_rc != CURLE_OK || !(pl->curl = curl_easy_init()))
                return failf(pl, -ENOMEM, "%s: libcurl cannot start", pl->refname);
        curl_easy_setopt(pl->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(pl->curl, CURLOPT_FOLLOWLOCATION, 0L); /* http_get follows, checked */
        curl_easy_setopt(pl->curl, CURLOPT_NOSIGNAL, 1L);       /* threads: no SIGALRM */
        curl_easy_setopt(pl->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
        curl_easy_setopt(pl->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(pl->curl, CURLOPT_LOW_SPEED_TIME, (long)((stall_ms + 999) / 1000));
        curl_easy_setopt(pl->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(pl->curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(pl->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
        curl_easy_setopt(pl->curl, CURLOPT_NOPROGRESS, 0L);
        if (loop) /* a loopback registry is never reached through a proxy */
                curl_easy_setopt(pl->curl, CURLOPT_NOPROXY, "*");
        return 0;
}

static int check_request(const struct registry_pull *p, char *err, size_t errlen) {
        const char *why = NULL;

        if (!p || !p->ref || !p->ref->repository[0])
                why = "no image reference";
        else if (!p->dest_dir)
                why = "no destination directory";
        else if (!p->max_total_bytes)
                why = "max_total_bytes is 0";
        else if (!p->username != !p->password)
                why = "a user name without a password, or a password without a user name";
        else if (p->token && (p->username || !token_ok(p->token)))
                why = "a token with a user name, or one that is not printable ASCII without "
                      "spaces";
        else if (p->variant && !p->arch)
                why = "a variant without an architecture";
        if (why)
                snprintf(err, errlen, "bad pull request: %s", why);
        return why ? -EINVAL : 0;
}

int registry_pull(const struct registry_pull *p, struct registry_result *ret, char *err,
                  size_t errlen) {
        struct pull pl = {.p = p, .err = err, .errlen = errlen};
        struct registry_result res;
        struct manifest m = {0};
        struct image img = {0};
        int r = check_request(p, err, errlen);

        memset(&res, 0, sizeof(res));
        if (r == 0)
                r = setup(&pl);
        if (r == 0 && p->token && asprintf(&pl.auth, "Authorization: Bearer %s", p->token) < 0) {
                pl.auth = NULL;
                r = -ENOMEM;
        }
        if (r == 0)
                r = ociwrite_open(p->dest_dir, err, errlen, &pl.out);
        if (r == 0)
                r = resolve(&pl, &m);
        if (r == 0)
                r = read_image(&pl, &m, &img);
        if (r == 0)
                r = fetch_blobs(&pl, &img, &res);
        if (r == 0)
                r = ociwrite_put(pl.out, m.digest, m.body, m.len);
        if (r == 0)
                r = ociwrite_tag(pl.out, m.media_type, m.digest, m.len, p->ref->tag);
        if (r == 0 && ret) {
                memcpy(res.manifest_digest, m.digest, DIGEST_STR_BYTES);
                memcpy(res.config_digest, img.config.digest, DIGEST_STR_BYTES);
                snprintf(res.media_type, sizeof(res.media_type), "%s", m.media_type);
                res.manifest_bytes = m.len;
                res.layers = img.n;
                *ret = res;
        }
        free(img.layers);
        manifest_free(&m);
        ociwrite_close(pl.out);
        if (pl.curl)
                curl_easy_cleanup(pl.curl);
        if (pl.auth)
                explicit_bzero(pl.auth, strlen(pl.auth));
        free(pl.auth);
        return r;
}
