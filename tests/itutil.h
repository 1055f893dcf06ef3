/* itutil.h: helpers for integration tests that run a real sbxd.
 *
 * Each test case gets a base directory from an unchecked fixture (it_fixture_setup /
 * it_fixture_teardown, run by the Check runner process), so that everything a test
 * started is ended and removed even when the test fails: daemons are started with
 * PR_SET_PDEATHSIG so they get SIGTERM when the test process dies, and the teardown
 * waits for them (SIGKILL after a bound) before removing the directory. */
#ifndef SBX_ITUTIL_H
#define SBX_ITUTIL_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#include "frame.h"
#include "sbx.h"
#include "sbx.pb-c.h"

struct it_daemon {
        char dir[512];
        char sock[600];
        char state[600];
        char log[600];
        pid_t pid;
        uid_t uid; /* the user the daemon runs as */
        gid_t gid;
};

/* The build directory ($BUILD, default "build"). */
const char *it_build_dir(void);

/* Unchecked fixture: creates / removes the base directory of a test case. */
void it_fixture_setup(void);
void it_fixture_teardown(void);

/* The same, with the base directory under /var/tmp instead of /tmp: a sandbox sees the
 * host's /var/tmp (read-only) but has a /tmp of its own, so tests whose host paths must
 * be seen from inside (writable paths, the daemon's own directories) use this one. */
void it_fixture_setup_var(void);

/* The base directory of the current test case. */
const char *it_base_dir(void);

/* Removes the reservations of sandbox uid ranges that root daemons with a state
 * directory below base left in /var/lib/sbxd-uids (daemon/uidrange.h: a file per range
 * naming its daemon's state directory, kept while that directory records the range),
 * holding the directory's lock as a daemon does, and only those no daemon holds (a
 * daemon would remove them at its next start anyway). it_fixture_teardown does it for
 * the base directory before removing it. */
void it_remove_reservations(const char *base);

/* Starts sbxd on a fresh socket and state directory under the base directory with the
 * extra flags (NULL-terminated, may be NULL), and waits (10 s at most) until the socket
 * accepts. Fails the test when it does not come up. */
void it_daemon_start(struct it_daemon *d, const char *const *extra);

/* As it_daemon_start, but the daemon runs as uid/gid (rootless mode): its directory is
 * chowned to that user first. */
void it_daemon_start_as(struct it_daemon *d, uid_t uid, gid_t gid, const char *const *extra);

/* As it_daemon_start_as, with home as the daemon's $HOME (for a rootless daemon: the
 * home whose credentials protect_defaults hides). */
void it_daemon_start_home(struct it_daemon *d, uid_t uid, gid_t gid, const char *home,
                          const char *const *extra);

/* As it_daemon_start_as, with the supplementary groups groups[0..n_groups-1] (none
 * otherwise): a member of a root daemon's socket group running a rootless one. */
void it_daemon_start_groups(struct it_daemon *d, uid_t uid, gid_t gid, const gid_t *groups,
                            size_t n_groups, const char *const *extra);

/* As it_daemon_start_as, without waiting until the daemon listens: daemons started at
 * once (then it_daemon_wait_up each), or one that is to fail at start-up (then
 * it_daemon_exit_status). */
void it_daemon_spawn_as(struct it_daemon *d, uid_t uid, gid_t gid, const char *const *extra);

/* Waits (10 s at most) until d's socket accepts; fails the test, showing the log, when
 * the daemon exits first. */
void it_daemon_wait_up(struct it_daemon *d);

/* Waits (15 s at most) for d's daemon to exit by itself; returns its exit code, or
 * 256+N when killed by signal N. Fails the test when it does not exit. */
int it_daemon_exit_status(struct it_daemon *d);

/* Starts it again on the same socket and state (after a stop or kill). */
void it_daemon_restart(struct it_daemon *d, const char *const *extra);
/* As it_daemon_restart, without waiting until it listens (one that is to fail at
 * start-up: then it_daemon_exit_status). */
void it_daemon_respawn(struct it_daemon *d, const char *const *extra);

/* SIGTERM, then waits (20 s at most); returns the exit status from waitpid. */
int it_daemon_stop(struct it_daemon *d);

/* SIGKILL and reap. */
void it_daemon_kill(struct it_daemon *d);

/* Connects with libsbx (fails the test on error). */
sbx_client *it_connect(struct it_daemon *d);

/* The first uid of the sandbox uid range a root daemon's Hello names (its sandboxes run
 * as uids from there, SBX_UID_COUNT of them); fails the test when it names none. */
uint32_t it_sandbox_uid_first(const struct it_daemon *d);

/* Runs build/sbx with SBX_SOCKET set to d's socket, the given arguments
 * (NULL-terminated) and stdin_data (NULL: /dev/null). Stores the output (NUL-terminated,
 * freed by the caller) in *out and *err when not NULL. Returns the exit code, or 256+N
 * when killed by signal N. */
