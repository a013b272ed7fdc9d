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
    unsigned busy;                 /* requests of it passed to a handler and not yet written out */
    http_tls_t *tls;               /* the HTTPS it was accepted under (NULL: plain), counted there */
    struct http_conn *next;
} http_conn_t;

/* An HTTPS context that a reload turned off or replaced by turning HTTPS
 * off and on: freed once no connection accepted under it is left. */
typedef struct http_tls_retired {
    http_tls_t *tls;
    struct http_tls_retired *next;
} http_tls_retired_t;

/* A listening socket a reload moved away from: no longer listening, freed
 * a second later (http_move). */
typedef struct http_bound_retired {
    struct evhttp_bound_socket *bound;
    struct http_bound_retired *next;
} http_bound_retired_t;

struct gw_http {
    gw_t *gw;
    struct evhttp *http;
    struct evconnlistener *listener;
    struct evhttp_bound_socket *bound;   /* the listener, as evhttp holds it */
    http_bound_retired_t *bound_retired;
    struct event *ev_retire;       /* frees bound_retired, a second after the last move */
    http_tls_retired_t *tls_retired;
    gw_frames_t *frames;           /* made once ([http] frame_ring), kept until http_free */
    struct event *ev_sweep;
    http_conn_t *conns;
    unsigned active;
    gw_http_tags_t *tags;
    http_tls_t *tls;               /* [http] tls_cert: HTTPS; NULL: plain HTTP */
    web_auth_t *auth;              /* users, sessions (auth.c) */
    web_audit_t *audit;            /* the audit ring (audit.c) */
    gw_http_metrics_t metrics;
    /* http_close: not listening, draining; done once drained() is queued */
    bool closing, forced, done;
    uint64_t drain_until_ns;   /* then forced */
    struct event *ev_drain;
    event_callback_fn drained;
    void *drained_arg;
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

/* Ends a connection now: evhttp reads end of file, the sweep releases it. */
static void cut(http_conn_t *c)
{
    evutil_socket_t sock = bufferevent_getfd(c->bev);
    if (sock >= 0)
        shutdown(sock, SHUT_RDWR);
}

/* A request's answer has been handed to the kernel whole (evhttp calls this
 * from its write callback, before it frees the request). While the server
 * closes, the connection ends here instead of waiting for another request:
 * the answer is already out, so its client gets all of it, then the end. */
static void on_complete(struct evhttp_request *req, void *arg)
{
    gw_http_t *h = arg;
    http_conn_t *c = conn_of(h, req);
    if (!c)
        return;
    if (c->busy)
        c->busy--;
    if (h->closing && !c->busy)
        cut(c);
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

    if (c) {
        c->since_ns = gw_now_ns();
        c->busy++;   /* until on_complete: http_close lets it finish */
        evhttp_request_set_on_complete_cb(req, on_complete, h);
    }
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
    if (c && c->tls)
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
static void on_retire(evutil_socket_t fd, short what, void *arg);
static void on_drain(evutil_socket_t fd, short what, void *arg);

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
    *c = (http_conn_t){ .bev = bev, .since_ns = gw_now_ns(), .tls = h->tls, .next = h->conns };
    h->conns = c;
    h->active++;
    sweep_arm(h);
    gw_set(&h->metrics.active, h->active);
    gw_count(&h->metrics.accepted);
    if (h->listener && h->active >= cfg->max_connections) {
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

/* Frees each retired HTTPS context no connection refers to any more. */
static void tls_retired_sweep(gw_http_t *h)
{
    for (http_tls_retired_t **pp = &h->tls_retired, *r; (r = *pp) != NULL;) {
        bool used = false;
        for (http_conn_t *c = h->conns; c && !used; c = c->next)
            used = c->tls == r->tls;
        if (used) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        http_tls_free(r->tls);
        free(r);
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
            http_tls_released(c->tls, c->bev, c->handshaken);
            bufferevent_decref(c->bev);   /* the last reference: closes its descriptor */
            free(c);
            h->active--;
            continue;
        }
        /* Judged while it is open: once shut down (an answer with
         * Connection: close, an idle keep-alive cut), OpenSSL no longer says
         * its handshake had finished, and it was counted a failed one. */
        if (c->tls && !c->handshaken)
            c->handshaken = http_tls_established(c->tls, c->bev);
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
    tls_retired_sweep(h);
    if (h->listener && h->active < gw_config(h->gw)->http.max_connections)
        evconnlistener_enable(h->listener);   /* after a pause for room or for descriptors (none: closing) */
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

/* A listener on bind:port, served by h's evhttp; NULL with err. */
static struct evhttp_bound_socket *listen_at(gw_http_t *h, const char *bind, unsigned port, char *err,
                                             size_t errcap)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, bind, &sin.sin_addr) != 1) {
        snprintf(err, errcap, "[http] bind = '%s': not an IPv4 address", bind);
        return NULL;
    }
    struct evconnlistener *l = evconnlistener_new_bind(loop_base(gw_loop(h->gw)), NULL, NULL,
                                                       LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE |
                                                           LEV_OPT_CLOSE_ON_EXEC,
                                                       64, (struct sockaddr *)&sin, sizeof sin);
    if (!l) {
        snprintf(err, errcap, "http: cannot listen on %s:%u: %s", bind, port, strerror(errno));
        return NULL;
    }
    struct evhttp_bound_socket *bound = evhttp_bind_listener(h->http, l);
    if (!bound) {
        evconnlistener_free(l);
        snprintf(err, errcap, "http: cannot serve on %s:%u", bind, port);
        return NULL;
    }
    evconnlistener_set_error_cb(l, on_accept_error);
    return bound;
}

gw_http_t *http_new(gw_t *gw, gw_frames_t *frames, char *err, size_t errcap)
{
    const config_http_t *cfg = &gw_config(gw)->http;
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
    if (cfg->tls_cert[0] && !(h->tls = http_tls_new(gw_config(h->gw), cfg, err, errcap))) {
        http_free(h);
        return NULL;
    }
    h->http = evhttp_new(loop_base(gw_loop(gw)));
    h->ev_sweep = event_new(loop_base(gw_loop(gw)), -1, EV_PERSIST, on_sweep, h);
    h->ev_retire = evtimer_new(loop_base(gw_loop(gw)), on_retire, h);
    h->ev_drain = event_new(loop_base(gw_loop(gw)), -1, EV_PERSIST, on_drain, h);
    if (!h->http || !h->ev_sweep || !h->ev_retire || !h->ev_drain) {
        snprintf(err, errcap, "out of memory");
        http_free(h);
        return NULL;
    }
    if (!(h->bound = listen_at(h, cfg->bind, cfg->port, err, errcap))) {
        http_free(h);
        return NULL;
    }
    h->listener = evhttp_bound_socket_get_listener(h->bound);
    evhttp_set_bevcb(h->http, make_bev, h);
    evhttp_set_max_headers_size(h->http, cfg->max_header_bytes);
    evhttp_set_max_body_size(h->http, cfg->max_body_bytes);
    evhttp_set_timeout(h->http, (int)cfg->idle_timeout_s);
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_POST |
                                              EVHTTP_REQ_DELETE);
    evhttp_set_gencb(h->http, on_request, h);
    web_remove_stale_temporaries(gw);   /* before the API can make new ones */
    h->frames = frames;   /* resized to frame_ring by web_start */
    if (web_start(gw, &h->frames, err, errcap) != 0) {
        if (frames)
            http_release_frames(h);   /* the caller's still: not freed here */
        http_free(h);
        return NULL;
    }
    return h;
}

