/*
 * tests/unit/test_expr.c -- computed tags (expr/) on a table of their own, fed
 * as the poller feeds it (tags_table_apply / tags_table_fail on a real plan):
 *
 * - a SunSpec value and scale factor (W x 10^W_SF) equal C's own
 *   computation, for positive and negative scale factors;
 * - a template's CSV (expr column) scopes names per device;
 * - chains evaluate in dependency order, once a run; bool, int64, round,
 *   min/max, if(), bit operations, prev() and dt;
 * - quality: an input bad or stale makes the computed tag bad (reason
 *   input, the note names it); it comes good again with its input;
 * - hostile expressions (an endless loop, a string doubled without end,
 *   endless recursion, a table filled without end, a global assignment, a
 *   string method) end bad with their reason, each within its bounds, and
 *   the engine goes on evaluating the honest ones;
 * - load errors: a syntax error, an unknown tag, os/io/require/load (no such
 *   names), a cycle (named in full), a raw input, each FILE:LINE;
 * - an inverse: its target and its result as text, refused while a tag it
 *   reads is not good, stopped by the step budget, a result that is no
 *   number, a tag without one.
 */
#include "expr/expr.h"
#include "tags/tags.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1000000

typedef struct fix {
    tags_table_t *t;
    tags_planner_t *pl;
    tags_plan_t *plan;
    expr_engine_t *e;
    char errors[8][600];
    unsigned n_errors;
} fix_t;

static void on_error(void *ctx, const char *line)
{
    fix_t *f = ctx;
    if (f->n_errors < 8)
        snprintf(f->errors[f->n_errors++], sizeof f->errors[0], "%s", line);
}

static const char *const HEADER = "name,device,table,address,type,interval_ms,expr\n";

/* The CSV (header prepended) into a table, its plan and its engine. */
static void load_with(fix_t *f, const char *header, const char *rows, bool expect_ok)
{
    char text[8192];
    tags_errors_t errs;
    snprintf(text, sizeof text, "%s%s", header, rows);
    memset(f, 0, sizeof *f);
    f->t = tags_table_new(1000);
    int rc = tags_load_csv_string(f->t, text, "t.csv", NULL, 0, &errs);
    if (rc < 0)
        fail_msg("csv: %s", errs.text[0]);
    unsigned n;
    f->e = expr_engine_new(f->t, NULL, "gw.ini", on_error, f, &n);
    if (expect_ok && !f->e)
        fail_msg("engine: %s", f->n_errors ? f->errors[0] : "out of memory");
    if (!expect_ok) {
        assert_null(f->e);
        assert_int_equal(n, f->n_errors);
        return;
    }
    char msg[256];
    f->pl = tags_planner_new(NULL);
    assert_int_equal(tags_plan_build(f->pl, f->t, NULL, 0, &f->plan, msg, sizeof msg), 0);
}

static void load(fix_t *f, const char *rows, bool expect_ok)
{
    load_with(f, HEADER, rows, expect_ok);
}

static void unload(fix_t *f)
{
    expr_engine_free(f->e);
    tags_plan_free(f->plan);
    tags_planner_free(f->pl);
    tags_table_free(f->t);
}

/* The words from register 100 of plc1's holding table, at now_ms; then a run. */
static size_t answer(fix_t *f, const uint16_t *words, size_t n, int64_t now_ms)
{
    for (size_t r = 0; r < tags_plan_read_count(f->plan); r++) {
        const tags_read_t *read = tags_plan_read(f->plan, r);
        if (read->area == TAGS_AREA_HOLDING && read->address >= 100 && read->address - 100u + read->count <= n)
            assert_true(tags_table_apply(f->t, f->plan, r, words + (read->address - 100), read->count, now_ms) >= 0);
    }
    unsigned out[64];
    return expr_engine_run(f->e, now_ms, out, 64);
}

static tags_value_t value(fix_t *f, const char *name, int64_t now_ms)
{
    tags_value_t v;
    int i = tags_table_find(f->t, name);
    if (i < 0)
        fail_msg("no tag %s", name);
    assert_int_equal(tags_table_value(f->t, (size_t)i, now_ms, &v), 0);
    return v;
}

static const char *note(fix_t *f, const char *name)
{
    const char *n = tags_table_note(f->t, (size_t)tags_table_find(f->t, name));
    return n ? n : "";
}

