/*
 * drivers/ascii.c -- the Modbus ASCII layer (Modbus over serial line, 2.5.2)
 * over any byte driver: ':' + the slave, the PDU and the LRC in upper-case
 * hex + CR LF on the line, RTU frames above it.
 *
 * write() takes an RTU frame (slave, PDU, CRC), drops the CRC and writes
 * the ASCII frame with its LRC. read() returns one RTU frame per call,
 * rebuilt from one ASCII frame with a CRC computed here, so the framer and
 * the decoders above run exactly as on an RTU line (DRIVER_FRAMED: the end
 * of a chunk is the end of a frame). The CRC is good exactly when the frame
 * was: a bad LRC, a character that is not hex, an odd digit count, a frame
 * over 256 bytes, one cut by a new ':' or by the inter-character timeout is
 * passed up with a CRC that fails (frame_errors), never as a good frame and
 * never silently: the bus counts it as a bad frame, and one heard while an
 * answer waits for its vouching quiet makes that answer doubtful (line/receive.c,
 * I3), as damaged bytes on an RTU line do. Bytes outside any frame (before
 * a ':') are dropped (noise_bytes).
 *
 * The inter-character timeout (default 1 s, as the spec says) is judged
 * from arrival stamps when the next bytes come: a frame with a gap longer
 * than that inside it is abandoned. Nothing is timed meanwhile, because
 * nothing needs to be: an incomplete frame answers nothing, and the bus's
 * own response timeout ends the attempt.
 */
#include "drivers/internal.h"
#include "parser/rtu.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slave + PDU + LRC: 1 + 253 + 1 bytes, two hex digits each. */
#define ASCII_MAX_DIGITS (2 * (RTU_MAX_ADU - 2 + 1))
#define ASCII_RAW 512

typedef enum ascii_state { A_IDLE = 0, A_FRAME, A_CR } ascii_state_t;

typedef struct ascii {
    driver_layer_t layer;
    uint64_t char_timeout_ns;
    /* raw bytes read from inner, not yet parsed */
    uint8_t raw[ASCII_RAW];
    size_t raw_pos, raw_len;
    uint64_t raw_t_ns;
    /* the frame being parsed */
    ascii_state_t state;
    char text[ASCII_MAX_DIGITS + 1];/* its hex digits, decoded at its end (rtu_hex_parse) */
    size_t digits;
    bool damaged;                   /* a non-hex character, or too long */
    uint64_t last_char_ns;
} ascii_t;

uint8_t driver_ascii_lrc(const uint8_t *p, size_t n)
{
    uint8_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = (uint8_t)(sum + p[i]);
    return (uint8_t)-sum;
}

static void ascii_reset(ascii_t *a)
{
    a->state = A_IDLE;
    a->digits = 0;
    a->damaged = false;
}

static void ascii_close(driver_t *d)
{
    ascii_t *a = driver_priv(d);
    ascii_reset(a);
    a->raw_pos = a->raw_len = 0;
    driver_close(a->layer.inner);
}

static ssize_t ascii_write(driver_t *d, const uint8_t *adu, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    ascii_t *a = driver_priv(d);
    uint8_t out[1 + ASCII_MAX_DIGITS + 2];
    size_t n = 0;

    if (len < RTU_MIN_ADU || len > RTU_MAX_ADU)
        return -EMSGSIZE;
    size_t body = len - 2;   /* without the CRC */
    out[n++] = ':';
    for (size_t i = 0; i <= body; i++) {
        uint8_t b = i < body ? adu[i] : driver_ascii_lrc(adu, body);
        out[n++] = (uint8_t)hex[b >> 4];
        out[n++] = (uint8_t)hex[b & 15];
    }
    out[n++] = '\r';
    out[n++] = '\n';
    ssize_t w = driver_write(a->layer.inner, out, n);
    return w < 0 ? w : (ssize_t)len;
}

/*
 * The frame just ended (LF) or was cut: into buf as an RTU frame whose CRC
 * is good only when it arrived whole with a good LRC. Returns its length,
 * or 0 when too little of it came to be a frame (counted as noise).
 */
