/*
 * parser/crc.c -- CRC-16/MODBUS four ways.
 *
 * The CRC is the reflected CRC-16 with polynomial x^16 + x^15 + x^2 + 1
 * (0x8005, reflected 0xA001), init 0xFFFF, no final xor. "Reflected" means
 * the least significant bit of the first byte is the highest-degree
 * coefficient of the message polynomial M(x); the CRC is M(x)*x^16 mod P(x)
 * with the init folded into the first two bytes.
 *
 *   reference  bit at a time, for obviousness
 *   bytetable  libmodbus's form: two 256-entry tables, one byte per step
 *   fallback   slicing-by-8: eight table look-ups per 8 bytes, independent
 *              of each other, so the CPU overlaps them
 *   native     carry-less multiply (PCLMULQDQ) folding of 16-byte blocks
 *              down to one 128-bit remainder, finished with slicing-by-8
 *
 * Tables and fold constants are computed once at load time (a constructor),
 * so no code path ever sees them half built, and they are read-only after.
 */
#include "parser/internal.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CRC_POLY_REFLECTED 0xA001u
#define CRC_POLY_NORMAL 0x18005u /* with the x^16 term */

static uint16_t slice_table[8][256];
static uint8_t bytetable_hi[256];
static uint8_t bytetable_lo[256];

uint16_t rtu_crc16_reference(const uint8_t *buf, size_t len)
{
    uint16_t crc = 0xFFFF;

    for (size_t i = 0; i < len; i++) {
        crc ^= buf[i];
        for (int bit = 0; bit < 8; bit++) {
            if (crc & 1)
                crc = (uint16_t)((crc >> 1) ^ CRC_POLY_REFLECTED);
            else
                crc = (uint16_t)(crc >> 1);
        }
    }
    return crc;
}

static uint16_t crc16_bitwise_step(uint16_t crc)
{
    for (int bit = 0; bit < 8; bit++)
        crc = (crc & 1) ? (uint16_t)((crc >> 1) ^ CRC_POLY_REFLECTED) : (uint16_t)(crc >> 1);
    return crc;
}

