/*
 * routing/router.c -- the router and its handles, the decision hot path's
 * events and learning. Its configuration is config.c, its timer clock.c,
 * reports report.c, the state file state.c; docs/router.md explains the
 * method.
 *
 * Hot path (router_decode, inline in router.h): one table load gives the
 * slot (bucket x arm) for the frame length, its countdown is decremented,
 * its decoder called through a pointer; nothing is counted per frame.
 * Everything else happens at the bucket's "events" (router_decode_event),
 * where a segment ends: after a gap on the choice comes either a pair (an
 * exploration run of explore_run pulls on the other arm and a measured
 * segment as long on the choice, in random order) or one measured segment
 * on the choice; then a gap again. A pair's log cost ratio is learned
 * (learn_pair) and decides the choice (decide); each measured segment also
 * feeds its arm's reported estimate (learn).
 */
#include "routing/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- randomness ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* xorshift64*: one multiply, full period on non-zero state. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* log2 to about 1e-8: exponent, then 2/ln2 * atanh(s), s = (m-1)/(m+1)
 * with the mantissa m in [sqrt(1/2), sqrt(2)). x must be positive, normal. */
static inline double fast_log2(double x)
{
    union {
        double d;
        uint64_t u;
    } v = { .d = x };
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
    double m = v.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double series = s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 / 9))));
    return (double)e + 2.8853900817779268 * series; /* 2 / ln 2 */
}

/* ---- router ---------------------------------------------------------------- */

/* A probability as a threshold for a 32-bit random draw, and back. */
static uint32_t draw_threshold(double p)
{
    double thr = p * 4294967296.0;
    return thr >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)thr;
}

static double threshold_p(uint32_t thr)
{
    return (double)thr / 4294967296.0;
}

int router_new(const router_config_t *cfg, router_t **out)
{
    *out = NULL;
    if (cfg->n_edges < 1 || cfg->n_edges > ROUTER_MAX_BUCKETS)
        return -EINVAL;
    for (unsigned i = 0; i < cfg->n_edges; i++)
        if (cfg->edges[i] < 1 || cfg->edges[i] > RTU_MAX_ADU ||
            (i && cfg->edges[i] <= cfg->edges[i - 1]))
            return -EINVAL;
    if (!(cfg->epsilon >= 0.0 && cfg->epsilon <= 1.0) || cfg->sample_every < 1 ||
        cfg->explore_run < 1 || cfg->explore_run > 1024 ||
        !(cfg->alpha > 0.0 && cfg->alpha <= 1.0) || !(cfg->hysteresis >= 0.0) ||
        cfg->default_arm < -1 || cfg->default_arm >= ROUTER_ARM_COUNT ||
        (cfg->policy != ROUTER_POLICY_EPSILON_GREEDY && cfg->policy != ROUTER_POLICY_THOMPSON))
        return -EINVAL;

    router_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->cfg = *cfg;
    r->nb = cfg->n_edges;
    for (unsigned len = 0, b = 0; len < LEN_SLOTS; len++) {
        while (b + 1 < r->nb && len > cfg->edges[b])
            b++;
        r->bucket_of[len] = (uint8_t)b;
    }
    r->default_arm = cfg->default_arm >= 0 ? (uint8_t)cfg->default_arm
                     : rtu_native_accelerated() ? ROUTER_ARM_NATIVE
                                                : ROUTER_ARM_FALLBACK;
    for (unsigned b = 0; b < ROUTER_MAX_BUCKETS; b++)
        r->prior_choice[b] = r->default_arm;

    /* Per bucket, with h = epsilon/2, R = explore_run, S = sample_every: a
     * cycle is a gap on the choice (mean g pulls, the last of which starts
     * the measured segment) and a measured segment of R pulls, L = g - 1 + R
     * pulls in all; the segment explores with probability p. Exploration
     * takes p R / L = h of the pulls, exploitation is measured once per
     * L / (1 - p) = S pulls: p = h S / (R + h S), L = S R / (R + h S). When
     * S is too small for that (g < 1) the gap is 1 pull, L = R and p = h.
     * docs/router.md has the derivation. */
    double h = cfg->epsilon / 2.0, R = (double)cfg->explore_run, S = (double)cfg->sample_every;
    double p = h * S / (R + h * S), L = S * R / (R + h * S), g = L + 1.0 - R;
    if (g < 1.0) {
        g = 1.0;
        p = h;
    }
    double span = 2.0 * g - 1.0;
    r->gap_span = span < 1.0 ? 1u : span > 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)(span + 0.5);
    r->explore_threshold = draw_threshold(p);
    r->window = cfg->window;
    if (r->window == 0) {
        /* about 64 runs: the verdict's trials are runs (report.c) */
        double want = h > 0.0 ? 64.0 * R / h : 4096.0;
        r->window = 4096;
        while (r->window < want && r->window < (1u << 30))
            r->window <<= 1;
    }

    uint64_t seed = cfg->seed;
    if (seed == 0)
        seed = router_mono_ns() ^ ((uint64_t)(uintptr_t)r << 16);
    r->next_seed = seed;
    pthread_mutex_init(&r->lock, NULL);
    if (cfg->cost) {
        r->use_tsc = 0;
        r->ns_per_tick = 1.0;
        r->overhead_ticks = 0.0;
        r->resolution_ns = 0.0;
    } else {
        router_calibrate(r);
    }
    *out = r;
    return 0;
}

