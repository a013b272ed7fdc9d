/*
 * bench/crossover_callgrind.c -- `rtugw bench crossover --callgrind`:
 * instructions per frame per form, which a loaded machine cannot blur. Each
 * tier and form runs this binary twice under valgrind's callgrind, in its
 * --only mode (decode and nothing else), at 2000 and 22000 decodes; the
 * difference over 20000 leaves out start-up and set-up.
 */
#include "bench/crossover.h"
#include "bench/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int crossover_run_only(const crossover_options_t *opt)
{
    crossover_frames_t *set = malloc(sizeof *set);
    int form = -1;
    for (int f = 0; f < FORMS; f++)
        if (strcmp(opt->only, crossover_form_names[f]) == 0)
            form = f;
    if (!set || form < 0 || opt->only_bytes < SWEEP_LO || opt->only_bytes > SWEEP_HI) {
        fprintf(stderr, "rtugw bench crossover: --only needs a form and --bytes 5..256\n");
        free(set);
        return 2;
    }
    crossover_make_frames(set, opt->only_bytes, 42);
    router_config_t cfg;
    router_t *r = NULL;
    router_thread_t *t = NULL;
    router_config_default(&cfg);
    cfg.epsilon = opt->epsilon;
    cfg.seed = 1;
    if (router_new(&cfg, &r) != 0 || !(t = router_thread_new(r))) {
        router_free(r);
        free(set);
        return 1;
    }
    unsigned s = 0;
    for (unsigned long done = 0; done < opt->iterations; done += 1000) {
        unsigned long n = opt->iterations - done < 1000 ? opt->iterations - done : 1000;
        s += crossover_run_batch(form, t, set, (unsigned)n);
    }
    printf("%u\n", s & 1);
    router_free(r);
    free(set);
    return 0;
}

static long long callgrind_count(const char *self, const char *form, unsigned bytes,
                                 unsigned long iterations, double eps)
{
    char args[200];
    snprintf(args, sizeof args, "crossover --only %s --bytes %u --iterations %lu --epsilon %g",
             form, bytes, iterations, eps);
    return bench_callgrind_collected(self, args);
}

int crossover_callgrind(const crossover_options_t *opt, crossover_callgrind_t *out)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const unsigned long small = 2000, large = 22000;
    if (n <= 0)
        return -1;
    self[n] = 0;
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "rtugw bench crossover --callgrind: valgrind not found "
                        "(apt-get install valgrind)\n");
        return -1;
    }
    for (unsigned t = 0; t < TIERS; t++) {
        unsigned bytes = crossover_tier_bytes[t];
        out[t].bytes = bytes;
        for (int f = 0; f < FORMS; f++) {
            const char *form = crossover_form_names[f];
            if (!opt->no_progress) {
                fprintf(stderr, "\rrtugw bench crossover: callgrind %s %u bytes   ", form, bytes);
                fflush(stderr);
            }
            long long a = callgrind_count(self, form, bytes, small, opt->epsilon);
            long long b = callgrind_count(self, form, bytes, large, opt->epsilon);
            if (a < 0 || b < 0) {
                fprintf(stderr, "\nrtugw bench crossover --callgrind: valgrind run failed for %s\n",
                        form);
                return -1;
            }
            out[t].per[f] = (double)(b - a) / (double)(large - small);
        }
    }
    if (!opt->no_progress)
        fprintf(stderr, "\n");
    return 0;
}
