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
 * Time. The probe waits, per id, the wire time of the request and of the
 * longest answer to it plus two t3.5 gaps, plus a turnaround allowance (the
 * slave's own processing; --turnaround, default 20 ms): at 9600 8E1 that is
 * 15.6 + 8.0 + 20 = 44 ms. So the whole scan is bounded by
 *     sum over speeds of  formats * ids * (probe_ms(speed) + t3.5)
 *   + found * 8 * probe_ms        (identification: up to 8 requests each)
 * which the command prints before it starts; --budget S stops it earlier,
 * saying which speeds and formats it did not finish. Nothing waits longer
 * than one probe on a silent id, so a scan of 1..247 at one speed and
 * format takes 247 probes (11 s at 9600 8E1).
 */
#include "cli/cli.h"
#include "drivers/driver.h"
#include "json/json.h"
#include "parser/rtu.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCAN_MAX_BAUDS 16
#define SCAN_MAX_FORMATS 8
#define SCAN_MAX_FOUND 247
#define SCAN_IDENTIFY_REQUESTS 8

typedef struct scan_format {
    char text[4];          /* "8E1" */
    unsigned data_bits, stop_bits;
    char parity;
} scan_format_t;

typedef struct scan_slave {
    uint8_t id;
    unsigned baud;
    scan_format_t format;
    bool has_device_id;
    char vendor[64], product[64], revision[64];
    bool has_server_id;
    uint8_t server_id[64];
    size_t server_id_len;
    int run;               /* FC 17 run indicator: 1 on, 0 off, -1 not given */
    bool reads[5];         /* [1..4]: FC answered data at address 0 */
} scan_slave_t;

typedef struct scan_options {
    const char *port;
    unsigned first_id, last_id;
    unsigned bauds[SCAN_MAX_BAUDS];
    size_t n_bauds;
    scan_format_t formats[SCAN_MAX_FORMATS];
    size_t n_formats;
    unsigned turnaround_ms;
    double budget_s;       /* 0: no budget beyond the bound */
    bool json, snippet, identify;
} scan_options_t;

typedef struct scan_run {
    const scan_options_t *o;
    scan_slave_t found[SCAN_MAX_FOUND];
    size_t n_found;
    uint64_t start_ns;
    uint64_t last_progress_ns;
    bool tty, budget_hit;
    char skipped[512];     /* speeds and formats not finished within --budget */
} scan_run_t;

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
            "at address 0). A speed tries no other format once one gave good frames.\n"
            "\n"
            "  --port PATH        the serial port (no gateway may hold it)\n"
            "  --ids A-B          slave ids tried (default 1-247; one id: A)\n"
            "  --baud LIST        speeds, in order (default 19200,9600,38400,115200,57600,4800,\n"
            "                     2400,1200)\n"
            "  --format LIST      character formats, in order (default 8E1,8N1,8O1,8N2)\n"
            "  --turnaround MS    a slave's allowance to answer, on top of the wire time\n"
            "                     (default 20); the wait per id is the wire time of the probe\n"
            "                     and its answer, plus two t3.5, plus this\n"
            "  --budget S         stop after S seconds (default: the bound, printed first:\n"
            "                     speeds x formats x ids x wait, plus 8 waits per slave found)\n"
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

/* The wait for one probe: 8 bytes out, the longest answer (7 bytes) back,
 * a t3.5 before and after, and the slave's turnaround allowance. */
static uint64_t probe_wait_ns(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    unsigned bits = format_char_bits(f);
    uint64_t wire = 15ull * bits * 1000000000ull / baud;
    return wire + 2 * rtu_t35_ns(baud, bits) + (uint64_t)o->turnaround_ms * 1000000ull;
}

/* An identification answer is longer (up to 256 bytes): its wire time too. */
static uint64_t identify_wait_ns(const scan_options_t *o, unsigned baud, const scan_format_t *f)
{
    return probe_wait_ns(o, baud, f) + 256ull * format_char_bits(f) * 1000000000ull / baud;
}

static void drain(driver_t *d)
{
    uint8_t junk[256];
    uint64_t t;
    while (driver_read(d, junk, sizeof junk, &t) > 0)
        ;
}

/*
 * Sends PDU to slave and waits up to wait_ns for an answer of that slave and
 * function (or its exception). Returns the answer's length (ADU, CRC
 * checked), 0 when nothing came, -1 when bytes came but no good frame
 * (*garbled), -2 on a port error. A frame ends at its length when the
 * function has a rule, else at a t3.5 silence (at least 3 ms: a pty
 * delivers in bursts).
 */
static int transact(driver_t *d, uint8_t slave, const uint8_t *pdu, size_t pdu_len, uint64_t wait_ns,
                    uint64_t gap_ns, uint8_t *answer, size_t cap, bool *garbled)
{
    uint8_t req[RTU_MAX_ADU];
    int n = rtu_adu_from_pdu(slave, pdu, pdu_len, req, sizeof req);
    if (n < 0)
        return -2;
    drain(d);
    if (driver_write(d, req, (size_t)n) != n)
        return -2;
    if (gap_ns < 3000000ull)
        gap_ns = 3000000ull;
    uint64_t start = driver_now_ns(), deadline = start + wait_ns, last = 0;
    size_t have = 0;
    for (;;) {
        uint64_t now = driver_now_ns();
        uint64_t until = have ? last + gap_ns : deadline;
        if (have && until > deadline + gap_ns)
            until = deadline + gap_ns;
        if (now >= until)
            break;
        struct pollfd p = { driver_fd(d), POLLIN, 0 };
        int ms = (int)((until - now + 999999) / 1000000);
        if (poll(&p, 1, ms) < 0 && errno != EINTR)
            return -2;
        uint64_t t;
        ssize_t r = driver_read(d, answer + have, cap - have, &t);
        if (r == DRIVER_AGAIN || r == 0)
            continue;
        if (r < 0)
            return -2;
        have += (size_t)r;
        last = driver_now_ns();
        int want = rtu_response_length(answer, have);
        if ((want > 0 && have >= (size_t)want) || have == cap)
            break;
    }
    if (!have)
        return 0;
    int want = rtu_response_length(answer, have);
    size_t len = want > 0 && (size_t)want <= have ? (size_t)want : have;
    bool ok = len >= 4 && rtu_crc16(answer, len - 2) == (uint16_t)(answer[len - 2] | answer[len - 1] << 8) &&
              answer[0] == slave && (answer[1] & 0x7F) == pdu[0];
    if (!ok) {
        *garbled = true;
        return -1;
    }
    return (int)len;
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
 * "more follows" for at most three requests. */
static void identify_device(driver_t *d, scan_slave_t *s, uint64_t wait, uint64_t gap)
{
    uint8_t next = 0, a[RTU_MAX_ADU];
    for (int round = 0; round < 3; round++) {
        uint8_t pdu[4] = { 0x2B, 0x0E, 0x01, next };
        bool garbled = false;
        int n = transact(d, s->id, pdu, sizeof pdu, wait, gap, a, sizeof a, &garbled);
        if (n < 10 || a[1] != 0x2B || a[2] != 0x0E)
            return;
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
            return;
        next = a[6];
    }
}

static void identify(driver_t *d, scan_slave_t *s, const scan_options_t *o)
{
    uint64_t wait = identify_wait_ns(o, s->baud, &s->format);
    uint64_t gap = rtu_t35_ns(s->baud, format_char_bits(&s->format));
    uint8_t a[RTU_MAX_ADU];
    bool garbled = false;
    identify_device(d, s, wait, gap);
    uint8_t fc17 = 0x11;
    int n = transact(d, s->id, &fc17, 1, wait, gap, a, sizeof a, &garbled);
    s->run = -1;
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
    for (uint8_t fc = 1; fc <= 4; fc++) {
        uint8_t pdu[5] = { fc, 0, 0, 0, 1 };
        n = transact(d, s->id, pdu, sizeof pdu, wait, gap, a, sizeof a, &garbled);
        s->reads[fc] = n > 0 && a[1] == fc;
    }
}

/* ---- the scan ----------------------------------------------------------------------------- */

static double elapsed_s(const scan_run_t *r)
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
                r->o->first_id, r->o->last_id, r->n_found, elapsed_s(r));
    } else if (line) {
        fprintf(stderr, "scan: %u %s from id %u, %zu found so far, %.1f s\n", baud, f->text, id,
                r->n_found, elapsed_s(r));
    }
}

