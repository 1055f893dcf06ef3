/* sbx_limits.h: every protocol and resource bound of sbxd as one named constant.
 *
 * Shared by the daemon, the init helper, libsbx and the tests, so that a limit means
 * the same thing on both ends of a socket. Sizes end in _BYTES, times in _MS/_USEC.
 * Each constant is checked before anything is allocated for the thing it bounds. */
#ifndef SBX_LIMITS_H
#define SBX_LIMITS_H

#define SBX_PROTOCOL_VERSION 1u
#define SBX_VERSION "0.1.0"

/* Wire framing. */
#define SBX_FRAME_HEADER_BYTES 4u
#define SBX_DEFAULT_MAX_FRAME_BYTES (64u * 1024u * 1024u)
#define SBX_MIN_MAX_FRAME_BYTES (1024u * 1024u) /* above one output chunk with its framing */

/* Init channel (SOCK_SEQPACKET, one message a packet). */
#define SBX_INIT_MAX_MSG_BYTES (128u * 1024u)
#define SBX_INIT_MAX_FDS 16u

/* Connections. */
#define SBX_MAX_CONNECTIONS 1024u
/* Connections one uid may hold open at once (sbxd --max-connections-per-uid, at most
 * SBX_MAX_CONNECTIONS), so that one local user cannot take every slot and lock the
 * others out. Root counts like any other uid. */
#define SBX_DEFAULT_MAX_CONNECTIONS_PER_UID 128u
/* Supplementary groups read for a peer: the kernel's NGROUPS_MAX. */
#define SBX_MAX_PEER_GROUPS 65536u
#define SBX_MAX_INFLIGHT_PER_CONN 256u

/* How long the daemon keeps a batch of command records open when no reply waits for
 * it (store_commit): a command that ends sooner shares one commit with its start; a
 * daemon killed within this window loses the record of a command whose start no
 * client was told of. */
#define SBX_RECORD_BATCH_MS 5u
/* A command whose result is returned whole and that ends within this long is recorded
 * in one row as it ends; one that runs longer has its start written at the first look
 * at its output after this long (at most 14 ms in: see SBX_OUTPUT_WATCH_DELAY_MS) and
 * its end later. A streamed command's start is written at once. So a daemon killed
 * loses the record of a command begun up to about 20 ms before, which no client had
 * been told the end of. */
#define SBX_RECORD_START_DELAY_MS 10u
/* A connection whose unsent responses exceed this stops being read until they drain. */
#define SBX_CONN_WRITE_HIGH_WATER_BYTES (8u * 1024u * 1024u)
/* The kernel send buffer asked for on each client connection (the host's
 * net.core.wmem_max caps it). With the default (208 KiB) a large ReadFile reply or a
 * fast command's output took a wakeup of the daemon and of the client every ~200 KiB:
 * 4 MiB made 1 GiB of streamed stdout 25-35% faster (make bench, stdout). A client
 * that does not read keeps up to twice this in the kernel (its accounting doubles the
 * size asked for), besides SBX_CONN_WRITE_HIGH_WATER_BYTES queued in the daemon. */
#define SBX_CONN_SNDBUF_BYTES (4u * 1024u * 1024u)
#define SBX_CLIENT_NAME_MAX_BYTES 128u

/* Sandboxes. */
#define SBX_ID_MAX_BYTES 64u
#define SBX_DEFAULT_MAX_SANDBOXES 1000u
/* --max-sandboxes-per-uid when not given: a quarter of --max-sandboxes, so that one
 * user leaves the others three quarters (at least 1). */
#define SBX_DEFAULT_SANDBOXES_PER_UID_SHARE 4u
/* --max-buffered: the memory the daemon holds for clients in all (kept output, kept
 * background results, stdin not yet taken, partly received requests); of it one uid
 * holds at most --max-buffered-per-uid, a quarter unless given. */
#define SBX_DEFAULT_MAX_BUFFERED_BYTES (2ull * 1024u * 1024u * 1024u)
#define SBX_DEFAULT_BUFFERED_PER_UID_SHARE 4u
/* A request's frame must arrive whole within this from its first byte (--frame-timeout). */
#define SBX_DEFAULT_FRAME_TIMEOUT_MS (60u * 1000u)
#define SBX_DEFAULT_MAX_COMMANDS_PER_UID 1024u
#define SBX_DEFAULT_RETENTION_DAYS 30u
/* How long an init whose daemon is gone waits for a new one to adopt it. */
#define SBX_DEFAULT_ADOPT_GRACE_MS (60u * 1000u)
/* Warm sandboxes (--warm): set up with the default policy before any request, so that a
 * create asking for that policy is answered without the setup (namespaces, mounts, the
 * cgroup move that waits for an RCU grace period on v1: 5-15 ms). */
