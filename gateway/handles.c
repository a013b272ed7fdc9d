/*
 * gateway/handles.c -- gw_t's accessors for the parts above gateway/
 * (gateway.h, "gw_t, as the front ends and the web side see it").
 *
 * Why functions and not the struct: front/ and web/ used to read and could
 * write any field of gw_t, so who changes what (the reload, the cache's
 * arrays) could not be told from the code. Each accessor gives one thing,
 * read-only where the caller only reads it; the fields' writers are the
 * wiring (daemon/) and gateway/ alone, which include wiring.h. They cost a
 * call: none of them is on a per-byte path (the frame ring's is inline in
 * wiring.h for the bus actors).
 */
#include "gateway/wiring.h"

const config_t *gw_config(const gw_t *gw) { return gw->cfg; }
const gw_options_t *gw_options(const gw_t *gw) { return &gw->opt; }
gw_loop_t *gw_loop(const gw_t *gw) { return gw->loop; }
/* Acquire: a serial slave's actor asks from the line thread while a reload
 * adds a bus (bus_restart.c publishes the slot before the count). */
unsigned gw_bus_count(const gw_t *gw) { return __atomic_load_n(&gw->bus_count, __ATOMIC_ACQUIRE); }
gw_bus_t *gw_bus(const gw_t *gw, unsigned i)
{
    return i < gw->bus_count ? __atomic_load_n(&gw->buses[i], __ATOMIC_ACQUIRE) : NULL;
}
bool gw_bus_next(const gw_t *gw, unsigned *i, unsigned *k)
{
    while (*i < config_bus_listed(gw->cfg)) {
        *k = config_bus_at(gw->cfg, (*i)++);
        if (gw_bus(gw, *k))
            return true;
    }
    return false;
}
gw_tags_t *gw_tags(const gw_t *gw) { return gw->tags; }
gw_tag_writes_t *gw_tag_writes(const gw_t *gw) { return gw->tag_writes; }
gw_maps_t *gw_maps(const gw_t *gw) { return gw->maps; }
gw_scans_t *gw_scans(const gw_t *gw) { return gw->scans; }
gw_poller_t *gw_poller(const gw_t *gw) { return gw->poller; }
gw_north_t *gw_north(const gw_t *gw) { return gw->north; }
gw_http_t *gw_http(const gw_t *gw) { return gw->http; }
gw_mbaps_t *gw_mbaps(const gw_t *gw) { return gw->mbaps; }
uint64_t gw_started_ns(const gw_t *gw) { return gw->started_ns; }

gw_fronts_t gw_fronts(const gw_t *gw)
{
    return (gw_fronts_t){ .tcp = gw->tcp, .rtu_tcp = gw->rtu_tcp, .udp = gw->udp, .mbaps = gw->mbaps,
                          .serial_slaves = gw->serial_slaves, .serial_slave_count = gw->serial_slave_count };
}

gw_frames_t *gw_frames(const gw_t *gw)
{
    return atomic_load_explicit(&((gw_t *)gw)->frames, memory_order_acquire);
}

/* Release: a bus actor that loads the ring sees it made (gw_frame_seen). */
void gw_frames_publish(gw_t *gw, gw_frames_t *f)
{
    atomic_store_explicit(&gw->frames, f, memory_order_release);
}

void gw_reload(gw_t *gw)
{
    if (gw->reload)
        gw->reload(gw);
}

const gw_reload_report_t *gw_last_reload(const gw_t *gw) { return &gw->last_reload; }
const char *gw_restart_needed(const gw_t *gw) { return gw->restart_needed; }
const char *gw_reload_queued(const gw_t *gw) { return gw->reload_queued; }
const gw_report_t *gw_report(const gw_t *gw) { return gw->report; }
uint64_t gw_reloads(const gw_t *gw, enum gw_reload_result r) { return r < GW_RELOAD_RESULTS ? gw->reloads[r] : 0; }
