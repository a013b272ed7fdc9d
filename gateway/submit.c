/*
 * gateway/submit.c -- the one way a request enters a bus. Every front end
 * (Modbus TCP, RTU over TCP and TLS in tcp.c, the serial slave, HTTP and
 * MQTT/Sparkplug tag writes, MQTT writes of poll registers) and the poller
 * build a line_request_t, name themselves as its origin, and call gw_submit.
 *
 * What it owns, so that no front end keeps a copy that could disagree:
 *   - the cache's bracket of a write: begun here, before the request can
 *     reach the line (so no poll answer read before the write lands can be
 *     served as fresh after it), ended when its one answer leaves the line
 *     (bus.c's answered operation) or here when it never gets there;
 *   - the promised answer when the request cannot be queued (no such bus,
 *     or the bus actor took no message: out of memory, or stopping): the
 *     exception code to answer with, 0x0A, returned. The front end gives it
 *     in its own protocol, as it gives every other answer; answering here,
 *     through the origin, would run the front end's answer path inside its
 *     own request callback (loop_post runs at once on the I/O thread), which
 *     may free the connection the callback still holds.
 * Which functions write, for read-only mode, TLS roles and broadcasts, is
 * parser/'s one classifier (rtu_function_class).
 */
#include "gateway/wiring.h"

int gw_submit(gw_t *gw, const line_request_t *req)
{
    /* acquire: a bus added by a reload is seen with its slot (bus_restart.c) */
    if (req->bus >= __atomic_load_n(&gw->bus_count, __ATOMIC_ACQUIRE))
        return MB_EX_PATH_UNAVAILABLE;
    /* and one restarted in place is seen whole; a slot a removal emptied holds none */
    gw_bus_t *bus = __atomic_load_n(&gw->buses[req->bus], __ATOMIC_ACQUIRE);
    if (!bus)
        return MB_EX_PATH_UNAVAILABLE;
    cache_write_begin(gw, req->bus, req->slave, req->pdu, req->pdu_len);
    int ex = bus_submit(bus, req);
    if (ex != 0)
        cache_write_end(gw, req->bus, req->slave, req->pdu, req->pdu_len);
    return ex;
}