#define SBX_DEFAULT_WARM_SANDBOXES 2u
#define SBX_MAX_WARM_SANDBOXES     64u
/* Spares (--spares): a stage 0 of the init helper started ahead of any request, in a
 * cgroup of its own that it has joined already, waiting for the Setup of any policy.
 * A create the warm pool cannot serve (a writable path, a root dir, full network) takes
 * one and is spared the cgroup move, the longest wait of a cold setup on v1. All but
 * one are built further ahead (namespaces and the view's base, see warm.c). */
#define SBX_DEFAULT_SPARES 2u
#define SBX_MAX_SPARES     64u
/* After the host's mounts or / changed and pool sandboxes were ended for it (warm.c),
 * no warm sandbox is made and new spares are plain for this long: a host that mounts
 * all the time does not make the pool rebuild all the time. */
#define SBX_SPARE_REBUILD_MS 1000u
/* After a warm sandbox failed to set up, the pool waits this long before it tries again. */
#define SBX_WARM_RETRY_MS (5u * 1000u)
/* How long after a claim the pool is topped up: the client's next requests go first. */
#define SBX_WARM_REFILL_DELAY_MS 10u
/* Root mode: the free blocks of image ids (SBX_IMAGE_BLOCKS) the warm pool leaves to
 * clients' creates (--warm-image). */
#define SBX_WARM_BLOCKS_LEFT 1u
/* The periodic sweep behind the precise timers (deadlines, idle, retention). */
#define SBX_SWEEP_INTERVAL_MS 5000u
#define SBX_MAX_LABELS 64u
#define SBX_LABEL_MAX_BYTES 256u
#define SBX_MAX_POLICY_PATHS 256u
/* Paths one sandbox's view hides (the policy's, the daemon's and the credentials of
 * protect_defaults that a sandbox could read), at most. */
#define SBX_MAX_HIDDEN_PATHS 2048u
#define SBX_PATH_MAX_BYTES 4096u
/* The size of a sandbox's /tmp (and /dev/shm) when its policy gives none, or sbxd
 * --max-tmp when that is less. */
#define SBX_DEFAULT_TMP_BYTES (256ull * 1024u * 1024u)

/* The floors of a sandbox's limits (Limits, checked by daemon/bounds.c), and the
 * ceilings no flag of sbxd sets. The other ceilings are flags (--max-memory, --max-tmp,
 * --max-cpu-percent, --max-processes, --max-disk, --max-commands, --max-queued), and
 * none is ever more than the mechanism that enforces the limit holds on the host (the
 * hard rlimits sbxd started with, which sbx-init cannot raise). */
#define SBX_MIN_MEMORY_BYTES (4ull * 1024u * 1024u)
#define SBX_MIN_TMP_BYTES    (64ull * 1024u)
/* The most --max-memory and --max-tmp may say (1 PiB): far below what a cgroup's
 * memory.max or a tmpfs's size= can count, so that neither ever overflows into "none". */
#define SBX_MAX_MEMORY_BYTES (1ull << 50)
/* RLIMIT_CPU counts whole seconds: at least one, and at most about 31 years (the hard
 * limit is one more, and the kernel's count of nanoseconds stays far from overflow). */
#define SBX_MIN_CPU_SECONDS 1u
#define SBX_MAX_CPU_SECONDS 1000000000u
/* The most --max-cpu-percent may say: 1024 CPUs (its default: 100 per CPU sbxd may run on). */
#define SBX_MAX_CPU_PERCENT (100u * 1024u)
/* sbx-init's own two processes (stage 0 and PID 1) and one command: fewer and no command
 * can start (a pids cgroup counts every task of the sandbox). */
#define SBX_MIN_PROCESSES 3u
/* PID_MAX_LIMIT: the most pids.max holds, and so the most --max-processes may say. */
#define SBX_MAX_PROCESSES  4194304u
#define SBX_MIN_OPEN_FILES 8u
/* fs.nr_open's default: RLIMIT_NOFILE cannot go past it. */
#define SBX_MAX_OPEN_FILES 1048576u
/* MAX_LFS_FILESIZE of a 64-bit kernel (LLONG_MAX): no file is larger, and RLIMIT_FSIZE
 * above it (RLIM_INFINITY among them) would limit nothing. */
