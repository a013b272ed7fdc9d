/*
 * web/http.c -- /metrics (Prometheus text) and /status (JSON), served by
 * libevent's evhttp on the I/O thread, and the connections' bounds. The
 * /tags part is http_tags.c; the web page and /frames are web.c's.
 * Everything read here is a relaxed atomic with a single writer, the cache
 * under its mutex or the tags under theirs, so a scrape never stalls a bus.
 * Only /tags/NAME takes PUT.
 */
#include "front/front.h"
#include "web/internal.h"
#include "json/json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct http_conn {
    struct bufferevent *bev;       /* evhttp's, with a reference of ours */
    uint64_t since_ns;             /* accepted, or last answered: a request is due by then + limit */
    bool refuse;                   /* beyond max_connections */
    bool held;                     /* a request of it waits for a bus (a tag write) */
    bool nodelay;                  /* TCP_NODELAY set (at its first request) */
    struct http_conn *next;
} http_conn_t;

struct gw_http {
    gw_t *gw;
    struct evhttp *http;
    struct evconnlistener *listener;
    struct event *ev_sweep;
    http_conn_t *conns;
    unsigned active;
    gw_http_tags_t *tags;
    http_tls_t *tls;               /* [http] tls_cert: HTTPS; NULL: plain HTTP */
    web_auth_t *auth;              /* users, sessions (auth.c) */
    web_audit_t *audit;            /* the audit ring (audit.c) */
};

web_auth_t *http_auth(gw_http_t *h) { return h->auth; }
web_audit_t *http_audit(gw_http_t *h) { return h->audit; }

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
    BM(ambiguous, "Answers not delivered yet: a different second candidate followed, a copy to verify (I4), or one to confirm after a give-up (I5); asked again or 0x0B"),
    BM(shaped, "Reads asked one register wider, so that no stale frame of their slave has their answer's shape (I6)"),
    BM(shape_refused, "Widened reads refused by the slave's map (0x02/0x03): asked again as they came, and its end learned"),
    BM(certified, "First answers after a give-up delivered without confirmation: no stale frame has their shape (I6)"),
    BM(priority_holds, "Times the line waited for a priority master's next request before a normal one ([bus] priority_hold_us)"),
    BM(priority_hold_us, "Microseconds the line waited so (the cost to the normal class)"),
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
    TM(refused_address, "Connections refused: max_per_address reached for that address"),
    TM(adu_timeout_closed, "Connections closed: an ADU incomplete after adu_timeout_ms"),
    TM(accept_errors, "accept() failures (e.g. out of descriptors): the listener pauses 100 ms"),
    TM(revoked_closed, "Connections closed by a reload: address no longer allowed, or TLS certificate no longer valid"),
    TM(ambiguous_refused, "RTU requests answered 0x03: where they end could not be decided (never cut)"),
    TM(waits, "Requests that waited unread for their turn in a full bus share (back-pressure), normal class"),
    TM(wait_us, "Microseconds those requests waited, normal class"),
    { "waiting", "Connections waiting for a place in a bus now, normal class", offsetof(gw_tcp_metrics_t, waiting), true },
    TM(priority_waits, "Requests that waited for their turn, priority class (priority_clients)"),
    TM(priority_wait_us, "Microseconds those requests waited, priority class"),
    { "priority_waiting", "Connections waiting for a place in a bus now, priority class",
      offsetof(gw_tcp_metrics_t, priority_waiting), true },
    TM(busy_refused, "Requests answered 0x06: their bus queue full (shares over queue_depth), or the slave busy"),
    TM(busy_throttled, "Times a connection was not read for a while: its budget of exceptions 06 spent"),
};

