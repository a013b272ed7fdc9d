/*
 * bench/bench_crossover.c -- `rtugw bench crossover`: where the native parser
 * pays off, and whether the router found it.
 *
 * Three forms of the same subject: fallback only, native only, and routed
 * (the live router of routing/, exploring at its configured rate). Tiers R1,
 * R8, R125 (read-holding-registers responses of 1, 8, 125 registers: 7, 21,
 * 255 bytes); --sweep adds every frame length from 5 to 256 (register frames
 * at odd lengths 7..255, read-coils frames at even lengths 6..254, an
 * exception response at 5, a function without a decoder (0x41) at 256).
 *
 * Method (docs/crossover.md has the long form):
 *   1. Equivalence gate before any timing: per tier (and per sweep length)
 *      16 valid and 8 mutated frames, every form's envelope compared with
 *      rtu_decode_reference's by memcmp, in the direct layer and through the
 *      actor pool. The routed form is checked on the live router and on one
 *      that explores at epsilon 1, so both arms pass through router_decode.
 *      A mismatch prints the frame and the differing envelope bytes and
 *      exits 1; nothing is timed.
 *   2. Direct layer: on one thread, a batch of frames (16 distinct frames
 *      cycled) per form, timed as a whole; ns per frame = batch time / frames
 *      (exploration pulls included).
 *   3. Actor layer: a driver actor keeps `concurrency` tasks in flight to a
 *      pool of `concurrency` parse actors (1, 2, 4); a task carries one frame
 *      and the send time, the reply carries it back; per-task end-to-end time
 *      = reply handled - send. Per round and form: the median over the
 *      batch's tasks.
 *   4. Every round runs every form once per row, in an order that rotates
 *      each round; warm-up rounds are dropped. A pair of forms is compared
 *      on the per-round paired difference a - b: "faster" when its p75 < 0,
 *      "slower" when its p25 > 0, else "undecided". No tolerance band.
 *
 * Test hook: RTUGW_CROSSOVER_BREAK=fallback|native|routed flips one byte of
 * that form's envelope for the first gate input of R1 (direct layer; with
 * the suffix @actors, in the actor layer's gate), so a test can prove that
 * the gate stops the run.
 */
#include "actor/actor.h"
#include "bench/bench.h"
#include "bench/internal.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <errno.h>
#include <getopt.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RTUGW_BUILD_CFLAGS
#define RTUGW_BUILD_CFLAGS "unknown (see config.log)"
#endif

#define DISTINCT 16
#define MUTANTS 8
#define GATE_INPUTS (DISTINCT + MUTANTS)
#define GATE_MIN 15
#define MAX_CONC 4
#define SWEEP_LO 5
#define SWEEP_HI 256

enum { F_FALLBACK, F_NATIVE, F_ROUTED, FORMS };
static const char *const form_names[FORMS] = { "fallback", "native", "routed" };

/* pairs compared: a against b */
enum { P_NATIVE_FALLBACK, P_ROUTED_FALLBACK, P_ROUTED_NATIVE, PAIRS };
static const int pair_a[PAIRS] = { F_NATIVE, F_ROUTED, F_ROUTED };
static const int pair_b[PAIRS] = { F_FALLBACK, F_FALLBACK, F_NATIVE };

enum { L_DIRECT, L_ACTORS };
static const char *const layer_names[] = { "direct", "actors" };

static const unsigned tier_bytes[] = { 7, 21, 255 };
static const char *const tier_names[] = { "R1", "R8", "R125" };
#define TIERS 3
static const unsigned concurrencies[] = { 1, 2, 4 };
#define CONCS 3

typedef struct frame_set {
    uint8_t adu[DISTINCT][RTU_MAX_ADU];
    size_t len;
    const char *shape;
} frame_set_t;

typedef struct gate_input {
    uint8_t adu[RTU_MAX_ADU];
    size_t len;
    const char *what;
} gate_input_t;

typedef struct options {
    unsigned rounds, warmup, frames, tasks;
    double epsilon;
    int sweep, callgrind, json_stdout, no_progress;
    const char *json_file, *out_file, *svg_file;
    const char *only;
    unsigned only_bytes;
    unsigned long iterations;
} options_t;

typedef struct pair_result {
    bench_spread_t d;   /* paired difference a - b, ns */
    const char *verdict;
} pair_result_t;

typedef struct row {
    const char *tier;   /* "R1".. or NULL in the sweep */
    unsigned bytes;
    const char *shape;
    int layer;
    unsigned conc;
    const frame_set_t *set;
    double *ns[FORMS];  /* per measured round: direct ns/frame, actors median ns/task */
    double *thr[FORMS]; /* actors: round wall time / tasks */
    double *bound;      /* direct: routed / (faster + eps/2 (slower - faster)) */
    double *dispatch[FORMS]; /* actors: per round, this row - the direct row */
    uint64_t pulls[ROUTER_ARM_COUNT]; /* routed pulls in the measured window */
    bench_spread_t s[FORMS], st[FORMS], sb, sd[FORMS];
    pair_result_t pr[PAIRS];
} row_t;

typedef struct routing_entry {
    const char *tier;
    unsigned bytes;     /* tier length, or 0 for a sweep bucket */
    int layer;
    unsigned lo, hi;
    uint64_t pulls[ROUTER_ARM_COUNT];
    double oracle_ns[ROUTER_ARM_COUNT];
    char router_verdict[128];
    const char *converged_arm; /* NULL unless converged */
    const char *paired_winner; /* native / fallback / undecided */
    int agrees;                /* 1, 0, -1 = not applicable */
    int default_not_decision;
    const char *oracle_arm;
    double regret_window, regret_router;
    double minority_share;
} routing_entry_t;

enum { K_FAV, K_UNFAV, K_NOWIN };
typedef struct finding {
    int kind;
    char text[320];
} finding_t;

typedef struct callgrind_row {
    unsigned bytes;
    double per[FORMS];
} callgrind_row_t;

/* ---- frames ------------------------------------------------------------ */

static void put_crc(uint8_t *a, size_t len)
{
    uint16_t crc = rtu_crc16_reference(a, len - 2);
    a[len - 2] = (uint8_t)crc;
    a[len - 1] = (uint8_t)(crc >> 8);
}

static const char *shape_of(size_t len)
{
    if (len == 5)
        return "exception (fc 0x83)";
    if (len == 256)
        return "no decoder (fc 0x41, raw)";
    if (len % 2)
        return "read holding registers (fc 3)";
    return "read coils (fc 1)";
}

/* 16 valid responses of exactly len bytes, distinct slaves and data. */
static void make_frames(frame_set_t *set, size_t len, uint64_t seed)
{
    set->len = len;
    set->shape = shape_of(len);
    seed |= 1;
    for (unsigned f = 0; f < DISTINCT; f++) {
        uint8_t *a = set->adu[f];
        memset(a, 0, RTU_MAX_ADU);
        a[0] = (uint8_t)(1 + f);
        if (len == 5) {
            a[1] = 0x83;
            a[2] = (uint8_t)(1 + f % 4);
        } else if (len == 256) {
            a[1] = 0x41;
            for (size_t i = 2; i < len - 2; i++)
                a[i] = (uint8_t)bench_xorshift(&seed);
        } else {
            a[1] = len % 2 ? 3 : 1;
            a[2] = (uint8_t)(len - 5);
            for (size_t i = 3; i < len - 2; i++)
                a[i] = (uint8_t)bench_xorshift(&seed);
        }
        put_crc(a, len);
    }
}

/* The 16 valid frames and 8 mutants (bad CRC, function 0, one byte short,
 * exception code on a long frame): distinct inputs, valid and invalid. */
static unsigned make_gate_inputs(const frame_set_t *set, gate_input_t *in)
{
    size_t len = set->len;
    unsigned n = 0;
    for (unsigned f = 0; f < DISTINCT; f++, n++) {
        memcpy(in[n].adu, set->adu[f], RTU_MAX_ADU);
        in[n].len = len;
        in[n].what = "valid";
    }
    for (unsigned m = 0; m < MUTANTS; m++, n++) {
        gate_input_t *g = &in[n];
        memcpy(g->adu, set->adu[m], RTU_MAX_ADU);
        g->len = len;
        switch (m % 4) {
        case 0:
            g->adu[len - 3] ^= 0x5A;
            g->what = "bad CRC";
            break;
        case 1:
            g->adu[1] = 0;
            put_crc(g->adu, len);
            g->what = "function 0";
            break;
        case 2:
            g->len = len - 1;
            put_crc(g->adu, g->len);
            g->what = "one byte short";
            break;
        default:
            g->adu[1] = len == 5 ? 3 : 0x83;
            put_crc(g->adu, len);
            g->what = "wrong length for its function";
            break;
        }
    }
    return n;
}

static unsigned count_distinct(const gate_input_t *in, unsigned n)
{
    unsigned d = 0;
    for (unsigned i = 0; i < n; i++) {
        int dup = 0;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = in[i].len == in[j].len && memcmp(in[i].adu, in[j].adu, in[i].len) == 0;
        d += !dup;
    }
    return d;
}

/* ---- decode by form -------------------------------------------------------- */

static rtu_status_t decode_form(int form, router_thread_t *rt, const uint8_t *adu, size_t len,
                                rtu_envelope_t *out)
{
    switch (form) {
    case F_FALLBACK: return rtu_decode_fallback(adu, len, out);
    case F_NATIVE: return rtu_decode_native(adu, len, out);
    default: return router_decode(rt, adu, len, out);
    }
}

