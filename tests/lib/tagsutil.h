/*
 * tests/lib/tagsutil.h -- shared by the tags tests: a cmocka fixture that gives
 * a test an empty tag table in *state and frees it even when the test fails.
 */
#ifndef RTUGW_TESTS_TAGSUTIL_H
#define RTUGW_TESTS_TAGSUTIL_H

/* cmocka_unit_test_setup_teardown(test, tags_fixture_setup, tags_fixture_teardown) */
int tags_fixture_setup(void **state);
int tags_fixture_teardown(void **state);

#endif
