/*
 * tests/fuzz/fuzz.h -- what every libFuzzer harness here shares.
 *
 * A harness is one .c file defining LLVMFuzzerTestOneInput(); on a broken
 * invariant it calls FUZZ_FAIL(), which prints the input as hex (the form
 * `rtugw decode` and the golden file take) and abort()s, so libFuzzer saves
 * the input as a crash artifact. Adding a harness: write
 * tests/fuzz/fuzz_NAME.c, give it a seed corpus in tests/fuzz/corpus/fuzz_NAME/,
 * and add NAME to tests/fuzz/local.mk (FUZZ_HARNESSES and the program lines).
 */
#ifndef RTUGW_TESTS_FUZZ_H
#define RTUGW_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: once, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fuzz_print_hex(const char *label, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%s (%zu bytes): ", label, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%02x", p[i]);
    fputc('\n', stderr);
}

/* Report the frame under test and abort: libFuzzer keeps the input. */
#define FUZZ_FAIL(frame, frame_len, ...)                                       \
    do {                                                                       \
        fprintf(stderr, "%s:%d: invariant broken: ", __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        fuzz_print_hex("frame", (frame), (frame_len));                         \
        abort();                                                               \
    } while (0)

#define FUZZ_CHECK(cond, frame, frame_len, ...)                                \
    do {                                                                       \
        if (!(cond))                                                           \
            FUZZ_FAIL((frame), (frame_len), __VA_ARGS__);                      \
    } while (0)

#endif
