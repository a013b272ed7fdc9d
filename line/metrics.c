/*
 * line/metrics.c -- the bus latency histogram the line core fills.
 */
#include "line/line.h"

#include <math.h>

/* Upper edges in ms; serial transactions range from ~1 ms to seconds. */
const double gw_latency_edges_ms[GW_LATENCY_BUCKETS] = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, INFINITY,
};

void gw_observe_latency(line_bus_metrics_t *m, uint64_t ns)
{
    double ms = (double)ns / 1e6;
    unsigned i = 0;
    while (i + 1 < GW_LATENCY_BUCKETS && ms > gw_latency_edges_ms[i])
        i++;
    gw_count(&m->latency[i]);
    atomic_fetch_add_explicit(&m->latency_sum_us, ns / 1000u, memory_order_relaxed);
}


/*
 * Where a request's time went, by cause: from submission to the first
 * attempt (queued: behind other requests, or its slave's guard or parked
 * question); parked between attempts for its slave's guard (I2); from its
 * first answer held back to its delivery (I4's copy check, I5's
 * confirmation: a guard and a re-ask); and the rest, on the wire: attempts
 * waiting for answers and I3's quiet. The four add up to its time on the line.
 */
void gw_observe_causes(line_bus_metrics_t *m, const line_request_t *req, uint64_t now)
{
    uint64_t total = now > req->t_line_ns ? now - req->t_line_ns : 0;
    uint64_t queue = req->t_sent_ns > req->t_line_ns ? req->t_sent_ns - req->t_line_ns : 0;
    uint64_t confirm = req->t_confirm_ns && now > req->t_confirm_ns ? now - req->t_confirm_ns : 0;
    uint64_t guard = req->guard_ns;
    uint64_t spent = queue + guard + confirm;
    gw_count(&m->caused);
    atomic_fetch_add_explicit(&m->queue_us, queue / 1000u, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->guard_us, guard / 1000u, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->confirm_us, confirm / 1000u, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->wire_us, (total > spent ? total - spent : 0) / 1000u, memory_order_relaxed);
}
