/*
 * config/config.c -- INI to config_t, with every value checked.
 *
 * Unknown sections and keys are errors, not warnings: a misspelt "retires = 5"
 * silently ignored is a bus that behaves differently from what its engineer
 * wrote. So is anything written twice (a key, a section) or in a shape inih
 * would quietly bend ("[bus a b]" read as bus "a"). All errors are collected,
 * so one run of `rtugw check` shows every problem in the file. The key tables
 * are in keys.c; reading and sorting the lines is reader.c.
 */
#include "config/internal.h"

#include <errno.h>
#include <ini.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* One error: prefix (may be empty) and the message. */
static void add_error(loader_t *ld, const char *prefix, const char *fmt, va_list ap)
{
    config_errors_t *e = ld->errs;

    e->total++;
    if (e->count >= CONFIG_MAX_ERRORS)
        return;
    int n = snprintf(e->text[e->count], sizeof e->text[0], "%s", prefix);
    vsnprintf(e->text[e->count] + n, sizeof e->text[0] - (size_t)n, fmt, ap);
    e->count++;
}

void config_error_at(loader_t *ld, unsigned line, const char *fmt, ...)
{
    char prefix[CONFIG_PATH_MAX + 16];
    va_list ap;

    /* Line 0: about the file as a whole (cannot open, cross-section checks). */
    if (line)
        snprintf(prefix, sizeof prefix, "%s:%u: ", ld->source, line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", ld->source);
    va_start(ap, fmt);
    add_error(ld, prefix, fmt, ap);
    va_end(ap);
}

void config_error_text(loader_t *ld, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_error(ld, "", fmt, ap);
    va_end(ap);
}

/* ---- sections ----------------------------------------------------------- */

/*
 * A table grows as its sections are read, doubling, so a file costs memory
 * for what it holds rather than for the limits of config.h (a bus idle must
 * not pay for 8,192 devices). A section's entry is written only while its
 * own keys are read and nothing keeps a pointer into a table across
 * sections, so moving the table on growth is safe. New room is zeroed: the
 * reload compares tables with memcmp.
 */
int config_grow(void **table, size_t size, void **extra, size_t extra_size, unsigned n, unsigned *cap)
{
    if (n < *cap)
        return 0;
    unsigned want = *cap ? *cap * 2 : 4;
    void *t = realloc(*table, (size_t)want * size);
    if (!t)
        return -ENOMEM;
    memset((char *)t + (size_t)*cap * size, 0, (size_t)(want - *cap) * size);
    *table = t;
    if (extra) {
        void *e = realloc(*extra, (size_t)want * extra_size);
        if (!e)
            return -ENOMEM;   /* *table is larger, *cap unchanged: the next call retries */
        memset((char *)e + (size_t)*cap * extra_size, 0, (size_t)(want - *cap) * extra_size);
        *extra = e;
    }
    *cap = want;
    return 0;
}

static void bus_defaults(config_bus_t *b)
{
    *b = (config_bus_t){ .baud = 19200, .parity = 'E', .data_bits = 8, .stop_bits = 1,
                         .response_timeout_ms = 500, .retries = 1, .queue_depth = 64,
                         .tcp_first = true, .poll_share = 20, .priority_hold_us = 5000, .listen_late_factor = 4 };
    transports_bus_defaults(b);
}

int config_find_bus(const config_t *cfg, const char *name)
{
    for (unsigned i = 0; name && name[0] && i < cfg->bus_count; i++)   /* a gap's name is empty: never a [bus]'s */
        if (strcmp(cfg->buses[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* A device that names no bus where there is not exactly one: say which it
 * may name (the first eight), not "bus = '': no such bus". */
static void device_needs_bus(loader_t *ld, const config_t *cfg, const config_device_t *d)
{
    char names[256] = "";
    size_t used = 0;
    for (unsigned i = 0; i < cfg->bus_count && i < 8 && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", cfg->buses[i].name);
    if (cfg->bus_count > 8 && used < sizeof names)
        snprintf(names + used, sizeof names - used, ", ...");
    if (cfg->bus_count == 0)
        config_error_at(ld, d->line, "[device %s]: no [bus] section is configured to put it on", d->name);
    else
        config_error_at(ld, d->line, "[device %s]: bus is required (%u buses are configured): name one of %s",
                        d->name, cfg->bus_count, names);
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

/* [gateway], [tcp], [http], [router], [mqtt]: *first is set when it was given before.
 *
 * One rule for every service section ([tcp], [http], [tls], [rtu_tcp],
 * [mqtt]): present = on, unless it says enabled = false. Before, [mqtt] was
 * on when present while [tls] and [rtu_tcp] needed enabled = true, so the same
 * shape of section meant two things. The header turns the service on and a
 * later enabled = false in it turns it off again; [tcp] and [http] are also on
 * when absent (the gateway's own front end and status page). */
static void *single_section(loader_t *ld, int kind, unsigned *first)
{
    config_t *cfg = ld->cfg;

    *first = ld->single_line[kind];
    if (!*first)
        ld->single_line[kind] = ld->header_line;
    switch (kind) {
    case S_GATEWAY: return cfg;
    case S_TCP: return &cfg->tcp;
    case S_HTTP: return &cfg->http;
    case S_TLS:
        cfg->tls.line = ld->header_line;
        if (!*first)
            cfg->tls.enabled = true;
        return &cfg->tls;
    case S_RTU_TCP:
        if (!*first)
            cfg->rtu_tcp.enabled = true;
        return &cfg->rtu_tcp;
    case S_UDP: return &cfg->udp;
    case S_MQTT:
        if (!*first)
            config_mqtt_open(ld);
        return &cfg->mqtt;
    default: return &cfg->router;
    }
}

/* [bus NAME], [device NAME], [poll NAME]: a new entry, or NULL with *first
 * set when the name was given before (or an error when the table is full). */
static void *named_section(loader_t *ld, int kind, const char *name, unsigned *first)
{
    config_t *cfg = ld->cfg;
    int i;

    if (kind == S_TAG)
        return config_tags_section(ld, name);   /* a name given twice is found once all are read */
    if (kind == S_ROLE) {
        if ((i = config_role_find(cfg, name)) >= 0)
            *first = cfg->roles[i].line;
        else
            return security_new_role(ld, name);
        return NULL;
    }
    if (kind == S_SERIAL_SLAVE)
        return transports_new_serial_slave(ld, name, first);
    if (kind == S_TEMPLATE)
        return config_tags_new_template(ld, name, first);
    if (kind == S_USER)
        return users_new(ld, name, first);
    if (kind == S_MAP)
        return config_maps_new(ld, name, first);
    if (kind == S_BUS) {
        if ((i = config_find_bus(cfg, name)) >= 0) {
            *first = cfg->buses[i].line;
        } else if (cfg->bus_count < CONFIG_MAX_BUSES) {
            if (config_grow((void **)&cfg->buses, sizeof *cfg->buses, NULL, 0, cfg->bus_count, &ld->bus_cap) != 0)
                goto out_of_memory;
            config_bus_t *b = &cfg->buses[cfg->bus_count++];
            bus_defaults(b);
            snprintf(b->name, sizeof b->name, "%s", name);
            b->line = ld->header_line;
            return b;
        }
    } else if (kind == S_DEVICE) {
        if ((i = find_device(cfg, name)) >= 0) {
            *first = cfg->devices[i].line;
        } else if (cfg->device_count < CONFIG_MAX_DEVICES) {
            if (config_grow((void **)&cfg->devices, sizeof *cfg->devices, (void **)&ld->device_bus,
                            sizeof *ld->device_bus, cfg->device_count, &ld->device_cap) != 0)
                goto out_of_memory;
            config_device_t *d = &cfg->devices[cfg->device_count++];
            *d = (config_device_t){ .dead_after = 3, .dead_backoff_ms = 10000, .max_read_registers = 125,
                                    .max_read_bits = 2000, .max_gap = 8, .mqtt_publish = -1, .confirm_write = true, .widen_reads = true,
                                    .template_index = -1, .addressing = -1, .line = ld->header_line };
            snprintf(d->name, sizeof d->name, "%s", name);
            return d;
        }
    } else {
        if ((i = find_poll(cfg, name)) >= 0) {
            *first = cfg->polls[i].line;
        } else if (cfg->poll_count < CONFIG_MAX_POLLS) {
            if (config_grow((void **)&cfg->polls, sizeof *cfg->polls, (void **)&ld->poll_device,
                            sizeof *ld->poll_device, cfg->poll_count, &ld->poll_cap) != 0)
                goto out_of_memory;
            config_poll_t *p = &cfg->polls[cfg->poll_count++];
            *p = (config_poll_t){ .interval_ms = 1000, .line = ld->header_line };
            snprintf(p->name, sizeof p->name, "%s", name);
            return p;
        }
    }
    if (!*first)
        config_error_at(ld, ld->header_line, "[%s]: more than %d %s (the limit of one configuration)",
                        ld->section,
                        kind == S_BUS ? CONFIG_MAX_BUSES : kind == S_DEVICE ? CONFIG_MAX_DEVICES : CONFIG_MAX_POLLS,
                        kind == S_BUS ? "buses" : kind == S_DEVICE ? "devices" : "poll groups");
    return NULL;
out_of_memory:
    config_error_at(ld, ld->header_line, "[%s]: out of memory", ld->section);
    return NULL;
}

/* Checks a header's words and creates what it stands for; an error leaves
 * target NULL, so the section's keys are skipped (its error is enough). */
void config_open_section(loader_t *ld, const char *raw, char *const words[], unsigned n)
{
    int k = S_NONE;

    if (n == 0) {
        config_error_at(ld, ld->header_line, "[%s]: empty section name", raw);
        return;
    }
    for (int i = 0; i < S_COUNT && k == S_NONE; i++)
        if (strcmp(words[0], config_section_kinds[i].prefix) == 0)
            k = i;
    if (k == S_NONE) {
        config_error_at(ld, ld->header_line, "[%s]: unknown section (expected gateway, bus NAME, device NAME, "
                        "poll NAME, tag NAME, template NAME, tcp, http, router, tls, role NAME, rtu_tcp, "
                        "serial_slave NAME, mqtt, user NAME, udp or map NAME)", raw);
        return;
    }
    const section_kind_t *sk = &config_section_kinds[k];
    const char *why = NULL;
    if (!sk->named && n > 1)
        why = "takes no name";
    else if (sk->named && n == 1)
        why = "needs a name, e.g. [bus rs485-1]";
    else if (n > 2)
        why = "one name expected; a name has no spaces";
    if (why) {
        config_error_at(ld, ld->header_line, "[%s]: %s", raw, why);
        return;
    }
    if (sk->named && k != S_TAG && !config_valid_name(words[1])) {   /* tags/ has the tags' rule */
        config_error_at(ld, ld->header_line, "[%s]: name '%s' must be 1..%d letters, digits, '-', '_' or '.'",
                        raw, words[1], CONFIG_NAME_MAX - 1);
        return;
    }
    snprintf(ld->section, sizeof ld->section, "%s%s%s", sk->prefix, sk->named ? " " : "",
             sk->named ? words[1] : "");
    unsigned first = 0;
    void *target = sk->named ? named_section(ld, k, words[1], &first) : single_section(ld, k, &first);
    if (first) {
        config_error_at(ld, ld->header_line, "[%s]: section defined twice (first at line %u)", ld->section,
                        first);
        return;
    }
    ld->kind = k;
    ld->target = target;
}

/* A bus's keys go through the bus rule once the section is complete. */
static void apply_bus_rule(loader_t *ld, const config_bus_t *bus)
{
    char why[192];

    for (unsigned i = 0; i < ld->seen_count; i++) {
        const seen_key_t *s = &ld->seen[i];
        if (s->accepted && ld->bus_rule(bus, s->spec->name, why, sizeof why) != 0)
            config_error_at(ld, s->line, "[%s] %s = '%s': %s", ld->section, s->spec->name, s->value, why);
    }
}

/* Where a key of the section just read was given (0: not given), for a
 * cross-check made once the whole file is read. */
static unsigned seen_line(const loader_t *ld, const char *name)
{
    for (unsigned i = 0; i < ld->seen_count; i++)
        if (ld->seen[i].accepted && strcmp(ld->seen[i].spec->name, name) == 0)
            return ld->seen[i].line;
    return 0;
}

void config_close_section(loader_t *ld)
{
    if (ld->kind == S_BUS && ld->target)
        ((config_bus_t *)ld->target)->queue_depth_line = seen_line(ld, "queue_depth");
    if ((ld->kind == S_TCP || ld->kind == S_RTU_TCP) && ld->target) {
        config_tcp_t *t = ld->target;
        ld->bus_share_line[ld->kind == S_RTU_TCP] = seen_line(ld, "bus_share");
        /* loops = 0: one per CPU this process may run on (its affinity, as
         * taskset or systemd's CPUAffinity= leave it), within bus_share
         * and CONFIG_MAX_TCP_LOOPS: the number is fixed here, so every
         * reader (the listener, /status, a reload's comparison) sees the
         * loops that run. */
        if (t->loops == 0) {
            cpu_set_t cpus;
            int n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
            t->loops = n < 1 ? 1 : (unsigned)n;
            t->loops = t->loops > t->bus_share ? t->bus_share : t->loops;
            t->loops = t->loops > CONFIG_MAX_TCP_LOOPS ? CONFIG_MAX_TCP_LOOPS : t->loops;
        }
        /* The loops split bus_share, each holding at least one place in a
         * bus (front/tcp_loops.c): more loops than places would hold more
         * than bus_share, past the check against queue_depth below. */
        if (t->loops > t->bus_share) {
            char share_at[32] = "default";
            if (ld->bus_share_line[ld->kind == S_RTU_TCP])
                snprintf(share_at, sizeof share_at, "line %u", ld->bus_share_line[ld->kind == S_RTU_TCP]);
            config_error_at(ld, seen_line(ld, "loops"), "[%s] loops = '%u': above bus_share = %u (%s); each loop "
                            "holds at least one place of a bus: raise bus_share to %u or lower loops",
                            ld->kind == S_RTU_TCP ? "rtu_tcp" : "tcp", t->loops, t->bus_share, share_at, t->loops);
        }
    }
    if (ld->kind == S_BUS && ld->target)
        transports_check_bus(ld, ld->target);
    if (ld->kind == S_BUS && ld->target) {
        listen_check_bus(ld, ld->target);
        dialin_check_bus(ld, ld->target);
    }
    if (ld->kind == S_BUS && ld->target && ld->bus_rule)
        apply_bus_rule(ld, ld->target);
    ld->target = NULL;
    ld->kind = S_NONE;
    ld->seen_count = 0;
}

/* ---- keys ------------------------------------------------------------------ */

static const seen_key_t *find_seen(const loader_t *ld, const key_spec_t *k, unsigned number)
{
    for (unsigned i = 0; i < ld->seen_count; i++)
        if (ld->seen[i].spec == k && ld->seen[i].number == number)
            return &ld->seen[i];
    return NULL;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    loader_t *ld = user;

    (void)section;   /* inih's copy of the header, cut at 49 characters; reader.c has it whole */
    ld->key_in_section = true;
    if (!ld->continuation)
        ld->last_key_line = ld->line;
    if (!ld->in_section) {
        config_error_at(ld, ld->line, "%s = '%s': outside any section (keys follow a [section] header)",
                        key, value);
        return 1;
    }
    if (!ld->target)
        return 1;   /* the section's own error was reported; keep reading */
    if (ld->continuation) {
        config_error_at(ld, ld->line, "[%s] %s = '%s': the line is indented, so it continues %s "
                        "from line %u; a value takes one line", ld->section, key, value, key,
                        ld->last_key_line);
        return 1;
    }
    unsigned number;
    const key_spec_t *k = config_find_key(ld->kind, key, &number);
    if (!k) {
        config_error_at(ld, ld->line, "[%s] %s: unknown key", ld->section, key);
        return 1;
    }
    const seen_key_t *first = find_seen(ld, k, number);
    if (first) {
        config_error_at(ld, ld->line, "[%s] %s = '%s': given twice in this section (first at line %u)",
                        ld->section, key, value, first->line);
        return 1;
    }
    bool ok = config_set_key(ld, k, number, value);
    if (ld->seen_count < COUNT(ld->seen)) {   /* always: a section has fewer known keys */
        seen_key_t *s = &ld->seen[ld->seen_count++];
        *s = (seen_key_t){ .spec = k, .number = number, .line = ld->line, .accepted = ok };
        snprintf(s->value, sizeof s->value, "%s", value);
    }
    return 1;
}

/* ---- after the file: references and cross-checks ---------------------------- */

/*
 * A listener's bus_share at or above a bus's queue_depth lets that listener
 * alone fill the queue, and a full queue answers exception 06 at once: the
 * refusal storm back-pressure exists to prevent (docs/frontends.md,
 * Overload). Refused, not warned about: a daemon's warnings go unread, and
 * the storm shows only under load. The line named is the value written
 * (bus_share's if given, else queue_depth's); the other is quoted with its
 * own line, or as the default.
 */
static void check_bus_share(loader_t *ld, const char *section, const config_tcp_t *t, unsigned share_line)
{
    const config_t *cfg = ld->cfg;

    if (!t->enabled)
        return;
    for (unsigned i = 0; i < cfg->bus_count; i++) {
        const config_bus_t *b = &cfg->buses[i];
        if (t->bus_share < b->queue_depth)
            continue;
        char depth_at[32] = "default", share_at[32] = "default";
        if (b->queue_depth_line)
            snprintf(depth_at, sizeof depth_at, "line %u", b->queue_depth_line);
        if (share_line)
            snprintf(share_at, sizeof share_at, "line %u", share_line);
        if (share_line)
            config_error_at(ld, share_line, "[%s] bus_share = '%u': not below [bus %s] queue_depth = %u (%s); "
                            "the listener alone could fill the queue, which answers exception 06: "
                            "keep bus_share below queue_depth", section, t->bus_share, b->name,
                            b->queue_depth, depth_at);
        else
            config_error_at(ld, b->queue_depth_line ? b->queue_depth_line : b->line,
                            "[bus %s] queue_depth = '%u': not above [%s] bus_share = %u (%s); "
                            "the listener alone could fill the queue, which answers exception 06: "
                            "raise queue_depth or lower bus_share", b->name, b->queue_depth, section,
                            t->bus_share, share_at);
    }
}

static void resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;
    /* Which device holds (bus, slave), + 1: a slave given twice is found in
     * one pass, not by comparing every pair of thousands of devices. */
    unsigned *holder = calloc((size_t)cfg->bus_count * 248 + 1, sizeof *holder);

    if (!holder) {
        config_error_at(ld, 0, "out of memory");
        return;
    }

    for (unsigned i = 0; i < cfg->bus_count; i++)
        if (!cfg->buses[i].port_line)   /* given but refused: that error is enough */
            config_error_at(ld, cfg->buses[i].line, "[bus %s]: port is required", cfg->buses[i].name);
    for (unsigned i = 0; i < cfg->device_count; i++) {
        config_device_t *d = &cfg->devices[i];
        int b = config_find_bus(cfg, ld->device_bus[i].name);
        if (!ld->device_bus[i].name[0] && cfg->bus_count == 1)
            b = 0;  /* one bus: it is the obvious one */
        if (b < 0 && !ld->device_bus[i].name[0])
            device_needs_bus(ld, cfg, d);
        else if (b < 0)
            config_error_at(ld, ld->device_bus[i].line ? ld->device_bus[i].line : d->line,
                     "[device %s] bus = '%s': no such bus", d->name, ld->device_bus[i].name);
        else
            d->bus = (unsigned)b;
        if (d->slave == 0)
            config_error_at(ld, d->line, "[device %s]: slave is required (1..247)", d->name);
        unsigned *h = b >= 0 && d->slave && d->slave < 248 ? &holder[(size_t)d->bus * 248 + d->slave] : NULL;
        if (h && *h)
            config_error_at(ld, d->line, "[device %s]: slave %u on bus %s is already device %s",
                     d->name, d->slave, cfg->buses[d->bus].name, cfg->devices[*h - 1].name);
        else if (h)
            *h = i + 1;
    }
    free(holder);
    for (unsigned i = 0; i < cfg->poll_count; i++) {
        config_poll_t *p = &cfg->polls[i];
        int d = find_device(cfg, ld->poll_device[i].name);
        if (d < 0)
            config_error_at(ld, ld->poll_device[i].line ? ld->poll_device[i].line : p->line,
                     "[poll %s] device = '%s': no such device", p->name, ld->poll_device[i].name);
        else
            p->device = (unsigned)d;
        if (p->function == 0)
            config_error_at(ld, p->line, "[poll %s]: function is required (1, 2, 3 or 4)", p->name);
        unsigned max = p->function <= 2 ? 2000 : 125;
        if (p->count == 0 || p->count > max)
            config_error_at(ld, p->line, "[poll %s] count = %u: expected 1..%u for function %u", p->name,
                     p->count, max, p->function);
        if (p->address + p->count > 65536)
            config_error_at(ld, p->line, "[poll %s]: address %u + count %u runs past 65535", p->name,
                     p->address, p->count);
    }
    if (ld->default_bus.name[0]) {
        int b = config_find_bus(cfg, ld->default_bus.name);
        if (b < 0)
            config_error_at(ld, ld->default_bus.line, "[tcp] default_bus = '%s': no such bus", ld->default_bus.name);
        else
            cfg->tcp.default_bus = (unsigned)b;
    }
    config_resolve_units(ld, "tcp", ld->unit_bus, cfg->tcp.unit);
    if (cfg->tcp.enabled && cfg->bus_count == 0)
        config_error_at(ld, 0, "tcp is enabled but no [bus NAME] is configured");
    if (cfg->tcp.enabled && cfg->http.enabled && cfg->tcp.port == cfg->http.port &&
        strcmp(cfg->tcp.bind, cfg->http.bind) == 0)
        config_error_at(ld, 0, "[tcp] and [http] both use %s:%u", cfg->tcp.bind, cfg->tcp.port);
    config_tags_resolve(ld);
    security_resolve(ld);
    users_resolve(ld);
    transports_resolve(ld);
    config_mqtt_resolve(ld);
    config_paths_resolve(ld);
    config_maps_resolve(ld);   /* after the tags and the routes it is checked against */
    check_bus_share(ld, "tcp", &cfg->tcp, ld->bus_share_line[0]);
    check_bus_share(ld, "rtu_tcp", &cfg->rtu_tcp, ld->bus_share_line[1]);
}

static config_t *load(loader_t *ld)
{
    config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        config_error_at(ld, 0, "out of memory");
        return NULL;
    }
    snprintf(cfg->source, sizeof cfg->source, "%s", ld->source);
    cfg->log_level = CONFIG_LOG_INFO;
    cfg->buses_on_io_thread = true;
    cfg->line_thread = true;
    cfg->cpu_latency_us = -1;
    cfg->tcp = (config_tcp_t){ .enabled = true, .bind = "127.0.0.1", .port = 1502, .max_clients = 32,
                               .idle_timeout_s = 300, .max_pending = 16, .adu_timeout_ms = 2000,
                               .bus_share = 4, .loops = 1 };
    cfg->http = (config_http_t){ .enabled = true, .bind = "127.0.0.1", .port = 8502, .max_connections = 16,
                                 .max_header_bytes = 8192, .max_body_bytes = 65536,
                                 .request_timeout_ms = 5000, .idle_timeout_s = 30, .tls_min_version = 12,
                                 .session_timeout_s = 3600, .max_sessions = 64,
                                 .max_sessions_per_user = 8 };
    transports_defaults(cfg);
    cfg->router = (config_router_t){ .exploration = 0.05, .sample_every = 64, .explore_run = 8,
                                     .policy = "epsilon",
                                     .buckets = { 8, 16, 32, 64, 128, 256 }, .bucket_count = 6 };
    security_defaults(cfg);
    ld->cfg = cfg;
    ld->kind = S_NONE;
    if (!(ld->tags = config_tags_new())) {
        config_error_at(ld, 0, "out of memory");
        free(cfg);
        return NULL;
    }
    int rc = ini_parse_stream(config_read_line, ld, on_key, ld);
    config_close_section(ld);
    /* reader.c reports every line inih refuses; inih returns the first. */
    if (rc > 0 && (unsigned)rc != ld->first_syntax_line)
        config_error_at(ld, (unsigned)rc, "syntax error");
    else if (rc < 0)
        config_error_at(ld, 0, "out of memory while reading");
    resolve(ld);
    config_tags_free(ld->tags);
    free(ld->device_bus);
    free(ld->poll_device);
    free(ld->transports.slave_unit);
    for (unsigned i = 0; i < CONFIG_MAX_MAPS; i++) {
        free(ld->map_rows[i]);
        free(ld->map_places[i]);
    }
    if (ld->errs->total) {
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

static loader_t *new_loader(const char *source, config_bus_rule_t rule, config_errors_t *errs)
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
    ld->bus_rule = rule;
    return ld;
}

config_t *config_load_file_with(const char *path, config_bus_rule_t rule, config_errors_t *errs)
{
    loader_t *ld = new_loader(path, rule, errs);
    config_t *cfg = NULL;

    if (!ld)
        return NULL;
    ld->file = fopen(path, "r");
    if (!ld->file) {
        config_error_at(ld, 0, "cannot open: %s", strerror(errno));
    } else {
        cfg = load(ld);
        fclose(ld->file);
    }
    free(ld);
    return cfg;
}

config_t *config_load_string_with(const char *text, const char *name, config_bus_rule_t rule,
                                  config_errors_t *errs)
{
    return config_load_string_over(text, name, rule, NULL, errs);
}

config_t *config_load_string_over(const char *text, const char *name, config_bus_rule_t rule,
                                  const config_file_override_t *over, config_errors_t *errs)
{
    loader_t *ld = new_loader(name, rule, errs);
    config_t *cfg = NULL;

    if (!ld)
        return NULL;
    ld->text = text;
    ld->over = over;
    cfg = load(ld);
    free(ld);
    return cfg;
}

config_t *config_load_file(const char *path, config_errors_t *errs)
{
    return config_load_file_with(path, NULL, errs);
}

config_t *config_load_string(const char *text, const char *name, config_errors_t *errs)
{
    return config_load_string_with(text, name, NULL, errs);
}

const char *config_bus_sim_slaves(const config_bus_t *bus)
{
    bool sim = bus->port_kind == CONFIG_PORT_SIM || bus->port_kind == CONFIG_PORT_SIM_PACED;
    const char *colon = sim ? strchr(bus->port, ':') : NULL;
    return colon ? colon + 1 : NULL;
}

void config_free(config_t *cfg)
{
    if (!cfg)
        return;
    tags_table_free(cfg->tags);
    free(cfg->buses);
    free(cfg->devices);
    free(cfg->polls);
    free(cfg->serial_slaves);
    for (unsigned i = 0; i < cfg->map_count; i++)
        free(cfg->maps[i].entries);
    free(cfg->maps);
    free(cfg);
}

/* n entries of size bytes from src, or NULL for none; *ok cleared when out of memory. */
static void *copy_table(const void *src, unsigned n, size_t size, bool *ok)
{
    if (!n)
        return NULL;
    void *t = malloc((size_t)n * size);
    if (!t)
        *ok = false;
    else
        memcpy(t, src, (size_t)n * size);
    return t;
}

/* *table (of *count entries) replaced by a copy of n entries of src. */
static int set_table(void **table, unsigned *count, const void *src, unsigned n, size_t size)
{
    bool ok = true;
    void *t = copy_table(src, n, size, &ok);
    if (!ok)
        return -ENOMEM;
    free(*table);
    *table = t;
    *count = n;
    return 0;
}

int config_set_devices(config_t *cfg, const config_device_t *devices, unsigned n)
{
    return set_table((void **)&cfg->devices, &cfg->device_count, devices, n, sizeof *devices);
}

int config_set_polls(config_t *cfg, const config_poll_t *polls, unsigned n)
{
    return set_table((void **)&cfg->polls, &cfg->poll_count, polls, n, sizeof *polls);
}

config_t *config_copy(const config_t *cfg)
{
    config_t *c = malloc(sizeof *c);
    bool ok = true;

    if (!c)
        return NULL;
    *c = *cfg;
    c->tags = NULL;   /* the caller's: the running tags are a copy of their own */
    c->buses = copy_table(cfg->buses, cfg->bus_count, sizeof *cfg->buses, &ok);
    c->devices = copy_table(cfg->devices, cfg->device_count, sizeof *cfg->devices, &ok);
    c->polls = copy_table(cfg->polls, cfg->poll_count, sizeof *cfg->polls, &ok);
    c->serial_slaves = copy_table(cfg->serial_slaves, cfg->serial_slave_count, sizeof *cfg->serial_slaves, &ok);
    c->maps = copy_table(cfg->maps, cfg->map_count, sizeof *cfg->maps, &ok);
    for (unsigned i = 0; c->maps && i < cfg->map_count; i++)
        c->maps[i].entries = copy_table(cfg->maps[i].entries, cfg->maps[i].entry_count, sizeof *cfg->maps[i].entries, &ok);
    if (!c->maps)
        c->map_count = 0;
    if (!ok) {
        config_free(c);
        return NULL;
    }
    return c;
}

/* The services off by default are named when on: a section present is on,
 * so check says which of them the file turns on. */
int config_summary(const config_t *cfg, char *buf, size_t cap)
{
    size_t tags = cfg->tags ? tags_table_count(cfg->tags) : 0;
    return snprintf(buf, cap, "%u bus%s, %u device%s, %u poll group%s, %zu tag%s, tcp %s, http %s%s%s%s%s",
                    cfg->bus_count, cfg->bus_count == 1 ? "" : "es", cfg->device_count,
                    cfg->device_count == 1 ? "" : "s", cfg->poll_count, cfg->poll_count == 1 ? "" : "s",
                    tags, tags == 1 ? "" : "s", cfg->tcp.enabled ? "on" : "off", cfg->http.enabled ? "on" : "off",
                    cfg->rtu_tcp.enabled ? ", rtu_tcp on" : "", cfg->udp.enabled ? ", udp on" : "",
                    cfg->tls.enabled ? ", tls on" : "",
                    cfg->mqtt_enabled ? ", mqtt on" : "");
}
