# tags/: the tag model, CSV loading, the words <-> value codec and the read
# planner. Pure code on libc (and libm); nothing here does I/O but read a CSV.
noinst_LIBRARIES += tags/libtags.a
tags_libtags_a_SOURCES = tags/tags.h tags/internal.h \
	tags/names.c tags/types.c tags/table.c tags/codec.c tags/numbers.c tags/format.c tags/address.c tags/values.c tags/csv.c tags/plan.c tags/demo.c tags/observe.c tags/changes.c
# No fused multiply-add: raw * scale + offset rounds twice on every CPU, as the
# reference (Python's float) does, so decoded values match it to the bit.
tags_libtags_a_CFLAGS = $(AM_CFLAGS) -ffp-contract=off

TAGS_TEST_LIBS = tags/libtags.a parser/libparser.a $(CMOCKA_LIBS) -lm
check_PROGRAMS += tests/test_tags tests/test_tags_plan tests/test_tags_csv
tests_test_tags_csv_SOURCES = tests/test_tags_csv.c tests/tagsutil.h tests/tagsutil.c
tests_test_tags_csv_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_tags_csv_LDADD = $(TAGS_TEST_LIBS)
tests_test_tags_SOURCES = tests/test_tags.c tests/tagsutil.h tests/tagsutil.c
tests_test_tags_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_tags_LDADD = $(TAGS_TEST_LIBS)
tests_test_tags_plan_SOURCES = tests/test_tags_plan.c tests/testutil.h tests/testutil.c \
	tests/tagsutil.h tests/tagsutil.c
tests_test_tags_plan_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_tags_plan_LDADD = $(TAGS_TEST_LIBS)
TESTS += tests/test_tags tests/test_tags_plan tests/test_tags_csv

# The codec against Python's struct: tests/test_tags_codec.py drives the tool.
check_PROGRAMS += tests/tags_codec_tool
tests_tags_codec_tool_SOURCES = tests/tags_codec_tool.c
tests_tags_codec_tool_LDADD = tags/libtags.a -lm
TESTS += tests/test_tags_codec.py tests/test_tags_types.py
EXTRA_DIST += tests/test_tags_codec.py tests/test_tags_types.py
