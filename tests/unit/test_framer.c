/*
 * tests/unit/test_framer.c -- the streaming RTU framer: chunking, length and
 * silence delimiting, mid-frame gaps, resynchronisation, SNIFF splitting,
 * bounded memory, and a randomized stream with a printed seed.
 */
#include "parser/rtu.h"
#include "tests/lib/testutil.h"

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

static out_t *out_new(void)
{
    out_t *o = calloc(1, sizeof *o);
    assert_non_null(o);
    return o;
}

/* Drain every ready frame; every frame's crc_ok must tell the truth. */
static size_t drain(rtu_framer_t *fr, out_t *o)
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

static size_t put_crc(uint8_t *a, size_t len_without_crc)
{
    uint16_t crc = rtu_crc16_reference(a, len_without_crc);
    a[len_without_crc] = (uint8_t)crc;
    a[len_without_crc + 1] = (uint8_t)(crc >> 8);
    return len_without_crc + 2;
}

/* slave, function, then n data bytes, then the CRC. */
static size_t mk(uint8_t *a, uint8_t slave, uint8_t fc, const uint8_t *data, size_t n)
{
    a[0] = slave;
    a[1] = fc;
    memcpy(a + 2, data, n);
    return put_crc(a, 2 + n);
}

static void assert_frame(const rtu_frame_t *f, const uint8_t *adu, size_t len)
{
    assert_int_equal(f->len, len);
    assert_memory_equal(f->adu, adu, len);
    assert_int_equal(f->crc_ok, 1);
}

static rtu_framer_t *framer(unsigned baud, rtu_frame_dir_t dir)
{
    rtu_framer_config_t cfg = { .baud = baud, .char_bits = 11, .dir = dir };
    rtu_framer_t *fr = rtu_framer_new(&cfg);
    assert_non_null(fr);
    return fr;
}

static uint64_t char_ns(unsigned baud)
{
    return 11ull * 1000000000ull / baud;
}

static rtu_framer_stats_t stats(const rtu_framer_t *fr)
{
    rtu_framer_stats_t st;
    rtu_framer_get_stats(fr, &st);
    return st;
}

/* ---- chunking ------------------------------------------------------------ */

/* Each frame comes out exactly when its last byte arrives, not earlier. */
static void test_byte_by_byte(void **state)
{
    (void)state;
    size_t n;
    golden_frame_t *g = golden_load(&n);
    rtu_framer_t *fr = framer(9600, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    uint64_t t = T0, ch = char_ns(9600);
    for (size_t k = 0; k < 3; k++) { /* the three tiers: 7, 21, 255 bytes */
        uint64_t first = t + ch;
        for (size_t i = 0; i < g[k].len; i++) {
            t += ch;
            rtu_framer_feed(fr, &g[k].adu[i], 1, t);
            assert_int_equal(drain(fr, o), i + 1 == g[k].len ? 1 : 0);
        }
        assert_frame(&o->f[k], g[k].adu, g[k].len);
        assert_int_equal(o->f[k].t_first_ns, first);
        assert_int_equal(o->f[k].t_last_ns, t);
        t += 10 * ch; /* between polls */
    }
    rtu_framer_stats_t st = stats(fr);
    assert_int_equal(st.frames, 3);
    assert_int_equal(st.noise_bytes, 0);
    assert_int_equal(st.silence_splits, 0);
    rtu_framer_free(fr);
    free(o);
    free(g);
}

static void test_several_frames_in_one_chunk(void **state)
{
    (void)state;
    uint8_t a[64], b[64], c[64], chunk[256];
    static const uint8_t regs[] = { 4, 0x12, 0x34, 0x56, 0x78 };
    static const uint8_t wr[] = { 0x00, 0x10, 0xAB, 0xCD };
    static const uint8_t exc[] = { 0x02 };
    size_t la = mk(a, 1, 3, regs, sizeof regs);
    size_t lb = mk(b, 2, 6, wr, sizeof wr);
    size_t lc = mk(c, 3, 0x83, exc, sizeof exc);
    memcpy(chunk, a, la);
    memcpy(chunk + la, b, lb);
    memcpy(chunk + la + lb, c, lc);

    rtu_framer_t *fr = framer(115200, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    rtu_framer_feed(fr, chunk, la + lb + lc, T0);
    assert_int_equal(drain(fr, o), 3);
    assert_frame(&o->f[0], a, la);
    assert_frame(&o->f[1], b, lb);
    assert_frame(&o->f[2], c, lc);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(o->f[i].t_first_ns, T0);
        assert_int_equal(o->f[i].t_last_ns, T0);
        assert_int_equal(o->f[i].is_request, 0);
    }
    /* Split across chunks at every position: the same three frames. */
    for (size_t cut = 1; cut < la + lb + lc; cut++) {
        rtu_framer_reset(fr);
        o->n = 0;
        rtu_framer_feed(fr, chunk, cut, T0);
        drain(fr, o);
        rtu_framer_feed(fr, chunk + cut, la + lb + lc - cut, T0 + 1000);
        assert_int_equal(drain(fr, o) + 0, 3 - (cut >= la) - (cut >= la + lb));
        assert_int_equal(o->n, 3);
        assert_frame(&o->f[0], a, la);
        assert_frame(&o->f[1], b, lb);
        assert_frame(&o->f[2], c, lc);
        assert_int_equal(o->f[0].t_first_ns, T0);
        assert_int_equal(o->f[2].t_last_ns, T0 + 1000);
    }
    rtu_framer_free(fr);
    free(o);
}

/* Every golden frame alone; then all valid ones back to back in random chunks. */
static void test_golden_frames(void **state)
{
    (void)state;
    size_t n;
    golden_frame_t *g = golden_load(&n);
    uint64_t seed = test_seed("test_golden_frames"), rs = seed;
    out_t *o = out_new();
    size_t valid = 0;
    for (size_t i = 0; i < n; i++) {
        rtu_framer_t *fr = framer(19200, RTU_DIR_RESPONSE);
        size_t before = o->n;
        rtu_framer_feed(fr, g[i].adu, g[i].len, T0);
        drain(fr, o);
        rtu_framer_idle(fr, T0 + rtu_t35_ns(19200, 11));
        drain(fr, o);
        rtu_framer_stats_t st = stats(fr);
        uint64_t emitted = 0;
        for (size_t k = before; k < o->n; k++)
            emitted += o->f[k].len;
        if (emitted + st.noise_bytes != g[i].len)
            fail_msg("golden line %zu: %llu bytes framed + %llu noise != %zu", i + 1,
                     (unsigned long long)emitted, (unsigned long long)st.noise_bytes, g[i].len);
        if (g[i].ok) {
            /* A valid response is found by its length, never by silence. */
            if (o->n != before + 1 || st.silence_splits != 0)
                fail_msg("golden line %zu: %zu frames: %s", i + 1, o->n - before, g[i].line);
            assert_frame(&o->f[before], g[i].adu, g[i].len);
            valid++;
        }
        rtu_framer_free(fr);
    }
    assert_true(valid > 200);

    /* Back to back, no silence, random chunks, baud 0 and 115200. */
    static const unsigned bauds[] = { 0, 115200 };
    for (size_t b = 0; b < 2; b++) {
        rtu_framer_t *fr = framer(bauds[b], RTU_DIR_RESPONSE);
        static uint8_t stream[400 * 256];
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            if (g[i].ok) {
                memcpy(stream + len, g[i].adu, g[i].len);
                len += g[i].len;
            }
        }
        o->n = 0;
        uint64_t t = T0;
        for (size_t pos = 0; pos < len;) {
            size_t take = 1 + test_rand(&rs) % 40;
            if (take > len - pos)
                take = len - pos;
            t += take * (bauds[b] ? char_ns(bauds[b]) : 1);
            rtu_framer_feed(fr, stream + pos, take, t);
            drain(fr, o);
            pos += take;
        }
        assert_int_equal(o->n, valid);
        for (size_t i = 0, k = 0; i < n; i++)
            if (g[i].ok)
                assert_frame(&o->f[k++], g[i].adu, g[i].len);
        assert_int_equal(stats(fr).noise_bytes, 0);
        rtu_framer_free(fr);
    }
    free(o);
    free(g);
}

