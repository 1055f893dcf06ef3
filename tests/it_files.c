/* it_files.c: integration tests of the file API (ReadFile, WriteFile, ListDirectory,
 * Stat, MakeDirectory, Remove) against a real sbxd, through libsbx, raw frames and the
 * sbx tool: planted symlinks and ".." never reach the host, hidden paths are not found,
 * FIFOs and devices are refused without stalling the daemon, the read-only root says
 * READ_ONLY, permissions are the sandbox user's, writes are atomic and owned by the
 * sandbox user, large files page, large directories list within bounds, and every
 * operation is recorded. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "itutil.h"
#include "sbx.pb-c.h"
#include "sbx_limits.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------------------- */

static const char *code_name(enum sbx_code code) {
        return sbx_code_name((int)code);
}

/* Runs shell in id and fails the test unless it exits 0. */
static void sh_ok(sbx_client *c, const char *id, const char *shell) {
        struct sbx_result *r = it_sh(c, id, 120000, shell);
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0,
                      "`%s` failed: outcome %d exit %d: %s", shell, (int)r->outcome, r->exit_code,
                      (const char *)r->stderr_data);
        sbx_result_free(r);
}

/* Runs shell in id with a large output cap and returns its result (exit 0 asserted). */
static struct sbx_result *sh_out(sbx_client *c, const char *id, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_result *r = NULL;
        enum sbx_code code;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = 60000;
        o.max_stdout_bytes = 16u * 1024u * 1024u;
        code = sbx_exec(c, id, &o, &r);
        ck_assert_msg(code == SBX_OK, "sh %s: %s: %s", shell, code_name(code),
                      sbx_error_message(c));
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0, "`%s` failed: %s",
                      shell, (const char *)r->stderr_data);
        return r;
}

/* Reads a whole host file (NULL when it cannot be read). */
static uint8_t *host_read(const char *path, size_t *ret_len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t cap = 4096, len = 0;
        uint8_t *buf;
        ssize_t n;

        if (fd < 0)
                return NULL;
        buf = malloc(cap);
        while ((n = read(fd, buf + len, cap - len)) > 0) {
                len += (size_t)n;
                if (len == cap)
                        buf = realloc(buf, cap *= 2);
        }
        close(fd);
        *ret_len = len;
        return buf;
}

static void host_write(const char *path, const char *data, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
        close(fd);
        ck_assert_int_eq(chmod(path, mode), 0);
}

/* 1 when needle (n bytes) occurs in hay (len bytes). */
static int contains(const uint8_t *hay, size_t len, const uint8_t *needle, size_t n) {
        size_t i;
        if (n == 0 || n > len)
                return 0;
        for (i = 0; i + n <= len; i++)
                if (memcmp(hay + i, needle, n) == 0)
                        return 1;
        return 0;
}

/* Reads path in id and asserts the call fails; when it does not, the data must not be the
 * host's secret. Returns the code. */
static enum sbx_code read_refused(sbx_client *c, const char *id, const char *path,
                                  const uint8_t *secret, size_t secret_len) {
        struct sbx_read_result *r = NULL;
        enum sbx_code code = sbx_read(c, id, path, 0, 0, &r);
        if (code == SBX_OK) {
                ck_assert_msg(!contains(r->data, r->len, secret, secret_len),
                              "%s leaked the host's bytes", path);
                sbx_read_result_free(r);
        }
        ck_assert_msg(code != SBX_OK, "reading %s succeeded", path);
        return code;
}

static struct sbx_read_result *must_read(sbx_client *c, const char *id, const char *path,
                                         uint64_t offset, uint64_t limit) {
        struct sbx_read_result *r = NULL;
        enum sbx_code code = sbx_read(c, id, path, offset, limit, &r);
        ck_assert_msg(code == SBX_OK, "read %s: %s: %s", path, code_name(code),
                      sbx_error_message(c));
        return r;
}

static void must_write(sbx_client *c, const char *id, const char *path, const void *data,
                       size_t len, unsigned flags) {
        enum sbx_code code = sbx_write(c, id, path, data, len, 0, flags);
        ck_assert_msg(code == SBX_OK, "write %s: %s: %s", path, code_name(code),
                      sbx_error_message(c));
}

/* A host path next to d's directory, in the test case's base directory: d's own
 * directory holds its socket, which protect_defaults hides inside every sandbox. */
static void beside(const struct it_daemon *d, const char *name, char *out, size_t len) {
        const char *slash = strrchr(d->dir, '/');
        ck_assert_ptr_nonnull(slash);
        snprintf(out, len, "%.*s/%s", (int)(slash - d->dir), d->dir, name);
}

static char *strv1(const char *s) {
        char *d = strdup(s);
        ck_assert_ptr_nonnull(d);
        return d;
}

/* Appends req, framed, to out (pipelined requests in one write). */
static void pack_request(Sbx__V1__Request *req, uint8_t *out, size_t *len) {
        uint8_t *buf;
        size_t n;
        ck_assert_int_eq(frame_pack(&req->base, SBX_DEFAULT_MAX_FRAME_BYTES, &buf, &n), 0);
        memcpy(out + *len, buf, n);
        *len += n;
        free(buf);
}

/* ---- tests ----------------------------------------------------------------------------- */

/* Symlinks planted in the workspace, and "..", never lead a file operation to the host:
 * to /etc/shadow, to a denied path, to ../../.. of a host file, through /proc. */
START_TEST(planted_symlinks_do_not_escape) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_read_result *r;
        struct sbx_dir_list *l = NULL;
        struct sbx_file_info *fi = NULL;
        sbx_client *c;
        char secret_path[700], cmd[8192], rel[64], *ds[1];
        uint8_t *shadow, *secret, *passwd_before, *passwd_after;
        size_t shadow_len = 0, secret_len = 0, pb_len = 0, pa_len = 0, i;
        const char *links[] = {"shadow",    "denied", "denied_file", "up",
                               "proc_self", "proc_1", "host_abs",    "state"};
        int found_ws = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        /* A host secret outside anything the sandbox sees (the sandbox's /tmp is its own). */
        beside(&d, "host-secret", secret_path, sizeof(secret_path));
        host_write(secret_path, "HOST-SECRET-0123456789", 0644);
        secret = host_read(secret_path, &secret_len);
        shadow = host_read("/etc/shadow", &shadow_len);
        ck_assert_ptr_nonnull(shadow);
        ck_assert_uint_gt(shadow_len, 0);
        /* A host file the sandbox sees as it is (not /etc/passwd, which a sandbox may
         * have a line of its own in). */
        passwd_before = host_read("/etc/login.defs", &pb_len);

        sbx_create_opts_init(&o);
        o.id = "esc";
        ds[0] = strv1("/usr/share/doc");
        o.policy.denied_read_paths.v = ds;
        o.policy.denied_read_paths.n = 1;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        free(ds[0]);

        rel[0] = '\0';
        for (i = 0; i < 12; i++)
                strcat(rel, "../");
        snprintf(cmd, sizeof(cmd),
                 "cd /workspace && ln -s /etc/shadow shadow && ln -s /usr/share/doc denied && "
                 "ln -s /usr/share/doc/dpkg/copyright denied_file && ln -s '%s%s' up && "
                 "ln -s /proc/self/root/etc/shadow proc_self && "
                 "ln -s /proc/1/root/etc/shadow proc_1 && ln -s '%s' host_abs && "
                 "ln -s '%s/sbxd.db' state && ln -s /etc/login.defs passwd",
                 rel, secret_path + 1, secret_path, d.state);
        sh_ok(c, "esc", cmd);

        ck_assert_int_eq(read_refused(c, "esc", "shadow", shadow, shadow_len), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "esc", "/etc/shadow", shadow, shadow_len), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "esc", "denied_file", NULL, 0), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "esc", "up", secret, secret_len), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "esc", "host_abs", secret, secret_len), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "esc", secret_path, secret, secret_len), SBX_NOT_FOUND);
        read_refused(c, "esc", "proc_self", shadow, shadow_len);
        read_refused(c, "esc", "proc_1", shadow, shadow_len);
        read_refused(c, "esc", "/proc/1/root/etc/shadow", shadow, shadow_len);
        read_refused(c, "esc", "state", NULL, 0);
        /* ".." from the workspace stops at the sandbox's root. */
        snprintf(cmd, sizeof(cmd), "%s%s", rel, secret_path + 1);
        ck_assert_int_eq(read_refused(c, "esc", cmd, secret, secret_len), SBX_NOT_FOUND);
        snprintf(cmd, sizeof(cmd), "/workspace/%s%s", rel, "etc/shadow");
        ck_assert_int_eq(read_refused(c, "esc", cmd, shadow, shadow_len), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_list_dir(c, "esc", rel, 0, &l), SBX_OK);
        for (i = 0; i < l->n; i++)
                found_ws |= strcmp(l->v[i].name, "workspace") == 0;
        ck_assert_msg(found_ws, "'..' from /workspace left the sandbox's root");
        sbx_dir_list_free(l);
        /* Listing and stat through the links see nothing of the hidden paths either. */
        ck_assert_int_eq(sbx_list_dir(c, "esc", "denied", 0, &l), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_list_dir(c, "esc", "/usr/share/doc", 0, &l), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_stat(c, "esc", "/usr/share/doc/dpkg", &fi), SBX_NOT_FOUND);
        /* A link that cannot be followed inside is described itself. */
        ck_assert_int_eq(sbx_stat(c, "esc", "shadow", &fi), SBX_OK);
        ck_assert_int_eq(fi->type, SBX_FILE_SYMLINK);
        ck_assert_str_eq(fi->symlink_target, "/etc/shadow");
        sbx_file_info_free(fi);
        ck_assert_int_eq(sbx_stat(c, "esc", "passwd", &fi), SBX_OK);
        ck_assert_int_eq(fi->type, SBX_FILE_REGULAR);
        ck_assert_str_eq(fi->symlink_target, "/etc/login.defs");
        sbx_file_info_free(fi);
        /* The listing of the workspace shows the links, not their targets. */
        ck_assert_int_eq(sbx_list_dir(c, "esc", "/workspace", 0, &l), SBX_OK);
        ck_assert_uint_eq(l->n, sizeof(links) / sizeof(links[0]) + 1);
        for (i = 0; i < l->n; i++)
                ck_assert_int_eq(l->v[i].type, SBX_FILE_SYMLINK);
        sbx_dir_list_free(l);
        /* Writes through the links stay inside: the host files do not change. */
        ck_assert_int_ne(sbx_write(c, "esc", "host_abs", "x", 1, 0, 0), SBX_OK);
        ck_assert_int_ne(sbx_write(c, "esc", "up", "x", 1, 0, 0), SBX_OK);
        ck_assert_int_eq(sbx_write(c, "esc", "passwd", "x", 1, 0, 0), SBX_READ_ONLY);
        ck_assert_int_eq(sbx_write(c, "esc", "shadow", "x", 1, 0, 0), SBX_NOT_FOUND);
        ck_assert_int_ne(sbx_write(c, "esc", "proc_1", "x", 1, 0, SBX_WRITE_APPEND), SBX_OK);
        free(secret);
        secret = host_read(secret_path, &secret_len);
        ck_assert_mem_eq(secret, "HOST-SECRET-0123456789", secret_len);
        passwd_after = host_read("/etc/login.defs", &pa_len);
        ck_assert_uint_eq(pa_len, pb_len);
        ck_assert_mem_eq(passwd_after, passwd_before, pa_len);
        free(shadow);
        shadow = host_read("/etc/shadow", &secret_len);
        ck_assert_uint_eq(secret_len, shadow_len);
        /* A remove through a link removes the link. */
        ck_assert_int_eq(sbx_remove(c, "esc", "passwd", 0), SBX_OK);
        ck_assert_int_eq(access("/etc/login.defs", F_OK), 0);
        r = must_read(c, "esc", "/etc/login.defs", 0, 0);
        ck_assert_uint_eq(r->len, pb_len);
        sbx_read_result_free(r);
        free(shadow);
        free(secret);
        free(passwd_before);
        free(passwd_after);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* FIFOs, sockets and devices are refused at once, and the daemon keeps serving another
 * client meanwhile. "At once": an open of a FIFO would block for good; the bound (10 s)
 * leaves a loaded machine room. */
