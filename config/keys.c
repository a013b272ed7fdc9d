/*
 * config/keys.c -- the keys of each section and their values.
 *
 * Keys are described by tables (name, type, offset, range), so adding a key is
 * one line and its validation comes with it; a key whose value is a list or
 * names another section has its own setter in the table. Every key a section
 * takes is in its table: the loader finds duplicates and unknown keys there.
 */
#include "config/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool set_ref(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_unit(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_allow(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_priority_clients(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_priority_units(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_priority_functions(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_buckets(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_policy(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_copies(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_cpu_latency(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);

#define U(s, f, lo, hi) { .name = #f, .type = K_UINT, .offset = offsetof(s, f), .min = lo, .max = hi }
#define B(s, f) { .name = #f, .type = K_BOOL, .offset = offsetof(s, f) }
#define T(s, f, t) { .name = #f, .type = t, .offset = offsetof(s, f) }
#define C(key, fn) { .name = key, .type = K_CUSTOM, .set = fn }
/* A serial line's character format and transceiver: [bus] and [serial_slave]. */
#define LINE_KEYS(s) U(s, baud, 300, 4000000), T(s, parity, K_PARITY), U(s, data_bits, 7, 8), \
                     U(s, stop_bits, 1, 2), T(s, rs485, K_RS485)

static const key_spec_t gateway_keys[] = {
    U(config_t, workers, 0, 256),
    B(config_t, buses_on_io_thread),
    B(config_t, line_thread),
    U(config_t, line_thread_priority, 0, 99),
    C("cpu_latency_us", set_cpu_latency),
    T(config_t, log_level, K_LOG),
    { .name = "data_dirs", .type = K_STRING, .offset = offsetof(config_t, data_dirs), .min = 1,
      .max = CONFIG_PATH_MAX },
    { .name = "log_target", .type = K_LOGTARGET, .offset = offsetof(config_t, log_syslog) },
    C("addressing", config_tags_set_addressing),
};

static const key_spec_t bus_keys[] = {
    { .name = "port", .type = K_PORT, .offset = offsetof(config_bus_t, port), .min = 1, .max = CONFIG_PATH_MAX },
    LINE_KEYS(config_bus_t),
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
    U(config_bus_t, priority_hold_us, 0, 100000),
    U(config_bus_t, poll_share, 0, 50),
    C("copies", set_copies),
    /* transports (transports.c checks which ports and framings take them) */
    C("framing", transports_set_framing),
    C("register", dialin_set_bytes),
    C("heartbeat", dialin_set_bytes),
    U(config_bus_t, connect_timeout_ms, 1, 600000),
    U(config_bus_t, frame_silence_ms, 1, 10000),
    U(config_bus_t, char_timeout_ms, 1, 10000),
    C("max_inflight", transports_set_max_inflight),
    C("mode", listen_set_mode),
    U(config_bus_t, listen_late_factor, 1, 100),
};

static const key_spec_t device_keys[] = {
    C("bus", set_ref),
    U(config_device_t, slave, 1, 247),
    U(config_device_t, timeout_ms, 0, 60000),
    U(config_device_t, dead_after, 0, 1000),
    U(config_device_t, dead_backoff_ms, 0, 3600000),
    C("order", config_tags_set_device),
    C("addressing", config_tags_set_addressing),
    C("tags_file", config_tags_set_device),
    C("template", config_tags_set_device),
    U(config_device_t, interval_ms, 1, 86400000),
    U(config_device_t, max_read_registers, 1, 125),
    U(config_device_t, max_read_bits, 1, 2000),
    U(config_device_t, max_gap, 0, 125),
    C("mqtt_publish", config_mqtt_set_device_publish),
    U(config_device_t, mqtt_interval_ms, 100, 86400000),
    B(config_device_t, confirm_write),
    B(config_device_t, widen_reads),
};

static const key_spec_t poll_keys[] = {
    C("device", set_ref),
    U(config_poll_t, function, 1, 4),
    U(config_poll_t, address, 0, 65535),
    U(config_poll_t, count, 1, 2000),
    U(config_poll_t, interval_ms, 10, 86400000),
    U(config_poll_t, serve_cached_ms, 0, 86400000),
};

