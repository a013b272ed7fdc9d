/*
 * bench/bench_isolation.c -- `rtugw bench isolation`: how much of its rate a
 * live slave keeps while a client hammers a silent slave on the same bus, as
 * a ratio to the live client's solo rate measured in the same run.
 *
 * Setup: one `rtugw run` gateway (bench_gw.c; the rtugw that ran it or --rtugw PATH,
 * e.g. an older build) on one bus, `port = sim-paced:1` at 19200 8E1 with
 * the t3.5 gap: the simulator answers slave 1 at wire speed and never
 * answers slave 2, so the line, not the CPU, bounds the rate, as on a real
 * RS-485 line. (`--unpaced`: `sim:1`, answers at once; the gap and the
 * gateway bound the rate. `--port PATH`: a line of your own, e.g. the pty of
 * an `rtugw sim --pace --slaves 1` started apart.) `response_timeout_ms` = --timeout-ms, retries the
 * config default, and `[device silent]` slave 2 with `dead_backoff_ms` =
 * --backoff-ms (dead_after the default, 3).
 *
 * Clients (libmodbus TCP, one thread each): the live client reads 8 holding
 * registers of slave 1 back to back and checks the values (the simulator's
 * pattern); the hammer reads the same from slave 2 back to back, one at a
 * time, and must get exception 0x0B every time. A hammer request that took
 * at least the response timeout went on the line; a quicker one was refused
 * at once (backed off). A request on the line after the first
 * refused one is a probe, i.e. a back-off expired.
 *
 * A round: a fresh gateway (so every round starts with slave 2 never asked),
 * the live client alone for --solo s, live + hammer for --window s, the live
 * client alone again for --solo s. Live answers are counted in 1 s buckets;
 * the solo rate is the median bucket of both solo phases (each also
 * reported, to show drift). Per round: the ratio of each hammer-phase bucket
 * to the solo rate (median, p10-p90); the overall ratio, live answers in the
 * window / (solo rate x window); the silent slave's attempts (the bus's
 * timed-out attempts, less the live slave's; the growth of
 * rtugw_device_timeouts_total for slave 2 is reported beside) and the line time
 * they cost, modelled (attempts x (timeout + request and answer wire time))
 * and measured twice: from the buckets the silent slave's requests on the
 * line overlap, against the median of the buckets they do not (the quiet
 * buckets: what the hammer costs without line time, i.e. CPU for its
 * refusals), and from all the live client's lost throughput (window -
 * answers / solo rate), per attempt. Across --rounds: median and p10-p90 of
 * the per-round figures.
 *
 * Exit 1 when a request was not answered exactly once (the client's counts
 * against rtugw_tcp_requests_total / rtugw_tcp_answers_total), a live answer
 * carried wrong values, the hammer got anything but 0x0B, or the gateway did
 * not start or stop cleanly. Live requests that failed (e.g. 0x0B) are
 * reported, not fatal, and so are those answered 0x0B in less than half the
 * timeout (refused: bad frames given up at once, or the live slave itself
 * backed off; the gateway's refusals of backed-off slaves, less the
 * hammer's, say which).
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"

#include <modbus/modbus.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIVE_SLAVE 1
#define SILENT_SLAVE 2
#define REGS 8
#define DEAD_AFTER 3          /* [device] default */
#define RETRIES 1             /* [bus] default */
#define REQ_CHARS 8           /* fc 3 request ADU */
#define ANS_CHARS (5 + 2 * REGS)
#define MAX_LINE_EVENTS 64
#define MAX_ROUNDS 100
#define MAX_WINDOW_S 600      /* 1 s buckets */
#define MAX_SOLO_S 60
#define DEVICE_METRIC(name, dev, slave) \
    "rtugw_device_" name "{bus=\"line\",device=\"" dev "\",slave=\"" #slave "\"}"

typedef struct iso_options {
    unsigned window_s, solo_s, rounds, timeout_ms, backoff_ms, baud, pause_ms;
    bool json;
    const char *port;         /* the bus's port = */
    const char *rtugw;        /* NULL: the rtugw that ran the bench */
    const char *log_path;     /* debug log of every gateway, appended; NULL: none */
} iso_options_t;

/* The start line of a phase: the main thread sets t0 and the deadline, then
 * releases the clients. */
typedef struct phase {
    pthread_barrier_t start;
    uint64_t t0, deadline;
} phase_t;