/* ---- silence ------------------------------------------------------------- */

/* fc 0x41 has no length rule: only t3.5 of silence ends it. */
static void check_silence(unsigned baud)
{
    uint8_t a[64], b[64];
    static const uint8_t data[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    size_t la = mk(a, 7, 0x41, data, sizeof data);
    size_t lb = mk(b, 7, 0x42, data, 3);
    uint64_t t35 = rtu_t35_ns(baud, 11), ch = char_ns(baud);
    out_t *o = out_new();

    /* idle(): just under t3.5 nothing, at t3.5 the frame. */
    rtu_framer_t *fr = framer(baud, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, la, T0);
    rtu_framer_idle(fr, T0 + t35 - 1);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + t35);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], a, la);
    assert_int_equal(o->f[0].t_first_ns, T0);
    assert_int_equal(o->f[0].t_last_ns, T0);
    assert_int_equal(stats(fr).silence_splits, 1);
    rtu_framer_free(fr);

    /*
     * The next chunk's stamp: its byte took one character time on the wire,
     * so the silence is stamp - char time - previous stamp.
     */
    o->n = 0;
    fr = framer(baud, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, la, T0);
    rtu_framer_feed(fr, b, 1, T0 + t35 + ch - 1);
    assert_int_equal(drain(fr, o), 0); /* just under: still one segment */
    rtu_framer_feed(fr, b + 1, lb - 1, T0 + t35 + ch * lb);
    rtu_framer_idle(fr, T0 + 2 * t35 + ch * lb);
    /* Glued, the two are told apart by the shortest CRC-good prefix. */
    assert_int_equal(drain(fr, o), 2);
    assert_frame(&o->f[0], a, la);
    assert_frame(&o->f[1], b, lb);
    assert_int_equal(stats(fr).silence_splits, 1);
    rtu_framer_free(fr);

    o->n = 0;
    fr = framer(baud, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, la, T0);
    rtu_framer_feed(fr, b, 1, T0 + t35 + ch);
    assert_int_equal(drain(fr, o), 1); /* just over: a ends before b starts */
    assert_frame(&o->f[0], a, la);
    rtu_framer_feed(fr, b + 1, lb - 1, T0 + t35 + ch * lb);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + 2 * t35 + ch * lb);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[1], b, lb);
    assert_int_equal(o->f[1].t_first_ns, T0 + t35 + ch);
    assert_int_equal(o->f[1].t_last_ns, T0 + t35 + ch * lb);
    assert_int_equal(stats(fr).silence_splits, 2);
    assert_int_equal(stats(fr).noise_bytes, 0);
    rtu_framer_free(fr);
    free(o);
}

static void test_silence_9600(void **state)
{
    (void)state;
    check_silence(9600);
}

static void test_silence_115200(void **state)
{
    (void)state;
    check_silence(115200);
}

/* With baud 0 there is no silence: unknown functions end at a good CRC. */
static void test_no_silence_baud0(void **state)
{
    (void)state;
    uint8_t a[64], b[64], stream[128];
    static const uint8_t data[] = { 9, 8, 7, 6, 5 };
    size_t la = mk(a, 7, 0x41, data, sizeof data);
    size_t lb = mk(b, 7, 0x03, (const uint8_t[]){ 2, 0xAA, 0xBB }, 3);
    memcpy(stream, a, la);
    memcpy(stream + la, b, lb);
    rtu_framer_t *fr = framer(0, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    for (size_t i = 0; i < la + lb; i++) {
        rtu_framer_feed(fr, stream + i, 1, T0 + i * 1000000000ull);
        rtu_framer_idle(fr, T0 + i * 1000000000ull + 999999999ull); /* no effect */
        assert_int_equal(drain(fr, o), i + 1 == la || i + 1 == la + lb);
    }
    assert_frame(&o->f[0], a, la);
    assert_frame(&o->f[1], b, lb);
    assert_int_equal(stats(fr).silence_splits, 0);
    rtu_framer_free(fr);
    free(o);
}

/*
 * A stream without wire timing (RTU over TCP, silence_ns): only the stamps
 * count, with no character time to subtract. An unknown function's frame
 * split across two chunks 20 ms apart is one frame; it ends once the
 * stream has been quiet for the silence, not at t3.5; a known function
 * ends by its length at once.
 */
static void test_stream_silence(void **state)
{
    (void)state;
    uint8_t a[64], b[64];
    static const uint8_t data[] = { 9, 8, 7, 6, 5, 4, 3, 2 };
    size_t la = mk(a, 7, 0x41, data, sizeof data);
    size_t lb = mk(b, 7, 0x03, (const uint8_t[]){ 2, 0xAA, 0xBB }, 3);
    uint64_t silence = 50000000ull, ms = 1000000ull;
    rtu_framer_config_t cfg = { .baud = 9600, .char_bits = 11, .dir = RTU_DIR_RESPONSE, .silence_ns = silence };
    rtu_framer_t *fr = rtu_framer_new(&cfg);
    out_t *o = out_new();
    assert_non_null(fr);
    /* On a 9600 baud line, 20 ms less the 8 bytes' wire time (9.2 ms) is
     * more than t3.5 (4 ms): that would end the frame. In a stream it does not. */
    rtu_framer_feed(fr, a, 4, T0);
    rtu_framer_feed(fr, a + 4, la - 4, T0 + 20 * ms);
    rtu_framer_idle(fr, T0 + 20 * ms + silence - 1);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + 20 * ms + silence);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], a, la);
    /* A known function: out by its length, no silence needed. */
    rtu_framer_feed(fr, b, lb, T0 + 200 * ms);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[1], b, lb);
    /* A gap of the silence inside a frame ends it: the halves are damaged. */
    rtu_framer_feed(fr, a, 5, T0 + 300 * ms);
    rtu_framer_feed(fr, a + 5, la - 5, T0 + 300 * ms + silence);
    rtu_framer_idle(fr, T0 + 300 * ms + 2 * silence);
    assert_int_equal(drain(fr, o), 2);
    assert_int_equal(o->f[2].len, 5);
    assert_int_equal(o->f[2].crc_ok, 0);
    assert_int_equal(o->f[3].len, la - 5);
    assert_int_equal(o->f[3].crc_ok, 0);
    rtu_framer_free(fr);
    free(o);
}

