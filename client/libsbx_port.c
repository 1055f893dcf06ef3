/* libsbx_port.c: sbx_open_port (sbx.h, "Port forwarding"), a stream to a port of a
 * sandbox. Each stream is a connection of its own to the daemon, made by
 * libsbx_transport.c in its exact-reads mode (no recv ever takes a byte past the frame
 * it reads), on which one OpenPort is sent; after its PortOpened answer the connection
 * is handed to the caller as a plain descriptor. Never logs. */
#include "libsbx_int.h"

#include <errno.h>
#include <stdlib.h>

/* The checks of sbx_open_port's arguments; fills the error on c. */
static enum sbx_code check_port_args(sbx_client *c, const char *id, uint32_t port,
                                     const int *ret_fd) {
        enum sbx_code rc;

        if (!ret_fd)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "sbx_open_port() was given NULL for ret_fd");
        if ((rc = libsbx_check_id(c, id)) != SBX_OK)
                return rc;
        if (port < 1 || port > 65535)
                return transport_fail(c, SBX_INVALID_ARGUMENT, EINVAL,
                                      "port %u is out of range: use 1 to 65535", port);
        return SBX_OK;
}

/* Sends OpenPort on s (a connection of its own) and waits for PortOpened. On failure c
 * carries s's error. */
static enum sbx_code open_on(sbx_client *c, sbx_client *s, const char *id, uint32_t port,
                             const char *address) {
        Sbx__V1__Request req = SBX__V1__REQUEST__INIT;
        Sbx__V1__OpenPort op = SBX__V1__OPEN_PORT__INIT;
        struct exchange k = {.req = &req, .want = SBX__V1__RESPONSE__BODY_PORT_OPENED};
        Sbx__V1__Response *resp = NULL;
        enum sbx_code rc;

        op.sandbox_id = unconst(id);
        op.has_port = 1;
        op.port = port;
        op.address = unconst(address);
        req.body_case = SBX__V1__REQUEST__BODY_OPEN_PORT;
        req.open_port = &op;
        rc = transport_call(s, &k, &resp);
        if (rc != SBX_OK)
                return transport_fail(c, rc, s->err, "%s", sbx_error_message(s));
        sbx__v1__response__free_unpacked(resp, NULL);
        return SBX_OK;
}

enum sbx_code sbx_open_port(sbx_client *c, const char *id, uint32_t port, const char *address,
                            int *ret_fd) {
        sbx_client *s = NULL;
        enum sbx_code rc;

        if (!c)
                return SBX_INVALID_ARGUMENT;
        transport_clear_error(c);
        if ((rc = check_port_args(c, id, port, ret_fd)) != SBX_OK)
                return rc;
        *ret_fd = -1;
        transport_reap_streams(c);
        rc = transport_connect_exact(c, &s);
        if (rc == SBX_OK)
                rc = open_on(c, s, id, port, address);
        if (rc == SBX_OK)
                rc = transport_take_stream(c, s, ret_fd);
        sbx_close(s);
        return rc;
}
