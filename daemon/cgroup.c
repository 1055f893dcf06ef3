/* cgroup.c: sandbox and command cgroups on v2 or v1; see cgroup.h.
 *
 * The daemon's own cgroup comes from /proc/self/cgroup ("0::/path" for v2, "N:ctrl:/path"
 * for v1) and every group is created beneath it, under one base directory per state
 * directory, so two daemons never share groups and a restarted daemon finds its
 * predecessor's leftovers. Parents' settings are never written, except that on v2 the
 * daemon enables controllers in its own (delegated) cgroup's subtree_control after
 * moving itself into a leaf, as the kernel's no-internal-processes rule requires
 * (Documentation/admin-guide/cgroup-v2.rst, "No Internal Process Constraint"). */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char *const v1_names[CG_N] = {"memory", "pids", "cpu", "freezer"};
static const char *const v2_names[CG_N] = {"memory", "pids", "cpu", NULL};

const char *cgroup_v1_name(enum cgroup_ctrl c) {
        return c < CG_N ? v1_names[c] : NULL;
}

const char *cgroup_version_name(enum cgroup_version v) {
        switch (v) {
        case CGROUP_V2:
                return "v2";
        case CGROUP_V1:
                return "v1";
        case CGROUP_NONE:
                break;
        }
        return "none";
}

static char *join(const char *a, const char *b) {
        char *r;
        size_t la = strlen(a);
        while (la > 1 && a[la - 1] == '/')
                la--;
        while (*b == '/')
                b++;
        if (asprintf(&r, "%.*s%s%s", (int)la, a, *b ? "/" : "", b) < 0)
                return NULL;
        return r;
}

static int write_file(const char *dir, const char *name, const char *value) {
        char *p = join(dir, name);
        int fd, r = 0;
        size_t len = strlen(value);
        if (!p)
                return -ENOMEM;
        fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
        free(p);
        if (fd < 0)
                return -errno;
        if (write(fd, value, len) != (ssize_t)len)
                r = -errno ? -errno : -EIO;
        close(fd);
        return r;
}

static int read_file(const char *dir, const char *name, char *buf, size_t len) {
        char *p = join(dir, name);
        ssize_t n;
        int fd;
        if (!p)
                return -ENOMEM;
        fd = open(p, O_RDONLY | O_CLOEXEC);
        free(p);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return (int)n;
}

static int file_exists(const char *dir, const char *name) {
        char *p = join(dir, name);
        int r;
        if (!p)
                return 0;
        r = access(p, F_OK) == 0;
        free(p);
        return r;
}

static int mkdir_p(struct cgroup_env *e, const char *path) {
        char *p = strdup(path), *s;
        int r = 0;
        if (!p)
                return -ENOMEM;
        for (s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (e->mkdir_fn(p, 0755) < 0 && errno != EEXIST) {
                        r = -errno;
                        break;
                }
                *s = '/';
        }
        if (r == 0 && e->mkdir_fn(p, 0755) < 0 && errno != EEXIST)
                r = -errno;
        free(p);
        return r;
}

void cgroup_env_free(struct cgroup_env *e) {
        int i;
        if (!e)
                return;
        for (i = 0; i < CG_N; i++) {
                free(e->base[i]);
                free(e->self[i]);
        }
        free(e->v2_base);
        free(e->v2_self);
        free(e);
}

/* Enables the controllers sbxd wants in dir's subtree_control, where available. */
static int v2_enable(const char *dir, int *ret_mask) {
        char avail[1024];
        int i, mask = 0;
        if (read_file(dir, "cgroup.controllers", avail, sizeof(avail)) < 0)
                return -ENOENT;
        for (i = 0; i < CG_N; i++) {
                char word[32];
                const char *p;
                if (!v2_names[i])
                        continue;
                p = strstr(avail, v2_names[i]);
                if (!p)
                        continue;
                snprintf(word, sizeof(word), "+%s", v2_names[i]);
                if (write_file(dir, "cgroup.subtree_control", word) == 0)
                        mask |= 1 << i;
        }
        *ret_mask = mask;
        return 0;
}

