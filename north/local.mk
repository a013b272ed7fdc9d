# The MQTT northbound client (north/north.h): libmosquitto on a libevent
# event_base it is given, json-c for write requests, json/ for every string.
noinst_LIBRARIES += north/libnorth.a
north_libnorth_a_SOURCES = north/north.h north/internal.h north/north.c north/values.c north/writes.c \
	north/client.c north/queue.c north/spool.c north/map.c
north_libnorth_a_CFLAGS = $(AM_CFLAGS) $(MOSQUITTO_CFLAGS) $(JSONC_CFLAGS) $(EVENT_CFLAGS)
