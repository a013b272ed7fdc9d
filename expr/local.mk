# expr/: computed tags, their expressions run in an embedded Lua 5.4 (a
# sandbox with a step budget and a memory cap). Above tags/, which holds only
# the expression's text and the computed value: tags/ links no Lua.
noinst_LIBRARIES += expr/libexpr.a
expr_libexpr_a_SOURCES = expr/expr.h expr/internal.h expr/scan.c expr/sandbox.c expr/engine.c
expr_libexpr_a_CFLAGS = $(AM_CFLAGS) $(LUA_CFLAGS)

check_PROGRAMS += tests/unit/test_expr
tests_unit_test_expr_SOURCES = tests/unit/test_expr.c
tests_unit_test_expr_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_expr_LDADD = expr/libexpr.a tags/libtags.a parser/libparser.a $(LUA_LIBS) $(CMOCKA_LIBS) -lm
TESTS += tests/unit/test_expr
# End to end: config/sunspec.csv through rtugw sim, hostile expressions while
# Modbus TCP is read, rtugw check's errors.
TESTS += tests/e2e/tags/test_tags_expr.py
EXTRA_DIST += tests/e2e/tags/test_tags_expr.py
