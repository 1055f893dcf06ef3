/* cli_files.c: the file commands of the sbx tool: read, write, ls, stat, mkdir, rm and
 * cp.
 *
 * Owns nothing past one command. Paths inside a sandbox are resolved by the daemon in
 * the sandbox's view; this file only moves bytes. Writes larger than one frame go out
 * in chunks (see cli_write_file: only the first chunk is atomic). `sbx cp` copies
 * regular files and directories recursively in either direction and skips symlinks,
 * devices and FIFOs with a warning; names coming back from a sandbox are checked before
 * they become host paths, so a hostile listing cannot write outside the destination.
 * `sbx ls --json` prints {sandbox_id, path, entries, truncated}, each entry {name, type,
 * size, mode, mtime, mtime_at, is_dir, symlink_target}; stat, mkdir and rm are the
 * single-file calls of libsbx. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Room left in a frame for everything of a WriteFile request but its data. */
#define WRITE_FRAME_MARGIN_BYTES (64u * 1024u)
/* How deep cp descends into directories. */
#define CP_MAX_DEPTH 256

enum sbx_code cli_write_file(sbx_client *c, const char *id, const char *path, const uint8_t *data,
                             size_t len, uint32_t mode, unsigned flags) {
        struct sbx_hello *h = NULL;
        uint64_t frame = SBX_DEFAULT_MAX_FRAME_BYTES, room, chunk;
        size_t off;
        enum sbx_code rc;

        if (sbx_hello(c, &h) == SBX_OK && h->max_frame_bytes)
                frame = h->max_frame_bytes;
        sbx_hello_free(h);
        room = frame > WRITE_FRAME_MARGIN_BYTES + strlen(path) + strlen(id)
                       ? frame - WRITE_FRAME_MARGIN_BYTES - strlen(path) - strlen(id)
                       : 0;
        if (len <= room) {
                rc = sbx_write(c, id, path, data, len, mode, flags);
                if (rc != SBX_TOO_LARGE || len <= 64u * 1024u)
                        return rc;
        }
        /* Larger than a frame: the first chunk replaces the file atomically, the rest is
         * appended, so a reader may see the file partly written meanwhile. */
        chunk = CLI_WRITE_CHUNK_BYTES;
        if (room && chunk > room)
                chunk = room;
        if (chunk >= len)
                chunk = len / 2 ? len / 2 : len; /* it did not fit: at least split it */
        rc = sbx_write(c, id, path, data, (size_t)chunk, mode, flags);
        for (off = (size_t)chunk; rc == SBX_OK && off < len; off += (size_t)chunk) {
                size_t n = len - off < chunk ? len - off : (size_t)chunk;
                rc = sbx_write(c, id, path, data + off, n, mode,
                               (flags & ~(unsigned)SBX_WRITE_CREATE_PARENTS) | SBX_WRITE_APPEND);
                if (n < chunk)
                        break;
        }
        return rc;
}

/* Parses options of a file command and exactly npos positionals (min_pos required).
 * Calls handle for each option. 0, -1 (help shown) or an exit status. */
typedef int (*opt_handler)(void *state, int k, const char *arg);

static int parse_cmd(struct cli *cli, int argc, char **argv, const struct cli_opt *spec,
                     size_t min_pos, size_t max_pos, const char **pos, size_t *ret_npos,
                     opt_handler handle, void *state) {
        struct cli_opts p;
        size_t got = 0;
        int k, rc;

        cli_opts_init(&p, cli, argc, argv, spec);
        while ((k = cli_opts_next(&p)) != CLI_OPT_END) {
                if (k == CLI_OPT_ERR)
                        return CLI_EXIT_ERROR;
                if (k == CLI_OPT_HELP) {
                        cli_usage(stdout, argv[0]);
                        return -1;
                }
                if (k == CLI_OPT_POS) {
                        if (got == max_pos)
                                return cli_usage_error("unexpected argument '%s' for sbx %s", p.arg,
                                                       argv[0]);
                        pos[got++] = p.arg;
                        continue;
                }
                if ((rc = handle(state, k, p.arg)))
                        return rc;
        }
        if (got < min_pos)
                return cli_usage_error("sbx %s needs %s", argv[0],
                                       min_pos == 1 ? "a sandbox ID" : "a sandbox ID and a path");
        *ret_npos = got;
        return 0;
}

