/*
 * bench/options.h -- the one option parser of the benches: each bench lists
 * its options in a table (what each sets, and the range it accepts), and
 * bench_options() parses argv against it. So every bench takes --help and
 * -h the same way, rejects a value out of range with the same message
 * (naming the option and the range) and exit code 2, and none carries its
 * own getopt loop.
 */
#ifndef RTUGW_BENCH_OPTIONS_H
#define RTUGW_BENCH_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum bench_opt_type {
    BENCH_OPT_FLAG,     /* no value: sets *dst (bool or int) to 1 */
    BENCH_OPT_UINT,     /* a decimal within [lo, hi] into *dst (unsigned or unsigned long long) */
    BENCH_OPT_DOUBLE,   /* a number within [dlo, dhi] into *dst */
    BENCH_OPT_TEXT,     /* the value itself into *(const char **)dst */
    BENCH_OPT_CALL,     /* call(dst, value): 0, or -1 (then "expected EXPECT") */
} bench_opt_type_t;

typedef struct bench_opt {
    const char *name;   /* --NAME; NULL ends the table */
    bench_opt_type_t type;
    void *dst;
    size_t size;        /* FLAG and UINT: sizeof *dst */
    unsigned long long lo, hi;
    double dlo, dhi;
    int (*call)(void *dst, const char *value);
    int has_arg;        /* CALL: no_argument, required_argument or optional_argument */
    const char *expect; /* CALL: what a value must be, for the message; NULL: call printed it */
} bench_opt_t;

/* The size checks fail to compile for a destination of another width. */
#define BENCH_OPT_SIZE_(p, a, b) (sizeof *(p) + 0 * sizeof(char[sizeof *(p) == (a) || sizeof *(p) == (b) ? 1 : -1]))
#define BENCH_FLAG(n, p) { .name = (n), .type = BENCH_OPT_FLAG, .dst = (p), .size = BENCH_OPT_SIZE_(p, 1, 4) }
#define BENCH_UINT(n, p, l, h) \
    { .name = (n), .type = BENCH_OPT_UINT, .dst = (p), .size = BENCH_OPT_SIZE_(p, 4, 8), .lo = (l), .hi = (h) }
#define BENCH_DOUBLE(n, p, l, h) \
    { .name = (n), .type = BENCH_OPT_DOUBLE, .dst = bench_opt_double(p), .dlo = (l), .dhi = (h) }
#define BENCH_TEXT(n, p) { .name = (n), .type = BENCH_OPT_TEXT, .dst = bench_opt_text(p) }
#define BENCH_CALL(n, fn, p, arg, exp) \
    { .name = (n), .type = BENCH_OPT_CALL, .dst = (p), .call = (fn), .has_arg = (arg), .expect = (exp) }
#define BENCH_OPT_END { .name = NULL }

/* Type checks for the macros above: a wrong pointer is a compile error. */
static inline void *bench_opt_double(double *p) { return p; }
static inline void *bench_opt_text(const char **p) { return p; }

/* Parses argv (argv[0] is the bench's name, `kind`) against opts, plus
 * --help and -h (usage(stdout), exit code 0). Returns -1 when the bench
 * should run, else its exit code: 0 after --help, 2 after a message on
 * stderr (an unknown option: getopt's, then usage(stderr)). Arguments
 * after the options are an error, unless `rest` is given: it then gets the
 * index of the first one (argc when none). */
int bench_options(int argc, char **argv, const char *kind, const bench_opt_t *opts, void (*usage)(FILE *to),
                  int *rest);

#endif
