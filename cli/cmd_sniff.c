/*
 * cli/cmd_sniff.c -- `rtugw sniff --port PATH`: decode a line someone else masters.
 *
 * The port is only ever read: nothing here calls driver_write, and RS-485
 * direction control is left off, so the transceiver's driver is never enabled
 * by us (docs/drivers.md, "Listen-only"). Bytes go through the parser's
 * streaming framer in SNIFF mode (the one that re-frames captures for `rtugw
 * replay`), frames through the pairer (parser/pair.c: the line discipline's
 * pairing rules from the outside), and each answer through the online router.
 *
 * Time. A stamp is CLOCK_MONOTONIC when read() returned the chunk that held the
 * byte, not when the byte was on the wire: the UART hands bytes over per FIFO
 * trigger or per character timeout (an on-board 16550 after 8-14 characters or
 * 4 character times of quiet; a USB adapter per its latency timer, 1-16 ms,
 * FTDI's default 16), then the kernel and the scheduler add their share. So a
 * stamp lags the wire by that much, never leads it. Latencies are differences
 * of two stamps of the same kind and are good to about one chunk's delay (an
 * answer's first byte is stamped when its first chunk is read). Frame
 * boundaries do not depend on that: the framer subtracts each chunk's own wire
 * time before it judges silence (parser/framer.c).
 *
 * Bounded: the framer, the pairer and the learner are fixed allocations; the
 * capture grows by one record per frame (--duration or --frames end a run).
 */
#include "cli/cli.h"
#include "drivers/driver.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define SNIFF_RAW 4096   /* > the framer's buffer plus one read */

typedef struct sniff_opts {
    const char *port;
    driver_serial_config_t serial;
    const char *capture;
    bool json, summary, absolute;
    double duration;          /* 0: until a signal */
    unsigned long max_frames; /* 0: no limit */
    unsigned hold_ms;
    unsigned late_factor;     /* parser/pair.c P5's bound, x the heard timeout */
    unsigned silence_ms;      /* 0: t3.5 at the baud, net of each chunk's wire time */
    int path;                 /* -1: the router; else an rtu_path_t forced (benches) */
} sniff_opts_t;

typedef struct sniff {
    const sniff_opts_t *o;
    rtu_framer_t *framer;
    rtu_pairer_t *pairer;
    rtu_learn_t *learn;
    router_t *router;
    router_thread_t *route;
    driver_capture_writer_t *cap;
    uint64_t start_mono, realtime_offset; /* realtime = mono + offset */
    unsigned long frames, capture_errors;
    uint64_t bytes;
    /* the bytes fed, kept until the framer has ruled on them, so that the
     * noise it discards goes into the capture as records of its own */
    uint8_t raw[SNIFF_RAW];
    uint64_t ruled;           /* bytes before this offset are in a record or dropped */
    uint64_t noise_written;   /* the framer's noise_bytes written so far */
    uint64_t last_t;          /* stamp of the last chunk */
} sniff_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw sniff --port PATH [--baud B] [--format 8E1] [--json] [--summary]\n"
            "                   [--capture FILE] [--timestamps relative|absolute]\n"
            "                   [--duration S] [--frames N] [--hold-ms N] [--silence-ms N]\n"
            "                   [--late-factor N]\n"
            "                   [--path auto|native|fallback|reference]\n"
            "\n"
            "Listens to a Modbus RTU line that another master polls, and never writes to\n"
            "it. Prints one line per request and one per answer, paired, with the answer's\n"
            "latency; unanswered requests, answers nothing asked for, doubtful answers and\n"
            "damaged frames are shown and counted, never paired.\n"
            "\n"
            "  --port PATH       the serial port (or pseudo-terminal) of the tap\n"
            "  --baud B          line speed, for t3.5 framing (default 19200)\n"
            "  --format F        character format, 8E1 (default), 8N1, 8N2, ...\n"
            "  --json            one JSON object a line instead of text; the summary, if\n"
            "                    asked for, goes to standard error\n"
            "  --capture FILE    also write every frame to FILE: pcap, link type 147 (USER0,\n"
            "                    Modbus RTU in Wireshark), what `rtugw replay` reads; noise\n"
            "                    the framer skips goes in as records of its own\n"
            "  --summary         at the end, per slave: the polls the master makes (function,\n"
            "                    address range, interval), its timeout and retries as heard\n"
            "  --timestamps T    relative (seconds since start, default) or absolute (UTC)\n"
            "  --duration S      stop after S seconds (default: at SIGINT or SIGTERM)\n"
            "  --frames N        stop after N frames\n"
            "  --hold-ms N       quiet time after an answer before it is vouched for, when\n"
            "                    the master's next request does not come first (default 20)\n"
            "  --late-factor N   the late bound: a slave answers a request (late, queued or\n"
            "                    twice) within N times the master's timeout as heard; until\n"
            "                    then, a request not answered makes answers of its shape to\n"
            "                    other requests of that slave doubtful (1..100, default 4; a\n"
            "                    listen bus's listen_late_factor)\n"
            "  --path P          decode answers with auto (the router, default), native,\n"
            "                    fallback or reference (to compare the arms)\n"
            "  --silence-ms N    end a frame after N ms of quiet instead of t3.5: for a tap\n"
            "                    whose bytes arrive with more jitter than t3.5 (a relay, a\n"
            "                    pseudo-terminal, serial over IP); frames of known length\n"
            "                    still end by their length and CRC\n"
            "\n"
            "Timestamps are when read() returned the bytes, not when they were on the wire:\n"
            "they lag it by the UART's hand-over (FIFO trigger or character timeout on an\n"
            "on-board UART, the latency timer of a USB adapter: 1-16 ms) plus scheduling,\n"
            "and never lead it. A latency is the difference of two such stamps, good to\n"
            "about one hand-over. Frame boundaries do not depend on it.\n"
            "\n"
            "Exit: 0 at the end, 1 the port failed or hung up, 2 usage error.\n");
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[3 * i] = digits[p[i] >> 4];
        out[3 * i + 1] = digits[p[i] & 15];
        out[3 * i + 2] = ' ';
    }
    out[n ? 3 * n - 1 : 0] = 0;
}

