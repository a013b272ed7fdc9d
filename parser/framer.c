/*
 * parser/framer.c -- the streaming RTU framer: bytes with arrival stamps in,
 * whole ADUs out.
 *
 * The rules (stated here only; docs/decisions/frames-by-length.md says why):
 *
 * Silence. A chunk's stamp is the moment its last byte arrived, so its first
 * byte started n character times earlier. The silence before a chunk of n
 * bytes is  stamp - n * char_time - previous chunk's stamp  (0 if negative).
 * Without that correction a UART that hands over 8 bytes per interrupt at
 * 9600 baud (9 ms apart, t3.5 = 4 ms) would look silent between all of its
 * chunks. rtu_framer_idle(now) measures now - last stamp. A silence >= t3.5
 * closes the segment of bytes before it. With baud 0 there is no silence.
 * A stream without wire timing (RTU over TCP, silence_ns set) has no
 * character time to subtract: its silence is silence_ns between stamps.
 *
 * Length. The direction's rule predicts the ADU length from the first bytes
 * (SNIFF: the request rule and the response rule). A frame is emitted as
 * soon as its predicted length is in and its CRC is good, without waiting
 * for silence. A prediction above 256 bytes, and function 0 (or 0x80), can
 * start no frame.
 *
 * Unknown functions (no length rule) end at the silence that closes their
 * segment: the segment is one frame if its CRC is good. Only right after a
 * frame or a silence may the shortest CRC-good prefix of 4+ bytes end one
 * instead (two unknown frames glued in a capture record; with baud 0 the
 * only delimiter): tried from every byte of a noise run, 256 candidate
 * lengths each, it would fake a frame from 1 position in 256.
 *
 * Mid-frame gap. A segment closed by silence before its predicted frame is
 * complete is over: no later byte is glued to it. If nothing in it forms a
 * CRC-good frame, its bytes are emitted as one frame with crc_ok = 0
 * (truncated or damaged) when there are 4 to 256 of them, else counted as
 * noise (a turnaround glitch is one byte, not a frame). Such frames count
 * as silence_splits, like unknown functions ended by silence.
 *
 * Resynchronisation. When the head cannot start a frame (complete with a
 * bad CRC, function 0, over-long), the framer scans forward byte by byte for
 * the first position that yields a CRC-good frame; the bytes skipped are
 * noise_bytes. The scan does not stop at a position that merely looks like
 * an unknown function (only silence would settle it, and the good frame
 * behind a noise byte must not wait for that), but it does stop at one that
 * waits for the rest of a predicted frame: that settles by its own length,
 * and scanning inside it would give each of its bytes a 2^-16 chance to fake
 * a frame. The skipped bytes are kept until the question is settled, so a
 * damaged frame followed by silence is still reported whole (crc_ok = 0);
 * once more than 256 bytes separate them from the end they could no longer
 * be one frame and are dropped as noise. A head reached by resync (not
 * after a frame or silence) waits the same way but loses to any later
 * position that proves a frame first; so does, with baud 0, an unknown
 * function at the head.
 *
 * Length over silence (cfg.by_length, the master's and the slave's side,
 * never SNIFF). The stamps are when the reader got round to the port, not
 * when the bytes crossed the wire: a reader held up for 20 ms between two
 * reads of one answer sees a silence inside it that the wire never had.
 * Where the length is known that silence is not allowed to end the frame:
 * a head at a boundary whose rule predicts its length (or that lacks the
 * bytes to predict it yet) keeps every later byte, across stamped
 * silences and idle(), until the predicted length is in. Then a good CRC
 * makes it a frame; a bad one lets the silences rule again (the head's
 * segment is judged as without this option: damaged, noise, resync). A
 * truncated answer thus waits for its caller's deadline (the line's
 * timeout, then its next request resets the framer) rather than being
 * reported at the silence. So that a noise byte followed by silence does
 * not hold back the answer behind it, a position right after a stamped
 * silence that starts a complete CRC-good frame by its own predicted
 * length wins over a head still waiting: only those few positions are
 * tried, not every byte inside the held frame (each would be a 2^-16
 * chance to fake one). An unknown function, a head reached by resync
 * (after noise) and the silence that vouches for an answer (the line's
 * I3) keep the rules above.
 *
 * SNIFF. A position is judged by both rules. If only one yields a CRC-good
 * frame, that decides. If both do with the same length (fc 5, 6, 22 echoes;
 * a read response whose byte count makes it 8 bytes long), the frame is the
 * response exactly when the last frame emitted was a request to a unicast
 * slave with the same slave and function, still unanswered; otherwise the
 * request. The same expectation decides is_request for unknown functions
 * and damaged frames. A response (valid or not) ends the expectation, so
 * does a broadcast request; an unanswered request is forgotten as soon as
 * a frame that does not match it comes.
 *
 * Memory. One fixed buffer of RTU_FRAMER_CAP bytes (with a stamp and two
 * flags per byte) and a queue of RTU_FRAMER_QUEUE finished frames, all in
 * the one allocation of rtu_framer_new(). When the caller does not drain
 * frames and the buffer is full, incoming bytes are dropped: one overflow
 * per feed that drops. overflows also counts every run of more than 256
 * discarded bytes without a frame or a silence between them. noise_bytes
 * counts every byte discarded for whatever reason, so bytes fed = bytes in
 * frames + noise_bytes + bytes still buffered. rtu_framer_reset() drops
 * buffered bytes and queued frames without counting them.
 */
