/*
 * tests/fuzz/fuzz_framer.c -- the streaming RTU framer fed arbitrary bytes,
 * chunked, stamped and idled as the input says.
 *
 * Input: byte 0 picks the direction (response, request, sniff), the baud
 * (0 = silence delimiting off, or one of a few real rates) and the
 * character size. The rest is a program of operations:
 *   op & 3 == 0  feed: next byte gives the chunk length (1..64), the next
 *                two a signed time step (timestamps may go backwards), then
 *                the chunk's bytes (as many as are left);
 *   op & 3 == 1  idle at now + a signed step (next two bytes);
 *   op & 3 == 2  drain every ready frame;
 *   op & 3 == 3  reset (op & 4) or drain;
 *   op & 0x80    drain after the operation (else frames may pile up and the
 *                framer's queue fill).
 * Finally an idle far in the future and a drain.
 *
 * Invariants (abort() when broken):
 *   - no frame is longer than RTU_MAX_ADU (256) or empty;
 *   - a frame with crc_ok = 1 is at least 4 bytes and its CRC-16/MODBUS
 *     (low byte first) is right;
 *   - t_first_ns and t_last_ns are stamps that were fed;
 *   - bytes accounting: since the last reset, bytes in drained frames plus
 *     noise_bytes counted never exceed the bytes fed (the framer documents
 *     fed = frames + noise + still buffered);
 *   - stats.frames is at least the number of frames drained.
 */
#include "parser/rtu.h"
#include "tests/fuzz/fuzz.h"

#include <string.h>

typedef struct state {
    rtu_framer_t *fr;
    const uint8_t *input;
    size_t input_len;
    uint64_t fed_epoch;        /* bytes fed since the last reset */
    uint64_t framed_epoch;     /* bytes in frames drained since the last reset */
    uint64_t noise_base;       /* noise_bytes at the last reset */
    uint64_t frames_drained;
    uint64_t stamp_min, stamp_max;
} state_t;

static void drain(state_t *s)
{
    rtu_frame_t f;
    rtu_framer_stats_t st;

    for (int guard = 0; guard < 1000; guard++) {
        memset(&f, 0xA5, sizeof f);
        if (!rtu_framer_next(s->fr, &f))
            break;
        FUZZ_CHECK(f.len >= 1 && f.len <= RTU_MAX_ADU, s->input, s->input_len,
                   "frame length %u outside 1..%d", f.len, RTU_MAX_ADU);
        if (f.crc_ok) {
            FUZZ_CHECK(f.len >= 4, s->input, s->input_len, "crc_ok frame of %u bytes", f.len);
            uint16_t crc = rtu_crc16_reference(f.adu, (size_t)f.len - 2);
            uint16_t wire = (uint16_t)(f.adu[f.len - 2] | (f.adu[f.len - 1] << 8));
            if (crc != wire)
                fuzz_print_hex("emitted", f.adu, f.len);
            FUZZ_CHECK(crc == wire, s->input, s->input_len,
                       "frame with crc_ok = 1 has CRC %04x on the wire, %04x computed", wire, crc);
        }
        FUZZ_CHECK(f.t_first_ns >= s->stamp_min && f.t_first_ns <= s->stamp_max &&
                   f.t_last_ns >= s->stamp_min && f.t_last_ns <= s->stamp_max,
                   s->input, s->input_len, "frame stamps %llu..%llu were never fed",
                   (unsigned long long)f.t_first_ns, (unsigned long long)f.t_last_ns);
        s->framed_epoch += f.len;
        s->frames_drained++;
    }
    rtu_framer_get_stats(s->fr, &st);
    FUZZ_CHECK(st.noise_bytes >= s->noise_base, s->input, s->input_len, "noise_bytes went down");
    FUZZ_CHECK(s->framed_epoch + (st.noise_bytes - s->noise_base) <= s->fed_epoch, s->input,
               s->input_len, "accounting: %llu bytes framed + %llu noise > %llu fed",
               (unsigned long long)s->framed_epoch,
               (unsigned long long)(st.noise_bytes - s->noise_base),
               (unsigned long long)s->fed_epoch);
    FUZZ_CHECK(st.frames >= s->frames_drained, s->input, s->input_len,
               "stats.frames %llu < %llu frames drained", (unsigned long long)st.frames,
               (unsigned long long)s->frames_drained);
}

static uint64_t step(uint64_t now, const uint8_t *p)
{
    /* Signed 16-bit step, scaled so that both sub-t3.5 gaps and long
     * silences (at 300..115200 baud) occur; negative steps go back. */
    int16_t d = (int16_t)(p[0] | (p[1] << 8));
    int64_t scaled = (int64_t)d * ((d & 1) ? 1000 : 97);
    if (scaled < 0 && (uint64_t)(-scaled) > now)
        return 0;
    return now + (uint64_t)scaled;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned bauds[8] = { 0, 300, 1200, 9600, 19200, 38400, 115200, 0 };
    if (size < 1)
        return 0;
    rtu_framer_config_t cfg = {
        .baud = bauds[data[0] & 7],
        .char_bits = (data[0] & 8) ? 10 : ((data[0] & 16) ? 0 : 11),
        .dir = (rtu_frame_dir_t)((data[0] >> 5) % 3),
    };
    state_t s = { .input = data, .input_len = size, .stamp_min = UINT64_MAX };
    s.fr = rtu_framer_new(&cfg);
    FUZZ_CHECK(s.fr != NULL, data, size, "rtu_framer_new failed");

    uint64_t now = 1000000000ull;
    size_t i = 1;
    while (i < size) {
        uint8_t op = data[i++];
        switch (op & 3) {
        case 0: {
            if (i + 3 > size)
                goto done;
            size_t n = (size_t)(data[i] % 64) + 1;
            now = step(now, data + i + 1);
            i += 3;
            if (n > size - i)
                n = size - i;
            if (n == 0)
                goto done;
            rtu_framer_feed(s.fr, data + i, n, now);
            if (now < s.stamp_min)
                s.stamp_min = now;
            if (now > s.stamp_max)
                s.stamp_max = now;
            s.fed_epoch += n;
            i += n;
            break;
        }
        case 1:
            if (i + 2 > size)
                goto done;
            now = step(now, data + i);
            i += 2;
            rtu_framer_idle(s.fr, now);
            break;
        case 2:
            drain(&s);
            break;
        default:
            if (op & 4) {
                rtu_framer_stats_t st;
                rtu_framer_reset(s.fr);
                rtu_framer_get_stats(s.fr, &st);
                s.fed_epoch = s.framed_epoch = 0;
                s.noise_base = st.noise_bytes;
            } else {
                drain(&s);
            }
            break;
        }
        if (op & 0x80)      /* else frames may pile up: the queue-full path */
            drain(&s);
    }
done:
    rtu_framer_idle(s.fr, now + 10000000000ull);
    drain(&s);
    rtu_framer_free(s.fr);
    return 0;
}
