/*
 * front/report.c -- the front ends' part of /status ("tcp") and of
 * /metrics (rtugw_tcp_*, rtugw_tls_*, rtugw_rtu_tcp_*, rtugw_udp_*,
 * rtugw_serial_slave_*): one table of names and help texts per counter
 * block. Everything read is a relaxed atomic with one writer (the
 * listener's, on the I/O thread, where this runs: report.h). The front
 * ends running are read at each call (gw_fronts), as a reload may start
 * one.
 */
#include "front/front.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#define TM(f, h) { #f, h, offsetof(gw_tcp_metrics_t, f), false }
static const report_metric_def_t tcp_defs[] = {
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

#define TLSM(f, h, g) { #f, h, offsetof(gw_tls_metrics_t, f), g }
static const report_metric_def_t tls_defs[] = {
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
static void mbaps_metrics_text(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    if (!gw_mbaps(gw))
        return;
    const gw_tls_metrics_t *m = mbaps_metrics(gw_mbaps(gw));
    const char *subject;
    int64_t not_after;
    report_metric_block(b, "tls", tls_defs, sizeof tls_defs / sizeof tls_defs[0], m);
    evbuffer_add_printf(b, "# HELP rtugw_tls_refused_total TLS clients refused in the handshake, by reason\n"
                           "# TYPE rtugw_tls_refused_total counter\n");
    for (int r = 0; r < GW_TLS_REFUSAL_COUNT; r++)
        evbuffer_add_printf(b, "rtugw_tls_refused_total{reason=\"%s\"} %llu\n", gw_tls_refusal_names[r],
                            (unsigned long long)gw_read(&m->refused[r]));
    evbuffer_add_printf(b, "# HELP rtugw_tls_role_requests_total Requests of TLS clients, by role\n"
                           "# TYPE rtugw_tls_role_requests_total counter\n");
    for (unsigned r = 0; r < gw_config(gw)->role_count; r++)
        evbuffer_add_printf(b, "rtugw_tls_role_requests_total{role=\"%s\"} %llu\n", gw_config(gw)->roles[r].name,
                            (unsigned long long)gw_read(&m->role_requests[r]));
    evbuffer_add_printf(b, "# HELP rtugw_tls_role_refused_total Requests beyond their role's rights, answered 0x01\n"
                           "# TYPE rtugw_tls_role_refused_total counter\n");
    for (unsigned r = 0; r < gw_config(gw)->role_count; r++)
        evbuffer_add_printf(b, "rtugw_tls_role_refused_total{role=\"%s\"} %llu\n", gw_config(gw)->roles[r].name,
                            (unsigned long long)gw_read(&m->role_refused[r]));
    mbaps_certificate(gw_mbaps(gw), &subject, &not_after);
    evbuffer_add_printf(b, "# HELP rtugw_tls_certificate_not_after_seconds The server certificate's notAfter\n"
                           "# TYPE rtugw_tls_certificate_not_after_seconds gauge\n"
                           "rtugw_tls_certificate_not_after_seconds %lld\n", (long long)not_after);
}

/* [tcp] and [rtu_tcp]: the same session code, the same counters. */
static void tcp_metrics_text(struct evbuffer *b, const char *prefix, const gw_tcp_metrics_t *m)
{
    report_metric_block(b, prefix, tcp_defs, sizeof tcp_defs / sizeof tcp_defs[0], m);
}

/* [udp]: the counters it shares with [tcp] (those that mean something
 * without a connection), then its own. */
static void udp_metrics_text(struct evbuffer *b, const gw_udp_metrics_t *m)
{
    static const char *const common[] = { "requests", "answers", "bad_mbap", "refused_allow", "unrouted",
                                          "read_only_refused", "cache_hits", "discarded" };
    static const report_metric_def_t own[] = {
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
                report_metric_header(b, "udp", &tcp_defs[i]);
                evbuffer_add_printf(b, "rtugw_udp_%s_total %llu\n", tcp_defs[i].name,
                                    (unsigned long long)report_field(&m->common, tcp_defs[i].offset));
            }
    report_metric_block(b, "udp", own, sizeof own / sizeof own[0], m);
}

#define SM(f, h) { #f, h, offsetof(gw_serial_slave_metrics_t, f), false }
static const report_metric_def_t serial_slave_defs[] = {
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

static void serial_slaves_metrics_text(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    gw_fronts_t f = gw_fronts(gw);
    if (!f.serial_slave_count)
        return;
    for (size_t i = 0; i < sizeof serial_slave_defs / sizeof serial_slave_defs[0]; i++) {
        const report_metric_def_t *d = &serial_slave_defs[i];
        report_metric_header(b, "serial_slave", d);
        for (unsigned k = 0; k < f.serial_slave_count; k++)
            evbuffer_add_printf(b, "rtugw_serial_slave_%s%s{name=\"%s\"} %llu\n", d->name, d->gauge ? "" : "_total",
                                serial_slave_name(f.serial_slaves[k]),
                                (unsigned long long)report_field(serial_slave_metrics(f.serial_slaves[k]), d->offset));
    }
}

static void tcp_status(void *ctx, struct evbuffer *b)
{
    tcp_status_json(gw_fronts(ctx).tcp, b);
}

/* [tcp]'s series are there at 0 when it is off; [rtu_tcp]'s and [udp]'s only when on. */
static void tcp_metrics_part(void *ctx, struct evbuffer *b)
{
    tcp_metrics_text(b, "tcp", tcp_metrics(gw_fronts(ctx).tcp));
}

static void rtu_tcp_metrics_part(void *ctx, struct evbuffer *b)
{
    gw_fronts_t f = gw_fronts(ctx);
    if (f.rtu_tcp)
        tcp_metrics_text(b, "rtu_tcp", tcp_metrics(f.rtu_tcp));
}

static void udp_metrics_part(void *ctx, struct evbuffer *b)
{
    gw_fronts_t f = gw_fronts(ctx);
    if (f.udp)
        udp_metrics_text(b, udp_metrics(f.udp));
}

gw_report_part_t front_report_tcp(gw_t *gw)
{
    return (gw_report_part_t){ .name = "tcp", .status_json = tcp_status, .metrics_text = tcp_metrics_part, .ctx = gw };
}

gw_report_part_t front_report_mbaps(gw_t *gw)
{
    return (gw_report_part_t){ .name = "tls", .metrics_text = mbaps_metrics_text, .ctx = gw };
}

gw_report_part_t front_report_rtu_tcp(gw_t *gw)
{
    return (gw_report_part_t){ .name = "rtu_tcp", .metrics_text = rtu_tcp_metrics_part, .ctx = gw };
}

gw_report_part_t front_report_udp(gw_t *gw)
{
    return (gw_report_part_t){ .name = "udp", .metrics_text = udp_metrics_part, .ctx = gw };
}

gw_report_part_t front_report_serial_slaves(gw_t *gw)
{
    return (gw_report_part_t){ .name = "serial_slaves", .metrics_text = serial_slaves_metrics_text, .ctx = gw };
}
