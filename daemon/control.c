/*
 * daemon/control.c -- the daemon's life after start-up: SIGHUP reloads the
 * configuration, SIGINT/SIGTERM (or gw_stop) stop it gracefully. Like gw.c
 * it sits above every part and may call any of them.
 *
 * Stopping: stop accepting, answer what is in flight (at most 1.8 s, within
 * the 2 s promise), then leave the loop; gw_run drains the actors.
 */
#include "daemon/internal.h"

#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    gw_t *gw = arg;
    (void)fd;
    (void)what;
    unsigned left = tcp_in_flight(gw->tcp) + tcp_in_flight(gw->rtu_tcp) + udp_in_flight(gw->udp) +
                    tag_writes_in_flight(gw->tag_writes);
    if (left == 0 || gw_now_ns() >= gw->drain_deadline_ns) {
        if (left)
            gw_log(gw, CONFIG_LOG_WARN, "stopping with %u requests unanswered after 2 s", left);
        loop_exit(gw->loop);
        return;
    }
    struct timeval tv = { 0, 10000 };
    evtimer_add(gw->ev_drain, &tv);
}

static void begin_drain(gw_t *gw)
{
    if (gw->draining)
        return;
    gw->draining = true;
    gw_notify("STOPPING=1");
    gw_log(gw, CONFIG_LOG_INFO, "stopping: no new connections, answering what is in flight");
    if (gw->tcp)
        tcp_stop_accepting(gw->tcp);
    if (gw->rtu_tcp)
        tcp_stop_accepting(gw->rtu_tcp);
    udp_stop_accepting(gw->udp);
    gw->drain_deadline_ns = gw_now_ns() + 1800000000ull;
    drain_check(-1, 0, gw);
}

/* The loop's wake hook: gw_stop() from another thread lands here. */
static void on_wake(void *ctx)
{
    gw_t *gw = ctx;
    if (atomic_load(&gw->stopping))
        begin_drain(gw);
}

/* The reload's outcome, for /status (last_reload) and /metrics: what the
 * parts applied, what waits (for a restart, then what is queued behind tag
 * writes), and systemd's STATUS= line. */
static void report(gw_t *gw, enum gw_reload_result result, const reload_result_t *res)
{
    gw_reload_report_t *r = &gw->last_reload;
    r->result = result;
    snprintf(r->applied, sizeof r->applied, "%s", res->applied);
    snprintf(r->waits, sizeof r->waits, "%s%s%s", res->restart, res->restart[0] && res->queued[0] ? " " : "",
             res->queued);
    if (res->error[0])
        snprintf(r->error, sizeof r->error, "%s", res->error);
    gw->reloads[result]++;
    /* systemctl status shows it: the last reload's verdict, what waits */
    char line[sizeof r->waits + 96];
    snprintf(line, sizeof line, "STATUS=last reload: %s%s%s", gw_reload_result_name(result), r->waits[0] ? "; waits: " : "",
             r->waits);
    gw_notify(line);
}

static void log_warning(void *ctx, const char *line)
{
    gw_log(ctx, CONFIG_LOG_WARN, "SIGHUP: %s", line);
}

