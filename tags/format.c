/*
 * tags/format.c -- a value as text: the one number formatter every output
 * prints through (HTTP /tags and the page, MQTT json, Sparkplug strings),
 * so that the same value never reads differently in two places
 * (docs/mqtt.md promises they agree).
 *
 * "Shortest that reads back the same for the tag's type": a float32 is
 * printed in float32 digits, because its double (3.141590118408203) is an
 * artefact of widening, not something the device said. A scaled integer is
 * printed as the decimal that raw x scale + offset is when scale and offset
 * are taken as the decimals the user wrote: the double product 14503 * 0.1
 * is 1450.3000000000002, but the value meant, and the one that encodes back
 * to 14503, is 1450.3.
 */
#include "tags/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum width { WIDTH_HALF, WIDTH_FLOAT, WIDTH_DOUBLE } width_t;

static bool same_at(width_t w, double x, double y)
{
    switch (w) {
    case WIDTH_HALF: return tags_double_to_half(x) == tags_double_to_half(y);
    case WIDTH_FLOAT: return (float)x == (float)y;
    default: return x == y;
    }
}

/*
 * %g's exponent form ("1e+06", "1.5e-05") written out as JavaScript's
 * Number.prototype.toString does below 1e21 and from 1e-6 ("1000000",
 * "0.000015"): the same digits, so the page, a JSON parser and a person read
 * one text. Beyond that range the exponent stays, written as JavaScript
 * writes it: no leading zero ("6e-8", "1.5e-7", "1e+21").
 */
static int plain(char *buf, size_t cap, int n)
{
    const char *e = strchr(buf, 'e');
    if (!e)
        return n;
    int exp = atoi(e + 1);
    if (exp >= 21 || exp < -6) {
        /* the exponent as JavaScript writes it: "6e-8", "1e+21", not %g's
         * two-digit "6e-08" */
        char mant[40];
        size_t m = (size_t)(e - buf) < sizeof mant ? (size_t)(e - buf) : sizeof mant - 1;
        memcpy(mant, buf, m);
        mant[m] = '\0';
        return snprintf(buf, cap, "%se%+d", mant, exp);
    }
    /* moved by hand, digit by digit: printf of the double would show the
     * binary value's digits past the ones that were meant (2.2245882e+20 is
     * 222458819999999983616 as a double) */
    char digits[32], out[64];
    size_t nd = 0, at = 0;
    for (const char *p = buf; p < e && nd < sizeof digits; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    if (buf[0] == '-')
        out[at++] = '-';
    if (exp < 0) {
        out[at++] = '0';
        out[at++] = '.';
        for (int z = 0; z < -exp - 1; z++)
            out[at++] = '0';
        for (size_t i = 0; i < nd; i++)
            out[at++] = digits[i];
    } else {
        for (int i = 0; i <= exp; i++)
            out[at++] = (size_t)i < nd ? digits[i] : '0';
        if ((size_t)exp + 1 < nd) {
            out[at++] = '.';
            for (size_t i = (size_t)exp + 1; i < nd; i++)
                out[at++] = digits[i];
        }
    }
    out[at] = '\0';
    return snprintf(buf, cap, "%s", out);
}

/*
 * The fewest significant digits that read back as the same value of width w.
 * The search starts where every shorter text is already found padded with
 * zeros that %g strips (3, 6, 15 digits: a decimal step there is wider than
 * two steps of the width's significand), so a value costs one to three
 * snprintf calls, not seventeen; "20", not "2e+01". Subnormals have fewer
 * significant bits, so their search starts at one digit.
 */
static int shortest(width_t w, double x, char *buf, size_t cap)
{
    static const int first[] = { 3, 6, 15 }, last[] = { 5, 9, 17 };
    static const double smallest_normal[] = { 0x1p-14, 0x1p-126, 0x1p-1022 };
    int n = 0;
    for (int digits = fabs(x) < smallest_normal[w] ? 1 : first[w]; digits <= last[w]; digits++) {
        n = snprintf(buf, cap, "%.*g", digits, x);
        if (n < 0 || (size_t)n >= cap || !isfinite(x) || same_at(w, strtod(buf, NULL), x))
            break;
    }
    return n < 0 || (size_t)n >= cap ? n : plain(buf, cap, n);
}

/* Digits after the point in x's shortest decimal (0.1: 1, 2.5e-05: 6, 300: 0). */
static int decimals_of(double x)
{
    char text[40];
    shortest(WIDTH_DOUBLE, x, text, sizeof text);
    const char *e = strchr(text, 'e'), *dot = strchr(text, '.');
    int frac = dot ? (int)((e ? e : text + strlen(text)) - dot - 1) : 0;
    int d = frac - (e ? atoi(e + 1) : 0);
    return d > 0 ? d : 0;
}

/* "1450.300" -> "1450.3", "12.000" -> "12". */
static int strip_zeros(char *buf, int n)
{
    if (!strchr(buf, '.'))
        return n;
    while (n > 0 && buf[n - 1] == '0')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '.')
        buf[--n] = '\0';
    return n;
}

