/* config.c: defaults, flags and environment of sbxd; see config.h.
 *
 * The path rules are those of sbxd(8) (--socket, --state-dir) and of libsbx's
 * sbx_default_socket_path(), so that a client finds the daemon without being told:
 * --socket, else $SBX_SOCKET, else /run/sbxd/sbxd.sock for root and
 * $XDG_RUNTIME_DIR/sbxd/sbxd.sock otherwise; state in /var/lib/sbxd for root and
 * ${XDG_STATE_HOME:-~/.local/state}/sbxd otherwise. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "bounds.h"
#include "egressshare.h"
#include "pathcheck.h"
#include "sbx_limits.h"

/* Where the init helper is looked for, relative to sbxd's directory. */
static const char *const init_rel[] = {"sbx-init", "../libexec/sbxd/sbx-init"};

static char *path_join(const char *a, const char *b) {
        char *r;
        if (asprintf(&r, "%s/%s", a, b) < 0)
                return NULL;
        return r;
}

void config_explain_init(const struct config *cfg, char *buf, size_t len) {
        char exe[PATH_MAX], dir[PATH_MAX], *slash;
        ssize_t n;
        int err = access(cfg->init_path, X_OK) < 0 ? errno : 0;
        size_t i;

        if (pathcheck_unsearchable(cfg->init_path, dir, sizeof(dir))) {
                snprintf(buf, len,
                         "the init helper %s is out of reach of uid %u: it may not search %s "
                         "(permission denied); pass --init PATH",
                         cfg->init_path, (unsigned)geteuid(), dir);
                return;
        }
        /* A helper next to sbxd that this user cannot reach (a checkout in /root, run
         * as another user) sends the lookup to LIBEXECDIR, whose "no such file" would
         * hide the real cause. */
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                slash = strrchr(exe, '/');
                if (slash)
                        *slash = '\0';
                for (i = 0; slash && i < sizeof(init_rel) / sizeof(init_rel[0]); i++) {
                        char *p = path_join(exe, init_rel[i]);
                        int found = p && pathcheck_unsearchable(p, dir, sizeof(dir));
                        if (found) {
                                snprintf(buf, len,
                                         "the init helper next to sbxd, %s, is out of reach of uid "
                                         "%u: it may not search %s (permission denied); install "
                                         "sbxd where this user can run it (make install), make "
                                         "that directory searchable, or pass --init PATH",
                                         p, (unsigned)geteuid(), dir);
                                free(p);
                                return;
                        }
                        free(p);
                }
        }
        snprintf(buf, len,
                 "the init helper %s is not executable: %s (build it with `make`, or pass "
                 "--init PATH)",
                 cfg->init_path, strerror(err ? err : ENOENT));
}

/* The init helper: next to sbxd (a build tree), else in ../libexec/sbxd relative to it
 * (an installed PREFIX/sbin/sbxd, whatever PREFIX it was built for), else the compiled-in
 * LIBEXECDIR. */
static char *default_init_path(void) {
        const char *const *rel = init_rel;
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        char *slash;
        size_t i;

        if (n > 0) {
                exe[n] = '\0';
                slash = strrchr(exe, '/');
                if (slash) {
                        *slash = '\0';
                        for (i = 0; i < sizeof(init_rel) / sizeof(init_rel[0]); i++) {
                                char *p = path_join(exe, rel[i]);
                                if (p && access(p, X_OK) == 0)
                                        return p;
                                free(p);
                        }
                }
        }
        return strdup(SBX_LIBEXECDIR "/sbx-init");
}

/* The number in the file path (a sysctl), or fallback when it cannot be read. */
static uint32_t read_sysctl(const char *path, uint32_t fallback) {
        FILE *f = fopen(path, "re");
        unsigned long v;
        int ok = f && fscanf(f, "%lu", &v) == 1 && v <= UINT32_MAX;

        if (f)
                fclose(f);
        return ok ? (uint32_t)v : fallback;
}

/* --max-ptys when not given: half of what the kernel leaves the devpts instances other
 * than the host's (kernel.pty.max less kernel.pty.reserve, which only the host's initial
 * instance may use), so that sbxd's sandboxes never take more than half of what
 * containers and other users of such instances may need. */
static uint32_t default_max_ptys(void) {
        uint32_t max = read_sysctl("/proc/sys/kernel/pty/max", CONFIG_KERNEL_PTY_MAX),
                 reserve = read_sysctl("/proc/sys/kernel/pty/reserve", CONFIG_KERNEL_PTY_RESERVE);
        uint32_t share = max > reserve ? (max - reserve) / SBX_DEFAULT_PTYS_SHARE : 0;

        return share < CONFIG_MAX_PTYS ? share : CONFIG_MAX_PTYS;
}