static unsigned run_arm(rtu_decode_fn fn, const frame_set_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        fn(set->adu[i % DISTINCT], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

static unsigned run_routed(router_thread_t *t, const frame_set_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        router_decode(t, set->adu[i % DISTINCT], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

static unsigned run_batch(int form, router_thread_t *rt, const frame_set_t *set, unsigned n)
{
    if (form == F_FALLBACK)
        return run_arm(rtu_decode_fallback, set, n);
    if (form == F_NATIVE)
        return run_arm(rtu_decode_native, set, n);
    return run_routed(rt, set, n);
}

/* ---- the gate ---------------------------------------------------------------- */

static int break_form = -1;  /* RTUGW_CROSSOVER_BREAK=FORM[@actors] */
static int break_actors;     /* ... in the actor layer's gate instead of the direct one */

static void hex_line(FILE *to, const uint8_t *a, size_t len)
{
    for (size_t i = 0; i < len; i++)
        fprintf(to, "%s%02x", i ? " " : "", a[i]);
    fputc('\n', to);
}

static void gate_report_failure(const char *where, const char *form, unsigned index,
                                const gate_input_t *in, const rtu_envelope_t *want,
                                const rtu_envelope_t *got)
{
    const uint8_t *w = (const uint8_t *)want, *g = (const uint8_t *)got;
    unsigned ndiff = 0, shown = 0;
    for (size_t i = 0; i < sizeof *want; i++)
        ndiff += w[i] != g[i];
    fprintf(stderr,
            "rtugw bench crossover: equivalence gate FAILED: form %s, %s, input %u (%s, %zu bytes)\n"
            "  frame: ",
            form, where, index, in->what, in->len);
    hex_line(stderr, in->adu, in->len);
    fprintf(stderr, "  envelopes differ in %u of %zu bytes (offset: reference / %s):\n", ndiff,
            sizeof *want, form);
    for (size_t i = 0; i < sizeof *want && shown < 64; i++)
        if (w[i] != g[i]) {
            fprintf(stderr, "    +%zu: %02x / %02x\n", i, w[i], g[i]);
            shown++;
        }
    if (shown < ndiff)
        fprintf(stderr, "    ... %u more\n", ndiff - shown);
    fprintf(stderr, "rtugw bench crossover: the gate stops the run; no timing is reported.\n");
}

/* Direct layer: every form (the routed one on the live handle, and 4 times on
 * a handle exploring at epsilon 1) against the reference. */
static int gate_direct(const char *where, const gate_input_t *in, unsigned n,
                       router_thread_t *live, router_thread_t *explore, int apply_break)
{
    for (unsigned i = 0; i < n; i++) {
        rtu_envelope_t want, got;
        rtu_decode_reference(in[i].adu, in[i].len, &want);
        for (int f = 0; f < FORMS; f++) {
            unsigned reps = f == F_ROUTED ? 5 : 1;
            for (unsigned k = 0; k < reps; k++) {
                decode_form(f, k == 0 ? live : explore, in[i].adu, in[i].len, &got);
                if (apply_break && !break_actors && i == 0 && f == break_form)
                    ((uint8_t *)&got)[offsetof(rtu_envelope_t, data)] ^= 0x01;
                if (memcmp(&want, &got, sizeof want) != 0) {
                    char w[96];
                    snprintf(w, sizeof w, "%s, direct layer%s", where,
                             k ? " (epsilon-1 router)" : "");
                    gate_report_failure(w, form_names[f], i, &in[i], &want, &got);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* ---- the actor layer ------------------------------------------------------------ */

enum { M_START = 1, M_TASK, M_REPLY };

typedef struct task_hdr {
    uint64_t t_send;
    uint32_t seq;
    uint16_t len;
    uint8_t form;
    uint8_t check;
} task_hdr_t;

typedef struct reply_msg {
    uint64_t t_send;
    uint32_t seq;
    uint32_t actor;
} reply_msg_t;

typedef struct driver_state driver_state_t;

typedef struct parse_state {
    driver_state_t *d;
    router_thread_t *rt;
    actor_ref_t driver;
    unsigned index;
    unsigned sink;
} parse_state_t;

struct driver_state {
    actor_ref_t parse[MAX_CONC];
    /* one batch, set by the main thread before M_START */
    int form, check;
    unsigned conc, tasks;
    const frame_set_t *set;
    const gate_input_t *inputs;
    rtu_envelope_t *check_out;
    uint64_t *lat;
    /* progress */
    unsigned issued, done;
    uint64_t t_start, t_end;
    int failed;
    sem_t fin;
};

typedef struct actor_layer {
    actor_system_t *sys;
    actor_ref_t driver;
    driver_state_t d;
    parse_state_t ps[MAX_CONC];
    router_t *router;
    int sem_ok;
} actor_layer_t;

static void parse_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                     const void *data, size_t len)
{
    parse_state_t *p = state;
    task_hdr_t h;
    rtu_envelope_t env;
    (void)self;
    if (type != M_TASK || len < sizeof h)
        return;
    memcpy(&h, data, sizeof h);
    const uint8_t *adu = (const uint8_t *)data + sizeof h;
    rtu_envelope_t *out = h.check ? &p->d->check_out[h.seq] : &env;
    decode_form(h.form, p->rt, adu, h.len, out);
    p->sink += out->status + out->data.regs[0];
    reply_msg_t r = { .t_send = h.t_send, .seq = h.seq, .actor = p->index };
    actor_send(sys, p->driver, M_REPLY, &r, sizeof r);
}

static void driver_finish(driver_state_t *d)
{
    d->t_end = bench_now_ns();
    sem_post(&d->fin);
}

static void driver_issue(actor_system_t *sys, driver_state_t *d, unsigned actor)
{
    struct {
        task_hdr_t h;
        uint8_t adu[RTU_MAX_ADU];
    } m;
    const uint8_t *src;
    size_t len;
    if (d->check) {
        src = d->inputs[d->issued].adu;
        len = d->inputs[d->issued].len;
    } else {
        src = d->set->adu[d->issued % DISTINCT];
        len = d->set->len;
    }
    m.h = (task_hdr_t){ .seq = d->issued, .len = (uint16_t)len, .form = (uint8_t)d->form,
                        .check = (uint8_t)d->check };
    memcpy(m.adu, src, len);
    d->issued++;
    m.h.t_send = bench_now_ns();
    if (actor_send(sys, d->parse[actor], M_TASK, &m, sizeof m.h + len) != 0) {
        d->failed = 1;
        d->issued--;
        d->tasks = d->issued; /* stop issuing */
        if (d->done == d->issued)
            driver_finish(d);
    }
}

static void driver_fn(actor_system_t *sys, actor_ref_t self, void *state, uint32_t type,
                      const void *data, size_t len)
{
    driver_state_t *d = state;
    (void)self;
    if (type == M_START) {
        d->t_start = bench_now_ns();
        if (d->tasks == 0) {
            driver_finish(d);
            return;
        }
        for (unsigned i = 0; i < d->conc && d->issued < d->tasks; i++)
            driver_issue(sys, d, i);
    } else if (type == M_REPLY && len == sizeof(reply_msg_t)) {
        reply_msg_t r;
        uint64_t now = bench_now_ns();
        memcpy(&r, data, sizeof r);
        d->lat[d->done++] = now - r.t_send;
        if (d->issued < d->tasks)
            driver_issue(sys, d, r.actor);
        else if (d->done == d->tasks)
            driver_finish(d);
    }
}

static int actor_layer_start(actor_layer_t *L, const router_config_t *cfg, unsigned max_tasks)
{
    memset(L, 0, sizeof *L);
    if (sem_init(&L->d.fin, 0, 0) != 0)
        return -1;
    L->sem_ok = 1;
    L->d.lat = calloc(max_tasks > GATE_INPUTS ? max_tasks : GATE_INPUTS, sizeof *L->d.lat);
    if (!L->d.lat || router_new(cfg, &L->router) != 0)
        return -1;
    actor_config_t ac = { 0 };
    if (actor_system_create(&L->sys, &ac) != 0)
        return -1;
    if (actor_spawn(L->sys, driver_fn, &L->d, &L->driver) != 0)
        return -1;
    for (unsigned i = 0; i < MAX_CONC; i++) {
        L->ps[i] = (parse_state_t){ .d = &L->d, .driver = L->driver, .index = i };
        /* One router handle per parse actor: an actor never runs on two
         * threads at once, and its mailbox orders one run after the last. */
        L->ps[i].rt = router_thread_new(L->router);
        if (!L->ps[i].rt || actor_spawn(L->sys, parse_fn, &L->ps[i], &L->d.parse[i]) != 0)
            return -1;
    }
    return 0;
}

static void actor_layer_stop(actor_layer_t *L)
{
    if (L->sys) {
        actor_system_shutdown(L->sys, 2000000000ull);
        actor_system_destroy(L->sys);
    }
    router_free(L->router);
    free(L->d.lat);
    if (L->sem_ok)
        sem_destroy(&L->d.fin);
}

/* One batch through the pool; returns 0 or -1. */
static int actor_batch(actor_layer_t *L, int form, unsigned conc, unsigned tasks,
                       const frame_set_t *set, const gate_input_t *inputs, rtu_envelope_t *check)
{
    driver_state_t *d = &L->d;
    d->form = form;
    d->conc = conc;
    d->tasks = tasks;
    d->set = set;
    d->inputs = inputs;
    d->check = check != NULL;
    d->check_out = check;
    d->issued = d->done = 0;
    d->failed = 0;
    if (actor_send(L->sys, L->driver, M_START, NULL, 0) != 0)
        return -1;
    while (sem_wait(&d->fin) != 0 && errno == EINTR)
        ;
    return d->failed ? -1 : 0;
}

static int gate_actors(actor_layer_t *L, const char *where, const gate_input_t *in, unsigned n,
                       int apply_break)
{
    rtu_envelope_t got[GATE_INPUTS], want;
    for (int f = 0; f < FORMS; f++) {
        if (actor_batch(L, f, MAX_CONC, n, NULL, in, got) != 0) {
            fprintf(stderr, "rtugw bench crossover: the actor pool refused a gate task\n");
            return -1;
        }
        for (unsigned i = 0; i < n; i++) {
            rtu_decode_reference(in[i].adu, in[i].len, &want);
            if (apply_break && break_actors && i == 0 && f == break_form)
                ((uint8_t *)&got[i])[offsetof(rtu_envelope_t, data)] ^= 0x01;
            if (memcmp(&want, &got[i], sizeof want) != 0) {
                char w[96];
                snprintf(w, sizeof w, "%s, actor layer", where);
                gate_report_failure(w, form_names[f], i, &in[i], &want, &got[i]);
                return -1;
            }
        }
    }
    return 0;
}

/* ---- statistics ---------------------------------------------------------------- */

static double median_u64(uint64_t *v, size_t n)
{
    double *tmp = malloc(n * sizeof *tmp);
    bench_spread_t s;
    if (!tmp)
        return 0;
    for (size_t i = 0; i < n; i++)
        tmp[i] = (double)v[i];
    bench_spread(tmp, n, &s);
    free(tmp);
    return s.median;
}

static void spread_of(const double *v, size_t n, bench_spread_t *out)
{
    double *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) {
        *out = (bench_spread_t){ 0 };
        return;
    }
    memcpy(tmp, v, n * sizeof *tmp);
    bench_spread(tmp, n, out);
    free(tmp);
}

static const char *verdict_of(const bench_spread_t *d)
{
    if (d->n == 0)
        return "undecided";
    if (d->p75 < 0)
        return "faster";
    if (d->p25 > 0)
        return "slower";
    return "undecided";
}

static void analyse_row(row_t *r, size_t n)
{
    double *diff = malloc((n ? n : 1) * sizeof *diff);
    for (int f = 0; f < FORMS; f++) {
        spread_of(r->ns[f], n, &r->s[f]);
        if (r->thr[f])
            spread_of(r->thr[f], n, &r->st[f]);
        if (r->dispatch[f])
            spread_of(r->dispatch[f], n, &r->sd[f]);
    }
    if (r->bound)
        spread_of(r->bound, n, &r->sb);
    for (int p = 0; p < PAIRS; p++) {
        if (!diff)
            break;
        for (size_t i = 0; i < n; i++)
            diff[i] = r->ns[pair_a[p]][i] - r->ns[pair_b[p]][i];
        bench_spread(diff, n, &r->pr[p].d);
        r->pr[p].verdict = verdict_of(&r->pr[p].d);
    }
    free(diff);
}

static const char *faster_form(const row_t *r)
{
    const char *v = r->pr[P_NATIVE_FALLBACK].verdict;
    return strcmp(v, "faster") == 0 ? "native" : strcmp(v, "slower") == 0 ? "fallback" : "undecided";
}

static int row_alloc(row_t *r, size_t n)
{
    for (int f = 0; f < FORMS; f++) {
        r->ns[f] = calloc(n ? n : 1, sizeof(double));
        if (!r->ns[f])
            return -1;
        if (r->layer == L_ACTORS) {
            r->thr[f] = calloc(n ? n : 1, sizeof(double));
            r->dispatch[f] = calloc(n ? n : 1, sizeof(double));
            if (!r->thr[f] || !r->dispatch[f])
                return -1;
        }
    }
    if (r->layer == L_DIRECT && !(r->bound = calloc(n ? n : 1, sizeof(double))))
        return -1;
    return 0;
}

static void row_free(row_t *r)
{
    for (int f = 0; f < FORMS; f++) {
        free(r->ns[f]);
        free(r->thr[f]);
        free(r->dispatch[f]);
    }
    free(r->bound);
}

/* ---- measurement ------------------------------------------------------------- */

static volatile unsigned sink_all;

static void progress(const options_t *opt, const char *phase, unsigned round, unsigned total)
{
    if (opt->no_progress)
        return;
    fprintf(stderr, "\rrtugw bench crossover: %s, round %u/%u%s", phase, round, total,
            round == total ? "\n" : "   ");
    fflush(stderr);
}

static uint64_t bucket_pulls(router_t *r, unsigned bucket, int arm)
{
    router_report_t rep;
    if (router_report(r, &rep) != 0)
        return 0;
    return rep.bucket[bucket].pulls[arm];
}

/* One round of a direct row: every form once, order rotated. */
static void direct_round(row_t *row, router_t *router, router_thread_t *rt, const options_t *opt,
                         unsigned round, int measured, size_t m, double eps)
{
    double x[FORMS];
    unsigned bucket = router_bucket_of(router, row->bytes);
    for (unsigned j = 0; j < FORMS; j++) {
        int f = (int)((j + round + row->bytes) % FORMS);
        uint64_t p0[2] = { 0, 0 };
        if (f == F_ROUTED) {
            p0[0] = bucket_pulls(router, bucket, ROUTER_ARM_NATIVE);
            p0[1] = bucket_pulls(router, bucket, ROUTER_ARM_FALLBACK);
        }
        uint64_t t0 = bench_now_ns();
        sink_all += run_batch(f, rt, row->set, opt->frames);
        x[f] = (double)(bench_now_ns() - t0) / opt->frames;
        if (f == F_ROUTED && measured) {
            row->pulls[ROUTER_ARM_NATIVE] += bucket_pulls(router, bucket, ROUTER_ARM_NATIVE) - p0[0];
            row->pulls[ROUTER_ARM_FALLBACK] +=
                bucket_pulls(router, bucket, ROUTER_ARM_FALLBACK) - p0[1];
        }
    }
    if (!measured)
        return;
    for (int f = 0; f < FORMS; f++)
        row->ns[f][m] = x[f];
    double lo = x[F_NATIVE] < x[F_FALLBACK] ? x[F_NATIVE] : x[F_FALLBACK];
    double hi = x[F_NATIVE] < x[F_FALLBACK] ? x[F_FALLBACK] : x[F_NATIVE];
    row->bound[m] = x[F_ROUTED] / (lo + eps / 2.0 * (hi - lo));
}

static int actor_round(row_t *row, actor_layer_t *L, const options_t *opt, unsigned round,
                       int measured, size_t m)
{
    unsigned bucket = router_bucket_of(L->router, row->bytes);
    for (unsigned j = 0; j < FORMS; j++) {
        int f = (int)((j + round + row->conc) % FORMS);
        uint64_t p0[2] = { 0, 0 };
        if (f == F_ROUTED) {
            p0[0] = bucket_pulls(L->router, bucket, ROUTER_ARM_NATIVE);
            p0[1] = bucket_pulls(L->router, bucket, ROUTER_ARM_FALLBACK);
        }
        if (actor_batch(L, f, row->conc, opt->tasks, row->set, NULL, NULL) != 0) {
            fprintf(stderr, "rtugw bench crossover: the actor pool refused a task\n");
            return -1;
        }
        if (!measured)
            continue;
        if (f == F_ROUTED) {
            row->pulls[ROUTER_ARM_NATIVE] +=
                bucket_pulls(L->router, bucket, ROUTER_ARM_NATIVE) - p0[0];
            row->pulls[ROUTER_ARM_FALLBACK] +=
                bucket_pulls(L->router, bucket, ROUTER_ARM_FALLBACK) - p0[1];
        }
        row->ns[f][m] = median_u64(L->d.lat, opt->tasks);
        row->thr[f][m] = (double)(L->d.t_end - L->d.t_start) / opt->tasks;
    }
    return 0;
}

/* ---- callgrind ------------------------------------------------------------------ */

static int run_only(const options_t *opt)
{
    frame_set_t *set = malloc(sizeof *set);
    int form = -1;
    for (int f = 0; f < FORMS; f++)
        if (strcmp(opt->only, form_names[f]) == 0)
            form = f;
    if (!set || form < 0 || opt->only_bytes < SWEEP_LO || opt->only_bytes > SWEEP_HI) {
        fprintf(stderr, "rtugw bench crossover: --only needs a form and --bytes 5..256\n");
        free(set);
        return 2;
    }
    make_frames(set, opt->only_bytes, 42);
    router_config_t cfg;
    router_t *r = NULL;
    router_thread_t *t = NULL;
    router_config_default(&cfg);
    cfg.epsilon = opt->epsilon;
    cfg.seed = 1;
    if (router_new(&cfg, &r) != 0 || !(t = router_thread_new(r))) {
        router_free(r);
        free(set);
        return 1;
    }
    unsigned s = 0;
    for (unsigned long done = 0; done < opt->iterations; done += 1000) {
        unsigned long n = opt->iterations - done < 1000 ? opt->iterations - done : 1000;
        s += run_batch(form, t, set, (unsigned)n);
    }
    printf("%u\n", s & 1);
    router_free(r);
    free(set);
    return 0;
}

static long long callgrind_count(const char *self, const char *form, unsigned bytes,
                                 unsigned long iterations, double eps)
{
    char args[200];
    snprintf(args, sizeof args, "crossover --only %s --bytes %u --iterations %lu --epsilon %g",
             form, bytes, iterations, eps);
    return bench_callgrind_collected(self, args);
}

static int run_callgrind(const options_t *opt, callgrind_row_t *out)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const unsigned long small = 2000, large = 22000;
    if (n <= 0)
        return -1;
    self[n] = 0;
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "rtugw bench crossover --callgrind: valgrind not found "
                        "(apt-get install valgrind)\n");
        return -1;
    }
    for (unsigned t = 0; t < TIERS; t++) {
        out[t].bytes = tier_bytes[t];
        for (int f = 0; f < FORMS; f++) {
            if (!opt->no_progress) {
                fprintf(stderr, "\rrtugw bench crossover: callgrind %s %u bytes   ",
                        form_names[f], tier_bytes[t]);
                fflush(stderr);
            }
            long long a = callgrind_count(self, form_names[f], tier_bytes[t], small, opt->epsilon);
            long long b = callgrind_count(self, form_names[f], tier_bytes[t], large, opt->epsilon);
            if (a < 0 || b < 0) {
                fprintf(stderr, "\nrtugw bench crossover --callgrind: valgrind run failed for %s\n",
                        form_names[f]);
                return -1;
            }
            out[t].per[f] = (double)(b - a) / (double)(large - small);
        }
    }
    if (!opt->no_progress)
        fprintf(stderr, "\n");
    return 0;
}

/* ---- environment ------------------------------------------------------------------ */

typedef struct environment {
    char cpu[160];
    char commit[128];
    char date[40];
    char load_start[64], load_end[64];
    char command[1024];
    unsigned workers;
    long cores;
} environment_t;

static void read_trimmed(const char *cmd_or_file, int is_cmd, char *out, size_t cap)
{
    FILE *f = is_cmd ? popen(cmd_or_file, "r") : fopen(cmd_or_file, "r");
    snprintf(out, cap, "unknown");
    if (!f)
        return;
    if (fgets(out, (int)cap, f)) {
        out[strcspn(out, "\n")] = 0;
        if (!out[0])
            snprintf(out, cap, "unknown");
    } else {
        snprintf(out, cap, "unknown");
    }
    if (is_cmd)
        pclose(f);
    else
        fclose(f);
}

static void environment_read(environment_t *e, int argc, char **argv)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(e->cpu, sizeof e->cpu, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c += 1 + (c[1] == ' ');
                c[strcspn(c, "\n")] = 0;
                snprintf(e->cpu, sizeof e->cpu, "%s", c);
                break;
            }
        }
    }
    if (f)
        fclose(f);
    read_trimmed("git rev-parse --short HEAD 2>/dev/null", 1, e->commit, sizeof e->commit);
#ifdef RTUGW_BUILD_SRCDIR
    if (strcmp(e->commit, "unknown") == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null",
                 RTUGW_BUILD_SRCDIR);
        read_trimmed(cmd, 1, e->commit, sizeof e->commit);
        if (strcmp(e->commit, "unknown") != 0)
            strncat(e->commit, " (of the source tree it was built from)",
                    sizeof e->commit - strlen(e->commit) - 1);
    }
#endif
    read_trimmed("/proc/loadavg", 0, e->load_start, sizeof e->load_start);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(e->date, sizeof e->date, "%Y-%m-%d %H:%M UTC", &tm);
    size_t used = (size_t)snprintf(e->command, sizeof e->command, "rtugw bench");
    for (int i = 0; i < argc && used < sizeof e->command; i++)
        used += (size_t)snprintf(e->command + used, sizeof e->command - used, " %s", argv[i]);
    e->cores = sysconf(_SC_NPROCESSORS_ONLN);
}

