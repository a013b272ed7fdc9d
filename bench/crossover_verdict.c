/*
 * bench/crossover_verdict.c -- the rows of `rtugw bench crossover`, the
 * rounds they are measured in, and what the measurements say.
 *
 * Every round runs every form once per row, in an order that rotates each
 * round; warm-up rounds are dropped. A pair of forms is compared on the
 * per-round paired difference a - b: "faster" when its p75 < 0, "slower"
 * when its p25 > 0, else "undecided". No tolerance band. The router's own
 * verdicts are set beside that paired comparison and against an oracle (the
 * direct layer's single-arm medians); the crossover is the smallest length
 * with native faster and native slower at no measured length above it.
 */
#include "bench/crossover.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int crossover_pair_a[PAIRS] = { F_NATIVE, F_ROUTED, F_ROUTED };
const int crossover_pair_b[PAIRS] = { F_FALLBACK, F_FALLBACK, F_NATIVE };

/* ---- rows and rounds ------------------------------------------------------------ */

static int row_alloc(crossover_row_t *r, size_t n)
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

static void row_free(crossover_row_t *r)
{
    for (int f = 0; f < FORMS; f++) {
        free(r->ns[f]);
        free(r->thr[f]);
        free(r->dispatch[f]);
    }
    free(r->bound);
}

static void progress(const crossover_options_t *opt, const char *phase, unsigned round,
                     unsigned total)
{
    if (opt->no_progress)
        return;
    fprintf(stderr, "\rrtugw bench crossover: %s, round %u/%u%s", phase, round, total,
            round == total ? "\n" : "   ");
    fflush(stderr);
}

int crossover_rows_alloc(crossover_results_t *R)
{
    const crossover_options_t *opt = &R->opt;
    for (unsigned t = 0; t < TIERS; t++) {
        const crossover_frames_t *set = &R->tier_sets[t];
        crossover_row_t *r = &R->tier_rows[R->n_tier_rows++];
        *r = (crossover_row_t){ .tier = crossover_tier_names[t], .bytes = crossover_tier_bytes[t],
                                .shape = set->shape, .layer = L_DIRECT, .conc = 1, .set = set };
        if (row_alloc(r, opt->rounds) != 0)
            return -1;
        for (unsigned k = 0; k < CONCS; k++) {
            r = &R->tier_rows[R->n_tier_rows++];
            *r = (crossover_row_t){ .tier = crossover_tier_names[t],
                                    .bytes = crossover_tier_bytes[t], .shape = set->shape,
                                    .layer = L_ACTORS, .conc = crossover_concurrencies[k],
                                    .set = set };
            if (row_alloc(r, opt->rounds) != 0)
                return -1;
        }
    }
    for (unsigned i = 0; i < R->n_sweep; i++) {
        crossover_row_t *r = &R->sweep[i];
        *r = (crossover_row_t){ .bytes = SWEEP_LO + i, .shape = R->sweep_sets[i].shape,
                                .layer = L_DIRECT, .conc = 1, .set = &R->sweep_sets[i] };
        if (row_alloc(r, opt->rounds) != 0)
            return -1;
    }
    return 0;
}

/* The tiers, both layers, every round; then the sweep, every round. Within a
 * tier, the actor rows follow its direct row so that dispatch (actor - direct)
 * pairs measurements of the same round. */
int crossover_rounds(crossover_results_t *R, const crossover_rig_t *g)
{
    const crossover_options_t *opt = &R->opt;
    unsigned total = opt->warmup + opt->rounds;
    for (unsigned round = 0; round < total; round++) {
        int measured = round >= opt->warmup;
        size_t m = measured ? round - opt->warmup : 0;
        progress(opt, "tiers", round + 1, total);
        for (unsigned i = 0; i < R->n_tier_rows; i += 1 + CONCS) {
            crossover_row_t *d = &R->tier_rows[i];
            crossover_direct_round(d, g->direct, g->dt, opt, round, measured, m, R->eps, &R->sink);
            for (unsigned k = 1; k <= CONCS; k++) {
                crossover_row_t *a = &R->tier_rows[i + k];
                if (crossover_actor_round(a, g->actors, opt, round, measured, m) != 0)
                    return -1;
                if (measured)
                    for (int f = 0; f < FORMS; f++)
                        a->dispatch[f][m] = a->ns[f][m] - d->ns[f][m];
            }
        }
    }
    for (unsigned round = 0; opt->sweep && round < total; round++) {
        int measured = round >= opt->warmup;
        size_t m = measured ? round - opt->warmup : 0;
        progress(opt, "sweep 5..256", round + 1, total);
        for (unsigned i = 0; i < R->n_sweep; i++)
            crossover_direct_round(&R->sweep[i], g->sweep, g->st, opt, round, measured, m, R->eps,
                                   &R->sink);
    }
    return 0;
}