/* The per-uid bounds: as given, or a share of their totals. */
static void derive_shares(struct config *cfg) {
        uint32_t share = cfg->max_sandboxes / SBX_DEFAULT_SANDBOXES_PER_UID_SHARE;

        cfg->max_sandboxes_per_uid = share ? share : 1;
        if (cfg->max_sandboxes_per_uid_flag)
                cfg->max_sandboxes_per_uid = cfg->max_sandboxes_per_uid_flag;
        cfg->max_buffered_per_uid = cfg->max_buffered_bytes / SBX_DEFAULT_BUFFERED_PER_UID_SHARE;
        if (cfg->max_buffered_per_uid_flag)
                cfg->max_buffered_per_uid = cfg->max_buffered_per_uid_flag;
        cfg->max_ptys_per_uid = cfg->max_ptys_per_uid_flag != UINT32_MAX
                                        ? cfg->max_ptys_per_uid_flag
                                        : cfg->max_ptys / SBX_DEFAULT_PTYS_PER_UID_SHARE;
}

int config_init(struct config *cfg, uid_t euid) {
        const char *env;

        memset(cfg, 0, sizeof(*cfg));
        cfg->log_level = LOG_LEVEL_INFO;
        cfg->max_sandboxes = SBX_DEFAULT_MAX_SANDBOXES;
        cfg->max_frame_bytes = SBX_DEFAULT_MAX_FRAME_BYTES;
        cfg->default_sandbox_timeout_ms = CONFIG_DEFAULT_SANDBOX_TIMEOUT_MS;
        cfg->default_idle_timeout_ms = CONFIG_DEFAULT_IDLE_TIMEOUT_MS;
        cfg->max_sandbox_lifetime_ms = CONFIG_MAX_SANDBOX_TIMEOUT_MS;
        cfg->max_processes = SBX_DEFAULT_MAX_PROCESSES;
        cfg->max_command_timeout_ms = SBX_DEFAULT_MAX_COMMAND_TIMEOUT_MS;
        cfg->max_commands_per_sandbox = SBX_DEFAULT_MAX_COMMANDS_PER_SANDBOX;
        cfg->max_queued_per_sandbox = SBX_DEFAULT_MAX_QUEUED_PER_SANDBOX;
        cfg->max_queued_total = SBX_DEFAULT_MAX_QUEUED_TOTAL;
        cfg->max_queued_per_uid = SBX_DEFAULT_MAX_QUEUED_PER_UID;
        cfg->queue_timeout_ms = SBX_DEFAULT_QUEUE_TIMEOUT_MS;
        cfg->max_buffered_bytes = SBX_DEFAULT_MAX_BUFFERED_BYTES;
        cfg->max_ptys = default_max_ptys();
        cfg->max_ptys_per_uid_flag = UINT32_MAX;
        derive_shares(cfg);
        cfg->frame_timeout_ms = SBX_DEFAULT_FRAME_TIMEOUT_MS;
        cfg->max_commands_per_uid = SBX_DEFAULT_MAX_COMMANDS_PER_UID;
        cfg->max_connections_per_uid = SBX_DEFAULT_MAX_CONNECTIONS_PER_UID;
        cfg->max_forwards_per_uid = SBX_DEFAULT_FORWARDS_PER_UID;
        cfg->retention_days = SBX_DEFAULT_RETENTION_DAYS;
        cfg->adopt_grace_ms = SBX_DEFAULT_ADOPT_GRACE_MS;
        cfg->warm = SBX_DEFAULT_WARM_SANDBOXES;
        cfg->spares = SBX_DEFAULT_SPARES;
        cfg->max_disk_bytes = DISK_DEFAULT_MAX_BYTES;
        cfg->max_image_bytes = CONFIG_DEFAULT_MAX_IMAGE_BYTES;
        cfg->image_cache_bytes = CONFIG_DEFAULT_IMAGE_CACHE_BYTES;
        cfg->max_image_entries = CONFIG_DEFAULT_MAX_IMAGE_ENTRIES;
        /* A limit of memory or of /tmp (memory-backed) above the host's memory and swap
         * would limit nothing; cpu_percent above its CPUs likewise. */
        cfg->max_memory_bytes = bounds_host_memory();
        cfg->max_tmp_bytes = cfg->max_memory_bytes;
        cfg->max_cpu_percent = bounds_host_cpu_percent();

        env = getenv("SBX_SOCKET");
        if (env && env[0])
                cfg->socket_path = strdup(env);
        else if (euid == 0)
                cfg->socket_path = strdup("/run/sbxd/sbxd.sock");
        else {
                env = getenv("XDG_RUNTIME_DIR");
                if (env && env[0] == '/')
                        cfg->socket_path = path_join(env, "sbxd/sbxd.sock");
                else if (asprintf(&cfg->socket_path, "/run/user/%u/sbxd/sbxd.sock",
                                  (unsigned)euid) < 0)
                        cfg->socket_path = NULL;
        }

        if (euid == 0)
                cfg->state_dir = strdup("/var/lib/sbxd");
        else {
                env = getenv("XDG_STATE_HOME");
                if (env && env[0] == '/')
                        cfg->state_dir = path_join(env, "sbxd");
                else {
                        const char *home = getenv("HOME");
                        if (!home || home[0] != '/')
                                home = "/tmp";
                        if (asprintf(&cfg->state_dir, "%s/.local/state/sbxd", home) < 0)
                                cfg->state_dir = NULL;
                }
        }
        cfg->init_path = default_init_path();
        if (!cfg->socket_path || !cfg->state_dir || !cfg->init_path) {
                config_free(cfg);
                return -ENOMEM;
        }
        return 0;
}

