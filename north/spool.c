/*
 * north/spool.c -- the disk spool: QoS 1 publications that survive a
 * restart of the gateway until the broker has acknowledged them.
 *
 * Layout under spool_dir:
 *   XXXXXXXXXXXXXXXX.seg  append-only segments, named by the id (hex) of
 *                         their first record; records have consecutive ids
 *   acked                 the acked mark: two 128-byte slots, each
 *                         "acked ID next_seq SEQ gen G check C": every record
 *                         <= ID is acknowledged; SEQ is above every data
 *                         sequence number ever assigned (its file
 *                         format and writes: spool_mark.c)
 * A record: magic, body length, FNV-1a of the body; the body: id, data
 * sequence number, QoS, retain, topic length, payload length, topic,
 * payload (host byte order: the spool is this machine's).
 *
 * Writes: one writev() per record into the current segment; a new segment
 * starts past max(64 KiB, min(16 MiB, spool_max_bytes / 8)). What write()
 * has handed the kernel survives the process dying (kill -9); fsync() every
 * spool_fsync_ms (and at a clean stop) bounds what a power cut can take.
 * The acked mark is rewritten at the same cadence: after a crash the
 * records acknowledged since the last mark are sent once more (at least
 * once).
 *
 * A full disk: the mark is written in place, into the slot not holding
 * the newest mark (the file is made 256 bytes at start, so rewriting it
 * takes no new block), so it can always be brought up to date; then every
 * fully acknowledged segment, the current one included, can go. Segments
 * go only after the mark covering them is on disk: the mark's SEQ is then
 * the only trace of their sequence numbers, and without it a restart would
 * hand them out again. So a full disk empties as soon as the broker has
 * acknowledged what is on it; and a segment whose first record is
 * acknowledged ends past 64 KiB (append_record), so that acknowledged data
 * does not sit on a small disk until it fills.
 *
 * Damage: at start each segment is read through; a torn last record (the
 * file ends inside it: a power cut mid-write) is cut off; any other record
 * that fails its checks is damage: logged, counted, its records counted as
 * dropped, and the records after it kept (find_record() says how they are
 * found again). Sequence numbers of lost records are never reused: next_seq
 * comes from the mark and from every record read, and the records after a
 * damaged one carry higher ones. A mark that cannot be right (a value past
 * 2^53, see SPOOL_LIMIT) is refused, logged with the file and its text, and
 * counted; every record in the spool is then sent again (at least once).
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
#define REC_MIN (sizeof(rec_head_t) + BODY_FIXED)   /* the smallest record on disk */
#define SEG_MIN 65536u            /* the smallest segment bound; a fully acked one this big retires */

typedef struct rec_head {
    uint32_t magic, body_len, check;
} rec_head_t;

typedef struct segment {
    uint64_t first_id, last_id;   /* last_id < first_id: empty */
    uint64_t bytes;
    bool damage_reported;         /* at the start's scan: the reader skips it quietly */
} segment_t;

struct north_spool {
    north_t *owner;               /* for its log */
    char dir[NORTH_PATH_MAX];
    uint64_t max_bytes, seg_bytes;
    segment_t *segs;              /* oldest first; the last one is written */
    size_t n_segs, cap_segs;
    int wfd;                      /* the last segment's, -1: none open */
    bool unsynced;
    uint64_t next_id;
    uint64_t acked_id, acked_marked, seq_marked;   /* the marked ones: on disk (fdatasync) */
    uint64_t seq_floor;           /* above every sequence number appended or marked */
    spool_mark_t mark;
    uint64_t read_id;             /* the last record in memory or behind the reader */
    uint64_t r_first;             /* the segment the reader is in (first id) */
    uint64_t r_off;
    uint64_t r_last;              /* the id of the record that ends at r_off */
    int rfd;
    uint64_t total_bytes, dropped, damaged;
    char error[NORTH_PATH_MAX + 128];
};

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
    if ((uint64_t)BODY_FIXED + topic_len + payload_len != h.body_len || id >= SPOOL_LIMIT || seq >= SPOOL_LIMIT)
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
    uint32_t check = spool_fnv1a(fixed, sizeof fixed, SPOOL_FNV_BASIS);
    check = spool_fnv1a(rest, topic_len, check);
    check = spool_fnv1a(rest + topic_len + 1, payload_len, check);
    if (check != h.check) {
        free(m);
        return NULL;
    }
    rest[topic_len] = 0;
    *size = sizeof h + h.body_len;
    return m;
}

