/*
 * tests/unit/test_config_sections.c -- the config loader on the transports' and
 * the north's sections: [udp] and dial-in ports, [rtu_tcp], [serial_slave NAME],
 * [mqtt]; part of test_config (its main runs these too).
 */
#include "tests/unit/configtest.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <unistd.h>

/* Modbus UDP (port = udp://, [udp]) and dial-in devices (port = listen://). */
static const char *const field_transports_refused[][3] = {
    { "[bus a]\nport = udp://10.0.0.5:502\nframing = rtu\n", "t.ini:3: [bus a] framing = 'rtu'", "Modbus UDP" },
    { "[bus a]\nframing = ascii\nport = udp://10.0.0.5:502\n", "t.ini:2: [bus a] framing = 'ascii'", "MBAP" },
    { "[bus a]\nport = udp://10.0.0.5\n", "t.ini:2:", "udp://HOST:PORT" },
    { "[bus a]\nport = listen://plc.local:7001\n", "t.ini:2:", "IPv4 address to listen on" },
    { "[bus a]\nport = listen://0.0.0.0:7001\nframing = tcp\n", "t.ini:3: [bus a] framing = 'tcp'", "DTU" },
    { "[bus a]\nport = /dev/ttyUSB0\nregister = text:x\n", "t.ini:3: [bus a] register", "only for port = listen" },
    { "[bus a]\nport = listen://0.0.0.0:7001\nheartbeat = hex:ABC\n", "t.ini:3:", "even number of hex digits" },
    { "[bus a]\nport = listen://0.0.0.0:7001\nregister = text:\n", "t.ini:3:", "1 to 64 bytes" },
    /* buses sharing a listening port: 0.0.0.0 takes in every address; each needs a registration, all
     * different, none beginning another's (the error names both buses) */
    { "[bus a]\nport = listen://0.0.0.0:7001\n[bus b]\nport = listen://127.0.0.1:7001\n", "t.ini:4: [bus b] port",
      "bus a listens on 0.0.0.0:7001, and 0.0.0.0 takes in every address" },
    { "[bus a]\nport = listen://0.0.0.0:7001\nregister = text:A\n[bus b]\nport = listen://0.0.0.0:7001\n",
      "t.ini:5: [bus b] port = 'listen://0.0.0.0:7001': shared with bus a", "(bus b has none)" },
    { "[bus a]\nport = listen://0.0.0.0:7001\n[bus b]\nport = listen://0.0.0.0:7001\nregister = text:B\n",
      "t.ini:5: [bus b] port = 'listen://0.0.0.0:7001': shared with bus a", "(bus a has none)" },
    { "[bus a]\nport = listen://127.0.0.1:7001\nregister = text:site\n[bus b]\nport = listen://127.0.0.1:7001\n"
      "heartbeat = text:HB\nregister = hex:73697465\n", "t.ini:7: [bus b] register = 'hex:73697465': bus a",
      "has the same registration" },
    { "[bus a]\nport = listen://127.0.0.1:7001\nregister = text:site-1\n[bus b]\nport = listen://127.0.0.1:7001\n"
      "register = text:site-17\n", "t.ini:6: [bus b] register = 'hex:736974652d3137': bus a",
      "register = 'hex:736974652d31'; one begins the other" },
    { "[bus a]\nport = listen://127.0.0.1:7001\nregister = text:site-17\n[bus b]\nport = listen://127.0.0.1:7002\n"
      "[bus c]\nport = listen://127.0.0.1:7001\nregister = text:site-1\n", "t.ini:8: [bus c] register", "bus a" },
    { "[bus a]\nport = sim\n[udp]\nlisten = 502\n", "t.ini:4: [udp] listen = '502'", "ADDR:PORT" },
    { "[bus a]\nport = sim\n[udp]\nmax_pending = 2\n", "t.ini:3:", "listen = ADDR:PORT is required" },
    { "[bus a]\nport = sim\n[udp]\nlisten = 0.0.0.0:502\ndefault_bus = b\n", "t.ini:5:", "no such bus" },
};

