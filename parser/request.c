/*
 * parser/request.c -- request PDUs and ADUs (the TCP -> RTU direction and
 * replay), wrapping a PDU for either transport, and splitting a Modbus TCP
 * byte stream into MBAP ADUs.
 *
 * Quantity limits are those of the Modbus application protocol v1.1b3, so a
 * request we forward can always be answered within 256 bytes.
 */
#include "parser/internal.h"

#include <errno.h>
#include <string.h>

static rtu_status_t check_quantity(unsigned q, unsigned max)
{
    return (q >= 1 && q <= max) ? RTU_OK : RTU_ERR_VALUE;
}

/* A write payload: byte count at pdu[at], data after it, nothing after that. */
static rtu_status_t take_payload(const uint8_t *pdu, size_t len, size_t at, unsigned expect_bc,
                                 rtu_request_t *req)
{
    if (len < at + 1)
        return RTU_ERR_SHORT;
    req->byte_count = pdu[at];
    if (pdu[at] != expect_bc || len != at + 1 + (size_t)pdu[at])
        return RTU_ERR_BYTECOUNT;
    memcpy(req->data, pdu + at + 1, pdu[at]);
    req->data_len = pdu[at];
    return RTU_OK;
}

rtu_status_t rtu_request_decode_pdu(const uint8_t *pdu, size_t len, rtu_request_t *req)
{
    uint8_t slave = req->slave;
    rtu_status_t st;

    memset(req, 0, sizeof *req);
    req->slave = slave;
    if (len < 1)
        return RTU_ERR_SHORT;
    if (len > RTU_MAX_PDU)
        return RTU_ERR_LONG;
    req->function = pdu[0];
    switch (pdu[0]) {
    case 1: case 2: case 3: case 4: case 5: case 6:
        if (len != 5)
            return len < 5 ? RTU_ERR_SHORT : RTU_ERR_LENGTH;
        req->address = rtu_get_be16(pdu + 1);
        req->quantity = rtu_get_be16(pdu + 3);
        if (pdu[0] <= 2)
            return check_quantity(req->quantity, 2000);
        if (pdu[0] <= 4)
            return check_quantity(req->quantity, RTU_MAX_REGISTERS);
        if (pdu[0] == 5 && req->quantity != 0xFF00 && req->quantity != 0)
            return RTU_ERR_VALUE;
        return RTU_OK;
    case 15: case 16:
        if (len < 6)
            return RTU_ERR_SHORT;
        req->write_address = rtu_get_be16(pdu + 1);
        req->write_quantity = rtu_get_be16(pdu + 3);
        st = check_quantity(req->write_quantity, pdu[0] == 15 ? 1968 : 123);
        if (st != RTU_OK)
            return st;
        return take_payload(pdu, len, 5,
                            pdu[0] == 15 ? (req->write_quantity + 7u) / 8u : req->write_quantity * 2u,
                            req);
    case 22:
        if (len != 7)
            return len < 7 ? RTU_ERR_SHORT : RTU_ERR_LENGTH;
        req->address = rtu_get_be16(pdu + 1);
        req->quantity = rtu_get_be16(pdu + 3);
        req->or_mask = rtu_get_be16(pdu + 5);
        return RTU_OK;
    case 23:
        if (len < 10)
            return RTU_ERR_SHORT;
        req->address = rtu_get_be16(pdu + 1);
        req->quantity = rtu_get_be16(pdu + 3);
        req->write_address = rtu_get_be16(pdu + 5);
        req->write_quantity = rtu_get_be16(pdu + 7);
        if ((st = check_quantity(req->quantity, RTU_MAX_REGISTERS)) != RTU_OK ||
            (st = check_quantity(req->write_quantity, 121)) != RTU_OK)
            return st;
        return take_payload(pdu, len, 9, req->write_quantity * 2u, req);
    default:
        if (pdu[0] == 0 || (pdu[0] & 0x80))
            return RTU_ERR_FUNCTION;
        memcpy(req->data, pdu + 1, len - 1);
        req->data_len = (uint16_t)(len - 1);
        return RTU_OK;
    }
}

