/*
 * bench/bench_gateway.c -- `rtugw bench gateway`: requests per second and
 * per-request latency through a running rtugw, side by side in the same run
 * with the ceiling: a direct libmodbus RTU master on a pseudo-terminal
 * against the same simulator code.
 *
 * Arms (the same simulator, driver_sim_*, unpaced, slave 1, on a pty pair):
 *   rtugw  -- the rtugw that ran the bench, as a subprocess (`rtugw run -c FILE`, a
 *             config in a temp dir with free ports, `port = sim:1`,
 *             `gap_us = 1`), driven by 1, 4 or 8 libmodbus TCP clients, one
 *             thread each, each doing read-holding-registers back to back;
 *   direct -- one libmodbus RTU master (modbus_new_rtu) in this process on
 *             the slave side of driver_pty_open(), the simulator on a thread
 *             serving the master side. A serial line has one master, so the
 *             direct arm is always a single stream; the 4- and 8-client rows
 *             compare rtugw's clients (queued on the one bus) with that stream;
 *   relay  -- with --relay, the floor: bench/relay.c, the least a Modbus TCP
 *             to RTU gateway does (one thread, poll(), no line discipline), a
 *             child process on a simulator of its own in this process, driven
 *             like rtugw in the same rounds (direct, rtugw, relay, ...). What
 *             it costs is what this machine's kernel, ptys and wake-ups cost
 *             any gateway; rtugw's figures are read against it.
 *
 * The gap: 0 in the config means t3.5, i.e. 1.75 ms above 19200 baud, a rest
 * that would cap the line at ~570 transactions/s and measure the gap, not the
 * gateway. The direct master rests not at all between transactions (it
 * writes the next request as soon as it has parsed the answer), and a pty has
 * no wire to let settle, so the gateway gets the smallest gap it accepts,
 * 1 us. Both simulators run at 115200 baud (which only sets the silence
 * thresholds; a pty ignores baud).
 *
 * Method: per cell (registers 1, 8, 125 x clients 1, 4, 8) the arms alternate in
 * rounds (direct, rtugw, direct, rtugw, ...), each segment --seconds/--rounds
 * long; --warmup rounds are run first and dropped. Reported per cell: median
 * and p10-p90 of requests/s over the measured rounds for each arm, the
 * per-round paired ratio rtugw/direct, and p50/p99 of per-request latency
 * pooled over the measured rounds (for rtugw: each TCP client's call time).
 * Cost per request, per measured round, median and p10-p90: CPU time
 * (utime + stime of /proc/PID/stat: every thread) and context switches
 * (voluntary + nonvoluntary of every /proc/PID/task/TID/status) of the
 * gateway process over its segment, divided by the requests answered in it;
 * the same for this process over the direct segment (the direct master has no
 * gateway: its row is the master's own process, with its simulator thread, as
 * the gateway's includes its own), with the switches of the main thread alone
 * (the gateway's I/O thread; the direct master); and the TCP clients' CPU
 * time. VmRSS of both after the cell.
 *
 * Also: the resident memory of a fresh gateway process (VmRSS, VmHWM,
 * RssAnon, RssFile from /proc/PID/status, PSS from smaps_rollup) with one
 * bus and 32 connected clients, idle and then busy; and a paced run (`port = sim-paced:1..10` at 19200 8E1, t3.5 gap):
 * one poll cycle = one read of 10 registers from each of 10 slaves, asked
 * at once by 10 clients, timed from the start to the last answer, against
 * its computed wire time.
 *
 * The gateway subprocess and its /proc and /metrics readings are bench_gw.c's.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/gateway.h"
#include "bench/internal.h"
#include "drivers/driver.h"

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
#include <sys/types.h>
#include <unistd.h>

/* ---- samples ------------------------------------------------------------------ */

typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec_t;

