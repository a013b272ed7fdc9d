/*
 * tests/lib/testutil.h -- helpers shared by the C tests: the golden frames and a
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

/* Writes the CRC-16/MODBUS of a[0..len-2) into its last two bytes. */
void test_put_crc(uint8_t *a, size_t len);
/* A random response frame of any function shape, valid more often than not,
 * sometimes mutated (byte flipped, length changed, byte count corrupted).
 * Lengths 0..260; a must hold 300 bytes. */
size_t test_random_frame(uint64_t *state, uint8_t *a);

#endif
