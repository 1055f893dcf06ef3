/* cli_image.c: `sbx image pull|ls|rm|inspect|prune`, the container images of the
 * caller (docs/images.md), through libsbx's image calls.
 *
 * A pull shows a progress bar on stderr when stderr is a terminal, one line per layer
 * done otherwise (none with --json), and prints the image (NAME DIGEST, or --json its
 * object). Registry credentials are the client's business: --registry-auth USER:PASS,
 * else the entry for the image's registry in the user's own auth files
 * ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json,
 * read in that order; an "auth" of base64 "user:password" or a "registrytoken"); they
 * go to the daemon with the one pull and are never written anywhere. A local source's
 * relative path is made absolute here (the daemon does not know our directory). */
#define CLI_NO_JSON_WRITER
#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Layers a pull's progress keeps (REGISTRY_MAX_LAYERS of the daemon). */
#define PULL_MAX_LAYERS 128u

/* "12.3 MiB" */
static void human_bytes(char *buf, size_t len, uint64_t b) {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = (double)b;
        size_t u = 0;

        while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
                v /= 1024;
                u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* ---- credentials ----------------------------------------------------------------------- */

static int b64_value(int ch) {
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* base64 (padded or not) into a new NUL-terminated string; NULL when it is not base64. */
static char *b64_decode(const char *s) {
        size_t n = strlen(s), o = 0;
        char *out = malloc(n + 1);
        unsigned acc = 0;
        int bits = 0;

        for (size_t i = 0; out && i < n && s[i] != '='; i++) {
                int v = b64_value((unsigned char)s[i]);
                if (v < 0) {
                        free(out);
                        return NULL;
                }
                acc = (acc << 6) | (unsigned)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (char)((acc >> bits) & 0xff);
                }
        }
        if (out)
                out[o] = '\0';
        return out;
}

/* The registry host of a reference as Docker reads it, and the keys an auth file may
 * file it under. */
static void registry_of(const char *ref, char *buf, size_t len) {
        const char *slash = strchr(ref, '/');
        size_t n = slash ? (size_t)(slash - ref) : 0;

        if (slash && (memchr(ref, '.', n) || memchr(ref, ':', n) ||
                      (n == 9 && strncmp(ref, "localhost", 9) == 0))) {
                snprintf(buf, len, "%.*s", (int)n, ref);
                return;
        }
        snprintf(buf, len, "docker.io");
}

/* The entry of auths for host (docker.io also under Docker's historic URL). */
static json_t *auth_entry(json_t *auths, const char *host) {
        json_t *e = json_object_get(auths, host);
        char url[320];

        if (!e && strcmp(host, "docker.io") == 0)
                e = json_object_get(auths, "https://index.docker.io/v1/");
        if (!e) {
                snprintf(url, sizeof(url), "https://%s", host);
                e = json_object_get(auths, url);
        }
        return e;
}

/* Fills *a from the auth file path for host: 1 found, 0 not. The strings are new. */
static int auth_from_file(const char *path, const char *host, struct sbx_registry_auth *a) {
        json_t *root = json_load_file(path, 0, NULL);
        json_t *e = auth_entry(json_object_get(root, "auths"), host);
        const char *enc = json_string_value(json_object_get(e, "auth"));
        const char *tok = json_string_value(json_object_get(e, "registrytoken"));
        char *plain, *colon;
        int found = 0;

        if (enc && (plain = b64_decode(enc))) {
                colon = strchr(plain, ':');
                if (colon) {
                        *colon = '\0';
                        a->username = plain;
                        a->password = strdup(colon + 1);
                        found = a->password != NULL;
                } else {
                        free(plain);
                }
        } else if (tok && tok[0]) {
                a->token = strdup(tok);
                found = a->token != NULL;
        }
        json_decref(root);
        return found;
}

/* The user's credentials for the registry of ref from their auth files, into *a. */
static void auth_from_files(const char *ref, struct sbx_registry_auth *a) {
        const char *env = getenv("REGISTRY_AUTH_FILE"), *run = getenv("XDG_RUNTIME_DIR");
        const char *home = getenv("HOME");
        char host[256], path[PATH_MAX];

        registry_of(ref, host, sizeof(host));
        if (env && env[0] && auth_from_file(env, host, a))
                return;
        if (run && run[0]) {
                snprintf(path, sizeof(path), "%s/containers/auth.json", run);
                if (auth_from_file(path, host, a))
                        return;
        }
        if (home && home[0]) {
                snprintf(path, sizeof(path), "%s/.docker/config.json", home);
                (void)auth_from_file(path, host, a);
        }
}

static void auth_clear(struct sbx_registry_auth *a) {
        char *v[3] = {(char *)(uintptr_t)a->username, (char *)(uintptr_t)a->password,
                      (char *)(uintptr_t)a->token};

        for (size_t i = 0; i < 3; i++)
                if (v[i]) {
                        explicit_bzero(v[i], strlen(v[i]));
                        free(v[i]);
                }
        memset(a, 0, sizeof(*a));
}

/* ---- pull ------------------------------------------------------------------------------ */

struct pull_view {
        bool bar;   /* a terminal: one line redrawn */
        bool lines; /* else one line per layer done */
        uint32_t count;
        uint64_t done[PULL_MAX_LAYERS], total[PULL_MAX_LAYERS];
        bool finished[PULL_MAX_LAYERS];
        bool unpacking;
        bool drawn;
};

static void draw_bar(struct pull_view *v) {
        uint64_t done = 0, total = 0;
        uint32_t full = 0;
        char a[32], b[32], bar[31];
        size_t fill;

        for (uint32_t i = 0; i < v->count; i++) {
                done += v->done[i];
                total += v->total[i];
                full += v->finished[i];
        }
        fill = total ? (size_t)(30 * (double)done / (double)total) : 0;
        memset(bar, '#', fill);
        memset(bar + fill, ' ', 30 - fill);
        bar[30] = '\0';
        human_bytes(a, sizeof(a), done);
        human_bytes(b, sizeof(b), total);
        fprintf(stderr, "\r[%s] %u/%u layers  %s / %s%s\033[K", bar, full, v->count, a, b,
                v->unpacking ? "  unpacking" : "");
        fflush(stderr);
        v->drawn = true;
}

static void on_progress(void *ud, const struct sbx_image_progress *p) {
        struct pull_view *v = ud;
        char a[32];

        if (strcmp(p->phase, "unpack") == 0) {
                if (!v->unpacking && v->lines)
                        fprintf(stderr, "unpacking layers\n");
                v->unpacking = true;
        } else if (p->index < PULL_MAX_LAYERS && p->count <= PULL_MAX_LAYERS) {
                v->count = p->count;
                v->done[p->index] = p->done_bytes;
                v->total[p->index] = p->total_bytes;
                if (p->done_bytes == p->total_bytes && !v->finished[p->index]) {
                        v->finished[p->index] = true;
                        human_bytes(a, sizeof(a), p->total_bytes);
                        if (v->lines)
                                fprintf(stderr, "layer %u/%u %.19s %s %s\n", p->index + 1, p->count,
                                        p->digest, a, p->reused ? "already here" : "downloaded");
                }
        }
        if (v->bar)
                draw_bar(v);
}

/* source with a relative local path made absolute, a new string. */
static char *absolute_source(const char *source) {
        static const char *const prefixes[] = {"oci:", "oci-archive:", "docker-archive:"};
        char cwd[PATH_MAX], *out;

        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t n = strlen(prefixes[i]);
                if (strncmp(source, prefixes[i], n) != 0 || source[n] == '/')
                        continue;
                if (!getcwd(cwd, sizeof(cwd)) ||
                    asprintf(&out, "%s%s/%s", prefixes[i], cwd, source + n) < 0)
                        return NULL;
                return out;
        }
        return strdup(source);
}

