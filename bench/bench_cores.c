/*
 * bench/bench_cores.c -- `rtugw bench cores`: the answers/s that many Modbus
 * TCP clients get from rtugw when its front end, not a bus, is the bound,
 * with the gateway held to given CPUs (issue 45, "A front-end-bound load: 2
 * cores >= 1.7x the rate on 1 core (`taskset -c 0`), same binary").
 *
 * Each arm is the same rtugw (`--rtugw PATH`, default the one running the
 * bench) with a Modbus TCP device bus of its own (libmodbus's server on a
 * thread of this process, bench/transports_peers.c, holding register a =
 * 1000 + a), polled for holding registers 0-7 every 100 ms with
 * `serve_cached_ms = 1000`, so the clients' reads of those registers are
 * answered from the poll cache: the bus is out of the path. With --bus the
 * poll is left out and every read crosses to the bus and the device (the
 * issue's "the same on a Modbus TCP device bus"): then the bus, on the I/O
 * thread (gateway/bus.c, bus_home), and the device's one thread are in the
 * path, and under 1 % of the reads may come from a cache. An arm sets the
 * CPUs its gateway may run on (sched_setaffinity before exec, as `taskset -c`
 * does; bench/bench_gw.c) and extra [tcp] keys. The first arm is the one the
 * others' ratios are to.
 *
 * The load is made in C, cheaply (bench/cores_load.c), because the client
 * must not be the bound on a 2-core box (bench/storm_isolation.py's one
 * Python client takes a whole core): --client-threads threads, each an epoll loop over its share
 * of --clients non-blocking connections, each connection keeping --depth
 * reads of 8 registers (unit 1, address 0) in flight. Every answer is checked
 * (transaction id in flight, function 3, 16 bytes, values 1000-1007); a wrong
 * answer, an exception, a connection the gateway closed, or one with no
 * answer for 5 s fails the run. Connections stay open across rounds.
 *
 * The arms alternate in rounds (arm 1, arm 2, ...), each segment --seconds /
 * --rounds long, --warmup rounds dropped. Reported per arm: answers/s and the
 * per-round ratio to the first arm's (median, p10-p90 over the rounds), the
 * latency of one read (median, p10-p90 over all measured reads), CPU
 * seconds per second in the measured windows -- the gateway's (/proc/PID/stat,
 * all threads) and its busiest thread's, the client threads' own
 * (CLOCK_THREAD_CPUTIME_ID), the whole box's (/proc/stat: the loopback's
 * softirq work is charged to neither process) -- so a reader sees whether
 * one gateway thread, the client or the box was the bound; and the fraction
 * of reads answered from the cache (rtugw_tcp_cache_hits_total over
 * rtugw_tcp_requests_total; under 0.99 fails the run: the bus would be
 * measured).
 */
#include "bench/bench.h"
#include "bench/cores.h"
#include "bench/internal.h"
#include "bench/options.h"
#include "bench/transports.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CORES_MAX_ARMS 4
#define CORES_MAX_CLIENTS 4096
#define CORES_MAX_THREADS 64
#define CORES_MAX_DEPTH 64

typedef struct cores_arm_spec {
    char label[32];
    char cpus_text[64];   /* "" : no restriction */
    char keys[400];       /* extra [tcp] lines, each ending in '\n' */
    cpu_set_t cpus;
    bool pinned;
} cores_arm_spec_t;

typedef struct cores_opt {
    double seconds;
    unsigned rounds, warmup, clients, threads, depth;
    const char *rtugw;
    char client_cpus_text[64];
    cpu_set_t client_cpus;
    bool client_pinned;
    cores_arm_spec_t arm[CORES_MAX_ARMS];
    unsigned n_arms;
    int json, smoke, bus;
} cores_opt_t;

typedef struct cores_arm {
    const cores_arm_spec_t *spec;
    bt_tcpdev_t *dev;
    bench_gw_t *gw;
    cores_conn_t *conn;
    uint16_t *tid_slab;
    uint64_t *sent_slab;
    uint8_t *out_slab;
    cores_worker_t worker[CORES_MAX_THREADS];
    unsigned n_workers;
    double *rps, *ratio;
    bench_samples_t lat;
    uint64_t answers;
    double window_s, gw_cpu_s, gw_thread_cpu_s, client_cpu_s, host_cpu_s;
    double hits0, requests0, hit_fraction;
} cores_arm_t;

