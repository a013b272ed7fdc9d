/*
 * config/mqtt.c -- [mqtt]: the MQTT client's keys (north_config_t, defined
 * by north/north.h and used by north/), their defaults, and the checks that
 * need the whole file. The section exists only when written: without it, or
 * with enabled = false in it (the rule of every service section, config.c's
 * single_section), cfg->mqtt_enabled stays false and nothing of MQTT runs.
 *
 * Names that become topic levels (gateway, topic_prefix) and the client id
 * are checked here, so no configuration can inject a level or a wildcard;
 * a device called status or write would collide with the gateway's own
 * topics and is refused when [mqtt] is present (JSON formats). So are the
 * Sparkplug ids (group_id, edge_node_id, primary_host_id): names, like the
 * gateway's, so none can hold '/', '+' or '#'.
 */
#include "config/internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool set_publish(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_format(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_prefix(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_gateway(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_client_id(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_noted_bool(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_sparkplug_id(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_enabled(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_protocol(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_session_expiry(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_brokers(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);
static bool set_ha_prefix(loader_t *ld, const key_spec_t *k, unsigned number, const char *value);

#define U(f, lo, hi) { .name = #f, .type = K_UINT, .offset = offsetof(north_config_t, f), .min = lo, .max = hi }
#define B(f) { .name = #f, .type = K_BOOL, .offset = offsetof(north_config_t, f) }
#define S(f, lo, cap) { .name = #f, .type = K_STRING, .offset = offsetof(north_config_t, f), .min = lo, .max = cap }
#define C(key, fn) { .name = key, .type = K_CUSTOM, .set = fn }
#define P(f) { .name = #f, .type = K_PATH, .offset = offsetof(north_config_t, f), .min = 1, .max = NORTH_PATH_MAX }

const key_spec_t config_mqtt_keys[] = {
    C("enabled", set_enabled),
    S(host, 1, NORTH_HOST_MAX),
    U(port, 1, 65535),
    C("client_id", set_client_id),
    S(username, 0, NORTH_ID_MAX),
    P(password_file),
    C("tls", set_noted_bool),
    P(ca_file),
    P(cert_file),
    P(key_file),
    B(verify),
    U(keepalive_s, 5, 3600),
    U(qos, 0, 1),
    U(status_qos, 0, 1),
    C("topic_prefix", set_prefix),
    C("gateway", set_gateway),
    C("publish", set_publish),
    { .name = "deadband", .type = K_DOUBLE, .offset = offsetof(north_config_t, deadband), .max = 1e12 },
    U(interval_ms, 100, 86400000),
    B(clean_session),
    C("format", set_format),
    U(buffer_messages, 1, 10000000),
    U(buffer_bytes, 65536, 4294967295.0),
    P(spool_dir),
    U(spool_max_bytes, 1048576, 4294967295.0),
    U(spool_fsync_ms, 0, 60000),
    U(max_write_bytes, 256, 1048576),
    U(max_write_items, 1, NORTH_WRITE_MAX_ITEMS),
    C("read_only", set_noted_bool),
    C("group_id", set_sparkplug_id),
    C("edge_node_id", set_sparkplug_id),
    C("primary_host_id", set_sparkplug_id),
    C("protocol", set_protocol),
    C("session_expiry_s", set_session_expiry),
    U(message_expiry_s, 0, 4294967295.0),
    C("brokers", set_brokers),
    B(ha_discovery),
    B(remote_config),
    U(max_config_bytes, 1024, 16777216),
    C("ha_prefix", set_ha_prefix),
};
_Static_assert(COUNT(config_mqtt_keys) == CONFIG_MQTT_KEYS, "CONFIG_MQTT_KEYS in config/internal.h");

void config_mqtt_open(loader_t *ld)
{
    ld->cfg->mqtt_enabled = true;
    ld->mqtt_line = ld->header_line;
    ld->cfg->mqtt = (north_config_t){ .keepalive_s = 30, .qos = 1, .status_qos = 1, .topic_prefix = "rtugw",
                                      .verify = true, .publish = NORTH_PUBLISH_CHANGE, .interval_ms = 1000,
                                      .clean_session = true, .format = NORTH_FORMAT_JSON,
                                      .buffer_messages = 10000, .buffer_bytes = 8u << 20,
                                      .spool_max_bytes = 64u << 20, .spool_fsync_ms = 1000,
                                      .max_write_bytes = 16384,
                                      .max_write_items = NORTH_WRITE_MAX_ITEMS, .protocol = 5,
                                      .session_expiry_s = 3600, .ha_prefix = "homeassistant",
                                      .max_config_bytes = 1u << 20 };
}

