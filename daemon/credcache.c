/* credcache.c: the shared expansion of the credential list; see credcache.h. */
#include "credcache.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "etcpasswd.h"
#include "pathset.h"
#include "protect.h"
#include "sbxd.h"

/* Home directories that are system directories: nobody's credentials live there, and
 * watching them would only cost (sync's home is /bin, nobody's /nonexistent). */
static const char *const system_dirs[] = {"/",         "/bin", "/sbin", "/usr", "/usr/bin",
                                          "/usr/sbin", "/dev", "/proc", "/sys", "/run",
                                          "/var/run",  "/tmp", "/etc",  "/var", "/root"};

/* How long an expansion of the credential list is used before the host is looked at
 * again, at most: homes are checked at every use, and the guard says when a listed
 * path or its directory changes (credcache_changed); this is a backstop. */
#define SHARED_MAX_AGE_MS 60000

/* The expanded protect_home_secrets and protect_host_secrets, and what they were
 * expanded from: all (the guard watches them, the file operations refuse them) and
 * exposed, those a sandbox's user could read now (hidden by a mount in each view). */
static struct {
        struct pathset *all, *exposed;
        struct stat passwd, home;
        char *env_home;
        struct timespec built;
        int rootless;
        int stale; /* the guard saw a listed path or its directory change */
} shared;

static credcache_cb on_shared;

static int same_stat(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Whether the user of a sandbox could read path (canonical, existing): in root mode a
 * user of no group of the host's, so every directory on the way must let others
 * search it and the object let others read (or search) it; rootless, the daemon's own
 * user, asked of the kernel. A path no command can read needs no mount over it (the
 * guard still watches it, and covers it if the host replaces it). */
static int exposed(const char *path, int rootless) {
        char p[PATH_MAX];
        struct stat st;
        size_t i, n = strlen(path);

        if (rootless)
                return access(path, R_OK) == 0 ||
                       (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, X_OK) == 0);
        if (n >= sizeof(p))
                return 1;
        for (i = 1; i <= n; i++) {
                if (path[i] != '/' && path[i] != '\0')
                        continue;
                memcpy(p, path, i);
                p[i] = '\0';
                if (stat(p, &st) < 0)
                        return 1; /* cannot tell: hide it */
                if (path[i] == '/' && !(st.st_mode & S_IXOTH))
                        return 0;
        }
        return (st.st_mode & S_IROTH) || (S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH));
}

/* Adds path to all: an existing one (a symlink by its target, which is what a mount
 * on it covers and what a process reading it reaches; also to exposed when a sandbox
 * could read it, or always), or a missing one (the guard hides it when it appears). */
static void add_secret(struct pathset_list *all, struct pathset_list *exp, const char *path,
                       int rootless, int always) {
        struct stat st;
        char *real;

        if (lstat(path, &st) < 0) {
                if (errno == ENOENT && !pathset_list_has(all, path))
                        pathset_list_add(all, strdup(path));
                return;
        }
        real = S_ISLNK(st.st_mode) ? realpath(path, NULL) : strdup(path);
        if (!real || pathset_list_has(all, real)) {
                free(real);
                return;
        }
        if (always || exposed(real, rootless))
                pathset_list_add(exp, strdup(real));
        pathset_list_add(all, real);
}

/* The host's own secrets: hidden whether a sandbox could read them or not (/root and
 * /run read as empty, as documented). */
static void add_secret_glob(struct pathset_list *all, struct pathset_list *exp, const char *pattern,
                            int rootless) {
        glob_t g;
        size_t i;
        if (!strpbrk(pattern, "*?[")) {
                add_secret(all, exp, pattern, rootless, 1);
                return;
        }
        if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
                return;
        for (i = 0; i < g.gl_pathc; i++)
                add_secret(all, exp, g.gl_pathv[i], rootless, 1);
        globfree(&g);
}

/* Adds home to homes when it is an existing directory that is not a system one. */
static void add_home(struct pathset_list *homes, const char *home) {
        struct stat st;
        char *real;
        size_t i;

        if (!home || home[0] != '/' || stat(home, &st) < 0 || !S_ISDIR(st.st_mode))
                return;
        real = realpath(home, NULL);
        if (!real)
                return;
        for (i = 0; i < PROTECT_N(system_dirs); i++)
                if (strcmp(real, system_dirs[i]) == 0) {
                        free(real);
                        return;
                }
        if (pathset_list_has(homes, real))
                free(real);
        else
                pathset_list_add(homes, real);
}

