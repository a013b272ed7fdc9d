/*
 * web/http.c -- the HTTP server, libevent's evhttp on the I/O thread: the
 * routing of every request, the connections' bounds, the server's counters.
 * /status is status.c's, /metrics metrics.c's, the /tags part http_tags.c's;
 * the web page and /frames are web.c's. Only /tags/NAME takes PUT.
 */
#include "front/front.h"
#include "web/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct http_conn {
    struct bufferevent *bev;       /* evhttp's, with a reference of ours */
    uint64_t since_ns;             /* accepted, or last answered: a request is due by then + limit */
    bool refuse;                   /* beyond max_connections */
    bool held;                     /* a request of it waits for a bus (a tag write) */
    bool nodelay;                  /* TCP_NODELAY set (at its first request) */
    bool handshaken;               /* HTTPS: its handshake finished (seen while it was open) */
    struct http_conn *next;
} http_conn_t;

struct gw_http {
    gw_t *gw;
    struct evhttp *http;
    struct evconnlistener *listener;
    struct event *ev_sweep;
    http_conn_t *conns;
    unsigned active;
    gw_http_tags_t *tags;
    http_tls_t *tls;               /* [http] tls_cert: HTTPS; NULL: plain HTTP */
    web_auth_t *auth;              /* users, sessions (auth.c) */
    web_audit_t *audit;            /* the audit ring (audit.c) */
    gw_http_metrics_t metrics;
};

web_auth_t *http_auth(gw_http_t *h) { return h->auth; }
http_tls_t *http_tls(gw_http_t *h) { return h->tls; }
web_audit_t *http_audit(gw_http_t *h) { return h->audit; }
gw_http_tags_t *http_tags(gw_http_t *h) { return h->tags; }
gw_http_metrics_t *http_metrics(gw_http_t *h) { return h ? &h->metrics : NULL; }

/* ---- connections: the references we keep, and their deadlines --------------- */

static http_conn_t *conn_of(gw_http_t *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    for (http_conn_t *c = h->conns; c; c = c->next)
        if (c->bev == bev)
            return c;
    return NULL;
}

/* evhttp is closing a connection: the sweep right after it frees the
 * bufferevent releases our reference, so the descriptor closes now, not
 * up to 250 ms later. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
    gw_http_t *h = arg;
    (void)evcon;
    event_active(h->ev_sweep, EV_TIMEOUT, 0);
}

/* Every request passes here: it is complete, so the deadline starts over. */
static void on_request(struct evhttp_request *req, void *arg)
{
    gw_http_t *h = arg;
    http_conn_t *c = conn_of(h, req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

    if (c)
        c->since_ns = gw_now_ns();
    if (c && !c->nodelay && bufferevent_getfd(c->bev) >= 0) {
        /* An answer is one write, but under TLS 1.3 the session ticket went
         * just before it: Nagle held the answer for the client's delayed ACK
         * (40 ms a request on Linux, measured). */
        int one = 1;
        setsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->nodelay = true;
    }
    if (h->tls && !c) {
        /* a connection evhttp made itself (make_bev was out of memory): plain
         * HTTP on the HTTPS port, never served */
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        if (bev && bufferevent_getfd(bev) >= 0)
            shutdown(bufferevent_getfd(bev), SHUT_RDWR);
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    if (evhttp_request_get_connection(req))
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_close, h);
    gw_count(&h->metrics.requests);
    if (c && h->tls)
        c->handshaken = true;   /* a request came through: its handshake finished */
    if (!web_host_check(h->gw, req))
        return;   /* another Host (DNS rebinding), none, or an ambiguous length */
    if (!web_auth_route(h->auth, req, path))
        return;   /* refused: no session, a role too low, cross-site */
    if (path && (web_auth_handle(h->auth, req, path) || http_tags_request(h->tags, req, path) ||
                 api_request(h->gw, req, path)))
        return;
    if (evhttp_request_get_command(req) & (EVHTTP_REQ_PUT | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        evhttp_send_error(req, 405, "only /tags/NAME takes PUT, /login and /logout POST, /api/ PUT, POST and DELETE");
    } else if (path && strcmp(path, "/metrics") == 0)
        http_on_metrics(req, h->gw);
    else if (path && strcmp(path, "/status") == 0)
        http_on_status(req, h->gw);
    else if (!path || !web_handle(h->gw, req, path))
        evhttp_send_error(req, HTTP_NOTFOUND, "not found");
}

/* evhttp asks us for each new connection's bufferevent: we keep a reference. */
static void sweep_arm(gw_http_t *h);

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    gw_http_t *h = arg;
    http_conn_t *c = calloc(1, sizeof *c);
    struct bufferevent *bev = c ? http_tls_bev(h->tls, base) : NULL;
    if (!bev) {
        /* evhttp makes its own, plain: it is then neither capped nor timed,
         * and on an HTTPS port it must not be served at all */
        free(c);
        return NULL;
    }
    bufferevent_incref(bev);
    /* Past this much unparsed input the connection stops being read: evhttp
     * checks max_header_bytes only at the end of a line, and a header line
     * without an end would otherwise grow without bound. What is not read
     * waits in the kernel's socket buffer until the deadline cuts it. */
    const config_http_t *cfg = &gw_config(h->gw)->http;
    bufferevent_setwatermark(bev, EV_READ, 0, (size_t)cfg->max_header_bytes + cfg->max_body_bytes + 4096);
    *c = (http_conn_t){ .bev = bev, .since_ns = gw_now_ns(), .next = h->conns };
    h->conns = c;
    h->active++;
    sweep_arm(h);
    gw_set(&h->metrics.active, h->active);
    gw_count(&h->metrics.accepted);
    if (h->active >= cfg->max_connections) {
        /* Full: the listener rests (more clients wait in the kernel's
         * backlog, costing us nothing) until the sweep finds room. */
        evconnlistener_disable(h->listener);
        if (h->active > cfg->max_connections) {
            c->refuse = true;   /* its descriptor is set after we return: the sweep closes it, now */
            event_active(h->ev_sweep, EV_TIMEOUT, 0);
        }
    }
    return bev;
}

/*
 * Out of descriptors: libevent's listener would retry accept() at once,
 * forever. It is paused instead and resumed 250 ms later. (evhttp
 * owns the listener's callback argument, so such failures are counted by
 * the Modbus TCP front end's accept_errors, which meets the same limit.)
 */
static void resume_listener(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct timeval quarter = { 0, 250000 };
    (void)arg;
    evconnlistener_disable(l);
    /* Resumed in 250 ms by a one-shot timer, not by the sweep, which runs only
     * while there are connections. At the cap, the connection it may then
     * accept is refused as any past the cap is (make_bev). */
    if (event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, resume_listener, l, &quarter) != 0)
        evconnlistener_enable(l);   /* no timer: libevent's own retry at once, as without the pause */
}

