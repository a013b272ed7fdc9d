/*
 * tests/unit/test_sim_fault_timing.c -- the simulator's answer-timing faults on a real
 * pseudo-terminal pair, byte by byte: an answer split and doubled, a
 * noise burst well ahead of a slow answer (for the first answers only), and
 * the order and queueing of requests that arrive while a late answer is
 * owed, with and without --in-order.
 *
 * Times are checked as lower bounds from a stamp taken before the request
 * was written (a busy machine can only make things later). Where a check
 * needs two stretches of bytes to arrive in separate reads, the gap between
 * them is 200 ms or more, far beyond any scheduling delay seen here.
 */
#include "drivers/driver.h"
#include "parser/rtu.h"
#include "tests/unit/simtest.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <cmocka.h>

#define MS 1000000ull

/* The chunk that holds byte `at`, and the offset at which chunk k starts. */
static size_t chunk_of(const simtest_chunks_t *c, size_t at)
{
    size_t k = 0;
    while (k < c->n && c->end[k] <= at)
        k++;
    assert_true(k < c->n);
    return k;
}

static size_t chunk_start(const simtest_chunks_t *c, size_t k)
{
    return k ? c->end[k - 1] : 0;
}

/* The right answer to a read of slave 1, address a, 2 registers:
 * 1 03 04 (1000+a) (1001+a) CRC. */
static void assert_answer(const uint8_t *p, uint16_t a)
{
    uint16_t v0 = (uint16_t)(1000 + a), v1 = (uint16_t)(1001 + a);
    const uint8_t want[7] = { 1, 3, 4, (uint8_t)(v0 >> 8), (uint8_t)v0, (uint8_t)(v1 >> 8), (uint8_t)v1 };
    assert_memory_equal(p, want, sizeof want);
    assert_true(simtest_crc_ok(p, 9));
}

/* A simulator serving cfg gets n reads of slave 1 (2 registers at addr[i]),
 * one after the other; c[i] is what came back for read i, t0[i] the time
 * before it was written, *st the counters at the end. */
static void serve_reads(const driver_sim_config_t *cfg, const uint16_t *addr, size_t n,
                        simtest_chunks_t *c, uint64_t *t0, driver_sim_stats_t *st)
{
    simtest_fx_t f;
    simtest_start(&f, cfg);
    for (size_t i = 0; i < n; i++) {
        uint8_t req[RTU_MAX_ADU];
        size_t len = simtest_make_req(1, 3, addr[i], 2, req);
        memset(&c[i], 0, sizeof c[i]);
        tcflush(f.slave, TCIFLUSH);
        t0[i] = driver_now_ns();
        assert_int_equal(write(f.slave, req, len), (ssize_t)len);
        simtest_collect_chunks(f.slave, &c[i], ANSWER_MS, 400);
    }
    driver_sim_get_stats(f.sim, st);
    simtest_stop(&f);
}

static void test_split_and_double(void **state)
{
    (void)state;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.split_rate = 1;
    cfg.faults.split_ms = 250;
    cfg.faults.double_rate = 1;
    cfg.faults.double_gap_ms = 250;
    simtest_chunks_t c;
    uint64_t t0;
    driver_sim_stats_t st;
    serve_reads(&cfg, (const uint16_t[]){ 40 }, 1, &c, &t0, &st);
    /* The answer in two parts, its first 4 of 9 bytes, the rest 250 ms
     * later; then the whole of it again, 250 ms after that. */
    assert_int_equal(c.len, 18);
    assert_answer(c.bytes, 40);
    assert_memory_equal(c.bytes, c.bytes + 9, 9);
    assert_int_equal(c.end[0], 4);
    size_t second = chunk_of(&c, 4), copy = chunk_of(&c, 9);
    assert_int_equal(chunk_start(&c, second), 4); /* each part came in reads of its own */
    assert_int_equal(chunk_start(&c, copy), 9);
    assert_true(c.t[second] - t0 >= 250 * MS);
    assert_true(c.t[copy] - t0 >= 500 * MS);
    assert_int_equal(st.f_split, 1);
    assert_int_equal(st.f_double, 1);
    assert_int_equal(st.replies, 1); /* one answer, sent twice */
}

