/*
 * routing/report.c -- the merged per-bucket report, its verdicts and JSON.
 *
 * Verdict (docs/router.md): over the bucket's last window of n pulls, with
 * m pulls of the minority arm and p0 = epsilon/2 the share exploration alone
 * gives the arm not chosen:
 *   - "default, not a decision" when m == 0 or an arm has no cost data:
 *     the majority is the default (or a loaded table), nothing was compared;
 *   - "converged to ARM" when ARM holds the majority, is the current choice,
 *     and p0 lies inside the Wilson score interval (z = 4) of m/n, counted
 *     in runs of explore_run pulls (the unit exploration draws);
 *   - "not converged" otherwise.
 */
#include "routing/internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VERDICT_Z 4.0

/* Wilson score interval for k successes in n trials. */
static void wilson(double k, double n, double z, double *lo, double *hi)
{
    if (n <= 0.0) {
        *lo = 0.0;
        *hi = 1.0;
        return;
    }
    double nn = n, p = k / nn, z2 = z * z;
    double denom = 1.0 + z2 / nn;
    double centre = (p + z2 / (2.0 * nn)) / denom;
    double half = z / denom * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
    *lo = centre - half < 0.0 ? 0.0 : centre - half;
    *hi = centre + half > 1.0 ? 1.0 : centre + half;
}

int router_report(router_t *r, router_report_t *out)
{
    router_merged_t m;

    router_merge(r, &m);
    memset(out, 0, sizeof *out);
    out->n_buckets = r->nb;
    out->epsilon = r->cfg.epsilon;
    out->policy = r->cfg.policy;
    out->sample_every = r->cfg.sample_every;
    out->explore_run = r->cfg.explore_run;
    out->alpha = r->cfg.alpha;
    out->window = r->window;
    out->default_arm = (router_arm_t)r->default_arm;
    out->timer = r->cfg.cost    ? "injected"
                 : r->cfg.clock ? "injected clock"
                 : r->use_tsc   ? "rdtsc"
                                : "clock_gettime";
    out->timer_overhead_ns = r->overhead_ticks * r->ns_per_tick;
    out->timer_resolution_ns = r->resolution_ns;
    out->threads = m.threads;
    out->loaded = r->loaded;

    for (unsigned b = 0; b < r->nb; b++) {
        router_bucket_report_t *br = &out->bucket[b];
        br->lo = b == 0 ? 0 : r->cfg.edges[b - 1] + 1u;
        br->hi = r->cfg.edges[b];
        for (unsigned a = 0; a < ARMS; a++) {
            br->pulls[a] = m.pulls[b][a];
            br->window_pulls[a] = m.win[b][a];
            br->explored[a] = m.explored[b][a];
            br->timed[a] = m.timed[b][a];
            br->has_cost[a] = m.n_est[b][a] > 0;
            br->cost_ns[a] = br->has_cost[a] ? router_exp2(m.est[b][a]) : 0.0;
            out->decisions += m.pulls[b][a];
        }
        br->pairs = m.n_diff[b];
        br->paired_ratio = m.n_diff[b] ? router_exp2(m.diff[b]) : 0.0;
        uint64_t w0 = br->window_pulls[0], w1 = br->window_pulls[1], n = w0 + w1;
        router_arm_t current = (router_arm_t)m.choice[b];
        if (w0 != w1)
            br->chosen = w0 > w1 ? ROUTER_ARM_NATIVE : ROUTER_ARM_FALLBACK;
        else
            br->chosen = current;
        uint64_t minority = br->chosen == ROUTER_ARM_NATIVE ? w1 : w0;
        br->minority_share = n ? (double)minority / (double)n : 0.0;
        br->expected_share = r->cfg.policy == ROUTER_POLICY_THOMPSON
                                 ? (n ? m.expect[b] / (double)n : 0.0)
                                 : r->cfg.epsilon / 2.0;
        /* Explorations come in runs of explore_run pulls, so the minority
         * grows in steps of a run: the independent trials are runs, and
         * counting pulls would make the interval explore_run^0.5 too narrow. */
        double run = (double)r->cfg.explore_run;
        wilson((double)minority / run, (double)n / run, VERDICT_Z, &br->interval_lo,
               &br->interval_hi);
        /* No minority at all is the default (epsilon 0, or a loaded table
         * never explored) unless THOMPSON asked for some: at its floor it
         * asks for a few runs a window, and none is then a matter of
         * chance that the interval judges. */
        int asked = r->cfg.policy == ROUTER_POLICY_THOMPSON && br->expected_share > 0.0;
        if (!br->has_cost[0] || !br->has_cost[1] || (minority == 0 && !asked))
            br->verdict = ROUTER_VERDICT_DEFAULT;
        else if (br->chosen == current && br->expected_share >= br->interval_lo &&
                 br->expected_share <= br->interval_hi)
            br->verdict = ROUTER_VERDICT_CONVERGED;
        else
            br->verdict = ROUTER_VERDICT_NOT_CONVERGED;

        if (r->has_oracle[b]) {
            br->has_oracle = 1;
            br->oracle_ns[0] = r->oracle_ns[b][0];
            br->oracle_ns[1] = r->oracle_ns[b][1];
            br->oracle_arm = br->oracle_ns[1] < br->oracle_ns[0] ? ROUTER_ARM_FALLBACK
                                                                 : ROUTER_ARM_NATIVE;
            double best = br->oracle_ns[br->oracle_arm];
            uint64_t total = br->pulls[0] + br->pulls[1];
            for (unsigned a = 0; a < ARMS; a++)
                br->regret_ns += (double)br->pulls[a] * (br->oracle_ns[a] - best);
            br->regret_ns_per_pull = total ? br->regret_ns / (double)total : 0.0;
        }
    }
    return 0;
}

