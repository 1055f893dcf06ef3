/* main.c: sbxd's entry point: the start-up checklist, the loop, and shutdown.
 *
 * main() reads as the list of its steps; each step logs its own failure. Start-up order:
 * flags; the process's limits; the state directory (and its lock); the records; the
 * sandbox uids (root: a range reserved host-wide, uidrange.h); the socket (bound or
 * adopted, not yet listening); cgroups, host features and the guard; the sandbox table
 * and the reconciliation of what a previous daemon left; then listening, last, so that
 * a client that can connect is served at once. SIGTERM/SIGINT stop accepting, end every
 * sandbox in order (recording why) or leave them for the next daemon
 * (--keep-sandboxes), write the last replies, and let the loop end; shut_down() then
 * takes down what was set up, in reverse order (the uid range last but the state
 * directory's lock: given up, and forgotten when no uid of it was ever given). */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "disk.h"
#include "hostfeat.h"
#include "images.h"
#include "layerns.h"
#include "guard.h"
#include "log.h"
#include "notify.h"
#include "sandbox.h"
#include "sbxd.h"
#include "server.h"
#include "store.h"
#include "trash.h"
#include "turn.h"
#include "uidrange.h"
#include "uidslot.h"

/* Everything main() sets up; shut_down() takes it down. */
static struct config cfg;
static struct sbxd D;
static struct server S;
static struct turn T;
static uv_loop_t loop;
static int loop_ready;
static int state_lock = -1;
static struct uidrange *uids;
static int uids_bound; /* the records bound uids of the range at start-up */
static gid_t socket_gid = (gid_t)-1;
static uv_signal_t sig_term, sig_int, sig_hup;
static uv_timer_t sweep_timer;

/* ---- the loop's own work ----------------------------------------------------------- */

/* Freed heap memory above this is given back at a sweep; less is kept for reuse. */
#define SWEEP_TRIM_ABOVE_BYTES (4u * 1024u * 1024u)

/* Every SBX_SWEEP_INTERVAL_MS: the sandbox table's housekeeping, and the heap memory
 * kept for reuse since (see prepare_process) given back when there is much of it (a
 * trim walks the heap: not every sweep of an idle daemon). */
static void on_sweep(uv_timer_t *t) {
        sbxtab_sweep(D.sandboxes);
        /* Without a guard no sandbox is made (its hidden paths would not be kept
         * covered): try again, as the inotify instances it lacked may be free now. */
        if (!D.guard && guard_start(&D, cfg.init_path) == 0)
                log_notice("the guard watches hidden and read-only paths again: sandboxes "
                           "can be made");
        if (mallinfo2().fordblks > SWEEP_TRIM_ABOVE_BYTES)
                (void)malloc_trim(0);
}

/* At shutdown, how long the deletion of ended sandboxes' workspaces may hold the exit
 * (trash_stop): rm of a workspace of 300,000 files takes seconds, tens on a busy host;
 * what is left is deleted at the next start. */
#define SBX_SHUTDOWN_TRASH_GRACE_MS 5000u

/* Every sandbox has ended (or been left running): the last replies go out, then every
 * handle closes, and the loop ends. */
static void on_shutdown_done(void *ud) {
        log_info("all sandboxes ended; closing the records");
        trash_stop(&D, SBX_SHUTDOWN_TRASH_GRACE_MS);
        guard_stop(&D);
        turn_flush(&T);
        server_close_all(&S);
        turn_stop(&T);
        uv_close((uv_handle_t *)&sweep_timer, NULL);
        uv_close((uv_handle_t *)&sig_term, NULL);
        uv_close((uv_handle_t *)&sig_int, NULL);
        uv_close((uv_handle_t *)&sig_hup, NULL);
        /* Closed, they gave the signals back their default action, which would end the
         * daemon by signal in what is left of its exit (the removers' grace): another
         * SIGTERM or SIGINT now is one more request to stop, already under way. */
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
}

static void on_hangup(uv_signal_t *h, int signum) {
        log_notice("SIGHUP ignored: sbxd has no configuration to reload (restart it to change "
                   "flags)");
}

