/* digest.h: content digests as OCI images name them ("sha256:" and 64 lowercase hex
 * digits), computed as bytes stream past (OpenSSL's libcrypto, EVP: the one SHA-256 of
 * the daemon, well kept and already on every Debian machine that has ssh or curl).
 *
 * Used by the image store and the registry client to check every blob against the
 * digest it was asked for before anything uses it. Only SHA-256 is accepted: it is what
 * the OCI image specification requires registries and images to support, and a
 * reference naming another algorithm is refused by digest_parse. No state beyond each
 * struct digest; any thread (one struct digest per thread at a time). */
#ifndef SBX_DIGEST_H
#define SBX_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_HEX_LEN 64 /* hex digits of a SHA-256 digest */
/* "sha256:" + 64 hex digits + NUL */
#define DIGEST_STR_BYTES (7 + DIGEST_HEX_LEN + 1)

/* A running SHA-256. Opaque: its context is libcrypto's. */
struct digest {
        void *ctx;
        uint64_t bytes; /* fed so far */
};

/* Starts d. 0, or -ENOMEM. */
int digest_init(struct digest *d);

/* Feeds n bytes of buf. 0, or -EIO when libcrypto fails (it does not, short of memory). */
int digest_update(struct digest *d, const void *buf, size_t n);

/* Ends d, writing "sha256:<hex>" to out (DIGEST_STR_BYTES), and frees it. 0 or -EIO. */
int digest_final(struct digest *d, char out[DIGEST_STR_BYTES]);

/* Frees d without a result (after a failure). Safe on a digest never started and twice. */
void digest_free(struct digest *d);

/* The digest of the n bytes of buf, as digest_final writes it. 0, -ENOMEM or -EIO. */
int digest_buf(const void *buf, size_t n, char out[DIGEST_STR_BYTES]);

/* The digest of what fd reads from its offset to its end, and how many bytes that was
 * (ret_bytes may be NULL). 0, -errno of a read, -ENOMEM or -EIO. */
int digest_fd(int fd, char out[DIGEST_STR_BYTES], uint64_t *ret_bytes);

/* 1 when s is a digest this module accepts: exactly "sha256:" and 64 lowercase hex
 * digits, nothing else (the form every path of the store is made from, so that no digest
 * a client or a registry sends can name a path outside it). When ret_hex is not NULL it
 * points into s at the hex digits. */
int digest_parse(const char *s, const char **ret_hex);

#endif