START_TEST(fifos_and_devices_refused_quickly) {
        struct it_daemon d;
        sbx_client *c;
        pid_t pid;
        int i, st;
        double t0, worst = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "ff"));
        sh_ok(c, "ff",
              "cd /workspace && mkfifo fifo && python3 -c \"import socket; "
              "socket.socket(socket.AF_UNIX).bind('sock')\"");
        /* Another client stats the workspace all along and times each answer. */
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sbx_client *o = NULL;
                double w = 0;
                if (sbx_connect(d.sock, "other", &o) != SBX_OK)
                        _exit(2);
                for (i = 0; i < 200; i++) {
                        struct sbx_file_info *fi = NULL;
                        double s = it_now_ms(), e;
                        if (sbx_stat(o, "ff", "/workspace", &fi) != SBX_OK || !fi->is_dir)
                                _exit(3);
                        sbx_file_info_free(fi);
                        e = it_now_ms() - s;
                        if (e > w)
                                w = e;
                }
                sbx_close(o);
                _exit(w < 10000 ? 0 : 4);
        }
        for (i = 0; i < 50; i++) {
                struct sbx_read_result *r = NULL;
                double e;
                t0 = it_now_ms();
                ck_assert_int_eq(sbx_read(c, "ff", "fifo", 0, 0, &r), SBX_INVALID_ARGUMENT);
                ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "FIFO"));
                ck_assert_int_eq(sbx_write(c, "ff", "fifo", "x", 1, 0, 0), SBX_INVALID_ARGUMENT);
                ck_assert_int_eq(sbx_write(c, "ff", "fifo", "x", 1, 0, SBX_WRITE_APPEND),
                                 SBX_INVALID_ARGUMENT);
                ck_assert_int_eq(sbx_read(c, "ff", "sock", 0, 0, &r), SBX_INVALID_ARGUMENT);
                ck_assert_int_eq(sbx_read(c, "ff", "/dev/zero", 0, 0, &r), SBX_INVALID_ARGUMENT);
                ck_assert_int_eq(sbx_read(c, "ff", "/dev/tty", 0, 0, &r), SBX_INVALID_ARGUMENT);
                ck_assert_int_eq(sbx_write(c, "ff", "/dev/null", "x", 1, 0, SBX_WRITE_APPEND),
                                 SBX_INVALID_ARGUMENT);
                e = it_now_ms() - t0;
                if (e > worst)
                        worst = e;
        }
        ck_assert_msg(worst < 10000, "refusing a FIFO took %.0f ms", worst);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other client: status %d", st);
        /* Stat describes them; it does not open them. */
        {
                struct sbx_file_info *fi = NULL;
                ck_assert_int_eq(sbx_stat(c, "ff", "fifo", &fi), SBX_OK);
                ck_assert_int_eq(fi->type, SBX_FILE_FIFO);
                sbx_file_info_free(fi);
                ck_assert_int_eq(sbx_stat(c, "ff", "/dev/null", &fi), SBX_OK);
                ck_assert_int_eq(fi->type, SBX_FILE_CHAR_DEVICE);
                sbx_file_info_free(fi);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Writes where the sandbox may not write fail as they would inside. */
START_TEST(read_only_paths) {
        struct it_daemon d;
        sbx_client *c;
        uint8_t *before, *after;
        size_t bl, al;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "ro"));
        before = host_read("/etc/login.defs", &bl);
        ck_assert_int_eq(sbx_write(c, "ro", "/etc/x", "x", 1, 0, 0), SBX_READ_ONLY);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "read-only"));
        ck_assert_int_eq(access("/etc/x", F_OK), -1);
        ck_assert_int_eq(sbx_write(c, "ro", "/etc/login.defs", "x", 1, 0, 0), SBX_READ_ONLY);
        ck_assert_int_eq(sbx_write(c, "ro", "/etc/login.defs", "x", 1, 0, SBX_WRITE_APPEND),
                         SBX_READ_ONLY);
        ck_assert_int_eq(sbx_write(c, "ro", "/usr/x/y", "x", 1, 0, SBX_WRITE_CREATE_PARENTS),
                         SBX_READ_ONLY);
        ck_assert_int_eq(sbx_mkdir(c, "ro", "/usr/newdir", 0755, 0), SBX_READ_ONLY);
        ck_assert_int_eq(sbx_remove(c, "ro", "/etc/login.defs", 0), SBX_READ_ONLY);
        after = host_read("/etc/login.defs", &al);
        ck_assert_uint_eq(al, bl);
        ck_assert_mem_eq(after, before, al);
        /* /tmp is the sandbox's own and writable. */
        must_write(c, "ro", "/tmp/t", "tmp", 3, 0);
        free(before);
        free(after);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Binary data (with NULs) written through the API is what a command reads, and what a
 * command writes is what the API reads, byte for byte. */
START_TEST(binary_round_trip_with_commands) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_result *res;
        struct sbx_read_result *r;
        enum { N = 300000 };
        uint8_t *data = malloc(N);
        size_t i;

        for (i = 0; i < N; i++)
                data[i] = (uint8_t)((i * 7 + i / 251) & 0xff);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "bin"));
        must_write(c, "bin", "data.bin", data, N, 0);
        res = sh_out(c, "bin", "cat /workspace/data.bin");
        ck_assert_uint_eq(res->stdout_len, N);
        ck_assert_mem_eq(res->stdout_data, data, N);
        sbx_result_free(res);
        /* The other way: a command writes bytes 0..255 repeated. */
        sh_ok(c, "bin",
              "python3 -c \"import sys; sys.stdout.buffer.write(bytes(range(256)) * 1000)\" "
              "> /workspace/cmd.bin");
        r = must_read(c, "bin", "/workspace/cmd.bin", 0, 0);
        ck_assert_uint_eq(r->len, 256000);
        ck_assert_uint_eq(r->size, 256000);
        ck_assert(r->eof);
        for (i = 0; i < r->len; i++)
                ck_assert_uint_eq(r->data[i], i % 256);
        sbx_read_result_free(r);
        /* Offsets and limits. */
        r = must_read(c, "bin", "cmd.bin", 255, 3);
        ck_assert_uint_eq(r->len, 3);
        ck_assert_uint_eq(r->data[0], 255);
        ck_assert_uint_eq(r->data[1], 0);
        ck_assert_uint_eq(r->next_offset, 258);
        ck_assert(!r->eof);
        sbx_read_result_free(r);
        r = must_read(c, "bin", "cmd.bin", 300000, 10);
        ck_assert_uint_eq(r->len, 0);
        ck_assert(r->eof);
        sbx_read_result_free(r);
        /* Empty files. */
        must_write(c, "bin", "empty", "", 0, 0);
        r = must_read(c, "bin", "empty", 0, 0);
        ck_assert_uint_eq(r->len, 0);
        ck_assert_uint_eq(r->size, 0);
        ck_assert(r->eof);
        sbx_read_result_free(r);
        res = sh_out(c, "bin", "stat -c %s /workspace/empty");
        ck_assert_str_eq((char *)res->stdout_data, "0\n");
        sbx_result_free(res);
        free(data);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A reader racing a writer that replaces a 1 MiB file never sees a partial file. */