/* The retired listeners' second is up (http_move): free them. */
static void on_retire(evutil_socket_t fd, short what, void *arg)
{
    gw_http_t *h = arg;
    (void)fd;
    (void)what;
    for (http_bound_retired_t *r = h->bound_retired, *n; r; r = n) {
        n = r->next;
        evhttp_del_accept_socket(h->http, r->bound);   /* frees its listener, closes its descriptor */
        free(r);
    }
    h->bound_retired = NULL;
}

/* A retired listener's accept error: it stays off, with no timer to resume it. */
static void on_retired_accept_error(struct evconnlistener *l, void *arg)
{
    (void)arg;
    evconnlistener_disable(l);
}

/* The listener stops now, freed a second later (why: http_move); r: its record. */
static void retire_listener(gw_http_t *h, http_bound_retired_t *r)
{
    struct evconnlistener *old = h->listener;
    struct timeval second = { 1, 0 };
    evconnlistener_set_error_cb(old, on_retired_accept_error);
    evconnlistener_disable(old);
    shutdown(evconnlistener_get_fd(old), SHUT_RDWR);
    *r = (http_bound_retired_t){ .bound = h->bound, .next = h->bound_retired };
    h->bound_retired = r;
    event_add(h->ev_retire, &second);
    h->bound = NULL;
    h->listener = NULL;
}

