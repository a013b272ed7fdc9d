/*
 * bench/gateway.h -- internal to bench/: what `rtugw bench gateway`'s
 * measuring (bench_gateway.c) and its report (gateway_report.c) share. The
 * command itself, bench_gateway_main, is declared in bench/bench.h.
 */
#ifndef RTUGW_BENCH_GATEWAY_H
#define RTUGW_BENCH_GATEWAY_H

#include "bench/bench.h"

#include <stddef.h>
#include <stdint.h>

#define GAP_US 1
#define RSS_CLIENTS 32

typedef struct gw_options {
    double seconds;
    unsigned rounds, warmup, paced_cycles, workers;
    int json;
    int sim_outside;   /* the gateway's simulator runs here; the gateway opens its pty */
    int relay;         /* a third arm, the floor (relay.c), on a simulator of its own here */
} gw_options_t;

typedef struct cell {
    unsigned regs, clients;
    bench_spread_t rtugw_rps, direct_rps, ratio;
    bench_spread_t cpu_us, ctxsw, direct_cpu_us, direct_ctxsw, client_cpu_us, main_ctxsw, direct_main_ctxsw;
    double p50, p99, direct_p50, direct_p99;
    uint64_t errors, direct_errors, requests, direct_requests;
    long rss_kib, direct_rss_kib;    /* VmRSS after the cell's rounds */
    unsigned threads;                /* the gateway's */
    /* --relay: the floor's requests/s, the per-round ratio rtugw/relay, its
     * cost per request (its one process), its latency */
    bench_spread_t relay_rps, rtugw_per_relay, relay_cpu_us, relay_ctxsw;
    double relay_p50, relay_p99;
    uint64_t relay_errors, relay_requests;
} cell_t;

typedef struct rss_result {
    long before_kib, idle_kib, busy_kib, hwm_kib, anon_kib, file_kib, pss_kib;
    double busy_rps;
    uint64_t errors;
} rss_result_t;

typedef struct paced_result {
    bench_spread_t cycle_ms, ratio_full, ratio_resp;
    double wire_full_ms, wire_resp_ms;
    unsigned cycles;
    uint64_t errors;
    double crc_errors, retries, transactions;
} paced_result_t;

#define PACED_DEVICES 10
#define PACED_REGS 10
#define PACED_BAUD 19200
#define PACED_CHAR_BITS 11   /* 8E1 */

void gateway_print_report(const gw_options_t *opt, const cell_t *cells, size_t ncells,
                          const rss_result_t *rss, const paced_result_t *paced);

#endif
