/*
 * tests/bench/test_bench_kit.c -- what every bench shares: the one percentile
 * code (bench/stats.c) against numpy's default (linear between closest
 * ranks; the values below are numpy.percentile's, so a bench's p99 means
 * what a reader who checks it with numpy expects), and the one option
 * parser (bench/options.c): ranges, widths, signs, calls, --help and what
 * is left over.
 */
#include "bench/bench.h"
#include "bench/options.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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

static int usage_calls;
static void count_usage(FILE *to)
{
    (void)to;
    usage_calls++;
}

typedef struct kit_opts {
    unsigned rounds;
    unsigned long long big;
    double ratio;
    bool json;
    int other_flag;
    const char *file;
    int color;
} kit_opts_t;

static int set_color(void *dst, const char *value)
{
    if (strcmp(value, "red") != 0 && strcmp(value, "blue") != 0)
        return -1;
    *(int *)dst = value[0] == 'r' ? 1 : 2;
    return 0;
}

/* Parses a NULL-terminated argument list (after the bench's name). */
static int parse(kit_opts_t *o, int *rest, ...)
{
    char *argv[16] = { (char *)"kit" };
    int argc = 1;
    va_list ap;
    va_start(ap, rest);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 15;)
        argv[argc++] = a;
    va_end(ap);
    const bench_opt_t opts[] = {
        BENCH_UINT("rounds", &o->rounds, 1, 10000000000ull),
        BENCH_UINT("big", &o->big, 0, 1000000000000ull),
        BENCH_DOUBLE("ratio", &o->ratio, 0.0, 1.0),
        BENCH_FLAG("json", &o->json),
        BENCH_FLAG("other", &o->other_flag),
        BENCH_TEXT("file", &o->file),
        BENCH_CALL("color", set_color, &o->color, required_argument, "red or blue"),
        BENCH_OPT_END,
    };
    usage_calls = 0;
    return bench_options(argc, argv, "kit", opts, count_usage, rest);
}

static void test_options_set_what_the_table_says(void **state)
{
    (void)state;
    kit_opts_t o = { 0 };
    assert_int_equal(parse(&o, NULL, "--rounds", "7", "--big=1000000000000", "--ratio", "0.25", "--json",
                           "--other", "--file", "x.json", "--color", "blue", NULL), -1);
    assert_int_equal(o.rounds, 7);
    assert_true(o.big == 1000000000000ull);
    check_near(o.ratio, 0.25);
    assert_true(o.json);
    assert_int_equal(o.other_flag, 1);
    assert_string_equal(o.file, "x.json");
    assert_int_equal(o.color, 2);
}

static void test_options_reject_out_of_range(void **state)
{
    (void)state;
    kit_opts_t o = { .rounds = 5 };
    assert_int_equal(parse(&o, NULL, "--rounds", "0", NULL), 2);
    /* "-1" would wrap to the largest value through strtoull. */
    assert_int_equal(parse(&o, NULL, "--rounds", "-1", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--rounds", "+3", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--rounds", "3x", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--rounds", "", NULL), 2);
    /* An unsigned destination holds at most 2^32-1, whatever the table says. */
    assert_int_equal(parse(&o, NULL, "--rounds", "4294967296", NULL), 2);
    assert_int_equal(o.rounds, 5);
    assert_int_equal(parse(&o, NULL, "--rounds", "4294967295", NULL), -1);
    assert_int_equal(o.rounds, 4294967295u);
    assert_int_equal(parse(&o, NULL, "--big", "1000000000001", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--ratio", "1.5", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--ratio", "nan", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--color", "green", NULL), 2);
    assert_int_equal(usage_calls, 0);
}

static void test_options_help_unknown_and_rest(void **state)
{
    (void)state;
    kit_opts_t o = { 0 };
    int rest = -1;
    assert_int_equal(parse(&o, NULL, "--help", NULL), 0);
    assert_int_equal(usage_calls, 1);
    assert_int_equal(parse(&o, NULL, "-h", NULL), 0);
    assert_int_equal(usage_calls, 1);
    assert_int_equal(parse(&o, NULL, "--nope", NULL), 2);
    assert_int_equal(usage_calls, 1);
    assert_int_equal(parse(&o, NULL, "--rounds", NULL), 2);
    assert_int_equal(parse(&o, NULL, "--json", "stray", NULL), 2);
    assert_int_equal(parse(&o, &rest, "--json", "stray", NULL), -1);
    assert_int_equal(rest, 2);
    assert_int_equal(parse(&o, &rest, "--json", NULL), -1);
    assert_int_equal(rest, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_interpolates),
        cmocka_unit_test(test_quantile_edges),
        cmocka_unit_test(test_spread_sorts_and_fills),
        cmocka_unit_test(test_options_set_what_the_table_says),
        cmocka_unit_test(test_options_reject_out_of_range),
        cmocka_unit_test(test_options_help_unknown_and_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
