/*
 * tests/unit/test_reload_result.c -- a reload's outcome lists
 * (gateway/reload_result.c): keys go in whole, once, a space between two; a
 * key that does not fit is never cut: the list ends " ..." once and the key
 * is counted; the first error is kept.
 */
#include "gateway/gateway.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static void test_keys_whole_and_once(void **state)
{
    (void)state;
    reload_result_t r = { .restart = "" };
    assert_int_equal(reload_restart_add(&r, "tcp.port"), 0);
    assert_int_equal(reload_restart_add(&r, "buses.b2"), 0);
    assert_int_equal(reload_restart_add(&r, "tcp.port"), 0);   /* there already */
    assert_int_equal(reload_restart_add(&r, ""), 0);           /* nothing to name */
    assert_string_equal(r.restart, "tcp.port buses.b2");
    assert_true(reload_restart_has(&r, "buses.b2"));
    assert_false(reload_restart_has(&r, "buses"));             /* a whole word, not a prefix */
    assert_false(reload_restart_has(&r, "port"));
    assert_int_equal(reload_applied_add(&r, "tags"), 0);
    assert_int_equal(reload_applied_add(&r, "tag"), 0);        /* "tags" holds it only as a prefix */
    assert_string_equal(r.applied, "tags tag");
    assert_true(reload_applied_has(&r, "tag"));
    assert_int_equal(r.dropped, 0);
}

static void test_full_list_says_so(void **state)
{
    (void)state;
    reload_result_t r = { .restart = "" };
    char key[16];
    unsigned added = 0;
    for (unsigned i = 0; i < 40; i++) {   /* 40 keys of 7 bytes (with the space): more than 64 */
        snprintf(key, sizeof key, "key%03u", i);
        if (reload_queued_add(&r, key) == 0)
            added++;
    }
    size_t n = strlen(r.queued);
    assert_true(n < sizeof r.queued);
    assert_string_equal(r.queued + n - 4, " ...");
    assert_int_equal(r.dropped, 40 - added);
    assert_int_equal(added, (sizeof r.queued - 1 - 4) / 7);   /* every key that fits with the marker's room */
    /* each name before the marker is a whole key */
    char copy[sizeof r.queued];
    snprintf(copy, sizeof copy, "%.*s", (int)(n - 4), r.queued);
    unsigned words = 0;
    for (char *w = strtok(copy, " "); w; w = strtok(NULL, " "), words++) {
        snprintf(key, sizeof key, "key%03u", words);
        assert_string_equal(w, key);
    }
    assert_int_equal(words, added);
    assert_int_equal(reload_queued_add(&r, "x"), -1);   /* full stays full: one marker */
    assert_int_equal(strlen(r.queued), n);
}

static void test_key_longer_than_the_list(void **state)
{
    (void)state;
    reload_result_t r = { .restart = "" };
    char big[sizeof r.queued + 8];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(reload_queued_add(&r, big), -1);
    assert_string_equal(r.queued, "...");
    assert_int_equal(reload_queued_add(&r, "tags"), -1);   /* after the marker, nothing */
    assert_string_equal(r.queued, "...");
    assert_int_equal(r.dropped, 2);
}

static void test_first_error_kept(void **state)
{
    (void)state;
    reload_result_t r = { .restart = "" };
    reload_error(&r, "tcp: cannot listen on 0.0.0.0:502: in use");
    reload_error(&r, "router: out of memory");
    assert_string_equal(r.error, "tcp: cannot listen on 0.0.0.0:502: in use");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_whole_and_once),
        cmocka_unit_test(test_full_list_says_so),
        cmocka_unit_test(test_key_longer_than_the_list),
        cmocka_unit_test(test_first_error_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
