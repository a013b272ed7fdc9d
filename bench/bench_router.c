/*
 * bench/bench_router.c -- `rtugw bench router`: what routing costs.
 *
 * Method: three tiers (7, 21, 255 bytes; 16 distinct read-registers
 * responses each, cycled). Every round times, per tier and side by side,
 * a batch of frames decoded by: native only, fallback only, the router
 * (epsilon and sample rate as configured; it keeps learning across rounds),
 * and two "dispatch only" routers (epsilon 0, timing off, pinned to native
 * and to fallback: what the table look-up and the call through it cost,
 * and what each arm costs called the router's way). The order of the five
 * rotates every round. (Forms taking turns every 2000 frames instead did
 * not narrow the spread of the ratios on the EPYC VM, and put 7 bytes
 * 2-10 % higher: each slice starts with the predictors set by another form.)
 * Per-frame cost = a batch's time / its frames, exploration pulls included.
 * Warm-up rounds (in which the router also learns) are dropped; reported:
 * median and p10-p90 over measured rounds of
 *   - ns per frame for each form;
 *   - routed / bound, bound = faster + epsilon/2 x (slower - faster), the
 *     cost of a perfect router that explores at epsilon (paired per round);
 *   - routed / faster;
 *   - exploration's own cost = mix - faster, where mix weighs each arm's
 *     single-arm time by the router's actual pull shares in that round;
 *   - the router's own overhead per parse = routed - mix (table look-up,
 *     counters, timer reads, learning);
 *   - dispatch-only overhead = dispatch - its arm alone, per arm.
 * At the end the median single-arm costs become the oracle of each tier's
 * bucket, and the router's report gives the verdict, the oracle's arm and
 * the regret. The pinned dispatch forms give a second oracle, in the
 * router's context: which arm is cheaper called through the router, as the
 * router itself sees them. Where the two oracles disagree, the arms are
 * within the dispatch's own difference between them.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DISTINCT_FRAMES 16
#define FORMS 5 /* native, fallback, routed, dispatch to native, dispatch to fallback */

static const unsigned tier_registers[] = { 1, 8, 125 };
#define TIER_COUNT (sizeof tier_registers / sizeof tier_registers[0])
static const char *const form_names[FORMS] = { "native", "fallback", "routed", "dispatch_native",
                                                "dispatch_fallback" };

/* per-round metrics, per tier */
enum { M_RATIO_BOUND, M_RATIO_FASTER, M_EXPLORE, M_OVERHEAD, M_DISPATCH, M_DISPATCH_FB, M_BOUND,
       M_COUNT };
static const char *const metric_names[M_COUNT] = {
    "routed_over_bound", "routed_over_faster", "exploration_ns", "router_overhead_ns",
    "dispatch_overhead_ns", "dispatch_fallback_overhead_ns", "bound_ns",
};

typedef struct frame_set {
    uint8_t adu[DISTINCT_FRAMES][RTU_MAX_ADU];
    size_t len;
} frame_set_t;

typedef struct router_bench_options {
    unsigned rounds, warmup, frames, sample_every, explore_run;
    unsigned tiers; /* bit k: tier k is measured */
    double epsilon;
    router_policy_t policy;
    int json;
} router_bench_options_t;

static void make_frames(frame_set_t *set, unsigned registers, uint64_t seed)
{
    for (unsigned f = 0; f < DISTINCT_FRAMES; f++)
        set->len = bench_register_frame(set->adu[f], 1 + f, registers, &seed);
}

