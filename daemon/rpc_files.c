/* rpc_files.c: the file requests (ReadFile, WriteFile, ListDirectory, Stat,
 * MakeDirectory, Remove); see rpc_files.h. */
#include "rpc_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "files.h"
#include "log.h"
#include "offload.h"
#include "rpc.h"
#include "rpc_common.h"
#include "sandbox.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "store.h"

/* Room a file reply leaves in a frame for everything but its data or entries. */
#define FILE_REPLY_HEADROOM_BYTES 1024u
/* Messages of the files module name a path of up to 1 KiB, twice. */
#define FILE_ERR_BYTES 4096u

static uint64_t file_reply_budget(const struct conn *c) {
        uint64_t frame = conn_daemon(c)->cfg->max_frame_bytes;
        return frame > FILE_REPLY_HEADROOM_BYTES ? frame - FILE_REPLY_HEADROOM_BYTES : 0;
}

/* The wire code of a file operation's -errno ("directory not empty" is a precondition,
 * as rmdir is in gRPC's own definition of FAILED_PRECONDITION). */
static Sbx__V1__Code file_code(int err) {
        if (err == -ENOTEMPTY)
                return SBX__V1__CODE__FAILED_PRECONDITION;
        return rpc_code_from_errno(err);
}

/* Records one file operation in the store. */
static void file_record(struct conn *c, const char *sandbox_id, const char *op, const char *path,
                        uint64_t bytes, Sbx__V1__Code code) {
        struct store_fileop rec;
        struct caller k;
        int r;

        rpc_caller_of(c, &k);
        memset(&rec, 0, sizeof(rec));
        rec.sandbox_id = sandbox_id;
        rec.op = op;
        rec.path = path ? path : "";
        rec.bytes = bytes;
        rec.result = rpc_code_name(code);
        rec.caller_uid = (uint32_t)k.uid;
        rec.caller_pid = (int32_t)k.pid;
        rec.client_name = k.client_name;
        rec.time_ms = sbxd_now_unix_ms();
        r = store_fileop_insert(conn_daemon(c)->store, &rec);
        if (r < 0)
                log_warning("sbx=%s conn=%llu: cannot record the file operation %s: %s", sandbox_id,
                            (unsigned long long)conn_id(c), op,
                            r == -EIO ? store_last_error(conn_daemon(c)->store) : strerror(-r));
}

/* rpc_lookup() for a file request; a refusal of a sandbox that exists (or existed) is recorded
 * too (for its owner and the operator to see; the caller was told "not found"). NULL when
 * it answered. */
static struct sandbox *file_lookup(struct conn *c, uint64_t rid, const char *id, const char *op,
                                   const char *path) {
        struct sandbox *sb = rpc_lookup(c, rid, id);

        if (!sb && id && id[0]) {
                struct sandbox *other = sbxtab_find(conn_daemon(c)->sandboxes, id);
                if (other && !sandbox_is_over(other))
                        file_record(c, id, op, path, 0, SBX__V1__CODE__PERMISSION_DENIED);
                else if (store_sandbox_exists(conn_daemon(c)->store, id) > 0)
                        file_record(c, id, op, path, 0, SBX__V1__CODE__ENDED);
        }
        return sb;
}

/* Answers a failed file operation and records it. */
static void file_fail(struct conn *c, uint64_t rid, struct sandbox *sb, const char *op,
                      const char *path, int err, const char *msg) {
        Sbx__V1__Code code = file_code(err);
        conn_send_status(c, rid, code, "%s", msg[0] ? msg : strerror(-err));
        file_record(c, sandbox_id(sb), op, path, 0, code);
}

