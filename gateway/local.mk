# The daemon, a library with one public header (gateway/gateway.h), used by cli/.
noinst_LIBRARIES += gateway/libgateway.a
gateway_libgateway_a_SOURCES = gateway/gateway.h gateway/internal.h \
	gateway/gw.c gateway/control.c gateway/log.c gateway/loop.c gateway/port.c gateway/bus.c gateway/bus_queue.c gateway/line.c gateway/line_copies.c gateway/bus_state.h \
	gateway/tcp.c gateway/poller.c gateway/http.c gateway/http_tags.c gateway/cache.c gateway/tags_gw.c \
	gateway/metrics.c gateway/notify.c
gateway_libgateway_a_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS) \
	$(JSONC_CFLAGS)

# End to end through real peers (pymodbus, libmodbus, mbpoll, socat).
TESTS += tests/test_gateway.py
EXTRA_DIST += tests/test_gateway.py
