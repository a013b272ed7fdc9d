/*
 * tests/line/test_pair_explore.c -- the tap's pairing (parser/pair.c) against a model
 * line in simulated time, seeded: a master with a timeout, retries and polls
 * that change address and shape, slaves that answer in the order asked (a
 * queue), late (past the master's timeout), twice, with a damaged CRC, with
 * another slave's id, or not at all, with all-equal or unique register values.
 *
 * The model keeps pair.c's stated bound (P5): nothing a slave sends for a
 * request (its answer, late or queued, or a copy) goes out later than
 * bound x the master's timeout after it; a seed draws 1.5 or 3.9
 * (RTUGW_PAIR_LATE_BOUND=15 or 39 forces one), against pair.c's factor 4
 * (RTUGW_PAIR_LATE_FACTOR). A bound above the factor must find wrong pairs.
 *
 * Every answer frame carries, out of band, the request it really answers. An
 * ANSWERED pair whose request is not that one is a wrong value published,
 * unless that request has the same bytes (an earlier ask of the same question:
 * the master's retry, or the same block polled again; counted apart) or the
 * answer was heard twice and its byte-equal copy answers it. So is an ANSWERED
 * pair whose latency is past the master's timeout as heard (the shortest wait
 * from a request to the master's next with nothing heard in it, computed here
 * apart from pair.c). Either fails the run with its seed.
 *
 * RTUGW_PAIR_FRAMES sets the frames explored (10^5 by default; `make
 * check-tap-explore` runs 10^6 from several seed ranges), RTUGW_SEED0 the
 * first seed, RTUGW_SEED replays one seed. Seeds once found wrong are
 * replayed on every run (regression_seeds). The output gives the share of
 * pairs used and doubtful: the cost of the bound.
 */
#include "parser/rtu.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define US ((uint64_t)1000)
#define MS ((uint64_t)1000000)
#define RING 1000          /* answers in flight, looked up by t_first_ns % RING */
#define MAXQ 512           /* answer frames scheduled, all slaves */

static uint64_t rng(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);   /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unit(uint64_t *x) { return (double)(rng(x) >> 11) / 9007199254740992.0; }
static bool hit(uint64_t *x, double p) { return p > 0 && unit(x) < p; }
static uint64_t between(uint64_t *x, uint64_t lo, uint64_t hi) { return lo + rng(x) % (hi - lo + 1); }

typedef struct poll { uint8_t slave, fc; uint16_t addr, qty; } poll_t;

typedef struct sched {     /* an answer frame on its way */
    uint64_t t_us;         /* first byte */
    uint64_t truth;        /* t_last_ns of the request it answers */
    uint8_t truth_req[8];  /* and its bytes (the question) */
    uint8_t adu[RTU_MAX_ADU];
    uint16_t len;
    bool crc_ok;
} sched_t;

typedef struct model {
    uint64_t x;
    /* the master */
    uint64_t timeout_us, gap_ok_us, gap_to_us;
    unsigned retries, npolls;
    poll_t polls[12];
    /* the slaves (ids 1..3) */
    double late_rate, double_rate, foreign_rate, crc_rate, deaf_rate, noise_rate;
    uint64_t late_lo_us, late_hi_us, double_gap_hi_us;
    unsigned bound_tenths; /* nothing is sent for a request later than this x timeout after it */
    bool equal_values;
    uint64_t busy_until_us[4], last_start_us[4];
    uint16_t regs_version;
    /* the line */
    sched_t q[MAXQ];
    unsigned nq;
    uint64_t now_us, noise, seq;
    struct { uint64_t t_first_ns, truth; uint32_t hash; uint16_t len; uint8_t truth_req[8]; } ring[RING];
    /* what pair.c is judged by */
    uint64_t heard_timeout_ns, last_req_last_ns;
    bool window_quiet, have_last_req;
    uint64_t window_noise;
    rtu_pairer_t *p;
    /* totals */
    uint64_t frames, answered, wrong, late_used, doubtful, taken_by_master, answered_not_taken, same_question, equal_same_question;
    char first_wrong[256];
} model_t;

