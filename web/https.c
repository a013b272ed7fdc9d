/*
 * web/https.c -- the OpenSSL half of [http] over TLS: a server context made
 * of [http] tls_cert and tls_key, a bufferevent that runs the server side of
 * a handshake for evhttp, and whether a connection's handshake finished.
 * Everything else (the connections' bounds, counting, the routes) is
 * http.c's.
 *
 * Built as its own shared object, rtugw-https.so, that http_tls.c loads
 * only when [http] has tls_cert, for the reason front/tls.c is one
 * (docs/security.md, "Footprint"): libssl and libcrypto cost ~1.8 MiB
 * resident as soon as they are mapped, on a daemon that aims at 4 MiB. It
 * is not rtugw-tls.so: that module's contexts are MB-TCP-Security's (a
 * client certificate with a role is required, which no browser has), and
 * front/'s module table is front/'s own. This file calls nothing of the
 * daemon's; its only exported symbol is rtugw_https_module.
 *
 * Policy: module/openssl.c's module_ssl_policy, Mozilla's "intermediate"
 * (TLS 1.2 with ECDHE and AEAD suites only, and TLS 1.3; [http]
 * tls_ciphers and tls_min_version tighten it), no compression, no
 * renegotiation, the server's order of suites, no
 * client certificate (users log in: web/auth.c), a bounded server-side
 * session cache and no tickets (nothing to rotate, nothing that outlives a
 * restart).
 */
#include "web/internal.h"
#include "module/module.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#define SESSION_CACHE 128

/* OpenSSL's most recent error, for a message; "" when there is none. */
static https_ctx_t *ctx_new(const char *cert, const char *key, const char *ciphers, unsigned min_version, char *err,
                            size_t cap)
{
    static const unsigned char sid_context[] = "rtugw-https";
    char why[256];
    SSL_CTX *ctx = OPENSSL_init_ssl(0, NULL) ? SSL_CTX_new(TLS_server_method()) : NULL;

    if (!ctx) {
        snprintf(err, cap, "[http] tls: cannot make a context: %s", module_ssl_error(why, sizeof why));
        return NULL;
    }
    if (module_ssl_policy(ctx, ciphers, min_version, why, sizeof why) != 0) {
        snprintf(err, cap, "[http] tls_ciphers: %s", why);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    /* An idle keep-alive connection gives its 2 x 16 KiB of record buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_id_context(ctx, sid_context, sizeof sid_context - 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, SESSION_CACHE);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, cap, "[http] tls_cert = '%s': %s", cert, module_ssl_error(why, sizeof why));
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, cap, "[http] tls_key = '%s': %s", key, module_ssl_error(why, sizeof why));
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, cap, "[http] tls_key = '%s': not the key of tls_cert '%s'", key, cert);
        ERR_clear_error();
    } else {
        return (https_ctx_t *)ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

static void ctx_free(https_ctx_t *ctx)
{
    SSL_CTX_free((SSL_CTX *)ctx);   /* connections still open hold their own references */
}

static void ctx_certificate(const https_ctx_t *ctx, char *subject, size_t cap, int64_t *not_after)
{
    module_ssl_certificate((const SSL_CTX *)ctx, subject, cap, not_after);
}

/*
 * evhttp's bufferevent for a new connection, before it has its descriptor
 * (evhttp sets it after): the handshake starts once it has. NULL: out of
 * memory (evhttp then makes a plain one, which the caller must refuse).
 */
static struct bufferevent *accept_session(https_ctx_t *ctx, struct event_base *base)
{
    return module_ssl_accept((SSL_CTX *)ctx, base, -1);
}

/* Did the handshake finish? (a plain HTTP request on this port never does) */
static bool established(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    return ssl && SSL_is_init_finished(ssl);
}

__attribute__((visibility("default"))) extern const web_https_module_t rtugw_https_module;
const web_https_module_t rtugw_https_module = {
    .abi = WEB_HTTPS_MODULE_ABI,
    .ctx_new = ctx_new,
    .ctx_free = ctx_free,
    .ctx_certificate = ctx_certificate,
    .accept = accept_session,
    .established = established,
};