/* Every home directory: those in /home, those /etc/passwd names (read as a file:
 * no NSS lookup that could block the loop on a network), and the daemon's $HOME. */
static void find_homes(struct pathset_list *homes) {
        FILE *f = fopen("/etc/passwd", "re");
        struct passwd_entry e;
        char *line = NULL;
        size_t cap = 0;
        DIR *dir;
        struct dirent *de;

        dir = opendir("/home");
        while (dir && (de = readdir(dir))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/home/%s", de->d_name);
                add_home(homes, p);
        }
        if (dir)
                closedir(dir);
        while (etcpasswd_next(f, &line, &cap, &e))
                add_home(homes, e.home);
        free(line);
        if (f)
                fclose(f);
        add_home(homes, getenv("HOME"));
}

static int same_set(const struct pathset *a, const struct pathset_list *b) {
        size_t i;
        if (!a || a->n != b->n)
                return 0;
        for (i = 0; i < b->n; i++)
                if (strcmp(a->v[i], b->v[i]) != 0)
                        return 0;
        return 1;
}

/* Replaces *set with s unless it holds the same paths (then s is freed): sandboxes
 * that share a set share its guard watches and its warm pool key. */
static void replace_set(struct pathset **set, struct pathset_list *s) {
        if (same_set(*set, s)) {
                pathset_list_free(s);
                return;
        }
        pathset_unref(*set);
        *set = pathset_freeze(s);
}

/* Brings the shared sets up to date: rebuilt when /etc/passwd, /home or $HOME changed
 * or the last build is older than SHARED_MAX_AGE_MS. Returns 0 or -ENOMEM. */
static int shared_secrets(struct sbxd *d) {
        struct stat pw, hm;
        struct timespec now;
        const char *env_home = getenv("HOME");
        struct pathset_list all = {0}, exp = {0}, homes = {0};
        int rootless = d->features.rootless;
        size_t i, j;

        memset(&pw, 0, sizeof(pw));
        memset(&hm, 0, sizeof(hm));
        (void)stat("/etc/passwd", &pw);
        (void)stat("/home", &hm);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (shared.all && shared.exposed && !shared.stale && same_stat(&pw, &shared.passwd) &&
            same_stat(&hm, &shared.home) && shared.rootless == rootless &&
            strcmp(env_home ? env_home : "", shared.env_home ? shared.env_home : "") == 0 &&
            (now.tv_sec - shared.built.tv_sec) * 1000 +
                            (now.tv_nsec - shared.built.tv_nsec) / 1000000 <
                    SHARED_MAX_AGE_MS)
                return 0;
        for (i = 0; i < PROTECT_N(protect_host_secrets); i++)
                add_secret_glob(&all, &exp, protect_host_secrets[i], rootless);
        find_homes(&homes);
        for (i = 0; i < homes.n; i++)
                for (j = 0; j < PROTECT_N(protect_home_secrets); j++) {
                        char p[PATH_MAX];
                        snprintf(p, sizeof(p), "%s/%s", homes.v[i], protect_home_secrets[j]);
                        add_secret(&all, &exp, p, rootless, 0);
                }
        pathset_list_free(&homes);
        replace_set(&shared.all, &all);
        replace_set(&shared.exposed, &exp);
        shared.passwd = pw;
        shared.home = hm;
        shared.built = now;
        shared.rootless = rootless;
        shared.stale = 0;
        /* Sandboxes made before keep the new paths hidden too. */
        if (on_shared)
                on_shared(d, shared.all);
        free(shared.env_home);
        shared.env_home = env_home ? strdup(env_home) : NULL;
        return shared.all && shared.exposed ? 0 : -ENOMEM;
}

int credcache_get(struct sbxd *d, struct pathset **ret_all, struct pathset **ret_exposed) {
        int r = shared_secrets(d);

        if (r < 0)
                return r;
        if (ret_all)
                *ret_all = shared.all;
        if (ret_exposed)
                *ret_exposed = shared.exposed;
        return 0;
}

void credcache_changed(void) {
        shared.stale = 1;
}

void credcache_refresh(struct sbxd *d) {
        (void)shared_secrets(d);
}

void credcache_on_change(credcache_cb cb) {
        on_shared = cb;
}