void config_free(struct config *cfg) {
        free(cfg->socket_path);
        free(cfg->state_dir);
        free(cfg->init_path);
        free(cfg->socket_group);
        cfg->socket_path = cfg->state_dir = cfg->init_path = cfg->socket_group = NULL;
        while (cfg->n_warm_images > 0) {
                cfg->n_warm_images--;
                free(cfg->warm_images[cfg->n_warm_images].ref);
                cfg->warm_images[cfg->n_warm_images].ref = NULL;
        }
}

int config_parse_seconds(const char *s, uint64_t *ret_ms) {
        char *end;
        double v;

        if (!s || !*s)
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno || *end || !isfinite(v) || v < 0 || v > 1e9)
                return -EINVAL;
        *ret_ms = (uint64_t)llround(v * 1000.0);
        return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *ret) {
        char *end;
        unsigned long long v;
        if (!s || !*s || *s == '-')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

/* 1 when s is all decimal digits. */
static int all_digits(const char *s) {
        if (!*s)
                return 0;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return 0;
        return 1;
}

/* 1 when s can name a group: a gid below (gid_t)-1, or a name without the characters
 * that cannot be in one (':' ',' '/', blanks, controls) and not starting with '-'. */
static int group_arg_valid(const char *s) {
        uint32_t gid;
        const char *p;

        if (!s || !*s || *s == '-' || strlen(s) > 256)
                return 0;
        if (all_digits(s))
                return parse_u32(s, 0, UINT32_MAX - 1, &gid) == 0;
        for (p = s; *p; p++)
                if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == ':' || *p == ',' || *p == '/')
                        return 0;
        return 1;
}

int config_resolve_group(const char *name, gid_t *ret_gid) {
        struct group gr, *found = NULL;
        size_t size = 1024;
        char *buf = NULL;
        uint32_t gid;
        int r;

        if (!group_arg_valid(name))
                return -EINVAL;
        if (all_digits(name)) {
                r = parse_u32(name, 0, UINT32_MAX - 1, &gid);
                if (r == 0)
                        *ret_gid = (gid_t)gid;
                return r;
        }
        for (;;) {
                char *n = realloc(buf, size);
                if (!n) {
                        free(buf);
                        return -ENOMEM;
                }
                buf = n;
                r = getgrnam_r(name, &gr, buf, size, &found);
                /* A group with very many members needs a larger buffer; 1 MiB is plenty. */
                if (r != ERANGE || size >= 1024u * 1024u)
                        break;
                size *= 2;
        }
        if (r == 0 && found)
                *ret_gid = found->gr_gid;
        free(buf);
        if (r != 0)
                return -r;
        return found ? 0 : -ENOENT;
}

static int replace_str(char **slot, const char *v) {
        char *n = strdup(v);
        if (!n)
                return -ENOMEM;
        free(*slot);
        *slot = n;
        return 0;
}

