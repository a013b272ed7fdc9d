/*
 * config/transports.c -- what the transports add to the file: a bus's
 * framing (rtu, ascii, tcp) and tcp:// ports, the [rtu_tcp] front end (the
 * keys of [tcp], RTU frames instead of MBAP) and [serial_slave NAME] (a
 * serial master in front of rtugw). keys.c holds their key tables; this
 * file their own values, the rules between a bus's keys (a key that has no
 * effect on the port or framing given is an error, like an unknown key),
 * and their references once the file is read.
 */
#include "config/internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

void transports_defaults(config_t *cfg)
{
    cfg->rtu_tcp = (config_tcp_t){ .enabled = false, .bind = "127.0.0.1", .port = 1503, .max_clients = 32,
                                   .idle_timeout_s = 300, .max_pending = 16, .adu_timeout_ms = 2000,
                               .bus_share = 4, .loops = 1 };
    cfg->udp = (config_tcp_t){ .enabled = false, .bind = "127.0.0.1", .port = 502, .max_clients = 64,
                               .max_pending = 8 };
}

/* [udp] listen = ADDR:PORT: an IPv4 address to bind (0.0.0.0: all) and a
 * port; giving it turns the front end on. */
bool transports_set_udp_listen(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_tcp_t *udp = ld->target;
    const char *colon = strrchr(value, ':');
    size_t len = colon ? (size_t)(colon - value) : 0;
    char addr[sizeof udp->bind];
    struct in_addr a;
    unsigned port;
    (void)number;
    if (!colon || len == 0 || len >= sizeof addr || config_parse_uint(colon + 1, 1, 65535, &port) != 0) {
        config_bad_value(ld, k->name, value, "expected ADDR:PORT, e.g. 0.0.0.0:502 (PORT 1..65535)");
        return false;
    }
    memcpy(addr, value, len);
    addr[len] = 0;
    if (inet_pton(AF_INET, addr, &a) != 1) {
        config_bad_value(ld, k->name, value, "ADDR must be an IPv4 address (0.0.0.0 for every interface)");
        return false;
    }
    memcpy(udp->bind, addr, len + 1);
    udp->port = port;
    udp->enabled = true;
    return true;
}

void transports_bus_defaults(config_bus_t *bus)
{
    bus->framing = CONFIG_FRAMING_RTU;
    bus->connect_timeout_ms = 3000;
    bus->frame_silence_ms = 50;
    bus->char_timeout_ms = 1000;
    bus->max_inflight = 1;
}

bool transports_set_framing(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    static const char *const names[] = { "rtu", "ascii", "tcp" };
    config_bus_t *bus = ld->target;
    (void)number;
    for (unsigned i = 0; i < COUNT(names); i++) {
        if (strcmp(value, names[i]) == 0) {
            bus->framing = (config_framing_t)i;
            return true;
        }
    }
    config_bad_value(ld, k->name, value, "expected rtu, ascii or tcp (a Modbus TCP device)");
    return false;
}

/* Answers to a Modbus TCP device's requests carry their transaction id, so
 * more than one could be on its connection at once; the bus actor asks one
 * question at a time (docs/drivers.md says why 1 for now). */
bool transports_set_max_inflight(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    unsigned n;
    (void)number;
    if (config_parse_uint(value, 1, 1, &n) != 0) {
        config_bad_value(ld, k->name, value, "only 1 is supported: one request at a time on the device's "
                                             "connection");
        return false;
    }
    ((config_bus_t *)ld->target)->max_inflight = n;
    return true;
}

/* A host name: letters, digits, hyphens and dots (RFC 1123), labels 1..63
 * long (drivers/tcp.c's driver_tcp_host_name_ok, which config/ may not call). */
static bool host_name_ok(const char *host)
{
    size_t label = 0, n = strlen(host);
    if (n == 0 || host[0] == '.' || host[0] == '-' || host[n - 1] == '.')
        return false;
    for (const char *p = host; *p; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (*p == '.' ? label == 0 : !alnum && *p != '-')
            return false;
        label = *p == '.' ? 0 : label + 1;
        if (label > 63)
            return false;
    }
    return true;
}

