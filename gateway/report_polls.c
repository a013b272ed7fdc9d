/*
 * gateway/report_polls.c -- the poll groups' part of /status ("polls": each
 * group, its counters and values as the cache holds them, and the read of
 * the poller's plan it belongs to). The entries are copied under the
 * cache's lock (cache_snapshot) and formatted here after it is released,
 * so a scrape never holds the lock while it writes (report.h). I/O thread.
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>

/* /status's ,"polls":[...]: each poll group with its entry as the snapshot
 * took it, formatted after the lock is released (report.h). I/O thread:
 * the groups' configuration is written only there. */
static void polls_status(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    uint64_t now = gw_now_ns();
    const config_t *cfg = gw_config(gw);
    evbuffer_add_printf(b, ",\"polls\":[");
    unsigned n_polls = 0;
    gw_cache_view_t *cv = cache_snapshot(gw, &n_polls);
    for (unsigned i = 0; cv && i < n_polls; i++) {
        const config_poll_t *pg = &cfg->polls[i];
        const gw_cache_view_t *e = &cv[i];
        evbuffer_add_printf(b, "%s{\"name\":", i ? "," : "");
        report_str(gw->report, b, pg->name);
        evbuffer_add_printf(b, ",\"device\":");
        report_str(gw->report, b, cfg->devices[pg->device].name);
        evbuffer_add_printf(b, ",\"function\":%u,\"address\":%u,"
                               "\"count\":%u,\"interval_ms\":%u,\"read\":%u,\"polls\":%llu,\"failures\":%llu,"
                               "\"overruns\":%llu,\"ok\":%s,\"exception\":%u,",
                            pg->function, pg->address, pg->count, pg->interval_ms, poller_read_of(gw_poller(gw), i),
                            (unsigned long long)e->polls, (unsigned long long)e->failures,
                            (unsigned long long)e->overruns, e->ok ? "true" : "false", e->ok ? 0u : e->exception);
        if (e->t_ns)
            evbuffer_add_printf(b, "\"age_s\":%.3f,\"values\":[", (double)(now - e->t_ns) / 1e9);
        else
            evbuffer_add_printf(b, "\"age_s\":null,\"values\":[");
        for (unsigned v = 0; v < e->count; v++)
            evbuffer_add_printf(b, v ? ",%u" : "%u", e->values[v]);
        evbuffer_add_printf(b, "]}");
    }
    free(cv);
    evbuffer_add_printf(b, "]");
}

/* The poll groups' numbers and values, folded for the ETag. */
static void polls_fold(void *ctx, uint64_t *h)
{
    gw_t *gw = ctx;
    unsigned n_polls = 0;
    report_fold(h, gw->cfg->poll_count);
    gw_cache_view_t *cv = cache_snapshot(gw, &n_polls);
    report_fold(h, cv == NULL);
    for (unsigned i = 0; cv && i < n_polls; i++) {
        const gw_cache_view_t *e = &cv[i];
        uint64_t v[] = { e->polls, e->failures, e->overruns, e->ok, e->exception, e->count, e->t_ns != 0,
                         poller_read_of(gw_poller(gw), i) };
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            report_fold(h, v[j]);
        for (unsigned j = 0; j < e->count; j++)
            report_fold(h, e->values[j]);
    }
    free(cv);
}

gw_report_part_t gw_report_polls(gw_t *gw)
{
    return (gw_report_part_t){ .name = "polls", .status_json = polls_status, .status_fold = polls_fold, .ctx = gw };
}
