/*
 * web/metrics.c -- /metrics: every counter of the daemon as Prometheus text
 * (version 0.0.4), on the I/O thread. Everything read here is a relaxed
 * atomic with a single writer, so a scrape never stalls a bus. One table of
 * names and help texts per part (buses, TCP front ends, TLS, HTTP, serial
 * slaves); the other parts add their own lines (listen-only buses, devices,
 * frames, tags, MQTT, the router and the actors) through their
 * *_metrics_text.
 */
#include "front/front.h"
#include "web/internal.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct metric_def {
    const char *name;
    const char *help;
    size_t offset;    /* into line_bus_metrics_t */
    bool gauge;
} metric_def_t;

#define BM(f, h) { #f, h, offsetof(line_bus_metrics_t, f), false }
#define BG(f, h) { #f, h, offsetof(line_bus_metrics_t, f), true }
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
    BM(misshapen, "Requests given up (0x0B) without a retry: their slave answered them in a shape no stale frame of it has"),
    BM(priority_holds, "Times the line waited for a priority master's next request before a normal one ([bus] priority_hold_us)"),
    BM(priority_hold_us, "Microseconds the line waited so (the cost to the normal class)"),
    BM(reconnect_holds, "Times the line was held quiet after a reconnect with answers owed from before it (I8)"),
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
    /* Modbus UDP's drops (drivers/udp.c: never handed up, so never a frame)
     * and dial-in ports' connections (drivers/dialin.c). */
    static const struct { const char *name, *help; size_t offset; } transport[] = {
        { "stale_answers", "Modbus UDP datagrams with a transaction id not in flight (late, duplicated), dropped",
          offsetof(driver_stats_t, stale_answers) },
        { "foreign_datagrams", "Modbus UDP datagrams from another address or port than the device's, dropped",
          offsetof(driver_stats_t, foreign_datagrams) },
        { "dialin_accepted", "Dial-in DTU connections accepted", offsetof(driver_stats_t, dialin_accepted) },
        { "dialin_rejected", "Dial-in DTU connections closed for a wrong or missing registration",
          offsetof(driver_stats_t, dialin_rejected) },
        { "dialin_unclaimed", "Dial-in connections closed on the bus's listening port with no bus to blame (a "
          "registration no bus there has, silence on a shared port): one count per port, shown on each of its buses",
          offsetof(driver_stats_t, dialin_unclaimed) },
        { "dialin_takeovers", "A DTU dialled again while connected: its old connection closed",
          offsetof(driver_stats_t, dialin_takeovers) },
        { "heartbeats", "Dial-in heartbeat packets dropped", offsetof(driver_stats_t, heartbeats) },
    };
    for (size_t i = 0; i < sizeof transport / sizeof transport[0]; i++) {
        evbuffer_add_printf(b, "# HELP rtugw_bus_%s_total %s\n# TYPE rtugw_bus_%s_total counter\n", transport[i].name,
                            transport[i].help, transport[i].name);
        for (unsigned k = 0; k < gw->bus_count; k++) {
            driver_stats_t st;
            bus_driver_stats(gw->buses[k], &st);
            evbuffer_add_printf(b, "rtugw_bus_%s_total{bus=\"%s\"} %llu\n", transport[i].name,
                                bus_config(gw->buses[k])->name, (unsigned long long)field(&st, transport[i].offset));
        }
    }
    evbuffer_add_printf(b, "# HELP rtugw_bus_latency_seconds Request to matching response, first attempt\n"
                           "# TYPE rtugw_bus_latency_seconds histogram\n");
    for (unsigned k = 0; k < gw->bus_count; k++) {
        line_bus_metrics_t *m = bus_metrics(gw->buses[k]);
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
        line_bus_metrics_t *m = bus_metrics(gw->buses[k]);
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
        { "requests", offsetof(line_slave_metrics_t, requests), false },
        { "responses", offsetof(line_slave_metrics_t, responses), false },
        { "timeouts", offsetof(line_slave_metrics_t, timeouts), false },
        { "exceptions", offsetof(line_slave_metrics_t, exceptions), false },
        { "late_answers", offsetof(line_slave_metrics_t, late_answers), false },
        { "backed_off", offsetof(line_slave_metrics_t, dead), true },
        { "timeout_ms", offsetof(line_slave_metrics_t, timeout_ms), true },
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        evbuffer_add_printf(b, "# TYPE rtugw_device_%s%s %s\n", defs[i].name, defs[i].gauge ? "" : "_total",
                            defs[i].gauge ? "gauge" : "counter");
        for (unsigned d = 0; d < gw->cfg->device_count; d++) {
            const config_device_t *dev = &gw->cfg->devices[d];
            line_slave_metrics_t *sm = bus_slave_metrics(gw->buses[dev->bus], dev->slave);
            evbuffer_add_printf(b, "rtugw_device_%s%s{bus=\"%s\",device=\"%s\",slave=\"%u\"} %llu\n",
                                defs[i].name, defs[i].gauge ? "" : "_total", gw->cfg->buses[dev->bus].name,
                                dev->name, dev->slave, (unsigned long long)field(sm, defs[i].off));
        }
    }
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
    HM(misdirected, "HTTP requests refused 421: their Host is not one of [http] server_names"),
    HM(tags_full, "GET /tags answered with every tag (no since, or one too old)"),
    HM(tags_since, "GET /tags?since=N answered with the tags changed after N only"),
    HM(tags_not_modified, "GET /tags answered 304: nothing changed since the client's ETag"),
    HM(tags_listed, "Tags formatted into GET /tags answers"),
    HM(tags_refused, "GET /tags refused 400: since is not a change number"),
    HM(tags_slices, "Slices of 1,024 tags whole GET /tags answers were built in, one per turn of the I/O loop"),
    HM(status_not_modified, "GET /status answered 304: nothing changed since the client's ETag"),
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

