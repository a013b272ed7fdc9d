/*
 * tests/unit/routertest.h -- what test_router.c and test_router_machine.c (one
 * program, tests/unit/test_router) share: valid responses of a chosen length,
 * and the tests of test_router_machine.c that test_router.c's main runs in
 * its list.
 */
#ifndef RTUGW_TESTS_ROUTERTEST_H
#define RTUGW_TESTS_ROUTERTEST_H

#include "parser/rtu.h"
#include "tests/lib/testutil.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A valid response whose length lies in lo..hi (hi >= 5). */
static inline size_t valid_frame_in(uint64_t *s, uint8_t *a, unsigned lo, unsigned hi)
{
    uint64_t r = test_rand(s);
    size_t len;
    a[0] = (uint8_t)(1 + r % 247);
    if (hi <= 8) {
        switch ((r >> 8) % 3) {
        case 0: /* exception */
            len = 5;
            a[1] = 0x83;
            a[2] = 2;
            break;
        case 1: /* write single register echo */
            len = 8;
            a[1] = 6;
            for (size_t i = 2; i < 6; i++)
                a[i] = (uint8_t)test_rand(s);
            break;
        default: /* one register */
            len = 7;
            a[1] = 3;
            a[2] = 2;
            a[3] = (uint8_t)r;
            a[4] = (uint8_t)(r >> 16);
            break;
        }
    } else {
        /* read holding registers: len = 5 + 2 * regs, odd, in lo..hi */
        unsigned first = lo < 7 ? 7 : (lo % 2 ? lo : lo + 1);
        unsigned last = hi % 2 ? hi : hi - 1;
        unsigned choices = (last - first) / 2 + 1;
        len = first + 2 * ((r >> 8) % choices);
        a[1] = 3;
        a[2] = (uint8_t)(len - 5);
        for (size_t i = 3; i < len - 2; i += 8) {
            uint64_t v = test_rand(s);
            memcpy(&a[i], &v, len - 2 - i < 8 ? len - 2 - i : 8);
        }
    }
    /* the fast CRC: millions of frames here; the decoders' reference check
     * (status RTU_OK, envelope = reference) would catch a wrong one */
    uint16_t crc = rtu_crc16(a, len - 2);
    a[len - 2] = (uint8_t)crc;
    a[len - 1] = (uint8_t)(crc >> 8);
    return len;
}

/* test_router_machine.c: the router against the machine it runs on. */
void test_pairs_cancel_phase(void **state);
void test_tie_does_not_flap(void **state);
void test_coarse_clock(void **state);
void test_threads_merge(void **state);
void test_equivalence(void **state);
void test_config(void **state);

#endif
