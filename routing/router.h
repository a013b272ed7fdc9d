/*
 * routing/router.h -- the online router: for every response frame, picks
 * the native or the fallback decoder by frame-size bucket, learns each
 * arm's cost from a sample of timed decodes, and explores at a configured
 * rate. It never changes a result: both arms produce the reference
 * envelope byte for byte (parser/rtu.h), the router only picks which runs.
 * Owns: the per-bucket statistics, the policy, the state file. May call:
 * parser/, libc and pthreads (the handle registry's lock).
 *
 * Threads: one router_t is shared; every thread that decodes takes its own
 * router_thread_t (router_thread_new) and uses only that. A handle's
 * statistics live in its own cache lines and are written only by its
 * thread; reports and saves merge all handles when read. Handles learn
 * independently (they start from the same loaded table).
 *
 * Policy, cost measurement, the verdict rule and the state file format are
 * described in docs/router.md.
 *
 * Errors: functions return 0 or a negative errno (-EINVAL, -ENOMEM, -EIO,
 * -EBUSY, -ENOSPC); router_decode returns the decoder's rtu_status_t.
 */
#ifndef RTUGW_ROUTING_ROUTER_H
#define RTUGW_ROUTING_ROUTER_H

#include "parser/rtu.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ROUTER_MAX_BUCKETS 16

typedef enum router_arm {
    ROUTER_ARM_NATIVE = 0,
    ROUTER_ARM_FALLBACK = 1,
    ROUTER_ARM_COUNT
} router_arm_t;

/* "native" / "fallback". */
const char *router_arm_name(router_arm_t arm);

/*
 * Injectable cost source (tests): called after every timed decode instead
 * of reading the clock; returns the cost of that decode in ns (> 0).
 */
typedef double (*router_cost_fn)(void *ctx, router_arm_t arm, size_t len);
/*
 * How often a bucket explores (docs/router.md):
 *  - EPSILON_GREEDY: the other arm takes epsilon/2 of the pulls, always;
 *  - THOMPSON: each exploration opportunity is taken with the probability
 *    that a draw from the pairs' posterior (mean diff, its standard error,
 *    discounted by alpha) favours the other arm, capped at the epsilon-greedy
 *    rate and floored at 1/16 of it: as much as epsilon-greedy while the
 *    arms are close, about epsilon/32 once one is clearly cheaper.
 */
typedef enum router_policy {
    ROUTER_POLICY_EPSILON_GREEDY = 0,
    ROUTER_POLICY_THOMPSON
} router_policy_t;
/*
 * Injectable clock (tests): read instead of the TSC or CLOCK_MONOTONIC,
 * in ns. The start-up calibration reads it too, so its overhead and its
 * resolution come from its own read pairs: a test can hand the router a
 * coarse clock and see how spans and single pulls are measured.
 */
typedef uint64_t (*router_clock_fn)(void *ctx);
/* Receives each warning as one line without a trailing newline. */
typedef void (*router_log_fn)(void *ctx, const char *message);

typedef struct router_config {
    /* Bucket upper bounds (inclusive) in bytes, strictly increasing, 1..256.
     * A frame longer than the last edge goes into the last bucket.
     * Default: 8 16 32 64 128 256. */
    unsigned n_edges;
    uint16_t edges[ROUTER_MAX_BUCKETS];
    /* Exploration rate: the share of decisions drawn uniformly over both
     * arms, so the arm not chosen is taken at epsilon / 2. Default 0.05.
     * Under THOMPSON the most it explores. */
    double epsilon;
    /* Default EPSILON_GREEDY. */
    router_policy_t policy;
    /* 1 in sample_every exploitation pulls is timed (on average). Default
     * 4096: an event costs 100-200 cycles, a 7-byte parse about 25. */
    unsigned sample_every;
    /* Explorations come in runs of explore_run consecutive pulls of one
     * bucket on the arm not chosen; the last pull of a run is timed, so the
     * sample sees that arm warm (caches, branch predictors) as it would run
     * if chosen. 1 explores and times single pulls. Default 64 (1..1024; see
     * docs/router.md). */
    unsigned explore_run;
    /* Weight of a new sample in the exponentially weighted means of
     * log2(cost) per arm and of a pair's log2(native / fallback) (running
     * means until 1/alpha samples). Default 0.05. */
    double alpha;
    /* Switch arms only when the pairs' mean log2(cost ratio) says the other
     * arm is cheaper by more than this (0.02 = about 1.4 %) and by more
     * than 2 standard errors of that mean. Default 0.02. */
    double hysteresis;
    /* Pulls of a bucket per report window, per thread. 0 (the default):
     * enough for about 64 exploration runs, 64 x explore_run / (epsilon/2)
     * rounded up to a power of two, at least 4096 (163840 -> 262144 with
     * the defaults). The report gives the value in force. */
    unsigned window;
    /* The arm of a bucket before both arms have data there: -1 (the
     * default) takes native where the CPU accelerates it, else fallback;
     * or ROUTER_ARM_NATIVE / ROUTER_ARM_FALLBACK. With epsilon 0 the router
     * never leaves it: the benchmark pins an arm that way to time the
     * dispatch alone. */
    int default_arm;
    /* RNG seed; 0 takes one from the clock. */
    uint64_t seed;
    /* Optional cost source (NULL: measure time) and its context. */
    router_cost_fn cost;
    void *cost_ctx;
    /* Optional clock (NULL: the TSC where invariant, else CLOCK_MONOTONIC)
     * and its context; unused when cost is set. */
    router_clock_fn clock;
    void *clock_ctx;
    /* Optional warning sink (NULL: stderr, prefixed "rtugw router: "). */
    router_log_fn log;
    void *log_ctx;
} router_config_t;

