/*
 * north/spool.c -- the disk spool: QoS 1 publications that survive a
 * restart of the gateway until the broker has acknowledged them.
 *
 * Layout under spool_dir:
 *   XXXXXXXXXXXXXXXX.seg  append-only segments, named by the id (hex) of
 *                         their first record; records have consecutive ids
 *   acked                 "acked ID next_seq SEQ": every record <= ID is
 *                         acknowledged; SEQ is the next data sequence number
 * A record: magic, body length, FNV-1a of the body; the body: id, data
 * sequence number, QoS, retain, topic length, payload length, topic,
 * payload (host byte order: the spool is this machine's).
 *
 * Writes: one writev() per record into the current segment; a new segment
 * starts past max(64 KiB, min(16 MiB, spool_max_bytes / 8)). What write()
 * has handed the kernel survives the process dying (kill -9); fsync() every
 * spool_fsync_ms (and at a clean stop) bounds what a power cut can take.
 * The acked mark is rewritten (temporary file, rename) at the same cadence:
 * after a crash the records acknowledged since the last mark are sent once
 * more (at least once). At start a torn last record (bad length or
 * checksum) is cut off.
 *
 * Bound: past spool_max_bytes the oldest segment is deleted; its records
 * that were neither acknowledged nor already read into memory are dropped
 * and counted.
 */
#include "north/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SPOOL_MAGIC 0x3154514du   /* "MQT1" */
#define BODY_FIXED 24u            /* id, seq, qos, retain, topic length, payload length */

typedef struct rec_head {
    uint32_t magic, body_len, check;
} rec_head_t;

typedef struct segment {
    uint64_t first_id, last_id;   /* last_id < first_id: empty */
    uint64_t bytes;
} segment_t;

struct north_spool {
    char dir[NORTH_PATH_MAX];
    uint64_t max_bytes, seg_bytes;
    segment_t *segs;              /* oldest first; the last one is written */
    size_t n_segs, cap_segs;
    int wfd;                      /* the last segment's, -1: none open */
    bool unsynced;
    uint64_t next_id;
    uint64_t acked_id, acked_marked, seq_marked;
    uint64_t read_id;             /* the last record in memory or behind the reader */
    uint64_t r_first;             /* the segment the reader is in (first id) */
    uint64_t r_off;
    int rfd;
    uint64_t total_bytes, dropped;
    char error[NORTH_PATH_MAX + 128];
};

static uint32_t fnv1a(const void *data, size_t len, uint32_t h)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void seg_path(const north_spool_t *s, uint64_t first_id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%016" PRIx64 ".seg", s->dir, first_id);
}

static void set_error(north_spool_t *s, const char *what, int err)
{
    snprintf(s->error, sizeof s->error, "%s in %s: %s", what, s->dir, strerror(err));
}

const char *spool_last_error(const north_spool_t *s)
{
    return s->error;
}

/* ---- reading records -------------------------------------------------------------- */

/* The record at off of fd into a new message; *size its length on disk.
 * NULL at the end or on a damaged record. */
static north_msg_t *read_record(int fd, uint64_t off, uint64_t *size)
{
    rec_head_t h;
    uint8_t fixed[BODY_FIXED];
    if (pread(fd, &h, sizeof h, (off_t)off) != (ssize_t)sizeof h || h.magic != SPOOL_MAGIC ||
        h.body_len < BODY_FIXED || h.body_len > (64u << 20))
        return NULL;
    if (pread(fd, fixed, sizeof fixed, (off_t)(off + sizeof h)) != (ssize_t)sizeof fixed)
        return NULL;
    uint64_t id, seq;
    uint16_t topic_len;
    uint32_t payload_len;
    memcpy(&id, fixed, 8);
    memcpy(&seq, fixed + 8, 8);
    memcpy(&topic_len, fixed + 18, 2);
    memcpy(&payload_len, fixed + 20, 4);
    if ((uint64_t)BODY_FIXED + topic_len + payload_len != h.body_len)
        return NULL;
    north_msg_t *m = malloc(sizeof *m + topic_len + 1u + payload_len);
    if (!m)
        return NULL;
    *m = (north_msg_t){ .id = id, .seq = seq, .qos = fixed[16], .retain = fixed[17] != 0, .topic_len = topic_len,
                        .payload_len = payload_len };
    char *rest = m->data;
    if (pread(fd, rest, topic_len, (off_t)(off + sizeof h + BODY_FIXED)) != topic_len ||
        pread(fd, rest + topic_len + 1, payload_len, (off_t)(off + sizeof h + BODY_FIXED + topic_len)) !=
            (ssize_t)payload_len) {
        free(m);
        return NULL;
    }
    uint32_t check = fnv1a(fixed, sizeof fixed, 2166136261u);
    check = fnv1a(rest, topic_len, check);
    check = fnv1a(rest + topic_len + 1, payload_len, check);
    if (check != h.check) {
        free(m);
        return NULL;
    }
    rest[topic_len] = 0;
    *size = sizeof h + h.body_len;
    return m;
}

