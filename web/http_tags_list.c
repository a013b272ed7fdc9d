/*
 * web/http_tags_list.c -- GET /tags, the list of every tag: whole, or only
 * what changed since the client's last answer (?since=, 304), and a whole
 * list of many tags built in slices. docs/tags.md, "Polling /tags cheaply".
 * On the I/O thread, as all of web/.
 */
#include "web/internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHANGES_MAX 1024   /* tags an answer of changes lists; beyond, the answer is full */
#define SEQ_DIGITS 20      /* a uint64_t */
#define SLICE_TAGS 1024    /* tags of a whole list built in one turn of the I/O loop */

typedef struct slicer slicer_t;

struct http_tags_list {
    gw_t *gw;
    gw_http_t *http;
    slicer_t *slicing;           /* whole answers being built, a slice a turn of the loop */
};

/* Tags [from, to) of the list, comma-separated (one before each but the first). */
static void add_tags(struct evbuffer *b, const tags_table_t *t, size_t from, size_t to, int64_t now)
{
    for (size_t k = from; k < to && k < tags_table_count(t); k++) {
        if (k)
            evbuffer_add(b, ",", 1);
        http_tags_add_tag(b, t, k, now, false);
    }
}

/*
 * A whole list of many tags is built SLICE_TAGS tags at a time (~0.6 ms of
 * the I/O thread each), one slice per turn of the loop, so a 10,000-tag
 * answer (~6 ms) never holds up the Modbus TCP clients, MQTT and the other
 * requests for longer than one slice; each slice holds the table's lock for
 * its own tags only. The answer's seq and ETag are those of its first slice:
 * later slices may show newer values, never older ones, so a client asking
 * ?since= that seq gets those tags again and misses nothing. A reload between
 * two slices (other tags, other indices) starts the answer over. The request
 * is held (http_hold) while it is built: if its client goes, the sweep asks
 * http_tags_abandon, which stops the building and hands the connection back.
 */
struct slicer {
    http_tags_list_t *l;
    struct evhttp_request *req;
    const struct bufferevent *bev;
    struct event *ev;
    struct evbuffer *b;
    size_t next;                 /* the next tag to add */
    int64_t now;
    uint32_t generation;         /* the table's: another one starts over */
    slicer_t *link;
};

static void slicer_free(slicer_t *s)
{
    for (slicer_t **pp = &s->l->slicing; *pp; pp = &(*pp)->link)
        if (*pp == s) {
            *pp = s->link;
            break;
        }
    event_free(s->ev);
    evbuffer_free(s->b);
    free(s);
}

static void slice(evutil_socket_t fd, short what, void *arg)
{
    slicer_t *s = arg;
    gw_t *gw = s->l->gw;
    (void)fd;
    (void)what;
    tags_table_t *t = gw_tags_lock(gw_tags(gw));
    size_t count = tags_table_count(t);
    if (gw_tags_generation(gw_tags(gw)) != s->generation) {   /* reloaded: over again, at the new number */
        char etag[SEQ_DIGITS + 8];
        s->now = gw_wall_ms();
        s->generation = gw_tags_generation(gw_tags(gw));
        s->next = 0;
        tags_table_sweep(t, s->now);
        snprintf(etag, sizeof etag, "\"%llu\"", (unsigned long long)tags_table_seq(t));
        struct evkeyvalq *out = evhttp_request_get_output_headers(s->req);
        evhttp_remove_header(out, "ETag");
        evhttp_add_header(out, "ETag", etag);
        evbuffer_drain(s->b, evbuffer_get_length(s->b));
        evbuffer_add_printf(s->b, "{\"time\":%lld,\"seq\":%llu,\"full\":true,\"tags\":[", (long long)s->now,
                            (unsigned long long)tags_table_seq(t));
    }
    size_t to = s->next + SLICE_TAGS < count ? s->next + SLICE_TAGS : count;
    add_tags(s->b, t, s->next, to, s->now);
    gw_tags_unlock(gw_tags(gw));
    web_count(gw, tags_slices);
    s->next = to;
    if (to < count) {
        event_active(s->ev, EV_TIMEOUT, 1);
        return;
    }
    evbuffer_add_printf(s->b, "]}\n");
    web_count(gw, tags_full);
    atomic_fetch_add_explicit(&http_metrics(gw_http(gw))->tags_listed, count, memory_order_relaxed);
    http_hold(s->l->http, s->req, false);
    http_tags_reply_json(s->req, HTTP_OK, "OK", s->b);
    slicer_free(s);
}

/* The rest of a whole list after its first slice, on later turns of the loop. */
static void slice_later(http_tags_list_t *l, struct evhttp_request *req, struct evbuffer *b, int64_t now)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    slicer_t *s = calloc(1, sizeof *s);
    struct event *ev = s && evcon ? event_new(evhttp_connection_get_base(evcon), -1, 0, slice, s) : NULL;
    web_count(l->gw, tags_slices);
    if (!ev) {
        free(s);
        evbuffer_free(b);
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    *s = (slicer_t){ .l = l, .req = req, .bev = evhttp_connection_get_bufferevent(evcon), .ev = ev, .b = b,
                     .next = SLICE_TAGS, .now = now, .generation = gw_tags_generation(gw_tags(l->gw)),
                     .link = l->slicing };
    l->slicing = s;
    http_hold(l->http, req, true);
    event_active(ev, EV_TIMEOUT, 1);
}