typedef struct router router_t;
typedef struct router_thread router_thread_t;

/* Fills the defaults above. */
void router_config_default(router_config_t *cfg);
/* "epsilon-greedy" or "thompson"; router_parse_policy returns 0 or -EINVAL. */
const char *router_policy_name(router_policy_t policy);
int router_parse_policy(const char *text, router_policy_t *out);
/* Parses "8,16,32,64,128,256" (commas or spaces) into cfg->edges.
 * Returns 0 or -EINVAL (not increasing, out of 1..256, too many). */
int router_parse_edges(const char *text, router_config_t *cfg);

/* Validates cfg, calibrates the timer (about 1 ms) and returns 0 with
 * *out set, or -EINVAL (bad config) / -ENOMEM. */
int router_new(const router_config_t *cfg, router_t **out);
/* Frees the router and every handle still open. */
void router_free(router_t *r);

/* A handle for the calling thread (one per thread; never share one).
 * NULL on allocation failure. */
router_thread_t *router_thread_new(router_t *r);
/* Folds the handle's counts into the router and frees it (optional;
 * router_free frees open handles). */
void router_thread_free(router_thread_t *t);

/*
 * The part of a handle that router_decode touches on every frame. It is in
 * this header only so that router_decode can be inlined into the caller's
 * loop (a call costs about as much as the whole dispatch); like FILE behind
 * getc_unlocked, nothing outside routing/ may read or write it. It is the
 * first member of every router_thread_t.
 *
 * route[len] = (bucket * 2 + arm) x sizeof(router_slot_t), a byte offset
 * (it saves the hot path a shift): the arm this length takes now (the choice,
 * or the explored arm during an exploration run). slot[bucket * 2 + arm]:
 * that arm's decoder (a call through it costs less than a branch between
 * two call sites) and the pulls left in the bucket's current segment,
 * counted only in the slot route points to; at zero the pull goes out of line
 * (router_decode_event) to start or end a measured segment (docs/router.md).
 * Pulls are not counted here: every pull of a segment takes
 * the same arm, so events add up the segments and reports add the running
 * segment's progress (routing/internal.h). Written only by the owning
 * thread, with relaxed atomic loads and stores (plain moves on x86-64) so
 * that reports may read the countdown while it runs.
 */
#define ROUTER_LEN_SLOTS (RTU_MAX_ADU + 2) /* lengths 0..256, and 257 for "longer" */
typedef struct router_slot {
    _Atomic uint32_t countdown;
    rtu_decode_fn decode;          /* this slot's arm: native or fallback */
} router_slot_t;

typedef struct router_hot {
    router_slot_t slot[ROUTER_MAX_BUCKETS * ROUTER_ARM_COUNT];
    uint16_t route[ROUTER_LEN_SLOTS];  /* byte offset of the slot in slot[] */
} router_hot_t;

/* The out-of-line half of router_decode; call router_decode instead. */
rtu_status_t router_decode_event(router_thread_t *t, const uint8_t *adu, size_t len,
                                 rtu_envelope_t *out);

/*
 * The main entry: picks an arm for this frame's bucket, decodes into *out
 * and sometimes times it. Returns out->status. out always equals what
 * rtu_decode_reference() would produce.
 */
static inline rtu_status_t router_decode(router_thread_t *t, const uint8_t *adu, size_t len,
                                         rtu_envelope_t *out)
{
    router_hot_t *h = (router_hot_t *)(void *)t;

    if (__builtin_expect(len >= ROUTER_LEN_SLOTS - 1, 0))
        return router_decode_event(t, adu, len, out); /* too long: counted there */
    router_slot_t *s = (router_slot_t *)(void *)((char *)h->slot + h->route[len]);
    rtu_decode_fn decode = s->decode; /* before the atomics: gcc keeps s in a register */
    uint32_t left = atomic_load_explicit(&s->countdown, memory_order_relaxed) - 1;

    if (__builtin_expect(left == 0, 0))
        return router_decode_event(t, adu, len, out);
    atomic_store_explicit(&s->countdown, left, memory_order_relaxed);
    return decode(adu, len, out);
}

