/* sandbox_int.h: struct sandbox, shared by the sandbox modules and no others: the
 * lifecycle (sandbox.c), the table (sbxtab.c), the warm pool (warm.c), recovery
 * (recover.c) and the commands (command.c, and the scheduler's part in sched,
 * cmdsched.h). The file operations and the guard see a
 * struct sandbox_view (sandbox_view.h), the policy module a struct policy_sandbox
 * (policy.h); everyone else uses the verbs of sandbox.h.
 *
 * Who writes what: the lifecycle owns every field but these: the table or the pool
 * owns hnext/next/prev, uid_slot, over/gone/gone_ud, warm*, unrecorded, pending and
 * restoring; the command module owns
 * commands, next_command, commands_run and bg_ended; the scheduler (cmdsched.c) owns
 * sched. */
#ifndef SBX_SANDBOX_INT_H
#define SBX_SANDBOX_INT_H

#include "bgkept.h"
#include "cmdsched.h"
#include "enforce.h"
#include "initchan.h"
#include "sbsock.h"
#include "sandbox.h"
#include "sandbox_view.h"

struct pathset;
struct quota;

struct end_waiter {
        sandbox_ended_cb cb;
        void *ud;
};

/* How a sandbox's commands reach the sandbox: given by the lifecycle (sandbox.c) when it
 * makes the sandbox, so that command.c never calls up into it. */
struct sandbox_hooks {
        /* A command holds the sandbox's memory until it has released it. */
        void (*hold)(struct sandbox *sb);
        void (*release)(struct sandbox *sb);
        /* The last running command has finished (for the idle timeout). */
        void (*idle)(struct sandbox *sb);
        /* init did not do what it must (reason "failed: ..."): the sandbox ends. */
        void (*fail)(struct sandbox *sb, const char *reason);
};

