/* imageconfig.c: an image's config (OCI's application/vnd.oci.image.config.v1+json)
 * read into struct imageconfig with jansson; see imageconfig.h. */
#include "imageconfig.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* 1 when o has no member key, a null one or a string. */
static int opt_ok(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return !v || json_is_null(v) || json_is_string(v);
}

/* A copy of the string j, or NULL (absent, null, or not a string). */
static char *opt_str(json_t *j) {
        return json_is_string(j) ? strdup(json_string_value(j)) : NULL;
}

/* The array of strings j into *ret (NULL-terminated) and *n. Absent or null: none. */
static int str_array(json_t *j, char ***ret, size_t *n) {
        json_t *v;
        size_t i;

        *ret = NULL;
        *n = 0;
        if (!j || json_is_null(j))
                return 0;
        if (!json_is_array(j))
                return -EINVAL;
        *ret = calloc(json_array_size(j) + 1, sizeof(char *));
        if (!*ret)
                return -ENOMEM;
        json_array_foreach(j, i, v) {
                if (!json_is_string(v))
                        return -EINVAL;
                if (!((*ret)[i] = strdup(json_string_value(v))))
                        return -ENOMEM;
                (*n)++;
        }
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_strv(char **v, size_t n) {
        size_t i;
        for (i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

void imageconfig_free(struct imageconfig *c) {
        if (!c)
                return;
        free(c->os);
        free(c->arch);
        free(c->variant);
        free_strv(c->env, c->nenv);
        free_strv(c->entrypoint, c->nentrypoint);
        free_strv(c->cmd, c->ncmd);
        free(c->working_dir);
        free(c->user);
        free_strv(c->label_keys, c->nlabels);
        free_strv(c->label_values, c->nlabels);
        memset(c, 0, sizeof(*c));
}

/* Labels' string values into c, sorted by key (others are left out). 0 or -ENOMEM. */
static int parse_labels(json_t *labels, struct imageconfig *c) {
        size_t n = json_is_object(labels) ? json_object_size(labels) : 0;
        const char **keys;
        const char *key;
        json_t *v;
        size_t i = 0;

        if (n == 0)
                return 0;
        keys = calloc(n, sizeof(*keys));
        c->label_keys = calloc(n, sizeof(char *));
        c->label_values = calloc(n, sizeof(char *));
        if (!keys || !c->label_keys || !c->label_values) {
                free(keys);
                return -ENOMEM;
        }
        json_object_foreach(labels, key, v)
                if (json_is_string(v))
                        keys[i++] = key;
        qsort(keys, i, sizeof(*keys), cmp_str);
        for (n = i, i = 0; i < n; i++) {
                c->label_keys[i] = strdup(keys[i]);
                c->label_values[i] =
                        strdup(json_string_value(json_object_get(labels, keys[i])));
                c->nlabels = i + 1;
                if (!c->label_keys[i] || !c->label_values[i]) {
                        free(keys);
                        return -ENOMEM;
                }
        }
        free(keys);
        return 0;
}

static int parse_config(json_t *j, struct imageconfig *c) {
        json_t *cfg = json_object_get(j, "config");
        int q;

        memset(c, 0, sizeof(*c));
        if (!json_is_object(j) || (cfg && !json_is_null(cfg) && !json_is_object(cfg)))
                return -EINVAL;
        /* Present but not strings: as malformed as a list that is not one. */
        if (!opt_ok(j, "os") || !opt_ok(j, "architecture") || !opt_ok(j, "variant") ||
            !opt_ok(cfg, "WorkingDir") || !opt_ok(cfg, "User"))
                return -EINVAL;
        c->os = opt_str(json_object_get(j, "os"));
        c->arch = opt_str(json_object_get(j, "architecture"));
        c->variant = opt_str(json_object_get(j, "variant"));
        c->working_dir = opt_str(json_object_get(cfg, "WorkingDir"));
        c->user = opt_str(json_object_get(cfg, "User"));
        {
                json_t *labels = json_object_get(cfg, "Labels");
                json_t *ws = json_is_object(labels)
                                     ? json_object_get(labels, IMAGECONFIG_LABEL_WORKSPACE)
                                     : NULL;
                json_t *bytes = json_is_object(labels)
                                        ? json_object_get(labels, IMAGECONFIG_LABEL_BYTES)
                                        : NULL;
                c->snapshot_workspace = json_is_string(ws) && strcmp(json_string_value(ws), "1") == 0;
                if (json_is_string(bytes))
                        c->snapshot_bytes = strtoull(json_string_value(bytes), NULL, 10);
        }
        q = str_array(json_object_get(cfg, "Env"), &c->env, &c->nenv);
        if (q == 0)
                q = str_array(json_object_get(cfg, "Entrypoint"), &c->entrypoint, &c->nentrypoint);
        if (q == 0)
                q = str_array(json_object_get(cfg, "Cmd"), &c->cmd, &c->ncmd);
        if (q == 0)
                q = parse_labels(json_object_get(cfg, "Labels"), c);
        return q;
}

/* parse_config of j (NULL: not JSON), taking j. */
static int parse_and_drop(json_t *j, struct imageconfig *ret) {
        int q;

        memset(ret, 0, sizeof(*ret));
        q = j ? parse_config(j, ret) : -EINVAL;
        json_decref(j);
        if (q < 0)
                imageconfig_free(ret);
        return q;
}

int imageconfig_parse(const char *buf, size_t len, struct imageconfig *ret) {
        return parse_and_drop(json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL), ret);
}

int imageconfig_load(int fd, struct imageconfig *ret) {
        return parse_and_drop(json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL), ret);
}
