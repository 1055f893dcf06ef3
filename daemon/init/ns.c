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
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define USERNS_HINT                                                                                \
        "rootless sandboxes need CONFIG_USER_NS and unprivileged user namespaces: "                \
        "sysctl kernel.unprivileged_userns_clone=1 (Debian), user.max_user_namespaces > 0, "       \
        "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu)"

/* newgidmap(1) of the shadow suite (Debian's uidmap), a setuid helper that writes a
 * gid map of subordinate gids (/etc/subgid) for its caller's user and, unlike a map
 * the user writes itself, leaves setgroups(2) allowed in the namespace. */
static const char *const newgidmap_paths[] = {"/usr/bin/newgidmap", "/bin/newgidmap"};

static const char *find_newgidmap(void) {
        size_t i;
        struct stat st;

        for (i = 0; i < sizeof(newgidmap_paths) / sizeof(newgidmap_paths[0]); i++)
                if (stat(newgidmap_paths[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
                    (st.st_mode & S_ISUID))
                        return newgidmap_paths[i];
        return NULL;
}

/* Forks the helper that will run `newgidmap PARENT 0 outer_gid 1 1 subgid 1` once the
 * caller has entered its user namespace and writes a byte on *ret_go. The helper's pid,
 * or -errno. */
static pid_t fork_gid_mapper(const char *helper, gid_t outer_gid, gid_t subgid, int *ret_go) {
        char parent[16], outer[16], sub[16], byte;
        pid_t me = getpid(), pid;
        int go[2];

        if (pipe2(go, O_CLOEXEC) < 0)
                return -errno;
        snprintf(parent, sizeof(parent), "%d", (int)me);
        snprintf(outer, sizeof(outer), "%u", (unsigned)outer_gid);
        snprintf(sub, sizeof(sub), "%u", (unsigned)subgid);
        pid = fork();
        if (pid < 0) {
                int e = errno;
                close(go[0]);
                close(go[1]);
                return -e;
        }
        if (pid == 0) {
                close(go[1]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != me || read(go[0], &byte, 1) != 1)
                        _exit(127);
                execl(helper, "newgidmap", parent, "0", outer, "1", "1", sub, "1", (char *)NULL);
                _exit(127);
        }
        close(go[0]);
        *ret_go = go[1];
        return pid;
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

int ns_enter_user(uid_t outer_uid, gid_t outer_gid, gid_t subgid, bool *groups_kept,
                  struct util_err *err) {
        const char *helper = subgid ? find_newgidmap() : NULL;
        int go = -1, status = 0, r;
        char map[64];
        pid_t mapper = -1;

        *groups_kept = has_other_groups(outer_gid);
        /* The helper must stay in our present user namespace: it is forked first. */
        if (*groups_kept && helper)
                mapper = fork_gid_mapper(helper, outer_gid, subgid, &go);
        if (unshare(CLONE_NEWUSER) < 0) {
                r = util_fail(err, errno, USERNS_HINT, "unshare(CLONE_NEWUSER)");
                goto out;
        }
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)outer_uid);
        r = util_write_file("/proc/self/uid_map", map);
        if (r < 0) {
                util_fail(err, r, "outer_uid must be the uid sbx-init runs as",
                          "write /proc/self/uid_map \"0 %u 1\"", (unsigned)outer_uid);
                goto out;
        }
        if (mapper > 0) {
                int mapped = write(go, "g", 1) == 1;
                close(go);
                go = -1;
                while (waitpid(mapper, &status, 0) < 0 && errno == EINTR)
                        ;
                mapper = -1;
                /* Mapped: setgroups(2) is allowed here, and the groups go for good. Not
                 * mapped (no range of this user's in /etc/subgid, a helper that could not
                 * run): the map is written below, as without a helper. */
                if (mapped && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                        if (syscall(SYS_setgroups, (size_t)0, NULL) == 0)
                                *groups_kept = false;
                        return 0;
                }
        }
        /* Since Linux 3.19 an unprivileged process must deny setgroups(2) before it may
         * write gid_map (CVE-2014-8989; user_namespaces(7), "The /proc/[pid]/setgroups
         * file"). Kernels before 3.19 lack the file; nothing to deny there. */
        r = util_write_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) {
                util_fail(err, r, NULL, "write /proc/self/setgroups");
                goto out;
        }
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)outer_gid);
        r = util_write_file("/proc/self/gid_map", map);
        if (r < 0) {
                util_fail(err, r, "outer_gid must be the gid sbx-init runs as",
                          "write /proc/self/gid_map \"0 %u 1\"", (unsigned)outer_gid);
                goto out;
        }
        return 0;
out:
        if (go >= 0)
                close(go);
        if (mapper > 0) {
                kill(mapper, SIGKILL);
                waitpid(mapper, NULL, 0);
        }
        return r;
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
