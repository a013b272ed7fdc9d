/*
 * bench/bench_tags.c -- `rtugw bench tags`: what the read planner saves on
 * the line, and what decoding a value costs.
 *
 * (1) Reads per poll cycle for a tag file (by default the 2,000-tag,
 * ten-device file tags_demo_csv makes): the planner against one read per tag
 * and against merging only ranges that touch or overlap (the rule of the
 * poller before tags), and for each the line time of one cycle at 9600 baud
 * 8E1: (request + response bytes) x 11 bits / 9600, plus t3.5 after the
 * request and after the response; the slave's own turnaround is not
 * counted. "Line share" weighs each read by its interval: the part of every
 * second the line is busy polling.
 *
 * (2) Nanoseconds per decoded value, per type: a round decodes a batch of
 * values of one type from distinct random words; the types take turns in
 * every round (the order rotates), so machine noise hits them alike;
 * warm-up rounds are dropped; median and p10-p90 over the measured rounds.
 * The last row is the gateway's real path, tags_table_apply over every read
 * of the plan (decode, store, change detection), per tag value.
 *
 * --callgrind counts instructions per value instead: this binary runs itself
 * under valgrind in its --type T --iterations N mode (decode only, nothing
 * timed) at two N per type, and the difference of the totals over the
 * difference of N cancels start-up; the same on a loaded or an idle machine.
 */
#include "bench/bench.h"
#include "bench/options.h"
#include "bench/internal.h"
#include "tags/tags.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 1024

typedef struct tags_options {
    const char *file;
    unsigned long tags, devices, seed, rounds, warmup, iterations;
    const char *only;
    int json, callgrind;
} tags_options_t;

/* ---- (1) reads per cycle ---------------------------------------------------- */

typedef struct line_cost {
    size_t reads;
    unsigned long units;          /* registers + bits read */
    double cycle_ms;              /* every read once */
    double share;                 /* sum of read time / interval */
} line_cost_t;

static bool is_bits(tags_area_t area)
{
    return area == TAGS_AREA_COIL || area == TAGS_AREA_DISCRETE;
}

/* One read at 9600 baud, 11 bits a character, t3.5 after each frame. */
static double read_ms(tags_area_t area, unsigned count)
{
    const double char_ms = 11.0 * 1000.0 / 9600.0;
    unsigned response = 5 + (is_bits(area) ? (count + 7) / 8 : 2 * count);
    return (8 + response) * char_ms + 2 * 3.5 * char_ms;
}

static void add_read(line_cost_t *c, tags_area_t area, unsigned count, unsigned interval_ms)
{
    double ms = read_ms(area, count);
    c->reads++;
    c->units += count;
    c->cycle_ms += ms;
    c->share += ms / interval_ms;
}

