/*
 * bench/bench_mqtt.c -- `rtugw bench mqtt`: what the MQTT client (north/)
 * costs against the broker's own ceiling, side by side in one run.
 *
 * A mosquitto broker is started on a free port of 127.0.0.1 (its own
 * config: no persistence, no in-flight or queue limits), and one
 * libmosquitto subscriber (QoS 1, its own thread) receives everything.
 * Each round has four phases, each on its own topic prefix:
 *   north, flat out    north_publish() of --messages messages of --values
 *                      values each, from the thread that runs north's
 *                      event_base (as the gateway's I/O thread does after a
 *                      poll answer), 64 per loop turn;
 *   plain, flat out    a plain libmosquitto client on its own thread
 *                      (mosquitto_publish + mosquitto_loop) publishing the
 *                      very payloads north produced, byte for byte;
 *   north, paced       --latency-messages at --rate messages/s;
 *   plain, paced       the same.
 * Flat out gives values/s delivered to the subscriber (first send to last
 * arrival) and the publishing thread's CPU time per 1,000 values; paced
 * gives the latency from the hand-over (north_publish, or the plain
 * client's mosquitto_publish) to the subscriber's callback, p50 and p99.
 * Both sides publish QoS 1 with 64 in flight. The order of the two sides
 * alternates between rounds (round 0 runs north first: it makes the
 * payloads). Figures are medians over rounds with p10-p90, and the ratio
 * north / plain is taken within each round.
 *
 * --format sparkplug: north is a Sparkplug B edge node (group = the phase's
 * name), values are DDATA by alias; Sparkplug publishes QoS 0, so both sides
 * do, and a message is known by its order of arrival (its seq wraps at 256;
 * QoS 0 on one TCP connection keeps order). One value set is handed over
 * before the clock starts: it becomes the DBIRTH, which is not counted.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"
#include "north/north.h"

#include <event2/event.h>
#include <mosquitto.h>

#include <getopt.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 64
#define BATCH 64

typedef struct opts {
    unsigned long values, messages, rounds, rate, latency_messages;
    bool sparkplug;
} opts_t;

typedef struct phase {
    const north_module_t *mod;    /* rtugw-mqtt.so: north as the daemon loads it */
    char prefix[64];              /* topics: PREFIX/gw/d1/data */
    unsigned port;
    bool paced;
    unsigned long count, rate, values;
    uint64_t *t_send;             /* by seq, 1..count */
    uint8_t *seen;
    double *lat_ms;               /* by arrival */
    atomic_ulong received;
    uint64_t t_first_ns;
    _Atomic uint64_t t_last_ns;
    uint64_t cpu_ns;
    char **payloads;              /* by seq: north's (captured), the plain side's input */
    size_t *lengths;
    bool capture;
    bool failed;
    bool sparkplug;               /* --format sparkplug: prefix spBv1.0/GROUP, DDATA only, QoS 0 */
} phase_t;

typedef struct bench {
    const north_module_t *mod;
    pthread_mutex_t lock;
    phase_t *current;             /* what the subscriber fills */
    struct mosquitto *sub;
    atomic_bool sub_ready;
} bench_t;