static unsigned run_arm(rtu_decode_fn fn, const frame_set_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        fn(set->adu[i % DISTINCT_FRAMES], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

static unsigned run_routed(router_thread_t *t, const frame_set_t *set, unsigned n)
{
    rtu_envelope_t env;
    unsigned sink = 0;
    for (unsigned i = 0; i < n; i++) {
        router_decode(t, set->adu[i % DISTINCT_FRAMES], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

/* The arm that is cheaper called through the router: the pinned dispatch
 * forms' medians. */
static router_arm_t context_oracle(const bench_spread_t form[FORMS])
{
    return form[4].median < form[3].median ? ROUTER_ARM_FALLBACK : ROUTER_ARM_NATIVE;
}

static int check_routed(router_thread_t *t, const frame_set_t *set)
{
    rtu_envelope_t want, got;
    for (unsigned i = 0; i < 4 * DISTINCT_FRAMES; i++) {
        const uint8_t *a = set->adu[i % DISTINCT_FRAMES];
        rtu_decode_reference(a, set->len, &want);
        router_decode(t, a, set->len, &got);
        if (want.status != RTU_OK || memcmp(&want, &got, sizeof want) != 0) {
            fprintf(stderr, "bench router: routed decode disagrees with reference at %zu bytes\n",
                    set->len);
            return -1;
        }
    }
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench router [--json] [--rounds N] [--warmup N] [--frames N]\n"
            "                          [--epsilon E] [--sample-every K] [--explore-run R]\n"
            "                          [--policy P] [--bytes 7,21,255]\n"
            "\n"
            "Routed decode against the faster single arm at 7, 21 and 255 bytes, side by side\n"
            "in every round: ns per frame, routed / bound (bound = faster + epsilon/2 x\n"
            "(slower - faster)), exploration's own cost and the router's overhead per parse;\n"
            "median and p10-p90 over measured rounds; then each bucket's verdict and regret\n"
            "against the oracle (the single-arm medians).\n"
            "  --rounds N        measured rounds (default 101)\n"
            "  --warmup N        warm-up rounds, not reported; the router learns (default 10)\n"
            "  --frames N        frames per form per round per tier (default 20000: the\n"
            "                    router's window, 262144 pulls, fills in the measured rounds)\n"
            "  --epsilon E       exploration rate (default 0.05)\n"
            "  --sample-every K  measure 1 in K exploitation pulls (default 4096)\n"
            "  --explore-run R   explore and measure in segments of R pulls (default 64)\n"
            "  --policy P        epsilon-greedy (default) or thompson (explores less once\n"
            "                    one arm is clearly cheaper; docs/router.md)\n"
            "  --bytes LIST      only these tiers, of 7, 21 and 255 (default all three;\n"
            "                    one tier alone suits valgrind --tool=callgrind)\n"
            "  --json            JSON instead of Markdown\n");
}

/* "7,21" -> bits of tier_registers (a tier's frame is 5 + 2 x registers
 * bytes long). */
static int parse_tiers(void *dst, const char *list)
{
    unsigned *mask = dst;
    *mask = 0;
    for (const char *p = list;;) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        size_t k = 0;
        while (k < TIER_COUNT && 5 + 2 * (unsigned long)tier_registers[k] != v)
            k++;
        if (end == p || errno || k == TIER_COUNT || (*end && *end != ','))
            return -1;
        *mask |= 1u << k;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static int parse_policy(void *dst, const char *text)
{
    return router_parse_policy(text, dst) == 0 ? 0 : -1;
}

static int parse_options(int argc, char **argv, router_bench_options_t *opt)
{
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &opt->json),
        BENCH_UINT("rounds", &opt->rounds, 1, 100000000),
        BENCH_UINT("warmup", &opt->warmup, 0, 100000000),
        BENCH_UINT("frames", &opt->frames, 1, 100000000),
        BENCH_CALL("bytes", parse_tiers, &opt->tiers, required_argument, "a list of 7, 21, 255"),
        BENCH_DOUBLE("epsilon", &opt->epsilon, 0.0, 1.0),
        BENCH_UINT("sample-every", &opt->sample_every, 1, 100000000),
        BENCH_UINT("explore-run", &opt->explore_run, 1, 100000000),
        BENCH_CALL("policy", parse_policy, &opt->policy, required_argument, "epsilon-greedy or thompson"),
        BENCH_OPT_END,
    };
    return bench_options(argc, argv, "router", opts, usage, NULL);
}

int bench_router_main(int argc, char **argv)
{
    router_config_t defaults;
    router_config_default(&defaults);
    router_bench_options_t opt = { .rounds = 101, .warmup = 10, .frames = 20000,
                                   .tiers = (1u << TIER_COUNT) - 1,
                                   .sample_every = defaults.sample_every,
                                   .explore_run = defaults.explore_run,
                                   .epsilon = defaults.epsilon };
    int rc = parse_options(argc, argv, &opt);
    if (rc >= 0)
        return rc;

    static frame_set_t sets[TIER_COUNT];
    size_t nt = 0; /* the tiers measured: sets[0..nt) */
    router_config_t cfg, plain_cfg;
    router_t *r = NULL, *plain = NULL, *plain_fb = NULL;
    router_config_default(&cfg);
    cfg.epsilon = opt.epsilon;
    cfg.sample_every = opt.sample_every;
    cfg.explore_run = opt.explore_run;
    cfg.policy = opt.policy;
    plain_cfg = cfg;
    plain_cfg.epsilon = 0.0;
    plain_cfg.sample_every = 0xFFFFFFFFu;
    plain_cfg.default_arm = ROUTER_ARM_NATIVE;
    router_config_t fb_cfg = plain_cfg;
    fb_cfg.default_arm = ROUTER_ARM_FALLBACK;
    if (router_new(&cfg, &r) != 0 || router_new(&plain_cfg, &plain) != 0 ||
        router_new(&fb_cfg, &plain_fb) != 0) {
        fprintf(stderr, "bench router: cannot create the router\n");
        router_free(r);
        router_free(plain);
        return 1;
    }
    router_thread_t *t = router_thread_new(r), *pt = router_thread_new(plain);
    router_thread_t *pft = router_thread_new(plain_fb);
    size_t total = opt.rounds;
    double *ns = calloc(TIER_COUNT * FORMS * total, sizeof *ns);
    double *met = calloc(TIER_COUNT * M_COUNT * total, sizeof *met);
    char *json = malloc(65536);
    volatile unsigned sink = 0;
    int status = 1;

    if (!t || !pt || !pft || !ns || !met || !json)
        goto out;
    for (size_t k = 0; k < TIER_COUNT; k++) {
        if (!(opt.tiers >> k & 1))
            continue;
        make_frames(&sets[nt], tier_registers[k], 0x9E3779B97F4A7C15ull + k);
        if (check_routed(t, &sets[nt++]) != 0)
            goto out;
    }

    for (unsigned round = 0; round < opt.warmup + opt.rounds; round++) {
        for (size_t k = 0; k < nt; k++) {
            unsigned bucket = router_bucket_of(r, sets[k].len);
            router_report_t rep;
            uint64_t p0[2], p1[2];
            double x[FORMS];
            router_report(r, &rep);
            p0[0] = rep.bucket[bucket].pulls[0];
            p0[1] = rep.bucket[bucket].pulls[1];
            for (unsigned j = 0; j < FORMS; j++) {
                unsigned f = (j + round) % FORMS;
                uint64_t t0 = bench_now_ns();
                if (f == 0)
                    sink += run_arm(rtu_decode_native, &sets[k], opt.frames);
                else if (f == 1)
                    sink += run_arm(rtu_decode_fallback, &sets[k], opt.frames);
                else if (f == 2)
                    sink += run_routed(t, &sets[k], opt.frames);
                else if (f == 3)
                    sink += run_routed(pt, &sets[k], opt.frames);
                else
                    sink += run_routed(pft, &sets[k], opt.frames);
                x[f] = (double)(bench_now_ns() - t0) / opt.frames;
            }
            router_report(r, &rep);
            p1[0] = rep.bucket[bucket].pulls[0] - p0[0];
            p1[1] = rep.bucket[bucket].pulls[1] - p0[1];
            if (round < opt.warmup)
                continue;
            size_t m = round - opt.warmup;
            for (unsigned f = 0; f < FORMS; f++)
                ns[(k * FORMS + f) * total + m] = x[f];
            double faster = x[0] < x[1] ? x[0] : x[1], slower = x[0] < x[1] ? x[1] : x[0];
            double bound = faster + opt.epsilon / 2.0 * (slower - faster);
            double pulls = (double)(p1[0] + p1[1]);
            double mix = pulls > 0 ? ((double)p1[0] * x[0] + (double)p1[1] * x[1]) / pulls : x[2];
            double *row = &met[k * M_COUNT * total];
            row[M_RATIO_BOUND * total + m] = x[2] / bound;
            row[M_RATIO_FASTER * total + m] = x[2] / faster;
            row[M_EXPLORE * total + m] = mix - faster;
            row[M_OVERHEAD * total + m] = x[2] - mix;
            row[M_DISPATCH * total + m] = x[3] - x[0];
            row[M_DISPATCH_FB * total + m] = x[4] - x[1];
            row[M_BOUND * total + m] = bound;
        }
    }

    /* Oracle: the single-arm medians. */
    bench_spread_t s[TIER_COUNT][FORMS], ms[TIER_COUNT][M_COUNT];
    for (size_t k = 0; k < nt; k++) {
        for (unsigned f = 0; f < FORMS; f++)
            bench_spread(&ns[(k * FORMS + f) * total], total, &s[k][f]);
        for (unsigned mi = 0; mi < M_COUNT; mi++)
            bench_spread(&met[(k * M_COUNT + mi) * total], total, &ms[k][mi]);
        router_set_oracle(r, router_bucket_of(r, sets[k].len), s[k][0].median, s[k][1].median);
    }
    router_report_t rep;
    router_report(r, &rep);

    if (opt.json) {
        printf("{\"native_features\":\"%s\",\"policy\":\"%s\",\"epsilon\":%g,"
               "\"sample_every\":%u,"
               "\"explore_run\":%u,\"rounds\":%u,"
               "\"warmup\":%u,\"frames_per_round\":%u,\"timer\":\"%s\","
               "\"timer_overhead_ns\":%.1f,\"timer_resolution_ns\":%.1f,\"tiers\":[",
               rtu_native_features(), router_policy_name(opt.policy), opt.epsilon,
               opt.sample_every, opt.explore_run, opt.rounds, opt.warmup, opt.frames, rep.timer, rep.timer_overhead_ns,
               rep.timer_resolution_ns);
    } else {
        printf("# rtugw bench router\n\nnative features: %s; %s, epsilon %g, 1 in %u "
               "exploitation "
               "pulls measured, in segments of %u pulls (explorations paired with a segment on "
               "the choice; span or last pull timed; timer %s, overhead %.1f ns subtracted, "
               "resolution %.1f ns); %u measured rounds (%u warm-up dropped), %u frames per "
               "form per round, forms rotated in each round.\n\n"
               "| bytes | form | ns/frame median | p10 | p90 |\n|---:|---|---:|---:|---:|\n",
               rtu_native_features(), router_policy_name(opt.policy), opt.epsilon,
               opt.sample_every, opt.explore_run, rep.timer, rep.timer_overhead_ns, rep.timer_resolution_ns, opt.rounds,
               opt.warmup, opt.frames);
    }
    int all_ok = 1, all_ctx = 1;
    for (size_t k = 0; k < nt; k++) {
        unsigned b = router_bucket_of(r, sets[k].len);
        const router_bucket_report_t *br = &rep.bucket[b];
        char verdict[64];
        router_verdict_text(br, verdict, sizeof verdict);
        double target = sets[k].len <= 8 ? 1.10 : 1.05;
        int met_target = ms[k][M_RATIO_BOUND].median <= target;
        int oracle_ok = br->verdict == ROUTER_VERDICT_CONVERGED && br->chosen == br->oracle_arm;
        router_arm_t ctx_arm = context_oracle(s[k]);
        int ctx_ok = br->verdict == ROUTER_VERDICT_CONVERGED && br->chosen == ctx_arm;
        all_ok &= met_target && oracle_ok;
        all_ctx &= ctx_ok;
        if (opt.json) {
            printf("%s{\"bytes\":%zu,\"bucket\":\"%u..%u\",\"forms\":{", k ? "," : "", sets[k].len,
                   br->lo, br->hi);
            for (unsigned f = 0; f < FORMS; f++)
                printf("%s\"%s\":{\"ns_median\":%.2f,\"ns_p10\":%.2f,\"ns_p90\":%.2f}",
                       f ? "," : "", form_names[f], s[k][f].median, s[k][f].p10, s[k][f].p90);
            printf("}");
            for (unsigned mi = 0; mi < M_COUNT; mi++)
                printf(",\"%s\":{\"median\":%.4f,\"p10\":%.4f,\"p90\":%.4f}", metric_names[mi],
                       ms[k][mi].median, ms[k][mi].p10, ms[k][mi].p90);
            printf(",\"target\":%.2f,\"target_met\":%s,\"verdict\":\"%s\",\"oracle_arm\":\"%s\","
                   "\"converged_to_oracle\":%s,\"oracle_in_context_arm\":\"%s\","
                   "\"converged_to_oracle_in_context\":%s,\"regret_ns_per_pull\":%.3f}",
                   target, met_target ? "true" : "false", verdict,
                   router_arm_name(br->oracle_arm), oracle_ok ? "true" : "false",
                   router_arm_name(ctx_arm), ctx_ok ? "true" : "false", br->regret_ns_per_pull);
        } else {
            for (unsigned f = 0; f < FORMS; f++)
                printf("| %zu | %s | %.2f | %.2f | %.2f |\n", sets[k].len, form_names[f],
                       s[k][f].median, s[k][f].p10, s[k][f].p90);
        }
    }
    if (opt.json) {
        int n = router_report_json(&rep, json, 65536);
        printf("],\"all_targets_met\":%s,\"converged_to_oracle_in_context\":%s,\"report\":%s}\n",
               all_ok ? "true" : "false", all_ctx ? "true" : "false", n > 0 ? json : "null");
    } else {
        printf("\n| bytes | routed / bound (target) | p10 | p90 | routed / faster | exploration ns "
               "| router overhead ns (p10-p90) | dispatch-only ns (native / fallback) | verdict "
               "| oracle (direct / in context) | regret ns/pull |\n"
               "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|\n");
        for (size_t k = 0; k < nt; k++) {
            const router_bucket_report_t *br = &rep.bucket[router_bucket_of(r, sets[k].len)];
            char verdict[64];
            printf("| %zu | %.3f (%.2f) | %.3f | %.3f | %.3f | %.2f | %.2f (%.2f..%.2f) | %.2f / "
                   "%.2f | %s | %s / %s | %.3f |\n",
                   sets[k].len, ms[k][M_RATIO_BOUND].median, sets[k].len <= 8 ? 1.10 : 1.05,
                   ms[k][M_RATIO_BOUND].p10, ms[k][M_RATIO_BOUND].p90,
                   ms[k][M_RATIO_FASTER].median, ms[k][M_EXPLORE].median,
                   ms[k][M_OVERHEAD].median, ms[k][M_OVERHEAD].p10, ms[k][M_OVERHEAD].p90,
                   ms[k][M_DISPATCH].median, ms[k][M_DISPATCH_FB].median,
                   router_verdict_text(br, verdict, sizeof verdict),
                   router_arm_name(br->oracle_arm), router_arm_name(context_oracle(s[k])),
                   br->regret_ns_per_pull);
        }
        printf("\nThe router's own view (its cost estimates, its paired native / fallback "
               "ratio that decides, samples and window) beside the oracle's:\n\n"
               "| bytes | router native ns | router fallback ns | paired ratio (pairs) | "
               "oracle ratio | samples (native / fallback) | window pulls (native / fallback) "
               "| minority share [interval] | oracle native ns | oracle fallback ns |\n"
               "|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n");
        for (size_t k = 0; k < nt; k++) {
            const router_bucket_report_t *br = &rep.bucket[router_bucket_of(r, sets[k].len)];
            printf("| %zu | %.2f | %.2f | %.3f (%llu) | %.3f | %llu / %llu | %llu / %llu "
                   "| %.4f [%.4f, %.4f] | %.2f | %.2f |\n",
                   sets[k].len, br->cost_ns[0], br->cost_ns[1], br->paired_ratio,
                   (unsigned long long)br->pairs, br->oracle_ns[0] / br->oracle_ns[1],
                   (unsigned long long)br->timed[0], (unsigned long long)br->timed[1],
                   (unsigned long long)br->window_pulls[0],
                   (unsigned long long)br->window_pulls[1], br->minority_share,
                   br->interval_lo, br->interval_hi, br->oracle_ns[0], br->oracle_ns[1]);
        }
        printf("\nAll targets met (ratio and converged to the oracle's arm): %s\n"
               "Converged to the in-context oracle's arm (the cheaper pinned dispatch) in every "
               "tier: %s\n",
               all_ok ? "yes" : "no", all_ctx ? "yes" : "no");
    }
    status = sink == 0xFFFFFFFFu; /* never true; keeps sink alive */
out:
    free(ns);
    free(met);
    free(json);
    router_free(r);
    router_free(plain);
    router_free(plain_fb);
    return status;
}