/* ---- keys with a vocabulary or a rule of their own --------------------------------- */

static bool parse_publish(loader_t *ld, const key_spec_t *k, const char *value, north_publish_mode_t *mode)
{
    if (strcmp(value, "change") == 0)
        *mode = NORTH_PUBLISH_CHANGE;
    else if (strcmp(value, "poll") == 0)
        *mode = NORTH_PUBLISH_POLL;
    else if (strcmp(value, "interval") == 0)
        *mode = NORTH_PUBLISH_INTERVAL;
    else {
        config_bad_value(ld, k->name, value,
                         "expected change (beyond deadband), poll (every poll) or interval (every interval_ms)");
        return false;
    }
    return true;
}

static bool set_publish(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    return parse_publish(ld, k, value, &ld->cfg->mqtt.publish);
}

/* [device NAME] mqtt_publish: that device's mode, over [mqtt] publish. */
bool config_mqtt_set_device_publish(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    config_device_t *dev = ld->target;
    north_publish_mode_t mode;
    (void)number;
    if (!parse_publish(ld, k, value, &mode))
        return false;
    dev->mqtt_publish = (int)mode;
    return true;
}

static bool set_format(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    (void)number;
    if (strcmp(value, "json") == 0)
        m->format = NORTH_FORMAT_JSON;
    else if (strcmp(value, "json-per-tag") == 0)
        m->format = NORTH_FORMAT_JSON_PER_TAG;
    else if (strcmp(value, "sparkplug") == 0)
        m->format = NORTH_FORMAT_SPARKPLUG;
    else {
        config_bad_value(ld, k->name, value, "expected json, json-per-tag or sparkplug (Sparkplug B)");
        return false;
    }
    return true;
}

/* Topic levels of printable characters, none empty, no wildcards. */
static bool valid_topic_prefix(const char *p)
{
    if (!*p || *p == '/' || p[strlen(p) - 1] == '/' || strstr(p, "//"))
        return false;
    for (; *p; p++)
        if (*p == '+' || *p == '#' || (unsigned char)*p <= 0x20 || *p == 0x7f)
            return false;
    return true;
}

static bool set_prefix(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    (void)number;
    if (strlen(value) >= sizeof m->topic_prefix || !valid_topic_prefix(value)) {
        config_bad_value(ld, k->name, value, "expected topic levels like rtugw or site1/rtugw: no '+', '#', "
                                             "spaces, empty levels or leading/trailing '/'");
        return false;
    }
    snprintf(m->topic_prefix, sizeof m->topic_prefix, "%s", value);
    return true;
}

static bool set_gateway(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    (void)number;
    ld->mqtt_gateway_set = true;
    if (!config_valid_name(value)) {
        config_bad_value(ld, k->name, value, "expected 1..31 letters, digits, '-', '_' or '.' (it is a topic level)");
        return false;
    }
    snprintf(m->gateway, sizeof m->gateway, "%s", value);
    return true;
}

/* A client id brokers take everywhere: printable ASCII, no spaces. */
static bool set_client_id(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    (void)number;
    ld->mqtt_client_id_set = true;
    bool ok = *value && strlen(value) < sizeof m->client_id;
    for (const char *c = value; ok && *c; c++)
        ok = (unsigned char)*c > 0x20 && (unsigned char)*c < 0x7f;
    if (!ok) {
        config_bad_value(ld, k->name, value, "expected 1..127 printable characters without spaces");
        return false;
    }
    snprintf(m->client_id, sizeof m->client_id, "%s", value);
    return true;
}

/* group_id, edge_node_id, primary_host_id: Sparkplug topic levels. */
static bool set_sparkplug_id(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    char *dst = strcmp(k->name, "group_id") == 0 ? m->group_id
                : strcmp(k->name, "edge_node_id") == 0 ? m->edge_node_id : m->primary_host_id;
    (void)number;
    if (dst == m->edge_node_id)
        ld->mqtt_edge_node_set = true;
    if (!config_valid_name(value)) {
        config_bad_value(ld, k->name, value, "expected 1..31 letters, digits, '-', '_' or '.' (a Sparkplug topic level)");
        return false;
    }
    snprintf(dst, NORTH_NAME_MAX, "%s", value);
    return true;
}

/* protocol: 5 (MQTT v5, the default) or 3.1.1. */
static bool set_protocol(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    (void)number;
    if (strcmp(value, "5") == 0 || strcmp(value, "5.0") == 0)
        ld->cfg->mqtt.protocol = 5;
    else if (strcmp(value, "3.1.1") == 0)
        ld->cfg->mqtt.protocol = 4;
    else {
        config_bad_value(ld, k->name, value, "expected 5 (MQTT v5, 3.1.1 where the broker refuses it) or 3.1.1");
        return false;
    }
    return true;
}

