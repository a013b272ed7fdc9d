/*
 * tests/unit/test_request.c -- requests, MBAP (header and stream splitting),
 * length prediction, timing, hex.
 */
#include "parser/rtu.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

static void test_request_roundtrip(void **state)
{
    (void)state;
    static const uint8_t pdus[][16] = {
        { 5, 0x03, 0x00, 0x6B, 0x00, 0x03 },                    /* read holding 107, 3 */
        { 5, 0x01, 0x00, 0x13, 0x00, 0x25 },                    /* read coils */
        { 5, 0x05, 0x00, 0xAC, 0xFF, 0x00 },                    /* write coil on */
        { 5, 0x06, 0x00, 0x01, 0x00, 0x03 },                    /* write register */
        { 8, 0x0F, 0x00, 0x13, 0x00, 0x0A, 0x02, 0xCD, 0x01 },  /* write 10 coils */
        { 10, 0x10, 0x00, 0x01, 0x00, 0x02, 0x04, 0x00, 0x0A, 0x01, 0x02 },
        { 7, 0x16, 0x00, 0x04, 0x00, 0xF2, 0x00, 0x25 },        /* mask write */
        { 12, 0x17, 0x00, 0x03, 0x00, 0x06, 0x00, 0x0E, 0x00, 0x01, 0x02, 0x00, 0xFF },
        { 3, 0x2B, 0x0E, 0x01 },                                /* raw: device id */
    };
    for (size_t i = 0; i < sizeof pdus / sizeof pdus[0]; i++) {
        rtu_request_t req = { .slave = 17 };
        size_t len = pdus[i][0];
        assert_int_equal(rtu_request_decode_pdu(pdus[i] + 1, len, &req), RTU_OK);
        assert_int_equal(req.slave, 17);
        uint8_t adu[RTU_MAX_ADU];
        int n = rtu_request_encode(&req, adu, sizeof adu);
        assert_int_equal(n, (int)len + 3);
        assert_int_equal(adu[0], 17);
        assert_memory_equal(adu + 1, pdus[i] + 1, len);
        rtu_request_t back;
        assert_int_equal(rtu_request_decode(adu, (size_t)n, &back), RTU_OK);
        assert_memory_equal(&back, &req, sizeof req);
        /* Predicted length agrees for the functions that have a rule. */
        int predicted = rtu_request_length(adu, (size_t)n);
        if (predicted > 0)
            assert_int_equal(predicted, n);
    }
}

static void test_request_rejects(void **state)
{
    (void)state;
    rtu_request_t req = { 0 };
    static const uint8_t zero_qty[] = { 0x03, 0x00, 0x00, 0x00, 0x00 };
    static const uint8_t big_qty[] = { 0x03, 0x00, 0x00, 0x00, 0x7E };
    static const uint8_t bad_coil[] = { 0x05, 0x00, 0x00, 0x12, 0x34 };
    static const uint8_t bad_bc[] = { 0x10, 0x00, 0x01, 0x00, 0x02, 0x03, 0x00, 0x0A, 0x01 };
    static const uint8_t exc_fc[] = { 0x83, 0x01 };
    static const uint8_t long_read[] = { 0x03, 0x00, 0x00, 0x00, 0x01, 0x00 };
    assert_int_equal(rtu_request_decode_pdu(zero_qty, sizeof zero_qty, &req), RTU_ERR_VALUE);
    assert_int_equal(rtu_request_decode_pdu(big_qty, sizeof big_qty, &req), RTU_ERR_VALUE);
    assert_int_equal(rtu_request_decode_pdu(bad_coil, sizeof bad_coil, &req), RTU_ERR_VALUE);
    assert_int_equal(rtu_request_decode_pdu(bad_bc, sizeof bad_bc, &req), RTU_ERR_BYTECOUNT);
    assert_int_equal(rtu_request_decode_pdu(exc_fc, sizeof exc_fc, &req), RTU_ERR_FUNCTION);
    assert_int_equal(rtu_request_decode_pdu(long_read, sizeof long_read, &req), RTU_ERR_LENGTH);
    assert_int_equal(rtu_request_decode_pdu(long_read, 0, &req), RTU_ERR_SHORT);
    static const uint8_t bad_crc[] = { 0x01, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00 };
    assert_int_equal(rtu_request_decode(bad_crc, sizeof bad_crc, &req), RTU_ERR_CRC);
}