#include "parser/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RTU_FRAMER_CAP (2 * RTU_MAX_ADU + 64)
#define RTU_FRAMER_QUEUE 8

typedef enum verdict {
    V_FRAME,  /* a CRC-good frame starts here */
    V_WAIT,   /* might start a frame once more bytes come */
    V_NONE    /* cannot start a frame, whatever follows */
} verdict_t;

typedef struct judgement {
    verdict_t v;
    uint16_t len;
    uint8_t is_request;
    uint8_t by_silence;
    uint8_t unknown;  /* no length rule: only silence or a CRC can end it */
} judgement_t;

/* What a length rule says about the bytes at a position. */
typedef enum rule_result {
    R_GOOD,       /* predicted length present, CRC good */
    R_BAD,        /* predicted length present, CRC bad, or over-long */
    R_INCOMPLETE, /* more bytes needed */
    R_UNKNOWN     /* function without a length rule */
} rule_result_t;

struct rtu_framer {
    rtu_framer_config_t cfg;
    uint64_t t35_ns;
    uint64_t char_ns;

    uint8_t buf[RTU_FRAMER_CAP];
    uint8_t gap_before[RTU_FRAMER_CAP]; /* silence >= t3.5 before this byte */
    uint8_t dead[RTU_FRAMER_CAP];       /* cannot start a frame, whatever follows */
    uint64_t stamp[RTU_FRAMER_CAP];
    size_t head;       /* first byte not yet framed or discarded */
    size_t scan;       /* [head, scan) are known not to start a frame */
    size_t tail;       /* end of the buffered bytes */
    bool tail_closed;  /* silence seen after buf[tail - 1] */
    bool synced;       /* head follows a frame or a silence, not noise */
    bool have_last;
    uint64_t last_stamp;

    /* CRC-end search state for the position `crc_at` (baud 0, unknown fc). */
    size_t crc_at;
    size_t crc_done;
    uint16_t crc_reg;

    /* SNIFF: the unanswered request, if any. */
    bool expect_response;
    uint8_t exp_slave;
    uint8_t exp_function;

    uint64_t garbage_run; /* bytes discarded since the last frame or silence */

    rtu_frame_t queue[RTU_FRAMER_QUEUE];
    unsigned q_first;
    unsigned q_count;

    rtu_framer_stats_t stats;
};

static bool crc_good(const uint8_t *p, size_t len)
{
    return len >= RTU_MIN_ADU && rtu_crc16(p, len - 2) == rtu_get_le16(p + len - 2);
}