/* ---- segments ------------------------------------------------------------------------ */

static int seg_add(north_spool_t *s, segment_t seg)
{
    if (s->n_segs == s->cap_segs) {
        size_t cap = s->cap_segs ? s->cap_segs * 2 : 16;
        segment_t *bigger = realloc(s->segs, cap * sizeof *bigger);
        if (!bigger)
            return -ENOMEM;
        s->segs = bigger;
        s->cap_segs = cap;
    }
    s->segs[s->n_segs++] = seg;
    return 0;
}

static segment_t *seg_find(north_spool_t *s, uint64_t first_id)
{
    for (size_t i = 0; i < s->n_segs; i++)
        if (s->segs[i].first_id == first_id)
            return &s->segs[i];
    return NULL;
}

/* Deletes the oldest segment (never the one being written). */
static void seg_drop_oldest(north_spool_t *s)
{
    segment_t *seg = &s->segs[0];
    char path[NORTH_PATH_MAX + 32];
    uint64_t done = s->acked_id > s->read_id ? s->acked_id : s->read_id;

    if (seg->last_id > done && seg->last_id >= seg->first_id)
        s->dropped += seg->last_id - (done >= seg->first_id ? done : seg->first_id - 1);
    if (s->read_id < seg->last_id)
        s->read_id = seg->last_id;
    if (s->r_first == seg->first_id && s->rfd >= 0) {
        close(s->rfd);
        s->rfd = -1;
    }
    seg_path(s, seg->first_id, path, sizeof path);
    unlink(path);
    s->total_bytes -= seg->bytes;
    memmove(&s->segs[0], &s->segs[1], (s->n_segs - 1) * sizeof *s->segs);
    s->n_segs--;
}

static int seg_start(north_spool_t *s)
{
    char path[NORTH_PATH_MAX + 32];
    if (s->wfd >= 0) {
        if (fdatasync(s->wfd) != 0)
            set_error(s, "fdatasync", errno);
        close(s->wfd);
        s->wfd = -1;
    }
    if (s->n_segs && s->segs[s->n_segs - 1].first_id == s->next_id)
        s->n_segs--;   /* an empty segment left by a failed first append: start it over */
    seg_path(s, s->next_id, path, sizeof path);
    s->wfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (s->wfd < 0) {
        set_error(s, "cannot create a segment", errno);
        return -errno;
    }
    int rc = seg_add(s, (segment_t){ .first_id = s->next_id, .last_id = s->next_id - 1 });
    if (rc) {
        close(s->wfd);
        s->wfd = -1;
    }
    return rc;
}

int spool_append(north_spool_t *s, north_msg_t *m)
{
    segment_t *cur = s->n_segs ? &s->segs[s->n_segs - 1] : NULL;
    if (s->wfd < 0 || !cur || cur->bytes >= s->seg_bytes) {
        int rc = seg_start(s);
        if (rc)
            return rc;
        cur = &s->segs[s->n_segs - 1];
    }
    uint8_t fixed[BODY_FIXED] = { 0 };
    uint64_t id = s->next_id;
    memcpy(fixed, &id, 8);
    memcpy(fixed + 8, &m->seq, 8);
    fixed[16] = m->qos;
    fixed[17] = m->retain;
    memcpy(fixed + 18, &m->topic_len, 2);
    memcpy(fixed + 20, &m->payload_len, 4);
    rec_head_t h = { SPOOL_MAGIC, BODY_FIXED + m->topic_len + m->payload_len, 0 };
    h.check = fnv1a(fixed, sizeof fixed, 2166136261u);
    h.check = fnv1a(msg_topic(m), m->topic_len, h.check);
    h.check = fnv1a(msg_payload(m), m->payload_len, h.check);
    struct iovec iov[4] = { { &h, sizeof h }, { fixed, sizeof fixed },
                            { (void *)msg_topic(m), m->topic_len }, { (void *)msg_payload(m), m->payload_len } };
    ssize_t want = (ssize_t)(sizeof h + h.body_len);
    ssize_t wrote = writev(s->wfd, iov, 4);
    if (wrote != want) {
        int err = wrote < 0 ? errno : ENOSPC;
        set_error(s, "cannot append", err);
        if (ftruncate(s->wfd, (off_t)cur->bytes) != 0) {
            close(s->wfd);   /* a new segment next time; this one ends at its last good record */
            s->wfd = -1;
        }
        return -err;
    }
    m->id = id;
    s->next_id++;
    cur->last_id = id;
    cur->bytes += (uint64_t)want;
    s->total_bytes += (uint64_t)want;
    s->unsynced = true;
    while (s->total_bytes > s->max_bytes && s->n_segs > 1)
        seg_drop_oldest(s);
    return 0;
}

