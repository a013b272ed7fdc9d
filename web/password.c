/*
 * web/password.c -- passwords: the yescrypt hash [user NAME] password_hash
 * holds (made by `rtugw hash-password`, cli/cmd_passwd.c) and the check of
 * a login's password against it (auth.c), both through libcrypt's crypt_r,
 * whose 32 KiB work area is taken for the call only and wiped after it.
 */
#include "web/internal.h"

#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int web_password_hash(const char *password, unsigned cost, char *out, size_t cap)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *cd = calloc(1, sizeof *cd);
    int rc = -1;

    if (cd && crypt_gensalt_rn("$y$", cost, NULL, 0, salt, sizeof salt)) {
        const char *h = crypt_r(password, salt, cd);
        if (h && h[0] == '$' && strlen(h) < cap) {
            snprintf(out, cap, "%s", h);
            rc = 0;
        }
        explicit_bzero(cd, sizeof *cd);
    }
    free(cd);
    return rc;
}

/* Does password hash to hash? crypt_r's work area (32 KiB) is taken for the
 * call only. A hash crypt cannot use ("*0", "*1") never matches. */
bool web_password_matches(const char *password, const char *hash)
{
    struct crypt_data *cd = calloc(1, sizeof *cd);
    bool ok = false;
    if (cd) {
        const char *h = crypt_r(password, hash, cd);
        size_t n = strlen(hash);
        if (h && h[0] == '$' && strlen(h) == n) {
            unsigned diff = 0;
            for (size_t i = 0; i < n; i++)
                diff |= (unsigned)(uint8_t)h[i] ^ (uint8_t)hash[i];
            ok = diff == 0;
        }
        explicit_bzero(cd, sizeof *cd);
    }
    free(cd);
    return ok;
}