static int dvec_push(dvec_t *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4096;
        double *nv = realloc(d->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        d->v = nv;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

static int dvec_append(dvec_t *d, const dvec_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (dvec_push(d, s->v[i]))
            return -1;
    return 0;
}

/* p50 and p99 of a latency vector (sorts it). */
static void latency_percentiles(dvec_t *d, double *p50, double *p99)
{
    bench_sort(d->v, d->n);
    *p50 = bench_quantile(d->v, d->n, 0.5);
    *p99 = bench_quantile(d->v, d->n, 0.99);
}

/* ---- the arms -------------------------------------------------------------------- */

typedef struct client {
    pthread_t thread;
    modbus_t *ctx;
    unsigned regs;
    pthread_barrier_t *start;
    const uint64_t *deadline;
    dvec_t lat;          /* us, this segment */
    uint64_t ok, errors, t_end;
} client_t;

static void *client_main(void *arg)
{
    client_t *c = arg;
    uint16_t regs[125];

    pthread_barrier_wait(c->start);
    uint64_t deadline = *c->deadline;
    c->t_end = bench_now_ns();
    for (;;) {
        uint64_t t0 = bench_now_ns();
        if (t0 >= deadline)
            break;
        int rc = modbus_read_registers(c->ctx, 0, (int)c->regs, regs);
        uint64_t t1 = bench_now_ns();
        if (rc == (int)c->regs) {
            c->ok++;
            dvec_push(&c->lat, (double)(t1 - t0) / 1000.0);
        } else {
            c->errors++;
        }
        c->t_end = t1;
    }
    return NULL;
}

/* One segment of n clients; returns requests/s, appends latencies. */
static double run_clients(modbus_t **ctx, unsigned n, unsigned regs, uint64_t seg_ns,
                          dvec_t *lat, uint64_t *errors)
{
    client_t c[64];
    pthread_barrier_t start;
    uint64_t deadline = 0, ok = 0, t_end = 0;

    pthread_barrier_init(&start, NULL, n + 1);
    for (unsigned i = 0; i < n; i++) {
        c[i] = (client_t){ .ctx = ctx[i], .regs = regs, .start = &start, .deadline = &deadline };
        pthread_create(&c[i].thread, NULL, client_main, &c[i]);
    }
    uint64_t t0 = bench_now_ns();
    deadline = t0 + seg_ns;
    pthread_barrier_wait(&start);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(c[i].thread, NULL);
        ok += c[i].ok;
        *errors += c[i].errors;
        if (c[i].t_end > t_end)
            t_end = c[i].t_end;
        if (lat)
            dvec_append(lat, &c[i].lat);
        free(c[i].lat.v);
    }
    pthread_barrier_destroy(&start);
    return t_end > t0 ? (double)ok * 1e9 / (double)(t_end - t0) : 0;
}

typedef struct direct {
    bench_pty_sim_t line;
    modbus_t *ctx;
} direct_t;

/* The simulator (slave 1, 115200 8N1, unpaced, live as in the gateway's) on
 * a thread of this process, serving the master side of a new pty pair;
 * *path is the other side. */
static int pty_sim_open(direct_t *d, char *path, size_t cap)
{
    memset(d, 0, sizeof *d);
    int rc = bench_pty_sim_open(&d->line, 115200, false, true, "gateway");
    snprintf(path, cap, "%s", d->line.path);
    return rc;
}

static int direct_open(direct_t *d)
{
    char path[128];

    if (pty_sim_open(d, path, sizeof path) != 0)
        return -1;
    d->ctx = modbus_new_rtu(path, 115200, 'N', 8, 1);
    if (!d->ctx || modbus_set_slave(d->ctx, 1) != 0 || modbus_connect(d->ctx) != 0) {
        fprintf(stderr, "rtugw bench gateway: libmodbus RTU on %s: %s\n", path, modbus_strerror(errno));
        return -1;
    }
    modbus_set_response_timeout(d->ctx, 1, 0);
    return 0;
}

static void direct_close(direct_t *d)
{
    if (d->ctx) {
        modbus_close(d->ctx);
        modbus_free(d->ctx);
    }
    bench_pty_sim_close(&d->line);
}

static double run_direct(direct_t *d, unsigned regs, uint64_t seg_ns, dvec_t *lat, uint64_t *errors)
{
    uint16_t v[125];
    uint64_t ok = 0, t0 = bench_now_ns(), deadline = t0 + seg_ns, t_end = t0;

    for (;;) {
        uint64_t a = bench_now_ns();
        if (a >= deadline)
            break;
        int rc = modbus_read_registers(d->ctx, 0, (int)regs, v);
        uint64_t b = bench_now_ns();
        if (rc == (int)regs) {
            ok++;
            if (lat)
                dvec_push(lat, (double)(b - a) / 1000.0);
        } else {
            (*errors)++;
            modbus_flush(d->ctx);
        }
        t_end = b;
    }
    return t_end > t0 ? (double)ok * 1e9 / (double)(t_end - t0) : 0;
}

/* ---- the benchmark ------------------------------------------------------------------ */

static const unsigned cell_regs[] = { 1, 8, 125 };
static const unsigned cell_clients[] = { 1, 4, 8 };
#define MAX_CELL_CLIENTS 8
#define NREGS (sizeof cell_regs / sizeof cell_regs[0])
#define NCLIENTS (sizeof cell_clients / sizeof cell_clients[0])

/* Per-request cost, per measured round: CPU time of the gateway process
 * (all threads, its simulator thread included) and of the direct arm's
 * process (this one: the master and its simulator thread), context switches
 * of their threads and of their main thread alone (the gateway's I/O
 * thread; the direct master), and the CPU time of this process's TCP
 * clients in the rtugw segments. */
typedef struct cell_cost {
    double *cpu_us, *ctxsw, *direct_cpu_us, *direct_ctxsw, *client_cpu_us;
    double *main_ctxsw, *direct_main_ctxsw;
} cell_cost_t;

static void close_clients(modbus_t **ctx, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (ctx[i]) {
            modbus_close(ctx[i]);
            modbus_free(ctx[i]);
            ctx[i] = NULL;
        }
}

static int open_clients(const bench_gw_t *gw, modbus_t **ctx, unsigned n, int slave)
{
    for (unsigned i = 0; i < n; i++) {
        ctx[i] = bench_gw_client(gw, slave);
        if (!ctx[i]) {
            fprintf(stderr, "rtugw bench gateway: TCP client %u cannot connect: %s\n", i,
                    modbus_strerror(errno));
            close_clients(ctx, i);
            return -1;
        }
    }
    return 0;
}

static double per_request(double total, uint64_t requests)
{
    return requests ? total / (double)requests : 0;
}

/* One measured round's cost per request, from usage samples around the
 * direct segment (d0, d1: this process) and the rtugw segment (g0, g1: the
 * gateway; c0, c1: this process, i.e. its TCP clients). */
static void round_cost(cell_cost_t *cost, unsigned m, const bench_proc_usage_t u[6], uint64_t n_direct,
                       uint64_t n_rtugw)
{
    cost->direct_cpu_us[m] = per_request((u[1].cpu_s - u[0].cpu_s) * 1e6, n_direct);
    cost->direct_ctxsw[m] = per_request((double)(u[1].ctx_switches - u[0].ctx_switches), n_direct);
    cost->cpu_us[m] = per_request((u[3].cpu_s - u[2].cpu_s) * 1e6, n_rtugw);
    cost->ctxsw[m] = per_request((double)(u[3].ctx_switches - u[2].ctx_switches), n_rtugw);
    cost->client_cpu_us[m] = per_request((u[5].cpu_s - u[4].cpu_s) * 1e6, n_rtugw);
    cost->direct_main_ctxsw[m] =
        per_request((double)(u[1].main_ctx_switches - u[0].main_ctx_switches), n_direct);
    cost->main_ctxsw[m] = per_request((double)(u[3].main_ctx_switches - u[2].main_ctx_switches), n_rtugw);
}

/* The floor's arm of a cell (--relay): its clients, and per measured round
 * its rate, rtugw's rate over it, and its cost per request. */
typedef struct relay_arm {
    bench_gw_t *gw;
    modbus_t *ctx[MAX_CELL_CLIENTS];
    double *v;                  /* 4 x rounds: rps, rtugw/relay, CPU us, switches */
    dvec_t lat;
} relay_arm_t;

static void relay_segment(relay_arm_t *ra, cell_t *cell, uint64_t seg_ns, int m, unsigned rounds, double g_rps)
{
    bench_proc_usage_t a, b;
    pid_t pid = bench_gw_pid(ra->gw);
    size_t n0 = ra->lat.n;
    uint64_t errors = 0;
    bench_proc_usage(pid, &a);
    double rps = run_clients(ra->ctx, cell->clients, cell->regs, seg_ns, m >= 0 ? &ra->lat : NULL, &errors);
    bench_proc_usage(pid, &b);
    if (m < 0)
        return;   /* a warm-up round */
    uint64_t n = ra->lat.n - n0;
    ra->v[m] = rps;
    ra->v[rounds + m] = rps > 0 ? g_rps / rps : 0;
    ra->v[2 * rounds + m] = per_request((b.cpu_s - a.cpu_s) * 1e6, n);
    ra->v[3 * rounds + m] = per_request((double)(b.ctx_switches - a.ctx_switches), n);
    cell->relay_errors += errors;
    cell->relay_requests += n;
}

static void relay_finish(relay_arm_t *ra, cell_t *cell, unsigned rounds)
{
    if (ra->v && rounds) {
        bench_spread(ra->v, rounds, &cell->relay_rps);
        bench_spread(ra->v + rounds, rounds, &cell->rtugw_per_relay);
        bench_spread(ra->v + 2 * rounds, rounds, &cell->relay_cpu_us);
        bench_spread(ra->v + 3 * rounds, rounds, &cell->relay_ctxsw);
        latency_percentiles(&ra->lat, &cell->relay_p50, &cell->relay_p99);
    }
    close_clients(ra->ctx, MAX_CELL_CLIENTS);
    free(ra->v);
    free(ra->lat.v);
}

static int run_cell(const gw_options_t *opt, bench_gw_t *gw, bench_gw_t *relay, direct_t *d, cell_t *cell)
{
    relay_arm_t ra = { .gw = relay };
    modbus_t *ctx[MAX_CELL_CLIENTS] = { 0 };
    pid_t self = getpid(), gpid = bench_gw_pid(gw);
    double *costs = calloc(7 * (size_t)opt->rounds, sizeof *costs);
    cell_cost_t cost = { costs, costs + opt->rounds, costs + 2 * opt->rounds, costs + 3 * opt->rounds,
                         costs + 4 * opt->rounds, costs + 5 * opt->rounds, costs + 6 * opt->rounds };
    uint64_t seg_ns = (uint64_t)(opt->seconds / opt->rounds * 1e9);
    double *rps_g = calloc(opt->rounds, sizeof *rps_g);
    double *rps_d = calloc(opt->rounds, sizeof *rps_d);
    double *ratio = calloc(opt->rounds, sizeof *ratio);
    dvec_t lat_g = { 0 }, lat_d = { 0 };
    int rc = -1;

    if (!rps_g || !rps_d || !ratio || !costs || open_clients(gw, ctx, cell->clients, 1))
        goto out;
    if (relay && (!(ra.v = calloc(4 * (size_t)opt->rounds, sizeof *ra.v)) ||
                  open_clients(relay, ra.ctx, cell->clients, 1)))
        goto out;
    for (unsigned r = 0; r < opt->warmup + opt->rounds; r++) {
        bool measured = r >= opt->warmup;
        uint64_t e_d = 0, e_g = 0;
        size_t n_d = lat_d.n, n_g = lat_g.n;
        bench_proc_usage_t u[6];
        bench_proc_usage(self, &u[0]);
        double d_rps = run_direct(d, cell->regs, seg_ns, measured ? &lat_d : NULL, &e_d);
        bench_proc_usage(self, &u[1]);
        bench_proc_usage(gpid, &u[2]);
        bench_proc_usage(self, &u[4]);
        double g_rps = run_clients(ctx, cell->clients, cell->regs, seg_ns, measured ? &lat_g : NULL, &e_g);
        bench_proc_usage(gpid, &u[3]);
        bench_proc_usage(self, &u[5]);
        if (relay)
            relay_segment(&ra, cell, seg_ns, measured ? (int)(r - opt->warmup) : -1, opt->rounds, g_rps);
        if (!measured)
            continue;
        unsigned m = r - opt->warmup;
        round_cost(&cost, m, u, lat_d.n - n_d, lat_g.n - n_g);
        rps_d[m] = d_rps;
        rps_g[m] = g_rps;
        ratio[m] = d_rps > 0 ? g_rps / d_rps : 0;
        cell->direct_errors += e_d;
        cell->errors += e_g;
        cell->direct_requests += lat_d.n - n_d;
        cell->requests += lat_g.n - n_g;
    }
    bench_spread(rps_g, opt->rounds, &cell->rtugw_rps);
    bench_spread(rps_d, opt->rounds, &cell->direct_rps);
    bench_spread(ratio, opt->rounds, &cell->ratio);
    bench_spread(cost.cpu_us, opt->rounds, &cell->cpu_us);
    bench_spread(cost.ctxsw, opt->rounds, &cell->ctxsw);
    bench_spread(cost.direct_cpu_us, opt->rounds, &cell->direct_cpu_us);
    bench_spread(cost.direct_ctxsw, opt->rounds, &cell->direct_ctxsw);
    bench_spread(cost.client_cpu_us, opt->rounds, &cell->client_cpu_us);
    bench_spread(cost.main_ctxsw, opt->rounds, &cell->main_ctxsw);
    bench_spread(cost.direct_main_ctxsw, opt->rounds, &cell->direct_main_ctxsw);
    bench_proc_usage_t now;
    cell->threads = bench_proc_usage(gpid, &now) == 0 ? now.threads : 0;
    cell->rss_kib = bench_gw_status_kib(gpid, "VmRSS");
    cell->direct_rss_kib = bench_gw_status_kib(self, "VmRSS");
    latency_percentiles(&lat_g, &cell->p50, &cell->p99);
    latency_percentiles(&lat_d, &cell->direct_p50, &cell->direct_p99);
    rc = 0;
out:
    relay_finish(&ra, cell, rc == 0 ? opt->rounds : 0);
    close_clients(ctx, MAX_CELL_CLIENTS);
    free(costs);
    free(rps_g);
    free(rps_d);
    free(ratio);
    free(lat_g.v);
    free(lat_d.v);
    return rc;
}

/* 32 clients connected: idle, then all busy (8 registers each, back to back). */
static int run_rss(const gw_options_t *opt, bench_gw_t *gw, rss_result_t *out)
{
    modbus_t *ctx[RSS_CLIENTS] = { 0 };
    pid_t pid = bench_gw_pid(gw);
    double busy_s = opt->seconds / 6 > 0.2 ? opt->seconds / 6 : 0.2;

    out->before_kib = bench_gw_status_kib(pid, "VmRSS");
    if (open_clients(gw, ctx, RSS_CLIENTS, 1))
        return -1;
    usleep(200000);
    out->idle_kib = bench_gw_status_kib(pid, "VmRSS");
    out->busy_rps = run_clients(ctx, RSS_CLIENTS, 8, (uint64_t)(busy_s * 1e9), NULL, &out->errors);
    out->busy_kib = bench_gw_status_kib(pid, "VmRSS");
    out->hwm_kib = bench_gw_status_kib(pid, "VmHWM");
    out->anon_kib = bench_gw_status_kib(pid, "RssAnon");
    out->file_kib = bench_gw_status_kib(pid, "RssFile");
    out->pss_kib = bench_gw_status_kib(pid, "Pss");
    close_clients(ctx, RSS_CLIENTS);
    return 0;
}

typedef struct paced_client {
    pthread_t thread;
    modbus_t *ctx;
    pthread_barrier_t *start;
    uint64_t t_end;
    int ok;
} paced_client_t;

static void *paced_main(void *arg)
{
    paced_client_t *c = arg;
    uint16_t v[PACED_REGS];
    pthread_barrier_wait(c->start);
    c->ok = modbus_read_registers(c->ctx, 0, PACED_REGS, v) == PACED_REGS;
    c->t_end = bench_now_ns();
    return NULL;
}

static int run_paced(const gw_options_t *opt, paced_result_t *out)
{
    char bus[256];
    modbus_t *ctx[PACED_DEVICES] = { 0 };
    unsigned total = opt->paced_cycles + 1;   /* the first is a warm-up */
    double *cyc = calloc(total, sizeof *cyc), *rf = calloc(total, sizeof *rf), *rr = calloc(total, sizeof *rr);
    int rc = -1;

    /* Computed wire time of one cycle on a rested line, 8E1 at 19200 baud:
     * per transaction a request of 8 bytes and an answer of 5 + 2 x 10, and
     * t3.5 of rest between transactions (9 of them). */
    double char_ms = PACED_CHAR_BITS * 1000.0 / PACED_BAUD;
    double t35_ms = 3.5 * char_ms;
    out->wire_full_ms = PACED_DEVICES * (8 + 5 + 2 * PACED_REGS) * char_ms + (PACED_DEVICES - 1) * t35_ms;
    out->wire_resp_ms = PACED_DEVICES * (5 + 2 * PACED_REGS) * char_ms + (PACED_DEVICES - 1) * t35_ms;
    snprintf(bus, sizeof bus, "port = sim-paced:1,2,3,4,5,6,7,8,9,10\nbaud = %u\nparity = even\n"
             "gap_us = 0\nresponse_timeout_ms = 1000\n", PACED_BAUD);
    bench_gw_t *gw = cyc && rf && rr ? bench_gw_start(bus, 1, NULL) : NULL;
    if (!gw)
        goto out;
    for (unsigned i = 0; i < PACED_DEVICES; i++) {
        ctx[i] = bench_gw_client(gw, (int)i + 1);
        if (!ctx[i])
            goto out;
    }
    for (unsigned r = 0; r < total; r++) {
        paced_client_t c[PACED_DEVICES];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, PACED_DEVICES + 1);
        for (unsigned i = 0; i < PACED_DEVICES; i++) {
            c[i] = (paced_client_t){ .ctx = ctx[i], .start = &start };
            pthread_create(&c[i].thread, NULL, paced_main, &c[i]);
        }
        uint64_t t0 = bench_now_ns(), t_end = t0;
        pthread_barrier_wait(&start);
        for (unsigned i = 0; i < PACED_DEVICES; i++) {
            pthread_join(c[i].thread, NULL);
            if (!c[i].ok)
                out->errors++;
            if (c[i].t_end > t_end)
                t_end = c[i].t_end;
        }
        pthread_barrier_destroy(&start);
        usleep(20000);   /* the line rests between cycles */
        if (r == 0)
            continue;
        double ms = (double)(t_end - t0) / 1e6;
        cyc[r - 1] = ms;
        rf[r - 1] = ms / out->wire_full_ms;
        rr[r - 1] = ms / out->wire_resp_ms;
    }
    out->cycles = total - 1;
    bench_gw_metric(gw, "rtugw_bus_crc_errors_total{bus=\"line\"}", &out->crc_errors);
    bench_gw_metric(gw, "rtugw_bus_retries_total{bus=\"line\"}", &out->retries);
    bench_gw_metric(gw, "rtugw_bus_responses_total{bus=\"line\"}", &out->transactions);
    bench_spread(cyc, out->cycles, &out->cycle_ms);
    bench_spread(rf, out->cycles, &out->ratio_full);
    bench_spread(rr, out->cycles, &out->ratio_resp);
    rc = 0;
out:
    close_clients(ctx, PACED_DEVICES);
    if (bench_gw_stop(gw) != 0)
        rc = -1;
    free(cyc);
    free(rf);
    free(rr);
    return rc;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench gateway [--json] [--seconds S] [--rounds N] [--warmup N] [--paced-cycles N]\n"
            "                           [--workers N] [--sim-outside] [--relay]\n"
            "\n"
            "Requests/s and latency through rtugw (a subprocess on the built-in simulator,\n"
            "libmodbus TCP clients) next to a direct libmodbus RTU master on a pty against the\n"
            "same simulator, for 1, 8 and 125 registers and 1, 4 and 8 clients, with the CPU time\n"
            "and context switches per request of both; the gateway's resident memory with 32\n"
            "clients; a paced poll cycle against its wire time.\n"
            "  --seconds S       measured time per arm and cell, split into the rounds (default 3)\n"
            "  --rounds N        measured rounds per cell (default 10)\n"
            "  --warmup N        warm-up rounds per cell, dropped (default 2)\n"
            "  --paced-cycles N  paced poll cycles, 0 to skip (default 5)\n"
            "  --workers N       the gateway's [gateway] workers (default 0: one per core)\n"
            "  --sim-outside     the gateway's simulator runs in this process on a pty pair and the\n"
            "                    gateway opens the pty as a serial port, so its CPU and context\n"
            "                    switches are the gateway's alone (default: the built-in `sim:1`)\n"
            "  --relay           a third arm in every round, the floor: the least a Modbus TCP to\n"
            "                    RTU gateway does (one thread, poll(), no line discipline), as a\n"
            "                    child process on a simulator of its own; implies --sim-outside\n"
            "  --json            JSON instead of Markdown\n");
}

