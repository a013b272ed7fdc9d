/*
 * gateway/report_bus.c -- the buses' and their devices' part of /status
 * ("buses": each bus's counters, latency quantiles, mode and devices) and
 * of /metrics (rtugw_bus_*, rtugw_device_*). Everything read is a relaxed
 * atomic with one writer (the bus actor's line core, its port), the
 * driver's counters on the I/O thread, where this runs (report.h); the
 * bus count and the devices are read again at each call, as a reload may
 * change them. Each device's object ends with what the table's device
 * members add (the web side's tag counts).
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
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

/* The numbers of bus k and of its devices, folded for the ETag. */
static void fold_bus(gw_t *gw, unsigned k, uint64_t *h)
{
    const config_t *cfg = gw_config(gw);
    line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
    const atomic_uint_fast64_t *bus[] = { &m->port_up, &m->queue_depth, &m->requests, &m->responses,
                                          &m->timeouts, &m->crc_errors, &m->exceptions, &m->retries };
    for (size_t i = 0; i < sizeof bus / sizeof bus[0]; i++)
        report_fold(h, gw_read(bus[i]));
    for (unsigned i = 0; i < GW_LATENCY_BUCKETS; i++)
        report_fold(h, gw_read(&m->latency[i]));
    for (unsigned d = 0; d < cfg->device_count; d++) {
        if (cfg->devices[d].bus != k)
            continue;
        line_slave_metrics_t *sm = bus_slave_metrics(gw_bus(gw, k), cfg->devices[d].slave);
        const atomic_uint_fast64_t *dev[] = { &sm->dead, &sm->timeout_ms, &sm->requests, &sm->responses,
                                              &sm->timeouts, &sm->exceptions };
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            report_fold(h, gw_read(dev[i]));
        report_fold(h, gw_read(&sm->last_ok_ns) != 0);
    }
}

/* Config device d (on bus k) as an object of its bus's "devices". */
static void status_device(gw_t *gw, unsigned k, unsigned d, uint64_t now, struct evbuffer *b)
{
    const config_device_t *dev = &gw_config(gw)->devices[d];
    line_slave_metrics_t *sm = bus_slave_metrics(gw_bus(gw, k), dev->slave);
    uint64_t last = gw_read(&sm->last_ok_ns);
    evbuffer_add_printf(b, "{\"name\":");
    report_str(gw->report, b, dev->name);
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
    report_device_members(gw->report, d, b);
    evbuffer_add_printf(b, "}");
}

/* Bus k as an object of "buses", its devices in it. */
static void status_bus(gw_t *gw, unsigned k, uint64_t now, bool first, struct evbuffer *b)
{
    const config_bus_t *bc = bus_config(gw_bus(gw, k));
    line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
    evbuffer_add_printf(b, "%s{\"name\":", first ? "" : ",");
    report_str(gw->report, b, bc->name);
    evbuffer_add_printf(b, ",\"port\":");
    report_str(gw->report, b, gw_config(gw)->buses[k].port);   /* the running copy's: the line's own changes on its thread */
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
    bool first_dev = true;
    for (unsigned d = 0; d < gw_config(gw)->device_count; d++) {
        if (gw_config(gw)->devices[d].bus != k)
            continue;
        if (!first_dev)
            evbuffer_add_printf(b, ",");
        status_device(gw, k, d, now, b);
        first_dev = false;
    }
    evbuffer_add_printf(b, "]}");
}

/* ,"buses":[...]: each bus, its devices in it. */
static void buses_status(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    uint64_t now = gw_now_ns();
    evbuffer_add_printf(b, ",\"buses\":[");
    bool first = true;
    GW_FOR_EACH_BUS(gw, k) {
        status_bus(gw, k, now, first, b);
        first = false;
    }
    evbuffer_add_printf(b, "]");
}

/* The ETag's: every bus's and device's numbers, and each bus's mode and
 * listen members as bytes (the ages left out: only the clock moves them). */
static void buses_fold(void *ctx, uint64_t *h)
{
    gw_t *gw = ctx;
    struct evbuffer *parts = evbuffer_new();
    report_fold(h, gw_bus_count(gw));
    report_fold(h, gw_config(gw)->device_count);
    GW_FOR_EACH_BUS(gw, k) {
        fold_bus(gw, k, h);
        if (parts)
            listen_status_json(gw_bus(gw, k), parts);
    }
    if (!parts) {
        report_fold(h, gw_now_ns());   /* no memory to fold them: an ETag that matches nothing */
        return;
    }
    report_fold_bytes(h, evbuffer_pullup(parts, -1), evbuffer_get_length(parts));
    evbuffer_free(parts);
}

