/* ns.c: creating the sandbox's namespaces, its user mapping, hostname and loopback.
 *
 * Owns nothing past each call. Stage 0 (daemon/init/main.c) creates the namespaces;
 * PID 1 names the host and brings up loopback. Modelled on nsjail's user.c / net.c and
 * bubblewrap's setup of the uid map. */
#include "ns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx_limits.h"

#define USERNS_HINT                                                                                \
        "rootless sandboxes need CONFIG_USER_NS and unprivileged user namespaces: "                \
        "sysctl kernel.unprivileged_userns_clone=1 (Debian), user.max_user_namespaces > 0, "       \
        "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu)"

/* newuidmap(1) and newgidmap(1) of the shadow suite (Debian's uidmap), setuid helpers
 * that write a map of subordinate ids (/etc/subuid, /etc/subgid) for their caller's
 * user and, unlike a map the user writes itself, leave setgroups(2) allowed in the
 * namespace. */
static const char *find_helper(const char *name, char *buf, size_t len) {
        static const char *const dirs[] = {"/usr/bin", "/bin"};
        struct stat st;
        size_t i;

        for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(buf, len, "%s/%s", dirs[i], name);
                if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
                    (st.st_mode & S_ISUID))
                        return buf;
        }
        return NULL;
}

/* A helper that will run `HELPER PARENT 0 outer 1 1 sub count` once the caller has
 * entered its user namespace and writes a byte on *ret_go. It stays in our present user
 * namespace: it is forked before the caller unshares. The helper's pid, or -errno. */
static pid_t fork_mapper(const char *helper, unsigned outer, unsigned sub, unsigned count,
                         int *ret_go) {
        char parent[16], o[16], s[16], n[16], byte;
        pid_t me = getpid(), pid;
        int go[2];

        if (pipe2(go, O_CLOEXEC) < 0)
                return -errno;
        snprintf(parent, sizeof(parent), "%d", (int)me);
        snprintf(o, sizeof(o), "%u", outer);
        snprintf(s, sizeof(s), "%u", sub);
        snprintf(n, sizeof(n), "%u", count);
        pid = fork();
        if (pid < 0) {
                int e = errno;
                close(go[0]);
                close(go[1]);
                return -e;
        }
        if (pid == 0) {
                const char *name = strrchr(helper, '/') + 1;
                close(go[1]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != me || read(go[0], &byte, 1) != 1)
                        _exit(127);
                execl(helper, name, parent, "0", o, "1", "1", s, n, (char *)NULL);
                _exit(127);
        }
        close(go[0]);
        *ret_go = go[1];
        return pid;
}