static void on_signal(uv_signal_t *h, int signum) {
        if (D.shutting_down) {
                log_notice("signal %d again: still ending %u sandboxes", signum,
                           sbxtab_count(D.sandboxes));
                return;
        }
        D.shutting_down = 1;
        log_notice("signal %d: shutting down (ending %u sandboxes)", signum,
                   sbxtab_count(D.sandboxes));
        (void)notify_send("STOPPING=1\nSTATUS=ending sandboxes");
        server_stop_listening(&S);
        if (D.cfg->keep_sandboxes)
                sbxtab_detach_all(D.sandboxes, on_shutdown_done, NULL);
        else
                sbxtab_shutdown(D.sandboxes, on_shutdown_done, NULL);
}

/* ---- start-up steps: each returns 0, or -1 after logging why ----------------------- */

/* Step 1: the flags. Returns -1 to go on, or the exit status: 0 after --help or
 * --version, 1 out of memory, 2 a bad flag (said on stderr: there is no log yet). */
static int parse_flags(int argc, char **argv) {
        char err[512];

        if (config_init(&cfg, geteuid()) < 0) {
                fprintf(stderr, "sbxd: out of memory\n");
                return 1;
        }
        if (config_parse_args(&cfg, argc, argv, err, sizeof(err)) < 0) {
                fprintf(stderr, "sbxd: %s\n", err);
                config_free(&cfg);
                return 2;
        }
        if (cfg.show_help || cfg.show_version) {
                if (cfg.show_help)
                        fputs(config_usage(), stdout);
                else
                        printf("sbxd %s (protocol %u)\n", SBX_VERSION, SBX_PROTOCOL_VERSION);
                config_free(&cfg);
                return 0;
        }
        return -1;
}

/* Step 2: the process: log level, signals, allocator, umask, the fd limit; and the
 * context object. */
static void prepare_process(void) {
        struct rlimit rl;

        log_set_level(cfg.log_level);
        signal(SIGPIPE, SIG_IGN);
        /* Responses (output chunks of 64 KiB, file data up to a frame) are allocated and
         * freed at a high rate: keep freed heap memory for reuse instead of returning it
         * to the kernel and faulting it in again for the next one: a 16 MiB ReadFile
         * buffer from mmap faulted its 4096 pages in on every read (64 MiB read and
         * written three times: 106,000 page faults in the daemon, now 17,000; ReadFile
         * 550 -> 780 MiB/s). The periodic sweep gives back what an idle daemon kept
         * (malloc_trim). */
        mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
        /* libuv's thread pool (4 threads by default) gives name lookups, which wait as
         * long as a resolver does, at most half of it: the allowlist proxies of several
         * sandboxes looking up names that never answer (one lookup at a time each,
         * egress.c) would hold those two and keep every other proxy waiting. 16 threads
         * (created when first needed) give lookups 8. An administrator's setting stays. */
        setenv("UV_THREADPOOL_SIZE", "16", 0);
        umask(022);
        memset(&D, 0, sizeof(D));
        memset(&S, 0, sizeof(S));
        S.lock_fd = -1;
        /* Room for many sandboxes' pipes and sockets; commands get back the soft limit
         * we started with (unless their policy sets open_files). */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                D.nofile_soft = rl.rlim_cur;
                if (rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;
                        (void)setrlimit(RLIMIT_NOFILE, &rl);
                }
        }
        D.cfg = &cfg;
        D.euid = geteuid();
        D.egid = getegid();
}

/* Step 3: what the flags name on this host: --socket-group's gid and the init helper. */
static int check_flags(void) {
        char why[1024];
        int r;

        if (cfg.socket_group) {
                /* Looked up once, here: NSS may block, and never runs in the loop. */
                r = config_resolve_group(cfg.socket_group, &socket_gid);
                if (r < 0) {
                        log_err("--socket-group %s: %s", cfg.socket_group,
                                r == -ENOENT ? "no such group (pass a group name or a gid)"
                                             : strerror(-r));
                        return -1;
                }
        }
        if (cfg.uid_base && cfg.uid_base + (uint64_t)SBX_UID_COUNT > SBX_IMAGE_UID_BASE) {
                log_err("--uid-base: %u-%u would overlap the ids of image sandboxes (from %u); "
                        "give a base from %u to %u",
                        (unsigned)cfg.uid_base, (unsigned)(cfg.uid_base + SBX_UID_COUNT - 1),
                        SBX_IMAGE_UID_BASE, SBX_UID_BASE_MIN, SBX_IMAGE_UID_BASE - SBX_UID_COUNT);
                return -1;
        }
        if (cfg.uid_base && D.euid != 0) {
                log_err("--uid-base: a rootless sbxd runs sandboxes as its own user and has no "
                        "uid range; run it as root, or leave the flag out");
                return -1;
        }
        if (access(cfg.init_path, X_OK) < 0) {
                config_explain_init(&cfg, why, sizeof(why));
                log_err("%s", why);
                return -1;
        }
        return 0;
}

