/* initmsg.h: one message with file descriptors over the init channel.
 *
 * The init channel is an AF_UNIX SOCK_SEQPACKET socketpair between sbxd and a sandbox's
 * init helper (see init.proto). A packet is exactly one encoded message, at most
 * SBX_INIT_MAX_MSG_BYTES, and carries at most SBX_INIT_MAX_FDS descriptors as
 * SCM_RIGHTS. Used by both ends; nothing here logs. */
#ifndef SBX_INITMSG_H
#define SBX_INITMSG_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Sends msg with nfds descriptors (they stay open and owned by the caller). Returns 0,
 * -EMSGSIZE when the message or fd count is over the limit, -EAGAIN when the socket is
 * non-blocking and full, or another -errno from sendmsg. Never raises SIGPIPE. */
int initmsg_send(int sock, const ProtobufCMessage *msg, const int *fds, size_t nfds);

/* As initmsg_send, for a message already packed into buf (len bytes). */
int initmsg_send_packed(int sock, const uint8_t *buf, size_t len, const int *fds, size_t nfds);

/* Receives one packet into buf (cap bytes, at least SBX_INIT_MAX_MSG_BYTES) and up to
 * max_fds descriptors into fds (made O_CLOEXEC; the caller owns them). *ret_len and
 * *ret_nfds are set on success. Returns 1 for a packet, 0 at end of stream, -EAGAIN
 * when non-blocking and empty, -EMSGSIZE when the packet or its descriptors were cut
 * (any descriptors received are closed), or another -errno. */
int initmsg_recv(int sock, uint8_t *buf, size_t cap, int *fds, size_t max_fds, size_t *ret_len,
                 size_t *ret_nfds);

#endif
