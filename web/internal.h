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
/* /status: the tags' change number (swept; its tag counts brought up to it),
 * then ,"tags":{...} of config device d, for its /status object. */
uint64_t http_tags_seq(gw_http_tags_t *ht);
void http_tags_status(gw_http_tags_t *ht, unsigned d, struct evbuffer *b);
/* tag_json.c: the JSON of tag i of t ({"name", ... }; with `full` what it
 * is too), for http_tags.c and http_tags_list.c; a string quoted (cut past
 * a string tag's longest value), a value as "value" writes it, and a
 * number that is NaN or infinite made bad (its text in text[8]). */
void http_tags_add_tag(struct evbuffer *b, const tags_table_t *t, size_t i, int64_t now_ms, bool full);
void http_json_str(struct evbuffer *b, const char *s);
void http_json_value(struct evbuffer *b, const tags_tag_t *g, const tags_value_t *v);
void http_json_quality(const tags_tag_t *g, tags_value_t *v, char text[8]);
/* Answers in JSON, shared by http_tags.c and http_tags_list.c. */
void http_tags_reply_json(struct evhttp_request *req, int code, const char *reason, struct evbuffer *b);
/* {"tag": NAME, "ok": false, "error": WHY}, with the HTTP status that says so. */
void http_tags_reply_error(struct evhttp_request *req, int code, const char *reason, const char *tag,
                           const char *why);

/* http_tags_list.c (I/O thread): GET /tags, whole or what changed (?since=,
 * 304), whole lists of many tags in slices; its client gone, abandon hands
 * back the connection of a list being built (NULL: none for bev). */
typedef struct http_tags_list http_tags_list_t;
http_tags_list_t *http_tags_list_new(gw_t *gw, gw_http_t *h);
void http_tags_list_free(http_tags_list_t *l);
void http_tags_list_get(http_tags_list_t *l, struct evhttp_request *req);
struct evhttp_connection *http_tags_list_abandon(http_tags_list_t *l, const struct bufferevent *bev);
/* Whether req's If-None-Match names etag (a quoted string) or is "*". */
bool http_not_modified(struct evhttp_request *req, const char *etag);
/* The tags' lines of /metrics (the gauges per tag only with [http] tag_metrics). */
void http_tags_metrics(gw_t *gw, struct evbuffer *b);

/* api.c (I/O thread): /api/... (docs/api.md); false when path is not under /api/. */
bool api_request(gw_t *gw, struct evhttp_request *req, const char *path);
/* api.c's one way of answering, checking and writing, shared with api_csv.c:
 * every answer through api_reply_json (a 4xx counted), the admin check
 * (answered when false), If-Match against rev (428/409 answered when false),
 * a file's bytes (NULL with errno), the FNV-1a revision, the atomic write
 * (temporary file, fsync, rename, folder fsync), check's validation of a
 * configuration text and its errors as a JSON member. */
void api_add_str(struct evbuffer *b, const char *s);
void api_reply_json(gw_t *gw, struct evhttp_request *req, int code, const char *reason, struct evbuffer *b);
void api_reply_error(gw_t *gw, struct evhttp_request *req, int code, const char *reason, const char *why);
void api_revision(const char *text, size_t len, char out[17]);
char *api_read_file(const char *path, size_t *len);
int api_write_atomically(const char *link, const char *text, size_t len, char *why, size_t cap);
bool api_admin_ok(gw_t *gw, struct evhttp_request *req);
bool api_revision_matches(gw_t *gw, struct evhttp_request *req, const char *rev, struct evbuffer *b);
config_t *api_validate(gw_t *gw, const char *text, config_errors_t *errs);
void api_add_errors(struct evbuffer *b, const config_errors_t *errs);
void api_add_warnings(struct evbuffer *b, const config_t *cfg);
/* The file now and its revision; NULL when it cannot be read (answered 500). */
char *api_current(gw_t *gw, struct evhttp_request *req, size_t *len, char rev[17]);
/* The one write path: check, atomic write, reload, answered. Takes text. */
void api_commit_text(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, char *text, size_t len);
/* api_section.c: the [KIND NAME] an /api/ path stands for ("devices/m1":
 * "device", *name "m1"), or NULL; PUT or DELETE of it. */
