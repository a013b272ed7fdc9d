/*
 * north/values.c -- the tag store and the data payloads.
 *
 * Every value handed over is kept per device and tag (the last value, its
 * quality, and the last one published), so the publish mode can decide:
 *   change    a tag goes out when it moved by more than the deadband since
 *             it was last published, changed kind or text, or changed
 *             quality (an error that appears, changes or clears);
 *   poll      every value, every time;
 *   interval  every interval_ms, each device's tags that were handed over
 *             since the previous tick, with their latest value.
 * The mode is the configuration's, or a device's own (north_define_device
 * with options: [device NAME] mqtt_publish); each device in interval mode
 * has a timer of its own.
 *
 * Payloads (docs/mqtt.md):
 *   json          PREFIX/GATEWAY/DEVICE/data
 *                 {"timestamp","gateway","device","seq","values":{..},"errors":{..}}
 *   json-per-tag  PREFIX/GATEWAY/DEVICE/TAG
 *                 {"value","unit","quality","timestamp","seq"} (+ "error" when bad)
 *   sparkplug     sparkplug.c builds the messages (DBIRTH/DDATA) from the
 *                 same decision: which tags go out, at which time.
 * Each message takes the next sequence number of the gateway. Every string
 * goes through json_quote().
 *
 * Every tag gets an alias when it is first seen, 1, 2, 3... over the whole
 * node in the order north_define_device (or the first value) named it:
 * Sparkplug's metric alias, stable for a configuration.
 */
#include "north/internal.h"
#include "json/json.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name that can stand as one topic level. */
static bool topic_name_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len >= NORTH_NAME_MAX)
        return false;
    for (; *s; s++)
        if (*s == '/' || *s == '+' || *s == '#' || (unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* Whole numbers (every register and bit) by hand: snprintf's %.0f goes
 * through the floating-point formatter, the largest cost of a message. */
static void format_integer(char *buf, int64_t v)
{
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)-v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *buf++ = '-';
    while (n)
        *buf++ = digits[--n];
    *buf = 0;
}

void values_format_number(char *buf, size_t cap, double v)
{
    if (!isfinite(v))
        snprintf(buf, cap, "null");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0 && cap >= 24)
        format_integer(buf, (int64_t)v);
    else {
        snprintf(buf, cap, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, cap, "%.17g", v);
    }
}

void values_add_quoted(struct evbuffer *b, const char *s)
{
    char small[JSON_QUOTED_MAX(64)];
    size_t need = json_quote(small, sizeof small, s);
    if (need < sizeof small) {
        evbuffer_add(b, small, need);
        return;
    }
    char *big = malloc(need + 1);
    if (big) {
        json_quote(big, need + 1, s);
        evbuffer_add(b, big, need);
        free(big);
    } else {
        evbuffer_add(b, small, strlen(small));
    }
}

static bool type_is_integer(north_type_t type)
{
    return type >= NORTH_TYPE_INT16 && type <= NORTH_TYPE_UINT64;
}

static bool type_is_unsigned(north_type_t type)
{
    return type == NORTH_TYPE_UINT16 || type == NORTH_TYPE_UINT32 || type == NORTH_TYPE_UINT64;
}

#define ADD_LITERAL(b, text) evbuffer_add((b), (text), sizeof(text) - 1)

static void add_integer(struct evbuffer *b, uint64_t v)
{
    char digits[24];
    size_t n = sizeof digits;
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    evbuffer_add(b, digits + n, sizeof digits - n);
}

static void add_signed(struct evbuffer *b, int64_t v)
{
    if (v < 0)
        evbuffer_add(b, "-", 1);
    add_integer(b, v < 0 ? 0u - (uint64_t)v : (uint64_t)v);
}

static void add_value(struct evbuffer *b, const north_tag_t *t)
{
    char num[40];
    switch (t->kind) {
    case NORTH_NUMBER:
        if (t->text && isfinite(t->number))   /* the tag's own text (tags_format); no "nan" in JSON */
            evbuffer_add(b, t->text, strlen(t->text));
        else if (type_is_unsigned(t->type))
            add_integer(b, t->u);        /* all 64 bits exactly */
        else if (type_is_integer(t->type))
            add_signed(b, t->i);
        else {
            values_format_number(num, sizeof num, t->number);
            evbuffer_add(b, num, strlen(num));
        }
        break;
    case NORTH_BOOL:
        if (t->flag)
            ADD_LITERAL(b, "true");
        else
            ADD_LITERAL(b, "false");
        break;
    case NORTH_STRING:
        values_add_quoted(b, t->text ? t->text : "");
        break;
    }
}