bool spool_behind(const north_spool_t *s)
{
    return s->read_id + 1 < s->next_id;
}

void spool_caught_up(north_spool_t *s)
{
    s->read_id = s->next_id - 1;
    if (s->rfd >= 0) {
        close(s->rfd);
        s->rfd = -1;
    }
    /* The next record to read will be the next one appended. */
    s->r_first = s->n_segs ? s->segs[s->n_segs - 1].first_id : 0;
    s->r_off = s->n_segs ? s->segs[s->n_segs - 1].bytes : 0;
}

/* Moves the reader to the segment holding read_id + 1. */
static segment_t *reader_segment(north_spool_t *s)
{
    uint64_t want = s->read_id + 1;
    segment_t *seg = s->r_first ? seg_find(s, s->r_first) : NULL;
    if (seg && want >= seg->first_id && want <= seg->last_id)
        return seg;
    if (s->rfd >= 0) {
        close(s->rfd);
        s->rfd = -1;
    }
    for (size_t i = 0; i < s->n_segs; i++) {
        seg = &s->segs[i];
        if (seg->last_id < want || seg->last_id < seg->first_id)
            continue;
        if (want < seg->first_id)       /* a gap left by a dropped segment */
            s->read_id = seg->first_id - 1;
        s->r_first = seg->first_id;
        s->r_off = 0;
        return seg;
    }
    return NULL;
}

north_msg_t *spool_read(north_spool_t *s)
{
    if (s->acked_id > s->read_id)
        s->read_id = s->acked_id;
    while (spool_behind(s)) {
        segment_t *seg = reader_segment(s);
        if (!seg)
            return NULL;
        if (s->rfd < 0) {
            char path[NORTH_PATH_MAX + 32];
            seg_path(s, seg->first_id, path, sizeof path);
            if ((s->rfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                set_error(s, "cannot read a segment", errno);
                return NULL;
            }
        }
        uint64_t size;
        north_msg_t *m = read_record(s->rfd, s->r_off, &size);
        if (!m) {
            set_error(s, "damaged record", EIO);
            s->read_id = seg->last_id;   /* skip the rest of this segment */
            continue;
        }
        s->r_off += size;
        if (m->id <= s->read_id) {       /* acknowledged already */
            free(m);
            continue;
        }
        s->read_id = m->id;
        return m;
    }
    return NULL;
}

void spool_ack(north_spool_t *s, uint64_t id)
{
    if (id > s->acked_id)
        s->acked_id = id;
}

static int write_mark(north_spool_t *s, uint64_t next_seq)
{
    char path[NORTH_PATH_MAX + 16], tmp[NORTH_PATH_MAX + 16], text[96];
    snprintf(path, sizeof path, "%s/acked", s->dir);
    snprintf(tmp, sizeof tmp, "%s/acked.tmp", s->dir);
    int len = snprintf(text, sizeof text, "acked %" PRIu64 " next_seq %" PRIu64 "\n", s->acked_id, next_seq);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    bool ok = write(fd, text, (size_t)len) == len && fdatasync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0)
        return -EIO;
    s->acked_marked = s->acked_id;
    s->seq_marked = next_seq;
    return 0;
}

void spool_flush(north_spool_t *s)
{
    if (s->unsynced && s->wfd >= 0) {
        if (fdatasync(s->wfd) != 0)
            set_error(s, "fdatasync", errno);
        s->unsynced = false;
    }
}

void spool_sync(north_spool_t *s, uint64_t next_seq)
{
    spool_flush(s);
    if (s->acked_id == s->acked_marked && next_seq == s->seq_marked)
        return;
    if (write_mark(s, next_seq) != 0) {
        set_error(s, "cannot write the acked mark", errno ? errno : EIO);
        return;
    }
    /* The mark is on disk: segments it covers can go. */
    while (s->n_segs > 1 && s->segs[0].last_id <= s->acked_id)
        seg_drop_oldest(s);
}

void spool_get_stats(const north_spool_t *s, spool_stats_t *st)
{
    *st = (spool_stats_t){ .bytes = s->total_bytes, .dropped = s->dropped };
    for (size_t i = 0; i < s->n_segs; i++) {
        const segment_t *seg = &s->segs[i];
        uint64_t from = seg->first_id > s->acked_id ? seg->first_id : s->acked_id + 1;
        if (seg->last_id >= from)
            st->records += seg->last_id - from + 1;
    }
}

