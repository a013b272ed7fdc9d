# The JSON string encoder (json/json.h), below every folder that writes JSON,
# and the parser of requests from outside (json/body.c, json-c).
noinst_LIBRARIES += json/libjson.a
json_libjson_a_SOURCES = json/json.h json/quote.c json/body.c
json_libjson_a_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)

check_PROGRAMS += tests/unit/test_json
tests_unit_test_json_SOURCES = tests/unit/test_json.c
tests_unit_test_json_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_json_LDADD = json/libjson.a $(JSONC_LIBS) $(CMOCKA_LIBS)
TESTS += tests/unit/test_json
