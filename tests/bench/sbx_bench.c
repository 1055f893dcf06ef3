/* sbx_bench.c: main() and the cases of sbx_bench, the benchmark of sbxd against
 * baselines measured in the same run (docs/performance.md: each row, its baseline and
 * its bar).
 *
 *   roundtrip   `true` in an existing sandbox through libsbx vs posix_spawn + waitpid
 *   lifecycle   create + first command + terminate vs `bwrap --unshare-all ... true`;
 *               also with a policy the warm pool cannot serve (a writable path, memory
 *               and process limits) vs bwrap with the same bind, and 50 creates back to
 *               back, then their commands
 *   cli         `sbx exec ID -- true`, and `sbx create` + `sbx exec` + `sbx terminate`,
 *               as processes, vs the bwrap one-shot
 *   concurrent  commands/s from 8 client threads vs 8 threads posix_spawn'ing true
 *   burst       64 clients each run `true` at once in one shared sandbox (over its cap of
 *               16: the rest wait for a slot) vs 64 threads each posix_spawn'ing true
 *   idle        N idle sandboxes: creation, daemon RSS and fds, latency at 1 vs N
 *   stdout      `head -c 1G /dev/zero` streamed through sbxd vs a plain pipe
 *   files       64 MiB written and read with WriteFile/ReadFile vs `cat` through a pipe
 *   nocgroup    roundtrip, lifecycle and concurrent against a daemon that sees no
 *               cgroups: what the cgroups cost here (a diagnostic, reported only)
 *   image       a real Debian image: pull + unpack, create + true + terminate from it, the
 *               disk and memory of its sandboxes
 *   snapshot    a snapshot of a sandbox that wrote 100 MiB in 1,000 files vs `cp -a` of
 *               them, how long it was frozen; 10 forks vs 10 creates from the image, and
 *               their disk vs the snapshot once
 *   snapshot-xfs  the same on an XFS filesystem that shares blocks (reflink), made and
 *               mounted by the bench (root, xfsprogs): the reflink path's figures
 *   forward     1 GiB each way through a stream of sbx_open_port to a peer in a sandbox
 *               vs the same peer on the host over plain loopback TCP
 *
 * Each pair is interleaved (baseline, sbxd, baseline, ...) so that drift of a noisy
 * machine hits both sides alike; figures are medians (and p99 where it matters). The
 * ratios are reported, not asserted: the exit status is 0 whenever the run completed.
 *
 * Usage: sbx_bench [--quick] [--json PATH] [--only NAME[,NAME...]] [--sandboxes N]
 *                  [--keep]
 * BUILD (default "build") names the build directory holding sbxd and sbx-init. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itutil.h"
#include "sbx.h"
#include "sbx_limits.h"

extern char **environ;

/* ---- helpers: samples, processes, a daemon of our own, the result table ---- */

struct samples {
        double *v;
        size_t n, cap;
};

struct bench_daemon {
        char dir[300];
        char sock[400];
        char state[400];
        char log[400];
        pid_t pid;
};

/* How a row's ratio (sbxd / baseline) or value is judged against its target. */
enum bench_cmp {
        CMP_NONE = 0, /* reported only */
        CMP_RATIO_LE, /* ratio <= target */
        CMP_RATIO_LT, /* ratio < target */
        CMP_RATIO_GE, /* ratio >= target */
        CMP_VALUE_LT, /* the sbxd figure itself < target */
        CMP_VALUE_LE, /* the sbxd figure itself <= target */
};

struct bench_row {
        char name[32];   /* the case: roundtrip, lifecycle, ... */
        char metric[48]; /* "median", "p99", "commands/s", ... */
        char unit[16];
        double sbx;
        double base; /* NAN when there is no baseline */
        enum bench_cmp cmp;
        double target;
        int unimplemented;
        char note[640];
};