/* The CPU time the whole box has spent busy so far (the first line of
 * /proc/stat, all but idle and iowait): the kernel's work for loopback TCP
 * (softirq) is charged to neither the gateway nor the client threads. */
static int host_busy_s(double *busy_s)
{
    unsigned long long f[8] = { 0 };
    FILE *in = fopen("/proc/stat", "r");
    long hz = sysconf(_SC_CLK_TCK);
    int n = in ? fscanf(in, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3], &f[4],
                        &f[5], &f[6], &f[7])
               : 0;
    if (in)
        fclose(in);
    if (n < 8 || hz <= 0)
        return -1;
    *busy_s = (double)(f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / (double)hz;
    return 0;
}

/* utime + stime of each of the gateway's threads now, in clock ticks. */
typedef struct cores_task {
    long tid;
    unsigned long long ticks;
} cores_task_t;

static size_t task_ticks(pid_t pid, cores_task_t *t, size_t cap)
{
    char path[300], buf[1024];
    size_t n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && n < cap && (e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = 0;
        const char *p = len ? strrchr(buf, ')') : NULL;   /* the name may hold spaces */
        unsigned long long u, s;
        if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) == 2)
            t[n++] = (cores_task_t){ strtol(e->d_name, NULL, 10), u + s };
    }
    if (d)
        closedir(d);
    return n;
}

/* The most CPU seconds one thread took between the two samples. */
static double busiest_s(const cores_task_t *a, size_t na, const cores_task_t *b, size_t nb)
{
    unsigned long long most = 0;
    long hz = sysconf(_SC_CLK_TCK);
    for (size_t j = 0; j < nb; j++) {
        unsigned long long before = 0;
        for (size_t i = 0; i < na; i++)
            if (a[i].tid == b[j].tid)
                before = a[i].ticks;
        if (b[j].ticks - before > most && b[j].ticks >= before)
            most = b[j].ticks - before;
    }
    return hz > 0 ? (double)most / (double)hz : 0;
}

/* One segment of the arm's clients: its answers/s into *rps; its time, the
 * gateway's, the clients' and the box's CPU and the latencies kept when measured. */
