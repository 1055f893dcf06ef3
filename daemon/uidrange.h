/* uidrange.h: the host-wide reservation of a root daemon's sandbox uids, so that no
 * two root sbxd on a host (a second instance, a test suite) ever give one uid to
 * different owners.
 *
 * A range is SBX_UID_COUNT uids from a base. It is reserved by a file named after its
 * base in a directory only root may enter (UIDRANGE_DIR), which holds the daemon's pid
 * and its state directory and is held with an open file description lock (fcntl
 * F_OFD_SETLK) while the daemon lives: the kernel lets go of it when the daemon dies,
 * however it dies. The daemon's state directory records the base too (STATE/uid-range),
 * so that the daemon takes the same range at every start: its records bind the range's
 * uids to owners for good (uidslot.h).
 *
 * Each reservation file is, for a daemon starting:
 * - live: locked, a daemon runs on that range;
 * - dormant: unlocked, and the state directory it names still records that base in a
 *   root-owned file: a daemon that stopped or crashed, whose uids stay its owners'
 *   (its sandboxes may even still run, waiting to be adopted);
 * - stale: anything else (its state directory is gone or moved to another range): it
 *   is removed, and its range is free again.
 * Every decision is taken holding a lock on the directory (flock), so that daemons that
 * start at once never take one range or overlapping ones.
 *
 * Called by main() at start-up and shutdown, and by admit.c for each connection (to
 * refuse every sbxd's sandbox uids, not only this daemon's). Nothing here logs. */
#ifndef SBX_UIDRANGE_H
#define SBX_UIDRANGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where root daemons reserve their ranges: on disk, so that a dormant range (a state
 * directory whose records bind its uids) stays reserved across reboots. */
#define UIDRANGE_DIR "/var/lib/sbxd-uids"
/* The record of the range in a state directory. */
#define UIDRANGE_RECORD "uid-range"

enum uidrange_origin {
        UIDRANGE_PICKED,   /* the first free range, picked at this start */
        UIDRANGE_RECORDED, /* the state directory's: recorded before, or bound by its records */
        UIDRANGE_FLAG,     /* --uid-base's, not recorded before */
};

/* A range this daemon holds. */
struct uidrange {
        uint32_t base; /* its uids are base .. base + SBX_UID_COUNT - 1 */
        enum uidrange_origin origin;
        int fd;       /* the reservation file, locked; -1 once given up */
        char *dir;    /* the reservation directory */
        char *path;   /* the reservation file, dir/BASE */
        char *record; /* STATE/uid-range */
};

/* What a daemon asks for. */
struct uidrange_want {
        const char *dir;       /* UIDRANGE_DIR (the unit tests use their own) */
        const char *state_dir; /* the daemon's, canonical (realpath) */
        uint32_t flag_base;    /* --uid-base; 0: none */
        uint32_t bound_lo;     /* the lowest and highest uid its records bind to an */
        uint32_t bound_hi;     /* owner (uidslot_bound_span); both 0: none */
        /* The state directory root daemons default to (/var/lib/sbxd); NULL: none. Its
         * range is reserved for it even without a reservation file: the one it records,
         * or, for records from before ranges (sbxd.db without a record), which may bind
         * uids of the first range, the first. */
        const char *legacy_state_dir;
};

/* Reserves a range for the daemon of w->state_dir, which holds that directory's lock,
 * and records it there. The range is the one the records bind uids of (a state
 * directory from before ranges existed has bound the first one), else --uid-base's,
 * else the one the state directory recorded, else the first of SBX_UID_RANGES from
 * SBX_UID_BASE that no live or dormant reservation overlaps (w->legacy_state_dir's
 * range counts as one). Returns 0 with *ret (freed
 * by uidrange_release), or -errno with a one-line reason in err: -EADDRINUSE the range
 * wanted overlaps a live or dormant one (the message names its pid or state
 * directory), -EAGAIN no range is free, -EINVAL the records bind uids outside the
 * range wanted, -EPERM the directory is not root's, -ETIMEDOUT its lock was held too
 * long, or another -errno from the filesystem. */
int uidrange_reserve(const struct uidrange_want *w, struct uidrange **ret, char *err,
                     size_t errlen);

/* At shutdown (or when start-up fails): gives the range up. With forget (the records
 * bind no uid of it) the reservation file and the state directory's record are
 * removed, and the next start picks a range afresh; without, both stay and the range
 * stays this state directory's (dormant). Accepts NULL; returns NULL. */
struct uidrange *uidrange_release(struct uidrange *r, int forget);

/* The first uid of own, or SBX_UID_BASE when own is NULL (a daemon core built without
 * main(), in the unit tests). */
uint32_t uidrange_base(const struct uidrange *own);

/* 1 when uid may run a sandbox's commands under some root sbxd of this host: in own's
 * range, in the SBX_UID_RANGES ranges daemons pick from or their image sandboxes' blocks, or in a range reserved in
 * own's directory (UIDRANGE_DIR when own is NULL), live, dormant or stale. 0
 * otherwise (never for a uid below SBX_UID_BASE_MIN). Reads the directory. */
int uidrange_is_sandbox_uid(const struct uidrange *own, uint32_t uid);

/* "picked", "recorded" or "flag". */
const char *uidrange_origin_name(enum uidrange_origin o);

#endif
