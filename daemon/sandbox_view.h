/* sandbox_view.h: what the file operations (files.c) and the guard (guard.c) know of a
 * sandbox, instead of the whole struct sandbox: its id, its state, its init, its root,
 * its user and the paths its view hides.
 *
 * Embedded in struct sandbox, which keeps it up to date (its state and init fields are
 * the sandbox's own, stored here); valid, at the same address, for the sandbox's whole
 * life. Readers hold it only while the sandbox is live: the guard until guard_forget,
 * the file operations during one call. Nothing here is freed by its readers. */
#ifndef SBX_SANDBOX_VIEW_H
#define SBX_SANDBOX_VIEW_H

#include <sys/types.h>

#include "sbx.pb-c.h"

struct sbxd;
struct pathset;

struct sandbox_view {
        const char *id; /* the sandbox's id (its storage) */
        struct sbxd *d;
        Sbx__V1__SandboxState state; /* the sandbox's state */
        pid_t init_pid;              /* host pid of PID 1, once Ready; 0 before */
        int init_pidfd;              /* a pidfd of PID 1, once Ready; -1 when none */
        int root_fd;                 /* O_PATH of its "/" (its mount namespace), once Ready */
        uid_t run_uid;               /* the sandbox user, as whom files are touched */
        gid_t run_gid;
        struct pathset *hidden;        /* the hidden paths of its view (policy.h); may be NULL */
        struct pathset *hidden_shared; /* and every path of the shared credential list */
        const Sbx__V1__Policy *policy; /* its effective policy */
        unsigned generation;           /* bumped by the guard when it mounts in the view */
        void *files_cache;             /* files.c's picture of the view: one malloc()ed
                                        * block, or NULL; freed with the sandbox */
};

#endif
