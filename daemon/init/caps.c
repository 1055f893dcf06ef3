/* caps.c: capability dropping for command children (bounding, securebits, capset).
 *
 * Raw prctl(2)/capset(2), no libcap: the child runs between clone and execve in PID
 * 1's memory and calls nothing that allocates. Owns nothing. Called by spawn.c; see caps.h for the
 * order. Compare bubblewrap's drop_privs() and nsjail's caps.c. */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* caps_keep's set: 0 (every capability dropped) unless PID 1 of an image sandbox. */
static uint64_t kept;

void caps_keep(uint64_t mask) {
        kept = mask;
}

int caps_drop_bounding(void) {
        unsigned long cap;

        /* Capabilities are numbered densely from 0 to /proc/sys/kernel/cap_last_cap;
         * PR_CAPBSET_DROP answers EINVAL past the last one. */
        for (cap = 0; cap < 64; cap++) {
                if (kept & (1ull << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
                        continue;
                if (errno == EINVAL && cap > 0)
                        break;
                return -errno;
        }
        return 0;
}

int caps_lock_securebits(void) {
        unsigned long bits = SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                             SECBIT_NO_SETUID_FIXUP_LOCKED;

        /* With capabilities kept, uid 0 gets them back at execve (from the bounding
         * set, capped by no_new_privs at what it had): NOROOT stays off, locked. */
        if (!kept)
                bits |= SECBIT_NOROOT;

#ifdef SECBIT_NO_CAP_AMBIENT_RAISE
        bits |= SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
#endif
        if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

int caps_clear(void) {
        struct __user_cap_header_struct hdr;
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

        /* Ambient capabilities exist since Linux 4.3; EINVAL before that, when there is
         * nothing to clear. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        memset(&hdr, 0, sizeof(hdr));
        memset(data, 0, sizeof(data));
        hdr.version = _LINUX_CAPABILITY_VERSION_3;
        hdr.pid = 0;
        if (kept) {
                /* What is kept of what we have: a uid change away from 0 emptied it. */
                if (syscall(SYS_capget, &hdr, data) < 0)
                        return -errno;
                data[0].permitted &= (uint32_t)kept;
                data[1].permitted &= (uint32_t)(kept >> 32);
                data[0].effective = data[0].permitted;
                data[1].effective = data[1].permitted;
                data[0].inheritable = data[1].inheritable = 0;
        }
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        return 0;
}
