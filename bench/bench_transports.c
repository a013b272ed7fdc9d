/*
 * bench/bench_transports.c -- `rtugw bench transports`: requests per second
 * and per-request latency of each new path through rtugw, side by side in
 * the same run with the direct arm for that transport:
 *
 *   RTU over TCP bus   -- libmodbus TCP client -> rtugw -> tcp:// -> a device
 *                         server (TCP pumped to a pty) -> the simulator;
 *                         direct: an RTU over TCP client -> a second device
 *                         server exactly like it (one connection each);
 *   Modbus TCP device  -- libmodbus TCP client -> rtugw (framing = tcp) ->
 *                         libmodbus's TCP server; direct: libmodbus TCP
 *                         client -> the same server;
 *   shared TCP device  -- 8 libmodbus TCP clients -> rtugw -> that server
 *                         (one connection, one request at a time); direct:
 *                         one client -> the server;
 *   RTU over TCP front end -- an RTU over TCP client -> rtugw [rtu_tcp] ->
 *                         the built-in simulator; against a libmodbus TCP
 *                         client -> [tcp] of the same gateway and bus.
 *
 * The devices live in this process (transports_peers.c), the gateways are
 * `rtugw run` subprocesses (bench_gw_start). The serial side's rest between
 * frames is 1 us (gap_us): a pty has no wire to let settle, and the direct
 * clients rest not at all (bench gateway explains the same choice).
 *
 * Method: per cell the two arms alternate in rounds (the order flips each
 * round), each segment --seconds/--rounds long, --warmup rounds dropped.
 * Reported: median and p10-p90 over the measured rounds of each arm's
 * requests/s and of the per-round ratio rtugw/direct; latency median and
 * p10-p90 pooled over every measured request of the arm.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"
#include "bench/transports.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CLIENTS 8
#define SEG_SAMPLES 65536     /* latencies a client keeps per segment; the rest are counted only */
#define POOL_SAMPLES 262144   /* latencies a cell keeps per arm: a uniform sample of all */

typedef enum client_kind { K_MBAP, K_RTU } client_kind_t;

/* A client's latencies in one segment: a fixed buffer, filled in order. */
typedef struct sampler {
    double *v;
    size_t n;
} sampler_t;

/*
 * An arm's latencies over every measured segment of a cell, in bounded
 * memory: a reservoir (Vitter's algorithm R) keeps a uniform sample of
 * them all, so its quantiles are those of every request, up to sampling.
 */
typedef struct reservoir {
    double *v;
    size_t n;
    uint64_t seen, rng;
} reservoir_t;

typedef struct client {
    pthread_t thread;
    client_kind_t kind;
    modbus_t *ctx;          /* K_MBAP */
    int fd;                 /* K_RTU */
    unsigned regs;
    pthread_barrier_t *start;
    const uint64_t *deadline;
    sampler_t lat;          /* us, this segment */
    uint64_t ok, errors, t_end;
} client_t;

/* One side of a cell: n clients of a kind, connected to a port. */
typedef struct arm {
    const char *label;
    client_kind_t kind;
    unsigned port, n;
    client_t c[MAX_CLIENTS];
} arm_t;

typedef struct cell_result {
    const char *path, *arm, *base;
    unsigned regs, arm_clients, base_clients;
    bench_spread_t rps, base_rps, ratio, lat, base_lat;
    uint64_t requests, base_requests, errors, base_errors;
} cell_result_t;

typedef struct options {
    double seconds;
    unsigned long rounds, warmup;
    bool json;
} options_t;

static void sample(sampler_t *s, double x)
{
    if (s->v && s->n < SEG_SAMPLES)
        s->v[s->n++] = x;
}

static void reservoir_add(reservoir_t *r, double x)
{
    uint64_t j = r->seen++;
    if (r->n < POOL_SAMPLES)
        r->v[r->n++] = x;
    else if ((j = bench_xorshift(&r->rng) % r->seen) < POOL_SAMPLES)
        r->v[j] = x;
}