/* The floor runs its simulator here, so the gateway's must run here too:
 * the arms compare like with like. */
static int set_relay(void *dst, const char *unused)
{
    gw_options_t *opt = dst;
    (void)unused;
    opt->relay = opt->sim_outside = 1;
    return 0;
}

int bench_gateway_main(int argc, char **argv)
{
    gw_options_t opt = { .seconds = 3, .rounds = 10, .warmup = 2, .paced_cycles = 5 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &opt.json),
        BENCH_DOUBLE("seconds", &opt.seconds, 0.001, 3600),
        BENCH_UINT("rounds", &opt.rounds, 1, 10000),
        BENCH_UINT("warmup", &opt.warmup, 0, 10000),
        BENCH_UINT("paced-cycles", &opt.paced_cycles, 0, 10000),
        BENCH_UINT("workers", &opt.workers, 0, 10000),
        BENCH_FLAG("sim-outside", &opt.sim_outside),
        BENCH_CALL("relay", set_relay, &opt, no_argument, NULL),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "gateway", opts, usage, NULL);
    if (rc >= 0)
        return rc;

    signal(SIGPIPE, SIG_IGN);
    cell_t cells[NREGS * NCLIENTS];
    rss_result_t rss = { 0 };
    paced_result_t paced = { 0 };
    direct_t d;
    char bus[256];
    size_t ncells = 0;
    rc = 0;

    if (direct_open(&d)) {
        direct_close(&d);
        return 1;
    }
    direct_t outside = { .line = { .master = -1, .slave_hold = -1 } };
    char pty[128] = "sim:1";
    if (opt.sim_outside && pty_sim_open(&outside, pty, sizeof pty) != 0) {
        direct_close(&outside);
        direct_close(&d);
        return 1;
    }
    snprintf(bus, sizeof bus, "port = %s\nbaud = 115200\nparity = none\ngap_us = %d\n"
             "response_timeout_ms = 1000\nretries = 0\n", pty, GAP_US);
    char extra[64];
    snprintf(extra, sizeof extra, "workers = %u\n", opt.workers);
    bench_gw_t *gw = bench_gw_start(bus, 1, opt.workers ? extra : NULL);
    if (!gw) {
        direct_close(&outside);
        direct_close(&d);
        return 1;
    }
    direct_t floor_sim = { .line = { .master = -1, .slave_hold = -1 } };
    char floor_pty[128];
    bench_gw_t *relay = NULL;
    if (opt.relay && (pty_sim_open(&floor_sim, floor_pty, sizeof floor_pty) != 0 ||
                      !(relay = bench_relay_start(floor_pty)))) {
        bench_gw_stop(gw);
        direct_close(&floor_sim);
        direct_close(&outside);
        direct_close(&d);
        return 1;
    }
    for (size_t r = 0; r < NREGS && rc == 0; r++)
        for (size_t k = 0; k < NCLIENTS && rc == 0; k++) {
            cell_t *cell = &cells[ncells];
            *cell = (cell_t){ .regs = cell_regs[r], .clients = cell_clients[k] };
            if (run_cell(&opt, gw, relay, &d, cell) != 0)
                rc = 1;
            else
                ncells++;
            if (cell->errors || cell->direct_errors || cell->relay_errors) {
                fprintf(stderr, "rtugw bench gateway: %u registers, %u clients: %llu rtugw, %llu "
                        "direct and %llu relay requests failed\n", cell->regs, cell->clients,
                        (unsigned long long)cell->errors, (unsigned long long)cell->direct_errors,
                        (unsigned long long)cell->relay_errors);
                rc = 1;
            }
        }
    if (bench_gw_stop(gw) != 0) {
        fprintf(stderr, "rtugw bench gateway: the gateway did not stop cleanly\n");
        rc = 1;
    }
    if (relay && bench_gw_stop(relay) != 0) {
        fprintf(stderr, "rtugw bench gateway: the relay did not stop cleanly\n");
        rc = 1;
    }
    direct_close(&floor_sim);
    direct_close(&d);
    /* Memory on a fresh gateway, so the cells above do not count. */
    gw = rc == 0 ? bench_gw_start(bus, 1, opt.workers ? extra : NULL) : NULL;
    if (rc == 0 && (!gw || run_rss(&opt, gw, &rss) != 0))
        rc = 1;
    if (rss.errors) {
        fprintf(stderr, "rtugw bench gateway: %llu failed requests with %d clients\n",
                (unsigned long long)rss.errors, RSS_CLIENTS);
        rc = 1;
    }
    if (gw && bench_gw_stop(gw) != 0) {
        fprintf(stderr, "rtugw bench gateway: the gateway did not stop cleanly\n");
        rc = 1;
    }
    direct_close(&outside);
    if (rc == 0 && opt.paced_cycles && run_paced(&opt, &paced) != 0) {
        fprintf(stderr, "rtugw bench gateway: the paced run failed\n");
        rc = 1;
    }
    /* Reported, not fatal: on a loaded machine a paced answer can be split
     * by a stall longer than t3.5 (counted as CRC errors, retried). */
    if (paced.errors)
        fprintf(stderr, "rtugw bench gateway: warning: %llu paced reads failed (%.0f CRC errors, "
                "%.0f retries on the bus)\n", (unsigned long long)paced.errors, paced.crc_errors,
                paced.retries);
    if (ncells)
        gateway_print_report(&opt, cells, ncells, &rss, opt.paced_cycles ? &paced : NULL);
    if (rc)
        fprintf(stderr, "rtugw bench gateway: errors during the run (see above and the counts)\n");
    return rc;
}