START_TEST(racing_reader_sees_whole_files) {
        enum { SIZE = 1024 * 1024, READS = 200 };
        struct it_daemon d;
        sbx_client *c;
        uint8_t *a = malloc(SIZE), *b = malloc(SIZE);
        int i, st, seen_a = 0, seen_b = 0;
        pid_t pid;

        memset(a, 'a', SIZE);
        memset(b, 'b', SIZE);
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "race"));
        must_write(c, "race", "f", a, SIZE, 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sbx_client *w = NULL;
                unsigned k;
                if (sbx_connect(d.sock, "writer", &w) != SBX_OK)
                        _exit(2);
                for (k = 0;; k++)
                        if (sbx_write(w, "race", "f", k % 2 ? a : b, SIZE, 0, 0) != SBX_OK)
                                _exit(3);
        }
        for (i = 0; i < READS; i++) {
                struct sbx_read_result *r = must_read(c, "race", "f", 0, 0);
                ck_assert_uint_eq(r->len, SIZE);
                ck_assert_msg(memcmp(r->data, a, SIZE) == 0 || memcmp(r->data, b, SIZE) == 0,
                              "read %d saw a mix of the two contents", i);
                seen_a += r->data[0] == 'a';
                seen_b += r->data[0] == 'b';
                sbx_read_result_free(r);
        }
        ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0); /* the writer was still writing */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        ck_assert_int_eq(seen_a + seen_b, READS);
        free(a);
        free(b);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A 64 MiB file written in appended pieces reads back identical, page by page; without a
 * limit it is TOO_LARGE with a hint to page. */
START_TEST(large_file_paged) {
        enum { PIECE = 4 * 1024 * 1024, PIECES = 16, PAGE = 3 * 1024 * 1024 + 17 };
        const size_t total = (size_t)PIECE * PIECES;
        struct it_daemon d;
        sbx_client *c;
        struct sbx_read_result *r = NULL;
        struct sbx_file_info *fi = NULL;
        uint8_t *data = malloc(total);
        uint64_t off = 0;
        size_t i;

        for (i = 0; i < total; i++)
                data[i] = (uint8_t)(i ^ (i >> 11) ^ (i >> 23));
        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "big"));
        must_write(c, "big", "big.bin", data, PIECE, 0);
        for (i = 1; i < PIECES; i++)
                must_write(c, "big", "big.bin", data + i * PIECE, PIECE, SBX_WRITE_APPEND);
        ck_assert_int_eq(sbx_stat(c, "big", "big.bin", &fi), SBX_OK);
        ck_assert_uint_eq(fi->size, total);
        sbx_file_info_free(fi);
        ck_assert_int_eq(sbx_read(c, "big", "big.bin", 0, 0, &r), SBX_TOO_LARGE);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "offset"));
        while (off < total) {
                r = must_read(c, "big", "big.bin", off, PAGE);
                ck_assert_uint_eq(r->size, total);
                ck_assert_uint_eq(r->len, total - off < PAGE ? total - off : PAGE);
                ck_assert_msg(memcmp(r->data, data + off, r->len) == 0, "page at %llu differs",
                              (unsigned long long)off);
                ck_assert_uint_eq(r->next_offset, off + r->len);
                ck_assert_int_eq(!!r->eof, r->next_offset == total);
                off = r->next_offset;
                sbx_read_result_free(r);
        }
        /* One read larger than a frame is cut to fit, and says where to go on. */
        r = must_read(c, "big", "big.bin", 0, total);
        ck_assert_uint_gt(r->len, 0);
        ck_assert_uint_lt(r->len, SBX_DEFAULT_MAX_FRAME_BYTES);
        ck_assert_mem_eq(r->data, data, r->len);
        ck_assert_uint_eq(r->next_offset, r->len);
        ck_assert(!r->eof);
        sbx_read_result_free(r);
        free(data);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Names with spaces and UTF-8; writes onto directories and into missing parents; a
 * symlink written through is followed inside. */
START_TEST(names_and_write_rules) {
        const char *name = "dir with space/naïve ✓ файл.txt";
        struct it_daemon d;
        sbx_client *c;
        struct sbx_result *res;
        struct sbx_read_result *r;
        struct sbx_dir_list *l = NULL;
        struct sbx_file_info *fi = NULL;
        char abs[256];

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "nm"));
        ck_assert_int_eq(sbx_write(c, "nm", name, "héllo\n", 7, 0, 0), SBX_NOT_FOUND);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "create_parents"));
        must_write(c, "nm", name, "héllo\n", 7, SBX_WRITE_CREATE_PARENTS);
        res = sh_out(c, "nm", "cat '/workspace/dir with space/naïve ✓ файл.txt'");
        ck_assert_str_eq((char *)res->stdout_data, "héllo\n");
        sbx_result_free(res);
        ck_assert_int_eq(sbx_list_dir(c, "nm", "dir with space", 0, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 1);
        ck_assert_str_eq(l->v[0].name, "naïve ✓ файл.txt");
        ck_assert_int_eq(l->v[0].type, SBX_FILE_REGULAR);
        ck_assert_uint_eq(l->v[0].size, 7);
        ck_assert_uint_eq(l->v[0].mode, 0644);
        sbx_dir_list_free(l);
        snprintf(abs, sizeof(abs), "/workspace/%s", name);
        ck_assert_int_eq(sbx_stat(c, "nm", abs, &fi), SBX_OK);
        ck_assert_str_eq(fi->name, "naïve ✓ файл.txt");
        sbx_file_info_free(fi);
        /* The mode is applied exactly; the size returned is the file's. */
        ck_assert_int_eq(sbx_write(c, "nm", "m", "abc", 3, 0600, 0), SBX_OK);
        ck_assert_int_eq(sbx_stat(c, "nm", "m", &fi), SBX_OK);
        ck_assert_uint_eq(fi->mode, 0600);
        sbx_file_info_free(fi);
        must_write(c, "nm", "m", "de", 2, SBX_WRITE_APPEND);
        r = must_read(c, "nm", "m", 0, 0);
        ck_assert_uint_eq(r->len, 5);
        ck_assert_mem_eq(r->data, "abcde", 5);
        sbx_read_result_free(r);
        /* Onto a directory: refused. */
        ck_assert_int_eq(sbx_write(c, "nm", "dir with space", "x", 1, 0, 0), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_write(c, "nm", "/workspace", "x", 1, 0, 0), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_read(c, "nm", "dir with space", 0, 0, &r), SBX_INVALID_ARGUMENT);
        /* A symlink to a file inside: the write replaces the target, the link stays. */
        sh_ok(c, "nm", "cd /workspace && mkdir t && echo old > t/target && ln -s t/target lnk");
        must_write(c, "nm", "lnk", "new\n", 4, 0);
        res = sh_out(c, "nm", "cat /workspace/t/target; readlink /workspace/lnk");
        ck_assert_str_eq((char *)res->stdout_data, "new\nt/target\n");
        sbx_result_free(res);
        /* Bad paths. */
        ck_assert_int_eq(sbx_read(c, "nm", "", 0, 0, &r), SBX_INVALID_ARGUMENT);
        {
                char *longp = malloc(SBX_PATH_MAX_BYTES + 10);
                memset(longp, 'a', SBX_PATH_MAX_BYTES + 9);
                longp[SBX_PATH_MAX_BYTES + 9] = '\0';
                ck_assert_int_eq(sbx_read(c, "nm", longp, 0, 0, &r), SBX_INVALID_ARGUMENT);
                free(longp);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A NUL inside a path, in a raw frame: INVALID_ARGUMENT, and the connection goes on. Also
 * a file operation on a sandbox still being created: FAILED_PRECONDITION. */
START_TEST(raw_frames_nul_and_not_ready) {
        struct it_daemon d;
        struct frame_reader fr;
        Sbx__V1__Response *resp;
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__CreateSandbox cs = SBX__V1__CREATE_SANDBOX__INIT;
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        /* Request{request_id=9, read_file{sandbox_id="x", path="a\0b"}}. */
        uint8_t nul_req[] = {0,    0,    0,   12,   0x08, 0x09, 0x7a, 0x08,
                             0x0a, 0x01, 'x', 0x12, 0x03, 'a',  0,    'b'};
        static uint8_t buf[4096];
        size_t len = 0;
        int fd, got_read = 0, got_create = 0;
        /* No warm pool: the create must take its time for the read to find it so. */
        const char *cold[] = {"--warm", "0", NULL};

        it_daemon_start(&d, cold);
        fd = it_raw_connect(&d);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        it_raw_write(fd, nul_req, sizeof(nul_req));
        resp = it_raw_read(fd, &fr, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(resp->request_id, 9);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(resp->status->message, "NUL"));
        sbx__v1__response__free_unpacked(resp, NULL);

        /* Create and read in one write: the read arrives while the sandbox is creating. */
        req.has_request_id = 1;
        req.request_id = 10;
        req.body_case = SBX__V1__REQUEST__BODY_CREATE_SANDBOX;
        req.create_sandbox = &cs;
        cs.id = "pre";
        pack_request(&req, buf, &len);
        req.request_id = 11;
        req.body_case = SBX__V1__REQUEST__BODY_READ_FILE;
        req.read_file = &rf;
        rf.sandbox_id = "pre";
        rf.path = "/etc/passwd";
        pack_request(&req, buf, &len);
        it_raw_write(fd, buf, len);
        while (!got_read || !got_create) {
                resp = it_raw_read(fd, &fr, 30000);
                ck_assert_ptr_nonnull(resp);
                if (resp->request_id == 11) {
                        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__FAILED_PRECONDITION);
                        ck_assert_ptr_nonnull(strstr(resp->status->message, "not ready"));
                        got_read = 1;
                } else {
                        ck_assert_uint_eq(resp->request_id, 10);
                        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__OK);
                        got_create = 1;
                }
                sbx__v1__response__free_unpacked(resp, NULL);
        }
        /* Ready now. */
        len = 0;
        req.request_id = 12;
        pack_request(&req, buf, &len);
        it_raw_write(fd, buf, len);
        resp = it_raw_read(fd, &fr, 5000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__OK);
        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_READ_FILE);
        ck_assert_ptr_nonnull(strstr((char *)resp->read_file->data.data, "root:"));
        sbx__v1__response__free_unpacked(resp, NULL);
        close(fd);
        frame_reader_free(&fr);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A directory of 100,000 entries lists with a limit in bounded time and size. */
