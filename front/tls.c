/*
 * front/tls.c -- the OpenSSL half of MB-TCP-Security: a server context
 * made from the [tls] files, the client certificate's role, and why a
 * handshake failed. Everything else (sessions, slots, counting, logging,
 * the role's rights) is the daemon's, in tcp.c and mbaps.c.
 *
 * Built as its own shared object, rtugw-tls.so, that mbaps.c loads only
 * when [tls] is enabled: libssl and libcrypto cost about 0.5 MiB of
 * anonymous and 1.3 MiB of file-backed resident memory as soon as they are
 * mapped, before a single call, on a daemon that aims at 4 MiB. So this
 * file calls nothing of the daemon's (a module cannot, without exporting
 * the executable's symbols): the one function it needs, the role lookup,
 * comes as a pointer. Its only exported symbol is rtugw_tls_module.
 *
 * Policy (MB-TCP-Security, and the project's own rules):
 *   - TLS 1.2 or newer (min_version 1.3 to insist on 1.3); 1.3 whenever the
 *     client has it, as OpenSSL prefers the highest common version;
 *   - no compression, no renegotiation, the server's order of suites,
 *     Mozilla's "intermediate" suites unless [tls] ciphers says others;
 *   - the client must present a certificate that chains to ca_file, is
 *     within its validity and, with crl_file, is not revoked; and it must
 *     carry a role that names a [role NAME] (or get default_role). All of
 *     it is decided inside the handshake, so a refused client never gets
 *     to send a request;
 *   - sessions resume from a bounded server-side cache (session_cache
 *     entries; no tickets, so nothing resumes past a reload, which brings a
 *     new context and an empty cache, and a new CRL takes effect at once).
 */
#include "front/internal.h"
#include "module/module.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROLE_OID "1.3.6.1.4.1.50316.802.1"

/* TLS 1.2 suites: module/openssl.c's module_ssl_policy (Mozilla's
 * "intermediate", ECDHE and AEAD only), or [tls] ciphers. The spec's
 * mandatory AES128-SHA256 (CBC, no forward secrecy) is no longer offered by
 * default: `ciphers = ...:AES128-SHA256` adds it for a device that has
 * nothing better (docs/security.md). TLS_RSA_WITH_NULL_SHA256 (no
 * encryption) is never offered. */

/*
 * What every context's callbacks need. One per daemon, not per context: a
 * reload frees its old context while connections made with it may still be
 * in their handshake, and those reach this through SSL_CTX_get_app_data.
 * A tls_ctx_t is an SSL_CTX (reference-counted: each connection holds one).
 */
struct tls_env {
    const config_t *cfg;            /* the running configuration: roles, default_role */
    int (*role_find)(const config_t *cfg, const char *name);
    ASN1_OBJECT *role_oid;
};

/* OpenSSL's most recent error, for a message; "" when there is none. */
/*
 * The role a certificate names, in name: 1; 0 when it has no role
 * extension; -1 when the extension is not exactly one UTF8String of a
 * length a role name can have (two role extensions are ambiguous, too).
 */
static int cert_role_name(const tls_env_t *t, X509 *cert, char *name, size_t cap)
{
    int at = X509_get_ext_by_OBJ(cert, t->role_oid, -1);
    if (at < 0)
        return 0;
    if (X509_get_ext_by_OBJ(cert, t->role_oid, at) >= 0)
        return -1;
    const ASN1_OCTET_STRING *der = X509_EXTENSION_get_data(X509_get_ext(cert, at));
    const unsigned char *p = ASN1_STRING_get0_data(der), *end = p + ASN1_STRING_length(der);
    ASN1_UTF8STRING *s = d2i_ASN1_UTF8STRING(NULL, &p, end - p);
    int rc = -1;
    if (s && p == end) {
        int n = ASN1_STRING_length(s);
        const unsigned char *text = ASN1_STRING_get0_data(s);
        if (n > 0 && (size_t)n < cap && !memchr(text, 0, (size_t)n)) {
            memcpy(name, text, (size_t)n);
            name[n] = 0;
            rc = 1;
        }
    }
    ASN1_UTF8STRING_free(s);
    return rc;
}

/* The [role] index a certificate gets; -1 with why. */
static int cert_role(const tls_env_t *t, X509 *cert, gw_tls_refusal_t *why)
{
    char name[CONFIG_NAME_MAX];
    int rc = cert_role_name(t, cert, name, sizeof name);

    if (rc == 0) {
        *why = GW_TLS_NO_ROLE;
        return t->cfg->tls.default_role;
    }
    int role = rc > 0 ? t->role_find(t->cfg, name) : -1;
    *why = GW_TLS_UNKNOWN_ROLE;
    return role;
}

static void refuse_for(SSL *ssl, gw_tls_refusal_t why)
{
    SSL_set_app_data(ssl, (void *)(intptr_t)(why + 1));
}

