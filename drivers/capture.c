/*
 * drivers/capture.c -- capture file readers: pcap, pcapng and a text hex log.
 *
 * Link types read (others are skipped and counted):
 *   147-162  USER0-15: the packet is raw Modbus RTU bytes (what open-source
 *            RTU sniffers write; direction unknown);
 *   250      RTAC serial: a 12-byte header, then raw RTU bytes;
 *   1, 113, 276, 101, 228, 229  Ethernet, Linux cooked (SLL, SLL2), raw IP:
 *            IPv4/IPv6 TCP with port 502 at either end. The payload is
 *            Modbus/TCP (each MBAP ADU becomes unit + PDU + CRC, direction
 *            from the port) or, when it is not valid MBAP but is a frame
 *            with a valid CRC, RTU-over-TCP (passed through as is).
 * Text: one frame a line, "[TIMESTAMP] [DIRECTION] HEX": TIMESTAMP is
 * seconds with a fraction (1700000000.25) or ISO 8601 UTC
 * (2024-05-01T12:00:00.125Z); DIRECTION one of > < tx rx req rsp request
 * response; HEX as `rtugw decode` takes it. '#' lines and blank lines skipped.
 *
 * The link layers (Ethernet, SLL, IP, TCP) are capture_link.c; writing a
 * capture, capture_write.c.
 *
 * Everything is bounded: a pcap/pcapng record over 256 KiB, a block length
 * that is not a multiple of 4 or overruns the file, a text line over 8 KiB
 * is an error naming the file, the record number and the offset (or line).
 */
#include "drivers/internal.h"
#include "parser/rtu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAP_MAX_BLOCK (CAP_MAX_RECORD + 1024u)
#define CAP_MAX_IFACES 64
#define CAP_MAX_LINE 8192

struct driver_capture {
    FILE *f;
    char *path;
    driver_capture_format_t format;
    bool swap;                 /* file byte order differs from ours */
    bool nsec;                 /* pcap: nanosecond timestamps */
    uint32_t linktype;         /* pcap */
    struct { uint16_t linktype; uint64_t units_per_s; } ifaces[CAP_MAX_IFACES];
    unsigned n_ifaces;
    uint64_t offset;           /* bytes consumed so far */
    unsigned long number;      /* records read */
    unsigned long skipped;
    unsigned long line;        /* text */
    /* the current packet and what is left of it */
    uint8_t *pkt;              /* grown on demand up to CAP_MAX_BLOCK */
    size_t pkt_cap;
    size_t pkt_len, pkt_off;
    uint32_t pkt_link;
    uint64_t pkt_ts;
    uint64_t pkt_offset;
    int pkt_dir;
    bool pkt_mbap;             /* payload is MBAP: emit one ADU at a time */
};

static uint16_t rd16(const driver_capture_t *c, const uint8_t *p)
{
    uint16_t v = (uint16_t)(p[0] | p[1] << 8);
    return c->swap ? (uint16_t)(v >> 8 | v << 8) : v;
}

static uint32_t rd32(const driver_capture_t *c, const uint8_t *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return c->swap ? __builtin_bswap32(v) : v;
}

const char *driver_capture_format_name(driver_capture_format_t format)
{
    switch (format) {
    case DRIVER_CAPTURE_AUTO: return "auto";
    case DRIVER_CAPTURE_PCAP: return "pcap";
    case DRIVER_CAPTURE_PCAPNG: return "pcapng";
    case DRIVER_CAPTURE_TEXT: return "text";
    }
    return "?";
}

int driver_capture_parse_format(const char *name, driver_capture_format_t *format)
{
    for (int f = DRIVER_CAPTURE_AUTO; f <= DRIVER_CAPTURE_TEXT; f++)
        if (strcmp(name, driver_capture_format_name((driver_capture_format_t)f)) == 0) {
            *format = (driver_capture_format_t)f;
            return 0;
        }
    return -EINVAL;
}

driver_capture_format_t driver_capture_format(const driver_capture_t *cap)
{
    return cap->format;
}

unsigned long driver_capture_skipped(const driver_capture_t *cap)
{
    return cap->skipped;
}