const char *config_usage(void) {
        return "usage: sbxd [--socket PATH] [--state-dir DIR] [--max-sandboxes N] [--log-level L]\n"
               "            [--max-frame-bytes N] [--default-sandbox-timeout SECS]\n"
               "            [--default-idle-timeout SECS] [--max-sandbox-timeout SECS]\n"
               "            [--max-command-timeout SECS] [--max-commands N] [--init PATH]\n"
               "            [--max-sandboxes-per-uid N] [--max-commands-per-uid N] [--retention-days N]\n"
               "            [--adopt-grace SECS] [--keep-sandboxes] [--command-cgroups auto|on|off]\n"
               "            [--warm N] [--warm-image REF=N] [--spares N] [--max-processes N]\n"
               "            [--max-connections-per-uid N] [--max-forwards-per-uid N]\n"
               "            [--socket-group GROUP] [--max-queued N] [--max-queued-total N]\n"
               "            [--max-queued-per-uid N] [--queue-timeout SECS]\n"
               "            [--default-disk SIZE] [--default-disk-inodes N] [--max-disk SIZE]\n"
               "            [--disk-via auto|quota|image|tmpfs] [--disk-overcommit]\n"
               "            [--max-memory SIZE] [--max-tmp SIZE] [--max-cpu-percent N]\n"
               "            [--max-buffered SIZE] [--max-buffered-per-uid SIZE]\n"
               "            [--frame-timeout SECS] [--daemon-memory-max SIZE] [--daemon-tasks-max N]\n"
               "            [--uid-base N]\n"
               "            [--max-proxy-fds-per-uid N] [--max-lookups-per-uid N]\n"
               "            [--max-ptys N] [--max-ptys-per-uid N]\n"
               "            [--max-image-size SIZE] [--image-cache-size SIZE]\n"
               "            [--max-snapshot-bytes-per-uid SIZE] [--max-image-entries N]\n"
               "\n"
               "Runs the sbxd sandbox daemon in the foreground, logging to stderr. It is ready\n"
               "when the socket accepts connections. Log levels: err warning notice info debug.\n"
               "A sandbox whose creator gives no timeouts lives --default-sandbox-timeout\n"
               "(default 86400 s, a day) and ends after --default-idle-timeout without a request\n"
               "or a running command (default 3600 s; 0: never idle). No timeout, at creation or\n"
               "set later, may reach further than --max-sandbox-timeout from the moment it is\n"
               "given (default 604800 s, a week), nor an idle timeout be longer.\n"
               "Sandboxes outlive a crashed daemon for --adopt-grace (default 60 s; 0: they die\n"
               "with it) and a restarted daemon adopts them; --keep-sandboxes leaves them running\n"
               "on SIGTERM too, for an upgrade. --warm keeps N sandboxes of the default policy\n"
               "set up ahead of requests (default 2; 0: none): a create that matches one is\n"
               "answered at once; --spares keeps N init helpers in cgroups of their own ahead\n"
               "(default 2; 0: none) for the creates that match none, which then skip the cgroup\n"
               "move (a wait of 5-15 ms on cgroup v1); all but one have their namespaces and the\n"
               "base of their view built too. --warm-image REF=N (repeatable) keeps N sandboxes\n"
               "of the image REF (one of sbxd's own user's images: pull it as that user) set up\n"
               "ahead too, for the creates of REF's content by any user.\n"
               "A policy's limits have ceilings; a request above one is refused, naming it.\n"
               "--max-processes: processes (and threads) of a sandbox whose policy sets no\n"
               "limit, and the most one may set (default 4096; 0: 4194304, the kernel's most).\n"
               "--max-memory and --max-tmp: the most memory_bytes and tmp_bytes a policy may\n"
               "set (default: the host's memory and swap; whole pages, at most 1024T).\n"
               "--max-cpu-percent: the most cpu_percent (default 100 per CPU sbxd may use).\n"
               "--max-connections-per-uid: connections one user (root too) may hold open at once\n"
               "(default 128, at most 1024). --max-forwards-per-uid: streams to sandboxes' ports\n"
               "(OpenPort) one user may hold open at once (default 64, at most 1024; each holds\n"
               "a connection; a sandbox takes at most 256). --socket-group: the socket's group\n"
               "(a name or gid), whose members may connect; the socket's directory becomes\n"
               "searchable for it when it is sbxd's own (ignored with socket activation: use\n"
               "SocketGroup=).\n"
               "A sandbox runs at most --max-commands commands at once (default 16, at most\n"
               "4096), a user --max-commands-per-uid over all sandboxes (default 1024); a command\n"
               "over either cap waits for a slot in its sandbox's queue, at most --max-queued in a\n"
               "sandbox (default 64; 0: no queue) and --max-queued-total over the daemon (default\n"
               "1024), of which one user holds at most --max-queued-per-uid (default 256): past\n"
               "them it is refused. It waits at most --queue-timeout when the request\n"
               "says nothing (default 60 s; 0: never wait). A command's timeout and its wait\n"
               "for a slot may be at most --max-command-timeout (default 86400 s): more is\n"
               "refused.\n"
               "--default-disk: the size of /workspace of a sandbox whose policy sets no\n"
               "disk_bytes (e.g. 2G; default none), --default-disk-inodes its files (default:\n"
               "what the filesystem gives), --max-disk the largest a policy may ask (default\n"
               "1T, at most 16T; both whole 4K blocks). Enforced by the strongest means of the\n"
               "host (--disk-via auto): a project quota, a filesystem image per sandbox (root),\n"
               "or a tmpfs (memory). A limit larger than the space free on the state directory's\n"
               "filesystem is refused unless --disk-overcommit (thin provisioning: the images\n"
               "then may fill that filesystem before their limits).\n"
               "One user owns at most --max-sandboxes-per-uid sandboxes (default a quarter of\n"
               "--max-sandboxes). The daemon holds at most --max-buffered of memory for its\n"
               "clients (default 2G: the output commands keep, ended background commands'\n"
               "results, stdin not yet taken, requests partly received), one user at most\n"
               "--max-buffered-per-uid of it (default a quarter; at least twice\n"
               "--max-frame-bytes). Past it a command's kept output is cut to what it has\n"
               "(the tail is kept, and the result says so) and a request is refused\n"
               "RESOURCE_EXHAUSTED. A request must arrive whole within --frame-timeout of its\n"
               "first byte (default 60 s), or its connection is closed.\n"
               "A sandbox may open 16 ptys at once, reserved from its owner's --max-ptys-per-uid\n"
               "(default a quarter of --max-ptys) and from --max-ptys (default half of\n"
               "kernel.pty.max less kernel.pty.reserve, read at start): one created when less is\n"
               "left gets what is left, maybe none (its warnings say which bound); 0 to 1048576.\n"
               "--daemon-memory-max and --daemon-tasks-max bound the daemon itself in a cgroup\n"
               "of its own, apart from its sandboxes' (default none; sbxd.service sets both).\n"
               "As root, sandboxes run as uids of a range of 65536 reserved for this daemon\n"
               "among the root sbxd of the host (in /var/lib/sbxd-uids, recorded in the state\n"
               "directory and kept at every start): the first free one from 2100000000, or\n"
               "--uid-base N (N to N+65535, N from 65536 to 4294901759), refused when it\n"
               "overlaps another daemon's.\n"
               "The allowlist proxies hold at most the open-file limit less a reserve (a\n"
               "quarter, at least 1024) in descriptors, two per connection; one user's\n"
               "sandboxes at most --max-proxy-fds-per-uid of them (default a quarter): past\n"
               "it a connection is answered 503. One user's proxies look up at most\n"
               "--max-lookups-per-uid names at once (default a quarter of libuv's threads for\n"
               "slow work, 2 of 8); the others wait their turn. Names in /etc/hosts are\n"
               "answered without a lookup.\n";
}

