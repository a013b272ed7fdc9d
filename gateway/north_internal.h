/*
 * gateway/north_internal.h -- what gateway/north.c (the MQTT front end: out,
 * life, /metrics) and gateway/north_write.c (its writes in) share: the
 * adapter's state, the one conversion of a tag's value for north, the write
 * hook and the origin its writes' answers come back through. Private to
 * those two files.
 */
#ifndef RTUGW_GATEWAY_NORTH_INTERNAL_H
#define RTUGW_GATEWAY_NORTH_INTERNAL_H

#include "gateway/wiring.h"

#include <stdatomic.h>

#define GWNORTH_TEXT_BYTES 262144  /* the text of one message's values; a batch ends before it runs out */
#define GWNORTH_BATCH 2000         /* values in one message at most (north's scratch) */
struct gw_north {
    line_origin_t origin;           /* first: the write answers' way back */
    gw_t *gw;
    const north_module_t *m;      /* rtugw-mqtt.so, loaded for [mqtt] only (the first time it runs) */
    north_t *north;               /* the session (I/O thread); NULL while [mqtt] is off */
    atomic_bool on;               /* north != NULL, for the poller's and the line's threads; stored
                                     after m is set, so one who reads it true (acquire) sees m */
    unsigned in_hook;             /* inside north's config_set hook: a reload's swap waits (north_session.c) */
    struct event *ev_swap;        /* the swap that waited, from the loop */
    bool swap_on;                 /* its settings: [mqtt] present, and swap_cfg */
    north_config_t swap_cfg;
    north_config_t swap_was;      /* the running ones, put back in gw->cfg when swap_cfg cannot start */
    signed char *device_up;       /* per device: -1 not known yet, 0 down, 1 up */
    unsigned n_devices;           /* device_up's: cfg->device_count, which a reload may raise */
    north_value_t *values;        /* scratch for one group (at most 2000) */
    char (*names)[CONFIG_NAME_MAX + 12];   /* "POLL.N": N up to 10 digits */
    uint32_t *gathered;           /* tag indices of the poll being published */
    size_t cap_gathered;
    uint8_t *pending;             /* per tag: answered in its device's current poll (I/O thread) */
    /* the poller thread's: which reads make one device's poll, and which of
     * them have answered in the current one (rebuilt when the plan changes) */
    const tags_plan_t *cycle_plan;
    size_t cycle_reads;
    unsigned *cycle_first;        /* per read: the first read of its device and interval, or UINT_MAX */
    unsigned *cycle_left;         /* per first read: its poll's reads not answered yet */
    uint8_t *cycle_seen;          /* per read: answered in the current poll */
    char *text;                   /* string and raw values of one read, NUL-separated */
    char (*errors)[16];           /* per value of one read: "exception 02" */
    unsigned polls_generation;    /* +1 per reload that changed the poll groups */
    char revision[17];            /* the configuration's revision north was told */
};

/* north.c: each device's tags and poll-group items announced to the session (a start, a reload). */
int gw_north_define_devices(gw_north_t *gn);
/* north_session.c: a session at cfg (the module loaded the first time). 0, or -1 with err. */
int gw_north_session_start(gw_north_t *gn, const north_config_t *cfg, char *err, size_t errcap);
void gw_north_session_stop(gw_north_t *gn);

/* A tag's value as north publishes it (north.c); its text goes at *text. */
void gw_north_tag_value(const tags_tag_t *g, const tags_value_t *v, north_value_t *out, char *err, size_t errcap,
                      char **text, char *text_end);
/* north's write hook, on the I/O thread (north_write.c). */
void gw_north_on_write(void *ctx, uint32_t token, const north_write_t *w);
extern const line_origin_ops_t gw_north_origin_ops;
/* north's configuration hooks (remote_config), on the I/O thread (north_write.c). */
int gw_north_config_set(void *ctx, const char *if_match, const char *text, size_t len, char **answer);
int gw_north_config_get(void *ctx, char revision[17], char *restart_needed, size_t cap, char **text, size_t *len);

#endif