void driver_capture_close(driver_capture_t *cap)
{
    if (!cap)
        return;
    if (cap->f)
        fclose(cap->f);
    free(cap->path);
    free(cap->pkt);
    free(cap);
}

/* Reads exactly n bytes. 1 ok, 0 clean end (nothing read), -1 short. */
static int read_exact(driver_capture_t *c, void *buf, size_t n)
{
    size_t got = fread(buf, 1, n, c->f);
    c->offset += got;
    if (got == n)
        return 1;
    return got == 0 ? 0 : -1;
}

/* The packet buffer grows to the largest record actually read: a capture of
 * Modbus frames needs a few hundred bytes, not the 257 KiB a hostile header
 * may announce (which it gets only once that much data is really there). */
static int pkt_reserve(driver_capture_t *c, size_t n, char *err, size_t errcap)
{
    if (c->pkt && n <= c->pkt_cap)
        return 0;
    size_t cap = c->pkt_cap ? c->pkt_cap : 512;
    while (cap < n)
        cap *= 2;
    if (cap > CAP_MAX_BLOCK)
        cap = CAP_MAX_BLOCK;
    uint8_t *p = realloc(c->pkt, cap);
    if (!p) {
        snprintf(err, errcap, "%s: out of memory for a %zu-byte record", c->path, n);
        return -EIO;
    }
    c->pkt = p;
    c->pkt_cap = cap;
    return 0;
}

/* ---- opening and detection ------------------------------------------------------- */

static int pcap_header(driver_capture_t *c, char *err, size_t errcap)
{
    uint8_t h[24];
    if (read_exact(c, h, sizeof h) != 1) {
        snprintf(err, errcap, "%s: truncated pcap file header (%llu of 24 bytes)", c->path,
                 (unsigned long long)c->offset);
        return -EBADMSG;
    }
    uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    c->swap = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
    c->nsec = magic == 0xa1b23c4du || magic == 0x4d3cb2a1u;
    c->linktype = rd32(c, h + 20) & 0x0FFFFFFFu;
    return 0;
}

