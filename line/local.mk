# The line core: one bus's line discipline, no I/O and no clock of its own
# (line/line.h). The daemon hosts it (gateway/bus.c); tests/line/test_line_core.c
# drives it in simulated time.
noinst_LIBRARIES += line/libline.a
line_libline_a_SOURCES = line/line.h line/state.h line/events.c line/discipline.c line/receive.c line/queue.c \
	line/copies.c line/shapes.c line/foreign.c line/slave.c line/metrics.c
