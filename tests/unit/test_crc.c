/*
 * tests/unit/test_crc.c -- the four CRC-16/MODBUS implementations against the
 * catalogue check value and against each other at every length and
 * alignment the folding code distinguishes.
 */
#include "parser/rtu.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

typedef uint16_t (*crc_fn)(const uint8_t *, size_t);

static const struct {
    const char *name;
    crc_fn fn;
} impls[] = {
    { "reference", rtu_crc16_reference },
    { "fallback", rtu_crc16_fallback },
    { "native", rtu_crc16_native },
    { "bytetable", rtu_crc16_bytetable },
    { "best", rtu_crc16 },
};

static void test_check_value(void **state)
{
    (void)state;
    /* CRC-16/MODBUS catalogue entry: check = 0x4B37 for "123456789". */
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        assert_int_equal(impls[i].fn((const uint8_t *)"123456789", 9), 0x4B37);
}

static void test_known_frame(void **state)
{
    (void)state;
    /* 01 03 02 44 CB | CA D3 is the 7-byte tier frame of the golden set. */
    static const uint8_t frame[] = { 0x01, 0x03, 0x02, 0x44, 0xCB };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        assert_int_equal(impls[i].fn(frame, sizeof frame), 0xD3CA);
}

static void test_empty_is_init(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        assert_int_equal(impls[i].fn((const uint8_t *)"", 0), 0xFFFF);
}

static void test_all_lengths_and_alignments(void **state)
{
    (void)state;
    static uint8_t buf[1200 + 16];
    uint32_t x = 0x12345678;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    for (size_t align = 0; align < 16; align++) {
        for (size_t len = 0; len <= 1200; len++) {
            uint16_t want = rtu_crc16_reference(buf + align, len);
            for (size_t i = 1; i < sizeof impls / sizeof impls[0]; i++) {
                uint16_t got = impls[i].fn(buf + align, len);
                if (got != want)
                    fail_msg("%s: len %zu align %zu: got %04x want %04x", impls[i].name, len,
                             align, got, want);
            }
        }
    }
}

static void test_single_bit_flips_change_crc(void **state)
{
    (void)state;
    /* A CRC-16 detects every single-bit error: flip each bit of a 255-byte
     * frame and the native CRC must change. */
    uint8_t buf[253];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint16_t base = rtu_crc16_native(buf, sizeof buf);
    for (size_t bit = 0; bit < sizeof buf * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_not_equal(rtu_crc16_native(buf, sizeof buf), base);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_known_frame),
        cmocka_unit_test(test_empty_is_init),
        cmocka_unit_test(test_all_lengths_and_alignments),
        cmocka_unit_test(test_single_bit_flips_change_crc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
