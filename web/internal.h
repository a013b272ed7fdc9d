/*
 * web/internal.h -- what http.c, http_tags.c and web.c share, and nothing else.
 */
#ifndef RTUGW_WEB_INTERNAL_H
#define RTUGW_WEB_INTERNAL_H

#include "web/web.h"

struct evhttp_request;
struct evhttp_connection;
struct evbuffer;
struct bufferevent;

/* A request answered later (a tag write): not cut by request_timeout_ms while held. */
void http_hold(gw_http_t *h, struct evhttp_request *req, bool held);
/* Tag writes waiting for their slave's answer. */

/* http_tags.c (I/O thread): GET /tags, /tags/NAME, PUT /tags/NAME, and the
 * tags' part of /status and /metrics. */
typedef struct gw_http_tags gw_http_tags_t;
gw_http_tags_t *http_tags_new(gw_t *gw, gw_http_t *h);
void http_tags_free(gw_http_tags_t *ht);
/* Answers req when path is /tags or /tags/NAME; false when it is not. */
bool http_tags_request(gw_http_tags_t *ht, struct evhttp_request *req, const char *path);
struct evhttp_connection *http_tags_abandon(gw_http_tags_t *ht, const struct bufferevent *bev);
/* ,"tags":{...} of config device d, for its /status object. */
void http_tags_status(gw_t *gw, unsigned d, struct evbuffer *b);
/* The tags' lines of /metrics (the gauges per tag only with [http] tag_metrics). */
void http_tags_metrics(gw_t *gw, struct evbuffer *b);

/* "Authorization: Bearer TOKEN" names token (http_tags.c; the API's writes use it too). */
bool http_bearer_ok(const char *header, const char *token);

/* api.c (I/O thread): /api/... (docs/api.md); false when path is not under /api/. */
bool api_request(gw_t *gw, struct evhttp_request *req, const char *path);

/* web.c (I/O thread): the web page's files and GET /frames. web_start makes
 * the frame ring when [http] frame_ring is set, web_stop frees it once the
 * buses are stopped; web_handle answers req when path is one of its own. */
int web_start(gw_t *gw, char *err, size_t errcap);
void web_stop(gw_t *gw);
bool web_handle(gw_t *gw, struct evhttp_request *req, const char *path);

#endif
