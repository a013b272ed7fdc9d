/*
 * web/status.c -- GET /status: the gateway's state as one JSON object, and
 * its ETag. The members are the parts' (gateway/report.h), in the order of
 * the table the daemon built: this file only iterates it, and writes the
 * braces. I/O thread; each part copies under its own lock and formats
 * after, so a scrape never stalls a bus.
 *
 * The ETag folds (FNV-1a) what each part shows, read as its member reads it
 * but not formatted where the part says how (status_fold), else its
 * member's bytes; what only the clock moves (uptime_s, the ages) is left
 * out, and a client advances those by the time since its last answer. So
 * If-None-Match with the ETag of the last answer is 304 when nothing but
 * the clock moved, and a scrape of an idle gateway formats no bus, poll or
 * tag.
 */
#include "web/internal.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>

static uint64_t status_state(const gw_report_t *r)
{
    uint64_t h = REPORT_FOLD_INIT;
    unsigned n;
    const gw_report_part_t *p = report_parts(r, &n);
    struct evbuffer *bytes = evbuffer_new();
    if (!bytes) {
        report_fold(&h, gw_now_ns());   /* no memory to fold them: an ETag that matches nothing */
        return h;
    }
    for (unsigned i = 0; i < n; i++) {
        if (p[i].status_fold)
            p[i].status_fold(p[i].ctx, &h);
        else if (p[i].status_json)
            p[i].status_json(p[i].ctx, bytes);
    }
    report_fold_bytes(&h, evbuffer_pullup(bytes, -1), evbuffer_get_length(bytes));
    evbuffer_free(bytes);
    return h;
}

/* {members}: each part's ,"key":value in the table's order, the first comma
 * taken off. */
static struct evbuffer *status_body(const gw_report_t *r)
{
    struct evbuffer *b = evbuffer_new();
    unsigned n;
    const gw_report_part_t *p = report_parts(r, &n);
    for (unsigned i = 0; b && i < n; i++)
        if (p[i].status_json)
            p[i].status_json(p[i].ctx, b);
    if (b && (evbuffer_drain(b, 1) != 0 || evbuffer_prepend(b, "{", 1) != 0 || evbuffer_add(b, "}\n", 2) != 0)) {
        evbuffer_free(b);
        b = NULL;
    }
    return b;
}

void http_on_status(struct evhttp_request *req, void *arg)
{
    gw_t *gw = arg;
    char etag[24];
    snprintf(etag, sizeof etag, "\"%016llx\"", (unsigned long long)status_state(gw_report(gw)));
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Cache-Control", "no-cache");
    if (http_not_modified(req, etag)) {
        web_count(gw, status_not_modified);
        evhttp_send_reply(req, HTTP_NOTMODIFIED, "Not Modified", NULL);
        return;
    }
    struct evbuffer *b = status_body(gw_report(gw));
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evhttp_add_header(out, "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
