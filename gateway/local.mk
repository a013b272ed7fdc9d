# The daemon's runtime (gateway/gateway.h): the loop, ports, the bus actors
# hosting the line cores, the one way into a bus, tag writes, the poller and
# its subscribers. front/, web/ and daemon/ are built on it.
GW_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS) \
	$(JSONC_CFLAGS) $(MOSQUITTO_CFLAGS)
GW_CPPFLAGS = $(AM_CPPFLAGS) -DRTUGW_MODULEDIR='"$(rtugwmoduledir)"'
noinst_LIBRARIES += gateway/libgateway.a
gateway_libgateway_a_SOURCES = gateway/gateway.h \
	gateway/log.c gateway/loop.c gateway/port.c gateway/bus.c gateway/bus_restart.c gateway/poller.c gateway/cache.c gateway/tags.c \
	gateway/report.h gateway/report.c gateway/report_bus.c gateway/report_polls.c gateway/report_reload.c gateway/reload_result.h gateway/reload_result.c \
	gateway/north.c gateway/north_session.c gateway/north_write.c gateway/north_internal.h gateway/submit.c gateway/tag_write.c gateway/vslave.c gateway/metrics.c gateway/notify.c gateway/trim.c \
	gateway/frames.c gateway/listen.c gateway/scan.c gateway/runtime.c gateway/slave_port.c \
	gateway/wiring.h gateway/handles.c gateway/timeline.c
gateway_libgateway_a_CFLAGS = $(GW_CFLAGS)
gateway_libgateway_a_CPPFLAGS = $(GW_CPPFLAGS)

# End to end through real peers (pymodbus, libmodbus, mbpoll, socat).
TESTS += tests/peers/test_gateway_foreign_peers.py
EXTRA_DIST += tests/peers/test_gateway_foreign_peers.py
# MQTT end to end: real brokers (mosquitto), a bridge, TLS, paho subscribers.
TESTS += tests/e2e/mqtt/test_mqtt.py tests/e2e/mqtt/test_mqtt_tags.py tests/e2e/mqtt/test_sparkplug.py tests/e2e/config/test_api_churn.py
EXTRA_DIST += tests/e2e/mqtt/test_mqtt.py tests/e2e/mqtt/test_mqtt_tags.py tests/e2e/mqtt/test_sparkplug.py tests/e2e/mqtt/sparkplugtest.py tests/e2e/config/test_api_churn.py
# A reload's outcome lists: keys whole and once, a full list marked, the first error kept.
check_PROGRAMS += tests/unit/test_reload_result
tests_unit_test_reload_result_SOURCES = tests/unit/test_reload_result.c
tests_unit_test_reload_result_CFLAGS = $(GW_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_reload_result_LDADD = gateway/libgateway.a $(CMOCKA_LIBS)
TESTS += tests/unit/test_reload_result