/* A configuration string as a JSON string, quotes included. */
static void add_str(struct evbuffer *b, const char *s)
{
    char q[JSON_QUOTED_MAX(CONFIG_PATH_MAX)];
    json_quote(q, sizeof q, s);
    evbuffer_add(b, q, strlen(q));
}

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
    /* The transport layer's own count (ASCII, MBAP): its driver is read on
     * this thread, the I/O thread, which is also the only one that writes it. */
    evbuffer_add_printf(b, "# HELP rtugw_bus_frame_errors_total Frames the transport layer passed up damaged "
                           "(bad LRC or hex, a transaction id not in flight)\n"
                           "# TYPE rtugw_bus_frame_errors_total counter\n");
    for (unsigned k = 0; k < gw->bus_count; k++) {
        driver_stats_t st;
        bus_driver_stats(gw->buses[k], &st);
        evbuffer_add_printf(b, "rtugw_bus_frame_errors_total{bus=\"%s\"} %llu\n", bus_config(gw->buses[k])->name,
                            (unsigned long long)st.frame_errors);
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
    /* Where requests' time went (line/metrics.c, gw_observe_causes): the
     * four causes add up to their time on the line. */
    evbuffer_add_printf(b, "# HELP rtugw_bus_request_seconds_total Time of requests answered after going on the "
                           "line, by cause: queue (before the first attempt), guard (parked between attempts for "
                           "the slave's guard), confirm (an answer held back: I4 copy check, I5 confirmation), "
                           "wire (attempts waiting for answers, and the quiet that vouches for them)\n"
                           "# TYPE rtugw_bus_request_seconds_total counter\n");
    for (unsigned k = 0; k < gw->bus_count; k++) {
        gw_bus_metrics_t *m = bus_metrics(gw->buses[k]);
        const char *name = bus_config(gw->buses[k])->name;
        const struct { const char *cause; atomic_uint_fast64_t *us; } c[] = {
            { "queue", &m->queue_us }, { "guard", &m->guard_us }, { "confirm", &m->confirm_us }, { "wire", &m->wire_us },
        };
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
            evbuffer_add_printf(b, "rtugw_bus_request_seconds_total{bus=\"%s\",cause=\"%s\"} %.6f\n", name,
                                c[i].cause, (double)gw_read(c[i].us) / 1e6);
    }
    evbuffer_add_printf(b, "# HELP rtugw_bus_requests_timed_total Requests answered after going on the line "
                           "(the count of rtugw_bus_request_seconds_total)\n"
                           "# TYPE rtugw_bus_requests_timed_total counter\n");
    for (unsigned k = 0; k < gw->bus_count; k++)
        evbuffer_add_printf(b, "rtugw_bus_requests_timed_total{bus=\"%s\"} %llu\n", bus_config(gw->buses[k])->name,
                            (unsigned long long)gw_read(&bus_metrics(gw->buses[k])->caused));
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

#define HM(f, h) { #f, h, offsetof(gw_http_metrics_t, f), false }
static const metric_def_t http_defs[] = {
    HM(accepted, "HTTP connections accepted"),
    HM(refused, "HTTP connections refused: max_connections reached"),
    HM(requests, "HTTP requests served"),
    HM(timed_out, "HTTP requests cut: incomplete after request_timeout_ms"),
    { "active", "HTTP connections open", offsetof(gw_http_metrics_t, active), true },
    HM(tag_writes, "Tag writes (PUT /tags/NAME) the slave confirmed"),
    HM(tag_writes_refused, "Tag writes refused before the bus (token, read-only, value, tag)"),
    HM(tag_write_failures, "Tag writes answered with an exception or no answer"),
    HM(tag_writes_abandoned, "Tag writes whose client closed before the answer: its connection freed at once"),
    HM(api_changes, "Configuration changes written and applied through /api/"),
    HM(api_refused, "/api/ requests refused (token, revision, body, check)"),
};

static void http_metrics_text(gw_t *gw, struct evbuffer *b)
{
    for (size_t i = 0; i < sizeof http_defs / sizeof http_defs[0]; i++) {
        metric_header(b, "http", &http_defs[i]);
        evbuffer_add_printf(b, "rtugw_http_%s%s %llu\n", http_defs[i].name, http_defs[i].gauge ? "" : "_total",
                            (unsigned long long)field(&gw->http_metrics, http_defs[i].offset));
    }
}

#define TLSM(f, h, g) { #f, h, offsetof(gw_tls_metrics_t, f), g }
static const metric_def_t tls_defs[] = {
    TLSM(accepted, "TLS connections accepted (handshake begun)", false),
    TLSM(handshakes, "TLS handshakes completed: client authenticated, with a role", false),
    TLSM(resumed, "Completed TLS handshakes that resumed a cached session", false),
    TLSM(active, "TLS connections open", true),
    TLSM(reloads, "SIGHUP: certificates, key and CRL reloaded", false),
    TLSM(reload_failures, "SIGHUP: a file did not load; the old ones kept", false),
    TLSM(handshaking, "Sockets in a TLS handshake now (at most max_handshakes)", true),
    TLSM(handshakes_refused_full, "Sockets refused at once: max_handshakes in a handshake already", false),
    TLSM(handshakes_refused_address,
         "Sockets refused at once: max_handshakes_per_address from that address in a handshake already", false),
};

/* MB-TCP-Security: handshakes, refusals by reason, requests and refusals per role. */
static void tls_metrics_text(gw_t *gw, struct evbuffer *b)
{
    if (!gw->mbaps)
        return;
    const gw_tls_metrics_t *m = mbaps_metrics(gw->mbaps);
    const char *subject;
    int64_t not_after;
    for (size_t i = 0; i < sizeof tls_defs / sizeof tls_defs[0]; i++) {
        metric_header(b, "tls", &tls_defs[i]);
        evbuffer_add_printf(b, "rtugw_tls_%s%s %llu\n", tls_defs[i].name, tls_defs[i].gauge ? "" : "_total",
                            (unsigned long long)field(m, tls_defs[i].offset));
    }
    evbuffer_add_printf(b, "# HELP rtugw_tls_refused_total TLS clients refused in the handshake, by reason\n"
                           "# TYPE rtugw_tls_refused_total counter\n");
    for (int r = 0; r < GW_TLS_REFUSAL_COUNT; r++)
        evbuffer_add_printf(b, "rtugw_tls_refused_total{reason=\"%s\"} %llu\n", gw_tls_refusal_names[r],
                            (unsigned long long)gw_read(&m->refused[r]));
    evbuffer_add_printf(b, "# HELP rtugw_tls_role_requests_total Requests of TLS clients, by role\n"
                           "# TYPE rtugw_tls_role_requests_total counter\n");
    for (unsigned r = 0; r < gw->cfg->role_count; r++)
        evbuffer_add_printf(b, "rtugw_tls_role_requests_total{role=\"%s\"} %llu\n", gw->cfg->roles[r].name,
                            (unsigned long long)gw_read(&m->role_requests[r]));
    evbuffer_add_printf(b, "# HELP rtugw_tls_role_refused_total Requests beyond their role's rights, answered 0x01\n"
                           "# TYPE rtugw_tls_role_refused_total counter\n");
    for (unsigned r = 0; r < gw->cfg->role_count; r++)
        evbuffer_add_printf(b, "rtugw_tls_role_refused_total{role=\"%s\"} %llu\n", gw->cfg->roles[r].name,
                            (unsigned long long)gw_read(&m->role_refused[r]));
    mbaps_certificate(gw->mbaps, &subject, &not_after);
    evbuffer_add_printf(b, "# HELP rtugw_tls_certificate_not_after_seconds The server certificate's notAfter\n"
                           "# TYPE rtugw_tls_certificate_not_after_seconds gauge\n"
                           "rtugw_tls_certificate_not_after_seconds %lld\n", (long long)not_after);
}

/* [tcp] and [rtu_tcp]: the same session code, the same counters. */
static void tcp_metrics_text(struct evbuffer *b, const char *prefix, const gw_tcp_metrics_t *m)
{
    for (size_t i = 0; i < sizeof tcp_defs / sizeof tcp_defs[0]; i++) {
        metric_header(b, prefix, &tcp_defs[i]);
        evbuffer_add_printf(b, "rtugw_%s_%s%s %llu\n", prefix, tcp_defs[i].name, tcp_defs[i].gauge ? "" : "_total",
                            (unsigned long long)field(m, tcp_defs[i].offset));
    }
}

#define SM(f, h) { #f, h, offsetof(gw_serial_slave_metrics_t, f), false }
static const metric_def_t serial_slave_defs[] = {
    SM(requests, "Requests from the serial master for a routed slave"),
    SM(answers, "Answers written to the serial master"),
    SM(exceptions, "Answers that were exceptions (the slave's or the gateway's)"),
    SM(timeouts, "Answered 0x0B: no answer from the bus within answer_timeout_ms"),
    SM(late_dropped, "Bus answers dropped: after the deadline, or for an abandoned request"),
    SM(abandoned, "Requests the master asked anew before they were answered"),
    SM(ignored, "Requests for slave ids no route names (not answered)"),
    SM(bad_frames, "Frames with a bad CRC or cut short (not answered)"),
    { "port_up", "1 while the port is open", offsetof(gw_serial_slave_metrics_t, port_up), true },
};

static void serial_slave_metrics_text(gw_t *gw, struct evbuffer *b)
{
    if (!gw->serial_slave_count)
        return;
    for (size_t i = 0; i < sizeof serial_slave_defs / sizeof serial_slave_defs[0]; i++) {
        const metric_def_t *d = &serial_slave_defs[i];
        metric_header(b, "serial_slave", d);
        for (unsigned k = 0; k < gw->serial_slave_count; k++)
            evbuffer_add_printf(b, "rtugw_serial_slave_%s%s{name=\"%s\"} %llu\n", d->name, d->gauge ? "" : "_total",
                                serial_slave_name(gw->serial_slaves[k]),
                                (unsigned long long)field(serial_slave_metrics(gw->serial_slaves[k]), d->offset));
    }
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
    listen_metrics_text(gw, b);
    device_metrics_text(gw, b);
    tcp_metrics_text(b, "tcp", &gw->tcp_metrics);
    tls_metrics_text(gw, b);
    if (gw->rtu_tcp)
        tcp_metrics_text(b, "rtu_tcp", &gw->rtu_tcp_metrics);
    serial_slave_metrics_text(gw, b);
    router_metrics_text(gw, b);
    http_metrics_text(gw, b);
    http_tls_metrics(gw, gw->http->tls, b);
    web_auth_metrics(gw->http->auth, b);
    frames_metrics_text(atomic_load_explicit(&gw->frames, memory_order_acquire), gw->cfg, b);
    actor_metrics_text(gw, b);
    http_tags_metrics(gw, b);
    gwnorth_metrics_text(gw->north, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* The q-quantile of a bus's latency histogram in ms, interpolated inside its
 * bucket as Prometheus's histogram_quantile() does; -1 before any answer. */
static double latency_quantile_ms(gw_bus_metrics_t *m, double q)
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
        evbuffer_add_printf(b, "%s{\"name\":", k ? "," : "");
        add_str(b, bc->name);
        evbuffer_add_printf(b, ",\"port\":");
        add_str(b, bc->port);
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
        listen_status_json(gw->buses[k], b);
        evbuffer_add_printf(b, ",\"devices\":[");
        bool first = true;
        for (unsigned d = 0; d < gw->cfg->device_count; d++) {
            const config_device_t *dev = &gw->cfg->devices[d];
            if (dev->bus != k)
                continue;
            gw_slave_metrics_t *sm = bus_slave_metrics(gw->buses[k], dev->slave);
            uint64_t last = gw_read(&sm->last_ok_ns);
            evbuffer_add_printf(b, "%s{\"name\":", first ? "" : ",");
            add_str(b, dev->name);
            evbuffer_add_printf(b, ",\"slave\":%u,\"up\":%s,\"backed_off\":%s,\"timeout_ms\":%llu,"
                                   "\"requests\":%llu,\"responses\":%llu,\"timeouts\":%llu,\"exceptions\":%llu,"
                                   "\"last_ok_age_s\":",
                                dev->slave, 
                                last && !gw_read(&sm->dead) ? "true" : "false",
                                gw_read(&sm->dead) ? "true" : "false", (unsigned long long)gw_read(&sm->timeout_ms),
                                (unsigned long long)gw_read(&sm->requests),
                                (unsigned long long)gw_read(&sm->responses),
                                (unsigned long long)gw_read(&sm->timeouts),
                                (unsigned long long)gw_read(&sm->exceptions));
            if (last)
                evbuffer_add_printf(b, "%.3f", (double)(now - last) / 1e9);
            else
                evbuffer_add_printf(b, "null");
            http_tags_status(gw, d, b);
            evbuffer_add_printf(b, "}");
            first = false;
        }
        evbuffer_add_printf(b, "]}");
    }
    evbuffer_add_printf(b, "],\"polls\":[");
    pthread_mutex_lock(&gw->cache_lock);
    for (unsigned i = 0; i < gw->cfg->poll_count; i++) {
        const config_poll_t *pg = &gw->cfg->polls[i];
        const gw_cache_entry_t *e = &gw->cache[i];
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        add_str(b, pg->name);
        evbuffer_add_printf(b, ",\"device\":");
        add_str(b, gw->cfg->devices[pg->device].name);
        evbuffer_add_printf(b, ",\"function\":%u,\"address\":%u,"
                               "\"count\":%u,\"interval_ms\":%u,\"read\":%u,\"polls\":%llu,\"failures\":%llu,"
                               "\"overruns\":%llu,\"ok\":%s,\"exception\":%u,",
                            pg->function, pg->address, pg->count, pg->interval_ms, poller_read_of(gw->poller, i),
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
    pthread_mutex_unlock(&gw->cache_lock);
    const gw_tcp_metrics_t *tm = &gw->tcp_metrics;
    evbuffer_add_printf(b, "],\"tcp\":{\"active\":%llu,\"requests\":%llu,\"answers\":%llu,"
                           "\"classes\":{\"normal\":{\"waiting\":%llu,\"waits\":%llu,\"wait_us\":%llu},"
                           "\"priority\":{\"waiting\":%llu,\"waits\":%llu,\"wait_us\":%llu}}},"
                           "\"frame_ring\":%u",
                        (unsigned long long)gw_read(&tm->active), (unsigned long long)gw_read(&tm->requests),
                        (unsigned long long)gw_read(&tm->answers), (unsigned long long)gw_read(&tm->waiting),
                        (unsigned long long)gw_read(&tm->waits), (unsigned long long)gw_read(&tm->wait_us),
                        (unsigned long long)gw_read(&tm->priority_waiting),
                        (unsigned long long)gw_read(&tm->priority_waits),
                        (unsigned long long)gw_read(&tm->priority_wait_us),
                        frames_capacity(atomic_load_explicit(&gw->frames, memory_order_acquire)));
    http_tls_status(gw, gw->http->tls, b);
    evbuffer_add_printf(b, ",\"restart_needed\":");
    add_str(b, gw->restart_needed);
    evbuffer_add_printf(b, "}\n");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ---- connections: the references we keep, and their deadlines --------------- */

static http_conn_t *conn_of(gw_http_t *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    for (http_conn_t *c = h->conns; c; c = c->next)
        if (c->bev == bev)
            return c;
    return NULL;
}

/* evhttp is closing a connection: the sweep right after it frees the
 * bufferevent releases our reference, so the descriptor closes now, not
 * up to 250 ms later. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
    gw_http_t *h = arg;
    (void)evcon;
    event_active(h->ev_sweep, EV_TIMEOUT, 0);
}

/* Every request passes here: it is complete, so the deadline starts over. */
static void on_request(struct evhttp_request *req, void *arg)
{
    gw_http_t *h = arg;
    http_conn_t *c = conn_of(h, req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

    if (c)
        c->since_ns = gw_now_ns();
    if (c && !c->nodelay && bufferevent_getfd(c->bev) >= 0) {
        /* An answer is one write, but under TLS 1.3 the session ticket went
         * just before it: Nagle held the answer for the client's delayed ACK
         * (40 ms a request on Linux, measured). */
        int one = 1;
        setsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->nodelay = true;
    }
    if (h->tls && !c) {
        /* a connection evhttp made itself (make_bev was out of memory): plain
         * HTTP on the HTTPS port, never served */
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        if (bev && bufferevent_getfd(bev) >= 0)
            shutdown(bufferevent_getfd(bev), SHUT_RDWR);
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    if (evhttp_request_get_connection(req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_close, h);
    gw_count(&h->gw->http_metrics.requests);
    if (!web_auth_route(h->auth, req, path))
        return;   /* refused: no session, a role too low, cross-site */
    if (path && (web_auth_handle(h->auth, req, path) || http_tags_request(h->tags, req, path) ||
                 api_request(h->gw, req, path)))
        return;
    if (evhttp_request_get_command(req) & (EVHTTP_REQ_PUT | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        evhttp_send_error(req, 405, "only /tags/NAME takes PUT, /login and /logout POST, /api/ PUT, POST and DELETE");
    } else if (path && strcmp(path, "/metrics") == 0)
        on_metrics(req, h->gw);
    else if (path && strcmp(path, "/status") == 0)
        on_status(req, h->gw);
    else if (!path || !web_handle(h->gw, req, path))
        evhttp_send_error(req, HTTP_NOTFOUND, "not found");
}

/* evhttp asks us for each new connection's bufferevent: we keep a reference. */
static void sweep_arm(gw_http_t *h);

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    gw_http_t *h = arg;
    http_conn_t *c = calloc(1, sizeof *c);
    struct bufferevent *bev = c ? http_tls_bev(h->tls, base) : NULL;
    if (!bev) {
        /* evhttp makes its own, plain: it is then neither capped nor timed,
         * and on an HTTPS port it must not be served at all */
        free(c);
        return NULL;
    }
    bufferevent_incref(bev);
    /* Past this much unparsed input the connection stops being read: evhttp
     * checks max_header_bytes only at the end of a line, and a header line
     * without an end would otherwise grow without bound. What is not read
     * waits in the kernel's socket buffer until the deadline cuts it. */
    const config_http_t *cfg = &h->gw->cfg->http;
    bufferevent_setwatermark(bev, EV_READ, 0, (size_t)cfg->max_header_bytes + cfg->max_body_bytes + 4096);
    *c = (http_conn_t){ .bev = bev, .since_ns = gw_now_ns(), .next = h->conns };
    h->conns = c;
    h->active++;
    sweep_arm(h);
    gw_set(&h->gw->http_metrics.active, h->active);
    gw_count(&h->gw->http_metrics.accepted);
    if (h->active >= cfg->max_connections) {
        /* Full: the listener rests (more clients wait in the kernel's
         * backlog, costing us nothing) until the sweep finds room. */
        evconnlistener_disable(h->listener);
        if (h->active > cfg->max_connections) {
            c->refuse = true;   /* its descriptor is set after we return: the sweep closes it, now */
            event_active(h->ev_sweep, EV_TIMEOUT, 0);
        }
    }
    return bev;
}

/*
 * Out of descriptors: libevent's listener would retry accept() at once,
 * forever. It is paused instead and resumed 250 ms later. (evhttp
 * owns the listener's callback argument, so such failures are counted by
 * the Modbus TCP front end's accept_errors, which meets the same limit.)
 */
static void resume_listener(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct timeval quarter = { 0, 250000 };
    (void)arg;
    evconnlistener_disable(l);
    /* Resumed in 250 ms by a one-shot timer, not by the sweep, which runs only
     * while there are connections. At the cap, the connection it may then
     * accept is refused as any past the cap is (make_bev). */
    if (event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, resume_listener, l, &quarter) != 0)
        evconnlistener_enable(l);   /* no timer: libevent's own retry at once, as without the pause */
}

/* Is evhttp done with it? bufferevent_free() clears the callbacks, and our
 * reference keeps the rest alive until we drop it. */
static bool released(struct bufferevent *bev)
{
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb ev;
    void *arg;
    bufferevent_getcb(bev, &rd, &wr, &ev, &arg);
    return !rd && !wr && !ev;
}

/*
 * Has the client of a held request (a tag write waiting for its bus) gone?
 * evhttp does not read a connection while its request is unanswered, so it
 * cannot tell, and such a connection would hold one of max_connections
 * until the bus gives up on the write (seconds per write on a silent
 * slave). A peek tells: end of file or an error. A client that only shut
 * its sending side (half-close) and still waits counts as gone too, as
 * nginx counts it: HTTP has no use for a half-close, and the write it sent
 * is then dropped if not yet on the line, or its answer goes to no one.
 * Bytes waiting (a pipelined request) mean it is still there.
 */
static bool client_gone(struct bufferevent *bev)
{
    evutil_socket_t sock = bufferevent_getfd(bev);
    char byte;
    if (sock < 0)
        return false;
    ssize_t n = recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/*
 * The sweep (request deadlines, refusals, released connections, the
 * listener's rest at the cap) runs every 250 ms while there is a connection,
 * and not at all without one (docs/footprint.md): an idle gateway's I/O
 * thread sleeps. It is also run at once (event_active) when a connection
 * closes or is refused.
 */
static void sweep_arm(gw_http_t *h)
{
    if (!evtimer_pending(h->ev_sweep, NULL)) {
        struct timeval quarter = { 0, 250000 };
        event_add(h->ev_sweep, &quarter);
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    gw_http_t *h = arg;
    uint64_t now = gw_now_ns(), limit = (uint64_t)h->gw->cfg->http.request_timeout_ms * 1000000ull;
    (void)fd;
    (void)what;
    for (http_conn_t **pp = &h->conns, *c; (c = *pp) != NULL;) {
        if (released(c->bev)) {
            *pp = c->next;
            http_tls_released(h->tls, c->bev);
            bufferevent_decref(c->bev);   /* the last reference: closes its descriptor */
            free(c);
            h->active--;
            continue;
        }
        struct evhttp_connection *abandoned = c->held && client_gone(c->bev)
                                                  ? http_tags_abandon(h->tags, c->bev) : NULL;
        if (abandoned) {
            c->held = false;
            evhttp_connection_free(abandoned);   /* frees its request too; released on the next sweep */
            pp = &c->next;
            continue;
        }
        bool late = !c->held && now - c->since_ns > limit;
        if (late || c->refuse) {
            evutil_socket_t sock = bufferevent_getfd(c->bev);
            gw_count(c->refuse ? &h->gw->http_metrics.refused : &h->gw->http_metrics.timed_out);
            c->refuse = false;
            c->since_ns = UINT64_MAX / 2;   /* once */
            if (sock >= 0)
                shutdown(sock, SHUT_RDWR);
        }
        pp = &c->next;
    }
    gw_set(&h->gw->http_metrics.active, h->active);
    if (h->active < h->gw->cfg->http.max_connections)
        evconnlistener_enable(h->listener);   /* after a pause for room or for descriptors */
    if (!h->conns)
        event_del(h->ev_sweep);   /* sweep_arm() starts it again with the next connection */
}

void http_hold(gw_http_t *h, struct evhttp_request *req, bool held)
{
    http_conn_t *c = conn_of(h, req);
    if (!c)
        return;   /* its client has gone */
    c->held = held;
    c->since_ns = gw_now_ns();   /* answered: the next request is due from now */
}

gw_http_t *http_new(gw_t *gw, char *err, size_t errcap)
{
    const config_http_t *cfg = &gw->cfg->http;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port) };
    gw_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    h->gw = gw;
    if (!(h->tags = http_tags_new(gw, h)) || !(h->auth = web_auth_new(gw)) || !(h->audit = web_audit_new())) {
        snprintf(err, errcap, "out of memory");
        http_free(h);
        return NULL;
    }
    if (inet_pton(AF_INET, cfg->bind, &sin.sin_addr) != 1) {
        snprintf(err, errcap, "[http] bind = '%s': not an IPv4 address", cfg->bind);
        http_free(h);
        return NULL;
    }
    if (cfg->tls_cert[0] && !(h->tls = http_tls_new(cfg, err, errcap))) {
        http_free(h);
        return NULL;
    }
    h->http = evhttp_new(loop_base(gw->loop));
    h->listener = evconnlistener_new_bind(loop_base(gw->loop), NULL, NULL,
                                          LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 64,
                                          (struct sockaddr *)&sin, sizeof sin);
    h->ev_sweep = event_new(loop_base(gw->loop), -1, EV_PERSIST, on_sweep, h);
    if (!h->http || !h->listener || !h->ev_sweep) {
        snprintf(err, errcap, "http: cannot listen on %s:%u: %s", cfg->bind, cfg->port, strerror(errno));
        http_free(h);
        return NULL;
    }
    evhttp_set_bevcb(h->http, make_bev, h);
    if (!evhttp_bind_listener(h->http, h->listener)) {
        snprintf(err, errcap, "http: cannot serve on %s:%u", cfg->bind, cfg->port);
        http_free(h);
        return NULL;
    }
    evconnlistener_set_error_cb(h->listener, on_accept_error);
    evhttp_set_max_headers_size(h->http, cfg->max_header_bytes);
    evhttp_set_max_body_size(h->http, cfg->max_body_bytes);
    evhttp_set_timeout(h->http, (int)cfg->idle_timeout_s);
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_POST |
                                              EVHTTP_REQ_DELETE);
    evhttp_set_gencb(h->http, on_request, h);
    if (web_start(gw, err, errcap) != 0) {
        http_free(h);
        return NULL;
    }
    return h;
}

void http_free(gw_http_t *h)
{
    if (!h)
        return;
    web_stop(h->gw);
    /* evhttp_free() closes the connections, and each close calls on_close,
     * which activates the sweep: the sweep's event is freed after it. */
    if (h->http)
        evhttp_free(h->http);   /* frees its connections and the bound listener */
    else if (h->listener)
        evconnlistener_free(h->listener);
    if (h->ev_sweep)
        event_free(h->ev_sweep);
    for (http_conn_t *c = h->conns, *n; c; c = n) {
        n = c->next;
        bufferevent_decref(c->bev);
        free(c);
    }
    http_tags_free(h->tags);   /* after evhttp_free, which freed the requests it held */
    http_tls_free(h->tls);     /* after the connections, which hold their own references */
    web_auth_free(h->auth);
    web_audit_free(h->audit);
    free(h);
}
