/*
 * web/http_tls.c -- [http] over TLS (HTTPS) and the certificates' part of
 * /status and /metrics.
 *
 * HTTPS is on when [http] has tls_cert (and tls_key): the whole port speaks
 * TLS, and a plain HTTP request on it is refused (its "handshake" fails and
 * the connection is closed, counted in rtugw_http_tls_failed_total): an
 * answer in clear on the port that carries passwords and session cookies
 * would teach browsers and scripts to send them in clear. The OpenSSL half
 * is a module (web/https.c, rtugw-https.so) loaded only then, as front/'s
 * MB-TCP-Security one is, so a daemon without HTTPS never maps libssl.
 *
 * A handshake is bounded by what bounds every HTTP connection (http.c): it
 * holds one of max_connections, and request_timeout_ms runs from the
 * accept, so a client that never finishes its handshake is cut as one that
 * never finishes its request, and a flood of them costs at most
 * max_connections sockets for request_timeout_ms each.
 */
#include "front/front.h"
#include "web/internal.h"
#include "json/json.h"
#include "module/module.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MODULE_FILE "rtugw-https.so"
#define EXPIRY_WARN_DAYS 30

struct http_tls {
    const web_https_module_t *m;
    https_ctx_t *ctx;
    char subject[256];
    int64_t not_after;
    uint64_t established;   /* connections whose handshake finished (I/O thread only) */
    uint64_t failed;        /* released before it finished: plain HTTP, a timeout, a bad client */
};

/* Beside the binary in the build tree (web/), else where `make install` put it (module/). */
static const web_https_module_t *load_module(char *err, size_t errcap)
{
    char path[PATH_MAX + 64], why[PATH_MAX + 128];
    const web_https_module_t *m = module_load("web", MODULE_FILE, RTUGW_MODULEDIR, "rtugw_https_module", path,
                                              sizeof path, why, sizeof why);
    if (!m) {
        snprintf(err, errcap, "[http] tls_cert: cannot load the HTTPS module: %s", why);
        return NULL;
    }
    if (m->abi != WEB_HTTPS_MODULE_ABI) {
        snprintf(err, errcap, "[http] tls_cert: the HTTPS module %s is not this rtugw's (ABI %u, want %u)", path,
                 m->abi, WEB_HTTPS_MODULE_ABI);
        return NULL;
    }
    return m;
}

/*
 * The certificate and key are opened here, under the configuration's folder
 * or a [gateway] data_dirs folder, relative to an open descriptor of it
 * (config_open_path: a symbolic link out, swapped in after the load, is
 * refused), and the module reads those very files through /proc/self/fd/N:
 * what OpenSSL loads is what this open found, not whatever the path names
 * a moment later. Its messages name the configured paths again.
 */
static https_ctx_t *ctx_from(const http_tls_t *t, const config_t *root, const config_http_t *cfg, char *err,
                             size_t errcap)
{
    const char *paths[2] = { cfg->tls_cert, cfg->tls_key }, *keys[2] = { "tls_cert", "tls_key" };
    char proc[2][32], why[384];
    int fds[2] = { -1, -1 };
    https_ctx_t *ctx = NULL;

    for (int i = 0; i < 2; i++)
        if (config_open_for_name(root, paths[i], &fds[i], proc[i], sizeof proc[i], why, sizeof why) != 0) {
            snprintf(err, errcap, "[http] %s = '%s': %s", keys[i], paths[i], why);
            goto out;
        }
    if (!(ctx = t->m->ctx_new(proc[0], proc[1], cfg->tls_ciphers, cfg->tls_min_version, err, errcap)))
        for (int i = 0; i < 2; i++)
            config_name_again(err, errcap, proc[i], paths[i]);
out:
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return ctx;
}

http_tls_t *http_tls_new(const config_t *root, const config_http_t *cfg, char *err, size_t errcap)
{
    http_tls_t *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    if (!(t->m = load_module(err, errcap)) || !(t->ctx = ctx_from(t, root, cfg, err, errcap))) {
        free(t);
        return NULL;
    }
    t->m->ctx_certificate(t->ctx, t->subject, sizeof t->subject, &t->not_after);
    return t;
}

int http_tls_reload(http_tls_t *t, const config_t *root, const config_http_t *cfg, char *err, size_t errcap)
{
    https_ctx_t *ctx = ctx_from(t, root, cfg, err, errcap);
    if (!ctx)
        return -1;
    t->m->ctx_free(t->ctx);   /* connections still open hold their own references */
    t->ctx = ctx;
    t->m->ctx_certificate(t->ctx, t->subject, sizeof t->subject, &t->not_after);
    return 0;
}

