/*
 * tests/unit/test_tags_csv.c -- tag files: a generated 2,000-tag file over ten
 * devices loads (from memory and from a file) and plans; RFC 4180 quoting,
 * CRLF, a byte order mark and blank lines read as they should; and every
 * kind of mistake is reported as FILE:LINE:COLUMN with the value, all of a
 * file's mistakes in one pass, with nothing added to the table.
 */
#include "tags/tags.h"
#include "tests/lib/tagsutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const tags_device_defaults_t plc1[] = { { "plc1", TAGS_ORDER_CDAB, 500, false, false } };

/* Error i (they come in the file's order) must contain both fragments. */
static void expect_error(const tags_errors_t *errs, unsigned i, const char *a, const char *b)
{
    bool found = i < errs->count && strstr(errs->text[i], a) && (!b || strstr(errs->text[i], b));
    if (found)
        return;
    for (unsigned k = 0; k < errs->count; k++)
        fprintf(stderr, "  error %u: %s\n", k, errs->text[k]);
    fail_msg("error %u does not contain '%s' and '%s'", i, a, b ? b : "");
}

/* Loads text into a fresh table and expects it refused with these fragments. */
static void refused(const char *text, int code, const char *where, const char *what)
{
    tags_table_t *t = tags_table_new(100);
    tags_errors_t errs;
    int rc = tags_load_csv_string(t, text, "t.csv", plc1, 1, &errs);
    if (rc != code) {
        for (unsigned i = 0; i < errs.count; i++)
            fprintf(stderr, "  got: %s\n", errs.text[i]);
        fail_msg("'%s': returned %d, not %d", text, rc, code);
    }
    expect_error(&errs, 0, where, what);
    assert_int_equal(tags_table_count(t), 0);
    tags_table_free(t);
}

static char *demo(unsigned n, unsigned devices, uint64_t seed)
{
    size_t cap = 400u * n + 4096;
    char *buf = malloc(cap);
    assert_non_null(buf);
    int len = tags_demo_csv(buf, cap, n, devices, seed);
    assert_true(len > 0);
    assert_int_equal(strlen(buf), (size_t)len);
    return buf;
}

/* Every tag in exactly one read, wholly inside it, every read within the limits. */
static size_t check_plan(const tags_table_t *t, const tags_plan_t *plan)
{
    size_t n_tags = tags_table_count(t);
    unsigned *seen = calloc(n_tags, sizeof *seen);
    assert_non_null(seen);
    for (size_t r = 0; r < tags_plan_read_count(plan); r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        size_t n;
        const tags_member_t *m = tags_plan_members(plan, r, &n);
        bool bits = read->area == TAGS_AREA_COIL || read->area == TAGS_AREA_DISCRETE;
        assert_true(read->count >= 1 && read->count <= (bits ? 2000 : 125));
        for (size_t k = 0; k < n; k++) {
            const tags_tag_t *g = tags_table_tag(t, m[k].index);
            assert_false(m[k].is_group);
            assert_string_equal(tags_table_device_name(t, g->device), read->device);
            assert_int_equal(g->area, read->area);
            assert_int_equal(g->interval_ms, read->interval_ms);
            assert_true(g->address >= read->address && g->address + g->count <= read->address + read->count);
            seen[m[k].index]++;
        }
    }
    for (size_t i = 0; i < n_tags; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
    return tags_plan_read_count(plan);
}

static void test_generated_2000_tags_load_and_plan(void **state)
{
    (void)state;
    tags_device_defaults_t devs[10];
    char names[10][8];
    for (unsigned d = 0; d < 10; d++) {
        snprintf(names[d], sizeof names[d], "plc%u", d + 1);
        devs[d] = (tags_device_defaults_t){ names[d], d % 2 ? TAGS_ORDER_CDAB : TAGS_ORDER_ABCD, 0, false, false };
    }
    for (uint64_t seed = 1; seed <= 5; seed++) {
        char *text = demo(2000, 10, seed);
        tags_table_t *t = tags_table_new(2000);
        tags_errors_t errs;
        int rc = tags_load_csv_string(t, text, "demo.csv", devs, 10, &errs);
        for (unsigned i = 0; i < errs.count; i++)
            fprintf(stderr, "  %s\n", errs.text[i]);
        assert_int_equal(rc, 2000);
        assert_int_equal(tags_table_device_count(t), 10);
        tags_planner_t *pl = tags_planner_new(NULL);
        tags_plan_t *plan;
        char msg[256];
        assert_int_equal(tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg), 0);
        size_t reads = check_plan(t, plan);
        assert_true(reads < 2000 / 3);   /* blocks of tags share reads */
        tags_plan_free(plan);
        tags_planner_free(pl);
        tags_table_free(t);
        free(text);
    }
}

