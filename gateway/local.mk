# The daemon, a library with one public header (gateway/gateway.h), used by cli/.
noinst_LIBRARIES += gateway/libgateway.a
gateway_libgateway_a_SOURCES = gateway/gateway.h gateway/internal.h \
	gateway/gw.c gateway/control.c gateway/log.c gateway/loop.c gateway/port.c gateway/bus.c gateway/bus_queue.c gateway/line.c gateway/line_copies.c gateway/bus_state.h \
	gateway/tcp.c gateway/poller.c gateway/http.c gateway/http_tags.c gateway/cache.c gateway/tags_gw.c \
	gateway/metrics.c gateway/notify.c gateway/web.c gateway/frames.c
gateway_libgateway_a_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS) \
	$(JSONC_CFLAGS)

# The web page (GET /): its files compiled in as arrays, generated in the
# build tree from the source tree's files, so a VPATH build works too.
WEB_FILES = $(srcdir)/gateway/web/index.html $(srcdir)/gateway/web/app.js $(srcdir)/gateway/web/style.css
nodist_gateway_libgateway_a_SOURCES = gateway/web_assets.c
gateway/web_assets.c: $(WEB_FILES) $(srcdir)/gateway/web/embed.sh
	@$(MKDIR_P) gateway
	$(AM_V_GEN)$(SHELL) $(srcdir)/gateway/web/embed.sh $@ $(WEB_FILES)
CLEANFILES += gateway/web_assets.c
EXTRA_DIST += gateway/web/index.html gateway/web/app.js gateway/web/style.css gateway/web/embed.sh

# End to end through real peers (pymodbus, libmodbus, mbpoll, socat).
TESTS += tests/test_gateway.py
EXTRA_DIST += tests/test_gateway.py
