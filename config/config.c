/*
 * config/config.c -- INI to config_t, with every value checked.
 *
 * Keys are described by tables (name, type, offset, range), so adding a key is
 * one line and its validation comes with it. Unknown sections and keys are
 * errors, not warnings: a misspelt "retires = 5" silently ignored is a bus
 * that behaves differently from what its engineer wrote. All errors are
 * collected, so one run of `rtugw check` shows every problem in the file.
 */
#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum key_type { K_UINT, K_BOOL, K_DOUBLE, K_STRING, K_PARITY, K_RS485, K_LOG, K_LOGTARGET } key_type_t;

typedef struct key_spec {
    const char *name;
    key_type_t type;
    size_t offset;
    double min, max;     /* numbers: inclusive range; strings: max = buffer size */
} key_spec_t;

#define U(s, f, lo, hi) { #f, K_UINT, offsetof(s, f), lo, hi }
#define B(s, f) { #f, K_BOOL, offsetof(s, f), 0, 0 }

static const key_spec_t gateway_keys[] = {
    U(config_t, workers, 0, 256),
    { "log_level", K_LOG, offsetof(config_t, log_level), 0, 0 },
    { "log_target", K_LOGTARGET, offsetof(config_t, log_syslog), 0, 0 },
};

static const key_spec_t bus_keys[] = {
    { "port", K_STRING, offsetof(config_bus_t, port), 1, CONFIG_PATH_MAX },
    U(config_bus_t, baud, 300, 4000000),
    { "parity", K_PARITY, offsetof(config_bus_t, parity), 0, 0 },
    U(config_bus_t, data_bits, 7, 8),
    U(config_bus_t, stop_bits, 1, 2),
    { "rs485", K_RS485, offsetof(config_bus_t, rs485), 0, 0 },
    B(config_bus_t, rts_after_send),
    U(config_bus_t, rts_delay_before_us, 0, 100000),
    U(config_bus_t, rts_delay_after_us, 0, 100000),
    B(config_bus_t, rx_during_tx),
    B(config_bus_t, echo_suppress),
    U(config_bus_t, response_timeout_ms, 1, 60000),
    U(config_bus_t, retries, 0, 10),
    U(config_bus_t, gap_us, 0, 1000000),
    U(config_bus_t, queue_depth, 1, 4096),
    B(config_bus_t, tcp_first),
};

static const key_spec_t device_keys[] = {
    U(config_device_t, slave, 1, 247),
    U(config_device_t, timeout_ms, 0, 60000),
    U(config_device_t, dead_after, 0, 1000),
    U(config_device_t, dead_backoff_ms, 0, 3600000),
};

static const key_spec_t poll_keys[] = {
    U(config_poll_t, function, 1, 4),
    U(config_poll_t, address, 0, 65535),
    U(config_poll_t, count, 1, 2000),
    U(config_poll_t, interval_ms, 10, 86400000),
    U(config_poll_t, serve_cached_ms, 0, 86400000),
};

static const key_spec_t tcp_keys[] = {
    B(config_tcp_t, enabled),
    { "bind", K_STRING, offsetof(config_tcp_t, bind), 1, 64 },
    U(config_tcp_t, port, 1, 65535),
    U(config_tcp_t, max_clients, 1, 1024),
    U(config_tcp_t, idle_timeout_s, 0, 86400),
    U(config_tcp_t, max_pending, 1, 64),
    U(config_tcp_t, max_per_address, 0, 1024),
    U(config_tcp_t, adu_timeout_ms, 10, 600000),
    B(config_tcp_t, read_only),
};

static const key_spec_t http_keys[] = {
    B(config_http_t, enabled),
    { "bind", K_STRING, offsetof(config_http_t, bind), 1, 64 },
    U(config_http_t, port, 1, 65535),
    U(config_http_t, max_connections, 1, 1024),
    U(config_http_t, max_header_bytes, 1024, 1048576),
    U(config_http_t, max_body_bytes, 0, 16777216),
    U(config_http_t, request_timeout_ms, 100, 600000),
    U(config_http_t, idle_timeout_s, 1, 86400),
};

