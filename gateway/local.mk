# The daemon, a library with one public header (gateway/gateway.h), used by cli/.
noinst_LIBRARIES += gateway/libgateway.a
gateway_libgateway_a_SOURCES = gateway/gateway.h gateway/internal.h \
	gateway/gw.c gateway/control.c gateway/log.c gateway/loop.c gateway/port.c gateway/bus.c \
	gateway/tcp.c gateway/rtu_tcp.c gateway/rtu_tcp_frame.c gateway/serial_slave.c gateway/poller.c gateway/http.c gateway/http_tags.c gateway/cache.c gateway/tags_gw.c gateway/north.c \
	gateway/submit.c gateway/tag_write.c gateway/metrics.c gateway/notify.c gateway/trim.c gateway/web.c gateway/frames.c gateway/mbaps.c
gateway_libgateway_a_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS) \
	$(JSONC_CFLAGS) $(MOSQUITTO_CFLAGS)
gateway_libgateway_a_CPPFLAGS = $(AM_CPPFLAGS) -DRTUGW_MODULEDIR='"$(rtugwmoduledir)"'

# The web page (GET /): its files compiled in as arrays, generated in the
# build tree from the source tree's files, so a VPATH build works too.
WEB_FILES = $(srcdir)/gateway/web/index.html $(srcdir)/gateway/web/app.js $(srcdir)/gateway/web/style.css
nodist_gateway_libgateway_a_SOURCES = gateway/web_assets.c
gateway/web_assets.c: $(WEB_FILES) $(srcdir)/gateway/web/embed.sh
	@$(MKDIR_P) gateway
	$(AM_V_GEN)$(SHELL) $(srcdir)/gateway/web/embed.sh $@ $(WEB_FILES)
CLEANFILES += gateway/web_assets.c
EXTRA_DIST += gateway/web/index.html gateway/web/app.js gateway/web/style.css gateway/web/embed.sh

# The TLS module (MB-TCP-Security): gateway/tls.c with OpenSSL, a shared
# object that mbaps.c dlopen()s only when [tls] is enabled, so that a daemon
# without TLS never maps libssl and libcrypto (about 1.8 MiB resident).
# Found beside the rtugw binary in the build tree, else in $(pkglibdir).
rtugwmoduledir = $(pkglibdir)
rtugwmodule_PROGRAMS += gateway/rtugw-tls.so
gateway_rtugw_tls_so_SOURCES = gateway/tls.c gateway/internal.h
gateway_rtugw_tls_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden $(EVENT_OPENSSL_CFLAGS) $(OPENSSL_CFLAGS)
gateway_rtugw_tls_so_LDFLAGS = $(AM_LDFLAGS) -shared
gateway_rtugw_tls_so_LDADD = $(EVENT_OPENSSL_LIBS) $(OPENSSL_LIBS)

# End to end through real peers (pymodbus, libmodbus, mbpoll, socat).
TESTS += tests/test_gateway.py
EXTRA_DIST += tests/test_gateway.py
# MQTT end to end: real brokers (mosquitto), a bridge, TLS, paho subscribers.
TESTS += tests/test_mqtt.py tests/test_mqtt_tags.py tests/test_sparkplug.py
EXTRA_DIST += tests/test_mqtt.py tests/test_mqtt_tags.py tests/test_sparkplug.py
