/*
 * bench/stats.c -- order statistics for benchmark rounds and latencies: the
 * one percentile code of every bench (bench/bench.h).
 */
#include "bench/bench.h"
#include "parser/rtu.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *samples, size_t n)
{
    if (n > 1)
        qsort(samples, n, sizeof *samples, cmp_double);
}

/* Linear interpolation between closest ranks, as numpy's default does: one
 * definition for every figure the benches print, so a p99 of bench gateway
 * and one of bench mqtt mean the same thing. */
double bench_quantile(const double *sorted, size_t n, double q)
{
    if (n == 0)
        return 0;
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
    bench_sort(samples, n);
    out->median = bench_quantile(samples, n, 0.5);
    out->p10 = bench_quantile(samples, n, 0.1);
    out->p25 = bench_quantile(samples, n, 0.25);
    out->p75 = bench_quantile(samples, n, 0.75);
    out->p90 = bench_quantile(samples, n, 0.9);
}

uint64_t bench_clock_ns(int clock)
{
    struct timespec ts;
    clock_gettime((clockid_t)clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bench_now_ns(void)
{
    return bench_clock_ns(CLOCK_MONOTONIC);
}

uint64_t bench_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

size_t bench_register_frame(uint8_t *a, unsigned slave, unsigned registers, uint64_t *seed)
{
    size_t len = 5 + 2 * (size_t)registers;

    a[0] = (uint8_t)slave;
    a[1] = 3;
    a[2] = (uint8_t)(2 * registers);
    for (size_t i = 3; i < len - 2; i++)
        a[i] = (uint8_t)bench_xorshift(seed);
    uint16_t crc = rtu_crc16_reference(a, len - 2);
    a[len - 2] = (uint8_t)crc;
    a[len - 1] = (uint8_t)(crc >> 8);
    return len;
}