static const key_spec_t tcp_keys[] = {
    B(config_tcp_t, enabled),
    /* gateway/ binds with inet_pton: a host name would pass here and fail there */
    { .name = "bind", .type = K_IPV4, .offset = offsetof(config_tcp_t, bind), .min = 1, .max = 64 },
    U(config_tcp_t, port, 1, 65535),
    U(config_tcp_t, max_clients, 1, CONFIG_MAX_CLIENTS),
    U(config_tcp_t, idle_timeout_s, 0, 86400),
    U(config_tcp_t, max_pending, 1, 64),
    U(config_tcp_t, max_per_address, 0, CONFIG_MAX_CLIENTS),
    U(config_tcp_t, adu_timeout_ms, 10, 600000),
    B(config_tcp_t, read_only),
    C("default_bus", set_ref),
    C("allow", set_allow),
    U(config_tcp_t, bus_share, 1, 4096),
    U(config_tcp_t, loops, 0, CONFIG_MAX_TCP_LOOPS),   /* 0: one per CPU (config.c) */
    C("priority_clients", set_priority_clients),
    C("priority_units", set_priority_units),
    C("priority_functions", set_priority_functions),
    { .name = "unit", .type = K_CUSTOM, .numbered = 255, .set = set_unit },
};

static const key_spec_t serial_slave_keys[] = {
    C("port", transports_set_slave_port),
    LINE_KEYS(config_serial_slave_t),
    B(config_serial_slave_t, echo_suppress),
    U(config_serial_slave_t, answer_timeout_ms, 10, 60000),
    { .name = "unit", .type = K_CUSTOM, .numbered = 255, .set = set_unit },
};

static const key_spec_t http_keys[] = {
    B(config_http_t, enabled),
    { .name = "bind", .type = K_IPV4, .offset = offsetof(config_http_t, bind), .min = 1, .max = 64 },
    U(config_http_t, port, 1, 65535),
    U(config_http_t, max_connections, 1, 1024),
    U(config_http_t, max_header_bytes, 1024, 1048576),
    U(config_http_t, max_body_bytes, 0, 16777216),
    U(config_http_t, request_timeout_ms, 100, 600000),
    U(config_http_t, idle_timeout_s, 1, 86400),
    B(config_http_t, tag_metrics),
    C("write_token", config_set_write_token),
    U(config_http_t, frame_ring, 0, 4096),
    { .name = "tls_cert", .type = K_PATH, .offset = offsetof(config_http_t, tls_cert), .min = 1,
      .max = CONFIG_PATH_MAX },
    { .name = "tls_key", .type = K_PATH, .offset = offsetof(config_http_t, tls_key), .min = 1,
      .max = CONFIG_PATH_MAX },
    U(config_http_t, session_timeout_s, 60, 604800),
    U(config_http_t, max_sessions, 1, 1024),
    U(config_http_t, max_sessions_per_user, 1, 1024),
    B(config_http_t, metrics_open),
    C("server_names", users_set_server_names),
    C("tls_ciphers", users_set_ciphers),
    C("tls_min_version", users_set_tls_min_version),
};

/* [user NAME] (config/users.c) */
static const key_spec_t user_keys[] = {
    C("password_hash", users_set_password_hash),
    C("role", users_set_role),
};

/* MB-TCP-Security (config/security.c) */
static const key_spec_t tls_keys[] = {
    B(config_tls_t, enabled),
    { .name = "bind", .type = K_IPV4, .offset = offsetof(config_tls_t, bind), .min = 1, .max = 64 },
    U(config_tls_t, port, 1, 65535),
    { .name = "cert_file", .type = K_PATH, .offset = offsetof(config_tls_t, cert_file), .min = 1,
      .max = CONFIG_PATH_MAX },
    { .name = "key_file", .type = K_PATH, .offset = offsetof(config_tls_t, key_file), .min = 1,
      .max = CONFIG_PATH_MAX },
    { .name = "ca_file", .type = K_PATH, .offset = offsetof(config_tls_t, ca_file), .min = 1,
      .max = CONFIG_PATH_MAX },
    { .name = "crl_file", .type = K_PATH, .offset = offsetof(config_tls_t, crl_file), .max = CONFIG_PATH_MAX },
    C("min_version", security_set_min_version),
    C("ciphers", users_set_ciphers),
    U(config_tls_t, session_cache, 0, 10000),
    U(config_tls_t, handshake_timeout_ms, 100, 60000),
    U(config_tls_t, max_handshakes, 1, CONFIG_MAX_HANDSHAKES),
    U(config_tls_t, max_handshakes_per_address, 0, CONFIG_MAX_HANDSHAKES),
    C("default_role", security_set_default_role),
};