static uint64_t thread_cpu_ns(void)
{
    return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* ---- the broker -------------------------------------------------------------------- */

static pid_t broker_start(unsigned port, char *conf, size_t cap)
{
    struct passwd *pw = getpwuid(getuid());
    snprintf(conf, cap, "/tmp/rtugw-bench-mqtt-%d.conf", (int)getpid());
    FILE *f = fopen(conf, "w");
    if (!f)
        return -1;
    fprintf(f, "user %s\nlistener %u 127.0.0.1\nallow_anonymous true\npersistence false\n"
               "max_inflight_messages 0\nmax_queued_messages 0\n", pw ? pw->pw_name : "root", port);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        execlp("mosquitto", "mosquitto", "-c", conf, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static bool port_open(unsigned port)
{
    struct mosquitto *m = mosquitto_new(NULL, true, NULL);
    bool ok = m && mosquitto_connect(m, "127.0.0.1", (int)port, 5) == MOSQ_ERR_SUCCESS;
    if (m)
        mosquitto_destroy(m);
    return ok;
}

/* ---- the subscriber ------------------------------------------------------------------ */

static void sub_on_connect(struct mosquitto *m, void *arg, int rc)
{
    bench_t *b = arg;
    if (rc == 0 && mosquitto_subscribe(m, NULL, "bench/#", 1) == MOSQ_ERR_SUCCESS &&
        mosquitto_subscribe(m, NULL, "spBv1.0/#", 1) == MOSQ_ERR_SUCCESS)
        atomic_store(&b->sub_ready, true);
}

/* Under b->lock: message seq of p arrived at now. */
static void record(phase_t *p, const struct mosquitto_message *msg, unsigned long seq, uint64_t now)
{
    if (seq >= 1 && seq <= p->count && !p->seen[seq]) {
        p->seen[seq] = 1;
        unsigned long k = atomic_load(&p->received);
        p->lat_ms[k] = (double)(now - p->t_send[seq]) / 1e6;
        if (p->capture && !p->payloads[seq] && (p->payloads[seq] = malloc((size_t)msg->payloadlen)) != NULL) {
            memcpy(p->payloads[seq], msg->payload, (size_t)msg->payloadlen);
            p->lengths[seq] = (size_t)msg->payloadlen;
        }
        atomic_store(&p->t_last_ns, now);
        atomic_store(&p->received, k + 1);
    }
}

static void sub_on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    bench_t *b = arg;
    uint64_t now = bench_now_ns();
    (void)m;
    pthread_mutex_lock(&b->lock);
    phase_t *p = b->current;
    size_t plen = p ? strlen(p->prefix) : 0;
    const char *text = msg->payload, *at;
    bool mine = p && msg->payloadlen > 0 && strncmp(msg->topic, p->prefix, plen) == 0 && msg->topic[plen] == '/';
    if (mine && p->sparkplug && strstr(msg->topic + plen, "/DDATA/")) {
        unsigned long seq = atomic_load(&p->received) + 1;   /* QoS 0, one connection: in order */
        record(p, msg, seq, now);
    } else if (mine && !p->sparkplug && (at = strstr(text, "\"seq\":")) != NULL) {
        record(p, msg, strtoul(at + 6, NULL, 10), now);
    }
    pthread_mutex_unlock(&b->lock);
}
static int subscriber_start(bench_t *b, unsigned port)
{
    b->sub = mosquitto_new("bench-subscriber", true, b);
    if (!b->sub)
        return -1;
    mosquitto_connect_callback_set(b->sub, sub_on_connect);
    mosquitto_message_callback_set(b->sub, sub_on_message);
    if (mosquitto_connect(b->sub, "127.0.0.1", (int)port, 30) != MOSQ_ERR_SUCCESS ||
        mosquitto_loop_start(b->sub) != MOSQ_ERR_SUCCESS)
        return -1;
    for (int i = 0; i < 500 && !atomic_load(&b->sub_ready); i++)
        usleep(10000);
    usleep(100000);   /* the SUBACK */
    return atomic_load(&b->sub_ready) ? 0 : -1;
}

/* ---- the north side: north_publish on its event_base's thread -------------------------- */

typedef struct north_run {
    phase_t *p;
    north_t *north;
    struct event_base *base;
    struct event *ev_feed, *ev_check;
    north_value_t *vals;
    char (*names)[24];
    unsigned long next;
    uint64_t cpu0, started_ns, deadline_ns;
    bool feeding;
} north_run_t;

static void north_feed_one(north_run_t *r)
{
    unsigned long seq = r->next++;
    for (unsigned long i = 0; i < r->p->values; i++)
        r->vals[i].number = (double)((seq * 7 + i) % 65536);
    r->p->t_send[seq] = bench_now_ns();
    r->p->mod->publish(r->north, "d1", r->p->mod->now_ms(), r->vals, r->p->values);
}

static void north_on_feed(evutil_socket_t fd, short what, void *arg)
{
    north_run_t *r = arg;
    phase_t *p = r->p;
    (void)fd;
    (void)what;
    if (!p->paced) {
        for (unsigned i = 0; i < BATCH && r->next <= p->count; i++)
            north_feed_one(r);
        if (r->next <= p->count)
            event_active(r->ev_feed, EV_TIMEOUT, 0);   /* the loop sees the socket between batches */
        return;
    }
    /* paced: every message whose time has come */
    uint64_t now = bench_now_ns();
    while (r->next <= p->count && now >= r->started_ns + (r->next - 1) * 1000000000ull / p->rate)
        north_feed_one(r);
    if (r->next <= p->count) {
        uint64_t due = r->started_ns + (r->next - 1) * 1000000000ull / p->rate;
        struct timeval tv = { 0, (suseconds_t)((due > now ? due - now : 0) / 1000) };
        evtimer_add(r->ev_feed, &tv);
    }
}

static void north_on_check(evutil_socket_t fd, short what, void *arg)
{
    north_run_t *r = arg;
    north_stats_t st;
    (void)fd;
    (void)what;
    if (!r->feeding) {
        r->p->mod->get_stats(r->north, &st);
        if (st.connected) {
            if (r->p->sparkplug)   /* the DBIRTH, before the clock starts */
                r->p->mod->publish(r->north, "d1", r->p->mod->now_ms(), r->vals, r->p->values);
            r->feeding = true;
            r->cpu0 = thread_cpu_ns();
            r->started_ns = r->p->t_first_ns = bench_now_ns();
            r->deadline_ns = r->started_ns + 60000000000ull;
            event_active(r->ev_feed, EV_TIMEOUT, 0);
        }
        return;
    }
    if (atomic_load(&r->p->received) >= r->p->count || bench_now_ns() > r->deadline_ns) {
        r->p->cpu_ns = thread_cpu_ns() - r->cpu0;
        r->p->failed = atomic_load(&r->p->received) < r->p->count;
        event_base_loopbreak(r->base);
    }
}

static void *north_thread(void *arg)
{
    phase_t *p = arg;
    north_run_t r = { .p = p, .next = 1 };
    char err[256] = "";
    north_config_t cfg = { .host = "127.0.0.1", .port = p->port, .client_id = "bench-north", .keepalive_s = 30,
                           .qos = 1, .status_qos = 0, .gateway = "gw", .publish = NORTH_PUBLISH_POLL,
                           .clean_session = true, .format = NORTH_FORMAT_JSON, .verify = true,
                           .buffer_messages = (unsigned)p->count + 16, .buffer_bytes = 1u << 30,
                           .max_write_bytes = 16384,
                           .max_write_items = NORTH_WRITE_MAX_ITEMS };
    snprintf(cfg.topic_prefix, sizeof cfg.topic_prefix, "%s", p->prefix);
    if (p->sparkplug) {
        cfg.format = NORTH_FORMAT_SPARKPLUG;
        snprintf(cfg.group_id, sizeof cfg.group_id, "%s", strchr(p->prefix, '/') + 1);
        snprintf(cfg.edge_node_id, sizeof cfg.edge_node_id, "gw");
    }
    north_hooks_t hooks = { 0 };
    r.vals = calloc(p->values, sizeof *r.vals);
    r.names = calloc(p->values, sizeof *r.names);
    r.base = event_base_new();
    p->failed = true;
    if (!r.vals || !r.names || !r.base || !(r.north = p->mod->create(r.base, &cfg, &hooks, err, sizeof err))) {
        fprintf(stderr, "rtugw bench mqtt: north: %s\n", err[0] ? err : "out of memory");
        goto out;
    }
    for (unsigned long i = 0; i < p->values; i++) {
        snprintf(r.names[i], sizeof r.names[i], "hr.%lu", i);
        r.vals[i] = (north_value_t){ .tag = r.names[i] };
    }
    r.ev_feed = evtimer_new(r.base, north_on_feed, &r);
    r.ev_check = event_new(r.base, -1, EV_PERSIST, north_on_check, &r);
    struct timeval ms = { 0, 1000 };
    event_add(r.ev_check, &ms);
    p->failed = false;
    event_base_dispatch(r.base);
    event_free(r.ev_feed);
    event_free(r.ev_check);
out:
    if (r.north)
        p->mod->destroy(r.north);
    if (r.base)
        event_base_free(r.base);
    free(r.vals);
    free(r.names);
    return NULL;
}

/* ---- the plain side: a libmosquitto client as its manual shows ---------------------------- */

static void plain_on_connect(struct mosquitto *m, void *arg, int rc)
{
    (void)m;
    if (rc == 0)
        *(bool *)arg = true;
}

static void plain_publish(struct mosquitto *m, phase_t *p, const char *topic, unsigned long seq)
{
    p->t_send[seq] = bench_now_ns();
    mosquitto_publish(m, NULL, topic, (int)p->lengths[seq], p->payloads[seq], p->sparkplug ? 0 : 1, false);
}

static void *plain_thread(void *arg)
{
    phase_t *p = arg;
    bool up = false;
    char topic[96];
    struct mosquitto *m = mosquitto_new("bench-plain", true, &up);
    snprintf(topic, sizeof topic, p->sparkplug ? "%s/DDATA/gw/d1" : "%s/gw/d1/data", p->prefix);
    p->failed = true;
    if (!m)
        return NULL;
    mosquitto_connect_callback_set(m, plain_on_connect);
    mosquitto_int_option(m, MOSQ_OPT_SEND_MAXIMUM, WINDOW);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    if (mosquitto_connect(m, "127.0.0.1", (int)p->port, 30) != MOSQ_ERR_SUCCESS) {
        mosquitto_destroy(m);
        return NULL;
    }
    for (int i = 0; i < 500 && !up; i++)
        mosquitto_loop(m, 10, 1);
    uint64_t cpu0 = thread_cpu_ns(), start = bench_now_ns(), deadline = start + 60000000000ull;
    p->t_first_ns = start;
    unsigned long next = 1;
    while (up && atomic_load(&p->received) < p->count && bench_now_ns() < deadline) {
        if (!p->paced) {
            for (unsigned i = 0; i < BATCH && next <= p->count; i++)
                plain_publish(m, p, topic, next++);
            mosquitto_loop(m, next <= p->count ? 0 : 5, 1);
            continue;
        }
        uint64_t now = bench_now_ns();
        while (next <= p->count && now >= start + (next - 1) * 1000000000ull / p->rate)
            plain_publish(m, p, topic, next++);
        uint64_t due = start + (next - 1) * 1000000000ull / p->rate;
        int wait_ms = next > p->count ? 5 : due > now ? (int)((due - now) / 1000000u) : 0;
        mosquitto_loop(m, wait_ms, 1);
    }
    p->cpu_ns = thread_cpu_ns() - cpu0;
    p->failed = atomic_load(&p->received) < p->count;
    mosquitto_disconnect(m);
    mosquitto_destroy(m);
    return NULL;
}

/* ---- rounds --------------------------------------------------------------------------------- */

static int run_phase(bench_t *b, phase_t *p, void *(*fn)(void *))
{
    pthread_t t;
    atomic_store(&p->received, 0);
    memset(p->seen, 0, p->count + 1);
    pthread_mutex_lock(&b->lock);
    b->current = p;
    pthread_mutex_unlock(&b->lock);
    if (pthread_create(&t, NULL, fn, p) != 0)
        return -1;
    pthread_join(t, NULL);
    pthread_mutex_lock(&b->lock);
    b->current = NULL;
    pthread_mutex_unlock(&b->lock);
    if (p->failed) {
        fprintf(stderr, "rtugw bench mqtt: %s: %lu of %lu messages arrived\n", p->prefix,
                atomic_load(&p->received), p->count);
        return -1;
    }
    return 0;
}

static double values_per_s(const phase_t *p)
{
    return (double)(p->count * p->values) / ((double)(atomic_load(&p->t_last_ns) - p->t_first_ns) / 1e9);
}

static double cpu_us_per_1000(const phase_t *p)
{
    return (double)p->cpu_ns / 1e3 / ((double)(p->count * p->values) / 1000.0);
}

enum { M_RATE, M_CPU, M_P50, M_P99, M_COUNT };
static const char *const measure_formats[M_COUNT] = { "%.0f", "%.1f", "%.3f", "%.3f" };
static const char *const measure_names[M_COUNT] = {
    "values/s delivered (flat out)", "CPU us per 1,000 values (publishing thread)",
    "latency p50 ms, hand-over to subscriber (paced)", "latency p99 ms (paced)",
};

static void print_row(const char *name, const char *fmt, double *n, double *p, double *ratio, size_t rounds)
{
    char a_txt[96], c_txt[96];
    bench_spread_t a, c, r;
    bench_spread(n, rounds, &a);
    bench_spread(p, rounds, &c);
    bench_spread(ratio, rounds, &r);
    char f3[64];
    snprintf(f3, sizeof f3, "%s [%s-%s]", fmt, fmt, fmt);
    snprintf(a_txt, sizeof a_txt, f3, a.median, a.p10, a.p90);
    snprintf(c_txt, sizeof c_txt, f3, c.median, c.p10, c.p90);
    printf("| %s | %s | %s | %.3f [%.3f-%.3f] |\n", name, a_txt, c_txt, r.median, r.p10, r.p90);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: rtugw bench mqtt [--values N] [--messages N] [--rounds N] [--rate N] [--latency-messages N]\n"
                "                        [--format json|sparkplug]\n"
                "  --values N            values per message (default 20)\n"
                "  --messages N          messages per flat-out phase (default 5000)\n"
                "  --rounds N            rounds, each side both ways (default 5)\n"
                "  --rate N              messages/s of the paced phases (default 500)\n"
                "  --latency-messages N  messages per paced phase (default 1000)\n"
                "  --format F            json (default; QoS 1) or sparkplug (Sparkplug B DDATA; QoS 0)\n"
                "Needs mosquitto (Debian package mosquitto) on PATH.\n");
}

static int set_format(void *dst, const char *format)
{
    if (strcmp(format, "json") != 0 && strcmp(format, "sparkplug") != 0)
        return -1;
    *(bool *)dst = strcmp(format, "sparkplug") == 0;
    return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){ .values = 20, .messages = 5000, .rounds = 5, .rate = 500, .latency_messages = 1000 };
    const bench_opt_t opts[] = {
        BENCH_UINT("values", &o->values, 1, 2000),
        BENCH_UINT("messages", &o->messages, 1, 1000000),
        BENCH_UINT("rounds", &o->rounds, 1, 100),
        BENCH_UINT("rate", &o->rate, 1, 1000000),
        BENCH_UINT("latency-messages", &o->latency_messages, 1, 1000000),
        BENCH_CALL("format", set_format, &o->sparkplug, required_argument, "json or sparkplug"),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "mqtt", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (o->latency_messages > o->messages) {
        fprintf(stderr, "rtugw bench mqtt: --latency-messages may not exceed --messages (the payloads are north's)\n");
        return 2;
    }
    return -1;
}

static phase_t *phase_new(const north_module_t *mod, unsigned port, const opts_t *o, bool paced, char **payloads,
                          size_t *lengths)
{
    phase_t *p = calloc(1, sizeof *p);
    unsigned long count = paced ? o->latency_messages : o->messages;
    if (!p)
        return NULL;
    *p = (phase_t){ .mod = mod, .port = port, .paced = paced, .count = count, .rate = o->rate, .values = o->values,
                    .payloads = payloads, .lengths = lengths };
    p->t_send = calloc(count + 1, sizeof *p->t_send);
    p->seen = calloc(count + 1, 1);
    p->lat_ms = calloc(count + 1, sizeof *p->lat_ms);
    if (!p->t_send || !p->seen || !p->lat_ms) {
        free(p->t_send);
        free(p->seen);
        free(p->lat_ms);
        free(p);
        return NULL;
    }
    return p;
}

static void phase_free(phase_t *p)
{
    if (!p)
        return;
    free(p->t_send);
    free(p->seen);
    free(p->lat_ms);
    free(p);
}

/* One round: both sides flat out and paced. Fills m[side][measure]. */
static int run_round(bench_t *b, unsigned port, const opts_t *o, unsigned round, char **payloads, size_t *lengths,
                     double m[2][M_COUNT])
{
    int rc = 0;
    for (int paced = 0; paced < 2 && rc == 0; paced++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            int side = (round % 2 == 0) ? k : 1 - k;   /* 0 north, 1 plain */
            phase_t *p = phase_new(b->mod, port, o, paced, payloads, lengths);
            if (!p)
                return -1;
            snprintf(p->prefix, sizeof p->prefix, "%s/r%u%s%s", o->sparkplug ? "spBv1.0" : "bench", round,
                     side ? "plain" : "north", paced ? "paced" : "flat");
            p->sparkplug = o->sparkplug;
            p->capture = side == 0 && round == 0 && !paced;
            rc = run_phase(b, p, side ? plain_thread : north_thread);
            if (rc == 0 && !paced) {
                m[side][M_RATE] = values_per_s(p);
                m[side][M_CPU] = cpu_us_per_1000(p);
            } else if (rc == 0) {
                bench_sort(p->lat_ms, p->count);
                m[side][M_P50] = bench_quantile(p->lat_ms, p->count, 0.50);
                m[side][M_P99] = bench_quantile(p->lat_ms, p->count, 0.99);
            }
            phase_free(p);
        }
    }
    return rc;
}

