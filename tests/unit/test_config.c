/*
 * tests/unit/test_config.c -- the config loader: the demo and the example load,
 * every kind of mistake is reported with file, line, key and value (both
 * lines for anything given twice), and all mistakes in a file are reported
 * in one pass, a bus rule's among them; the transports' keys and sections
 * (framing, tcp:// ports); the sections' in test_config_sections.c.
 */
#include "tests/unit/configtest.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Back-pressure and priority keys (front/backpressure.c): defaults, values,
 * and a bad value named with its file, line and range. */
static void test_tcp_share_keys(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim\n[tcp]\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->tcp.bus_share, 4);
    assert_int_equal(cfg->tcp.priority_count, 0);
    config_free(cfg);
    cfg = load("[bus a]\nport = sim\n[tcp]\nbus_share = 2\npriority_clients = 10.0.0.5, 192.168.1.0/24\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->tcp.bus_share, 2);
    assert_int_equal(cfg->tcp.priority_count, 2);
    assert_int_equal(cfg->tcp.priority[1].mask, htonl(0xFFFFFF00u));
    config_free(cfg);
    cfg = load("[bus a]\nport = sim\n[tcp]\npriority_units = 1, 5-7\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->tcp.priority_units[0], 0xE2);   /* units 1, 5, 6, 7 */
    assert_int_equal(cfg->tcp.priority_units[1], 0);
    assert_int_equal(cfg->tcp.priority_functions, 0);
    config_free(cfg);
    cfg = load("[bus a]\nport = sim\n[tcp]\npriority_functions = write, diagnostics\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->tcp.priority_functions, CONFIG_FN_WRITE | CONFIG_FN_DIAGNOSTICS);
    config_free(cfg);
    assert_null(load("[bus a]\nport = sim\n[tcp]\npriority_units = 7-5\npriority_functions = fast\n", &errs));
    expect_error(&errs, "t.ini:4: [tcp] priority_units = '7-5'", "0..255");
    expect_error(&errs, "t.ini:5: [tcp] priority_functions = 'fast'", "read, write");
    assert_null(load("[bus a]\nport = sim\n[tcp]\nbus_share = 0\npriority_clients = 10.0.0.0/33\n", &errs));
    expect_error(&errs, "t.ini:4: [tcp] bus_share = '0'", "1..4096");
    expect_error(&errs, "t.ini:5: [tcp] priority_clients = '10.0.0.0/33'", "0..32");
}

/* The polls' share of a busy bus (line/queue.c): default, a value, its
 * range named, and a listen-only bus, which sends nothing, refuses it. */
static void test_poll_share_key(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim\n[bus b]\nport = sim\npoll_share = 0\n[bus c]\nport = sim\npoll_share = 50\n",
                         &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->buses[0].poll_share, 20);
    assert_int_equal(cfg->buses[1].poll_share, 0);
    assert_int_equal(cfg->buses[2].poll_share, 50);
    config_free(cfg);
    assert_null(load("[bus a]\nport = sim\npoll_share = 51\n", &errs));
    expect_error(&errs, "t.ini:3: [bus a] poll_share = '51'", "0..50");
    assert_null(load("[bus a]\nport = /dev/ttyS0\nmode = listen\npoll_share = 10\n", &errs));
    expect_error(&errs, "t.ini:4: [bus a] poll_share = '10'", "never sends");
}

/* A listener's bus_share must stay below every bus's queue_depth: at or
 * above it, the listener alone fills the queue and gets exceptions 06. The
 * error names the line of the value written and quotes the other. */
static void test_bus_share_below_queue_depth(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim\nqueue_depth = 5\n[tcp]\nbus_share = 4\n", &errs);
    assert_non_null(cfg);
    config_free(cfg);
    assert_null(load("[bus a]\nport = sim\nqueue_depth = 8\n[tcp]\nbus_share = 8\n", &errs));
    expect_error(&errs, "t.ini:5: [tcp] bus_share = '8'", "queue_depth = 8 (line 3)");
    /* bus_share left at its default (4): the queue_depth written is the culprit */
    assert_null(load("[bus a]\nport = sim\n[bus b]\nport = sim\nqueue_depth = 2\n", &errs));
    expect_error(&errs, "t.ini:5: [bus b] queue_depth = '2'", "[tcp] bus_share = 4 (default)");
    /* [rtu_tcp] too, but only when enabled; [tcp] off is not checked */
    assert_null(load("[bus a]\nport = sim\n[tcp]\nenabled = false\n[rtu_tcp]\nenabled = true\nbus_share = 64\n",
                     &errs));
    expect_error(&errs, "t.ini:7: [rtu_tcp] bus_share = '64'", "queue_depth = 64 (default)");
    cfg = load("[bus a]\nport = sim\nqueue_depth = 2\n[tcp]\nenabled = false\n", &errs);
    assert_non_null(cfg);
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
    assert_int_equal(cfg->tcp.bus_share, 4);
    assert_int_equal(cfg->tcp.priority_count, 1);
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

/* A NUL in a line is an error at its line and column, as the CSV reader
 * makes it: the text after it is not silently dropped (here it would have
 * hidden "junk" after the port). */
static void test_nul_byte(void **state)
{
    (void)state;
    char path[] = "/tmp/rtugw-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "[bus a]\nport = /dev/x\0 junk\n[device d]\nslave = 1\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    config_errors_t errs;
    config_t *cfg = config_load_file(path, &errs);
    char want[64];
    snprintf(want, sizeof want, "%s:2:14: NUL byte", path);
    unlink(path);
    assert_null(cfg);
    expect_error(&errs, want, NULL);
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

/* The text of a file with buses buses of devices devices each (slaves 1..),
 * and one poll group per device: malloc'd. */
static char *many_buses(unsigned buses, unsigned devices)
{
    size_t cap = 256 + (size_t)buses * (40 + devices * 120), n = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (unsigned b = 0; b < buses; b++) {
        n += (size_t)snprintf(text + n, cap - n, "[bus b%u]\nport = sim\n", b);
        for (unsigned d = 0; d < devices; d++)
            n += (size_t)snprintf(text + n, cap - n,
                                  "[device d%u_%u]\nbus = b%u\nslave = %u\n[poll p%u_%u]\ndevice = d%u_%u\n"
                                  "function = 3\ncount = 10\n",
                                  b, d, b, d + 1, b, d, b, d);
    }
    assert_true(n < cap);
    return text;
}

/* Tables are sized from the file: 64 buses of 70 slaves (4,480 devices and
 * poll groups) load, every entry where it was written; one bus past the
 * limit is an error that names the limit. */
static void test_tables_sized_from_the_file(void **state)
{
    (void)state;
    config_errors_t errs;
    char *text = many_buses(64, 70);
    config_t *cfg = load(text, &errs);
    free(text);
    for (unsigned i = 0; !cfg && i < errs.count; i++)
        print_error("%s\n", errs.text[i]);
    assert_non_null(cfg);
    assert_int_equal(cfg->bus_count, 64);
    assert_int_equal(cfg->device_count, 64 * 70);
    assert_int_equal(cfg->poll_count, 64 * 70);
    const config_device_t *last = &cfg->devices[cfg->device_count - 1];
    assert_string_equal(last->name, "d63_69");
    assert_int_equal(last->bus, 63);
    assert_int_equal(last->slave, 70);
    assert_int_equal(cfg->polls[cfg->poll_count - 1].device, cfg->device_count - 1);
    config_t *copy = config_copy(cfg);
    assert_non_null(copy);
    assert_memory_equal(copy->devices, cfg->devices, cfg->device_count * sizeof *cfg->devices);
    config_free(copy);
    config_free(cfg);

    text = many_buses(CONFIG_MAX_BUSES + 1, 0);
    assert_null(load(text, &errs));
    free(text);
    assert_int_equal(errs.total, 1);
    char want[96];
    snprintf(want, sizeof want, "[bus b%u]: more than %u buses (the limit", CONFIG_MAX_BUSES, CONFIG_MAX_BUSES);
    expect_error(&errs, want, NULL);

    /* A slave given twice on one bus is still found among thousands. */
    text = many_buses(64, 70);
    char *dup = strstr(text, "[device d63_69]\nbus = b63\nslave = 70");
    assert_non_null(dup);
    memcpy(strstr(dup, "slave = 70"), "slave = 69", 10);
    assert_null(load(text, &errs));
    free(text);
    expect_error(&errs, "[device d63_69]: slave 69 on bus b63 is already device d63_68", NULL);
}

/* Sections inih would accept without a word: empty, misspelt, with extra words. */
static void test_section_headers_are_strict(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\n"                 /* 1 */
        "port = /dev/x\n"           /* 2 */
        "[bsu x]\n"                 /* 3: empty, misspelt */
        "[tpc]\n"                   /* 4: empty, misspelt */
        "[bus b c]\n"               /* 5 */
        "port = /dev/y\n"           /* 6 */
        "[]\n"                      /* 7 */
        "[ \t]\n"                   /* 8 */
        "[http] junk\n"             /* 9 */
        "[router ; x]\n"            /* 10: the ';' starts a comment: no ']' */
        "[tcp extra]\n"             /* 11 */
        "[device]\n";               /* 12 */
    assert_null(load(text, &errs));
    expect_error(&errs, "t.ini:3: [bsu x]: unknown section", NULL);
    expect_error(&errs, "t.ini:4: [tpc]: unknown section", NULL);
    expect_error(&errs, "t.ini:5: [bus b c]:", "one name");
    expect_error(&errs, "t.ini:7: []: empty section name", NULL);
    expect_error(&errs, "t.ini:8: [ \t]: empty section name", NULL);
    expect_error(&errs, "t.ini:9: [http]: text after ']': 'junk'", NULL);
    expect_error(&errs, "t.ini:10: [router ; x]: no closing ']'", NULL);
    expect_error(&errs, "t.ini:11: [tcp extra]: takes no name", NULL);
    expect_error(&errs, "t.ini:12: [device]: needs a name", NULL);
    assert_int_equal(errs.total, 9);

    /* A section without keys still counts: this bus has no port. */
    assert_null(load("[tcp]\nenabled = false\n[bus a]\n", &errs));
    expect_error(&errs, "t.ini:3: [bus a]: port is required", NULL);
    assert_int_equal(errs.total, 1);
    /* A comment after the header is fine; so is a byte order mark. */
    config_t *cfg = load("\xEF\xBB\xBF[bus a] ; the line\nport = /dev/x\n[http] # status\nenabled = no\n", &errs);
    assert_non_null(cfg);
    assert_false(cfg->http.enabled);
    config_free(cfg);
}

/* Anything given twice names both lines; the first value stays. */
static void test_duplicates_name_both_lines(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\n"                 /* 1 */
        "port = /dev/x\n"           /* 2 */
        "baud = fast\n"             /* 3 */
        "port = /dev/y\n"           /* 4 */
        "baud = 9600\n"             /* 5 */
        "[bus a]\n"                 /* 6: right after itself: inih would merge it */
        "retries = 2\n"             /* 7 */
        "[tcp]\n"                   /* 8 */
        "unit7 = a:1\n"             /* 9 */
        "unit07 = a:2\n"            /* 10: the same unit */
        "[device d]\n"              /* 11 */
        "slave = 1\n"               /* 12 */
        "[tcp]\n"                   /* 13 */
        "port = 1503\n"             /* 14 */
        "[device d]\n"              /* 15 */
        "slave = 2\n";              /* 16 */
    assert_null(load(text, &errs));
    expect_error(&errs, "t.ini:3: [bus a] baud = 'fast'", "300..4000000");
    expect_error(&errs, "t.ini:4: [bus a] port = '/dev/y': given twice", "(first at line 2)");
    expect_error(&errs, "t.ini:5: [bus a] baud = '9600': given twice", "(first at line 3)");
    expect_error(&errs, "t.ini:6: [bus a]: section defined twice (first at line 1)", NULL);
    expect_error(&errs, "t.ini:10: [tcp] unit07 = 'a:2': given twice", "(first at line 9)");
    expect_error(&errs, "t.ini:13: [tcp]: section defined twice (first at line 8)", NULL);
    expect_error(&errs, "t.ini:15: [device d]: section defined twice (first at line 11)", NULL);
    assert_int_equal(errs.total, 7);   /* keys of a repeated section are not judged again */
}

/* Lines inih would fold into the key above, or put in no section. */
static void test_continuations_and_stray_keys(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "port = /dev/x\n"           /* 1: before any section */
        "[bus a]\n"                 /* 2 */
        "port = /dev/x\n"           /* 3 */
        "  baud = 9600\n"           /* 4: indented: inih makes it port's value */
        "\t[bus b]\n"               /* 5: indented too: not a header for inih */
        "baud = 38400\n"            /* 6: a key again (line 4 was none) */
        "this is not ini\n"         /* 7 */
        "nor is this\n";            /* 8 */
    assert_null(load(text, &errs));
    expect_error(&errs, "t.ini:1: port = '/dev/x': outside any section", NULL);
    expect_error(&errs, "t.ini:4: [bus a] port = 'baud = 9600': the line is indented", "from line 3");
    expect_error(&errs, "t.ini:5: [bus a] port = '[bus b]': the line is indented", "from line 3");
    expect_error(&errs, "t.ini:7: not a section header", NULL);
    expect_error(&errs, "t.ini:8: not a section header", NULL);   /* inih reports only the first */
    assert_int_equal(errs.total, 5);
    /* Indented keys right after a header are keys (nothing to continue). */
    config_t *cfg = load("[bus a]\n  port = /dev/x\n", &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->buses[0].port, "/dev/x");
    config_free(cfg);
}

static void test_port_forms(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim:1,2,3\n[bus b]\nport = sim-paced\n[bus c]\nport = /dev/ttyUSB0\n"
                         "[bus d]\nport = simulator\n[bus e]\nport = sim\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->buses[0].port_kind, CONFIG_PORT_SIM);
    assert_string_equal(config_bus_sim_slaves(&cfg->buses[0]), "1,2,3");
    assert_int_equal(cfg->buses[0].port_line, 2);
    assert_int_equal(cfg->buses[1].port_kind, CONFIG_PORT_SIM_PACED);
    assert_null(config_bus_sim_slaves(&cfg->buses[1]));
    assert_int_equal(cfg->buses[2].port_kind, CONFIG_PORT_DEVICE);
    assert_null(config_bus_sim_slaves(&cfg->buses[2]));
    assert_int_equal(cfg->buses[3].port_kind, CONFIG_PORT_DEVICE);   /* a file named simulator */
    assert_int_equal(cfg->buses[4].port_kind, CONFIG_PORT_SIM);
    assert_null(config_bus_sim_slaves(&cfg->buses[4]));
    config_free(cfg);

    assert_null(load("[bus a]\nport = sim:\n[bus b]\nport = sim-pacedx\n[bus c]\nport = sim-paced:\n", &errs));
    expect_error(&errs, "t.ini:2: [bus a] port = 'sim:'", "sim:1,2,3");
    expect_error(&errs, "t.ini:4: [bus b] port = 'sim-pacedx'", "sim:1,2,3");
    expect_error(&errs, "t.ini:6: [bus c] port = 'sim-paced:'", "sim:1,2,3");
    assert_int_equal(errs.total, 3);   /* and not "port is required" besides */
}

/* What front/tcp.c and http.c would refuse at start-up is refused here. */
static void test_tcp_bind_and_strict_numbers(void **state)
{
    (void)state;
    config_errors_t errs;
    assert_null(load("[bus a]\nport = /dev/x\nbaud = +9600\n[tcp]\nbind = localhost\nunit+5 = a:1\n", &errs));
    expect_error(&errs, "t.ini:3: [bus a] baud = '+9600'", "whole number");
    expect_error(&errs, "t.ini:5: [tcp] bind = 'localhost'", "IPv4 address");
    expect_error(&errs, "t.ini:6: [tcp] unit+5: unknown key", NULL);
    assert_null(load("[bus a]\nport = /dev/x\n[http]\nbind = ::1\n", &errs));
    expect_error(&errs, "t.ini:4: [http] bind = '::1'", "IPv4 address");
    config_t *cfg = load("[bus a]\nport = /dev/x\n[tcp]\nbind = 0.0.0.0\n[http]\nbind = 10.1.2.3\n", &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->http.bind, "10.1.2.3");
    config_free(cfg);
}

/* A bus rule, as the command line passes drivers/' in: it refuses even
 * slave lists and baud rates above 100000, and counts what it was asked. */
static unsigned rule_calls;

static int even_rule(const config_bus_t *bus, const char *key, char *why, size_t cap)
{
    rule_calls++;
    const char *slaves = config_bus_sim_slaves(bus);
    if (strcmp(key, "port") == 0 && slaves && strlen(slaves) % 2 == 0) {
        snprintf(why, cap, "odd lengths only");
        return -22;
    }
    if (strcmp(key, "baud") == 0 && bus->baud > 100000) {
        snprintf(why, cap, "too fast for bus %s", bus->name);
        return -22;
    }
    return 0;
}

static void test_bus_rule_is_asked_per_key(void **state)
{
    (void)state;
    config_errors_t errs;
    const char *text =
        "[bus a]\n"                 /* 1 */
        "baud = 115200\n"           /* 2: before port: the rule sees the whole bus */
        "port = sim:1,22\n"         /* 3 */
        "retries = 99\n"            /* 4: refused by config/: not handed on */
        "[tcp]\n"                   /* 5 */
        "port = 1\n"                /* 6: not a bus */
        "[device d]\n"              /* 7 */
        "slave = 0\n";              /* 8: another error: the rule's still come */
    rule_calls = 0;
    assert_null(config_load_string_with(text, "t.ini", even_rule, &errs));
    expect_error(&errs, "t.ini:2: [bus a] baud = '115200': too fast for bus a", NULL);
    expect_error(&errs, "t.ini:3: [bus a] port = 'sim:1,22': odd lengths only", NULL);
    expect_error(&errs, "t.ini:4: [bus a] retries = '99'", "0..10");
    expect_error(&errs, "t.ini:8: [device d] slave = '0'", "1..247");
    assert_int_equal(rule_calls, 2);
    assert_int_equal(errs.total, 5);   /* and "slave is required" */

    rule_calls = 0;
    config_t *cfg = config_load_string_with("[bus a]\nport = sim:1\n[bus b]\nport = /dev/x\nbaud = 9600\n",
                                            "t.ini", even_rule, &errs);
    assert_non_null(cfg);
    assert_int_equal(rule_calls, 3);
    config_free(cfg);
}

/* ---- transports: framing, tcp:// ports, [rtu_tcp], [serial_slave NAME] ---------- */

static void test_bus_framings(void **state)
{
    (void)state;
    config_t *cfg = accepted("[bus dev]\nport = tcp://10.0.0.5:502\nframing = tcp\n"
                         "[bus nport]\nport = tcp://192.168.1.20:4001\nbaud = 9600\nframe_silence_ms = 80\n"
                         "connect_timeout_ms = 1500\n"
                         "[bus ascii]\nport = /dev/ttyUSB1\nframing = ascii\ndata_bits = 7\nchar_timeout_ms = 500\n"
                         "[bus rtu]\nport = /dev/ttyUSB0\n"
                         "[tcp]\ndefault_bus = rtu\n");
    const config_bus_t *b = cfg->buses;
    assert_int_equal(b[0].port_kind, CONFIG_PORT_TCP);
    assert_int_equal(b[0].framing, CONFIG_FRAMING_TCP);
    assert_string_equal(b[0].tcp_host, "10.0.0.5");
    assert_int_equal(b[0].tcp_port, 502);
    assert_int_equal(b[0].max_inflight, 1);
    assert_int_equal(b[0].connect_timeout_ms, 3000);
    assert_string_equal(b[0].port, "tcp://10.0.0.5:502");
    assert_int_equal(b[1].framing, CONFIG_FRAMING_RTU);
    assert_int_equal(b[1].tcp_port, 4001);
    assert_int_equal(b[1].frame_silence_ms, 80);
    assert_int_equal(b[1].connect_timeout_ms, 1500);
    assert_int_equal(b[2].framing, CONFIG_FRAMING_ASCII);
    assert_int_equal(b[2].port_kind, CONFIG_PORT_DEVICE);
    assert_int_equal(b[2].char_timeout_ms, 500);
    assert_int_equal(b[3].framing, CONFIG_FRAMING_RTU);
    assert_int_equal(b[3].frame_silence_ms, 50);
    assert_int_equal(b[3].char_timeout_ms, 1000);
    assert_null(config_bus_sim_slaves(&b[0]));   /* "tcp://..." has a ':' but no slave list */
    assert_false(cfg->rtu_tcp.enabled);
    assert_int_equal(cfg->serial_slave_count, 0);
    config_free(cfg);
}

/* Each a file, then two fragments its error must hold. */
static const char *const keys_that_do_not_apply[][3] = {
    { "[bus a]\nport = tcp://10.0.0.5\n", "t.ini:2: [bus a] port = 'tcp://10.0.0.5'", "tcp://HOST:PORT" },
    { "[bus a]\nport = tcp://plc_1.local:502\n", "t.ini:2:", "IPv4 address or a host name" },
    { "[bus a]\nport = tcp://10.0.0.5:70000\n", "t.ini:2:", "PORT 1..65535" },
    { "[bus a]\nport = /dev/ttyUSB0\nframing = mbap\n", "t.ini:3: [bus a] framing = 'mbap'",
      "expected rtu, ascii or tcp" },
    { "[bus a]\nport = /dev/ttyUSB0\nframing = tcp\n", "t.ini:3: [bus a] framing = 'tcp'", "needs port = tcp://" },
    { "[bus a]\nport = sim\nframing = ascii\n", "t.ini:3:", "simulator speaks RTU" },
    { "[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nbaud = 9600\n", "t.ini:4: [bus a] baud = '9600'",
      "no serial line" },
    { "[bus a]\nport = tcp://10.0.0.5:502\nrs485 = ioctl\n", "t.ini:3: [bus a] rs485 = 'ioctl'", "no RS-485 line" },
    { "[bus a]\nport = /dev/ttyUSB0\nconnect_timeout_ms = 100\n", "t.ini:3:", "only for port = tcp://" },
    { "[bus a]\nport = /dev/ttyUSB0\nframe_silence_ms = 100\n", "t.ini:3: [bus a] frame_silence_ms", "t3.5" },
    { "[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nframe_silence_ms = 100\n", "t.ini:4:", "framing = rtu" },
    { "[bus a]\nport = /dev/ttyUSB0\nchar_timeout_ms = 100\n", "t.ini:3:", "only for framing = ascii" },
    { "[bus a]\nport = tcp://10.0.0.5:502\nmax_inflight = 1\n", "t.ini:3:", "only for framing = tcp" },
    { "[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nmax_inflight = 4\n",
      "t.ini:4: [bus a] max_inflight = '4'", "only 1" },
};

static void test_bus_keys_that_do_not_apply(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof keys_that_do_not_apply / sizeof keys_that_do_not_apply[0]; i++)
        expect_refused(keys_that_do_not_apply[i][0], keys_that_do_not_apply[i][1], keys_that_do_not_apply[i][2]);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_is_valid),
        cmocka_unit_test(test_example_file_is_valid),
        cmocka_unit_test(test_tcp_share_keys),
        cmocka_unit_test(test_bus_share_below_queue_depth),
        cmocka_unit_test(test_poll_share_key),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_error_named_with_line),
        cmocka_unit_test(test_syntax_and_long_lines),
        cmocka_unit_test(test_required_and_cross_checks),
        cmocka_unit_test(test_error_list_is_bounded),
        cmocka_unit_test(test_tables_sized_from_the_file),
        cmocka_unit_test(test_log_target),
        cmocka_unit_test(test_section_headers_are_strict),
        cmocka_unit_test(test_duplicates_name_both_lines),
        cmocka_unit_test(test_continuations_and_stray_keys),
        cmocka_unit_test(test_port_forms),
        cmocka_unit_test(test_tcp_bind_and_strict_numbers),
        cmocka_unit_test(test_bus_rule_is_asked_per_key),
        cmocka_unit_test(test_bus_framings),
        cmocka_unit_test(test_bus_keys_that_do_not_apply),
        cmocka_unit_test(test_udp_and_dialin),
        cmocka_unit_test(test_rtu_tcp_section),
        cmocka_unit_test(test_serial_slave_section),
        cmocka_unit_test(test_mqtt_section),
        cmocka_unit_test(test_nul_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
