# actor/ fragment: owned by the actor scheduler work.
ACTOR_LIB = actor/libactor.a
noinst_LIBRARIES += actor/libactor.a
actor_libactor_a_SOURCES = \
	actor/actor.h actor/internal.h actor/mailbox.h actor/runq.h \
	actor/actor.c actor/sched.c actor/pool.c actor/timer.c actor/host.c

# Tests of the scheduler (cmocka), built and run by `make check`.
ACTOR_TEST_LIBS = actor/libactor.a $(CMOCKA_LIBS)
check_PROGRAMS += tests/unit/test_actor_stress tests/unit/test_actor_wakeup tests/unit/test_actor_api
tests_unit_test_actor_stress_SOURCES = tests/unit/test_actor_stress.c
tests_unit_test_actor_stress_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_actor_stress_LDADD = $(ACTOR_TEST_LIBS)
tests_unit_test_actor_wakeup_SOURCES = tests/unit/test_actor_wakeup.c
tests_unit_test_actor_wakeup_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_actor_wakeup_LDADD = $(ACTOR_TEST_LIBS)
tests_unit_test_actor_api_SOURCES = tests/unit/test_actor_api.c tests/unit/test_actor_hosts.c tests/unit/actortest.h
tests_unit_test_actor_api_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_actor_api_LDADD = $(ACTOR_TEST_LIBS)
TESTS += tests/unit/test_actor_stress tests/unit/test_actor_wakeup tests/unit/test_actor_api