/* ---- findings, crossover ---------------------------------------------------------- */

typedef struct results {
    options_t opt;
    environment_t env;
    double eps;
    unsigned gate_inputs[TIERS], gate_distinct[TIERS];
    unsigned sweep_gate_lengths, sweep_gate_min_inputs;
    row_t tier_rows[TIERS * (1 + CONCS)];
    unsigned n_tier_rows;
    row_t *sweep;
    unsigned n_sweep;
    routing_entry_t routing[TIERS * 2 + ROUTER_MAX_BUCKETS];
    unsigned n_routing;
    finding_t *findings;
    unsigned n_findings, cap_findings;
    int crossover, crossover_first, crossover_regs;
    const char *crossover_source;
    unsigned undecided[SWEEP_HI + 1];
    unsigned n_undecided;
    callgrind_row_t cg[TIERS];
    int have_cg;
    router_report_t rep_direct, rep_actors, rep_sweep;
    double timer_overhead;
    const char *timer;
} results_t;

static void add_finding(results_t *R, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_finding(results_t *R, int kind, const char *fmt, ...)
{
    if (R->n_findings == R->cap_findings) {
        unsigned cap = R->cap_findings ? 2 * R->cap_findings : 64;
        finding_t *n = realloc(R->findings, cap * sizeof *n);
        if (!n)
            return;
        R->findings = n;
        R->cap_findings = cap;
    }
    finding_t *f = &R->findings[R->n_findings++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
    f->kind = kind;
}

static void row_label(const row_t *r, char *buf, size_t cap)
{
    if (r->layer == L_DIRECT)
        snprintf(buf, cap, "%s%s%u bytes, direct", r->tier ? r->tier : "", r->tier ? " " : "",
                 r->bytes);
    else
        snprintf(buf, cap, "%s %u bytes, actors c=%u", r->tier ? r->tier : "", r->bytes, r->conc);
}

static void row_findings(results_t *R, const row_t *r, size_t n)
{
    char label[96];
    row_label(r, label, sizeof label);
    for (int p = 0; p < PAIRS; p++) {
        const pair_result_t *q = &r->pr[p];
        const char *a = form_names[pair_a[p]], *b = form_names[pair_b[p]];
        if (strcmp(q->verdict, "undecided") == 0) {
            add_finding(R, K_NOWIN,
                        "%s: %s vs %s undecided: the interquartile range of the paired "
                        "per-round difference, [%+.2f, %+.2f] ns (median %+.2f), contains zero "
                        "over %zu rounds",
                        label, a, b, q->d.p25, q->d.p75, q->d.median, n);
        } else {
            int loses = strcmp(q->verdict, "slower") == 0; /* a is native or routed */
            add_finding(R, loses ? K_UNFAV : K_FAV,
                        "%s: %s %s than %s by %.2f ns per %s (paired median; IQR [%+.2f, %+.2f])",
                        label, a, q->verdict, b, q->d.median < 0 ? -q->d.median : q->d.median,
                        r->layer == L_DIRECT ? "frame" : "task", q->d.p25, q->d.p75);
        }
    }
    if (r->layer == L_DIRECT && r->tier) {
        double target = r->bytes <= 8 ? 1.10 : 1.05;
        add_finding(R, r->sb.median <= target ? K_FAV : K_UNFAV,
                    "%s: routed / bound %.3f [p25-p75 %.3f-%.3f], target <= %.2f: %s "
                    "(bound = faster + eps/2 x (slower - faster), a perfect router at eps %g)",
                    label, r->sb.median, r->sb.p25, r->sb.p75, target,
                    r->sb.median <= target ? "met" : "NOT met", R->eps);
    }
    if (r->layer == L_ACTORS && r->conc == 1 && r->tier) {
        for (int f = 0; f < FORMS; f++)
            add_finding(R, r->sd[f].median <= 1000.0 ? K_FAV : K_UNFAV,
                        "%s, %s: dispatch adds %.0f ns per task (actor end-to-end median - direct "
                        "ns/frame, paired per round; IQR %.0f-%.0f), target <= 1000 ns: %s",
                        label, form_names[f], r->sd[f].median, r->sd[f].p25, r->sd[f].p75,
                        r->sd[f].median <= 1000.0 ? "met" : "NOT met");
    }
}

/* Smallest length L with native "faster" at L and "slower" at no measured
 * length >= L; *first = the smallest length with native faster. Rows are
 * sorted by length. only_odd: register frames only. */
static int crossover_of(const row_t *rows, unsigned n, int only_odd, int *first)
{
    int best = -1, slower_above = 0;
    *first = -1;
    for (unsigned i = n; i-- > 0;) {
        const row_t *r = &rows[i];
        if (r->layer != L_DIRECT || (only_odd && (r->bytes % 2 == 0 || r->bytes < 7 || r->bytes > 255)))
            continue;
        const char *v = r->pr[P_NATIVE_FALLBACK].verdict;
        if (strcmp(v, "slower") == 0)
            slower_above = 1;
        if (strcmp(v, "faster") == 0) {
            *first = (int)r->bytes;
            if (!slower_above)
                best = (int)r->bytes;
        }
    }
    return best;
}

/* ---- output: Markdown --------------------------------------------------------------- */

static void md_spread(FILE *o, const bench_spread_t *s)
{
    fprintf(o, "%.1f [%.1f–%.1f]", s->median, s->p25, s->p75);
}

static void md_pair(FILE *o, const pair_result_t *p)
{
    fprintf(o, "%+.2f [%+.2f, %+.2f] **%s**", p->d.median, p->d.p25, p->d.p75, p->verdict);
}

static void md_findings(FILE *o, const results_t *R, int kind)
{
    unsigned k = 0;
    for (unsigned i = 0; i < R->n_findings; i++)
        if (R->findings[i].kind == kind) {
            fprintf(o, "- %s\n", R->findings[i].text);
            k++;
        }
    if (!k)
        fprintf(o, "- (none)\n");
}

static void md_length_list(FILE *o, const unsigned *v, unsigned n)
{
    if (!n) {
        fprintf(o, "none");
        return;
    }
    for (unsigned i = 0; i < n;) {
        unsigned j = i;
        /* runs of consecutive lengths, or of odd/even steps of 2 */
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        if (j > i + 1)
            fprintf(o, "%s%u–%u", i ? ", " : "", v[i], v[j]);
        else {
            for (unsigned k = i; k <= j; k++)
                fprintf(o, "%s%u", k ? ", " : "", v[k]);
        }
        i = j + 1;
    }
}

/* The issue's targets, per tier: routed / bound (direct), the router on the
 * oracle's arm (direct layer), dispatch at concurrency 1 (native form). */
typedef struct target_row {
    unsigned bytes;
    double bound, bound_target;
    int bound_met;
    const char *router_arm, *oracle_arm;
    int oracle_met;
    double dispatch;
    int dispatch_met;
} target_row_t;

static void targets_of(const results_t *R, target_row_t *t)
{
    for (unsigned k = 0; k < TIERS; k++) {
        t[k] = (target_row_t){ .bytes = tier_bytes[k], .router_arm = "none (not converged)" };
        for (unsigned i = 0; i < R->n_tier_rows; i++) {
            const row_t *r = &R->tier_rows[i];
            if (r->bytes != tier_bytes[k])
                continue;
            if (r->layer == L_DIRECT) {
                t[k].bound = r->sb.median;
                t[k].bound_target = r->bytes <= 8 ? 1.10 : 1.05;
                t[k].bound_met = r->sb.median <= t[k].bound_target;
            } else if (r->conc == 1) {
                t[k].dispatch = r->sd[F_NATIVE].median;
                t[k].dispatch_met = t[k].dispatch <= 1000.0;
            }
        }
        for (unsigned i = 0; i < R->n_routing; i++) {
            const routing_entry_t *e = &R->routing[i];
            if (e->bytes == tier_bytes[k] && e->layer == L_DIRECT) {
                t[k].oracle_arm = e->oracle_arm;
                if (e->converged_arm)
                    t[k].router_arm = e->converged_arm;
                t[k].oracle_met = e->converged_arm && strcmp(e->converged_arm, e->oracle_arm) == 0;
            }
        }
    }
}

static void write_markdown(FILE *o, const results_t *R)
{
    const options_t *opt = &R->opt;
    size_t n = opt->rounds;
    fprintf(o, "# rtugw bench crossover\n\n");
    fprintf(o, "## Environment\n\n");
    fprintf(o, "- command: `%s`\n", R->env.command);
    fprintf(o, "- date: %s\n", R->env.date);
    fprintf(o, "- CPU: %s (%ld online cores)\n", R->env.cpu, R->env.cores);
    fprintf(o, "- native features detected: %s (accelerated: %s)\n", rtu_native_features(),
            rtu_native_accelerated() ? "yes" : "no");
    fprintf(o, "- compiler: gcc %s; flags: %s\n", __VERSION__, RTUGW_BUILD_CFLAGS);
    fprintf(o, "- commit: %s\n", R->env.commit);
    fprintf(o, "- load average at start: %s; at end: %s\n", R->env.load_start, R->env.load_end);
    fprintf(o, "- actor workers: %u; router timer %s (overhead %.1f ns subtracted from its "
               "samples)\n\n",
            R->env.workers, R->timer, R->timer_overhead);

    fprintf(o, "## Method\n\n");
    fprintf(o,
            "- Forms: **fallback** only, **native** only, **routed** (the live router, "
            "epsilon %g, default sample rates; it learns during the gate and warm-up and keeps "
            "learning).\n"
            "- Equivalence gate first: per tier %u distinct inputs (16 valid, 8 mutated) per "
            "layer, every form's envelope compared with `rtu_decode_reference` by memcmp "
            "(routed: on the live router and 4 more times on an epsilon-1 router so both arms "
            "run); through the actor pool as well.%s\n"
            "- Direct layer: one thread, batches of %u frames (16 distinct cycled) per form; "
            "ns per frame = batch time / frames, exploration pulls included.\n"
            "- Actor layer: a driver actor keeps c tasks in flight to c parse actors "
            "(c = 1, 2, 4) on %u workers; one frame per task (copied into the message); "
            "per-task time from the driver's send to its handling of the reply. Per round: "
            "the median over %u tasks. Throughput (batch wall time / tasks) in the last "
            "column.\n"
            "- %u warm-up rounds dropped, %u measured rounds; in every round each row runs "
            "each form once, the order rotating.\n"
            "- Verdict for a pair a vs b from the per-round paired difference a − b: "
            "**faster** when p75 < 0, **slower** when p25 > 0, else **undecided**. No "
            "tolerance band. Tables show median [p25–p75].\n"
            "- Crossover: the smallest length with native faster and native slower at no "
            "measured length above it.\n"
            "- Routing: arm counts over the measured rounds (router_report before and after "
            "each routed batch), router_report's verdict, the oracle from the direct-layer "
            "single-arm medians (router_set_oracle), regret per pull over the measured "
            "window.\n\n",
            R->eps, GATE_INPUTS,
            opt->sweep ? " The sweep gates every length 5..256 the same way (direct layer)." : "",
            opt->frames, R->env.workers, opt->tasks, opt->warmup, opt->rounds);

    fprintf(o, "## Equivalence gate\n\n| tier | bytes | inputs (distinct) | forms | layers | result |\n"
               "|---|---:|---:|---|---|---|\n");
    for (unsigned t = 0; t < TIERS; t++)
        fprintf(o, "| %s | %u | %u (%u) | fallback, native, routed | direct, actors | passed |\n",
                tier_names[t], tier_bytes[t], R->gate_inputs[t], R->gate_distinct[t]);
    if (opt->sweep)
        fprintf(o, "| sweep | 5–256 | %u per length, %u lengths | fallback, native, routed | "
                   "direct | passed |\n",
                R->sweep_gate_min_inputs, R->sweep_gate_lengths);
    fprintf(o, "\n");

    fprintf(o, "## Direct layer (one thread): ns per frame\n\n"
               "| tier | bytes | fallback | native | routed | native − fallback | routed − fallback "
               "| routed − native | routed / bound (target) |\n"
               "|---|---:|---:|---:|---:|---|---|---|---|\n");
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        const row_t *r = &R->tier_rows[i];
        if (r->layer != L_DIRECT)
            continue;
        fprintf(o, "| %s | %u | ", r->tier, r->bytes);
        for (int f = 0; f < FORMS; f++) {
            md_spread(o, &r->s[f]);
            fprintf(o, " | ");
        }
        for (int p = 0; p < PAIRS; p++) {
            md_pair(o, &r->pr[p]);
            fprintf(o, " | ");
        }
        fprintf(o, "%.3f [%.3f–%.3f] (%.2f) |\n", r->sb.median, r->sb.p25, r->sb.p75,
                r->bytes <= 8 ? 1.10 : 1.05);
    }
    fprintf(o, "\n## Actor layer: per-task end-to-end ns (send → reply handled)\n\n"
               "| tier | bytes | c | fallback | native | routed | native − fallback | routed − "
               "fallback | routed − native | dispatch ns (native) | wall ns/task f / n / r |\n"
               "|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n");
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        const row_t *r = &R->tier_rows[i];
        if (r->layer != L_ACTORS)
            continue;
        fprintf(o, "| %s | %u | %u | ", r->tier, r->bytes, r->conc);
        for (int f = 0; f < FORMS; f++) {
            md_spread(o, &r->s[f]);
            fprintf(o, " | ");
        }
        for (int p = 0; p < PAIRS; p++) {
            md_pair(o, &r->pr[p]);
            fprintf(o, " | ");
        }
        fprintf(o, "%.0f | %.0f / %.0f / %.0f |\n", r->sd[F_NATIVE].median, r->st[0].median,
                r->st[1].median, r->st[2].median);
    }
    fprintf(o, "\nDispatch ns = the actor row's per-task median − the direct row's ns per "
               "frame, paired per round: what the scheduler adds, not parse speed. Wall ns/task "
               "= a batch's wall time / its tasks (throughput; medians over rounds).\n\n");

    fprintf(o, "## Crossover\n\n");
    if (R->crossover > 0)
        fprintf(o, "- native is faster from **%d bytes** on (source: %s); first length where "
                   "native is faster: %d.\n",
                R->crossover, R->crossover_source, R->crossover_first);
    else
        fprintf(o, "- **no crossover**: native is not faster at a length above which it never "
                   "loses (source: %s; first length where native is faster: %s).\n",
                R->crossover_source, R->crossover_first > 0 ? "see below" : "none");
    if (opt->sweep) {
        if (R->crossover_regs > 0)
            fprintf(o, "- register frames only (odd lengths 7–255): from %d bytes.\n",
                    R->crossover_regs);
        else
            fprintf(o, "- register frames only (odd lengths 7–255): no crossover.\n");
    }
    fprintf(o, "- lengths where native vs fallback is undecided: ");
    md_length_list(o, R->undecided, R->n_undecided);
    fprintf(o, "\n");
    if (!opt->sweep)
        fprintf(o, "- measured at the three tiers only; `--sweep` measures every length 5–256.\n");
    fprintf(o, "\n");

    fprintf(o, "## Routing verdicts\n\n| tier | bytes | layer | bucket | arms in measured window "
               "(native / fallback) | epsilon | router says | paired comparison | agree | oracle "
               "arm | regret ns/pull (window; router's whole run) |\n"
               "|---|---:|---|---|---:|---:|---|---|---|---|---:|\n");
    for (unsigned i = 0; i < R->n_routing; i++) {
        const routing_entry_t *e = &R->routing[i];
        char bytes[16];
        snprintf(bytes, sizeof bytes, e->bytes ? "%u" : "%u..%u", e->bytes ? e->bytes : e->lo,
                 e->hi);
        fprintf(o, "| %s | %s | %s | %u..%u | %llu / %llu | %g | %s | %s | %s | %s | %.3f; %.3f |\n",
                e->tier ? e->tier : "sweep", bytes, layer_names[e->layer],
                e->lo, e->hi, (unsigned long long)e->pulls[0], (unsigned long long)e->pulls[1],
                R->eps, e->router_verdict, e->paired_winner,
                e->agrees < 0 ? "n/a" : e->agrees ? "yes" : "**no**", e->oracle_arm,
                e->regret_window, e->regret_router);
    }
    fprintf(o, "\n");

    target_row_t tg[TIERS];
    targets_of(R, tg);
    fprintf(o, "## Targets (issue 7)\n\n| bytes | routed / bound (target) | router's arm / "
               "oracle's arm (direct) | dispatch at c=1, native (target 1000 ns) |\n"
               "|---:|---|---|---|\n");
    for (unsigned k = 0; k < TIERS; k++)
        fprintf(o, "| %u | %.3f (%.2f): %s | %s / %s: %s | %.0f ns: %s |\n", tg[k].bytes,
                tg[k].bound, tg[k].bound_target, tg[k].bound_met ? "met" : "**NOT met**",
                tg[k].router_arm, tg[k].oracle_arm, tg[k].oracle_met ? "met" : "**NOT met**",
                tg[k].dispatch, tg[k].dispatch_met ? "met" : "**NOT met**");
    fprintf(o, "\nThe oracle's arm is the arm with the lower direct-layer median; where the "
               "paired comparison is undecided the two arms cost the same within the noise, and "
               "missing it costs the regret shown above, not a wrong answer.\n\n");

    fprintf(o, "## Favourable results (native or routed wins, targets met)\n\n");
    md_findings(o, R, K_FAV);
    fprintf(o, "\n## Unfavourable results (native or routed loses, targets missed)\n\n");
    md_findings(o, R, K_UNFAV);
    fprintf(o, "\n## No winner\n\n");
    md_findings(o, R, K_NOWIN);
    fprintf(o, "\n");

    if (R->have_cg) {
        fprintf(o, "## Instructions per frame (callgrind)\n\n| bytes | fallback | native | routed |\n"
                   "|---:|---:|---:|---:|\n");
        for (unsigned t = 0; t < TIERS; t++)
            fprintf(o, "| %u | %.1f | %.1f | %.1f |\n", R->cg[t].bytes, R->cg[t].per[0],
                    R->cg[t].per[1], R->cg[t].per[2]);
        fprintf(o, "\n(difference of two valgrind runs of 2000 and 22000 decodes, / 20000; "
                   "routed at epsilon %g)\n\n", R->eps);
    }
    if (opt->sweep) {
        fprintf(o, "## Sweep (direct layer): ns per frame, median [p25–p75]\n\n"
                   "| bytes | shape | fallback | native | routed | native − fallback | routed − "
                   "better arm's verdict |\n|---:|---|---:|---:|---:|---|---|\n");
        for (unsigned i = 0; i < R->n_sweep; i++) {
            const row_t *r = &R->sweep[i];
            int better = r->s[F_NATIVE].median <= r->s[F_FALLBACK].median ? P_ROUTED_NATIVE
                                                                            : P_ROUTED_FALLBACK;
            fprintf(o, "| %u | %s | ", r->bytes, r->shape);
            for (int f = 0; f < FORMS; f++) {
                md_spread(o, &r->s[f]);
                fprintf(o, " | ");
            }
            md_pair(o, &r->pr[P_NATIVE_FALLBACK]);
            fprintf(o, " | vs %s: %s |\n", form_names[pair_b[better]], r->pr[better].verdict);
        }
        fprintf(o, "\n");
    }
    (void)n;
}

