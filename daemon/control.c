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

/*
 * [tls] and the roles, every key live. Turned on: the context is made
 * (mbaps_new, from the running copy, which takes fresh's [tls] and roles
 * first) and its listener opened, on the Modbus TCP front end (made now if
 * [tcp] is off). Turned off: the listener closes; the sessions open go on
 * with their context until their clients close them, so gw->mbaps stays
 * (it is made once, freed at stop: bounded) and a later "on" reloads it.
 * Its files and settings: a new context for the next sessions (or the old
 * one stays, logged and counted: mbaps_reload), a new CRL rechecks those
 * open. bind and port: the new address is bound before the old closes
 * (tcp_tls_listen). The roles' names: each open session's role index is
 * mapped to the new set by name, and a session whose role is gone closes
 * (tcp_roles_changed); rights apply to the next request. What cannot apply
 * (a port in use, files that do not load at "on") keeps what runs and is
 * named in restart, the reason in the log and last_reload.error.
 */
/* A part's error into /status last_reload.error, unless an earlier part's is there. */
static void first_error(gw_t *gw, const char *err)
{
    if (!gw->last_reload.error[0])
        snprintf(gw->last_reload.error, sizeof gw->last_reload.error, "%s", err);
}

static void tls_not_applied(gw_t *gw, const char *key, const char *err, char *restart, size_t cap)
{
    size_t used = strlen(restart);
    snprintf(restart + used, cap - used, "%s%s", used ? " " : "", key);
    gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; %s keeps its running value", err, key);
    first_error(gw, err);
}

static void take_roles(gw_t *gw, const config_t *fresh)
{
    config_t *run = gw->cfg;
    int map[CONFIG_MAX_ROLES];
    bool same = run->role_count == fresh->role_count;
    for (unsigned i = 0; i < run->role_count; i++) {
        map[i] = config_role_find(fresh, run->roles[i].name);
        same = same && map[i] == (int)i;
    }
    if (!same && gw->tcp && gw->mbaps)
        tcp_roles_changed(gw->tcp, map);
    if (!same && gw->mbaps)
        mbaps_roles_remap(gw->mbaps, map, run->role_count);
    memcpy(run->roles, fresh->roles, sizeof run->roles);
    run->role_count = fresh->role_count;
}

static void reload_security(gw_t *gw, const config_t *fresh, char *restart, size_t cap)
{
    config_t *run = gw->cfg;
    const config_tls_t *want = &fresh->tls;
    char err[512];
    restart[0] = 0;
    config_tls_t was = run->tls;
    bool moved = want->enabled && (!was.enabled || strcmp(want->bind, was.bind) != 0 || want->port != was.port);
    take_roles(gw, fresh);
    if (!want->enabled && !was.enabled) {
        run->tls = *want;   /* nothing running uses them: the running copy just follows */
        return;
    }
    run->tls = *want;       /* mbaps_new, the module's role lookups and tcp_new read the running copy */
    bool made = want->enabled && !gw->mbaps;
    if (made && !(gw->mbaps = mbaps_new(gw, err, sizeof err))) {
        run->tls = was;
        tls_not_applied(gw, "tls.enabled", err, restart, cap);
        return;
    }
    if (want->enabled && !made && mbaps_reload(gw->mbaps, fresh) == 0 && gw->tcp)
        tcp_recheck_sessions(gw->tcp);   /* a new CRL revokes sessions already open, too */
    if (!gw->tcp && want->enabled) {
        if (!(gw->tcp = tcp_new(gw, err, sizeof err))) {
            run->tls = was;
            tls_not_applied(gw, "tls.enabled", err, restart, cap);
        }
        return;
    }
    if ((moved || !want->enabled) && gw->tcp && tcp_tls_listen(gw->tcp, gw->mbaps, want, err, sizeof err) != 0) {
        run->tls.enabled = was.enabled;
        memcpy(run->tls.bind, was.bind, sizeof run->tls.bind);
        run->tls.port = was.port;
        tls_not_applied(gw, was.enabled ? "tls.port" : "tls.enabled", err, restart, cap);
        return;
    }
    if (moved || want->enabled != was.enabled)
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: tls: %s%s:%u (open sessions stay)", want->enabled ? "listening on " : "off; was ",
               want->enabled ? want->bind : was.bind, want->enabled ? want->port : was.port);
}

