/*
 * tests/unit/test_config_tags.c -- the tags part of the configuration: [tag NAME]
 * sections with every key, a device's default order and planner limits, a
 * tags_file (relative to the configuration's folder, shared by devices),
 * and every mistake reported with its file, line (and for a CSV, column).
 */
#include "config/config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_errors(const config_errors_t *errs)
{
    for (unsigned i = 0; i < errs->count; i++)
        fprintf(stderr, "  %s\n", errs->text[i]);
}

/* Fails unless every fragment is in some error; says which are missing, and what came. */
static void expect_errors(const config_errors_t *errs, const char *const *want, size_t n)
{
    size_t missing = 0;
    for (size_t k = 0; k < n; k++) {
        bool found = false;
        for (unsigned i = 0; i < errs->count && !found; i++)
            found = strstr(errs->text[i], want[k]) != NULL;
        if (!found) {
            fprintf(stderr, "  missing: %s\n", want[k]);
            missing++;
        }
    }
    if (missing) {
        print_errors(errs);
        fail_msg("%zu of %zu expected errors missing", missing, n);
    }
}

static const tags_tag_t *find(const config_t *cfg, const char *name)
{
    int i = tags_table_find(cfg->tags, name);
    return i >= 0 ? tags_table_tag(cfg->tags, (size_t)i) : NULL;
}

static void test_sections(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = config_load_string(
        "[bus a]\nport = sim\n"
        "[device plc]\nslave = 1\norder = CDAB\nmax_read_registers = 64\nmax_read_bits = 800\nmax_gap = 2\n"
        "[device other]\nslave = 2\n"
        "[tag boiler.temp]\ndevice = plc\ntable = holding\naddress = 0x64\ntype = float32\n"
        "scale = 0.5\noffset = -10\nunit = degC\ndeadband = 0.25\nwritable = yes\ninterval_ms = 250\n"
        "description = Boiler 1, outlet\n"
        "[tag counter]\ndevice = plc\ntable = input\naddress = 7\ntype = uint64\n"
        "[tag run]\ndevice = other\ntable = holding\naddress = 120.3\ntype = bool\nwritable = true\n"
        "[tag level]\ndevice = plc\ntable = holding\naddress = 9\ntype = int16\norder = BA\n",
        "t.ini", &errs);
    print_errors(&errs);
    assert_non_null(cfg);
    assert_int_equal(tags_table_count(cfg->tags), 4);
    const tags_tag_t *t = find(cfg, "boiler.temp");
    assert_non_null(t);
    assert_int_equal(t->area, TAGS_AREA_HOLDING);
    assert_int_equal(t->address, 100);
    assert_int_equal(t->type, TAGS_FLOAT32);
    assert_int_equal(t->order, TAGS_ORDER_CDAB);         /* the device's default */
    assert_true(t->scale == 0.5 && t->offset == -10 && t->deadband == 0.25 && t->writable);
    assert_int_equal(t->interval_ms, 250);
    assert_string_equal(t->unit, "degC");
    assert_string_equal(t->description, "Boiler 1, outlet");
    assert_int_equal(t->line, 11);
    assert_int_equal(find(cfg, "counter")->order, TAGS_ORDER_CDAB);   /* GHEFCDAB: by meaning */
    assert_int_equal(find(cfg, "counter")->interval_ms, 1000);
    assert_true(find(cfg, "run")->in_register && find(cfg, "run")->bit == 3);
    assert_int_equal(find(cfg, "level")->order, TAGS_ORDER_BADC);     /* its own BA */
    assert_string_equal(tags_table_device_name(cfg->tags, find(cfg, "run")->device), "other");
    assert_int_equal(cfg->devices[0].max_read_registers, 64);
    assert_int_equal(cfg->devices[0].max_read_bits, 800);
    assert_int_equal(cfg->devices[0].max_gap, 2);
    assert_int_equal(cfg->devices[1].max_read_registers, 125);   /* defaults */
    assert_int_equal(cfg->devices[1].max_read_bits, 2000);
    assert_int_equal(cfg->devices[1].max_gap, 8);
    char summary[256];
    config_summary(cfg, summary, sizeof summary);
    assert_non_null(strstr(summary, "4 tags"));
    config_free(cfg);
    /* no tags: no table */
    cfg = config_load_string("[bus a]\nport = sim\n", "t.ini", &errs);
    assert_non_null(cfg);
    assert_null(cfg->tags);
    config_free(cfg);
}

