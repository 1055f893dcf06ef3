/* cli_doctor.c: `sbx doctor` and `sbx version`.
 *
 * doctor checks, from this process and through the daemon's Hello, what the host
 * allows: who we are, user namespaces (and the sysctls that restrict them), the cgroup
 * hierarchy and its controllers, seccomp, Landlock, openat2, and whether the daemon's
 * socket exists and answers. Each check is one line "ok|warn|fail  name  detail"; a
 * check that is not ok names the exact command or setting that fixes it. --json prints
 * an array of {status, name, detail, fix}. It exits 0 when nothing fails, 1 otherwise.
 * The probes are read-only: files under /proc and /sys, and syscalls that create nothing
 * lasting (a user namespace in a short-lived child, a Landlock version query, an openat2
 * of "/"). */
#include "cli.h"
#include "pathcheck.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHECKS 24

enum level { OK, WARN, FAIL };

struct check {
        enum level level;
        const char *name;
        char detail[512];
        char fix[512];
};

struct doctor {
        struct check v[MAX_CHECKS];
        size_t n;
};

__attribute__((format(printf, 5, 6))) static void
add(struct doctor *d, enum level level, const char *name, const char *fix, const char *fmt, ...) {
        struct check *c;
        va_list ap;

        if (d->n == MAX_CHECKS)
                return;
        c = &d->v[d->n++];
        c->level = level;
        c->name = name;
        va_start(ap, fmt);
        vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
        va_end(ap);
        snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
}

/* Reads the first line of a small file into buf. 0, or -errno. */
static int read_line(const char *path, char *buf, size_t len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;
        char *nl;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        if ((nl = strchr(buf, '\n')))
                *nl = 0;
        return 0;
}

static long read_long(const char *path, long fallback) {
        char buf[64];
        if (read_line(path, buf, sizeof(buf)) < 0)
                return fallback;
        return strtol(buf, NULL, 10);
}

static bool has_word(const char *list, const char *word) {
        size_t n = strlen(word);
        for (const char *p = list; (p = strstr(p, word)); p += n)
                if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ' || p[n] == '\n'))
                        return true;
        return false;
}

/* ---- checks ------------------------------------------------------------------------------ */

static void check_user(struct doctor *d, bool root) {
        struct utsname u;

        if (root)
                add(d, OK, "user", NULL,
                    "running as root: a root sbxd runs each sandbox under its own uid");
        else
                add(d, OK, "user", NULL,
                    "running as uid %u (not root): a sbxd of this user runs rootless, in a user "
                    "namespace",
                    (unsigned)geteuid());
        if (uname(&u) == 0)
                add(d, OK, "kernel", NULL, "%s %s (%s)", u.sysname, u.release, u.machine);
}

/* The init helper a sbxd of this user would run: next to the sbxd beside this sbx (a
 * build tree) or in ../libexec/sbxd, else the compiled-in LIBEXECDIR; a rootless sbxd
 * whose helper it cannot reach (a checkout in /root run by another user) does not
 * start. */
static void check_helper(struct doctor *d) {
        static const char *const rel[] = {"sbx-init", "../libexec/sbxd/sbx-init"};
        char exe[PATH_MAX], cand[PATH_MAX + 32], dir[PATH_MAX], *slash;
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

        if (n > 0) {
                exe[n] = 0;
                if ((slash = strrchr(exe, '/')))
                        *slash = 0;
                for (size_t i = 0; slash && i < sizeof(rel) / sizeof(rel[0]); i++) {
                        snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]);
                        if (pathcheck_unsearchable(cand, dir, sizeof(dir))) {
                                add(d, WARN, "helper",
                                    "install sbxd (`make install`), make that directory "
                                    "searchable, or run sbxd with --init PATH",
                                    "the init helper next to this sbx (%s) is out of reach of uid "
                                    "%u: it may not search %s, so a sbxd of this user would not "
                                    "start",
                                    cand, (unsigned)geteuid(), dir);
                                return;
                        }
                        if (access(cand, X_OK) == 0) {
                                add(d, OK, "helper", NULL, "init helper %s", cand);
                                return;
                        }
                }
        }
        if (access(SBX_LIBEXECDIR "/sbx-init", X_OK) == 0)
                add(d, OK, "helper", NULL, "init helper %s", SBX_LIBEXECDIR "/sbx-init");
        else
                add(d, WARN, "helper", "build it (`make`) or install sbxd (`make install`)",
                    "no init helper next to this sbx nor at %s: a sbxd of this user would not "
                    "start",
                    SBX_LIBEXECDIR "/sbx-init");
}

