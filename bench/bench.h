/*
 * bench/bench.h -- the benchmarks behind `rtugw bench ...`, and the small
 * statistics every one of them reports with (median and p10-p90 over
 * measured rounds; warm-up rounds never enter the samples). Owns the
 * benchmarks. May call every library below gateway/ (every folder above
 * bench/ in the layout table), and starts the rtugw binary itself for the
 * end-to-end ones; only bench/main.c, the program rtugw-bench, calls it:
 * the daemon links none of it.
 */
#ifndef RTUGW_BENCH_BENCH_H
#define RTUGW_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_spread {
    double median;
    double p10;
    double p25;
    double p75;
    double p90;
    size_t n;
} bench_spread_t;

/* Sorts samples in place and fills out. n may be 0 (all fields 0). */
void bench_spread(double *samples, size_t n, bench_spread_t *out);
/* Ascending, in place. */
void bench_sort(double *samples, size_t n);
/* The q-quantile (0..1) of sorted samples, linear between closest ranks
 * (numpy's default); 0 when n is 0. */
double bench_quantile(const double *sorted, size_t n, double q);
uint64_t bench_now_ns(void);
/* Any clock_gettime clock in ns (CLOCK_THREAD_CPUTIME_ID, ...). */
uint64_t bench_clock_ns(int clock);

/* xorshift64: a fast, seeded, reproducible stream for benchmark inputs. */
uint64_t bench_xorshift(uint64_t *state);
/* A read-holding-registers response from `slave` with `registers` random
 * registers and its CRC into adu; returns its length (5 + 2 * registers). */
size_t bench_register_frame(uint8_t *adu, unsigned slave, unsigned registers, uint64_t *seed);

/* Each returns the process exit code: 0 ok, 1 runtime failure, 2 usage. */
int bench_parse_main(int argc, char **argv);
int bench_actors_main(int argc, char **argv);
int bench_router_main(int argc, char **argv);
int bench_gateway_main(int argc, char **argv);
int bench_soak_main(int argc, char **argv);
int bench_isolation_main(int argc, char **argv);
int bench_crossover_main(int argc, char **argv);
int bench_tags_main(int argc, char **argv);
int bench_transports_main(int argc, char **argv);
int bench_mqtt_main(int argc, char **argv);
int bench_expr_main(int argc, char **argv);
int bench_wire_main(int argc, char **argv);
int bench_hop_main(int argc, char **argv);
int bench_cores_main(int argc, char **argv);

#endif
