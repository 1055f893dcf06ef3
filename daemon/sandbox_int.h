/* sandbox_int.h: the parts of struct sandbox and struct command shared by sandbox.c,
 * policy.c and command.c. Not for other modules: they use sandbox.h. */
#ifndef SBX_SANDBOX_INT_H
#define SBX_SANDBOX_INT_H

#include "sandbox.h"

struct pathset;
struct files_cache;

struct end_waiter {
        sandbox_ended_cb cb;
        void *ud;
};

/* Indexes of the limits in enforcement reports, and their names. */
enum limit_kind {
        LIM_MEMORY = 0,
        LIM_CPU_SECONDS,
        LIM_CPU_PERCENT,
        LIM_PROCESSES,
        LIM_FILE_SIZE,
        LIM_OPEN_FILES,
        LIM_CORE_DUMPS,
        LIM_TMP,
        LIM_N
};
extern char *const limit_names[LIM_N];

struct sandbox {
        struct sbxd *d;
        struct sbxtab *tab;
        struct sandbox *hnext;          /* hash chain */
        struct sandbox *next, *prev;    /* list of all */
        char id[SBX_ID_MAX_BYTES + 1];
        char cg_name[SBX_ID_MAX_BYTES + 1]; /* its cgroup's name: the id it was created with */
        int warm;                       /* set up ahead for --warm, not yet claimed (sandbox.c) */
        int warm_given_up;              /* ended to make room for a client, not failed */
        uint8_t *setup_key;             /* warm: its Setup without identity, to match requests */
        size_t setup_key_len;
        Sbx__V1__SandboxState state;
        uid_t owner_uid;
        gid_t owner_gid;                /* the creator's gid (root mode: owns idmapped writes) */
        Sbx__V1__CreateSandbox *spec;   /* effective request, owned (unpacked copy) */
        int64_t created_ms;
        int64_t deadline_ms;
        uint64_t idle_timeout_ms;
        uint64_t last_activity;         /* uv_now() of the last request */
        uv_timer_t timer;               /* deadline or idle, whichever is first */
        uv_timer_t kill_timer;          /* guards the end: init must go within bounds */
        uv_process_t proc;              /* stage 0 of the init helper */
        int proc_spawned;
        int proc_exited;
        int64_t proc_exit_status;
        int proc_term_signal;
        int chan_fd;
        uv_poll_t chan_poll;
        int chan_poll_active;
        struct init_out *outq;          /* messages init's channel could not take yet */
        struct init_out *outq_tail;
        unsigned outq_n;
        int chan_poll_inited;
        int adopted;                    /* taken over from a previous daemon: init is not our child */
        uv_poll_t pidfd_poll;           /* adopted: PID 1's pidfd, readable once it exited */
        int pidfd_poll_inited;
        pid_t init_pid;                 /* host pid of PID 1, once Ready */
        int init_pidfd;
        int root_fd;                    /* O_PATH of the sandbox's "/" (its mount namespace), once Ready */
        dev_t pidns_dev;                /* its PID namespace (of /proc/PID/ns/pid), once Ready; 0: unknown */
        ino_t pidns_ino;
        struct pathset *hidden;         /* the hidden paths of its view (policy.h), for files.c */
        struct pathset *hidden_shared;  /* and every path of the shared credential list; may be NULL */
        unsigned view_generation;       /* bumped when the guard mounts in its view */
        struct pathset *made_dirs;      /* placeholders its view keeps (policy.h) */
        struct pathset *made_files;
        int left_running;               /* detached for the next daemon (--keep-sandboxes) */
        struct files_cache *files_cache; /* files.c's picture of the view, or NULL */
        int uid_slot;                   /* -1 when none */
        uid_t run_uid;
        gid_t run_gid;
        char *workspace;
        struct cgroup *cg;
        int cg_enforced;                /* bit per enum cgroup_ctrl */
        Sbx__V1__Enforcement enforcement[LIM_N];
        char **warnings;
        size_t n_warnings;
        int isolated;
        struct command *commands;
        unsigned n_running;
        uint64_t next_command;
        uint64_t commands_run;
        sandbox_ready_cb create_cb;
        void *create_ud;
        struct end_waiter *waiters;
        size_t n_waiters;
        char *end_reason;
        Sbx__V1__SandboxState end_state;
        int ending;
        int ended;          /* the end is recorded and answered; on_cleanup is due */
        char *trash;        /* the workspace in STATE/trash, for on_cleanup to delete */
        int handles_open;               /* uv handles not yet closed */
        int freed_from_table;
        struct caller creator;          /* pid and client name at creation */
        char creator_name[SBX_CLIENT_NAME_MAX_BYTES + 1];
};

/* Adds a warning (copied). Returns 0 or -ENOMEM. */
int sandbox_warn(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* command.c: the init channel delivered a message about a command. */
void command_on_start_failed(struct sandbox *sb, uint64_t command_id, int err, const char *msg);
void command_on_exited(struct sandbox *sb, const Sbx__Init__V1__Exited *ex);
/* command.c: the sandbox ended; every command still running ends with SANDBOX_ENDED, or
 * with UNKNOWN when the daemon leaves the sandbox to the next one (unknown != 0). */
void command_end_all(struct sandbox *sb, int unknown);

/* sandbox.c: sends a message to init; -errno on failure (the sandbox is then failed). */
int sandbox_send_init(struct sandbox *sb, const Sbx__Init__V1__ToInit *msg, const int *fds,
                      size_t nfds);
/* sandbox.c: handles what init has sent and the loop has not read yet, without
 * waiting (a timer that fires after a long loop turn runs before the loop reads
 * messages that arrived meanwhile). May finish commands, or end the sandbox. */
void sandbox_take_init_messages(struct sandbox *sb);
/* sandbox.c: a handle owned by the sandbox was closed. */
void sandbox_handle_closed(struct sandbox *sb);

#endif