/* tcp://HOST:PORT or udp://HOST:PORT, HOST an IPv4 address or a host name:
 * a name is resolved on each connect (or, for udp, each open of the
 * socket), on a thread of its own (drivers/resolve.c), never blocking the
 * I/O loop. A udp:// port is Modbus UDP: MBAP in datagrams, so its framing
 * is tcp (transports_check_bus refuses another one written). */
bool transports_split_port(const char *value, size_t scheme_len, config_bus_t *bus, char *host, unsigned *port)
{
    const char *start = value + scheme_len, *colon = strrchr(start, ':');
    size_t len = colon ? (size_t)(colon - start) : 0;
    if (!colon || len == 0 || len >= sizeof bus->tcp_host || config_parse_uint(colon + 1, 1, 65535, port) != 0 ||
        strlen(value) >= sizeof bus->port)
        return false;
    memcpy(host, start, len);
    host[len] = 0;
    return true;
}

bool transports_set_tcp_port(loader_t *ld, const key_spec_t *k, const char *value, config_bus_t *bus)
{
    char text[sizeof bus->tcp_host];
    struct in_addr a;
    unsigned port;

    if (!transports_split_port(value, 6, bus, text, &port)) {
        config_bad_value(ld, k->name, value, "expected tcp://HOST:PORT or udp://HOST:PORT, e.g. tcp://10.0.0.5:4001 "
                                             "(PORT 1..65535)");
        return false;
    }
    if (inet_pton(AF_INET, text, &a) != 1 && !host_name_ok(text)) {
        config_bad_value(ld, k->name, value, "HOST must be an IPv4 address or a host name (letters, digits, "
                                             "hyphens and dots)");
        return false;
    }
    snprintf(bus->tcp_host, sizeof bus->tcp_host, "%s", text);
    bus->tcp_port = port;
    snprintf(bus->port, sizeof bus->port, "%s", value);
    bus->port_kind = value[0] == 'u' ? CONFIG_PORT_UDP : CONFIG_PORT_TCP;
    if (bus->port_kind == CONFIG_PORT_UDP)
        bus->framing = CONFIG_FRAMING_TCP;
    return true;
}

bool transports_set_slave_port(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_serial_slave_t *ss = ld->target;
    (void)number;
    ss->port_line = ld->line;
    if (strncmp(value, "sim", 3) == 0 || strncmp(value, "tcp://", 6) == 0 || strncmp(value, "udp://", 6) == 0 ||
        !*value ||
        strlen(value) >= sizeof ss->port) {
        config_bad_value(ld, k->name, value, "expected the path of a serial port or pseudo-terminal");
        return false;
    }
    snprintf(ss->port, sizeof ss->port, "%s", value);
    return true;
}

void *transports_new_serial_slave(loader_t *ld, const char *name, unsigned *first)
{
    config_t *cfg = ld->cfg;
    for (unsigned i = 0; i < cfg->serial_slave_count; i++) {
        if (strcmp(cfg->serial_slaves[i].name, name) == 0) {
            *first = cfg->serial_slaves[i].line;
            return NULL;
        }
    }
    if (cfg->serial_slave_count == CONFIG_MAX_SERIAL_SLAVES) {
        config_error_at(ld, ld->header_line, "[%s]: more than %d serial slaves (the limit of one configuration)",
                        ld->section, CONFIG_MAX_SERIAL_SLAVES);
        return NULL;
    }
    if (config_grow((void **)&cfg->serial_slaves, sizeof *cfg->serial_slaves, (void **)&ld->transports.slave_unit,
                    sizeof *ld->transports.slave_unit, cfg->serial_slave_count, &ld->serial_slave_cap) != 0) {
        config_error_at(ld, ld->header_line, "[%s]: out of memory", ld->section);
        return NULL;
    }
    config_serial_slave_t *ss = &cfg->serial_slaves[cfg->serial_slave_count++];
    *ss = (config_serial_slave_t){ .baud = 19200, .parity = 'E', .data_bits = 8, .stop_bits = 1,
                                   .answer_timeout_ms = 800, .line = ld->header_line };
    snprintf(ss->name, sizeof ss->name, "%s", name);
    return ss;
}

/* ---- a bus's keys against its port and framing -------------------------------- */

