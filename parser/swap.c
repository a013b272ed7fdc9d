/*
 * parser/swap.c -- big-endian register words to host order, with SIMD.
 *
 * A register response carries up to 125 big-endian words right after an odd
 * (3-byte) header, so loads are unaligned by nature. One byte shuffle per
 * 32 (AVX2) or 16 (SSSE3, NEON) bytes swaps every pair; the words left over
 * go through the scalar loop. The source is never read past its end.
 */
#include "parser/internal.h"

#include <stdlib.h>
#include <string.h>

enum swap_isa { SWAP_SCALAR, SWAP_SSSE3, SWAP_AVX2, SWAP_NEON };
static enum swap_isa swap_isa;

bool rtu_native_disabled(const char *feature)
{
    const char *list = getenv("RTUGW_NATIVE_DISABLE");
    size_t n = strlen(feature);

    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',') {
        if (strncmp(p, feature, n) == 0 && (p[n] == ',' || p[n] == 0))
            return true;
        if (strncmp(p, "all", 3) == 0 && (p[3] == ',' || p[3] == 0))
            return true;
    }
    return false;
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("ssse3")))
static size_t swap16_ssse3(uint16_t *dst, const uint8_t *src, size_t n)
{
    const __m128i mask = _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm_storeu_si128((__m128i *)(dst + i), _mm_shuffle_epi8(v, mask));
    }
    return i;
}

__attribute__((target("avx2")))
static size_t swap16_avx2(uint16_t *dst, const uint8_t *src, size_t n)
{
    const __m256i mask = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14,
                                          1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(src + 2 * i));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_shuffle_epi8(v, mask));
    }
    return i + swap16_ssse3(dst + i, src + 2 * i, n - i);
}

static enum swap_isa detect(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && !rtu_native_disabled("avx2"))
        return SWAP_AVX2;
    if (__builtin_cpu_supports("ssse3") && !rtu_native_disabled("ssse3"))
        return SWAP_SSSE3;
    return SWAP_SCALAR;
}

#elif defined(__aarch64__)
#include <arm_neon.h>

/* Advanced SIMD is part of every ARMv8-A profile Linux runs on. */
static size_t swap16_neon(uint16_t *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
        vst1q_u8((uint8_t *)(dst + i), vrev16q_u8(vld1q_u8(src + 2 * i)));
    return i;
}

static enum swap_isa detect(void)
{
    return rtu_native_disabled("neon") ? SWAP_SCALAR : SWAP_NEON;
}

#else

static enum swap_isa detect(void)
{
    return SWAP_SCALAR;
}

#endif

void rtu_swap16_native(uint16_t *dst, const uint8_t *src, size_t n)
{
    size_t done = 0;

    switch (swap_isa) {
#if defined(__x86_64__)
    case SWAP_AVX2: done = swap16_avx2(dst, src, n); break;
    case SWAP_SSSE3: done = swap16_ssse3(dst, src, n); break;
#elif defined(__aarch64__)
    case SWAP_NEON: done = swap16_neon(dst, src, n); break;
#endif
    default: break;
    }
    rtu_swap16_scalar(dst + done, src + 2 * done, n - done);
}

const char *rtu_swap16_native_isa(void)
{
    static const char *const names[] = {
        [SWAP_SCALAR] = "scalar", [SWAP_SSSE3] = "ssse3", [SWAP_AVX2] = "avx2", [SWAP_NEON] = "neon",
    };
    return names[swap_isa];
}

__attribute__((constructor))
static void swap_init(void)
{
    swap_isa = detect();
}
