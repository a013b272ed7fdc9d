/*
 * web/web.h -- the web side: /status, /metrics (http.c), /tags and tag
 * writes (http_tags.c), the configuration API /api/ (api.c, docs/api.md),
 * the page and /frames (web.c, web/page/), all on
 * libevent's evhttp on the I/O thread, within [http]'s bounds. Owns the
 * HTTP connections and their deadlines; HTTPS through its module
 * (http_tls.c, rtugw-https.so, OpenSSL). May call gateway/ (counters, the
 * cache, the tags, the frames, tag_write.c, the loop), front/ (the TLS and
 * serial slave counters it shows), parser/, config/, line/, json/, tags/,
 * module/ (where the HTTPS module is found), libevent and json-c.
 *
 * The wiring calls what this header declares.
 */
#ifndef RTUGW_WEB_WEB_H
#define RTUGW_WEB_WEB_H

#include "gateway/gateway.h"

#include <event2/event.h>

/* http.c (I/O thread) */
/* frames: the rings an earlier server left (http_release_frames), taken on
 * success; NULL at start */
gw_http_t *http_new(gw_t *gw, gw_frames_t *frames, char *err, size_t errcap);
void http_free(gw_http_t *h);
/* Before http_free while the buses run: the frame rings unpublished and
 * handed back (NULL: none), since an actor may still be recording into them. */
gw_frames_t *http_release_frames(gw_http_t *h);
/* SIGHUP: every [http] key applied live to run (the running configuration's
 * [http], which the daemon owns and hands here): the listener's address,
 * HTTPS on or off, users on or off, max_sessions, frame_ring and the rest.
 * What could not apply (a port in use, a certificate that does not load) is
 * named in res's restart, the first reason in its error; the running value
 * stays. */
void http_reload(gw_http_t *h, config_http_t *run, const config_t *fresh, reload_result_t *res);
/* [http] enabled turned off by a reload, maybe inside one of h's own
 * requests: h stops listening now, lets the requests in flight finish (their
 * answers written) for up to drain_ms, then cuts what is left; once nothing
 * of it runs, drained(-1, EV_TIMEOUT, arg) is called on a later turn of the
 * I/O thread, outside any event of h, where http_free(h) is safe if
 * http_drained(h) still holds; -1 (out of memory): still listening. http_reopen listens again (a reload turning
 * it back on first): -1 with err when bind:port cannot be bound. */
int http_close(gw_http_t *h, unsigned drain_ms, event_callback_fn drained, void *arg);   /* -1: no memory */
int http_reopen(gw_http_t *h, const char *bind, unsigned port, char *err, size_t errcap);
bool http_closing(const gw_http_t *h);
bool http_drained(const gw_http_t *h);

/* api.c: PUT /api/config without HTTP, for the MQTT module's config/set
 * (the daemon hands it to gateway/ as gw->config_put): if_match must be the
 * file's revision now (409 otherwise, 428 when NULL); then the one write
 * path: check, atomic write, reload. Takes text (malloc'd, len bytes, NUL
 * after them). The JSON body PUT /api/config answers goes into b; returns
 * its HTTP status. I/O thread. */
struct evbuffer;
int web_config_put(gw_t *gw, const char *if_match, char *text, size_t len, struct evbuffer *b);

/* auth.c: a crypt(3) yescrypt ("$y$") hash of password for [user NAME]
 * password_hash (`rtugw hash-password`); cost 1..11 (libxcrypt's). 0 with
 * the hash in out, or -1. */
int web_password_hash(const char *password, unsigned cost, char *out, size_t cap);

/* report.c: the web side's parts of the report table (gateway/report.h;
 * ctx: gw): the HTTP counters, HTTPS's and MB-TCP-Security's certificates,
 * the logins, the tags (their change number folded into /status's ETag,
 * their series); each device's tag counts (the table's device members);
 * json/'s string encoder, which the table hands to the parts below. */
gw_report_part_t web_report_http(gw_t *gw);
gw_report_part_t web_report_tls(gw_t *gw);
gw_report_part_t web_report_auth(gw_t *gw);
gw_report_part_t web_report_tags(gw_t *gw);
void web_report_device_tags(void *gw, unsigned d, struct evbuffer *b);
void web_report_str(struct evbuffer *b, const char *s);

#endif