static void test_noise_first_with_lead(void **state)
{
    (void)state;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.turnaround_us = 300000;
    cfg.faults.noise_first = 1;
    cfg.faults.noise_bytes = 5;
    cfg.faults.noise_lead_ms = 250;
    simtest_chunks_t c[2];
    uint64_t t0[2];
    driver_sim_stats_t st;
    serve_reads(&cfg, (const uint16_t[]){ 11, 12 }, 2, c, t0, &st);
    /* The slow slave's first answer: 5 noise bytes about 50 ms after the
     * request, on their own, then the intact answer at 300 ms. */
    assert_int_equal(c[0].len, 5 + 9);
    assert_int_equal(c[0].end[0], 5);
    assert_answer(c[0].bytes + 5, 11);
    assert_true(c[0].t[1] - t0[0] >= 300 * MS);
    /* Later answers: no noise. */
    assert_int_equal(c[1].len, 9);
    assert_answer(c[1].bytes, 12);
    assert_true(c[1].t[0] - t0[1] >= 300 * MS);
    assert_int_equal(st.f_noise, 1);
}

static void test_noise_default_timing_unchanged(void **state)
{
    (void)state;
    /* Without a lead, a noisy answer plan is what it always was: noise when
     * the answer is due, t3.5 of silence, the answer. */
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.turnaround_us = 7000;
    cfg.faults.noise_rate = 1;
    char err[DRIVER_ERRLEN];
    driver_sim_t *sim = driver_sim_new(&cfg, err, sizeof err);
    assert_non_null(sim);
    uint8_t req[RTU_MAX_ADU];
    size_t n = simtest_make_req(1, 3, 0, 1, req);
    driver_sim_answer_t a;
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &a), 1);
    assert_int_equal(a.noise_len, 8);
    assert_int_equal(a.delay_ns, 7 * MS);
    assert_int_equal(a.noise_gap_ns, rtu_t35_ns(19200, 11));
    assert_int_equal(a.split_at, 0);
    assert_false(a.twice);
    cfg.faults.noise_lead_ms = 5; /* with a lead shorter than the delay: it moves the noise */
    driver_sim_free(sim);
    sim = driver_sim_new(&cfg, err, sizeof err);
    assert_int_equal(driver_sim_handle(sim, req, n, driver_now_ns(), &a), 1);
    assert_int_equal(a.delay_ns, 2 * MS);
    assert_int_equal(a.noise_gap_ns, 5 * MS);
    driver_sim_free(sim);
}

/* Split and double change when bytes go out, never the bytes. */
static bool split_intact(const driver_sim_answer_t *a)
{
    assert_int_equal(a->len, 11);
    assert_true(simtest_crc_ok(a->adu, a->len));
    return a->split_at == 5;
}

static bool twice_intact(const driver_sim_answer_t *a)
{
    assert_int_equal(a->len, 11);
    assert_true(simtest_crc_ok(a->adu, a->len));
    return a->twice;
}

static void test_split_double_rates(void **state)
{
    (void)state;
    /* At 0.5 over 200 requests each fault hits about half of them. */
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.split_rate = 0.5;
    cfg.faults.double_rate = 0.5;
    cfg.faults.seed = 9;
    assert_in_range(simtest_plan_hits(&cfg, 3, split_intact), 60, 140);
    assert_in_range(simtest_plan_hits(&cfg, 3, twice_intact), 60, 140);
}

/*
 * Three requests 20 ms apart to a slave 150 ms late on every answer. In
 * both modes the answers come in arrival order, each one after the one
 * before: the second no earlier than 300 ms, the third 450 ms. The default
 * has the requests wait in the pseudo-terminal (nothing counted); in order
 * they wait in the simulator's queue, counted.
 */