void http_tls_free(http_tls_t *t)
{
    if (!t)
        return;
    t->m->ctx_free(t->ctx);
    free(t);
}

struct bufferevent *http_tls_bev(http_tls_t *t, struct event_base *base)
{
    return t ? t->m->accept(t->ctx, base) : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

/* handshaken: the connection was seen established while open (a request
 * came, or the sweep saw it): after an SSL_shutdown OpenSSL says no more. */
void http_tls_released(http_tls_t *t, struct bufferevent *bev, bool handshaken)
{
    if (t)
        (*(handshaken || t->m->established(bev) ? &t->established : &t->failed))++;
}

bool http_tls_established(const http_tls_t *t, struct bufferevent *bev)
{
    return t && t->m->established(bev);
}

void http_tls_metrics(gw_t *gw, const http_tls_t *t, struct evbuffer *b)
{
    (void)gw;
    if (!t)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_http_tls_established_total HTTPS connections whose handshake finished\n"
                           "# TYPE rtugw_http_tls_established_total counter\nrtugw_http_tls_established_total %llu\n"
                           "# HELP rtugw_http_tls_failed_total HTTPS connections closed before their handshake "
                           "finished (plain HTTP, a timeout, a client that refused the certificate)\n"
                           "# TYPE rtugw_http_tls_failed_total counter\nrtugw_http_tls_failed_total %llu\n"
                           "# HELP rtugw_http_tls_certificate_not_after_seconds The HTTPS certificate's notAfter\n"
                           "# TYPE rtugw_http_tls_certificate_not_after_seconds gauge\n"
                           "rtugw_http_tls_certificate_not_after_seconds %lld\n",
                        (unsigned long long)t->established, (unsigned long long)t->failed, (long long)t->not_after);
}

/* "certificate":{...},"warning":... of a server certificate, warning from
 * 30 days before it expires. */
static void certificate_json(struct evbuffer *b, const char *subject, int64_t not_after)
{
    char when[32] = "", q[JSON_QUOTED_MAX(256)];
    struct tm tm;
    time_t at = (time_t)not_after;

    if (gmtime_r(&at, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double days = (double)(not_after - (int64_t)time(NULL)) / 86400.0;
    json_quote(q, sizeof q, subject);
    evbuffer_add_printf(b, "\"certificate\":{\"subject\":%s,\"not_after\":\"%s\",\"days_left\":%.1f},\"warning\":", q,
                        when, days);
    if (days < EXPIRY_WARN_DAYS) {
        char warning[96];
        snprintf(warning, sizeof warning, days < 0 ? "the server certificate has expired"
                                                   : "the server certificate expires in %.0f days", days);
        json_quote(q, sizeof q, warning);
        evbuffer_add_printf(b, "%s", q);
    } else {
        evbuffer_add_printf(b, "null");
    }
}

void http_tls_status(gw_t *gw, const http_tls_t *t, struct evbuffer *b)
{
    /* a [tls] turned off by a reload keeps its context for the sessions still open */
    gw_mbaps_t *mbaps = gw_config(gw)->tls.enabled ? gw_mbaps(gw) : NULL;
    if (mbaps) {
        const char *subject;
        int64_t not_after;
        char listen[96], q[JSON_QUOTED_MAX(96)];
        const config_tls_t *c = &gw_config(gw)->tls;
        const gw_tls_metrics_t *m = mbaps_metrics(mbaps);
        mbaps_certificate(mbaps, &subject, &not_after);
        snprintf(listen, sizeof listen, "%s:%u", c->bind, c->port);
        json_quote(q, sizeof q, listen);
        evbuffer_add_printf(b, ",\"tls\":{\"listen\":%s,\"active\":%llu,\"handshakes\":%llu,", q,
                            (unsigned long long)gw_read(&m->active), (unsigned long long)gw_read(&m->handshakes));
        certificate_json(b, subject, not_after);
        evbuffer_add_printf(b, "}");
    } else {
        evbuffer_add_printf(b, ",\"tls\":null");
    }
    if (t) {
        evbuffer_add_printf(b, ",\"https\":{\"established\":%llu,\"failed\":%llu,", (unsigned long long)t->established,
                            (unsigned long long)t->failed);
        certificate_json(b, t->subject, t->not_after);
        evbuffer_add_printf(b, "}");
    } else {
        evbuffer_add_printf(b, ",\"https\":null");
    }
}
