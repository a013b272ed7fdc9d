bin_PROGRAMS += rtugw
rtugw_SOURCES = gateway/main.c gateway/commands.h gateway/gateway.h gateway/internal.h \
	gateway/gw.c gateway/io.c gateway/bus.c gateway/tcp.c gateway/poller.c gateway/http.c \
	gateway/metrics.c gateway/cmd_run.c gateway/cmd_decode.c gateway/cmd_bench.c gateway/cmd_check.c gateway/cmd_sim.c gateway/cmd_replay.c
# Order matters for static libraries: users before what they use.
RTUGW_LIBS = bench/libbench.a $(ROUTING_LIB) $(ACTOR_LIB) config/libconfig.a drivers/libdrivers.a parser/libparser.a
rtugw_LDADD = $(RTUGW_LIBS) $(MODBUS_LIBS) $(EVENT_LIBS) $(SERIALPORT_LIBS) $(INIH_LIBS) $(SYSTEMD_LIBS) -lm
rtugw_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS)

# End to end through real peers (pymodbus, libmodbus, mbpoll, socat).
TESTS += tests/test_gateway.py
EXTRA_DIST += tests/test_gateway.py