/*
 * OpenSSL's chain verification, then ours: the leaf, once its chain is
 * good, must carry a role we know (or there is a default_role). Failing
 * here fails the handshake with an alert, before any request.
 */
static int verify_peer(int ok, X509_STORE_CTX *store)
{
    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    const tls_env_t *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    gw_tls_refusal_t why;
    if (cert_role(t, X509_STORE_CTX_get_current_cert(store), &why) >= 0)
        return 1;
    refuse_for(ssl, why);
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
}

/* Every CRL in a PEM file into the context's store; at least one. */
static int load_crls(SSL_CTX *ctx, const char *path, char *err, size_t cap)
{
    char why[256];
    BIO *in = BIO_new_file(path, "r");
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    X509_CRL *crl;
    int n = 0;

    if (!in) {
        snprintf(err, cap, "[tls] crl_file = '%s': cannot open: %s", path, module_ssl_error(why, sizeof why));
        return -1;
    }
    while ((crl = PEM_read_bio_X509_CRL(in, NULL, NULL, NULL)) != NULL) {
        int added = X509_STORE_add_crl(store, crl);
        X509_CRL_free(crl);
        if (!added) {
            BIO_free(in);
            snprintf(err, cap, "[tls] crl_file = '%s': %s", path, module_ssl_error(why, sizeof why));
            return -1;
        }
        n++;
    }
    ERR_clear_error();   /* the end of the file reads as an error */
    BIO_free(in);
    if (n == 0) {
        snprintf(err, cap, "[tls] crl_file = '%s': no PEM X509 CRL in it", path);
        return -1;
    }
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    return 0;
}

/* The certificate, key and CAs of tls into ctx; 0, or -1 with err naming the file. */
static int load_files(SSL_CTX *ctx, const config_tls_t *tls, char *err, size_t cap)
{
    char why[256];

    if (SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file) != 1) {
        snprintf(err, cap, "[tls] cert_file = '%s': %s", tls->cert_file, module_ssl_error(why, sizeof why));
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls->key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, cap, "[tls] key_file = '%s': %s", tls->key_file, module_ssl_error(why, sizeof why));
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, cap, "[tls] key_file = '%s': not the key of cert_file '%s'", tls->key_file, tls->cert_file);
        ERR_clear_error();
        return -1;
    }
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(tls->ca_file);
    if (!names || SSL_CTX_load_verify_locations(ctx, tls->ca_file, NULL) != 1) {
        snprintf(err, cap, "[tls] ca_file = '%s': %s", tls->ca_file,
                 names ? module_ssl_error(why, sizeof why) : "cannot read a PEM certificate from it");
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        ERR_clear_error();
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names);   /* the names clients are told to choose by */
    return tls->crl_file[0] ? load_crls(ctx, tls->crl_file, err, cap) : 0;
}

static tls_env_t *env_new(const config_t *cfg, int (*role_find)(const config_t *cfg, const char *name))
{
    tls_env_t *env = calloc(1, sizeof *env);
    if (!env || !OPENSSL_init_ssl(0, NULL) || !(env->role_oid = OBJ_txt2obj(ROLE_OID, 1))) {
        free(env);
        return NULL;
    }
    env->cfg = cfg;
    env->role_find = role_find;
    return env;
}

static void env_free(tls_env_t *env)
{
    if (!env)
        return;
    ASN1_OBJECT_free(env->role_oid);
    free(env);
}

static void ctx_free(tls_ctx_t *ctx)
{
    SSL_CTX_free((SSL_CTX *)ctx);   /* connections still open hold their own references */
}

static tls_ctx_t *ctx_new(tls_env_t *env, const config_tls_t *tls, char *err, size_t cap)
{
    static const unsigned char sid_context[] = "rtugw-mbaps";
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    char why[256];

    err[0] = 0;
    if (!ctx) {
        snprintf(err, cap, "tls: cannot make a context: %s", module_ssl_error(why, sizeof why));
        return NULL;
    }
    SSL_CTX_set_app_data(ctx, env);
    if (module_ssl_policy(ctx, tls->ciphers, tls->min_version, why, sizeof why) != 0) {
        snprintf(err, cap, "[tls] ciphers: %s", why);
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* IGNORE_UNEXPECTED_EOF: most Modbus clients just close the socket, and
     * OpenSSL would take that as a fatal error and drop the session from
     * the cache. Truncation cannot pass for a shorter message here: every
     * MBAP frame carries its own length. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* An idle connection gives its 2 x 16 KiB of record buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_id_context(ctx, sid_context, sizeof sid_context - 1);
    if (tls->session_cache) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_sess_set_cache_size(ctx, tls->session_cache);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_peer);
    if (load_files(ctx, tls, err, cap) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return (tls_ctx_t *)ctx;
}

static void ctx_certificate(const tls_ctx_t *ctx, char *subject, size_t cap, int64_t *not_after)
{
    module_ssl_certificate((const SSL_CTX *)ctx, subject, cap, not_after);
}

/* A bufferevent that runs the server side of a handshake on fd (module/openssl.c). */
static struct bufferevent *accept_session(tls_ctx_t *ctx, struct event_base *base, int fd)
{
    return module_ssl_accept((SSL_CTX *)ctx, base, fd);
}

/* After BEV_EVENT_CONNECTED: the peer's role, or -1 (why for refusal()). */
static int session_peer(struct bufferevent *bev, bool *resumed, char *detail, size_t cap)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    const tls_env_t *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    X509 *cert = SSL_get0_peer_certificate(ssl);
    char subject[256] = "";
    gw_tls_refusal_t why = GW_TLS_NO_CERTIFICATE;
    int role = -1;

    *resumed = SSL_session_reused(ssl) == 1;
    if (cert) {
        X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
        role = cert_role(t, cert, &why);
    }
    snprintf(detail, cap, "%s, %s %s%s", subject, SSL_get_version(ssl), SSL_get_cipher_name(ssl),
             *resumed ? ", resumed" : "");
    if (role < 0)
        refuse_for(ssl, why);
    return role;
}

