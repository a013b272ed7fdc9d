/*
 * bench/pty_sim.c -- the simulator (slave 1, 8N1) on a thread of the bench,
 * serving the master side of a new pseudo-terminal pair, for a master (a
 * libmodbus RTU master, or a gateway opening the other side as its serial
 * port): bench gateway's direct arm and its --sim-outside, bench wire's lines.
 */
#include "bench/internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int bench_pty_sim_open(bench_pty_sim_t *line, unsigned baud, bool pace, bool live, const char *who)
{
    char err[DRIVER_ERRLEN];
    driver_sim_config_t sc;

    *line = (bench_pty_sim_t){ .master = -1, .slave_hold = -1 };
    driver_sim_defaults(&sc);
    driver_sim_parse_slaves("1", &sc);
    sc.baud = baud;
    sc.char_bits = 10;   /* 8N1, what the masters use */
    sc.parity = 'N';
    sc.pace = pace;
    sc.live = live;
    int rc = driver_pty_open(&line->master, &line->slave_hold, line->path, sizeof line->path);
    if (rc) {
        fprintf(stderr, "rtugw bench %s: pseudo-terminal: %s\n", who, strerror(-rc));
        return -1;
    }
    if (!(line->sim = driver_sim_new(&sc, err, sizeof err))) {
        fprintf(stderr, "rtugw bench %s: simulator: %s\n", who, err);
        return -1;
    }
    if ((rc = driver_sim_start(line->sim, line->master)) != 0) {
        fprintf(stderr, "rtugw bench %s: simulator thread: %s\n", who, strerror(-rc));
        driver_sim_free(line->sim);
        line->sim = NULL;
        return -1;
    }
    return 0;
}

void bench_pty_sim_close(bench_pty_sim_t *line)
{
    if (line->sim) {
        driver_sim_stop(line->sim);
        driver_sim_free(line->sim);
        line->sim = NULL;
    }
    if (line->master >= 0)
        close(line->master);
    if (line->slave_hold >= 0)
        close(line->slave_hold);
    line->master = line->slave_hold = -1;
}