static int setup_v2(struct cgroup_env *e, const char *root, const char *own, const char *base_name,
                    pid_t self_pid) {
        char *own_dir = join(root, own), *leaf = NULL;
        char pidbuf[32];
        int r = -ENOMEM, mask = 0;

        if (!own_dir)
                goto out;
        /* Delegation: we must be able to create children and write our own procs. */
        if (access(own_dir, W_OK) < 0) {
                r = -EACCES;
                goto out;
        }
        if (self_pid > 0) {
                leaf = join(own_dir, "daemon");
                if (!leaf)
                        goto out;
                r = mkdir_p(e, leaf);
                if (r < 0)
                        goto out;
                snprintf(pidbuf, sizeof(pidbuf), "%d", (int)self_pid);
                r = write_file(leaf, "cgroup.procs", pidbuf);
                if (r < 0)
                        goto out;
        }
        v2_enable(own_dir, &mask);
        e->v2_base = join(own_dir, base_name);
        if (!e->v2_base) {
                r = -ENOMEM;
                goto out;
        }
        r = mkdir_p(e, e->v2_base);
        if (r < 0)
                goto out;
        v2_enable(e->v2_base, &mask);
        e->v2_controllers = mask;
        e->version = CGROUP_V2;
        e->v2_self = leaf;
        leaf = NULL;
        r = 0;
out:
        free(own_dir);
        free(leaf);
        return r;
}

int cgroup_env_has(const struct cgroup_env *e, enum cgroup_ctrl ctrl) {
        if (e->version == CGROUP_V2)
                return (e->v2_controllers >> ctrl) & 1;
        return e->version == CGROUP_V1 && e->base[ctrl] != NULL;
}

int cgroup_env_new(const char *root, const char *self_cgroup_file, const char *base_name,
                   pid_t self_pid, struct cgroup_env **ret) {
        return cgroup_env_new_with(root, self_cgroup_file, base_name, self_pid, mkdir, ret);
}

int cgroup_env_new_with(const char *root, const char *self_cgroup_file, const char *base_name,
                        pid_t self_pid, int (*mkdir_fn)(const char *path, mode_t mode),
                        struct cgroup_env **ret) {
        struct cgroup_env *e = calloc(1, sizeof(*e));
        char line[4096];
        char *v2_own = NULL;
        char *v1_own[CG_N] = {NULL};
        FILE *f;
        int i, any_v1 = 0;

        if (!e)
                return -ENOMEM;
        e->mkdir_fn = mkdir_fn;
        f = fopen(self_cgroup_file, "re");
        if (!f) {
                *ret = e; /* version none */
                return 0;
        }
        while (fgets(line, sizeof(line), f)) {
                char *c1 = strchr(line, ':'), *c2, *nl;
                if (!c1 || !(c2 = strchr(c1 + 1, ':')))
                        continue;
                if ((nl = strchr(c2, '\n')))
                        *nl = '\0';
                *c2 = '\0';
                *c1 = '\0';
                /* "0::/path" is the v2 line; "N:ctrl,ctrl:/path" are v1 lines. */
                if (strcmp(line, "0") == 0 && c1[1] == '\0') {
                        free(v2_own);
                        v2_own = strdup(c2 + 1);
                        continue;
                }
                for (i = 0; i < CG_N; i++) {
                        char *tok, *save = NULL;
                        for (tok = strtok_r(c1 + 1, ",", &save); tok;
                             tok = strtok_r(NULL, ",", &save))
                                if (strcmp(tok, v1_names[i]) == 0 && !v1_own[i])
                                        v1_own[i] = strdup(c2 + 1);
                }
        }
        fclose(f);

        /* v1 where its hierarchies are mounted and writable; else v2. */
        for (i = 0; i < CG_N; i++) {
                char *mnt, *own_dir;
                if (!v1_own[i])
                        continue;
                mnt = join(root, v1_names[i]);
                own_dir = mnt ? join(mnt, v1_own[i]) : NULL;
                if (own_dir && file_exists(own_dir, "cgroup.procs") && access(own_dir, W_OK) == 0) {
                        e->base[i] = join(own_dir, base_name);
                        if (e->base[i] && mkdir_p(e, e->base[i]) == 0) {
                                any_v1 = 1;
                                /* v1 cpu: children need no parent setting. freezer and
                                 * memory likewise; pids too. */
                        } else {
                                free(e->base[i]);
                                e->base[i] = NULL;
                        }
                }
                free(mnt);
                free(own_dir);
        }
        if (any_v1) {
                e->version = CGROUP_V1;
        } else if (v2_own) {
                /* Only when root itself is a cgroup2 mount (it has cgroup.controllers). */
                if (file_exists(root, "cgroup.controllers"))
                        setup_v2(e, root, v2_own, base_name, self_pid);
        }
        free(v2_own);
        for (i = 0; i < CG_N; i++)
                free(v1_own[i]);
        *ret = e;
        return 0;
}