static bool over_budget(scan_run_t *r)
{
    if (r->o->budget_s > 0 && elapsed_s(r) >= r->o->budget_s)
        r->budget_hit = true;
    return r->budget_hit;
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
    char err[DRIVER_ERRLEN];
    driver_t *d = driver_serial_new(&sc, err, sizeof err);
    if (!d || driver_open(d, err, sizeof err) != 0) {
        fprintf(stderr, "%srtugw scan: %s\n", r->tty ? "\n" : "", err);
        driver_free(d);
        return -1;
    }
    uint64_t wait = probe_wait_ns(o, baud, f), gap = rtu_t35_ns(baud, format_char_bits(f));
    bool good = false;
    progress(r, baud, f, o->first_id, true);
    for (unsigned id = o->first_id; id <= o->last_id; id++) {
        if (over_budget(r)) {
            note_skipped(r, baud, f, id);
            break;
        }
        progress(r, baud, f, id, false);
        uint8_t pdu[5] = { 0x03, 0, 0, 0, 1 }, a[RTU_MAX_ADU];
        bool garbled = false;
        int n = transact(d, (uint8_t)id, pdu, sizeof pdu, wait, gap, a, sizeof a, &garbled);
        if (n == -2) {
            fprintf(stderr, "%srtugw scan: %s: the port failed\n", r->tty ? "\n" : "", o->port);
            driver_free(d);
            return -1;
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
            identify(d, s, o);
        if (!r->tty && !o->json)
            fprintf(stderr, "scan: slave %u answers at %u %s\n", id, baud, f->text);
    }
    driver_free(d);
    return good ? 1 : 0;
}

/* ---- output ----------------------------------------------------------------------------- */

static const char *parity_word(char p)
{
    return p == 'N' ? "none" : p == 'O' ? "odd" : "even";
}

static void print_table(const scan_run_t *r)
{
    if (!r->n_found) {
        printf("no slave answered\n");
        return;
    }
    printf("%-5s %-7s %-6s %-8s %-40s %s\n", "slave", "baud", "format", "reads", "device id (FC 43)",
           "server id (FC 17)");
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        char reads[16] = "", dev[160] = "-", sid[140] = "-";
        for (int fc = 1; fc <= 4; fc++)
            if (s->reads[fc])
                snprintf(reads + strlen(reads), sizeof reads - strlen(reads), "%s%d", reads[0] ? "," : "", fc);
        if (s->has_device_id)
            snprintf(dev, sizeof dev, "%s / %s / %s", s->vendor, s->product, s->revision);
        if (s->has_server_id) {
            size_t at = 0;
            for (size_t k = 0; k < s->server_id_len && at + 3 < sizeof sid - 12; k++)
                at += (size_t)snprintf(sid + at, sizeof sid - at, "%02x", s->server_id[k]);
            if (s->run >= 0)
                snprintf(sid + at, sizeof sid - at, " run %s", s->run ? "on" : "off");
        }
        printf("%-5u %-7u %-6s %-8s %-40s %s\n", s->id, s->baud, s->format.text, reads[0] ? reads : "-",
               dev, sid);
    }
}

