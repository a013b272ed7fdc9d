/*
 * front/dispatch.c -- one request's way into the gateway, whatever front end
 * it came by: Modbus TCP and TLS, RTU over TCP (tcp.c's sessions) and
 * Modbus UDP (udp.c). The checks run in one order for all of them, so a
 * request is refused for the same reason, with the same exception, and
 * counted in the same counter, whichever way it came:
 *   1. the framing's own refusal (an RTU request whose end is unsure);
 *   2. the TLS role's rights: beyond them, a request is not even decoded,
 *      and says nothing about routes or the slaves;
 *   3. the decode (an unknown function 0x01, a malformed request 0x03);
 *   4. read_only: a function that changes anything, 0x01;
 *   5. a map's unit ([map NAME], gateway/vslave.c): handed back with bus
 *      GW_BUS_MAP for front_map_request, which the front end calls once it
 *      has set the request's origin (a map's write answers through it);
 *      else the route: unit -> bus and slave (unitN, default_bus), 0x0A
 *      when none; a broadcast only for the functions that may be broadcast;
 *   6. the poll cache (serve_cached_ms): a read answered from a poll
 *      group's last answer while it is fresh, with no bus transaction.
 * What passes is a line_request_t for the bus, which the front end submits
 * with its own origin and bookkeeping (tcp.c: slots and shares; udp.c: its
 * per-address bound).
 */
#include "front/internal.h"

#include <pthread.h>
#include <string.h>

bool front_route(const gw_t *gw, const config_tcp_t *cfg, uint8_t unit, unsigned *bus, unsigned *slave)
{
    const config_route_t *r = &cfg->unit[unit];

    if (r->set) {
        *bus = r->broadcast ? cfg->default_bus : r->bus;
        *slave = r->broadcast ? 0 : r->slave;
        return true;
    }
    if (unit > 247)
        return false;       /* 248..255 mean nothing on a serial line unless mapped */
    *bus = cfg->default_bus;
    *slave = unit;          /* unit 0 unmapped: a broadcast */
    return gw_bus_count(gw) > 0;
}

static size_t exception(uint8_t out[RTU_MAX_PDU], uint8_t fc, uint8_t code)
{
    out[0] = (uint8_t)(fc | 0x80);
    out[1] = code;
    return 2;
}

size_t front_dispatch(gw_t *gw, const config_tcp_t *cfg, gw_tcp_metrics_t *m, int role, const tcp_adu_t *h,
                      line_request_t *r, uint8_t out[RTU_MAX_PDU])
{
    const uint8_t *pdu = h->pdu;
    size_t len = h->pdu_len, n;
    rtu_request_t req;
    rtu_status_t st;
    unsigned bus = 0, slave = 0;
    bool mapped = vslave_owns(gw_maps(gw), h->unit);   /* a map's unit: routed nowhere */
    bool routed = !mapped && front_route(gw, cfg, h->unit, &bus, &slave) && bus < gw_bus_count(gw);

    if (h->refuse) {
        gw_count(&m->ambiguous_refused);
        return exception(out, pdu[0], h->refuse);
    }
    if (role >= 0 && !mbaps_allows(gw_mbaps(gw), role, h->unit, routed ? (int)bus : -1, pdu, len))
        return exception(out, pdu[0], MB_EX_ILLEGAL_FUNCTION);
    if ((st = rtu_request_decode_pdu(pdu, len, &req)) == RTU_ERR_FUNCTION)
        return exception(out, pdu[0], MB_EX_ILLEGAL_FUNCTION);
    if (st != RTU_OK)
        return exception(out, pdu[0], MB_EX_ILLEGAL_DATA_VALUE);   /* a malformed request */
    if (cfg->read_only && (rtu_function_class(pdu, len) & RTU_FN_CHANGES)) {
        gw_count(&m->read_only_refused);
        return exception(out, pdu[0], MB_EX_ILLEGAL_FUNCTION);
    }
    if (mapped) {
        *r = (line_request_t){ .pdu_len = (uint16_t)len, .bus = GW_BUS_MAP, .t_accept_ns = gw_now_ns() };
        memcpy(r->pdu, pdu, len);
        return 0;
    }
    if (!routed) {
        gw_count(&m->unrouted);
        return exception(out, pdu[0], MB_EX_PATH_UNAVAILABLE);
    }
    if (slave == 0 && !(rtu_function_class(pdu, len) & RTU_FN_BROADCAST)) {
        /* Only writes are broadcast: nothing would answer a read. */
        gw_count(&m->unrouted);
        return exception(out, pdu[0], MB_EX_ILLEGAL_FUNCTION);
    }
    if ((n = cache_answer(gw, bus, slave, &req, out)) != 0) {
        gw_count(&m->cache_hits);
        return n;
    }
    *r = (line_request_t){ .slave = (uint8_t)slave, .pdu_len = (uint16_t)len, .bus = (uint8_t)bus,
                         .t_accept_ns = gw_now_ns() };
    memcpy(r->pdu, pdu, len);
    return 0;
}

int front_map_request(gw_t *gw, uint8_t unit, const line_request_t *r, uint8_t out[RTU_MAX_PDU], size_t *n)
{
    int verdict = gw_unit_dispatch(gw, unit, r, out, n);
    if (verdict == GW_UNIT_ROUTE) {   /* the map went in a reload meanwhile */
        *n = exception(out, r->pdu[0], MB_EX_PATH_UNAVAILABLE);
        return GW_UNIT_ANSWERED;
    }
    return verdict;
}
