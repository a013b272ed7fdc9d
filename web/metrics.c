/*
 * web/metrics.c -- /metrics: every counter of the daemon as Prometheus text
 * (version 0.0.4). The series are the parts' (gateway/report.h), in the
 * order of the table the daemon built: this file only iterates it. I/O
 * thread; each part reads relaxed atomics with one writer, or copies under
 * its own lock and formats after, so a scrape never stalls a bus.
 */
#include "web/internal.h"

#include <event2/buffer.h>
#include <event2/http.h>

void http_on_metrics(struct evhttp_request *req, void *arg)
{
    gw_t *gw = arg;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    unsigned n;
    const gw_report_part_t *p = report_parts(gw_report(gw), &n);
    for (unsigned i = 0; i < n; i++)
        if (p[i].metrics_text)
            p[i].metrics_text(p[i].ctx, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