START_TEST(huge_directory) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_dir_list *l = NULL;
        size_t i;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "huge"));
        sh_ok(c, "huge",
              "mkdir /workspace/big && cd /workspace/big && seq -w 0 99999 | xargs touch");
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_list_dir(c, "huge", "big", 100, &l), SBX_OK);
        ck_assert_msg(it_now_ms() - t0 < 10000, "listing took %.0f ms", it_now_ms() - t0);
        ck_assert_uint_eq(l->n, 100);
        ck_assert(l->truncated);
        for (i = 0; i < l->n; i++) {
                char want[32];
                snprintf(want, sizeof(want), "%05zu", i);
                ck_assert_str_eq(l->v[i].name, want);
                ck_assert_int_eq(l->v[i].type, SBX_FILE_REGULAR);
        }
        sbx_dir_list_free(l);
        /* The default limit. */
        ck_assert_int_eq(sbx_list_dir(c, "huge", "big", 0, &l), SBX_OK);
        ck_assert_uint_eq(l->n, SBX_DEFAULT_LIST_LIMIT);
        ck_assert(l->truncated);
        ck_assert_str_eq(l->v[SBX_DEFAULT_LIST_LIMIT - 1].name, "09999");
        sbx_dir_list_free(l);
        /* All of them, at the maximum limit: sorted, not cut. */
        ck_assert_int_eq(sbx_list_dir(c, "huge", "big", SBX_MAX_LIST_LIMIT, &l), SBX_OK);
        ck_assert_uint_eq(l->n, 100000);
        ck_assert(!l->truncated);
        for (i = 1; i < l->n; i++)
                ck_assert_int_lt(strcmp(l->v[i - 1].name, l->v[i].name), 0);
        sbx_dir_list_free(l);

        /* The directory is read off the loop: sixteen listings sent in one write hold up
         * no other request (read on the loop, they held every client for their whole
         * time: a command's timeout went unenforced meanwhile). */
        {
                Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
                Sbx__V1__ListDirectory ld = SBX__V1__LIST_DIRECTORY__INIT;
                static uint8_t buf[4096];
                struct frame_reader fr;
                struct sbx_result *r;
                double t_true, t_lists;
                size_t len = 0;
                int fd = it_raw_connect(&d);

                frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
                req.has_request_id = 1;
                req.body_case = SBX__V1__REQUEST__BODY_LIST_DIRECTORY;
                req.list_directory = &ld;
                ld.sandbox_id = "huge";
                ld.path = "big";
                ld.has_limit = 1;
                ld.limit = 10;
                for (i = 0; i < 16; i++) {
                        req.request_id = 100 + i;
                        pack_request(&req, buf, &len);
                }
                t0 = it_now_ms();
                it_raw_write(fd, buf, len);
                usleep(20000); /* the daemon has them */
                r = it_sh(c, "huge", 30000, "true");
                t_true = it_now_ms() - t0;
                ck_assert_int_eq(r->exit_code, 0);
                sbx_result_free(r);
                for (i = 0; i < 16; i++) {
                        Sbx__V1__Response *resp = it_raw_read(fd, &fr, 60000);
                        ck_assert_ptr_nonnull(resp);
                        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_LIST_DIRECTORY);
                        ck_assert_uint_eq(resp->list_directory->n_entries, 10);
                        ck_assert_str_eq(resp->list_directory->entries[9]->name, "00009");
                        sbx__v1__response__free_unpacked(resp, NULL);
                }
                t_lists = it_now_ms() - t0;
                fprintf(stderr, "huge_directory: 16 listings %.0f ms, a command meanwhile %.0f ms\n",
                        t_lists, t_true);
                ck_assert_msg(t_lists < 200 || t_true < t_lists / 2,
                              "a command waited %.0f ms behind listings that took %.0f ms",
                              t_true, t_lists);
                frame_reader_free(&fr);
                close(fd);
        }
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Every file operation on an ended sandbox is SANDBOX_ENDED (terminal), not
 * UNAVAILABLE (the daemon out of reach, transient). */
START_TEST(terminated_sandbox_ended) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_read_result *r = NULL;
        struct sbx_dir_list *l = NULL;
        struct sbx_file_info *fi = NULL;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "gone"));
        must_write(c, "gone", "f", "x", 1, 0);
        ck_assert_int_eq(sbx_terminate(c, "gone", NULL), SBX_OK);
        ck_assert_int_eq(sbx_read(c, "gone", "f", 0, 0, &r), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_write(c, "gone", "f", "x", 1, 0, 0), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_list_dir(c, "gone", "/workspace", 0, &l), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_stat(c, "gone", "f", &fi), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_mkdir(c, "gone", "d", 0755, 0), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_remove(c, "gone", "f", 0), SBX_SANDBOX_ENDED);
        ck_assert_int_eq(sbx_read(c, "never", "f", 0, 0, &r), SBX_NOT_FOUND);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        /* The refusals are on record too (the write before the end, and six after). */
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE sandbox_id = "
                                             "'gone' AND result = 'SANDBOX_ENDED'"),
                         6);
}
END_TEST

/* Permissions are the sandbox user's: what it cannot read or write, the API cannot either;
 * files written through the API belong to it on the host. */
