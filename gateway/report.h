/*
 * gateway/report.h -- the one reporting interface: what each part of the
 * daemon shows in /status and /metrics, and the table of parts that the
 * daemon builds (daemon/gw.c) and web/status.c and web/metrics.c only
 * iterate. Included by gateway/gateway.h; report.c holds the table.
 *
 * A part supplies up to three functions, each given the part's ctx:
 *   - status_json: its members of the /status object, each written as
 *     ,"key":value (the leading comma included; the handler takes the
 *     first one off);
 *   - status_fold: the numbers those members show, folded into /status's
 *     ETag (report_fold), leaving out what only the clock moves (uptime,
 *     ages); NULL: the bytes of its status_json are folded;
 *   - metrics_text: its series of /metrics, # HELP and # TYPE included.
 * Any may be NULL. /status's members and /metrics' series come in the
 * table's order; a part whose member and series sit at different places
 * of the two (the frame ring) is registered twice, each with one function.
 *
 * Thread and locking, for every part: called on the I/O thread, in the
 * HTTP callback. A part reads relaxed atomics with one writer each, or
 * copies what it shows under its own lock and formats after the lock is
 * released (the cache: cache_snapshot; the tags: their table's lock), so a
 * scrape never holds a lock while it writes text and never stalls a bus.
 * A part reads what may change in a reload (the bus count, the devices,
 * the front ends running) again at each call: nothing is cached here.
 */
#ifndef RTUGW_GATEWAY_REPORT_H
#define RTUGW_GATEWAY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

typedef struct gw_report_part {
    const char *name;   /* for the log and the reader; not shown */
    void (*status_json)(void *ctx, struct evbuffer *b);
    void (*status_fold)(void *ctx, uint64_t *h);
    void (*metrics_text)(void *ctx, struct evbuffer *b);
    void *ctx;
} gw_report_part_t;

/* A JSON string (quotes and escapes) into b: json/'s encoder, which the
 * daemon hands to the table, as gateway/ cannot call json/. */
typedef void (*gw_report_str_fn)(struct evbuffer *b, const char *s);
/* Members a part above gateway/ adds to each device's /status object (the
 * web side's tag counts), after the device's own: d is its index in the
 * running configuration. */
typedef void (*gw_report_device_fn)(void *ctx, unsigned d, struct evbuffer *b);

typedef struct gw_report gw_report_t;

/* The table, parts copied in order; NULL when out of memory. */
gw_report_t *report_new(const gw_report_part_t *parts, unsigned n, gw_report_str_fn str);
void report_free(gw_report_t *r);
void report_set_device_members(gw_report_t *r, gw_report_device_fn fn, void *ctx);
/* The parts in order (*n of them). */
const gw_report_part_t *report_parts(const gw_report_t *r, unsigned *n);
/* For the parts: a JSON string, and the device members, as the table holds them (no-op when unset). */
void report_str(const gw_report_t *r, struct evbuffer *b, const char *s);
void report_device_members(const gw_report_t *r, unsigned d, struct evbuffer *b);
/* The parts' shared shape of a counter block's series: a name, its help,
 * its offset in the block (an atomic_uint_fast64_t), counter or gauge. */
typedef struct report_metric_def {
    const char *name;
    const char *help;
    size_t offset;
    bool gauge;
} report_metric_def_t;
/* # HELP and # TYPE of rtugw_PREFIX_NAME (_total for a counter). */
void report_metric_header(struct evbuffer *b, const char *prefix, const report_metric_def_t *d);
/* A counter of a block; 0 for base NULL (a listener not enabled: its series
 * are there all the same, at 0, as before it runs). */
uint64_t report_field(const void *base, size_t offset);
/* Each of n defs of a block with no labels: its header and its one line. */
void report_metric_block(struct evbuffer *b, const char *prefix, const report_metric_def_t *defs, size_t n,
                         const void *base);

/* One number into an ETag's FNV-1a 64 hash; FNV's offset basis to start it. */
#define REPORT_FOLD_INIT 14695981039346656037u
void report_fold(uint64_t *h, uint64_t v);
void report_fold_bytes(uint64_t *h, const void *p, size_t n);

#endif
