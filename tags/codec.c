/*
 * tags/codec.c -- words <-> values for every type and order.
 *
 * A value of n registers is gathered into an n*16-bit big-endian integer:
 * the word swap takes the registers last first, the byte swap turns each
 * register around; the integer is then read as the type's bits. Encoding
 * scatters the same way back, so the two are inverses by construction.
 *
 * Engineering values are raw * scale + offset in double. This file is built
 * with -ffp-contract=off (tags/local.mk): a fused multiply-add would round
 * once where the reference (and every other program a user compares with)
 * rounds twice, and the last bit of a value would depend on the CPU.
 */
#include "tags/internal.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint16_t swap16(uint16_t x)
{
    return (uint16_t)(x << 8 | x >> 8);
}

static uint64_t gather(const uint16_t *w, unsigned n, tags_order_t order)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) {
        uint16_t x = w[(order & TAGS_ORDER_WORDSWAP) ? n - 1 - i : i];
        v = v << 16 | ((order & TAGS_ORDER_BYTESWAP) ? swap16(x) : x);
    }
    return v;
}

static void scatter(uint64_t v, unsigned n, tags_order_t order, uint16_t *w)
{
    for (unsigned i = 0; i < n; i++) {
        uint16_t x = (uint16_t)(v >> (16 * (n - 1 - i)));
        w[(order & TAGS_ORDER_WORDSWAP) ? n - 1 - i : i] = (order & TAGS_ORDER_BYTESWAP) ? swap16(x) : x;
    }
}

static double engineering(const tags_tag_t *tag, double raw)
{
    return raw * tag->scale + tag->offset;
}

/* The engineering value of a fixed-point integer: divided by 10^D first, which
 * rounds once to the double nearest the decimal (14503 / 10 is 1450.3, where
 * 14503 * 0.1 is 1450.3000000000002). */
static double fixed_engineering(const tags_tag_t *tag, double raw)
{
    return engineering(tag, raw / tags_pow10(tag->point));
}

/* The types after raw: BCD, float16, the bytes, fixed-point. */
static void decode_more(const tags_tag_t *tag, uint64_t bits, tags_value_t *out)
{
    switch (tag->type) {
    case TAGS_BCD16: case TAGS_BCD32:
        if (tags_bcd_decode(bits, 4u * tag->count, &out->raw.u) < 0) {
            out->raw.u = 0;
            out->quality = TAGS_BAD;
            out->reason = TAGS_BAD_DATA;
        }
        out->eng = engineering(tag, (double)out->raw.u);
        break;
    case TAGS_FLOAT16:
        out->raw.f = tags_half_to_double((uint16_t)bits);
        out->eng = engineering(tag, out->raw.f);
        break;
    case TAGS_INT8H: case TAGS_INT8L:
        out->raw.i = (int8_t)(tag->type == TAGS_INT8H ? bits >> 8 : bits);
        out->eng = engineering(tag, (double)out->raw.i);
        break;
    case TAGS_UINT8H: case TAGS_UINT8L:
        out->raw.u = (uint8_t)(tag->type == TAGS_UINT8H ? bits >> 8 : bits);
        out->eng = engineering(tag, (double)out->raw.u);
        break;
    case TAGS_FIXED16: case TAGS_FIXED32:
        out->raw.i = tag->type == TAGS_FIXED16 ? (int16_t)bits : (int32_t)bits;
        out->eng = fixed_engineering(tag, (double)out->raw.i);
        break;
    case TAGS_UFIXED16: case TAGS_UFIXED32:
        out->raw.u = bits;
        out->eng = fixed_engineering(tag, (double)out->raw.u);
        break;
    default:
        break;
    }
}

