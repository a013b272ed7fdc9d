/*
 * daemon/reload_buses.c -- the buses' part of a reload (reload_parts.c has
 * the shape and the order of the parts). I/O thread.
 *
 * The buses are compared by slot, not by their place in the file: the
 * reload laid fresh out in the running copy's slots first
 * (config_buses_to_slots, daemon/control.c), so a bus that runs in both
 * files is at the same index in both, whatever was added or removed before
 * it, and a bus that did not change is not touched. Slot by slot:
 *   - in both and the same: nothing, or only its live keys
 *     (response_timeout_ms, retries, gap_us, tcp_first, poll_share,
 *     priority_hold_us),
 *     which every line takes by message (apply_bus_keys);
 *   - in both, changed beyond those: its port or serial settings alone
 *     reopen the running line there (bus_port_change); any other change
 *     (framing, mode, queue_depth, copies, a listen:// port...) restarts
 *     that bus in place (gateway/bus_restart.c: its requests answered, the
 *     others untouched);
 *   - only in run: removed (bus_remove: its requests answered, the slot
 *     emptied, then free again after its grace);
 *   - only in fresh: added at that slot (bus_add), which config/slots.c
 *     chose free.
 * A renamed bus is a removal and an addition. What cannot apply is named in
 * res's restart and the running copy keeps what runs in that slot, so the
 * devices part (buses_follow) waits with it.
 */
#include "daemon/internal.h"

#include <stdlib.h>
#include <string.h>

/* Every line takes the running copy's keys (bus_set_keys); a bus restarting
 * in place takes them when it is made. */
void buses_send_keys(gw_t *gw)
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
    dst->poll_share = src->poll_share;
    dst->priority_hold_us = src->priority_hold_us;
}

static bool same_beyond_keys(const config_bus_t *x, config_bus_t y)
{
    take_line_keys(&y, x);
    return config_same_bus(x, &y);
}

bool buses_follow(const config_t *run, const config_t *fresh)
{
    unsigned n = run->bus_count > fresh->bus_count ? run->bus_count : fresh->bus_count;
    for (unsigned k = 0; k < n; k++)
        if (config_bus_live(run, k) != config_bus_live(fresh, k) ||
            (config_bus_live(run, k) && strcmp(run->buses[k].name, fresh->buses[k].name) != 0))
            return false;
    return true;
}

/* buses.NAME waits for a restart. */
static void bus_waits(reload_result_t *res, const char *name)
{
    char key[sizeof "buses." + sizeof ((config_bus_t *)0)->name];
    snprintf(key, sizeof key, "buses.%s", name);
    reload_restart_add(res, key);
}

/* A bus in both at slot k that changed beyond its live keys: reopened at its
 * new port, or restarted in place; the running copy takes the section first
 * (the new bus is made from it). 1: restarted; 0: reopened; -1: waits. */
static int follow(gw_t *gw, unsigned k, const config_t *fresh, reload_result_t *res)
{
    const config_bus_t *want = &fresh->buses[k];
    config_bus_t *r = &gw->cfg->buses[k];
    char err[256];
    if (bus_port_change_ok(r, want) && gw->buses[k] && bus_port_change(gw->buses[k], fresh, err, sizeof err) == 0) {
        memcpy((char *)r + sizeof r->name, (const char *)want + sizeof r->name, sizeof *r - sizeof r->name);
        gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s: reopening at port %s, %u baud", r->name, r->port, r->baud);
        return 0;
    }
    config_bus_t was = *r;
    *r = *want;
    if (bus_restart(gw, k, err, sizeof err) != 0) {
        *r = was;
        gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: %s; it waits for a restart", err);
        bus_waits(res, r->name);
        return -1;
    }
    gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s: restarting in place at its new settings", r->name);
    return 1;
}

/* The running copy's table grown to n slots (gaps zeroed). 0, or -1. */
static int grow(config_t *run, unsigned n)
{
    if (n <= run->bus_count)
        return 0;
    config_bus_t *next = calloc(n, sizeof *next);
    if (!next)
        return -1;
    if (run->bus_count)
        memcpy(next, run->buses, run->bus_count * sizeof *next);
    free(run->buses);
    run->buses = next;
    run->bus_count = n;
    return 0;
}