static void test_section_errors(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\nport = sim\n"                           /* 1-2 */
        "[device plc]\nslave = 1\norder = ABDC\n"          /* 3-5 */
        "max_read_registers = 200\n"                       /* 6 */
        "[device other]\nslave = 2\n"                      /* 7-8 */
        "[tag a]\ndevice = plc\ntable = holdnig\n"         /* 9-11 */
        "address = 1\ntype = int16\n"                      /* 12-13 */
        "[tag b]\ndevice = plc\ntable = coil\n"            /* 14-16 */
        "address = 3.1\ntype = bool\n"                     /* 17-18 */
        "[tag c]\ntable = holding\naddress = 1\ntype = int16\n"      /* 19-22 */
        "[tag d]\ndevice = nope\ntable = holding\naddress = 1\ntype = int16\n"  /* 23-27 */
        "[tag e]\ndevice = plc\ntable = holding\naddress = 1\ntype = int64\norder = CDAB\n"  /* 28-33 */
        "[tag f]\ndevice = plc\nsize = 3\ntype = int16\n"  /* 34-37 */
        "[tag g]\ndevice = plc\ntype = int16\n"            /* 38-40 */
        "[tag a]\ndevice = plc\ntable = input\naddress = 2\ntype = int16\n"    /* 41-45 */
        "[tag h]\ndevice = plc\ntable = input\naddress = 2\ntype = int16\nwritable = true\n"  /* 46-51 */
        "[tag i]\ndevice = plc\ntable = holding\naddress = 2\ntype = int16\ninterval_ms = 0\n"  /* 52-57 */
        "[tag a_name_of_exactly_forty_eight_characters_is_long]\ndevice = plc\n"  /* 58-59 */
        "[tag a_name_of_forty_seven_characters_is_allowed_xyz]\ntable = coil\naddress = 9\ntype = bool\n"; /* 60-63 */
    assert_null(config_load_string(text, "t.ini", &errs));
    static const char *const want[] = {
        "t.ini:5: [device plc] order = 'ABDC': unknown order",
        "t.ini:6: [device plc] max_read_registers = '200': expected a whole number 1..125",
        "t.ini:11: [tag a] table = 'holdnig': unknown table 'holdnig' (coil, discrete, holding or input (or co, di, hr, ir))",
        "t.ini:14: [tag b]: tag 'b': a coil is a bool, without a bit",
        "t.ini:19: [tag c]: device is required",
        "t.ini:24: [tag d] device = 'nope': no such device",
        "t.ini:33: [tag e] order = 'CDAB': order 'CDAB' does not fit int64",
        "t.ini:36: [tag f] size: unknown key",
        "t.ini:38: [tag g]: table, address and type are required",
        "t.ini:41: [tag a]: section defined twice (first at line 9)",
        "t.ini:46: [tag h]: tag 'h': table input is read-only",
        "t.ini:57: [tag i] interval_ms = '0': expected a whole number 1..86400000",
        "t.ini:58: [tag a_name_of_exactly_forty_eight_characters_is_long]: a tag name is at most 47 characters",
        "t.ini:60: [tag a_name_of_forty_seven_characters_is_allowed_xyz]: device is required",
    };
    expect_errors(&errs, want, sizeof want / sizeof want[0]);
    /* the error about the table's value is not followed by one about its consequence */
    for (unsigned i = 0; i < errs.count; i++)
        assert_null(strstr(errs.text[i], "[tag a]: tag 'a'"));
}

/* A temporary folder with a configuration and CSV files in it. */
typedef struct files {
    char dir[64];
    char conf[128];
} files_t;

static void write_file(const files_t *f, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static config_t *load_files(files_t *f, const char *conf, const char *csv, config_errors_t *errs)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/rtugw-cfgtags-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->conf, sizeof f->conf, "%s/rtugw.conf", f->dir);
    write_file(f, "rtugw.conf", conf);
    if (csv)
        write_file(f, "tags.csv", csv);
    return config_load_file(f->conf, errs);
}

static void remove_files(const files_t *f)
{
    char path[256];
    snprintf(path, sizeof path, "%s/tags.csv", f->dir);
    unlink(path);
    unlink(f->conf);
    rmdir(f->dir);
}