void tags_decode(const tags_tag_t *tag, const uint16_t *words, tags_value_t *out)
{
    uint64_t bits = 0;
    out->words = NULL;
    out->n_words = 0;
    out->raw.u = 0;
    out->eng = 0;
    if (tags_type_numeric(tag->type))
        bits = gather(words, tag->count, tag->order);
    if (tag->type >= TAGS_BCD16) {
        decode_more(tag, bits, out);
        return;
    }

    switch (tag->type) {
    case TAGS_BOOL: {
        /* built whole and stored once: a one-byte store over the eight just
         * zeroed would make the next eight-byte load of raw wait for both */
        __typeof__(out->raw) raw = { .u = 0 };
        raw.b = tag->in_register ? (words[0] >> tag->bit) & 1 : words[0] != 0;
        out->raw = raw;
        out->eng = raw.b;
        break;
    }
    case TAGS_INT16:
        out->raw.i = (int16_t)bits;
        out->eng = engineering(tag, (double)out->raw.i);
        break;
    case TAGS_INT32:
        out->raw.i = (int32_t)bits;
        out->eng = engineering(tag, (double)out->raw.i);
        break;
    case TAGS_INT64:
        out->raw.i = (int64_t)bits;
        out->eng = engineering(tag, (double)out->raw.i);
        break;
    case TAGS_UINT16: case TAGS_UINT32: case TAGS_UINT64:
        out->raw.u = bits;
        out->eng = engineering(tag, (double)out->raw.u);
        break;
    case TAGS_FLOAT32: {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        out->raw.f = f;
        out->eng = engineering(tag, out->raw.f);
        break;
    }
    case TAGS_FLOAT64:
        memcpy(&out->raw.f, &bits, sizeof out->raw.f);
        out->eng = engineering(tag, out->raw.f);
        break;
    case TAGS_STRING: case TAGS_RAW:
        out->words = words;
        out->n_words = tag->count;
        break;
    default:   /* decode_more's */
        break;
    }
}

/* Where register i of a string is: the word swap exchanges each pair's two
 * registers (an odd last one stays). */
static unsigned string_register(const tags_tag_t *tag, unsigned i, unsigned n)
{
    if ((tag->order & TAGS_ORDER_WORDSWAP) && (i ^ 1u) < n)
        return i ^ 1u;
    return i;
}

size_t tags_string_text(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return 0;
    for (unsigned i = 0; v->words && i < v->n_words; i++) {
        uint16_t x = v->words[string_register(tag, i, v->n_words)];
        x = (tag->order & TAGS_ORDER_BYTESWAP) ? swap16(x) : x;
        char pair[2] = { (char)(x >> 8), (char)x };
        for (unsigned k = 0; k < 2; k++) {
            if (pair[k] == '\0' || len + 1 >= cap)
                goto done;
            buf[len++] = pair[k];
        }
    }
done:
    buf[len] = '\0';
    return len;
}

static bool exact_integer(const tags_tag_t *tag)
{
    return tags_exact_integer(tag);
}

static bool exact_fixed(const tags_tag_t *tag)
{
    tags_kind_t k = tags_type_kind(tag->type);
    return (k == TAGS_KIND_FIXED_SIGNED || k == TAGS_KIND_FIXED_UNSIGNED) && tag->scale == 1.0 &&
           tag->offset == 0.0;
}

static bool is_signed(tags_type_t type)
{
    return tags_type_signed(type);
}

/* ---- encode -------------------------------------------------------------- */

static int writable(const tags_tag_t *tag, char *msg, size_t cap)
{
    if (!tag->writable)
        return tags_fail(msg, cap, -EACCES, "tag '%s' is not writable", tag->name);
    return 0;
}

/* The write of n registers (or one coil). */
static int put_words(const tags_tag_t *tag, const uint16_t *words, unsigned n, unsigned flags,
                     tags_write_t *w, char *msg, size_t cap)
{
    if (n > TAGS_WRITE_MAX)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %u registers do not fit one write (%u)",
                         tag->name, n, TAGS_WRITE_MAX);
    bool multiple = (flags & TAGS_WRITE_MULTIPLE) || n > 1;
    if (tag->area == TAGS_AREA_COIL)
        w->function = multiple ? 15 : 5;
    else
        w->function = multiple ? 16 : 6;
    w->address = tag->address;
    w->count = (uint16_t)n;
    memcpy(w->words, words, n * sizeof *words);
    return 0;
}

static int put_bool(const tags_tag_t *tag, bool on, unsigned flags, tags_write_t *w, char *msg, size_t cap)
{
    uint16_t word = on;
    if (tag->in_register) {
        w->needs_read = true;
        w->mask = (uint16_t)(1u << tag->bit);
        w->bits = on ? w->mask : 0;
        word = w->bits;
    }
    return put_words(tag, &word, 1, flags, w, msg, cap);
}

static int put_bits(const tags_tag_t *tag, uint64_t bits, unsigned flags, tags_write_t *w, char *msg,
                    size_t cap)
{
    uint16_t words[4];
    scatter(bits, tag->count, tag->order, words);
    return put_words(tag, words, tag->count, flags, w, msg, cap);
}

/* One byte of a register: like a bool in a register, the other byte must be
 * read first and kept (Modbus writes whole registers). */
