/*
 * bench/options.c -- the benches' option parser (bench/options.h).
 */
#include "bench/options.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* More than any bench has; a longer table is a programming error, reported
 * as a usage error rather than an overrun. */
#define MAX_OPTS 24

/* strtoull accepts a sign and wraps "-1" to the largest value: a count is
 * digits only, within the range the table gives and the destination holds. */
static int set_uint(const bench_opt_t *o, const char *value)
{
    unsigned long long hi = o->hi;
    if (o->size == 4 && hi > UINT32_MAX)
        hi = UINT32_MAX;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno || *end || end == value || *value == '-' || *value == '+' || v < o->lo || v > hi)
        return -1;
    if (o->size == 4)
        *(unsigned *)o->dst = (unsigned)v;
    else
        *(unsigned long long *)o->dst = v;
    return 0;
}

static int set_double(const bench_opt_t *o, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (*end || end == value || !(v >= o->dlo && v <= o->dhi))
        return -1;
    *(double *)o->dst = v;
    return 0;
}

/* 0, or -1 after the message. */
static int set_option(const char *kind, const bench_opt_t *o, const char *value)
{
    switch (o->type) {
    case BENCH_OPT_FLAG:
        if (o->size == 1)
            *(bool *)o->dst = true;
        else
            *(int *)o->dst = 1;
        return 0;
    case BENCH_OPT_TEXT:
        *(const char **)o->dst = value;
        return 0;
    case BENCH_OPT_UINT:
        if (set_uint(o, value) == 0)
            return 0;
        fprintf(stderr, "rtugw bench %s: --%s '%s': expected %llu..%llu\n", kind, o->name, value, o->lo,
                o->size == 4 && o->hi > UINT32_MAX ? (unsigned long long)UINT32_MAX : o->hi);
        return -1;
    case BENCH_OPT_DOUBLE:
        if (set_double(o, value) == 0)
            return 0;
        fprintf(stderr, "rtugw bench %s: --%s '%s': expected %g..%g\n", kind, o->name, value, o->dlo, o->dhi);
        return -1;
    case BENCH_OPT_CALL:
        if (o->call(o->dst, value) == 0)
            return 0;
        if (o->expect)
            fprintf(stderr, "rtugw bench %s: --%s '%s': expected %s\n", kind, o->name, value ? value : "",
                    o->expect);
        return -1;
    }
    return -1;
}

int bench_options(int argc, char **argv, const char *kind, const bench_opt_t *opts, void (*usage)(FILE *to),
                  int *rest)
{
    struct option longopts[MAX_OPTS + 2];
    size_t n = 0;

    for (; opts[n].name; n++) {
        if (n == MAX_OPTS) {
            fprintf(stderr, "rtugw bench %s: more than %d options\n", kind, MAX_OPTS);
            return 2;
        }
        int has_arg = opts[n].type == BENCH_OPT_FLAG ? no_argument
                      : opts[n].type == BENCH_OPT_CALL ? opts[n].has_arg : required_argument;
        longopts[n] = (struct option){ opts[n].name, has_arg, NULL, 0 };
    }
    longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
    longopts[n] = (struct option){ NULL, 0, NULL, 0 };

    int c, index;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, &index)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c != 0) {
            usage(stderr);
            return 2;
        }
        if (set_option(kind, &opts[index], optarg) != 0)
            return 2;
    }
    if (rest) {
        *rest = optind;
        return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "rtugw bench %s: unexpected argument '%s'\n", kind, argv[optind]);
        return 2;
    }
    return -1;
}