/* Whether the devices differ in more than what only their tags use (order,
 * interval_ms, tags_file, template): those change with the tag table.
 * Compared by value (config_same_device): a section that only moved in the
 * file is the same device. */
static bool devices_differ_beyond_tags(const config_t *a, const config_t *b)
{
    if (a->device_count != b->device_count)
        return true;
    for (unsigned i = 0; i < a->device_count; i++) {
        config_device_t x = a->devices[i], y = b->devices[i];
        y.order = x.order;
        y.order_set = x.order_set;
        y.interval_ms = x.interval_ms;
        memcpy(y.tags_file, x.tags_file, sizeof y.tags_file);
        memcpy(y.template_name, x.template_name, sizeof y.template_name);
        y.template_index = x.template_index;
        if (!config_same_device(&x, &y))
            return true;
    }
    return false;
}

/*
 * Devices follow live, whatever changed: the line cores take each slave's
 * keys by message (bus_set_keys, line_keys_t), tags name their device and
 * poll groups are matched by device name (same_group), so a device removed
 * from the middle, which shifts the indices after it, leaves them as they
 * were. A device that now answers at another bus or slave id reads other
 * registers: its groups get fresh cache entries (same_group compares where
 * the device answers) and its tags start afresh (gw_tags_replace), and the
 * poller's new plan (a new generation) drops the answers still coming for
 * the old one, so no value read at the old place is shown as the new one's.
 *
 * The buses: a change only in the keys a running line takes
 * (response_timeout_ms, retries, gap_us, tcp_first, priority_hold_us)
 * applies live the same way, a port or its serial settings by port_swap,
 * and any other change restarts that bus in place (apply_buses,
 * gateway/bus_restart.c). Buses are compared by index: one removed from the
 * middle makes each bus after it the one before's successor, restarted in
 * place at its own settings (their clients see 0x0A/0x0B for the swap).
 */
/* Every line takes the running copy's keys (bus_set_keys); a bus restarting
 * in place takes them when it is made. */
static void send_keys(gw_t *gw)
{
    for (unsigned k = 0; k < gw->bus_count; k++)
        if (gw->buses[k] && !bus_retiring(gw->buses[k]) && bus_set_keys(gw->buses[k], gw->cfg) != 0)
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: bus %s: cannot tell its line the new keys (out of memory)",
                   gw->cfg->buses[k].name);
}

/* The [bus] keys a running line takes (line_keys_t), from src into dst. */
static void take_line_keys(config_bus_t *dst, const config_bus_t *src)
{
    dst->response_timeout_ms = src->response_timeout_ms;
    dst->retries = src->retries;
    dst->gap_us = src->gap_us;
    dst->tcp_first = src->tcp_first;
    dst->priority_hold_us = src->priority_hold_us;
}

static bool same_beyond_keys(const config_bus_t *x, config_bus_t y)
{
    take_line_keys(&y, x);
    return config_same_bus(x, &y);
}

/* Whether the buses differ in more than their live keys in a way no bus
 * can follow on its own: one added or removed. A change of one bus beyond
 * its keys follows (apply_buses); *changed says there is one. */
static bool buses_differ_beyond_keys(const config_t *a, const config_t *b, bool *changed)
{
    *changed = false;
    if (a->bus_count != b->bus_count)
        return true;
    for (unsigned i = 0; i < a->bus_count; i++)
        *changed |= !same_beyond_keys(&a->buses[i], b->buses[i]);
    return false;
}

/*
 * Each bus that changed beyond its live keys. A change of its port or serial
 * settings alone reopens the running line there (bus_port_change); any other
 * (framing, mode, queue_depth, copies, a listen:// port, its name...), or a
 * port change the running bus cannot take, restarts the bus in place
 * (gateway/bus_restart.c: its requests answered, the others untouched). The
 * running copy takes the section first: the new bus is made from it. One
 * that can do neither is named in restart.
 */