static void test_mbap(void **state)
{
    (void)state;
    mbap_header_t h;
    uint8_t out[MBAP_MAX_ADU];
    static const uint8_t pdu[] = { 0x03, 0x00, 0x00, 0x00, 0x0A };
    int n = mbap_encode(0xBEEF, 255, pdu, sizeof pdu, out, sizeof out);
    assert_int_equal(n, 12);
    assert_int_equal(mbap_decode_header(out, (size_t)n, &h), 0);
    assert_int_equal(h.transaction, 0xBEEF);
    assert_int_equal(h.length, 6);
    assert_int_equal(h.unit, 255);
    assert_int_equal(mbap_decode_header(out, 6, &h), -EAGAIN);
    out[3] = 1;
    assert_int_equal(mbap_decode_header(out, 7, &h), -EPROTO);
    out[3] = 0;
    out[4] = 0x01; out[5] = 0x00; /* 256 */
    assert_int_equal(mbap_decode_header(out, 7, &h), -EMSGSIZE);
    out[4] = 0; out[5] = 1;
    assert_int_equal(mbap_decode_header(out, 7, &h), -EMSGSIZE);
    out[5] = 254;
    assert_int_equal(mbap_decode_header(out, 7, &h), 0);
    assert_int_equal(mbap_encode(1, 1, pdu, 0, out, sizeof out), -EMSGSIZE);
    assert_int_equal(mbap_encode(1, 1, pdu, sizeof pdu, out, 8), -ENOSPC);
}

/* Exact-size heap copy of the first n bytes, so a sanitizer build catches a read past n. */
static uint8_t *exact_copy(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, src, n);
    return p;
}

static int stream_next_exact(const uint8_t *src, size_t n, mbap_header_t *h, size_t *adu_len)
{
    uint8_t *p = exact_copy(src, n);
    int rc = mbap_stream_next(p, n, h, adu_len);
    free(p);
    return rc;
}

static void test_mbap_stream_next(void **state)
{
    (void)state;
    static const uint8_t pdu1[] = { 0x03, 0x00, 0x6B, 0x00, 0x03 };
    static const uint8_t pdu2[] = { 0x10, 0x00, 0x01, 0x00, 0x01, 0x02, 0x12, 0x34 };
    uint8_t stream[2 * MBAP_MAX_ADU];
    mbap_header_t h;
    size_t adu_len;

    int n1 = mbap_encode(0x0102, 17, pdu1, sizeof pdu1, stream, sizeof stream);
    assert_int_equal(n1, 12);
    int n2 = mbap_encode(0x0103, 18, pdu2, sizeof pdu2, stream + n1, sizeof stream - (size_t)n1);
    assert_int_equal(n2, 15);

    /* Fewer than 7 bytes: need more, adu_len untouched (buf NULL at 0 bytes). */
    adu_len = 99;
    assert_int_equal(mbap_stream_next(NULL, 0, &h, &adu_len), 0);
    for (size_t n = 1; n < MBAP_HEADER_LEN; n++)
        assert_int_equal(stream_next_exact(stream, n, &h, &adu_len), 0);
    assert_int_equal(adu_len, 99);
    /* A valid header whose PDU has not all arrived: need more. */
    for (size_t n = MBAP_HEADER_LEN; n < (size_t)n1; n++)
        assert_int_equal(stream_next_exact(stream, n, &h, &adu_len), 0);
    assert_int_equal(adu_len, 99);

    /* Exactly one ADU. */
    assert_int_equal(stream_next_exact(stream, (size_t)n1, &h, &adu_len), 1);
    assert_int_equal(adu_len, 12);
    assert_int_equal(adu_len, 6 + h.length);
    assert_int_equal(h.transaction, 0x0102);
    assert_int_equal(h.unit, 17);

    /* Two pipelined: the first, then (after consuming it) the second. */
    size_t have = (size_t)(n1 + n2);
    assert_int_equal(stream_next_exact(stream, have, &h, &adu_len), 1);
    assert_int_equal(adu_len, (size_t)n1);
    assert_int_equal(stream_next_exact(stream + adu_len, have - adu_len, &h, &adu_len), 1);
    assert_int_equal(adu_len, (size_t)n2);
    assert_int_equal(h.transaction, 0x0103);
    assert_int_equal(h.unit, 18);
    assert_int_equal(h.length, sizeof pdu2 + 1);

    /* The second only partly there: the first comes out, then need more. */
    assert_int_equal(stream_next_exact(stream, have - 1, &h, &adu_len), 1);
    assert_int_equal(adu_len, (size_t)n1);
    assert_int_equal(stream_next_exact(stream + n1, (size_t)n2 - 1, &h, &adu_len), 0);
    assert_int_equal(stream_next_exact(stream + n1, 3, &h, &adu_len), 0);

    /* Bad protocol id: refused at 7 bytes, header filled for the log. */
    uint8_t bad[MBAP_HEADER_LEN] = { 0x00, 0x01, 0x00, 0x05, 0x00, 0x06, 0x01 };
    memset(&h, 0, sizeof h);
    assert_int_equal(stream_next_exact(bad, sizeof bad, &h, &adu_len), -EPROTO);
    assert_int_equal(h.protocol, 5);
    assert_int_equal(h.length, 6);
    /* Length 1 (no PDU) and 255 (PDU over 253): refused before any PDU byte. */
    bad[3] = 0;
    bad[5] = 1;
    assert_int_equal(stream_next_exact(bad, sizeof bad, &h, &adu_len), -EMSGSIZE);
    assert_int_equal(h.length, 1);
    bad[5] = 255;
    assert_int_equal(stream_next_exact(bad, sizeof bad, &h, &adu_len), -EMSGSIZE);
    assert_int_equal(h.length, 255);
    assert_int_equal(adu_len, (size_t)n1);   /* untouched since the last 1 */

    /* The extremes of the length: 2 (a 1-byte PDU) and 254 (MBAP_MAX_ADU). */
    bad[5] = 2;
    uint8_t one[MBAP_HEADER_LEN + 1];
    memcpy(one, bad, sizeof bad);
    one[MBAP_HEADER_LEN] = 0x07;
    assert_int_equal(stream_next_exact(one, MBAP_HEADER_LEN, &h, &adu_len), 0);
    assert_int_equal(stream_next_exact(one, sizeof one, &h, &adu_len), 1);
    assert_int_equal(adu_len, 8);
    uint8_t big[MBAP_MAX_ADU] = { 0 };
    big[5] = 254;
    assert_int_equal(stream_next_exact(big, sizeof big - 1, &h, &adu_len), 0);
    assert_int_equal(stream_next_exact(big, sizeof big, &h, &adu_len), 1);
    assert_int_equal(adu_len, MBAP_MAX_ADU);
}

