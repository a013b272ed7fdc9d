/*
 * tests/unit/simtest.h -- helpers shared by the simulator's tests (test_sim.c,
 * test_sim_fault_timing.c): a simulator thread on a fresh pseudo-terminal pair,
 * and raw request/answer bytes on the pair's other end, with arrival times.
 */
#ifndef RTUGW_TESTS_SIMTEST_H
#define RTUGW_TESTS_SIMTEST_H

#include "drivers/driver.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct simtest_fx {
    driver_sim_t *sim;
    int master, slave;
    char path[128];
} simtest_fx_t;

/* A simulator serving cfg on a new pair; the test holds the slave side. An
 * alarm of 30 s catches a hang. Fails the test on error. */
void simtest_start(simtest_fx_t *f, const driver_sim_config_t *cfg);
void simtest_stop(simtest_fx_t *f);

/* Waits up to first_ms for the first byte of an answer, then until the line
 * is quiet for QUIET_MS (generous: the machine may be busy). */
#define QUIET_MS 200
#define ANSWER_MS 3000 /* expecting an answer */
#define NONE_MS 400    /* expecting none */

/* Writes a request on fd and collects what comes back. t_sent is stamped
 * before the write, so times measured from it are safe lower bounds. */
size_t simtest_xfer(int fd, const uint8_t *req, size_t n, uint8_t *rsp, size_t cap, int first_ms,
            uint64_t *t_sent, uint64_t *t_last);

/* What came back chunk by chunk: each read's bytes and arrival time. */
#define SIMTEST_CHUNKS 64
typedef struct simtest_chunks {
    uint8_t bytes[1024];
    size_t len;
    size_t end[SIMTEST_CHUNKS]; /* chunk i is bytes [end[i-1], end[i]) */
    uint64_t t[SIMTEST_CHUNKS]; /* its arrival (CLOCK_MONOTONIC) */
    size_t n;
} simtest_chunks_t;

/* Reads fd until it has been quiet for quiet_ms (or first_ms before the
 * first byte); appends to c. Past SIMTEST_CHUNKS reads, the last chunk
 * takes the rest (its time is then the last read's). */
void simtest_collect_chunks(int fd, simtest_chunks_t *c, int first_ms, int quiet_ms);

/* Plans 200 answers to one read (slave 1, function 3, address 0, quantity
 * qty) with a simulator configured by cfg, no line involved; returns how
 * many `hit` says yes to. For checking that a fault's rate is a rate. */
typedef bool (*simtest_pred_t)(const driver_sim_answer_t *a);
int simtest_plan_hits(const driver_sim_config_t *cfg, uint16_t qty, simtest_pred_t hit);

/* An 8-byte request: slave, function 1..6, address, quantity (or value). */
size_t simtest_make_req(uint8_t slave, uint8_t fc, uint16_t a, uint16_t q, uint8_t *adu);
bool simtest_crc_ok(const uint8_t *p, size_t n);

#endif
