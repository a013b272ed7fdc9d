/*
 * tests/unit/test_tags.c -- the tag model and codec: the name parsers, known
 * vectors in every order, writes and their PDUs, refusals, round trips over
 * every 16-bit value with scales, the table's validation and lookups, and
 * answers into values (quality, staleness, short answers, deadbands).
 * (tests/unit/test_tags_codec.py holds the codec against Python's struct;
 * tests/unit/test_tags_plan.c the planner; tests/unit/test_tags_csv.c the loader.)
 */
#include "tags/tags.h"
#include "tests/lib/tagsutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tags_tag_t make(tags_type_t type, tags_order_t order, unsigned count)
{
    tags_tag_t g = { .name = "t", .area = TAGS_AREA_HOLDING, .address = 100, .type = type,
                     .count = (uint16_t)count, .order = order, .scale = 1, .writable = true,
                     .interval_ms = 1000 };
    return g;
}

/* A tag as the table normalises it (count from the type, order for one register). */
static tags_tag_t added(tags_tag_t g)
{
    tags_table_t *t = tags_table_new(1);
    char msg[256];
    int i = tags_table_add(t, &g, "dev", msg, sizeof msg);
    if (i < 0)
        fail_msg("add: %s", msg);
    tags_tag_t out = *tags_table_tag(t, 0);
    tags_table_free(t);
    return out;
}