rtu_status_t rtu_request_decode(const uint8_t *adu, size_t len, rtu_request_t *req)
{
    memset(req, 0, sizeof *req);
    if (len < RTU_MIN_ADU)
        return RTU_ERR_SHORT;
    if (len > RTU_MAX_ADU)
        return RTU_ERR_LONG;
    if (rtu_crc16(adu, len - 2) != rtu_get_le16(adu + len - 2))
        return RTU_ERR_CRC;
    req->slave = adu[0];
    return rtu_request_decode_pdu(adu + 1, len - 3, req);
}

int rtu_adu_from_pdu(uint8_t slave, const uint8_t *pdu, size_t pdu_len, uint8_t *adu, size_t cap)
{
    if (pdu_len < 1 || pdu_len > RTU_MAX_PDU)
        return -EMSGSIZE;
    if (cap < pdu_len + 3)
        return -ENOSPC;
    adu[0] = slave;
    memmove(adu + 1, pdu, pdu_len);
    rtu_put_le16(adu + 1 + pdu_len, rtu_crc16(adu, pdu_len + 1));
    return (int)(pdu_len + 3);
}

int rtu_request_encode(const rtu_request_t *req, uint8_t *adu, size_t cap)
{
    uint8_t pdu[RTU_MAX_PDU];
    size_t n = 0;

    pdu[n++] = req->function;
    switch (req->function) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 22:
        rtu_put_be16(pdu + n, req->address);
        rtu_put_be16(pdu + n + 2, req->quantity);
        n += 4;
        if (req->function == 22) {
            rtu_put_be16(pdu + n, req->or_mask);
            n += 2;
        }
        break;
    case 15: case 16: case 23:
        if (req->function == 23) {
            rtu_put_be16(pdu + n, req->address);
            rtu_put_be16(pdu + n + 2, req->quantity);
            n += 4;
        }
        rtu_put_be16(pdu + n, req->write_address);
        rtu_put_be16(pdu + n + 2, req->write_quantity);
        n += 4;
        if (req->data_len > RTU_MAX_PDU - n - 1)
            return -EMSGSIZE;
        pdu[n++] = (uint8_t)req->data_len;
        memcpy(pdu + n, req->data, req->data_len);
        n += req->data_len;
        break;
    default:
        if (req->function == 0 || (req->function & 0x80))
            return -EINVAL;
        if (req->data_len > RTU_MAX_PDU - 1)
            return -EMSGSIZE;
        memcpy(pdu + n, req->data, req->data_len);
        n += req->data_len;
        break;
    }
    return rtu_adu_from_pdu(req->slave, pdu, n, adu, cap);
}

int mbap_decode_header(const uint8_t *buf, size_t len, mbap_header_t *hdr)
{
    if (len < MBAP_HEADER_LEN)
        return -EAGAIN;
    hdr->transaction = rtu_get_be16(buf);
    hdr->protocol = rtu_get_be16(buf + 2);
    hdr->length = rtu_get_be16(buf + 4);
    hdr->unit = buf[6];
    if (hdr->protocol != 0)
        return -EPROTO;
    if (hdr->length < 2 || hdr->length > RTU_MAX_PDU + 1)
        return -EMSGSIZE;
    return 0;
}

int mbap_stream_next(const uint8_t *buf, size_t avail, mbap_header_t *hdr, size_t *adu_len)
{
    int rc = mbap_decode_header(buf, avail, hdr);

    if (rc == -EAGAIN)
        return 0;
    if (rc < 0)
        return rc;      /* hdr filled: the caller logs what it refuses */
    /* length counts the unit id, which is the header's 7th byte. */
    size_t need = MBAP_HEADER_LEN - 1 + (size_t)hdr->length;
    if (avail < need)
        return 0;
    *adu_len = need;
    return 1;
}

int mbap_encode(uint16_t transaction, uint8_t unit, const uint8_t *pdu, size_t pdu_len,
                uint8_t *out, size_t cap)
{
    if (pdu_len < 1 || pdu_len > RTU_MAX_PDU)
        return -EMSGSIZE;
    if (cap < MBAP_HEADER_LEN + pdu_len)
        return -ENOSPC;
    rtu_put_be16(out, transaction);
    rtu_put_be16(out + 2, 0);
    rtu_put_be16(out + 4, (uint16_t)(pdu_len + 1));
    out[6] = unit;
    memmove(out + MBAP_HEADER_LEN, pdu, pdu_len);
    return (int)(MBAP_HEADER_LEN + pdu_len);
}