typedef struct live_client {
    pthread_t thread;
    modbus_t *ctx;
    phase_t *phase;
    unsigned *buckets;        /* answers per 1 s from t0 */
    unsigned nbuckets, timeout_ms;
    uint64_t sent, ok, in_window, failed, refused, wrong;
} live_client_t;

typedef struct hammer_client {
    pthread_t thread;
    modbus_t *ctx;
    phase_t *phase;
    unsigned timeout_ms, pause_ms;
    unsigned *refused;        /* quick 0x0B answers per 1 s from t0 */
    unsigned nbuckets;
    uint64_t sent, backed_off, on_line, other;
    unsigned probes;
    bool refused_once;        /* a quick 0x0B seen: slave 2 backed off */
    unsigned n_line;
    double line_at_s[MAX_LINE_EVENTS], line_ms[MAX_LINE_EVENTS];
} hammer_client_t;

/* Counters of the gateway's /metrics. Attempts that timed out on the line
 * are counted per bus; a device's own timeouts counter also counts its
 * back-off refusals in builds before the line discipline (0714e0f), so the
 * silent slave's attempts are the bus's minus the live slave's. */
typedef struct gw_counts {
    double requests, answers, crc_errors, bus_timeouts, live_timeouts, silent_timeouts, dead_fast;
} gw_counts_t;

typedef struct round_result {
    unsigned window_s, solo_s;
    unsigned solo_before[MAX_SOLO_S], solo_after[MAX_SOLO_S], hammered[MAX_WINDOW_S], refused[MAX_WINDOW_S];
    bench_spread_t solo_before_rps, solo_after_rps, bucket_ratio;
    double solo_rps, overall_ratio, attempts, device_timeouts, model_ms, lost_s, lost_ms_per_attempt;
    double quiet_rps, quiet_ratio, line_ms_per_attempt;   /* split_quiet_buckets() */
    unsigned quiet_buckets;
    double live_backed_off;   /* refusals of backed-off slaves that were not the hammer's */
    double silent_timeout_ms, crc_solo, crc_hammer, load_start, load_end;   /* 1-min load average */
    live_client_t live;       /* the hammer phase's */
    hammer_client_t hammer;
    uint64_t live_sent, live_failed, live_refused, live_wrong;   /* all phases */
    double gw_requests, gw_answers;
    bool answered_once, stopped_clean;
} round_result_t;

static void *live_main(void *arg)
{
    live_client_t *c = arg;
    uint16_t v[REGS];

    pthread_barrier_wait(&c->phase->start);
    uint64_t t0 = c->phase->t0, deadline = c->phase->deadline;
    for (uint64_t a = bench_now_ns(); a < deadline; a = bench_now_ns()) {
        c->sent++;
        int rc = modbus_read_registers(c->ctx, 0, REGS, v);
        uint64_t t1 = bench_now_ns();
        if (rc != REGS) {
            c->failed++;
            c->refused += rc == -1 && errno == EMBXGTAR && (double)(t1 - a) / 1e6 < c->timeout_ms / 2.0;
            continue;
        }
        bool right = true;
        for (unsigned i = 0; i < REGS; i++)
            right = right && v[i] == LIVE_SLAVE * 1000 + i;   /* the simulator's pattern */
        if (!right) {
            c->wrong++;
            continue;
        }
        c->ok++;
        uint64_t b = (t1 - t0) / 1000000000ull;
        if (t1 < deadline)
            c->in_window++;
        if (b < c->nbuckets)
            c->buckets[b]++;
    }
    return NULL;
}

static void *hammer_main(void *arg)
{
    hammer_client_t *c = arg;
    uint16_t v[REGS];

    pthread_barrier_wait(&c->phase->start);
    uint64_t t0 = c->phase->t0, deadline = c->phase->deadline;
    for (;;) {
        if (c->sent && c->pause_ms)
            usleep(c->pause_ms * 1000);
        uint64_t a = bench_now_ns();
        if (a >= deadline)
            break;
        c->sent++;
        int rc = modbus_read_registers(c->ctx, 0, REGS, v);
        double ms = (double)(bench_now_ns() - a) / 1e6;
        if (rc != -1 || errno != EMBXGTAR) {
            c->other++;
            continue;
        }
        if (ms < c->timeout_ms) {   /* an attempt lasts the timeout and its wire time */
            uint64_t b = (a - t0) / 1000000000ull;
            c->backed_off++;
            c->refused_once = true;
            if (b < c->nbuckets)
                c->refused[b]++;
            continue;
        }
        c->on_line++;
        c->probes += c->refused_once;
        if (c->n_line < MAX_LINE_EVENTS) {
            c->line_at_s[c->n_line] = (double)(a - t0) / 1e9;
            c->line_ms[c->n_line++] = ms;
        }
    }
    return NULL;
}