/* Resynchronisation past a damaged record at from (before end), the last
 * good record before it being after_id: the next record, or NULL if none.
 * Records are not aligned, so a boundary is looked for at every byte past
 * from: a candidate must start with the magic, have a length that fits the
 * file, a body whose FNV-1a matches (read_record), and an id above after_id
 * by no more than the skipped bytes can hold (each record takes REC_MIN
 * bytes at least). Damage passes the magic and the checksum together by
 * chance with odds of 2^-64 per position, and what passes is a whole record
 * as spool_append wrote it (id, sequence number, topic and payload under
 * one checksum): a false resynchronisation cannot hand out bytes that were
 * not written as one record; at worst a record copied whole into a lost
 * payload, whose id must then still fit the window. */
static north_msg_t *find_record(int fd, uint64_t from, uint64_t end, uint64_t after_id, uint64_t *at, uint64_t *size)
{
    uint8_t buf[16384];
    const uint32_t magic = SPOOL_MAGIC;
    uint64_t pos = from + 1;
    while (pos + sizeof(rec_head_t) <= end) {
        size_t want = end - pos < sizeof buf ? (size_t)(end - pos) : sizeof buf;
        ssize_t got = pread(fd, buf, want, (off_t)pos);
        if (got < (ssize_t)sizeof magic)
            return NULL;
        for (const uint8_t *hit = buf; (hit = memmem(hit, (size_t)(buf + got - hit), &magic, sizeof magic)) != NULL;
             hit++) {
            uint64_t off = pos + (uint64_t)(hit - buf);
            north_msg_t *m = read_record(fd, off, size);
            if (m && m->id > after_id && m->id - after_id - 1 <= (off - from) / REC_MIN) {
                *at = off;
                return m;
            }
            free(m);
        }
        pos += (uint64_t)got - (sizeof magic - 1);   /* a magic across the chunks' border is found next time */
    }
    return NULL;
}

/* One damaged stretch [off, resumed) of path: records first..last lost
 * (last < first: the stretch runs to the end, their ids unknown). Logged
 * and counted; those not acknowledged nor already delivered count as
 * dropped. */
static void report_damage(north_spool_t *s, const char *path, uint64_t off, uint64_t resumed, uint64_t first,
                          uint64_t last)
{
    uint64_t done = s->acked_id > s->read_id ? s->acked_id : s->read_id;
    uint64_t from = first > done ? first : done + 1;
    uint64_t lost = last >= from ? last - from + 1 : 0;
    s->damaged++;
    s->dropped += lost;
    if (last < first) {
        north_log(s->owner, 1,
                  "mqtt: spool: %s: damaged from byte %" PRIu64 " to the end (%" PRIu64 " bytes, at most %" PRIu64
                  " records after record %" PRIu64 "): cut off; their sequence numbers are not used again",
                  path, off, resumed - off, (resumed - off + REC_MIN - 1) / REC_MIN, first - 1);
        return;
    }
    north_log(s->owner, 1,
              "mqtt: spool: %s: damaged record at byte %" PRIu64 ": %" PRIu64 " publications lost (records %" PRIu64
              "..%" PRIu64 ", %" PRIu64 " of them not yet acknowledged); the records from byte %" PRIu64 " on are kept",
              path, off, last >= first ? last - first + 1 : 0, first, last, lost, resumed);
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

/* Deletes the oldest segment; when it is the one being written, the next
 * append starts a new one. */
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
    if (s->n_segs == 1 && s->wfd >= 0) {
        close(s->wfd);
        s->wfd = -1;
    }
    seg_path(s, seg->first_id, path, sizeof path);
    unlink(path);
    s->total_bytes -= seg->bytes;
    memmove(&s->segs[0], &s->segs[1], (s->n_segs - 1) * sizeof *s->segs);
    s->n_segs--;
}