static unsigned apply_buses(gw_t *gw, const config_t *fresh, char *restart, size_t cap)
{
    size_t used = strlen(restart);
    unsigned restarted = 0;
    for (unsigned k = 0; k < gw->bus_count && k < fresh->bus_count; k++) {
        config_bus_t *r = &gw->cfg->buses[k];
        char err[256];
        if (same_beyond_keys(r, fresh->buses[k]))
            continue;
        if (bus_port_change_ok(r, &fresh->buses[k]) && bus_port_change(gw->buses[k], fresh, err, sizeof err) == 0) {
            memcpy((char *)r + sizeof r->name, (const char *)&fresh->buses[k] + sizeof r->name,
                   sizeof *r - sizeof r->name);
            gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s: reopening at port %s, %u baud", r->name, r->port, r->baud);
            continue;
        }
        config_bus_t was = *r;
        *r = fresh->buses[k];
        if (bus_restart(gw, k, err, sizeof err) != 0) {
            *r = was;
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; it waits for a restart", err);
            used += (size_t)snprintf(restart + used, used < cap ? cap - used : 0, "%sbuses.%s", used ? " " : "",
                                     r->name);
            continue;
        }
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s: restarting in place at its new settings%s%s", r->name,
               strcmp(was.name, r->name) ? ", renamed from " : "", strcmp(was.name, r->name) ? was.name : "");
        restarted++;
    }
    return restarted;
}

/*
 * Buses added at the end of the file start; buses gone from its end stop
 * (gateway/bus_restart.c: the others untouched, a removed one's requests
 * answered). The running copy's table takes fresh's length first (on this
 * thread: the line threads read their line's own copy, never this table),
 * its running entries kept. A removal waits while a tag write is in flight:
 * the devices on the bus go only with the devices' own reload, which such a
 * write queues, and /status must not meet a device on no bus. One that
 * cannot apply is named in restart. 0: applied.
 */
static int resize_buses(gw_t *gw, const config_t *fresh, char *restart, size_t cap)
{
    unsigned run = gw->cfg->bus_count, want = fresh->bus_count;
    size_t used = strlen(restart);
    char err[256] = "out of memory";
    if (want < run && tag_writes_in_flight(gw->tag_writes)) {
        snprintf(restart + used, used < cap ? cap - used : 0, "%sbuses", used ? " " : "");
        gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: a bus removed waits: tag writes in flight; send SIGHUP again");
        return -1;
    }
    for (; run > want; run--) {
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s removed", gw->cfg->buses[run - 1].name);
        bus_remove_last(gw);
        gw->cfg->bus_count = run - 1;
    }
    config_bus_t *next = want > run ? malloc(want * sizeof *next) : NULL;
    if (want > run && next) {
        memcpy(next, gw->cfg->buses, run * sizeof *next);
        memcpy(next + run, fresh->buses + run, (want - run) * sizeof *next);
        free(gw->cfg->buses);
        gw->cfg->buses = next;
    }
    for (; run < want; run++) {
        gw->cfg->bus_count = run + 1;
        if (!next || bus_add(gw, fresh, err, sizeof err) != 0) {
            gw->cfg->bus_count = run;
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: bus %s: %s; it starts at the next restart", fresh->buses[run].name,
                   err);
            snprintf(restart + used, used < cap ? cap - used : 0, "%sbuses.%s", used ? " " : "",
                     fresh->buses[run].name);
            return -1;
        }
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s added", fresh->buses[run].name);
    }
    return 0;
}

/* The buses' live keys into the running copy, then to every line. */
static void apply_bus_keys(gw_t *gw, const config_t *fresh)
{
    for (unsigned k = 0; k < gw->cfg->bus_count && k < fresh->bus_count; k++)
        take_line_keys(&gw->cfg->buses[k], &fresh->buses[k]);
    send_keys(gw);
}

