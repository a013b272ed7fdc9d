/*
 * gateway/bus_restart.c -- a bus restarted in place by a reload: a change of
 * a [bus] that its running line cannot take (framing, mode, queue_depth,
 * copies, a listen:// port, its name...) retires the bus's actor, line and
 * port and starts a new bus in the same slot from the running copy's
 * section (gw->cfg->buses[slot], which the reload set first). Every other
 * bus, TCP connection and MQTT session is untouched; the poller's groups on
 * it name the bus by slot, so they go on with the new one. A bus added or
 * removed live is below (bus_add, bus_remove), with the slot's grace.
 *
 * Who owns what, in order:
 *  1. bus_restart (I/O thread, the reload): the old bus is marked retiring
 *     and its actor stopped (bus_retire). Its slot in gw->buses still holds
 *     it: a request sent to it now is refused by the actor system and
 *     answered 0x0B (bus_submit, counted in bus_refused; logged below), so
 *     nothing waits on a bus that is going. Every request accepted before the
 *     stop reaches its line first (the mailbox is FIFO); then ACTOR_STOPPED
 *     tells the line its port is gone, and the line answers the question in
 *     flight and every queued one 0x0A, its rule for a lost port: every
 *     request the old line accepted gets exactly one answer, from it.
 *  2. close_here (bus.c, on the port's loop): the port is freed on its own
 *     thread (the writes the actor posted before it stopped run first:
 *     posts are FIFO), then swap_here is posted to the I/O thread.
 *  3. swap_here (I/O thread): the old driver is freed (a dial-in bus leaves
 *     its hub, so the new one can join it with the same registration; a
 *     serial device is closed before it is opened again: one master on the
 *     wire at a time), the new bus is made from the running copy and its
 *     actor spawned; it holds the requests that come until its port (made
 *     on the port's loop, open_here) first says up or down, at most a
 *     response timeout. Then the slot takes it (release store), and the old
 *     bus is freed on the port's loop (free_here).
 *
 * Why no answer of the old bus can reach a request of the new: a request
 * is one message to one actor. The old line answers only the requests it
 * took from its own mailbox, all sent before its stop; the new bus's line
 * takes only messages sent to the new actor, which exists only once the old
 * port is closed, with a port and a framer of its own, so no byte the old
 * port read can be fed to it. The origins (front ends, the poller) tell their
 * answers apart by their own sequence numbers, as on any bus.
 *
 * Why the old bus is not freed under a reader: the slot is read by the I/O
 * thread (front ends, the poller, /status and /metrics: the same thread that
 * swaps it, so never mid-swap) and, through gw_submit, by the serial slaves'
 * actors on the port's loop (acquire load). A reader there that loaded the
 * old pointer is inside one callback of that loop; free_here is posted to
 * the same loop after the swap, so it runs after that callback, and any
 * later callback loads the new pointer. Only where every one of those runs
 * on the I/O or the port's loop ([gateway] buses_on_io_thread): elsewhere the
 * reload names the bus in restart_needed (daemon/control.c).
 */
#include "gateway/wiring.h"

#include <event2/event.h>
#include <stdio.h>

/*
 * Whether slot i may be given to a new bus (config/slots.c asks, on the
 * I/O thread). A slot is a bus's name on every path a request takes, so it
 * must name no other bus while anything could still hold it for the old
 * one. Who holds a slot:
 *   - the I/O thread's request paths (Modbus TCP, RTU over TCP, TLS, UDP,
 *     HTTP and MQTT writes, the poller, the scans) resolve it from the
 *     running tables and submit in the same callback; the reload runs on
 *     the same thread, between callbacks, and renumbers those tables, so
 *     none of them holds a slot across a reload. An answer carries its
 *     request's slot back (the front ends' shares, the poller's places),
 *     but every answer of a removed bus reaches its origin before the slot
 *     is emptied (swap_here runs after the line answered every request it
 *     took, posted behind those answers).
 *   - a serial slave resolves it from routes fixed for the object's life
 *     (a change of them retires the object: front/serial_slave.c), on the
 *     line thread where there is one. A serial slave routed to a removed
 *     bus is retired by the same reload (its routes name a bus no longer
 *     in the file, so they changed), but one of its callbacks may have
 *     begun before the retire and still be on its way to gw_submit. So an
 *     emptied slot has a grace: a message posted to the line thread and
 *     back; every callback that began there before it has ended when it
 *     comes back, and only then is the slot free (loops run one callback
 *     at a time, and post in order).
 * Without a line thread the serial slaves run on the I/O thread: no grace.
 */
