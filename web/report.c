/*
 * web/report.c -- the web side's parts of the report table
 * (gateway/report.h; ctx: the gw_t): the HTTP server's counters
 * (rtugw_http_*), HTTPS and MB-TCP-Security's certificates ("tls",
 * "https": http_tls.c), the logins (auth.c), the tags (http_tags.c: their
 * change number for /status's ETag, their series, and each device's tag
 * counts in its /status object), and the JSON string encoder the table
 * hands to the parts below web/. I/O thread, as every part.
 */
#include "web/internal.h"

#include <event2/buffer.h>
#include <stdio.h>

#define HM(f, h) { #f, h, offsetof(gw_http_metrics_t, f), false }
static const report_metric_def_t http_defs[] = {
    HM(accepted, "HTTP connections accepted"),
    HM(refused, "HTTP connections refused: max_connections reached"),
    HM(requests, "HTTP requests served"),
    HM(timed_out, "HTTP requests cut: incomplete after request_timeout_ms"),
    { "active", "HTTP connections open", offsetof(gw_http_metrics_t, active), true },
    HM(tag_writes, "Tag writes (PUT /tags/NAME) the slave confirmed"),
    HM(tag_writes_refused, "Tag writes refused before the bus (token, read-only, value, tag)"),
    HM(tag_write_failures, "Tag writes answered with an exception or no answer"),
    HM(tag_writes_abandoned, "Tag writes whose client closed before the answer: its connection freed at once"),
    HM(api_changes, "Configuration changes written and applied through /api/"),
    HM(api_refused, "/api/ requests refused (token, revision, body, check)"),
    HM(misdirected, "HTTP requests refused 421: their Host is not one of [http] server_names"),
    HM(tags_full, "GET /tags answered with every tag (no since, or one too old)"),
    HM(tags_since, "GET /tags?since=N answered with the tags changed after N only"),
    HM(tags_not_modified, "GET /tags answered 304: nothing changed since the client's ETag"),
    HM(tags_listed, "Tags formatted into GET /tags answers"),
    HM(tags_refused, "GET /tags refused 400: since is not a change number"),
    HM(tags_slices, "Slices of 1,024 tags whole GET /tags answers were built in, one per turn of the I/O loop"),
    HM(status_not_modified, "GET /status answered 304: nothing changed since the client's ETag"),
};

static void http_metrics_text(void *ctx, struct evbuffer *b)
{
    report_metric_block(b, "http", http_defs, sizeof http_defs / sizeof http_defs[0], http_metrics(gw_http(ctx)));
}

static void tls_status(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    http_tls_status(gw, http_tls(gw_http(gw)), b);
}

static void tls_metrics(void *ctx, struct evbuffer *b)
{
    gw_t *gw = ctx;
    http_tls_metrics(gw, http_tls(gw_http(gw)), b);
}

static void auth_metrics(void *ctx, struct evbuffer *b)
{
    web_auth_metrics(http_auth(gw_http(ctx)), b);
}

/* The tags' change number, swept: their counts in /status are a function of
 * it (http_tags_seq counts them again when it moved, before the body). */
static void tags_fold(void *ctx, uint64_t *h)
{
    report_fold(h, http_tags_seq(http_tags(gw_http(ctx))));
}

static void tags_metrics(void *ctx, struct evbuffer *b)
{
    http_tags_metrics(ctx, b);
}

gw_report_part_t web_report_http(gw_t *gw)
{
    return (gw_report_part_t){ .name = "http", .metrics_text = http_metrics_text, .ctx = gw };
}

gw_report_part_t web_report_tls(gw_t *gw)
{
    return (gw_report_part_t){ .name = "https", .status_json = tls_status, .metrics_text = tls_metrics, .ctx = gw };
}

gw_report_part_t web_report_auth(gw_t *gw)
{
    return (gw_report_part_t){ .name = "auth", .metrics_text = auth_metrics, .ctx = gw };
}

gw_report_part_t web_report_tags(gw_t *gw)
{
    return (gw_report_part_t){ .name = "tags", .status_fold = tags_fold, .metrics_text = tags_metrics, .ctx = gw };
}

void web_report_device_tags(void *gw, unsigned d, struct evbuffer *b)
{
    http_tags_status(http_tags(gw_http(gw)), d, b);
}

void web_report_str(struct evbuffer *b, const char *s)
{
    api_add_str(b, s);
}
