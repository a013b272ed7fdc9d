/*
 * bench/crossover.h -- internal to bench/: what the files of `rtugw bench
 * crossover` share with each other and with nothing else (the command itself,
 * bench_crossover_main, is declared in bench/bench.h, the folder's public
 * header).
 *
 * The crossover bench owns its frame sets, the equivalence gate that must
 * pass before anything is timed, the three forms (fallback, native, routed)
 * in two layers (direct, actor pool), the rounds and the paired statistics
 * that give its verdicts, the routing verdicts and the crossover, and its
 * three renderers. The method is in bench_crossover.c's top comment and, in
 * the long form, in docs/crossover.md.
 *
 *   bench_crossover.c      the command: options, the test hook, environment,
 *                          the run's phases in order, the output files
 *   crossover_frames.c     frame sets, gate inputs, the equivalence gate
 *                          (both layers, tiers and sweep)
 *   crossover_layers.c     the forms; the direct layer and the actor layer
 *                          (driver and parse actors); one round of each
 *   crossover_callgrind.c  instructions per frame under valgrind (--callgrind,
 *                          and --only, the child it runs)
 *   crossover_verdict.c    rows, the rounds loop, statistics, pair verdicts,
 *                          routing verdicts, findings, the crossover, targets
 *   crossover_report.c     the Markdown report
 *   crossover_json.c       the JSON report
 *   crossover_svg.c        the SVG chart
 */
#ifndef RTUGW_BENCH_CROSSOVER_H
#define RTUGW_BENCH_CROSSOVER_H

#include "bench/bench.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
extern const char *const crossover_form_names[FORMS];

/* pairs compared: a against b */
enum { P_NATIVE_FALLBACK, P_ROUTED_FALLBACK, P_ROUTED_NATIVE, PAIRS };
extern const int crossover_pair_a[PAIRS];
extern const int crossover_pair_b[PAIRS];

enum { L_DIRECT, L_ACTORS };
extern const char *const crossover_layer_names[2];

#define TIERS 3
extern const unsigned crossover_tier_bytes[TIERS];
extern const char *const crossover_tier_names[TIERS];
#define CONCS 3
extern const unsigned crossover_concurrencies[CONCS];

typedef struct crossover_frames {
    uint8_t adu[DISTINCT][RTU_MAX_ADU];
    size_t len;
    const char *shape;
} crossover_frames_t;

typedef struct crossover_gate_input {
    uint8_t adu[RTU_MAX_ADU];
    size_t len;
    const char *what;
} crossover_gate_input_t;

typedef struct crossover_options {
    unsigned rounds, warmup, frames, tasks;
    double epsilon;
    int sweep, callgrind, json_stdout, no_progress;
    const char *json_file, *out_file, *svg_file;
    const char *only;
    unsigned only_bytes;
    unsigned long iterations;
    /* test hook RTUGW_CROSSOVER_BREAK=FORM[@actors]: the form (-1: none),
     * and whether the actor layer's gate takes it instead of the direct one */
    int break_form, break_actors;
} crossover_options_t;

typedef struct crossover_pair {
    bench_spread_t d;   /* paired difference a - b, ns */
    const char *verdict;
} crossover_pair_t;

typedef struct crossover_row {
    const char *tier;   /* "R1".. or NULL in the sweep */
    unsigned bytes;
    const char *shape;
    int layer;
    unsigned conc;
    const crossover_frames_t *set;
    double *ns[FORMS];  /* per measured round: direct ns/frame, actors median ns/task */
    double *thr[FORMS]; /* actors: round wall time / tasks */
    double *bound;      /* direct: routed / (faster + eps/2 (slower - faster)) */
    double *dispatch[FORMS]; /* actors: per round, this row - the direct row */
    uint64_t pulls[ROUTER_ARM_COUNT]; /* routed pulls in the measured window */
    bench_spread_t s[FORMS], st[FORMS], sb, sd[FORMS];
    crossover_pair_t pr[PAIRS];
} crossover_row_t;

typedef struct crossover_routing {
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
} crossover_routing_t;

enum { K_FAV, K_UNFAV, K_NOWIN };
typedef struct crossover_finding {
    int kind;
    char text[320];
} crossover_finding_t;

typedef struct crossover_callgrind {
    unsigned bytes;
    double per[FORMS];
} crossover_callgrind_t;

typedef struct crossover_env {
    char cpu[160];
    char commit[128];
    char date[40];
    char load_start[64], load_end[64];
    char command[1024];
    unsigned workers;
    long cores;
} crossover_env_t;

/* Everything a run measured and concluded; the renderers read only this. */
typedef struct crossover_results {
    crossover_options_t opt;
    crossover_env_t env;
    double eps;
    crossover_frames_t tier_sets[TIERS];
    crossover_frames_t *sweep_sets;
    unsigned gate_inputs[TIERS], gate_distinct[TIERS];
    unsigned sweep_gate_lengths, sweep_gate_min_inputs;
    crossover_row_t tier_rows[TIERS * (1 + CONCS)];
    unsigned n_tier_rows;
    crossover_row_t *sweep;
    unsigned n_sweep;
    crossover_routing_t routing[TIERS * 2 + ROUTER_MAX_BUCKETS];
    unsigned n_routing;
    crossover_finding_t *findings;
    unsigned n_findings, cap_findings;
    int crossover, crossover_first, crossover_regs;
    const char *crossover_source;
    unsigned undecided[SWEEP_HI + 1];
    unsigned n_undecided;
    crossover_callgrind_t cg[TIERS];
    int have_cg;
    router_report_t rep_direct, rep_actors, rep_sweep;
    double timer_overhead;
    const char *timer;
    volatile unsigned sink; /* every decode's status adds in, so none is optimised away */
} crossover_results_t;