/* Is evhttp done with it? bufferevent_free() clears the callbacks, and our
 * reference keeps the rest alive until we drop it. */
static bool released(struct bufferevent *bev)
{
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb ev;
    void *arg;
    bufferevent_getcb(bev, &rd, &wr, &ev, &arg);
    return !rd && !wr && !ev;
}

/*
 * Has the client of a held request (a tag write waiting for its bus) gone?
 * evhttp does not read a connection while its request is unanswered, so it
 * cannot tell, and such a connection would hold one of max_connections
 * until the bus gives up on the write (seconds per write on a silent
 * slave). A peek tells: end of file or an error. A client that only shut
 * its sending side (half-close) and still waits counts as gone too, as
 * nginx counts it: HTTP has no use for a half-close, and the write it sent
 * is then dropped if not yet on the line, or its answer goes to no one.
 * Bytes waiting (a pipelined request) mean it is still there.
 */
static bool client_gone(struct bufferevent *bev)
{
    evutil_socket_t sock = bufferevent_getfd(bev);
    char byte;
    if (sock < 0)
        return false;
    ssize_t n = recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/*
 * The sweep (request deadlines, refusals, released connections, the
 * listener's rest at the cap) runs every 250 ms while there is a connection,
 * and not at all without one (docs/footprint.md): an idle gateway's I/O
 * thread sleeps. It is also run at once (event_active) when a connection
 * closes or is refused.
 */
static void sweep_arm(gw_http_t *h)
{
    if (!evtimer_pending(h->ev_sweep, NULL)) {
        struct timeval quarter = { 0, 250000 };
        event_add(h->ev_sweep, &quarter);
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    gw_http_t *h = arg;
    uint64_t now = gw_now_ns(), limit = (uint64_t)gw_config(h->gw)->http.request_timeout_ms * 1000000ull;
    (void)fd;
    (void)what;
    for (http_conn_t **pp = &h->conns, *c; (c = *pp) != NULL;) {
        if (released(c->bev)) {
            *pp = c->next;
            http_tls_released(h->tls, c->bev, c->handshaken);
            bufferevent_decref(c->bev);   /* the last reference: closes its descriptor */
            free(c);
            h->active--;
            continue;
        }
        /* Judged while it is open: once shut down (an answer with
         * Connection: close, an idle keep-alive cut), OpenSSL no longer says
         * its handshake had finished, and it was counted a failed one. */
        if (h->tls && !c->handshaken)
            c->handshaken = http_tls_established(h->tls, c->bev);
        struct evhttp_connection *abandoned = c->held && client_gone(c->bev)
                                                  ? http_tags_abandon(h->tags, c->bev) : NULL;
        if (abandoned) {
            c->held = false;
            evhttp_connection_free(abandoned);   /* frees its request too; released on the next sweep */
            pp = &c->next;
            continue;
        }
        bool late = !c->held && now - c->since_ns > limit;
        if (late || c->refuse) {
            evutil_socket_t sock = bufferevent_getfd(c->bev);
            gw_count(c->refuse ? &h->metrics.refused : &h->metrics.timed_out);
            c->refuse = false;
            c->since_ns = UINT64_MAX / 2;   /* once */
            if (sock >= 0)
                shutdown(sock, SHUT_RDWR);
        }
        pp = &c->next;
    }
    gw_set(&h->metrics.active, h->active);
    if (h->active < gw_config(h->gw)->http.max_connections)
        evconnlistener_enable(h->listener);   /* after a pause for room or for descriptors */
    if (!h->conns)
        event_del(h->ev_sweep);   /* sweep_arm() starts it again with the next connection */
}

void http_hold(gw_http_t *h, struct evhttp_request *req, bool held)
{
    http_conn_t *c = conn_of(h, req);
    if (!c)
        return;   /* its client has gone */
    c->held = held;
    c->since_ns = gw_now_ns();   /* answered: the next request is due from now */
}

gw_http_t *http_new(gw_t *gw, char *err, size_t errcap)
{
    const config_http_t *cfg = &gw_config(gw)->http;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port) };
    gw_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    h->gw = gw;
    if (!(h->tags = http_tags_new(gw, h)) || !(h->auth = web_auth_new(gw)) || !(h->audit = web_audit_new())) {
        snprintf(err, errcap, "out of memory");
        http_free(h);
        return NULL;
    }
    if (inet_pton(AF_INET, cfg->bind, &sin.sin_addr) != 1) {
        snprintf(err, errcap, "[http] bind = '%s': not an IPv4 address", cfg->bind);
        http_free(h);
        return NULL;
    }
    if (cfg->tls_cert[0] && !(h->tls = http_tls_new(gw_config(h->gw), cfg, err, errcap))) {
        http_free(h);
        return NULL;
    }
    h->http = evhttp_new(loop_base(gw_loop(gw)));
    h->listener = evconnlistener_new_bind(loop_base(gw_loop(gw)), NULL, NULL,
                                          LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 64,
                                          (struct sockaddr *)&sin, sizeof sin);
    h->ev_sweep = event_new(loop_base(gw_loop(gw)), -1, EV_PERSIST, on_sweep, h);
    if (!h->http || !h->listener || !h->ev_sweep) {
        snprintf(err, errcap, "http: cannot listen on %s:%u: %s", cfg->bind, cfg->port, strerror(errno));
        http_free(h);
        return NULL;
    }
    evhttp_set_bevcb(h->http, make_bev, h);
    if (!evhttp_bind_listener(h->http, h->listener)) {
        snprintf(err, errcap, "http: cannot serve on %s:%u", cfg->bind, cfg->port);
        http_free(h);
        return NULL;
    }
    evconnlistener_set_error_cb(h->listener, on_accept_error);
    evhttp_set_max_headers_size(h->http, cfg->max_header_bytes);
    evhttp_set_max_body_size(h->http, cfg->max_body_bytes);
    evhttp_set_timeout(h->http, (int)cfg->idle_timeout_s);
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_POST |
                                              EVHTTP_REQ_DELETE);
    evhttp_set_gencb(h->http, on_request, h);
    web_remove_stale_temporaries(gw);   /* before the API can make new ones */
    if (web_start(gw, err, errcap) != 0) {
        http_free(h);
        return NULL;
    }
    return h;
}