/* One phase of `seconds`: the live client, and the hammer when given. */
static void run_phase(live_client_t *live, hammer_client_t *hammer, unsigned seconds)
{
    phase_t ph;
    pthread_barrier_init(&ph.start, NULL, hammer ? 3 : 2);
    live->phase = &ph;
    pthread_create(&live->thread, NULL, live_main, live);
    if (hammer) {
        hammer->phase = &ph;
        pthread_create(&hammer->thread, NULL, hammer_main, hammer);
    }
    ph.t0 = bench_now_ns();
    ph.deadline = ph.t0 + (uint64_t)seconds * 1000000000ull;
    pthread_barrier_wait(&ph.start);
    pthread_join(live->thread, NULL);
    if (hammer)
        pthread_join(hammer->thread, NULL);
    pthread_barrier_destroy(&ph.start);
}

/* The 1-minute load average: the machine's other work, which a paced line
 * feels (a stall longer than t3.5 splits an answer). */
static double load1(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int read_counts(const bench_gw_t *gw, gw_counts_t *c)
{
    *c = (gw_counts_t){ 0 };
    bench_gw_metric(gw, "rtugw_bus_crc_errors_total{bus=\"line\"}", &c->crc_errors);
    bench_gw_metric(gw, "rtugw_bus_dead_fast_total{bus=\"line\"}", &c->dead_fast);
    if (bench_gw_metric(gw, "rtugw_tcp_requests_total", &c->requests) ||
        bench_gw_metric(gw, "rtugw_tcp_answers_total", &c->answers) ||
        bench_gw_metric(gw, "rtugw_bus_timeouts_total{bus=\"line\"}", &c->bus_timeouts) ||
        bench_gw_metric(gw, DEVICE_METRIC("timeouts_total", "live", 1), &c->live_timeouts) ||
        bench_gw_metric(gw, DEVICE_METRIC("timeouts_total", "silent", 2), &c->silent_timeouts)) {
        fprintf(stderr, "rtugw bench isolation: cannot read the gateway's /metrics\n");
        return -1;
    }
    return 0;
}

static void add_live(round_result_t *r, const live_client_t *live)
{
    r->live_sent += live->sent;
    r->live_failed += live->failed;
    r->live_refused += live->refused;
    r->live_wrong += live->wrong;
}

/* The live client alone; its buckets go to counts[0..seconds). */
static void solo_phase(modbus_t *ctx, unsigned seconds, unsigned timeout_ms, unsigned *counts,
                       round_result_t *r)
{
    live_client_t live = { .ctx = ctx, .buckets = counts, .nbuckets = seconds, .timeout_ms = timeout_ms };
    run_phase(&live, NULL, seconds);
    add_live(r, &live);
}

static bench_spread_t spread_of(const unsigned *counts, size_t n, double scale)
{
    double v[MAX_WINDOW_S];
    bench_spread_t s;
    for (size_t i = 0; i < n; i++)
        v[i] = counts[i] * scale;
    bench_spread(v, n, &s);
    return s;
}

/*
 * The hammer costs the live client in two ways: line time (its requests on
 * the line) and CPU (the refusals of a backed-off slave, answered as fast as
 * it asks). Buckets that no hammer request on the line overlaps show the
 * second alone: their median, to the solo rate, is quiet_ratio; what the
 * other buckets lack against that median, per attempt, is the line time.
 */
static void split_quiet_buckets(round_result_t *r)
{
    bool busy[MAX_WINDOW_S] = { false };
    const hammer_client_t *h = &r->hammer;
    double quiet[MAX_WINDOW_S];
    size_t nq = 0;
    for (unsigned i = 0; i < h->n_line; i++) {
        double end_s = h->line_at_s[i] + h->line_ms[i] / 1000;
        for (unsigned k = (unsigned)h->line_at_s[i]; k < r->window_s && k < end_s; k++)
            busy[k] = true;
    }
    for (unsigned k = 0; k < r->window_s; k++)
        if (!busy[k])
            quiet[nq++] = r->hammered[k];
    bench_spread_t q;
    bench_spread(quiet, nq, &q);
    r->quiet_rps = q.median;
    r->quiet_buckets = (unsigned)nq;
    r->quiet_ratio = r->solo_rps > 0 ? q.median / r->solo_rps : 0;
    double lost = 0;
    for (unsigned k = 0; k < r->window_s && q.median > 0; k++)
        if (busy[k])
            lost += (q.median - r->hammered[k]) / q.median;
    r->line_ms_per_attempt = r->attempts > 0 && nq ? lost * 1000 / r->attempts : 0;
}

/* Solo rate, ratios and line time of a round, from its counts. */
static void derive(const iso_options_t *opt, round_result_t *r)
{
    double solo[2 * MAX_SOLO_S];
    size_t n = 0;
    for (unsigned i = 0; i < r->solo_s; i++) {
        solo[n++] = r->solo_before[i];
        solo[n++] = r->solo_after[i];
    }
    bench_spread_t all;
    bench_spread(solo, n, &all);
    r->solo_rps = all.median;
    r->solo_before_rps = spread_of(r->solo_before, r->solo_s, 1);
    r->solo_after_rps = spread_of(r->solo_after, r->solo_s, 1);
    double inv = r->solo_rps > 0 ? 1 / r->solo_rps : 0;
    r->bucket_ratio = spread_of(r->hammered, r->window_s, inv);
    r->overall_ratio = (double)r->live.in_window * inv / r->window_s;
    double char_bits = 11;   /* 8E1 */
    r->model_ms = opt->timeout_ms + (REQ_CHARS + ANS_CHARS) * char_bits * 1000.0 / opt->baud;
    r->lost_s = r->window_s - (double)r->live.in_window * inv;
    r->lost_ms_per_attempt = r->attempts > 0 ? r->lost_s * 1000 / r->attempts : 0;
    split_quiet_buckets(r);
}

static void bus_config(const iso_options_t *opt, char *bus, size_t cap, char *devices, size_t dcap)
{
    snprintf(bus, cap, "port = %s\nbaud = %u\nparity = even\ngap_us = 0\nresponse_timeout_ms = %u\n",
             opt->port, opt->baud, opt->timeout_ms);
    snprintf(devices, dcap, "[device live]\nslave = %d\n[device silent]\nslave = %d\ndead_backoff_ms = %u\n",
             LIVE_SLAVE, SILENT_SLAVE, opt->backoff_ms);
}

/* The gateway's counts at the four phase boundaries (c[0] before the first
 * solo phase ... c[3] after the last) against the clients' own. */
static void tally(round_result_t *r, const gw_counts_t c[4])
{
    r->attempts = (c[2].bus_timeouts - c[1].bus_timeouts) - (c[2].live_timeouts - c[1].live_timeouts);
    r->device_timeouts = c[2].silent_timeouts - c[1].silent_timeouts;
    r->crc_solo = (c[1].crc_errors - c[0].crc_errors) + (c[3].crc_errors - c[2].crc_errors);
    r->crc_hammer = c[2].crc_errors - c[1].crc_errors;
    r->live_backed_off = (c[3].dead_fast - c[0].dead_fast) - (double)r->hammer.backed_off;
    r->gw_requests = c[3].requests - c[0].requests;
    r->gw_answers = c[3].answers - c[0].answers;
    double sent = (double)(r->live_sent + r->hammer.sent);
    r->answered_once = r->gw_requests == sent && r->gw_answers == sent;
}

/* One round on a fresh gateway: solo, live + hammer, solo. */
static int run_round(const iso_options_t *opt, round_result_t *r)
{
    char bus[256], devices[256];
    bus_config(opt, bus, sizeof bus, devices, sizeof devices);
    bench_gw_spec_t spec = { .binary = opt->rtugw, .bus = bus, .sections = devices,
                             .probe_slave = LIVE_SLAVE, .log_level = opt->log_path ? "debug" : NULL,
                             .keep_log = opt->log_path };
    gw_counts_t c[4];
    modbus_t *live = NULL, *hammer = NULL;
    int rc = -1;

    *r = (round_result_t){ .window_s = opt->window_s, .solo_s = opt->solo_s, .load_start = load1() };
    bench_gw_t *gw = bench_gw_launch(&spec);
    if (!gw)
        return -1;
    live = bench_gw_client(gw, LIVE_SLAVE);
    hammer = bench_gw_client(gw, SILENT_SLAVE);
    if (!live || !hammer) {
        fprintf(stderr, "rtugw bench isolation: a TCP client cannot connect: %s\n", modbus_strerror(errno));
        goto out;
    }
    /* Long enough for every attempt of a silent transaction and its guards. */
    unsigned wait_ms = 3000 + 6 * opt->timeout_ms;
    modbus_set_response_timeout(hammer, wait_ms / 1000, wait_ms % 1000 * 1000);
    if (read_counts(gw, &c[0]))
        goto out;
    solo_phase(live, opt->solo_s, opt->timeout_ms, r->solo_before, r);
    if (read_counts(gw, &c[1]))
        goto out;
    r->live = (live_client_t){ .ctx = live, .buckets = r->hammered, .nbuckets = opt->window_s,
                               .timeout_ms = opt->timeout_ms };
    r->hammer = (hammer_client_t){ .ctx = hammer, .timeout_ms = opt->timeout_ms, .pause_ms = opt->pause_ms,
                                   .refused = r->refused, .nbuckets = opt->window_s };
    run_phase(&r->live, &r->hammer, opt->window_s);
    add_live(r, &r->live);
    if (read_counts(gw, &c[2]))
        goto out;
    solo_phase(live, opt->solo_s, opt->timeout_ms, r->solo_after, r);
    if (read_counts(gw, &c[3]))
        goto out;
    bench_gw_metric(gw, DEVICE_METRIC("timeout_ms", "silent", 2), &r->silent_timeout_ms);
    r->load_end = load1();
    tally(r, c);
    derive(opt, r);
    rc = 0;
out:
    if (live) {
        modbus_close(live);
        modbus_free(live);
    }
    if (hammer) {
        modbus_close(hammer);
        modbus_free(hammer);
    }
    r->stopped_clean = bench_gw_stop(gw) == 0;
    return r->stopped_clean ? rc : -1;
}

/* ---- the report ---------------------------------------------------------------------- */

typedef struct summary {
    bench_spread_t ratio, overall, quiet, lost_ms, line_ms, bucket_ratio, solo_rps;
    double model_ms;
} summary_t;

static void summarise(const round_result_t *rs, unsigned n, summary_t *s)
{
    double v[6][MAX_ROUNDS];
    double *pool = calloc((size_t)n * rs[0].window_s + 1, sizeof *pool);
    size_t np = 0;
    for (unsigned i = 0; i < n; i++) {
        v[0][i] = rs[i].bucket_ratio.median;
        v[1][i] = rs[i].overall_ratio;
        v[2][i] = rs[i].quiet_ratio;
        v[3][i] = rs[i].lost_ms_per_attempt;
        v[4][i] = rs[i].line_ms_per_attempt;
        v[5][i] = rs[i].solo_rps;
        for (unsigned k = 0; pool && k < rs[i].window_s; k++)
            pool[np++] = rs[i].solo_rps > 0 ? rs[i].hammered[k] / rs[i].solo_rps : 0;
    }
    bench_spread(v[0], n, &s->ratio);
    bench_spread(v[1], n, &s->overall);
    bench_spread(v[2], n, &s->quiet);
    bench_spread(v[3], n, &s->lost_ms);
    bench_spread(v[4], n, &s->line_ms);
    bench_spread(v[5], n, &s->solo_rps);
    bench_spread(pool, np, &s->bucket_ratio);
    s->model_ms = rs[0].model_ms;
    free(pool);
}

static void print_list(const char *fmt, const double *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        printf(i ? ", " : "");
        printf(fmt, v[i]);
    }
}

