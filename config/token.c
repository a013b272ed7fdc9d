/*
 * config/token.c -- [http] write_token: at least 128 bits, and how to make one.
 *
 * Without [user NAME] the write token is the admin's key to the HTTP side,
 * and anyone who can reach the port may guess it (issue 42: `4711` was
 * found in 4,712 requests, under a second). The strength of a string
 * cannot be measured, only bounded from above: a token of n characters
 * drawn from an alphabet of A symbols holds at most n*log2(A) bits. So the
 * token's alphabet is taken as the smallest of these that holds all of its
 * characters, and the bound must reach 128 bits:
 *   digits only             3.32 bits a character: 39 characters or more
 *   hexadecimal (one case)  4 bits:                32
 *   base64 / base64url      6 bits:                22 (a trailing '=' not counted)
 *   any other printable     6.55 bits (95 symbols): 20
 * A long word or phrase passes the bound and is still weak; the manual and
 * `rtugw hash-password --token` say to take random bytes (config_token_new:
 * 264 bits from getrandom(), 44 base64url characters). The error names the
 * file and line and the bits counted, never the token itself (it would go
 * to the log).
 */
#include "config/internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define TOKEN_BITS_MIN 128

static bool all_of(const char *s, size_t n, const char *set)
{
    return strspn(s, set) == n;
}

unsigned config_token_bits(const char *token, const char **alphabet)
{
    static const char digits[] = "0123456789", lower_hex[] = "0123456789abcdef", upper_hex[] = "0123456789ABCDEF",
                      b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/";
    size_t n = strlen(token);
    unsigned milli;   /* bits a character, in thousandths */
    const char *name;

    while (n && token[n - 1] == '=')   /* base64 padding holds nothing */
        n--;
    if (all_of(token, n, digits))
        milli = 3322, name = "digits";
    else if (all_of(token, n, lower_hex) || all_of(token, n, upper_hex))
        milli = 4000, name = "hexadecimal digits";
    else if (all_of(token, n, b64))
        milli = 6000, name = "base64 characters";
    else
        milli = 6555, name = "printable characters";
    if (alphabet)
        *alphabet = name;
    return (unsigned)(n * milli / 1000);
}

bool config_set_write_token(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_http_t *h = &ld->cfg->http;
    const char *alphabet;
    (void)number;
    if (!value[0]) {   /* empty: no token (no writes without users) */
        h->write_token[0] = 0;
        return true;
    }
    if (strlen(value) >= sizeof h->write_token) {
        config_error_at(ld, ld->line, "[%s] %s: longer than %zu characters", ld->section, k->name,
                        sizeof h->write_token - 1);
        return false;
    }
    unsigned bits = config_token_bits(value, &alphabet);
    if (bits < TOKEN_BITS_MIN) {
        config_error_at(ld, ld->line, "[%s] %s: too short to resist guessing: %zu %s hold at most %u bits, "
                        "%d are required (32 hexadecimal or 22 base64url characters; "
                        "`rtugw hash-password --token` makes one)", ld->section, k->name, strlen(value), alphabet,
                        bits, TOKEN_BITS_MIN);
        return false;
    }
    snprintf(h->write_token, sizeof h->write_token, "%s", value);
    return true;
}

int config_token_new(char *out, size_t cap)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[33];   /* 264 bits: 44 characters of 6 bits, 256 of them random to the bit */
    if (cap < 45 || getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -1;
    for (size_t i = 0; i < sizeof raw; i += 3) {
        unsigned v = (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | raw[i + 2];
        for (int j = 0; j < 4; j++)
            out[i / 3 * 4 + (size_t)j] = b64url[(v >> (18 - 6 * j)) & 63];
    }
    out[44] = 0;
    explicit_bzero(raw, sizeof raw);
    return 0;
}