static void test_parse_names(void **state)
{
    (void)state;
    tags_type_t type;
    tags_order_t order;
    tags_area_t area;
    unsigned count, address;
    int bit;
    char msg[256];

    assert_int_equal(tags_parse_type("Float32", &type, &count, msg, sizeof msg), 0);
    assert_int_equal(type, TAGS_FLOAT32);
    assert_int_equal(count, 2);
    assert_int_equal(tags_parse_type("string:10", &type, &count, msg, sizeof msg), 0);
    assert_int_equal(count, 10);
    assert_int_equal(tags_parse_type("string", &type, &count, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "string:N"));
    assert_int_equal(tags_parse_type("raw:126", &type, &count, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_type("int16:2", &type, &count, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_type("real", &type, &count, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "'real'"));
    /* the vendors' types: Kepware's names as aliases, fixed-point with its digits */
    unsigned point = 7;
    assert_int_equal(tags_parse_type_point("LBCD", &type, &count, &point, msg, sizeof msg), 0);
    assert_true(type == TAGS_BCD32 && count == 2 && point == 0);
    assert_int_equal(tags_parse_type_point("uint8h", &type, &count, &point, msg, sizeof msg), 0);
    assert_true(type == TAGS_UINT8H && count == 1);
    assert_int_equal(tags_parse_type_point("fixed32:3", &type, &count, &point, msg, sizeof msg), 0);
    assert_true(type == TAGS_FIXED32 && count == 2 && point == 3);
    assert_int_equal(tags_parse_type_point("fixed16", &type, &count, &point, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "fixed16:D"));
    assert_int_equal(tags_parse_type_point("ufixed16:10", &type, &count, &point, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_type_point("float16:2", &type, &count, &point, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_type("fixed16:2", &type, &count, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_order_for("CDAB", TAGS_STRING, &order, msg, sizeof msg), 0);
    assert_string_equal(tags_order_name(order, TAGS_STRING), "CDAB");
    assert_int_equal(tags_parse_order_for("AB", TAGS_INT8H, &order, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_order_for("CDAB", TAGS_BCD16, &order, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_device_order(TAGS_ORDER_DCBA, TAGS_STRING), TAGS_ORDER_BADC);
    assert_int_equal(tags_device_order(TAGS_ORDER_DCBA, TAGS_BCD32), TAGS_ORDER_DCBA);

    assert_int_equal(tags_parse_order("GHEFCDAB", &order, msg, sizeof msg), 0);
    assert_int_equal(order, TAGS_ORDER_CDAB);
    assert_int_equal(tags_parse_order("dcba", &order, msg, sizeof msg), 0);
    assert_int_equal(order, TAGS_ORDER_DCBA);
    assert_int_equal(tags_parse_order("ABDC", &order, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_order_for("CDAB", TAGS_INT64, &order, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "GHEFCDAB"));
    assert_int_equal(tags_parse_order_for("BA", TAGS_STRING, &order, msg, sizeof msg), 0);
    assert_int_equal(order, TAGS_ORDER_BADC);
    assert_int_equal(tags_parse_order_for("ABCD", TAGS_INT16, &order, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_parse_order_for("AB", TAGS_BOOL, &order, msg, sizeof msg), -EINVAL);
    assert_string_equal(tags_order_name(TAGS_ORDER_BADC, TAGS_FLOAT64), "BADCFEHG");
    assert_string_equal(tags_order_name(TAGS_ORDER_BADC, TAGS_UINT16), "BA");

    assert_int_equal(tags_parse_area("Holding", &area, msg, sizeof msg), 0);
    assert_int_equal(area, TAGS_AREA_HOLDING);
    assert_int_equal(tags_parse_area("register", &area, msg, sizeof msg), -EINVAL);

    assert_int_equal(tags_parse_address("100.3", &address, &bit, msg, sizeof msg), 0);
    assert_int_equal(address, 100);
    assert_int_equal(bit, 3);
    assert_int_equal(tags_parse_address("0xFFFF", &address, &bit, msg, sizeof msg), 0);
    assert_int_equal(address, 65535);
    assert_int_equal(bit, -1);
    const char *bad[] = { "", "65536", "-1", "+5", " 5", "1e3", "0x", "0x10000", "100.16", "100.", "1.2.3", "0x-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (tags_parse_address(bad[i], &address, &bit, msg, sizeof msg) != -EINVAL)
            fail_msg("address '%s' was taken", bad[i]);
    assert_int_equal(tags_parse_address("100.3", &address, NULL, msg, sizeof msg), -EINVAL);
}

/* 10.0f is 0x41200000, 1234567890123 is 0x0000011F71FB04CB. */
static void test_known_vectors_every_order(void **state)
{
    (void)state;
    static const struct {
        tags_order_t order;
        uint16_t f32[2];
        uint16_t i64[4];
    } v[] = {
        { TAGS_ORDER_ABCD, { 0x4120, 0x0000 }, { 0x0000, 0x011F, 0x71FB, 0x04CB } },
        { TAGS_ORDER_CDAB, { 0x0000, 0x4120 }, { 0x04CB, 0x71FB, 0x011F, 0x0000 } },
        { TAGS_ORDER_BADC, { 0x2041, 0x0000 }, { 0x0000, 0x1F01, 0xFB71, 0xCB04 } },
        { TAGS_ORDER_DCBA, { 0x0000, 0x2041 }, { 0xCB04, 0xFB71, 0x1F01, 0x0000 } },
    };
    for (size_t i = 0; i < 4; i++) {
        tags_tag_t f = added(make(TAGS_FLOAT32, v[i].order, 0));
        tags_tag_t q = added(make(TAGS_INT64, v[i].order, 0));
        tags_value_t val;
        tags_decode(&f, v[i].f32, &val);
        assert_true(val.raw.f == 10.0);
        tags_decode(&q, v[i].i64, &val);
        assert_true(val.raw.i == 1234567890123LL);
        tags_write_t w;
        char msg[256];
        assert_int_equal(tags_encode_number(&f, 10.0, 0, &w, msg, sizeof msg), 0);
        assert_memory_equal(w.words, v[i].f32, sizeof v[i].f32);
        assert_int_equal(tags_encode_text(&q, "1234567890123", 0, &w, msg, sizeof msg), 0);
        assert_memory_equal(w.words, v[i].i64, sizeof v[i].i64);
    }
    /* a one-register type takes only the byte swap of a device default */
    tags_tag_t s = added(make(TAGS_INT16, TAGS_ORDER_DCBA, 0));
    assert_int_equal(s.order, TAGS_ORDER_BADC);
    tags_value_t val;
    tags_decode(&s, (uint16_t[]){ 0xFEFF }, &val);
    assert_int_equal(val.raw.i, -2);   /* 0xFFFE */
}

/* tags/codec.c rounds without libm (docs/footprint.md): the raw integer a
 * number encodes to must be libm's round(), half away from zero, at the
 * edges where a naive x + 0.5 goes wrong and up to 2^53. */
static void test_rounding_matches_libm(void **state)
{
    (void)state;
    tags_tag_t q = added(make(TAGS_INT64, TAGS_ORDER_ABCD, 0));
    const double edges[] = { 0.0, -0.0, 0.49999999999999994, -0.49999999999999994, 0.5, -0.5, 1.5, -1.5,
                             2.5, -2.5, 0.5000000000000001, 4503599627370495.5, -4503599627370495.5,
                             4503599627370497.0, 9007199254740991.0, -9007199254740991.0, 1e15 + 0.5,
                             123456.49999999999, -7.5, 7.4999999999999991 };
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] + 20000; i++) {
        double v;
        if (i < sizeof edges / sizeof edges[0]) {
            v = edges[i];
        } else {   /* halves and near-halves of every size up to 2^53 */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            double m = (double)(x >> 11) / 0x1p53 * ldexp(1.0, (int)(x % 53));
            v = (x & 1 ? -1.0 : 1.0) * (floor(m) + (x & 2 ? 0.5 : nextafter(0.5, x & 4 ? 0.0 : 1.0)));
        }
        tags_write_t w;
        char msg[256];
        assert_int_equal(tags_encode_number(&q, v, 0, &w, msg, sizeof msg), 0);
        tags_value_t val;
        tags_decode(&q, w.words, &val);
        if (val.raw.i != (long long)round(v))
            fail_msg("%.17g encoded as %lld, round() says %.17g", v, (long long)val.raw.i, round(v));
    }
}

static void test_scale_and_format(void **state)
{
    (void)state;
    tags_tag_t g = make(TAGS_INT16, TAGS_ORDER_ABCD, 0);
    g.scale = 0.1;
    g.offset = -40;
    g = added(g);
    tags_value_t v;
    char text[64];
    tags_decode(&g, (uint16_t[]){ 0x00FA }, &v);   /* 250 */
    assert_int_equal(v.raw.i, 250);
    assert_true(v.eng == 250 * 0.1 - 40);
    assert_int_equal(tags_format(&g, &v, text, sizeof text), 3);
    assert_string_equal(text, "-15");
    assert_int_equal(tags_format(&g, &v, text, 3), -ENOSPC);

    tags_tag_t u = added(make(TAGS_UINT64, TAGS_ORDER_ABCD, 0));
    tags_decode(&u, (uint16_t[]){ 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF }, &v);
    tags_format(&u, &v, text, sizeof text);
    assert_string_equal(text, "18446744073709551615");   /* exact, not 1.8e19 */

    tags_tag_t f = added(make(TAGS_FLOAT32, TAGS_ORDER_ABCD, 0));
    tags_decode(&f, (uint16_t[]){ 0x3DCC, 0xCCCD }, &v);   /* 0.1f */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "0.1");   /* in float32 digits: reads back as the same float */
    assert_true((float)strtod(text, NULL) == (float)v.eng);
    /* -0.0 keeps its sign (raw x 1 + 0 would be +0.0, which writes back as another word) */
    tags_decode(&f, (uint16_t[]){ 0x8000, 0x0000 }, &v);
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "-0.0");   /* a float to every JSON reader ("-0" is an int to Python's) */
    tags_tag_t h = added(make(TAGS_FLOAT16, TAGS_ORDER_ABCD, 0));
    tags_decode(&h, (uint16_t[]){ 0x8000 }, &v);
    tags_format(&h, &v, text, sizeof text);
    assert_string_equal(text, "-0.0");

    /* a scaled integer: the decimal meant, which writes back to the same raw */
    tags_tag_t sc = make(TAGS_INT16, TAGS_ORDER_ABCD, 0);
    sc.scale = 0.1;
    sc = added(sc);
    tags_decode(&sc, (uint16_t[]){ 14503 }, &v);
    assert_true(v.eng != 1450.3);   /* the double product is 1450.3000000000002 */
    tags_format(&sc, &v, text, sizeof text);
    assert_string_equal(text, "1450.3");
    sc.offset = -273.15;
    tags_decode(&sc, (uint16_t[]){ 0xFFFF }, &v);
    tags_format(&sc, &v, text, sizeof text);
    assert_string_equal(text, "-273.25");
    sc.scale = 1.0 / 3;   /* no short decimal: the double's own digits */
    sc.offset = 0;
    tags_decode(&sc, (uint16_t[]){ 2 }, &v);
    tags_format(&sc, &v, text, sizeof text);
    assert_true(strtod(text, NULL) == v.eng);
    /* decimals: every number with exactly that many digits after the point */
    f.has_decimals = true;
    f.decimals = 3;
    tags_decode(&f, (uint16_t[]){ 0x4049, 0x0FD0 }, &v);   /* 3.14159f */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "3.142");
    f.decimals = 0;
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "3");
    f.has_decimals = false;
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "3.14159");
    tags_decode(&f, (uint16_t[]){ 0x4974, 0x2400 }, &v);   /* 1e6f: no exponent, as JavaScript */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "1000000");
    /* beyond JavaScript's plain range the exponent is JavaScript's too:
     * "6e-8", not %g's "6e-08" (issue 44) */
    tags_decode(&f, (uint16_t[]){ 0x3380, 0xd959 }, &v);   /* 6e-8f */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "6e-8");
    tags_decode(&f, (uint16_t[]){ 0xb421, 0x0fb0 }, &v);   /* -1.5e-7f */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "-1.5e-7");
    tags_decode(&f, (uint16_t[]){ 0x6258, 0xd727 }, &v);   /* 1e21f */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "1e+21");
    tags_decode(&f, (uint16_t[]){ 0x3586, 0x37bd }, &v);   /* 1e-6f: still plain */
    tags_format(&f, &v, text, sizeof text);
    assert_string_equal(text, "0.000001");
    {
        tags_tag_t half = added(make(TAGS_FLOAT16, TAGS_ORDER_ABCD, 0));
        tags_decode(&half, (uint16_t[]){ 0x0001 }, &v);     /* the least float16, 5.96e-8 */
        tags_format(&half, &v, text, sizeof text);
        assert_string_equal(text, "6e-8");
    }
    /* decimals are a number's: refused on a bool, a string or raw */
    tags_table_t *dt = tags_table_new(4);
    char why[256];
    tags_tag_t db = make(TAGS_STRING, TAGS_ORDER_ABCD, 2);
    db.has_decimals = true;
    assert_int_equal(tags_table_add(dt, &db, "dev", why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "decimals"));
    tags_table_free(dt);
    bool has;
    uint8_t dec;
    assert_int_equal(tags_parse_decimals("16", &has, &dec, why, sizeof why), -EINVAL);
    assert_int_equal(tags_parse_decimals("15", &has, &dec, why, sizeof why), 0);
    assert_true(has && dec == 15);

    tags_tag_t s = added(make(TAGS_STRING, TAGS_ORDER_BADC, 3));
    tags_decode(&s, (uint16_t[]){ 0x4241, 0x0043, 0x4444 }, &v);   /* "AB" "C\0" "DD" */
    assert_int_equal(tags_format(&s, &v, text, sizeof text), 3);
    assert_string_equal(text, "ABC");
    tags_tag_t r = added(make(TAGS_RAW, TAGS_ORDER_ABCD, 2));
    tags_decode(&r, (uint16_t[]){ 0x0001, 0xFF00 }, &v);
    tags_format(&r, &v, text, sizeof text);
    assert_string_equal(text, "0001 ff00");
    tags_write_t w;
    char msg[256];
    assert_int_equal(tags_encode_text(&r, text, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(w.words[1], 0xFF00);
    assert_int_equal(tags_encode_text(&r, "0001", 0, &w, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_encode_text(&r, "1 2 3", 0, &w, msg, sizeof msg), -EINVAL);
    assert_int_equal(tags_encode_text(&r, "12345 1", 0, &w, msg, sizeof msg), -EINVAL);
}

/* Every int16 and uint16 raw value, through eng and back, with scales. */
static void test_scaled_round_trip_every_16_bit_value(void **state)
{
    (void)state;
    static const double scales[][2] = { { 1, 0 }, { 0.1, -40 }, { 0.01, 0 }, { -2.5, 273.15 }, { 1e-3, 0.5 } };
    char msg[256], text[64];
    for (size_t s = 0; s < 5; s++)
        for (int type = TAGS_INT16; type <= TAGS_UINT16; type++) {
            tags_tag_t g = make((tags_type_t)type, TAGS_ORDER_BADC, 0);
            g.scale = scales[s][0];
            g.offset = scales[s][1];
            g = added(g);
            for (unsigned x = 0; x < 65536; x++) {
                uint16_t word = (uint16_t)x;
                tags_value_t v;
                tags_write_t w;
                tags_decode(&g, &word, &v);
                assert_int_equal(tags_encode_number(&g, v.eng, 0, &w, msg, sizeof msg), 0);
                if (w.words[0] != word)
                    fail_msg("%s scale %g offset %g: %04x -> %.17g -> %04x", tags_type_name(g.type),
                             g.scale, g.offset, x, v.eng, w.words[0]);
                assert_true(tags_format(&g, &v, text, sizeof text) > 0);
                assert_int_equal(tags_encode_text(&g, text, 0, &w, msg, sizeof msg), 0);
                assert_int_equal(w.words[0], word);
            }
        }
}

static void test_refusals(void **state)
{
    (void)state;
    char msg[256];
    tags_write_t w;
    tags_tag_t i16 = added(make(TAGS_INT16, 0, 0)), u16 = added(make(TAGS_UINT16, 0, 0));
    assert_int_equal(tags_encode_number(&i16, 32767, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_encode_number(&i16, 32767.4, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_encode_number(&i16, 32767.5, 0, &w, msg, sizeof msg), -ERANGE);
    assert_non_null(strstr(msg, "-32768..32767"));
    assert_int_equal(tags_encode_number(&i16, -32768.5, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&u16, -0.4, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(w.words[0], 0);
    assert_int_equal(tags_encode_number(&u16, -0.5, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&u16, 65536, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&u16, NAN, 0, &w, msg, sizeof msg), -EDOM);
    assert_int_equal(tags_encode_number(&u16, INFINITY, 0, &w, msg, sizeof msg), -EDOM);
    assert_int_equal(tags_encode_text(&u16, "65536", 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_text(&u16, "-1", 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_text(&u16, "12abc", 0, &w, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "'12abc'"));

    tags_tag_t u64 = added(make(TAGS_UINT64, 0, 0)), i64 = added(make(TAGS_INT64, 0, 0));
    assert_int_equal(tags_encode_text(&u64, "18446744073709551615", 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_encode_text(&u64, "18446744073709551616", 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_text(&i64, "-9223372036854775808", 0, &w, msg, sizeof msg), 0);
    assert_int_equal(w.words[0], 0x8000);
    assert_int_equal(tags_encode_text(&i64, "9223372036854775808", 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&i64, 0x1p63, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&u64, 0x1p64, 0, &w, msg, sizeof msg), -ERANGE);

    tags_tag_t f32 = added(make(TAGS_FLOAT32, 0, 0));
    assert_int_equal(tags_encode_number(&f32, 3.4028234663852886e38, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_encode_number(&f32, 3.5e38, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&f32, NAN, 0, &w, msg, sizeof msg), 0);   /* floats hold NaN */
    assert_int_equal(w.words[0] & 0x7F80, 0x7F80);

    tags_tag_t b = make(TAGS_BOOL, 0, 0);
    b.in_register = true;
    b.bit = 3;
    b = added(b);
    assert_int_equal(tags_encode_number(&b, 2, 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&b, NAN, 0, &w, msg, sizeof msg), -EDOM);
    assert_int_equal(tags_encode_text(&b, "maybe", 0, &w, msg, sizeof msg), -EINVAL);

    tags_tag_t s = added(make(TAGS_STRING, 0, 2));
    assert_int_equal(tags_encode_text(&s, "ABCD", 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_encode_text(&s, "ABCDE", 0, &w, msg, sizeof msg), -ERANGE);
    assert_int_equal(tags_encode_number(&s, 1, 0, &w, msg, sizeof msg), -EINVAL);
    tags_tag_t big = added(make(TAGS_RAW, 0, 124));
    assert_int_equal(tags_encode_number(&big, 1, 0, &w, msg, sizeof msg), -EINVAL);
    char hex[124 * 5 + 1] = "";
    for (unsigned i = 0; i < 124; i++)
        strcat(hex, "0 ");
    assert_int_equal(tags_encode_text(&big, hex, 0, &w, msg, sizeof msg), -ERANGE);   /* > 123 */

    tags_tag_t ro = make(TAGS_FLOAT32, 0, 0);
    ro.writable = false;
    ro = added(ro);
    assert_int_equal(tags_encode_number(&ro, 1, 0, &w, msg, sizeof msg), -EACCES);
    assert_non_null(strstr(msg, "not writable"));
    assert_int_equal(tags_encode_text(&ro, "1", 0, &w, msg, sizeof msg), -EACCES);
}

static void test_writes_and_pdus(void **state)
{
    (void)state;
    char msg[256];
    tags_write_t w;
    uint8_t pdu[6 + 2 * TAGS_WRITE_MAX];

    tags_tag_t coil = make(TAGS_BOOL, 0, 0);
    coil.area = TAGS_AREA_COIL;
    coil.address = 7;
    coil = added(coil);
    assert_int_equal(tags_encode_text(&coil, "on", 0, &w, msg, sizeof msg), 0);
    assert_int_equal(w.function, 5);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 5);
    assert_memory_equal(pdu, ((uint8_t[]){ 5, 0, 7, 0xFF, 0 }), 5);
    assert_int_equal(tags_encode_number(&coil, 1, TAGS_WRITE_MULTIPLE, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 7);
    assert_memory_equal(pdu, ((uint8_t[]){ 15, 0, 7, 0, 1, 1, 1 }), 7);

    tags_tag_t reg = added(make(TAGS_UINT16, 0, 0));
    assert_int_equal(tags_encode_number(&reg, 0x1234, 0, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 5);
    assert_memory_equal(pdu, ((uint8_t[]){ 6, 0, 100, 0x12, 0x34 }), 5);
    assert_int_equal(tags_encode_number(&reg, 0x1234, TAGS_WRITE_MULTIPLE, &w, msg, sizeof msg), 0);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 8);
    assert_memory_equal(pdu, ((uint8_t[]){ 16, 0, 100, 0, 1, 2, 0x12, 0x34 }), 8);
    assert_int_equal(tags_write_pdu(&w, pdu, 7), -ENOSPC);

    tags_tag_t f = added(make(TAGS_FLOAT32, TAGS_ORDER_CDAB, 0));
    assert_int_equal(tags_encode_text(&f, "10", 0, &w, msg, sizeof msg), 0);
    assert_int_equal(w.function, 16);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 10);
    assert_memory_equal(pdu, ((uint8_t[]){ 16, 0, 100, 0, 2, 4, 0, 0, 0x41, 0x20 }), 10);

    /* a bit of a register: read, merge, write */
    tags_tag_t bit = make(TAGS_BOOL, 0, 0);
    bit.in_register = true;
    bit.bit = 9;
    bit = added(bit);
    assert_int_equal(tags_encode_text(&bit, "true", 0, &w, msg, sizeof msg), 0);
    assert_true(w.needs_read);
    assert_int_equal(w.mask, 0x0200);
    assert_int_equal(w.bits, 0x0200);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), -EAGAIN);
    tags_write_merge(&w, 0x00F1);
    assert_int_equal(tags_write_pdu(&w, pdu, sizeof pdu), 5);
    assert_memory_equal(pdu, ((uint8_t[]){ 6, 0, 100, 0x02, 0xF1 }), 5);
    assert_int_equal(tags_encode_text(&bit, "0", 0, &w, msg, sizeof msg), 0);
    tags_write_merge(&w, 0xFFFF);
    assert_int_equal(w.words[0], 0xFDFF);
}

/* An overheard answer (tags_table_observe): the tags it covers whole take its values,
 * a tag it covers only in part, of another area or another device, keeps its own. */
static void test_observe(void **state)
{
    (void)state;
    tags_table_t *t = tags_table_new(6);
    char msg[256];
    tags_tag_t a = make(TAGS_UINT16, TAGS_ORDER_ABCD, 1), f = make(TAGS_FLOAT32, TAGS_ORDER_ABCD, 2),
               part = make(TAGS_FLOAT32, TAGS_ORDER_ABCD, 2), in = make(TAGS_UINT16, TAGS_ORDER_ABCD, 1),
               other = make(TAGS_UINT16, TAGS_ORDER_ABCD, 1), coil = make(TAGS_BOOL, TAGS_ORDER_ABCD, 1);
    strcpy(a.name, "a"), a.address = 10;
    strcpy(f.name, "f"), f.address = 11;
    strcpy(part.name, "part"), part.address = 13;      /* 13..14: the answer ends at 13 */
    strcpy(in.name, "in"), in.address = 10, in.area = TAGS_AREA_INPUT, in.writable = false;
    strcpy(other.name, "other"), other.address = 10;
    strcpy(coil.name, "coil"), coil.address = 3, coil.area = TAGS_AREA_COIL;
    assert_int_equal(tags_table_add(t, &a, "plc", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(t, &f, "plc", msg, sizeof msg), 1);
    assert_int_equal(tags_table_add(t, &part, "plc", msg, sizeof msg), 2);
    assert_int_equal(tags_table_add(t, &in, "plc", msg, sizeof msg), 3);
    assert_int_equal(tags_table_add(t, &other, "plc2", msg, sizeof msg), 4);
    assert_int_equal(tags_table_add(t, &coil, "plc", msg, sizeof msg), 5);
    const uint16_t words[] = { 7, 0x3fc0, 0x0000, 9 };   /* 10..13; 1.5f at 11 */
    assert_int_equal(tags_table_observe(t, 0, TAGS_AREA_HOLDING, 10, words, NULL, 4, 5000), 2);
    tags_value_t v;
    tags_table_value(t, 0, 5000, &v);
    assert_int_equal(v.quality, TAGS_GOOD);
    assert_int_equal(v.raw.u, 7);
    assert_int_equal(v.time_ms, 5000);
    tags_table_value(t, 1, 5000, &v);
    assert_true(v.raw.f == 1.5);
    for (size_t i = 2; i <= 4; i++) {
        tags_table_value(t, i, 5000, &v);
        assert_int_equal(v.quality, TAGS_BAD);
        assert_int_equal(v.reason, TAGS_BAD_NOT_READ);
    }
    tags_table_value(t, 0, 5000 + 2001, &v);
    assert_int_equal(v.quality, TAGS_STALE);             /* older than twice its interval */
    const uint8_t packed[] = { 0x08 };                    /* coils 0..7: coil 3 on */
    assert_int_equal(tags_table_observe(t, 0, TAGS_AREA_COIL, 0, NULL, packed, 8, 6000), 1);
    tags_table_value(t, 5, 6000, &v);
    assert_true(v.raw.b);
    assert_int_equal(tags_table_observe(t, 0, TAGS_AREA_COIL, 0, words, NULL, 8, 6000), -EINVAL);
    tags_table_free(t);
}

static void test_table_validation(void **state)
{
    (void)state;
    tags_table_t *t = tags_table_new(3);
    char msg[256];
    tags_tag_t g = make(TAGS_FLOAT32, 0, 0);

    strcpy(g.name, "bad name");
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);
    strcpy(g.name, "ok");
    assert_int_equal(tags_table_add(t, &g, "no device", msg, sizeof msg), -EINVAL);
    g.address = 65535;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -ERANGE);
    assert_non_null(strstr(msg, "65535"));
    g.address = 0;
    g.scale = 0;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -ERANGE);
    g.scale = 1;
    g.interval_ms = 0;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -ERANGE);
    g.interval_ms = 1000;
    g.area = TAGS_AREA_INPUT;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);   /* writable input */
    assert_non_null(strstr(msg, "read-only"));
    g.area = TAGS_AREA_COIL;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);   /* float coil */
    g.type = TAGS_BOOL;
    g.in_register = true;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);   /* bit of a coil */
    g.area = TAGS_AREA_HOLDING;
    g.bit = 16;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);
    g.bit = 15;
    g.scale = 2;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EINVAL);   /* scaled bool */
    g.scale = 1;
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -EEXIST);
    strcpy(g.name, "b");
    assert_int_equal(tags_table_add(t, &g, "plc2", msg, sizeof msg), 1);
    strcpy(g.name, "c");
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), 2);
    strcpy(g.name, "d");
    assert_int_equal(tags_table_add(t, &g, "plc1", msg, sizeof msg), -ENOSPC);

    assert_int_equal(tags_table_find(t, "c"), 2);
    assert_int_equal(tags_table_find(t, "d"), -ENOENT);
    assert_int_equal(tags_table_device_count(t), 2);
    assert_int_equal(tags_table_find_device(t, "plc2"), 1);
    size_t n;
    const unsigned *idx = tags_table_device_tags(t, 0, &n);
    assert_int_equal(n, 2);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 2);
    tags_table_free(t);
}

