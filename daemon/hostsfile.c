/* hostsfile.c: the names of the hosts file, read on the loop and kept until the file
 * changes; see hostsfile.h. */
#include "hostsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressrule.h"

/* The longest address a line may give: an IPv6 address in full with an IPv4 tail. */
#define ADDR_MAX_BYTES 64u

static int blank(char ch) {
        return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* The next word of [*p, end) (blanks before it skipped): its start, its length in
 * *ret_len, *p past it; NULL when the line has no more. */
static const char *word(const char **p, const char *end, size_t *ret_len) {
        const char *s = *p, *w;

        while (s < end && blank(*s))
                s++;
        w = s;
        while (s < end && !blank(*s))
                s++;
        *p = s;
        *ret_len = (size_t)(s - w);
        return s > w ? w : NULL;
}

/* Whether the names of a line (after its address, [p, end)) include name. */
static int line_names(const char *p, const char *end, const char *name, size_t name_len) {
        const char *w;
        size_t n;

        while ((w = word(&p, end, &n)))
                if (n == name_len && strncasecmp(w, name, n) == 0)
                        return 1;
        return 0;
}

size_t hostsfile_scan(const char *text, size_t len, const char *name, unsigned port,
                      struct sockaddr_storage *out, size_t max) {
        const char *p = text, *end = text + len;
        size_t name_len = strlen(name), found = 0;

        if (name_len == 0)
                return 0;
        while (p < end && found < max) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                const char *line_end = eol ? eol : end;
                const char *hash = memchr(p, '#', (size_t)(line_end - p));
                const char *q = p, *a;
                char addr[ADDR_MAX_BYTES];
                size_t n;

                if (hash)
                        line_end = hash;
                a = word(&q, line_end, &n);
                if (a && n < sizeof(addr) && line_names(q, line_end, name, name_len)) {
                        memcpy(addr, a, n);
                        addr[n] = '\0';
                        /* A bracketed or zoned form is no hosts(5) address: passed over. */
                        if (addr[0] != '[' && egressrule_literal(addr, port, &out[found]))
                                found++;
                }
                p = eol ? eol + 1 : end;
        }
        return found;
}

void hostsfile_clear(struct hostsfile *h) {
        free(h->text);
        memset(h, 0, sizeof(*h));
}

static int same_file(const struct hostsfile *h, const struct stat *st) {
        return h->read && h->dev == st->st_dev && h->ino == st->st_ino && h->size == st->st_size &&
               h->mtime.tv_sec == st->st_mtim.tv_sec && h->mtime.tv_nsec == st->st_mtim.tv_nsec &&
               h->ctime.tv_sec == st->st_ctim.tv_sec && h->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* Reads the regular file fd (st its stat) whole into h. 0 or -errno. */
static int read_all(struct hostsfile *h, int fd, const struct stat *st) {
        size_t got = 0, want = (size_t)st->st_size;
        char *text = malloc(want + 1);
        ssize_t n;

        if (!text)
                return -ENOMEM;
        /* One byte more than its size: a file that grew since the stat is read again at
         * the next lookup (its size differs then). */
        while (got <= want && (n = read(fd, text + got, want + 1 - got)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(text);
                        return -errno;
                }
                got += (size_t)n;
        }
        if (got > want)
                got = want;
        text[got] = '\0';
        h->text = text;
        h->len = got;
        return 0;
}

int hostsfile_refresh(struct hostsfile *h, const char *path) {
        struct stat st;
        int fd, r;

        if (stat(path, &st) < 0) {
                r = -errno;
                hostsfile_clear(h);
                return r;
        }
        if (same_file(h, &st))
                return 0;
        hostsfile_clear(h);
        if (!S_ISREG(st.st_mode))
                return -EINVAL; /* a FIFO or a device would hold the loop */
        if (st.st_size > (off_t)HOSTSFILE_MAX_BYTES)
                return -EFBIG;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* What was opened is what was looked at (a file replaced in between is read at
         * the next lookup). */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)HOSTSFILE_MAX_BYTES) {
                close(fd);
                return -EAGAIN;
        }
        r = read_all(h, fd, &st);
        close(fd);
        if (r < 0)
                return r;
        h->read = 1;
        h->dev = st.st_dev;
        h->ino = st.st_ino;
        h->size = st.st_size;
        h->mtime = st.st_mtim;
        h->ctime = st.st_ctim;
        return 0;
}

size_t hostsfile_find(const struct hostsfile *h, const char *name, unsigned port,
                      struct sockaddr_storage *out, size_t max) {
        return h->text ? hostsfile_scan(h->text, h->len, name, port, out, max) : 0;
}