static void json_image(json_t *o, const struct sbx_image *img);

static int print_pulled(const struct sbx_image *img, bool json) {
        json_t *o;
        int r;

        if (!json) {
                printf("%s %s\n", img->names.n ? img->names.v[0] : "-", img->digest);
                return 0;
        }
        o = json_object();
        if (!o)
                return cli_error(SBX_INTERNAL, "out of memory");
        json_image(o, img);
        json_object_set_new(o, "downloaded_bytes", json_integer((json_int_t)img->downloaded_bytes));
        r = cli_json_print(stdout, o);
        json_decref(o);
        return r < 0 ? CLI_EXIT_ERROR : 0;
}

/* Pulls source on c with auth (may be empty), showing progress on stderr when show (a
 * bar on a terminal, a line per layer elsewhere). The call timeout is lifted for it: the
 * daemon bounds a pull's stalls itself. */
static enum sbx_code pull_with(sbx_client *c, const char *source, struct sbx_registry_auth *auth,
                               bool show, struct sbx_image **ret) {
        struct pull_view view = {0};
        struct sbx_pull_opts po = {0};
        enum sbx_code rc;

        view.bar = show && isatty(2);
        view.lines = show && !view.bar;
        po.auth = auth->username || auth->token ? auth : NULL;
        po.on_progress = show ? on_progress : NULL;
        po.userdata = &view;
        sbx_set_call_timeout_ms(c, 0);
        rc = sbx_image_pull(c, source, &po, ret);
        if (view.drawn)
                fputc('\n', stderr);
        return rc;
}

