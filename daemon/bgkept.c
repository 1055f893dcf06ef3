/* bgkept.c: the ended background commands a sandbox keeps; see bgkept.h. */
#include "bgkept.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void entry_free(struct bgkept_entry *e) {
        size_t i;
        for (i = 0; e->argv && i < e->argc; i++)
                free(e->argv[i]);
        free(e->argv);
        free(e->result);
        (void)quota_hold_to(&e->hold, 0);
        free(e);
}

/* A copy of argv (argc strings), or NULL. */
static char **argv_copy(const char *const *argv, size_t argc) {
        char **v = calloc(argc ? argc : 1, sizeof(*v));
        size_t i;

        if (!v)
                return NULL;
        for (i = 0; i < argc; i++)
                if (!(v[i] = strdup(argv[i]))) {
                        while (i > 0)
                                free(v[--i]);
                        free(v);
                        return NULL;
                }
        return v;
}

static void drop_oldest(struct bgkept *k) {
        struct bgkept_entry *e = k->head;

        k->head = e->next;
        if (!k->head)
                k->tail = NULL;
        k->n--;
        k->bytes -= e->result_len;
        entry_free(e);
}

int bgkept_add(struct bgkept *k, const struct bgkept_entry *src, const char *const *argv,
               size_t argc, const Sbx__V1__CommandResult *res, const struct quota_bound *b) {
        struct bgkept_entry *e = malloc(sizeof(*e));
        int r;

        if (!e)
                return -ENOMEM;
        *e = *src;
        e->next = NULL;
        e->argc = 0;
        e->argv = NULL;
        e->result = NULL;
        e->result_len = sbx__v1__command_result__get_packed_size(res);
        e->hold = (struct quota_hold){.b = b, .uid = src->caller_uid};
        r = quota_hold_to(&e->hold, e->result_len);
        if (r < 0) {
                free(e);
                return r;
        }
        e->argc = argc;
        e->argv = argv_copy(argv, argc);
        e->result = malloc(e->result_len ? e->result_len : 1);
        if (!e->argv || !e->result) {
                e->argc = e->argv ? argc : 0;
                entry_free(e);
                return -ENOMEM;
        }
        sbx__v1__command_result__pack(res, e->result);
        if (k->tail)
                k->tail->next = e;
        else
                k->head = e;
        k->tail = e;
        k->n++;
        k->bytes += e->result_len;
        while (k->head != e &&
               (k->n > SBX_KEPT_BACKGROUND_RESULTS || k->bytes > SBX_KEPT_BACKGROUND_BYTES))
                drop_oldest(k);
        return 0;
}

const struct bgkept_entry *bgkept_find(const struct bgkept *k, const char *id) {
        const struct bgkept_entry *e;
        for (e = k->head; e; e = e->next)
                if (strcmp(e->id, id ? id : "") == 0)
                        return e;
        return NULL;
}

void bgkept_clear(struct bgkept *k) {
        while (k->head)
                drop_oldest(k);
        k->bytes = 0;
}
