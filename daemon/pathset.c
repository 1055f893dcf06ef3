/* pathset.c: reference-counted path lists and their builder; see pathset.h. */
#include "pathset.h"

#include <stdlib.h>
#include <string.h>

char *pathset_list_add(struct pathset_list *s, char *str) {
        if (!str)
                return NULL;
        if (s->n == s->cap) {
                size_t nc = s->cap ? s->cap * 2 : 16;
                char **nv = realloc(s->v, nc * sizeof(*nv));
                if (!nv) {
                        free(str);
                        return NULL;
                }
                s->v = nv;
                s->cap = nc;
        }
        s->v[s->n++] = str;
        return str;
}

int pathset_list_has(const struct pathset_list *s, const char *str) {
        size_t i;
        for (i = 0; i < s->n; i++)
                if (strcmp(s->v[i], str) == 0)
                        return 1;
        return 0;
}

void pathset_list_free(struct pathset_list *s) {
        size_t i;
        for (i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        memset(s, 0, sizeof(*s));
}

struct pathset *pathset_freeze(struct pathset_list *s) {
        struct pathset *p = calloc(1, sizeof(*p));
        if (!p) {
                pathset_list_free(s);
                return NULL;
        }
        p->refs = 1;
        p->n = s->n;
        p->v = s->v;
        memset(s, 0, sizeof(*s));
        return p;
}

struct pathset *pathset_ref(struct pathset *s) {
        if (s)
                s->refs++;
        return s;
}

void pathset_unref(struct pathset *s) {
        size_t i;
        if (!s || --s->refs > 0)
                return;
        for (i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        free(s);
}
