/*
 * web/status.c -- GET /status: the gateway's state as one JSON object, and
 * its ETag. The handler only calls, in order, the function of each part
 * that writes its member: the buses and their devices (here, with each
 * device's tags from http_tags.c), the poll groups (here, from the cache's
 * snapshot), [tcp] (front/'s tcp_status_json), MB-TCP-Security and HTTPS
 * (http_tls.c), the last reload (metrics.c). Everything read is a relaxed
 * atomic with one writer, the cache under its mutex (cache_snapshot) or the
 * tags under theirs, so a scrape never stalls a bus. I/O thread.
 */
#include "front/front.h"
#include "web/internal.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The q-quantile of a bus's latency histogram in ms, interpolated inside its
 * bucket as Prometheus's histogram_quantile() does; -1 before any answer. */
static double latency_quantile_ms(line_bus_metrics_t *m, double q)
{
    uint64_t n[GW_LATENCY_BUCKETS], total = 0;
    double cum = 0, lo = 0;
    for (unsigned i = 0; i < GW_LATENCY_BUCKETS; i++)
        total += n[i] = gw_read(&m->latency[i]);
    if (!total)
        return -1;
    for (unsigned i = 0; i < GW_LATENCY_BUCKETS; i++) {
        double rank = q * (double)total, hi = gw_latency_edges_ms[i];
        if (n[i] && cum + (double)n[i] >= rank)
            return isinf(hi) ? lo : lo + (hi - lo) * (rank - cum) / (double)n[i];
        cum += (double)n[i];
        lo = gw_latency_edges_ms[i];
    }
    return lo;
}

static void add_ms(struct evbuffer *b, const char *key, double ms)
{
    if (ms < 0)
        evbuffer_add_printf(b, ",\"%s\":null", key);
    else
        evbuffer_add_printf(b, ",\"%s\":%.3f", key, ms);
}

/*
 * /status's ETag: "TAGS-STATE". TAGS is the tag table's change number
 * (http_tags_seq: the tag counts are a function of it). STATE folds (FNV-1a)
 * every other number /status shows, read as the body reads them but not
 * formatted, and the bytes of the parts other files write (listen, TLS,
 * reload: a few hundred bytes, no tag in them). Left out: what only the
 * clock moves, uptime_s and the ages, which a client advances by the time
 * since its last answer. So If-None-Match with the ETag of the last answer
 * is 304 when nothing but the clock moved, and a scrape of an idle gateway
 * formats nothing and reads no tag.
 */
static void fold(uint64_t *h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        *h = (*h ^ (v & 0xff)) * 1099511628211u;
}

/* The numbers of bus k and of its devices, folded for the ETag. */
static void fold_bus(gw_t *gw, unsigned k, uint64_t *h)
{
    const config_t *cfg = gw_config(gw);
    line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
    const atomic_uint_fast64_t *bus[] = { &m->port_up, &m->queue_depth, &m->requests, &m->responses,
                                          &m->timeouts, &m->crc_errors, &m->exceptions, &m->retries };
    for (size_t i = 0; i < sizeof bus / sizeof bus[0]; i++)
        fold(h, gw_read(bus[i]));
    for (unsigned i = 0; i < GW_LATENCY_BUCKETS; i++)
        fold(h, gw_read(&m->latency[i]));
    for (unsigned d = 0; d < cfg->device_count; d++) {
        if (cfg->devices[d].bus != k)
            continue;
        line_slave_metrics_t *sm = bus_slave_metrics(gw_bus(gw, k), cfg->devices[d].slave);
        const atomic_uint_fast64_t *dev[] = { &sm->dead, &sm->timeout_ms, &sm->requests, &sm->responses,
                                              &sm->timeouts, &sm->exceptions };
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            fold(h, gw_read(dev[i]));
        fold(h, gw_read(&sm->last_ok_ns) != 0);
    }
}

/* The poll groups' numbers and values, folded for the ETag. */
static void fold_polls(gw_t *gw, uint64_t *h)
{
    unsigned n_polls = 0;
    gw_cache_view_t *cv = cache_snapshot(gw, &n_polls);
    fold(h, cv == NULL);
    for (unsigned i = 0; cv && i < n_polls; i++) {
        const gw_cache_view_t *e = &cv[i];
        uint64_t v[] = { e->polls, e->failures, e->overruns, e->ok, e->exception, e->count, e->t_ns != 0,
                         poller_read_of(gw_poller(gw), i) };
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            fold(h, v[j]);
        for (unsigned j = 0; j < e->count; j++)
            fold(h, e->values[j]);
    }
    free(cv);
}