static int image_pull(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {
                {"json", false, 0}, {"registry-auth", true, 0}, {NULL, false, 0}};
        struct sbx_registry_auth auth = {0};
        struct sbx_image *img = NULL;
        const char *ref = NULL, *given = NULL;
        char *source = NULL, *colon;
        struct cli_opts p;
        sbx_client *c;
        bool json = false;
        enum sbx_code rc;
        int k, status = 0;

        cli_opts_init(&p, cli, argc, argv, opts);
        while (!status && (k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        status = CLI_EXIT_ERROR;
                else if (k == CLI_OPT_HELP)
                        status = -1;
                else if (k == CLI_OPT_POS && ref)
                        status = cli_usage_error("sbx image pull takes one image");
                else if (k == CLI_OPT_POS)
                        ref = p.arg;
                else if (k == 0)
                        json = true;
                else
                        given = p.arg;
        }
        if (status < 0)
                cli_usage(stdout, "image");
        if (status)
                return status < 0 ? 0 : status;
        if (!ref)
                return cli_usage_error("sbx image pull needs an image (python:3.12-slim, "
                                       "oci:DIR, oci-archive:FILE, docker-archive:FILE)");
        if (given) {
                colon = strchr(given, ':');
                if (!colon || colon == given)
                        return cli_bad_value("image pull", "--registry-auth", given,
                                             "USER:PASSWORD");
                auth.username = strndup(given, (size_t)(colon - given));
                auth.password = strdup(colon + 1);
        } else {
                auth_from_files(ref, &auth);
        }
        source = absolute_source(ref);
        if (!source || (given && (!auth.username || !auth.password))) {
                auth_clear(&auth);
                free(source);
                return cli_error(SBX_INTERNAL, "out of memory");
        }
        if ((status = cli_connect(cli, &c)) == 0) {
                rc = pull_with(c, source, &auth, !json, &img);
                status = rc == SBX_OK ? print_pulled(img, json) : cli_client_error(c, rc);
                sbx_image_free(img);
                sbx_close(c);
        }
        auth_clear(&auth);
        free(source);
        return status;
}

int cli_image_fetch(sbx_client *c, const char *ref) {
        struct sbx_registry_auth auth = {0};
        struct sbx_image *img = NULL;
        enum sbx_code rc;

        auth_from_files(ref, &auth);
        if (isatty(2))
                fprintf(stderr, "pulling %s\n", ref);
        rc = pull_with(c, ref, &auth, true, &img);
        auth_clear(&auth);
        sbx_image_free(img);
        return rc;
}

/* ---- ls, inspect ----------------------------------------------------------------------- */

/* A string as valid UTF-8 (a path of a local source may not be). */
static json_t *text(const char *s) {
        return cli_json_text(s, strlen(s));
}

static json_t *strv_json(const struct sbx_strv *s) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < s->n; i++)
                json_array_append_new(a, text(s->v[i]));
        return a;
}