static int segment(const cores_opt_t *o, cores_arm_t *a, bool measured, double *rps)
{
    cores_segment_t seg = { .measured = measured };
    uint64_t len = (uint64_t)(o->seconds / o->rounds * 1e9), answers = 0, cpu_ns = 0;
    bench_proc_usage_t u0, u1;
    pid_t pid = bench_gw_pid(a->gw);
    int rc = 0;

    atomic_init(&seg.failed, false);
    pthread_barrier_init(&seg.start, NULL, a->n_workers + 1);
    for (unsigned t = 0; t < a->n_workers; t++) {
        cores_worker_t *w = &a->worker[t];
        w->seg = &seg;
        w->answers = w->cpu_ns = 0;
        w->error[0] = 0;
        int e = pthread_create(&w->thread, NULL, cores_worker_main, w);
        if (e != 0) {
            /* the barrier counts on every thread: nothing to unwind to (the
             * gateways get SIGTERM as this process ends: bench_gw.c) */
            fprintf(stderr, "rtugw bench cores: pthread_create: %s\n", strerror(e));
            exit(1);
        }
    }
    double h0 = 0, h1 = 0;
    cores_task_t t0[64], t1[64];
    size_t n0 = task_ticks(pid, t0, 64);
    int u = bench_proc_usage(pid, &u0) | host_busy_s(&h0);
    seg.t0 = bench_now_ns();
    seg.deadline = seg.t0 + len;
    pthread_barrier_wait(&seg.start);
    struct timespec until = { (time_t)(seg.deadline / 1000000000ull), (long)(seg.deadline % 1000000000ull) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
    u |= bench_proc_usage(pid, &u1) | host_busy_s(&h1);
    size_t n1 = task_ticks(pid, t1, 64);
    for (unsigned t = 0; t < a->n_workers; t++) {
        cores_worker_t *w = &a->worker[t];
        pthread_join(w->thread, NULL);
        if (w->error[0] && rc == 0) {
            fprintf(stderr, "rtugw bench cores: arm %s: %s\n", a->spec->label, w->error);
            rc = -1;
        }
        answers += w->answers;
        cpu_ns += w->cpu_ns;
        for (size_t k = 0; k < w->lat.n; k++)
            bench_samples_push(&a->lat, w->lat.v[k]);
        w->lat.n = 0;
    }
    pthread_barrier_destroy(&seg.start);
    if (rc == 0 && atomic_load(&seg.failed)) {
        fprintf(stderr, "rtugw bench cores: arm %s: a client thread failed\n", a->spec->label);
        rc = -1;
    }
    if (rc == 0 && u != 0) {
        fprintf(stderr, "rtugw bench cores: arm %s: cannot read /proc/%d/stat or /proc/stat\n", a->spec->label,
                (int)pid);
        rc = -1;
    }
    *rps = (double)answers * 1e9 / (double)len;
    if (measured) {
        a->answers += answers;
        a->window_s += (double)len / 1e9;
        a->gw_cpu_s += u1.cpu_s - u0.cpu_s;
        a->client_cpu_s += (double)cpu_ns / 1e9;
        a->host_cpu_s += h1 - h0;
        a->gw_thread_cpu_s += busiest_s(t0, n0, t1, n1);
    }
    return rc;
}

/* ---- the arms ----------------------------------------------------------------------- */

/* The device and the gateway, its cache warm; all arms' are started before
 * any client connects, so the device's descriptors stay below FD_SETSIZE
 * (its select loop). */
static int arm_launch(const cores_opt_t *o, cores_arm_t *a)
{
    char bus[128], tcp[512];
    static const char cached[] = "[device u1]\nbus = line\nslave = 1\n"
                                 "[poll c1]\ndevice = u1\nfunction = 3\naddress = 0\ncount = 8\n"
                                 "interval_ms = 100\nserve_cached_ms = 1000\n";
    const char *sections = o->bus ? "[device u1]\nbus = line\nslave = 1\n" : cached;

    if (!(a->dev = bt_tcpdev_start()))
        return -1;
    snprintf(bus, sizeof bus, "port = tcp://127.0.0.1:%u\nframing = tcp\nresponse_timeout_ms = 1000\n",
             bt_tcpdev_port(a->dev));
    int n = snprintf(tcp, sizeof tcp, "%s", a->spec->keys);
    if (!bench_keys_set(a->spec->keys, "max_clients"))
        n += snprintf(tcp + n, sizeof tcp - (size_t)n, "max_clients = %u\n", o->clients + 16);
    if (!bench_keys_set(a->spec->keys, "max_per_address"))
        snprintf(tcp + n, sizeof tcp - (size_t)n, "max_per_address = 0\n");
    bench_gw_spec_t spec = { .binary = o->rtugw, .bus = bus, .sections = sections, .tcp = tcp,
                             .cpus = a->spec->pinned ? &a->spec->cpus : NULL, .probe_slave = 1 };
    if (!(a->gw = bench_gw_launch(&spec))) {
        fprintf(stderr, "rtugw bench cores: arm %s: the gateway did not start\n", a->spec->label);
        return -1;
    }
    /* The cache warm (--bus: the device answering): a read answered from it
     * (libmodbus's client selects: it must run before the clients'
     * descriptors pass FD_SETSIZE). */
    uint64_t deadline = bench_now_ns() + 10000000000ull;
    double hits = 0;
    bool ready = false;
    uint16_t v[CORES_REGS];
    modbus_t *probe = bench_gw_client(a->gw, 1);
    while (probe && !ready && bench_now_ns() < deadline) {
        int got = modbus_read_registers(probe, 0, CORES_REGS, v);
        ready = o->bus ? got == CORES_REGS && v[0] == 1000
                       : bench_gw_metric(a->gw, "rtugw_tcp_cache_hits_total", &hits) == 0 && hits >= 1;
        if (!ready)
            usleep(20000);
    }
    if (probe) {
        modbus_close(probe);
        modbus_free(probe);
    }
    if (!ready) {
        fprintf(stderr, "rtugw bench cores: arm %s: no read was answered %s within 10 s\n", a->spec->label,
                o->bus ? "by the device through the bus" : "from the poll cache");
        return -1;
    }
    return 0;
}

static int connect_one(unsigned port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (s < 0)
        return -1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0 || fcntl(s, F_SETFL, O_NONBLOCK) != 0) {
        close(s);
        return -1;
    }
    return s;
}

