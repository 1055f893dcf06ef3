/* util.h: small helpers shared by the init helper's modules.
 *
 * Logging to the daemon's stderr with syslog level prefixes, the description of a
 * failed setup step that ends up in Ready.error, the list of Ready.warnings, and a few
 * file and descriptor helpers. Nothing here allocates. Every function may be called
 * from stage 0 or PID 1. A command child (spawn.c), which shares PID 1's memory between
 * clone and execve, may call only the three that make nothing but system calls:
 * util_cloexec_from, util_cloexec_walk and util_join_cgroups. The others format text
 * (stdio, strerror) and are not for the child, which reports its failure through
 * struct spawn_failure instead. */
#ifndef SBX_INIT_UTIL_H
#define SBX_INIT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define UTIL_ERR_TEXT_BYTES 1024u
#define UTIL_MAX_WARNINGS   16u
#define UTIL_WARNING_BYTES  256u

/* What failed during setup: a positive errno and one line of text, "what failed:
 * strerror (hint)". Filled by util_fail(); err == 0 means nothing failed yet. */
struct util_err {
        int err;
        char text[UTIL_ERR_TEXT_BYTES];
};

/* Parts of the setup that could not be enforced; copied into Ready.warnings. */
struct util_warnings {
        size_t n;
        char text[UTIL_MAX_WARNINGS][UTIL_WARNING_BYTES];
};

/* The syslog priorities of util_log's lines (the numbers journald reads, as the
 * daemon's log.h). */
enum util_log_level {
        UTIL_LOG_ERR = 3,
        UTIL_LOG_WARNING = 4,
        UTIL_LOG_NOTICE = 5,
};

/* Names the sandbox in every later log line ("sbx=ID"). id may be NULL. */
void util_log_set_sandbox(const char *id);

/* Writes one line "<level>sbx-init sbx=ID: message" to stderr. Keeps errno. Only for
 * real failures and for the adoption steps (notices). Not in a command child. */
void util_log(enum util_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Records a failure in e: text becomes "<fmt...>: strerror(err)" followed by " (hint)"
 * when hint is not NULL. err is a positive or negative errno. Returns -|err| so that
 * callers can `return util_fail(...)`. */
int util_fail(struct util_err *e, int err, const char *hint, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Appends a warning (silently dropped past UTIL_MAX_WARNINGS). w may be NULL. */
void util_warn(struct util_warnings *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new user namespace with the id maps uid_map and gid_map (lines as the kernel's
 * /proc/PID/uid_map takes them), setgroups(2) allowed in it only with setgroups, for
 * idmapped mounts and for a sandbox's own namespace: a child makes it and is killed once we hold it. Needs
 * the privilege to write such maps (root, or maps of one's own ids) and a /proc that
 * shows the child. Returns the namespace's descriptor (O_CLOEXEC) or -errno. */
int util_make_userns(const char *uid_map, const char *gid_map, bool setgroups);

/* Writes the string data to the existing file path (O_WRONLY, no O_CREAT) with one
 * write(2). Returns 0 or -errno. */
int util_write_file(const char *path, const char *data);

/* Creates the directory path and any missing parents with mode. An existing directory
 * (or a symlink to one) is fine. Returns 0 or -errno. */
int util_mkdir_p(const char *path, mode_t mode);

/* Joins a and b with exactly one '/' between them into buf. Returns 0 or
 * -ENAMETOOLONG. */
int util_path_join(char *buf, size_t cap, const char *a, const char *b);

/* Sets FD_CLOEXEC on every descriptor >= from (close_range(2) CLOSE_RANGE_CLOEXEC, or a
 * walk of /proc/self/fd on kernels before 5.11). System calls only: a command child
 * calls it before execve. Returns 0 or -errno. */
int util_cloexec_from(int from);

/* util_cloexec_from's way before Linux 5.11: walks /proc/self/fd with getdents64 into
 * a stack buffer (no allocation; safe in a command child). Returns 0 or -errno. */
int util_cloexec_walk(int from);

/* Returns 1 when path is absolute, at most SBX_PATH_MAX_BYTES long and has no "."
 * or ".." component, else 0. */
int util_path_ok(const char *path);

/* Moves the calling process into the cgroups given as descriptors: v1 open
 * cgroup.procs files, v2 (v2 true) cgroup directories. Writing "0" to cgroup.procs
 * moves the writer itself (cgroups(7)). Allocates nothing (a command child calls it
 * between clone and execve). Returns 0 or -errno. */
int util_join_cgroups(const int *fds, size_t n, bool v2);

#endif