/*
 * Tags and poll groups, live: the tag table rebuilt from the fresh
 * configuration, the groups and their cache entries swapped, the poller
 * planned again, MQTT told; the TCP front ends and the MQTT session are not
 * touched. Only where that is safe without stopping anything (gateway/tags.c):
 * the poller on the I/O thread (buses_on_io_thread), the buses and the
 * devices but for their tag keys unchanged, and no tag write in flight (it
 * holds a tag's index); otherwise *why says what stands in the way and they
 * wait for a restart, or, behind tag writes, are queued: the reload runs
 * again when the last write ends (writes_idle).
 */
enum live { LIVE_APPLIED, LIVE_QUEUED, LIVE_WAITS };

static enum live reload_polling(gw_t *gw, const config_t *fresh, bool tags, bool polls, const char *others,
                                const char **why)
{
    char err[320];
    size_t kept = 0;
    unsigned writes = tag_writes_in_flight(gw->tag_writes);

    *why = others ? others : !gw->cfg->buses_on_io_thread ? "buses_on_io_thread = false" : NULL;
    if (*why)
        return LIVE_WAITS;
    if (writes) {
        *why = "tag writes in flight: queued, applied when they end";
        return LIVE_QUEUED;
    }
    /* Added, removed, or changed in keys read here (devices_can_follow): the
     * running copy takes them all, before the tags map their device by name. */
    /* Under the cache's lock: the line thread's bus actors read the devices
     * there (cache.c, a write's answer), and the old table is freed. */
    /* the running groups name their devices by index into the devices
     * replaced here: a copy of those, to match groups by device name */
    config_t was = { .device_count = gw->cfg->device_count };
    was.devices = malloc((was.device_count + 1) * sizeof *was.devices);
    if (!was.devices) {
        *why = "out of memory";
        return LIVE_WAITS;
    }
    if (was.device_count)   /* a gateway without devices has none (NULL): memcpy must not be given it */
        memcpy(was.devices, gw->cfg->devices, was.device_count * sizeof *was.devices);
    if (cache_set_devices(gw, fresh) != 0) {
        free(was.devices);
        *why = "out of memory";
        return LIVE_WAITS;
    }
    /* the line cores' keys: each bus actor takes them in its own time */
    send_keys(gw);
    bool failed = (tags && gw_tags_replace(gw->tags, fresh, &was, &kept, err, sizeof err) != 0) ||
                  (polls && cache_swap_groups(gw, fresh, &was) != 0);
    free(was.devices);
    if (failed) {
        *why = "out of memory";   /* tags replaced, groups not: the replan below still matches both */
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: out of memory");
        polls = false;
        if (!tags)
            return LIVE_WAITS;
    }
    if (tags) {
        memcpy(gw->cfg->templates, fresh->templates, sizeof fresh->templates);
        gw->cfg->template_count = fresh->template_count;
    }
    if (poller_replan(gw->poller, polls, err, sizeof err) != 0) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; nothing is polled until a restart", err);
        snprintf(gw->last_reload.error, sizeof gw->last_reload.error, "%s; nothing is polled until a restart",
                 err);
    }
    if (gw->north && polls)
        gw_north_polls_changed(gw->north);
    if (gw->north && tags && gw_north_tags_changed(gw->north) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: mqtt: cannot announce the new tags (out of memory)");
    size_t n = gw_tags_count(gw->tags);
    if (tags)
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: tags applied: %zu tags, %zu of them unchanged (values kept)", n, kept);
    if (polls)
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: poll groups applied: %u groups", gw->cfg->poll_count);
    gw_log(gw, CONFIG_LOG_INFO, "poller: %u poll groups and %zu tags in %u reads", gw->cfg->poll_count, n,
           poller_read_count(gw->poller));
    return *why == NULL ? LIVE_APPLIED : LIVE_WAITS;
}