driver_capture_t *driver_capture_open(const char *path, driver_capture_format_t format,
                                      char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    driver_capture_t *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        snprintf(err, errcap, "%s: out of memory", path);
        driver_capture_close(c);
        return NULL;
    }
    c->f = fopen(path, "rb");
    if (!c->f) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        driver_capture_close(c);
        return NULL;
    }
    uint8_t head[512];
    size_t n = fread(head, 1, sizeof head, c->f);
    rewind(c->f);
    if (format == DRIVER_CAPTURE_AUTO) {
        uint32_t m = n >= 4 ? ((uint32_t)head[0] | (uint32_t)head[1] << 8 |
                               (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24) : 0;
        if (m == 0xa1b2c3d4u || m == 0xd4c3b2a1u || m == 0xa1b23c4du || m == 0x4d3cb2a1u)
            format = DRIVER_CAPTURE_PCAP;
        else if (m == 0x0a0d0d0au)
            format = DRIVER_CAPTURE_PCAPNG;
        else {
            bool text = n > 0;
            for (size_t i = 0; i < n && text; i++)
                text = head[i] == '\n' || head[i] == '\r' || head[i] == '\t' ||
                       (head[i] >= 0x20 && head[i] < 0x7f);
            if (!text) {
                snprintf(err, errcap, "%s: not a capture (no pcap or pcapng magic, not a text log)",
                         path);
                driver_capture_close(c);
                return NULL;
            }
            format = DRIVER_CAPTURE_TEXT;
        }
    }
    c->format = format;
    if (format == DRIVER_CAPTURE_PCAP) {
        uint32_t m = n >= 4 ? ((uint32_t)head[0] | (uint32_t)head[1] << 8 |
                               (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24) : 0;
        if (!(m == 0xa1b2c3d4u || m == 0xd4c3b2a1u || m == 0xa1b23c4du || m == 0x4d3cb2a1u)) {
            snprintf(err, errcap, "%s: not a pcap file (magic %08x)", path, m);
            driver_capture_close(c);
            return NULL;
        }
        if (pcap_header(c, err, errcap) != 0) {
            driver_capture_close(c);
            return NULL;
        }
    } else if (format == DRIVER_CAPTURE_PCAPNG) {
        if (n < 12 || memcmp(head, "\x0a\x0d\x0d\x0a", 4) != 0) {
            snprintf(err, errcap, "%s: not a pcapng file (no section header block)", path);
            driver_capture_close(c);
            return NULL;
        }
    }
    return c;
}

/* ---- packets to Modbus RTU bytes ---------------------------------------------------- */

static bool crc_ok(const uint8_t *p, size_t n)
{
    return n >= RTU_MIN_ADU && n <= RTU_MAX_ADU &&
           rtu_crc16(p, n - 2) == (uint16_t)(p[n - 2] | p[n - 1] << 8);
}

/* Sets up pkt_off/pkt_len for one packet's Modbus bytes; 0 when not Modbus. */
static int select_payload(driver_capture_t *c, uint32_t lt, size_t caplen)
{
    c->pkt_link = lt;
    c->pkt_dir = -1;
    c->pkt_mbap = false;
    if (capture_link_is_raw_rtu(lt)) {
        size_t skip = lt == 250 ? 12 : 0;
        if (caplen <= skip)
            return 0;
        c->pkt_off = skip;
        c->pkt_len = caplen;
        return 1;
    }
    if (capture_link_is_ip(lt)) {
        size_t off, len;
        int dir;
        if (!capture_tcp_payload(lt, c->pkt, caplen, &off, &len, &dir))
            return 0;
        c->pkt_off = off;
        c->pkt_len = off + len;
        c->pkt_dir = dir;
        mbap_header_t h;
        const uint8_t *pl = c->pkt + off;
        c->pkt_mbap = mbap_decode_header(pl, len, &h) == 0 && len >= (size_t)6 + h.length;
        if (!c->pkt_mbap && !crc_ok(pl, len))
            c->pkt_mbap = true; /* not RTU either: let the MBAP path report it */
        return 1;
    }
    return 0;
}

/* Emits the next piece of the current packet into rec. 1, 0 when none left,
 * -EBADMSG for an MBAP payload that does not parse. */
static int emit(driver_capture_t *c, driver_record_t *rec, char *err, size_t errcap)
{
    if (c->pkt_off >= c->pkt_len)
        return 0;
    rec->ts_ns = c->pkt_ts;
    rec->number = c->number;
    rec->offset = c->pkt_offset;
    rec->direction = c->pkt_dir;
    const uint8_t *p = c->pkt + c->pkt_off;
    size_t left = c->pkt_len - c->pkt_off;
    if (c->pkt_mbap) {
        mbap_header_t h;
        int rc = mbap_decode_header(p, left, &h);
        if (rc != 0 || left < (size_t)6 + h.length) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: Modbus/TCP payload %s",
                     c->path, c->number, (unsigned long long)c->pkt_offset,
                     rc == -EPROTO ? "has a protocol id other than 0"
                     : rc == -EMSGSIZE ? "has an MBAP length outside 2..254"
                                       : "is truncated");
            c->pkt_off = c->pkt_len;
            return -EBADMSG;
        }
        size_t pdu_len = (size_t)h.length - 1;
        int n = rtu_adu_from_pdu(h.unit, p + MBAP_HEADER_LEN, pdu_len, rec->data, sizeof rec->data);
        c->pkt_off += MBAP_HEADER_LEN + pdu_len;
        if (n < 0) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: MBAP ADU does not fit", c->path,
                     c->number, (unsigned long long)c->pkt_offset);
            return -EBADMSG;
        }
        rec->len = (size_t)n;
        return 1;
    }
    size_t take = left < sizeof rec->data ? left : sizeof rec->data;
    memcpy(rec->data, p, take);
    rec->len = take;
    c->pkt_off += take;
    return 1;
}

/* ---- pcap ------------------------------------------------------------------------------ */