/* ---- clients ----------------------------------------------------------------------- */

static int read_once(client_t *c)
{
    uint16_t regs[125];
    if (c->kind == K_RTU)
        return bt_rtu_read_registers(c->fd, 1, 0, c->regs);
    return modbus_read_registers(c->ctx, 0, (int)c->regs, regs);
}

static void *client_main(void *arg)
{
    client_t *c = arg;
    pthread_barrier_wait(c->start);
    for (uint64_t deadline = *c->deadline;;) {
        uint64_t t0 = bench_now_ns();
        if (t0 >= deadline)
            break;
        int rc = read_once(c);
        c->t_end = bench_now_ns();
        if (rc == (int)c->regs) {
            c->ok++;
            sample(&c->lat, (double)(c->t_end - t0) / 1000.0);
        } else {
            c->errors++;
        }
    }
    return NULL;
}

static void arm_close(arm_t *a)
{
    for (unsigned i = 0; i < a->n; i++) {
        if (a->c[i].ctx) {
            modbus_close(a->c[i].ctx);
            modbus_free(a->c[i].ctx);
        }
        if (a->c[i].fd >= 0)
            close(a->c[i].fd);
        free(a->c[i].lat.v);
        a->c[i] = (client_t){ .fd = -1 };
    }
}

static int arm_open(arm_t *a)
{
    for (unsigned i = 0; i < a->n; i++) {
        client_t *c = &a->c[i];
        *c = (client_t){ .kind = a->kind, .fd = -1 };
        if (a->kind == K_RTU) {
            c->fd = bt_rtu_connect(a->port);
        } else if ((c->ctx = modbus_new_tcp("127.0.0.1", (int)a->port)) != NULL) {
            modbus_set_slave(c->ctx, 1);
            modbus_set_response_timeout(c->ctx, 3, 0);
            if (modbus_connect(c->ctx) != 0) {
                modbus_free(c->ctx);
                c->ctx = NULL;
            }
        }
        if (c->fd < 0 && !c->ctx) {
            fprintf(stderr, "rtugw bench transports: %s: client %u cannot connect to port %u: %s\n", a->label, i,
                    a->port, strerror(errno));
            a->n = i;
            arm_close(a);
            return -1;
        }
        if (!(c->lat.v = malloc(SEG_SAMPLES * sizeof *c->lat.v))) {
            a->n = i + 1;
            arm_close(a);
            return -1;
        }
    }
    return 0;
}

/* One segment of the arm's clients at once: requests/s; latencies into lat. */
static double run_segment(arm_t *a, unsigned regs, uint64_t seg_ns, reservoir_t *lat, uint64_t *ok, uint64_t *errors)
{
    pthread_barrier_t start;
    uint64_t deadline = 0, done = 0, t_end = 0;

    pthread_barrier_init(&start, NULL, a->n + 1);
    for (unsigned i = 0; i < a->n; i++) {
        client_t *c = &a->c[i];
        c->regs = regs;
        c->start = &start;
        c->deadline = &deadline;
        c->ok = c->errors = c->t_end = 0;
        c->lat.n = 0;
        pthread_create(&c->thread, NULL, client_main, c);
    }
    uint64_t t0 = bench_now_ns();
    deadline = t0 + seg_ns;
    pthread_barrier_wait(&start);
    for (unsigned i = 0; i < a->n; i++) {
        client_t *c = &a->c[i];
        pthread_join(c->thread, NULL);
        done += c->ok;
        *errors += c->errors;
        t_end = c->t_end > t_end ? c->t_end : t_end;
        for (size_t k = 0; lat && k < c->lat.n; k++)
            reservoir_add(lat, c->lat.v[k]);
    }
    pthread_barrier_destroy(&start);
    *ok += done;
    return t_end > t0 ? (double)done * 1e9 / (double)(t_end - t0) : 0;
}