/* The reload's outcome, for /status (last_reload) and /metrics. */
static void report(gw_t *gw, enum gw_reload_result result, const char *applied, const char *restart)
{
    gw_reload_report_t *r = &gw->last_reload;
    r->result = result;
    snprintf(r->applied, sizeof r->applied, "%s", applied);
    snprintf(r->waits, sizeof r->waits, "%s%s%s", restart, restart[0] && gw->reload_queued[0] ? " " : "",
             gw->reload_queued);
    gw->reloads[result]++;
    /* systemctl status shows it: the last reload's verdict, what waits */
    char line[sizeof r->waits + 96];
    snprintf(line, sizeof line, "STATUS=last reload: %s%s%s", gw_reload_result_name(result), r->waits[0] ? "; waits: " : "",
             r->waits);
    gw_notify(line);
}

/*
 * [tcp] or [rtu_tcp] (section) to want: applied to its front end (its
 * listener moved, front/tcp_accept.c); a front end off at start and on now
 * is started (make reads gw->cfg, so *running takes want first, and is put
 * back when it cannot start). *running ends as what runs, so /status and
 * the next reload compare against it; restart names what could not apply.
 */
static void reload_listener(gw_t *gw, gw_tcp_t **front, config_tcp_t *running, const config_tcp_t *want,
                            gw_tcp_t *(*make)(gw_t *, char *, size_t), const char *section, char *restart,
                            size_t cap)
{
    restart[0] = 0;
    if (*front) {
        tcp_apply_config(*front, want, restart, cap);
        *running = *tcp_running_config(*front);
        return;
    }
    config_tcp_t was = *running;
    *running = *want;
    if (!want->enabled)
        return;
    char err[256];
    if (!(*front = make(gw, err, sizeof err))) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: [%s]: %s", section, err);
        *running = was;
        snprintf(restart, cap, "%s.enabled", section);
        return;
    }
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: [%s] on: listening on %s:%u", section, want->bind, want->port);
}

/* [udp] the same way (front/udp.c, udp_apply_config, says what applies when). */
/*
 * Serial slaves, live. One whose section is the same by value keeps its
 * object, its port and the question its master waits on. One removed or
 * changed is retired (front/serial_slave.c: it stops taking requests and
 * frees itself once nothing can reach it), and a new one starts from
 * fresh's section, on the port the old one may still be closing: a port that
 * cannot open yet reopens with back-off, as at a start. One that cannot be
 * made (out of memory, or more actors than the scheduler was sized for:
 * bus_count + serial slaves + 16 at the start) is logged and named in
 * restart; the others apply. I/O thread.
 */
static void reload_serial_slaves(gw_t *gw, config_t *fresh, char *restart, size_t cap)
{
    unsigned n = fresh->serial_slave_count, was = gw->serial_slave_count, count = 0;
    unsigned was_sections = gw->cfg->serial_slave_count;
    size_t used = 0;
    restart[0] = 0;
    if (config_same_serial_slaves(gw->cfg, fresh))
        return;
    gw_serial_slave_t **next = calloc(n + 1, sizeof *next);
    bool *kept = calloc(was + 1, sizeof *kept);
    if (!next || !kept) {
        free(next);
        free(kept);
        snprintf(restart, cap, "serial_slaves");
        return;
    }
    for (unsigned i = 0; i < n; i++)
        for (unsigned k = 0; k < was && !next[i]; k++)
            if (!kept[k] && config_same_serial_slave(serial_slave_config(gw->serial_slaves[k]), &fresh->serial_slaves[i]))
                next[i] = gw->serial_slaves[k], kept[k] = true;
    for (unsigned k = 0; k < was; k++)
        if (!kept[k])
            serial_slave_retire(gw->serial_slaves[k]);
    for (unsigned i = 0; i < n; i++) {
        char err[256];
        if (!next[i] && !(next[i] = serial_slave_new(gw, &fresh->serial_slaves[i], err, sizeof err))) {
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; it starts at the next restart", err);
            used += (size_t)snprintf(restart + used, used < cap ? cap - used : 0, "%sserial_slaves.%s",
                                     used ? " " : "", fresh->serial_slaves[i].name);
        }
        if (next[i])
            next[count++] = next[i];
    }
    free(kept);
    free(gw->serial_slaves);
    gw->serial_slaves = next;
    gw->serial_slave_count = count;
    config_serial_slave_t *old = gw->cfg->serial_slaves;   /* freed with fresh */
    gw->cfg->serial_slaves = fresh->serial_slaves;
    gw->cfg->serial_slave_count = n;
    fresh->serial_slaves = old;
    fresh->serial_slave_count = was_sections;
}

