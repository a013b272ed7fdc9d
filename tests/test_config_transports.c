/*
 * tests/test_config_transports.c -- the transports' part of the config file:
 * framing and tcp:// ports on a bus, the keys only some ports and framings
 * take (refused elsewhere, with their line), [rtu_tcp] with [tcp]'s keys,
 * and [serial_slave NAME]: routes, required keys, a port used twice.
 */
#include "config/config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static config_t *load(const char *text, config_errors_t *errs)
{
    return config_load_string(text, "t.ini", errs);
}

static void expect_error(const config_errors_t *errs, const char *a, const char *b)
{
    for (unsigned i = 0; i < errs->count; i++)
        if (strstr(errs->text[i], a) && (!b || strstr(errs->text[i], b)))
            return;
    for (unsigned i = 0; i < errs->count; i++)
        fprintf(stderr, "  got: %s\n", errs->text[i]);
    fail_msg("no error containing '%s' and '%s'", a, b ? b : "");
}

static void expect_refused(const char *text, const char *a, const char *b)
{
    config_errors_t errs;
    config_t *cfg = load(text, &errs);
    if (cfg) {
        config_free(cfg);
        fail_msg("accepted:\n%s", text);
    }
    expect_error(&errs, a, b);
}

static void test_bus_framings(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus dev]\nport = tcp://10.0.0.5:502\nframing = tcp\n"
                         "[bus nport]\nport = tcp://192.168.1.20:4001\nbaud = 9600\nframe_silence_ms = 80\n"
                         "connect_timeout_ms = 1500\n"
                         "[bus ascii]\nport = /dev/ttyUSB1\nframing = ascii\ndata_bits = 7\nchar_timeout_ms = 500\n"
                         "[bus rtu]\nport = /dev/ttyUSB0\n"
                         "[tcp]\ndefault_bus = rtu\n", &errs);
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.text[i]);
    assert_non_null(cfg);
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

static void test_bus_keys_that_do_not_apply(void **state)
{
    (void)state;
    expect_refused("[bus a]\nport = tcp://10.0.0.5\n", "t.ini:2: [bus a] port = 'tcp://10.0.0.5'", "tcp://HOST:PORT");
    expect_refused("[bus a]\nport = tcp://plc.local:502\n", "t.ini:2:", "IPv4 address");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:70000\n", "t.ini:2:", "PORT 1..65535");
    expect_refused("[bus a]\nport = /dev/ttyUSB0\nframing = mbap\n", "t.ini:3: [bus a] framing = 'mbap'",
                   "expected rtu, ascii or tcp");
    expect_refused("[bus a]\nport = /dev/ttyUSB0\nframing = tcp\n", "t.ini:3: [bus a] framing = 'tcp'",
                   "needs port = tcp://");
    expect_refused("[bus a]\nport = sim\nframing = ascii\n", "t.ini:3:", "simulator speaks RTU");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nbaud = 9600\n",
                   "t.ini:4: [bus a] baud = '9600'", "no serial line");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:502\nrs485 = ioctl\n", "t.ini:3: [bus a] rs485 = 'ioctl'",
                   "no RS-485 line");
    expect_refused("[bus a]\nport = /dev/ttyUSB0\nconnect_timeout_ms = 100\n", "t.ini:3:", "only for port = tcp://");
    expect_refused("[bus a]\nport = /dev/ttyUSB0\nframe_silence_ms = 100\n", "t.ini:3: [bus a] frame_silence_ms",
                   "t3.5");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nframe_silence_ms = 100\n", "t.ini:4:",
                   "framing = rtu");
    expect_refused("[bus a]\nport = /dev/ttyUSB0\nchar_timeout_ms = 100\n", "t.ini:3:", "only for framing = ascii");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:502\nmax_inflight = 1\n", "t.ini:3:", "only for framing = tcp");
    expect_refused("[bus a]\nport = tcp://10.0.0.5:502\nframing = tcp\nmax_inflight = 4\n",
                   "t.ini:4: [bus a] max_inflight = '4'", "only 1");
}

