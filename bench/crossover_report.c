/*
 * bench/crossover_report.c -- the Markdown report of `rtugw bench crossover`:
 * environment, method, the gate, both layers' tables, the crossover, routing
 * verdicts, the targets, the findings sorted by kind, and with
 * --callgrind / --sweep their tables. Tables show median [p25-p75].
 */
#include "bench/crossover.h"

#include <stdio.h>

static void md_spread(FILE *o, const bench_spread_t *s)
{
    fprintf(o, "%.1f [%.1f–%.1f]", s->median, s->p25, s->p75);
}

static void md_pair(FILE *o, const crossover_pair_t *p)
{
    fprintf(o, "%+.2f [%+.2f, %+.2f] **%s**", p->d.median, p->d.p25, p->d.p75, p->verdict);
}

/* A row's three forms, each cell closed by " | ". */
static void md_forms(FILE *o, const crossover_row_t *r)
{
    for (int f = 0; f < FORMS; f++) {
        md_spread(o, &r->s[f]);
        fprintf(o, " | ");
    }
}

/* The three forms, then the three pairs. */
static void md_cells(FILE *o, const crossover_row_t *r)
{
    md_forms(o, r);
    for (int p = 0; p < PAIRS; p++) {
        md_pair(o, &r->pr[p]);
        fprintf(o, " | ");
    }
}

/* The tier rows of one layer's table: direct rows end with routed / bound
 * (target), actor rows with dispatch and wall time per task. */
static void md_tier_rows(FILE *o, const crossover_results_t *R, int layer)
{
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        const crossover_row_t *r = &R->tier_rows[i];
        if (r->layer != layer)
            continue;
        if (layer == L_DIRECT)
            fprintf(o, "| %s | %u | ", r->tier, r->bytes);
        else
            fprintf(o, "| %s | %u | %u | ", r->tier, r->bytes, r->conc);
        md_cells(o, r);
        if (layer == L_DIRECT)
            fprintf(o, "%.3f [%.3f–%.3f] (%.2f) |\n", r->sb.median, r->sb.p25, r->sb.p75,
                    r->bytes <= 8 ? 1.10 : 1.05);
        else
            fprintf(o, "%.0f | %.0f / %.0f / %.0f |\n", r->sd[F_NATIVE].median,
                    r->st[0].median, r->st[1].median, r->st[2].median);
    }
}

static void md_findings(FILE *o, const crossover_results_t *R, int kind)
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

/* The targets, per tier: routed / bound (direct), the router on the
 * oracle's arm (direct layer), dispatch at concurrency 1 (native form). */
void crossover_write_markdown(FILE *o, const crossover_results_t *R)
{
    const crossover_options_t *opt = &R->opt;
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
                crossover_tier_names[t], crossover_tier_bytes[t], R->gate_inputs[t],
                R->gate_distinct[t]);
    if (opt->sweep)
        fprintf(o, "| sweep | 5–256 | %u per length, %u lengths | fallback, native, routed | "
                   "direct | passed |\n",
                R->sweep_gate_min_inputs, R->sweep_gate_lengths);
    fprintf(o, "\n");

    fprintf(o, "## Direct layer (one thread): ns per frame\n\n"
               "| tier | bytes | fallback | native | routed | native − fallback | routed − fallback "
               "| routed − native | routed / bound (target) |\n"
               "|---|---:|---:|---:|---:|---|---|---|---|\n");
    md_tier_rows(o, R, L_DIRECT);
    fprintf(o, "\n## Actor layer: per-task end-to-end ns (send → reply handled)\n\n"
               "| tier | bytes | c | fallback | native | routed | native − fallback | routed − "
               "fallback | routed − native | dispatch ns (native) | wall ns/task f / n / r |\n"
               "|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n");
    md_tier_rows(o, R, L_ACTORS);
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
        const crossover_routing_t *e = &R->routing[i];
        char bytes[16];
        snprintf(bytes, sizeof bytes, e->bytes ? "%u" : "%u..%u", e->bytes ? e->bytes : e->lo,
                 e->hi);
        fprintf(o, "| %s | %s | %s | %u..%u | %llu / %llu | %g | %s | %s | %s | %s | %.3f; %.3f |\n",
                e->tier ? e->tier : "sweep", bytes, crossover_layer_names[e->layer],
                e->lo, e->hi, (unsigned long long)e->pulls[0], (unsigned long long)e->pulls[1],
                R->eps, e->router_verdict, e->paired_winner,
                e->agrees < 0 ? "n/a" : e->agrees ? "yes" : "**no**", e->oracle_arm,
                e->regret_window, e->regret_router);
    }
    fprintf(o, "\n");

    crossover_target_t tg[TIERS];
    crossover_targets(R, tg);
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
            const crossover_row_t *r = &R->sweep[i];
            int better = r->s[F_NATIVE].median <= r->s[F_FALLBACK].median ? P_ROUTED_NATIVE
                                                                            : P_ROUTED_FALLBACK;
            fprintf(o, "| %u | %s | ", r->bytes, r->shape);
            md_forms(o, r);
            md_pair(o, &r->pr[P_NATIVE_FALLBACK]);
            fprintf(o, " | vs %s: %s |\n", crossover_form_names[crossover_pair_b[better]],
                    r->pr[better].verdict);
        }
        fprintf(o, "\n");
    }
    (void)n;
}

