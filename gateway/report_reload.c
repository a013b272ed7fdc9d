/*
 * gateway/report_reload.c -- the last reload's part of /status
 * ("last_reload", "restart_needed") and of /metrics
 * (rtugw_config_reloads_total). daemon/control.c writes the report and the
 * counts, on the I/O thread, where this reads them (report.h).
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <time.h>

/* ,"last_reload":{...}: when, the file's revision then, its result, what it
 * applied, what waits (for a restart, then what is queued behind tag
 * writes), its first error (FILE:LINE: ... for a file check refused). */
static void last_reload_json(gw_t *gw, const gw_reload_report_t *r, struct evbuffer *b)
{
    time_t t = (time_t)(r->wall_ms / 1000);
    struct tm tm;
    char when[32];
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    evbuffer_add_printf(b, ",\"last_reload\":{\"time\":\"%s.%03dZ\",\"time_ms\":%lld,\"revision\":\"%s\","
                           "\"result\":\"%s\",\"applied\":", when, (int)(r->wall_ms % 1000), (long long)r->wall_ms,
                        r->revision, gw_reload_result_name(r->result));
    report_str(gw->report, b, r->applied);
    evbuffer_add_printf(b, ",\"waits\":");
    report_str(gw->report, b, r->waits);
    evbuffer_add_printf(b, ",\"queued\":");
    report_str(gw->report, b, gw_reload_queued(gw));
    evbuffer_add_printf(b, ",\"error\":");
    if (r->error[0])
        report_str(gw->report, b, r->error);
    else
        evbuffer_add_printf(b, "null");
    evbuffer_add_printf(b, ",\"warnings\":%u}", r->warnings);
}

/* The reload's members: last_reload (null before the first), then what
 * waits for a restart. */
static void reload_status(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    const gw_reload_report_t *r = gw_last_reload(gw);
    if (!r->wall_ms)
        evbuffer_add_printf(b, ",\"last_reload\":null");
    else
        last_reload_json(gw, r, b);
    evbuffer_add_printf(b, ",\"restart_needed\":");
    report_str(gw->report, b, gw->restart_needed);
}

static void reload_metrics(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    evbuffer_add_printf(b, "# HELP rtugw_config_reloads_total Configuration reloads (SIGHUP, the API), by result\n"
                           "# TYPE rtugw_config_reloads_total counter\n");
    for (int i = 0; i < GW_RELOAD_RESULTS; i++)
        evbuffer_add_printf(b, "rtugw_config_reloads_total{result=\"%s\"} %llu\n",
                            gw_reload_result_name((enum gw_reload_result)i),
                            (unsigned long long)gw_reloads(gw, (enum gw_reload_result)i));
}

gw_report_part_t gw_report_reload(gw_t *gw)
{
    return (gw_report_part_t){ .name = "reload", .status_json = reload_status, .metrics_text = reload_metrics,
                               .ctx = gw };
}