static int bench_daemon_stop(struct bench_daemon *d);
/* printf to stderr with a "bench: " prefix. */
static void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Entries in dir (without . and ..) but those named ~* (the daemon's warm pool), which
 * *ret_warm counts; -1 when it cannot be read. */
static int bench_dir_entries(const char *path, int *ret_warm);

static void bench_log(const char *fmt, ...) {
        va_list ap;
        fputs("bench: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* ---- samples ------------------------------------------------------------------------ */

static void samples_add(struct samples *s, double x) {
        if (s->n == s->cap) {
                size_t nc = s->cap ? s->cap * 2 : 256;
                double *nv = realloc(s->v, nc * sizeof(*nv));
                if (!nv)
                        return; /* a sample less; the figures stay meaningful */
                s->v = nv;
                s->cap = nc;
        }
        s->v[s->n++] = x;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* The p-th percentile (0..100) by nearest rank; 0 when empty. Sorts s->v. */
static double samples_pct(struct samples *s, double p) {
        size_t k;
        if (s->n == 0)
                return 0;
        qsort(s->v, s->n, sizeof(*s->v), cmp_double);
        /* Nearest rank: the smallest value with at least p% of the samples at or below. */
        k = (size_t)ceil(p / 100.0 * (double)s->n);
        if (k < 1)
                k = 1;
        if (k > s->n)
                k = s->n;
        return s->v[k - 1];
}

static double samples_median(struct samples *s) {
        if (s->n == 0)
                return 0;
        qsort(s->v, s->n, sizeof(*s->v), cmp_double);
        if (s->n % 2)
                return s->v[s->n / 2];
        return (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
}

static void samples_free(struct samples *s) {
        free(s->v);
        memset(s, 0, sizeof(*s));
}

static double bench_now_ms(void) {
        return it_now_ms();
}

/* ---- processes ---------------------------------------------------------------------- */

static int bench_spawn(char *const argv[], int in_fd, int out_fd, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r;

        posix_spawn_file_actions_init(&fa);
        if (in_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
        else if (in_fd == -1)
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (out_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        else if (out_fd == -1)
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        *ret_pid = pid;
        return 0;
}

/* As bench_spawn, and waits for the child. Returns its wait status, or -errno. */
static int bench_spawn_wait(char *const argv[], int in_fd, int out_fd) {
        pid_t pid;
        int st, r = bench_spawn(argv, in_fd, out_fd, &pid);
        if (r < 0)
                return r;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return st;
}

/* What the idle case reads of /proc/meminfo, KiB (-1: absent). */
struct meminfo {
        long avail;  /* MemAvailable */
        long anon;   /* AnonPages: the processes' own memory */
        long shmem;  /* Shmem: tmpfs and shared memory */
        long slab;   /* Slab: kernel objects (namespaces, mounts, cgroups, inodes) */
        long tables; /* PageTables */
        long stacks; /* KernelStack */
        long percpu; /* Percpu */
};

/* Reads *m; 0, or -1 when /proc/meminfo cannot be read. */
static int bench_meminfo(struct meminfo *m) {
        static const struct {
                const char *name;
                size_t off;
        } fields[] = {
                {"MemAvailable:", offsetof(struct meminfo, avail)},
                {"AnonPages:", offsetof(struct meminfo, anon)},
                {"Shmem:", offsetof(struct meminfo, shmem)},
                {"Slab:", offsetof(struct meminfo, slab)},
                {"PageTables:", offsetof(struct meminfo, tables)},
                {"KernelStack:", offsetof(struct meminfo, stacks)},
                {"Percpu:", offsetof(struct meminfo, percpu)},
        };
        char line[256];
        size_t i;
        FILE *f = fopen("/proc/meminfo", "re");
        for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                *(long *)((char *)m + fields[i].off) = -1;
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                        size_t n = strlen(fields[i].name);
                        if (strncmp(line, fields[i].name, n) == 0)
                                *(long *)((char *)m + fields[i].off) = strtol(line + n, NULL, 10);
                }
        fclose(f);
        return 0;
}

/* MemAvailable holds still when it moved less than BENCH_SETTLE_KIB over the last
 * BENCH_SETTLE_WINDOW half seconds; it is waited for at most BENCH_SETTLE_MAX_S. */
#define BENCH_SETTLE_KIB    2048
#define BENCH_SETTLE_WINDOW 8
#define BENCH_SETTLE_MAX_S  90

/* Waits until MemAvailable holds still, then reads *m. On the reference VM a case that
 * moved gigabytes through pipes (stdout, files) leaves about 1 GB that counts neither as
 * free nor as anything else in /proc/meminfo, and it comes back at about 15 MB/s for a
 * minute, after a pause of a few seconds: measured while it did, an idle sandbox looked
 * 2-4x cheaper than it is (190-420 KiB in full runs against 930 KiB with the idle case
 * alone). Returns the seconds waited. */
static double bench_meminfo_settled(struct meminfo *m) {
        double t0 = bench_now_ms();
        long seen[BENCH_SETTLE_WINDOW + 1];
        int n = 0, i;
        while (bench_meminfo(m) == 0 && m->avail >= 0) {
                long lo = m->avail, hi = m->avail;
                memmove(seen + 1, seen, sizeof(seen) - sizeof(seen[0]));
                seen[0] = m->avail;
                if (n < BENCH_SETTLE_WINDOW + 1)
                        n++;
                for (i = 0; i < n; i++) {
                        lo = seen[i] < lo ? seen[i] : lo;
                        hi = seen[i] > hi ? seen[i] : hi;
                }
                if ((n == BENCH_SETTLE_WINDOW + 1 && hi - lo < BENCH_SETTLE_KIB) ||
                    bench_now_ms() - t0 > BENCH_SETTLE_MAX_S * 1000.0)
                        break;
                usleep(500000);
        }
        return (bench_now_ms() - t0) / 1000.0;
}

/* VmRSS of pid in KiB, or -1. */
static long bench_rss_kib(pid_t pid) {
        return it_proc_status(pid, "VmRSS");
}

/* Open descriptors of pid, or -1. */
static int bench_fd_count(pid_t pid) {
        char p[64];
        int unused;
        snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
        return bench_dir_entries(p, &unused);
}

/* The soft RLIMIT_NOFILE of pid from /proc/PID/limits, or -1. */
static long bench_nofile_limit(pid_t pid) {
        char p[64], line[256];
        long v = -1;
        FILE *f;
        snprintf(p, sizeof(p), "/proc/%d/limits", (int)pid);
        f = fopen(p, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "Max open files", 14) == 0) {
                        v = strtol(line + 14, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

/* /proc/PID/stat of pid (a decimal string) into buf; returns what follows the command
 * name (which may hold spaces and parentheses), or NULL. */
static const char *proc_stat_fields(const char *pid, char *buf, size_t len) {
        char p[300];
        ssize_t k;
        int fd;
        snprintf(p, sizeof(p), "/proc/%s/stat", pid);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        k = read(fd, buf, len - 1);
        close(fd);
        if (k <= 0)
                return NULL;
        buf[k] = '\0';
        return strrchr(buf, ')') ? strrchr(buf, ')') + 1 : NULL;
}

/* The parent of pid from /proc/PID/stat, or -1. */
static pid_t parent_of(const char *pid) {
        char buf[512];
        const char *f = proc_stat_fields(pid, buf, sizeof(buf));
        int ppid;
        /* pid (comm) state ppid ... */
        if (!f || sscanf(f, " %*c %d", &ppid) != 1)
                return -1;
        return ppid;
}

/* Calls cb for every process; stops when it returns non-zero. */
static int each_process(int (*cb)(pid_t pid, pid_t ppid, void *ud), void *ud) {
        DIR *dir = opendir("/proc");
        struct dirent *de;
        int r = 0;
        while (dir && !r && (de = readdir(dir))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                r = cb((pid_t)atoi(de->d_name), parent_of(de->d_name), ud);
        }
        if (dir)
                closedir(dir);
        return r;
}

struct kin {
        pid_t of;
        int n;
        pid_t found[16];
};

static int count_child(pid_t pid, pid_t ppid, void *ud) {
        struct kin *k = ud;
        if (ppid == k->of) {
                if (k->n < 16)
                        k->found[k->n] = pid;
                k->n++;
        }
        return 0;
}

/* Processes whose parent is pid. */
static int bench_children(pid_t pid) {
        struct kin k = {.of = pid};
        each_process(count_child, &k);
        return k.n;
}

/* The init (PID 1, a grandchild of the daemon) of sandbox id: the one whose view has the
 * marker file written into the sandbox's workspace (the daemon's warm pool holds other
 * sandboxes). -1 when none is found. */
static pid_t bench_init_of(pid_t daemon, sbx_client *c, const char *id) {
        struct kin k = {.of = daemon};
        int i, j;
        if (sbx_write(c, id, "/workspace/.bench-init", "x", 1, 0644, 0) != SBX_OK)
                return -1;
        each_process(count_child, &k);
        for (i = 0; i < k.n && i < 16; i++) {
                struct kin g = {.of = k.found[i]};
                each_process(count_child, &g);
                for (j = 0; j < g.n && j < 16; j++) {
                        char p[96];
                        snprintf(p, sizeof(p), "/proc/%d/root/workspace/.bench-init",
                                 (int)g.found[j]);
                        if (access(p, F_OK) == 0)
                                return g.found[j];
                }
        }
        return -1;
}

/* CPU time of pid in ms (user + system), with children also that of its reaped
 * children; -1 when it cannot be read. */
static double bench_cpu_ms(pid_t pid, int with_children) {
        char id[24], buf[1024];
        const char *f;
        unsigned long ut, st;
        long cut, cst;
        snprintf(id, sizeof(id), "%d", (int)pid);
        f = proc_stat_fields(id, buf, sizeof(buf));
        /* Fields 14-17 of proc(5): utime stime cutime cstime, in clock ticks. */
        if (!f || sscanf(f, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", &ut,
                         &st, &cut, &cst) != 4)
                return -1;
        return (double)(ut + st + (with_children ? (unsigned long)(cut + cst) : 0)) * 1000.0 /
               (double)sysconf(_SC_CLK_TCK);
}

static int bench_dir_entries(const char *path, int *ret_warm) {
        DIR *dir = opendir(path);
        struct dirent *de;
        int n = 0;
        *ret_warm = 0;
        if (!dir)
                return -1;
        while ((de = readdir(dir)))
                if (de->d_name[0] == '~')
                        (*ret_warm)++;
                else if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(dir);
        return n;
}

static int count_subdirs(const char *path) {
        DIR *dir = opendir(path);
        struct dirent *de;
        int n = 0;
        if (!dir)
                return 0;
        while ((de = readdir(dir)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.' && de->d_name[0] != '~')
                        n++;
        closedir(dir);
        return n;
}

/* Looks for directories named name under path, depth levels deep at most. */
static int find_named(const char *path, const char *name, int depth, int *found) {
        DIR *dir;
        struct dirent *de;
        int n = 0;
        if (depth < 0)
                return 0;
        dir = opendir(path);
        if (!dir)
                return 0;
        while ((de = readdir(dir))) {
                char sub[1024];
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                if (strcmp(de->d_name, name) == 0) {
                        (*found)++;
                        n += count_subdirs(sub);
                        continue;
                }
                if (strncmp(de->d_name, "sbx-", 4) == 0 || strncmp(de->d_name, "sbxd-", 5) == 0)
                        continue; /* another daemon's groups: not ours to count */
                n += find_named(sub, name, depth - 1, found);
        }
        closedir(dir);
        return n;
}

/* Sub-directories (per-sandbox groups) of every cgroup directory named like the daemon's
 * base for state_dir (sbxd-%08x, see daemon/main.c) under /sys/fs/cgroup; -1 when no
 * base directory exists. */
static int bench_cgroup_leftovers(const char *state_dir) {
        unsigned h = 2166136261u;
        const char *s;
        char name[32];
        int found = 0, n;
        /* The same name as daemon/main.c's cgroup_base_name(). */
        for (s = state_dir; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        snprintf(name, sizeof(name), "sbxd-%08x", h);
        n = find_named("/sys/fs/cgroup", name, 4, &found);
        return found ? n : -1;
}

/* ---- a daemon of our own ------------------------------------------------------------ */

static int socket_accepts(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd, r;
        if (strlen(path) >= sizeof(sa.sun_path))
                return 0;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 0;
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        return r == 0;
}

/* Starts build/sbxd in a new directory under base with the extra flags (NULL-ended),
 * logging to its own file, and waits (10 s) until the socket accepts. The daemon gets
 * SIGTERM should the bench die. With no_cgroups it runs in a mount namespace of its own
 * whose /sys/fs/cgroup is an empty tmpfs, so it finds no cgroups (a diagnostic: what
 * the cgroups cost; needs root). Returns 0 or -1 (with a message). */
static int daemon_start(struct bench_daemon *d, const char *base, const char *name,
                        const char *const *extra, int no_cgroups) {
        char bin[512];
        char *args[64];
        size_t n = 0, i;
        pid_t parent = getpid();
        double t0;

        memset(d, 0, sizeof(*d));
        snprintf(d->dir, sizeof(d->dir), "%s/%s", base, name);
        if (mkdir(d->dir, 0755) < 0 && errno != EEXIST) {
                bench_log("mkdir %s: %s", d->dir, strerror(errno));
                return -1;
        }
        snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
        snprintf(d->state, sizeof(d->state), "%s/state", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/sbxd.log", d->dir);
        snprintf(bin, sizeof(bin), "%s/sbxd", it_build_dir());
        args[n++] = bin;
        args[n++] = (char *)"--socket";
        args[n++] = d->sock;
        args[n++] = (char *)"--state-dir";
        args[n++] = d->state;
        while (extra && *extra && n < 62)
                args[n++] = strdup(*extra++);
        args[n] = NULL;
        d->pid = fork();
        for (i = 5; d->pid != 0 && i < n; i++)
                free(args[i]);
        if (d->pid < 0) {
                bench_log("fork: %s", strerror(errno));
                return -1;
        }
        if (d->pid == 0) {
                int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(127);
                if (fd >= 0)
                        dup2(fd, 2);
                if (no_cgroups &&
                    (unshare(CLONE_NEWNS) < 0 ||
                     mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                     mount("bench-nocg", "/sys/fs/cgroup", "tmpfs", 0, "size=4k") < 0)) {
                        fprintf(stderr, "bench: cannot hide the cgroups: %s\n", strerror(errno));
                        _exit(126);
                }
                execv(bin, args);
                _exit(127);
        }
        t0 = bench_now_ms();
        while (!socket_accepts(d->sock)) {
                int st;
                if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                        bench_log("sbxd exited at start-up (status %d); see %s", st, d->log);
                        d->pid = 0;
                        return -1;
                }
                if (bench_now_ms() - t0 > 10000) {
                        bench_log("sbxd did not listen within 10 s; see %s", d->log);
                        bench_daemon_stop(d);
                        return -1;
                }
                usleep(2000);
        }
        return 0;
}

static int bench_daemon_start(struct bench_daemon *d, const char *base, const char *name,
                              const char *const *extra) {
        return daemon_start(d, base, name, extra, 0);
}

static int bench_daemon_start_nocgroup(struct bench_daemon *d, const char *base, const char *name,
                                       const char *const *extra) {
        return daemon_start(d, base, name, extra, 1);
}

/* SIGTERM, then waits (60 s, then SIGKILL). Returns the wait status, or -1. */
static int bench_daemon_stop(struct bench_daemon *d) {
        int st = -1, i;
        if (d->pid <= 0)
                return -1;
        kill(d->pid, SIGTERM);
        for (i = 0; i < 6000; i++) {
                if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return st;
                }
                usleep(10000);
        }
        bench_log("sbxd %d did not stop within 60 s of SIGTERM; killing it", (int)d->pid);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
        d->pid = 0;
        return -1;
}

static sbx_client *bench_connect(const struct bench_daemon *d) {
        sbx_client *c = NULL;
        if (sbx_connect(d->sock, "sbx_bench", &c) != SBX_OK) {
                bench_log("connect %s: %s", d->sock, c ? sbx_error_message(c) : "out of memory");
                sbx_close(c);
                return NULL;
        }
        return c;
}

/* ---- results ------------------------------------------------------------------------ */

#define BENCH_MAX_ROWS 96

static struct bench_row rows[BENCH_MAX_ROWS];
static size_t n_rows;

/* Adds a row to the table; returns it, for a note. */
static struct bench_row *bench_row_add(const char *name, const char *metric, const char *unit,
                                       double sbx, double base, enum bench_cmp cmp, double target) {
        static struct bench_row overflow;
        struct bench_row *r = n_rows < BENCH_MAX_ROWS ? &rows[n_rows++] : &overflow;
        memset(r, 0, sizeof(*r));
        snprintf(r->name, sizeof(r->name), "%s", name);
        snprintf(r->metric, sizeof(r->metric), "%s", metric);
        snprintf(r->unit, sizeof(r->unit), "%s", unit);
        r->sbx = sbx;
        r->base = base;
        r->cmp = cmp;
        r->target = target;
        return r;
}

static double row_ratio(const struct bench_row *r) {
        if (isnan(r->base) || r->base == 0 || r->unimplemented)
                return NAN;
        return r->sbx / r->base;
}

/* -1 not judged, 0 missed, 1 met. */
static int bench_row_met(const struct bench_row *r) {
        double q = row_ratio(r);
        if (r->unimplemented)
                return -1;
        switch (r->cmp) {
        case CMP_NONE:
                return -1;
        case CMP_RATIO_LE:
                return isnan(q) ? -1 : q <= r->target;
        case CMP_RATIO_LT:
                return isnan(q) ? -1 : q < r->target;
        case CMP_RATIO_GE:
                return isnan(q) ? -1 : q >= r->target;
        case CMP_VALUE_LT:
                return r->sbx < r->target;
        case CMP_VALUE_LE:
                return isnan(r->sbx) ? 0 : r->sbx <= r->target;
        }
        return -1;
}

static void target_text(const struct bench_row *r, char *buf, size_t len) {
        switch (r->cmp) {
        case CMP_NONE:
                snprintf(buf, len, "-");
                break;
        case CMP_RATIO_LE:
                snprintf(buf, len, "<= %.2fx", r->target);
                break;
        case CMP_RATIO_LT:
                snprintf(buf, len, "< %.2fx", r->target);
                break;
        case CMP_RATIO_GE:
                snprintf(buf, len, ">= %.2fx", r->target);
                break;
        case CMP_VALUE_LT:
                snprintf(buf, len, "< %g %s", r->target, r->unit);
                break;
        case CMP_VALUE_LE:
                snprintf(buf, len, "<= %g %s", r->target, r->unit);
                break;
        }
}

static void num_text(double v, char *buf, size_t len) {
        if (isnan(v))
                snprintf(buf, len, "-");
        else if (fabs(v) >= 1000)
                snprintf(buf, len, "%.0f", v);
        else if (fabs(v) >= 10)
                snprintf(buf, len, "%.1f", v);
        else
                snprintf(buf, len, "%.3f", v);
}

static void bench_print_table(const char *title) {
        size_t i;
        printf("\n%s\n", title);
        printf("%-10s %-28s %12s %12s %9s %11s  %s\n", "case", "metric", "sbxd", "baseline",
               "ratio", "target", "met");
        printf("%.*s\n", 92,
               "------------------------------------------------------------"
               "------------------------------------------------------------");
        for (i = 0; i < n_rows; i++) {
                const struct bench_row *r = &rows[i];
                char metric[80], a[32], b[32], q[32], t[32];
                int met = bench_row_met(r);
                snprintf(metric, sizeof(metric), "%s (%s)", r->metric, r->unit);
                if (r->unimplemented) {
                        printf("%-10s %-28s %12s %12s %9s %11s  %s\n", r->name, metric,
                               "unimplemented", "-", "-", "-", "-");
                        continue;
                }
                num_text(r->sbx, a, sizeof(a));
                num_text(r->base, b, sizeof(b));
                if (isnan(row_ratio(r)))
                        snprintf(q, sizeof(q), "-");
                else
                        snprintf(q, sizeof(q), "%.2fx", row_ratio(r));
                target_text(r, t, sizeof(t));
                printf("%-10s %-28s %12s %12s %9s %11s  %s%s%s\n", r->name, metric, a, b, q, t,
                       met < 0 ? "-"
                       : met   ? "yes"
                               : "NO",
                       r->note[0] ? "  " : "", r->note);
        }
        fflush(stdout);
}

/* Writes s as a JSON string. */
static void json_str(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch == '"' || ch == '\\')
                        fprintf(f, "\\%c", ch);
                else if (ch < 0x20)
                        fprintf(f, "\\u%04x", ch);
                else
                        fputc(ch, f);
        }
        fputc('"', f);
}

static void json_num(FILE *f, double v) {
        if (isnan(v) || isinf(v))
                fputs("null", f);
        else
                fprintf(f, "%.6g", v);
}

/* The CPU's model name from /proc/cpuinfo ("unknown" when absent). */
static void bench_cpu_model(char *buf, size_t len) {
        char line[512];
        FILE *f = fopen("/proc/cpuinfo", "re");
        snprintf(buf, len, "unknown");
        while (f && fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':');
                if (strncmp(line, "model name", 10) == 0 && colon) {
                        colon++;
                        while (*colon == ' ')
                                colon++;
                        colon[strcspn(colon, "\n")] = '\0';
                        snprintf(buf, len, "%s", colon);
                        break;
                }
        }
        if (f)
                fclose(f);
}

/* Writes the table and the machine description as JSON. Returns 0 or -errno. */
static int bench_write_json(const char *path, int quick, double total_s) {
        FILE *f = fopen(path, "we");
        struct utsname u;
        char date[64], cpu[256], t[32];
        time_t now = time(NULL);
        size_t i;

        if (!f)
                return -errno;
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        uname(&u);
        bench_cpu_model(cpu, sizeof(cpu));
        fprintf(f, "{\n  \"date\": \"%s\",\n  \"quick\": %s,\n  \"seconds\": %.1f,\n", date,
                quick ? "true" : "false", total_s);
        fprintf(f, "  \"machine\": {\"kernel\": ");
        json_str(f, u.release);
        fprintf(f, ", \"arch\": ");
        json_str(f, u.machine);
        fprintf(f, ", \"cpus\": %ld, \"cpu\": ", sysconf(_SC_NPROCESSORS_ONLN));
        json_str(f, cpu);
        fprintf(f, ", \"memory_mib\": %ld},\n  \"results\": [\n",
                (long)(sysconf(_SC_PHYS_PAGES) / 1024 * (sysconf(_SC_PAGESIZE) / 1024)));
        for (i = 0; i < n_rows; i++) {
                const struct bench_row *r = &rows[i];
                int met = bench_row_met(r);
                fprintf(f, "    {\"case\": ");
                json_str(f, r->name);
                fprintf(f, ", \"metric\": ");
                json_str(f, r->metric);
                fprintf(f, ", \"unit\": ");
                json_str(f, r->unit);
                if (r->unimplemented) {
                        fprintf(f, ", \"unimplemented\": true");
                } else {
                        fprintf(f, ", \"sbxd\": ");
                        json_num(f, r->sbx);
                        fprintf(f, ", \"baseline\": ");
                        json_num(f, r->base);
                        fprintf(f, ", \"ratio\": ");
                        json_num(f, row_ratio(r));
                }
                target_text(r, t, sizeof(t));
                fprintf(f, ", \"target\": ");
                json_str(f, t);
                fprintf(f, ", \"met\": %s", met < 0 ? "null" : met ? "true" : "false");
                if (r->note[0]) {
                        fprintf(f, ", \"note\": ");
                        json_str(f, r->note);
                }
                fprintf(f, "}%s\n", i + 1 < n_rows ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
        if (fclose(f) != 0)
                return -errno;
        return 0;
}

#define MIB (1024.0 * 1024.0)

static struct {
        int quick;
        const char *json;
        const char *only;
        int sandboxes;
        int keep;
} opt;

static char base_dir[256];
static struct bench_daemon main_daemon;

static char *argv_true[] = {"/bin/true", NULL};

static int wanted(const char *name) {
        const char *p;
        size_t n = strlen(name);
        if (!opt.only)
                return 1;
        for (p = opt.only; (p = strstr(p, name)); p += n)
                if ((p == opt.only || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
                        return 1;
        return 0;
}

/* ---- small sbxd helpers ------------------------------------------------------------- */

/* Creates a sandbox with default options; returns its id (free()) or NULL. */
static char *create_sandbox(sbx_client *c, const char *id) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        enum sbx_code code;
        char *r;
        sbx_create_opts_init(&o);
        o.id = id;
        o.timeout_ms = 3600 * 1000;
        code = sbx_create(c, &o, &sb);
        if (code != SBX_OK) {
                bench_log("create: %s: %s", sbx_code_name(code), sbx_error_message(c));
                return NULL;
        }
        r = strdup(sb->id);
        sbx_sandbox_free(sb);
        return r;
}

/* Runs /bin/true in id; 0 when it ran and exited 0. */
static int exec_true(sbx_client *c, const char *id) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;
        const char *argv[] = {"/bin/true", NULL};
        int ok;
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 1;
        o.timeout_ms = 30000;
        code = sbx_exec(c, id, &o, &r);
        ok = code == SBX_OK && r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0;
        if (!ok)
                bench_log("exec true in %s: %s: %s (outcome %s)", id, sbx_code_name(code),
                          sbx_error_message(c), r ? sbx_outcome_name(r->outcome) : "-");
        sbx_result_free(r);
        return ok ? 0 : -1;
}

static int terminate_sandbox(sbx_client *c, const char *id) {
        enum sbx_code code = sbx_terminate(c, id, NULL);
        if (code != SBX_OK) {
                bench_log("terminate %s: %s: %s", id, sbx_code_name(code), sbx_error_message(c));
                return -1;
        }
        return 0;
}

static int spawn_true(void) {
        int st = bench_spawn_wait(argv_true, -2, -2);
        return st == 0 ? 0 : -1;
}

/* One median row and one p99 row for a pair of sample sets. */
static void add_pair_rows(const char *name, const char *what, struct samples *s, struct samples *b,
                          enum bench_cmp cmp, double target, enum bench_cmp cmp99,
                          double target99) {
        char m[64];
        snprintf(m, sizeof(m), "%s median", what);
        bench_row_add(name, m, "ms", samples_median(s), samples_median(b), cmp, target);
        snprintf(m, sizeof(m), "%s p99", what);
        bench_row_add(name, m, "ms", samples_pct(s, 99), samples_pct(b, 99), cmp99, target99);
}

/* ---- the floor: a spawn through two relays -------------------------------------------- */

/* The least the architecture adds, without isolation or records: the bench writes a
 * byte to a relay process (in the daemon's place, an epoll loop), which passes it to a
 * spawner process (in PID 1's place) over a SOCK_SEQPACKET pair, which spawns /bin/true,
 * waits for it and answers back the same way. Two Unix-socket round trips and four
 * wakeups more than a bare spawn, as a command through sbxd has. One spawner per client,
 * as one sandbox per client in the concurrent case. */
#define FLOOR_MAX 8

struct floor_relay {
        pid_t relay, spawners[FLOOR_MAX];
        int fds[FLOOR_MAX]; /* the bench's end, one per client */
        int n;
};

static struct floor_relay floor_relay = {.relay = -1};

static void __attribute__((noreturn)) floor_spawner(int fd) {
        char b;
        while (read(fd, &b, 1) == 1) {
                int st = bench_spawn_wait(argv_true, -2, -2);
                if (write(fd, &st, sizeof(st)) != (ssize_t)sizeof(st))
                        break;
        }
        _exit(0);
}

static void __attribute__((noreturn)) floor_relay_loop(const int *cl, const int *sp, int n) {
        struct epoll_event ev, evs[2 * FLOOR_MAX];
        int ep = epoll_create1(EPOLL_CLOEXEC), i;

        for (i = 0; i < 2 * n; i++) {
                ev.events = EPOLLIN;
                ev.data.u32 = (uint32_t)i;
                if (epoll_ctl(ep, EPOLL_CTL_ADD, i < n ? cl[i] : sp[i - n], &ev) < 0)
                        _exit(1);
        }
        for (;;) {
                int k = epoll_wait(ep, evs, 2 * FLOOR_MAX, -1), j;
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        _exit(1);
                for (j = 0; j < k; j++) {
                        int u = (int)evs[j].data.u32;
                        int from = u < n ? cl[u] : sp[u - n], to = u < n ? sp[u] : cl[u - n];
                        char buf[16];
                        ssize_t m = read(from, buf, sizeof(buf));
                        if (m <= 0 || write(to, buf, (size_t)m) != m)
                                _exit(0);
                }
        }
}

/* Starts the relay and n spawners (processes of ours, killed by pid at floor_stop). */
static int floor_start(int n) {
        struct floor_relay *f = &floor_relay;
        int cl[FLOOR_MAX], sp[FLOOR_MAX], spend[FLOOR_MAX], i, a[2], b[2];

        f->n = 0;
        for (i = 0; i < n; i++) {
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) < 0)
                        return -1;
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, b) < 0) {
                        close(a[0]);
                        close(a[1]);
                        return -1;
                }
                f->fds[i] = a[0];
                cl[i] = a[1];
                sp[i] = b[0];
                spend[i] = b[1];
                f->spawners[i] = fork();
                if (f->spawners[i] == 0)
                        floor_spawner(spend[i]);
                f->n++;
        }
        f->relay = fork();
        if (f->relay == 0)
                floor_relay_loop(cl, sp, n);
        for (i = 0; i < n; i++) {
                close(cl[i]);
                close(sp[i]);
                close(spend[i]);
        }
        return f->relay > 0 ? 0 : -1;
}

/* One `true` through the floor's relay, client i. */
static int floor_true(int i) {
        char b = 1;
        int st = -1;
        if (write(floor_relay.fds[i], &b, 1) != 1 ||
            read(floor_relay.fds[i], &st, sizeof(st)) != (ssize_t)sizeof(st))
                return -1;
        return st == 0 ? 0 : -1;
}

static void floor_stop(void) {
        struct floor_relay *f = &floor_relay;
        int i;
        for (i = 0; i < f->n; i++) {
                close(f->fds[i]);
                if (f->spawners[i] > 0) {
                        kill(f->spawners[i], SIGKILL);
                        waitpid(f->spawners[i], NULL, 0);
                }
        }
        if (f->relay > 0) {
                kill(f->relay, SIGKILL);
                waitpid(f->relay, NULL, 0);
        }
        f->relay = -1;
        f->n = 0;
}

/* ---- roundtrip ---------------------------------------------------------------------- */

/* n runs of `true` in a sandbox of d and n bare spawns, interleaved (which goes first
 * alternates), after warm runs of each; with gap_ms, each run follows a pause. */
struct cpu_use {
        double daemon_ms, sandbox_ms, bench_ms; /* per command, -1 unknown */
};

static double children_cpu_ms(void) {
        struct rusage ru;
        getrusage(RUSAGE_CHILDREN, &ru);
        return (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3 +
               (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
}

static int measure_roundtrip(const struct bench_daemon *d, const char *sandbox, int n, int warm,
                             double gap_ms, struct samples *s, struct samples *b,
                             struct cpu_use *cpu) {
        sbx_client *c = bench_connect(d);
        char *id = c ? create_sandbox(c, sandbox) : NULL;
        int i, errors = 0;
        pid_t init = id ? bench_init_of(d->pid, c, id) : -1;
        double d0 = 0, s0 = 0, b0 = 0;

        if (!id) {
                sbx_close(c);
                return 1;
        }
        for (i = -warm; i < n; i++) {
                double t0, first, second;
                int sbx_first = i % 2 == 0;
                if (gap_ms > 0)
                        usleep((useconds_t)(gap_ms * 1000));
                t0 = bench_now_ms();
                if (sbx_first)
                        errors += exec_true(c, id) < 0;
                else
                        errors += spawn_true() < 0;
                first = bench_now_ms() - t0;
                if (gap_ms > 0)
                        usleep((useconds_t)(gap_ms * 1000));
                t0 = bench_now_ms();
                if (sbx_first)
                        errors += spawn_true() < 0;
                else
                        errors += exec_true(c, id) < 0;
                second = bench_now_ms() - t0;
                if (i == -1) {
                        d0 = bench_cpu_ms(d->pid, 0);
                        s0 = init > 0 ? bench_cpu_ms(init, 1) : -1;
                        b0 = children_cpu_ms();
                }
                if (i < 0)
                        continue;
                samples_add(sbx_first ? s : b, first);
                samples_add(sbx_first ? b : s, second);
        }
        if (cpu && n > 0) {
                double d1 = bench_cpu_ms(d->pid, 0), s1 = init > 0 ? bench_cpu_ms(init, 1) : -1;
                cpu->daemon_ms = d0 >= 0 && d1 >= 0 ? (d1 - d0) / n : -1;
                cpu->sandbox_ms = s0 >= 0 && s1 >= 0 ? (s1 - s0) / n : -1;
                cpu->bench_ms = (children_cpu_ms() - b0) / n;
        }
        terminate_sandbox(c, id);
        free(id);
        sbx_close(c);
        return errors;
}

/* n `true` through the floor and n bare spawns, interleaved, after warm runs of each;
 * with gap_ms, each run follows a pause. */
static int measure_floor(int n, int warm, double gap_ms, struct samples *s, struct samples *b) {
        int i, errors = 0;
        if (floor_start(1) < 0) {
                floor_stop();
                return 1;
        }
        for (i = -warm; i < n; i++) {
                double t0, t1;
                if (gap_ms > 0)
                        usleep((useconds_t)(gap_ms * 1000));
                t0 = bench_now_ms();
                errors += floor_true(0) < 0;
                t1 = bench_now_ms();
                if (i >= 0)
                        samples_add(s, t1 - t0);
                if (gap_ms > 0)
                        usleep((useconds_t)(gap_ms * 1000));
                t0 = bench_now_ms();
                errors += spawn_true() < 0;
                t1 = bench_now_ms();
                if (i >= 0)
                        samples_add(b, t1 - t0);
        }
        floor_stop();
        return errors;
}

static void case_roundtrip(void) {
        int n = opt.quick ? 60 : 300, warm = opt.quick ? 10 : 30, n_gap = opt.quick ? 10 : 40;
        int errors;
        struct samples s = {0}, b = {0}, sg = {0}, bg = {0}, fs = {0}, fb = {0}, fsg = {0},
                       fbg = {0};
        struct cpu_use cpu = {-1, -1, -1};
        struct bench_row *r;

        bench_log("roundtrip: %d commands in one sandbox vs %d posix_spawn of /bin/true", n, n);
        errors = measure_roundtrip(&main_daemon, "bench-roundtrip", n, warm, 0, &s, &b, &cpu);
        add_pair_rows("roundtrip", "true", &s, &b, CMP_RATIO_LE, 1.2, CMP_NONE, 0);
        r = bench_row_add("roundtrip", "CPU per true, all", "ms", cpu.daemon_ms + cpu.sandbox_ms,
                          cpu.bench_ms, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "daemon %.3f + sandbox init and command %.3f",
                 cpu.daemon_ms, cpu.sandbox_ms);
        bench_log("roundtrip: %d spawns through two relays (the floor) vs %d bare", n, n);
        errors += measure_floor(n, warm, 0, &fs, &fb);
        r = bench_row_add("roundtrip", "floor: true via 2 relays", "ms", samples_median(&fs),
                          samples_median(&fb), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note),
                 "diagnostic: the least two Unix-socket round trips add (no isolation)");
        /* An agent thinks between commands: the same with 50 ms pauses (cgroup v1
         * migrations then pay a full RCU grace period each). */
        bench_log("roundtrip: %d commands 50 ms apart", n_gap);
        errors += measure_roundtrip(&main_daemon, "bench-roundtrip-gap", n_gap, 2, 50, &sg, &bg,
                                    NULL);
        r = bench_row_add("roundtrip", "true 50ms apart median", "ms", samples_median(&sg),
                          samples_median(&bg), CMP_RATIO_LE, 1.5);
        snprintf(r->note, sizeof(r->note), "commands 50 ms apart, as an agent issues them");
        errors += measure_floor(n_gap, 2, 50, &fsg, &fbg);
        r = bench_row_add("roundtrip", "floor: 50ms apart via 2 relays", "ms", samples_median(&fsg),
                          samples_median(&fbg), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: the floor, 50 ms apart");
        if (errors) {
                r = bench_row_add("roundtrip", "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        samples_free(&s);
        samples_free(&b);
        samples_free(&sg);
        samples_free(&bg);
        samples_free(&fs);
        samples_free(&fb);
        samples_free(&fsg);
        samples_free(&fbg);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

static char *argv_bwrap[] = {"bwrap", "--unshare-all", "--ro-bind", "/", "/", "true", NULL};

/* The phases of create + first command + terminate. */
struct lifecycle {
        struct samples total, bwrap, create, first, end;
        int errors;
};

/* n rounds of one bwrap run then one sandbox life on d, pause_ms apart (not counted). */
static void measure_lifecycle(const struct bench_daemon *d, int n, int pause_ms,
                              struct lifecycle *lc) {
        sbx_client *c = bench_connect(d);
        int i;

        if (!c) {
                lc->errors++;
                return;
        }
        for (i = -2; i < n; i++) {
                double t0, t1, t2, t3, t4;
                char *id;
                if (pause_ms > 0)
                        usleep((useconds_t)pause_ms * 1000);
                t0 = bench_now_ms();
                if (bench_spawn_wait(argv_bwrap, -1, -1) != 0)
                        lc->errors++;
                t1 = bench_now_ms();
                id = create_sandbox(c, NULL);
                t2 = bench_now_ms();
                if (!id) {
                        lc->errors++;
                        continue;
                }
                lc->errors += exec_true(c, id) < 0;
                t3 = bench_now_ms();
                lc->errors += terminate_sandbox(c, id) < 0;
                t4 = bench_now_ms();
                free(id);
                if (i < 0)
                        continue;
                samples_add(&lc->bwrap, t1 - t0);
                samples_add(&lc->total, t4 - t1);
                samples_add(&lc->create, t2 - t1);
                samples_add(&lc->first, t3 - t2);
                samples_add(&lc->end, t4 - t3);
        }
        sbx_close(c);
}

static void lifecycle_free(struct lifecycle *lc) {
        samples_free(&lc->total);
        samples_free(&lc->bwrap);
        samples_free(&lc->create);
        samples_free(&lc->first);
        samples_free(&lc->end);
}

static void case_lifecycle_cold(void);
static void case_lifecycle_burst(void);

static void case_lifecycle(void) {
        int n = opt.quick ? 6 : 30;
        struct lifecycle lc, bb;
        struct bench_row *r;

        bench_log("lifecycle: %d x (create + true + terminate) vs %d x bwrap --unshare-all, "
                  "100 ms apart, then back to back",
                  n, n);
        memset(&lc, 0, sizeof(lc));
        memset(&bb, 0, sizeof(bb));
        if (bench_spawn_wait(argv_bwrap, -1, -1) != 0) {
                r = bench_row_add("lifecycle", "bwrap", "ms", NAN, NAN, CMP_NONE, 0);
                snprintf(r->note, sizeof(r->note), "bwrap --unshare-all failed here; no baseline");
        }
        /* As agents create sandboxes: one at a time, with time in between for the daemon's
         * warm pool (--warm, default 2) to be topped up. */
        measure_lifecycle(&main_daemon, n, 100, &lc);
        add_pair_rows("lifecycle", "create+true+end", &lc.total, &lc.bwrap, CMP_RATIO_LT, 1.0,
                      CMP_NONE, 0);
        bench_row_add("lifecycle", "  of which create", "ms", samples_median(&lc.create), NAN,
                      CMP_NONE, 0);
        bench_row_add("lifecycle", "  of which first true", "ms", samples_median(&lc.first), NAN,
                      CMP_NONE, 0);
        bench_row_add("lifecycle", "  of which terminate", "ms", samples_median(&lc.end), NAN,
                      CMP_NONE, 0);
        /* Back to back: faster than the pool refills, so most creates are cold. */
        measure_lifecycle(&main_daemon, n, 0, &bb);
        r = bench_row_add("lifecycle", "back to back median", "ms", samples_median(&bb.total),
                          samples_median(&bb.bwrap), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: create %.3f (the pool drains), end %.3f",
                 samples_median(&bb.create), samples_median(&bb.end));
        if (lc.errors + bb.errors) {
                r = bench_row_add("lifecycle", "errors", "count", lc.errors + bb.errors, NAN,
                                  CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        lifecycle_free(&lc);
        lifecycle_free(&bb);
        case_lifecycle_cold();
        case_lifecycle_burst();
}

/* Creates a sandbox whose policy the warm pool cannot serve: dir writable, 256 MiB of
 * memory, 256 processes. Returns its id (free()) or NULL. */
static char *create_cold(sbx_client *c, const char *dir) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        const char *roots[] = {dir};
        enum sbx_code code;
        char *id;

        sbx_create_opts_init(&o);
        sbx_policy_workspace_write(&o.policy, roots, 1, SBX_NETWORK_NONE);
        o.policy.limits.set |= SBX_LIMIT_MEMORY | SBX_LIMIT_PROCESSES;
        o.policy.limits.memory_bytes = 256u << 20;
        o.policy.limits.processes = 256;
        code = sbx_create(c, &o, &sb);
        if (code != SBX_OK) {
                bench_log("create (cold policy): %s: %s", sbx_code_name(code),
                          sbx_error_message(c));
                return NULL;
        }
        id = strdup(sb->id);
        sbx_sandbox_free(sb);
        return id;
}

/* A policy the pool cannot serve, one life at a time (100 ms apart), against bwrap
 * binding the same directory. */
static void case_lifecycle_cold(void) {
        int n = opt.quick ? 6 : 30, i, errors = 0;
        char dir[300], *argv_bwrap_bind[] = {
                               "bwrap", "--unshare-all", "--ro-bind", "/", "/", "--bind", dir,
                               dir,     "true",          NULL};
        struct samples s = {0}, b = {0};
        sbx_client *c = bench_connect(&main_daemon);
        struct bench_row *r;

        snprintf(dir, sizeof(dir), "%s/cold-rw", base_dir);
        if (!c || mkdir(dir, 0755) < 0) {
                errors++;
                goto out;
        }
        for (i = -2; i < n; i++) {
                double t0, t1, t2;
                char *id;
                usleep(100 * 1000);
                t0 = bench_now_ms();
                errors += bench_spawn_wait(argv_bwrap_bind, -1, -1) != 0;
                t1 = bench_now_ms();
                id = create_cold(c, dir);
                if (!id) {
                        errors++;
                        continue;
                }
                errors += exec_true(c, id) < 0;
                errors += terminate_sandbox(c, id) < 0;
                t2 = bench_now_ms();
                free(id);
                if (i >= 0) {
                        samples_add(&b, t1 - t0);
                        samples_add(&s, t2 - t1);
                }
        }
        add_pair_rows("lifecycle", "cold policy c+t+e", &s, &b, CMP_RATIO_LE, 1.0, CMP_NONE, 0);
out:
        if (errors) {
                r = bench_row_add("lifecycle", "cold policy errors", "count", errors, NAN,
                                  CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        sbx_close(c);
        samples_free(&s);
        samples_free(&b);
}

/* 50 creates back to back (the pool drains), then a command in each: each sandbox's
 * create plus its first command, against the bwrap one-shot run 50 times. */
static void case_lifecycle_burst(void) {
        enum { N = 50 };
        char *ids[N] = {0};
        double created[N];
        struct samples s = {0}, b = {0};
        sbx_client *c = bench_connect(&main_daemon);
        struct bench_row *r;
        int i, errors = 0;

        for (i = 0; c && i < N; i++) {
                double t0 = bench_now_ms();
                ids[i] = create_sandbox(c, NULL);
                created[i] = bench_now_ms() - t0;
                errors += !ids[i];
        }
        for (i = 0; c && i < N; i++) {
                double t0 = bench_now_ms();
                if (!ids[i])
                        continue;
                errors += exec_true(c, ids[i]) < 0;
                samples_add(&s, created[i] + bench_now_ms() - t0);
        }
        for (i = 0; i < N; i++) {
                double t0 = bench_now_ms();
                errors += bench_spawn_wait(argv_bwrap, -1, -1) != 0;
                samples_add(&b, bench_now_ms() - t0);
        }
        r = bench_row_add("lifecycle", "50 back to back, c+t median", "ms", samples_median(&s),
                          samples_median(&b), CMP_RATIO_LE, 1.0);
        snprintf(r->note, sizeof(r->note), "50 creates, then a true in each");
        r = bench_row_add("lifecycle", "50 back to back, p99/median", "ms", samples_pct(&s, 99),
                          samples_median(&s), CMP_RATIO_LE, 2.0);
        snprintf(r->note, sizeof(r->note), "baseline: its own median");
        for (i = 0; i < N; i++) {
                if (ids[i])
                        errors += terminate_sandbox(c, ids[i]) < 0;
                free(ids[i]);
        }
        if (errors || !c) {
                r = bench_row_add("lifecycle", "50 back to back errors", "count", errors + !c, NAN,
                                  CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        sbx_close(c);
        samples_free(&s);
        samples_free(&b);
}

/* ---- cli: sbx as a user runs it ------------------------------------------------------ */

/* Runs the tree's sbx with args (NULL-terminated, at most 8) on the main daemon, output
 * to /dev/null; 0 when it exited 0. */
static int run_sbx(char *const *args) {
        char path[512], socket_flag[] = "--socket", *argv[12];
        int i;

        snprintf(path, sizeof(path), "%s/sbx", it_build_dir());
        argv[0] = path;
        argv[1] = socket_flag;
        argv[2] = main_daemon.sock;
        for (i = 0; args[i] && i < 8; i++)
                argv[3 + i] = args[i];
        argv[3 + i] = NULL;
        return bench_spawn_wait(argv, -1, -1) == 0 ? 0 : -1;
}

/* `sbx exec ID -- true` in a warm sandbox, then a whole life through three sbx
 * processes, each interleaved with the bwrap one-shot. The two are measured in loops of
 * their own: a life ends with work the daemon does after answering (the warm pool's
 * refill after the create, the cgroup and workspace removed after the terminate), which
 * would otherwise land on the next `sbx exec` measured. */
static void case_cli(void) {
        int n = opt.quick ? 20 : 100, i, errors = 0;
        struct samples e = {0}, eb = {0}, l = {0}, lb = {0};
        static char life[64];
        static char *exec_args[] = {"exec", "cli-warm", "--", "/bin/true", NULL};
        static char *make[] = {"create", "--id", life, NULL};
        static char *run[] = {"exec", life, "--", "/bin/true", NULL};
        static char *end[] = {"terminate", life, NULL};
        static char *warm[] = {"create", "--id", "cli-warm", NULL};
        static char *warm_end[] = {"terminate", "cli-warm", NULL};
        struct bench_row *r;

        errors += run_sbx(warm) < 0;
        for (i = -3; i < n; i++) {
                double t0 = bench_now_ms(), t1, t2;
                errors += bench_spawn_wait(argv_bwrap, -1, -1) != 0;
                t1 = bench_now_ms();
                errors += run_sbx(exec_args) < 0;
                t2 = bench_now_ms();
                if (i < 0)
                        continue;
                samples_add(&eb, t1 - t0);
                samples_add(&e, t2 - t1);
        }
        for (i = -3; i < n; i++) {
                double t0 = bench_now_ms(), t1, t2;
                errors += bench_spawn_wait(argv_bwrap, -1, -1) != 0;
                t1 = bench_now_ms();
                snprintf(life, sizeof(life), "cli-life-%d", i + 3); /* ids are never reused */
                errors += run_sbx(make) < 0;
                errors += run_sbx(run) < 0;
                errors += run_sbx(end) < 0;
                t2 = bench_now_ms();
                if (i < 0)
                        continue;
                samples_add(&lb, t1 - t0);
                samples_add(&l, t2 - t1);
        }
        errors += run_sbx(warm_end) < 0;
        r = bench_row_add("cli", "sbx exec true, median", "ms", samples_median(&e),
                          samples_median(&eb), CMP_RATIO_LE, 0.5);
        snprintf(r->note, sizeof(r->note), "a process each, warm sandbox; baseline bwrap");
        r = bench_row_add("cli", "create+exec+terminate", "ms", samples_median(&l),
                          samples_median(&lb), CMP_RATIO_LE, 1.5);
        snprintf(r->note, sizeof(r->note), "three sbx processes; baseline bwrap one-shot");
        if (errors) {
                r = bench_row_add("cli", "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        samples_free(&e);
        samples_free(&eb);
        samples_free(&l);
        samples_free(&lb);
}

/* ---- concurrent --------------------------------------------------------------------- */

#define WORKERS 8

struct worker {
        pthread_t thread;
        sbx_client *c;
        char *id;
        int index;
        enum { RUN_SBX, RUN_BARE, RUN_FLOOR } how;
        long count;
        long errors;
};

static pthread_barrier_t start_barrier;
static volatile int stop_workers;

static void *worker_main(void *arg) {
        struct worker *w = arg;
        pthread_barrier_wait(&start_barrier);
        while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
                int r = w->how == RUN_BARE    ? spawn_true()
                        : w->how == RUN_FLOOR ? floor_true(w->index)
                                              : exec_true(w->c, w->id);
                if (r < 0)
                        w->errors++;
                else
                        w->count++;
        }
        return NULL;
}

/* Runs the workers for seconds; returns commands per second. */
static double run_workers(struct worker *ws, int how, double seconds, long *errors) {
        double t0, t1;
        long total = 0;
        int i;
        stop_workers = 0;
        pthread_barrier_init(&start_barrier, NULL, WORKERS + 1);
        for (i = 0; i < WORKERS; i++) {
                ws[i].how = how;
                ws[i].index = i;
                ws[i].count = 0;
                ws[i].errors = 0;
                pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
        }
        pthread_barrier_wait(&start_barrier);
        t0 = bench_now_ms();
        usleep((useconds_t)(seconds * 1e6));
        __atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
        for (i = 0; i < WORKERS; i++) {
                pthread_join(ws[i].thread, NULL);
                total += ws[i].count;
                *errors += ws[i].errors;
        }
        t1 = bench_now_ms();
        pthread_barrier_destroy(&start_barrier);
        return (double)total / ((t1 - t0) / 1000.0);
}

/* reps alternations of the bare spawner, of sbxd (one client and sandbox per thread on
 * d) and, with f, of the floor (one spawner per thread), seconds each; commands/s go into
 * b, s and f. Returns the errors. */
static long measure_concurrent(const struct bench_daemon *d, const char *prefix, int reps,
                               double seconds, struct samples *s, struct samples *b,
                               struct samples *f) {
        struct worker ws[WORKERS];
        long errors = 0;
        int i;

        memset(ws, 0, sizeof(ws));
        for (i = 0; i < WORKERS; i++) {
                char id[64];
                ws[i].c = bench_connect(d);
                snprintf(id, sizeof(id), "%s-%d", prefix, i);
                ws[i].id = ws[i].c ? create_sandbox(ws[i].c, id) : NULL;
                if (!ws[i].id) {
                        errors++;
                        goto out;
                }
                exec_true(ws[i].c, ws[i].id); /* warm */
        }
        if (f && floor_start(WORKERS) < 0) {
                errors++;
                goto out;
        }
        for (i = 0; i < reps; i++) {
                samples_add(b, run_workers(ws, RUN_BARE, seconds, &errors));
                samples_add(s, run_workers(ws, RUN_SBX, seconds, &errors));
                if (f)
                        samples_add(f, run_workers(ws, RUN_FLOOR, seconds, &errors));
        }
out:
        floor_stop();
        for (i = 0; i < WORKERS; i++) {
                if (ws[i].id)
                        terminate_sandbox(ws[i].c, ws[i].id);
                free(ws[i].id);
                sbx_close(ws[i].c);
        }
        return errors;
}

static void case_concurrent(void) {
        int reps = opt.quick ? 1 : 3;
        double seconds = opt.quick ? 1.5 : 4.0;
        struct samples s = {0}, b = {0}, f = {0};
        struct bench_row *r;
        long errors;

        bench_log("concurrent: %d threads, %d x %.1f s each side, one client and sandbox per "
                  "thread",
                  WORKERS, reps, seconds);
        errors = measure_concurrent(&main_daemon, "bench-conc", reps, seconds, &s, &b, &f);
        r = bench_row_add("concurrent", "8 threads", "cmds/s", samples_median(&s),
                          samples_median(&b), CMP_RATIO_GE, 0.90);
        snprintf(r->note, sizeof(r->note), "median of %d runs of %.1f s", reps, seconds);
        r = bench_row_add("concurrent", "floor: 8 threads via a relay", "cmds/s",
                          samples_median(&f), samples_median(&b), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note),
                 "diagnostic: one relay, a spawner per thread (no isolation)");
        if (errors) {
                r = bench_row_add("concurrent", "errors", "count", (double)errors, NAN,
                                  CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        samples_free(&s);
        samples_free(&b);
        samples_free(&f);
}

/* ---- burst: many agents, one sandbox -------------------------------------------------- */

#define BURST 64

struct burster {
        pthread_t thread;
        sbx_client *c;
        const char *id;
        long errors;
};

static pthread_barrier_t burst_go, burst_done;
static volatile int burst_bare, burst_stop;

/* Each round: wait for the go, run one command (bare or in the shared sandbox), report. */
static void *burster_main(void *arg) {
        struct burster *w = arg;
        for (;;) {
                pthread_barrier_wait(&burst_go);
                if (__atomic_load_n(&burst_stop, __ATOMIC_RELAXED))
                        return NULL;
                if ((__atomic_load_n(&burst_bare, __ATOMIC_RELAXED) ? spawn_true()
                                                                    : exec_true(w->c, w->id)) < 0)
                        w->errors++;
                pthread_barrier_wait(&burst_done);
        }
}

/* One round: every burster at once; returns its wall time in ms. */
static double burst_round(int bare) {
        double t0;
        __atomic_store_n(&burst_bare, bare, __ATOMIC_RELAXED);
        pthread_barrier_wait(&burst_go);
        t0 = bench_now_ms();
        pthread_barrier_wait(&burst_done);
        return bench_now_ms() - t0;
}

/* 64 clients, each with its own connection, run `true` at the same moment in one
 * sandbox: 16 start (the default --max-commands), the others wait in its queue and
 * start as slots free. Against 64 threads spawning `true` at once. None may be turned
 * away (the errors row). */
static void case_burst(void) {
        int reps = opt.quick ? 5 : 20, i;
        struct burster ws[BURST];
        struct samples s = {0}, b = {0};
        struct bench_row *r;
        sbx_client *owner = bench_connect(&main_daemon);
        char *id = owner ? create_sandbox(owner, "bench-burst") : NULL;
        long errors = id ? 0 : 1;

        memset(ws, 0, sizeof(ws));
        for (i = 0; id && i < BURST; i++) {
                ws[i].c = bench_connect(&main_daemon);
                ws[i].id = id;
                if (!ws[i].c)
                        errors++;
        }
        if (errors)
                goto out;
        bench_log("burst: %d clients x %d rounds, one sandbox", BURST, reps);
        burst_stop = 0;
        pthread_barrier_init(&burst_go, NULL, BURST + 1);
        pthread_barrier_init(&burst_done, NULL, BURST + 1);
        for (i = 0; i < BURST; i++)
                pthread_create(&ws[i].thread, NULL, burster_main, &ws[i]);
        (void)burst_round(1); /* warm both sides */
        (void)burst_round(0);
        for (i = 0; i < reps; i++) {
                samples_add(&b, burst_round(1));
                samples_add(&s, burst_round(0));
        }
        __atomic_store_n(&burst_stop, 1, __ATOMIC_RELAXED);
        pthread_barrier_wait(&burst_go);
        for (i = 0; i < BURST; i++) {
                pthread_join(ws[i].thread, NULL);
                errors += ws[i].errors;
        }
        pthread_barrier_destroy(&burst_go);
        pthread_barrier_destroy(&burst_done);
        r = bench_row_add("burst", "64 at once, median", "ms", samples_median(&s),
                          samples_median(&b), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "one sandbox, 16 run at once; %d rounds", reps);
        bench_row_add("burst", "64 at once, p99", "ms", samples_pct(&s, 99), samples_pct(&b, 99),
                      CMP_NONE, 0);
out:
        if (errors) {
                r = bench_row_add("burst", "errors", "count", (double)errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "commands turned away or failed; see stderr");
        }
        for (i = 0; i < BURST; i++)
                sbx_close(ws[i].c);
        if (id)
                terminate_sandbox(owner, id);
        free(id);
        sbx_close(owner);
        samples_free(&s);
        samples_free(&b);
}

/* ---- nocgroup: a diagnostic ----------------------------------------------------------- */

/* roundtrip and concurrent again against a daemon that finds no cgroups: the difference
 * is what the per-sandbox and per-command cgroups cost on this host. Reported only. */
static void case_nocgroup(void) {
        int n = opt.quick ? 40 : 150;
        struct samples s = {0}, b = {0}, cs = {0}, cb = {0};
        struct cpu_use cpu = {-1, -1, -1};
        struct lifecycle lc;
        struct bench_daemon d;
        struct bench_row *r;
        long errors = 0;
        int st;

        bench_log("nocgroup: roundtrip and concurrent against a daemon without cgroups");
        if (bench_daemon_start_nocgroup(&d, base_dir, "nocgroup", NULL) < 0) {
                r = bench_row_add("nocgroup", "daemon without cgroups", "-", NAN, NAN, CMP_NONE, 0);
                snprintf(r->note, sizeof(r->note), "could not start one (needs root)");
                return;
        }
        errors += measure_roundtrip(&d, "nocg-roundtrip", n, 10, 0, &s, &b, &cpu);
        r = bench_row_add("nocgroup", "true median", "ms", samples_median(&s), samples_median(&b),
                          CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: no cgroups (no limits enforced)");
        r = bench_row_add("nocgroup", "CPU per true, all", "ms", cpu.daemon_ms + cpu.sandbox_ms,
                          cpu.bench_ms, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "daemon %.3f + sandbox init and command %.3f",
                 cpu.daemon_ms, cpu.sandbox_ms);
        memset(&lc, 0, sizeof(lc));
        measure_lifecycle(&d, opt.quick ? 6 : 20, 100, &lc);
        errors += lc.errors;
        r = bench_row_add("nocgroup", "create+true+end median", "ms", samples_median(&lc.total),
                          samples_median(&lc.bwrap), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: create %.3f, first true %.3f, end %.3f",
                 samples_median(&lc.create), samples_median(&lc.first), samples_median(&lc.end));
        lifecycle_free(&lc);
        errors += measure_concurrent(&d, "nocg-conc", 1, opt.quick ? 1.5 : 3.0, &cs, &cb, NULL);
        r = bench_row_add("nocgroup", "8 threads", "cmds/s", samples_median(&cs),
                          samples_median(&cb), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: no cgroups (no limits enforced)");
        if (errors) {
                r = bench_row_add("nocgroup", "errors", "count", (double)errors, NAN, CMP_VALUE_LT,
                                  1);
                snprintf(r->note, sizeof(r->note), "see stderr and %s", d.log);
        }
        st = bench_daemon_stop(&d);
        if (st != 0) {
                r = bench_row_add("nocgroup", "daemon exit status", "status", st, NAN, CMP_VALUE_LT,
                                  1);
                snprintf(r->note, sizeof(r->note), "see %s", d.log);
        }
        samples_free(&s);
        samples_free(&b);
        samples_free(&cs);
        samples_free(&cb);
}

/* ---- idle --------------------------------------------------------------------------- */

struct creator {
        pthread_t thread;
        const struct bench_daemon *d;
        int first, count; /* sandboxes idle-<first> .. idle-<first+count-1> */
        int terminate;
        int done;
        long errors;
        double *lat_ms; /* per sandbox, indexed from first */
};

static void *creator_main(void *arg) {
        struct creator *k = arg;
        sbx_client *c = bench_connect(k->d);
        int i;
        if (!c) {
                k->errors = k->count;
                return NULL;
        }
        for (i = 0; i < k->count; i++) {
                char id[32];
                double t0 = bench_now_ms();
                snprintf(id, sizeof(id), "idle-%d", k->first + i);
                if (k->terminate) {
                        if (terminate_sandbox(c, id) < 0)
                                k->errors++;
                } else {
                        char *got = create_sandbox(c, id);
                        if (!got) {
                                k->errors++;
                                continue;
                        }
                        free(got);
                }
                k->lat_ms[i] = bench_now_ms() - t0;
                k->done++;
        }
        sbx_close(c);
        return NULL;
}

/* Creates (or terminates) idle-0 .. idle-(n-1) from 4 threads; returns the wall time in
 * seconds, and the per-sandbox times in order of id into lat (n entries). */
static double run_creators(const struct bench_daemon *d, int n, int terminate, double *lat,
                           long *errors, int *done) {
        enum { CREATORS = 4 };
        struct creator ks[CREATORS];
        double t0 = bench_now_ms();
        int i, per = (n + CREATORS - 1) / CREATORS, first = 0;
        memset(ks, 0, sizeof(ks));
        for (i = 0; i < CREATORS; i++) {
                ks[i].d = d;
                ks[i].first = first;
                ks[i].count = first + per > n ? n - first : per;
                ks[i].terminate = terminate;
                ks[i].lat_ms = lat + first;
                first += ks[i].count;
                pthread_create(&ks[i].thread, NULL, creator_main, &ks[i]);
        }
        for (i = 0; i < CREATORS; i++) {
                pthread_join(ks[i].thread, NULL);
                *errors += ks[i].errors;
                *done += ks[i].done;
        }
        return (bench_now_ms() - t0) / 1000.0;
}

/* Median latency of `true` in id and of a bare spawn, interleaved, n each. */
static void latency_pair(sbx_client *c, const char *id, int n, struct samples *s,
                         struct samples *b) {
        int i;
        for (i = -10; i < n; i++) {
                double t0 = bench_now_ms(), t1, t2;
                exec_true(c, id);
                t1 = bench_now_ms();
                spawn_true();
                t2 = bench_now_ms();
                if (i >= 0) {
                        samples_add(s, t1 - t0);
                        samples_add(b, t2 - t1);
                }
        }
}

/* Sandboxes the host can take: two processes each, and a few descriptors each in the
 * daemon. */
static int host_room(int want) {
        long pid_max = 32768;
        FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
        if (f) {
                if (fscanf(f, "%ld", &pid_max) != 1)
                        pid_max = 32768;
                fclose(f);
        }
        if ((long)want * 2 + 2000 > pid_max) {
                int room = (int)((pid_max - 2000) / 2);
                bench_log("idle: pid_max %ld allows about %d sandboxes; using that", pid_max, room);
                return room > 0 ? room : 1;
        }
        return want;
}

static void case_idle(void) {
        int n = host_room(opt.sandboxes > 0 ? opt.sandboxes : opt.quick ? 100 : 1000);
        int lat_n = opt.quick ? 60 : 200, done = 0, st, leftovers = 0, warm = 0;
        char max[32], sandboxes_dir[500];
        /* No spares: what is left after the terminates is counted as leftovers, but for
         * the warm pool's (named ~warm-*). */
        const char *extra[] = {
                "--max-sandboxes", max, "--max-sandboxes-per-uid", max, "--spares", "0", NULL};
        struct bench_daemon d;
        sbx_client *c = NULL;
        char *lat_id = NULL;
        struct samples l1 = {0}, b1 = {0}, ln = {0}, bn = {0}, first = {0}, last = {0};
        double *lat = calloc((size_t)n, sizeof(double)), create_s, end_s;
        long rss0, rss1, rssn, rss_end, nofile, errors = 0;
        struct meminfo mem0, memn;
        double settle0, settlen;
        int fd1, fdn, fd_end, children, i, tenth, per;
        struct sbx_sandbox_list *l = NULL;
        struct bench_row *r;

        bench_log("idle: %d idle sandboxes on a daemon of their own", n);
        snprintf(max, sizeof(max), "%d", n + 100);
        if (!lat || bench_daemon_start(&d, base_dir, "idle", extra) < 0) {
                free(lat);
                return;
        }
        rss0 = bench_rss_kib(d.pid);
        c = bench_connect(&d);
        lat_id = c ? create_sandbox(c, "latency") : NULL;
        if (!lat_id)
                goto stop;
        latency_pair(c, lat_id, lat_n, &l1, &b1);
        rss1 = bench_rss_kib(d.pid);
        fd1 = bench_fd_count(d.pid);

        /* What the host gives for them: daemon, inits and kernel objects alike. */
        sync();
        settle0 = bench_meminfo_settled(&mem0);
        create_s = run_creators(&d, n, 0, lat, &errors, &done);
        bench_log("idle: %d sandboxes created in %.1f s (%ld errors)", done, create_s, errors);
        settlen = bench_meminfo_settled(&memn);
        rssn = bench_rss_kib(d.pid);
        fdn = bench_fd_count(d.pid);
        nofile = bench_nofile_limit(d.pid);
        children = bench_children(d.pid);
        latency_pair(c, lat_id, lat_n, &ln, &bn);

        /* Each creator thread makes its ids in order: the first and last tenth of each
         * thread's range are the first and last tenth in time. */
        per = (n + 3) / 4;
        tenth = per / 10 > 0 ? per / 10 : 1;
        for (i = 0; i < n; i++) {
                if (i % per < tenth)
                        samples_add(&first, lat[i]);
                else if (i % per >= per - tenth)
                        samples_add(&last, lat[i]);
        }
        r = bench_row_add("idle", "create N, wall", "s", create_s, NAN, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "N=%d from 4 clients: %.0f sandboxes/s", done,
                 create_s > 0 ? done / create_s : 0);
        r = bench_row_add("idle", "create, last vs first 10%", "ms", samples_median(&last),
                          samples_median(&first), CMP_NONE, 0);
        r = bench_row_add("idle", "daemon RSS, N vs 1", "MiB", rssn / 1024.0, rss1 / 1024.0,
                          CMP_VALUE_LT, 64);
        snprintf(r->note, sizeof(r->note), "%.1f KiB per sandbox; %.1f MiB at start",
                 (double)(rssn - rss1) / (done ? done : 1), rss0 / 1024.0);
        r = bench_row_add("idle", "host memory per sandbox", "KiB",
                          mem0.avail > 0 && memn.avail > 0 && done
                                  ? (double)(mem0.avail - memn.avail) / done
                                  : NAN,
                          NAN, CMP_VALUE_LE, 256);
        snprintf(r->note, sizeof(r->note),
                 "MemAvailable drop / N at N=%d: daemon, two inits each, kernel (settled %.0f "
                 "s and %.0f s)",
                 done, settle0, settlen);
        if (done) {
#define PER(f) ((double)(memn.f - mem0.f) / done)
                r = bench_row_add("idle", "memory counted per sandbox", "KiB",
                                  PER(anon) + PER(shmem) + PER(slab) + PER(tables) + PER(stacks) +
                                          PER(percpu),
                                  NAN, CMP_NONE, 0);
                snprintf(r->note, sizeof(r->note),
                         "diagnostic, /proc/meminfo: kernel objects %.0f, processes' own %.0f, "
                         "page tables %.0f, kernel stacks %.0f, tmpfs %.0f, per-CPU %.0f",
                         PER(slab), PER(anon), PER(tables), PER(stacks), PER(shmem), PER(percpu));
#undef PER
        }
        r = bench_row_add("idle", "daemon fds, N vs 1", "fds", fdn, fd1, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "%.1f per sandbox; RLIMIT_NOFILE %ld; %d children",
                 (double)(fdn - fd1) / (done ? done : 1), nofile, children);
        r = bench_row_add("idle", "true median, N vs 1", "ms", samples_median(&ln),
                          samples_median(&l1), CMP_RATIO_LE, 1.25);
        snprintf(r->note, sizeof(r->note), "bare spawn meanwhile %.3f -> %.3f ms",
                 samples_median(&b1), samples_median(&bn));
        bench_row_add("idle", "true p99, N vs 1", "ms", samples_pct(&ln, 99), samples_pct(&l1, 99),
                      CMP_NONE, 0);

        end_s = run_creators(&d, n, 1, lat, &errors, &done);
        bench_log("idle: terminated in %.1f s", end_s);
        terminate_sandbox(c, lat_id);
        if (sbx_list(c, NULL, &l) == SBX_OK) {
                leftovers += (int)l->n;
                sbx_sandbox_list_free(l);
        } else {
                leftovers++;
        }
        usleep(200000);
        /* The daemon's warm pool (--warm, ~warm-* names) is its own and stays. */
        snprintf(sandboxes_dir, sizeof(sandboxes_dir), "%s/sandboxes", d.state);
        i = bench_dir_entries(sandboxes_dir, &warm);
        children = bench_children(d.pid) - warm;
        st = bench_cgroup_leftovers(d.state);
        leftovers += children + (i > 0 ? i : 0) + (st > 0 ? st : 0);
        rss_end = bench_rss_kib(d.pid);
        fd_end = bench_fd_count(d.pid);
        r = bench_row_add("idle", "terminate N, wall", "s", end_s, NAN, CMP_NONE, 0);
        r = bench_row_add("idle", "leftovers after terminate", "count", leftovers, NAN,
                          CMP_VALUE_LT, 1);
        snprintf(r->note, sizeof(r->note),
                 "%d processes, %d state dirs, %d cgroups; then RSS %.1f MiB, %d fds", children, i,
                 st, rss_end / 1024.0, fd_end);
        if (errors) {
                r = bench_row_add("idle", "errors", "count", (double)errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr and %s", d.log);
        }
stop:
        sbx_close(c);
        free(lat_id);
        st = bench_daemon_stop(&d);
        if (st != 0) {
                r = bench_row_add("idle", "daemon exit status", "status", st, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see %s", d.log);
        }
        free(lat);
        samples_free(&l1);
        samples_free(&b1);
        samples_free(&ln);
        samples_free(&bn);
        samples_free(&first);
        samples_free(&last);
}

/* ---- stdout ------------------------------------------------------------------------- */

struct counter {
        uint64_t bytes;
        uint64_t next_offset;
        int disorder;
};

static void count_output(void *ud, enum sbx_stream stream, uint64_t offset, const void *data,
                         size_t len) {
        struct counter *k = ud;
        if (stream != SBX_STDOUT)
                return;
        if (offset != k->next_offset)
                k->disorder++;
        k->next_offset = offset + len;
        k->bytes += len;
}

/* MiB/s of `head -c size /dev/zero` through sbxd, or -1. */
static double stdout_sbx(sbx_client *c, const char *id, uint64_t size) {
        char n[32];
        const char *argv[] = {"head", "-c", n, "/dev/zero", NULL};
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        struct counter k = {0, 0, 0};
        enum sbx_code code;
        double t0, t1;
        int ok;
        snprintf(n, sizeof(n), "%llu", (unsigned long long)size);
        sbx_exec_opts_init(&o);
        o.argv = argv;
        o.argc = 4;
        o.timeout_ms = 600 * 1000;
        o.on_output = count_output;
        o.userdata = &k;
        t0 = bench_now_ms();
        code = sbx_exec(c, id, &o, &r);
        t1 = bench_now_ms();
        ok = code == SBX_OK && r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0 &&
             k.bytes == size && !k.disorder;
        if (!ok)
                bench_log("stdout: %s: %s: %llu of %llu bytes, %d out of order (result says "
                          "%llu)",
                          sbx_code_name(code), sbx_error_message(c), (unsigned long long)k.bytes,
                          (unsigned long long)size, k.disorder,
                          r ? (unsigned long long)r->stdout_bytes : 0ull);
        sbx_result_free(r);
        return ok ? size / MIB / ((t1 - t0) / 1000.0) : -1;
}

/* A one-way channel into fds: [0] to read, [1] to write. A pipe, or with relay a Unix
 * stream socket pair whose writing end has the daemon's send buffer (conn.c), as a
 * byte through sbxd meets one. 0 or -1. */
static int bench_channel(int relay, int fds[2]) {
        int want = (int)SBX_CONN_SNDBUF_BYTES;
        if (!relay)
                return pipe2(fds, O_CLOEXEC);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
                return -1;
        (void)setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
        return 0;
}

/* Reads fd to its end, 64 KiB at a time; with data, compares what comes with it (*same
 * is cleared on a difference). The count of bytes read. */
static uint64_t bench_drain(int fd, const uint8_t *data, uint64_t size, int *same) {
        static uint8_t buf[64 * 1024];
        uint64_t got = 0;
        ssize_t k;
        while ((k = read(fd, buf, sizeof(buf))) > 0 || (k < 0 && errno == EINTR)) {
                if (k <= 0)
                        continue;
                if (data && (got + (uint64_t)k > size || memcmp(buf, data + got, (size_t)k)))
                        *same = 0;
                got += (uint64_t)k;
        }
        return got;
}

/* MiB/s of the same read from a plain pipe, 64 KiB at a time, or -1. With relay, the
 * floor instead: head's pipe is relayed by `cat` into a Unix socket the bench reads,
 * one hop more as sbxd has, without framing, records or isolation. */
static double stdout_pipe(uint64_t size, int relay) {
        char n[32];
        char *argv[] = {"head", "-c", n, "/dev/zero", NULL}, *cat[] = {"cat", NULL};
        int p[2] = {-1, -1}, q[2], st, cst = 0, same = 1;
        uint64_t got;
        pid_t pid, cpid = -1;
        double t0, t1;
        snprintf(n, sizeof(n), "%llu", (unsigned long long)size);
        t0 = bench_now_ms();
        /* head's own pipe: q itself, or with relay one more that cat reads. */
        if (relay && pipe2(p, O_CLOEXEC) < 0)
                return -1;
        if (bench_channel(relay, q) < 0) {
                if (relay) {
                        close(p[0]);
                        close(p[1]);
                }
                return -1;
        }
        if (bench_spawn(argv, -1, relay ? p[1] : q[1], &pid) < 0) {
                pid = -1;
        } else if (relay && bench_spawn(cat, p[0], q[1], &cpid) < 0) {
                kill(pid, SIGKILL);
                cpid = -1;
        }
        if (relay) {
                close(p[0]);
                close(p[1]);
        }
        close(q[1]);
        got = pid > 0 ? bench_drain(q[0], NULL, size, &same) : 0;
        close(q[0]);
        if (pid > 0)
                waitpid(pid, &st, 0);
        if (cpid > 0)
                waitpid(cpid, &cst, 0);
        t1 = bench_now_ms();
        if (pid < 0 || (relay && cpid < 0))
                return -1;
        return got == size && st == 0 && cst == 0 ? size / MIB / ((t1 - t0) / 1000.0) : -1;
}

static void case_stdout(void) {
        uint64_t size = opt.quick ? 64ull << 20 : 1ull << 30;
        int reps = opt.quick ? 2 : 3, i, errors = 0;
        struct samples s = {0}, b = {0}, f = {0};
        sbx_client *c = bench_connect(&main_daemon);
        char *id = c ? create_sandbox(c, "bench-stdout") : NULL;
        struct bench_row *r;

        bench_log("stdout: %d x %llu MiB streamed through sbxd vs a plain pipe, and through a "
                  "relay (the floor)",
                  reps, (unsigned long long)(size >> 20));
        if (!id)
                goto out;
        for (i = 0; i < reps; i++) {
                double x = stdout_pipe(size, 0), y = stdout_sbx(c, id, size),
                       z = stdout_pipe(size, 1);
                if (x < 0 || y < 0 || z < 0) {
                        errors++;
                        continue;
                }
                samples_add(&b, x);
                samples_add(&s, y);
                samples_add(&f, z);
        }
        r = bench_row_add("stdout", "streamed head -c", "MiB/s", samples_median(&s),
                          samples_median(&b), CMP_RATIO_GE, 0.8);
        snprintf(r->note, sizeof(r->note), "%llu MiB, median of %d",
                 (unsigned long long)(size >> 20), (int)s.n);
        r = bench_row_add("stdout", "floor: via a relay", "MiB/s", samples_median(&f),
                          samples_median(&b), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note),
                 "diagnostic: the pipe relayed by cat into a Unix socket (no framing, isolation)");
        if (errors) {
                r = bench_row_add("stdout", "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        terminate_sandbox(c, id);
out:
        free(id);
        sbx_close(c);
        samples_free(&s);
        samples_free(&b);
        samples_free(&f);
}

/* ---- files -------------------------------------------------------------------------- */

/* The largest piece sent in one WriteFile / asked for in one ReadFile: well under the
 * 64 MiB frame limit. */
#define FILE_PIECE_BYTES (16u << 20)

/* Writes data to path in id in pieces (the first replaces, the rest append). */
static enum sbx_code files_sbx_write(sbx_client *c, const char *id, const uint8_t *data,
                                     size_t size) {
        size_t off;
        for (off = 0; off < size; off += FILE_PIECE_BYTES) {
                size_t n = size - off < FILE_PIECE_BYTES ? size - off : FILE_PIECE_BYTES;
                enum sbx_code code = sbx_write(c, id, "bench.bin", data + off, n, 0644,
                                               off ? SBX_WRITE_APPEND : 0);
                if (code != SBX_OK)
                        return code;
        }
        return SBX_OK;
}

/* Reads it back and compares. */
static enum sbx_code files_sbx_read(sbx_client *c, const char *id, const uint8_t *data, size_t size,
                                    int *mismatch) {
        size_t off = 0;
        while (off < size) {
                struct sbx_read_result *rr = NULL;
                enum sbx_code code = sbx_read(c, id, "bench.bin", off, FILE_PIECE_BYTES, &rr);
                if (code != SBX_OK)
                        return code;
                if (rr->len == 0 || off + rr->len > size || memcmp(rr->data, data + off, rr->len))
                        *mismatch = 1;
                off += rr->len;
                if (rr->len == 0)
                        off = size;
                sbx_read_result_free(rr);
        }
        return SBX_OK;
}

/* `cat > path` fed from a pipe; returns MiB/s or -1. With relay, the floor: fed from a
 * Unix socket instead, as sbxd is. */
static double files_pipe_write(const char *path, const uint8_t *data, size_t size, int relay) {
        char *argv[] = {"cat", NULL};
        int p[2], out, st = -1;
        size_t off = 0;
        pid_t pid;
        double t0 = bench_now_ms(), t1;
        out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0)
                return -1;
        if (bench_channel(relay, p) < 0) {
                close(out);
                return -1;
        }
        if (bench_spawn(argv, p[0], out, &pid) < 0)
                pid = -1;
        close(p[0]);
        close(out);
        while (pid > 0 && off < size) {
                ssize_t k = write(p[1], data + off, size - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                off += (size_t)k;
        }
        close(p[1]);
        if (pid > 0)
                waitpid(pid, &st, 0);
        t1 = bench_now_ms();
        return off == size && st == 0 ? size / MIB / ((t1 - t0) / 1000.0) : -1;
}

/* `cat path` read through a pipe; returns MiB/s or -1. With relay, the floor: through a
 * Unix socket instead, as from sbxd. */
static double files_pipe_read(char *path, const uint8_t *data, size_t size, int relay) {
        char *argv[] = {"cat", path, NULL};
        int p[2], st = -1, same = 1;
        uint64_t got = 0;
        pid_t pid;
        double t0 = bench_now_ms(), t1;
        if (bench_channel(relay, p) < 0)
                return -1;
        if (bench_spawn(argv, -1, p[1], &pid) < 0)
                pid = -1;
        close(p[1]);
        if (pid > 0)
                got = bench_drain(p[0], data, size, &same);
        close(p[0]);
        if (pid > 0)
                waitpid(pid, &st, 0);
        t1 = bench_now_ms();
        return same && got == size && st == 0 ? size / MIB / ((t1 - t0) / 1000.0) : -1;
}

static void case_files(void) {
        size_t size = opt.quick ? 16u << 20 : 64u << 20, i;
        int reps = opt.quick ? 2 : 3, k, errors = 0, mismatch = 0, unimpl = 0;
        uint8_t *data = malloc(size);
        char path[400];
        struct samples sw = {0}, sr = {0}, bw = {0}, br = {0}, fw = {0}, fr = {0};
        sbx_client *c = bench_connect(&main_daemon);
        char *id = c ? create_sandbox(c, "bench-files") : NULL;
        struct bench_row *r;

        bench_log("files: %d x %zu MiB written and read through sbxd vs cat through a pipe, and "
                  "through a Unix socket (the floor)",
                  reps, size >> 20);
        if (!id || !data)
                goto out;
        /* Not all zeroes, not compressible by accident: a cheap LCG. */
        for (i = 0; i < size; i++)
                data[i] = (uint8_t)((i * 2654435761u) >> 13);
        snprintf(path, sizeof(path), "%s/bench.bin", base_dir);
        for (k = 0; k < reps && !unimpl; k++) {
                struct samples *into[4] = {&bw, &br, &fw, &fr};
                double t0, t1, t2, x;
                enum sbx_code code;
                int j;
                for (j = 0; j < 4; j++) {
                        x = j % 2 ? files_pipe_read(path, data, size, j / 2)
                                  : files_pipe_write(path, data, size, j / 2);
                        if (x < 0)
                                errors++;
                        else
                                samples_add(into[j], x);
                }
                t0 = bench_now_ms();
                code = files_sbx_write(c, id, data, size);
                t1 = bench_now_ms();
                if (code == SBX_OK)
                        code = files_sbx_read(c, id, data, size, &mismatch);
                t2 = bench_now_ms();
                if (code == SBX_UNIMPLEMENTED) {
                        unimpl = 1;
                        break;
                }
                if (code != SBX_OK) {
                        bench_log("files: %s: %s", sbx_code_name(code), sbx_error_message(c));
                        errors++;
                        continue;
                }
                samples_add(&sw, size / MIB / ((t1 - t0) / 1000.0));
                samples_add(&sr, size / MIB / ((t2 - t1) / 1000.0));
        }
        unlink(path);
        r = bench_row_add("files", "WriteFile, pieces", "MiB/s", samples_median(&sw),
                          samples_median(&bw), CMP_RATIO_GE, 0.70);
        r->unimplemented = unimpl;
        snprintf(r->note, sizeof(r->note), "%zu MiB in %u MiB pieces", size >> 20,
                 FILE_PIECE_BYTES >> 20);
        r = bench_row_add("files", "floor: write via a socket", "MiB/s", samples_median(&fw),
                          samples_median(&bw), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: cat fed from a Unix socket");
        r = bench_row_add("files", "ReadFile, pieces", "MiB/s", samples_median(&sr),
                          samples_median(&br), CMP_RATIO_GE, 0.50);
        r->unimplemented = unimpl;
        r = bench_row_add("files", "floor: read via a socket", "MiB/s", samples_median(&fr),
                          samples_median(&br), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: cat into a Unix socket");
        if (errors || mismatch) {
                r = bench_row_add("files", "errors", "count", errors + mismatch, NAN, CMP_VALUE_LT,
                                  1);
                snprintf(r->note, sizeof(r->note), "%s",
                         mismatch ? "data read back differs" : "see stderr");
        }
        terminate_sandbox(c, id);
out:
        free(data);
        free(id);
        sbx_close(c);
        samples_free(&sw);
        samples_free(&sr);
        samples_free(&bw);
        samples_free(&br);
        samples_free(&fw);
        samples_free(&fr);
}

/* ---- images ---------------------------------------------------------------------------- */

/* The real Debian image of tests/mkdebian.sh (cached in the build directory), as an OCI
 * layout: its path into buf, or -1 when it cannot be made here. */
static int debian_layout(char *buf, size_t len) {
        char cmd[1200], *build = realpath(it_build_dir(), NULL);
        int r;

        if (!build)
                return -1;
        snprintf(buf, len, "%s/images/debian", build);
        free(build);
        snprintf(cmd, sizeof(cmd), "bash tests/mkdebian.sh %s >%s/mkdebian.log 2>&1", buf, base_dir);
        r = system(cmd);
        return r == 0 ? 0 : -1;
}

/* debian_layout, or a row of case name saying it failed and -1. */
static int debian_layout_row(const char *name, char *buf, size_t len) {
        struct bench_row *r;

        if (debian_layout(buf, len) == 0)
                return 0;
        r = bench_row_add(name, "Debian image", "-", NAN, NAN, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "tests/mkdebian.sh failed; see %s/mkdebian.log",
                 base_dir);
        return -1;
}

/* Kilobytes on disk of the paths (du counts a file linked twice once). */
static double du_kib(const char *paths) {
        char cmd[2200], out[64] = "";
        double kib = NAN;
        FILE *f;

        snprintf(cmd, sizeof(cmd), "du -skc %s 2>/dev/null | tail -1", paths);
        f = popen(cmd, "r");
        if (f && fgets(out, sizeof(out), f))
                kib = strtod(out, NULL);
        if (f)
                pclose(f);
        return kib;
}

/* Pulls source on c; the ms it took, or NAN. *ret_digest: the image's (free()). */
static double timed_pull(sbx_client *c, const char *source, char **ret_digest) {
        struct sbx_image *img = NULL;
        double t0 = bench_now_ms(), ms;

        sbx_set_call_timeout_ms(c, 0);
        if (sbx_image_pull(c, source, NULL, &img) != SBX_OK) {
                bench_log("pull %s: %s", source, sbx_error_message(c));
                return NAN;
        }
        ms = bench_now_ms() - t0;
        if (ret_digest)
                *ret_digest = strdup(img->digest);
        sbx_image_free(img);
        return ms;
}

/* skopeo copy of the layout and umoci unpack of the copy, into dir: the ms it took. */
static double timed_unpack(const char *layout, const char *dir) {
        char cmd[4096];
        double t0 = bench_now_ms();

        snprintf(cmd, sizeof(cmd),
                 "rm -rf %s && mkdir -p %s && skopeo copy --quiet oci:%s/oci:deb oci:%s/lay:deb && "
                 "umoci unpack --image %s/lay:deb %s/bundle >/dev/null",
                 dir, dir, layout, dir, dir, dir);
        return system(cmd) == 0 ? bench_now_ms() - t0 : NAN;
}

/* sh -c shell in id: 0 when it exited 0, else -1. */
static int run_shell(sbx_client *c, const char *id, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        int ok;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = 30000;
        ok = sbx_exec(c, id, &o, &r) == SBX_OK && r->has_exit_code && r->exit_code == 0;
        sbx_result_free(r);
        return ok ? 0 : -1;
}

/* A sandbox from image (NULL: the host's root); its id (free()) or NULL. */
static char *create_from(sbx_client *c, const char *image) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        char *id;

        sbx_create_opts_init(&o);
        o.image = image;
        if (sbx_create(c, &o, &sb) != SBX_OK) {
                bench_log("create: %s", sbx_error_message(c));
                return NULL;
        }
        id = strdup(sb->id);
        sbx_sandbox_free(sb);
        return id;
}

/* n rounds, gap_ms apart, of: create + true + terminate from image, the same from the
 * host's root, and bwrap with the unpacked image as its root, interleaved. */
static int image_lifecycles(sbx_client *c, const char *image, char *rootfs, int n, int gap_ms,
                            struct samples *img, struct samples *host, struct samples *bw) {
        char *argv_bw[] = {"bwrap", "--unshare-all", "--bind", rootfs, "/", "--proc",
                           "/proc", "--dev", "/dev", "/bin/true", NULL};
        int errors = 0;

        for (int i = -2; i < n; i++) {
                double t[4];
                usleep((useconds_t)gap_ms * 1000u);
                /* Each in turn first: the second pays for the teardown of the first's
                 * namespaces and mounts (the kernel's, after the end is answered). */
                for (int j = 0; j < 2; j++) {
                        int k = (i & 1) ? 1 - j : j;
                        char *id;
                        t[0] = bench_now_ms();
                        id = create_from(c, k ? NULL : image);
                        errors += !id || exec_true(c, id) < 0 || terminate_sandbox(c, id) < 0;
                        t[1] = bench_now_ms();
                        free(id);
                        if (i >= 0)
                                samples_add(k ? host : img, t[1] - t[0]);
                }
                t[2] = bench_now_ms();
                errors += bench_spawn_wait(argv_bw, -1, -1) != 0;
                t[3] = bench_now_ms();
                if (i >= 0)
                        samples_add(bw, t[3] - t[2]);
        }
        return errors;
}

/* KiB of memory each of n idle sandboxes from image (NULL: host root) takes from the
 * host (MemAvailable before and after, settled), or NAN. */
static double idle_kib_each(sbx_client *c, const char *image, int n, int *errors) {
        struct meminfo m0, m1;
        char **ids = calloc((size_t)n, sizeof(*ids));
        double kib;

        if (!ids)
                return NAN;
        bench_meminfo_settled(&m0);
        for (int i = 0; i < n; i++)
                *errors += (ids[i] = create_from(c, image)) == NULL;
        bench_meminfo_settled(&m1);
        kib = (double)(m0.avail - m1.avail) / n;
        for (int i = 0; i < n; i++)
                if (ids[i]) {
                        *errors += terminate_sandbox(c, ids[i]) < 0;
                        free(ids[i]);
                }
        free(ids);
        return kib;
}

/* The lifecycle rounds of image_lifecycles on a daemon of the default warm pool with
 * sbxd --warm-image source=2 as well, 100 ms apart (as agents create sandboxes, and as
 * case_lifecycle measures the host's root): the figures a user of the flag sees. */
static int warm_image_lifecycles(const char *source, char *rootfs, int n, struct samples *img,
                                 struct samples *host, struct samples *bw) {
        char flag[800];
        const char *const flags[] = {"--warm-image", flag, NULL};
        struct bench_daemon d;
        char *digest = NULL;
        sbx_client *c;
        int errors;

        snprintf(flag, sizeof(flag), "%s=2", source);
        if (bench_daemon_start(&d, base_dir, "image-warm", flags) < 0)
                return 1;
        if (!(c = bench_connect(&d))) {
                bench_daemon_stop(&d);
                return 1;
        }
        errors = isnan(timed_pull(c, source, &digest));
        usleep(2000 * 1000); /* the pool fills */
        if (!errors)
                errors += image_lifecycles(c, digest, rootfs, n, 100, img, host, bw);
        free(digest);
        sbx_close(c);
        bench_daemon_stop(&d);
        return errors;
}

/* Images (docs/images.md), on a daemon of their own without a warm pool (a sandbox of
 * the host's root and one of an image are both made cold): a first pull and unpack of
 * a real Debian image from its OCI layout against skopeo copy + umoci unpack of the same
 * layout; create + true + terminate from it against the same from the host's root and
 * against bwrap with the unpacked image as its root, cold, and with warm pools
 * (warm_image_lifecycles); the disk 20 sandboxes of the image take, each having written
 * 1 MiB to its root, against the image unpacked once; the host memory of an idle sandbox
 * of the image against one of the host's root. */
static void case_image(void) {
        static const char *const flags[] = {"--warm", "0", "--spares", "0", NULL};
        int n = opt.quick ? 6 : 20, errors = 0, pulls = opt.quick ? 1 : 3;
        char layout[600], source[700], dir[600], rootfs[700], paths[2400];
        struct samples pull = {0}, unpack = {0}, img = {0}, host = {0}, bw = {0}, wimg = {0},
                       whost = {0}, wbw = {0};
        struct bench_daemon d;
        struct bench_row *r;
        char *digest = NULL, *ids[20] = {0};
        double mine, base;
        sbx_client *c;

        if (debian_layout_row("image", layout, sizeof(layout)) < 0)
                return;
        if (bench_daemon_start(&d, base_dir, "image", flags) < 0 || !(c = bench_connect(&d))) {
                bench_row_add("image", "daemon", "-", NAN, NAN, CMP_NONE, 0);
                return;
        }
        bench_log("image: %d first pulls of the Debian image vs skopeo copy + umoci unpack", pulls);
        snprintf(source, sizeof(source), "oci:%s/oci:deb", layout);
        snprintf(dir, sizeof(dir), "%s/umoci", base_dir);
        for (int i = 0; i < pulls; i++) {
                samples_add(&unpack, timed_unpack(layout, dir));
                free(digest);
                digest = NULL;
                samples_add(&pull, timed_pull(c, source, &digest));
                if (i + 1 < pulls && digest)
                        errors += sbx_image_remove(c, digest, NULL) != SBX_OK;
        }
        add_pair_rows("image", "first pull+unpack", &pull, &unpack, CMP_RATIO_LE, 1.0, CMP_NONE, 0);
        if (!digest) {
                errors++;
                goto out;
        }
        bench_log("image: %d x (create + true + terminate) from it vs the host's root vs bwrap", n);
        snprintf(rootfs, sizeof(rootfs), "%s/bundle/rootfs", dir);
        errors += image_lifecycles(c, digest, rootfs, n, 0, &img, &host, &bw);
        add_pair_rows("image", "cold c+t+e vs host root", &img, &host, CMP_RATIO_LE, 1.3,
                      CMP_NONE, 0);
        add_pair_rows("image", "cold c+t+e vs bwrap", &img, &bw, CMP_NONE, 0, CMP_NONE, 0);
        bench_log("image: the same, 100 ms apart, with warm pools (--warm-image)");
        errors += warm_image_lifecycles(source, rootfs, n, &wimg, &whost, &wbw);
        add_pair_rows("image", "warm c+t+e vs host root", &wimg, &whost, CMP_RATIO_LE, 1.3,
                      CMP_NONE, 0);
        add_pair_rows("image", "warm c+t+e vs bwrap image root", &wimg, &wbw, CMP_RATIO_LE, 1.0,
                      CMP_NONE, 0);

        /* 20 sandboxes, 1 MiB written to each one's root. */
        for (int i = 0; i < 20; i++) {
                ids[i] = create_from(c, digest);
                errors += !ids[i] || run_shell(c, ids[i], "head -c 1048576 /dev/zero >/root/mib");
        }
        snprintf(paths, sizeof(paths), "%s/images %s/sandboxes/*/root", d.state, d.state);
        mine = du_kib(paths) / 1024.0;
        base = du_kib(rootfs) / 1024.0;
        r = bench_row_add("image", "disk of 20 sandboxes", "MiB", mine, base, CMP_RATIO_LE,
                          base > 0 ? (1.1 * base + 20.0) / base : 0);
        snprintf(r->note, sizeof(r->note), "bar: 1.1 x one unpacked image + 20 MiB");
        for (int i = 0; i < 20; i++)
                if (ids[i]) {
                        errors += terminate_sandbox(c, ids[i]) < 0;
                        free(ids[i]);
                }
        /* Memory settles slowly (bench_meminfo_settled): not in a --quick run. */
        if (!opt.quick) {
                mine = idle_kib_each(c, digest, 20, &errors);
                base = idle_kib_each(c, NULL, 20, &errors);
                bench_row_add("image", "host memory per idle sandbox", "KiB", mine, base,
                              CMP_RATIO_LE, 1.1);
        }
out:
        if (errors) {
                r = bench_row_add("image", "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr and %s", d.log);
        }
        free(digest);
        samples_free(&pull);
        samples_free(&unpack);
        samples_free(&img);
        samples_free(&host);
        samples_free(&bw);
        samples_free(&wimg);
        samples_free(&whost);
        samples_free(&wbw);
        sbx_close(c);
        bench_daemon_stop(&d);
}

/* ---- snapshots --------------------------------------------------------------------------- */

/* The case the rows are of: "snapshot", or "snapshot-xfs" (case_snapshot_xfs). */
static const char *snap_case = "snapshot";

/* The bytes of each of the snapshot case's 1,000 files: 100 MiB in all. */
#define SNAP_FILES      1000
#define SNAP_FILE_BYTES 104858

/* The shell loop writing SNAP_FILES files of SNAP_FILE_BYTES from /dev/urandom (nothing
 * compresses or dedups) into dir, which it makes; into buf. */
static void snap_files_shell(const char *dir, char *buf, size_t len) {
        snprintf(buf, len,
                 "mkdir -p %s && i=0 && while [ $i -lt %d ]; do "
                 "head -c %d /dev/urandom >%s/f$i || exit 1; i=$((i+1)); done",
                 dir, SNAP_FILES, SNAP_FILE_BYTES, dir);
}

/* Appends " STATE/sandboxes/ID/root STATE/sandboxes/ID/workspace" for each of the n ids
 * (NULL ones skipped) to paths, for du_kib. */
static void sandbox_paths(char *paths, size_t size, const char *state, char *const *ids, int n) {
        for (int i = 0; i < n; i++) {
                size_t len = strlen(paths);
                if (ids[i] && len < size)
                        snprintf(paths + len, size - len,
                                 " %s/sandboxes/%s/root %s/sandboxes/%s/workspace", state, ids[i],
                                 state, ids[i]);
        }
}

/* The ms the sandbox was frozen for snapshot digest, from the daemon's info line
 * "snapshot DIGEST taken (N bytes of layer, frozen M ms)" (daemon/rpc_snapshot.c; the
 * reply has no field for it), or NAN. */
static double snap_frozen_ms(const char *log, const char *digest) {
        char line[2048];
        double ms = NAN;
        FILE *f = fopen(log, "re");

        while (f && fgets(line, sizeof(line), f)) {
                char *p = strstr(line, digest), *q;
                if (p && strncmp(p + strlen(digest), " taken (", 8) == 0 &&
                    (q = strstr(p, ", frozen ")))
                        ms = strtod(q + 9, NULL);
        }
        if (f)
                fclose(f);
        return ms;
}

/* Whether the filesystem of dir (where it writes a small file) clones files
 * (cp --reflink=always). */
static int snap_reflink(const char *dir) {
        char cmd[2400];

        snprintf(cmd, sizeof(cmd),
                 "head -c 4096 /dev/urandom >%s/rl.a && cp --reflink=always %s/rl.a %s/rl.b "
                 "2>/dev/null; r=$?; rm -f %s/rl.a %s/rl.b; exit $r",
                 dir, dir, dir, dir, dir);
        return system(cmd) == 0;
}

/* One round of the snapshot row, each side first in turn: cp -a of SNAP_FILES fresh
 * files in the base directory (and the sync after it, into copy_sync: the store syncs
 * a layer it imports), and a snapshot of a fresh sandbox of image that wrote as many
 * (one command). The snapshot's digest into *ret_snap and its sandbox into *ret_id
 * (free() both), or errors counted. */
static int snap_round(sbx_client *c, const struct bench_daemon *d, const char *image, int first,
                      struct samples *snap, struct samples *copy, struct samples *copy_sync,
                      struct samples *frozen, char **ret_snap, char **ret_id) {
        char shell[1000], cmd[2400], src[300], dst[300];
        struct sbx_image *img = NULL;
        int errors = 0;
        double t0;
        char *id;

        snprintf(src, sizeof(src), "%s/snap-src", base_dir);
        snprintf(dst, sizeof(dst), "%s/snap-dst", base_dir);
        for (int j = 0; j < 2; j++) {
                if ((j == 0) == first) {
                        snap_files_shell(src, shell, sizeof(shell));
                        snprintf(cmd, sizeof(cmd), "rm -rf %s %s && %s && sync", src, dst, shell);
                        if (system(cmd) != 0) {
                                errors++;
                                continue;
                        }
                        snprintf(cmd, sizeof(cmd), "cp -a %s %s", src, dst);
                        t0 = bench_now_ms();
                        if (system(cmd) != 0) {
                                errors++;
                                continue;
                        }
                        samples_add(copy, bench_now_ms() - t0);
                        sync();
                        samples_add(copy_sync, bench_now_ms() - t0);
                        continue;
                }
                snap_files_shell("/root/snap", shell, sizeof(shell));
                if (!(id = create_from(c, image)) || run_shell(c, id, shell) < 0) {
                        bench_log("snapshot: writing the files in %s failed", id ? id : "-");
                        errors++;
                        if (id)
                                errors += terminate_sandbox(c, id) < 0;
                        free(id);
                        continue;
                }
                sync();
                t0 = bench_now_ms();
                if (sbx_snapshot(c, id, NULL, &img) != SBX_OK) {
                        bench_log("snapshot of %s: %s", id, sbx_error_message(c));
                        errors++;
                        errors += terminate_sandbox(c, id) < 0;
                        free(id);
                        continue;
                }
                samples_add(snap, bench_now_ms() - t0);
                t0 = snap_frozen_ms(d->log, img->digest);
                if (isnan(t0)) {
                        bench_log("snapshot %s: no frozen time in %s", img->digest, d->log);
                        errors++;
                } else {
                        samples_add(frozen, t0);
                }
                *ret_snap = strdup(img->digest);
                *ret_id = id;
                sbx_image_free(img);
        }
        snprintf(cmd, sizeof(cmd), "rm -rf %s %s", src, dst);
        errors += system(cmd) != 0;
        return errors;
}

/* The median, or NAN when nothing was measured (a row then judges nothing). */
static double median_or_nan(struct samples *s) {
        return s->n ? samples_median(s) : NAN;
}

/* n creates from image, then `true` in each; the ms until all n ran it, their ids into
 * ids (terminated by the caller), or NAN with errors counted. */
static double creates_then_true(sbx_client *c, const char *image, int n, char **ids, int *errors) {
        double t0 = bench_now_ms();
        int bad = 0;

        for (int i = 0; i < n; i++)
                bad += !(ids[i] = create_from(c, image));
        for (int i = 0; i < n; i++)
                bad += ids[i] && exec_true(c, ids[i]) < 0;
        *errors += bad;
        return bad ? NAN : bench_now_ms() - t0;
}

static void terminate_all(sbx_client *c, char **ids, int n, int *errors) {
        for (int i = 0; i < n; i++) {
                if (ids[i])
                        *errors += terminate_sandbox(c, ids[i]) < 0;
                free(ids[i]);
                ids[i] = NULL;
        }
}

/* The snapshot case's files in the workspace instead, once: each sandbox made from its
 * snapshot starts with a copy of them (init seeds its workspace: daemon/init/seed.h).
 * The ms of 10 creates from it until each ran true (against base_ms, the median from
 * the image), and the disk of those 10 (their roots and workspaces, and the store's
 * layers) against the layers alone: two diagnostic rows. */
static void snap_workspace_forks(sbx_client *c, const struct bench_daemon *d, const char *image,
                                 double base_ms, int *errors) {
        char shell[1000], paths[4000];
        struct sbx_image *img = NULL;
        char *id, *ids[10] = {0};
        struct bench_row *r;
        double ms, mib, once;

        snap_files_shell("/workspace/snap", shell, sizeof(shell));
        if (!(id = create_from(c, image)) || run_shell(c, id, shell) < 0 ||
            sbx_snapshot(c, id, NULL, &img) != SBX_OK) {
                bench_log("snapshot of files in /workspace: %s", sbx_error_message(c));
                (*errors)++;
                goto out;
        }
        snprintf(paths, sizeof(paths), "%s/images/layers", d->state);
        once = du_kib(paths) / 1024.0;
        ms = creates_then_true(c, img->digest, 10, ids, errors);
        r = bench_row_add(snap_case, "fork of 10, files in /workspace", "ms", ms, base_ms,
                          CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic, once: each fork's workspace starts with "
                 "a copy of the 100 MiB");
        sandbox_paths(paths, sizeof(paths), d->state, ids, 10);
        mib = du_kib(paths) / 1024.0;
        r = bench_row_add(snap_case, "disk of 10 forks, /workspace", "MiB", mib, once, CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: nothing written in them; %.0f MiB more "
                 "than the store's layers", mib - once);
        terminate_all(c, ids, 10, errors);
        *errors += sbx_image_remove(c, img->digest, NULL) != SBX_OK;
out:
        if (id)
                *errors += terminate_sandbox(c, id) < 0;
        free(id);
        sbx_image_free(img);
}

/* Snapshots and forks (issue 31), on a daemon of their own without a warm pool (every
 * create cold, on either side), from the real Debian image: a snapshot of a sandbox that
 * wrote 100 MiB in 1,000 files against `cp -a` of as many fresh files on the same
 * filesystem, and how long the sandbox was frozen meanwhile (the daemon's log); 10
 * sandboxes made from the snapshot until each ran `true` against the same from the
 * image; the disk of 10 of them, each having written 1 MiB, against the snapshot once;
 * and, as diagnostics, sbx_fork of 10 (a snapshot included), and the forks of a
 * snapshot whose files are in the workspace (snap_workspace_forks). The files are in
 * the sandbox's root (/root/snap) for the rows with bars: those forks share them. */
static void case_snapshot(void) {
        static const char *const flags[] = {"--warm", "0", "--spares", "0", NULL};
        int rounds = opt.quick ? 3 : 7, errors = 0, reflink, st;
        char layout[600], source[700], paths[4000];
        struct samples snap = {0}, copy = {0}, copy_sync = {0}, frozen = {0}, fork = {0},
                       base = {0};
        char *image = NULL, *snapshot = NULL, *source_id = NULL, *ids[10] = {0};
        struct sbx_fork_opts fo = {.count = 10};
        struct sbx_fork *fk = NULL;
        struct bench_daemon d;
        struct bench_row *r;
        double mine, once, t0;
        sbx_client *c;

        if (debian_layout_row(snap_case, layout, sizeof(layout)) < 0)
                return;
        if (bench_daemon_start(&d, base_dir, snap_case, flags) < 0) {
                bench_row_add(snap_case, "daemon", "-", NAN, NAN, CMP_NONE, 0);
                return;
        }
        if (!(c = bench_connect(&d))) {
                bench_row_add(snap_case, "daemon", "-", NAN, NAN, CMP_NONE, 0);
                bench_daemon_stop(&d);
                return;
        }
        snprintf(source, sizeof(source), "oci:%s/oci:deb", layout);
        if (isnan(timed_pull(c, source, &image))) {
                errors++;
                goto out;
        }
        reflink = snap_reflink(d.state);

        bench_log("snapshot: %d x (a snapshot of 100 MiB in %d files vs cp -a of them)", rounds,
                  SNAP_FILES);
        for (int i = 0; i < rounds; i++) {
                char *s = NULL, *id = NULL;
                errors += snap_round(c, &d, image, i & 1, &snap, &copy, &copy_sync, &frozen, &s,
                                     &id);
                if (i + 1 < rounds || !s) {
                        /* The next round's is of new files: nothing of this one is reused. */
                        if (s)
                                errors += sbx_image_remove(c, s, NULL) != SBX_OK;
                        if (id)
                                errors += terminate_sandbox(c, id) < 0;
                        free(s);
                        free(id);
                        continue;
                }
                snapshot = s;
                source_id = id;
        }
        r = bench_row_add(snap_case, "snapshot of 100 MiB median", "ms", median_or_nan(&snap),
                          median_or_nan(&copy), CMP_RATIO_LE, 1.2);
        snprintf(r->note, sizeof(r->note), "%d files written by one command; baseline cp -a of as "
                 "many on the same filesystem; %d rounds", SNAP_FILES, rounds);
        r = bench_row_add(snap_case, "snapshot vs cp -a + sync median", "ms",
                          median_or_nan(&snap), median_or_nan(&copy_sync), CMP_NONE, 0);
        snprintf(r->note, sizeof(r->note), "diagnostic: the store syncs the layer it imports");
        if (reflink) {
                r = bench_row_add(snap_case, "frozen during it, median", "ms",
                                  median_or_nan(&frozen), median_or_nan(&copy), CMP_VALUE_LE, 20);
                snprintf(r->note, sizeof(r->note), "the daemon's log; reflink here: bar 20 ms");
        } else {
                r = bench_row_add(snap_case, "frozen during it, median", "ms",
                                  median_or_nan(&frozen), median_or_nan(&copy), CMP_RATIO_LE, 1.0);
                snprintf(r->note, sizeof(r->note), "the daemon's log; no reflink here: bar the "
                         "cp -a time (max %.0f ms)", samples_pct(&frozen, 100));
        }
        if (!snapshot) {
                errors++;
                goto out;
        }

        bench_log("snapshot: %d x (10 creates from the snapshot vs from the image, then true)",
                  rounds);
        for (int i = 0; i < rounds; i++)
                for (int j = 0; j < 2; j++) {
                        int from_snap = (i & 1) ? 1 - j : j;
                        double ms = creates_then_true(c, from_snap ? snapshot : image, 10, ids,
                                                      &errors);
                        if (!isnan(ms))
                                samples_add(from_snap ? &fork : &base, ms);
                        terminate_all(c, ids, 10, &errors);
                }
        r = bench_row_add(snap_case, "fork of 10, all ran true median", "ms",
                          median_or_nan(&fork), median_or_nan(&base), CMP_RATIO_LE, 1.2);
        snprintf(r->note, sizeof(r->note), "10 creates from the snapshot, then true in each; "
                 "baseline the same from the image");

        /* 10 forks, 1 MiB written in each one's root, against the snapshot once (its layers
         * and its image's, in the store). */
        snprintf(paths, sizeof(paths), "%s/images/layers", d.state);
        once = du_kib(paths) / 1024.0;
        for (int i = 0; i < 10; i++) {
                ids[i] = create_from(c, snapshot);
                errors += !ids[i] || run_shell(c, ids[i], "head -c 1048576 /dev/urandom >/root/mib");
        }
        sandbox_paths(paths, sizeof(paths), d.state, ids, 10);
        mine = du_kib(paths) / 1024.0;
        r = bench_row_add(snap_case, "disk of 10 forks", "MiB", mine, once, CMP_RATIO_LE,
                          once > 0 ? (once + 10.0) / once : 0);
        snprintf(r->note, sizeof(r->note), "bar: the snapshot once (its layers) + 10 MiB; "
                 "%.1f MiB more", mine - once);
        terminate_all(c, ids, 10, &errors);

        /* sbx_fork itself: a snapshot of the source and 10 creates. One file more first,
         * else the snapshot's layer is the one the store holds already: the layer is all
         * of the writable root, 100 MiB again, as after any change. */
        errors += run_shell(c, source_id, "echo more >/root/snap/more") < 0;
        sync();
        t0 = bench_now_ms();
        if (sbx_fork(c, source_id, &fo, &fk) != SBX_OK) {
                bench_log("fork of %s: %s", source_id, sbx_error_message(c));
                errors++;
        } else {
                int bad = 0;
                for (size_t i = 0; i < fk->n; i++)
                        bad += exec_true(c, fk->ids[i]) < 0;
                r = bench_row_add(snap_case, "sbx_fork of 10, all ran true", "ms",
                                  bad ? NAN : bench_now_ms() - t0, NAN, CMP_NONE, 0);
                snprintf(r->note, sizeof(r->note), "diagnostic, once: a snapshot of the 100 MiB "
                         "sandbox after one more file, 10 creates, true in each");
                errors += bad;
                for (size_t i = 0; i < fk->n; i++)
                        errors += terminate_sandbox(c, fk->ids[i]) < 0;
                sbx_fork_free(fk);
        }
        snap_workspace_forks(c, &d, image, median_or_nan(&base), &errors);
out:
        if (source_id)
                errors += terminate_sandbox(c, source_id) < 0;
        if (errors) {
                r = bench_row_add(snap_case, "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr and %s", d.log);
        }
        free(image);
        free(snapshot);
        free(source_id);
        samples_free(&snap);
        samples_free(&copy);
        samples_free(&copy_sync);
        samples_free(&frozen);
        samples_free(&fork);
        samples_free(&base);
        sbx_close(c);
        st = bench_daemon_stop(&d);
        if (st != 0) {
                r = bench_row_add(snap_case, "daemon exit status", "status", st, NAN, CMP_VALUE_LT,
                                  1);
                snprintf(r->note, sizeof(r->note), "see %s", d.log);
        }
}

/* The snapshot case again with the daemon's state and the baseline's files on an XFS
 * filesystem that shares blocks (mkfs.xfs -m reflink=1), made in a sparse file of the
 * base directory and mounted in a mount namespace of the bench's own (private: nothing
 * reaches the host's; the loop device goes with the mount): the reflink path's rows,
 * "snapshot-xfs". cp -a there clones too (coreutils' default --reflink=auto). Needs
 * root and xfsprogs; else one row says why. */
static void case_snapshot_xfs(void) {
        char saved[sizeof(base_dir)], img[sizeof(base_dir) + 16], mnt[sizeof(base_dir) - 8], cmd[1600];
        struct bench_row *r;

        snprintf(img, sizeof(img), "%s/xfs.img", base_dir);
        if ((size_t)snprintf(mnt, sizeof(mnt), "%s/xfs", base_dir) >= sizeof(mnt))
                return;
        snprintf(cmd, sizeof(cmd),
                 "truncate -s 8G %s && mkfs.xfs -q -m reflink=1 %s && mkdir -p %s && "
                 "mount -o loop %s %s",
                 img, img, mnt, img, mnt);
        if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null") != 0 ||
            unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            system(cmd) != 0) {
                r = bench_row_add("snapshot-xfs", "XFS filesystem", "-", NAN, NAN, CMP_NONE, 0);
                snprintf(r->note, sizeof(r->note), "not measured: needs root, loop devices and "
                         "mkfs.xfs (xfsprogs)");
                unlink(img);
                return;
        }
        memcpy(saved, base_dir, sizeof(saved));
        snprintf(base_dir, sizeof(base_dir), "%s", mnt);
        snap_case = "snapshot-xfs";
        case_snapshot();
        snap_case = "snapshot";
        memcpy(base_dir, saved, sizeof(base_dir));
        if (umount2(mnt, 0) < 0)
                bench_log("snapshot-xfs: umount %s: %s", mnt, strerror(errno));
        unlink(img);
        rmdir(mnt);
}

/* ---- main --------------------------------------------------------------------------- */

/* ---- forward: a stream of sbx_open_port vs plain loopback TCP ------------------------- */

/* The peer of both sides: on 127.0.0.1:PORT, a first byte 'S' sinks the stream to its
 * end and answers how many bytes came; 'D' sends SIZE zero bytes and ends its side. It
 * touches READY once it listens. Run in the sandbox for sbxd's side and on the host for
 * the baseline, so the peer costs both the same. */
static const char forward_peer_py[] =
        "import socket,sys\n"
        "port,size,ready=int(sys.argv[1]),int(sys.argv[2]),sys.argv[3]\n"
        "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        "s.bind(('127.0.0.1',port));s.listen(8);open(ready,'w').close()\n"
        "b=bytearray(1<<20);z=memoryview(bytes(1<<20))\n"
        "while True:\n"
        "  c,_=s.accept();m=c.recv(1)\n"
        "  if m==b'S':\n"
        "    n=0\n"
        "    while True:\n"
        "      k=c.recv_into(b)\n"
        "      if not k: break\n"
        "      n+=k\n"
        "    c.sendall(b'%d\\n'%n)\n"
        "  elif m==b'D':\n"
        "    left=size\n"
        "    while left: left-=c.send(z[:min(left,len(z))])\n"
        "    c.shutdown(socket.SHUT_WR);c.recv(1)\n"
        "  c.close()\n";

#define FORWARD_PEER_PORT 9100

/* Sends size bytes on fd after 'S', ends its side and reads the count back: MiB/s, or
 * -1 when the count is not size. */
static double forward_upload(int fd, uint64_t size) {
        static uint8_t buf[1 << 20];
        char ans[32] = {0};
        uint64_t sent = 0;
        double t0 = bench_now_ms();
        ssize_t k;

        if (write(fd, "S", 1) != 1)
                return -1;
        while (sent < size) {
                size_t n = size - sent < sizeof(buf) ? (size_t)(size - sent) : sizeof(buf);
                if ((k = write(fd, buf, n)) <= 0)
                        return -1;
                sent += (uint64_t)k;
        }
        shutdown(fd, SHUT_WR);
        k = read(fd, ans, sizeof(ans) - 1);
        if (k <= 0 || strtoull(ans, NULL, 10) != size)
                return -1;
        return size / MIB / ((bench_now_ms() - t0) / 1000.0);
}

/* Asks for size bytes with 'D' and reads them to the end: MiB/s, or -1. */
static double forward_download(int fd, uint64_t size) {
        int same = 1;
        double t0 = bench_now_ms();
        uint64_t got;

        if (write(fd, "D", 1) != 1)
                return -1;
        got = bench_drain(fd, NULL, size, &same);
        return got == size ? size / MIB / ((bench_now_ms() - t0) / 1000.0) : -1;
}

/* A plain TCP connection to the host's peer on 127.0.0.1:port, or -1. */
static int forward_tcp(int port) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                fd = -1;
        }
        return fd;
}

/* One transfer (upload or download) through a new stream (c, id) or TCP (c NULL). */
static double forward_once(sbx_client *c, const char *id, int port, uint64_t size, int up) {
        int fd = -1;
        double v;

        if (c && sbx_open_port(c, id, FORWARD_PEER_PORT, NULL, &fd) != SBX_OK) {
                bench_log("forward: sbx_open_port: %s", sbx_error_message(c));
                return -1;
        }
        if (!c && (fd = forward_tcp(port)) < 0)
                return -1;
        v = up ? forward_upload(fd, size) : forward_download(fd, size);
        close(fd);
        return v;
}

/* Starts the peer in the sandbox (sbx_exec_background) and on the host (host_pid), and
 * waits until both listen. 0 or -1. */
static int forward_peers(sbx_client *c, const char *id, uint64_t size, pid_t *host_pid) {
        char n[32], port[16], ready[600], sready[] = "/tmp/peer-ready", host_port[16];
        const char *sargv[] = {"/usr/bin/python3", "-c", forward_peer_py, port, n, sready, NULL};
        char *hargv[] = {"python3", "-c", (char *)(uintptr_t)forward_peer_py, host_port, n, ready,
                         NULL};
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;

        snprintf(n, sizeof(n), "%llu", (unsigned long long)size);
        snprintf(port, sizeof(port), "%d", FORWARD_PEER_PORT);
        snprintf(host_port, sizeof(host_port), "%d", FORWARD_PEER_PORT + 1);
        snprintf(ready, sizeof(ready), "%s/peer-ready", base_dir);
        sbx_exec_opts_init(&o);
        o.argv = sargv;
        o.argc = 6;
        if (sbx_exec_background(c, id, &o, &b) != SBX_OK) {
                bench_log("forward: the peer: %s", sbx_error_message(c));
                return -1;
        }
        sbx_background_free(b);
        if (bench_spawn(hargv, -1, -1, host_pid) < 0)
                return -1;
        for (int i = 0; i < 300; i++) {
                int fd = -1;
                if (access(ready, F_OK) == 0 &&
                    sbx_open_port(c, id, FORWARD_PEER_PORT, NULL, &fd) == SBX_OK) {
                        close(fd);
                        return 0;
                }
                usleep(100 * 1000);
        }
        bench_log("forward: the peers did not start");
        return -1;
}

static void case_forward(void) {
        uint64_t size = opt.quick ? 128ull << 20 : 1ull << 30;
        int reps = opt.quick ? 2 : 3, errors = 0;
        struct samples su = {0}, bu = {0}, sd = {0}, bd = {0};
        sbx_client *c = bench_connect(&main_daemon);
        char *id = c ? create_sandbox(c, "bench-forward") : NULL;
        struct bench_row *r;
        pid_t host = -1;

        bench_log("forward: %d x %llu MiB each way through sbx_open_port vs loopback TCP", reps,
                  (unsigned long long)(size >> 20));
        if (!id || forward_peers(c, id, size, &host) < 0)
                errors++;
        for (int i = 0; !errors && i < reps; i++) {
                double v[4] = {forward_once(NULL, NULL, FORWARD_PEER_PORT + 1, size, 1),
                               forward_once(c, id, 0, size, 1),
                               forward_once(NULL, NULL, FORWARD_PEER_PORT + 1, size, 0),
                               forward_once(c, id, 0, size, 0)};
                if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) {
                        errors++;
                        continue;
                }
                samples_add(&bu, v[0]);
                samples_add(&su, v[1]);
                samples_add(&bd, v[2]);
                samples_add(&sd, v[3]);
        }
        r = bench_row_add("forward", "upload through a stream", "MiB/s", samples_median(&su),
                          samples_median(&bu), CMP_RATIO_GE, 0.5);
        snprintf(r->note, sizeof(r->note), "%llu MiB, median of %d",
                 (unsigned long long)(size >> 20), (int)su.n);
        r = bench_row_add("forward", "download through a stream", "MiB/s", samples_median(&sd),
                          samples_median(&bd), CMP_RATIO_GE, 0.5);
        snprintf(r->note, sizeof(r->note), "%llu MiB, median of %d",
                 (unsigned long long)(size >> 20), (int)sd.n);
        if (errors) {
                r = bench_row_add("forward", "errors", "count", errors, NAN, CMP_VALUE_LT, 1);
                snprintf(r->note, sizeof(r->note), "see stderr");
        }
        if (host > 0) {
                kill(host, SIGKILL);
                waitpid(host, NULL, 0);
        }
        if (id)
                terminate_sandbox(c, id);
        free(id);
        sbx_close(c);
        samples_free(&su);
        samples_free(&bu);
        samples_free(&sd);
        samples_free(&bd);
}

static void usage(void) {
        fputs("usage: sbx_bench [--quick] [--json PATH] [--only NAME[,NAME...]] [--sandboxes N] "
              "[--keep]\n"
              "cases: roundtrip lifecycle cli concurrent idle stdout files burst nocgroup image "
              "snapshot snapshot-xfs forward\n",
              stderr);
}

/* The daemon needs a descriptor or more per sandbox: give it (and us) the hard limit. */
static void raise_nofile(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int main(int argc, char **argv) {
        /* idle after stdout and files: its memory figure waits for what they leave behind
         * (bench_meminfo_settled). */
        static const char *const names[] = {"roundtrip", "concurrent", "lifecycle",
                                            "cli",       "stdout",     "files",
                                            "burst",     "idle",       "nocgroup",
                                            "image",     "snapshot",   "snapshot-xfs",
                                            "forward"};
        double t0 = bench_now_ms();
        struct utsname u;
        char title[512], date[64], cpu[256];
        time_t now = time(NULL);
        int i, need_main = 0, st;

        opt.json = NULL;
        for (i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--quick") == 0) {
                        opt.quick = 1;
                } else if (strcmp(argv[i], "--keep") == 0) {
                        opt.keep = 1;
                } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
                        opt.json = argv[++i];
                } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
                        opt.only = argv[++i];
                } else if (strcmp(argv[i], "--sandboxes") == 0 && i + 1 < argc) {
                        opt.sandboxes = atoi(argv[++i]);
                        if (opt.sandboxes < 1) {
                                usage();
                                return 2;
                        }
                } else {
                        usage();
                        return 2;
                }
        }
        signal(SIGPIPE, SIG_IGN);
        raise_nofile();
        snprintf(base_dir, sizeof(base_dir), "/tmp/sbx-bench.XXXXXX");
        if (!mkdtemp(base_dir)) {
                bench_log("mkdtemp: %s", strerror(errno));
                return 1;
        }
        chmod(base_dir, 0755);
        uname(&u);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
        for (i = 0; i < 7; i++)
                need_main |= wanted(names[i]);
        need_main |= wanted("forward");
        if (need_main && bench_daemon_start(&main_daemon, base_dir, "main", NULL) < 0)
                return 1;
        for (i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
                if (!wanted(names[i]))
                        continue;
                if (strcmp(names[i], "roundtrip") == 0)
                        case_roundtrip();
                else if (strcmp(names[i], "lifecycle") == 0)
                        case_lifecycle();
                else if (strcmp(names[i], "concurrent") == 0)
                        case_concurrent();
                else if (strcmp(names[i], "idle") == 0)
                        case_idle();
                else if (strcmp(names[i], "stdout") == 0)
                        case_stdout();
                else if (strcmp(names[i], "files") == 0)
                        case_files();
                else if (strcmp(names[i], "burst") == 0)
                        case_burst();
                else if (strcmp(names[i], "cli") == 0)
                        case_cli();
                else if (strcmp(names[i], "nocgroup") == 0)
                        case_nocgroup();
                else if (strcmp(names[i], "image") == 0)
                        case_image();
                else if (strcmp(names[i], "snapshot") == 0)
                        case_snapshot();
                else if (strcmp(names[i], "snapshot-xfs") == 0)
                        case_snapshot_xfs();
                else if (strcmp(names[i], "forward") == 0)
                        case_forward();
        }
        if (need_main) {
                st = bench_daemon_stop(&main_daemon);
                if (st != 0) {
                        struct bench_row *r = bench_row_add("daemon", "exit status", "status", st,
                                                            NAN, CMP_VALUE_LT, 1);
                        snprintf(r->note, sizeof(r->note), "see %s", main_daemon.log);
                }
        }
        bench_cpu_model(cpu, sizeof(cpu));
        snprintf(title, sizeof(title), "sbx_bench: %s, %s %s, %ld x %s%s (%.0f s)", date, u.sysname,
                 u.release, sysconf(_SC_NPROCESSORS_ONLN), cpu, opt.quick ? ", --quick" : "",
                 (bench_now_ms() - t0) / 1000.0);
        bench_print_table(title);
        if (opt.json) {
                int r = bench_write_json(opt.json, opt.quick, (bench_now_ms() - t0) / 1000.0);
                if (r < 0)
                        bench_log("cannot write %s: %s", opt.json, strerror(-r));
                else
                        printf("JSON: %s\n", opt.json);
        }
        if (opt.keep) {
                printf("kept %s\n", base_dir);
        } else {
                char cmd[300];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
                if (system(cmd) != 0)
                        bench_log("cannot remove %s", base_dir);
        }
        return 0;
}