static void print_counts(const unsigned *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        printf(i ? ", %u" : "%u", v[i]);
}

static void print_json_round(const round_result_t *r)
{
    const hammer_client_t *h = &r->hammer;
    printf("{\"solo_rps\": %.2f, \"solo_before_rps\": %.2f, \"solo_after_rps\": %.2f, "
           "\"ratio\": %.4f, \"ratio_p10\": %.4f, \"ratio_p90\": %.4f, \"overall_ratio\": %.4f, "
           "\"quiet_buckets\": %u, \"quiet_rps\": %.1f, \"quiet_ratio\": %.4f, "
           "\"live_answers\": %llu, \"live_failed\": %llu, \"live_refused\": %llu, \"live_backed_off\": %.0f, "
           "\"live_wrong\": %llu, ",
           r->solo_rps, r->solo_before_rps.median, r->solo_after_rps.median, r->bucket_ratio.median,
           r->bucket_ratio.p10, r->bucket_ratio.p90, r->overall_ratio, r->quiet_buckets, r->quiet_rps,
           r->quiet_ratio, (unsigned long long)r->live.in_window, (unsigned long long)r->live_failed,
           (unsigned long long)r->live_refused, r->live_backed_off, (unsigned long long)r->live_wrong);
    printf("\"buckets\": [");
    print_counts(r->hammered, r->window_s);
    printf("], \"hammer_buckets\": [");
    print_counts(r->refused, r->window_s);
    printf("], \"silent_attempts\": %.0f, \"silent_device_timeouts\": %.0f, \"ms_per_attempt_model\": %.2f, "
           "\"silent_line_s_model\": %.3f, \"lost_s\": %.3f, \"ms_per_attempt_lost\": %.2f, "
           "\"ms_per_attempt_line\": %.2f, \"silent_timeout_ms\": %.0f, ",
           r->attempts, r->device_timeouts, r->model_ms, r->attempts * r->model_ms / 1000, r->lost_s,
           r->lost_ms_per_attempt, r->line_ms_per_attempt, r->silent_timeout_ms);
    printf("\"hammer_requests\": %llu, \"hammer_backed_off\": %llu, \"hammer_on_line\": %llu, "
           "\"hammer_other\": %llu, \"probes\": %u, \"line_at_s\": [",
           (unsigned long long)h->sent, (unsigned long long)h->backed_off, (unsigned long long)h->on_line,
           (unsigned long long)h->other, h->probes);
    print_list("%.3f", h->line_at_s, h->n_line);
    printf("], \"line_ms\": [");
    print_list("%.1f", h->line_ms, h->n_line);
    printf("], \"crc_errors_solo\": %.0f, \"crc_errors_hammer\": %.0f, \"gateway_requests\": %.0f, "
           "\"gateway_answers\": %.0f, \"client_requests\": %llu, \"answered_exactly_once\": %s, "
           "\"load_start\": %.2f, \"load_end\": %.2f}",
           r->crc_solo, r->crc_hammer, r->gw_requests, r->gw_answers,
           (unsigned long long)(r->live_sent + h->sent), r->answered_once ? "true" : "false", r->load_start,
           r->load_end);
}