/* The clients: connected, shared out among the threads, each thread's in an epoll set. */
static int arm_connect(const cores_opt_t *o, cores_arm_t *a)
{
    size_t nc = o->clients;
    a->conn = calloc(nc, sizeof *a->conn);
    a->tid_slab = calloc(nc * o->depth, sizeof *a->tid_slab);
    a->sent_slab = calloc(nc * o->depth, sizeof *a->sent_slab);
    a->out_slab = calloc(nc * o->depth, CORES_REQ_LEN);
    a->n_workers = o->threads < o->clients ? o->threads : o->clients;
    if (!a->conn || !a->tid_slab || !a->sent_slab || !a->out_slab)
        return -1;
    for (unsigned i = 0; i < o->clients; i++)
        a->conn[i].fd = -1;
    for (unsigned t = 0; t < a->n_workers; t++) {
        cores_worker_t *w = &a->worker[t];
        w->pin = o->client_pinned ? &o->client_cpus : NULL;
        w->pin_text = o->client_cpus_text;
        w->depth = o->depth;
        w->conn = a->conn + (size_t)t * nc / a->n_workers;
        w->n = (unsigned)((size_t)(t + 1) * nc / a->n_workers - (size_t)t * nc / a->n_workers);
        if ((w->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
            fprintf(stderr, "rtugw bench cores: epoll_create1: %s\n", strerror(errno));
            return -1;
        }
    }
    for (unsigned t = 0; t < a->n_workers; t++)
        for (unsigned i = 0; i < a->worker[t].n; i++) {
            cores_conn_t *c = &a->worker[t].conn[i];
            c->index = (unsigned)(c - a->conn);
            c->tid = a->tid_slab + (size_t)c->index * o->depth;
            c->sent = a->sent_slab + (size_t)c->index * o->depth;
            c->out = a->out_slab + (size_t)c->index * o->depth * CORES_REQ_LEN;
            c->next_tid = (uint16_t)(c->index * 7919u);
            struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
            if ((c->fd = connect_one(bench_gw_tcp_port(a->gw))) < 0 ||
                epoll_ctl(a->worker[t].ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
                fprintf(stderr, "rtugw bench cores: arm %s: client %u cannot connect: %s\n", a->spec->label,
                        c->index, strerror(errno));
                return -1;
            }
        }
    /* Every connection accepted (none refused: max_clients). */
    uint64_t deadline = bench_now_ns() + 10000000000ull;
    double active = 0;
    while ((bench_gw_metric(a->gw, "rtugw_tcp_active", &active) != 0 || active < o->clients) &&
           bench_now_ns() < deadline)
        usleep(20000);
    if (active < o->clients) {
        fprintf(stderr, "rtugw bench cores: arm %s: the gateway holds %.0f of the %u connections after 10 s\n",
                a->spec->label, active, o->clients);
        return -1;
    }
    return 0;
}

static int arm_close(const cores_opt_t *o, cores_arm_t *a)
{
    int rc = 0;
    for (unsigned i = 0; a->conn && i < o->clients; i++)
        if (a->conn[i].fd >= 0)
            close(a->conn[i].fd);
    for (unsigned t = 0; t < a->n_workers; t++) {
        if (a->worker[t].ep > 0)
            close(a->worker[t].ep);
        free(a->worker[t].lat.v);
    }
    if (a->gw && bench_gw_stop(a->gw) != 0) {
        fprintf(stderr, "rtugw bench cores: arm %s: the gateway did not stop cleanly\n", a->spec->label);
        rc = -1;
    }
    bt_tcpdev_stop(a->dev);
    free(a->conn);
    free(a->tid_slab);
    free(a->sent_slab);
    free(a->out_slab);
    free(a->lat.v);
    return rc;
}

/* The share of TCP reads answered from the poll cache since the last call. */
static int cache_share(cores_arm_t *a, bool baseline)
{
    double hits, requests;
    if (bench_gw_metric(a->gw, "rtugw_tcp_cache_hits_total", &hits) != 0 ||
        bench_gw_metric(a->gw, "rtugw_tcp_requests_total", &requests) != 0) {
        fprintf(stderr, "rtugw bench cores: arm %s: cannot read /metrics\n", a->spec->label);
        return -1;
    }
    if (baseline) {
        a->hits0 = hits;
        a->requests0 = requests;
    } else {
        a->hit_fraction = requests > a->requests0 ? (hits - a->hits0) / (requests - a->requests0) : 0;
    }
    return 0;
}

/* ---- the report ---------------------------------------------------------------------- */

/* KEYS as one line: "; " between keys, "-" for none. */
static void keys_line(const char *keys, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (const char *p = keys; *p && n + 3 < cap; p++)
        if (*p != '\n')
            out[n++] = *p;
        else if (p[1])
            n += (size_t)snprintf(out + n, cap - n, "; ");
    out[n < cap ? n : cap - 1] = 0;
    if (!out[0])
        snprintf(out, cap, "-");
}

/* A JSON string: the keys may hold quotes or backslashes. */
static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    putchar('"');
}

static void report(const cores_opt_t *o, cores_arm_t *arm)
{
    const char *ccpus = o->client_pinned ? o->client_cpus_text : "any";
    long box = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->json)
        printf("{\"path\": \"%s\", \"clients\": %u, \"client_threads\": %u, \"depth\": %u, \"client_cpus\": \"%s\", \"box_cpus\": %ld, "
               "\"rounds\": %u, \"seconds\": %.3f, \"arms\": [", o->bus ? "bus" : "cache", o->clients, arm[0].n_workers, o->depth, ccpus, box,
               o->rounds, o->seconds);
    else
        printf("Reads of 8 holding registers answered %s: %u Modbus TCP clients, %u in flight each, "
               "on %u client thread%s (CPUs: %s), a box of %ld CPUs; %u rounds of %.2f s per arm (median, p10-p90; "
               "CPU: seconds per second of the measured rounds)\n\n"
               "| arm | gateway CPUs | [tcp] keys | answers/s | / %s | us per read | gateway CPU (busiest thread) | "
               "client CPU | box CPU busy | from cache |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
               o->bus ? "by the device through a Modbus TCP device bus" : "from the poll cache", o->clients, o->depth,
               arm[0].n_workers, arm[0].n_workers == 1 ? "" : "s", ccpus, box, o->rounds,
               o->seconds / o->rounds, arm[0].spec->label);
    for (unsigned k = 0; k < o->n_arms; k++) {
        const cores_arm_t *a = &arm[k];
        bench_spread_t r, q, l;
        char keys[512];
        bench_spread(a->rps, o->rounds, &r);
        bench_spread(a->ratio, o->rounds, &q);
        bench_spread(a->lat.v, a->lat.n, &l);
        keys_line(a->spec->keys, keys, sizeof keys);
        double w = a->window_s > 0 ? a->window_s : 1;
        double gw = a->gw_cpu_s / w, gt = a->gw_thread_cpu_s / w, cl = a->client_cpu_s / w, host = a->host_cpu_s / w;
        if (o->json) {
            printf("%s{\"label\": \"%s\", \"cpus\": \"%s\", \"keys\": ", k ? ", " : "", a->spec->label,
                   a->spec->cpus_text);
            json_string(strcmp(keys, "-") ? keys : "");
            printf(", \"rps\": %.1f, \"rps_p10\": %.1f, \"rps_p90\": %.1f, \"ratio\": %.4f, \"ratio_p10\": %.4f, "
                   "\"ratio_p90\": %.4f, \"us\": %.1f, \"us_p10\": %.1f, \"us_p90\": %.1f, \"gateway_cpu\": %.3f, "
                   "\"gateway_thread_cpu\": %.3f, \"client_cpu\": %.3f, \"box_cpu\": %.3f, \"cache_fraction\": %.4f, "
                   "\"answers\": %llu}", r.median, r.p10, r.p90, q.median, q.p10, q.p90, l.median, l.p10, l.p90, gw,
                   gt, cl, host, a->hit_fraction, (unsigned long long)a->answers);
        } else {
            printf("| %s | %s | %s | %.0f (%.0f-%.0f) | %.3f (%.3f-%.3f) | %.1f (%.1f-%.1f) | %.2f (%.2f) | %.2f | "
                   "%.2f | %.4f |\n", a->spec->label, a->spec->pinned ? a->spec->cpus_text : "any", keys, r.median,
                   r.p10, r.p90, q.median, q.p10, q.p90, l.median, l.p10, l.p90, gw, gt, cl, host, a->hit_fraction);
        }
    }
    if (o->json)
        printf("]}\n");
}

