# drivers/ fragment: serial (libserialport / termios), simulator, replay.
noinst_LIBRARIES += drivers/libdrivers.a
drivers_libdrivers_a_SOURCES = \
	drivers/driver.h \
	drivers/sim_internal.h \
	drivers/driver.c drivers/serial.c drivers/sim.c drivers/sim_line.c drivers/sim_driver.c \
	drivers/capture.c drivers/capture_link.c drivers/capture_write.c drivers/replay.c \
	drivers/internal.h drivers/layer.c drivers/tcp.c drivers/ascii.c drivers/mbap.c \
	drivers/resolve.c drivers/udp.c drivers/dialin.c drivers/dialin_hub.h drivers/dialin_hub.c
drivers_libdrivers_a_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(SERIALPORT_CFLAGS)
DRIVERS_LIBS = drivers/libdrivers.a parser/libparser.a $(MODBUS_LIBS) $(SERIALPORT_LIBS)

check_PROGRAMS += tests/unit/test_sim tests/unit/test_sim_fault_timing tests/unit/test_serial tests/unit/test_replay
tests_unit_test_sim_SOURCES = tests/unit/test_sim.c tests/unit/simtest.h tests/unit/simtest.c
tests_unit_test_sim_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(MODBUS_CFLAGS)
tests_unit_test_sim_LDADD = $(DRIVERS_LIBS) $(CMOCKA_LIBS) -lm
tests_unit_test_sim_fault_timing_SOURCES = tests/unit/test_sim_fault_timing.c tests/unit/simtest.h tests/unit/simtest.c
tests_unit_test_sim_fault_timing_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(MODBUS_CFLAGS)
tests_unit_test_sim_fault_timing_LDADD = $(DRIVERS_LIBS) $(CMOCKA_LIBS) -lm
tests_unit_test_serial_SOURCES = tests/unit/test_serial.c
tests_unit_test_serial_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_serial_LDADD = $(DRIVERS_LIBS) $(CMOCKA_LIBS) -lm
tests_unit_test_replay_SOURCES = tests/unit/test_replay.c
tests_unit_test_replay_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_replay_LDADD = $(DRIVERS_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_sim tests/unit/test_sim_fault_timing tests/unit/test_serial tests/unit/test_replay

# TCP client, Modbus ASCII and MBAP layers: ptys and sockets on 127.0.0.1.
check_PROGRAMS += tests/unit/test_transport_drivers
tests_unit_test_transport_drivers_SOURCES = tests/unit/test_transport_drivers.c
tests_unit_test_transport_drivers_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_transport_drivers_LDADD = $(DRIVERS_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_transport_drivers