/* Tries unshare(CLONE_NEWUSER) in a child. 0, or the errno it failed with. */
static int probe_userns(void) {
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return errno;
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0x7f) + 1);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return errno;
        if (!WIFEXITED(status))
                return EIO;
        return WEXITSTATUS(status) ? WEXITSTATUS(status) - 1 : 0;
}

static void check_userns(struct doctor *d, bool root) {
        long max = read_long("/proc/sys/user/max_user_namespaces", -1);
        long clone = read_long("/proc/sys/kernel/unprivileged_userns_clone", -1);
        long apparmor = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", -1);
        /* A root daemon does not need user namespaces; a rootless one cannot work without. */
        enum level missing = root ? WARN : FAIL;
        int err;

        if (max < 0) {
                add(d, missing, "userns", "use a kernel built with CONFIG_USER_NS=y",
                    "/proc/sys/user/max_user_namespaces is missing: this kernel has no user "
                    "namespaces");
        } else if (max == 0) {
                add(d, missing, "userns",
                    "sysctl -w user.max_user_namespaces=15000 (persist it in "
                    "/etc/sysctl.d/90-sbxd.conf)",
                    "user.max_user_namespaces is 0: user namespaces are disabled");
        } else {
                err = probe_userns();
                if (err == 0)
                        add(d, OK, "userns", NULL,
                            "user namespaces work (user.max_user_namespaces=%ld)", max);
                else
                        add(d, missing, "userns",
                            err == EPERM && geteuid() != 0
                                    ? "sysctl -w kernel.unprivileged_userns_clone=1 and "
                                      "kernel.apparmor_restrict_unprivileged_userns=0, or run in a "
                                      "container "
                                      "that allows unshare (docker --security-opt "
                                      "seccomp=unconfined)"
                                    : "allow unshare(CLONE_NEWUSER) here (a container's seccomp "
                                      "profile may "
                                      "block it: docker --security-opt seccomp=unconfined, or run "
                                      "sbxd on the host)",
                            "creating a user namespace failed: %s", strerror(err));
        }
        if (clone == 0)
                add(d, root ? OK : FAIL, "userns_clone",
                    root ? NULL : "sysctl -w kernel.unprivileged_userns_clone=1",
                    "kernel.unprivileged_userns_clone=0: only root may create user namespaces%s",
                    root ? " (fine for a root sbxd)" : "");
        else if (clone > 0)
                add(d, OK, "userns_clone", NULL, "kernel.unprivileged_userns_clone=%ld", clone);
        if (apparmor > 0)
                add(d, root ? OK : FAIL, "apparmor_userns",
                    root ? NULL
                         : "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give sbxd "
                           "an "
                           "AppArmor profile that allows `userns,`",
                    "kernel.apparmor_restrict_unprivileged_userns=%ld: AppArmor restricts "
                    "unprivileged "
                    "user namespaces%s",
                    apparmor, root ? " (fine for a root sbxd)" : "");
        else if (apparmor == 0)
                add(d, OK, "apparmor_userns", NULL,
                    "kernel.apparmor_restrict_unprivileged_userns=0");
}

/* This process's cgroup v2 path ("/user.slice/...") into buf, or "" when unknown. */
static void own_cgroup(char *buf, size_t len) {
        char line[1024];
        FILE *f = fopen("/proc/self/cgroup", "re");

        buf[0] = 0;
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = 0;
                        snprintf(buf, len, "%s", line + 3);
                        break;
                }
        }
        fclose(f);
}