/* Flags whose value is a number in [min, max]. */
static const struct {
        const char *name;
        size_t offset; /* of the uint32_t in struct config */
        uint32_t min, max;
} u32_flags[] = {
        {"--max-sandboxes", offsetof(struct config, max_sandboxes), 1, 100000},
        {"--max-commands", offsetof(struct config, max_commands_per_sandbox), 1, 4096},
        {"--max-sandboxes-per-uid", offsetof(struct config, max_sandboxes_per_uid_flag), 1, 100000},
        {"--max-commands-per-uid", offsetof(struct config, max_commands_per_uid), 1, 1000000},
        {"--max-queued", offsetof(struct config, max_queued_per_sandbox), 0,
         SBX_MAX_QUEUED_PER_SANDBOX},
        {"--max-queued-total", offsetof(struct config, max_queued_total), 0, SBX_MAX_QUEUED_TOTAL},
        {"--max-queued-per-uid", offsetof(struct config, max_queued_per_uid), 0,
         SBX_MAX_QUEUED_TOTAL},
        {"--max-connections-per-uid", offsetof(struct config, max_connections_per_uid), 1,
         SBX_MAX_CONNECTIONS},
        {"--max-forwards-per-uid", offsetof(struct config, max_forwards_per_uid), 1,
         SBX_MAX_CONNECTIONS},
        {"--max-processes", offsetof(struct config, max_processes), 0, SBX_MAX_PROCESSES},
        {"--max-cpu-percent", offsetof(struct config, max_cpu_percent), 1, SBX_MAX_CPU_PERCENT},
        {"--warm", offsetof(struct config, warm), 0, SBX_MAX_WARM_SANDBOXES},
        {"--spares", offsetof(struct config, spares), 0, SBX_MAX_SPARES},
        {"--retention-days", offsetof(struct config, retention_days), 0, 100000},
        {"--daemon-tasks-max", offsetof(struct config, daemon_tasks_max), 0, 4194304},
        {"--max-ptys", offsetof(struct config, max_ptys), 0, CONFIG_MAX_PTYS},
        {"--max-ptys-per-uid", offsetof(struct config, max_ptys_per_uid_flag), 0, CONFIG_MAX_PTYS},
        {"--max-frame-bytes", offsetof(struct config, max_frame_bytes), SBX_MIN_MAX_FRAME_BYTES,
         1024u * 1024u * 1024u},
        {"--uid-base", offsetof(struct config, uid_base), SBX_UID_BASE_MIN, SBX_UID_BASE_MAX},
        {"--max-proxy-fds-per-uid", offsetof(struct config, max_proxy_fds_per_uid),
         EGRESS_FDS_PER_CONNECTION, CONFIG_MAX_PROXY_FDS},
        {"--max-lookups-per-uid", offsetof(struct config, max_lookups_per_uid), 1,
         EGRESS_UV_THREADS_MAX},
        {"--max-image-entries", offsetof(struct config, max_image_entries),
         CONFIG_MIN_MAX_IMAGE_ENTRIES, CONFIG_MAX_MAX_IMAGE_ENTRIES},
};

/* Flags whose value is a duration in seconds (config_parse_seconds), under their names
 * and the older ones they replaced. */
static const struct {
        const char *name;
        size_t offset; /* of the uint64_t milliseconds in struct config */
} seconds_flags[] = {
        {"--default-sandbox-timeout", offsetof(struct config, default_sandbox_timeout_ms)},
        {"--default-timeout", offsetof(struct config, default_sandbox_timeout_ms)},
        {"--default-idle-timeout", offsetof(struct config, default_idle_timeout_ms)},
        {"--max-sandbox-timeout", offsetof(struct config, max_sandbox_lifetime_ms)},
        {"--max-lifetime", offsetof(struct config, max_sandbox_lifetime_ms)},
        {"--max-command-timeout", offsetof(struct config, max_command_timeout_ms)},
        {"--queue-timeout", offsetof(struct config, queue_timeout_ms)},
        {"--frame-timeout", offsetof(struct config, frame_timeout_ms)},
};

/* Flags whose value is a size (disk_parse_size): from min to max bytes, a whole number
 * of step bytes (what the limit's mechanism counts in; 0: the page size). */
static const struct {
        const char *name;
        size_t offset; /* of the uint64_t in struct config */
        uint64_t min, max, step;
        const char *range; /* min and max as the message says them */
} size_flags[] = {
        {"--default-disk", offsetof(struct config, default_disk_bytes), DISK_MIN_BYTES,
         DISK_MAX_BYTES, 4096, "1M to 16T"},
        {"--max-disk", offsetof(struct config, max_disk_bytes), DISK_MIN_BYTES, DISK_MAX_BYTES,
         4096, "1M to 16T"},
        {"--max-memory", offsetof(struct config, max_memory_bytes), SBX_MIN_MEMORY_BYTES,
         SBX_MAX_MEMORY_BYTES, 0, "4M to 1024T"},
        {"--max-tmp", offsetof(struct config, max_tmp_bytes), SBX_MIN_TMP_BYTES,
         SBX_MAX_MEMORY_BYTES, 0, "64K to 1024T"},
        {"--max-image-size", offsetof(struct config, max_image_bytes), 1u << 20,
         DISK_MAX_BYTES, 1, "1M to 16T"},
        {"--image-cache-size", offsetof(struct config, image_cache_bytes), 1u << 20,
         DISK_MAX_BYTES, 1, "1M to 16T"},
        {"--max-snapshot-bytes-per-uid", offsetof(struct config, max_snapshot_bytes_per_uid),
         1u << 20, DISK_MAX_BYTES, 1, "1M to 16T"},
};

