/*
 * bench/wire_timeline.c -- reads the gateway's timeline ring (the file
 * gateway/timeline.c writes when the daemon runs with RTUGW_TIMELINE=PATH:
 * PATH.0 for the first bus) after the measured rounds, and places each
 * transaction's six stamps between its client's send and receive times
 * (one client, reads back to back: the request whose [send, receive]
 * holds the gateway's accept stamp is its request). All stamps are
 * CLOCK_MONOTONIC, shared by both processes.
 *
 * The file (gateway/timeline.c has the argument): a header { "RTUGWTL1",
 * uint32 slots, uint32 stamps }, then slots x { uint64 seq, uint64
 * t[stamps], uint64 seq_end }; an entry with seq != seq_end, or seq 0, is
 * skipped.
 */
#include "bench/wire.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TL_STAMPS 6

/* The client request whose [sent, received] holds t, or -1 (sent is ascending). */
static long find_request(const wire_client_log_t *log, uint64_t t)
{
    size_t lo = 0, hi = log->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->sent[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || t > log->received[lo - 1])
        return -1;
    return (long)(lo - 1);
}

int wire_timeline_read(const char *path, const wire_client_log_t *log, wire_arm_t *row)
{
    char name[4096];
    snprintf(name, sizeof name, "%s.0", path);
    FILE *f = fopen(name, "rb");
    if (!f) {
        fprintf(stderr, "rtugw bench wire: no timeline at %s: was the gateway built with gateway/timeline.c?\n",
                name);
        return -1;
    }
    char magic[8];
    uint32_t slots = 0, stamps = 0;
    int rc = -1;
    bench_samples_t st[WIRE_STAGES] = { 0 };
    uint64_t e[TL_STAMPS + 2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "RTUGWTL1", 8) != 0 || fread(&slots, 4, 1, f) != 1 ||
        fread(&stamps, 4, 1, f) != 1 || stamps != TL_STAMPS || slots == 0 || slots > (1u << 24)) {
        fprintf(stderr, "rtugw bench wire: %s is not a timeline of %d stamps\n", name, TL_STAMPS);
        goto out;
    }
    for (uint32_t i = 0; i < slots && fread(e, sizeof e, 1, f) == 1; i++) {
        const uint64_t *t = e + 1;
        if (e[0] == 0 || e[0] != e[TL_STAMPS + 1] || !t[0] || !t[2] || !t[3] || !t[4])
            continue;
        long k = find_request(log, t[0]);
        if (k < 0)
            continue;   /* a warm-up round's, or the start-up probe's */
        uint64_t seq[WIRE_STAGES + 1] = { log->sent[k], t[0], t[1], t[2], t[3], t[4], t[5], log->received[k] };
        bool ordered = true;
        for (unsigned s = 0; s < WIRE_STAGES; s++)
            ordered = ordered && seq[s + 1] >= seq[s];
        if (!ordered) {
            fprintf(stderr, "rtugw bench wire: a transaction's stamps are out of order\n");
            goto out;
        }
        for (unsigned s = 0; s < WIRE_STAGES; s++)
            bench_samples_push(&st[s], (double)(seq[s + 1] - seq[s]) / 1000.0);
    }
    row->timeline_n = st[0].n;
    for (unsigned s = 0; s < WIRE_STAGES; s++)
        bench_spread(st[s].v, st[s].n, &row->stage_us[s]);
    if (row->timeline_n == 0)
        fprintf(stderr, "rtugw bench wire: no transaction of the timeline matched a measured request\n");
    rc = row->timeline_n ? 0 : -1;
out:
    for (unsigned s = 0; s < WIRE_STAGES; s++)
        free(st[s].v);
    fclose(f);
    return rc;
}
