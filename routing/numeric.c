/*
 * routing/numeric.c -- 2^x and erfc(x) for the router, so that rtugw does not
 * map libm (docs/footprint.md: libm cost every daemon ~320 KiB resident for
 * the four functions it called). Accuracy is what the router's uses need and
 * tests/unit/test_router.c checks against libm: exp2 within 4e-15 relative over
 * -1000..1000 (the reports' costs), erfc within 1e-12 relative over -6..26
 * (Thompson's exploration chance, capped and floored anyway). The square
 * roots are the compiler's instruction (-fno-math-errno in routing/local.mk).
 */
#include "routing/internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^n for -1022 <= n <= 1023, built from its bits (ldexp would be libm's:
 * the linker finds it there before libc). */
static double pow2i(int n)
{
    uint64_t bits = (uint64_t)(n + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

double router_exp2(double x)
{
    if (x != x)
        return x;
    if (x >= 1024.0)
        return HUGE_VAL;
    if (x < -1080.0)
        return 0.0;
    double n = (double)(long long)x;   /* truncated, then floored */
    if (n > x)
        n -= 1.0;
    double f = (x - n) * M_LN2;        /* 0 <= f < ln 2 */
    /* e^f by its Taylor series: the 20th term is below 2^-66 of the sum. */
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 20; k++) {
        term *= f / k;
        sum += term;
    }
    int e = (int)n;
    if (e < -1022)                     /* a subnormal result, in two exact steps but the last */
        return sum * pow2i(e + 1022) * pow2i(-1022);
    return sum * pow2i(e);
}

double router_erfc(double x)
{
    if (x != x)
        return x;
    if (x < 0.0)
        return 2.0 - router_erfc(-x);
    if (x < 2.0) {
        /* 1 - erf(x), erf by its Maclaurin series (alternating; the largest
         * term at x = 2 is ~6, so ~1e-15 absolute, against erfc(2) = 4.7e-3). */
        double x2 = x * x, term = x, sum = x;
        for (int k = 1; k < 80; k++) {
            term *= -x2 / k;
            double add = term / (2 * k + 1);
            sum += add;
            if (fabs(add) < 1e-18)
                break;
        }
        return 1.0 - M_2_SQRTPI * sum;
    }
    if (x > 27.3)
        return 0.0;                    /* below the smallest subnormal */
    /* erfc(x) = e^(-x^2) / sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
     * the continued fraction evaluated by the modified Lentz method. */
    const double tiny = 1e-300;
    double f = x, c = x, d = 0.0;
    for (int k = 1; k < 500; k++) {
        double a = 0.5 * k;
        d = x + a * d;
        if (d == 0.0)
            d = tiny;
        c = x + a / c;
        if (c == 0.0)
            c = tiny;
        d = 1.0 / d;
        double delta = c * d;
        f *= delta;
        if (fabs(delta - 1.0) < 1e-16)
            break;
    }
    return router_exp2(-x * x * M_LOG2E) * (0.5 * M_2_SQRTPI) / f;
}
