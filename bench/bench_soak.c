/*
 * bench/bench_soak.c -- `rtugw bench soak`: many clients with mixed function
 * codes against a gateway on the built-in simulator, for N requests in all,
 * with every request accounted for on both sides.
 *
 * The gateway runs as a subprocess (`rtugw run -c FILE`, `port =
 * sim:1,2,3,4`, gap_us = 1; helpers in bench_gw.c). C libmodbus TCP
 * clients, one thread each: client i talks to slave 1 + i % 4 and owns 16
 * holding registers and 16 coils there (a block no other client writes).
 * Each first writes its whole block (fc 16, fc 15), then cycles through
 *   fc 3 read own registers (compared with what it wrote), fc 6, fc 1 read
 *   own coils (compared), fc 5, fc 2, fc 4, fc 16, fc 15, and one read past
 *   the simulator's last register (must come back as exception 02)
 * until its share of N is sent. Client-side, every request is counted as
 * sent and as exactly one of: answered ok, answered with the expected
 * exception, answered with an unexpected exception, failed (no answer:
 * timeout, connection lost). A read-back that differs is a mismatch.
 *
 * At the end the gateway's /metrics (rtugw_tcp_requests_total,
 * rtugw_tcp_answers_total, read with a plain HTTP GET) must have grown by
 * exactly the requests sent and the answers received. Every --sample-ms the
 * gateway's VmRSS and open fds are sampled; after warm-up (the first 10 % of
 * the requests) RSS may grow by at most 5 % and the fd count must not move;
 * once the clients have closed, the fd count must be back where it was
 * before they connected. Exit 1 if any of it fails.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"

#include <modbus/modbus.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>


#define SOAK_SLAVES 4
#define BLOCK 16
#define SIM_REGISTERS 1000   /* the simulator's default table size */
#define MAX_CLIENTS 200      /* 4 slaves x 50 blocks of 16 below 1000 */
#define MAX_SAMPLES 4096

/* Under ASan or TSan freed memory sits in quarantine and shadow memory grows
 * with the heap: RSS says nothing about leaks there, so it is reported, not
 * judged. (The gateway is the same build's rtugw.) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_JUDGE_RSS 0
#else
#define SOAK_JUDGE_RSS 1
#endif

typedef struct soak_client {
    pthread_t thread;
    unsigned index;
    modbus_t *ctx;
    const bench_gw_t *gw;
    int slave;
    int base;
    uint64_t quota;
    uint64_t seed;
    uint16_t regs[BLOCK];
    uint8_t coils[BLOCK];
    /* results, read by the main thread while running (progress) */
    atomic_uint_fast64_t sent;
    uint64_t ok, exc_expected, exc_unexpected, failed, mismatches, reconnects;
    uint64_t by_fc[17];
    uint64_t exc_code[16];   /* unexpected exceptions by code */
    bool resync;             /* a write's outcome is unknown: rewrite the block */
} soak_client_t;

typedef struct soak_sample {
    double t_s;
    uint64_t done;
    long rss_kib;
    int fds;
} soak_sample_t;

static bool is_exception(int e)
{
    return e > MODBUS_ENOBASE && e <= MODBUS_ENOBASE + 0x0B;
}

static void mismatch(soak_client_t *c, const char *what, int addr, unsigned got, unsigned want)
{
    if (c->mismatches++ < 3)
        fprintf(stderr, "rtugw bench soak: client %u slave %d: %s %d read back %u, wrote %u\n",
                c->index, c->slave, what, addr, got, want);
}