static rule_result_t apply_rule(int (*rule)(const uint8_t *, size_t), const uint8_t *p,
                                size_t have, uint16_t *len)
{
    int want = rule(p, have);
    if (want < 0)
        return R_UNKNOWN;
    if (want > RTU_MAX_ADU)
        return R_BAD;
    if (want == 0 || (size_t)want > have)
        return R_INCOMPLETE;
    *len = (uint16_t)want;
    return crc_good(p, (size_t)want) ? R_GOOD : R_BAD;
}

/* Is a frame of this slave and function the answer to the pending request? */
static bool answers_pending(const rtu_framer_t *fr, const uint8_t *p)
{
    return fr->expect_response && p[0] == fr->exp_slave && (p[1] & 0x7F) == fr->exp_function;
}

static uint8_t guess_is_request(const rtu_framer_t *fr, const uint8_t *p)
{
    switch (fr->cfg.dir) {
    case RTU_DIR_RESPONSE:
        return 0;
    case RTU_DIR_REQUEST:
        return 1;
    default:
        return !answers_pending(fr, p);
    }
}

/*
 * Shortest prefix of 4..have bytes (at most 256) whose CRC is good, or 0.
 * CRC-16/MODBUS run over a frame and its own CRC (low byte first) leaves 0.
 * The register is kept between calls while the same position waits, so a
 * byte-by-byte feed costs one CRC step per byte, not one pass per byte.
 */
static size_t crc_end_search(rtu_framer_t *fr, size_t at, size_t have)
{
    if (fr->crc_at != at || fr->crc_done > have) {
        fr->crc_at = at;
        fr->crc_done = 0;
        fr->crc_reg = 0xFFFF;
    }
    if (have > RTU_MAX_ADU)
        have = RTU_MAX_ADU;
    while (fr->crc_done < have) {
        fr->crc_reg = rtu_crc16_slice8_update(fr->crc_reg, fr->buf + at + fr->crc_done, 1);
        fr->crc_done++;
        if (fr->crc_done >= RTU_MIN_ADU && fr->crc_reg == 0)
            return fr->crc_done;
    }
    return 0;
}

/*
 * A position whose function has no length rule. Silence ends such a frame:
 * it is the whole closed segment when that has a good CRC. Only at a known
 * boundary (after a frame or a silence) may the shortest CRC-good prefix end
 * it: tried from every byte of a noise run, 256 candidate lengths each,
 * that would find a false frame in 1 of 256 positions.
 */
static judgement_t judge_unknown(rtu_framer_t *fr, size_t at, size_t have, bool closed,
                                 bool boundary)
{
    judgement_t j = { .v = V_NONE, .unknown = 1 };
    const uint8_t *p = fr->buf + at;
    size_t len = 0;

    if (closed && have <= RTU_MAX_ADU && crc_good(p, have)) {
        len = have;
        j.by_silence = 1;
    } else if (boundary && (closed || fr->cfg.baud == 0)) {
        len = crc_end_search(fr, at, have);
    }
    if (len) {
        j.v = V_FRAME;
        j.len = (uint16_t)len;
        j.is_request = guess_is_request(fr, p);
        return j;
    }
    if (closed)
        return j;
    if (fr->cfg.baud == 0)
        j.v = boundary && have < RTU_MAX_ADU ? V_WAIT : V_NONE;
    else
        j.v = have <= RTU_MAX_ADU ? V_WAIT : V_NONE; /* the silence may still come */
    return j;
}

/* SNIFF: both rules gave a CRC-good frame; the pending request decides. */
static judgement_t pick_sniff(const rtu_framer_t *fr, const uint8_t *p, uint16_t req_len,
                              uint16_t resp_len)
{
    judgement_t j = { .v = V_FRAME, .len = req_len, .is_request = 1 };
    if (answers_pending(fr, p)) {
        j.len = resp_len;
        j.is_request = 0;
    }
    return j;
}

