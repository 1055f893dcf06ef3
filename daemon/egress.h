/* egress.h: NETWORK_ALLOWLIST's filtering proxy for one sandbox, on the daemon's loop.
 *
 * The mechanism. The sandbox keeps its own network namespace with loopback only. Its
 * PID 1 makes a listening TCP socket on 127.0.0.1:SBX_EGRESS_PORT inside that namespace
 * during setup and hands it to the daemon with Ready (init.proto proxy_listener); the
 * daemon accepts on it here, so the proxy runs outside the sandbox while it is reached
 * inside on loopback (HTTP_PROXY and friends name it). No relay process, no Unix socket
 * in the view, no setns from the daemon (which a rootless daemon could not do). PID 1
 * keeps its own copy of the listener and hands it to a daemon that adopts the sandbox.
 *
 * The proxy reads a bounded request head (CONNECT host:port, a plain HTTP request in
 * absolute form, or a SOCKS5 CONNECT: socks5.h), judges it with egressrule.h against the sandbox's
 * allowed_hosts and allowed_cidrs, resolves names itself (from /etc/hosts on the loop, else
 * uv_getaddrinfo off the loop, taking turns with the other proxies of the same uid: egressshare.h)
 * and connects to the one address it checked, never to a private, loopback, link-local, multicast
 * or reserved address no allowed_cidrs entry covers. It then relays bytes both ways (relay.h) with
 * backpressure, idle and connect timeouts, a per-sandbox cap on open connections and the owner's
 * budget of descriptors (egressshare.h) over all its sandboxes. Every connection allowed or refused
 * is recorded (store_connection_*), but a run of refusals over the owner's budget is one record
 * that counts them.
 *
 * Owned by the sandbox (sandbox.c); called on the loop thread only. */
#ifndef SBX_EGRESS_H
#define SBX_EGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx.pb-c.h"

struct sbxd;
struct egress;

/* The port the proxy listens on inside every allowlist sandbox (its own namespace: no
 * clash with another sandbox or the host). */
#define SBX_EGRESS_PORT 3128u

/* Bounds. */
#define EGRESS_HEAD_MAX_BYTES     16384u /* a request head, CONNECT or HTTP */
#define EGRESS_HEAD_TIMEOUT_MS    10000u /* to send it */
#define EGRESS_CONNECT_TIMEOUT_MS 10000u
#define EGRESS_IDLE_TIMEOUT_MS    300000u        /* nothing either way for this long: closed */
#define EGRESS_MAX_OPEN           64u            /* open connections per sandbox */
#define EGRESS_QUEUE_HIGH_BYTES   (256u * 1024u) /* a direction's queue: its source paused above */

/* Starts the proxy of sandbox id of owner (whose budgets its connections use) on fd (a
 * socket init handed over: taken, closed on failure) with pol's allowed_hosts and
 * allowed_cidrs (copied). Checks that fd is a listening TCP socket first (init is
 * untrusted). Connection records continue after the highest recorded seq of id (one
 * left open by a previous daemon is marked ended). Returns 0 with *ret, or -errno
 * (-ENOTSOCK: fd is no listening TCP socket). */
int egress_start(struct sbxd *d, const char *id, uid_t owner, const Sbx__V1__Policy *pol, int fd,
                 struct egress **ret);

/* Replaces the sandbox id, owner and rules (a warm sandbox claimed under a client's id
 * and policy; its connections made before keep the budget they were counted in). 0 or
 * -ENOMEM (then the old ones stay). */
int egress_set_policy(struct egress *eg, const char *id, uid_t owner, const Sbx__V1__Policy *pol);

/* Stops accepting and closes every connection (each record ended with reason); the
 * memory goes once the loop has closed the handles. eg must not be used after.
 * Accepts NULL. */
void egress_close(struct egress *eg, const char *reason);

#endif