/* ---- options -------------------------------------------------------------------------- */

/* A taskset-style list ("0", "0-1", "0,2-3") into set. 0 or -1. */
static int parse_cpus(const char *text, cpu_set_t *set)
{
    const char *p = text;
    CPU_ZERO(set);
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*p))
            return -1;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)*++p))
                return -1;
            hi = strtoul(p, &end, 10);
            p = end;
        }
        if (hi < lo || hi >= CPU_SETSIZE)
            return -1;
        for (unsigned long c = lo; c <= hi; c++)
            CPU_SET(c, set);
        if (!*p)
            return 0;
        if (*p++ != ',')
            return -1;
    }
}

static int bad_arm(const char *value, const char *why)
{
    fprintf(stderr, "rtugw bench cores: --arm '%s': %s; expected LABEL:CPUS:KEYS, e.g. one_core:0: or "
                    "two_cores:0-1:max_pending = 4;idle_timeout_s = 0\n", value, why);
    return -1;
}

/* LABEL:CPUS:KEYS; KEYS are [tcp] lines separated by ';' (and may hold ':'). */
static int add_arm(void *dst, const char *value)
{
    cores_opt_t *o = dst;
    const char *c1 = strchr(value, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (o->n_arms == CORES_MAX_ARMS)
        return bad_arm(value, "at most 4 arms");
    if (!c2)
        return bad_arm(value, "two ':' needed");
    cores_arm_spec_t *a = &o->arm[o->n_arms];
    size_t ll = (size_t)(c1 - value), cl = (size_t)(c2 - c1 - 1);
    if (ll == 0 || ll >= sizeof a->label || strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                          "0123456789_.-") < ll)
        return bad_arm(value, "the label must be 1-31 letters, digits, '_', '-' or '.'");
    memcpy(a->label, value, ll);
    a->label[ll] = 0;
    for (unsigned k = 0; k < o->n_arms; k++)
        if (strcmp(o->arm[k].label, a->label) == 0)
            return bad_arm(value, "a label given twice");
    if (cl >= sizeof a->cpus_text)
        return bad_arm(value, "CPUS too long");
    memcpy(a->cpus_text, c1 + 1, cl);
    a->cpus_text[cl] = 0;
    a->pinned = cl > 0;
    if (a->pinned && parse_cpus(a->cpus_text, &a->cpus) != 0)
        return bad_arm(value, "CPUS must be empty (any) or a list such as 0, 0-1 or 0,1");
    size_t n = 0;
    for (const char *p = c2 + 1; *p;) {
        size_t len = strcspn(p, ";");
        const char *b = p, *e = p + len;
        p = *e ? e + 1 : e;
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        if (b == e)
            continue;
        const char *eq = memchr(b, '=', (size_t)(e - b));
        if (!eq || eq == b)
            return bad_arm(value, "each key must be 'key = value'");
        if (n + (size_t)(e - b) + 2 > sizeof a->keys)
            return bad_arm(value, "KEYS too long");
        memcpy(a->keys + n, b, (size_t)(e - b));
        n += (size_t)(e - b);
        a->keys[n++] = '\n';
    }
    a->keys[n] = 0;
    o->n_arms++;
    return 0;
}

