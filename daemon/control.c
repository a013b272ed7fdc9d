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
    unsigned left = tcp_in_flight(gw->tcp) + tcp_in_flight(gw->rtu_tcp) + tag_writes_in_flight(gw->tag_writes);
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

/*
 * [tls] and the roles. With TLS running: the files and settings make a new
 * context for the next connections (or the old one stays, logged), rights
 * apply to the next request; the listener and the set of role names (a
 * connection holds its role's index) need a restart, named in restart.
 */
static void reload_security(gw_t *gw, const config_t *fresh, char *restart, size_t cap)
{
    config_t *run = gw->cfg;
    bool same_roles = run->role_count == fresh->role_count;
    size_t used = 0;

    for (unsigned i = 0; same_roles && i < fresh->role_count; i++)
        same_roles = strcmp(run->roles[i].name, fresh->roles[i].name) == 0;
    restart[0] = 0;
#define NEEDS_RESTART(cond, key)                                                                 \
    if (cond)                                                                                    \
        used += (size_t)snprintf(restart + used, used < cap ? cap - used : 0, "%s%s", used ? " " : "", key)
    NEEDS_RESTART(fresh->tls.enabled != run->tls.enabled, "tls.enabled");
    if (!gw->mbaps) {
        /* Nothing running uses them: the running copy just follows. */
        bool enabled = run->tls.enabled;
        run->tls = fresh->tls;
        run->tls.enabled = enabled;
        memcpy(run->roles, fresh->roles, sizeof run->roles);
        run->role_count = fresh->role_count;
        return;
    }
    NEEDS_RESTART(strcmp(fresh->tls.bind, run->tls.bind) != 0, "tls.bind");
    NEEDS_RESTART(fresh->tls.port != run->tls.port, "tls.port");
    NEEDS_RESTART(!same_roles, "roles");
#undef NEEDS_RESTART
    if (same_roles)
        memcpy(run->roles, fresh->roles, sizeof run->roles);
    if (!fresh->tls.enabled || mbaps_reload(gw->mbaps, fresh) != 0)
        return;
    if (gw->tcp)
        tcp_recheck_sessions(gw->tcp);   /* a new CRL revokes sessions already open, too */
    config_tls_t next = fresh->tls;
    next.enabled = run->tls.enabled;
    memcpy(next.bind, run->tls.bind, sizeof next.bind);
    next.port = run->tls.port;
    if (!same_roles)
        next.default_role = run->tls.default_role;   /* an index into the roles still running */
    run->tls = next;
}

static void reload(gw_t *gw)
{
    config_errors_t errs;

    if (!gw->opt.config_path) {
        gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: no configuration file to reload");
        return;
    }
    gw_notify("RELOADING=1");
    config_t *fresh = config_load_file(gw->opt.config_path, &errs);
    gw_notify("READY=1");
    if (!fresh) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s is not valid; keeping the running configuration:",
               gw->opt.config_path);
        for (unsigned i = 0; i < errs.count; i++)
            gw_log(gw, CONFIG_LOG_ERROR, "  %s", errs.text[i]);
        return;
    }
    char restart[512] = "", tcp_restart[256] = "", tls_restart[128] = "";
    size_t used = 0;
    /* Buses, devices, poll groups, tags, the router and HTTP are owned by running
     * actors and listeners: a change there needs a restart, and the log and
     * /status name each one rather than pretending it was applied. */
#define CHANGED(name, cond)                                                                        \
    if (cond)                                                                                      \
        used += (size_t)snprintf(restart + used, used < sizeof restart ? sizeof restart - used : 0, \
                                 "%s%s", used ? " " : "", name)
    CHANGED("buses", gw->cfg->bus_count != fresh->bus_count ||
                         (fresh->bus_count && memcmp(gw->cfg->buses, fresh->buses, fresh->bus_count * sizeof *fresh->buses) != 0));
    CHANGED("devices", gw->cfg->device_count != fresh->device_count ||
                           (fresh->device_count && memcmp(gw->cfg->devices, fresh->devices, fresh->device_count * sizeof *fresh->devices) != 0));
    CHANGED("polls", gw->cfg->poll_count != fresh->poll_count ||
                         (fresh->poll_count && memcmp(gw->cfg->polls, fresh->polls, fresh->poll_count * sizeof *fresh->polls) != 0));
    CHANGED("tags", !gwtags_same(gw->tags, fresh->tags));
    CHANGED("router", memcmp(&gw->cfg->router, &fresh->router, sizeof fresh->router) != 0);
    CHANGED("http", memcmp(&gw->cfg->http, &fresh->http, sizeof fresh->http) != 0);
    CHANGED("mqtt", gw->cfg->mqtt_enabled != fresh->mqtt_enabled ||
                        memcmp(&gw->cfg->mqtt, &fresh->mqtt, sizeof fresh->mqtt) != 0);
    CHANGED("workers", gw->cfg->workers != fresh->workers);
    CHANGED("log_target", gw->cfg->log_syslog != fresh->log_syslog);
    CHANGED("rtu_tcp", memcmp(&gw->cfg->rtu_tcp, &fresh->rtu_tcp, sizeof fresh->rtu_tcp) != 0);
    CHANGED("serial_slaves", gw->cfg->serial_slave_count != fresh->serial_slave_count ||
                                 (fresh->serial_slave_count && memcmp(gw->cfg->serial_slaves, fresh->serial_slaves, fresh->serial_slave_count * sizeof *fresh->serial_slaves) != 0));
    if (gw->tcp)
        tcp_apply_config(gw->tcp, &fresh->tcp, tcp_restart, sizeof tcp_restart);
    CHANGED(tcp_restart, tcp_restart[0] != 0);
    reload_security(gw, fresh, tls_restart, sizeof tls_restart);
    CHANGED(tls_restart, tls_restart[0] != 0);
#undef CHANGED
    gw->cfg->log_level = fresh->log_level;
    /* The running copy keeps what did not apply, so /status and the next
     * reload compare against what is really running. */
    config_tcp_t tcp_now = fresh->tcp;
    if (tcp_restart[0]) {
        tcp_now.enabled = gw->cfg->tcp.enabled;
        memcpy(tcp_now.bind, gw->cfg->tcp.bind, sizeof tcp_now.bind);
        tcp_now.port = gw->cfg->tcp.port;
        tcp_now.max_pending = gw->cfg->tcp.max_pending;
    }
    gw->cfg->tcp = tcp_now;
    snprintf(gw->restart_needed, sizeof gw->restart_needed, "%s", restart);
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: reloaded %s: applied the log level and [tcp]%s%s%s", gw->opt.config_path,
           gw->mbaps ? ", [tls] and the roles' rights" : "", restart[0] ? "; not applied until a restart: " : "",
           restart);
    config_free(fresh);
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

    gw->ev_drain = evtimer_new(base, drain_check, gw);
    if (!gw->ev_drain)
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
}
