/*
 * tests/cross/native_check.c -- the native path checked on another
 * architecture (aarch64 under qemu-user): native and fallback CRC against the
 * bitwise reference at every length and alignment, and the three decoders'
 * envelopes on random register frames. Standalone (no cmocka), because only
 * libc exists for the cross target. Exit 0 only when everything matched.
 */
#include "parser/rtu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(void)
{
    static uint8_t buf[1100 + 16];
    uint64_t s = 0x2545F4914F6CDD1Dull;
    unsigned long bad = 0, frames = 0;

    printf("native features: %s\n", rtu_native_features());
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rng(&s);
    for (size_t align = 0; align < 16; align++)
        for (size_t len = 0; len <= 1100; len++) {
            uint16_t want = rtu_crc16_reference(buf + align, len);
            if (rtu_crc16_native(buf + align, len) != want || rtu_crc16_fallback(buf + align, len) != want) {
                if (bad++ < 5)
                    printf("crc mismatch: len %zu align %zu\n", len, align);
            }
        }
    for (unsigned i = 0; i < 200000; i++) {
        uint8_t a[260];
        size_t regs = 1 + rng(&s) % 125, len = 5 + 2 * regs;
        a[0] = (uint8_t)rng(&s);
        a[1] = (uint8_t)(3 + (i & 1));
        a[2] = (uint8_t)(2 * regs);
        for (size_t k = 3; k < len; k++)
            a[k] = (uint8_t)rng(&s);
        if (i % 3) { /* two in three valid */
            uint16_t crc = rtu_crc16_reference(a, len - 2);
            a[len - 2] = (uint8_t)crc;
            a[len - 1] = (uint8_t)(crc >> 8);
        }
        rtu_envelope_t r, f, n;
        rtu_decode_reference(a, len, &r);
        rtu_decode_fallback(a, len, &f);
        rtu_decode_native(a, len, &n);
        frames++;
        if (memcmp(&r, &f, sizeof r) || memcmp(&r, &n, sizeof r)) {
            if (bad++ < 5)
                printf("envelope mismatch: %zu registers\n", regs);
        }
    }
    printf("%lu frames, %lu mismatches\n", frames, bad);
    return bad ? 1 : 0;
}
