/* libsbx_limit_table.c: the rows of SBX_LIMIT_TABLE (libsbx_limit_table.h) as data, with
 * where each field lies in struct sbx_limits and in the wire's Limits, and the accessors
 * that read and write a limit through its row.
 *
 * Owns only the constant table; any thread. Called by libsbx_wire.c and by the sbx tool
 * (cli_sandbox.c, cli_mcp_tools.c). The asserts below hold the table's type column to
 * the fields of both structs, so that a row cannot say one type while a struct has
 * another. */
#include "libsbx_limit_table.h"

#include <stdio.h>
#include <string.h>

#include "sbx.pb-c.h"

/* The C type of each type column, in struct sbx_limits and in the wire's Limits. */
#define CTYPE_U64    uint64_t
#define CTYPE_U32    uint32_t
#define CTYPE_DOUBLE double
#define CTYPE_BOOL   int
#define WTYPE_U64    uint64_t
#define WTYPE_U32    uint32_t
#define WTYPE_DOUBLE double
#define WTYPE_BOOL   protobuf_c_boolean

#define SAME_TYPE(a, b) __builtin_types_compatible_p(__typeof__(a), b)

#define CHECK_ROW(bit, name, field, type, unit, min, flag, hint, mcp_name, mcp_unit)               \
        _Static_assert(SAME_TYPE(((struct sbx_limits *)0)->field, CTYPE_##type),                   \
                       "struct sbx_limits." #field " is not " #type);                              \
        _Static_assert(SAME_TYPE(((Sbx__V1__Limits *)0)->field, WTYPE_##type),                     \
                       "Limits." #field " is not " #type);                                         \
        _Static_assert(SAME_TYPE(((Sbx__V1__Limits *)0)->has_##field, protobuf_c_boolean),         \
                       "Limits." #field " is not optional");
SBX_LIMIT_TABLE(CHECK_ROW)

/* Each row has a bit of its own, and the bits are those of SBX_LIMIT_* from the first on:
 * no bit twice, none left out below the highest. */
#define OR_BIT(bit, ...) | (bit)
_Static_assert((0u SBX_LIMIT_TABLE(OR_BIT)) == (1u << LIBSBX_N_LIMITS) - 1,
               "the bits of SBX_LIMIT_TABLE are not SBX_LIMIT_* one each");

#define ROW(bit_, name_, field_, type_, unit_, min_, flag_, hint_, mcp_name_, mcp_unit_)           \
        {                                                                                          \
                .bit = (bit_),                                                                     \
                .name = (name_),                                                                   \
                .field = #field_,                                                                  \
                .type = LIBSBX_LIMIT_##type_,                                                      \
                .unit = LIBSBX_UNIT_##unit_,                                                       \
                .min = (min_),                                                                     \
                .flag = (flag_),                                                                   \
                .hint = (hint_),                                                                   \
                .mcp_name = (mcp_name_),                                                           \
                .mcp_unit = (mcp_unit_),                                                           \
                .offset = offsetof(struct sbx_limits, field_),                                     \
                .wire_offset = offsetof(Sbx__V1__Limits, field_),                                  \
                .wire_has_offset = offsetof(Sbx__V1__Limits, has_##field_),                        \
        },

const struct libsbx_limit libsbx_limits[LIBSBX_N_LIMITS] = {SBX_LIMIT_TABLE(ROW)};

bool libsbx_limit_given(const struct sbx_limits *l, const struct libsbx_limit *t) {
        return (l->set & t->bit) != 0;
}

uint64_t libsbx_limit_uint(const struct sbx_limits *l, const struct libsbx_limit *t) {
        const char *p = (const char *)l + t->offset;
        uint64_t u64;
        uint32_t u32;
        int b;

        switch (t->type) {
        case LIBSBX_LIMIT_U64:
                memcpy(&u64, p, sizeof(u64));
                return u64;
        case LIBSBX_LIMIT_U32:
                memcpy(&u32, p, sizeof(u32));
                return u32;
        case LIBSBX_LIMIT_BOOL:
                memcpy(&b, p, sizeof(b));
                return b != 0;
        case LIBSBX_LIMIT_DOUBLE:
                break;
        }
        return 0;
}

double libsbx_limit_double(const struct sbx_limits *l, const struct libsbx_limit *t) {
        double d = 0;

        if (t->type == LIBSBX_LIMIT_DOUBLE)
                memcpy(&d, (const char *)l + t->offset, sizeof(d));
        return d;
}

void libsbx_limit_set_uint(struct sbx_limits *l, const struct libsbx_limit *t, uint64_t v) {
        char *p = (char *)l + t->offset;
        uint32_t u32 = (uint32_t)v;
        int b = v != 0;

        switch (t->type) {
        case LIBSBX_LIMIT_U64:
                memcpy(p, &v, sizeof(v));
                break;
        case LIBSBX_LIMIT_U32:
                memcpy(p, &u32, sizeof(u32));
                break;
        case LIBSBX_LIMIT_BOOL:
                memcpy(p, &b, sizeof(b));
                break;
        case LIBSBX_LIMIT_DOUBLE:
                return;
        }
        l->set |= t->bit;
}

void libsbx_limit_set_double(struct sbx_limits *l, const struct libsbx_limit *t, double v) {
        if (t->type != LIBSBX_LIMIT_DOUBLE)
                return;
        memcpy((char *)l + t->offset, &v, sizeof(v));
        l->set |= t->bit;
}

const char *libsbx_limit_text(const struct sbx_limits *l, const struct libsbx_limit *t,
                              char buf[LIBSBX_LIMIT_TEXT_BYTES]) {
        if (t->type == LIBSBX_LIMIT_DOUBLE)
                snprintf(buf, LIBSBX_LIMIT_TEXT_BYTES, "%g", libsbx_limit_double(l, t));
        else if (t->type == LIBSBX_LIMIT_BOOL)
                snprintf(buf, LIBSBX_LIMIT_TEXT_BYTES, "%s",
                         libsbx_limit_uint(l, t) ? "yes" : "no");
        else
                snprintf(buf, LIBSBX_LIMIT_TEXT_BYTES, "%llu",
                         (unsigned long long)libsbx_limit_uint(l, t));
        return buf;
}
