/*
 * routing/internal.h -- shared by the .c files of routing/ only.
 *
 * Layout: the router_t is read-only after router_new/router_load except for
 * the handle registry and the retired counters (both under r->lock, never
 * touched by router_decode). Each router_thread_t is one cache-line-aligned
 * allocation written only by its thread; fields that reports read are
 * C11 atomics accessed with relaxed loads and stores (plain moves on x86-64,
 * no locked instructions), so a report is free of data races and the hot
 * path pays nothing for it.
 */
#ifndef RTUGW_ROUTING_INTERNAL_H
#define RTUGW_ROUTING_INTERNAL_H

#include "routing/router.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define ARMS ROUTER_ARM_COUNT
#define LEN_SLOTS (RTU_MAX_ADU + 2) /* lengths 0..256, and 257 for "longer" */

#define RLOAD(p) atomic_load_explicit((p), memory_order_relaxed)
#define RSTORE(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
/* Single writer: a load and a store, not a locked read-modify-write. */
#define RBUMP(p) RSTORE((p), RLOAD(p) + 1)

/* Per handle, per bucket: learning state and counters. */
typedef struct rbucket {
    _Atomic double est[ARMS];      /* mean log2(cost ns) */
    _Atomic uint64_t n_est[ARMS];  /* samples behind est (loaded ones included) */
    _Atomic uint64_t timed[ARMS];  /* samples taken this run */
    _Atomic uint64_t explored[ARMS];
    _Atomic uint64_t win_prev[ARMS]; /* pulls in the last complete window */
    _Atomic uint64_t win_mark[ARMS]; /* pulls[] at the start of the current window */
    _Atomic uint8_t choice;
    _Atomic uint8_t win_complete;
} rbucket_t;

struct router_thread {
    /* hot: read on every decode */
    router_t *r;
    uint32_t countdown;            /* decisions until the next timed pull */
    uint32_t since_roll;           /* decisions counted into the current window */
    uint64_t rng;
    /* route[len] = bucket * 2 + arm: the exploitation decision per length */
    uint8_t route[LEN_SLOTS];
    _Atomic uint64_t pulls[ROUTER_MAX_BUCKETS * ARMS] __attribute__((aligned(64)));
    /* cold */
    rbucket_t b[ROUTER_MAX_BUCKETS] __attribute__((aligned(64)));
    unsigned slot;                 /* index in r->threads */
};

struct router {
    router_config_t cfg;
    unsigned nb;
    uint8_t bucket_of[LEN_SLOTS];
    uint8_t default_arm;
    /* timing */
    int use_tsc;
    double ns_per_tick;
    double overhead_ticks;
    /* decision process: events every 1..gap_span decisions (mean 1/q);
     * an event explores when rng32 < explore_threshold, else it times an
     * exploitation pull */
    uint32_t gap_span;
    uint32_t explore_threshold;
    uint32_t window;
    uint32_t explore_time_threshold; /* an exploration is timed when rng32 < this */
    /* loaded table */
    int loaded;
    double prior_est[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t prior_n[ROUTER_MAX_BUCKETS][ARMS];
    uint8_t prior_choice[ROUTER_MAX_BUCKETS];
    /* oracle (benchmark) */
    int has_oracle[ROUTER_MAX_BUCKETS];
    double oracle_ns[ROUTER_MAX_BUCKETS][ARMS];
    /* registry, under lock */
    pthread_mutex_t lock;
    router_thread_t **threads;
    unsigned n_threads, cap_threads;
    uint64_t next_seed;
    /* closed handles, folded in, under lock */
    uint64_t ret_pulls[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t ret_win[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t ret_timed[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t ret_explored[ROUTER_MAX_BUCKETS][ARMS];
    double ret_est_sum[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t ret_n[ROUTER_MAX_BUCKETS][ARMS];
};

/* A merged view of every handle, computed under r->lock. */
typedef struct router_merged {
    uint64_t pulls[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t win[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t timed[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t explored[ROUTER_MAX_BUCKETS][ARMS];
    double est[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t n_est[ROUTER_MAX_BUCKETS][ARMS];
    uint8_t choice[ROUTER_MAX_BUCKETS];
    unsigned threads;
} router_merged_t;

void router_merge(router_t *r, router_merged_t *m);
void router_warn(const router_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
