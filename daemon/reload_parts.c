/*
 * daemon/reload_parts.c -- a reload, part by part: each part of the daemon
 * (the buses, the devices and their tags, the listeners, ...) has one
 * X_reload of one shape, which applies fresh's section to what runs and
 * says in res what it applied, what waits for a restart, what is queued
 * behind tag writes, and its first error. daemon/control.c loads and checks
 * the file, walks reload_parts() in order and reports res.
 *
 * The shape: X_reload(gw, run, fresh, res). run is the running copy
 * (gw->cfg): each part writes into it what now runs, so that /status and
 * the next reload compare against it; it is not const for that reason.
 * fresh is the file just loaded, freed after the walk: a part may swap an
 * array out of it (its old one is then freed with fresh). A part reads from
 * run and res what an earlier part left (the bus count the buses part
 * reached, the tags the devices part applied), never a flag passed aside,
 * so the table is the whole wiring of a reload.
 *
 * The order is the table's and matters: the buses before the devices (a
 * device on a bus that could not start waits), the devices, tags and polls
 * before the templates (which go with the tags where a tag changed) and
 * before the maps (rebuilt over the new tag table), the log level last (the
 * parts' lines go out at the level they ran under). I/O thread.
 */
#include "daemon/internal.h"

#include <stdlib.h>
#include <string.h>

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
 * named in res's restart, the reason in the log and res's error. Once a
 * context exists, tls and roles are named applied (as before this table).
 */
static void tls_not_applied(gw_t *gw, const char *key, const char *err, reload_result_t *res)
{
    reload_restart_add(res, key);
    gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; %s keeps its running value", err, key);
    reload_error(res, err);
}

static void take_roles(gw_t *gw, config_t *run, const config_t *fresh)
{
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

static void tls_apply(gw_t *gw, config_t *run, const config_t *fresh, reload_result_t *res)
{
    const config_tls_t *want = &fresh->tls;
    char err[512];
    config_tls_t was = run->tls;
    bool moved = want->enabled && (!was.enabled || strcmp(want->bind, was.bind) != 0 || want->port != was.port);
    take_roles(gw, run, fresh);
    if (!want->enabled && !was.enabled) {
        run->tls = *want;   /* nothing running uses them: the running copy just follows */
        return;
    }
    run->tls = *want;       /* mbaps_new, the module's role lookups and tcp_new read the running copy */
    bool made = want->enabled && !gw->mbaps;
    if (made && !(gw->mbaps = mbaps_new(gw, err, sizeof err))) {
        run->tls = was;
        tls_not_applied(gw, "tls.enabled", err, res);
        return;
    }
    if (want->enabled && !made && mbaps_reload(gw->mbaps, fresh) == 0 && gw->tcp)
        tcp_recheck_sessions(gw->tcp);   /* a new CRL revokes sessions already open, too */
    if (!gw->tcp && want->enabled) {
        if (!(gw->tcp = tcp_new(gw, err, sizeof err))) {
            run->tls = was;
            tls_not_applied(gw, "tls.enabled", err, res);
        }
        return;
    }
    if ((moved || !want->enabled) && gw->tcp && tcp_tls_listen(gw->tcp, gw->mbaps, want, err, sizeof err) != 0) {
        run->tls.enabled = was.enabled;
        memcpy(run->tls.bind, was.bind, sizeof run->tls.bind);
        run->tls.port = was.port;
        tls_not_applied(gw, was.enabled ? "tls.port" : "tls.enabled", err, res);
        return;
    }
    if (moved || want->enabled != was.enabled)
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: tls: %s%s:%u (open sessions stay)", want->enabled ? "listening on " : "off; was ",
               want->enabled ? want->bind : was.bind, want->enabled ? want->port : was.port);
}

static void tls_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    tls_apply(gw, run, fresh, res);
    if (gw->mbaps) {
        reload_applied_add(res, "tls");
        reload_applied_add(res, "roles");
    }
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
 */

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
                                const char **why, reload_result_t *res)
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
    buses_send_keys(gw);
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
        char line[sizeof err + 40];
        snprintf(line, sizeof line, "%s; nothing is polled until a restart", err);
        reload_error(res, line);
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