/* ---- gaps inside a frame -------------------------------------------------- */

static size_t mk_read(uint8_t *a, uint8_t slave, size_t regs)
{
    uint8_t data[1 + 250];
    data[0] = (uint8_t)(2 * regs);
    for (size_t i = 1; i <= 2 * regs; i++)
        data[i] = (uint8_t)(i * 37 + slave);
    return mk(a, slave, 3, data, 1 + 2 * regs);
}

static void test_mid_frame_gap(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU], b[RTU_MAX_ADU];
    size_t la = mk_read(a, 1, 10), lb = mk_read(b, 1, 2);
    uint64_t t35 = rtu_t35_ns(9600, 11), ch = char_ns(9600);
    out_t *o = out_new();

    /* The slave stops after 9 bytes; the next frame must not be glued to it. */
    rtu_framer_t *fr = framer(9600, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, 9, T0);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_feed(fr, b, lb, T0 + t35 + ch * lb);
    assert_int_equal(drain(fr, o), 2);
    assert_int_equal(o->f[0].len, 9);
    assert_memory_equal(o->f[0].adu, a, 9);
    assert_int_equal(o->f[0].crc_ok, 0);
    assert_frame(&o->f[1], b, lb);
    rtu_framer_stats_t st = stats(fr);
    assert_int_equal(st.frames, 2);
    assert_int_equal(st.silence_splits, 1);
    assert_int_equal(st.noise_bytes, 0);

    /* The same gap seen by idle(). */
    o->n = 0;
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, a, 9, T0);
    rtu_framer_idle(fr, T0 + t35 - 1);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + t35);
    assert_int_equal(drain(fr, o), 1);
    assert_int_equal(o->f[0].len, 9);
    assert_int_equal(o->f[0].crc_ok, 0);
    /* The rest of the frame after the gap is no frame either. */
    rtu_framer_feed(fr, a + 9, la - 9, T0 + 2 * t35 + ch * la);
    rtu_framer_idle(fr, T0 + 4 * t35 + ch * la);
    assert_int_equal(drain(fr, o), 1);
    assert_int_equal(o->f[1].len, la - 9);
    assert_int_equal(o->f[1].crc_ok, 0);

    /* Three bytes and a gap: a glitch, counted as noise, not a frame. */
    o->n = 0;
    rtu_framer_free(fr);
    fr = framer(9600, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, 3, T0);
    rtu_framer_idle(fr, T0 + t35);
    assert_int_equal(drain(fr, o), 0);
    assert_int_equal(stats(fr).noise_bytes, 3);
    rtu_framer_free(fr);
    free(o);
}

static rtu_framer_t *framer_by_length(unsigned baud)
{
    rtu_framer_config_t cfg = { .baud = baud, .char_bits = 11, .dir = RTU_DIR_RESPONSE, .by_length = true };
    rtu_framer_t *fr = rtu_framer_new(&cfg);
    assert_non_null(fr);
    return fr;
}

/*
 * by_length: the answer to a read of 10 registers (25 bytes) read in two
 * chunks by a reader held up 30 ms between them (stamps far apart, idle()
 * in between) is one good frame; without the option the same stamps make
 * two damaged halves (what a busy gateway counted as CRC errors).
 */
static void test_late_read_is_one_frame(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU];
    size_t la = mk_read(a, 7, 10);
    uint64_t t35 = rtu_t35_ns(9600, 11), ch = char_ns(9600), late = 30000000ull;
    out_t *o = out_new();

    for (int by_length = 0; by_length <= 1; by_length++) {
        rtu_framer_t *fr = by_length ? framer_by_length(9600) : framer(9600, RTU_DIR_RESPONSE);
        o->n = 0;
        rtu_framer_feed(fr, a, 5, T0 + 5 * ch);
        rtu_framer_idle(fr, T0 + 5 * ch + t35 + 1);
        rtu_framer_feed(fr, a + 5, la - 5, T0 + 5 * ch + late);
        rtu_framer_idle(fr, T0 + 5 * ch + late + t35);
        drain(fr, o);
        if (by_length) {
            assert_int_equal(o->n, 1);
            assert_frame(&o->f[0], a, la);
            assert_int_equal(stats(fr).noise_bytes, 0);
        } else {
            assert_true(o->n >= 1);
            assert_int_equal(o->f[0].crc_ok, 0);
        }
        rtu_framer_free(fr);
    }

    /* Byte counts of every size at every split, stamped silences between: one frame. */
    for (size_t regs = 1; regs <= 125; regs += 31) {
        la = mk_read(a, 3, regs);
        for (size_t cut = 1; cut < la; cut += 3) {
            rtu_framer_t *fr = framer_by_length(9600);
            o->n = 0;
            rtu_framer_feed(fr, a, cut, T0);
            rtu_framer_idle(fr, T0 + 2 * t35);
            assert_int_equal(drain(fr, o), 0);
            rtu_framer_feed(fr, a + cut, la - cut, T0 + late);
            assert_int_equal(drain(fr, o), 1);
            assert_frame(&o->f[0], a, la);
            rtu_framer_free(fr);
        }
    }
    free(o);
}

/*
 * by_length keeps silence where the length does not settle it: a noise
 * byte, silence, then an answer gives the answer (not glued to the noise);
 * a truncated answer is no frame at the silence (it waits, bounded by the
 * caller's deadline and reset); an unknown function still ends at silence;
 * a predicted frame whose CRC fails lets the silence split it again.
 */
static void test_by_length_keeps_silence_where_unknown(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU], u[8];
    size_t la = mk_read(a, 1, 4);
    uint64_t t35 = rtu_t35_ns(9600, 11), ch = char_ns(9600);
    out_t *o = out_new();

    /* Noise byte 0x03 (slave 3 would read "fc 1, byte count 3"), silence, the answer. */
    static const uint8_t glitch[] = { 0x03 };
    rtu_framer_t *fr = framer_by_length(9600);
    rtu_framer_feed(fr, glitch, 1, T0);
    rtu_framer_idle(fr, T0 + t35);
    rtu_framer_feed(fr, a, la, T0 + 2 * t35 + la * ch);
    drain(fr, o);
    assert_int_equal(o->n, 1);
    assert_frame(&o->f[0], a, la);
    assert_int_equal(stats(fr).noise_bytes, 1);

    /* Truncated: nothing at the silence; after a reset the next answer is whole. */
    o->n = 0;
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, a, la - 3, T0);
    rtu_framer_idle(fr, T0 + 10 * t35);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, a, la, T0 + 20 * t35);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], a, la);

    /* An unknown function (0x41) ends at the silence, as without the option. */
    static const uint8_t data[] = { 0x10, 0x20 };
    size_t lu = mk(u, 1, 0x41, data, sizeof data);
    o->n = 0;
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, u, lu, T0);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + t35);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], u, lu);

    /* The predicted length in, CRC bad: the first half is the damaged frame. */
    uint8_t bad[RTU_MAX_ADU];
    memcpy(bad, a, la);
    bad[la - 1] ^= 0x55;
    o->n = 0;
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, bad, 6, T0);
    rtu_framer_feed(fr, bad + 6, la - 6, T0 + 2 * t35 + (la - 6) * ch);
    rtu_framer_idle(fr, T0 + 3 * t35 + (la - 6) * ch);
    drain(fr, o);
    assert_true(o->n >= 1);
    assert_int_equal(o->f[0].len, 6);
    assert_int_equal(o->f[0].crc_ok, 0);
    rtu_framer_free(fr);
    free(o);
}