/* ---- output: JSON --------------------------------------------------------------------- */

static void json_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(o, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(o, "\\u%04x", *s);
        else
            fputc(*s, o);
    }
    fputc('"', o);
}

static void json_spread(FILE *o, const bench_spread_t *s)
{
    fprintf(o, "{\"median\":%.3f,\"p10\":%.3f,\"p25\":%.3f,\"p75\":%.3f,\"p90\":%.3f,\"n\":%zu}",
            s->median, s->p10, s->p25, s->p75, s->p90, s->n);
}

static void json_samples(FILE *o, const double *v, size_t n)
{
    fputc('[', o);
    for (size_t i = 0; i < n; i++)
        fprintf(o, "%s%.2f", i ? "," : "", v[i]);
    fputc(']', o);
}

static void json_row(FILE *o, const row_t *r, size_t n)
{
    fprintf(o, "{\"tier\":");
    if (r->tier)
        json_str(o, r->tier);
    else
        fprintf(o, "null");
    fprintf(o, ",\"bytes\":%u,\"shape\":", r->bytes);
    json_str(o, r->shape);
    fprintf(o, ",\"layer\":\"%s\",\"concurrency\":%u,\"unit\":\"%s\"", layer_names[r->layer],
            r->conc, r->layer == L_DIRECT ? "ns per frame" : "ns per task, end to end (median)");
    for (int f = 0; f < FORMS; f++)
        fprintf(o, ",\"%s_ns\":%.3f", form_names[f], r->s[f].median);
    fprintf(o, ",\"faster\":\"%s\",\"verdict\":\"%s\",\"spread\":{", faster_form(r),
            r->pr[P_NATIVE_FALLBACK].verdict);
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "%s\"%s\":", f ? "," : "", form_names[f]);
        json_spread(o, &r->s[f]);
    }
    fprintf(o, "},\"pairs\":[");
    for (int p = 0; p < PAIRS; p++) {
        fprintf(o, "%s{\"a\":\"%s\",\"b\":\"%s\",\"diff_ns\":", p ? "," : "",
                form_names[pair_a[p]], form_names[pair_b[p]]);
        json_spread(o, &r->pr[p].d);
        fprintf(o, ",\"verdict\":\"%s\"}", r->pr[p].verdict);
    }
    fprintf(o, "],\"routed_arms\":{\"native\":%llu,\"fallback\":%llu}",
            (unsigned long long)r->pulls[0], (unsigned long long)r->pulls[1]);
    if (r->bound) {
        fprintf(o, ",\"routed_over_bound\":");
        json_spread(o, &r->sb);
        if (r->tier)
            fprintf(o, ",\"routed_over_bound_target\":%.2f", r->bytes <= 8 ? 1.10 : 1.05);
    }
    if (r->layer == L_ACTORS) {
        fprintf(o, ",\"throughput_ns_per_task\":{");
        for (int f = 0; f < FORMS; f++) {
            fprintf(o, "%s\"%s\":", f ? "," : "", form_names[f]);
            json_spread(o, &r->st[f]);
        }
        fprintf(o, "},\"dispatch_ns\":{");
        for (int f = 0; f < FORMS; f++) {
            fprintf(o, "%s\"%s\":", f ? "," : "", form_names[f]);
            json_spread(o, &r->sd[f]);
        }
        fprintf(o, "}");
    }
    fprintf(o, ",\"samples\":{");
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "%s\"%s\":", f ? "," : "", form_names[f]);
        json_samples(o, r->ns[f], n);
    }
    fprintf(o, "}}");
}

