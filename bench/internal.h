/*
 * bench/internal.h -- shared between bench/'s own files only: the gateway
 * under test that bench gateway, bench soak and bench isolation drive
 * (bench_gw.c), the floor bench gateway reads it against (relay.c), and the
 * callgrind child run that bench parse and bench crossover count
 * instructions with (callgrind.c).
 */
#ifndef RTUGW_BENCH_INTERNAL_H
#define RTUGW_BENCH_INTERNAL_H

#include "drivers/driver.h"

#include <modbus/modbus.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct bench_gw bench_gw_t;

/* A TCP port on 127.0.0.1 that was free a moment ago, or 0. */
unsigned bench_free_port(void);

/* What goes into the gateway's config, and which binary runs it. */
typedef struct bench_gw_spec {
    const char *binary;      /* NULL: the rtugw that ran the bench (bench_gw.c) */
    const char *bus;         /* the keys of [bus line] */
    const char *gateway;     /* more [gateway] keys, or NULL */
    const char *sections;    /* whole sections after [bus line] ([device ...]), or NULL */
    const char *tcp;         /* more [tcp] keys, or NULL; one named here replaces the default of
                              * that name (max_clients, max_pending, idle_timeout_s, unit255) */
    const cpu_set_t *cpus;   /* the CPUs the gateway may run on (set before exec), or NULL: the bench's */
    const char *log_level;   /* NULL: warn */
    const char *keep_log;    /* append the gateway's log here when it stops, or NULL */
    unsigned probe_slave;    /* started = a read of this slave came back */
} bench_gw_spec_t;

/* Whether keys (lines "key = value") set key. */
bool bench_keys_set(const char *keys, const char *key);
/* Starts `BINARY run` on a temporary config with free ports, and returns
 * once the gateway answered; NULL with a message on stderr. */
bench_gw_t *bench_gw_launch(const bench_gw_spec_t *spec);
/* The same for the default rtugw, the bus keys and extra [gateway] keys. */
bench_gw_t *bench_gw_start(const char *bus_text, unsigned probe_slave, const char *extra);
int bench_gw_stop(bench_gw_t *gw);
/* A process already running that serves Modbus TCP on tcp_port (the relay):
 * stopped, measured and connected to like a gateway; no config, no log. */
bench_gw_t *bench_gw_adopt(pid_t pid, unsigned tcp_port);
/* relay.c: the least a Modbus TCP to RTU gateway does, as a child process
 * serving the pty at pty_path; NULL with a message on stderr. */
bench_gw_t *bench_relay_start(const char *pty_path);
pid_t bench_gw_pid(const bench_gw_t *gw);
unsigned bench_gw_tcp_port(const bench_gw_t *gw);
/* A field of /proc/PID/status in KiB (VmRSS, ...), or -1. */
long bench_gw_status_kib(pid_t pid, const char *field);
int bench_gw_fd_count(pid_t pid);
/* One value from the gateway's /metrics. 0 or -1. */
int bench_gw_metric(const bench_gw_t *gw, const char *name, double *value);
modbus_t *bench_gw_client(const bench_gw_t *gw, int slave);

/* What a process has used so far: CPU time (utime + stime, /proc/PID/stat,
 * all threads, exited ones included; clock-tick resolution) and context
 * switches (voluntary + nonvoluntary, summed over /proc/PID/task/TID/status
 * of every thread alive now). Deltas of two samples are what a bench reports. */
typedef struct bench_proc_usage {
    double cpu_s;
    uint64_t ctx_switches;
    uint64_t main_ctx_switches;   /* of the main thread (TID = PID) alone */
    unsigned threads;
} bench_proc_usage_t;
int bench_proc_usage(pid_t pid, bench_proc_usage_t *out);

/* pty_sim.c: the simulator (slave 1, 8N1 at baud; paced: each answer byte
 * at its wire time; live: its input registers change) on a thread of this
 * process, serving the master side of a new pty pair; path is the other
 * side. 0, or -1 with a message naming `rtugw bench WHO` on stderr. */
typedef struct bench_pty_sim {
    driver_sim_t *sim;
    int master, slave_hold;
    char path[128];
} bench_pty_sim_t;
int bench_pty_sim_open(bench_pty_sim_t *line, unsigned baud, bool pace, bool live, const char *who);
void bench_pty_sim_close(bench_pty_sim_t *line);

/* The total instructions callgrind reports for `self bench ARGS` (its output
 * discarded), or -1 when valgrind or the child fails. */
long long bench_callgrind_collected(const char *self, const char *args);

#endif