static void reload_udp(gw_t *gw, const config_tcp_t *want, char *restart, size_t cap)
{
    restart[0] = 0;
    if (gw->udp) {
        udp_apply_config(gw->udp, want, restart, cap);
        gw->cfg->udp = *udp_running_config(gw->udp);
        return;
    }
    config_tcp_t was = gw->cfg->udp;
    gw->cfg->udp = *want;
    if (!want->enabled)
        return;
    char err[256];
    if (!(gw->udp = udp_new(gw, err, sizeof err))) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: [udp]: %s", err);
        gw->cfg->udp = was;
        snprintf(restart, cap, "udp.enabled");
        return;
    }
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: [udp] on: listening on %s:%u", want->bind, want->port);
}

static bool same_mqtt(const config_t *a, const config_t *b)
{
    return a->mqtt_enabled == b->mqtt_enabled && memcmp(&a->mqtt, &b->mqtt, sizeof a->mqtt) == 0;
}

/* [mqtt] and Sparkplug, every key live: the session stops and one starts
 * at the new settings (gateway/north_session.c has the argument; nothing
 * else is touched, and a reload that leaves [mqtt] as it is leaves the
 * session alone). True when applied; false when unchanged, or when the new
 * settings cannot start (the error reported, the running ones kept). */

static bool reload_mqtt(gw_t *gw, const config_t *fresh)
{
    char err[320];
    if (same_mqtt(gw->cfg, fresh))
        return false;
    if (gw_north_reload(gw->north, fresh->mqtt_enabled ? &fresh->mqtt : NULL, err, sizeof err) == 0) {
        gw->cfg->mqtt = fresh->mqtt;
        gw->cfg->mqtt_enabled = fresh->mqtt_enabled;
        return true;
    }
    gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; %s", err,
           gw_north_running(gw->north) ? "the [mqtt] before runs again" : "MQTT is off");
    first_error(gw, err);
    gw->cfg->mqtt_enabled = gw_north_running(gw->north);
    return false;
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
        snprintf(gw->last_reload.error, sizeof gw->last_reload.error, "%s",
                 errs.count ? errs.text[0] : "the file cannot be read");
        report(gw, GW_RELOAD_INVALID, "", "");
        return;
    }
    /* what check would say beside its verdict, said here too (in the log,
     * counted in /status last_reload.warnings) */
    gw->last_reload.warnings = config_lint(fresh, log_warning, gw);
    char restart[512] = "", tcp_restart[64] = "", rtu_restart[64] = "", tls_restart[128] = "";
    size_t used = 0;
    /* Each part applies its own change below (each call argues its swap);
     * what cannot apply (a bind that fails, workers, a bus that cannot
     * start) is named in restart, and the log and /status name it rather
     * than pretending it was applied. */