static json_t *opt_string(const char *s) {
        return s ? text(s) : json_null();
}

/* Labels as an object, by key. */
static json_t *labels_json(const struct sbx_label *l, size_t n) {
        json_t *o = json_object();

        for (size_t i = 0; o && i < n; i++)
                json_object_set_new(o, l[i].key, text(l[i].value));
        return o;
}

static void json_image(json_t *o, const struct sbx_image *img) {
        json_object_set_new(o, "names", strv_json(&img->names));
        json_object_set_new(o, "digest", text(img->digest));
        json_object_set_new(o, "size_bytes", json_integer((json_int_t)img->size_bytes));
        json_object_set_new(o, "data_bytes", json_integer((json_int_t)img->data_bytes));
        json_object_set_new(o, "sandboxes", json_integer(img->sandboxes));
        json_object_set_new(o, "created_unix_ms", json_integer(img->created_unix_ms));
        json_object_set_new(o, "last_used_unix_ms", json_integer(img->last_used_unix_ms));
        json_object_set_new(o, "layers", strv_json(&img->layers));
        if (img->config) {
                const struct sbx_image_config *c = img->config;
                json_t *cj = json_object();
                json_object_set_new(cj, "env", strv_json(&c->env));
                json_object_set_new(cj, "entrypoint", strv_json(&c->entrypoint));
                json_object_set_new(cj, "cmd", strv_json(&c->cmd));
                json_object_set_new(cj, "working_dir", opt_string(c->working_dir));
                json_object_set_new(cj, "user", opt_string(c->user));
                json_object_set_new(cj, "os", opt_string(c->os));
                json_object_set_new(cj, "architecture", opt_string(c->architecture));
                json_object_set_new(cj, "variant", opt_string(c->variant));
                json_object_set_new(cj, "labels", labels_json(c->labels, c->n_labels));
                json_object_set_new(o, "config", cj);
        }
}

/* Parses the options of a subcommand that takes only --json and npos..max names, then
 * connects (*ret_c). 0; -1 after --help; or the exit status of a failure (printed). */
static int parse_names(struct cli *cli, int argc, char **argv, size_t npos, size_t max,
                       const char **names, size_t *ret_n, bool *json, sbx_client **ret_c) {
        static const struct cli_opt opts[] = {{"json", false, 0}, {NULL, false, 0}};
        struct cli_opts p;
        size_t n = 0;
        int k;

        cli_opts_init(&p, cli, argc, argv, opts);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "image");
                        return -1;
                }
                if (k == CLI_OPT_POS) {
                        if (n == max)
                                return cli_usage_error("unexpected argument '%s' for sbx %s", p.arg,
                                                       argv[0]);
                        names[n++] = p.arg;
                } else {
                        *json = true;
                }
        }
        if (n < npos)
                return cli_usage_error("sbx %s needs an image name", argv[0]);
        *ret_n = n;
        return cli_connect(cli, ret_c);
}