static const seen_key_t *given(const loader_t *ld, const char *name)
{
    for (unsigned i = 0; i < ld->seen_count; i++)
        if (ld->seen[i].accepted && strcmp(ld->seen[i].spec->name, name) == 0)
            return &ld->seen[i];
    return NULL;
}

/* Each key in names, if given, is refused with why. */
static void refuse_keys(loader_t *ld, const char *const *names, size_t n, const char *why)
{
    for (size_t i = 0; i < n; i++) {
        const seen_key_t *s = given(ld, names[i]);
        if (s)
            config_error_at(ld, s->line, "[%s] %s = '%s': %s", ld->section, names[i], s->value, why);
    }
}

void transports_check_bus(loader_t *ld, const config_bus_t *bus)
{
    static const char *const rs485[] = { "rs485", "rts_after_send", "rts_delay_before_us", "rts_delay_after_us",
                                         "rx_during_tx", "echo_suppress" };
    static const char *const line[] = { "baud", "parity", "data_bits", "stop_bits" };
    static const char *const silence[] = { "frame_silence_ms" };
    static const char *const connect[] = { "connect_timeout_ms" };
    static const char *const ascii[] = { "char_timeout_ms" };
    static const char *const inflight[] = { "max_inflight" };
    const seen_key_t *framing = given(ld, "framing");
    bool udp = bus->port_kind == CONFIG_PORT_UDP;
    bool tcp = bus->port_kind == CONFIG_PORT_TCP || udp || bus->port_kind == CONFIG_PORT_LISTEN;
    bool sim = bus->port_kind == CONFIG_PORT_SIM || bus->port_kind == CONFIG_PORT_SIM_PACED;

    if (!given(ld, "port"))
        return;   /* its own error (or none given) says enough; the rest depends on it */
    if (framing && bus->framing == CONFIG_FRAMING_TCP && !tcp && bus->port_kind != CONFIG_PORT_LISTEN)
        config_error_at(ld, framing->line, "[%s] framing = 'tcp': a Modbus TCP device needs port = tcp://HOST:PORT",
                        ld->section);
    if (framing && udp && strcmp(framing->value, "tcp") != 0)
        config_error_at(ld, framing->line, "[%s] framing = '%s': a udp:// port is Modbus UDP, MBAP in datagrams "
                        "(framing = tcp, the default there)", ld->section, framing->value);
    if (framing && bus->framing == CONFIG_FRAMING_ASCII && sim)
        config_error_at(ld, framing->line, "[%s] framing = 'ascii': the built-in simulator speaks RTU only",
                        ld->section);
    if (tcp)
        refuse_keys(ld, rs485, COUNT(rs485), "a tcp:// or udp:// port drives no RS-485 line of its own");
    else
        refuse_keys(ld, connect, COUNT(connect), "only for port = tcp://, udp:// or listen:// (there: the "
                                                 "registration's timeout)");
    if (bus->framing == CONFIG_FRAMING_TCP)
        refuse_keys(ld, line, COUNT(line), "a Modbus TCP device (framing = tcp) has no serial line");
    if (!config_bus_stream(bus) && !bus->listen)   /* listen: config/listen.c */
        refuse_keys(ld, silence, COUNT(silence),
                    "only for port = tcp://... with framing = rtu (a serial line's frames end at t3.5, "
                    "ASCII and MBAP frames end by their own delimiters)");
    if (bus->framing != CONFIG_FRAMING_ASCII)
        refuse_keys(ld, ascii, COUNT(ascii), "only for framing = ascii");
    if (bus->framing != CONFIG_FRAMING_TCP)
        refuse_keys(ld, inflight, COUNT(inflight), "only for framing = tcp");
}

/* ---- after the file ---------------------------------------------------------------- */

void config_resolve_units(loader_t *ld, const char *section, const pending_ref_t *refs, config_route_t *routes)
{
    for (unsigned u = 0; u < 256; u++) {
        if (!refs[u].name[0] || !routes[u].set)
            continue;
        int b = config_find_bus(ld->cfg, refs[u].name);
        if (b < 0)
            config_error_at(ld, refs[u].line, "[%s] unit%u = '%s:...': no such bus", section, u, refs[u].name);
        else
            routes[u].bus = (unsigned)b;
    }
}