static void test_generated_file_from_disk(void **state)
{
    (void)state;
    char *text = demo(2000, 10, 7);
    char path[] = "/tmp/rtugw-tags-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    tags_table_t *t = tags_table_new(2000);
    tags_errors_t errs;
    assert_int_equal(tags_load_csv(t, path, NULL, 0, &errs), 2000);
    /* the same file again: every name is a duplicate naming the first load's line */
    assert_true(tags_load_csv(t, path, NULL, 0, &errs) == -EEXIST);
    assert_int_equal(errs.total, 2000);
    assert_int_equal(errs.count, TAGS_MAX_ERRORS);
    char where[300];
    snprintf(where, sizeof where, "%s:2:1: name: tag", path);
    expect_error(&errs, 0, where, "already defined at");
    snprintf(where, sizeof where, "already defined at %s:2", path);
    expect_error(&errs, 0, where, NULL);
    assert_int_equal(tags_table_count(t), 2000);   /* the failed load added nothing */
    unlink(path);
    assert_int_equal(tags_load_csv(t, path, NULL, 0, &errs), -ENOENT);
    expect_error(&errs, 0, path, "No such file");
    tags_table_free(t);
    free(text);
}

static void test_rfc4180(void **state)
{
    const char *text =
        "\xEF\xBB\xBFName,Table,Address,Type,Description,Order\r\n"
        "a,holding,100,float32,\"Pump 1, \"\"main\"\" line\",\r\n"
        "\r\n"
        "b,holding,102,int16,\"two\r\nlines\",BA\r\n"
        " c , input , 5 , uint16 , plain ,  \n"
        "\"d\",coil,0x1,bool,,";   /* no line end at the end of the file */
    tags_table_t *t = *state;
    tags_errors_t errs;
    int rc = tags_load_csv_string(t, text, "t.csv", plc1, 1, &errs);
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "  %s\n", errs.text[i]);
    assert_int_equal(rc, 4);
    const tags_tag_t *a = tags_table_tag(t, 0), *b = tags_table_tag(t, 1);
    const tags_tag_t *c = tags_table_tag(t, 2), *d = tags_table_tag(t, 3);
    assert_string_equal(a->description, "Pump 1, \"main\" line");
    assert_int_equal(a->order, TAGS_ORDER_CDAB);      /* the device's default */
    assert_int_equal(a->interval_ms, 500);
    assert_int_equal(a->line, 2);
    assert_string_equal(b->description, "two\r\nlines");
    assert_int_equal(b->order, TAGS_ORDER_BADC);
    assert_int_equal(b->line, 4);
    assert_string_equal(c->name, "c");
    assert_int_equal(c->area, TAGS_AREA_INPUT);
    assert_string_equal(c->description, "plain");
    assert_int_equal(c->line, 6);
    assert_string_equal(d->name, "d");
    assert_int_equal(d->address, 1);
    assert_int_equal(d->line, 7);
    assert_string_equal(tags_table_device_name(t, 0), "plc1");
}