/* The size flag name with its value v. Returns as apply_flag does; -ENOENT when name is
 * none of them. */
static int apply_size_flag(struct config *cfg, const char *name, const char *v, char *err,
                           size_t errlen) {
        long page = sysconf(_SC_PAGESIZE);
        uint64_t n;
        size_t i;

        for (i = 0; i < sizeof(size_flags) / sizeof(size_flags[0]); i++) {
                uint64_t step = size_flags[i].step ? size_flags[i].step
                                                   : (page > 0 ? (uint64_t)page : 4096);
                if (strcmp(name, size_flags[i].name) != 0)
                        continue;
                if (disk_parse_size(v, &n) < 0 || n < size_flags[i].min || n > size_flags[i].max ||
                    n % step) {
                        snprintf(err, errlen,
                                 "%s needs a size from %s (e.g. 2G) that is a whole number of "
                                 "%llu-byte blocks, not '%s'",
                                 name, size_flags[i].range, (unsigned long long)step, v);
                        return -EINVAL;
                }
                *(uint64_t *)(void *)((char *)cfg + size_flags[i].offset) = n;
                return 0;
        }
        return -ENOENT;
}

/* --disk-via and --default-disk-inodes (disk.h's bounds). Returns as apply_flag does;
 * -ENOENT when name is none of them. */
static int apply_disk_flag(struct config *cfg, const char *name, const char *v, char *err,
                           size_t errlen) {
        uint64_t n;
        int r = apply_size_flag(cfg, name, v, err, errlen);

        if (r != -ENOENT)
                return r;
        if (strcmp(name, "--daemon-memory-max") == 0) {
                if (strcmp(v, "0") != 0 &&
                    (disk_parse_size(v, &n) < 0 || n < CONFIG_MIN_DAEMON_MEMORY_BYTES)) {
                        snprintf(err, errlen,
                                 "--daemon-memory-max needs a size of at least 64M (e.g. 4G), or "
                                 "0 for none, not '%s'",
                                 v);
                        return -EINVAL;
                }
                cfg->daemon_memory_max = strcmp(v, "0") == 0 ? 0 : n;
                return 0;
        }
        if (strcmp(name, "--max-buffered") == 0 || strcmp(name, "--max-buffered-per-uid") == 0) {
                if (disk_parse_size(v, &n) < 0 || n < CONFIG_MIN_BUFFERED_BYTES ||
                    n > CONFIG_MAX_BUFFERED_BYTES) {
                        snprintf(err, errlen,
                                 "%s needs a size from 16M to 1T (e.g. 512M), not '%s'", name, v);
                        return -EINVAL;
                }
                *(name[14] == '-' ? &cfg->max_buffered_per_uid_flag : &cfg->max_buffered_bytes) = n;
                return 0;
        }
        if (strcmp(name, "--disk-via") == 0) {
                static const char *const names[] = {"auto", "quota", "image", "tmpfs"};
                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                        if (strcmp(v, names[i]) == 0) {
                                cfg->disk_via = (int)i; /* enum disk_mech's order (disk.h) */
                                return 0;
                        }
                snprintf(err, errlen, "--disk-via needs auto, quota, image or tmpfs");
                return -EINVAL;
        }
        if (strcmp(name, "--default-disk-inodes") == 0) {
                char *end;
                errno = 0;
                n = strtoull(v, &end, 10);
                if (!isdigit((unsigned char)v[0]) || errno || *end || n < DISK_MIN_INODES ||
                    n > DISK_MAX_INODES) {
                        snprintf(err, errlen,
                                 "--default-disk-inodes needs a number from 16 to 4294967296");
                        return -EINVAL;
                }
                cfg->default_disk_inodes = n;
                return 0;
        }
        return -ENOENT;
}

/* --warm-image REF=N (repeatable; a REF once): N from 1 to SBX_MAX_WARM_SANDBOXES, all
 * of them together at most that too. 0, -EINVAL with err, or -ENOMEM. */
