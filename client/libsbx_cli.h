/* libsbx_cli.h: what libsbx offers the sbx tool beyond sbx.h. These are not part of the
 * public API (libsbx.map does not export them from libsbx.so): the tool links libsbx.a
 * and its needs are those of a short-lived process, one or two calls, then exit. */
#ifndef SBX_LIBSBX_CLI_H
#define SBX_LIBSBX_CLI_H

#include "sbx.h"

/* sbx_connect, except that the Hello's reply is not awaited here: the first call (or
 * sbx_hello) sends its request right behind the Hello and reads the Hello's reply first,
 * which saves a round trip to the daemon. What sbx_connect would have said of the Hello
 * (a daemon that refuses the connection, that is not there any more, an ssh:// link that
 * prints text) that call says instead, in the same words; nothing of the call ran then,
 * since the daemon answers the Hello before it reads the request. A request larger than
 * the default frame waits for the Hello, whose reply says the daemon's limit. */
enum sbx_code libsbx_connect_pipelined(const char *socket_path, const char *client_name,
                                       sbx_client **ret);

/* Called when the watched fd is ready to read (see libsbx_set_watch). */
typedef void (*libsbx_watch_cb)(void *userdata);

/* While a call on c waits for the daemon (or for room to send, or for stdin), fd is
 * polled too and on_ready(userdata) called, on the calling thread, whenever it is
 * ready to read; on_ready must make it not ready (read what it has), and must not call
 * into c (another client is fine). A single-threaded program so handles signals that
 * arrive during a call (a self-pipe) without a thread of its own. fd -1 or on_ready NULL:
 * nothing watched. */
void libsbx_set_watch(sbx_client *c, int fd, libsbx_watch_cb on_ready, void *userdata);

/* The bytes c's buffer for replies holds now (kept between calls that need it, see
 * READER_KEEP_BYTES in libsbx_transport.c): for the unit tests, the tool has no use for
 * it. */
size_t libsbx_reply_room(const sbx_client *c);

#endif