static int set_client_cpus(void *dst, const char *value)
{
    cores_opt_t *o = dst;
    if (strlen(value) >= sizeof o->client_cpus_text || parse_cpus(value, &o->client_cpus) != 0)
        return -1;
    snprintf(o->client_cpus_text, sizeof o->client_cpus_text, "%s", value);
    o->client_pinned = true;
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench cores [--arm LABEL:CPUS:KEYS]... [--rtugw PATH] [--clients N]\n"
            "                         [--client-threads N] [--client-cpus CPUS] [--depth N] [--seconds S]\n"
            "                         [--rounds N] [--warmup N] [--bus] [--smoke] [--json]\n"
            "\n"
            "Answers/s of many Modbus TCP clients whose reads rtugw answers from its poll cache (the front\n"
            "end, not a bus, is the bound), with the gateway held to given CPUs; arms side by side in\n"
            "alternating rounds, every answer checked. The load is C: epoll threads, non-blocking sockets.\n"
            "  --arm LABEL:CPUS:KEYS  an arm, up to 4 (default: one_core:0: and two_cores::); the first is the\n"
            "                 one the others' ratios are to. CPUS: where the gateway may run, as taskset -c\n"
            "                 takes them (0, 0-1, 0,1), empty for anywhere; KEYS: extra [tcp] keys separated\n"
            "                 by ';' (max_pending = 4;bus_share = 8), may be empty\n"
            "  --rtugw PATH   the rtugw every arm runs (default: the rtugw that runs the bench)\n"
            "  --clients N    TCP connections per arm (default 1000, at most 4096)\n"
            "  --client-threads N  threads sharing the connections, each an epoll loop (default 1, at most 64)\n"
            "  --client-cpus CPUS  pin the client threads to these CPUs (default: not pinned)\n"
            "  --depth N      reads in flight per connection (default 1: each sent when the last is answered;\n"
            "                 at most 64)\n"
            "  --seconds S    measured time per arm, split into the rounds (default 6)\n"
            "  --rounds N     measured rounds (default 6)\n"
            "  --warmup N     warm-up rounds, dropped (default 1)\n"
            "  --bus          no poll cache: every read goes through the Modbus TCP device bus to the device\n"
            "                 (the bus and the device's one thread are then in the path)\n"
            "  --smoke        a short run for the tests: 20 clients, 2 rounds of 0.3 s, 1 warm-up round\n"
            "  --json         JSON instead of Markdown\n"
            "Reported per arm: answers/s and the ratio to the first arm (median, p10-p90 over rounds), us per\n"
            "read (median, p10-p90 over reads), CPU seconds per second of the gateway (its busiest thread's\n"
            "in parentheses), of the client threads and of the whole box (busy, all CPUs), and the share of\n"
            "reads answered from the cache (under 0.99 fails the run; with --bus, over 0.01). Exit 1 on any wrong or missing\n"
            "answer, a connection closed by the gateway or one with no answer for 5 s.\n");
}

