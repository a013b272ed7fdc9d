/*
 * tests/unit/test_config_compare.c -- config/compare.c: two sections are the same
 * when their keys say the same (issue 41: a reload compared the structs'
 * bytes, line numbers included, so a comment added at the top of the file
 * made every section "changed"). A section that only moved is the same; a
 * key changed, even to a shorter string over a longer one, is not.
 */
#include "config/config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char base[] =
    "[bus line]\nport = sim:1,2\nbaud = 19200\n"
    "[device d1]\nslave = 1\nwiden_reads = false\n"
    "[poll p1]\ndevice = d1\nfunction = 3\naddress = 0\ncount = 4\n"
    "[tcp]\nport = 15020\n";

static config_t *load(const char *text)
{
    static config_errors_t errs;
    config_t *cfg = config_load_string(text, "t.ini", &errs);
    for (unsigned i = 0; !cfg && i < errs.count; i++)
        fprintf(stderr, "  %s\n", errs.text[i]);
    assert_non_null(cfg);
    return cfg;
}

/* templates name a CSV: loading one needs the file, so they are compared by hand below */
static void test_moved_is_same(void **state)
{
    (void)state;
    char moved[1024];
    snprintf(moved, sizeof moved, "# hall 2\n; line 1\n\n%s", base);
    config_t *a = load(base), *b = load(moved);
    assert_int_not_equal(a->buses[0].line, b->buses[0].line);
    assert_int_not_equal(a->devices[0].line, b->devices[0].line);
    assert_true(config_same_buses(a, b));
    assert_true(config_same_devices(a, b));
    assert_true(config_same_polls(a, b));
    assert_true(config_same_serial_slaves(a, b));
    config_free(a);
    config_free(b);
}

static void test_changed_is_not_same(void **state)
{
    (void)state;
    static const struct { const char *from, *to; int table; } edits[] = {
        { "baud = 19200", "baud = 9600", 0 },
        { "port = sim:1,2", "port = sim:1", 0 },          /* a shorter string over a longer one */
        { "widen_reads = false", "widen_reads = true", 1 },
        { "slave = 1", "slave = 2", 1 },
        { "count = 4", "count = 5", 2 },
    };
    config_t *a = load(base);
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char text[1024];
        const char *at = strstr(base, edits[i].from);
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - base), base, edits[i].to, at + strlen(edits[i].from));
        config_t *b = load(text);
        bool same = edits[i].table == 0 ? config_same_buses(a, b)
                  : edits[i].table == 1 ? config_same_devices(a, b) : config_same_polls(a, b);
        if (same)
            fail_msg("'%s' -> '%s' not seen", edits[i].from, edits[i].to);
        config_free(b);
    }
    config_free(a);
}

static void test_templates(void **state)
{
    (void)state;
    config_template_t x = { .name = "meter", .tags_file = "meter.csv", .interval_ms = 500, .line = 3 };
    config_template_t y = x;
    y.line = 9;
    assert_true(config_same_template(&x, &y));
    snprintf(y.tags_file, sizeof y.tags_file, "meter2.csv");
    assert_false(config_same_template(&x, &y));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_is_same),
        cmocka_unit_test(test_changed_is_not_same),
        cmocka_unit_test(test_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