static void stamp(const sniff_t *s, uint64_t mono, char *buf, size_t cap)
{
    if (!s->o->absolute) {
        snprintf(buf, cap, "%.6f", mono > s->start_mono ? (double)(mono - s->start_mono) / 1e9 : 0.0);
        return;
    }
    uint64_t rt = mono + s->realtime_offset;
    time_t sec = (time_t)(rt / 1000000000ull);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06uZ", day, (unsigned)(rt % 1000000000ull / 1000u));
}

/* One line for a frame: text or JSON. role: "req", "ans", ... */
static void print_frame(sniff_t *s, const char *role, const rtu_frame_t *f, const rtu_pair_event_t *ev)
{
    char ts[64], hx[3 * RTU_MAX_ADU + 1], what[4200];
    stamp(s, f->t_last_ns, ts, sizeof ts);
    hex(f->adu, f->len, hx);
    bool is_answer = strcmp(role, "req") != 0;
    what[0] = 0;
    if (f->crc_ok && !is_answer) {
        rtu_request_t rq;
        rtu_status_t st = rtu_request_decode(f->adu, f->len, &rq);
        if (rtu_request_json(&rq, st, what, sizeof what) < 0)
            what[0] = 0;
    } else if (f->crc_ok) {
        rtu_envelope_t env;
        if (s->o->path < 0)
            router_decode(s->route, f->adu, f->len, &env);
        else
            rtu_decoder((rtu_path_t)s->o->path)(f->adu, f->len, &env);
        if (rtu_envelope_json(&env, NULL, what, sizeof what) < 0)
            what[0] = 0;
    }
    double lat_ms = (double)ev->latency_ns / 1e6;
    bool with_latency = is_answer && (ev->kind == RTU_PAIR_ANSWERED || ev->kind == RTU_PAIR_DOUBTFUL);
    if (s->o->json) {
        printf("{\"ts\":\"%s\",\"role\":\"%s\",\"pair\":\"%s\",\"crc_ok\":%s,\"hex\":\"%s\"", ts, role,
               rtu_pair_kind_name((rtu_pair_kind_t)ev->kind), f->crc_ok ? "true" : "false", hx);
        if (with_latency)
            printf(",\"latency_ms\":%.3f", lat_ms);
        if (ev->kind == RTU_PAIR_UNANSWERED)
            printf(",\"waited_ms\":%.3f", lat_ms);
        if (ev->retry && !is_answer)
            printf(",\"retry\":true");
        if (ev->duplicate && is_answer)
            printf(",\"duplicate\":true");
        if (ev->why)
            printf(",\"why\":\"%s\"", ev->why);
        printf(",\"decoded\":%s}\n", what[0] ? what : "null");
        return;
    }
    printf("%s %-4s %-10s %s", ts, role, rtu_pair_kind_name((rtu_pair_kind_t)ev->kind), hx);
    if (with_latency)
        printf("  +%.3f ms", lat_ms);
    if (ev->kind == RTU_PAIR_UNANSWERED)
        printf("  (no answer in %.3f ms)", lat_ms);
    if (ev->retry && !is_answer)
        printf("  retry");
    if (ev->duplicate && is_answer)
        printf("  twice");
    if (ev->why)
        printf("  (%s)", ev->why);
    printf("\n");
}