/* ---- read ------------------------------------------------------------------------------- */

enum { R_OFFSET, R_LIMIT, R_JSON };

struct read_state {
        uint64_t offset, limit;
        bool json;
};

static int read_opt(void *state, int k, const char *a) {
        struct read_state *st = state;
        switch (k) {
        case R_OFFSET:
                if (cli_parse_uint(a, UINT64_MAX, &st->offset) < 0)
                        return cli_bad_value("read", "--offset", a, "expected a byte offset");
                break;
        case R_LIMIT:
                if (cli_parse_bytes(a, &st->limit) < 0 || !st->limit)
                        return cli_bad_value("read", "--limit", a, "expected a byte count > 0");
                break;
        default:
                st->json = true;
                break;
        }
        return 0;
}

/* Where read_pages puts the bytes: an fd, or a growing buffer (sbx read --json). */
struct read_sink {
        int fd; /* -1: the buffer */
        const char *fd_name;
        uint8_t *buf;
        size_t len, cap;
        /* From the last page: */
        uint64_t size, next_offset;
        bool eof;
};

static int sink_put(struct read_sink *k, const uint8_t *data, size_t len) {
        if (k->fd >= 0) {
                int w = cli_write_all(k->fd, data, len);
                return w < 0 ? cli_error(SBX_INTERNAL, "cannot write to %s: %s", k->fd_name,
                                         strerror(-w))
                             : 0;
        }
        if (len > k->cap - k->len) {
                size_t cap = k->cap ? k->cap : 64 * 1024;
                uint8_t *nb;
                while (cap - k->len < len) {
                        if (cap > SIZE_MAX / 2)
                                return cli_error(SBX_RESOURCE_EXHAUSTED, "the file is too large");
                        cap *= 2;
                }
                nb = realloc(k->buf, cap);
                if (!nb)
                        return cli_error(SBX_RESOURCE_EXHAUSTED,
                                         "out of memory; read less at a time (--limit)");
                k->buf = nb;
                k->cap = cap;
        }
        memcpy(k->buf + k->len, data, len);
        k->len += len;
        return 0;
}

/* Reads rpath from offset (at most limit bytes, 0: to the end) in pages, passing each
 * page to the sink. 0 or an exit status (printed). */
static int read_pages(sbx_client *c, const char *id, const char *rpath, uint64_t offset,
                      uint64_t limit, struct read_sink *k) {
        uint64_t got = 0;

        k->next_offset = offset;
        for (;;) {
                struct sbx_read_result *r = NULL;
                uint64_t want = CLI_READ_PAGE_BYTES;
                enum sbx_code rc;
                int w;

                if (limit && limit - got < want)
                        want = limit - got;
                rc = sbx_read(c, id, rpath, offset, want, &r);
                if (rc != SBX_OK)
                        return cli_client_error(c, rc);
                w = sink_put(k, r->data, r->len);
                k->size = r->size;
                k->next_offset = r->next_offset;
                k->eof = r->eof;
                if (w) {
                        sbx_read_result_free(r);
                        return w;
                }
                got += r->len;
                if (r->eof || r->len == 0 || (limit && got >= limit) || r->next_offset <= offset) {
                        sbx_read_result_free(r);
                        return 0;
                }
                offset = r->next_offset;
                sbx_read_result_free(r);
        }
}