static int image_ls(struct cli *cli, int argc, char **argv) {
        struct sbx_image_list *l = NULL;
        bool json = false;
        sbx_client *c;
        enum sbx_code rc;
        size_t n;
        int status = parse_names(cli, argc, argv, 0, 0, NULL, &n, &json, &c);

        if (status)
                return status < 0 ? 0 : status;
        rc = sbx_image_list(c, &l);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json) {
                json_t *a = json_array();
                for (size_t i = 0; a && i < l->n; i++) {
                        json_t *o = json_object();
                        json_image(o, &l->v[i]);
                        json_array_append_new(a, o);
                }
                status = a && cli_json_print(stdout, a) == 0 ? 0 : CLI_EXIT_ERROR;
                json_decref(a);
        } else {
                /* The name column as wide as the longest name (shown as written). */
                int w = 4;
                for (size_t i = 0; i < l->n; i++)
                        for (size_t j = 0; j < l->v[i].names.n; j++)
                                if ((int)strlen(l->v[i].names.v[j]) > w)
                                        w = (int)strlen(l->v[i].names.v[j]);
                printf("%-*s %-19s %10s %9s %s\n", w, "NAME", "DIGEST", "SIZE", "SANDBOXES",
                       "LAST USED");
                for (size_t i = 0; i < l->n; i++) {
                        const struct sbx_image *img = &l->v[i];
                        char size[32], when[40];
                        human_bytes(size, sizeof(size), img->size_bytes);
                        cli_format_iso(when, sizeof(when), img->last_used_unix_ms, false);
                        for (size_t j = 0; j < (img->names.n ? img->names.n : 1); j++) {
                                const char *name = img->names.n ? img->names.v[j] : "-";
                                cli_put_text(stdout, name);
                                printf("%*s %.19s %10s %9u %s\n", w - (int)strlen(name), "",
                                       img->digest, size, img->sandboxes, when);
                        }
                }
        }
        sbx_image_list_free(l);
        sbx_close(c);
        return status;
}

static int image_inspect(struct cli *cli, int argc, char **argv) {
        struct sbx_image *img = NULL;
        const char *name;
        bool json = true;
        sbx_client *c;
        enum sbx_code rc;
        size_t n;
        int status = parse_names(cli, argc, argv, 1, 1, &name, &n, &json, &c);

        if (status)
                return status < 0 ? 0 : status;
        rc = sbx_image_inspect(c, name, &img);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else {
                json_t *o = json_object();
                if (o)
                        json_image(o, img);
                status = o && cli_json_print(stdout, o) == 0 ? 0 : CLI_EXIT_ERROR;
                json_decref(o);
        }
        sbx_image_free(img);
        sbx_close(c);
        return status;
}

/* ---- rm, prune ------------------------------------------------------------------------- */

static void print_removed(const struct sbx_removed_images *r) {
        char freed[32];

        for (size_t i = 0; i < r->names.n; i++) {
                printf("removed ");
                cli_put_text(stdout, r->names.v[i]);
                putchar('\n');
        }
        human_bytes(freed, sizeof(freed), r->freed_bytes);
        if (r->freed_bytes)
                printf("freed %s\n", freed);
}

static int image_rm(struct cli *cli, int argc, char **argv) {
        const char **names = calloc((size_t)argc + 1, sizeof(*names));
        struct sbx_removed_images *r;
        bool json = false;
        sbx_client *c;
        enum sbx_code rc;
        size_t n = 0;
        int status = names ? parse_names(cli, argc, argv, 1, (size_t)argc, names, &n, &json, &c)
                           : cli_error(SBX_INTERNAL, "out of memory");

        if (status) {
                free(names);
                return status < 0 ? 0 : status;
        }
        for (size_t i = 0; i < n; i++) {
                rc = sbx_image_remove(c, names[i], &r);
                if (rc != SBX_OK) {
                        status = cli_client_error(c, rc);
                        continue;
                }
                print_removed(r);
                sbx_removed_images_free(r);
        }
        sbx_close(c);
        free(names);
        return status;
}

static int image_prune(struct cli *cli, int argc, char **argv) {
        struct sbx_removed_images *r = NULL;
        bool json = false;
        sbx_client *c;
        enum sbx_code rc;
        size_t n;
        int status = parse_names(cli, argc, argv, 0, 0, NULL, &n, &json, &c);

        if (status)
                return status < 0 ? 0 : status;
        rc = sbx_image_prune(c, &r);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "removed", strv_json(&r->names));
                json_object_set_new(o, "freed_bytes", json_integer((json_int_t)r->freed_bytes));
                status = cli_json_print(stdout, o) == 0 ? 0 : CLI_EXIT_ERROR;
                json_decref(o);
        } else {
                print_removed(r);
        }
        sbx_removed_images_free(r);
        sbx_close(c);
        return status;
}

