/*
 * daemon/gw.c -- puts the daemon together, runs it, takes it apart.
 *
 * Order matters: actors before the buses that spawn on them, bus actors
 * before their ports open (the I/O thread tells them the port's state), the
 * listeners last so no client arrives before there is a path for it. Apart
 * in reverse: stop accepting, answer what is in flight (control.c), drain
 * the actors, then free. This is the one file that knows every part.
 */
#include "daemon/internal.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void status_line(evutil_socket_t fd, short what, void *arg)
{
    gw_t *gw = arg;
    uint64_t req = 0, resp = 0, to = 0;
    unsigned up = 0, polls_ok = 0;
    (void)fd;
    (void)what;
    unsigned listed = 0;
    GW_FOR_EACH_BUS(gw, k) {
        line_bus_metrics_t *m = bus_metrics(gw->buses[k]);
        listed++;
        req += gw_read(&m->requests);
        resp += gw_read(&m->responses);
        to += gw_read(&m->timeouts);
        up += gw_read(&m->port_up) != 0;
    }
    polls_ok = cache_polls_ok(gw);
    fprintf(stderr, "\r\033[K[rtugw] buses up %u/%u | tcp %s:%u clients %llu | requests %llu responses %llu "
                    "timeouts %llu | polls ok %u/%u | %s://%s:%u/status",
            up, listed, gw->cfg->tcp.bind, gw->cfg->tcp.port,
            (unsigned long long)(gw->tcp ? gw_read(&tcp_metrics(gw->tcp)->active) : 0), (unsigned long long)req,
            (unsigned long long)resp, (unsigned long long)to, polls_ok, gw->cfg->poll_count,
            gw->cfg->http.tls_cert[0] ? "https" : "http", gw->cfg->http.bind, gw->cfg->http.port);
    fflush(stderr);
}

/* Front ends on serial ports of their own: after the buses they forward to. */
static int start_serial_slaves(gw_t *gw, char *err, size_t errcap)
{
    for (unsigned i = 0; i < gw->cfg->serial_slave_count; i++) {
        if (!(gw->serial_slaves[i] = serial_slave_new(gw, &gw->cfg->serial_slaves[i], err, errcap)))
            return -1;
        gw->serial_slave_count++;
    }
    return 0;
}

/* The poller, and who hears its reads, in this order: the cache, the tag
 * table, then MQTT (which reads the tags' new values back). */
static gw_poller_t *start_poller(gw_t *gw, char *err, size_t errcap)
{
    gw_poll_subscriber_t subs[GW_POLL_SUBSCRIBERS_MAX];
    unsigned n = 0;
    subs[n++] = cache_poll_subscriber(gw);
    subs[n++] = gw_tags_poll_subscriber(gw->tags);
    subs[n++] = gw_north_poll_subscriber(gw->north);   /* silent while [mqtt] is off */
    return poller_new(gw, subs, n, err, errcap);
}

/*
 * The parts /status and /metrics show (gateway/report.h), in the order of
 * their members and series; web/ only iterates this. The frame ring's
 * member comes before HTTPS's and its series after the logins', so it is
 * two entries. A part reads what a reload changes at each call, so the
 * table is built once, here.
 */
static gw_report_t *build_report(gw_t *gw)
{
    const gw_report_part_t parts[] = {
        gw_report_uptime(gw), cpu_latency_report(gw), gw_report_buses(gw), gw_report_listen(gw), gw_report_devices(gw),
        gw_report_polls(gw), front_report_tcp(gw), front_report_mbaps(gw), front_report_rtu_tcp(gw),
        front_report_udp(gw), front_report_serial_slaves(gw), gw_report_router(gw), gw_report_frame_ring(gw),
        web_report_http(gw), web_report_tls(gw), web_report_auth(gw), gw_report_frames(gw),
        gw_report_actors(gw), web_report_tags(gw), gw_report_north(gw), gw_report_maps(gw),
        gw_report_scans(gw), gw_report_reload(gw),
    };
    gw_report_t *r = report_new(parts, sizeof parts / sizeof parts[0], web_report_str);
    if (r)
        report_set_device_members(r, web_report_device_tags, gw);
    return r;
}

