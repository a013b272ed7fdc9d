/*
 * config/revision.c -- a configuration's revision: FNV-1a 64 of the file's
 * bytes, in hex. The API's If-Match, /status last_reload and the MQTT
 * module's "revision" (user property, config/result) all name a file by it,
 * so one edit by hand or by any of them changes it the same way. FNV-1a:
 * not a defence against a forged file (the API's writers are admins), only
 * a cheap, stable name for "the text I read".
 */
#include "config/config.h"

#include <stdint.h>
#include <stdio.h>

#define FNV_OFFSET 1469598103934665603ull
#define FNV_PRIME 1099511628211ull

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

void config_revision(const char *text, size_t len, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)fnv1a(FNV_OFFSET, (const unsigned char *)text, len));
}

void config_file_revision(const char *path, char out[17])
{
    FILE *f = fopen(path, "rb");
    uint64_t h = FNV_OFFSET;
    unsigned char buf[4096];
    size_t n;
    out[0] = 0;
    if (!f)
        return;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = fnv1a(h, buf, n);
    if (!ferror(f))
        snprintf(out, 17, "%016llx", (unsigned long long)h);
    fclose(f);
}