START_TEST(sandbox_user_permissions_and_ownership) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_result *res;
        struct sbx_read_result *r = NULL;
        struct sbx_dir_list *l = NULL;
        sbx_client *c;
        char w[700], rootfile[800], hp[900], *wv[1];
        struct stat st;
        unsigned long uid;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        /* A writable host directory holding a file of another user's, 0600 (the
         * caller's own files there are the sandbox user's: idmapped). */
        beside(&d, "w", w, sizeof(w));
        ck_assert_int_eq(mkdir(w, 0777), 0);
        ck_assert_int_eq(chmod(w, 0777), 0);
        snprintf(rootfile, sizeof(rootfile), "%s/rootonly", w);
        host_write(rootfile, "ROOT-ONLY", 0600);
        ck_assert_int_eq(chown(rootfile, 4321, 4321), 0);
        sbx_create_opts_init(&o);
        o.id = "perm";
        wv[0] = w;
        o.policy.writable_paths.v = wv;
        o.policy.writable_paths.n = 1;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);

        res = sh_out(c, "perm", "id -u");
        uid = strtoul((char *)res->stdout_data, NULL, 10);
        sbx_result_free(res);
        sh_ok(c, "perm",
              "cd /workspace && echo secret > locked && chmod 000 locked && mkdir closed && "
              "touch closed/f && chmod 000 closed");
        ck_assert_int_eq(sbx_read(c, "perm", "locked", 0, 0, &r), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_write(c, "perm", "locked", "x", 1, 0, 0), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_write(c, "perm", "locked", "x", 1, 0, SBX_WRITE_APPEND),
                         SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_list_dir(c, "perm", "closed", 0, &l), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_read(c, "perm", "closed/f", 0, 0, &r), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_read(c, "perm", rootfile, 0, 0, &r), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_read(c, "perm", "/proc/1/environ", 0, 0, &r), SBX_PERMISSION_DENIED);
        ck_assert_int_eq(sbx_remove(c, "perm", "closed/f", 0), SBX_PERMISSION_DENIED);
        /* The writable path: the API writes there as the sandbox user, which lands on
         * the host as the sandbox's owner (the caller, root here: idmapped). */
        snprintf(hp, sizeof(hp), "%s/from-api", w);
        must_write(c, "perm", hp, "x", 1, 0);
        ck_assert_int_eq(stat(hp, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        /* The workspace, seen from the host. */
        must_write(c, "perm", "o/p/f", "owned", 5, SBX_WRITE_CREATE_PARENTS);
        ck_assert_int_eq(sbx_mkdir(c, "perm", "m", 0750, 0), SBX_OK);
        snprintf(hp, sizeof(hp), "%s/sandboxes/perm/workspace/o/p/f", d.state);
        ck_assert_int_eq(stat(hp, &st), 0);
        ck_assert_uint_eq(st.st_uid, uid);
        ck_assert_uint_eq(st.st_gid, uid);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
        snprintf(hp, sizeof(hp), "%s/sandboxes/perm/workspace/o", d.state);
        ck_assert_int_eq(stat(hp, &st), 0);
        ck_assert_uint_eq(st.st_uid, uid);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        snprintf(hp, sizeof(hp), "%s/sandboxes/perm/workspace/m", d.state);
        ck_assert_int_eq(stat(hp, &st), 0);
        ck_assert_uint_eq(st.st_uid, uid);
        ck_assert_uint_eq(st.st_mode & 07777, 0750);
        ck_assert_int_eq(sbx_remove(c, "perm", "m", 0), SBX_OK);
        /* The daemon has its own rights back: it removes the workspace, 000 modes and all. */
        ck_assert_int_eq(sbx_terminate(c, "perm", NULL), SBX_OK);
        snprintf(hp, sizeof(hp), "%s/sandboxes/perm/workspace", d.state);
        ck_assert_int_eq(access(hp, F_OK), -1);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Paths hidden by denied_read_paths are NOT_FOUND however they are reached. */
START_TEST(denied_paths_not_found) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_dir_list *l = NULL;
        struct sbx_file_info *fi = NULL;
        sbx_client *c;
        char w[700], sdir[800], sfile[800], key[800], cmd[4096], *wv[1], *dv[2];
        size_t i;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        beside(&d, "proj", w, sizeof(w));
        snprintf(sdir, sizeof(sdir), "%s/secrets", w);
        snprintf(sfile, sizeof(sfile), "%s/secrets/token", w);
        snprintf(key, sizeof(key), "%s/key.pem", w);
        ck_assert_int_eq(mkdir(w, 0777), 0);
        ck_assert_int_eq(mkdir(sdir, 0755), 0);
        host_write(sfile, "TOKEN-IN-DENIED-DIR", 0644);
        host_write(key, "KEY-IN-DENIED-FILE", 0644);
        ck_assert_int_eq(chmod(w, 0777), 0);
        sbx_create_opts_init(&o);
        o.id = "deny";
        wv[0] = w;
        dv[0] = sdir;
        dv[1] = key;
        o.policy.writable_paths.v = wv;
        o.policy.writable_paths.n = 1;
        o.policy.denied_read_paths.v = dv;
        o.policy.denied_read_paths.n = 2;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        snprintf(cmd, sizeof(cmd),
                 "cd /workspace && ln -s '%s' tok && ln -s '%s' key && ln -s '%s' sec && "
                 "ln -s '%s' proj",
                 sfile, key, sdir, w);
        sh_ok(c, "deny", cmd);
        ck_assert_int_eq(read_refused(c, "deny", sfile, (const uint8_t *)"TOKEN", 5),
                         SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "deny", key, (const uint8_t *)"KEY-", 4), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "deny", "tok", (const uint8_t *)"TOKEN", 5),
                         SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "deny", "key", (const uint8_t *)"KEY-", 4), SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "deny", "proj/key.pem", (const uint8_t *)"KEY-", 4),
                         SBX_NOT_FOUND);
        ck_assert_int_eq(read_refused(c, "deny", "sec/token", (const uint8_t *)"TOKEN", 5),
                         SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_list_dir(c, "deny", sdir, 0, &l), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_list_dir(c, "deny", "sec", 0, &l), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_stat(c, "deny", sdir, &fi), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_stat(c, "deny", key, &fi), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_write(c, "deny", key, "x", 1, 0, 0), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_write(c, "deny", "sec/new", "x", 1, 0, 0), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_remove(c, "deny", key, 0), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_remove(c, "deny", "sec", 1), SBX_OK); /* the link itself */
        /* The writable directory lists without them. */
        ck_assert_int_eq(sbx_list_dir(c, "deny", w, 0, &l), SBX_OK);
        for (i = 0; i < l->n; i++) {
                ck_assert_str_ne(l->v[i].name, "secrets");
                ck_assert_str_ne(l->v[i].name, "key.pem");
        }
        sbx_dir_list_free(l);
        /* The host's files are untouched. */
        ck_assert_int_eq(access(sfile, F_OK), 0);
        ck_assert_int_eq(access(key, F_OK), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* MakeDirectory with and without parents; Remove of files, empty and full directories,
 * and of a tree holding a symlink to a host directory (which survives). */
START_TEST(mkdir_and_remove) {
        struct it_daemon d;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_file_info *fi = NULL;
        sbx_client *c;
        char h[700], hf[800], cmd[2048], *wv[1];

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        beside(&d, "hostdir", h, sizeof(h));
        ck_assert_int_eq(mkdir(h, 0777), 0);
        ck_assert_int_eq(chmod(h, 0777), 0);
        snprintf(hf, sizeof(hf), "%s/keep", h);
        host_write(hf, "KEEP", 0666);
        sbx_create_opts_init(&o);
        o.id = "md";
        wv[0] = h;
        o.policy.writable_paths.v = wv;
        o.policy.writable_paths.n = 1;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);

        ck_assert_int_eq(sbx_mkdir(c, "md", "a/b/c", 0700, 0), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_mkdir(c, "md", "a/b/c", 0700, 1), SBX_OK);
        ck_assert_int_eq(sbx_mkdir(c, "md", "a/b/c", 0700, 1), SBX_OK);
        ck_assert_int_eq(sbx_mkdir(c, "md", "a/b/c", 0700, 0), SBX_ALREADY_EXISTS);
        ck_assert_int_eq(sbx_stat(c, "md", "a/b/c", &fi), SBX_OK);
        ck_assert(fi->is_dir);
        ck_assert_uint_eq(fi->mode, 0700);
        sbx_file_info_free(fi);
        ck_assert_int_eq(sbx_stat(c, "md", "a/b", &fi), SBX_OK);
        ck_assert_uint_eq(fi->mode, 0755);
        sbx_file_info_free(fi);
        must_write(c, "md", "a/file", "f", 1, 0);
        ck_assert_int_eq(sbx_mkdir(c, "md", "a/file", 0755, 1), SBX_ALREADY_EXISTS);
        ck_assert_int_eq(sbx_mkdir(c, "md", "a/file/x", 0755, 1), SBX_NOT_FOUND);

        /* A tree with links to the host directory and to /usr, and a file in the host dir
         * reached through the link. */
        snprintf(cmd, sizeof(cmd),
                 "cd /workspace/a && ln -s '%s' b/c/hostlink && ln -s /usr b/usr && "
                 "ln -s '%s/keep' keeplink && mkdir -p deep/1/2/3/4 && touch deep/1/2/3/4/x "
                 "b/c/y && mkfifo b/fifo",
                 h, h);
        sh_ok(c, "md", cmd);
        ck_assert_int_eq(sbx_remove(c, "md", "a", 0), SBX_FAILED_PRECONDITION);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "recursive"));
        ck_assert_int_eq(sbx_remove(c, "md", "a/b/c/hostlink/", 1), SBX_OK);
        ck_assert_int_eq(access(hf, F_OK), 0); /* removing the link left the host alone */
        sh_ok(c, "md", "ln -s /workspace/../../.. /workspace/a/b/c/rootlink");
        ck_assert_int_eq(sbx_remove(c, "md", "a", 1), SBX_OK);
        ck_assert_int_eq(sbx_stat(c, "md", "a", &fi), SBX_NOT_FOUND);
        ck_assert_int_eq(access(hf, F_OK), 0);
        ck_assert_int_eq(access("/usr/bin/env", F_OK), 0);
        /* Files, empty directories; the root and the workspace stay. */
        must_write(c, "md", "f", "f", 1, 0);
        ck_assert_int_eq(sbx_remove(c, "md", "f", 0), SBX_OK);
        ck_assert_int_eq(sbx_remove(c, "md", "f", 0), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_mkdir(c, "md", "e", 0755, 0), SBX_OK);
        ck_assert_int_eq(sbx_remove(c, "md", "e", 0), SBX_OK);
        ck_assert_int_eq(sbx_remove(c, "md", "/", 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_remove(c, "md", "/workspace", 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_remove(c, "md", "/workspace/.", 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_remove(c, "md", "/tmp/../workspace/", 1), SBX_INVALID_ARGUMENT);
        sh_ok(c, "md",
              "ln -s / /workspace/r && mkdir /workspace/q && ln -s /workspace/q /workspace/ws");
        ck_assert_int_eq(sbx_remove(c, "md", "r/workspace", 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_remove(c, "md", "/workspace/r/proc", 1), SBX_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(sbx_error_message(c), "mount point"));
        ck_assert_int_eq(sbx_remove(c, "md", "/tmp", 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(sbx_stat(c, "md", "/workspace/r/workspace/q", &fi), SBX_OK);
        sbx_file_info_free(fi);
        /* The host directory itself is a mount: it cannot be removed, its file is kept. */
        ck_assert_int_eq(sbx_remove(c, "md", h, 1), SBX_INVALID_ARGUMENT);
        ck_assert_int_eq(access(hf, F_OK), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Every file operation, successful or not, is in the records. */
START_TEST(every_operation_recorded) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_read_result *r = NULL;
        struct sbx_dir_list *l = NULL;
        struct sbx_file_info *fi = NULL;
        char sql[256];

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "rec"));
        must_write(c, "rec", "a", "hello", 5, 0); /* 1 */
        r = must_read(c, "rec", "a", 0, 0);       /* 2 */
        sbx_read_result_free(r);
        ck_assert_int_eq(sbx_read(c, "rec", "missing", 0, 0, &r), SBX_NOT_FOUND); /* 3 */
        ck_assert_int_eq(sbx_list_dir(c, "rec", "/workspace", 0, &l), SBX_OK);    /* 4 */
        sbx_dir_list_free(l);
        ck_assert_int_eq(sbx_stat(c, "rec", "a", &fi), SBX_OK); /* 5 */
        sbx_file_info_free(fi);
        ck_assert_int_eq(sbx_mkdir(c, "rec", "d", 0755, 0), SBX_OK);                  /* 6 */
        ck_assert_int_eq(sbx_remove(c, "rec", "d", 0), SBX_OK);                       /* 7 */
        ck_assert_int_eq(sbx_write(c, "rec", "/etc/x", "x", 1, 0, 0), SBX_READ_ONLY); /* 8 */
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE sandbox_id='rec'"),
                         8);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM fileops WHERE sandbox_id='rec' AND caller_uid=%u AND "
                 "caller_pid > 0 AND client_name='itest' AND time_ms > 0",
                 (unsigned)getuid());
        ck_assert_int_eq(it_db_int(&d, sql), 8);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE op='write' AND "
                                             "path='a' AND bytes=5 AND result='OK'"),
                         1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE op='read' AND "
                                             "path='a' AND bytes=5 AND result='OK'"),
                         1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE op='read' AND "
                                             "path='missing' AND result='NOT_FOUND'"),
                         1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE op='write' AND "
                                             "path='/etc/x' AND result='READ_ONLY'"),
                         1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(DISTINCT op) FROM fileops"), 6);
}
END_TEST

