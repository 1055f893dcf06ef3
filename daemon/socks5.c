/* socks5.c: SOCKS5's greeting, CONNECT request and reply (socks5.h), for the egress
 * proxy. Pure functions; owns nothing. */
#include "socks5.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define ATYP_IPV4   1
#define ATYP_DOMAIN 3
#define ATYP_IPV6   4
#define CMD_CONNECT 1
#define NO_AUTH     0

int socks5_greeting(const uint8_t *b, size_t n, int *ret_ok) {
        size_t len;

        if (n < 2)
                return n >= 1 && b[0] != SOCKS5_VERSION ? -EPROTO : 0;
        if (b[0] != SOCKS5_VERSION || b[1] == 0)
                return -EPROTO;
        len = 2 + (size_t)b[1];
        if (n < len)
                return 0;
        *ret_ok = memchr(b + 2, NO_AUTH, b[1]) != NULL;
        return (int)len;
}

static int refuse(uint8_t *ret_rep, uint8_t rep) {
        *ret_rep = rep;
        return -EPROTO;
}

int socks5_request(const uint8_t *b, size_t n, char *host, size_t hostlen, unsigned *ret_port,
                   uint8_t *ret_rep) {
        size_t addr_len, len;

        if (n < 5)
                return 0;
        if (b[0] != SOCKS5_VERSION || b[2] != 0)
                return refuse(ret_rep, SOCKS5_FAILURE);
        if (b[1] != CMD_CONNECT)
                return refuse(ret_rep, SOCKS5_BAD_COMMAND);
        switch (b[3]) {
        case ATYP_IPV4:
                addr_len = 4;
                break;
        case ATYP_IPV6:
                addr_len = 16;
                break;
        case ATYP_DOMAIN:
                addr_len = 1 + (size_t)b[4];
                if (b[4] == 0 || (size_t)b[4] >= hostlen)
                        return refuse(ret_rep, SOCKS5_BAD_ADDRESS);
                break;
        default:
                return refuse(ret_rep, SOCKS5_BAD_ADDRESS);
        }
        len = 4 + addr_len + 2;
        if (n < len)
                return 0;
        if (b[3] == ATYP_DOMAIN) {
                memcpy(host, b + 5, b[4]);
                host[b[4]] = '\0';
                if (strlen(host) != b[4]) /* a NUL inside */
                        return refuse(ret_rep, SOCKS5_BAD_ADDRESS);
        } else if (!inet_ntop(b[3] == ATYP_IPV4 ? AF_INET : AF_INET6, b + 4, host,
                              (socklen_t)hostlen)) {
                return refuse(ret_rep, SOCKS5_BAD_ADDRESS);
        }
        *ret_port = (unsigned)b[len - 2] << 8 | b[len - 1];
        if (*ret_port == 0)
                return refuse(ret_rep, SOCKS5_NOT_ALLOWED);
        return (int)len;
}

void socks5_reply(uint8_t rep, uint8_t *out) {
        static const uint8_t tail[] = {0, ATYP_IPV4, 0, 0, 0, 0, 0, 0};

        out[0] = SOCKS5_VERSION;
        out[1] = rep;
        memcpy(out + 2, tail, sizeof(tail));
}
