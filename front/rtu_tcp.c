/*
 * front/rtu_tcp.c -- the RTU over TCP front end ([rtu_tcp]): clients that
 * speak RTU frames on a TCP stream (SCADA drivers written for serial device
 * servers, pymodbus with its RTU framer). The sessions are tcp.c's; this
 * file is only where a request ends in the stream and how an answer is
 * written. The slave id in a frame routes as a unit id does in MBAP.
 *
 * Where a request ends: its length rule (parser/, rtu_request_length) for
 * the functions that have one; for the others (diagnostics, report slave
 * id, device identification, user functions) the CRC, what has arrived
 * and the quiet after it decide (rtu_tcp_frame.c, where the argument is):
 * a request whose end they cannot decide is answered with exception 0x03
 * (illegal data value) and counted (ambiguous_refused), never cut. A
 * request whose CRC fails, or 256 bytes with no frame in them, closes the
 * connection (counted as bad_mbap): TCP delivers what was sent, so the
 * client is broken or the stream is out of step, and nothing after the bad
 * bytes can be framed with confidence.
 *
 * Answers are RTU frames to the slave id the client addressed. Nothing is
 * written for a broadcast (slave 0): on an RTU line nobody answers one.
 */
#include "front/internal.h"

#include <stdio.h>

static bool crc_good(const uint8_t *p, size_t n)
{
    return rtu_crc16(p, n - 2) == (uint16_t)(p[n - 2] | p[n - 1] << 8);
}

static int rtu_next(const uint8_t *buf, size_t avail, bool quiet, tcp_adu_t *adu, char *why, size_t cap)
{
    int want = rtu_request_length(buf, avail);
    size_t n = 0;

    if (want == 0)
        return 0;
    if (want > RTU_MAX_ADU) {
        snprintf(why, cap, "a %d-byte request (slave %u, function %u): more than 256 bytes", want, buf[0], buf[1]);
        return -1;
    }
    if (want > 0) {
        if (avail < (size_t)want)
            return 0;
        n = (size_t)want;
        if (!crc_good(buf, n)) {
            snprintf(why, cap, "a request with a bad CRC (slave %u, function %u, %zu bytes)", buf[0], buf[1], n);
            return -1;
        }
    } else {
        switch (rtu_tcp_frame_end(buf, avail, quiet, &n)) {
        case RTU_TCP_END_FOUND:
            break;
        case RTU_TCP_END_MORE:
            return 0;
        case RTU_TCP_END_IF_QUIET:
            return 2;
        case RTU_TCP_END_NONE:
            snprintf(why, cap, "256 bytes without a frame (slave %u, function %u)", buf[0], buf[1]);
            return -1;
        case RTU_TCP_END_AMBIGUOUS:
            /* All the client sent, and it waits: one refusal for all of it. */
            *adu = (tcp_adu_t){ .len = avail, .unit = buf[0], .refuse = MB_EX_ILLEGAL_DATA_VALUE, .pdu = buf + 1,
                                .pdu_len = 1 };
            return 1;
        }
    }
    *adu = (tcp_adu_t){ .len = n, .unit = buf[0], .pdu = buf + 1, .pdu_len = n - 3 };
    return 1;
}

static int rtu_answer(uint16_t tid, uint8_t unit, const uint8_t *pdu, size_t len, uint8_t *out, size_t cap)
{
    (void)tid;
    return unit == 0 ? 0 : rtu_adu_from_pdu(unit, pdu, len, out, cap);
}

static const tcp_framing_t rtu_framing = { "rtu_tcp", RTU_MIN_ADU, rtu_next, rtu_answer };

gw_tcp_t *rtu_tcp_new(gw_t *gw, char *err, size_t errcap)
{
    return tcp_listen(gw, &gw_config(gw)->rtu_tcp, &rtu_framing, err, errcap);
}
