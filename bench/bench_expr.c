/*
 * bench/bench_expr.c -- `rtugw bench expr`: computed tags' evaluations per
 * second on one core, a 5-operator expression (a SunSpec value and scale
 * factor plus an offset and a halving: (W * 10^W_SF + A) / 2 - B, the
 * operators * ^ + / -), median and p10-p90 over measured rounds, side by
 * side in one run:
 *
 *   eval   expr_engine_eval alone: the inputs' values read from the table,
 *          pushed into Lua, the step budget armed, the call, the result
 *          checked and stored (what each evaluation costs the poller);
 *   read   a poll answer stored (tags_table_apply of the four inputs) and
 *          the engine run it triggers: the whole path of one read;
 *   C      the same arithmetic in C, for scale (what Lua's share is).
 *
 * The target is 100,000 evaluations/s; the verdict line says
 * whether the median of `eval` meets it.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "expr/expr.h"
#include "tags/tags.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct expr_options {
    unsigned rounds, warmup, evals;
} expr_options_t;

static void usage(FILE *to)
{
    fprintf(to, "usage: rtugw bench expr [--rounds N] [--warmup N] [--evals N]\n\n"
                "Evaluations/s of a 5-operator computed tag on one core: the evaluation alone,\n"
                "a poll answer's whole path (store + evaluate), and the same arithmetic in C.\n"
                "  --rounds N   measured rounds (default 21), --warmup N (default 3)\n"
                "  --evals N    evaluations per round (default 200000)\n");
}

static const char *const CSV =
    "name,device,table,address,type,interval_ms,expr\n"
    "W,inv,holding,100,int16,1000,\n"
    "W_SF,inv,holding,101,int16,1000,\n"
    "A,inv,holding,102,uint16,1000,\n"
    "B,inv,holding,103,uint16,1000,\n"
    "out,inv,,,,,(W * 10^W_SF + A) / 2 - B\n";

static volatile double sink;

int bench_expr_main(int argc, char **argv)
{
    expr_options_t o = { .rounds = 21, .warmup = 3, .evals = 200000 };
    const bench_opt_t opts[] = {
        BENCH_UINT("rounds", &o.rounds, 1, 100000),
        BENCH_UINT("warmup", &o.warmup, 0, 100000),
        BENCH_UINT("evals", &o.evals, 1, 100000000),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "expr", opts, usage, NULL);
    if (rc >= 0)
        return rc;

    tags_table_t *t = tags_table_new(16);
    tags_errors_t errs;
    char msg[256];
    unsigned errors;
    if (!t || tags_load_csv_string(t, CSV, "bench.csv", NULL, 0, &errs) < 0) {
        fprintf(stderr, "bench expr: %s\n", t ? errs.text[0] : "out of memory");
        return 1;
    }
    expr_engine_t *e = expr_engine_new(t, NULL, "bench", NULL, NULL, &errors);
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan = NULL;
    if (!e || !pl || tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg) < 0 || tags_plan_read_count(plan) != 1) {
        fprintf(stderr, "bench expr: setup failed (%u expression errors)\n", errors);
        return 1;
    }
    size_t out = (size_t)tags_table_find(t, "out");
    uint16_t words[4] = { 1234, (uint16_t)-2, 500, 7 };
    int64_t now = 1000000;
    unsigned evaluated[4];

    size_t n = o.rounds;
    double *s_eval = calloc(n, sizeof *s_eval), *s_read = calloc(n, sizeof *s_read), *s_c = calloc(n, sizeof *s_c);
    if (!s_eval || !s_read || !s_c)
        return 1;
    tags_table_apply(t, plan, 0, words, 4, now);
    expr_engine_run(e, now, evaluated, 4);
    for (unsigned r = 0; r < o.warmup + o.rounds; r++) {
        uint64_t t0 = bench_now_ns();
        for (unsigned k = 0; k < o.evals; k++)
            expr_engine_eval(e, out, now);
        uint64_t t1 = bench_now_ns();
        for (unsigned k = 0; k < o.evals; k++) {
            words[0] = (uint16_t)(1000 + (k & 255));
            tags_table_apply(t, plan, 0, words, 4, now);
            expr_engine_run(e, now, evaluated, 4);
        }
        uint64_t t2 = bench_now_ns();
        double acc = 0;
        for (unsigned k = 0; k < o.evals; k++) {
            double w = (int16_t)(1000 + (k & 255)), sf = (int16_t)words[1];
            acc += (w * pow(10, sf) + words[2]) / 2 - words[3];
        }
        sink = acc;
        uint64_t t3 = bench_now_ns();
        if (r < o.warmup)
            continue;
        s_eval[r - o.warmup] = o.evals / ((double)(t1 - t0) / 1e9);
        s_read[r - o.warmup] = o.evals / ((double)(t2 - t1) / 1e9);
        s_c[r - o.warmup] = o.evals / ((double)(t3 - t2) / 1e9);
    }
    tags_value_t v;
    tags_table_value(t, out, now, &v);
    bench_spread_t a, b, c;
    bench_spread(s_eval, n, &a);
    bench_spread(s_read, n, &b);
    bench_spread(s_c, n, &c);
    printf("# rtugw bench expr: (W * 10^W_SF + A) / 2 - B, %u rounds of %u, one core\n\n", o.rounds, o.evals);
    printf("| path | evaluations/s median | p10 | p90 | ns each (median) |\n|---|---|---|---|---|\n");
    const struct { const char *name; bench_spread_t *s; } rows[] = {
        { "eval (expr_engine_eval)", &a }, { "read (apply + run)", &b }, { "C arithmetic", &c } };
    for (size_t k = 0; k < 3; k++)
        printf("| %s | %.0f | %.0f | %.0f | %.0f |\n", rows[k].name, rows[k].s->median, rows[k].s->p10, rows[k].s->p90,
               1e9 / rows[k].s->median);
    printf("\nlast value %s %.6g; target 100,000 evaluations/s: %s\n", tags_quality_name(v.quality), v.eng,
           a.median >= 100000 ? "met" : "NOT met");
    expr_engine_free(e);
    tags_plan_free(plan);
    tags_planner_free(pl);
    tags_table_free(t);
    free(s_eval);
    free(s_read);
    free(s_c);
    return v.quality == TAGS_GOOD ? 0 : 1;
}
