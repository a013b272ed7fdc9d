/*
 * drivers/sim_internal.h -- what the simulator's two halves share, inside
 * drivers/ only: sim.c (configuration, the register model, the answer plan
 * with its faults) and sim_line.c (serving a line: timing, pacing, the
 * request queue, the thread). Nothing outside drivers/ includes this.
 */
#ifndef RTUGW_DRIVERS_SIM_INTERNAL_H
#define RTUGW_DRIVERS_SIM_INTERNAL_H

#include "drivers/driver.h"

#include <modbus.h>
#include <pthread.h>

struct driver_sim {
    driver_sim_config_t cfg;
    modbus_t *ctx;                 /* unconnected; its fd is pipe_w */
    int pipe_r, pipe_w;
    modbus_mapping_t *map[DRIVER_SIM_MAX_SLAVES];
    pthread_mutex_t lock;          /* the model, the generator, the stats */
    uint64_t rng;
    uint64_t start_ns;
    uint64_t tick;                 /* live: the last applied tick */
    driver_sim_stats_t stats;
    int stop_fd;                   /* eventfd: driver_sim_request_stop */
    pthread_t thread;
    bool thread_running;
    int thread_fd;
    int thread_rc;
    driver_capture_writer_t *capture; /* written by the serving thread only */
    uint64_t noise_base;           /* noise counted before this serve call */
};

#endif
