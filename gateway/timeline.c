/*
 * gateway/timeline.c -- where one transaction's time goes, stage by stage,
 * for `rtugw bench wire --timeline` (issue 45). Off unless asked: only when
 * the daemon starts with RTUGW_TIMELINE=PATH in its environment does each
 * bus get a ring, in the file PATH.N (N: the bus's index), of the stage
 * stamps of its last TIMELINE_SLOTS answered transactions. Off, it costs a
 * bus one pointer test per answer, and its port two stores per read or
 * write (port_stamps).
 *
 * The stamps (CLOCK_MONOTONIC, gw_now_ns, the clock every process on the
 * machine shares, so a bench can set its clients' own send and receive times
 * beside them):
 *   0 accepted  -- the front end read and parsed the request (t_accept_ns)
 *   1 line      -- the bus actor took it (t_line_ns): after hop 1
 *   2 written   -- the port wrote its frame to the driver (its last write)
 *   3 first     -- the first read after that write that brought bytes
 *   4 last      -- the last such read before the answer left the line
 *   5 queued    -- the answer handed to its origin (the line's answered op)
 *
 * The file: a header { "RTUGWTL1", uint32 slots, uint32 stamps (6) }, then
 * `slots` entries of { uint64 seq, uint64 t[6], uint64 seq_end }: entry
 * k % slots holds transaction k (k from 1). One writer per bus (its actor
 * is one thread at a time), so no slot is contended; a reader that finds
 * seq != seq_end has caught an entry being rewritten and skips it (the
 * writer sets seq_end to 0 first, then the stamps, then both to k, with
 * release order). Shared memory (a mapped file): a store per stamp, no
 * syscall on the hot path.
 */
#include "gateway/wiring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TIMELINE_SLOTS 4096u

typedef struct tl_entry {
    _Atomic uint64_t seq;
    uint64_t t[TIMELINE_STAMPS];
    _Atomic uint64_t seq_end;
} tl_entry_t;

typedef struct tl_file {
    char magic[8];
    uint32_t slots, stamps;
    tl_entry_t e[];
} tl_file_t;

struct gw_timeline {
    tl_file_t *f;
    size_t size;
    uint64_t next;
};

gw_timeline_t *timeline_open(gw_t *gw, unsigned bus_index)
{
    const char *base = getenv("RTUGW_TIMELINE");
    if (!base || !*base)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s.%u", base, bus_index);
    gw_timeline_t *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    tl->size = sizeof(tl_file_t) + TIMELINE_SLOTS * sizeof(tl_entry_t);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)tl->size) != 0 ||
        (tl->f = mmap(NULL, tl->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        gw_log(gw, CONFIG_LOG_WARN, "RTUGW_TIMELINE: cannot keep bus %u's timeline in %s: %s", bus_index, path,
               strerror(errno));
        if (fd >= 0)
            close(fd);
        free(tl);
        return NULL;
    }
    close(fd);
    memcpy(tl->f->magic, "RTUGWTL1", 8);
    tl->f->slots = TIMELINE_SLOTS;
    tl->f->stamps = TIMELINE_STAMPS;
    return tl;
}

void timeline_record(gw_timeline_t *tl, const uint64_t t[TIMELINE_STAMPS])
{
    uint64_t k = ++tl->next;
    tl_entry_t *e = &tl->f->e[k % TIMELINE_SLOTS];
    atomic_store_explicit(&e->seq_end, 0, memory_order_relaxed);
    atomic_store_explicit(&e->seq, 0, memory_order_release);
    memcpy(e->t, t, sizeof e->t);
    atomic_store_explicit(&e->seq_end, k, memory_order_release);
    atomic_store_explicit(&e->seq, k, memory_order_release);
}

void timeline_close(gw_timeline_t *tl)
{
    if (!tl)
        return;
    munmap(tl->f, tl->size);
    free(tl);
}
