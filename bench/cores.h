/*
 * bench/cores.h -- internal to bench/: what `rtugw bench cores`'s rounds and
 * arms (bench_cores.c) and its load, the epoll client threads
 * (cores_load.c), share. The command, bench_cores_main, is declared in
 * bench/bench.h.
 */
#ifndef RTUGW_BENCH_CORES_H
#define RTUGW_BENCH_CORES_H

#include "bench/wire.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CORES_REGS 8
#define CORES_REQ_LEN 12                    /* MBAP 7 + function, address, count */
#define CORES_ANS_LEN (9 + 2 * CORES_REGS)  /* MBAP 7 + function, byte count, values */
#define CORES_IN_CAP 512
#define CORES_STALL_NS 5000000000ull        /* a read unanswered this long fails the run */
#define CORES_SCAN_NS 250000000ull

/* One client connection; its in-flight reads are slots 0..inflight-1. */
typedef struct cores_conn {
    int fd;
    unsigned index, inflight;
    uint16_t next_tid;
    uint16_t *tid;      /* depth slots: the transaction ids in flight */
    uint64_t *sent;     /* and when each was queued */
    uint8_t *out;       /* request bytes not yet taken by the socket */
    size_t out_len, have;
    bool want_out;
    uint8_t in[CORES_IN_CAP];
} cores_conn_t;

/* What the main thread and the client threads of one segment share. */
typedef struct cores_segment {
    pthread_barrier_t start;
    uint64_t t0, deadline;
    atomic_bool failed;
    bool measured;
} cores_segment_t;

typedef struct cores_worker {
    pthread_t thread;
    int ep;
    cores_conn_t *conn;
    unsigned n, depth, inflight;
    const cpu_set_t *pin;       /* the client threads' CPUs (--client-cpus), or NULL */
    const char *pin_text;
    cores_segment_t *seg;
    uint64_t answers, cpu_ns;   /* in the segment's window */
    bench_samples_t lat;        /* us per read, measured windows only */
    char error[200];
} cores_worker_t;

/* A client thread for one segment: waits on seg->start, sends depth reads
 * on each of its connections, keeps them in flight until seg->deadline, then
 * drains them. On a failure: w->error, seg->failed set, and it returns. */
void *cores_worker_main(void *arg);

#endif
