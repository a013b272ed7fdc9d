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
    if (len >= 4) {
        /* Half a slice: short frames (a 7-byte response has 5 CRC bytes)
         * would otherwise pay five dependent look-ups. */
        uint32_t lo = ((uint32_t)buf[0] | (uint32_t)buf[1] << 8) ^ crc;
        crc = (uint16_t)(slice_table[3][lo & 0xFF] ^ slice_table[2][lo >> 8] ^
                         slice_table[1][buf[2]] ^ slice_table[0][buf[3]]);
        buf += 4;
        len -= 4;
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

/*
 * Folding. Load 16 bytes little-endian into X: bit k of X is the coefficient
 * of x^(127-k) of that block. The low qword is A*x^64 and the high qword B,
 * with A, B read as 64-bit reflected polynomials (bit k <-> x^(63-k)).
 * Moving X forward by D bits is X*x^D = A*x^(D+64) + B*x^D (mod P).
 * A carry-less multiply of two reflected 64-bit operands yields bit
 * m <-> x^(126-m), one short of the 128-bit reflected layout, so each
 * constant carries one x less: lo constant x^(D+63) mod P, hi constant
 * x^(D-1) mod P, both reflected into the top 16 bits of a qword. The result
 * is congruent to X*x^D and has degree < 128, so it XORs straight onto the
 * next block. The same arithmetic runs on PCLMULQDQ and on PMULL; only the
 * five vector operations below differ per architecture.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_FOLD 1
#define FOLD_TARGET __attribute__((target("pclmul,sse4.1,ssse3")))
typedef __m128i vec128_t;

FOLD_TARGET static inline vec128_t v_load(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

FOLD_TARGET static inline vec128_t v_xor(vec128_t a, vec128_t b)
{
    return _mm_xor_si128(a, b);
}

FOLD_TARGET static inline vec128_t v_low16(unsigned v)
{
    return _mm_cvtsi32_si128((int)v);
}

FOLD_TARGET static inline vec128_t v_fold(vec128_t x, const uint64_t k[2])
{
    __m128i kk = _mm_set_epi64x((long long)k[1], (long long)k[0]);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}

/* Byte j of the result is byte mask[j] of v, or 0 where mask[j] >= 0x80. */
FOLD_TARGET static inline vec128_t v_shuffle(vec128_t v, const uint8_t mask[16])
{
    return _mm_shuffle_epi8(v, v_load(mask));
}

static bool cpu_has_clmul(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") &&
           __builtin_cpu_supports("ssse3");
}

#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#include <asm/hwcap.h>
#define HAVE_FOLD 1
#define FOLD_TARGET __attribute__((target("+crypto")))
typedef uint8x16_t vec128_t;

FOLD_TARGET static inline vec128_t v_load(const uint8_t *p)
{
    return vld1q_u8(p);
}

FOLD_TARGET static inline vec128_t v_xor(vec128_t a, vec128_t b)
{
    return veorq_u8(a, b);
}

FOLD_TARGET static inline vec128_t v_low16(unsigned v)
{
    return vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(v), vcreate_u64(0)));
}

FOLD_TARGET static inline vec128_t v_fold(vec128_t x, const uint64_t k[2])
{
    uint64x2_t q = vreinterpretq_u64_u8(x);
    poly128_t lo = vmull_p64((poly64_t)vgetq_lane_u64(q, 0), (poly64_t)k[0]);
    poly128_t hi = vmull_p64((poly64_t)vgetq_lane_u64(q, 1), (poly64_t)k[1]);
    return veorq_u8(vreinterpretq_u8_p128(lo), vreinterpretq_u8_p128(hi));
}

/* TBL gives 0 for indices >= 16, as PSHUFB does for >= 0x80. */
FOLD_TARGET static inline vec128_t v_shuffle(vec128_t v, const uint8_t mask[16])
{
    return vqtbl1q_u8(v, vld1q_u8(mask));
}

