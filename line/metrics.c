/*
 * line/metrics.c -- the bus latency histogram the line core fills.
 */
#include "line/line.h"

#include <math.h>

/* Upper edges in ms; serial transactions range from ~1 ms to seconds. */
const double gw_latency_edges_ms[GW_LATENCY_BUCKETS] = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, INFINITY,
};

void gw_observe_latency(gw_bus_metrics_t *m, uint64_t ns)
{
    double ms = (double)ns / 1e6;
    unsigned i = 0;
    while (i + 1 < GW_LATENCY_BUCKETS && ms > gw_latency_edges_ms[i])
        i++;
    gw_count(&m->latency[i]);
    atomic_fetch_add_explicit(&m->latency_sum_us, ns / 1000u, memory_order_relaxed);
}