static void print_json_spread(const char *key, const bench_spread_t *s, const char *fmt)
{
    char f[96];
    snprintf(f, sizeof f, "\"%%s\": %s, \"%%s_p10\": %s, \"%%s_p90\": %s, ", fmt, fmt, fmt);
    printf(f, key, s->median, key, s->p10, key, s->p90);
}

static void print_json(const iso_options_t *opt, const round_result_t *rs, unsigned n, const summary_t *s,
                       bool pass)
{
    printf("{\"binary\": \"%s\", \"port\": \"%s\", \"baud\": %u, \"window_s\": %u, \"solo_s\": %u, "
           "\"rounds\": %u, \"timeout_ms\": %u, \"backoff_ms\": %u, \"hammer_pause_ms\": %u, "
           "\"dead_after\": %d, \"retries\": %d, \"registers\": %d, ",
           opt->rtugw ? opt->rtugw : "self", opt->port, opt->baud, opt->window_s, opt->solo_s, n,
           opt->timeout_ms, opt->backoff_ms, opt->pause_ms, DEAD_AFTER, RETRIES, REGS);
    print_json_spread("ratio", &s->ratio, "%.4f");
    print_json_spread("overall_ratio", &s->overall, "%.4f");
    print_json_spread("quiet_ratio", &s->quiet, "%.4f");
    print_json_spread("bucket_ratio", &s->bucket_ratio, "%.4f");
    print_json_spread("solo_rps", &s->solo_rps, "%.2f");
    print_json_spread("ms_per_attempt_lost", &s->lost_ms, "%.2f");
    print_json_spread("ms_per_attempt_line", &s->line_ms, "%.2f");
    printf("\"ms_per_attempt_model\": %.2f, \"pass\": %s, \"round_results\": [", s->model_ms,
           pass ? "true" : "false");
    for (unsigned i = 0; i < n; i++) {
        printf(i ? ", " : "");
        print_json_round(&rs[i]);
    }
    printf("]}\n");
}

