/* config.h: the daemon's configuration: defaults, command-line flags and environment.
 *
 * Owns the strings in struct config (freed by config_free). Called by main() once at
 * start-up and by the unit tests; everything else reads the struct. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stdint.h>
#include <sys/types.h>

#include "log.h"

enum { CONFIG_CGROUPS_AUTO = 0, CONFIG_CGROUPS_ON, CONFIG_CGROUPS_OFF };

/* The lifetimes of sandboxes, for sessions of agents that come back to a sandbox by its
 * ID: a day of life, ended after an hour with no request and no running command (the
 * guard against a client that went away without ending it: a short lifetime would end
 * the sandboxes that are in use), extendable a week at a time (SetTimeout counts from
 * the moment it is asked, as often as asked). */
/* The least --daemon-tasks-max: the main thread, libuv's pool (16, started before the
 * bound is set), its other threads, and room for the children (inits being started, rm
 * of workspaces, mke2fs) that live in the daemon's group a moment. */
#define CONFIG_MIN_DAEMON_TASKS 64u
#define CONFIG_DEFAULT_SANDBOX_TIMEOUT_MS (24ull * 3600u * 1000u)
#define CONFIG_DEFAULT_IDLE_TIMEOUT_MS    (3600ull * 1000u)
/* One image's file data (--max-image-size) and the image store's bound (--image-cache-size):
 * the least recently used images no sandbox uses are removed past it. */
#define CONFIG_DEFAULT_MAX_IMAGE_BYTES   (8ull << 30)
#define CONFIG_DEFAULT_IMAGE_CACHE_BYTES (20ull << 30)
/* One image's tar entries (--max-image-entries): what it costs in inodes, which its bytes
 * do not bound (a layer of empty files). A Debian with python3 has 10,000 to 20,000: the
 * default is 25 times that or more, and under a tenth of the 6.5 million inodes of a
 * 100 GB ext4 state filesystem (one per 16 KiB). The store's bound in entries is
 * derived: as many images at this bound as --image-cache-size holds at --max-image-size
 * (images_fit). */
#define CONFIG_DEFAULT_MAX_IMAGE_ENTRIES  500000u
#define CONFIG_MIN_MAX_IMAGE_ENTRIES      1000u
#define CONFIG_MAX_MAX_IMAGE_ENTRIES      100000000u
#define CONFIG_MAX_SANDBOX_TIMEOUT_MS     (7ull * 24u * 3600u * 1000u)

/* --warm-image REF=N: N sandboxes of image REF (the daemon's user's) kept warm. */
struct config_warm_image {
        char *ref;
        uint32_t n;
};
/* At most this many --warm-image flags. */
#define CONFIG_MAX_WARM_IMAGES 8u