/* Can a frame start at buf[at], given `have` bytes up to the segment's end? */
static judgement_t judge(rtu_framer_t *fr, size_t at, size_t have, bool closed, bool boundary)
{
    const uint8_t *p = fr->buf + at;
    judgement_t j = { .v = V_NONE };
    uint16_t req_len = 0, resp_len = 0;
    rule_result_t req = R_UNKNOWN, resp = R_UNKNOWN;

    if (have < 2) {
        if (!closed)
            j.v = V_WAIT;
        return j;
    }
    if ((p[1] & 0x7F) == 0)
        return j; /* function 0 does not exist, nor its exception */

    if (fr->cfg.dir != RTU_DIR_RESPONSE)
        req = apply_rule(rtu_request_length, p, have, &req_len);
    if (fr->cfg.dir != RTU_DIR_REQUEST)
        resp = apply_rule(rtu_response_length, p, have, &resp_len);

    if (req == R_GOOD && resp == R_GOOD)
        return pick_sniff(fr, p, req_len, resp_len);
    if (req == R_GOOD || resp == R_GOOD) {
        j.v = V_FRAME;
        j.is_request = req == R_GOOD;
        j.len = req == R_GOOD ? req_len : resp_len;
        return j;
    }
    if (req == R_INCOMPLETE || resp == R_INCOMPLETE) {
        /* A closed segment will get no more bytes: then it is no frame. */
        if (!closed)
            j.v = V_WAIT;
        return j;
    }
    if (req == R_UNKNOWN && resp == R_UNKNOWN)
        return judge_unknown(fr, at, have, closed, boundary);
    return j;
}

/* ---- bookkeeping ------------------------------------------------------ */

static void skip_to_frame(rtu_framer_t *fr, size_t at, const judgement_t *j);

static void count_discarded(rtu_framer_t *fr, size_t n)
{
    fr->stats.noise_bytes += n;
    fr->garbage_run += n;
    while (fr->garbage_run > RTU_MAX_ADU) {
        fr->stats.overflows++;
        fr->garbage_run -= RTU_MAX_ADU + 1;
    }
}

static void note_direction(rtu_framer_t *fr, const rtu_frame_t *f)
{
    if (fr->cfg.dir != RTU_DIR_SNIFF)
        return;
    if (f->is_request && f->crc_ok && f->adu[0] != 0) {
        fr->expect_response = true;
        fr->exp_slave = f->adu[0];
        fr->exp_function = f->adu[1] & 0x7F;
    } else if (!f->is_request) {
        fr->expect_response = false;
    } else if (f->crc_ok) {
        fr->expect_response = false; /* broadcast: nobody answers */
    }
}

static void emit(rtu_framer_t *fr, size_t len, int crc_ok, uint8_t is_request, int by_silence)
{
    rtu_frame_t *f = &fr->queue[(fr->q_first + fr->q_count) % RTU_FRAMER_QUEUE];
    memcpy(f->adu, fr->buf + fr->head, len);
    f->len = (uint16_t)len;
    f->crc_ok = (uint8_t)crc_ok;
    f->is_request = is_request;
    f->t_first_ns = fr->stamp[fr->head];
    f->t_last_ns = fr->stamp[fr->head + len - 1];
    f->noise_mark = fr->stats.noise_bytes;   /* the noise before it is counted already (skip_to_frame) */
    fr->q_count++;
    fr->head += len;
    fr->scan = fr->head;
    fr->stats.frames++;
    fr->stats.silence_splits += by_silence != 0;
    fr->garbage_run = 0;
    fr->synced = true;
    note_direction(fr, f);
}

/*
 * by_length: the length the rule predicts for a frame at buf[at] over every
 * byte buffered (stamped silences ignored); 0 while too few bytes are in
 * to predict it; -1 when no rule holds it (unknown function, function 0,
 * over-long, SNIFF).
 */
static int predicted_length(const rtu_framer_t *fr, size_t at)
{
    const uint8_t *p = fr->buf + at;
    size_t have = fr->tail - at;

    if (!fr->cfg.by_length || fr->cfg.dir == RTU_DIR_SNIFF)
        return -1;
    if (have >= 2 && (p[1] & 0x7F) == 0)
        return -1;
    int want = fr->cfg.dir == RTU_DIR_REQUEST ? rtu_request_length(p, have) : rtu_response_length(p, have);
    return want > RTU_MAX_ADU ? -1 : want;
}

