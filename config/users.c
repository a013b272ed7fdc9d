/*
 * config/users.c -- the web side's security: [http] over TLS (tls_cert,
 * tls_key) and, checked once the whole file is read, what they need.
 * (MB-TCP-Security's [tls] and [role NAME] are security.c's.)
 */
#include "config/internal.h"

#include <stdio.h>
#include <string.h>

void users_resolve(loader_t *ld)
{
    const config_http_t *h = &ld->cfg->http;
    unsigned line = ld->single_line[S_HTTP];

    /* One without the other is a half-made HTTPS that would serve plain
     * HTTP instead: refused here, not at start-up. */
    if (h->tls_cert[0] && !h->tls_key[0])
        config_error_at(ld, line, "[http]: tls_cert = '%s' needs tls_key (its private key, PEM)", h->tls_cert);
    if (h->tls_key[0] && !h->tls_cert[0])
        config_error_at(ld, line, "[http]: tls_key = '%s' needs tls_cert (the certificate chain, PEM)", h->tls_key);
}