/* Lets the mapper pid (fork_mapper) go and waits for it: 1 when it mapped. */
static int mapper_done(pid_t pid, int go) {
        int sent = write(go, "m", 1) == 1, status = 0;

        close(go);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return sent && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void mapper_kill(pid_t pid, int go) {
        if (pid <= 0)
                return;
        close(go);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

/* 1 when the caller has supplementary groups other than gid. */
static int has_other_groups(gid_t gid) {
        gid_t groups[64];
        int n = getgroups(64, groups), i;

        if (n < 0)
                return 1; /* more than 64 */
        for (i = 0; i < n; i++)
                if (groups[i] != gid)
                        return 1;
        return 0;
}

/* Writes map "0 outer 1" (uid_map or gid_map) ourselves. */
static int write_own_map(const char *which, unsigned outer, const char *hint,
                         struct util_err *err) {
        char path[32], map[64];
        int r;

        snprintf(path, sizeof(path), "/proc/self/%s", which);
        snprintf(map, sizeof(map), "0 %u 1\n", outer);
        r = util_write_file(path, map);
        return r < 0 ? util_fail(err, r, hint, "write %s \"0 %u 1\"", path, outer) : 0;
}

/* An image's sandbox: ids 1 .. n_ids are subuid and subgid on: both helpers must map
 * them (the daemon saw them installed), else the setup fails. */
static int enter_ranged(const struct ns_ids *ids, struct util_err *err) {
        char ubuf[64], gbuf[64];
        const char *uh = find_helper("newuidmap", ubuf, sizeof(ubuf));
        const char *gh = find_helper("newgidmap", gbuf, sizeof(gbuf));
        int ugo = -1, ggo = -1, ok;
        pid_t um = uh ? fork_mapper(uh, ids->outer_uid, ids->subuid, ids->n_ids, &ugo) : -ENOENT;
        pid_t gm = gh ? fork_mapper(gh, ids->outer_gid, ids->subgid, ids->n_ids, &ggo) : -ENOENT;

        if (um < 0 || gm < 0) {
                mapper_kill(um, ugo);
                mapper_kill(gm, ggo);
                return util_fail(err, um < 0 ? -um : -gm, "install uidmap (newuidmap, newgidmap)",
                                 "start newuidmap and newgidmap");
        }
        if (unshare(CLONE_NEWUSER) < 0) {
                mapper_kill(um, ugo);
                mapper_kill(gm, ggo);
                return util_fail(err, errno, USERNS_HINT, "unshare(CLONE_NEWUSER)");
        }
        ok = mapper_done(um, ugo);
        ok = mapper_done(gm, ggo) && ok;
        if (!ok)
                return util_fail(err, EPERM, "/etc/subuid and /etc/subgid must give the user them",
                                 "map ids 1-%u to the user's subordinate ids %u and %u",
                                 ids->n_ids, ids->subuid, ids->subgid);
        if (syscall(SYS_setgroups, (size_t)0, NULL) < 0)
                return util_fail(err, errno, NULL, "drop the supplementary groups");
        return 0;
}

int ns_enter_user(const struct ns_ids *ids, bool *groups_kept, struct util_err *err) {
        char gbuf[64];
        const char *helper = ids->subgid ? find_helper("newgidmap", gbuf, sizeof(gbuf)) : NULL;
        int go = -1, r;
        pid_t mapper = -1;

        *groups_kept = has_other_groups(ids->outer_gid);
        if (ids->n_ids) {
                r = enter_ranged(ids, err);
                if (r == 0)
                        *groups_kept = false;
                return r;
        }
        if (*groups_kept && helper)
                mapper = fork_mapper(helper, ids->outer_gid, ids->subgid, 1, &go);
        if (unshare(CLONE_NEWUSER) < 0) {
                mapper_kill(mapper, go);
                return util_fail(err, errno, USERNS_HINT, "unshare(CLONE_NEWUSER)");
        }
        r = write_own_map("uid_map", ids->outer_uid, "outer_uid must be the uid sbx-init runs as",
                          err);
        if (r < 0) {
                mapper_kill(mapper, go);
                return r;
        }
        /* Mapped: setgroups(2) is allowed here, and the groups go for good. Not mapped
         * (no range of this user's in /etc/subgid, a helper that could not run): the map
         * is written below, as without a helper. */
        if (mapper > 0 && mapper_done(mapper, go)) {
                if (syscall(SYS_setgroups, (size_t)0, NULL) == 0)
                        *groups_kept = false;
                return 0;
        }
        /* Since Linux 3.19 an unprivileged process must deny setgroups(2) before it may
         * write gid_map (CVE-2014-8989; user_namespaces(7), "The /proc/[pid]/setgroups
         * file"). Kernels before 3.19 lack the file; nothing to deny there. */
        r = util_write_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT)
                return util_fail(err, r, NULL, "write /proc/self/setgroups");
        return write_own_map("gid_map", ids->outer_gid,
                             "outer_gid must be the gid sbx-init runs as", err);
}

/* The number in the sysctl file path, or 0 when it cannot be read. */
static unsigned long long read_sysctl(const char *path) {
        char buf[32];
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        return strtoull(buf, NULL, 10);
}

/* Writes n into the sysctl file path. 0, or -errno. */
static int write_sysctl(const char *path, unsigned long long n) {
        char buf[32];

        snprintf(buf, sizeof(buf), "%llu", n);
        return util_write_file(path, buf);
}

int ns_bound_inotify(struct util_warnings *warn, struct util_err *err) {
        unsigned long long watches = read_sysctl("/proc/sys/fs/inotify/max_user_watches"),
                           instances = read_sysctl("/proc/sys/fs/inotify/max_user_instances");
        int r;

        watches = (watches ? watches : 8192) / SBX_SANDBOX_INOTIFY_SHARE;
        instances = (instances ? instances : 128) / SBX_SANDBOX_INOTIFY_SHARE;
        if (instances < SBX_SANDBOX_INOTIFY_MIN_INSTANCES)
                instances = SBX_SANDBOX_INOTIFY_MIN_INSTANCES;
        r = write_sysctl("/proc/sys/user/max_inotify_watches", watches);
        if (r == 0)
                r = write_sysctl("/proc/sys/user/max_inotify_instances", instances);
        if (r == -ENOENT) /* a kernel without per-namespace inotify counts (before 4.9) */
                return 0;
        if (r == -EROFS || r == -EACCES || r == -EPERM) {
                /* /proc/sys read-only (sbxd in a container): the sandbox is made all the
                 * same, and says so. */
                util_warn(warn,
                          "its inotify watches are not bounded (/proc/sys/user is read-only "
                          "here: %s): its processes may take all of the daemon user's, which "
                          "the paths it hides need to stay covered",
                          strerror(-r));
                return 0;
        }
        return r < 0 ? util_fail(err, -r, NULL,
                                 "bound the sandbox's inotify watches (/proc/sys/user)")
                     : 0;
}

int ns_unshare_sandbox(bool network_none, struct util_err *err) {
        int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

        if (network_none)
                flags |= CLONE_NEWNET;
        if (unshare(flags) < 0) {
                const char *hint = NULL;
                if (errno == EPERM)
                        hint = "needs root (CAP_SYS_ADMIN) or a rootless sandbox";
                else if (errno == EINVAL)
                        hint = "needs CONFIG_PID_NS, CONFIG_IPC_NS, CONFIG_UTS_NS, "
                               "CONFIG_CGROUPS (Linux >= 4.6) and CONFIG_NET_NS";
                else if (errno == ENOSPC)
                        hint = "too many namespaces: raise user.max_*_namespaces";
                return util_fail(err, errno, hint, "unshare(mount, pid, ipc, uts, cgroup%s)",
                                 network_none ? ", net" : "");
        }
        return 0;
}

int ns_set_hostname(const char *name, struct util_err *err) {
        if (!name || !name[0])
                name = "sandbox";
        if (sethostname(name, strlen(name)) < 0)
                return util_fail(err, errno, NULL, "sethostname \"%s\"", name);
        return 0;
}

int ns_loopback_up(struct util_err *err) {
        struct ifreq ifr;
        int fd, r = 0;

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return util_fail(err, errno, NULL, "socket for loopback setup");
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
                r = util_fail(err, errno, NULL, "SIOCGIFFLAGS lo");
                goto out;
        }
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                r = util_fail(err, errno, NULL, "SIOCSIFFLAGS lo up");
out:
        close(fd);
        return r;
}

int ns_proxy_listen(unsigned port, struct util_err *err) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd, one = 1;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return util_fail(err, errno, NULL, "socket for the egress proxy");
        /* SO_REUSEADDR: nothing else of this fresh namespace has used the port, but a
         * restarted setup must not trip over TIME_WAIT. The backlog holds what arrives
         * while a daemon restarts (live re-adoption). */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
                int e = errno;
                close(fd);
                return util_fail(err, e, NULL, "listen on 127.0.0.1:%u for the egress proxy", port);
        }
        return fd;
}