static int read_to_fd(sbx_client *c, const char *id, const char *rpath, uint64_t offset,
                      uint64_t limit, int fd, const char *fd_name) {
        struct read_sink k = {.fd = fd, .fd_name = fd_name};
        return read_pages(c, id, rpath, offset, limit, &k);
}

static int finish_json(struct json *j) {
        if (json_finish(j) < 0)
                return cli_error(SBX_INTERNAL, "cannot write to stdout: %s", strerror(errno));
        return 0;
}

int cmd_read(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {[R_OFFSET] = {"offset", true, 0},
                                              [R_LIMIT] = {"limit", true, 0},
                                              [R_JSON] = {"json", false, 0},
                                              {NULL, false, 0}};
        struct read_state st = {0};
        struct read_sink k = {.fd = STDOUT_FILENO, .fd_name = "stdout"};
        const char *pos[2];
        size_t npos;
        sbx_client *c;
        int status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, read_opt, &st);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        fflush(stdout);
        if (st.json)
                k.fd = -1;
        status = read_pages(c, pos[0], pos[1], st.offset, st.limit, &k);
        if (!status && st.json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, pos[0]);
                json_key(&j, "path");
                json_string(&j, pos[1]);
                json_key(&j, "offset");
                json_uint(&j, st.offset);
                json_key(&j, "bytes");
                json_uint(&j, k.len);
                json_key(&j, "size");
                json_uint(&j, k.size);
                json_key(&j, "next_offset");
                json_uint(&j, k.next_offset);
                json_key(&j, "eof");
                json_bool(&j, k.eof);
                json_key(&j, "data");
                json_bytes(&j, k.buf, k.len);
                json_key(&j, "data_base64");
                json_base64_unless_utf8(&j, k.buf ? k.buf : (const uint8_t *)"", k.len);
                json_end_object(&j);
                status = finish_json(&j);
        }
        free(k.buf);
        sbx_close(c);
        return status;
}

/* ---- write ------------------------------------------------------------------------------- */

enum { W_MODE, W_PARENTS, W_APPEND, W_JSON };

struct write_state {
        uint32_t mode;
        unsigned flags;
        bool json;
};

static int write_opt(void *state, int k, const char *a) {
        struct write_state *st = state;
        switch (k) {
        case W_MODE:
                if (cli_parse_mode(a, &st->mode) < 0)
                        return cli_bad_value("write", "--mode", a,
                                             "expected an octal mode, e.g. 0644");
                break;
        case W_PARENTS:
                st->flags |= SBX_WRITE_CREATE_PARENTS;
                break;
        case W_APPEND:
                st->flags |= SBX_WRITE_APPEND;
                break;
        default:
                st->json = true;
                break;
        }
        return 0;
}

int cmd_write(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {[W_MODE] = {"mode", true, 'm'},
                                              [W_PARENTS] = {"parents", false, 'p'},
                                              [W_APPEND] = {"append", false, 0},
                                              [W_JSON] = {"json", false, 0},
                                              {NULL, false, 0}};
        struct write_state st = {0};
        const char *pos[2];
        size_t npos, len;
        uint8_t *data;
        sbx_client *c;
        enum sbx_code rc;
        int r, status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, write_opt, &st);

        if (status)
                return status < 0 ? 0 : status;
        r = cli_read_all(STDIN_FILENO, 0, &data, &len);
        if (r < 0)
                return cli_error(r == -ENOMEM ? SBX_RESOURCE_EXHAUSTED : SBX_INVALID_ARGUMENT,
                                 "cannot read stdin: %s", strerror(-r));
        if ((status = cli_connect(cli, &c))) {
                free(data);
                return status;
        }
        cli_check_owner(c, pos[0]);
        rc = cli_write_file(c, pos[0], pos[1], data, len, st.mode, st.flags);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (st.json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, pos[0]);
                json_key(&j, "path");
                json_string(&j, pos[1]);
                json_key(&j, "bytes");
                json_uint(&j, len);
                json_key(&j, "append");
                json_bool(&j, st.flags & SBX_WRITE_APPEND);
                json_end_object(&j);
                status = finish_json(&j);
        }
        free(data);
        sbx_close(c);
        return status;
}