static void test_every_column(void **state)
{
    const char *text =
        "name,device,table,address,type,order,scale,offset,unit,deadband,writable,interval_ms,description,"
        "confirm_write\n"
        "t1,plc1,holding,40.3,bool,,,,,,yes,250,status bit,off\n"
        "t2,plc1,holding,41,uint64,HGFEDCBA,0.001,-5,kWh,0.5,false,60000,\"energy\",true\n"
        "t3,plc1,input,0,string:16,BA,,,,,,,,\n";
    tags_table_t *t = *state;
    tags_errors_t errs;
    assert_int_equal(tags_load_csv_string(t, text, "t.csv", plc1, 1, &errs), 3);
    const tags_tag_t *t1 = tags_table_tag(t, 0), *t2 = tags_table_tag(t, 1), *t3 = tags_table_tag(t, 2);
    assert_true(t1->in_register);
    assert_int_equal(t1->bit, 3);
    assert_true(t1->writable);
    assert_int_equal(t1->interval_ms, 250);
    assert_int_equal(t2->order, TAGS_ORDER_DCBA);
    assert_true(t2->scale == 0.001 && t2->offset == -5 && t2->deadband == 0.5);
    assert_string_equal(t2->unit, "kWh");
    assert_int_equal(t2->count, 4);
    assert_int_equal(t3->count, 16);
    assert_int_equal(t3->order, TAGS_ORDER_BADC);
    assert_int_equal(t1->confirm_write, TAGS_CONFIRM_OFF);   /* its own, over the device's */
    assert_int_equal(t2->confirm_write, TAGS_CONFIRM_ON);
    assert_int_equal(t3->confirm_write, TAGS_CONFIRM_DEVICE);
}

static void test_bad_rows_name_line_and_column(void **state)
{
    (void)state;
    const char *h = "name,table,address,type\n";
    char text[512];
#define ROW(r) (snprintf(text, sizeof text, "%s%s", h, r), text)
    refused(ROW("a,holding,1,float33\n"), -EINVAL, "t.csv:2:13: type: unknown type 'float33'", NULL);
    refused(ROW("b,holding,70000,int16\n"), -EINVAL, "t.csv:2:11: address: address '70000'", NULL);
    refused(ROW("b,holding,1.x,int16\n"), -EINVAL, "t.csv:2:11:", "'1.x'");
    refused(ROW("c,holdng,1,int16\n"), -EINVAL, "t.csv:2:3: table: unknown table 'holdng'", NULL);
    refused(ROW("d,holding,65535,int32\n"), -ERANGE, "t.csv:2:11: address:", "65535");
    refused(ROW("e,coil,1.2,bool\n"), -EINVAL, "t.csv:2:8: address:", "without a bit");
    refused(ROW("f,holding,1,bool\n"), -EINVAL, "t.csv:2:11: address:", "needs its bit");
    refused(ROW("g,coil,1,int16\n"), -EINVAL, "t.csv:2:10: type:", "a coil is a bool");
    refused(ROW("bad name,holding,1,int16\n"), -EINVAL, "t.csv:2:1: name:", "'bad name'");
    refused(ROW("h,holding,1,int16\n" "x,holding,2\n"), -EINVAL, "t.csv:3:1:", "3 fields, the header has 4");
    refused(ROW("h,holding,1,int16\n" "h2,holding,2,int16\n" "h,input,3,int16\n"), -EEXIST,
            "t.csv:4:1: name: tag 'h' is already defined at t.csv:2", NULL);
    refused(ROW("i,holding,1,\"int16\n"), -EINVAL, "t.csv:2:13: unterminated quote", NULL);
    refused(ROW("j,hol\"ding,1,int16\n"), -EINVAL, "t.csv:2:6: quote inside an unquoted field", NULL);
    refused(ROW("k,\"holding\"x,1,int16\n"), -EINVAL, "t.csv:2:12: 'x' after a closing quote", NULL);

    refused("name,table,adress,type\n", -EINVAL, "t.csv:1:12: unknown column 'adress'", NULL);
    refused("name,table,address,type,name\n", -EINVAL, "t.csv:1:25: column 'name' twice", NULL);
    refused("name,table,type\n", -EINVAL, "t.csv:1:1:", "no 'address' column");
    refused("", -EINVAL, "t.csv:", "no header row");
    refused("\n\n", -EINVAL, "t.csv:", "no header row");

    const char *h2 = "name,device,table,address,type,order,writable,scale,deadband,interval_ms\n";
#define ROW2(r) (snprintf(text, sizeof text, "%s%s", h2, r), text)
    refused(ROW2("a,plc9,holding,1,int16,,,,,\n"), -EINVAL, "t.csv:2:3: device: device 'plc9' does not read this file (it is read for 'plc1')", NULL);
    refused(ROW2("a,plc1,holding,1,int64,CDAB,,,,\n"), -EINVAL, "t.csv:2:24: order:", "GHEFCDAB");
    refused(ROW2("a,plc1,input,1,int16,,true,,,\n"), -EINVAL, "t.csv:2:23: writable:", "read-only");
    refused(ROW2("a,plc1,holding,1,int16,,maybe,,,\n"), -EINVAL, "t.csv:2:25: writable:", "'maybe'");
    refused("name,table,address,type,confirm_write\na,holding,1,int16,perhaps\n", -EINVAL,
            "t.csv:2:19: confirm_write:", "'perhaps'");
    refused(ROW2("a,plc1,holding,1,int16,,,abc,,\n"), -EINVAL, "t.csv:2:26: scale: 'abc'", NULL);
    refused(ROW2("a,plc1,holding,1,int16,,,0,,\n"), -ERANGE, "t.csv:2:26: scale:", "not 0");
    refused(ROW2("a,plc1,holding,1.1,bool,,,,1,\n"), -EINVAL, "t.csv:2:28: deadband:", "takes no");
    refused(ROW2("a,plc1,holding,1,int16,,,,,0\n"), -EINVAL, "t.csv:2:28: interval_ms: '0'", NULL);

    /* a line too long, and a record of too many fields */
    char *long_line = malloc(TAGS_CSV_LINE_MAX + 64);
    snprintf(long_line, 64, "%sa,holding,1,\"", h);
    size_t at = strlen(long_line);
    memset(long_line + at, 'x', TAGS_CSV_LINE_MAX);
    strcpy(long_line + at + TAGS_CSV_LINE_MAX, "\"\n");
    refused(long_line, -E2BIG, "t.csv:2:", "line longer than 4096 bytes");
    free(long_line);
    refused("name,table,address,type\na,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,1,2,3,4,5,6,7\n",
            -E2BIG, "t.csv:2:", "more than 32 fields");
#undef ROW
#undef ROW2
}

