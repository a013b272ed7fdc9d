/*
 * tests/fuzz/fuzz_request.c -- request decode on arbitrary bytes, and the
 * encode -> decode round trip for every request that decodes.
 *
 * The input is tried three ways: as an RTU ADU as it stands, as the same ADU
 * with its CRC made right (random bytes rarely carry one), and as a bare PDU
 * (slave taken from the first byte). Whenever decode succeeds:
 *   - encode succeeds and reproduces the accepted bytes exactly (the request
 *     forms are all fixed by their fields, so there is one encoding);
 *   - decoding the encoding gives the same rtu_request_t, byte for byte;
 *   - rtu_request_length() predicts the length, where it has a rule.
 */
#include "parser/rtu.h"
#include "tests/fuzz/fuzz.h"

#include <string.h>

static void roundtrip(const rtu_request_t *req, const uint8_t *adu, size_t len, const char *how)
{
    uint8_t enc[RTU_MAX_ADU + 16];
    int n = rtu_request_encode(req, enc, sizeof enc);
    FUZZ_CHECK(n > 0, adu, len, "%s: decoded fc %u but encode failed (%d)", how,
               req->function, n);
    FUZZ_CHECK((size_t)n == len && memcmp(enc, adu, len) == 0, adu, len,
               "%s: encode gives %d bytes that differ from the decoded frame", how, n);

    rtu_request_t back;
    memset(&back, 0x5A, sizeof back);
    rtu_status_t st = rtu_request_decode(enc, (size_t)n, &back);
    FUZZ_CHECK(st == RTU_OK, adu, len, "%s: re-decode of the encoding fails: %s", how,
               rtu_status_name(st));
    FUZZ_CHECK(memcmp(&back, req, sizeof back) == 0, adu, len,
               "%s: re-decoded request differs", how);

    rtu_request_t pdu_req;
    memset(&pdu_req, 0x3C, sizeof pdu_req);
    pdu_req.slave = req->slave;
    st = rtu_request_decode_pdu(enc + 1, (size_t)n - 3, &pdu_req);
    FUZZ_CHECK(st == RTU_OK && memcmp(&pdu_req, req, sizeof pdu_req) == 0, adu, len,
               "%s: PDU decode of the encoding differs from the ADU decode (%s)", how,
               rtu_status_name(st));

    for (size_t have = 0; have <= (size_t)n; have++) {
        int predicted = rtu_request_length(enc, have);
        FUZZ_CHECK(predicted <= 0 || predicted == n, adu, len,
                   "%s: rtu_request_length(%zu bytes) = %d, frame is %d", how, have,
                   predicted, n);
    }
}

static void try_adu(const uint8_t *adu, size_t len, const char *how)
{
    rtu_request_t req;
    memset(&req, 0xA5, sizeof req);
    rtu_status_t st = rtu_request_decode(adu, len, &req);
    FUZZ_CHECK(st < RTU_STATUS_COUNT, adu, len, "%s: status %d out of range", how, (int)st);
    if (st == RTU_OK)
        roundtrip(&req, adu, len, how);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size heap copies, so ASan catches a read one byte past. */
    uint8_t *buf = malloc(size + 3);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    try_adu(buf, size, "adu");

    if (size >= RTU_MIN_ADU && size <= RTU_MAX_ADU + 8) {
        uint16_t crc = rtu_crc16_reference(buf, size - 2);
        buf[size - 2] = (uint8_t)crc;
        buf[size - 1] = (uint8_t)(crc >> 8);
        try_adu(buf, size, "adu with crc fixed");
    }

    /* As a PDU: first byte is the slave, the rest the PDU. */
    if (size >= 1) {
        size_t plen = size - 1;
        uint8_t *pdu = malloc(plen ? plen : 1);
        if (pdu) {
            if (plen)
                memcpy(pdu, data + 1, plen);
            rtu_request_t req;
            memset(&req, 0xA5, sizeof req);
            req.slave = data[0];
            rtu_status_t st = rtu_request_decode_pdu(pdu, plen, &req);
            FUZZ_CHECK(st < RTU_STATUS_COUNT, data, size, "pdu: status %d out of range", (int)st);
            FUZZ_CHECK(req.slave == data[0], data, size, "pdu: decode lost the slave");
            if (st == RTU_OK) {
                int n = rtu_adu_from_pdu(data[0], pdu, plen, buf, size + 3);
                FUZZ_CHECK(n == (int)size + 2, data, size, "pdu: rtu_adu_from_pdu gave %d", n);
                roundtrip(&req, buf, (size_t)n, "pdu");
            }
            free(pdu);
        }
    }
    free(buf);
    return 0;
}
