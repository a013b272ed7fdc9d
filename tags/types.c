/*
 * tags/types.c -- the types and orders: their names, their parsers, the
 * registers each type occupies and which orders it takes. The one table of
 * types: the codec, the table's validation and the CSV all ask here.
 */
#include "tags/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Indexed by tags_type_t. */
static const char *const type_names[] = {
    "bool", "int16", "uint16", "int32", "uint32", "int64",
    "uint64", "float32", "float64", "string", "raw",
    "bcd16", "bcd32", "float16", "int8h", "int8l", "uint8h", "uint8l",
    "fixed16", "ufixed16", "fixed32", "ufixed32",
};
#define TYPE_COUNT (sizeof type_names / sizeof type_names[0])
_Static_assert(TYPE_COUNT == TAGS_TYPE_LAST + 1, "a name for every type");

/* Other names integrators know the same types by (Kepware's BCD and LBCD). */
static const struct {
    const char *name;
    tags_type_t type;
} type_aliases[] = { { "bcd", TAGS_BCD16 }, { "lbcd", TAGS_BCD32 } };

/* Indexed by tags_order_t: the swaps are its bits. */
static const char *const order16[] = { "AB", "AB", "BA", "BA" };
static const char *const order32[] = { "ABCD", "CDAB", "BADC", "DCBA" };
static const char *const order64[] = { "ABCDEFGH", "GHEFCDAB", "BADCFEHG", "HGFEDCBA" };
/* A string's: the byte swap alone keeps the 16-bit names it always had. */
static const char *const order_string[] = { "AB", "CDAB", "BA", "DCBA" };

static bool is_fixed(tags_type_t type)
{
    return type >= TAGS_FIXED16 && type <= TAGS_UFIXED32;
}

static int find_type(const char *text, size_t len, tags_type_t *type)
{
    for (unsigned i = 0; i < TYPE_COUNT; i++)
        if (strlen(type_names[i]) == len && strncasecmp(text, type_names[i], len) == 0) {
            *type = (tags_type_t)i;
            return 0;
        }
    for (unsigned i = 0; i < sizeof type_aliases / sizeof type_aliases[0]; i++)
        if (strlen(type_aliases[i].name) == len && strncasecmp(text, type_aliases[i].name, len) == 0) {
            *type = type_aliases[i].type;
            return 0;
        }
    return -EINVAL;
}

int tags_parse_type_point(const char *text, tags_type_t *type, unsigned *count, unsigned *point,
                          char *msg, size_t cap)
{
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    tags_type_t t;

    if (find_type(text, len, &t) < 0)
        return tags_fail(msg, cap, -EINVAL,
                         "unknown type '%s' (bool, int16, uint16, int32, uint32, int64, uint64, "
                         "float16, float32, float64, string:N, raw:N, bcd16, bcd32, int8h, int8l, "
                         "uint8h, uint8l, fixed16:D, ufixed16:D, fixed32:D, ufixed32:D)", text);
    bool sized = t == TAGS_STRING || t == TAGS_RAW;
    unsigned long n = 0;
    if (sized && (!colon || tags_parse_decimal(colon + 1, 1, TAGS_MAX_REGISTERS, &n) < 0))
        return tags_fail(msg, cap, -EINVAL, "type '%s' needs its registers, %s:N with N 1..%u",
                         text, type_names[t], TAGS_MAX_REGISTERS);
    if (is_fixed(t) && (!colon || tags_parse_decimal(colon + 1, 1, TAGS_POINT_MAX, &n) < 0))
        return tags_fail(msg, cap, -EINVAL, "type '%s' needs its digits after the point, %s:D "
                         "with D 1..%u", text, type_names[t], TAGS_POINT_MAX);
    if (!sized && !is_fixed(t) && colon)
        return tags_fail(msg, cap, -EINVAL, "type '%s': %s takes no :N", text, type_names[t]);
    if (is_fixed(t) && !point)
        return tags_fail(msg, cap, -EINVAL, "type '%s': fixed-point types are not taken here", text);
    *type = t;
    *count = tags_type_registers(t, sized ? (unsigned)n : 0);
    if (point)
        *point = is_fixed(t) ? (unsigned)n : 0;
    return 0;
}

int tags_parse_type(const char *text, tags_type_t *type, unsigned *count, char *msg, size_t cap)
{
    return tags_parse_type_point(text, type, count, NULL, msg, cap);
}

static int find_order(const char *const names[4], const char *text, tags_order_t *order)
{
    for (unsigned i = 0; i < 4; i++)
        if (strcasecmp(text, names[i]) == 0) {
            *order = (tags_order_t)i;
            return 0;
        }
    return -EINVAL;
}

int tags_parse_order(const char *text, tags_order_t *order, char *msg, size_t cap)
{
    if (find_order(order32, text, order) == 0 || find_order(order64, text, order) == 0)
        return 0;
    if (strcasecmp(text, "AB") == 0 || strcasecmp(text, "BA") == 0) {
        *order = toupper((unsigned char)text[0]) == 'A' ? TAGS_ORDER_ABCD : TAGS_ORDER_BADC;
        return 0;
    }
    return tags_fail(msg, cap, -EINVAL,
                     "unknown order '%s' (ABCD, CDAB, BADC, DCBA or their 64-bit forms)", text);
}