static void write_json(FILE *o, const results_t *R)
{
    const options_t *opt = &R->opt;
    size_t n = opt->rounds;
    fprintf(o, "{\"command\":");
    json_str(o, R->env.command);
    fprintf(o, ",\"environment\":{\"date\":");
    json_str(o, R->env.date);
    fprintf(o, ",\"cpu\":");
    json_str(o, R->env.cpu);
    fprintf(o, ",\"cores\":%ld,\"native_features\":", R->env.cores);
    json_str(o, rtu_native_features());
    fprintf(o, ",\"compiler\":");
    json_str(o, "gcc " __VERSION__);
    fprintf(o, ",\"cflags\":");
    json_str(o, RTUGW_BUILD_CFLAGS);
    fprintf(o, ",\"commit\":");
    json_str(o, R->env.commit);
    fprintf(o, ",\"load_start\":");
    json_str(o, R->env.load_start);
    fprintf(o, ",\"load_end\":");
    json_str(o, R->env.load_end);
    fprintf(o, ",\"workers\":%u,\"timer\":", R->env.workers);
    json_str(o, R->timer);
    fprintf(o, ",\"timer_overhead_ns\":%.2f}", R->timer_overhead);
    fprintf(o, ",\"gate\":{\"passed\":true,\"inputs\":%u,\"tiers\":[", GATE_INPUTS);
    for (unsigned t = 0; t < TIERS; t++)
        fprintf(o, "%s{\"tier\":\"%s\",\"bytes\":%u,\"inputs\":%u,\"distinct\":%u,"
                   "\"forms\":[\"fallback\",\"native\",\"routed\"],\"layers\":[\"direct\",\"actors\"]}",
                t ? "," : "", tier_names[t], tier_bytes[t], R->gate_inputs[t], R->gate_distinct[t]);
    fprintf(o, "]");
    if (opt->sweep)
        fprintf(o, ",\"sweep\":{\"lengths\":%u,\"min_inputs\":%u}", R->sweep_gate_lengths,
                R->sweep_gate_min_inputs);
    fprintf(o, "},\"exploration_rate\":%g,\"rounds\":%u,\"warmup\":%u,\"frames_per_batch\":%u,"
               "\"tasks_per_batch\":%u,\"crossover_bytes\":",
            R->eps, opt->rounds, opt->warmup, opt->frames, opt->tasks);
    if (R->crossover > 0)
        fprintf(o, "%d", R->crossover);
    else
        fprintf(o, "null");
    fprintf(o, ",\"crossover_first_faster_bytes\":");
    if (R->crossover_first > 0)
        fprintf(o, "%d", R->crossover_first);
    else
        fprintf(o, "null");
    fprintf(o, ",\"crossover_register_frames_bytes\":");
    if (opt->sweep && R->crossover_regs > 0)
        fprintf(o, "%d", R->crossover_regs);
    else
        fprintf(o, "null");
    fprintf(o, ",\"crossover_source\":\"%s\",\"undecided_bytes\":[", R->crossover_source);
    for (unsigned i = 0; i < R->n_undecided; i++)
        fprintf(o, "%s%u", i ? "," : "", R->undecided[i]);
    fprintf(o, "],\"tiers\":[");
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        if (i)
            fputc(',', o);
        json_row(o, &R->tier_rows[i], n);
    }
    fprintf(o, "],\"routing\":[");
    for (unsigned i = 0; i < R->n_routing; i++) {
        const routing_entry_t *e = &R->routing[i];
        fprintf(o, "%s{\"tier\":", i ? "," : "");
        if (e->tier)
            json_str(o, e->tier);
        else
            fprintf(o, "null");
        fprintf(o, ",\"bytes\":%u,\"layer\":\"%s\",\"bucket\":[%u,%u],\"exploration_rate\":%g,"
                   "\"window_arms\":{\"native\":%llu,\"fallback\":%llu},\"router_verdict\":",
                e->bytes, layer_names[e->layer], e->lo, e->hi, R->eps,
                (unsigned long long)e->pulls[0], (unsigned long long)e->pulls[1]);
        json_str(o, e->router_verdict);
        fprintf(o, ",\"converged_arm\":");
        if (e->converged_arm)
            json_str(o, e->converged_arm);
        else
            fprintf(o, "null");
        fprintf(o, ",\"default_not_a_decision\":%s,\"paired_winner\":\"%s\",\"agrees\":%s,"
                   "\"oracle_arm\":\"%s\",\"oracle_ns\":{\"native\":%.3f,\"fallback\":%.3f},"
                   "\"regret_ns_per_pull_window\":%.4f,\"regret_ns_per_pull_router\":%.4f}",
                e->default_not_decision ? "true" : "false", e->paired_winner,
                e->agrees < 0 ? "null" : e->agrees ? "true" : "false", e->oracle_arm,
                e->oracle_ns[0], e->oracle_ns[1], e->regret_window, e->regret_router);
    }
    fprintf(o, "]");
    if (opt->sweep) {
        fprintf(o, ",\"sweep\":[");
        for (unsigned i = 0; i < R->n_sweep; i++) {
            if (i)
                fputc(',', o);
            json_row(o, &R->sweep[i], n);
        }
        fprintf(o, "]");
    }
    if (R->have_cg) {
        fprintf(o, ",\"callgrind\":[");
        for (unsigned t = 0; t < TIERS; t++)
            fprintf(o, "%s{\"bytes\":%u,\"instructions_per_frame\":{\"fallback\":%.1f,"
                       "\"native\":%.1f,\"routed\":%.1f}}",
                    t ? "," : "", R->cg[t].bytes, R->cg[t].per[0], R->cg[t].per[1],
                    R->cg[t].per[2]);
        fprintf(o, "]");
    }
    target_row_t tg[TIERS];
    targets_of(R, tg);
    fprintf(o, ",\"targets\":[");
    for (unsigned k = 0; k < TIERS; k++)
        fprintf(o, "%s{\"bytes\":%u,\"routed_over_bound\":%.4f,\"routed_over_bound_target\":%.2f,"
                   "\"routed_over_bound_met\":%s,\"router_arm\":\"%s\",\"oracle_arm\":\"%s\","
                   "\"converged_to_oracle\":%s,\"dispatch_ns_c1\":%.1f,\"dispatch_met\":%s}",
                k ? "," : "", tg[k].bytes, tg[k].bound, tg[k].bound_target,
                tg[k].bound_met ? "true" : "false", tg[k].router_arm, tg[k].oracle_arm,
                tg[k].oracle_met ? "true" : "false", tg[k].dispatch,
                tg[k].dispatch_met ? "true" : "false");
    fprintf(o, "]");
    static const char *const kinds[] = { "favourable", "unfavourable", "no_winner" };
    for (int k = 0; k < 3; k++) {
        fprintf(o, ",\"%s\":[", kinds[k]);
        int first = 1;
        for (unsigned i = 0; i < R->n_findings; i++)
            if (R->findings[i].kind == k) {
                if (!first)
                    fputc(',', o);
                json_str(o, R->findings[i].text);
                first = 0;
            }
        fprintf(o, "]");
    }
    fprintf(o, "}\n");
}

