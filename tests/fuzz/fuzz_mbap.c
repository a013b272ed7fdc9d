/*
 * tests/fuzz/fuzz_mbap.c -- Modbus TCP (MBAP) header decode on arbitrary
 * bytes, and the round trip through mbap_encode.
 *
 *   - decode never reads past len (the input is an exact-size heap copy) and
 *     returns only 0, -EAGAIN, -EPROTO or -EMSGSIZE, by the documented rules;
 *   - when the header decodes and the PDU it announces is there, encoding
 *     (transaction, unit, PDU) reproduces those bytes exactly;
 *   - encoding the bytes after a 3-byte prefix as a PDU, whatever they are,
 *     decodes back to the same transaction, unit and length.
 */
#include "parser/rtu.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <string.h>

static void decode_side(const uint8_t *buf, size_t len)
{
    mbap_header_t h;
    memset(&h, 0xA5, sizeof h);
    int rc = mbap_decode_header(buf, len, &h);
    if (len < MBAP_HEADER_LEN) {
        FUZZ_CHECK(rc == -EAGAIN, buf, len, "short header gave %d, want -EAGAIN", rc);
        return;
    }
    uint16_t proto = (uint16_t)(buf[2] << 8 | buf[3]);
    uint16_t length = (uint16_t)(buf[4] << 8 | buf[5]);
    int want = proto != 0 ? -EPROTO : (length < 2 || length > RTU_MAX_PDU + 1) ? -EMSGSIZE : 0;
    FUZZ_CHECK(rc == want, buf, len, "mbap_decode_header gave %d, want %d", rc, want);
    if (rc != 0)
        return;
    FUZZ_CHECK(h.transaction == (uint16_t)(buf[0] << 8 | buf[1]) && h.protocol == 0 &&
                   h.length == length && h.unit == buf[6],
               buf, len, "decoded header fields differ from the bytes");

    size_t pdu_len = (size_t)h.length - 1;
    if (len < MBAP_HEADER_LEN + pdu_len)
        return;
    uint8_t out[MBAP_MAX_ADU];
    int n = mbap_encode(h.transaction, h.unit, buf + MBAP_HEADER_LEN, pdu_len, out, sizeof out);
    FUZZ_CHECK(n == (int)(MBAP_HEADER_LEN + pdu_len), buf, len, "mbap_encode gave %d", n);
    FUZZ_CHECK(memcmp(out, buf, (size_t)n) == 0, buf, len,
               "re-encoded ADU differs from the decoded one");
    /* Too small an output buffer is refused, not overrun. */
    FUZZ_CHECK(mbap_encode(h.transaction, h.unit, buf + MBAP_HEADER_LEN, pdu_len, out,
                           (size_t)n - 1) == -ENOSPC,
               buf, len, "mbap_encode into %d bytes did not give -ENOSPC", n - 1);
}

static void encode_side(const uint8_t *buf, size_t len)
{
    if (len < 3)
        return;
    uint16_t transaction = (uint16_t)(buf[0] << 8 | buf[1]);
    uint8_t unit = buf[2];
    const uint8_t *pdu = buf + 3;
    size_t pdu_len = len - 3;
    uint8_t out[MBAP_MAX_ADU];
    int n = mbap_encode(transaction, unit, pdu, pdu_len, out, sizeof out);
    if (pdu_len < 1 || pdu_len > RTU_MAX_PDU) {
        FUZZ_CHECK(n == -EMSGSIZE, buf, len, "PDU of %zu bytes encoded (%d)", pdu_len, n);
        return;
    }
    FUZZ_CHECK(n == (int)(MBAP_HEADER_LEN + pdu_len), buf, len, "mbap_encode gave %d", n);
    mbap_header_t h;
    int rc = mbap_decode_header(out, (size_t)n, &h);
    FUZZ_CHECK(rc == 0 && h.transaction == transaction && h.unit == unit && h.protocol == 0 &&
                   h.length == pdu_len + 1,
               buf, len, "encoded header does not decode back (%d)", rc);
    FUZZ_CHECK(memcmp(out + MBAP_HEADER_LEN, pdu, pdu_len) == 0, buf, len, "PDU changed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    decode_side(buf, size);
    encode_side(buf, size);
    free(buf);
    return 0;
}
