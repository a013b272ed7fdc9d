/*
 * bench/wire.h -- internal to bench/: what `rtugw bench wire`'s measuring
 * (bench_wire.c), its reading of the gateway's timeline (wire_timeline.c)
 * and its report (wire_report.c) share. The command, bench_wire_main, is
 * declared in bench/bench.h.
 */
#ifndef RTUGW_BENCH_WIRE_H
#define RTUGW_BENCH_WIRE_H

#include "bench/bench.h"

#include <stddef.h>
#include <stdint.h>

typedef struct wire_options {
    double seconds;
    unsigned rounds, warmup, regs;
    unsigned bauds[4], n_bauds;
    int json, timeline;
    int cpu_latency_us;   /* --cpu-latency: each round also with this request held; -1: not */
    const char *rtugw;
} wire_options_t;

/* The timeline's stages, in a transaction's order: each figure is the time
 * from the stage before (the first: from the client's send). */
enum { WIRE_STAGES = 7 };
extern const char *const wire_stage_names[WIRE_STAGES];

/* The gateway's arms: its defaults (widen_reads on: the line asks a read
 * one or two registers wider when its answer would have the shape of the
 * slave's last ones, I6); widen_reads = false for slave 1, whose answers
 * are then as long as the direct master's; and that with line_thread =
 * false, the bus on the I/O thread (no thread hop either way). */
enum { WIRE_ARMS = 3 };
extern const char *const wire_arm_names[WIRE_ARMS];

typedef struct wire_arm {
    bench_spread_t rps, ratio;   /* per round; ratio: to the direct master's rate in the same round */
    bench_spread_t us;           /* per request */
    double added_us;             /* median - the direct master's median */
    uint64_t errors, requests;
    bench_spread_t stage_us[WIRE_STAGES];   /* --timeline */
    size_t timeline_n;
} wire_arm_t;

typedef struct wire_row {
    unsigned baud, regs;
    int cpu_latency_us;   /* the request held in its rounds (--cpu-latency); -1: none */
    bench_spread_t direct_rps, direct_us;
    uint64_t direct_errors, direct_requests;
    double wire_us;     /* the answer's wire time */
    wire_arm_t gw[WIRE_ARMS];
} wire_row_t;

/* A growable vector of samples. */
typedef struct bench_samples {
    double *v;
    size_t n, cap;
} bench_samples_t;
int bench_samples_push(bench_samples_t *s, double x);

/* The client's send and receive time of each measured request (CLOCK_MONOTONIC,
 * the gateway's clock too), to place the gateway's stamps between them. */
typedef struct wire_client_log {
    uint64_t *sent, *received;
    size_t n, cap;
} wire_client_log_t;

/* Reads the gateway's timeline file and fills arm->stage_us and
 * arm->timeline_n from the transactions it matches in log. 0 or -1. */
int wire_timeline_read(const char *path, const wire_client_log_t *log, wire_arm_t *arm);
void wire_print(const wire_options_t *opt, const wire_row_t *rows, size_t n);

#endif