/*
 * A UART hands over 8 bytes at a time, 8 character times apart (9 ms at
 * 9600, t3.5 = 4 ms): the stamps alone look like gaps, the wire had none.
 */
static void test_fifo_chunks_are_no_gap(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU];
    size_t la = mk_read(a, 9, 125);
    assert_int_equal(la, 255);
    static const unsigned bauds[] = { 9600, 19200, 115200 };
    for (size_t b = 0; b < 3; b++) {
        uint64_t ch = char_ns(bauds[b]), t35 = rtu_t35_ns(bauds[b], 11), t = T0;
        rtu_framer_t *fr = framer(bauds[b], RTU_DIR_RESPONSE);
        out_t *o = out_new();
        for (size_t pos = 0; pos < la; pos += 8) {
            size_t take = la - pos < 8 ? la - pos : 8;
            /* plus latency just under t3.5 */
            t += take * ch + (pos / 8 % 2 ? t35 - 1 : 0);
            rtu_framer_feed(fr, a + pos, take, t);
            assert_int_equal(drain(fr, o), pos + take == la);
        }
        assert_frame(&o->f[0], a, la);
        assert_int_equal(stats(fr).silence_splits, 0);
        rtu_framer_free(fr);
        free(o);
    }
}

/* ---- noise and resynchronisation ---------------------------------------- */

static void check_noise(const uint8_t *noise, size_t nn, uint8_t slave, int need_idle)
{
    uint8_t a[RTU_MAX_ADU], b[RTU_MAX_ADU], stream[3 * RTU_MAX_ADU];
    size_t la = mk_read(a, slave, 3), lb = mk_read(b, slave, 1);
    memcpy(stream, noise, nn);
    memcpy(stream + nn, a, la);
    memcpy(stream + nn + la, b, lb);
    size_t len = nn + la + lb;
    uint64_t ch = char_ns(9600), t = T0;
    rtu_framer_t *fr = framer(9600, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    for (size_t i = 0; i < len; i++) {
        t += ch;
        rtu_framer_feed(fr, stream + i, 1, t);
        drain(fr, o);
    }
    if (need_idle) {
        if (need_idle == 1) /* the head looks like an unknown function: silence decides */
            assert_true(o->n < 2);
        rtu_framer_idle(fr, t + rtu_t35_ns(9600, 11));
        drain(fr, o);
    }
    assert_int_equal(o->n, 2);
    assert_frame(&o->f[0], a, la);
    assert_frame(&o->f[1], b, lb);
    assert_int_equal(o->f[0].t_first_ns, T0 + (nn + 1) * ch);
    rtu_framer_stats_t st = stats(fr);
    assert_int_equal(st.noise_bytes, nn);
    assert_int_equal(st.frames, 2);
    assert_int_equal(st.overflows, 0);
    rtu_framer_free(fr);
    free(o);
}

static void test_noise_before_frame(void **state)
{
    (void)state;
    static const uint8_t zero[] = { 0x00 }, ff[] = { 0xFF }, two[] = { 0xFF, 0x00 };
    static const uint8_t junk[] = { 0x55, 0xAA, 0x13, 0x37, 0x00, 0xFE, 0x42 };
    /* Slave 1: the noise byte makes the head look like fc 1, bad CRC: resync at once. */
    check_noise(zero, 1, 1, 0);
    check_noise(ff, 1, 1, 0);
    check_noise(two, 2, 1, 0);
    /* Slave 0x11 makes the head look like an unknown function: resolved by silence. */
    check_noise(zero, 1, 0x11, 1);
    /* A head that cannot be a frame: the frames behind it come out at once. */
    check_noise(junk, sizeof junk, 0x11, 0);
    check_noise(junk, sizeof junk, 1, 0);
    check_noise(junk + 1, 3, 0x11, 2); /* AA 13 37: an exception, bad CRC */
}

static void test_bad_crc_then_good(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU], b[RTU_MAX_ADU], stream[2 * RTU_MAX_ADU];
    size_t la = mk_read(a, 5, 4), lb = mk_read(b, 5, 2);
    a[la - 1] ^= 0x40; /* damaged on the wire */
    memcpy(stream, a, la);
    memcpy(stream + la, b, lb);
    out_t *o = out_new();

    /* No silence between them: the damaged one is noise. */
    rtu_framer_t *fr = framer(9600, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, stream, la + lb, T0);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], b, lb);
    assert_int_equal(stats(fr).noise_bytes, la);
    rtu_framer_free(fr);

    /* Byte by byte, the same. */
    o->n = 0;
    fr = framer(9600, RTU_DIR_RESPONSE);
    for (size_t i = 0; i < la + lb; i++)
        rtu_framer_feed(fr, stream + i, 1, T0 + i * char_ns(9600));
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], b, lb);
    assert_int_equal(stats(fr).noise_bytes, la);
    rtu_framer_free(fr);

    /* Silence after the damaged one: it is reported whole, crc_ok = 0. */
    o->n = 0;
    fr = framer(9600, RTU_DIR_RESPONSE);
    rtu_framer_feed(fr, a, la, T0);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_feed(fr, b, lb, T0 + rtu_t35_ns(9600, 11) + lb * char_ns(9600));
    assert_int_equal(drain(fr, o), 2);
    assert_int_equal(o->f[0].len, la);
    assert_memory_equal(o->f[0].adu, a, la);
    assert_int_equal(o->f[0].crc_ok, 0);
    assert_frame(&o->f[1], b, lb);
    assert_int_equal(stats(fr).noise_bytes, 0);
    rtu_framer_free(fr);
    free(o);
}

/* ---- SNIFF ---------------------------------------------------------------- */

typedef struct pair {
    uint8_t q[RTU_MAX_ADU], r[RTU_MAX_ADU];
    size_t lq, lr;
} pair_t;

static void sniff_expect(const pair_t *p, size_t np, unsigned baud)
{
    static uint8_t stream[16 * 2 * RTU_MAX_ADU];
    size_t len = 0;
    for (size_t i = 0; i < np; i++) {
        memcpy(stream + len, p[i].q, p[i].lq);
        len += p[i].lq;
        memcpy(stream + len, p[i].r, p[i].lr);
        len += p[i].lr;
    }
    /* All at once (a capture record per pair would be the same) and byte by byte. */
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        rtu_framer_t *fr = framer(baud, RTU_DIR_SNIFF);
        out_t *o = out_new();
        if (bytewise) {
            for (size_t i = 0; i < len; i++)
                rtu_framer_feed(fr, stream + i, 1, T0 + i);
        } else {
            rtu_framer_feed(fr, stream, len, T0);
        }
        drain(fr, o);
        assert_int_equal(o->n, 2 * np);
        for (size_t i = 0; i < np; i++) {
            assert_frame(&o->f[2 * i], p[i].q, p[i].lq);
            assert_int_equal(o->f[2 * i].is_request, 1);
            assert_frame(&o->f[2 * i + 1], p[i].r, p[i].lr);
            assert_int_equal(o->f[2 * i + 1].is_request, 0);
        }
        assert_int_equal(stats(fr).noise_bytes, 0);
        rtu_framer_free(fr);
        free(o);
    }
}

