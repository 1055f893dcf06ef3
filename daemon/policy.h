/* policy.h: from a CreateSandbox request to the effective policy, and from the
 * effective policy to the init helper's Setup (the sandbox's view).
 *
 * policy_effective() validates a request for a caller: defaults filled in, the
 * lifetime capped, every bound checked, and every host path the request names opened
 * with the caller's rights (hostpath.h), canonicalised, and kept by identity for init
 * (struct policy_objects). policy_setup() expands the view: what is hidden (the
 * daemon's own directories always; the policy's denied paths; with protect_defaults
 * the credentials of protect.h under every home, from the shared expansion of
 * credcache.h) and what is kept read-only (with the placeholders of placeholder.h), all
 * as paths inside the sandbox's view (translated below root_dir for a sandbox with
 * one). Called by the sandbox layer on the event loop; owns what it returns, and no
 * state between calls. */
#ifndef SBX_POLICY_H
#define SBX_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hostpath.h"
#include "init.pb-c.h"
#include "pathset.h"
#include "placeholder.h"
#include "sbx.pb-c.h"

struct sbxd;
struct sandbox;
struct caller;
struct cgroup;

/* The host objects a request names, as opened for its caller (hostpath.h). */
struct policy_objects {
        struct hostpath root;      /* root.path NULL: the host's / */
        struct hostpath *writable; /* one per effective writable path */
        size_t n_writable;
};
void policy_objects_clear(struct policy_objects *o);

/* Validates req for caller k and builds the effective CreateSandbox (id set, defaults
 * filled, paths canonical) into *ret_packed (free()), and the objects its host paths
 * name into *ret_objs (policy_objects_clear). Returns 0, or -errno with a one-line
 * reason in err: -EINVAL a bad request, -EACCES a host path the caller may not use as
 * asked, -EPERM one of the daemon's own directories, -ENOENT a missing writable path
 * or root. k may be the daemon itself (warm sandboxes). */
int policy_effective(struct sbxd *d, const Sbx__V1__CreateSandbox *req, char *id,
                     const struct caller *k, uint8_t **ret_packed, size_t *ret_len,
                     struct policy_objects *ret_objs, char *err, size_t errlen);

/* What a sandbox's view hides and keeps read-only (view paths), for Setup, the file
 * operations (a hidden path is "not found") and the guard (guard.h). */
struct policy_view {
        struct pathset *hidden; /* the daemon's, the policy's, root-dir translations */
        struct pathset
                *hidden_shared; /* the credentials a sandbox could read, shared; may be NULL */
        struct pathset *watched_shared;  /* every credential path, shared; may be NULL */
        struct pathset *watched;         /* below a root_dir: every credential path in its view */
        struct pathset *protected_paths; /* protected names inside writable paths (read-only) */
        struct pathset *made_dirs;       /* placeholders made, then read-only (protected_mkdirs) */
        struct pathset *made_files;      /* the same for files (protected_files) */
        /* The ids each of made_dirs and made_files is made with, in their order (filled by
         * policy_setup in root mode; NULL: the owner's). */
        struct placeholder_ids *made_dirs_as, *made_files_as;
};
void policy_view_clear(struct policy_view *v);

/* Builds the view of the effective spec (with root_dir canonical). Returns 0 or
 * -ENOMEM. */
int policy_view_build(struct sbxd *d, const Sbx__V1__CreateSandbox *spec, struct policy_view *ret);

/* What a sandbox's Setup takes of the sandbox itself (pointing into it). */
struct policy_sandbox {
        const char *id;
        const char *workspace;              /* host directory bound at /workspace */
        const Sbx__V1__CreateSandbox *spec; /* the effective request */
        uid_t run_uid, owner_uid;           /* owner_uid (uid_t)-1: unknown */
        gid_t run_gid, owner_gid;
        const struct cgroup *cg; /* the sandbox's group; may be NULL */
};

/* Fills setup from sb's spec and view, and the identities of objs (may be NULL: no
 * objects, as for a sandbox being adopted). In root mode, with objs and a known owner,
 * also how each writable path is bound (init.proto WritableBind: the ids the caller
 * was judged by, and whether root made a system directory writable), and in view the
 * ids each placeholder is made with (made_dirs_as, made_files_as). The strings and
 * arrays point into sb, view and objs, or are allocated into *ret_mem, freed by
 * policy_free_setup (also after a failure). Returns 0, -E2BIG when the view hides more
 * than SBX_MAX_HIDDEN_PATHS, or -ENOMEM. */
int policy_setup(struct sbxd *d, const struct policy_sandbox *sb, struct policy_view *view,
                 const struct policy_objects *objs, Sbx__Init__V1__Setup *setup, void **ret_mem);
void policy_free_setup(Sbx__Init__V1__Setup *setup, void *mem);

/* The base of a spare built ahead for sb (init.proto Setup.prebuild: the fields every
 * sandbox built on it shares, from sb's spec, the default policy), with the same
 * ownership rules as policy_setup (freed by policy_free_setup). 0 or -ENOMEM. */
int policy_setup_base(struct sbxd *d, const struct policy_sandbox *sb, Sbx__Init__V1__Setup *setup,
                      void **ret_mem);

/* 1 when a sandbox of the effective request spec can be built on the base of a spare
 * whose effective request is base: the same root (the host's /), network namespace
 * and /tmp, and no workspace the daemon mounts on the host (a disk image). */
int policy_fits_base(const struct sbxd *d, const Sbx__V1__CreateSandbox *base,
                     const Sbx__V1__CreateSandbox *spec);

#endif
