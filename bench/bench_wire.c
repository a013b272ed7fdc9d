/*
 * bench/bench_wire.c -- `rtugw bench wire`: one client on a line paced at its
 * baud, through rtugw and straight from a libmodbus RTU master, side by side
 * in the same run (issue 45, "Latency at the wire").
 *
 * Arms, per baud (default 115200 and 9600, 8N1):
 *   direct -- a libmodbus RTU master (modbus_new_rtu) in this process on a
 *             pty pair whose other side a paced simulator thread serves
 *             (driver_sim, pace on: each answer byte leaves at its wire time);
 *   rtugw  -- `rtugw run` on a second pty pair served the same way, opened
 *             as a serial port (`port = /dev/pts/N`, the serial driver, paced
 *             reads as on a real line), one libmodbus TCP client;
 *             three arms, each on a line of its own (bench/wire.h): the
 *             defaults, widen_reads = false, and that with line_thread =
 *             false (the bus on the I/O thread: no hop between threads);
 *   both read --regs holding registers of slave 1 back to back, and every
 *   answer's values are compared with the simulator's pattern (slave 1:
 *   1000 + address): a wrong value fails the run as a failed read does.
 * The gap is 1 us (gap_us = 1), as in bench gateway: the direct master rests
 * not at all between transactions, and a pty has no wire to settle. A pty
 * hands the request over at once (only the answer is paced), on both arms.
 *
 * Method: the arms alternate in rounds (direct, rtugw, ...), each segment
 * --seconds / --rounds long; --warmup rounds are dropped. Reported per baud:
 * requests/s of each arm and the per-round ratio rtugw/direct, median and
 * p10-p90 over the rounds; per-transaction latency of each arm, median and
 * p10-p90 over every measured request; and the added latency, rtugw's
 * median less the direct master's. With --timeline the gateway is started
 * with RTUGW_TIMELINE (gateway/timeline.c) and the stage times of its last
 * transactions are read back: median and p10-p90 of each stage's share of
 * a transaction (bench/wire_timeline.c).
 */
#include "bench/bench.h"
#include "bench/internal.h"
#include "bench/options.h"
#include "bench/wire.h"
#include "drivers/driver.h"

#include <errno.h>
#include <fcntl.h>
#include <modbus/modbus.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WIRE_MAX_BAUDS 4

/* Reads back to back for seg_ns; every answer's values checked. Returns
 * requests/s; latencies (us) appended to lat when measured. */
static int log_push(wire_client_log_t *log, uint64_t sent, uint64_t received)
{
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 4096;
        uint64_t *s = realloc(log->sent, cap * sizeof *s);
        if (s)
            log->sent = s;
        uint64_t *r = s ? realloc(log->received, cap * sizeof *r) : NULL;
        if (!r)
            return -1;
        log->received = r;
        log->cap = cap;
    }
    log->sent[log->n] = sent;
    log->received[log->n++] = received;
    return 0;
}

static double run_segment(modbus_t *ctx, unsigned regs, uint64_t seg_ns, bench_samples_t *lat, uint64_t *errors,
                          wire_client_log_t *log)
{
    uint16_t v[125];
    uint64_t ok = 0, t0 = bench_now_ns(), deadline = t0 + seg_ns, t_end = t0;

    for (;;) {
        uint64_t a = bench_now_ns();
        if (a >= deadline)
            break;
        int rc = modbus_read_registers(ctx, 0, (int)regs, v);
        uint64_t b = bench_now_ns();
        bool right = rc == (int)regs;
        for (unsigned i = 0; right && i < regs; i++)
            right = v[i] == driver_sim_pattern(1, DRIVER_SIM_HOLDING, i);
        if (right) {
            ok++;
            if (lat)
                bench_samples_push(lat, (double)(b - a) / 1000.0);
            if (lat && log)
                log_push(log, a, b);
        } else {
            (*errors)++;
            modbus_flush(ctx);
        }
        t_end = b;
    }
    return t_end > t0 ? (double)ok * 1e9 / (double)(t_end - t0) : 0;
}