void values_add_one(struct evbuffer *b, const north_value_t *v)
{
    north_tag_t t = { .kind = v->kind, .type = v->type, .number = v->number, .i = v->i, .u = v->u,
                      .flag = v->flag, .text = (char *)v->text };
    add_value(b, &t);
}

/* ---- the store ----------------------------------------------------------------------- */

static void tag_free(void *p)
{
    north_tag_t *t = p;
    free(t->name);
    free(t->unit);
    free(t->text);
    free(t->p_text);
    free(t);
}

static void device_free(void *p)
{
    north_device_t *d = p;
    if (d->ev_interval)
        event_free(d->ev_interval);
    map_free(&d->tags, tag_free);
    free(d->list);
    free(d->pick);
    free(d);
}

static void on_interval(evutil_socket_t fd, short what, void *arg);

/* Sets d's publish mode; interval mode (re)starts its timer. 0 or -ENOMEM. */
static int device_mode(north_device_t *d, north_publish_mode_t mode, unsigned interval_ms)
{
    if (d->ev_interval)
        event_free(d->ev_interval);
    d->ev_interval = NULL;
    d->publish = mode;
    d->interval_ms = interval_ms ? interval_ms : d->north->cfg.interval_ms;
    if (mode != NORTH_PUBLISH_INTERVAL)
        return 0;
    struct timeval tv = { d->interval_ms / 1000, (d->interval_ms % 1000) * 1000 };
    if (!(d->ev_interval = event_new(d->north->base, -1, EV_PERSIST, on_interval, d)) ||
        event_add(d->ev_interval, &tv) != 0)
        return -ENOMEM;
    return 0;
}

static north_device_t *device_get(north_t *n, const char *name)
{
    north_device_t *d = map_get(&n->devices, name);
    if (d)
        return d;
    if (n->n_devices == n->cap_devices) {
        size_t cap = n->cap_devices ? n->cap_devices * 2 : 16;
        north_device_t **bigger = realloc(n->device_list, cap * sizeof *bigger);
        if (!bigger)
            return NULL;
        n->device_list = bigger;
        n->cap_devices = cap;
    }
    if (!(d = calloc(1, sizeof *d)))
        return NULL;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->north = n;
    d->sp_up = -1;
    if (device_mode(d, n->cfg.publish, n->cfg.interval_ms) != 0 || map_put(&n->devices, name, d) != 0) {
        if (d->ev_interval)
            event_free(d->ev_interval);
        free(d);
        return NULL;
    }
    n->device_list[n->n_devices++] = d;
    return d;
}

static north_tag_t *tag_get(north_t *n, north_device_t *d, const char *name)
{
    north_tag_t *t = map_get(&d->tags, name);
    if (t)
        return t;
    if (n->n_tags >= NORTH_MAX_TAGS) {
        if (!n->warned_tags)
            north_log(n, 1, "mqtt: more than %u tags; values of further tags are not published", NORTH_MAX_TAGS);
        n->warned_tags = true;
        return NULL;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        north_tag_t **bigger = realloc(d->list, cap * sizeof *bigger);
        north_tag_t **pick = realloc(d->pick, cap * sizeof *pick);
        if (bigger)
            d->list = bigger;
        if (pick)
            d->pick = pick;
        if (!bigger || !pick)
            return NULL;
        d->cap = cap;
    }
    if (!(t = calloc(1, sizeof *t)) || !(t->name = strdup(name)) || map_put(&d->tags, name, t) != 0) {
        if (t)
            free(t->name);
        free(t);
        return NULL;
    }
    d->list[d->n++] = t;
    n->n_tags++;
    t->alias = ++n->next_alias;
    return t;
}

