/*
 * tests/fuzz/fuzz_decode.c -- differential fuzzing of the response decoders.
 *
 * Every input is decoded by reference, fallback, native and bytetable; the
 * four envelopes must be memcmp-equal (each output buffer is poisoned with a
 * different pattern first, so a decoder that leaves a byte unwritten shows
 * up). Random bytes almost never carry a valid CRC, so each input is decoded
 * a second time with its last two bytes replaced by the right CRC: that copy
 * reaches the function-code, byte-count and value rules; it is placed at
 * an alignment taken from its first byte. Both frames are checked; the one
 * printed on failure is the one that differed. RTUGW_NATIVE_DISABLE (see
 * parser/swap.c) selects which native tier is fuzzed.
 */
#include "parser/rtu.h"
#include "tests/fuzz/fuzz.h"

#include <string.h>

static const rtu_decode_fn decoders[] = {
    rtu_decode_reference, rtu_decode_fallback, rtu_decode_native, rtu_decode_bytetable,
};
static const char *const names[] = { "reference", "fallback", "native", "bytetable" };
#define NDEC (sizeof decoders / sizeof decoders[0])

static void check_frame(const uint8_t *adu, size_t len)
{
    rtu_envelope_t env[NDEC];
    rtu_status_t ret[NDEC];
    for (size_t d = 0; d < NDEC; d++) {
        memset(&env[d], 0xA5 ^ (int)(d * 0x3B), sizeof env[d]);
        ret[d] = decoders[d](adu, len, &env[d]);
    }
    for (size_t d = 0; d < NDEC; d++) {
        if (ret[d] != (rtu_status_t)env[d].status || ret[d] >= RTU_STATUS_COUNT)
            FUZZ_FAIL(adu, len, "%s returned %d but its envelope says %d", names[d],
                      (int)ret[d], (int)env[d].status);
        if (d > 0 && memcmp(&env[0], &env[d], sizeof env[0]) != 0)
            FUZZ_FAIL(adu, len, "envelopes differ: reference=%s fallback=%s native=%s bytetable=%s",
                      rtu_status_name(ret[0]), rtu_status_name(ret[1]), rtu_status_name(ret[2]),
                      rtu_status_name(ret[3]));
    }
    /* On error only status is set: everything else is zero. */
    if (env[0].status != RTU_OK) {
        static const rtu_envelope_t zero;
        rtu_envelope_t e = env[0];
        e.status = 0;
        FUZZ_CHECK(memcmp(&e, &zero, sizeof e) == 0, adu, len,
                   "error envelope (%s) carries more than its status",
                   rtu_status_name(ret[0]));
    }
    /* The CRC is the same on every path (and in the byte-table form). */
    if (len >= 2) {
        uint16_t c = rtu_crc16_reference(adu, len - 2);
        FUZZ_CHECK(rtu_crc16_fallback(adu, len - 2) == c && rtu_crc16_native(adu, len - 2) == c &&
                       rtu_crc16_bytetable(adu, len - 2) == c && rtu_crc16(adu, len - 2) == c,
                   adu, len, "CRC paths disagree");
    }
}

/* Says which native tier this run exercises (RTUGW_NATIVE_DISABLE picks). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fuzz_decode: native features: %s\n", rtu_native_features());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copies that end exactly where their allocation ends, so ASan sees any
     * read past the frame: the input as it is, 16-byte aligned; then with
     * the CRC made right, at an alignment 0..15 taken from the slave byte
     * (the SIMD paths load 16 and 32 bytes at a time). */
    uint8_t *frame = malloc(size ? size : 1);
    if (!frame)
        return 0;
    if (size)
        memcpy(frame, data, size);
    check_frame(frame, size);
    free(frame);

    if (size >= RTU_MIN_ADU && size <= RTU_MAX_ADU + 8) {
        size_t off = data[0] & 15u;
        uint8_t *buf = malloc(off + size);
        if (!buf)
            return 0;
        frame = buf + off;
        memcpy(frame, data, size);
        uint16_t crc = rtu_crc16_reference(frame, size - 2);
        frame[size - 2] = (uint8_t)crc;
        frame[size - 1] = (uint8_t)(crc >> 8);
        check_frame(frame, size);
        free(buf);
    }
    return 0;
}