/* ---- ls and stat ------------------------------------------------------------------------- */

/* "drwxr-xr-x" for an entry. */
static void mode_string(char out[11], const struct sbx_file_info *f) {
        static const char types[] = "?-dlpscb";
        uint32_t m = f->mode;

        out[0] = f->is_dir ? 'd' : ((unsigned)f->type < sizeof(types) - 1 ? types[f->type] : '?');
        out[1] = m & 0400 ? 'r' : '-';
        out[2] = m & 0200 ? 'w' : '-';
        out[3] = m & 04000 ? (m & 0100 ? 's' : 'S') : (m & 0100 ? 'x' : '-');
        out[4] = m & 040 ? 'r' : '-';
        out[5] = m & 020 ? 'w' : '-';
        out[6] = m & 02000 ? (m & 010 ? 's' : 'S') : (m & 010 ? 'x' : '-');
        out[7] = m & 04 ? 'r' : '-';
        out[8] = m & 02 ? 'w' : '-';
        out[9] = m & 01000 ? (m & 01 ? 't' : 'T') : (m & 01 ? 'x' : '-');
        out[10] = 0;
}

/* The keys of an entry (sbx ls --json, sbx stat --json), into the open object. */
static void json_entry_keys(struct json *j, const struct sbx_file_info *f) {
        char mode[8], iso[64];

        snprintf(mode, sizeof(mode), "%04o", f->mode & 07777);
        cli_format_iso(iso, sizeof(iso), f->mtime_unix_ms, true);
        json_key(j, "name");
        json_string(j, f->name);
        json_key(j, "type");
        json_string(j, cli_file_type_name(f->type));
        json_key(j, "size");
        json_uint(j, f->size);
        json_key(j, "mode");
        json_string(j, mode);
        json_key(j, "mtime");
        json_ms_as_secs(j, f->mtime_unix_ms);
        json_key(j, "mtime_at");
        json_string(j, iso);
        json_key(j, "is_dir");
        json_bool(j, f->is_dir);
        json_key(j, "symlink_target");
        json_string(j, f->symlink_target);
}

