/*
 * web/audit.c -- the audit log: every write and configuration change, every
 * login and logout, and every write refused for its role (who, from where,
 * what, when) goes to the daemon's log at info and into a ring of the last
 * AUDIT_RING lines that admins read at GET /audit (JSON), on the I/O thread.
 *
 * The log is where an audit trail is kept (syslog or the journal, with
 * their own retention and forwarding); the ring only shows the recent past
 * on the gateway itself, bounded, and is lost at a restart.
 */
#include "web/internal.h"
#include "json/json.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AUDIT_RING 64
#define AUDIT_LINE 400

typedef struct audit_entry {
    struct timespec at;                 /* wall clock */
    char user[CONFIG_NAME_MAX];
    char role[12];
    char peer[64];
    char request[96];                   /* METHOD /path */
    char what[AUDIT_LINE];
} audit_entry_t;

struct web_audit {
    audit_entry_t ring[AUDIT_RING];
    uint64_t count;                     /* entries ever; the ring holds the last AUDIT_RING */
};

web_audit_t *web_audit_new(void)
{
    return calloc(1, sizeof(web_audit_t));
}

void web_audit_free(web_audit_t *au)
{
    free(au);
}

static const char *method_of(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "OTHER";
    }
}

void web_audit(gw_t *gw, struct evhttp_request *req, const char *fmt, ...)
{
    web_audit_t *au = http_audit(gw->http);
    audit_entry_t *e = &au->ring[au->count++ % AUDIT_RING];
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    web_who_t who;
    va_list ap;

    web_auth_who(http_auth(gw->http), req, &who);
    clock_gettime(CLOCK_REALTIME, &e->at);
    snprintf(e->user, sizeof e->user, "%s", who.name[0] ? who.name : "-");
    snprintf(e->role, sizeof e->role, "%s", config_user_role_name(who.role));
    web_auth_peer(req, e->peer, sizeof e->peer);
    snprintf(e->request, sizeof e->request, "%s %.80s", method_of(req), path ? path : "?");
    va_start(ap, fmt);
    vsnprintf(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    /* names and values come from outside: quoted, so a line cannot be forged */
    char what[JSON_QUOTED_MAX(AUDIT_LINE)];
    json_quote(what, sizeof what, e->what);
    gw_log(gw, CONFIG_LOG_INFO, "audit: %s (%s) from %s: %s: %s", e->user, e->role, e->peer, e->request, what);
}

void web_audit_json(gw_t *gw, struct evhttp_request *req)
{
    web_audit_t *au = http_audit(gw->http);
    struct evbuffer *b = evbuffer_new();
    uint64_t first = au->count > AUDIT_RING ? au->count - AUDIT_RING : 0;

    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"count\":%llu,\"entries\":[", (unsigned long long)au->count);
    for (uint64_t i = first; i < au->count; i++) {
        const audit_entry_t *e = &au->ring[i % AUDIT_RING];
        char when[40], q[JSON_QUOTED_MAX(AUDIT_LINE)];
        struct tm tm;
        gmtime_r(&e->at.tv_sec, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        evbuffer_add_printf(b, "%s{\"time\":\"%s.%03ldZ\",\"user\":", i > first ? "," : "", when,
                            e->at.tv_nsec / 1000000);
        json_quote(q, sizeof q, e->user);
        evbuffer_add_printf(b, "%s,\"role\":\"%s\",\"from\":", q, e->role);
        json_quote(q, sizeof q, e->peer);
        evbuffer_add_printf(b, "%s,\"request\":", q);
        json_quote(q, sizeof q, e->request);
        evbuffer_add_printf(b, "%s,\"what\":", q);
        json_quote(q, sizeof q, e->what);
        evbuffer_add_printf(b, "%s}", q);
    }
    evbuffer_add_printf(b, "]}\n");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