/*
 * SIGHUP (daemon/control.c): what of [http] can change while it runs does.
 * The users (when there were some and still are: no users is another way
 * of working, reads open and writes by write_token), the write_token,
 * server_names, metrics_open and session_timeout_s are taken as they are;
 * sessions the new users no longer back end (auth.c). With HTTPS on before
 * and after, the certificate and key (with tls_ciphers and tls_min_version)
 * are read again, whether their paths changed or a renewal rewrote the
 * files: new connections get them, open ones keep theirs; if they do not
 * load, the running ones stay and the log says why.
 * Its bounds (max_connections, max_header_bytes, max_body_bytes,
 * request_timeout_ms, idle_timeout_s, max_sessions_per_user) and
 * tag_metrics apply from the next connection or request. The rest (the
 * listener's address, frame_ring, max_sessions, HTTPS on or off, users from
 * none or to none) is named in restart, as the other sections' keys are.
 */
void http_reload(gw_http_t *h, config_http_t *run, const config_t *fresh, char *restart, size_t cap)
{
    const config_http_t *f = &fresh->http;
    config_http_t a = *run, b = *f;
    bool users_live = run->user_count && f->user_count;
    bool tls_live = h->tls && run->tls_cert[0] && f->tls_cert[0];
    config_http_t *both[2] = { &a, &b };
    for (int k = 0; k < 2; k++) {
        if (users_live) {
            memset(both[k]->users, 0, sizeof both[k]->users);
            both[k]->user_count = 0;
        }
        if (tls_live) {
            memset(both[k]->tls_cert, 0, sizeof both[k]->tls_cert);
            memset(both[k]->tls_key, 0, sizeof both[k]->tls_key);
            memset(both[k]->tls_ciphers, 0, sizeof both[k]->tls_ciphers);
            both[k]->tls_min_version = 0;
        }
        memset(both[k]->server_names, 0, sizeof both[k]->server_names);
        memset(both[k]->write_token, 0, sizeof both[k]->write_token);
        both[k]->metrics_open = false;
        both[k]->session_timeout_s = 0;
        both[k]->max_connections = both[k]->max_header_bytes = both[k]->max_body_bytes = 0;
        both[k]->request_timeout_ms = both[k]->idle_timeout_s = both[k]->max_sessions_per_user = 0;
        both[k]->tag_metrics = false;
        for (unsigned i = 0; i < both[k]->user_count; i++)
            both[k]->users[i].line = 0;   /* a section that moved in the file is the same user */
    }
    restart[0] = 0;
    if (memcmp(&a, &b, sizeof a) != 0)
        snprintf(restart, cap, "http");
    if (users_live) {
        unsigned ended = web_auth_users_changed(h->auth, run, f);
        memcpy(run->users, f->users, sizeof run->users);
        run->user_count = f->user_count;
        gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] users applied: %u users, %u sessions ended", f->user_count,
               ended);
    }
    if (tls_live) {
        char err[512];
        if (http_tls_reload(h->tls, gw_config(h->gw), f, err, sizeof err) != 0) {
            gw_log(h->gw, CONFIG_LOG_ERROR, "SIGHUP: %s; HTTPS keeps the running certificate", err);
        } else {
            memcpy(run->tls_cert, f->tls_cert, sizeof run->tls_cert);
            memcpy(run->tls_key, f->tls_key, sizeof run->tls_key);
            memcpy(run->tls_ciphers, f->tls_ciphers, sizeof run->tls_ciphers);
            run->tls_min_version = f->tls_min_version;
            gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: HTTPS certificate read again from %s", f->tls_cert);
        }
    }
    memcpy(run->write_token, f->write_token, sizeof run->write_token);
    memcpy(run->server_names, f->server_names, sizeof run->server_names);
    run->metrics_open = f->metrics_open;
    run->session_timeout_s = f->session_timeout_s;
    /* The bounds: read where they are used (the accept, the sweep, /metrics,
     * a login), or handed to evhttp here for the next request; a connection
     * already open keeps the read watermark it was given. */
    run->max_connections = f->max_connections;
    run->request_timeout_ms = f->request_timeout_ms;
    run->tag_metrics = f->tag_metrics;
    run->max_sessions_per_user = f->max_sessions_per_user;
    run->max_header_bytes = f->max_header_bytes;
    run->max_body_bytes = f->max_body_bytes;
    run->idle_timeout_s = f->idle_timeout_s;
    evhttp_set_max_headers_size(h->http, f->max_header_bytes);
    evhttp_set_max_body_size(h->http, f->max_body_bytes);
    evhttp_set_timeout(h->http, (int)f->idle_timeout_s);
    if (h->active < f->max_connections)
        evconnlistener_enable(h->listener);   /* room again under a higher cap */
}

void http_free(gw_http_t *h)
{
    if (!h)
        return;
    web_stop(h->gw);
    /* evhttp_free() closes the connections, and each close calls on_close,
     * which activates the sweep: the sweep's event is freed after it. */
    if (h->http)
        evhttp_free(h->http);   /* frees its connections and the bound listener */
    else if (h->listener)
        evconnlistener_free(h->listener);
    if (h->ev_sweep)
        event_free(h->ev_sweep);
    for (http_conn_t *c = h->conns, *n; c; c = n) {
        n = c->next;
        bufferevent_decref(c->bev);
        free(c);
    }
    http_tags_free(h->tags);   /* after evhttp_free, which freed the requests it held */
    http_tls_free(h->tls);     /* after the connections, which hold their own references */
    web_auth_free(h->auth);
    web_audit_free(h->audit);
    free(h);
}