static void test_sniff_merged(void **state)
{
    (void)state;
    pair_t p[8];
    /* read holding: 8-byte request, 5 + 2n response */
    p[0].lq = mk(p[0].q, 1, 3, (const uint8_t[]){ 0, 0x6B, 0, 3 }, 4);
    p[0].lr = mk_read(p[0].r, 1, 3);
    /* write single register: request and echo are the same 8 bytes */
    p[1].lq = mk(p[1].q, 2, 6, (const uint8_t[]){ 0, 1, 0, 3 }, 4);
    memcpy(p[1].r, p[1].q, p[1].lq);
    p[1].lr = p[1].lq;
    /* write coil, same shape, twice in a row */
    p[2].lq = mk(p[2].q, 2, 5, (const uint8_t[]){ 0, 0xAC, 0xFF, 0 }, 4);
    memcpy(p[2].r, p[2].q, p[2].lq);
    p[2].lr = p[2].lq;
    p[3] = p[2];
    /* write multiple registers: 9 + n request, 8-byte response */
    p[4].lq = mk(p[4].q, 3, 16, (const uint8_t[]){ 0, 1, 0, 2, 4, 0, 10, 1, 2 }, 9);
    p[4].lr = mk(p[4].r, 3, 16, (const uint8_t[]){ 0, 1, 0, 2 }, 4);
    /* exception */
    p[5].lq = mk(p[5].q, 4, 3, (const uint8_t[]){ 0, 0, 0, 1 }, 4);
    p[5].lr = mk(p[5].r, 4, 0x83, (const uint8_t[]){ 2 }, 1);
    /* mask write: both 10 bytes, the same */
    p[6].lq = mk(p[6].q, 5, 22, (const uint8_t[]){ 0, 4, 0, 0xF2, 0, 0x25 }, 6);
    memcpy(p[6].r, p[6].q, p[6].lq);
    p[6].lr = p[6].lq;
    /* read coils: a 3-byte-count response is 8 bytes, like a request */
    p[7].lq = mk(p[7].q, 6, 1, (const uint8_t[]){ 0, 0x13, 0, 0x13 }, 4);
    p[7].lr = mk(p[7].r, 6, 1, (const uint8_t[]){ 3, 0xCD, 0x6B, 0x05 }, 4);
    assert_int_equal(p[7].lr, 8);
    sniff_expect(p, 8, 0);
    sniff_expect(p, 8, 115200);
    sniff_expect(&p[1], 1, 9600);
}

/* Broadcasts and unanswered requests: an echo-shaped frame is a request then. */
static void test_sniff_unanswered(void **state)
{
    (void)state;
    uint8_t bc[16], q1[16], q2[16], stream[64];
    size_t l0 = mk(bc, 0, 6, (const uint8_t[]){ 0, 1, 0, 7 }, 4);
    size_t l1 = mk(q1, 7, 6, (const uint8_t[]){ 0, 1, 0, 7 }, 4);
    size_t l2 = mk(q2, 8, 6, (const uint8_t[]){ 0, 1, 0, 7 }, 4);
    size_t len = 0;
    memcpy(stream + len, bc, l0), len += l0; /* broadcast: no answer */
    memcpy(stream + len, bc, l0), len += l0; /* so this is a request again */
    memcpy(stream + len, q1, l1), len += l1; /* slave 7 does not answer */
    memcpy(stream + len, q2, l2), len += l2; /* another slave: a request */
    memcpy(stream + len, q2, l2), len += l2; /* its echo */
    rtu_framer_t *fr = framer(0, RTU_DIR_SNIFF);
    out_t *o = out_new();
    rtu_framer_feed(fr, stream, len, T0);
    assert_int_equal(drain(fr, o), 5);
    static const int is_req[] = { 1, 1, 1, 1, 0 };
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(o->f[i].is_request, is_req[i]);
    rtu_framer_free(fr);
    free(o);
}

/* Unknown functions merged in one record: the shortest CRC-good prefix splits them. */
static void test_sniff_unknown_merged(void **state)
{
    (void)state;
    uint8_t q[32], r[32], stream[64];
    size_t lq = mk(q, 9, 0x41, (const uint8_t[]){ 1, 2, 3 }, 3);
    size_t lr = mk(r, 9, 0x41, (const uint8_t[]){ 4, 5, 6, 7, 8, 9, 10 }, 7);
    memcpy(stream, q, lq);
    memcpy(stream + lq, r, lr);
    rtu_framer_t *fr = framer(9600, RTU_DIR_SNIFF);
    out_t *o = out_new();
    rtu_framer_feed(fr, stream, lq + lr, T0);
    assert_int_equal(drain(fr, o), 0); /* no length rule: silence first */
    rtu_framer_idle(fr, T0 + rtu_t35_ns(9600, 11));
    assert_int_equal(drain(fr, o), 2);
    assert_frame(&o->f[0], q, lq);
    assert_int_equal(o->f[0].is_request, 1);
    assert_frame(&o->f[1], r, lr);
    assert_int_equal(o->f[1].is_request, 0);
    assert_int_equal(stats(fr).silence_splits, 1); /* the second ends at the silence */
    rtu_framer_free(fr);
    free(o);
}

/* ---- bounds --------------------------------------------------------------- */

static void check_garbage(rtu_frame_dir_t dir, unsigned baud, uint64_t *rs)
{
    rtu_framer_t *fr = framer(baud, dir);
    out_t *o = out_new();
    uint8_t chunk[64];
    uint64_t fed = 0, framed = 0, t = T0;
    while (fed < 300000) {
        size_t take = 1 + test_rand(rs) % sizeof chunk;
        for (size_t i = 0; i < take; i++)
            chunk[i] = (uint8_t)test_rand(rs);
        t += take * (baud ? char_ns(baud) : 1);
        rtu_framer_feed(fr, chunk, take, t);
        fed += take;
        o->n = 0; /* chance frames do happen (2^-16 a candidate); they are checked and dropped */
        drain(fr, o);
        rtu_framer_stats_t st = stats(fr);
        framed += o->bytes;
        o->bytes = 0;
        /* every byte is framed, discarded or buffered; at most the buffer */
        assert_true(framed + st.noise_bytes <= fed);
        assert_true(fed - framed - st.noise_bytes <= FRAMER_CAP);
    }
    rtu_framer_stats_t st = stats(fr);
    /* one overflow per 257 bytes discarded without a frame between */
    assert_true(st.overflows >= (st.noise_bytes - 257 * (st.frames + 1)) / 257 / 2);
    assert_true(st.overflows > 300);
    assert_true(st.noise_bytes > fed * 9 / 10);

    /* It still frames after the storm, once the line goes quiet. */
    uint8_t a[RTU_MAX_ADU]; /* write single register: a request and a response alike */
    size_t la = mk(a, 1, 6, (const uint8_t[]){ 0, 9, 0x12, 0x34 }, 4);
    o->n = 0;
    if (baud) {
        /* after a silence: the storm's last bytes (one damaged frame, or by
         * 2^-16 chance a CRC-good one), then the frame */
        t += rtu_t35_ns(baud, 11) + la * char_ns(baud);
        rtu_framer_feed(fr, a, la, t);
        drain(fr, o);
        if (o->n < 1 || o->n > 2 || o->f[o->n - 1].len != la)
            fail_msg("dir %d baud %u: %zu frames after the storm", dir, baud, o->n);
    } else {
        /* no silence: a noise byte may predict a frame of up to 255 bytes,
         * which holds the frame back until as many bytes came: zeros
         * (function 0 starts no frame) settle it */
        static const uint8_t zeros[2 * RTU_MAX_ADU];
        rtu_framer_feed(fr, a, la, ++t);
        rtu_framer_feed(fr, zeros, sizeof zeros, ++t);
        drain(fr, o);
        while (o->n > 0 && !o->f[o->n - 1].crc_ok)
            o->n--;
        if (o->n < 1 || o->n > 3 || o->f[o->n - 1].len != la)
            fail_msg("dir %d baud %u: %zu frames after the storm", dir, baud, o->n);
    }
    assert_frame(&o->f[o->n - 1], a, la);
    rtu_framer_free(fr);
    free(o);
}