typedef struct totals {
    uint64_t runs, frames, answered, doubtful, late, owed, wrong, late_used, not_taken, same_question, equal_same_question;
    uint64_t used_by[2], doubtful_by[2];   /* [equal_values] */
    uint64_t first_bad_seed;
    char first_bad[256];
} totals_t;

static unsigned bound_tenths, late_factor;

static void draw(model_t *m, uint64_t seed)
{
    memset(m, 0, offsetof(model_t, p));
    m->x = seed;
    uint64_t *x = &m->x;
    m->timeout_us = between(x, 30, 300) * 1000;
    m->retries = (unsigned)between(x, 0, 2);
    m->gap_ok_us = between(x, 1000, m->timeout_us);
    m->gap_to_us = hit(x, 0.5) ? between(x, 0, 5000) : between(x, 0, 2 * m->timeout_us);
    unsigned nslaves = (unsigned)between(x, 1, 3);
    m->npolls = (unsigned)between(x, 1, 6);
    static const uint16_t qtys[] = { 1, 2, 8 };
    static const uint16_t addrs[] = { 0, 100, 200, 500 };
    for (unsigned i = 0; i < m->npolls; i++) {
        poll_t *pl = &m->polls[i];
        pl->slave = (uint8_t)between(x, 1, nslaves);
        pl->fc = hit(x, 0.8) ? 3 : 4;
        pl->addr = addrs[rng(x) % 4];
        pl->qty = hit(x, 0.7) ? qtys[0] : qtys[rng(x) % 3];   /* mostly one shape */
    }
    m->late_rate = hit(x, 0.8) ? unit(x) * 0.5 : 0;
    m->bound_tenths = bound_tenths ? bound_tenths : hit(x, 0.5) ? 15 : 39;
    m->late_lo_us = m->timeout_us / 2;
    m->late_hi_us = m->timeout_us * m->bound_tenths / 10;
    m->double_rate = hit(x, 0.5) ? unit(x) * 0.2 : 0;
    m->double_gap_hi_us = m->timeout_us * 3;
    m->foreign_rate = hit(x, 0.3) ? unit(x) * 0.1 : 0;
    m->crc_rate = hit(x, 0.5) ? unit(x) * 0.1 : 0;
    m->deaf_rate = hit(x, 0.3) ? unit(x) * 0.1 : 0;
    m->noise_rate = hit(x, 0.3) ? unit(x) * 0.05 : 0;
    m->equal_values = hit(x, 0.5);
    m->window_quiet = true;
}

static void crc_put(uint8_t *adu, uint16_t n)
{
    uint16_t c = rtu_crc16(adu, n);
    adu[n] = (uint8_t)c;
    adu[n + 1] = (uint8_t)(c >> 8);
}

static int trace;