static int put_byte(const tags_tag_t *tag, uint64_t value, unsigned flags, tags_write_t *w, char *msg,
                    size_t cap)
{
    bool high = tag->type == TAGS_INT8H || tag->type == TAGS_UINT8H;
    w->needs_read = true;
    w->mask = high ? 0xFF00 : 0x00FF;
    w->bits = (uint16_t)(high ? (value & 0xFF) << 8 : value & 0xFF);
    uint16_t word = w->bits;
    return put_words(tag, &word, 1, flags, w, msg, cap);
}

/* An integer already within its type's range, to its words. */
static int put_integer(const tags_tag_t *tag, uint64_t bits, unsigned flags, tags_write_t *w, char *msg,
                       size_t cap)
{
    switch (tag->type) {
    case TAGS_BCD16: case TAGS_BCD32:
        return put_bits(tag, tags_bcd_encode(bits), flags, w, msg, cap);
    case TAGS_INT8H: case TAGS_INT8L: case TAGS_UINT8H: case TAGS_UINT8L:
        return put_byte(tag, bits, flags, w, msg, cap);
    default:
        return put_bits(tag, bits, flags, w, msg, cap);
    }
}

typedef struct int_range {
    double min, max;          /* max is exclusive: 2^bits or 2^(bits-1) */
    const char *text;
} int_range_t;

static int_range_t range_of(tags_type_t type)
{
    switch (type) {
    case TAGS_INT16: return (int_range_t){ -0x1p15, 0x1p15, "-32768..32767" };
    case TAGS_UINT16: return (int_range_t){ 0, 0x1p16, "0..65535" };
    case TAGS_INT32: return (int_range_t){ -0x1p31, 0x1p31, "-2147483648..2147483647" };
    case TAGS_UINT32: return (int_range_t){ 0, 0x1p32, "0..4294967295" };
    case TAGS_INT64: return (int_range_t){ -0x1p63, 0x1p63, "-2^63..2^63-1" };
    case TAGS_BCD16: return (int_range_t){ 0, 1e4, "0..9999" };
    case TAGS_BCD32: return (int_range_t){ 0, 1e8, "0..99999999" };
    case TAGS_INT8H: case TAGS_INT8L: return (int_range_t){ -0x1p7, 0x1p7, "-128..127" };
    case TAGS_UINT8H: case TAGS_UINT8L: return (int_range_t){ 0, 0x1p8, "0..255" };
    case TAGS_FIXED16: return (int_range_t){ -0x1p15, 0x1p15, "raw -32768..32767" };
    case TAGS_UFIXED16: return (int_range_t){ 0, 0x1p16, "raw 0..65535" };
    case TAGS_FIXED32: return (int_range_t){ -0x1p31, 0x1p31, "raw -2147483648..2147483647" };
    case TAGS_UFIXED32: return (int_range_t){ 0, 0x1p32, "raw 0..4294967295" };
    default: return (int_range_t){ 0, 0x1p64, "0..2^64-1" };
    }
}

static int encode_integer(const tags_tag_t *tag, double eng, unsigned flags, tags_write_t *w,
                          char *msg, size_t cap)
{
    if (!isfinite(eng))
        return tags_fail(msg, cap, -EDOM, "tag '%s': %g is not a number an %s can hold", tag->name,
                         eng, tags_type_name(tag->type));
    double q = (eng - tag->offset) / tag->scale;
    if (tags_type_kind(tag->type) >= TAGS_KIND_FIXED_SIGNED)   /* fixed-point: the raw integer */
        q *= tags_pow10(tag->point);
    double x = tags_round_half_away(q);
    int_range_t r = range_of(tag->type);
    if (!(x >= r.min && x < r.max))
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %.17g is raw %.17g, outside %s (%s)",
                         tag->name, eng, x, tags_type_name(tag->type), r.text);
    uint64_t bits = is_signed(tag->type) ? (uint64_t)(int64_t)x : (uint64_t)x;
    return put_integer(tag, bits, flags, w, msg, cap);
}

static int encode_float(const tags_tag_t *tag, double eng, unsigned flags, tags_write_t *w,
                        char *msg, size_t cap)
{
    double x = (eng - tag->offset) / tag->scale;
    if (isfinite(eng) && !isfinite(x))
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %.17g overflows with scale %g", tag->name,
                         eng, tag->scale);
    if (tag->type == TAGS_FLOAT64) {
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        return put_bits(tag, bits, flags, w, msg, cap);
    }
    if (tag->type == TAGS_FLOAT16) {
        uint16_t h = tags_double_to_half(x);
        if (isfinite(x) && (h & 0x7FFF) == 0x7C00)
            return tags_fail(msg, cap, -ERANGE, "tag '%s': %.17g is beyond float16 (65504)",
                             tag->name, x);
        return put_bits(tag, h, flags, w, msg, cap);
    }
    float f = (float)x;
    if (isfinite(x) && !isfinite(f))
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %.17g is beyond float32 (%g)", tag->name,
                         x, (double)FLT_MAX);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return put_bits(tag, bits, flags, w, msg, cap);
}