/* ---- export ---------------------------------------------------------------------------- */

/* sbx image export NAME FILE: an OCI archive written to FILE ("-": stdout), with this
 * user's rights; a file the export could not finish is removed. */
static int image_export(struct cli *cli, int argc, char **argv) {
        const char *args[2];
        struct sbx_image *img = NULL;
        bool json = false, to_stdout;
        sbx_client *c;
        enum sbx_code rc;
        size_t n;
        int status = parse_names(cli, argc, argv, 2, 2, args, &n, &json, &c), fd;

        if (status)
                return status < 0 ? 0 : status;
        to_stdout = strcmp(args[1], "-") == 0;
        fd = to_stdout ? STDOUT_FILENO
                       : open(args[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
                sbx_close(c);
                return cli_error(SBX_INVALID_ARGUMENT, "cannot write %s: %s", args[1],
                                 strerror(errno));
        }
        sbx_set_call_timeout_ms(c, 0); /* the daemon writes the archive first */
        rc = sbx_image_export(c, args[0], fd, &img);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
                if (!to_stdout)
                        unlink(args[1]);
        } else if (!to_stdout) {
                printf("%s %s\n", img->names.n ? img->names.v[0] : "-", img->digest);
        }
        if (!to_stdout && close(fd) < 0 && status == 0)
                status = cli_error(SBX_UNAVAILABLE, "writing %s: %s", args[1], strerror(errno));
        sbx_image_free(img);
        sbx_close(c);
        return status;
}

/* ---- snapshot ------------------------------------------------------------------------- */

