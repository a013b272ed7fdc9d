noinst_LIBRARIES += config/libconfig.a
config_libconfig_a_SOURCES = config/config.h config/internal.h config/config.c config/keys.c \
	config/reader.c config/tags.c config/mqtt.c config/demo.c config/security.c config/transports.c \
	config/users.c config/listen.c config/dialin.c config/compare.c config/confine.c \
	config/token.c config/paths.c config/revision.c config/maps.c config/slots.c
config_libconfig_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS)
EXTRA_DIST += config/example.ini config/sunspec.ini config/sunspec.csv

check_PROGRAMS += tests/unit/test_config
tests_unit_test_config_SOURCES = tests/unit/test_config.c tests/unit/test_config_sections.c tests/unit/configtest.h
tests_unit_test_config_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_config_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_config
TESTS += tests/e2e/config/test_check_cli.py
EXTRA_DIST += tests/e2e/config/test_check_cli.py

check_PROGRAMS += tests/unit/test_config_tags
tests_unit_test_config_tags_SOURCES = tests/unit/test_config_tags.c
tests_unit_test_config_tags_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_config_tags_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_config_tags

# config/compare.c: sections compared by value, a section that only moved unchanged.
check_PROGRAMS += tests/unit/test_config_compare
tests_unit_test_config_compare_SOURCES = tests/unit/test_config_compare.c
tests_unit_test_config_compare_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_config_compare_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_config_compare

# config/slots.c: a reload's file in the running buses' slots.
check_PROGRAMS += tests/unit/test_config_slots
tests_unit_test_config_slots_SOURCES = tests/unit/test_config_slots.c
tests_unit_test_config_slots_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_config_slots_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_config_slots

# MB-TCP-Security: [tls] and [role NAME].
check_PROGRAMS += tests/unit/test_config_security
tests_unit_test_config_security_SOURCES = tests/unit/test_config_security.c
tests_unit_test_config_security_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_config_security_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_config_security

