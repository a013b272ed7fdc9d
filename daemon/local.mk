# The daemon's wiring and life (daemon/daemon.h): start-up, reload, stop.
noinst_LIBRARIES += daemon/libdaemon.a
daemon_libdaemon_a_SOURCES = daemon/daemon.h daemon/internal.h daemon/gw.c daemon/control.c daemon/reload_parts.c daemon/reload_buses.c \
	daemon/cpu_latency.c
daemon_libdaemon_a_CFLAGS = $(GW_CFLAGS)
daemon_libdaemon_a_CPPFLAGS = $(GW_CPPFLAGS)