/* The controllers sbxd uses, and their v1 hierarchies. */
static const char *const cgroup_need[] = {"memory", "cpu", "pids"};

/* cgroup v2 with every controller: whether this user can make groups (root: the
 * hierarchy is writable; another user: its own cgroup is delegated to it). */
static void check_cgroup_v2_access(struct doctor *d, bool root, const char *controllers) {
        char path[1200], cg[1024];

        if (root) {
                if (access("/sys/fs/cgroup", W_OK) < 0)
                        add(d, WARN, "cgroup",
                            "give the container a writable cgroup (docker run "
                            "--cgroupns=private "
                            "--privileged, or -v /sys/fs/cgroup:/sys/fs/cgroup:rw) or run "
                            "sbxd on the host",
                            "cgroup v2 (%s), but /sys/fs/cgroup is not writable: %s", controllers,
                            strerror(errno));
                else
                        add(d, OK, "cgroup", NULL, "cgroup v2 at /sys/fs/cgroup (controllers: %s)",
                            controllers);
                return;
        }
        own_cgroup(cg, sizeof(cg));
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s", cg);
        if (*cg && access(path, W_OK) == 0)
                add(d, OK, "cgroup", NULL,
                    "cgroup v2, delegated to this user at %s (controllers: %s)", path, controllers);
        else
                add(d, WARN, "cgroup",
                    "run sbxd with a delegated cgroup: systemd-run --user -p Delegate=yes "
                    "sbxd (or "
                    "Delegate=yes in its user unit)",
                    "cgroup v2 (%s), but %s is not writable by this user: limits fall back "
                    "to rlimits",
                    controllers, *cg ? path : "this process's cgroup");
}

/* cgroup v2: the controllers sbxd needs are enabled, then check_cgroup_v2_access. */
static void check_cgroup_v2(struct doctor *d, bool root) {
        char controllers[512], missing[64] = "";

        if (read_line("/sys/fs/cgroup/cgroup.controllers", controllers, sizeof(controllers)) < 0)
                controllers[0] = 0;
        for (size_t i = 0; i < sizeof(cgroup_need) / sizeof(cgroup_need[0]); i++)
                if (!has_word(controllers, cgroup_need[i])) {
                        strcat(missing, " ");
                        strcat(missing, cgroup_need[i]);
                }
        if (*missing) {
                add(d, WARN, "cgroup",
                    "enable the controllers: echo '+memory +cpu +pids' > "
                    "/sys/fs/cgroup/cgroup.subtree_control "
                    "(on systemd hosts they are on by default)",
                    "cgroup v2, but the controllers%s are missing (have: %s)", missing,
                    *controllers ? controllers : "none");
                return;
        }
        check_cgroup_v2_access(d, root, controllers);
}

/* Legacy or hybrid: one hierarchy per controller under a tmpfs, writable by root. */
static void check_cgroup_v1(struct doctor *d, bool root) {
        char missing[64] = "", dir[64];

        for (size_t i = 0; i < sizeof(cgroup_need) / sizeof(cgroup_need[0]); i++) {
                struct stat st;
                snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", cgroup_need[i]);
                if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        strcat(missing, " ");
                        strcat(missing, cgroup_need[i]);
                }
        }
        if (*missing)
                add(d, WARN, "cgroup",
                    "mount the v1 hierarchies (e.g. mount -t cgroup -o memory none "
                    "/sys/fs/cgroup/memory), "
                    "or boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2",
                    "cgroup v1, but the hierarchies%s are missing", missing);
        else if (!root || access("/sys/fs/cgroup/memory", W_OK) < 0)
                add(d, WARN, "cgroup",
                    root ? "give the container writable cgroups (docker run --privileged) "
                           "or run sbxd on the host"
                         : "run sbxd as root, or boot with "
                           "systemd.unified_cgroup_hierarchy=1 and delegate "
                           "a cgroup (systemd-run --user -p Delegate=yes sbxd)",
                    "cgroup v1 hierarchies (memory, cpu, pids) are not writable %s: limits "
                    "fall back to "
                    "rlimits",
                    root ? "(read-only mount?)" : "by this user");
        else
                add(d, OK, "cgroup", NULL,
                    "cgroup v1 hierarchies (memory, cpu, pids) at /sys/fs/cgroup; cgroup "
                    "v2 "
                    "(systemd.unified_cgroup_hierarchy=1) is preferred");
}