/* The names this type takes, or NULL when it takes none. */
static const char *const *orders_of(tags_type_t type)
{
    switch (type) {
    case TAGS_STRING:
        return order_string;
    case TAGS_INT16: case TAGS_UINT16: case TAGS_BCD16: case TAGS_FLOAT16: case TAGS_FIXED16:
    case TAGS_UFIXED16:
        return order16;
    case TAGS_INT32: case TAGS_UINT32: case TAGS_FLOAT32: case TAGS_BCD32: case TAGS_FIXED32:
    case TAGS_UFIXED32:
        return order32;
    case TAGS_INT64: case TAGS_UINT64: case TAGS_FLOAT64:
        return order64;
    default:
        return NULL;
    }
}

int tags_parse_order_for(const char *text, tags_type_t type, tags_order_t *order, char *msg, size_t cap)
{
    const char *const *names = orders_of(type);
    if (!names)
        return tags_fail(msg, cap, -EINVAL, "order '%s': type %s takes no order", text,
                         tags_type_name(type));
    if (names == order16 || names == order_string) {
        if (strcasecmp(text, "AB") == 0 || strcasecmp(text, "BA") == 0) {
            *order = toupper((unsigned char)text[0]) == 'A' ? TAGS_ORDER_ABCD : TAGS_ORDER_BADC;
            return 0;
        }
        if (names == order_string && find_order(order32, text, order) == 0)
            return 0;
        if (names == order16)
            return tags_fail(msg, cap, -EINVAL, "order '%s' does not fit %s (AB or BA)", text,
                             tags_type_name(type));
        return tags_fail(msg, cap, -EINVAL, "order '%s' does not fit string (AB, BA, ABCD, CDAB, "
                         "BADC or DCBA)", text);
    }
    if (find_order(names, text, order) == 0)
        return 0;
    return tags_fail(msg, cap, -EINVAL, "order '%s' does not fit %s (%s, %s, %s or %s)", text,
                     tags_type_name(type), names[0], names[1], names[2], names[3]);
}

tags_order_t tags_device_order(tags_order_t device_order, tags_type_t type)
{
    return type == TAGS_STRING ? (tags_order_t)(device_order & TAGS_ORDER_BYTESWAP) : device_order;
}

int tags_parse_confirm(const char *text, uint8_t *confirm, char *msg, size_t cap)
{
    bool on;
    int rc = tags_parse_bool(text, &on, msg, cap);
    if (rc == 0)
        *confirm = on ? TAGS_CONFIRM_ON : TAGS_CONFIRM_OFF;
    return rc;
}

int tags_parse_decimals(const char *text, bool *has, uint8_t *decimals, char *msg, size_t cap)
{
    unsigned long v;
    if (tags_parse_decimal(text, 0, TAGS_DECIMALS_MAX, &v) < 0)
        return tags_fail(msg, cap, -EINVAL, "decimals '%s' is not 0..%u (digits after the point)",
                         text, TAGS_DECIMALS_MAX);
    *has = true;
    *decimals = (uint8_t)v;
    return 0;
}

const char *tags_type_name(tags_type_t type)
{
    return (unsigned)type < TYPE_COUNT ? type_names[type] : "?";
}

const char *tags_order_name(tags_order_t order, tags_type_t type)
{
    const char *const *names = orders_of(type);
    return names && (unsigned)order < 4 ? names[order] : "";
}

unsigned tags_type_registers(tags_type_t type, unsigned n)
{
    switch (type) {
    case TAGS_BOOL: case TAGS_INT16: case TAGS_UINT16: case TAGS_BCD16: case TAGS_FLOAT16:
    case TAGS_INT8H: case TAGS_INT8L: case TAGS_UINT8H: case TAGS_UINT8L: case TAGS_FIXED16:
    case TAGS_UFIXED16:
        return 1;
    case TAGS_INT32: case TAGS_UINT32: case TAGS_FLOAT32: case TAGS_BCD32: case TAGS_FIXED32:
    case TAGS_UFIXED32:
        return 2;
    case TAGS_INT64: case TAGS_UINT64: case TAGS_FLOAT64:
        return 4;
    case TAGS_STRING: case TAGS_RAW:
        return n >= 1 && n <= TAGS_MAX_REGISTERS ? n : 0;
    }
    return 0;
}

tags_kind_t tags_type_kind(tags_type_t type)
{
    switch (type) {
    case TAGS_INT16: case TAGS_INT32: case TAGS_INT64: case TAGS_INT8H: case TAGS_INT8L:
        return TAGS_KIND_SIGNED;
    case TAGS_UINT16: case TAGS_UINT32: case TAGS_UINT64: case TAGS_UINT8H: case TAGS_UINT8L:
    case TAGS_BCD16: case TAGS_BCD32:
        return TAGS_KIND_UNSIGNED;
    case TAGS_FIXED16: case TAGS_FIXED32:
        return TAGS_KIND_FIXED_SIGNED;
    case TAGS_UFIXED16: case TAGS_UFIXED32:
        return TAGS_KIND_FIXED_UNSIGNED;
    case TAGS_FLOAT16: case TAGS_FLOAT32: case TAGS_FLOAT64:
        return TAGS_KIND_FLOAT;
    default:
        return TAGS_KIND_OTHER;
    }
}

bool tags_type_signed(tags_type_t type)
{
    tags_kind_t k = tags_type_kind(type);
    return k == TAGS_KIND_SIGNED || k == TAGS_KIND_FIXED_SIGNED;
}

bool tags_exact_integer(const tags_tag_t *tag)
{
    tags_kind_t k = tags_type_kind(tag->type);
    return (k == TAGS_KIND_SIGNED || k == TAGS_KIND_UNSIGNED) && tag->scale == 1.0 && tag->offset == 0.0;
}