static int set_string(char **dst, const char *src)
{
    if (!src) {
        free(*dst);
        *dst = NULL;
        return 0;
    }
    if (*dst && strcmp(*dst, src) == 0)
        return 0;
    char *copy = strdup(src);
    if (!copy)
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

static int tag_update(north_tag_t *t, const north_value_t *v)
{
    t->kind = v->kind;
    t->type = v->type;
    t->number = v->number;
    t->i = v->i;
    t->u = v->u;
    t->flag = v->flag;
    t->stale = v->stale;
    t->has_deadband = v->has_deadband;
    t->deadband = v->deadband;
    snprintf(t->error, sizeof t->error, "%s", v->error ? v->error : "");
    t->fresh = true;
    if (set_string(&t->unit, v->unit) != 0)
        return -ENOMEM;
    return set_string(&t->text, v->kind == NORTH_STRING ? (v->text ? v->text : "")
                                : v->kind == NORTH_NUMBER ? v->number_text : NULL);
}

static bool tag_changed(const north_t *n, const north_tag_t *t)
{
    if (t->force || !t->published || strcmp(t->error, t->p_error) != 0 || t->kind != t->p_kind || t->stale != t->p_stale)
        return true;
    if (t->error[0])
        return false;
    double deadband = t->has_deadband ? t->deadband : n->cfg.deadband;
    switch (t->kind) {
    case NORTH_NUMBER:
        if (deadband == 0 && type_is_integer(t->type))
            return t->i != t->p_i || t->u != t->p_u;   /* 64-bit counters: every step is a change */
        return isnan(t->number) != isnan(t->p_number) || fabs(t->number - t->p_number) > deadband;
    case NORTH_BOOL:
        return t->flag != t->p_flag;
    case NORTH_STRING:
        return strcmp(t->text ? t->text : "", t->p_text ? t->p_text : "") != 0;
    }
    return true;
}

void values_mark_published(north_tag_t *t)
{
    t->published = true;
    t->force = false;
    t->p_kind = t->kind;
    t->p_number = t->number;
    t->p_i = t->i;
    t->p_u = t->u;
    t->p_flag = t->flag;
    t->p_stale = t->stale;
    snprintf(t->p_error, sizeof t->p_error, "%s", t->error);
    if (set_string(&t->p_text, t->text) != 0)
        t->published = false;   /* out of memory: it goes out again next time */
    t->fresh = false;
}

/* ---- messages -------------------------------------------------------------------------- */

static void json_message(north_t *n, struct evbuffer *b, const north_device_t *d, north_tag_t **tags, size_t k,
                         uint64_t ts)
{
    ADD_LITERAL(b, "{\"timestamp\":");
    add_integer(b, ts);
    ADD_LITERAL(b, ",\"gateway\":");
    values_add_quoted(b, n->cfg.gateway);
    ADD_LITERAL(b, ",\"device\":");
    values_add_quoted(b, d->name);
    ADD_LITERAL(b, ",\"seq\":");
    add_integer(b, n->seq);
    ADD_LITERAL(b, ",\"values\":{");
    bool first = true;
    for (size_t i = 0; i < k; i++) {
        if (tags[i]->error[0])
            continue;
        evbuffer_add(b, ",", !first);
        values_add_quoted(b, tags[i]->name);
        evbuffer_add(b, ":", 1);
        add_value(b, tags[i]);
        first = false;
    }
    ADD_LITERAL(b, "},\"errors\":{");
    first = true;
    for (size_t i = 0; i < k; i++) {
        if (!tags[i]->error[0])
            continue;
        evbuffer_add(b, ",", !first);
        values_add_quoted(b, tags[i]->name);
        evbuffer_add(b, ":", 1);
        values_add_quoted(b, tags[i]->error);
        first = false;
    }
    ADD_LITERAL(b, "}}");
}

static void tag_message(north_t *n, struct evbuffer *b, const north_tag_t *t, uint64_t ts)
{
    ADD_LITERAL(b, "{\"value\":");
    if (t->error[0])
        ADD_LITERAL(b, "null");
    else
        add_value(b, t);
    ADD_LITERAL(b, ",\"unit\":");
    if (t->unit)
        values_add_quoted(b, t->unit);
    else
        ADD_LITERAL(b, "null");
    if (t->error[0])
        ADD_LITERAL(b, ",\"quality\":\"bad\"");
    else if (t->stale)
        ADD_LITERAL(b, ",\"quality\":\"stale\"");
    else
        ADD_LITERAL(b, ",\"quality\":\"good\"");
    if (t->error[0]) {
        ADD_LITERAL(b, ",\"error\":");
        values_add_quoted(b, t->error);
    }
    ADD_LITERAL(b, ",\"timestamp\":");
    add_integer(b, ts);
    ADD_LITERAL(b, ",\"seq\":");
    add_integer(b, n->seq);
    ADD_LITERAL(b, "}");
}

static void send_buffer(north_t *n, const char *topic, struct evbuffer *b)
{
    size_t len = evbuffer_get_length(b);
    const unsigned char *p = evbuffer_pullup(b, -1);
    if (p)
        queue_publish(n, topic, p, len, (int)n->cfg.qos, false, n->seq);
    else
        n->st.dropped++;
    evbuffer_drain(b, len);
}

/* k tags of d, published as cfg->format says, each message its own seq. */
static void emit(north_t *n, north_device_t *d, north_tag_t **tags, size_t k, uint64_t ts)
{
    char topic[NORTH_PREFIX_MAX + 3 * NORTH_NAME_MAX + 8];
    struct evbuffer *b = n->scratch;

    if (n->cfg.format == NORTH_FORMAT_SPARKPLUG) {
        sparkplug_emit(n, d, tags, k, ts);   /* marks them published; k = 0 may still be a DBIRTH */
        return;
    }
    if (k == 0)
        return;
    if (n->cfg.format == NORTH_FORMAT_JSON) {
        n->seq++;
        snprintf(topic, sizeof topic, "%s/%s/%s/data", n->cfg.topic_prefix, n->cfg.gateway, d->name);
        json_message(n, b, d, tags, k, ts);
        send_buffer(n, topic, b);
    } else {
        for (size_t i = 0; i < k; i++) {
            n->seq++;
            snprintf(topic, sizeof topic, "%s/%s/%s/%s", n->cfg.topic_prefix, n->cfg.gateway, d->name,
                     tags[i]->name);
            tag_message(n, b, tags[i], ts);
            send_buffer(n, topic, b);
        }
    }
    for (size_t i = 0; i < k; i++)
        values_mark_published(tags[i]);
}

int values_define_device(north_t *n, const char *device, const north_metric_def_t *defs, size_t count,
                         const north_device_opts_t *opts)
{
    if (!topic_name_ok(device))
        return -EINVAL;
    for (size_t i = 0; i < count; i++)
        if (!defs[i].tag || !topic_name_ok(defs[i].tag))
            return -EINVAL;
    north_device_t *d = device_get(n, device);
    if (!d || (opts && device_mode(d, opts->publish, opts->interval_ms) != 0))
        return -ENOMEM;
    /* Defined again after a reload: a tag new to a device already born was in
     * no DBIRTH, and a host cannot know its alias; values_define_done has the
     * device born again (Sparkplug's rebirth), naming every metric. */
    size_t before = d->n;
    for (size_t i = 0; i < count; i++) {
        north_tag_t *t = tag_get(n, d, defs[i].tag);
        if (!t || set_string(&t->unit, defs[i].unit) != 0)
            return -ENOMEM;
        t->def_round = n->def_round;
        t->type = defs[i].type;
        t->kind = defs[i].type == NORTH_TYPE_BOOL ? NORTH_BOOL : defs[i].type == NORTH_TYPE_STRING ? NORTH_STRING
                                                                                                   : NORTH_NUMBER;
        t->writable = defs[i].writable;
        t->poll_item = defs[i].poll_item;
        if (!t->published && !t->fresh)
            snprintf(t->error, sizeof t->error, "not read yet");
    }
    if (d->n != before)
        d->set_changed = true;
    return 0;
}

/* Drops the tags of d that were defined in an earlier round and not in this
 * one, keeping the order of the others; the name map is rebuilt (it has no
 * delete; a reload is rare). true when one went. */
static bool drop_undefined(north_t *n, north_device_t *d)
{
    size_t kept = 0;
    for (size_t i = 0; i < d->n; i++) {
        north_tag_t *t = d->list[i];
        if (t->def_round == 0 || t->def_round == n->def_round)
            d->list[kept++] = t;
        else {
            north_log(n, 3, "mqtt: %s/%s is no longer defined: forgotten", d->name, t->name);
            discovery_remove(n, d, t);
            tag_free(t);
            n->n_tags--;
        }
    }
    if (kept == d->n)
        return false;
    d->n = kept;
    map_free(&d->tags, NULL);
    for (size_t i = 0; i < kept; i++)
        if (map_put(&d->tags, d->list[i]->name, d->list[i]) != 0)
            north_log(n, 0, "mqtt: out of memory rebuilding the tags of %s", d->name);
    return true;
}

/* The end of a define round. Every device's set is compared with what the
 * round named: a removed or renamed tag must leave the device's DBIRTH (a
 * host keeps every metric a DBIRTH named until the device's DDEATH), and a
 * new one must enter it, so either is a DDEATH now and a DBIRTH with the
 * device's next values; with no tag left there is nothing to be born. */
void values_define_done(north_t *n)
{
    for (size_t i = 0; i < n->n_devices; i++) {
        north_device_t *d = n->device_list[i];
        bool changed = drop_undefined(n, d) | d->set_changed;
        d->set_changed = false;
        if (!changed)
            continue;
        if (d->n == 0)
            d->sp_has_values = false;
        if (n->cfg.format == NORTH_FORMAT_SPARKPLUG)
            sparkplug_device_reset(n, d);
    }
    discovery_announce(n);   /* every defined tag: retained, so an unchanged one costs the broker nothing */
    n->def_round++;
}

int values_publish(north_t *n, const char *device, uint64_t timestamp_ms, const north_value_t *v, size_t count)
{
    if (!topic_name_ok(device))
        return -EINVAL;
    for (size_t i = 0; i < count; i++)
        if (!v[i].tag || !topic_name_ok(v[i].tag))
            return -EINVAL;
    north_device_t *d = device_get(n, device);
    if (!d)
        return -ENOMEM;
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        north_tag_t *t = tag_get(n, d, v[i].tag);
        if (!t || tag_update(t, &v[i]) != 0) {
            rc = -ENOMEM;
            continue;
        }
        n->st.values++;
        if (d->publish == NORTH_PUBLISH_POLL || (d->publish == NORTH_PUBLISH_CHANGE && tag_changed(n, t)))
            d->pick[k++] = t;
    }
    d->fresh = true;
    d->sp_has_values = true;
    d->timestamp_ms = timestamp_ms;
    if (d->publish != NORTH_PUBLISH_INTERVAL)
        emit(n, d, d->pick, k, timestamp_ms);
    return rc;
}