static const key_spec_t router_keys[] = {
    { "exploration", K_DOUBLE, offsetof(config_router_t, exploration), 0, 1 },
    U(config_router_t, sample_every, 1, 1000000),
    U(config_router_t, explore_run, 1, 1024),
    { "verify_rate", K_DOUBLE, offsetof(config_router_t, verify_rate), 0, 1 },
    { "state_file", K_STRING, offsetof(config_router_t, state_file), 0, CONFIG_PATH_MAX },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Names that refer to other sections, resolved once the whole file is read. */
typedef struct pending_ref {
    char name[CONFIG_NAME_MAX];
    unsigned line;
} pending_ref_t;

typedef struct loader {
    config_t *cfg;
    config_errors_t *errs;
    const char *source;
    unsigned line;              /* line the reader handed out last */
    unsigned header_line;       /* line of the last [section] header read */
    char section[CONFIG_NAME_MAX + 16];
    void *target;               /* struct the current section fills, NULL: skip keys */
    int kind;                   /* index into section_kinds */
    pending_ref_t device_bus[CONFIG_MAX_DEVICES];
    pending_ref_t poll_device[CONFIG_MAX_POLLS];
    pending_ref_t default_bus;
    pending_ref_t unit_bus[256];
    bool seen_tcp, seen_http, seen_router, seen_gateway;
    /* input */
    FILE *file;
    const char *text;
    size_t text_pos;
} loader_t;

__attribute__((format(printf, 3, 4)))
static void error_at(loader_t *ld, unsigned line, const char *fmt, ...)
{
    config_errors_t *e = ld->errs;
    va_list ap;

    e->total++;
    if (e->count >= CONFIG_MAX_ERRORS)
        return;
    /* Line 0: about the file as a whole (cannot open, cross-section checks). */
    int n = line ? snprintf(e->text[e->count], sizeof e->text[0], "%s:%u: ", ld->source, line)
                 : snprintf(e->text[e->count], sizeof e->text[0], "%s: ", ld->source);
    va_start(ap, fmt);
    vsnprintf(e->text[e->count] + n, sizeof e->text[0] - (size_t)n, fmt, ap);
    va_end(ap);
    e->count++;
}

static void bad_value(loader_t *ld, const char *key, const char *value, const char *why)
{
    error_at(ld, ld->line, "[%s] %s = '%s': %s", ld->section, key, value, why);
}

/* ---- values ----------------------------------------------------------- */

static int parse_uint(const char *v, double min, double max, unsigned *out)
{
    char *end;
    errno = 0;
    if (*v == '-' || *v == 0)
        return -1;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || *end || x < min || x > max)
        return -1;
    *out = (unsigned)x;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };
    for (size_t i = 0; i < COUNT(yes); i++) {
        if (strcasecmp(v, yes[i]) == 0) { *out = true; return 0; }
        if (strcasecmp(v, no[i]) == 0) { *out = false; return 0; }
    }
    return -1;
}

