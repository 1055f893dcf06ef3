/* pbjson.h: a protobuf-c message as a JSON object (jansson), for what the daemon writes
 * for people to read (a snapshot's policy label, docs/snapshots.md): every field set,
 * under its .proto name; enums by their value's name, 64-bit integers as numbers
 * (JSON's integers are 64-bit here), bytes as lowercase hex, nested messages as
 * objects, repeated fields as arrays. A proto2 optional field without its has_ flag (a
 * NULL string or message) is left out. A leaf module: nothing but protobuf-c and
 * jansson; any thread. */
#ifndef SBX_PBJSON_H
#define SBX_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* m as a new JSON object, or NULL when out of memory. */
json_t *pbjson_of(const ProtobufCMessage *m);

#endif
