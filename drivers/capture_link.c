/*
 * drivers/capture_link.c -- the link layers of a captured packet, for the
 * capture readers (capture.c): which link types carry raw RTU bytes, which
 * carry IP, and where a packet's Modbus/TCP payload (TCP port 502 at either
 * end, over Ethernet with VLAN tags, Linux cooked SLL and SLL2, or raw
 * IPv4/IPv6) starts. Pure functions on the packet's bytes: every offset is
 * checked against the captured length before it is read.
 */
#include "drivers/internal.h"

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

bool capture_link_is_raw_rtu(uint32_t lt)
{
    return (lt >= 147 && lt <= 162) || lt == 250;
}

bool capture_link_is_ip(uint32_t lt)
{
    return lt == 1 || lt == 113 || lt == 276 || lt == 101 || lt == 228 || lt == 229 || lt == 12;
}

/*
 * Finds the TCP payload of a packet for port 502. Returns 1 and sets
 * off, len and dir, or 0 when the packet is not Modbus/TCP.
 */
int capture_tcp_payload(uint32_t lt, const uint8_t *p, size_t n, size_t *off, size_t *len, int *dir)
{
    size_t o = 0;
    uint16_t proto = 0;
    if (lt == 1) {
        if (n < 14)
            return 0;
        proto = be16(p + 12);
        o = 14;
        while ((proto == 0x8100 || proto == 0x88a8) && n >= o + 4) {
            proto = be16(p + o + 2);
            o += 4;
        }
    } else if (lt == 113) {
        if (n < 16)
            return 0;
        proto = be16(p + 14);
        o = 16;
    } else if (lt == 276) {
        if (n < 20)
            return 0;
        proto = be16(p);
        o = 20;
    } else {
        if (n < 1)
            return 0;
        proto = (p[0] >> 4) == 6 ? 0x86dd : 0x0800;
        if (lt == 228)
            proto = 0x0800;
        if (lt == 229)
            proto = 0x86dd;
    }
    uint8_t l4;
    size_t ip_end;
    if (proto == 0x0800) {
        if (n < o + 20 || (p[o] >> 4) != 4)
            return 0;
        size_t ihl = (size_t)(p[o] & 15) * 4;
        size_t total = be16(p + o + 2);
        if (ihl < 20 || total < ihl || n < o + ihl)
            return 0;
        if ((be16(p + o + 6) & 0x3fff) != 0)
            return 0; /* fragments: not handled */
        l4 = p[o + 9];
        ip_end = o + total < n ? o + total : n;
        o += ihl;
    } else if (proto == 0x86dd) {
        if (n < o + 40 || (p[o] >> 4) != 6)
            return 0;
        l4 = p[o + 6];
        size_t plen = be16(p + o + 4);
        ip_end = o + 40 + plen < n ? o + 40 + plen : n;
        o += 40;
    } else {
        return 0;
    }
    if (l4 != 6 || ip_end < o + 20)
        return 0;
    uint16_t sport = be16(p + o), dport = be16(p + o + 2);
    size_t doff = (size_t)(p[o + 12] >> 4) * 4;
    if (doff < 20 || o + doff > ip_end)
        return 0;
    if (dport == 502)
        *dir = 1;
    else if (sport == 502)
        *dir = 0;
    else
        return 0;
    *off = o + doff;
    *len = ip_end - *off;
    return *len > 0;
}