static int add_warm_image(struct config *cfg, const char *v, char *err, size_t errlen) {
        const char *eq = strrchr(v, '=');
        uint32_t n, total = 0, i;
        size_t len = eq ? (size_t)(eq - v) : 0;
        char *ref;

        if (!eq || len == 0 || len > SBX_IMAGE_NAME_MAX_BYTES ||
            parse_u32(eq + 1, 1, SBX_MAX_WARM_SANDBOXES, &n) < 0) {
                snprintf(err, errlen, "--warm-image needs REF=N: an image's name and a count "
                                      "from 1 to %u", SBX_MAX_WARM_SANDBOXES);
                return -EINVAL;
        }
        if (strncmp(v, "dir:", 4) == 0) {
                snprintf(err, errlen, "--warm-image: a dir: tree is not an image of the store");
                return -EINVAL;
        }
        for (i = 0; i < cfg->n_warm_images; i++) {
                total += cfg->warm_images[i].n;
                if (strlen(cfg->warm_images[i].ref) == len &&
                    memcmp(cfg->warm_images[i].ref, v, len) == 0) {
                        snprintf(err, errlen, "--warm-image %.*s is given twice", (int)len, v);
                        return -EINVAL;
                }
        }
        if (cfg->n_warm_images >= CONFIG_MAX_WARM_IMAGES || total + n > SBX_MAX_WARM_SANDBOXES) {
                snprintf(err, errlen, "--warm-image: at most %u images and %u sandboxes in all",
                         CONFIG_MAX_WARM_IMAGES, SBX_MAX_WARM_SANDBOXES);
                return -EINVAL;
        }
        if (!(ref = strndup(v, len)))
                return -ENOMEM;
        cfg->warm_images[cfg->n_warm_images].ref = ref;
        cfg->warm_images[cfg->n_warm_images++].n = n;
        return 0;
}

/* The flags with a value of their own kind: paths, a group, a choice, a level. Returns
 * as apply_flag does; -ENOENT when name is none of them. */
static int apply_special_flag(struct config *cfg, const char *name, const char *v, char *err,
                              size_t errlen) {
        if (strcmp(name, "--socket") == 0) {
                if (v[0] != '/' || strlen(v) >= 108) {
                        snprintf(err, errlen,
                                 "--socket needs an absolute path shorter than 108 bytes");
                        return -EINVAL;
                }
                return replace_str(&cfg->socket_path, v);
        }
        if (strcmp(name, "--state-dir") == 0) {
                if (v[0] != '/') {
                        snprintf(err, errlen, "--state-dir needs an absolute path");
                        return -EINVAL;
                }
                return replace_str(&cfg->state_dir, v);
        }
        if (strcmp(name, "--init") == 0)
                return replace_str(&cfg->init_path, v);
        if (strcmp(name, "--socket-group") == 0)
                return group_arg_valid(v) ? replace_str(&cfg->socket_group, v) : -EINVAL;
        if (strcmp(name, "--adopt-grace") == 0) {
                int r = config_parse_seconds(v, &cfg->adopt_grace_ms);
                return r == 0 && cfg->adopt_grace_ms > UINT32_MAX ? -EINVAL : r;
        }
        if (strcmp(name, "--command-cgroups") == 0) {
                if (strcmp(v, "auto") == 0)
                        cfg->command_cgroups = CONFIG_CGROUPS_AUTO;
                else if (strcmp(v, "on") == 0)
                        cfg->command_cgroups = CONFIG_CGROUPS_ON;
                else if (strcmp(v, "off") == 0)
                        cfg->command_cgroups = CONFIG_CGROUPS_OFF;
                else
                        return -EINVAL;
                return 0;
        }
        if (strcmp(name, "--log-level") == 0)
                return log_parse_level(v, &cfg->log_level);
        if (strcmp(name, "--warm-image") == 0)
                return add_warm_image(cfg, v, err, errlen);
        return apply_disk_flag(cfg, name, v, err, errlen);
}

/* Applies the flag name with its value v. Returns 0; -ENOENT for an unknown flag;
 * -ENOMEM; or -EINVAL for a bad value, with a reason in err when the flag has one of its
 * own (the caller says "bad value" otherwise). */
static int apply_flag(struct config *cfg, const char *name, const char *v, char *err,
                      size_t errlen) {
        size_t i;

        for (i = 0; i < sizeof(u32_flags) / sizeof(u32_flags[0]); i++)
                if (strcmp(name, u32_flags[i].name) == 0)
                        return parse_u32(v, u32_flags[i].min, u32_flags[i].max,
                                         (uint32_t *)((char *)cfg + u32_flags[i].offset));
        for (i = 0; i < sizeof(seconds_flags) / sizeof(seconds_flags[0]); i++)
                if (strcmp(name, seconds_flags[i].name) == 0)
                        return config_parse_seconds(
                                v, (uint64_t *)((char *)cfg + seconds_flags[i].offset));
        return apply_special_flag(cfg, name, v, err, errlen);
}

/* Splits argv[*i], "--name=value" or "--name" followed by its value in the next
 * argument (then *i moves past it), into name (namelen bytes) and *ret_value. Returns 0,
 * or -EINVAL with the reason in err when the value is missing. */
static int split_flag(int argc, char **argv, int *i, char *name, size_t namelen,
                      const char **ret_value, char *err, size_t errlen) {
        const char *a = argv[*i], *eq = strchr(a, '=');

        if (eq) {
                size_t n = (size_t)(eq - a);
                if (n >= namelen)
                        n = namelen - 1;
                memcpy(name, a, n);
                name[n] = '\0';
                *ret_value = eq + 1;
                return 0;
        }
        snprintf(name, namelen, "%s", a);
        if (*i + 1 >= argc) {
                snprintf(err, errlen, "option %s needs a value (see sbxd --help)", a);
                return -EINVAL;
        }
        *ret_value = argv[++*i];
        return 0;
}