gw_t *gw_new(const config_t *cfg, const gw_options_t *opt)
{
    gw_t *gw = calloc(1, sizeof *gw);
    char err[512] = "";

    if (!gw || !(gw->cfg = config_copy(cfg))) {
        fprintf(stderr, "rtugw: out of memory\n");
        free(gw);
        return NULL;
    }
    gw->opt = *opt;
    gw->started_ns = gw_now_ns();
    gw->cpu_latency_fd = -1;
    if (cfg->log_syslog) {   /* opened before the first line */
        gw->cfg->log_syslog = false;
        gw_log_configure(gw, cfg->log_level, true);
    }
    int cache = cache_init(gw);
    /* sized for every bus a reload may add: the array never moves under a
     * reader on another thread (gateway/bus_restart.c) */
    gw->buses = calloc(CONFIG_MAX_BUSES + 1, sizeof *gw->buses);
    gw->serial_slaves = calloc(cfg->serial_slave_count + 1, sizeof *gw->serial_slaves);
    /* the actors and the router (gateway/runtime.c) before the buses */
    if (cache != 0 || !gw->buses || !gw->serial_slaves || gw_runtime_start(gw) != 0 ||
        !(gw->loop = loop_new(gw)) || (cfg->line_thread && cfg->bus_count && !(gw->line_loop = loop_new(gw)))) {
        gw_log(gw, CONFIG_LOG_ERROR, "cannot start: out of memory or threads");
        gw_free(gw);
        return NULL;
    }
    for (unsigned i = 0; i < cfg->bus_count; i++) {
        gw->buses[i] = bus_new(gw, i, err, sizeof err);
        if (!gw->buses[i]) {
            gw_log(gw, CONFIG_LOG_ERROR, "bus %s: %s", cfg->buses[i].name, err);
            gw_free(gw);
            return NULL;
        }
        gw->bus_count++;
        if (bus_start(gw->buses[i], gw->line_loop ? gw->line_loop : gw->loop) != 0) {
            gw_log(gw, CONFIG_LOG_ERROR, "bus %s: cannot start its actor or port", cfg->buses[i].name);
            gw_free(gw);
            return NULL;
        }
    }
    gw->config_put = web_config_put;   /* MQTT's config/set: the API's one write path */
    /* MQTT before the poller, whose answers it takes (set before they come) */
    /* tag writes: one per HTTP connection, and as many as one MQTT request may carry */
    /* the maps before any front end, which asks them for each unit */
    if (!(gw->tags = gw_tags_new(cfg, err, sizeof err)) || !(gw->maps = vslave_new(gw, err, sizeof err)) ||
        start_serial_slaves(gw, err, sizeof err) != 0 ||
        !(gw->tag_writes = tag_writes_new(gw, cfg->http.max_connections + GW_TAG_WRITES_MQTT)) ||
        !(gw->north = gw_north_new(gw, err, sizeof err)) ||   /* its session only with [mqtt] */
        !(gw->poller = start_poller(gw, err, sizeof err)) ||
        !(gw->scans = scans_new(gw)) ||
        (cfg->tls.enabled && !(gw->mbaps = mbaps_new(gw, err, sizeof err))) ||
        ((cfg->tcp.enabled || cfg->tls.enabled) && !(gw->tcp = tcp_new(gw, err, sizeof err))) ||
        (cfg->rtu_tcp.enabled && !(gw->rtu_tcp = rtu_tcp_new(gw, err, sizeof err))) ||
        (cfg->udp.enabled && !(gw->udp = udp_new(gw, err, sizeof err))) ||
        (cfg->http.enabled && !(gw->http = http_new(gw, NULL, err, sizeof err))) ||
        !(gw->report = build_report(gw)) || control_start(gw) != 0) {
        gw_log(gw, CONFIG_LOG_ERROR, "%s", err);
        gw_free(gw);
        return NULL;
    }
    for (unsigned i = 0; i < gw->bus_count; i++) {
        char desc[160];
        bus_describe(gw->buses[i], desc, sizeof desc);
        gw_log(gw, CONFIG_LOG_INFO, "bus %s: %s", cfg->buses[i].name, desc);
    }
    /* a front end that is off has no address: "modbus tls off 127.0.0.1:802"
     * read as a listener on 802 */
    char tcp[80] = "off", tls[80] = "off", http[80] = "off";
    if (cfg->tcp.enabled)
        snprintf(tcp, sizeof tcp, "%s:%u", cfg->tcp.bind, cfg->tcp.port);
    if (cfg->tls.enabled)
        snprintf(tls, sizeof tls, "%s:%u", cfg->tls.bind, cfg->tls.port);
    if (cfg->http.enabled)
        snprintf(http, sizeof http, "%s:%u", cfg->http.bind, cfg->http.port);
    gw_log(gw, CONFIG_LOG_INFO, "%u workers; modbus tcp %s; modbus tls %s; %s %s",
           gw_runtime_workers(gw), tcp, tls, cfg->http.tls_cert[0] ? "https" : "http", http);
    if (cfg->rtu_tcp.enabled)
        gw_log(gw, CONFIG_LOG_INFO, "rtu over tcp %s:%u", cfg->rtu_tcp.bind, cfg->rtu_tcp.port);
    return gw;
}