static void print_markdown_round(unsigned i, const round_result_t *r)
{
    printf("| %u | %.0f / %.0f | %.3f (%.3f-%.3f) | %.3f | %.3f | %.0f (%.0f) | %.0f / %.0f | %llu / %llu | %u "
           "| %llu (%llu; %.0f) | %.0f / %.0f | %.1f-%.1f |\n",
           i + 1, r->solo_before_rps.median, r->solo_after_rps.median, r->bucket_ratio.median,
           r->bucket_ratio.p10, r->bucket_ratio.p90, r->overall_ratio, r->quiet_ratio, r->attempts,
           r->device_timeouts, r->line_ms_per_attempt, r->lost_ms_per_attempt,
           (unsigned long long)r->hammer.on_line, (unsigned long long)r->hammer.backed_off, r->hammer.probes,
           (unsigned long long)r->live_failed, (unsigned long long)r->live_refused, r->live_backed_off,
           r->crc_solo, r->crc_hammer,
           r->load_start, r->load_end);
}

static void print_markdown(const iso_options_t *opt, const round_result_t *rs, unsigned n, const summary_t *s)
{
    char pace[64] = "back to back";
    if (opt->pause_ms)
        snprintf(pace, sizeof pace, "with %u ms between requests", opt->pause_ms);
    printf("# rtugw bench isolation\n\n"
           "Gateway `%s run`, one bus `port = %s` at %u baud 8E1 (t3.5 gap), response_timeout_ms = %u,\n"
           "retries %d; `[device silent]` slave %d (the simulator does not serve it): dead_after %d,\n"
           "dead_backoff_ms = %u. Live client: fc 3, %d registers of slave %d, back to back; hammer: the\n"
           "same read of slave %d, %s, one at a time. Each round on a fresh gateway: solo %u s,\n"
           "live + hammer %u s, solo %u s. Ratios are to the solo rate (median 1 s bucket of both solo\n"
           "phases); quiet: the median bucket that no silent attempt overlaps. Line ms per silent attempt:\n"
           "from the buckets it overlaps (against quiet) / from all the live client's lost throughput.\n\n"
           "| round | solo rps before / after | bucket ratio median (p10-p90) | overall ratio | quiet ratio "
           "| silent attempts (device counter) | line ms per attempt: line / lost | hammer on the line / "
           "refused | probes | live failed (0x0B at once; backed off) | CRC errors solo / hammer | load |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
           opt->rtugw ? opt->rtugw : "rtugw", opt->port, opt->baud, opt->timeout_ms, RETRIES, SILENT_SLAVE,
           DEAD_AFTER, opt->backoff_ms, REGS, LIVE_SLAVE, SILENT_SLAVE, pace, opt->solo_s, opt->window_s,
           opt->solo_s);
    for (unsigned i = 0; i < n; i++)
        print_markdown_round(i, &rs[i]);
    printf("\nAcross %u round%s, median (p10-p90): bucket ratio %.3f (%.3f-%.3f); overall ratio %.3f\n"
           "(%.3f-%.3f); quiet ratio %.3f (%.3f-%.3f); all hammer-phase buckets pooled: %.3f (%.3f-%.3f).\n"
           "Line time per silent attempt: modelled %.1f ms (timeout + %d + %d characters on the wire);\n"
           "from the buckets it overlaps %.1f ms (%.1f-%.1f); from all lost throughput %.1f ms (%.1f-%.1f).\n"
           "Target: median bucket ratio >= 0.9.\n\n",
           n, n == 1 ? "" : "s", s->ratio.median, s->ratio.p10, s->ratio.p90, s->overall.median,
           s->overall.p10, s->overall.p90, s->quiet.median, s->quiet.p10, s->quiet.p90, s->bucket_ratio.median,
           s->bucket_ratio.p10, s->bucket_ratio.p90, s->model_ms, REQ_CHARS, ANS_CHARS, s->line_ms.median,
           s->line_ms.p10, s->line_ms.p90, s->lost_ms.median, s->lost_ms.p10, s->lost_ms.p90);
    for (unsigned i = 0; i < n; i++) {
        const hammer_client_t *h = &rs[i].hammer;
        printf("Round %u: live answers per 1 s bucket [", i + 1);
        print_counts(rs[i].hammered, rs[i].window_s);
        printf("]; the hammer's requests on the line began at [");
        print_list("%.2f s", h->line_at_s, h->n_line);
        printf("] and took [");
        print_list("%.0f ms", h->line_ms, h->n_line);
        printf("].\n");
    }
}

