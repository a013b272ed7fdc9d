/*
 * tags/numbers.c -- the number forms that are not plain two's complement or
 * IEEE single/double: packed BCD, IEEE binary16 (float16) and fixed-point
 * decimals, each to and from its bits or its text. Pure, exact, no libm:
 * the codec (tags/codec.c) puts these bits in and out of registers.
 */
#include "tags/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The powers of ten a fixed-point type divides by; all exact in a double. */
static const double pow10_exact[TAGS_POINT_MAX + 1] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };

double tags_pow10(unsigned point)
{
    return pow10_exact[point <= TAGS_POINT_MAX ? point : 0];
}

/*
 * round(): half away from zero, exactly as libm's, without mapping libm
 * (docs/footprint.md). Below 2^52 the truncation and the fraction are exact,
 * so 0.49999999999999994 stays 0 (adding 0.5 would make it 1); from 2^52 up
 * every double is an integer already.
 */
double tags_round_half_away(double v)
{
    if (!(fabs(v) < 0x1p52))
        return v;
    double t = (double)(long long)v;
    double f = v - t;
    if (f >= 0.5)
        t += 1.0;
    else if (f <= -0.5)
        t -= 1.0;
    return t == 0.0 ? copysign(0.0, v) : t;
}

/* ---- BCD ------------------------------------------------------------------------
 * A nibble per decimal digit, the most significant first: 0x1234 is 1234. A
 * nibble above 9 is no BCD value; it is refused, never read as hex. */
int tags_bcd_decode(uint64_t bits, unsigned digits, uint64_t *value)
{
    uint64_t v = 0;
    for (unsigned i = digits; i-- > 0;) {
        unsigned d = (unsigned)(bits >> (4 * i)) & 0xF;
        if (d > 9)
            return -EINVAL;
        v = v * 10 + d;
    }
    *value = v;
    return 0;
}

uint64_t tags_bcd_encode(uint64_t value)
{
    uint64_t bits = 0;
    for (unsigned i = 0; value; i++, value /= 10)
        bits |= (value % 10) << (4 * i);
    return bits;
}

/* ---- float16 ---------------------------------------------------------------------
 * Built from the double's bits, rounding once (to nearest, ties to even) as
 * IEEE 754 and Python's struct 'e' do: going through float first would round
 * twice and differ on values just past a float16 tie. */

/* 2^k for k in -1022..1023, exactly. */
static double pow2(int k)
{
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

double tags_half_to_double(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v;
    if (e == 0)
        v = (double)m * 0x1p-24;
    else if (e == 31)
        v = m ? __builtin_nan("") : __builtin_inf();
    else
        v = (double)(1024 + m) * pow2((int)e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Rounds sig >> shift to nearest, ties to even (shift 1..63). */
static uint64_t shift_round(uint64_t sig, unsigned shift)
{
    uint64_t m = sig >> shift, rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    return m + (rem > half || (rem == half && (m & 1)));
}

uint16_t tags_double_to_half(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    unsigned exp = (unsigned)(b >> 52) & 0x7FF;
    uint64_t mant = b & ((1ull << 52) - 1);
    if (exp == 0x7FF)
        return (uint16_t)(sign | 0x7C00 | (mant ? 0x200 : 0));
    if (exp == 0)
        return sign;                          /* a subnormal double is far below 2^-25 */
    int e = (int)exp - 1023;
    if (e > 15)
        return (uint16_t)(sign | 0x7C00);
    uint64_t sig = (1ull << 52) | mant;
    if (e >= -14)                             /* normal: the carry may reach infinity, rightly */
        return (uint16_t)(sign | (((uint64_t)(e + 15) << 10) + (shift_round(sig, 42) - 1024)));
    unsigned shift = (unsigned)(28 - e);      /* subnormal: units of 2^-24 */
    return (uint16_t)(sign | (shift >= 64 ? 0 : shift_round(sig, shift)));
}

/* ---- fixed-point -------------------------------------------------------------- */

int tags_format_fixed(uint64_t magnitude, bool negative, unsigned point, char *buf, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%0*llu", (int)point + 1, (unsigned long long)magnitude);
    int whole = n - (int)point;
    return snprintf(buf, cap, "%s%.*s.%s", negative && magnitude ? "-" : "", whole, digits,
                    digits + whole);
}

/*
 * A plain decimal ([+-]digits[.digits]) times 10^point, rounded half away
 * from zero on its digits, exactly: "4.0005" at point 3 is 4001, where
 * 4.0005 * 1000 in double is 4000.4999999999995. -EINVAL when the text is not
 * that plain form (an exponent: the caller reads it as a double), -ERANGE
 * past 2^63.
 */
int tags_parse_fixed(const char *text, unsigned point, bool *negative, uint64_t *magnitude)
{
    const char *p = text;
    uint64_t v = 0;
    unsigned frac = 0, seen = 0, past = 0;
    bool dot = false, up = false;
    *negative = *p == '-';
    p += *p == '-' || *p == '+';
    for (; *p; p++) {
        if (*p == '.' && !dot) {
            dot = true;
            continue;
        }
        if (*p < '0' || *p > '9')
            return -EINVAL;
        seen++;
        if (dot && frac == point) {           /* the first digit past the point decides */
            up = up || (past++ == 0 && *p >= '5');
            continue;
        }
        if (v > (UINT64_C(1) << 63) / 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
        frac += dot;
    }
    if (!seen)
        return -EINVAL;
    for (; frac < point; frac++) {
        if (v > (UINT64_C(1) << 63) / 10)
            return -ERANGE;
        v *= 10;
    }
    *magnitude = v + up;
    return 0;
}