/* Step 4: creates the state directory and takes its lock (kept in state_lock). */
static int prepare_state_dir(void) {
        char *path = NULL;
        int r = server_mkdir_p(cfg.state_dir, 0700);

        if (r == 0) {
                if (asprintf(&path, "%s/sandboxes", cfg.state_dir) < 0)
                        return -1;
                r = server_mkdir_p(path, 0711);
                free(path);
        }
        if (r < 0) {
                log_err("cannot create the state directory %s: %s (pass --state-dir DIR)",
                        cfg.state_dir, strerror(-r));
                return -1;
        }
        if (asprintf(&path, "%s/lock", cfg.state_dir) < 0)
                return -1;
        /* One daemon per state directory: held until exit. */
        r = server_lock_file(path);
        free(path);
        if (r < 0)
                log_err("cannot lock the state directory %s: %s", cfg.state_dir,
                        r == -EADDRINUSE ? "another sbxd uses it; stop it or pass --state-dir"
                                         : strerror(-r));
        if (r < 0)
                return -1;
        state_lock = r;
        /* Where disk images are mounted, as the kernel names it (init.proto). */
        if (asprintf(&path, "%s/sandboxes", cfg.state_dir) >= 0) {
                D.sandboxes_dir = realpath(path, NULL);
                free(path);
        }
        return 0;
}

/* Step 8a: the image store (images.h), repaired of what a crash left; after the host's
 * features, whose subordinate ids its layers are unpacked with (layerns.h). */
static int open_images(void) {
        char err[1024];
        int r = images_open(&D, cfg.state_dir, err, sizeof(err));

        if (r < 0) {
                log_err("cannot open the image store: %s", err);
                return -1;
        }
        if (imagestore_repaired(D.images))
                log_notice("image store: %u unfinished or unused entries removed",
                           imagestore_repaired(D.images));
        log_info("image store: its filesystem %s",
                 imagestore_shares_blocks(D.images)
                         ? "shares blocks (reflink): snapshots clone what changed"
                         : "does not share blocks: snapshots copy what changed");
        return 0;
}

/* Step 5: the records and the loop. */
static int open_store(void) {
        char *db_path;
        int r;

        if (asprintf(&db_path, "%s/sbxd.db", cfg.state_dir) < 0)
                return -1;
        r = store_open(db_path, &D.store);
        if (r < 0)
                log_err("cannot open the records %s: %s", db_path,
                        r == -EPROTO ? "written by a newer sbxd; upgrade sbxd" : strerror(-r));
        free(db_path);
        if (r < 0 || uv_loop_init(&loop) < 0)
                return -1;
        loop_ready = 1;
        D.loop = &loop;
        return 0;
}

/* Step 5b (root): the sandbox uids, reserved host-wide (uidrange.h): the range this
 * state directory's records bind or recorded, --uid-base's, or the first free one. */
static int reserve_uids(void) {
        struct uidrange_want w = {.dir = UIDRANGE_DIR,
                                  .flag_base = cfg.uid_base,
                                  .legacy_state_dir = "/var/lib/sbxd"};
        char err[1024], *state = NULL;
        int r;

        if (D.euid != 0)
                return 0;
        r = uidslot_bound_span(D.store, &w.bound_lo, &w.bound_hi);
        if (r < 0) {
                log_err("cannot read the owners of sandbox uids: %s", store_last_error(D.store));
                return -1;
        }
        uids_bound = w.bound_lo != 0;
        state = realpath(cfg.state_dir, NULL);
        w.state_dir = state ? state : cfg.state_dir;
        r = uidrange_reserve(&w, &uids, err, sizeof(err));
        free(state);
        if (r < 0) {
                log_err("cannot reserve the sandbox uids: %s", err);
                return -1;
        }
        D.uids = uids;
        log_info("sandbox uids %u-%u, reserved in %s (%s)", (unsigned)uids->base,
                 (unsigned)(uids->base + SBX_UID_COUNT - 1), uids->path,
                 uidrange_origin_name(uids->origin));
        return 0;
}