static void check_cgroup(struct doctor *d, bool root) {
        struct statfs sf;

        if (statfs("/sys/fs/cgroup", &sf) < 0) {
                add(d, WARN, "cgroup", "mount -t cgroup2 none /sys/fs/cgroup",
                    "/sys/fs/cgroup is missing: limits fall back to rlimits (%s)", strerror(errno));
                return;
        }
        if (sf.f_type == CGROUP2_SUPER_MAGIC)
                check_cgroup_v2(d, root);
        else
                check_cgroup_v1(d, root);
}

static void check_seccomp(struct doctor *d) {
        char actions[256];
        int r = read_line("/proc/sys/kernel/seccomp/actions_avail", actions, sizeof(actions));

        if (r == 0 && has_word(actions, "errno") && has_word(actions, "kill_process"))
                add(d, OK, "seccomp", NULL, "seccomp filters available (actions: %s)", actions);
        else if (r == 0)
                add(d, FAIL, "seccomp",
                    "use a kernel with CONFIG_SECCOMP_FILTER=y (Linux 4.14 or newer)",
                    "seccomp lacks the errno or kill_process action (actions: %s)", actions);
        else if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL)
                add(d, FAIL, "seccomp",
                    "use a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y",
                    "this kernel has no seccomp");
        else
                add(d, WARN, "seccomp",
                    "use a kernel with CONFIG_SECCOMP_FILTER=y (Linux 4.14 or newer)",
                    "/proc/sys/kernel/seccomp/actions_avail is missing: cannot tell which actions "
                    "exist");
}

static void check_landlock(struct doctor *d) {
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

        if (abi >= 1)
                add(d, OK, "landlock", NULL, "Landlock ABI %ld", abi);
        else if (errno == ENOSYS)
                add(d, WARN, "landlock",
                    "use Linux 5.13 or newer built with CONFIG_SECURITY_LANDLOCK=y",
                    "this kernel has no Landlock");
        else if (errno == EOPNOTSUPP)
                add(d, WARN, "landlock",
                    "add landlock to the lsm= kernel parameter, e.g. "
                    "lsm=landlock,lockdown,yama,integrity,apparmor,bpf, and reboot",
                    "Landlock is built in but not enabled");
        else
                add(d, WARN, "landlock",
                    "allow the landlock_* syscalls (a container's seccomp profile may block them) "
                    "or run sbxd on "
                    "the host",
                    "landlock_create_ruleset failed: %s", strerror(errno));
}

static void check_openat2(struct doctor *d) {
        struct open_how how;
        long fd;

        memset(&how, 0, sizeof(how));
        how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd >= 0) {
                close((int)fd);
                add(d, OK, "openat2", NULL, "openat2 with RESOLVE_IN_ROOT works");
        } else if (errno == ENOSYS) {
                add(d, WARN, "openat2", "use Linux 5.6 or newer",
                    "this kernel has no openat2: file operations cannot resolve paths with "
                    "RESOLVE_IN_ROOT");
        } else {
                add(d, WARN, "openat2",
                    "allow openat2 (a container's seccomp profile may block it) or run sbxd on the "
                    "host",
                    "openat2 failed: %s", strerror(errno));
        }
}

/* Sandboxes from images (docs/images.md): overlayfs, and a kernel that takes idmapped
 * layers (5.19) for a root daemon's. */
