/* files.h: the file operations of a sandbox (read, write, list, stat, mkdir, remove),
 * done by the daemon in the sandbox's view of the filesystem.
 *
 * Every path is resolved inside the sandbox's own root, exactly as a command there
 * would resolve it (a relative path is relative to /workspace), with the sandbox
 * user's credentials; a path the policy hides is "not found"; FIFOs, sockets and
 * devices are refused; nothing waits on anything the sandbox controls. Called by the
 * rpc layer on the event loop thread, for a sandbox it found in the table; of the sandbox
 * only its view (sandbox_view.h) is used. Owns nothing between calls but a cache of the
 * view's hiding mounts, kept in the view and freed with the sandbox. The two operations
 * whose cost grows with what the sandbox made (a listing, a recursive remove) are split
 * into a job whose middle step runs on any thread (the rpc layer runs it off the loop,
 * offload.h); the others are bounded by their request and run on the loop.
 *
 * Every function returns 0 on success or -errno, and on failure writes a one-line
 * message into err (errlen bytes) that names the path and the sandbox and says what to
 * do. The errors: -EINVAL a bad path or argument, or an object of the wrong type (a
 * directory to read, a FIFO, a device); -ENAMETOOLONG a path or name too long; -ENOENT
 * or -ENOTDIR not found (or hidden by the policy); -EEXIST exists; -EACCES/-EPERM the
 * sandbox user may not; -EROFS a read-only mount; -EFBIG too large to read without a
 * limit; -ENOTEMPTY a directory not empty; -ELOOP too many symlinks, or a /proc magic
 * link; -ESHUTDOWN the sandbox is not ready yet; -ENODEV the sandbox is ending;
 * -ECANCELED a job told to stop; -ENOSYS the kernel has no openat2(2); -ENOSPC,
 * -EDQUOT, -ENOMEM, -EAGAIN as the kernel says. */
#ifndef SBX_FILES_H
#define SBX_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

struct sandbox;

/* What a ReadFile answers. data is malloc()ed (NULL when len is 0); free it with
 * files_read_result_clear. */
struct files_read_result {
        uint8_t *data;
        size_t len;
        uint64_t size;        /* the file's size (at least next_offset) */
        uint64_t next_offset; /* offset + len */
        int eof;              /* next_offset reached the end of the file */
};

/* Reads at most limit bytes (0: no limit) of the regular file path from offset. Without
 * a limit, a file with more than max_read_bytes left from offset is refused (-EFBIG);
 * the amount read is never more than max_reply_bytes. On success *ret is filled. */
int files_read(struct sandbox *sb, const char *path, uint64_t offset, uint64_t limit,
               uint64_t max_read_bytes, uint64_t max_reply_bytes, struct files_read_result *ret,
               char *err, size_t errlen);

/* Frees the data of r and zeroes it. Accepts a zeroed r. */
void files_read_result_clear(struct files_read_result *r);

/* Flags of files_write. */
enum {
        FILES_WRITE_CREATE_PARENTS = 1u << 0, /* make missing parent directories (0755) */
        FILES_WRITE_APPEND = 1u << 1,         /* append instead of the atomic replace */
};

/* Writes len bytes of data to the regular file path: by default it replaces the file
 * atomically (a temporary file in the same directory, renamed over it) with permission
 * bits mode (at most 07777); with FILES_WRITE_APPEND it appends (mode applies when the
 * file is created). A final symlink is followed, inside the sandbox. The file is owned
 * by the sandbox user. *ret_size (may be NULL) is the file's size afterwards. */
int files_write(struct sandbox *sb, const char *path, const uint8_t *data, size_t len,
                uint32_t mode, unsigned flags, uint64_t *ret_size, char *err, size_t errlen);

/* A listing: entries sorted by name (bytewise), each allocated; free with
 * files_list_clear. */
struct files_list {
        Sbx__V1__FileInfo **entries;
        size_t n;
        int truncated; /* there were more entries than the limit, or than one reply holds */
};

/* Lists the directory path: at most limit entries (0: SBX_DEFAULT_LIST_LIMIT; capped at
 * SBX_MAX_LIST_LIMIT), the first ones by name, whose encoded size stays under
 * max_reply_bytes. Memory is bounded by the limit, not by the directory's size. Entries
 * hidden by the policy are left out; symlinks are not followed (their target is given).
 *
 * In three steps, so that a huge directory stalls nobody: files_list_open (on the loop:
 * resolves and opens path as the sandbox user; errors as the other file operations'),
 * files_list_run (any thread, once: reads and sorts the names and describes the first
 * ones, as the sandbox user, touching nothing but the job; stops early with -ECANCELED
 * when stop(ud) says non-zero, asked every 256 entries; closes the directory), and
 * files_list_finish (on the loop, sb still the sandbox the job was opened in: the
 * entries or the error, and frees the job). files_list_job_free drops a job that is not
 * finished. */
