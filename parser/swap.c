/*
 * parser/swap.c -- big-endian register words to host order, with SIMD.
 *
 * A register response carries up to 125 big-endian words right after an odd
 * (3-byte) header, so loads are unaligned by nature. One byte shuffle per
 * 32 (AVX2) or 16 (SSSE3) bytes swaps every pair; the few words left over
 * go through the scalar loop. The source is never read past its end.
 */
#include "parser/internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

enum swap_isa { SWAP_SCALAR, SWAP_SSSE3, SWAP_AVX2 };
static enum swap_isa swap_isa;

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

void rtu_swap16_native(uint16_t *dst, const uint8_t *src, size_t n)
{
    size_t done = 0;

    if (swap_isa == SWAP_AVX2)
        done = swap16_avx2(dst, src, n);
    else if (swap_isa == SWAP_SSSE3)
        done = swap16_ssse3(dst, src, n);
    rtu_swap16_scalar(dst + done, src + 2 * done, n - done);
}

const char *rtu_swap16_native_isa(void)
{
    return swap_isa == SWAP_AVX2 ? "avx2" : swap_isa == SWAP_SSSE3 ? "ssse3" : "scalar";
}

__attribute__((constructor))
static void swap_init(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        swap_isa = SWAP_AVX2;
    else if (__builtin_cpu_supports("ssse3"))
        swap_isa = SWAP_SSSE3;
}

#else

void rtu_swap16_native(uint16_t *dst, const uint8_t *src, size_t n)
{
    rtu_swap16_scalar(dst, src, n);
}

const char *rtu_swap16_native_isa(void)
{
    return "scalar";
}

#endif