north_device_t *values_find_device(north_t *n, const char *name)
{
    return map_get(&n->devices, name);
}

north_tag_t *values_find_tag(north_device_t *d, const char *name, uint64_t alias)
{
    if (name)
        return map_get(&d->tags, name);
    for (size_t i = 0; i < d->n; i++)
        if (d->list[i]->alias == alias)
            return d->list[i];
    return NULL;
}

/* A device's interval tick: its tags handed over since the last one. */
static void on_interval(evutil_socket_t fd, short what, void *arg)
{
    north_device_t *d = arg;
    size_t k = 0;
    (void)fd;
    (void)what;
    if (!d->fresh)
        return;
    for (size_t j = 0; j < d->n; j++)
        if (d->list[j]->fresh)
            d->pick[k++] = d->list[j];
    emit(d->north, d, d->pick, k, d->timestamp_ms);
    d->fresh = false;
}

int values_start(north_t *n)
{
    n->def_round = 1;
    return (n->scratch = evbuffer_new()) ? 0 : -ENOMEM;
}

void values_free(north_t *n)
{
    if (n->scratch)
        evbuffer_free(n->scratch);
    n->scratch = NULL;
    map_free(&n->devices, device_free);
    free(n->device_list);
    n->device_list = NULL;
    n->n_devices = n->cap_devices = n->n_tags = 0;
}
