/*
 * tags/names.c -- the names of tables, types, orders and qualities, and the
 * parsers the CSV loader and the config share. Names are matched without
 * regard to case; every refusal names the value and what would be accepted.
 */
#include "tags/internal.h"
#include "parser/rtu.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tags_fail(char *msg, size_t cap, int code, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

bool tags_name_ok(const char *name, size_t max)
{
    size_t n = strlen(name);
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-", name[i]))
            return false;
    return true;
}

static const char *const area_names[] = { "coil", "discrete", "holding", "input" };

static const char *const type_names[] = {
    "bool", "int16", "uint16", "int32", "uint32", "int64",
    "uint64", "float32", "float64", "string", "raw",
};
#define TYPE_COUNT (sizeof type_names / sizeof type_names[0])

/* Indexed by tags_order_t: the swaps are its bits. */
static const char *const order16[] = { "AB", "AB", "BA", "BA" };
static const char *const order32[] = { "ABCD", "CDAB", "BADC", "DCBA" };
static const char *const order64[] = { "ABCDEFGH", "GHEFCDAB", "BADCFEHG", "HGFEDCBA" };

int tags_parse_area(const char *text, tags_area_t *area, char *msg, size_t cap)
{
    int t = rtu_table_parse(text);   /* the one parser, shared with the simulator's --load */
    if (t >= 0) {
        *area = (tags_area_t)t;
        return 0;
    }
    return tags_fail(msg, cap, -EINVAL, "unknown table '%s' (" RTU_TABLE_NAMES ")", text);
}

/* A decimal number without sign or spaces, within [min, max]. */
static int parse_decimal(const char *text, unsigned long min, unsigned long max, unsigned long *out)
{
    if (*text < '0' || *text > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int tags_parse_type(const char *text, tags_type_t *type, unsigned *count, char *msg, size_t cap)
{
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);

    for (unsigned i = 0; i < TYPE_COUNT; i++) {
        if (strlen(type_names[i]) != len || strncasecmp(text, type_names[i], len) != 0)
            continue;
        bool sized = i == TAGS_STRING || i == TAGS_RAW;
        unsigned long n = 0;
        if (sized && (!colon || parse_decimal(colon + 1, 1, TAGS_MAX_REGISTERS, &n) < 0))
            return tags_fail(msg, cap, -EINVAL, "type '%s' needs its registers, %s:N with N 1..%u",
                             text, type_names[i], TAGS_MAX_REGISTERS);
        if (!sized && colon)
            return tags_fail(msg, cap, -EINVAL, "type '%s': %s takes no :N", text, type_names[i]);
        *type = (tags_type_t)i;
        *count = tags_type_registers(*type, (unsigned)n);
        return 0;
    }
    return tags_fail(msg, cap, -EINVAL,
                     "unknown type '%s' (bool, int16, uint16, int32, uint32, int64, uint64, "
                     "float32, float64, string:N, raw:N)", text);
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
    case TAGS_INT16: case TAGS_UINT16: case TAGS_STRING:
        return order16;
    case TAGS_INT32: case TAGS_UINT32: case TAGS_FLOAT32:
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
    if (names == order16) {
        if (strcasecmp(text, "AB") == 0 || strcasecmp(text, "BA") == 0) {
            *order = toupper((unsigned char)text[0]) == 'A' ? TAGS_ORDER_ABCD : TAGS_ORDER_BADC;
            return 0;
        }
        return tags_fail(msg, cap, -EINVAL, "order '%s' does not fit %s (AB or BA)", text,
                         tags_type_name(type));
    }
    if (find_order(names, text, order) == 0)
        return 0;
    return tags_fail(msg, cap, -EINVAL, "order '%s' does not fit %s (%s, %s, %s or %s)", text,
                     tags_type_name(type), names[0], names[1], names[2], names[3]);
}

int tags_parse_address(const char *text, unsigned *address, int *bit, char *msg, size_t cap)
{
    const char *dot = strchr(text, '.');
    char head[16];
    size_t len = dot ? (size_t)(dot - text) : strlen(text);
    unsigned long v, b = 0;
    int rc = -EINVAL;

    if (len > 0 && len < sizeof head) {
        memcpy(head, text, len);
        head[len] = '\0';
        if (head[0] == '0' && (head[1] == 'x' || head[1] == 'X')) {
            const char *digits = head + 2;
            size_t n = strspn(digits, "0123456789abcdefABCDEF");
            v = strtoul(digits, NULL, 16);
            rc = n > 0 && n <= 4 && digits[n] == '\0' ? 0 : -EINVAL;
        } else {
            rc = parse_decimal(head, 0, 65535, &v);
        }
    }
    if (rc < 0)
        return tags_fail(msg, cap, -EINVAL, "address '%s' is not 0..65535 (decimal, or hex 0x...)", text);
    if (dot) {
        if (!bit)
            return tags_fail(msg, cap, -EINVAL, "address '%s': no bit here", text);
        if (parse_decimal(dot + 1, 0, 15, &b) < 0)
            return tags_fail(msg, cap, -EINVAL, "address '%s': the bit after '.' is 0..15", text);
    }
    *address = (unsigned)v;
    if (bit)
        *bit = dot ? (int)b : -1;
    return 0;
}

int tags_parse_bool(const char *text, bool *value, char *msg, size_t cap)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };
    for (unsigned i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *value = true;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *value = false;
            return 0;
        }
    }
    return tags_fail(msg, cap, -EINVAL, "'%s' is not a bool (true/false, yes/no, on/off, 1/0)", text);
}

const char *tags_area_name(tags_area_t area)
{
    return (unsigned)area < 4 ? area_names[area] : "?";
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

const char *tags_reason_name(tags_reason_t reason)
{
    static const char *const names[] = { "", "not read yet", "exception", "timeout", "port down",
                                         "short answer" };
    return (unsigned)reason < sizeof names / sizeof names[0] ? names[reason] : "?";
}

const char *tags_quality_name(tags_quality_t quality)
{
    static const char *const names[] = { "good", "bad", "stale" };
    return (unsigned)quality < 3 ? names[quality] : "?";
}

unsigned tags_type_registers(tags_type_t type, unsigned n)
{
    switch (type) {
    case TAGS_BOOL: case TAGS_INT16: case TAGS_UINT16:
        return 1;
    case TAGS_INT32: case TAGS_UINT32: case TAGS_FLOAT32:
        return 2;
    case TAGS_INT64: case TAGS_UINT64: case TAGS_FLOAT64:
        return 4;
    case TAGS_STRING: case TAGS_RAW:
        return n >= 1 && n <= TAGS_MAX_REGISTERS ? n : 0;
    }
    return 0;
}