static int pcap_next(driver_capture_t *c, char *err, size_t errcap)
{
    for (;;) {
        uint8_t h[16];
        uint64_t at = c->offset;
        int rc = read_exact(c, h, sizeof h);
        if (rc == 0)
            return 0;
        c->number++;
        if (rc < 0) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: truncated record header",
                     c->path, c->number, (unsigned long long)at);
            return -EBADMSG;
        }
        uint32_t sec = rd32(c, h), frac = rd32(c, h + 4), incl = rd32(c, h + 8);
        if (incl > CAP_MAX_RECORD) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: length %u exceeds the %u-byte limit",
                     c->path, c->number, (unsigned long long)at, incl, CAP_MAX_RECORD);
            return -EBADMSG;
        }
        if (pkt_reserve(c, incl, err, errcap) != 0)
            return -EIO;
        rc = read_exact(c, c->pkt, incl);
        if (rc != 1 && incl) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: truncated (%u bytes announced)",
                     c->path, c->number, (unsigned long long)at, incl);
            return -EBADMSG;
        }
        c->pkt_ts = (uint64_t)sec * 1000000000ull + (uint64_t)frac * (c->nsec ? 1u : 1000u);
        c->pkt_offset = at;
        if (select_payload(c, c->linktype, incl))
            return 1;
        c->skipped++;
    }
}

/* ---- pcapng ---------------------------------------------------------------------------- */

static uint64_t tsresol_units(uint8_t v)
{
    uint64_t u = 1;
    if (v & 0x80) {
        unsigned e = v & 0x7f;
        return e >= 63 ? 0 : (1ull << e);
    }
    for (unsigned i = 0; i < v && i < 19; i++)
        u *= 10;
    return v > 19 ? 0 : u;
}

/* TS in UNITS per second, as ns: whole seconds, then the remainder (< UNITS).
 * Exact where the remainder times 1e9 fits 64 bits (UNITS up to 1.8e10, every
 * resolution seen in practice); no __int128, which 32-bit targets lack. */
static uint64_t ticks_to_ns(uint64_t ts, uint64_t units)
{
    uint64_t sec = ts / units, rest = ts % units;
    uint64_t frac = rest <= UINT64_MAX / 1000000000ull ? rest * 1000000000ull / units
                                                      : (uint64_t)((double)rest / (double)units * 1e9);
    return sec * 1000000000ull + frac;
}

