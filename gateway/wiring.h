/*
 * gateway/wiring.h -- gw_t's fields: the daemon's wiring, which gateway/
 * fills and runs and daemon/ (gw.c, control.c) starts, reloads and stops.
 * Only gateway/ and daemon/ include it (the Layout table's rule,
 * scripts/check-includes): front/ and web/ see gw_t as an opaque handle and
 * get what they use through gateway.h's accessors (handles.c) or at their
 * creation, so that a field's writer is always one of these two folders.
 */
#ifndef RTUGW_GATEWAY_WIRING_H
#define RTUGW_GATEWAY_WIRING_H

#include "gateway/gateway.h"

struct gw {
    config_t *cfg;
    gw_options_t opt;
    /* daemon/control.c's reload (what SIGHUP does), for the API after it
     * wrote the file: web/ cannot call daemon/. On the I/O thread. */
    void (*reload)(gw_t *gw);
    /* daemon/control.c's, called by tag_write.c (I/O thread) when the last
     * tag write in flight has ended: a change queued behind them applies. */
    void (*writes_idle)(gw_t *gw);
    /* web/api.c's write path without HTTP (web_config_put), for MQTT's
     * config/set: gateway/ cannot call web/. Set by the daemon; I/O thread. */
    int (*config_put)(gw_t *gw, const char *if_match, char *text, size_t len, struct evbuffer *b);
    actor_system_t *actors;
    router_t *router;
    driver_dialin_ports_t *dialin_ports;   /* listen:// ports the buses share (runtime.c: before them, freed after) */
    gw_loop_t *loop;
    gw_loop_t *line_loop;       /* the line thread's: ports and bus actors; NULL: they are on loop's */
    gw_bus_t **buses;           /* by slot (config/slots.c), CONFIG_MAX_BUSES + 1 of them */
    unsigned bus_count;         /* slots up to the last that holds a bus */
    bool slot_grace[CONFIG_MAX_BUSES];   /* emptied, not yet free for a new bus (bus_restart.c) */
    gw_poller_t *poller;
    gw_tags_t *tags;          /* the live tag table (tags.c); never NULL once started */
    gw_tag_writes_t *tag_writes; /* tag writes in flight (tag_write.c), for HTTP, MQTT and Sparkplug */
    gw_maps_t *maps;            /* [map NAME] sections (vslave.c); never NULL once started */
    gw_scans_t *scans;          /* scans from the API (scan.c); never NULL once started */
    gw_tcp_t *tcp;
    gw_mbaps_t *mbaps;      /* NULL unless [tls] is enabled */
    gw_tcp_t *rtu_tcp;          /* NULL unless [rtu_tcp] is enabled */
    gw_udp_t *udp;              /* NULL unless [udp] is enabled */
    gw_serial_slave_t **serial_slaves;
    unsigned serial_slave_count;
    gw_http_t *http;
    /* The frame rings of an [http] a reload turned off (http_release_frames):
     * a bus actor may still hold their pointer, so they live until gw_free,
     * and the next server turned on takes them back (daemon/gw.c). */
    gw_frames_t *frames_kept;
    gw_north_t *north;          /* never NULL once started; a session only with [mqtt] */
    gw_report_t *report;        /* the parts /status and /metrics show (report.h), built by daemon/gw.c */
    /* Published by web_start after the buses have started, read by their
     * actors for every frame: NULL (frame_ring = 0) costs them one load. */
    _Atomic(gw_frames_t *) frames;
    gw_cache_t *cache;          /* the poll cache and its lock (cache.c, opaque) */
    struct event *ev_drain;
    struct event *ev_signals[3];
    uint64_t drain_deadline_ns;
    bool draining;
    char restart_needed[512];   /* what the last reload could not apply, by name */
    char reload_queued[64];     /* what it queued behind tag writes in flight ("devices tags"); "": none */
    gw_reload_report_t last_reload;
    uint64_t reloads[GW_RELOAD_RESULTS];   /* I/O thread: reloads by result (/metrics) */
    struct event *ev_queued;    /* the queued change applied: armed when the writes end */
    atomic_int stopping;
    uint64_t started_ns;
    int cpu_latency_fd;         /* daemon/cpu_latency.c's request; -1: none held */
};

/* A bus's actor, for each frame on its line (line/discipline.c, line_log_frame): kept for /frames when
 * the ring is on; inline, as it costs the actor one load when the ring is off. */
static inline void gw_frame_seen(gw_t *gw, unsigned bus, bool tx, const uint8_t *adu, size_t len)
{
    gw_frames_t *f = atomic_load_explicit(&gw->frames, memory_order_acquire);
    if (f)
        frames_record(f, bus, tx, adu, len);
}

#endif