#define SBX_MAX_FILE_SIZE_BYTES 9223372036854775807ull

/* Commands. */
#define SBX_DEFAULT_COMMAND_TIMEOUT_MS (60u * 1000u)
#define SBX_DEFAULT_MAX_COMMAND_TIMEOUT_MS (24ull * 3600u * 1000u)

/* Processes (and threads) of one sandbox when its policy names no limit, and the most it
 * may name (sbxd --max-processes; 0: none but SBX_MAX_PROCESSES). A fork bomb in a
 * sandbox without a limit would otherwise take every pid of the host. */
#define SBX_DEFAULT_MAX_PROCESSES 4096u
#define SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX 16u
/* A command over its sandbox's (or its uid's) running cap waits in its sandbox's FIFO
 * queue for a slot: at most this many commands wait in one sandbox (sbxd --max-queued,
 * a policy's Limits.queued_commands at most that; 0: no queue) and this many over the
 * daemon (sbxd --max-queued-total), of which one uid holds at most
 * SBX_DEFAULT_MAX_QUEUED_PER_UID (sbxd --max-queued-per-uid, so that one user cannot
 * fill the daemon's queue); past any bound RunCommand is RESOURCE_EXHAUSTED.
 * A request without queue_timeout_ms waits at most SBX_DEFAULT_QUEUE_TIMEOUT_MS (sbxd
 * --queue-timeout; 0: never wait), then ends QUEUE_TIMEOUT without running. */
#define SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX 64u
#define SBX_DEFAULT_MAX_QUEUED_TOTAL 1024u
#define SBX_DEFAULT_MAX_QUEUED_PER_UID 256u
#define SBX_DEFAULT_QUEUE_TIMEOUT_MS (60u * 1000u)
/* The most sbxd --max-queued and --max-queued-total (and --max-queued-per-uid) may be. */
#define SBX_MAX_QUEUED_PER_SANDBOX 65536u
#define SBX_MAX_QUEUED_TOTAL 1000000u
#define SBX_MAX_ARGV 4096u
#define SBX_MAX_ENV 4096u
#define SBX_DEFAULT_MAX_OUTPUT_BYTES (1024u * 1024u)
#define SBX_MAX_OUTPUT_BYTES (64u * 1024u * 1024u)
/* A result whose kept output does not fit one frame with it (both streams at the
 * maximum are twice a 64 MiB frame) sends that output first in OutputChunk responses
 * of at most this much data each (less when the frame limit is smaller). */
#define SBX_RESULT_PIECE_BYTES (1024u * 1024u)
#define SBX_MAX_STDIN_BYTES (16u * 1024u * 1024u)
/* How long output is drained after a command's leader exits before pipes are closed. */
#define SBX_DRAIN_AFTER_EXIT_MS 50u
/* A command whose result is returned whole (not streamed) has its output read when its
 * exit is reported: the loop watches its pipes only once one holds
 * SBX_OUTPUT_WATCH_BYTES (a quarter of a pipe's default 64 KiB), looked at after
 * SBX_OUTPUT_WATCH_DELAY_MS and then at doubling intervals of at most
 * SBX_OUTPUT_WATCH_MAX_DELAY_MS. So no poll registration and no wakeup at end of file
 * for most commands, and a writer waits on a full pipe at most that long, once. */
#define SBX_OUTPUT_WATCH_DELAY_MS 2u
#define SBX_OUTPUT_WATCH_MAX_DELAY_MS 32u
#define SBX_OUTPUT_WATCH_BYTES (16u * 1024u)

/* Terminals (RunCommand.tty): the largest rows and cols, more than any screen and far
 * less than the kernel's unsigned short, and the size of one when none is given. */
#define SBX_MAX_TTY_DIM 1000u
#define SBX_DEFAULT_TTY_ROWS 24u
#define SBX_DEFAULT_TTY_COLS 80u

/* The ptys a sandbox's devpts holds at once (its max= option), when its owner's budget
 * has them: a shell, a few tmux panes and `sbx exec -t` need far fewer. Every devpts but
 * the host's draws from one kernel pool (kernel.pty.max less kernel.pty.reserve, 3072 by
 * default), so each sandbox reserves its ptys from its owner's budget (sbxd
 * --max-ptys-per-uid, a quarter of --max-ptys unless given) and from everyone's
 * (--max-ptys, half of that pool unless given), and gets fewer, maybe none, when less is
 * left. */