/*
 * GET /tags, cheaply when little changed. The table gives a change number
 * to every change a reader could see (tags/changes.c; a re-read of the same
 * value changes only its timestamp and age, and is none). An answer carries
 * the number it was built at, as "seq" and as its ETag:
 *   If-None-Match with that ETag, nothing changed since: 304, nothing built;
 *   ?since=N, N from this table: only the tags changed after N, "full": false;
 *   ?since=N that this table never gave (before a reload or a restart, or
 *     from the future), or more changed than an answer of changes carries
 *     (CHANGES_MAX, or a quarter of the table): every tag, "full": true.
 * So a client keeps the tags it has, replaces them all on "full": true,
 * updates those listed otherwise, and asks again with the new seq: it never
 * misses a change, since the number and the values are read under one lock.
 * A timestamp or age it keeps is that of the last change, not the last read.
 * Cost: a 304 formats nothing and reads no tag (the sweep reads the
 * deadlines only once the earliest has passed); ?since= reads the table's
 * ring of recent changes and formats only the changed tags (tags/changes.c).
 */

/* ?since=N: *since set, true; no since: *since 0, true; anything else: false. */
static bool since_of(struct evhttp_request *req, uint64_t *since, bool *given)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q;
    *since = 0;
    *given = false;
    if (!query || !*query)
        return true;
    if (evhttp_parse_query_str(query, &q) != 0)
        return false;
    const char *v = evhttp_find_header(&q, "since");
    bool ok = true;
    if (v) {
        size_t n = strlen(v);
        char *end = NULL;
        errno = 0;
        ok = n >= 1 && n <= SEQ_DIGITS && strspn(v, "0123456789") == n;
        unsigned long long x = ok ? strtoull(v, &end, 10) : 0;
        ok = ok && errno == 0 && end && !*end;
        *since = x;
        *given = ok;
    }
    evhttp_clear_headers(&q);
    return ok;
}

/* If-None-Match names etag (or is "*"). A list ("a", "b") is searched. */
bool http_not_modified(struct evhttp_request *req, const char *etag)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");
    if (!h)
        return false;
    if (strcmp(h, "*") == 0)
        return true;
    size_t n = strlen(etag);
    for (const char *p = strstr(h, etag); p; p = strstr(p + 1, etag))
        if ((p == h || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/') && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return true;
    return false;
}

void http_tags_list_get(http_tags_list_t *l, struct evhttp_request *req)
{
    gw_t *gw = l->gw;
    uint64_t since;
    bool given;
    unsigned changed[CHANGES_MAX];
    char etag[SEQ_DIGITS + 8];
    if (!since_of(req, &since, &given)) {
        web_count(gw, tags_refused);
        http_tags_reply_error(req, HTTP_BADREQUEST, "Bad Request", NULL, "since must be a change number (0..2^64-1)");
        return;
    }
    int64_t now = gw_wall_ms();
    tags_table_t *t = gw_tags_lock(gw_tags(gw));
    tags_table_sweep(t, now);
    uint64_t seq = tags_table_seq(t);
    size_t count = tags_table_count(t);
    snprintf(etag, sizeof etag, "\"%llu\"", (unsigned long long)seq);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "ETag", etag);
    evhttp_add_header(out, "Cache-Control", "no-cache");
    if (http_not_modified(req, etag)) {
        gw_tags_unlock(gw_tags(gw));
        web_count(gw, tags_not_modified);
        evhttp_send_reply(req, HTTP_NOTMODIFIED, "Not Modified", NULL);
        return;
    }
    size_t n = given && since >= tags_table_seq_base(t) && since <= seq
               ? tags_table_changed(t, since, changed, CHANGES_MAX) : SIZE_MAX;
    bool full = n > CHANGES_MAX || n > count / 4 + 1;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        gw_tags_unlock(gw_tags(gw));
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "{\"time\":%lld,\"seq\":%llu,\"full\":%s,\"tags\":[", (long long)now,
                        (unsigned long long)seq, full ? "true" : "false");
    if (full && count > SLICE_TAGS) {   /* the first slice under this lock, the rest on later turns */
        add_tags(b, t, 0, SLICE_TAGS, now);
        gw_tags_unlock(gw_tags(gw));
        slice_later(l, req, b, now);
        return;
    }
    if (full)
        add_tags(b, t, 0, count, now);
    for (size_t k = 0; !full && k < n; k++) {
        if (k)
            evbuffer_add(b, ",", 1);
        http_tags_add_tag(b, t, changed[k], now, false);
    }
    gw_tags_unlock(gw_tags(gw));
    evbuffer_add_printf(b, "]}\n");
    gw_count(full ? &http_metrics(gw_http(gw))->tags_full : &http_metrics(gw_http(gw))->tags_since);
    atomic_fetch_add_explicit(&http_metrics(gw_http(gw))->tags_listed, full ? count : n, memory_order_relaxed);
    http_tags_reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

http_tags_list_t *http_tags_list_new(gw_t *gw, gw_http_t *h)
{
    http_tags_list_t *l = calloc(1, sizeof *l);
    if (l) {
        l->gw = gw;
        l->http = h;
    }
    return l;
}

/* After evhttp_free, which freed the requests: only our own parts go. */
void http_tags_list_free(http_tags_list_t *l)
{
    if (!l)
        return;
    while (l->slicing)
        slicer_free(l->slicing);
    free(l);
}

struct evhttp_connection *http_tags_list_abandon(http_tags_list_t *l, const struct bufferevent *bev)
{
    for (slicer_t *s = l->slicing; s; s = s->link)
        if (s->bev == bev) {   /* a list being built for a client that has gone */
            struct evhttp_connection *evcon = evhttp_request_get_connection(s->req);
            slicer_free(s);
            return evcon;
        }
    return NULL;
}
