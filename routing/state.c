/*
 * routing/state.c -- save and load the learned table.
 *
 * Text, so an operator can read it; every line is checked, and the last
 * line carries an FNV-1a checksum of everything before it, so a truncated
 * or edited file is refused rather than half-loaded:
 *
 *   rtugw-router-state 1
 *   edges 8 16 32 64 128 256
 *   bucket 0 choice native native -5.0123 812 fallback -4.9 77
 *   ...                       (log2 ns mean, samples; "-" when none)
 *   checksum 0x1234abcd
 */
#include "routing/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_MAGIC "rtugw-router-state"
#define STATE_VERSION 1
#define STATE_MAX_BYTES 65536

static uint32_t fnv1a(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)p[i];
        h *= 16777619u;
    }
    return h;
}

static int arm_parse(const char *s, unsigned *arm)
{
    if (strcmp(s, "native") == 0)
        *arm = ROUTER_ARM_NATIVE;
    else if (strcmp(s, "fallback") == 0)
        *arm = ROUTER_ARM_FALLBACK;
    else
        return -1;
    return 0;
}

int router_save(router_t *r, const char *path)
{
    router_merged_t m;
    char body[STATE_MAX_BYTES];
    size_t len = 0;

    router_merge(r, &m);
#define PUT(...)                                                                          \
    do {                                                                                  \
        int n_ = snprintf(body + len, sizeof body - len, __VA_ARGS__);                    \
        if (n_ < 0 || (size_t)n_ >= sizeof body - len)                                    \
            return -ENOSPC;                                                               \
        len += (size_t)n_;                                                                \
    } while (0)
    PUT("%s %d\nedges", STATE_MAGIC, STATE_VERSION);
    for (unsigned b = 0; b < r->nb; b++)
        PUT(" %u", (unsigned)r->cfg.edges[b]);
    PUT("\n");
    for (unsigned b = 0; b < r->nb; b++) {
        PUT("bucket %u choice %s", b, router_arm_name((router_arm_t)m.choice[b]));
        for (unsigned a = 0; a < ARMS; a++) {
            if (m.n_est[b][a])
                PUT(" %s %.17g %llu", router_arm_name((router_arm_t)a), m.est[b][a],
                    (unsigned long long)m.n_est[b][a]);
            else
                PUT(" %s - 0", router_arm_name((router_arm_t)a));
        }
        PUT("\n");
    }
    PUT("checksum 0x%08x\n", (unsigned)fnv1a(body, len));
#undef PUT

    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    int err = 0;
    if (fwrite(body, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0)
        err = errno ? -errno : -EIO;
    if (fclose(f) != 0 && !err)
        err = -errno;
    if (!err && rename(tmp, path) != 0)
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

/* Parses one "bucket" line into the temporary table. */
static int parse_bucket(const router_t *r, char *line, unsigned expect, double est[ARMS],
                        uint64_t n[ARMS], uint8_t *choice)
{
    char *save = NULL;
    char *tok[10];
    unsigned nt = 0;
    for (char *p = strtok_r(line, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        if (nt == 10)
            return -1;
        tok[nt++] = p;
    }
    if (nt != 10 || strcmp(tok[0], "bucket") != 0 || strcmp(tok[2], "choice") != 0)
        return -1;
    char *end;
    unsigned long idx = strtoul(tok[1], &end, 10);
    if (*end || idx != expect || idx >= r->nb)
        return -1;
    unsigned arm;
    if (arm_parse(tok[3], &arm) != 0)
        return -1;
    *choice = (uint8_t)arm;
    for (unsigned a = 0; a < ARMS; a++) {
        unsigned which;
        if (arm_parse(tok[4 + 3 * a], &which) != 0 || which != a)
            return -1;
        unsigned long long cnt = strtoull(tok[6 + 3 * a], &end, 10);
        if (*end || tok[6 + 3 * a][0] == '-')
            return -1;
        n[a] = cnt;
        if (strcmp(tok[5 + 3 * a], "-") == 0) {
            if (cnt)
                return -1;
            est[a] = 0.0;
        } else {
            est[a] = strtod(tok[5 + 3 * a], &end);
            /* log2 of ns: anything outside +-64 is not a cost */
            if (*end || !(est[a] > -64.0 && est[a] < 64.0) || cnt == 0)
                return -1;
        }
    }
    return 0;
}

int router_load(router_t *r, const char *path)
{
    char buf[STATE_MAX_BYTES + 1];
    double est[ROUTER_MAX_BUCKETS][ARMS] = { { 0 } };
    uint64_t n[ROUTER_MAX_BUCKETS][ARMS] = { { 0 } };
    uint8_t choice[ROUTER_MAX_BUCKETS] = { 0 };

    pthread_mutex_lock(&r->lock);
    unsigned threads = r->n_threads;
    pthread_mutex_unlock(&r->lock);
    if (threads)
        return -EBUSY;

    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        router_warn(r, "state file %s: %s; starting with a fresh table", path, strerror(e));
        return e == ENOENT ? -ENOENT : -EIO;
    }
    size_t len = fread(buf, 1, sizeof buf, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        router_warn(r, "state file %s: read error; starting with a fresh table", path);
        return -EIO;
    }
    if (len > STATE_MAX_BYTES) {
        router_warn(r, "state file %s: larger than %d bytes, not a router table; starting with a "
                    "fresh table", path, STATE_MAX_BYTES);
        return -EPROTO;
    }
    buf[len] = 0;
    if (memchr(buf, 0, len)) {
        router_warn(r, "state file %s: binary data, not a router table; starting with a fresh "
                    "table", path);
        return -EPROTO;
    }

    /* Header first, so a file from another version says so. */
    int version = -1, hn = 0;
    if (sscanf(buf, STATE_MAGIC " %d%n", &version, &hn) != 1 || buf[hn] != '\n') {
        router_warn(r, "state file %s: not a router state file (no '%s' header); starting with "
                    "a fresh table", path, STATE_MAGIC);
        return -EPROTO;
    }
    if (version != STATE_VERSION) {
        router_warn(r, "state file %s: format version %d, this build reads %d; starting with a "
                    "fresh table", path, version, STATE_VERSION);
        return -EPROTO;
    }

    /* Checksum line: the last line, covering every byte before it. */
    char *last = len >= 2 ? buf + len - 2 : buf;
    while (last > buf && *last != '\n')
        last--;
    unsigned sum = 0;
    int sn = 0;
    if (len < 2 || buf[len - 1] != '\n' || *last != '\n' ||
        sscanf(last + 1, "checksum 0x%8x%n", &sum, &sn) != 1 || last[1 + sn] != '\n' ||
        sum != fnv1a(buf, (size_t)(last + 1 - buf))) {
        router_warn(r, "state file %s: truncated or corrupt (checksum missing or wrong); "
                    "starting with a fresh table", path);
        return -EPROTO;
    }
    last[1] = 0;

    char *save = NULL;
    char *line = strtok_r(buf, "\n", &save); /* header */
    line = strtok_r(NULL, "\n", &save);
    char want[256];
    size_t wl = (size_t)snprintf(want, sizeof want, "edges");
    for (unsigned b = 0; b < r->nb; b++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, " %u", (unsigned)r->cfg.edges[b]);
    if (!line || strncmp(line, "edges", 5) != 0) {
        router_warn(r, "state file %s: no 'edges' line; starting with a fresh table", path);
        return -EPROTO;
    }
    if (strcmp(line, want) != 0) {
        router_warn(r, "state file %s: saved with bucket %s, configured %s; starting with a "
                    "fresh table", path, line, want);
        return -EINVAL;
    }
    for (unsigned b = 0; b < r->nb; b++) {
        line = strtok_r(NULL, "\n", &save);
        if (!line || parse_bucket(r, line, b, est[b], n[b], &choice[b]) != 0) {
            router_warn(r, "state file %s: bucket line %u malformed; starting with a fresh table",
                        path, b);
            return -EPROTO;
        }
    }
    if (strtok_r(NULL, "\n", &save)) {
        router_warn(r, "state file %s: more buckets than configured; starting with a fresh table",
                    path);
        return -EPROTO;
    }

    for (unsigned b = 0; b < r->nb; b++) {
        for (unsigned a = 0; a < ARMS; a++) {
            r->prior_est[b][a] = est[b][a];
            r->prior_n[b][a] = n[b][a];
        }
        r->prior_choice[b] = choice[b];
    }
    r->loaded = 1;
    return 0;
}
