/*
 * tests/test_config.c -- the config loader: the demo and the example load,
 * every kind of mistake is reported with file, line, key and value, and all
 * mistakes in a file are reported in one pass.
 */
#include "config/config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static config_t *load(const char *text, config_errors_t *errs)
{
    return config_load_string(text, "t.ini", errs);
}

/* Fails unless some error message contains every one of the fragments. */
static void expect_error(const config_errors_t *errs, const char *a, const char *b)
{
    for (unsigned i = 0; i < errs->count; i++)
        if (strstr(errs->text[i], a) && (!b || strstr(errs->text[i], b)))
            return;
    for (unsigned i = 0; i < errs->count; i++)
        fprintf(stderr, "  got: %s\n", errs->text[i]);
    fail_msg("no error containing '%s' and '%s'", a, b ? b : "");
}

static void test_demo_is_valid(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = config_load_string(config_demo_text(), "<demo>", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->bus_count, 1);
    assert_int_equal(cfg->device_count, 3);
    assert_int_equal(cfg->poll_count, 2);
    assert_string_equal(cfg->buses[0].port, "sim");
    assert_int_equal(cfg->buses[0].parity, 'E');
    assert_int_equal(cfg->tcp.port, 1502);
    assert_int_equal(cfg->http.port, 8502);
    assert_true(cfg->tcp.unit[255].set);
    assert_int_equal(cfg->tcp.unit[255].slave, 1);
    assert_int_equal(cfg->polls[1].device, 2);
    assert_int_equal(cfg->polls[1].address, 100);
    config_free(cfg);
}

static void test_example_file_is_valid(void **state)
{
    (void)state;
    const char *dir = getenv("RTUGW_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/config/example.ini", dir ? dir : ".");
    config_errors_t errs;
    config_t *cfg = config_load_file(path, &errs);
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.text[i]);
    assert_non_null(cfg);
    assert_int_equal(cfg->tcp.allow_count, 2);
    assert_int_equal(cfg->router.bucket_count, 6);
    assert_int_equal(cfg->buses[0].response_timeout_ms, 500);
    config_free(cfg);
}

static void test_defaults(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = /dev/ttyUSB0\n[device d]\nslave = 7\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->buses[0].baud, 19200);
    assert_int_equal(cfg->buses[0].retries, 1);
    assert_int_equal(cfg->devices[0].bus, 0);      /* the only bus */
    assert_int_equal(cfg->devices[0].dead_after, 3);
    assert_true(cfg->router.exploration > 0.049 && cfg->router.exploration < 0.051);
    assert_int_equal(cfg->router.explore_run, 8);
    assert_string_equal(cfg->router.policy, "epsilon");
    config_free(cfg);
    cfg = load("[bus a]\nport = /dev/x\n[router]\npolicy = thompson\n", &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->router.policy, "thompson");
    config_free(cfg);
}

