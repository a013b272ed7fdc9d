/*
 * bench/stats.c -- order statistics for benchmark rounds.
 */
#include "bench/bench.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks, as numpy's default does. */
static double quantile(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double frac = pos - (double)lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

void bench_spread(double *samples, size_t n, bench_spread_t *out)
{
    *out = (bench_spread_t){ .n = n };
    if (n == 0)
        return;
    qsort(samples, n, sizeof *samples, cmp_double);
    out->median = quantile(samples, n, 0.5);
    out->p10 = quantile(samples, n, 0.1);
    out->p25 = quantile(samples, n, 0.25);
    out->p75 = quantile(samples, n, 0.75);
    out->p90 = quantile(samples, n, 0.9);
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