/* Thousands of names through the index: all found, none confused. */
static void test_table_many_names(void **state)
{
    tags_table_t *t = *state;
    char msg[256];
    tags_tag_t g = make(TAGS_UINT16, 0, 0);
    for (unsigned i = 0; i < 5000; i++) {
        snprintf(g.name, sizeof g.name, "dev%u/tag_%u", i % 7, i);
        g.address = (uint16_t)i;
        assert_int_equal(tags_table_add(t, &g, i % 2 ? "odd" : "even", msg, sizeof msg), (int)i);
    }
    for (unsigned i = 0; i < 5000; i++) {
        snprintf(g.name, sizeof g.name, "dev%u/tag_%u", i % 7, i);
        assert_int_equal(tags_table_find(t, g.name), (int)i);
        assert_int_equal(tags_table_tag(t, i)->address, i);
    }
    assert_int_equal(tags_table_find(t, "dev0/tag_1"), -ENOENT);
}

/* Change numbers (tags/changes.c): every change a reader sees takes one,
 * within the deadband too (the shown value moved); a re-read of the same
 * value does not; a value gone stale takes one when swept, once, and its
 * next good answer another. */
static void test_change_numbers(void **state)
{
    tags_table_t *t = *state;
    char msg[256];
    tags_tag_t a = make(TAGS_INT16, 0, 0), b = make(TAGS_INT16, 0, 0);
    strcpy(a.name, "a");
    a.deadband = 5;
    strcpy(b.name, "b");
    b.address = 101;
    assert_int_equal(tags_table_add(t, &a, "plc1", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(t, &b, "plc1", msg, sizeof msg), 1);
    tags_table_seq_start(t, 1000);
    assert_int_equal(tags_table_seq_base(t), 1000);
    unsigned out[4];
    assert_int_equal(tags_table_changed(t, 999, out, 4), 2);
    assert_int_equal(tags_table_changed(t, 1000, out, 4), 0);
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan;
    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    uint16_t words[] = { 10, 20 };
    tags_table_apply(t, plan, 0, words, 2, 1000);
    assert_int_equal(tags_table_seq(t), 1002);
    tags_table_apply(t, plan, 0, words, 2, 1100);   /* the same values: their times only */
    assert_int_equal(tags_table_seq(t), 1002);
    words[0] = 11;                                   /* within a's deadband: no MQTT change, but shown */
    assert_int_equal(tags_table_apply(t, plan, 0, words, 2, 1200), 0);
    assert_int_equal(tags_table_changed(t, 1002, out, 4), 1);
    assert_int_equal(out[0], 0);
    assert_int_equal(tags_table_seq(t), 1003);
    /* interval 1000: stale after 3200 for both; the sweep tells it once */
    assert_int_equal(tags_table_sweep(t, 3200), 0);
    assert_int_equal(tags_table_sweep(t, 3201), 2);
    assert_int_equal(tags_table_sweep(t, 5000), 0);
    assert_int_equal(tags_table_seq(t), 1005);
    tags_table_apply(t, plan, 0, words, 2, 5000);     /* the same values, good again: shown */
    assert_int_equal(tags_table_seq(t), 1007);
    assert_int_equal(tags_table_changed(t, 1005, out, 1), 2);   /* more than cap: counted */
    assert_int_equal(tags_table_fail(t, plan, 0, TAGS_BAD_TIMEOUT, 0, 6000), 2);
    assert_int_equal(tags_table_seq(t), 1009);
    assert_int_equal(tags_table_sweep(t, 100000), 0);   /* bad values never go stale */
    tags_plan_free(plan);
    tags_planner_free(pl);
}

static void test_answers_into_values(void **state)
{
    tags_table_t *t = *state;
    char msg[256];
    tags_tag_t temp = make(TAGS_INT16, 0, 0);
    strcpy(temp.name, "temp");
    temp.scale = 0.1;
    temp.deadband = 0.5;
    tags_tag_t label = make(TAGS_STRING, 0, 2);
    strcpy(label.name, "label");
    label.address = 101;
    tags_tag_t coil = make(TAGS_BOOL, 0, 0);
    strcpy(coil.name, "valve");
    coil.area = TAGS_AREA_COIL;
    coil.address = 3;
    assert_int_equal(tags_table_add(t, &temp, "plc1", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(t, &label, "plc1", msg, sizeof msg), 1);
    assert_int_equal(tags_table_add(t, &coil, "plc1", msg, sizeof msg), 2);
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan;
    assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
    assert_int_equal(tags_plan_read_count(plan), 2);   /* coil 3+1, holding 100+3 */
    const tags_read_t *hr = tags_plan_read(plan, 1);
    assert_int_equal(hr->address, 100);
    assert_int_equal(hr->count, 3);

    tags_value_t v;
    assert_int_equal(tags_table_value(t, 0, 0, &v), 0);
    assert_int_equal(v.quality, TAGS_BAD);
    assert_int_equal(v.reason, TAGS_BAD_NOT_READ);

    uint16_t words[] = { 200, 0x4F4B, 0x0000 };   /* 20.0, "OK" */
    assert_int_equal(tags_table_apply(t, plan, 1, words, 3, 1000), 2);
    assert_int_equal(tags_table_value(t, 0, 1500, &v), 0);
    assert_int_equal(v.quality, TAGS_GOOD);
    assert_int_equal(v.time_ms, 1000);
    assert_true(fabs(v.eng - 20.0) < 1e-9);
    assert_int_equal(tags_table_value(t, 1, 1500, &v), 0);
    char text[16];
    tags_format(&label, &v, text, sizeof text);
    assert_string_equal(text, "OK");
    words[1] = 0;   /* the table keeps its own copy of the words */
    assert_int_equal(tags_table_value(t, 1, 1500, &v), 0);
    tags_format(&label, &v, text, sizeof text);
    assert_string_equal(text, "OK");

    /* within the deadband three times, then over it from the last told value */
    words[1] = 0x4F4B;
    for (int i = 1; i <= 3; i++) {
        words[0] = (uint16_t)(200 + i * 2);   /* 20.2, 20.4, 20.6: under 0.5 per read */
        int moved = tags_table_apply(t, plan, 1, words, 3, 1000 + i);
        assert_int_equal(moved, i == 3 ? 1 : 0);
    }
    /* stale after twice the interval */
    assert_int_equal(tags_table_value(t, 0, 1003 + 2000, &v), 0);
    assert_int_equal(v.quality, TAGS_GOOD);
    assert_int_equal(tags_table_value(t, 0, 1003 + 2001, &v), 0);
    assert_int_equal(v.quality, TAGS_STALE);

    /* a short answer: the string's words are missing */
    assert_int_equal(tags_table_apply(t, plan, 1, words, 2, 5000), 1);   /* the label went bad */
    assert_int_equal(tags_table_value(t, 1, 5000, &v), 0);
    assert_int_equal(v.reason, TAGS_BAD_SHORT);
    assert_int_equal(tags_table_value(t, 0, 5000, &v), 0);
    assert_int_equal(v.quality, TAGS_GOOD);

    assert_int_equal(tags_table_fail(t, plan, 1, TAGS_BAD_EXCEPTION, 2, 6000), 2);
    assert_int_equal(tags_table_value(t, 0, 6000, &v), 0);
    assert_int_equal(v.quality, TAGS_BAD);
    assert_int_equal(v.exception, 2);
    assert_true(fabs(v.eng - 20.6) < 1e-9);   /* last known value kept */
    assert_int_equal(tags_table_fail(t, plan, 1, TAGS_BAD_EXCEPTION, 2, 6001), 0);
    assert_int_equal(tags_table_fail(t, plan, 1, TAGS_BAD_TIMEOUT, 0, 6002), 2);

    /* coils: packed bits, and the kinds must match */
    uint8_t bits[] = { 0x01 };
    assert_int_equal(tags_table_apply_bits(t, plan, 0, bits, 1, 7000), 1);
    assert_int_equal(tags_table_value(t, 2, 7000, &v), 0);
    assert_true(v.raw.b);
    assert_int_equal(tags_table_apply(t, plan, 0, words, 3, 7000), -EINVAL);
    assert_int_equal(tags_table_apply_bits(t, plan, 1, bits, 8, 7000), -EINVAL);
    assert_int_equal(tags_table_fail(t, plan, 0, TAGS_BAD_NONE, 0, 7000), -EINVAL);

    /* a reload: a table built again carries the values of tags defined as
     * before, a string's words copied into its own table (the old one freed) */
    tags_table_t *again = tags_table_new(8);
    assert_int_equal(tags_table_add(again, &coil, "plc1", msg, sizeof msg), 0);
    assert_int_equal(tags_table_add(again, &label, "plc1", msg, sizeof msg), 1);
    words[1] = 0x4F4B;
    assert_int_equal(tags_table_apply(t, plan, 1, words, 3, 8000), 2);
    assert_int_equal(tags_table_carry_value(again, 0, t, 2), 0);
    assert_int_equal(tags_table_carry_value(again, 1, t, 1), 0);
    assert_int_equal(tags_table_carry_value(again, 1, t, 0), -EINVAL);   /* a string from an int16 */
    assert_int_equal(tags_table_carry_value(again, 2, t, 0), -EINVAL);   /* no such tag */
    tags_plan_free(plan);
    tags_planner_free(pl);
    tags_table_free(t);
    *state = NULL;
    assert_int_equal(tags_table_value(again, 1, 8000, &v), 0);
    assert_int_equal(v.quality, TAGS_GOOD);
    assert_int_equal(v.time_ms, 8000);
    tags_format(&label, &v, text, sizeof text);
    assert_string_equal(text, "OK");
    assert_int_equal(tags_table_value(again, 0, 8000, &v), 0);
    assert_true(v.raw.b);
    tags_table_free(again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_known_vectors_every_order),
        cmocka_unit_test(test_scale_and_format),
        cmocka_unit_test(test_rounding_matches_libm),
        cmocka_unit_test(test_scaled_round_trip_every_16_bit_value),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_writes_and_pdus),
        cmocka_unit_test(test_table_validation),
        cmocka_unit_test(test_observe),
        cmocka_unit_test_setup_teardown(test_table_many_names, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_answers_into_values, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_change_numbers, tags_fixture_setup, tags_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
