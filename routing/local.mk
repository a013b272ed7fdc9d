# routing/ fragment: owned by the router work.
ROUTING_LIB = routing/librouting.a
noinst_LIBRARIES += routing/librouting.a
routing_librouting_a_SOURCES = \
	routing/router.h routing/internal.h \
	routing/router.c routing/config.c routing/clock.c routing/report.c routing/state.c routing/numeric.c routing/handover.c
# No libm in rtugw (docs/footprint.md): sqrt becomes the CPU's instruction once
# it need not set errno, and exp2 and erfc are routing/numeric.c's.
routing_librouting_a_CFLAGS = $(AM_CFLAGS) -fno-math-errno

# Tests: cmocka programs, listed here rather than in tests/local.mk.
ROUTER_TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
ROUTER_TEST_LIBS = routing/librouting.a parser/libparser.a $(CMOCKA_LIBS) -lm
check_PROGRAMS += tests/unit/test_router
tests_unit_test_router_SOURCES = tests/unit/test_router.c tests/unit/test_router_machine.c tests/unit/routertest.h tests/lib/testutil.h tests/lib/testutil.c
tests_unit_test_router_CFLAGS = $(ROUTER_TEST_CFLAGS)
tests_unit_test_router_LDADD = $(ROUTER_TEST_LIBS)
TESTS += tests/unit/test_router
