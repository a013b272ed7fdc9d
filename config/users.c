/*
 * config/users.c -- the web side's security: [http] over TLS (tls_cert,
 * tls_key) and the users ([user NAME]: password_hash, role), checked once
 * the whole file is read. (MB-TCP-Security's [tls] and [role NAME] are
 * security.c's.)
 *
 * A password is never in the file: password_hash is a crypt(3) string that
 * `rtugw hash-password` makes (yescrypt, "$y$"). This file checks its form
 * only (config/ does not link libcrypt); web/auth.c verifies with it. A
 * plain-text password, or a hash of a method too weak to keep (DES, MD5),
 * is refused here, with the command that makes a good one.
 */
#include "config/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const role_names[] = { [CONFIG_ROLE_VIEWER] = "viewer", [CONFIG_ROLE_OPERATOR] = "operator",
                                          [CONFIG_ROLE_ADMIN] = "admin" };

const char *config_user_role_name(config_user_role_t role)
{
    return role >= CONFIG_ROLE_VIEWER && role <= CONFIG_ROLE_ADMIN ? role_names[role] : "none";
}

config_user_t *users_new(loader_t *ld, const char *name, unsigned *first)
{
    config_http_t *h = &ld->cfg->http;
    for (unsigned i = 0; i < h->user_count; i++)
        if (strcmp(h->users[i].name, name) == 0) {
            *first = h->users[i].line;
            return NULL;
        }
    if (h->user_count == CONFIG_MAX_USERS) {
        config_error_at(ld, ld->header_line, "[%s]: more than %d users", ld->section, CONFIG_MAX_USERS);
        return NULL;
    }
    config_user_t *u = &h->users[h->user_count++];
    *u = (config_user_t){ .line = ld->header_line };
    snprintf(u->name, sizeof u->name, "%s", name);
    return u;
}

/* The methods kept: yescrypt (libxcrypt's default), gost-yescrypt, scrypt,
 * bcrypt, SHA-512 and SHA-256 crypt. What follows the prefix is crypt's
 * alphabet (./0-9A-Za-z), '$' and, for SHA-crypt's rounds=, '='. */
static const char *hash_problem(const char *v)
{
    static const char *const kept[] = { "$y$", "$gy$", "$7$", "$2b$", "$2y$", "$6$", "$5$" };
    size_t len = strlen(v);
    bool known = false;

    if (len < 20)
        return "not a crypt(3) hash (a password is never written here): make one with `rtugw hash-password`";
    for (size_t i = 0; i < COUNT(kept); i++)
        known |= strncmp(v, kept[i], strlen(kept[i])) == 0;
    if (!known)
        return v[0] == '$' ? "a hash method not kept (use yescrypt, $y$...: `rtugw hash-password`)"
                           : "not a crypt(3) hash (a password is never written here): make one with "
                             "`rtugw hash-password`";
    for (const char *p = v; *p; p++)
        if (!strchr("./$=", *p) && !(*p >= '0' && *p <= '9') && !(*p >= 'a' && *p <= 'z') &&
            !(*p >= 'A' && *p <= 'Z'))
            return "a character no crypt(3) hash has";
    return NULL;
}

bool users_set_password_hash(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_user_t *u = ld->target;
    const char *why = strlen(value) >= sizeof u->password_hash ? "longer than any crypt(3) hash" : hash_problem(value);
    (void)number;
    if (why) {
        /* the value is not echoed: it may be a password written by mistake */
        config_error_at(ld, ld->line, "[%s] %s: %s", ld->section, k->name, why);
        return false;
    }
    snprintf(u->password_hash, sizeof u->password_hash, "%s", value);
    return true;
}

bool users_set_role(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_user_t *u = ld->target;
    (void)number;
    for (int r = CONFIG_ROLE_VIEWER; r <= CONFIG_ROLE_ADMIN; r++)
        if (strcmp(value, role_names[r]) == 0) {
            u->role = (config_user_role_t)r;
            return true;
        }
    config_bad_value(ld, k->name, value, "expected viewer (reads), operator (writes tag values) or admin");
    return false;
}

bool users_set_tls_min_version(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    if (strcmp(value, "1.2") == 0 || strcmp(value, "1.3") == 0) {
        ld->cfg->http.tls_min_version = value[2] == '3' ? 13 : 12;
        return true;
    }
    config_bad_value(ld, k->name, value, "expected 1.2 or 1.3 (nothing older is offered)");
    return false;
}

bool users_set_ciphers(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    char why[160];
    bool of_http = strcmp(k->name, "tls_ciphers") == 0;
    char *to = of_http ? ld->cfg->http.tls_ciphers : ld->cfg->tls.ciphers;
    (void)number;
    if (!*value || strlen(value) >= CONFIG_CIPHERS_MAX) {
        config_bad_value(ld, k->name, value, "expected a cipher list (OpenSSL's syntax), at most 511 characters");
        return false;
    }
    for (const char *c = value; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("-_:+!@=.,", *c)) {
            snprintf(why, sizeof why, "'%c' is not in a cipher list (OpenSSL's syntax, e.g. "
                                      "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384)", *c);
            config_bad_value(ld, k->name, value, why);
            return false;
        }
    snprintf(to, CONFIG_CIPHERS_MAX, "%s", value);
    return true;
}

/* [http] server_names: names and addresses separated by commas or blanks,
 * each a host name (letters, digits, '-', '.', '_'), an IPv4 or IPv6
 * address (without brackets), or '*' (any Host: behind a proxy that checks it). */
bool users_set_server_names(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    char name[256], why[400];
    (void)number;
    if (!*value || strlen(value) >= CONFIG_NAMES_MAX) {
        config_bad_value(ld, k->name, value, "expected host names or addresses, at most 511 characters");
        return false;
    }
    for (const char *c = value; *c;) {
        size_t n = strcspn(c, ", \t");
        if (n) {
            snprintf(name, sizeof name, "%.*s", (int)n, c);
            bool ok = n < sizeof name && (strcmp(name, "*") == 0 || name[0] != '.');
            for (const char *p = name; ok && *p && strcmp(name, "*") != 0; p++)
                ok = isalnum((unsigned char)*p) || *p == '-' || *p == '.' || *p == ':' || *p == '_';
            if (!ok) {
                snprintf(why, sizeof why, "'%s' is not a host name or an address (a Host value this server "
                                          "answers to, without a port; '*' for any)", name);
                config_bad_value(ld, k->name, value, why);
                return false;
            }
        }
        c += n;
        c += strspn(c, ", \t");
    }
    snprintf(ld->cfg->http.server_names, CONFIG_NAMES_MAX, "%s", value);
    return true;
}

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
    for (unsigned i = 0; i < h->user_count; i++) {
        const config_user_t *u = &h->users[i];
        if (!u->password_hash[0])
            config_error_at(ld, u->line, "[user %s]: password_hash is required (`rtugw hash-password` makes one)",
                            u->name);
        if (u->role == CONFIG_ROLE_NONE)
            config_error_at(ld, u->line, "[user %s]: role is required (viewer, operator or admin)", u->name);
    }
}
