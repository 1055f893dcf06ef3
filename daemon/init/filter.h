/* filter.h: the default seccomp filter of sandboxed commands (docs/sandboxes.md, "What a
 * sandbox is").
 *
 * PID 1 builds the BPF program with libseccomp (filter_build) and loads it on itself
 * once (filter_load, after PR_SET_NO_NEW_PRIVS), when its view is built and before it
 * serves the daemon (main.c, step 6); every command inherits it across clone and
 * execve and loads nothing itself. Named filter_* rather than seccomp_* so as not to
 * collide with libseccomp's own names. */
#ifndef SBX_INIT_FILTER_H
#define SBX_INIT_FILTER_H

#include <linux/filter.h>
#include <stdbool.h>

/* Builds the default filter for the native architecture into *ret_prog (a malloc'd
 * instruction array the caller releases with filter_free). Non-native architectures
 * are killed (SECCOMP_RET_KILL_PROCESS). Returns 0 or -errno; touches no file. */
int filter_build(struct sock_fprog *ret_prog, bool setid_modes);

/* Releases what filter_build allocated; accepts a zeroed or already freed program. */
void filter_free(struct sock_fprog *prog);

/* Installs prog on the calling thread with seccomp(2) (prctl on kernels before 3.17);
 * its children inherit it. The caller must have set PR_SET_NO_NEW_PRIVS or hold
 * CAP_SYS_ADMIN. Async-signal-safe (the tests load it in a forked child). Returns 0 or
 * -errno. */
int filter_load(const struct sock_fprog *prog);

/* Returns 0 when this kernel can load seccomp filters, else -errno (-EINVAL when it
 * was built without CONFIG_SECCOMP_FILTER). */
int filter_supported(void);

#endif