/* The arm this handle exploits for a frame of len bytes now (exploration
 * aside). */
router_arm_t router_choice(const router_thread_t *t, size_t len);
/* Bucket index of a frame length, and the bucket count. */
unsigned router_bucket_of(const router_t *r, size_t len);
unsigned router_bucket_count(const router_t *r);

/*
 * Oracle costs for a bucket (ns per decode of each arm, measured by a
 * caller that runs both arms, as the benchmark does). Reports then give the
 * oracle's arm and the regret: the extra ns the routed pulls cost over
 * always taking the oracle's arm. Call from one thread, between runs.
 */
int router_set_oracle(router_t *r, unsigned bucket, double native_ns, double fallback_ns);

/* ---- state file ----------------------------------------------------------- */

/* Writes the merged table (via PATH.tmp and rename). 0 or -errno. */
int router_save(router_t *r, const char *path);
/*
 * Loads a table saved by router_save. Call before the first
 * router_thread_new (else -EBUSY). A missing, unreadable, truncated or
 * corrupt file, another format version or other bucket edges: exactly one
 * warning through cfg->log naming the file and what is wrong, the table
 * stays fresh, and a negative errno is returned (-ENOENT, -EIO, -EPROTO,
 * -EINVAL). Never aborts.
 */
int router_load(router_t *r, const char *path);

/* ---- a router replaced live (routing/handover.c) ---------------------------- */

/* Gives to (before its first router_thread_new, else -EBUSY) the merged
 * table of from, as router_save then router_load would: both keep their
 * own counters. -EINVAL when their bucket edges differ (to stays fresh). */
int router_inherit(router_t *to, router_t *from);
/* The owner lets go: freed now if no handle is open, else by the
 * router_thread_free of its last handle. The caller must not use r after. */
void router_release(router_t *r);

/* ---- reports -------------------------------------------------------------- */

typedef enum router_verdict {
    ROUTER_VERDICT_DEFAULT = 0,   /* "default, not a decision": an arm never taken */
    ROUTER_VERDICT_CONVERGED,     /* "converged to ARM" */
    ROUTER_VERDICT_NOT_CONVERGED  /* "not converged" */
} router_verdict_t;

typedef struct router_bucket_report {
    unsigned lo, hi;                     /* frame lengths lo..hi (last bucket: and above) */
    uint64_t pulls[ROUTER_ARM_COUNT];    /* total this run */
    uint64_t window_pulls[ROUTER_ARM_COUNT]; /* last complete window (or the current one) */
    uint64_t explored[ROUTER_ARM_COUNT]; /* pulls that were exploration (the arm not chosen) */
    uint64_t timed[ROUTER_ARM_COUNT];    /* cost samples taken this run */
    double cost_ns[ROUTER_ARM_COUNT];    /* 2^(mean log2 cost); 0 when no data */
    int has_cost[ROUTER_ARM_COUNT];      /* measured this run or loaded */
    uint64_t pairs;                      /* exploration runs paired with a run on the choice */
    double paired_ratio;                 /* native / fallback cost over the pairs; 0: none */
    router_arm_t chosen;                 /* majority of the window (the choice when idle) */
    router_verdict_t verdict;
    double minority_share;               /* window share of the other arm */
    double expected_share;               /* epsilon / 2; under THOMPSON the exploration
                                          * its draws asked for in the window */
    double interval_lo, interval_hi;     /* Wilson interval of minority_share, z = 4 */
    int has_oracle;
    double oracle_ns[ROUTER_ARM_COUNT];
    router_arm_t oracle_arm;
    double regret_ns;                    /* sum over this run's pulls */
    double regret_ns_per_pull;
} router_bucket_report_t;

typedef struct router_report {
    unsigned n_buckets;
    router_bucket_report_t bucket[ROUTER_MAX_BUCKETS];
    double epsilon;
    router_policy_t policy;
    unsigned sample_every;
    unsigned explore_run;
    double alpha;
    unsigned window;
    router_arm_t default_arm;
    const char *timer;          /* "rdtsc", "clock_gettime", "injected clock" or
                                   "injected" (costs) */
    double timer_overhead_ns;   /* calibrated, subtracted from every sample */
    double timer_resolution_ns; /* the smallest step it shows (0: injected costs) */
    unsigned threads;           /* handles open now */
    uint64_t decisions;         /* all pulls, all buckets */
    int loaded;                 /* a state file was loaded */
} router_report_t;

/* Merges every handle (and closed ones) into *out. Safe while others decode. */
int router_report(router_t *r, router_report_t *out);
/* "converged to native", "default, not a decision", "not converged". */
const char *router_verdict_text(const router_bucket_report_t *b, char *buf, size_t cap);
/* One JSON object, no newline. Returns the length (like snprintf), or a
 * negative value when cap is too small. 4096 bytes per bucket is plenty. */
int router_report_json(const router_report_t *rep, char *buf, size_t cap);

#endif