struct sandbox {
        struct sbxd *d;
        const struct sandbox_hooks *hooks;
        struct sandbox *hnext;       /* the table's hash chain */
        struct sandbox *next, *prev; /* the list of its owner: the table or the warm pool */
        /* Its owner's: over (may be NULL) once nothing of the sandbox runs and its end is
         * answered, or just before gone when it leaves without ending; gone once it has
         * ended and is about to be freed (its cgroup and workspace dealt with). */
        void (*over)(void *ud, struct sandbox *sb);
        void (*gone)(void *ud, struct sandbox *sb);
        void *gone_ud;
        /* The pool's (may be NULL): a warm sandbox is ready, or a spare built. */
        void (*pool_ready)(void *ud, struct sandbox *sb);
        int over_told;
        char id[SBX_ID_MAX_BYTES + 1];
        char cg_name[SBX_ID_MAX_BYTES + 1]; /* its cgroup's name: the id it was created with */
        struct sandbox_view view;           /* state, init, root, user, hidden paths (see there) */
        int warm;                           /* set up ahead for --warm, not yet claimed (warm.c) */
        /* A restore (sbxtab.c): unrecorded, its id's record another's (the new sandbox
         * until it takes its place, pending meanwhile; the one it replaced); restoring:
         * the sandbox a restore will replace (not idle meanwhile). */
        int unrecorded, pending, restoring;
        int warm_given_up;                  /* ended to make room for a client, not failed */
        int spare;                          /* a spare of the pool: no request yet (warm.c) */
        int prepared;                       /* its init joined its cgroup before Setup (Join) */
        int building;                       /* a spare whose base is built ahead (prebuild) */
        int built;                          /* ... and is: it said Built */
        uint64_t host_gen;                  /* pool: the host's generation when made (warm.c) */
        uint64_t host_events;               /* ... and how many changes it had seen */
        uint8_t *setup_key; /* warm: its Setup without identity, to match requests */
        size_t setup_key_len;
        uid_t owner_uid;
        gid_t owner_gid;              /* the creator's gid (root mode: owns idmapped writes) */
        Sbx__V1__CreateSandbox *spec; /* effective request, owned (unpacked copy) */
        int64_t created_ms;
        int64_t deadline_ms;
        uint64_t idle_timeout_ms;
        uint64_t last_activity; /* uv_now() of the last request */
        uv_timer_t timer;       /* deadline or idle, whichever is first */
        uv_timer_t kill_timer;  /* guards the end: init must go within bounds */
        uv_process_t proc;      /* stage 0 of the init helper */
        int proc_spawned;
        int proc_exited;
        struct initchan chan; /* to init */
        struct egress *egress; /* NETWORK_ALLOWLIST's proxy (egress.h), once Ready; or NULL */
        struct sbsock_set socks; /* sockets asked of init, and held by their users (sbsock.h) */
        int init_sockets;        /* its init answers MakeSocket (Ready.sockets) */
        int adopted;          /* taken over from a previous daemon: init is not our child */
        uv_poll_t pidfd_poll; /* PID 1's pidfd, readable once it exited: watched when
                               * adopted, and while ending */
        int pidfd_poll_inited;
        dev_t pidns_dev; /* its PID namespace (of /proc/PID/ns/pid), once Ready; 0: unknown */
        ino_t pidns_ino;
        struct pathset *made_dirs; /* placeholders its view keeps (placeholder.h) */
        struct pathset *made_files;
        int left_running; /* detached for the next daemon (--keep-sandboxes) */
        int uid_slot;     /* -1 when none */
        struct sbimage *image; /* what it is made from (sbimage.h; sbxtab.c opens and closes
                                * it); NULL: the host's root or a root_dir */
        uid_t run_uid;    /* as view.run_uid (policy.c reads these) */
        gid_t run_gid;
        char *workspace;
        struct cgroup *cg;
        int cg_enforced; /* bit per enum cgroup_ctrl */
        Sbx__V1__Enforcement enforcement[LIM_N];
        char **warnings;
        size_t n_warnings;
        int isolated;
        unsigned ptys;       /* the most ptys its devpts holds at once (Setup.ptys, Claim.ptys) */
        int ptys_held;       /* ptys counted in its owner's budget (d->ptys) until it is over */
        char *ptys_cut;      /* what bound left it fewer than SBX_SANDBOX_PTYS; NULL: none */
        struct command *commands;
        uint64_t next_command;
        uint64_t commands_run;
        struct cmdsched_queue sched; /* its slots and waiting commands (cmdsched.h) */
        struct bgkept bg_ended;      /* ended background commands still attachable */
        sandbox_ready_cb create_cb;
        void *create_ud;
        struct end_waiter *waiters;
        size_t n_waiters;
        struct sandbox_end_listener *end_listeners; /* sandbox_listen_end's */
        char *end_reason;
        int fail_errno; /* a creation that failed for lack of a resource (-EMFILE, ...), else 0 */
        Sbx__V1__SandboxState end_state;
        int ending;
        int answered;          /* every process gone, workspace moved, end recorded, answered */
        int ended;             /* and stage 0 has exited: on_cleanup is due */
        char *trash;           /* the workspace in STATE/trash, for on_cleanup to delete */
        int cg_delegated;      /* an image's (root mode): its cgroup's cgroup.procs is its
                                * root's, whose commands join groups of their own (v2) */
        unsigned dir_holds;    /* sandbox_dir_hold: its end leaves its directory until the
                                * last is released */
        int disk_busy;         /* its disk image is being made: its end leaves the workspace
                                * to the image's callback */
        int disk_fd;           /* its disk image's mount, attached nowhere on the host (disk.h):
                                * sent to init, held until its end; -1: none */
        int disk_warned;       /* what its disk limit means is in its warnings */
        int handles_open;      /* uv handles and commands still holding the sandbox */
        int retired;           /* out of its owner's list: freed once handles_open is 0 */
        struct caller creator; /* pid and client name at creation */
        char creator_name[SBX_CLIENT_NAME_MAX_BYTES + 1];
};

/* ---- for the sandbox modules (sandbox.c) -------------------------------------------- */

/* STATE/sandboxes/ID/workspace, the workspace of sandbox id (free()); NULL when out of
 * memory. */
char *sandbox_workspace_path(const struct sbxd *d, const char *id);

/* A new sandbox object, in no list, for id, owning a copy of the packed effective spec
 * (len bytes). Its timers and channel are initialised; its state is CREATING. NULL when
 * out of memory. */