/* The flags without a value. Returns 1 when a is one of them (applied), 0 otherwise. */
static int apply_switch(struct config *cfg, const char *a) {
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
                cfg->show_help = 1;
        else if (strcmp(a, "--version") == 0)
                cfg->show_version = 1;
        else if (strcmp(a, "--keep-sandboxes") == 0)
                cfg->keep_sandboxes = 1;
        else if (strcmp(a, "--disk-overcommit") == 0)
                cfg->disk_overcommit = 1;
        else
                return 0;
        return 1;
}

/* What no single flag can check: the relations of the timeouts and of the disk flags,
 * --max-processes's hole (1 and 2 are too few), and the per-uid shares of what was not
 * given. Returns 0 or -EINVAL. */
static int check_relations(struct config *cfg, char *err, size_t errlen) {
        if (cfg->default_sandbox_timeout_ms == 0 || cfg->max_sandbox_lifetime_ms == 0 ||
            cfg->max_command_timeout_ms == 0) {
                snprintf(err, errlen,
                         "--default-sandbox-timeout, --max-sandbox-timeout and "
                         "--max-command-timeout must be greater than zero (only "
                         "--default-idle-timeout may be 0: none)");
                return -EINVAL;
        }
        if (cfg->default_sandbox_timeout_ms > cfg->max_sandbox_lifetime_ms)
                cfg->default_sandbox_timeout_ms = cfg->max_sandbox_lifetime_ms;
        /* A request's queue_timeout_ms may be at most --max-command-timeout; so is the
         * default it gets when it gives none. */
        if (cfg->queue_timeout_ms > cfg->max_command_timeout_ms)
                cfg->queue_timeout_ms = cfg->max_command_timeout_ms;
        if (cfg->default_disk_bytes > cfg->max_disk_bytes) {
                snprintf(err, errlen, "--default-disk is above --max-disk");
                return -EINVAL;
        }
        if (cfg->max_processes && cfg->max_processes < SBX_MIN_PROCESSES) {
                snprintf(err, errlen,
                         "--max-processes must be 0 (no ceiling) or at least %u: sbx-init's two "
                         "processes and one command",
                         SBX_MIN_PROCESSES);
                return -EINVAL;
        }
        if (cfg->frame_timeout_ms == 0) {
                snprintf(err, errlen, "--frame-timeout must be greater than zero");
                return -EINVAL;
        }
        derive_shares(cfg);
        if (!cfg->max_snapshot_bytes_per_uid)
                cfg->max_snapshot_bytes_per_uid = cfg->image_cache_bytes / 4;
        if (cfg->max_buffered_per_uid > cfg->max_buffered_bytes) {
                snprintf(err, errlen, "--max-buffered-per-uid is above --max-buffered");
                return -EINVAL;
        }
        /* One request of the largest size must fit a user's share, with room to spare
         * for the output its commands keep meanwhile. */
        if (cfg->max_buffered_per_uid < 2ull * cfg->max_frame_bytes) {
                snprintf(err, errlen,
                         "--max-buffered-per-uid (%llu bytes) must be at least twice "
                         "--max-frame-bytes (%u): a user's largest request must fit",
                         (unsigned long long)cfg->max_buffered_per_uid, cfg->max_frame_bytes);
                return -EINVAL;
        }
        if (cfg->max_ptys_per_uid > cfg->max_ptys) {
                snprintf(err, errlen, "--max-ptys-per-uid (%u) is above --max-ptys (%u)",
                         cfg->max_ptys_per_uid, cfg->max_ptys);
                return -EINVAL;
        }
        if (cfg->daemon_tasks_max && cfg->daemon_tasks_max < CONFIG_MIN_DAEMON_TASKS) {
                snprintf(err, errlen,
                         "--daemon-tasks-max %u is too low: at least %u (the daemon's own "
                         "threads, libuv's thread pool and the processes it starts), or 0 for "
                         "no bound",
                         cfg->daemon_tasks_max, CONFIG_MIN_DAEMON_TASKS);
                return -EINVAL;
        }
        return 0;
}

int config_parse_args(struct config *cfg, int argc, char **argv, char *err, size_t errlen) {
        int i;

        for (i = 1; i < argc; i++) {
                const char *v = NULL;
                char name[64];
                int r;

                if (apply_switch(cfg, argv[i]))
                        continue;
                if (strncmp(argv[i], "--", 2) != 0) {
                        snprintf(err, errlen, "unexpected argument '%s' (see sbxd --help)",
                                 argv[i]);
                        return -EINVAL;
                }
                if (split_flag(argc, argv, &i, name, sizeof(name), &v, err, errlen) < 0)
                        return -EINVAL;
                if (errlen)
                        err[0] = '\0';
                r = apply_flag(cfg, name, v, err, errlen);
                if (r == -ENOENT) {
                        snprintf(err, errlen, "unknown option %s (see sbxd --help)", name);
                        return -EINVAL;
                }
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        if (errlen && !err[0])
                                snprintf(err, errlen, "bad value '%s' for %s (see sbxd --help)", v,
                                         name);
                        return -EINVAL;
                }
        }
        return check_relations(cfg, err, errlen);
}