/* by_length: the length of the CRC-good frame its rule predicts at buf[at], or 0. */
static size_t good_by_length(const rtu_framer_t *fr, size_t at)
{
    int want = predicted_length(fr, at);
    return want >= RTU_MIN_ADU && (size_t)want <= fr->tail - at && crc_good(fr->buf + at, (size_t)want)
               ? (size_t)want : 0;
}

/*
 * by_length: the head's segment when its predicted length, not a silence,
 * ends it. True (end and closed set) while the head is at a boundary and
 * its rule either waits for more bytes or finds a CRC-good frame past a
 * silence; false when the silences rule as without the option.
 */
static bool held_by_length(const rtu_framer_t *fr, size_t *end, bool *closed)
{
    if (!*closed || !fr->synced || fr->scan != fr->head)
        return false;
    int want = predicted_length(fr, fr->head);
    if (want < 0 || (want > 0 && (size_t)want <= *end - fr->head))
        return false;   /* no rule, or the frame ends before the silence: as before */
    if (want > 0 && (size_t)want <= fr->tail - fr->head) {
        if (!good_by_length(fr, fr->head))
            return false;   /* not one frame after all: the silences decide */
        *end = fr->head + (size_t)want;
    } else {
        *end = fr->tail;    /* the rest is still to come */
    }
    *closed = false;
    return true;
}

/* by_length, the head held: a frame proven right after a stamped silence wins. */
static bool race_after_silences(rtu_framer_t *fr)
{
    for (size_t i = fr->head + 1; i < fr->tail; i++) {
        size_t len = fr->gap_before[i] ? good_by_length(fr, i) : 0;
        if (len) {
            judgement_t j = { .v = V_FRAME, .len = (uint16_t)len,
                              .is_request = fr->cfg.dir == RTU_DIR_REQUEST };
            skip_to_frame(fr, i, &j);
            return true;
        }
    }
    return false;
}

/* End of the segment that starts at head: the next silence mark, or tail. */
static size_t segment_end(const rtu_framer_t *fr, bool *closed)
{
    for (size_t i = fr->head + 1; i < fr->tail; i++) {
        if (fr->gap_before[i]) {
            *closed = true;
            return i;
        }
    }
    *closed = fr->tail_closed;
    return fr->tail;
}

/* A closed segment with no frame left in [head, end): report or discard. */
static void flush_segment(rtu_framer_t *fr, size_t end)
{
    size_t n = end - fr->head;
    if (n >= RTU_MIN_ADU && n <= RTU_MAX_ADU) {
        const uint8_t *p = fr->buf + fr->head;
        emit(fr, n, crc_good(p, n), guess_is_request(fr, p), 1);
    } else {
        count_discarded(fr, n);
        fr->head = fr->scan = end;
    }
    fr->synced = true; /* the silence at end is a boundary */
}

/*
 * The first position in [from, end) where a CRC-good frame starts (end if
 * none), judged as not following a boundary. The search stops at a position
 * that waits for the rest of a predicted frame: it will be settled by its
 * own length, and looking inside it would give its bytes 2^-16 chances each
 * to fake a frame. A position that looks like an unknown function does not
 * stop it: only silence would settle that, and a noise byte must not hold
 * back the good frame behind it. The first waiting position goes to
 * *first_wait.
 */
static size_t find_frame(rtu_framer_t *fr, size_t from, size_t end, bool closed,
                         judgement_t *found, size_t *first_wait)
{
    *first_wait = end;
    for (size_t s = from; s < end; s++) {
        if (fr->dead[s])
            continue;
        *found = judge(fr, s, end - s, closed, false);
        if (found->v == V_FRAME)
            return s;
        if (found->v == V_NONE) {
            fr->dead[s] = 1; /* more bytes cannot change a complete verdict */
            continue;
        }
        if (*first_wait == end)
            *first_wait = s;
        if (!found->unknown)
            break;
    }
    return end;
}

/* Bytes before a frame found further on are noise; emit the frame. */
static void skip_to_frame(rtu_framer_t *fr, size_t at, const judgement_t *j)
{
    count_discarded(fr, at - fr->head);
    fr->head = at;
    emit(fr, j->len, 1, j->is_request, j->by_silence);
}