const char *api_section_kind(const char *what, const char **name);
void api_edit_section(gw_t *gw, struct evhttp_request *req, struct evbuffer *b, const char *kind,
                      const char *name, bool delete);
/* After a change applied (gw->reload): ,"restart_needed":"...","queued":"..." -- what
 * waits for a restart, and what waits for the tag writes in flight to end. */
void api_add_reload_result(gw_t *gw, struct evbuffer *b);
/* api_csv.c: /api/templates/NAME/csv (GET, PUT, PUT ?dry_run=1); false when
 * what (the path after /api/) is not one. */
bool api_csv_request(gw_t *gw, struct evhttp_request *req, const char *what, struct evbuffer *b);
/* api_maps.c: GET /api/maps, each [map NAME] and its entries (a viewer's). */
void api_list_maps(gw_t *gw, struct evbuffer *b);

/* api_scan.c: /api/scan (POST, GET) and /api/scan/BUS (GET): a scan of a bus
 * (gateway/scan.c); false when what (the path after /api/) is not one. */
bool api_scan_request(gw_t *gw, struct evhttp_request *req, const char *what, struct evbuffer *b);

/* fails.c (I/O thread): a bounded table of failed-login records by key
 * (auth.c keeps one for addresses, one for user names). fail_wait_s: the
 * seconds until key is heard again (0: now); fail_note: one more failure
 * (protect: never pushed out by other keys); fail_clear: a success. */
typedef struct fail_table fail_table_t;
fail_table_t *fail_table_new(unsigned cap);
void fail_table_free(fail_table_t *t);
unsigned fail_wait_s(fail_table_t *t, const char *key, uint64_t now);
void fail_note(fail_table_t *t, const char *key, bool protect, uint64_t now);
void fail_clear(fail_table_t *t, const char *key, uint64_t now);
void fail_evictions(const fail_table_t *t, uint64_t *evicted, uint64_t *evicted_penalized);

/* host.c (I/O thread): false when req was answered (421 for a Host not in
 * [http] server_names; 400 for HTTP/1.1 without Host, two Hosts, two
 * Content-Lengths that differ), the connection then closed. */
bool web_host_check(gw_t *gw, struct evhttp_request *req);
/* Whether a Host's name (port and brackets taken off) is served. */
bool web_host_allowed(const config_http_t *cfg, const char *host);

/* stale.c: at start, removes (and logs) the NAME.api-XXXXXX temporaries a
 * killed write left beside the configuration and its tag files; how many. */
unsigned web_remove_stale_temporaries(gw_t *gw);

/* web.c (I/O thread): the web page's files and GET /frames. web_start makes
 * the frame ring when [http] frame_ring is set (into *kept, http.c's; an
 * earlier server's rings when *kept holds them: resized, not made again),
 * web_frames_reload resizes, makes or unpublishes it on a reload,
 * web_stop frees it once the buses are stopped; web_handle answers req when
 * path is one of its own. */
int web_start(gw_t *gw, gw_frames_t **kept, char *err, size_t errcap);
int web_frames_reload(gw_t *gw, gw_frames_t **kept, unsigned cap, char *err, size_t errcap);
void web_stop(gw_t *gw, gw_frames_t *kept);
bool web_handle(gw_t *gw, struct evhttp_request *req, const char *path);

/* The HTTP server's counters (http.c's gw_http_t holds them): written on
 * the I/O thread, read by /metrics, relaxed atomics with one writer. */
typedef struct gw_http_metrics {
    atomic_uint_fast64_t accepted, refused, requests, timed_out, active;
    atomic_uint_fast64_t tag_writes, tag_writes_refused, tag_write_failures, tag_writes_abandoned;
    atomic_uint_fast64_t api_changes, api_refused;   /* web/api.c: files written; requests refused */
    atomic_uint_fast64_t misdirected;   /* web/host.c: a Host not in server_names (421) */
    /* web/http_tags.c: GET /tags answered whole, with changes only, 304; tags formatted; bad since */
    atomic_uint_fast64_t tags_full, tags_since, tags_not_modified, tags_listed, tags_refused, tags_slices;
    atomic_uint_fast64_t status_not_modified;   /* web/http.c: GET /status answered 304 */
} gw_http_metrics_t;
gw_http_metrics_t *http_metrics(gw_http_t *h);   /* NULL for h NULL: no [http] */
/* One more of gw's HTTP counter f; nothing without [http] (MQTT's
 * config/set runs the API's write path without it). */
