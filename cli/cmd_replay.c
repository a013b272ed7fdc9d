/*
 * cli/cmd_replay.c -- `rtugw replay FILE`: decode a capture.
 *
 * Records whose direction the capture knows (Modbus/TCP by port, text logs
 * with a direction column) are frames as they stand. Raw RTU records (pcap
 * USER link types, text without direction) go through the parser's
 * streaming framer in SNIFF mode, stamped with the capture's own times, so
 * merged request+response records are split and raw byte streams are
 * re-framed by length, CRC and the t3.5 gap.
 *
 * Every response is decoded through the online router (replay_decode), so a
 * replay also shows which parser the router would choose per frame size on
 * this machine; its report ends the summary.
 */
#include "cli/cli.h"
#include "drivers/driver.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct replay_opts {
    driver_capture_format_t format;
    bool original;
    double speed;
    double max_gap;
    bool json;
    unsigned baud;
} replay_opts_t;

typedef struct replay_state {
    const replay_opts_t *opt;
    router_t *router;
    router_thread_t *route;
    uint8_t req[RTU_MAX_ADU];
    size_t req_len;            /* 0: no request waiting for its answer */
    uint64_t requests, responses, ok, unpaired;
    uint64_t by_status[RTU_STATUS_COUNT];
    uint64_t by_function[256];
    uint64_t by_slave[256];
    uint64_t first_ts, prev_ts;
    bool have_ts;
} replay_state_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw replay FILE [--format auto|pcap|pcapng|text]\n"
            "                    [--timing asap|original | --as-fast-as-possible | --original-timing]\n"
            "                    [--speed X] [--max-gap S] [--baud B] [--json]\n"
            "\n"
            "Decodes the Modbus RTU responses in a capture: pcap or pcapng (link types\n"
            "147-162 USER0-15 and 250 RTAC serial as raw RTU; Ethernet, Linux cooked and\n"
            "raw IP with TCP port 502 as Modbus/TCP or RTU over TCP), or a text log with one\n"
            "frame a line: [TIMESTAMP] [DIRECTION] HEX. The format is detected from the\n"
            "file unless --format says.\n"
            "\n"
            "  --timing T        asap (default) or original (the capture's own spacing)\n"
            "  --speed X         with original timing, play X times faster (default 1)\n"
            "  --max-gap S       with original timing, wait at most S seconds (default 5)\n"
            "  --baud B          line speed for re-framing by t3.5 silence (default 19200;\n"
            "                    0: by length and CRC only)\n"
            "  --json            one JSON line per response: the fields `rtugw decode` prints,\n"
            "                    plus ts (seconds) and request (hex of its request, or null);\n"
            "                    the summary then goes to standard error\n"
            "\n"
            "Exit: 0 read to the end, 1 the capture is damaged (what was read is decoded and\n"
            "where it stopped is reported), 2 usage error or not a capture.\n");
}

/* The one decode call: through the router, whose output equals reference. */
static rtu_status_t replay_decode(replay_state_t *st, const uint8_t *adu, size_t len,
                                  rtu_envelope_t *env, const char **path)
{
    *path = "auto";
    return router_decode(st->route, adu, len, env);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}

static void pace(replay_state_t *st, uint64_t ts)
{
    const replay_opts_t *o = st->opt;
    if (!o->original) {
        if (ts > st->prev_ts)
            st->prev_ts = ts;
        return;
    }
    if (st->have_ts && ts > st->prev_ts) {
        double gap = (double)(ts - st->prev_ts) / 1e9 / o->speed;
        if (gap > o->max_gap)
            gap = o->max_gap;
        struct timespec t = { (time_t)gap, (long)((gap - (double)(time_t)gap) * 1e9) };
        while (nanosleep(&t, &t) != 0)
            ;
    }
    if (!st->have_ts || ts > st->prev_ts)
        st->prev_ts = ts;
}