static uint32_t fnv(const uint8_t *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static void judge(model_t *m, const rtu_pair_event_t *ev)
{
    if (trace)
        fprintf(stderr, "   -> %s req %.3f ans %.3f %s\n", rtu_pair_kind_name((rtu_pair_kind_t)ev->kind),
                (double)ev->request.t_last_ns / 1e6, (double)ev->answer.t_first_ns / 1e6, ev->why ? ev->why : "");
    if (ev->kind == RTU_PAIR_DOUBTFUL)
        m->doubtful++;
    if (ev->kind != RTU_PAIR_ANSWERED)
        return;
    m->answered++;
    uint64_t t = ev->answer.t_first_ns;
    bool known = m->ring[t % RING].t_first_ns == t;
    uint64_t truth = known ? m->ring[t % RING].truth : 0;
    const char *bad = NULL;
    if (known && truth != ev->request.t_last_ns && ev->request.len == 8 &&
        memcmp(m->ring[t % RING].truth_req, ev->request.adu, 8) == 0) {
        /* The answer to an earlier ask of the same bytes (the master's retry, or the
         * same block polled again, within the late bound): the same question. */
        m->same_question++;
    } else if (!truth || truth != ev->request.t_last_ns) {
        /* A value-equal duplicate of the same question: the slave sent these very bytes
         * as its answer to this request (heard twice: ev->duplicate), or to an ask of the
         * same bytes within the late bound (equal registers, all zeros): the values
         * published are ones the slave gave for this question. */
        bad = "paired with a request it does not answer";
        uint32_t h = fnv(ev->answer.adu, ev->answer.len);
        uint64_t w = m->heard_timeout_ns ? (uint64_t)late_factor * m->heard_timeout_ns : UINT64_MAX;
        for (unsigned i = 0; bad && i < RING; i++) {
            if (m->ring[i].hash != h || m->ring[i].len != ev->answer.len || !m->ring[i].truth)
                continue;
            uint64_t ti = m->ring[i].t_first_ns, dt = ti > t ? ti - t : t - ti;
            if (m->ring[i].truth == ev->request.t_last_ns && ev->duplicate && ti >= t)
                bad = NULL;
            else if (ev->request.len == 8 && memcmp(m->ring[i].truth_req, ev->request.adu, 8) == 0 && dt <= w) {
                bad = NULL;
                m->equal_same_question++;
            }
        }
    }
    else if (m->heard_timeout_ns && ev->latency_ns > m->heard_timeout_ns)
        bad = "used, later than the master's timeout as heard";
    if (ev->latency_ns > m->timeout_us * US)
        m->answered_not_taken++;
    if (bad) {
        if (!m->wrong)
            snprintf(m->first_wrong, sizeof m->first_wrong,
                     "%s: answer at %" PRIu64 " us to the request ending %" PRIu64 " us, paired with the "
                     "one ending %" PRIu64 " us (latency %" PRIu64 " us, heard timeout %" PRIu64 " us)", bad,
                     t / US, truth / US, ev->request.t_last_ns / US, ev->latency_ns / US,
                     m->heard_timeout_ns / US);
        m->wrong++;
        if (strstr(bad, "later"))
            m->late_used++;
    }
}

static void tap(model_t *m, const rtu_frame_t *f)
{
    rtu_pair_event_t ev;
    rtu_pairer_idle(m->p, f->t_first_ns, m->noise);
    while (rtu_pairer_next(m->p, &ev) == 1)
        judge(m, &ev);
    /* the heard timeout, as the master shows it: a wait with nothing in it */
    if (f->is_request && f->crc_ok) {
        if (m->have_last_req && m->window_quiet && m->noise == m->window_noise) {
            uint64_t gap = f->t_first_ns - m->last_req_last_ns;
            if (!m->heard_timeout_ns || gap < m->heard_timeout_ns)
                m->heard_timeout_ns = gap;
        }
        m->have_last_req = f->adu[0] != 0;
        m->last_req_last_ns = f->t_last_ns;
        m->window_quiet = true;
        m->window_noise = m->noise;
    } else {
        m->window_quiet = false;
    }
    if (trace)
        fprintf(stderr, "%10.3f ms %s %s len %u id %u%s truth %.3f\n", (double)f->t_first_ns / 1e6,
                f->is_request ? "REQ" : "ans", f->crc_ok ? "ok " : "BAD", f->len, f->adu[0],
                f->is_request ? "" : "", f->is_request ? 0.0 : (double)m->ring[f->t_first_ns % RING].truth / 1e6);
    rtu_pairer_frame(m->p, f, m->noise);
    while (rtu_pairer_next(m->p, &ev) == 1)
        judge(m, &ev);
    m->frames++;
}

/* Everything the slaves send before t_us goes on the line, in time order. */
static void flush_until(model_t *m, uint64_t t_us)
{
    for (;;) {
        unsigned best = MAXQ;
        for (unsigned i = 0; i < m->nq; i++)
            if (m->q[i].t_us < t_us && (best == MAXQ || m->q[i].t_us < m->q[best].t_us))
                best = i;
        if (best == MAXQ)
            return;
        sched_t s = m->q[best];
        m->q[best] = m->q[--m->nq];
        rtu_frame_t f;
        memset(&f, 0, offsetof(rtu_frame_t, adu) + sizeof f.adu);
        memcpy(f.adu, s.adu, s.len);
        f.len = s.len;
        f.crc_ok = s.crc_ok;
        f.is_request = 0;
        /* a stamp that names the frame: microseconds, and a slot of the ring in ns */
        unsigned slot = (unsigned)(m->seq++ % RING);
        f.t_first_ns = s.t_us * US + slot;
        f.t_last_ns = f.t_first_ns + (1000ull + 90ull * s.len) * US / 1000;
        m->ring[slot].t_first_ns = f.t_first_ns;
        m->ring[slot].truth = s.truth;
        m->ring[slot].hash = fnv(f.adu, f.len);
        m->ring[slot].len = f.len;
        memcpy(m->ring[slot].truth_req, s.truth_req, 8);
        tap(m, &f);
    }
}

static void schedule(model_t *m, uint64_t t_us, uint64_t truth, const uint8_t *req, const uint8_t *adu,
                     uint16_t len, bool crc_ok)
{
    /* The bound (pair.c's W): nothing for a request goes out later than bound x
     * timeout after its last byte; a slave this late drops it (1 us of margin
     * for the stamps' ring slot). */
    if (m->nq == MAXQ || t_us * US + US > truth + m->timeout_us * m->bound_tenths / 10 * US)
        return;   /* a slave this far behind: its answer is lost */
    sched_t *s = &m->q[m->nq++];
    s->t_us = t_us;
    s->truth = truth;
    memcpy(s->truth_req, req, 8);
    memcpy(s->adu, adu, len);
    s->len = len;
    s->crc_ok = crc_ok;
}

/* The slave hears the request (ending at t_last_ns) and queues its answer. */
static void slave_hears(model_t *m, const poll_t *pl, const uint8_t *req, uint64_t t_last_ns)
{
    uint64_t *x = &m->x;
    if (hit(x, m->deaf_rate))
        return;
    uint64_t t = t_last_ns / US;
    if (m->last_start_us[pl->slave] > t)
        return;   /* one request queued already: its buffer is full, this one is lost */
    uint64_t start = t > m->busy_until_us[pl->slave] ? t : m->busy_until_us[pl->slave];
    m->last_start_us[pl->slave] = start;
    bool late = hit(x, m->late_rate);
    uint64_t delay = late ? between(x, m->late_lo_us, m->late_hi_us) : between(x, 500, 5000);
    uint64_t at = start + delay;
    uint8_t a[RTU_MAX_ADU] = { req[0], pl->fc, (uint8_t)(2 * pl->qty) };
    m->regs_version++;
    for (unsigned i = 0; i < pl->qty; i++) {
        uint16_t v = m->equal_values ? 0 : (uint16_t)(pl->addr + i + 7u * m->regs_version);
        a[3 + 2 * i] = (uint8_t)(v >> 8);
        a[4 + 2 * i] = (uint8_t)v;
    }
    uint16_t n = (uint16_t)(3 + 2 * pl->qty);
    if (start == t && !late && hit(x, m->foreign_rate))
        a[0] = (uint8_t)(a[0] % 3 + 1);   /* another slave's id, in its own wait */
    crc_put(a, n);
    bool good = !hit(x, m->crc_rate);
    uint16_t dur = (uint16_t)(1000 + 90 * (n + 2)) / 1000 + 1;
    m->busy_until_us[pl->slave] = at + dur;
    schedule(m, at, t_last_ns, req, a, (uint16_t)(n + 2), good);
    if (hit(x, m->double_rate)) {
        uint64_t again = at + dur + between(x, 1000, m->double_gap_hi_us);
        schedule(m, again, t_last_ns, req, a, (uint16_t)(n + 2), good);
    }
}

/* One request on the line; returns when the master sends its next. */
static void master_asks(model_t *m, const poll_t *pl, unsigned *tries_left)
{
    uint8_t req[8] = { pl->slave, pl->fc, (uint8_t)(pl->addr >> 8), (uint8_t)pl->addr, 0, (uint8_t)pl->qty };
    crc_put(req, 6);
    flush_until(m, m->now_us);
    rtu_frame_t f;
    memset(&f, 0, offsetof(rtu_frame_t, adu) + sizeof f.adu);
    memcpy(f.adu, req, 8);
    f.len = 8;
    f.crc_ok = 1;
    f.is_request = 1;
    f.t_first_ns = m->now_us * US;
    f.t_last_ns = f.t_first_ns + 1700 * US;
    tap(m, &f);
    slave_hears(m, pl, req, f.t_last_ns);
    if (hit(&m->x, m->noise_rate))
        m->noise += between(&m->x, 1, 6);   /* bytes the framer skipped, somewhere in the wait */
    uint64_t sent = f.t_last_ns / US, deadline = sent + m->timeout_us;
    /* libmodbus takes the first CRC-good frame of the slave, function and byte count asked */
    uint64_t taken = 0;
    for (unsigned i = 0; i < m->nq; i++) {
        const sched_t *s = &m->q[i];
        if (s->t_us > sent && s->t_us <= deadline && s->crc_ok && (!taken || s->t_us < taken) &&
            rtu_answer_matches(req, 8, s->adu, s->len))
            taken = s->t_us;
    }
    if (taken) {
        m->taken_by_master++;
        *tries_left = 0;
        m->now_us = taken + 3 + m->gap_ok_us;
    } else {
        m->now_us = deadline + m->gap_to_us;
        if (*tries_left)
            (*tries_left)--;
    }
}

static void explore_one(uint64_t seed, uint64_t frames, totals_t *tot)
{
    model_t *m = calloc(1, sizeof *m);
    assert_non_null(m);
    draw(m, seed);
    m->p = rtu_pairer_new(20 * MS);
    assert_non_null(m->p);
    rtu_pairer_set_late_factor(m->p, late_factor);
    m->now_us = 1000;
    unsigned at = 0;
    while (m->frames < frames) {
        const poll_t *pl = &m->polls[hit(&m->x, 0.1) ? rng(&m->x) % m->npolls : at++ % m->npolls];
        unsigned tries = m->retries + 1;
        while (tries) {
            unsigned before = tries;
            master_asks(m, pl, &tries);
            if (tries == before)   /* answered, or out of retries */
                break;
            if (tries == 0)
                break;
        }
    }
    flush_until(m, UINT64_MAX);
    rtu_pair_event_t ev;
    rtu_pairer_idle(m->p, (m->now_us + 10000000) * US, m->noise);
    while (rtu_pairer_next(m->p, &ev) == 1)
        judge(m, &ev);
    rtu_pair_stats_t st;
    rtu_pairer_get_stats(m->p, &st);
    if (m->heard_timeout_ns != st.heard_timeout_ns && !m->wrong) {
        snprintf(m->first_wrong, sizeof m->first_wrong, "heard timeout %" PRIu64 " ns, pair.c says %" PRIu64,
                 m->heard_timeout_ns, st.heard_timeout_ns);
        m->wrong++;
    }
    tot->runs++;
    tot->frames += m->frames;
    tot->answered += m->answered;
    tot->doubtful += m->doubtful;
    tot->late += st.late;
    tot->owed += st.owed;
    tot->same_question += m->same_question;
    tot->used_by[m->equal_values] += m->answered;
    tot->doubtful_by[m->equal_values] += m->doubtful;
    tot->equal_same_question += m->equal_same_question;
    tot->wrong += m->wrong;
    tot->late_used += m->late_used;
    tot->not_taken += m->answered_not_taken;
    if (m->wrong && !tot->first_bad_seed) {
        tot->first_bad_seed = seed;
        snprintf(tot->first_bad, sizeof tot->first_bad, "%s", m->first_wrong);
    }
    rtu_pairer_free(m->p);
    free(m);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* Seeds the search once found wrong, replayed on every run (a run is a pure
 * function of its seed). */
static const uint64_t regression_seeds[] = {
    1,        /* f647883: a debt forgiven after 4x the heard timeout (8,343 wrong of 10^6 frames) */
    1026,     /* a copy of an answered request's answer, in a later wait of its shape */
    500012,   /* a copy used for the same question while that request's own answer was late */
    1500015, 2800006,
    /* an answer exempted from debts as equal to a frame merely heard (not used) in the
     * wait of a request of the same bytes */
    14, 2000005, 3000005, 4000014, 5000002, 6000003, 7000008, 8000010, 9000031, 10000008,
    11000003, 12000007, 13000011, 14000010, 15000012, 16000013, 17000012, 18000007, 19000007,
    20000001, 21000017, 22000001, 23000005, 24000002, 25000001, 26000007, 27000004, 28000003,
    29000002, 38, 1000007, 1000022, 5000004, 8000047, 16000014, 22000011,
    /* ... or equal to an answer used that way, past W of a true answer (a vouch extended
     * by a chain of equal frames) */
    4000046, 23000036, 27000015, 33000008,
};

#define PER_RUN 20000

static void test_regressions(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof regression_seeds / sizeof regression_seeds[0]; i++) {
        if (!regression_seeds[i])
            continue;
        totals_t tot = { 0 };
        explore_one(regression_seeds[i], PER_RUN, &tot);
        if (tot.wrong)
            fail_msg("regression seed %" PRIu64 ": %s", regression_seeds[i], tot.first_bad);
    }
}

static void test_explorer(void **state)
{
    (void)state;
    uint64_t total = env_u64("RTUGW_PAIR_FRAMES", 100000);
    uint64_t one = env_u64("RTUGW_SEED", 0);
    bound_tenths = (unsigned)env_u64("RTUGW_PAIR_LATE_BOUND", 0);
    uint64_t seed0 = one ? one : env_u64("RTUGW_SEED0", (uint64_t)time(NULL) * 1000003u);
    totals_t tot = { 0 };
    if (bound_tenths)
        print_message("tap explorer: seeds from %" PRIu64 " (replay one with RTUGW_SEED=N), slaves late by up "
                      "to %u.%ux the master's timeout, pair.c's factor %u\n", seed0, bound_tenths / 10,
                      bound_tenths % 10, late_factor);
    else
        print_message("tap explorer: seeds from %" PRIu64 " (replay one with RTUGW_SEED=N), slaves late by up "
                      "to 1.5x or 3.9x the master's timeout (drawn per seed), pair.c's factor %u\n", seed0,
                      late_factor);
    for (uint64_t i = 0; tot.frames < total; i++) {
        explore_one(seed0 + i, PER_RUN < total - tot.frames ? PER_RUN : total - tot.frames, &tot);
        if (one)
            break;
    }
    uint64_t pairs = tot.answered + tot.doubtful;
    print_message("tap explorer: %" PRIu64 " runs, %" PRIu64 " frames, %" PRIu64 " answers used (%.1f%%), %" PRIu64
                  " doubtful (%.1f%%; %" PRIu64 " later than the heard timeout, %" PRIu64 " another owed request "
                  "could own), %" PRIu64 " used for a repeat of their question, %" PRIu64 " value-equal to an "
                  "answer to their question, %" PRIu64 " used past the "
                  "master's own timeout (not heard), %" PRIu64 " wrong\n",
                  tot.runs, tot.frames, tot.answered, pairs ? 100.0 * (double)tot.answered / (double)pairs : 0.0,
                  tot.doubtful, pairs ? 100.0 * (double)tot.doubtful / (double)pairs : 0.0, tot.late, tot.owed,
                  tot.same_question, tot.equal_same_question, tot.not_taken, tot.wrong);
    for (int e = 0; e < 2; e++) {
        uint64_t n = tot.used_by[e] + tot.doubtful_by[e];
        print_message("tap explorer: %s register values: %" PRIu64 " used (%.1f%%), %" PRIu64 " doubtful\n",
                      e ? "equal" : "unique", tot.used_by[e], n ? 100.0 * (double)tot.used_by[e] / (double)n : 0.0,
                      tot.doubtful_by[e]);
    }
    if (tot.wrong)
        fail_msg("seed %" PRIu64 " (RTUGW_SEED=%" PRIu64 "): %s", tot.first_bad_seed, tot.first_bad_seed,
                 tot.first_bad);
}

int main(void)
{
    trace = (int)env_u64("RTUGW_TRACE", 0);
    late_factor = (unsigned)env_u64("RTUGW_PAIR_LATE_FACTOR", 4);   /* regressions too */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regressions),
        cmocka_unit_test(test_explorer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
