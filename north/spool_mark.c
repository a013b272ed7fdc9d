/*
 * north/spool_mark.c -- the spool's acked mark: the file `acked` under
 * spool_dir, its format and how it is written so that a full disk cannot
 * stop it (spool.c decides what it says and when).
 *
 * Two 128-byte slots, each "acked ID next_seq SEQ gen G check C", padded
 * with spaces and ending in '\n'; C is FNV-1a of the text before " check".
 * A write goes in place into the slot after the newest (gen + 1), so it
 * rewrites bytes the file already has and needs no free block; a slot torn
 * by a power cut fails its check and the other, one generation older, is
 * read instead. At start the file is made anew, both slots, through a
 * temporary file and rename (spool_mark_reset), so every later write can be
 * in place. A slot of the older format ("acked ID next_seq SEQ", no check)
 * is read as generation 0.
 */
#include "north/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MARK_SLOT 128u   /* bytes per slot; the file holds two */

uint32_t spool_fnv1a(const void *data, size_t len, uint32_t h)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

void spool_mark_init(spool_mark_t *m, const char *dir)
{
    *m = (spool_mark_t){ .fd = -1 };
    snprintf(m->path, sizeof m->path, "%s/acked", dir);
}

/* One slot's text, padded with spaces to MARK_SLOT bytes, ending in '\n'. */
static void mark_format(char *slot, uint64_t acked, uint64_t seq, uint64_t gen)
{
    char text[MARK_SLOT];
    int len = snprintf(text, sizeof text, "acked %" PRIu64 " next_seq %" PRIu64 " gen %" PRIu64, acked, seq, gen);
    memset(slot, ' ', MARK_SLOT);
    len = snprintf(slot, MARK_SLOT, "%s check %08" PRIx32, text, spool_fnv1a(text, (size_t)len, SPOOL_FNV_BASIS));
    slot[len] = ' ';
    slot[MARK_SLOT - 1] = '\n';
}

int spool_mark_write(spool_mark_t *m, uint64_t acked, uint64_t seq, bool durable)
{
    char slot[MARK_SLOT];
    if (m->fd < 0 && (m->fd = open(m->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
        return -errno;
    uint64_t gen = m->gen + 1;
    mark_format(slot, acked, seq, gen);
    if (pwrite(m->fd, slot, MARK_SLOT, (off_t)((gen & 1) * MARK_SLOT)) != (ssize_t)MARK_SLOT)
        return errno ? -errno : -EIO;
    m->gen = gen;
    m->dirty = true;
    if (durable) {
        if (fdatasync(m->fd) != 0)
            return -errno;
        m->dirty = false;
    }
    return 0;
}

int spool_mark_reset(spool_mark_t *m, uint64_t acked, uint64_t seq)
{
    char tmp[sizeof m->path + 8], both[2 * MARK_SLOT];
    snprintf(tmp, sizeof tmp, "%s.tmp", m->path);
    mark_format(both, acked, seq, 2);
    mark_format(both + MARK_SLOT, acked, seq, 1);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    bool ok = write(fd, both, sizeof both) == (ssize_t)sizeof both && fdatasync(fd) == 0;
    int err = errno;
    close(fd);
    if (!ok || rename(tmp, m->path) != 0) {
        err = ok ? errno : err;
        unlink(tmp);
        return -(err ? err : EIO);
    }
    m->gen = 2;
    return 0;
}

/* One slot's values; false if it does not parse or its check fails. */
static bool mark_parse(const char *slot, uint64_t *acked, uint64_t *seq, uint64_t *gen)
{
    uint32_t check;
    int end = 0;
    if (sscanf(slot, "acked %" SCNu64 " next_seq %" SCNu64 "%n", acked, seq, &end) != 2)
        return false;
    *gen = 0;
    if (sscanf(slot + end, " gen %" SCNu64 " check %" SCNx32, gen, &check) != 2)
        return strncmp(slot + end, " gen", 4) != 0;
    return check == spool_fnv1a(slot, (size_t)(strstr(slot, " check") - slot), SPOOL_FNV_BASIS);
}

int spool_mark_read(spool_mark_t *m, uint64_t *acked, uint64_t *seq, char *text, size_t cap, const char **why)
{
    char raw[2 * MARK_SLOT + 1] = { 0 };
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, raw, sizeof raw - 1);
    close(fd);
    if (got <= 0)
        return 0;
    uint64_t a = 0, q = 0, g = 0, best_a = 0, best_q = 0, best_g = 0;
    bool found = false;
    for (size_t off = 0; off < (size_t)got; off += MARK_SLOT) {
        char slot[MARK_SLOT + 1] = { 0 };
        memcpy(slot, raw + off, (size_t)got - off < MARK_SLOT ? (size_t)got - off : MARK_SLOT);
        if (mark_parse(slot, &a, &q, &g) && (!found || g > best_g)) {
            found = true;
            best_a = a, best_q = q, best_g = g;
        }
    }
    if (!found || best_a >= SPOOL_LIMIT || best_q >= SPOOL_LIMIT) {
        raw[strcspn(raw, "\n")] = 0;
        for (char *c = raw; *c; c++)   /* the log line stays one line of text */
            if (*c < ' ' || *c > '~')
                *c = '?';
        snprintf(text, cap, "%s", raw);
        *why = found ? "holds a value past 2^53, which no run can have reached" : "does not parse";
        return -1;
    }
    *acked = best_a;
    *seq = best_q;
    m->gen = best_g;
    return 1;
}

void spool_mark_close(spool_mark_t *m)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
}
