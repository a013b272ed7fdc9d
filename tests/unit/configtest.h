/*
 * tests/unit/configtest.h -- what test_config.c and test_config_sections.c
 * share: a file loaded from a string, and an error looked for by its fragments.
 */
#ifndef RTUGW_TESTS_CONFIGTEST_H
#define RTUGW_TESTS_CONFIGTEST_H

#include "config/config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static inline config_t *load(const char *text, config_errors_t *errs)
{
    return config_load_string(text, "t.ini", errs);
}

/* Fails unless some error message contains every one of the fragments. */
static inline void expect_error(const config_errors_t *errs, const char *a, const char *b)
{
    for (unsigned i = 0; i < errs->count; i++)
        if (strstr(errs->text[i], a) && (!b || strstr(errs->text[i], b)))
            return;
    for (unsigned i = 0; i < errs->count; i++)
        fprintf(stderr, "  got: %s\n", errs->text[i]);
    fail_msg("no error containing '%s' and '%s'", a, b ? b : "");
}

static inline void expect_refused(const char *text, const char *a, const char *b)
{
    config_errors_t errs;
    config_t *cfg = load(text, &errs);
    if (cfg) {
        config_free(cfg);
        fail_msg("accepted:\n%s", text);
    }
    expect_error(&errs, a, b);
}

/* Loads text that must be valid; prints the errors if it is not. */
static inline config_t *accepted(const char *text)
{
    config_errors_t errs;
    config_t *cfg = load(text, &errs);
    for (unsigned i = 0; !cfg && i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.text[i]);
    assert_non_null(cfg);
    return cfg;
}

/* test_config_sections.c, run by test_config.c's main */
void test_udp_and_dialin(void **state);
void test_rtu_tcp_section(void **state);
void test_serial_slave_section(void **state);
void test_mqtt_section(void **state);

#endif
