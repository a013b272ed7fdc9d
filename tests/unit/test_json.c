/*
 * tests/unit/test_json.c -- json_quote() against the strings a hostile
 * configuration can hold, and json_parse_request()'s rule for requests.
 * The daemon's output of such strings is also checked by a strict parser in
 * tests/e2e/modbus/test_frontend_bounds.py (test_status_escapes_every_string, through
 * /status).
 */
#include "json/json.h"

#include <json-c/json.h>

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

/* json_parse_request: the one rule for requests from outside (HTTP, MQTT). */
static void expect_refused(const char *text, size_t len, size_t max_tokens, const char *why)
{
    char got[96] = "";
    struct json_object *root = json_parse_request(text, len, 8, max_tokens, got, sizeof got);
    if (root)
        json_object_put(root);
    assert_null(root);
    if (!strstr(got, why))
        fail_msg("'%.*s': '%s', expected '%s'", (int)len, text, got, why);
}

static void test_request_rule(void **state)
{
    char why[96];
    (void)state;
    struct json_object *root = json_parse_request("{\"value\": [1, 2]} \r\n", 20, 8, 4, why, sizeof why);
    assert_non_null(root);   /* '{', ':', '[', ',': four tokens; whitespace after */
    json_object_put(root);
    expect_refused("{\"value\": 5} junk", 17, 16, "text after the value");
    expect_refused("{\"value\": 5}{}", 14, 16, "text after the value");
    expect_refused("{\"value\": 5}\0", 13, 16, "NUL");
    expect_refused("{\"value\": [1, 2, 3]}", 20, 4, "more than 4 values");
    expect_refused("{\"value\": [1, 2]", 16, 16, "incomplete");
    expect_refused("[[[[[[[[[[1]]]]]]]]]]", 21, 64, "nesting too deep");
    /* tokens inside strings, escaped quotes included, do not count: two here */
    root = json_parse_request("{\"v\": \"a,b:[{\\\",\"}", 18, 8, 2, why, sizeof why);
    assert_non_null(root);
    json_object_put(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_quotes_and_backslashes),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_request_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