/*
 * [http] bind or port moved by a reload. The new address is bound first:
 * when it cannot be (a port in use, an address the host lacks) the old
 * listener keeps serving and -1 comes back with err. Then the old socket
 * stops listening at once (shutdown: a connection to the old address is
 * refused from now, Linux's way of ending a listen without a close), but its
 * evconnlistener lives one second more: on_accept_error may have armed a
 * 250 ms timer that enables it again, a timer libevent holds the listener's
 * pointer for and nothing can cancel, and that timer must not find it
 * freed. Its error callback is swapped for one that arms no timer, so after
 * that second none can name it (ev_retire, pushed back by each move, frees
 * every retired one). The connections it accepted are evhttp's, not its:
 * they are served until their clients close them.
 */
static int http_move(gw_http_t *h, const char *bind, unsigned port, char *err, size_t errcap)
{
    http_bound_retired_t *r = calloc(1, sizeof *r);
    struct evhttp_bound_socket *bound = r ? listen_at(h, bind, port, err, errcap) : NULL;
    if (!bound) {
        if (!r)
            snprintf(err, errcap, "out of memory");
        free(r);
        return -1;
    }
    retire_listener(h, r);
    h->bound = bound;
    h->listener = evhttp_bound_socket_get_listener(bound);
    if (h->active >= gw_config(h->gw)->http.max_connections)
        evconnlistener_disable(h->listener);   /* full: the sweep enables it when there is room */
    return 0;
}

/*
 * HTTPS turned on or off by a reload (tls_cert set or cleared). The new
 * context loads first (a file that does not load keeps the running way,
 * -1 with err). New connections are accepted under it; each open one keeps
 * the one it was accepted under (http_conn_t.tls, counted there), and a
 * context turned off is freed by the sweep once its last connection is
 * released (tls_retired_sweep). A plain keep-alive connection open when
 * HTTPS turns on goes on in clear until its client closes it, as a
 * connection to a moved listener does; the port speaks only TLS to new ones.
 */
static int https_switch(gw_http_t *h, const config_t *fresh, char *err, size_t errcap)
{
    http_tls_t *next = NULL;
    http_tls_retired_t *r = NULL;
    if (fresh->http.tls_cert[0] && !(next = http_tls_new(fresh, &fresh->http, err, errcap)))
        return -1;
    if (h->tls && !(r = calloc(1, sizeof *r))) {
        http_tls_free(next);
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    if (r) {
        *r = (http_tls_retired_t){ .tls = h->tls, .next = h->tls_retired };
        h->tls_retired = r;
    }
    h->tls = next;
    tls_retired_sweep(h);
    return 0;
}

/* key waits for a restart (res), why is the reload's error unless one came first. */
static void not_applied(gw_http_t *h, const char *key, const char *why, reload_result_t *res)
{
    reload_restart_add(res, key);
    reload_error(res, why);
    gw_log(h->gw, CONFIG_LOG_ERROR, "SIGHUP: %s; %s", why,
           strcmp(key, "http.tls_cert") == 0 ? "HTTPS keeps the running certificate" : "the running value stays");
}

/* HTTPS: on before and after, the certificate and key read again
 * (http_tls_reload); turned on or off, https_switch. The running copy takes
 * the new tls_* keys once applied; what does not load keeps what runs. */
static void https_apply(gw_http_t *h, config_http_t *run, const config_t *fresh, reload_result_t *res)
{
    const config_http_t *f = &fresh->http;
    char why[512];
    bool same = (h->tls != NULL) == (f->tls_cert[0] != 0);
    if (same && !h->tls)
        return;
    if ((same ? http_tls_reload(h->tls, gw_config(h->gw), f, why, sizeof why)
              : https_switch(h, fresh, why, sizeof why)) != 0) {
        not_applied(h, "http.tls_cert", why, res);
        return;
    }
    memcpy(run->tls_cert, f->tls_cert, sizeof run->tls_cert);
    memcpy(run->tls_key, f->tls_key, sizeof run->tls_key);
    memcpy(run->tls_ciphers, f->tls_ciphers, sizeof run->tls_ciphers);
    run->tls_min_version = f->tls_min_version;
    if (same)
        gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: HTTPS certificate read again from %s", f->tls_cert);
    else
        gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: HTTPS %s for new connections (the open ones keep theirs)",
               h->tls ? "on" : "off");
}

