/*
 * parser/decode_reference.c -- the response decoder written for obviousness.
 *
 * Bitwise CRC, one byte at a time, every rule spelled out in the order all
 * three decoders apply them. The other two paths are checked against this
 * one; it is never on a hot path except for shadow verification.
 */
#include "parser/internal.h"

#include <string.h>

static rtu_status_t fail(rtu_envelope_t *out, rtu_status_t status)
{
    memset(out, 0, sizeof *out);
    out->status = (uint8_t)status;
    return status;
}

rtu_status_t rtu_decode_reference(const uint8_t *adu, size_t len, rtu_envelope_t *out)
{
    memset(out, 0, sizeof *out);

    /* 1. Frame size. */
    if (len < RTU_MIN_ADU)
        return fail(out, RTU_ERR_SHORT);
    if (len > RTU_MAX_ADU)
        return fail(out, RTU_ERR_LONG);

    /* 2. CRC, sent low byte first. */
    uint16_t crc = rtu_crc16_reference(adu, len - 2);
    uint16_t wire = (uint16_t)(adu[len - 2] | (adu[len - 1] << 8));
    if (crc != wire)
        return fail(out, RTU_ERR_CRC);

    uint8_t slave = adu[0];
    uint8_t function = adu[1];

    /* 3. Function code. */
    if (function == 0)
        return fail(out, RTU_ERR_FUNCTION);

    if (function & 0x80) {
        /* Exception: slave, function, code, CRC -- exactly five bytes. */
        if (len != 5)
            return fail(out, RTU_ERR_LENGTH);
        out->kind = RTU_KIND_EXCEPTION;
        out->exception = adu[2];
    } else if (function == 1 || function == 2 || function == 3 || function == 4 || function == 23) {
        if (len < 5)
            return fail(out, RTU_ERR_SHORT);
        unsigned byte_count = adu[2];
        if (byte_count != len - 5)
            return fail(out, RTU_ERR_BYTECOUNT);
        if (byte_count == 0 || byte_count > RTU_MAX_BYTECOUNT)
            return fail(out, RTU_ERR_BYTECOUNT);
        if (function == 1 || function == 2) {
            out->kind = RTU_KIND_BITS;
            for (unsigned i = 0; i < byte_count; i++)
                out->data.bytes[i] = adu[3 + i];
            out->count = (uint16_t)(byte_count * 8);
        } else {
            if (byte_count % 2 != 0)
                return fail(out, RTU_ERR_BYTECOUNT);
            out->kind = RTU_KIND_REGISTERS;
            for (unsigned i = 0; i < byte_count / 2; i++) {
                unsigned high = adu[3 + 2 * i];
                unsigned low = adu[3 + 2 * i + 1];
                out->data.regs[i] = (uint16_t)(high * 256 + low);
            }
            out->count = (uint16_t)(byte_count / 2);
        }
    } else if (function == 5 || function == 6 || function == 15 || function == 16) {
        if (len != 8)
            return fail(out, RTU_ERR_LENGTH);
        uint16_t address = (uint16_t)(adu[2] * 256 + adu[3]);
        uint16_t value = (uint16_t)(adu[4] * 256 + adu[5]);
        if (function == 5 && value != 0xFF00 && value != 0x0000)
            return fail(out, RTU_ERR_VALUE);
        out->kind = (function == 5 || function == 6) ? RTU_KIND_SINGLE : RTU_KIND_MULTIPLE;
        out->address = address;
        out->value = value;
    } else if (function == 22) {
        if (len != 10)
            return fail(out, RTU_ERR_LENGTH);
        out->kind = RTU_KIND_MASK;
        out->address = (uint16_t)(adu[2] * 256 + adu[3]);
        out->value = (uint16_t)(adu[4] * 256 + adu[5]);
        out->or_mask = (uint16_t)(adu[6] * 256 + adu[7]);
    } else {
        /* No decoder for this function: keep the PDU after the function code. */
        out->kind = RTU_KIND_RAW;
        for (size_t i = 2; i < len - 2; i++)
            out->data.bytes[i - 2] = adu[i];
        out->count = (uint16_t)(len - 4);
    }

    out->status = RTU_OK;
    out->slave = slave;
    out->function = function;
    return RTU_OK;
}
