/*
 * routing/clock.c -- the router's timer: CLOCK_MONOTONIC, or the invariant
 * TSC where the CPU has one, calibrated against it at router_new (tick
 * length, the cost of two back-to-back reads that every sample subtracts,
 * and the resolution below which a lone pull tells nothing). The read
 * itself, on the hot path, is router_timer_read (inline in internal.h).
 */
#include "routing/internal.h"

#include <stdlib.h>
#include <time.h>

uint64_t router_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int invariant_tsc(void)
{
#if ROUTER_HAVE_TSC
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
        return 0;
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Tick length against CLOCK_MONOTONIC over about 1 ms, and the median cost
 * of two back-to-back timer reads (what every sample subtracts). */
void router_calibrate(router_t *r)
{
    r->use_tsc = !r->cfg.clock && invariant_tsc();
    r->ns_per_tick = 1.0;
#if ROUTER_HAVE_TSC   /* elsewhere (ARM) use_tsc is 0 and __rdtsc does not exist */
    if (r->use_tsc) {
        uint64_t c0 = router_mono_ns(), t0 = __rdtsc(), c1, t1;
        do {
            c1 = router_mono_ns();
            t1 = __rdtsc();
        } while (c1 - c0 < 1000000);
        if (t1 > t0)
            r->ns_per_tick = (double)(c1 - c0) / (double)(t1 - t0);
        else
            r->use_tsc = 0;
    }
#endif
    enum { N = 501 };
    uint64_t d[N];
    for (int i = 0; i < N; i++) {
        uint64_t a = router_timer_read(r);
        uint64_t b = router_timer_read(r);
        d[i] = b - a;
    }
    qsort(d, N, sizeof d[0], cmp_u64);
    r->overhead_ticks = (double)d[N / 2];
    /* The timer's resolution: the smallest step two reads show, the first
     * non-zero pair above. AMD's TSC advances 24-25 ticks every 10 ns, so a
     * lone 7-byte pull reads as 0 or 10 ns; below that, a single pull tells
     * nothing. */
    int i = 0;
    while (i < N && d[i] == 0)
        i++;
    r->resolution_ns = i < N ? (double)d[i] * r->ns_per_tick : 1.0;
}