static void on_event(sniff_t *s, const rtu_pair_event_t *ev)
{
    rtu_learn_event(s->learn, ev);
    switch ((rtu_pair_kind_t)ev->kind) {
    case RTU_PAIR_ANSWERED:
    case RTU_PAIR_DOUBTFUL:
        print_frame(s, "req", &ev->request, ev);
        print_frame(s, "ans", &ev->answer, ev);
        break;
    case RTU_PAIR_UNANSWERED: print_frame(s, "req", &ev->request, ev); break;
    case RTU_PAIR_UNPAIRED:
    case RTU_PAIR_DAMAGED: print_frame(s, "ans", &ev->answer, ev); break;
    default: break;
    }
}

static void drain_events(sniff_t *s)
{
    rtu_pair_event_t ev;
    while (rtu_pairer_next(s->pairer, &ev) == 1)
        on_event(s, &ev);
}

static uint64_t noise_of(const sniff_t *s)
{
    rtu_framer_stats_t fs;
    rtu_framer_get_stats(s->framer, &fs);
    return fs.noise_bytes;
}

/* The framer's noise up to mark, which lies in the stream right after what
 * was ruled on, into the capture as a record of its own (stamped t): noise
 * a capture leaves out cannot be diagnosed from it. The framer discards from
 * the head of what it holds, so its noise is the oldest bytes not yet ruled. */
static void write_noise(sniff_t *s, uint64_t mark, uint64_t t)
{
    uint64_t n = mark - s->noise_written;
    s->noise_written = mark;
    if (!n)
        return;
    if (s->cap && s->ruled + n <= s->bytes && s->bytes - s->ruled <= SNIFF_RAW) {
        uint8_t rec[SNIFF_RAW];
        for (uint64_t i = 0; i < n; i++)
            rec[i] = s->raw[(s->ruled + i) % SNIFF_RAW];
        if (driver_capture_write(s->cap, t + s->realtime_offset, rec, (size_t)n) != 0)
            s->capture_errors++;
    }
    s->ruled += n;
}

/* Frames out of the framer, in line order, into the capture and the pairer;
 * the noise before each, and after the last, into the capture too. */
static void drain_frames(sniff_t *s)
{
    rtu_frame_t f;
    while (rtu_framer_next(s->framer, &f) == 1) {
        s->frames++;
        write_noise(s, f.noise_mark, f.t_first_ns);
        if (s->cap && driver_capture_write(s->cap, f.t_last_ns + s->realtime_offset, f.adu, f.len) != 0)
            s->capture_errors++;
        s->ruled += f.len;
        rtu_pairer_frame(s->pairer, &f, noise_of(s));
        drain_events(s);
    }
    write_noise(s, noise_of(s), s->last_t);
}

/* A chunk read from the port, kept for write_noise, into the framer. */
static void feed(sniff_t *s, const uint8_t *buf, size_t n, uint64_t t)
{
    for (size_t i = 0; i < n; i++)
        s->raw[(s->bytes + i) % SNIFF_RAW] = buf[i];
    s->bytes += n;
    s->last_t = t;
    rtu_framer_feed(s->framer, buf, n, t);
}

