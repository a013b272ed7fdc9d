/*
 * gateway/http.c -- /metrics (Prometheus text) and /status (JSON), served by
 * libevent's evhttp on the I/O thread. Everything read here is a relaxed
 * atomic with a single writer, or the cache under its mutex, so a scrape
 * never stalls a bus.
 */
#include "gateway/internal.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_http {
    gw_t *gw;
    struct evhttp *http;
};

typedef struct metric_def {
    const char *name;
    const char *help;
    size_t offset;    /* into gw_bus_metrics_t */
    bool gauge;
} metric_def_t;

#define BM(f, h) { #f, h, offsetof(gw_bus_metrics_t, f), false }
#define BG(f, h) { #f, h, offsetof(gw_bus_metrics_t, f), true }
static const metric_def_t bus_defs[] = {
    BM(requests, "Requests accepted for the bus"),
    BM(responses, "Matching responses received"),
    BM(exceptions, "Exception responses from slaves"),
    BM(timeouts, "Attempts that timed out"),
    BM(retries, "Requests sent again"),
    BM(crc_errors, "Frames rejected by the decoder (CRC, length)"),
    BM(foreign_frames, "Frames dropped: late, unsolicited or not matching the request"),
    BM(noise_bytes, "Bytes skipped while resynchronising"),
    BM(queue_full, "Requests refused with 0x06: queue full"),
    BM(dead_fast, "Requests answered 0x0B at once: slave backed off"),
    BM(unavailable, "Requests answered 0x0A: port down"),
    BM(broadcasts, "Broadcast writes sent"),
    BM(late_bytes_guarded, "Frames dropped: heard in their slave's guard (late)"),
    BM(late_answers, "Late answers taken for their slave's parked question"),
    BM(ambiguous, "Answers not delivered: a different second candidate followed (asked again or 0x0B)"),
    BM(gone_dropped, "Requests not sent: their client had gone"),
    BM(broadcast_refused, "Broadcasts refused: not a write"),
    BM(verify_mismatches, "Shadow verification mismatches against the reference decoder"),
    BM(reopen_attempts, "Port reopen attempts"),
    BG(queue_depth, "Requests waiting"),
    BG(port_up, "1 while the port is open"),
};

#define TM(f, h) { #f, h, offsetof(gw_tcp_metrics_t, f), false }
static const metric_def_t tcp_defs[] = {
    TM(accepted, "Connections accepted"),
    TM(refused_full, "Connections refused: max_clients reached"),
    TM(refused_allow, "Connections refused: not in the allow list"),
    TM(closed, "Connections closed"),
    { "active", "Connections open", offsetof(gw_tcp_metrics_t, active), true },
    TM(requests, "Requests received"),
    TM(answers, "Answers sent"),
    TM(bad_mbap, "Connections closed for a bad MBAP header"),
    TM(discarded, "Answers discarded: client gone"),
    TM(read_only_refused, "Writes refused in read-only mode"),
    TM(slow_reader_closed, "Connections closed: answers not read"),
    TM(idle_closed, "Connections closed: idle"),
    TM(unrouted, "Requests answered 0x0A: no route for the unit"),
    TM(cache_hits, "Reads answered from the poll cache (serve_cached_ms)"),
    TM(half_closed, "Connections closed after a half-close, every answer written"),
};

static uint64_t field(const void *base, size_t offset)
{
    return gw_read((const atomic_uint_fast64_t *)((const char *)base + offset));
}

static void metric_header(struct evbuffer *b, const char *prefix, const metric_def_t *d)
{
    evbuffer_add_printf(b, "# HELP rtugw_%s_%s%s %s\n# TYPE rtugw_%s_%s%s %s\n", prefix, d->name,
                        d->gauge ? "" : "_total", d->help, prefix, d->name, d->gauge ? "" : "_total",
                        d->gauge ? "gauge" : "counter");
}

static void bus_metrics_text(gw_t *gw, struct evbuffer *b)
{
    for (size_t i = 0; i < sizeof bus_defs / sizeof bus_defs[0]; i++) {
        metric_header(b, "bus", &bus_defs[i]);
        for (unsigned k = 0; k < gw->bus_count; k++)
            evbuffer_add_printf(b, "rtugw_bus_%s%s{bus=\"%s\"} %llu\n", bus_defs[i].name,
                                bus_defs[i].gauge ? "" : "_total", bus_config(gw->buses[k])->name,
                                (unsigned long long)field(bus_metrics(gw->buses[k]), bus_defs[i].offset));
    }
    evbuffer_add_printf(b, "# HELP rtugw_bus_latency_seconds Request to matching response, first attempt\n"
                           "# TYPE rtugw_bus_latency_seconds histogram\n");
    for (unsigned k = 0; k < gw->bus_count; k++) {
        gw_bus_metrics_t *m = bus_metrics(gw->buses[k]);
        const char *name = bus_config(gw->buses[k])->name;
        uint64_t cum = 0;
        for (unsigned i = 0; i < GW_LATENCY_BUCKETS; i++) {
            cum += gw_read(&m->latency[i]);
            if (isinf(gw_latency_edges_ms[i]))
                evbuffer_add_printf(b, "rtugw_bus_latency_seconds_bucket{bus=\"%s\",le=\"+Inf\"} %llu\n",
                                    name, (unsigned long long)cum);
            else
                evbuffer_add_printf(b, "rtugw_bus_latency_seconds_bucket{bus=\"%s\",le=\"%g\"} %llu\n",
                                    name, gw_latency_edges_ms[i] / 1000.0, (unsigned long long)cum);
        }
        evbuffer_add_printf(b, "rtugw_bus_latency_seconds_sum{bus=\"%s\"} %.6f\n"
                               "rtugw_bus_latency_seconds_count{bus=\"%s\"} %llu\n",
                            name, (double)gw_read(&m->latency_sum_us) / 1e6, name, (unsigned long long)cum);
    }
}

