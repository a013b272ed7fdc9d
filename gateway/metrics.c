/*
 * gateway/metrics.c -- the clocks (the latency histogram is line/metrics.c's).
 */
#include "gateway/gateway.h"

#include <math.h>
#include <time.h>

uint64_t gw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t gw_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *gw_reload_result_name(enum gw_reload_result r)
{
    static const char *const names[GW_RELOAD_RESULTS] = { "applied", "restart_needed", "queued", "invalid" };
    return (unsigned)r < GW_RELOAD_RESULTS ? names[r] : "unknown";
}
