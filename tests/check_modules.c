/* check_modules.c: the daemon's modules call each other without a cycle, so that a module
 * can be read, tested and changed from the ones it calls, never from the ones that call it
 * (docs/architecture.md, "The daemon's modules and who may call whom"). Which module calls
 * which is read from the built objects themselves ($BUILD/obj/daemon/NAME.o, with nm): a
 * module calls another when it uses a symbol the other defines. Hooks (function pointers a
 * module is given, such as the sandbox's to its commands and the credential cache's to
 * the guard) are how a lower module reaches back; they are no edge here, as they are none
 * in the code's dependencies.
 *
 * The cycle finder is tested on a graph of its own first, so that a check that finds no
 * cycle means something. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_MODULES 96
#define MAX_SYMBOLS 4096

struct graph {
        char names[MAX_MODULES][32];
        int n;
        unsigned char edge[MAX_MODULES][MAX_MODULES];
        char why[MAX_MODULES][MAX_MODULES][64]; /* a symbol that makes the edge */
};

static int module_index(struct graph *g, const char *name) {
        int i;
        for (i = 0; i < g->n; i++)
                if (strcmp(g->names[i], name) == 0)
                        return i;
        ck_assert_int_lt(g->n, MAX_MODULES);
        snprintf(g->names[g->n], sizeof(g->names[0]), "%s", name);
        return g->n++;
}

static void add_edge(struct graph *g, int from, int to, const char *sym) {
        size_t n;

        if (from == to || g->edge[from][to])
                return;
        n = strnlen(sym, sizeof(g->why[0][0]) - 1);
        g->edge[from][to] = 1;
        memcpy(g->why[from][to], sym, n);
        g->why[from][to][n] = '\0';
}

/* Depth-first search for a cycle: state 0 new, 1 on the path, 2 done. Fills path (the
 * cycle's modules, from its first to its last) and returns its length, or 0. */
static int find_from(const struct graph *g, int v, int *state, int *stack, int depth, int *path) {
        int w;
        state[v] = 1;
        stack[depth] = v;
        for (w = 0; w < g->n; w++) {
                if (!g->edge[v][w])
                        continue;
                if (state[w] == 1) {
                        int i, k = 0;
                        for (i = 0; i <= depth && stack[i] != w; i++)
                                ;
                        for (; i <= depth; i++)
                                path[k++] = stack[i];
                        return k;
                }
                if (state[w] == 0) {
                        int k = find_from(g, w, state, stack, depth + 1, path);
                        if (k)
                                return k;
                }
        }
        state[v] = 2;
        return 0;
}

static int find_cycle(const struct graph *g, int *path) {
        int state[MAX_MODULES] = {0}, stack[MAX_MODULES], v, k;
        for (v = 0; v < g->n; v++)
                if (state[v] == 0 && (k = find_from(g, v, state, stack, 0, path)))
                        return k;
        return 0;
}

/* The cycle of path as text: "a -> b (sym) -> a (sym)". */
static void cycle_text(const struct graph *g, const int *path, int k, char *buf, size_t len) {
        size_t off = 0;
        int i;
        for (i = 0; i < k && off < len; i++) {
                int to = path[(i + 1) % k];
                off += (size_t)snprintf(buf + off, len - off, "%s -> %s (%s); ", g->names[path[i]],
                                        g->names[to], g->why[path[i]][to]);
        }
}

START_TEST(finder_finds_a_cycle) {
        static struct graph g;
        int path[MAX_MODULES], a, b, c, d, k;
        char text[512];

        memset(&g, 0, sizeof(g));
        a = module_index(&g, "a");
        b = module_index(&g, "b");
        c = module_index(&g, "c");
        d = module_index(&g, "d");
        add_edge(&g, a, b, "b_do");
        add_edge(&g, b, c, "c_do");
        add_edge(&g, a, d, "d_do");
        ck_assert_int_eq(find_cycle(&g, path), 0);
        add_edge(&g, c, a, "a_back");
        k = find_cycle(&g, path);
        ck_assert_int_eq(k, 3);
        cycle_text(&g, path, k, text, sizeof(text));
        ck_assert_str_eq(text, "a -> b (b_do); b -> c (c_do); c -> a (a_back); ");
}
END_TEST

struct sym {
        char name[64];
        int module;
};

/* Reads the daemon's objects into g: which module uses which one's symbols. */
static void read_objects(struct graph *g) {
        static struct sym defs[MAX_SYMBOLS], uses[4 * MAX_SYMBOLS];
        const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
        char dir[512], cmd[1200], line[512];
        size_t n_defs = 0, n_uses = 0, i, j;
        struct dirent *de;
        DIR *dp;

        snprintf(dir, sizeof(dir), "%s/obj/daemon", build);
        dp = opendir(dir);
        ck_assert_msg(dp != NULL, "no %s: build the daemon first (BUILD=%s)", dir, build);
        while ((de = readdir(dp))) {
                size_t len = strlen(de->d_name);
                char module[32];
                int m;
                FILE *f;

                if (len < 3 || strcmp(de->d_name + len - 2, ".o") != 0 ||
                    strcmp(de->d_name, "main.o") == 0)
                        continue;
                snprintf(module, sizeof(module), "%.*s", (int)(len - 2), de->d_name);
                m = module_index(g, module);
                snprintf(cmd, sizeof(cmd), "nm -P '%s/%s'", dir, de->d_name);
                f = popen(cmd, "r");
                ck_assert_ptr_nonnull(f);
                while (fgets(line, sizeof(line), f)) {
                        char name[64], type[4];
                        if (sscanf(line, "%63s %3s", name, type) != 2)
                                continue;
                        if (strcmp(type, "U") == 0 && n_uses < 4 * MAX_SYMBOLS)
                                uses[n_uses++] = (struct sym){.module = m};
                        else if (strchr("TDBR", type[0]) && n_defs < MAX_SYMBOLS)
                                defs[n_defs++] = (struct sym){.module = m};
                        else
                                continue;
                        snprintf(strcmp(type, "U") == 0 ? uses[n_uses - 1].name
                                                        : defs[n_defs - 1].name,
                                 sizeof(defs[0].name), "%s", name);
                }
                ck_assert_int_eq(pclose(f), 0);
        }
        closedir(dp);
        ck_assert_msg(g->n > 20 && n_defs > 100, "only %d modules, %zu symbols in %s", g->n, n_defs,
                      dir);
        for (i = 0; i < n_uses; i++)
                for (j = 0; j < n_defs; j++)
                        if (strcmp(uses[i].name, defs[j].name) == 0) {
                                add_edge(g, uses[i].module, defs[j].module, uses[i].name);
                                break;
                        }
}

START_TEST(daemon_modules_have_no_cycle) {
        static struct graph g;
        int path[MAX_MODULES], k;
        char text[2048] = "";

        memset(&g, 0, sizeof(g));
        read_objects(&g);
        k = find_cycle(&g, path);
        if (k)
                cycle_text(&g, path, k, text, sizeof(text));
        ck_assert_msg(k == 0, "a cycle between daemon modules: %s", text);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("modules");
        TCase *tc = tcase_create("calls");

        /* nm over every object: seconds on a loaded machine, past Check's default 4 s. */
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, finder_finds_a_cycle);
        tcase_add_test(tc, daemon_modules_have_no_cycle);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
