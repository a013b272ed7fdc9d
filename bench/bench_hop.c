/*
 * bench/bench_hop.c -- `rtugw bench hop`: the answers/s of a Modbus TCP
 * device bus (no wire time: the cost is the gateway's own, its thread
 * hand-offs included) through several rtugw builds side by side in the same
 * run (issue 45, "The hop on a fast bus").
 *
 * Each arm is one build (`--rtugw PATH`, repeatable; the first is the one
 * the others are read against) running `port = tcp://...`, `framing = tcp`
 * to a Modbus TCP device of its own: libmodbus's server on a thread of this
 * process (bench/transports_peers.c, holding register a = 1000 + a). N
 * libmodbus TCP clients, one thread each, read back to back through the
 * gateway, and every answer's values are checked: a wrong one fails the run
 * as a failed read does. The arms alternate in rounds (arm 1, arm 2, ...),
 * each segment --seconds / --rounds long, --warmup rounds dropped; reported
 * per arm: answers/s and the per-round ratio to the first arm's, median and
 * p10-p90 over the rounds, and the latency of one read, median and p10-p90
 * over all measured reads.
 */
#include "bench/bench.h"
#include "bench/internal.h"
#include "bench/options.h"
#include "bench/transports.h"
#include "bench/wire.h"

#include <modbus/modbus.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOP_MAX_ARMS 4
#define HOP_MAX_CLIENTS 64

typedef struct hop_opt {
    double seconds;
    unsigned rounds, warmup, clients, regs;
    const char *rtugw[HOP_MAX_ARMS];
    unsigned n_arms;
    int json;
} hop_opt_t;

typedef struct hop_client {
    pthread_t thread;
    modbus_t *ctx;
    unsigned regs;
    uint64_t deadline;
    pthread_barrier_t *start;
    bench_samples_t lat;
    uint64_t ok, errors;
} hop_client_t;

static void *client_main(void *arg)
{
    hop_client_t *c = arg;
    uint16_t v[125];

    pthread_barrier_wait(c->start);
    for (;;) {
        uint64_t a = bench_now_ns();
        if (a >= c->deadline)
            break;
        int rc = modbus_read_registers(c->ctx, 0, (int)c->regs, v);
        uint64_t b = bench_now_ns();
        bool right = rc == (int)c->regs;
        for (unsigned i = 0; right && i < c->regs; i++)
            right = v[i] == 1000 + i;
        if (right) {
            c->ok++;
            bench_samples_push(&c->lat, (double)(b - a) / 1000.0);
        } else {
            c->errors++;
        }
    }
    return NULL;
}

typedef struct hop_arm {
    bt_tcpdev_t *dev;
    bench_gw_t *gw;
    modbus_t *ctx[HOP_MAX_CLIENTS];
    double *rps, *ratio;
    bench_samples_t lat;
    uint64_t ok, errors;
} hop_arm_t;

/* One segment of the arm's clients: answers/s; latencies kept when measured. */
static double segment(const hop_opt_t *o, hop_arm_t *a, bool measured)
{
    hop_client_t c[HOP_MAX_CLIENTS];
    pthread_barrier_t start;
    uint64_t t0 = bench_now_ns(), ok = 0;

    pthread_barrier_init(&start, NULL, o->clients + 1);
    for (unsigned i = 0; i < o->clients; i++) {
        c[i] = (hop_client_t){ .ctx = a->ctx[i], .regs = o->regs, .start = &start,
                               .deadline = t0 + (uint64_t)(o->seconds / o->rounds * 1e9) };
        pthread_create(&c[i].thread, NULL, client_main, &c[i]);
    }
    pthread_barrier_wait(&start);
    for (unsigned i = 0; i < o->clients; i++) {
        pthread_join(c[i].thread, NULL);
        ok += c[i].ok;
        a->errors += c[i].errors;
        for (size_t k = 0; measured && k < c[i].lat.n; k++)
            bench_samples_push(&a->lat, c[i].lat.v[k]);
        free(c[i].lat.v);
    }
    uint64_t t1 = bench_now_ns();
    pthread_barrier_destroy(&start);
    if (measured)
        a->ok += ok;
    return t1 > t0 ? (double)ok * 1e9 / (double)(t1 - t0) : 0;
}

static int arm_open(const hop_opt_t *o, unsigned k, hop_arm_t *a)
{
    char bus[192];

    if (!(a->dev = bt_tcpdev_start()))
        return -1;
    snprintf(bus, sizeof bus, "port = tcp://127.0.0.1:%u\nframing = tcp\nresponse_timeout_ms = 1000\n",
             bt_tcpdev_port(a->dev));
    bench_gw_spec_t spec = { .binary = o->rtugw[k], .bus = bus, .probe_slave = 1 };
    if (!(a->gw = bench_gw_launch(&spec)))
        return -1;
    for (unsigned i = 0; i < o->clients; i++)
        if (!(a->ctx[i] = bench_gw_client(a->gw, 1))) {
            fprintf(stderr, "rtugw bench hop: client %u cannot connect to arm %u\n", i, k + 1);
            return -1;
        }
    return 0;
}

static int arm_close(const hop_opt_t *o, hop_arm_t *a)
{
    int rc = 0;
    for (unsigned i = 0; i < o->clients; i++)
        if (a->ctx[i]) {
            modbus_close(a->ctx[i]);
            modbus_free(a->ctx[i]);
        }
    if (a->gw && bench_gw_stop(a->gw) != 0)
        rc = -1;
    bt_tcpdev_stop(a->dev);
    free(a->lat.v);
    return rc;
}

