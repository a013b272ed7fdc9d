/*
 * web/audit.c -- the audit log: every write and configuration change, every
 * login and logout, and every write refused for its role (who, from where,
 * what, when) goes to the daemon's log at info and into a ring of the last
 * AUDIT_RING lines that admins read at GET /audit (JSON), on the I/O thread;
 * refusals in a ring of their own (AUDIT_REFUSED_RING), repeats counted.
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
#define AUDIT_REFUSED_RING 16           /* refusals' own share: they never push out the rest */
#define AUDIT_LINE 400

typedef struct audit_entry {
    struct timespec at;                 /* wall clock (of the last, for a repeated refusal) */
    uint64_t seq;                       /* order among both rings */
    uint64_t repeated;                  /* a refusal: how many in a row from its address (1: once) */
    char user[CONFIG_NAME_MAX];
    char role[12];
    char peer[64];
    char request[96];                   /* METHOD /path */
    char what[AUDIT_LINE];
} audit_entry_t;

/* Two rings: what was done (writes, changes, logins, logouts) and what was
 * refused (a write refused for its role, a failed login). Refusals are the
 * one kind an attacker makes at will: in a ring of their own, and those in a
 * row from one address (and user) counted in one entry, they cannot flush
 * the record of what was done. The log has every one of them. */
struct web_audit {
    audit_entry_t ring[AUDIT_RING], refused[AUDIT_REFUSED_RING];
    uint64_t count, refused_count;      /* entries ever; each ring holds its last */
    uint64_t seq;
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

/* The address of a peer "HOST:PORT" (or "[V6]:PORT"), without the port. */
static size_t host_len(const char *peer)
{
    const char *colon = strrchr(peer, ':');
    return colon ? (size_t)(colon - peer) : strlen(peer);
}

__attribute__((format(printf, 4, 0)))
static void audit_add(gw_t *gw, struct evhttp_request *req, bool refusal, const char *fmt, va_list ap)
{
    web_audit_t *au = http_audit(gw_http(gw));
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    web_who_t who;
    audit_entry_t e = { .repeated = 1 };

    web_auth_who(http_auth(gw_http(gw)), req, &who);
    clock_gettime(CLOCK_REALTIME, &e.at);
    snprintf(e.user, sizeof e.user, "%s", who.name[0] ? who.name : "-");
    snprintf(e.role, sizeof e.role, "%s", config_user_role_name(who.role));
    web_auth_peer(req, e.peer, sizeof e.peer);
    snprintf(e.request, sizeof e.request, "%s %.80s", method_of(req), path ? path : "?");
    vsnprintf(e.what, sizeof e.what, fmt, ap);

    /* Every field from outside is quoted and escaped (control characters,
     * newlines, quotes: json_quote), so a line cannot be forged: a path
     * with CR and escape codes shows as "\r\u001b[2K...". */
    char user[JSON_QUOTED_MAX(CONFIG_NAME_MAX)], peer[JSON_QUOTED_MAX(64)], request[JSON_QUOTED_MAX(96)];
    char what[JSON_QUOTED_MAX(AUDIT_LINE)];
    json_quote(user, sizeof user, e.user);
    json_quote(peer, sizeof peer, e.peer);
    json_quote(request, sizeof request, e.request);
    json_quote(what, sizeof what, e.what);
    gw_log(gw, CONFIG_LOG_INFO, "audit: %s (%s) from %s: %s: %s", user, e.role, peer, request, what);

    if (!refusal) {
        e.seq = ++au->seq;
        au->ring[au->count++ % AUDIT_RING] = e;
        return;
    }
    audit_entry_t *last = au->refused_count ? &au->refused[(au->refused_count - 1) % AUDIT_REFUSED_RING] : NULL;
    size_t hl = host_len(e.peer);
    if (last && last->seq == au->seq && host_len(last->peer) == hl && strncmp(last->peer, e.peer, hl) == 0 &&
        strcmp(last->user, e.user) == 0) {
        /* the same address again, nothing else in between: one entry, counted */
        uint64_t n = last->repeated + 1;
        *last = e;
        last->repeated = n;
        last->seq = au->seq;
        return;
    }
    e.seq = ++au->seq;
    au->refused[au->refused_count++ % AUDIT_REFUSED_RING] = e;
}

void web_audit(gw_t *gw, struct evhttp_request *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    audit_add(gw, req, false, fmt, ap);
    va_end(ap);
}

void web_audit_refused(gw_t *gw, struct evhttp_request *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    audit_add(gw, req, true, fmt, ap);
    va_end(ap);
}

static void add_entry(struct evbuffer *b, const audit_entry_t *e, bool first)
{
    char when[40], q[JSON_QUOTED_MAX(AUDIT_LINE)];
    struct tm tm;
    gmtime_r(&e->at.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    evbuffer_add_printf(b, "%s{\"time\":\"%s.%03ldZ\",\"user\":", first ? "" : ",", when, e->at.tv_nsec / 1000000);
    json_quote(q, sizeof q, e->user);
    evbuffer_add_printf(b, "%s,\"role\":\"%s\",\"from\":", q, e->role);
    json_quote(q, sizeof q, e->peer);
    evbuffer_add_printf(b, "%s,\"request\":", q);
    json_quote(q, sizeof q, e->request);
    evbuffer_add_printf(b, "%s,\"what\":", q);
    json_quote(q, sizeof q, e->what);
    evbuffer_add_printf(b, "%s", q);
    if (e->repeated > 1)
        evbuffer_add_printf(b, ",\"repeated\":%llu", (unsigned long long)e->repeated);
    evbuffer_add_printf(b, "}");
}

void web_audit_json(gw_t *gw, struct evhttp_request *req)
{
    web_audit_t *au = http_audit(gw_http(gw));
    struct evbuffer *b = evbuffer_new();
    uint64_t i = au->count > AUDIT_RING ? au->count - AUDIT_RING : 0;
    uint64_t r = au->refused_count > AUDIT_REFUSED_RING ? au->refused_count - AUDIT_REFUSED_RING : 0;

    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"count\":%llu,\"refused_count\":%llu,\"entries\":[",
                        (unsigned long long)au->count, (unsigned long long)au->refused_count);
    /* both rings, merged in the order they happened */
    for (bool first = true; i < au->count || r < au->refused_count; first = false) {
        const audit_entry_t *a = i < au->count ? &au->ring[i % AUDIT_RING] : NULL;
        const audit_entry_t *f = r < au->refused_count ? &au->refused[r % AUDIT_REFUSED_RING] : NULL;
        if (a && (!f || a->seq < f->seq))
            add_entry(b, a, first), i++;
        else
            add_entry(b, f, first), r++;
    }
    evbuffer_add_printf(b, "]}\n");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
