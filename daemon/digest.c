/* digest.c: SHA-256 digests of blobs; see digest.h. */
#include "digest.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

int digest_init(struct digest *d) {
        EVP_MD_CTX *c = EVP_MD_CTX_new();

        d->ctx = NULL;
        d->bytes = 0;
        if (!c)
                return -ENOMEM;
        if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(c);
                return -EIO;
        }
        d->ctx = c;
        return 0;
}

int digest_update(struct digest *d, const void *buf, size_t n) {
        if (!d->ctx)
                return -EINVAL;
        if (n && EVP_DigestUpdate(d->ctx, buf, n) != 1)
                return -EIO;
        d->bytes += n;
        return 0;
}

int digest_final(struct digest *d, char out[DIGEST_STR_BYTES]) {
        static const char hex[] = "0123456789abcdef";
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0, i;
        int r = 0;

        if (!d->ctx)
                return -EINVAL;
        if (EVP_DigestFinal_ex(d->ctx, md, &len) != 1 || len * 2 != DIGEST_HEX_LEN)
                r = -EIO;
        digest_free(d);
        if (r < 0)
                return r;
        memcpy(out, "sha256:", 7);
        for (i = 0; i < len; i++) {
                out[7 + 2 * i] = hex[md[i] >> 4];
                out[7 + 2 * i + 1] = hex[md[i] & 15];
        }
        out[7 + DIGEST_HEX_LEN] = '\0';
        return 0;
}

void digest_free(struct digest *d) {
        if (d->ctx)
                EVP_MD_CTX_free(d->ctx);
        d->ctx = NULL;
}

int digest_buf(const void *buf, size_t n, char out[DIGEST_STR_BYTES]) {
        struct digest d;
        int r = digest_init(&d);

        if (r == 0)
                r = digest_update(&d, buf, n);
        if (r == 0)
                return digest_final(&d, out);
        digest_free(&d);
        return r;
}

int digest_fd(int fd, char out[DIGEST_STR_BYTES], uint64_t *ret_bytes) {
        char buf[65536];
        struct digest d;
        int r = digest_init(&d);

        while (r == 0) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = -errno;
                else if (n == 0)
                        break;
                else
                        r = digest_update(&d, buf, (size_t)n);
        }
        if (r == 0 && ret_bytes)
                *ret_bytes = d.bytes;
        if (r == 0)
                return digest_final(&d, out);
        digest_free(&d);
        return r;
}

int digest_parse(const char *s, const char **ret_hex) {
        size_t i;

        if (!s || strncmp(s, "sha256:", 7) != 0)
                return 0;
        for (i = 0; i < DIGEST_HEX_LEN; i++) {
                char c = s[7 + i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                        return 0;
        }
        if (s[7 + DIGEST_HEX_LEN] != '\0')
                return 0;
        if (ret_hex)
                *ret_hex = s + 7;
        return 1;
}