static void test_tags_file(void **state)
{
    (void)state;
    config_errors_t errs;
    files_t f;
    /* one file for two devices, named relative to the configuration's folder */
    config_t *cfg = load_files(&f,
        "[bus a]\nport = sim\n"
        "[device plc1]\nslave = 1\norder = DCBA\ntags_file = tags.csv\n"
        "[device plc2]\nslave = 2\ntags_file = ./tags.csv\n"
        "[tag extra]\ndevice = plc2\ntable = coil\naddress = 1\ntype = bool\n",
        "name,device,table,address,type,order\n"
        "t1,plc1,holding,10,float32,\n"
        "t2,plc2,holding,10,float32,\n"
        "t3,plc1,input,20,int16,AB\n", &errs);
    print_errors(&errs);
    assert_non_null(cfg);
    assert_int_equal(tags_table_count(cfg->tags), 4);
    assert_int_equal(find(cfg, "t1")->order, TAGS_ORDER_DCBA);    /* plc1's default */
    assert_int_equal(find(cfg, "t2")->order, TAGS_ORDER_ABCD);    /* plc2's */
    assert_int_equal(find(cfg, "t3")->order, TAGS_ORDER_ABCD);    /* its own */
    assert_int_equal(find(cfg, "t2")->line, 3);
    config_free(cfg);
    remove_files(&f);

    /* a bad file: every error names the CSV's file, line and column */
    cfg = load_files(&f,
        "[bus a]\nport = sim\n[device plc]\nslave = 1\ntags_file = tags.csv\n",
        "name,table,address,type\n"
        "ok,holding,1,int16\n"
        "bad,holding,1x,int16\n"
        "ok,holding,2,int16\n", &errs);
    assert_null(cfg);
    char at3[256], at4[256];
    snprintf(at3, sizeof at3, "%s/tags.csv:3:13: address: address '1x' is not 0..65535", f.dir);
    snprintf(at4, sizeof at4, "%s/tags.csv:4:1: name: tag 'ok' is already defined at %s/tags.csv:2", f.dir, f.dir);
    const char *const csv_errors[] = { at3, at4 };
    expect_errors(&errs, csv_errors, 2);
    remove_files(&f);

    /* a file that is not there: the key's line in the configuration */
    cfg = load_files(&f, "[bus a]\nport = sim\n[device plc]\nslave = 1\ntags_file = missing.csv\n", NULL, &errs);
    assert_null(cfg);
    char missing[256];
    snprintf(missing, sizeof missing, "rtugw.conf:5: [device plc] tags_file = 'missing.csv': cannot read "
             "%s/missing.csv: No such file or directory", f.dir);
    const char *const open_error[] = { missing };
    expect_errors(&errs, open_error, 1);
    remove_files(&f);
}

/* [template meter]: 15 devices, one register list, 15 x 3 tags named
 * meterK.ROW; order and interval_ms: the row's, else the device's, else the
 * template's; [device] interval_ms also sets the default of its own tags_file
 * rows and [tag] sections. */
