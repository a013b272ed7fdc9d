/*
 * module/openssl.c -- what the two OpenSSL modules (front/tls.c's
 * rtugw-tls.so for Modbus/TCP Security, web/https.c's rtugw-https.so for the
 * web page) do alike: OpenSSL's last error as text, a context's certificate
 * for /status and /metrics, and a server-side session as a libevent
 * bufferevent. Compiled into each of them (never into the daemon, which
 * must not map libssl unless one is loaded); one source, so the two cannot
 * come to differ.
 */
#include "module/module.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
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