static size_t finish_frame(driver_t *d, ascii_t *a, bool whole, uint8_t *buf, size_t cap)
{
    uint8_t bin[ASCII_MAX_DIGITS / 2];
    bool even = a->digits % 2 == 0;
    a->text[a->digits & ~(size_t)1] = 0;   /* an odd last digit is dropped: the frame is damaged anyway */
    int parsed = rtu_hex_parse(a->text, bin, sizeof bin, NULL);
    size_t n = parsed > 0 ? (size_t)parsed : 0;   /* bytes, LRC included */
    bool good = whole && !a->damaged && even && n >= 3 && driver_ascii_lrc(bin, n - 1) == bin[n - 1];
    size_t body = n > 0 ? n - 1 : 0;   /* the LRC goes, the CRC comes */

    ascii_reset(a);
    if (body < 2 || body + 2 > cap) {
        DRIVER_COUNT(d, noise_bytes, n);
        if (n)
            DRIVER_COUNT(d, frame_errors, 1);
        return 0;
    }
    memcpy(buf, bin, body);
    uint16_t crc = rtu_crc16(buf, body);
    if (!good) {
        crc ^= 1;   /* any other value fails the check: never a good frame */
        DRIVER_COUNT(d, frame_errors, 1);
    }
    buf[body] = (uint8_t)crc;
    buf[body + 1] = (uint8_t)(crc >> 8);
    return body + 2;
}

/* One character of the line. Returns a frame's length when one ends here. */
static size_t take_char(driver_t *d, ascii_t *a, uint8_t c, uint64_t t_ns, uint8_t *buf, size_t cap)
{
    size_t out = 0;
    if (a->state != A_IDLE && t_ns - a->last_char_ns > a->char_timeout_ns)
        out = finish_frame(d, a, false, buf, cap);   /* abandoned: too long a gap inside it */
    if (c == ':') {
        if (a->state != A_IDLE)
            out = finish_frame(d, a, false, buf, cap);   /* cut by the next frame's start */
        a->state = A_FRAME;
        a->last_char_ns = t_ns;
        return out;
    }
    if (a->state == A_IDLE) {
        DRIVER_COUNT(d, noise_bytes, 1);
        return out;
    }
    a->last_char_ns = t_ns;
    if (a->state == A_CR) {
        if (c == '\n')
            return finish_frame(d, a, true, buf, cap);
        a->damaged = true;
        a->state = A_FRAME;
    }
    if (c == '\r') {
        a->state = A_CR;
        return out;
    }
    if (!isxdigit(c) || a->digits >= ASCII_MAX_DIGITS) {
        a->damaged = true;
        return out;
    }
    a->text[a->digits++] = (char)c;
    return out;
}

static ssize_t ascii_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    ascii_t *a = driver_priv(d);
    for (;;) {
        while (a->raw_pos < a->raw_len) {
            size_t n = take_char(d, a, a->raw[a->raw_pos++], a->raw_t_ns, buf, cap);
            if (n) {
                *t_ns = a->raw_t_ns;
                return (ssize_t)n;
            }
        }
        ssize_t got = driver_read(a->layer.inner, a->raw, sizeof a->raw, &a->raw_t_ns);
        if (got <= 0)
            return got;
        a->raw_pos = 0;
        a->raw_len = (size_t)got;
    }
}

static int ascii_describe(const driver_t *d, char *buf, size_t cap)
{
    return layer_describe(d, "ascii over ", buf, cap);
}

static const driver_backend_t ascii_backend = {
    .name = "ascii",
    .open = layer_open,
    .close = ascii_close,
    .fd = layer_fd,
    .write = ascii_write,
    .read = ascii_read,
    .describe = ascii_describe,
    .next_deadline = layer_next_deadline,
    .service = layer_service,
    .destroy = layer_destroy,
    .open_finish = layer_open_finish,
    .flags = DRIVER_FRAMED,
};

driver_t *driver_ascii_new(driver_t *inner, unsigned char_timeout_ms, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    ascii_t *a = calloc(1, sizeof *a);
    if (a)
        a->char_timeout_ns = (uint64_t)(char_timeout_ms ? char_timeout_ms : 1000) * 1000000ull;
    return layer_new(&ascii_backend, inner, a, err, errcap);
}