/* The sbx tool: write then read, ls --json, and cp of a tree in and back out. */
START_TEST(cli_read_write_ls_cp) {
        struct it_daemon d;
        sbx_client *c;
        char src[700], back[700], cmd[8192], dst[64], *out = NULL, *err = NULL;
        const char *write_args[] = {"write", "cli", "/workspace/notes.txt", NULL};
        const char *read_args[] = {"read", "cli", "notes.txt", NULL};
        const char *ls_args[] = {"ls", "--json", "cli", "/workspace", NULL};
        const char *bad_args[] = {"read", "cli", "/etc/shadow", NULL};
        const char *cp_in[] = {"cp", src, dst, NULL};
        const char *cp_out[] = {"cp", "cli:/workspace/tree", back, NULL};
        int rc;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "cli"));
        ck_assert_int_eq(it_sbx(&d, "line one\nline two\n", 18, NULL, &err, write_args), 0);
        free(err);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, read_args), 0);
        ck_assert_str_eq(out, "line one\nline two\n");
        free(out);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, &out, NULL, ls_args), 0);
        ck_assert_ptr_nonnull(strstr(out, "\"name\":\"notes.txt\""));
        ck_assert_ptr_nonnull(strstr(out, "\"type\":\"file\""));
        ck_assert_ptr_nonnull(strstr(out, "\"size\":18"));
        free(out);
        ck_assert_int_eq(it_sbx(&d, NULL, 0, NULL, &err, bad_args), 125);
        ck_assert_ptr_nonnull(strstr(err, "sbx: NOT_FOUND: "));
        free(err);

        snprintf(src, sizeof(src), "%s/tree", d.dir);
        snprintf(back, sizeof(back), "%s/back", d.dir);
        snprintf(dst, sizeof(dst), "cli:/workspace/tree");
        snprintf(cmd, sizeof(cmd),
                 "set -e; mkdir -p '%s/sub dir/deeper' '%s/empty'; printf 'a\\0b\\377' > '%s/bin'; "
                 "echo top > '%s/top.txt'; echo deep > '%s/sub dir/deeper/ünï.txt'; "
                 "head -c 200000 /dev/urandom > '%s/sub dir/random'",
                 src, src, src, src, src, src);
        ck_assert_int_eq(system(cmd), 0);
        rc = it_sbx(&d, NULL, 0, NULL, &err, cp_in);
        ck_assert_msg(rc == 0, "cp in: %d: %s", rc, err);
        free(err);
        rc = it_sbx(&d, NULL, 0, NULL, &err, cp_out);
        ck_assert_msg(rc == 0, "cp out: %d: %s", rc, err);
        free(err);
        snprintf(cmd, sizeof(cmd), "diff -r '%s' '%s'", src, back);
        ck_assert_int_eq(system(cmd), 0);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Rootless mode: the daemon's own uid is the sandbox user, and the same rules hold. */
START_TEST(rootless_daemon) {
        struct it_daemon d;
        sbx_client *c;
        struct sbx_read_result *r = NULL;
        struct sbx_result *res;
        char hp[900];
        struct stat st;

        it_daemon_start_as(&d, 65534, 65534, NULL);
        c = it_connect(&d);
        free(it_create(c, "rl"));
        sh_ok(c, "rl", "ln -s /etc/shadow /workspace/s && printf cmd > /workspace/c");
        must_write(c, "rl", "sub/f", "api", 3, SBX_WRITE_CREATE_PARENTS);
        r = must_read(c, "rl", "c", 0, 0);
        ck_assert_uint_eq(r->len, 3);
        ck_assert_mem_eq(r->data, "cmd", 3);
        sbx_read_result_free(r);
        ck_assert_int_eq(sbx_read(c, "rl", "s", 0, 0, &r), SBX_NOT_FOUND);
        ck_assert_int_eq(sbx_write(c, "rl", "/etc/x", "x", 1, 0, 0), SBX_READ_ONLY);
        res = sh_out(c, "rl", "cat /workspace/sub/f");
        ck_assert_str_eq((char *)res->stdout_data, "api");
        sbx_result_free(res);
        snprintf(hp, sizeof(hp), "%s/sandboxes/rl/workspace/sub/f", d.state);
        ck_assert_int_eq(stat(hp, &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- work off the loop ----------------------------------------------------------------- */

/* A user of a root daemon's socket group, as in it_trust.c: a raw uid without a passwd
 * entry. */
#define ALICE    3101u
#define SOCK_GRP 3100u

/* A tree of dirs x files empty files at /workspace/PATH of id, made by one python3
 * process in the sandbox (400,000 in a few seconds). The shell line, in buf. */
static const char *tree_script(char *buf, size_t len, const char *path, int dirs, int files) {
        snprintf(
                buf, len,
                "python3 -c 'import os\n"
                "for i in range(%d):\n"
                "    d = \"/workspace/%s/d%%04d\" %% i\n"
                "    os.makedirs(d)\n"
                "    for j in range(%d):\n"
                "        os.close(os.open(d + \"/f%%05d\" %% j, os.O_CREAT | os.O_WRONLY, 0o644))\n"
                "'",
                dirs, path, files);
        return buf;
}

/* Makes tree_script's tree in id (a loaded machine takes minutes for 300,000 files). */
static void make_tree(sbx_client *c, const char *id, const char *path, int dirs, int files) {
        char script[1024];
        struct sbx_result *r = it_sh(c, id, 600000, tree_script(script, sizeof(script), path,
                                                               dirs, files));
        ck_assert_msg(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0,
                      "making the tree %s: outcome %d exit %d: %s", path, (int)r->outcome,
                      r->exit_code, (const char *)r->stderr_data);
        sbx_result_free(r);
}

/* The number of directories left at the top of /workspace/PATH of id (-1: gone). */
static int dirs_left(sbx_client *c, const char *id, const char *path) {
        char cmd[300];
        struct sbx_result *r;
        int n = -1;

        snprintf(cmd, sizeof(cmd), "if [ -d /workspace/%s ]; then ls /workspace/%s | wc -l; fi",
                 path, path);
        r = sh_out(c, id, cmd);
        if (r->stdout_len > 0)
                n = atoi((const char *)r->stdout_data);
        sbx_result_free(r);
        return n;
}

/* What ALICE's client reports to the test through a pipe. */
struct alice_report {
        char stage;       /* 'R': about to send the Remove; 'D': done; 'E': failed before */
        int code;         /* the Remove's, or the failing call's */
        double remove_ms; /* how long the Remove took */
        char msg[256];
};

static void alice_send(int fd, struct alice_report *a) {
        if (write(fd, a, sizeof(*a)) != (ssize_t)sizeof(*a))
                _exit(3);
}

/* In a forked child: ALICE makes sandbox id, a tree of 400 x 1000 files in it, then
 * (once a byte comes on go_fd) removes it with one recursive Remove, reporting each
 * stage on fd. */
static void alice_big_remove(const struct it_daemon *d, const char *id, int fd, int go_fd,
                             pid_t parent) {
        static const gid_t groups[] = {SOCK_GRP};
        struct alice_report a;
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct sbx_exec_opts eo;
        struct sbx_result *r = NULL;
        sbx_client *c = NULL;
        char script[1024], go;
        enum sbx_code code;
        double t0;

        memset(&a, 0, sizeof(a));
        if (setgroups(1, groups) < 0 || setresgid(ALICE, ALICE, ALICE) < 0 ||
            setresuid(ALICE, ALICE, ALICE) < 0)
                _exit(120);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(121);
        code = sbx_connect(d->sock, "it_files-alice", &c);
        if (code == SBX_OK) {
                sbx_set_call_timeout_ms(c, 300000);
                sbx_create_opts_init(&o);
                o.id = id;
                o.timeout_ms = 600000;
                code = sbx_create(c, &o, &sb);
                sbx_sandbox_free(sb);
        }
        if (code == SBX_OK) {
                sbx_exec_opts_init(&eo);
                eo.shell = tree_script(script, sizeof(script), "big", 400, 1000);
                eo.timeout_ms = 600000;
                code = sbx_exec(c, id, &eo, &r);
                if (code == SBX_OK && !(r->outcome == SBX_OUTCOME_EXITED && r->exit_code == 0))
                        code = SBX_INTERNAL;
                sbx_result_free(r);
        }
        if (code != SBX_OK) {
                a.stage = 'E';
                a.code = (int)code;
                snprintf(a.msg, sizeof(a.msg), "%s", c ? sbx_error_message(c) : "connect");
                alice_send(fd, &a);
                _exit(0);
        }
        a.stage = 'R';
        alice_send(fd, &a);
        if (read(go_fd, &go, 1) != 1) /* the test measures from here */
                _exit(4);
        t0 = it_now_ms();
        code = sbx_remove(c, id, "big", 1);
        a.stage = 'D';
        a.code = (int)code;
        a.remove_ms = it_now_ms() - t0;
        snprintf(a.msg, sizeof(a.msg), "%s", code == SBX_OK ? "" : sbx_error_message(c));
        alice_send(fd, &a);
        sbx_close(c);
        _exit(0);
}

/* Reads ALICE's next report; 0 when none came within timeout_ms. */
static int alice_read(int fd, struct alice_report *a, int timeout_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, timeout_ms) <= 0)
                return 0;
        n = read(fd, a, sizeof(*a));
        ck_assert_int_eq(n, (ssize_t)sizeof(*a));
        return 1;
}

/* The timeouts of B's commands while ALICE's Remove runs, on a client of their own. */
struct timeout_probe {
        const struct it_daemon *d;
        const char *id;
        atomic_int stop;
        atomic_int started; /* the first command has started */
        int n;                /* commands that timed out */
        double worst_late_ms; /* the latest a result came after its 1 s timeout */
        int bad;              /* a result that was not timed_out */
};

static void timeout_probe_started(void *ud, const char *command_id) {
        atomic_store(&((struct timeout_probe *)ud)->started, 1);
}

static void *timeout_probe_run(void *arg) {
        struct timeout_probe *p = arg;
        sbx_client *c = NULL;

        if (sbx_connect(p->d->sock, "it_files-timeouts", &c) != SBX_OK) {
                p->bad = 1;
                atomic_store(&p->started, 1);
                return NULL;
        }
        while (!atomic_load(&p->stop)) {
                static const char *const argv[] = {"sleep", "10", NULL};
                struct sbx_exec_opts o;
                struct sbx_result *r = NULL;
                double t0 = it_now_ms(), late;

                sbx_exec_opts_init(&o);
                o.argv = argv;
                o.argc = 2;
                o.timeout_ms = 1000;
                o.on_started = timeout_probe_started;
                o.userdata = p;
                if (sbx_exec(c, p->id, &o, &r) != SBX_OK || r->outcome != SBX_OUTCOME_TIMED_OUT) {
                        p->bad = 1;
                        atomic_store(&p->started, 1);
                        sbx_result_free(r);
                        break;
                }
                sbx_result_free(r);
                late = it_now_ms() - t0 - 1000;
                if (late > p->worst_late_ms)
                        p->worst_late_ms = late;
                p->n++;
        }
        sbx_close(c);
        return NULL;
}

/* What a client saw of the daemon's service while another's request ran. */
struct probe_stats {
        int probes;
        double worst_list, worst_true;
};

/* How late this test process itself wakes (a thread sleeping 5 ms at a time) while it
 * measures: what the machine alone adds to every latency measured here, the daemon
 * aside. Bounds are on the daemon's part. */
struct host_lag {
        pthread_t th;
        atomic_int stop;
        double worst_ms;
};

static void *host_lag_run(void *arg) {
        struct host_lag *h = arg;

        while (!atomic_load(&h->stop)) {
                double t0 = it_now_ms(), late;
                usleep(5000);
                late = it_now_ms() - t0 - 5;
                if (late > h->worst_ms)
                        h->worst_ms = late;
        }
        return NULL;
}

static void host_lag_start(struct host_lag *h) {
        memset(h, 0, sizeof(*h));
        ck_assert_int_eq(pthread_create(&h->th, NULL, host_lag_run, h), 0);
}

/* The worst lateness seen, once the thread has stopped. */
static double host_lag_stop(struct host_lag *h) {
        atomic_store(&h->stop, 1);
        ck_assert_int_eq(pthread_join(h->th, NULL), 0);
        return h->worst_ms;
}

/* One probe of the service: list the sandboxes, then run `true` in sandbox id. */
static void probe_once(sbx_client *c, const char *id, struct probe_stats *ps) {
        struct sbx_sandbox_list *l = NULL;
        struct sbx_result *r;
        double t0 = it_now_ms(), t1;

        ck_assert_int_eq(sbx_list(c, NULL, &l), SBX_OK);
        sbx_sandbox_list_free(l);
        t1 = it_now_ms();
        r = it_exec(c, id, 30000, (const char *const[]){"true", NULL});
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        if (t1 - t0 > ps->worst_list)
                ps->worst_list = t1 - t0;
        if (it_now_ms() - t1 > ps->worst_true)
                ps->worst_true = it_now_ms() - t1;
        ps->probes++;
}

/* ALICE's sandbox makes 400,000 files and she removes them with one recursive Remove
 * while another user (root, a second client) lists sandboxes and runs `true` in a
 * sandbox of its own every 50 ms, and runs commands with a 1 s timeout: none of that
 * waits for the Remove. On the loop the Remove held every client for its whole time
 * (9.0 s on a loaded machine: the list waited 8.95 s, the 1 s timeout fired 8.0 s
 * late). */
START_TEST(big_remove_stalls_nobody) {
        const char *flags[] = {"--socket-group", "3100", NULL};
        struct timeout_probe tp;
        struct alice_report a;
        struct it_daemon d;
        struct sbx_file_info *fi = NULL;
        struct probe_stats ps;
        struct host_lag lag;
        double t_remove0, host;
        pthread_t th;
        sbx_client *c;
        int p[2], go[2], st;
        pid_t pid, parent = getpid();

        it_daemon_start(&d, flags);
        c = it_connect(&d);
        free(it_create(c, "b-own"));
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                close(go[1]);
                alice_big_remove(&d, "a-big", p[1], go[0], parent);
        }
        close(p[1]);
        close(go[0]);
        ck_assert_msg(alice_read(p[0], &a, 620000), "ALICE made no tree in 620 s");
        ck_assert_msg(a.stage == 'R', "ALICE's tree: %s: %s", code_name((enum sbx_code)a.code),
                      a.msg);
        memset(&tp, 0, sizeof(tp));
        memset(&ps, 0, sizeof(ps));
        tp.d = &d;
        tp.id = "b-own";
        host_lag_start(&lag);
        ck_assert_int_eq(pthread_create(&th, NULL, timeout_probe_run, &tp), 0);
        /* The Remove comes while a command with a 1 s timeout runs. */
        while (!atomic_load(&tp.started))
                usleep(1000);
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        close(go[1]);
        t_remove0 = it_now_ms();
        /* Every 50 ms until the Remove answers: list the sandboxes, then `true`. */
        while (!alice_read(p[0], &a, 50)) {
                probe_once(c, "b-own", &ps);
                ck_assert_msg(it_now_ms() - t_remove0 < 240000, "the Remove took over 240 s");
        }
        atomic_store(&tp.stop, 1);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        host = host_lag_stop(&lag);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ALICE's client: status %d", st);
        fprintf(stderr,
                "big_remove_stalls_nobody: Remove of 400,000 files %.0f ms; meanwhile %d probes, "
                "worst list %.0f ms, worst true %.0f ms, %d 1 s timeouts at worst %.0f ms late; "
                "this process woke up to %.0f ms late\n",
                a.remove_ms, ps.probes, ps.worst_list, ps.worst_true, tp.n, tp.worst_late_ms,
                host);
        ck_assert_msg(a.stage == 'D' && a.code == SBX_OK, "the Remove: %s: %s",
                      code_name((enum sbx_code)a.code), a.msg);
        ck_assert_msg(ps.worst_list < 300 + host, "a list of sandboxes took %.0f ms",
                      ps.worst_list);
        ck_assert_msg(ps.worst_true < 300 + host, "`true` took %.0f ms", ps.worst_true);
        ck_assert_msg(tp.worst_late_ms < 300 + host, "a 1 s timeout fired %.0f ms late",
                      tp.worst_late_ms);
        /* It was measured while the Remove ran: it lasted a second or more, with probes
         * and a command timeout inside it. */
        ck_assert_msg(ps.probes >= 5 && tp.n >= 1 && !tp.bad,
                      "too little was measured during the Remove (%.0f ms): %d probes, %d "
                      "timeouts%s",
                      a.remove_ms, ps.probes, tp.n, tp.bad ? ", a timeout probe failed" : "");
        /* The tree is gone (root may look into ALICE's sandbox). */
        ck_assert_int_eq(sbx_stat(c, "a-big", "big", &fi), SBX_NOT_FOUND);
        ck_assert_int_eq(dirs_left(c, "a-big", "big"), -1);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE sandbox_id = 'a-big' "
                                       "AND op = 'remove' AND result = 'OK'"),
                         1);
}
END_TEST