static int by_key(const void *a, const void *b, void *ctx)
{
    const tags_table_t *t = ctx;
    const tags_tag_t *x = tags_table_tag(t, *(const unsigned *)a), *y = tags_table_tag(t, *(const unsigned *)b);
    unsigned kx[4] = { x->device, x->area, x->interval_ms, x->address };
    unsigned ky[4] = { y->device, y->area, y->interval_ms, y->address };
    for (int i = 0; i < 4; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

/* The poller's rule before tags: sorted, merged while ranges touch or
 * overlap and the merged range fits one request. */
static int touching_only(const tags_table_t *t, line_cost_t *c)
{
    size_t n = tags_table_count(t);
    unsigned *order = malloc((n + 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = (unsigned)i;
    qsort_r(order, n, sizeof *order, by_key, (void *)t);
    const tags_tag_t *head = NULL;
    unsigned start = 0, end = 0;
    for (size_t i = 0; i <= n; i++) {
        const tags_tag_t *g = i < n ? tags_table_tag(t, order[i]) : NULL;
        unsigned limit = g && is_bits(g->area) ? 2000 : 125, g_end = g ? g->address + g->count : 0;
        if (g && head && g->device == head->device && g->area == head->area &&
            g->interval_ms == head->interval_ms && g->address <= end &&
            (g_end > end ? g_end : end) - start <= limit) {
            end = g_end > end ? g_end : end;
            continue;
        }
        if (head)
            add_read(c, head->area, end - start, head->interval_ms);
        head = g;
        start = g ? g->address : 0;
        end = g_end;
    }
    free(order);
    return 0;
}

static void print_cost(const tags_options_t *opt, const char *name, const line_cost_t *c,
                       const line_cost_t *planner, bool last)
{
    if (opt->json)
        printf("    {\"method\": \"%s\", \"reads\": %zu, \"units_read\": %lu, \"cycle_ms\": %.1f, "
               "\"line_share\": %.4f, \"reads_vs_planner\": %.2f}%s\n", name, c->reads, c->units,
               c->cycle_ms, c->share, (double)c->reads / (double)planner->reads, last ? "" : ",");
    else
        printf("| %s | %zu | %lu | %.1f | %.1f %% | %.2f |\n", name, c->reads, c->units, c->cycle_ms,
               100 * c->share, (double)c->reads / (double)planner->reads);
}

static int report_reads(const tags_options_t *opt, const tags_table_t *t, const tags_plan_t *plan)
{
    line_cost_t planner = { 0 }, per_tag = { 0 }, touching = { 0 };
    for (size_t r = 0; r < tags_plan_read_count(plan); r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        add_read(&planner, read->area, read->count, read->interval_ms);
    }
    for (size_t i = 0; i < tags_table_count(t); i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        add_read(&per_tag, g->area, g->count, g->interval_ms);
    }
    if (touching_only(t, &touching) < 0)
        return -1;
    if (opt->json) {
        printf("  \"tags\": %zu, \"devices\": %zu,\n  \"reads\": [\n", tags_table_count(t),
               tags_table_device_count(t));
    } else {
        printf("%zu tags on %zu devices; one poll cycle (every read once) at 9600 baud 8E1:\n\n",
               tags_table_count(t), tags_table_device_count(t));
        printf("| method | reads | registers+bits read | line ms per cycle | line share | reads / planner's |\n"
               "|---|---:|---:|---:|---:|---:|\n");
    }
    print_cost(opt, "planner", &planner, &planner, false);
    print_cost(opt, "touching_only", &touching, &planner, false);
    print_cost(opt, "one_per_tag", &per_tag, &planner, true);
    printf(opt->json ? "  ],\n" : "\n");
    return 0;
}

/* ---- (2) decode cost per value ------------------------------------------------- */

typedef struct bench_type {
    const char *label;
    tags_tag_t tag;
    uint16_t *words;              /* BATCH values, tag.count words each */
} bench_type_t;

static const struct {
    const char *label, *type;
    tags_order_t order;
    double scale;
} type_specs[] = {
    { "bool (bit of a register)", "bool", TAGS_ORDER_ABCD, 1 },
    { "int16 x0.1", "int16", TAGS_ORDER_ABCD, 0.1 },
    { "uint16", "uint16", TAGS_ORDER_ABCD, 1 },
    { "int32 CDAB", "int32", TAGS_ORDER_CDAB, 1 },
    { "uint32 x0.1", "uint32", TAGS_ORDER_ABCD, 0.1 },
    { "int64", "int64", TAGS_ORDER_ABCD, 1 },
    { "uint64 DCBA", "uint64", TAGS_ORDER_DCBA, 1 },
    { "float32 CDAB", "float32", TAGS_ORDER_CDAB, 1 },
    { "float64", "float64", TAGS_ORDER_ABCD, 1 },
    { "string:8", "string:8", TAGS_ORDER_ABCD, 1 },
    { "raw:4", "raw:4", TAGS_ORDER_ABCD, 1 },
};
#define TYPE_COUNT (sizeof type_specs / sizeof type_specs[0])

static int make_types(bench_type_t *types, uint64_t seed)
{
    for (size_t k = 0; k < TYPE_COUNT; k++) {
        bench_type_t *b = &types[k];
        unsigned count;
        tags_tag_t *g = &b->tag;
        *g = (tags_tag_t){ .area = TAGS_AREA_HOLDING, .order = type_specs[k].order,
                           .scale = type_specs[k].scale, .interval_ms = 1000 };
        if (tags_parse_type(type_specs[k].type, &g->type, &count, NULL, 0) < 0)
            return -1;
        g->count = (uint16_t)count;
        g->in_register = g->type == TAGS_BOOL;
        g->bit = 5;
        b->label = type_specs[k].label;
        b->words = malloc((size_t)BATCH * count * sizeof *b->words);
        if (!b->words)
            return -1;
        for (size_t i = 0; i < (size_t)BATCH * count; i++)
            b->words[i] = (uint16_t)bench_xorshift(&seed);
    }
    return 0;
}

/* Decodes n values of one type; returns a value that depends on each. */
static uint64_t decode_batch(const bench_type_t *b, unsigned long n)
{
    tags_value_t v;
    uint64_t sink = 0;
    for (unsigned long i = 0; i < n; i++) {
        tags_decode(&b->tag, b->words + (i % BATCH) * b->tag.count, &v);
        sink += v.raw.u + (uint64_t)v.eng + (v.words ? v.words[0] : 0);
    }
    return sink;
}

/* Every read of the plan applied once with random words; returns tag values. */
static size_t apply_plan(tags_table_t *t, const tags_plan_t *plan, const uint16_t *words,
                         const uint8_t *bits, int64_t now)
{
    size_t values = 0;
    for (size_t r = 0; r < tags_plan_read_count(plan); r++) {
        const tags_read_t *read = tags_plan_read(plan, r);
        if (is_bits(read->area))
            tags_table_apply_bits(t, plan, r, bits, read->count, now);
        else
            tags_table_apply(t, plan, r, words, read->count, now);
        values += read->members;
    }
    return values;
}

static void print_spread(const tags_options_t *opt, const char *label, double *samples, size_t n, bool last)
{
    bench_spread_t s;
    bench_spread(samples, n, &s);
    if (opt->json)
        printf("    {\"type\": \"%s\", \"ns_per_value\": {\"median\": %.2f, \"p10\": %.2f, \"p90\": %.2f, "
               "\"rounds\": %zu}}%s\n", label, s.median, s.p10, s.p90, s.n, last ? "" : ",");
    else
        printf("| %s | %.2f | %.2f - %.2f |\n", label, s.median, s.p10, s.p90);
}

static int report_decode(const tags_options_t *opt, tags_table_t *t, const tags_plan_t *plan)
{
    static bench_type_t types[TYPE_COUNT];
    static uint16_t words[TAGS_MAX_REGISTERS];
    static uint8_t bits[250];
    uint64_t seed = opt->seed ^ 0x5DEECE66Dull, sink = 0;
    size_t rounds = opt->rounds;
    double *samples = calloc((TYPE_COUNT + 1) * rounds, sizeof *samples);
    if (!samples || make_types(types, seed) < 0)
        return -1;
    for (size_t i = 0; i < TAGS_MAX_REGISTERS; i++)
        words[i] = (uint16_t)bench_xorshift(&seed);
    for (size_t i = 0; i < sizeof bits; i++)
        bits[i] = (uint8_t)bench_xorshift(&seed);

    for (size_t round = 0; round < opt->warmup + rounds; round++) {
        for (size_t j = 0; j <= TYPE_COUNT; j++) {
            size_t k = (j + round) % (TYPE_COUNT + 1);
            uint64_t t0 = bench_now_ns();
            size_t values = BATCH;
            if (k < TYPE_COUNT)
                sink += decode_batch(&types[k], BATCH);
            else
                values = apply_plan(t, plan, words, bits, (int64_t)round);
            double ns = (double)(bench_now_ns() - t0) / (double)values;
            if (round >= opt->warmup)
                samples[k * rounds + round - opt->warmup] = ns;
        }
        words[round % TAGS_MAX_REGISTERS] ^= 0x5555;   /* values change between rounds */
    }
    if (opt->json)
        printf("  \"decode\": [\n");
    else
        printf("Decoding, ns per value (batches of %u, %zu rounds after %lu warm-up):\n\n"
               "| type | median | p10 - p90 |\n|---|---:|---:|\n", BATCH, rounds, opt->warmup);
    for (size_t k = 0; k < TYPE_COUNT; k++)
        print_spread(opt, types[k].label, samples + k * rounds, rounds, false);
    print_spread(opt, "tags_table_apply, the plan's reads", samples + TYPE_COUNT * rounds, rounds, true);
    printf(opt->json ? "  ],\n  \"sink\": %llu\n" : "\n(sink %llu)\n", (unsigned long long)(sink & 0xFF));
    for (size_t k = 0; k < TYPE_COUNT; k++)
        free(types[k].words);
    free(samples);
    return 0;
}

/* --type T --iterations N: decode only, for callgrind. */
static int run_only(const tags_options_t *opt)
{
    static bench_type_t types[TYPE_COUNT];
    if (make_types(types, opt->seed) < 0)
        return 1;
    for (size_t k = 0; k < TYPE_COUNT; k++)
        if (strcmp(type_specs[k].type, opt->only) == 0) {
            printf("%llu\n", (unsigned long long)(decode_batch(&types[k], opt->iterations) & 1));
            return 0;
        }
    fprintf(stderr, "rtugw bench tags: no type '%s' (bool, int16, ..., string:8, raw:4)\n", opt->only);
    return 2;
}

/* --callgrind: instructions per value, per type. */
static int run_callgrind(const tags_options_t *opt)
{
    const unsigned long small = 1000, large = 101000;
    char self[PATH_MAX], args[128];
    if (!realpath("/proc/self/exe", self))
        return 1;
    printf(opt->json ? "{\"callgrind\": [" : "| type | instructions per value |\n|---|---:|\n");
    for (size_t k = 0; k < TYPE_COUNT; k++) {
        long long n[2];
        for (int i = 0; i < 2; i++) {
            snprintf(args, sizeof args, "tags --type %s --iterations %lu", type_specs[k].type,
                     i ? large : small);
            n[i] = bench_callgrind_collected(self, args);
        }
        if (n[0] < 0 || n[1] < 0) {
            fprintf(stderr, "rtugw bench tags --callgrind: the valgrind run failed for %s "
                    "(apt-get install valgrind)\n", type_specs[k].type);
            return 1;
        }
        double per = (double)(n[1] - n[0]) / (double)(large - small);
        if (opt->json)
            printf("%s{\"type\": \"%s\", \"instructions_per_value\": %.1f}", k ? ", " : "",
                   type_specs[k].label, per);
        else
            printf("| %s | %.1f |\n", type_specs[k].label, per);
        fflush(stdout);
    }
    printf(opt->json ? "]}\n" : "");
    return 0;
}

/* ---- options and the table -------------------------------------------------- */

static int load(const tags_options_t *opt, tags_table_t **out)
{
    tags_errors_t errs;
    tags_table_t *t = tags_table_new(100000);
    int rc;
    if (!t)
        return -1;
    if (opt->file) {
        rc = tags_load_csv(t, opt->file, NULL, 0, &errs);
    } else {
        size_t cap = 400 * opt->tags + 4096;
        char *text = malloc(cap);
        rc = text ? tags_demo_csv(text, cap, (unsigned)opt->tags, (unsigned)opt->devices, opt->seed) : -1;
        if (rc >= 0) {
            rc = tags_load_csv_string(t, text, "<demo>", NULL, 0, &errs);
        } else {
            snprintf(errs.text[0], sizeof errs.text[0], "<demo>: cannot make %lu tags on %lu devices",
                     opt->tags, opt->devices);
            errs.count = 1;
        }
        free(text);
    }
    if (rc < 0) {
        for (unsigned i = 0; i < errs.count; i++)
            fprintf(stderr, "rtugw bench tags: %s\n", errs.text[i]);
        tags_table_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw bench tags [--file CSV | --tags N --devices N] [--seed N] [--rounds N]\n"
            "                        [--warmup N] [--json] [--callgrind] [--type T --iterations N]\n"
            "\n"
            "Reads per poll cycle and line time at 9600 baud 8E1: the planner against one read\n"
            "per tag and against merging only touching ranges; then ns per decoded value per type.\n"
            "  --file CSV     a tag file (default: the generated demo file)\n"
            "  --tags N       demo tags (default 2000), --devices N (default 10), --seed N (1)\n"
            "  --rounds N     measured rounds (default 41), --warmup N (default 5)\n"
            "  --callgrind    instructions per decoded value under valgrind, per type\n"
            "  --type T       only decode T (int16, float32, string:8, ...) --iterations N times,\n"
            "                 nothing timed (what --callgrind runs)\n"
            "  --json         JSON instead of Markdown\n");
}

static int parse_options(int argc, char **argv, tags_options_t *opt)
{
    const bench_opt_t opts[] = {
        BENCH_TEXT("file", &opt->file),
        BENCH_UINT("tags", &opt->tags, 1, 100000000),
        BENCH_UINT("devices", &opt->devices, 1, 100000000),
        BENCH_UINT("seed", &opt->seed, 0, 100000000),
        BENCH_UINT("rounds", &opt->rounds, 1, 100000000),
        BENCH_UINT("warmup", &opt->warmup, 0, 100000000),
        BENCH_TEXT("type", &opt->only),
        BENCH_UINT("iterations", &opt->iterations, 1, 100000000),
        BENCH_FLAG("json", &opt->json),
        BENCH_FLAG("callgrind", &opt->callgrind),
        BENCH_OPT_END,
    };
    return bench_options(argc, argv, "tags", opts, usage, NULL);
}

int bench_tags_main(int argc, char **argv)
{
    tags_options_t opt = { .tags = 2000, .devices = 10, .seed = 1, .rounds = 41, .warmup = 5,
                           .iterations = 1000 };
    int rc = parse_options(argc, argv, &opt);
    if (rc >= 0)
        return rc;
    if (opt.only)
        return run_only(&opt);
    if (opt.callgrind)
        return run_callgrind(&opt);

    tags_table_t *t;
    tags_planner_t *pl = tags_planner_new(NULL);
    tags_plan_t *plan = NULL;
    char msg[256];
    if (!pl || load(&opt, &t) < 0) {
        tags_planner_free(pl);
        return 1;
    }
    rc = tags_plan_build(pl, t, NULL, 0, &plan, msg, sizeof msg);
    if (rc < 0)
        fprintf(stderr, "rtugw bench tags: %s\n", msg);
    if (rc == 0 && opt.json)
        printf("{\n  \"source\": \"%s\",\n", opt.file ? opt.file : "demo");
    if (rc == 0)
        rc = report_reads(&opt, t, plan);
    if (rc == 0)
        rc = report_decode(&opt, t, plan);
    if (rc == 0 && opt.json)
        printf("}\n");
    tags_plan_free(plan);
    tags_planner_free(pl);
    tags_table_free(t);
    return rc == 0 ? 0 : 1;
}