int bench_mqtt_main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char conf[128], err[256];
    const north_module_t *mod = north_module_load(RTUGW_MODULEDIR, err, sizeof err);
    if (!mod) {
        fprintf(stderr, "rtugw bench mqtt: %s\n", err);
        return 1;
    }
    unsigned port = bench_free_port();
    mosquitto_lib_init();
    pid_t broker = broker_start(port, conf, sizeof conf);
    for (int i = 0; i < 100 && broker > 0 && !port_open(port); i++)
        usleep(50000);
    if (broker <= 0 || !port_open(port)) {
        fprintf(stderr, "rtugw bench mqtt: cannot start mosquitto on 127.0.0.1:%u (Debian package mosquitto)\n", port);
        if (broker > 0) {
            kill(broker, SIGTERM);
            waitpid(broker, NULL, 0);
        }
        unlink(conf);
        return 1;
    }
    bench_t b = { .lock = PTHREAD_MUTEX_INITIALIZER, .mod = mod };
    char **payloads = calloc(o.messages + 1, sizeof *payloads);
    size_t *lengths = calloc(o.messages + 1, sizeof *lengths);
    double (*m)[2][M_COUNT] = calloc(o.rounds, sizeof *m);
    double *col[3][M_COUNT];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < M_COUNT; k++)
            col[s][k] = calloc(o.rounds, sizeof(double));
    rc = payloads && lengths && m && subscriber_start(&b, port) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "rtugw bench mqtt: the subscriber cannot connect\n");
    int lib_major, lib_minor, lib_rev;
    mosquitto_lib_version(&lib_major, &lib_minor, &lib_rev);
    if (rc == 0)
        printf("# rtugw bench mqtt\n\nmosquitto broker on 127.0.0.1:%u, libmosquitto %d.%d.%d; %lu values per message; "
               "%lu rounds: %lu messages flat out, %lu at %lu/s paced; %s, a QoS 1 subscriber.\n\n",
               port, lib_major, lib_minor, lib_rev, o.values, o.rounds, o.messages, o.latency_messages, o.rate,
               o.sparkplug ? "format sparkplug (DDATA by alias), QoS 0 as Sparkplug wants" : "format json, QoS 1, 64 in flight");
    for (unsigned r = 0; r < o.rounds && rc == 0; r++) {
        if (run_round(&b, port, &o, r, payloads, lengths, m[r]) != 0) {
            rc = 1;
            break;
        }
        for (int k = 0; k < M_COUNT; k++) {
            col[0][k][r] = m[r][0][k];
            col[1][k][r] = m[r][1][k];
            col[2][k][r] = m[r][1][k] > 0 ? m[r][0][k] / m[r][1][k] : 0;
        }
        fprintf(stderr, "round %u: north %.0f values/s, plain %.0f values/s\n", r, m[r][0][M_RATE], m[r][1][M_RATE]);
    }
    if (rc == 0) {
        printf("| median [p10-p90] over %lu rounds | north (rtugw) | plain libmosquitto (the broker's ceiling) | "
               "north / plain |\n|---|---|---|---|\n", o.rounds);
        for (int k = 0; k < M_COUNT; k++)
            print_row(measure_names[k], measure_formats[k], col[0][k], col[1][k], col[2][k], o.rounds);
    }
    if (b.sub) {
        mosquitto_disconnect(b.sub);
        mosquitto_loop_stop(b.sub, true);
        mosquitto_destroy(b.sub);
    }
    kill(broker, SIGTERM);
    waitpid(broker, NULL, 0);
    unlink(conf);
    for (unsigned long i = 0; payloads && i <= o.messages; i++)
        free(payloads[i]);
    free(payloads);
    free(lengths);
    free(m);
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < M_COUNT; k++)
            free(col[s][k]);
    mosquitto_lib_cleanup();
    return rc;
}