/* The head cannot start a frame: find the first position after it that does. */
static bool resync(rtu_framer_t *fr, size_t end, bool closed)
{
    judgement_t j;
    size_t first_wait, at = find_frame(fr, fr->scan, end, closed, &j, &first_wait);

    if (at < end) {
        skip_to_frame(fr, at, &j);
        return true;
    }
    if (closed) {
        flush_segment(fr, end); /* a closed segment has no V_WAIT */
        return true;
    }
    fr->scan = first_wait; /* [head, first_wait) cannot start a frame */
    /* Too far apart to report as one damaged frame: let them go. */
    if (end - fr->head > RTU_MAX_ADU) {
        count_discarded(fr, fr->scan - fr->head);
        fr->head = fr->scan;
    }
    return false;
}

/*
 * The head might still start a frame, but a later position proves one
 * first: then the head was noise. Raced only when the head is doubtful:
 * it follows noise (not a frame or silence), or it is an unknown function
 * with baud 0, which ends only at a good CRC -- and a noise byte can look
 * like one.
 */
static bool race_head(rtu_framer_t *fr, size_t end)
{
    judgement_t j;
    size_t first_wait, at = find_frame(fr, fr->head + 1, end, false, &j, &first_wait);

    if (at == end)
        return false;
    skip_to_frame(fr, at, &j);
    return true;
}

/*
 * One step on the segment at head. Returns false when nothing more can be
 * done until bytes, silence or room in the queue come.
 */
static bool step(rtu_framer_t *fr)
{
    bool closed;
    size_t end = segment_end(fr, &closed);
    bool held = held_by_length(fr, &end, &closed);

    if (fr->head == end)
        return false; /* nothing buffered */
    if (fr->scan == fr->head) {
        judgement_t j = judge(fr, fr->head, end - fr->head, closed, fr->synced);
        if (j.v == V_FRAME) {
            emit(fr, j.len, 1, j.is_request, j.by_silence);
            return true;
        }
        if (j.v == V_WAIT && held)
            return race_after_silences(fr);
        if (j.v == V_WAIT)
            return (!fr->synced || (j.unknown && fr->cfg.baud == 0)) && race_head(fr, end);
        fr->synced = false;
        fr->scan = fr->head + 1;
    }
    return resync(fr, end, closed);
}

static void process(rtu_framer_t *fr)
{
    while (fr->q_count < RTU_FRAMER_QUEUE && step(fr))
        ;
    if (fr->head == fr->tail) {
        fr->head = fr->scan = fr->tail = 0;
        fr->crc_at = SIZE_MAX;
    }
}

/* Move the unframed bytes to the front, to make room at the end. */
static void compact(rtu_framer_t *fr)
{
    size_t n = fr->tail - fr->head;
    if (fr->head == 0)
        return;
    memmove(fr->buf, fr->buf + fr->head, n);
    memmove(fr->gap_before, fr->gap_before + fr->head, n);
    memmove(fr->dead, fr->dead + fr->head, n);
    memmove(fr->stamp, fr->stamp + fr->head, n * sizeof fr->stamp[0]);
    fr->scan -= fr->head;
    fr->crc_at = SIZE_MAX;
    fr->head = 0;
    fr->tail = n;
}

/* Silence before a chunk of n bytes whose last byte arrived at t_ns. */
static bool silence_before(const rtu_framer_t *fr, size_t n, uint64_t t_ns)
{
    if (fr->cfg.baud == 0 || !fr->have_last)
        return false;
    uint64_t on_wire = (uint64_t)n * fr->char_ns;
    if (t_ns < fr->last_stamp || t_ns - fr->last_stamp < on_wire)
        return false;
    return t_ns - fr->last_stamp - on_wire >= fr->t35_ns;
}

/* ---- public ------------------------------------------------------------ */