static void print_json(const scan_run_t *r)
{
    char q[JSON_QUOTED_MAX(512)];
    json_quote(q, sizeof q, r->o->port);
    printf("{\"port\":%s,\"elapsed_s\":%.3f,\"complete\":%s", q, elapsed_s(r),
           r->budget_hit ? "false" : "true");
    json_quote(q, sizeof q, r->skipped);
    printf(",\"not_finished\":%s,\"slaves\":[", q);
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        printf("%s{\"slave\":%u,\"baud\":%u,\"format\":\"%s\",\"parity\":\"%s\",\"data_bits\":%u,"
               "\"stop_bits\":%u,\"reads\":[",
               i ? "," : "", s->id, s->baud, s->format.text, parity_word(s->format.parity),
               s->format.data_bits, s->format.stop_bits);
        for (int fc = 1, k = 0; fc <= 4; fc++)
            if (s->reads[fc])
                printf("%s%d", k++ ? "," : "", fc);
        printf("],\"device_id\":");
        if (s->has_device_id) {
            char v[JSON_QUOTED_MAX(64)], p[JSON_QUOTED_MAX(64)], rv[JSON_QUOTED_MAX(64)];
            json_quote(v, sizeof v, s->vendor);
            json_quote(p, sizeof p, s->product);
            json_quote(rv, sizeof rv, s->revision);
            printf("{\"vendor\":%s,\"product\":%s,\"revision\":%s}", v, p, rv);
        } else {
            printf("null");
        }
        printf(",\"server_id\":");
        if (s->has_server_id) {
            printf("\"");
            for (size_t k = 0; k < s->server_id_len; k++)
                printf("%02x", s->server_id[k]);
            printf("\",\"run\":%s", s->run < 0 ? "null" : s->run ? "true" : "false");
        } else {
            printf("null");
        }
        printf("}");
    }
    printf("]}\n");
}