/* Deletes the segments the mark on disk covers; the current one only from
 * current_min bytes on (0: even empty). How many went. */
static unsigned drop_acked_segments(north_spool_t *s, uint64_t current_min)
{
    unsigned n = 0;
    while (s->n_segs && s->segs[0].last_id <= s->acked_marked && (s->n_segs > 1 || s->segs[0].bytes >= current_min)) {
        seg_drop_oldest(s);
        n++;
    }
    return n;
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

/* ---- the acked mark (its file: spool_mark.c) ------------------------------------------ */

/* The mark with next_seq (never below what was appended or marked before):
 * durable ones are what drop_acked_segments may trust. */
static int write_mark(north_spool_t *s, uint64_t next_seq, bool durable)
{
    if (next_seq < s->seq_floor)
        next_seq = s->seq_floor;
    uint64_t gen = s->mark.gen;
    int rc = spool_mark_write(&s->mark, s->acked_id, next_seq, durable);
    if (s->mark.gen != gen)
        s->seq_floor = next_seq;   /* written, durable or not */
    if (rc == 0 && durable) {
        s->acked_marked = s->acked_id;
        s->seq_marked = next_seq;
    }
    return rc;
}

/* At start: a fresh mark, so that later ones can be written in place. */
static int reset_mark(north_spool_t *s, uint64_t next_seq)
{
    int rc = spool_mark_reset(&s->mark, s->acked_id, next_seq);
    if (rc == 0) {
        s->acked_marked = s->acked_id;
        s->seq_marked = s->seq_floor = next_seq;
    }
    return rc;
}

/* What the last run marked, if its values can be right; a refused mark is
 * damage: logged and counted, and everything in the spool is sent again. */
static void read_mark(north_spool_t *s, uint64_t *seq)
{
    char text[160];
    const char *why = "";
    uint64_t acked = 0, q = 0;
    int rc = spool_mark_read(&s->mark, &acked, &q, text, sizeof text, &why);
    if (rc < 0) {
        s->damaged++;
        north_log(s->owner, 0,
                  "mqtt: spool: %s: refused: \"%.100s\" %s; every record in the spool is sent again, and the next "
                  "sequence number follows the highest one in the records",
                  s->mark.path, text, why);
        return;
    }
    if (rc > 0) {
        s->acked_id = s->acked_marked = acked;
        *seq = s->seq_marked = q;
    }
}

/* One record at the end of the current segment (a new one when it is past
 * its bound or none is open). 0 or -errno; on failure nothing of it stays.
 * A segment whose first record the broker has acknowledged also ends past
 * SEG_MIN: while the broker keeps up, the current segment is seldom fully
 * acknowledged at any one moment (some are always in flight), and only a
 * segment that is not current can go as soon as its last record is; so
 * what is acknowledged holds at most about SEG_MIN of the disk, not a
 * whole segment bound (8 MiB with the defaults). */
static int append_record(north_spool_t *s, north_msg_t *m)
{
    segment_t *cur = s->n_segs ? &s->segs[s->n_segs - 1] : NULL;
    if (s->wfd < 0 || !cur || cur->bytes >= s->seg_bytes || (cur->bytes >= SEG_MIN && cur->first_id <= s->acked_id)) {
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
    h.check = spool_fnv1a(fixed, sizeof fixed, SPOOL_FNV_BASIS);
    h.check = spool_fnv1a(msg_topic(m), m->topic_len, h.check);
    h.check = spool_fnv1a(msg_payload(m), m->payload_len, h.check);
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
    if (m->seq >= s->seq_floor)
        s->seq_floor = m->seq + 1;
    return 0;
}

int spool_append(north_spool_t *s, north_msg_t *m)
{
    int rc = append_record(s, m);
    /* The disk is full: what the broker has acknowledged can make room, the
     * mark first (in place: it needs no space), then its segments. */
    if (rc == -ENOSPC && s->acked_id > s->acked_marked && write_mark(s, s->seq_floor, true) != 0)
        set_error(s, "cannot write the acked mark", errno ? errno : EIO);
    if (rc == -ENOSPC && drop_acked_segments(s, 0) > 0)
        rc = append_record(s, m);
    if (rc) {
        /* Kept in memory or dropped, it has its sequence number: the mark
         * says so at once (in place, synced with the next spool_sync), so
         * that a restart after a crash cannot hand the number out again. */
        if (m->seq >= s->seq_floor)
            write_mark(s, m->seq + 1, false);
        return rc;
    }
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
    s->r_last = s->n_segs ? s->segs[s->n_segs - 1].last_id : 0;
}

/* Moves the reader to the segment holding read_id + 1. */
static segment_t *reader_segment(north_spool_t *s)
{
    uint64_t want = s->read_id + 1;
    segment_t *seg = s->r_first ? seg_find(s, s->r_first) : NULL;
    if (seg && want >= seg->first_id && want <= seg->last_id && s->r_off < seg->bytes)
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
        s->r_last = seg->first_id - 1;
        return seg;
    }
    return NULL;
}

north_msg_t *spool_read(north_spool_t *s)
{
    char path[NORTH_PATH_MAX + 32];
    if (s->acked_id > s->read_id)
        s->read_id = s->acked_id;
    while (spool_behind(s)) {
        segment_t *seg = reader_segment(s);
        if (!seg)
            return NULL;
        seg_path(s, seg->first_id, path, sizeof path);
        if (s->rfd < 0 && (s->rfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            set_error(s, "cannot read a segment", errno);
            return NULL;
        }
        uint64_t size, at = s->r_off;
        north_msg_t *m = read_record(s->rfd, s->r_off, &size);
        if (!m || m->id != s->r_last + 1) {
            /* Damaged since the start's scan (which reported what it found). */
            free(m);
            m = find_record(s->rfd, s->r_off, seg->bytes, s->r_last, &at, &size);
            if (!seg->damage_reported)
                report_damage(s, path, s->r_off, m ? at : seg->bytes, s->r_last + 1, m ? m->id - 1 : seg->last_id);
            if (!m) {
                if (s->read_id < seg->last_id)
                    s->read_id = seg->last_id;   /* nothing more to read in this segment */
                s->r_off = seg->bytes;
                s->r_last = seg->last_id;
                continue;
            }
        }
        s->r_off = at + size;
        s->r_last = m->id;
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
    s->error[0] = 0;   /* what this call reports is its own */
    spool_flush(s);
    if (s->acked_id == s->acked_marked && next_seq <= s->seq_marked && !s->mark.dirty)
        return;
    if (write_mark(s, next_seq, true) != 0) {
        set_error(s, "cannot write the acked mark", errno ? errno : EIO);
        return;
    }
    /* The mark is on disk: segments it covers can go. */
    drop_acked_segments(s, SEG_MIN);
}

void spool_get_stats(const north_spool_t *s, spool_stats_t *st)
{
    *st = (spool_stats_t){ .bytes = s->total_bytes, .dropped = s->dropped, .damaged = s->damaged };
    for (size_t i = 0; i < s->n_segs; i++) {
        const segment_t *seg = &s->segs[i];
        uint64_t from = seg->first_id > s->acked_id ? seg->first_id : s->acked_id + 1;
        if (seg->last_id >= from)
            st->records += seg->last_id - from + 1;
    }
}

/* ---- opening: what the last run left ----------------------------------------------------- */

/* Scans one segment: its ids, size and highest sequence number; damage is
 * reported and passed (find_record), a torn tail cut off. */
static int scan_segment(north_spool_t *s, uint64_t first_id)
{
    char path[NORTH_PATH_MAX + 32];
    seg_path(s, first_id, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    segment_t seg = { .first_id = first_id, .last_id = first_id - 1 };
    struct stat stt;
    uint64_t size, at, end = fstat(fd, &stt) == 0 ? (uint64_t)stt.st_size : 0;
    while (seg.bytes < end) {
        north_msg_t *m = read_record(fd, seg.bytes, &size);
        at = seg.bytes;
        if (!m || m->id != seg.last_id + 1) {
            free(m);
            if (!(m = find_record(fd, seg.bytes, end, seg.last_id, &at, &size)))
                break;
            report_damage(s, path, seg.bytes, at, seg.last_id + 1, m->id - 1);
            seg.damage_reported = true;
        }
        seg.last_id = m->id;
        if (m->seq >= s->seq_floor)
            s->seq_floor = m->seq + 1;
        seg.bytes = at + size;
        free(m);
    }
    if (end > seg.bytes) {
        /* No record after seg.bytes. A header whose record would end past
         * the file's end, or less than a header, is a write a power cut
         * tore: the publication was never sent (at least once promises
         * nothing for it). Anything else is damage: it held at most a
         * record per REC_MIN bytes, whose sequence numbers must not come
         * back. */
        rec_head_t h;
        uint64_t tail = end - seg.bytes;
        bool torn = pread(fd, &h, sizeof h, (off_t)seg.bytes) != (ssize_t)sizeof h ||
                    (h.magic == SPOOL_MAGIC && seg.bytes + sizeof h + h.body_len > end);
        if (torn) {
            north_log(s->owner, 2, "mqtt: spool: %s: a torn last record (%" PRIu64 " bytes) cut off", path, tail);
        } else {
            report_damage(s, path, seg.bytes, end, seg.last_id + 1, seg.last_id);
            s->seq_floor += (tail + REC_MIN - 1) / REC_MIN;
        }
        if (ftruncate(fd, (off_t)seg.bytes) != 0)
            set_error(s, "cannot cut a torn record", errno);
    }
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

static int scan_dir(north_spool_t *s)
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
        if (end != e->d_name + 16 || id == 0 || id >= SPOOL_LIMIT)
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
        rc = scan_segment(s, ids[i]);
    free(ids);
    return rc;
}

int spool_open(north_t *owner, const char *dir, unsigned max_bytes, north_spool_t **out, uint64_t *next_seq,
               char *err, size_t errcap)
{
    north_spool_t *s = calloc(1, sizeof *s);
    uint64_t seq_mark = 0;
    if (!s) {
        snprintf(err, errcap, "spool: out of memory");
        return -ENOMEM;
    }
    s->owner = owner;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->max_bytes = max_bytes;
    s->seg_bytes = max_bytes / 8;
    if (s->seg_bytes < SEG_MIN)
        s->seg_bytes = SEG_MIN;
    if (s->seg_bytes > (16u << 20))
        s->seg_bytes = 16u << 20;
    s->wfd = s->rfd = -1;
    spool_mark_init(&s->mark, dir);
    s->next_id = 1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errcap, "spool_dir = '%s': cannot create: %s", dir, strerror(errno));
        free(s);
        return -errno;
    }
    /* a symbolic link is refused: config/paths.c checked where the folder
     * is at load; a link put in its place since would lead out of it */
    struct stat lst;
    if (lstat(dir, &lst) != 0 || !S_ISDIR(lst.st_mode)) {
        snprintf(err, errcap, "spool_dir = '%s': not a folder (a symbolic link is refused)", dir);
        free(s);
        return -ENOTDIR;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errcap, "spool_dir = '%s': not writable: %s", dir, strerror(errno));
        free(s);
        return -EACCES;
    }
    read_mark(s, &seq_mark);
    int rc = scan_dir(s);
    if (rc) {
        snprintf(err, errcap, "spool_dir = '%s': cannot read: %s", dir, strerror(-rc));
        spool_close(s, 0);
        return rc;
    }
    if (s->next_id <= s->acked_id)
        s->next_id = s->acked_id + 1;
    s->read_id = s->acked_id;
    *next_seq = s->seq_floor > seq_mark ? s->seq_floor : seq_mark;
    if (*next_seq == 0)
        *next_seq = 1;
    /* On a full disk this fails; the mark is then rewritten in place. */
    if ((rc = reset_mark(s, *next_seq)) != 0)
        north_log(owner, 1, "mqtt: spool: cannot rewrite %s/acked: %s; it is rewritten in place", dir, strerror(-rc));
    s->seq_floor = *next_seq;
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
    spool_mark_close(&s->mark);
    free(s->segs);
    free(s);
}