/* One request: its result classified. expect_exc: the exception it must get. */
static void account(soak_client_t *c, int rc, int expect_exc, unsigned fc)
{
    int e = errno;
    bool write = fc == 5 || fc == 6 || fc == 15 || fc == 16;
    atomic_fetch_add_explicit(&c->sent, 1, memory_order_relaxed);
    c->by_fc[fc < 17 ? fc : 0]++;
    if (rc >= 0) {
        if (expect_exc)
            c->exc_unexpected++;   /* an answer where an exception was due: count it as wrong */
        else
            c->ok++;
        return;
    }
    if (is_exception(e)) {
        if (expect_exc && e == MODBUS_ENOBASE + expect_exc) {
            c->exc_expected++;
            return;
        }
        c->exc_unexpected++;
        c->exc_code[(e - MODBUS_ENOBASE) & 15]++;
        if (c->exc_unexpected <= 3)
            fprintf(stderr, "rtugw bench soak: client %u: fc %u answered with exception %d\n", c->index,
                    fc, e - MODBUS_ENOBASE);
        /* 0x0B after a timeout: the slave may still have done the write. */
        if (write)
            c->resync = true;
        return;
    }
    if (write)
        c->resync = true;
    if (c->failed++ < 3)
        fprintf(stderr, "rtugw bench soak: client %u: fc %u failed: %s\n", c->index, fc, modbus_strerror(e));
    /* No answer: start a clean connection so a late one cannot confuse the next. */
    modbus_close(c->ctx);
    modbus_free(c->ctx);
    c->ctx = bench_gw_client(c->gw, c->slave);
    c->reconnects++;
}

static void *soak_main(void *arg)
{
    soak_client_t *c = arg;
    uint16_t r[BLOCK];
    uint8_t b[BLOCK];
    uint64_t n = 0;

    /* The whole block first, so every later read-back is checkable. */
    for (unsigned i = 0; i < BLOCK; i++) {
        c->regs[i] = (uint16_t)bench_xorshift(&c->seed);
        c->coils[i] = (uint8_t)(bench_xorshift(&c->seed) & 1);
    }
    for (unsigned k = 0; n < c->quota; k++, n++) {
        if (!c->ctx) {
            c->failed += c->quota - n;
            atomic_fetch_add_explicit(&c->sent, c->quota - n, memory_order_relaxed);
            break;
        }
        unsigned j = (unsigned)(bench_xorshift(&c->seed) % BLOCK);
        unsigned op = k < 2 ? 100 + k : (k - 2) % 9;
        if (c->resync) {
            /* A write's outcome is unknown: write the whole block again (as
             * the next request) before any read-back is compared. */
            c->resync = false;
            int rc = modbus_write_registers(c->ctx, c->base, BLOCK, c->regs);
            account(c, rc, 0, 16);
            if (++n < c->quota && c->ctx) {
                rc = modbus_write_bits(c->ctx, c->base, BLOCK, c->coils);
                account(c, rc, 0, 15);
            } else {
                n--;   /* the loop's n++ counts the one sent */
            }
            continue;
        }
        int rc;
        switch (op) {
        case 100:
            rc = modbus_write_registers(c->ctx, c->base, BLOCK, c->regs);
            account(c, rc, 0, 16);
            break;
        case 101:
            rc = modbus_write_bits(c->ctx, c->base, BLOCK, c->coils);
            account(c, rc, 0, 15);
            break;
        case 0:
            rc = modbus_read_registers(c->ctx, c->base, BLOCK, r);
            account(c, rc, 0, 3);
            if (rc == BLOCK)
                for (unsigned i = 0; i < BLOCK; i++)
                    if (r[i] != c->regs[i])
                        mismatch(c, "holding register", c->base + (int)i, r[i], c->regs[i]);
            break;
        case 1: {
            uint16_t v = (uint16_t)bench_xorshift(&c->seed);
            rc = modbus_write_register(c->ctx, c->base + (int)j, v);
            account(c, rc, 0, 6);
            if (rc == 1)
                c->regs[j] = v;
            break;
        }
        case 2:
            rc = modbus_read_bits(c->ctx, c->base, BLOCK, b);
            account(c, rc, 0, 1);
            if (rc == BLOCK)
                for (unsigned i = 0; i < BLOCK; i++)
                    if (b[i] != c->coils[i])
                        mismatch(c, "coil", c->base + (int)i, b[i], c->coils[i]);
            break;
        case 3: {
            int v = (int)(bench_xorshift(&c->seed) & 1);
            rc = modbus_write_bit(c->ctx, c->base + (int)j, v);
            account(c, rc, 0, 5);
            if (rc == 1)
                c->coils[j] = (uint8_t)v;
            break;
        }
        case 4:
            rc = modbus_read_input_bits(c->ctx, 0, BLOCK, b);
            account(c, rc, 0, 2);
            break;
        case 5:
            rc = modbus_read_input_registers(c->ctx, 0, 8, r);
            account(c, rc, 0, 4);
            break;
        case 6: {
            unsigned cnt = 1 + (unsigned)(bench_xorshift(&c->seed) % (BLOCK - j));
            uint16_t v[BLOCK];
            for (unsigned i = 0; i < cnt; i++)
                v[i] = (uint16_t)bench_xorshift(&c->seed);
            rc = modbus_write_registers(c->ctx, c->base + (int)j, (int)cnt, v);
            account(c, rc, 0, 16);
            if (rc == (int)cnt)
                memcpy(&c->regs[j], v, cnt * sizeof v[0]);
            break;
        }
        case 7: {
            unsigned cnt = 1 + (unsigned)(bench_xorshift(&c->seed) % (BLOCK - j));
            uint8_t v[BLOCK];
            for (unsigned i = 0; i < cnt; i++)
                v[i] = (uint8_t)(bench_xorshift(&c->seed) & 1);
            rc = modbus_write_bits(c->ctx, c->base + (int)j, (int)cnt, v);
            account(c, rc, 0, 15);
            if (rc == (int)cnt)
                memcpy(&c->coils[j], v, cnt);
            break;
        }
        default:
            /* past the end of the table: the slave's exception 02 */
            rc = modbus_read_registers(c->ctx, SIM_REGISTERS, 1, r);
            account(c, rc, MODBUS_EXCEPTION_ILLEGAL_DATA_ADDRESS, 3);
            break;
        }
    }
    return NULL;
}

