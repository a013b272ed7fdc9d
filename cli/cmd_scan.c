/*
 * cli/cmd_scan.c -- `rtugw scan`: finds what answers on a serial line, at
 * which speed and character format, and says what each slave is.
 *
 * For each speed, for each format, every slave id of the range gets one
 * probe (FC 3, one register at address 0); any answer whose CRC is good
 * (data or exception) proves a slave there. A speed stops trying other
 * formats once one format gave good frames: a line has one format, and a
 * good CRC at the wrong parity is no more likely than noise passing it.
 * Each slave found is then identified at its own settings: FC 43/14 (read
 * device identification, basic objects), FC 17 (report server id), and
 * which of FC 1-4 answer data at address 0.
 *
 * Answers are framed as the line core frames them (parser/framer.c, by
 * length, resynchronising after noise): a stray byte before an answer (a
 * transceiver's turn-on glitch) is skipped, not taken for a garbled answer.
 * Bytes that form no good answer of the slave asked are counted per id and
 * reported: two slaves at one id, or the wrong speed or parity, show so.
 *
 * Time. Each request has two deadlines: the first byte of its answer must
 * come within the request's wire time, the slave's turnaround allowance
 * (--turnaround, default 20 ms), a t3.5 and two characters; the whole
 * answer within that plus its longest length (and 8 characters of noise)
 * and a t3.5. A silent slave costs the first deadline only. Before each
 * request the line is left quiet for a t3.5 (at least 1 ms), and 2 ms are
 * allowed for the write and poll's millisecond rounding. The sum of these
 * per-request costs is the bound the command prints before it starts:
 *     sum over speeds of  formats * ids * probe cost(speed, format)
 *   + per slave found: 3 * FC 43 + FC 17 + FC 1..4, each at its cost
 * (at 9600 8E1 a probe costs 63 ms, an identification 1.63 s). --budget S
 * is a hard deadline: a request whose cost would end past it is not sent;
 * what was not finished is named.
 */
#include "cli/cli.h"
#include "cli/scan.h"
#include "drivers/driver.h"
#include "parser/rtu.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw scan --port PATH [--ids FIRST-LAST] [--baud LIST] [--format LIST]\n"
            "                  [--turnaround MS] [--budget S] [--no-identify] [--json] [--snippet]\n"
            "\n"
            "Finds the slaves on a serial line: tries every slave id of the range at each\n"
            "speed and character format (FC 3, one register at address 0; a data or an\n"
            "exception answer with a good CRC is a slave), then identifies each one found\n"
            "(FC 43/14 device identification, FC 17 report server id, which of FC 1-4 answer\n"
            "at address 0). A speed tries no other format once one gave good frames. Noise\n"
            "before an answer is skipped; answers that form no good frame are reported per\n"
            "id (two slaves at one id, or a wrong baud or parity).\n"
            "\n"
            "  --port PATH        the serial port (no gateway may hold it)\n"
            "  --ids A-B          slave ids tried (default 1-247; one id: A)\n"
            "  --baud LIST        speeds, in order (default 19200,9600,38400,115200,57600,4800,\n"
            "                     2400,1200)\n"
            "  --format LIST      character formats, in order (default 8E1,8N1,8O1,8N2)\n"
            "  --turnaround MS    a slave's allowance to answer, on top of the wire time\n"
            "                     (default 20): the first byte of an answer is due after the\n"
            "                     request's wire time, this and a t3.5; the whole answer its\n"
            "                     longest wire time and a t3.5 later\n"
            "  --budget S         a hard deadline: no request is sent that could end after S\n"
            "                     seconds (default: none; the bound printed first sums each\n"
            "                     probe's cost, plus what identifying a slave found can cost)\n"
            "  --no-identify      only find the slaves\n"
            "  --json             one JSON object on standard output\n"
            "  --snippet          a [bus] and [device] configuration snippet for what was found\n"
            "\n"
            "Progress goes to standard error. Exit: 0 when a slave answered, 1 when none did\n"
            "(or the port cannot be opened), 2 on a usage error.\n"
            "Example: rtugw scan --port /dev/ttyUSB0 --ids 1-32 --baud 9600,19200 --snippet\n");
}