int it_sbx(struct it_daemon *d, const char *stdin_data, size_t stdin_len, char **out, char **err,
           const char *const *args);

/* ---- a raw protocol client, for tests that need frames libsbx would never send ---- */

/* Connects to d's socket (fails the test on error); returns the fd. */
int it_raw_connect(struct it_daemon *d);

/* Writes all n bytes (fails the test on error). */
void it_raw_write(int fd, const void *p, size_t n);

/* Frames and writes req. */
void it_raw_send(int fd, Sbx__V1__Request *req);

/* Reads the next response through r (at most timeout_ms); NULL at end of stream. Free
 * with sbx__v1__response__free_unpacked. */
Sbx__V1__Response *it_raw_read(int fd, struct frame_reader *r, int timeout_ms);

/* The integer the query sql yields on d's records (STATE/sbxd.db, opened read-only),
 * -1 when it yields no row. Fails the test when the query does not prepare. */
int it_db_int(const struct it_daemon *d, const char *sql);

/* 1 when the records pass PRAGMA integrity_check. */
int it_db_ok(const struct it_daemon *d);

/* Count of processes on the host whose command line contains needle (from /proc). */
int it_count_procs(const char *needle);

/* Count of the host's loop devices whose backing file is below dir (canonical, as the
 * kernel names files: realpath); the backing files of the first max of them into
 * files[] (each freed by the caller; files may be NULL with max 0). */
int it_loops_below(const char *dir, char **files, int max);

/* The number in field of /proc/PID/status ("VmRSS" in KiB, "Threads"...), or -1 when
 * pid or the field is not there. */
long it_proc_status(pid_t pid, const char *field);

/* How many descriptors pid has open (/proc/PID/fd), 0 when it is not there. */
int it_open_fds(pid_t pid);

/* How many lines of d's log (at debug level in tests) hold needle. */
int it_log_count(const struct it_daemon *d, const char *needle);

/* Waits up to 15 s for want such lines; returns how many there are then. */
int it_wait_log(const struct it_daemon *d, const char *needle, int want);

/* The host pid of a process whose command line starts with start and contains needle
 * (the last one /proc lists), or -1. */
pid_t it_find_proc(const char *start, const char *needle);

/* Milliseconds from a monotonic clock. */
double it_now_ms(void);

/* Creates a sandbox with default options plus an id (NULL: generated); returns its id
 * (freed by the caller). Fails the test on error. */
char *it_create(sbx_client *c, const char *id);

/* Runs argv (NULL-terminated) in sandbox id with timeout_ms; fails the test on a
 * transport or daemon error. */
struct sbx_result *it_exec(sbx_client *c, const char *id, uint64_t timeout_ms,
                           const char *const *argv);

/* As it_exec with a shell string. */
struct sbx_result *it_sh(sbx_client *c, const char *id, uint64_t timeout_ms, const char *shell);

/* ---- waiting for what a test needs, instead of sleeping on it ---- */

/* How many requests of kind body (a Sbx__V1__Request body case) d has taken up: its log
 * at debug level names each one as the daemon begins it, and the daemon goes through
 * with it (an attacher attached, a command queued or started) before it reads anything
 * else. A test that must act only once a request is in effect waits for it so. */
int it_requests_taken(const struct it_daemon *d, int body);

/* Waits up to 15 s until d has taken want requests of kind body; fails the test when it
 * has not. */
void it_wait_requests(const struct it_daemon *d, int body, int want);

/* "sleep SECONDS.PID" in out (len bytes): a command line of this test program alone, to
 * count on the host (it_count_procs) while other test programs, another build's or
 * another user's, run the same tests. Returns out. */
const char *it_sleeper(char *out, size_t len, int seconds);

/* Waits up to ms until no process (want 0), or at least want processes (a shell and its
 * child may both have it), have needle in their command line; returns the count then. */
int it_wait_procs(const char *needle, int want, int ms);

/* Waits up to 30 s until sandbox id runs running commands and has queued waiting for a
 * slot; fails the test when it does not. */
void it_wait_commands(sbx_client *c, const char *id, uint32_t running, uint32_t queued);

/* Puts the calling test (its own process) in a mount namespace of its own, with every
 * mount private: the daemons it starts afterwards see the mounts it makes, and none that
 * another program makes on the host meanwhile (another test run's disk images, say). A
 * daemon ends a warm sandbox or spare built before a mount of its host as stale, so a
 * test that counts or claims them must not see a neighbour's. Call before starting a
 * daemon; fails the test when it cannot. */
void it_private_mounts(void);

/* Runs this build's `sbx-init --reapply kind path` (kind "hide" or "read-only") in the
 * mount namespace of the sandbox process pid, as the guard runs it (the binary opened
 * first: paths mean the sandbox's view after setns), so that a test holds the window
 * before a path is covered as long as it needs. Returns its wait status. */
int it_reapply(pid_t pid, const char *kind, const char *path);

#endif
