/* rpc_port.h: the handler of OpenPort (portfwd.h): a connection turned into a byte pipe
 * to a port of a sandbox's own network namespace.
 *
 * Checks the request (port 1..65535, address "127.0.0.1" or "::1", unset meaning the
 * first), that the caller may use the sandbox (its owner, or one it is shared with: the
 * same rule as RunCommand and ReadFile; anyone else gets NOT_FOUND word for word as for
 * an id nobody used), that it is live (ENDED) and that its network is its own: a
 * NETWORK_FULL sandbox shares the host's, whose loopback the daemon will not connect to
 * on a client's behalf, and an allowlist sandbox's SBX_EGRESS_PORT is the daemon's own
 * proxy for it (both FAILED_PRECONDITION). Then portfwd_open answers.
 *
 * Called by rpc_dispatch only, on the event loop. */
#ifndef SBX_RPC_PORT_H
#define SBX_RPC_PORT_H

#include "sbx.pb-c.h"

struct conn;

void rpc_port_open(struct conn *c, const Sbx__V1__Request *req);

#endif
