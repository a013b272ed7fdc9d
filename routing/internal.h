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
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>

#define ARMS ROUTER_ARM_COUNT
#define LEN_SLOTS ROUTER_LEN_SLOTS

#define RLOAD(p) atomic_load_explicit((p), memory_order_relaxed)
#define RSTORE(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
/* Single writer: a load and a store, not a locked read-modify-write. */
#define RBUMP(p) RSTORE((p), RLOAD(p) + 1)

/*
 * Per handle, per bucket: learning state and counters.
 *
 * Pull accounting: the bucket's pulls come in segments, each on one arm
 * (seg_arm) and seg_len pulls long; the hot path only counts the segment
 * down in hot.slot[bucket * 2 + seg_arm].countdown. Invariant, outside an event:
 *     pulls[a] = acc[a] + (a == seg_arm ? seg_len - countdown : 0)
 * Events (owner thread) fold a finished segment into acc and start the next
 * one inside the seqlock `seq` (odd while they write), so a reader on another
 * thread retries instead of combining an old acc with a new segment.
 */
typedef struct rbucket {
    _Atomic uint64_t acc[ARMS];    /* pulls of finished segments and event pulls */
    _Atomic uint32_t seg_len;
    _Atomic uint8_t seg_arm;
    _Atomic uint32_t seq;
    _Atomic double est[ARMS];      /* mean log2(cost ns) */
    _Atomic uint64_t n_est[ARMS];  /* samples behind est (loaded ones included) */
    _Atomic uint64_t timed[ARMS];  /* samples taken this run */
    _Atomic uint64_t explored[ARMS];
    _Atomic uint64_t win_prev[ARMS]; /* pulls in the last complete window */
    _Atomic uint64_t win_mark[ARMS]; /* pulls[] at the start of the current window */
    _Atomic double win_expect;     /* exploration pulls the draws asked for, this window */
    _Atomic double win_expect_prev; /* the same for the last complete window */
    _Atomic double diff;           /* mean of log2(native) - log2(fallback) over pairs */
    _Atomic uint64_t n_diff;       /* pairs behind diff */
    double diff_dev;               /* mean absolute deviation of a pair from diff */
    _Atomic uint8_t choice;
    _Atomic uint8_t win_complete;
    uint8_t measuring;             /* a measured segment is on (begun at seg_t0);
                                    * off the choice, it is an exploration run */
    uint8_t pair_half;             /* 0: no pair on; 1, 2: the measured segment is
                                    * that half of a pair (an exploration run and a
                                    * run on the choice, in either order) */
    double pair_cost;              /* the first half's ns per pull, or NAN */
    uint32_t explore_thr;          /* THOMPSON: this bucket's explore_threshold */
    uint64_t seg_t0;               /* timer at the measured segment's first pull */
    uint8_t span_mode;             /* learning from spans (frames come back to back) */
} rbucket_t;

/* hot is read by router_decode on every frame; the rest only at events and
 * by reports. */
struct router_thread {
    router_hot_t hot;              /* must stay first: router.h casts to it */
    router_t *r;
    uint64_t rng;
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
    double resolution_ns;      /* smallest step the timer shows (0: injected costs) */
    /* decision process, per bucket: a gap of 1..gap_span pulls (mean g)
     * on the choice, then, when rng32 < explore_threshold, a pair (an
     * exploration run of explore_run pulls and a measured segment as long
     * on the choice, in random order), else one measured segment on the
     * choice (docs/router.md derives g and the threshold) */
    uint32_t gap_span;
    uint32_t explore_threshold;
    uint32_t window;
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
    double ret_expect[ROUTER_MAX_BUCKETS];
    /* router_release: the owner let go; the last handle closed frees it (under lock) */
    bool released;
};

/* A merged view of every handle, computed under r->lock. */
typedef struct router_merged {
    uint64_t pulls[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t win[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t timed[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t explored[ROUTER_MAX_BUCKETS][ARMS];
    double est[ROUTER_MAX_BUCKETS][ARMS];
    uint64_t n_est[ROUTER_MAX_BUCKETS][ARMS];
    double diff[ROUTER_MAX_BUCKETS];      /* paired log2(native / fallback) */
    uint64_t n_diff[ROUTER_MAX_BUCKETS];
    double expect[ROUTER_MAX_BUCKETS];    /* win_expect over the window (see win) */
    uint8_t choice[ROUTER_MAX_BUCKETS];
    unsigned threads;
} router_merged_t;

void router_merge(router_t *r, router_merged_t *m);
/* A handle's pulls of one bucket per arm, now (any thread). */
void router_bucket_pulls(const router_thread_t *t, unsigned bucket, uint64_t pulls[ARMS]);
void router_warn(const router_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* routing/numeric.c: libm's exp2 and erfc, as accurate as the router needs. */
double router_exp2(double x);
double router_erfc(double x);


/* ---- clock.c: the timer ---------------------------------------------------- */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define ROUTER_HAVE_TSC 1
#else
#define ROUTER_HAVE_TSC 0
#endif

uint64_t router_mono_ns(void);
/* At router_new: use_tsc, ns_per_tick, overhead_ticks, resolution_ns. */
void router_calibrate(router_t *r);

/* The lfences keep the decode between the two reads: without them rdtsc may
 * execute before earlier work has finished or let the decode start early,
 * and a 7-byte decode (about 20 cycles) would be lost in that overlap. Their
 * cost (a drained pipeline) is paid by timed pulls only. */
static inline uint64_t router_timer_read(const router_t *r)
{
    if (r->cfg.clock)
        return r->cfg.clock(r->cfg.clock_ctx);
#if ROUTER_HAVE_TSC
    if (r->use_tsc) {
        _mm_lfence();
        uint64_t t = __rdtsc();
        _mm_lfence();
        return t;
    }
#endif
    return router_mono_ns();
}

#endif