static struct cgroup *group_new(struct cgroup_env *e) {
        struct cgroup *g = calloc(1, sizeof(*g));
        if (!g)
                return NULL;
        g->env = e;
        g->oom_fd = g->pids_fd = -1;
        return g;
}

static void close_event_fds(struct cgroup *g) {
        if (g->oom_fd >= 0)
                close(g->oom_fd);
        if (g->pids_fd >= 0)
                close(g->pids_fd);
        g->oom_fd = g->pids_fd = -1;
}

void cgroup_forget(struct cgroup *g) {
        int i;
        if (!g)
                return;
        close_event_fds(g);
        for (i = 0; i < CG_N; i++)
                free(g->path[i]);
        free(g->v2_path);
        free(g);
}

int cgroup_destroy(struct cgroup *g) {
        int i, r = 0;
        if (!g)
                return 0;
        close_event_fds(g);
        for (i = 0; i < CG_N; i++)
                if (g->path[i]) {
                        if (rmdir(g->path[i]) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                        free(g->path[i]);
                }
        if (g->v2_path) {
                if (rmdir(g->v2_path) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
                free(g->v2_path);
        }
        free(g);
        return r;
}

int cgroup_create(struct cgroup_env *e, const char *rel, int leaf, struct cgroup **ret) {
        struct cgroup *g;
        int i, r = 0;

        if (e->version == CGROUP_NONE)
                return -EOPNOTSUPP;
        g = group_new(e);
        if (!g)
                return -ENOMEM;
        if (e->version == CGROUP_V2) {
                g->v2_path = join(e->v2_base, rel);
                if (!g->v2_path)
                        r = -ENOMEM;
                else if (e->mkdir_fn(g->v2_path, 0755) < 0)
                        r = -errno;
                if (r < 0) {
                        free(g->v2_path);
                        g->v2_path = NULL;
                } else if (!leaf) {
                        int mask;
                        /* So that the groups below it get the same controllers. */
                        v2_enable(g->v2_path, &mask);
                }
        } else {
                for (i = 0; i < CG_N && r == 0; i++) {
                        if (!e->base[i])
                                continue;
                        g->path[i] = join(e->base[i], rel);
                        if (!g->path[i])
                                r = -ENOMEM;
                        else if (e->mkdir_fn(g->path[i], 0755) < 0) {
                                r = -errno;
                                free(g->path[i]);
                                g->path[i] = NULL;
                        }
                }
        }
        if (r < 0) {
                cgroup_destroy(g);
                return r;
        }
        *ret = g;
        return 0;
}

int cgroup_attach(struct cgroup_env *e, const char *rel, struct cgroup **ret) {
        struct cgroup *g;
        int i, found = 0;

        if (e->version == CGROUP_NONE)
                return -EOPNOTSUPP;
        g = group_new(e);
        if (!g)
                return -ENOMEM;
        if (e->version == CGROUP_V2) {
                g->v2_path = join(e->v2_base, rel);
                if (g->v2_path && access(g->v2_path, F_OK) == 0)
                        found = 1;
                else {
                        free(g->v2_path);
                        g->v2_path = NULL;
                }
        } else {
                for (i = 0; i < CG_N; i++) {
                        if (!e->base[i])
                                continue;
                        g->path[i] = join(e->base[i], rel);
                        if (g->path[i] && access(g->path[i], F_OK) == 0)
                                found = 1;
                        else {
                                free(g->path[i]);
                                g->path[i] = NULL;
                        }
                }
        }
        if (!found) {
                free(g);
                return -ENOENT;
        }
        *ret = g;
        return 0;
}

int cgroup_set_limits(struct cgroup *g, const struct cgroup_limits *l, int *ret_enforced) {
        char buf[64];
        int enforced = 0;

        if (g->v2_path) {
                if (l->memory_bytes) {
                        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->memory_bytes);
                        if (write_file(g->v2_path, "memory.max", buf) == 0) {
                                enforced |= 1 << CG_MEMORY;
                                (void)write_file(g->v2_path, "memory.swap.max", "0");
                        }
                }
                if (l->pids) {
                        snprintf(buf, sizeof(buf), "%u", l->pids);
                        if (write_file(g->v2_path, "pids.max", buf) == 0)
                                enforced |= 1 << CG_PIDS;
                }
                if (l->cpu_percent) {
                        snprintf(buf, sizeof(buf), "%u 100000", l->cpu_percent * 1000u);
                        if (write_file(g->v2_path, "cpu.max", buf) == 0)
                                enforced |= 1 << CG_CPU;
                }
        } else {
                if (l->memory_bytes && g->path[CG_MEMORY]) {
                        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->memory_bytes);
                        if (write_file(g->path[CG_MEMORY], "memory.limit_in_bytes", buf) == 0) {
                                enforced |= 1 << CG_MEMORY;
                                /* No swapping past the limit where swap accounting exists. */
                                if (file_exists(g->path[CG_MEMORY], "memory.memsw.limit_in_bytes"))
                                        (void)write_file(g->path[CG_MEMORY],
                                                         "memory.memsw.limit_in_bytes", buf);
                                (void)write_file(g->path[CG_MEMORY], "memory.swappiness", "0");
                        }
                }
                if (l->pids && g->path[CG_PIDS]) {
                        snprintf(buf, sizeof(buf), "%u", l->pids);
                        if (write_file(g->path[CG_PIDS], "pids.max", buf) == 0)
                                enforced |= 1 << CG_PIDS;
                }
                if (l->cpu_percent && g->path[CG_CPU]) {
                        snprintf(buf, sizeof(buf), "%u", l->cpu_percent * 1000u);
                        if (write_file(g->path[CG_CPU], "cpu.cfs_period_us", "100000") == 0 &&
                            write_file(g->path[CG_CPU], "cpu.cfs_quota_us", buf) == 0)
                                enforced |= 1 << CG_CPU;
                }
        }
        *ret_enforced = enforced;
        return 0;
}

