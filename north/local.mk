# The MQTT client (north/north.h): built as the module rtugw-mqtt.so, with
# libmosquitto (and through it libssl), json-c and json/'s encoder, which
# rtugw dlopen()s only when [mqtt] is present: a daemon without MQTT never
# maps libssl. rtugw itself links only the loader (libnorth.a).
noinst_LIBRARIES += north/libnorth.a
north_libnorth_a_SOURCES = north/north.h north/load.c

rtugwmodule_PROGRAMS += north/rtugw-mqtt.so
north_rtugw_mqtt_so_SOURCES = north/north.h north/internal.h north/module.c north/north.c north/values.c \
	north/writes.c north/client.c north/queue.c north/spool.c north/spool_mark.c north/map.c json/json.h json/quote.c json/body.c \
	north/sparkplug.c north/sparkplug_cmd.c north/sparkplug_codec.c north/discovery.c \
	north/remote.c north/replace.c
north_rtugw_mqtt_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden $(MOSQUITTO_CFLAGS) $(JSONC_CFLAGS) $(EVENT_CFLAGS) \
	$(PROTOBUFC_CFLAGS)
north_rtugw_mqtt_so_LDFLAGS = $(AM_LDFLAGS) -shared
north_rtugw_mqtt_so_LDADD = $(MOSQUITTO_LIBS) $(JSONC_LIBS) $(EVENT_LIBS) $(PROTOBUFC_LIBS)

# Sparkplug B payloads: north/sparkplug.proto compiled by protoc-c into the
# build tree (never committed); sparkplug_codec.c is the only file that
# includes the header. The .h is made by the same run as the .c.
nodist_north_rtugw_mqtt_so_SOURCES = north/sparkplug.pb-c.c north/sparkplug.pb-c.h
BUILT_SOURCES += north/sparkplug.pb-c.c north/sparkplug.pb-c.h
CLEANFILES += north/sparkplug.pb-c.c north/sparkplug.pb-c.h
EXTRA_DIST += north/sparkplug.proto
north/sparkplug.pb-c.c: $(srcdir)/north/sparkplug.proto
	$(AM_V_GEN)$(MKDIR_P) north && $(PROTOC_C) --c_out=north --proto_path=$(srcdir)/north $(srcdir)/north/sparkplug.proto
north/sparkplug.pb-c.h: north/sparkplug.pb-c.c
	@test -f $@ || { rm -f north/sparkplug.pb-c.c; $(MAKE) $(AM_MAKEFLAGS) north/sparkplug.pb-c.c; }
# BUILT_SOURCES covers `make` and `make check`; a target named on its own
# (make north/rtugw-mqtt.so) needs the header before the codec compiles.
north/rtugw_mqtt_so-sparkplug_codec.$(OBJEXT): north/sparkplug.pb-c.h

# north's own end-to-end tests (mosquitto, paho, protoc --decode_raw)
TESTS += tests/e2e/mqtt/test_sparkplug_reload.py tests/e2e/mqtt/test_mqtt_v5.py tests/e2e/mqtt/test_mqtt_brokers.py tests/e2e/mqtt/test_mqtt_ha.py \
	tests/e2e/mqtt/test_fleet.py
EXTRA_DIST += tests/e2e/mqtt/test_sparkplug_reload.py tests/e2e/mqtt/test_mqtt_v5.py tests/e2e/mqtt/test_mqtt_brokers.py tests/e2e/mqtt/test_mqtt_ha.py \
	tests/e2e/mqtt/test_fleet.py

# The fleet at its issue's size: 50 gateways configured through one broker
# (test_fleet.py; make check runs it with 5). Prints the time to convergence.
check-fleet: all
	RTUGW_FLEET_N=50 $(srcdir)/tests/e2e/mqtt/test_fleet.py
.PHONY: check-fleet