static const key_spec_t role_keys[] = {
    C("functions", security_set_functions),
    C("units", security_set_units),
    C("buses", security_set_buses),
    B(config_role_t, priority),
};

static const key_spec_t router_keys[] = {
    { .name = "exploration", .type = K_DOUBLE, .offset = offsetof(config_router_t, exploration), .max = 1 },
    U(config_router_t, sample_every, 1, 1000000),
    U(config_router_t, explore_run, 1, 1024),
    { .name = "verify_rate", .type = K_DOUBLE, .offset = offsetof(config_router_t, verify_rate), .max = 1 },
    C("buckets", set_buckets),
    { .name = "state_file", .type = K_PATH, .offset = offsetof(config_router_t, state_file),
      .max = CONFIG_PATH_MAX },
    C("policy", set_policy),
};

/* [tag NAME]: the CSV's columns; tags.c sets and checks them. */
static const key_spec_t tag_keys[] = {
    C("device", config_tags_set), C("table", config_tags_set), C("address", config_tags_set),
    C("type", config_tags_set), C("order", config_tags_set), C("scale", config_tags_set),
    C("offset", config_tags_set), C("unit", config_tags_set), C("deadband", config_tags_set), C("decimals", config_tags_set),
    C("writable", config_tags_set), C("interval_ms", config_tags_set), C("description", config_tags_set),
    C("confirm_write", config_tags_set), C("expr", config_tags_set),
    C("inverse", config_tags_set), C("inverse_target", config_tags_set),
};

/* [template NAME]: a register list and its defaults (config/tags.c). */
static const key_spec_t template_keys[] = {
    C("tags_file", config_tags_set_template),
    C("order", config_tags_set_template),
    U(config_template_t, interval_ms, 1, 86400000),
};

/* [udp]: Modbus UDP requests, routed as [tcp]'s (config/transports.c). */
static const key_spec_t udp_keys[] = {
    C("listen", transports_set_udp_listen),
    C("default_bus", set_ref),
    { .name = "unit", .type = K_CUSTOM, .numbered = 255, .set = set_unit },
    B(config_tcp_t, read_only),
    C("allow", set_allow),
    U(config_tcp_t, max_pending, 1, 64),
    U(config_tcp_t, max_clients, 1, 4096),
};

/* [map NAME] (maps.c): each value checked there */
static const key_spec_t map_keys[] = {
    U(config_map_t, unit, 1, 255),
    C("registers", config_maps_set),
    C("gaps", config_maps_set),
    C("stale", config_maps_set),
    C("quality_register", config_maps_set),
    { .name = "entry", .type = K_CUSTOM, .numbered = 255, .set = config_maps_set },
    C("device_registers", config_maps_set),
    { .name = "device", .type = K_CUSTOM, .numbered = 255, .set = config_maps_set },
};