/* The targets, per tier: routed / bound (direct), the router on the
 * oracle's arm (direct layer), dispatch at concurrency 1 (native form). */
typedef struct crossover_target {
    unsigned bytes;
    double bound, bound_target;
    int bound_met;
    const char *router_arm, *oracle_arm;
    int oracle_met;
    double dispatch;
    int dispatch_met;
} crossover_target_t;

/* The actor pool: a driver actor and MAX_CONC parse actors, each parse actor
 * with its own handle on the pool's own router. */
typedef struct crossover_actors crossover_actors_t;

/* What a run decodes through: the direct layer's router, an epsilon-1 router
 * for the gate (so both arms pass through router_decode), the sweep's own
 * router, one handle on each, and the actor pool. */
typedef struct crossover_rig {
    router_t *direct, *explore, *sweep;
    router_thread_t *dt, *et, *st;
    crossover_actors_t *actors;
} crossover_rig_t;

/* ---- crossover_frames.c ---- */
/* 16 valid responses of exactly len bytes (5..256), distinct slaves and data. */
void crossover_make_frames(crossover_frames_t *set, size_t len, uint64_t seed);
/* The gate over the three tiers (their frame sets made here, into
 * R->tier_sets), in both layers; then, with --sweep, over every length
 * 5..256 in the direct layer (R->sweep_sets and R->sweep allocated here).
 * 0, or -1 after printing why on stderr (a failed gate prints the frame and
 * the differing envelope bytes). */
int crossover_gate_tiers(crossover_results_t *R, const crossover_rig_t *g);
int crossover_gate_sweep(crossover_results_t *R, const crossover_rig_t *g);

/* ---- crossover_layers.c ---- */
rtu_status_t crossover_decode_form(int form, router_thread_t *rt, const uint8_t *adu, size_t len,
                                   rtu_envelope_t *out);
/* n frames of set (its 16 cycled) in one form; returns a sink of their envelopes. */
unsigned crossover_run_batch(int form, router_thread_t *rt, const crossover_frames_t *set,
                             unsigned n);
/* 0 and *out, or -1 with nothing left started. max_tasks sizes the latency buffer. */
int crossover_actors_start(const router_config_t *cfg, unsigned max_tasks,
                           crossover_actors_t **out);
void crossover_actors_stop(crossover_actors_t *L); /* NULL is fine */
unsigned crossover_actors_workers(const crossover_actors_t *L);
router_t *crossover_actors_router(const crossover_actors_t *L);
/* One batch through the pool: tasks frames of set at conc in flight, or (check
 * not NULL) the inputs, each envelope into check[i]. 0 or -1. */
int crossover_actors_batch(crossover_actors_t *L, int form, unsigned conc, unsigned tasks,
                           const crossover_frames_t *set, const crossover_gate_input_t *inputs,
                           rtu_envelope_t *check);
/* One round of a row: every form once, in an order that rotates with round;
 * measured rounds fill slot m of the row's samples. */
void crossover_direct_round(crossover_row_t *row, router_t *router, router_thread_t *rt,
                            const crossover_options_t *opt, unsigned round, int measured,
                            size_t m, double eps, volatile unsigned *sink);
int crossover_actor_round(crossover_row_t *row, crossover_actors_t *L,
                          const crossover_options_t *opt, unsigned round, int measured, size_t m);

/* ---- crossover_callgrind.c ---- */
/* --only FORM --bytes N --iterations K: decode and nothing else (what
 * valgrind counts). The exit code. */
int crossover_run_only(const crossover_options_t *opt);
/* Instructions per frame per tier and form, from two valgrind runs each. 0 or -1. */
int crossover_callgrind(const crossover_options_t *opt, crossover_callgrind_t *out);

/* ---- crossover_verdict.c ---- */
int crossover_rows_alloc(crossover_results_t *R); /* the tier rows and the sweep's; 0 or -1 */
int crossover_rounds(crossover_results_t *R, const crossover_rig_t *g); /* 0 or -1 */
/* Statistics, oracles, router reports, routing verdicts, findings, the crossover. */
void crossover_analyse(crossover_results_t *R, const crossover_rig_t *g);
void crossover_results_free(crossover_results_t *R);
/* "native", "fallback" or "undecided": the native vs fallback verdict of a row. */
const char *crossover_faster_form(const crossover_row_t *r);
void crossover_targets(const crossover_results_t *R, crossover_target_t *t);

/* ---- the renderers ---- */
void crossover_write_markdown(FILE *o, const crossover_results_t *R);
void crossover_write_json(FILE *o, const crossover_results_t *R);
int crossover_write_svg(const char *path, const crossover_results_t *R); /* 0 or -1 */

#endif
