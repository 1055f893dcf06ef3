/* hostsfile.h: the names of the hosts file (/etc/hosts), answered without a resolver.
 *
 * The allowlist proxy (egress.c) looks a name up here first, on the loop: the file is
 * small and local, where a lookup through getaddrinfo holds one of libuv's threads for
 * as long as a nameserver keeps it waiting. The format is hosts(5)'s: one address (IPv4
 * or IPv6) per line, then the names it has (the canonical name, then aliases), separated
 * by blanks; '#' starts a comment that runs to the end of the line. A name is matched
 * without regard to case, on every line that lists it, in the file's order (as glibc's
 * "files" source answers getaddrinfo). A line whose address does not parse (a zone such
 * as fe80::1%eth0 among them) is passed over: such a name is left to the resolver.
 *
 * struct hostsfile keeps the file's text and reads it again only when the file changed
 * (its inode, size or times), so a lookup costs one stat. Owned by its caller (the
 * proxies' shared state, egressshare.c); loop thread only; nothing here logs. */
#ifndef SBX_HOSTSFILE_H
#define SBX_HOSTSFILE_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* A larger file is not read (its names go to the resolver): hosts files are a few lines,
 * and reading one must not hold the loop. */
#define HOSTSFILE_MAX_BYTES (1024u * 1024u)
/* The most addresses one lookup answers (the proxy connects to the first it may). */
#define HOSTSFILE_MAX_ADDRS 16u

struct hostsfile {
        char *text; /* the file's bytes, NUL-terminated; NULL: no names */
        size_t len;
        int read; /* text is what the file held when it had the identity below */
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
};

/* The addresses that text (len bytes, hosts(5) format) gives name, each with port, into
 * out (at most max), in the order of the file. Returns how many: 0 when no line names it. */
size_t hostsfile_scan(const char *text, size_t len, const char *name, unsigned port,
                      struct sockaddr_storage *out, size_t max);

/* Makes h hold what path holds now, reading it only when it changed since h last read
 * it. Returns 0; -EFBIG when it is larger than HOSTSFILE_MAX_BYTES, or the -errno of
 * stat, open or read (-ENOENT: no file): then h holds no names. */
int hostsfile_refresh(struct hostsfile *h, const char *path);

/* hostsfile_scan over what h holds (nothing: 0). */
size_t hostsfile_find(const struct hostsfile *h, const char *name, unsigned port,
                      struct sockaddr_storage *out, size_t max);

/* Frees what h holds; h holds no names after. */
void hostsfile_clear(struct hostsfile *h);

#endif