static void on_frame(replay_state_t *st, const uint8_t *adu, size_t len, bool is_request,
                     uint64_t ts)
{
    if (!st->have_ts) {
        st->first_ts = ts;
        st->prev_ts = ts;
        st->have_ts = true;
    }
    pace(st, ts);
    if (is_request) {
        st->requests++;
        if (st->req_len)
            st->unpaired++;
        size_t n = len < sizeof st->req ? len : sizeof st->req;
        memcpy(st->req, adu, n);
        st->req_len = n;
        return;
    }
    st->responses++;
    rtu_envelope_t env;
    const char *path;
    rtu_status_t s = replay_decode(st, adu, len, &env, &path);
    st->by_status[s < RTU_STATUS_COUNT ? s : RTU_ERR_FUNCTION]++;
    if (s == RTU_OK) {
        st->ok++;
        st->by_function[env.function]++;
        st->by_slave[env.slave]++;
    }
    if (st->opt->json) {
        char json[4096];
        int n = rtu_envelope_json(&env, path, json, sizeof json);
        if (n <= 0 || (size_t)n >= sizeof json)
            n = snprintf(json, sizeof json, "{\"ok\":false,\"error\":\"internal\"}");
        json[n - 1] = 0; /* drop the closing brace */
        char reqhex[2 * RTU_MAX_ADU + 1];
        if (st->req_len)
            hex(st->req, st->req_len, reqhex);
        printf("%s,\"ts\":%.6f,\"request\":%s%s%s}\n", json, (double)ts / 1e9,
               st->req_len ? "\"" : "", st->req_len ? reqhex : "null", st->req_len ? "\"" : "");
    }
    st->req_len = 0;
}

static void drain(replay_state_t *st, rtu_framer_t *fr)
{
    rtu_frame_t f;
    while (rtu_framer_next(fr, &f) == 1)
        on_frame(st, f.adu, f.len, f.is_request, f.t_last_ns);
}

static void summary(FILE *to, const replay_state_t *st, const rtu_framer_stats_t *fs,
                    const driver_capture_t *cap, unsigned long records)
{
    fprintf(to, "records: %lu (%lu skipped as not Modbus), format %s\n", records,
            driver_capture_skipped(cap), driver_capture_format_name(driver_capture_format(cap)));
    fprintf(to, "frames: %llu requests, %llu responses (%llu ok), %llu requests unanswered\n",
            (unsigned long long)st->requests, (unsigned long long)st->responses,
            (unsigned long long)st->ok, (unsigned long long)st->unpaired);
    fprintf(to, "framer: %llu frames, %llu noise bytes, %llu split by silence, %llu overflows\n",
            (unsigned long long)fs->frames, (unsigned long long)fs->noise_bytes,
            (unsigned long long)fs->silence_splits, (unsigned long long)fs->overflows);
    fprintf(to, "errors:");
    bool any = false;
    for (int i = 1; i < RTU_STATUS_COUNT; i++)
        if (st->by_status[i]) {
            fprintf(to, " %s %llu", rtu_status_name((rtu_status_t)i),
                    (unsigned long long)st->by_status[i]);
            any = true;
        }
    fprintf(to, "%s\nfunctions:", any ? "" : " none");
    for (int i = 0; i < 256; i++)
        if (st->by_function[i])
            fprintf(to, " %d:%llu", i, (unsigned long long)st->by_function[i]);
    fprintf(to, "\nslaves:");
    for (int i = 0; i < 256; i++)
        if (st->by_slave[i])
            fprintf(to, " %d:%llu", i, (unsigned long long)st->by_slave[i]);
    if (st->have_ts)
        fprintf(to, "\nspan: %.6f s", (double)(st->prev_ts - st->first_ts) / 1e9);
    router_report_t rep;
    static char json[65536];   /* one report per run; too big for the stack */
    if (router_report(st->router, &rep) == 0 && router_report_json(&rep, json, sizeof json) > 0)
        fprintf(to, "\nrouter: %s\n", json);
    else
        fprintf(to, "\n");
}