int tags_encode_number(const tags_tag_t *tag, double eng, unsigned flags, tags_write_t *w,
                       char *msg, size_t cap)
{
    memset(w, 0, sizeof *w);
    int rc = writable(tag, msg, cap);
    if (rc < 0)
        return rc;
    switch (tag->type) {
    case TAGS_BOOL:
        if (isnan(eng))
            return tags_fail(msg, cap, -EDOM, "tag '%s': NaN is not a bool", tag->name);
        if (eng != 0.0 && eng != 1.0)
            return tags_fail(msg, cap, -ERANGE, "tag '%s': %g is not a bool (0 or 1)", tag->name, eng);
        return put_bool(tag, eng == 1.0, flags, w, msg, cap);
    case TAGS_FLOAT16: case TAGS_FLOAT32: case TAGS_FLOAT64:
        return encode_float(tag, eng, flags, w, msg, cap);
    case TAGS_STRING: case TAGS_RAW:
        return tags_fail(msg, cap, -EINVAL, "tag '%s' is a %s: write it as text", tag->name,
                         tags_type_name(tag->type));
    default:
        return encode_integer(tag, eng, flags, w, msg, cap);
    }
}

/* An integer written out in full: exact across all 64 bits. 1 when text is
 * one (and was encoded or refused), 0 when it is not an integer at all. */
static int encode_exact(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                        char *msg, size_t cap, int *rc)
{
    char *end;
    uint64_t bits;
    int_range_t r = range_of(tag->type);
    const char *digits = text + (text[0] == '+' || text[0] == '-');
    if (!*digits || strspn(digits, "0123456789") != strlen(digits))
        return 0;
    errno = 0;
    if (is_signed(tag->type)) {
        long long v = strtoll(text, &end, 10);
        bool fits = !errno && !*end && (tag->type == TAGS_INT64 || (v >= r.min && v < r.max));
        bits = (uint64_t)v;
        if (!fits) {
            *rc = tags_fail(msg, cap, -ERANGE, "tag '%s': '%s' is outside %s (%s)", tag->name, text,
                            tags_type_name(tag->type), r.text);
            return 1;
        }
    } else {
        unsigned long long v = strtoull(text, &end, 10);
        bool fits = !errno && !*end && text[0] != '-' && (tag->type == TAGS_UINT64 || v < r.max);
        bits = v;
        if (!fits) {
            *rc = tags_fail(msg, cap, -ERANGE, "tag '%s': '%s' is outside %s (%s)", tag->name, text,
                            tags_type_name(tag->type), r.text);
            return 1;
        }
    }
    *rc = put_integer(tag, bits, flags, w, msg, cap);
    return 1;
}

/* A fixed-point value written as a plain decimal: its digits, exactly. 1 when
 * text is one (and was encoded or refused), 0 when it is not (an exponent). */
static int encode_fixed_text(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                             char *msg, size_t cap, int *rc)
{
    bool neg;
    uint64_t mag;
    int_range_t r = range_of(tag->type);
    int parsed = tags_parse_fixed(text, tag->point, &neg, &mag);
    if (parsed == -EINVAL)
        return 0;
    bool fits = parsed == 0 && (neg ? (is_signed(tag->type) ? (double)mag <= -r.min : mag == 0)
                                    : (double)mag < r.max);
    if (!fits) {
        *rc = tags_fail(msg, cap, -ERANGE, "tag '%s': '%s' is outside %s:%u (%s)", tag->name, text,
                        tags_type_name(tag->type), tag->point, r.text);
        return 1;
    }
    *rc = put_integer(tag, neg ? 0 - mag : mag, flags, w, msg, cap);
    return 1;
}

static int encode_string(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                         char *msg, size_t cap)
{
    size_t len = strlen(text);
    uint16_t words[TAGS_MAX_REGISTERS] = { 0 };
    if (len > 2u * tag->count)
        return tags_fail(msg, cap, -ERANGE, "tag '%s': %zu bytes do not fit string:%u (%u bytes)",
                         tag->name, len, tag->count, 2u * tag->count);
    for (size_t i = 0; i < len; i++)
        words[i / 2] |= (uint16_t)((uint8_t)text[i] << (i % 2 ? 0 : 8));
    uint16_t wire[TAGS_MAX_REGISTERS];
    for (unsigned i = 0; i < tag->count; i++) {
        uint16_t x = (tag->order & TAGS_ORDER_BYTESWAP) ? swap16(words[i]) : words[i];
        wire[string_register(tag, i, tag->count)] = x;
    }
    return put_words(tag, wire, tag->count, flags, w, msg, cap);
}