/* Users (on, off or changed) and max_sessions: sessions end as
 * web_auth_users_changed and web_auth_resize say. */
static void users_apply(gw_http_t *h, config_http_t *run, const config_http_t *f, reload_result_t *res)
{
    unsigned ended = 0, resized = 0;
    bool flip = !run->user_count != !f->user_count;
    if (run->user_count && f->user_count)
        ended = web_auth_users_changed(h->auth, run, f);
    if (web_auth_resize(h->auth, run, f, &resized) != 0) {
        not_applied(h, flip ? "http.users" : "http.max_sessions", "out of memory for the sessions", res);
        if (flip)
            return;   /* the users stay as they were: the table is sized for them */
    } else {
        run->max_sessions = f->max_sessions;
    }
    if (flip || run->user_count)
        gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] users applied: %u users%s, %u sessions ended", f->user_count,
               flip ? f->user_count ? " (from none: logins needed now)" : " (none now: reads open)" : "",
               ended + resized);
    memcpy(run->users, f->users, sizeof run->users);
    run->user_count = f->user_count;
}

/*
 * SIGHUP (daemon/control.c): every key of [http] applies while it runs.
 * The listener's address (bind, port): http_move. HTTPS on or off, and
 * its certificate and key (with tls_ciphers and tls_min_version), read
 * again whether their paths changed or a renewal rewrote the files:
 * https_apply; new connections get them, open ones keep theirs. The users,
 * also from none or to none, and max_sessions: users_apply. frame_ring:
 * web_frames_reload. The write_token, server_names, metrics_open and
 * session_timeout_s are taken as they are; the bounds (max_connections,
 * max_header_bytes, max_body_bytes, request_timeout_ms, idle_timeout_s,
 * max_sessions_per_user) and tag_metrics apply from the next connection or
 * request. What cannot apply (an address that cannot be bound, a
 * certificate that does not load, out of memory) keeps its running value,
 * is named in res's restart (http.port, http.tls_cert, ...) and its reason
 * is in res's error (the first one) and the log: the next reload tries again.
 */
void http_reload(gw_http_t *h, config_http_t *run, const config_t *fresh, reload_result_t *res)
{
    const config_http_t *f = &fresh->http;
    char why[320];
    if (strcmp(run->bind, f->bind) != 0 || run->port != f->port) {
        if (http_move(h, f->bind, f->port, why, sizeof why) != 0) {
            not_applied(h, "http.port", why, res);
        } else {
            gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] listening on %s:%u now (was %s:%u; its open connections "
                   "stay)", f->bind, f->port, run->bind, run->port);
            memcpy(run->bind, f->bind, sizeof run->bind);
            run->port = f->port;
        }
    }
    https_apply(h, run, fresh, res);
    users_apply(h, run, f, res);
    if (run->frame_ring != f->frame_ring) {
        if (web_frames_reload(h->gw, &h->frames, f->frame_ring, why, sizeof why) != 0) {
            not_applied(h, "http.frame_ring", why, res);
        } else {
            gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] frame_ring = %u applied", f->frame_ring);
            run->frame_ring = f->frame_ring;
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

/*
 * [http] enabled turned off by a reload, which may itself run inside a
 * request of this server (PUT /api/config): nothing may be freed under the
 * handler that is still writing its answer, so the server closes in steps,
 * each on a later turn of the I/O thread:
 * - now: the listener stops listening (a connect is refused from here on)
 *   and every connection with no request in a handler is cut; one with a
 *   request in flight (that PUT among them) is cut by on_complete once its
 *   answer is written out, so each such answer reaches its client whole;
 * - the drain lasts request_timeout_ms, the bound any request already has:
 *   past it, what is left is cut, and a request waiting for a bus (a tag
 *   write, a /tags wait) is abandoned first, as the sweep abandons one
 *   whose client has gone, so its outcome has no request to answer;
 * - once no connection is left, no tag write is in flight (an abandoned
 *   write's outcome still names this server's tag part, and writes are
 *   bounded by their bus's timeouts and retries), and the retired listener
 *   is freed (the second of http_move, for its accept error's timer), the
 *   owner's drained() is queued with event_base_once: it runs on a next
 *   turn, inside no event of this server, and may call http_free.
 * http_reopen, before that, makes it listen again and drops the drain.
 */
static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    gw_http_t *h = arg;
    struct timeval now = { 0, 0 };
    (void)fd;
    (void)what;
    if (!h->forced && gw_now_ns() >= h->drain_until_ns) {
        h->forced = true;
        for (http_conn_t *c = h->conns; c; c = c->next) {
            struct evhttp_connection *abandoned = c->busy ? http_tags_abandon(h->tags, c->bev) : NULL;
            gw_count(&h->metrics.timed_out);
            c->held = false;
            if (abandoned)
                evhttp_connection_free(abandoned);   /* frees its request too; released on the next sweep */
            else
                cut(c);
        }
    }
    if (h->conns || h->bound_retired || tag_writes_in_flight(gw_tag_writes(h->gw)))
        return;   /* the next tick looks again */
    if (event_base_once(loop_base(gw_loop(h->gw)), -1, EV_TIMEOUT, h->drained, h->drained_arg, &now) != 0)
        return;   /* no memory for it now: the next tick tries again */
    h->done = true;
    event_del(h->ev_drain);
}