uint16_t rtu_crc16_slice8_update(uint16_t crc, const uint8_t *buf, size_t len)
{
    while (len >= 8) {
        uint32_t lo = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 |
                      (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24;
        lo ^= crc;
        crc = (uint16_t)(slice_table[7][lo & 0xFF] ^ slice_table[6][(lo >> 8) & 0xFF] ^
                         slice_table[5][(lo >> 16) & 0xFF] ^ slice_table[4][lo >> 24] ^
                         slice_table[3][buf[4]] ^ slice_table[2][buf[5]] ^
                         slice_table[1][buf[6]] ^ slice_table[0][buf[7]]);
        buf += 8;
        len -= 8;
    }
    while (len--)
        crc = (uint16_t)((crc >> 8) ^ slice_table[0][(crc ^ *buf++) & 0xFF]);
    return crc;
}

uint16_t rtu_crc16_fallback(const uint8_t *buf, size_t len)
{
    return rtu_crc16_slice8_update(0xFFFF, buf, len);
}

/* libmodbus keeps the CRC as two bytes and looks each up in its own table. */
uint16_t rtu_crc16_bytetable(const uint8_t *buf, size_t len)
{
    uint8_t hi = 0xFF, lo = 0xFF;

    while (len--) {
        unsigned i = hi ^ *buf++;
        hi = (uint8_t)(lo ^ bytetable_hi[i]);
        lo = bytetable_lo[i];
    }
    return (uint16_t)(lo << 8 | hi);
}

#if defined(__x86_64__)

/*
 * Folding. Load 16 bytes little-endian into X: bit k of X is the coefficient
 * of x^(127-k) of that block. The low qword is A*x^64 and the high qword B,
 * with A, B read as 64-bit reflected polynomials (bit k <-> x^(63-k)).
 * Moving X forward by D bits is X*x^D = A*x^(D+64) + B*x^D (mod P).
 * pclmul of two reflected 64-bit operands yields bit m <-> x^(126-m), one
 * short of the 128-bit reflected layout, so each constant carries one x
 * less: lo constant x^(D+63) mod P, hi constant x^(D-1) mod P, both
 * reflected into the top 16 bits of a qword. The result is congruent to
 * X*x^D and has degree < 128, so it XORs straight onto the next block.
 */
typedef struct fold_constants {
    uint64_t by128[2];
    uint64_t by256[2];
    uint64_t by384[2];
    uint64_t by512[2];
} fold_constants_t;

static fold_constants_t fold;
static bool have_pclmul;

static uint16_t xn_mod_p(unsigned n)
{
    uint32_t r = 1;

    while (n--) {
        r <<= 1;
        if (r & 0x10000)
            r ^= CRC_POLY_NORMAL;
    }
    return (uint16_t)r;
}

static uint64_t reflect16_to_qword(uint16_t v)
{
    uint64_t r = 0;

    for (int d = 0; d < 16; d++)
        if (v & (1u << d))
            r |= 1ull << (63 - d);
    return r;
}

static void fold_pair(uint64_t out[2], unsigned distance)
{
    out[0] = reflect16_to_qword(xn_mod_p(distance + 63));
    out[1] = reflect16_to_qword(xn_mod_p(distance - 1));
}

__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold_by(__m128i x, const uint64_t k[2])
{
    __m128i kk = _mm_set_epi64x((long long)k[1], (long long)k[0]);

    return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}

__attribute__((target("pclmul,sse4.1")))
static uint16_t crc16_clmul(const uint8_t *p, size_t n)
{
    /* n >= 16. The init value 0xFFFF is the same as xoring the first two bytes. */
    __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128(0xFFFF));
    uint8_t rest[16];

    p += 16;
    n -= 16;
    if (n >= 48) {
        /* Four independent accumulators hide the multiply latency. */
        __m128i x1 = _mm_loadu_si128((const __m128i *)p);
        __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));

        p += 48;
        n -= 48;
        while (n >= 64) {
            x = _mm_xor_si128(fold_by(x, fold.by512), _mm_loadu_si128((const __m128i *)p));
            x1 = _mm_xor_si128(fold_by(x1, fold.by512), _mm_loadu_si128((const __m128i *)(p + 16)));
            x2 = _mm_xor_si128(fold_by(x2, fold.by512), _mm_loadu_si128((const __m128i *)(p + 32)));
            x3 = _mm_xor_si128(fold_by(x3, fold.by512), _mm_loadu_si128((const __m128i *)(p + 48)));
            p += 64;
            n -= 64;
        }
        x = _mm_xor_si128(_mm_xor_si128(fold_by(x, fold.by384), fold_by(x1, fold.by256)),
                          _mm_xor_si128(fold_by(x2, fold.by128), x3));
    }
    while (n >= 16) {
        x = _mm_xor_si128(fold_by(x, fold.by128), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)rest, x);
    return rtu_crc16_slice8_update(rtu_crc16_slice8_update(0, rest, sizeof rest), p, n);
}

uint16_t rtu_crc16_native(const uint8_t *buf, size_t len)
{
    /* Below 32 bytes the 16-byte remainder costs as much as the message. */
    if (have_pclmul && len >= 32)
        return crc16_clmul(buf, len);
    return rtu_crc16_slice8_update(0xFFFF, buf, len);
}

static void native_init(void)
{
    __builtin_cpu_init();
    have_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    fold_pair(fold.by128, 128);
    fold_pair(fold.by256, 256);
    fold_pair(fold.by384, 384);
    fold_pair(fold.by512, 512);
}

bool rtu_crc16_native_accelerated(void)
{
    return have_pclmul;
}

#else /* no carry-less multiply path for this architecture yet */

uint16_t rtu_crc16_native(const uint8_t *buf, size_t len)
{
    return rtu_crc16_slice8_update(0xFFFF, buf, len);
}

static void native_init(void)
{
}

bool rtu_crc16_native_accelerated(void)
{
    return false;
}

#endif

uint16_t rtu_crc16(const uint8_t *buf, size_t len)
{
    return rtu_crc16_native(buf, len);
}

__attribute__((constructor))
static void crc_tables_init(void)
{
    for (unsigned b = 0; b < 256; b++)
        slice_table[0][b] = crc16_bitwise_step((uint16_t)b);
    for (unsigned b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            slice_table[k][b] = (uint16_t)((slice_table[k - 1][b] >> 8) ^
                                           slice_table[0][slice_table[k - 1][b] & 0xFF]);
    /* libmodbus's split tables are the same table, one byte each. */
    for (unsigned b = 0; b < 256; b++) {
        bytetable_hi[b] = (uint8_t)slice_table[0][b];
        bytetable_lo[b] = (uint8_t)(slice_table[0][b] >> 8);
    }
    native_init();
}