static bool cpu_has_clmul(void)
{
    return (getauxval(AT_HWCAP) & HWCAP_PMULL) != 0;
}
#endif

#ifdef HAVE_FOLD

typedef struct fold_constants {
    uint64_t by128[2];
    uint64_t by256[2];
    uint64_t by384[2];
    uint64_t by512[2];
} fold_constants_t;

static fold_constants_t fold;
static bool have_clmul;
/* head_shift[r]: shuffle mask moving bytes 0..r-1 to 16-r..15, zeros below. */
static uint8_t head_shift[16][16];

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

/*
 * A length that is not a multiple of 16 would leave a tail for the byte
 * tables, which costs more than all the folding. Instead the message is
 * thought of as preceded by 16 - (n % 16) zero bytes: leading zeros leave a
 * CRC with zero init unchanged, so the first block is the head of the
 * message shifted up and every later block is a plain 16-byte load. The
 * init 0xFFFF is xored into the first two message bytes, wherever the shift
 * put them.
 */
FOLD_TARGET
static uint16_t crc16_fold(const uint8_t *p, size_t n)
{
    /* n >= 32, so both loads of the head are inside the message. */
    const vec128_t init = v_low16(0xFFFF);
    size_t r = n & 15;
    vec128_t x;
    uint8_t rest[16];

    if (r) {
        vec128_t head = v_xor(v_load(p), init);
        vec128_t next = v_load(p + r);
        if (r == 1) /* the second message byte starts the second block */
            next = v_xor(next, v_low16(0xFF));
        x = v_xor(v_fold(v_shuffle(head, head_shift[r]), fold.by128), next);
        p += r + 16;
        n -= r + 16;
    } else {
        x = v_xor(v_load(p), init);
        p += 16;
        n -= 16;
    }
    if (n >= 48) {
        /* Four independent accumulators hide the multiply latency. */
        vec128_t x1 = v_load(p), x2 = v_load(p + 16), x3 = v_load(p + 32);

        p += 48;
        n -= 48;
        while (n >= 64) {
            x = v_xor(v_fold(x, fold.by512), v_load(p));
            x1 = v_xor(v_fold(x1, fold.by512), v_load(p + 16));
            x2 = v_xor(v_fold(x2, fold.by512), v_load(p + 32));
            x3 = v_xor(v_fold(x3, fold.by512), v_load(p + 48));
            p += 64;
            n -= 64;
        }
        x = v_xor(v_xor(v_fold(x, fold.by384), v_fold(x1, fold.by256)),
                  v_xor(v_fold(x2, fold.by128), x3));
    }
    while (n >= 16) {
        x = v_xor(v_fold(x, fold.by128), v_load(p));
        p += 16;
        n -= 16;
    }
    /* n == 0 here: x is the whole message mod P; times x^16 is the CRC. */
    memcpy(rest, &x, sizeof rest);
    return rtu_crc16_slice8_update(0, rest, sizeof rest);
}

uint16_t rtu_crc16_native(const uint8_t *buf, size_t len)
{
    /* Below 32 bytes the 16-byte remainder costs as much as the message. */
    if (have_clmul && len >= 32)
        return crc16_fold(buf, len);
    return rtu_crc16_slice8_update(0xFFFF, buf, len);
}

static void native_init(void)
{
    have_clmul = cpu_has_clmul() && !rtu_native_disabled("clmul");
    for (int r = 0; r < 16; r++)
        for (int j = 0; j < 16; j++)
            head_shift[r][j] = j >= 16 - r ? (uint8_t)(j - (16 - r)) : 0x80;
    fold_pair(fold.by128, 128);
    fold_pair(fold.by256, 256);
    fold_pair(fold.by384, 384);
    fold_pair(fold.by512, 512);
}

bool rtu_crc16_native_accelerated(void)
{
    return have_clmul;
}

#else /* no carry-less multiply on this architecture: native is fallback */

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