int http_close(gw_http_t *h, unsigned drain_ms, event_callback_fn drained, void *arg)
{
    http_bound_retired_t *r = h->closing ? NULL : calloc(1, sizeof *r);
    struct timeval tick = { 0, 50000 };
    if (!r)
        return h->closing ? 0 : -1;   /* no memory to keep the listener its second: still listening */
    retire_listener(h, r);
    h->closing = true;
    h->forced = false;
    h->done = false;
    h->drained = drained;
    h->drained_arg = arg;
    h->drain_until_ns = gw_now_ns() + (uint64_t)drain_ms * 1000000ull;
    for (http_conn_t *c = h->conns; c; c = c->next)
        if (!c->busy)
            cut(c);   /* idle keep-alive: nothing of it is in flight */
    event_add(h->ev_drain, &tick);
    gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] enabled = false: not listening now; %u connections drain for up "
           "to %u ms", h->active, drain_ms);
    return 0;
}

gw_frames_t *http_release_frames(gw_http_t *h)
{
    gw_frames_t *f = h->frames;
    gw_frames_publish(h->gw, NULL);
    h->frames = NULL;
    return f;
}

bool http_closing(const gw_http_t *h) { return h->closing; }
bool http_drained(const gw_http_t *h) { return h->closing && h->done; }

int http_reopen(gw_http_t *h, const char *bind, unsigned port, char *err, size_t errcap)
{
    struct evhttp_bound_socket *bound = listen_at(h, bind, port, err, errcap);
    if (!bound)
        return -1;
    h->bound = bound;
    h->listener = evhttp_bound_socket_get_listener(bound);
    h->closing = false;
    h->done = false;
    event_del(h->ev_drain);
    gw_log(h->gw, CONFIG_LOG_INFO, "SIGHUP: [http] enabled = true: listening on %s:%u again", bind, port);
    return 0;
}

void http_free(gw_http_t *h)
{
    if (!h)
        return;
    web_stop(h->gw, h->frames);
    /* evhttp_free() closes the connections, and each close calls on_close,
     * which activates the sweep: the sweep's event is freed after it. */
    if (h->http)
        evhttp_free(h->http);   /* frees its connections and the bound listeners, retired ones too */
    if (h->ev_sweep)
        event_free(h->ev_sweep);
    if (h->ev_retire)
        event_free(h->ev_retire);
    if (h->ev_drain)
        event_free(h->ev_drain);
    for (http_bound_retired_t *r = h->bound_retired, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    for (http_conn_t *c = h->conns, *n; c; c = n) {
        n = c->next;
        bufferevent_decref(c->bev);
        free(c);
    }
    http_tags_free(h->tags);   /* after evhttp_free, which freed the requests it held */
    http_tls_free(h->tls);     /* after the connections, which hold their own references */
    for (http_tls_retired_t *r = h->tls_retired, *n; r; r = n) {
        n = r->next;
        http_tls_free(r->tls);
        free(r);
    }
    web_auth_free(h->auth);
    web_audit_free(h->audit);
    free(h);
}
