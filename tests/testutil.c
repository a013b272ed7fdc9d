#include "tests/testutil.h"
#include "parser/rtu.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

golden_frame_t *golden_load(size_t *count)
{
    const char *dir = getenv("RTUGW_TESTDATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/golden.jsonl", dir ? dir : "tests/data");
    FILE *f = fopen(path, "r");
    if (!f) {
        fail_msg("cannot open %s (set RTUGW_TESTDATA)", path);
        return NULL;
    }
    size_t cap = 512, n = 0;
    golden_frame_t *frames = calloc(cap, sizeof *frames);
    assert_non_null(frames);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        if (n == cap) {
            cap *= 2;
            frames = realloc(frames, cap * sizeof *frames);
            assert_non_null(frames);
        }
        golden_frame_t *g = &frames[n];
        char *hex = strstr(line, "\"hex\": \"");
        assert_non_null(hex);
        hex += strlen("\"hex\": \"");
        char *end = strchr(hex, '"');
        assert_non_null(end);
        *end = 0;
        int len = rtu_hex_parse(hex, g->adu, sizeof g->adu, NULL);
        *end = '"';
        assert_true(len >= 0);
        g->len = (size_t)len;
        g->ok = strstr(end, "\"ok\": true") != NULL;
        snprintf(g->line, sizeof g->line, "%s", line);
        n++;
    }
    fclose(f);
    assert_true(n > 100);
    *count = n;
    return frames;
}

uint64_t test_seed(const char *what)
{
    const char *env = getenv("RTUGW_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    if (seed == 0)
        seed = 1;
    fprintf(stderr, "%s: seed %llu (replay with RTUGW_SEED=%llu)\n", what,
            (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

uint64_t test_rand(uint64_t *s)
{
    /* splitmix64: every seed gives a full-period, well-mixed stream */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