static void check_images(struct doctor *d) {
        char line[256], name[64];
        struct utsname u;
        unsigned major = 0, minor = 0;
        bool overlay = false;
        FILE *f = fopen("/proc/filesystems", "re");

        while (f && !overlay && fgets(line, sizeof(line), f))
                overlay = sscanf(line, "%*s %63s", name) == 1 ? strcmp(name, "overlay") == 0
                                                            : sscanf(line, "%63s", name) == 1 &&
                                                                      strcmp(name, "overlay") == 0;
        if (f)
                fclose(f);
        if (uname(&u) == 0)
                (void)sscanf(u.release, "%u.%u", &major, &minor);
        if (!overlay)
                add(d, WARN, "images", "modprobe overlay (or build the kernel with CONFIG_OVERLAY_FS)",
                    "overlayfs is not loaded: sbx create --image fails until it is");
        else if (major < 5 || (major == 5 && minor < 19))
                add(d, WARN, "images", "use Linux 5.19 or newer",
                    "Linux %u.%u: a root sbxd's sandboxes from images need idmapped overlay "
                    "layers (5.19); a rootless sbxd's work",
                    major, minor);
        else
                add(d, OK, "images", NULL, "overlayfs with idmapped layers: sandboxes from images "
                                           "work");
}

/* The daemon's socket; *ret_hello its Hello when it answers, *ret_local whether it runs
 * on this host (not ssh://). */
static void check_socket(struct doctor *d, const struct cli *cli, struct sbx_hello **ret_hello,
                         bool *ret_local) {
        char path[SBX_PATH_MAX_BYTES];
        struct stat st;
        sbx_client *c = NULL;
        enum sbx_code rc;
        const char *p = cli->socket_path;

        *ret_hello = NULL;
        *ret_local = false;
        if (!p) {
                if (sbx_default_socket_path(path, sizeof(path)) < 0) {
                        add(d, FAIL, "socket",
                            "set SBX_SOCKET or pass --socket with a shorter path",
                            "the default socket path is too long");
                        return;
                }
                p = path;
        }
        /* A daemon on another machine (ssh://): only the connection can tell. */
        if (strncmp(p, "ssh://", 6) == 0)
                goto connect;
        *ret_local = true;
        if (stat(p, &st) < 0) {
                if (errno == ENOENT)
                        add(d, WARN, "socket",
                            "start the daemon: `make run` in its source tree, `sbxd` once "
                            "installed, or as a service `systemctl enable --now sbxd.socket`",
                            "no socket at %s: sbxd is not running", p);
                else
                        add(d, FAIL, "socket",
                            "run as the daemon's user or a member of its socket's group "
                            "(`usermod -aG sbxd USER`, then log in again), or pass --socket",
                            "cannot reach %s: %s", p, strerror(errno));
                return;
        }
        if (!S_ISSOCK(st.st_mode)) {
                add(d, FAIL, "socket", "remove it and restart sbxd, or pass --socket",
                    "%s exists but is not a socket", p);
                return;
        }
connect:
        rc = sbx_connect(p, CLI_CLIENT_NAME, &c);
        if (rc == SBX_OK)
                rc = sbx_hello(c, ret_hello);
        if (rc == SBX_OK) {
                add(d, OK, "socket", NULL,
                    "sbxd %s answers at %s (protocol %u, it sees us as uid %u)",
                    (*ret_hello)->daemon_version, p, (*ret_hello)->protocol_version,
                    (*ret_hello)->peer_uid);
        } else if (rc == SBX_UNIMPLEMENTED) {
                add(d, OK, "socket", NULL, "sbxd answers at %s (without Hello)", p);
        } else {
                int err = sbx_errno(c);
                add(d, FAIL, "socket",
                    err == ECONNREFUSED
                            ? "nothing listens: restart sbxd (or remove the stale socket)"
                    : err == EACCES ? "run as the daemon's user or a member of the socket's group "
                                      "(`usermod -aG sbxd USER`), or run your own rootless sbxd"
                                    : "check the daemon's log (journalctl -u sbxd) and restart it",
                    "%s: %s", sbx_code_name(rc), sbx_error_message(c));
        }
        sbx_close(c);
}