/*
 * [tcp] or [rtu_tcp] (section) to want: applied to its front end (its
 * listener moved, front/tcp_accept.c); a front end off at start and on now
 * is started (make reads gw->cfg, so *running takes want first, and is put
 * back when it cannot start). *running ends as what runs, so /status and
 * the next reload compare against it; res's restart names what could not
 * apply. The section is named applied (as before this table: what could
 * apply of it did).
 */
static void listener_reload(gw_t *gw, gw_tcp_t **front, config_tcp_t *running, const config_tcp_t *want,
                            gw_tcp_t *(*make)(gw_t *, char *, size_t), const char *section, reload_result_t *res)
{
    reload_applied_add(res, section);
    if (*front) {
        tcp_apply_config(*front, want, res);
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
        char key[32];
        snprintf(key, sizeof key, "%s.enabled", section);
        reload_restart_add(res, key);
        return;
    }
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: [%s] on: listening on %s:%u", section, want->bind, want->port);
}

/*
 * Serial slaves, live. One whose section is the same by value keeps its
 * object, its port and the question its master waits on. One removed or
 * changed is retired (front/serial_slave.c: it stops taking requests and
 * frees itself once nothing can reach it), and a new one starts from
 * fresh's section, on the port the old one may still be closing: a port that
 * cannot open yet reopens with back-off, as at a start. One that cannot be
 * made (out of memory, or more actors than the scheduler was sized for:
 * bus_count + serial slaves + 16 at the start) is logged and named in
 * res's restart; the others apply. Named applied when all did.
 */
static void serial_slaves_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    unsigned n = fresh->serial_slave_count, was = gw->serial_slave_count, count = 0;
    unsigned was_sections = run->serial_slave_count;
    bool all = true;
    if (config_same_serial_slaves(run, fresh))
        return;
    gw_serial_slave_t **next = calloc(n + 1, sizeof *next);
    bool *kept = calloc(was + 1, sizeof *kept);
    if (!next || !kept) {
        free(next);
        free(kept);
        reload_restart_add(res, "serial_slaves");
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
            char key[sizeof "serial_slaves." + sizeof fresh->serial_slaves[i].name];
            snprintf(key, sizeof key, "serial_slaves.%s", fresh->serial_slaves[i].name);
            reload_restart_add(res, key);
            all = false;
        }
        if (next[i])
            next[count++] = next[i];
    }
    free(kept);
    free(gw->serial_slaves);
    gw->serial_slaves = next;
    gw->serial_slave_count = count;
    config_serial_slave_t *old = run->serial_slaves;   /* freed with fresh */
    run->serial_slaves = fresh->serial_slaves;
    run->serial_slave_count = n;
    fresh->serial_slaves = old;
    fresh->serial_slave_count = was_sections;
    if (all)
        reload_applied_add(res, "serial_slaves");
}

/* [udp] the same way (front/udp.c, udp_apply_config, says what applies when). */
static void udp_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    const config_tcp_t *want = &fresh->udp;
    reload_applied_add(res, "udp");
    if (gw->udp) {
        udp_apply_config(gw->udp, want, res);
        run->udp = *udp_running_config(gw->udp);
        return;
    }
    config_tcp_t was = run->udp;
    run->udp = *want;
    if (!want->enabled)
        return;
    char err[256];
    if (!(gw->udp = udp_new(gw, err, sizeof err))) {
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: [udp]: %s", err);
        run->udp = was;
        reload_restart_add(res, "udp.enabled");
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
 * session alone). Named applied when it did; when the new settings cannot
 * start, the error is reported and the running ones kept, and mqtt waits
 * (unless what runs is what the file says, MQTT being off either way). */
static void mqtt_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    char err[320];
    if (same_mqtt(run, fresh))
        return;
    if (gw_north_reload(gw->north, fresh->mqtt_enabled ? &fresh->mqtt : NULL, err, sizeof err) == 0) {
        run->mqtt = fresh->mqtt;
        run->mqtt_enabled = fresh->mqtt_enabled;
        reload_applied_add(res, "mqtt");
        return;
    }
    gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; %s", err,
           gw_north_running(gw->north) ? "the [mqtt] before runs again" : "MQTT is off");
    reload_error(res, err);
    run->mqtt_enabled = gw_north_running(gw->north);
    if (!same_mqtt(run, fresh))
        reload_restart_add(res, "mqtt");
}



/* What of the devices, their tags and the poll groups differ, by value (a
 * section that only moved is unchanged). A device's change goes with the
 * tags: they name it, and MQTT announces both. */