static void grace_done(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_t *gw = ctx;
    (void)b, (void)data, (void)len;
    gw->slot_grace[a] = false;
}

static void grace_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_t *gw = ctx;
    (void)b, (void)data, (void)len;
    if (loop_post(gw->loop, grace_done, gw, a, 0, NULL, 0) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "bus slot %u stays out of use until a restart (out of memory)", (unsigned)a);
}

static void slot_emptied(gw_t *gw, unsigned i)
{
    if (!gw->line_loop)
        return;
    gw->slot_grace[i] = true;
    if (loop_post(gw->line_loop, grace_here, gw, i, 0, NULL, 0) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "bus slot %u stays out of use until a restart (out of memory)", i);
}

bool gw_bus_slot_free(void *ctx, unsigned i)
{
    gw_t *gw = ctx;
    return i < CONFIG_MAX_BUSES && !gw->buses[i] && !gw->slot_grace[i];
}

static void free_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    (void)a, (void)b, (void)data, (void)len;
    bus_free(ctx);
}

static void swap_here(void *ctx, uint64_t a, uint32_t b, const uint8_t *data, size_t len)
{
    gw_bus_t *old = ctx;
    gw_t *gw = (gw_t *)(uintptr_t)a;
    unsigned i = bus_slot(old);
    char err[256] = "out of memory";
    (void)b, (void)data, (void)len;
    bus_drop_driver(old);
    if (bus_removed(old)) {
        /* every reader that loaded the count before it dropped is done (the argument above) */
        if (__atomic_load_n(&gw->buses[i], __ATOMIC_RELAXED) == old) {
            __atomic_store_n(&gw->buses[i], NULL, __ATOMIC_RELEASE);
            slot_emptied(gw, i);
        }
        if (loop_post(bus_home(old), free_here, old, 0, 0, NULL, 0) != 0)
            gw_log(gw, CONFIG_LOG_ERROR, "a removed bus's memory stays until a restart (out of memory)");
        return;
    }
    gw_bus_t *nb = bus_new(gw, i, err, sizeof err);
    if (!nb || bus_start_in_place(nb, gw->line_loop ? gw->line_loop : gw->loop) != 0) {
        bus_free(nb);   /* bus_start_in_place fails only before its actor is spawned */
        gw_log(gw, CONFIG_LOG_ERROR, "bus %s: cannot start at its new settings: %s; it answers 0x0B until a "
               "restart", gw->cfg->buses[i].name, err);
        return;
    }
    __atomic_store_n(&gw->buses[i], nb, __ATOMIC_RELEASE);
    gw_log(gw, CONFIG_LOG_INFO, "bus %s: restarted at its new settings (%llu requests answered 0x0B while it "
           "changed)", gw->cfg->buses[i].name, (unsigned long long)bus_refused(old));
    if (loop_post(bus_home(old), free_here, old, 0, 0, NULL, 0) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "bus %s: the retired bus's memory stays until a restart (out of memory)",
               gw->cfg->buses[i].name);
}

/* swap_here from the I/O loop's own thread is deferred to its next turn:
 * close_here may run inside the old actor's last call (the port's loop is
 * the I/O loop when there is no line thread, and a device bus's with no
 * wire always: bus.c's bus_loop_for), which must not free it. */
static void swap_deferred(evutil_socket_t fd, short what, void *ctx)
{
    gw_bus_t *old = ctx;
    (void)fd, (void)what;
    swap_here(old, (uint64_t)(uintptr_t)bus_gw(old), 0, NULL, 0);
}

static void closed(gw_bus_t *old)
{
    gw_t *gw = bus_gw(old);
    static const struct timeval now = { 0, 0 };
    int rc = loop_is_current(gw->loop)
                 ? event_base_once(loop_base(gw->loop), -1, EV_TIMEOUT, swap_deferred, old, &now)
                 : loop_post(gw->loop, swap_here, old, (uint64_t)(uintptr_t)gw, 0, NULL, 0);
    if (rc != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "bus %s: cannot start at its new settings (out of memory); it answers 0x0B "
               "until a restart", gw->cfg->buses[bus_slot(old)].name);
}

