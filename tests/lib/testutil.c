#include "tests/lib/testutil.h"
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

void test_put_crc(uint8_t *a, size_t len)
{
    uint16_t crc = rtu_crc16_reference(a, len - 2);
    a[len - 2] = (uint8_t)crc;
    a[len - 1] = (uint8_t)(crc >> 8);
}

/* A frame that is valid more often than not: the right shape for a random
 * function, then (sometimes) a mutation. */
size_t test_random_frame(uint64_t *s, uint8_t *a)
{
    static const uint8_t fcs[] = { 1, 2, 3, 4, 5, 6, 15, 16, 22, 23, 7, 8, 17, 43, 0, 0x83, 0x90 };
    uint64_t r = test_rand(s);
    uint8_t fc = fcs[r % sizeof fcs];
    size_t len;

    a[0] = (uint8_t)(r >> 8);
    a[1] = fc;
    if (fc == 1 || fc == 2 || fc == 3 || fc == 4 || fc == 23) {
        size_t bc = 1 + (r >> 16) % 250;
        if (fc >= 3 && (r >> 40) % 8)
            bc &= ~(size_t)1;     /* mostly even for registers */
        if (bc == 0)
            bc = 2;
        a[2] = (uint8_t)bc;
        len = 5 + bc;
    } else if (fc == 5 || fc == 6 || fc == 15 || fc == 16) {
        len = 8;
    } else if (fc == 22) {
        len = 10;
    } else if (fc & 0x80) {
        len = 5;
    } else {
        len = 4 + (r >> 16) % 253;
    }
    for (size_t i = (a[1] <= 4 || a[1] == 23) ? 3 : 2; i < len; i++)
        a[i] = (uint8_t)test_rand(s);
    if (fc == 5 && (r >> 48) % 4)
        a[4] = (r >> 50) & 1 ? 0xFF : 0x00, a[5] = 0;
    test_put_crc(a, len);

    switch ((r >> 56) % 8) {
    case 0: /* flip a byte, CRC now (almost surely) wrong */
        a[test_rand(s) % len] ^= (uint8_t)(1 + test_rand(s) % 255);
        break;
    case 1: /* change the length, keep a valid CRC over the new length */
        len = test_rand(s) % 261;
        for (size_t i = 0; i < len; i++)
            a[i] = i < 2 ? a[i] : (uint8_t)test_rand(s);
        if (len >= 4 && (test_rand(s) & 1))
            test_put_crc(a, len);
        break;
    case 2: /* corrupt the byte count, keep the CRC valid */
        if (len > 4) {
            a[2] = (uint8_t)test_rand(s);
            test_put_crc(a, len);
        }
        break;
    default:
        break;
    }
    return len;
}