/* The parts other files write, as bytes (listen, [tcp], TLS, the reload). */
static void status_parts(gw_t *gw, struct evbuffer *parts)
{
    for (unsigned k = 0; k < gw_bus_count(gw); k++)
        listen_status_json(gw_bus(gw, k), parts);
    tcp_status_json(gw_fronts(gw).tcp, parts);
    http_tls_status(gw, http_tls(gw_http(gw)), parts);
    http_reload_status(gw, parts);
    evbuffer_add(parts, gw_restart_needed(gw), strlen(gw_restart_needed(gw)));
}

static uint64_t status_state(gw_t *gw)
{
    uint64_t h = 14695981039346656037u;
    for (unsigned k = 0; k < gw_bus_count(gw); k++)
        fold_bus(gw, k, &h);
    fold_polls(gw, &h);
    fold(&h, frames_capacity(gw_frames(gw)));
    fold(&h, gw_bus_count(gw));
    fold(&h, gw_config(gw)->device_count);
    fold(&h, gw_config(gw)->poll_count);
    struct evbuffer *parts = evbuffer_new();
    if (!parts) {
        fold(&h, gw_now_ns());   /* no memory to fold them: an ETag that matches nothing */
        return h;
    }
    status_parts(gw, parts);
    size_t n = evbuffer_get_length(parts);
    const unsigned char *p = evbuffer_pullup(parts, -1);
    for (size_t i = 0; p && i < n; i++)
        h = (h ^ p[i]) * 1099511628211u;
    evbuffer_free(parts);
    return h;
}

/* Config device d (on bus k) as an object of its bus's "devices". */
static void status_device(gw_t *gw, unsigned k, unsigned d, uint64_t now, struct evbuffer *b)
{
    const config_device_t *dev = &gw_config(gw)->devices[d];
    line_slave_metrics_t *sm = bus_slave_metrics(gw_bus(gw, k), dev->slave);
    uint64_t last = gw_read(&sm->last_ok_ns);
    evbuffer_add_printf(b, "{\"name\":");
    api_add_str(b, dev->name);
    evbuffer_add_printf(b, ",\"slave\":%u,\"up\":%s,\"backed_off\":%s,\"timeout_ms\":%llu,"
                           "\"requests\":%llu,\"responses\":%llu,\"timeouts\":%llu,\"exceptions\":%llu,"
                           "\"last_ok_age_s\":",
                        dev->slave, last && !gw_read(&sm->dead) ? "true" : "false",
                        gw_read(&sm->dead) ? "true" : "false", (unsigned long long)gw_read(&sm->timeout_ms),
                        (unsigned long long)gw_read(&sm->requests), (unsigned long long)gw_read(&sm->responses),
                        (unsigned long long)gw_read(&sm->timeouts), (unsigned long long)gw_read(&sm->exceptions));
    if (last)
        evbuffer_add_printf(b, "%.3f", (double)(now - last) / 1e9);
    else
        evbuffer_add_printf(b, "null");
    http_tags_status(http_tags(gw_http(gw)), d, b);
    evbuffer_add_printf(b, "}");
}