/* The socket passed by socket activation (fd): its path becomes cfg.socket_path. */
static int adopt_socket(int fd) {
        const char *path = NULL;
        int r = server_adopt(&S, &D, fd, &path);

        if (r < 0)
                return r;
        if (strcmp(path, cfg.socket_path) != 0) {
                free(cfg.socket_path);
                cfg.socket_path = strdup(path);
                if (!cfg.socket_path)
                        return -ENOMEM;
        }
        if (cfg.socket_group)
                log_notice("--socket-group %s ignored: the socket came from the service "
                           "manager, which sets its group (SocketGroup= in sbxd.socket)",
                           cfg.socket_group);
        return 0;
}

/* Step 6: the socket, bound (or adopted) but not listening yet. */
static int take_socket(void) {
        int r = notify_listen_fd();

        if (r < 0) {
                log_err("the socket passed by the service manager is not a listening Unix stream "
                        "socket: %s",
                        strerror(-r));
                return -1;
        }
        if (r > 0) {
                r = adopt_socket(r);
        } else {
                r = server_bind(&S, &D, cfg.socket_path);
                if (r == 0 && cfg.socket_group && (r = server_set_group(&S, socket_gid)) < 0) {
                        log_err("cannot give the socket %s to group %s: %s", cfg.socket_path,
                                cfg.socket_group, strerror(-r));
                        return -1;
                }
        }
        if (r == -EADDRINUSE)
                log_err("another sbxd is already serving %s; stop it first or pass --socket",
                        cfg.socket_path);
        else if (r < 0)
                log_err("cannot listen on %s: %s", cfg.socket_path, strerror(-r));
        if (r < 0)
                return -1;
        D.server = &S;
        return 0;
}

/* A name for this state directory's cgroups: stable across restarts, distinct between
 * daemons with different state directories. */