/* session_expiry_s: its default depends on clean_session (0 with a clean one). */
static bool set_session_expiry(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    static const key_spec_t spec = U(session_expiry_s, 0, 4294967295.0);
    (void)k;
    ld->mqtt_session_expiry_set = true;
    return config_set_key(ld, &spec, number, value);
}

/* brokers = host:port, host:port: 1..NORTH_BROKERS_MAX, each a host name or
 * address (IPv6 in brackets) and a port 1..65535; the port may be left out
 * (1883, 8883 with TLS: set after the file, when tls is known). */
static bool set_brokers(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    const char *p = value;
    (void)number;
    m->n_brokers = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, ",");
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        char item[NORTH_HOST_MAX + 16];
        if (len == 0 || len >= sizeof item || m->n_brokers == NORTH_BROKERS_MAX)
            goto bad;
        memcpy(item, p, len);
        item[len] = 0;
        struct north_broker *b = &m->brokers[m->n_brokers];
        char *colon = item[0] == '[' ? strstr(item, "]:") : strrchr(item, ':');
        char *host = item;
        b->port = 0;
        if (item[0] == '[') {   /* [v6]:port or [v6] */
            char *close = strchr(item, ']');
            if (!close || (close[1] && close[1] != ':'))
                goto bad;
            host = item + 1;
            *close = 0;
            colon = close[1] == ':' ? close + 1 : NULL;
        } else if (colon && strchr(item, ':') != colon) {
            goto bad;   /* a bare IPv6 address: brackets needed */
        }
        if (colon) {
            char *end;
            unsigned long port = strtoul(colon + 1, &end, 10);
            if (*end || port < 1 || port > 65535 || colon[1] == 0)
                goto bad;
            b->port = (unsigned)port;
            *colon = 0;
        }
        if (!host[0] || strlen(host) >= sizeof b->host || strpbrk(host, " \t/"))
            goto bad;
        snprintf(b->host, sizeof b->host, "%s", host);
        m->n_brokers++;
        p += strcspn(p, ",");
        if (*p == ',') {
            p++;
            if (!*p)
                goto bad;
        }
    }
    if (m->n_brokers)
        return true;
bad:
    config_bad_value(ld, k->name, value, "expected 1..8 brokers as host:port, separated by commas "
                                         "(an IPv6 address in brackets: [::1]:1883)");
    return false;
}

static bool set_ha_prefix(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    north_config_t *m = &ld->cfg->mqtt;
    (void)number;
    if (strlen(value) >= sizeof m->ha_prefix || !valid_topic_prefix(value)) {
        config_bad_value(ld, k->name, value, "expected topic levels like homeassistant: no '+', '#', spaces, "
                                             "empty levels or leading/trailing '/'");
        return false;
    }
    snprintf(m->ha_prefix, sizeof m->ha_prefix, "%s", value);
    return true;
}

/* tls and read_only: booleans whose default depends on other keys. */
static bool set_noted_bool(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    static const key_spec_t tls = B(tls), read_only = B(read_only);
    bool is_tls = strcmp(k->name, "tls") == 0;
    if (is_tls)
        ld->mqtt_tls_set = true;
    else
        ld->mqtt_read_only_set = true;
    return config_set_key(ld, is_tls ? &tls : &read_only, number, value);
}

/* enabled: a field of config_t, not of north_config_t (the section's target),
 * since a config without [mqtt] has it too; the header set it true. */
static bool set_enabled(loader_t *ld, const key_spec_t *k, unsigned number, const char *value)
{
    static const key_spec_t enabled = { .name = "enabled", .type = K_BOOL, .offset = offsetof(config_t, mqtt_enabled) };
    void *section = ld->target;
    (void)k;
    ld->target = ld->cfg;
    bool ok = config_set_key(ld, &enabled, number, value);
    ld->target = section;
    return ok;
}

/* ---- after the file ---------------------------------------------------------------- */

/* The host name, made a valid topic level: the default gateway name. */
static void host_name(char *buf, size_t cap)
{
    if (gethostname(buf, cap - 1) != 0 || !buf[0])
        snprintf(buf, cap, "rtugw");
    buf[cap - 1] = 0;
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || *c == '.'))
            *c = '-';
}