static void set_key(loader_t *ld, const key_spec_t *k, const char *value)
{
    char *field = (char *)ld->target + k->offset;
    char range[96];
    unsigned u;
    double d;
    char *end;

    switch (k->type) {
    case K_UINT:
        if (parse_uint(value, k->min, k->max, &u) != 0) {
            snprintf(range, sizeof range, "expected a whole number %.0f..%.0f", k->min, k->max);
            bad_value(ld, k->name, value, range);
            return;
        }
        memcpy(field, &u, sizeof u);
        return;
    case K_BOOL: {
        bool b;
        if (parse_bool(value, &b) != 0)
            bad_value(ld, k->name, value, "expected true or false");
        else
            memcpy(field, &b, sizeof b);
        return;
    }
    case K_DOUBLE:
        errno = 0;
        d = strtod(value, &end);
        if (errno || *end || end == value || !isfinite(d) || d < k->min || d > k->max) {
            snprintf(range, sizeof range, "expected a number %g..%g", k->min, k->max);
            bad_value(ld, k->name, value, range);
            return;
        }
        memcpy(field, &d, sizeof d);
        return;
    case K_STRING:
        if (strlen(value) < k->min || strlen(value) >= k->max) {
            snprintf(range, sizeof range, "expected %.0f to %.0f characters", k->min, k->max - 1);
            bad_value(ld, k->name, value, range);
            return;
        }
        strcpy(field, value);
        return;
    case K_PARITY:
        if (strcasecmp(value, "none") == 0 || strcasecmp(value, "N") == 0)
            *field = 'N';
        else if (strcasecmp(value, "even") == 0 || strcasecmp(value, "E") == 0)
            *field = 'E';
        else if (strcasecmp(value, "odd") == 0 || strcasecmp(value, "O") == 0)
            *field = 'O';
        else
            bad_value(ld, k->name, value, "expected none, even or odd");
        return;
    case K_RS485: {
        config_rs485_t m;
        if (strcasecmp(value, "off") == 0) m = CONFIG_RS485_OFF;
        else if (strcasecmp(value, "ioctl") == 0) m = CONFIG_RS485_IOCTL;
        else if (strcasecmp(value, "rts") == 0) m = CONFIG_RS485_RTS;
        else { bad_value(ld, k->name, value, "expected off, ioctl or rts"); return; }
        memcpy(field, &m, sizeof m);
        return;
    }
    case K_LOG: {
        static const char *const names[] = { "error", "warn", "info", "debug" };
        for (size_t i = 0; i < COUNT(names); i++)
            if (strcasecmp(value, names[i]) == 0) {
                config_log_t l = (config_log_t)i;
                memcpy(field, &l, sizeof l);
                return;
            }
        bad_value(ld, k->name, value, "expected error, warn, info or debug");
        return;
    }
    case K_LOGTARGET: {
        bool syslog_on;
        if (strcmp(value, "stderr") == 0)
            syslog_on = false;
        else if (strcmp(value, "syslog") == 0)
            syslog_on = true;
        else {
            bad_value(ld, k->name, value, "expected stderr or syslog");
            return;
        }
        memcpy(field, &syslog_on, sizeof syslog_on);
        return;
    }
    }
}

/* ---- sections ----------------------------------------------------------- */

enum { S_GATEWAY, S_BUS, S_DEVICE, S_POLL, S_TCP, S_HTTP, S_ROUTER, S_COUNT };

static const struct {
    const char *prefix;
    bool named;                  /* "[bus NAME]" rather than "[tcp]" */
    const key_spec_t *keys;
    size_t nkeys;
} section_kinds[S_COUNT] = {
    [S_GATEWAY] = { "gateway", false, gateway_keys, COUNT(gateway_keys) },
    [S_BUS] = { "bus", true, bus_keys, COUNT(bus_keys) },
    [S_DEVICE] = { "device", true, device_keys, COUNT(device_keys) },
    [S_POLL] = { "poll", true, poll_keys, COUNT(poll_keys) },
    [S_TCP] = { "tcp", false, tcp_keys, COUNT(tcp_keys) },
    [S_HTTP] = { "http", false, http_keys, COUNT(http_keys) },
    [S_ROUTER] = { "router", false, router_keys, COUNT(router_keys) },
};

static void bus_defaults(config_bus_t *b)
{
    *b = (config_bus_t){ .baud = 19200, .parity = 'E', .data_bits = 8, .stop_bits = 1,
                         .response_timeout_ms = 500, .retries = 1, .queue_depth = 64,
                         .tcp_first = true };
}