/* One `ls -l` style line: mode, size (width sw), local time, name (and link target). */
static void print_entry(const struct sbx_file_info *f, int sw, const char *name) {
        char mode[11], when[32];
        time_t t = (time_t)(f->mtime_unix_ms / 1000);
        struct tm tm;

        mode_string(mode, f);
        if (localtime_r(&t, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
        else
                snprintf(when, sizeof(when), "?");
        printf("%s %*llu %s ", mode, sw, (unsigned long long)f->size, when);
        cli_put_text(stdout, name);
        if (f->is_dir)
                putchar('/');
        if (f->symlink_target) {
                fputs(" -> ", stdout);
                cli_put_text(stdout, f->symlink_target);
        }
        putchar('\n');
}

enum { L_JSON, L_LIMIT };

struct ls_state {
        bool json;
        uint64_t limit;
};

static int ls_opt(void *state, int k, const char *a) {
        struct ls_state *st = state;
        if (k == L_JSON) {
                st->json = true;
        } else if (cli_parse_uint(a, SBX_MAX_LIST_LIMIT, &st->limit) < 0 || !st->limit) {
                char what[64];
                snprintf(what, sizeof(what), "expected a count of entries, 1 to %u",
                         SBX_MAX_LIST_LIMIT);
                return cli_bad_value("ls", "--limit", a, what);
        }
        return 0;
}

int cmd_ls(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {
                [L_JSON] = {"json", false, 0}, [L_LIMIT] = {"limit", true, 0}, {NULL, false, 0}};
        const char *pos[2] = {NULL, "/workspace"};
        struct ls_state st = {0};
        size_t npos;
        struct sbx_dir_list *l = NULL;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_cmd(cli, argc, argv, opts, 1, 2, pos, &npos, ls_opt, &st);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        rc = sbx_list_dir(c, pos[0], pos[1], (uint32_t)st.limit, &l);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (st.json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, pos[0]);
                json_key(&j, "path");
                json_string(&j, pos[1]);
                json_key(&j, "entries");
                json_begin_array(&j);
                for (size_t i = 0; i < l->n; i++) {
                        json_begin_object(&j);
                        json_entry_keys(&j, &l->v[i]);
                        json_end_object(&j);
                }
                json_end_array(&j);
                json_key(&j, "truncated");
                json_bool(&j, l->truncated);
                json_end_object(&j);
                status = finish_json(&j);
        } else {
                int sw = 1;
                for (size_t i = 0; i < l->n; i++) {
                        int n = snprintf(NULL, 0, "%llu", (unsigned long long)l->v[i].size);
                        if (n > sw)
                                sw = n;
                }
                for (size_t i = 0; i < l->n; i++)
                        print_entry(&l->v[i], sw, l->v[i].name);
                if (l->truncated)
                        cli_warn("the listing was cut at %zu entries%s", l->n,
                                 st.limit ? "" : "; ask for more with --limit N");
        }
        sbx_dir_list_free(l);
        sbx_close(c);
        return status;
}

static int json_opt(void *state, int k, const char *a) {
        (void)k;
        (void)a;
        *(bool *)state = true;
        return 0;
}

int cmd_stat(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {{"json", false, 0}, {NULL, false, 0}};
        const char *pos[2];
        bool json = false;
        size_t npos;
        struct sbx_file_info *f = NULL;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, json_opt, &json);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        rc = sbx_stat(c, pos[0], pos[1], &f);
        if (rc != SBX_OK) {
                status = cli_client_error(c, rc);
        } else if (json) {
                struct json j;
                json_init(&j, stdout);
                json_begin_object(&j);
                json_key(&j, "sandbox_id");
                json_string(&j, pos[0]);
                json_key(&j, "path");
                json_string(&j, pos[1]);
                json_entry_keys(&j, f);
                json_end_object(&j);
                status = finish_json(&j);
        } else {
                print_entry(f, 1, pos[1]);
        }
        sbx_file_info_free(f);
        sbx_close(c);
        return status;
}

/* ---- mkdir and rm -------------------------------------------------------------------------- */

enum { M_PARENTS, M_MODE };

struct mkdir_state {
        bool parents;
        uint32_t mode;
};

static int mkdir_opt(void *state, int k, const char *a) {
        struct mkdir_state *st = state;
        if (k == M_PARENTS)
                st->parents = true;
        else if (cli_parse_mode(a, &st->mode) < 0)
                return cli_bad_value("mkdir", "--mode", a, "expected an octal mode, e.g. 0755");
        return 0;
}

int cmd_mkdir(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {[M_PARENTS] = {"parents", false, 'p'},
                                              [M_MODE] = {"mode", true, 'm'},
                                              {NULL, false, 0}};
        struct mkdir_state st = {.mode = 0755};
        const char *pos[2];
        size_t npos;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, mkdir_opt, &st);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        rc = sbx_mkdir(c, pos[0], pos[1], st.mode, st.parents);
        if (rc != SBX_OK)
                status = cli_client_error(c, rc);
        sbx_close(c);
        return status;
}

enum { RM_RECURSIVE, RM_FORCE };

static int rm_opt(void *state, int k, const char *a) {
        (void)a;
        ((bool *)state)[k] = true;
        return 0;
}