/* ---- output: SVG ---------------------------------------------------------------------- */

static int write_svg(const char *path, const results_t *R)
{
    const row_t *rows = R->opt.sweep ? R->sweep : R->tier_rows;
    unsigned n = R->opt.sweep ? R->n_sweep : R->n_tier_rows;
    const double W = 900, H = 500, x0 = 70, y0 = 30, pw = 780, ph = 400;
    double ymax = 1;
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    for (unsigned i = 0; i < n; i++)
        if (rows[i].layer == L_DIRECT)
            for (int f = 0; f < FORMS; f++)
                if (rows[i].s[f].median > ymax)
                    ymax = rows[i].s[f].median;
    ymax *= 1.1;
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.0f\" y=\"18\">rtugw bench crossover: ns per frame (direct layer, "
               "median) against frame length</text>\n",
            W, H, x0);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
            x0, y0 + ph, x0 + pw, y0 + ph);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
            x0, y0, x0, y0 + ph);
    for (int k = 0; k <= 5; k++) {
        double v = ymax * k / 5, y = y0 + ph - ph * k / 5;
        fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.0f</text>\n", x0 - 5, y + 4, v);
        unsigned len = (unsigned)(SWEEP_HI * k / 5);
        double x = x0 + pw * len / SWEEP_HI;
        fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%u</text>\n", x,
                y0 + ph + 16, len);
    }
    fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">frame length (bytes)</text>\n",
            x0 + pw / 2, H - 20);
    static const char *const colour[FORMS] = { "#d62728", "#1f77b4", "#2ca02c" };
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[f]);
        for (unsigned i = 0; i < n; i++)
            if (rows[i].layer == L_DIRECT)
                fprintf(o, "%.1f,%.1f ", x0 + pw * rows[i].bytes / SWEEP_HI,
                        y0 + ph - ph * rows[i].s[f].median / ymax);
        fprintf(o, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", x0 + 10,
                y0 + 15 + 15 * f, colour[f], form_names[f]);
    }
    if (R->crossover > 0) {
        double x = x0 + pw * R->crossover / SWEEP_HI;
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"gray\" "
                   "stroke-dasharray=\"4 3\"/>\n<text x=\"%.1f\" y=\"%.0f\">crossover %d bytes"
                   "</text>\n",
                x, y0, x, y0 + ph, x + 4, y0 + 60, R->crossover);
    }
    fprintf(o, "</svg>\n");
    return fclose(o) == 0 ? 0 : -1;
}

/* ---- routing entries -------------------------------------------------------------- */

static void routing_entry_fill(routing_entry_t *e, const router_bucket_report_t *b,
                               const uint64_t pulls[2], const double oracle[2],
                               const char *paired_winner)
{
    e->lo = b->lo;
    e->hi = b->hi;
    e->pulls[0] = pulls[0];
    e->pulls[1] = pulls[1];
    e->oracle_ns[0] = oracle[0];
    e->oracle_ns[1] = oracle[1];
    router_verdict_text(b, e->router_verdict, sizeof e->router_verdict);
    e->default_not_decision = pulls[0] == 0 || pulls[1] == 0 || b->verdict == ROUTER_VERDICT_DEFAULT;
    if (e->default_not_decision && b->verdict != ROUTER_VERDICT_DEFAULT)
        snprintf(e->router_verdict, sizeof e->router_verdict,
                 "default, not a decision (an arm never taken in the measured window)");
    e->converged_arm = b->verdict == ROUTER_VERDICT_CONVERGED && !e->default_not_decision
                           ? router_arm_name(b->chosen) : NULL;
    e->paired_winner = paired_winner;
    if (!e->converged_arm || strcmp(paired_winner, "undecided") == 0)
        e->agrees = -1;
    else
        e->agrees = strcmp(e->converged_arm, paired_winner) == 0;
    int best = oracle[0] <= oracle[1] ? 0 : 1;
    e->oracle_arm = router_arm_name(best);
    double total = (double)(pulls[0] + pulls[1]);
    e->regret_window = total > 0 ? ((double)pulls[0] * (oracle[0] - oracle[best]) +
                                    (double)pulls[1] * (oracle[1] - oracle[best])) / total : 0;
    e->regret_router = b->has_oracle ? b->regret_ns_per_pull : 0;
    e->minority_share = b->minority_share;
}

static void routing_findings(results_t *R, const routing_entry_t *e)
{
    char where[64];
    if (e->tier)
        snprintf(where, sizeof where, "%s %u bytes, %s", e->tier, e->bytes, layer_names[e->layer]);
    else
        snprintf(where, sizeof where, "sweep bucket %u..%u", e->lo, e->hi);
    if (e->default_not_decision)
        add_finding(R, K_NOWIN, "routing, %s: %s (native %llu, fallback %llu pulls in the "
                                "measured window): the majority arm is the default, not a "
                                "decision",
                    where, e->router_verdict, (unsigned long long)e->pulls[0],
                    (unsigned long long)e->pulls[1]);
    else if (!e->converged_arm)
        add_finding(R, K_UNFAV, "routing, %s: router %s (minority share %.4f, exploration "
                                "explains %.4f)",
                    where, e->router_verdict, e->minority_share, R->eps / 2);
    else if (e->agrees < 0)
        add_finding(R, K_NOWIN, "routing, %s: router %s, but the paired comparison of the arms "
                                "is undecided, so there is no independent winner to agree with "
                                "(oracle medians native %.2f, fallback %.2f ns; regret %.3f "
                                "ns/pull)",
                    where, e->router_verdict, e->oracle_ns[0], e->oracle_ns[1],
                    e->regret_window);
    else
        add_finding(R, e->agrees ? K_FAV : K_UNFAV,
                    "routing, %s: router %s; paired comparison says %s: %s (regret %.3f ns/pull)",
                    where, e->router_verdict, e->paired_winner, e->agrees ? "agrees" : "DISAGREES",
                    e->regret_window);
}