typedef struct soak_options {
    uint64_t requests;
    unsigned clients;
    unsigned sample_ms;
    unsigned timeout_ms;
    int json;
} soak_options_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench soak [--requests N] [--clients C] [--sample-ms MS] [--json]\n"
            "\n"
            "C libmodbus TCP clients (fc 1, 2, 3, 4, 5, 6, 15, 16 and an exception probe,\n"
            "read-back checked on registers and coils each client owns) against rtugw on the\n"
            "built-in simulator for N requests in all; every request must be answered\n"
            "exactly once (client counts = the gateway's /metrics), the gateway's RSS may\n"
            "grow at most 5 %% after warm-up and its fd count must stay flat. Exit 1 if not.\n"
            "  --requests N    requests in all (default 1000000)\n"
            "  --clients C     concurrent clients, 1..%d (default 32)\n"
            "  --sample-ms MS  RSS and fd sampling period (default 2000)\n"
            "  --response-timeout-ms MS  the bus's response_timeout_ms (default 1000)\n"
            "  --json          JSON instead of Markdown\n",
            MAX_CLIENTS);
}

static long max_rss_after(const soak_sample_t *s, size_t n, size_t from)
{
    long m = 0;
    for (size_t i = from; i < n; i++)
        if (s[i].rss_kib > m)
            m = s[i].rss_kib;
    return m;
}

