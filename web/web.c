/*
 * web/web.c -- the web page (GET /, /app.js, /style.css) and its frame
 * monitor's data (GET /frames?bus=NAME&since=SEQ&limit=N), on http.c's server.
 *
 * The page's files are in web/page/, compiled into the binary by
 * web/page/embed.sh (an `xxd -i` that needs only od): nothing to install,
 * nothing fetched from elsewhere, and the page always matches the daemon that
 * serves it. The page reads /status (and /tags where the daemon has them) for
 * everything it shows but the frames; /frames is ordinary JSON too, for any
 * client. A strict Content-Security-Policy holds the page to its own origin.
 */
#include "web/internal.h"
#include "json/json.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* web/web_assets.c, generated from web/page/ at build time. */
extern const unsigned char web_index_html[], web_app_js[], web_config_js[], web_scan_js[], web_style_css[];
extern const size_t web_index_html_len, web_app_js_len, web_config_js_len, web_scan_js_len, web_style_css_len;

typedef struct web_asset {
    const char *path;
    const char *type;
    const unsigned char *data;
    const size_t *len;
} web_asset_t;

static const web_asset_t assets[] = {
    { "/", "text/html; charset=utf-8", web_index_html, &web_index_html_len },
    { "/app.js", "text/javascript; charset=utf-8", web_app_js, &web_app_js_len },
    { "/config.js", "text/javascript; charset=utf-8", web_config_js, &web_config_js_len },
    { "/scan.js", "text/javascript; charset=utf-8", web_scan_js, &web_scan_js_len },
    { "/style.css", "text/css; charset=utf-8", web_style_css, &web_style_css_len },
};

#define FRAMES_LIMIT_MAX 256   /* frames in one reply (frames.c holds the same bound) */

int web_start(gw_t *gw, gw_frames_t **kept, char *err, size_t errcap)
{
    return web_frames_reload(gw, kept, gw_config(gw)->http.frame_ring, err, errcap);
}

/*
 * [http] frame_ring, at the start and by a reload. The rings are made once,
 * at the first non-zero frame_ring, and *kept holds them until web_stop:
 * a bus actor on a worker may have loaded the pointer an instant before a
 * change and be about to record, so they are never freed while the buses
 * run. A change resizes them in place (frames_resize, under each ring's
 * lock); 0 unpublishes them (an actor then loads NULL and records nothing;
 * one that loaded them before finds capacity 0). -1 with err: out of
 * memory, the rings in force kept.
 */
int web_frames_reload(gw_t *gw, gw_frames_t **kept, unsigned cap, char *err, size_t errcap)
{
    if (!*kept && cap && !(*kept = frames_new(gw_bus_count(gw), cap))) {
        snprintf(err, errcap, "[http] frame_ring = %u: out of memory for %u buses", cap, gw_bus_count(gw));
        return -ENOMEM;
    }
    if (*kept && frames_capacity(*kept) != cap && frames_resize(*kept, gw_bus_count(gw), cap) != 0) {
        snprintf(err, errcap, "[http] frame_ring = %u: out of memory for %u buses", cap, gw_bus_count(gw));
        return -ENOMEM;
    }
    gw_frames_publish(gw, cap ? *kept : NULL);
    return 0;
}

void web_stop(gw_t *gw, gw_frames_t *kept)
{
    /* the buses' actors are stopped by now (gw_free): nobody records */
    gw_frames_publish(gw, NULL);
    frames_free(kept);
}

static void send_asset(struct evhttp_request *req, const web_asset_t *a)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_reference(b, a->data, *a->len, NULL, NULL);
    evhttp_add_header(h, "Content-Type", a->type);
    /* a daemon upgraded in place serves its own page at once */
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    evhttp_add_header(h, "Content-Security-Policy",
                      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                      "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void reply_json(struct evhttp_request *req, int code, const char *reason, struct evbuffer *b)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, reason, b);
}

/* Digits only, at most max. */
static bool parse_u64(const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    if (!v || *v < '0' || *v > '9' || strlen(v) > 20)
        return false;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x > max)
        return false;
    *out = x;
    return true;
}

/* 0 with bus, since and limit set from the query; else the HTTP status of
 * its refusal, with why filled. */
static int frames_query(const gw_t *gw, struct evkeyvalq *q, unsigned *bus, uint64_t *since, uint64_t *limit,
                        char *why, size_t cap)
{
    const char *name = evhttp_find_header(q, "bus");
    const char *s = evhttp_find_header(q, "since"), *l = evhttp_find_header(q, "limit");
    int k;

    for (struct evkeyval *kv = q->tqh_first; kv; kv = kv->next.tqe_next)
        if (strcmp(kv->key, "bus") && strcmp(kv->key, "since") && strcmp(kv->key, "limit"))
            return snprintf(why, cap, "unknown parameter '%.64s': expected bus, since and limit", kv->key),
                   HTTP_BADREQUEST;
    if (!name)
        return snprintf(why, cap, "bus=NAME is missing"), HTTP_BADREQUEST;
    if ((k = config_find_bus(gw_config(gw), name)) < 0)
        return snprintf(why, cap, "no bus named '%.64s'", name), HTTP_NOTFOUND;
    *bus = (unsigned)k;
    *since = 0;
    *limit = FRAMES_LIMIT_MAX;
    if (s && !parse_u64(s, UINT64_MAX, since))
        return snprintf(why, cap, "since = '%.64s': expected a frame number, 0 or more", s), HTTP_BADREQUEST;
    if (l && (!parse_u64(l, FRAMES_LIMIT_MAX, limit) || *limit == 0))
        return snprintf(why, cap, "limit = '%.64s': expected 1..%d", l, FRAMES_LIMIT_MAX), HTTP_BADREQUEST;
    return 0;
}

static void on_frames(gw_t *gw, struct evhttp_request *req)
{
    struct evkeyvalq q;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    char why[320];
    unsigned bus = 0;
    uint64_t since = 0, limit = 0;

    /* it initialises q, and on failure empties it */
    if (evhttp_parse_query_str(query ? query : "", &q) != 0) {
        web_reply_error(req, HTTP_BADREQUEST, "Bad Request", "the query is not NAME=VALUE&...");
        return;
    }
    int code = frames_query(gw, &q, &bus, &since, &limit, why, sizeof why);
    evhttp_clear_headers(&q);
    if (code) {
        web_reply_error(req, code, code == HTTP_NOTFOUND ? "Not Found" : "Bad Request", why);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    gw_frames_t *f = gw_frames(gw);
    char name[JSON_QUOTED_MAX(CONFIG_NAME_MAX)];
    json_quote(name, sizeof name, gw_config(gw)->buses[bus].name);
    evbuffer_add_printf(b, "{\"bus\":%s,\"enabled\":%s,\"capacity\":%u,", name, f ? "true" : "false",
                        frames_capacity(f));
    if (f)
        frames_json(f, bus, since, (unsigned)limit, b);
    else
        evbuffer_add_printf(b, "\"last\":0,\"missed\":0,\"skipped\":0,\"reset\":false,\"frames\":[]");
    evbuffer_add_printf(b, "}\n");
    reply_json(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

bool web_handle(gw_t *gw, struct evhttp_request *req, const char *path)
{
    if (strcmp(path, "/frames") == 0) {
        on_frames(gw, req);
        return true;
    }
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++)
        if (strcmp(path, assets[i].path) == 0 || (i == 0 && strcmp(path, "/index.html") == 0)) {
            send_asset(req, &assets[i]);
            return true;
        }
    return false;
}
