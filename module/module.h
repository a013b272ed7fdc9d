/*
 * module/ -- where rtugw finds the files it loads beside itself: its
 * optional modules (rtugw-mqtt.so, rtugw-tls.so, rtugw-https.so). Owns that
 * one search order, so the three loaders cannot come to disagree; may call
 * libc (its dlopen) only. And what the two OpenSSL modules share
 * (openssl.c, compiled into them; it may call OpenSSL and libevent).
 *
 * The order: the build tree first (SUBDIR/FILE beside the running binary,
 * as ./rtugw sits beside ./north/rtugw-mqtt.so), so that tests run what was
 * just built; else the folder `make install` put it in.
 */
#ifndef RTUGW_MODULE_H
#define RTUGW_MODULE_H

#include <stddef.h>
#include <stdint.h>

/* FILE's path by that order into path (cap bytes); no check that it loads. */
void module_path(const char *subdir, const char *file, const char *installed_dir, char *path, size_t cap);

/* dlopen()s FILE found by that order (its path into path) and returns the
 * address of `symbol` in it; NULL with the reason (dlerror's, or the symbol
 * missing) in why. The caller checks the ABI the symbol carries. */
const void *module_load(const char *subdir, const char *file, const char *installed_dir, const char *symbol,
                        char *path, size_t pathcap, char *why, size_t whycap);

/* openssl.c: linked into the OpenSSL modules only (front/tls.c, web/https.c),
 * never the daemon. OpenSSL's last error as text (cleared); a context's
 * certificate subject and notAfter (0: none); a server-side session on fd
 * (-1: set later, as evhttp does) as a bufferevent, NULL: out of memory. */
struct ssl_ctx_st;
struct bufferevent;
struct event_base;
const char *module_ssl_error(char *buf, size_t cap);
void module_ssl_certificate(const struct ssl_ctx_st *ctx, char *subject, size_t cap, int64_t *not_after);
struct bufferevent *module_ssl_accept(struct ssl_ctx_st *ctx, struct event_base *base, int fd);
/* The one TLS policy of both servers (HTTPS, Modbus/TCP Security): Mozilla's
 * "intermediate" unless tightened: TLS 1.2 (min_version 12) or 1.3 only (13),
 * TLS 1.2 suites ECDHE with AES-GCM or ChaCha20-Poly1305 (ciphers, OpenSSL's
 * syntax, replaces them when not empty), TLS 1.3's AEAD suites, the groups
 * X25519, P-256, P-384; no compression, no renegotiation. -1 with why. */
extern const char module_ssl_intermediate[];
int module_ssl_policy(struct ssl_ctx_st *ctx, const char *ciphers, unsigned min_version, char *why, size_t cap);

#endif