rtu_framer_t *rtu_framer_new(const rtu_framer_config_t *cfg)
{
    if (!cfg || cfg->dir > RTU_DIR_SNIFF) {
        errno = EINVAL;
        return NULL;
    }
    rtu_framer_t *fr = calloc(1, sizeof *fr);
    if (!fr)
        return NULL;
    fr->cfg = *cfg;
    if (fr->cfg.char_bits == 0)
        fr->cfg.char_bits = 11;
    if (fr->cfg.baud && fr->cfg.silence_ns) {
        fr->t35_ns = fr->cfg.silence_ns;   /* a stream: its chunks' stamps are all there is */
    } else if (fr->cfg.baud) {
        fr->t35_ns = rtu_t35_ns(fr->cfg.baud, fr->cfg.char_bits);
        /* Rounded down: the correction never makes a gap look longer. */
        fr->char_ns = (uint64_t)fr->cfg.char_bits * 1000000000ull / fr->cfg.baud;
    }
    fr->crc_at = SIZE_MAX;
    fr->synced = true;
    return fr;
}

void rtu_framer_free(rtu_framer_t *fr)
{
    free(fr);
}

void rtu_framer_feed(rtu_framer_t *fr, const uint8_t *bytes, size_t n, uint64_t t_ns)
{
    if (n == 0)
        return;
    bool gap = fr->tail_closed || silence_before(fr, n, t_ns);
    if (gap)
        fr->garbage_run = 0;
    fr->tail_closed = false;
    fr->have_last = true;
    fr->last_stamp = t_ns;

    while (n > 0) {
        if (fr->tail == RTU_FRAMER_CAP)
            compact(fr);
        if (fr->tail == RTU_FRAMER_CAP) {
            /* The caller has not drained the queue: drop what does not fit. */
            fr->stats.overflows++;
            fr->stats.noise_bytes += n;
            return;
        }
        size_t take = RTU_FRAMER_CAP - fr->tail;
        if (take > n)
            take = n;
        memcpy(fr->buf + fr->tail, bytes, take);
        memset(fr->gap_before + fr->tail, 0, take);
        memset(fr->dead + fr->tail, 0, take);
        fr->gap_before[fr->tail] = gap;
        for (size_t i = 0; i < take; i++)
            fr->stamp[fr->tail + i] = t_ns;
        fr->tail += take;
        bytes += take;
        n -= take;
        gap = false;
        process(fr);
    }
}

void rtu_framer_idle(rtu_framer_t *fr, uint64_t now_ns)
{
    if (fr->cfg.baud == 0 || !fr->have_last || fr->tail_closed)
        return;
    if (now_ns >= fr->last_stamp && now_ns - fr->last_stamp >= fr->t35_ns) {
        fr->tail_closed = true;
        fr->garbage_run = 0;
        process(fr);
    }
}

bool rtu_framer_settled(const rtu_framer_t *fr)
{
    /* tail_closed: idle has nothing left to note; garbage_run 0: no
     * discarded run that a silence would end. */
    return fr->head == fr->tail && (fr->garbage_run == 0 || fr->tail_closed);
}

bool rtu_framer_held(const rtu_framer_t *fr)
{
    if (fr->head == fr->tail || !fr->synced || fr->scan != fr->head)
        return false;
    int want = predicted_length(fr, fr->head);
    return want == 0 || (want > 0 && (size_t)want > fr->tail - fr->head);
}

size_t rtu_framer_buffered(const rtu_framer_t *fr)
{
    return fr->tail - fr->head;
}

int rtu_framer_next(rtu_framer_t *fr, rtu_frame_t *out)
{
    if (fr->q_count == 0)
        process(fr);
    if (fr->q_count == 0)
        return 0;
    *out = fr->queue[fr->q_first];
    fr->q_first = (fr->q_first + 1) % RTU_FRAMER_QUEUE;
    fr->q_count--;
    return 1;
}

void rtu_framer_reset(rtu_framer_t *fr)
{
    fr->head = fr->scan = fr->tail = 0;
    fr->tail_closed = false;
    fr->synced = true;
    fr->have_last = false;
    fr->crc_at = SIZE_MAX;
    fr->expect_response = false;
    fr->garbage_run = 0;
    fr->q_first = fr->q_count = 0;
}

void rtu_framer_get_stats(const rtu_framer_t *fr, rtu_framer_stats_t *st)
{
    *st = fr->stats;
}