void config_mqtt_resolve(loader_t *ld)
{
    config_t *cfg = ld->cfg;
    north_config_t *m = &cfg->mqtt;
    unsigned line = ld->mqtt_line;
    char host[CONFIG_NAME_MAX];

    for (unsigned i = 0; i < cfg->device_count; i++) {
        const config_device_t *d = &cfg->devices[i];
        if ((d->mqtt_publish >= 0 || d->mqtt_interval_ms) && !cfg->mqtt_enabled)
            config_error_at(ld, d->line, "[device %s]: mqtt_publish and mqtt_interval_ms need an [mqtt] section",
                            d->name);
        else if (d->mqtt_interval_ms && d->mqtt_publish != NORTH_PUBLISH_INTERVAL)
            config_error_at(ld, d->line, "[device %s]: mqtt_interval_ms is set but mqtt_publish is not interval",
                            d->name);
    }
    if (!cfg->mqtt_enabled)
        return;
    if (m->n_brokers && m->host[0])
        config_error_at(ld, line, "[mqtt]: host and brokers are both set: brokers lists every broker, in order");
    else if (m->n_brokers)
        snprintf(m->host, sizeof m->host, "%s", m->brokers[0].host);
    if (!m->host[0])
        config_error_at(ld, line, "[mqtt]: host is required (the broker's name or address), or brokers (a list)");
    if (m->protocol != 5 && (m->message_expiry_s || ld->mqtt_session_expiry_set))
        config_error_at(ld, line, "[mqtt]: session_expiry_s and message_expiry_s need protocol = 5 (MQTT v5)");
    if (!ld->mqtt_tls_set)
        m->tls = m->ca_file[0] || m->cert_file[0];
    else if (!m->tls && (m->ca_file[0] || m->cert_file[0] || m->key_file[0]))
        config_error_at(ld, line, "[mqtt]: ca_file, cert_file or key_file is set but tls = false");
    if (!m->cert_file[0] != !m->key_file[0])
        config_error_at(ld, line, "[mqtt]: cert_file and key_file go together (a client certificate and its key)");
    if (m->spool_dir[0] && m->qos == 0)
        config_error_at(ld, line, "[mqtt]: spool_dir needs qos = 1 (QoS 0 publications are never buffered)");
    if (m->n_brokers && m->port)
        config_error_at(ld, line, "[mqtt]: port and brokers are both set: give each broker its port (host:port)");
    if (!m->port)
        m->port = m->tls ? 8883 : 1883;
    for (unsigned i = 0; i < m->n_brokers; i++)
        if (!m->brokers[i].port)
            m->brokers[i].port = m->tls ? 8883 : 1883;
    if (m->n_brokers)
        m->port = m->brokers[0].port;
    if (m->clean_session && !ld->mqtt_session_expiry_set)
        m->session_expiry_s = 0;   /* a clean session ends with the connection */
    if (!ld->mqtt_read_only_set)
        m->read_only = cfg->tcp.read_only;
    host_name(host, sizeof host);
    if (!ld->mqtt_gateway_set)
        snprintf(m->gateway, sizeof m->gateway, "%s", host);
    if (!ld->mqtt_client_id_set)
        snprintf(m->client_id, sizeof m->client_id, "rtugw-%s", host);
    if (m->ha_discovery && m->format != NORTH_FORMAT_JSON_PER_TAG)
        config_error_at(ld, line, "[mqtt]: ha_discovery needs format = json-per-tag (one state topic per entity)");
    if (m->format == NORTH_FORMAT_SPARKPLUG) {
        if (!m->group_id[0])
            config_error_at(ld, line, "[mqtt]: format = sparkplug needs group_id (spBv1.0/GROUP/...)");
        if (!m->clean_session)   /* 3.0: an edge node's CONNECT has Clean Session set */
            config_error_at(ld, line, "[mqtt]: format = sparkplug needs clean_session = true (Sparkplug 3.0)");
        if (!ld->mqtt_edge_node_set)
            snprintf(m->edge_node_id, sizeof m->edge_node_id, "%s", m->gateway);
        return;   /* the names below are JSON topics only */
    }
    if (m->group_id[0] || ld->mqtt_edge_node_set || m->primary_host_id[0])
        config_error_at(ld, line, "[mqtt]: group_id, edge_node_id and primary_host_id need format = sparkplug");
    /* PREFIX/GATEWAY/status, /write (and /config with remote_config) are the gateway's own. */
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (strcmp(cfg->devices[i].name, "status") == 0 || strcmp(cfg->devices[i].name, "write") == 0 ||
            (m->remote_config && strcmp(cfg->devices[i].name, "config") == 0))
            config_error_at(ld, cfg->devices[i].line, "[device %s]: the name is reserved with [mqtt] (topic %s/%s/%s)",
                            cfg->devices[i].name, m->topic_prefix, m->gateway, cfg->devices[i].name);
}
