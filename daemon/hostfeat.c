/* hostfeat.c: the probes behind struct features; see hostfeat.h.
 *
 * Each probe asks the kernel the cheapest question that answers it: the user namespace
 * limit in /proc, seccomp's list of actions, Landlock's ABI version
 * (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION), and whether openat2
 * resolves "/" with RESOLVE_IN_ROOT. Called by main() once, before the loop serves. */
#include "hostfeat.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/openat2.h>

/* 1 when unprivileged processes may create user namespaces at all. */
static int user_namespaces_allowed(void) {
        FILE *fp = fopen("/proc/sys/user/max_user_namespaces", "re");
        long v = 0;

        if (fp) {
                if (fscanf(fp, "%ld", &v) != 1)
                        v = 0;
                fclose(fp);
        }
        return v > 0;
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

void hostfeat_detect(uid_t euid, const char *cgroup_version, struct features *ret) {
        long v;

        ret->rootless = euid != 0;
        ret->user_namespaces = user_namespaces_allowed();
        ret->seccomp = access("/proc/sys/kernel/seccomp/actions_avail", R_OK) == 0;
        v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        ret->landlock_abi = v > 0 ? (uint32_t)v : 0;
        ret->openat2 = openat2_works();
        snprintf(ret->cgroup_version, sizeof(ret->cgroup_version), "%s", cgroup_version);
}
