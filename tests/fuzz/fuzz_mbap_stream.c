/*
 * tests/fuzz/fuzz_mbap_stream.c -- the Modbus TCP front end's stream
 * handling (front/tcp.c, conn_read) on arbitrary bytes, however they are
 * cut into reads, with the ring of pending requests filling and emptying.
 *
 * conn_read itself needs libevent and a socket; what it decides lives in
 * mbap_stream_next, and this harness runs the same loop around it: bytes
 * arrive in chunks into a receive buffer; while 7+ bytes are buffered, stop
 * reading (pause) if max_pending requests are outstanding, else split off
 * the next ADU from a copy of at most MBAP_MAX_ADU bytes; a bad header
 * closes the connection. An answer frees a slot and, when paused, resumes
 * and runs the loop again on what is buffered.
 *
 * Input:
 *   byte 0       max_pending = (b & 7) + 1; b >> 3 is the chunk size of the
 *                final delivery (0: all that is left at once);
 *   byte 1       K, the number of control bytes that follow;
 *   K bytes      one read each: c >> 6 answers first (0..3), then a chunk
 *                of (c & 63) + 1 bytes (1..63), c & 63 = 63 meaning 1024
 *                (many pipelined ADUs in one read); the chunk is skipped
 *                while paused, as a socket that is not read keeps its bytes;
 *   the rest     the stream the client sends.
 * After the control bytes: chunks of the final size and answers, until the
 * whole stream has arrived and nothing is paused (or it was closed).
 *
 * Invariants (abort() when broken), against a straightforward splitter of
 * the whole stream written here:
 *   - the ADUs emitted are exactly the reference's, byte for byte, in order,
 *     each once, at the stream offset the reference has, whatever the
 *     chunking and pausing; none is over MBAP_MAX_ADU; adu_len = 6 + length
 *     and the header fields are the bytes';
 *   - a bad header closes the connection exactly where the reference finds
 *     it (-EPROTO for protocol id != 0 first, else -EMSGSIZE), with the
 *     header filled; nothing is emitted after it;
 *   - bytes consumed + bytes buffered = bytes received, and the buffer holds
 *     exactly the stream's bytes after those consumed;
 *   - the loop never stalls: when it returns for want of bytes, the
 *     reference has no further complete ADU nor bad header in what arrived;
 *     it pauses only with max_pending outstanding, never more;
 *   - mbap_stream_next never reads past avail: it gets exact-size heap
 *     copies (ASan), both the capped copy conn_read makes and the whole rest
 *     of the stream, and the two answers agree (an answer depends only on
 *     the bytes it needs).
 */
#include "parser/rtu.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* The whole stream split the simple way: every ADU's offset and size, and
 * where a bad header (if any) starts. */
typedef struct ref {
    size_t *offset;
    size_t *len;
    size_t count;
    bool bad;
    int bad_rc;
    size_t bad_at;
    size_t end;          /* offset after the last whole ADU */
} ref_t;

typedef struct session {
    const uint8_t *input;
    size_t input_len;
    const uint8_t *stream;   /* exact-size heap copy of the stream */
    size_t stream_len;
    const ref_t *ref;
    unsigned max_pending;
    uint8_t *rx;             /* the receive buffer (the evbuffer) */
    size_t rx_len;
    size_t received, consumed;
    size_t emitted;
    size_t whole;            /* reference ADUs complete in what was received */
    unsigned outstanding;
    bool paused, closed;
} session_t;

static unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static bool ref_split(const uint8_t *s, size_t n, ref_t *ref)
{
    size_t cap = n / 8 + 1;      /* the smallest ADU is 8 bytes */
    size_t pos = 0;

    *ref = (ref_t){ .offset = malloc(cap * sizeof(size_t)),
                         .len = malloc(cap * sizeof(size_t)) };
    if (!ref->offset || !ref->len)
        return false;
    while (n - pos >= 7) {
        unsigned protocol = be16(s + pos + 2), length = be16(s + pos + 4);
        if (protocol != 0 || length < 2 || length > 254) {
            ref->bad = true;
            ref->bad_rc = protocol != 0 ? -EPROTO : -EMSGSIZE;
            ref->bad_at = pos;
            break;
        }
        if (n - pos < 6 + (size_t)length)
            break;
        ref->offset[ref->count] = pos;
        ref->len[ref->count++] = 6 + (size_t)length;
        pos += 6 + (size_t)length;
    }
    ref->end = pos;
    return true;
}

