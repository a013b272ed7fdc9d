/*
 * bench/internal.h -- shared between bench/'s own files only: the gateway
 * subprocess that bench gateway and bench soak drive (bench_gateway.c), and
 * the callgrind child run that bench parse and bench crossover count
 * instructions with (callgrind.c).
 */
#ifndef RTUGW_BENCH_INTERNAL_H
#define RTUGW_BENCH_INTERNAL_H

#include <modbus/modbus.h>
#include <sys/types.h>

typedef struct bench_gw bench_gw_t;

/* Starts `rtugw run` on a temporary config with free ports; NULL on failure. */
bench_gw_t *bench_gw_start(const char *bus_text, unsigned probe_slave, const char *extra);
int bench_gw_stop(bench_gw_t *gw);
pid_t bench_gw_pid(const bench_gw_t *gw);
unsigned bench_gw_tcp_port(const bench_gw_t *gw);
/* A field of /proc/PID/status in KiB (VmRSS, ...), or -1. */
long bench_gw_status_kib(pid_t pid, const char *field);
int bench_gw_fd_count(pid_t pid);
/* One value from the gateway's /metrics. 0 or -1. */
int bench_gw_metric(const bench_gw_t *gw, const char *name, double *value);
modbus_t *bench_gw_client(const bench_gw_t *gw, int slave);

/* The total instructions callgrind reports for `self bench ARGS` (its output
 * discarded), or -1 when valgrind or the child fails. */
long long bench_callgrind_collected(const char *self, const char *args);

#endif