static void test_all_errors_in_one_pass(void **state)
{
    const char *text =
        "name,table,address,type\n"
        "ok1,holding,1,int16\n"
        "x1,holding,1,nope\n"
        "ok2,holding,2,int16\n"
        "x2,holdin,1,int16\n"
        "x3,holding,99999,int16\n";
    tags_table_t *t = *state;
    tags_errors_t errs;
    assert_int_equal(tags_load_csv_string(t, text, "t.csv", plc1, 1, &errs), -EINVAL);
    assert_int_equal(errs.total, 3);
    expect_error(&errs, 0, "t.csv:3:", "'nope'");
    expect_error(&errs, 1, "t.csv:5:", "'holdin'");
    expect_error(&errs, 2, "t.csv:6:", "'99999'");
    assert_int_equal(tags_table_count(t), 0);
    assert_int_equal(tags_table_device_count(t), 0);
    assert_int_equal(tags_table_find(t, "ok1"), -ENOENT);
}

static void test_bounds_and_devices(void **state)
{
    (void)state;
    const char *text = "name,table,address,type\na,holding,1,int16\nb,holding,2,int16\nc,holding,3,int16\n";
    tags_table_t *t = tags_table_new(2);
    tags_errors_t errs;
    assert_int_equal(tags_load_csv_string(t, text, "t.csv", plc1, 1, &errs), -ENOSPC);
    expect_error(&errs, 0, "t.csv:4:1:", "the table is full (2 tags)");
    assert_int_equal(tags_table_count(t), 0);
    /* no device column and no single default: every row names no device */
    assert_int_equal(tags_load_csv_string(t, text, "t.csv", NULL, 0, &errs), -EINVAL);
    expect_error(&errs, 0, "t.csv:2:1: device:", "no device");
    /* two defaults: the column is needed; a device of the list is taken */
    const tags_device_defaults_t two[] = { { "a1", TAGS_ORDER_ABCD, 0, false, false }, { "b2", TAGS_ORDER_DCBA, 2000, false, true } };
    /* b2 writes Modicon addresses: 40010 is holding 9, the table may be left out */
    assert_int_equal(tags_load_csv_string(t, "name,device,table,address,type\nq,b2,,40010,float32\n",
                                          "t.csv", two, 2, &errs), 1);
    assert_int_equal(tags_table_tag(t, 0)->order, TAGS_ORDER_DCBA);
    assert_int_equal(tags_table_tag(t, 0)->interval_ms, 2000);
    assert_int_equal(tags_table_tag(t, 0)->area, TAGS_AREA_HOLDING);
    assert_int_equal(tags_table_tag(t, 0)->address, 9);
    assert_true(tags_table_tag(t, 0)->modicon);
    tags_table_free(t);
    t = tags_table_new(2);
    assert_int_equal(tags_load_csv_string(t, "name,device,table,address,type\nq,b2,input,40010,float32\n"
                                          "p,a1,holding,40010,float32\n", "m.csv", two, 2, &errs), -EINVAL);
    expect_error(&errs, 0, "m.csv:2:", "the table says input");   /* a1's 40010 is just 40010 */
    assert_int_equal(errs.total, 1);
    assert_int_equal(tags_load_csv_string(t, "name,device,table,address,type\nr,,holding,9,float32\n",
                                          "u.csv", two, 2, &errs), -EINVAL);
    expect_error(&errs, 0, "u.csv:2:3: device: empty, and this file is read for 2 devices ('a1', ...)", NULL);
    tags_table_free(t);
}