const section_kind_t config_section_kinds[S_COUNT] = {
    [S_GATEWAY] = { "gateway", false, gateway_keys, COUNT(gateway_keys) },
    [S_BUS] = { "bus", true, bus_keys, COUNT(bus_keys) },
    [S_DEVICE] = { "device", true, device_keys, COUNT(device_keys) },
    [S_POLL] = { "poll", true, poll_keys, COUNT(poll_keys) },
    [S_TCP] = { "tcp", false, tcp_keys, COUNT(tcp_keys) },
    [S_HTTP] = { "http", false, http_keys, COUNT(http_keys) },
    [S_ROUTER] = { "router", false, router_keys, COUNT(router_keys) },
    [S_TAG] = { "tag", true, tag_keys, COUNT(tag_keys) },
    [S_TLS] = { "tls", false, tls_keys, COUNT(tls_keys) },
    [S_ROLE] = { "role", true, role_keys, COUNT(role_keys) },
    /* [rtu_tcp] takes [tcp]'s keys: the same front end with RTU frames */
    [S_RTU_TCP] = { "rtu_tcp", false, tcp_keys, COUNT(tcp_keys) },
    [S_SERIAL_SLAVE] = { "serial_slave", true, serial_slave_keys, COUNT(serial_slave_keys) },
    [S_MQTT] = { "mqtt", false, config_mqtt_keys, CONFIG_MQTT_KEYS },
    [S_USER] = { "user", true, user_keys, COUNT(user_keys) },
    [S_TEMPLATE] = { "template", true, template_keys, COUNT(template_keys) },
    [S_UDP] = { "udp", false, udp_keys, COUNT(udp_keys) },
    [S_MAP] = { "map", true, map_keys, COUNT(map_keys) },
};

const key_spec_t *config_find_key(int kind, const char *key, unsigned *number)
{
    const section_kind_t *sk = &config_section_kinds[kind];

    *number = 0;
    for (size_t i = 0; i < sk->nkeys; i++) {
        const key_spec_t *k = &sk->keys[i];
        size_t n = strlen(k->name);
        if (!k->numbered && strcmp(k->name, key) == 0)
            return k;
        if (k->numbered && strncmp(k->name, key, n) == 0 &&
            config_parse_uint(key + n, 0, k->numbered, number) == 0)
            return k;
    }
    return NULL;
}

void config_bad_value(loader_t *ld, const char *key, const char *value, const char *why)
{
    config_error_at(ld, ld->line, "[%s] %s = '%s': %s", ld->section, key, value, why);
}