static void test_every_error_named_with_line(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\n"                 /* 1 */
        "port = /dev/x\n"           /* 2 */
        "baud = 12\n"               /* 3 */
        "retires = 3\n"             /* 4 */
        "parity = maybe\n"          /* 5 */
        "[device d]\n"              /* 6 */
        "bus = b\n"                 /* 7 */
        "slave = 300\n"             /* 8 */
        "[poll p]\n"                /* 9 */
        "device = zz\n"             /* 10 */
        "function = 3\n"            /* 11 */
        "count = 200\n"             /* 12 */
        "[tcp]\n"                   /* 13 */
        "allow = 1.2.3.4/40\n"      /* 14 */
        "unit5 = a\n"               /* 15 */
        "[weird]\n"                 /* 16 */
        "x = 1\n"                   /* 17 */
        "[bus a]\n"                 /* 18 */
        "port = /dev/y\n"           /* 19 */
        "[router]\n"                /* 20 */
        "buckets = 8,4,256\n"       /* 21 */
        "exploration = 1.5\n"       /* 22 */
        "explore_run = 0\n"         /* 23 */
        "policy = greedy\n";        /* 24 */
    assert_null(load(text, &errs));
    expect_error(&errs, "t.ini:3: [bus a] baud = '12'", "300..4000000");
    expect_error(&errs, "t.ini:4: [bus a] retires: unknown key", NULL);
    expect_error(&errs, "t.ini:5: [bus a] parity = 'maybe'", "none, even or odd");
    expect_error(&errs, "t.ini:7: [device d] bus = 'b'", "no such bus");
    expect_error(&errs, "t.ini:8: [device d] slave = '300'", "1..247");
    expect_error(&errs, "t.ini:10: [poll p] device = 'zz'", "no such device");
    expect_error(&errs, "t.ini:9: [poll p] count = 200", "1..125");
    expect_error(&errs, "t.ini:14: [tcp] allow = '1.2.3.4/40'", "0..32");
    expect_error(&errs, "t.ini:15: [tcp] unit5 = 'a'", "BUS:SLAVE");
    expect_error(&errs, "t.ini:16: [weird]", "unknown section");
    expect_error(&errs, "t.ini:18: [bus a]", "defined twice");
    expect_error(&errs, "t.ini:21: [router] buckets = '8,4,256'", "ascending");
    expect_error(&errs, "t.ini:22: [router] exploration = '1.5'", "0..1");
    expect_error(&errs, "t.ini:23: [router] explore_run = '0'", "1..1024");
    expect_error(&errs, "t.ini:24: [router] policy = 'greedy'", "thompson");
    assert_true(errs.total >= 15);
}

static void test_syntax_and_long_lines(void **state)
{
    (void)state;
    config_errors_t errs;
    assert_null(load("[bus a]\nport = /dev/x\nthis is not ini\n", &errs));
    expect_error(&errs, "t.ini:3:", NULL);

    char text[1024];
    snprintf(text, sizeof text, "[bus a]\nport = /dev/%0400d\n", 0);
    assert_null(load(text, &errs));
    expect_error(&errs, "t.ini:2: line longer than", NULL);

    assert_null(config_load_file("/nonexistent/rtugw.ini", &errs));
    expect_error(&errs, "/nonexistent/rtugw.ini: cannot open", NULL);
}

static void test_required_and_cross_checks(void **state)
{
    (void)state;
    config_errors_t errs;
    assert_null(load("[bus a]\nbaud = 9600\n[bus b]\nport = /dev/b\n[device d]\nbus = a\n"
                     "[device e]\nbus = a\nslave = 4\n[device f]\nbus = a\nslave = 4\n"
                     "[tcp]\nport = 8502\n", &errs));
    expect_error(&errs, "t.ini:1: [bus a]: port is required", NULL);
    expect_error(&errs, "t.ini:5: [device d]: slave is required", NULL);
    expect_error(&errs, "t.ini:10: [device f]: slave 4 on bus a is already device e", NULL);
        expect_error(&errs, "t.ini: [tcp] and [http] both use 127.0.0.1:8502", NULL);
}

static void test_log_target(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[gateway]\nlog_target = syslog\n[bus a]\nport = /dev/x\n", &errs);
    assert_non_null(cfg);
    assert_true(cfg->log_syslog);
    config_free(cfg);
    assert_null(load("[gateway]\nlog_target = file\n[bus a]\nport = /dev/x\n", &errs));
    expect_error(&errs, "t.ini:2: [gateway] log_target = 'file'", "stderr or syslog");
}

static void test_error_list_is_bounded(void **state)
{
    (void)state;
    /* 100 bad keys: the first CONFIG_MAX_ERRORS are kept, all are counted. */
    static char text[8192];
    size_t n = (size_t)snprintf(text, sizeof text, "[bus a]\nport = /dev/x\n");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "bad%d = 1\n", i);
    config_errors_t errs;
    assert_null(load(text, &errs));
    assert_int_equal(errs.count, CONFIG_MAX_ERRORS);
    assert_int_equal(errs.total, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_is_valid),
        cmocka_unit_test(test_example_file_is_valid),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_error_named_with_line),
        cmocka_unit_test(test_syntax_and_long_lines),
        cmocka_unit_test(test_required_and_cross_checks),
        cmocka_unit_test(test_error_list_is_bounded),
        cmocka_unit_test(test_log_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
