/*
 * tests/unit/framertest.h -- what the framer's tests share (test_framer.c,
 * test_framer_noise.c, test_framer_random.c, one program): frames made with
 * their CRC, a framer at a baud rate, and a drain that checks every frame's
 * crc_ok. Static inline, so that no file exports a bare name like mk().
 */
#ifndef RTUGW_TESTS_FRAMERTEST_H
#define RTUGW_TESTS_FRAMERTEST_H

#include "parser/rtu.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The framer's buffer is 2 * 256 + 64 bytes (parser/framer.c). */
#define FRAMER_CAP (2 * RTU_MAX_ADU + 64)
#define MAX_OUT 4096

static const uint64_t T0 = 1000000000ull; /* any monotonic start */

typedef struct out {
    rtu_frame_t f[MAX_OUT];
    size_t n;
    uint64_t bytes; /* sum of frame lengths */
} out_t;

static inline out_t *out_new(void)
{
    out_t *o = calloc(1, sizeof *o);
    assert_non_null(o);
    return o;
}

/* Drain every ready frame; every frame's crc_ok must tell the truth. */
static inline size_t drain(rtu_framer_t *fr, out_t *o)
{
    size_t got = 0;
    rtu_frame_t f;
    while (rtu_framer_next(fr, &f)) {
        assert_true(f.len >= 1 && f.len <= RTU_MAX_ADU);
        int good = f.len >= 4 &&
                   rtu_crc16_reference(f.adu, f.len - 2) == (f.adu[f.len - 2] | f.adu[f.len - 1] << 8);
        assert_int_equal(f.crc_ok, good);
        assert_true(f.t_first_ns <= f.t_last_ns);
        assert_true(o->n < MAX_OUT);
        o->f[o->n++] = f;
        o->bytes += f.len;
        got++;
    }
    return got;
}

static inline size_t put_crc(uint8_t *a, size_t len_without_crc)
{
    uint16_t crc = rtu_crc16_reference(a, len_without_crc);
    a[len_without_crc] = (uint8_t)crc;
    a[len_without_crc + 1] = (uint8_t)(crc >> 8);
    return len_without_crc + 2;
}

/* slave, function, then n data bytes, then the CRC. */
static inline size_t mk(uint8_t *a, uint8_t slave, uint8_t fc, const uint8_t *data, size_t n)
{
    a[0] = slave;
    a[1] = fc;
    memcpy(a + 2, data, n);
    return put_crc(a, 2 + n);
}

static inline void assert_frame(const rtu_frame_t *f, const uint8_t *adu, size_t len)
{
    assert_int_equal(f->len, len);
    assert_memory_equal(f->adu, adu, len);
    assert_int_equal(f->crc_ok, 1);
}

static inline rtu_framer_t *framer(unsigned baud, rtu_frame_dir_t dir)
{
    rtu_framer_config_t cfg = { .baud = baud, .char_bits = 11, .dir = dir };
    rtu_framer_t *fr = rtu_framer_new(&cfg);
    assert_non_null(fr);
    return fr;
}

static inline uint64_t char_ns(unsigned baud)
{
    return 11ull * 1000000000ull / baud;
}

static inline rtu_framer_stats_t stats(const rtu_framer_t *fr)
{
    rtu_framer_stats_t st;
    rtu_framer_get_stats(fr, &st);
    return st;
}


/* A read's answer: slave, fc 3, regs registers of values made from i and slave. */
static inline size_t mk_read(uint8_t *a, uint8_t slave, size_t regs)
{
    uint8_t data[1 + 250];
    data[0] = (uint8_t)(2 * regs);
    for (size_t i = 1; i <= 2 * regs; i++)
        data[i] = (uint8_t)(i * 37 + slave);
    return mk(a, slave, 3, data, 1 + 2 * regs);
}

/* The groups of the other two files, run by test_framer.c's main after its own. */
extern const struct CMUnitTest framer_noise_tests[];
extern const size_t framer_noise_count;
extern const struct CMUnitTest framer_random_tests[];
extern const size_t framer_random_count;

#endif