static void print_summary(FILE *to, const sniff_t *s)
{
    rtu_framer_stats_t fs;
    rtu_pair_stats_t ps;
    rtu_framer_get_stats(s->framer, &fs);
    rtu_pairer_get_stats(s->pairer, &ps);
    fprintf(to, "bytes: %llu, frames: %lu, noise bytes: %llu, capture errors: %lu\n",
            (unsigned long long)s->bytes, s->frames, (unsigned long long)fs.noise_bytes, s->capture_errors);
    fprintf(to, "pairs: %llu requests (%llu retries, %llu broadcasts)", (unsigned long long)ps.requests,
            (unsigned long long)ps.retries, (unsigned long long)ps.broadcasts);
    for (int k = 0; k < RTU_PAIR_KIND_COUNT; k++)
        fprintf(to, ", %s %llu", rtu_pair_kind_name((rtu_pair_kind_t)k), (unsigned long long)ps.by_kind[k]);
    fprintf(to, ", duplicates %llu\n", (unsigned long long)ps.duplicates);
    for (unsigned sl = 1; sl < 256; sl++) {
        const rtu_learn_slave_t *ls = rtu_learn_slave(s->learn, (uint8_t)sl);
        if (!ls)
            continue;
        fprintf(to, "slave %u: %llu requests, %llu answered, %llu unanswered, %llu doubtful, %llu retries, "
                    "slowest answer %.3f ms",
                sl, (unsigned long long)ls->requests, (unsigned long long)ls->answered,
                (unsigned long long)ls->unanswered, (unsigned long long)ls->doubtful,
                (unsigned long long)ls->retries, (double)ls->latency_max_ns / 1e6);
        if (ls->unanswered)
            fprintf(to, ", master timeout %.1f-%.1f ms", (double)ls->timeout_min_ns / 1e6,
                    (double)ls->timeout_max_ns / 1e6);
        fprintf(to, "\n");
        rtu_learn_poll_t p;
        for (unsigned i = 0; rtu_learn_poll(s->learn, i, &p) == 1; i++) {
            if (p.slave != sl)
                continue;
            fprintf(to, "  fc %u", p.function);
            if (p.quantity)
                fprintf(to, " %u..%u (%u)", p.address, p.address + p.quantity - 1u, p.quantity);
            else
                fprintf(to, " at %u", p.address);
            fprintf(to, ": %llu polls, %llu answered", (unsigned long long)p.count,
                    (unsigned long long)p.answered);
            if (p.intervals)
                fprintf(to, ", every %.1f ms (%.1f-%.1f)",
                        (double)(p.last_ns - p.first_ns) / 1e6 / (double)p.intervals,
                        (double)p.interval_min_ns / 1e6, (double)p.interval_max_ns / 1e6);
            fprintf(to, "\n");
        }
    }
    if (rtu_learn_polls_dropped(s->learn))
        fprintf(to, "polls not tracked (over %d): %llu\n", RTU_LEARN_POLLS,
                (unsigned long long)rtu_learn_polls_dropped(s->learn));
    router_report_t rep;
    static char json[65536]; /* one report per run; too big for the stack */
    if (router_report(s->router, &rep) == 0 && router_report_json(&rep, json, sizeof json) > 0)
        fprintf(to, "router: %s\n", json);
}

