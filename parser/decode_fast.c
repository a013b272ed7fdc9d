/*
 * parser/decode_fast.c -- the production response decoders.
 *
 * fallback, native and the libmodbus-style benchmark form share one body and
 * differ only in the CRC and the byte swap they are instantiated with; the
 * body is always inlined so each instance is as tight as hand-written code.
 * The rules and their order are those of decode_reference.c, which is the
 * specification: change both or neither.
 */
#include "parser/internal.h"

#include <stddef.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef uint16_t (*crc_fn)(const uint8_t *buf, size_t len);

/*
 * Clearing the 272-byte envelope is a good part of decoding a short frame.
 * glibc's memset for that size is a call and a dispatch; 17 unaligned
 * 16-byte stores (SSE2 is part of x86-64) are straight-line and cheaper.
 */
static inline __attribute__((always_inline)) void envelope_clear(rtu_envelope_t *out)
{
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    uint8_t *p = (uint8_t *)out;
    /* Unrolled on purpose: as a loop, GCC recognises a memset and emits
     * `rep stosq`, whose start-up alone costs more than these stores. */
#pragma GCC unroll 17
    for (size_t i = 0; i < sizeof *out; i += 16)
        _mm_storeu_si128((__m128i *)(p + i), zero);
#else
    memset(out, 0, sizeof *out);
#endif
}

/* Decide the status before touching the payload, so error envelopes cost
 * one memset and every path rejects with the same status. */
static inline __attribute__((always_inline)) rtu_status_t
decode_check(const uint8_t *adu, size_t len, crc_fn crc)
{
    if (len < RTU_MIN_ADU)
        return RTU_ERR_SHORT;
    if (len > RTU_MAX_ADU)
        return RTU_ERR_LONG;
    if (crc(adu, len - 2) != rtu_get_le16(adu + len - 2))
        return RTU_ERR_CRC;

    uint8_t fc = adu[1];
    if (fc == 0)
        return RTU_ERR_FUNCTION;
    if (fc & 0x80)
        return len == 5 ? RTU_OK : RTU_ERR_LENGTH;
    if (rtu_is_bit_read(fc) || rtu_is_register_read(fc)) {
        if (len < 5)
            return RTU_ERR_SHORT;
        size_t bc = adu[2];
        if (bc != len - 5 || bc == 0 || bc > RTU_MAX_BYTECOUNT)
            return RTU_ERR_BYTECOUNT;
        if (rtu_is_register_read(fc) && (bc & 1))
            return RTU_ERR_BYTECOUNT;
        return RTU_OK;
    }
    if (fc == 5 || fc == 6 || fc == 15 || fc == 16) {
        if (len != 8)
            return RTU_ERR_LENGTH;
        uint16_t value = rtu_get_be16(adu + 4);
        if (fc == 5 && value != 0xFF00 && value != 0x0000)
            return RTU_ERR_VALUE;
        return RTU_OK;
    }
    if (fc == 22)
        return len == 10 ? RTU_OK : RTU_ERR_LENGTH;
    return RTU_OK;
}

static inline __attribute__((always_inline)) rtu_status_t
decode_body(const uint8_t *adu, size_t len, rtu_envelope_t *out, crc_fn crc, rtu_swap_fn swap)
{
    rtu_status_t st = decode_check(adu, len, crc);

    if (st != RTU_OK) {
        envelope_clear(out);
        out->status = (uint8_t)st;
        return st;
    }
    /* One clear of the whole envelope, then the payload over it: clearing
     * only the tail past the payload (a variable size) became a loop that
     * cost more than the rest of a short frame's decode. */
    envelope_clear(out);

    uint8_t fc = adu[1];
    out->slave = adu[0];
    out->function = fc;
    if (fc & 0x80) {
        out->kind = RTU_KIND_EXCEPTION;
        out->exception = adu[2];
    } else if (rtu_is_register_read(fc)) {
        out->kind = RTU_KIND_REGISTERS;
        out->count = (uint16_t)(adu[2] >> 1);
        swap(out->data.regs, adu + 3, out->count);
    } else if (rtu_is_bit_read(fc)) {
        out->kind = RTU_KIND_BITS;
        out->count = (uint16_t)(adu[2] * 8);
        memcpy(out->data.bytes, adu + 3, adu[2]);
    } else if (fc == 5 || fc == 6 || fc == 15 || fc == 16 || fc == 22) {
        out->kind = fc == 22 ? RTU_KIND_MASK
                  : (fc == 5 || fc == 6) ? RTU_KIND_SINGLE : RTU_KIND_MULTIPLE;
        out->address = rtu_get_be16(adu + 2);
        out->value = rtu_get_be16(adu + 4);
        if (fc == 22)
            out->or_mask = rtu_get_be16(adu + 6);
    } else {
        out->kind = RTU_KIND_RAW;
        out->count = (uint16_t)(len - 4);
        memcpy(out->data.bytes, adu + 2, len - 4);
    }
    return RTU_OK;
}

void rtu_swap16_scalar(uint16_t *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = rtu_get_be16(src + 2 * i);
}

rtu_status_t rtu_decode_fallback(const uint8_t *adu, size_t len, rtu_envelope_t *out)
{
    return decode_body(adu, len, out, rtu_crc16_fallback, rtu_swap16_scalar);
}

rtu_status_t rtu_decode_bytetable(const uint8_t *adu, size_t len, rtu_envelope_t *out)
{
    return decode_body(adu, len, out, rtu_crc16_bytetable, rtu_swap16_scalar);
}

/* Below 16 words a vector pass cannot start; skip the dispatch entirely. */
static inline __attribute__((always_inline)) void swap_native(uint16_t *dst, const uint8_t *src,
                                                              size_t n)
{
    if (n < 16)
        rtu_swap16_scalar(dst, src, n);
    else
        rtu_swap16_native(dst, src, n);
}

rtu_status_t rtu_decode_native(const uint8_t *adu, size_t len, rtu_envelope_t *out)
{
    return decode_body(adu, len, out, rtu_crc16_native, swap_native);
}