void test_udp_and_dialin(void **state)
{
    (void)state;
    config_t *cfg = accepted("[bus u]\nport = udp://plc-7.site:502\nconnect_timeout_ms = 500\n"
                             "[bus d]\nport = listen://0.0.0.0:7001\nregister = hex:00fe41\nheartbeat = text:HB\n"
                             "[udp]\nlisten = 0.0.0.0:1502\ndefault_bus = d\nunit9 = u:3\nmax_pending = 2\n");
    const config_bus_t *b = cfg->buses;
    assert_int_equal(b[0].port_kind, CONFIG_PORT_UDP);
    assert_int_equal(b[0].framing, CONFIG_FRAMING_TCP);   /* MBAP in datagrams */
    assert_string_equal(b[0].tcp_host, "plc-7.site");
    assert_int_equal(b[0].tcp_port, 502);
    assert_int_equal(b[1].port_kind, CONFIG_PORT_LISTEN);
    assert_int_equal(b[1].framing, CONFIG_FRAMING_RTU);
    assert_true(config_bus_stream(&b[1]));
    assert_int_equal(b[1].dial_register_len, 3);
    assert_memory_equal(b[1].dial_register, "\x00\xfe\x41", 3);
    assert_int_equal(b[1].dial_heartbeat_len, 2);
    assert_memory_equal(b[1].dial_heartbeat, "HB", 2);
    assert_true(cfg->udp.enabled);
    assert_string_equal(cfg->udp.bind, "0.0.0.0");
    assert_int_equal(cfg->udp.port, 1502);
    assert_int_equal(cfg->udp.default_bus, 1);
    assert_int_equal(cfg->udp.unit[9].bus, 0);
    assert_int_equal(cfg->udp.unit[9].slave, 3);
    assert_int_equal(cfg->udp.max_pending, 2);
    assert_int_equal(cfg->udp.max_clients, 64);
    config_free(cfg);
    /* three buses on one port, told apart by registrations none of which begins another; one bus alone on
     * another port needs none, and two other addresses on one port are two sockets */
    cfg = accepted("[bus a]\nport = listen://0.0.0.0:7001\nregister = text:site-1\n"
                   "[bus b]\nport = listen://0.0.0.0:7001\nregister = text:site-2\n"
                   "[bus c]\nport = listen://0.0.0.0:7001\nregister = hex:00fe\n"
                   "[bus d]\nport = listen://0.0.0.0:7002\n"
                   "[bus e]\nport = listen://127.0.0.1:7003\n[bus f]\nport = listen://127.0.0.2:7003\n");
    assert_int_equal(cfg->bus_count, 6);
    assert_int_equal(cfg->buses[2].dial_register_len, 2);
    assert_int_equal(cfg->buses[3].dial_register_len, 0);
    config_free(cfg);
    for (size_t i = 0; i < sizeof field_transports_refused / sizeof field_transports_refused[0]; i++)
        expect_refused(field_transports_refused[i][0], field_transports_refused[i][1],
                       field_transports_refused[i][2]);
}

