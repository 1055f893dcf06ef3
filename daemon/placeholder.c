/* placeholder.c: placeholders made in writable repositories, counted by the sandboxes
 * that keep them and removed with the last; see placeholder.h. */
#include "placeholder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"
#include "pathset.h"
#include "protect.h"

/* The parts of a repository's .git that git would follow if sandboxed code created
 * them: made when missing (placeholders, owned by the owner) so that they can be kept
 * read-only like the rest, and removed when the last sandbox using them has ended.
 * Empty directories mean nothing to git; a commondir of "." names the repository's own
 * git directory (git reads it and goes on exactly as without it) and an empty
 * config.worktree adds no setting. */
static const char *const git_dirs[] = {"hooks",   "info",    "worktrees",
                                       "modules", "remotes", "branches"};
static const struct {
        const char *name, *content;
} git_files[] = {{"commondir", ".\n"}, {"config.worktree", ""}};

const char *placeholder_content(const char *path) {
        const char *base = strrchr(path, '/');
        size_t i;

        for (i = 0; base && i < PROTECT_N(git_files); i++)
                if (strcmp(base + 1, git_files[i].name) == 0)
                        return git_files[i].content;
        return NULL;
}

/* 1 when the entry name of the directory dfd is a regular file with one link holding
 * exactly content (a placeholder of ours, made by this daemon or an earlier one). */
static int holds_exactly_at(int dfd, const char *name, const char *content) {
        char buf[16];
        ssize_t n;
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;

        if (fd < 0)
                return 0;
        n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1
                    ? read(fd, buf, sizeof(buf))
                    : -1;
        close(fd);
        return n >= 0 && (size_t)n == strlen(content) && memcmp(buf, content, (size_t)n) == 0;
}

/* Opens the directory holding path (its last component into *ret_name) without
 * following any symlink on the way. The descriptor, or -errno. */
static int open_parent(const char *path, const char **ret_name) {
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_NO_SYMLINKS};
        char dir[PATH_MAX];
        const char *base = strrchr(path, '/');
        int fd;

        if (!base || base == path || (size_t)(base - path) >= sizeof(dir))
                return -EINVAL;
        memcpy(dir, path, (size_t)(base - path));
        dir[base - path] = '\0';
        fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        *ret_name = base + 1;
        return fd;
}

static int holds_exactly(const char *path, const char *content) {
        const char *name;
        int dfd = open_parent(path, &name), r;

        if (dfd < 0)
                return 0;
        r = holds_exactly_at(dfd, name, content);
        close(dfd);
        return r;
}

/* ---- placeholders: made in writable repositories, removed with the last user ------------- */

/* One placeholder, the live sandboxes whose view keeps it, and whose it is (the ids
 * the first made it with: it is removed with their rights). */
struct placeholder {
        struct placeholder *next;
        char *path;
        unsigned refs;
        uid_t uid;
        gid_t gid;
};

static struct placeholder *placeholders;

static struct placeholder *find_held(const char *path) {
        struct placeholder *ph;
        for (ph = placeholders; ph; ph = ph->next)
                if (strcmp(ph->path, path) == 0)
                        return ph;
        return NULL;
}

void placeholder_list(const char *w, struct pathset_list *dirs, struct pathset_list *files) {
        char p[PATH_MAX];
        struct stat st;
        size_t i;

        for (i = 0; i < PROTECT_N(git_dirs); i++) {
                snprintf(p, sizeof(p), "%s/.git/%s", w, git_dirs[i]);
                if ((lstat(p, &st) < 0 && errno == ENOENT) || find_held(p))
                        pathset_list_add(dirs, strdup(p));
        }
        for (i = 0; i < PROTECT_N(git_files); i++) {
                snprintf(p, sizeof(p), "%s/.git/%s", w, git_files[i].name);
                if ((lstat(p, &st) < 0 && errno == ENOENT) ||
                    holds_exactly(p, git_files[i].content))
                        pathset_list_add(files, strdup(p));
        }
}

void placeholder_hold(const struct pathset *made, const struct placeholder_ids *as, uid_t owner_uid,
                      gid_t owner_gid) {
        size_t i;

        for (i = 0; made && i < made->n; i++) {
                struct placeholder *ph = find_held(made->v[i]);
                if (!ph && (ph = calloc(1, sizeof(*ph))) && !(ph->path = strdup(made->v[i]))) {
                        free(ph);
                        ph = NULL;
                }
                if (!ph)
                        continue; /* out of memory: it stays on the host, harmless */
                if (!ph->refs++) {
                        ph->uid = as ? as[i].uid : owner_uid;
                        ph->gid = as ? as[i].gid : owner_gid;
                        ph->next = placeholders;
                        placeholders = ph;
                }
        }
}

/* Removes the placeholder ph from the host when it is still one (an empty directory,
 * or a file with its content and one link), with the rights it was made with (root's
 * are root's, as in hostpath.c), through its directory opened without following
 * symlinks: whatever the host did to the repository meanwhile, this never removes
 * anything they could not. */
static void remove_placeholder(const struct placeholder *ph) {
        const char *content = placeholder_content(ph->path), *name;
        struct creds cr = {0};
        int dfd;

        if ((ph->uid == 0 || creds_enter(&cr, ph->uid, ph->gid, NULL, 0) == 0) &&
            (dfd = open_parent(ph->path, &name)) >= 0) {
                if (!content)
                        (void)unlinkat(dfd, name, AT_REMOVEDIR); /* fails unless empty */
                else if (holds_exactly_at(dfd, name, content))
                        (void)unlinkat(dfd, name, 0);
                close(dfd);
        }
        creds_leave(&cr);
}

void placeholder_release(const struct pathset *made) {
        size_t i;

        for (i = 0; made && i < made->n; i++) {
                struct placeholder **pp, *ph;
                for (pp = &placeholders; (ph = *pp); pp = &ph->next)
                        if (strcmp(ph->path, made->v[i]) == 0)
                                break;
                if (!ph || --ph->refs > 0)
                        continue;
                *pp = ph->next;
                remove_placeholder(ph);
                free(ph->path);
                free(ph);
        }
}