/* One [bus] per speed and format found, and a [device] per slave on it. */
static void print_snippet(const scan_run_t *r)
{
    unsigned bus = 0;
    for (size_t i = 0; i < r->n_found; i++) {
        const scan_slave_t *s = &r->found[i];
        bool first = true;
        for (size_t k = 0; k < i; k++)
            if (r->found[k].baud == s->baud && strcmp(r->found[k].format.text, s->format.text) == 0)
                first = false;
        if (!first)
            continue;
        bus++;
        printf("%s[bus scan%u]\nport = %s\nbaud = %u\nparity = %s\ndata_bits = %u\nstop_bits = %u\n",
               bus > 1 ? "\n" : "", bus, r->o->port, s->baud, parity_word(s->format.parity),
               s->format.data_bits, s->format.stop_bits);
        for (size_t k = i; k < r->n_found; k++) {
            const scan_slave_t *t = &r->found[k];
            if (t->baud == s->baud && strcmp(t->format.text, s->format.text) == 0)
                printf("\n[device slave%u]\nbus = scan%u\nslave = %u\n", t->id, bus, t->id);
        }
    }
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
    /* the bound printed first: every speed and format, every id, no slave */
    double bound = 0;
    unsigned ids = o.last_id - o.first_id + 1;
    for (size_t b = 0; b < o.n_bauds; b++)
        for (size_t f = 0; f < o.n_formats; f++)
            bound += ids * (double)(probe_wait_ns(&o, o.bauds[b], &o.formats[f]) +
                                    rtu_t35_ns(o.bauds[b], format_char_bits(&o.formats[f]))) / 1e9;
    fprintf(stderr, "scan: %s, ids %u-%u, %zu speeds x %zu formats: at most %.1f s plus %u waits "
                    "per slave found%s\n",
            o.port, o.first_id, o.last_id, o.n_bauds, o.n_formats, bound,
            o.identify ? SCAN_IDENTIFY_REQUESTS : 0, o.budget_s > 0 ? " (--budget set)" : "");
    r->start_ns = driver_now_ns();
    int failed = 0;
    for (size_t b = 0; b < o.n_bauds && !failed; b++)
        for (size_t f = 0; f < o.n_formats; f++) {
            if (over_budget(r)) {
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
    if (r->tty)
        fprintf(stderr, "\n");
    fprintf(stderr, "scan: %zu slave%s found in %.1f s%s%s\n", r->n_found, r->n_found == 1 ? "" : "s",
            elapsed_s(r), r->budget_hit ? "; --budget reached, not finished: " : "", r->skipped);
    if (o.json)
        print_json(r);
    else if (!o.snippet)
        print_table(r);
    if (o.snippet)
        print_snippet(r);
    rc = failed || !r->n_found ? 1 : 0;
    free(r);
    return rc;
}