/* The running copy's order: fresh's, for the slots that hold a bus in run,
 * then those run keeps that fresh has not (a removal that waits). */
static void take_order(config_t *run, const config_t *fresh)
{
    bool listed[CONFIG_MAX_BUSES] = { false };
    unsigned n = 0;
    for (unsigned i = 0; i < config_bus_listed(fresh); i++) {
        unsigned k = config_bus_at(fresh, i);
        if (config_bus_live(run, k))
            run->bus_order[n++] = (uint8_t)k, listed[k] = true;
    }
    for (unsigned k = 0; k < run->bus_count && k < CONFIG_MAX_BUSES; k++)
        if (config_bus_live(run, k) && !listed[k])
            run->bus_order[n++] = (uint8_t)k;
    run->bus_listed = n;
    run->bus_slotted = true;
    while (run->bus_count && !run->buses[run->bus_count - 1].name[0])
        run->bus_count--;
}

/*
 * The buses, one part (the top of this file). A removal waits while a tag
 * write is in flight: the devices on the bus go only with the devices' own
 * reload, which such a write queues, and /status must not meet a device on
 * no bus. Named applied: buses (one restarted, added or removed), bus_keys
 * (a bus in both changed at all), bus_ports (and every such change followed).
 */
void buses_reload(gw_t *gw, config_t *run, config_t *fresh, reload_result_t *res)
{
    unsigned span = run->bus_count > fresh->bus_count ? run->bus_count : fresh->bus_count;
    bool writes = tag_writes_in_flight(gw->tag_writes);
    bool changed = false, keys = false, ports = false, followed = true;
    if (grow(run, span) != 0) {
        reload_restart_add(res, "buses");
        reload_error(res, "out of memory");
        return;
    }
    for (unsigned k = 0; k < span; k++) {
        bool had = config_bus_live(run, k), wants = config_bus_live(fresh, k);
        char err[256];
        if (had && wants) {
            keys |= !config_same_bus(&run->buses[k], &fresh->buses[k]);
            if (same_beyond_keys(&run->buses[k], fresh->buses[k]))
                continue;
            ports = true;
            int how = follow(gw, k, fresh, res);
            changed |= how > 0;
            followed &= how >= 0;
        } else if (had && writes) {
            gw_log(gw, CONFIG_LOG_WARN, "SIGHUP: bus %s removed waits: tag writes in flight; send SIGHUP again",
                   run->buses[k].name);
            reload_restart_add(res, "buses");
            followed = false;
        } else if (had) {
            gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s removed", run->buses[k].name);
            memset(&run->buses[k], 0, sizeof run->buses[k]);
            bus_remove(gw, k);
            changed = true;
        } else if (wants) {
            run->buses[k] = fresh->buses[k];
            if (bus_add(gw, fresh, k, err, sizeof err) != 0) {
                memset(&run->buses[k], 0, sizeof run->buses[k]);
                gw_log(gw, CONFIG_LOG_ERROR, "SIGHUP: bus %s: %s; it starts at the next restart", fresh->buses[k].name,
                       err);
                bus_waits(res, fresh->buses[k].name);
                followed = false;
                continue;
            }
            gw_log(gw, CONFIG_LOG_INFO, "SIGHUP: bus %s added", fresh->buses[k].name);
            changed = true;
        }
    }
    take_order(run, fresh);
    /* the live keys go to every line, not while a bus added or removed
     * could not follow: the keys then wait with it, as the devices do */
    keys &= buses_follow(run, fresh);
    if (keys) {
        for (unsigned k = 0; k < run->bus_count; k++)
            if (config_bus_live(run, k) && config_bus_live(fresh, k))
                take_line_keys(&run->buses[k], &fresh->buses[k]);
        buses_send_keys(gw);
    }
    if (changed)
        reload_applied_add(res, "buses");
    if (keys)
        reload_applied_add(res, "bus_keys");
    if (keys && ports && followed)
        reload_applied_add(res, "bus_ports");
}