static gw_tls_refusal_t classify(SSL *ssl, long verify, unsigned long e)
{
    intptr_t ours = (intptr_t)SSL_get_app_data(ssl);
    if (ours)
        return (gw_tls_refusal_t)(ours - 1);
    switch (verify) {
    case X509_V_OK:
        break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return GW_TLS_EXPIRED;
    case X509_V_ERR_CERT_REVOKED:
        return GW_TLS_REVOKED;
    default:
        return GW_TLS_UNTRUSTED;
    }
    if (!e)
        return GW_TLS_CLOSED;
    switch (ERR_GET_REASON(e)) {
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return GW_TLS_NO_CERTIFICATE;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
        return GW_TLS_VERSION;
    default:
        return GW_TLS_OTHER;
    }
}

/* After a handshake failed (or session_peer refused): why, in OpenSSL's words too. */
static gw_tls_refusal_t refusal(struct bufferevent *bev, char *detail, size_t cap)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long verify = SSL_get_verify_result(ssl);
    unsigned long e = 0, next;

    /* libevent keeps the last few: SSL_get_error()'s code first (no
     * library), then OpenSSL's queue; they come back newest first. The
     * oldest of OpenSSL's own is what went wrong first. */
    while ((next = bufferevent_get_openssl_error(bev)) != 0)
        if (ERR_GET_LIB(next) != 0)
            e = next;
    gw_tls_refusal_t why = classify(ssl, verify, e);
    if (why == GW_TLS_NO_ROLE || why == GW_TLS_UNKNOWN_ROLE)
        snprintf(detail, cap, "%s", why == GW_TLS_NO_ROLE ? "the certificate names no role (" ROLE_OID ")"
                                                          : "the certificate's role is no [role NAME]");
    else if (verify != X509_V_OK)
        snprintf(detail, cap, "%s", X509_verify_cert_error_string(verify));
    else if (e)
        ERR_error_string_n(e, detail, cap);
    else
        snprintf(detail, cap, "the client closed the connection during the handshake");
    ERR_clear_error();
    return why;
}

/*
 * Our close_notify, so that the session stays resumable: OpenSSL drops from
 * its cache a session whose connection is freed without one (libevent frees
 * without). A refused or unfinished handshake has no session to keep.
 */
static void close_notify(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    if (ssl && SSL_is_init_finished(ssl) && SSL_shutdown(ssl) < 0)
        ERR_clear_error();   /* the peer may be gone already: nothing to tell it */
}

/* The peer's certificate and chain verified again, against ctx's store. */
static bool still_trusted(tls_ctx_t *ctx, struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    X509 *cert = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    X509_STORE_CTX *check = X509_STORE_CTX_new();
    bool ok = cert && check &&
              X509_STORE_CTX_init(check, SSL_CTX_get_cert_store((SSL_CTX *)ctx), cert, SSL_get_peer_cert_chain(ssl)) == 1 &&
              X509_STORE_CTX_set_purpose(check, X509_PURPOSE_SSL_CLIENT) == 1 && X509_verify_cert(check) == 1;
    X509_STORE_CTX_free(check);
    ERR_clear_error();
    return ok;
}

__attribute__((visibility("default"))) extern const gw_tls_module_t rtugw_tls_module;
const gw_tls_module_t rtugw_tls_module = {
    .abi = GW_TLS_MODULE_ABI,
    .env_new = env_new,
    .env_free = env_free,
    .ctx_new = ctx_new,
    .ctx_free = ctx_free,
    .ctx_certificate = ctx_certificate,
    .accept = accept_session,
    .peer = session_peer,
    .refusal = refusal,
    .close_notify = close_notify,
    .still_trusted = still_trusted,
};
