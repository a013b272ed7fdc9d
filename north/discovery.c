/*
 * north/discovery.c -- [mqtt] ha_discovery = on: Home Assistant's MQTT
 * discovery (docs/mqtt.md). Each defined tag becomes one entity, announced
 * by a retained document on
 *   HA_PREFIX/COMPONENT/GATEWAY_DEVICE_TAG/config
 * (characters outside [A-Za-z0-9_-] become '_'), the component by what the
 * tag is: a bool is a binary_sensor, or a switch when writable; a writable
 * number is a number; everything else a sensor. The document names:
 *   - state_topic: the tag's json-per-tag topic PREFIX/GATEWAY/DEVICE/TAG
 *     (ha_discovery needs format = json-per-tag: one topic per entity, which
 *     carries the entity's value in every message) and value_template;
 *   - unit_of_measurement, and a device_class (with state_class
 *     measurement, or total_increasing for energy) where the unit implies
 *     one (V voltage, A current, W power, Wh energy, Hz frequency, °C
 *     temperature...);
 *   - availability: the gateway's status and the device's status, both
 *     retained, both needed (availability_mode all);
 *   - writable tags: command_topic PREFIX/GATEWAY/write with a
 *     command_template (number) or payload_on/payload_off (switch) in the
 *     write request's own JSON; a number's min/max are its type's range;
 *   - device: one per rtugw device, via_device the gateway.
 * When: after each define round (start, reload: values_define_done), and
 * when Home Assistant says it is online on HA_PREFIX/status (its birth: a
 * broker that lost its retained messages gets them again). A tag the round
 * removed gets an empty retained message on its topic, which removes the
 * entity. Every document is QoS 1, retained, through the queue (so one made
 * while the broker is away goes out when it is back).
 */
#include "north/internal.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#define DISC_TOPIC_MAX (NORTH_PREFIX_MAX + 3 * NORTH_NAME_MAX + 32)

static bool is_bool(const north_tag_t *t)
{
    return t->type == NORTH_TYPE_BOOL || (t->type == NORTH_TYPE_AUTO && t->kind == NORTH_BOOL);
}

static bool is_number(const north_tag_t *t)
{
    return t->type != NORTH_TYPE_STRING && !is_bool(t) && t->kind != NORTH_STRING;
}

static const char *component(const north_tag_t *t)
{
    if (is_bool(t))
        return t->writable ? "switch" : "binary_sensor";
    if (t->writable && is_number(t))
        return "number";
    return "sensor";
}

/* Home Assistant's sensor device classes a unit implies (its documented
 * units for each class); NULL: none. */
static const char *device_class(const char *unit, const char **state_class)
{
    static const struct { const char *unit, *cls; } map[] = {
        { "V", "voltage" }, { "mV", "voltage" }, { "kV", "voltage" },
        { "A", "current" }, { "mA", "current" },
        { "W", "power" }, { "kW", "power" }, { "MW", "power" },
        { "VA", "apparent_power" }, { "kVA", "apparent_power" }, { "var", "reactive_power" }, { "kvar", "reactive_power" },
        { "Wh", "energy" }, { "kWh", "energy" }, { "MWh", "energy" },
        { "Hz", "frequency" }, { "kHz", "frequency" },
        { "°C", "temperature" }, { "degC", "temperature" }, { "°F", "temperature" }, { "K", "temperature" },
        { "Pa", "pressure" }, { "hPa", "pressure" }, { "kPa", "pressure" }, { "bar", "pressure" }, { "mbar", "pressure" },
        { "psi", "pressure" },
    };
    *state_class = "measurement";
    if (!unit)
        return NULL;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(unit, map[i].unit) == 0) {
            if (strcmp(map[i].cls, "energy") == 0)
                *state_class = "total_increasing";
            return map[i].cls;
        }
    return NULL;
}

