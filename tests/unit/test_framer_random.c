/*
 * tests/unit/test_framer_random.c -- the streaming RTU framer on randomized streams of frames
 * and noise, with a printed seed: exact where an oracle can tell, a rate
 * where it cannot, and nothing skipped once the framer has settled.
 * Part of the program tests/unit/test_framer (its main is in test_framer.c).
 */
#include "tests/unit/framertest.h"
#include "tests/lib/testutil.h"

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

const struct CMUnitTest framer_random_tests[] = {
    cmocka_unit_test(test_settled_skips_nothing),
    cmocka_unit_test(test_randomized),
};
const size_t framer_random_count = sizeof framer_random_tests / sizeof framer_random_tests[0];