/* The two arms in alternating rounds; out gets the spreads. */
static int run_cell(const options_t *o, const char *path, unsigned regs, arm_t *arm, arm_t *base, cell_result_t *out)
{
    uint64_t seg_ns = (uint64_t)(o->seconds / (double)o->rounds * 1e9);
    double *rps = calloc(o->rounds, sizeof *rps), *brps = calloc(o->rounds, sizeof *brps);
    double *ratio = calloc(o->rounds, sizeof *ratio);
    reservoir_t lat = { .v = malloc(POOL_SAMPLES * sizeof(double)), .rng = 0x9E3779B97F4A7C15ull };
    reservoir_t blat = { .v = malloc(POOL_SAMPLES * sizeof(double)), .rng = 0xD1B54A32D192ED03ull };
    int rc = -1;

    *out = (cell_result_t){ .path = path, .arm = arm->label, .base = base->label, .regs = regs,
                            .arm_clients = arm->n, .base_clients = base->n };
    if (!rps || !brps || !ratio || !lat.v || !blat.v)
        goto done;
    for (unsigned long r = 0; r < o->warmup + o->rounds; r++) {
        bool measured = r >= o->warmup;
        uint64_t ok = 0, bok = 0, err = 0, berr = 0;
        double a, b;
        if (r % 2) {
            a = run_segment(arm, regs, seg_ns, measured ? &lat : NULL, &ok, &err);
            b = run_segment(base, regs, seg_ns, measured ? &blat : NULL, &bok, &berr);
        } else {
            b = run_segment(base, regs, seg_ns, measured ? &blat : NULL, &bok, &berr);
            a = run_segment(arm, regs, seg_ns, measured ? &lat : NULL, &ok, &err);
        }
        if (!measured)
            continue;
        unsigned long m = r - o->warmup;
        rps[m] = a;
        brps[m] = b;
        ratio[m] = b > 0 ? a / b : 0;
        out->requests += ok;
        out->base_requests += bok;
        out->errors += err;
        out->base_errors += berr;
    }
    bench_spread(rps, o->rounds, &out->rps);
    bench_spread(brps, o->rounds, &out->base_rps);
    bench_spread(ratio, o->rounds, &out->ratio);
    bench_spread(lat.v, lat.n, &out->lat);
    bench_spread(blat.v, blat.n, &out->base_lat);
    rc = 0;
done:
    free(rps);
    free(brps);
    free(ratio);
    free(lat.v);
    free(blat.v);
    return rc;
}

/* ---- the paths ------------------------------------------------------------------------ */

/* Opens both arms, runs a cell per register count, closes them. */
static int run_pair(const options_t *o, const char *path, arm_t *arm, arm_t *base, const unsigned *regs,
                    unsigned nregs, cell_result_t *out, unsigned *count)
{
    int rc = 0;
    if (arm_open(arm) != 0 || arm_open(base) != 0) {
        arm_close(arm);
        return -1;
    }
    for (unsigned i = 0; i < nregs && rc == 0; i++)
        rc = run_cell(o, path, regs[i], arm, base, &out[(*count)++]);
    arm_close(arm);
    arm_close(base);
    return rc;
}

/* A gateway whose bus line is a tcp:// peer on port (keys in more). */
static bench_gw_t *gateway_to(unsigned port, const char *more)
{
    char bus[192];
    snprintf(bus, sizeof bus, "port = tcp://127.0.0.1:%u\nresponse_timeout_ms = 1000\n%s", port, more);
    return bench_gw_start(bus, 1, NULL);
}

/* rc, or -1 when the gateway did not stop cleanly (its log is printed then). */
static int stopped(bench_gw_t *gw, int rc)
{
    return bench_gw_stop(gw) == 0 ? rc : -1;
}

