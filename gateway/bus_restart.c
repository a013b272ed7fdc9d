/*
 * gateway/bus_restart.c -- a bus restarted in place by a reload: a change of
 * a [bus] that its running line cannot take (framing, mode, queue_depth,
 * copies, a listen:// port, its name...) retires the bus's actor, line and
 * port and starts a new bus at the same index from the running copy's
 * section (gw->cfg->buses[index], which the reload set first). Every other
 * bus, TCP connection and MQTT session is untouched; the poller's groups on
 * it name the bus by index, so they go on with the new one.
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
        if (__atomic_load_n(&gw->buses[i], __ATOMIC_RELAXED) == old)
            __atomic_store_n(&gw->buses[i], NULL, __ATOMIC_RELEASE);
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
 * A bus added (appended: the index after the last). Made and started as a
 * restarted bus is (its port on its loop, requests held until it speaks),
 * then published: the slot first, then the count, both release stores, so
 * a reader that sees the count (gw_submit, gw_bus_count: acquire) sees the
 * slot and the bus whole. The slots' array is sized for CONFIG_MAX_BUSES at
 * the start (daemon/gw.c), so it never moves under a reader; so are the
 * poller's and the scans' per-bus tables (poller_new, scans_new).
 *
 * It is made from fresh, not the running copy, for the devices on it: the
 * reload moves the devices into the running copy only after the buses
 * (daemon/control.c), and a simulator with no slave list serves the
 * devices on its bus, as at a fresh start on the same file, not 1,2,3.
 * Before it speaks it gets an empty ring for /frames (frames_add_bus) and
 * no scan of a bus once removed from its index (scan_bus_added): all on
 * this thread, which owns both.
 */
int bus_add(gw_t *gw, const config_t *fresh, char *err, size_t errcap)
{
    unsigned i = gw->bus_count;
    gw_loop_t *home = gw->line_loop ? gw->line_loop : gw->loop;
    if (i >= CONFIG_MAX_BUSES || !gw->cfg->buses_on_io_thread) {
        snprintf(err, errcap, "bus %s: %s", gw->cfg->buses[i].name,
                 i >= CONFIG_MAX_BUSES ? "too many buses" : "added live only with buses_on_io_thread = true");
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
    __atomic_store_n(&gw->bus_count, i + 1, __ATOMIC_RELEASE);
    return 0;
}

/*
 * The last bus removed: the count drops first (release), so no reader
 * that loads it after sends there (a request for it is answered 0x0A, no
 * such bus, as at a fresh start without it; /status and /metrics no longer
 * list it); a serial slave's request already on its way to it is refused
 * 0x0B. Then it retires as a restarted bus does (its requests answered),
 * with no successor; its memory goes on its port's loop, after the swap
 * argument above.
 */
void bus_remove_last(gw_t *gw)
{
    unsigned i = gw->bus_count - 1;
    gw_bus_t *old = gw->buses[i];
    __atomic_store_n(&gw->bus_count, i, __ATOMIC_RELEASE);
    bus_retire(old, closed, true);
}
