/* hostfeat.c: the probes behind struct features; see hostfeat.h.
 *
 * Each probe asks the kernel the cheapest question that answers it: the user namespace
 * and inotify limits in /proc, seccomp's list of actions, Landlock's ABI version
 * (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION), and whether openat2
 * resolves "/" with RESOLVE_IN_ROOT; the bounds of limits that sbxd's own rlimits set
 * (bounds.h). Called by main() once, before the loop serves. */
#include "hostfeat.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/openat2.h>

#include "sbx_limits.h"

/* The number in the sysctl file path; 0 when it cannot be read. */
static uint64_t read_sysctl(const char *path) {
        FILE *fp = fopen(path, "re");
        unsigned long long v = 0;

        if (fp) {
                if (fscanf(fp, "%llu", &v) != 1)
                        v = 0;
                fclose(fp);
        }
        return v;
}

/* 1 when openat2 (Linux 5.6) resolves paths for the daemon. */
static int openat2_works(void) {
        struct open_how how;
        int fd;

        memset(&how, 0, sizeof(how));
        how.flags = O_PATH | O_CLOEXEC;
        how.resolve = RESOLVE_IN_ROOT;
        fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd < 0)
                return 0;
        close(fd);
        return 1;
}

uint32_t hostfeat_subids(const char *path, uid_t uid, const char *name, uint32_t *ret_count) {
        FILE *f = fopen(path, "re");
        char line[512], who[256];
        uint32_t found = 0, n = 0;

        while (f && !found && fgets(line, sizeof(line), f)) {
                unsigned long start, count;
                char *end;
                if (sscanf(line, "%255[^:\n]:%lu:%lu", who, &start, &count) != 3 || count == 0 ||
                    start == 0 || start > UINT32_MAX - 1)
                        continue;
                if ((name && strcmp(who, name) == 0) ||
                    (strtoul(who, &end, 10) == (unsigned long)uid && *end == '\0' && end != who)) {
                        found = (uint32_t)start;
                        n = count > UINT32_MAX - start ? UINT32_MAX - (uint32_t)start
                                                       : (uint32_t)count;
                }
        }
        if (f)
                fclose(f);
        if (ret_count)
                *ret_count = n;
        return found;
}

uint32_t hostfeat_image_subids(const struct features *f) {
        uint32_t n = f->subuid_count < f->subgid_count ? f->subuid_count : f->subgid_count;

        if (!f->rootless || !f->idmap_helpers || !f->subuid_start || !f->subgid)
                return 0;
        return n < SBX_IMAGE_IDS - 1 ? n : SBX_IMAGE_IDS - 1;
}

/* 1 when the setuid helper name of Debian's uidmap is installed (as root's). */
static int idmap_helper(const char *name) {
        static const char *const dirs[] = {"/usr/bin", "/bin"};
        char path[64];
        struct stat st;

        for (size_t i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
                    (st.st_mode & S_ISUID))
                        return 1;
        }
        return 0;
}

void hostfeat_detect(uid_t euid, const char *cgroup_version, struct features *ret) {
        struct passwd *pw;
        long v;

        ret->rootless = euid != 0;
        ret->user_namespaces = read_sysctl("/proc/sys/user/max_user_namespaces") > 0;
        ret->inotify_watches = read_sysctl("/proc/sys/fs/inotify/max_user_watches");
        ret->seccomp = access("/proc/sys/kernel/seccomp/actions_avail", R_OK) == 0;
        v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        ret->landlock_abi = v > 0 ? (uint32_t)v : 0;
        ret->openat2 = openat2_works();
        snprintf(ret->cgroup_version, sizeof(ret->cgroup_version), "%s", cgroup_version);
        /* A rootless sandbox drops the user's groups through newgidmap with one of these
         * (init.proto Setup.outer_subgid). */
        pw = ret->rootless ? getpwuid(euid) : NULL;
        if (ret->rootless) {
                ret->subgid = hostfeat_subids("/etc/subgid", euid, pw ? pw->pw_name : NULL,
                                              &ret->subgid_count);
                ret->subuid_start = hostfeat_subids("/etc/subuid", euid, pw ? pw->pw_name : NULL,
                                                    &ret->subuid_count);
                ret->idmap_helpers = idmap_helper("newuidmap") && idmap_helper("newgidmap");
        }
        bounds_host_probe(&ret->limits);
}
