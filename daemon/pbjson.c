/* pbjson.c: a protobuf-c message as JSON; see pbjson.h.
 *
 * Walks the message's descriptor: each field's value is at its offset in the struct,
 * its presence (has_ flag, or element count for a repeated field) at its quantifier
 * offset. */
#include "pbjson.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of one element of type f->type at p, or NULL when out of memory. */
static json_t *element(const ProtobufCFieldDescriptor *f, const void *p) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                return json_integer(*(const int32_t *)p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                return json_integer(*(const uint32_t *)p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                return json_integer(*(const int64_t *)p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                /* Past INT64_MAX (no such value in sbxd's messages): clamped. */
                return json_integer(*(const uint64_t *)p > INT64_MAX ? INT64_MAX
                                                                     : (json_int_t) *
                                                                               (const uint64_t *)p);
        case PROTOBUF_C_TYPE_FLOAT:
                return json_real(*(const float *)p);
        case PROTOBUF_C_TYPE_DOUBLE:
                return json_real(*(const double *)p);
        case PROTOBUF_C_TYPE_BOOL:
                return json_boolean(*(const protobuf_c_boolean *)p);
        case PROTOBUF_C_TYPE_ENUM: {
                int v = *(const int *)p;
                const ProtobufCEnumValue *ev =
                        protobuf_c_enum_descriptor_get_value(f->descriptor, v);
                return ev ? json_string(ev->name) : json_integer(v);
        }
        case PROTOBUF_C_TYPE_STRING:
                return json_string(*(char *const *)p ? *(char *const *)p : "");
        case PROTOBUF_C_TYPE_BYTES: {
                const ProtobufCBinaryData *b = p;
                char *hex = malloc(b->len * 2 + 1);
                json_t *v;

                if (!hex)
                        return NULL;
                for (size_t i = 0; i < b->len; i++)
                        snprintf(hex + 2 * i, 3, "%02x", b->data[i]);
                hex[b->len * 2] = '\0';
                v = json_string(hex);
                free(hex);
                return v;
        }
        case PROTOBUF_C_TYPE_MESSAGE:
                return *(ProtobufCMessage *const *)p ? pbjson_of(*(ProtobufCMessage *const *)p)
                                                     : json_object();
        }
        return json_null();
}

/* The size of one element of type t in a repeated field's array. */
static size_t element_size(ProtobufCType t) {
        switch (t) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return 8;
        case PROTOBUF_C_TYPE_DOUBLE:
                return sizeof(double);
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_ENUM:
                return sizeof(int);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
                return sizeof(void *);
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(ProtobufCBinaryData);
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
                return 4;
        }
        return 4;
}

/* Whether the singular field f of m is set. */
static int is_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        const char *base = (const char *)m;

        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
                return *(void *const *)(base + f->offset) != NULL;
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
                return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
        return 1;
}

/* The JSON of field f of m into o (left out when not set). 0 or -1 (out of memory). */
static int add_field(json_t *o, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        const char *base = (const char *)m;
        json_t *v;

        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                size_t n = *(const size_t *)(base + f->quantifier_offset);
                const char *arr = *(char *const *)(base + f->offset);
                if (n == 0)
                        return 0;
                v = json_array();
                for (size_t i = 0; v && i < n; i++)
                        if (json_array_append_new(v, element(f, arr + i * element_size(f->type))) <
                            0) {
                                json_decref(v);
                                v = NULL;
                        }
        } else {
                if (!is_set(m, f))
                        return 0;
                v = element(f, base + f->offset);
        }
        return v && json_object_set_new(o, f->name, v) == 0 ? 0 : -1;
}

json_t *pbjson_of(const ProtobufCMessage *m) {
        const ProtobufCMessageDescriptor *d = m->descriptor;
        json_t *o = json_object();

        for (unsigned i = 0; o && i < d->n_fields; i++)
                if (add_field(o, m, &d->fields[i]) < 0) {
                        json_decref(o);
                        o = NULL;
                }
        return o;
}