/*
 * A scaled integer as the decimal of raw x scale + offset, scale and offset as
 * written; -1 when that decimal would not encode back to the same raw value
 * (a scale like 1/3 has no short decimal; a 64-bit raw beyond 2^53): then the
 * caller prints the double.
 */
static int scaled_decimal(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap)
{
    int d = decimals_of(tag->scale), o = decimals_of(tag->offset);
    d = d > o ? d : o;
    if (d > 17 || !isfinite(v->eng) || fabs(v->eng) >= 1e15)
        return -1;
    int n = snprintf(buf, cap, "%.*f", d, v->eng);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    n = strip_zeros(buf, n);
    double raw = tags_type_signed(tag->type) ? (double)v->raw.i : (double)v->raw.u;
    double back = tags_round_half_away((strtod(buf, NULL) - tag->offset) / tag->scale);
    return back == raw ? n : -1;
}

static int format_number(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap)
{
    tags_kind_t k = tags_type_kind(tag->type);
    bool unscaled = tag->scale == 1.0 && tag->offset == 0.0;
    if (tag->has_decimals && fabs(v->eng) < 1e15)   /* beyond, %f would print every digit */
        return snprintf(buf, cap, "%.*f", tag->decimals, v->eng);
    if (tags_exact_integer(tag))
        return tags_type_signed(tag->type) ? snprintf(buf, cap, "%" PRId64, v->raw.i)
                                           : snprintf(buf, cap, "%" PRIu64, v->raw.u);
    if ((k == TAGS_KIND_FIXED_SIGNED || k == TAGS_KIND_FIXED_UNSIGNED) && unscaled) {
        bool neg = tags_type_signed(tag->type) && v->raw.i < 0;
        uint64_t mag = !neg ? (tags_type_signed(tag->type) ? (uint64_t)v->raw.i : v->raw.u)
                            : 0 - (uint64_t)v->raw.i;
        return tags_format_fixed(mag, neg, tag->point, buf, cap);
    }
    /* an unscaled float from its raw value: the engineering value is raw x 1
     * + 0, and -0.0 + 0.0 is +0.0, so a register holding -0.0 (0x8000 as a
     * float16) would be shown as 0, which writes back as another word
     * (test_tags_types, seed 73201626) */
    /* ... and written "-0.0", not "-0": JSON's "-0" is an integer to many
     * readers (Python's json gives int 0, and the sign is gone:
     * test_tags_pymodbus, seed 2550298151) */
    if ((tag->type == TAGS_FLOAT16 || tag->type == TAGS_FLOAT32 || tag->type == TAGS_FLOAT64) && unscaled &&
        v->raw.f == 0.0 && signbit(v->raw.f))
        return snprintf(buf, cap, "-0.0");
    if (tag->type == TAGS_FLOAT16 && unscaled)
        return shortest(WIDTH_HALF, v->raw.f, buf, cap);
    if (tag->type == TAGS_FLOAT32 && unscaled)
        return shortest(WIDTH_FLOAT, v->raw.f, buf, cap);
    if (tag->type == TAGS_FLOAT64 && unscaled)
        return shortest(WIDTH_DOUBLE, v->raw.f, buf, cap);
    if (k == TAGS_KIND_SIGNED || k == TAGS_KIND_UNSIGNED) {
        int n = scaled_decimal(tag, v, buf, cap);
        if (n >= 0)
            return n;
    }
    return shortest(WIDTH_DOUBLE, v->eng, buf, cap);
}

const char *tags_nonfinite(const tags_tag_t *tag, const tags_value_t *v)
{
    if (!tags_type_numeric(tag->type) || isfinite(v->eng))
        return NULL;
    return isnan(v->eng) ? "nan" : v->eng > 0 ? "inf" : "-inf";
}

int tags_format(const tags_tag_t *tag, const tags_value_t *v, char *buf, size_t cap)
{
    int n = 0;
    if (cap == 0)
        return -ENOSPC;
    buf[0] = '\0';
    if (tag->type == TAGS_BOOL) {
        n = snprintf(buf, cap, "%s", v->raw.b ? "true" : "false");
    } else if (tag->type == TAGS_STRING) {
        char text[2 * TAGS_MAX_REGISTERS + 1];
        tags_string_text(tag, v, text, sizeof text);
        n = snprintf(buf, cap, "%s", text);
    } else if (tag->type == TAGS_RAW) {
        size_t used = 0;
        for (unsigned i = 0; v->words && i < v->n_words; i++)
            used += (size_t)snprintf(used < cap ? buf + used : NULL, used < cap ? cap - used : 0,
                                     "%s%04x", i ? " " : "", v->words[i]);
        n = (int)used;
    } else {
        n = format_number(tag, v, buf, cap);
    }
    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}