static void report(const hop_opt_t *o, hop_arm_t *arm)
{
    if (o->json)
        printf("{\"clients\": %u, \"regs\": %u, \"rounds\": %u, \"seconds\": %.3f, \"arms\": [", o->clients, o->regs,
               o->rounds, o->seconds);
    else
        printf("Modbus TCP device bus, %u clients reading %u registers back to back; %u rounds of %.2f s per arm "
               "(median, p10-p90)\n\n| arm | rtugw | answers/s | / arm 1 | us per read |\n|---:|---|---:|---:|---:|\n",
               o->clients, o->regs, o->rounds, o->seconds / o->rounds);
    for (unsigned k = 0; k < o->n_arms; k++) {
        bench_spread_t r, q, l;
        bench_spread(arm[k].rps, o->rounds, &r);
        bench_spread(arm[k].ratio, o->rounds, &q);
        bench_spread(arm[k].lat.v, arm[k].lat.n, &l);
        const char *name = o->rtugw[k] ? o->rtugw[k] : "this rtugw";
        if (o->json)
            printf("%s{\"rtugw\": \"%s\", \"rps\": %.1f, \"rps_p10\": %.1f, \"rps_p90\": %.1f, \"ratio\": %.4f, "
                   "\"ratio_p10\": %.4f, \"ratio_p90\": %.4f, \"us\": %.1f, \"us_p10\": %.1f, \"us_p90\": %.1f, "
                   "\"answers\": %llu, \"errors\": %llu}", k ? ", " : "", name, r.median, r.p10, r.p90, q.median,
                   q.p10, q.p90, l.median, l.p10, l.p90, (unsigned long long)arm[k].ok,
                   (unsigned long long)arm[k].errors);
        else
            printf("| %u | %s | %.0f (%.0f-%.0f) | %.3f (%.3f-%.3f) | %.1f (%.1f-%.1f) |\n", k + 1, name, r.median,
                   r.p10, r.p90, q.median, q.p10, q.p90, l.median, l.p10, l.p90);
    }
    if (o->json)
        printf("]}\n");
}

static int add_rtugw(void *dst, const char *value)
{
    hop_opt_t *o = dst;
    if (o->n_arms == HOP_MAX_ARMS)
        return -1;
    o->rtugw[o->n_arms++] = value;
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench hop [--rtugw PATH]... [--clients N] [--regs N] [--seconds S] [--rounds N]\n"
            "                       [--warmup N] [--json]\n"
            "\n"
            "Answers/s of a Modbus TCP device bus (libmodbus's server in this process) through one or\n"
            "more rtugw builds, side by side in alternating rounds; every answer's values checked.\n"
            "  --rtugw PATH   a build to run, up to 4 (default: the rtugw that runs the bench); the\n"
            "                 first is the one the others' ratios are to\n"
            "  --clients N    TCP clients reading back to back (default 8, at most 64)\n"
            "  --regs N       holding registers per read (default 8)\n"
            "  --seconds S    measured time per arm, split into the rounds (default 4)\n"
            "  --rounds N     measured rounds (default 8)\n"
            "  --warmup N     warm-up rounds, dropped (default 1)\n"
            "  --json         JSON instead of Markdown\n");
}

int bench_hop_main(int argc, char **argv)
{
    hop_opt_t o = { .seconds = 4, .rounds = 8, .warmup = 1, .clients = 8, .regs = 8 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &o.json),
        BENCH_DOUBLE("seconds", &o.seconds, 0.01, 3600),
        BENCH_UINT("rounds", &o.rounds, 1, 10000),
        BENCH_UINT("warmup", &o.warmup, 0, 10000),
        BENCH_UINT("clients", &o.clients, 1, HOP_MAX_CLIENTS),
        BENCH_UINT("regs", &o.regs, 1, 125),
        BENCH_CALL("rtugw", add_rtugw, &o, required_argument, "a path (at most 4 of them)"),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "hop", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    if (o.n_arms == 0)
        o.n_arms = 1;   /* rtugw[0] NULL: the rtugw that runs the bench */
    hop_arm_t arm[HOP_MAX_ARMS] = { 0 };
    double *v = calloc(2 * (size_t)o.rounds * o.n_arms, sizeof *v);
    rc = v ? 0 : 1;
    for (unsigned k = 0; k < o.n_arms && rc == 0; k++) {
        arm[k].rps = v + 2 * (size_t)k * o.rounds;
        arm[k].ratio = arm[k].rps + o.rounds;
        if (arm_open(&o, k, &arm[k]) != 0)
            rc = 1;
    }
    for (unsigned r = 0; rc == 0 && r < o.warmup + o.rounds; r++) {
        bool measured = r >= o.warmup;
        for (unsigned k = 0; k < o.n_arms; k++) {
            double x = segment(&o, &arm[k], measured);
            if (measured)
                arm[k].rps[r - o.warmup] = x;
        }
        for (unsigned k = 0; measured && k < o.n_arms; k++)
            arm[k].ratio[r - o.warmup] = arm[0].rps[r - o.warmup] > 0 ? arm[k].rps[r - o.warmup] / arm[0].rps[r - o.warmup] : 0;
    }
    for (unsigned k = 0; k < o.n_arms; k++) {
        if (arm[k].errors) {
            fprintf(stderr, "rtugw bench hop: arm %u: %llu reads failed or had wrong values\n", k + 1,
                    (unsigned long long)arm[k].errors);
            rc = 1;
        }
        if (rc == 0 && arm[k].ok == 0) {
            fprintf(stderr, "rtugw bench hop: arm %u answered nothing\n", k + 1);
            rc = 1;
        }
    }
    if (rc == 0)
        report(&o, arm);
    for (unsigned k = 0; k < o.n_arms; k++)
        if (arm_close(&o, &arm[k]) != 0) {
            fprintf(stderr, "rtugw bench hop: arm %u's gateway did not stop cleanly\n", k + 1);
            rc = 1;
        }
    free(v);
    return rc;
}