static int path_rtu_over_tcp(const options_t *o, cell_result_t *out, unsigned *count)
{
    static const unsigned regs[] = { 1, 125 };
    bt_devserver_t *via = bt_devserver_start(115200), *direct = bt_devserver_start(115200);
    bench_gw_t *gw = via && direct ? gateway_to(bt_devserver_port(via), "gap_us = 1\n") : NULL;
    int rc = -1;

    if (gw) {
        arm_t arm = { .label = "rtugw", .kind = K_MBAP, .port = bench_gw_tcp_port(gw), .n = 1 };
        arm_t base = { .label = "direct RTU over TCP", .kind = K_RTU, .port = bt_devserver_port(direct), .n = 1 };
        rc = stopped(gw, run_pair(o, "RTU over TCP bus", &arm, &base, regs, 2, out, count));
    }
    bt_devserver_stop(via);
    bt_devserver_stop(direct);
    return rc;
}

/* One device: one client through rtugw and one direct, then 8 through rtugw. */
static int path_tcp_device(const options_t *o, cell_result_t *out, unsigned *count)
{
    static const unsigned regs[] = { 1, 125 }, shared[] = { 8 };
    bt_tcpdev_t *dev = bt_tcpdev_start();
    bench_gw_t *gw = dev ? gateway_to(bt_tcpdev_port(dev), "framing = tcp\n") : NULL;
    int rc = -1;

    if (gw) {
        arm_t arm = { .label = "rtugw", .kind = K_MBAP, .port = bench_gw_tcp_port(gw), .n = 1 };
        arm_t base = { .label = "direct", .kind = K_MBAP, .port = bt_tcpdev_port(dev), .n = 1 };
        rc = run_pair(o, "Modbus TCP device", &arm, &base, regs, 2, out, count);
        arm.n = MAX_CLIENTS;
        rc = stopped(gw, rc ? rc : run_pair(o, "shared TCP device", &arm, &base, shared, 1, out, count));
    }
    bt_tcpdev_stop(dev);
    return rc;
}

static int path_rtu_tcp_front_end(const options_t *o, cell_result_t *out, unsigned *count)
{
    static const unsigned regs[] = { 8 };
    unsigned port;
    char extra[160];
    int fd = bt_listen(&port), rc = -1;

    if (fd < 0)
        return -1;
    close(fd);   /* a free port for the gateway to take */
    snprintf(extra, sizeof extra, "[rtu_tcp]\nenabled = true\nport = %u\ndefault_bus = line\n", port);
    bench_gw_t *gw = bench_gw_start("port = sim:1\nbaud = 115200\ngap_us = 1\n", 1, extra);
    if (gw) {
        arm_t arm = { .label = "rtugw [rtu_tcp]", .kind = K_RTU, .port = port, .n = 1 };
        arm_t base = { .label = "rtugw [tcp]", .kind = K_MBAP, .port = bench_gw_tcp_port(gw), .n = 1 };
        rc = stopped(gw, run_pair(o, "RTU over TCP front end", &arm, &base, regs, 1, out, count));
    }
    return rc;
}

/* ---- the report --------------------------------------------------------------------------- */

static void print_json(const options_t *o, const cell_result_t *r, unsigned n)
{
    printf("{\"seconds\": %g, \"rounds\": %lu, \"warmup\": %lu, \"cells\": [", o->seconds, o->rounds, o->warmup);
    for (unsigned i = 0; i < n; i++, r++)
        printf("%s{\"path\": \"%s\", \"registers\": %u, \"arm\": \"%s\", \"arm_clients\": %u, \"base\": \"%s\", "
               "\"base_clients\": %u, \"rps\": %.1f, \"rps_p10\": %.1f, \"rps_p90\": %.1f, \"base_rps\": %.1f, "
               "\"base_rps_p10\": %.1f, \"base_rps_p90\": %.1f, \"ratio\": %.3f, \"ratio_p10\": %.3f, "
               "\"ratio_p90\": %.3f, \"lat_us\": %.1f, \"lat_p10_us\": %.1f, \"lat_p90_us\": %.1f, "
               "\"base_lat_us\": %.1f, \"base_lat_p10_us\": %.1f, \"base_lat_p90_us\": %.1f, \"requests\": %llu, "
               "\"base_requests\": %llu, \"errors\": %llu, \"base_errors\": %llu}",
               i ? ", " : "", r->path, r->regs, r->arm, r->arm_clients, r->base, r->base_clients, r->rps.median,
               r->rps.p10, r->rps.p90, r->base_rps.median, r->base_rps.p10, r->base_rps.p90, r->ratio.median,
               r->ratio.p10, r->ratio.p90, r->lat.median, r->lat.p10, r->lat.p90, r->base_lat.median,
               r->base_lat.p10, r->base_lat.p90, (unsigned long long)r->requests,
               (unsigned long long)r->base_requests, (unsigned long long)r->errors,
               (unsigned long long)r->base_errors);
    printf("]}\n");
}