static int encode_raw(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                      char *msg, size_t cap)
{
    uint16_t words[TAGS_MAX_REGISTERS];
    unsigned n = 0;
    const char *p = text;
    for (;;) {
        p += strspn(p, " ,\t");
        if (!*p)
            break;
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
            p += 2;
        size_t digits = strspn(p, "0123456789abcdefABCDEF");
        if (digits == 0 || digits > 4 || (p[digits] && !strchr(" ,\t", p[digits])) || n == tag->count)
            return tags_fail(msg, cap, -EINVAL, "tag '%s': '%s' is not %u hex words", tag->name,
                             text, tag->count);
        words[n++] = (uint16_t)strtoul(p, NULL, 16);
        p += digits;
    }
    if (n != tag->count)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': '%s' is %u hex words, not %u", tag->name,
                         text, n, tag->count);
    return put_words(tag, words, n, flags, w, msg, cap);
}

int tags_encode_text(const tags_tag_t *tag, const char *text, unsigned flags, tags_write_t *w,
                     char *msg, size_t cap)
{
    memset(w, 0, sizeof *w);
    int rc = writable(tag, msg, cap);
    if (rc < 0)
        return rc;
    if (tag->type == TAGS_STRING)
        return encode_string(tag, text, flags, w, msg, cap);
    if (tag->type == TAGS_RAW)
        return encode_raw(tag, text, flags, w, msg, cap);
    if (tag->type == TAGS_BOOL) {
        bool on;
        rc = tags_parse_bool(text, &on, msg, cap);
        return rc < 0 ? rc : put_bool(tag, on, flags, w, msg, cap);
    }
    if (exact_integer(tag) && encode_exact(tag, text, flags, w, msg, cap, &rc))
        return rc;
    if (exact_fixed(tag) && encode_fixed_text(tag, text, flags, w, msg, cap, &rc))
        return rc;
    char *end;
    double eng = strtod(text, &end);
    if (end == text || *end)
        return tags_fail(msg, cap, -EINVAL, "tag '%s': '%s' is not a number", tag->name, text);
    return tags_encode_number(tag, eng, flags, w, msg, cap);
}

void tags_write_merge(tags_write_t *w, uint16_t current)
{
    w->words[0] = (uint16_t)((current & ~w->mask) | (w->bits & w->mask));
    w->needs_read = false;
}

static size_t put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return 2;
}

int tags_write_pdu(const tags_write_t *w, uint8_t *pdu, size_t cap)
{
    if (w->needs_read)
        return -EAGAIN;
    size_t data = w->function == 16 ? 2u * w->count : w->function == 15 ? (w->count + 7u) / 8u : 0;
    size_t len = (w->function == 15 || w->function == 16) ? 6 + data : 5;
    if (len > cap)
        return -ENOSPC;
    pdu[0] = w->function;
    put16(pdu + 1, w->address);
    switch (w->function) {
    case 5:
        put16(pdu + 3, w->words[0] ? 0xFF00 : 0x0000);
        break;
    case 6:
        put16(pdu + 3, w->words[0]);
        break;
    case 15:
        put16(pdu + 3, w->count);
        pdu[5] = (uint8_t)data;
        memset(pdu + 6, 0, data);
        for (unsigned i = 0; i < w->count; i++)
            if (w->words[i])
                pdu[6 + i / 8] |= (uint8_t)(1u << (i % 8));
        break;
    case 16:
        put16(pdu + 3, w->count);
        pdu[5] = (uint8_t)data;
        for (unsigned i = 0; i < w->count; i++)
            put16(pdu + 6 + 2 * i, w->words[i]);
        break;
    default:
        return -EINVAL;
    }
    return (int)len;
}

int tags_read_pdu(const tags_read_t *read, uint8_t pdu[5])
{
    pdu[0] = read->function;
    put16(pdu + 1, read->address);
    put16(pdu + 3, read->count);
    return 5;
}

bool tags_deadband_exceeded(const tags_tag_t *tag, double last, double now)
{
    if (isnan(last) || isnan(now))
        return isnan(last) != isnan(now);
    if (tag->deadband <= 0)
        return last != now;
    return fabs(now - last) >= tag->deadband;
}