static void test_response_length(void **state)
{
    (void)state;
    static const uint8_t r[] = { 1, 3, 4 };
    assert_int_equal(rtu_response_length(r, 1), 0);
    assert_int_equal(rtu_response_length(r, 2), 0);
    assert_int_equal(rtu_response_length(r, 3), 9);
    static const uint8_t e[] = { 1, 0x83 };
    assert_int_equal(rtu_response_length(e, 2), 5);
    static const uint8_t w[] = { 1, 16 };
    assert_int_equal(rtu_response_length(w, 2), 8);
    static const uint8_t m[] = { 1, 22 };
    assert_int_equal(rtu_response_length(m, 2), 10);
    static const uint8_t u[] = { 1, 43 };
    assert_int_equal(rtu_response_length(u, 2), -1);
}

static void test_timing(void **state)
{
    (void)state;
    assert_int_equal(rtu_char_bits(8, 'E', 1), 11);
    assert_int_equal(rtu_char_bits(8, 'N', 1), 10);
    assert_int_equal(rtu_char_bits(8, 'N', 2), 11);
    /* 9600 8E1: 11 bits/char, 3.5 chars = 38.5 bits = 4010.42 us, rounded up. */
    assert_int_equal(rtu_t35_ns(9600, 11), 4010417);
    assert_int_equal(rtu_t15_ns(9600, 11), 1718750);
    assert_int_equal(rtu_t35_ns(19200, 11), 2005209);
    assert_int_equal(rtu_t35_ns(38400, 11), 1750000);
    assert_int_equal(rtu_t15_ns(115200, 10), 750000);
}

static void test_hex(void **state)
{
    (void)state;
    uint8_t b[8];
    size_t col = 0;
    assert_int_equal(rtu_hex_parse("01 03:0a-FF", b, sizeof b, &col), 4);
    assert_int_equal(b[2], 0x0A);
    assert_int_equal(b[3], 0xFF);
    assert_int_equal(rtu_hex_parse("01 0x", b, sizeof b, &col), -EINVAL);
    assert_int_equal(col, 5);
    assert_int_equal(rtu_hex_parse("0 1", b, sizeof b, &col), -EINVAL);
    assert_int_equal(col, 2);
    assert_int_equal(rtu_hex_parse("012", b, sizeof b, &col), -EINVAL);
    assert_int_equal(rtu_hex_parse("000000000000000000", b, sizeof b, &col), -ENOSPC);
    assert_int_equal(rtu_hex_parse("", b, sizeof b, &col), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_roundtrip),
        cmocka_unit_test(test_request_rejects),
        cmocka_unit_test(test_mbap),
        cmocka_unit_test(test_mbap_stream_next),
        cmocka_unit_test(test_response_length),
        cmocka_unit_test(test_timing),
        cmocka_unit_test(test_hex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
