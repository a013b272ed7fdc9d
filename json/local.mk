# The JSON string encoder (json/json.h): libc only, below every folder that writes JSON.
noinst_LIBRARIES += json/libjson.a
json_libjson_a_SOURCES = json/json.h json/quote.c

check_PROGRAMS += tests/test_json
tests_test_json_SOURCES = tests/test_json.c
tests_test_json_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_json_LDADD = json/libjson.a $(CMOCKA_LIBS)
TESTS += tests/test_json