void rpc_files_read_file(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__ReadFile *q = req->read_file;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "read", q->path);
        struct files_read_result res;
        Sbx__V1__Response resp;
        Sbx__V1__ReadFileReply reply = SBX__V1__READ_FILE_REPLY__INIT;
        Sbx__V1__Code code = SBX__V1__CODE__OK;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_read(sb, q->path, q->has_offset ? q->offset : 0, q->has_limit ? q->limit : 0,
                       SBX_DEFAULT_MAX_READ_BYTES, file_reply_budget(c), &res, err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "read", q->path, r, err);
                return;
        }
        rpc_response_init(&resp, req->request_id);
        reply.has_data = 1;
        reply.data.data = res.data;
        reply.data.len = res.len;
        reply.has_size = reply.has_next_offset = reply.has_eof = 1;
        reply.size = res.size;
        reply.next_offset = res.next_offset;
        reply.eof = res.eof;
        resp.body_case = SBX__V1__RESPONSE__BODY_READ_FILE;
        resp.read_file = &reply;
        /* The data goes out from the buffer it was read into (conn takes it). */
        res.data = NULL;
        if (conn_send_taking(c, &resp, reply.data.data, reply.data.len) == -EMSGSIZE) {
                code = SBX__V1__CODE__TOO_LARGE;
                conn_send_status(c, req->request_id, code,
                                 "'%s' in sandbox '%s': the data does not fit in one frame; read "
                                 "less at a time (limit)",
                                 q->path, q->sandbox_id);
        }
        file_record(c, q->sandbox_id, "read", q->path, code == SBX__V1__CODE__OK ? res.len : 0,
                    code);
        files_read_result_clear(&res);
}

void rpc_files_write_file(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__WriteFile *q = req->write_file;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "write", q->path);
        Sbx__V1__Response resp;
        Sbx__V1__WriteFileReply reply = SBX__V1__WRITE_FILE_REPLY__INIT;
        unsigned flags = 0;
        uint64_t size = 0;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        if (q->has_create_parents && q->create_parents)
                flags |= FILES_WRITE_CREATE_PARENTS;
        if (q->has_append && q->append)
                flags |= FILES_WRITE_APPEND;
        r = files_write(sb, q->path, q->has_data ? q->data.data : NULL,
                        q->has_data ? q->data.len : 0, q->has_mode ? q->mode : 0644, flags, &size,
                        err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "write", q->path, r, err);
                return;
        }
        rpc_response_init(&resp, req->request_id);
        reply.has_bytes_written = reply.has_size = 1;
        reply.bytes_written = q->has_data ? q->data.len : 0;
        reply.size = size;
        resp.body_case = SBX__V1__RESPONSE__BODY_WRITE_FILE;
        resp.write_file = &reply;
        conn_send(c, &resp);
        file_record(c, q->sandbox_id, "write", q->path, reply.bytes_written, SBX__V1__CODE__OK);
}

/* A file operation whose slow part runs off the loop (offload.h): a listing, or a
 * recursive remove. It holds its call (its connection stays until it answers: a closed
 * one drops the answer) and finds its sandbox again, by id, when the work is done. */
struct file_work {
        struct offload_job job;
        struct call *call;
        struct sbxd *d;
        const struct sandbox *sb; /* compared with the sandbox found again, never used */
        int64_t sb_created_ms;
        const char *op; /* "list" or "remove" (static) */
        char *sandbox_id, *path;
        struct files_list_job *list;     /* a listing's */
        struct files_remove_job *remove; /* a remove's */
};

static struct file_work *file_work_of(struct offload_job *job) {
        return (struct file_work *)((char *)job - offsetof(struct file_work, job));
}

static void file_work_free(struct file_work *w) {
        files_list_job_free(w->list);
        files_remove_job_free(w->remove);
        if (w->call)
                rpc_call_free(w->call);
        free(w->sandbox_id);
        free(w->path);
        free(w);
}

/* The work's reason to run: its sandbox is still the one it began in, and ready. While
 * it is, the work counts as activity there (the idle timeout), as a running command does. */
static int file_work_wanted(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct sandbox *sb = sbxtab_find(w->d->sandboxes, w->sandbox_id);

        if (!sb || sb != w->sb || sandbox_created_ms(sb) != w->sb_created_ms ||
            sandbox_state(sb) != SBX__V1__SANDBOX_STATE__READY || sandbox_is_over(sb))
                return 0;
        sandbox_touch(sb);
        return 1;
}

/* For files_*_run: stop once the job is cancelled. */
static int file_work_stop(void *ud) {
        return offload_cancelled(ud);
}

/* Hands the work w of request rid (its files job set) to the thread pool, or answers why
 * not and frees w. */