/* ---- options and main -------------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench isolation [--window S] [--solo S] [--rounds N] [--timeout-ms MS]\n"
            "                             [--backoff-ms MS] [--baud B] [--unpaced | --port PATH]\n"
            "                             [--hammer-pause-ms MS] [--rtugw PATH] [--log FILE] [--json]\n"
            "\n"
            "A live client's rate on slave 1 while a second client hammers silent slave 2 on the\n"
            "same bus, as a ratio to the live client's solo rate in the same run; and the line\n"
            "time each silent attempt costs. The gateway runs `port = sim-paced:1`, 8E1.\n"
            "  --window S       live + hammer phase, whole seconds (default 15)\n"
            "  --solo S         each solo phase, before and after (default 4)\n"
            "  --rounds N       rounds, each on a fresh gateway (default 1)\n"
            "  --timeout-ms MS  the bus's response_timeout_ms (default 200)\n"
            "  --backoff-ms MS  slave 2's dead_backoff_ms (default 5000)\n"
            "  --baud B         line speed (default 19200)\n"
            "  --unpaced        `port = sim:1`: answers at once, not at wire speed\n"
            "  --port PATH      the bus's port: a serial line or pty with slave 1 on it, 8E1\n"
            "  --hammer-pause-ms MS\n"
            "                   the hammer rests MS between requests (default 0: back to back)\n"
            "  --rtugw PATH     the gateway binary (default: this one), e.g. an older build\n"
            "  --log FILE       log_level = debug, every gateway's log appended to FILE\n"
            "  --json           JSON instead of Markdown\n");
}

/* --unpaced: the simulator answers at once instead of at wire speed. */
static int set_unpaced(void *dst, const char *unused)
{
    (void)unused;
    *(const char **)dst = "sim:1";
    return 0;
}

