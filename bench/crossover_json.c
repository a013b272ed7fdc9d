/*
 * bench/crossover_json.c -- the JSON report of `rtugw bench crossover`, one
 * object on one line; docs/crossover.md documents its keys, and
 * tests/bench/test_bench_crossover.sh checks its shape.
 */
#include "bench/crossover.h"
#include "json/json.h"

#include <stdio.h>

/* Environment strings (CPU model, host, build flags) through the project's
 * one encoder, json/json.h: escaped, and UTF-8 whatever the system says. */
static void json_str(FILE *o, const char *s)
{
    char q[JSON_QUOTED_MAX(512)];
    size_t n = json_quote(q, sizeof q, s ? s : "");
    fputs(q, o);
    (void)n;   /* a longer string is cut at a whole character, still a JSON string */
}

/* ,"key":"value" (key needs no escaping) */
static void json_field(FILE *o, const char *key, const char *value)
{
    fprintf(o, ",\"%s\":", key);
    json_str(o, value);
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

/* {"fallback":spread,"native":spread,"routed":spread} */
static void json_forms(FILE *o, const bench_spread_t *s)   /* FORMS of them */
{
    fputc('{', o);
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "%s\"%s\":", f ? "," : "", crossover_form_names[f]);
        json_spread(o, &s[f]);
    }
    fputc('}', o);
}

static void json_row(FILE *o, const crossover_row_t *r, size_t n)
{
    fprintf(o, "{\"tier\":");
    if (r->tier)
        json_str(o, r->tier);
    else
        fprintf(o, "null");
    fprintf(o, ",\"bytes\":%u,\"shape\":", r->bytes);
    json_str(o, r->shape);
    fprintf(o, ",\"layer\":\"%s\",\"concurrency\":%u,\"unit\":\"%s\"",
            crossover_layer_names[r->layer], r->conc,
            r->layer == L_DIRECT ? "ns per frame" : "ns per task, end to end (median)");
    for (int f = 0; f < FORMS; f++)
        fprintf(o, ",\"%s_ns\":%.3f", crossover_form_names[f], r->s[f].median);
    fprintf(o, ",\"faster\":\"%s\",\"verdict\":\"%s\",\"spread\":", crossover_faster_form(r),
            r->pr[P_NATIVE_FALLBACK].verdict);
    json_forms(o, r->s);
    fprintf(o, ",\"pairs\":[");
    for (int p = 0; p < PAIRS; p++) {
        fprintf(o, "%s{\"a\":\"%s\",\"b\":\"%s\",\"diff_ns\":", p ? "," : "",
                crossover_form_names[crossover_pair_a[p]],
                crossover_form_names[crossover_pair_b[p]]);
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
        fprintf(o, ",\"throughput_ns_per_task\":");
        json_forms(o, r->st);
        fprintf(o, ",\"dispatch_ns\":");
        json_forms(o, r->sd);
    }
    fprintf(o, ",\"samples\":{");
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "%s\"%s\":", f ? "," : "", crossover_form_names[f]);
        json_samples(o, r->ns[f], n);
    }
    fprintf(o, "}}");
}

void crossover_write_json(FILE *o, const crossover_results_t *R)
{
    const crossover_options_t *opt = &R->opt;
    size_t n = opt->rounds;
    fprintf(o, "{\"command\":");
    json_str(o, R->env.command);
    fprintf(o, ",\"environment\":{\"date\":");
    json_str(o, R->env.date);
    json_field(o, "cpu", R->env.cpu);
    fprintf(o, ",\"cores\":%ld", R->env.cores);
    json_field(o, "native_features", rtu_native_features());
    json_field(o, "compiler", "gcc " __VERSION__);
    json_field(o, "cflags", RTUGW_BUILD_CFLAGS);
    json_field(o, "commit", R->env.commit);
    json_field(o, "load_start", R->env.load_start);
    json_field(o, "load_end", R->env.load_end);
    fprintf(o, ",\"workers\":%u", R->env.workers);
    json_field(o, "timer", R->timer);
    fprintf(o, ",\"timer_overhead_ns\":%.2f}", R->timer_overhead);
    fprintf(o, ",\"gate\":{\"passed\":true,\"inputs\":%u,\"tiers\":[", GATE_INPUTS);
    for (unsigned t = 0; t < TIERS; t++)
        fprintf(o, "%s{\"tier\":\"%s\",\"bytes\":%u,\"inputs\":%u,\"distinct\":%u,"
                   "\"forms\":[\"fallback\",\"native\",\"routed\"],\"layers\":[\"direct\",\"actors\"]}",
                t ? "," : "", crossover_tier_names[t], crossover_tier_bytes[t], R->gate_inputs[t],
                R->gate_distinct[t]);
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
        const crossover_routing_t *e = &R->routing[i];
        fprintf(o, "%s{\"tier\":", i ? "," : "");
        if (e->tier)
            json_str(o, e->tier);
        else
            fprintf(o, "null");
        fprintf(o, ",\"bytes\":%u,\"layer\":\"%s\",\"bucket\":[%u,%u],\"exploration_rate\":%g,"
                   "\"window_arms\":{\"native\":%llu,\"fallback\":%llu},\"router_verdict\":",
                e->bytes, crossover_layer_names[e->layer], e->lo, e->hi, R->eps,
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
    crossover_target_t tg[TIERS];
    crossover_targets(R, tg);
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