static int pcapng_next(driver_capture_t *c, char *err, size_t errcap)
{
    for (;;) {
        uint8_t h[8];
        uint64_t at = c->offset;
        int rc = read_exact(c, h, sizeof h);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            snprintf(err, errcap, "%s: block at offset %llu: truncated block header", c->path,
                     (unsigned long long)at);
            return -EBADMSG;
        }
        uint32_t type_raw = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        if (type_raw == 0x0a0d0d0au) {
            /* Section header: byte order comes from its magic. */
            uint8_t bom[4];
            if (read_exact(c, bom, 4) != 1) {
                snprintf(err, errcap, "%s: block at offset %llu: truncated section header",
                         c->path, (unsigned long long)at);
                return -EBADMSG;
            }
            uint32_t m = (uint32_t)bom[0] | (uint32_t)bom[1] << 8 | (uint32_t)bom[2] << 16 | (uint32_t)bom[3] << 24;
            if (m == 0x1a2b3c4du)
                c->swap = false;
            else if (m == 0x4d3c2b1au)
                c->swap = true;
            else {
                snprintf(err, errcap, "%s: block at offset %llu: bad byte-order magic %08x",
                         c->path, (unsigned long long)at, m);
                return -EBADMSG;
            }
            c->n_ifaces = 0;
            uint32_t total = rd32(c, h + 4);
            if (total < 28 || total % 4 || total > CAP_MAX_BLOCK) {
                snprintf(err, errcap, "%s: block at offset %llu: section header length %u invalid",
                         c->path, (unsigned long long)at, total);
                return -EBADMSG;
            }
            if (pkt_reserve(c, total - 12, err, errcap) != 0)
                return -EIO;
            if (read_exact(c, c->pkt, total - 12) != 1) {
                snprintf(err, errcap, "%s: block at offset %llu: truncated section header",
                         c->path, (unsigned long long)at);
                return -EBADMSG;
            }
            continue;
        }
        uint32_t type = rd32(c, h), total = rd32(c, h + 4);
        bool is_packet = type == 6 || type == 3 || type == 2;
        if (is_packet)
            c->number++;
        if (total < 12 || total % 4 || total > CAP_MAX_BLOCK) {
            snprintf(err, errcap, "%s: %s%lu at offset %llu: block length %u invalid (multiple of 4, 12..%u)",
                     c->path, is_packet ? "record " : "block after record ", c->number,
                     (unsigned long long)at, total, CAP_MAX_BLOCK);
            return -EBADMSG;
        }
        size_t body = total - 8; /* includes the trailing length */
        if (pkt_reserve(c, body, err, errcap) != 0)
            return -EIO;
        if (read_exact(c, c->pkt, body) != 1) {
            snprintf(err, errcap, "%s: %s%lu at offset %llu: truncated (block of %u bytes)",
                     c->path, is_packet ? "record " : "block after record ", c->number,
                     (unsigned long long)at, total);
            return -EBADMSG;
        }
        size_t blen = body - 4;
        const uint8_t *b = c->pkt;
        if (type == 1) { /* interface description */
            if (blen < 8)
                goto bad_block;
            if (c->n_ifaces == CAP_MAX_IFACES) {
                snprintf(err, errcap, "%s: block at offset %llu: more than %d interfaces",
                         c->path, (unsigned long long)at, CAP_MAX_IFACES);
                return -EBADMSG;
            }
            uint64_t units = 1000000;
            for (size_t o = 8; o + 4 <= blen;) {
                uint16_t code = rd16(c, b + o), olen = rd16(c, b + o + 2);
                if (code == 0 || o + 4 + olen > blen)
                    break;
                if (code == 9 && olen >= 1)
                    units = tsresol_units(b[o + 4]);
                o += 4 + (((size_t)olen + 3) & ~(size_t)3);
            }
            if (units == 0) {
                snprintf(err, errcap, "%s: block at offset %llu: unsupported timestamp resolution",
                         c->path, (unsigned long long)at);
                return -EBADMSG;
            }
            c->ifaces[c->n_ifaces].linktype = rd16(c, b);
            c->ifaces[c->n_ifaces].units_per_s = units;
            c->n_ifaces++;
            continue;
        }
        if (!is_packet)
            continue;
        uint32_t iface = 0, caplen;
        size_t data_off;
        uint64_t ts = 0;
        if (type == 6 || type == 2) {
            if (blen < 20)
                goto bad_block;
            iface = type == 6 ? rd32(c, b) : rd16(c, b);
            ts = (uint64_t)rd32(c, b + 4) << 32 | rd32(c, b + 8);
            caplen = rd32(c, b + 12);
            data_off = 20;
        } else {
            if (blen < 4)
                goto bad_block;
            caplen = blen - 4;
            uint32_t orig = rd32(c, b);
            if (orig < caplen)
                caplen = orig;
            data_off = 4;
        }
        if (caplen > blen - data_off) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: captured length %u exceeds its block",
                     c->path, c->number, (unsigned long long)at, caplen);
            return -EBADMSG;
        }
        if (iface >= c->n_ifaces) {
            snprintf(err, errcap, "%s: record %lu at offset %llu: interface %u not described",
                     c->path, c->number, (unsigned long long)at, iface);
            return -EBADMSG;
        }
        uint64_t units = c->ifaces[iface].units_per_s;
        c->pkt_ts = units == 1000000000ull ? ts : ticks_to_ns(ts, units);
        c->pkt_offset = at;
        memmove(c->pkt, c->pkt + data_off, caplen);
        if (select_payload(c, c->ifaces[iface].linktype, caplen))
            return 1;
        c->skipped++;
        continue;
bad_block:
        snprintf(err, errcap, "%s: block at offset %llu: block type %u too short", c->path,
                 (unsigned long long)at, type);
        return -EBADMSG;
    }
}

/* ---- text -------------------------------------------------------------------------------- */

static bool parse_seconds(const char *tok, uint64_t *ns)
{
    /* 1700000000.25 (a '.' is required, so hex like "01" is never a time) */
    const char *dot = strchr(tok, '.');
    if (!dot || dot == tok || strchr(dot + 1, '.'))
        return false;
    uint64_t sec = 0, frac = 0, scale = 1000000000ull;
    for (const char *p = tok; p < dot; p++) {
        if (*p < '0' || *p > '9' || sec > 10000000000ull)
            return false;
        sec = sec * 10 + (uint64_t)(*p - '0');
    }
    for (const char *p = dot + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (scale > 1) {
            scale /= 10;
            frac += (uint64_t)(*p - '0') * scale;
        }
    }
    *ns = sec * 1000000000ull + frac;
    return true;
}

