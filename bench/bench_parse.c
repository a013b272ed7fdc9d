/*
 * bench/bench_parse.c -- `rtugw bench parse`: nanoseconds per response
 * decode for each form at the three reference tiers (7, 21, 255 bytes).
 *
 * Method: a round decodes a batch of frames (16 distinct frames cycled, so
 * the branch predictor cannot learn one) with one form and is timed as a
 * whole; the forms take turns inside every round, so machine noise hits
 * them alike. Warm-up rounds are dropped. Reported: median and p10-p90 of
 * ns per frame over the measured rounds, plus the per-round paired ratio
 * libmodbus_style / native at each size.
 *
 * --callgrind re-runs this binary under valgrind for every form and size at
 * two iteration counts and reports the difference per frame, which cancels
 * start-up and is the same on a loaded or an idle machine.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"
#include "parser/rtu.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DISTINCT_FRAMES 16

typedef struct parse_form {
    const char *name;
    rtu_decode_fn decode;
} parse_form_t;

static const parse_form_t forms[] = {
    { "reference", rtu_decode_reference },
    { "fallback", rtu_decode_fallback },
    { "native", rtu_decode_native },
    { "libmodbus_style", rtu_decode_bytetable },
};
#define FORM_COUNT (sizeof forms / sizeof forms[0])

static const unsigned tier_registers[] = { 1, 8, 125 };
#define TIER_COUNT (sizeof tier_registers / sizeof tier_registers[0])

typedef struct frame_set {
    uint8_t adu[DISTINCT_FRAMES][RTU_MAX_ADU];
    size_t len;
} frame_set_t;

typedef struct parse_options {
    unsigned rounds;
    unsigned warmup;
    unsigned frames;
    int json;
    int callgrind;
    const char *only;        /* internal: one form, for callgrind */
    unsigned only_bytes;
    unsigned long iterations;
} parse_options_t;

/* Read-holding-registers responses of `registers` registers, random data. */
static void make_frames(frame_set_t *set, unsigned registers, uint64_t seed)
{
    for (unsigned f = 0; f < DISTINCT_FRAMES; f++)
        set->len = bench_register_frame(set->adu[f], 1 + f, registers, &seed);
}

static const parse_form_t *find_form(const char *name)
{
    for (size_t i = 0; i < FORM_COUNT; i++)
        if (strcmp(forms[i].name, name) == 0)
            return &forms[i];
    return NULL;
}

/* Decodes n frames; returns a value that depends on every decode, so the
 * compiler cannot drop any of them. */
static unsigned run_batch(const parse_form_t *form, const frame_set_t *set, unsigned long n)
{
    rtu_envelope_t env;
    unsigned sink = 0;

    for (unsigned long i = 0; i < n; i++) {
        form->decode(set->adu[i % DISTINCT_FRAMES], set->len, &env);
        sink += env.status + env.data.regs[0];
    }
    return sink;
}

static int check_forms_agree(const frame_set_t *set)
{
    rtu_envelope_t want, got;

    for (unsigned f = 0; f < DISTINCT_FRAMES; f++) {
        rtu_decode_reference(set->adu[f], set->len, &want);
        if (want.status != RTU_OK)
            return -1;
        for (size_t i = 0; i < FORM_COUNT; i++) {
            forms[i].decode(set->adu[f], set->len, &got);
            if (memcmp(&want, &got, sizeof want) != 0) {
                fprintf(stderr, "bench parse: form %s disagrees with reference at %zu bytes\n",
                        forms[i].name, set->len);
                return -1;
            }
        }
    }
    return 0;
}

static int run_only(const parse_options_t *opt)
{
    const parse_form_t *form = find_form(opt->only);
    frame_set_t set;
    unsigned registers = (opt->only_bytes - 5) / 2;

    if (!form || opt->only_bytes < 7 || opt->only_bytes > 255 || opt->only_bytes % 2 == 0) {
        fprintf(stderr, "bench parse: --only needs a form and --bytes 7..255 (odd)\n");
        return 2;
    }
    make_frames(&set, registers, 42);
    unsigned sink = run_batch(form, &set, opt->iterations);
    printf("%u\n", sink & 1);
    return 0;
}

/* Total instructions valgrind reports for one child run, or -1. */
static long long callgrind_count(const char *self, const char *form, unsigned bytes,
                                 unsigned long iterations)
{
    char args[160];
    snprintf(args, sizeof args, "parse --only %s --bytes %u --iterations %lu", form, bytes,
             iterations);
    return bench_callgrind_collected(self, args);
}

static int run_callgrind(const parse_options_t *opt)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const unsigned long small = 1000, large = 11000;

    if (n <= 0)
        return 1;
    self[n] = 0;
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench parse --callgrind: valgrind not found (apt-get install valgrind)\n");
        return 1;
    }
    if (opt->json)
        printf("{\"callgrind\": [");
    else
        printf("| form | bytes | instructions per frame |\n|---|---:|---:|\n");
    int first = 1;
    for (size_t t = 0; t < TIER_COUNT; t++) {
        unsigned bytes = 5 + 2 * tier_registers[t];
        for (size_t f = 0; f < FORM_COUNT; f++) {
            long long a = callgrind_count(self, forms[f].name, bytes, small);
            long long b = callgrind_count(self, forms[f].name, bytes, large);
            if (a < 0 || b < 0) {
                fprintf(stderr, "bench parse --callgrind: valgrind run failed for %s\n",
                        forms[f].name);
                return 1;
            }
            double per = (double)(b - a) / (double)(large - small);
            if (opt->json)
                printf("%s{\"form\": \"%s\", \"bytes\": %u, \"instructions_per_frame\": %.1f}",
                       first ? "" : ", ", forms[f].name, bytes, per);
            else
                printf("| %s | %u | %.1f |\n", forms[f].name, bytes, per);
            first = 0;
            fflush(stdout);
        }
    }
    if (opt->json)
        printf("]}\n");
    return 0;
}