/* ---- opening: what the last run left ----------------------------------------------------- */

static void read_mark(north_spool_t *s, uint64_t *seq)
{
    char path[NORTH_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/acked", s->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    uint64_t a, q;
    if (fscanf(f, "acked %" SCNu64 " next_seq %" SCNu64, &a, &q) == 2) {
        s->acked_id = s->acked_marked = a;
        *seq = s->seq_marked = q;
    }
    fclose(f);
}

/* Scans one segment: its ids and size; a torn tail is cut off. */
static int scan_segment(north_spool_t *s, uint64_t first_id, uint64_t *max_seq)
{
    char path[NORTH_PATH_MAX + 32];
    seg_path(s, first_id, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    segment_t seg = { .first_id = first_id, .last_id = first_id - 1 };
    struct stat stt;
    uint64_t size;
    north_msg_t *m;
    fstat(fd, &stt);
    while ((m = read_record(fd, seg.bytes, &size)) != NULL) {
        if (m->id != seg.last_id + 1) {
            free(m);
            break;
        }
        seg.last_id = m->id;
        if (m->seq > *max_seq)
            *max_seq = m->seq;
        seg.bytes += size;
        free(m);
    }
    if ((uint64_t)stt.st_size > seg.bytes && ftruncate(fd, (off_t)seg.bytes) != 0)
        set_error(s, "cannot cut a torn record", errno);
    close(fd);
    if (seg.last_id < seg.first_id || seg.last_id <= s->acked_id) {
        unlink(path);
        return 0;
    }
    s->total_bytes += seg.bytes;
    if (seg.last_id + 1 > s->next_id)
        s->next_id = seg.last_id + 1;
    return seg_add(s, seg);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int scan_dir(north_spool_t *s, uint64_t *max_seq)
{
    DIR *d = opendir(s->dir);
    if (!d)
        return -errno;
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strlen(e->d_name) != 20 || strcmp(e->d_name + 16, ".seg") != 0)
            continue;
        uint64_t id = strtoull(e->d_name, &end, 16);
        if (end != e->d_name + 16 || id == 0)
            continue;
        if (n == cap) {
            uint64_t *bigger = realloc(ids, (cap = cap ? cap * 2 : 32) * sizeof *ids);
            if (!bigger) {
                rc = -ENOMEM;
                break;
            }
            ids = bigger;
        }
        ids[n++] = id;
    }
    closedir(d);
    if (n)
        qsort(ids, n, sizeof *ids, by_id);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = scan_segment(s, ids[i], max_seq);
    free(ids);
    return rc;
}

int spool_open(const char *dir, unsigned max_bytes, north_spool_t **out, uint64_t *next_seq, char *err,
               size_t errcap)
{
    north_spool_t *s = calloc(1, sizeof *s);
    uint64_t max_seq = 0, seq_mark = 0;
    if (!s) {
        snprintf(err, errcap, "spool: out of memory");
        return -ENOMEM;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->max_bytes = max_bytes;
    s->seg_bytes = max_bytes / 8;
    if (s->seg_bytes < 65536)
        s->seg_bytes = 65536;
    if (s->seg_bytes > (16u << 20))
        s->seg_bytes = 16u << 20;
    s->wfd = s->rfd = -1;
    s->next_id = 1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errcap, "spool_dir = '%s': cannot create: %s", dir, strerror(errno));
        free(s);
        return -errno;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errcap, "spool_dir = '%s': not writable: %s", dir, strerror(errno));
        free(s);
        return -EACCES;
    }
    read_mark(s, &seq_mark);
    int rc = scan_dir(s, &max_seq);
    if (rc) {
        snprintf(err, errcap, "spool_dir = '%s': cannot read: %s", dir, strerror(-rc));
        spool_close(s, 0);
        return rc;
    }
    if (s->next_id <= s->acked_id)
        s->next_id = s->acked_id + 1;
    s->read_id = s->acked_id;
    *next_seq = max_seq + 1 > seq_mark ? max_seq + 1 : seq_mark;
    if (*next_seq == 0)
        *next_seq = 1;
    *out = s;
    return 0;
}

void spool_close(north_spool_t *s, uint64_t next_seq)
{
    if (!s)
        return;
    if (next_seq)
        spool_sync(s, next_seq);
    if (s->wfd >= 0)
        close(s->wfd);
    if (s->rfd >= 0)
        close(s->rfd);
    free(s->segs);
    free(s);
}
