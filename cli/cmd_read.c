/*
 * cli/cmd_read.c -- `rtugw read`: a commissioning read, like mbpoll but typed.
 *
 * It reads registers or bits straight from a serial port (Modbus RTU) or
 * through a gateway (Modbus TCP), both with libmodbus, and decodes them with
 * tags/ exactly as the daemon would: type, word and byte order, scale and
 * offset. `--all-orders` prints a value in every order side by side, which
 * is how one finds a device's order on site: the one that reads 21.5 degC
 * rather than 4.6e-41.
 */
#include "cli/cli.h"
#include "json/json.h"
#include "tags/tags.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <modbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_MAX_TARGETS 64

typedef struct read_options {
    const char *port, *tcp, *type, *order;
    char host[256];
    const char *service;           /* --tcp's port */
    unsigned baud, data_bits, stop_bits, slave, unit, interval_ms, count, timeout_ms;
    char parity;
    double scale, offset;
    int all_orders, json;
} read_options_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rtugw read --port PATH [--baud B] [--parity none|even|odd] [--data-bits 7|8]\n"
            "                  [--stop-bits 1|2] --slave N  [options] TABLE:ADDRESS ...\n"
            "       rtugw read --tcp HOST:PORT [--unit N]  [options] TABLE:ADDRESS ...\n"
            "\n"
            "Reads registers or bits and prints them decoded as a type, in a word and byte\n"
            "order, scaled: straight from a serial port (Modbus RTU) or through a gateway\n"
            "(Modbus TCP). TABLE is holding, input, coil or discrete; ADDRESS is 0-based,\n"
            "decimal or 0x hex; ADDRESS.BIT is one bit (0..15) of a register, read as bool.\n"
            "\n"
            "  --type T         of registers: int16, uint16 (default), int32, uint32, int64,\n"
            "                   uint64, float16, float32, float64, string:N, raw:N, bcd16,\n"
            "                   bcd32, int8h, int8l, uint8h, uint8l (high or low byte),\n"
            "                   fixed16:D, ufixed16:D, fixed32:D, ufixed32:D (D digits after\n"
            "                   the point); coils, discrete inputs and bits are bool\n"
            "  --order O        ABCD (default), CDAB, BADC, DCBA (64-bit: their 8-letter names\n"
            "                   or these, applied by meaning); 16-bit types AB, BA (a word\n"
            "                   swap is refused: one register has no word order); strings\n"
            "                   AB, BA, or CDAB/DCBA for registers swapped in pairs\n"
            "  --scale X, --offset X   value = raw * X + offset (default 1 and 0)\n"
            "  --all-orders     print the value in every order side by side\n"
            "  --interval MS    poll every MS ms (default 1000 with --count)\n"
            "  --count N        polls (default 1; 0: until interrupted)\n"
            "  --timeout MS     response timeout (default 1000)\n"
            "  --json           one JSON object a value\n"
            "  serial: --baud (default 19200), --parity (default even), --data-bits 8,\n"
            "          --stop-bits 1, --slave 1..247 (required)\n"
            "  tcp:    --unit 0..255 (default 1)\n"
            "\n"
            "Example: rtugw read --port /dev/ttyUSB0 --baud 9600 --slave 3 --type float32 \\\n"
            "           --order CDAB holding:100\n"
            "Words that are no value of the type (a BCD digit above 9), and a float that is\n"
            "NaN or infinite, print bad_data (JSON: null, quality bad), as /tags shows them.\n"
            "Exit: 0 when every read answered with a value, 1 when one failed (timeout,\n"
            "exception, cannot open, bad_data), 2 on a usage error.\n");
}