void test_rtu_tcp_section(void **state)
{
    (void)state;
    config_t *cfg = accepted("[bus a]\nport = sim\n[bus b]\nport = sim:7\n"
                         "[rtu_tcp]\nenabled = true\nport = 4001\ndefault_bus = b\nunit9 = a:3\nread_only = true\n"
                         "allow = 127.0.0.1, 10.0.0.0/8\nmax_clients = 4\n"
                         "[tcp]\nunit9 = b:5\n");
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

static const char two_serial_slaves[] =
    "[bus a]\nport = sim\n[bus dev]\nport = tcp://127.0.0.1:5020\nframing = tcp\n"
    "[serial_slave scada]\nport = /dev/ttyUSB3\nbaud = 9600\nparity = none\n"
    "unit1 = a:1\nunit17 = dev:1\nanswer_timeout_ms = 400\n"
    "[serial_slave two]\nport = /dev/ttyUSB4\nunit0 = a:0\n";

void test_serial_slave_section(void **state)
{
    (void)state;
    config_t *cfg = accepted(two_serial_slaves);
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

/* [mqtt]: off unless present; defaults; every key checked with its line. */
void test_mqtt_section(void **state)
{
    (void)state;
    config_errors_t errs;
    config_t *cfg = load("[tcp]\nenabled = false\n", &errs);
    assert_non_null(cfg);
    assert_false(cfg->mqtt_enabled);
    config_free(cfg);

    cfg = load("[tcp]\nenabled = false\nread_only = true\n[mqtt]\nhost = broker.example\n", &errs);
    assert_non_null(cfg);
    assert_true(cfg->mqtt_enabled);
    assert_int_equal(cfg->mqtt.port, 1883);
    assert_int_equal(cfg->mqtt.qos, 1);
    assert_int_equal(cfg->mqtt.keepalive_s, 30);
    assert_string_equal(cfg->mqtt.topic_prefix, "rtugw");
    assert_true(strncmp(cfg->mqtt.client_id, "rtugw-", 6) == 0);
    assert_true(cfg->mqtt.gateway[0] != 0);
    assert_true(cfg->mqtt.read_only);          /* follows [tcp] */
    assert_true(cfg->mqtt.verify);
    assert_false(cfg->mqtt.tls);
    assert_int_equal(cfg->mqtt.publish, NORTH_PUBLISH_CHANGE);
    assert_int_equal(cfg->mqtt.format, NORTH_FORMAT_JSON);
    config_free(cfg);

    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nca_file = ca.crt\npublish = interval\n"
               "format = json-per-tag\ntopic_prefix = site1/rtugw\nread_only = false\n", &errs);
    assert_non_null(cfg);
    assert_true(cfg->mqtt.tls);                /* a CA file means TLS */
    assert_int_equal(cfg->mqtt.port, 8883);
    assert_int_equal(cfg->mqtt.publish, NORTH_PUBLISH_INTERVAL);
    assert_int_equal(cfg->mqtt.format, NORTH_FORMAT_JSON_PER_TAG);
    assert_string_equal(cfg->mqtt.topic_prefix, "site1/rtugw");
    assert_int_equal(cfg->mqtt.max_write_items, 64);   /* the default: as many as can wait for answers */
    config_free(cfg);

    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nmax_write_items = 8\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->mqtt.max_write_items, 8);
    config_free(cfg);
    assert_null(load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nmax_write_items = 65\n", &errs));
    expect_error(&errs, "t.ini:5: [mqtt] max_write_items = '65'", "1..64");

    cfg = load("[bus a]\nport = sim\n[device status]\nbus = a\nslave = 1\n[mqtt]\n"   /* 1-6 */
               "qos = 2\npublish = sometimes\nformat = xml\ntopic_prefix = a/+/b\n"       /* 7-10 */
               "gateway = g/1\nclient_id = has space\nbuffer_bytes = 10\nkeepalive_s = 1\n"  /* 11-14 */
               "spool_max_bytes = 5\nmax_write_bytes = 9\ncert_file = c\ntls = false\nwhat = 1\n", /* 15-19 */
               &errs);
    assert_null(cfg);
    expect_error(&errs, "t.ini:7: [mqtt] qos = '2'", "0..1");
    expect_error(&errs, "t.ini:8: [mqtt] publish = 'sometimes'", "change");
    expect_error(&errs, "t.ini:9: [mqtt] format = 'xml'", "sparkplug");
    expect_error(&errs, "t.ini:10: [mqtt] topic_prefix = 'a/+/b'", "'+'");
    expect_error(&errs, "t.ini:11: [mqtt] gateway = 'g/1'", "topic level");
    expect_error(&errs, "t.ini:12: [mqtt] client_id = 'has space'", "without spaces");
    expect_error(&errs, "t.ini:13: [mqtt] buffer_bytes = '10'", "65536..");
    expect_error(&errs, "t.ini:14: [mqtt] keepalive_s = '1'", "5..3600");
    expect_error(&errs, "t.ini:15: [mqtt] spool_max_bytes = '5'", "1048576..");
    expect_error(&errs, "t.ini:16: [mqtt] max_write_bytes = '9'", "256..");
    expect_error(&errs, "t.ini:19: [mqtt] what: unknown key", NULL);
    expect_error(&errs, "t.ini:6: [mqtt]: host is required", NULL);
    expect_error(&errs, "t.ini:6: [mqtt]: ca_file, cert_file or key_file is set but tls = false", NULL);
    expect_error(&errs, "t.ini:6: [mqtt]: cert_file and key_file go together", NULL);
    expect_error(&errs, "t.ini:3: [device status]: the name is reserved with [mqtt]", NULL);

    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nqos = 0\nspool_dir = x\n", &errs);
    assert_null(cfg);
    expect_error(&errs, "t.ini:3: [mqtt]: spool_dir needs qos = 1", NULL);

    /* Sparkplug: group_id required, edge_node_id defaults to the gateway */
    cfg = load("[tcp]\nenabled = false\n[bus a]\nport = sim\n[device status]\nbus = a\nslave = 1\n"
               "[mqtt]\nhost = b\nformat = sparkplug\ngroup_id = plant1\ngateway = gw7\n", &errs);
    assert_non_null(cfg);   /* a device called status is no JSON topic here */
    assert_int_equal(cfg->mqtt.format, NORTH_FORMAT_SPARKPLUG);
    assert_string_equal(cfg->mqtt.group_id, "plant1");
    assert_string_equal(cfg->mqtt.edge_node_id, "gw7");
    assert_string_equal(cfg->mqtt.primary_host_id, "");
    config_free(cfg);
    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nformat = sparkplug\ngroup_id = g\n"
               "edge_node_id = e1\nprimary_host_id = scada\n", &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->mqtt.edge_node_id, "e1");
    assert_string_equal(cfg->mqtt.primary_host_id, "scada");
    config_free(cfg);
    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\nformat = sparkplug\n"      /* 3-5 */
               "edge_node_id = a/b\nprimary_host_id = #\nclean_session = false\n", &errs); /* 6-8 */
    assert_null(cfg);
    expect_error(&errs, "t.ini:3: [mqtt]: format = sparkplug needs clean_session = true", NULL);
    expect_error(&errs, "t.ini:6: [mqtt] edge_node_id = 'a/b'", "Sparkplug topic level");
    expect_error(&errs, "t.ini:7: [mqtt] primary_host_id = '#'", "Sparkplug topic level");
    expect_error(&errs, "t.ini:3: [mqtt]: format = sparkplug needs group_id", NULL);
    cfg = load("[tcp]\nenabled = false\n[mqtt]\nhost = b\ngroup_id = g\n", &errs);
    assert_null(cfg);
    expect_error(&errs, "t.ini:3: [mqtt]: group_id, edge_node_id and primary_host_id need format = sparkplug", NULL);

    /* [device NAME] mqtt_publish and mqtt_interval_ms */
    cfg = load("[bus a]\nport = sim\n[device p]\nbus = a\nslave = 1\nmqtt_publish = poll\n"
               "[device i]\nbus = a\nslave = 2\nmqtt_publish = interval\nmqtt_interval_ms = 250\n"
               "[device c]\nbus = a\nslave = 3\n[mqtt]\nhost = b\n", &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->devices[0].mqtt_publish, NORTH_PUBLISH_POLL);
    assert_int_equal(cfg->devices[1].mqtt_publish, NORTH_PUBLISH_INTERVAL);
    assert_int_equal(cfg->devices[1].mqtt_interval_ms, 250);
    assert_int_equal(cfg->devices[2].mqtt_publish, -1);
    config_free(cfg);
    cfg = load("[bus a]\nport = sim\n[device x]\nbus = a\nslave = 1\nmqtt_publish = often\n"      /* 1-6 */
               "[device y]\nbus = a\nslave = 2\nmqtt_interval_ms = 50\n"                          /* 7-10 */
               "[device z]\nbus = a\nslave = 3\nmqtt_interval_ms = 500\n[mqtt]\nhost = b\n", &errs); /* 11-16 */
    assert_null(cfg);
    expect_error(&errs, "t.ini:6: [device x] mqtt_publish = 'often'", "interval");
    expect_error(&errs, "t.ini:10: [device y] mqtt_interval_ms = '50'", "100..");
    expect_error(&errs, "t.ini:11: [device z]: mqtt_interval_ms is set but mqtt_publish is not interval", NULL);
    cfg = load("[bus a]\nport = sim\n[device x]\nbus = a\nslave = 1\nmqtt_publish = poll\n", &errs);
    assert_null(cfg);
    expect_error(&errs, "t.ini:3: [device x]: mqtt_publish and mqtt_interval_ms need an [mqtt] section", NULL);
}