static int parse_options(int argc, char **argv, iso_options_t *opt)
{
    const bench_opt_t opts[] = {
        BENCH_UINT("window", &opt->window_s, 2, MAX_WINDOW_S),
        BENCH_UINT("solo", &opt->solo_s, 1, MAX_SOLO_S),
        BENCH_UINT("rounds", &opt->rounds, 1, MAX_ROUNDS),
        BENCH_UINT("timeout-ms", &opt->timeout_ms, 1, 60000),
        BENCH_UINT("backoff-ms", &opt->backoff_ms, 0, 3600000),
        BENCH_UINT("baud", &opt->baud, 1200, 4000000),
        BENCH_CALL("unpaced", set_unpaced, &opt->port, no_argument, NULL),
        BENCH_TEXT("port", &opt->port),
        BENCH_TEXT("rtugw", &opt->rtugw),
        BENCH_TEXT("log", &opt->log_path),
        BENCH_FLAG("json", &opt->json),
        BENCH_UINT("hammer-pause-ms", &opt->pause_ms, 0, 10000),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "isolation", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    /* It goes into a config line and the JSON as it is. */
    if (strlen(opt->port) > 200 || strpbrk(opt->port, "\"\\\n\r;#")) {
        fprintf(stderr, "rtugw bench isolation: --port '%s': a path of at most 200 characters, "
                "without quotes, backslashes, ';', '#' or line breaks\n", opt->port);
        return 2;
    }
    return -1;
}

int bench_isolation_main(int argc, char **argv)
{
    iso_options_t opt = { .window_s = 15, .solo_s = 4, .rounds = 1, .timeout_ms = 200,
                          .backoff_ms = 5000, .baud = 19200, .port = "sim-paced:1" };
    int prc = parse_options(argc, argv, &opt);
    if (prc >= 0)
        return prc;
    signal(SIGPIPE, SIG_IGN);
    round_result_t *rs = calloc(opt.rounds, sizeof *rs);
    if (!rs)
        return 1;
    bool pass = true;
    unsigned done = 0;
    for (; done < opt.rounds; done++) {
        if (run_round(&opt, &rs[done]) != 0) {
            fprintf(stderr, "rtugw bench isolation: round %u failed (see above)\n", done + 1);
            pass = false;
            break;
        }
        const round_result_t *r = &rs[done];
        if (!r->answered_once)
            fprintf(stderr, "rtugw bench isolation: round %u: %llu requests sent, the gateway counted %.0f "
                    "requests and %.0f answers\n", done + 1,
                    (unsigned long long)(r->live_sent + r->hammer.sent), r->gw_requests, r->gw_answers);
        if (r->live_wrong || r->hammer.other)
            fprintf(stderr, "rtugw bench isolation: round %u: %llu live answers with wrong values, %llu "
                    "hammer answers other than 0x0B\n", done + 1, (unsigned long long)r->live_wrong,
                    (unsigned long long)r->hammer.other);
        if (r->live_failed)
            fprintf(stderr, "rtugw bench isolation: warning: round %u: %llu live requests failed, %llu of "
                    "them answered 0x0B at once, %.0f refused as backed off\n", done + 1,
                    (unsigned long long)r->live_failed, (unsigned long long)r->live_refused,
                    r->live_backed_off);
        pass = pass && r->answered_once && !r->live_wrong && !r->hammer.other;
    }
    if (done) {
        summary_t s;
        summarise(rs, done, &s);
        if (opt.json)
            print_json(&opt, rs, done, &s, pass);
        else
            print_markdown(&opt, rs, done, &s);
    }
    free(rs);
    return pass ? 0 : 1;
}