static int parse_unsigned(const char *opt, const char *text, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || errno || v < min || v > max) {
        fprintf(stderr, "rtugw read: %s '%s': expected %u..%u\n", opt, text, min, max);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

static int parse_double(const char *opt, const char *text, double *out)
{
    char *end;
    *out = strtod(text, &end);
    if (end == text || *end || !isfinite(*out)) {
        fprintf(stderr, "rtugw read: %s '%s': expected a finite number\n", opt, text);
        return -1;
    }
    return 0;
}

static int parse_parity(const char *text, char *out)
{
    static const char *const names[][2] = { { "none", "N" }, { "even", "E" }, { "odd", "O" } };
    for (int i = 0; i < 3; i++)
        if (strcasecmp(text, names[i][0]) == 0 || strcasecmp(text, names[i][1]) == 0) {
            *out = names[i][1][0];
            return 0;
        }
    fprintf(stderr, "rtugw read: --parity '%s': expected none, even or odd\n", text);
    return -1;
}

/* "holding:100", "holding:100.3" into a validated tag of t. */
static int add_target(tags_table_t *t, const read_options_t *o, const char *arg)
{
    tags_tag_t g = { .scale = o->scale, .offset = o->offset, .interval_ms = 1000 };
    char table[16], msg[256];
    unsigned address, count = 1, point = 0;
    int bit;
    const char *colon = strchr(arg, ':');

    if (!colon || (size_t)(colon - arg) >= sizeof table) {
        fprintf(stderr, "rtugw read: '%s': expected TABLE:ADDRESS, e.g. holding:100\n", arg);
        return -1;
    }
    memcpy(table, arg, (size_t)(colon - arg));
    table[colon - arg] = '\0';
    if (tags_parse_area(table, &g.area, msg, sizeof msg) < 0 ||
        tags_parse_address(colon + 1, &address, &bit, msg, sizeof msg) < 0) {
        fprintf(stderr, "rtugw read: '%s': %s\n", arg, msg);
        return -1;
    }
    bool bits = g.area == TAGS_AREA_COIL || g.area == TAGS_AREA_DISCRETE;
    /* --type is for registers: a coil, a discrete input or a bit is a bool */
    const char *type = bits || bit >= 0 ? "bool" : o->type ? o->type : "uint16";
    if (tags_parse_type_point(type, &g.type, &count, &point, msg, sizeof msg) < 0 ||
        (o->order && tags_parse_order(o->order, &g.order, msg, sizeof msg) < 0)) {
        fprintf(stderr, "rtugw read: %s\n", msg);
        return -1;
    }
    /* a one-register number has no word order: CDAB on a uint16 would read
     * as AB, and the user would believe the word swap was applied */
    bool one_word = count == 1 && !bits && bit < 0 && g.type != TAGS_STRING && g.type != TAGS_RAW &&
                    g.type != TAGS_BOOL;
    if (o->order && one_word && (g.order & TAGS_ORDER_WORDSWAP)) {
        fprintf(stderr, "rtugw read: --order %s: %s is one register, which has no word order "
                        "(AB or BA, its byte order)\n", o->order, tags_type_name(g.type));
        return -1;
    }
    g.address = (uint16_t)address;
    g.in_register = bit >= 0;
    g.bit = bit >= 0 ? (uint8_t)bit : 0;
    g.count = (uint16_t)count;
    g.point = (uint8_t)point;
    snprintf(g.name, sizeof g.name, "%s", arg);
    if (tags_table_add(t, &g, "target", msg, sizeof msg) < 0) {
        fprintf(stderr, "rtugw read: '%s': %s\n", arg, msg);
        return -1;
    }
    return 0;
}

static modbus_t *open_link(const read_options_t *o)
{
    modbus_t *ctx;
    if (o->tcp)
        ctx = modbus_new_tcp_pi(o->host, o->service);
    else
        ctx = modbus_new_rtu(o->port, (int)o->baud, o->parity, (int)o->data_bits, (int)o->stop_bits);
    if (!ctx) {
        fprintf(stderr, "rtugw read: %s: %s\n", o->tcp ? o->tcp : o->port, modbus_strerror(errno));
        return NULL;
    }
    modbus_set_slave(ctx, (int)(o->tcp ? o->unit : o->slave));
    modbus_set_response_timeout(ctx, o->timeout_ms / 1000, (o->timeout_ms % 1000) * 1000);
    if (modbus_connect(ctx) != 0) {
        fprintf(stderr, "rtugw read: cannot open %s: %s\n", o->tcp ? o->tcp : o->port, modbus_strerror(errno));
        modbus_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The tag's words (a bit as 0/1) from the device. */
static int read_words(modbus_t *ctx, const tags_tag_t *g, uint16_t *words)
{
    uint8_t bit = 0;
    int rc;
    switch (g->area) {
    case TAGS_AREA_COIL: rc = modbus_read_bits(ctx, g->address, 1, &bit); words[0] = bit; break;
    case TAGS_AREA_DISCRETE: rc = modbus_read_input_bits(ctx, g->address, 1, &bit); words[0] = bit; break;
    case TAGS_AREA_HOLDING: rc = modbus_read_registers(ctx, g->address, g->count, words); break;
    default: rc = modbus_read_input_registers(ctx, g->address, g->count, words); break;
    }
    return rc < 0 ? -1 : 0;
}

/* A decoded value as text; JSON wants strings quoted. Words that are no
 * value of the type (a BCD digit above 9) decode as the daemon decodes
 * them, quality bad, reason bad_data; a float that is NaN or an infinity
 * is shown as /tags shows it, bad_data too (JSON has no token for it):
 * "bad_data", null in JSON. Returns NULL for a value, else why it is none
 * ("a BCD digit above 9", "nan", "inf", "-inf"). */
static const char *value_text(const tags_tag_t *g, const uint16_t *words, bool json, char *out, size_t cap)
{
    tags_value_t v = { .quality = TAGS_GOOD };
    char text[6 * TAGS_MAX_REGISTERS + 8];
    tags_decode(g, words, &v);
    const char *why = v.quality == TAGS_BAD ? "a BCD digit above 9" : tags_nonfinite(g, &v);
    if (why) {
        snprintf(out, cap, json ? "null" : "bad_data");
        return why;
    }
    tags_format(g, &v, text, sizeof text);
    if (json && (g->type == TAGS_STRING || g->type == TAGS_RAW))
        json_quote(out, cap, text);
    else
        snprintf(out, cap, "%s", text);
    return NULL;
}

/* The orders worth showing for this type: every one, both byte orders, or
 * none (an 8-bit type names its byte; bool and raw have no order). A string
 * of two registers or more takes the word swap too. */
static unsigned orders_of(const tags_tag_t *g)
{
    if (g->type == TAGS_BOOL || g->type == TAGS_RAW || g->type == TAGS_INT8H || g->type == TAGS_INT8L ||
        g->type == TAGS_UINT8H || g->type == TAGS_UINT8L)
        return 1;
    return g->count == 1 ? 2 : 4;
}

/* Prints one target's value (or its values side by side). Returns 0, or 1
 * when the words are no value of the type: in the one order asked for, or,
 * with --all-orders, in any order (then each such column says bad_data). */
static int print_value(const tags_tag_t *g, const uint16_t *words, const read_options_t *o)
{
    static const tags_order_t orders[4] = { TAGS_ORDER_ABCD, TAGS_ORDER_CDAB, TAGS_ORDER_BADC, TAGS_ORDER_DCBA };
    static const tags_order_t bytes[2] = { TAGS_ORDER_ABCD, TAGS_ORDER_BADC };
    char text[JSON_QUOTED_MAX(2 * TAGS_MAX_REGISTERS + 1)];
    bool all = o->all_orders && orders_of(g) > 1;
    unsigned n = all ? orders_of(g) : 1, good = 0;
    bool ok[4] = { false, false, false, false };
    const char *why = NULL;
    const char *names[4] = { "", "", "", "" };

    printf(o->json ? "{\"target\":\"%s\",\"type\":\"%s\"" : "%s %s", g->name, tags_type_name(g->type));
    if (g->type == TAGS_STRING || g->type == TAGS_RAW)
        printf(o->json ? ",\"registers\":%u" : ":%u", g->count);
    if (o->json && all)
        printf(",\"values\":{");
    for (unsigned k = 0; k < n; k++) {
        tags_tag_t one = *g;
        if (all)
            one.order = n == 2 ? bytes[k] : orders[k];
        const char *bad = value_text(&one, words, o->json, text, sizeof text);
        ok[k] = !bad;
        good += ok[k];
        why = bad ? bad : why;
        const char *order = names[k] = tags_order_name(one.order, one.type);
        if (o->json && all)
            printf("%s\"%s\":%s", k ? "," : "", order, text);
        else if (o->json)
            printf(",\"order\":\"%s\",\"value\":%s", order, text);
        else if (all)
            printf("  %s=%s", order, text);
        else
            printf("%s%s %s", order[0] ? " " : "", order, text);
    }
    if (o->json && all) {
        printf("},\"quality\":{");
        for (unsigned k = 0; k < n; k++)
            printf("%s\"%s\":\"%s\"", k ? "," : "", names[k], ok[k] ? "good" : "bad_data");
        printf("}");
    } else if (o->json) {
        if (ok[0])
            printf(",\"quality\":\"good\"");
        else
            printf(",\"quality\":\"bad\",\"reason\":\"bad_data\",\"why\":\"%s\"", why);
    }
    printf(o->json ? (all ? ",\"words\":[" : ",\"words\":[") : "  [");
    for (unsigned i = 0; i < g->count; i++)
        printf(o->json ? "%s%u" : "%s%04x", i ? (o->json ? "," : " ") : "", words[i]);
    printf(o->json ? "]}\n" : "]\n");
    fflush(stdout);
    if (good)
        return 0;
    /* the error names the words, as the daemon's bad_data would */
    char w[6 * TAGS_MAX_REGISTERS + 1] = "";
    for (unsigned i = 0; i < g->count && i < TAGS_MAX_REGISTERS; i++)
        snprintf(w + strlen(w), sizeof w - strlen(w), "%s%04x", i ? " " : "", words[i]);
    fprintf(stderr, "rtugw read: %s: bad_data: word%s %s %s no %s value%s (%s)\n", g->name,
            g->count > 1 ? "s" : "", w, g->count > 1 ? "are" : "is", tags_type_name(g->type),
            all ? " in any order" : "", why);
    return 1;
}

/* Why a read failed, in the words of the one who commissions: a silent
 * slave is named, and an address that looks like a Modicon reference
 * (40101) is shown as the TABLE:ADDRESS it likely meant. */
static void read_failed(const tags_tag_t *g, const read_options_t *o, int err)
{
    if (err == ETIMEDOUT) {
        if (o->tcp)
            fprintf(stderr, "rtugw read: %s: no answer from unit %u through %s in %u ms (the gateway's "
                            "slave is silent, or no such unit)\n", g->name, o->unit, o->tcp, o->timeout_ms);
        else
            fprintf(stderr, "rtugw read: %s: no answer from slave %u in %u ms (is it slave %u, at %u baud, "
                            "parity %c?)\n", g->name, o->slave, o->timeout_ms, o->slave, o->baud, o->parity);
        return;
    }
    fprintf(stderr, "rtugw read: %s: %s\n", g->name, modbus_strerror(err));
    const char *at = strchr(g->name, ':');
    tags_area_t area;
    unsigned address;
    int bit;
    char msg[128], table[24];
    if (err != EMBXILADD || !at || strspn(at + 1, "0123456789") < 5 ||
        tags_parse_modicon(at + 1, &area, &address, &bit, msg, sizeof msg) != 0)
        return;
    static const char *const what[] = { "coil", "discrete input", "holding register", "input register" };
    snprintf(table, sizeof table, bit >= 0 ? "%u.%d" : "%u", address, bit);
    fprintf(stderr, "rtugw read: hint: %s looks like a Modicon reference: %s %s is `%s:%s`\n", at + 1,
            what[area], table, tags_area_name(area), table);
}

static int poll_all(modbus_t *ctx, const tags_table_t *t, const read_options_t *o)
{
    int failed = 0;
    uint16_t words[TAGS_MAX_REGISTERS];
    for (size_t i = 0; i < tags_table_count(t); i++) {
        const tags_tag_t *g = tags_table_tag(t, i);
        if (read_words(ctx, g, words) != 0) {
            read_failed(g, o, errno);
            failed = 1;
            continue;
        }
        failed |= print_value(g, words, o);
    }
    return failed;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* HOST:PORT (the last colon: the host may be an IPv6 address without brackets). */
static int parse_tcp(const char *text, read_options_t *o)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || (size_t)(colon - text) >= sizeof o->host || !colon[1]) {
        fprintf(stderr, "rtugw read: --tcp '%s': expected HOST:PORT\n", text);
        return -1;
    }
    memcpy(o->host, text, (size_t)(colon - text));
    o->host[colon - text] = '\0';
    o->service = colon + 1;
    o->tcp = text;
    return 0;
}

static int parse_options(int argc, char **argv, read_options_t *o)
{
    enum { O_PORT = 256, O_BAUD, O_PARITY, O_DATA, O_STOP, O_SLAVE, O_TCP, O_UNIT, O_TYPE, O_ORDER,
           O_SCALE, O_OFFSET, O_ALL, O_INTERVAL, O_COUNT, O_TIMEOUT, O_JSON, O_HELP };
    static const struct option longopts[] = {
        { "port", 1, 0, O_PORT }, { "baud", 1, 0, O_BAUD }, { "parity", 1, 0, O_PARITY },
        { "data-bits", 1, 0, O_DATA }, { "stop-bits", 1, 0, O_STOP }, { "slave", 1, 0, O_SLAVE },
        { "tcp", 1, 0, O_TCP }, { "unit", 1, 0, O_UNIT }, { "type", 1, 0, O_TYPE }, { "order", 1, 0, O_ORDER },
        { "scale", 1, 0, O_SCALE }, { "offset", 1, 0, O_OFFSET }, { "all-orders", 0, 0, O_ALL },
        { "interval", 1, 0, O_INTERVAL }, { "count", 1, 0, O_COUNT }, { "timeout", 1, 0, O_TIMEOUT },
        { "json", 0, 0, O_JSON }, { "help", 0, 0, O_HELP }, { 0, 0, 0, 0 },
    };
    int c, bad = 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_PORT: o->port = optarg; break;
        case O_BAUD: bad = parse_unsigned("--baud", optarg, 300, 4000000, &o->baud); break;
        case O_PARITY: bad = parse_parity(optarg, &o->parity); break;
        case O_DATA: bad = parse_unsigned("--data-bits", optarg, 7, 8, &o->data_bits); break;
        case O_STOP: bad = parse_unsigned("--stop-bits", optarg, 1, 2, &o->stop_bits); break;
        case O_SLAVE: bad = parse_unsigned("--slave", optarg, 1, 247, &o->slave); break;
        case O_TCP: bad = parse_tcp(optarg, o); break;
        case O_UNIT: bad = parse_unsigned("--unit", optarg, 0, 255, &o->unit); break;
        case O_TYPE: o->type = optarg; break;
        case O_ORDER: o->order = optarg; break;
        case O_SCALE: bad = parse_double("--scale", optarg, &o->scale); break;
        case O_OFFSET: bad = parse_double("--offset", optarg, &o->offset); break;
        case O_ALL: o->all_orders = 1; break;
        case O_INTERVAL: bad = parse_unsigned("--interval", optarg, 1, 86400000, &o->interval_ms); break;
        case O_COUNT: bad = parse_unsigned("--count", optarg, 0, 1000000000, &o->count); break;
        case O_TIMEOUT: bad = parse_unsigned("--timeout", optarg, 1, 60000, &o->timeout_ms); break;
        case O_JSON: o->json = 1; break;
        case 'h': case O_HELP: usage(stdout); return 1;
        default: bad = 1; break;
        }
    }
    if (bad)
        return -1;
    const char *why = !o->port == !o->tcp ? "give one of --port PATH and --tcp HOST:PORT"
                      : o->port && !o->slave ? "--slave N is required with --port"
                      : optind == argc ? "give at least one TABLE:ADDRESS"
                      : argc - optind > READ_MAX_TARGETS ? "at most 64 addresses" : NULL;
    if (why) {
        fprintf(stderr, "rtugw read: %s (rtugw read --help)\n", why);
        return -1;
    }
    return 0;
}

int cmd_read(int argc, char **argv)
{
    read_options_t o = { .baud = 19200, .parity = 'E', .data_bits = 8, .stop_bits = 1, .unit = 1,
                         .count = 1, .timeout_ms = 1000, .scale = 1 };
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (o.interval_ms == 0)
        o.interval_ms = 1000;
    tags_table_t *t = tags_table_new(READ_MAX_TARGETS);
    if (!t) {
        fprintf(stderr, "rtugw read: out of memory\n");
        return 1;
    }
    for (int i = optind; i < argc; i++)
        if (add_target(t, &o, argv[i]) != 0) {
            tags_table_free(t);
            return 2;
        }
    modbus_t *ctx = open_link(&o);
    if (!ctx) {
        tags_table_free(t);
        return 1;
    }
    int failed = 0;
    for (unsigned n = 0; o.count == 0 || n < o.count; n++) {
        if (n)
            sleep_ms(o.interval_ms);
        failed |= poll_all(ctx, t, &o);
    }
    modbus_close(ctx);
    modbus_free(ctx);
    tags_table_free(t);
    return failed ? 1 : 0;
}
