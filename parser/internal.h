/*
 * parser/internal.h -- shared between the parser's own .c files only.
 * Not installed, not included outside parser/.
 */
#ifndef RTUGW_PARSER_INTERNAL_H
#define RTUGW_PARSER_INTERNAL_H

#include "parser/rtu.h"

/* CRC continuation with an explicit starting register (no init applied). */
uint16_t rtu_crc16_slice8_update(uint16_t crc, const uint8_t *buf, size_t len);

/*
 * RTUGW_NATIVE_DISABLE=clmul,avx2,ssse3,neon turns native features off, so
 * the tests can run every lower tier on a CPU that has them all, and a user
 * can rule the accelerated path out when comparing. Read once at load time.
 */
bool rtu_native_disabled(const char *feature);

/* True when rtu_crc16_native() uses carry-less multiply on this CPU. */
bool rtu_crc16_native_accelerated(void);

/* Byte-swap n big-endian 16-bit words from src into host-order dst. */
typedef void (*rtu_swap_fn)(uint16_t *dst, const uint8_t *src, size_t n);
void rtu_swap16_scalar(uint16_t *dst, const uint8_t *src, size_t n);
/* SIMD swap (AVX2 or SSSE3 by CPU detection), scalar where neither exists. */
void rtu_swap16_native(uint16_t *dst, const uint8_t *src, size_t n);
/* "pclmul+avx2" and the like, for reports. */
const char *rtu_swap16_native_isa(void);

static inline uint16_t rtu_get_be16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint16_t rtu_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline void rtu_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void rtu_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline bool rtu_is_register_read(uint8_t fc)
{
    return fc == 3 || fc == 4 || fc == 23;
}

static inline bool rtu_is_bit_read(uint8_t fc)
{
    return fc == 1 || fc == 2;
}

#endif