/* Bus k as an object of "buses", its devices in it. */
static void status_bus(gw_t *gw, unsigned k, uint64_t now, struct evbuffer *b)
{
    const config_bus_t *bc = bus_config(gw_bus(gw, k));
    line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
    evbuffer_add_printf(b, "%s{\"name\":", k ? "," : "");
    api_add_str(b, bc->name);
    evbuffer_add_printf(b, ",\"port\":");
    api_add_str(b, gw_config(gw)->buses[k].port);   /* the running copy's: the line's own changes on its thread */
    evbuffer_add_printf(b, ",\"up\":%s,\"queue_depth\":%llu,"
                           "\"requests\":%llu,\"responses\":%llu,\"timeouts\":%llu,"
                           "\"crc_errors\":%llu,\"exceptions\":%llu,\"retries\":%llu",
                        gw_read(&m->port_up) ? "true" : "false",
                        (unsigned long long)gw_read(&m->queue_depth), (unsigned long long)gw_read(&m->requests),
                        (unsigned long long)gw_read(&m->responses), (unsigned long long)gw_read(&m->timeouts),
                        (unsigned long long)gw_read(&m->crc_errors), (unsigned long long)gw_read(&m->exceptions),
                        (unsigned long long)gw_read(&m->retries));
    add_ms(b, "latency_p50_ms", latency_quantile_ms(m, 0.50));
    add_ms(b, "latency_p99_ms", latency_quantile_ms(m, 0.99));
    listen_status_json(gw_bus(gw, k), b);
    evbuffer_add_printf(b, ",\"devices\":[");
    bool first = true;
    for (unsigned d = 0; d < gw_config(gw)->device_count; d++) {
        if (gw_config(gw)->devices[d].bus != k)
            continue;
        if (!first)
            evbuffer_add_printf(b, ",");
        status_device(gw, k, d, now, b);
        first = false;
    }
    evbuffer_add_printf(b, "]}");
}

/* ,"polls":[...]: each poll group with its cache entry as the snapshot took it. */
static void status_polls(gw_t *gw, uint64_t now, struct evbuffer *b)
{
    const config_t *cfg = gw_config(gw);
    evbuffer_add_printf(b, ",\"polls\":[");
    unsigned n_polls = 0;
    gw_cache_view_t *cv = cache_snapshot(gw, &n_polls);
    for (unsigned i = 0; cv && i < n_polls; i++) {
        const config_poll_t *pg = &cfg->polls[i];
        const gw_cache_view_t *e = &cv[i];
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        api_add_str(b, pg->name);
        evbuffer_add_printf(b, ",\"device\":");
        api_add_str(b, cfg->devices[pg->device].name);
        evbuffer_add_printf(b, ",\"function\":%u,\"address\":%u,"
                               "\"count\":%u,\"interval_ms\":%u,\"read\":%u,\"polls\":%llu,\"failures\":%llu,"
                               "\"overruns\":%llu,\"ok\":%s,\"exception\":%u,",
                            pg->function, pg->address, pg->count, pg->interval_ms, poller_read_of(gw_poller(gw), i),
                            (unsigned long long)e->polls, (unsigned long long)e->failures,
                            (unsigned long long)e->overruns, e->ok ? "true" : "false", e->ok ? 0u : e->exception);
        if (e->t_ns)
            evbuffer_add_printf(b, "\"age_s\":%.3f,\"values\":[", (double)(now - e->t_ns) / 1e9);
        else
            evbuffer_add_printf(b, "\"age_s\":null,\"values\":[");
        for (unsigned v = 0; v < e->count; v++)
            evbuffer_add_printf(b, v ? ",%u" : "%u", e->values[v]);
        evbuffer_add_printf(b, "]}");
    }
    free(cv);
    evbuffer_add_printf(b, "]");
}

void http_on_status(struct evhttp_request *req, void *arg)
{
    gw_t *gw = arg;
    uint64_t now = gw_now_ns();
    char etag[48];
    snprintf(etag, sizeof etag, "\"%llu-%016llx\"", (unsigned long long)http_tags_seq(http_tags(gw_http(gw))),
             (unsigned long long)status_state(gw));
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Cache-Control", "no-cache");
    if (http_not_modified(req, etag)) {
        web_count(gw, status_not_modified);
        evhttp_send_reply(req, HTTP_NOTMODIFIED, "Not Modified", NULL);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"uptime_s\":%.1f,\"buses\":[", (double)(now - gw_started_ns(gw)) / 1e9);
    for (unsigned k = 0; k < gw_bus_count(gw); k++)
        status_bus(gw, k, now, b);
    evbuffer_add_printf(b, "]");
    status_polls(gw, now, b);
    tcp_status_json(gw_fronts(gw).tcp, b);
    evbuffer_add_printf(b, ",\"frame_ring\":%u", frames_capacity(gw_frames(gw)));
    http_tls_status(gw, http_tls(gw_http(gw)), b);
    http_reload_status(gw, b);
    evbuffer_add_printf(b, ",\"restart_needed\":");
    api_add_str(b, gw_restart_needed(gw));
    evbuffer_add_printf(b, "}\n");
    evhttp_add_header(out, "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
