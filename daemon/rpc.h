/* rpc.h: decoding, validation and dispatch of sbx.v1 requests.
 *
 * One dispatch table maps each Request body to its handler; one function maps -errno
 * to a wire status code. Handlers answer at once through conn_send(), or later (a
 * command's result, a sandbox's readiness) through callbacks they hand to the sandbox
 * layer together with a reference to the connection. Called by conn only. */
#ifndef SBX_RPC_H
#define SBX_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

struct conn;

/* Decodes and handles one frame from c. Returns 0 when the connection may go on, or
 * -EBADMSG after answering a frame that could not be decoded at all (the caller then
 * shuts the connection down). */
int rpc_dispatch(struct conn *c, const uint8_t *payload, size_t len);

/* The wire code for a -errno from the layers below. */
Sbx__V1__Code rpc_code_from_errno(int err);

/* The name of a code ("NOT_FOUND"), for logs and records. */
const char *rpc_code_name(Sbx__V1__Code code);

#endif
