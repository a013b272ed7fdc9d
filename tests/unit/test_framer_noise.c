/*
 * tests/unit/test_framer_noise.c -- the streaming RTU framer: noise and resynchronisation,
 * SNIFF splitting (requests and answers on one record), and its bounds
 * (garbage, a caller that never drains, reset).
 * Part of the program tests/unit/test_framer (its main is in test_framer.c).
 */
#include "tests/unit/framertest.h"
#include "tests/lib/testutil.h"

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


const struct CMUnitTest framer_noise_tests[] = {
    cmocka_unit_test(test_noise_before_frame),
    cmocka_unit_test(test_bad_crc_then_good),
    cmocka_unit_test(test_sniff_merged),
    cmocka_unit_test(test_sniff_unanswered),
    cmocka_unit_test(test_sniff_unknown_merged),
    cmocka_unit_test(test_overflow_garbage),
    cmocka_unit_test(test_overflow_undrained),
    cmocka_unit_test(test_reset),
};
const size_t framer_noise_count = sizeof framer_noise_tests / sizeof framer_noise_tests[0];