static void test_overflow_garbage(void **state)
{
    (void)state;
    uint64_t rs = test_seed("test_overflow_garbage");
    check_garbage(RTU_DIR_RESPONSE, 9600, &rs);
    check_garbage(RTU_DIR_REQUEST, 115200, &rs);
    check_garbage(RTU_DIR_SNIFF, 0, &rs);
}

/* The caller never drains: the queue and buffer fill, the rest is dropped. */
static void test_overflow_undrained(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU];
    size_t la = mk_read(a, 1, 1);
    rtu_framer_t *fr = framer(115200, RTU_DIR_RESPONSE);
    uint64_t fed = 0;
    for (size_t i = 0; i < 500; i++) {
        rtu_framer_feed(fr, a, la, T0 + i * la * char_ns(115200));
        fed += la;
    }
    rtu_framer_stats_t st = stats(fr);
    assert_true(st.overflows > 0);
    assert_true(st.noise_bytes > 0);
    out_t *o = out_new();
    drain(fr, o);
    rtu_framer_idle(fr, T0 + 1000000000ull); /* the cut-off tail is noise */
    drain(fr, o);
    st = stats(fr);
    assert_true(o->n >= 8 && o->n < 500);
    for (size_t i = 0; i < o->n; i++)
        assert_frame(&o->f[i], a, la);
    assert_int_equal(o->bytes + st.noise_bytes, fed);
    rtu_framer_free(fr);
    free(o);
}

static void test_reset(void **state)
{
    (void)state;
    uint8_t a[RTU_MAX_ADU], b[RTU_MAX_ADU];
    size_t la = mk_read(a, 1, 5), lb = mk_read(b, 2, 1);
    rtu_framer_t *fr = framer(9600, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    /* a partial frame, then reset: its bytes must not reach the next frame */
    rtu_framer_feed(fr, a, 6, T0);
    rtu_framer_reset(fr);
    rtu_framer_feed(fr, b, lb, T0 + 1);
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[0], b, lb);
    /* queued frames are dropped too */
    rtu_framer_feed(fr, a, la, T0 + 2);
    rtu_framer_reset(fr);
    assert_int_equal(drain(fr, o), 0);
    rtu_framer_idle(fr, T0 + 1000000000ull);
    assert_int_equal(drain(fr, o), 0);
    /* and stamps start over: no silence is judged against the old one */
    rtu_framer_feed(fr, a, 4, T0 + 3000000000ull);
    rtu_framer_feed(fr, a + 4, la - 4, T0 + 3000000000ull + (la - 4) * char_ns(9600));
    assert_int_equal(drain(fr, o), 1);
    assert_frame(&o->f[1], a, la);
    rtu_framer_stats_t st = stats(fr);
    assert_int_equal(st.frames, 3); /* cumulative, reset does not clear them */
    assert_int_equal(st.noise_bytes, 0);
    rtu_framer_free(fr);
    free(o);
}

/* ---- randomized ----------------------------------------------------------- */

typedef struct item {
    size_t off, len;
    int is_frame;  /* 1 frame, 0 noise */
    int own_seg;   /* noise alone between silences */
} item_t;

/* Running CRC over a frame and its own CRC leaves 0. */
static uint16_t crc_step(uint16_t crc, uint8_t b)
{
    crc ^= b;
    for (int k = 0; k < 8; k++)
        crc = (crc & 1) ? (uint16_t)((crc >> 1) ^ 0xA001) : (uint16_t)(crc >> 1);
    return crc;
}

/* True when some run of 4..256 bytes from `from` to before `end` has a good
 * CRC, other than exactly `except` bytes long. */
static int any_good_crc(const uint8_t *s, size_t from, size_t end, size_t except)
{
    uint16_t crc = 0xFFFF;
    for (size_t e = from; e < end && e - from < RTU_MAX_ADU; e++) {
        crc = crc_step(crc, s[e]);
        size_t len = e - from + 1;
        if (len >= 4 && crc == 0 && len != except)
            return 1;
    }
    return 0;
}

static size_t random_response(uint8_t *a, uint64_t *rs)
{
    uint8_t slave = (uint8_t)(1 + test_rand(rs) % 247), d[256];
    for (size_t i = 0; i < sizeof d; i++)
        d[i] = (uint8_t)test_rand(rs);
    static const uint8_t unknown[] = { 0x07, 0x08, 0x11, 0x2B, 0x41, 0x64 };
    switch (test_rand(rs) % 6) {
    case 0: { /* register read */
        static const uint8_t fcs[] = { 3, 4, 23 };
        d[0] = (uint8_t)(2 * (1 + test_rand(rs) % 125));
        if (test_rand(rs) % 4)
            d[0] = (uint8_t)(2 * (1 + test_rand(rs) % 8));
        return mk(a, slave, fcs[test_rand(rs) % 3], d, 1 + d[0]);
    }
    case 1:
        d[0] = (uint8_t)(1 + test_rand(rs) % 20);
        return mk(a, slave, (uint8_t)(1 + test_rand(rs) % 2), d, 1 + d[0]);
    case 2: {
        static const uint8_t fcs[] = { 5, 6, 15, 16 };
        return mk(a, slave, fcs[test_rand(rs) % 4], d, 4);
    }
    case 3:
        return mk(a, slave, 22, d, 6);
    case 4:
        return mk(a, slave, (uint8_t)(0x80 | (1 + test_rand(rs) % 24)), d, 1);
    default:
        return mk(a, slave, unknown[test_rand(rs) % 6], d, test_rand(rs) % 40);
    }
}

