/* chunk.h: OutputChunk responses, as RunCommand with a stream and AttachCommand send a
 * command's output: one response per piece of a stream, each at most what a frame of
 * the connection holds.
 *
 * Used by rpc.c (a streamed command's output, a result too big for one frame) and
 * attach.c (kept and followed output). Loop thread; nothing here logs. */
#ifndef SBX_CHUNK_H
#define SBX_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

struct conn;

/* Room an OutputChunk response takes in a frame besides its data (ids, offset, tags). */
#define CHUNK_HEADROOM_BYTES 1024u

/* The most data one OutputChunk carries on c: SBX_RESULT_PIECE_BYTES, or less where
 * c's frames are smaller. */
size_t chunk_piece_bytes(const struct conn *c);

/* Sends len bytes of data, bytes of stream from offset on of command command_id, as the
 * OutputChunk answering request rid: copied into its frame, or with taken sent from data
 * itself, which the connection then owns (conn_send_taking). */
void chunk_send(struct conn *c, uint64_t rid, char *command_id, Sbx__V1__Stream stream,
                uint64_t offset, uint8_t *data, size_t len, int taken);

#endif