/* A number entity's range: its type's. */
static void range(const north_tag_t *t, double *min, double *max, double *step)
{
    *step = 1;
    switch (t->type) {
    case NORTH_TYPE_INT16: *min = -32768; *max = 32767; return;
    case NORTH_TYPE_UINT16: *min = 0; *max = 65535; return;
    case NORTH_TYPE_INT32: *min = -2147483648.0; *max = 2147483647.0; return;
    case NORTH_TYPE_UINT32: *min = 0; *max = 4294967295.0; return;
    case NORTH_TYPE_UINT64: *min = 0; *max = 1e15; return;
    case NORTH_TYPE_INT64: *min = -1e15; *max = 1e15; return;
    default: *min = -1e15; *max = 1e15; *step = 0.001; return;   /* floats, scaled values: the codec checks */
    }
}

/* ids: GATEWAY_DEVICE_TAG with what an object id cannot hold as '_'. */
static void object_id(const north_t *n, const north_device_t *d, const north_tag_t *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_%s_%s", n->cfg.gateway, d->name, t->name);
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            *c = '_';
}

static void topic_of(const north_t *n, const north_device_t *d, const north_tag_t *t, char *buf, size_t cap)
{
    char id[3 * NORTH_NAME_MAX + 4];
    object_id(n, d, t, id, sizeof id);
    snprintf(buf, cap, "%s/%s/%s/config", n->cfg.ha_prefix, component(t), id);
}

#define KEY(b, k) evbuffer_add_printf((b), ",\"%s\":", (k))

/* A write request for d/t, as command_template or payload: value as given. */
static void add_write(struct evbuffer *b, const north_device_t *d, const north_tag_t *t, const char *value)
{
    struct evbuffer *w = evbuffer_new();
    if (!w)
        return;
    evbuffer_add_printf(w, "{\"uuid\":\"homeassistant\",\"device\":");
    values_add_quoted(w, d->name);
    evbuffer_add_printf(w, ",\"tag\":");
    values_add_quoted(w, t->name);
    evbuffer_add_printf(w, ",\"value\":%s}", value);
    evbuffer_add(w, "", 1);
    values_add_quoted(b, (const char *)evbuffer_pullup(w, -1));
    evbuffer_free(w);
}

static void document(north_t *n, struct evbuffer *b, const north_device_t *d, const north_tag_t *t)
{
    char id[3 * NORTH_NAME_MAX + 4], buf[DISC_TOPIC_MAX];
    const char *comp = component(t), *state_class;
    object_id(n, d, t, id, sizeof id);
    evbuffer_add_printf(b, "{\"name\":");
    values_add_quoted(b, t->name);
    evbuffer_add_printf(b, ",\"unique_id\":\"rtugw_%s\",\"object_id\":\"%s\"", id, id);
    snprintf(buf, sizeof buf, "%s/%s/%s/%s", n->cfg.topic_prefix, n->cfg.gateway, d->name, t->name);
    KEY(b, "state_topic");
    values_add_quoted(b, buf);
    if (is_bool(t))
        evbuffer_add_printf(b, ",\"value_template\":\"{{ 'ON' if value_json.value else 'OFF' }}\"");
    else
        evbuffer_add_printf(b, ",\"value_template\":\"{{ value_json.value }}\"");
    if (is_number(t) && t->unit && t->unit[0]) {
        KEY(b, "unit_of_measurement");
        values_add_quoted(b, t->unit);
        const char *cls = device_class(t->unit, &state_class);
        if (cls && strcmp(comp, "sensor") == 0)
            evbuffer_add_printf(b, ",\"device_class\":\"%s\",\"state_class\":\"%s\"", cls, state_class);
        else if (cls && strcmp(comp, "number") == 0)
            evbuffer_add_printf(b, ",\"device_class\":\"%s\"", cls);
    } else if (is_number(t) && strcmp(comp, "sensor") == 0) {
        evbuffer_add_printf(b, ",\"state_class\":\"measurement\"");
    }
    snprintf(buf, sizeof buf, "%s/%s/write", n->cfg.topic_prefix, n->cfg.gateway);
    if (strcmp(comp, "number") == 0) {
        double min, max, step;
        range(t, &min, &max, &step);
        KEY(b, "command_topic");
        values_add_quoted(b, buf);
        KEY(b, "command_template");
        add_write(b, d, t, "{{ value }}");
        evbuffer_add_printf(b, ",\"min\":%.17g,\"max\":%.17g,\"step\":%g,\"mode\":\"box\"", min, max, step);
    } else if (strcmp(comp, "switch") == 0) {
        KEY(b, "command_topic");
        values_add_quoted(b, buf);
        KEY(b, "payload_on");
        add_write(b, d, t, "true");
        KEY(b, "payload_off");
        add_write(b, d, t, "false");
        evbuffer_add_printf(b, ",\"state_on\":\"ON\",\"state_off\":\"OFF\"");
    }
    /* available while the gateway is online and the device answers */
    evbuffer_add_printf(b, ",\"availability_mode\":\"all\",\"availability\":[{\"topic\":");
    values_add_quoted(b, n->topic_status);
    evbuffer_add_printf(b, ",\"value_template\":\"{{ 'online' if value_json.online else 'offline' }}\"},{\"topic\":");
    snprintf(buf, sizeof buf, "%s/%s/%s/status", n->cfg.topic_prefix, n->cfg.gateway, d->name);
    values_add_quoted(b, buf);
    evbuffer_add_printf(b, ",\"value_template\":\"{{ 'online' if value_json.online else 'offline' }}\"}]");
    evbuffer_add_printf(b, ",\"device\":{\"identifiers\":[\"rtugw_%s_", n->cfg.gateway);
    evbuffer_add_printf(b, "%s\"],\"name\":", d->name);   /* names are topic levels: no '"' or '\\' */
    values_add_quoted(b, d->name);
    evbuffer_add_printf(b, ",\"manufacturer\":\"rtugw\",\"model\":\"Modbus device\",\"via_device\":\"rtugw_%s\"}}",
                        n->cfg.gateway);
}