#define SBX_SANDBOX_PTYS               16u
#define SBX_DEFAULT_PTYS_SHARE         2u
#define SBX_DEFAULT_PTYS_PER_UID_SHARE 4u

/* Forwarded ports (OpenPort). Sockets asked of one sandbox's init and not yet answered
 * (init answers each at once; more pending means init is stuck), and the streams open
 * to one sandbox's ports at once, whoever opened them; each uid's streams over every
 * sandbox are bounded by sbxd --max-forwards-per-uid. */
#define SBX_SANDBOX_MAX_PENDING_SOCKETS 64u
#define SBX_SANDBOX_MAX_FORWARDS        256u
#define SBX_DEFAULT_FORWARDS_PER_UID    64u

/* Files. */
#define SBX_DEFAULT_MAX_READ_BYTES (5u * 1024u * 1024u)
#define SBX_DEFAULT_LIST_LIMIT 10000u
#define SBX_MAX_LIST_LIMIT 100000u
/* Work whose cost grows with what a sandbox made (a recursive Remove, the reading and
 * describing of a ListDirectory) runs off the event loop, on libuv's thread pool: at
 * most SBX_OFFLOAD_MAX_RUNNING such jobs at once over the daemon (the pool has 16
 * threads unless UV_THREADPOOL_SIZE says otherwise: the rest stay for name lookups,
 * checkpoints and disk images), of which SBX_OFFLOAD_MAX_RUNNING_PER_UID of one uid;
 * up to SBX_OFFLOAD_MAX_QUEUED_PER_UID more of one uid wait their turn (first in first
 * out, the uids taking turns), past which the request is RESOURCE_EXHAUSTED. A job is
 * asked every SBX_OFFLOAD_CHECK_MS whether its sandbox still runs, and stops when not. */
#define SBX_OFFLOAD_MAX_RUNNING 4u
#define SBX_OFFLOAD_MAX_RUNNING_PER_UID 2u
#define SBX_OFFLOAD_MAX_QUEUED_PER_UID 32u
#define SBX_OFFLOAD_CHECK_MS 50u

/* Images (docs/images.md). A pull or import runs on libuv's thread pool for minutes: at
 * most SBX_IMAGE_MAX_PULLS at once over the daemon, SBX_IMAGE_MAX_PULLS_PER_UID of one
 * uid; a pull that joins one of the same image under way counts for neither. Of the
 * pool's 16 threads, the offload jobs take 4 at most, the allowlist proxies' name
 * lookups 8 and pulls 3: one is left for WAL checkpoints, disk images and the image
 * store's collection even when all of them are busy. Past them PullImage is
 * RESOURCE_EXHAUSTED, naming the bound. A PullImage's source is at most
 * SBX_PATH_MAX_BYTES; each credential at most SBX_IMAGE_CREDENTIAL_MAX_BYTES. */
#define SBX_IMAGE_MAX_PULLS 3u
#define SBX_IMAGE_MAX_PULLS_PER_UID 2u
#define SBX_IMAGE_CREDENTIAL_MAX_BYTES 8192u

/* History. */
#define SBX_DEFAULT_HISTORY_LIMIT 100u
#define SBX_MAX_HISTORY_LIMIT 1000u

/* Uids for sandboxed commands when the daemon runs as root: one per sandbox slot, a
 * range of SBX_UID_COUNT per daemon. Each root daemon on a host takes one of
 * SBX_UID_RANGES ranges from SBX_UID_BASE (the first free one, reserved host-wide:
 * daemon/uidrange.h), up to 2133554431: below 2^31, which some tools read as signed,
 * and below systemd's foreign uid range (2147352576). --uid-base sets a range anywhere
 * from SBX_UID_BASE_MIN (above the 16-bit uids of users and nobody) to the last uid
 * below (uid_t)-1. */
#define SBX_UID_BASE 2100000000u
#define SBX_UID_COUNT 65536u
#define SBX_UID_RANGES 512u
#define SBX_UID_BASE_MIN 65536u
#define SBX_UID_BASE_MAX (0xfffffffeu - SBX_UID_COUNT + 1u)

/* Sandboxes made from an image (docs/images.md) have a user namespace of their own
 * whose ids 0 .. SBX_IMAGE_IDS - 1 (root, the image's users, nobody) map to a block of
 * as many host ids. A root daemon gives each live one a block of its own, of
 * SBX_IMAGE_BLOCKS blocks from SBX_IMAGE_UID_BASE that belong to its uid range (range k
 * of SBX_UID_RANGES has blocks k * SBX_IMAGE_BLOCKS ..): at most that many at once. */