static bool parse_iso(const char *tok, uint64_t *ns)
{
    /* 2024-05-01T12:00:00[.fff][Z] */
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(tok, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return false;
    uint64_t frac = 0, scale = 1000000000ull;
    if (*rest == '.') {
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*rest - '0') * scale;
            }
    }
    if (*rest == 'Z')
        rest++;
    if (*rest)
        return false;
    time_t t = timegm(&tm);
    if (t < 0)
        return false;
    *ns = (uint64_t)t * 1000000000ull + frac;
    return true;
}

static int parse_direction(const char *tok)
{
    static const char *req[] = { ">", "tx", "req", "request", "->", NULL };
    static const char *rsp[] = { "<", "rx", "rsp", "resp", "response", "<-", NULL };
    for (int i = 0; req[i]; i++)
        if (strcasecmp(tok, req[i]) == 0)
            return 1;
    for (int i = 0; rsp[i]; i++)
        if (strcasecmp(tok, rsp[i]) == 0)
            return 0;
    return -2;
}

static int text_next(driver_capture_t *c, driver_record_t *rec, char *err, size_t errcap)
{
    char line[CAP_MAX_LINE];
    while (fgets(line, sizeof line, c->f)) {
        c->line++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errcap, "%s: line %lu: longer than %d characters", c->path, c->line,
                     CAP_MAX_LINE - 2);
            int ch;
            while ((ch = fgetc(c->f)) != EOF && ch != '\n')
                ;
            return -EBADMSG;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                       line[len - 1] == '\t'))
            line[--len] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        c->number++;
        rec->ts_ns = 0;
        rec->direction = -1;
        rec->number = c->number;
        rec->offset = c->line;
        /* optional timestamp, then optional direction */
        for (int field = 0; field < 2; field++) {
            char *end = p;
            while (*end && *end != ' ' && *end != '\t')
                end++;
            if (!*end)
                break; /* the last token is the hex itself */
            char save = *end;
            *end = 0;
            uint64_t ns;
            int dir;
            bool used = false;
            if (field == 0 && (parse_seconds(p, &ns) || parse_iso(p, &ns))) {
                rec->ts_ns = ns;
                used = true;
            } else if ((dir = parse_direction(p)) >= 0) {
                rec->direction = dir;
                used = true;
                field = 1;
            }
            *end = save;
            if (!used)
                break;
            p = end;
            while (*p == ' ' || *p == '\t')
                p++;
        }
        size_t col = 0;
        int n = rtu_hex_parse(p, rec->data, sizeof rec->data, &col);
        if (n < 0) {
            if (n == -ENOSPC)
                snprintf(err, errcap, "%s: line %lu: more than %zu bytes", c->path, c->line,
                         sizeof rec->data);
            else if (col)
                snprintf(err, errcap, "%s: line %lu, column %zu: not hex: '%c'", c->path, c->line,
                         (size_t)(p - line) + col, p[col - 1]);
            else
                snprintf(err, errcap, "%s: line %lu: odd number of hex digits", c->path, c->line);
            return -EBADMSG;
        }
        rec->len = (size_t)n;
        return 1;
    }
    if (ferror(c->f)) {
        snprintf(err, errcap, "%s: line %lu: %s", c->path, c->line, strerror(errno));
        return -EIO;
    }
    return 0;
}

int driver_capture_next(driver_capture_t *c, driver_record_t *rec, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    if (c->format == DRIVER_CAPTURE_TEXT)
        return text_next(c, rec, err, errcap);
    for (;;) {
        int rc = emit(c, rec, err, errcap);
        if (rc != 0)
            return rc;
        rc = c->format == DRIVER_CAPTURE_PCAP ? pcap_next(c, err, errcap)
                                              : pcapng_next(c, err, errcap);
        if (rc <= 0)
            return rc;
    }
}