static uint8_t *exact_copy(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

static void check_header(const session_t *s, const uint8_t *at, const mbap_header_t *h)
{
    FUZZ_CHECK(h->transaction == be16(at) && h->protocol == be16(at + 2) &&
                   h->length == be16(at + 4) && h->unit == at[6],
               s->input, s->input_len, "header at stream offset %zu not filled from its bytes",
               s->consumed);
}

/* One ADU split off: it must be the reference's next one. */
static void emit(session_t *s, const uint8_t *adu, size_t adu_len, const mbap_header_t *h)
{
    const ref_t *ref = s->ref;

    FUZZ_CHECK(s->emitted < ref->count, s->input, s->input_len,
               "ADU %zu emitted at offset %zu; the reference has %zu", s->emitted, s->consumed,
               ref->count);
    FUZZ_CHECK(adu_len <= MBAP_MAX_ADU && adu_len >= MBAP_HEADER_LEN + 1, s->input, s->input_len,
               "ADU of %zu bytes", adu_len);
    FUZZ_CHECK(adu_len == 6u + h->length, s->input, s->input_len,
               "adu_len %zu for length %u", adu_len, h->length);
    FUZZ_CHECK(ref->offset[s->emitted] == s->consumed && ref->len[s->emitted] == adu_len,
               s->input, s->input_len, "ADU %zu at %zu (%zu bytes); the reference: at %zu (%zu)",
               s->emitted, s->consumed, adu_len, ref->offset[s->emitted], ref->len[s->emitted]);
    FUZZ_CHECK(memcmp(adu, s->stream + s->consumed, adu_len) == 0, s->input, s->input_len,
               "ADU %zu differs from the stream's bytes", s->emitted);
    check_header(s, adu, h);
    s->emitted++;
}

/* The same call on the whole rest of the stream (exact-size heap buffer):
 * a whole ADU or a bad header must be judged the same with more behind it. */
static void cross_check(const session_t *s, int rc, size_t avail, const mbap_header_t *h,
                        size_t adu_len)
{
    mbap_header_t h2;
    size_t len2 = 0;

    memset(&h2, 0xA5, sizeof h2);
    int rc2 = mbap_stream_next(s->stream + s->consumed, s->stream_len - s->consumed, &h2, &len2);
    if (rc != 0) {
        FUZZ_CHECK(rc2 == rc, s->input, s->input_len,
                   "with %zu bytes: %d; with the rest of the stream: %d", avail, rc, rc2);
        FUZZ_CHECK(h2.transaction == h->transaction && h2.protocol == h->protocol &&
                       h2.length == h->length && h2.unit == h->unit,
                   s->input, s->input_len, "header differs with more bytes behind it");
    }
    if (rc == 1)
        FUZZ_CHECK(len2 == adu_len, s->input, s->input_len, "adu_len %zu vs %zu", adu_len, len2);
    if (rc == 0 && rc2 == 1)
        FUZZ_CHECK(len2 > avail, s->input, s->input_len,
                   "need-more with %zu bytes, yet an ADU of %zu there", avail, len2);
}

/* After the loop stopped for want of bytes: nothing it could split is left. */
static void check_no_stall(session_t *s)
{
    const ref_t *ref = s->ref;

    while (s->whole < ref->count && ref->offset[s->whole] + ref->len[s->whole] <= s->received)
        s->whole++;
    FUZZ_CHECK(s->whole == s->emitted, s->input, s->input_len,
               "stalled: %zu of %zu complete ADUs emitted", s->emitted, s->whole);
    FUZZ_CHECK(!(ref->bad && ref->bad_at + MBAP_HEADER_LEN <= s->received), s->input,
               s->input_len, "stalled before the bad header at %zu", ref->bad_at);
}

static void check_accounting(const session_t *s)
{
    FUZZ_CHECK(s->consumed + s->rx_len == s->received, s->input, s->input_len,
               "%zu consumed + %zu buffered != %zu received", s->consumed, s->rx_len, s->received);
    FUZZ_CHECK(memcmp(s->rx, s->stream + s->consumed, s->rx_len) == 0, s->input, s->input_len,
               "the receive buffer is not the stream after byte %zu", s->consumed);
    FUZZ_CHECK(s->outstanding <= s->max_pending, s->input, s->input_len,
               "%u requests outstanding, max_pending %u", s->outstanding, s->max_pending);
}

/* One conn_read step on a copy of at most MBAP_MAX_ADU bytes. false: stop. */
static bool split_one(session_t *s)
{
    size_t avail = s->rx_len < MBAP_MAX_ADU ? s->rx_len : MBAP_MAX_ADU;
    uint8_t *copy = exact_copy(s->rx, avail);
    mbap_header_t h;
    size_t adu_len = 0;

    FUZZ_CHECK(copy != NULL, s->input, s->input_len, "out of memory");
    FUZZ_CHECK(!s->closed, s->input, s->input_len, "split after the connection closed");
    memset(&h, 0xA5, sizeof h);
    int rc = mbap_stream_next(copy, avail, &h, &adu_len);
    FUZZ_CHECK(rc == 1 || rc == 0 || rc == -EPROTO || rc == -EMSGSIZE, s->input, s->input_len,
               "mbap_stream_next gave %d", rc);
    cross_check(s, rc, avail, &h, adu_len);
    if (rc < 0) {
        FUZZ_CHECK(s->ref->bad && s->ref->bad_at == s->consumed && s->ref->bad_rc == rc &&
                       s->emitted == s->ref->count,
                   s->input, s->input_len, "refused (%d) at %zu after %zu ADUs", rc, s->consumed,
                   s->emitted);
        check_header(s, copy, &h);
        s->closed = true;
    } else if (rc == 1) {
        emit(s, copy, adu_len, &h);
        memmove(s->rx, s->rx + adu_len, s->rx_len - adu_len);
        s->rx_len -= adu_len;
        s->consumed += adu_len;
        s->outstanding++;
    }
    free(copy);
    return rc == 1;
}

/* front/tcp.c conn_read, with conn_request reduced to taking a slot. */
static void conn_read(session_t *s)
{
    while (s->rx_len >= MBAP_HEADER_LEN) {
        if (s->outstanding == s->max_pending) {
            s->paused = true;
            check_accounting(s);
            return;
        }
        if (!split_one(s))
            break;
        check_accounting(s);
    }
    if (!s->closed)
        check_no_stall(s);
}

static void deliver(session_t *s, size_t n)
{
    if (s->paused || s->closed)
        return;      /* reading is off: the bytes wait in the socket */
    if (n > s->stream_len - s->received)
        n = s->stream_len - s->received;
    if (n == 0)
        return;
    memcpy(s->rx + s->rx_len, s->stream + s->received, n);
    s->rx_len += n;
    s->received += n;
    conn_read(s);
}

/* tcp_on_answer: frees the head slot; a paused connection resumes. */
static void answer(session_t *s)
{
    if (s->closed || s->outstanding == 0)
        return;
    s->outstanding--;
    if (s->paused && s->outstanding < s->max_pending) {
        s->paused = false;
        conn_read(s);
    }
}

static void run_control(session_t *s, const uint8_t *ctrl, size_t n)
{
    for (size_t i = 0; i < n && !s->closed; i++) {
        for (unsigned a = ctrl[i] >> 6; a > 0; a--)
            answer(s);
        deliver(s, (ctrl[i] & 63) == 63 ? 1024 : (size_t)(ctrl[i] & 63) + 1);
    }
}

/* The rest of the stream, answering whenever the ring is full. */
static void run_to_end(session_t *s, size_t chunk)
{
    while (!s->closed) {
        if (!s->paused && s->received < s->stream_len)
            deliver(s, chunk);
        else if (s->outstanding > 0)
            answer(s);
        else
            break;
    }
}

static void check_end(const session_t *s)
{
    const ref_t *ref = s->ref;

    FUZZ_CHECK(s->emitted == ref->count, s->input, s->input_len,
               "%zu ADUs emitted, the reference has %zu", s->emitted, ref->count);
    FUZZ_CHECK(s->closed == ref->bad, s->input, s->input_len, "closed %d, bad header %d",
               s->closed, ref->bad);
    if (s->closed)
        FUZZ_CHECK(s->consumed == ref->bad_at, s->input, s->input_len,
                   "closed at %zu, bad header at %zu", s->consumed, ref->bad_at);
    else
        FUZZ_CHECK(s->received == s->stream_len && s->consumed == ref->end, s->input,
                   s->input_len, "ended at %zu of %zu received, the reference at %zu",
                   s->consumed, s->received, ref->end);
    check_accounting(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t k = data[1] < size - 2 ? data[1] : size - 2;
    const uint8_t *ctrl = data + 2;
    size_t stream_len = size - 2 - k;
    uint8_t *stream = exact_copy(data + 2 + k, stream_len);
    uint8_t *rx = malloc(stream_len ? stream_len : 1);
    ref_t ref;
    bool ok = ref_split(data + 2 + k, stream_len, &ref);

    if (stream && rx && ok) {
        session_t s = { .input = data, .input_len = size, .stream = stream,
                             .stream_len = stream_len, .ref = &ref,
                             .max_pending = (data[0] & 7u) + 1, .rx = rx };
        size_t chunk = data[0] >> 3;
        run_control(&s, ctrl, k);
        run_to_end(&s, chunk ? chunk : stream_len);
        check_end(&s);
    }
    free(ref.offset);
    free(ref.len);
    free(rx);
    free(stream);
    return 0;
}