static int run_timing(const parse_options_t *opt)
{
    static frame_set_t sets[TIER_COUNT];
    size_t total = opt->rounds;
    double *samples = calloc(TIER_COUNT * FORM_COUNT * total, sizeof *samples);
    double *ratios = calloc(TIER_COUNT * total, sizeof *ratios);
    volatile unsigned sink = 0;
    size_t native = 2, bytetable = 3;

    if (!samples || !ratios) {
        free(samples);
        free(ratios);
        return 1;
    }
    for (size_t t = 0; t < TIER_COUNT; t++) {
        make_frames(&sets[t], tier_registers[t], 0x9E3779B97F4A7C15ull + t);
        if (check_forms_agree(&sets[t]) != 0) {
            free(samples);
            free(ratios);
            return 1;
        }
    }
    for (unsigned r = 0; r < opt->warmup + opt->rounds; r++) {
        for (size_t t = 0; t < TIER_COUNT; t++) {
            double ns[FORM_COUNT];
            for (size_t f = 0; f < FORM_COUNT; f++) {
                uint64_t t0 = bench_now_ns();
                sink += run_batch(&forms[f], &sets[t], opt->frames);
                ns[f] = (double)(bench_now_ns() - t0) / opt->frames;
            }
            if (r < opt->warmup)
                continue;
            size_t m = r - opt->warmup;
            for (size_t f = 0; f < FORM_COUNT; f++)
                samples[(t * FORM_COUNT + f) * total + m] = ns[f];
            ratios[t * total + m] = ns[bytetable] / ns[native];
        }
    }

    if (opt->json)
        printf("{\"native_features\": \"%s\", \"rounds\": %u, \"warmup\": %u, "
               "\"frames_per_round\": %u, \"results\": [",
               rtu_native_features(), opt->rounds, opt->warmup, opt->frames);
    else
        printf("# rtugw bench parse\n\nnative features: %s; %u measured rounds (%u warm-up "
               "dropped), %u frames per round per form, forms interleaved in each round.\n\n"
               "| form | bytes | ns/frame median | p10 | p90 |\n|---|---:|---:|---:|---:|\n",
               rtu_native_features(), opt->rounds, opt->warmup, opt->frames);
    for (size_t t = 0; t < TIER_COUNT; t++) {
        for (size_t f = 0; f < FORM_COUNT; f++) {
            bench_spread_t s;
            bench_spread(&samples[(t * FORM_COUNT + f) * total], total, &s);
            if (opt->json)
                printf("%s{\"form\": \"%s\", \"bytes\": %zu, \"ns_median\": %.2f, "
                       "\"ns_p10\": %.2f, \"ns_p90\": %.2f}",
                       t + f ? ", " : "", forms[f].name, sets[t].len, s.median, s.p10, s.p90);
            else
                printf("| %s | %zu | %.2f | %.2f | %.2f |\n", forms[f].name, sets[t].len,
                       s.median, s.p10, s.p90);
        }
    }
    if (opt->json)
        printf("], \"ratios\": [");
    else
        printf("\n| bytes | libmodbus_style / native (paired per round) median | p10 | p90 |\n"
               "|---:|---:|---:|---:|\n");
    for (size_t t = 0; t < TIER_COUNT; t++) {
        bench_spread_t s;
        bench_spread(&ratios[t * total], total, &s);
        if (opt->json)
            printf("%s{\"bytes\": %zu, \"libmodbus_style_over_native_median\": %.2f, "
                   "\"p10\": %.2f, \"p90\": %.2f}",
                   t ? ", " : "", sets[t].len, s.median, s.p10, s.p90);
        else
            printf("| %zu | %.2f | %.2f | %.2f |\n", sets[t].len, s.median, s.p10, s.p90);
    }
    if (opt->json)
        printf("]}\n");
    free(samples);
    free(ratios);
    return sink == 0xFFFFFFFFu; /* never true; keeps sink alive */
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench parse [--json] [--rounds N] [--warmup N] [--frames N] [--callgrind]\n"
            "\n"
            "Nanoseconds per response decode for the forms reference, fallback, native and\n"
            "libmodbus_style at 7, 21 and 255 bytes: median and p10-p90 over measured rounds.\n"
            "  --rounds N     measured rounds (default 41)\n"
            "  --warmup N     warm-up rounds, not reported (default 5)\n"
            "  --frames N     frames per form per round (default 4000)\n"
            "  --callgrind    instructions per frame under valgrind instead of time\n"
            "  --json         JSON instead of Markdown\n");
}

int bench_parse_main(int argc, char **argv)
{
    parse_options_t opt = { .rounds = 41, .warmup = 5, .frames = 4000, .iterations = 1000 };
    const bench_opt_t opts[] = {
        BENCH_FLAG("json", &opt.json),
        BENCH_UINT("rounds", &opt.rounds, 1, 100000000),
        BENCH_UINT("warmup", &opt.warmup, 0, 100000000),
        BENCH_UINT("frames", &opt.frames, 1, 100000000),
        BENCH_FLAG("callgrind", &opt.callgrind),
        BENCH_TEXT("only", &opt.only),
        BENCH_UINT("bytes", &opt.only_bytes, 1, 100000000),
        BENCH_UINT("iterations", &opt.iterations, 1, 100000000),
        BENCH_OPT_END,
    };
    int rc = bench_options(argc, argv, "parse", opts, usage, NULL);
    if (rc >= 0)
        return rc;
    if (opt.only)
        return run_only(&opt);
    if (opt.callgrind)
        return run_callgrind(&opt);
    return run_timing(&opt);
}