static void publish(north_t *n, const char *topic, struct evbuffer *b)
{
    size_t len = evbuffer_get_length(b);
    const unsigned char *p = len ? evbuffer_pullup(b, -1) : (const unsigned char *)"";
    if (p)
        queue_publish(n, topic, p, len, 1, true, 0);
    evbuffer_drain(b, len);
}

void discovery_remove(north_t *n, const north_device_t *d, const north_tag_t *t)
{
    char topic[DISC_TOPIC_MAX];
    if (!n->cfg.ha_discovery || !t->def_round || t->poll_item)
        return;
    topic_of(n, d, t, topic, sizeof topic);
    evbuffer_drain(n->scratch, evbuffer_get_length(n->scratch));
    publish(n, topic, n->scratch);   /* empty and retained: the entity goes */
}

void discovery_announce(north_t *n)
{
    char topic[DISC_TOPIC_MAX];
    if (!n->cfg.ha_discovery)
        return;
    struct evbuffer *b = n->scratch;
    for (size_t i = 0; i < n->n_devices; i++) {
        north_device_t *d = n->device_list[i];
        for (size_t j = 0; j < d->n; j++) {
            north_tag_t *t = d->list[j];
            if (!t->def_round || t->poll_item)
                continue;   /* poll-group values: not tags, not announced */
            topic_of(n, d, t, topic, sizeof topic);
            evbuffer_drain(b, evbuffer_get_length(b));
            document(n, b, d, t);
            publish(n, topic, b);
        }
    }
}

bool discovery_on_message(north_t *n, const char *topic, const void *payload, size_t len)
{
    char status[NORTH_PREFIX_MAX + 8];
    if (!n->cfg.ha_discovery)
        return false;
    snprintf(status, sizeof status, "%s/status", n->cfg.ha_prefix);
    if (strcmp(topic, status) != 0)
        return false;
    if (len == 6 && memcmp(payload, "online", 6) == 0) {
        north_log(n, 2, "mqtt: Home Assistant is online: discovery documents again");
        discovery_announce(n);
    }
    return true;
}

void discovery_subscribe(north_t *n)
{
    char status[NORTH_PREFIX_MAX + 8];
    if (!n->cfg.ha_discovery)
        return;
    snprintf(status, sizeof status, "%s/status", n->cfg.ha_prefix);
    client_subscribe(n, status);
}