static void check_daemon(struct doctor *d, const struct sbx_hello *h) {
        bool weak = !h->seccomp || strcmp(h->cgroup_version, "none") == 0 ||
                    (h->rootless && !h->user_namespaces);

        add(d, weak ? WARN : OK, "daemon",
            weak ? "see the checks above, fix what they name, then restart sbxd" : NULL,
            "sbxd sees: cgroup %s, userns %s, rootless %s, seccomp %s, landlock ABI %u, openat2 %s",
            h->cgroup_version, h->user_namespaces ? "yes" : "no", h->rootless ? "yes" : "no",
            h->seccomp ? "yes" : "no", h->landlock_abi, h->openat2 ? "yes" : "no");
}

/* Whether the reservation file path is held: root's, locked by a process, and naming
 * the daemon that holds it, said in held (len bytes). Returns the level: WARN when it
 * is not held, OK when it is or when only root may look (the file is root's alone). */
static enum level reservation_held(const char *path, char *held, size_t len) {
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        char buf[PATH_MAX + 64], *state;
        long pid = 0;
        struct stat st;
        ssize_t n;
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0 && (errno == EACCES || errno == EPERM)) {
                snprintf(held, len, "; only root may look at the reservation");
                return OK;
        }
        if (fd < 0) {
                snprintf(held, len, "; but %s: %s, and another root sbxd may take the range", path,
                         strerror(errno));
                return WARN;
        }
        if (fstat(fd, &st) < 0 || st.st_uid != 0 || fcntl(fd, F_OFD_GETLK, &l) < 0 ||
            l.l_type == F_UNLCK || (n = pread(fd, buf, sizeof(buf) - 1, 0)) < 0) {
                snprintf(held, len,
                         "; but no process holds %s (or it is not root's): another root sbxd "
                         "may take the range",
                         path);
                close(fd);
                return WARN;
        }
        close(fd);
        buf[n] = 0;
        /* "pid PID\nstate STATE_DIR\n", written by the daemon (daemon/uidrange.c). */
        state = strstr(buf, "\nstate ");
        if (sscanf(buf, "pid %ld", &pid) == 1 && state) {
                state += strlen("\nstate ");
                state[strcspn(state, "\n")] = 0;
                snprintf(held, len, "; held by the sbxd of pid %ld, state directory %s", pid,
                         state);
        }
        return OK;
}

/* A root daemon's sandbox uids: the range, where it is reserved, and whether it is the
 * one its state directory recorded before (origin); checked on this host when it is
 * local (reservation_held). */
static void check_uids(struct doctor *d, const struct sbx_hello *h, bool local) {
        static const struct {
                const char *origin, *says;
        } origins[] = {
                {"recorded", "the state directory's own record, from an earlier start"},
                {"picked", "the first free range, picked at this start and recorded in the "
                           "state directory"},
                {"flag", "set by --uid-base at this start and recorded in the state directory"},
        };
        const char *says = h->uid_origin ? h->uid_origin : "";
        char held[PATH_MAX + 128] = "";
        enum level level = OK;

        if (h->rootless) {
                add(d, OK, "uids", NULL,
                    "sandbox uids: the daemon user's own (rootless: no range is reserved)");
                return;
        }
        if (!h->sandbox_uid_count) {
                add(d, WARN, "uids", "upgrade sbxd",
                    "the daemon does not say which sandbox uids it uses (a sbxd from before uid "
                    "ranges: a second root sbxd on this host may give them to other owners)");
                return;
        }
        for (size_t i = 0; i < sizeof(origins) / sizeof(origins[0]); i++)
                if (strcmp(says, origins[i].origin) == 0)
                        says = origins[i].says;
        if (local)
                level = reservation_held(h->uid_reservation, held, sizeof(held));
        add(d, level, "uids", level == OK ? NULL : "restart sbxd: it reserves its range again",
            "sandbox uids: %u-%u, reserved in %s (%s)%s", h->sandbox_uid_first,
            h->sandbox_uid_first + (h->sandbox_uid_count - 1), h->uid_reservation, says, held);
}