static void test_sunspec(void **state)
{
    (void)state;
    fix_t f;
    load(&f, "W,plc1,holding,100,uint16,1000,\n"
             "W_SF,plc1,holding,101,int16,1000,\n"
             "power,plc1,,,,,W * 10^W_SF\n", true);
    assert_int_equal(expr_engine_count(f.e), 1);
    const int16_t sfs[] = { -2, 0, 3, -5 };
    for (size_t k = 0; k < 4; k++) {
        uint16_t words[2] = { 1234 + (uint16_t)k, (uint16_t)sfs[k] };
        assert_int_equal(answer(&f, words, 2, NOW + (int64_t)k), 1);
        tags_value_t v = value(&f, "power", NOW + (int64_t)k);
        assert_int_equal(v.quality, TAGS_GOOD);
        assert_true(v.time_ms == NOW + (int64_t)k);
        double want = (1234 + (double)k) * pow(10, sfs[k]);
        if (fabs(v.eng - want) > 1e-12 * fabs(want))
            fail_msg("power %.17g, want %.17g", v.eng, want);
    }
    /* its interval is its inputs': stale when they stop */
    assert_int_equal(tags_table_tag(f.t, (size_t)tags_table_find(f.t, "power"))->interval_ms, 1000);
    assert_int_equal(value(&f, "power", NOW + 5000).quality, TAGS_STALE);
    unload(&f);
}

static void test_template_scope(void **state)
{
    (void)state;
    const tags_device_defaults_t defs[] = { { "inv7", TAGS_ORDER_ABCD, 1000, true, false } };
    tags_table_t *t = tags_table_new(100);
    tags_errors_t errs;
    const char *csv = "name,table,address,type,expr\nW,holding,100,uint16,\nW_SF,holding,101,int16,\n"
                      "power,,,,W * 10^W_SF\n";
    assert_int_equal(tags_load_csv_string(t, csv, "tpl.csv", defs, 1, &errs), 3);
    /* a plain W elsewhere must not be the one inv7.power reads */
    tags_tag_t other = { .name = "W", .area = TAGS_AREA_HOLDING, .address = 5, .type = TAGS_UINT16, .scale = 1,
                         .interval_ms = 1000 };
    char msg[256];
    assert_true(tags_table_add(t, &other, "plc9", msg, sizeof msg) >= 0);
    unsigned n;
    fix_t f = { .t = t };
    f.e = expr_engine_new(t, NULL, "gw.ini", on_error, &f, &n);
    assert_non_null(f.e);
    f.pl = tags_planner_new(NULL);
    assert_int_equal(tags_plan_build(f.pl, t, NULL, 0, &f.plan, msg, sizeof msg), 0);
    uint16_t words[2] = { 500, 1 };
    answer(&f, words, 2, NOW);
    assert_int_equal(value(&f, "inv7.power", NOW).quality, TAGS_GOOD);
    assert_true(value(&f, "inv7.power", NOW).eng == 5000);
    /* a template's error names the template's file and row */
    unload(&f);
    t = tags_table_new(100);
    assert_int_equal(tags_load_csv_string(t, "name,table,address,type,expr\nx,,,,nosuch + 1\n", "tpl.csv", defs, 1,
                                          &errs), 1);
    f = (fix_t){ .t = t };
    assert_null(expr_engine_new(t, NULL, "gw.ini", on_error, &f, &n));
    assert_non_null(strstr(f.errors[0], "tpl.csv:2: tag inv7.x"));
    assert_non_null(strstr(f.errors[0], "unknown tag 'nosuch'"));
    tags_table_free(t);
}

static void test_language(void **state)
{
    (void)state;
    fix_t f;
    load(&f, "a,plc1,holding,100,int16,1000,\n"
             "b,plc1,holding,101,uint16,1000,\n"
             "sum,plc1,,,,,a + b\n"
             "twice,plc1,,,,,sum * 2\n"
             "bit2,plc1,,,bool,,b & 4 ~= 0\n"
             "shifted,plc1,,,int64,,(b >> 1) | 1\n"
             "rounded,plc1,,,int64,,round(a / 3)\n"
             "clamp,plc1,,,,,\"min(max(a, 0), 10)\"\n"
             "pick,plc1,,,,,\"if(a < 0, -1, 1) * abs(a)\"\n"
             "rate,plc1,,,,,(b - prev(b)) / dt\n"
             "dec,plc1,,,,,\"round(b / 7, 2)\"\n", true);
    uint16_t words[2] = { (uint16_t)-7, 12 };
    assert_int_equal(answer(&f, words, 2, NOW), 9);   /* each once: twice after sum, in the same run */
    assert_true(value(&f, "sum", NOW).eng == 5);
    assert_true(value(&f, "twice", NOW).eng == 10);
    assert_true(value(&f, "bit2", NOW).raw.b);
    assert_int_equal(value(&f, "shifted", NOW).raw.i, 7);
    assert_int_equal(value(&f, "rounded", NOW).raw.i, -2);   /* -2.33 */
    assert_true(value(&f, "clamp", NOW).eng == 0);
    assert_true(value(&f, "pick", NOW).eng == -7);
    assert_true(value(&f, "dec", NOW).eng == 1.71);
    /* a rate needs a previous value: bad at the first, good from the second */
    assert_int_equal(value(&f, "rate", NOW).reason, TAGS_BAD_EXPR);
    assert_non_null(strstr(note(&f, "rate"), "prev(b)"));
    words[1] = 32;
    answer(&f, words, 2, NOW + 2000);
    assert_int_equal(value(&f, "rate", NOW + 2000).quality, TAGS_GOOD);
    assert_true(value(&f, "rate", NOW + 2000).eng == 10);   /* 20 in 2 s */
    assert_false(value(&f, "bit2", NOW + 2000).raw.b);
    unload(&f);
}