int cgroup_join_fds(struct cgroup *g, int *fds, size_t max, int *ret_v2) {
        size_t n = 0;
        int i;
        *ret_v2 = g->v2_path != NULL;
        if (g->v2_path) {
                if (max < 1)
                        return -ENOBUFS;
                fds[0] = open(g->v2_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                return fds[0] < 0 ? -errno : 1;
        }
        for (i = 0; i < CG_N; i++) {
                char *p;
                if (!g->path[i])
                        continue;
                if (n >= max)
                        goto fail_nobufs;
                p = join(g->path[i], "cgroup.procs");
                fds[n] = p ? open(p, O_WRONLY | O_CLOEXEC) : -1;
                free(p);
                if (fds[n] < 0) {
                        int r = -errno;
                        while (n > 0)
                                close(fds[--n]);
                        return r;
                }
                n++;
        }
        return (int)n;
fail_nobufs:
        while (n > 0)
                close(fds[--n]);
        return -ENOBUFS;
}

/* Sends SIGKILL to every pid listed in dir/cgroup.procs. Returns how many. */
static int kill_listed(const char *dir) {
        char *p = join(dir, "cgroup.procs");
        FILE *f;
        long pid;
        int n = 0;
        if (!p)
                return -ENOMEM;
        f = fopen(p, "re");
        free(p);
        if (!f)
                return -errno;
        while (fscanf(f, "%ld", &pid) == 1)
                if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
                        n++;
        fclose(f);
        return n;
}

int cgroup_delegate_procs(struct cgroup *g, uid_t uid, gid_t gid) {
        char path[4096];

        if (!g->v2_path)
                return 0;
        if (snprintf(path, sizeof(path), "%s/cgroup.procs", g->v2_path) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        return chown(path, uid, gid) < 0 ? -errno : 0;
}

int cgroup_thaw(struct cgroup *g) {
        if (g->v2_path)
                return write_file(g->v2_path, "cgroup.freeze", "0");
        if (g->path[CG_FREEZER])
                return write_file(g->path[CG_FREEZER], "freezer.state", "THAWED");
        return -ENOENT;
}

int cgroup_kill(struct cgroup *g) {
        int r, total = 0, i;

        if (g->v2_path) {
                if (write_file(g->v2_path, "cgroup.kill", "1") == 0)
                        return 0;
                return kill_listed(g->v2_path);
        }
        /* v1: freeze so that nothing forks between reading the list and the kills. */
        if (g->path[CG_FREEZER])
                (void)write_file(g->path[CG_FREEZER], "freezer.state", "FROZEN");
        for (i = 0; i < CG_N; i++) {
                if (!g->path[i])
                        continue;
                r = kill_listed(g->path[i]);
                if (r > 0)
                        total += r;
        }
        if (g->path[CG_FREEZER])
                (void)write_file(g->path[CG_FREEZER], "freezer.state", "THAWED");
        return total;
}

int cgroup_count_procs(struct cgroup *g) {
        const char *dir = g->v2_path;
        char buf[8192];
        int i, n = 0, r;
        char *s;
        for (i = 0; !dir && i < CG_N; i++)
                dir = g->path[i];
        if (!dir)
                return -ENOENT;
        r = read_file(dir, "cgroup.procs", buf, sizeof(buf));
        if (r < 0)
                return r;
        for (s = buf; *s; s++)
                if (*s == '\n')
                        n++;
        return n;
}

int cgroup_peak_memory(struct cgroup *g, uint64_t *ret) {
        char buf[64];
        int r;
        if (g->v2_path)
                r = read_file(g->v2_path, "memory.peak", buf, sizeof(buf));
        else if (g->path[CG_MEMORY])
                r = read_file(g->path[CG_MEMORY], "memory.max_usage_in_bytes", buf, sizeof(buf));
        else
                return -ENOENT;
        if (r < 0)
                return r;
        *ret = strtoull(buf, NULL, 10);
        return 0;
}

/* The value of key in the keyed file *fd (opened from dir/file at the first call and
 * kept: a counter read around every command is worth no path walk). */
static int read_counter(int *fd, const char *dir, const char *file, const char *key,
                        uint64_t *ret) {
        char buf[4096];
        size_t kl = strlen(key);
        const char *line;
        ssize_t n;

        if (*fd < 0) {
                char *p = join(dir, file);
                if (!p)
                        return -ENOMEM;
                *fd = open(p, O_RDONLY | O_CLOEXEC);
                free(p);
                if (*fd < 0)
                        return -errno;
        }
        n = pread(*fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        for (line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
                        *ret = strtoull(line + kl + 1, NULL, 10);
                        return 0;
                }
        return -ENOENT;
}

int cgroup_oom_kills(struct cgroup *g, uint64_t *ret) {
        if (g->v2_path)
                return read_counter(&g->oom_fd, g->v2_path, "memory.events", "oom_kill", ret);
        if (g->path[CG_MEMORY])
                return read_counter(&g->oom_fd, g->path[CG_MEMORY], "memory.oom_control",
                                    "oom_kill", ret);
        return -ENOENT;
}

int cgroup_pids_max_events(struct cgroup *g, uint64_t *ret) {
        /* v2: pids.events counts at the group whose limit was hit; pids.events.local
         * (Linux 6.2+) at the group whose process tried to fork. */
        if (g->v2_path)
                return read_counter(&g->pids_fd, g->v2_path, "pids.events.local", "max", ret) == 0
                               ? 0
                               : read_counter(&g->pids_fd, g->v2_path, "pids.events", "max", ret);
        if (g->path[CG_PIDS])
                return read_counter(&g->pids_fd, g->path[CG_PIDS], "pids.events", "max", ret);
        return -ENOENT;
}

/* Kills and removes dir and everything below it, children first. */
static int remove_dir_tree(const char *dir, int depth) {
        DIR *d;
        struct dirent *de;
        int r = 0, tries;

        if (depth > 16)
                return -ELOOP;
        d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                char *sub;
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                sub = join(dir, de->d_name);
                if (sub) {
                        int rr = remove_dir_tree(sub, depth + 1);
                        if (rr < 0 && r == 0)
                                r = rr;
                        free(sub);
                }
        }
        closedir(d);
        /* Processes take a moment to leave after SIGKILL. */
        for (tries = 0; tries < 200; tries++) {
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return r;
                if (errno != EBUSY)
                        return -errno;
                kill_listed(dir);
                usleep(5000);
        }
        return -EBUSY;
}

int cgroup_remove_tree(struct cgroup_env *e, const char *rel) {
        int i, r = 0;
        char *p;
        if (e->version == CGROUP_V2) {
                p = join(e->v2_base, rel);
                if (!p)
                        return -ENOMEM;
                (void)write_file(p, "cgroup.kill", "1");
                r = remove_dir_tree(p, 0);
                free(p);
                return r;
        }
        for (i = 0; i < CG_N; i++) {
                int rr;
                if (!e->base[i])
                        continue;
                p = join(e->base[i], rel);
                if (!p)
                        return -ENOMEM;
                rr = remove_dir_tree(p, 0);
                if (rr < 0 && r == 0)
                        r = rr;
                free(p);
        }
        return r;
}

/* Adds the names of the groups directly under dir to *names (*n of them, *cap room),
 * each once. 0 or -errno. */
static int child_names(const char *dir, char ***names, size_t *n, size_t *cap) {
        struct dirent *de;
        DIR *d = opendir(dir);
        int r = 0;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while (r == 0 && (de = readdir(d))) {
                size_t i;
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                for (i = 0; i < *n && strcmp((*names)[i], de->d_name) != 0; i++)
                        ;
                if (i < *n)
                        continue;
                if (*n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 16;
                        char **nv = realloc(*names, nc * sizeof(*nv));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        *names = nv;
                        *cap = nc;
                }
                if (!((*names)[*n] = strdup(de->d_name)))
                        r = -ENOMEM;
                else
                        (*n)++;
        }
        closedir(d);
        return r;
}

int cgroup_foreach_child(struct cgroup_env *e, int (*cb)(const char *name, void *ud), void *ud) {
        char **names = NULL;
        size_t n = 0, cap = 0, k;
        int i, r = 0;

        /* v1: the names of every hierarchy (a removal cut short leaves a group in some of
         * them only), each once. */
        if (e->v2_base)
                r = child_names(e->v2_base, &names, &n, &cap);
        for (i = 0; r == 0 && !e->v2_base && i < CG_N; i++)
                if (e->base[i])
                        r = child_names(e->base[i], &names, &n, &cap);
        for (k = 0; r == 0 && k < n; k++)
                r = cb(names[k], ud);
        for (k = 0; k < n; k++)
                free(names[k]);
        free(names);
        return r;
}

/* v1: the daemon's own group for controller c ("<base>.daemon", beside the base),
 * made and joined by pid. 0 or -errno. */
static int v1_self(struct cgroup_env *e, enum cgroup_ctrl c, pid_t pid) {
        char pidbuf[32];
        int r;

        if (!e->base[c])
                return -ENOENT;
        if (!e->self[c]) {
                if (asprintf(&e->self[c], "%s.daemon", e->base[c]) < 0) {
                        e->self[c] = NULL;
                        return -ENOMEM;
                }
                r = mkdir_p(e, e->self[c]);
                if (r < 0)
                        return r;
        }
        snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
        return pid > 0 ? write_file(e->self[c], "cgroup.procs", pidbuf) : 0;
}

int cgroup_env_limit_self(struct cgroup_env *e, pid_t self_pid, uint64_t memory_max,
                          uint64_t tasks_max) {
        char v[32];
        int r = 0;

        if (e->version == CGROUP_V2) {
                if ((memory_max && !(e->v2_controllers >> CG_MEMORY & 1)) ||
                    (tasks_max && !(e->v2_controllers >> CG_PIDS & 1)) || !e->v2_self)
                        return -ENOENT;
        } else if (e->version != CGROUP_V1 || (memory_max && !e->base[CG_MEMORY]) ||
                   (tasks_max && !e->base[CG_PIDS])) {
                return -ENOENT;
        }
        if (memory_max) {
                snprintf(v, sizeof(v), "%llu", (unsigned long long)memory_max);
                r = e->version == CGROUP_V2 ? write_file(e->v2_self, "memory.max", v)
                                            : v1_self(e, CG_MEMORY, self_pid);
                if (r == 0 && e->version == CGROUP_V1)
                        r = write_file(e->self[CG_MEMORY], "memory.limit_in_bytes", v);
        }
        if (r == 0 && tasks_max) {
                snprintf(v, sizeof(v), "%llu", (unsigned long long)tasks_max);
                r = e->version == CGROUP_V2 ? 0 : v1_self(e, CG_PIDS, self_pid);
                if (r == 0)
                        r = write_file(e->version == CGROUP_V2 ? e->v2_self : e->self[CG_PIDS],
                                       "pids.max", v);
        }
        return r;
}

void cgroup_env_unlimit_self(struct cgroup_env *e, pid_t self_pid) {
        char pidbuf[32], *own;
        int i;

        snprintf(pidbuf, sizeof(pidbuf), "%d", (int)self_pid);
        for (i = 0; i < CG_N; i++) {
                if (!e->self[i])
                        continue;
                /* The base's parent is the daemon's own group. */
                own = strdup(e->base[i]);
                if (own && strrchr(own, '/'))
                        *strrchr(own, '/') = '\0';
                if (own && self_pid > 0)
                        (void)write_file(own, "cgroup.procs", pidbuf);
                free(own);
                (void)rmdir(e->self[i]);
                free(e->self[i]);
                e->self[i] = NULL;
        }
}

void cgroup_env_remove_base(struct cgroup_env *e) {
        int i;
        for (i = 0; i < CG_N; i++)
                if (e->base[i])
                        (void)rmdir(e->base[i]);
        if (e->v2_base)
                (void)rmdir(e->v2_base);
}