/* A register list read once per device: every row becomes DEVICE.NAME, with
 * the device's defaults; a row naming a device, or a scoped name too long for
 * the table, is refused with its line and column. */
static void test_scoped(void **state)
{
    (void)state;
    tags_errors_t errs;
    tags_table_t *t = tags_table_new(100);
    const char *list = "name,table,address,type,interval_ms\nvoltage,holding,0,float32,\ncurrent,holding,2,float32,250\n";
    const tags_device_defaults_t m7 = { "meter7", TAGS_ORDER_CDAB, 500, true, false };
    const tags_device_defaults_t m8 = { "meter8", TAGS_ORDER_ABCD, 0, true, false };
    assert_int_equal(tags_load_csv_string(t, list, "meter.csv", &m7, 1, &errs), 2);
    assert_int_equal(tags_load_csv_string(t, list, "meter.csv", &m8, 1, &errs), 2);
    assert_int_equal(tags_table_count(t), 4);
    int v7 = tags_table_find(t, "meter7.voltage"), c8 = tags_table_find(t, "meter8.current");
    assert_true(v7 >= 0 && c8 >= 0);
    assert_true(tags_table_find(t, "voltage") < 0);
    assert_int_equal(tags_table_tag(t, (size_t)v7)->order, TAGS_ORDER_CDAB);
    assert_int_equal(tags_table_tag(t, (size_t)v7)->interval_ms, 500);
    assert_int_equal(tags_table_tag(t, (size_t)c8)->interval_ms, 250);
    assert_string_equal(tags_table_device_name(t, tags_table_tag(t, (size_t)v7)->device), "meter7");
    assert_int_equal(tags_load_csv_string(t, "name,device,table,address,type\nx,meter7,holding,9,int16\n",
                                          "m.csv", &m7, 1, &errs), -EINVAL);
    expect_error(&errs, 0, "m.csv:2:3: device: 'meter7': a template's rows name no device", NULL);
    const tags_device_defaults_t longdev = { "a-device-name-of-thirty-chars", TAGS_ORDER_ABCD, 0, true, false };
    assert_int_equal(tags_load_csv_string(t, "name,table,address,type\nan_eighteen_chars_\x31,holding,1,int16\n",
                                          "m.csv", &longdev, 1, &errs), -E2BIG);
    expect_error(&errs, 0, "m.csv:2:1: name:", "is longer than 47 bytes");
    assert_int_equal(tags_table_count(t), 4);
    tags_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scoped),
        cmocka_unit_test(test_generated_2000_tags_load_and_plan),
        cmocka_unit_test(test_generated_file_from_disk),
        cmocka_unit_test_setup_teardown(test_rfc4180, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_every_column, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test(test_bad_rows_name_line_and_column),
        cmocka_unit_test_setup_teardown(test_all_errors_in_one_pass, tags_fixture_setup, tags_fixture_teardown),
        cmocka_unit_test(test_bounds_and_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