/* One gateway arm: its own paced line, the gateway on it, one client. */
typedef struct gw_arm {
    bench_pty_sim_t line;
    bench_gw_t *gw;
    modbus_t *client;
    bench_samples_t lat[2];        /* by state: [1] the rounds with --cpu-latency's request held */
    wire_client_log_t log[2];
    char tl_path[256];   /* --timeline: RTUGW_TIMELINE's PATH; "" */
} gw_arm_t;

static int arm_start(const wire_options_t *opt, unsigned baud, unsigned k, gw_arm_t *a)
{
    char bus[512];
    const char *sections = k >= 1 ? "[device d1]\nslave = 1\nwiden_reads = false\n" : NULL;

    if (bench_pty_sim_open(&a->line, baud, true, false, "wire") != 0)
        return -1;
    snprintf(bus, sizeof bus, "port = %s\nbaud = %u\nparity = none\ngap_us = 1\nresponse_timeout_ms = 1000\n"
             "retries = 0\n", a->line.path, baud);
    if (opt->timeline) {
        const char *tmp = getenv("TMPDIR");
        snprintf(a->tl_path, sizeof a->tl_path, "%s/rtugw-wire-timeline-%d-%u-%u", tmp && *tmp ? tmp : "/tmp",
                 (int)getpid(), baud, k);
        setenv("RTUGW_TIMELINE", a->tl_path, 1);
    }
    bench_gw_spec_t spec = { .binary = opt->rtugw, .bus = bus, .sections = sections, .probe_slave = 1,
                             .gateway = k == 2 ? "line_thread = false\n" : NULL };
    a->gw = bench_gw_launch(&spec);
    unsetenv("RTUGW_TIMELINE");
    return a->gw && (a->client = bench_gw_client(a->gw, 1)) ? 0 : -1;
}

static int arm_stop(gw_arm_t *a)
{
    int rc = 0;
    if (a->client) {
        modbus_close(a->client);
        modbus_free(a->client);
    }
    if (a->gw && bench_gw_stop(a->gw) != 0) {
        fprintf(stderr, "rtugw bench wire: the gateway did not stop cleanly\n");
        rc = -1;
    }
    if (a->tl_path[0]) {
        char f[300];
        snprintf(f, sizeof f, "%s.0", a->tl_path);
        unlink(f);
    }
    bench_pty_sim_close(&a->line);
    for (int h = 0; h < 2; h++) {
        free(a->lat[h].v);
        free(a->log[h].sent);
        free(a->log[h].received);
    }
    return rc;
}

/* --cpu-latency: the CPU latency request (Linux's PM QoS) this process
 * holds while the fd is open, as rtugw's [gateway] cpu_latency_us does
 * (daemon/cpu_latency.c); it is the whole machine's, so it is held for a
 * round's segments of every arm, direct included, or for none. */
