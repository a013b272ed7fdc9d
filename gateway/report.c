/*
 * gateway/report.c -- the table of the parts /status and /metrics show
 * (report.h), and the gateway's small parts: its uptime, the listen-only
 * buses' series, the frame ring, the router and the actors, MQTT, the
 * maps and the scans. Each is a call into the file that owns the numbers;
 * here only its shape as a part (ctx: the gw_t). The buses and devices are
 * report_bus.c's, the poll groups cache.c's, the last reload
 * report_reload.c's. I/O thread, as every part (report.h).
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

struct gw_report {
    gw_report_part_t *parts;
    unsigned n;
    gw_report_str_fn str;
    gw_report_device_fn device;
    void *device_ctx;
};

gw_report_t *report_new(const gw_report_part_t *parts, unsigned n, gw_report_str_fn str)
{
    gw_report_t *r = calloc(1, sizeof *r);
    if (!r || !(r->parts = calloc(n + 1, sizeof *r->parts))) {
        free(r);
        return NULL;
    }
    memcpy(r->parts, parts, n * sizeof *parts);
    r->n = n;
    r->str = str;
    return r;
}

void report_free(gw_report_t *r)
{
    if (!r)
        return;
    free(r->parts);
    free(r);
}

void report_set_device_members(gw_report_t *r, gw_report_device_fn fn, void *ctx)
{
    r->device = fn;
    r->device_ctx = ctx;
}

const gw_report_part_t *report_parts(const gw_report_t *r, unsigned *n)
{
    *n = r ? r->n : 0;
    return r ? r->parts : NULL;
}

void report_str(const gw_report_t *r, struct evbuffer *b, const char *s)
{
    if (r && r->str)
        r->str(b, s);
}

void report_device_members(const gw_report_t *r, unsigned d, struct evbuffer *b)
{
    if (r && r->device)
        r->device(r->device_ctx, d, b);
}

void report_fold(uint64_t *h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        *h = (*h ^ (v & 0xff)) * 1099511628211u;
}

void report_fold_bytes(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ c[i]) * 1099511628211u;
}

void report_metric_header(struct evbuffer *b, const char *prefix, const report_metric_def_t *d)
{
    evbuffer_add_printf(b, "# HELP rtugw_%s_%s%s %s\n# TYPE rtugw_%s_%s%s %s\n", prefix, d->name,
                        d->gauge ? "" : "_total", d->help, prefix, d->name, d->gauge ? "" : "_total",
                        d->gauge ? "gauge" : "counter");
}

uint64_t report_field(const void *base, size_t offset)
{
    return base ? gw_read((const atomic_uint_fast64_t *)((const char *)base + offset)) : 0;
}

void report_metric_block(struct evbuffer *b, const char *prefix, const report_metric_def_t *defs, size_t n,
                         const void *base)
{
    for (size_t i = 0; i < n; i++) {
        report_metric_header(b, prefix, &defs[i]);
        evbuffer_add_printf(b, "rtugw_%s_%s%s %llu\n", prefix, defs[i].name, defs[i].gauge ? "" : "_total",
                            (unsigned long long)report_field(base, defs[i].offset));
    }
}

/* ---- the gateway's small parts ----------------------------------------------- */

/* uptime_s: only the clock moves it, so it folds nothing into the ETag. */
static void uptime_status(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    evbuffer_add_printf(b, ",\"uptime_s\":%.1f", (double)(gw_now_ns() - gw->started_ns) / 1e9);
}

static void fold_nothing(void *ctx, uint64_t *h)
{
    (void)ctx;
    (void)h;
}

gw_report_part_t gw_report_uptime(gw_t *gw)
{
    return (gw_report_part_t){ .name = "uptime", .status_json = uptime_status, .status_fold = fold_nothing, .ctx = gw };
}

static void listen_metrics(void *ctx, struct evbuffer *b)
{
    listen_metrics_text(ctx, b);
}

gw_report_part_t gw_report_listen(gw_t *gw)
{
    return (gw_report_part_t){ .name = "listen", .metrics_text = listen_metrics, .ctx = gw };
}

/* The ring is published once the buses run (gw_frames): read at each call. */
static void frame_ring_status(void *ctx, struct evbuffer *b)
{
    evbuffer_add_printf(b, ",\"frame_ring\":%u", frames_capacity(gw_frames(ctx)));
}

static void frames_metrics(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    frames_metrics_text(gw_frames(gw), gw->cfg, b);
}

gw_report_part_t gw_report_frame_ring(gw_t *gw)
{
    return (gw_report_part_t){ .name = "frame_ring", .status_json = frame_ring_status, .ctx = gw };
}

gw_report_part_t gw_report_frames(gw_t *gw)
{
    return (gw_report_part_t){ .name = "frames", .metrics_text = frames_metrics, .ctx = gw };
}

static void router_metrics(void *ctx, struct evbuffer *b)
{
    gw_router_metrics_text(ctx, b);
}

static void actor_metrics(void *ctx, struct evbuffer *b)
{
    gw_actor_metrics_text(ctx, b);
}

static void north_metrics(void *ctx, struct evbuffer *b)
{
    gw_north_metrics_text(((gw_t *)ctx)->north, b);
}

static void maps_metrics(void *ctx, struct evbuffer *b)
{
    vslave_metrics_text(((gw_t *)ctx)->maps, b);
}

static void scans_metrics(void *ctx, struct evbuffer *b)
{
    scan_metrics_text(((gw_t *)ctx)->scans, b);
}

gw_report_part_t gw_report_router(gw_t *gw)
{
    return (gw_report_part_t){ .name = "router", .metrics_text = router_metrics, .ctx = gw };
}

gw_report_part_t gw_report_actors(gw_t *gw)
{
    return (gw_report_part_t){ .name = "actors", .metrics_text = actor_metrics, .ctx = gw };
}

gw_report_part_t gw_report_north(gw_t *gw)
{
    return (gw_report_part_t){ .name = "mqtt", .metrics_text = north_metrics, .ctx = gw };
}

gw_report_part_t gw_report_maps(gw_t *gw)
{
    return (gw_report_part_t){ .name = "maps", .metrics_text = maps_metrics, .ctx = gw };
}

gw_report_part_t gw_report_scans(gw_t *gw)
{
    return (gw_report_part_t){ .name = "scans", .metrics_text = scans_metrics, .ctx = gw };
}