#define web_count(gw, f)                                                                                               \
    do {                                                                                                               \
        gw_http_metrics_t *m_ = http_metrics(gw_http(gw));                                                            \
        if (m_)                                                                                                        \
            gw_count(&m_->f);                                                                                          \
    } while (0)

/* The web side's own parts of gw_http_t (http.c). */
gw_http_tags_t *http_tags(gw_http_t *h);
typedef struct web_auth web_auth_t;
typedef struct web_audit web_audit_t;
web_auth_t *http_auth(gw_http_t *h);
web_audit_t *http_audit(gw_http_t *h);
/* status.c: GET /status. */
void http_on_status(struct evhttp_request *req, void *arg);
/* metrics.c: GET /metrics. */
void http_on_metrics(struct evhttp_request *req, void *arg);

/*
 * auth.c (I/O thread): users, roles, logins and sessions; docs/security.md.
 * Roles are config/'s (CONFIG_ROLE_VIEWER < OPERATOR < ADMIN): a role may
 * do what the ones below it may.
 */
#define ROLE_VIEWER CONFIG_ROLE_VIEWER
#define ROLE_OPERATOR CONFIG_ROLE_OPERATOR
#define ROLE_ADMIN CONFIG_ROLE_ADMIN
typedef struct web_who {
    config_user_role_t role;            /* CONFIG_ROLE_NONE: no valid credential */
    char name[CONFIG_NAME_MAX];         /* the user, "write_token", or "" */
    const char *via;                    /* "cookie", "bearer", "write_token", "open" or "none" */
    const char *why;                    /* with NONE: why, for a 401 */
    bool cross_site;                    /* NONE because of its Origin: a 403 */
} web_who_t;
/* password.c: whether password hashes to hash (in constant time; a hash
 * crypt cannot use never matches). */
bool web_password_matches(const char *password, const char *hash);
web_auth_t *web_auth_new(gw_t *gw);
void web_auth_free(web_auth_t *a);
/* Who req is: its session (cookie or bearer), the write_token, or without
 * users "open" (a viewer). A write whose Origin is another site's is NONE. */
config_user_role_t web_auth_who(web_auth_t *a, struct evhttp_request *req, web_who_t *who);
/*
 * THE check for a handler: true when req's client has role need or more;
 * else req is answered (401 without a valid credential, with
 * WWW-Authenticate; 403 naming the role it has and the one it needs) and
 * false is returned: the handler just returns. E.g. a configuration change
 * under /api/: `if (!web_auth_require(gw, req, ROLE_ADMIN)) return;`.
 * Without users, the write_token counts as admin and no credential as a
 * viewer. (web_auth_route already applies it to every route by path and
 * method: /api/ writes need admin.)
 */
bool web_auth_require(gw_t *gw, struct evhttp_request *req, config_user_role_t need);
/* The guard on_request runs first: false when req was answered (refused). */
bool web_auth_route(web_auth_t *a, struct evhttp_request *req, const char *path);
/* Answers POST /login, POST /logout, GET /whoami, GET /audit; false for other paths. */
bool web_auth_handle(web_auth_t *a, struct evhttp_request *req, const char *path);
void web_auth_metrics(const web_auth_t *a, struct evbuffer *b);
/* SIGHUP changed the users (both lists not empty): the sessions they no
 * longer back end. */
unsigned web_auth_users_changed(web_auth_t *a, const config_http_t *run, const config_http_t *fresh);
/* SIGHUP turned users on or off, or changed max_sessions: the session table
 * made again (every session ends when users turn on or off; else the ones
 * admins' and those expiring last are kept). -1: out of memory, unchanged;
 * else *ended. */