static int hold_cpu_latency(int us)
{
    int32_t v = us;
    int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, &v, sizeof v) != (ssize_t)sizeof v) {
        fprintf(stderr, "rtugw bench wire: --cpu-latency: /dev/cpu_dma_latency: %s (root's)\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/*
 * One baud: rows[0], and with --cpu-latency rows[1], the same arms in the
 * same rounds with the request held. Each round runs every arm's segment
 * once per state, the state first alternating from round to round, so a
 * drift of the machine falls on both alike; every ratio is to the direct
 * master's rate in the same round and state.
 */
static int run_baud(const wire_options_t *opt, unsigned baud, wire_row_t *rows)
{
    bench_pty_sim_t direct_line;
    modbus_t *direct = NULL;
    gw_arm_t arm[WIRE_ARMS];
    bench_samples_t lat_d[2] = { { 0 }, { 0 } };
    unsigned R = opt->rounds, states = opt->cpu_latency_us >= 0 ? 2 : 1;
    double *v = calloc((1 + 2 * WIRE_ARMS) * (size_t)R * 2, sizeof *v);
    uint64_t seg_ns = (uint64_t)(opt->seconds / R * 1e9);
    int rc = -1;

    for (unsigned h = 0; h < states; h++)
        rows[h] = (wire_row_t){ .baud = baud, .regs = opt->regs, .cpu_latency_us = h ? opt->cpu_latency_us : -1 };
    direct_line = (bench_pty_sim_t){ .master = -1, .slave_hold = -1 };
    for (unsigned k = 0; k < WIRE_ARMS; k++)
        arm[k] = (gw_arm_t){ .line = { .master = -1, .slave_hold = -1 } };
    if (!v || bench_pty_sim_open(&direct_line, baud, true, false, "wire") != 0)
        goto out;
    direct = modbus_new_rtu(direct_line.path, (int)baud, 'N', 8, 1);
    if (!direct || modbus_set_slave(direct, 1) != 0 || modbus_connect(direct) != 0) {
        fprintf(stderr, "rtugw bench wire: libmodbus RTU on %s: %s\n", direct_line.path, modbus_strerror(errno));
        goto out;
    }
    modbus_set_response_timeout(direct, 1, 0);
    for (unsigned k = 0; k < WIRE_ARMS; k++)
        if (arm_start(opt, baud, k, &arm[k]) != 0)
            goto out;
    for (unsigned r = 0; r < opt->warmup + R; r++) {
        bool measured = r >= opt->warmup;
        unsigned m = r - opt->warmup;
        for (unsigned i = 0; i < states; i++) {
            unsigned h = states == 2 ? (i + r) % 2 : 0;
            double *vh = v + (size_t)h * (1 + 2 * WIRE_ARMS) * R;
            int held = h ? hold_cpu_latency(opt->cpu_latency_us) : -1;
            if (h && held < 0)
                goto out;
            double d = run_segment(direct, opt->regs, seg_ns, measured ? &lat_d[h] : NULL, &rows[h].direct_errors,
                                   NULL);
            for (unsigned k = 0; k < WIRE_ARMS; k++) {
                double g = run_segment(arm[k].client, opt->regs, seg_ns, measured ? &arm[k].lat[h] : NULL,
                                       &rows[h].gw[k].errors, opt->timeline ? &arm[k].log[h] : NULL);
                if (measured) {
                    vh[(1 + 2 * k) * R + m] = g;
                    vh[(2 + 2 * k) * R + m] = d > 0 ? g / d : 0;
                }
            }
            if (measured)
                vh[m] = d;
            if (held >= 0)
                close(held);
        }
    }
    rc = 0;
    for (unsigned h = 0; h < states; h++) {
        wire_row_t *row = &rows[h];
        double *vh = v + (size_t)h * (1 + 2 * WIRE_ARMS) * R;
        row->direct_requests = lat_d[h].n;
        bench_spread(vh, R, &row->direct_rps);
        bench_spread(lat_d[h].v, lat_d[h].n, &row->direct_us);
        row->wire_us = (double)(opt->regs * 2 + 5) * 10 * 1e6 / baud;
        for (unsigned k = 0; k < WIRE_ARMS; k++) {
            wire_arm_t *g = &row->gw[k];
            g->requests = arm[k].lat[h].n;
            bench_spread(vh + (1 + 2 * k) * R, R, &g->rps);
            bench_spread(vh + (2 + 2 * k) * R, R, &g->ratio);
            bench_spread(arm[k].lat[h].v, arm[k].lat[h].n, &g->us);
            g->added_us = g->us.median - row->direct_us.median;
            if (opt->timeline && wire_timeline_read(arm[k].tl_path, &arm[k].log[h], g) != 0)
                rc = -1;
        }
    }
out:
    for (unsigned k = 0; k < WIRE_ARMS; k++)
        if (arm_stop(&arm[k]) != 0)
            rc = -1;
    if (direct) {
        modbus_close(direct);
        modbus_free(direct);
    }
    bench_pty_sim_close(&direct_line);
    for (int h = 0; h < 2; h++)
        free(lat_d[h].v);
    free(v);
    return rc;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench wire [--baud B[,B...]] [--regs N] [--seconds S] [--rounds N] [--warmup N]\n"
            "                        [--timeline] [--cpu-latency US] [--rtugw PATH] [--json]\n"
            "\n"
            "One client on a line paced at its baud (8N1): rtugw (a subprocess opening a pty as its\n"
            "serial port) side by side with a direct libmodbus RTU master on a pty served the same\n"
            "way, rounds alternating; every answer's values checked.\n"
            "  --baud B,...   bauds to run (default 115200,9600)\n"
            "  --regs N       holding registers per read (default 8)\n"
            "  --seconds S    measured time per arm and baud, split into the rounds (default 4)\n"
            "  --rounds N     measured rounds (default 8)\n"
            "  --warmup N     warm-up rounds, dropped (default 1)\n"
            "  --timeline     the gateway's per-stage times of its last transactions (RTUGW_TIMELINE)\n"
            "  --cpu-latency US  every round twice, the second state with a CPU latency request of US\n"
            "                 microseconds held (/dev/cpu_dma_latency, root's; what [gateway] cpu_latency_us\n"
            "                 holds), the order alternating: each arm reported for both\n"
            "  --rtugw PATH   the rtugw binary to measure (default: the one that runs the bench)\n"
            "  --json         JSON instead of Markdown\n");
}

static int parse_bauds(void *dst, const char *value)
{
    wire_options_t *opt = dst;
    char *end;
    const char *p = value;
    opt->n_bauds = 0;
    while (*p && opt->n_bauds < WIRE_MAX_BAUDS) {
        unsigned long b = strtoul(p, &end, 10);
        if (end == p || b < 1200 || b > 4000000 || (*end && *end != ','))
            return -1;
        opt->bauds[opt->n_bauds++] = (unsigned)b;
        p = *end ? end + 1 : end;
    }
    return *p || opt->n_bauds == 0 ? -1 : 0;
}

static int parse_cpu_latency(void *dst, const char *value)
{
    wire_options_t *opt = dst;
    char *end;
    unsigned long us = strtoul(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end || us > 1000000)
        return -1;
    opt->cpu_latency_us = (int)us;
    return 0;
}

int bench_wire_main(int argc, char **argv)
{
    wire_options_t opt = { .seconds = 4, .rounds = 8, .warmup = 1, .regs = 8, .bauds = { 115200, 9600 },
                           .n_bauds = 2, .cpu_latency_us = -1 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &opt.json),
        BENCH_FLAG("timeline", &opt.timeline),
        BENCH_DOUBLE("seconds", &opt.seconds, 0.01, 3600),
        BENCH_UINT("rounds", &opt.rounds, 1, 10000),
        BENCH_UINT("warmup", &opt.warmup, 0, 10000),
        BENCH_UINT("regs", &opt.regs, 1, 125),
        BENCH_CALL("cpu-latency", parse_cpu_latency, &opt, required_argument, "microseconds 0-1000000"),
        BENCH_TEXT("rtugw", &opt.rtugw),
        BENCH_CALL("baud", parse_bauds, &opt, required_argument, "bauds 1200-4000000, comma-separated (at most 4)"),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "wire", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    wire_row_t rows[2 * WIRE_MAX_BAUDS];
    size_t n = 0, states = opt.cpu_latency_us >= 0 ? 2 : 1;
    rc = 0;
    for (unsigned i = 0; i < opt.n_bauds; i++) {
        if (run_baud(&opt, opt.bauds[i], &rows[n]) != 0) {
            rc = 1;
            continue;
        }
        for (size_t h = 0; h < states; h++, n++) {
            const wire_row_t *w = &rows[n];
            uint64_t bad = w->direct_errors;
            for (unsigned k = 0; k < WIRE_ARMS; k++)
                bad += w->gw[k].errors;
            if (bad) {
                fprintf(stderr, "rtugw bench wire: %u baud: %llu reads failed or had wrong values (direct %llu)\n",
                        w->baud, (unsigned long long)bad, (unsigned long long)w->direct_errors);
                rc = 1;
            }
        }
    }
    wire_print(&opt, rows, n);
    return rc;
}