/* A front end's default_bus and unitN routes ([rtu_tcp], [udp]). */
static void resolve_routes(loader_t *ld, const char *section, const pending_ref_t *def, const pending_ref_t *units,
                           config_tcp_t *fe)
{
    if (def->name[0]) {
        int b = config_find_bus(ld->cfg, def->name);
        if (b < 0)
            config_error_at(ld, def->line, "[%s] default_bus = '%s': no such bus", section, def->name);
        else
            fe->default_bus = (unsigned)b;
    }
    config_resolve_units(ld, section, units, fe->unit);
}

static void resolve_rtu_tcp(loader_t *ld)
{
    config_t *cfg = ld->cfg;

    resolve_routes(ld, "rtu_tcp", &ld->transports.rtu_tcp_default_bus, ld->transports.rtu_tcp_unit, &cfg->rtu_tcp);
    if (!cfg->rtu_tcp.enabled)
        return;
    if (cfg->bus_count == 0)
        config_error_at(ld, 0, "rtu_tcp is enabled but no [bus NAME] is configured");
    if (cfg->tcp.enabled && cfg->tcp.port == cfg->rtu_tcp.port && strcmp(cfg->tcp.bind, cfg->rtu_tcp.bind) == 0)
        config_error_at(ld, 0, "[tcp] and [rtu_tcp] both use %s:%u", cfg->tcp.bind, cfg->tcp.port);
    if (cfg->http.enabled && cfg->http.port == cfg->rtu_tcp.port && strcmp(cfg->http.bind, cfg->rtu_tcp.bind) == 0)
        config_error_at(ld, 0, "[rtu_tcp] and [http] both use %s:%u", cfg->http.bind, cfg->http.port);
}

/* A path that a bus or an earlier serial slave opens already: two readers
 * on one port steal each other's bytes. */
static void check_port_unshared(loader_t *ld, unsigned index)
{
    const config_t *cfg = ld->cfg;
    const config_serial_slave_t *ss = &cfg->serial_slaves[index];

    for (unsigned b = 0; b < cfg->bus_count; b++)
        if (cfg->buses[b].port_kind == CONFIG_PORT_DEVICE && strcmp(cfg->buses[b].port, ss->port) == 0)
            config_error_at(ld, ss->port_line, "[serial_slave %s] port = '%s': also the port of [bus %s]",
                            ss->name, ss->port, cfg->buses[b].name);
    for (unsigned j = 0; j < index; j++)
        if (strcmp(cfg->serial_slaves[j].port, ss->port) == 0)
            config_error_at(ld, ss->port_line, "[serial_slave %s] port = '%s': also the port of [serial_slave %s]",
                            ss->name, ss->port, cfg->serial_slaves[j].name);
}

static void resolve_serial_slave(loader_t *ld, unsigned index)
{
    config_serial_slave_t *ss = &ld->cfg->serial_slaves[index];
    char section[CONFIG_NAME_MAX + 16];
    unsigned routes = 0;

    snprintf(section, sizeof section, "serial_slave %s", ss->name);
    config_resolve_units(ld, section, ld->transports.slave_unit[index], ss->unit);
    for (unsigned u = 0; u < 256; u++)
        routes += ss->unit[u].set;
    if (!ss->port_line)
        config_error_at(ld, ss->line, "[%s]: port is required", section);
    else if (ss->port[0])
        check_port_unshared(ld, index);
    if (!routes)
        config_error_at(ld, ss->line, "[%s]: answers as no slave: route one with unitN = BUS:SLAVE", section);
}

static void resolve_udp(loader_t *ld)
{
    config_t *cfg = ld->cfg;

    resolve_routes(ld, "udp", &ld->transports.udp_default_bus, ld->transports.udp_unit, &cfg->udp);
    if (ld->single_line[S_UDP] && !cfg->udp.enabled)
        config_error_at(ld, ld->single_line[S_UDP], "[udp]: listen = ADDR:PORT is required");
    if (cfg->udp.enabled && cfg->bus_count == 0)
        config_error_at(ld, 0, "[udp] is enabled but no [bus NAME] is configured");
}

void transports_resolve(loader_t *ld)
{
    resolve_rtu_tcp(ld);
    resolve_udp(ld);
    for (unsigned i = 0; i < ld->cfg->serial_slave_count; i++)
        resolve_serial_slave(ld, i);
}