/* The name of each check level, keyed by enum level. */
static const char *const level_names[] = {[OK] = "ok", [WARN] = "warn", [FAIL] = "fail"};

/* doctor --json: an array of {status, name, detail, fix}. */
static void print_checks_json(const struct doctor *d) {
        struct json j;

        json_init(&j, stdout);
        json_begin_array(&j);
        for (size_t i = 0; i < d->n; i++) {
                json_begin_object(&j);
                json_key(&j, "status");
                json_string(&j, level_names[d->v[i].level]);
                json_key(&j, "name");
                json_string(&j, d->v[i].name);
                json_key(&j, "detail");
                json_string(&j, d->v[i].detail);
                json_key(&j, "fix");
                json_string(&j, d->v[i].fix[0] ? d->v[i].fix : NULL);
                json_end_object(&j);
        }
        json_end_array(&j);
        json_finish(&j);
}

/* One line per check: "level  name  detail; fix: what to do". */
static void print_checks(const struct doctor *d) {
        for (size_t i = 0; i < d->n; i++) {
                const struct check *c = &d->v[i];
                printf("%-4s  %-15s  %s", level_names[c->level], c->name, c->detail);
                if (c->fix[0])
                        printf("; fix: %s", c->fix);
                putchar('\n');
        }
}

int cmd_doctor(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {{"json", false, 0}, {NULL, false, 0}};
        /* Static, not heap: the userns probe forks, and its child must own nothing. */
        static struct doctor doc;
        struct doctor *d = &doc;
        struct sbx_hello *h = NULL;
        struct cli_opts p;
        bool json = false, root = geteuid() == 0, local = false;
        int k;

        cli_opts_init(&p, cli, argc, argv, opts);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR || k == CLI_OPT_POS)
                        return k == CLI_OPT_ERR
                                       ? CLI_EXIT_ERROR
                                       : cli_usage_error("unexpected argument '%s' for sbx doctor",
                                                         p.arg);
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "doctor");
                        return 0;
                }
                json = true;
        }
        check_user(d, root);
        check_userns(d, root);
        check_cgroup(d, root);
        check_seccomp(d);
        check_landlock(d);
        check_openat2(d);
        check_images(d);
        check_helper(d);
        check_socket(d, cli, &h, &local);
        if (h) {
                check_daemon(d, h);
                check_uids(d, h, local);
        }
        sbx_hello_free(h);
        if (json)
                print_checks_json(d);
        else
                print_checks(d);
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].level == FAIL)
                        return 1;
        return 0;
}

int cmd_version(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt none[] = {{NULL, false, 0}};
        struct cli_opts p;
        struct sbx_hello *h = NULL;
        sbx_client *c = NULL;
        int k;

        cli_opts_init(&p, cli, argc, argv, none);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, "version");
                        return 0;
                }
                return k == CLI_OPT_ERR
                               ? CLI_EXIT_ERROR
                               : cli_usage_error("unexpected argument '%s' for sbx version", p.arg);
        }
        printf("sbx %s\n", SBX_VERSION);
        if (sbx_connect(cli->socket_path, CLI_CLIENT_NAME, &c) == SBX_OK &&
            sbx_hello(c, &h) == SBX_OK)
                printf("sbxd %s (protocol %u, cgroup %s, userns %s, seccomp %s, landlock ABI %u, "
                       "openat2 %s)\n",
                       h->daemon_version, h->protocol_version, h->cgroup_version,
                       h->user_namespaces ? "yes" : "no", h->seccomp ? "yes" : "no",
                       h->landlock_abi, h->openat2 ? "yes" : "no");
        sbx_hello_free(h);
        sbx_close(c);
        return 0;
}