struct config {
        char *socket_path;
        char *state_dir;
        char *init_path;              /* the sbx-init helper */
        char *socket_group;           /* --socket-group: a group name or numeric gid; NULL: none */
        enum log_level log_level;
        uint32_t max_sandboxes;
        uint32_t max_frame_bytes;
        uint64_t default_sandbox_timeout_ms; /* lifetime when the creator gives none */
        uint64_t default_idle_timeout_ms;    /* idle timeout when the creator gives none; 0: none */
        uint64_t max_sandbox_lifetime_ms;    /* the longest lifetime given at once, from then on */
        uint64_t max_command_timeout_ms;
        uint32_t max_commands_per_sandbox; /* running at once in a sandbox, and a policy's cap */
        uint32_t max_queued_per_sandbox;  /* commands waiting for a slot in a sandbox; 0: no queue */
        uint32_t max_queued_total;        /* commands waiting for a slot over the daemon */
        uint32_t max_queued_per_uid;      /* of those, one uid's, all sandboxes */
        uint64_t queue_timeout_ms;        /* a request's wait for a slot when it gives none; 0: none */
        uint32_t max_sandboxes_per_uid;   /* live sandboxes one uid may own: the flag, or a share */
        uint32_t max_sandboxes_per_uid_flag; /* --max-sandboxes-per-uid as given; 0: not given */
        uint32_t max_commands_per_uid;    /* commands one uid may run at once, all sandboxes */
        uint32_t max_connections_per_uid; /* connections one uid may hold open at once */
        uint32_t max_forwards_per_uid;    /* streams to sandboxes' ports one uid may hold open */
        uint32_t max_processes;           /* processes of one sandbox without a limit, and the cap; 0: none */
        uint64_t max_memory_bytes;        /* the most memory_bytes a policy may ask for */
        uint64_t max_tmp_bytes;           /* the most tmp_bytes a policy may ask for */
        uint32_t max_cpu_percent;         /* the most cpu_percent a policy may ask for */
        uint32_t retention_days;          /* records of sandboxes ended longer ago are pruned; 0 keeps all */
        uint64_t adopt_grace_ms;          /* how long an orphaned init waits for a new daemon; 0: no re-adoption */
        int keep_sandboxes;               /* on SIGTERM, leave sandboxes running for the next daemon */
        uint32_t warm;                    /* sandboxes of the default policy kept set up ahead */
        uint32_t spares;                  /* init helpers kept in a cgroup of their own ahead */
        struct config_warm_image warm_images[CONFIG_MAX_WARM_IMAGES]; /* --warm-image */
        uint32_t n_warm_images;
        int command_cgroups;              /* CONFIG_CGROUPS_AUTO, _ON or _OFF */
        uint64_t default_disk_bytes;      /* a sandbox's disk_bytes when it gives none; 0: none */
        uint64_t default_disk_inodes;     /* its disk_inodes when it gives none; 0: none */
        uint64_t max_disk_bytes;          /* the most disk_bytes a sandbox may ask for */
        int disk_via;                     /* enum disk_mech; DISK_MECH_NONE: the strongest */
        int disk_overcommit;              /* allow disk_bytes above the free space */
        uint64_t max_image_bytes;         /* --max-image-size: one image's file data */
        uint64_t image_cache_bytes;       /* --image-cache-size: the store's bound */
        uint64_t max_snapshot_bytes_per_uid; /* file data of one uid's snapshots; 0 until
                                              * derived: a quarter of the cache bound */
        uint32_t max_image_entries;       /* --max-image-entries: one image's tar entries */
        uint64_t max_buffered_bytes;      /* memory held for clients, all uids (quota.h) */
        uint64_t max_buffered_per_uid;    /* of it, one uid's: the flag, or a quarter */
        uint64_t max_buffered_per_uid_flag; /* --max-buffered-per-uid as given; 0: not given */
        uint64_t frame_timeout_ms;        /* the most a request may take to arrive whole */
        uint32_t max_ptys;                /* ptys all sandboxes may open: the flag, or a share */
        uint32_t max_ptys_per_uid;        /* of them, one uid's sandboxes': the flag, or a quarter */
        uint32_t max_ptys_per_uid_flag;   /* --max-ptys-per-uid as given; UINT32_MAX: not given */
        uint64_t daemon_memory_max;       /* the daemon's own memory bound (cgroup); 0: none */
        uint32_t daemon_tasks_max;        /* its own tasks bound (cgroup pids); 0: none, else
                                           * at least CONFIG_MIN_DAEMON_TASKS */
        uint32_t uid_base;                /* --uid-base: the first sandbox uid (root); 0: any */
        uint32_t max_proxy_fds_per_uid;   /* descriptors of one uid's proxy connections; 0: a share */
        uint32_t max_lookups_per_uid;     /* name lookups of one uid's proxies at once; 0: a share */
        int show_help;
        int show_version;
};

/* Fills cfg with the defaults for a daemon running as euid, reading $SBX_SOCKET,
 * $XDG_RUNTIME_DIR, $XDG_STATE_HOME and $HOME. Returns 0 or -ENOMEM. */
int config_init(struct config *cfg, uid_t euid);

/* --max-buffered and --max-buffered-per-uid's bounds. */
#define CONFIG_MIN_BUFFERED_BYTES (16ull * 1024u * 1024u)
#define CONFIG_MAX_BUFFERED_BYTES (1ull << 40)
/* --max-ptys and --max-ptys-per-uid's ceiling: the kernel's NR_UNIX98_PTY_MAX, the
 * most kernel.pty.max may be set to. */
#define CONFIG_MAX_PTYS (1u << 20)
/* kernel.pty.max and kernel.pty.reserve where /proc/sys/kernel/pty cannot be read: the
 * kernel's defaults. */
#define CONFIG_KERNEL_PTY_MAX     4096u
#define CONFIG_KERNEL_PTY_RESERVE 1024u
/* --daemon-memory-max's least (a daemon bounded lower could not serve). */
#define CONFIG_MIN_DAEMON_MEMORY_BYTES (64ull * 1024u * 1024u)

/* --max-proxy-fds-per-uid's most (a value above the proxies' own bound is cut to it). */
#define CONFIG_MAX_PROXY_FDS (1u << 30)

/* Applies the command-line flags (argv[0] is skipped). On a bad flag returns -EINVAL
 * and writes a one-line reason into err (errlen bytes). */
int config_parse_args(struct config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Why cfg->init_path cannot be executed, in one line for the log: a helper next to
 * sbxd that this user may not reach (naming the directory it may not search), one in a
 * directory out of reach, or the error of access(2). */
void config_explain_init(const struct config *cfg, char *buf, size_t len);

/* Frees the strings of cfg. */
void config_free(struct config *cfg);

/* The usage text for --help. */
const char *config_usage(void);

/* The gid of --socket-group's value: a number is taken as it is, a name is looked up
 * (getgrnam_r: NSS, so called once at start-up, never from the loop). Returns 0 with
 * *ret_gid, -EINVAL when name is no group name or number, -ENOENT when no group has
 * that name, or another -errno from the lookup. */
int config_resolve_group(const char *name, gid_t *ret_gid);

/* Parses a duration in seconds with an optional fraction ("1.5") into milliseconds.
 * Returns 0 or -EINVAL. */
int config_parse_seconds(const char *s, uint64_t *ret_ms);

#endif