typedef struct tag_change {
    bool polls;      /* the poll groups */
    bool devices;    /* the devices beyond what only their tags use */
    bool moved;      /* the devices at all */
    bool tag_defs;   /* the tags' definitions (or a device's tag keys alone) */
    bool tags;       /* the tag table is rebuilt */
} tag_change_t;

static tag_change_t tag_change(gw_t *gw, const config_t *run, const config_t *fresh)
{
    tag_change_t c = { .polls = !config_same_polls(run, fresh),
                       .devices = devices_differ_beyond_tags(run, fresh),
                       .moved = !config_same_devices(run, fresh) };
    c.tag_defs = !gw_tags_same(gw->tags, fresh->tags) || (!c.devices && c.moved);
    c.tags = c.tag_defs || c.moved;
    return c;
}

/*
 * The devices, tags and poll groups, one part (reload_polling has the
 * argument): applied live, queued behind tag writes in flight (the reload
 * runs again when the last ends: daemon/control.c), or waiting for a
 * restart, each named as such; where the buses part could not reach
 * fresh's bus count (a bus added that did not start, a removal behind tag
 * writes), they wait with it. The templates go with the tags when these
 * change (named applied here, then).
 */
static void devices_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    tag_change_t c = tag_change(gw, run, fresh);
    if (!c.tags && !c.polls)
        return;
    bool templates = !config_same_templates(run, fresh);
    const char *why = NULL;
    enum live how = reload_polling(gw, fresh, c.tags, c.polls,
                                   !buses_follow(run, fresh) ? "buses changed too" : NULL, &why, res);
    if (how == LIVE_APPLIED) {
        if (c.moved)
            reload_applied_add(res, "devices");
        if (c.tag_defs)
            reload_applied_add(res, "tags");
        if (c.polls)
            reload_applied_add(res, "polls");
        if (templates && c.tags)
            reload_applied_add(res, "templates");
        return;
    }
    /* named as restart_needed would name them */
    int (*name)(reload_result_t *, const char *) = how == LIVE_QUEUED ? reload_queued_add : reload_restart_add;
    if (c.devices)
        name(res, "devices");
    if (c.polls)
        name(res, "polls");
    if (c.tag_defs || (how == LIVE_QUEUED && !(c.devices || c.polls)))
        name(res, "tags");
    gw_log(gw, how == LIVE_QUEUED ? CONFIG_LOG_INFO : CONFIG_LOG_WARN, "SIGHUP: the %s changed but are not applied: %s",
           c.devices ? "devices" : c.tags && c.polls ? "tags and poll groups" : c.tags ? "tags" : "poll groups", why);
}

/* Templates are read only through the devices' tags and the API's lists:
 * where no tag changes (a template no device uses, added or removed) the
 * running copy takes them at once; else they went with the tags
 * (devices_reload), or wait with them. */
static void templates_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    if (config_same_templates(run, fresh) || tag_change(gw, run, fresh).tags)
        return;
    memcpy(run->templates, fresh->templates, sizeof fresh->templates);
    run->template_count = fresh->template_count;
    reload_applied_add(res, "templates");
}

/* [router] live: rebuilt and every bus restarted onto it (gateway/runtime.c);
 * named applied when rebuilt, waiting (with its reason) when it could not be. */
static void router_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    (void)run;   /* gw_router_reload compares with and writes the running copy itself */
    char err[256] = "";
    int rc = gw_router_reload(gw, &fresh->router, err, sizeof err);
    if (rc > 0)
        reload_applied_add(res, "router");
    if (rc < 0) {
        reload_restart_add(res, "router");
        reload_error(res, err);
        gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: %s", err);
    }
}

/* [http], every key live (daemon/gw.c, gw_http_reload, has the argument);
 * named applied while a server runs (or drains). */
static void http_part_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    (void)run;   /* gw_http_reload writes the running copy's [http] itself */
    gw_http_reload(gw, fresh, res);
    if (gw->http)
        reload_applied_add(res, "http");
}

/* The thread keys. Where the buses run is fixed at start (their actors'
 * hosts, the line loop made or not), and so is the workers' count: each
 * waits for a restart. The line thread's priority is its own to change
 * (loop_set_priority, from its own thread); the CPU latency request is the
 * process's (cpu_latency.c), replaced here. */