int bench_soak_main(int argc, char **argv)
{
    soak_options_t opt = { .requests = 1000000, .clients = 32, .sample_ms = 2000, .timeout_ms = 1000 };
    const bench_opt_t opts[] = {
        BENCH_UINT("requests", &opt.requests, 1, 1000000000000ull),
        BENCH_UINT("clients", &opt.clients, 1, MAX_CLIENTS),
        BENCH_UINT("sample-ms", &opt.sample_ms, 1, 600000),
        BENCH_UINT("response-timeout-ms", &opt.timeout_ms, 1, 60000),
        BENCH_FLAG("json", &opt.json),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "soak", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (opt.requests < 4ull * opt.clients) {
        fprintf(stderr, "rtugw bench soak: --requests must be at least 4 per client (%u)\n", 4 * opt.clients);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    soak_client_t *cl = calloc(opt.clients, sizeof *cl);
    soak_sample_t *samples = calloc(MAX_SAMPLES, sizeof *samples);
    size_t nsamples = 0, baseline = SIZE_MAX;
    rc = 0;
    if (!cl || !samples) {
        free(cl);
        free(samples);
        return 1;
    }
    char bus[256];
    snprintf(bus, sizeof bus, "port = sim:1,2,3,4\nbaud = 115200\nparity = none\ngap_us = 1\n"
             "response_timeout_ms = %u\nretries = 0\nqueue_depth = 256\n", opt.timeout_ms);
    bench_gw_t *gw = bench_gw_start(bus, 1, NULL);
    if (!gw) {
        free(cl);
        free(samples);
        return 1;
    }
    pid_t pid = bench_gw_pid(gw);
    double req0 = 0, ans0 = 0, disc0 = 0, req1 = -1, ans1 = -1, disc1 = -1, msg0 = 0, msg1 = 0;
    if (bench_gw_metric(gw, "rtugw_tcp_requests_total", &req0) || bench_gw_metric(gw, "rtugw_tcp_answers_total", &ans0)) {
        fprintf(stderr, "rtugw bench soak: cannot read /metrics\n");
        rc = 1;
    }
    bench_gw_metric(gw, "rtugw_tcp_discarded_total", &disc0);
    bench_gw_metric(gw, "rtugw_actor_enqueue_total", &msg0);
    /* The start-up probe's connection may still be closing: wait for it. */
    for (int i = 0; i < 200; i++) {
        double active = -1;
        if (bench_gw_metric(gw, "rtugw_tcp_active", &active) == 0 && active == 0)
            break;
        usleep(10000);
    }
    /* ... and so may the /metrics request's (evhttp closes it after replying). */
    int fds_before = bench_gw_fd_count(pid);
    for (int i = 0; i < 100; i++) {
        usleep(20000);
        int again = bench_gw_fd_count(pid);
        if (again == fds_before)
            break;
        fds_before = again;
    }
    long rss_start = bench_gw_status_kib(pid, "VmRSS");

    unsigned started = 0;
    uint64_t share = opt.requests / opt.clients, extra = opt.requests % opt.clients;
    for (unsigned i = 0; i < opt.clients && rc == 0; i++) {
        soak_client_t *c = &cl[i];
        c->index = i;
        c->gw = gw;
        c->slave = 1 + (int)(i % SOAK_SLAVES);
        c->base = (int)(i / SOAK_SLAVES) * BLOCK;
        c->quota = share + (i < extra ? 1 : 0);
        c->seed = 0x9E3779B97F4A7C15ull * (i + 1);
        c->ctx = bench_gw_client(gw, c->slave);
        if (!c->ctx) {
            fprintf(stderr, "rtugw bench soak: client %u cannot connect: %s\n", i, modbus_strerror(errno));
            rc = 1;
        }
    }
    uint64_t t0 = bench_now_ns();
    for (unsigned i = 0; i < opt.clients && rc == 0; i++) {
        if (pthread_create(&cl[i].thread, NULL, soak_main, &cl[i]) != 0) {
            rc = 1;
            break;
        }
        started++;
    }

    /* Sample while they run. */
    uint64_t warm = opt.requests / 10, next_sample = t0;
    for (;;) {
        uint64_t done = 0;
        for (unsigned i = 0; i < started; i++)
            done += atomic_load_explicit(&cl[i].sent, memory_order_relaxed);
        uint64_t now = bench_now_ns();
        bool finished = done >= opt.requests || started < opt.clients;
        bool take = now >= next_sample || (baseline == SIZE_MAX && done >= warm) || finished;
        if (take && nsamples < MAX_SAMPLES) {
            soak_sample_t *s = &samples[nsamples];
            s->t_s = (double)(now - t0) / 1e9;
            s->done = done;
            s->rss_kib = bench_gw_status_kib(pid, "VmRSS");
            s->fds = bench_gw_fd_count(pid);
            if (baseline == SIZE_MAX && done >= warm)
                baseline = nsamples;
            nsamples++;
            if (!opt.json)
                fprintf(stderr, "soak: %6.1f s  %llu/%llu requests  RSS %ld KiB  fds %d\n", s->t_s,
                        (unsigned long long)done, (unsigned long long)opt.requests, s->rss_kib, s->fds);
            next_sample = now + (uint64_t)opt.sample_ms * 1000000ull;
        }
        if (finished)
            break;
        usleep(20000);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(cl[i].thread, NULL);
    uint64_t t1 = bench_now_ns();
    /* The last sample, all clients still connected. */
    if (nsamples < MAX_SAMPLES) {
        soak_sample_t *s = &samples[nsamples++];
        s->t_s = (double)(t1 - t0) / 1e9;
        s->done = opt.requests;
        s->rss_kib = bench_gw_status_kib(pid, "VmRSS");
        s->fds = bench_gw_fd_count(pid);
    }
    if (bench_gw_metric(gw, "rtugw_tcp_requests_total", &req1) ||
        bench_gw_metric(gw, "rtugw_tcp_answers_total", &ans1)) {
        fprintf(stderr, "rtugw bench soak: cannot read /metrics at the end\n");
        rc = 1;
    }
    bench_gw_metric(gw, "rtugw_tcp_discarded_total", &disc1);
    bench_gw_metric(gw, "rtugw_actor_enqueue_total", &msg1);

    uint64_t sent = 0, ok = 0, exc_e = 0, exc_u = 0, failed = 0, mism = 0, reconn = 0, by_fc[17] = { 0 };
    uint64_t exc_code[16] = { 0 };
    for (unsigned i = 0; i < opt.clients; i++) {
        soak_client_t *c = &cl[i];
        sent += atomic_load(&c->sent);
        ok += c->ok;
        exc_e += c->exc_expected;
        exc_u += c->exc_unexpected;
        failed += c->failed;
        mism += c->mismatches;
        reconn += c->reconnects;
        for (unsigned f = 0; f < 17; f++)
            by_fc[f] += c->by_fc[f];
        for (unsigned f = 0; f < 16; f++)
            exc_code[f] += c->exc_code[f];
        if (c->ctx) {
            modbus_close(c->ctx);
            modbus_free(c->ctx);
            c->ctx = NULL;
        }
    }
    /* After the clients close, the gateway's fds must come back. */
    int fds_after = -1;
    for (int i = 0; i < 200; i++) {
        fds_after = bench_gw_fd_count(pid);
        if (fds_after == fds_before)
            break;
        usleep(10000);
    }
    long rss_end = bench_gw_status_kib(pid, "VmRSS");
    if (bench_gw_stop(gw) != 0) {
        fprintf(stderr, "rtugw bench soak: the gateway did not stop cleanly\n");
        rc = 1;
    }

    /* The invariants. */
    uint64_t answered = ok + exc_e + exc_u;
    double d_req = req1 - req0, d_ans = ans1 - ans0, d_disc = disc1 - disc0;
    bool accounted = sent == opt.requests && sent == answered + failed;
    bool once = failed == 0 && d_req == (double)sent && d_ans == (double)answered && d_req == d_ans;
    bool correct = exc_u == 0 && mism == 0;
    if (baseline == SIZE_MAX || baseline >= nsamples)
        baseline = nsamples ? nsamples - 1 : 0;
    long rss_base = nsamples ? samples[baseline].rss_kib : 0;
    long rss_max = max_rss_after(samples, nsamples, baseline);
    double growth = rss_base > 0 ? 100.0 * (double)(rss_max - rss_base) / (double)rss_base : 0;
    bool rss_ok = !SOAK_JUDGE_RSS || (rss_base > 0 && growth <= 5.0);
    int fds_base = nsamples ? samples[baseline].fds : -1, fds_min = fds_base, fds_max = fds_base;
    for (size_t i = baseline; i < nsamples; i++) {
        if (samples[i].fds < fds_min) fds_min = samples[i].fds;
        if (samples[i].fds > fds_max) fds_max = samples[i].fds;
    }
    bool fds_ok = fds_base >= 0 && fds_min == fds_max && fds_after == fds_before;
    bool pass = rc == 0 && accounted && once && correct && rss_ok && fds_ok;
    double secs = (double)(t1 - t0) / 1e9;
    double msgs_per_req = sent ? (msg1 - msg0) / (double)sent : 0;

    if (opt.json) {
        printf("{\"requests\": %llu, \"clients\": %u, \"seconds\": %.2f, \"rps\": %.1f, "
               "\"sent\": %llu, \"ok\": %llu, \"exceptions_expected\": %llu, \"exceptions_unexpected\": %llu, "
               "\"failed\": %llu, \"mismatches\": %llu, \"reconnects\": %llu, \"response_timeout_ms\": %u, "
               "\"actor_messages_per_request\": %.2f, \"by_function\": {",
               (unsigned long long)opt.requests, opt.clients, secs, secs > 0 ? (double)sent / secs : 0,
               (unsigned long long)sent, (unsigned long long)ok, (unsigned long long)exc_e,
               (unsigned long long)exc_u, (unsigned long long)failed, (unsigned long long)mism,
               (unsigned long long)reconn, opt.timeout_ms, msgs_per_req);
        int first = 1;
        for (unsigned f = 0; f < 17; f++)
            if (by_fc[f]) {
                printf("%s\"%u\": %llu", first ? "" : ", ", f, (unsigned long long)by_fc[f]);
                first = 0;
            }
        printf("}, \"unexpected_exception_codes\": {");
        first = 1;
        for (unsigned f = 0; f < 16; f++)
            if (exc_code[f]) {
                printf("%s\"%u\": %llu", first ? "" : ", ", f, (unsigned long long)exc_code[f]);
                first = 0;
            }
        printf("}, \"gateway_requests\": %.0f, \"gateway_answers\": %.0f, \"gateway_discarded\": %.0f, "
               "\"answered_exactly_once\": %s, \"rss_kib\": {\"start\": %ld, \"baseline\": %ld, \"max\": %ld, "
               "\"end\": %ld, \"growth_pct\": %.2f, \"judged\": %s}, \"fds\": {\"before\": %d, \"baseline\": %d, \"min\": %d, "
               "\"max\": %d, \"after_close\": %d}, \"samples\": [",
               d_req, d_ans, d_disc, once && accounted ? "true" : "false", rss_start, rss_base, rss_max,
               rss_end, growth, SOAK_JUDGE_RSS ? "true" : "false", fds_before, fds_base, fds_min, fds_max,
               fds_after);
        for (size_t i = 0; i < nsamples; i++)
            printf("%s{\"t_s\": %.2f, \"done\": %llu, \"rss_kib\": %ld, \"fds\": %d}", i ? ", " : "",
                   samples[i].t_s, (unsigned long long)samples[i].done, samples[i].rss_kib, samples[i].fds);
        printf("], \"warmup_sample\": %zu, \"pass\": %s}\n", baseline, pass ? "true" : "false");
    } else {
        printf("# rtugw bench soak\n\n"
               "%u clients, %llu requests in %.1f s (%.0f requests/s), slaves 1-%d on the built-in simulator.\n\n"
               "| client side | count |\n|---|---:|\n"
               "| sent | %llu |\n| answered ok | %llu |\n| answered, expected exception 02 | %llu |\n"
               "| answered, unexpected exception | %llu |\n| failed (no answer) | %llu |\n"
               "| read-back mismatches | %llu |\n\n"
               "Gateway /metrics growth: requests %.0f, answers %.0f, discarded %.0f: every request answered "
               "exactly once: %s.\n\n"
               "Gateway VmRSS: %ld KiB at start, %ld KiB after warm-up (sample %zu), max %ld KiB after it "
               "(%+.2f %%, limit 5 %%%s), %ld KiB at the end.\n"
               "Gateway fds: %d before the clients connected, %d..%d after warm-up, %d after they closed.\n"
               "Actor messages per request: %.2f (bus response_timeout_ms = %u).\n\n"
               "%s\n",
               opt.clients, (unsigned long long)opt.requests, secs, secs > 0 ? (double)sent / secs : 0,
               SOAK_SLAVES, (unsigned long long)sent, (unsigned long long)ok, (unsigned long long)exc_e,
               (unsigned long long)exc_u, (unsigned long long)failed, (unsigned long long)mism, d_req, d_ans,
               d_disc, once && accounted ? "yes" : "NO", rss_start, rss_base, baseline, rss_max, growth,
               SOAK_JUDGE_RSS ? "" : "; not judged under a sanitizer", rss_end,
               fds_before, fds_min, fds_max, fds_after, msgs_per_req, opt.timeout_ms, pass ? "PASS" : "FAIL");
    }
    if (!pass)
        fprintf(stderr, "rtugw bench soak: FAIL:%s%s%s%s%s\n", accounted ? "" : " accounting",
                once ? "" : " answered-once", correct ? "" : " exceptions/read-back",
                rss_ok ? "" : " rss-growth", fds_ok ? "" : " fd-count");
    free(cl);
    free(samples);
    return pass ? 0 : 1;
}