static void late_three(bool in_order)
{
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.late_rate = 1;
    cfg.faults.late_ms = 150;
    cfg.in_order = in_order;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU];
    tcflush(f.slave, TCIFLUSH);
    uint64_t t0 = driver_now_ns();
    for (int i = 0; i < 3; i++) {
        size_t n = simtest_make_req(1, 3, (uint16_t)(100 * (i + 1)), 2, req);
        assert_int_equal(write(f.slave, req, n), (ssize_t)n);
        usleep(20000);
    }
    simtest_chunks_t c;
    memset(&c, 0, sizeof c);
    simtest_collect_chunks(f.slave, &c, ANSWER_MS, 400);
    assert_int_equal(c.len, 27);
    for (int i = 0; i < 3; i++) {
        assert_answer(c.bytes + 9 * i, (uint16_t)(100 * (i + 1)));
        assert_true(c.t[chunk_of(&c, (size_t)(9 * i))] - t0 >= (uint64_t)(150 * (i + 1)) * MS);
    }
    driver_sim_stats_t st;
    driver_sim_get_stats(f.sim, &st);
    assert_int_equal(st.replies, 3);
    assert_int_equal(st.queued, in_order ? 2 : 0);
    assert_int_equal(st.queue_max, in_order ? 2 : 0);
    assert_int_equal(st.queue_lost, 0);
    simtest_stop(&f);
}

static void test_late_default_order(void **state)
{
    (void)state;
    late_three(false);
}

static void test_late_in_order(void **state)
{
    (void)state;
    late_three(true);
}

static void test_in_order_queue_bound(void **state)
{
    (void)state;
    /* One request being answered (late), then 20 at once: 16 wait in the
     * queue, 4 are lost, 17 answers in arrival order. */
    simtest_fx_t f;
    driver_sim_config_t cfg;
    driver_sim_defaults(&cfg);
    cfg.faults.late_rate = 1;
    cfg.faults.late_ms = 60;
    cfg.in_order = true;
    simtest_start(&f, &cfg);
    uint8_t req[RTU_MAX_ADU * 21];
    size_t n = simtest_make_req(1, 3, 0, 2, req);
    tcflush(f.slave, TCIFLUSH);
    assert_int_equal(write(f.slave, req, n), (ssize_t)n);
    /* the 20 written once the simulator has the first (its answer 60 ms
     * late), not after a fixed sleep: a starved simulator (qemu at idle
     * priority) may read all 21 at once */
    driver_sim_stats_t st;
    for (int w = 0; w < 2000; w++) {
        driver_sim_get_stats(f.sim, &st);
        if (st.requests >= 1)
            break;
        usleep(1000);
    }
    assert_int_equal(st.requests, 1);
    size_t len = 0;
    for (int i = 1; i <= 20; i++)
        len += simtest_make_req(1, 3, (uint16_t)(10 * i), 2, req + len);
    assert_int_equal(write(f.slave, req, len), (ssize_t)len);
    simtest_chunks_t c;
    memset(&c, 0, sizeof c);
    simtest_collect_chunks(f.slave, &c, ANSWER_MS, 400);
    assert_int_equal(c.len, 17 * 9);
    assert_answer(c.bytes, 0);
    for (int i = 1; i <= 16; i++)
        assert_answer(c.bytes + 9 * i, (uint16_t)(10 * i));
    driver_sim_get_stats(f.sim, &st);
    assert_int_equal(st.replies, 17);
    assert_int_equal(st.queue_max, DRIVER_SIM_QUEUE);
    assert_int_equal(st.queue_lost, 4);
    simtest_stop(&f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_double),
        cmocka_unit_test(test_noise_first_with_lead),
        cmocka_unit_test(test_noise_default_timing_unchanged),
        cmocka_unit_test(test_split_double_rates),
        cmocka_unit_test(test_late_default_order),
        cmocka_unit_test(test_late_in_order),
        cmocka_unit_test(test_in_order_queue_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