static void threads_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    if (run->workers != fresh->workers)
        reload_restart_add(res, "workers");
    if (run->line_thread != fresh->line_thread)
        reload_restart_add(res, "line_thread");
    if (run->buses_on_io_thread != fresh->buses_on_io_thread)
        reload_restart_add(res, "buses_on_io_thread");
    if (run->cpu_latency_us != fresh->cpu_latency_us) {
        char err[512];
        if (cpu_latency_hold(gw, fresh->cpu_latency_us, err, sizeof err) != 0) {
            gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; the request in force stays", err);
            reload_restart_add(res, "cpu_latency_us");
            reload_error(res, err);
        } else {
            if (fresh->cpu_latency_us < 0)
                gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: cpu_latency_us = off: no request held");
            run->cpu_latency_us = fresh->cpu_latency_us;
            reload_applied_add(res, "cpu_latency_us");
        }
    }
    if (run->line_thread_priority == fresh->line_thread_priority)
        return;
    if (gw->line_loop && loop_set_priority(gw->line_loop, fresh->line_thread_priority) != 0) {
        reload_restart_add(res, "line_thread_priority");
        return;
    }
    run->line_thread_priority = fresh->line_thread_priority;
    reload_applied_add(res, "line_thread_priority");
}

/* data_dirs: read on the I/O thread only (the API's confinement), where
 * this runs; every file the new file names was checked against fresh's. */
static void data_dirs_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    (void)gw;
    if (strcmp(run->data_dirs, fresh->data_dirs) == 0)
        return;
    memcpy(run->data_dirs, fresh->data_dirs, sizeof fresh->data_dirs);
    reload_applied_add(res, "data_dirs");
}

/* Maps apply live: rebuilt over the running tag table whenever they or the
 * tags changed (a tag's index moves with the table: devices_reload named
 * devices, tags or polls applied), nothing else touched. The running copy
 * takes fresh's maps first (gateway/vslave.c). */
static void maps_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    bool maps = !config_same_maps(run, fresh);
    bool live = reload_applied_has(res, "devices") || reload_applied_has(res, "tags") ||
                reload_applied_has(res, "polls");
    if (!maps && !live)
        return;
    config_map_t *old_maps = run->maps;
    unsigned old_count = run->map_count;
    run->maps = fresh->maps;
    run->map_count = fresh->map_count;
    if (vslave_rebuild(gw->maps, run) == 0) {
        fresh->maps = old_maps;   /* freed with fresh */
        fresh->map_count = old_count;
        if (maps)
            reload_applied_add(res, "maps");
        return;
    }
    run->maps = old_maps;
    run->map_count = old_count;
    if (maps)
        reload_restart_add(res, "maps");
    gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: maps: out of memory; the maps in force are kept");
}

/* [tcp] and [rtu_tcp]: listener_reload, each on its own front end. */
static void tcp_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    listener_reload(gw, &gw->tcp, &run->tcp, &fresh->tcp, tcp_new, "tcp", res);
}

static void rtu_tcp_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    listener_reload(gw, &gw->rtu_tcp, &run->rtu_tcp, &fresh->rtu_tcp, rtu_tcp_new, "rtu_tcp", res);
}

/* The log's level and target, last: each part's lines above went out at
 * the level the daemon ran under when the part ran. */
static void log_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    bool target = run->log_syslog != fresh->log_syslog;
    gw_log_configure(gw, fresh->log_level, fresh->log_syslog);
    reload_applied_add(res, "log_level");
    if (target)
        reload_applied_add(res, "log_target");
}

/* The parts, in the order a reload applies them (the top of this file says
 * why the order matters). */
static const reload_part_t parts[] = {
    { "buses", buses_reload },
    { "devices", devices_reload },
    { "templates", templates_reload },
    { "router", router_reload },
    { "http", http_part_reload },
    { "mqtt", mqtt_reload },
    { "threads", threads_reload },
    { "data_dirs", data_dirs_reload },
    { "udp", udp_reload },
    { "serial_slaves", serial_slaves_reload },
    { "maps", maps_reload },
    { "tcp", tcp_reload },
    { "rtu_tcp", rtu_tcp_reload },
    { "tls", tls_reload },
    { "log", log_reload },
};

const reload_part_t *reload_parts(size_t *count)
{
    *count = sizeof parts / sizeof parts[0];
    return parts;
}