static void file_work_submit(struct conn *c, uint64_t rid, struct sandbox *sb, struct file_work *w,
                             offload_work_cb work, offload_done_cb done) {
        struct conn_peer p;
        unsigned run = 0, wait = 0;
        int r = -ENOMEM;

        conn_peer(c, &p);
        w->call = rpc_call_new(c, rid);
        if (w->call) {
                w->call->job = &w->job;
                r = offload_submit(w->d, &w->job, p.uid, work, done, file_work_wanted);
        }
        if (r == 0)
                return;
        if (r == -EAGAIN) {
                offload_counts(w->d, p.uid, NULL, NULL, &run, &wait);
                conn_send_status(c, rid, SBX__V1__CODE__RESOURCE_EXHAUSTED,
                                 "uid %u has %u file operations running and %u waiting, the most "
                                 "one user may queue (%u); retry when one has finished",
                                 (unsigned)p.uid, run, wait, SBX_OFFLOAD_MAX_QUEUED_PER_UID);
                file_record(c, sandbox_id(sb), w->op, w->path, 0,
                            SBX__V1__CODE__RESOURCE_EXHAUSTED);
        } else {
                file_fail(c, rid, sb, w->op, w->path, r, "");
        }
        file_work_free(w);
}

/* A new work for request rid on path of sb, or NULL (answered) when out of memory. */
static struct file_work *file_work_new(struct conn *c, uint64_t rid, struct sandbox *sb,
                                       const char *op, const char *path) {
        struct file_work *w = calloc(1, sizeof(*w));

        if (w) {
                w->d = conn_daemon(c);
                w->sb = sb;
                w->sb_created_ms = sandbox_created_ms(sb);
                w->op = op;
                w->sandbox_id = strdup(sandbox_id(sb));
                w->path = strdup(path ? path : "");
        }
        if (!w || !w->sandbox_id || !w->path) {
                if (w)
                        file_work_free(w);
                file_fail(c, rid, sb, op, path, -ENOMEM, "");
                return NULL;
        }
        return w;
}

/* When w is done: its sandbox, still the one it began in, or NULL after answering (and
 * recording) that it ended meanwhile. */
static struct sandbox *file_work_sandbox(struct file_work *w) {
        struct conn *c = rpc_call_conn(w->call);
        uint64_t rid = w->call->request_id;
        struct sandbox *sb = file_lookup(c, rid, w->sandbox_id, w->op, w->path);

        /* Another may have taken its id. */
        if (sb && (sb != w->sb || sandbox_created_ms(sb) != w->sb_created_ms)) {
                conn_send_status(c, rid, SBX__V1__CODE__ENDED,
                                 "sandbox '%s' ended during the %s of '%s'", w->sandbox_id, w->op,
                                 w->path);
                file_record(c, w->sandbox_id, w->op, w->path, 0, SBX__V1__CODE__ENDED);
                sb = NULL;
        }
        return sb;
}

/* Answers and records w's failure r (message err). Work stopped because its client went
 * away (-ECANCELED on a closed connection) is recorded as UNAVAILABLE. */
static void file_work_fail(struct file_work *w, struct sandbox *sb, int r, const char *err) {
        struct conn *c = rpc_call_conn(w->call);

        if (r == -ECANCELED && conn_is_closed(c)) {
                log_info("sbx=%s conn=%llu: the %s of '%s' stopped: its client went away",
                         w->sandbox_id, (unsigned long long)conn_id(c), w->op, w->path);
                file_record(c, w->sandbox_id, w->op, w->path, 0, SBX__V1__CODE__UNAVAILABLE);
                return;
        }
        file_fail(c, w->call->request_id, sb, w->op, w->path, r, err);
}

static void list_work(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        files_list_run(w->list, file_work_stop, job);
}

static void list_done(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct conn *c = rpc_call_conn(w->call);
        uint64_t rid = w->call->request_id;
        Sbx__V1__ListDirectoryReply reply = SBX__V1__LIST_DIRECTORY_REPLY__INIT;
        Sbx__V1__Code code = SBX__V1__CODE__OK;
        char err[FILE_ERR_BYTES];
        Sbx__V1__Response resp;
        struct files_list l;
        struct sandbox *sb = file_work_sandbox(w);
        int r;

        if (!sb) {
                file_work_free(w);
                return;
        }
        r = files_list_finish(w->list, sb, w->path, &l, err, sizeof(err));
        w->list = NULL;
        if (r < 0) {
                file_work_fail(w, sb, r, err);
                file_work_free(w);
                return;
        }
        rpc_response_init(&resp, rid);
        reply.n_entries = l.n;
        reply.entries = l.entries;
        reply.has_truncated = 1;
        reply.truncated = l.truncated;
        resp.body_case = SBX__V1__RESPONSE__BODY_LIST_DIRECTORY;
        resp.list_directory = &reply;
        if (conn_send(c, &resp) == -EMSGSIZE) {
                code = SBX__V1__CODE__TOO_LARGE;
                conn_send_status(c, rid, code,
                                 "the listing of '%s' in sandbox '%s' does not fit in one frame; "
                                 "ask for fewer entries (limit)",
                                 w->path, w->sandbox_id);
        }
        file_record(c, w->sandbox_id, "list", w->path, 0, code);
        files_list_clear(&l);
        file_work_free(w);
}

