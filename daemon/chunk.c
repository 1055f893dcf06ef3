/* chunk.c: OutputChunk responses (chunk.h). */
#include "chunk.h"

#include "config.h"
#include "conn.h"
#include "sbx_limits.h"
#include "sbxd.h"

size_t chunk_piece_bytes(const struct conn *c) {
        uint64_t frame = conn_daemon(c)->cfg->max_frame_bytes;

        return frame > (uint64_t)SBX_RESULT_PIECE_BYTES + CHUNK_HEADROOM_BYTES
                       ? SBX_RESULT_PIECE_BYTES
                       : (size_t)(frame - CHUNK_HEADROOM_BYTES);
}

void chunk_send(struct conn *c, uint64_t rid, char *command_id, Sbx__V1__Stream stream,
                uint64_t offset, uint8_t *data, size_t len, int taken) {
        Sbx__V1__Response resp = SBX__V1__RESPONSE__INIT;
        Sbx__V1__Status ok = SBX__V1__STATUS__INIT;
        Sbx__V1__OutputChunk oc = SBX__V1__OUTPUT_CHUNK__INIT;

        ok.has_code = 1;
        ok.code = SBX__V1__CODE__OK;
        resp.has_request_id = 1;
        resp.request_id = rid;
        resp.status = &ok;
        oc.command_id = command_id;
        oc.has_stream = 1;
        oc.stream = stream;
        oc.has_offset = 1;
        oc.offset = offset;
        oc.has_data = 1;
        oc.data.data = data;
        oc.data.len = len;
        resp.body_case = SBX__V1__RESPONSE__BODY_OUTPUT;
        resp.output = &oc;
        if (taken)
                (void)conn_send_taking(c, &resp, data, len);
        else
                (void)conn_send(c, &resp);
}