/* [udp]: the counters it shares with [tcp] (those that mean something
 * without a connection), then its own. */
static void udp_metrics_text(struct evbuffer *b, const gw_udp_metrics_t *m)
{
    static const char *const common[] = { "requests", "answers", "bad_mbap", "refused_allow", "unrouted",
                                          "read_only_refused", "cache_hits", "discarded" };
    static const metric_def_t own[] = {
        { "refused_inflight", "Requests answered 0x06: max_pending of their source address in flight",
          offsetof(gw_udp_metrics_t, refused_inflight), false },
        { "refused_sources", "Requests answered 0x06: max_clients source addresses in flight already",
          offsetof(gw_udp_metrics_t, refused_sources), false },
        { "send_errors", "Answers the socket did not take", offsetof(gw_udp_metrics_t, send_errors), false },
        { "in_flight", "Requests in flight now", offsetof(gw_udp_metrics_t, in_flight), true },
    };
    for (size_t i = 0; i < sizeof tcp_defs / sizeof tcp_defs[0]; i++)
        for (size_t j = 0; j < sizeof common / sizeof common[0]; j++)
            if (strcmp(tcp_defs[i].name, common[j]) == 0) {
                metric_header(b, "udp", &tcp_defs[i]);
                evbuffer_add_printf(b, "rtugw_udp_%s_total %llu\n", tcp_defs[i].name,
                                    (unsigned long long)field(&m->common, tcp_defs[i].offset));
            }
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        metric_header(b, "udp", &own[i]);
        evbuffer_add_printf(b, "rtugw_udp_%s%s %llu\n", own[i].name, own[i].gauge ? "" : "_total",
                            (unsigned long long)field(m, own[i].offset));
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


/*
 * The last reload: when, the file's revision then, its result, what it
 * applied, what waits (for a restart, then what is queued behind tag
 * writes), its first error (FILE:LINE: ... for a file check refused).
 */
void http_reload_status(gw_t *gw, struct evbuffer *b)
{
    const gw_reload_report_t *r = &gw->last_reload;
    if (!r->wall_ms) {
        evbuffer_add_printf(b, ",\"last_reload\":null");
        return;
    }
    time_t t = (time_t)(r->wall_ms / 1000);
    struct tm tm;
    char when[32];
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    evbuffer_add_printf(b, ",\"last_reload\":{\"time\":\"%s.%03dZ\",\"time_ms\":%lld,\"revision\":\"%s\","
                           "\"result\":\"%s\",\"applied\":", when, (int)(r->wall_ms % 1000), (long long)r->wall_ms,
                        r->revision, gw_reload_result_name(r->result));
    api_add_str(b, r->applied);
    evbuffer_add_printf(b, ",\"waits\":");
    api_add_str(b, r->waits);
    evbuffer_add_printf(b, ",\"queued\":");
    api_add_str(b, gw->reload_queued);
    evbuffer_add_printf(b, ",\"error\":");
    if (r->error[0])
        api_add_str(b, r->error);
    else
        evbuffer_add_printf(b, "null");
    evbuffer_add_printf(b, ",\"warnings\":%u}", r->warnings);
}

static void reload_metrics_text(gw_t *gw, struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP rtugw_config_reloads_total Configuration reloads (SIGHUP, the API), by result\n"
                           "# TYPE rtugw_config_reloads_total counter\n");
    for (int i = 0; i < GW_RELOAD_RESULTS; i++)
        evbuffer_add_printf(b, "rtugw_config_reloads_total{result=\"%s\"} %llu\n", gw_reload_result_name((enum gw_reload_result)i),
                            (unsigned long long)gw->reloads[i]);
}

void http_on_metrics(struct evhttp_request *req, void *arg)
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
    if (gw->udp)
        udp_metrics_text(b, &gw->udp_metrics);
    serial_slave_metrics_text(gw, b);
    gw_router_metrics_text(gw, b);
    http_metrics_text(gw, b);
    http_tls_metrics(gw, http_tls(gw->http), b);
    web_auth_metrics(http_auth(gw->http), b);
    frames_metrics_text(atomic_load_explicit(&gw->frames, memory_order_acquire), gw->cfg, b);
    gw_actor_metrics_text(gw, b);
    http_tags_metrics(gw, b);
    gw_north_metrics_text(gw->north, b);
    vslave_metrics_text(gw->maps, b);
    scan_metrics_text(gw->scans, b);
    reload_metrics_text(gw, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

