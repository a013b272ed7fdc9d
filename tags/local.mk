# tags/: the tag model, CSV loading, the words <-> value codec and the read
# planner. Pure code on libc (and libm); nothing here does I/O but read a CSV.
noinst_LIBRARIES += tags/libtags.a
tags_libtags_a_SOURCES = tags/tags.h tags/internal.h \
	tags/names.c tags/types.c tags/table.c tags/codec.c tags/numbers.c tags/format.c tags/address.c tags/values.c tags/csv.c tags/plan.c tags/demo.c tags/observe.c tags/changes.c
# No fused multiply-add: raw * scale + offset rounds twice on every CPU, as the
# reference (Python's float) does, so decoded values match it to the bit.
tags_libtags_a_CFLAGS = $(AM_CFLAGS) -ffp-contract=off

TAGS_TEST_LIBS = tags/libtags.a parser/libparser.a $(CMOCKA_LIBS) -lm
check_PROGRAMS += tests/unit/test_tags tests/unit/test_tags_plan tests/unit/test_tags_csv
tests_unit_test_tags_csv_SOURCES = tests/unit/test_tags_csv.c tests/lib/tagsutil.h tests/lib/tagsutil.c
tests_unit_test_tags_csv_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_tags_csv_LDADD = $(TAGS_TEST_LIBS)
tests_unit_test_tags_SOURCES = tests/unit/test_tags.c tests/lib/tagsutil.h tests/lib/tagsutil.c
tests_unit_test_tags_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_tags_LDADD = $(TAGS_TEST_LIBS)
tests_unit_test_tags_plan_SOURCES = tests/unit/test_tags_plan.c tests/lib/testutil.h tests/lib/testutil.c \
	tests/lib/tagsutil.h tests/lib/tagsutil.c
tests_unit_test_tags_plan_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_tags_plan_LDADD = $(TAGS_TEST_LIBS)
TESTS += tests/unit/test_tags tests/unit/test_tags_plan tests/unit/test_tags_csv

# The codec against Python's struct: tests/unit/test_tags_codec.py drives the tool.
check_PROGRAMS += tests/unit/tags_codec_tool
tests_unit_tags_codec_tool_SOURCES = tests/unit/tags_codec_tool.c
tests_unit_tags_codec_tool_LDADD = tags/libtags.a -lm
TESTS += tests/unit/test_tags_codec.py tests/unit/test_tags_types.py
EXTRA_DIST += tests/unit/test_tags_codec.py tests/unit/test_tags_types.py