static bool valid_name(const char *n)
{
    if (!*n || strlen(n) >= CONFIG_NAME_MAX)
        return false;
    for (; *n; n++)
        if (!(*n == '_' || *n == '-' || *n == '.' || (*n >= '0' && *n <= '9') ||
              (*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z')))
            return false;
    return true;
}

static int find_bus(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->bus_count; i++)
        if (strcmp(cfg->buses[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int find_device(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (strcmp(cfg->devices[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int find_poll(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; i < cfg->poll_count; i++)
        if (strcmp(cfg->polls[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Creates what a new section header stands for; target NULL skips its keys. */
static void open_section(loader_t *ld, const char *section)
{
    config_t *cfg = ld->cfg;
    char kind[16] = "", name[CONFIG_NAME_MAX + 8] = "";

    snprintf(ld->section, sizeof ld->section, "%s", section);
    ld->target = NULL;
    ld->kind = -1;
    if (sscanf(section, "%15s %39s", kind, name) < 1) {
        error_at(ld, ld->header_line, "[%s]: empty section name", section);
        return;
    }
    for (int k = 0; k < S_COUNT; k++) {
        if (strcmp(kind, section_kinds[k].prefix) != 0)
            continue;
        ld->kind = k;
        if (section_kinds[k].named != (*name != 0)) {
            error_at(ld, ld->header_line, "[%s]: %s", section,
                     section_kinds[k].named ? "needs a name, e.g. [bus rs485-1]"
                                            : "takes no name");
            return;
        }
        if (section_kinds[k].named && !valid_name(name)) {
            error_at(ld, ld->header_line, "[%s]: name '%s' must be 1..%d letters, digits, '-', '_' or '.'",
                     section, name, CONFIG_NAME_MAX - 1);
            return;
        }
        bool dup = false;
        switch (k) {
        case S_GATEWAY: dup = ld->seen_gateway; ld->seen_gateway = true; ld->target = cfg; break;
        case S_TCP: dup = ld->seen_tcp; ld->seen_tcp = true; ld->target = &cfg->tcp; break;
        case S_HTTP: dup = ld->seen_http; ld->seen_http = true; ld->target = &cfg->http; break;
        case S_ROUTER: dup = ld->seen_router; ld->seen_router = true; ld->target = &cfg->router; break;
        case S_BUS:
            if ((dup = find_bus(cfg, name) >= 0))
                break;
            if (cfg->bus_count == CONFIG_MAX_BUSES) {
                error_at(ld, ld->header_line, "[%s]: more than %d buses", section, CONFIG_MAX_BUSES);
                return;
            }
            bus_defaults(&cfg->buses[cfg->bus_count]);
            snprintf(cfg->buses[cfg->bus_count].name, CONFIG_NAME_MAX, "%s", name);
            cfg->buses[cfg->bus_count].line = ld->header_line;
            ld->target = &cfg->buses[cfg->bus_count++];
            break;
        case S_DEVICE:
            if ((dup = find_device(cfg, name) >= 0))
                break;
            if (cfg->device_count == CONFIG_MAX_DEVICES) {
                error_at(ld, ld->header_line, "[%s]: more than %d devices", section, CONFIG_MAX_DEVICES);
                return;
            }
            cfg->devices[cfg->device_count] = (config_device_t){ .dead_after = 3, .dead_backoff_ms = 10000,
                                                                 .line = ld->header_line };
            snprintf(cfg->devices[cfg->device_count].name, CONFIG_NAME_MAX, "%s", name);
            ld->target = &cfg->devices[cfg->device_count++];
            break;
        case S_POLL:
            if ((dup = find_poll(cfg, name) >= 0))
                break;
            if (cfg->poll_count == CONFIG_MAX_POLLS) {
                error_at(ld, ld->header_line, "[%s]: more than %d poll groups", section, CONFIG_MAX_POLLS);
                return;
            }
            cfg->polls[cfg->poll_count] = (config_poll_t){ .interval_ms = 1000, .line = ld->header_line };
            snprintf(cfg->polls[cfg->poll_count].name, CONFIG_NAME_MAX, "%s", name);
            ld->target = &cfg->polls[cfg->poll_count++];
            break;
        }
        if (dup) {
            ld->target = NULL;
            error_at(ld, ld->header_line, "[%s]: section defined twice", section);
        }
        return;
    }
    error_at(ld, ld->header_line, "[%s]: unknown section (expected gateway, bus NAME, device NAME, "
             "poll NAME, tcp, http or router)", section);
}

/* Keys whose value names another section or is a list. */
static bool special_key(loader_t *ld, const char *key, const char *value)
{
    config_t *cfg = ld->cfg;
    pending_ref_t *ref = NULL;

    if (ld->kind == S_DEVICE && strcmp(key, "bus") == 0)
        ref = &ld->device_bus[(config_device_t *)ld->target - cfg->devices];
    else if (ld->kind == S_POLL && strcmp(key, "device") == 0)
        ref = &ld->poll_device[(config_poll_t *)ld->target - cfg->polls];
    else if (ld->kind == S_TCP && strcmp(key, "default_bus") == 0)
        ref = &ld->default_bus;
    if (ref) {
        if (!valid_name(value))
            bad_value(ld, key, value, "expected a section name");
        snprintf(ref->name, sizeof ref->name, "%s", value);
        ref->line = ld->line;
        return true;
    }
    unsigned unit;
    if (ld->kind == S_TCP && strncmp(key, "unit", 4) == 0 && parse_uint(key + 4, 0, 255, &unit) == 0) {
        /* unitN = BUS:SLAVE | broadcast (unit0 only) | off */
        config_route_t *r = &cfg->tcp.unit[unit];
        char bus[CONFIG_NAME_MAX];
        unsigned slave;
        *r = (config_route_t){ 0 };
        if (strcmp(value, "off") == 0)
            return true;
        if (unit == 0 && strcmp(value, "broadcast") == 0) {
            r->set = r->broadcast = true;
            return true;
        }
        const char *colon = strchr(value, ':');
        if (!colon || (size_t)(colon - value) >= sizeof bus ||
            parse_uint(colon + 1, 0, 247, &slave) != 0) {
            bad_value(ld, key, value, unit == 0 ? "expected BUS:SLAVE, broadcast or off"
                                                : "expected BUS:SLAVE (slave 0..247) or off");
            return true;
        }
        memcpy(bus, value, (size_t)(colon - value));
        bus[colon - value] = 0;
        snprintf(ld->unit_bus[unit].name, CONFIG_NAME_MAX, "%s", bus);
        ld->unit_bus[unit].line = ld->line;
        r->set = true;
        r->slave = slave;
        return true;
    }
    if (ld->kind == S_TCP && strcmp(key, "allow") == 0) {
        /* Comma-separated IPv4 networks: 127.0.0.1, 10.0.0.0/8 */
        char list[512];
        snprintf(list, sizeof list, "%s", value);
        cfg->tcp.allow_count = 0;
        for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            char *slash = strchr(tok, '/');
            unsigned bits = 32;
            struct in_addr a;
            if (slash) {
                *slash = 0;
                if (parse_uint(slash + 1, 0, 32, &bits) != 0) {
                    bad_value(ld, key, value, "prefix length must be 0..32");
                    return true;
                }
            }
            if (inet_pton(AF_INET, tok, &a) != 1) {
                bad_value(ld, key, value, "expected IPv4 networks like 127.0.0.1 or 10.0.0.0/8");
                return true;
            }
            if (cfg->tcp.allow_count == CONFIG_MAX_ALLOW) {
                bad_value(ld, key, value, "too many networks (at most 16)");
                return true;
            }
            uint32_t mask = bits ? htonl(~0u << (32 - bits)) : 0;
            cfg->tcp.allow[cfg->tcp.allow_count++] = (config_net_t){ a.s_addr & mask, mask };
        }
        return true;
    }
    if (ld->kind == S_ROUTER && strcmp(key, "buckets") == 0) {
        /* Ascending upper edges, the last one 256: 8,16,32,64,128,256 */
        char list[256];
        unsigned prev = 0, n = 0, edge;
        snprintf(list, sizeof list, "%s", value);
        for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            if (n == CONFIG_MAX_BUCKETS || parse_uint(tok, 1, 256, &edge) != 0 || edge <= prev) {
                bad_value(ld, key, value, "expected up to 16 ascending frame lengths 1..256");
                return true;
            }
            cfg->router.buckets[n++] = prev = edge;
        }
        if (n == 0 || prev != 256) {
            bad_value(ld, key, value, "the last bucket edge must be 256");
            return true;
        }
        cfg->router.bucket_count = n;
        return true;
    }
    if (ld->kind == S_ROUTER && strcmp(key, "policy") == 0) {
        /* "epsilon" is the name files written before thompson use */
        if (strcmp(value, "epsilon") != 0 && strcmp(value, "epsilon-greedy") != 0 &&
            strcmp(value, "thompson") != 0)
            bad_value(ld, key, value, "expected epsilon-greedy (or epsilon) or thompson");
        else
            snprintf(cfg->router.policy, sizeof cfg->router.policy, "%s", value);
        return true;
    }
    return false;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    loader_t *ld = user;

    if (strcmp(section, ld->section) != 0)
        open_section(ld, section);
    if (!ld->target)
        return 1;   /* the section's own error was reported; keep reading */
    if (special_key(ld, key, value))
        return 1;
    const key_spec_t *keys = section_kinds[ld->kind].keys;
    for (size_t i = 0; i < section_kinds[ld->kind].nkeys; i++)
        if (strcmp(keys[i].name, key) == 0) {
            set_key(ld, &keys[i], value);
            return 1;
        }
    error_at(ld, ld->line, "[%s] %s: unknown key", section, key);
    return 1;
}

/* ---- reading lines: counted here, because inih does not tell its handler ---- */

static char *read_line(char *str, int num, void *stream)
{
    loader_t *ld = stream;
    size_t n = 0;
    int c = 0;

    if (ld->file) {
        if (!fgets(str, num, ld->file))
            return NULL;
        n = strlen(str);
        if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(ld->file)) {
            while ((c = fgetc(ld->file)) != EOF && c != '\n')
                ;
            ld->line++;
            error_at(ld, ld->line, "line longer than %d characters", num - 2);
            str[0] = '\n';
            str[1] = 0;
            return str;
        }
    } else {
        const char *t = ld->text + ld->text_pos;
        if (!*t)
            return NULL;
        size_t len = strcspn(t, "\n");
        ld->text_pos += len + (t[len] == '\n');
        if (len >= (size_t)num - 1) {
            ld->line++;
            error_at(ld, ld->line, "line longer than %d characters", num - 2);
            str[0] = '\n';
            str[1] = 0;
            return str;
        }
        memcpy(str, t, len);
        str[len] = '\n';
        str[len + 1] = 0;
    }
    ld->line++;
    /* inih reports only keys to the handler; note where sections begin. */
    if (str[strspn(str, " \t")] == '[')
        ld->header_line = ld->line;
    return str;
}

/* ---- after the file: references and cross-checks ---------------------------- */

static void resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;

    for (unsigned i = 0; i < cfg->bus_count; i++)
        if (!cfg->buses[i].port[0])
            error_at(ld, cfg->buses[i].line, "[bus %s]: port is required", cfg->buses[i].name);
    for (unsigned i = 0; i < cfg->device_count; i++) {
        config_device_t *d = &cfg->devices[i];
        int b = find_bus(cfg, ld->device_bus[i].name);
        if (!ld->device_bus[i].name[0] && cfg->bus_count == 1)
            b = 0;  /* one bus: it is the obvious one */
        if (b < 0)
            error_at(ld, ld->device_bus[i].line ? ld->device_bus[i].line : d->line,
                     "[device %s] bus = '%s': no such bus", d->name, ld->device_bus[i].name);
        else
            d->bus = (unsigned)b;
        if (d->slave == 0)
            error_at(ld, d->line, "[device %s]: slave is required (1..247)", d->name);
        for (unsigned j = 0; j < i && b >= 0; j++)
            if (cfg->devices[j].bus == d->bus && cfg->devices[j].slave == d->slave && d->slave)
                error_at(ld, d->line, "[device %s]: slave %u on bus %s is already device %s",
                         d->name, d->slave, cfg->buses[d->bus].name, cfg->devices[j].name);
    }
    for (unsigned i = 0; i < cfg->poll_count; i++) {
        config_poll_t *p = &cfg->polls[i];
        int d = find_device(cfg, ld->poll_device[i].name);
        if (d < 0)
            error_at(ld, ld->poll_device[i].line ? ld->poll_device[i].line : p->line,
                     "[poll %s] device = '%s': no such device", p->name, ld->poll_device[i].name);
        else
            p->device = (unsigned)d;
        if (p->function == 0)
            error_at(ld, p->line, "[poll %s]: function is required (1, 2, 3 or 4)", p->name);
        unsigned max = p->function <= 2 ? 2000 : 125;
        if (p->count == 0 || p->count > max)
            error_at(ld, p->line, "[poll %s] count = %u: expected 1..%u for function %u", p->name,
                     p->count, max, p->function);
        if (p->address + p->count > 65536)
            error_at(ld, p->line, "[poll %s]: address %u + count %u runs past 65535", p->name,
                     p->address, p->count);
    }
    if (ld->default_bus.name[0]) {
        int b = find_bus(cfg, ld->default_bus.name);
        if (b < 0)
            error_at(ld, ld->default_bus.line, "[tcp] default_bus = '%s': no such bus", ld->default_bus.name);
        else
            cfg->tcp.default_bus = (unsigned)b;
    }
    for (unsigned u = 0; u < 256; u++) {
        if (!ld->unit_bus[u].name[0])
            continue;
        int b = find_bus(cfg, ld->unit_bus[u].name);
        if (b < 0)
            error_at(ld, ld->unit_bus[u].line, "[tcp] unit%u = '%s:...': no such bus", u, ld->unit_bus[u].name);
        else
            cfg->tcp.unit[u].bus = (unsigned)b;
    }
    if (cfg->tcp.enabled && cfg->bus_count == 0)
        error_at(ld, 0, "tcp is enabled but no [bus NAME] is configured");
    if (cfg->tcp.enabled && cfg->http.enabled && cfg->tcp.port == cfg->http.port &&
        strcmp(cfg->tcp.bind, cfg->http.bind) == 0)
        error_at(ld, 0, "[tcp] and [http] both use %s:%u", cfg->tcp.bind, cfg->tcp.port);
}

static config_t *load(loader_t *ld)
{
    config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        error_at(ld, 0, "out of memory");
        return NULL;
    }
    snprintf(cfg->source, sizeof cfg->source, "%s", ld->source);
    cfg->log_level = CONFIG_LOG_INFO;
    cfg->tcp = (config_tcp_t){ .enabled = true, .bind = "127.0.0.1", .port = 1502, .max_clients = 32,
                               .idle_timeout_s = 300, .max_pending = 16, .adu_timeout_ms = 2000 };
    cfg->http = (config_http_t){ .enabled = true, .bind = "127.0.0.1", .port = 8502, .max_connections = 16,
                                 .max_header_bytes = 8192, .max_body_bytes = 65536,
                                 .request_timeout_ms = 5000, .idle_timeout_s = 30 };
    cfg->router = (config_router_t){ .exploration = 0.05, .sample_every = 64, .explore_run = 8,
                                     .policy = "epsilon",
                                     .buckets = { 8, 16, 32, 64, 128, 256 }, .bucket_count = 6 };
    ld->cfg = cfg;
    int rc = ini_parse_stream(read_line, ld, on_key, ld);
    if (rc > 0 && (unsigned)rc == ld->line)
        error_at(ld, (unsigned)rc, "not a section header, key = value, or comment");
    else if (rc > 0)
        error_at(ld, (unsigned)rc, "syntax error");
    else if (rc < 0)
        error_at(ld, 0, "out of memory while reading");
    resolve(ld);
    if (ld->errs->total) {
        free(cfg);
        return NULL;
    }
    return cfg;
}

static loader_t *new_loader(const char *source, config_errors_t *errs)
{
    loader_t *ld = calloc(1, sizeof *ld);   /* large (pending references): not on the stack */

    memset(errs, 0, sizeof *errs);
    if (!ld) {
        snprintf(errs->text[0], sizeof errs->text[0], "%s: out of memory", source);
        errs->count = errs->total = 1;
        return NULL;
    }
    ld->errs = errs;
    ld->source = source;
    return ld;
}

config_t *config_load_file(const char *path, config_errors_t *errs)
{
    loader_t *ld = new_loader(path, errs);
    config_t *cfg = NULL;

    if (!ld)
        return NULL;
    ld->file = fopen(path, "r");
    if (!ld->file) {
        error_at(ld, 0, "cannot open: %s", strerror(errno));
    } else {
        cfg = load(ld);
        fclose(ld->file);
    }
    free(ld);
    return cfg;
}

config_t *config_load_string(const char *text, const char *name, config_errors_t *errs)
{
    loader_t *ld = new_loader(name, errs);
    config_t *cfg = NULL;

    if (!ld)
        return NULL;
    ld->text = text;
    cfg = load(ld);
    free(ld);
    return cfg;
}

void config_free(config_t *cfg)
{
    free(cfg);
}

int config_summary(const config_t *cfg, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%u bus%s, %u device%s, %u poll group%s, tcp %s, http %s",
                    cfg->bus_count, cfg->bus_count == 1 ? "" : "es", cfg->device_count,
                    cfg->device_count == 1 ? "" : "s", cfg->poll_count, cfg->poll_count == 1 ? "" : "s",
                    cfg->tcp.enabled ? "on" : "off", cfg->http.enabled ? "on" : "off");
}