static void device_metrics_text(gw_t *gw, struct evbuffer *b)
{
    static const struct { const char *name; size_t off; bool gauge; } defs[] = {
        { "requests", offsetof(gw_slave_metrics_t, requests), false },
        { "responses", offsetof(gw_slave_metrics_t, responses), false },
        { "timeouts", offsetof(gw_slave_metrics_t, timeouts), false },
        { "exceptions", offsetof(gw_slave_metrics_t, exceptions), false },
        { "late_answers", offsetof(gw_slave_metrics_t, late_answers), false },
        { "backed_off", offsetof(gw_slave_metrics_t, dead), true },
        { "timeout_ms", offsetof(gw_slave_metrics_t, timeout_ms), true },
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        evbuffer_add_printf(b, "# TYPE rtugw_device_%s%s %s\n", defs[i].name, defs[i].gauge ? "" : "_total",
                            defs[i].gauge ? "gauge" : "counter");
        for (unsigned d = 0; d < gw->cfg->device_count; d++) {
            const config_device_t *dev = &gw->cfg->devices[d];
            gw_slave_metrics_t *sm = bus_slave_metrics(gw->buses[dev->bus], dev->slave);
            evbuffer_add_printf(b, "rtugw_device_%s%s{bus=\"%s\",device=\"%s\",slave=\"%u\"} %llu\n",
                                defs[i].name, defs[i].gauge ? "" : "_total", gw->cfg->buses[dev->bus].name,
                                dev->name, dev->slave, (unsigned long long)field(sm, defs[i].off));
        }
    }
}

static void router_metrics_text(gw_t *gw, struct evbuffer *b)
{
    router_report_t rep;
    if (router_report(gw->router, &rep) != 0)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_router_info The router's learning policy ([router] policy)\n"
                           "# TYPE rtugw_router_info gauge\nrtugw_router_info{policy=\"%s\"} 1\n",
                        router_policy_name(rep.policy));
    evbuffer_add_printf(b, "# HELP rtugw_router_pulls_total Frames decoded per length bucket and arm\n"
                           "# TYPE rtugw_router_pulls_total counter\n");
    for (unsigned i = 0; i < rep.n_buckets; i++)
        for (int a = 0; a < ROUTER_ARM_COUNT; a++)
            evbuffer_add_printf(b, "rtugw_router_pulls_total{bucket=\"%u-%u\",arm=\"%s\"} %llu\n",
                                rep.bucket[i].lo, rep.bucket[i].hi, router_arm_name((router_arm_t)a),
                                (unsigned long long)rep.bucket[i].pulls[a]);
    evbuffer_add_printf(b, "# TYPE rtugw_router_cost_ns gauge\n");
    for (unsigned i = 0; i < rep.n_buckets; i++)
        for (int a = 0; a < ROUTER_ARM_COUNT; a++)
            if (rep.bucket[i].has_cost[a])
                evbuffer_add_printf(b, "rtugw_router_cost_ns{bucket=\"%u-%u\",arm=\"%s\"} %.1f\n",
                                    rep.bucket[i].lo, rep.bucket[i].hi, router_arm_name((router_arm_t)a),
                                    rep.bucket[i].cost_ns[a]);
}