int cmd_rm(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {[RM_RECURSIVE] = {"recursive", false, 'r'},
                                              [RM_FORCE] = {"force", false, 'f'},
                                              {NULL, false, 0}};
        bool flags[2] = {false, false};
        const char *pos[2];
        size_t npos;
        sbx_client *c;
        enum sbx_code rc;
        int status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, rm_opt, flags);

        if (status)
                return status < 0 ? 0 : status;
        if ((status = cli_connect(cli, &c)))
                return status;
        cli_check_owner(c, pos[0]);
        rc = sbx_remove(c, pos[0], pos[1], flags[RM_RECURSIVE]);
        if (rc != SBX_OK && !(rc == SBX_NOT_FOUND && flags[RM_FORCE]))
                status = cli_client_error(c, rc);
        sbx_close(c);
        return status;
}

/* ---- cp ---------------------------------------------------------------------------------- */

/* "ID:PATH" with a valid sandbox ID before the colon. *ret_id is a copy. */
static bool parse_remote(const char *arg, char **ret_id, const char **ret_path) {
        const char *colon = strchr(arg, ':');
        size_t n;

        if (!colon)
                return false;
        n = (size_t)(colon - arg);
        if (n == 0 || n > SBX_ID_MAX_BYTES)
                return false;
        for (const char *p = arg; p < colon; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
                        return false;
        *ret_id = strndup(arg, n);
        *ret_path = colon[1] ? colon + 1 : "/workspace";
        return *ret_id != NULL;
}

/* The last component of path, ignoring trailing slashes, as a new string; "" for "/". */
static char *base_name(const char *path) {
        size_t end = strlen(path), start;
        while (end > 1 && path[end - 1] == '/')
                end--;
        start = end;
        while (start > 0 && path[start - 1] != '/')
                start--;
        if (end == 1 && path[0] == '/')
                return strdup("");
        return strndup(path + start, end - start);
}

static char *join(const char *dir, const char *name) {
        char *out = NULL;
        size_t n = strlen(dir);
        if (asprintf(&out, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
                return NULL;
        return out;
}

/* dst, or dst/basename(src) when dst is an existing directory (cp's rule). */
static char *target_path(const char *src, const char *dst, bool dst_is_dir) {
        char *b, *out;
        if (!dst_is_dir)
                return strdup(dst);
        b = base_name(src);
        if (!b)
                return NULL;
        if (!*b || strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
                out = strdup(dst);
        else
                out = join(dst, b);
        free(b);
        return out;
}

/* A name from a sandbox listing that is safe as one host path component. */
static bool safe_name(const char *name) {
        return *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int upload(sbx_client *c, const char *host, const struct stat *st, const char *id,
                  const char *rpath, int depth);

static int upload_dir(sbx_client *c, const char *host, const struct stat *st, const char *id,
                      const char *rpath, int depth) {
        enum sbx_code rc;
        DIR *d;
        struct dirent *e;
        int status = 0;

        if (depth > CP_MAX_DEPTH)
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "'%s' is nested more than %d directories deep", host,
                                 CP_MAX_DEPTH);
        rc = sbx_mkdir(c, id, rpath, st->st_mode & 07777 ? st->st_mode & 07777 : 0755, 1);
        if (rc != SBX_OK && rc != SBX_ALREADY_EXISTS)
                return cli_client_error(c, rc);
        d = opendir(host);
        if (!d)
                return cli_error(SBX_INVALID_ARGUMENT, "cannot open directory '%s': %s", host,
                                 strerror(errno));
        while (!status && (errno = 0, e = readdir(d))) {
                struct stat cst;
                char *hp, *rp;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                hp = join(host, e->d_name);
                rp = join(rpath, e->d_name);
                if (!hp || !rp)
                        status = cli_error(SBX_INTERNAL, "out of memory");
                else if (lstat(hp, &cst) < 0)
                        status = cli_error(SBX_INVALID_ARGUMENT, "cannot stat '%s': %s", hp,
                                           strerror(errno));
                else if (S_ISDIR(cst.st_mode) || S_ISREG(cst.st_mode))
                        status = upload(c, hp, &cst, id, rp, depth + 1);
                else
                        cli_warn("skipping '%s': cp copies regular files and directories only", hp);
                free(hp);
                free(rp);
        }
        if (!status && errno)
                status = cli_error(SBX_INVALID_ARGUMENT, "cannot read directory '%s': %s", host,
                                   strerror(errno));
        closedir(d);
        return status;
}

static int upload(sbx_client *c, const char *host, const struct stat *st, const char *id,
                  const char *rpath, int depth) {
        uint8_t *data;
        size_t len;
        enum sbx_code rc;
        int fd, r;

        if (S_ISDIR(st->st_mode))
                return upload_dir(c, host, st, id, rpath, depth);
        fd = open(host, O_RDONLY | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
        if (fd < 0)
                return cli_error(errno == ENOENT ? SBX_NOT_FOUND : SBX_INVALID_ARGUMENT,
                                 "cannot open '%s': %s", host, strerror(errno));
        r = cli_read_all(fd, 0, &data, &len);
        close(fd);
        if (r < 0)
                return cli_error(SBX_INVALID_ARGUMENT, "cannot read '%s': %s", host, strerror(-r));
        rc = cli_write_file(c, id, rpath, data, len, st->st_mode & 0777, 0);
        free(data);
        return rc == SBX_OK ? 0 : cli_client_error(c, rc);
}

static int download(sbx_client *c, const char *id, const char *rpath,
                    const struct sbx_file_info *info, const char *host, int depth);

/* Copies the directory rpath of sandbox id (its entries, at most SBX_MAX_LIST_LIMIT)
 * into host, made when missing. 0 or an exit status. */
static int download_dir(sbx_client *c, const char *id, const char *rpath,
                        const struct sbx_file_info *info, const char *host, int depth) {
        struct sbx_dir_list *l = NULL;
        enum sbx_code rc;
        int status = 0;

        if (depth > CP_MAX_DEPTH)
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "'%s' is nested more than %d directories deep", rpath,
                                 CP_MAX_DEPTH);
        if (mkdir(host, (info->mode & 0777) | 0700) < 0) {
                struct stat st;
                if (errno != EEXIST || lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
                        return cli_error(SBX_INVALID_ARGUMENT, "cannot create directory '%s': %s",
                                         host, strerror(errno == EEXIST ? ENOTDIR : errno));
        }
        rc = sbx_list_dir(c, id, rpath, SBX_MAX_LIST_LIMIT, &l);
        if (rc != SBX_OK)
                return cli_client_error(c, rc);
        if (l->truncated)
                cli_warn("'%s' has more than %zu entries; only those were copied", rpath, l->n);
        for (size_t i = 0; !status && i < l->n; i++) {
                const struct sbx_file_info *f = &l->v[i];
                char *hp, *rp;
                if (!safe_name(f->name)) {
                        cli_warn("skipping an entry of '%s' with an unsafe name", rpath);
                        continue;
                }
                if (!f->is_dir && f->type != SBX_FILE_REGULAR) {
                        cli_warn("skipping '%s/%s': cp copies regular files and directories only",
                                 rpath, f->name);
                        continue;
                }
                hp = join(host, f->name);
                rp = join(rpath, f->name);
                if (!hp || !rp)
                        status = cli_error(SBX_INTERNAL, "out of memory");
                else
                        status = download(c, id, rp, f, hp, depth + 1);
                free(hp);
                free(rp);
        }
        sbx_dir_list_free(l);
        return status;
}

static int download(sbx_client *c, const char *id, const char *rpath,
                    const struct sbx_file_info *info, const char *host, int depth) {
        int fd, status;

        if (info->is_dir)
                return download_dir(c, id, rpath, info, host, depth);
        fd = open(host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (depth ? O_NOFOLLOW : 0),
                  info->mode & 0777 ? info->mode & 0777 : 0644);
        if (fd < 0)
                return cli_error(SBX_INVALID_ARGUMENT, "cannot create '%s': %s", host,
                                 strerror(errno));
        status = read_to_fd(c, id, rpath, 0, 0, fd, host);
        if (close(fd) < 0 && !status)
                status = cli_error(SBX_INTERNAL, "cannot write '%s': %s", host, strerror(errno));
        return status;
}

/* cp from the host path src to path of sandbox id (into it when it is a directory).
 * 0 or an exit status. */
static int cp_up(sbx_client *c, const char *src, const char *id, const char *path) {
        struct sbx_file_info *fi = NULL;
        enum sbx_code rc;
        bool is_dir = false;
        struct stat st;
        char *target;
        int status;

        if (stat(src, &st) < 0)
                return cli_error(errno == ENOENT ? SBX_NOT_FOUND : SBX_INVALID_ARGUMENT,
                                 "cannot stat '%s': %s", src, strerror(errno));
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return cli_error(SBX_INVALID_ARGUMENT, "'%s' is not a regular file or a directory",
                                 src);
        rc = sbx_stat(c, id, path, &fi);
        if (rc == SBX_OK)
                is_dir = fi->is_dir;
        sbx_file_info_free(fi);
        if (rc != SBX_OK && rc != SBX_NOT_FOUND)
                return cli_client_error(c, rc);
        target = target_path(src, path, is_dir);
        if (!target)
                return cli_error(SBX_INTERNAL, "out of memory");
        status = upload(c, src, &st, id, target, 0);
        free(target);
        return status;
}

/* cp from path of sandbox id to the host path dst (into it when it is a directory).
 * 0 or an exit status. */
static int cp_down(sbx_client *c, const char *id, const char *path, const char *dst) {
        struct sbx_file_info *fi = NULL;
        enum sbx_code rc = sbx_stat(c, id, path, &fi);
        struct stat st;
        char *target;
        int status;

        if (rc != SBX_OK)
                return cli_client_error(c, rc);
        if (!fi->is_dir && fi->type != SBX_FILE_REGULAR) {
                sbx_file_info_free(fi);
                return cli_error(SBX_INVALID_ARGUMENT,
                                 "'%s' in sandbox '%s' is not a regular file or a directory", path,
                                 id);
        }
        target = target_path(path, dst, stat(dst, &st) == 0 && S_ISDIR(st.st_mode));
        if (!target)
                status = cli_error(SBX_INTERNAL, "out of memory");
        else
                status = download(c, id, path, fi, target, 0);
        free(target);
        sbx_file_info_free(fi);
        return status;
}

int cmd_cp(struct cli *cli, int argc, char **argv) {
        static const struct cli_opt opts[] = {{NULL, false, 0}};
        const char *pos[2], *src_path, *dst_path;
        char *src_id = NULL, *dst_id = NULL;
        bool src_remote, dst_remote;
        size_t npos;
        sbx_client *c = NULL;
        int status = parse_cmd(cli, argc, argv, opts, 2, 2, pos, &npos, json_opt, NULL);

        if (status)
                return status < 0 ? 0 : status;
        src_remote = parse_remote(pos[0], &src_id, &src_path);
        dst_remote = parse_remote(pos[1], &dst_id, &dst_path);
        if (src_remote == dst_remote)
                status = cli_usage_error(
                        src_remote
                                ? "sbx cp copies between the host and a sandbox, not between two "
                                  "sandboxes; copy through the host"
                                : "one side of sbx cp must be ID:PATH, the other a host path");
        if (!status)
                status = cli_connect(cli, &c);
        if (!status) {
                cli_check_owner(c, dst_remote ? dst_id : src_id);
                status = dst_remote ? cp_up(c, pos[0], dst_id, dst_path)
                                    : cp_down(c, src_id, src_path, pos[1]);
        }
        free(src_id);
        free(dst_id);
        sbx_close(c);
        return status;
}
