/* sbxid.c: choosing and checking sandbox ids; see sbxid.h. */
#include "sbxid.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "sbx_limits.h"
#include "sbxd.h"

int sbxid_valid(const char *id) {
        size_t n = strlen(id), i;
        if (n == 0 || n > SBX_ID_MAX_BYTES || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
                return 0;
        for (i = 0; i < n; i++) {
                char c = id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return 0;
        }
        return 1;
}

void sbxid_generate(char *out, size_t len) {
        static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
        uint64_t ms = (uint64_t)sbxd_now_unix_ms();
        uint8_t rnd[8];
        char t[11];
        int i;
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                memset(rnd, 0, sizeof(rnd));
        for (i = 9; i >= 0; i--) {
                t[i] = alphabet[ms & 31];
                ms >>= 5;
        }
        t[10] = '\0';
        snprintf(out, len, "sbx-%s%c%c%c%c%c%c%c%c", t, alphabet[rnd[0] & 31],
                 alphabet[rnd[1] & 31], alphabet[rnd[2] & 31], alphabet[rnd[3] & 31],
                 alphabet[rnd[4] & 31], alphabet[rnd[5] & 31], alphabet[rnd[6] & 31],
                 alphabet[rnd[7] & 31]);
}