static void print_markdown(const options_t *o, const cell_result_t *r, unsigned n)
{
    printf("# rtugw bench transports\n\n%lu measured rounds (+%lu warm-up) of %.2f s per arm and cell; "
           "medians with p10-p90.\n\n"
           "| path | regs | arm (clients) | req/s | direct arm (clients) | req/s | ratio | latency us | "
           "direct latency us | failed |\n|---|---|---|---|---|---|---|---|---|---|\n",
           o->rounds, o->warmup, o->seconds / (double)o->rounds);
    for (unsigned i = 0; i < n; i++, r++)
        printf("| %s | %u | %s (%u) | %.0f (%.0f-%.0f) | %s (%u) | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) | "
               "%.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %llu / %llu |\n",
               r->path, r->regs, r->arm, r->arm_clients, r->rps.median, r->rps.p10, r->rps.p90, r->base,
               r->base_clients, r->base_rps.median, r->base_rps.p10, r->base_rps.p90, r->ratio.median, r->ratio.p10,
               r->ratio.p90, r->lat.median, r->lat.p10, r->lat.p90, r->base_lat.median, r->base_lat.p10,
               r->base_lat.p90, (unsigned long long)r->errors, (unsigned long long)r->base_errors);
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench transports [--json] [--seconds S] [--rounds N] [--warmup N]\n"
            "\n"
            "Requests/s and latency through rtugw next to the direct arm of each transport, in the\n"
            "same run: an RTU over TCP bus (a device server in front of the simulator) against an\n"
            "RTU over TCP client of another one; a Modbus TCP device (libmodbus's server) against\n"
            "a client of it, and 8 masters sharing it through rtugw against one direct; the\n"
            "[rtu_tcp] front end against [tcp] on the same gateway.\n"
            "  --seconds S  measured time per arm and cell, split into the rounds (default 2)\n"
            "  --rounds N   measured rounds per cell (default 8)\n"
            "  --warmup N   warm-up rounds per cell, dropped (default 1)\n"
            "  --json       JSON instead of Markdown\n");
}

int bench_transports_main(int argc, char **argv)
{
    options_t o = { .seconds = 2, .rounds = 8, .warmup = 1 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &o.json),
        BENCH_DOUBLE("seconds", &o.seconds, 0.001, 3600),
        BENCH_UINT("rounds", &o.rounds, 1, 10000),
        BENCH_UINT("warmup", &o.warmup, 0, 10000),
        BENCH_OPT_END,
    };
    cell_result_t cells[8];
    unsigned n = 0;
    int rc = bench_options(argc, argv, "transports", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (path_rtu_over_tcp(&o, cells, &n) != 0 || path_tcp_device(&o, cells, &n) != 0 ||
        path_rtu_tcp_front_end(&o, cells, &n) != 0) {
        fprintf(stderr, "rtugw bench transports: a path could not be measured\n");
        return 1;
    }
    if (o.json)
        print_json(&o, cells, n);
    else
        print_markdown(&o, cells, n);
    return 0;
}