/* A segment: frames, some with noise glued before them, none proving a false frame. */
static size_t build_segment(uint8_t *s, item_t *it, size_t *nit, uint64_t *rs, int oracle)
{
    size_t len = 0, n = 0, frames = 1 + test_rand(rs) % 4;
    if (test_rand(rs) % 5 == 0) { /* noise alone, between silences */
        size_t nn = 1 + test_rand(rs) % 20;
        for (size_t i = 0; i < nn; i++)
            s[len + i] = (uint8_t)test_rand(rs);
        it[n++] = (item_t){ .off = len, .len = nn, .is_frame = 0, .own_seg = 1 };
        len += nn;
        frames = 0;
    }
    for (size_t f = 0; f < frames; f++) {
        if (test_rand(rs) % 3 == 0) {
            size_t nn = 1 + test_rand(rs) % 6;
            for (size_t i = 0; i < nn; i++)
                s[len + i] = (uint8_t)test_rand(rs);
            it[n++] = (item_t){ .off = len, .len = nn, .is_frame = 0 };
            len += nn;
        }
        size_t fl = random_response(s + len, rs);
        /* a frame without a length rule goes last: silence ends it */
        if (rtu_response_length(s + len, fl) < 0 && f + 1 < frames)
            f = frames - 1;
        it[n++] = (item_t){ .off = len, .len = fl, .is_frame = 1 };
        len += fl;
    }
    *nit = n;
    if (!oracle)
        return len;
    /* No noise byte, and no unknown-function frame, starts a false CRC-good run. */
    for (size_t i = 0; i < n; i++) {
        int unknown = it[i].is_frame && rtu_response_length(s + it[i].off, it[i].len) < 0;
        if (!it[i].is_frame) {
            for (size_t k = 0; k < it[i].len; k++)
                if (any_good_crc(s, it[i].off + k, len, 0))
                    return 0;
        } else if (unknown && any_good_crc(s, it[i].off, len, it[i].len)) {
            return 0;
        } else if (unknown && i > 0 && !it[i - 1].is_frame) {
            /* after noise the search looks inside it for a frame */
            for (size_t k = 1; k < it[i].len; k++)
                if (any_good_crc(s, it[i].off + k, len, 0))
                    return 0;
        }
    }
    return len;
}

/*
 * Exact: frames and noise, silences between segments, random chunks with
 * stamp jitter under t3.5. The generator rejects a segment in which noise
 * could form a CRC-good frame (odds 2^-16 a candidate), so every frame must
 * come out intact and in order, each silence-separated noise run of 4 bytes
 * or more as one crc_ok = 0 frame, and every other noise byte counted.
 */
static void check_random_exact(unsigned baud, uint64_t *rs)
{
    enum { SEGMENTS = 400 };
    rtu_framer_t *fr = framer(baud, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    uint64_t t = T0, ch = char_ns(baud), t35 = rtu_t35_ns(baud, 11);
    uint64_t noise_expected = 0, fed = 0;
    size_t expect_idx = 0, frames_in = 0, rejected = 0;
    static uint8_t seg[8 * 300 + 64];
    static item_t items[32];

    for (size_t sg = 0; sg < SEGMENTS; sg++) {
        size_t nit, len;
        while ((len = build_segment(seg, items, &nit, rs, 1)) == 0)
            rejected++;
        /* silence before the segment */
        t += t35 + test_rand(rs) % (3 * t35);
        uint64_t stamp_of[sizeof seg];
        for (size_t pos = 0; pos < len;) {
            size_t take = 1 + test_rand(rs) % 48;
            if (take > len - pos)
                take = len - pos;
            t += take * ch + (pos ? test_rand(rs) % (t35 / 2) : 0);
            for (size_t i = 0; i < take; i++)
                stamp_of[pos + i] = t;
            rtu_framer_feed(fr, seg + pos, take, t);
            fed += take;
            pos += take;
            drain(fr, o);
        }
        rtu_framer_idle(fr, t + t35);
        drain(fr, o);
        for (size_t i = 0; i < nit; i++) {
            const item_t *it = &items[i];
            if (!it->is_frame && !(it->own_seg && it->len >= 4)) {
                noise_expected += it->len;
                continue;
            }
            if (expect_idx >= o->n)
                fail_msg("segment %zu item %zu: missing (have %zu frames)", sg, i, o->n);
            const rtu_frame_t *f = &o->f[expect_idx++];
            if (f->len != it->len || memcmp(f->adu, seg + it->off, it->len)) {
                fprintf(stderr, "segment %zu item %zu of %zu (frame %d, %zu bytes at %zu):", sg, i,
                        nit, it->is_frame, it->len, it->off);
                for (size_t b = 0; b < len; b++)
                    fprintf(stderr, "%s%02x", b == it->off ? " | " : " ", seg[b]);
                fprintf(stderr, "\n  got %u bytes crc_ok %u\n", f->len, f->crc_ok);
            }
            assert_int_equal(f->len, it->len);
            assert_memory_equal(f->adu, seg + it->off, it->len);
            assert_int_equal(f->crc_ok, it->is_frame);
            assert_int_equal(f->t_first_ns, stamp_of[it->off]);
            assert_int_equal(f->t_last_ns, stamp_of[it->off + it->len - 1]);
            frames_in += it->is_frame;
        }
        assert_int_equal(o->n, expect_idx);
        o->n = expect_idx = 0;
    }
    rtu_framer_stats_t st = stats(fr);
    assert_int_equal(st.noise_bytes, noise_expected);
    assert_int_equal(st.overflows, 0);
    assert_int_equal(o->bytes + st.noise_bytes, fed); /* nothing left behind */
    assert_true(frames_in > SEGMENTS);
    fprintf(stderr, "  baud %u: %zu frames, %llu noise bytes, %zu segments regenerated\n", baud,
            frames_in, (unsigned long long)noise_expected, rejected);
    rtu_framer_free(fr);
    free(o);
}

/*
 * Statistical: no oracle, noise glued before a third of the frames, no
 * silence at all: back to back at 115200 (unknown-looking noise waits for a
 * silence that never comes, until 256 bytes prove it no frame) and with
 * baud 0, as in a fast replay.
 * A false frame needs a 16-bit CRC match. With a baud, a resync checks one
 * predicted length at each of a few positions: about 1 false frame in
 * 40 runs of 2000 frames. With baud 0 the likeliest is a noise byte right
 * after a frame that looks like an unknown function, which then ends at the
 * first of its CRC-good lengths unless a frame behind it proves itself
 * first: about 0.3 false frames a run, each swallowing the frames it
 * overlaps. Over 400 seeds: at 115200 at worst 1 frame of 2000 lost (mean
 * 0.02); with baud 0 at worst 14 (mean 1.1). Asserted: 99.5 % and 98 %
 * intact and in order, and at most 1 % of the CRC-good frames out false.
 */
static void check_random_rate(unsigned baud, size_t min_permille, uint64_t *rs)
{
    rtu_framer_t *fr = framer(baud, RTU_DIR_RESPONSE);
    static out_t o;
    static uint8_t stream[2000 * 300 + 2 * RTU_MAX_ADU];
    static size_t off[2000], len[2000];
    size_t n = 0, pos = 0;
    while (n < 2000) {
        if (test_rand(rs) % 3 == 0) {
            size_t nn = 1 + test_rand(rs) % 6;
            for (size_t i = 0; i < nn; i++)
                stream[pos++] = (uint8_t)test_rand(rs);
        }
        size_t l = random_response(stream + pos, rs);
        if (rtu_response_length(stream + pos, l) < 0)
            continue; /* without silence only CRC ends those: not counted here */
        off[n] = pos;
        len[n++] = l;
        pos += l;
    }
    /*
     * Without silence a head waiting for a long predicted frame holds what
     * follows until that many bytes came. Function 0 starts no frame, so a
     * run of zeros settles the tail, as a continuing stream would.
     */
    memset(stream + pos, 0, 2 * RTU_MAX_ADU);
    pos += 2 * RTU_MAX_ADU;
    o.n = 0;
    uint64_t t = T0;
    for (size_t p = 0; p < pos;) {
        size_t take = 1 + test_rand(rs) % 64;
        if (take > pos - p)
            take = pos - p;
        t += take * (baud ? char_ns(baud) : 1); /* back to back: never a silence */
        rtu_framer_feed(fr, stream + p, take, t);
        p += take;
        drain(fr, &o);
    }
    rtu_framer_idle(fr, t + rtu_t35_ns(baud, 11));
    drain(fr, &o);
    size_t matched = 0, false_frames = 0, good_out = 0, k = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (!o.f[i].crc_ok)
            continue;
        good_out++;
        size_t j = k;
        while (j < n && !(o.f[i].len == len[j] && !memcmp(o.f[i].adu, stream + off[j], len[j])))
            j++;
        if (j == n) {
            false_frames++;
            fprintf(stderr, "  false frame: %u bytes, function 0x%02x\n", o.f[i].len, o.f[i].adu[1]);
        } else {
            matched++;
            k = j + 1;
        }
    }
    fprintf(stderr, "  baud %u, no silence: %zu of %zu frames intact and in order, %zu false\n",
            baud, matched, n, false_frames);
    assert_true(matched * 1000 >= n * min_permille);
    assert_true(false_frames * 100 <= good_out);
    rtu_framer_free(fr);
}

