/*
 * tests/test_json.c -- json_quote() against the strings a hostile
 * configuration can hold. The output of each case is also checked by a
 * strict parser in tests/test_json_status.py (through /status).
 */
#include "json/json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

static void expect(const char *in, const char *want)
{
    char buf[256];
    size_t n = json_quote(buf, sizeof buf, in);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_plain(void **state)
{
    (void)state;
    expect("line", "\"line\"");
    expect("", "\"\"");
}

static void test_quotes_and_backslashes(void **state)
{
    (void)state;
    expect("/dev/tty\"},{\"x\":\"", "\"/dev/tty\\\"},{\\\"x\\\":\\\"\"");
    expect("a\\b", "\"a\\\\b\"");
}

static void test_control(void **state)
{
    (void)state;
    expect("a\nb\tc\x01\x1f\x7f", "\"a\\u000ab\\u0009c\\u0001\\u001f\\u007f\"");
}

static void test_utf8(void **state)
{
    (void)state;
    expect("K\xc3\xa4ltemaschine \xe2\x82\xac \xf0\x9f\x94\xa5", "\"K\xc3\xa4ltemaschine \xe2\x82\xac \xf0\x9f\x94\xa5\"");
    expect("\xff", "\"\\ufffd\"");                       /* never a UTF-8 byte */
    expect("\xc0\xaf", "\"\\ufffd\\ufffd\"");            /* overlong '/' */
    expect("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");  /* a surrogate */
    expect("\xe2\x82", "\"\\ufffd\\ufffd\"");            /* cut sequence */
    expect("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  /* past U+10FFFF */
}

static void test_truncation(void **state)
{
    char buf[8];
    (void)state;
    size_t n = json_quote(buf, sizeof buf, "abc\"defgh");
    assert_int_equal(n, 12);
    assert_string_equal(buf, "\"abc\\\"\"");   /* cut after a whole escape, still a whole string */
    n = json_quote(buf, 3, "xyz");
    assert_string_equal(buf, "\"\"");
    assert_int_equal(n, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_quotes_and_backslashes),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