/* Appends a recursive Remove of path in id, numbered rid, to out. */
static void pack_remove(uint8_t *out, size_t *len, uint64_t rid, char *id, char *path) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__Remove rm = SBX__V1__REMOVE__INIT;

        req.has_request_id = 1;
        req.request_id = rid;
        req.body_case = SBX__V1__REQUEST__BODY_REMOVE;
        req.remove = &rm;
        rm.sandbox_id = id;
        rm.path = path;
        rm.has_recursive = 1;
        rm.recursive = 1;
        pack_request(&req, out, len);
}

/* Sends a recursive Remove of the tree path (300 directories) on a connection of its
 * own and returns that connection once the removal has begun (a directory is gone), or
 * -1 when it had finished before anything was seen. */
static int remove_begun(struct it_daemon *d, sbx_client *c, char *id, char *path) {
        static uint8_t buf[512];
        size_t len = 0;
        int fd = it_raw_connect(d), i, n = 300;

        pack_remove(buf, &len, 7, id, path);
        it_raw_write(fd, buf, len);
        for (i = 0; i < 3000 && n == 300; i++)
                n = dirs_left(c, id, path);
        ck_assert_msg(n < 300, "the removal of %s never began", path);
        if (n <= 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* A recursive Remove whose client goes away stops there (what is left stays, and no
 * more goes), and so does one whose sandbox is terminated, which answers
 * SANDBOX_ENDED at once; the daemon serves on (and under `make asan` leaks nothing). */
START_TEST(remove_stops_when_client_or_sandbox_goes) {
        struct it_daemon d;
        struct frame_reader fr;
        Sbx__V1__Response *resp;
        struct sbx_result *r;
        sbx_client *c;
        int fd = -1, attempt, n1 = 0, n2 = 0;
        double t0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "rc"));
        /* The client goes: retried when the Remove finished before it went. */
        for (attempt = 0; attempt < 3 && fd < 0; attempt++) {
                make_tree(c, "rc", "t", 300, 1000);
                fd = remove_begun(&d, c, "rc", "t");
                if (fd < 0)
                        continue;
                close(fd);
                usleep(300000);
                n1 = dirs_left(c, "rc", "t");
                usleep(500000);
                n2 = dirs_left(c, "rc", "t");
                if (n1 <= 0)
                        fd = -1; /* it ended just before the client went: again */
        }
        ck_assert_msg(fd >= 0, "every Remove finished before its client went");
        fprintf(stderr, "remove_stops: client gone: %d of 300 directories left, then %d\n", n1, n2);
        ck_assert_int_gt(n1, 0);
        ck_assert_int_eq(n1, n2);
        ck_assert_int_eq(it_wait_log(&d, "stopped: its client went away", 1), 1);
        ck_assert_int_eq(sbx_remove(c, "rc", "t", 1), SBX_OK); /* the rest, as asked */

        /* The sandbox is terminated. */
        fd = -1;
        for (attempt = 0; attempt < 3 && fd < 0; attempt++) {
                make_tree(c, "rc", "u", 300, 1000);
                fd = remove_begun(&d, c, "rc", "u");
        }
        ck_assert_msg(fd >= 0, "every Remove finished before the sandbox was terminated");
        t0 = it_now_ms();
        ck_assert_int_eq(sbx_terminate(c, "rc", NULL), SBX_OK);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        resp = it_raw_read(fd, &fr, 10000);
        ck_assert_ptr_nonnull(resp);
        fprintf(stderr, "remove_stops: sandbox terminated: the Remove answered %.0f ms after: %s\n",
                it_now_ms() - t0, resp->status->message);
        ck_assert_uint_eq(resp->request_id, 7);
        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__ENDED);
        ck_assert_double_lt(it_now_ms() - t0, 5000);
        sbx__v1__response__free_unpacked(resp, NULL);
        frame_reader_free(&fr);
        close(fd);

        /* The daemon serves on. */
        free(it_create(c, "after"));
        r = it_exec(c, "after", 30000, (const char *const[]){"true", NULL});
        ck_assert_int_eq(r->exit_code, 0);
        sbx_result_free(r);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE sandbox_id = 'rc' AND "
                                       "op = 'remove' AND path = 't' AND result = 'UNAVAILABLE'"),
                         1);
        ck_assert_int_eq(it_db_int(&d, "SELECT count(*) FROM fileops WHERE sandbox_id = 'rc' AND "
                                       "op = 'remove' AND path = 'u' AND result = 'SANDBOX_ENDED'"),
                         1);
}
END_TEST