/* The CPUs asked for exist for this process, and there are descriptors for every client. */
static int check_host(const cores_opt_t *o)
{
    cpu_set_t have, both;
    if (sched_getaffinity(0, sizeof have, &have) != 0)
        return 0;
    for (unsigned k = 0; k <= o->n_arms; k++) {
        bool pinned = k < o->n_arms ? o->arm[k].pinned : o->client_pinned;
        const cpu_set_t *want = k < o->n_arms ? &o->arm[k].cpus : &o->client_cpus;
        CPU_AND(&both, want, &have);
        if (pinned && !CPU_EQUAL(&both, want)) {
            fprintf(stderr, "rtugw bench cores: %s%s: CPUs %s are not all available here (this process may run on "
                            "%d CPUs)\n", k < o->n_arms ? "arm " : "--client-cpus", k < o->n_arms ? o->arm[k].label : "",
                    k < o->n_arms ? o->arm[k].cpus_text : o->client_cpus_text, CPU_COUNT(&have));
            return -1;
        }
    }
    struct rlimit rl;
    rlim_t need = (rlim_t)o->n_arms * o->clients + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need) {
            fprintf(stderr, "rtugw bench cores: %u arms of %u clients need %llu descriptors; the hard limit is %llu\n",
                    o->n_arms, o->clients, (unsigned long long)need, (unsigned long long)rl.rlim_max);
            return -1;
        }
    }
    return 0;
}