#define SBX_IMAGE_IDS      65536u
#define SBX_IMAGE_UID_BASE 2147483648u
#define SBX_IMAGE_BLOCKS   63u
/* The longest CreateSandbox.image (a reference, or a local source's name). */
#define SBX_IMAGE_NAME_MAX_BYTES 1024u
/* The most layers an image may have (overlayfs stacks at most 500). */
#define SBX_MAX_IMAGE_LAYERS 256u
/* The capabilities root of an image sandbox keeps (in its own user namespace, over its
 * own files): Docker's default set, less MKNOD, NET_RAW and SYS_CHROOT, which the filter
 * or the namespace make moot: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID,
 * SETUID, SETPCAP, NET_BIND_SERVICE, AUDIT_WRITE, SETFCAP. */
#define SBX_IMAGE_CAPS                                                                    \
        ((1ull << 0) | (1ull << 1) | (1ull << 3) | (1ull << 4) | (1ull << 5) | (1ull << 6) | \
         (1ull << 7) | (1ull << 8) | (1ull << 10) | (1ull << 29) | (1ull << 31))
/* The uid a warm sandbox names until it is claimed and gets its owner's (it runs no
 * command before). */
#define SBX_WARM_RUN_ID 65534u

/* File-change watches (WatchFiles, docs/watch.md). At most SBX_WATCH_MAX_PER_SANDBOX
 * watches on one sandbox, SBX_WATCH_MAX_PER_UID of one caller, SBX_WATCH_MAX_TOTAL over
 * the daemon (each is an inotify instance; the host's fs.inotify.max_user_instances
 * is 128 by default). A watch holds at most SBX_WATCH_MAX_DIRS directories (inotify
 * watch descriptors) and SBX_WATCH_MAX_PENDING coalesced paths; past either it reports
 * an overflow. The directories every watch of the daemon follows (or is about to) count
 * against the daemon user's fs.inotify.max_user_watches, which the guard needs too: all
 * the daemon's watches together follow at most 1/SBX_WATCH_HOST_SHARE of it (and never
 * more than SBX_WATCH_MAX_DIRS_TOTAL), one uid's at most 1/SBX_WATCH_UID_SHARE of that;
 * past either the watch reports an overflow naming it. Changes are coalesced over
 * coalesce_ms, SBX_WATCH_MIN_COALESCE_MS .. SBX_WATCH_MAX_COALESCE_MS (default
 * SBX_WATCH_DEFAULT_COALESCE_MS). Recursive walks share each loop turn: one directory
 * at a time, round robin over the uids with a walk to do, then over each uid's watches,
 * at most SBX_WATCH_WALK_SLICE directories, SBX_WATCH_WALK_SLICE_ENTRIES entries listed
 * and SBX_WATCH_WALK_SLICE_US microseconds a turn; one FileEvents answer carries at most
 * SBX_WATCH_EVENTS_PER_REPLY events. */
#define SBX_WATCH_MAX_PER_SANDBOX      4u
#define SBX_WATCH_MAX_PER_UID          16u
#define SBX_WATCH_MAX_TOTAL            64u
#define SBX_WATCH_MAX_DIRS             8192u
#define SBX_WATCH_HOST_SHARE           4u
#define SBX_WATCH_UID_SHARE            4u
#define SBX_WATCH_MAX_DIRS_TOTAL       65536u
#define SBX_WATCH_MAX_PENDING          4096u
#define SBX_WATCH_MIN_COALESCE_MS      10u
#define SBX_WATCH_MAX_COALESCE_MS      5000u
#define SBX_WATCH_DEFAULT_COALESCE_MS  100u
#define SBX_WATCH_WALK_SLICE           256u
#define SBX_WATCH_WALK_SLICE_ENTRIES   16384u
#define SBX_WATCH_WALK_SLICE_US        4000u
#define SBX_WATCH_EVENTS_PER_REPLY     512u

/* A sandbox in a user namespace of its own (rootless, or made from an image) charges
 * the inotify watches and instances its processes make to the namespace's owner, the
 * daemon's user, whose share the guard needs (docs/watch.md): its processes together
 * may make at most 1/SBX_SANDBOX_INOTIFY_SHARE of the host's fs.inotify.max_user_watches
 * and max_user_instances (at least SBX_SANDBOX_INOTIFY_MIN_INSTANCES instances). */
#define SBX_SANDBOX_INOTIFY_SHARE         16u
#define SBX_SANDBOX_INOTIFY_MIN_INSTANCES 8u

#endif
