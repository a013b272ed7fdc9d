/*
 * cli/cmd_decode.c -- `rtugw decode`: hex RTU frames to JSON lines.
 *
 * Invalid frames are data (they print with "ok": false and exit 0); only
 * input that is not hex at all is a usage error (exit 2), reported with the
 * line or argument and the column where it stops being hex.
 */
#include "cli/cli.h"
#include "parser/rtu.h"
#include "routing/router.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longer input than this is certainly not one frame; it still decodes, as "long". */
#define DECODE_MAX_BYTES 1024
#define DECODE_MAX_LINE 8192

typedef struct decode_options {
    const char *path_name;   /* "reference" | "fallback" | "native" | "auto" */
    rtu_decode_fn decode;
    router_thread_t *router; /* --path auto: decode through the router */
    int slave;               /* -1: any */
    int request;
} decode_options_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw decode [--path reference|fallback|native|auto] [--slave N] [--request]\n"
            "                    [--stats] [HEX ...]\n"
            "\n"
            "Decodes Modbus RTU frames given as hex (bytes may be separated by spaces, colons\n"
            "or dashes) from the arguments, or from standard input one frame a line, and\n"
            "prints one JSON object a line: ok, slave, function and the decoded fields, or\n"
            "ok false with an error name (short, long, crc, length, bytecount, function,\n"
            "value, slave).\n"
            "\n"
            "  --path P     decoder: reference, fallback, native, or auto (default: the router\n"
            "               picks native or fallback per frame size, learning as it goes;\n"
            "               the output is the same on every path)\n"
            "  --slave N    expect responses from slave N (0-247); others print error \"slave\"\n"
            "  --request    decode requests (master to slave) instead of responses\n"
            "  --stats      with --path auto: at the end, print the router's report (per frame-size\n"
            "               bucket: pulls per arm, cost per arm, chosen arm, verdict) as one JSON\n"
            "               line on standard error; see docs/router.md\n"
            "\n"
            "Exit: 0 when every line was hex (invalid frames included), 2 otherwise.\n");
}

static void print_frame(const decode_options_t *opt, const uint8_t *adu, size_t len)
{
    char json[4096];
    int n;

    if (opt->request) {
        rtu_request_t req;
        rtu_status_t st = rtu_request_decode(adu, len, &req);
        n = rtu_request_json(&req, st, json, sizeof json);
    } else {
        rtu_envelope_t env;
        if (opt->router)
            router_decode(opt->router, adu, len, &env);
        else
            opt->decode(adu, len, &env);
        if (opt->slave >= 0 && env.status == RTU_OK && env.slave != opt->slave)
            n = snprintf(json, sizeof json, "{\"ok\":false,\"error\":\"slave\",\"path\":\"%s\"}",
                         opt->path_name);
        else
            n = rtu_envelope_json(&env, opt->path_name, json, sizeof json);
    }
    if (n < 0)
        snprintf(json, sizeof json, "{\"ok\":false,\"error\":\"internal\"}");
    puts(json);
}

/* Returns 0 when `text` was hex, -1 (after a message) when it was not. */
static int decode_text(const decode_options_t *opt, const char *text, const char *where,
                       unsigned long index)
{
    uint8_t adu[DECODE_MAX_BYTES];
    size_t col = 0;
    int n = rtu_hex_parse(text, adu, sizeof adu, &col);

    if (n == -ENOSPC) {
        /* Hex, but too long to be a frame: report it the way the decoder would. */
        print_frame(opt, adu, RTU_MAX_ADU + 1);
        return 0;
    }
    if (n < 0) {
        if (col)
            fprintf(stderr, "rtugw decode: %s %lu, column %zu: not hex: '%c'\n", where, index,
                    col, text[col - 1]);
        else
            fprintf(stderr, "rtugw decode: %s %lu: odd number of hex digits\n", where, index);
        return -1;
    }
    print_frame(opt, adu, (size_t)n);
    return 0;
}

static int decode_stdin(const decode_options_t *opt)
{
    char line[DECODE_MAX_LINE];
    unsigned long lineno = 0;
    int bad = 0;

    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            fprintf(stderr, "rtugw decode: line %lu: longer than %d characters\n", lineno,
                    DECODE_MAX_LINE - 2);
            int ch;
            while ((ch = getchar()) != EOF && ch != '\n')
                ;
            bad = 1;
            continue;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = 0;
        if (len == 0 || line[0] == '#')
            continue;
        if (decode_text(opt, line, "line", lineno) != 0)
            bad = 1;
        fflush(stdout);
    }
    return bad ? 2 : 0;
}

int cmd_decode(int argc, char **argv)
{
    decode_options_t opt = { .path_name = "auto", .slave = -1 };
    static const struct option longopts[] = {
        { "path", required_argument, NULL, 'p' },
        { "slave", required_argument, NULL, 's' },
        { "request", no_argument, NULL, 'r' },
        { "stats", no_argument, NULL, 'S' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c, stats = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            opt.path_name = optarg;
            break;
        case 's': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == 0 || *end || v < 0 || v > 247) {
                fprintf(stderr, "rtugw decode: --slave '%s': expected 0..247\n", optarg);
                return 2;
            }
            opt.slave = (int)v;
            break;
        }
        case 'r':
            opt.request = 1;
            break;
        case 'S':
            stats = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }

    rtu_path_t path;
    router_t *router = NULL;
    if (strcmp(opt.path_name, "auto") == 0) {
        router_config_t rcfg;
        router_config_default(&rcfg);
        if (router_new(&rcfg, &router) != 0 || !(opt.router = router_thread_new(router))) {
            fprintf(stderr, "rtugw decode: cannot create the router\n");
            router_free(router);
            return 1;
        }
    } else if (rtu_path_parse(opt.path_name, &path) == 0) {
        opt.decode = rtu_decoder(path);
    } else {
        fprintf(stderr, "rtugw decode: --path '%s': expected reference, fallback, native or auto\n",
                opt.path_name);
        return 2;
    }

    int rc = 0;
    if (optind == argc) {
        rc = decode_stdin(&opt);
    } else {
        for (int i = optind; i < argc; i++)
            if (decode_text(&opt, argv[i], "argument", (unsigned long)(i - optind + 1)) != 0)
                rc = 2;
    }
    if (stats && router) {
        router_report_t rep;
        static char json[65536];
        router_report(router, &rep);
        if (router_report_json(&rep, json, sizeof json) > 0)
            fprintf(stderr, "%s\n", json);
    } else if (stats) {
        fprintf(stderr, "rtugw decode: --stats needs --path auto (no router on --path %s)\n",
                opt.path_name);
    }
    router_free(router);
    return rc;
}