/* The HTTP server's drain has ended (web/http.c http_close): this runs from
 * event_base_once, on a turn of the I/O thread inside no event of the
 * server, so freeing it here frees nothing a running callback still holds.
 * A reload may have turned it on again meanwhile (http_reopen): then it
 * is no longer drained and stays. */
static void http_drained_cb(evutil_socket_t fd, short what, void *arg)
{
    gw_t *gw = arg;
    (void)fd;
    (void)what;
    if (!gw->http || !http_drained(gw->http))
        return;
    gw->frames_kept = http_release_frames(gw->http);   /* a bus actor may still hold them */
    http_free(gw->http);
    gw->http = NULL;
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: [http] closed: its last connection has ended");
}

/*
 * [http] on a reload (control.c), enabled included, both ways:
 * - running and still on: http_reload, every other key;
 * - on -> off: http_close; the server drains and is freed later
 *   (http_drained_cb). The running copy keeps the server's keys, with
 *   enabled false, so a turn back on compares against what h runs;
 * - off -> on while it still drains: it listens again (http_reopen) and
 *   http_reload applies the rest; off -> on with none: http_new, as at
 *   start, from fresh's [http]. A listener that cannot be bound keeps it
 *   off and names http.port (any other failure: http.enabled); the next
 *   reload tries again.
 * Off and staying off: the running copy just follows the file.
 */
void gw_http_reload(gw_t *gw, const config_t *fresh, reload_result_t *res)
{
    config_http_t *run = &gw->cfg->http;
    const config_http_t *f = &fresh->http;
    char err[320] = "";
    if (gw->http && !http_closing(gw->http) && f->enabled) {
        http_reload(gw->http, run, fresh, res);
    } else if (gw->http && !http_closing(gw->http)) {
        if (http_close(gw->http, run->request_timeout_ms, http_drained_cb, gw) == 0)
            run->enabled = false;
        else
            reload_restart_add(res, "http.enabled");   /* out of memory: it still listens; the next reload tries again */
    } else if (gw->http && f->enabled) {
        if (http_reopen(gw->http, f->bind, f->port, err, sizeof err) != 0) {
            reload_restart_add(res, "http.port");
            reload_error(res, err);
            return;
        }
        memcpy(run->bind, f->bind, sizeof run->bind);
        run->port = f->port;
        run->enabled = true;
        http_reload(gw->http, run, fresh, res);
    } else if (f->enabled) {
        config_http_t old = *run;
        *run = *f;   /* http_new reads the running copy, as at start */
        if (!(gw->http = http_new(gw, gw->frames_kept, err, sizeof err))) {
            bool port = strstr(err, "listen on") || strstr(err, "bind =");
            reload_restart_add(res, port ? "http.port" : "http.enabled");
            reload_error(res, err);
            *run = old;
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: [http] enabled = true not applied: %s", err);
            return;
        }
        gw->frames_kept = NULL;   /* the new server's now */
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: [http] enabled = true: %s on %s:%u", f->tls_cert[0] ? "https" : "http",
               f->bind, f->port);
    } else if (!gw->http) {
        *run = *f;   /* nothing runs that reads it: the running copy just follows */
    }
}