static void test_template(void **state)
{
    (void)state;
    config_errors_t errs;
    files_t f;
    char conf[4096];
    int n = snprintf(conf, sizeof conf, "[bus a]\nport = sim\n"
                     "[template meter]\ntags_file = tags.csv\norder = CDAB\ninterval_ms = 700\n");
    for (int k = 1; k <= 15; k++)
        n += snprintf(conf + n, sizeof conf - (size_t)n, "[device meter%d]\nslave = %d\ntemplate = meter\n%s", k, k,
                      k == 2 ? "order = DCBA\ninterval_ms = 300\n" : "");
    snprintf(conf + n, sizeof conf - (size_t)n, "[device vfd]\nslave = 16\ninterval_ms = 250\n"
             "[tag speed]\ntable = holding\naddress = 1\ntype = int16\n\ndevice = vfd\n"
             "[tag torque]\ndevice = vfd\ntable = holding\naddress = 2\ntype = int16\ninterval_ms = 90\n");
    config_t *cfg = load_files(&f, conf,
        "name,table,address,type,order,interval_ms\n"
        "voltage,holding,0,float32,,\n"
        "energy,holding,2,uint32,ABCD,\n"
        "status,input,0,uint16,,5000\n", &errs);
    print_errors(&errs);
    assert_non_null(cfg);
    assert_int_equal(tags_table_count(cfg->tags), 15 * 3 + 2);
    for (int k = 1; k <= 15; k++) {
        char name[48];
        snprintf(name, sizeof name, "meter%d.voltage", k);
        const tags_tag_t *g = find(cfg, name);
        assert_non_null(g);
        snprintf(name, sizeof name, "meter%d", k);
        assert_string_equal(tags_table_device_name(cfg->tags, g->device), name);
        assert_int_equal(g->order, k == 2 ? TAGS_ORDER_DCBA : TAGS_ORDER_CDAB);
        assert_int_equal(g->interval_ms, k == 2 ? 300 : 700);
    }
    assert_null(find(cfg, "voltage"));
    assert_int_equal(find(cfg, "meter5.energy")->order, TAGS_ORDER_ABCD);   /* the row's own */
    assert_int_equal(find(cfg, "meter2.status")->interval_ms, 5000);
    assert_int_equal(find(cfg, "speed")->interval_ms, 250);                /* [device vfd] interval_ms */
    assert_int_equal(find(cfg, "torque")->interval_ms, 90);
    config_free(cfg);
    remove_files(&f);

    /* mistakes: a template without a file, a name that is no template, a row
     * naming a device (reported once, not once per device), and a row for a
     * configured device whose tags_file is another's */
    cfg = load_files(&f,
        "[bus a]\nport = sim\n"                                           /* 1-2 */
        "[template empty]\norder = ABCD\n"                                /* 3-4 */
        "[template m]\ntags_file = tags.csv\n"                            /* 5-6 */
        "[device d1]\nslave = 1\ntemplate = m\n"                          /* 7-9 */
        "[device d2]\nslave = 2\ntemplate = m\n"                          /* 10-12 */
        "[device d3]\nslave = 3\ntemplate = nope\n",                      /* 13-15 */
        "name,device,table,address,type\nx,d1,holding,1,int16\n", &errs);
    assert_null(cfg);
    char row[256];
    snprintf(row, sizeof row, "%s/tags.csv:2:3: device: 'd1': a template's rows name no device", f.dir);
    const char *const want[] = { "rtugw.conf:3: [template empty]: tags_file is required",
                                 "rtugw.conf:13: [device d3] template = 'nope': no such [template nope]", row };
    expect_errors(&errs, want, 3);
    assert_int_equal(errs.total, 3);
    remove_files(&f);

    cfg = load_files(&f, "[bus a]\nport = sim\n[device meter]\nslave = 1\ntags_file = tags.csv\n"
                         "[device vfd]\nslave = 2\n",
                     "name,device,table,address,type\nspeed,vfd,holding,1,int16\n", &errs);
    assert_null(cfg);
    const char *const vfd[] = { "device: device 'vfd' does not read this file (it is read for 'meter')" };
    expect_errors(&errs, vfd, 1);
    remove_files(&f);
}

static void test_limits(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\nport = sim\n"                                               /* 1-2 */
        "[device plc]\nslave = 1\nmax_read_registers = 8\nmax_read_bits = 16\n"  /* 3-6 */
        "[poll regs]\ndevice = plc\nfunction = 3\naddress = 0\ncount = 9\n"  /* 7-11 */
        "[poll bits]\ndevice = plc\nfunction = 1\naddress = 0\ncount = 17\n" /* 12-16 */
        "[poll fits]\ndevice = plc\nfunction = 4\naddress = 0\ncount = 8\n"  /* 17-21 */
        "[tag long]\ntable = holding\naddress = 100\ntype = string:9\n"       /* 22-25 */
        "[tag fits]\ntable = holding\naddress = 200\ntype = raw:8\n";         /* 26-29 */
    assert_null(config_load_string(text, "t.ini", &errs));
    static const char *const want[] = {
        "t.ini:7: [poll regs] count = 9: more than [device plc] max_read_registers = 8",
        "t.ini:12: [poll bits] count = 17: more than [device plc] max_read_bits = 16",
        "t.ini:22: tag long: 9 registers, more than [device plc] max_read_registers = 8",
    };
    expect_errors(&errs, want, sizeof want / sizeof want[0]);
    assert_int_equal(errs.total, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sections),
        cmocka_unit_test(test_section_errors),
        cmocka_unit_test(test_tags_file),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