struct files_list_job;
int files_list_open(struct sandbox *sb, const char *path, uint32_t limit, uint64_t max_reply_bytes,
                    struct files_list_job **ret, char *err, size_t errlen);
void files_list_run(struct files_list_job *job, int (*stop)(void *ud), void *ud);
int files_list_finish(struct files_list_job *job, struct sandbox *sb, const char *path,
                      struct files_list *ret, char *err, size_t errlen);
void files_list_job_free(struct files_list_job *job);

/* Frees what files_list_finish allocated and zeroes l. Accepts a zeroed l. */
void files_list_clear(struct files_list *l);

/* Describes path like stat(1): a final symlink is followed, and symlink_target says where
 * it points; a symlink that cannot be followed inside the sandbox (dangling, looping,
 * through /proc, or to a hidden path) is described itself (type SYMLINK). On success
 * *ret is filled with allocated strings; free them with files_info_clear. */
int files_stat(struct sandbox *sb, const char *path, Sbx__V1__FileInfo *ret, char *err,
               size_t errlen);

/* Frees the strings of fi and zeroes it. */
void files_info_clear(Sbx__V1__FileInfo *fi);

/* Creates the directory path with permission bits mode (at most 07777, applied exactly).
 * With parents, missing parents are made (0755) and an existing directory is not an
 * error (mkdir -p). */
int files_mkdir(struct sandbox *sb, const char *path, uint32_t mode, int parents, char *err,
                size_t errlen);

/* Removes the file, symlink (not its target) or empty directory path; with recursive,
 * a whole tree, never following symlinks and never crossing into another mount. "/" and
 * "/workspace" are refused (-EINVAL).
 *
 * In three steps, so that a huge tree stalls nobody: files_remove_open (on the loop:
 * resolves path as the sandbox user and checks it; what costs the same however much
 * the sandbox made, a file, a symlink, an empty directory, is removed there and then,
 * and *ret stays NULL; a directory to remove recursively is opened as the job *ret),
 * files_remove_run (any thread, once: walks and removes the tree as the sandbox user,
 * touching nothing but the job; stops early, leaving the rest, with -ECANCELED when
 * stop(ud) says non-zero, asked before each entry; closes the job's descriptors), and
 * files_remove_finish (on the loop, sb still the sandbox the job was opened in: the
 * result with its message, and frees the job). files_remove_job_free drops a job that
 * is not finished. */
struct files_remove_job;
int files_remove_open(struct sandbox *sb, const char *path, int recursive,
                      struct files_remove_job **ret, char *err, size_t errlen);
void files_remove_run(struct files_remove_job *job, int (*stop)(void *ud), void *ud);
int files_remove_finish(struct files_remove_job *job, struct sandbox *sb, const char *path,
                        char *err, size_t errlen);
void files_remove_job_free(struct files_remove_job *job);

/* For a file watch (fswatch.h): called with each entry of a directory being watched,
 * its name and whether it is a directory (not a symlink to one). Return non-zero to stop
 * the listing (files_watch_dir then returns -ECANCELED). */
typedef int (*files_entry_cb)(void *ud, const char *name, int is_dir);

/* Resolves the directory path in sb's view exactly as the operations above do (as the
 * sandbox user; a hidden path is not found; anything but a directory is -EINVAL), then,
 * still as that user, adds it to the inotify instance ifd with mask through
 * /proc/self/fd of its O_PATH descriptor (so inotify watches the very directory
 * resolved, and checks the user's read permission), and, when each is non-NULL, lists
 * it: each(ud, name, is_dir) per entry, at most max_entries (past them -E2BIG, the watch
 * added all the same). On success *ret_wd is the watch descriptor and ret_norm (may be
 * NULL; SBX_PATH_MAX_BYTES + 16 bytes) the path as the sandbox sees it, absolute and
 * normalized. On the loop. Errors as above, and inotify_add_watch's (-ENOSPC: the
 * host's fs.inotify.max_user_watches is reached). */
int files_watch_dir(struct sandbox *sb, const char *path, int ifd, uint32_t mask, int *ret_wd,
                    char *ret_norm, files_entry_cb each, void *ud, size_t max_entries, char *err,
                    size_t errlen);

#endif
