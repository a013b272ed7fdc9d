/*
 * front/rtu_tcp_frame.c -- where an RTU over TCP request of a function
 * without a length rule ends (diagnostics, report slave id, device
 * identification, user functions): rtu_tcp.c's framing asks it. Pure, so
 * that tests/unit/test_rtu_tcp_frame.c can feed it millions of requests.
 *
 * The end is one of the cuts k (4..256 bytes) at which the CRC is good; the
 * question is which. The argument:
 *
 *   - Every CRC-good frame F stays CRC-good with a 0x00 appended. F's CRC c
 *     is the register after F's data; appending c's low byte makes the
 *     table index 0 (T[0] = 0), so the register becomes c >> 8, which is
 *     F's last byte followed by 0x00. So a request whose last byte is 0x00
 *     (1 in 256) always has a CRC-good prefix one byte short: the shortest
 *     good cut, which this front end once took, cut it. Any other false cut
 *     is a 16-bit coincidence (2^-16 per position).
 *   - A cut short of what has arrived is the end only if the bytes after it
 *     can be the next requests: one with a length rule that is all there
 *     must be CRC-good (nothing else keeps the stream in step). Before the
 *     client goes quiet, only such a good request after the cut proves it
 *     (the request may still be longer than what has arrived: a false cut
 *     and a good CRC after it by chance is 2^-32). Once quiet, the bytes
 *     after it must be whole requests, the last ending with the bytes: a
 *     client waits for its answers, so it has sent all it meant to.
 *   - A cut at the end of what has arrived (the read boundary) can be
 *     extended by bytes still in flight, a 0x00 above all; it is the end
 *     only once the stream has been quiet for RTU_TCP_QUIET_MS. TCP keeps
 *     no inter-character silence; this is the silence a client that
 *     writes its request at once leaves, at the cost of that much latency
 *     for these functions only.
 *   - One possible cut is the end; more than one is waited out (more bytes,
 *     or the quiet time). Still more than one once quiet, the end cannot be
 *     decided: the request is refused (an exception, counted), never cut.
 *     Among the cuts two requests make (A's end and A+B's), A+B is never
 *     CRC-good: after a good frame the register is 0, not 0xFFFF, and B's
 *     CRC was computed from 0xFFFF.
 */
#include "front/internal.h"

static bool crc_good(const uint8_t *p, size_t n)
{
    return n >= RTU_MIN_ADU && rtu_crc16(p, n - 2) == (uint16_t)(p[n - 2] | p[n - 1] << 8);
}

typedef enum { FOLLOW_NO, FOLLOW_MAYBE, FOLLOW_YES } follow_t;

/*
 * Can buf[at..avail) be what follows a request?
 * Not quiet: NO when a request with a length rule is all there with a bad
 * CRC; YES when one is there with a good CRC (a false cut before it and a
 * good CRC after it by chance: 2^-32); else MAYBE.
 * Quiet: YES only when the bytes are whole requests, the last ending with
 * them; a request without a length rule is tried at each of its good cuts,
 * at most `depth` requests deep (a bound on the work a client can cause).
 */
static follow_t can_follow(const uint8_t *buf, size_t at, size_t avail, bool quiet, unsigned depth)
{
    while (at < avail) {
        size_t have = avail - at;
        int want = rtu_request_length(buf + at, have);
        if (want < 0) {
            if (!quiet)
                return FOLLOW_MAYBE;
            for (size_t j = RTU_MIN_ADU; j <= have && j <= RTU_MAX_ADU; j++)
                if (crc_good(buf + at, j) &&
                    (j == have || (depth > 0 && can_follow(buf, at + j, avail, true, depth - 1) == FOLLOW_YES)))
                    return FOLLOW_YES;
            return FOLLOW_NO;
        }
        if (want == 0 || have < (size_t)want)
            return quiet ? FOLLOW_NO : FOLLOW_MAYBE;   /* quiet: it will never be whole */
        if (want > RTU_MAX_ADU || !crc_good(buf + at, (size_t)want))
            return FOLLOW_NO;
        if (!quiet)
            return FOLLOW_YES;
        at += (size_t)want;
    }
    return FOLLOW_YES;
}

rtu_tcp_end_t rtu_tcp_frame_end(const uint8_t *buf, size_t avail, bool quiet, size_t *len)
{
    size_t last = avail < RTU_MAX_ADU ? avail : RTU_MAX_ADU, possible = 0, sure = 0, end = 0;

    for (size_t k = RTU_MIN_ADU; k <= last; k++) {
        if (!crc_good(buf, k))
            continue;
        follow_t f = k == avail ? (quiet ? FOLLOW_YES : FOLLOW_MAYBE) : can_follow(buf, k, avail, quiet, 4);
        if (f == FOLLOW_NO)
            continue;
        possible++;
        if (f == FOLLOW_YES) {
            sure++;
            end = k;
        }
    }
    if (possible == 0)
        return avail >= RTU_MAX_ADU ? RTU_TCP_END_NONE : RTU_TCP_END_MORE;
    if (possible == 1 && sure == 1) {
        *len = end;
        return RTU_TCP_END_FOUND;
    }
    if (!quiet)
        return RTU_TCP_END_IF_QUIET;
    return RTU_TCP_END_AMBIGUOUS;
}