int bench_cores_main(int argc, char **argv)
{
    cores_opt_t o = { .seconds = 6, .rounds = 6, .warmup = 1, .clients = 1000, .threads = 1, .depth = 1 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &o.json),
        BENCH_FLAG("smoke", &o.smoke),
        BENCH_FLAG("bus", &o.bus),
        BENCH_DOUBLE("seconds", &o.seconds, 0.01, 3600),
        BENCH_UINT("rounds", &o.rounds, 1, 10000),
        BENCH_UINT("warmup", &o.warmup, 0, 10000),
        BENCH_UINT("clients", &o.clients, 1, CORES_MAX_CLIENTS),
        BENCH_UINT("client-threads", &o.threads, 1, CORES_MAX_THREADS),
        BENCH_UINT("depth", &o.depth, 1, CORES_MAX_DEPTH),
        BENCH_CALL("client-cpus", set_client_cpus, &o, required_argument, "a CPU list such as 0, 0-1 or 0,1"),
        BENCH_CALL("arm", add_arm, &o, required_argument, NULL),
        BENCH_TEXT("rtugw", &o.rtugw),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "cores", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (o.smoke) {
        o.clients = 20;
        o.rounds = 2;
        o.seconds = 0.6;
        o.warmup = 1;
    }
    if (o.n_arms == 0 && (add_arm(&o, "one_core:0:") != 0 || add_arm(&o, "two_cores::") != 0))
        return 2;
    if (check_host(&o) != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    cores_arm_t *arm = calloc(o.n_arms, sizeof *arm);
    double *v = calloc(2 * (size_t)o.rounds * o.n_arms, sizeof *v);
    rc = arm && v ? 0 : 1;
    for (unsigned k = 0; k < o.n_arms && rc == 0; k++) {
        arm[k].spec = &o.arm[k];
        arm[k].rps = v + 2 * (size_t)k * o.rounds;
        arm[k].ratio = arm[k].rps + o.rounds;
        if (arm_launch(&o, &arm[k]) != 0)
            rc = 1;
    }
    for (unsigned k = 0; k < o.n_arms && rc == 0; k++)
        if (arm_connect(&o, &arm[k]) != 0)
            rc = 1;
    for (unsigned r = 0; rc == 0 && r < o.warmup + o.rounds; r++) {
        bool measured = r >= o.warmup;
        for (unsigned k = 0; k < o.n_arms && rc == 0 && r == o.warmup; k++)
            if (cache_share(&arm[k], true) != 0)
                rc = 1;
        for (unsigned k = 0; k < o.n_arms && rc == 0; k++) {
            double x = 0;
            if (segment(&o, &arm[k], measured, &x) != 0)
                rc = 1;
            if (measured)
                arm[k].rps[r - o.warmup] = x;
        }
        for (unsigned k = 0; rc == 0 && measured && k < o.n_arms; k++)
            arm[k].ratio[r - o.warmup] = arm[0].rps[r - o.warmup] > 0 ? arm[k].rps[r - o.warmup] / arm[0].rps[r - o.warmup] : 0;
    }
    for (unsigned k = 0; k < o.n_arms && rc == 0; k++) {
        if (cache_share(&arm[k], false) != 0) {
            rc = 1;
        } else if (arm[k].answers == 0) {
            fprintf(stderr, "rtugw bench cores: arm %s answered nothing in the measured rounds\n", o.arm[k].label);
            rc = 1;
        } else if (o.bus && arm[k].hit_fraction > 0.01) {
            fprintf(stderr, "rtugw bench cores: arm %s: %.2f %% of the reads came from a cache with --bus (want <= 1 %%)\n",
                    o.arm[k].label, 100 * arm[k].hit_fraction);
            rc = 1;
        } else if (!o.bus && arm[k].hit_fraction < 0.99) {
            fprintf(stderr, "rtugw bench cores: arm %s: %.2f %% of the reads came from the poll cache (want >= 99 %%): "
                            "the bus, not the front end, was measured\n", o.arm[k].label, 100 * arm[k].hit_fraction);
            rc = 1;
        }
    }
    if (rc == 0)
        report(&o, arm);
    for (unsigned k = 0; arm && k < o.n_arms; k++)
        if (arm_close(&o, &arm[k]) != 0)
            rc = 1;
    free(arm);
    free(v);
    return rc;
}