int web_auth_resize(web_auth_t *a, const config_http_t *run, const config_http_t *fresh, unsigned *ended);
void web_auth_peer(struct evhttp_request *req, char *out, size_t cap);   /* "ADDRESS:PORT" */
/* {"ok":false,"error":WHY} with code. */
void web_reply_error(struct evhttp_request *req, int code, const char *reason, const char *why);

/*
 * audit.c (I/O thread): every write and configuration change, login and
 * logout, with who (web_auth_who), from where, the request and what; to the
 * log at info and to a ring shown to admins at GET /audit. Callers: a tag
 * write, a configuration change (call it once the change is applied).
 */
web_audit_t *web_audit_new(void);
void web_audit_free(web_audit_t *au);
__attribute__((format(printf, 3, 4)))
void web_audit(gw_t *gw, struct evhttp_request *req, const char *fmt, ...);
/* A refusal (a write refused for its role, a failed login): logged as any
 * entry, kept in a ring of its own, repeats from one address counted. */
__attribute__((format(printf, 3, 4)))
void web_audit_refused(gw_t *gw, struct evhttp_request *req, const char *fmt, ...);
void web_audit_json(gw_t *gw, struct evhttp_request *req);

/*
 * http_tls.c (I/O thread): [http] over TLS, when tls_cert is set. It loads
 * the HTTPS module (web/https.c, rtugw-https.so) and makes its context;
 * evhttp's bufferevents come from http_tls_bev, TLS ones then. It also
 * writes the TLS parts of /status and /metrics (MB-TCP-Security's too).
 */
typedef struct http_tls http_tls_t;
http_tls_t *http_tls(gw_http_t *h);   /* http.c: [http] tls_cert's, or NULL */
/* SIGHUP: the certificate and key read again (new connections get them;
 * open ones keep theirs). -1 with err: the running ones are kept. */
int http_tls_reload(http_tls_t *t, const config_t *root, const config_http_t *cfg, char *err, size_t errcap);
struct event_base;
/* NULL with err naming the file when the module or a file does not load;
 * root: the configuration whose folder and data_dirs hold the files. */
http_tls_t *http_tls_new(const config_t *root, const config_http_t *cfg, char *err, size_t errcap);
void http_tls_free(http_tls_t *t);
/* A new connection's bufferevent, without its descriptor yet: a TLS one
 * that handshakes first, or plain with t NULL. NULL: out of memory. */
struct bufferevent *http_tls_bev(http_tls_t *t, struct event_base *base);
/* evhttp is done with bev: counted as a finished or failed handshake. */
void http_tls_released(http_tls_t *t, struct bufferevent *bev, bool handshaken);
/* Whether bev's handshake has finished (false for plain HTTP: t NULL). */
bool http_tls_established(const http_tls_t *t, struct bufferevent *bev);
void http_tls_metrics(gw_t *gw, const http_tls_t *t, struct evbuffer *b);
/* ,"tls":{...} (MB-TCP-Security) and ,"https":{...} of /status. */
void http_tls_status(gw_t *gw, const http_tls_t *t, struct evbuffer *b);

/*
 * The HTTPS module's table (web/https.c, built as rtugw-https.so, loaded by
 * http_tls.c only when [http] tls_cert is set, so that a daemon without it
 * never maps libssl). The module calls nothing of the daemon's.
 */
#define WEB_HTTPS_MODULE_ABI 2
typedef struct https_ctx https_ctx_t;
typedef struct web_https_module {
    unsigned abi;   /* WEB_HTTPS_MODULE_ABI */
    /* A server context of the certificate chain and key files (PEM); NULL
     * with err naming the file and OpenSSL's reason. */
    https_ctx_t *(*ctx_new)(const char *cert, const char *key, const char *ciphers, unsigned min_version, char *err,
                            size_t cap);
    void (*ctx_free)(https_ctx_t *ctx);   /* open connections keep theirs */
    void (*ctx_certificate)(const https_ctx_t *ctx, char *subject, size_t cap, int64_t *not_after);
    /* A bufferevent that runs the server side of a handshake once evhttp
     * gives it its descriptor; NULL: out of memory. */
    struct bufferevent *(*accept)(https_ctx_t *ctx, struct event_base *base);
    bool (*established)(struct bufferevent *bev);   /* the handshake finished */
} web_https_module_t;

#endif