void crossover_results_free(crossover_results_t *R)
{
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        row_free(&R->tier_rows[i]);
    for (unsigned i = 0; R->sweep && i < R->n_sweep; i++)
        row_free(&R->sweep[i]);
    free(R->sweep);
    free(R->sweep_sets);
    free(R->findings);
}

/* ---- statistics ---------------------------------------------------------------- */

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

static void analyse_row(crossover_row_t *r, size_t n)
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
            diff[i] = r->ns[crossover_pair_a[p]][i] - r->ns[crossover_pair_b[p]][i];
        bench_spread(diff, n, &r->pr[p].d);
        r->pr[p].verdict = verdict_of(&r->pr[p].d);
    }
    free(diff);
}

const char *crossover_faster_form(const crossover_row_t *r)
{
    const char *v = r->pr[P_NATIVE_FALLBACK].verdict;
    return strcmp(v, "faster") == 0 ? "native" : strcmp(v, "slower") == 0 ? "fallback" : "undecided";
}

/* ---- findings ---------------------------------------------------------------- */

static void add_finding(crossover_results_t *R, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_finding(crossover_results_t *R, int kind, const char *fmt, ...)
{
    if (R->n_findings == R->cap_findings) {
        unsigned cap = R->cap_findings ? 2 * R->cap_findings : 64;
        crossover_finding_t *n = realloc(R->findings, cap * sizeof *n);
        if (!n)
            return;
        R->findings = n;
        R->cap_findings = cap;
    }
    crossover_finding_t *f = &R->findings[R->n_findings++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
    f->kind = kind;
}

static void row_label(const crossover_row_t *r, char *buf, size_t cap)
{
    if (r->layer == L_DIRECT)
        snprintf(buf, cap, "%s%s%u bytes, direct", r->tier ? r->tier : "", r->tier ? " " : "",
                 r->bytes);
    else
        snprintf(buf, cap, "%s %u bytes, actors c=%u", r->tier ? r->tier : "", r->bytes, r->conc);
}

static void row_findings(crossover_results_t *R, const crossover_row_t *r, size_t n)
{
    char label[96];
    row_label(r, label, sizeof label);
    for (int p = 0; p < PAIRS; p++) {
        const crossover_pair_t *q = &r->pr[p];
        const char *a = crossover_form_names[crossover_pair_a[p]];
        const char *b = crossover_form_names[crossover_pair_b[p]];
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
                        label, crossover_form_names[f], r->sd[f].median, r->sd[f].p25, r->sd[f].p75,
                        r->sd[f].median <= 1000.0 ? "met" : "NOT met");
    }
}

/* Smallest length L with native "faster" at L and "slower" at no measured
 * length >= L; *first = the smallest length with native faster. Rows are
 * sorted by length. only_odd: register frames only. */
static int crossover_of(const crossover_row_t *rows, unsigned n, int only_odd, int *first)
{
    int best = -1, slower_above = 0;
    *first = -1;
    for (unsigned i = n; i-- > 0;) {
        const crossover_row_t *r = &rows[i];
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

/* ---- routing verdicts ------------------------------------------------------------ */

static void routing_entry_fill(crossover_routing_t *e, const router_bucket_report_t *b,
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

static void routing_findings(crossover_results_t *R, const crossover_routing_t *e)
{
    char where[64];
    if (e->tier)
        snprintf(where, sizeof where, "%s %u bytes, %s", e->tier, e->bytes,
                 crossover_layer_names[e->layer]);
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

static void tier_paired_winner(const crossover_results_t *R, unsigned t, const char **out)
{
    *out = "undecided";
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        if (R->tier_rows[i].layer == L_DIRECT && R->tier_rows[i].bytes == crossover_tier_bytes[t])
            *out = crossover_faster_form(&R->tier_rows[i]);
}

/* ---- oracles and routing entries ------------------------------------------------- */

/* The sweep's lengths grouped by the sweep router's buckets: the mean of the
 * single-arm medians (the bucket's oracle) and the routed pulls, summed. */
typedef struct sweep_buckets {
    double oracle[ROUTER_MAX_BUCKETS][2];
    unsigned count[ROUTER_MAX_BUCKETS];
    uint64_t pulls[ROUTER_MAX_BUCKETS][2];
} sweep_buckets_t;

/* Oracles from the direct single-arm medians, then each router's report. */
static void set_oracles(crossover_results_t *R, const crossover_rig_t *g, sweep_buckets_t *sb)
{
    router_t *actors = crossover_actors_router(g->actors);
    for (unsigned i = 0; i < R->n_tier_rows; i++) {
        const crossover_row_t *r = &R->tier_rows[i];
        if (r->layer != L_DIRECT)
            continue;
        router_set_oracle(g->direct, router_bucket_of(g->direct, r->bytes), r->s[F_NATIVE].median,
                          r->s[F_FALLBACK].median);
        router_set_oracle(actors, router_bucket_of(actors, r->bytes), r->s[F_NATIVE].median,
                          r->s[F_FALLBACK].median);
    }
    memset(sb, 0, sizeof *sb);
    for (unsigned i = 0; i < R->n_sweep; i++) {
        const crossover_row_t *r = &R->sweep[i];
        unsigned b = router_bucket_of(g->sweep, r->bytes);
        sb->oracle[b][0] += r->s[F_NATIVE].median;
        sb->oracle[b][1] += r->s[F_FALLBACK].median;
        sb->pulls[b][0] += r->pulls[0];
        sb->pulls[b][1] += r->pulls[1];
        sb->count[b]++;
    }
    for (unsigned b = 0; b < ROUTER_MAX_BUCKETS; b++)
        if (sb->count[b]) {
            sb->oracle[b][0] /= sb->count[b];
            sb->oracle[b][1] /= sb->count[b];
            router_set_oracle(g->sweep, b, sb->oracle[b][0], sb->oracle[b][1]);
        }
    router_report(g->direct, &R->rep_direct);
    router_report(actors, &R->rep_actors);
    router_report(g->sweep, &R->rep_sweep);
    R->timer = R->rep_direct.timer;
    R->timer_overhead = R->rep_direct.timer_overhead_ns;
}

/* Per tier, the direct and the actor layer's routing verdict. */
static void tier_routing(crossover_results_t *R, const crossover_rig_t *g)
{
    for (unsigned t = 0; t < TIERS; t++) {
        const char *winner;
        tier_paired_winner(R, t, &winner);
        for (int layer = L_DIRECT; layer <= L_ACTORS; layer++) {
            crossover_routing_t *e = &R->routing[R->n_routing++];
            uint64_t pulls[2] = { 0, 0 };
            double oracle[2] = { 0, 0 };
            for (unsigned i = 0; i < R->n_tier_rows; i++) {
                const crossover_row_t *r = &R->tier_rows[i];
                if (r->bytes != crossover_tier_bytes[t])
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
            router_t *rr = layer == L_DIRECT ? g->direct : crossover_actors_router(g->actors);
            const router_report_t *rep = layer == L_DIRECT ? &R->rep_direct : &R->rep_actors;
            unsigned bucket = router_bucket_of(rr, crossover_tier_bytes[t]);
            e->tier = crossover_tier_names[t];
            e->bytes = crossover_tier_bytes[t];
            e->layer = layer;
            routing_entry_fill(e, &rep->bucket[bucket], pulls, oracle, winner);
        }
    }
}

/* Per sweep bucket, the routing verdict. */
static void sweep_routing(crossover_results_t *R, const crossover_rig_t *g,
                          const sweep_buckets_t *sb)
{
    for (unsigned b = 0; b < ROUTER_MAX_BUCKETS; b++) {
        if (!sb->count[b])
            continue;
        /* the independent comparison for a bucket: the arm with the lower
         * mean median, decided only when every length in it agrees */
        int nat = 0, fb = 0;
        for (unsigned i = 0; i < R->n_sweep; i++)
            if (router_bucket_of(g->sweep, R->sweep[i].bytes) == b) {
                const char *w = crossover_faster_form(&R->sweep[i]);
                nat += strcmp(w, "native") == 0;
                fb += strcmp(w, "fallback") == 0;
            }
        const char *winner = nat == (int)sb->count[b] ? "native"
                             : fb == (int)sb->count[b] ? "fallback" : "undecided";
        crossover_routing_t *e = &R->routing[R->n_routing++];
        e->layer = L_DIRECT;
        routing_entry_fill(e, &R->rep_sweep.bucket[b], sb->pulls[b], sb->oracle[b], winner);
    }
}

/* ---- the sweep's findings, the crossover ----------------------------------------- */

/* The sweep in four findings, and each undecided length with its reason. */
static void sweep_findings(crossover_results_t *R)
{
    unsigned faster = 0, slower = 0, und = 0, rs = 0;
    char slow_list[1200] = "", rs_list[1200] = "";
    size_t sl = 0, rl = 0;
    for (unsigned i = 0; i < R->n_sweep; i++) {
        const crossover_row_t *r = &R->sweep[i];
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
        const crossover_pair_t *q = &R->sweep[i].pr[P_NATIVE_FALLBACK];
        if (strcmp(q->verdict, "undecided") == 0)
            add_finding(R, K_NOWIN,
                        "sweep %u bytes (%s): native vs fallback undecided: IQR of the "
                        "paired differences [%+.2f, %+.2f] ns (median %+.2f) contains zero",
                        R->sweep[i].bytes, R->sweep[i].shape, q->d.p25, q->d.p75,
                        q->d.median);
    }
}

/* The crossover from the sweep when there is one, else from the three tiers;
 * and the lengths where native vs fallback is undecided. */
static void find_crossover(crossover_results_t *R)
{
    if (R->opt.sweep) {
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
}

/* ---- analysis ------------------------------------------------------------------ */

void crossover_analyse(crossover_results_t *R, const crossover_rig_t *g)
{
    const crossover_options_t *opt = &R->opt;
    sweep_buckets_t sb;
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        analyse_row(&R->tier_rows[i], opt->rounds);
    for (unsigned i = 0; i < R->n_sweep; i++)
        analyse_row(&R->sweep[i], opt->rounds);
    set_oracles(R, g, &sb);
    tier_routing(R, g);
    if (opt->sweep)
        sweep_routing(R, g, &sb);
    for (unsigned i = 0; i < R->n_tier_rows; i++)
        row_findings(R, &R->tier_rows[i], opt->rounds);
    for (unsigned i = 0; i < R->n_routing; i++)
        routing_findings(R, &R->routing[i]);
    if (opt->sweep)
        sweep_findings(R);
    find_crossover(R);
}

/* ---- targets ----------------------------------------------------------------- */

void crossover_targets(const crossover_results_t *R, crossover_target_t *t)
{
    for (unsigned k = 0; k < TIERS; k++) {
        t[k] = (crossover_target_t){ .bytes = crossover_tier_bytes[k],
                                     .router_arm = "none (not converged)" };
        for (unsigned i = 0; i < R->n_tier_rows; i++) {
            const crossover_row_t *r = &R->tier_rows[i];
            if (r->bytes != crossover_tier_bytes[k])
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
            const crossover_routing_t *e = &R->routing[i];
            if (e->bytes == crossover_tier_bytes[k] && e->layer == L_DIRECT) {
                t[k].oracle_arm = e->oracle_arm;
                if (e->converged_arm)
                    t[k].router_arm = e->converged_arm;
                t[k].oracle_met = e->converged_arm && strcmp(e->converged_arm, e->oracle_arm) == 0;
            }
        }
    }
}