static void reload(gw_t *gw)
{
    config_errors_t errs;

    if (!gw->opt.config_path) {
        gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: no configuration file to reload");
        return;
    }
    gw_notify("RELOADING=1");
    config_t *fresh = config_load_file_with(gw->opt.config_path, gw->opt.bus_rule, &errs);
    gw_notify("READY=1");
    /* a change queued behind tag writes is the file's: this reload reads it again */
    gw->reload_queued[0] = 0;
    memset(&gw->last_reload, 0, sizeof gw->last_reload);
    gw->last_reload.wall_ms = gw_wall_ms();
    config_file_revision(gw->opt.config_path, gw->last_reload.revision);
    if (!fresh) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s is not valid; keeping the running configuration:",
               gw->opt.config_path);
        for (unsigned i = 0; i < errs.count; i++)
            gw_log(gw, CONFIG_LOG_ERROR, "  %s", errs.text[i]);
        reload_result_t res = { .restart = "" };
        reload_error(&res, errs.count ? errs.text[0] : "the file cannot be read");
        report(gw, GW_RELOAD_INVALID, &res);
        return;
    }
    /* what check would say beside its verdict, said here too (in the log,
     * counted in /status last_reload.warnings) */
    gw->last_reload.warnings = config_lint(fresh, log_warning, gw);
    /* the file laid out in the running buses' slots (config/slots.c): a bus
     * is compared with, and keeps, its own slot whatever moved in the file */
    char err[192];
    if (config_buses_to_slots(fresh, gw->cfg, gw_bus_slot_free, gw, err, sizeof err) != 0) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; keeping the running configuration", err);
        reload_result_t res = { .restart = "" };
        reload_restart_add(&res, "buses");
        reload_error(&res, err);
        report(gw, GW_RELOAD_RESTART_NEEDED, &res);
        config_free(fresh);
        return;
    }
    /* Each part applies its own change (reload_parts.c argues each swap and
     * why the order matters); what cannot apply (a bind that fails, workers,
     * a bus that cannot start) is named in res's restart, and the log and
     * /status name it rather than pretending it was applied. */
    reload_result_t res = { .restart = "" };
    size_t count;
    const reload_part_t *parts = reload_parts(&count);
    for (size_t i = 0; i < count; i++) {
        gw_log(gw, CONFIG_LOG_DEBUG, "SIGHUP: %s", parts[i].name);   /* which part a line below came from */
        parts[i].fn(gw, gw->cfg, fresh, &res);
    }
    snprintf(gw->restart_needed, sizeof gw->restart_needed, "%s", res.restart);
    snprintf(gw->reload_queued, sizeof gw->reload_queued, "%s", res.queued);
    char dropped[64] = "";
    if (res.dropped)
        snprintf(dropped, sizeof dropped, " (%u more names than the lists hold: \"...\")", res.dropped);
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: reloaded %s: applied %s%s%s%s%s%s", gw->opt.config_path, res.applied, dropped,
           res.queued[0] ? "; queued until the tag writes in flight end: " : "", res.queued,
           res.restart[0] ? "; not applied until a restart: " : "", res.restart);
    report(gw, res.restart[0] ? GW_RELOAD_RESTART_NEEDED : res.queued[0] ? GW_RELOAD_QUEUED : GW_RELOAD_APPLIED, &res);
    config_free(fresh);
}

/* The last tag write in flight has ended: a change queued behind the
 * writes applies, from the loop (not inside the write's own answer). */
static void on_queued(evutil_socket_t fd, short what, void *arg)
{
    gw_t *gw = arg;
    (void)fd;
    (void)what;
    if (!gw->reload_queued[0] || gw->draining || tag_writes_in_flight(gw->tag_writes))
        return;
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: the tag writes in flight have ended: applying what was queued (%s)",
           gw->reload_queued);
    reload(gw);
}

static void writes_idle(gw_t *gw)
{
    if (gw->reload_queued[0] && gw->ev_queued)
        event_active(gw->ev_queued, EV_TIMEOUT, 1);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    gw_t *gw = arg;
    (void)what;
    if (sig == SIGHUP) {
        reload(gw);
        return;
    }
    atomic_store(&gw->stopping, 1);
    begin_drain(gw);
}

int control_start(gw_t *gw)
{
    struct event_base *base = loop_base(gw->loop);

    gw->reload = reload;
    gw->writes_idle = writes_idle;
    gw->ev_drain = evtimer_new(base, drain_check, gw);
    gw->ev_queued = evtimer_new(base, on_queued, gw);
    if (!gw->ev_drain || !gw->ev_queued)
        return -1;
    loop_on_wake(gw->loop, on_wake, gw);
    if (gw->opt.install_signals) {
        static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
        for (int i = 0; i < 3; i++) {
            gw->ev_signals[i] = evsignal_new(base, sigs[i], on_signal, gw);
            if (!gw->ev_signals[i] || event_add(gw->ev_signals[i], NULL) != 0)
                return -1;
        }
        signal(SIGPIPE, SIG_IGN);
    }
    return 0;
}

void control_stop(gw_t *gw)
{
    for (int i = 0; i < 3; i++)
        if (gw->ev_signals[i]) {
            event_free(gw->ev_signals[i]);
            gw->ev_signals[i] = NULL;
        }
    if (gw->ev_drain) {
        event_free(gw->ev_drain);
        gw->ev_drain = NULL;
    }
    gw->writes_idle = NULL;
    if (gw->ev_queued) {
        event_free(gw->ev_queued);
        gw->ev_queued = NULL;
    }
}