struct sandbox *sandbox_alloc(struct sbxd *d, const char *id, const uint8_t *packed, size_t len,
                              uid_t owner, int64_t created_ms);

/* Frees a sandbox from sandbox_alloc that never got further (its timers are closed
 * first; the memory goes once they are). */
void sandbox_discard(struct sandbox *sb);

/* Replaces sb's effective spec (taken over) and notes its policy in the view. */
void sandbox_set_spec(struct sandbox *sb, Sbx__V1__CreateSandbox *spec);

/* Sets the user sb's commands and file operations run as. */
void sandbox_set_run_ids(struct sandbox *sb, uid_t uid, gid_t gid);

/* Notes caller as sb's creator (its name copied; not its groups, the connection's). */
void sandbox_set_creator(struct sandbox *sb, const struct caller *caller);

/* The lists of sandboxes their owners keep (the table's, the pool's), through
 * next/prev: sb at the head of *head; sb out of *head; whether one of the list runs in
 * the PID namespace dev:ino. */
void sandbox_list_add(struct sandbox **head, struct sandbox *sb);
void sandbox_list_del(struct sandbox **head, struct sandbox *sb);
int sandbox_list_has_pidns(const struct sandbox *head, dev_t dev, ino_t ino);

/* Adds a warning (copied). Returns 0 or -ENOMEM. */
int sandbox_warn(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reserves sb's ptys (sb->ptys, the most its devpts holds at once) from its owner's
 * budget and everyone's (d->ptys: --max-ptys-per-uid, --max-ptys): SBX_SANDBOX_PTYS, or
 * what is left of them when less, maybe none, with a warning that says how many and
 * names the bound that cut them (sb->ptys_cut). Given back when sb is over. Once per
 * sandbox of a client, its owner known: at its start (sandbox_start) or when it is
 * claimed warm (warm.c); a second call changes nothing. */
void sandbox_reserve_ptys(struct sandbox *sb);

/* The same for sb, the new sandbox of a restore of old (sbxtab.c): as many ptys as old
 * holds are sb's whatever the bounds say (old gives them back when it ends), then what
 * the budget has of the rest, as sandbox_reserve_ptys. Before sandbox_start. */
void sandbox_reserve_ptys_of(struct sandbox *sb, const struct sandbox *old);

/* Decides how sb's limits are enforced (enforce.h), on its cgroup, with warnings. */
void sandbox_apply_limits(struct sandbox *sb);

/* The adoption socket: a listening SOCK_SEQPACKET socket in sb's state directory (0600;
 * the directory is hidden in every sandbox) that init keeps, so that a restarted daemon
 * can reconnect to it. Returns the fd, or -1 (logged). */
int sandbox_adopt_listen(struct sandbox *sb);

/* Opens the state directory of workspace (its parent) as an O_PATH fd and writes
 * "/proc/self/fd/N/init.sock" into buf: a path of bounded length whatever the state
 * directory's, for bind(2) and connect(2). Returns the fd or -errno. */
int sandbox_adopt_path(const char *workspace, char *buf, size_t len);

/* Keeps what the view hides and the placeholders it made (policy.h) for the file
 * operations, and has the guard cover them when the host changes them: guard_watch's
 * -ENOSPC when it cannot watch them all, else 0. */
struct policy_view;
int sandbox_keep_view(struct sandbox *sb, const struct policy_view *view);

/* Starts setting up a new sandbox already in its owner's list (cold or warm): workspace,
 * cgroup, limits, the init helper and its Setup; for a spare prepared earlier, the
 * workspace, the request's limits and Setup. objs (policy.h) is taken over. A failure
 * fails the sandbox (its end answers its creator). */
struct policy_objects;
void sandbox_start(struct sandbox *sb, struct policy_objects *objs);

/* Makes sb a spare (warm.c): its cgroup, and the init helper's stage 0, which joins it
 * at once (Join) and waits for the Setup sandbox_start sends when a request takes sb;
 * with build, its base is built ahead too (init.proto Setup.prebuild), and sb->built
 * is set once init says so. 0, or -1 (sb failed: its end follows). */
int sandbox_prepare(struct sandbox *sb, int build);

/* Keeps sb (its memory) and its state directory (which its end would move to the trash)
 * until sandbox_dir_release, which moves it then if sb has ended meanwhile: for work off
 * the loop that reads the directory (a snapshot). */
void sandbox_dir_hold(struct sandbox *sb);
void sandbox_dir_release(struct sandbox *sb);

/* sb's image (its spec's image, one of uid's: sbimage.h) held for it, its digest in the
 * spec (recorded: a daemon that adopts sb holds that very image) and its commands'
 * ids the image user's; a warning when a rootless sbxd cannot have that user. 0 or
 * -errno with err (sb->image may be set: sbimage_close it). sandbox_open_image_named
 * opens name (a digest, say) instead of the spec's image, which stays as it is. */
int sandbox_open_image(struct sandbox *sb, uid_t uid, char *err, size_t errlen);
int sandbox_open_image_named(struct sandbox *sb, const char *name, uid_t uid, char *err,
                             size_t errlen);

/* sb, not started yet, is made under STATE/sandboxes/NAME, and its cgroup named NAME,
 * rather than its id's (a restore's new sandbox, whose id is taken). 0 or -ENOMEM. */
int sandbox_place(struct sandbox *sb, const char *name);

/* Renames sb's state directory to STATE/sandboxes/NAME (the paths it and its image
 * keep follow; its init needs none of them). 0 or -errno (nothing changed). */
int sandbox_move_dir(struct sandbox *sb, const char *name);

/* Its Setup without what differs between sandboxes of one policy (init.proto): the key
 * a warm sandbox is matched by (an image's by its digest besides: warm.c). *ret is
 * malloc()ed. 0 or -ENOMEM. */
int sandbox_setup_key(const Sbx__Init__V1__Setup *setup, uint8_t **ret, size_t *ret_len);

/* The key a request of effective spec would have: its Setup built as for a new
 * sandbox. 0 or -errno. */
int sandbox_request_key(struct sbxd *d, Sbx__V1__CreateSandbox *spec, uint8_t **ret,
                        size_t *ret_len);

/* Takes over a sandbox whose init a previous daemon left (recover.c): chan_fd its
 * adoption connection, pid and pidfd its PID 1 (verified). Watches both and arms its
 * timer, and its egress proxy on proxy_fd (taken; -1: none). init_sockets: its greeting
 * said it answers MakeSocket (Ready.sockets; an older init's does not). sb must be in
 * the table already. */
void sandbox_adopted(struct sandbox *sb, int chan_fd, pid_t pid, int pidfd, int proxy_fd,
                     int init_sockets);

/* Starts sb's egress proxy on the listener its init handed over (fd, taken; -1: none).
 * A sandbox whose policy is not NETWORK_ALLOWLIST gets none (fd is closed). */
void sandbox_start_egress(struct sandbox *sb, int fd);

/* Arms sb's one timer to the nearest of its deadline and its idle limit. */
void sandbox_arm_timer(struct sandbox *sb);

/* The checks of sb's timer, now (the periodic sweep: should a timer have been missed). */
void sandbox_check_timer(struct sandbox *sb);

/* Ends sb with final_state and reason (a no-op once it is ending). */
void sandbox_end(struct sandbox *sb, Sbx__V1__SandboxState final_state, const char *reason);

/* Lets go of sb without ending it: its init waits for the next daemon (adoption), its
 * record stays "ready", its running commands end as "unknown". */
void sandbox_leave(struct sandbox *sb);

/* ---- command.c: what the sandbox tells its commands ----------------------------------- */

/* The init channel delivered a message about a command. */
void command_on_start_failed(struct sandbox *sb, uint64_t command_id, int err, const char *msg);
void command_on_exited(struct sandbox *sb, const Sbx__Init__V1__Exited *ex);
/* init answered Started for a Start that asked for it (a background command's). */
void command_on_started(struct sandbox *sb, uint64_t command_id);
/* The sandbox ended; every command still running ends with SANDBOX_ENDED, or with
 * UNKNOWN when the daemon leaves the sandbox to the next one (unknown != 0). */
void command_end_all(struct sandbox *sb, int unknown);

#endif
