/*
 * tests/testutil.h -- helpers shared by the C tests: the golden frames and a
 * seeded generator that prints its seed, so any failure can be replayed
 * with RTUGW_SEED=... .
 */
#ifndef RTUGW_TESTS_TESTUTIL_H
#define RTUGW_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct golden_frame {
    uint8_t adu[512];
    size_t len;
    int ok;          /* the independent implementation's verdict */
    char line[8192]; /* the whole JSON line, for messages */
} golden_frame_t;

/* Loads $RTUGW_TESTDATA/golden.jsonl (or tests/data/). Fails the test on error. */
golden_frame_t *golden_load(size_t *count);

/* Seed from $RTUGW_SEED or the clock; printed to stderr either way. */
uint64_t test_seed(const char *what);
uint64_t test_rand(uint64_t *state);

#endif