/* ---- options ----------------------------------------------------------------------------- */

static int parse_ids(const char *text, scan_options_t *o)
{
    char *end;
    unsigned long a = strtoul(text, &end, 10), b = a;
    if (end != text && *end == '-')
        b = strtoul(end + 1, &end, 10);
    if (end == text || *end || text[0] == '-' || a < 1 || b > 247 || a > b) {
        fprintf(stderr, "rtugw scan: --ids '%s': expected FIRST-LAST within 1-247\n", text);
        return -1;
    }
    o->first_id = (unsigned)a;
    o->last_id = (unsigned)b;
    return 0;
}

/* The speeds a serial port takes (drivers/serial.c's termios table). */
static bool baud_known(unsigned long b)
{
    static const unsigned long known[] = { 1200, 2400, 4800, 9600, 19200, 38400, 57600,
                                           115200, 230400, 460800, 921600 };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i] == b)
            return true;
    return false;
}

static int parse_bauds(const char *text, scan_options_t *o)
{
    o->n_bauds = 0;
    const char *p = text;
    for (;;) {
        char *end;
        unsigned long b = strtoul(p, &end, 10);
        if (end == p || (*end && *end != ',') || !baud_known(b) || o->n_bauds == SCAN_MAX_BAUDS) {
            fprintf(stderr, "rtugw scan: --baud '%s': expected a list of 1200, 2400, 4800, 9600, "
                            "19200, 38400, 57600, 115200, 230400, 460800, 921600 (at most %d)\n",
                    text, SCAN_MAX_BAUDS);
            return -1;
        }
        o->bauds[o->n_bauds++] = (unsigned)b;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static int format_from(const char *text, size_t len, scan_format_t *f)
{
    char one[8];
    if (len != 3)
        return -1;
    memcpy(one, text, 3);
    one[3] = '\0';
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    if (driver_serial_parse_format(one, &sc) != 0)
        return -1;
    f->data_bits = sc.data_bits;
    f->parity = sc.parity;
    f->stop_bits = sc.stop_bits;
    snprintf(f->text, sizeof f->text, "%u%c%u", sc.data_bits, sc.parity, sc.stop_bits);
    return 0;
}

static int parse_formats(const char *text, scan_options_t *o)
{
    o->n_formats = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        if (o->n_formats == SCAN_MAX_FORMATS || format_from(p, len, &o->formats[o->n_formats]) != 0) {
            fprintf(stderr, "rtugw scan: --format '%s': expected a list such as 8E1,8N1,8O1,8N2 "
                            "(at most %d)\n", text, SCAN_MAX_FORMATS);
            return -1;
        }
        o->n_formats++;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

static int parse_options(int argc, char **argv, scan_options_t *o)
{
    enum { O_PORT = 256, O_IDS, O_BAUD, O_FORMAT, O_TURN, O_BUDGET, O_NOID, O_JSON, O_SNIPPET, O_HELP };
    static const struct option longopts[] = {
        { "port", 1, 0, O_PORT }, { "ids", 1, 0, O_IDS }, { "baud", 1, 0, O_BAUD },
        { "format", 1, 0, O_FORMAT }, { "turnaround", 1, 0, O_TURN }, { "budget", 1, 0, O_BUDGET },
        { "no-identify", 0, 0, O_NOID }, { "json", 0, 0, O_JSON }, { "snippet", 0, 0, O_SNIPPET },
        { "help", 0, 0, O_HELP }, { 0, 0, 0, 0 },
    };
    int c, bad = 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_PORT: o->port = optarg; break;
        case O_IDS: bad = parse_ids(optarg, o); break;
        case O_BAUD: bad = parse_bauds(optarg, o); break;
        case O_FORMAT: bad = parse_formats(optarg, o); break;
        case O_TURN: {
            unsigned long v = strtoul(optarg, &end, 10);
            bad = end == optarg || *end || optarg[0] == '-' || v > 5000;
            if (bad)
                fprintf(stderr, "rtugw scan: --turnaround '%s': expected 0..5000 ms\n", optarg);
            o->turnaround_ms = (unsigned)v;
            break;
        }
        case O_BUDGET:
            o->budget_s = strtod(optarg, &end);
            bad = end == optarg || *end || !(o->budget_s > 0 && o->budget_s <= 86400);
            if (bad)
                fprintf(stderr, "rtugw scan: --budget '%s': expected seconds, 0 < S <= 86400\n", optarg);
            break;
        case O_NOID: o->identify = false; break;
        case O_JSON: o->json = true; break;
        case O_SNIPPET: o->snippet = true; break;
        case 'h': case O_HELP: usage(stdout); return 1;
        default: bad = 1; break;
        }
    }
    if (bad)
        return -1;
    if (!o->port || optind < argc) {
        fprintf(stderr, "rtugw scan: %s (rtugw scan --help)\n",
                !o->port ? "--port PATH is required" : "unexpected argument");
        return -1;
    }
    return 0;
}

/* ---- one request on the line --------------------------------------------------------------- */

static unsigned format_char_bits(const scan_format_t *f)
{
    return rtu_char_bits(f->data_bits, f->parity, f->stop_bits);
}

static uint64_t chars_ns(unsigned n, unsigned bits, unsigned baud)
{
    return (uint64_t)n * bits * 1000000000ull / baud;
}

/* A request of req bytes whose answer is at most ans bytes: the first byte
 * of the answer is due after the request's wire time, the turnaround, a
 * t3.5 and two characters; the whole answer (behind at most 8 characters of
 * noise) a t3.5 after its wire time. Before it the line is quiet for a t3.5
 * (at least 1 ms); cost_ns is all of it plus SCAN_SLACK_NS. */
static scan_timing_t request_timing(const scan_options_t *o, unsigned baud, const scan_format_t *f,
                                    unsigned req, unsigned ans)
{
    unsigned bits = format_char_bits(f);
    uint64_t t35 = rtu_t35_ns(baud, bits);
    scan_timing_t t;
    t.gap_ns = t35 < 1000000ull ? 1000000ull : t35;
    t.first_ns = chars_ns(req + 2, bits, baud) + (uint64_t)o->turnaround_ms * 1000000ull + t35;
    t.wait_ns = t.first_ns + chars_ns(ans + SCAN_NOISE_CHARS, bits, baud) + t35;
    t.cost_ns = t.gap_ns + t.wait_ns + SCAN_SLACK_NS;
    return t;
}

/* The probe: FC 3, one register (8 bytes), answered in 7 (exception 5). */
static scan_timing_t probe_timing(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    return request_timing(o, baud, f, 8, 7);
}

/* FC 43/14 (7 bytes) and FC 17 (4 bytes) answer up to 256 bytes; FC 1-4 of
 * one item 6 or 7. */
static scan_timing_t fc43_timing(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    return request_timing(o, baud, f, 7, RTU_MAX_ADU);
}

static scan_timing_t fc17_timing(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    return request_timing(o, baud, f, 4, RTU_MAX_ADU);
}

/* What identifying one slave can cost: 3 rounds of FC 43, FC 17, FC 1..4. */
static uint64_t identify_cost_ns(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    if (!o->identify)
        return 0;
    return 3 * fc43_timing(o, baud, f).cost_ns + fc17_timing(o, baud, f).cost_ns +
           4 * probe_timing(o, baud, f).cost_ns;
}

static void drain(driver_t *d)
{
    uint8_t junk[256];
    uint64_t t;
    while (driver_read(d, junk, sizeof junk, &t) > 0)
        ;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whether a request of this cost ends before --budget's deadline; if not,
 * the budget is hit. */
static bool fits(scan_run_t *r, uint64_t cost_ns)
{
    if (r->o->budget_s <= 0)
        return true;
    uint64_t end = r->start_ns + (uint64_t)(r->o->budget_s * 1e9);
    if (!r->budget_hit && driver_now_ns() + cost_ns <= end)
        return true;
    r->budget_hit = true;
    return false;
}

/* Frames the framer has ready: the answer of slave to fc, or garbled. */
static int take_frames(rtu_framer_t *fr, uint8_t slave, uint8_t fc, uint8_t *answer, size_t cap, bool *other)
{
    rtu_frame_t f;
    while (rtu_framer_next(fr, &f) == 1) {
        if (f.crc_ok && f.len >= 4 && f.adu[0] == slave && (f.adu[1] & 0x7F) == fc && f.len <= cap) {
            memcpy(answer, f.adu, f.len);
            return f.len;
        }
        *other = true;
    }
    return 0;
}

/* The answer of slave to fc anywhere in the bytes that came: where a noise
 * byte before it makes a head whose rule predicts a frame longer than what
 * came (0xFF 0x04 0x04...: "slave 255, FC 4, 4 bytes"), the framer holds
 * that head by its length; the scan knows what it asked, so it looks
 * behind the noise for that answer. *skipped gets the bytes before it. */
static int find_answer(const uint8_t *raw, size_t have, uint8_t slave, uint8_t fc, uint8_t *answer,
                       size_t cap, size_t *skipped)
{
    for (size_t o = 1; o + 4 <= have; o++) {
        if (raw[o] != slave || (raw[o + 1] & 0x7F) != fc)
            continue;
        int want = rtu_response_length(raw + o, have - o);
        if (want < 4 || o + (size_t)want > have || (size_t)want > cap ||
            rtu_crc16(raw + o, (size_t)want - 2) != (uint16_t)(raw[o + want - 2] | raw[o + want - 1] << 8))
            continue;
        memcpy(answer, raw + o, (size_t)want);
        *skipped = o;
        return want;
    }
    return 0;
}

/*
 * Sends PDU to slave after the line's quiet gap and waits for its answer
 * (or its exception) as t says. Returns the answer's length (ADU, CRC
 * checked), 0 when nothing came, -1 when bytes came but no good answer of
 * that slave and function (counted as garbled at this id), -2 on a port
 * error, -3 when --budget leaves no time for it. Bytes skipped before a
 * good answer are the slave's noise.
 */
static int transact(scan_line_t *l, uint8_t slave, const uint8_t *pdu, size_t pdu_len, scan_timing_t t,
                    uint8_t *answer, size_t cap, scan_slave_t *s)
{
    scan_run_t *r = l->r;
    uint8_t req[RTU_MAX_ADU];
    int n = rtu_adu_from_pdu(slave, pdu, pdu_len, req, sizeof req);
    if (n < 0)
        return -2;
    if (!fits(r, t.cost_ns))
        return -3;
    sleep_ns(t.gap_ns);
    drain(l->d);
    rtu_framer_reset(l->fr);
    rtu_framer_stats_t st0;
    rtu_framer_get_stats(l->fr, &st0);
    if (driver_write(l->d, req, (size_t)n) != n)
        return -2;
    uint64_t start = driver_now_ns(), fed = 0;
    uint8_t raw[2 * RTU_MAX_ADU];
    size_t skipped = 0;
    bool other = false;
    int got = 0;
    for (;;) {
        uint64_t now = driver_now_ns();
        uint64_t until = start + (fed ? t.wait_ns : t.first_ns);
        if (now >= until)
            break;
        struct pollfd p = { driver_fd(l->d), POLLIN, 0 };
        uint64_t step = until - now < t.gap_ns ? until - now : t.gap_ns;
        if (poll(&p, 1, (int)((step + 999999) / 1000000)) < 0 && errno != EINTR)
            return -2;
        uint8_t buf[RTU_MAX_ADU];
        uint64_t ts;
        ssize_t k = driver_read(l->d, buf, sizeof buf, &ts);
        if (k > 0) {
            rtu_framer_feed(l->fr, buf, (size_t)k, ts);
            size_t room = fed < sizeof raw ? sizeof raw - (size_t)fed : 0;
            memcpy(raw + fed, buf, (size_t)k < room ? (size_t)k : room);
            fed += (uint64_t)k;
        } else if (k == DRIVER_AGAIN || k == 0) {
            rtu_framer_idle(l->fr, driver_now_ns());
        } else {
            return -2;
        }
        if ((got = take_frames(l->fr, slave, pdu[0], answer, cap, &other)) > 0 ||
            (k > 0 && (got = find_answer(raw, fed < sizeof raw ? (size_t)fed : sizeof raw, slave, pdu[0],
                                         answer, cap, &skipped)) > 0))
            break;
    }
    if (got <= 0) {
        rtu_framer_idle(l->fr, driver_now_ns() + t.gap_ns);   /* what is still held is judged now */
        got = take_frames(l->fr, slave, pdu[0], answer, cap, &other);
    }
    rtu_framer_stats_t st;
    rtu_framer_get_stats(l->fr, &st);
    if (got > 0) {
        if (s)
            s->noise += skipped ? skipped : st.noise_bytes - st0.noise_bytes;
        return got;
    }
    if (!fed)
        return 0;
    scan_garbled_t *g = &r->garbled[slave];
    if (g->count++ == 0) {
        g->baud = l->baud;
        g->format = l->format;
    }
    (void)other;
    return -1;
}

/* ---- identification ------------------------------------------------------------------------- */

static void copy_text(char *dst, size_t cap, const uint8_t *src, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7F ? (char)src[i] : '?';
    dst[n] = '\0';
}

/* FC 43/14, basic objects (vendor, product code, revision), following
 * "more follows" for at most three requests. -3 when --budget ended it. */
static int identify_device(scan_line_t *l, scan_slave_t *s)
{
    uint8_t next = 0, a[RTU_MAX_ADU];
    scan_timing_t t = fc43_timing(l->r->o, l->baud, &l->format);
    for (int round = 0; round < 3; round++) {
        uint8_t pdu[4] = { 0x2B, 0x0E, 0x01, next };
        int n = transact(l, s->id, pdu, sizeof pdu, t, a, sizeof a, s);
        if (n == -3)
            return -3;
        if (n < 10 || a[1] != 0x2B || a[2] != 0x0E)
            return 0;
        s->has_device_id = true;
        size_t at = 8, end = (size_t)n - 2;
        for (unsigned k = 0; k < a[7] && at + 2 <= end; k++) {
            uint8_t id = a[at], len = a[at + 1];
            if (at + 2 + len > end)
                break;
            char *dst = id == 0 ? s->vendor : id == 1 ? s->product : id == 2 ? s->revision : NULL;
            if (dst)
                copy_text(dst, sizeof s->vendor, a + at + 2, len);
            at += 2u + len;
        }
        if (a[5] != 0xFF || a[6] == 0 || a[6] <= next)
            return 0;
        next = a[6];
    }
    return 0;
}

/* FC 43/14, FC 17, FC 1-4 at address 0. -3 when --budget ended it (the
 * slave is marked unfinished), -2 when the port failed. */
static int identify(scan_line_t *l, scan_slave_t *s)
{
    const scan_options_t *o = l->r->o;
    uint8_t a[RTU_MAX_ADU];
    s->run = -1;
    int n = identify_device(l, s);
    if (n >= 0) {
        uint8_t fc17 = 0x11;
        n = transact(l, s->id, &fc17, 1, fc17_timing(o, l->baud, &l->format), a, sizeof a, s);
    }
    if (n >= 5 && a[1] == 0x11 && (size_t)a[2] + 5 <= (size_t)n) {
        s->has_server_id = true;
        size_t len = a[2];
        /* the last data byte is the run indicator (0x00 off, 0xFF on) */
        if (len >= 1 && (a[3 + len - 1] == 0xFF || a[3 + len - 1] == 0x00)) {
            s->run = a[3 + len - 1] == 0xFF;
            len--;
        }
        s->server_id_len = len < sizeof s->server_id ? len : sizeof s->server_id;
        memcpy(s->server_id, a + 3, s->server_id_len);
    }
    for (uint8_t fc = 1; fc <= 4 && n > -2; fc++) {
        uint8_t pdu[5] = { fc, 0, 0, 0, 1 };
        n = transact(l, s->id, pdu, sizeof pdu, probe_timing(o, l->baud, &l->format), a, sizeof a, s);
        s->reads[fc] = n > 0 && a[1] == fc;
    }
    s->unfinished = n == -3;
    return n < -1 ? n : 0;
}

/* ---- the scan ----------------------------------------------------------------------------- */

double scan_elapsed_s(const scan_run_t *r)
{
    return (double)(driver_now_ns() - r->start_ns) / 1e9;
}

/* One line of progress: rewritten in place on a terminal, at most every
 * 100 ms; else a line per speed and format and per slave found, so a log
 * stays short. */
static void progress(scan_run_t *r, unsigned baud, const scan_format_t *f, unsigned id, bool line)
{
    uint64_t now = driver_now_ns();
    if (r->o->json && !r->tty && !line)
        return;
    if (r->tty) {
        if (!line && now - r->last_progress_ns < 100000000ull)
            return;
        r->last_progress_ns = now;
        fprintf(stderr, "\rscan: %u %s id %u (%u-%u), %zu found, %.1f s   ", baud, f->text, id,
                r->o->first_id, r->o->last_id, r->n_found, scan_elapsed_s(r));
    } else if (line) {
        fprintf(stderr, "scan: %u %s from id %u, %zu found so far, %.1f s\n", baud, f->text, id,
                r->n_found, scan_elapsed_s(r));
    }
}

static void note_skipped(scan_run_t *r, unsigned baud, const scan_format_t *f, unsigned from_id)
{
    size_t used = strlen(r->skipped);
    snprintf(r->skipped + used, sizeof r->skipped - used, "%s%u %s from id %u", used ? ", " : "",
             baud, f->text, from_id);
}

/* Every id at one speed and format. 1 when a good frame came (from any
 * slave), 0 when none, -1 when the port failed. */
static int scan_one(scan_run_t *r, unsigned baud, const scan_format_t *f)
{
    const scan_options_t *o = r->o;
    driver_serial_config_t sc;
    driver_serial_defaults(&sc);
    sc.path = o->port;
    sc.baud = baud;
    sc.data_bits = f->data_bits;
    sc.parity = f->parity;
    sc.stop_bits = f->stop_bits;
    char err[DRIVER_ERRLEN] = "out of memory";
    rtu_framer_config_t fc = { .baud = baud, .char_bits = format_char_bits(f), .dir = RTU_DIR_RESPONSE,
                               .by_length = true };
    scan_line_t l = { .r = r, .baud = baud, .format = *f, .fr = rtu_framer_new(&fc) };
    l.d = l.fr ? driver_serial_new(&sc, err, sizeof err) : NULL;
    if (!l.d || driver_open(l.d, err, sizeof err) != 0) {
        fprintf(stderr, "%srtugw scan: %s\n", r->tty ? "\n" : "", err);
        driver_free(l.d);
        rtu_framer_free(l.fr);
        return -1;
    }
    scan_timing_t t = probe_timing(o, baud, f);
    bool good = false;
    int n = 0;
    progress(r, baud, f, o->first_id, true);
    for (unsigned id = o->first_id; id <= o->last_id && n != -2; id++) {
        progress(r, baud, f, id, false);
        uint8_t pdu[5] = { 0x03, 0, 0, 0, 1 }, a[RTU_MAX_ADU];
        n = transact(&l, (uint8_t)id, pdu, sizeof pdu, t, a, sizeof a, NULL);
        if (n == -3) {
            note_skipped(r, baud, f, id);
            break;
        }
        if (n <= 0 || r->n_found == SCAN_MAX_FOUND)
            continue;
        good = true;
        scan_slave_t *s = &r->found[r->n_found++];
        memset(s, 0, sizeof *s);
        s->id = (uint8_t)id;
        s->baud = baud;
        s->format = *f;
        s->run = -1;
        if (o->identify)
            n = identify(&l, s);
        if (!r->tty && !o->json)
            fprintf(stderr, "scan: slave %u answers at %u %s\n", id, baud, f->text);
        if (n == -3) {
            size_t used = strlen(r->skipped);
            snprintf(r->skipped + used, sizeof r->skipped - used, "%sidentification of slave %u",
                     used ? ", " : "", id);
            if (id < o->last_id)
                note_skipped(r, baud, f, id + 1);
            break;
        }
    }
    if (n == -2)
        fprintf(stderr, "%srtugw scan: %s: the port failed\n", r->tty ? "\n" : "", o->port);
    driver_free(l.d);
    rtu_framer_free(l.fr);
    return n == -2 ? -1 : good ? 1 : 0;
}

int cmd_scan(int argc, char **argv)
{
    scan_options_t o = { .first_id = 1, .last_id = 247, .turnaround_ms = 20, .identify = true,
                         .bauds = { 19200, 9600, 38400, 115200, 57600, 4800, 2400, 1200 }, .n_bauds = 8 };
    parse_formats("8E1,8N1,8O1,8N2", &o);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    scan_run_t *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "rtugw scan: out of memory\n");
        return 1;
    }
    r->o = &o;
    r->tty = isatty(STDERR_FILENO);
    r->start_ns = driver_now_ns();
    /* the bound printed first: every speed and format, every id, no slave;
     * then what identifying a slave found can cost at the slowest of them */
    double bound = 0, per_slave = 0;
    unsigned ids = o.last_id - o.first_id + 1;
    for (size_t b = 0; b < o.n_bauds; b++)
        for (size_t f = 0; f < o.n_formats; f++) {
            bound += ids * (double)probe_timing(&o, o.bauds[b], &o.formats[f]).cost_ns / 1e9;
            double id_s = (double)identify_cost_ns(&o, o.bauds[b], &o.formats[f]) / 1e9;
            per_slave = id_s > per_slave ? id_s : per_slave;
        }
    char budget[64] = "";
    if (o.budget_s > 0)
        snprintf(budget, sizeof budget, "; --budget %.1f s is a hard stop", o.budget_s);
    fprintf(stderr, "scan: %s, ids %u-%u, %zu speeds x %zu formats: at most %.2f s plus at most %.2f s "
                    "per slave found%s\n",
            o.port, o.first_id, o.last_id, o.n_bauds, o.n_formats, bound, per_slave, budget);
    int failed = 0;
    for (size_t b = 0; b < o.n_bauds && !failed; b++)
        for (size_t f = 0; f < o.n_formats; f++) {
            if (r->budget_hit) {
                note_skipped(r, o.bauds[b], &o.formats[f], o.first_id);
                continue;
            }
            int got = scan_one(r, o.bauds[b], &o.formats[f]);
            if (got < 0) {
                failed = 1;
                break;
            }
            if (got > 0)
                break; /* this speed's format is found: no other format at this speed */
        }
    /* the bound with the slaves found, each at its own speed */
    for (size_t i = 0; i < r->n_found; i++)
        bound += (double)identify_cost_ns(&o, r->found[i].baud, &r->found[i].format) / 1e9;
    if (r->tty)
        fprintf(stderr, "\n");
    if (o.budget_s > 0 && o.budget_s < bound)
        bound = o.budget_s;
    fprintf(stderr, "scan: %zu slave%s found in %.2f s (bound %.2f s)%s%s\n", r->n_found,
            r->n_found == 1 ? "" : "s", scan_elapsed_s(r), bound,
            r->budget_hit ? "; --budget reached, not finished: " : "", r->skipped);
    if (o.json || o.snippet)
        scan_print_hints(r, stderr);
    if (o.json)
        scan_print_json(r);
    else if (!o.snippet)
        scan_print_table(r);
    if (o.snippet)
        scan_print_snippet(r);
    rc = failed || !r->n_found ? 1 : 0;
    free(r);
    return rc;
}