int cmd_replay(int argc, char **argv)
{
    enum { O_FORMAT = 256, O_TIMING, O_ASAP, O_ORIG, O_SPEED, O_GAP, O_JSON, O_BAUD, O_HELP };
    static const struct option opts[] = {
        { "format", required_argument, 0, O_FORMAT }, { "timing", required_argument, 0, O_TIMING },
        { "as-fast-as-possible", no_argument, 0, O_ASAP },
        { "original-timing", no_argument, 0, O_ORIG }, { "speed", required_argument, 0, O_SPEED },
        { "max-gap", required_argument, 0, O_GAP }, { "json", no_argument, 0, O_JSON },
        { "baud", required_argument, 0, O_BAUD }, { "help", no_argument, 0, O_HELP },
        { 0, 0, 0, 0 },
    };
    replay_opts_t o = { .format = DRIVER_CAPTURE_AUTO, .speed = 1, .max_gap = 5, .baud = 19200 };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case O_FORMAT:
            if (driver_capture_parse_format(optarg, &o.format) != 0) {
                fprintf(stderr, "rtugw replay: --format %s: use auto, pcap, pcapng or text\n", optarg);
                return 2;
            }
            break;
        case O_TIMING:
            if (strcmp(optarg, "asap") == 0)
                o.original = false;
            else if (strcmp(optarg, "original") == 0)
                o.original = true;
            else {
                fprintf(stderr, "rtugw replay: --timing %s: use asap or original\n", optarg);
                return 2;
            }
            break;
        case O_ASAP: o.original = false; break;
        case O_ORIG: o.original = true; break;
        case O_SPEED:
            o.speed = strtod(optarg, &end);
            if (end == optarg || *end || !(o.speed > 0 && o.speed <= 1e6)) {
                fprintf(stderr, "rtugw replay: --speed %s: a number above 0\n", optarg);
                return 2;
            }
            break;
        case O_GAP:
            o.max_gap = strtod(optarg, &end);
            if (end == optarg || *end || !(o.max_gap >= 0 && o.max_gap <= 3600)) {
                fprintf(stderr, "rtugw replay: --max-gap %s: seconds, 0..3600\n", optarg);
                return 2;
            }
            break;
        case O_JSON: o.json = true; break;
        case O_BAUD: {
            unsigned long b = strtoul(optarg, &end, 10);
            if (end == optarg || *end || b > 4000000) {
                fprintf(stderr, "rtugw replay: --baud %s: 0..4000000\n", optarg);
                return 2;
            }
            o.baud = (unsigned)b;
            break;
        }
        case 'h':
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *file = argv[optind];
    char err[DRIVER_ERRLEN];
    driver_capture_t *cap = driver_capture_open(file, o.format, err, sizeof err);
    if (!cap) {
        fprintf(stderr, "rtugw replay: %s\n", err);
        return 2;
    }
    rtu_framer_config_t fc = { .baud = o.baud, .char_bits = 11, .dir = RTU_DIR_SNIFF };
    rtu_framer_t *fr = rtu_framer_new(&fc);
    replay_state_t *st = calloc(1, sizeof *st);
    if (!fr || !st) {
        fprintf(stderr, "rtugw replay: out of memory\n");
        rtu_framer_free(fr);
        free(st);
        driver_capture_close(cap);
        return 1;
    }
    st->opt = &o;
    router_config_t rcfg;
    router_config_default(&rcfg);
    if (router_new(&rcfg, &st->router) != 0 || !(st->route = router_thread_new(st->router))) {
        fprintf(stderr, "rtugw replay: cannot create the router\n");
        router_free(st->router);
        free(st);
        rtu_framer_free(fr);
        driver_capture_close(cap);
        return 1;
    }
    driver_record_t *rec = malloc(sizeof *rec);
    int rc = rec ? 1 : -ENOMEM;
    unsigned long records = 0;
    uint64_t last_ts = 0;
    while (rec && (rc = driver_capture_next(cap, rec, err, sizeof err)) == 1) {
        records++;
        last_ts = rec->ts_ns;
        if (rec->direction >= 0) {
            /* The capture knows the direction: a whole frame. Flush the framer
             * first so frames stay in order. */
            rtu_framer_idle(fr, rec->ts_ns + 10000000000ull);
            drain(st, fr);
            on_frame(st, rec->data, rec->len, rec->direction == 1, rec->ts_ns);
        } else {
            rtu_framer_feed(fr, rec->data, rec->len, rec->ts_ns);
            drain(st, fr);
        }
    }
    rtu_framer_idle(fr, last_ts + 10000000000ull);
    drain(st, fr);
    fflush(stdout);
    rtu_framer_stats_t fs;
    rtu_framer_get_stats(fr, &fs);
    summary(o.json ? stderr : stdout, st, &fs, cap, records);
    int exit_code = 0;
    if (rc < 0) {
        fprintf(stderr, "rtugw replay: %s; stopped there after %lu records\n",
                rc == -ENOMEM ? "out of memory" : err, records);
        exit_code = 1;
    }
    free(rec);
    router_free(st->router);
    free(st);
    rtu_framer_free(fr);
    driver_capture_close(cap);
    return exit_code;
}