/*
 * rtu_framer_settled: a framer that holds no byte and has discarded none
 * since its last frame can skip rtu_framer_idle with nothing changed. Two
 * framers take the same random segments (frames, noise, chunking jitter);
 * one is told of every silence, the other only when it is not settled; the
 * frames that come out (bytes, CRC verdict, stamps) and the noise counted
 * must be the same.
 */
static void test_settled_skips_nothing(void **state)
{
    (void)state;
    static const uint8_t regs[] = { 2, 0, 7 };
    uint8_t a[RTU_MAX_ADU];
    size_t la = mk(a, 1, 0x03, regs, sizeof regs);
    uint64_t t35 = rtu_t35_ns(19200, 11);

    rtu_framer_t *fr = framer(19200, RTU_DIR_RESPONSE);
    out_t *o = out_new();
    assert_true(rtu_framer_settled(fr));
    rtu_framer_feed(fr, a, la - 1, T0);
    assert_false(rtu_framer_settled(fr));   /* a frame's head waits for its CRC */
    rtu_framer_feed(fr, a + la - 1, 1, T0 + 1000);
    assert_int_equal(drain(fr, o), 1);
    assert_true(rtu_framer_settled(fr));    /* framed by its length */
    static const uint8_t noise[] = { 0xff, 0x00, 0x13 };
    rtu_framer_feed(fr, noise, sizeof noise, T0 + 10 * t35);
    drain(fr, o);
    assert_false(rtu_framer_settled(fr));   /* noise held or discarded: the silence matters */
    rtu_framer_idle(fr, T0 + 12 * t35);
    drain(fr, o);
    assert_true(rtu_framer_settled(fr));
    rtu_framer_free(fr);

    uint64_t rs = test_seed("test_framer settled");
    rtu_framer_t *all = framer(19200, RTU_DIR_RESPONSE), *some = framer(19200, RTU_DIR_RESPONSE);
    out_t *oa = out_new(), *os = out_new();
    uint64_t t = T0, ch = char_ns(19200);
    static uint8_t seg[8 * 300 + 64];
    static item_t items[32];
    size_t skipped = 0, told = 0;
    for (size_t sg = 0; sg < 300; sg++) {
        size_t nit, len;
        while ((len = build_segment(seg, items, &nit, &rs, 1)) == 0)
            ;
        t += t35 + test_rand(&rs) % (3 * t35);
        for (size_t pos = 0; pos < len;) {
            size_t take = 1 + test_rand(&rs) % 48;
            if (take > len - pos)
                take = len - pos;
            t += take * ch + (pos ? test_rand(&rs) % (t35 / 2) : 0);
            rtu_framer_feed(all, seg + pos, take, t);
            rtu_framer_feed(some, seg + pos, take, t);
            pos += take;
            drain(all, oa);
            drain(some, os);
        }
        rtu_framer_idle(all, t + t35);
        if (rtu_framer_settled(some)) {
            skipped++;
        } else {
            rtu_framer_idle(some, t + t35);
            told++;
        }
        drain(all, oa);
        drain(some, os);
        assert_int_equal(oa->n, os->n);
        for (size_t i = 0; i < oa->n; i++) {
            assert_int_equal(oa->f[i].len, os->f[i].len);
            assert_memory_equal(oa->f[i].adu, os->f[i].adu, oa->f[i].len);
            assert_int_equal(oa->f[i].crc_ok, os->f[i].crc_ok);
            assert_int_equal(oa->f[i].t_first_ns, os->f[i].t_first_ns);
            assert_int_equal(oa->f[i].t_last_ns, os->f[i].t_last_ns);
        }
        oa->n = os->n = 0;
    }
    assert_int_equal(stats(all).noise_bytes, stats(some).noise_bytes);
    assert_int_equal(stats(all).frames, stats(some).frames);
    assert_true(skipped > 0 && told > 0);   /* both paths were taken */
    rtu_framer_free(all);
    rtu_framer_free(some);
    free(o);
    free(oa);
    free(os);
}

static void test_randomized(void **state)
{
    (void)state;
    uint64_t rs = test_seed("test_framer randomized");
    check_random_exact(9600, &rs);
    check_random_exact(115200, &rs);
    check_random_rate(115200, 995, &rs);
    check_random_rate(0, 980, &rs);
}

static void test_new_rejects(void **state)
{
    (void)state;
    rtu_framer_config_t bad = { .baud = 9600, .dir = (rtu_frame_dir_t)7 };
    assert_null(rtu_framer_new(&bad));
    assert_null(rtu_framer_new(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_rejects),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_several_frames_in_one_chunk),
        cmocka_unit_test(test_golden_frames),
        cmocka_unit_test(test_silence_9600),
        cmocka_unit_test(test_silence_115200),
        cmocka_unit_test(test_no_silence_baud0),
        cmocka_unit_test(test_stream_silence),
        cmocka_unit_test(test_mid_frame_gap),
        cmocka_unit_test(test_fifo_chunks_are_no_gap),
        cmocka_unit_test(test_late_read_is_one_frame),
        cmocka_unit_test(test_by_length_keeps_silence_where_unknown),
        cmocka_unit_test(test_noise_before_frame),
        cmocka_unit_test(test_bad_crc_then_good),
        cmocka_unit_test(test_sniff_merged),
        cmocka_unit_test(test_sniff_unanswered),
        cmocka_unit_test(test_sniff_unknown_merged),
        cmocka_unit_test(test_overflow_garbage),
        cmocka_unit_test(test_overflow_undrained),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_settled_skips_nothing),
        cmocka_unit_test(test_randomized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