/* One user's work off the loop is bounded: SBX_OFFLOAD_MAX_RUNNING_PER_UID recursive
 * Removes run, SBX_OFFLOAD_MAX_QUEUED_PER_UID more wait, and the next one is
 * RESOURCE_EXHAUSTED, naming the bound; those that waited are done in turn. The
 * requests come in one write, so that all are taken before any can end. */
START_TEST(removes_bounded_per_user) {
        const unsigned n = SBX_OFFLOAD_MAX_RUNNING_PER_UID + SBX_OFFLOAD_MAX_QUEUED_PER_UID + 1;
        static uint8_t buf[16384];
        struct it_daemon d;
        struct frame_reader fr;
        unsigned i, ok = 0, refused = 0;
        size_t len = 0;
        sbx_client *c;
        int fd;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "qb"));
        sh_ok(c, "qb",
              "for i in $(seq 1 40); do mkdir -p /workspace/q$i/a && "
              "touch /workspace/q$i/a/f; done");
        for (i = 1; i <= n; i++) {
                char path[16];
                snprintf(path, sizeof(path), "q%u", i);
                pack_remove(buf, &len, 100 + i, "qb", path);
        }
        fd = it_raw_connect(&d);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        it_raw_write(fd, buf, len);
        for (i = 0; i < n; i++) {
                Sbx__V1__Response *resp = it_raw_read(fd, &fr, 30000);
                ck_assert_ptr_nonnull(resp);
                if (resp->status->code == SBX__V1__CODE__OK) {
                        ok++;
                } else {
                        ck_assert_int_eq(resp->status->code, SBX__V1__CODE__RESOURCE_EXHAUSTED);
                        ck_assert_uint_eq(resp->request_id, 100 + n);
                        ck_assert_msg(strstr(resp->status->message, "the most one user may queue"),
                                      "%s", resp->status->message);
                        refused++;
                }
                sbx__v1__response__free_unpacked(resp, NULL);
        }
        ck_assert_uint_eq(ok, n - 1);
        ck_assert_uint_eq(refused, 1);
        ck_assert_int_eq(dirs_left(c, "qb", "q1"), -1);
        ck_assert_int_eq(dirs_left(c, "qb", "q34"), -1);
        ck_assert_int_eq(dirs_left(c, "qb", "q35"), 1); /* the refused one */
        frame_reader_free(&fr);
        close(fd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Four listings of 100,000 entries (the most one returns) of a directory of 300,000,
 * sent in one write, while another client lists sandboxes and runs `true` every 50 ms:
 * none of it waits for the listings. Describing the entries (a statx each) on the loop
 * held every client while it ran. */
START_TEST(big_listing_stalls_nobody) {
        static uint8_t buf[4096];
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__ListDirectory ld = SBX__V1__LIST_DIRECTORY__INIT;
        struct probe_stats ps;
        struct host_lag lag;
        struct frame_reader fr;
        struct it_daemon d;
        struct pollfd pfd;
        sbx_client *c;
        size_t len = 0;
        double t0, t_lists = 0, host;
        int fd, i, got = 0;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        free(it_create(c, "lb"));
        free(it_create(c, "b-own"));
        make_tree(c, "lb", "flat", 1, 300000);
        req.has_request_id = 1;
        req.body_case = SBX__V1__REQUEST__BODY_LIST_DIRECTORY;
        req.list_directory = &ld;
        ld.sandbox_id = "lb";
        ld.path = "flat/d0000";
        ld.has_limit = 1;
        ld.limit = SBX_MAX_LIST_LIMIT;
        for (i = 0; i < 4; i++) {
                req.request_id = 50 + (uint64_t)i;
                pack_request(&req, buf, &len);
        }
        memset(&ps, 0, sizeof(ps));
        fd = it_raw_connect(&d);
        frame_reader_init(&fr, SBX_DEFAULT_MAX_FRAME_BYTES);
        host_lag_start(&lag);
        t0 = it_now_ms();
        it_raw_write(fd, buf, len);
        pfd.fd = fd;
        pfd.events = POLLIN;
        while (got < 4) {
                if (poll(&pfd, 1, 50) > 0) {
                        Sbx__V1__Response *resp = it_raw_read(fd, &fr, 60000);
                        ck_assert_ptr_nonnull(resp);
                        ck_assert_int_eq(resp->body_case, SBX__V1__RESPONSE__BODY_LIST_DIRECTORY);
                        ck_assert_uint_eq(resp->list_directory->n_entries, SBX_MAX_LIST_LIMIT);
                        ck_assert(resp->list_directory->truncated);
                        ck_assert_str_eq(resp->list_directory->entries[0]->name, "f00000");
                        sbx__v1__response__free_unpacked(resp, NULL);
                        if (++got == 4)
                                t_lists = it_now_ms() - t0;
                        continue;
                }
                probe_once(c, "b-own", &ps);
                ck_assert_msg(it_now_ms() - t0 < 240000, "the listings took over 240 s");
        }
        host = host_lag_stop(&lag);
        fprintf(stderr,
                "big_listing_stalls_nobody: 4 listings of 100,000 entries %.0f ms; meanwhile %d "
                "probes, worst list %.0f ms, worst true %.0f ms; this process woke up to %.0f "
                "ms late\n",
                t_lists, ps.probes, ps.worst_list, ps.worst_true, host);
        ck_assert_msg(ps.worst_list < 300 + host, "a list of sandboxes took %.0f ms",
                      ps.worst_list);
        ck_assert_msg(ps.worst_true < 300 + host, "`true` took %.0f ms", ps.worst_true);
        ck_assert_msg(ps.probes >= 3, "too little was measured during the listings (%.0f ms)",
                      t_lists);
        frame_reader_free(&fr);
        close(fd);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* A recursive Remove that outlasts its sandbox's idle timeout keeps the sandbox: work
 * on its files is activity, as a running command is. */
START_TEST(remove_is_activity) {
        struct sbx_create_opts o;
        struct sbx_sandbox *sb = NULL;
        struct it_daemon d;
        sbx_client *c;
        enum sbx_code code = SBX_OK;
        double took = 0, t0;
        int dirs;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        sbx_create_opts_init(&o);
        o.id = "idle";
        o.idle_timeout_ms = 1000;
        ck_assert_int_eq(sbx_create(c, &o, &sb), SBX_OK);
        sbx_sandbox_free(sb);
        /* Until a Remove lasts three idle timeouts (a faster machine needs a bigger tree). */
        for (dirs = 200; dirs <= 1600 && code == SBX_OK && took < 3000; dirs *= 2) {
                make_tree(c, "idle", "t", dirs, 1000);
                t0 = it_now_ms();
                code = sbx_remove(c, "idle", "t", 1);
                took = it_now_ms() - t0;
                fprintf(stderr, "remove_is_activity: %d,000 files removed in %.0f ms: %s\n", dirs,
                        took, code_name(code));
        }
        ck_assert_msg(code == SBX_OK, "the Remove: %s: %s", code_name(code),
                      sbx_error_message(c));
        ck_assert_msg(took >= 3000, "no Remove lasted three idle timeouts");
        ck_assert_int_eq(dirs_left(c, "idle", "t"), -1);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

static Suite *make_suite(void) {
        Suite *s = suite_create("files");
        TCase *tc = tcase_create("files");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, planted_symlinks_do_not_escape);
        tcase_add_test(tc, fifos_and_devices_refused_quickly);
        tcase_add_test(tc, read_only_paths);
        tcase_add_test(tc, binary_round_trip_with_commands);
        tcase_add_test(tc, racing_reader_sees_whole_files);
        tcase_add_test(tc, large_file_paged);
        tcase_add_test(tc, names_and_write_rules);
        tcase_add_test(tc, raw_frames_nul_and_not_ready);
        tcase_add_test(tc, huge_directory);
        tcase_add_test(tc, terminated_sandbox_ended);
        tcase_add_test(tc, sandbox_user_permissions_and_ownership);
        tcase_add_test(tc, denied_paths_not_found);
        tcase_add_test(tc, mkdir_and_remove);
        tcase_add_test(tc, every_operation_recorded);
        tcase_add_test(tc, cli_read_write_ls_cp);
        tcase_add_test(tc, rootless_daemon);
        suite_add_tcase(s, tc);
        /* Hundreds of thousands of files: minutes to make on a loaded machine. */
        tc = tcase_create("offloop");
        tcase_add_unchecked_fixture(tc, it_fixture_setup, it_fixture_teardown);
        tcase_set_timeout(tc, 1200);
        tcase_add_test(tc, big_remove_stalls_nobody);
        tcase_add_test(tc, remove_stops_when_client_or_sandbox_goes);
        tcase_add_test(tc, removes_bounded_per_user);
        tcase_add_test(tc, big_listing_stalls_nobody);
        tcase_add_test(tc, remove_is_activity);
        suite_add_tcase(s, tc);
        return s;
}

SBX_TEST_MAIN(make_suite)