#define CHANGED(name, cond)                                                                        \
    if (cond)                                                                                      \
        used += (size_t)snprintf(restart + used, used < sizeof restart ? sizeof restart - used : 0, \
                                 "%s%s", used ? " " : "", name)
    /* by value, not by line number: a section that only moved is unchanged */
    bool ports;
    bool buses = buses_differ_beyond_keys(gw->cfg, fresh, &ports);
    bool bus_keys = false;   /* among the buses in both: added and removed ones are resize_buses' */
    for (unsigned k = 0; k < gw->cfg->bus_count && k < fresh->bus_count; k++)
        bus_keys |= !config_same_bus(&gw->cfg->buses[k], &fresh->buses[k]);
    char ports_restart[160] = "";
    bool restarted = ports && apply_buses(gw, fresh, ports_restart, sizeof ports_restart) > 0;
    bool resized = buses && resize_buses(gw, fresh, ports_restart, sizeof ports_restart) == 0;
    buses &= !resized;
    bus_keys &= !buses;
    if (bus_keys)
        apply_bus_keys(gw, fresh);
    bool polls = !config_same_polls(gw->cfg, fresh);
    bool devices = devices_differ_beyond_tags(gw->cfg, fresh);
    /* a device's change goes with the tags: they name it, and MQTT announces both */
    bool devices_moved = !config_same_devices(gw->cfg, fresh);
    bool tag_defs = !gw_tags_same(gw->tags, fresh->tags) || (!devices && devices_moved);
    bool tags = tag_defs || devices_moved;
    /* Templates are read only through the devices' tags and the API's lists:
     * where no tag changes (a template no device uses, added or removed) the
     * running copy takes them at once; else they go with the tags. */
    bool templates = !config_same_templates(gw->cfg, fresh);
    const char *why = NULL;
    enum live how = !(tags || polls) ? LIVE_APPLIED
                  : reload_polling(gw, fresh, tags, polls, buses ? "buses changed too" : NULL, &why);
    bool live = (tags || polls) && how == LIVE_APPLIED, queued = (tags || polls) && how == LIVE_QUEUED;
    if (templates && !tags) {
        memcpy(gw->cfg->templates, fresh->templates, sizeof fresh->templates);
        gw->cfg->template_count = fresh->template_count;
    }
    CHANGED(ports_restart, ports_restart[0] != 0);
    CHANGED("devices", devices && !live && !queued);
    CHANGED("polls", polls && !live && !queued);
    CHANGED("tags", tag_defs && !live && !queued);
    if (queued)   /* named as restart_needed would name them */
        snprintf(gw->reload_queued, sizeof gw->reload_queued, "%s%s%s", devices ? "devices " : "",
                 polls ? "polls " : "", tag_defs || !(devices || polls) ? "tags " : "");
    gw->reload_queued[queued ? strlen(gw->reload_queued) - 1 : 0] = 0;   /* the last space */
    if ((tags || polls) && !live)
        gw_log(gw, queued ? CONFIG_LOG_INFO : CONFIG_LOG_WARN, "SIGHUP: the %s changed but are not applied: %s",
               devices ? "devices" : tags && polls ? "tags and poll groups" : tags ? "tags" : "poll groups", why);
    /* [router] live: rebuilt and every bus restarted onto it (gateway/runtime.c) */
    char router_err[256] = "";
    int router_rc = gw_router_reload(gw, &fresh->router, router_err, sizeof router_err);
    bool router = router_rc < 0;
    CHANGED("router", router);
    if (router) {
        first_error(gw, router_err);
        gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: %s", router_err);
    }
    char http_restart[96], http_err[320];
    gw_http_reload(gw, fresh, http_restart, sizeof http_restart, http_err, sizeof http_err);
    CHANGED(http_restart, http_restart[0] != 0);
    if (http_err[0])
        first_error(gw, http_err);
    bool mqtt = reload_mqtt(gw, fresh);
    CHANGED("mqtt", !mqtt && !same_mqtt(gw->cfg, fresh));
    CHANGED("workers", gw->cfg->workers != fresh->workers);
    /* Where the buses run is fixed at start (their actors' hosts, the line
     * loop made or not); the line thread's priority is its own to change. */
    CHANGED("line_thread", gw->cfg->line_thread != fresh->line_thread);
    CHANGED("buses_on_io_thread", gw->cfg->buses_on_io_thread != fresh->buses_on_io_thread);
    /* data_dirs: read on the I/O thread only (the API's confinement), where
     * this runs; every file the new file names was checked against fresh's */
    bool data_dirs = strcmp(gw->cfg->data_dirs, fresh->data_dirs) != 0;
    if (data_dirs)
        memcpy(gw->cfg->data_dirs, fresh->data_dirs, sizeof fresh->data_dirs);
    bool priority = gw->cfg->line_thread_priority != fresh->line_thread_priority;
    if (priority && gw->line_loop && loop_set_priority(gw->line_loop, fresh->line_thread_priority) != 0) {
        CHANGED("line_thread_priority", true);
        priority = false;
    } else if (priority) {
        gw->cfg->line_thread_priority = fresh->line_thread_priority;
    }
    char udp_restart[64];
    reload_udp(gw, &fresh->udp, udp_restart, sizeof udp_restart);
    CHANGED(udp_restart, udp_restart[0] != 0);
    bool serial_slaves = !config_same_serial_slaves(gw->cfg, fresh);
    char ss_restart[160];
    reload_serial_slaves(gw, fresh, ss_restart, sizeof ss_restart);
    CHANGED(ss_restart, ss_restart[0] != 0);
    /* Maps apply live: rebuilt over the running tag table whenever they or
     * the tags changed (a tag's index moves with the table), nothing else
     * touched. The running copy takes fresh's maps first (gateway/vslave.c). */
    bool maps = !config_same_maps(gw->cfg, fresh);
    if (maps || live) {
        config_map_t *old_maps = gw->cfg->maps;
        unsigned old_count = gw->cfg->map_count;
        gw->cfg->maps = fresh->maps;
        gw->cfg->map_count = fresh->map_count;
        if (vslave_rebuild(gw->maps, gw->cfg) == 0) {
            fresh->maps = old_maps;   /* freed with fresh */
            fresh->map_count = old_count;
        } else {
            gw->cfg->maps = old_maps;
            gw->cfg->map_count = old_count;
            CHANGED("maps", maps);
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: maps: out of memory; the maps in force are kept");
        }
    }
    reload_listener(gw, &gw->tcp, &gw->cfg->tcp, &fresh->tcp, tcp_new, "tcp", tcp_restart, sizeof tcp_restart);
    CHANGED(tcp_restart, tcp_restart[0] != 0);
    reload_listener(gw, &gw->rtu_tcp, &gw->cfg->rtu_tcp, &fresh->rtu_tcp, rtu_tcp_new, "rtu_tcp", rtu_restart,
                    sizeof rtu_restart);
    CHANGED(rtu_restart, rtu_restart[0] != 0);
    reload_security(gw, fresh, tls_restart, sizeof tls_restart);
    CHANGED(tls_restart, tls_restart[0] != 0);
