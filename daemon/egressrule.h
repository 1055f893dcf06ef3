/* egressrule.h: the rules of NETWORK_ALLOWLIST's proxy, as pure functions: the
 * allowed_hosts patterns ("name", "*.suffix", either with ":PORT"), the allowed_cidrs
 * ranges, and the classes of addresses the proxy never connects to unless a range
 * allows them (private, loopback, link-local, ...). No I/O, no allocation, no state:
 * the policy module validates and normalises a request's lists with it, and the proxy
 * (egress.c) judges each connection with it. Unit-tested by tests/check_egressrule.c. */
#ifndef SBX_EGRESSRULE_H
#define SBX_EGRESSRULE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Bounds of a policy's lists (Policy.allowed_hosts, allowed_cidrs). */
#define EGRESS_MAX_HOSTS      256u
#define EGRESS_MAX_CIDRS      256u
#define EGRESS_NAME_MAX_BYTES 253u
/* A normalised pattern: name, "*." and ":65535". */
#define EGRESS_PATTERN_MAX_BYTES (EGRESS_NAME_MAX_BYTES + 8u)
/* "ffff:...:ffff/128" and then some. */
#define EGRESS_CIDR_MAX_BYTES 64u

/* An address range: family AF_INET or AF_INET6, addr in network order (4 or 16 bytes
 * used), host bits clear. */
struct egressrule_cidr {
        int family;
        uint8_t addr[16];
        unsigned prefix;
};

/* What an address is, for the refusal of non-public destinations. */
enum egressrule_class {
        EGRESS_PUBLIC = 0,
        EGRESS_PRIVATE,     /* RFC 1918, CGNAT 100.64/10, ULA fc00::/7, site-local fec0::/10 */
        EGRESS_LOOPBACK,    /* 127/8, ::1 */
        EGRESS_LINK_LOCAL,  /* 169.254/16, fe80::/10 */
        EGRESS_UNSPECIFIED, /* 0/8, :: */
        EGRESS_MULTICAST,   /* 224/4, ff00::/8 */
        EGRESS_RESERVED,    /* 240/4 with the broadcast address, IPv4-compatible ::a.b.c.d */
};

/* Validates an allowed_hosts entry and writes its normal form (lowercase, the port
 * without leading zeros) into out (at least EGRESS_PATTERN_MAX_BYTES). Refused with
 * -EINVAL and a one-line reason in err: empty, longer than 253 bytes, an empty label,
 * a label over 63 bytes, a character other than letters, digits, '-' and '_', a '*'
 * anywhere but a leading "*." label, an IP literal (or a name whose last label is all
 * digits, which resolvers read as one), a port outside 1..65535. */
int egressrule_host_normalize(const char *in, char *out, size_t outlen, char *err, size_t errlen);

/* Validates a request's host name (as CONNECT or a URL names it) like a pattern
 * without '*' and port. 0 or -EINVAL. */
int egressrule_name_check(const char *name);

/* 1 when one of n normalised patterns allows host (a checked name, any case) on port: a
 * pattern allows the same name, or for "*.suffix" a name that ends in ".suffix" with at
 * least one label before; on the pattern's port, or without one on 80 or 443. */
int egressrule_hosts_allow(char *const *patterns, size_t n, const char *host, unsigned port);

/* Parses an allowed_cidrs entry ("203.0.113.0/24", "2001:db8::/32", "10.1.2.3": a
 * single address). Host bits set below the prefix are cleared (normalised, not
 * refused: "10.1.2.3/8" is "10.0.0.0/8"). -EINVAL with a reason in err: not an address,
 * a prefix out of range or not a plain decimal number. */
int egressrule_cidr_parse(const char *in, struct egressrule_cidr *ret, char *err, size_t errlen);

/* The normal form of c ("10.0.0.0/8", "2001:db8::/32") into out (EGRESS_CIDR_MAX_BYTES). */
void egressrule_cidr_format(const struct egressrule_cidr *c, char *out, size_t len);

/* 1 when one of the n allowed_cidrs entries covers the address of sa (AF_INET or
 * AF_INET6; an IPv4-mapped ::ffff:a.b.c.d is judged as a.b.c.d). Entries that do not
 * parse cover nothing. */
int egressrule_cidrs_cover(char *const *cidrs, size_t n, const struct sockaddr *sa);

/* The class of sa's address; an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
 * address is judged by the IPv4 address it carries. */
enum egressrule_class egressrule_classify(const struct sockaddr *sa);
const char *egressrule_class_name(enum egressrule_class c);

/* When host is an IP literal (dotted quad, or IPv6 with or without brackets), fills
 * *ret (sockaddr_in or sockaddr_in6 with port) and returns 1; 0 when it is not one. */
int egressrule_literal(const char *host, unsigned port, struct sockaddr_storage *ret);

/* Splits an authority ("host", "host:port", "[v6]", "[v6]:port") into host (brackets
 * removed; hostlen bytes) and *ret_port (def_port when absent). -EINVAL when malformed
 * or the port is outside 1..65535. */
int egressrule_split_authority(const char *auth, size_t len, char *host, size_t hostlen,
                               unsigned *ret_port, unsigned def_port);

/* The text of sa's address ("203.0.113.10", "2001:db8::1") into out (64 bytes). */
void egressrule_addr_text(const struct sockaddr *sa, char *out, size_t len);

#endif
