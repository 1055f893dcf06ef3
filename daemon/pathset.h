/* pathset.h: immutable, reference-counted lists of paths, and the growable lists they
 * are built from.
 *
 * A sandbox's view (policy.h) is a handful of path lists that several holders keep for
 * as long as they need them: the sandbox, the guard's watches (guard.h), the file
 * operations' picture of the view (files.c), and the shared credential list
 * (credcache.h) that every sandbox with the host's root shares. They are built with a
 * struct pathset_list, then frozen into a struct pathset that nobody changes again and
 * that each holder references. Plain memory and counts, no locks: the event loop's
 * only. No logging. */
#ifndef SBX_PATHSET_H
#define SBX_PATHSET_H

#include <stddef.h>

/* An immutable, reference-counted list of paths (strings owned). */
struct pathset {
        unsigned refs;
        size_t n;
        char **v;
};
struct pathset *pathset_ref(struct pathset *s);
/* Drops a reference; frees the set with the last. Accepts NULL. */
void pathset_unref(struct pathset *s);

/* A growable list of strings (owned); zero-initialised is empty. */
struct pathset_list {
        char **v;
        size_t n, cap;
};

/* Appends str (taken over; NULL is an allocation failure). Returns str or NULL. */
char *pathset_list_add(struct pathset_list *s, char *str);
/* 1 when s holds str. */
int pathset_list_has(const struct pathset_list *s, const char *str);
/* Frees every string and the list; s is empty again. */
void pathset_list_free(struct pathset_list *s);
/* Freezes s into a pathset of one reference (s is emptied). NULL when out of memory. */
struct pathset *pathset_freeze(struct pathset_list *s);

#endif