#undef CHANGED
    bool log_target = gw->cfg->log_syslog != fresh->log_syslog;
    gw_log_configure(gw, fresh->log_level, fresh->log_syslog);
    snprintf(gw->restart_needed, sizeof gw->restart_needed, "%s", restart);
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: reloaded %s: applied the log level%s, [tcp], [rtu_tcp] and [udp]%s%s%s%s%s%s%s%s",
           gw->opt.config_path, log_target ? " and target" : "", gw->mbaps ? ", [tls] and the roles' rights" : "",
           mqtt ? ", [mqtt]" : "",
           bus_keys ? ", the buses' ports, timeouts and retries" : "",
           live ? ", the devices, tags and poll groups" : templates && !tags ? ", the templates" : "",
           queued ? "; queued until the tag writes in flight end: " : "", queued ? gw->reload_queued : "",
           restart[0] ? "; not applied until a restart: " : "", restart);
    char applied[192];
    snprintf(applied, sizeof applied, "log_level%s tcp rtu_tcp udp%s%s%s%s%s%s%s%s%s%s%s%s%s%s", log_target ? " log_target" : "",
             gw->http ? " http" : "",
             resized || restarted ? " buses" : "",
             serial_slaves && !ss_restart[0] ? " serial_slaves" : "", gw->mbaps ? " tls roles" : "", mqtt ? " mqtt" : "",
             bus_keys ? ports && !ports_restart[0] ? " bus_keys bus_ports" : " bus_keys" : "",
             live && devices_moved ? " devices" : "", live && tag_defs ? " tags" : "", live && polls ? " polls" : "",
             templates && (live || !tags) ? " templates" : "", maps && !strstr(restart, "maps") ? " maps" : "",
             router_rc > 0 ? " router" : "", priority ? " line_thread_priority" : "", data_dirs ? " data_dirs" : "");
    report(gw, restart[0] ? GW_RELOAD_RESTART_NEEDED : queued ? GW_RELOAD_QUEUED : GW_RELOAD_APPLIED, applied,
           restart);
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
