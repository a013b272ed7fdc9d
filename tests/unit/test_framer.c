/*
 * tests/unit/test_framer.c -- the streaming RTU framer: chunking, length and
 * silence delimiting, mid-frame gaps; its main runs these, then
 * test_framer_noise.c (resynchronisation, SNIFF splitting, bounded memory)
 * and test_framer_random.c (a randomized stream with a printed seed).
 */
#include "tests/unit/framertest.h"
#include "tests/lib/testutil.h"

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


static void test_new_rejects(void **state)
{
    (void)state;
    rtu_framer_config_t bad = { .baud = 9600, .dir = (rtu_frame_dir_t)7 };
    assert_null(rtu_framer_new(&bad));
    assert_null(rtu_framer_new(NULL));
}

/* One program, three groups: this file's, then the other two files' (their
 * arrays are sized there, hence the explicit count). */
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
    };
    int failed = cmocka_run_group_tests_name("framer", tests, NULL, NULL);
    failed += _cmocka_run_group_tests("framer noise", framer_noise_tests, framer_noise_count, NULL, NULL);
    failed += _cmocka_run_group_tests("framer random", framer_random_tests, framer_random_count, NULL, NULL);
    return failed;
}