static void cgroup_base_name(const char *state_dir, char *out, size_t len) {
        unsigned h = 2166136261u;
        const char *s;
        for (s = state_dir; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        snprintf(out, len, "sbxd-%08x", h);
}

/* What enforces a sandbox's disk limit on this host. */
static int examine_disk(void) {
        struct disk_host dh;

        disk_detect(D.features.rootless, cfg.state_dir, &dh);
        D.features.disk_mech = (int)disk_choose(&dh);
        if (cfg.disk_via != DISK_MECH_NONE && cfg.disk_via != D.features.disk_mech) {
                if (!disk_allows(&dh, (enum disk_mech)cfg.disk_via)) {
                        log_err("--disk-via: this host cannot (%s, %s, %s)",
                                dh.rootless ? "rootless" : "root",
                                dh.prjquota ? "project quotas" : "no project quotas",
                                dh.loop && dh.mkfs ? "loop devices and mke2fs"
                                                   : "no loop devices or mke2fs");
                        return -1;
                }
                D.features.disk_mech = cfg.disk_via;
        }
        if (D.features.disk_mech == DISK_MECH_QUOTA)
                log_info("disk limits: a project quota per sandbox on %s", cfg.state_dir);
        else if (D.features.disk_mech == DISK_MECH_TMPFS)
                log_info("disk limits: a tmpfs per sandbox, memory-backed (%s)",
                         cfg.disk_via == DISK_MECH_TMPFS ? "--disk-via tmpfs"
                         : dh.rootless                   ? "rootless"
                         : !dh.loop                      ? "no loop devices"
                                                         : "no mke2fs");
        else
                log_debug("disk limits: an ext4 image per sandbox on a loop device");
        return 0;
}

static void pool_noop(uv_work_t *w) {
}

static void pool_started(uv_work_t *w, int status) {
}

/* Starts libuv's thread pool now (its threads are made all at once, at the first work
 * queued): made later, under --daemon-tasks-max with the daemon's tasks at the bound,
 * libuv would abort the daemon when it cannot make them. */
static void start_thread_pool(void) {
        static uv_work_t w;

        /* Refused only for a NULL work callback. */
        (void)uv_queue_work(&loop, &w, pool_noop, pool_started);
}

/* --daemon-memory-max and --daemon-tasks-max: the daemon in a cgroup of its own, apart
 * from its sandboxes' (which a bound on the service's own cgroup would cap too). A
 * bound that cannot be set is said, and the daemon serves without it. */
static void limit_self(void) {
        int r, i;

        if (!cfg.daemon_memory_max && !cfg.daemon_tasks_max)
                return;
        r = cgroup_env_limit_self(D.cgroups, getpid(), cfg.daemon_memory_max,
                                  cfg.daemon_tasks_max);
        for (i = 0; i < CG_N; i++)
                if (D.cgroups->self[i])
                        log_debug("cgroups under %s", D.cgroups->self[i]);
        if (r < 0)
                log_warning("cannot bound the daemon itself (--daemon-memory-max, "
                            "--daemon-tasks-max): %s; it runs without",
                            r == -ENOENT ? "no delegated memory or pids cgroup controller"
                                         : strerror(-r));
        else
                log_info("the daemon itself: memory at most %llu bytes, tasks at most %u (0: "
                         "none)",
                         (unsigned long long)cfg.daemon_memory_max, cfg.daemon_tasks_max);
}

/* Step 7: the host: our cgroups, what the kernel allows, the guard over hidden paths. */
static int examine_host(void) {
        const char *cg_root = getenv("SBXD_CGROUP_ROOT"), *cg_self = getenv("SBXD_CGROUP_SELF");
        char base[32];
        int r;

        cgroup_base_name(cfg.state_dir, base, sizeof(base));
        /* Where cgroups are mounted and which are ours: the kernel's answer, unless a
         * test points the daemon at another mount (the v2 tests on a hybrid host). */
        r = cgroup_env_new(cg_root ? cg_root : "/sys/fs/cgroup",
                           cg_self ? cg_self : "/proc/self/cgroup", base, getpid(), &D.cgroups);
        if (r < 0) {
                log_err("cannot examine cgroups: %s", strerror(-r));
                return -1;
        }
        for (int i = 0; i < CG_N; i++)
                if (D.cgroups->base[i])
                        log_debug("cgroups under %s", D.cgroups->base[i]);
        if (D.cgroups->v2_base)
                log_debug("cgroups under %s", D.cgroups->v2_base);
        start_thread_pool();
        limit_self();
        hostfeat_detect(D.euid, cgroup_version_name(D.cgroups->version), &D.features);
        if (D.features.rootless)
                log_info("subordinate ids: uids %u (%u), gids %u (%u), newuidmap and newgidmap %s",
                         (unsigned)D.features.subuid_start, (unsigned)D.features.subuid_count,
                         (unsigned)D.features.subgid, (unsigned)D.features.subgid_count,
                         D.features.idmap_helpers ? "installed" : "missing");
        if (examine_disk() < 0)
                return -1;
        r = guard_start(&D, cfg.init_path);
        if (r < 0)
                log_warning("cannot watch hidden and read-only paths for changes on the host "
                            "(%s): no sandbox is made until it can (tried again every %u s); "
                            "re-adopted ones run on, and what the host replaces or creates "
                            "there is not covered again",
                            strerror(-r), SBX_SWEEP_INTERVAL_MS / 1000u);
        /* A cgroup per command lets a timeout kill everything the command started, but
         * on cgroup v1 every move into one waits for an RCU grace period (milliseconds
         * when the system is quiet, cgroup_threadgroup_rwsem) and every removal of a
         * memory cgroup reparents its pages: auto keeps it to cgroup v2. */
        D.command_cgroups =
                cfg.command_cgroups == CONFIG_CGROUPS_ON ||
                (cfg.command_cgroups == CONFIG_CGROUPS_AUTO && D.cgroups->version == CGROUP_V2);
        return 0;
}

/* Step 8: the sandbox table, and what a previous daemon left. Reconciled after taking
 * the socket's lock (so a second daemon never touches the first one's sandboxes) and
 * before listening (so that every client, from the first, sees reconciled records). */
static int recover(void) {
        int r;

        if (open_images() < 0 || sbxtab_new(&D, &D.sandboxes) < 0)
                return -1;
        trash_empty(&D);
        r = recover_sandboxes(&D);
        if (r < 0)
                log_err("cannot reconcile the records: %s", strerror(-r));
        if (!D.features.rootless) /* images an earlier daemon (any --disk-via) left */
                disk_sweep(cfg.state_dir);
        return 0;
}

/* Step 9: listening, and the loop's own work: the end of each turn, the sweep, the warm
 * pool, the signals. Tells the service manager it is ready. */
static int listen_and_start(void) {
        int r;

        /* Taken before listening: a client that can connect may signal sbxd at once (a
         * SIGTERM between listen and here used to kill it by the default action, while
         * the warm pool was being started). Handled once the loop runs. */
        uv_signal_init(&loop, &sig_term);
        uv_signal_init(&loop, &sig_int);
        uv_signal_start(&sig_term, on_signal, SIGTERM);
        uv_signal_start(&sig_int, on_signal, SIGINT);
        uv_signal_init(&loop, &sig_hup);
        uv_signal_start(&sig_hup, on_hangup, SIGHUP);
        r = server_listen(&S);
        if (r < 0) {
                log_err("cannot listen on %s: %s", cfg.socket_path, uv_strerror(r));
                uv_close((uv_handle_t *)&sig_term, NULL);
                uv_close((uv_handle_t *)&sig_int, NULL);
                uv_close((uv_handle_t *)&sig_hup, NULL);
                return -1;
        }
        /* Commit before reply, at the end of every turn (turn.h). */
        turn_start(&T, &D);
        uv_timer_init(&loop, &sweep_timer);
        /* Unreferenced: the sweep alone never keeps the loop alive. */
        uv_unref((uv_handle_t *)&sweep_timer);
        uv_timer_start(&sweep_timer, on_sweep, SBX_SWEEP_INTERVAL_MS, SBX_SWEEP_INTERVAL_MS);
        sbxtab_sweep(D.sandboxes);
        sbxtab_warm_start(D.sandboxes);
        log_notice("sbxd %s listening on %s%s, state in %s (cgroup %s%s, %s, seccomp %s)",
                   SBX_VERSION, cfg.socket_path, S.activated ? " (socket-activated)" : "",
                   cfg.state_dir, D.features.cgroup_version,
                   D.command_cgroups ? " with a group per command" : "",
                   D.features.rootless ? "rootless" : "root", D.features.seccomp ? "yes" : "no");
        r = notify_send("READY=1\nSTATUS=serving");
        if (r < 0)
                log_warning("cannot notify the service manager: %s", strerror(-r));
        return 0;
}

/* ---- the end ----------------------------------------------------------------------- */

/* Takes down what was set up, in reverse order; served says whether the loop ran (a
 * socket bound but never served is closed and removed here). */
static void shut_down(int served) {
        int r;

        D.store = store_close(D.store);
        images_close(&D);
        if (!served && S.path) {
                /* Bound but never served: close and remove the socket (ours only). */
                if (S.listener.loop && !uv_is_closing((uv_handle_t *)&S.listener))
                        uv_close((uv_handle_t *)&S.listener, NULL);
                if (!S.activated)
                        unlink(S.path);
        }
        server_release(&S);
        free(S.path);
        /* A kept sandbox's ids are the range's: a uid slot, or an image's block, which a
         * daemon that adopts it finds again only on the same range. */
        if ((D.sandboxes && uidslot_any_given(sbxtab_uidslots(D.sandboxes))) ||
            D.image_blocks_taken)
                uids_bound = 1;
        sbxtab_free(D.sandboxes);
        if (D.cgroups) {
                cgroup_env_unlimit_self(D.cgroups, getpid());
                cgroup_env_remove_base(D.cgroups);
                cgroup_env_free(D.cgroups);
        }
        if (loop_ready) {
                uv_run(&loop, UV_RUN_DEFAULT); /* close callbacks of what failed */
                r = uv_loop_close(&loop);
                if (r < 0)
                        log_warning("loop closed with handles open: %s", uv_strerror(r));
        }
        uids = uidrange_release(uids, !uids_bound);
        D.uids = NULL;
        if (state_lock >= 0)
                close(state_lock);
        free(D.sandboxes_dir);
        config_free(&cfg);
}

int main(int argc, char **argv) {
        int status;

        /* The image store's helper in a namespace of subordinate ids (layerns.h). */
        if (argc >= 2 && strcmp(argv[1], "--layer-helper") == 0)
                return layerns_helper_main(argc, argv);
        status = parse_flags(argc, argv);
        if (status >= 0)
                return status;
        prepare_process();
        status = 1;
        if (check_flags() == 0 && prepare_state_dir() == 0 && open_store() == 0 &&
            reserve_uids() == 0 && take_socket() == 0 && examine_host() == 0 && recover() == 0 &&
            listen_and_start() == 0) {
                uv_run(&loop, UV_RUN_DEFAULT); /* until the signal's shutdown ends it */
                log_notice("stopped");
                status = 0;
        }
        shut_down(status == 0);
        return status;
}