const char *router_verdict_text(const router_bucket_report_t *b, char *buf, size_t cap)
{
    switch (b->verdict) {
    case ROUTER_VERDICT_CONVERGED:
        snprintf(buf, cap, "converged to %s", router_arm_name(b->chosen));
        break;
    case ROUTER_VERDICT_DEFAULT:
        snprintf(buf, cap, "default, not a decision");
        break;
    default:
        snprintf(buf, cap, "not converged");
        break;
    }
    return buf;
}

typedef struct jbuf {
    char *p;
    size_t cap, len;
} jbuf_t;

__attribute__((format(printf, 2, 3))) static void jprintf(jbuf_t *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->len < j->cap ? j->p + j->len : NULL, j->len < j->cap ? j->cap - j->len : 0,
                      fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len += (size_t)n;
}

static void jarms_u64(jbuf_t *j, const char *key, const uint64_t v[ARMS])
{
    jprintf(j, "\"%s\":{\"native\":%llu,\"fallback\":%llu}", key, (unsigned long long)v[0],
            (unsigned long long)v[1]);
}

int router_report_json(const router_report_t *rep, char *buf, size_t cap)
{
    jbuf_t j = { .p = buf, .cap = cap };
    char verdict[64];

    jprintf(&j,
            "{\"router\":{\"policy\":\"%s\",\"epsilon\":%g,\"sample_every\":%u,"
            "\"explore_run\":%u,"
            "\"alpha\":%g,\"window\":%u,\"default_arm\":\"%s\",\"timer\":\"%s\","
            "\"timer_overhead_ns\":%.1f,\"timer_resolution_ns\":%.1f,\"threads\":%u,"
            "\"decisions\":%llu,\"loaded\":%s,"
            "\"buckets\":[",
            router_policy_name(rep->policy), rep->epsilon, rep->sample_every,
            rep->explore_run, rep->alpha, rep->window,
            router_arm_name(rep->default_arm), rep->timer, rep->timer_overhead_ns,
            rep->timer_resolution_ns, rep->threads,
            (unsigned long long)rep->decisions, rep->loaded ? "true" : "false");
    for (unsigned b = 0; b < rep->n_buckets; b++) {
        const router_bucket_report_t *br = &rep->bucket[b];
        jprintf(&j, "%s{\"lo\":%u,\"hi\":%u,", b ? "," : "", br->lo, br->hi);
        jarms_u64(&j, "pulls", br->pulls);
        jprintf(&j, ",");
        jarms_u64(&j, "window_pulls", br->window_pulls);
        jprintf(&j, ",");
        jarms_u64(&j, "explored", br->explored);
        jprintf(&j, ",");
        jarms_u64(&j, "timed", br->timed);
        jprintf(&j, ",\"cost_ns\":{");
        for (unsigned a = 0; a < ARMS; a++) {
            if (br->has_cost[a])
                jprintf(&j, "%s\"%s\":%.2f", a ? "," : "", router_arm_name((router_arm_t)a),
                        br->cost_ns[a]);
            else
                jprintf(&j, "%s\"%s\":null", a ? "," : "", router_arm_name((router_arm_t)a));
        }
        jprintf(&j, "},\"pairs\":%llu,\"paired_ratio\":", (unsigned long long)br->pairs);
        if (br->pairs)
            jprintf(&j, "%.4f", br->paired_ratio);
        else
            jprintf(&j, "null");
        jprintf(&j,
                ",\"chosen\":\"%s\",\"verdict\":\"%s\",\"minority_share\":%.5f,"
                "\"expected_share\":%.5f,\"interval\":[%.5f,%.5f]",
                router_arm_name(br->chosen), router_verdict_text(br, verdict, sizeof verdict),
                br->minority_share, br->expected_share, br->interval_lo, br->interval_hi);
        if (br->has_oracle)
            jprintf(&j,
                    ",\"oracle\":{\"native_ns\":%.2f,\"fallback_ns\":%.2f,\"arm\":\"%s\","
                    "\"regret_ns\":%.1f,\"regret_ns_per_pull\":%.3f}",
                    br->oracle_ns[0], br->oracle_ns[1], router_arm_name(br->oracle_arm),
                    br->regret_ns, br->regret_ns_per_pull);
        jprintf(&j, "}");
    }
    jprintf(&j, "]}}");
    if (j.len >= cap)
        return -ENOSPC;
    return (int)j.len;
}