#define BM(f, h) { #f, h, offsetof(line_bus_metrics_t, f), false }
#define BG(f, h) { #f, h, offsetof(line_bus_metrics_t, f), true }
static const report_metric_def_t bus_defs[] = {
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
    BM(ambiguous, "Answers not delivered yet: a different second candidate followed, a copy to verify (I4), one to confirm after a give-up (I5), or a refusal that may be a widened attempt's; asked again or 0x0B"),
    BM(shaped, "Reads asked one register wider, so that no stale frame of their slave has their answer's shape (I6)"),
    BM(shape_refused, "Widened reads refused by the slave's map (0x02/0x03): asked again as they came, and its end learned"),
    BM(certified, "First answers after a give-up delivered without confirmation: no stale frame has their shape (I6)"),
    BM(misshapen, "Requests given up (0x0B) without a retry: their slave answered them in a shape no stale frame of it has"),
    BM(priority_holds, "Times the line waited for a priority master's next request before a normal one ([bus] priority_hold_us)"),
    BM(priority_hold_us, "Microseconds the line waited so (the cost to the normal class)"),
    BM(poll_turns, "Polls started ahead of waiting TCP requests: the polls' share of a busy bus ([bus] poll_share)"),
    BM(reconnect_holds, "Times the line was held quiet after a reconnect with answers owed from before it (I8)"),
    BM(gone_dropped, "Requests not sent: their client had gone"),
    BM(broadcast_refused, "Broadcasts refused: not a write"),
    BM(verify_mismatches, "Shadow verification mismatches against the reference decoder"),
    BM(reopen_attempts, "Port reopen attempts"),
    BG(queue_depth, "Requests waiting"),
    BG(port_up, "1 while the port is open"),
};

static void buses_metrics(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    for (size_t i = 0; i < sizeof bus_defs / sizeof bus_defs[0]; i++) {
        report_metric_header(b, "bus", &bus_defs[i]);
        GW_FOR_EACH_BUS(gw, k)
            evbuffer_add_printf(b, "rtugw_bus_%s%s{bus=\"%s\"} %llu\n", bus_defs[i].name,
                                bus_defs[i].gauge ? "" : "_total", bus_config(gw_bus(gw, k))->name,
                                (unsigned long long)report_field(bus_metrics(gw_bus(gw, k)), bus_defs[i].offset));
    }
    /* The transport layer's own count (ASCII, MBAP): its driver is read on
     * this thread, the I/O thread, which is also the only one that writes it. */
    evbuffer_add_printf(b, "# HELP rtugw_bus_frame_errors_total Frames the transport layer passed up damaged "
                           "(bad LRC or hex, a transaction id not in flight)\n"
                           "# TYPE rtugw_bus_frame_errors_total counter\n");
    GW_FOR_EACH_BUS(gw, k) {
        driver_stats_t st;
        bus_driver_stats(gw_bus(gw, k), &st);
        evbuffer_add_printf(b, "rtugw_bus_frame_errors_total{bus=\"%s\"} %llu\n", bus_config(gw_bus(gw, k))->name,
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
        GW_FOR_EACH_BUS(gw, k) {
            driver_stats_t st;
            bus_driver_stats(gw_bus(gw, k), &st);
            evbuffer_add_printf(b, "rtugw_bus_%s_total{bus=\"%s\"} %llu\n", transport[i].name,
                                bus_config(gw_bus(gw, k))->name, (unsigned long long)report_field(&st, transport[i].offset));
        }
    }
    evbuffer_add_printf(b, "# HELP rtugw_bus_latency_seconds Request to matching response, first attempt\n"
                           "# TYPE rtugw_bus_latency_seconds histogram\n");
    GW_FOR_EACH_BUS(gw, k) {
        line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
        const char *name = bus_config(gw_bus(gw, k))->name;
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
    GW_FOR_EACH_BUS(gw, k) {
        line_bus_metrics_t *m = bus_metrics(gw_bus(gw, k));
        const char *name = bus_config(gw_bus(gw, k))->name;
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
    GW_FOR_EACH_BUS(gw, k)
        evbuffer_add_printf(b, "rtugw_bus_requests_timed_total{bus=\"%s\"} %llu\n", bus_config(gw_bus(gw, k))->name,
                            (unsigned long long)gw_read(&bus_metrics(gw_bus(gw, k))->caused));
}

static void devices_metrics(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
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
        for (unsigned d = 0; d < gw_config(gw)->device_count; d++) {
            const config_device_t *dev = &gw_config(gw)->devices[d];
            line_slave_metrics_t *sm = bus_slave_metrics(gw_bus(gw, dev->bus), dev->slave);
            evbuffer_add_printf(b, "rtugw_device_%s%s{bus=\"%s\",device=\"%s\",slave=\"%u\"} %llu\n",
                                defs[i].name, defs[i].gauge ? "" : "_total", gw_config(gw)->buses[dev->bus].name,
                                dev->name, dev->slave, (unsigned long long)report_field(sm, defs[i].off));
        }
    }
}

gw_report_part_t gw_report_buses(gw_t *gw)
{
    return (gw_report_part_t){ .name = "buses", .status_json = buses_status, .status_fold = buses_fold,
                               .metrics_text = buses_metrics, .ctx = gw };
}

gw_report_part_t gw_report_devices(gw_t *gw)
{
    return (gw_report_part_t){ .name = "devices", .metrics_text = devices_metrics, .ctx = gw };
}