static void test_quality(void **state)
{
    (void)state;
    fix_t f;
    load(&f, "W,plc1,holding,100,uint16,1000,\nW_SF,plc1,holding,101,int16,1000,\n"
             "power,plc1,,,,,W * 10^W_SF\nhalf,plc1,,,,,power / 2\n", true);
    assert_int_equal(value(&f, "power", NOW).reason, TAGS_BAD_NOT_READ);
    uint16_t words[2] = { 100, 1 };
    answer(&f, words, 2, NOW);
    assert_true(value(&f, "half", NOW).eng == 500);
    for (size_t r = 0; r < tags_plan_read_count(f.plan); r++)
        tags_table_fail(f.t, f.plan, r, TAGS_BAD_TIMEOUT, 0, NOW + 100);
    unsigned out[8];
    assert_int_equal(expr_engine_run(f.e, NOW + 100, out, 8), 2);
    assert_int_equal(value(&f, "power", NOW + 100).reason, TAGS_BAD_INPUT);
    assert_non_null(strstr(note(&f, "power"), "input W is bad: timeout"));
    assert_int_equal(value(&f, "half", NOW + 100).reason, TAGS_BAD_INPUT);
    assert_non_null(strstr(note(&f, "half"), "input power is bad"));
    assert_true(value(&f, "power", NOW + 100).eng == 1000);   /* the last value stays */
    answer(&f, words, 2, NOW + 200);
    assert_int_equal(value(&f, "half", NOW + 200).quality, TAGS_GOOD);
    assert_null(tags_table_note(f.t, (size_t)tags_table_find(f.t, "half")));
    /* no run without a store: a run after nothing was read evaluates nothing */
    assert_int_equal(expr_engine_run(f.e, NOW + 300, out, 8), 0);
    unload(&f);
}

static void test_hostile(void **state)
{
    (void)state;
    fix_t f;
    load(&f, "x,plc1,holding,100,uint16,1000,\n"
             "loop,plc1,,,,,(function() while true do end end)() + x\n"
             "tail,plc1,,,,,\"(function(f, y) return f(f, y) end)(function(f, y) return f(f, y) end, x)\"\n"
             "deep,plc1,,,,,(function(f) return 1 + f(f) end)(function(f) return 1 + f(f) end) + x\n"
             "string,plc1,,,,,\"#(function() local s = 'x' for i = 1, 64 do s = s .. s end return s end)() + x\"\n"
             "table,plc1,,,,,\"(function() local t = {} for i = 1, 1e9 do t[i] = i end return 0 end)() + x\"\n"
             "global,plc1,,,,,(function() min = nil return 1 end)() + x\n"
             "method,plc1,,,,,#(('x'):rep(100)) + x\n"
             "honest,plc1,,,,,x + 1\n", true);
    uint16_t words[1] = { 41 };
    for (int round = 0; round < 3; round++) {   /* the state survives them: again and again */
        answer(&f, words, 1, NOW + round);
        struct { const char *name, *why; } want[] = {
            { "loop", "step budget" }, { "tail", "step budget" }, { "deep", "" }, { "string", "memory cap" },
            { "table", "memory cap" }, { "global", "cannot set a global" }, { "method", "attempt to index" },
        };
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            tags_value_t v = value(&f, want[k].name, NOW + round);
            if (v.quality != TAGS_BAD || v.reason != TAGS_BAD_EXPR || !strstr(note(&f, want[k].name), want[k].why))
                fail_msg("%s: quality %d reason %d note '%s'", want[k].name, v.quality, v.reason,
                         note(&f, want[k].name));
        }
        assert_int_equal(value(&f, "honest", NOW + round).quality, TAGS_GOOD);
        assert_true(value(&f, "honest", NOW + round).eng == 42);
    }
    unload(&f);
}

static void refused(const char *rows, const char *a, const char *b)
{
    fix_t f;
    load(&f, rows, false);
    bool found = false;
    for (unsigned k = 0; k < f.n_errors; k++)
        found = found || (strstr(f.errors[k], a) && strstr(f.errors[k], b));
    if (!found) {
        for (unsigned k = 0; k < f.n_errors; k++)
            fprintf(stderr, "  error: %s\n", f.errors[k]);
        fail_msg("no error with '%s' and '%s'", a, b);
    }
    tags_table_free(f.t);
}