int gw_run(gw_t *gw)
{
    struct event *ev_status = NULL;
    if (gw->opt.status_line) {
        ev_status = event_new(loop_base(gw->loop), -1, EV_PERSIST, status_line, gw);
        struct timeval second = { 1, 0 };
        event_add(ev_status, &second);
    }
    /* The lines start after everything they may answer to exists, and
     * before the trim below: creating a thread faults in pages of the
     * dynamic linker and libc that the trim then gives back (+840 KiB of
     * VmRSS when the thread came after it). */
    if (gw->line_loop && loop_start_thread(gw->line_loop, "rtugw-line", gw->cfg->line_thread_priority) != 0) {
        gw_log(gw, CONFIG_LOG_ERROR, "cannot start the line thread");
        if (ev_status)
            event_free(ev_status);
        return 1;
    }
    char err[512];
    if (gw->cfg->cpu_latency_us >= 0 && cpu_latency_hold(gw, gw->cfg->cpu_latency_us, err, sizeof err) != 0)
        gw_log(gw, CONFIG_LOG_WARN, "%s; running without it", err);
    gw_notify("READY=1");
    gw_watchdog_start(gw);
    gw_log(gw, CONFIG_LOG_DEBUG, "start-up's pages of read-only segments given back: %zu KiB advised",
           gw_trim_resident());
    int rc = loop_run(gw->loop);
    tcp_stop_loops(gw->tcp);       /* the listeners' own loops read no client from now on, as the I/O loop */
    tcp_stop_loops(gw->rtu_tcp);
    loop_stop_thread(gw->line_loop);   /* the ports stop being read; their actors drain below */
    if (gw->line_loop)
        loop_release_host(gw->line_loop);
    if (ev_status) {
        event_free(ev_status);
        fputc('\n', stderr);
    }
    loop_release_host(gw->loop);   /* pinned bus actors drain on the workers */
    gw_runtime_drain(gw, 500000000ull);
    gw_runtime_save(gw);
    gw_log(gw, CONFIG_LOG_INFO, "stopped");
    return rc == 0 ? 0 : 1;
}

void gw_stop(gw_t *gw)
{
    atomic_store(&gw->stopping, 1);
    loop_wake(gw->loop);
}

void gw_free(gw_t *gw)
{
    if (!gw)
        return;
    tcp_stop_loops(gw->tcp);
    tcp_stop_loops(gw->rtu_tcp);
    loop_stop_thread(gw->line_loop);
    if (gw->loop)
        loop_release_host(gw->loop);
    if (gw->line_loop)
        loop_release_host(gw->line_loop);
    gw_runtime_drain(gw, 0);
    control_stop(gw);
    gw_north_free(gw->north);   /* actors are down: no poll answer is on its way */
    http_free(gw->http);
    frames_free(gw->frames_kept);   /* the actors are down: nobody records */
    tcp_free(gw->tcp);
    tcp_free(gw->rtu_tcp);
    udp_free(gw->udp);
    for (unsigned i = 0; i < gw->serial_slave_count; i++)
        serial_slave_free(gw->serial_slaves[i]);
    mbaps_free(gw->mbaps);   /* after the connections, which hold its contexts */
    poller_free(gw->poller);
    gw_tags_free(gw->tags);
    for (unsigned i = 0; gw->buses && i < CONFIG_MAX_BUSES; i++)   /* a bus a reload retires, too */
        bus_free(gw->buses[i]);
    loop_free(gw->line_loop);
    loop_free(gw->loop);
    scans_free(gw->scans);   /* the loops are gone: no scan answer is on its way */
    tag_writes_free(gw->tag_writes);   /* the loop has stopped: no outcome is on its way */
    vslave_free(gw->maps);   /* after the front ends and the writes that named it */
    gw_runtime_free(gw);
    cache_fini(gw);
    cpu_latency_drop(gw);
    report_free(gw->report);
    free(gw->buses);
    free(gw->serial_slaves);
    config_free(gw->cfg);
    free(gw);
}
