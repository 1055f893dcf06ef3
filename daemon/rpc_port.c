/* rpc_port.c: OpenPort; see rpc_port.h. */
#include "rpc_port.h"

#include <stdbool.h>
#include <string.h>

#include "conn.h"
#include "egress.h"
#include "portfwd.h"
#include "rpc_common.h"
#include "sandbox.h"

void rpc_port_open(struct conn *c, const Sbx__V1__Request *req) {
        const Sbx__V1__OpenPort *op = req->open_port;
        uint64_t rid = req->request_id;
        const char *addr = op->address && op->address[0] ? op->address : "127.0.0.1";
        bool ipv6 = strcmp(addr, "::1") == 0;
        struct sandbox *sb;

        if (!op->has_port || op->port < 1 || op->port > 65535) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "port %u is out of its bounds (1 to 65535)",
                                 op->has_port ? op->port : 0);
                return;
        }
        if (!ipv6 && strcmp(addr, "127.0.0.1") != 0) {
                conn_send_status(c, rid, SBX__V1__CODE__INVALID_ARGUMENT,
                                 "address '%.64s' is not one of the sandbox's loopback addresses "
                                 "(\"127.0.0.1\" or \"::1\")",
                                 addr);
                return;
        }
        sb = rpc_lookup(c, rid, op->sandbox_id);
        if (!sb)
                return;
        if (sandbox_network_is_host(sb)) {
                conn_send_status(c, rid, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "sandbox %s has the host's network (NETWORK_FULL): its port "
                                 "%u is the host's, which the daemon does not connect to for a "
                                 "client; connect to it directly",
                                 sandbox_id(sb), op->port);
                return;
        }
        if (op->port == SBX_EGRESS_PORT && sandbox_network_is_allowlist(sb)) {
                conn_send_status(c, rid, SBX__V1__CODE__FAILED_PRECONDITION,
                                 "port %u of sandbox %s is its allowlist proxy, which the daemon "
                                 "serves for the sandbox's own connections; a client reaches "
                                 "the network from where it runs",
                                 op->port, sandbox_id(sb));
                return;
        }
        portfwd_open(c, rid, sb, op->port, ipv6);
}