static void actor_metrics_text(gw_t *gw, struct evbuffer *b)
{
    actor_stats_t st;
    actor_system_stats(gw->actors, &st);
    static const char *const names[] = { "enqueue", "dequeue", "wakeups", "parks", "steals",
                                         "batch_limit", "refused" };
    const uint64_t values[] = { st.enqueue, st.dequeue, st.wakeups, st.parks, st.steals,
                                st.batch_limit, st.refused };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        evbuffer_add_printf(b, "# TYPE rtugw_actor_%s_total counter\nrtugw_actor_%s_total %llu\n", names[i],
                            names[i], (unsigned long long)values[i]);
    evbuffer_add_printf(b, "# TYPE rtugw_actor_mailbox_depth_peak gauge\nrtugw_actor_mailbox_depth_peak %llu\n",
                        (unsigned long long)st.depth_peak);
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
    gw_t *gw = arg;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    bus_metrics_text(gw, b);
    device_metrics_text(gw, b);
    for (size_t i = 0; i < sizeof tcp_defs / sizeof tcp_defs[0]; i++) {
        metric_header(b, "tcp", &tcp_defs[i]);
        evbuffer_add_printf(b, "rtugw_tcp_%s%s %llu\n", tcp_defs[i].name, tcp_defs[i].gauge ? "" : "_total",
                            (unsigned long long)field(&gw->tcp_metrics, tcp_defs[i].offset));
    }
    router_metrics_text(gw, b);
    actor_metrics_text(gw, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void on_status(struct evhttp_request *req, void *arg)
{
    gw_t *gw = arg;
    uint64_t now = gw_now_ns();
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"uptime_s\":%.1f,\"buses\":[", (double)(now - gw->started_ns) / 1e9);
    for (unsigned k = 0; k < gw->bus_count; k++) {
        const config_bus_t *bc = bus_config(gw->buses[k]);
        gw_bus_metrics_t *m = bus_metrics(gw->buses[k]);
        evbuffer_add_printf(b, "%s{\"name\":\"%s\",\"port\":\"%s\",\"up\":%s,\"queue_depth\":%llu,"
                               "\"requests\":%llu,\"responses\":%llu,\"timeouts\":%llu,\"devices\":[",
                            k ? "," : "", bc->name, bc->port, gw_read(&m->port_up) ? "true" : "false",
                            (unsigned long long)gw_read(&m->queue_depth), (unsigned long long)gw_read(&m->requests),
                            (unsigned long long)gw_read(&m->responses), (unsigned long long)gw_read(&m->timeouts));
        bool first = true;
        for (unsigned d = 0; d < gw->cfg->device_count; d++) {
            const config_device_t *dev = &gw->cfg->devices[d];
            if (dev->bus != k)
                continue;
            gw_slave_metrics_t *sm = bus_slave_metrics(gw->buses[k], dev->slave);
            uint64_t last = gw_read(&sm->last_ok_ns);
            evbuffer_add_printf(b, "%s{\"name\":\"%s\",\"slave\":%u,\"up\":%s,\"backed_off\":%s,"
                                   "\"last_ok_age_s\":",
                                first ? "" : ",", dev->name, dev->slave,
                                last && !gw_read(&sm->dead) ? "true" : "false",
                                gw_read(&sm->dead) ? "true" : "false");
            if (last)
                evbuffer_add_printf(b, "%.3f}", (double)(now - last) / 1e9);
            else
                evbuffer_add_printf(b, "null}");
            first = false;
        }
        evbuffer_add_printf(b, "]}");
    }
    evbuffer_add_printf(b, "],\"polls\":[");
    pthread_mutex_lock(&gw->cache_lock);
    for (unsigned i = 0; i < gw->cfg->poll_count; i++) {
        const config_poll_t *pg = &gw->cfg->polls[i];
        const gw_cache_entry_t *e = &gw->cache[i];
        evbuffer_add_printf(b, "%s{\"name\":\"%s\",\"device\":\"%s\",\"function\":%u,\"address\":%u,"
                               "\"count\":%u,\"read\":%u,\"polls\":%llu,\"failures\":%llu,\"overruns\":%llu,"
                               "\"ok\":%s,",
                            i ? "," : "", pg->name, gw->cfg->devices[pg->device].name, pg->function,
                            pg->address, pg->count, poller_read_of(gw->poller, i), (unsigned long long)e->polls,
                            (unsigned long long)e->failures, (unsigned long long)e->overruns,
                            e->ok ? "true" : "false");
        if (e->t_ns)
            evbuffer_add_printf(b, "\"age_s\":%.3f,\"values\":[", (double)(now - e->t_ns) / 1e9);
        else
            evbuffer_add_printf(b, "\"age_s\":null,\"values\":[");
        for (unsigned v = 0; v < e->count; v++)
            evbuffer_add_printf(b, v ? ",%u" : "%u", e->values[v]);
        evbuffer_add_printf(b, "]}");
    }
    pthread_mutex_unlock(&gw->cache_lock);
    evbuffer_add_printf(b, "],\"tcp\":{\"active\":%llu,\"requests\":%llu,\"answers\":%llu}}\n",
                        (unsigned long long)gw_read(&gw->tcp_metrics.active),
                        (unsigned long long)gw_read(&gw->tcp_metrics.requests),
                        (unsigned long long)gw_read(&gw->tcp_metrics.answers));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

gw_http_t *http_new(gw_t *gw, char *err, size_t errcap)
{
    gw_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    h->gw = gw;
    h->http = evhttp_new(loop_base(gw->loop));
    if (!h->http || evhttp_bind_socket(h->http, gw->cfg->http.bind, (uint16_t)gw->cfg->http.port) != 0) {
        snprintf(err, errcap, "http: cannot listen on %s:%u", gw->cfg->http.bind, gw->cfg->http.port);
        http_free(h);
        return NULL;
    }
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_cb(h->http, "/metrics", on_metrics, gw);
    evhttp_set_cb(h->http, "/status", on_status, gw);
    return h;
}

void http_free(gw_http_t *h)
{
    if (!h)
        return;
    if (h->http)
        evhttp_free(h->http);
    free(h);
}