/* The directory is opened here, then read and described off the loop: a directory of a
 * million entries takes seconds to read, which would stall every client. */
void rpc_files_list_directory(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__ListDirectory *q = req->list_directory;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "list", q->path);
        struct files_list_job *job = NULL;
        char err[FILE_ERR_BYTES];
        struct file_work *w;
        int r;

        if (!sb)
                return;
        r = files_list_open(sb, q->path, q->has_limit ? q->limit : 0, file_reply_budget(c), &job,
                            err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "list", q->path, r, err);
                return;
        }
        w = file_work_new(c, req->request_id, sb, "list", q->path);
        if (!w) {
                files_list_job_free(job);
                return;
        }
        w->list = job;
        file_work_submit(c, req->request_id, sb, w, list_work, list_done);
}

void rpc_files_stat(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__Stat *q = req->stat;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "stat", q->path);
        Sbx__V1__FileInfo fi;
        Sbx__V1__Response resp;
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_stat(sb, q->path, &fi, err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "stat", q->path, r, err);
                return;
        }
        rpc_response_init(&resp, req->request_id);
        resp.body_case = SBX__V1__RESPONSE__BODY_STAT;
        resp.stat = &fi;
        conn_send(c, &resp);
        file_record(c, q->sandbox_id, "stat", q->path, 0, SBX__V1__CODE__OK);
        files_info_clear(&fi);
}

void rpc_files_make_directory(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__MakeDirectory *q = req->make_directory;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "mkdir", q->path);
        char err[FILE_ERR_BYTES];
        int r;

        if (!sb)
                return;
        r = files_mkdir(sb, q->path, q->has_mode ? q->mode : 0755, q->has_parents && q->parents,
                        err, sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "mkdir", q->path, r, err);
                return;
        }
        rpc_send_empty(c, req->request_id);
        file_record(c, q->sandbox_id, "mkdir", q->path, 0, SBX__V1__CODE__OK);
}

static void remove_work(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        files_remove_run(w->remove, file_work_stop, job);
}

static void remove_done(struct offload_job *job) {
        struct file_work *w = file_work_of(job);
        struct conn *c = rpc_call_conn(w->call);
        uint64_t rid = w->call->request_id;
        char err[FILE_ERR_BYTES];
        struct sandbox *sb = file_work_sandbox(w);
        int r;

        if (!sb) {
                file_work_free(w);
                return;
        }
        r = files_remove_finish(w->remove, sb, w->path, err, sizeof(err));
        w->remove = NULL;
        if (r < 0) {
                file_work_fail(w, sb, r, err);
        } else {
                rpc_send_empty(c, rid);
                file_record(c, w->sandbox_id, "remove", w->path, 0, SBX__V1__CODE__OK);
        }
        file_work_free(w);
}

/* A file, a link or an empty directory is removed here; a tree off the loop (400,000
 * files took 2.8 s, every client waiting). */
void rpc_files_remove(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__Remove *q = req->remove;
        struct sandbox *sb = file_lookup(c, req->request_id, q->sandbox_id, "remove", q->path);
        struct files_remove_job *job = NULL;
        char err[FILE_ERR_BYTES];
        struct file_work *w;
        int r;

        if (!sb)
                return;
        r = files_remove_open(sb, q->path, q->has_recursive && q->recursive, &job, err,
                              sizeof(err));
        if (r < 0) {
                file_fail(c, req->request_id, sb, "remove", q->path, r, err);
                return;
        }
        if (!job) {
                rpc_send_empty(c, req->request_id);
                file_record(c, q->sandbox_id, "remove", q->path, 0, SBX__V1__CODE__OK);
                return;
        }
        w = file_work_new(c, req->request_id, sb, "remove", q->path);
        if (!w) {
                files_remove_job_free(job);
                return;
        }
        w->remove = job;
        file_work_submit(c, req->request_id, sb, w, remove_work, remove_done);
}