/* A write through an inverse: its target, its result as text, its refusals. */
static void test_inverse(void **state)
{
    (void)state;
    fix_t f;
    load_with(&f, "name,device,table,address,type,interval_ms,writable,expr,inverse,inverse_target\n",
              "W,plc1,holding,100,int16,1000,true,,,\n"
              "W_SF,plc1,holding,101,int16,1000,,,,\n"
              "power,plc1,,,,,,W * 10^W_SF,round(value / 10^W_SF),W\n"
              "spin,plc1,,,,,,W + 0,(function() while true do end end)(),\n"
              "text,plc1,,,,,,W + 0,'abc',\n"
              "plain,plc1,,,,,,W * 2,,\n", true);
    unsigned target = 99;
    char out[64], msg[256];
    int power = tags_table_find(f.t, "power"), w = tags_table_find(f.t, "W");
    tags_value_t asked = { .quality = TAGS_GOOD, .raw.f = 50.5, .eng = 50.5 };
    assert_true(tags_table_tag(f.t, (size_t)power)->writable);
    assert_false(tags_table_tag(f.t, (size_t)tags_table_find(f.t, "plain"))->writable);
    /* W_SF not read yet: the inverse cannot be computed */
    assert_int_equal(expr_engine_inverse(f.e, (size_t)power, &asked, NOW, &target, out, sizeof out, msg, sizeof msg),
                     -EAGAIN);
    assert_non_null(strstr(msg, "W_SF"));
    uint16_t words[2] = { 1234, 0xFFFF };   /* W_SF = -1 */
    answer(&f, words, 2, NOW);
    assert_true(fabs(value(&f, "power", NOW).eng - 123.4) < 1e-9);
    assert_int_equal(expr_engine_inverse(f.e, (size_t)power, &asked, NOW, &target, out, sizeof out, msg, sizeof msg), 0);
    assert_int_equal(target, (unsigned)w);
    assert_string_equal(out, "505");
    int spin = tags_table_find(f.t, "spin");
    assert_int_equal(expr_engine_inverse(f.e, (size_t)spin, &asked, NOW, &target, out, sizeof out, msg, sizeof msg),
                     -EINVAL);
    assert_non_null(strstr(msg, "step budget"));
    int text = tags_table_find(f.t, "text");
    assert_int_equal(expr_engine_inverse(f.e, (size_t)text, &asked, NOW, &target, out, sizeof out, msg, sizeof msg),
                     -EINVAL);
    assert_non_null(strstr(msg, "not a finite number or a boolean"));
    int plain = tags_table_find(f.t, "plain");
    assert_int_equal(expr_engine_inverse(f.e, (size_t)plain, &asked, NOW, &target, out, sizeof out, msg, sizeof msg),
                     -ENOENT);
    /* the engine goes on evaluating after a runaway inverse */
    words[0] = 100;
    answer(&f, words, 2, NOW + 10);
    assert_true(fabs(value(&f, "power", NOW + 10).eng - 10.0) < 1e-9);
    unload(&f);
}

static void test_load_errors(void **state)
{
    (void)state;
    const char *in = "x,plc1,holding,100,uint16,1000,\n";
    char rows[512];
    struct { const char *expr, *line, *why; } cases[] = {
        { "x +", "t.csv:3: tag c: expr 'x +'", "expr:1:" },
        { "nosuch * 2", "t.csv:3: tag c", "unknown tag 'nosuch'" },
        { "os.exit(1) or x", "t.csv:3", "unknown tag 'os'" },
        { "io.open('/etc/passwd') or x", "t.csv:3", "unknown tag 'io'" },
        { "require('os') or x", "t.csv:3", "unknown tag 'require'" },
        { "load('return 1')() or x", "t.csv:3", "unknown tag 'load'" },
        { "string.rep('x', 1e9) or x", "t.csv:3", "unknown tag 'string'" },
        { "42", "t.csv:3", "names no tag" },
        { "__i1 + x", "t.csv:3", "reserved" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(rows, sizeof rows, "%sc,plc1,,,,,\"%s\"\n", in, cases[k].expr);
        refused(rows, cases[k].line, cases[k].why);
    }
    refused("a,plc1,,,,,b + 1\nb,plc1,,,,,c + 1\nc,plc1,,,,,a + 1\n", "t.csv:", "a cycle: a -> b -> c -> a");
    refused("self,plc1,,,,,self + 1\n", "t.csv:2: tag self", "a cycle: self -> self");
    refused("r,plc1,holding,100,raw:2,1000,\nc,plc1,,,,,r\n", "t.csv:3", "raw words");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sunspec),
        cmocka_unit_test(test_template_scope),
        cmocka_unit_test(test_language),
        cmocka_unit_test(test_quality),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_inverse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
