/* portfwd.h: streams to ports of a sandbox (OpenPort), each one a client connection
 * turned into a byte pipe to address:port of the sandbox's own network namespace.
 *
 * The daemon never enters the sandbox's namespaces: it asks the sandbox's init for an
 * unconnected TCP socket of that namespace (sandbox_make_socket, checked by sbsock.c),
 * connects it itself (uv_tcp_connect: the address is the sandbox's loopback), records
 * the stream (store_forward_insert, in the batch the turn commits before the reply),
 * answers PortOpened, hands the connection over (conn_hand_over: once the answer is
 * written) and relays bytes both ways (relay.c: backpressure per direction, so a client
 * that stops reading stalls only its own stream; half-close passed on). The stream ends
 * when both ends have closed, at the first error, when the client's connection closes,
 * or when the sandbox ends; its record then gets its end and bytes.
 *
 * Bounds: SBX_SANDBOX_MAX_FORWARDS streams per sandbox, --max-forwards-per-uid per
 * user (QUOTA_FORWARDS, counted from the request to the stream's end). Each stream
 * owns itself: it is freed once its handles are closed. Called by the request layer
 * (rpc_port.c) only, on the loop thread. Logs a line per stream that ends. */
#ifndef SBX_PORTFWD_H
#define SBX_PORTFWD_H

#include <stdbool.h>
#include <stdint.h>

struct conn;
struct sandbox;

/* A stream's relay: a direction's queue above this pauses its source; one read takes at
 * most PORTFWD_READ_BYTES (a quarter of the system calls of the relay's default: 1 GiB
 * through a stream went from about 0.55x to 0.67x of a plain loopback copy, the bench's
 * forward rows). A direction holds at most the sum. */
#define PORTFWD_QUEUE_HIGH_BYTES (256u * 1024u)
#define PORTFWD_READ_BYTES (256u * 1024u)

/* Opens a stream for request rid of c to port (1..65535) of sb, at "::1" when ipv6,
 * else "127.0.0.1"; the request has been checked (the caller may use sb; sb is live and
 * its network is not the host's). Answers the request itself, now or later: PortOpened
 * and then the stream, or an error status naming why (the connection then takes
 * requests again). Never fails otherwise. */
void portfwd_open(struct conn *c, uint64_t rid, struct sandbox *sb, uint32_t port, bool ipv6);

#endif
