/*
 * module/openssl.c -- what the two OpenSSL modules (front/tls.c's
 * rtugw-tls.so for Modbus/TCP Security, web/https.c's rtugw-https.so for the
 * web page) do alike: OpenSSL's last error as text, a context's certificate
 * for /status and /metrics, a server-side session as a libevent
 * bufferevent, and the TLS policy (protocol versions, suites, groups).
 * Compiled into each of them (never into the daemon, which must not map
 * libssl unless one is loaded); one source, so the two cannot come to
 * differ.
 */
#include "module/module.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <time.h>

const char *module_ssl_error(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    buf[0] = 0;
    if (e)
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

void module_ssl_certificate(const struct ssl_ctx_st *ctx, char *subject, size_t cap, int64_t *not_after)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    struct tm tm;

    subject[0] = 0;
    *not_after = 0;
    if (!cert)
        return;
    X509_NAME_oneline(X509_get_subject_name(cert), subject, (int)cap);
    if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1)
        *not_after = (int64_t)timegm(&tm);
}

/*
 * libevent's ownership of ssl when bufferevent_openssl_socket_new fails is
 * not the same on every path, so ssl is left to leak rather than risk a
 * double free; the caller closes fd. A peer that closes without
 * close_notify is an EOF, not an error.
 */
struct bufferevent *module_ssl_accept(struct ssl_ctx_st *ctx, struct event_base *base, int fd)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return NULL;
    struct bufferevent *bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                             BEV_OPT_CLOSE_ON_FREE);
    if (bev)
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* Mozilla's "intermediate" TLS 1.2 suites (ssl-config.mozilla.org, v5.7):
 * forward secrecy (ECDHE) and AEAD only, no CBC, no RSA key exchange, no
 * SHA-1. (The MB-TCP-Security spec asks every device for AES128-SHA256, a
 * CBC suite without forward secrecy: [tls] ciphers adds it where a client
 * needs it.) */
const char module_ssl_intermediate[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                       "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                       "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

int module_ssl_policy(struct ssl_ctx_st *ctx, const char *ciphers, unsigned min_version, char *why, size_t cap)
{
    char err[256];
    SSL_CTX_set_min_proto_version(ctx, min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_set_cipher_list(ctx, ciphers && ciphers[0] ? ciphers : module_ssl_intermediate) != 1) {
        snprintf(why, cap, "no usable TLS 1.2 cipher suite in '%s': %s", ciphers, module_ssl_error(err, sizeof err));
        return -1;
    }
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                      "TLS_CHACHA20_POLY1305_SHA256") != 1 ||
        SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) {
        snprintf(why, cap, "TLS 1.3 suites or groups refused: %s", module_ssl_error(err, sizeof err));
        return -1;
    }
    return 0;
}
