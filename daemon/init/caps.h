/* caps.h: dropping every capability of a command child before execve.
 *
 * Called only by spawn.c: caps_drop_bounding and caps_lock_securebits once in PID 1
 * while it has CAP_SETPCAP (spawn_prepare_parent; every command inherits both), then,
 * in each command child after setresuid, caps_clear (a uid change away from 0 already empties the
 * permitted set; a rootless command stays uid 0 of its user namespace and needs it). Each returns 0
 * or -errno and is async-signal-safe. */
#ifndef SBX_INIT_CAPS_H
#define SBX_INIT_CAPS_H

#include <stdint.h>

/* The capabilities (bit n: capability n) that commands running as uid 0 keep: none,
 * unless PID 1 of a sandbox made from an image calls this before the others, where
 * root is root of the sandbox's own user namespace and installs software (docs/images.md:
 * SBX_IMAGE_CAPS). The bounding set keeps them, uid 0 regains them at execve, and
 * caps_clear leaves them (of what the command has: none after a uid change from 0). */
void caps_keep(uint64_t mask);

/* Empties the capability bounding set (PR_CAPBSET_DROP of every capability), so that
 * no later execve, even of a set-capability file or as uid 0, can gain one. */
int caps_drop_bounding(void);

/* Sets and locks SECBIT_NOROOT (uid 0 gains nothing at execve: a rootless command is
 * uid 0 of its user namespace), SECBIT_NO_CAP_AMBIENT_RAISE and the locks of
 * SECBIT_KEEP_CAPS and SECBIT_NO_SETUID_FIXUP (so a uid change keeps clearing caps). */
int caps_lock_securebits(void);

/* Clears the ambient set, then the effective, permitted and inheritable sets with
 * capset(2). */
int caps_clear(void);

#endif