static int parse_opts(int argc, char **argv, sniff_opts_t *o)
{
    enum { O_PORT = 256, O_BAUD, O_FORMAT, O_JSON, O_CAPTURE, O_SUMMARY, O_TS, O_DURATION, O_FRAMES,
           O_HOLD, O_SILENCE, O_PATH, O_LATE, O_HELP };
    static const struct option opts[] = {
        { "port", required_argument, 0, O_PORT }, { "baud", required_argument, 0, O_BAUD },
        { "format", required_argument, 0, O_FORMAT }, { "json", no_argument, 0, O_JSON },
        { "capture", required_argument, 0, O_CAPTURE }, { "summary", no_argument, 0, O_SUMMARY },
        { "timestamps", required_argument, 0, O_TS }, { "duration", required_argument, 0, O_DURATION },
        { "frames", required_argument, 0, O_FRAMES }, { "hold-ms", required_argument, 0, O_HOLD },
        { "silence-ms", required_argument, 0, O_SILENCE }, { "path", required_argument, 0, O_PATH },
        { "late-factor", required_argument, 0, O_LATE },
        { "help", no_argument, 0, O_HELP }, { 0, 0, 0, 0 },
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case O_PORT: o->port = optarg; break;
        case O_BAUD: {
            unsigned long b = strtoul(optarg, &end, 10);
            if (end == optarg || *end || b < 300 || b > 4000000) {
                fprintf(stderr, "rtugw sniff: --baud %s: 300..4000000\n", optarg);
                return 2;
            }
            o->serial.baud = (unsigned)b;
            break;
        }
        case O_FORMAT:
            if (driver_serial_parse_format(optarg, &o->serial) != 0) {
                fprintf(stderr, "rtugw sniff: --format %s: like 8E1, 8N1, 7E1, 8N2\n", optarg);
                return 2;
            }
            break;
        case O_JSON: o->json = true; break;
        case O_CAPTURE: o->capture = optarg; break;
        case O_SUMMARY: o->summary = true; break;
        case O_TS:
            if (strcmp(optarg, "relative") == 0)
                o->absolute = false;
            else if (strcmp(optarg, "absolute") == 0)
                o->absolute = true;
            else {
                fprintf(stderr, "rtugw sniff: --timestamps %s: relative or absolute\n", optarg);
                return 2;
            }
            break;
        case O_DURATION:
            o->duration = strtod(optarg, &end);
            if (end == optarg || *end || !(o->duration > 0 && o->duration <= 31536000)) {
                fprintf(stderr, "rtugw sniff: --duration %s: seconds above 0\n", optarg);
                return 2;
            }
            break;
        case O_FRAMES:
            o->max_frames = strtoul(optarg, &end, 10);
            if (end == optarg || *end || o->max_frames == 0) {
                fprintf(stderr, "rtugw sniff: --frames %s: a count above 0\n", optarg);
                return 2;
            }
            break;
        case O_HOLD: {
            unsigned long h = strtoul(optarg, &end, 10);
            if (end == optarg || *end || h < 1 || h > 10000) {
                fprintf(stderr, "rtugw sniff: --hold-ms %s: 1..10000\n", optarg);
                return 2;
            }
            o->hold_ms = (unsigned)h;
            break;
        }
        case O_LATE: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 100) {
                fprintf(stderr, "rtugw sniff: --late-factor %s: 1..100\n", optarg);
                return 2;
            }
            o->late_factor = (unsigned)v;
            break;
        }
        case O_SILENCE: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 10000) {
                fprintf(stderr, "rtugw sniff: --silence-ms %s: 1..10000\n", optarg);
                return 2;
            }
            o->silence_ms = (unsigned)v;
            break;
        }
        case O_PATH: {
            rtu_path_t rp;
            if (strcmp(optarg, "auto") == 0)
                o->path = -1;
            else if (rtu_path_parse(optarg, &rp) == 0)
                o->path = (int)rp;
            else {
                fprintf(stderr, "rtugw sniff: --path %s: auto, native, fallback or reference\n", optarg);
                return 2;
            }
            break;
        }
        case 'h':
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || !o->port) {
        if (!o->port)
            fprintf(stderr, "rtugw sniff: --port is required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Read until a signal, the duration, the frame count or a hang-up. */
static int listen_loop(sniff_t *s, driver_t *d, int sigfd)
{
    const sniff_opts_t *o = s->o;
    uint64_t t35 = o->silence_ms ? (uint64_t)o->silence_ms * 1000000ull : driver_serial_t35_ns(d);
    uint64_t end = o->duration > 0 ? s->start_mono + (uint64_t)(o->duration * 1e9) : 0;
    uint8_t buf[512];
    for (;;) {
        uint64_t now = driver_now_ns();
        if ((end && now >= end) || (o->max_frames && s->frames >= o->max_frames))
            return 0;
        /* Wake at t3.5 to close a frame by silence, and at least every 10 ms for the hold. */
        int wait_ms = (int)(t35 / 1000000u) + 1;
        if (wait_ms > 10)
            wait_ms = 10;
        struct pollfd pf[2] = { { .fd = driver_fd(d), .events = POLLIN }, { .fd = sigfd, .events = POLLIN } };
        int n = poll(pf, 2, wait_ms);
        if (n < 0 && errno != EINTR)
            return 1;
        if (n > 0 && pf[1].revents)
            return 0;
        if (n > 0 && pf[0].revents) {
            for (;;) {
                uint64_t t = 0;
                ssize_t r = driver_read(d, buf, sizeof buf, &t);
                if (r == DRIVER_AGAIN)
                    break;
                if (r < 0) {
                    fprintf(stderr, "rtugw sniff: %s: %s\n", o->port,
                            r == DRIVER_HANGUP ? "hung up" : strerror((int)-r));
                    return 1;
                }
                feed(s, buf, (size_t)r, t);
                drain_frames(s);
            }
        }
        now = driver_now_ns();
        rtu_framer_idle(s->framer, now);
        drain_frames(s);
        rtu_pairer_idle(s->pairer, now, noise_of(s));
        drain_events(s);
        fflush(stdout);
    }
}

int cmd_sniff(int argc, char **argv)
{
    sniff_opts_t o = { .hold_ms = 20, .late_factor = 4, .path = -1 };
    driver_serial_defaults(&o.serial);
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    o.serial.path = o.port;
    o.serial.rs485 = DRIVER_RS485_OFF;   /* never drive the line's transmitter */

    sniff_t s = { .o = &o };
    char err[DRIVER_ERRLEN];
    driver_t *d = driver_serial_new(&o.serial, err, sizeof err);
    if (!d) {
        fprintf(stderr, "rtugw sniff: %s\n", err);
        return 2;
    }
    rc = 1;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    rtu_framer_config_t fc = { .baud = o.serial.baud,
                               .char_bits = rtu_char_bits(o.serial.data_bits, o.serial.parity,
                                                          o.serial.stop_bits),
                               .dir = RTU_DIR_SNIFF,
                               .silence_ns = (uint64_t)o.silence_ms * 1000000ull };
    s.framer = rtu_framer_new(&fc);
    s.pairer = rtu_pairer_new((uint64_t)o.hold_ms * 1000000ull);
    if (s.pairer)
        rtu_pairer_set_late_factor(s.pairer, o.late_factor);
    s.learn = rtu_learn_new();
    router_config_t rcfg;
    router_config_default(&rcfg);
    if (sigfd < 0 || !s.framer || !s.pairer || !s.learn || router_new(&rcfg, &s.router) != 0 ||
        !(s.route = router_thread_new(s.router))) {
        fprintf(stderr, "rtugw sniff: out of memory or file descriptors\n");
        goto out;
    }
    if (driver_open(d, err, sizeof err) != 0) {
        fprintf(stderr, "rtugw sniff: %s\n", err);
        goto out;
    }
    if (o.capture && !(s.cap = driver_capture_writer_open(o.capture, err, sizeof err))) {
        fprintf(stderr, "rtugw sniff: %s\n", err);
        goto out;
    }
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    s.start_mono = driver_now_ns();
    s.realtime_offset = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - s.start_mono;

    rc = listen_loop(&s, d, sigfd);
    /* What is still held is settled as the line would have: silence for ever. */
    rtu_framer_idle(s.framer, driver_now_ns() + 10000000000ull);
    drain_frames(&s);
    rtu_pairer_idle(s.pairer, driver_now_ns() + 10000000000ull, noise_of(&s));
    drain_events(&s);
    fflush(stdout);
    if (o.summary)
        print_summary(o.json ? stderr : stdout, &s);
    if (s.cap && driver_capture_writer_close(s.cap) != 0) {
        fprintf(stderr, "rtugw sniff: %s: cannot finish the capture\n", o.capture);
        rc = 1;
    }
    s.cap = NULL;
out:
    driver_capture_writer_close(s.cap);
    driver_free(d);
    router_free(s.router);
    rtu_learn_free(s.learn);
    rtu_pairer_free(s.pairer);
    rtu_framer_free(s.framer);
    if (sigfd >= 0)
        close(sigfd);
    return rc;
}