void router_free(router_t *r)
{
    if (!r)
        return;
    for (unsigned i = 0; i < r->n_threads; i++)
        free(r->threads[i]);
    free(r->threads);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

unsigned router_bucket_of(const router_t *r, size_t len)
{
    return r->bucket_of[len < LEN_SLOTS - 1 ? len : LEN_SLOTS - 1];
}

unsigned router_bucket_count(const router_t *r)
{
    return r->nb;
}

int router_set_oracle(router_t *r, unsigned bucket, double native_ns, double fallback_ns)
{
    if (bucket >= r->nb || !(native_ns > 0) || !(fallback_ns > 0))
        return -EINVAL;
    r->oracle_ns[bucket][ROUTER_ARM_NATIVE] = native_ns;
    r->oracle_ns[bucket][ROUTER_ARM_FALLBACK] = fallback_ns;
    r->has_oracle[bucket] = 1;
    return 0;
}

/* ---- handles ---------------------------------------------------------------- */

static void set_route(router_thread_t *t, unsigned bucket, unsigned arm)
{
    const router_t *r = t->r;
    unsigned lo = bucket ? r->cfg.edges[bucket - 1] + 1u : 0;
    unsigned hi = bucket + 1 < r->nb ? r->cfg.edges[bucket] : LEN_SLOTS - 1;
    for (unsigned len = lo; len <= hi; len++)
        t->hot.route[len] = (uint16_t)((bucket * 2 + arm) * sizeof(router_slot_t));
}

static uint32_t draw_gap(const router_t *r, uint64_t x)
{
    return 1 + (uint32_t)(((x >> 32) * (uint64_t)r->gap_span) >> 32);
}

/*
 * Seqlock around an event's writes to a bucket (see rbucket_t), without
 * fences (ThreadSanitizer does not model them): the fields a reader checks
 * under it are written with release stores (SSTORE) and read with acquire
 * loads (SLOAD), plain moves on x86-64. A reader that sees any of an
 * event's stores therefore also sees the odd count before it, and its
 * second read of the count, ordered after its data loads, differs.
 */
#define SSTORE(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define SLOAD(p) atomic_load_explicit((p), memory_order_acquire)

static void bucket_write_begin(rbucket_t *rb)
{
    RSTORE(&rb->seq, RLOAD(&rb->seq) + 1);
}

static void bucket_write_end(rbucket_t *rb)
{
    SSTORE(&rb->seq, RLOAD(&rb->seq) + 1);
}

static rtu_decode_fn arm_decoder(unsigned arm)
{
    return arm == ROUTER_ARM_FALLBACK ? rtu_decode_fallback : rtu_decode_native;
}

/* Adds n pulls of arm to the bucket's finished-segment total (inside
 * bucket_write_begin/end). */
static void acc_add(rbucket_t *rb, unsigned arm, uint64_t n)
{
    SSTORE(&rb->acc[arm], RLOAD(&rb->acc[arm]) + n);
}

/* The owner's view, exact between events. */
static uint64_t owner_pulls(const router_thread_t *t, unsigned bucket, unsigned arm)
{
    const rbucket_t *rb = &t->b[bucket];
    uint64_t p = SLOAD(&rb->acc[arm]);
    if (SLOAD(&rb->seg_arm) == arm) {
        uint32_t left = SLOAD(&t->hot.slot[bucket * 2 + arm].countdown);
        uint32_t len = SLOAD(&rb->seg_len);
        p += len > left ? len - left : 0;
    }
    return p;
}

void router_bucket_pulls(const router_thread_t *t, unsigned bucket, uint64_t pulls[ARMS])
{
    const rbucket_t *rb = &t->b[bucket];
    uint32_t s0, s1;
    do {
        s0 = SLOAD(&rb->seq);
        for (unsigned a = 0; a < ARMS; a++)
            pulls[a] = owner_pulls(t, bucket, a);
        s1 = SLOAD(&rb->seq);
    } while ((s0 & 1) || s0 != s1);
}

/* Starts the bucket's next segment: `len` pulls on `arm`, counted down in
 * the hot path. Inside bucket_write_begin/end, or before the handle is
 * published. */
static void start_segment(router_thread_t *t, unsigned bucket, unsigned arm, uint32_t len)
{
    rbucket_t *rb = &t->b[bucket];
    SSTORE(&rb->seg_arm, (uint8_t)arm);
    SSTORE(&rb->seg_len, len);
    SSTORE(&t->hot.slot[bucket * 2 + arm].countdown, len);
    set_route(t, bucket, arm);
}

router_thread_t *router_thread_new(router_t *r)
{
    size_t size = (sizeof(router_thread_t) + 63) & ~(size_t)63;
    router_thread_t *t = aligned_alloc(64, size);
    if (!t)
        return NULL;
    memset(t, 0, size);
    t->r = r;
    for (unsigned e = 0; e < ROUTER_MAX_BUCKETS * ARMS; e++)
        t->hot.slot[e].decode = arm_decoder(e & 1);

    /* fully set up before it is published in r->threads */
    pthread_mutex_lock(&r->lock);
    t->rng = splitmix64(&r->next_seed) | 1;
    pthread_mutex_unlock(&r->lock);
    for (unsigned b = 0; b < r->nb; b++) {
        rbucket_t *rb = &t->b[b];
        for (unsigned a = 0; a < ARMS; a++) {
            RSTORE(&rb->est[a], r->prior_est[b][a]);
            RSTORE(&rb->n_est[a], r->prior_n[b][a]);
        }
        RSTORE(&rb->choice, r->prior_choice[b]);
        rb->explore_thr = r->explore_threshold;
        start_segment(t, b, r->prior_choice[b], draw_gap(r, rng_next(&t->rng)));
    }

    pthread_mutex_lock(&r->lock);
    if (r->n_threads == r->cap_threads) {
        unsigned cap = r->cap_threads ? 2 * r->cap_threads : 8;
        router_thread_t **arr = realloc(r->threads, cap * sizeof *arr);
        if (!arr) {
            pthread_mutex_unlock(&r->lock);
            free(t);
            return NULL;
        }
        r->threads = arr;
        r->cap_threads = cap;
    }
    t->slot = r->n_threads;
    r->threads[r->n_threads++] = t;
    pthread_mutex_unlock(&r->lock);
    return t;
}

void router_thread_free(router_thread_t *t)
{
    if (!t)
        return;
    router_t *r = t->r;
    pthread_mutex_lock(&r->lock);
    for (unsigned b = 0; b < r->nb; b++) {
        rbucket_t *rb = &t->b[b];
        uint64_t pulls[ARMS];
        router_bucket_pulls(t, b, pulls);
        for (unsigned a = 0; a < ARMS; a++) {
            r->ret_pulls[b][a] += pulls[a];
            r->ret_win[b][a] += RLOAD(&rb->win_complete) ? RLOAD(&rb->win_prev[a])
                                                         : pulls[a] - RLOAD(&rb->win_mark[a]);
            r->ret_timed[b][a] += RLOAD(&rb->timed[a]);
            r->ret_explored[b][a] += RLOAD(&rb->explored[a]);
            uint64_t n = RLOAD(&rb->n_est[a]);
            r->ret_est_sum[b][a] += (double)n * RLOAD(&rb->est[a]);
            r->ret_n[b][a] += n;
        }
        r->ret_expect[b] += RLOAD(&rb->win_complete) ? RLOAD(&rb->win_expect_prev)
                                                     : RLOAD(&rb->win_expect);
    }
    r->threads[t->slot] = r->threads[--r->n_threads];
    r->threads[t->slot]->slot = t->slot;
    bool last = r->released && r->n_threads == 0;   /* routing/handover.c */
    pthread_mutex_unlock(&r->lock);
    free(t);
    if (last)
        router_free(r);
}

router_arm_t router_choice(const router_thread_t *t, size_t len)
{
    return (router_arm_t)RLOAD(&t->b[router_bucket_of(t->r, len)].choice);
}

/* ---- learning ----------------------------------------------------------------- */

/*
 * The bucket's choice after a new sample; the route follows when the next
 * segment starts. It compares the arms by their paired difference once
 * there is one: each exploration run has a measured segment on the choice
 * right before or after it, and the pair's log2 ratio is learned
 * (learn_pair).
 * The machine's speed moves by far more than the arms differ (this 2-core
 * VM has phases 1.7x apart, lasting milliseconds); the two halves of a pair
 * share the phase, and it cancels in their ratio. The separate estimates
 * (est) sample the arms at different moments, so the phase stays in their
 * difference: they are reported, and decide only until the first pair.
 */
#ifndef SWITCH_Z
#define SWITCH_Z 2.0
#endif

/*
 * THOMPSON: the chance that one draw from the pairs' posterior, normal with
 * mean d and standard error se (log2 native / fallback), favours the arm
 * that is not the choice; an exploration opportunity is taken with that
 * chance. The cap keeps it within epsilon's budget (at a tie the draw says
 * 0.5, close to the default's per-opportunity rate of 0.62). The floor,
 * 1/16 of that rate, keeps pairs coming once an arm is clearly cheaper: se
 * never falls below what alpha's discount allows, but 2.2 log2 units apart
 * (255 bytes) that chance is nil, and without pairs a drift is never seen.
 */
#define THOMPSON_FLOOR 16.0

static uint32_t thompson_threshold(const router_t *r, unsigned choice, double d, double se)
{
    double s = choice == ROUTER_ARM_FALLBACK ? d : -d; /* > 0: the pairs back the choice */
    double q = se > 0.0 ? 0.5 * router_erfc(s / (se * M_SQRT2)) : (s > 0.0 ? 0.0 : 1.0);
    double p = threshold_p(r->explore_threshold);
    if (q > p)
        q = p;
    if (q < p / THOMPSON_FLOOR)
        q = p / THOMPSON_FLOOR;
    return draw_threshold(q);
}

static void decide(router_thread_t *t, unsigned bucket)
{
    const router_t *r = t->r;
    rbucket_t *rb = &t->b[bucket];
    unsigned cur = RLOAD(&rb->choice), want = cur;

    if (RLOAD(&rb->n_est[0]) == 0 || RLOAD(&rb->n_est[1]) == 0) {
        want = r->default_arm;
    } else {
        /* log2(native cost / fallback cost): > 0 when fallback is cheaper.
         * A switch needs the difference beyond the hysteresis and beyond
         * SWITCH_Z standard errors of the mean: two arms whose pairs scatter
         * around a tie would otherwise take turns, and each turn costs the
         * verdict its window. The standard error comes from the robust
         * scale (diff_dev, 1.25 x mean absolute deviation ~ sd), weighted as
         * the mean is. */
        double d = RLOAD(&rb->est[0]) - RLOAD(&rb->est[1]), margin = r->cfg.hysteresis;
        double se = 0.0;
        uint64_t n = RLOAD(&rb->n_diff);
        if (n) {
            double a = 1.0 / (double)n;
            if (a < r->cfg.alpha)
                a = r->cfg.alpha;
            se = 1.25 * rb->diff_dev * sqrt(a / (2.0 - a));
            d = RLOAD(&rb->diff);
            if (SWITCH_Z * se > margin)
                margin = SWITCH_Z * se;
        }
        if (cur == ROUTER_ARM_NATIVE && d > margin)
            want = ROUTER_ARM_FALLBACK;
        else if (cur == ROUTER_ARM_FALLBACK && d < -margin)
            want = ROUTER_ARM_NATIVE;
        if (n && r->cfg.policy == ROUTER_POLICY_THOMPSON)
            rb->explore_thr = thompson_threshold(r, want, d, se);
    }
    if (want != cur)
        RSTORE(&rb->choice, (uint8_t)want);
}

/* Costs arrive floored at their measurement's resolution (measured_pull);
 * 0.25 ns keeps an injected 0 finite. */
static double log2_cost(double cost_ns)
{
    return fast_log2(cost_ns > 0.25 ? cost_ns : 0.25);
}

/* An exponentially weighted mean: a running mean for the first 1/alpha
 * samples (n before this one), then weight alpha. */
static double ew_mean(const router_t *r, double mean, uint64_t n, double x)
{
    double a = 1.0 / (double)(n + 1);
    if (a < r->cfg.alpha)
        a = r->cfg.alpha;
    return n ? mean + a * (x - mean) : x;
}

static void learn(router_thread_t *t, unsigned bucket, unsigned arm, double cost_ns)
{
    rbucket_t *rb = &t->b[bucket];
    uint64_t n = RLOAD(&rb->n_est[arm]);
    RSTORE(&rb->est[arm], ew_mean(t->r, RLOAD(&rb->est[arm]), n, log2_cost(cost_ns)));
    RSTORE(&rb->n_est[arm], n + 1);
    RBUMP(&rb->timed[arm]);
}

/* A pair: `arm` cost cost_ns, the other arm other_ns, back to back. Before
 * the first pair, the difference of the estimates stands in as its prior,
 * weighted by the samples behind it (a loaded table keeps its verdict). */
#define PAIR_CLIP 4.0
#define PAIR_DEV_MIN 0.01 /* log2 units, about 0.7 % */

static void learn_pair(router_thread_t *t, unsigned bucket, unsigned arm, double cost_ns,
                       double other_ns)
{
    rbucket_t *rb = &t->b[bucket];
    double x = log2_cost(cost_ns) - log2_cost(other_ns);
    if (arm == ROUTER_ARM_FALLBACK)
        x = -x;
    uint64_t n = RLOAD(&rb->n_diff);
    double mean = RLOAD(&rb->diff);
    if (n == 0) {
        uint64_t n0 = RLOAD(&rb->n_est[0]), n1 = RLOAD(&rb->n_est[1]);
        n = (n0 < n1 ? n0 : n1) - 1; /* both include this pair's samples */
        mean = RLOAD(&rb->est[0]) - RLOAD(&rb->est[1]);
    }
    /* Huber-like: once the scale is known (1/alpha pairs), a pair is
     * clipped to PAIR_CLIP mean absolute deviations of the mean, so one
     * segment that took an interrupt (a 7-byte span is 700 ns) moves the
     * mean by no more than a typical pair would; a real change moves it
     * on every pair, and the scale widens with it. */
    double dev = fabs(x - mean), clip = PAIR_CLIP * rb->diff_dev;
    if ((double)RLOAD(&rb->n_diff) * t->r->cfg.alpha >= 1.0 && dev > clip) {
        x = x > mean ? mean + clip : mean - clip;
        dev = clip;
    }
    rb->diff_dev = RLOAD(&rb->n_diff) ? ew_mean(t->r, rb->diff_dev, n, dev) : PAIR_DEV_MIN;
    if (rb->diff_dev < PAIR_DEV_MIN)
        rb->diff_dev = PAIR_DEV_MIN;
    RSTORE(&rb->diff, ew_mean(t->r, mean, n, x));
    RSTORE(&rb->n_diff, RLOAD(&rb->n_diff) + 1);
}

/* Per-bucket window: once this handle has made `window` pulls in the bucket
 * since the last roll, those counts become the bucket's last window. */
static void maybe_roll(router_thread_t *t, unsigned bucket)
{
    rbucket_t *rb = &t->b[bucket];
    uint64_t p0 = owner_pulls(t, bucket, 0), p1 = owner_pulls(t, bucket, 1);
    uint64_t m0 = RLOAD(&rb->win_mark[0]), m1 = RLOAD(&rb->win_mark[1]);
    if (p0 + p1 - m0 - m1 < t->r->window)
        return;
    RSTORE(&rb->win_prev[0], p0 - m0);
    RSTORE(&rb->win_prev[1], p1 - m1);
    RSTORE(&rb->win_mark[0], p0);
    RSTORE(&rb->win_mark[1], p1);
    RSTORE(&rb->win_expect_prev, RLOAD(&rb->win_expect));
    RSTORE(&rb->win_expect, 0.0);
    RSTORE(&rb->win_complete, 1);
}

static inline rtu_status_t run_arm(unsigned arm, const uint8_t *adu, size_t len,
                                   rtu_envelope_t *out)
{
    return arm_decoder(arm)(adu, len, out);
}

/*
 * The last pull of a measured segment (explore_run pulls on one arm, begun
 * at seg_t0): decodes it between two timer reads, and learns from the
 * cheaper-looking of two views when the decode succeeded (a rejected frame
 * stops early and says nothing about a real response):
 *  - the segment's time per pull, (now - seg_t0) / explore_run: what the
 *    arm costs where frames come back to back (a replay, a file, a loop),
 *    in the caller's own context: how it writes and reads the envelope
 *    decides which arm wins at 20 bytes, and an isolated pull cannot see
 *    that (docs/router.md);
 *  - the last pull alone, fenced: when the span is more than SPAN_TRUST
 *    times that, the caller did other work between frames (a gateway waits
 *    milliseconds for the next answer) and the span measures the wait.
 *    The bucket remembers which view it learns from (span_mode), so the two
 *    are not mixed on one stray segment.
 * A cost below its view's resolution is read as half of it: a lone 7-byte
 * pull read as 0 ticks would otherwise enter as 0.25 ns, 5.5 log2 units
 * off. A span divides the timer's step by explore_run: floored at half a
 * step, as single pulls are, 5-8 ns spans read as 10 ns on a 20-ns timer,
 * both arms alike, and at 7 and 21 bytes the paired ratio read 1.000.
 * With an injected cost source the source's cost is used, no clock.
 */
#define SPAN_TRUST 4.0

static rtu_status_t measured_pull(router_thread_t *t, unsigned bucket, unsigned arm,
                                  const uint8_t *adu, size_t len, rtu_envelope_t *out,
                                  double *learned)
{
    const router_t *r = t->r;
    rbucket_t *rb = &t->b[bucket];
    rtu_status_t st;
    double cost;

    *learned = NAN;

    if (r->cfg.cost) {
        st = run_arm(arm, adu, len, out);
        cost = r->cfg.cost(r->cfg.cost_ctx, (router_arm_t)arm, len);
    } else {
        uint64_t t1 = router_timer_read(r);
        st = run_arm(arm, adu, len, out);
        uint64_t t2 = router_timer_read(r);
        cost = ((double)(t2 - t1) - r->overhead_ticks) * r->ns_per_tick;
        double floor = r->resolution_ns / 2.0;
        if (r->cfg.explore_run > 1) {
            double span = ((double)(t2 - rb->seg_t0) - r->overhead_ticks) * r->ns_per_tick /
                          (double)r->cfg.explore_run;
            double single = cost > r->resolution_ns ? cost : r->resolution_ns;
            int trusted = span > 0 && span <= SPAN_TRUST * single;
            if (trusted) {
                cost = span;
                floor /= (double)r->cfg.explore_run;
            } else if (rb->span_mode) {
                /* One segment that straddled other work while frames
                 * otherwise come back to back: a lone single-pull sample
                 * would sit far from the span samples beside it (an
                 * isolated pull costs 2-3x a pull in a stream) and swing
                 * the estimate; it is dropped. A second in a row means the
                 * stream has become sparse, and single pulls are learned. */
                rb->span_mode = 0;
                return st;
            }
            rb->span_mode = (uint8_t)trusted;
        }
        if (cost < floor)
            cost = floor;
    }
    if (st == RTU_OK) {
        learn(t, bucket, arm, cost);
        *learned = cost;
    }
    return st;
}

/*
 * A measured segment of `arm` ended, costing `cost` ns a pull (NAN when it
 * taught nothing). Pairs: the order of the halves is drawn per pair, since
 * whichever runs second finds the branch predictors and caches set up by
 * the first; with a fixed order that penalty fell on one role, and at 7
 * bytes it made the arm in the second role look 5-8 % dearer, so the router
 * switched, the roles swapped, and it switched back, sharing the window
 * half and half between two arms 3 % apart. In random order it cancels.
 */
static void segment_done(router_thread_t *t, unsigned bucket, unsigned arm, double cost)
{
    const router_t *r = t->r;
    rbucket_t *rb = &t->b[bucket];
    uint32_t cut = 0;

    if (rb->pair_half == 1) {
        /* the other half, at once: explore_run pulls, all to come */
        rb->pair_half = 2;
        rb->pair_cost = cost;
        rb->measuring = 1;
        start_segment(t, bucket, arm ^ 1, r->cfg.explore_run);
        rb->seg_t0 = r->cfg.cost ? 0 : router_timer_read(r);
        return;
    }
    if (rb->pair_half == 2) {
        rb->pair_half = 0;
        if (cost == cost && rb->pair_cost == rb->pair_cost)
            learn_pair(t, bucket, arm, cost, rb->pair_cost);
        /* the half on the choice stands in for as many gap pulls, so the
         * exploration share stays h */
        cut = r->cfg.explore_run;
    }
    decide(t, bucket);
    uint32_t g = draw_gap(r, rng_next(&t->rng));
    start_segment(t, bucket, RLOAD(&rb->choice), g > cut ? g - cut : 1);
}

/*
 * The bucket's segment has run out; this pull is the segment's last.
 *  - A gap on the choice ended: a measured segment of explore_run pulls
 *    starts with this pull: with probability p the first half of a pair,
 *    on either arm (drawn), else an exploitation sample on the choice. Its
 *    first pull reads the clock, the rest run in the inline hot path. With
 *    explore_run 1 the segment is this single pull, measured at once.
 *  - A measured segment ended: this pull is measured (measured_pull); then
 *    segment_done starts the pair's second half on the other arm, or, after
 *    a pair or a sample, decides and starts a gap on the choice.
 * The segment's pulls are folded into acc first, then the next one starts.
 */
rtu_status_t router_decode_event(router_thread_t *t, const uint8_t *adu, size_t len,
                                 rtu_envelope_t *out)
{
    const router_t *r = t->r;
    unsigned e = t->hot.route[len < LEN_SLOTS - 1 ? len : LEN_SLOTS - 1] / sizeof(router_slot_t);
    unsigned bucket = e >> 1, arm = e & 1;
    rbucket_t *rb = &t->b[bucket];
    rtu_status_t st;

    if (len >= LEN_SLOTS - 1) {
        /* Longer than any ADU: rejected by either arm at once; counted in
         * the last bucket without touching its segment. */
        bucket_write_begin(rb);
        acc_add(rb, arm, 1);
        bucket_write_end(rb);
        return run_arm(arm, adu, len, out);
    }
    uint32_t left = RLOAD(&t->hot.slot[e].countdown);
    if (left > 1) {
        /* not the segment's end (router_decode comes here only at the end,
         * but the function is public): an ordinary pull */
        RSTORE(&t->hot.slot[e].countdown, left - 1);
        return run_arm(arm, adu, len, out);
    }

    bucket_write_begin(rb);
    /* the hot path took seg_len - 1 pulls; this one is counted below */
    acc_add(rb, arm, RLOAD(&rb->seg_len) - 1);
    SSTORE(&t->hot.slot[e].countdown, 0);
    double cost;
    if (rb->measuring) {
        rb->measuring = 0;
        /* The choice changes only in decide(), between pairs, so a segment
         * off the choice is an exploration run: seg_len pulls, this one
         * included (a run begun at a gap's end counted its first there). */
        if (arm != RLOAD(&rb->choice))
            RSTORE(&rb->explored[arm], RLOAD(&rb->explored[arm]) + RLOAD(&rb->seg_len));
        st = measured_pull(t, bucket, arm, adu, len, out, &cost);
    } else {
        /* A gap on the choice ended: a pair (an exploration run and a run on
         * the choice, in random order) or a plain sample of the choice. */
        uint64_t x = rng_next(&t->rng);
        uint32_t thr = r->cfg.policy == ROUTER_POLICY_THOMPSON ? rb->explore_thr
                                                               : r->explore_threshold;
        rb->pair_half = (uint32_t)x < thr;
        RSTORE(&rb->win_expect,
               RLOAD(&rb->win_expect) + threshold_p(thr) * (double)r->cfg.explore_run);
        if (rb->pair_half && (x >> 63)) {
            arm ^= 1; /* the exploration run first */
            RBUMP(&rb->explored[arm]);
        }
        if (r->cfg.explore_run > 1) {
            rb->measuring = 1;
            acc_add(rb, arm, 1);
            start_segment(t, bucket, arm, r->cfg.explore_run - 1);
            maybe_roll(t, bucket);
            bucket_write_end(rb);
            rb->seg_t0 = r->cfg.cost ? 0 : router_timer_read(r);
            return run_arm(arm, adu, len, out);
        }
        st = measured_pull(t, bucket, arm, adu, len, out, &cost);
    }
    acc_add(rb, arm, 1);
    segment_done(t, bucket, arm, cost);
    maybe_roll(t, bucket);
    bucket_write_end(rb);
    return st;
}

/* ---- merge (reports, save) ------------------------------------------------------ */

void router_merge(router_t *r, router_merged_t *m)
{
    double est_sum[ROUTER_MAX_BUCKETS][ARMS], diff_sum[ROUTER_MAX_BUCKETS];
    uint64_t best_pulls[ROUTER_MAX_BUCKETS];

    memset(m, 0, sizeof *m);
    memset(best_pulls, 0, sizeof best_pulls);
    memset(diff_sum, 0, sizeof diff_sum);
    pthread_mutex_lock(&r->lock);
    m->threads = r->n_threads;
    for (unsigned b = 0; b < r->nb; b++) {
        m->choice[b] = r->prior_choice[b];
        for (unsigned a = 0; a < ARMS; a++) {
            m->pulls[b][a] = r->ret_pulls[b][a];
            m->win[b][a] = r->ret_win[b][a];
            m->timed[b][a] = r->ret_timed[b][a];
            m->explored[b][a] = r->ret_explored[b][a];
            est_sum[b][a] = r->ret_est_sum[b][a];
            m->n_est[b][a] = r->ret_n[b][a];
        }
        m->expect[b] = r->ret_expect[b];
    }
    for (unsigned i = 0; i < r->n_threads; i++) {
        router_thread_t *t = r->threads[i];
        for (unsigned b = 0; b < r->nb; b++) {
            rbucket_t *rb = &t->b[b];
            uint64_t pulls[ARMS];
            router_bucket_pulls(t, b, pulls);
            int complete = RLOAD(&rb->win_complete);
            uint64_t tp = 0;
            for (unsigned a = 0; a < ARMS; a++) {
                uint64_t p = pulls[a];
                tp += p;
                m->pulls[b][a] += p;
                /* a roll racing this read can only make the partial count
                 * stale, never negative once clamped */
                uint64_t mark = RLOAD(&rb->win_mark[a]);
                m->win[b][a] += complete ? RLOAD(&rb->win_prev[a]) : (p > mark ? p - mark : 0);
                m->timed[b][a] += RLOAD(&rb->timed[a]);
                m->explored[b][a] += RLOAD(&rb->explored[a]);
                uint64_t n = RLOAD(&rb->n_est[a]);
                est_sum[b][a] += (double)n * RLOAD(&rb->est[a]);
                m->n_est[b][a] += n;
            }
            m->expect[b] += complete ? RLOAD(&rb->win_expect_prev) : RLOAD(&rb->win_expect);
            uint64_t nd = RLOAD(&rb->n_diff);
            diff_sum[b] += (double)nd * RLOAD(&rb->diff);
            m->n_diff[b] += nd;
            if (i == 0 || tp > best_pulls[b]) {
                best_pulls[b] = tp;
                m->choice[b] = RLOAD(&rb->choice);
            }
        }
    }
    pthread_mutex_unlock(&r->lock);
    for (unsigned b = 0; b < r->nb; b++) {
        for (unsigned a = 0; a < ARMS; a++)
            m->est[b][a] = m->n_est[b][a] ? est_sum[b][a] / (double)m->n_est[b][a] : 0.0;
        m->diff[b] = m->n_diff[b] ? diff_sum[b] / (double)m->n_diff[b] : 0.0;
    }
}
