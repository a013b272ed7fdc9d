/*
 * tests/test_bench_stats.c -- the one percentile code of the benches
 * (bench/stats.c) against numpy's default (linear between closest ranks):
 * the values below are numpy.percentile's, so a bench's p99 means what a
 * reader who checks it with numpy expects.
 */
#include "bench/bench.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>

/* cmocka compares floats only; the benches' figures are doubles. */
static void check_near(double got, double want)
{
    if (fabs(got - want) > 1e-9)
        fail_msg("got %.12g, want %.12g", got, want);
}

static void test_quantile_interpolates(void **state)
{
    (void)state;
    const double v[] = { 1, 2, 3, 4, 5 };
    check_near(bench_quantile(v, 5, 0.0), 1.0);
    check_near(bench_quantile(v, 5, 0.5), 3.0);
    check_near(bench_quantile(v, 5, 0.1), 1.4);
    check_near(bench_quantile(v, 5, 0.99), 4.96);
    check_near(bench_quantile(v, 5, 1.0), 5.0);
}

static void test_quantile_edges(void **state)
{
    (void)state;
    const double one[] = { 7 };
    check_near(bench_quantile(NULL, 0, 0.5), 0.0);
    check_near(bench_quantile(one, 1, 0.0), 7.0);
    check_near(bench_quantile(one, 1, 0.99), 7.0);
}

static void test_spread_sorts_and_fills(void **state)
{
    (void)state;
    double v[] = { 10, 1, 9, 2, 8, 3, 7, 4, 6, 5 };
    bench_spread_t s;
    bench_spread(v, 10, &s);
    for (size_t i = 1; i < 10; i++)
        assert_true(v[i - 1] <= v[i]);
    assert_int_equal(s.n, 10);
    check_near(s.median, 5.5);
    check_near(s.p10, 1.9);
    check_near(s.p25, 3.25);
    check_near(s.p75, 7.75);
    check_near(s.p90, 9.1);
    bench_spread(v, 0, &s);
    assert_int_equal(s.n, 0);
    check_near(s.median, 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_interpolates),
        cmocka_unit_test(test_quantile_edges),
        cmocka_unit_test(test_spread_sorts_and_fills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