/* ---- options ------------------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench crossover [--sweep] [--callgrind] [--json[=FILE]] [--out FILE]\n"
            "                             [--svg FILE] [--rounds N] [--warmup N] [--frames N]\n"
            "                             [--tasks N] [--epsilon E] [--no-progress]\n"
            "\n"
            "Fallback only, native only and routed decode of the same frames at 7, 21 and 255\n"
            "bytes (R1, R8, R125), directly on one thread and through the actor scheduler at\n"
            "concurrency 1, 2, 4. An equivalence gate (memcmp of envelopes against the\n"
            "reference) runs first; a failure stops the run with exit status 1. Verdicts come\n"
            "from the interquartile range of per-round paired differences.\n"
            "  --sweep        also every frame length 5..256 (direct layer)\n"
            "  --callgrind    also instructions per frame per form under valgrind\n"
            "  --json         JSON on standard output instead of Markdown\n"
            "  --json=FILE    JSON to FILE (Markdown still on standard output); also\n"
            "                 spelt --json FILE\n"
            "  --out FILE     the Markdown report to FILE as well\n"
            "  --svg FILE     chart: ns per frame against frame length, crossover marked\n"
            "  --rounds N     measured rounds (default 101)\n"
            "  --warmup N     warm-up rounds, dropped (default 5)\n"
            "  --frames N     frames per direct batch (default 20000: the router's\n"
            "                 verdict window, 262144 pulls, fills twice)\n"
            "  --tasks N      tasks per actor batch (default 1000)\n"
            "  --epsilon E    the router's exploration rate (default: the router's, 0.05)\n"
            "  --no-progress  no progress line on standard error\n"
            "Test hook: RTUGW_CROSSOVER_BREAK=fallback|native|routed[@actors] corrupts one\n"
            "envelope byte of that form in the gate, in the direct layer (or with @actors in\n"
            "the actor layer); the run must then stop with exit status 1.\n");
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {
        { "sweep", no_argument, NULL, 's' },
        { "callgrind", no_argument, NULL, 'c' },
        { "json", optional_argument, NULL, 'j' },
        { "out", required_argument, NULL, 'o' },
        { "svg", required_argument, NULL, 'g' },
        { "rounds", required_argument, NULL, 'r' },
        { "warmup", required_argument, NULL, 'w' },
        { "frames", required_argument, NULL, 'f' },
        { "tasks", required_argument, NULL, 't' },
        { "epsilon", required_argument, NULL, 'e' },
        { "no-progress", no_argument, NULL, 'n' },
        { "only", required_argument, NULL, 'O' },
        { "bytes", required_argument, NULL, 'b' },
        { "iterations", required_argument, NULL, 'i' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        errno = 0;
        switch (c) {
        case 's': opt->sweep = 1; break;
        case 'c': opt->callgrind = 1; break;
        case 'j':
            if (optarg)
                opt->json_file = optarg;
            else
                opt->json_stdout = 1;
            break;
        case 'o': opt->out_file = optarg; break;
        case 'g': opt->svg_file = optarg; break;
        case 'n': opt->no_progress = 1; break;
        case 'O': opt->only = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'e': {
            double v = strtod(optarg, &end);
            if (*end || end == optarg || !(v >= 0.0 && v <= 1.0)) {
                fprintf(stderr, "rtugw bench crossover: --epsilon '%s': expected 0..1\n", optarg);
                return 2;
            }
            opt->epsilon = v;
            break;
        }
        case 'r': case 'w': case 'f': case 't': case 'b': case 'i': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || end == optarg || errno || v > 100000000 || (v == 0 && c != 'w')) {
                fprintf(stderr, "rtugw bench crossover: invalid value '%s'\n", optarg);
                return 2;
            }
            if (c == 'r') opt->rounds = (unsigned)v;
            else if (c == 'w') opt->warmup = (unsigned)v;
            else if (c == 'f') opt->frames = (unsigned)v;
            else if (c == 't') opt->tasks = (unsigned)v;
            else if (c == 'b') opt->only_bytes = (unsigned)v;
            else opt->iterations = v;
            break;
        }
        default:
            usage(stderr);
            return 2;
        }
    }
    /* `--json FILE` (the issue's spelling) as well as `--json=FILE` */
    if (opt->json_stdout && !opt->json_file && optind == argc - 1) {
        opt->json_file = argv[optind++];
        opt->json_stdout = 0;
    }
    if (optind < argc) {
        fprintf(stderr, "rtugw bench crossover: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

/* ---- main --------------------------------------------------------------------------- */

static void tier_paired_winner(const results_t *R, unsigned t, const char **out)
{
    *out = "undecided";
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        if (R->tier_rows[i].layer == L_DIRECT && R->tier_rows[i].bytes == tier_bytes[t])
            *out = faster_form(&R->tier_rows[i]);
}

int bench_crossover_main(int argc, char **argv)
{
    router_config_t cfg;
    router_config_default(&cfg);
    static results_t R0;
    results_t *R = &R0;
    memset(R, 0, sizeof *R);
    options_t *opt = &R->opt;
    *opt = (options_t){ .rounds = 101, .warmup = 5, .frames = 20000, .tasks = 1000,
                        .epsilon = cfg.epsilon, .iterations = 1000 };
    int rc = parse_options(argc, argv, opt);
    if (rc >= 0)
        return rc;
    if (!isatty(STDERR_FILENO))
        opt->no_progress = 1;
    const char *brk = getenv("RTUGW_CROSSOVER_BREAK");
    if (brk && *brk) {
        size_t flen = strcspn(brk, "@");
        break_actors = strcmp(brk + flen, "@actors") == 0;
        for (int f = 0; f < FORMS; f++)
            if (strncmp(brk, form_names[f], flen) == 0 && form_names[f][flen] == 0 &&
                (brk[flen] == 0 || break_actors))
                break_form = f;
        if (break_form < 0) {
            fprintf(stderr, "rtugw bench crossover: RTUGW_CROSSOVER_BREAK='%s': expected "
                            "fallback, native or routed, optionally with @actors\n", brk);
            return 2;
        }
    }
    if (opt->only)
        return run_only(opt);

    R->eps = opt->epsilon;
    cfg.epsilon = opt->epsilon;
    environment_read(&R->env, argc, argv);

    static frame_set_t tier_sets[TIERS];
    static gate_input_t gate[GATE_INPUTS];
    router_config_t explore_cfg = cfg;
    explore_cfg.epsilon = 1.0;
    router_t *direct = NULL, *explore = NULL, *sweep_router = NULL;
    router_thread_t *dt = NULL, *et = NULL, *st = NULL;
    actor_layer_t *L = calloc(1, sizeof *L);
    frame_set_t *sweep_sets = NULL;
    int status = 1;

    if (!L || router_new(&cfg, &direct) != 0 || router_new(&explore_cfg, &explore) != 0 ||
        router_new(&cfg, &sweep_router) != 0 || !(dt = router_thread_new(direct)) ||
        !(et = router_thread_new(explore)) || !(st = router_thread_new(sweep_router))) {
        fprintf(stderr, "rtugw bench crossover: cannot create the routers\n");
        goto out;
    }
    if (actor_layer_start(L, &cfg, opt->tasks) != 0) {
        fprintf(stderr, "rtugw bench crossover: cannot start the actor layer\n");
        goto out;
    }
    R->env.workers = actor_system_workers(L->sys);

    /* 1. the gate: tiers in both layers, then the sweep lengths */
    for (unsigned t = 0; t < TIERS; t++) {
        char where[64];
        make_frames(&tier_sets[t], tier_bytes[t], 0x9E3779B97F4A7C15ull + t);
        unsigned n = make_gate_inputs(&tier_sets[t], gate);
        R->gate_inputs[t] = n;
        R->gate_distinct[t] = count_distinct(gate, n);
        snprintf(where, sizeof where, "tier %s (%u bytes)", tier_names[t], tier_bytes[t]);
        if (R->gate_distinct[t] < GATE_MIN) {
            fprintf(stderr, "rtugw bench crossover: gate: only %u distinct inputs at %s\n",
                    R->gate_distinct[t], where);
            goto out;
        }
        if (gate_direct(where, gate, n, dt, et, t == 0) != 0 ||
            gate_actors(L, where, gate, n, t == 0) != 0)
            goto out;
    }
    if (opt->sweep) {
        R->n_sweep = SWEEP_HI - SWEEP_LO + 1;
        sweep_sets = calloc(R->n_sweep, sizeof *sweep_sets);
        R->sweep = calloc(R->n_sweep, sizeof *R->sweep);
        if (!sweep_sets || !R->sweep)
            goto out;
        R->sweep_gate_min_inputs = GATE_INPUTS;
        for (unsigned i = 0; i < R->n_sweep; i++) {
            char where[64];
            unsigned len = SWEEP_LO + i;
            make_frames(&sweep_sets[i], len, 0xD1B54A32D192ED03ull + len);
            unsigned n = make_gate_inputs(&sweep_sets[i], gate);
            unsigned d = count_distinct(gate, n);
            snprintf(where, sizeof where, "sweep length %u (%s)", len, sweep_sets[i].shape);
            if (d < GATE_MIN) {
                fprintf(stderr, "rtugw bench crossover: gate: only %u distinct inputs at %s\n",
                        d, where);
                goto out;
            }
            if (d < R->sweep_gate_min_inputs)
                R->sweep_gate_min_inputs = d;
            if (gate_direct(where, gate, n, st, et, 0) != 0)
                goto out;
            R->sweep_gate_lengths++;
        }
    }

    /* 2. rows */
    for (unsigned t = 0; t < TIERS; t++) {
        row_t *r = &R->tier_rows[R->n_tier_rows++];
        *r = (row_t){ .tier = tier_names[t], .bytes = tier_bytes[t], .shape = tier_sets[t].shape,
                      .layer = L_DIRECT, .conc = 1, .set = &tier_sets[t] };
        if (row_alloc(r, opt->rounds) != 0)
            goto out;
        for (unsigned k = 0; k < CONCS; k++) {
            r = &R->tier_rows[R->n_tier_rows++];
            *r = (row_t){ .tier = tier_names[t], .bytes = tier_bytes[t],
                          .shape = tier_sets[t].shape, .layer = L_ACTORS,
                          .conc = concurrencies[k], .set = &tier_sets[t] };
            if (row_alloc(r, opt->rounds) != 0)
                goto out;
        }
    }
    for (unsigned i = 0; i < R->n_sweep; i++) {
        row_t *r = &R->sweep[i];
        *r = (row_t){ .bytes = SWEEP_LO + i, .shape = sweep_sets[i].shape, .layer = L_DIRECT,
                      .conc = 1, .set = &sweep_sets[i] };
        if (row_alloc(r, opt->rounds) != 0)
            goto out;
    }

    /* 3. the tiers, both layers, every round */
    unsigned total = opt->warmup + opt->rounds;
    for (unsigned round = 0; round < total; round++) {
        int measured = round >= opt->warmup;
        size_t m = measured ? round - opt->warmup : 0;
        progress(opt, "tiers", round + 1, total);
        for (unsigned i = 0; i < R->n_tier_rows; i += 1 + CONCS) {
            row_t *d = &R->tier_rows[i];
            direct_round(d, direct, dt, opt, round, measured, m, R->eps);
            for (unsigned k = 1; k <= CONCS; k++) {
                row_t *a = &R->tier_rows[i + k];
                if (actor_round(a, L, opt, round, measured, m) != 0)
                    goto out;
                if (measured)
                    for (int f = 0; f < FORMS; f++)
                        a->dispatch[f][m] = a->ns[f][m] - d->ns[f][m];
            }
        }
    }
    /* 4. the sweep */
    for (unsigned round = 0; opt->sweep && round < total; round++) {
        int measured = round >= opt->warmup;
        size_t m = measured ? round - opt->warmup : 0;
        progress(opt, "sweep 5..256", round + 1, total);
        for (unsigned i = 0; i < R->n_sweep; i++)
            direct_round(&R->sweep[i], sweep_router, st, opt, round, measured, m, R->eps);
    }
    read_trimmed("/proc/loadavg", 0, R->env.load_end, sizeof R->env.load_end);

    /* 5. analysis */
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        analyse_row(&R->tier_rows[i], opt->rounds);
    for (unsigned i = 0; i < R->n_sweep; i++)
        analyse_row(&R->sweep[i], opt->rounds);

    /* oracles: the direct single-arm medians */
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        const row_t *r = &R->tier_rows[i];
        if (r->layer != L_DIRECT)
            continue;
        router_set_oracle(direct, router_bucket_of(direct, r->bytes), r->s[F_NATIVE].median,
                          r->s[F_FALLBACK].median);
        router_set_oracle(L->router, router_bucket_of(L->router, r->bytes),
                          r->s[F_NATIVE].median, r->s[F_FALLBACK].median);
    }
    double sweep_oracle[ROUTER_MAX_BUCKETS][2];
    unsigned sweep_count[ROUTER_MAX_BUCKETS];
    uint64_t sweep_pulls[ROUTER_MAX_BUCKETS][2];
    memset(sweep_oracle, 0, sizeof sweep_oracle);
    memset(sweep_count, 0, sizeof sweep_count);
    memset(sweep_pulls, 0, sizeof sweep_pulls);
    for (unsigned i = 0; i < R->n_sweep; i++) {
        const row_t *r = &R->sweep[i];
        unsigned b = router_bucket_of(sweep_router, r->bytes);
        sweep_oracle[b][0] += r->s[F_NATIVE].median;
        sweep_oracle[b][1] += r->s[F_FALLBACK].median;
        sweep_pulls[b][0] += r->pulls[0];
        sweep_pulls[b][1] += r->pulls[1];
        sweep_count[b]++;
    }
    for (unsigned b = 0; b < ROUTER_MAX_BUCKETS; b++)
        if (sweep_count[b]) {
            sweep_oracle[b][0] /= sweep_count[b];
            sweep_oracle[b][1] /= sweep_count[b];
            router_set_oracle(sweep_router, b, sweep_oracle[b][0], sweep_oracle[b][1]);
        }
    router_report(direct, &R->rep_direct);
    router_report(L->router, &R->rep_actors);
    router_report(sweep_router, &R->rep_sweep);
    R->timer = R->rep_direct.timer;
    R->timer_overhead = R->rep_direct.timer_overhead_ns;

    /* routing entries: per tier, direct and actor layers */
    for (unsigned t = 0; t < TIERS; t++) {
        const char *winner;
        tier_paired_winner(R, t, &winner);
        for (int layer = L_DIRECT; layer <= L_ACTORS; layer++) {
            routing_entry_t *e = &R->routing[R->n_routing++];
            uint64_t pulls[2] = { 0, 0 };
            double oracle[2] = { 0, 0 };
            for (unsigned i = 0; i < R->n_tier_rows; i++) {
                const row_t *r = &R->tier_rows[i];
                if (r->bytes != tier_bytes[t])
                    continue;
                if (r->layer == L_DIRECT) {
                    oracle[0] = r->s[F_NATIVE].median;
                    oracle[1] = r->s[F_FALLBACK].median;
                }
                if (r->layer == layer) {
                    pulls[0] += r->pulls[0];
                    pulls[1] += r->pulls[1];
                }
            }
            router_t *rr = layer == L_DIRECT ? direct : L->router;
            const router_report_t *rep = layer == L_DIRECT ? &R->rep_direct : &R->rep_actors;
            e->tier = tier_names[t];
            e->bytes = tier_bytes[t];
            e->layer = layer;
            routing_entry_fill(e, &rep->bucket[router_bucket_of(rr, tier_bytes[t])], pulls, oracle,
                               winner);
        }
    }
    for (unsigned b = 0; b < ROUTER_MAX_BUCKETS && opt->sweep; b++) {
        if (!sweep_count[b])
            continue;
        /* the independent comparison for a bucket: the arm with the lower
         * mean median, decided only when every length in it agrees */
        int nat = 0, fb = 0;
        for (unsigned i = 0; i < R->n_sweep; i++)
            if (router_bucket_of(sweep_router, R->sweep[i].bytes) == b) {
                const char *w = faster_form(&R->sweep[i]);
                nat += strcmp(w, "native") == 0;
                fb += strcmp(w, "fallback") == 0;
            }
        const char *winner = nat == (int)sweep_count[b] ? "native"
                             : fb == (int)sweep_count[b] ? "fallback" : "undecided";
        routing_entry_t *e = &R->routing[R->n_routing++];
        e->layer = L_DIRECT;
        routing_entry_fill(e, &R->rep_sweep.bucket[b], sweep_pulls[b], sweep_oracle[b], winner);
    }

    /* findings */
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        row_findings(R, &R->tier_rows[i], opt->rounds);
    for (unsigned i = 0; i < R->n_routing; i++)
        routing_findings(R, &R->routing[i]);
    if (opt->sweep) {
        unsigned faster = 0, slower = 0, und = 0, rs = 0;
        char slow_list[1200] = "", rs_list[1200] = "";
        size_t sl = 0, rl = 0;
        for (unsigned i = 0; i < R->n_sweep; i++) {
            const row_t *r = &R->sweep[i];
            const char *v = r->pr[P_NATIVE_FALLBACK].verdict;
            int better = r->s[F_NATIVE].median <= r->s[F_FALLBACK].median ? P_ROUTED_NATIVE
                                                                            : P_ROUTED_FALLBACK;
            faster += strcmp(v, "faster") == 0;
            und += strcmp(v, "undecided") == 0;
            if (strcmp(v, "slower") == 0) {
                slower++;
                if (sl < sizeof slow_list - 8)
                    sl += (size_t)snprintf(slow_list + sl, sizeof slow_list - sl, "%s%u",
                                           sl ? ", " : "", r->bytes);
            }
            if (strcmp(r->pr[better].verdict, "slower") == 0) {
                rs++;
                if (rl < sizeof rs_list - 8)
                    rl += (size_t)snprintf(rs_list + rl, sizeof rs_list - rl, "%s%u",
                                           rl ? ", " : "", r->bytes);
            }
        }
        add_finding(R, K_FAV, "sweep: native faster than fallback at %u of %u lengths", faster,
                    R->n_sweep);
        add_finding(R, slower ? K_UNFAV : K_FAV,
                    "sweep: native slower than fallback at %u of %u lengths%s%s", slower,
                    R->n_sweep, slower ? ": " : "", slow_list);
        add_finding(R, rs ? K_UNFAV : K_FAV,
                    "sweep: routed slower than the better single arm at %u of %u lengths%s%s "
                    "(the price of exploring at epsilon %g plus the router's dispatch)",
                    rs, R->n_sweep, rs ? ": " : "", rs_list, R->eps);
        add_finding(R, K_NOWIN, "sweep: native vs fallback undecided at %u of %u lengths, "
                                "each listed below with its reason",
                    und, R->n_sweep);
        for (unsigned i = 0; i < R->n_sweep; i++) {
            const pair_result_t *q = &R->sweep[i].pr[P_NATIVE_FALLBACK];
            if (strcmp(q->verdict, "undecided") == 0)
                add_finding(R, K_NOWIN,
                            "sweep %u bytes (%s): native vs fallback undecided: IQR of the "
                            "paired differences [%+.2f, %+.2f] ns (median %+.2f) contains zero",
                            R->sweep[i].bytes, R->sweep[i].shape, q->d.p25, q->d.p75,
                            q->d.median);
        }
    }

    /* crossover */
    if (opt->sweep) {
        R->crossover = crossover_of(R->sweep, R->n_sweep, 0, &R->crossover_first);
        int first_regs;
        R->crossover_regs = crossover_of(R->sweep, R->n_sweep, 1, &first_regs);
        R->crossover_source = "sweep 5..256, direct layer";
        for (unsigned i = 0; i < R->n_sweep; i++)
            if (strcmp(R->sweep[i].pr[P_NATIVE_FALLBACK].verdict, "undecided") == 0)
                R->undecided[R->n_undecided++] = R->sweep[i].bytes;
    } else {
        R->crossover = crossover_of(R->tier_rows, R->n_tier_rows, 0, &R->crossover_first);
        R->crossover_regs = -1;
        R->crossover_source = "tiers 7, 21, 255, direct layer";
        for (unsigned i = 0; i < R->n_tier_rows; i++)
            if (R->tier_rows[i].layer == L_DIRECT &&
                strcmp(R->tier_rows[i].pr[P_NATIVE_FALLBACK].verdict, "undecided") == 0)
                R->undecided[R->n_undecided++] = R->tier_rows[i].bytes;
    }

    if (opt->callgrind) {
        if (run_callgrind(opt, R->cg) != 0)
            goto out;
        R->have_cg = 1;
    }

    /* 6. output */
    if (opt->json_stdout)
        write_json(stdout, R);
    else
        write_markdown(stdout, R);
    fflush(stdout);
    if (opt->json_file) {
        FILE *f = fopen(opt->json_file, "w");
        if (!f) {
            fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->json_file, strerror(errno));
            goto out;
        }
        write_json(f, R);
        if (fclose(f) != 0)
            goto out;
    }
    if (opt->out_file) {
        FILE *f = fopen(opt->out_file, "w");
        if (!f) {
            fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->out_file, strerror(errno));
            goto out;
        }
        write_markdown(f, R);
        if (fclose(f) != 0)
            goto out;
    }
    if (opt->svg_file && write_svg(opt->svg_file, R) != 0) {
        fprintf(stderr, "rtugw bench crossover: %s: %s\n", opt->svg_file, strerror(errno));
        goto out;
    }
    status = sink_all == 0xFFFFFFFFu; /* never true; keeps the sink alive */
out:
    if (L)
        actor_layer_stop(L);
    free(L);
    router_free(direct);
    router_free(explore);
    router_free(sweep_router);
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        row_free(&R->tier_rows[i]);
    for (unsigned i = 0; R->sweep && i < R->n_sweep; i++)
        row_free(&R->sweep[i]);
    free(R->sweep);
    free(sweep_sets);
    free(R->findings);
    return status;
}