int cmd_snapshot(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {{"json", false, 0}, {"name", true, 0}, {NULL, false, 0}};
        struct sbx_image *img = NULL;
        const char *id = NULL, *name = NULL;
        struct cli_opts p;
        sbx_client *c;
        bool json = false;
        enum sbx_code rc;
        int k, status = 0;

        cli_opts_init(&p, cli, argc, argv, opts);
        while (!status && (k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        status = CLI_EXIT_ERROR;
                else if (k == CLI_OPT_HELP)
                        status = -1;
                else if (k == CLI_OPT_POS && id)
                        status = cli_usage_error("sbx snapshot takes one sandbox ID");
                else if (k == CLI_OPT_POS)
                        id = p.arg;
                else if (k == 0)
                        json = true;
                else
                        name = p.arg;
        }
        if (status < 0)
                cli_usage(stdout, "snapshot");
        if (status)
                return status < 0 ? 0 : status;
        if (!id)
                return cli_usage_error("sbx snapshot needs a sandbox ID");
        if ((status = cli_connect(cli, &c)) != 0)
                return status;
        rc = sbx_snapshot(c, id, name, &img);
        status = rc == SBX_OK ? print_pulled(img, json) : cli_client_error(c, rc);
        sbx_image_free(img);
        sbx_close(c);
        return status;
}

/* The most sandboxes one sbx fork makes. */
#define CLI_MAX_FORKS 256u

/* sbx fork's own options (the others are sbx create's) and its sandbox ID. */
enum { F_COUNT, F_NAME };
static const struct cli_opt fork_opts[] = {
        [F_COUNT] = {"count", true, 'n'}, [F_NAME] = {"name", true, 0}, {NULL, false, 0}};

struct fork_args {
        const char *id;
        struct sbx_fork_opts fo;
};

static int fork_opt(void *userdata, int k, const char *arg) {
        struct fork_args *a = userdata;
        uint64_t count;

        if (k == CLI_OPT_POS && a->id)
                return cli_usage_error("sbx fork takes one sandbox ID");
        if (k == CLI_OPT_POS)
                a->id = arg;
        else if (k == F_NAME)
                a->fo.snapshot_name = arg;
        else if (cli_parse_uint(arg, CLI_MAX_FORKS, &count) < 0 || !count)
                return cli_bad_value("fork", "--count", arg, "1 to 256");
        else
                a->fo.count = (unsigned)count;
        return 0;
}

/* Parses fork's command line over the settings of src (NULL: the defaults) into *ca and
 * *fa. 0, -1 after --help, or an exit status (printed). */
static int parse_fork(struct cli *cli, int argc, char **argv, const struct sbx_sandbox *src,
                      struct cli_create_args *ca, struct fork_args *fa) {
        const struct cli_create_extra extra = {fork_opts, fork_opt, fa};
        int status;

        *fa = (struct fork_args){.fo.count = 1};
        if (src)
                sbx_create_opts_from_sandbox(&ca->opts, src);
        else
                sbx_create_opts_init(&ca->opts);
        status = cli_parse_create(cli, argc, argv, &extra, ca);
        if (status)
                return status;
        if (!fa->id)
                return cli_usage_error("sbx fork needs a sandbox ID");
        if (ca->opts.id)
                return cli_usage_error("sbx fork takes no --id: its sandboxes get new IDs, one "
                                       "each");
        if (ca->opts.image)
                return cli_usage_error("sbx fork takes no --image: its sandboxes start from a "
                                       "snapshot of the sandbox ID");
        return 0;
}

static int print_fork(const struct sbx_fork *f, bool json) {
        json_t *a;
        int status;

        if (!json) {
                for (size_t i = 0; i < f->n; i++)
                        printf("%s\n", f->ids[i]);
                return 0;
        }
        a = json_array();
        for (size_t i = 0; a && i < f->n; i++)
                json_array_append_new(a, json_string(f->ids[i]));
        status = a && cli_json_print(stdout, a) == 0 ? 0 : CLI_EXIT_ERROR;
        json_decref(a);
        return status;
}

/* sbx fork [-n N] [--name NAME] [--json] [CREATE OPTIONS] ID: the options of sbx create
 * over the source's settings. The command line is parsed twice: first over the
 * defaults, so that every value is checked and the ID found before the daemon is asked
 * anything (a bad one makes no snapshot), then over the source's settings (sbx_get). */
int cmd_fork(struct cli *cli, int argc, char **argv) {
        struct cli_create_args ca = {0};
        struct sbx_sandbox *src = NULL;
        struct sbx_fork *f = NULL;
        struct fork_args fa;
        sbx_client *c = NULL;
        enum sbx_code rc;
        int status = parse_fork(cli, argc, argv, NULL, &ca, &fa);

        cli_create_args_free(&ca);
        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)) != 0)
                return status;
        rc = sbx_get(c, fa.id, &src);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if ((status = parse_fork(cli, argc, argv, src, &ca, &fa)) == 0) {
                fa.fo.create = &ca.opts;
                rc = sbx_fork(c, fa.id, &fa.fo, &f);
                status = rc == SBX_OK ? print_fork(f, ca.json) : cli_client_error(c, rc);
        }
        cli_create_args_free(&ca);
        sbx_fork_free(f);
        sbx_sandbox_free(src);
        sbx_close(c);
        return status < 0 ? 0 : status;
}

int cmd_image(struct cli *cli, int argc, char **argv) {
        static const struct {
                const char *name;
                int (*fn)(struct cli *, int, char **);
        } subs[] = {{"pull", image_pull}, {"ls", image_ls},           {"list", image_ls},
                    {"rm", image_rm},     {"inspect", image_inspect}, {"prune", image_prune},
                    {"export", image_export}};
        char name[32];

        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                cli_usage(argc < 2 ? stderr : stdout, "image");
                return argc < 2 ? CLI_EXIT_ERROR : 0;
        }
        for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
                if (strcmp(argv[1], subs[i].name) == 0) {
                        /* Its messages say "sbx image NAME". */
                        snprintf(name, sizeof(name), "image %s", subs[i].name);
                        argv[1] = name;
                        return subs[i].fn(cli, argc - 1, argv + 1);
                }
        return cli_usage_error("unknown command 'sbx image %s' (pull, ls, rm, inspect, prune)",
                               argv[1]);
}