bool config_valid_name(const char *n)
{
    if (!*n || strlen(n) >= CONFIG_NAME_MAX)
        return false;
    for (; *n; n++)
        if (!(*n == '_' || *n == '-' || *n == '.' || (*n >= '0' && *n <= '9') ||
              (*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z')))
            return false;
    return true;
}

/* ---- values ----------------------------------------------------------- */

/* Digits only: strtoul alone would also take " 5", "+5" and "-1" (as ULONG_MAX - 0). */
int config_parse_uint(const char *v, double min, double max, unsigned *out)
{
    char *end;
    errno = 0;
    if (*v < '0' || *v > '9')
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

/* Index of value among names (any case), or -1. */
static int parse_choice(const char *v, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(v, names[i]) == 0)
            return (int)i;
    return -1;
}

static bool set_string(loader_t *ld, const key_spec_t *k, const char *value, char *field)
{
    char range[96];
    size_t len = strlen(value);
    if (len < k->min || len >= k->max) {
        snprintf(range, sizeof range, "expected %.0f to %.0f characters", k->min, k->max - 1);
        config_bad_value(ld, k->name, value, range);
        return false;
    }
    memcpy(field, value, len + 1);
    return true;
}

/*
 * "sim", "sim-paced", either followed by ":LIST", or a device path. What LIST
 * may hold is the simulator's rule (drivers/), applied through the bus rule;
 * here only its place: after the colon, and not empty. The kind of port is
 * stored only when the whole value is good.
 */
static bool set_port(loader_t *ld, const key_spec_t *k, const char *value, config_bus_t *bus)
{
    config_port_kind_t kind = CONFIG_PORT_DEVICE;
    const char *rest = value;

    bus->port_line = ld->line;
    if (strncmp(value, "tcp://", 6) == 0 || strncmp(value, "udp://", 6) == 0)
        return transports_set_tcp_port(ld, k, value, bus);
    if (strncmp(value, "listen://", 9) == 0)
        return dialin_set_port(ld, k, value, bus);

    if (strncmp(value, "sim-paced", 9) == 0) {
        kind = CONFIG_PORT_SIM_PACED;
        rest = value + 9;
    } else if (strncmp(value, "sim", 3) == 0 && (value[3] == 0 || value[3] == ':')) {
        kind = CONFIG_PORT_SIM;
        rest = value + 3;
    }
    if (kind != CONFIG_PORT_DEVICE && *rest && (*rest != ':' || !rest[1])) {
        config_bad_value(ld, k->name, value,
                         "expected sim or sim-paced, optionally :SLAVE,SLAVE,... (e.g. sim:1,2,3)");
        return false;
    }
    if (!set_string(ld, k, value, bus->port))
        return false;
    bus->port_kind = kind;
    return true;
}

static bool set_number(loader_t *ld, const key_spec_t *k, const char *value, char *field)
{
    char range[96];
    unsigned u;
    double d;
    char *end;

    if (k->type == K_UINT) {
        if (config_parse_uint(value, k->min, k->max, &u) != 0) {
            snprintf(range, sizeof range, "expected a whole number %.0f..%.0f", k->min, k->max);
            config_bad_value(ld, k->name, value, range);
            return false;
        }
        memcpy(field, &u, sizeof u);
        return true;
    }
    errno = 0;
    d = strtod(value, &end);
    if (errno || *end || end == value || !isfinite(d) || d < k->min || d > k->max) {
        snprintf(range, sizeof range, "expected a number %g..%g", k->min, k->max);
        config_bad_value(ld, k->name, value, range);
        return false;
    }
    memcpy(field, &d, sizeof d);
    return true;
}

/* Keys whose value is one of a few words: stored as the word's index. */
static bool set_choice(loader_t *ld, const key_spec_t *k, const char *value, char *field)
{
    static const char *const parities[] = { "none", "even", "odd", "N", "E", "O" };
    static const char *const rs485[] = { "off", "ioctl", "rts" };
    static const char *const levels[] = { "error", "warn", "info", "debug" };
    int i;

    switch (k->type) {
    case K_PARITY:
        if ((i = parse_choice(value, parities, COUNT(parities))) < 0)
            break;
        *field = "NEO"[i % 3];
        return true;
    case K_RS485:
        if ((i = parse_choice(value, rs485, COUNT(rs485))) < 0)
            break;
        memcpy(field, &(config_rs485_t){ (config_rs485_t)i }, sizeof(config_rs485_t));
        return true;
    case K_LOG:
        if ((i = parse_choice(value, levels, COUNT(levels))) < 0)
            break;
        memcpy(field, &(config_log_t){ (config_log_t)i }, sizeof(config_log_t));
        return true;
    default:   /* K_LOGTARGET: the names are case-sensitive, as syslog(3) spells them */
        if (strcmp(value, "stderr") != 0 && strcmp(value, "syslog") != 0)
            break;
        memcpy(field, &(bool){ strcmp(value, "syslog") == 0 }, sizeof(bool));
        return true;
    }
    config_bad_value(ld, k->name, value,
                     k->type == K_PARITY ? "expected none, even or odd"
                     : k->type == K_RS485 ? "expected off, ioctl or rts"
                     : k->type == K_LOG ? "expected error, warn, info or debug"
                                        : "expected stderr or syslog");
    return false;
}

bool config_set_key(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    char *field = (char *)ld->target + k->offset;
    struct in_addr a;
    bool b;

    switch (k->type) {
    case K_UINT:
    case K_DOUBLE:
        return set_number(ld, k, value, field);
    case K_BOOL:
        if (parse_bool(value, &b) != 0) {
            config_bad_value(ld, k->name, value, "expected true or false");
            return false;
        }
        memcpy(field, &b, sizeof b);
        return true;
    case K_STRING:
        return set_string(ld, k, value, field);
    case K_PATH:
        if (!set_string(ld, k, value, field))
            return false;
        if (ld->path_count < CONFIG_PATH_KEYS_MAX) {
            path_note_t *n = &ld->paths[ld->path_count++];
            *n = (path_note_t){ .key = k->name, .line = ld->line, .field = field, .cap = (size_t)k->max };
            snprintf(n->section, sizeof n->section, "%s", ld->section);
        }
        return true;
    case K_PORT:
        return set_port(ld, k, value, ld->target);
    case K_IPV4:
        if (inet_pton(AF_INET, value, &a) != 1) {
            config_bad_value(ld, k->name, value, "expected an IPv4 address such as 127.0.0.1 or 0.0.0.0");
            return false;
        }
        return set_string(ld, k, value, field);
    case K_PARITY:
    case K_RS485:
    case K_LOG:
    case K_LOGTARGET:
        return set_choice(ld, k, value, field);
    case K_CUSTOM:
        return k->set(ld, k, number, value);
    }
    return false;
}

/* ---- keys with their own setter ------------------------------------------------ */

/* device.bus, poll.device, tcp.default_bus: resolved after the whole file. */
static bool set_ref(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_t *cfg = ld->cfg;
    pending_ref_t *ref = ld->kind == S_DEVICE ? &ld->device_bus[(config_device_t *)ld->target - cfg->devices]
                       : ld->kind == S_POLL   ? &ld->poll_device[(config_poll_t *)ld->target - cfg->polls]
                       : ld->kind == S_RTU_TCP ? &ld->transports.rtu_tcp_default_bus
                       : ld->kind == S_UDP     ? &ld->transports.udp_default_bus
                                              : &ld->default_bus;
    (void)number;
    snprintf(ref->name, sizeof ref->name, "%s", value);
    ref->line = ld->line;
    if (!config_valid_name(value)) {
        config_bad_value(ld, k->name, value, "expected a section name");
        return false;
    }
    return true;
}

/* The route unitN sets in the section being read, and where its bus's name waits. */
static config_route_t *unit_slot(loader_t *ld, unsigned unit, pending_ref_t **ref)
{
    if (ld->kind == S_SERIAL_SLAVE) {
        config_serial_slave_t *ss = ld->target;
        *ref = &ld->transports.slave_unit[ss - ld->cfg->serial_slaves][unit];
        return &ss->unit[unit];
    }
    *ref = ld->kind == S_RTU_TCP ? &ld->transports.rtu_tcp_unit[unit]
         : ld->kind == S_UDP     ? &ld->transports.udp_unit[unit] : &ld->unit_bus[unit];
    return &((config_tcp_t *)ld->target)->unit[unit];
}

/* unitN = BUS:SLAVE | broadcast (unit0 only, not for a serial slave: it has no default bus) | off */
static bool set_unit(loader_t *ld, const key_spec_t *k, unsigned unit, const char *value)
{
    pending_ref_t *ref;
    config_route_t *r = unit_slot(ld, unit, &ref);
    char key[16];
    unsigned slave;

    snprintf(key, sizeof key, "%s%u", k->name, unit);
    *r = (config_route_t){ 0 };
    if (strcmp(value, "off") == 0)
        return true;
    if (unit == 0 && strcmp(value, "broadcast") == 0 && ld->kind != S_SERIAL_SLAVE) {
        r->set = r->broadcast = true;
        return true;
    }
    const char *colon = strchr(value, ':');
    size_t len = colon ? (size_t)(colon - value) : 0;
    if (!colon || len >= CONFIG_NAME_MAX || config_parse_uint(colon + 1, 0, 247, &slave) != 0) {
        config_bad_value(ld, key, value, unit == 0 && ld->kind != S_SERIAL_SLAVE ? "expected BUS:SLAVE, broadcast or off"
                                                   : "expected BUS:SLAVE (slave 0..247) or off");
        return false;
    }
    memcpy(ref->name, value, len);
    ref->name[len] = 0;
    ref->line = ld->line;
    r->set = true;
    r->slave = slave;
    return true;
}

/* Comma-separated IPv4 networks: 127.0.0.1, 10.0.0.0/8 (allow, priority_clients) */
static bool set_networks(loader_t *ld, const key_spec_t *k, const char *value, config_net_t *nets, unsigned *count)
{
    char list[CONFIG_LINE_MAX];

    snprintf(list, sizeof list, "%s", value);
    *count = 0;
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *slash = strchr(tok, '/');
        unsigned bits = 32;
        struct in_addr a;
        const char *why = NULL;
        if (slash) {
            *slash = 0;
            if (config_parse_uint(slash + 1, 0, 32, &bits) != 0)
                why = "prefix length must be 0..32";
        }
        if (!why && inet_pton(AF_INET, tok, &a) != 1)
            why = "expected IPv4 networks like 127.0.0.1 or 10.0.0.0/8";
        if (!why && *count == CONFIG_MAX_ALLOW)
            why = "too many networks (at most 16)";
        if (why) {
            config_bad_value(ld, k->name, value, why);
            return false;
        }
        uint32_t mask = bits ? htonl(~0u << (32 - bits)) : 0;
        nets[(*count)++] = (config_net_t){ a.s_addr & mask, mask };
    }
    return true;
}

static bool set_allow(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_tcp_t *tcp = ld->target;   /* [tcp] or [rtu_tcp] */
    (void)number;
    return set_networks(ld, k, value, tcp->allow, &tcp->allow_count);
}

static bool set_priority_clients(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_tcp_t *tcp = ld->target;
    (void)number;
    return set_networks(ld, k, value, tcp->priority, &tcp->priority_count);
}

/* Unit ids or ranges (1, 5-7, all), function classes (write, diagnostics):
 * the role's parsers (config/security.c). */
static bool set_priority_units(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_tcp_t *tcp = ld->target;
    (void)number;
    if (config_parse_units(value, tcp->priority_units))
        return true;
    config_bad_value(ld, k->name, value, "expected a list of units 0..255 and ranges like 1-10, or all");
    return false;
}

static bool set_priority_functions(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_tcp_t *tcp = ld->target;
    (void)number;
    if (config_parse_function_classes(value, &tcp->priority_functions))
        return true;
    config_bad_value(ld, k->name, value, "expected a list of read, write, diagnostics, file, user, or all");
    return false;
}

/* Ascending upper edges, the last one 256: 8,16,32,64,128,256 */
static bool set_buckets(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_router_t *ro = &ld->cfg->router;
    char list[CONFIG_LINE_MAX];
    unsigned prev = 0, n = 0, edge;

    (void)number;
    snprintf(list, sizeof list, "%s", value);
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (n == CONFIG_MAX_BUCKETS || config_parse_uint(tok, 1, 256, &edge) != 0 || edge <= prev) {
            config_bad_value(ld, k->name, value, "expected up to 16 ascending frame lengths 1..256");
            return false;
        }
        ro->buckets[n++] = prev = edge;
    }
    if (n == 0 || prev != 256) {
        config_bad_value(ld, k->name, value, "the last bucket edge must be 256");
        return false;
    }
    ro->bucket_count = n;
    return true;
}

/* [bus] copies: "detect" (the default: line I4 checks answers equal to the
 * last one for another question) or "none" (the operator vouches that
 * nothing on the line repeats a frame: no repeater, no echoing converter,
 * no slave that sends its answer twice; docs/reliability.md). */
static bool set_copies(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_bus_t *bus = ld->target;
    (void)number;
    if (strcmp(value, "detect") == 0 || strcmp(value, "none") == 0) {
        bus->no_copies = strcmp(value, "none") == 0;
        return true;
    }
    config_bad_value(ld, k->name, value, "expected detect or none");
    return false;
}

_Static_assert(CONFIG_MAX_CPU_LATENCY_US == 1000000, "set_cpu_latency's message says 0..1000000");
/* [gateway] cpu_latency_us: off, or the microseconds an idle CPU may take to
 * wake (daemon/cpu_latency.c holds the request). */
static bool set_cpu_latency(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    char *end;
    (void)number;
    if (strcmp(value, "off") == 0) {
        ld->cfg->cpu_latency_us = -1;
        return true;
    }
    errno = 0;
    unsigned long us = strtoul(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end || errno || us > CONFIG_MAX_CPU_LATENCY_US) {
        config_bad_value(ld, k->name, value, "expected off or 0..1000000 (microseconds)");
        return false;
    }
    ld->cfg->cpu_latency_us = (int)us;
    return true;
}

static bool set_policy(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    /* "epsilon" is the name files written before thompson use */
    if (strcmp(value, "epsilon") != 0 && strcmp(value, "epsilon-greedy") != 0 &&
        strcmp(value, "thompson") != 0) {
        config_bad_value(ld, k->name, value, "expected epsilon-greedy (or epsilon) or thompson");
        return false;
    }
    snprintf(ld->cfg->router.policy, sizeof ld->cfg->router.policy, "%s", value);
    return true;
}
