/*
 * config/slots.c -- a reload's file laid out in the running copy's bus slots.
 *
 * Why: the running buses are found by index (a device's bus, a unit route,
 * a role's buses, a request's line_request_t.bus, the per-bus tables of the
 * poller, the scans, the frame rings and the front ends' shares). When an
 * index was the bus's place in the file, a [bus] removed from the middle or
 * added before another made every later bus a different index: each was
 * restarted in place, its clients answered 0x0A/0x0B, though nothing of it
 * changed. Here the index is a slot: a bus keeps the slot it started in for
 * as long as it runs, whatever moves around it in the file; the file's
 * order is kept beside (bus_order) for what lists the buses.
 *
 * What it does to fresh (I/O thread, the reload, after the whole file is
 * checked and before any part compares it with run):
 *   - a bus whose name runs in run takes that slot (a rename is a removal
 *     and an addition: the new name's bus starts, the old one's stops);
 *   - a new bus takes the lowest slot that holds no bus in run, nor one
 *     that is leaving (a bus removed stays in its slot until the reload
 *     applies its removal), and that free_slot says is free: the daemon
 *     says no while a removed bus's slot may still be named by a request
 *     in flight on another thread (gateway/bus_restart.c's grace);
 *   - the table is laid out by slot (gaps zeroed: an empty name), and
 *     every index into it renumbered: devices' bus, the unit routes and
 *     default_bus of [tcp], [rtu_tcp], [udp] and each [serial_slave], and
 *     the roles' bus sets.
 * A file whose buses are those running in the same order is unchanged.
 */
#include "config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void renumber_routes(config_route_t *unit, const unsigned *slot, unsigned n)
{
    for (unsigned u = 0; u < 256; u++)
        if (unit[u].set && unit[u].bus < n)
            unit[u].bus = slot[unit[u].bus];
}

static void renumber_front(config_tcp_t *fe, const unsigned *slot, unsigned n)
{
    if (fe->default_bus < n)
        fe->default_bus = slot[fe->default_bus];
    renumber_routes(fe->unit, slot, n);
}

static void renumber_roles(config_t *cfg, const unsigned *slot, unsigned n)
{
    for (unsigned r = 0; r < cfg->role_count; r++) {
        uint8_t was[sizeof cfg->roles[r].buses];
        memcpy(was, cfg->roles[r].buses, sizeof was);
        memset(cfg->roles[r].buses, 0, sizeof was);
        for (unsigned b = 0; b < n; b++)
            if (was[b / 8] >> (b % 8) & 1)
                cfg->roles[r].buses[slot[b] / 8] |= (uint8_t)(1u << (slot[b] % 8));
    }
}

/* The slot of each of fresh's n buses into slot[]; -1 when one has none. */
static int place(const config_t *fresh, const config_t *run, bool (*free_slot)(void *, unsigned), void *ctx,
                 unsigned *slot)
{
    bool taken[CONFIG_MAX_BUSES] = { false };
    unsigned n = fresh->bus_count;
    for (unsigned b = 0; b < run->bus_count && b < CONFIG_MAX_BUSES; b++)
        taken[b] = run->buses[b].name[0] != '\0';   /* running, kept or leaving */
    for (unsigned i = 0; i < n; i++) {
        int b = config_find_bus(run, fresh->buses[i].name);
        slot[i] = b < 0 ? CONFIG_MAX_BUSES : (unsigned)b;
    }
    for (unsigned i = 0; i < n; i++) {
        if (slot[i] < CONFIG_MAX_BUSES)
            continue;
        for (unsigned b = 0; b < CONFIG_MAX_BUSES && slot[i] == CONFIG_MAX_BUSES; b++)
            if (!taken[b] && (!free_slot || free_slot(ctx, b)))
                slot[i] = b;
        if (slot[i] == CONFIG_MAX_BUSES)
            return -1;
        taken[slot[i]] = true;
    }
    return 0;
}

int config_buses_to_slots(config_t *fresh, const config_t *run, bool (*free_slot)(void *ctx, unsigned slot),
                          void *ctx, char *err, size_t errcap)
{
    unsigned n = fresh->bus_count, span = 0;
    unsigned slot[CONFIG_MAX_BUSES];
    if (fresh->bus_slotted || n > CONFIG_MAX_BUSES)
        return 0;   /* already laid out (or past what a file may hold: the check refused it) */
    if (place(fresh, run, free_slot, ctx, slot) != 0) {
        snprintf(err, errcap, "no free bus slot for a new bus: buses removed by the last reload are still "
                 "stopping; send SIGHUP again");
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        span = slot[i] + 1 > span ? slot[i] + 1 : span;
    config_bus_t *table = span ? calloc(span, sizeof *table) : NULL;
    if (span && !table) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        table[slot[i]] = fresh->buses[i];
        fresh->bus_order[i] = (uint8_t)slot[i];
    }
    free(fresh->buses);
    fresh->buses = table;
    fresh->bus_count = span;
    fresh->bus_listed = n;
    fresh->bus_slotted = true;
    for (unsigned d = 0; d < fresh->device_count; d++)
        if (fresh->devices[d].bus < n)
            fresh->devices[d].bus = slot[fresh->devices[d].bus];
    renumber_front(&fresh->tcp, slot, n);
    renumber_front(&fresh->rtu_tcp, slot, n);
    renumber_front(&fresh->udp, slot, n);
    for (unsigned s = 0; s < fresh->serial_slave_count; s++)
        renumber_routes(fresh->serial_slaves[s].unit, slot, n);
    renumber_roles(fresh, slot, n);
    return 0;
}
