/* admit.h: who may connect to sbxd, decided once per connection before any request of
 * it is read.
 *
 * Called by server.c only, once the connection's peer credentials are read (conn_serve
 * asks its admit handler). Nothing here logs or keeps state. */
#ifndef SBX_ADMIT_H
#define SBX_ADMIT_H

#include <stddef.h>

struct sbxd;
struct conn;

/* Decides whether c may be served by daemon d, given the connections open (n_open,
 * c included) and the served connections of c's uid (n_of_uid, c not included).
 * Refused are: over SBX_MAX_CONNECTIONS open (-EAGAIN); for a rootless daemon, a uid
 * other than its own and root (-EPERM); a peer running in one of the daemon's sandboxes
 * or in another sbxd's, by uid (a root daemon: any root sbxd's sandbox uids, uidrange.h)
 * or PID namespace (-EPERM), or whose process is gone before it could be checked
 * (-EPERM); a peer whose namespace cannot be checked for want of resources (-EAGAIN);
 * a uid that already holds --max-connections-per-uid connections (-EAGAIN). Returns 0,
 * or the -errno with a message for the client in why (whylen bytes). */
int admit_connection(const struct sbxd *d, const struct conn *c, unsigned n_open,
                     unsigned n_of_uid, char *why, size_t whylen);

#endif
