/* socks5.h: the SOCKS5 messages NETWORK_ALLOWLIST's proxy understands (RFC 1928), as
 * pure functions over bytes: the greeting (only "no authentication"), one CONNECT
 * request with an IPv4, IPv6 or domain-name destination, and the reply. No I/O, no
 * state; the proxy (egress.c) feeds them what it has read. */
#ifndef SBX_SOCKS5_H
#define SBX_SOCKS5_H

#include <stddef.h>
#include <stdint.h>

#define SOCKS5_VERSION 5
/* Reply codes (RFC 1928 6). */
#define SOCKS5_OK           0
#define SOCKS5_FAILURE      1
#define SOCKS5_NOT_ALLOWED  2
#define SOCKS5_HOST_UNREACH 4
#define SOCKS5_REFUSED      5
#define SOCKS5_TTL_EXPIRED  6
#define SOCKS5_BAD_COMMAND  7
#define SOCKS5_BAD_ADDRESS  8
#define SOCKS5_REPLY_BYTES  10

/* The greeting in b (n bytes so far): 0 when incomplete, else its length with *ret_ok
 * 1 when it offers "no authentication"; -EPROTO when it is no SOCKS5 greeting. */
int socks5_greeting(const uint8_t *b, size_t n, int *ret_ok);

/* The request in b (n bytes so far): 0 when incomplete; its length with host (text: a
 * name as given, or an address literal) and *ret_port; or -EPROTO with *ret_rep the
 * reply code to refuse it with (a command other than CONNECT, an unknown address
 * type, an empty or overlong name, port 0). host holds at least 256 bytes. */
int socks5_request(const uint8_t *b, size_t n, char *host, size_t hostlen, unsigned *ret_port,
                   uint8_t *ret_rep);

/* The reply with code rep (bound address 0.0.0.0:0) into out (SOCKS5_REPLY_BYTES). */
void socks5_reply(uint8_t rep, uint8_t *out);

#endif