static void test_rtu_tcp_section(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim\n[bus b]\nport = sim:7\n"
                         "[rtu_tcp]\nenabled = true\nport = 4001\ndefault_bus = b\nunit9 = a:3\nread_only = true\n"
                         "allow = 127.0.0.1, 10.0.0.0/8\nmax_clients = 4\n"
                         "[tcp]\nunit9 = b:5\n", &errs);
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.text[i]);
    assert_non_null(cfg);
    assert_true(cfg->rtu_tcp.enabled);
    assert_int_equal(cfg->rtu_tcp.port, 4001);
    assert_int_equal(cfg->rtu_tcp.default_bus, 1);
    assert_true(cfg->rtu_tcp.unit[9].set);
    assert_int_equal(cfg->rtu_tcp.unit[9].bus, 0);
    assert_int_equal(cfg->rtu_tcp.unit[9].slave, 3);
    assert_true(cfg->rtu_tcp.read_only);
    assert_int_equal(cfg->rtu_tcp.allow_count, 2);
    assert_int_equal(cfg->rtu_tcp.max_clients, 4);
    /* [tcp]'s own keys stay its own */
    assert_int_equal(cfg->tcp.allow_count, 0);
    assert_int_equal(cfg->tcp.default_bus, 0);
    assert_int_equal(cfg->tcp.unit[9].bus, 1);
    assert_int_equal(cfg->tcp.unit[9].slave, 5);
    assert_false(cfg->tcp.read_only);
    config_free(cfg);

    expect_refused("[bus a]\nport = sim\n[rtu_tcp]\nenabled = true\nunit3 = nope:1\n",
                   "t.ini:5: [rtu_tcp] unit3 = 'nope:...'", "no such bus");
    expect_refused("[bus a]\nport = sim\n[rtu_tcp]\ndefault_bus = nope\n", "t.ini:4: [rtu_tcp] default_bus = 'nope'",
                   "no such bus");
    expect_refused("[bus a]\nport = sim\n[rtu_tcp]\nenabled = true\nport = 1502\n", "[tcp] and [rtu_tcp] both use",
                   "127.0.0.1:1502");
    expect_refused("[rtu_tcp]\nenabled = true\n[tcp]\nenabled = false\n", "rtu_tcp is enabled but no [bus", NULL);
    expect_refused("[bus a]\nport = sim\n[rtu_tcp]\nbogus = 1\n", "t.ini:4: [rtu_tcp] bogus", "unknown key");
    expect_refused("[bus a]\nport = sim\n[rtu_tcp]\n[rtu_tcp]\n", "t.ini:4: [rtu_tcp]", "defined twice");
}

static void test_serial_slave_section(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[bus a]\nport = sim\n[bus dev]\nport = tcp://127.0.0.1:5020\nframing = tcp\n"
                         "[serial_slave scada]\nport = /dev/ttyUSB3\nbaud = 9600\nparity = none\n"
                         "unit1 = a:1\nunit17 = dev:1\nanswer_timeout_ms = 400\n"
                         "[serial_slave two]\nport = /dev/ttyUSB4\nunit0 = a:0\n", &errs);
    for (unsigned i = 0; i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.text[i]);
    assert_non_null(cfg);
    assert_int_equal(cfg->serial_slave_count, 2);
    const config_serial_slave_t *ss = &cfg->serial_slaves[0];
    assert_string_equal(ss->name, "scada");
    assert_string_equal(ss->port, "/dev/ttyUSB3");
    assert_int_equal(ss->baud, 9600);
    assert_int_equal(ss->parity, 'N');
    assert_int_equal(ss->answer_timeout_ms, 400);
    assert_true(ss->unit[1].set && ss->unit[1].bus == 0 && ss->unit[1].slave == 1);
    assert_true(ss->unit[17].set && ss->unit[17].bus == 1 && ss->unit[17].slave == 1);
    assert_false(ss->unit[2].set);
    assert_int_equal(cfg->serial_slaves[1].answer_timeout_ms, 800);
    assert_int_equal(cfg->serial_slaves[1].parity, 'E');
    assert_true(cfg->serial_slaves[1].unit[0].set);
    assert_false(cfg->tcp.unit[1].set);   /* the tcp front end's table is untouched */
    config_free(cfg);

    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nunit1 = a:1\n", "t.ini:3: [serial_slave s]",
                   "port is required");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = /dev/ttyUSB3\n", "t.ini:3: [serial_slave s]",
                   "unitN = BUS:SLAVE");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = /dev/ttyUSB3\nunit1 = b:1\n",
                   "t.ini:5: [serial_slave s] unit1 = 'b:...'", "no such bus");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = /dev/ttyUSB3\nunit0 = broadcast\n",
                   "t.ini:5: [serial_slave s] unit0 = 'broadcast'", "expected BUS:SLAVE (slave 0..247) or off");
    expect_refused("[bus a]\nport = /dev/ttyUSB3\n[serial_slave s]\nport = /dev/ttyUSB3\nunit1 = a:1\n",
                   "t.ini:4: [serial_slave s] port = '/dev/ttyUSB3'", "also the port of [bus a]");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = sim\nunit1 = a:1\n", "t.ini:4:",
                   "path of a serial port");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = /dev/ttyUSB3\nunit1 = a:1\nresponse_timeout_ms = 5\n",
                   "t.ini:6: [serial_slave s] response_timeout_ms", "unknown key");
    expect_refused("[bus a]\nport = sim\n[serial_slave s]\nport = /dev/x\nunit1 = a:1\n[serial_slave s]\n",
                   "t.ini:6: [serial_slave s]", "defined twice (first at line 3)");
    expect_refused("[serial_slave]\n", "t.ini:1: [serial_slave]", "needs a name");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bus_framings),
        cmocka_unit_test(test_bus_keys_that_do_not_apply),
        cmocka_unit_test(test_rtu_tcp_section),
        cmocka_unit_test(test_serial_slave_section),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