int bus_restart(gw_t *gw, unsigned index, char *err, size_t errcap)
{
    gw_bus_t *old = index < gw->bus_count ? gw->buses[index] : NULL;
    if (!old || !gw->cfg->buses_on_io_thread) {
        snprintf(err, errcap, "bus %s: %s", gw->cfg->buses[index].name,
                 !old ? "not running" : "restarted in place only with buses_on_io_thread = true");
        return -1;
    }
    if (bus_retiring(old))
        return 0;   /* already on its way: the new bus takes the running copy as it is then */
    bus_retire(old, closed, false);
    return 0;
}

/*
 * A bus added at slot i, one that holds no bus (config/slots.c chose it:
 * gw->buses[i] is NULL and its grace, below, is over). Made and started as
 * a restarted bus is (its port on its loop, requests held until it
 * speaks), then published: the slot first, then the count where the slot
 * is past it, both release stores, so a reader that sees the count
 * (gw_submit, gw_bus_count: acquire) sees the slot and the bus whole. The
 * slots' array is sized for CONFIG_MAX_BUSES at the start (daemon/gw.c),
 * so it never moves under a reader; so are the poller's, the scans' and the
 * front ends' per-bus tables (poller_new, scans_new, shares_new).
 *
 * It is made from fresh (laid out by slot), not the running copy, for the
 * devices on it: the reload moves the devices into the running copy only
 * after the buses (daemon/reload_buses.c), and a simulator with no slave
 * list serves the devices on its bus, as at a fresh start on the same
 * file, not 1,2,3. The running copy's slot i already holds its section.
 * Before it speaks it gets an empty ring for /frames (frames_add_bus) and
 * no scan of the slot's last bus (scan_bus_added): all on this thread,
 * which owns both.
 */
int bus_add(gw_t *gw, const config_t *fresh, unsigned i, char *err, size_t errcap)
{
    gw_loop_t *home = gw->line_loop ? gw->line_loop : gw->loop;
    if (i >= CONFIG_MAX_BUSES || gw->buses[i] || !gw->cfg->buses_on_io_thread) {
        snprintf(err, errcap, "bus %s: %s", fresh->buses[i].name,
                 i >= CONFIG_MAX_BUSES ? "too many buses" : gw->buses[i] ? "its slot is still in use"
                                                                         : "added live only with buses_on_io_thread = true");
        return -1;
    }
    gw_bus_t *nb = bus_new_from(gw, fresh, i, err, errcap);
    if (!nb)
        return -1;
    if (frames_add_bus(gw_frames(gw), i) != 0)
        gw_log(gw, CONFIG_LOG_ERROR, "bus %s: no frame ring for /frames (out of memory)", gw->cfg->buses[i].name);
    scan_bus_added(gw->scans, i);
    if (bus_start_in_place(nb, home) != 0) {
        bus_free(nb);   /* it fails only before its actor is spawned */
        snprintf(err, errcap, "bus %s: cannot start its actor (more buses than the scheduler was sized for at "
                 "the start, or out of memory)", gw->cfg->buses[i].name);
        return -1;
    }
    __atomic_store_n(&gw->buses[i], nb, __ATOMIC_RELEASE);
    if (i >= gw->bus_count)
        __atomic_store_n(&gw->bus_count, i + 1, __ATOMIC_RELEASE);
    return 0;
}

/*
 * The bus at slot i removed. Where it is the last slot, the count drops
 * first (release), so no reader that loads it after sends there (answered
 * 0x0A, no such bus, as at a fresh start without it; the trailing gaps go
 * with it). Elsewhere the slot keeps the bus while it retires: a request
 * sent there now is refused 0x0B, as for a bus restarting. Then it retires
 * as a restarted bus does (its requests answered), with no successor; the
 * slot is emptied (0x0A from then on) and its memory goes on its port's
 * loop, after the swap argument above; the slot is given to no new bus
 * before its grace (gw_bus_slot_free).
 */
void bus_remove(gw_t *gw, unsigned i)
{
    gw_bus_t *old = gw->buses[i];
    unsigned n = gw->bus_count;
    if (i + 1 == n) {
        while (n > 0 && (n - 1 == i || !gw->cfg->buses[n - 1].name[0]))
            n--;
        __atomic_store_n(&gw->bus_count, n, __ATOMIC_RELEASE);
    }
    bus_retire(old, closed, true);
}
