/*
 * cli/scan.h -- `rtugw scan`'s own types, shared by cli/cmd_scan.c (the
 * scan) and cli/scan_print.c (its table, JSON, snippet and hints). Private
 * to cli/.
 */
#ifndef RTUGW_CLI_SCAN_H
#define RTUGW_CLI_SCAN_H

#include "drivers/driver.h"
#include "parser/rtu.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SCAN_MAX_BAUDS 16
#define SCAN_MAX_FORMATS 8
#define SCAN_MAX_FOUND 247
#define SCAN_NOISE_CHARS 8          /* noise allowed before an answer, in characters */
#define SCAN_SLACK_NS 2000000ull    /* per request: the write, poll's ms rounding */

typedef struct scan_format {
    char text[4];          /* "8E1" */
    unsigned data_bits, stop_bits;
    char parity;
} scan_format_t;

typedef struct scan_slave {
    uint8_t id;
    unsigned baud;
    scan_format_t format;
    bool has_device_id;
    char vendor[64], product[64], revision[64];
    bool has_server_id;
    uint8_t server_id[64];
    size_t server_id_len;
    int run;               /* FC 17 run indicator: 1 on, 0 off, -1 not given */
    bool reads[5];         /* [1..4]: FC answered data at address 0 */
    uint64_t noise;        /* bytes skipped before its good answers */
    bool unfinished;       /* --budget ended its identification */
} scan_slave_t;

/* Answers at one id that formed no good frame of that slave. */
typedef struct scan_garbled {
    unsigned count, baud;
    scan_format_t format;  /* where the first came */
} scan_garbled_t;

typedef struct scan_options {
    const char *port;
    unsigned first_id, last_id;
    unsigned bauds[SCAN_MAX_BAUDS];
    size_t n_bauds;
    scan_format_t formats[SCAN_MAX_FORMATS];
    size_t n_formats;
    unsigned turnaround_ms;
    double budget_s;       /* 0: no budget beyond the bound */
    bool json, snippet, identify;
} scan_options_t;

typedef struct scan_run {
    const scan_options_t *o;
    scan_slave_t found[SCAN_MAX_FOUND];
    size_t n_found;
    uint64_t start_ns;
    uint64_t last_progress_ns;
    bool tty, budget_hit;
    char skipped[512];     /* speeds and formats not finished within --budget */
    scan_garbled_t garbled[248];
} scan_run_t;

/* One speed and format open on the port. */
typedef struct scan_line {
    scan_run_t *r;
    driver_t *d;
    rtu_framer_t *fr;
    unsigned baud;
    scan_format_t format;
} scan_line_t;

/* A request's deadlines (from its write) and its whole cost in the bound. */
typedef struct scan_timing {
    uint64_t first_ns, wait_ns, gap_ns, cost_ns;
} scan_timing_t;

/* Seconds since the scan started. */
double scan_elapsed_s(const scan_run_t *r);
/* What the answers said besides the slaves (garbled ids, noise, --budget). */
void scan_print_hints(const scan_run_t *r, FILE *to);
void scan_print_table(const scan_run_t *r);
void scan_print_json(const scan_run_t *r);
/* One [bus] per speed and format found, and a [device] per slave on it. */
void scan_print_snippet(const scan_run_t *r);

#endif
